/* Event roles: what part of the model or of the step a schedule event is (the attention's norm,
 * the QKV projection, the TP exchange at the MLP's input, a gradient bucket's all-reduce, the
 * tied embedding's exchange, ...). The builder sets every event's role; one table
 * (engine/roles.c) says which event kind, stream, phases, ops, groups, layer and parts each role
 * allows, and schedule validation rejects an event that disagrees with it. Backends read the
 * role; none infers meaning from an event's place in its list.
 *
 * Ownership: the table is static and read-only; nothing here allocates. */
#ifndef GS_ROLES_H
#define GS_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "engine/schedule.h"

typedef enum gs_role {
    GS_ROLE_NONE, /* not set: validation rejects it */
    /* compute, a transformer block's ops (phases fwd, recompute, bwd) */
    GS_ROLE_ATTN_NORM, /* the input norm (its backward adds the residual's gradient) */
    GS_ROLE_QKV,       /* the QKV projection (a GEMM: part 1 and 2 under tp_comm_overlap) */
    GS_ROLE_ATTN_CORE, /* QK^T, softmax, PV (parts 1 and 2 beside and after CP's p2p ring) */
    GS_ROLE_OPROJ,     /* the attention's output projection (GEMM, parts) */
    GS_ROLE_MLP_NORM,  /* the residual add after attention, then the post-attention norm */
    GS_ROLE_MLP_UP,    /* gate+up or fc1 (GEMM, parts) */
    GS_ROLE_MLP_ACT,   /* SwiGLU / GELU */
    GS_ROLE_MLP_DOWN,  /* down or fc2 (GEMM, parts); the layer's output */
    /* compute, the root (embedding, head, loss) and the step */
    GS_ROLE_EMBED,     /* the token (and position) embedding */
    GS_ROLE_HEAD_NORM, /* the final norm */
    GS_ROLE_HEAD,      /* the LM head GEMM */
    GS_ROLE_LOSS,      /* cross-entropy */
    GS_ROLE_OPTIMIZER, /* AdamW over the rank's optimizer windows of every unit */
    /* TP collectives. Megatron's conjugate pair around each block half: at a half's input the
     * forward all-gathers the sequence-parallel norm output and the backward reduces the input's
     * gradient (reduce-scatter, or all-reduce without SP); at its output the forward reduces the
     * partial sums and the backward all-gathers the output's gradient (SP). */
    GS_ROLE_TP_ATTN_IN,
    GS_ROLE_TP_ATTN_OUT,  /* part 1 and 2: the forward's pipelined reduce-scatter (tp_comm_overlap) */
    GS_ROLE_TP_MLP_IN,
    GS_ROLE_TP_MLP_OUT,   /* parts as TP_ATTN_OUT */
    GS_ROLE_TP_ATTN_REGATHER, /* tp_comm_overlap's backward: the input norm's output gathered again */
    GS_ROLE_TP_MLP_REGATHER,  /* ... the post-attention norm's */
    GS_ROLE_TP_EMBED,     /* forward: the embedding's partial sums reduced; backward: its gradient gathered */
    GS_ROLE_TP_HEAD_IN,   /* forward: the final norm's output gathered (SP); backward: its gradient reduced */
    GS_ROLE_TP_LOSS_STATS, /* the vocab-parallel cross-entropy's per-token statistics gathered */
    GS_ROLE_TP_NORM_GRADS, /* after the backward, SP: the replicated weights' gradients summed over TP */
    /* DP collectives */
    GS_ROLE_UNIT_GATHER,        /* an FSDP unit's parameters all-gathered for its layers */
    GS_ROLE_GRAD_REDUCE_SCATTER, /* a unit's gradient reduce-scattered into its shard (part: bucket) */
    GS_ROLE_GRAD_INTER_REDUCE,  /* HSDP: the shard's (or the whole unit's) gradient summed over the replicas */
    GS_ROLE_GRAD_BUCKET_REDUCE, /* DDP: one bucket of a unit's gradient all-reduced (part: 1 + bucket) */
    GS_ROLE_GRAD_CHUNK_REDUCE,  /* bucket_stages first: several units' gradients reduced as one bucket */
    GS_ROLE_PARAM_GATHER,       /* ZeRO-1/2: the updated slices all-gathered into the resident parameters */
    /* copies (CPU offload) */
    GS_ROLE_OFFLOAD_FETCH, /* a parameter shard in from host memory */
    GS_ROLE_OFFLOAD_GRAD,  /* a gradient shard out to host memory */
    /* point to point */
    GS_ROLE_PP_SEND,   /* a stage boundary: forward the activation, backward its gradient */
    GS_ROLE_PP_RECV,
    GS_ROLE_TIED_SEND, /* tied embeddings under a pipeline: the word embedding's gradient exchanged */
    GS_ROLE_TIED_RECV, /* ... and added on arrival */
    /* context parallelism (engine/build_layer.c): the attention's exchanges on the CP group */
    GS_ROLE_CP_KV,  /* K and V gathered (p2p: around the ring, beside attention part 1); backward:
                       with their gradients (p2p), or their gradients reduce-scattered (all_gather) */
    GS_ROLE_CP_A2A, /* Ulysses: part 1 Q, K, V (backward: their gradients), part 2 the output (its
                       gradient) */
    /* a mixture-of-experts block's MLP (engine/build_moe.c); its shared experts are mlp_* */
    GS_ROLE_MOE_ROUTER,  /* the gate GEMM, and the softmax / top-k over its logits */
    GS_ROLE_MOE_PERMUTE, /* part 1: the routed token rows sorted by expert; part 2: unpermuted and
                            summed with their routing weights */
    GS_ROLE_EXPERT_UP,   /* the local experts' gate+up or fc1 (one grouped GEMM, batch = experts) */
    GS_ROLE_EXPERT_ACT,  /* their activation */
    GS_ROLE_EXPERT_DOWN, /* their down or fc2 (grouped GEMM) */
    GS_ROLE_EP_DISPATCH, /* the token rows all-to-all over the EP group to their experts (backward:
                            their gradients back); allgather dispatcher: gathered over the ETP x EP
                            group (backward: reduce-scattered) */
    GS_ROLE_EP_COMBINE,  /* the experts' outputs all-to-all back (backward: their gradients out);
                            allgather dispatcher: reduce-scattered (backward: gathered) */
    GS_ROLE_ETP_IN,      /* tp > 1: forward the received rows all-gathered over TP; backward their
                            gradients reduce-scattered */
    GS_ROLE_ETP_OUT,     /* forward the experts' partial outputs reduce-scattered over TP; backward
                            the gradients all-gathered */
    /* latent attention's projections (engine/build_mla.c), in the QKV GEMM's place */
    GS_ROLE_MLA_DOWN,    /* part 1: q_a (hidden -> q latent), part 2: kv_a (-> kv latent + rope dims) */
    GS_ROLE_MLA_NORM,    /* part 1: the q latent norm; part 2: the kv latent norm and the rotary passes;
                            part 3: the rotary passes alone (mla_up_proj recomputed) */
    GS_ROLE_MLA_UP,      /* part 1: q_b (-> queries), part 2: kv_b (-> keys and values) */
    /* multi-token prediction (engine/build_mtp.c), in the last stage's head pass; each module's
     * own head and loss are GS_ROLE_HEAD_NORM, GS_ROLE_HEAD and GS_ROLE_LOSS again */
    GS_ROLE_MTP_EMBED,   /* the embedding of the tokens k ahead (the stage's copy of the word embedding) */
    GS_ROLE_MTP_NORM,    /* the embedding's and the previous hidden state's norms (enorm, hnorm) */
    GS_ROLE_MTP_PROJ,    /* eh_proj: their concatenation projected 2h -> h (column-parallel) */
    GS_ROLE_TP_MTP,      /* the module's TP exchanges: the embedding's reduction, eh_proj's input
                            gather and output gather (backward: their mirror images) */
    /* FP8 delayed scaling (Transformer Engine's DelayedScaling): the amaxes of the FP8 GEMMs' casts
     * all-reduced with MAX over the stage's ranks, synchronously, when a model chunk's decoder
     * layers end: forward after its top layer (fp8_autocast's exit), backward after its bottom
     * layer (the backward of the first FP8 module); each rank then updates its scales from the
     * reduced amax history. No recompute event: a recomputed forward reuses the saved scales. */
    GS_ROLE_FP8_AMAX,
    /* Copies on the compute stream around the sharding's collectives (engine/framework.h
     * gs_framework_gather_copies, gs_framework_grad_copies): when a layer first uses a gathered
     * unit, PyTorch FSDP2's foreach_all_gather_copy_out (torch/distributed/fsdp/_fully_shard/
     * _fsdp_collectives.py) or DeepSpeed ZeRO-3's coalesced handle's wait() waits for the
     * all-gather and copies its flat output into each parameter's own tensor (the unit's
     * gathered bytes read and written); before a reduce-scatter, FSDP2's foreach_reduce copies
     * the unit's unsharded gradients into the reduce-scatter's input in the reduce dtype
     * (chunk_cat). FSDP1's flat parameter and Megatron-FSDP's buffers are the storage itself. */
    GS_ROLE_UNIT_COPY_OUT,
    GS_ROLE_GRAD_COPY_IN,
    GS_ROLE_COUNT
} gs_role;

/* Where a role's event sits. */
typedef enum gs_role_where {
    GS_WHERE_LAYER, /* a layer index >= 0 */
    GS_WHERE_EMBED, /* GS_LAYER_EMBED */
    GS_WHERE_HEAD,  /* GS_LAYER_HEAD */
    GS_WHERE_NONE,  /* GS_LAYER_NONE */
    GS_WHERE_ANY    /* any (a unit's layer, or none for the root) */
} gs_role_where;

/* The part of a cp_kv all-gather that is p2p's ring (cp_comm p2p, and a2a+p2p's p2p level):
 * Transformer Engine passes each K, V chunk to the next rank with send/recv, one hop a step, so
 * a step waits for the ring's slowest hop (sim: one NIC per inter-node hop). Part 0: the
 * all_gather exchange's NCCL all-gather. */
#define GS_PART_RING 1

typedef struct gs_role_info {
    const char *name;    /* as dumps write it */
    uint8_t kind;        /* gs_event_kind */
    uint8_t stream;      /* gs_stream */
    /* per phase: the ops allowed (bit o: gs_op o for compute, gs_coll_op o for collectives, bit
     * 0 for the op-less kinds); 0: the phase is not allowed */
    uint16_t ops[GS_PHASE_COUNT];
    uint16_t groups;     /* collectives: bit g for each gs_group_kind allowed */
    uint8_t where;       /* gs_role_where */
    uint16_t max_part;   /* the highest part (0: never split) */
    uint8_t on_pp;       /* 1: may run on the PP stream instead (the expert exchanges under
                            overlap_moe_expert_parallel_comm, on Megatron-Core's communication
                            stream beside the pipeline's sends) */
} gs_role_info;

/* The table entry of role r (NULL when r is out of range). */
const gs_role_info *gs_role_info_of(gs_role r);
const char *gs_role_name(gs_role r);
/* The role named `name` (GS_ROLE_COUNT when none is). */
gs_role gs_role_by_name(const char *name, size_t len);
/* 1 when event e agrees with its role's table entry; else 0 with what disagrees in why. */
int gs_role_check(const gs_event *e, char *why, size_t len);

#endif
