/* Schedule builder, selective recompute: the ops one checkpointed block runs again before its
 * backward, module by module, as Megatron-Core's --recompute-modules applies them
 * (megatron/core/transformer/transformer_config.py, recompute_modules; transformer_layer.py,
 * multi_latent_attention.py and moe/moe_layer.py wrap each module in tensor_parallel.checkpoint
 * or CheckpointWithoutOutput):
 *
 *   layernorm       the attention norm and the pre-MLP norm (their outputs discarded);
 *   mlp             a dense block's MLP: up with sequence parallelism's gather, the activation,
 *                   down with its reduce-scatter (the checkpointed module runs its collectives
 *                   again);
 *   moe             a MoE block's whole MLP half: router, permutation, dispatch, the experts with
 *                   their expert-TP exchanges, combine, unpermutation and the shared experts;
 *   moe_act         the experts' activation (when moe is not set);
 *   shared_experts  the shared experts' MLP with its TP collectives (when moe is not set);
 *   mla_up_proj     latent attention's q_b and kv_b and the rotary passes;
 *   core_attn       the attention core, with context parallelism's exchanges.
 *
 * They are emitted in the order the backward reaches them (the MLP half's modules, then the
 * attention half's), as one pass before the block's backward; the ledger counts what each
 * drops (engine/ledger_act.c).
 *
 * recompute op, torchtitan's per-op policy (a SwiGLU block without dropout): the checkpoint
 * replays the block's forward, re-running every op whose output the policy does not save: the
 * attention norm, sequence parallelism's gather of its output, wk (the second matmul: the QKV
 * GEMM's K columns, with the rotary passes), wo (the fourth; its reduce-scatter saved), the MLP
 * norm and its gather, w3 (the sixth: the up half of gate+up) and SiLU x up. wq, wv, w1, w2 and
 * the attention are saved.
 *
 * Ownership: nothing is allocated; the pass borrows the builder context. */
#include "engine/build_ops.h"
#include "engine/ledger.h"

uint32_t gs__recompute_modules_of_block(const gs_bctx *x, uint32_t modules, int32_t layer)
{
    if (modules == GS_RECOMPUTE_OP_MODULES) /* per-op: every block */
        return modules;
    int moe = gs__moe_block(x, layer);
    uint32_t has = GS_RC_CORE_ATTN | GS_RC_LAYERNORM;
    if (x->s->model.mla.kv_lora_rank)
        has |= GS_RC_MLA_UP_PROJ;
    if (!moe)
        has |= GS_RC_MLP;
    else
        has |= GS_RC_MOE | GS_RC_MOE_ACT | (x->s->model.moe.shared_experts ? GS_RC_SHARED_EXPERTS : 0u);
    uint32_t m = modules & has;
    if (m & GS_RC_MOE) /* the whole MLP half holds its activation and shared experts */
        m &= ~(uint32_t)(GS_RC_MOE_ACT | GS_RC_SHARED_EXPERTS);
    return m;
}

gs_status gs__recompute_op(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    if ((rc = gs__op_elementwise(p, GS_ROLE_ATTN_NORM, GS_OP_NORM, hsp, sh->norm_bytes)) ||
        (sh->sp && (rc = gs__op_tp_coll(p, GS_ROLE_TP_ATTN_IN, GS_COLL_ALLGATHER, sh))) ||
        (rc = gs__op_gemm(p, GS_ROLE_QKV, GS_OP_QKV, sh, &(gemm_shape){sh->T, sh->kv_t * sh->hd, sh->h, 0})) ||
        (rc = gs__op_gemm(p, GS_ROLE_OPROJ, GS_OP_OPROJ, sh, &(gemm_shape){sh->T, sh->h, sh->a_t * sh->hd, 0})) ||
        (rc = gs__op_elementwise(p, GS_ROLE_MLP_NORM, GS_OP_NORM, hsp, sh->norm_bytes)) ||
        (sh->sp && (rc = gs__op_tp_coll(p, GS_ROLE_TP_MLP_IN, GS_COLL_ALLGATHER, sh))) ||
        (rc = gs__op_gemm(p, GS_ROLE_MLP_UP, GS_OP_MLP_UP, sh, &(gemm_shape){sh->T, sh->f_t, sh->h, 0})))
        return rc;
    return gs__op_elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * sh->f_t, sh->act_bytes);
}

gs_status gs__recompute_modules(pass *p, const shapes *sh, uint32_t modules)
{
    gs_status rc = GS_OK;
    uint32_t m = gs__recompute_modules_of_block(p->x, modules, p->layer);
    uint64_t hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    if ((m & GS_RC_LAYERNORM) && (rc = gs__op_elementwise(p, GS_ROLE_MLP_NORM, GS_OP_NORM, hsp, sh->norm_bytes)))
        return rc;
    if ((m & GS_RC_MLP) && (rc = gs__op_dense_mlp_forward(p, sh)))
        return rc;
    if ((m & GS_RC_MOE) && (rc = gs__moe_mlp_forward(p, sh)))
        return rc;
    if ((m & GS_RC_SHARED_EXPERTS) && (rc = gs__moe_shared_recompute(p, sh)))
        return rc;
    if ((m & GS_RC_MOE_ACT) && (rc = gs__moe_act_recompute(p, sh)))
        return rc;
    if ((m & GS_RC_LAYERNORM) && (rc = gs__op_elementwise(p, GS_ROLE_ATTN_NORM, GS_OP_NORM, hsp, sh->norm_bytes)))
        return rc;
    if ((m & GS_RC_MLA_UP_PROJ) && (rc = gs__mla_up_recompute(p, sh)))
        return rc;
    if (m & GS_RC_CORE_ATTN)
        rc = gs__op_attention(p, sh);
    return rc;
}
