/* The cuda driver's collectives and point-to-point transfers through NCCL
 * (exec/driver_cuda_internal.h). */
#include "exec/driver_cuda_internal.h"

/* ---- collectives and p2p: NCCL ---------------------------------------------------------------- */

/* The rank's communicator for g, checked against the group's size and the caller's position. */
static gs_status comm_of(gs_drv *d, uint64_t rank, const gs_drv_group *g, ncclComm_t *out, gs_error *err)
{
    if (rank >= d->world || (int)g->kind < 0 || (int)g->kind >= GS_GROUP_KIND_COUNT)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": no such group", rank);
    ncclComm_t c = d->r[rank].comm[g->kind];
    if (!c)
        return gs__cuda_aborted(d, err) ? GS_ERR_RUNTIME
                                        : gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": no %s communicator",
                                                       rank, gs__cuda_group_name(g->kind));
    *out = c;
    return GS_OK;
}

/* The status of work refused because the run was aborted: the abort's message after `where`. */
static gs_status stopped(gs_drv *d, const char *where, gs_error *err)
{
    gs_error e;
    gs__cuda_aborted(d, &e);
    return gs_error_set(err, GS_ERR_RUNTIME, "%s: stopped: %s", where, e.msg);
}

typedef enum coll_kind { C_AG, C_RS, C_AR, C_BCAST, C_ARMAX } coll_kind;

static const char *coll_name(coll_kind k)
{
    static const char *const n[] = {"ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclBroadcast",
                                    "ncclAllReduce (max)"};
    return n[k];
}

/* One NCCL call inside ncclGroupStart/End, under the rank's lock, then waited for (non-blocking
 * communicators: the call is on the stream once the async state leaves ncclInProgress). */
static gs_status nccl_issue(gs_drv *d, gs_drv_stream *s, uint64_t rank, ncclComm_t c, coll_kind k, const void *send,
                            void *recv, size_t count, ncclDataType_t type, int peer_or_root, const char *where,
                            gs_error *err)
{
    rank_dev *r = &d->r[rank];
    pthread_mutex_lock(&r->mu);
    if (gs__cuda_aborted(d, NULL)) {
        pthread_mutex_unlock(&r->mu);
        return stopped(d, where, err);
    }
    ncclResult_t st = ncclGroupStart(), st2;
    if (st == ncclSuccess) {
        switch (k) {
        case C_AG: st = ncclAllGather(send, recv, count, type, c, gs__cuda_work_on(s)); break;
        case C_RS: st = ncclReduceScatter(send, recv, count, type, ncclSum, c, gs__cuda_work_on(s)); break;
        case C_AR: st = ncclAllReduce(send, recv, count, type, ncclSum, c, gs__cuda_work_on(s)); break;
        case C_BCAST: st = ncclBroadcast(send, recv, count, type, peer_or_root, c, gs__cuda_work_on(s)); break;
        case C_ARMAX: st = ncclAllReduce(send, recv, count, type, ncclMax, c, gs__cuda_work_on(s)); break;
        }
        st2 = ncclGroupEnd();
        if (st == ncclSuccess || st == ncclInProgress)
            st = st2;
    }
    pthread_mutex_unlock(&r->mu);
    if (st != ncclSuccess && st != ncclInProgress) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: %s: %s (%s)", where, coll_name(k), ncclGetErrorString(st), ncclGetLastError(c));
        gs__cuda_abort(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return gs__cuda_nccl_wait(d, r, c, rank, where, err);
}

/* The communicator of group g for an operation named what on count floats, on s's device; where
 * (cap bytes) gets the operation's name for messages. */
static gs_status group_op(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const char *what,
                          size_t count, char *where, size_t cap, ncclComm_t *c, gs_error *err)
{
    snprintf(where, cap, "rank %" PRIu64 ": %s of %zu floats on %s group %" PRIu64, rank, what, count,
             gs__cuda_group_name(g->kind), g->index);
    *c = NULL;
    gs_status rc = comm_of(d, rank, g, c, err);
    if (rc != GS_OK)
        return rc;
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaSetDevice failed", where);
    return GS_OK;
}

static gs_status coll(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, coll_kind k,
                      const float *send, float *recv, size_t count, int root, gs_error *err)
{
    char where[160];
    ncclComm_t c;
    gs_status rc = group_op(d, s, rank, g, coll_name(k), count, where, sizeof where, &c, err);
    if (rc != GS_OK)
        return rc;
    return nccl_issue(d, s, rank, c, k, send, recv, count, ncclFloat, root, where, err);
}

gs_status gs__cuda_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_AG, send, recv, count, 0, err);
}

gs_status gs__cuda_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                  float *recv, size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_RS, send, recv, count, 0, err);
}

gs_status gs__cuda_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                              size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_AR, buf, buf, count, 0, err);
}

gs_status gs__cuda_all_reduce_max(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                  size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_ARMAX, buf, buf, count, 0, err);
}

gs_status gs__cuda_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                             size_t count, uint64_t root, gs_error *err)
{
    if (root >= g->size)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": broadcast root %" PRIu64 " outside the group", rank,
                            root);
    return coll(d, s, rank, g, C_BCAST, buf, buf, count, (int)root, err);
}

/* ops[0..n) as one NCCL group on communicator c (peers: ranks of c), on s; where names it in
 * messages. */
static gs_status nccl_p2p(gs_drv *d, gs_drv_stream *s, uint64_t rank, ncclComm_t c, const gs_drv_p2p *ops, size_t n,
                          const char *where, gs_error *err)
{
    rank_dev *r = &d->r[rank];
    if (!c) {
        return stopped(d, where, err);
    }
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaSetDevice failed", where);
    pthread_mutex_lock(&r->mu);
    if (gs__cuda_aborted(d, NULL)) {
        pthread_mutex_unlock(&r->mu);
        return stopped(d, where, err);
    }
    const char *call = "ncclGroupStart";
    ncclResult_t st = ncclGroupStart(), st2;
    if (st == ncclSuccess) {
        for (size_t i = 0; i < n && (st == ncclSuccess || st == ncclInProgress); i++) {
            call = ops[i].recv ? "ncclRecv" : "ncclSend";
            st = ops[i].recv
                     ? ncclRecv(ops[i].buf, (size_t)ops[i].bytes, ncclInt8, (int)ops[i].peer, c, gs__cuda_work_on(s))
                     : ncclSend(ops[i].buf, (size_t)ops[i].bytes, ncclInt8, (int)ops[i].peer, c, gs__cuda_work_on(s));
        }
        st2 = ncclGroupEnd();
        if (st == ncclSuccess || st == ncclInProgress) {
            call = "ncclGroupEnd";
            st = st2;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (st != ncclSuccess && st != ncclInProgress) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: %s: %s (%s)", where, call, ncclGetErrorString(st), ncclGetLastError(c));
        gs__cuda_abort(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return gs__cuda_nccl_wait(d, r, c, rank, where, err);
}

/* A p2p group as one NCCL group (driver.h: p2p_group): its sends and receives progress together,
 * so ranks that send to each other at once do not each wait for a receive queued behind their
 * own send. */
gs_status gs__cuda_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n, gs_error *err)
{
    char where[160];
    int at = n == 1 ? snprintf(where, sizeof where, "rank %" PRIu64 ":", rank)
                    : snprintf(where, sizeof where, "rank %" PRIu64 ": p2p group of %zu:", rank, n);
    for (size_t i = 0; i < n && at > 0 && (size_t)at < sizeof where; i++)
        at += snprintf(where + at, sizeof where - (size_t)at, " %s %" PRIu64 " B %s %" PRIu64,
                       ops[i].recv ? "recv" : "send", ops[i].bytes, ops[i].recv ? "from" : "to", ops[i].peer);
    if (rank >= d->world)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such rank", where);
    for (size_t i = 0; i < n; i++)
        if (ops[i].peer >= d->world)
            return gs_error_set(err, GS_ERR_RUNTIME, "%s: no rank %" PRIu64, where, ops[i].peer);
    return nccl_p2p(d, s, rank, d->r[rank].world, ops, n, where, err);
}

gs_status gs__cuda_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                        gs_error *err)
{
    const gs_drv_p2p op = {0, peer, (void *)buf, bytes};
    return gs__cuda_p2p_group(d, s, rank, &op, 1, err);
}

gs_status gs__cuda_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                        gs_error *err)
{
    const gs_drv_p2p op = {1, peer, buf, bytes};
    return gs__cuda_p2p_group(d, s, rank, &op, 1, err);
}

/* From inside launched work: a progress mark is a recorded CUDA event (driver.h: mark); the
 * token orders host waits only. */
gs_status gs__cuda_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)token;
    return gs__cuda_event_record(d, s, e, err);
}

gs_status gs__cuda_wait_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)token;
    return gs__cuda_stream_wait_event(d, s, e, err);
}

/* The caller's own block of an exchange, copied on the stream (nothing when it is in place). */
static gs_status own_block(gs_drv_stream *s, float *dst, const float *src, size_t bytes, const char *where,
                          gs_error *err)
{
    if (dst == src || !bytes)
        return GS_OK;
    cudaError_t ce = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, gs__cuda_work_on(s));
    if (ce != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaMemcpyAsync: %s", where, cudaGetErrorString(ce));
    return GS_OK;
}

/* Transformer Engine's ring exchange without userbuffers (driver.h: all_gather_ring): size - 1
 * NCCL groups of one send to the next member and one receive from the previous on the group's
 * communicator, each followed by its mark, so a GEMM on the compute stream can start on a chunk
 * as soon as it has come. */
gs_status gs__cuda_all_gather_ring(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                   float *recv, size_t count, gs_drv_event *const *marks, uint64_t token, gs_error *err)
{
    char where[200];
    ncclComm_t c;
    gs_status rc = group_op(d, s, rank, g, "ring all-gather", count, where, sizeof where, &c, err);
    if (rc != GS_OK)
        return rc;
    uint64_t n = g->size, pos = g->pos;
    size_t bytes = count * sizeof(float);
    if ((rc = own_block(s, recv + pos * count, send, bytes, where, err)) != GS_OK)
        return rc;
    for (uint64_t i = 0; i + 1 < n && rc == GS_OK; i++) {
        uint64_t out = (pos + n - i) % n, in = (pos + n - i - 1) % n;
        const gs_drv_p2p ops[2] = {{0, (pos + 1) % n, recv + out * count, bytes},
                                   {1, (pos + n - 1) % n, recv + in * count, bytes}};
        char step[260];
        snprintf(step, sizeof step, "%.200s, step %" PRIu64 " of %" PRIu64, where, i + 1, n - 1);
        rc = nccl_p2p(d, s, rank, c, ops, 2, step, err);
        if (rc == GS_OK && marks && marks[i])
            rc = gs__cuda_mark(d, s, marks[i], token, err);
    }
    return rc;
}

/* driver.h: all_to_all. recv block i = member i's send block pos, as one NCCL group of a send and
 * a receive per other member on the group's communicator (NCCL's all-to-all is grouped
 * ncclSend / ncclRecv; a member's ranks in the communicator are its positions, the split keeping
 * the ascending order); the caller's own block is copied on the stream. */
gs_status gs__cuda_all_to_all(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err)
{
    char where[160];
    ncclComm_t c;
    gs_status rc = group_op(d, s, rank, g, "all-to-all", count, where, sizeof where, &c, err);
    if (rc != GS_OK)
        return rc;
    uint64_t n = g->size, pos = g->pos;
    size_t bytes = count * sizeof(float);
    if (!bytes)
        return GS_OK;
    if ((rc = own_block(s, recv + pos * count, send + pos * count, bytes, where, err)) != GS_OK)
        return rc;
    if (n < 2)
        return GS_OK;
    gs_drv_p2p *ops = malloc(2 * (size_t)(n - 1) * sizeof *ops);
    if (!ops)
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", where);
    size_t k = 0;
    for (uint64_t j = 0; j < n; j++) {
        if (j == pos)
            continue;
        ops[k++] = (gs_drv_p2p){0, j, (void *)(send + j * count), bytes};
        ops[k++] = (gs_drv_p2p){1, j, recv + j * count, bytes};
    }
    rc = nccl_p2p(d, s, rank, c, ops, k, where, err);
    free(ops);
    return rc;
}
