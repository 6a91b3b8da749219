/* A transformer block's forward and backward on the exec side: per action the kernels and TP
 * collectives of one event (the attention half and the MLP half), and what a forward pass drops
 * for the recompute. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"

/* What an action of a block event works on: its layer's activations, inputs and outputs and their
 * gradients, its weights and weight gradients, the q/k/v views, and its dropout. */
typedef struct blk {
    layer_act *a;
    float *xin, *xout, *dxin, *dxout;
    blockp w, g;
    float *q, *k, *v;
    const gs_dropout *adrop, *hdrop_out, *hdrop_mlp;
    gs_dropout ad, hd_out, hd_mlp;
    /* backward: the gradients into the MLP's and attention's outputs (with hidden dropout the
     * dropped ones, dyd and dxmd; the residual gets the undropped ones) and their gathered rows */
    float *dy, *dxmo, *dyf, *dxmf;
    uint64_t f_t, up_n; /* the MLP's width on this rank (a MoE block's: its shared experts') */
} blk;

/* The layer's output x[l+1] = xm + reduced MLP output (with hidden dropout: xm + dropout(MLP
 * output + fc2's bias), Megatron's bias-dropout-add), and what the recompute policy drops. */
static void finish_layer(const ctx *c, layer_act *a, float *xout, float *mlp, const float *bd)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    uint64_t Tl = t->Tl, T = t->T, h = t->h;
    if (c->e->phase != GS_PHASE_FWD)
        return;
    gs_dropout dd;
    const gs_dropout *drop = gs__train_hidden_drop(c, GS_DROP_MLP_OUT, t->sp, &dd);
    if (drop) { /* the reduced rows are not read again: dropped in place */
        if (bd)
            ops->k.bias_add(c->s, mlp, bd, Tl, h);
        ops->k.dropout(c->s, mlp, Tl, h, drop);
        bd = NULL;
    }
    ops->copy(t->drv, c->s, xout, a->xm, Tl * h * sizeof(float));
    ops->k.add(c->s, xout, mlp, Tl * h);
    const float *routed = gs__train_moe_routed_out(c); /* a MoE block: its routed experts' output */
    if (routed)
        ops->k.add(c->s, xout, routed, Tl * h);
    if (bd) /* fc2's bias, once, on the reduced rows */
        ops->k.bias_add(c->s, xout, bd, Tl, h);
    /* what the forward pass does not keep (the schedule recomputes it) is gone: poison it, so a
     * backward that reads it without the recompute shows up as NaN */
    if (!c->r->has_recompute)
        return;
    if (t->recompute == GS_RECOMPUTE_FULL) {
        /* recompute_every: a block left unchecked keeps everything */
        int64_t local = c->e->layer >= 0 ? c->r->local_of_global[c->e->layer] : -1;
        if (local < 0 || !gs_strategy_checkpoints_layer(&t->s->strategy, (uint64_t)local))
            return;
        float *bufs[] = {a->n1s, a->qkv, a->ao, a->op, a->ar, a->xm, a->n2s, a->gu, a->hh, a->dp, a->mr};
        size_t ns[] = {Tl * h, T * t->nqkv, T * t->a_t * t->hd, T * h, Tl * h, Tl * h, Tl * h, T * 2 * t->f_t,
                       T * t->f_t, T * h, Tl * h};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            gs__train_poison(c, bufs[i], ns[i]);
        gs__train_poison(c, a->rstd1, Tl);
        gs__train_poison(c, a->rstd2, Tl);
        if (t->ln) {
            gs__train_poison(c, a->mean1, Tl);
            gs__train_poison(c, a->mean2, Tl);
        }
        if (t->sp) {
            gs__train_poison(c, a->n1, T * h);
            gs__train_poison(c, a->n2, T * h);
        }
        gs__train_poison(c, a->p, t->attn_saved);
    } else if (t->recompute == GS_RECOMPUTE_SELECTIVE) {
        gs__train_poison(c, a->p, t->attn_saved);
        gs__train_poison(c, a->ao, T * t->a_t * t->hd);
    }
}


/* The attention half's forward: input norm, its gather, QKV (with RoPE), attention, out-projection
 * and its TP reduction. */
static gs_status attn_fwd(const ctx *c, blk *b, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    layer_act *a = b->a;
    uint64_t T = t->T, Tl = t->Tl, h = t->h, hd = t->hd, nq = t->nqkv;
    gs_status rc;
    float *res;
    switch (act) {
    case A_N1_FWD: {
        norm_io n = {b->xin, b->w.g1, b->w.b1, a->n1s, a->mean1, a->rstd1, NULL, NULL, NULL, NULL, Tl};
        gs__train_norm_fwd(t, c->s, &n);
        return GS_OK;
    }
    case A_N1_AG:
        return t->ovl ? gs__train_ring_gather(c, a->n1s, a->n1) : gs__train_tp_gather(c, a->n1s, a->n1);
    case A_QKV_FWD:
        if (c->pl->part) { /* ring exchange: chunk by chunk; RoPE over every row once all are in */
            uint64_t cq;
            const float *in;
            ring_src src = {a->n1s, a->n1, h, 0};
            for (uint64_t j = 0; (rc = gs__train_ring_chunk(c, &src, j, &cq, &in)) == GS_OK && in; j++) {
                gs__train_linear_fwd(c, GS_LIN_QKV, 0, in, b->w.wqkv, a->qkv + cq * Tl * nq, Tl, h, nq);
                if (b->w.bqkv)
                    ops->k.bias_add(c->s, a->qkv + cq * Tl * nq, b->w.bqkv, Tl, nq);
            }
            if (rc != GS_OK || c->pl->part == 1)
                return rc;
        } else {
            gs__train_linear_fwd(c, GS_LIN_QKV, 0, a->n1, b->w.wqkv, a->qkv, T, h, nq);
            if (b->w.bqkv)
                ops->k.bias_add(c->s, a->qkv, b->w.bqkv, T, nq);
        }
        if (t->rope && t->cp <= 1) { /* CP: at the tokens' positions, in the attention */
            ops->k.rope_fwd(c->s, b->q, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
            ops->k.rope_fwd(c->s, b->k, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
        }
        return GS_OK;
    case A_ATTN_FWD:
        if (t->cp > 1)
            return gs__train_cp_attention(c, act, a);
        if (t->flash)
            ops->k.attn_fwd_flash(c->s, b->q, nq, b->k, b->v, nq, a->ao, t->a_t * hd, a->p, t->b, t->seq, t->a_t,
                                t->kv_t, hd, b->adrop);
        else
            ops->k.attn_fwd(c->s, b->q, nq, b->k, b->v, nq, a->ao, t->a_t * hd, a->p, t->b, t->seq, t->a_t, t->kv_t, hd,
                          b->adrop);
        return GS_OK;
    case A_O_FWD:
        if (c->pl->part)
            return gs__train_split_gemm_part(c, GS_LIN_O, a->ao, b->w.wo, a->op, t->a_t * hd);
        gs__train_linear_fwd(c, GS_LIN_O, 0, a->ao, b->w.wo, a->op, T, t->a_t * hd, h);
        return GS_OK;
    case A_O_TP:
        if (c->pl->part)
            return gs__train_split_rs_part(c, a->op, a->ar);
        return gs__train_tp_reduce(c, a->op, a->ar, &res);
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no attention forward action %d", (int)act);
    }
}

/* The MLP half's forward: the residual add and post-attention norm, its gather, the up GEMM, the
 * activation, the down GEMM and its TP reduction, and the layer's output. */
static gs_status mlp_fwd(const ctx *c, blk *b, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    layer_act *a = b->a;
    uint64_t T = t->T, Tl = t->Tl, h = t->h;
    gs_status rc;
    float *res;
    norm_io n2 = {a->xm, b->w.g2, b->w.b2, a->n2s, a->mean2, a->rstd2, NULL, NULL, NULL, NULL, Tl};
    switch (act) {
    case A_N2_FWD:
        if (b->hdrop_out) { /* bias-dropout-add on the reduced rows, which nothing reads again */
            float *o = t->sp ? a->ar : a->op;
            if (b->w.bo)
                ops->k.bias_add(c->s, o, b->w.bo, Tl, h);
            ops->k.dropout(c->s, o, Tl, h, b->hdrop_out);
            ops->copy(t->drv, c->s, a->xm, b->xin, Tl * h * sizeof(float));
            ops->k.add(c->s, a->xm, o, Tl * h);
            gs__train_norm_fwd(t, c->s, &n2);
            return GS_OK;
        }
        ops->copy(t->drv, c->s, a->xm, b->xin, Tl * h * sizeof(float));
        ops->k.add(c->s, a->xm, t->sp ? a->ar : a->op, Tl * h);
        if (b->w.bo) /* o_proj's bias, once, on the reduced rows */
            ops->k.bias_add(c->s, a->xm, b->w.bo, Tl, h);
        gs__train_norm_fwd(t, c->s, &n2);
        return GS_OK;
    case A_N2_AG:
        return t->ovl ? gs__train_ring_gather(c, a->n2s, a->n2) : gs__train_tp_gather(c, a->n2s, a->n2);
    case A_UP_FWD:
        if (c->pl->part) {
            uint64_t cq;
            const float *in;
            ring_src src = {a->n2s, a->n2, h, 0};
            for (uint64_t j = 0; (rc = gs__train_ring_chunk(c, &src, j, &cq, &in)) == GS_OK && in; j++) {
                gs__train_linear_fwd(c, GS_LIN_UP, 0, in, b->w.wgu, a->gu + cq * Tl * b->up_n, Tl, h, b->up_n);
                if (b->w.bu)
                    ops->k.bias_add(c->s, a->gu + cq * Tl * b->up_n, b->w.bu, Tl, b->f_t);
            }
            return rc;
        }
        gs__train_linear_fwd(c, GS_LIN_UP, 0, a->n2, b->w.wgu, a->gu, T, h, b->up_n);
        if (b->w.bu)
            ops->k.bias_add(c->s, a->gu, b->w.bu, T, b->f_t);
        return GS_OK;
    case A_ACT_FWD:
        if (t->gelu)
            ops->k.gelu_fwd(c->s, a->gu, a->hh, T * b->f_t);
        else
            ops->k.swiglu_fwd(c->s, a->gu, a->hh, T, b->f_t);
        return GS_OK;
    case A_DOWN_FWD:
        if (c->pl->part)
            return gs__train_split_gemm_part(c, GS_LIN_DOWN, a->hh, b->w.wd, a->dp, b->f_t);
        gs__train_linear_fwd(c, GS_LIN_DOWN, 0, a->hh, b->w.wd, a->dp, T, b->f_t, h);
        if (t->tp <= 1)
            finish_layer(c, a, b->xout, a->dp, b->w.bd);
        return GS_OK;
    case A_DOWN_TP:
        if (c->pl->part == 1)
            return gs__train_split_rs_part(c, a->dp, a->mr);
        rc = c->pl->part ? gs__train_split_rs_part(c, a->dp, a->mr) : gs__train_tp_reduce(c, a->dp, a->mr, &res);
        if (rc != GS_OK)
            return rc;
        finish_layer(c, a, b->xout, c->pl->part ? a->mr : res, b->w.bd);
        return GS_OK;
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no MLP forward action %d", (int)act);
    }
}

/* The MLP half's backward, from the layer's output gradient to the gradient at the residual
 * after attention (sc->dxm, and dxmd with hidden dropout). */
static gs_status mlp_bwd(const ctx *c, blk *b, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    layer_act *a = b->a;
    scratch *sc = &c->r->sc;
    uint64_t T = t->T, Tl = t->Tl, h = t->h;
    gs_status rc;
    float *res;
    switch (act) {
    case A_DY_AG:
        return t->ovl ? gs__train_ring_gather(c, b->dy, sc->dyf) : gs__train_tp_gather(c, b->dy, sc->dyf);
    case A_DOWN_BWD:
        if (c->pl->part) { /* ring exchange: dgrad chunk by chunk, then wgrad over every row */
            uint64_t cq;
            const float *in;
            ring_src src = {b->dy, b->dyf, h, b->hdrop_mlp != NULL};
            for (uint64_t j = 0; (rc = gs__train_ring_chunk(c, &src, j, &cq, &in)) == GS_OK && in; j++)
                gs__train_linear_bwd(c, GS_LIN_DOWN, 0, a->hh + cq * Tl * b->f_t, b->w.wd, in, sc->dh + cq * Tl * b->f_t,
                                     NULL, Tl, b->f_t, h);
            if (rc == GS_OK && c->pl->part == 2)
                rc = gs__train_linear_bwd(c, GS_LIN_DOWN, 0, a->hh, b->w.wd, b->dyf, NULL, b->g.wd, T, b->f_t, h);
            return rc;
        }
        return gs__train_linear_bwd(c, GS_LIN_DOWN, 0, a->hh, b->w.wd, b->dyf, sc->dh, b->g.wd, T, b->f_t, h);
    case A_ACT_BWD:
        if (t->gelu)
            ops->k.gelu_bwd(c->s, a->gu, sc->dh, sc->dgu, T * b->f_t);
        else
            ops->k.swiglu_bwd(c->s, a->gu, sc->dh, sc->dgu, T, b->f_t);
        return GS_OK;
    case A_N2_REAG: /* bulk overlap: the input the weight gradient needs, beside dgrad */
        return gs__train_tp_gather(c, a->n2s, a->n2);
    case A_UP_BWD:
        if (c->pl->part == 2) /* bulk overlap: wgrad beside the reduce-scatter of dgrad's output */
            return gs__train_linear_bwd(c, GS_LIN_UP, 0, a->n2, b->w.wgu, sc->dgu, NULL, b->g.wgu, T, h, b->up_n);
        if (b->g.bu && (rc = gs__train_cp_bias_grad(c, sc->dgu, b->g.bu, T, b->f_t)) != GS_OK)
            return rc;
        return gs__train_linear_bwd(c, GS_LIN_UP, 0, a->n2, b->w.wgu, sc->dgu, sc->dn2, c->pl->part ? NULL : b->g.wgu,
                                    T, h, b->up_n);
    case A_UP_TP:
        return gs__train_tp_reduce(c, sc->dn2, sc->dn2s, &res);
    case A_N2_BWD: {
        norm_io n = {a->xm, b->w.g2, NULL, NULL, a->mean2, a->rstd2, t->sp ? sc->dn2s : sc->dn2, sc->dxm, b->g.g2,
                     b->g.b2, Tl};
        if ((rc = gs__train_cp_norm_bwd(c, &n)) != GS_OK)
            return rc;
        ops->k.add(c->s, sc->dxm, b->dxout, Tl * h);
        if (b->hdrop_out) {
            ops->copy(t->drv, c->s, sc->dxmd, sc->dxm, Tl * h * sizeof(float));
            ops->k.dropout(c->s, sc->dxmd, Tl, h, b->hdrop_out);
        }
        /* the replicated biases added to this rank's rows: fc2's at x_out, o_proj's at xm (under
         * sequence parallelism partial sums, all-reduced over TP with the norms); under dropout
         * inside it, from the dropped gradients */
        if (b->g.bd && (rc = gs__train_cp_bias_grad(c, b->dy, b->g.bd, Tl, h)) != GS_OK)
            return rc;
        if (b->g.bo)
            return gs__train_cp_bias_grad(c, b->dxmo, b->g.bo, Tl, h);
        return GS_OK;
    }
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no MLP backward action %d", (int)act);
    }
}

/* The attention core's backward on the single rank a CP run of C = opts fp8_cp_ranks ranks must
 * equal (p2p, all_gather; host memory): each CP rank runs the kernel on the sequences' layout with
 * only its query rows' output gradient (exec/train_cp.c, gathered_attention), keeps those rows'
 * dQ and returns every row's dK, dV partial to its owner by a reduce-scatter, which sums them in
 * ascending rank order (driver_host_coll.c). Here the kernel runs once per CP rank with the other
 * rows' output gradient zero (their terms are exact zeros, as the CP rank's), and the partials
 * are summed in that order, each rotated back by RoPE's transpose first as the CP ranks' are: the
 * K, V gradients' last bits, which FP8's E5M2 casts of the QKV gradient turn into code flips, are
 * the CP run's. Under a2a+p2p (opts fp8_cp_a2a A) the p2p
 * level's members sum theirs, each the rows of A adjacent CP ranks (its a2a group's; the heads
 * it splits keep each head's arithmetic). */
static gs_status cp_emulated_attn_bwd(const ctx *c, blk *b)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    layer_act *a = b->a;
    scratch *sc = &c->r->sc;
    uint64_t C = t->o.fp8_cp_ranks, A = t->o.fp8_cp_a2a > 1 ? t->o.fp8_cp_a2a : 1;
    uint64_t T = t->T, nq = t->nqkv, hd = t->hd, ahd = t->a_t * hd, kvw = nq - ahd;
    float *dout = malloc(T * ahd * sizeof *dout), *part = malloc(T * nq * sizeof *part);
    if (!dout || !part) {
        free(dout), free(part);
        return gs_error_set(c->err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (emulated CP attention)",
                            c->r->rank);
    }
    for (uint64_t who = 0; who < C / A; who++) {
        float *dst = who ? part : sc->dqkv;
        for (uint64_t r = 0; r < T; r++) {
            int mine = gs_train_cp_owner(t->seq, C, r % t->seq) / A == who;
            if (mine)
                memcpy(dout + r * ahd, sc->dao + r * ahd, ahd * sizeof *dout);
            else
                memset(dout + r * ahd, 0, ahd * sizeof *dout);
        }
        if (t->flash)
            ops->k.attn_bwd_flash(c->s, b->q, nq, b->k, b->v, nq, a->ao, a->p, dout, ahd, dst, dst + ahd,
                                  dst + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t, t->kv_t, hd, b->adrop);
        else
            ops->k.attn_bwd(c->s, b->q, nq, b->k, b->v, nq, a->p, dout, ahd, dst, dst + ahd,
                            dst + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t, t->kv_t, hd, b->adrop);
        if (t->rope) { /* each partial rotated back before the sum, as the CP ranks do (kernel_bwd) */
            ops->k.rope_bwd(c->s, dst, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
            ops->k.rope_bwd(c->s, dst + ahd, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
        }
        for (uint64_t r = 0; who && r < T; r++) {
            float *row = sc->dqkv + r * nq, *pr = part + r * nq;
            if (gs_train_cp_owner(t->seq, C, r % t->seq) / A == who)
                memcpy(row, pr, ahd * sizeof *row);
            for (uint64_t j = 0; j < kvw; j++)
                row[ahd + j] += pr[ahd + j];
        }
    }
    free(dout);
    free(part);
    return GS_OK;
}

/* The attention half's backward, to the layer's input gradient. */
static gs_status attn_bwd(const ctx *c, blk *b, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    layer_act *a = b->a;
    scratch *sc = &c->r->sc;
    uint64_t T = t->T, Tl = t->Tl, h = t->h, hd = t->hd, nq = t->nqkv, ahd = t->a_t * hd;
    gs_status rc;
    float *res;
    switch (act) {
    case A_DXM_AG:
        return t->ovl ? gs__train_ring_gather(c, b->dxmo, sc->dxmf) : gs__train_tp_gather(c, b->dxmo, sc->dxmf);
    case A_O_BWD:
        if (c->pl->part) {
            uint64_t cq;
            const float *in;
            ring_src src = {b->dxmo, b->dxmf, h, 0};
            for (uint64_t j = 0; (rc = gs__train_ring_chunk(c, &src, j, &cq, &in)) == GS_OK && in; j++)
                gs__train_linear_bwd(c, GS_LIN_O, 0, a->ao + cq * Tl * ahd, b->w.wo, in, sc->dao + cq * Tl * ahd, NULL, Tl,
                                     ahd, h);
            if (rc == GS_OK && c->pl->part == 2)
                rc = gs__train_linear_bwd(c, GS_LIN_O, 0, a->ao, b->w.wo, b->dxmf, NULL, b->g.wo, T, ahd, h);
            return rc;
        }
        return gs__train_linear_bwd(c, GS_LIN_O, 0, a->ao, b->w.wo, b->dxmf, sc->dao, b->g.wo, T, ahd, h);
    case A_ATTN_BWD:
        if (t->cp > 1)
            return gs__train_cp_attention(c, act, a);
        if (t->fp8 && t->o.fp8_cp_ranks > 1) /* refused without FP8 (gs_train_fp8_check) */
            return cp_emulated_attn_bwd(c, b);
        if (t->flash)
            ops->k.attn_bwd_flash(c->s, b->q, nq, b->k, b->v, nq, a->ao, a->p, sc->dao, ahd, sc->dqkv, sc->dqkv + ahd,
                                sc->dqkv + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t, t->kv_t, hd, b->adrop);
        else
            ops->k.attn_bwd(c->s, b->q, nq, b->k, b->v, nq, a->p, sc->dao, ahd, sc->dqkv, sc->dqkv + ahd,
                          sc->dqkv + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t, t->kv_t, hd, b->adrop);
        return GS_OK;
    case A_N1_REAG:
        return gs__train_tp_gather(c, a->n1s, a->n1);
    case A_QKV_BWD:
        if (c->pl->part == 2)
            return gs__train_linear_bwd(c, GS_LIN_QKV, 0, a->n1, b->w.wqkv, sc->dqkv, NULL, b->g.wqkv, T, h, nq);
        if (t->rope && t->cp <= 1 && !(t->fp8 && t->o.fp8_cp_ranks > 1)) { /* CP, its emulation: in the attention */
            ops->k.rope_bwd(c->s, sc->dqkv, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
            ops->k.rope_bwd(c->s, sc->dqkv + ahd, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
        }
        if (b->g.bqkv && (rc = gs__train_cp_bias_grad(c, sc->dqkv, b->g.bqkv, T, nq)) != GS_OK)
            return rc;
        return gs__train_linear_bwd(c, GS_LIN_QKV, 0, a->n1, b->w.wqkv, sc->dqkv, sc->dn1,
                                    c->pl->part ? NULL : b->g.wqkv, T, h, nq);
    case A_QKV_TP:
        return gs__train_tp_reduce(c, sc->dn1, sc->dn1s, &res);
    case A_N1_BWD: {
        norm_io n = {b->xin, b->w.g1, NULL, NULL, a->mean1, a->rstd1, t->sp ? sc->dn1s : sc->dn1, b->dxin, b->g.g1,
                     b->g.b1, Tl};
        if ((rc = gs__train_cp_norm_bwd(c, &n)) != GS_OK)
            return rc;
        ops->k.add(c->s, b->dxin, sc->dxm, Tl * h);
        return GS_OK;
    }
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no attention backward action %d", (int)act);
    }
}

gs_status gs__train_block_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_event *e = c->e;
    int64_t ll = r->local_of_global[e->layer];
    uint64_t mbs = t->mbs, mb = e->mb, hd = t->hd, l = (uint64_t)e->layer;
    blk b;
    b.a = &r->acts[(uint64_t)ll * mbs + mb];
    b.xin = r->x[l * mbs + mb], b.xout = r->x[(l + 1) * mbs + mb];
    b.dxin = r->dx[l * mbs + mb], b.dxout = r->dx[(l + 1) * mbs + mb];
    gs_status rc;
    float *pbase = gs__train_buf(c, c->pl->ptid), *gbase = gs__train_buf(c, c->pl->gtid);
    if ((rc = gs__train_need(c, pbase, "gathered parameters of this layer")) != GS_OK)
        return rc;
    uint64_t off = r->off_of_local[ll];
    b.f_t = t->f_t, b.up_n = t->up_n;
    if (gs__train_moe_layer(t, l)) { /* the MLP half is the shared experts */
        gs__train_moe_block_at(t, pbase + off, &b.w, &b.f_t, &b.up_n);
        if (gbase)
            gs__train_moe_block_at(t, gbase + off, &b.g, &b.f_t, &b.up_n);
    } else {
        gs__train_block_at(t, pbase + off, &b.w);
        if (gbase)
            gs__train_block_at(t, gbase + off, &b.g);
    }
    if (!gbase)
        memset(&b.g, 0, sizeof b.g);
    b.q = b.a->qkv, b.k = b.a->qkv + t->a_t * hd, b.v = b.a->qkv + (t->a_t + t->kv_t) * hd;
    /* dropout: the attention probabilities (this rank's heads), attention's output (before the
     * residual add) and, in the backward, the MLP's output */
    b.adrop = gs__train_drop_at(c, GS_DROP_ATTN, r->tp_pos * t->a_t, &b.ad);
    b.hdrop_out = gs__train_hidden_drop(c, GS_DROP_ATTN_OUT, t->sp, &b.hd_out);
    b.hdrop_mlp = gs__train_hidden_drop(c, GS_DROP_MLP_OUT, t->sp, &b.hd_mlp);
    if (act >= A_N1_FWD && act <= A_O_TP)
        return attn_fwd(c, &b, act);
    if (act >= A_N2_FWD && act <= A_DOWN_TP)
        return mlp_fwd(c, &b, act);
    /* backward */
    if ((rc = gs__train_need(c, gbase, "gradient buffer of this layer")) != GS_OK)
        return rc;
    scratch *sc = &r->sc;
    b.dy = b.hdrop_mlp ? sc->dyd : b.dxout, b.dxmo = b.hdrop_out ? sc->dxmd : sc->dxm;
    b.dyf = t->sp ? sc->dyf : b.dy;
    b.dxmf = t->sp ? sc->dxmf : b.dxmo;
    if (b.hdrop_mlp && act == (t->sp ? A_DY_AG : A_DOWN_BWD)) { /* the layer's first backward event */
        t->ops->copy(t->drv, c->s, sc->dyd, b.dxout, t->Tl * t->h * sizeof(float));
        t->ops->k.dropout(c->s, sc->dyd, t->Tl, t->h, b.hdrop_mlp);
    }
    if (act >= A_DY_AG && act <= A_N2_BWD)
        return mlp_bwd(c, &b, act);
    return attn_bwd(c, &b, act);
}
