/* Schedule builder, a mixture-of-experts block's MLP half, as Megatron-Core's MoELayer runs it with
 * the all-to-all token dispatcher (megatron/core/transformer/moe/moe_layer.py, router.py,
 * token_dispatcher.py MoEAlltoAllTokenDispatcher, experts.py GroupedMLP / TEGroupedMLP) and expert
 * tensor parallelism etp (gs_mesh.etp: tp, or a divisor of it):
 *
 *   router      the gate GEMM [T_l, h] x [h, E] on the rank's sequence-parallel tokens (T_l =
 *               T / tp; MoE with TP needs sequence parallelism), then softmax and top-k over the
 *               E logits (fp32: 8 B per logit read and written);
 *   permute     the T_l k routed copies of the tokens sorted by expert (read and written, 2e B per
 *               element);
 *   dispatch    all-to-all over the EP group (ep > 1): this rank's T_l k token rows out, the rows
 *               routed to its experts / ep experts in (below tp, an EP group spans TP ranks, each
 *               sending its own sequence-parallel tokens);
 *   ETP gather  etp > 1: the received rows all-gathered over the ETP group ("AllGather in ETP
 *               group": the TP group when etp = tp), so each ETP rank runs its 1 / etp slice of
 *               every local expert on all of them;
 *   experts     grouped GEMMs, one call of experts / ep GEMMs: up (h -> 2 f_e / etp with SwiGLU),
 *               the activation, down (f_e / etp -> h), each expert's m its share of the rows;
 *   ETP scatter the partial outputs reduce-scattered over the ETP group;
 *   combine     all-to-all back over EP; unpermute (the top-k outputs weighted and summed);
 *   shared      the shared experts (model.moe.shared_experts), a dense MLP of width
 *               shared_experts x expert_ffn beside the routed ones, with the dense MLP's
 *               sequence-parallel gather and reduce-scatter (roles mlp_up/act/down, tp_mlp_*).
 * With strategy.moe_dispatcher allgather (MoEAllGatherTokenDispatcher) the dispatch is instead an
 * all-gather over the ETP x EP group (n = etp x ep ranks) of every rank's T_l token rows with
 * their routing map (1 B) and probabilities (fp32) over the E experts; each rank selects the rows
 * of its experts (the same gathered rows as above), and the combine reduce-scatters the n T_l
 * unpermuted rows back over the group; no separate ETP exchange. Backward: the combine's
 * all-gather, the dispatch's reduce-scatter of the rows' and probabilities' gradients.
 * With strategy.moe_dispatcher flex (MoEFlexTokenDispatcher, DeepEP backend) the permute
 * before the dispatch is fused into DeepEP's dispatch kernel, which sends each token once to each
 * rank holding one of its experts and once over RDMA to each such remote node (engine/
 * moe_route.h: the event's bytes are those distinct rows, its net_share the node-level part);
 * after it the received rows are permuted by local expert (fused permute: read the rank's rows,
 * write each routed copy), and before the combine unpermuted (the copies weighted and summed into
 * the rank's rows); the combine kernel sums a token's ranks on its way back. Under expert TP the
 * exchange spans the ETP x EP group (tp_ep): every ETP rank of an expert receives its tokens,
 * runs its f_e / etp slice on them, and the combine sums the partial outputs, so no ETP gather
 * or reduce-scatter runs.
 * The backward runs the same ops in reverse order: the all-to-alls move the gradients, the ETP
 * gather and scatter swap, the GEMMs do data and weight gradients (twice the forward FLOPs).
 *
 * Load: balanced routing gives each EP rank T_l k rows (ep ranks send it T_l k / ep each). Real
 * routers are not balanced; model.moe.routing_skew says how much more the busiest EP rank gets
 * (1 + skew times the mean), capped at capacity_factor when tokens are dropped. Every rank's
 * events carry the busiest rank's rows (gs_moe_rank_rows): the combine's all-to-all waits for the
 * slowest rank, so the step runs at its pace (Megatron-Core's own timers show the same wait).
 * FLOPs here therefore exceed the model's 6N count by the skew; MFU keeps the model's count. */
#include <stdint.h>

#include "engine/build_ops.h"

/* A MoE MLP's sizes on this rank for one micro-batch. */
typedef struct moe_shapes {
    uint64_t tl;     /* the rank's tokens (sequence-parallel slice under tp) */
    uint64_t E;      /* routed experts */
    uint64_t local;  /* experts on this EP rank: E / ep */
    uint64_t rows;   /* token rows the busiest EP rank's experts take before the TP gather */
    uint64_t gathered; /* rows each ETP rank's expert slices run: rows x etp */
    uint64_t ef_t;   /* an expert's intermediate size on this ETP rank */
    uint64_t fs_t;   /* the shared experts' intermediate size on this TP rank (0: none) */
    uint64_t ep, tp, etp;
    gs_group_kind etp_group; /* GS_GROUP_TP when etp = tp, else GS_GROUP_ETP */
    int allgather;           /* strategy.moe_dispatcher allgather */
    uint64_t n;              /* allgather: the ETP x EP group's ranks */
    int flex;                /* strategy.moe_dispatcher flex (DeepEP) */
    gs_moe_flex fx;          /* flex: the distinct rows a dispatch sends, their share off the node */
} moe_shapes;

static void moe_shapes_init(const pass *p, const shapes *sh, moe_shapes *ms)
{
    const gs_bctx *x = p->x;
    const gs_moe *moe = &x->s->model.moe;
    uint64_t ef = moe->expert_ffn ? moe->expert_ffn : x->s->model.ffn;
    ms->tp = x->tp;
    ms->etp = gs_mesh_etp(x->mesh);
    ms->etp_group = ms->etp == ms->tp ? GS_GROUP_TP : GS_GROUP_ETP;
    ms->ep = x->mesh->ep ? x->mesh->ep : 1;
    ms->allgather = x->s->strategy.moe_dispatcher == GS_MOE_ALLGATHER;
    ms->n = gs_mesh_tpep_size(x->mesh);
    ms->tl = sh->sp ? ceil_div(sh->T, x->tp) : sh->T;
    ms->E = moe->experts;
    ms->local = moe->experts / ms->ep;
    ms->rows = gs_moe_rank_rows(moe, ms->tl);
    ms->gathered = ms->rows * ms->etp;
    ms->ef_t = ef / ms->etp;
    ms->fs_t = moe->shared_experts * ef / x->tp;
    ms->flex = x->s->strategy.moe_dispatcher == GS_MOE_FLEX;
    ms->fx = ms->flex ? gs_moe_flex_rows(moe, &x->moe_route, ms->rows) : (gs_moe_flex){ms->rows, 0.0};
}

/* The token rows' bytes a rank moves in one all-to-all, or shards in one ETP collective. */
static uint64_t rows_bytes(const shapes *sh, const moe_shapes *ms)
{
    return ms->rows * sh->h * sh->e;
}

/* The allgather dispatcher's per-rank share of an exchange: the T_l token rows (h x e B each),
 * with, for the dispatch, the routing map (1 B) and fp32 probabilities per expert forward, the
 * probabilities' gradients backward. */
static uint64_t ag_share(const shapes *sh, const moe_shapes *ms, gs_role role, int bwd)
{
    uint64_t per = sh->h * sh->e;
    if (role == GS_ROLE_EP_DISPATCH)
        per += (bwd ? 4 : 5) * ms->E;
    return ms->tl * per;
}

static gs_status ep_a2a(pass *p, const shapes *sh, const moe_shapes *ms, gs_role role)
{
    if (ms->allgather) {
        if (ms->n <= 1)
            return GS_OK;
        int bwd = p->phase == GS_PHASE_BWD;
        /* dispatch: gather forward, reduce-scatter backward; combine the other way round */
        gs_coll_op op = (role == GS_ROLE_EP_DISPATCH) != bwd ? GS_COLL_ALLGATHER : GS_COLL_REDUCE_SCATTER;
        return gs__op_coll(p, role, op, GS_GROUP_TPEP, ms->n, ms->n * ag_share(sh, ms, role, bwd));
    }
    if (ms->flex) { /* over the ETP x EP group (tp_ep) when expert TP splits the experts */
        gs_group_kind g = ms->etp > 1 ? GS_GROUP_TPEP : GS_GROUP_EP;
        uint64_t n = ms->etp > 1 ? ms->n : ms->ep;
        if (n <= 1)
            return GS_OK;
        gs_status rc = gs__op_coll(p, role, GS_COLL_ALLTOALL, g, n, ms->fx.rank_rows * sh->h * sh->e);
        if (rc == GS_OK)
            p->pending.e.net_share = (float)ms->fx.net_share;
        return rc;
    }
    if (ms->ep <= 1)
        return GS_OK;
    return gs__op_coll(p, role, GS_COLL_ALLTOALL, GS_GROUP_EP, ms->ep, rows_bytes(sh, ms));
}

/* The expert-TP collective at the experts' input (in 1) or output (in 0): forward gather at the
 * input, reduce-scatter at the output; backward the other way round. */
static gs_status etp_coll(pass *p, const shapes *sh, const moe_shapes *ms, int in)
{
    if (ms->etp <= 1 || ms->allgather || ms->flex) /* their exchanges span ETP already */
        return GS_OK;
    int bwd = p->phase == GS_PHASE_BWD;
    gs_coll_op op = (in != bwd) ? GS_COLL_ALLGATHER : GS_COLL_REDUCE_SCATTER;
    return gs__op_coll(p, in ? GS_ROLE_ETP_IN : GS_ROLE_ETP_OUT, op, ms->etp_group, ms->etp,
                       ms->etp * rows_bytes(sh, ms));
}

/* The grouped expert GEMMs and activation (forward order; backward reversed), m = each local
 * expert's share of the gathered rows. */
static gs_status experts(pass *p, const shapes *sh, const moe_shapes *ms)
{
    uint64_t m = ceil_div(ms->gathered, ms->local), up_n = sh->swiglu ? 2 * ms->ef_t : ms->ef_t;
    gemm_shape up = {m, up_n, sh->h, ms->local}, down = {m, sh->h, ms->ef_t, ms->local};
    gs_status rc;
    if (p->phase == GS_PHASE_BWD)
        return (rc = gs__op_gemm(p, GS_ROLE_EXPERT_DOWN, GS_OP_MLP_DOWN, sh, &down)) ||
                       (rc = gs__op_elementwise(p, GS_ROLE_EXPERT_ACT, GS_OP_ACT, m * ms->local * ms->ef_t,
                                                sh->act_bytes))
                   ? rc
                   : gs__op_gemm(p, GS_ROLE_EXPERT_UP, GS_OP_MLP_UP, sh, &up);
    return (rc = gs__op_gemm(p, GS_ROLE_EXPERT_UP, GS_OP_MLP_UP, sh, &up)) ||
                   (rc = gs__op_elementwise(p, GS_ROLE_EXPERT_ACT, GS_OP_ACT, m * ms->local * ms->ef_t, sh->act_bytes))
               ? rc
               : gs__op_gemm(p, GS_ROLE_EXPERT_DOWN, GS_OP_MLP_DOWN, sh, &down);
}

/* The gate GEMM and the softmax / top-k over its fp32 logits. */
static gs_status router(pass *p, const shapes *sh, const moe_shapes *ms)
{
    gs_status rc;
    gemm_shape g = {ms->tl, ms->E, sh->h, 0};
    if (p->phase == GS_PHASE_BWD)
        return (rc = gs__op_elementwise(p, GS_ROLE_MOE_ROUTER, GS_OP_ACT, ms->tl * ms->E, 8))
                   ? rc
                   : gs__op_gemm(p, GS_ROLE_MOE_ROUTER, GS_OP_MLP_UP, sh, &g);
    return (rc = gs__op_gemm(p, GS_ROLE_MOE_ROUTER, GS_OP_MLP_UP, sh, &g))
               ? rc
               : gs__op_elementwise(p, GS_ROLE_MOE_ROUTER, GS_OP_ACT, ms->tl * ms->E, 8);
}

/* Permute (part 1) or unpermute (part 2), as Megatron-Core's unfused torch ops move them
 * (megatron/core/transformer/moe/moe_utils.py permute / unpermute, token_dispatcher.py), per
 * element e bytes of this rank's T_l k routed rows:
 *   permute    index_select: each routed row read and written (2e);
 *   unpermute  rows times their routing weights (read, write: 2e), a zeroed output of T_l rows
 *              (e / k per routed element), scatter_add back (read the row, read and write the
 *              output: 3e): 5e + e / k;
 * and with more than one local expert under EP, sort_chunks_by_idxs regroups the rows by expert
 * after the dispatch and back before the combine (read, write: 2e per row, with each part), on
 * the rows the ETP gather assembled (token_dispatcher.py sorts after
 * gather_from_sequence_parallel_region and unsorts before the reduce-scatter: rows x etp). Under the allgather dispatcher the same ops run on the rank's gathered local rows, the
 * unpermute's zeroed output holding all n T_l gathered tokens. Backward twice the forward's
 * bytes (the elementwise convention). */
static gs_status permute(pass *p, const shapes *sh, const moe_shapes *ms, uint16_t part)
{
    const gs_moe *moe = &p->x->s->model.moe;
    uint64_t elems = ms->tl * moe->top_k * sh->h;
    uint64_t bytes = part == 1 ? 2 * sh->e * elems : 5 * sh->e * elems + sh->e * ms->tl * sh->h;
    if (ms->flex && (ms->ep > 1 || ms->etp > 1)) {
        /* after the dispatch (part 1): the received rank rows read, each routed copy written;
         * before the combine (part 2): the copies read and weighted, the rank rows written (the
         * copies of every ETP rank of the group under expert TP: the gathered rows) */
        elems = ms->gathered * sh->h;
        bytes = sh->e * (elems + ms->fx.rank_rows * sh->h) + (part == 2 ? sh->e * elems : 0);
    } else if (ms->allgather) {
        /* the local rows selected from the n T_l gathered tokens, and scattered back into a
         * zeroed buffer of all of them */
        elems = ms->gathered * sh->h;
        bytes = part == 1 ? 2 * sh->e * elems : 5 * sh->e * elems + sh->e * ms->n * ms->tl * sh->h;
    } else if (ms->ep > 1 && ms->local > 1) {
        bytes += 2 * sh->e * ms->gathered * sh->h; /* after the ETP gather: every ETP rank's rows */
    }
    double mul = p->phase == GS_PHASE_BWD ? 2.0 : 1.0;
    gs_status rc = gs__op_compute(p, GS_ROLE_MOE_PERMUTE, GS_OP_ACT, 5.0 * (double)elems * mul,
                                  (uint64_t)((double)bytes * mul));
    if (rc == GS_OK)
        p->pending.e.part = part;
    return rc;
}

static const linear_roles lr_shared_up = {GS_ROLE_MLP_UP, GS_ROLE_TP_MLP_IN, GS_ROLE_TP_MLP_REGATHER};
static const linear_roles lr_shared_down = {GS_ROLE_MLP_DOWN, GS_ROLE_TP_MLP_OUT, GS_ROLE_NONE};

/* The shared experts: the dense MLP's ops at width shared_experts x expert_ffn. */
static gs_status shared_mlp(pass *p, const shapes *sh, const moe_shapes *ms)
{
    if (!ms->fs_t)
        return GS_OK;
    uint64_t up_n = sh->swiglu ? 2 * ms->fs_t : ms->fs_t;
    gs_status rc;
    int bwd = p->phase == GS_PHASE_BWD;
    if (!sh->sp) { /* tp = 1 (MoE with TP needs sequence parallelism) */
        gemm_shape up = {sh->T, up_n, sh->h, 0}, down = {sh->T, sh->h, ms->fs_t, 0};
        if (bwd)
            return (rc = gs__op_gemm(p, GS_ROLE_MLP_DOWN, GS_OP_MLP_DOWN, sh, &down)) ||
                           (rc = gs__op_elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * ms->fs_t, sh->act_bytes))
                       ? rc
                       : gs__op_gemm(p, GS_ROLE_MLP_UP, GS_OP_MLP_UP, sh, &up);
        return (rc = gs__op_gemm(p, GS_ROLE_MLP_UP, GS_OP_MLP_UP, sh, &up)) ||
                       (rc = gs__op_elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * ms->fs_t, sh->act_bytes))
                   ? rc
                   : gs__op_gemm(p, GS_ROLE_MLP_DOWN, GS_OP_MLP_DOWN, sh, &down);
    }
    if (bwd)
        return (rc = gs__op_ag_gemm(p, sh, GS_OP_MLP_DOWN, &lr_shared_down, sh->h, ms->fs_t)) ||
                       (rc = gs__op_elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * ms->fs_t, sh->act_bytes))
                   ? rc
                   : gs__op_gemm_rs(p, sh, GS_OP_MLP_UP, &lr_shared_up, up_n, sh->h);
    return (rc = gs__op_ag_gemm(p, sh, GS_OP_MLP_UP, &lr_shared_up, up_n, sh->h)) ||
                   (rc = gs__op_elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * ms->fs_t, sh->act_bytes))
               ? rc
               : gs__op_gemm_rs(p, sh, GS_OP_MLP_DOWN, &lr_shared_down, sh->h, ms->fs_t);
}

gs_status gs__moe_mlp_forward(pass *p, const shapes *sh)
{
    moe_shapes ms;
    moe_shapes_init(p, sh, &ms);
    gs_status rc;
    if (ms.flex) /* DeepEP: the permutes beside the experts, the exchanges outside them */
        return (rc = router(p, sh, &ms)) || (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH)) ||
                       (rc = permute(p, sh, &ms, 1)) || (rc = experts(p, sh, &ms)) || (rc = permute(p, sh, &ms, 2)) ||
                       (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE))
                   ? rc
                   : shared_mlp(p, sh, &ms);
    if ((rc = router(p, sh, &ms)) || (rc = permute(p, sh, &ms, 1)) || (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH)) ||
        (rc = etp_coll(p, sh, &ms, 1)) || (rc = experts(p, sh, &ms)) || (rc = etp_coll(p, sh, &ms, 0)) ||
        (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE)) || (rc = permute(p, sh, &ms, 2)))
        return rc;
    return shared_mlp(p, sh, &ms);
}

gs_status gs__moe_act_recompute(pass *p, const shapes *sh)
{
    moe_shapes ms;
    moe_shapes_init(p, sh, &ms);
    uint64_t m = ceil_div(ms.gathered, ms.local);
    return gs__op_elementwise(p, GS_ROLE_EXPERT_ACT, GS_OP_ACT, m * ms.local * ms.ef_t, sh->act_bytes);
}

gs_status gs__moe_shared_recompute(pass *p, const shapes *sh)
{
    moe_shapes ms;
    moe_shapes_init(p, sh, &ms);
    return shared_mlp(p, sh, &ms);
}

gs_status gs__moe_mlp_backward(pass *p, const shapes *sh)
{
    moe_shapes ms;
    moe_shapes_init(p, sh, &ms);
    gs_status rc;
    if (ms.flex)
        return (rc = shared_mlp(p, sh, &ms)) || (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE)) ||
                       (rc = permute(p, sh, &ms, 2)) || (rc = experts(p, sh, &ms)) || (rc = permute(p, sh, &ms, 1)) ||
                       (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH))
                   ? rc
                   : router(p, sh, &ms);
    if ((rc = shared_mlp(p, sh, &ms)) || (rc = permute(p, sh, &ms, 2)) ||
        (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE)) || (rc = etp_coll(p, sh, &ms, 0)) ||
        (rc = experts(p, sh, &ms)) || (rc = etp_coll(p, sh, &ms, 1)) ||
        (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH)) || (rc = permute(p, sh, &ms, 1)))
        return rc;
    return router(p, sh, &ms);
}

gs_status gs__moe_piece(pass *p, const shapes *sh, gs_block_seg seg)
{
    moe_shapes ms;
    moe_shapes_init(p, sh, &ms);
    gs_status rc = GS_OK;
    int bwd = p->phase == GS_PHASE_BWD, flex = ms.flex;
    switch (seg) {
    case GS_SEG_PRE: /* Megatron computes the shared experts before the router */
        if (bwd)
            return (!flex && (rc = permute(p, sh, &ms, 1))) || (rc = router(p, sh, &ms)) ? rc
                                                                                        : shared_mlp(p, sh, &ms);
        return (rc = shared_mlp(p, sh, &ms)) || (rc = router(p, sh, &ms)) ? rc : flex ? GS_OK : permute(p, sh, &ms, 1);
    case GS_SEG_DISPATCH:
        if (bwd)
            return (rc = etp_coll(p, sh, &ms, 1)) ? rc : ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH);
        return (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_DISPATCH)) ? rc : etp_coll(p, sh, &ms, 1);
    case GS_SEG_MLP:
        if (!flex)
            return experts(p, sh, &ms);
        return (rc = permute(p, sh, &ms, bwd ? 2 : 1)) || (rc = experts(p, sh, &ms)) ? rc
                                                                                  : permute(p, sh, &ms, bwd ? 1 : 2);
    case GS_SEG_COMBINE:
        if (bwd)
            return (!flex && (rc = permute(p, sh, &ms, 2))) || (rc = ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE))
                       ? rc
                       : etp_coll(p, sh, &ms, 0);
        return (rc = etp_coll(p, sh, &ms, 0)) ? rc : ep_a2a(p, sh, &ms, GS_ROLE_EP_COMBINE);
    case GS_SEG_POST:
        return bwd || flex ? GS_OK : permute(p, sh, &ms, 2);
    default:
        return GS_OK;
    }
}

int gs__moe_has_post(const gs_bctx *x)
{
    return x->s->strategy.moe_dispatcher != GS_MOE_FLEX;
}
