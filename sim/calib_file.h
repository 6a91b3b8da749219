/* The calibration file the sim reads (`gridstep sim --calib FILE`): JSON that overrides any
 * compute-model or link figure the presets give. The calibration command (a later issue) writes
 * it from measurements; people can write it by hand.
 *
 *   {"machine": "...", "date": "...", "driver": "host|cuda",
 *    "compute": {"peak_flops": F, "gemm_efficiency": E, "hbm_bw": B, "hbm_efficiency": E,
 *                "launch_s": S, "overlap_slowdown": X, "cores": C, "background_load": L,
 *                "attn_flops": F, "gemm_bwd_factor": X, "launch_s_by_ranks": [{"ranks": N, "launch_s": S, "wake_s": S, "launch_cpu_s": S, "wake_cpu_s": S}, ...],
 *                "gemm_curve": {"form": "hyperbolic|exp", "e_max": E, "f0_flops": F},
 *                "gemm_terms": {"s_per_flop": S, "s_per_kn": S, "s_per_mk": S, "s_per_call": S},
 *                "elementwise_bw": {"adamw": B, "rmsnorm": B, "swiglu": B, "add": B, "xent": B, "embed": B},
 *                "elementwise_bw_bwd": {"rmsnorm": B, "swiglu": B, "xent": B, "embed": B},
 *                "qkv_rope_s_per_token": S, "concurrency_slowdown": X, "collective_cpu_share": F},
 *    "links": {"intra_bw": B, "nic_bw": B,
 *              "intra": {"all_gather": [{"ranks": N, "alpha_s": S, "beta_bytes_per_s": B}, ...],
 *                        "reduce_scatter": [...], "all_reduce": [...], "broadcast": [...],
 *                        "send_recv": {"alpha_s": S, "beta_bytes_per_s": B}},
 *              "inter": {... as intra, for groups spanning nodes}},
 *    "fits": {...}, "measurements": {...}}   (what calibrate measured: kept; of it only
 *                                              measurements.attention.flash, true or false, is read)
 *
 * Units: FLOP/s, bytes/s, seconds. Every key is optional; unknown keys are errors. With
 * gemm_curve the GEMM efficiency is the curve at one call's FLOPs times peak_flops (the preset's
 * tile model is not used); gemm_terms, when given, replaces the curve: one m x n x k call takes
 * s_per_flop x 2mnk + s_per_kn x kn + s_per_mk x mk + s_per_call (sim/calib.h); a backward GEMM event takes gemm_bwd_factor times its two forward
 * calls; elementwise_bw gives each non-GEMM kernel's rate in the schedule's
 * byte count (adamw: the optimizer, rmsnorm: norms, swiglu: the activation, xent: the loss,
 * embed: the embedding; add: embedding and loss where xent / embed are not given, as files
 * before them said), elementwise_bw_bwd the same for backward events (absent: the forward
 * rate); qkv_rope_s_per_token is added to a QKV event per token (the host's rotary embedding);
 * concurrency_slowdown s makes a compute event's work take 1 + s (n - 1) times as long while
 * n of the shared cores compute at once (0 when absent); collective_cpu_share F puts F x a
 * collective's bandwidth time (beyond its zero-byte time) on the shared cores while it runs,
 * launch_s_by_ranks' launch_cpu_s and wake_cpu_s (at most launch_s and wake_s) are the parts of
 * the per-event costs that are work on the shared cores rather than latency (0 when absent),
 * beside the compute events (0 when absent); cores makes every rank's compute share that many cores with background_load other
 * runnable threads (each of k running compute events gets min(1, cores / (background + k))); "driver": "host" says every
 * rank was a thread of one machine, so links.intra applies to every group and peer (unless the
 * file has links.inter: a host calibration across the processes of an MPI job on several hosts,
 * whose groups spanning nodes then take links.inter).
 *
 * Ownership: gs_calib is a plain value. */
#ifndef GS_SIM_CALIB_FILE_H
#define GS_SIM_CALIB_FILE_H

#include "engine/status.h"
#include "sim/compute.h"
#include "sim/topology.h"

typedef struct gs_calib {
    double peak_flops, gemm_efficiency, hbm_bw, hbm_efficiency, launch_s, overlap_slowdown, cores, background_load,
        attn_flops, gemm_bwd_factor, qkv_rope_s, concurrency_slowdown, coll_cpu_share;
    double intra_bw, nic_bw;
    unsigned set; /* bit per field above, in order: 1 = given */
    int gemm_curve, gemm_form;        /* gemm_curve: 1 = given; gs_gemm_form */
    double gemm_e_max, gemm_f0_flops;
    int gemm_terms;                   /* 1 = given */
    double gemm_s_per_flop, gemm_s_per_kn, gemm_s_per_mk, gemm_s_per_call;
    double elementwise_bw[GS_OP_COUNT]; /* bytes/s, 0 = not given */
    double elementwise_bw_bwd[GS_OP_COUNT]; /* backward events' rates, bytes/s, 0 = not given */
    gs_link_fits intra, inter;
    int host;                         /* "driver": "host" and no links.inter: one machine */
    uint64_t launch_ranks[GS_COLL_FIT_SIZES]; /* compute.launch_s_by_ranks: world sizes, ascending */
    double launch_by_ranks[GS_COLL_FIT_SIZES]; /* seconds per event there */
    double wake_by_ranks[GS_COLL_FIT_SIZES];   /* more, when it waits for another stream */
    double launch_cpu_by_ranks[GS_COLL_FIT_SIZES], wake_cpu_by_ranks[GS_COLL_FIT_SIZES]; /* their CPU work */
    size_t nlaunch;
    int attn_flash; /* measurements.attention.flash: 1 the flash kernels timed attn_flops, 0 the ones
                     * keeping the probabilities, -1 not said */
} gs_calib;

/* Reads and checks the file (positive numbers; efficiencies in (0, 1]; overlap_slowdown >= 1).
 * Errors name the file (and line:column for JSON syntax errors); GS_ERR_INPUT. */
gs_status gs_calib_load(const char *path, gs_calib *out, gs_error *err);

/* The same from len bytes of text (need not end in NUL); path names it in messages. */
gs_status gs_calib_load_string(const char *text, size_t len, const char *path, gs_calib *out, gs_error *err);

/* A note (into buf, returned) when compute.attn_flops was measured on the other attention
 * kernels than the scenario's strategy.flash_attention selects; NULL when they agree, the file
 * does not say or gives no attn_flops. */
const char *gs_calib_attention_note(const gs_calib *c, const char *path, int scenario_flash, char *buf, size_t len);

/* Replaces the given fields of the compute model and the topology; world (ranks the sim plays)
 * picks the launch overhead from launch_s_by_ranks (linear between measured sizes, the nearest
 * outside them). */
void gs_calib_apply(const gs_calib *c, uint64_t world, gs_compute_model *cm, gs_topo *topo);

#endif
