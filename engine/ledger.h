/* Memory and traffic ledgers: per-rank bytes by kind (exact integers) and per-rank bytes sent
 * per step by mesh dimension and link class, each line with the formula behind it.
 *
 * Ownership: gs_ledger_create allocates the ledger and its per-class rows; gs_ledger_destroy
 * frees them. The ledger copies what it needs from the scenario and mesh (no borrowed pointers). */
#ifndef GS_LEDGER_H
#define GS_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

typedef enum gs_mem_kind {
    GS_MEM_PARAMS,          /* working parameters held between steps (shard or full), bytes */
    GS_MEM_MASTER,          /* fp32 master copy (0 in pure fp32: the params are the master) */
    GS_MEM_ADAM_M,          /* Adam first moment, fp32 */
    GS_MEM_ADAM_V,          /* Adam second moment, fp32 */
    GS_MEM_GRADS,           /* gradient storage (shard or full) */
    GS_MEM_ACTIVATIONS,     /* saved activations of one micro-batch on this stage */
    GS_MEM_PIPE_INFLIGHT,   /* saved activations of the other micro-batches in flight */
    GS_MEM_GATHER,          /* FSDP gathered units (unit x (1 + prefetch depth)) + unsharded grad */
    GS_MEM_WORKSPACE,       /* NCCL buffers and GEMM workspace (fixed estimate) */
    GS_MEM_KIND_COUNT
} gs_mem_kind;

typedef enum gs_traffic_kind {
    GS_TRAFFIC_DP_ALLGATHER,      /* FSDP/ZeRO parameter all-gathers over the shard group */
    GS_TRAFFIC_DP_REDUCE_SCATTER, /* gradient reduce-scatters over the shard group */
    GS_TRAFFIC_DP_ALLREDUCE,      /* gradient all-reduce (DDP; HSDP's cross-node replica sync) */
    GS_TRAFFIC_TP,                /* TP all-reduces (or SP all-gather + reduce-scatter) */
    GS_TRAFFIC_PP,                /* activation / gradient sends to adjacent stages */
    GS_TRAFFIC_CP,                /* context parallelism's K, V (and gradient) exchanges */
    GS_TRAFFIC_EP,                /* expert parallelism's token dispatch and combine all-to-alls */
    GS_TRAFFIC_FP8_AMAX,          /* FP8 delayed scaling's amax all-reduces over the stage's ranks */
    GS_TRAFFIC_KIND_COUNT
} gs_traffic_kind;

typedef enum gs_link_class { GS_LINKCLASS_INTRA, GS_LINKCLASS_NET, GS_LINKCLASS_COUNT } gs_link_class;

#define GS_LEDGER_LABEL_BYTES 64
#define GS_LEDGER_FORMULA_BYTES 320
#define GS_LEDGER_MAX_LINES 48

/* One explained line: what, how many bytes, and the formula with the numbers substituted. */
typedef struct gs_ledger_line {
    char label[GS_LEDGER_LABEL_BYTES];
    uint64_t bytes;
    char formula[GS_LEDGER_FORMULA_BYTES];
} gs_ledger_line;

/* One class of ranks: those sharing a pipeline stage (TP and DP peers are identical). */
typedef struct gs_ledger_rank {
    uint64_t stage;              /* pipeline stage */
    uint64_t first_rank;         /* lowest rank of the class (dp = tp = 0) */
    uint64_t count;              /* ranks in the class: dp * tp */
    uint64_t layers;             /* transformer blocks on this stage */
    uint64_t params;             /* parameters this rank computes with (its stage, its TP slice) */
    uint64_t state_bytes;        /* params + master + m + v + grads, as held between steps */
    uint64_t mem[GS_MEM_KIND_COUNT];
    uint64_t host_bytes;         /* bytes kept in host memory (CPU offload) */
    uint64_t peak_bytes;         /* sum of mem[] */
    uint64_t inflight_microbatches; /* micro-batches whose activations are stashed at the peak */
    uint64_t traffic[GS_TRAFFIC_KIND_COUNT];     /* bytes sent per step */
    uint64_t traffic_link[GS_LINKCLASS_COUNT];   /* the same bytes split by link class */
    uint64_t traffic_bytes;                      /* total bytes sent per step */
    uint64_t dp_shard_group;     /* ranks a DP/FSDP collective spans (HSDP: the intra-node group) */
    uint64_t dp_replica_group;   /* HSDP: replicas across nodes; 1 otherwise */
    uint64_t unit_params;        /* largest FSDP unit on this stage, parameters (this TP slice) */
    char peak_where[96];         /* the moment of the peak, e.g. "backward of L79, micro-batch 0" */
    gs_ledger_line lines[GS_LEDGER_MAX_LINES]; /* --explain: memory then traffic lines */
    size_t nlines;
} gs_ledger_rank;

typedef struct gs_ledger {
    uint64_t params;              /* model parameters (exact, or nominal) */
    uint64_t states_total_bytes;  /* params x bytes/param of all states (16 B in mixed-precision Adam) */
    uint64_t bytes_per_param;     /* 16 for bf16/fp16 mixed precision and for fp32 */
    uint64_t per_rank_state_bytes;/* max over ranks */
    uint64_t peak_bytes;          /* max over ranks */
    uint64_t traffic_bytes;       /* max over ranks, bytes sent per step */
    uint64_t traffic_by_dim[GS_DIM_COUNT]; /* of the rank with the most traffic */
    uint64_t gpu_bytes;           /* the GPU's memory, bytes */
    uint64_t microbatches;        /* per step per pipeline */
    uint64_t min_gpus;            /* ceil(states_total / gpu memory): the seed's minimum card count */
    size_t nranks;
    gs_ledger_rank *ranks;        /* one per pipeline stage, stage order */
    gs_ledger_line notes[8];      /* cross-checks against hand calculations (seed grid B, ...) */
    size_t nnotes;
} gs_ledger;

/* Builds both ledgers for the scenario on the mesh (gs_scenario_mesh must have succeeded).
 * Overflowing sizes fail with GS_ERR_OVERFLOW naming the quantity. */
gs_status gs_ledger_create(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err);
/* The same numbers without the explanation: no lines, notes or peak_where (each rank's nlines and
 * the ledger's nnotes are 0, peak_where is empty). For callers that read only the byte counts
 * (the planner, the sim report); same ownership. */
gs_status gs_ledger_create_numbers(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err);
void gs_ledger_destroy(gs_ledger *l);

/* The rank class with the highest peak (ties: lowest stage). */
const gs_ledger_rank *gs_ledger_peak_rank(const gs_ledger *l);

const char *gs_mem_kind_name(gs_mem_kind k);         /* "params", "master", "adam_m", ... */
const char *gs_traffic_kind_name(gs_traffic_kind k); /* "dp_allgather", ... */

/* How the strategy treats one rank's parameters and gradients (shared by the ledger and the
 * schedule builders: the semantics both derive bytes from). */
typedef struct gs_shard_plan {
    uint64_t N;              /* shard group size (HSDP: the DP ranks on this node) */
    uint64_t R;              /* HSDP replicas across nodes (1 otherwise) */
    uint64_t wb;             /* bytes per working element (params, activations) */
    uint64_t gb;             /* bytes per gradient element (strategy.grad_dtype; default wb) */
    uint64_t gwb;            /* bytes per element of a gathered layer unit in memory: wb; under FP8
                                wb + 2 (its FP8 copy and the transpose Transformer Engine caches),
                                or 2 with fp8_params (the FP8 unit and its transpose) */
    uint64_t gather_wb;      /* bytes per layer-unit element an all-gather moves: 1 with fp8_params,
                                else wb (the root unit's embedding and head move wb) */
    uint64_t fp8_cache;      /* bytes per element of resident (unsharded) layer parameters for the
                                FP8 weight caches: 2 under FP8 (copy + transpose), 0 otherwise or
                                with fp8_params (the FP8 weights replace the bf16 ones) */
    uint64_t microbatches;
    int mixed;               /* fp32 master copy kept beside the working params */
    int stored_sharded;      /* FSDP: params kept as per-unit shards between steps */
    int gather_root;         /* FSDP root unit gathered at step start, freed at step end */
    int gather_all;          /* layer units gathered at their first forward, kept to step end
                                (SHARD_GRAD_OP, reshard_after_forward off) */
    int gather_per_pass;     /* layer units gathered before each forward and each backward pass,
                                freed after it (FULL_SHARD) */
    int prefetch_bwd;        /* 0 none, 1 backward_pre, 2 backward_post */
    int prefetch_fwd;        /* forward_prefetch */
    int shard_grads;         /* gradient storage is a shard */
    int shard_opt;           /* master / m / v are shards */
    int sync_every;          /* gradients reduced after every micro-batch */
    int hold_full_grads;     /* no_sync on sharded grads: full gradient resident until the last
                                micro-batch */
    int transient_grads;     /* a unit's full gradient lives from its backward to its reduction */
    int grad_allreduce;      /* NO_SHARD: all-reduce buckets (else reduce-scatter) */
    int bucketed;            /* DDP / ZeRO-1/2: gradients reduced in bucket_bytes buckets */
    int ag_after_optimizer;  /* ZeRO-1/2: all-gather the updated params once per step */
    int offload;             /* CPU offload of shards and optimizer */
    uint64_t ep;             /* expert parallelism: ranks sharing a MoE layer's experts; 1 without */
    int expert_split;        /* ep > 1 or etp < tp (gs_mesh_expert_split): expert units exist */
    uint64_t edp;            /* an expert unit's gradients reduce and its states shard over these
                                ranks (the EDP group, gs_mesh_edp_size) */
} gs_shard_plan;

void gs_shard_plan_init(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank, uint64_t microbatches,
                        gs_shard_plan *plan);
/* The ranks over which a unit's gradient is reduced and its states sharded: N, or the EDP group's
 * size for a MoE block's routed experts in units of their own (expert: gs_unit.expert). */
uint64_t gs_shard_ranks(const gs_shard_plan *plan, int expert);

/* Activation tensor sizes of one stage rank for one micro-batch (bytes). */
typedef struct gs_act_sizes {
    uint64_t stored;     /* kept per layer for backward (depends on recompute) */
    uint64_t remat;      /* rematerialized during one layer's backward (full: the layer's full
                            activations; selective: attention scores; none: 0) */
    uint64_t emb_mask;   /* stage 0, dropout models: embedding dropout mask */
    uint64_t head_act;   /* last stage: final-norm input + fp32 logits (4 s b V / t) */
    uint64_t boundary;   /* one pipeline send: s b h e (/ t with sequence parallelism) */
    uint64_t stored_kept; /* kept by a block recompute_every leaves unchecked (its full
                             activations); = stored when every block is treated alike */
    uint64_t every;       /* recompute full with recompute_every N > 1: N (blocks (l + 1) % N == 0
                             checkpointed); else 0, every block alike */
    uint32_t modules;     /* what a checkpointed block recomputes: selective's gs_recompute_module
                             bits, GS_RECOMPUTE_ALL_MODULES under full, 0 under none */
    uint64_t cp_fwd;      /* context parallelism (grid.cp > 1): the exchange's buffers live while
                             one block's attention runs forward, beyond the stash (p2p: the cp K, V
                             chunks of the ring; all_gather: the gathered K, V; a2a: Q, K, V and
                             the output with heads / cp whole sequences); 0 without cp */
    uint64_t cp_bwd;      /* the same in the block's backward (p2p: two ring buffers of K, V and
                             their gradients; all_gather: the gathered K, V and their gradients;
                             a2a: the output's gradient and Q, K, V's) */
} gs_act_sizes;

/* gs_act_sizes.modules under full recompute: the whole block; under recompute op: the ops
 * torchtitan's per-op policy does not save (engine/build_recompute.c). */
#define GS_RECOMPUTE_ALL_MODULES 0xffffffffu
#define GS_RECOMPUTE_OP_MODULES 0x80000000u

/* Stage-local block l's stored activations and its recompute set, and the stored activations of
 * blocks lo .. hi together (recompute_every: checkpointed blocks keep `stored`, the others
 * `stored_kept`, and only checkpointed blocks rematerialize). */
uint64_t gs_act_layer_stored(const gs_act_sizes *a, int64_t l);
uint64_t gs_act_layer_remat(const gs_act_sizes *a, int64_t l);
/* The modules stage-local block l recomputes in its backward (0: no recompute pass; see
 * gs_act_sizes.modules). A pass may recompute without rematerializing bytes: the attention
 * core under flash attention keeps no scores, yet Megatron-Core recomputes it. */
uint32_t gs_act_layer_recomputes(const gs_act_sizes *a, int64_t l);
uint64_t gs_act_stash(const gs_act_sizes *a, int64_t lo, int64_t hi);

/* Returns GS_ERR_OVERFLOW when a size does not fit 64 bits. */
gs_status gs_ledger_act_sizes(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, gs_act_sizes *out,
                              gs_error *err);

/* Activation bytes of one transformer block for one micro-batch of b sequences on one rank
 * (Korthikanti et al. 2022 accounting, op by op; exposed for the schedule's cross-check). */
uint64_t gs_ledger_layer_activation_bytes(const gs_model *m, const gs_strategy *st,
                                          uint64_t micro_seqs, uint64_t tp);
/* The same on one rank of a context-parallel group of cp (s / cp tokens of each sequence). */
uint64_t gs_ledger_layer_activation_bytes_cp(const gs_model *m, const gs_strategy *st, uint64_t micro_seqs,
                                             uint64_t tp, uint64_t cp);

/* The replicated parameters of one stage whose gradients sequence parallelism all-reduces over
 * TP once per step (Megatron-Core's _allreduce_non_tensor_model_parallel_grads: the parameters
 * marked sequence_parallel): the norms of its layers (plus the final norm and the MTP modules'
 * norms on the last stage) and each MoE block's router weight, hidden x experts (TopKRouter marks
 * it sequence_parallel: each TP rank routes only its tokens). */
uint64_t gs_sp_norm_params(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, uint64_t stage_layers);

/* A rank's workspace, bytes (an estimate): cuBLAS 32 MiB, NCCL buffers 128 MiB per communicator
 * (mesh dimension of size > 1), and under tp_comm_overlap Transformer Engine's userbuffers, one
 * s*b x h buffer of the working precision per overlapped GEMM (10: qkv/fc1 fprop, dgrad and wgrad,
 * proj/fc2 fprop and dgrad). *ub_bytes (may be NULL) receives the userbuffers' part. Saturates at
 * UINT64_MAX. */
uint64_t gs_workspace_bytes(const gs_scenario *s, const gs_mesh *mesh, uint64_t *ub_bytes);

#endif
