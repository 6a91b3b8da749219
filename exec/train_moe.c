/* Mixture-of-experts blocks on the exec side, as Megatron-Core's MoELayer runs them with the
 * all-to-all token dispatcher (engine/build_moe.c says which event does what): the router, the
 * token permutation, the EP dispatch and combine, the expert-TP gather and reduce-scatter, the
 * local experts' grouped MLPs, the weighted unpermute, and their backward; the parameters' layout
 * (router, shared and routed experts) and each rank's routing state.
 *
 * Router (megatron/core/transformer/moe/router.py TopKRouter.routing and moe_utils.py
 * topk_routing_with_score_function, NVIDIA/Megatron-LM d98e8a6, defaults: score function softmax,
 * moe_router_pre_softmax off, no scaling factor, no aux loss): logits = x Wr^T, the top_k
 * largest logits of each token, and their weights the softmax over those k logits (the softmax
 * top-k probabilities renormalized to sum to 1); the gradient reaches the chosen logits through
 * that softmax. Dropping (moe_utils.py apply_router_token_dropping, drop policy "probs"): with
 * capacity_factor > 0 each expert keeps at most ceil(tokens x top_k / experts x factor) of the
 * tokens routed to it, those of the highest weight (ties: the lower token), where tokens are the
 * router's input: this rank's tokens of one micro-batch (its sequence-parallel slice under TP);
 * a capacity above the token count drops nothing. A dropped token's slot keeps its weight out of
 * the output (weights are not renormalized after dropping) and gets no gradient.
 *
 * The routing decisions and the token exchanges: exec/train_moe_xchg.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_moe_internal.h"

void gs__train_moe_dims(const gs_train *t, const rank_st *r, moe_dims *d)
{
    const gs_moe *m = &t->s->model.moe;
    uint64_t ef = m->expert_ffn ? m->expert_ffn : t->s->model.ffn;
    d->E = m->experts;
    d->k = m->top_k;
    d->ep = r->groups[GS_GROUP_EP].size ? r->groups[GS_GROUP_EP].size : 1;
    d->ep_pos = r->groups[GS_GROUP_EP].pos;
    d->L = d->E / d->ep;
    d->tp = t->tp;
    d->ef_t = ef / t->tp;
    d->up_ne = t->gelu ? d->ef_t : 2 * d->ef_t;
    d->fs_t = m->shared_experts * ef / t->tp;
    d->up_ns = t->gelu ? d->fs_t : 2 * d->fs_t;
    d->Tl = t->Tl;
    d->h = t->h;
    d->cf = m->capacity_factor;
}

int gs__train_moe_layer(const gs_train *t, uint64_t l)
{
    return gs_model_moe_block(&t->s->model, l);
}

/* ---- layout ---- */

/* The normal streams of a MoE block's tensors (apart from the dense blocks' 16 + 8 l ..) */
static uint64_t moe_init_id(uint64_t l, uint64_t which)
{
    return (1ull << 40) + (l << 20) + which;
}

enum { ID_ROUTER = 0, ID_SHARED = 1, ID_EXPERT = 16 }; /* + 0 gate, 1 up, 2 down; experts: 16 + 4 e */

/* An MLP's linears (gate and up, or fc1; down) named prefix.*, f wide in full, this rank's f_t
 * rows / columns from tp_pos x f_t. */
static int mlp_segs(const gs_train *t, const rank_st *r, unit_info *ui, uint64_t *flat, const char *prefix,
                    uint64_t f, uint64_t f_t, uint64_t id)
{
    char nm[112];
    uint64_t h = t->h, lo = r->tp_pos * f_t;
    int ok = 1;
#define SEG(suffix, ...) (snprintf(nm, sizeof nm, "%s.%s.weight", prefix, suffix), \
                          ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){nm, __VA_ARGS__}))
    if (!t->gelu)
        SEG("gate_proj", 2, f, h, id + 0, 0, lo, f_t, 0);
    SEG("up_proj", 2, f, h, id + 1, 0, lo, f_t, 0);
    SEG("down_proj", 2, h, f, id + 2, 1, lo, f_t, 0);
#undef SEG
    return ok;
}

int gs__train_moe_block_segs(const gs_train *t, rank_st *r, unit_info *ui, size_t unit, uint64_t *flat, int64_t ll,
                             uint64_t l, int with_experts)
{
    moe_dims d;
    gs__train_moe_dims(t, r, &d);
    char nm[112];
    int ok = 1;
    snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".mlp.gate.weight", l);
    ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){nm, 2, d.E, d.h, moe_init_id(l, ID_ROUTER), 0, 0, d.E, 1});
    if (d.fs_t) {
        snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".mlp.shared_experts", l);
        ok = ok && mlp_segs(t, r, ui, flat, nm, d.fs_t * d.tp, d.fs_t, moe_init_id(l, ID_SHARED));
    }
    return ok && (!with_experts || gs__train_moe_expert_segs(t, r, ui, unit, flat, ll, l));
}

int gs__train_moe_expert_segs(const gs_train *t, rank_st *r, unit_info *ui, size_t unit, uint64_t *flat, int64_t ll,
                              uint64_t l)
{
    moe_dims d;
    gs__train_moe_dims(t, r, &d);
    r->moe->unit_of_local[ll] = (int64_t)unit;
    r->moe->off_of_local[ll] = *flat;
    char nm[112];
    int ok = 1;
    for (uint64_t j = 0; j < d.L && ok; j++) {
        uint64_t e = d.ep_pos * d.L + j;
        snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".mlp.experts.%" PRIu64, l, e);
        ok = mlp_segs(t, r, ui, flat, nm, d.ef_t * d.tp, d.ef_t, moe_init_id(l, ID_EXPERT + 4 * e));
    }
    return ok;
}

void gs__train_moe_block_at(const gs_train *t, float *base, blockp *b, uint64_t *f_t, uint64_t *up_n)
{
    gs__train_block_at(t, base, b); /* the attention half's fields; wgu then points past them */
    moe_dims d;
    d.E = t->s->model.moe.experts;
    uint64_t ef = t->s->model.moe.expert_ffn ? t->s->model.moe.expert_ffn : t->s->model.ffn;
    *f_t = t->s->model.moe.shared_experts * ef / t->tp;
    *up_n = t->gelu ? *f_t : 2 * *f_t;
    float *router = b->wgu;
    b->wgu = router + d.E * t->h;
    b->wd = b->wgu + *up_n * t->h;
    b->bu = b->bd = NULL;
}

int64_t gs__train_moe_event_unit(const rank_st *r, const gs_event *e, int64_t ll, int64_t u)
{
    int expert = e->role == GS_ROLE_EXPERT_UP || e->role == GS_ROLE_EXPERT_ACT || e->role == GS_ROLE_EXPERT_DOWN;
    if (!expert || !r->moe || ll < 0 || r->moe->unit_of_local[ll] < 0)
        return u;
    return r->moe->unit_of_local[ll];
}

/* ---- per-rank state ---- */

gs_status gs__train_moe_rank_init(gs_train *t, rank_st *r, gs_error *err)
{
    if (!t->s->model.moe.experts)
        return GS_OK;
    struct moe_rank *m = calloc(1, sizeof *m);
    uint64_t nl = r->part.layers ? r->part.layers : 1;
    if (!m)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    r->moe = m;
    m->nl = r->part.layers;
    m->unit_of_local = malloc(nl * sizeof *m->unit_of_local);
    m->off_of_local = calloc(nl, sizeof *m->off_of_local);
    m->mb = calloc(nl * t->mbs, sizeof *m->mb);
    if (!m->unit_of_local || !m->off_of_local || !m->mb)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (uint64_t i = 0; i < nl; i++)
        m->unit_of_local[i] = -1;
    return GS_OK;
}

void gs__train_moe_rank_fini(gs_train *t, rank_st *r)
{
    struct moe_rank *m = r->moe;
    if (!m)
        return;
    for (uint64_t i = 0; m->mb && i < m->nl * t->mbs; i++) {
        moe_mb *q = &m->mb[i];
        dbuf *b = &q->logits;
        for (size_t j = 0; j < MOE_DBUFS; j++)
            if (b[j].p)
                t->ops->free(t->drv, r->rank, b[j].p);
        void *host[] = {q->idx_h, q->tok_h, q->slot_h, q->probs_h, q->w_h, q->dprobs_h, q->cnt, q->gcnt, q->ecnt,
                        q->eidx_h};
        for (size_t j = 0; j < sizeof host / sizeof host[0]; j++)
            free(host[j]);
    }
    free(m->mb);
    free(m->unit_of_local);
    free(m->off_of_local);
    free(m);
    r->moe = NULL;
}

/* ---- the actions ---- */

/* What a MoE action works on: the layer's routing state, its saved activations, the router and
 * the local experts' weights (and gradients), the layer's output and its gradient. */
typedef struct moe_at {
    moe_mb *m;
    moe_dims d;
    layer_act *a;
    float *router, *grouter, *experts, *gexperts;
    float *xout, *dxout;
} moe_at;

static gs_status moe_at_init(const ctx *c, moe_at *x)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    int64_t ll = r->local_of_global[c->e->layer];
    uint64_t l = (uint64_t)c->e->layer, mb = c->e->mb;
    gs__train_moe_dims(t, r, &x->d);
    x->m = &r->moe->mb[(uint64_t)ll * t->mbs + mb];
    x->a = &r->acts[(uint64_t)ll * t->mbs + mb];
    x->xout = r->x[(l + 1) * t->mbs + mb];
    x->dxout = r->dx[(l + 1) * t->mbs + mb];
    float *p = gs__train_buf(c, c->pl->ptid), *g = gs__train_buf(c, c->pl->gtid);
    gs_status rc = gs__train_need(c, p, "parameters of this MoE block");
    if (rc != GS_OK)
        return rc;
    int expert = c->e->role == GS_ROLE_EXPERT_UP || c->e->role == GS_ROLE_EXPERT_ACT ||
                 c->e->role == GS_ROLE_EXPERT_DOWN;
    x->router = x->grouter = x->experts = x->gexperts = NULL;
    if (expert) {
        x->experts = p + r->moe->off_of_local[ll];
        x->gexperts = g ? g + r->moe->off_of_local[ll] : NULL;
    } else {
        blockp b;
        uint64_t f, u;
        gs__train_moe_block_at(t, p + r->off_of_local[ll], &b, &f, &u);
        x->router = b.wgu - x->d.E * x->d.h;
        if (g) {
            gs__train_moe_block_at(t, g + r->off_of_local[ll], &b, &f, &u);
            x->grouter = b.wgu - x->d.E * x->d.h;
        }
    }
    if (c->e->phase == GS_PHASE_BWD && !(expert ? x->gexperts : x->grouter) &&
        (expert || (c->e->role == GS_ROLE_MOE_ROUTER && c->e->op == GS_OP_MLP_UP)))
        return gs__train_need(c, NULL, "gradient buffer of this MoE block");
    return GS_OK;
}

/* Floats from one local expert's weights (gate+up or fc1, then down) to the next's. */
static size_t expert_stride(const moe_dims *d)
{
    return d->up_ne * d->h + d->h * d->ef_t;
}

/* 1 when the local experts' GEMMs go to the driver as one grouped call (FP8 casts each
 * expert's inputs at their own scales, as Transformer Engine's grouped linear does: per expert). */
static int grouped(const ctx *c)
{
    const gs_driver_kernels *k = &c->t->ops->k;
    return !c->t->fp8 && k->linear_fwd_grouped && k->linear_bwd_grouped;
}

static gs_status router_fwd(const ctx *c, moe_at *x)
{
    const gs_driver_ops *ops = c->t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    if (c->e->op == GS_OP_MLP_UP) { /* the gate GEMM */
        float *lg = GROWF(c, &m->logits, d->Tl * d->E);
        if (!lg)
            return GS_ERR_NOMEM;
        ops->k.linear_fwd(c->s, x->a->n2s, x->router, lg, d->Tl, d->h, d->E);
        return GS_OK;
    }
    if (!gs__train_moe_grow(c, &m->idx, d->Tl * d->k, sizeof(int32_t)) || !GROWF(c, &m->probs, d->Tl * d->k))
        return GS_ERR_NOMEM;
    ops->k.moe_topk_fwd(c->s, m->logits.p, d->Tl, d->E, d->k, m->idx.p, m->probs.p);
    return gs__train_moe_route(c, m, d);
}

static gs_status router_bwd(const ctx *c, moe_at *x)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    uint64_t n = d->Tl * d->k;
    if (c->e->op != GS_OP_MLP_UP) { /* the softmax / top-k: each kept slot's weight gradient */
        float *drow = malloc((m->nsend ? m->nsend : 1) * sizeof *drow);
        if (!drow || !gs__train_moe_host_grow((void **)&m->dprobs_h, n * 4) || !GROWF(c, &m->dprobs, n) ||
            !GROWF(c, &m->dlogits, d->Tl * d->E)) {
            free(drow);
            return drow ? GS_ERR_NOMEM : gs__train_moe_nomem(c);
        }
        ops->download(t->drv, c->s, drow, m->drow.p, m->nsend * sizeof(float));
        memset(m->dprobs_h, 0, n * sizeof(float));
        for (uint64_t i = 0; i < m->nsend; i++)
            m->dprobs_h[m->slot_h[i]] = drow[i];
        free(drow);
        ops->upload(t->drv, c->s, m->dprobs.p, m->dprobs_h, n * sizeof(float));
        ops->k.moe_topk_bwd(c->s, m->probs.p, m->dprobs.p, m->idx.p, d->Tl, d->E, d->k, m->dlogits.p);
        return GS_OK;
    }
    /* the gate GEMM, then the block's input gradient: the router's, the routed experts' and the
     * shared experts' (their backward ran first and wrote it) */
    float *dxrt = GROWF(c, &m->dxrt, d->Tl * d->h), *dx = m->dx.p;
    if (!dxrt)
        return GS_ERR_NOMEM;
    ops->k.linear_bwd(c->s, x->a->n2s, x->router, m->dlogits.p, dxrt, x->grouter, d->Tl, d->h, d->E);
    ops->k.add(c->s, dx, dxrt, d->Tl * d->h);
    float *dn2 = t->sp ? c->r->sc.dn2s : c->r->sc.dn2;
    if (d->fs_t)
        ops->k.add(c->s, dn2, dx, d->Tl * d->h);
    else
        ops->copy(t->drv, c->s, dn2, dx, d->Tl * d->h * sizeof(float));
    return GS_OK;
}

static gs_status permute_fwd(const ctx *c, moe_at *x)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    gs_status rc;
    if (c->e->part != 2) { /* the routed rows sorted by expert (no EP: already at their experts) */
        float *xs = GROWF(c, &m->xs, m->nsend * d->h);
        if (!xs)
            return GS_ERR_NOMEM;
        ops->k.rows_gather(c->s, x->a->n2s, m->tok.p, NULL, m->nsend, d->h, xs);
        if (d->ep > 1)
            return GS_OK;
        if ((rc = gs__train_moe_counts(c, m, d)) != GS_OK || !GROWF(c, &m->xr, m->nrecv * d->h))
            return rc ? rc : GS_ERR_NOMEM;
        return gs__train_moe_a2a_out(c, m, d, m->xs.p, m->xr.p);
    }
    /* unpermute: the rows back with their weights (no EP: the experts' rows are here) */
    if (d->ep <= 1) {
        if (!GROWF(c, &m->ys, m->nsend * d->h))
            return GS_ERR_NOMEM;
        if ((rc = gs__train_moe_a2a_back(c, m, d, m->yr.p, m->ys.p)) != GS_OK)
            return rc;
    }
    float *out = GROWF(c, &m->out, d->Tl * d->h);
    if (!out)
        return GS_ERR_NOMEM;
    ops->fill(t->drv, c->s, out, 0.0f, d->Tl * d->h);
    ops->k.rows_scatter_add(c->s, m->ys.p, m->tok.p, m->w.p, m->nsend, d->h, out);
    if (c->e->phase == GS_PHASE_FWD && !d->fs_t) { /* the layer's output (with shared experts: at their end) */
        ops->copy(t->drv, c->s, x->xout, x->a->xm, d->Tl * d->h * sizeof(float));
        ops->k.add(c->s, x->xout, out, d->Tl * d->h);
    }
    return GS_OK;
}

static gs_status permute_bwd(const ctx *c, moe_at *x)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    gs_status rc;
    if (c->e->part == 2) { /* unpermute's backward: each row's gradient and its weight's */
        float *dys = GROWF(c, &m->dys, m->nsend * d->h), *drow = GROWF(c, &m->drow, m->nsend);
        if (!dys || !drow)
            return GS_ERR_NOMEM;
        ops->k.rows_gather(c->s, x->dxout, m->tok.p, m->w.p, m->nsend, d->h, dys);
        ops->k.rows_dot(c->s, x->dxout, m->tok.p, m->ys.p, m->nsend, d->h, drow);
        if (d->ep > 1)
            return GS_OK;
        if (!GROWF(c, &m->dyr, m->nrecv * d->h))
            return GS_ERR_NOMEM;
        return gs__train_moe_a2a_out(c, m, d, dys, m->dyr.p);
    }
    if (d->ep <= 1) {
        if (!GROWF(c, &m->dxs, m->nsend * d->h))
            return GS_ERR_NOMEM;
        if ((rc = gs__train_moe_a2a_back(c, m, d, m->dxr.p, m->dxs.p)) != GS_OK)
            return rc;
    }
    float *dx = GROWF(c, &m->dx, d->Tl * d->h);
    if (!dx)
        return GS_ERR_NOMEM;
    ops->fill(t->drv, c->s, dx, 0.0f, d->Tl * d->h);
    ops->k.rows_scatter_add(c->s, m->dxs.p, m->tok.p, NULL, m->nsend, d->h, dx);
    return GS_OK;
}

/* The grouped GEMMs: expert j's rows [o, o + ecnt[j]) of the expert order. */
/* The local experts' up (down 0) or down (down 1) GEMMs, forward: one grouped call, or one
 * call per expert. */
static void experts_gemm_fwd(const ctx *c, moe_at *x, int down)
{
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    const float *in = down ? m->he.p : m->xe.p;
    float *out = down ? m->ye.p : m->ue.p;
    size_t k = down ? d->ef_t : d->h, n = down ? d->h : d->up_ne, w0 = down ? d->up_ne * d->h : 0;
    if (grouped(c)) {
        c->t->ops->k.linear_fwd_grouped(c->s, in, x->experts + w0, expert_stride(d), out, m->ecnt, d->L, k, n);
        return;
    }
    for (uint64_t j = 0, o = 0; j < d->L; o += m->ecnt[j++])
        gs__train_linear_fwd(c, down ? GS_LIN_EXPERT_DOWN : GS_LIN_EXPERT_UP, j, in + o * k,
                             x->experts + j * expert_stride(d) + w0, out + o * n, m->ecnt[j], k, n);
}

/* The same GEMMs' backward: the input gradients (dx) and the weight gradients. */
static void experts_gemm_bwd(const ctx *c, moe_at *x, int down)
{
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    const float *in = down ? m->he.p : m->xe.p, *dy = down ? m->dye.p : m->due.p;
    float *dx = down ? m->dhe.p : m->dxe.p;
    size_t k = down ? d->ef_t : d->h, n = down ? d->h : d->up_ne, w0 = down ? d->up_ne * d->h : 0;
    if (grouped(c)) {
        c->t->ops->k.linear_bwd_grouped(c->s, in, x->experts + w0, expert_stride(d), dy, dx, x->gexperts + w0,
                                        m->ecnt, d->L, k, n);
        return;
    }
    /* (void): experts keep no CP blocks apart (fp8_cp_shards runs dense models), so it cannot fail */
    for (uint64_t j = 0, o = 0; j < d->L; o += m->ecnt[j++]) {
        size_t wo = j * expert_stride(d) + w0;
        (void)gs__train_linear_bwd(c, down ? GS_LIN_EXPERT_DOWN : GS_LIN_EXPERT_UP, j, in + o * k, x->experts + wo,
                                   dy + o * n, dx + o * k, x->gexperts + wo, m->ecnt[j], k, n);
    }
}

static gs_status experts_fwd(const ctx *c, moe_at *x, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    gs_status rc;
    switch (act) {
    case A_EXPERT_UP:
        if (d->tp <= 1) { /* no expert TP: the received rows are the gathered ones */
            if ((rc = gs__train_moe_etp_counts(c, m, d)) != GS_OK || !GROWF(c, &m->xg, m->M * d->h))
                return rc ? rc : GS_ERR_NOMEM;
            if ((rc = gs__train_moe_etp_gather(c, m, d, m->xr.p, m->xg.p)) != GS_OK)
                return rc;
        }
        if (!GROWF(c, &m->xe, m->ne * d->h) || !GROWF(c, &m->ue, m->ne * d->up_ne))
            return GS_ERR_NOMEM;
        ops->k.rows_gather(c->s, m->xg.p, m->eidx.p, NULL, m->ne, d->h, m->xe.p);
        experts_gemm_fwd(c, x, 0);
        return GS_OK;
    case A_EXPERT_ACT:
        if (!GROWF(c, &m->he, m->ne * d->ef_t))
            return GS_ERR_NOMEM;
        if (t->gelu)
            ops->k.gelu_fwd(c->s, m->ue.p, m->he.p, m->ne * d->ef_t);
        else
            ops->k.swiglu_fwd(c->s, m->ue.p, m->he.p, m->ne, d->ef_t);
        return GS_OK;
    default: /* A_EXPERT_DOWN */
        if (!GROWF(c, &m->ye, m->ne * d->h) || !GROWF(c, &m->yg, d->tp * m->M * d->h))
            return GS_ERR_NOMEM;
        experts_gemm_fwd(c, x, 1);
        ops->fill(t->drv, c->s, m->yg.p, 0.0f, d->tp * m->M * d->h);
        ops->k.rows_scatter_add(c->s, m->ye.p, m->eidx.p, NULL, m->ne, d->h, m->yg.p);
        if (d->tp > 1)
            return GS_OK;
        if (!GROWF(c, &m->yr, m->nrecv * d->h))
            return GS_ERR_NOMEM;
        return gs__train_moe_etp_scatter(c, m, d, m->yg.p, m->yr.p);
    }
}

static gs_status experts_bwd(const ctx *c, moe_at *x, action act)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    gs_status rc;
    switch (act) {
    case A_EXPERT_DOWN:
        if (d->tp <= 1) {
            if (!GROWF(c, &m->dyg, m->M * d->h))
                return GS_ERR_NOMEM;
            if ((rc = gs__train_moe_etp_gather(c, m, d, m->dyr.p, m->dyg.p)) != GS_OK)
                return rc;
        }
        if (!GROWF(c, &m->dye, m->ne * d->h) || !GROWF(c, &m->dhe, m->ne * d->ef_t))
            return GS_ERR_NOMEM;
        ops->k.rows_gather(c->s, m->dyg.p, m->eidx.p, NULL, m->ne, d->h, m->dye.p);
        experts_gemm_bwd(c, x, 1);
        return GS_OK;
    case A_EXPERT_ACT:
        if (!GROWF(c, &m->due, m->ne * d->up_ne))
            return GS_ERR_NOMEM;
        if (t->gelu)
            ops->k.gelu_bwd(c->s, m->ue.p, m->dhe.p, m->due.p, m->ne * d->ef_t);
        else
            ops->k.swiglu_bwd(c->s, m->ue.p, m->dhe.p, m->due.p, m->ne, d->ef_t);
        return GS_OK;
    default: /* A_EXPERT_UP */
        if (!GROWF(c, &m->dxe, m->ne * d->h) || !GROWF(c, &m->dxg, d->tp * m->M * d->h))
            return GS_ERR_NOMEM;
        experts_gemm_bwd(c, x, 0);
        ops->fill(t->drv, c->s, m->dxg.p, 0.0f, d->tp * m->M * d->h);
        ops->k.rows_scatter_add(c->s, m->dxe.p, m->eidx.p, NULL, m->ne, d->h, m->dxg.p);
        if (d->tp > 1)
            return GS_OK;
        if (!GROWF(c, &m->dxr, m->nrecv * d->h))
            return GS_ERR_NOMEM;
        return gs__train_moe_etp_scatter(c, m, d, m->dxg.p, m->dxr.p);
    }
}

/* The EP and expert-TP collectives, forward and backward. */
static gs_status exchange(const ctx *c, moe_at *x, action act)
{
    moe_mb *m = x->m;
    const moe_dims *d = &x->d;
    int bwd = c->e->phase == GS_PHASE_BWD;
    uint64_t h = d->h;
    gs_status rc;
    switch (act) {
    case A_EP_DISPATCH:
        if (bwd)
            return GROWF(c, &m->dxs, m->nsend * h) ? gs__train_moe_a2a_back(c, m, d, m->dxr.p, m->dxs.p) : GS_ERR_NOMEM;
        if ((rc = gs__train_moe_counts(c, m, d)) != GS_OK || !GROWF(c, &m->xr, m->nrecv * h))
            return rc ? rc : GS_ERR_NOMEM;
        return gs__train_moe_a2a_out(c, m, d, m->xs.p, m->xr.p);
    case A_ETP_IN:
        if (bwd)
            return GROWF(c, &m->dxr, m->nrecv * h) ? gs__train_moe_etp_scatter(c, m, d, m->dxg.p, m->dxr.p) : GS_ERR_NOMEM;
        if ((rc = gs__train_moe_etp_counts(c, m, d)) != GS_OK || !GROWF(c, &m->xg, d->tp * m->M * h))
            return rc ? rc : GS_ERR_NOMEM;
        return gs__train_moe_etp_gather(c, m, d, m->xr.p, m->xg.p);
    case A_ETP_OUT:
        if (bwd)
            return GROWF(c, &m->dyg, d->tp * m->M * h) ? gs__train_moe_etp_gather(c, m, d, m->dyr.p, m->dyg.p) : GS_ERR_NOMEM;
        return GROWF(c, &m->yr, m->nrecv * h) ? gs__train_moe_etp_scatter(c, m, d, m->yg.p, m->yr.p) : GS_ERR_NOMEM;
    default: /* A_EP_COMBINE */
        if (bwd)
            return GROWF(c, &m->dyr, m->nrecv * h) ? gs__train_moe_a2a_out(c, m, d, m->dys.p, m->dyr.p) : GS_ERR_NOMEM;
        return GROWF(c, &m->ys, m->nsend * h) ? gs__train_moe_a2a_back(c, m, d, m->yr.p, m->ys.p) : GS_ERR_NOMEM;
    }
}

const float *gs__train_moe_routed_out(const ctx *c)
{
    rank_st *r = c->r;
    if (!r->moe || c->e->layer < 0 || !gs__train_moe_layer(c->t, (uint64_t)c->e->layer))
        return NULL;
    int64_t ll = r->local_of_global[c->e->layer];
    return r->moe->mb[(uint64_t)ll * c->t->mbs + c->e->mb].out.p;
}

gs_status gs__train_moe_action(const ctx *c, action act)
{
    if (!c->r->moe || c->e->layer < 0 || !gs__train_moe_layer(c->t, (uint64_t)c->e->layer) ||
        c->r->local_of_global[c->e->layer] < 0)
        return gs_error_set(c->err, GS_ERR_RUNTIME, "a MoE event on a layer without a MoE block");
    moe_at x;
    gs_status rc = moe_at_init(c, &x);
    if (rc != GS_OK)
        return rc;
    int bwd = c->e->phase == GS_PHASE_BWD;
    switch (act) {
    case A_MOE_ROUTER:
        return bwd ? router_bwd(c, &x) : router_fwd(c, &x);
    case A_MOE_PERMUTE:
        return bwd ? permute_bwd(c, &x) : permute_fwd(c, &x);
    case A_EXPERT_UP:
    case A_EXPERT_ACT:
    case A_EXPERT_DOWN:
        return bwd ? experts_bwd(c, &x, act) : experts_fwd(c, &x, act);
    default:
        return exchange(c, &x, act);
    }
}
