/* The training framework a scenario runs under (Megatron-LM, PyTorch FSDP1 / FSDP2, DeepSpeed),
 * whether torch.compile fuses its elementwise ops, and which attention kernel it calls: the
 * choices that decide how many bytes each elementwise op moves through HBM and which attention
 * kernel class times the attention core.
 *
 * A framework here is a set of implementation facts read from its source (each function below
 * cites the code it follows), not a tuning knob: fused kernels (Megatron-Core with Transformer
 * Engine, Apex; torch.compile's Inductor) read and write each tensor about once per op, eager
 * PyTorch modules run one CUDA kernel per tensor op, each a pass over HBM.
 *
 * Ownership: plain enums and pure functions; name tables are static. */
#ifndef GS_FRAMEWORK_H
#define GS_FRAMEWORK_H

#include <stdint.h>

typedef enum gs_framework {
    GS_FW_AUTO = 0,  /* fsdp1 for the FSDP shardings, deepspeed for zero2 and zero3, megatron for
                        no_shard and zero1 (its distributed optimizer) */
    GS_FW_MEGATRON,  /* Megatron-LM / Megatron-Core (fused kernels, TE on Hopper) */
    GS_FW_FSDP1,     /* PyTorch FSDP (FlatParameter), eager modules unless compile */
    GS_FW_FSDP2,     /* PyTorch fully_shard (per-parameter DTensor), eager unless compile */
    GS_FW_DEEPSPEED, /* DeepSpeed ZeRO / pipeline engine with eager PyTorch modules */
    GS_FW_COUNT
} gs_framework;

/* The attention kernel (the scenario's strategy.attention). AUTO picks from the framework and
 * the GPU (gs_attention_resolve). */
typedef enum gs_attn_impl {
    GS_ATTN_AUTO = 0,
    GS_ATTN_UNFUSED,  /* QK^T and PV as batched GEMMs, the s x s scores through HBM */
    GS_ATTN_FLASH1,   /* FlashAttention (v1) */
    GS_ATTN_FLASH2,   /* FlashAttention-2 (also PyTorch SDPA's flash backend) */
    GS_ATTN_FLASH3,   /* FlashAttention-3 (Hopper: TMA, warp specialization, wgmma) */
    GS_ATTN_CUDNN,    /* cuDNN fused attention (Transformer Engine's default on Hopper) */
    GS_ATTN_SDPA,     /* torch.nn.functional.scaled_dot_product_attention (flash backend) */
    GS_ATTN_TRITON,   /* Triton FlashAttention (MPT's attn_impl: triton) */
    GS_ATTN_XFORMERS, /* xformers memory-efficient attention (CUTLASS) */
    GS_ATTN_COUNT
} gs_attn_impl;

const char *gs_framework_name(gs_framework f);
int gs_framework_parse(const char *s, gs_framework *out); /* 0 ok, -1 unknown */
const char *gs_attn_impl_name(gs_attn_impl a);
int gs_attn_impl_parse(const char *s, gs_attn_impl *out); /* 0 ok, -1 unknown */

/* The framework AUTO stands for: FSDP1 for shard_grad_op, full_shard and hybrid_shard (the
 * PyTorch FSDP strategy names), DeepSpeed for zero2 and zero3 (Megatron has neither), Megatron
 * for no_shard and zero1. `sharding` is a gs_sharding. */
gs_framework gs_framework_resolve(gs_framework f, int sharding);

/* 1 when the framework runs sharding `sharding` (a gs_sharding) under a name of its own:
 * PyTorch FSDP1 and FSDP2 run no_shard (DDP), shard_grad_op (FSDP2: reshard_after_forward
 * False), full_shard and hybrid_shard; DeepSpeed runs ZeRO stages 0-3 (no_shard, zero1-3);
 * Megatron-LM runs every one (DDP, the distributed optimizer, torch FSDP2 through
 * --use-torch-fsdp2, Megatron-FSDP's optim / optim_grads / optim_grads_params and its HSDP).
 * AUTO runs every one. */
int gs_framework_runs(gs_framework resolved, int sharding);

/* 1 when the framework overlaps the TP exchanges with the GEMMs through Transformer Engine's
 * userbuffers (strategy.tp_comm_overlap): Megatron-LM (--tp-comm-overlap) alone. */
int gs_framework_tp_overlap(gs_framework resolved);

/* The copies a sharding framework runs on the compute stream around its collectives
 * (engine/roles.h GS_ROLE_UNIT_COPY_OUT, GS_ROLE_GRAD_COPY_IN):
 * - gather copies: a gathered unit copied out of the collective's flat buffer into its
 *   parameters when a layer first uses it: PyTorch FSDP2 (fully_shard: the fsdp2 framework's
 *   shard_grad_op, full_shard, hybrid_shard) and DeepSpeed ZeRO-3, whose coalesced all-gather's
 *   wait() torch.cat's each parameter out of the gathered partitions
 *   (deepspeed/runtime/zero/partition_parameters.py AllGatherCoalescedHandle.wait);
 * - gradient copies: FSDP2 alone, whose foreach_reduce copies the gradients into the
 *   reduce-scatter's input on the compute stream (DeepSpeed copies into its bucket on its
 *   reduce_and_partition_stream, beside the compute).
 * FSDP1's flat parameter, and Megatron-LM's sharding, built as Megatron-FSDP's (the Megatron
 * launcher emits full_shard as --use-megatron-fsdp), gather into and reduce from the storage
 * itself; Megatron-LM's --use-torch-fsdp2 (torch_fsdp2 1, megatron/core/distributed/
 * torch_fully_sharded_data_parallel.py: fully_shard on each transformer layer) copies as FSDP2
 * does. */
int gs_framework_gather_copies(gs_framework resolved, int sharding, int torch_fsdp2);
/* 1 when strategy.torch_fsdp2 takes effect: Megatron-LM (resolved framework megatron) with a
 * sharding --use-torch-fsdp2 runs (full_shard, shard_grad_op). A planner's candidate of another
 * sharding keeps the base's key and runs as Megatron-LM runs that sharding. */
int gs_framework_torch_fsdp2(gs_framework resolved, int sharding, int torch_fsdp2);
int gs_framework_grad_copies(gs_framework resolved, int sharding, int torch_fsdp2);

/* 1 when the framework's elementwise ops run as fused kernels: Megatron always (TE / Apex /
 * its fused kernels), the others only with torch.compile. */
int gs_framework_fused(gs_framework resolved, int compiled);

/* The attention kernel AUTO stands for, and the kernel a named one runs as: no flash attention
 * -> UNFUSED; Megatron -> CUDNN on Hopper and later (compute capability >= 90, TE's default
 * backend) and FLASH2 before; the PyTorch frameworks -> SDPA; SDPA's flash backend is
 * FlashAttention-2 (torch 2.2 and later: "FlashAttention-2 ... as the default SDPA backend").
 * An explicit choice is kept. */
gs_attn_impl gs_attention_resolve(gs_attn_impl a, gs_framework resolved, int flash_attention,
                                  uint32_t compute_capability);

/* HBM bytes per element of one transformer block's elementwise events, forward (the backward
 * events move twice as much, as every elementwise op does in the builder). `e` is the working
 * element size (2 bf16/fp16, 4 fp32); rms: 1 for RMSNorm, 0 for LayerNorm; dropout adds the
 * 1-byte mask of the fused bias-dropout-add. */
uint64_t gs_norm_bytes_per_element(int fused, int rms, uint64_t e, int dropout);
uint64_t gs_act_bytes_per_element(int fused, int swiglu, uint64_t e);

/* HBM bytes per rotated element of q and k for the rotary embedding (forward): fused 2 e (read,
 * write); eager the passes of torchtitan's / HF's apply_rotary_emb. */
double gs_rope_bytes_per_element(int fused, uint64_t e);

/* HBM bytes per s x s score element of unfused attention, forward, without dropout: Megatron's
 * fused scale-mask-softmax 4 e; eager PyTorch (HF eager_attention_forward) 8 e + 8. */
double gs_unfused_score_bytes(int fused, uint64_t e);

/* Kernels one forward elementwise event launches, counted from the same code as the bytes above
 * (its backward launches twice as many: every op's gradient is about two kernels):
 * - a norm event with its residual add: fused 2 (the add or Megatron's bias-dropout-add, then the
 *   norm); eager RMSNorm 1 + 6 (the add, then x.float(), pow, mean, x * rsqrt, .to(dtype),
 *   weight *); eager LayerNorm 2 (the add, F.layer_norm);
 * - the activation: fused 1; eager SwiGLU 2 (F.silu, the product); GELU 1;
 * - the rotary embedding of q and k: fused 2 (one kernel each); eager 6 (.float(), the complex
 *   product, type_as, each for q and for k). */
int gs_norm_kernels(int fused, int rms);
int gs_act_kernels(int fused, int swiglu);
int gs_rope_kernels(int fused);

#endif
