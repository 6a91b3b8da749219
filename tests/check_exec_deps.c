/* Check suite for exec/dispatch.c and the schedule it plays: the waits the dispatcher issues are
 * exactly the schedule's dependencies on other streams (it adds, drops and reorders none), and
 * the sim plays the same dependency set, on every contract configuration (tests/exec_configs.h).
 *
 * The waits are seen through a driver that wraps the host driver and logs, per stream, every
 * stream_wait_event and event_record of one step, in issue order: the dispatcher issues each
 * event as its waits, the record of its "posted" event, the work, the record of its "ended"
 * event, so the k-th pair of records on a stream is the k-th event of that stream in the rank's
 * list, and a wait names the "ended" event of the event it waits for. The expected set is read
 * off the schedule's lists directly (each dependency on another stream), not from the
 * dispatcher's code. */
#include <check.h>
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
    gs_backend_opts bo = {0, NULL, NULL};
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

static Suite *deps_suite(void)
{
    Suite *s = suite_create("exec_deps");
    TCase *tc = tcase_create("dependencies");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, deps_played, 0, (int)NCONFIGS);
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
