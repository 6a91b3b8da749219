/* Schedule builder, context parallelism (grid.cp > 1; strategy.cp_comm): the attention core with
 * its exchanges.
 *
 * Each rank holds s / cp tokens of every sequence (two of 2 cp chunks, load-balanced for the causal
 * mask as Megatron-Core and torchtitan do), so its attention does 1 / cp of the sequence's and
 * needs every rank's keys and values. Transformer Engine's attention with CP
 * (transformer_engine/pytorch/attention: AttnFuncWithCPAndKVP2P, ...KVAllGather, ...QKVA2A):
 *   p2p        the K, V chunks go around the CP ring, cp - 1 steps, each under the attention of the
 *              chunk at hand: built as the ring exchange (an all-gather's volume, (cp-1) chunks per
 *              rank, part GS_PART_RING: send/recv hops, not NCCL's all-gather) beside the attention
 *              of the first cp - 1 chunks, then the last chunk's (the
 *              same pattern as the TP ring exchange in engine/build_layer.c); the backward passes K,
 *              V and their
 *              gradients: twice the bytes;
 *   all_gather K and V all-gathered before the attention; backward: gathered again, and their
 *              gradients reduce-scattered after it;
 *   a2a        (Ulysses) Q, K, V all-to-all to heads / cp whole sequences, the output back;
 *              backward: the output gradient, then the Q, K, V gradients;
 *   a2a+p2p    (hierarchical, ...KVP2P with cp_group_a2a) the a2a over the A = grid.cp_a2a
 *              adjacent CP ranks first (each then holds heads / A of its a2a group's A s tokens of
 *              each sequence, still two load-balanced chunks of the p2p level's 2 cp / A), then
 *              p2p's ring over the B = cp / A ranks of its p2p group (K, V of A s tokens x kv heads
 *              / A: the bytes of the rank's own K, V), then the output's a2a back; backward in
 *              reverse: the output gradient's a2a, the ring with the gradients, the Q, K, V
 *              gradients' a2a.
 * The exchanges run on the TP stream (the model-parallel collectives' stream: a block's TP and CP
 * exchanges are ordered by its dependencies anyway), on the CP group. The attention event keeps
 * the rank's FLOPs (1 / cp of the sequence's, Megatron's count) and carries the kernel's shape:
 * m = n = s / cp per call, batch b heads (a2a: m = n = s, batch b heads / cp). The exchange's
 * buffers (gs_act_sizes.cp_fwd / cp_bwd) live from its first event to its last. */
#include <stdint.h>

#include "engine/build_internal.h"
#include "engine/build_ops.h"

/* The ring's group under p2p (the CP group) or a2a+p2p (its p2p level): kind, size, and the
 * a2a level's size A (1 without it). */
typedef struct cp_ring {
    gs_group_kind group;
    uint64_t n, a;
} cp_ring;

/* A CP collective of `bytes` on a CP group of n ranks, queued as the pass's next event. */
static gs_status cp_coll_on(pass *p, gs_role role, gs_coll_op op, gs_group_kind g, uint64_t n, uint64_t bytes,
                            uint16_t part)
{
    gs_status rc = gs__op_coll(p, role, op, g, n, bytes);
    if (rc == GS_OK)
        p->pending.e.part = part;
    return rc;
}

/* A CP collective of `bytes` on the CP group, queued as the pass's next event. */
static gs_status cp_coll(pass *p, gs_role role, gs_coll_op op, uint64_t bytes, uint16_t part)
{
    gs_status rc = gs__op_coll(p, role, op, GS_GROUP_CP, p->x->mesh->cp, bytes);
    if (rc == GS_OK)
        p->pending.e.part = part;
    return rc;
}

/* The exchange's buffers of this attention (gs_act_sizes.cp_fwd / cp_bwd, engine/ledger_act.c):
 * allocated by its first CP event, freed by its last event. A recomputed forward allocates the
 * forward's (its attention runs the forward's exchange again, beside the layer's rematerialized
 * activations: the ledger's "recompute" moment). */
static gs_status cp_buffer(pass *p, uint32_t *id)
{
    const gs_act_sizes *a = &p->x->act;
    uint64_t bytes = p->phase == GS_PHASE_BWD ? a->cp_bwd : a->cp_fwd;
    *id = GS_NO_ID;
    if (!bytes)
        return GS_OK;
    return gs__tensor(p->x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = bytes, .layer = p->layer, .mb = p->mb},
                      id);
}

/* The ring over r's n ranks beside the attention: the rank's queries (a s tokens of each sequence,
 * heads / a) against the whole sequence, in a first part beside the exchange (the first n - 1
 * chunks) and a second after it. buf: allocated by the exchange, freed by the second part. */
static gs_status attention_p2p(pass *p, const shapes *sh, const cp_ring *r, uint64_t kv_bytes, uint32_t buf)
{
    gs_status rc;
    if ((rc = gs__op_flush(p)) != GS_OK)
        return rc;
    uint32_t before = p->prev, ring;
    int first = !p->first_done, bwd = p->phase == GS_PHASE_BWD;
    uint64_t m = r->a * sh->s;
    /* the rank's whole attention as gemm() counts it: its queries against the whole sequence */
    gemm_shape g = {m, sh->s_full, sh->hd, sh->b * sh->a_t / r->a};
    if ((rc = gs__op_gemm(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, sh, &g)) != GS_OK)
        return rc;
    double flops = p->pending.e.flops, bytes = (double)p->pending.e.bytes, c = (double)r->n;
    p->have_pending = 0; /* replaced by its two parts; the pass's inputs were not consumed */
    p->first_done = !first;
    p->prev = before;
    if ((rc = cp_coll_on(p, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, r->group, r->n, (bwd ? 2 : 1) * r->n * kv_bytes,
                         GS_PART_RING)) != GS_OK)
        return rc;
    gs__evb_add(&p->pending, GS_LINK_ALLOCS, buf);
    gemm_part g1 = {GS_OP_ATTN, GS_ROLE_ATTN_CORE, m, m, sh->hd, flops * (c - 1.0) / c, bytes * (c - 1.0) / c};
    if (!gs__op_part_beside(p, &g1, before, first, &ring, &rc))
        return rc;
    p->pending.e.gemm_batch = (uint32_t)g.batch;
    if ((rc = gs__op_compute_shaped(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, &(gemm_shape){m, m, sh->hd, g.batch}, flops / c,
                      (uint64_t)(bytes / c))) != GS_OK)
        return rc;
    p->pending.e.part = 2;
    gs__evb_add(&p->pending, GS_LINK_DEPS, ring);
    gs__evb_add(&p->pending, GS_LINK_FREES, buf);
    return GS_OK;
}

/* a2a+p2p: the a2a level's exchanges around the p2p level's ring attention. The buffers live from
 * the first a2a to the last. */
static gs_status attention_a2a_p2p(pass *p, const shapes *sh, uint64_t kv_bytes, uint32_t buf)
{
    gs_status rc;
    int bwd = p->phase == GS_PHASE_BWD;
    uint64_t a = gs_mesh_cp_a2a(p->x->mesh);
    uint64_t qkv = sh->T * (sh->a_t + 2 * sh->kv_t) * sh->hd * sh->e, o = sh->T * sh->a_t * sh->hd * sh->e;
    cp_ring r = {GS_GROUP_CP_P2P, sh->cp / a, a};
    if ((rc = cp_coll_on(p, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, GS_GROUP_CP_A2A, a, bwd ? o : qkv, bwd ? 2 : 1)) != GS_OK)
        return rc;
    gs__evb_add(&p->pending, GS_LINK_ALLOCS, buf);
    if ((rc = attention_p2p(p, sh, &r, kv_bytes, GS_NO_ID)) != GS_OK ||
        (rc = cp_coll_on(p, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, GS_GROUP_CP_A2A, a, bwd ? qkv : o, bwd ? 1 : 2)) != GS_OK)
        return rc;
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
        return attention_p2p(p, sh, &(cp_ring){GS_GROUP_CP, sh->cp, 1}, kv_bytes, buf);
    if (how == GS_CP_A2A_P2P)
        return attention_a2a_p2p(p, sh, kv_bytes, buf);
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

