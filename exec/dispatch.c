/* The exec dispatcher: a host thread per rank issues that rank's events to their streams with
 * driver events for cross-stream dependencies, then reads the recorded times back. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/dispatch.h"

typedef struct gs_dispatch gs_dispatch;

typedef struct ev_job {
    gs_dispatch *d;
    size_t ri, ei;
    int fail; /* 1 + gs_fault_kind when the test hook hits this event, else 0 */
    double start; /* driver clock: when a collective / p2p found its parties; -1 unknown */
} ev_job;

typedef struct rank_state {
    gs_drv_stream *streams[GS_STREAM_COUNT];
    gs_drv_event **posted, **ended; /* per event */
    gs_drv_event **started;         /* per event, drivers with arm_start: its work's first enqueue */
    ev_job *jobs;                   /* per event */
    unsigned char *done;            /* per event: 1 once its work completed (atomic) */
    int dead;                       /* test hook: the rank died (read and written atomically) */
} rank_state;

struct gs_dispatch {
    const gs_driver_ops *ops;
    gs_drv *drv;
    const gs_schedule *sch;
    size_t only; /* the one rank list this process plays, or GS_DISPATCH_ALL */
    rank_state *ranks;
    /* per step */
    gs_dispatch_run_fn run;
    void *prog;
    const gs_dispatch_opts *opts;
    gs_timing *const *timing;
    gs_error *rank_err;
    gs_status *rank_rc;
    double t0;
    uint64_t completed; /* events completed in this step, every rank (atomic): the watchdog's progress */
    int wedged;         /* a rank's thread was given up after an abort: nothing may be freed */
    pthread_mutex_t mu; /* guards finished */
    pthread_cond_t cv;  /* signalled when a rank thread finishes (CLOCK_MONOTONIC) */
    size_t finished;    /* rank threads of this step that returned */
};

void gs_dispatch_destroy(gs_dispatch *d)
{
    if (!d || d->wedged)
        return; /* wedged: a given-up thread may still use all of it */
    if (d->ranks)
        for (size_t i = 0; i < d->sch->nranks; i++) {
            rank_state *r = &d->ranks[i];
            for (int k = 0; k < GS_STREAM_COUNT; k++)
                if (r->streams[k])
                    d->ops->stream_destroy(d->drv, r->streams[k]);
            for (size_t e = 0; e < d->sch->ranks[i].nevents; e++) {
                if (r->posted && r->posted[e])
                    d->ops->event_destroy(d->drv, r->posted[e]);
                if (r->ended && r->ended[e])
                    d->ops->event_destroy(d->drv, r->ended[e]);
                if (r->started && r->started[e])
                    d->ops->event_destroy(d->drv, r->started[e]);
            }
            free(r->posted);
            free(r->ended);
            free(r->started);
            free(r->jobs);
            free(r->done);
        }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->ranks);
    free(d);
}

gs_status gs_dispatch_create(const gs_driver_ops *ops, gs_drv *drv, const gs_schedule *sch, gs_dispatch **out,
                             gs_error *err)
{
    return gs_dispatch_create_local(ops, drv, sch, GS_DISPATCH_ALL, out, err);
}

int gs_dispatch_is_local(const gs_dispatch *d, size_t i)
{
    return i < d->sch->nranks && (d->only == GS_DISPATCH_ALL || d->only == i);
}

gs_status gs_dispatch_create_local(const gs_driver_ops *ops, gs_drv *drv, const gs_schedule *sch, size_t only,
                                   gs_dispatch **out, gs_error *err)
{
    *out = NULL;
    if (only != GS_DISPATCH_ALL && only >= sch->nranks)
        return gs_error_set(err, GS_ERR_INPUT, "exec: rank list %zu of a schedule of %zu", only, sch->nranks);
    if (!sch->exact && sch->nranks != sch->mesh.world)
        return gs_error_set(err, GS_ERR_INPUT, "exec: the schedule holds one rank per class; exec needs every rank");
    gs_status rc = GS_OK;
    gs_dispatch *d = calloc(1, sizeof *d);
    if (!d)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    d->ops = ops;
    d->drv = drv;
    d->sch = sch;
    d->only = only;
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!(d->ranks = calloc(sch->nranks ? sch->nranks : 1, sizeof *d->ranks))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *re = &sch->ranks[i];
        rank_state *r = &d->ranks[i];
        size_t n = re->nevents ? re->nevents : 1;
        if (!gs_dispatch_is_local(d, i))
            continue; /* another process plays it */
        r->posted = calloc(n, sizeof *r->posted);
        r->ended = calloc(n, sizeof *r->ended);
        r->started = ops->arm_start ? calloc(n, sizeof *r->started) : NULL;
        r->jobs = calloc(n, sizeof *r->jobs);
        r->done = calloc(n, 1);
        if (!r->posted || !r->ended || !r->jobs || !r->done || (ops->arm_start && !r->started)) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s events", re->rank);
            goto out;
        }
        for (int k = 0; k < GS_STREAM_COUNT; k++)
            if ((rc = ops->stream_create(drv, re->rank, (gs_stream)k, &r->streams[k], err)) != GS_OK)
                goto out;
        for (size_t e = 0; e < re->nevents; e++) {
            const gs_event *ev = &re->events[e];
            const uint32_t *deps = gs_event_list(re, ev, GS_LINK_DEPS);
            for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS]; j++)
                if (deps[j] >= e) {
                    char name[GS_EVENT_NAME_BYTES];
                    gs_event_name(re, ev, name, sizeof name);
                    rc = gs_error_set(err, GS_ERR_INPUT,
                                      "exec: rank %" PRIu64 " event %s depends on a later event (%" PRIu32 ")",
                                      re->rank, name, deps[j]);
                    goto out;
                }
            if ((rc = ops->event_create(drv, &r->posted[e], err)) != GS_OK ||
                (rc = ops->event_create(drv, &r->ended[e], err)) != GS_OK ||
                (r->started && (rc = ops->event_create(drv, &r->started[e], err)) != GS_OK))
                goto out;
        }
    }
out:
    if (rc != GS_OK) {
        gs_dispatch_destroy(d);
        return rc;
    }
    *out = d;
    return GS_OK;
}

void gs_dispatch_progress(const gs_dispatch *d, uint64_t *done, uint64_t *total)
{
    *done = __atomic_load_n(&d->completed, __ATOMIC_RELAXED);
    *total = 0;
    for (size_t i = 0; i < d->sch->nranks; i++)
        if (gs_dispatch_is_local(d, i))
            *total += d->sch->ranks[i].nevents;
}

int gs_dispatch_wedged(const gs_dispatch *d)
{
    return d && d->wedged;
}

gs_drv_stream *gs_dispatch_stream(gs_dispatch *d, size_t i, gs_stream k)
{
    return i < d->sch->nranks && (int)k < GS_STREAM_COUNT ? d->ranks[i].streams[k] : NULL;
}

/* The work of one event, on its stream: the program's callback, its errors named. */
static gs_status run_event(void *arg, gs_drv_stream *s, gs_error *err)
{
    ev_job *j = arg;
    gs_dispatch *d = j->d;
    const gs_rank_events *re = &d->sch->ranks[j->ri];
    rank_state *r = &d->ranks[j->ri];
    gs_status rc;
    if (__atomic_load_n(&r->dead, __ATOMIC_ACQUIRE))
        return GS_OK; /* a dead rank does nothing more */
    if (j->fail == 1 + GS_FAULT_DIE) {
        __atomic_store_n(&r->dead, 1, __ATOMIC_RELEASE);
        return GS_OK;
    }
    if (d->ops->event_begin) {
        char name[GS_EVENT_NAME_BYTES];
        gs_event_name(re, &re->events[j->ei], name, sizeof name);
        d->ops->event_begin(d->drv, s, name);
    }
    if (j->fail == 1 + GS_FAULT_STALL) {
        const struct timespec nap = {0, 10 * 1000 * 1000};
        while (!d->ops->aborted(d->drv, NULL))
            nanosleep(&nap, NULL);
        rc = gs_error_set(err, GS_ERR_RUNTIME, "stalled (test hook) until the run was aborted");
    } else if (j->fail)
        rc = gs_error_set(err, GS_ERR_RUNTIME, "injected failure (test hook)");
    else if ((rc = d->run(d->prog, j->ri, j->ei, s, err)) == GS_OK) {
        __atomic_store_n(&r->done[j->ei], 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&d->completed, 1, __ATOMIC_RELAXED);
    }
    if (d->ops->event_end)
        d->ops->event_end(d->drv, s);
    j->start = d->ops->op_start_s ? d->ops->op_start_s(d->drv, s) : -1;
    if (rc != GS_OK) {
        char name[GS_EVENT_NAME_BYTES];
        gs_event_name(re, &re->events[j->ei], name, sizeof name);
        gs_error_prefix(err, "rank %" PRIu64 ": event %s", re->rank, name);
    }
    return rc;
}

/* Every event of rank list i completed (a rank that died in its last events, which nothing
 * waits for, is seen here); else aborts the run naming the first event that did not. */
static gs_status check_all_done(gs_dispatch *d, size_t i, gs_error *err)
{
    const gs_rank_events *re = &d->sch->ranks[i];
    for (size_t e = 0; e < re->nevents; e++)
        if (!__atomic_load_n(&d->ranks[i].done[e], __ATOMIC_ACQUIRE)) {
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(re, &re->events[e], name, sizeof name);
            gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s: did not complete (the rank stopped running "
                         "its events: it died or was stopped), so the step failed", re->rank, name);
            d->ops->abort(d->drv, err->msg);
            return GS_ERR_RUNTIME;
        }
    return GS_OK;
}

static void issue_rank(gs_dispatch *d, size_t i)
{
    const gs_rank_events *re = &d->sch->ranks[i];
    rank_state *r = &d->ranks[i];
    const gs_driver_ops *ops = d->ops;
    gs_error *err = &d->rank_err[i];
    gs_status rc = GS_OK;
    const char *fail = d->opts ? d->opts->fail_event : NULL;
    __atomic_store_n(&r->dead, 0, __ATOMIC_RELEASE);
    /* Exactly the schedule: each event after its stream's previous one (the stream's order) and
     * after its dependencies on other streams; nothing added, dropped or reordered. Buffers the
     * streams share are the schedule's scratch tensors, whose order validation checks. */
    for (size_t e = 0; e < re->nevents; e++)
        __atomic_store_n(&r->done[e], 0, __ATOMIC_RELEASE);
    for (size_t e = 0; e < re->nevents && rc == GS_OK; e++) {
        const gs_event *ev = &re->events[e];
        gs_drv_stream *s = r->streams[ev->stream < GS_STREAM_COUNT ? ev->stream : GS_STREAM_COMPUTE];
        const uint32_t *deps = gs_event_list(re, ev, GS_LINK_DEPS);
        for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS] && rc == GS_OK; j++)
            if (re->events[deps[j]].stream != ev->stream)
                rc = ops->stream_wait_event(d->drv, s, r->ended[deps[j]], err);
        ev_job *job = &r->jobs[e];
        job->d = d;
        job->ri = i;
        job->ei = e;
        job->fail = 0;
        job->start = -1;
        if (fail && re->rank == d->opts->fail_rank) {
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(re, ev, name, sizeof name);
            job->fail = strcmp(name, fail) == 0 ? 1 + (int)d->opts->fail_kind : 0;
        }
        if (rc == GS_OK)
            rc = ops->event_record(d->drv, s, r->posted[e], err);
        if (rc == GS_OK && r->started)
            ops->arm_start(d->drv, s, r->started[e]);
        if (rc == GS_OK)
            rc = ops->launch(d->drv, s, run_event, job, err);
        if (rc == GS_OK)
            rc = ops->event_record(d->drv, s, r->ended[e], err);
    }
    if (rc != GS_OK) {
        /* could not issue: stop everyone rather than leave the peers waiting */
        ops->abort(d->drv, err->msg);
    }
    for (int k = 0; k < GS_STREAM_COUNT; k++) {
        gs_error e2;
        gs_error_init(&e2);
        gs_status s2 = ops->stream_sync(d->drv, r->streams[k], &e2);
        if (s2 != GS_OK && rc == GS_OK) {
            rc = s2;
            *err = e2;
        }
    }
    if (rc == GS_OK)
        rc = check_all_done(d, i, err);
    d->rank_rc[i] = rc;
    if (rc == GS_OK && d->timing && d->timing[i])
        for (size_t e = 0; e < re->nevents; e++) {
            gs_timing *t = &d->timing[i][e];
            t->posted_s = ops->event_time_s(d->drv, r->posted[e]) - d->t0;
            t->start_s = r->jobs[e].start >= 0 ? r->jobs[e].start - d->t0
                         : r->started ? ops->event_time_s(d->drv, r->started[e]) - d->t0
                                      : t->posted_s;
            if (t->start_s < t->posted_s)
                t->start_s = t->posted_s;
            t->end_s = ops->event_time_s(d->drv, r->ended[e]) - d->t0;
        }
}

typedef struct rank_thread {
    gs_dispatch *d;
    size_t i;
} rank_thread;

static void *rank_main(void *arg)
{
    rank_thread *t = arg;
    issue_rank(t->d, t->i);
    pthread_mutex_lock(&t->d->mu);
    t->d->finished++;
    pthread_cond_signal(&t->d->cv);
    pthread_mutex_unlock(&t->d->mu);
    return NULL;
}

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The watchdog's message: the ranks whose events have not all completed, each at its first
 * unfinished event (the culprit first: the rank with the fewest unfinished events, whose peers
 * would be waiting for it). */
static void stall_message(gs_dispatch *d, double timeout_s, char *msg, size_t cap)
{
    size_t best = SIZE_MAX, best_left = SIZE_MAX, at = 0;
    for (size_t i = 0; i < d->sch->nranks; i++) {
        if (!gs_dispatch_is_local(d, i))
            continue;
        size_t left = 0;
        for (size_t e = 0; e < d->sch->ranks[i].nevents; e++)
            left += !__atomic_load_n(&d->ranks[i].done[e], __ATOMIC_ACQUIRE);
        if (left && left < best_left) {
            best = i;
            best_left = left;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0, shown = 0; i < d->sch->nranks && shown < 4 && at + 1 < cap; i++) {
            const gs_rank_events *re = &d->sch->ranks[i];
            if (!gs_dispatch_is_local(d, i) || (pass == 0) != (i == best))
                continue;
            size_t e = 0;
            while (e < re->nevents && __atomic_load_n(&d->ranks[i].done[e], __ATOMIC_ACQUIRE))
                e++;
            if (e == re->nevents)
                continue;
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(re, &re->events[e], name, sizeof name);
            if (pass == 0)
                at += (size_t)snprintf(msg + at, cap - at, "rank %" PRIu64 ": event %s: did not complete within %g s "
                                       "(no event of the step completed meanwhile: stalled)", re->rank, name, timeout_s);
            else
                at += (size_t)snprintf(msg + at, cap - at, "%s rank %" PRIu64 " at event %s",
                                       shown ? "," : "; also unfinished:", re->rank, name), shown++;
        }
    if (at == 0)
        snprintf(msg, cap, "exec: no event of the step completed within %g s (stalled)", timeout_s);
}

/* Waits for the n rank threads (started[i]) with deadlines: a step in which no event completes
 * for timeout_s + 0.5 s is aborted (the watchdog; the driver's own timeouts, which name the
 * waits, come first where a rank waits for another), and once the run is aborted, threads not
 * back within GRACE_S are given up (detached; the dispatcher is then wedged). */
#define GRACE_S 0.8
static gs_status join_ranks(gs_dispatch *d, pthread_t *th, const int *started, size_t n, double timeout_s,
                            gs_error *err)
{
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += started[i] != 0;
    uint64_t seen = __atomic_load_n(&d->completed, __ATOMIC_RELAXED);
    double progress_t = mono_s(), aborted_t = -1;
    pthread_mutex_lock(&d->mu);
    while (d->finished < want) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += 100 * 1000 * 1000;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->cv, &d->mu, &dl);
        if (d->finished >= want)
            break;
        pthread_mutex_unlock(&d->mu);
        double now = mono_s();
        uint64_t c = __atomic_load_n(&d->completed, __ATOMIC_RELAXED);
        if (c != seen) {
            seen = c;
            progress_t = now;
        }
        int aborted = d->ops->aborted(d->drv, NULL);
        if (!aborted && now - progress_t > timeout_s + 0.5) {
            char msg[GS_ERROR_MSG_BYTES];
            stall_message(d, timeout_s, msg, sizeof msg);
            d->ops->abort(d->drv, msg);
            aborted = 1;
        }
        if (aborted && aborted_t < 0)
            aborted_t = now;
        pthread_mutex_lock(&d->mu);
        if (aborted_t >= 0 && now - aborted_t > GRACE_S && d->finished < want) {
            d->wedged = 1;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    for (size_t i = 0; i < n; i++)
        if (started[i]) {
            if (d->wedged)
                pthread_detach(th[i]); /* finished ones too: which are is not known here */
            else
                pthread_join(th[i], NULL);
        }
    if (d->wedged)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: a rank's work did not stop within %g s of the abort; its "
                            "threads are left running", GRACE_S);
    return GS_OK;
}

gs_status gs_dispatch_step(gs_dispatch *d, gs_dispatch_run_fn run, void *prog, const gs_dispatch_opts *opts,
                           gs_timing *const *timing, gs_error *rank_err, gs_error *err)
{
    size_t n = d->sch->nranks;
    if (d->wedged)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: an earlier step left a rank's work running; no step can run");
    gs_status rc = GS_OK;
    /* the threads' own storage (a wedged step leaves it to them) */
    gs_error *errs = calloc(n ? n : 1, sizeof *errs);
    gs_status *rcs = calloc(n ? n : 1, sizeof *rcs);
    pthread_t *th = calloc(n ? n : 1, sizeof *th);
    rank_thread *args = calloc(n ? n : 1, sizeof *args);
    int *started = calloc(n ? n : 1, sizeof *started);
    if (!errs || !rcs || !th || !args || !started) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        gs_error_init(&errs[i]);
    d->run = run;
    d->prog = prog;
    d->opts = opts;
    d->timing = timing;
    d->rank_err = errs;
    d->rank_rc = rcs;
    d->t0 = d->ops->clock_s(d->drv);
    d->finished = 0;
    __atomic_store_n(&d->completed, 0, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        if (!gs_dispatch_is_local(d, i))
            continue;
        args[i] = (rank_thread){d, i};
        started[i] = pthread_create(&th[i], NULL, rank_main, &args[i]) == 0;
        if (!started[i]) {
            gs_error_set(&errs[i], GS_ERR_RUNTIME, "exec: cannot start the thread of rank %" PRIu64,
                         d->sch->ranks[i].rank);
            rcs[i] = GS_ERR_RUNTIME;
            d->ops->abort(d->drv, errs[i].msg);
        }
    }
    gs_error jerr;
    gs_error_init(&jerr);
    gs_status jrc = join_ranks(d, th, started, n, opts && opts->timeout_s > 0 ? opts->timeout_s : 60.0, &jerr);
    /* the abort's message names the first failure; report it rather than a bystander's */
    if (d->ops->aborted(d->drv, err))
        rc = GS_ERR_RUNTIME;
    else if (jrc != GS_OK) {
        rc = jrc;
        *err = jerr;
    }
    if (d->wedged) {
        if (jrc != GS_OK) /* say that the threads were left, after what stopped the run */
            snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (%s)", jerr.msg);
        return rc; /* errs, rcs, th, args, started stay the given-up threads' */
    }
    for (size_t i = 0; i < n && rc == GS_OK; i++)
        if (rcs[i] != GS_OK) {
            rc = rcs[i];
            *err = errs[i];
        }
    if (rank_err)
        memcpy(rank_err, errs, n * sizeof *errs);
out:
    free(errs);
    free(rcs);
    free(th);
    free(args);
    free(started);
    return rc;
}
