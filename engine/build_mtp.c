/* Schedule builder, the multi-token prediction modules' ops (model.mtp_layers) in the last stage's
 * head pass, as Megatron-Core's MultiTokenPredictionLayer runs them
 * (megatron/core/transformer/multi_token_prediction.py). Per module, forward, after the main
 * loss:
 *
 *   embedding   the tokens k ahead looked up in the stage's copy of the word embedding (vocab-
 *               parallel: its partial rows reduced over TP, reduce-scattered under sequence
 *               parallelism), T h e bytes written;
 *   norms       enorm over that embedding and hnorm over the previous hidden state;
 *   eh_proj     their concatenation [T, 2h] through a column-parallel linear 2h -> h / tp (the
 *               sequence-parallel input all-gathered first: 2 T h e bytes), its output gathered
 *               over TP along the hidden dimension (gather_from_tensor_model_parallel_region)
 *               and split back to the sequence-parallel shard (no exchange);
 *   head        the final norm, the shared output head and its cross-entropy, as the main head
 *               (gs__op_head).
 *
 * The module's transformer block is one more block of the stage (gs_mesh.mtp_layers: the layer
 * loop builds it with the others, before the head pass); the work and the rank are the same, only
 * the order inside the micro-batch differs. Backward runs the mirror images: the head's, the
 * sequence-parallel split's all-gather, eh_proj's data and weight gradients with its input
 * gradient reduce-scattered (all-reduced without sequence parallelism), the norms, and the
 * embedding's gradient (the reduction's mirror: an all-gather under sequence parallelism). */
#include <stdint.h>

#include "engine/build_ops.h"

/* A TP collective of `bytes` total (all-reduce: the buffer; all-gather, reduce-scatter: tp times
 * the padded shard of it); nothing without TP. */
static gs_status tp(pass *p, gs_coll_op op, uint64_t bytes)
{
    uint64_t t = p->x->tp;
    if (t <= 1)
        return GS_OK;
    return gs__op_coll(p, GS_ROLE_TP_MTP, op, GS_GROUP_TP, t, op == GS_COLL_ALLREDUCE ? bytes : t * ceil_div(bytes, t));
}

gs_status gs__mtp_head_forward(pass *p, const shapes *sh)
{
    uint64_t X = sh->T * sh->h * sh->e, hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    gemm_shape proj = {sh->T, sh->h / p->x->tp, 2 * sh->h, 0};
    gs_status rc = GS_OK;
    for (uint64_t k = 0; k < p->x->s->model.mtp_layers && rc == GS_OK; k++) {
        if ((rc = gs__op_compute(p, GS_ROLE_MTP_EMBED, GS_OP_EMBED, 0.0, X)) ||
            (rc = tp(p, sh->sp ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLREDUCE, X)) ||
            (rc = gs__op_elementwise(p, GS_ROLE_MTP_NORM, GS_OP_NORM, 2 * hsp, sh->norm_bytes)) ||
            (sh->sp && (rc = tp(p, GS_COLL_ALLGATHER, 2 * X))) ||
            (rc = gs__op_gemm(p, GS_ROLE_MTP_PROJ, GS_OP_OPROJ, sh, &proj)) || (rc = tp(p, GS_COLL_ALLGATHER, X)))
            break;
        rc = gs__op_head(p, sh);
    }
    return rc;
}

gs_status gs__mtp_head_backward(pass *p, const shapes *sh)
{
    uint64_t X = sh->T * sh->h * sh->e, hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    gemm_shape proj = {sh->T, sh->h / p->x->tp, 2 * sh->h, 0};
    gs_status rc = GS_OK;
    for (uint64_t k = 0; k < p->x->s->model.mtp_layers && rc == GS_OK; k++) {
        if ((rc = gs__op_head(p, sh)) || (sh->sp && (rc = tp(p, GS_COLL_ALLGATHER, X))) ||
            (rc = gs__op_gemm(p, GS_ROLE_MTP_PROJ, GS_OP_OPROJ, sh, &proj)) ||
            (rc = tp(p, sh->sp ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLREDUCE, 2 * X)) ||
            (rc = gs__op_elementwise(p, GS_ROLE_MTP_NORM, GS_OP_NORM, 2 * hsp, sh->norm_bytes)) ||
            (sh->sp && (rc = tp(p, GS_COLL_ALLGATHER, X))))
            break;
        rc = gs__op_compute(p, GS_ROLE_MTP_EMBED, GS_OP_EMBED, 0.0, 2 * X);
    }
    return rc;
}
