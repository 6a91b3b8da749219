/* Compute cost model: roofline time of a compute event (FLOPs at the dtype's peak times a GEMM
 * efficiency that depends on the shape, bytes at HBM bandwidth) plus a kernel launch overhead;
 * efficiencies from the GPU preset or a calibration file.
 *
 * Ownership: gs_compute_model is a plain value. */
#ifndef GS_SIM_COMPUTE_H
#define GS_SIM_COMPUTE_H

#include "engine/backend.h"
#include "engine/hardware.h"
#include "engine/model.h"
#include "engine/schedule.h"
#include "engine/scenario.h"
#include "engine/strategy.h"
#include "sim/attention.h"

typedef struct gs_compute_model {
    double peak_flops;        /* FLOP/s, dense, for the training precision */
    double gemm_efficiency;   /* achievable fraction on large well-shaped GEMMs in a training step:
                                 the GPU's MAMF ratio x the sustained fraction (GS_GEMM_SUSTAINED) */
    double gemm_mamf;         /* the GPU's MAMF / peak, before the sustained fraction */
    double hbm_bw;            /* bytes/s */
    double hbm_efficiency;    /* achievable fraction of HBM bandwidth for elementwise kernels */
    double launch_s;          /* per-kernel launch overhead, seconds */
    double host_kernel_s;     /* CPU seconds the rank's host thread spends issuing one kernel (the
                                 framework's Python, the dispatcher, cudaLaunchKernel): a kernel
                                 starts no earlier than the host has issued it and every event
                                 before it in the rank's list; 0: the host is not modelled */
    int cuda_graphs;          /* 1: a transformer layer's events of one micro-batch and phase are a
                                 CUDA graph the host issues in one call (strategy.cuda_graphs) */
    int norm_kernels, act_kernels, rope_kernels; /* kernels of a forward norm event (with its
                                 residual add), activation event and rotary embedding of q and k,
                                 by the framework's fusion (engine/framework.h); a backward event
                                 launches twice as many */
    double overlap_slowdown;  /* compute slowdown factor while communication runs on the same
                                 GPU (SM and memory contention); >= 1, calibratable. With
                                 overlap_hbm_per_byte > 0 it is only the upper bound of
                                 gs_compute_overlap_factor (the planner's bound uses it) */
    double overlap_hbm_per_byte; /* HBM bytes an NCCL kernel moves per byte of its bus traffic
                                    (its buffers read and written on both sides): compute beside a
                                    collective of bus bandwidth B runs gs_compute_overlap_factors
                                    times slower; 0: the flat overlap_slowdown (a calibration's) */
    double power_w;           /* the power the GPU runs under (its cap, else its TDP), watts: the
                                 HBM traffic of communication kernels draws on it; 0: unknown */
    uint32_t sms;             /* for wave quantization */
    double host_flops;        /* CPU offload: the host's FLOP/s for the optimizer */
    double host_bw;           /* CPU offload: host memory bandwidth, bytes/s */
    /* From a calibration file only (0: not given; the preset model above applies). */
    int gemm_curve;           /* 1: GEMM efficiency = curve(FLOPs of one GEMM), not the tile model */
    int gemm_form;            /* gs_gemm_form (sim/calib.h) */
    double gemm_e_max;        /* the curve's plateau, fraction of peak_flops */
    double gemm_f0_flops;     /* the curve's scale, FLOPs */
    double gemm_bwd_factor;   /* backward GEMM event over its two forward-shaped calls (0: 1) */
    int gemm_terms;           /* 1: a GEMM call takes gs_gemm_terms_eval(gemm_s_per_*) (sim/calib.h),
                                 not the curve */
    double gemm_s_per_flop, gemm_s_per_kn, gemm_s_per_mk, gemm_s_per_call;
    double attn_flops;        /* FLOP/s the attention core reaches (the schedule's FLOP count) */
    double elementwise_bw[GS_OP_COUNT]; /* bytes/s (the schedule's byte count) per non-GEMM op */
    double elementwise_bw_bwd[GS_OP_COUNT]; /* the same for the op's backward event (0: elementwise_bw) */
    double qkv_rope_s;        /* seconds per token (row) of a QKV event for the rotary embedding the
                                 host kernels apply to q and k after the GEMM (and to dq, dk before
                                 it in the backward); 0: none */
    double rope_cols;         /* the preset model's rotary embedding (gs_compute_model_rope): the
                                 fraction of a QKV event's output columns (q and k, not v) that a
                                 separate kernel rotates after the GEMM (and rotates back before
                                 the backward), reading and writing them at the elementwise HBM
                                 rate; 0: none (no RoPE, or a calibration's qkv_rope_s owns it) */
    double rope_elem_bytes;   /* bytes of one rotated element (the training precision's) */
    double coll_cpu_share;    /* a collective's bandwidth time (its time beyond the zero-byte
                                 latency) that its member spends on the shared cores copying and
                                 summing (the host driver's threads do: 1); 0 by default */
    double concurrency_slowdown; /* the work of a compute event takes 1 + this x (n - 1) times as long
                                    while n threads compute at once on the shared cores (cache and
                                    memory bandwidth contention; n <= cores); 0 by default */
    double cores;             /* compute events of all ranks share this many cores (the host
                                 driver's ranks are threads of one machine); 0: one device each */
    double wake_s;            /* a compute event waiting for another stream's event starts this
                                 much later (a host thread waking another); 0 by default */
    double launch_cpu_s, wake_cpu_s; /* the parts of launch_s and wake_s that are work on the
                                        shared cores (every host thread the driver wakes), not
                                        latency; 0 by default */
    double background_load;   /* other runnable threads on those cores (a fair scheduler gives
                                 each of k compute events min(1, cores / (background + k))) */
    gs_attn_model attn;       /* the attention kernel class (sim/attention.h); impl UNFUSED with
                                 known 0 times the core as batched GEMMs plus its score passes */
    /* FP8 (strategy.fp8, engine/strategy.h): the linear layers' GEMM events (QKV, OPROJ, MLP_UP,
     * MLP_DOWN) run at the FP8 rate and pay their casts (gs_compute_fp8_cast_bytes) */
    int fp8_recipe;           /* gs_fp8, resolved: OFF (none), DELAYED or CURRENT */
    int fp8_cast_fused;       /* 1: the QKV and MLP-up input casts come out of the norm (no pass) */
    double fp8_peak_flops;    /* dense FP8 FLOP/s, the power cap's clock factor applied */
    double fp8_gemm_mamf;     /* the GPU's FP8 MAMF / FP8 peak */
    double fp8_gemm_efficiency; /* fp8_gemm_mamf x the sustained fraction (as gemm_efficiency) */
} gs_compute_model;

void gs_compute_model_init(gs_compute_model *m, const gs_gpu *g, gs_precision p);

/* The preset model for a scenario: gs_compute_model_init for its GPU and precision, its rotary
 * embedding (gs_compute_model_rope, the framework's passes) and its attention kernel class
 * (strategy.attention resolved against the framework and the GPU). */
void gs_compute_model_for_scenario(gs_compute_model *m, const gs_scenario *s);

/* The model's rotary embedding, for the preset path: with pos rope, rope_cols = (heads +
 * kv_heads) / (heads + 2 kv_heads) and rope_elem_bytes = the precision's; otherwise 0. */
void gs_compute_model_rope(gs_compute_model *m, const gs_model *model, gs_precision p);

/* Sets the fitted constants the caller gives (a field of 0 keeps the compiled-in value; see
 * gs_fit_params in engine/backend.h): gemm_efficiency becomes the GPU's MAMF ratio times
 * gemm_sustained, overlap_hbm_per_byte is replaced. */
void gs_compute_model_fit(gs_compute_model *m, const gs_fit_params *p);

/* The compiled-in fitted constants (sim/compute.c: their sources and fits). */
void gs_fit_params_defaults(gs_fit_params *p);

/* The compute slowdowns beside a collective moving `busbw` bytes/s of bus traffic per GPU on
 * `ctas` thread blocks (its channels), which makes H = overlap_hbm_per_byte x busbw of HBM
 * traffic: *tensor for a compute-bound kernel (GEMMs, attention), sms / (sms - ctas) for the SMs
 * the NCCL kernel holds times (P / (P - e H))^(1/3) for the power e H its traffic draws from the
 * cap P = power_w (the cube law of gs_gpu_clock_factor; e = GS_COMM_J_PER_HBM_BYTE, measured);
 * *memory for a memory-bound kernel, R / (R - H), R = hbm_bw x hbm_efficiency: the two share
 * the HBM, and the SMs they leave it are enough for it. Each capped at overlap_slowdown; both
 * overlap_slowdown when overlap_hbm_per_byte is 0. tests/data/h200-contention-2026-12-04.csv
 * holds the measurements (tests/check_contention_measured.c). */
void gs_compute_overlap_factors(const gs_compute_model *m, double busbw, int ctas, double *tensor, double *memory);

/* 1 when event e's compute time is set by its FLOPs on the tensor cores (a GEMM, attention), 0
 * when by its bytes (elementwise, norms, the optimizer): which of the two overlap factors slows
 * it. */
int gs_compute_event_tensor_bound(const gs_event *e);

/* Efficiency of an m x n x k GEMM (batch >= 1) relative to peak, in (0, gemm_efficiency]:
 * tile and wave quantization, small-dimension penalty (reference 6.6). */
double gs_gemm_efficiency(const gs_compute_model *m, uint64_t M, uint64_t N, uint64_t K, uint64_t batch);
/* The shape factor (<= 1, over gemm_efficiency) of an FP8 GEMM: the bf16 tile model with its
 * per-tile fixed cost and split-K reduction kept as times while the mainloop runs at the FP8 rate
 * (fp8_peak_flops x fp8_gemm_efficiency over peak_flops x gemm_efficiency). 1 without FP8. */
double gs_fp8_gemm_shape(const gs_compute_model *m, uint64_t M, uint64_t N, uint64_t K, uint64_t batch);

/* 1 when event e is an FP8 GEMM under the model: FP8 on, a GEMM of a linear layer. */
int gs_compute_is_fp8(const gs_compute_model *m, const gs_event *e);

/* HBM bytes the FP8 casts of FP8 GEMM event e move (0 for any other event). Per element cast,
 * with delayed scaling: read the bf16 source (2 B), write the FP8 copy (1 B) and, since Hopper's
 * FP8 tensor cores take only the TN layout, its transpose for the other GEMM of the backward
 * (1 B): 4 B (Transformer Engine's fused cast-transpose); current scaling first reads the source
 * once more for its amax: 6 B. Forward: the input activation's rows x k elements (none when
 * fp8_cast_fused and the op is QKV or MLP_UP: the norm writes FP8 itself), and the weight's k x n
 * once per step, on micro-batch 0's forward (Transformer Engine caches the FP8 weight and its
 * transpose across micro-batches; the recompute reuses them). Backward: the output gradient's
 * rows x n elements, cast to E5M2 with its transpose for the weight gradient. The rows are the
 * event's FLOPs over 2 n k (4 n k backward), so split GEMM parts cast their own rows. */
double gs_compute_fp8_cast_bytes(const gs_compute_model *m, const gs_event *e);

/* Seconds for one compute event (without overlap slowdown). */
double gs_compute_time(const gs_compute_model *m, const gs_event *e);

/* The launch part of gs_compute_time (launches x launch_s): a latency, not work on the cores. */
double gs_compute_launch_time(const gs_compute_model *m, const gs_event *e);
/* Kernels compute event e launches: its GEMM calls (and FP8 casts), the attention core's 1
 * (backward 2; unfused 2 and 4), the rotary embedding's beside a QKV GEMM, an elementwise
 * event's by the framework's fusion (norm_kernels, act_kernels; twice as many backward), 1 for
 * the rest. */
int gs_compute_kernels(const gs_compute_model *m, const gs_event *e);
/* Seconds the rank's host thread takes to issue event e: its kernels x host_kernel_s for a
 * compute event, one call's host_kernel_s for a collective, send, receive or copy; 0 when
 * host_kernel_s is 0. */
double gs_compute_host_time(const gs_compute_model *m, const gs_event *e);
/* With cuda_graphs: the CUDA graph event e is captured in, as a key (its layer, micro-batch and
 * phase: a transformer layer's compute and TP collectives of one micro-batch's forward, recompute
 * or backward), or 0 when e runs outside any graph (the embedding, the head and loss, the
 * optimizer, DP and pipeline communication), and always 0 without cuda_graphs. The host issues a
 * graph in one call (host_kernel_s) where its events would each cost their own. */
uint64_t gs_compute_graph_key(const gs_compute_model *m, const gs_event *e);

/* Seconds for a compute event run on the host CPU (the optimizer under CPU offload, which the
 * event alone cannot tell): roofline on host_flops and host_bw, no kernel launch. */
double gs_compute_time_host(const gs_compute_model *m, const gs_event *e);

/* Waves of thread-block tiles on a GPU with `sms` SMs: ceil(tiles / sms), 0 for no tiles (one
 * resident tile per SM, as for the large GEMM tiles). Wave efficiency = tiles / (waves x sms). */
uint64_t gs_gemm_waves(uint64_t tiles, uint32_t sms);

#endif
