/* Sharding, recompute, precision and pipeline choices: the strategy part of a scenario.
 *
 * Ownership: gs_strategy is a plain value; name tables are static. */
#ifndef GS_STRATEGY_H
#define GS_STRATEGY_H

#include <stdint.h>

#include "engine/framework.h"
#include "engine/status.h"

typedef enum gs_sharding {
    GS_SHARD_NO_SHARD,      /* DDP: replicated params, grads and optimizer; grad all-reduce */
    GS_SHARD_GRAD_OP,       /* FSDP SHARD_GRAD_OP ~ ZeRO-2 with params kept through backward */
    GS_SHARD_FULL_SHARD,    /* FSDP FULL_SHARD (ZeRO-3) */
    GS_SHARD_HYBRID_SHARD,  /* FULL_SHARD inside a node, replicated across nodes */
    GS_SHARD_ZERO1,         /* optimizer state sharded */
    GS_SHARD_ZERO2,         /* + gradients sharded */
    GS_SHARD_ZERO3,         /* + parameters sharded (same accounting as FULL_SHARD) */
    GS_SHARD_COUNT
} gs_sharding;

typedef enum gs_wrap_kind { GS_WRAP_LAYER, GS_WRAP_MODEL, GS_WRAP_MIN_PARAMS } gs_wrap_kind;
typedef enum gs_prefetch { GS_PREFETCH_NONE, GS_PREFETCH_BACKWARD_PRE, GS_PREFETCH_BACKWARD_POST } gs_prefetch;
/* OP: per-op selective checkpointing as torchtitan applies it (activation_checkpoint mode
 * selective, selective_ac_option op; torchtitan/parallelisms/parallelize_llama.py, later
 * torchtitan/distributed/activation_checkpoint.py): every block is checkpointed, and its
 * recompute replays every op but those whose outputs the policy saves: the matmuls (every
 * second one recomputed), flash / efficient attention and the reduce-scatters. */
typedef enum gs_recompute {
    GS_RECOMPUTE_NONE,
    GS_RECOMPUTE_SELECTIVE,
    GS_RECOMPUTE_FULL,
    GS_RECOMPUTE_OP,
} gs_recompute;
#define GS_RECOMPUTE_COUNT 4
/* The submodules selective recompute checkpoints (strategy.recompute_modules), as Megatron-Core's
 * --recompute-modules names them (TransformerConfig.recompute_modules; TransformerLayer,
 * MLASelfAttention and MoELayer apply them): CORE_ATTN the attention core (its s x s scores);
 * LAYERNORM the two norms' outputs; MLA_UP_PROJ latent attention's q and kv up-projections with
 * the rotary embedding (Q, K and V); MLP a dense block's MLP; MOE a MoE block's whole MLP half
 * (router, dispatch, experts, combine, shared experts); MOE_ACT the experts' activation;
 * SHARED_EXPERTS the shared experts. Megatron's default is CORE_ATTN. */
typedef enum gs_recompute_module {
    GS_RC_CORE_ATTN = 1u << 0,
    GS_RC_MOE_ACT = 1u << 1,
    GS_RC_LAYERNORM = 1u << 2,
    GS_RC_MLA_UP_PROJ = 1u << 3,
    GS_RC_MLP = 1u << 4,
    GS_RC_MOE = 1u << 5,
    GS_RC_SHARED_EXPERTS = 1u << 6,
} gs_recompute_module;
#define GS_RC_MODULE_COUNT 7
#define GS_RC_DEFAULT GS_RC_CORE_ATTN
typedef enum gs_precision { GS_PREC_BF16, GS_PREC_FP16, GS_PREC_FP32 } gs_precision;
typedef enum gs_pipeline { GS_PIPE_GPIPE, GS_PIPE_1F1B, GS_PIPE_INTERLEAVED } gs_pipeline;
/* Gradient accumulation: reduce gradients only after the last micro-batch (DDP/FSDP no_sync:
 * the full gradient of the stage is held until then) or after every micro-batch (ZeRO-2/3 as
 * DeepSpeed does it: always). AUTO skips the sync where that costs no memory (gradients kept
 * whole anyway: NO_SHARD, ZeRO-1) and reduces every micro-batch where gradients are sharded. */
typedef enum gs_grad_sync { GS_GRAD_SYNC_AUTO = 0, GS_GRAD_SYNC_LAST = 1, GS_GRAD_SYNC_EVERY = 2 } gs_grad_sync;
/* Which pipeline stages split their DDP / ZeRO-1/2 gradients into bucket_bytes buckets. ALL
 * (PyTorch DDP, gridstep's default): every stage and model chunk. FIRST (Megatron-Core's
 * DistributedDataParallel, r0.8 and later): only model chunk 0 of pipeline rank 0; every other
 * (stage, chunk) reduces its whole gradient as one bucket once the chunk's last gradient is ready,
 * and all-gathers its updated parameters as one bucket. */
typedef enum gs_bucket_stages { GS_BUCKET_STAGES_ALL = 0, GS_BUCKET_STAGES_FIRST = 1 } gs_bucket_stages;
/* How the loss's cross-entropy passes over the logits (T x V/tp per micro-batch). UNFUSED (the
 * default): the framework's tensor ops, as Megatron-LM's vocab_parallel_cross_entropy and
 * PyTorch's F.cross_entropy(logits.float()) run them: a cast to fp32, the row max, the shift,
 * exp, the row sum and the normalisation in forward (the fp32 softmax kept for backward), the
 * scale and the cast back in backward, each a pass over the logits. FUSED: one kernel that
 * reads the logits twice (max, then the sum of exponentials) in forward and recomputes the
 * softmax from the per-row logsumexp in backward (read the logits, write their gradient):
 * Megatron's --cross-entropy-loss-fusion, Transformer Engine's and Liger's kernels, and
 * gridstep exec's own kernels. */
typedef enum gs_xent { GS_XENT_UNFUSED = 0, GS_XENT_FUSED = 1 } gs_xent;
/* FP8 training (a scenario's `precision: fp8`): the linear layers' GEMMs (QKV, the attention
 * output projection, the MLP's up and down projections; forward, recompute and backward) take FP8
 * operands, E4M3 forward and E5M2 gradients (Transformer Engine's HYBRID format, Megatron-LM's
 * --fp8-format hybrid), while everything else (attention core, norms, the LM head, gradients,
 * communication unless fp8_params) stays in the training precision, bf16. The recipe is how
 * each tensor's scale is found: DELAYED from an amax history (Transformer Engine's
 * DelayedScaling, Megatron-LM's --fp8-recipe delayed; the amax comes out of the cast kernel, so
 * a cast can be fused into the kernel before it), CURRENT from the tensor itself (TE's
 * Float8CurrentScaling, Megatron-LM's --fp8-recipe tensorwise, torchao's dynamic float8 as
 * torchtitan uses it: an amax pass before every cast), MX block scaling on Blackwell (TE's
 * MXFP8BlockScaling, Megatron-LM's --fp8-recipe mxfp8: an E8M0 scale per 32 consecutive
 * elements, found by the cast kernel itself; a block-scaled tensor's transpose is not one, so
 * every cast writes a rowwise and a columnwise copy, each with its scales). AUTO resolves at load:
 * DELAYED under Megatron-LM and DeepSpeed (Transformer Engine's default recipe), CURRENT under
 * FSDP1/FSDP2 (torchao). */
typedef enum gs_fp8 { GS_FP8_OFF = 0, GS_FP8_DELAYED = 1, GS_FP8_CURRENT = 2, GS_FP8_AUTO = 3, GS_FP8_MX = 4 } gs_fp8;

/* Delayed scaling's choice of amax from a tensor's history (Transformer Engine's
 * amax_compute_algo, Megatron-LM --fp8-amax-compute-algo): the most recent one (Megatron-LM's
 * default) or the largest of the history (Transformer Engine's). */
typedef enum gs_fp8_amax_algo { GS_FP8_AMAX_MOST_RECENT = 0, GS_FP8_AMAX_MAX = 1 } gs_fp8_amax_algo;

/* How context-parallel attention exchanges keys and values (grid.cp > 1; Megatron-Core's
 * --cp-comm-type, Transformer Engine's attention with CP): P2P passes each rank's K and V chunk
 * around the CP ring, step by step under the attention of the chunk at hand (ring attention;
 * the backward passes K, V and their gradients); ALL_GATHER gathers the whole K and V before the
 * attention and reduce-scatters their gradients after its backward; A2A (DeepSpeed Ulysses)
 * exchanges Q, K, V by all-to-all so that each rank holds whole sequences of heads / cp heads,
 * and the output back. */
/* a2a+p2p: hierarchical CP (Megatron-Core --cp-comm-type a2a+p2p with
 * --hierarchical-context-parallel-sizes A B): Ulysses all-to-all over A adjacent CP ranks (grid.cp_a2a),
 * then the K, V ring over the B = cp / A ranks at the same position of each such group. */
typedef enum gs_cp_comm { GS_CP_P2P = 0, GS_CP_ALL_GATHER = 1, GS_CP_A2A = 2, GS_CP_A2A_P2P = 3 } gs_cp_comm;

/* A mixture-of-experts model's token dispatcher (Megatron-Core's --moe-token-dispatcher-type,
 * megatron/core/transformer/moe/token_dispatcher.py): ALLTOALL sends each token row to its experts'
 * ranks (NCCL's all-to-all: a row per routed copy); ALLGATHER gathers every token of the ETP x EP
 * group on every rank, each keeping the rows of its experts, and reduce-scatters the outputs back;
 * FLEX is MoEFlexTokenDispatcher with the DeepEP backend (--moe-token-dispatcher-type flex
 * --moe-flex-dispatcher-backend deepep, or hybridep: the same transport on NVLink + RDMA): one fused
 * kernel sends each token once to every node that holds one of its experts (RDMA, to the GPU of
 * the same local index) and forwards it over NVLink once to every GPU there that does
 * (engine/moe_route.h). */
typedef enum gs_moe_dispatcher { GS_MOE_ALLTOALL = 0, GS_MOE_ALLGATHER = 1, GS_MOE_FLEX = 2 } gs_moe_dispatcher;

typedef struct gs_strategy {
    gs_sharding sharding;
    gs_wrap_kind wrap;
    uint64_t wrap_min_params;   /* GS_WRAP_MIN_PARAMS: smallest unit, parameters */
    gs_prefetch prefetch;       /* backward prefetch */
    int forward_prefetch;       /* 1: gather unit i+1 during forward of unit i */
    int reshard_after_forward;  /* 1: free gathered params after forward (re-gather in backward);
                                   default 1 for full_shard/zero3/hybrid, 0 otherwise */
    int limit_all_gathers;      /* 1 (FSDP default): at most 2 gathered units in flight */
    gs_recompute recompute;
    uint32_t recompute_modules; /* with recompute selective: gs_recompute_module bits (default
                                   GS_RC_DEFAULT); ignored otherwise */
    uint64_t recompute_every;   /* with recompute full: checkpoint every N-th block of a stage,
                                   counted from 1 in the stage's build order (fms-fsdp's
                                   selective_checkpointing every_xth_item, torchtitan's
                                   selective_ac_option N); the others keep their activations.
                                   0 or 1: every block */
    int flash_attention;        /* 1: attention kernel keeps no s x s scores (stores logsumexp) */
    int offload;                /* CPU offload of params + optimizer state */
    gs_precision precision;
    gs_pipeline pipeline;
    uint64_t virtual_stages;    /* interleaved: model chunks per pipeline rank (>= 2); else 1 */
    int sequence_parallel;
    uint64_t bucket_bytes;      /* DDP gradient bucket, bytes (PyTorch default 25 MiB) */
    gs_grad_sync grad_sync;     /* default AUTO: LAST where gradients are not sharded, else EVERY */
    gs_bucket_stages bucket_stages; /* default ALL; FIRST: Megatron-Core's rule (one bucket per
                                       model chunk except chunk 0 of stage 0) */
    int overlap_grad_reduce;    /* 1 (default): gradient buckets are reduced under the backward as
                                   they fill (PyTorch DDP, Megatron --overlap-grad-reduce); 0: all
                                   after the stage's last backward (Megatron without the flag,
                                   Megatron-LM 2021's local DDP); DDP/ZeRO only */
    int overlap_param_gather;   /* ZeRO-1/2 (Megatron --overlap-param-gather): the updated
                                   parameters are all-gathered while the next step's forward runs
                                   (per unit, before its first forward) instead of after the
                                   optimizer; default 0 (DeepSpeed's step() gathers at once) */
    int grad_dtype;             /* gradients (accumulation buffers and their reductions): -1 (default)
                                   the training precision, else a gs_precision: Megatron-LM
                                   accumulates and reduces in fp32 under bf16; FSDP's MixedPrecision
                                   reduce_dtype */
    int tp_comm_overlap;        /* Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers,
                                   needs sequence parallelism): each block's TP all-gathers and
                                   reduce-scatters run under its GEMMs; default 0 */
    gs_xent cross_entropy;      /* default UNFUSED */
    gs_framework framework;     /* default AUTO (engine/framework.h: fsdp1 for the FSDP shardings,
                                   megatron otherwise) */
    int compile;                /* 1: torch.compile fuses the elementwise ops (Inductor); default 0 */
    int cuda_graphs;            /* 1: each transformer layer's forward and backward of a micro-batch
                                   run as CUDA graphs, issued by the host in one call each
                                   (Megatron-Core --cuda-graph-impl local or transformer_engine,
                                   formerly --enable-cuda-graph / --external-cuda-graph); Megatron
                                   only; default 0 */
    int torch_fsdp2;            /* 1: Megatron-LM --use-torch-fsdp2: sharding full_shard or
                                   shard_grad_op run as PyTorch FSDP2's fully_shard on each
                                   transformer layer (its copy-out and copy-in on the compute
                                   stream) instead of Megatron-FSDP; framework megatron, pp and
                                   ep 1; default 0 */
    int ep_overlap;             /* 1: Megatron-Core's overlap_moe_expert_parallel_comm
                                   (--overlap-moe-expert-parallel-comm): in the 1F1B steady state
                                   one micro-batch's forward and another's backward run as one
                                   combined step, layer by layer, each MoE block split where its
                                   token exchanges are, so one micro-batch's exchanges run under
                                   the other's compute (engine/build_pass.c); framework
                                   megatron, ep > 1, dispatcher alltoall or flex, interleaved
                                   pipeline when pp > 1, no full recompute; default 0 */
    uint64_t flex_sms;          /* the flex dispatcher's SMs (Megatron-Core
                                   --moe-flex-dispatcher-num-sms, formerly --moe-deepep-num-sms and
                                   --moe-hybridep-num-sms): what its kernels take from compute that
                                   runs beside them under ep_overlap; 0 (default): DeepEP's 20 */
    gs_attn_impl attention;     /* the attention kernel; default AUTO (from the framework, the GPU
                                   and flash_attention) */
    gs_fp8 fp8;                 /* default OFF; precision: fp8 sets it (precision stays bf16: the
                                   working precision of everything that is not an FP8 GEMM) */
    int fp8_params;             /* 1: the linear layers' weights are kept in FP8 between steps
                                   (Megatron-LM --fp8-param-gather, TE fp8_model_init, torchao's
                                   FSDP2 float8 all-gather): their parameter all-gathers move 1 byte
                                   per element and no bf16 copy is held; default 0 */
    /* Delayed scaling's recipe (Transformer Engine's DelayedScaling; read with fp8_recipe delayed
     * only): each scale is fp8_max / 2^fp8_margin / amax, the amax chosen by fp8_amax_algo from the
     * last fp8_amax_history reduced amaxes. Defaults Megatron-LM's: 1, MOST_RECENT, 0 (Transformer
     * Engine's own: 1024, MAX, 0). The history costs 4 B a tensor and entry, and its update one
     * pass over it a step: neither is modelled (doc/models.md). */
    uint64_t fp8_amax_history;
    gs_fp8_amax_algo fp8_amax_algo;
    uint64_t fp8_margin;
    gs_cp_comm cp_comm;         /* context parallelism's exchange; default P2P (Megatron's) */
    gs_moe_dispatcher moe_dispatcher; /* MoE token dispatch; default ALLTOALL (the recipes' choice) */
    int precision_aware;        /* 1: Megatron-Core's precision-aware optimizer
                                   (--use-precision-aware-optimizer: Transformer Engine's FusedAdam
                                   holds the master; under bf16 its store_param_remainders default
                                   keeps only the 16 bits the bf16 parameter lacks, 2 B); default 0 */
    int adam_bf16;              /* 1: Adam's m and v in bf16 (--exp-avg-dtype bf16
                                   --exp-avg-sq-dtype bf16; needs precision_aware), 2 B each;
                                   default 0: fp32, 4 B each */
} gs_strategy;

/* The seed's advice: full_shard, per-layer wrap, backward_pre, reshard after forward, no
 * recompute, bf16, 1f1b, no SP, 25 MiB buckets; plus FSDP's limit_all_gathers and flash
 * attention on (PyTorch's defaults). */
void gs_strategy_defaults(gs_strategy *s);
/* The unit of parameter gathering a framework uses when the scenario names none: per transformer
 * block (wrap layer), except DeepSpeed ZeRO-3, which fetches each submodule's parameters and
 * prefetches the next ones in batches of stage3_prefetch_bucket_size = 5e7 elements
 * (deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module,
 * deepspeed/runtime/zero/config.py prefetch_bucket_size): wrap {min_params: 5e7}, the module tree
 * grouped bottom-up into units of at least that many parameters. */
void gs_strategy_default_wrap(gs_strategy *s);
#define GS_DEEPSPEED_PREFETCH_BUCKET_PARAMS 50000000ull

/* Bytes of one working (compute) element: 2 for bf16/fp16, 4 for fp32. */
uint64_t gs_precision_bytes(gs_precision p);

/* 1 when overlap_grad_reduce may be false: the gradients are held until the last micro-batch
 * (no_shard or zero1, grad_sync not every; zero2 reduces every micro-batch). */
int gs_strategy_can_reduce_after_backward(const gs_strategy *s);

/* 1 when bucket_stages may be FIRST: the gradients are reduced in DDP / ZeRO buckets and held whole
 * in a resident buffer until their reduction (no_shard or zero1), as Megatron-Core's gradient
 * buffer is; zero2 keeps only transient full gradients, FSDP reduces per unit. */
int gs_strategy_can_bucket_first(const gs_strategy *s);

/* 1 when strategy.torch_fsdp2 takes effect (engine/framework.h gs_framework_torch_fsdp2, under
 * the resolved framework): Megatron-LM's --use-torch-fsdp2 on full_shard or shard_grad_op. */
int gs_strategy_torch_fsdp2(const gs_strategy *s);
/* 1 when the layer units' parameters are gathered again before every pass (FSDP / ZeRO-3
 * sharding that reshards after the forward; shard_grad_op keeps them for the step). */
int gs_strategy_regathers(const gs_strategy *s);
/* 1 when overlap_moe_expert_parallel_comm can run on this strategy over ep and pp: what Megatron-
 * Core asserts (framework megatron, ep > 1, the alltoall or flex dispatcher, virtual stages when
 * pp > 1, no full recompute) and what gridstep builds (no per-pass gathers). The loader refuses
 * the rest with its reasons; the planner keeps a base's overlap where this holds. */
int gs_strategy_ep_overlap_fits(const gs_strategy *s, uint64_t ep, uint64_t pp);

/* 1 when stage-local block `local` (0-based, the stage's build order) is checkpointed: recompute
 * full and (local + 1) a multiple of recompute_every (fms-fsdp's and torchtitan's count). */
int gs_strategy_checkpoints_layer(const gs_strategy *s, uint64_t local);
/* Checkpointed blocks among stage-local blocks lo .. hi (inclusive; 0 when hi < lo). */
uint64_t gs_strategy_checkpointed_in(const gs_strategy *s, int64_t lo, int64_t hi);
/* The counting rule itself, for a given N (0 or 1: every block): whether block `local` is the
 * N-th of its run, and how many of blocks lo .. hi are. */
int gs_every_nth_block(uint64_t every, uint64_t local);
uint64_t gs_every_nth_blocks_in(uint64_t every, int64_t lo, int64_t hi);

/* 1 when model chunk `chunk` (0 without interleaving) of pipeline stage `stage` reduces and gathers
 * its whole gradient / parameters as one bucket under the strategy's bucket_stages (FIRST, and not
 * chunk 0 of stage 0). The caller checks that the sharding buckets at all. */
int gs_strategy_chunk_one_bucket(const gs_strategy *s, uint64_t stage, uint64_t chunk);

/* Bytes of Adam's m and v together per optimizer element: 8 (fp32), 4 (adam_dtype bf16). */
uint64_t gs_adam_state_bytes(const gs_strategy *s);
/* Bytes of the master copy per optimizer element: 0 in fp32 training, 4 (fp32) under mixed
 * precision, 2 under bf16 with the precision-aware optimizer (the fp32 master's low 16 bits; the
 * bf16 parameter holds the rest: Megatron-Core's store_param_remainders, TE >= 2.1). */
uint64_t gs_master_bytes(const gs_strategy *s);

/* Bytes of one gradient element: grad_dtype's, or the training precision's by default. */
uint64_t gs_grad_bytes(const gs_strategy *s);

/* HBM bytes per logit of the cross-entropy's passes, forward (bwd 0) or backward, with logits of
 * `elem_bytes` (the training precision's element): UNFUSED forward casts to fp32 (read e, write
 * 4; no pass when e is 4, where .float() returns the tensor itself), then max (read 4), shift
 * (4 + 4), exp (4 + 4), sum (4) and normalise (4 + 4); backward scales the kept softmax by the
 * loss gradient (4 + 4) and casts it back (4 + e; none when e is 4). FUSED reads the logits twice
 * in forward (2 e) and reads them and writes their gradient in backward (2 e). */
uint64_t gs_xent_bytes_per_logit(gs_xent x, uint64_t elem_bytes, int bwd);

/* The recipe strategy.fp8 names under framework `resolved` (GS_FP8_AUTO: DELAYED for Megatron-LM
 * and DeepSpeed, which run Transformer Engine's DelayedScaling by default; CURRENT for FSDP1 and
 * FSDP2, whose FP8 is torchao's dynamic tensorwise scaling as torchtitan applies it); OFF stays
 * OFF. */
gs_fp8 gs_fp8_resolve(gs_fp8 f, gs_framework resolved);

/* 1 when the FP8 casts of the QKV and MLP-up inputs come out of the norm before them, so that
 * they cost no pass of their own: Transformer Engine's LayerNormLinear and LayerNormMLP, which
 * Megatron-Core's TE layer spec uses, under delayed scaling (current scaling needs the tensor's
 * amax before it can cast, so its cast is a kernel of its own). */
int gs_fp8_cast_fused(gs_fp8 resolved, gs_framework fw);

/* Names as written in scenarios (lower case). */
const char *gs_sharding_name(gs_sharding s);
const char *gs_wrap_name(gs_wrap_kind w);
const char *gs_prefetch_name(gs_prefetch p);
const char *gs_recompute_name(gs_recompute r);
const char *gs_precision_name(gs_precision p);
const char *gs_pipeline_name(gs_pipeline p);
const char *gs_bucket_stages_name(gs_bucket_stages b); /* "all", "first" */
const char *gs_xent_name(gs_xent x);                   /* "unfused", "fused" */
const char *gs_fp8_name(gs_fp8 f);                     /* "off", "delayed", "current", "auto", "mxfp8" */
const char *gs_cp_comm_name(gs_cp_comm c);             /* "p2p", "all_gather", "a2a", "a2a+p2p" */
const char *gs_fp8_amax_algo_name(gs_fp8_amax_algo a); /* "most_recent", "max" */

/* Parse a name; return 0 ok, -1 unknown. */
int gs_sharding_parse(const char *s, gs_sharding *out);
int gs_prefetch_parse(const char *s, gs_prefetch *out);
int gs_recompute_parse(const char *s, gs_recompute *out);
/* One recompute module's bit from its Megatron name ("core_attn", "mla_up_proj", ...; 0 when
 * unknown), bit i's name (NULL past the last), and a mask's names joined by `sep` into buf
 * (Megatron's order; "" for 0). */
uint32_t gs_recompute_module_parse(const char *s);
/* ORs into *mask the modules a text names, separated by commas, blanks, brackets or quotes
 * ("mla_up_proj,mlp", a Megatron dump's "['mla_up_proj', 'mlp']"). 0, or -1 with the first
 * unknown name in bad. */
int gs_recompute_modules_parse(const char *text, uint32_t *mask, char *bad, size_t len);
const char *gs_recompute_module_name(unsigned bit_index);
void gs_recompute_modules_format(uint32_t mask, const char *sep, char *buf, size_t len);
/* 0 when every module in `modules` has something to recompute in a model with latent attention
 * (mla), MoE blocks (moe) and shared experts (shared); else -1 with the reason in why
 * (Megatron-Core refuses mla_up_proj without latent attention and moe_act without grouped
 * experts; gridstep also refuses the MoE modules on a dense model, where they would do nothing). */
int gs_recompute_modules_check(uint32_t modules, int mla, int moe, int shared, char *why, size_t len);
/* The modules selective recompute applies under s (0 unless recompute is selective). */
uint32_t gs_strategy_recompute_modules(const gs_strategy *s);
int gs_precision_parse(const char *s, gs_precision *out);
int gs_pipeline_parse(const char *s, gs_pipeline *out);
int gs_bucket_stages_parse(const char *s, gs_bucket_stages *out);
int gs_xent_parse(const char *s, gs_xent *out);
int gs_fp8_recipe_parse(const char *s, gs_fp8 *out);   /* delayed, current (tensorwise), auto */
int gs_fp8_amax_algo_parse(const char *s, gs_fp8_amax_algo *out);
int gs_cp_comm_parse(const char *s, gs_cp_comm *out);  /* p2p, all_gather (allgather), a2a, a2a+p2p */
const char *gs_moe_dispatcher_name(gs_moe_dispatcher d); /* "alltoall", "allgather", "flex" */
int gs_moe_dispatcher_parse(const char *s, gs_moe_dispatcher *out); /* alltoall, allgather, flex (deepep) */

/* Model chunks a pipeline stage holds over pp stages: virtual_stages under the interleaved
 * schedule (pp > 1), else 1. */
uint64_t gs_strategy_chunks(const gs_strategy *s, uint64_t pp);

/* Facts about a sharding strategy. */
int gs_sharding_shards_params(gs_sharding s);    /* full_shard, zero3, hybrid */
int gs_sharding_shards_grads(gs_sharding s);     /* + shard_grad_op, zero2 */
int gs_sharding_shards_optimizer(gs_sharding s); /* + zero1 */
int gs_sharding_is_fsdp(gs_sharding s);
/* no_shard, zero1, shard_grad_op, full_shard, hybrid_shard can skip the gradient sync until the
 * last micro-batch; zero2 and zero3 reduce every micro-batch. */
int gs_sharding_allows_no_sync(gs_sharding s);          /* flat-parameter units (no_shard, shard_grad_op,
                                                    full_shard, hybrid, zero3) */

#endif
