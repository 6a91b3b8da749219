/* The calibration file the sim reads (`gridstep sim --calib FILE`): JSON that overrides any
 * compute-model or link figure the presets give. The calibration command (a later issue) writes
 * it from measurements; people can write it by hand.
 *
 *   {"machine": "...", "date": "...", "driver": "host|cuda",
 *    "compute": {"peak_flops": F, "gemm_efficiency": E, "hbm_bw": B, "hbm_efficiency": E,
 *                "launch_s": S, "overlap_slowdown": X},
 *    "links": {"intra_bw": B, "nic_bw": B}}
 *
 * Units: FLOP/s, bytes/s, seconds. Every key is optional; unknown keys are errors.
 *
 * Ownership: gs_calib is a plain value. */
#ifndef GS_SIM_CALIB_FILE_H
#define GS_SIM_CALIB_FILE_H

#include "engine/status.h"
#include "sim/compute.h"
#include "sim/topology.h"

typedef struct gs_calib {
    double peak_flops, gemm_efficiency, hbm_bw, hbm_efficiency, launch_s, overlap_slowdown;
    double intra_bw, nic_bw;
    unsigned set; /* bit per field above, in order: 1 = given */
} gs_calib;

/* Reads and checks the file (positive numbers; efficiencies in (0, 1]; overlap_slowdown >= 1).
 * Errors name the file (and line:column for JSON syntax errors); GS_ERR_INPUT. */
gs_status gs_calib_load(const char *path, gs_calib *out, gs_error *err);

/* The same from len bytes of text (need not end in NUL); path names it in messages. */
gs_status gs_calib_load_string(const char *text, size_t len, const char *path, gs_calib *out, gs_error *err);

/* Replaces the given fields of the compute model and the topology. */
void gs_calib_apply(const gs_calib *c, gs_compute_model *cm, gs_topo *topo);

#endif
