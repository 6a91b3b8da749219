/* Compute cost model: the roofline time of a compute event, with a shape-dependent GEMM efficiency
 * built from the effects cuBLAS/CUTLASS kernels show (tile quantization, wave quantization,
 * split-K, the fixed per-tile cost that short K cannot amortize, operand alignment), capped by the
 * GPU's measured large-GEMM efficiency (MAMF / spec).
 *
 * References: "ref X.Y" = shared/reference/hardware-and-models.md section X.Y; marks as there:
 * [S] secondary source, [U] unverified or an estimate to calibrate with the exec backend's cuBLAS
 * sweep, [D] derived arithmetic. Units: FLOP/s, bytes, bytes/s, seconds; GEMM dims in elements. */
#include "sim/compute.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "engine/roles.h"
#include "sim/calib.h"

/* ------------------------------------------------------------------ calibration factors ----- */

/* Achievable fraction of HBM bandwidth for streaming (elementwise) kernels. Measured copy and
 * triad kernels reach about 87-88% of the datasheet figure: cub::DeviceTransform babelstream
 * 87-88% at 2^24-2^28 elements (NVIDIA/cccl#9881), A100 40GB memcopy 1355 of 1555 GB/s = 87%
 * (PTsolvers/gpu-workshop-JuliaCon23#7) [S]. Framework elementwise kernels (norms, activations,
 * AdamW) are less tuned than a STREAM kernel: rounded down to 0.85 [U]. */
#define GS_HBM_EFFICIENCY 0.85

/* Per-kernel launch overhead as the GPU sees it when the host runs ahead of it (back-to-back
 * asynchronous launches): "a few microseconds" per launch (torchedup.dev kernel-launch-overhead;
 * NVIDIA's "Getting Started with CUDA Graphs" blog measures per-kernel launch cost in the low
 * microseconds [U]). 3 us is an estimate to calibrate [U]. */
#define GS_LAUNCH_S 3e-6

/* CPU time the training process's host thread spends to issue one CUDA kernel from eager
 * PyTorch: the Python call, the dispatcher and cudaLaunchKernel. 8 us per op: torch.add on
 * 512 x 512 CUDA tensors issued back to back, the host's time per op with one synchronisation at
 * the end, on an NVIDIA A100 machine (flagos-ai/Torch-FL pull request 27, "cuda_sub" column);
 * PyTorch's own issue 41383 measures 5-7 us per op on CPU tensors (no launch), about half of it
 * Python parsing (ngimel, ibid.). Megatron (Transformer Engine's modules are Python too) and
 * torch.compile's generated wrapper launch through the same path: one figure per kernel, and the
 * frameworks differ in how many kernels they launch (engine/framework.h). Autograd's backward
 * skips the Python part but not the dispatcher and the launch: counted alike [U]. */
#define GS_HOST_KERNEL_S 8e-6

/* Grace (Arm Neoverse V2) issues PyTorch's ops more slowly than the DGX nodes' Xeons: a
 * torch.nn.Linear forward's host time is 33.17 us on GH200 and 37.08 us on GB200 against 13.48 us
 * on a DGX H100 (Xeon Platinum 8480C), 2.46x and 2.75x (NVIDIA/TransformerEngine issue 2053,
 * bf16, hidden 2048, 8192 tokens); their mean. */
#define GS_HOST_GRACE_FACTOR 2.6

/* Compute slowdown while communication kernels run on the same GPU: NCCL kernels hold SMs
 * (about 15% of the SMs while a collective runs, NVIDIA/nccl#1432) and move HBM bytes: "NVLink
 * traffic costs 2-3x its bytes in HBM reads and writes" (NCCL maintainer, NVIDIA/nccl#1428, where
 * one A100 GEMM went from 1.18 to 2.08 ms under an overlapped all-gather). gridstep charges a
 * compute event that starts beside a collective for the C channels (one CTA each) the NCCL
 * kernel holds for as long as it runs, network-bound or not, and for the k B of HBM traffic it
 * makes (k HBM bytes per bus byte, GS_NCCL_HBM_PER_BYTE, fitted; B the collective's bus bandwidth
 * per GPU): gs_compute_overlap_factors, whose form and energy per byte were measured on one H200
 * at its 700 W cap (tests/gpu/contention.cu, tests/data/h200-contention-2026-12-04.csv): a
 * cuBLASLt GEMM beside 8, 16 and 32 CTAs that only spin runs 1.05, 1.14 and 1.25 times slower
 * (SMs / (SMs - C): 1.06, 1.14, 1.32); beside CTAs that copy, slower again by the cube root of the
 * power their traffic takes from the cap, at 155 pJ per HBM byte (135-189 over 20 windows, bf16
 * and FP8 alike); a memory-bound kernel loses nothing to the SMs and shares the HBM (its rate
 * plus the copy's stays within 1.5% of its rate alone). GS_OVERLAP_SLOWDOWN caps both (2.08 /
 * 1.18 = 1.76, the measured worst case). k fitted (gridstep validate --fit) on the 403 published
 * runs: 3.77. */
#define GS_COMM_J_PER_HBM_BYTE 155e-12
#define GS_NCCL_HBM_PER_BYTE 3.77

/* The GEMM throughput a training step sustains, as a fraction of the GPU's MAMF (ref 1.2: the
 * best shape of a brute-force search, one GPU, 100 timed iterations): a step's GEMMs run on
 * every GPU of a node at its power limit for minutes, between other kernels, at the shapes the
 * model has. Fitted (gridstep validate --fit) on the 403 published runs: 0.804; doc/accuracy.md
 * gives the fit and its leave-one-source-out error. */
#define GS_GEMM_SUSTAINED 0.804
#define GS_OVERLAP_SLOWDOWN 1.76

/* Non-GEMM FLOPs (elementwise, norms, softmax, the optimizer) run on the CUDA cores, not the
 * tensor cores: FP32 non-tensor over BF16 tensor dense is 19.5/312 = 1/16 on A100 and
 * 66.9/989.4 = 1/14.8 on H100 (ref 1.1) [D]. Such kernels are memory bound (about 1 FLOP/B
 * against a CUDA-core ridge near 10 FLOP/B), so this factor rarely binds. */
#define GS_VECTOR_FRACTION (1.0 / 16.0)

/* -------------------------------------------------------------- host (CPU offload) ----- */

/* The optimizer under CPU offload runs on the host, one shard per GPU rank, all ranks of a node
 * at once: each rank gets 1/8 of the node's DRAM bandwidth and cores. Hosts are the DGX ones of
 * each generation (estimates from the public CPU specs [U]):
 *   Volta   DGX-1:     2 x Xeon E5-2698 v4 (20 cores, 2.2 GHz, AVX2 32 FP32 FLOP/cycle),
 *                      4 ch DDR4-2400 per socket: 153.6 GB/s, 2.82 TFLOP/s peak;
 *   Ampere  DGX A100:  2 x EPYC 7742 (64 cores, 2.25 GHz, AVX2 32 FLOP/cycle),
 *                      8 ch DDR4-3200 per socket: 409.6 GB/s, 9.22 TFLOP/s;
 *   Hopper+ DGX H100:  2 x Xeon 8480C (56 cores, 2.0 GHz, AVX-512 64 FLOP/cycle),
 *                      8 ch DDR5-4800 per socket: 614.4 GB/s, 14.3 TFLOP/s.
 * Achievable: STREAM-like 70% of peak DRAM bandwidth, half the vector peak for a fused AdamW
 * (DeepSpeed's CPU-Adam is AVX-vectorized) [U]. AdamW is memory bound on the host too (about
 * 0.4 FLOP/B), so host_bw is the number that matters. */
#define GS_HOST_GPUS_PER_NODE 8.0
#define GS_HOST_BW_EFFICIENCY 0.70
#define GS_HOST_FLOPS_EFFICIENCY 0.50

/* ------------------------------------------------------------------- GEMM shape model ----- */

/* Thread-block tiles (rows of C x columns of C) the library can choose from, with the
 * throughput each reaches on a large problem relative to the biggest tiles. CUTLASS/cuBLAS's
 * fastest Ampere/Hopper BF16 kernels use 128x256 and 256x128 tiles (ref 6.6); smaller tiles
 * re-read operands more often (a tile's operand reuse is tm*tn/(tm+tn): 85 for 128x256, 64 for
 * 128x128, 43 for 64x128, 32 for 64x64) and reach less, but quantize less ("the largest Tile
 * Shape for the most reuse ... a large Tile Shape might not be able to reach full GPU
 * utilization because of quantization effects", CUTLASS maintainers, NVIDIA/cutlass#396). The
 * relative rates are estimates to calibrate [U]. Like cuBLAS's heuristic, the model takes the
 * tile (and split-K) with the best predicted efficiency. */
typedef struct gs_tile {
    uint32_t m, n;   /* elements */
    double rate;     /* large-problem throughput relative to 128x256 */
} gs_tile;

static const gs_tile gemm_tiles[] = {
    {128, 256, 1.00}, {256, 128, 1.00}, {128, 128, 0.92},
    {128, 64, 0.80},  {64, 128, 0.80},  {64, 64, 0.60},
};

/* Fixed cost of one tile outside its K loop (pipeline fill of the multi-stage operand loads,
 * epilogue writing C), in K elements: about two 32-deep k-iterations of the Ampere 128x256x32
 * 3-stage kernels [U]. A tile's mainloop efficiency is K / (K + K0): 0.98 at K = 4096, 0.89 at
 * K = 512, 0.67 at the K = 128 of attention with head dim 128. */
#define GS_GEMM_K_OVERHEAD 64.0

/* Split-K: when a plain GEMM has fewer tiles than SMs, cuBLAS splits K across thread blocks and
 * reduces the fp32 partials afterwards (NVIDIA/cutlass#396: split-K for small M x N, large K).
 * Each split keeps at least this many K elements [U]. */
#define GS_SPLITK_MIN_K 256u

/* Tensor-core operand alignment: leading dimensions (K and N for y = x W^T and for both of its
 * backward GEMMs) must be multiples of 16 bytes, 8 elements of 16-bit data (ref 6.6); otherwise
 * cuBLAS falls back to kernels with narrow loads. The penalty is an estimate [U]. */
#define GS_ALIGN_ELEMENTS 8u
#define GS_MISALIGNED_FACTOR 0.5

static double ceil_div_d(uint64_t a, uint64_t b)
{
    return (double)(a / b + (a % b != 0));
}

uint64_t gs_gemm_waves(uint64_t tiles, uint32_t sms)
{
    uint64_t s = sms ? sms : 1;
    return tiles / s + (tiles % s != 0);
}

/* tiles / (waves x sms), with tiles possibly beyond 2^64 (batched attention at scale): a double
 * count, exact below 2^53, where the integer path runs. */
static double wave_efficiency(double tiles, uint32_t sms)
{
    double s = sms ? (double)sms : 1.0;
    if (tiles <= 0.0)
        return 1.0;
    double waves = tiles < 9007199254740992.0 ? (double)gs_gemm_waves((uint64_t)tiles, sms) : ceil(tiles / s);
    return tiles / (waves * s);
}

/* A tile's mainloop efficiency K / (K + K0 x speed): the fixed per-tile cost is a time, so a
 * kernel whose mainloop runs `speed` times the bf16 rate (FP8) covers speed x K0 elements of K
 * in it. */
static double k_efficiency(double k, double speed)
{
    return k / (k + GS_GEMM_K_OVERHEAD * speed);
}

/* The shape factor (<= 1) of one tile choice, the best split-K included, for a kernel whose
 * mainloop runs `speed` times the bf16 one (1 for bf16, the FP8 rate over the bf16 rate for FP8). */
static double tile_factor(const gs_compute_model *m, const gs_tile *t, uint64_t M, uint64_t N, uint64_t K,
                          uint64_t batch, double speed)
{
    double tm = ceil_div_d(M, t->m), tn = ceil_div_d(N, t->n);
    /* Tile quantization: useful area over the padded area of the tiles that cover C. */
    double tile_q = ((double)M * (double)N) / (tm * t->m * tn * t->n);
    double tiles = tm * tn * (double)batch;
    double best = t->rate * tile_q * wave_efficiency(tiles, m->sms) * k_efficiency((double)K, speed);
    if (batch > 1 || tiles >= (double)m->sms)
        return best;
    /* Split-K over the idle SMs. */
    uint64_t by_sms = (uint64_t)((double)m->sms / tiles);
    uint64_t by_k = K / GS_SPLITK_MIN_K;
    uint64_t max_split = by_sms < by_k ? by_sms : by_k;
    for (uint64_t s = 2; s <= max_split; s++) {
        double f = t->rate * tile_q * wave_efficiency(tiles * (double)s, m->sms) * k_efficiency(ceil_div_d(K, s), speed);
        /* The reduction: s fp32 partials of C written and read back, at streaming bandwidth,
         * against the mainloop's time at this efficiency. */
        double flops_rate = speed * m->peak_flops * m->gemm_efficiency * f;
        double bytes_rate = m->hbm_bw * m->hbm_efficiency;
        if (flops_rate > 0.0 && bytes_rate > 0.0) {
            double t_main = 2.0 * (double)M * (double)N * (double)K / flops_rate;
            double t_reduce = 8.0 * (double)s * (double)M * (double)N / bytes_rate;
            f *= t_main / (t_main + t_reduce);
        }
        if (f > best)
            best = f;
    }
    return best;
}

/* The best tile's shape factor times the GPU's GEMM efficiency, for a mainloop at `speed`. */
static double gemm_efficiency_at(const gs_compute_model *m, uint64_t M, uint64_t N, uint64_t K, uint64_t batch,
                                 double speed)
{
    if (M == 0 || N == 0 || K == 0)
        return m->gemm_efficiency;
    if (batch == 0)
        batch = 1;
    double best = 0.0;
    for (size_t i = 0; i < sizeof gemm_tiles / sizeof gemm_tiles[0]; i++) {
        double f = tile_factor(m, &gemm_tiles[i], M, N, K, batch, speed);
        if (f > best)
            best = f;
    }
    if (N % GS_ALIGN_ELEMENTS != 0 || K % GS_ALIGN_ELEMENTS != 0)
        best *= GS_MISALIGNED_FACTOR;
    return m->gemm_efficiency * best;
}

double gs_gemm_efficiency(const gs_compute_model *m, uint64_t M, uint64_t N, uint64_t K, uint64_t batch)
{
    return gemm_efficiency_at(m, M, N, K, batch, 1.0);
}

double gs_fp8_gemm_shape(const gs_compute_model *m, uint64_t M, uint64_t N, uint64_t K, uint64_t batch)
{
    double bf16 = m->peak_flops * m->gemm_efficiency;
    if (!(bf16 > 0.0) || !(m->fp8_peak_flops > 0.0))
        return 1.0;
    double speed = m->fp8_peak_flops * m->fp8_gemm_efficiency / bf16;
    return gemm_efficiency_at(m, M, N, K, batch, speed) / m->gemm_efficiency;
}

/* ------------------------------------------------------------------------------ model ----- */

void gs_compute_model_init(gs_compute_model *m, const gs_gpu *g, gs_precision p)
{
    memset(m, 0, sizeof *m);
    m->peak_flops = gs_gpu_peak_flops(g, p);
    /* A dtype without tensor-core support (BF16 on V100) runs on the CUDA cores, at about the
     * FP32 rate (ref 1.1 V100 row: 15.7 TFLOP/s). */
    if (m->peak_flops <= 0.0)
        m->peak_flops = g->peak_flops_fp32;
    /* under a power cap the SM clock, and with it every FLOP rate, drops (gs_gpu_clock_factor) */
    m->peak_flops *= gs_gpu_clock_factor(g);
    m->gemm_mamf = g->gemm_efficiency;
    m->gemm_efficiency = g->gemm_efficiency * GS_GEMM_SUSTAINED;
    m->hbm_bw = g->hbm_bw;
    m->hbm_efficiency = GS_HBM_EFFICIENCY;
    m->launch_s = GS_LAUNCH_S;
    m->norm_kernels = gs_norm_kernels(1, 1);
    m->act_kernels = gs_act_kernels(1, 1);
    m->rope_kernels = gs_rope_kernels(1);
    m->overlap_slowdown = GS_OVERLAP_SLOWDOWN;
    m->overlap_hbm_per_byte = GS_NCCL_HBM_PER_BYTE;
    m->power_w = g->power_w > 0.0 ? g->power_w : g->tdp_w;
    m->sms = g->sms;

    double node_bw, node_flops; /* host DRAM bytes/s and vector FLOP/s, peak, per node */
    if (g->compute_capability < 80) {
        node_bw = 2.0 * 4.0 * 19.2e9;
        node_flops = 2.0 * 20.0 * 2.2e9 * 32.0;
    } else if (g->compute_capability < 90) {
        node_bw = 2.0 * 8.0 * 25.6e9;
        node_flops = 2.0 * 64.0 * 2.25e9 * 32.0;
    } else {
        node_bw = 2.0 * 8.0 * 38.4e9;
        node_flops = 2.0 * 56.0 * 2.0e9 * 64.0;
    }
    m->host_bw = node_bw * GS_HOST_BW_EFFICIENCY / GS_HOST_GPUS_PER_NODE;
    m->host_flops = node_flops * GS_HOST_FLOPS_EFFICIENCY / GS_HOST_GPUS_PER_NODE;
}

void gs_fit_params_defaults(gs_fit_params *p)
{
    p->overlap_hbm_per_byte = GS_NCCL_HBM_PER_BYTE;
    p->gemm_sustained = GS_GEMM_SUSTAINED;
}

void gs_compute_model_fit(gs_compute_model *m, const gs_fit_params *p)
{
    if (p->gemm_sustained > 0.0) {
        m->gemm_efficiency = m->gemm_mamf * p->gemm_sustained;
        m->fp8_gemm_efficiency = m->fp8_gemm_mamf * p->gemm_sustained;
    }
    if (p->overlap_hbm_per_byte > 0.0)
        m->overlap_hbm_per_byte = p->overlap_hbm_per_byte;
}

void gs_compute_overlap_factors(const gs_compute_model *m, double busbw, int ctas, double *tensor, double *memory)
{
    *tensor = *memory = m->overlap_slowdown;
    if (!(m->overlap_hbm_per_byte > 0.0) || !(m->hbm_bw > 0.0))
        return;
    double hbm = m->overlap_hbm_per_byte * busbw, r = m->hbm_bw * m->hbm_efficiency;
    double sm = ctas > 0 && (uint32_t)ctas < m->sms ? (double)m->sms / (double)(m->sms - (uint32_t)ctas) : 1.0;
    double drawn_w = GS_COMM_J_PER_HBM_BYTE * hbm, power = 1.0;
    if (m->power_w > 0.0)
        power = drawn_w < m->power_w ? cbrt(m->power_w / (m->power_w - drawn_w)) : HUGE_VAL;
    double t = sm * power, mem = hbm < r ? r / (r - hbm) : HUGE_VAL;
    *tensor = t < m->overlap_slowdown ? t : m->overlap_slowdown;
    *memory = mem < m->overlap_slowdown ? mem : m->overlap_slowdown;
}

void gs_compute_model_rope(gs_compute_model *m, const gs_model *model, gs_precision p)
{
    m->rope_cols = 0.0;
    m->rope_elem_bytes = 0.0;
    if (model->pos != GS_POS_ROPE || model->nominal_params || !model->heads)
        return;
    double a = (double)model->heads, kv = (double)(model->kv_heads ? model->kv_heads : model->heads);
    m->rope_cols = (a + kv) / (a + 2.0 * kv);
    m->rope_elem_bytes = (double)gs_precision_bytes(p);
}

static int is_gemm(const gs_event *e);
static double roofline(double flops, double bytes, double flops_rate, double bytes_rate);
static double rope_time(const gs_compute_model *m, const gs_event *e);
static int gemm_launches(const gs_event *e);

void gs_compute_model_for_scenario(gs_compute_model *m, const gs_scenario *s)
{
    const gs_strategy *st = &s->strategy;
    gs_framework fw = gs_framework_resolve(st->framework, (int)st->sharding);
    gs_compute_model_init(m, &s->cluster.gpu, st->precision);
    gs_compute_model_rope(m, &s->model, st->precision);
    /* eager rotary embedding: its passes over the rotated elements, in units of the fused
     * read + write (rope_time charges 2 x rope_elem_bytes per element) */
    int fused = gs_framework_fused(fw, st->compile);
    if (m->rope_cols > 0.0)
        m->rope_elem_bytes = gs_rope_bytes_per_element(fused, gs_precision_bytes(st->precision)) / 2.0;
    /* the kernels the framework launches, and the host thread that issues them */
    m->norm_kernels = gs_norm_kernels(fused, s->model.norm == GS_NORM_RMSNORM);
    m->act_kernels = gs_act_kernels(fused, s->model.mlp == GS_MLP_SWIGLU);
    m->rope_kernels = gs_rope_kernels(fused);
    m->host_kernel_s = GS_HOST_KERNEL_S * (s->cluster.host_cpu == GS_HOST_GRACE ? GS_HOST_GRACE_FACTOR : 1.0);
    m->cuda_graphs = st->cuda_graphs && fw == GS_FW_MEGATRON; /* what Megatron captures (the loader refuses
                                                                 it elsewhere; sweep may set it) */
    gs_attn_model_init(&m->attn,
                       gs_attention_resolve(st->attention, fw, st->flash_attention, s->cluster.gpu.compute_capability),
                       &s->cluster.gpu);
    gs_fp8 recipe = gs_fp8_resolve(st->fp8, fw);
    const gs_gpu *g = &s->cluster.gpu;
    if (recipe != GS_FP8_OFF && g->peak_flops_fp8 > 0.0) {
        m->fp8_recipe = (int)recipe;
        m->fp8_cast_fused = gs_fp8_cast_fused(recipe, fw);
        m->fp8_peak_flops = g->peak_flops_fp8 * gs_gpu_clock_factor(g);
        m->fp8_gemm_mamf = g->gemm_efficiency_fp8;
        /* the same sustained fraction as the bf16 GEMMs: power and clocks under a step's load */
        m->fp8_gemm_efficiency = g->gemm_efficiency_fp8 * (m->gemm_mamf > 0.0 ? m->gemm_efficiency / m->gemm_mamf
                                                                              : GS_GEMM_SUSTAINED);
    }
}

int gs_compute_is_fp8(const gs_compute_model *m, const gs_event *e)
{
    /* the linear layers; a MoE router's gate GEMM stays in the working precision (Megatron-Core's
     * TopKRouter is not a Transformer Engine module) */
    return m->fp8_recipe != GS_FP8_OFF && m->fp8_peak_flops > 0.0 && is_gemm(e) && e->role != GS_ROLE_MOE_ROUTER &&
           (e->op == GS_OP_QKV || e->op == GS_OP_OPROJ || e->op == GS_OP_MLP_UP || e->op == GS_OP_MLP_DOWN);
}

/* A forward FP8 GEMM's input cast comes out of the norm before it (no pass of its own); the
 * experts' inputs come from the token permutation and its exchanges, cast by a pass of their own. */
static int fp8_input_fused(const gs_compute_model *m, const gs_event *e)
{
    return m->fp8_cast_fused && (e->op == GS_OP_QKV || e->op == GS_OP_MLP_UP) && e->role != GS_ROLE_EXPERT_UP;
}

/* The weight is cast once per step: on micro-batch 0's forward (the first part of a split GEMM). */
static int fp8_casts_weight(const gs_event *e)
{
    return e->phase == GS_PHASE_FWD && e->mb == 0 && e->part <= 1;
}

/* Cast kernels of an FP8 GEMM event: one per cast (an amax kernel and a cast kernel each under
 * current scaling; MX block scaling finds its block scales in the cast kernel). */
static int fp8_cast_kernels(const gs_compute_model *m, const gs_event *e)
{
    int per = m->fp8_recipe == GS_FP8_CURRENT ? 2 : 1;
    int casts = e->phase == GS_PHASE_BWD ? 1 : !fp8_input_fused(m, e) + fp8_casts_weight(e);
    return casts * per;
}

double gs_compute_fp8_cast_bytes(const gs_compute_model *m, const gs_event *e)
{
    if (!gs_compute_is_fp8(m, e))
        return 0.0;
    /* per cast element: read 2, write the FP8 copy 1 and its transpose 1 (delayed); current adds
     * the amax pass's read 2; MX writes a rowwise and a columnwise copy (1 each) with an E8M0
     * scale per 32 elements each (2 / 32) */
    double per = m->fp8_recipe == GS_FP8_CURRENT ? 6.0 : m->fp8_recipe == GS_FP8_MX ? 4.0 + 2.0 / 32.0 : 4.0;
    double nk = (double)e->gemm_n * (double)e->gemm_k * (double)(e->gemm_batch ? e->gemm_batch : 1);
    double rows = e->flops / ((e->phase == GS_PHASE_BWD ? 4.0 : 2.0) * nk);
    if (e->phase == GS_PHASE_BWD)
        return per * rows * (double)e->gemm_n;
    double bytes = 0.0;
    if (!fp8_input_fused(m, e))
        bytes += per * rows * (double)e->gemm_k;
    if (fp8_casts_weight(e))
        bytes += per * nk;
    return bytes;
}

/* An FP8 GEMM event: its FLOPs at the FP8 peak times the FP8 MAMF ratio and the shape's tile and
 * wave factor (the bf16 tile table, with the per-tile cost of a mainloop that runs at the FP8
 * rate: gs_fp8_gemm_shape), then its casts at the elementwise HBM rate. */
static double fp8_gemm_time(const gs_compute_model *m, const gs_event *e)
{
    double shape = m->gemm_efficiency > 0.0 ? gs_fp8_gemm_shape(m, e->gemm_m, e->gemm_n, e->gemm_k, e->gemm_batch)
                                            : 1.0;
    double rate = m->fp8_peak_flops * m->fp8_gemm_efficiency * shape;
    double t = roofline(e->flops, (double)e->bytes, rate, m->hbm_bw * m->hbm_efficiency);
    double cast = gs_compute_fp8_cast_bytes(m, e) / (m->hbm_bw * m->hbm_efficiency);
    return t + cast + rope_time(m, e) + (gemm_launches(e) + fp8_cast_kernels(m, e)) * m->launch_s;
}

static int is_gemm(const gs_event *e)
{
    return e->gemm_m != 0 && e->gemm_n != 0 && e->gemm_k != 0;
}

int gs_compute_event_tensor_bound(const gs_event *e)
{
    return e->kind == GS_EV_COMPUTE && is_gemm(e);
}

/* The token rows a QKV event rotates: its FLOPs over one row's (a split GEMM's parts share the
 * rows by their FLOPs). */
static double qkv_rows(const gs_event *e)
{
    double nk = (double)e->gemm_n * (double)e->gemm_k;
    return nk > 0.0 ? e->flops / ((e->phase == GS_PHASE_BWD ? 4.0 : 2.0) * nk) : 0.0;
}

/* How many GEMM calls of the event's shape its FLOPs make: 1 for a forward GEMM, 2 for a
 * backward one (dgrad + wgrad at the forward shape), and, for the parts tp_comm_overlap splits a
 * GEMM into (engine/build_layer.c), the chunks the part holds at the part's shape (tokens /
 * chunks rows): tp - 1 beside a ring all-gather, 1 or 3 of the pipelined GEMM's splits. The ring
 * exchange's last backward part keeps the whole shape (its wgrad) with the last dgrad chunk's
 * FLOPs added: 1 + 1/tp calls, the fraction a call of 1/tp of the shape's rows (the calibrated
 * terms count it so, its weight read and call overhead whole). Token counts not divisible by the
 * chunks give calls just under a whole number, likewise a call of that share of the rows. The attention core (its own
 * FLOPs rule): 1 forward, 2 backward. */
static double gemm_calls(const gs_event *e)
{
    double bwd = e->phase == GS_PHASE_BWD ? 2.0 : 1.0;
    double per = 2.0 * (double)e->gemm_m * (double)e->gemm_n * (double)e->gemm_k *
                 (double)(e->gemm_batch ? e->gemm_batch : 1);
    if (e->op == GS_OP_ATTN || !(per > 0.0) || !(e->flops > 0.0))
        return bwd;
    double c = e->flops / per, r = floor(c + 0.5);
    return fabs(c - r) <= 1e-9 * c && r >= 1.0 ? r : c; /* whole calls exactly */
}

/* A launch per started call, at most GS_MAX_LAUNCHES (an event's FLOPs far past its shape's mean
 * a shape that does not describe it: no launch storm from it) */
#define GS_MAX_LAUNCHES 1024
static int gemm_launches(const gs_event *e)
{
    double c = ceil(gemm_calls(e) - 1e-9);
    return c < 1.0 ? 1 : c > GS_MAX_LAUNCHES ? GS_MAX_LAUNCHES : (int)c;
}

/* The rotary embedding beside a QKV event on the preset path: q and k are rotated by their own
 * kernels after the GEMM (Megatron-Core's fused RoPE, once for q and once for k; the backward
 * rotates dq and dk before the data-gradient GEMM): each reads and writes its elements, at the
 * elementwise HBM rate. The event's rows are its FLOPs over 2 n k (4 n k backward), so the
 * parts of a QKV GEMM split around a TP collective (tp_comm_overlap) each rotate their share. */
static double rope_time(const gs_compute_model *m, const gs_event *e)
{
    /* the QKV GEMM's only: latent attention's projections (op qkv too) rotate in their norm event */
    if (e->op != GS_OP_QKV || e->role != GS_ROLE_QKV || m->rope_cols <= 0.0 || !is_gemm(e))
        return 0.0;
    double bytes = qkv_rows(e) * (double)e->gemm_n * m->rope_cols * 2.0 * m->rope_elem_bytes;
    return bytes / (m->hbm_bw * m->hbm_efficiency) + m->rope_kernels * m->launch_s;
}

/* Kernels of an elementwise (non-GEMM) compute event: the framework's count for norms and
 * activations (twice as many backward), one for the rest. */
static int elementwise_kernels(const gs_compute_model *m, const gs_event *e)
{
    int k = 1;
    switch ((gs_role)e->role) {
    case GS_ROLE_ATTN_NORM:
    case GS_ROLE_MLP_NORM:
        k = m->norm_kernels;
        break;
    case GS_ROLE_MLP_ACT:
    case GS_ROLE_EXPERT_ACT:
        k = m->act_kernels;
        break;
    default:
        return 1;
    }
    if (k < 1)
        k = 1;
    return e->phase == GS_PHASE_BWD ? 2 * k : k;
}

/* Roofline: the slower of the FLOPs at `flops_rate` and the bytes at `bytes_rate`. */
static double roofline(double flops, double bytes, double flops_rate, double bytes_rate)
{
    double t_flops = flops > 0.0 ? (flops_rate > 0.0 ? flops / flops_rate : HUGE_VAL) : 0.0;
    double t_bytes = bytes > 0.0 ? (bytes_rate > 0.0 ? bytes / bytes_rate : HUGE_VAL) : 0.0;
    return t_flops > t_bytes ? t_flops : t_bytes;
}

/* A calibrated model (gemm_curve, attn_flops, elementwise_bw from a calibration file): the
 * measured rates replace the preset's tile model and vector fraction. The curve is evaluated at
 * the FLOPs of one GEMM call (a backward event is two calls of the forward shape's FLOPs). */
static double calibrated_time(const gs_compute_model *m, const gs_event *e, int *done)
{
    double bw = m->hbm_bw * m->hbm_efficiency;
    *done = 1;
    if (is_gemm(e) && e->op == GS_OP_ATTN && m->attn_flops > 0)
        return e->flops / m->attn_flops + (e->phase == GS_PHASE_BWD ? 2 : 1) * m->launch_s;
    if (is_gemm(e) && (m->gemm_curve || m->gemm_terms)) {
        double calls = gemm_calls(e), one = e->flops / calls, t;
        int bwd = e->phase == GS_PHASE_BWD;
        if (m->gemm_terms) {
            /* per call by its terms (the shape, not only the FLOPs), at least the bytes' time */
            double b = (double)(e->gemm_batch ? e->gemm_batch : 1), whole = floor(calls), part = calls - whole;
            double call = gs_gemm_terms_eval(m->gemm_s_per_flop, m->gemm_s_per_kn, m->gemm_s_per_mk, m->gemm_s_per_call,
                                             (double)e->gemm_m, (double)e->gemm_n, (double)e->gemm_k) * b;
            /* a fraction of a call (a chunk of the shape's rows: the ring's last dgrad chunk beside
             * the whole wgrad, or splits of uneven rows) is a call of those rows, its weight read
             * and overhead whole */
            double calls_s = whole * call;
            if (part > 1e-9)
                calls_s += gs_gemm_terms_eval(m->gemm_s_per_flop, m->gemm_s_per_kn, m->gemm_s_per_mk,
                                              m->gemm_s_per_call, part * (double)e->gemm_m, (double)e->gemm_n,
                                              (double)e->gemm_k) * b;
            t = roofline(0, (double)e->bytes, 1, bw);
            if (calls_s > t)
                t = calls_s;
        } else {
            double eff = gs_gemm_curve_eval((gs_gemm_form)m->gemm_form, m->gemm_e_max, m->gemm_f0_flops, one);
            t = roofline(e->flops, (double)e->bytes, m->peak_flops * eff, bw);
        }
        if (bwd && m->gemm_bwd_factor > 0)
            t *= m->gemm_bwd_factor;
        /* the host QKV event also rotates q and k (forward) or dq and dk (backward): once per token
         * (a split GEMM's parts share the rows by their FLOPs, as rope_time does) */
        if (e->op == GS_OP_QKV && e->role == GS_ROLE_QKV)
            t += m->qkv_rope_s * qkv_rows(e);
        return t + rope_time(m, e) + gemm_launches(e) * m->launch_s;
    }
    if (!is_gemm(e) && e->op < GS_OP_COUNT) {
        double rate = e->phase == GS_PHASE_BWD && m->elementwise_bw_bwd[e->op] > 0 ? m->elementwise_bw_bwd[e->op]
                                                                                   : m->elementwise_bw[e->op];
        if (rate > 0)
            return (double)e->bytes / rate + m->launch_s;
    }
    *done = 0;
    return 0.0;
}

double gs_compute_time(const gs_compute_model *m, const gs_event *e)
{
    double rate;
    int launches = 1;
    int done;
    /* a calibration measures the training precision's GEMMs: FP8 GEMMs keep the preset model */
    if (gs_compute_is_fp8(m, e))
        return fp8_gemm_time(m, e);
    double t = calibrated_time(m, e, &done);
    if (done)
        return t;
    if (is_gemm(e) && e->op == GS_OP_ATTN) {
        double fused = gs_attn_fused_time(&m->attn, e, m->peak_flops);
        if (fused >= 0.0)
            return fused + (e->phase == GS_PHASE_BWD ? 2 : 1) * m->launch_s;
        /* unfused: QK^T and PV as batched GEMMs over the whole s x s (no causal skipping), then
         * the score passes (the event's bytes) as separate kernels: the times add */
        double gemm_rate = m->peak_flops * gs_gemm_efficiency(m, e->gemm_m, e->gemm_n, e->gemm_k, e->gemm_batch);
        double t_gemm = gemm_rate > 0.0 ? e->flops / gemm_rate : HUGE_VAL;
        double t_bytes = (double)e->bytes / (m->hbm_bw * m->hbm_efficiency);
        return t_gemm + t_bytes + (e->phase == GS_PHASE_BWD ? 4 : 2) * m->launch_s;
    }
    if (is_gemm(e)) {
        /* A backward GEMM event is dgrad + wgrad: two GEMMs, two launches, the FLOPs of two
         * forward GEMMs (the event carries them), each at the forward shape's efficiency; a
         * device calibration's gemm_bwd_factor (measured backward over twice the forward) and
         * rotary embedding per token apply here as in the calibrated curves (0: none). */
        rate = m->peak_flops * gs_gemm_efficiency(m, e->gemm_m, e->gemm_n, e->gemm_k, e->gemm_batch);
        launches = gemm_launches(e);
        double rope = rope_time(m, e);
        if (e->op != GS_OP_ATTN && (m->gemm_bwd_factor > 0 || m->qkv_rope_s > 0)) {
            t = roofline(e->flops, (double)e->bytes, rate, m->hbm_bw * m->hbm_efficiency);
            if (e->phase == GS_PHASE_BWD && m->gemm_bwd_factor > 0)
                t *= m->gemm_bwd_factor;
            if (e->op == GS_OP_QKV && e->role == GS_ROLE_QKV)
                t += m->qkv_rope_s * qkv_rows(e);
            return t + rope + launches * m->launch_s;
        }
        return roofline(e->flops, (double)e->bytes, rate, m->hbm_bw * m->hbm_efficiency) + rope +
               launches * m->launch_s;
    } else {
        rate = m->peak_flops * GS_VECTOR_FRACTION;
        launches = elementwise_kernels(m, e);
    }
    return roofline(e->flops, (double)e->bytes, rate, m->hbm_bw * m->hbm_efficiency) + launches * m->launch_s;
}

double gs_compute_launch_time(const gs_compute_model *m, const gs_event *e)
{
    if (gs_compute_is_fp8(m, e))
        return (gemm_launches(e) + fp8_cast_kernels(m, e)) * m->launch_s;
    return (is_gemm(e) ? gemm_launches(e) : elementwise_kernels(m, e)) * m->launch_s;
}

int gs_compute_kernels(const gs_compute_model *m, const gs_event *e)
{
    if (!is_gemm(e))
        return elementwise_kernels(m, e);
    int bwd = e->phase == GS_PHASE_BWD;
    if (e->op == GS_OP_ATTN)
        return (m->attn.impl == GS_ATTN_UNFUSED ? 2 : 1) * (bwd ? 2 : 1);
    int k = gemm_launches(e) + (gs_compute_is_fp8(m, e) ? fp8_cast_kernels(m, e) : 0);
    if (e->op == GS_OP_QKV && e->role == GS_ROLE_QKV && m->rope_cols > 0.0)
        k += m->rope_kernels;
    return k;
}

uint64_t gs_compute_graph_key(const gs_compute_model *m, const gs_event *e)
{
    if (!m->cuda_graphs || e->layer < 0 || e->phase == GS_PHASE_OPTIM)
        return 0;
    if (e->kind != GS_EV_COMPUTE && !(e->kind == GS_EV_COLLECTIVE && e->stream == GS_STREAM_TP))
        return 0;
    return 1 + ((uint64_t)(uint32_t)e->layer << 34 | (uint64_t)e->mb << 2 | (uint64_t)(e->phase & 3));
}

double gs_compute_host_time(const gs_compute_model *m, const gs_event *e)
{
    if (!(m->host_kernel_s > 0.0))
        return 0.0;
    if (e->kind != GS_EV_COMPUTE)
        return m->host_kernel_s;
    return gs_compute_kernels(m, e) * m->host_kernel_s;
}

double gs_compute_time_host(const gs_compute_model *m, const gs_event *e)
{
    return roofline(e->flops, (double)e->bytes, m->host_flops, m->host_bw);
}
