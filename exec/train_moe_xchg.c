/* A MoE block's routing decisions and token exchanges on the exec side (exec/train_moe.c has the
 * router's and dropping's definitions and the actions that call these).
 *
 * Token rows per rank vary with the routing, while the schedule's events carry the busiest
 * rank's planned bytes. exec moves the real counts: each all-to-all's counts are exchanged first
 * (an all-gather of every member's rows per expert, as Megatron-Core's dispatcher exchanges its
 * splits), then the rows go in one all-to-all whose blocks are padded to the largest count
 * between any two members; the expert-TP gather and reduce-scatter pad each member's rows to the
 * largest member's alike. Padding rows are zero and never read.
 *
 * The routing decisions (which rows go where) are made on the host from the router's outputs, as
 * Megatron-Core's dispatcher syncs its counts to the host; row moves run as driver kernels. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_moe_internal.h"

/* ---- helpers ---- */

/* b holds at least n elements of size `size`; NULL (and an error) when out of memory. */
void *gs__train_moe_grow(const ctx *c, dbuf *b, uint64_t n, size_t size)
{
    uint64_t bytes = (n ? n : 1) * size;
    if (b->cap >= bytes)
        return b->p;
    if (b->p)
        c->t->ops->free(c->t->drv, c->r->rank, b->p);
    b->p = c->t->ops->alloc(c->t->drv, c->r->rank, bytes);
    b->cap = b->p ? bytes : 0;
    if (!b->p)
        gs_error_set(c->err, GS_ERR_NOMEM, "out of memory for the MoE block's %" PRIu64 " B buffer", bytes);
    return b->p;
}


int gs__train_moe_host_grow(void **p, size_t bytes)
{
    void *n = realloc(*p, bytes ? bytes : 1);
    if (!n)
        return 0;
    *p = n;
    return 1;
}

gs_status gs__train_moe_nomem(const ctx *c)
{
    return gs_error_set(c->err, GS_ERR_NOMEM, "out of memory for the MoE block's routing");
}

static void copy_rows(const ctx *c, float *dst, const float *src, uint64_t rows)
{
    if (rows)
        c->t->ops->copy(c->t->drv, c->s, dst, src, rows * c->t->h * sizeof(float));
}

/* Sent rows to EP member d (rows of its experts d L .. d L + L - 1) from member s. */
static uint64_t rows_to(const moe_mb *m, const moe_dims *d, uint64_t s, uint64_t dst)
{
    uint64_t n = 0;
    for (uint64_t j = 0; j < d->L; j++)
        n += m->cnt[s * d->E + dst * d->L + j];
    return n;
}

/* ---- the routing (forward) ---- */

typedef struct slot_key {
    float w;
    int32_t tok, slot;
} slot_key;

static int by_weight(const void *a, const void *b)
{
    const slot_key *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return (x->tok > y->tok) - (x->tok < y->tok);
}

/* The kept slots and the sent rows' order from the router's top-k (host), uploaded. */
gs_status gs__train_moe_route(const ctx *c, moe_mb *m, const moe_dims *d)
{
    const gs_driver_ops *ops = c->t->ops;
    uint64_t n = d->Tl * d->k;
    unsigned char *keep = malloc(n ? n : 1);
    slot_key *ks = malloc((d->Tl ? d->Tl : 1) * sizeof *ks);
    gs_status rc = GS_OK;
    if (!keep || !ks || !gs__train_moe_host_grow((void **)&m->idx_h, n * 4) || !gs__train_moe_host_grow((void **)&m->probs_h, n * 4) ||
        !gs__train_moe_host_grow((void **)&m->tok_h, n * 4) || !gs__train_moe_host_grow((void **)&m->slot_h, n * 4) ||
        !gs__train_moe_host_grow((void **)&m->w_h, n * 4) || !gs__train_moe_host_grow((void **)&m->cnt, d->ep * d->E * 8)) {
        rc = gs__train_moe_nomem(c);
        goto out;
    }
    ops->download(c->t->drv, c->s, m->idx_h, m->idx.p, n * sizeof(int32_t));
    ops->download(c->t->drv, c->s, m->probs_h, m->probs.p, n * sizeof(float));
    memset(keep, 1, n);
    if (d->cf > 0) {
        uint64_t cap = (uint64_t)ceil((double)n / (double)d->E * d->cf);
        for (uint64_t e = 0; cap <= d->Tl && e < d->E; e++) {
            uint64_t nk = 0;
            for (uint64_t s = 0; s < n; s++)
                if (m->idx_h[s] == (int32_t)e)
                    ks[nk++] = (slot_key){m->probs_h[s], (int32_t)(s / d->k), (int32_t)s};
            if (nk <= cap)
                continue;
            qsort(ks, nk, sizeof *ks, by_weight);
            for (uint64_t q = cap; q < nk; q++)
                keep[ks[q].slot] = 0;
        }
    }
    uint64_t *own = m->cnt + d->ep_pos * d->E;
    m->nsend = 0;
    for (uint64_t e = 0; e < d->E; e++) {
        own[e] = 0;
        for (uint64_t tk = 0; tk < d->Tl; tk++)
            for (uint64_t j = 0; j < d->k; j++) {
                uint64_t s = tk * d->k + j;
                if (m->idx_h[s] != (int32_t)e || !keep[s])
                    continue;
                m->tok_h[m->nsend] = (int32_t)tk;
                m->slot_h[m->nsend] = (int32_t)s;
                m->w_h[m->nsend] = m->probs_h[s];
                m->nsend++;
                own[e]++;
            }
    }
    if (!gs__train_moe_grow(c, &m->tok, m->nsend, sizeof(int32_t)) || !GROWF(c, &m->w, m->nsend)) {
        rc = GS_ERR_NOMEM;
        goto out;
    }
    ops->upload(c->t->drv, c->s, m->tok.p, m->tok_h, m->nsend * sizeof(int32_t));
    ops->upload(c->t->drv, c->s, m->w.p, m->w_h, m->nsend * sizeof(float));
out:
    free(keep);
    free(ks);
    return rc;
}

/* The counts every EP member sends (an all-gather over EP; without EP this rank's own), the
 * received rows per source and local expert, and the all-to-all's block size. */
gs_status gs__train_moe_counts(const ctx *c, moe_mb *m, const moe_dims *d)
{
    gs_train *t = c->t;
    if (d->ep > 1) {
        float *mine = malloc(d->E * sizeof *mine), *all = malloc(d->ep * d->E * sizeof *all);
        float *dm = GROWF(c, &m->a2a_s, d->E), *da = GROWF(c, &m->a2a_r, d->ep * d->E);
        gs_status rc = mine && all ? GS_OK : gs__train_moe_nomem(c);
        if (rc == GS_OK && (!dm || !da))
            rc = GS_ERR_NOMEM;
        for (uint64_t e = 0; rc == GS_OK && e < d->E; e++)
            mine[e] = (float)m->cnt[d->ep_pos * d->E + e];
        if (rc == GS_OK) {
            t->ops->upload(t->drv, c->s, dm, mine, d->E * sizeof(float));
            rc = t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_EP], dm, da, d->E, c->err);
        }
        if (rc == GS_OK) {
            t->ops->download(t->drv, c->s, all, da, d->ep * d->E * sizeof(float));
            for (uint64_t i = 0; i < d->ep * d->E; i++)
                m->cnt[i] = (uint64_t)all[i];
        }
        free(mine);
        free(all);
        if (rc != GS_OK)
            return rc;
    }
    m->B = 0;
    m->nrecv = 0;
    for (uint64_t s = 0; s < d->ep; s++)
        for (uint64_t dst = 0; dst < d->ep; dst++) {
            uint64_t n = rows_to(m, d, s, dst);
            m->B = n > m->B ? n : m->B;
            if (dst == d->ep_pos)
                m->nrecv += n;
        }
    return GS_OK;
}

/* Rows this rank holds for peer i of the EP group, in either direction: out (the dispatch) it
 * sends rows_to(pos, i) and receives rows_to(i, pos); back (the combine) the other way round. */
static uint64_t rows_with(const moe_mb *m, const moe_dims *d, uint64_t i, int back, int sending)
{
    return back == sending ? rows_to(m, d, i, d->ep_pos) : rows_to(m, d, d->ep_pos, i);
}

/* One all-to-all over the EP group in blocks padded to the largest count (m->B rows): `in` packed
 * by peer, the blocks exchanged, unpacked into `out`. */
static gs_status a2a(const ctx *c, moe_mb *m, const moe_dims *d, const float *in, float *out, int back)
{
    gs_train *t = c->t;
    uint64_t h = d->h, B = m->B;
    if (d->ep <= 1) {
        copy_rows(c, out, in, m->nsend);
        return GS_OK;
    }
    float *sb = GROWF(c, &m->a2a_s, d->ep * B * h), *rb = GROWF(c, &m->a2a_r, d->ep * B * h);
    if (!sb || !rb)
        return GS_ERR_NOMEM;
    t->ops->fill(t->drv, c->s, sb, 0.0f, d->ep * B * h);
    for (uint64_t i = 0, off = 0; i < d->ep; i++) {
        uint64_t n = rows_with(m, d, i, back, 1);
        copy_rows(c, sb + i * B * h, in + off * h, n);
        off += n;
    }
    gs_status rc = t->ops->all_to_all(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_EP], sb, rb, B * h, c->err);
    if (rc != GS_OK)
        return rc;
    for (uint64_t i = 0, off = 0; i < d->ep; i++) {
        uint64_t n = rows_with(m, d, i, back, 0);
        copy_rows(c, out + off * h, rb + i * B * h, n);
        off += n;
    }
    return GS_OK;
}

/* Rows in sent order (this rank's, by expert) to the experts' EP members, into received order:
 * the dispatch, and the combine's backward. */
gs_status gs__train_moe_a2a_out(const ctx *c, moe_mb *m, const moe_dims *d, const float *sent, float *recvd)
{
    return a2a(c, m, d, sent, recvd, 0);
}

/* The way back: rows in received order to their sources, into sent order (the combine, and the
 * dispatch's backward). */
gs_status gs__train_moe_a2a_back(const ctx *c, moe_mb *m, const moe_dims *d, const float *recvd, float *sent)
{
    return a2a(c, m, d, recvd, sent, 1);
}

/* Every TP member's received counts (an all-gather over TP; without TP this rank's), the padded
 * size M, and the expert order of the gathered rows (uploaded). */
gs_status gs__train_moe_etp_counts(const ctx *c, moe_mb *m, const moe_dims *d)
{
    gs_train *t = c->t;
    uint64_t per = d->ep * d->L;
    if (!gs__train_moe_host_grow((void **)&m->gcnt, d->tp * per * 8) || !gs__train_moe_host_grow((void **)&m->ecnt, d->L * 8))
        return gs__train_moe_nomem(c);
    uint64_t *own = m->gcnt + (d->tp > 1 ? c->r->tp_pos : 0) * per;
    for (uint64_t s = 0; s < d->ep; s++)
        for (uint64_t j = 0; j < d->L; j++)
            own[s * d->L + j] = m->cnt[s * d->E + d->ep_pos * d->L + j];
    if (d->tp > 1) {
        float *mine = malloc(per * sizeof *mine), *all = malloc(d->tp * per * sizeof *all);
        float *dm = GROWF(c, &m->a2a_s, per), *da = GROWF(c, &m->a2a_r, d->tp * per);
        gs_status rc = mine && all ? GS_OK : gs__train_moe_nomem(c);
        if (rc == GS_OK && (!dm || !da))
            rc = GS_ERR_NOMEM;
        for (uint64_t i = 0; rc == GS_OK && i < per; i++)
            mine[i] = (float)own[i];
        if (rc == GS_OK) {
            t->ops->upload(t->drv, c->s, dm, mine, per * sizeof(float));
            rc = t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], dm, da, per, c->err);
        }
        if (rc == GS_OK) {
            t->ops->download(t->drv, c->s, all, da, d->tp * per * sizeof(float));
            for (uint64_t i = 0; i < d->tp * per; i++)
                m->gcnt[i] = (uint64_t)all[i];
        }
        free(mine);
        free(all);
        if (rc != GS_OK)
            return rc;
    }
    m->M = 0;
    m->ne = 0;
    for (uint64_t q = 0; q < d->tp; q++) {
        uint64_t n = 0;
        for (uint64_t i = 0; i < per; i++)
            n += m->gcnt[q * per + i];
        m->M = n > m->M ? n : m->M;
        m->ne += n;
    }
    if (!gs__train_moe_host_grow((void **)&m->eidx_h, m->ne * 4))
        return gs__train_moe_nomem(c);
    uint64_t at = 0;
    for (uint64_t j = 0; j < d->L; j++) {
        m->ecnt[j] = 0;
        for (uint64_t q = 0; q < d->tp; q++) {
            uint64_t off = 0; /* rows of member q before (s, j) */
            for (uint64_t s = 0; s < d->ep; s++)
                for (uint64_t j2 = 0; j2 < d->L; j2++) {
                    uint64_t n = m->gcnt[q * per + s * d->L + j2];
                    for (uint64_t i = 0; j2 == j && i < n; i++)
                        m->eidx_h[at++] = (int32_t)(q * m->M + off + i);
                    if (j2 == j)
                        m->ecnt[j] += n;
                    off += n;
                }
        }
    }
    if (!gs__train_moe_grow(c, &m->eidx, m->ne, sizeof(int32_t)))
        return GS_ERR_NOMEM;
    t->ops->upload(t->drv, c->s, m->eidx.p, m->eidx_h, m->ne * sizeof(int32_t));
    return GS_OK;
}

/* Received rows gathered over TP (each member's padded to M rows): the experts' input, and the
 * combine's gradient on the way back. */
gs_status gs__train_moe_etp_gather(const ctx *c, moe_mb *m, const moe_dims *d, const float *recvd, float *gathered)
{
    gs_train *t = c->t;
    uint64_t h = d->h;
    if (d->tp <= 1) {
        copy_rows(c, gathered, recvd, m->nrecv);
        return GS_OK;
    }
    float *pad = GROWF(c, &m->pad, m->M * h);
    if (!pad)
        return GS_ERR_NOMEM;
    t->ops->fill(t->drv, c->s, pad, 0.0f, m->M * h);
    copy_rows(c, pad, recvd, m->nrecv);
    return t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], pad, gathered, m->M * h, c->err);
}

/* Partial sums over the gathered rows reduce-scattered over TP into this member's received rows. */
gs_status gs__train_moe_etp_scatter(const ctx *c, moe_mb *m, const moe_dims *d, const float *gathered, float *recvd)
{
    gs_train *t = c->t;
    if (d->tp <= 1) {
        copy_rows(c, recvd, gathered, m->nrecv);
        return GS_OK;
    }
    float *pad = GROWF(c, &m->pad, m->M * d->h);
    if (!pad)
        return GS_ERR_NOMEM;
    gs_status rc = t->ops->reduce_scatter(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], gathered, pad,
                                          m->M * d->h, c->err);
    if (rc == GS_OK)
        copy_rows(c, recvd, pad, m->nrecv);
    return rc;
}
