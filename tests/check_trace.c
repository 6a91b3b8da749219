/* Check suite for engine/trace.c (the Chrome trace): the file parses as JSON with its strings
 * escaped; times are whole nanoseconds, so that on every track of the 70B FSDP trace no slice
 * overlaps the next (read back exactly from the decimal text, as Perfetto rounds it); flows link
 * every collective's members and every send to its receive, counted from the schedule itself. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/report.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

static char *srcpath(const char *rel)
{
    static char buf[1024];
    const char *top = getenv("top_srcdir");
    snprintf(buf, sizeof buf, "%s/%s", top ? top : ".", rel);
    return buf;
}

/* A trace in memory. */
typedef struct trace_text {
    char *text;
    size_t len;
} trace_text;

/* "12.345" (microseconds, exactly three decimals, the writer's format) -> 12345 ns; -1 when the
 * text is not in that form. *end points past the number. */
static int64_t parse_us(const char *p, const char **end)
{
    int64_t whole = 0;
    const char *q = p;
    if (*q < '0' || *q > '9')
        return -1;
    while (*q >= '0' && *q <= '9')
        whole = whole * 10 + (*q++ - '0');
    if (q[0] != '.' || q[1] < '0' || q[1] > '9' || q[2] < '0' || q[2] > '9' || q[3] < '0' || q[3] > '9')
        return -1;
    if (q[4] >= '0' && q[4] <= '9')
        return -1;
    *end = q + 4;
    return whole * 1000 + (q[1] - '0') * 100 + (q[2] - '0') * 10 + (q[3] - '0');
}

/* One slice read back from the text. */
typedef struct slice {
    uint64_t pid;
    int tid;
    int64_t a, b; /* ns */
    char name[96];
    int collective, p2p;
} slice;

/* One flow point read back. */
typedef struct flow_pt {
    char ph;
    uint64_t id, pid;
    int tid;
    int64_t ts;
    int p2p;
} flow_pt;

typedef struct parsed {
    slice *s;
    size_t ns;
    flow_pt *f;
    size_t nf;
} parsed;

static void parse_trace(const trace_text *t, parsed *out)
{
    memset(out, 0, sizeof *out);
    size_t cap_s = 1024, cap_f = 1024;
    out->s = malloc(cap_s * sizeof *out->s);
    out->f = malloc(cap_f * sizeof *out->f);
    ck_assert(out->s && out->f);
    char line[1024]; /* sscanf measures its whole input string: one line at a time */
    for (const char *at = t->text; at && *at;) {
        const char *nl = strchr(at, '\n');
        size_t n = nl ? (size_t)(nl - at) : strlen(at);
        ck_assert_uint_lt(n, sizeof line);
        memcpy(line, at, n);
        line[n] = '\0';
        at = nl ? nl + 1 : NULL;
        char ph;
        if (sscanf(line, "{\"ph\": \"%c\"", &ph) != 1)
            continue;
        const char *p, *end;
        if (ph == 'X') {
            slice sl = {0};
            ck_assert_msg(sscanf(line, "{\"ph\": \"X\", \"pid\": %" SCNu64 ", \"tid\": %d,", &sl.pid, &sl.tid) == 2,
                          "%.120s", line);
            p = strstr(line, "\"ts\": ");
            ck_assert_ptr_nonnull(p);
            sl.a = parse_us(p + 6, &end);
            ck_assert_msg(sl.a >= 0 && strncmp(end, ", \"dur\": ", 9) == 0, "%.120s", line);
            int64_t d = parse_us(end + 9, &end);
            ck_assert_msg(d >= 0, "%.120s", line);
            sl.b = sl.a + d;
            ck_assert_int_eq(sscanf(end, ", \"name\": \"%95[^\"]\"", sl.name), 1);
            sl.collective = strstr(line, "\"group\": ") != NULL;
            sl.p2p = strstr(line, "\"peer\": ") != NULL;
            if (out->ns == cap_s)
                ck_assert_ptr_nonnull(out->s = realloc(out->s, (cap_s *= 2) * sizeof *out->s));
            out->s[out->ns++] = sl;
        } else if (ph == 's' || ph == 't' || ph == 'f') {
            flow_pt fp = {ph, 0, 0, 0, 0, 0};
            char cat[16];
            ck_assert_int_eq(sscanf(line, "{\"ph\": \"%*c\", \"id\": %" SCNu64 ", \"cat\": \"%15[^\"]\"", &fp.id, cat),
                             2);
            fp.p2p = strcmp(cat, "p2p") == 0;
            p = strstr(line, "\"pid\": ");
            ck_assert_ptr_nonnull(p);
            ck_assert_int_eq(sscanf(p, "\"pid\": %" SCNu64 ", \"tid\": %d", &fp.pid, &fp.tid), 2);
            p = strstr(p, "\"ts\": ");
            ck_assert_ptr_nonnull(p);
            fp.ts = parse_us(p + 6, &end);
            ck_assert_msg(fp.ts >= 0, "%.120s", line);
            ck_assert_msg(strncmp(end, ", \"bp\": \"e\"}", 12) == 0, "flow not bound to its enclosing slice: %.120s",
                          line);
            if (out->nf == cap_f)
                ck_assert_ptr_nonnull(out->f = realloc(out->f, (cap_f *= 2) * sizeof *out->f));
            out->f[out->nf++] = fp;
        }
    }
}

static void parsed_free(parsed *p)
{
    free(p->s);
    free(p->f);
}

static int slice_cmp(const void *x, const void *y)
{
    const slice *a = x, *b = y;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid - b->tid;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* Simulates the scenario file and returns its trace text; *sch_out and *timing_out when not
 * NULL (free with gs_sim_timed_free). */
static void simulate_trace(const char *rel, int exact, trace_text *t, gs_schedule **sch_out, gs_timing ***timing_out)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_report rep;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_file(srcpath(rel), &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    FILE *f = open_memstream(&t->text, &t->len);
    ck_assert_ptr_nonnull(f);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    gs_schedule *sch = NULL;
    gs_timing **timing = NULL;
    ck_assert_msg(gs_sim_scenario_timed(&s, &m, exact, &bo, &rep, f, &sch, &timing, &err) == GS_OK, "%s", err.msg);
    fclose(f);
    gs_report_fini(&rep);
    if (sch_out) {
        *sch_out = sch;
        *timing_out = timing;
    } else {
        gs_sim_timed_free(sch, timing);
    }
}

static void assert_valid_json(const trace_text *t)
{
    json_error_t je;
    json_t *doc = json_loadb(t->text, t->len, 0, &je);
    ck_assert_msg(doc != NULL, "trace is not JSON: line %d: %s", je.line, je.text);
    ck_assert(json_is_array(json_object_get(doc, "traceEvents")));
    json_decref(doc);
}

/* ------------------------------------------------------------------ no overlaps ---- */

/* scenarios/seed-70b-64xa100-fsdp.yaml: on every track (rank list x stream), sorted by start,
 * each slice starts at or after the previous one's end, in whole nanoseconds as written. The
 * schedule runs a stream's events one after another, so a slice that starts where its
 * predecessor ends must touch it, not overlap it: the test also asserts that such touching
 * neighbours exist (most events on the compute stream follow one another without a gap). */
START_TEST(test_no_overlap_70b_fsdp)
{
    trace_text t = {0};
    parsed p;
    simulate_trace("scenarios/seed-70b-64xa100-fsdp.yaml", 0, &t, NULL, NULL);
    assert_valid_json(&t);
    parse_trace(&t, &p);
    ck_assert_uint_gt(p.ns, 10000);
    qsort(p.s, p.ns, sizeof *p.s, slice_cmp);
    size_t touching = 0, tracks = 1;
    for (size_t i = 1; i < p.ns; i++) {
        const slice *a = &p.s[i - 1], *b = &p.s[i];
        if (a->pid != b->pid || a->tid != b->tid) {
            tracks++;
            continue;
        }
        ck_assert_msg(b->a >= a->b, "pid %" PRIu64 " tid %d: %s [%" PRId64 ", %" PRId64 "] overlaps %s starting %" PRId64,
                      a->pid, a->tid, a->name, a->a, a->b, b->name, b->a);
        touching += b->a == a->b;
    }
    ck_assert_uint_ge(tracks, 2); /* compute and dp at least */
    ck_assert_uint_gt(touching, 1000);
    parsed_free(&p);
    free(t.text);
}
END_TEST

/* Hand-made times that the old format (ts and dur each printed with %.3f) wrote overlapping:
 * A runs 0.6 ns .. 1001.4 ns, B 1001.4 .. 2000 ns on one stream. Old: ts 0.001, dur
 * round(1000.8 ns) = 1.001 us, end 1.002 us > B's ts 1.001 us. Whole nanoseconds: A = [1, 1001],
 * B = [1001, 2000]. The scenario name carries every character JSON must escape. */
START_TEST(test_rounding_and_escaping)
{
    gs_schedule *sch;
    ck_assert_int_eq(gs_schedule_create(1, &sch), GS_OK);
    static const char name[] = "q\"b\\s\nn\tt\x01" "c\x7f" "d";
    snprintf(sch->scenario, sizeof sch->scenario, "%s", name);
    gs_rank_events *r = &sch->ranks[0];
    r->rank = 0, r->class_size = 3, r->stage = 0;
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.stream = GS_STREAM_COMPUTE, e.phase = GS_PHASE_FWD, e.op = GS_OP_NORM, e.layer = 0;
    const uint32_t *lists[GS_LINK_LISTS] = {0};
    uint32_t id;
    ck_assert_int_eq(gs_rank_add_event(r, &e, lists, &id), GS_OK);
    e.op = GS_OP_QKV;
    ck_assert_int_eq(gs_rank_add_event(r, &e, lists, &id), GS_OK);
    gs_timing tm[2] = {{0.0, 0.6e-9, 1001.4e-9}, {1001.4e-9, 1001.4e-9, 2000e-9}};
    gs_timing *timing[1] = {tm};
    trace_text t = {0};
    FILE *f = open_memstream(&t.text, &t.len);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_report_trace(sch, timing, f, &err), GS_OK);
    fclose(f);
    parsed p;
    parse_trace(&t, &p);
    ck_assert_uint_eq(p.ns, 2);
    ck_assert_int_eq(p.s[0].a, 1);
    ck_assert_int_eq(p.s[0].b, 1001);
    ck_assert_int_eq(p.s[1].a, 1001);
    ck_assert_int_eq(p.s[1].b, 2000);
    json_error_t je;
    json_t *doc = json_loadb(t.text, t.len, 0, &je);
    ck_assert_msg(doc != NULL, "line %d: %s", je.line, je.text);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "otherData"), "scenario")), name);
    /* the class label says what x3 means */
    json_t *ev0 = json_array_get(json_object_get(doc, "traceEvents"), 0);
    const char *label = json_string_value(json_object_get(json_object_get(ev0, "args"), "name"));
    ck_assert_ptr_nonnull(strstr(label, "x3: stands for 3 ranks"));
    ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "otherData"), "xN"));
    json_decref(doc);
    parsed_free(&p);
    free(t.text);
    gs_schedule_destroy(sch);
}
END_TEST

/* --------------------------------------------------------------------------- flows ---- */

/* The slice a flow point at ts on track (pid, tid) binds to with "bp": "e", as Perfetto binds it:
 * the latest-begun slice of the track that holds ts (a zero-length slice that begins where its
 * neighbour ends is the one bound at that instant). NULL when none holds it. */
static const slice *slice_at(const parsed *p, uint64_t pid, int tid, int64_t ts)
{
    const slice *best = NULL;
    for (size_t i = 0; i < p->ns; i++) /* small traces: linear, file order = start order per track */
        if (p->s[i].pid == pid && p->s[i].tid == tid && p->s[i].a <= ts && ts <= p->s[i].b)
            best = &p->s[i];
    return best;
}

/* tiny-llama-2x2x2 on the exact path (every rank): one flow per collective call, with as many
 * points as the group has members, each on its own rank and inside a collective slice; one per
 * send, ending in a recv slice. The expected counts come from the schedule: sum over collective
 * events of 1 / group size calls, and one message per send event. */
START_TEST(test_flows_exact)
{
    trace_text t = {0};
    gs_schedule *sch;
    gs_timing **timing;
    simulate_trace("scenarios/tiny-llama-2x2x2.yaml", 1, &t, &sch, &timing);
    assert_valid_json(&t);
    double calls = 0.0;
    size_t coll_events = 0, sends = 0;
    for (size_t i = 0; i < sch->nranks; i++)
        for (size_t k = 0; k < sch->ranks[i].nevents; k++) {
            const gs_event *e = &sch->ranks[i].events[k];
            if (e->kind == GS_EV_COLLECTIVE && e->group_size > 1) {
                calls += 1.0 / (double)e->group_size;
                coll_events++;
            }
            sends += e->kind == GS_EV_SEND;
        }
    ck_assert_uint_gt(coll_events, 0);
    ck_assert_uint_gt(sends, 0);
    parsed p;
    parse_trace(&t, &p);
    ck_assert_uint_eq(p.nf, coll_events + 2 * sends);
    size_t chains = 0, p2p_chains = 0;
    for (size_t i = 0; i < p.nf;) {
        size_t j = i + 1;
        while (j < p.nf && p.f[j].id == p.f[i].id)
            j++;
        ck_assert_msg(p.f[i].ph == 's' && p.f[j - 1].ph == 'f', "flow %" PRIu64 " is not s .. f", p.f[i].id);
        for (size_t k = i; k < j; k++) {
            ck_assert(k == i || k + 1 == j || p.f[k].ph == 't');
            const slice *sl = slice_at(&p, p.f[k].pid, p.f[k].tid, p.f[k].ts);
            ck_assert_msg(sl != NULL, "flow %" PRIu64 " point at %" PRId64 " ns on pid %" PRIu64 " outside any slice",
                          p.f[k].id, p.f[k].ts, p.f[k].pid);
            if (p.f[k].p2p)
                ck_assert_msg(sl->p2p && strstr(sl->name, k == i ? "send" : "recv"), "p2p flow on %s", sl->name);
            else
                ck_assert_msg(sl->collective, "collective flow on %s", sl->name);
            for (size_t q = i; q < k; q++) /* one point per member rank */
                ck_assert(p.f[q].pid != p.f[k].pid);
        }
        if (p.f[i].p2p) {
            ck_assert_uint_eq(j - i, 2);
            p2p_chains++;
        }
        chains++;
        i = j;
    }
    ck_assert_uint_eq(p2p_chains, sends);
    ck_assert_uint_eq(chains - p2p_chains, (size_t)(calls + 0.5));
    parsed_free(&p);
    free(t.text);
    gs_sim_timed_free(sch, timing);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *core = tcase_create("core");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, test_rounding_and_escaping);
    tcase_add_test(core, test_no_overlap_70b_fsdp);
    tcase_add_test(core, test_flows_exact);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(trace_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
