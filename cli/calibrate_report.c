/* What the host calibration (`gridstep calibrate` on the host driver) writes: the calibration
 * file's document `sim --calib` reads, the summary on standard output, and the gnuplot files of
 * --plot. Everything of the calibration is borrowed; the document is the caller's. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/ops.h"
#include "cli/calib_print.h"
#include "cli/calibrate_cmd.h"
#include "cli/cli_common.h"
#include "sim/calib.h"

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ')
                    p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    fclose(f);
}

/* ---- the calibration file's document ------------------------------------------------------------------- */

/* machine (with sched_autogroup, found by the cores test), date, driver and units. */
static void put_machine(json_t *doc, const gs__calib_host *c, const char *driver)
{
    char host[256] = "unknown", cpu[256], date[64];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_t *mach = json_object();
    json_object_set_new(mach, "hostname", json_string(host));
    json_object_set_new(mach, "cpu", json_string(cpu));
    json_object_set_new(mach, "cores_online", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) > 0)
        json_object_set_new(mach, "load_average_1min", json_real(load[0]));
    json_object_set_new(mach, "sched_autogroup", json_boolean(c->autogroup));
    json_object_set_new(doc, "machine", mach);
    json_object_set_new(doc, "date", json_string(date));
    json_object_set_new(doc, "driver", json_string(driver));
    json_t *units = json_object();
    json_object_set_new(units, "time", json_string("seconds"));
    json_object_set_new(units, "size", json_string("bytes (nccl-tests size; elementwise: the schedule's fp32 count)"));
    json_object_set_new(units, "rate", json_string("FLOP/s, bytes/s"));
    json_object_set_new(doc, "units", units);
}

/* compute: what the sim reads of the machine's compute. */
static json_t *compute_json(const gs__calib_host *c)
{
    json_t *comp = json_object();
    json_object_set_new(comp, "peak_flops", json_real(c->best_flops));
    json_object_set_new(comp, "gemm_efficiency", json_real(1.0));
    json_object_set_new(comp, "hbm_bw", json_real(c->ew_fit[GS_CAL_EW_ADD].beta_bytes_per_s));
    json_object_set_new(comp, "hbm_efficiency", json_real(1.0));
    json_object_set_new(comp, "launch_s", json_real(c->launch_s));
    json_t *lr = json_array();
    for (int w = 0; w < CALIB_DISPATCH_SIZES; w++) {
        json_t *o = json_object();
        json_object_set_new(o, "ranks", json_integer((json_int_t)c->dispatch_ranks[w]));
        json_object_set_new(o, "launch_s", json_real(c->dispatch_s[w]));
        json_object_set_new(o, "wake_s", json_real(c->wake_s[w]));
        json_object_set_new(o, "launch_cpu_s", json_real(c->dispatch_cpu_s[w]));
        json_object_set_new(o, "wake_cpu_s", json_real(c->wake_cpu_s[w]));
        json_array_append_new(lr, o);
    }
    json_object_set_new(comp, "launch_s_by_ranks", lr);
    json_object_set_new(comp, "overlap_slowdown", json_real(1.0));
    json_object_set_new(comp, "cores", json_real(c->cores));
    json_object_set_new(comp, "background_load", json_real(c->background));
    json_object_set_new(comp, "attn_flops", json_real(c->attn_flops));
    json_object_set_new(comp, "gemm_bwd_factor", json_real(c->bwd_factor));
    json_t *gc = json_object();
    json_object_set_new(gc, "form", json_string(gs_gemm_form_name(c->gemm_fit.form)));
    json_object_set_new(gc, "e_max", json_real(fmin(1.0, c->gemm_fit.e_max)));
    json_object_set_new(gc, "f0_flops", json_real(c->gemm_fit.f0_flops));
    json_object_set_new(comp, "gemm_curve", gc);
    json_t *gt = json_object();
    json_object_set_new(gt, "s_per_flop", json_real(c->gemm_terms.s_per_flop));
    json_object_set_new(gt, "s_per_kn", json_real(c->gemm_terms.s_per_kn));
    json_object_set_new(gt, "s_per_mk", json_real(c->gemm_terms.s_per_mk));
    json_object_set_new(gt, "s_per_call", json_real(c->gemm_terms.s_per_call));
    json_object_set_new(comp, "gemm_terms", gt);
    gs_cal_ew_rates_json(comp, c->ew_fit);
    json_object_set_new(comp, "qkv_rope_s_per_token", json_real(c->rope_s));
    json_object_set_new(comp, "concurrency_slowdown", json_real(c->conc_fit.s));
    /* the host driver's collectives copy and sum in the members' own threads (exec/driver_host.c):
     * all of their bandwidth time is work on the shared cores */
    json_object_set_new(comp, "collective_cpu_share", json_real(1.0));
    return comp;
}

/* fits: every fit with its quality, and the method. */
static json_t *fits_json(const gs__calib_host *c)
{
    json_t *fits = json_object();
    json_t *gf = json_object();
    json_object_set_new(gf, "form", json_string(gs_gemm_form_name(c->gemm_fit.form)));
    json_object_set_new(gf, "e_max", json_real(c->gemm_fit.e_max));
    json_object_set_new(gf, "f0_flops", json_real(c->gemm_fit.f0_flops));
    json_object_set_new(gf, "r2", json_real(c->gemm_fit.r2));
    json_object_set_new(gf, "rms_rel_resid", json_real(c->gemm_fit.rms_rel_resid));
    json_object_set_new(fits, "gemm_curve", gf);
    json_t *ef = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++)
        json_object_set_new(ef, gs_cal_ew_names[k], gs_cal_fit_json(0, &c->ew_fit[k], 1));
    json_object_set_new(fits, "elementwise", ef);
    json_t *cf = json_object();
    for (int op = 0; op < GS_CAL_C_COUNT; op++) {
        json_t *o = json_object();
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++)
            if (c->coll_fit_ok[op][gi]) {
                char k[16];
                snprintf(k, sizeof k, "%" PRIu64, op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi]);
                json_object_set_new(o, k, gs_cal_fit_json(0, &c->coll_fit[op][gi], 1));
            }
        json_object_set_new(cf, gs_cal_c_names[op], o);
    }
    json_object_set_new(fits, "collectives", cf);
    json_object_set_new(fits, "method", json_string(
        "medians of repeats; collectives and elementwise kernels: t = alpha + size / beta by robust regression "
        "(bisquare, gsl_multifit_robust) on relative residuals; GEMM: efficiency (rate / best rate) against one "
        "call's FLOPs, e_max f/(f+f0) or e_max (1-exp(-f/f0)) by gsl_multifit_nlinear on log efficiency, the "
        "smaller residual kept"));
    return fits;
}

/* measurements: the medians the fits were made from. */
static json_t *measurements_json(const gs__calib_host *c, const char *scenario)
{
    json_t *meas = json_object();
    if (scenario)
        json_object_set_new(meas, "scenario", json_string(scenario));
    json_object_set_new(meas, "repeats", json_integer(c->reps));
    json_t *ga = json_array();
    for (size_t i = 0; i < c->ngemm; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "m", json_integer((json_int_t)c->gemm[i].m));
        json_object_set_new(o, "n", json_integer((json_int_t)c->gemm[i].n));
        json_object_set_new(o, "k", json_integer((json_int_t)c->gemm[i].k));
        json_object_set_new(o, "time_s", json_real(c->gemm[i].secs));
        json_object_set_new(o, "bwd_time_s", json_real(c->gemm[i].bwd_secs));
        json_object_set_new(o, "flops_per_s", json_real(c->gemm[i].flops_per_s));
        json_array_append_new(ga, o);
    }
    json_object_set_new(meas, "gemm", ga);
    json_t *ea = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        json_t *arr = json_array();
        for (size_t i = 0; i < c->new_; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "elements", json_integer((json_int_t)c->ew[k][i].elements));
            json_object_set_new(o, "bytes", json_real(c->ew[k][i].bytes));
            json_object_set_new(o, "time_s", json_real(c->ew[k][i].secs));
            json_array_append_new(arr, o);
        }
        json_object_set_new(ea, gs_cal_ew_names[k], arr);
    }
    json_object_set_new(meas, "elementwise", ea);
    json_object_set_new(meas, "attention", gs_cal_attn_json(c->attn_seq, c->attn_nh, c->attn_nkv, c->attn_hd, c->attn_flash,
                                                          c->attn_fwd_s, c->attn_bwd_s));
    json_object_set_new(meas, "launch_s", json_real(c->launch_s));
    json_object_set_new(meas, "gemm_flops_1_thread", json_real(c->single_flops));
    if (scenario)
        json_object_set_new(meas, "exec_step_cpu_share", json_real(c->exec_share));
    json_object_set_new(meas, "gemm_flops_all_threads", json_real(c->multi_flops));
    json_t *ct = json_array();
    for (int pass = 0; pass < 2; pass++) {
        json_t *o = json_object();
        json_object_set_new(o, "threads", json_integer((json_int_t)c->cores_threads[pass]));
        json_object_set_new(o, "cpu_share_per_thread", json_real(c->cores_share[pass]));
        json_array_append_new(ct, o);
    }
    json_object_set_new(meas, "cores_test", ct);
    json_t *cc = json_array();
    for (size_t i = 0; i < c->nconc; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "threads", json_integer((json_int_t)c->conc_threads[i]));
        json_object_set_new(o, "cpu_time_ratio", json_real(c->conc_ratio[i]));
        json_array_append_new(cc, o);
    }
    json_object_set_new(meas, "concurrency_test", cc);
    /* where the single-thread kernels and the concurrency threads ran (-1: not pinned) */
    json_object_set_new(meas, "single_thread_cpu", json_integer(c->solo_cpu));
    json_t *cp = json_array();
    for (size_t t = 0; t < c->nconc && t < CALIB_MAX_CONC; t++)
        json_array_append_new(cp, json_integer(c->conc_cpu[t]));
    json_object_set_new(meas, "concurrency_cpus", cp);
    json_object_set_new(meas, "gemm_operands", json_string(c->rotate ? "rotated" : "warm"));
    json_t *co = gs_cal_colls_json(c->sizes, c->nsizes, &c->coll_s[0][0][0], CALIB_MAX_SIZES, c->coll_fit_ok);
    json_object_set_new(meas, "collectives", co);
    return meas;
}

json_t *gs__calib_host_json(const gs__calib_host *c, const char *driver, const char *scenario)
{
    json_t *doc = json_object();
    put_machine(doc, c, driver);
    json_object_set_new(doc, "compute", compute_json(c));
    json_t *links = json_object();
    json_object_set_new(links, "intra", gs_cal_class_json(c->coll_fit, c->coll_fit_ok));
    json_object_set_new(doc, "links", links);
    json_object_set_new(doc, "fits", fits_json(c));
    json_object_set_new(doc, "measurements", measurements_json(c, scenario));
    return doc;
}

/* ---- the summary --------------------------------------------------------------------------------------- */

void gs__calib_host_print(const gs__calib_host *c)
{
    char host[256] = "unknown", cpu[256];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    printf("calibration of %s (%s, %ld cores online), host driver, fp32; medians of %d repeats\n", host, cpu,
           sysconf(_SC_NPROCESSORS_ONLN), c->reps);
    printf("\nGEMM (the driver's linear, one thread, CPU time):\n");
    gs_cli_table t;
    gs_cli_table_init(&t, 9);
    gs_cli_table_rowf(&t, "m\tn\tk\ttime(us)\tGFLOP/s\teff\tfit\tterms(us)\tbwd/2fwd");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gs__calib_gemm_point *g = &c->gemm[i];
        double f = 2.0 * (double)g->m * (double)g->n * (double)g->k;
        gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%.1f\t%.2f\t%.3f\t%.3f\t%.1f\t%.2f", g->m, g->n,
                          g->k, g->secs * 1e6, g->flops_per_s * 1e-9, g->flops_per_s / c->best_flops,
                          gs_gemm_curve_eval(c->gemm_fit.form, c->gemm_fit.e_max, c->gemm_fit.f0_flops, f),
                          1e6 * gs_gemm_terms_eval(c->gemm_terms.s_per_flop, c->gemm_terms.s_per_kn,
                                                   c->gemm_terms.s_per_mk, c->gemm_terms.s_per_call, (double)g->m,
                                                   (double)g->n, (double)g->k),
                          g->bwd_secs / (2.0 * g->secs));
    }
    gs_cli_table_print(&t, stdout, 2);
    gs_cli_table_fini(&t);
    printf("  best %.2f GFLOP/s; fit (%s): eff = %.3f x %s, f0 = %.3g FLOP; R^2 %.3f, rms relative residual %.1f%%\n",
           c->best_flops * 1e-9, gs_gemm_form_name(c->gemm_fit.form), c->gemm_fit.e_max,
           c->gemm_fit.form == GS_GEMM_FORM_EXP ? "(1 - exp(-f/f0))" : "f / (f + f0)", c->gemm_fit.f0_flops,
           c->gemm_fit.r2, 100 * c->gemm_fit.rms_rel_resid);
    printf("  terms (compute.gemm_terms, used by the sim): t = 2mnk / %.2f GFLOP/s + kn x %.3g ns + mk x %.3g ns + "
           "%.2f us; rms relative residual %.1f%%\n", 1e-9 / c->gemm_terms.s_per_flop, c->gemm_terms.s_per_kn * 1e9,
           c->gemm_terms.s_per_mk * 1e9, c->gemm_terms.s_per_call * 1e6, 100 * c->gemm_terms.rms_rel_resid);
    printf("  backward (linear_bwd: dx and dw) over twice the forward: median %.3f (compute.gemm_bwd_factor)\n",
           c->bwd_factor);
    printf("  attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ", %s): fwd %.1f us, bwd %.1f us, %.2f GFLOP/s "
           "(the schedule's FLOP count)\n", c->attn_seq, c->attn_nh, c->attn_hd,
           c->attn_flash ? "flash kernels" : "probabilities kept", c->attn_fwd_s * 1e6,
           c->attn_bwd_s * 1e6, c->attn_flops * 1e-9);
    printf("\nelementwise kernels (bytes as the schedule counts them, fp32): t = alpha + bytes / bw\n");
    gs_cal_ew_print(stdout, c->ew_fit, NULL, NULL);
    printf("  rotary embedding (q and k, %" PRIu64 " + %" PRIu64 " heads of %" PRIu64 "): %.2f us per token "
           "(compute.qkv_rope_s_per_token)\n", c->attn_nh, c->attn_nkv, c->attn_hd, c->rope_s * 1e6);
    printf("  GEMM operands: %s\n", c->rotate ? "rotated over sets beyond the caches (as a step finds them)"
                                               : "warm (--warm: the same operands every call)");
    printf("\nconcurrency (the scenario's GEMMs, k threads at once, the slowest one's CPU time over one "
           "thread's, median of 5 rounds):");
    for (size_t i = 0; i < c->nconc; i++)
        printf(" %.3f with %" PRIu64 "%s", c->conc_ratio[i], c->conc_threads[i], i + 1 < c->nconc ? "," : "");
    printf("\n  fit: 1 + s (k - 1), s = %.3f (compute.concurrency_slowdown), rms residual %.1f%%\n", c->conc_fit.s,
           100 * c->conc_fit.rms_rel_resid);
    if (c->solo_cpu >= 0) {
        printf("  pinned: the single-thread kernels and thread 1 on CPU %d, threads 2.. on CPUs", c->solo_cpu);
        for (size_t q = 1; q < c->nconc && q < CALIB_MAX_CONC; q++)
            printf("%s%d", q > 1 ? "," : " ", c->conc_cpu[q]);
        printf("\n");
    } else
        printf("  not pinned (no CPU affinity): the one-thread reference may not be the GEMM fit's CPU\n");
    printf("\ndispatch per event (+ a cross-stream wake-up):");
    for (int w = 0; w < CALIB_DISPATCH_SIZES; w++)
        printf(" %.1f (+%.1f) us with %" PRIu64 " rank%s%s", c->dispatch_s[w] * 1e6, c->wake_s[w] * 1e6,
               c->dispatch_ranks[w], c->dispatch_ranks[w] > 1 ? "s" : "", w + 1 < CALIB_DISPATCH_SIZES ? "," : "");
    printf("\n  of which CPU work (the process's CPU time per event, every thread woken):");
    for (int w = 0; w < CALIB_DISPATCH_SIZES; w++)
        printf(" %.1f (+%.1f) us%s", c->dispatch_cpu_s[w] * 1e6, c->wake_cpu_s[w] * 1e6, w + 1 < CALIB_DISPATCH_SIZES ? "," : "");
    printf("\nscheduler: %s\n", c->autogroup ? "sched_autogroup (fair between sessions): cores = this process's share"
                                                  : "fair between threads: cores = CPUs, with the other runnable threads");
    if (c->exec_ranks)
        printf("a training step of the scenario (%" PRIu64 " ranks): the process used %.2f cores (CPU time / wall)\n",
               c->exec_ranks, c->exec_share);
    printf("cores: %.2f, other runnable threads: %.2f (CPU share per thread: %.3f with "
           "%" PRIu64 " threads, %.3f with %" PRIu64 "; 128^3 GEMMs, one thread in CPU time %.2f GFLOP/s)\n",
           c->cores, c->background, c->cores_share[0], c->cores_threads[0], c->cores_share[1],
           c->cores_threads[1], c->single_flops * 1e-9);
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++) {
            uint64_t n = op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi];
            if (op == GS_CAL_C_P2P && gi > 0)
                break;
            char head[96];
            snprintf(head, sizeof head, "%s, %" PRIu64 " ranks (host threads, shared memory):", gs_cal_c_names[op], n);
            gs_cal_coll_print(stdout, head, op, n, c->sizes, c->nsizes, c->coll_s[op][gi], &c->coll_fit[op][gi]);
        }
}

/* ---- plots --------------------------------------------------------------------------------------------- */

gs_status gs__calib_host_plots(const gs__calib_host *c, const char *prefix, gs_error *err)
{
    gs_cal_series ser[GS_CAL_C_COUNT * GS_CAL_GROUPS];
    size_t ns = 0;
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS && !(op == GS_CAL_C_P2P && gi > 0); gi++)
            ser[ns++] = (gs_cal_series){op, op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi], NULL, c->coll_s[op][gi],
                                        &c->coll_fit[op][gi]};
    gs_status rc = gs_cal_coll_plot(prefix, "host collectives", ser, ns, c->sizes, c->nsizes, err);
    if (rc != GS_OK)
        return rc;
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s-gemm.dat", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# flops efficiency fitted m n k\n");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gs__calib_gemm_point *g = &c->gemm[i];
        double fl = 2.0 * (double)g->m * (double)g->n * (double)g->k;
        fprintf(f, "%.0f %.6f %.6f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", fl, g->flops_per_s / c->best_flops,
                gs_gemm_curve_eval(c->gemm_fit.form, c->gemm_fit.e_max, c->gemm_fit.f0_flops, fl), g->m, g->n, g->k);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s-gemm.gp", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "set terminal pngcairo noenhanced size 900,600\nset output '%s-gemm.png'\nset logscale x\n"
               "set xlabel 'FLOPs of one GEMM call (2mnk)'\nset ylabel 'efficiency (rate / best rate)'\n"
               "set yrange [0:1.1]\nset key left top\nset title 'host GEMM efficiency'\n",
            prefix);
    if (c->gemm_fit.form == GS_GEMM_FORM_EXP)
        fprintf(f, "f(x) = %.9g * (1 - exp(-x / %.9g))\n", c->gemm_fit.e_max, c->gemm_fit.f0_flops);
    else
        fprintf(f, "f(x) = %.9g * x / (x + %.9g)\n", c->gemm_fit.e_max, c->gemm_fit.f0_flops);
    fprintf(f, "set samples 200\nplot '%s-gemm.dat' using 1:2 with points pt 7 title 'measured', "
               "[1e4:1e10] f(x) with lines title 'fit (%s)'\n", prefix, gs_gemm_form_name(c->gemm_fit.form));
    fclose(f);
    if ((rc = gs_cal_gnuplot(prefix, "gemm", err)) != GS_OK)
        return rc;
    printf("\nplots: %s-coll.png, %s-gemm.png (data and gnuplot scripts beside them)\n", prefix, prefix);
    return GS_OK;
}
