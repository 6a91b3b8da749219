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
#include "kernels/host/kernels.h"

/* One rendezvous per process group (kind, index). */
typedef struct coll_slot {
    uint64_t arrived, departed, gen;
    int op;
    size_t count;
    const float **in; /* per member position */
} coll_slot;

typedef struct mail {
    struct mail *next;
    uint64_t bytes;
    unsigned char data[];
} mail;

typedef struct mailbox {
    mail *head, *tail;
    uint64_t posted, taken; /* messages sent and received so far (a rendezvous send waits on taken) */
} mailbox;

typedef enum item_kind { ITEM_FN, ITEM_RECORD, ITEM_WAIT } item_kind;

typedef struct item {
    struct item *next;
    item_kind kind;
    gs_drv_fn fn;
    void *arg;
    gs_drv_event *ev;
} item;

struct gs_drv_event {
    int done;
    double t;       /* seconds, driver clock */
    uint64_t token; /* the largest token it was marked with (host_mark) */
};

/* A thread parked until `on` changes (or the run aborts); lives on the waiting thread's stack and
 * is linked into the driver's list only while it waits (mu held throughout). */
typedef struct waiter {
    struct waiter *prev, *next;
    const void *on;
    pthread_cond_t cv;
    const struct wait_for *wf; /* a wait on another rank (collective, recv), or NULL */
} waiter;

/* What a rank waiting on other ranks waits for, for the timeout message's chain (see
 * append_chain). Lives on the waiting thread's stack. */
typedef struct wait_for {
    uint64_t rank;              /* the waiting rank */
    const struct gs_drv_stream *s; /* its stream (the event it runs) */
    const char *what;           /* "rank R: all_reduce of N floats on tp group G" */
    const gs_drv_group *g;      /* a collective: the members whose input is missing from slot */
    const struct coll_slot *slot;
    uint64_t peer;              /* a recv: the sender; UINT64_MAX: a wait within the rank */
} wait_for;

struct gs_drv_stream {
    gs_drv *d;
    uint64_t rank;
    gs_stream kind;
    item *head, *tail;
    int busy, stop;
    double op_start; /* when the last collective / recv found every party, -1 unknown */
    char event[GS_EVENT_NAME_BYTES]; /* the event the worker runs (event_begin; mu) */
    struct gs_drv_stream *next_all;  /* the driver's list of streams (mu) */
    pthread_t th;
    float *round_buf; /* GRIDSTEP_HOST_GEMM=bf16: the GEMM inputs rounded (the worker's own) */
    size_t round_cap; /* floats */
};

struct gs_drv {
    gs_mesh mesh;
    double timeout_s;
    pthread_mutex_t mu;
    waiter *waiters; /* every parked thread, whatever it waits on */
    gs_drv_stream *streams; /* every stream (next_all) */
    int aborted;
    gs_error abort_err;
    coll_slot *slots[GS_GROUP_KIND_COUNT]; /* world slots per kind (group index < world) */
    mailbox *mail;                         /* world x world, [src * world + dst] */
    char *inbox; /* world: &inbox[dst] is notified whenever mail for dst is posted (a group's
                  * receives wait on it for whichever peer's message comes first) */
    /* Across processes (opts->boot active): this process runs rank boot->proc alone, and every
     * collective and p2p op goes through the bootstrap's transport. */
    const gs_exec_boot *boot;
    void *comm[GS_GROUP_KIND_COUNT]; /* this rank's group of each kind */
    int peer_abort;                  /* the abort came from another process (not announced again) */
    /* GRIDSTEP_HOST_P2P=rendezvous: a send returns only once its receiver has taken the message,
     * as NCCL's (blocking for the GPU) do, so a run shows on the CPU whether its p2p order would
     * deadlock on GPUs (default eager: a send returns at once). One process only. */
    int rendezvous;
    /* GRIDSTEP_HOST_GEMM=bf16: the linear layers' GEMMs take their inputs rounded to bfloat16 and
     * accumulate in fp32, as cuBLASLt's bf16 GEMMs do (the cuda driver's GRIDSTEP_CUDA_GEMM=bf16) */
    int gemm_bf16;
};

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The monotonic time s seconds from now (waits use CLOCK_MONOTONIC: a clock step cannot end or
 * stretch them). Saturating: a non-finite, negative or huge s gives now or about 68 years on. */
static struct timespec deadline_in(double s)
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

/* Parks the calling thread until notify(d, on) or an abort signals it, or until dl (NULL: no
 * deadline) passes (mu held; released while parked). Returns pthread_cond_*wait's status. Like
 * any condition wait it may return early: callers re-check their condition in a loop. */
static int park(gs_drv *d, const void *on, const struct timespec *dl, const wait_for *wf)
{
    waiter w = {.prev = NULL, .next = d->waiters, .on = on, .wf = wf};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadline_in's clock */
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
static void notify(gs_drv *d, const void *on)
{
    for (waiter *w = d->waiters; w; w = w->next)
        if (w->on == on)
            pthread_cond_signal(&w->cv);
}

/* Waits for `on` to change (mu held); wf: what other ranks it waits for (NULL: none). Returns 0
 * when woken, 1 on abort, 2 on timeout. */
static int wait_until(gs_drv *d, const void *on, const struct timespec *dl, const wait_for *wf)
{
    if (d->aborted)
        return 1;
    int rc = park(d, on, dl, wf);
    if (d->aborted)
        return 1;
    return rc == ETIMEDOUT ? 2 : 0;
}

static void abort_locked(gs_drv *d, const char *msg)
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
static void peer_abort_locked(gs_drv *d, const char *msg)
{
    if (!d->aborted)
        d->peer_abort = 1;
    abort_locked(d, msg);
}

static void host_abort(gs_drv *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    abort_locked(d, msg);
    pthread_mutex_unlock(&d->mu);
}

static int host_aborted(gs_drv *d, gs_error *err)
{
    char msg[GS_ERROR_MSG_BYTES];
    pthread_mutex_lock(&d->mu);
    if (!d->aborted && gs_boot_active(d->boot) && d->boot->peer_aborted(d->boot->ctx, msg, sizeof msg))
        peer_abort_locked(d, msg);
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
static gs_status wait_failed_for(gs_drv *d, int why, gs_error *err, const char *what, const wait_for *wf)
{
    if (why == 2) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: timed out after %g s", what, d->timeout_s);
        if (wf)
            append_chain(d, msg, sizeof msg, wf->rank, waited_rank(wf));
        abort_locked(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return gs_error_set(err, GS_ERR_RUNTIME, "%s: stopped: %s", what, d->abort_err.msg);
}

static gs_status wait_failed(gs_drv *d, int why, gs_error *err, const char *what)
{
    return wait_failed_for(d, why, err, what, NULL);
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
            notify(d, it->ev);
        } else if (it->kind == ITEM_WAIT) {
            /* twice the timeout and a second: the work waited for has its own timed waits, and
             * a wait on a peer or the dispatcher's watchdog (which name the rank and the event)
             * should be the one that reports */
            struct timespec dl = deadline_in(2 * d->timeout_s + 1);
            int why = 0;
            const wait_for wf = {s->rank, s, "", NULL, NULL, UINT64_MAX};
            while (!it->ev->done && (why = wait_until(d, it->ev, &dl, &wf)) == 0)
                ;
            if (!it->ev->done && why == 2) {
                char msg[GS_ERROR_MSG_BYTES];
                snprintf(msg, sizeof msg, "rank %" PRIu64 " stream %s: timed out after %g s waiting for a dependency",
                         s->rank, gs_stream_name(s->kind), 2 * d->timeout_s + 1);
                abort_locked(d, msg);
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
                abort_locked(d, e.msg[0] ? e.msg : gs_status_name(rc));
        }
        free(it);
        s->busy = 0;
        if (!s->head)
            notify(d, &s->busy); /* host_stream_sync */
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
    notify(d, &s->head);
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
    notify(d, &s->head);
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
static void mark_start(gs_drv_stream *s)
{
    if (s)
        s->op_start = mono_s();
}

/* ---- compute: kernels/host ------------------------------------------------------------------- */

/* GRIDSTEP_HOST_GEMM=bf16: room for the rounded inputs in the stream's own buffer (the stream's
 * worker is its only user); NULL when it cannot grow (the kernel then fails the stream). */
static float *round_room(gs_drv_stream *s, size_t floats)
{
    if (floats > s->round_cap) {
        float *p = realloc(s->round_buf, floats * sizeof *p);
        if (!p)
            return NULL;
        s->round_buf = p;
        s->round_cap = floats;
    }
    return s->round_buf;
}

static void round_failed(gs_drv_stream *s)
{
    char msg[120];
    snprintf(msg, sizeof msg, "rank %" PRIu64 ": out of memory for the bf16 GEMM inputs", s->rank);
    host_abort(s->d, msg);
}

static void k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    if (s && s->d->gemm_bf16) {
        float *r = round_room(s, t * k + n * k);
        if (!r) {
            round_failed(s);
            return;
        }
        gs_k_round_bf16(r, x, t * k);
        gs_k_round_bf16(r + t * k, w, n * k);
        x = r, w = r + t * k;
    }
    gs_k_linear_fwd(x, w, y, t, k, n);
}
static void k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                         size_t t, size_t k, size_t n)
{
    if (s && s->d->gemm_bf16) { /* both products take bf16 inputs: dx = dy w, dw += dy^T x */
        float *r = round_room(s, t * k + n * k + t * n);
        if (!r) {
            round_failed(s);
            return;
        }
        /* only what the products asked for is read (tp_comm_overlap's dgrad runs while x is
         * gathered again) */
        if (dw)
            gs_k_round_bf16(r, x, t * k);
        if (dx)
            gs_k_round_bf16(r + t * k, w, n * k);
        gs_k_round_bf16(r + t * k + n * k, dy, t * n);
        x = r, w = r + t * k, dy = r + t * k + n * k;
    }
    gs_k_linear_bwd(x, w, dy, dx, dw, t, k, n);
}
static void k_add(gs_drv_stream *s, float *y, const float *x, size_t n)
{
    (void)s;
    gs_k_add(y, x, n);
}
static void k_scale(gs_drv_stream *s, float *y, float a, size_t n)
{
    (void)s;
    gs_k_scale(y, a, n);
}
static void k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn, size_t h,
                        float *y)
{
    (void)s;
    gs_k_embed_fwd(tok, t, w, lo, vn, h, y);
}
static void k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                        size_t h, float *dw)
{
    (void)s;
    gs_k_embed_bwd(tok, t, dy, lo, vn, h, dw);
}
static void k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                          float eps)
{
    (void)s;
    gs_k_rmsnorm_fwd(x, g, y, rstd, t, h, eps);
}
static void k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                          float *dx, float *dg, size_t t, size_t h)
{
    (void)s;
    gs_k_rmsnorm_bwd(x, g, rstd, dy, dx, dg, t, h);
}
static void k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    (void)s;
    gs_k_rope_fwd(x, t, seq, nh, hd, ld, th);
}
static void k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    (void)s;
    gs_k_rope_bwd(x, t, seq, nh, hd, ld, th);
}
static void k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                       float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                       const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_fwd_dropout(q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, drop);
}
static void k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                       const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                       size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_bwd_dropout(q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop);
}
static void k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                             size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                             size_t nkv, size_t hd, const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_fwd_flash_dropout(q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, drop);
}
static void k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                             size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo, float *dq,
                             float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                             const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_bwd_flash_dropout(q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop);
}
static int host_sends_wait(gs_drv *d)
{
    return d->rendezvous;
}
static const char *host_gemm_math(gs_drv *d)
{
    return d->gemm_bf16 ? "bf16 inputs, fp32 accumulate" : "fp32";
}
static void k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    (void)s;
    gs_k_dropout_rows(x, rows, h, drop);
}
static void k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                            float *rstd, size_t t, size_t h, float eps)
{
    (void)s;
    gs_k_layernorm_fwd(x, g, b, y, mean, rstd, t, h, eps);
}
static void k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                            const float *dy, float *dx, float *dg, float *db, size_t t, size_t h)
{
    (void)s;
    gs_k_layernorm_bwd(x, g, mean, rstd, dy, dx, dg, db, t, h);
}
static void k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n)
{
    (void)s;
    gs_k_gelu_fwd(x, y, n);
}
static void k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n)
{
    (void)s;
    gs_k_gelu_bwd(x, dy, dx, n);
}
static void k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n)
{
    (void)s;
    gs_k_bias_add(y, b, t, n);
}
static void k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n)
{
    (void)s;
    gs_k_bias_grad(dy, db, t, n);
}
static void k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f)
{
    (void)s;
    gs_k_swiglu_fwd(gu, h, t, f);
}
static void k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    (void)s;
    gs_k_swiglu_bwd(gu, dh, dgu, t, f);
}
static void k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                         float *stats)
{
    (void)s;
    gs_k_xent_stats(logits, target, t, lo, vn, stats);
}
static void k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss)
{
    (void)s;
    *loss = gs_k_xent_combine(stats, parts, t, lse);
}
static void k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                       size_t lo, size_t vn, float scale, float *dlogits)
{
    (void)s;
    gs_k_xent_bwd(logits, target, lse, t, lo, vn, scale, dlogits);
}
static void k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                    float b2, float eps, float wd, uint64_t step)
{
    (void)s;
    gs_k_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, step);
}

/* ---- collectives ---------------------------------------------------------------------------- */

enum { OP_AG = 1, OP_RS, OP_AR, OP_BCAST };

static const char *op_name(int op)
{
    return op == OP_AG ? "all_gather" : op == OP_RS ? "reduce_scatter" : op == OP_AR ? "all_reduce" : "broadcast";
}

/* ---- across processes: the bootstrap's transport ---- */

static int boot_stop(void *arg)
{
    gs_drv *d = arg;
    pthread_mutex_lock(&d->mu);
    int a = d->aborted;
    pthread_mutex_unlock(&d->mu);
    return a;
}

static void boot_wait_init(gs_drv *d, gs_boot_wait *w)
{
    w->timeout_s = d->timeout_s;
    w->stop = boot_stop;
    w->arg = d;
    w->peer_msg[0] = '\0';
}

/* The status of a transport call that ended with o; what names the op for messages. */
static gs_status boot_result(gs_drv *d, gs_boot_outcome o, const gs_boot_wait *w, const gs_error *terr,
                             const char *what, gs_error *err)
{
    if (o == GS_BOOT_DONE)
        return GS_OK;
    gs_status rc;
    pthread_mutex_lock(&d->mu);
    if (o == GS_BOOT_FAILED) {
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%s: %s", what, terr->msg);
        abort_locked(d, err->msg);
    } else {
        if (o == GS_BOOT_PEER_ABORT)
            peer_abort_locked(d, w->peer_msg);
        rc = wait_failed(d, o == GS_BOOT_TIMEOUT ? 2 : 1, err, what);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void coll_what(char *what, size_t len, uint64_t rank, const gs_drv_group *g, int op, size_t count);

/* One collective across processes: recv (size x count floats) gets every member's count floats of
 * send (all-gather) or every member's send[pos * count ..] (all-to-all; send holds size x count). */
static gs_status boot_exchange(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, int op,
                               const float *send, float *recv, size_t count, int alltoall, gs_error *err)
{
    char what[256];
    coll_what(what, sizeof what, rank, g, op, count);
    /* the other processes' ranks, so that a timeout says whom it waited for */
    size_t at = strlen(what);
    at += (size_t)snprintf(what + at, sizeof what - at, " (with rank");
    for (uint64_t i = 0; i < g->size && at < sizeof what - 24; i++)
        if (i != g->pos)
            at += (size_t)snprintf(what + at, sizeof what - at, " %" PRIu64, g->members[i]);
    if (at < sizeof what - 2)
        snprintf(what + at, sizeof what - at, ")");
    if (g->kind >= GS_GROUP_KIND_COUNT || !d->comm[g->kind])
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such group", what);
    gs_boot_wait w;
    boot_wait_init(d, &w);
    gs_error terr;
    gs_error_init(&terr);
    const gs_exec_boot *b = d->boot;
    gs_boot_outcome o = alltoall ? b->group_alltoall(b->ctx, d->comm[g->kind], send, count * sizeof *send, recv, &w,
                                                     &terr)
                                 : b->group_allgather(b->ctx, d->comm[g->kind], send, count * sizeof *send, recv, &w,
                                                      &terr);
    (void)s; /* the transport does not say when every party arrived: op_start stays the work's start */
    return boot_result(d, o, &w, &terr, what, err);
}

/* Meets the other members of g: publishes `in`, waits for everyone (phase 1); the caller then
 * reads the others' inputs; depart() waits until every member has read (phase 2). */
static void coll_what(char *what, size_t len, uint64_t rank, const gs_drv_group *g, int op, size_t count)
{
    snprintf(what, len, "rank %" PRIu64 ": %s of %zu floats on %s group %" PRIu64, rank, op_name(op), count,
             gs_group_kind_name(g->kind), g->index);
}

static gs_status arrive(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, int op, size_t count,
                        const float *in, coll_slot **out, uint64_t *gen, gs_error *err)
{
    char what[256];
    coll_what(what, sizeof what, rank, g, op, count);
    if (g->index >= d->mesh.world || g->pos >= g->size)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such group", what);
    coll_slot *c = &d->slots[g->kind][g->index];
    pthread_mutex_lock(&d->mu);
    if (d->aborted) {
        gs_status rc = wait_failed(d, 1, err, what);
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    if (c->arrived == 0) {
        c->op = op;
        c->count = count;
    } else if (c->op != op || c->count != count) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: the group's other members issued %s of %zu floats", what, op_name(c->op),
                 c->count);
        abort_locked(d, msg);
        pthread_mutex_unlock(&d->mu);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    c->in[g->pos] = in;
    c->arrived++;
    *gen = c->gen;
    if (c->arrived == g->size)
        notify(d, c); /* the members before this one */
    struct timespec dl = deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, g, c, 0};
    while (c->arrived < g->size && (why = wait_until(d, c, &dl, &wf)) == 0)
        ;
    gs_status rc = GS_OK;
    if (c->arrived < g->size) {
        char missing[64] = "";
        size_t at = 0;
        for (uint64_t i = 0; i < g->size && at < sizeof missing - 8; i++)
            if (!c->in[i])
                at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%" PRIu64, at ? " " : "", g->members[i]);
        snprintf(what + strlen(what), sizeof what - strlen(what),
                 " (%" PRIu64 " of %" PRIu64 " members arrived; waiting for rank %s)", c->arrived, g->size, missing);
        rc = wait_failed_for(d, why, err, what, &wf);
    } else {
        mark_start(s);
    }
    pthread_mutex_unlock(&d->mu);
    *out = c;
    return rc;
}

static gs_status depart(gs_drv *d, uint64_t rank, const gs_drv_group *g, coll_slot *c, uint64_t gen, gs_error *err)
{
    pthread_mutex_lock(&d->mu);
    c->departed++;
    if (c->departed == g->size) {
        /* every member has read every input: forget them (arrive names the absent by NULL) */
        for (uint64_t i = 0; i < g->size; i++)
            c->in[i] = NULL;
        c->arrived = c->departed = 0;
        c->gen++;
        notify(d, c);
    }
    struct timespec dl = deadline_in(d->timeout_s);
    int why = 0;
    while (c->gen == gen && (why = wait_until(d, c, &dl, NULL)) == 0)
        ;
    gs_status rc = GS_OK;
    if (c->gen == gen) {
        char what[160];
        snprintf(what, sizeof what, "rank %" PRIu64 ": leaving a collective on %s group %" PRIu64, rank,
                 gs_group_kind_name(g->kind), g->index);
        rc = wait_failed(d, why, err, what);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static gs_status host_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                 float *recv, size_t count, gs_error *err)
{
    if (d->boot && g->size > 1) {
        /* the transport may not read send while it writes recv: send can lie inside recv */
        float *tmp = malloc((count ? count : 1) * sizeof *tmp);
        if (!tmp)
            return gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": all_gather: out of memory", rank);
        memcpy(tmp, send, count * sizeof *tmp);
        gs_status rc = boot_exchange(d, s, rank, g, OP_AG, tmp, recv, count, 0, err);
        free(tmp);
        return rc;
    }
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, OP_AG, count, send, &c, &gen, err);
    if (rc != GS_OK)
        return rc;
    for (uint64_t i = 0; i < g->size; i++)
        if (recv + i * count != c->in[i])
            memcpy(recv + i * count, c->in[i], count * sizeof *recv);
    return depart(d, rank, g, c, gen, err);
}

static gs_status host_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                     const float *send, float *recv, size_t count, gs_error *err)
{
    if (d->boot && g->size > 1) {
        /* every member's slice for this member, then summed in ascending member order as below */
        size_t n = (size_t)g->size * count;
        float *parts = malloc((n ? n : 1) * sizeof *parts);
        if (!parts)
            return gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": reduce_scatter: out of memory", rank);
        gs_status rc = boot_exchange(d, s, rank, g, OP_RS, send, parts, count, 1, err);
        for (size_t j = 0; rc == GS_OK && j < count; j++) {
            float acc = parts[j];
            for (uint64_t i = 1; i < g->size; i++)
                acc += parts[i * count + j];
            recv[j] = acc;
        }
        free(parts);
        return rc;
    }
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, OP_RS, count, send, &c, &gen, err);
    if (rc != GS_OK)
        return rc;
    size_t off = (size_t)g->pos * count;
    for (size_t j = 0; j < count; j++) {
        float acc = c->in[0][off + j];
        for (uint64_t i = 1; i < g->size; i++)
            acc += c->in[i][off + j];
        recv[j] = acc;
    }
    return depart(d, rank, g, c, gen, err);
}

static gs_status host_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                 size_t count, gs_error *err)
{
    float *tmp = malloc((count ? count : 1) * sizeof *tmp);
    if (!tmp)
        return gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": all_reduce: out of memory", rank);
    if (d->boot && g->size > 1) {
        /* every member's buffer, then summed in ascending member order as below */
        size_t n = (size_t)g->size * count;
        float *all = malloc((n ? n : 1) * sizeof *all);
        gs_status rc = all ? boot_exchange(d, s, rank, g, OP_AR, buf, all, count, 0, err)
                           : gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": all_reduce: out of memory", rank);
        for (size_t j = 0; rc == GS_OK && j < count; j++) {
            float acc = all[j];
            for (uint64_t i = 1; i < g->size; i++)
                acc += all[i * count + j];
            buf[j] = acc;
        }
        free(all);
        free(tmp);
        return rc;
    }
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, OP_AR, count, buf, &c, &gen, err);
    if (rc == GS_OK) {
        for (size_t j = 0; j < count; j++) {
            float acc = c->in[0][j];
            for (uint64_t i = 1; i < g->size; i++)
                acc += c->in[i][j];
            tmp[j] = acc;
        }
        /* everyone has read every input before anyone overwrites its own */
        rc = depart(d, rank, g, c, gen, err);
        if (rc == GS_OK)
            memcpy(buf, tmp, count * sizeof *buf);
    }
    free(tmp);
    return rc;
}

static gs_status host_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                size_t count, uint64_t root, gs_error *err)
{
    if (d->boot && g->size > 1) {
        char what[256];
        coll_what(what, sizeof what, rank, g, OP_BCAST, count);
        if (g->kind >= GS_GROUP_KIND_COUNT || !d->comm[g->kind] || root >= g->size)
            return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such group or root", what);
        gs_boot_wait w;
        boot_wait_init(d, &w);
        gs_error terr;
        gs_error_init(&terr);
        gs_boot_outcome o = d->boot->group_bcast(d->boot->ctx, d->comm[g->kind], buf, count * sizeof *buf, (int)root,
                                                 &w, &terr);
        return boot_result(d, o, &w, &terr, what, err);
    }
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, OP_BCAST, count, buf, &c, &gen, err);
    if (rc != GS_OK)
        return rc;
    if (g->pos != root && root < g->size)
        memcpy(buf, c->in[root], count * sizeof *buf);
    return depart(d, rank, g, c, gen, err);
}

/* ---- point to point ------------------------------------------------------------------------- */

/* Queues a copy of buf in rank -> peer's mailbox; *seq gets its number there (for
 * wait_taken). */
static gs_status post_mail(gs_drv *d, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes, uint64_t *seq,
                           gs_error *err)
{
    mail *m = malloc(sizeof *m + (size_t)bytes);
    if (!m)
        return gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": send: out of memory", rank);
    m->next = NULL;
    m->bytes = bytes;
    memcpy(m->data, buf, (size_t)bytes);
    pthread_mutex_lock(&d->mu);
    mailbox *b = &d->mail[rank * d->mesh.world + peer];
    if (b->tail)
        b->tail->next = m;
    else
        b->head = m;
    b->tail = m;
    *seq = b->posted++;
    notify(d, b);
    notify(d, &d->inbox[peer]);
    pthread_mutex_unlock(&d->mu);
    return GS_OK;
}

/* Rendezvous mode: waits until peer has taken message seq of rank -> peer (at once when eager). */
static gs_status wait_taken(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, uint64_t bytes, uint64_t seq,
                            gs_error *err)
{
    if (!d->rendezvous)
        return GS_OK;
    char what[120];
    snprintf(what, sizeof what, "rank %" PRIu64 ": send of %" PRIu64 " B to rank %" PRIu64 " (rendezvous)", rank,
             bytes, peer);
    pthread_mutex_lock(&d->mu);
    mailbox *b = &d->mail[rank * d->mesh.world + peer];
    struct timespec dl = deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, NULL, NULL, peer};
    while (b->taken <= seq && (why = wait_until(d, b, &dl, &wf)) == 0)
        ;
    gs_status rc = b->taken > seq ? GS_OK : wait_failed_for(d, why, err, what, &wf);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static gs_status host_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                           gs_error *err)
{
    if (peer >= d->mesh.world)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": send to rank %" PRIu64 ": no such rank", rank, peer);
    if (d->boot) {
        gs_status rc = d->boot->send(d->boot->ctx, (int)peer, buf, (size_t)bytes, err);
        if (rc != GS_OK)
            gs_error_prefix(err, "rank %" PRIu64 ": send of %" PRIu64 " B to rank %" PRIu64, rank, bytes, peer);
        return rc;
    }
    uint64_t seq;
    gs_status rc = post_mail(d, rank, peer, buf, bytes, &seq, err);
    return rc == GS_OK ? wait_taken(d, s, rank, peer, bytes, seq, err) : rc;
}

/* The first message of a non-empty mailbox, unlinked and counted as taken (mu held); the caller
 * frees it. */
static mail *take_mail(gs_drv *d, mailbox *b)
{
    mail *m = b->head;
    b->head = m->next;
    if (!b->head)
        b->tail = NULL;
    b->taken++;
    if (d->rendezvous)
        notify(d, b); /* the sender waits for its message to be taken */
    return m;
}

static gs_status host_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                           gs_error *err)
{
    if (peer >= d->mesh.world)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": recv from rank %" PRIu64 ": no such rank", rank,
                            peer);
    if (d->boot) {
        char what[120];
        snprintf(what, sizeof what, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64, rank, bytes, peer);
        gs_boot_wait w;
        boot_wait_init(d, &w);
        gs_error terr;
        gs_error_init(&terr);
        gs_boot_outcome o = d->boot->recv(d->boot->ctx, (int)peer, buf, (size_t)bytes, &w, &terr);
        return boot_result(d, o, &w, &terr, what, err);
    }
    char what[120];
    snprintf(what, sizeof what, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64, rank, bytes, peer);
    pthread_mutex_lock(&d->mu);
    mailbox *b = &d->mail[peer * d->mesh.world + rank];
    struct timespec dl = deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, NULL, NULL, peer};
    while (!b->head && (why = wait_until(d, b, &dl, &wf)) == 0)
        ;
    if (!b->head) {
        gs_status rc = wait_failed_for(d, why, err, what, &wf);
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    mark_start(s);
    mail *m = take_mail(d, b);
    pthread_mutex_unlock(&d->mu);
    gs_status rc = GS_OK;
    if (m->bytes != bytes) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64 " got %" PRIu64 " B",
                 rank, bytes, peer, m->bytes);
        host_abort(d, msg);
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    } else {
        memcpy(buf, m->data, (size_t)bytes);
    }
    free(m);
    return rc;
}

/* A group's receives (one process): each taken as soon as its message is there, a pair's
 * messages in order, as NCCL progresses a group's receives from different peers together (taking
 * them in list order would wait longer than NCCL does: a peer whose send waits for a later
 * receive of the group). mu is taken here. */
static gs_status group_recvs(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                             gs_error *err)
{
    enum { MAX_OPS = 128 };
    uint8_t done[MAX_OPS] = {0};
    size_t left = 0;
    if (n > MAX_OPS)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": a p2p group of more than %d operations", rank,
                            MAX_OPS);
    for (size_t i = 0; i < n; i++)
        left += ops[i].recv != 0;
    gs_status rc = GS_OK;
    pthread_mutex_lock(&d->mu);
    struct timespec dl = deadline_in(d->timeout_s);
    while (left && rc == GS_OK) {
        int took = 0;
        size_t first = n; /* the first receive still waiting (for the timeout's message) */
        for (size_t i = 0; i < n && rc == GS_OK; i++) {
            if (!ops[i].recv || done[i])
                continue;
            int behind = 0; /* an earlier receive from the same peer comes first */
            for (size_t j = 0; j < i && !behind; j++)
                behind = ops[j].recv && !done[j] && ops[j].peer == ops[i].peer;
            if (first == n)
                first = i;
            mailbox *b = &d->mail[ops[i].peer * d->mesh.world + rank];
            if (behind || !b->head)
                continue;
            mail *m = take_mail(d, b);
            if (m->bytes != ops[i].bytes) {
                char msg[GS_ERROR_MSG_BYTES];
                snprintf(msg, sizeof msg, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64 " got %" PRIu64
                         " B", rank, ops[i].bytes, ops[i].peer, m->bytes);
                abort_locked(d, msg);
                rc = gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
            } else {
                memcpy(ops[i].buf, m->data, (size_t)m->bytes);
            }
            free(m);
            done[i] = 1;
            left--;
            took = 1;
        }
        if (rc != GS_OK || !left)
            break;
        if (!took) {
            char what[120];
            snprintf(what, sizeof what, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64 " (in a p2p group)",
                     rank, ops[first].bytes, ops[first].peer);
            const wait_for wf = {rank, s, what, NULL, NULL, ops[first].peer};
            int why = wait_until(d, &d->inbox[rank], &dl, &wf);
            if (why)
                rc = wait_failed_for(d, why, err, what, &wf);
        }
    }
    if (rc == GS_OK)
        mark_start(s);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* The group's sends are posted, its receives taken as their messages come (group_recvs), then
 * (rendezvous) each send's taking: all are in flight together, as in one NCCL group. Across
 * processes the bootstrap's sends are eager: each op in order. */
static gs_status host_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                                gs_error *err)
{
    enum { MAX_SENDS = 64 };
    uint64_t seq[MAX_SENDS];
    size_t nsend = 0;
    gs_status rc = GS_OK;
    for (size_t i = 0; i < n && rc == GS_OK; i++)
        if (ops[i].peer >= d->mesh.world)
            rc = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": %s rank %" PRIu64 ": no such rank", rank,
                              ops[i].recv ? "recv from" : "send to", ops[i].peer);
        else if (!ops[i].recv && ++nsend > MAX_SENDS)
            rc = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": a p2p group of more than %d sends", rank,
                              MAX_SENDS);
    if (rc != GS_OK)
        return rc;
    if (d->boot) {
        for (size_t i = 0; i < n && rc == GS_OK; i++)
            rc = ops[i].recv ? host_recv(d, s, rank, ops[i].peer, ops[i].buf, ops[i].bytes, err)
                             : host_send(d, s, rank, ops[i].peer, ops[i].buf, ops[i].bytes, err);
        return rc;
    }
    nsend = 0;
    for (size_t i = 0; i < n && rc == GS_OK; i++)
        if (!ops[i].recv)
            rc = post_mail(d, rank, ops[i].peer, ops[i].buf, ops[i].bytes, &seq[nsend++], err);
    if (rc == GS_OK)
        rc = group_recvs(d, s, rank, ops, n, err);
    nsend = 0;
    for (size_t i = 0; i < n && rc == GS_OK; i++)
        if (!ops[i].recv)
            rc = wait_taken(d, s, rank, ops[i].peer, ops[i].bytes, seq[nsend++], err);
    return rc;
}

/* ---- progress inside launched work ---------------------------------------------------------- */

static gs_status host_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)s, (void)err;
    pthread_mutex_lock(&d->mu);
    if (token > e->token)
        e->token = token;
    e->t = mono_s();
    notify(d, e);
    pthread_mutex_unlock(&d->mu);
    return GS_OK;
}

static gs_status host_wait_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    gs_status rc = GS_OK;
    pthread_mutex_lock(&d->mu);
    struct timespec dl = deadline_in(d->timeout_s);
    const wait_for wf = {s->rank, s, "", NULL, NULL, UINT64_MAX};
    int why = 0;
    while (e->token < token && (why = wait_until(d, e, &dl, &wf)) == 0)
        ;
    if (e->token < token) {
        char what[160];
        snprintf(what, sizeof what, "rank %" PRIu64 " stream %s: waiting for %s", s->rank, gs_stream_name(s->kind),
                 s->kind == GS_STREAM_TP ? "a split of the GEMM beside it (tp_comm_overlap)"
                                         : "a chunk of the ring all-gather beside it (tp_comm_overlap)");
        rc = wait_failed(d, why, err, what);
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
        rc = host_p2p_group(d, s, rank, ops, 2, err);
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
    .abort = host_abort,
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
    .k.linear_fwd = k_linear_fwd,
    .k.linear_bwd = k_linear_bwd,
    .k.add = k_add,
    .k.scale = k_scale,
    .k.embed_fwd = k_embed_fwd,
    .k.embed_bwd = k_embed_bwd,
    .k.rmsnorm_fwd = k_rmsnorm_fwd,
    .k.rmsnorm_bwd = k_rmsnorm_bwd,
    .k.rope_fwd = k_rope_fwd,
    .k.rope_bwd = k_rope_bwd,
    .k.attn_fwd = k_attn_fwd,
    .k.attn_bwd = k_attn_bwd,
    .k.attn_fwd_flash = k_attn_fwd_flash,
    .k.attn_bwd_flash = k_attn_bwd_flash,
    .k.dropout = k_dropout,
    .gemm_math = host_gemm_math,
    .sends_wait = host_sends_wait,
    .k.swiglu_fwd = k_swiglu_fwd,
    .k.swiglu_bwd = k_swiglu_bwd,
    .k.layernorm_fwd = k_layernorm_fwd,
    .k.layernorm_bwd = k_layernorm_bwd,
    .k.gelu_fwd = k_gelu_fwd,
    .k.gelu_bwd = k_gelu_bwd,
    .k.bias_add = k_bias_add,
    .k.bias_grad = k_bias_grad,
    .k.xent_stats = k_xent_stats,
    .k.xent_combine = k_xent_combine,
    .k.xent_bwd = k_xent_bwd,
    .k.adamw = k_adamw,
    .all_gather = host_all_gather,
    .reduce_scatter = host_reduce_scatter,
    .all_reduce = host_all_reduce,
    .broadcast = host_broadcast,
    .send = host_send,
    .recv = host_recv,
    .p2p_group = host_p2p_group,
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
