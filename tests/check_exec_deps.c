/* Check suite for exec/dispatch.c and the schedule it plays: the waits the dispatcher issues are
 * exactly the schedule's dependencies on other streams (it adds, drops and reorders none), the
 * sim plays the same dependency set, and a dumped schedule reordered where its dependencies allow
 * trains to the same bits, on every contract configuration (tests/exec_configs.h).
 *
 * The waits are seen through a driver that wraps the host driver and logs, per stream, every
 * stream_wait_event and event_record of one step, in issue order: the dispatcher issues each
 * event as its waits, the record of its "posted" event, the work, the record of its "ended"
 * event, so the k-th pair of records on a stream is the k-th event of that stream in the rank's
 * list, and a wait names the "ended" event of the event it waits for. The expected set is read
 * off the schedule's lists directly (each dependency on another stream), not from the
 * dispatcher's code. */
#include <check.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "sim/sim.h"
#include "tests/exec_configs.h"

typedef struct rec_entry {
    const gs_drv_stream *s;
    const gs_drv_event *e;
    int wait; /* 1: stream_wait_event; 0: event_record */
} rec_entry;

typedef struct rec_stream {
    const gs_drv_stream *s;
    uint64_t rank;
    gs_stream kind;
} rec_stream;

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static rec_entry *rec;
static size_t nrec, caprec;
static rec_stream *streams;
static size_t nstreams, capstreams;
static int logging;

static void rec_push(const gs_drv_stream *s, const gs_drv_event *e, int wait)
{
    pthread_mutex_lock(&rec_mu);
    if (logging) {
        if (nrec == caprec) {
            caprec = caprec ? 2 * caprec : 4096;
            rec = realloc(rec, caprec * sizeof *rec);
            ck_assert_ptr_nonnull(rec);
        }
        rec[nrec++] = (rec_entry){s, e, wait};
    }
    pthread_mutex_unlock(&rec_mu);
}

static gs_status rec_stream_create(gs_drv *d, uint64_t rank, gs_stream kind, gs_drv_stream **out, gs_error *err)
{
    gs_status rc = gs_driver_host.stream_create(d, rank, kind, out, err);
    if (rc == GS_OK) {
        pthread_mutex_lock(&rec_mu);
        if (nstreams == capstreams) {
            capstreams = capstreams ? 2 * capstreams : 64;
            streams = realloc(streams, capstreams * sizeof *streams);
            ck_assert_ptr_nonnull(streams);
        }
        streams[nstreams++] = (rec_stream){*out, rank, kind};
        pthread_mutex_unlock(&rec_mu);
    }
    return rc;
}

static gs_status rec_wait(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    rec_push(s, e, 1);
    return gs_driver_host.stream_wait_event(d, s, e, err);
}

static gs_status rec_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    rec_push(s, e, 0);
    return gs_driver_host.event_record(d, s, e, err);
}

/* The logged entries of stream (rank, kind), in order; returns their count. */
static size_t entries_of(uint64_t rank, gs_stream kind, const rec_entry **out, rec_entry *buf)
{
    const gs_drv_stream *s = NULL;
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].rank == rank && streams[i].kind == kind)
            s = streams[i].s;
    size_t n = 0;
    for (size_t i = 0; s && i < nrec; i++)
        if (rec[i].s == s)
            buf[n++] = rec[i];
    *out = buf;
    return n;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Rank list ri of sch: the events its dispatcher waited for, per event, equal the schedule's
 * dependencies on other streams. */
static void check_rank_waits(const cfg *c, const gs_schedule *sch, size_t ri)
{
    const gs_rank_events *re = &sch->ranks[ri];
    size_t ne = re->nevents;
    const gs_drv_event **ended = calloc(ne ? ne : 1, sizeof *ended);
    const gs_drv_event ***waited = calloc(ne ? ne : 1, sizeof *waited);
    size_t *nwaited = calloc(ne ? ne : 1, sizeof *nwaited);
    rec_entry *buf = malloc((nrec ? nrec : 1) * sizeof *buf);
    ck_assert(ended && waited && nwaited && buf);
    /* per stream: its entries in list order, grouped into events (waits, posted, ended) */
    for (int k = 0; k < GS_STREAM_COUNT; k++) {
        const rec_entry *en;
        size_t n = entries_of(re->rank, (gs_stream)k, &en, buf), at = 0;
        for (size_t e = 0; e < ne; e++) {
            if (re->events[e].stream != k)
                continue;
            size_t first = at, records = 0;
            while (at < n && records < 2)
                if (!en[at++].wait && ++records == 2)
                    ended[e] = en[at - 1].e;
            ck_assert_msg(records == 2, "%s: rank %llu: stream %s ran out of logged records at event %zu", c->name,
                          (unsigned long long)re->rank, gs_stream_name((gs_stream)k), e);
            waited[e] = malloc((at - first) * sizeof **waited);
            ck_assert_ptr_nonnull(waited[e]);
            for (size_t q = first; q < at; q++)
                if (en[q].wait)
                    waited[e][nwaited[e]++] = en[q].e;
        }
        ck_assert_msg(at == n, "%s: rank %llu: stream %s logged %zu entries, %zu of them for its events", c->name,
                      (unsigned long long)re->rank, gs_stream_name((gs_stream)k), n, at);
    }
    for (size_t e = 0; e < ne; e++) {
        /* the waited "ended" events, as event ids */
        uint32_t *ids = malloc((nwaited[e] ? nwaited[e] : 1) * sizeof *ids);
        ck_assert_ptr_nonnull(ids);
        for (size_t j = 0; j < nwaited[e]; j++) {
            size_t q = 0;
            while (q < ne && ended[q] != waited[e][j])
                q++;
            ck_assert_msg(q < ne, "%s: rank %llu event %zu waits for a driver event that ends no event of its rank",
                          c->name, (unsigned long long)re->rank, e);
            ids[j] = (uint32_t)q;
        }
        free(waited[e]);
        /* the schedule's: each dependency on another stream */
        const gs_event *ev = &re->events[e];
        const uint32_t *d = gs_event_list(re, ev, GS_LINK_DEPS);
        uint32_t *want = malloc((ev->nlinks[GS_LINK_DEPS] + 1u) * sizeof *want);
        ck_assert_ptr_nonnull(want);
        size_t nw = 0;
        for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS]; j++)
            if (re->events[d[j]].stream != ev->stream)
                want[nw++] = d[j];
        qsort(ids, nwaited[e], sizeof *ids, cmp_u32);
        qsort(want, nw, sizeof *want, cmp_u32);
        char nm[GS_EVENT_NAME_BYTES];
        gs_event_name(re, ev, nm, sizeof nm);
        ck_assert_msg(nwaited[e] == nw && memcmp(ids, want, nw * sizeof *ids) == 0,
                      "%s: rank %llu event %s: the dispatcher waited for %zu events, the schedule states %zu", c->name,
                      (unsigned long long)re->rank, nm, nwaited[e], nw);
        free(ids);
        free(want);
    }
    free(ended);
    free(waited);
    free(nwaited);
    free(buf);
}

/* The sim on the same schedule: every event starts after each dependency and its stream's
 * previous event end (its dependency set is the schedule's), and collectives of a group start
 * together. */
static void check_sim_deps(const cfg *c, const gs_scenario *s, const gs_mesh *mesh, const gs_schedule *sch)
{
    void *state = NULL;
    gs_error err;
    gs_error_init(&err);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    ck_assert_msg(gs_sim_backend.open(s, mesh, &bo, &state, &err) == GS_OK, "%s: sim: %s", c->name, err.msg);
    gs_timing **timing = calloc(sch->nranks, sizeof *timing);
    ck_assert_ptr_nonnull(timing);
    for (size_t i = 0; i < sch->nranks; i++)
        ck_assert_ptr_nonnull(timing[i] = calloc(sch->ranks[i].nevents + 1, sizeof *timing[i]));
    ck_assert_msg(gs_sim_backend.run(state, sch, timing, &err) == GS_OK, "%s: sim: %s", c->name, err.msg);
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *re = &sch->ranks[i];
        double last_end[GS_STREAM_COUNT] = {0};
        for (size_t e = 0; e < re->nevents; e++) {
            const gs_event *ev = &re->events[e];
            const uint32_t *d = gs_event_list(re, ev, GS_LINK_DEPS);
            double start = timing[i][e].start_s;
            for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS]; j++)
                ck_assert_msg(start >= timing[i][d[j]].end_s - 1e-12, "%s: sim: rank %zu event %zu starts before its "
                              "dependency %u ends", c->name, i, e, (unsigned)d[j]);
            ck_assert_msg(start >= last_end[ev->stream] - 1e-12, "%s: sim: rank %zu event %zu starts before its "
                          "stream's previous event ends", c->name, i, e);
            last_end[ev->stream] = timing[i][e].end_s;
        }
        free(timing[i]);
    }
    free(timing);
    gs_sim_backend.close(state);
}

START_TEST(deps_played)
{
    const cfg *c = &configs[_i];
    char text[1024];
    scenario_text(c, text, sizeof text);
    gs_scenario s;
    gs_mesh mesh;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), c->name, &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &mesh, NULL, &err), GS_OK);
    static gs_driver_ops logged;
    logged = gs_driver_host;
    logged.stream_create = rec_stream_create;
    logged.stream_wait_event = rec_wait;
    logged.event_record = rec_record;
    gs_exec_opts eo;
    gs_exec_opts_defaults(&eo);
    eo.timeout_s = 60;
    eo.driver = &logged;
    nrec = nstreams = 0;
    logging = 0;
    gs_exec_session *x = NULL;
    ck_assert_msg(gs_exec_session_create(&s, &mesh, &eo, &x, &err) == GS_OK, "%s: %s", c->name, err.msg);
    double loss;
    logging = 1;
    ck_assert_msg(gs_exec_session_step(x, &loss, NULL, NULL, &err) == GS_OK, "%s: %s", c->name, err.msg);
    logging = 0;
    const gs_schedule *sch = gs_exec_session_schedule(x);
    ck_assert_uint_eq(nstreams, sch->nranks * GS_STREAM_COUNT);
    for (size_t i = 0; i < sch->nranks; i++)
        check_rank_waits(c, sch, i);
    check_sim_deps(c, &s, &mesh, sch);
    gs_exec_session_destroy(x);
}
END_TEST

/* ---- reordered schedules ----
 * exec reads what each event is from its role and never from its place in the list: a dumped
 * schedule whose events are reordered where the dependencies and streams allow gives the same
 * losses and parameters, bit for bit. A reorder swaps neighbours on different streams, the later
 * not depending on the earlier (each stream keeps its order, every dependency still points back);
 * it leaves in place the events that allocate or free a unit's gathered parameters or transient
 * gradient (the schedule says which copy an event uses by their lifetimes in list order) and the
 * events split in parts (a chunked overlap's sides meet through marks, whose marking side must be
 * issued first). */
static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static int depends(const gs_rank_events *r, size_t e, size_t on)
{
    const uint32_t *d = gs_event_list(r, &r->events[e], GS_LINK_DEPS);
    for (uint16_t j = 0; j < r->events[e].nlinks[GS_LINK_DEPS]; j++)
        if (d[j] == on)
            return 1;
    return 0;
}

/* 1 when event e allocates or frees a gathered parameter copy or a transient gradient */
static int moves_unit_tensors(const gs_rank_events *r, size_t e)
{
    for (int w = GS_LINK_ALLOCS; w <= GS_LINK_FREES; w++) {
        const uint32_t *l = gs_event_list(r, &r->events[e], w);
        for (uint16_t j = 0; j < r->events[e].nlinks[w]; j++)
            if (r->tensors[l[j]].kind == GS_T_PARAM_FULL || r->tensors[l[j]].kind == GS_T_GRAD)
                return 1;
    }
    return 0;
}

/* 1 when a allocates or frees a tensor that b touches (any list) */
static int lifetime_clash(const gs_rank_events *r, size_t a, size_t b)
{
    for (int w = GS_LINK_ALLOCS; w <= GS_LINK_FREES; w++) {
        const uint32_t *l = gs_event_list(r, &r->events[a], w);
        for (uint16_t j = 0; j < r->events[a].nlinks[w]; j++)
            for (int v = GS_LINK_READS; v < GS_LINK_LISTS; v++) {
                const uint32_t *m = gs_event_list(r, &r->events[b], v);
                for (uint16_t k = 0; k < r->events[b].nlinks[v]; k++)
                    if (m[k] == l[j])
                        return 1;
            }
    }
    return 0;
}

/* Neighbours i and i + 1 may trade places: other streams, no dependency, neither split in
 * parts, neither moving a gathered copy's or a transient gradient's lifetime (the schedule
 * defines which copy an event uses by list order), no lifetime of a tensor the other touches
 * crossed. */
static int swappable(const gs_rank_events *r, size_t i)
{
    const gs_event *a = &r->events[i], *b = &r->events[i + 1];
    return a->stream != b->stream && !depends(r, i + 1, i) && !a->part && !b->part && !moves_unit_tensors(r, i) &&
           !moves_unit_tensors(r, i + 1) && !lifetime_clash(r, i, i + 1) && !lifetime_clash(r, i + 1, i);
}

/* Swaps events i and i + 1 of r (their lists travel with them), renumbering the dependencies. */
static void swap_events(gs_rank_events *r, size_t i)
{
    gs_event t = r->events[i];
    r->events[i] = r->events[i + 1];
    r->events[i + 1] = t;
    for (size_t e = 0; e < r->nevents; e++) {
        uint32_t *d = &r->pool[r->events[e].links];
        for (uint16_t j = 0; j < r->events[e].nlinks[GS_LINK_DEPS]; j++)
            d[j] = d[j] == i ? (uint32_t)i + 1 : d[j] == i + 1 ? (uint32_t)i : d[j];
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Three steps of c on sch (NULL: the session builds it): the losses and a hash of every rank's
 * parameters and Adam moments. */
static void run_on(const cfg *c, const gs_schedule *sch, double *loss, uint64_t *hash)
{
    char text[1024];
    scenario_text(c, text, sizeof text);
    gs_scenario s;
    gs_mesh mesh;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), c->name, &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &mesh, NULL, &err), GS_OK);
    gs_exec_opts eo;
    gs_exec_opts_defaults(&eo);
    eo.timeout_s = 60;
    eo.schedule = sch;
    gs_exec_session *x = NULL;
    ck_assert_msg(gs_exec_session_create(&s, &mesh, &eo, &x, &err) == GS_OK, "%s: %s", c->name, err.msg);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(gs_exec_session_step(x, &loss[i], NULL, NULL, &err) == GS_OK, "%s: %s", c->name, err.msg);
    *hash = 1469598103934665603ull;
    for (size_t r = 0; r < gs_exec_session_schedule(x)->nranks; r++) {
        gs_shard_list sl;
        ck_assert_int_eq(gs_train_shards(gs_exec_session_train(x), r, &sl, &err), GS_OK);
        for (size_t k = 0; k < sl.ntensors; k++)
            for (size_t p = 0; p < sl.tensors[k].npieces; p++) {
                const gs_shard_piece *pc = &sl.tensors[k].pieces[p];
                *hash = fnv(*hash, pc->param, pc->count * sizeof(float));
                if (pc->m) { /* training state (FP8 scales) has no Adam moments */
                    *hash = fnv(*hash, pc->m, pc->count * sizeof(float));
                    *hash = fnv(*hash, pc->v, pc->count * sizeof(float));
                }
            }
        gs_shard_list_fini(&sl);
    }
    gs_exec_session_destroy(x);
}

START_TEST(reordered_schedule)
{
    const cfg *c = &configs[_i];
    char text[1024];
    scenario_text(c, text, sizeof text);
    gs_scenario s;
    gs_mesh mesh;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), c->name, &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &mesh, NULL, &err), GS_OK);
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_build(&s, &mesh, 1, &sch, &err), GS_OK);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)_i, moved = 0, total = 0;
    for (size_t ri = 0; ri < sch->nranks; ri++) {
        gs_rank_events *r = &sch->ranks[ri];
        total += r->nevents;
        for (size_t k = 0; r->nevents > 1 && k < 8 * r->nevents; k++) {
            size_t i = (size_t)(next_rand(&seed) % (r->nevents - 1));
            if (swappable(r, i)) {
                swap_events(r, i);
                moved++;
            }
        }
    }
    /* dumped and loaded back: the loader rebuilds what the swaps left stale (names) */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(gs_schedule_dump(sch, f, &err), GS_OK);
    fclose(f);
    gs_schedule_destroy(sch);
    f = fmemopen(buf, len, "r");
    gs_schedule *re = NULL;
    ck_assert_msg(gs_schedule_load(f, "reordered", &re, &err) == GS_OK, "%s: %s", c->name, err.msg);
    fclose(f);
    free(buf);
    ck_assert_msg(gs_schedule_validate_structure(re, &err) == GS_OK, "%s: %s", c->name, err.msg);
    /* not vacuous: a sizeable share of the events moved */
    /* not vacuous where streams run side by side: every pipeline has neighbours to trade (chains
     * of TP and compute events, and FSDP's gathers, leave a single stage's list no freedom) */
    ck_assert_msg(c->pp == 1 || moved > 0, "%s: no swap among %llu events", c->name, (unsigned long long)total);
    if (moved == 0) {
        gs_schedule_destroy(re);
        return;
    }
    double want[3], got[3];
    uint64_t hw, hg;
    run_on(c, NULL, want, &hw);
    run_on(c, re, got, &hg);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(memcmp(&want[i], &got[i], sizeof want[i]) == 0, "%s: step %d loss %.17g, reordered %.17g",
                      c->name, i + 1, want[i], got[i]);
    ck_assert_msg(hw == hg, "%s: the reordered schedule's parameters differ", c->name);
    gs_schedule_destroy(re);
}
END_TEST

static Suite *deps_suite(void)
{
    Suite *s = suite_create("exec_deps");
    TCase *tc = tcase_create("dependencies");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, deps_played, 0, (int)NCONFIGS);
    tcase_add_loop_test(tc, reordered_schedule, 0, (int)NCONFIGS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(deps_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free(rec);
    free(streams);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
