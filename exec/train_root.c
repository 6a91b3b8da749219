/* The root's actions on the exec side: the token (and position) embedding with its TP reduction
 * and gradient, the final norm, the LM head and the vocab-parallel cross-entropy. */
#include "exec/train_internal.h"

static gs_status embed_action(const ctx *c, action act, float *pbase, float *gbase)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    uint64_t mb = c->e->mb, T = t->T, h = t->h;
    scratch *sc = &r->sc;
    int32_t *tok = r->tokens ? r->tokens + mb * T : NULL;
    uint64_t vlo = r->tp_pos * t->v_t;
    float *res;
    gs_status rc;
    gs_dropout ed;
    const gs_dropout *edrop = gs__train_hidden_drop(c, GS_DROP_EMBED, t->sp, &ed);
    switch (act) {
    case A_EMB_FWD:
        ops->k.embed_fwd(c->s, tok, T, pbase + r->emb_off, vlo, t->v_t, h, t->sp ? sc->embp : r->x[mb]);
        /* learned positions: added once, by TP rank 0, to the partial sums the TP reduction adds */
        if (r->posb) {
            ops->k.embed_fwd(c->s, r->positions, T, pbase + r->pos_off, 0, t->seq, h, r->posb);
            ops->k.add(c->s, t->sp ? sc->embp : r->x[mb], r->posb, T * h);
        }
        if (t->tp <= 1 && edrop) /* embedding dropout, on the whole sums (TP: after the reduction) */
            ops->k.dropout(c->s, r->x[mb], T, h, edrop);
        return GS_OK;
    case A_EMB_TP:
        rc = t->sp ? gs__train_tp_reduce(c, sc->embp, r->x[mb], &res) : gs__train_tp_reduce(c, r->x[mb], NULL, &res);
        if (rc == GS_OK && edrop)
            ops->k.dropout(c->s, r->x[mb], t->Tl, h, edrop);
        return rc;
    case A_EMB_AG:
        if (edrop) /* the embedding dropout's backward on this rank's rows, before they are gathered */
            ops->k.dropout(c->s, r->dx[mb], t->Tl, h, edrop);
        return gs__train_tp_gather(c, r->dx[mb], sc->demb);
    case A_EMB_BWD:
        if ((rc = gs__train_need(c, gbase, "root gradient")) != GS_OK)
            return rc;
        if (edrop && !t->sp)
            ops->k.dropout(c->s, r->dx[mb], T, h, edrop);
        rc = gs__train_cp_embed_bwd(c, tok, T, t->sp ? sc->demb : r->dx[mb], vlo, t->v_t, gbase + r->emb_off);
        /* the positions' gradient from the whole rows: every TP rank has it; under sequence
         * parallelism rank 0 alone adds it, the TP all-reduce of replicated gradients follows */
        if (rc == GS_OK && !t->rope && (!t->sp || r->tp_pos == 0))
            rc = gs__train_cp_embed_bwd(c, r->positions, T, t->sp ? sc->demb : r->dx[mb], 0, t->seq,
                                        gbase + r->pos_off);
        return rc;
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no embedding action %d", (int)act);
    }
}

/* The head's forward: final norm, its gather, the LM head, the loss (with the statistics'
 * gather under TP). */
static gs_status head_fwd(const ctx *c, action act, float *pbase)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    uint64_t mbs = t->mbs, mb = c->e->mb, T = t->T, h = t->h;
    head_act *ha = &r->heads[mb];
    int32_t *tgt = r->targets ? r->targets + mb * T : NULL;
    float *wn = pbase + r->hn_off, *wh = pbase + r->head_off;
    gs_status rc;
    double l = 0;
    switch (act) {
    case A_HN_FWD: {
        norm_io n = {r->x[t->layers * mbs + mb], wn, t->norm_bias ? wn + h : NULL, ha->hns, ha->mean, ha->rstd,
                     NULL, NULL, NULL, NULL, t->Tl};
        gs__train_norm_fwd(t, c->s, &n);
        return GS_OK;
    }
    case A_HN_AG:
        return gs__train_tp_gather(c, ha->hns, ha->hn);
    case A_HEAD_FWD:
        if (t->tp <= 1 && t->vparts > 1) { /* the TP ranks' logits, slice after slice [S][T][V / S] */
            uint64_t vs = t->v_t / t->vparts;
            for (uint64_t p = 0; p < t->vparts; p++)
                ops->k.linear_fwd(c->s, ha->hn, wh + p * vs * h, ha->logits + p * T * vs, T, h, vs);
            return GS_OK;
        }
        ops->k.linear_fwd(c->s, ha->hn, wh, ha->logits, T, h, t->v_t);
        return GS_OK;
    case A_LOSS_FWD:
        if (t->tp <= 1 && t->vparts > 1) { /* each slice's statistics, combined as the TP ranks' */
            uint64_t vs = t->v_t / t->vparts;
            for (uint64_t p = 0; p < t->vparts; p++)
                ops->k.xent_stats(c->s, ha->logits + p * T * vs, tgt, T, p * vs, vs,
                                  ha->allstats + p * T * GS_K_XENT_STATS);
            ops->k.xent_combine(c->s, ha->allstats, t->vparts, T, ha->lse, &l);
            r->loss_sum += l;
            return GS_OK;
        }
        ops->k.xent_stats(c->s, ha->logits, tgt, T, r->tp_pos * t->v_t, t->v_t, ha->stats);
        if (t->tp <= 1) {
            ops->k.xent_combine(c->s, ha->stats, 1, T, ha->lse, &l);
            r->loss_sum += l;
        }
        return GS_OK;
    case A_LOSS_AG:
        if ((rc = t->ops->all_gather(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], ha->stats, ha->allstats,
                                     T * GS_K_XENT_STATS, c->err)) != GS_OK)
            return rc;
        ops->k.xent_combine(c->s, ha->allstats, t->tp, T, ha->lse, &l);
        r->loss_sum += l;
        return GS_OK;
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no head action %d", (int)act);
    }
}

/* The head's backward: the loss's gradient (the mean over the global batch's tokens), the LM
 * head's, its TP reduction, the final norm's. */
static gs_status head_bwd(const ctx *c, action act, float *pbase, float *gbase)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    uint64_t mbs = t->mbs, mb = c->e->mb, T = t->T, h = t->h;
    scratch *sc = &r->sc;
    head_act *ha = &r->heads[mb];
    int32_t *tgt = r->targets ? r->targets + mb * T : NULL;
    float *wn = pbase + r->hn_off, *wh = pbase + r->head_off, *res;
    gs_status rc;
    if ((rc = gs__train_need(c, gbase, "root gradient")) != GS_OK)
        return rc;
    float scale = (float)(1.0 / ((double)t->s->batch.global_seqs * (double)t->seq));
    switch (act) {
    case A_LOSS_BWD:
        if (t->tp <= 1 && t->vparts > 1) {
            uint64_t vs = t->v_t / t->vparts;
            for (uint64_t p = 0; p < t->vparts; p++)
                ops->k.xent_bwd(c->s, ha->logits + p * T * vs, tgt, ha->lse, T, p * vs, vs, scale,
                                sc->dlogits + p * T * vs);
            return GS_OK;
        }
        ops->k.xent_bwd(c->s, ha->logits, tgt, ha->lse, T, r->tp_pos * t->v_t, t->v_t, scale, sc->dlogits);
        return GS_OK;
    case A_HEAD_BWD:
        if (t->tp <= 1 && t->vparts > 1) { /* each slice's input gradient (into dhns, free on tp 1),
                                               summed in slice order as the TP reduction sums */
            uint64_t vs = t->v_t / t->vparts;
            for (uint64_t p = 0; rc == GS_OK && p < t->vparts; p++) {
                ops->k.linear_bwd(c->s, NULL, wh + p * vs * h, sc->dlogits + p * T * vs, p ? sc->dhns : sc->dhn, NULL,
                                  T, h, vs);
                if (p)
                    ops->k.add(c->s, sc->dhn, sc->dhns, T * h);
                rc = gs__train_cp_linear_dw(c, ha->hn, sc->dlogits + p * T * vs, gbase + r->head_off + p * vs * h, T,
                                            h, vs);
            }
            return rc;
        }
        ops->k.linear_bwd(c->s, NULL, wh, sc->dlogits, sc->dhn, NULL, T, h, t->v_t);
        return gs__train_cp_linear_dw(c, ha->hn, sc->dlogits, gbase + r->head_off, T, h, t->v_t);
    case A_HEAD_TP:
        return gs__train_tp_reduce(c, sc->dhn, sc->dhns, &res);
    case A_HN_BWD: {
        norm_io n = {r->x[t->layers * mbs + mb], wn, NULL, NULL, ha->mean, ha->rstd, t->sp ? sc->dhns : sc->dhn,
                     r->dx[t->layers * mbs + mb], gbase + r->hn_off, t->norm_bias ? gbase + r->hn_off + h : NULL,
                     t->Tl};
        return gs__train_cp_norm_bwd(c, &n);
    }
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no head action %d", (int)act);
    }
}

gs_status gs__train_root_action(const ctx *c, action act)
{
    float *pbase = gs__train_buf(c, c->pl->rptid), *gbase = gs__train_buf(c, c->pl->rgtid);
    gs_status rc;
    if ((rc = gs__train_need(c, pbase, "gathered root unit (embedding / head)")) != GS_OK)
        return rc;
    if (act >= A_EMB_FWD && act <= A_EMB_BWD)
        return embed_action(c, act, pbase, gbase);
    if (act >= A_HN_FWD && act <= A_LOSS_AG)
        return head_fwd(c, act, pbase);
    return head_bwd(c, act, pbase, gbase);
}
