/* This machine's calibration for `gridstep calibrate`: through a device's driver (or --events)
 * the event-timed measurement of calib/device.c; through the host driver the plan, the
 * measurements (cli/calibrate_kernels.c, cli/calibrate_ranks.c), the fits (sim/calib.c) and the
 * report (cli/calibrate_report.c). The calibration's state lives here for one call. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "calib/device.h"
#include "calib/ops.h"
#include "cli/calib_print.h"
#include "cli/calibrate_cmd.h"
#include "cli/cli_common.h"
#include "cli/progress.h"
#include "sim/calib.h"

/* The measurements gs__calib_progress() will count on the host path, in the order they run:
 * GEMMs, kernels, attention and the rotary embedding, dispatch over 1-8 ranks (alone and across
 * streams), cores (2 passes), concurrency (CALIB_CONC_ROUNDS rounds of 1..kmax threads), the
 * collectives (repeats x sizes x every op and group size, send/recv at 2 ranks only) and a
 * scenario's two steps. */
static uint64_t progress_total(const gs__calib_host *c, const char *scenario)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t kmax = online > 1 ? (uint64_t)online : 1;
    if (kmax > CALIB_MAX_CONC)
        kmax = CALIB_MAX_CONC;
    uint64_t colls = (uint64_t)c->reps * c->nsizes * ((GS_CAL_C_COUNT - 1) * GS_CAL_GROUPS + 1);
    return c->ngemm + (uint64_t)GS_CAL_EW_COUNT * c->new_ + 2 + 2 * CALIB_DISPATCH_SIZES + 2 +
           CALIB_CONC_ROUNDS * kmax + colls + (scenario ? 2 : 0);
}

/* ---- a device's driver --------------------------------------------------------------------------------- */

/* The device calibration's progress, on the command's progress display (calib/device.h). */
static void dev_progress(void *arg, uint64_t done, uint64_t total, const char *what)
{
    gs_progress_update(arg, done, total, what);
}

/* machine.environment of a device calibration's file: the variables that shape what it measures. */
static json_t *dev_environment(void)
{
    json_t *env = json_object();
    static const char *const vars[] = {"GRIDSTEP_CUDA_GEMM", "GRIDSTEP_HOST_GEMM", "GRIDSTEP_CUDA_ATTENTION",
                                       "GRIDSTEP_CUDA_FP8", "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        json_object_set_new(env, vars[i], v ? json_string(v) : json_null());
    }
    return env;
}

/* Through a device's driver (or --events): the measurement timed with its stream events
 * (calib/device.c), its summary and plots; *doc gets the calibration file's document. */
static gs_status calibrate_device(const gs__calib_args *a, gs_progress *prog, json_t **doc, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_calib_dev_opts dopt = {.scenario_path = a->scenario, .quick = a->quick, .small = !a->ops->device_memory,
                              .progress = dev_progress, .progress_arg = prog, .max_ranks = 8,
                              .set = gs_cli_driver_settings()};
    gs_calib_dev *dc = NULL;
    json_t *env = dev_environment();
    gs_status rc = GS_OK;
    dopt.environment = env;
    if (a->scenario) {
        if ((rc = gs_cli_load(a->scenario, &s, &mesh, err)) != GS_OK)
            goto out;
        dopt.scenario = &s, dopt.mesh = &mesh;
    }
    if ((rc = gs_calib_dev_run(a->ops, &dopt, &dc, err)) != GS_OK)
        goto out;
    *doc = gs_calib_dev_json(dc);
    gs_calib_dev_print(dc, stdout);
    if (a->plot && (rc = gs_calib_dev_plot(dc, a->plot, err)) == GS_OK)
        printf("\nplots: %s-gemm.png%s%s%s (data and gnuplot scripts beside them)\n", a->plot,
               json_object_get(*doc, "links") ? ", " : "", json_object_get(*doc, "links") ? a->plot : "",
               json_object_get(*doc, "links") ? "-coll.png" : "");
out:
    gs_calib_dev_free(dc);
    json_decref(env);
    return rc;
}

/* ---- the host driver ----------------------------------------------------------------------------------- */

/* The host path's plan: repeats, the test hook's spell, the shapes, the kernels' and the
 * collectives' sizes, and the count of measurements the progress reports against. */
static gs_status host_plan(gs__calib_host *c, const char *scenario, gs_error *err)
{
    gs_status rc;
    c->reps = c->quick ? 3 : 7;
    if ((rc = gs_cal_spell_parse(&c->spell, getenv("GRIDSTEP_CALIB_SPELL"), err)) != GS_OK)
        return rc;
    if ((rc = gs__calib_pick_shapes(c, scenario, err)) != GS_OK)
        return rc;
    /* elementwise sizes: 2^12 .. 2^20 elements (x4; quick x16) */
    for (uint64_t n = 4096; n <= (1u << 20); n *= c->quick ? 16 : 4)
        c->ew[0][c->new_++].elements = n;
    for (int k = 1; k < GS_CAL_EW_COUNT; k++)
        for (size_t i = 0; i < c->new_; i++)
            c->ew[k][i].elements = c->ew[0][i].elements;
    /* collective sizes: 1 KiB .. 16 MiB (quick: 1 MiB), x4 */
    for (uint64_t b = 1024; b <= (c->quick ? (1u << 20) : (16u << 20)); b *= 4)
        c->sizes[c->nsizes++] = b;
    c->ptotal = progress_total(c, scenario);
    return GS_OK;
}

/* Every measurement of the host path, in the order progress_total counts them. */
static gs_status host_measure(gs__calib_host *c, const char *scenario, gs_error *err)
{
    gs_status rc;
    /* one rank: kernels and dispatch */
    if ((rc = gs__calib_measure_kernels(c, err)) != GS_OK || (rc = gs__calib_measure_dispatch(c, err)) != GS_OK ||
        (rc = gs__calib_measure_cores(c, err)) != GS_OK || (rc = gs__calib_measure_concurrency(c, err)) != GS_OK ||
        (rc = gs__calib_measure_colls(c, err)) != GS_OK)
        return rc;
    gs_cal_spell_note(&c->spell, "ranks");
    if (!scenario)
        return GS_OK;
    if ((rc = gs__calib_measure_exec_share(c, scenario, err)) != GS_OK)
        return rc;
    /* a real step's threads block and wake, and the scheduler treats them unlike the busy GEMM
     * threads: under sched_autogroup the step's own share is the better figure (the busy
     * threads' share when that is larger: the step may not have had work for every core) */
    if (c->autogroup && c->exec_share > c->cores) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        c->cores = online > 0 && c->exec_share > (double)online ? (double)online : c->exec_share;
    }
    return GS_OK;
}

/* The fits: the GEMM efficiency curve and terms, the backward factor, each elementwise kernel's
 * and each collective's alpha-beta line. */
static gs_status host_fit(gs__calib_host *c, gs_error *err)
{
    gs_status rc;
    double fl[CALIB_MAX_SHAPES], eff[CALIB_MAX_SHAPES];
    for (size_t i = 0; i < c->ngemm; i++) {
        fl[i] = 2.0 * (double)c->gemm[i].m * (double)c->gemm[i].n * (double)c->gemm[i].k;
        eff[i] = c->gemm[i].flops_per_s / c->best_flops;
    }
    if ((rc = gs_fit_gemm_curve(fl, eff, c->ngemm, &c->gemm_fit, err)) != GS_OK)
        return rc;
    double gm[CALIB_MAX_SHAPES], gn[CALIB_MAX_SHAPES], gk[CALIB_MAX_SHAPES], gt[CALIB_MAX_SHAPES];
    for (size_t i = 0; i < c->ngemm; i++)
        gm[i] = (double)c->gemm[i].m, gn[i] = (double)c->gemm[i].n, gk[i] = (double)c->gemm[i].k,
        gt[i] = c->gemm[i].secs;
    if ((rc = gs_fit_gemm_terms_fit(gm, gn, gk, gt, c->ngemm, &c->gemm_terms, err)) != GS_OK)
        return rc;
    double r[CALIB_MAX_SHAPES];
    for (size_t i = 0; i < c->ngemm; i++)
        r[i] = c->gemm[i].bwd_secs / (2.0 * c->gemm[i].secs);
    c->bwd_factor = gs_calib_median(r, c->ngemm);
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        double x[CALIB_MAX_SIZES], y[CALIB_MAX_SIZES];
        for (size_t i = 0; i < c->new_; i++)
            x[i] = c->ew[k][i].bytes, y[i] = c->ew[k][i].secs;
        if ((rc = gs_fit_alpha_beta(x, y, c->new_, &c->ew_fit[k], err)) != GS_OK) {
            gs_error_prefix(err, "%s", gs_cal_ew_names[k]);
            return rc;
        }
    }
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++) {
            if (op == GS_CAL_C_P2P && gi > 0)
                break;
            double x[CALIB_MAX_SIZES];
            for (size_t i = 0; i < c->nsizes; i++)
                x[i] = (double)c->sizes[i];
            if ((rc = gs_fit_alpha_beta(x, c->coll_s[op][gi], c->nsizes, &c->coll_fit[op][gi], err)) != GS_OK) {
                gs_error_prefix(err, "%s over %" PRIu64 " ranks", gs_cal_c_names[op], gs_cal_group_sizes[gi]);
                return rc;
            }
            c->coll_fit_ok[op][gi] = 1;
        }
    return GS_OK;
}

/* Through the host driver: plans, measures, fits, prints the summary and the plots; *doc gets
 * the calibration file's document. */
static gs_status calibrate_host(gs__calib_host *c, const gs__calib_args *a, gs_progress *prog, json_t **doc,
                                gs_error *err)
{
    gs_status rc;
    c->rotate = a->warm ? 0 : 1;
    if ((rc = host_plan(c, a->scenario, err)) != GS_OK)
        return rc;
    c->prog = prog;
    if ((rc = host_measure(c, a->scenario, err)) != GS_OK)
        return rc;
    gs_progress_update(prog, c->ptotal, c->ptotal, "fitting");
    if ((rc = host_fit(c, err)) != GS_OK)
        return rc;
    *doc = gs__calib_host_json(c, c->ops->name, a->scenario);
    gs__calib_host_print(c);
    if (a->plot)
        rc = gs__calib_host_plots(c, a->plot, err);
    return rc;
}

gs_status gs__calib_here(const gs__calib_args *a, json_t **doc_out, gs_error *err)
{
    *doc_out = NULL;
    gs__calib_host *c = calloc(1, sizeof *c);
    if (!c)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    c->solo_cpu = -1;
    for (int t = 0; t < CALIB_MAX_CONC; t++)
        c->conc_cpu[t] = -1;
    c->ops = a->ops;
    c->quick = a->quick;
    gs_progress prog;
    gs_progress_init(&prog, "gridstep calibrate", "measurements", !a->quiet);
    json_t *doc = NULL;
    gs_status rc;
    if (c->ops->device_memory || a->events) /* a device's driver (or --events): timed with its stream events */
        rc = calibrate_device(a, &prog, &doc, err);
    else
        rc = calibrate_host(c, a, &prog, &doc, err);
    gs_progress_end(&prog);
    if (rc == GS_OK)
        *doc_out = doc;
    else
        json_decref(doc);
    free(c);
    return rc;
}
