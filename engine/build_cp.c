/* Schedule builder, context parallelism (grid.cp > 1; strategy.cp_comm): the attention core with
 * its exchanges.
 *
 * Each rank holds s / cp tokens of every sequence (two of 2 cp chunks, load-balanced for the causal
 * mask as Megatron-Core and torchtitan do), so its attention does 1 / cp of the sequence's and
 * needs every rank's keys and values. Transformer Engine's attention with CP
 * (transformer_engine/pytorch/attention: AttnFuncWithCPAndKVP2P, ...KVAllGather, ...QKVA2A):
 *   p2p        the K, V chunks go around the CP ring, cp - 1 steps, each under the attention of the
 *              chunk at hand: built as the ring exchange (an all-gather's volume, (cp-1) chunks per
 *              rank) beside the attention of the first cp - 1 chunks, then the last chunk's (the
 *              same pattern as the TP ring exchange in engine/build_layer.c); the backward passes K,
 *              V and their
 *              gradients: twice the bytes;
 *   all_gather K and V all-gathered before the attention; backward: gathered again, and their
 *              gradients reduce-scattered after it;
 *   a2a        (Ulysses) Q, K, V all-to-all to heads / cp whole sequences, the output back;
 *              backward: the output gradient, then the Q, K, V gradients.
 * The exchanges run on the TP stream (the model-parallel collectives' stream: a block's TP and CP
 * exchanges are ordered by its dependencies anyway), on the CP group. The attention event keeps
 * the rank's FLOPs (1 / cp of the sequence's, Megatron's count) and carries the kernel's shape:
 * m = n = s / cp per call, batch b heads (a2a: m = n = s, batch b heads / cp). The exchange's
 * buffers (gs_act_sizes.cp_fwd / cp_bwd) live from its first event to its last. */
#include <stdint.h>

#include "engine/build_internal.h"
#include "engine/build_ops.h"

/* A CP collective of `bytes` on the CP group, queued as the pass's next event. */
static gs_status cp_coll(pass *p, gs_role role, gs_coll_op op, uint64_t bytes, uint16_t part)
{
    gs_status rc = gs__op_coll(p, role, op, GS_GROUP_CP, p->x->mesh->cp, bytes);
    if (rc == GS_OK)
        p->pending.e.part = part;
    return rc;
}

/* The exchange's buffers of this attention (gs_act_sizes.cp_fwd / cp_bwd, engine/ledger_act.c):
 * allocated by its first CP event, freed by its last event. A recomputed forward's are not
 * counted (GS_NO_ID). */
static gs_status cp_buffer(pass *p, uint32_t *id)
{
    const gs_act_sizes *a = &p->x->act;
    uint64_t bytes = p->phase == GS_PHASE_FWD ? a->cp_fwd : p->phase == GS_PHASE_BWD ? a->cp_bwd : 0;
    *id = GS_NO_ID;
    if (!bytes)
        return GS_OK;
    return gs__tensor(p->x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = bytes, .layer = p->layer, .mb = p->mb},
                      id);
}

static gs_status attention_p2p(pass *p, const shapes *sh, uint64_t kv_bytes, uint32_t buf)
{
    gs_status rc;
    if ((rc = gs__op_flush(p)) != GS_OK)
        return rc;
    uint32_t before = p->prev, ring;
    int first = !p->first_done, bwd = p->phase == GS_PHASE_BWD;
    /* the rank's whole attention as gemm() counts it: its queries against the whole sequence */
    gemm_shape g = {sh->s, sh->s_full, sh->hd, sh->b * sh->a_t};
    if ((rc = gs__op_gemm(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, sh, &g)) != GS_OK)
        return rc;
    double flops = p->pending.e.flops, bytes = (double)p->pending.e.bytes, c = (double)sh->cp;
    p->have_pending = 0; /* replaced by its two parts; the pass's inputs were not consumed */
    p->first_done = !first;
    p->prev = before;
    if ((rc = cp_coll(p, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, (bwd ? 2 : 1) * sh->cp * kv_bytes, 0)) != GS_OK)
        return rc;
    gs__evb_add(&p->pending, GS_LINK_ALLOCS, buf);
    gemm_part g1 = {GS_OP_ATTN, GS_ROLE_ATTN_CORE, sh->s, sh->s, sh->hd, flops * (c - 1.0) / c, bytes * (c - 1.0) / c};
    if (!gs__op_part_beside(p, &g1, before, first, &ring, &rc))
        return rc;
    p->pending.e.gemm_batch = (uint32_t)g.batch;
    if ((rc = gs__op_compute_shaped(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, &(gemm_shape){sh->s, sh->s, sh->hd, g.batch}, flops / c,
                      (uint64_t)(bytes / c))) != GS_OK)
        return rc;
    p->pending.e.part = 2;
    gs__evb_add(&p->pending, GS_LINK_DEPS, ring);
    gs__evb_add(&p->pending, GS_LINK_FREES, buf);
    return GS_OK;
}

gs_status gs__cp_attention(pass *p, const shapes *sh)
{
    gs_status rc;
    int bwd = p->phase == GS_PHASE_BWD;
    uint64_t kv_bytes = 2 * sh->T * sh->kv_t * sh->hd * sh->e; /* this rank's K and V */
    gs_cp_comm how = p->x->s->strategy.cp_comm;
    uint32_t buf;
    if ((rc = cp_buffer(p, &buf)) != GS_OK)
        return rc;
    if (how == GS_CP_P2P)
        return attention_p2p(p, sh, kv_bytes, buf);
    if (how == GS_CP_ALL_GATHER) {
        if ((rc = cp_coll(p, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, sh->cp * kv_bytes, 0)) != GS_OK)
            return rc;
        gs__evb_add(&p->pending, GS_LINK_ALLOCS, buf);
        if ((rc = gs__op_gemm(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, sh, &(gemm_shape){sh->s, sh->s_full, sh->hd, sh->b * sh->a_t})))
            return rc;
        p->pending.e.gemm_n = (uint32_t)sh->s; /* the kernel's calls: the local queries' chunk */
        if (bwd && (rc = cp_coll(p, GS_ROLE_CP_KV, GS_COLL_REDUCE_SCATTER, sh->cp * kv_bytes, 0)) != GS_OK)
            return rc;
        gs__evb_add(&p->pending, GS_LINK_FREES, buf);
        return GS_OK;
    }
    /* a2a: this rank's Q, K, V (part 1) and its attention output (part 2), T tokens each */
    uint64_t qkv = sh->T * (sh->a_t + 2 * sh->kv_t) * sh->hd * sh->e, o = sh->T * sh->a_t * sh->hd * sh->e;
    if ((rc = cp_coll(p, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, bwd ? o : qkv, bwd ? 2 : 1)) != GS_OK)
        return rc;
    gs__evb_add(&p->pending, GS_LINK_ALLOCS, buf);
    if ((rc = gs__op_gemm(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, sh,
                   &(gemm_shape){sh->s_full, sh->s_full, sh->hd, sh->b * sh->a_t / sh->cp})) ||
        (rc = cp_coll(p, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, bwd ? qkv : o, bwd ? 1 : 2)))
        return rc;
    gs__evb_add(&p->pending, GS_LINK_FREES, buf);
    return GS_OK;
}

