/* Fitting the sim's fitted constants (gs_fit_params) to published runs: simulate every run under
 * a parameter set, and minimise the mean squared log error of the predicted metric with GSL's
 * Nelder-Mead simplex, on a chosen subset (leave-one-source-out: every source but one).
 *
 * Ownership: the runs are the caller's; these functions fill their result fields only. */
#ifndef GS_SIM_FIT_H
#define GS_SIM_FIT_H

#include <stddef.h>

#include "engine/backend.h"
#include "engine/expect.h"
#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

typedef struct gs_fit_run {
    const gs_scenario *s;   /* borrowed */
    const gs_mesh *mesh;    /* borrowed */
    const gs_expect *e;     /* borrowed */
    int ok;                 /* 1: predicted, error and step_time_s are set */
    double predicted;       /* in the metric's unit */
    double error;           /* signed fraction, (predicted - published) / published */
    double step_time_s;
    int fits_memory;        /* 1: the simulated peak fits in the GPU's memory */
} gs_fit_run;

/* Simulates the runs whose use[i] is non-zero (use NULL: all) under p (NULL: the compiled-in
 * constants), class path unless exact. A run that fails to simulate gets ok 0 and its message in
 * failure[i] when failure is not NULL (GS_ERROR_MSG_BYTES each); the call still returns GS_OK. */
gs_status gs_fit_simulate(gs_fit_run *runs, size_t n, const unsigned char *use, const gs_fit_params *p, int exact,
                          char (*failure)[GS_ERROR_MSG_BYTES], gs_error *err);

/* Fits p on the runs with use[i] non-zero, starting from the compiled-in constants, each kept in
 * its physical range (overlap_hbm_per_byte in [0, 6], gemm_sustained in [0.6, 1.05]): the mean
 * over sources (expect.dataset) of each source's mean squared log error of the predicted metric.
 * *loss_out gets that loss at the optimum. Results of the last evaluation stay in the
 * runs. */
gs_status gs_fit_params_fit(gs_fit_run *runs, size_t n, const unsigned char *use, gs_fit_params *out,
                            double *loss_out, gs_error *err);

#endif
