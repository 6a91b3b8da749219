/* Calibration fits: robust alpha-beta lines (gsl_multifit_robust, bisquare) and the GEMM
 * efficiency curve (gsl_multifit_nlinear). */
#include "sim/calib.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double gs_calib_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------------- alpha-beta ----- */

/* Robust fit of 1 = a / t_i + g x_i / t_i (no intercept), i.e. t = a + g x with relative
 * residuals; ncols 2 (a, g) or 1 (g only: through the origin). Returns 0 and the fitted
 * coefficients and final weights, -1 on a GSL failure. */
static int robust_rel(const double *x, const double *t, size_t n, int ncols, double *a, double *g, double *weights)
{
    gsl_matrix *X = gsl_matrix_alloc(n, (size_t)ncols);
    gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc((size_t)ncols);
    gsl_matrix *cov = gsl_matrix_alloc((size_t)ncols, (size_t)ncols);
    gsl_multifit_robust_workspace *w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, (size_t)ncols);
    int rc = -1;
    if (!X || !y || !c || !cov || !w)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (ncols == 2) {
            gsl_matrix_set(X, i, 0, 1.0 / t[i]);
            gsl_matrix_set(X, i, 1, x[i] / t[i]);
        } else {
            gsl_matrix_set(X, i, 0, x[i] / t[i]);
        }
        gsl_vector_set(y, i, 1.0);
    }
    int s = gsl_multifit_robust(X, y, c, cov, w);
    if (s != GSL_SUCCESS && s != GSL_EMAXITER)
        goto out;
    gsl_multifit_robust_stats st = gsl_multifit_robust_statistics(w);
    for (size_t i = 0; i < n; i++)
        weights[i] = st.weights ? gsl_vector_get(st.weights, i) : 1.0;
    *a = ncols == 2 ? gsl_vector_get(c, 0) : 0.0;
    *g = gsl_vector_get(c, (size_t)ncols - 1);
    rc = 0;
out:
    gsl_matrix_free(X);
    gsl_vector_free(y);
    gsl_vector_free(c);
    gsl_matrix_free(cov);
    if (w)
        gsl_multifit_robust_free(w);
    return rc;
}

/* The robust fit with alpha >= 0 (a negative intercept is noise around 0: the slope is refitted
 * through the origin). */
static gs_status fit_kept(const double *x, const double *t, size_t n, double *a, double *g, double *wts, gs_error *err)
{
    if (robust_rel(x, t, n, 2, a, g, wts) != 0)
        return gs_error_set(err, GS_ERR_RUNTIME, "alpha-beta fit: gsl_multifit_robust failed");
    if (*a < 0 || !(*g > 0)) {
        if (robust_rel(x, t, n, 1, a, g, wts) != 0 || !(*g > 0))
            return gs_error_set(err, GS_ERR_RUNTIME, "alpha-beta fit: no positive bandwidth fits the points");
        *a = 0;
    }
    return GS_OK;
}

gs_status gs_fit_alpha_beta(const double *bytes, const double *secs, size_t n, gs_fit_ab *out, gs_error *err)
{
    memset(out, 0, sizeof *out);
    if (n < 3)
        return gs_error_set(err, GS_ERR_INPUT, "alpha-beta fit: %zu points, need at least 3", n);
    for (size_t i = 0; i < n; i++)
        if (!(bytes[i] > 0) || !(secs[i] > 0) || !isfinite(secs[i]))
            return gs_error_set(err, GS_ERR_INPUT, "alpha-beta fit: point %zu (%g B, %g s) is not positive", i,
                                bytes[i], secs[i]);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double *wts = malloc(n * sizeof *wts);
    gs_status rc = GS_OK;
    double a = 0, g = 0;
    if (!wts) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "alpha-beta fit: out of memory");
        goto out;
    }
    if ((rc = fit_kept(bytes, secs, n, &a, &g, wts, err)) != GS_OK)
        goto out;
    /* Trimmed refit: a slow outlier's relative residual (t - model) / t stays below 1, so the
     * bisquare weights cannot zero it; judged against the model instead, (t - model) / model,
     * a 10x point is +9. Points beyond 4 robust standard deviations (1.4826 MAD), and beyond
     * 25%, are dropped and the rest refitted. */
    {
        double *r = malloc(n * sizeof *r), *dev = malloc(n * sizeof *dev);
        if (!r || !dev) {
            free(r), free(dev);
            rc = gs_error_set(err, GS_ERR_NOMEM, "alpha-beta fit: out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            double m = a + g * bytes[i];
            r[i] = (secs[i] - m) / m;
            dev[i] = r[i];
        }
        double med = gs_calib_median(dev, n);
        for (size_t i = 0; i < n; i++)
            dev[i] = fabs(r[i] - med);
        double lim = 4.0 * 1.4826 * gs_calib_median(dev, n);
        if (lim < 0.25)
            lim = 0.25;
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            kept += fabs(r[i]) <= lim;
        if (kept < n && kept >= 3) {
            double *xk = malloc(kept * sizeof *xk), *tk = malloc(kept * sizeof *tk), *wk = malloc(kept * sizeof *wk);
            if (xk && tk && wk) {
                size_t j = 0;
                for (size_t i = 0; i < n; i++)
                    if (fabs(r[i]) <= lim)
                        xk[j] = bytes[i], tk[j] = secs[i], j++;
                if ((rc = fit_kept(xk, tk, kept, &a, &g, wk, err)) == GS_OK)
                    for (size_t i = 0; i < n; i++)
                        wts[i] = fabs(r[i]) <= lim ? 1.0 : 0.0;
            }
            free(xk), free(tk), free(wk);
        }
        free(r), free(dev);
        if (rc != GS_OK)
            goto out;
    }
    out->alpha_s = a;
    out->beta_bytes_per_s = 1.0 / g;
    out->n = n;
    /* R^2 in log space and the relative residual, over the points the robust fit kept */
    double mean = 0, sw = 0, ss_res = 0, ss_tot = 0, rel = 0;
    for (size_t i = 0; i < n; i++)
        if (wts[i] >= 0.5) {
            mean += log(secs[i]);
            sw += 1;
        } else {
            out->outliers++;
        }
    mean /= sw > 0 ? sw : 1;
    for (size_t i = 0; i < n; i++) {
        if (wts[i] < 0.5)
            continue;
        double m = a + g * bytes[i], r = log(secs[i]) - log(m);
        ss_res += r * r;
        ss_tot += (log(secs[i]) - mean) * (log(secs[i]) - mean);
        rel += ((secs[i] - m) / m) * ((secs[i] - m) / m);
    }
    out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    out->rms_rel_resid = sw > 0 ? sqrt(rel / sw) : 0;
out:
    free(wts);
    gsl_set_error_handler(old);
    return rc;
}

/* ------------------------------------------------------------------- GEMM curve ----- */

double gs_gemm_curve_eval(gs_gemm_form form, double e_max, double f0_flops, double flops)
{
    if (!(flops > 0) || !(f0_flops > 0))
        return e_max;
    if (form == GS_GEMM_FORM_EXP)
        return e_max * -expm1(-flops / f0_flops);
    return e_max * flops / (flops + f0_flops);
}

const char *gs_gemm_form_name(gs_gemm_form f)
{
    return f == GS_GEMM_FORM_EXP ? "exp" : "hyperbolic";
}

typedef struct curve_data {
    const double *f, *eff;
    size_t n;
    gs_gemm_form form;
} curve_data;

/* r_i = log(model(f_i)) - log(eff_i), parameters (log e_max, log f0). */
static int curve_resid(const gsl_vector *p, void *arg, gsl_vector *r)
{
    const curve_data *d = arg;
    double e_max = exp(gsl_vector_get(p, 0)), f0 = exp(gsl_vector_get(p, 1));
    for (size_t i = 0; i < d->n; i++) {
        double m = gs_gemm_curve_eval(d->form, e_max, f0, d->f[i]);
        gsl_vector_set(r, i, (m > 0 ? log(m) : -700.0) - log(d->eff[i]));
    }
    return GSL_SUCCESS;
}

static int fit_form(const double *f, const double *eff, size_t n, gs_gemm_form form, gs_fit_gemm *out)
{
    curve_data d = {f, eff, n, form};
    gsl_multifit_nlinear_parameters prm = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &prm, n, 2);
    gsl_vector *p0 = gsl_vector_alloc(2);
    int rc = -1;
    if (!w || !p0)
        goto out;
    /* start: the best efficiency seen, and the FLOPs where the curve reaches about half of it */
    double emax = 0, fhalf = 0;
    for (size_t i = 0; i < n; i++)
        if (eff[i] > emax)
            emax = eff[i];
    for (size_t i = 0; i < n; i++)
        if (eff[i] >= 0.5 * emax && (fhalf == 0 || f[i] < fhalf))
            fhalf = f[i];
    gsl_vector_set(p0, 0, log(emax));
    gsl_vector_set(p0, 1, log(fhalf > 0 ? fhalf : 1e6));
    gsl_multifit_nlinear_fdf fdf;
    memset(&fdf, 0, sizeof fdf);
    fdf.f = curve_resid;
    fdf.df = NULL; /* finite differences */
    fdf.n = n;
    fdf.p = 2;
    fdf.params = &d;
    if (gsl_multifit_nlinear_init(p0, &fdf, w) != GSL_SUCCESS)
        goto out;
    int info;
    int s = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-10, NULL, NULL, &info, w);
    if (s != GSL_SUCCESS && s != GSL_EMAXITER)
        goto out;
    gsl_vector *x = gsl_multifit_nlinear_position(w);
    out->form = form;
    out->e_max = exp(gsl_vector_get(x, 0));
    out->f0_flops = exp(gsl_vector_get(x, 1));
    out->n = n;
    double mean = 0, ss_res = 0, ss_tot = 0, rel = 0;
    for (size_t i = 0; i < n; i++)
        mean += eff[i] / (double)n;
    for (size_t i = 0; i < n; i++) {
        double m = gs_gemm_curve_eval(form, out->e_max, out->f0_flops, f[i]);
        ss_res += (eff[i] - m) * (eff[i] - m);
        ss_tot += (eff[i] - mean) * (eff[i] - mean);
        rel += ((eff[i] - m) / m) * ((eff[i] - m) / m);
    }
    out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    out->rms_rel_resid = sqrt(rel / (double)n);
    rc = isfinite(out->e_max) && isfinite(out->f0_flops) ? 0 : -1;
out:
    if (w)
        gsl_multifit_nlinear_free(w);
    gsl_vector_free(p0);
    return rc;
}

gs_status gs_fit_gemm_curve(const double *flops, const double *eff, size_t n, gs_fit_gemm *out, gs_error *err)
{
    memset(out, 0, sizeof *out);
    if (n < 3)
        return gs_error_set(err, GS_ERR_INPUT, "GEMM curve fit: %zu points, need at least 3", n);
    for (size_t i = 0; i < n; i++)
        if (!(flops[i] > 0) || !(eff[i] > 0) || !isfinite(eff[i]))
            return gs_error_set(err, GS_ERR_INPUT, "GEMM curve fit: point %zu (%g FLOP, efficiency %g) is not positive",
                                i, flops[i], eff[i]);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    gs_fit_gemm best;
    int have = 0;
    for (int f = 0; f < GS_GEMM_FORM_COUNT; f++) {
        gs_fit_gemm cand;
        memset(&cand, 0, sizeof cand);
        if (fit_form(flops, eff, n, (gs_gemm_form)f, &cand) == 0 && (!have || cand.rms_rel_resid < best.rms_rel_resid)) {
            best = cand;
            have = 1;
        }
    }
    gsl_set_error_handler(old);
    if (!have)
        return gs_error_set(err, GS_ERR_RUNTIME, "GEMM curve fit: gsl_multifit_nlinear did not converge");
    *out = best;
    return GS_OK;
}

gs_status gs_fit_slowdown(const double *threads, const double *ratio, size_t n, gs_fit_slow *out, gs_error *err)
{
    memset(out, 0, sizeof *out);
    double sxy = 0, sxx = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(threads[i] >= 1) || !(ratio[i] > 0) || !isfinite(ratio[i]))
            return gs_error_set(err, GS_ERR_INPUT, "slowdown fit: point %zu: %g threads, ratio %g (expected >= 1 "
                                "thread and a positive ratio)", i, threads[i], ratio[i]);
        double x = threads[i] - 1;
        sxy += x * (ratio[i] - 1);
        sxx += x * x;
    }
    if (sxx <= 0)
        return gs_error_set(err, GS_ERR_INPUT, "slowdown fit: no point with more than one thread");
    out->s = sxy / sxx > 0 ? sxy / sxx : 0;
    double ss = 0;
    for (size_t i = 0; i < n; i++) {
        double model = 1 + out->s * (threads[i] - 1);
        ss += (ratio[i] - model) / model * ((ratio[i] - model) / model);
    }
    out->rms_rel_resid = sqrt(ss / (double)n);
    out->n = n;
    return GS_OK;
}

double gs_gemm_terms_eval(double s_per_flop, double s_per_kn, double s_per_mk, double s_per_call, double m, double n,
                          double k)
{
    return s_per_flop * 2.0 * m * n * k + s_per_kn * k * n + s_per_mk * m * k + s_per_call;
}

gs_status gs_fit_gemm_terms_fit(const double *m, const double *n, const double *k, const double *secs, size_t npts,
                                gs_fit_gemm_terms *out, gs_error *err)
{
    enum { NT = 4 };
    memset(out, 0, sizeof *out);
    if (npts < NT)
        return gs_error_set(err, GS_ERR_INPUT, "GEMM terms fit: %zu points, need at least %d", npts, NT);
    for (size_t i = 0; i < npts; i++)
        if (!(secs[i] > 0) || !(m[i] > 0) || !(n[i] > 0) || !(k[i] > 0) || !isfinite(secs[i]))
            return gs_error_set(err, GS_ERR_INPUT, "GEMM terms fit: point %zu: %g x %g x %g in %g s", i, m[i], n[i],
                                k[i], secs[i]);
    int active[NT] = {1, 1, 1, 1};
    double coef[NT] = {0};
    gs_status rc = GS_OK;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    for (int pass = 0; pass < NT; pass++) {
        size_t na = 0, col[NT];
        for (int j = 0; j < NT; j++)
            if (active[j])
                col[na++] = (size_t)j;
        gsl_matrix *X = gsl_matrix_alloc(npts, na), *cov = gsl_matrix_alloc(na, na);
        gsl_vector *y = gsl_vector_alloc(npts), *c = gsl_vector_alloc(na);
        gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(npts, na);
        if (!X || !cov || !y || !c || !w) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "GEMM terms fit: out of memory");
        } else {
            for (size_t i = 0; i < npts; i++) {
                double f[NT] = {2.0 * m[i] * n[i] * k[i], k[i] * n[i], m[i] * k[i], 1.0};
                for (size_t a = 0; a < na; a++)
                    gsl_matrix_set(X, i, a, f[col[a]] / secs[i]); /* relative: row / t, target 1 */
                gsl_vector_set(y, i, 1.0);
            }
            double chisq;
            if (gsl_multifit_linear(X, y, c, cov, &chisq, w) != GSL_SUCCESS)
                rc = gs_error_set(err, GS_ERR_RUNTIME, "GEMM terms fit: gsl_multifit_linear failed");
            for (int j = 0; j < NT; j++)
                coef[j] = 0;
            for (size_t a = 0; a < na && rc == GS_OK; a++)
                coef[col[a]] = gsl_vector_get(c, a);
        }
        gsl_matrix_free(X), gsl_matrix_free(cov), gsl_vector_free(y), gsl_vector_free(c);
        if (w)
            gsl_multifit_linear_free(w);
        if (rc != GS_OK)
            break;
        int worst = -1;
        for (int j = 1; j < NT; j++) /* the FLOP term is never dropped */
            if (active[j] && coef[j] < 0 && (worst < 0 || coef[j] < coef[worst]))
                worst = j;
        if (worst < 0)
            break;
        active[worst] = 0;
        coef[worst] = 0;
    }
    gsl_set_error_handler(old);
    if (rc != GS_OK)
        return rc;
    if (!(coef[0] > 0))
        return gs_error_set(err, GS_ERR_INPUT, "GEMM terms fit: no positive time per FLOP (%g s)", coef[0]);
    for (int j = 1; j < NT; j++)
        if (coef[j] < 0)
            coef[j] = 0;
    out->s_per_flop = coef[0], out->s_per_kn = coef[1], out->s_per_mk = coef[2], out->s_per_call = coef[3];
    double ss = 0;
    for (size_t i = 0; i < npts; i++) {
        double mod = gs_gemm_terms_eval(coef[0], coef[1], coef[2], coef[3], m[i], n[i], k[i]);
        ss += (secs[i] - mod) / mod * ((secs[i] - mod) / mod);
    }
    out->rms_rel_resid = sqrt(ss / (double)npts);
    out->n = npts;
    return GS_OK;
}

gs_status gs_fit_scale_median(const double *measured, const double *model, size_t n, gs_fit_scale *out,
                              gs_error *err)
{
    if (n < 1)
        return gs_error_set(err, GS_ERR_INPUT, "scale fit: no points");
    double *r = malloc(3 * n * sizeof *r); /* ratios, deviations, a copy the median reorders */
    if (!r)
        return gs_error_set(err, GS_ERR_NOMEM, "scale fit: out of memory");
    double *dev = r + n, *tmp = r + 2 * n;
    gs_status rc = GS_OK;
    for (size_t i = 0; i < n && rc == GS_OK; i++) {
        if (!(measured[i] > 0) || !(model[i] > 0) || !isfinite(measured[i]) || !isfinite(model[i]))
            rc = gs_error_set(err, GS_ERR_INPUT, "scale fit: point %zu: measured %g, model %g (both must be positive)",
                              i, measured[i], model[i]);
        else
            r[i] = measured[i] / model[i];
    }
    if (rc == GS_OK) {
        memcpy(tmp, r, n * sizeof *r);
        double med = gs_calib_median(tmp, n);
        for (size_t i = 0; i < n; i++)
            dev[i] = fabs(r[i] - med);
        memcpy(tmp, dev, n * sizeof *r);
        double sigma = 1.4826 * gs_calib_median(tmp, n);
        if (sigma < 0.1 * med)
            sigma = 0.1 * med;
        double ss = 0;
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (dev[i] > 4.0 * sigma)
                continue;
            double e = r[i] / med - 1.0;
            ss += e * e;
            kept++;
        }
        *out = (gs_fit_scale){med, kept ? sqrt(ss / (double)kept) : 0.0, n, n - kept};
    }
    free(r);
    return rc;
}
