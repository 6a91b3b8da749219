/* What `gridstep calibrate` prints and plots of its measurements (calib/): nccl-tests' columns,
 * the kernels' fits, the device and between-process summaries, gnuplot files; and the note of
 * the test hook GRIDSTEP_CALIB_SPELL.
 *
 * Ownership: everything is borrowed for the call; the files written are the caller's. */
#ifndef GS_CLI_CALIB_PRINT_H
#define GS_CLI_CALIB_PRINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "calib/device.h"
#include "calib/ops.h"
#include "calib/procs.h"
#include "engine/status.h"

/* The kernels' fits as a table (t = alpha + bytes / bw), plus one more row when extra_name is set. */
void gs_cal_ew_print(FILE *f, const gs_fit_ab fit[GS_CAL_EW_COUNT], const char *extra_name, const gs_fit_ab *extra);

/* One collective's points in nccl-tests' columns (size, count per rank as nccl-tests passes it,
 * type, time, algbw, busbw) with the fitted line's time beside them, then the fit; heading is
 * the line above the table. */
void gs_cal_coll_print(FILE *f, const char *heading, int op, uint64_t ranks, const uint64_t *sizes, size_t nsizes,
                       const double *secs, const gs_fit_ab *fit);

/* One measured collective for the time-against-size plot. */
typedef struct gs_cal_series {
    int op;
    uint64_t ranks;
    const char *label; /* after "OP n=RANKS"; may be NULL */
    const double *secs; /* nsizes */
    const gs_fit_ab *fit;
} gs_cal_series;

/* PREFIX-coll.dat/.gp (points and fitted lines, log-log) and gnuplot on them. */
gs_status gs_cal_coll_plot(const char *prefix, const char *title, const gs_cal_series *s, size_t n,
                           const uint64_t *sizes, size_t nsizes, gs_error *err);

/* gnuplot PREFIX-WHICH.gp; a missing or failing gnuplot is GS_ERR_RUNTIME naming the files left. */
gs_status gs_cal_gnuplot(const char *prefix, const char *which, gs_error *err);

/* The note on stderr after the measurement, when a spell was set; where: which collectives. */
void gs_cal_spell_note(const gs_cal_spell *s, const char *where);

/* The device calibration's summary: the GEMM table against the model, the fits, nccl-tests'
 * columns. */
void gs_calib_dev_print(const gs_calib_dev *c, FILE *f);

/* PREFIX-gemm and PREFIX-coll .dat/.gp/.png through gnuplot (as the host calibration's). */
gs_status gs_calib_dev_plot(const gs_calib_dev *c, const char *prefix, gs_error *err);

/* nccl-tests' columns per class, op and group size, with the fits. */
void gs_calib_procs_print(const gs_calib_procs *c, FILE *f);

#endif
