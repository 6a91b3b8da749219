/* The op emitters of one schedule pass (a block's forward, recompute or backward), shared by the
 * dense block's builder (engine/build_layer.c, which owns them) and the mixture-of-experts MLP's
 * (engine/build_moe.c): the pass state, the block's shapes, and one function per kind of event.
 * Every emitter queues its event as the pass's next one (held back so the pass's frees land on
 * its last); a non-OK status means nothing more may be emitted into the pass.
 *
 * Ownership: a pass borrows its builder context and layer io for its lifetime; nothing here
 * allocates beyond the events the context's rank list takes. */
#ifndef GS_BUILD_OPS_H
#define GS_BUILD_OPS_H

#include <stdint.h>

#include "engine/build_internal.h"
#include "engine/roles.h"

typedef struct shapes {
    uint64_t T, s, b, h, hd, a_t, kv_t, f_t, v_t, e;
    uint64_t attn_k;     /* k of the attention core's two GEMMs: hd, or with latent attention
                            hd + rope_head_dim / 2 (QK^T over hd + rope, PV over hd) */
    uint64_t cp, s_full; /* context parallelism: s = s_full / cp tokens of each sequence here */
    uint64_t norm_bytes; /* per element of a norm event: the residual add before it and the norm,
                            as the framework's kernels move them (gs_norm_bytes_per_element) */
    uint64_t act_bytes;  /* per element of the activation event (gs_act_bytes_per_element) */
    int swiglu, sp, fused;
} shapes;

/* Fills sh from the builder context (micro-batch tokens, TP slices, element and norm bytes). */
void gs__shapes_init(const gs_bctx *x, shapes *sh);

/* One op of a pass: the event, plus the io of the pass when it is its first or last op. */
typedef struct pass {
    gs_bctx *x;
    gs_phase phase;
    int32_t layer;
    uint32_t mb;
    const gs_layer_io *io;
    int first_done;
    uint32_t prev;       /* previous event in this pass (data dependency) */
    gs_evb pending;      /* the last op is held back so the pass's frees land on it */
    int have_pending;
} pass;

/* A GEMM's shape (m x n x k, batch times; all 0 for an op that is not a GEMM). */
typedef struct gemm_shape {
    uint64_t m, n, k, batch;
} gemm_shape;

/* One GEMM part: the op, its role, the chunk's shape, and the part's FLOPs and bytes. */
typedef struct gemm_part {
    gs_op op;
    gs_role role;
    uint64_t m, n, k;
    double flops, bytes;
} gemm_part;

/* The roles around one linear layer: its GEMM, the TP collective that all-gathers its input or
 * reduces its output, and (backward under tp_comm_overlap) the re-gather of its input. */
typedef struct linear_roles {
    gs_role gemm, coll, regather;
} linear_roles;

/* A GEMM op (forward 2 m n k FLOPs per batch entry, backward twice that; the attention core
 * counts its two GEMMs). */
gs_status gs__op_gemm(pass *p, gs_role role, gs_op op, const shapes *sh, const gemm_shape *g);
/* A compute op of no GEMM shape with its FLOPs and HBM bytes as given. */
gs_status gs__op_compute(pass *p, gs_role role, gs_op op, double flops, uint64_t bytes);
/* The same with a GEMM shape (the kernel's calls), the FLOPs and bytes still as given. */
gs_status gs__op_compute_shaped(pass *p, gs_role role, gs_op op, const gemm_shape *g, double flops, uint64_t bytes);
/* Emits the held-back op (the pass's previous event becomes it). */
gs_status gs__op_flush(pass *p);
/* Starts GEMM part g (part 1) beside the collective just queued, after `before` (and the pass's
 * inputs when the collective is its first event); *coll the collective's id; NULL (rc set) when
 * the emit fails. */
gs_evb *gs__op_part_beside(pass *p, const gemm_part *g, uint32_t before, int first, uint32_t *coll, gs_status *rc);
/* An elementwise op over `elements` (5 FLOPs each; backward twice the FLOPs and bytes). */
gs_status gs__op_elementwise(pass *p, gs_role role, gs_op op, uint64_t elements, uint64_t bytes_per_element);
/* A collective of `bytes` (gs_event.bytes' convention) on the rank's group g, on the TP stream. */
gs_status gs__op_coll(pass *p, gs_role role, gs_coll_op op, gs_group_kind g, uint64_t group_size, uint64_t bytes);
/* A TP collective on the block's activation (T h e bytes; an all-gather or reduce-scatter of its
 * sequence-parallel shards); nothing without TP. */
gs_status gs__op_tp_coll(pass *p, gs_role role, gs_coll_op op, const shapes *sh);
/* Sequence parallelism's all-gather of the activation, then the GEMM that consumes it
 * (overlapped under tp_comm_overlap); m = sh->T. */
gs_status gs__op_ag_gemm(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k);
/* The GEMM whose output is reduce-scattered, then the reduce-scatter (overlapped likewise). */
gs_status gs__op_gemm_rs(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k);

/* The output head's ops in the pass's phase: forward the final norm, (sequence parallel) the
 * gather, the column-parallel LM head, the vocab-parallel cross-entropy and (TP) the gather of
 * its per-token statistics; backward the loss, the head, the input gradient's reduction over TP
 * and the norm. The main head and each MTP module's share it. */
gs_status gs__op_head(pass *p, const shapes *sh);

/* engine/build_mtp.c: the multi-token prediction modules' ops (model.mtp_layers) in the head
 * pass: forward after the main loss, backward before the main loss's backward. */
gs_status gs__mtp_head_forward(pass *p, const shapes *sh);
gs_status gs__mtp_head_backward(pass *p, const shapes *sh);

/* engine/build_mla.c: latent attention's projections (MLA), from the attention norm's output to
 * Q, K and V (forward or recompute, with sequence parallelism's gather first), and their backward
 * (ending with the input gradient's reduction over TP); the QKV GEMM's place. */
gs_status gs__mla_qkv_forward(pass *p, const shapes *sh);
gs_status gs__mla_qkv_backward(pass *p, const shapes *sh);
/* The recompute of selective recompute's mla_up_proj: q_b, kv_b and the rotary passes. */
gs_status gs__mla_up_recompute(pass *p, const shapes *sh);

/* engine/build_moe.c: a MoE block's MLP half after its norm (forward or recompute), and its
 * backward up to the norm; the dense MLP's place in gs__layer_forward / gs__layer_backward. */
gs_status gs__moe_mlp_forward(pass *p, const shapes *sh);
gs_status gs__moe_mlp_backward(pass *p, const shapes *sh);
/* One piece of a MoE block's MLP half as Megatron-Core's combined 1F1B schedule splits it
 * (strategy.ep_overlap; engine/build_internal.h gs_block_seg), in the pass's phase: forward
 * PRE the shared experts, the router and (alltoall) the permute; DISPATCH the exchange (and the
 * ETP gather); MLP the experts (flex: with the permutes beside them); COMBINE the ETP
 * reduce-scatter and the exchange back; POST (alltoall) the unpermute. Backward the same pieces
 * with the ops reversed: COMBINE, MLP, DISPATCH, then PRE. */
gs_status gs__moe_piece(pass *p, const shapes *sh, gs_block_seg seg);
/* 1 when a MoE block's forward has a POST piece (the alltoall dispatcher's unpermute). */
int gs__moe_has_post(const gs_bctx *x);
/* Selective recompute's moe_act (the experts' activation) and shared_experts (the shared
 * experts' MLP, with its TP collectives) in a recompute pass. */
gs_status gs__moe_act_recompute(pass *p, const shapes *sh);
gs_status gs__moe_shared_recompute(pass *p, const shapes *sh);

/* engine/build_layer.c: the attention core (with context parallelism's exchanges) and a dense
 * block's MLP forward after its norm, for the recompute pass. */
gs_status gs__op_attention(pass *p, const shapes *sh);
/* engine/build_cp.c: the attention core with context parallelism's exchanges (sh->cp > 1). */
gs_status gs__cp_attention(pass *p, const shapes *sh);
gs_status gs__op_dense_mlp_forward(pass *p, const shapes *sh);

/* engine/build_layer.c: a block built piece by piece (strategy.ep_overlap's combined 1F1B): begin
 * with the block's io, emit pieces (gs__block_piece, in the phase's order, each one's events
 * flushed so another block's can follow; the last one ends the pass with its frees), and the
 * block's last event in *last_ev. A dense block has two pieces: PRE its attention half, MLP
 * its MLP. The run borrows x and io until its last piece. */
typedef struct gs_block_run {
    pass p;
    shapes sh;
    int moe;
} gs_block_run;
void gs__block_begin(gs_block_run *r, gs_bctx *x, int64_t local, uint32_t mb, gs_phase phase, const gs_layer_io *io);
gs_status gs__block_piece(gs_block_run *r, gs_block_seg seg, int last, uint32_t *last_ev);
/* The block's last non-empty piece in its phase. */
gs_block_seg gs__block_last_piece(const gs_block_run *r);

/* engine/build_recompute.c: the pass's block's recompute under selective recompute: the ops of
 * the checkpointed modules (gs_recompute_module bits) that the block has. */
gs_status gs__recompute_modules(pass *p, const shapes *sh, uint32_t modules);
/* The pass's block's recompute under recompute op (torchtitan's per-op policy). */
gs_status gs__recompute_op(pass *p, const shapes *sh);

#endif
