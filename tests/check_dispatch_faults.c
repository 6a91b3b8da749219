/* Check suite for the exec dispatcher's deadlines on the host driver: a step whose events stop
 * completing is stopped by the watchdog (timeout + 0.5 s) naming the rank and the event, also
 * when the stall is a rank's last event, which no other rank waits for; a rank that dies in its
 * last event fails the step; work that ignores the abort is given up after 0.8 s (the
 * dispatcher is wedged and refuses further steps); a timeout that is not a finite number of
 * seconds within the stated bound is refused. */
#include <check.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "engine/mesh.h"
#include "engine/schedule.h"
#include "exec/dispatch.h"
#include "exec/driver.h"
#include "exec/exec.h"

#define NO UINT32_MAX

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint32_t add(gs_rank_events *re, gs_stream stream, gs_op op, uint32_t layer, uint32_t dep)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE;
    e.stream = (uint8_t)stream;
    e.phase = GS_PHASE_FWD;
    e.op = (uint8_t)op;
    e.layer = layer;
    const uint32_t *lists[GS_LINK_LISTS] = {&dep, NULL, NULL, NULL, NULL};
    e.nlinks[GS_LINK_DEPS] = dep != NO;
    uint32_t id = NO;
    ck_assert_int_eq(gs_rank_add_event(re, &e, lists, &id), GS_OK);
    return id;
}

/* Two ranks of four compute events each (two on the compute stream, one on the dp stream after
 * the first, the last after both): nothing crosses ranks. */
static gs_schedule *two_ranks(void)
{
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(2, &sch), GS_OK);
    sch->exact = 1;
    for (size_t i = 0; i < 2; i++) {
        gs_rank_events *re = &sch->ranks[i];
        re->rank = i;
        uint32_t a = add(re, GS_STREAM_COMPUTE, GS_OP_NORM, 0, NO);
        uint32_t b = add(re, GS_STREAM_DP, GS_OP_NORM, 1, a);
        uint32_t c = add(re, GS_STREAM_COMPUTE, GS_OP_QKV, 0, a);
        add(re, GS_STREAM_COMPUTE, GS_OP_OPTIMIZER, 0, b == NO ? c : b);
    }
    return sch;
}

/* The program: every event returns at once, except (rank, event) which stalls until the run is
 * aborted (cooperative), or ignores the abort until `release` is set (stuck work). */
typedef struct prog {
    const gs_driver_ops *ops;
    gs_drv *drv;
    size_t rank, event;
    int stuck;
    volatile int release;
} prog;

static gs_status run_fn(void *arg, size_t ri, size_t e, gs_drv_stream *s, gs_error *err)
{
    (void)s;
    prog *p = arg;
    if (ri != p->rank || e != p->event)
        return GS_OK;
    const struct timespec nap = {0, 5 * 1000 * 1000};
    while (p->stuck ? !p->release : !p->ops->aborted(p->drv, NULL))
        nanosleep(&nap, NULL);
    return gs_error_set(err, GS_ERR_RUNTIME, "stopped");
}

typedef struct rig {
    gs_schedule *sch;
    gs_mesh mesh;
    gs_drv *drv;
    gs_dispatch *disp;
} rig;

static void rig_open(rig *r, double timeout_s)
{
    gs_error err;
    gs_error_init(&err);
    r->sch = two_ranks();
    ck_assert_int_eq(gs_mesh_init(&r->mesh, 2, 1, 1, NULL, 2, &err), GS_OK);
    r->sch->mesh = r->mesh;
    gs_driver_opts o = {.timeout_s = timeout_s};
    ck_assert_int_eq(gs_driver_host.open(&r->mesh, &o, &r->drv, &err), GS_OK);
    ck_assert_msg(gs_dispatch_create(&gs_driver_host, r->drv, r->sch, &r->disp, &err) == GS_OK, "%s", err.msg);
}

static void rig_close(rig *r)
{
    gs_dispatch_destroy(r->disp);
    gs_driver_host.close(r->drv);
    gs_schedule_destroy(r->sch);
}

static void event_name(const gs_schedule *sch, size_t rank, size_t e, char *buf, size_t cap)
{
    gs_event_name(&sch->ranks[rank], &sch->ranks[rank].events[e], buf, cap);
}

/* A stall in a rank's last event (the optimizer here): nothing waits for it, so only the
 * watchdog sees it: at 0.3 + 0.5 s, naming rank 1 and the event. Also its first event. */
START_TEST(stall_found_by_watchdog)
{
    size_t which = _i == 0 ? 3 : 0;
    rig r;
    rig_open(&r, 0.3);
    prog p = {&gs_driver_host, r.drv, 1, which, 0, 0};
    gs_dispatch_opts o = {NULL, 0, GS_FAULT_FAIL, 0.3};
    gs_error err;
    gs_error_init(&err);
    double t0 = now_s();
    gs_status rc = gs_dispatch_step(r.disp, run_fn, &p, &o, NULL, NULL, &err);
    double took = now_s() - t0;
    char name[GS_EVENT_NAME_BYTES], want[256];
    event_name(r.sch, 1, which, name, sizeof name);
    snprintf(want, sizeof want, "rank 1: event %s: did not complete within 0.3 s", name);
    ck_assert_int_eq(rc, GS_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s (wanted '%s')", err.msg, want);
    ck_assert_double_ge(took, 0.75);
    ck_assert_double_lt(took, 3.0);
    ck_assert_int_eq(gs_dispatch_wedged(r.disp), 0);
    rig_close(&r);
}
END_TEST

/* A rank that dies in its last event: no wait notices, the completion check does, at once. */
START_TEST(death_in_last_event_fails_the_step)
{
    rig r;
    rig_open(&r, 5);
    prog p = {&gs_driver_host, r.drv, 99, 99, 0, 0};
    char name[GS_EVENT_NAME_BYTES], want[256];
    event_name(r.sch, 0, 3, name, sizeof name);
    gs_dispatch_opts o = {name, 0, GS_FAULT_DIE, 5};
    gs_error err, rank_err[2];
    gs_error_init(&err);
    double t0 = now_s();
    gs_status rc = gs_dispatch_step(r.disp, run_fn, &p, &o, NULL, rank_err, &err);
    ck_assert_int_eq(rc, GS_ERR_RUNTIME);
    snprintf(want, sizeof want, "rank 0: event %s: did not complete", name);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
    ck_assert_double_lt(now_s() - t0, 2.0);
    /* and a clean step afterwards completes */
    gs_dispatch_opts clean = {NULL, 0, GS_FAULT_FAIL, 5};
    rig_close(&r);
    rig_open(&r, 5);
    ck_assert_int_eq(gs_dispatch_step(r.disp, run_fn, &p, &clean, NULL, rank_err, &err), GS_OK);
    uint64_t done, total;
    gs_dispatch_progress(r.disp, &done, &total);
    ck_assert_uint_eq(done, 8);
    ck_assert_uint_eq(total, 8);
    rig_close(&r);
}
END_TEST

/* Work that ignores the abort: the dispatcher gives up on it 0.8 s after the watchdog's abort,
 * says so, and refuses another step. The stuck thread is released afterwards; the rig is not
 * freed (the given-up threads may still use it). */
START_TEST(stuck_work_given_up)
{
    rig r;
    rig_open(&r, 0.2);
    static prog p;
    p = (prog){&gs_driver_host, r.drv, 0, 2, 1, 0};
    gs_dispatch_opts o = {NULL, 0, GS_FAULT_FAIL, 0.2};
    gs_error err;
    gs_error_init(&err);
    double t0 = now_s();
    gs_status rc = gs_dispatch_step(r.disp, run_fn, &p, &o, NULL, NULL, &err);
    double took = now_s() - t0;
    ck_assert_int_eq(rc, GS_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "did not complete within 0.2 s") && strstr(err.msg, "did not stop within 0.8 s"),
                  "%s", err.msg);
    ck_assert_int_eq(gs_dispatch_wedged(r.disp), 1);
    /* the watchdog at 0.7 s, then 0.8 s of grace */
    ck_assert_double_ge(took, 1.4);
    ck_assert_double_lt(took, 4.0);
    ck_assert_int_eq(gs_dispatch_step(r.disp, run_fn, &p, &o, NULL, NULL, &err), GS_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "no step can run") != NULL, "%s", err.msg);
    p.release = 1;
}
END_TEST

/* Timeouts: a finite number of seconds in (0, GS_EXEC_TIMEOUT_MAX_S] (0 is the default 60). */
START_TEST(timeout_bounds)
{
    static const char text[] =
        "model: {name: t, layers: 2, hidden: 64, heads: 8, kv_heads: 4, ffn: 128, vocab: 256, seq: 32}\n"
        "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 1}\n"
        "grid: {dp: 1, pp: 1, tp: 1}\n"
        "strategy: {sharding: full_shard, precision: fp32}\n"
        "batch: {global: 2, micro: 1}\n";
    gs_scenario s;
    gs_mesh mesh;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), "t", &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &mesh, NULL, &err), GS_OK);
    const double bad[] = {INFINITY, NAN, -1, GS_EXEC_TIMEOUT_MAX_S * 2, 1e300};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gs_exec_opts eo;
        gs_exec_opts_defaults(&eo);
        eo.timeout_s = bad[i];
        gs_exec_session *x = NULL;
        ck_assert_int_eq(gs_exec_session_create(&s, &mesh, &eo, &x, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "expected a finite number of seconds in (0, 86400]") != NULL, "%s", err.msg);
        ck_assert_ptr_null(x);
    }
}
END_TEST

static Suite *faults_suite(void)
{
    Suite *s = suite_create("dispatch_faults");
    TCase *tc = tcase_create("deadlines");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, stall_found_by_watchdog, 0, 2);
    tcase_add_test(tc, death_in_last_event_fails_the_step);
    tcase_add_test(tc, stuck_work_given_up);
    tcase_add_test(tc, timeout_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(faults_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
