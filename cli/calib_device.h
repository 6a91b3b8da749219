/* `gridstep calibrate` for a driver whose buffers live in device memory (the cuda module,
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
 *   elementwise  the non-GEMM kernels of each event (cli/calib_ops.h), alpha-beta fit of time
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
 * from gs_calib_dev_json is the caller's (json_decref). */
#ifndef GS_CLI_CALIB_DEVICE_H
#define GS_CLI_CALIB_DEVICE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/status.h"
#include "exec/driver.h"

typedef struct gs_calib_dev_opts {
    int quick;          /* fewer shapes, sizes and repeats */
    int small;          /* test sizes, for the device path run by a CPU driver (tests): GEMMs of a
                           few hundred thousand FLOPs, 1 KiB .. 64 KiB collectives */
    struct gs_progress *prog; /* progress on stderr (cli/progress.h); NULL: none */
    uint64_t max_ranks; /* collectives over at most this many devices (0: 8) */
    double timeout_s;   /* the driver's wait timeout (0: 120) */
} gs_calib_dev_opts;

typedef struct gs_calib_dev gs_calib_dev;

/* Measures through ops (opened here, closed before returning) and fits. scenario (required)
 * gives the GPU preset and precision the GEMM model is taken for, and its GEMM and attention
 * shapes. Errors name the measurement. */
gs_status gs_calib_dev_run(const gs_driver_ops *ops, const char *scenario, const gs_calib_dev_opts *o,
                           gs_calib_dev **out, gs_error *err);

/* The calibration file (sim/calib_file.h's format, "driver": ops->name). */
json_t *gs_calib_dev_json(const gs_calib_dev *c);

/* The human summary: the GEMM table against the model, the fits, nccl-tests' columns. */
void gs_calib_dev_print(const gs_calib_dev *c, FILE *f);

/* PREFIX-gemm and PREFIX-coll .dat/.gp/.png through gnuplot (as the host calibration's). */
gs_status gs_calib_dev_plot(const gs_calib_dev *c, const char *prefix, gs_error *err);

/* The fitted GEMM scale and the copy bandwidth, for tests. */
double gs_calib_dev_gemm_scale(const gs_calib_dev *c);
double gs_calib_dev_copy_bw(const gs_calib_dev *c);

void gs_calib_dev_free(gs_calib_dev *c);

#endif
