/* Schedule builder, multi-head latent attention's projections (DeepSeek-V2/V3), as Megatron-Core's
 * MLASelfAttention runs them (megatron/core/transformer/multi_latent_attention.py,
 * get_query_key_value_tensors), from the attention norm's output x to Q, K and V:
 *
 *   q_a   (q_lora_rank > 0) x [T, h] -> [T, q_lora_rank], a "duplicated" linear: every TP rank
 *         computes it whole on the gathered tokens; then the q latent norm;
 *   q_b   [T, q_lora_rank or h] -> [T, heads/tp x (d + r)], column-parallel;
 *   kv_a  x -> [T, kv_lora_rank + r], duplicated; the kv latent norm over kv_lora_rank, and the
 *         rotary embedding of the r decoupled dimensions of q and k;
 *   kv_b  [T, kv_lora_rank] -> [T, heads/tp x 2d] (each head's key part and value), column-parallel.
 *
 * Under sequence parallelism x is all-gathered first (role tp_attn_in), as before the QKV GEMM.
 * The backward runs them in reverse; each GEMM's data gradient flows into x, whose gradient is
 * then reduce-scattered (all-reduced without SP) over TP, as the QKV GEMM's. A forward GEMM is
 * 2 m n k FLOPs, its backward twice that. Events carry op qkv (the projections' kernel family:
 * FP8 GEMMs where the recipe runs them so), roles mla_down (q_a part 1, kv_a part 2), mla_up
 * (q_b part 1, kv_b part 2) and mla_norm (the q latent norm part 1; the kv latent norm with the
 * rotary passes part 2; the rotary passes alone part 3, which selective recompute's mla_up_proj
 * runs again with q_b and kv_b: MLASelfAttention's qkv_up_checkpoint). Transformer Engine's userbuffer overlap is not built for MLA (refused). */
#include <stdint.h>

#include "engine/build_ops.h"

typedef struct mla_shapes {
    uint64_t qr, kr, r, d, a_t; /* q and kv latent sizes, rope dims, head dim, heads per TP rank */
} mla_shapes;

static void mla_shapes_init(const pass *p, const shapes *sh, mla_shapes *ms)
{
    const gs_mla *mla = &p->x->s->model.mla;
    ms->qr = mla->q_lora_rank;
    ms->kr = mla->kv_lora_rank;
    ms->r = mla->rope_head_dim;
    ms->d = sh->hd;
    ms->a_t = sh->a_t;
}

static gs_status part(pass *p, gs_status rc, uint16_t n)
{
    if (rc == GS_OK)
        p->pending.e.part = n;
    return rc;
}

static gs_status gemm(pass *p, gs_role role, uint16_t n, const shapes *sh, uint64_t rows, uint64_t out, uint64_t in)
{
    return part(p, gs__op_gemm(p, role, GS_OP_QKV, sh, &(gemm_shape){rows, out, in, 0}), n);
}

/* The q latent norm (part 1) over T x q_lora_rank; the kv latent norm over T x kv_lora_rank with
 * the rotary passes over the decoupled dimensions of q (heads/tp x r) and k (r, shared by the
 * heads) (part 2). Each element read and written in the working precision: 2 e B. */
static gs_status norm(pass *p, uint16_t n, const shapes *sh, const mla_shapes *ms)
{
    uint64_t elems = n == 1 ? sh->T * ms->qr : sh->T * (ms->kr + ms->a_t * ms->r + ms->r);
    return part(p, gs__op_elementwise(p, GS_ROLE_MLA_NORM, GS_OP_NORM, elems, 2 * sh->e), n);
}

gs_status gs__mla_qkv_forward(pass *p, const shapes *sh)
{
    mla_shapes ms;
    mla_shapes_init(p, sh, &ms);
    gs_status rc;
    if (sh->sp && (rc = gs__op_tp_coll(p, GS_ROLE_TP_ATTN_IN, GS_COLL_ALLGATHER, sh)) != GS_OK)
        return rc;
    uint64_t T = sh->T, q_in = ms.qr ? ms.qr : sh->h;
    if (ms.qr && ((rc = gemm(p, GS_ROLE_MLA_DOWN, 1, sh, T, ms.qr, sh->h)) || (rc = norm(p, 1, sh, &ms))))
        return rc;
    if ((rc = gemm(p, GS_ROLE_MLA_UP, 1, sh, T, ms.a_t * (ms.d + ms.r), q_in)) ||
        (rc = gemm(p, GS_ROLE_MLA_DOWN, 2, sh, T, ms.kr + ms.r, sh->h)) || (rc = norm(p, 2, sh, &ms)))
        return rc;
    return gemm(p, GS_ROLE_MLA_UP, 2, sh, T, ms.a_t * 2 * ms.d, ms.kr);
}

gs_status gs__mla_up_recompute(pass *p, const shapes *sh)
{
    mla_shapes ms;
    mla_shapes_init(p, sh, &ms);
    uint64_t T = sh->T, q_in = ms.qr ? ms.qr : sh->h;
    gs_status rc;
    if ((rc = gemm(p, GS_ROLE_MLA_UP, 1, sh, T, ms.a_t * (ms.d + ms.r), q_in)) ||
        (rc = gemm(p, GS_ROLE_MLA_UP, 2, sh, T, ms.a_t * 2 * ms.d, ms.kr)))
        return rc;
    /* the rotary passes over q's (heads/tp x r) and k's (r) decoupled dimensions, 2 e B each */
    return part(p, gs__op_elementwise(p, GS_ROLE_MLA_NORM, GS_OP_NORM, T * (ms.a_t * ms.r + ms.r), 2 * sh->e), 3);
}

gs_status gs__mla_qkv_backward(pass *p, const shapes *sh)
{
    mla_shapes ms;
    mla_shapes_init(p, sh, &ms);
    gs_status rc;
    uint64_t T = sh->T, q_in = ms.qr ? ms.qr : sh->h;
    if ((rc = gemm(p, GS_ROLE_MLA_UP, 2, sh, T, ms.a_t * 2 * ms.d, ms.kr)) || (rc = norm(p, 2, sh, &ms)) ||
        (rc = gemm(p, GS_ROLE_MLA_DOWN, 2, sh, T, ms.kr + ms.r, sh->h)) ||
        (rc = gemm(p, GS_ROLE_MLA_UP, 1, sh, T, ms.a_t * (ms.d + ms.r), q_in)))
        return rc;
    if (ms.qr && ((rc = norm(p, 1, sh, &ms)) || (rc = gemm(p, GS_ROLE_MLA_DOWN, 1, sh, T, ms.qr, sh->h))))
        return rc;
    /* the input gradient summed over TP: reduce-scattered to the sequence-parallel shards */
    return gs__op_tp_coll(p, GS_ROLE_TP_ATTN_IN, sh->sp ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLREDUCE, sh);
}
