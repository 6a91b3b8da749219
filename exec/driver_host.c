/* The host driver: every rank is a set of CPU threads (one worker per stream), buffers are
 * malloc'd, compute ops are kernels/host, collectives meet in shared memory (sums in ascending
 * rank order), send/recv go through per-pair mailboxes, and every wait gives up after the
 * driver's timeout or when any rank aborts. One mutex guards all shared state (simple and
 * deadlock-free); every waiting thread parks on a condition variable of its own, listed with the
 * object it waits on (a stream's queue, a stream going idle, an event, a collective slot, a
 * mailbox), and a state change signals only the waiters on the object that changed (abort signals
 * them all). One shared condition variable woke every thread of every rank on every change:
 * ~100 ms of CPU per step for 2 ranks, growing with the square of the rank count. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/boot.h"
#include "exec/driver.h"
#include "exec/driver_host_internal.h"
#include "kernels/host/kernels.h"

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The monotonic time s seconds from now (waits use CLOCK_MONOTONIC: a clock step cannot end or
 * stretch them). Saturating: a non-finite, negative or huge s gives now or about 68 years on. */
struct timespec gs__host_deadline_in(double s)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!(s > 0))
        return t;
    const double max_s = 2147483647.0; /* whatever time_t's width */
    if (s > max_s - (double)t.tv_sec)
        s = max_s - (double)t.tv_sec;
    time_t whole = (time_t)s;
    long ns = t.tv_nsec + (long)((s - (double)whole) * 1e9);
    t.tv_sec += whole + ns / 1000000000L;
    t.tv_nsec = ns % 1000000000L;
    return t;
}

/* Parks the calling thread until gs__host_notify(d, on) or an abort signals it, or until dl
 * (NULL: no deadline) passes (mu held; released while parked). Returns pthread_cond_*wait's
 * status. Like any condition wait it may return early: callers re-check their condition in a
 * loop. */
static int park(gs_drv *d, const void *on, const struct timespec *dl, const wait_for *wf)
{
    waiter w = {.prev = NULL, .next = d->waiters, .on = on, .wf = wf};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gs__host_deadline_in's clock */
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (d->waiters)
        d->waiters->prev = &w;
    d->waiters = &w;
    int rc = dl ? pthread_cond_timedwait(&w.cv, &d->mu, dl) : pthread_cond_wait(&w.cv, &d->mu);
    /* mu is held again: no notifier is inside pthread_cond_signal on w.cv now, and none will
     * find w once it is unlinked */
    if (w.prev)
        w.prev->next = w.next;
    else
        d->waiters = w.next;
    if (w.next)
        w.next->prev = w.prev;
    pthread_cond_destroy(&w.cv);
    return rc;
}

/* Wakes the threads parked on `on` (mu held), and only those. */
void gs__host_notify(gs_drv *d, const void *on)
{
    for (waiter *w = d->waiters; w; w = w->next)
        if (w->on == on)
            pthread_cond_signal(&w->cv);
}

/* Waits for `on` to change (mu held); wf: what other ranks it waits for (NULL: none). Returns 0
 * when woken, 1 on abort, 2 on timeout. */
int gs__host_wait_until(gs_drv *d, const void *on, const struct timespec *dl, const wait_for *wf)
{
    if (d->aborted)
        return 1;
    int rc = park(d, on, dl, wf);
    if (d->aborted)
        return 1;
    return rc == ETIMEDOUT ? 2 : 0;
}

void gs__host_abort_locked(gs_drv *d, const char *msg)
{
    if (!d->aborted) {
        d->aborted = 1;
        gs_error_set(&d->abort_err, GS_ERR_RUNTIME, "%s", msg);
        /* a failure here stops the other processes' ranks too */
        if (gs_boot_active(d->boot) && !d->peer_abort)
            d->boot->announce_abort(d->boot->ctx, msg);
    }
    /* every parked thread, whatever it waits on */
    for (waiter *w = d->waiters; w; w = w->next)
        pthread_cond_signal(&w->cv);
}

/* Another process aborted the run (mu held): stop here with its message, not announced again. */
void gs__host_peer_abort_locked(gs_drv *d, const char *msg)
{
    if (!d->aborted)
        d->peer_abort = 1;
    gs__host_abort_locked(d, msg);
}

void gs__host_abort(gs_drv *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    gs__host_abort_locked(d, msg);
    pthread_mutex_unlock(&d->mu);
}

static int host_aborted(gs_drv *d, gs_error *err)
{
    char msg[GS_ERROR_MSG_BYTES];
    pthread_mutex_lock(&d->mu);
    if (!d->aborted && gs_boot_active(d->boot) && d->boot->peer_aborted(d->boot->ctx, msg, sizeof msg))
        gs__host_peer_abort_locked(d, msg);
    int a = d->aborted;
    if (a && err)
        *err = d->abort_err;
    pthread_mutex_unlock(&d->mu);
    return a;
}

/* 1 when msg is abort_msg with context prepended ("rank 3: event E: " + abort_msg), i.e. the work
 * that failed with msg is the one whose wait aborted the run, not a bystander ("...: stopped: "). */
static int adds_context(const char *msg, const char *abort_msg)
{
    size_t n = strlen(msg), a = strlen(abort_msg);
    static const char stopped[] = "stopped: ";
    size_t k = sizeof stopped - 1;
    if (n <= a || strcmp(msg + n - a, abort_msg) != 0)
        return 0;
    return !(n - a >= k && strncmp(msg + n - a - k, stopped, k) == 0);
}

/* The rank wf waits for: a recv's sender, or the lowest member of the collective's group whose
 * input is missing (UINT64_MAX: none is, any more). */
static uint64_t waited_rank(const wait_for *wf)
{
    if (!wf->g)
        return wf->peer;
    for (uint64_t i = 0; i < wf->g->size; i++)
        if (!wf->slot->in[i] && wf->g->members[i] != wf->rank)
            return wf->g->members[i];
    return UINT64_MAX;
}

/* A timed-out wait on rank r: appends to msg (cap bytes) whom r waits for in turn, and so on, up
 * to the first rank that waits for no other rank: the one that stalled, died or is still
 * computing. The first rank to time out is the one whose wait began first, which can be a
 * bystander waiting on a rank that is itself stuck behind the culprit. mu held; every rank's
 * cross-rank waits are parked waiters (one process only: another process's ranks are not
 * visible, and the chain stops there). */
static void append_chain(const gs_drv *d, char *msg, size_t cap, uint64_t from, uint64_t r)
{
    enum { MAX_HOPS = 8 };
    uint64_t seen[MAX_HOPS + 2];
    size_t nseen = 0, at = strlen(msg);
    seen[nseen++] = from; /* the timed-out rank (no longer parked): waiting on it again closes a cycle */
    while (r < d->mesh.world && nseen <= MAX_HOPS && at + 1 < cap) {
        seen[nseen++] = r;
        if (gs_boot_active(d->boot) && r != (uint64_t)d->boot->proc)
            return; /* another process's rank */
        /* a stream of r running work without waiting: r is computing, or stuck in it */
        const gs_drv_stream *run = NULL;
        for (const gs_drv_stream *s = d->streams; s && !run; s = s->next_all) {
            if (s->rank != r || !s->busy)
                continue;
            int parked = 0;
            for (const waiter *w = d->waiters; w && !parked; w = w->next)
                parked = w->wf && w->wf->s == s;
            if (!parked)
                run = s;
        }
        if (run) {
            snprintf(msg + at, cap - at, "; rank %" PRIu64 " runs %s%s%s without waiting for another rank", r,
                     run->event[0] ? "event " : "work on its ", run->event[0] ? run->event : gs_stream_name(run->kind),
                     run->event[0] ? "" : " stream");
            return;
        }
        const wait_for *wf = NULL;
        for (const waiter *w = d->waiters; w && !wf; w = w->next)
            if (w->wf && w->wf->rank == r && waited_rank(w->wf) != UINT64_MAX)
                wf = w->wf;
        if (!wf) {
            snprintf(msg + at, cap - at, "; rank %" PRIu64 " neither runs work nor waits for another rank (it died, or "
                     "has not reached this point)", r);
            return;
        }
        uint64_t next = waited_rank(wf);
        const char *op = strstr(wf->what, ": ");
        op = op ? op + 2 : wf->what;
        at += (size_t)snprintf(msg + at, cap - at, "; rank %" PRIu64 " is itself waiting%s%s%s in %s for rank %" PRIu64,
                               r, wf->s && wf->s->event[0] ? " (event " : "", wf->s ? wf->s->event : "",
                               wf->s && wf->s->event[0] ? ")" : "", op, next);
        for (size_t i = 0; i < nseen; i++)
            if (seen[i] == next) {
                if (at + 1 < cap)
                    snprintf(msg + at, cap - at, " (a cycle)");
                return;
            }
        r = next;
    }
}

/* The status of a wait that did not complete (mu held). wf: the timed-out wait's other ranks
 * (NULL: none), for the chain in the message. */
gs_status gs__host_wait_failed_for(gs_drv *d, int why, gs_error *err, const char *what, const wait_for *wf)
{
    if (why == 2) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: timed out after %g s", what, d->timeout_s);
        if (wf)
            append_chain(d, msg, sizeof msg, wf->rank, waited_rank(wf));
        gs__host_abort_locked(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return gs_error_set(err, GS_ERR_RUNTIME, "%s: stopped: %s", what, d->abort_err.msg);
}

gs_status gs__host_wait_failed(gs_drv *d, int why, gs_error *err, const char *what)
{
    return gs__host_wait_failed_for(d, why, err, what, NULL);
}

/* ---- lifetime ------------------------------------------------------------------------------- */

/* Across processes: this process's rank and one group per kind (MPI_Comm_split by group index,
 * ordered by rank, so positions are the schedule's). Collective over every process. */
static gs_status boot_open(gs_drv *d, const gs_driver_opts *opts, gs_error *err)
{
    const gs_exec_boot *b = opts->boot;
    if ((uint64_t)b->procs != d->mesh.world)
        return gs_error_set(err, GS_ERR_INPUT, "host driver: the scenario has %" PRIu64 " ranks, but %d processes were "
                            "started (one rank per process)", d->mesh.world, b->procs);
    if (!b->group_split || !b->group_allgather || !b->group_alltoall || !b->group_bcast || !b->send || !b->recv)
        return gs_error_set(err, GS_ERR_UNSUPPORTED, "host driver: the process bootstrap has no transport for "
                            "collectives across processes");
    if (!opts->group_of)
        return gs_error_set(err, GS_ERR_RUNTIME, "host driver: opened across processes without the group map");
    d->boot = b;
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++) {
        uint64_t size = 0;
        uint64_t idx = opts->group_of(&d->mesh, (gs_group_kind)k, (uint64_t)b->proc, &size);
        gs_status rc = b->group_split(b->ctx, (int)idx, b->proc, &d->comm[k], err);
        if (rc != GS_OK) {
            gs_error_prefix(err, "host driver: %s groups", gs_group_kind_name((gs_group_kind)k));
            return rc;
        }
    }
    return GS_OK;
}

static void host_close(gs_drv *d)
{
    if (!d)
        return;
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++)
        if (d->boot && d->comm[k])
            d->boot->group_free(d->boot->ctx, d->comm[k]);
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++) {
        if (d->slots[k])
            for (uint64_t i = 0; i < d->mesh.world; i++)
                free(d->slots[k][i].in);
        free(d->slots[k]);
    }
    if (d->mail)
        for (uint64_t i = 0; i < d->mesh.world * d->mesh.world; i++)
            for (mail *m = d->mail[i].head, *n; m; m = n) {
                n = m->next;
                free(m);
            }
    free(d->mail);
    free(d->inbox);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static gs_status host_open(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err)
{
    *out = NULL;
    gs_drv *d = calloc(1, sizeof *d);
    if (!d)
        return gs_error_set(err, GS_ERR_NOMEM, "host driver: out of memory");
    d->mesh = *mesh;
    d->timeout_s = opts && opts->timeout_s > 0 ? opts->timeout_s : 60.0;
    pthread_mutex_init(&d->mu, NULL);
    gs_error_init(&d->abort_err);
    uint64_t w = mesh->world;
    d->mail = calloc(w * w, sizeof *d->mail);
    d->inbox = calloc(w ? w : 1, 1);
    int ok = d->mail != NULL && d->inbox != NULL;
    for (int k = 0; k < GS_GROUP_KIND_COUNT && ok; k++) {
        d->slots[k] = calloc(w, sizeof *d->slots[k]);
        ok = d->slots[k] != NULL;
        for (uint64_t i = 0; i < w && ok; i++)
            ok = (d->slots[k][i].in = calloc(w, sizeof *d->slots[k][i].in)) != NULL;
    }
    if (!ok) {
        host_close(d);
        return gs_error_set(err, GS_ERR_NOMEM, "host driver: out of memory for %" PRIu64 " ranks", w);
    }
    const char *p2p = opts ? opts->set.host_p2p : NULL;
    if (p2p && *p2p && strcmp(p2p, "eager") != 0 && strcmp(p2p, "rendezvous") != 0) {
        host_close(d);
        return gs_error_set(err, GS_ERR_INPUT, "host driver: GRIDSTEP_HOST_P2P is '%s', expected eager or rendezvous",
                            p2p);
    }
    d->rendezvous = p2p && strcmp(p2p, "rendezvous") == 0;
    const char *gm = opts ? opts->set.host_gemm : NULL;
    if (gm && *gm && strcmp(gm, "fp32") != 0 && strcmp(gm, "bf16") != 0) {
        host_close(d);
        return gs_error_set(err, GS_ERR_INPUT, "host driver: GRIDSTEP_HOST_GEMM is '%s', expected fp32 or bf16", gm);
    }
    d->gemm_bf16 = gm && strcmp(gm, "bf16") == 0;
    if (d->rendezvous && opts && gs_boot_active(opts->boot)) {
        host_close(d);
        return gs_error_set(err, GS_ERR_INPUT, "host driver: GRIDSTEP_HOST_P2P=rendezvous works within one process "
                            "(its sends wait on the receiver's mailbox); across processes the MPI sends are eager");
    }
    if (opts && gs_boot_active(opts->boot)) {
        gs_status rc = boot_open(d, opts, err);
        if (rc != GS_OK) {
            host_close(d);
            return rc;
        }
    }
    *out = d;
    return GS_OK;
}

/* ---- memory --------------------------------------------------------------------------------- */

static void *host_alloc(gs_drv *d, uint64_t rank, uint64_t bytes)
{
    (void)d, (void)rank;
    return calloc(1, bytes ? (size_t)bytes : 1);
}

static void host_free(gs_drv *d, uint64_t rank, void *p)
{
    (void)d, (void)rank;
    free(p);
}

static void host_copy(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes)
{
    (void)d, (void)s;
    if (bytes && dst != src)
        memmove(dst, src, (size_t)bytes);
}

static void host_fill(gs_drv *d, gs_drv_stream *s, float *dst, float value, size_t n)
{
    (void)d, (void)s;
    for (size_t i = 0; i < n; i++)
        dst[i] = value;
}

/* ---- streams and events --------------------------------------------------------------------- */

static void *stream_main(void *arg)
{
    gs_drv_stream *s = arg;
    gs_drv *d = s->d;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!s->head && !s->stop)
            park(d, &s->head, NULL, NULL);
        if (!s->head && s->stop)
            break;
        item *it = s->head;
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 1;
        if (it->kind == ITEM_RECORD) {
            it->ev->t = mono_s();
            it->ev->done = 1;
            gs__host_notify(d, it->ev);
        } else if (it->kind == ITEM_WAIT) {
            /* twice the timeout and a second: the work waited for has its own timed waits, and
             * a wait on a peer or the dispatcher's watchdog (which name the rank and the event)
             * should be the one that reports */
            struct timespec dl = gs__host_deadline_in(2 * d->timeout_s + 1);
            int why = 0;
            const wait_for wf = {s->rank, s, "", NULL, NULL, UINT64_MAX};
            while (!it->ev->done && (why = gs__host_wait_until(d, it->ev, &dl, &wf)) == 0)
                ;
            if (!it->ev->done && why == 2) {
                char msg[GS_ERROR_MSG_BYTES];
                snprintf(msg, sizeof msg, "rank %" PRIu64 " stream %s: timed out after %g s waiting for a dependency",
                         s->rank, gs_stream_name(s->kind), 2 * d->timeout_s + 1);
                gs__host_abort_locked(d, msg);
            }
        } else if (!d->aborted) {
            pthread_mutex_unlock(&d->mu);
            gs_error e;
            gs_error_init(&e);
            /* the work's start unless a collective in it says when its data began to move: the
             * dispatcher's late issue shows as a gap before it, not inside it */
            s->op_start = mono_s();
            gs_status rc = it->fn(it->arg, s, &e);
            pthread_mutex_lock(&d->mu);
            if (rc != GS_OK && d->aborted && adds_context(e.msg, d->abort_err.msg))
                d->abort_err = e; /* this work's own wait aborted the run: keep its context */
            else if (rc != GS_OK)
                gs__host_abort_locked(d, e.msg[0] ? e.msg : gs_status_name(rc));
        }
        free(it);
        s->busy = 0;
        if (!s->head)
            gs__host_notify(d, &s->busy); /* host_stream_sync */
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void unlink_stream(gs_drv *d, gs_drv_stream *s)
{
    pthread_mutex_lock(&d->mu);
    for (gs_drv_stream **p = &d->streams; *p; p = &(*p)->next_all)
        if (*p == s) {
            *p = s->next_all;
            break;
        }
    pthread_mutex_unlock(&d->mu);
}

static gs_status host_stream_create(gs_drv *d, uint64_t rank, gs_stream kind, gs_drv_stream **out, gs_error *err)
{
    gs_drv_stream *s = calloc(1, sizeof *s);
    if (!s)
        return gs_error_set(err, GS_ERR_NOMEM, "host driver: out of memory");
    s->d = d;
    s->rank = rank;
    s->kind = kind;
    s->op_start = -1;
    pthread_mutex_lock(&d->mu);
    s->next_all = d->streams;
    d->streams = s;
    pthread_mutex_unlock(&d->mu);
    if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
        unlink_stream(d, s);
        free(s);
        return gs_error_set(err, GS_ERR_RUNTIME, "host driver: cannot start a thread for rank %" PRIu64 " stream %s",
                            rank, gs_stream_name(kind));
    }
    *out = s;
    return GS_OK;
}

static void host_stream_destroy(gs_drv *d, gs_drv_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&d->mu);
    s->stop = 1;
    gs__host_notify(d, &s->head);
    pthread_mutex_unlock(&d->mu);
    pthread_join(s->th, NULL);
    unlink_stream(d, s);
    for (item *it = s->head, *n; it; it = n) {
        n = it->next;
        free(it);
    }
    free(s->round_buf);
    free(s);
}

static gs_status enqueue(gs_drv *d, gs_drv_stream *s, item_kind kind, gs_drv_fn fn, void *arg, gs_drv_event *ev,
                         gs_error *err)
{
    item *it = calloc(1, sizeof *it);
    if (!it)
        return gs_error_set(err, GS_ERR_NOMEM, "host driver: out of memory");
    it->kind = kind;
    it->fn = fn;
    it->arg = arg;
    it->ev = ev;
    pthread_mutex_lock(&d->mu);
    if (kind == ITEM_RECORD)
        ev->done = 0;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    gs__host_notify(d, &s->head);
    pthread_mutex_unlock(&d->mu);
    return GS_OK;
}

static gs_status host_launch(gs_drv *d, gs_drv_stream *s, gs_drv_fn fn, void *arg, gs_error *err)
{
    return enqueue(d, s, ITEM_FN, fn, arg, NULL, err);
}

static gs_status host_event_create(gs_drv *d, gs_drv_event **out, gs_error *err)
{
    (void)d;
    if (!(*out = calloc(1, sizeof **out)))
        return gs_error_set(err, GS_ERR_NOMEM, "host driver: out of memory");
    return GS_OK;
}

static void host_event_destroy(gs_drv *d, gs_drv_event *e)
{
    (void)d;
    free(e);
}

static gs_status host_event_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    return enqueue(d, s, ITEM_RECORD, NULL, NULL, e, err);
}

static gs_status host_stream_wait_event(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    return enqueue(d, s, ITEM_WAIT, NULL, NULL, e, err);
}

static gs_status host_stream_sync(gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    gs_status rc = GS_OK;
    pthread_mutex_lock(&d->mu);
    /* no deadline here: every item the worker runs has its own, the dispatcher's watchdog
     * aborts a step in which nothing completes, and the dispatcher gives up on a rank whose
     * work does not stop after an abort (exec/dispatch.h) */
    while (s->head || s->busy)
        park(d, &s->busy, NULL, NULL);
    if (d->aborted) {
        if (err)
            *err = d->abort_err;
        rc = GS_ERR_RUNTIME;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static double host_event_time_s(gs_drv *d, const gs_drv_event *e)
{
    (void)d;
    return e->t;
}

static double host_clock_s(gs_drv *d)
{
    (void)d;
    return mono_s();
}

static double host_op_start_s(gs_drv *d, gs_drv_stream *s)
{
    (void)d;
    if (!s)
        return -1;
    double t = s->op_start;
    s->op_start = -1;
    return t;
}

/* Notes on the calling stream (NULL: none) that its op found every party now. */
void gs__host_mark_start(gs_drv_stream *s)
{
    if (s)
        s->op_start = mono_s();
}

/* ---- progress inside launched work ---------------------------------------------------------- */

static gs_status host_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)s, (void)err;
    pthread_mutex_lock(&d->mu);
    if (token > e->token)
        e->token = token;
    e->t = mono_s();
    gs__host_notify(d, e);
    pthread_mutex_unlock(&d->mu);
    return GS_OK;
}

static gs_status host_wait_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    gs_status rc = GS_OK;
    pthread_mutex_lock(&d->mu);
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
    const wait_for wf = {s->rank, s, "", NULL, NULL, UINT64_MAX};
    int why = 0;
    while (e->token < token && (why = gs__host_wait_until(d, e, &dl, &wf)) == 0)
        ;
    if (e->token < token) {
        char what[160];
        snprintf(what, sizeof what, "rank %" PRIu64 " stream %s: waiting for %s", s->rank, gs_stream_name(s->kind),
                 s->kind == GS_STREAM_TP ? "a split of the GEMM beside it (tp_comm_overlap)"
                                         : "a chunk of the ring all-gather beside it (tp_comm_overlap)");
        rc = gs__host_wait_failed(d, why, err, what);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* TE's ring exchange as p2p groups around the group's ring (driver.h: all_gather_ring). */
static gs_status host_all_gather_ring(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                      const float *send, float *recv, size_t count, gs_drv_event *const *marks,
                                      uint64_t token, gs_error *err)
{
    uint64_t n = g->size, pos = g->pos;
    double first = -1;
    if (recv + pos * count != send)
        memmove(recv + pos * count, send, count * sizeof *recv);
    gs_status rc = GS_OK;
    for (uint64_t i = 0; i + 1 < n && rc == GS_OK; i++) {
        uint64_t out = (pos + n - i) % n, in = (pos + n - i - 1) % n;
        const gs_drv_p2p ops[2] = {{0, g->members[(pos + 1) % n], recv + out * count, count * sizeof *recv},
                                   {1, g->members[(pos + n - 1) % n], recv + in * count, count * sizeof *recv}};
        rc = gs__host_p2p_group(d, s, rank, ops, 2, err);
        if (i == 0)
            first = s->op_start; /* the gather began moving data with its first step */
        if (rc == GS_OK && marks && marks[i])
            rc = host_mark(d, s, marks[i], token, err);
    }
    if (first >= 0)
        s->op_start = first;
    return rc;
}

/* The event a stream's worker runs next: kept for the timeout chain (append_chain), which reads
 * it from another thread, so under mu. */
static void host_event_begin(gs_drv *d, gs_drv_stream *s, const char *name)
{
    if (!s)
        return;
    pthread_mutex_lock(&d->mu);
    snprintf(s->event, sizeof s->event, "%s", name);
    pthread_mutex_unlock(&d->mu);
}

static void host_event_end(gs_drv *d, gs_drv_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&d->mu);
    s->event[0] = '\0';
    pthread_mutex_unlock(&d->mu);
}

const gs_driver_ops gs_driver_host = {
    .name = "host",
    .description = "CPU threads: a thread per stream of each rank, kernels/host, shared-memory collectives",
    .open = host_open,
    .close = host_close,
    .abort = gs__host_abort,
    .aborted = host_aborted,
    .alloc = host_alloc,
    .free = host_free,
    .upload = host_copy,
    .download = host_copy,
    .copy = host_copy,
    .fill = host_fill,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .launch = host_launch,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .stream_wait_event = host_stream_wait_event,
    .stream_sync = host_stream_sync,
    .event_time_s = host_event_time_s,
    .clock_s = host_clock_s,
    .op_start_s = host_op_start_s,
    .event_begin = host_event_begin,
    .event_end = host_event_end,
    .k.linear_fwd = gs__host_k_linear_fwd,
    .k.linear_bwd = gs__host_k_linear_bwd,
    .k.linear_fwd_fp8 = gs__host_k_linear_fwd_fp8,
    .k.linear_bwd_fp8 = gs__host_k_linear_bwd_fp8,
    .k.fp8_blocks = 1,
    .k.fp8_delayed = 1,
    .k.linear_fwd_grouped = gs__host_k_linear_fwd_grouped,
    .k.linear_bwd_grouped = gs__host_k_linear_bwd_grouped,
    .k.add = gs__host_k_add,
    .k.scale = gs__host_k_scale,
    .k.embed_fwd = gs__host_k_embed_fwd,
    .k.embed_bwd = gs__host_k_embed_bwd,
    .k.rmsnorm_fwd = gs__host_k_rmsnorm_fwd,
    .k.rmsnorm_bwd = gs__host_k_rmsnorm_bwd,
    .k.rope_fwd = gs__host_k_rope_fwd,
    .k.rope_bwd = gs__host_k_rope_bwd,
    .k.attn_fwd = gs__host_k_attn_fwd,
    .k.attn_bwd = gs__host_k_attn_bwd,
    .k.attn_fwd_flash = gs__host_k_attn_fwd_flash,
    .k.attn_bwd_flash = gs__host_k_attn_bwd_flash,
    .k.dropout = gs__host_k_dropout,
    .gemm_math = gs__host_gemm_math,
    .sends_wait = gs__host_sends_wait,
    .k.swiglu_fwd = gs__host_k_swiglu_fwd,
    .k.swiglu_bwd = gs__host_k_swiglu_bwd,
    .k.layernorm_fwd = gs__host_k_layernorm_fwd,
    .k.layernorm_bwd = gs__host_k_layernorm_bwd,
    .k.gelu_fwd = gs__host_k_gelu_fwd,
    .k.gelu_bwd = gs__host_k_gelu_bwd,
    .k.bias_add = gs__host_k_bias_add,
    .k.bias_grad = gs__host_k_bias_grad,
    .k.moe_topk_fwd = gs__host_k_moe_topk_fwd,
    .k.moe_topk_bwd = gs__host_k_moe_topk_bwd,
    .k.rows_gather = gs__host_k_rows_gather,
    .k.rows_scatter_add = gs__host_k_rows_scatter_add,
    .k.rows_dot = gs__host_k_rows_dot,
    .k.xent_stats = gs__host_k_xent_stats,
    .k.xent_combine = gs__host_k_xent_combine,
    .k.xent_bwd = gs__host_k_xent_bwd,
    .k.adamw = gs__host_k_adamw,
    .all_gather = gs__host_all_gather,
    .reduce_scatter = gs__host_reduce_scatter,
    .all_reduce = gs__host_all_reduce,
    .all_reduce_max = gs__host_all_reduce_max,
    .broadcast = gs__host_broadcast,
    .all_to_all = gs__host_all_to_all,
    .send = gs__host_send,
    .recv = gs__host_recv,
    .p2p_group = gs__host_p2p_group,
    .all_gather_ring = host_all_gather_ring,
    .mark = host_mark,
    .wait_mark = host_wait_mark,
};

const gs_driver_ops *gs_driver_find(const char *name)
{
    static const gs_driver_ops *const drivers[] = {&gs_driver_host};
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++)
        if (strcmp(drivers[i]->name, name) == 0)
            return drivers[i];
    return NULL;
}
