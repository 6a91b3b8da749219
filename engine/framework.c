/* Framework, compile and attention-kernel names, and the HBM bytes the frameworks' elementwise
 * ops move: fused kernels against eager PyTorch tensor ops, each counted from the code that
 * runs them. e = bytes of the working element (2 for bf16/fp16); fp32 intermediates are 4. */
#include "engine/framework.h"

#include <stddef.h>
#include <strings.h>

#include "engine/strategy.h"

static const char *const framework_names[GS_FW_COUNT] = {
    [GS_FW_AUTO] = "auto",     [GS_FW_MEGATRON] = "megatron", [GS_FW_FSDP1] = "fsdp1",
    [GS_FW_FSDP2] = "fsdp2",   [GS_FW_DEEPSPEED] = "deepspeed",
};

static const char *const attn_names[GS_ATTN_COUNT] = {
    [GS_ATTN_AUTO] = "auto",     [GS_ATTN_UNFUSED] = "unfused", [GS_ATTN_FLASH1] = "flash1",
    [GS_ATTN_FLASH2] = "flash2", [GS_ATTN_FLASH3] = "flash3",   [GS_ATTN_CUDNN] = "cudnn",
    [GS_ATTN_SDPA] = "sdpa",     [GS_ATTN_TRITON] = "triton",   [GS_ATTN_XFORMERS] = "xformers",
};

const char *gs_framework_name(gs_framework f)
{
    return (unsigned)f < GS_FW_COUNT ? framework_names[f] : "?";
}

int gs_framework_parse(const char *s, gs_framework *out)
{
    for (int i = 0; i < GS_FW_COUNT; i++)
        if (strcasecmp(s, framework_names[i]) == 0) {
            *out = (gs_framework)i;
            return 0;
        }
    return -1;
}

const char *gs_attn_impl_name(gs_attn_impl a)
{
    return (unsigned)a < GS_ATTN_COUNT ? attn_names[a] : "?";
}

int gs_attn_impl_parse(const char *s, gs_attn_impl *out)
{
    for (int i = 0; i < GS_ATTN_COUNT; i++)
        if (strcasecmp(s, attn_names[i]) == 0) {
            *out = (gs_attn_impl)i;
            return 0;
        }
    return -1;
}

gs_framework gs_framework_resolve(gs_framework f, int sharding)
{
    if (f != GS_FW_AUTO)
        return f;
    switch ((gs_sharding)sharding) {
    case GS_SHARD_GRAD_OP:
    case GS_SHARD_FULL_SHARD:
    case GS_SHARD_HYBRID_SHARD: return GS_FW_FSDP1;
    case GS_SHARD_ZERO2:
    case GS_SHARD_ZERO3: return GS_FW_DEEPSPEED;
    default: return GS_FW_MEGATRON;
    }
}

int gs_framework_runs(gs_framework resolved, int sharding)
{
    switch (resolved) {
    case GS_FW_FSDP1:
    case GS_FW_FSDP2:
        return sharding == GS_SHARD_NO_SHARD || sharding == GS_SHARD_GRAD_OP || sharding == GS_SHARD_FULL_SHARD ||
               sharding == GS_SHARD_HYBRID_SHARD;
    case GS_FW_DEEPSPEED:
        return sharding == GS_SHARD_NO_SHARD || sharding == GS_SHARD_ZERO1 || sharding == GS_SHARD_ZERO2 ||
               sharding == GS_SHARD_ZERO3;
    default:
        return 1;
    }
}

int gs_framework_tp_overlap(gs_framework resolved)
{
    return resolved == GS_FW_MEGATRON;
}

int gs_framework_gather_copies(gs_framework resolved, int sharding, int torch_fsdp2)
{
    return gs_framework_grad_copies(resolved, sharding, torch_fsdp2) ||
           (resolved == GS_FW_DEEPSPEED && sharding == GS_SHARD_ZERO3);
}

int gs_framework_torch_fsdp2(gs_framework resolved, int sharding, int torch_fsdp2)
{
    return torch_fsdp2 && resolved == GS_FW_MEGATRON &&
           (sharding == GS_SHARD_GRAD_OP || sharding == GS_SHARD_FULL_SHARD);
}

int gs_framework_grad_copies(gs_framework resolved, int sharding, int torch_fsdp2)
{
    int fsdp2 = resolved == GS_FW_FSDP2 || gs_framework_torch_fsdp2(resolved, sharding, torch_fsdp2);
    return fsdp2 &&
           (sharding == GS_SHARD_GRAD_OP || sharding == GS_SHARD_FULL_SHARD || sharding == GS_SHARD_HYBRID_SHARD);
}

int gs_framework_fused(gs_framework resolved, int compiled)
{
    return resolved == GS_FW_MEGATRON || compiled;
}

gs_attn_impl gs_attention_resolve(gs_attn_impl a, gs_framework resolved, int flash_attention,
                                  uint32_t compute_capability)
{
    if (a == GS_ATTN_SDPA)
        return GS_ATTN_FLASH2;
    if (a != GS_ATTN_AUTO)
        return a;
    if (!flash_attention)
        return GS_ATTN_UNFUSED;
    if (resolved == GS_FW_MEGATRON)
        return compute_capability >= 90 ? GS_ATTN_CUDNN : GS_ATTN_FLASH2;
    return GS_ATTN_FLASH2;
}

/* Residual add before a norm: read x and the residual, write the sum (3 e), one kernel fused or
 * not (Megatron's bias-dropout-add writes a 1-byte mask with dropout).
 * The norm, fused (Apex / Transformer Engine / Inductor): read x, write y (2 e).
 * LayerNorm eager: torch.nn.functional.layer_norm is one native kernel (read e, write e).
 * RMSNorm eager (torch.nn.RMSNorm's composite path in torch 2.4-2.6, HF LlamaRMSNorm, fms-fsdp's
 * LayerNormParameterized): x.to(float32) (read e, write 4), pow(2) (read 4, write 4), mean (read
 * 4), x * rsqrt(...) (read 4, write 4), .to(dtype) (read 4, write e), weight * x (read e, write
 * e): 28 + 4 e. */
uint64_t gs_norm_bytes_per_element(int fused, int rms, uint64_t e, int dropout)
{
    uint64_t residual = 3 * e + (dropout ? 1 : 0);
    if (fused || !rms)
        return residual + 2 * e;
    return residual + 28 + 4 * e;
}

/* SwiGLU fused (Megatron's bias_swiglu, Inductor): read gate and up, write the product (3 e).
 * Eager (F.silu(gate) * up): silu reads and writes (2 e), the product reads two and writes one
 * (3 e): 5 e. GELU (F.gelu, Megatron's fused bias-gelu): read, write: 2 e either way. */
uint64_t gs_act_bytes_per_element(int fused, int swiglu, uint64_t e)
{
    if (!swiglu)
        return 2 * e;
    return fused ? 3 * e : 5 * e;
}

/* torchtitan's apply_rotary_emb (and fms-fsdp's complex rotary): xq.float() (read e, write 4),
 * the complex product with freqs_cis (read 4, write 4; the table is broadcast), type_as (read 4,
 * write e): 2 e + 16. Fused (Megatron-Core's fused RoPE, TE, Inductor): read e, write e. */
double gs_rope_bytes_per_element(int fused, uint64_t e)
{
    return fused ? 2.0 * (double)e : 2.0 * (double)e + 16.0;
}

/* Megatron's CoreAttention: baddbmm writes the scaled scores (e), the fused scale-mask-softmax
 * reads them and writes the probabilities (2 e), PV reads them (e): 4 e.
 * HF's eager_attention_forward: matmul writes S (e), "* scaling" (read e, write e), "+
 * causal_mask" (read S and the mask, write: 3 e), softmax(dtype=float32) (read e, write 4),
 * .to(query.dtype) (read 4, write e), PV reads (e): 9 e + 8. */
double gs_unfused_score_bytes(int fused, uint64_t e)
{
    return fused ? 4.0 * (double)e : 9.0 * (double)e + 8.0;
}

int gs_norm_kernels(int fused, int rms)
{
    return fused ? 2 : rms ? 7 : 2;
}

int gs_act_kernels(int fused, int swiglu)
{
    return !fused && swiglu ? 2 : 1;
}

int gs_rope_kernels(int fused)
{
    return fused ? 2 : 6;
}
