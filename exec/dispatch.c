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
};

void gs_dispatch_destroy(gs_dispatch *d)
{
    if (!d)
        return;
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
        }
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
        if (!r->posted || !r->ended || !r->jobs || (ops->arm_start && !r->started)) {
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
    else
        rc = d->run(d->prog, j->ri, j->ei, s, err);
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
    return NULL;
}

gs_status gs_dispatch_step(gs_dispatch *d, gs_dispatch_run_fn run, void *prog, const gs_dispatch_opts *opts,
                           gs_timing *const *timing, gs_error *rank_err, gs_error *err)
{
    size_t n = d->sch->nranks;
    gs_status rc = GS_OK;
    gs_error *errs = rank_err ? rank_err : calloc(n ? n : 1, sizeof *errs);
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
    for (size_t i = 0; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    /* the abort's message names the first failure; report it rather than a bystander's */
    if (d->ops->aborted(d->drv, err))
        rc = GS_ERR_RUNTIME;
    for (size_t i = 0; i < n && rc == GS_OK; i++)
        if (rcs[i] != GS_OK) {
            rc = rcs[i];
            *err = errs[i];
        }
out:
    if (!rank_err)
        free(errs);
    free(rcs);
    free(th);
    free(args);
    free(started);
    return rc;
}
