/* The calibration measured through a driver whose buffers live in device memory (the cuda module,
 * gs_driver_ops.device_memory): every figure is timed with the driver's own stream events
 * (CUDA events on a GPU) around a batch of calls issued back to back, as nccl-tests times its
 * collectives, and is the median of repeats after a warm-up batch.
 *
 * What it measures, on device 0 (one rank) unless said:
 *   GEMM         the driver's linear forward and backward (dx and dw) over a grid of shapes plus
 *                the scenario's own; fitted as ONE scale on the preset's tile model
 *                (sim/compute.c: tile and wave quantization, split-K, short-K cost, at
 *                efficiency 1) for the scenario's GPU and precision, by the median of
 *                measured / model (gs_fit_scale_median): compute.gemm_efficiency. The shape's
 *                effects stay the model's physics; the device's large-GEMM efficiency (and
 *                its clocks, its library, TF32 or not) is the scale. Shapes the model calls
 *                memory-bound are measured but not fitted.
 *   elementwise  the non-GEMM kernels of each event (calib/ops.h), alpha-beta fit of time
 *                against the bytes the schedule counts for them (fp32): compute.elementwise_bw
 *                and _bwd; a device-to-device copy (bytes read + written): compute.hbm_bw
 *   attention    forward + backward at the scenario's shape: compute.attn_flops
 *   rope         the rotary embedding per token: compute.qkv_rope_s_per_token
 *   launch       a one-element fill, back to back: compute.launch_s (the per-kernel cost when
 *                kernels are short)
 *   collectives  all-gather, reduce-scatter, all-reduce, broadcast over 2, 4 and 8 devices of
 *                this process and a send/recv ping-pong, 1 KiB .. 1 GiB: links.intra (alpha-beta
 *                per op and group size); only as many devices as the driver opens (a refusal is
 *                recorded as the reason, not an error).
 *
 * Ownership: gs_calib_dev_run allocates the result; gs_calib_dev_free frees it; the JSON document
 * from gs_calib_dev_json is the caller's (json_decref). The options' scenario, mesh and path are
 * borrowed for the run, the environment until the last gs_calib_dev_json.
 * The result's fields are read by its printers (cli/calib_print.c) and written only here. */
#ifndef GS_CALIB_DEVICE_H
#define GS_CALIB_DEVICE_H

#include <jansson.h>
#include <stdint.h>

#include "calib/ops.h"
#include "engine/scenario.h"
#include "engine/status.h"
#include "exec/driver.h"
#include "sim/compute.h"

typedef struct gs_calib_dev_opts {
    const gs_scenario *scenario; /* required: the GPU preset and precision the GEMM model is taken
                                    for, and its GEMM and attention shapes */
    const gs_mesh *mesh;         /* the scenario's mesh */
    const char *scenario_path;   /* the file's machine.scenario (NULL: the scenario's name) */
    int quick;          /* fewer shapes, sizes and repeats */
    int small;          /* test sizes, for the device path run by a CPU driver (tests): GEMMs of a
                           few hundred thousand FLOPs, 1 KiB .. 64 KiB collectives */
    /* progress: done of total measurements, what starts now; NULL: none */
    void (*progress)(void *arg, uint64_t done, uint64_t total, const char *what);
    void *progress_arg;
    uint64_t max_ranks; /* collectives over at most this many devices (0: 8) */
    double timeout_s;   /* the driver's wait timeout (0: 120) */
    gs_driver_settings set; /* the environment's choices for the driver */
    const json_t *environment; /* the file's machine.environment, as the caller read it (NULL: {}) */
} gs_calib_dev_opts;

/* ---- the result ---- */

#define GS_CALIB_DEV_MAX_SHAPES 48
#define GS_CALIB_DEV_MAX_EW 8
#define GS_CALIB_DEV_MAX_SIZES 24
#define GS_CALIB_DEV_MAX_REPS 16


typedef struct gs_calib_dev_gemm {
    uint64_t m, n, k;
    double secs, bwd_secs; /* median per call */
    double rate;           /* measured FLOP/s of the forward */
    double model_rate;     /* the tile model's FLOP/s at efficiency 1 (peak x shape factor) */
    int fitted;            /* 0: the model calls it memory-bound; measured, not fitted */
} gs_calib_dev_gemm;

struct gs_calib_dev {
    const gs_driver_ops *ops;
    gs_calib_dev_opts o;
    int reps;
    char scenario[512];
    char gpu[64];
    const char *precision;
    gs_compute_model cm; /* the scenario GPU's model at efficiency 1 */
    gs_calib_dev_gemm gemm[GS_CALIB_DEV_MAX_SHAPES];
    size_t ngemm;
    gs_fit_scale gemm_fit;
    double bwd_factor;
    uint64_t ew_elems[GS_CALIB_DEV_MAX_EW];
    size_t new_;
    double ew_s[GS_CAL_EW_COUNT][GS_CALIB_DEV_MAX_EW];
    uint64_t ew_n[GS_CAL_EW_COUNT][GS_CALIB_DEV_MAX_EW]; /* elements each kernel ran on (a loss row at least) */
    gs_fit_ab ew_fit[GS_CAL_EW_COUNT];
    double copy_s[GS_CALIB_DEV_MAX_EW]; /* copy of ew_elems floats */
    gs_fit_ab copy_fit;        /* against the bytes read and written */
    uint64_t attn_seq, attn_nh, attn_nkv, attn_hd;
    int attn_flash; /* the scenario's strategy.flash_attention */
    int attn_dropout;      /* the scenario's model has dropout layers */
    double attn_drop_rate; /* its attention dropout */
    int gemm_bf16;  /* the scenario trains in bf16: the driver's GEMMs take bf16 inputs, as exec's */
    char gemm_math[48]; /* what the driver says its GEMMs ran as (gemm_math), "" unknown */
    size_t vocab_row;
    size_t hidden_row; /* the norms' and the embedding's row: the scenario's hidden width */
    double attn_fwd_s, attn_bwd_s, attn_flops;
    double rope_s;
    double launch_s;
    uint64_t sizes[GS_CALIB_DEV_MAX_SIZES];
    size_t nsizes;
    double coll_s[GS_CAL_C_COUNT][GS_CAL_GROUPS][GS_CALIB_DEV_MAX_SIZES]; /* 0: not measured */
    gs_fit_ab coll_fit[GS_CAL_C_COUNT][GS_CAL_GROUPS];
    int coll_ok[GS_CAL_C_COUNT][GS_CAL_GROUPS];
    uint64_t coll_max; /* the largest group measured (0: none) */
    char coll_note[512]; /* why no larger group was measured */
    uint64_t pdone, ptotal; /* measurements started, and planned (progress) */
};

typedef struct gs_calib_dev gs_calib_dev;

/* Measures through ops (opened here, closed before returning) and fits. Errors name the
 * measurement. */
gs_status gs_calib_dev_run(const gs_driver_ops *ops, const gs_calib_dev_opts *o, gs_calib_dev **out, gs_error *err);

/* The calibration file (sim/calib_file.h's format, "driver": ops->name). */
json_t *gs_calib_dev_json(const gs_calib_dev *c);

/* GEMM efficiency and peak as the file states them: the preset's peak and the fitted scale, or
 * (a scale above 1: the device beats the preset's peak, e.g. boost clocks) the peak scaled and
 * efficiency 1. */
void gs_calib_dev_gemm_peak(const gs_calib_dev *c, double *peak, double *eff);

/* The fitted GEMM scale and the copy bandwidth, for tests. */
double gs_calib_dev_gemm_scale(const gs_calib_dev *c);
double gs_calib_dev_copy_bw(const gs_calib_dev *c);

void gs_calib_dev_free(gs_calib_dev *c);

#endif
