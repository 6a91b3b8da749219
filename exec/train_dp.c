/* The data-parallel actions on the exec side: FSDP's unit gathers and gradient reduce-scatters,
 * HSDP's cross-node all-reduce, DDP's bucket all-reduces, bucket_stages first's one-bucket
 * reductions, and ZeRO-1/2's gather of the updated slices. */
#include "exec/train_internal.h"

/* Unit u's gradient `in` (full) reduce-scattered over g into `out`: a shard (FSDP, ZeRO-2) or,
 * when out_full, this rank's slice of ZeRO-1's resident full gradient; HSDP's cross-node
 * all-reduce adds it instead (R > 1). `in` is zeroed for the next gradients. */
static gs_status reduce_into(const ctx *c, const gs_drv_group *g, float *in, float *out, int out_full, size_t u)
{
    rank_st *r = c->r;
    const gs_driver_ops *ops = c->t->ops;
    uint64_t S = r->units[u].S;
    gs_status rc = ops->reduce_scatter(c->t->drv, c->s, r->rank, g, in, r->tmp[u], S, c->err);
    if (rc != GS_OK)
        return rc;
    if (r->R <= 1)
        ops->k.add(c->s, out + (out_full ? r->units[u].pos * S : 0), r->tmp[u], S);
    ops->fill(c->t->drv, c->s, in, 0.0f, r->units[u].N * S);
    return GS_OK;
}

gs_status gs__train_dp_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    const gs_event *e = c->e;
    const unit_info *ui = &r->units[e->unit];
    const gs_drv_group *g = &r->groups[e->group];
    float *in = gs__train_buf(c, c->pl->ptid), *out = gs__train_buf(c, c->pl->gtid);
    gs_status rc;
    if ((rc = gs__train_need(c, in, "input tensor")) != GS_OK ||
        (rc = gs__train_need(c, out, "output tensor")) != GS_OK)
        return rc;
    switch (act) {
    case A_UNIT_AG:
        return ops->all_gather(t->drv, c->s, r->rank, g, in, out, ui->S, c->err);
    case A_UNIT_RS:
        return reduce_into(c, g, in, out, r->own_slice && c->re->tensors[c->pl->gtid].kind == GS_T_GRAD, e->unit);
    case A_OWN_AG: {
        /* in place: this rank's slice of the resident parameters is the member's input */
        const uint32_t *writes = gs_event_list(c->re, e, GS_LINK_WRITES);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_WRITES]; j++) {
            size_t u = c->re->tensors[writes[j]].unit;
            uint64_t S = r->units[u].S;
            float *p = gs__train_buf(c, writes[j]);
            if ((rc = gs__train_need(c, p, "parameters")) != GS_OK ||
                (rc = ops->all_gather(t->drv, c->s, r->rank, g, p + r->units[u].pos * S, p, S, c->err)) != GS_OK)
                return rc;
        }
        return GS_OK;
    }
    case A_INTER_AR: {
        if (ui->N <= 1) {
            /* one DP rank per node: the whole unit's pending gradient, summed over the replicas */
            if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, in, ui->S, c->err)) != GS_OK)
                return rc;
            ops->k.add(c->s, out, in, ui->S);
            ops->fill(t->drv, c->s, in, 0.0f, ui->S);
            return GS_OK;
        }
        float *tmp = r->tmp[e->unit];
        if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, tmp, ui->S, c->err)) != GS_OK)
            return rc;
        ops->k.add(c->s, out, tmp, ui->S);
        return GS_OK;
    }
    case A_CHUNK_AR: {
        /* one bucket of several units (bucket_stages first): the host all-reduce sums element by
         * element in member order, so reducing unit by unit gives the bits one call over the
         * concatenation would */
        const uint32_t *reads = gs_event_list(c->re, e, GS_LINK_READS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_READS]; j++) {
            size_t u = c->re->tensors[reads[j]].unit;
            float *pend = gs__train_buf(c, gs__train_pending_id(r, c->re, u)), *grad = gs__train_buf(c, r->grad_t[u]);
            uint64_t n = r->units[u].P;
            if ((rc = gs__train_need(c, pend, "input tensor")) != GS_OK ||
                (rc = gs__train_need(c, grad, "output tensor")) != GS_OK ||
                (rc = ops->all_reduce(t->drv, c->s, r->rank, g, pend, n, c->err)) != GS_OK)
                return rc;
            if (pend != grad) {
                ops->k.add(c->s, grad, pend, n);
                ops->fill(t->drv, c->s, pend, 0.0f, n);
            }
        }
        return GS_OK;
    }
    case A_CHUNK_RS: {
        /* ZeRO-1's bucket_stages: first bucket: each unit's pending gradient into its own slice */
        const uint32_t *reads = gs_event_list(c->re, e, GS_LINK_READS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_READS]; j++) {
            size_t u = c->re->tensors[reads[j]].unit;
            float *pend = gs__train_buf(c, gs__train_pending_id(r, c->re, u)), *grad = gs__train_buf(c, r->grad_t[u]);
            if ((rc = gs__train_need(c, pend, "input tensor")) != GS_OK ||
                (rc = gs__train_need(c, grad, "output tensor")) != GS_OK ||
                (rc = reduce_into(c, g, pend, grad, 1, u)) != GS_OK)
                return rc;
        }
        return GS_OK;
    }
    case A_BUCKET_AR: {
        uint64_t o = c->pl->off, n = c->pl->count;
        if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, in + o, n, c->err)) != GS_OK)
            return rc;
        if (in != out) {
            ops->k.add(c->s, out + o, in + o, n);
            ops->fill(t->drv, c->s, in + o, 0.0f, n);
        }
        return GS_OK;
    }
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no DP action %d", (int)act);
    }
}

