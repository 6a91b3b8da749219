/* Calibration fits (GSL): the alpha-beta line of a collective's time against its size, the GEMM
 * efficiency curve against a GEMM's FLOPs, and the median the measurements are reduced to first.
 * `gridstep calibrate` feeds them the host driver's measurements and writes what they return
 * into the calibration file that sim/calib_file.c reads.
 *
 * Ownership: pure functions over caller arrays; results are plain values. */
#ifndef GS_SIM_CALIB_H
#define GS_SIM_CALIB_H

#include <stddef.h>

#include "engine/status.h"

/* Median of n values (n >= 1); reorders v. */
double gs_calib_median(double *v, size_t n);

/* t = alpha_s + bytes / beta_bytes_per_s, fitted by robust regression (bisquare weights,
 * gsl_multifit_robust) on the relative residual (t - model) / t, so the 1 KiB and the 1 GiB
 * points count alike; then points whose (t - model) / model lies beyond 4 robust standard
 * deviations (1.4826 x MAD, at least 25%) are dropped and the rest refitted (a 10x point is an
 * outlier however few points there are). alpha is kept >= 0 (a negative intercept is refitted
 * through the origin). */
typedef struct gs_fit_ab {
    double alpha_s;          /* seconds */
    double beta_bytes_per_s; /* bytes/s */
    double r2;               /* of log(t) against log(model) */
    double rms_rel_resid;    /* sqrt(mean(((t - model) / model)^2)) over the points kept */
    size_t n, outliers;      /* points, and points given a final weight below 0.5 */
} gs_fit_ab;

gs_status gs_fit_alpha_beta(const double *bytes, const double *secs, size_t n, gs_fit_ab *out, gs_error *err);

/* GEMM efficiency against the GEMM's FLOPs f (2 m n k): eff = e_max * f / (f + f0) (the
 * "hyperbolic" form: a fixed cost per call worth f0 FLOPs at full speed), or
 * eff = e_max * (1 - exp(-f / f0)) (the "exp" form); nonlinear least squares on the log of the
 * efficiency (gsl_multifit_nlinear, trust region with Levenberg-Marquardt steps). Both forms
 * are fitted; the one with the smaller residual is returned. */
typedef enum gs_gemm_form { GS_GEMM_FORM_HYPERBOLIC, GS_GEMM_FORM_EXP, GS_GEMM_FORM_COUNT } gs_gemm_form;

typedef struct gs_fit_gemm {
    gs_gemm_form form;
    double e_max;         /* fraction of the peak the curve is relative to, (0, 1] */
    double f0_flops;      /* FLOPs */
    double r2;            /* of eff */
    double rms_rel_resid; /* sqrt(mean(((eff - model) / model)^2)) */
    size_t n;
} gs_fit_gemm;

gs_status gs_fit_gemm_curve(const double *flops, const double *eff, size_t n, gs_fit_gemm *out, gs_error *err);

/* Concurrency slowdown: with k threads computing at once on their own data, each call takes
 * ratio(k) = 1 + s (k - 1) times its one-thread time (shared caches and memory bandwidth).
 * s by least squares through (1, 1): s = sum (k - 1)(ratio - 1) / sum (k - 1)^2, kept >= 0;
 * rms_rel_resid as for the other fits. Points with k < 1 or a non-positive ratio are errors;
 * points at k = 1 carry no information about s and need not be given. */
typedef struct gs_fit_slow {
    double s;             /* per extra concurrent thread, fraction */
    double rms_rel_resid; /* sqrt(mean(((ratio - model) / model)^2)) */
    size_t n;
} gs_fit_slow;

gs_status gs_fit_slowdown(const double *threads, const double *ratio, size_t n, gs_fit_slow *out, gs_error *err);

/* GEMM time by its terms: t = s_per_flop x 2mnk + s_per_kn x kn + s_per_mk x mk + s_per_call,
 * the multiply-adds plus the packing of the k x n operand (amortized over the m rows: why a
 * short m runs slower at the same FLOPs) and of the m x k one, plus a fixed cost per call.
 * Linear least squares (gsl_multifit_linear) on the relative residual (t - model) / t; a term
 * whose coefficient comes out negative is dropped (kept at 0) and the rest refitted, the most
 * negative first; s_per_flop must stay positive. Needs at least as many points as terms. */
typedef struct gs_fit_gemm_terms {
    double s_per_flop, s_per_kn, s_per_mk, s_per_call; /* seconds per unit, >= 0 */
    double rms_rel_resid; /* sqrt(mean(((t - model) / model)^2)) */
    size_t n;
} gs_fit_gemm_terms;

gs_status gs_fit_gemm_terms_fit(const double *m, const double *n, const double *k, const double *secs, size_t npts,
                                gs_fit_gemm_terms *out, gs_error *err);

/* The terms' time of one m x n x k GEMM call. */
double gs_gemm_terms_eval(double s_per_flop, double s_per_kn, double s_per_mk, double s_per_call, double m, double n,
                          double k);

/* One scale between measured and modeled rates: measured_i = scale x model_i (a device's GEMMs
 * against the preset's tile model, sim/compute.c, at efficiency 1: the shape's effects are the
 * model's, the fitted scale is the device's large-GEMM efficiency). scale = the median of the
 * ratios measured_i / model_i, so one slow or fast shape cannot move it; points whose ratio
 * lies beyond 4 robust standard deviations of the median (1.4826 x MAD, at least 10% of the
 * scale) are counted as outliers; rms_rel_resid over the others. Non-positive values are
 * errors. */
typedef struct gs_fit_scale {
    double scale;
    double rms_rel_resid; /* sqrt(mean((ratio / scale - 1)^2)) over the points kept */
    size_t n, outliers;
} gs_fit_scale;

gs_status gs_fit_scale_median(const double *measured, const double *model, size_t n, gs_fit_scale *out,
                              gs_error *err);

/* The curve's efficiency at f FLOPs. */
double gs_gemm_curve_eval(gs_gemm_form form, double e_max, double f0_flops, double flops);
const char *gs_gemm_form_name(gs_gemm_form f);

#endif
