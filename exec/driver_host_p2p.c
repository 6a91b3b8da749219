/* The host driver's point-to-point transfers: per-pair mailboxes, p2p groups
 * (exec/driver_host_internal.h). */
#include "exec/driver_host_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    gs__host_notify(d, b);
    gs__host_notify(d, &d->inbox[peer]);
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
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, NULL, NULL, peer};
    while (b->taken <= seq && (why = gs__host_wait_until(d, b, &dl, &wf)) == 0)
        ;
    gs_status rc = b->taken > seq ? GS_OK : gs__host_wait_failed_for(d, why, err, what, &wf);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

gs_status gs__host_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                        gs_error *err)
{
    if (peer >= d->mesh.world)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": send to rank %" PRIu64 ": no such rank", rank,
                            peer);
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
        gs__host_notify(d, b); /* the sender waits for its message to be taken */
    return m;
}

gs_status gs__host_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                        gs_error *err)
{
    if (peer >= d->mesh.world)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": recv from rank %" PRIu64 ": no such rank", rank,
                            peer);
    if (d->boot) {
        char what[120];
        snprintf(what, sizeof what, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64, rank, bytes, peer);
        gs_boot_wait w;
        gs__host_boot_wait_init(d, &w);
        gs_error terr;
        gs_error_init(&terr);
        gs_boot_outcome o = d->boot->recv(d->boot->ctx, (int)peer, buf, (size_t)bytes, &w, &terr);
        return gs__host_boot_result(d, o, &w, &terr, what, err);
    }
    char what[120];
    snprintf(what, sizeof what, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64, rank, bytes, peer);
    pthread_mutex_lock(&d->mu);
    mailbox *b = &d->mail[peer * d->mesh.world + rank];
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
    int why = 0;
    const wait_for wf = {rank, s, what, NULL, NULL, peer};
    while (!b->head && (why = gs__host_wait_until(d, b, &dl, &wf)) == 0)
        ;
    if (!b->head) {
        gs_status rc = gs__host_wait_failed_for(d, why, err, what, &wf);
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    gs__host_mark_start(s);
    mail *m = take_mail(d, b);
    pthread_mutex_unlock(&d->mu);
    gs_status rc = GS_OK;
    if (m->bytes != bytes) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64 " got %" PRIu64 " B",
                 rank, bytes, peer, m->bytes);
        gs__host_abort(d, msg);
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
    struct timespec dl = gs__host_deadline_in(d->timeout_s);
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
                gs__host_abort_locked(d, msg);
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
            snprintf(what, sizeof what,
                     "rank %" PRIu64 ": recv of %" PRIu64 " B from rank %" PRIu64 " (in a p2p group)", rank,
                     ops[first].bytes, ops[first].peer);
            const wait_for wf = {rank, s, what, NULL, NULL, ops[first].peer};
            int why = gs__host_wait_until(d, &d->inbox[rank], &dl, &wf);
            if (why)
                rc = gs__host_wait_failed_for(d, why, err, what, &wf);
        }
    }
    if (rc == GS_OK)
        gs__host_mark_start(s);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* The group's sends are posted, its receives taken as their messages come (group_recvs), then
 * (rendezvous) each send's taking: all are in flight together, as in one NCCL group. Across
 * processes the bootstrap's sends are eager: each op in order. */
gs_status gs__host_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n, gs_error *err)
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
            rc = ops[i].recv ? gs__host_recv(d, s, rank, ops[i].peer, ops[i].buf, ops[i].bytes, err)
                             : gs__host_send(d, s, rank, ops[i].peer, ops[i].buf, ops[i].bytes, err);
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
