/* The optimizer on the exec side: AdamW over each unit's optimizer window (the whole unit, FSDP's
 * shard, or ZeRO-1/2's own slice), and, under sequence parallelism, the TP all-reduce of the
 * replicated weights' gradients before it. */
#include <inttypes.h>

#include "exec/train_internal.h"

/* What the optimizer updates of unit u: n parameters at *p (flat offset *lo of the unit) from n
 * gradients at *g. The whole unit, FSDP's stored shard, or ZeRO-1/2's own slice of the resident
 * parameters (from its slice of ZeRO-1's full gradient or ZeRO-2's gradient shard; an all-gather,
 * A_OWN_AG, shares it). 0 when the gradient storage does not hold n elements for it. */
int gs__train_opt_window(const rank_st *r, size_t u, float **p, float **g, uint64_t *lo, uint64_t *n)
{
    uint64_t S = r->units[u].S, N = r->units[u].N, pos = r->units[u].pos;
    *n = r->plan.stored_sharded ? S : N * S;
    *p = r->tbuf[r->param_t[u]];
    *g = r->tbuf[r->grad_t[u]];
    *lo = r->plan.stored_sharded ? pos * S : 0;
    uint64_t gn = N <= 1 || !r->plan.shard_grads ? *n : S;
    if (r->own_slice) {
        *p += pos * S;
        if (gn == *n)
            *g += pos * S;
        *lo = pos * S;
        *n = gn = S;
    }
    return gn == *n;
}

gs_status gs__train_optim_action(const ctx *c, action act)
{
    (void)act;
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    gs__train_cp_acc_flush(c); /* opts fp8_cp_accumulate: the CP blocks' step into the gradients */
    for (size_t u = 0; u < r->nunits; u++) {
        float *p, *g;
        uint64_t lo, n;
        if (!gs__train_opt_window(r, u, &p, &g, &lo, &n))
            return gs_error_set(c->err, GS_ERR_RUNTIME, "unit %zu: %" PRIu64 " parameters but fewer gradients", u, n);
        ops->k.adamw(c->s, p, g, r->m[u], r->v[u], n, t->o.lr, t->o.beta1, t->o.beta2, t->o.eps, t->o.weight_decay,
                   t->step);
        ops->fill(t->drv, c->s, g, 0.0f, n);
        if (r->hold_t[u] != NO_ID)
            ops->fill(t->drv, c->s, r->tbuf[r->hold_t[u]], 0.0f, r->units[u].N * r->units[u].S);
    }
    return GS_OK;
}

/* Sequence parallelism: the norm weights' gradients of this rank's storage, summed over TP. Every
 * TP peer holds the same flat ranges, so the buffer is the stage's norm gradients with zeros where
 * this rank stores nothing. */
gs_status gs__train_sp_norm_action(const ctx *c, action act)
{
    (void)act;
    gs_train *t = c->t;
    rank_st *r = c->r;
    uint64_t total = 0;
    for (size_t u = 0; u < r->nunits; u++)
        for (size_t k = 0; k < r->units[u].nsegs; k++)
            if (r->units[u].segs[k].tp_replicated)
                total += r->units[u].segs[k].row_len * r->units[u].segs[k].nrows;
    float *buf = t->ops->alloc(t->drv, r->rank, (total + 1) * sizeof(float));
    if (!buf)
        return gs_error_set(c->err, GS_ERR_NOMEM, "out of memory");
    int sharded = r->plan.shard_grads;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t at = 0;
        for (size_t u = 0; u < r->nunits; u++) {
            const unit_info *ui = &r->units[u];
            int sh = sharded && ui->N > 1;
            uint64_t lo = sh ? ui->pos * ui->S : 0, hi = sh ? lo + ui->S : ui->N * ui->S;
            float *g = r->tbuf[r->grad_t[u]];
            for (size_t k = 0; k < ui->nsegs; k++) {
                const segment *sg = &ui->segs[k];
                if (!sg->tp_replicated)
                    continue;
                uint64_t n = sg->row_len * sg->nrows, f0 = sg->flat_off, f1 = f0 + n;
                uint64_t a = f0 > lo ? f0 : lo, b = f1 < hi ? f1 : hi;
                if (a < b) {
                    if (pass == 0)
                        t->ops->copy(t->drv, c->s, buf + at + (a - f0), g + (a - lo), (b - a) * sizeof(float));
                    else
                        t->ops->copy(t->drv, c->s, g + (a - lo), buf + at + (a - f0), (b - a) * sizeof(float));
                }
                at += n;
            }
        }
        if (pass == 0) {
            gs_status rc = t->ops->all_reduce(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], buf, total, c->err);
            if (rc != GS_OK) {
                t->ops->free(t->drv, r->rank, buf);
                return rc;
            }
        }
    }
    t->ops->free(t->drv, r->rank, buf);
    return GS_OK;
}

