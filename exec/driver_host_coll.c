/* The host driver's collectives: members meet in a shared slot, in one process or across
 * processes through the bootstrap (exec/driver_host_internal.h). */
#include "exec/driver_host_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/host/kernels.h"

/* ---- collectives ---------------------------------------------------------------------------- */

enum { OP_AG = 1, OP_RS, OP_AR, OP_BCAST, OP_A2A, OP_ARMAX };

static const char *op_name(int op)
{
    return op == OP_AG ? "all_gather" : op == OP_RS ? "reduce_scatter" : op == OP_AR ? "all_reduce"
           : op == OP_A2A ? "all_to_all" : op == OP_ARMAX ? "all_reduce_max" : "broadcast";
}

/* acc combined with v: the sum (OP_AR), or the maximum with a NaN winning (OP_ARMAX). */
static float combine(int op, float acc, float v)
{
    return op == OP_ARMAX ? gs_k_max_nan(acc, v) : acc + v;
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

void gs__host_boot_wait_init(gs_drv *d, gs_boot_wait *w)
{
    w->timeout_s = d->timeout_s;
    w->stop = boot_stop;
    w->arg = d;
    w->peer_msg[0] = '\0';
}

/* The status of a transport call that ended with o; what names the op for messages. */
gs_status gs__host_boot_result(gs_drv *d, gs_boot_outcome o, const gs_boot_wait *w, const gs_error *terr,
                               const char *what, gs_error *err)
{
    if (o == GS_BOOT_DONE)
        return GS_OK;
    gs_status rc;
    pthread_mutex_lock(&d->mu);
    if (o == GS_BOOT_FAILED) {
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%s: %s", what, terr->msg);
        gs__host_abort_locked(d, err->msg);
    } else {
        if (o == GS_BOOT_PEER_ABORT)
            gs__host_peer_abort_locked(d, w->peer_msg);
        rc = gs__host_wait_failed(d, o == GS_BOOT_TIMEOUT ? 2 : 1, err, what);
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
    gs__host_boot_wait_init(d, &w);
    gs_error terr;
    gs_error_init(&terr);
    const gs_exec_boot *b = d->boot;
    gs_boot_outcome o = alltoall ? b->group_alltoall(b->ctx, d->comm[g->kind], send, count * sizeof *send, recv, &w,
                                                     &terr)
                                 : b->group_allgather(b->ctx, d->comm[g->kind], send, count * sizeof *send, recv, &w,
                                                      &terr);
    (void)s; /* the transport does not say when every party arrived: op_start stays the work's start */
    return gs__host_boot_result(d, o, &w, &terr, what, err);
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
        gs_status rc = gs__host_wait_failed(d, 1, err, what);
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
        gs__host_abort_locked(d, msg);
        pthread_mutex_unlock(&d->mu);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    c->in[g->pos] = in;
    c->arrived++;
    *gen = c->gen;
    if (c->arrived == g->size)
        gs__host_notify(d, c); /* the members before this one */
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, g, c, 0};
    while (c->arrived < g->size && (why = gs__host_wait_until(d, c, &dl, &wf)) == 0)
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
        rc = gs__host_wait_failed_for(d, why, err, what, &wf);
    } else {
        gs__host_mark_start(s);
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
        gs__host_notify(d, c);
    }
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
    int why = 0;
    while (c->gen == gen && (why = gs__host_wait_until(d, c, &dl, NULL)) == 0)
        ;
    gs_status rc = GS_OK;
    if (c->gen == gen) {
        char what[160];
        snprintf(what, sizeof what, "rank %" PRIu64 ": leaving a collective on %s group %" PRIu64, rank,
                 gs_group_kind_name(g->kind), g->index);
        rc = gs__host_wait_failed(d, why, err, what);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

gs_status gs__host_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
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

gs_status gs__host_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                  float *recv, size_t count, gs_error *err)
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

/* An all-reduce of op (OP_AR: sum, OP_ARMAX: maximum), combined in ascending member order. */
static gs_status all_reduce_op(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                               size_t count, int op, gs_error *err)
{
    float *tmp = malloc((count ? count : 1) * sizeof *tmp);
    if (!tmp)
        return gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": %s: out of memory", rank, op_name(op));
    if (d->boot && g->size > 1) {
        /* every member's buffer, then combined in ascending member order as below */
        size_t n = (size_t)g->size * count;
        float *all = malloc((n ? n : 1) * sizeof *all);
        gs_status rc = all ? boot_exchange(d, s, rank, g, op, buf, all, count, 0, err)
                           : gs_error_set(err, GS_ERR_NOMEM, "rank %" PRIu64 ": %s: out of memory", rank, op_name(op));
        for (size_t j = 0; rc == GS_OK && j < count; j++) {
            float acc = all[j];
            for (uint64_t i = 1; i < g->size; i++)
                acc = combine(op, acc, all[i * count + j]);
            buf[j] = acc;
        }
        free(all);
        free(tmp);
        return rc;
    }
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, op, count, buf, &c, &gen, err);
    if (rc == GS_OK) {
        for (size_t j = 0; j < count; j++) {
            float acc = c->in[0][j];
            for (uint64_t i = 1; i < g->size; i++)
                acc = combine(op, acc, c->in[i][j]);
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

gs_status gs__host_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                              size_t count, gs_error *err)
{
    return all_reduce_op(d, s, rank, g, buf, count, OP_AR, err);
}

gs_status gs__host_all_reduce_max(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                  size_t count, gs_error *err)
{
    return all_reduce_op(d, s, rank, g, buf, count, OP_ARMAX, err);
}

gs_status gs__host_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                             size_t count, uint64_t root, gs_error *err)
{
    if (d->boot && g->size > 1) {
        char what[256];
        coll_what(what, sizeof what, rank, g, OP_BCAST, count);
        if (g->kind >= GS_GROUP_KIND_COUNT || !d->comm[g->kind] || root >= g->size)
            return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such group or root", what);
        gs_boot_wait w;
        gs__host_boot_wait_init(d, &w);
        gs_error terr;
        gs_error_init(&terr);
        gs_boot_outcome o = d->boot->group_bcast(d->boot->ctx, d->comm[g->kind], buf, count * sizeof *buf, (int)root,
                                                 &w, &terr);
        return gs__host_boot_result(d, o, &w, &terr, what, err);
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

gs_status gs__host_all_to_all(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err)
{
    if (d->boot && g->size > 1)
        return boot_exchange(d, s, rank, g, OP_A2A, send, recv, count, 1, err);
    coll_slot *c;
    uint64_t gen;
    gs_status rc = arrive(d, s, rank, g, OP_A2A, count, send, &c, &gen, err);
    if (rc != GS_OK)
        return rc;
    size_t off = (size_t)g->pos * count;
    for (uint64_t i = 0; i < g->size; i++)
        memcpy(recv + i * count, c->in[i] + off, count * sizeof *recv);
    return depart(d, rank, g, c, gen, err);
}
