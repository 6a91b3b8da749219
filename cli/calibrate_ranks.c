/* The host calibration's measurements of several ranks on one host driver (`gridstep calibrate`):
 * the dispatch cost per event by world size, the CPU share the OS gives the ranks' threads (the
 * cores test), the collectives over every op, group size and size, and the process's CPU share
 * in a real training step of the scenario. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "calib/ops.h"
#include "cli/calibrate_cmd.h"
#include "cli/cli_common.h"
#include "exec/driver.h"
#include "exec/exec.h"
#include "sim/calib.h"

/* ---- dispatch ------------------------------------------------------------------------------------------ */

static gs_status noop_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    (void)arg, (void)s, (void)err;
    return GS_OK;
}

/* The dispatch cost of one event as the exec backend pays it, for a world of R ranks: every
 * rank has its five stream threads and an issuing thread (as the dispatcher runs them), and each
 * issues a chain of no-op events on its compute stream (record, launch, record); the cost per
 * event is the chain's wall time over its length, averaged over the ranks. Then the same with
 * each compute no-op waiting for a no-op on the DP stream (a cross-stream dependency: one thread
 * wakes another); the difference is the wake-up. Every state change of the host driver wakes
 * all of its threads, so both grow with R (and with the machine's load). */
typedef struct chain_job {
    const gs_driver_ops *ops;
    gs_drv *d;
    gs_drv_stream *st[GS_STREAM_COUNT];
    int n;
    int cross; /* 1: each compute no-op waits for a DP-stream no-op */
    double t0, t1;
    gs_status rc;
    gs_error err;
} chain_job;

static void *chain_main(void *arg)
{
    chain_job *j = arg;
    const gs_driver_ops *o = j->ops;
    gs_drv_event **ev = calloc((size_t)(3 * j->n), sizeof *ev);
    gs_status rc = ev ? GS_OK : gs_error_set(&j->err, GS_ERR_NOMEM, "calibrate: out of memory");
    for (int i = 0; i < 3 * j->n && rc == GS_OK; i++)
        rc = o->event_create(j->d, &ev[i], &j->err);
    j->t0 = o->clock_s(j->d);
    for (int i = 0; i < j->n && rc == GS_OK; i++) {
        gs_drv_stream *cs = j->st[GS_STREAM_COMPUTE], *ds = j->st[GS_STREAM_DP];
        if (!j->cross) {
            if ((rc = o->event_record(j->d, cs, ev[3 * i + 1], &j->err)) == GS_OK &&
                (rc = o->launch(j->d, cs, noop_fn, NULL, &j->err)) == GS_OK)
                rc = o->event_record(j->d, cs, ev[3 * i + 2], &j->err);
            continue;
        }
        if ((rc = o->launch(j->d, ds, noop_fn, NULL, &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, ds, ev[3 * i], &j->err)) == GS_OK &&
            (rc = o->stream_wait_event(j->d, cs, ev[3 * i], &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, cs, ev[3 * i + 1], &j->err)) == GS_OK &&
            (rc = o->launch(j->d, cs, noop_fn, NULL, &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, cs, ev[3 * i + 2], &j->err)) == GS_OK)
            rc = o->stream_wait_event(j->d, ds, ev[3 * i + 2], &j->err);
    }
    if (rc == GS_OK)
        rc = o->stream_sync(j->d, j->st[GS_STREAM_COMPUTE], &j->err);
    j->t1 = o->clock_s(j->d);
    /* the DP stream's last wait may still hold an event: drain it before destroying them */
    if (rc == GS_OK && j->cross)
        rc = o->stream_sync(j->d, j->st[GS_STREAM_DP], &j->err);
    for (int i = 0; ev && i < 3 * j->n; i++)
        if (ev[i])
            o->event_destroy(j->d, ev[i]);
    free(ev);
    j->rc = rc;
    return NULL;
}

static double rusage_s(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + 1e-6 * (double)u->ru_utime.tv_usec + (double)u->ru_stime.tv_sec +
           1e-6 * (double)u->ru_stime.tv_usec;
}

gs_status gs__calib_measure_dispatch(gs__calib_host *c, gs_error *err)
{
    static const uint64_t worlds[CALIB_DISPATCH_SIZES] = {1, 2, 4, 8};
    gs_status rc = GS_OK;
    for (int w = 0; w < 2 * CALIB_DISPATCH_SIZES && rc == GS_OK; w++) {
        uint64_t R = worlds[w % CALIB_DISPATCH_SIZES];
        int cross = w >= CALIB_DISPATCH_SIZES;
        gs__calib_progress(c, "dispatch cost, %" PRIu64 " rank%s", R, R > 1 ? "s" : "");
        gs_mesh mesh;
        gs_drv *d = NULL;
        gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
        chain_job jobs[8];
        pthread_t th[8];
        int started[8] = {0};
        memset(jobs, 0, sizeof jobs);
        if ((rc = gs_mesh_init(&mesh, 1, R, 1, NULL, R, err)) == GS_OK)
            rc = c->ops->open(&mesh, &o, &d, err);
        for (uint64_t r = 0; r < R && rc == GS_OK; r++) {
            jobs[r].ops = c->ops;
            jobs[r].d = d;
            jobs[r].n = c->quick ? 40 : 150;
            jobs[r].cross = cross;
            for (int k = 0; k < GS_STREAM_COUNT && rc == GS_OK; k++)
                rc = c->ops->stream_create(d, r, (gs_stream)k, &jobs[r].st[k], err);
        }
        /* the CPU time the whole process spends meanwhile: every thread the driver wakes for an
         * event, not only the issuing one (its condition variable wakes them all) */
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        for (uint64_t r = 0; r < R && rc == GS_OK; r++)
            started[r] = pthread_create(&th[r], NULL, chain_main, &jobs[r]) == 0;
        double per = 0;
        for (uint64_t r = 0; r < R; r++) {
            if (started[r]) {
                pthread_join(th[r], NULL);
                if (jobs[r].rc != GS_OK && rc == GS_OK) {
                    rc = jobs[r].rc;
                    *err = jobs[r].err;
                }
                per += (jobs[r].t1 - jobs[r].t0) / jobs[r].n / (double)R;
            } else if (rc == GS_OK && d) {
                rc = gs_error_set(err, GS_ERR_RUNTIME, "calibrate: cannot start a thread");
            }
            for (int k = 0; k < GS_STREAM_COUNT; k++)
                if (jobs[r].st[k])
                    c->ops->stream_destroy(d, jobs[r].st[k]);
        }
        getrusage(RUSAGE_SELF, &u1);
        if (d)
            c->ops->close(d);
        double cpu = rusage_s(&u1) - rusage_s(&u0), events = (double)R * (double)(c->quick ? 40 : 150);
        double cpu_per = cpu / events;
        c->dispatch_ranks[w % CALIB_DISPATCH_SIZES] = R;
        if (cross) {
            int at = w % CALIB_DISPATCH_SIZES;
            c->wake_s[at] = per - c->dispatch_s[at] > 0 ? per - c->dispatch_s[at] : 0;
            double extra = cpu_per - c->dispatch_cpu_s[at];
            /* CPU work of a wake-up is part of its time: at most all of it */
            c->wake_cpu_s[at] = extra <= 0 ? 0 : fmin(extra, c->wake_s[at]);
        } else {
            c->dispatch_s[w] = per;
            c->dispatch_cpu_s[w] = fmin(cpu_per, per);
        }
    }
    c->launch_s = c->dispatch_s[0];
    return rc;
}

/* ---- many ranks: the cores test and the collectives ---------------------------------------------------- */

typedef struct rank_job {
    gs__calib_host *c;
    gs_drv *d;
    uint64_t rank, n;
    int what;       /* C_* or -1: the cores test */
    size_t bytes;   /* nccl-tests size */
    uint64_t members[8];
    double t[4]; /* collectives: the warm-up call's seconds, the timed call's; the cores test: start, end
                  * on the driver clock and in thread CPU time */
    float *a, *b;
} rank_job;

static gs_status rank_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    rank_job *j = arg;
    const gs_driver_ops *ops = j->c->ops;
    gs_drv *d = j->d;
    if (j->what < 0) {
        gs_cal_gemm g = {ops, j->a, j->a, j->b, 128, 128, 128, NULL, NULL, 1, 0};
        j->t[0] = ops->clock_s(d);
        j->t[2] = gs__calib_now_s(j->c, d);
        for (size_t i = 0; i < j->c->cores_calls; i++)
            gs_cal_gemm_fwd(&g, s);
        j->t[1] = ops->clock_s(d);
        j->t[3] = gs__calib_now_s(j->c, d);
        return GS_OK;
    }
    gs_drv_group g = {GS_GROUP_DP, 0, j->n, j->rank, j->members};
    size_t floats = j->bytes / 4;
    gs_status rc = GS_OK;
    for (int r = 0; r <= 1 && rc == GS_OK; r++) { /* call 0 meets the members, call 1 is timed */
        double t0 = ops->clock_s(d);
        switch (j->what) {
        case GS_CAL_C_AG: rc = ops->all_gather(d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_RS: rc = ops->reduce_scatter(d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_AR: rc = ops->all_reduce(d, s, j->rank, &g, j->a, floats, err); break;
        case GS_CAL_C_BC: rc = ops->broadcast(d, s, j->rank, &g, j->a, floats, 0, err); break;
        default:
            /* ping-pong: half the round trip */
            if (j->rank == 0) {
                if ((rc = ops->send(d, s, 0, 1, j->a, j->bytes, err)) == GS_OK)
                    rc = ops->recv(d, s, 0, 1, j->b, j->bytes, err);
            } else {
                if ((rc = ops->recv(d, s, 1, 0, j->b, j->bytes, err)) == GS_OK)
                    rc = ops->send(d, s, 1, 0, j->b, j->bytes, err);
            }
            break;
        }
        if (r == 1 && j->rank == 0 && rc == GS_OK) {
            double late = gs_cal_spell_next(&j->c->spell);
            if (late > 0)
                gs_cal_sleep(late);
        }
        j->t[r] = (ops->clock_s(d) - t0) * (j->what == GS_CAL_C_P2P ? 0.5 : 1.0);
    }
    return rc;
}

/* A driver of n ranks, each with a stream, kept open across launches. */
typedef struct rank_pool {
    gs_drv *d;
    gs_drv_stream *st[16];
    uint64_t n;
} rank_pool;

static gs_status pool_open(gs__calib_host *c, uint64_t n, rank_pool *p, gs_error *err)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    gs_mesh mesh;
    gs_status rc = gs_mesh_init(&mesh, 1, n, 1, NULL, n, err);
    gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
    if (rc == GS_OK)
        rc = c->ops->open(&mesh, &o, &p->d, err);
    for (uint64_t r = 0; r < n && rc == GS_OK; r++)
        rc = c->ops->stream_create(p->d, r, GS_STREAM_DP, &p->st[r], err);
    return rc;
}

static void pool_close(gs__calib_host *c, rank_pool *p)
{
    for (uint64_t r = 0; r < p->n; r++)
        if (p->st[r])
            c->ops->stream_destroy(p->d, p->st[r]);
    if (p->d)
        c->ops->close(p->d);
    memset(p, 0, sizeof *p);
}

/* Runs jobs[0..n) on the pool's ranks and waits for every one. */
static gs_status pool_run(gs__calib_host *c, rank_pool *p, rank_job *jobs, gs_error *err)
{
    gs_status rc = GS_OK;
    uint64_t launched = 0;
    for (; launched < p->n && rc == GS_OK; launched++) {
        jobs[launched].d = p->d;
        rc = c->ops->launch(p->d, p->st[launched], rank_fn, &jobs[launched], err);
    }
    for (uint64_t r = 0; r < launched; r++) {
        gs_error e2;
        gs_error_init(&e2);
        gs_status s2 = c->ops->stream_sync(p->d, p->st[r], &e2);
        if (s2 != GS_OK && rc == GS_OK) {
            rc = s2;
            *err = e2;
        }
    }
    return rc;
}

/* Runs jobs[0..n) on ranks 0..n-1 of a fresh driver. */
static gs_status run_ranks(gs__calib_host *c, uint64_t n, rank_job *jobs, gs_error *err)
{
    rank_pool p;
    gs_status rc = pool_open(c, n, &p, err);
    if (rc == GS_OK)
        rc = pool_run(c, &p, jobs, err);
    pool_close(c, &p);
    return rc;
}

/* The machine's compute as the OS shares it: P online CPUs and L other runnable threads (the
 * load other processes put on it). With k of our threads runnable, a fair scheduler gives each
 * P / (L + k) of a core (at most 1), so k threads together run at k P / (L + k) times one
 * thread's full-speed rate. k = P and k = 2P threads each run 128^3 GEMMs for about 0.5 s of
 * full-speed work (quick: 0.1 s), long enough for the scheduler's sharing to show; each thread's
 * CPU time over its wall time is its share s, so L = P / mean(s) - k; the mean of the two
 * passes, at least 0. */
gs_status gs__calib_measure_cores(gs__calib_host *c, gs_error *err)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    double P = online > 0 ? (double)online : 1.0;
    rank_job jobs[16];
    gs_status rc = GS_OK;
    float *a = calloc(128 * 128, 4), *b = calloc(128 * 128, 4);
    if (!a || !b) {
        free(a), free(b);
        return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
    }
    gs__calib_fill(a, 128 * 128, 0.01f);
    gs_cal_gemm g = {c->ops, a, a, b, 128, 128, 128, NULL, NULL, 1, 0};
    double one = gs__calib_time_calls(c, NULL, NULL, gs_cal_gemm_fwd, &g);
    free(a), free(b);
    double flops_call = 2.0 * 128 * 128 * 128;
    c->single_flops = flops_call / one;
    c->cores_calls = (size_t)ceil((c->quick ? 0.1 : 0.5) / one);
    double lsum = 0;
    for (int pass = 0; pass < 2 && rc == GS_OK; pass++) {
        uint64_t k = (uint64_t)P * (pass + 1);
        if (k > 16)
            k = 16;
        gs__calib_progress(c, "cores (%" PRIu64 " threads)", k);
        memset(jobs, 0, sizeof jobs);
        for (uint64_t r = 0; r < k; r++) {
            jobs[r] = (rank_job){.c = c, .rank = r, .n = k, .what = -1};
            jobs[r].a = calloc(128 * 128, 4);
            jobs[r].b = calloc(128 * 128, 4);
            if (!jobs[r].a || !jobs[r].b)
                rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
        }
        if (rc == GS_OK)
            rc = run_ranks(c, k, jobs, err);
        double t0 = INFINITY, t1 = 0, share = 0;
        for (uint64_t r = 0; r < k; r++) {
            t0 = fmin(t0, jobs[r].t[0]);
            t1 = fmax(t1, jobs[r].t[1]);
            share += (jobs[r].t[3] - jobs[r].t[2]) / (jobs[r].t[1] - jobs[r].t[0]) / (double)k;
            free(jobs[r].a), free(jobs[r].b);
        }
        c->multi_flops = (double)k * (double)c->cores_calls * flops_call / (t1 - t0);
        lsum += share > 0 ? P / fmin(share, 1.0) - (double)k : 0;
        c->cores_threads[pass] = k;
        c->cores_share[pass] = share;
    }
    /* Linux with sched_autogroup (the default on most distributions) shares the CPUs fairly
     * between sessions, not threads: this process gets a share of the machine whatever its
     * thread count, and the threads it has runnable split that share. Then compute.cores is the
     * share (the passes' aggregate CPU rate, in cores) and there is no background term. */
    c->autogroup = 0;
    FILE *ag = fopen("/proc/sys/kernel/sched_autogroup_enabled", "r");
    if (ag) {
        c->autogroup = fgetc(ag) == '1';
        fclose(ag);
    }
    if (c->autogroup) {
        double agg = 0.5 * ((double)c->cores_threads[0] * c->cores_share[0] +
                            (double)c->cores_threads[1] * c->cores_share[1]);
        c->cores = agg > P ? P : agg > 0.01 ? agg : 0.01;
        c->background = 0;
    } else {
        c->cores = P;
        c->background = lsum / 2 > 0 ? lsum / 2 : 0;
    }
    return rc;
}

/* The ranks' collectives. A repeat is one pass over every (op, group size, size), each point a
 * warm-up call (it absorbs the members' staggered starts) then one timed call, on a driver per
 * group size kept open throughout (hot, as in a step); the point is the median over the passes
 * of the slowest member's time (the call ends when the last one leaves). Passes over the whole grid,
 * not repeats back to back per point, so that a slow spell of the machine (another job, a
 * scheduler slice; tens of ms) lands in one repeat of many points, which the median drops,
 * rather than in every repeat of a few neighbouring sizes, which would bend the fit. The
 * buffers are allocated once, at the largest size, for every rank. */
gs_status gs__calib_measure_colls(gs__calib_host *c, gs_error *err)
{
    gs_status rc = GS_OK;
    size_t maxb = c->nsizes ? c->sizes[c->nsizes - 1] : 0;
    size_t npts = (size_t)GS_CAL_C_COUNT * GS_CAL_GROUPS * CALIB_MAX_SIZES;
    float *bufa[8] = {0}, *bufb[8] = {0};
    rank_pool pool[GS_CAL_GROUPS];
    memset(pool, 0, sizeof pool);
    for (int gi = 0; gi < GS_CAL_GROUPS && rc == GS_OK; gi++)
        rc = pool_open(c, gs_cal_group_sizes[gi], &pool[gi], err);
    double *rep_s = calloc(npts * (size_t)c->reps, sizeof *rep_s); /* [op][gi][si][rep] */
    if (!rep_s)
        rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
    for (int r = 0; r < 8 && rc == GS_OK; r++) {
        bufa[r] = malloc(maxb), bufb[r] = malloc(maxb);
        if (!bufa[r] || !bufb[r])
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for 2 x %zu B buffers per rank", maxb);
        else
            gs__calib_fill(bufa[r], maxb / 4, 0.5f);
    }
#define REP_AT(op, gi, si, rep)                                                                                 \
    (((((size_t)(op) * GS_CAL_GROUPS + (size_t)(gi)) * CALIB_MAX_SIZES + (si)) * (size_t)c->reps) + (size_t)(rep))
    for (int rep = 0; rep < c->reps && rc == GS_OK; rep++)
        for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++)
            for (int gi = 0; gi < GS_CAL_GROUPS && rc == GS_OK; gi++) {
                uint64_t n = op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi];
                if (op == GS_CAL_C_P2P && gi > 0)
                    break;
                for (size_t si = 0; si < c->nsizes && rc == GS_OK; si++) {
                    size_t bytes = c->sizes[si];
                    gs__calib_progress(c, "%s, %" PRIu64 " ranks, %zu B, repeat %d/%d", gs_cal_c_names[op], n, bytes,
                             rep + 1, c->reps);
                    rank_job jobs[8];
                    memset(jobs, 0, sizeof jobs);
                    for (uint64_t r = 0; r < n; r++) {
                        jobs[r].c = c;
                        jobs[r].rank = r;
                        jobs[r].n = n;
                        jobs[r].what = op;
                        jobs[r].bytes = bytes;
                        for (uint64_t m = 0; m < n; m++)
                            jobs[r].members[m] = m;
                        jobs[r].a = bufa[r];
                        jobs[r].b = bufb[r];
                    }
                    if ((rc = pool_run(c, &pool[gi], jobs, err)) != GS_OK)
                        break;
                    double slowest = 0;
                    for (uint64_t r = 0; r < n; r++)
                        slowest = fmax(slowest, jobs[r].t[1]);
                    rep_s[REP_AT(op, gi, si, rep)] = slowest;
                }
            }
    for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS && !(op == GS_CAL_C_P2P && gi > 0); gi++)
            for (size_t si = 0; si < c->nsizes; si++)
                c->coll_s[op][gi][si] = gs_calib_median(rep_s + REP_AT(op, gi, si, 0), (size_t)c->reps);
#undef REP_AT
    for (int gi = 0; gi < GS_CAL_GROUPS; gi++)
        pool_close(c, &pool[gi]);
    for (int r = 0; r < 8; r++)
        free(bufa[r]), free(bufb[r]);
    free(rep_s);
    return rc;
}

/* ---- a training step ----------------------------------------------------------------------------------- */

static double now_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's CPU share while it runs the scenario's training step for real (the exec
 * backend on this driver): CPU time of the whole process over the wall time of the second of
 * two steps (the first warms up). This is how much of the machine an exec run gets, its
 * threads blocking and waking as the step makes them, beside whatever else the machine runs. */
gs_status gs__calib_measure_exec_share(gs__calib_host *c, const char *scenario, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x = NULL;
    gs_exec_opts o;
    gs_exec_opts_defaults(&o);
    o.driver = c->ops;
    o.driver_set = gs_cli_driver_settings();
    gs_status rc = gs_cli_load(scenario, &s, &mesh, err);
    if (rc == GS_OK)
        rc = gs_exec_session_create(&s, &mesh, &o, &x, err);
    for (int step = 0; step < 2 && rc == GS_OK; step++) {
        gs__calib_progress(c, "a training step of %s (%d/2)", scenario, step + 1);
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        double w0 = now_wall();
        rc = gs_exec_session_step(x, NULL, NULL, NULL, err);
        double w1 = now_wall();
        getrusage(RUSAGE_SELF, &r1);
        double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + 1e-6 * (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + 1e-6 * (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
        c->exec_share = w1 > w0 ? cpu / (w1 - w0) : 0;
        c->exec_ranks = mesh.world;
    }
    gs_exec_session_destroy(x);
    return rc;
}
