/* Attention kernels as their own class: measured efficiencies per (kernel, architecture) at a
 * reference shape, carried to other shapes by three effects of the tiled online-softmax
 * algorithm all FlashAttention-style kernels share:
 *   - per-tile overhead: a CTA loads its Q block, rescales and writes its O block once per KV
 *     sweep, about one KV block's work, so efficiency grows as s / (s + Bc), Bc = 128;
 *   - the causal mask: the kernel skips the blocks above the diagonal (half the schedule's s^2
 *     FLOPs, the convention FlashAttention's benchmarks report), but computes the diagonal
 *     blocks whole: 1 + Bc / s times the useful work;
 *   - the exponential: each score costs 4 hd tensor-core FLOPs (QK^T and PV) and one ex2 on the
 *     MUFU, whose rate is 16 per clock per SM on Volta through Blackwell against 1024 / 2048 /
 *     4096 / 8192 dense 16-bit tensor FLOPs per clock per SM (V100, A100, H100, B200): an exp
 *     costs c = 64 / 128 / 256 / 512 tensor FLOPs ("H100 SXM5 has 989 TFLOPS of FP16 matmul but
 *     only 3.9 TFLOPS of special functions", FlashAttention-3, arXiv 2407.08608, Sec. 3).
 *     Kernels that run the softmax after the GEMMs (FA1, FA2, Triton, xformers) reach
 *     4 hd / (4 hd + c) of what the GEMMs alone would; FA3 and cuDNN overlap it, min(1, 4 hd / c).
 *     Both are taken relative to head dim 128, the reference shape.
 * The measured efficiencies (shared/reference/kernel-facts.csv): FA2 on A100 forward up to 230
 * TFLOP/s (73% of 312), backward up to 63%; FA1 on A100 forward 30-50%, backward 25-35%; FA2's Ampere code path on H100 up to 335 TFLOP/s
 * (34% of 989); FA3 on H100 661 TFLOP/s at {4, 8448, 16, 128} non-causal (Table 2), backward
 * 1.5-1.75x FA2's. On B200 (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training,
 * artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv at bb37575: cuDNN 9.13, torch 2.9
 * nv25.09, batch 1, 128 query and 8 KV heads, head dim 128, causal, 4k-128k tokens) cuDNN's
 * fused attention reaches 856-1419 TFLOP/s forward and 701-1109 backward, PyTorch's FlashAttention-2
 * (SDPA's flash backend) 325-411 and 256-336: Blackwell's kernels keep a larger fixed cost per
 * tile against their faster tensor cores, so their rates climb to twice the sequence length a
 * Hopper kernel needs; each Blackwell entry carries that per-tile cost, in keys, fitted to its
 * sweep (`tile`). [D] marks derived values, [U] kernels without a measurement in the reference,
 * taken as the named class. */
#include "sim/attention.h"

#include <math.h>
#include <string.h>


#define GS_ATTN_BLOCK 128.0       /* Bc, keys per tile (FlashAttention-2's 128 x 64/128 tiles) */
#define GS_ATTN_REF_HD 128.0      /* head dim of the reference measurements */
#define GS_ATTN_MUFU_PER_CLK 16.0 /* ex2 per clock per SM (NVIDIA A100/H100 whitepapers: 4 SFUs x 4) */

typedef enum arch { ARCH_VOLTA, ARCH_AMPERE, ARCH_HOPPER, ARCH_BLACKWELL, ARCH_COUNT } arch;

typedef struct measured {
    double fwd, bwd; /* fraction of the dense peak */
    double seq;      /* reference sequence length, tokens */
    int overlapped;
    double tile;     /* per-tile overhead, keys (0: GS_ATTN_BLOCK) */
} measured;

/* FA2 on Ampere: 230 / 312 forward, 0.63 backward, the maxima of the paper's 512-16k sweep. */
#define FA2_AMPERE {230.0 / 312.0, 0.63, 16384.0, 0}
/* FA1 on Ampere: the middle of 30-50% and 25-35% (the range spans FlashAttention's 0.x-1.0
 * releases, not only shapes) at the sweep's long end. */
#define FA1_AMPERE {0.40, 0.30, 16384.0, 0}
/* FA2's Ampere path on Hopper: 335 / 989 forward; backward at FA2's own backward/forward ratio on
 * A100 (0.63 / 0.737) [D]. */
#define FA2_HOPPER {335.0 / 989.0, 335.0 / 989.0 * 0.63 / (230.0 / 312.0), 16384.0, 0}
/* FA3 on Hopper: 661 / 989 at s 8448 non-causal; backward 1.625 x FA2's (the middle of
 * 1.5-1.75x) [D]. */
#define FA3_HOPPER {661.0 / 989.0, 1.625 * 335.0 / 989.0 * 0.63 / (230.0 / 312.0), 8448.0, 1}
/* FA1 / Triton / xformers on Hopper: the Ampere values at FA2's Hopper/Ampere ratio of absolute
 * throughput (335 / 230), since they run the same mma.sync instructions [D]. */
#define AMPERE_PATH_ON_HOPPER(f, b) {(f) * (335.0 / 989.0) / (230.0 / 312.0), (b) * (335.0 / 989.0) / (230.0 / 312.0), 16384.0, 0}
/* Blackwell, from the cuDNN-frontend B200 sweep (4k-128k, causal): efficiency
 * e_inf x s / (s + tile) / (1 + 128 / s) of the 2,250 TFLOP/s peak, e_inf and one tile per
 * kernel fitted by least squares on the log rates, forward and backward together, given at the
 * reference length 8192 (the sweep's rates within 9% for cuDNN, 2% for FA2):
 * cuDNN 9.13: e_inf 0.6463 forward, 0.5128 backward, tile 2228 keys [D];
 * PyTorch SDPA's FlashAttention-2: 0.1869, 0.1513, tile 1064 [D]. */
#define BW_AT_8K(e, tile) ((e) * 8192.0 / (8192.0 + (tile)))
#define CUDNN_BLACKWELL {BW_AT_8K(0.6463, 2228.0), BW_AT_8K(0.5128, 2228.0), 8192.0, 1, 2228.0}
#define FA2_BLACKWELL {BW_AT_8K(0.1869, 1064.0), BW_AT_8K(0.1513, 1064.0), 8192.0, 0, 1064.0}
/* FA1 / Triton / xformers on Blackwell: the Ampere values at FA2's Blackwell/Ampere ratio of
 * absolute throughput at 16k (394.5 / 230 forward, the sweep's PyTorch FA2 row), the same
 * mma.sync path, with FA2's tile [D]. */
#define AMPERE_PATH_ON_BLACKWELL(f, b) {(f) * (394.495 / 2250.0) / (230.0 / 312.0), (b) * (394.495 / 2250.0) / (230.0 / 312.0), 16384.0, 0, 1064.0}

static const measured table[GS_ATTN_COUNT][ARCH_COUNT] = {
    [GS_ATTN_FLASH2] = {[ARCH_AMPERE] = FA2_AMPERE, [ARCH_HOPPER] = FA2_HOPPER, [ARCH_BLACKWELL] = FA2_BLACKWELL},
    [GS_ATTN_FLASH1] = {[ARCH_AMPERE] = FA1_AMPERE, [ARCH_HOPPER] = AMPERE_PATH_ON_HOPPER(0.40, 0.30),
                        [ARCH_BLACKWELL] = AMPERE_PATH_ON_BLACKWELL(0.40, 0.30)},
    /* Triton FlashAttention and xformers' CUTLASS kernel: FA1's class [U] */
    [GS_ATTN_TRITON] = {[ARCH_AMPERE] = FA1_AMPERE, [ARCH_HOPPER] = AMPERE_PATH_ON_HOPPER(0.40, 0.30),
                        [ARCH_BLACKWELL] = AMPERE_PATH_ON_BLACKWELL(0.40, 0.30)},
    [GS_ATTN_XFORMERS] = {[ARCH_AMPERE] = FA1_AMPERE, [ARCH_HOPPER] = AMPERE_PATH_ON_HOPPER(0.40, 0.30),
                          [ARCH_BLACKWELL] = AMPERE_PATH_ON_BLACKWELL(0.40, 0.30)},
    /* FA3 is Hopper-only; on Ampere the library runs FA2. Blackwell: the Hopper figure [U]. */
    [GS_ATTN_FLASH3] = {[ARCH_AMPERE] = FA2_AMPERE, [ARCH_HOPPER] = FA3_HOPPER, [ARCH_BLACKWELL] = FA3_HOPPER},
    /* cuDNN's fused attention (Transformer Engine's default): FA2's class on Ampere [U], FA3's on
     * Hopper (the same TMA / wgmma / warp-specialized design) [U], measured on Blackwell. */
    [GS_ATTN_CUDNN] = {[ARCH_AMPERE] = FA2_AMPERE, [ARCH_HOPPER] = FA3_HOPPER, [ARCH_BLACKWELL] = CUDNN_BLACKWELL},
};

static arch arch_of(uint32_t cc)
{
    return cc < 80 ? ARCH_VOLTA : cc < 90 ? ARCH_AMPERE : cc < 100 ? ARCH_HOPPER : ARCH_BLACKWELL;
}

/* Dense 16-bit tensor FLOPs per clock per SM (architecture whitepapers: V100 8 tensor cores x 64
 * FMA x 2; A100 4 x 256 x 2; H100 twice A100 per SM per clock; B200 twice H100). */
static double tensor_flops_per_clk(arch a)
{
    static const double f[ARCH_COUNT] = {1024.0, 2048.0, 4096.0, 8192.0};
    return f[a];
}

void gs_attn_model_init(gs_attn_model *m, gs_attn_impl impl, const gs_gpu *g)
{
    arch a = arch_of(g->compute_capability);
    memset(m, 0, sizeof *m);
    if (impl == GS_ATTN_AUTO || impl == GS_ATTN_SDPA)
        impl = GS_ATTN_FLASH2;
    if (a == ARCH_VOLTA)
        impl = GS_ATTN_UNFUSED; /* no FlashAttention kernel runs before sm80 (sm75 for FA1) */
    m->impl = impl;
    m->exp_cost = tensor_flops_per_clk(a) / GS_ATTN_MUFU_PER_CLK;
    if (impl == GS_ATTN_UNFUSED)
        return;
    const measured *t = &table[impl][a];
    m->fwd_eff = t->fwd;
    m->bwd_eff = t->bwd;
    m->ref_seq = t->seq;
    m->tile = t->tile > 0.0 ? t->tile : GS_ATTN_BLOCK;
    m->overlapped = t->overlapped;
    m->known = t->fwd > 0.0;
}

/* The exponential's share, relative to head dim 128. */
static double hd_factor(const gs_attn_model *m, double hd)
{
    double c = m->exp_cost, w = 4.0 * hd, w0 = 4.0 * GS_ATTN_REF_HD;
    if (m->overlapped)
        return fmin(1.0, w / c) / fmin(1.0, w0 / c);
    return (w / (w + c)) / (w0 / (w0 + c));
}

double gs_attn_efficiency(const gs_attn_model *m, double hd, double s, int bwd)
{
    if (!m->known || !(hd > 0.0) || !(s > 0.0))
        return 0.0;
    double base = bwd ? m->bwd_eff : m->fwd_eff;
    double tile = (s / (s + m->tile)) / (m->ref_seq / (m->ref_seq + m->tile));
    double e = base * tile * hd_factor(m, hd);
    return e < 1.0 ? e : 1.0;
}

double gs_attn_fused_time(const gs_attn_model *m, const gs_event *e, double peak_flops)
{
    if (!m->known || e->op != GS_OP_ATTN)
        return -1.0;
    int bwd = e->phase == GS_PHASE_BWD;
    double s = (double)e->gemm_n, hd = (double)e->gemm_k;
    /* the schedule counts 4 s^2 hd per head forward, twice that backward (Megatron's formula);
     * the kernel's forward under the causal mask does half of it plus the diagonal blocks */
    double fwd_counted = bwd ? e->flops / 2.0 : e->flops;
    double kernel = fwd_counted * 0.5 * (1.0 + GS_ATTN_BLOCK / s);
    if (bwd)
        kernel *= 2.5; /* FlashAttention's backward: 5 GEMMs against the forward's 2 */
    double eff = gs_attn_efficiency(m, hd, s, bwd);
    if (!(eff > 0.0) || !(peak_flops > 0.0))
        return -1.0;
    return kernel / (peak_flops * eff);
}
