/* What `gridstep calibrate` prints and plots of its measurements (cli/calib_print.h). */
#include "cli/calib_print.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"

void gs_cal_ew_print(FILE *f, const gs_fit_ab fit[GS_CAL_EW_COUNT], const char *extra_name, const gs_fit_ab *extra)
{
    gs_cli_table t;
    gs_cli_table_init(&t, 6);
    gs_cli_table_rowf(&t, "kernel\talpha(us)\tbw(GB/s)\tR^2(log)\trms resid\toutliers");
    for (int k = 0; k <= GS_CAL_EW_COUNT; k++) {
        const gs_fit_ab *x = k < GS_CAL_EW_COUNT ? &fit[k] : extra;
        if (k == GS_CAL_EW_COUNT && !extra_name)
            break;
        gs_cli_table_rowf(&t, "%s\t%.2f\t%.2f\t%.4f\t%.1f%%\t%zu", k < GS_CAL_EW_COUNT ? gs_cal_ew_names[k] : extra_name,
                          x->alpha_s * 1e6, x->beta_bytes_per_s * 1e-9, x->r2, 100 * x->rms_rel_resid, x->outliers);
    }
    gs_cli_table_print(&t, f, 2);
    gs_cli_table_fini(&t);
}

void gs_cal_coll_print(FILE *f, const char *heading, int op, uint64_t ranks, const uint64_t *sizes, size_t nsizes,
                       const double *secs, const gs_fit_ab *fit)
{
    fprintf(f, "\n%s\n", heading);
    double bus = op == GS_CAL_C_P2P ? 1.0 : gs_busbw_factor(gs_cal_c_ops[op], ranks);
    uint64_t per = op == GS_CAL_C_AG || op == GS_CAL_C_RS ? ranks : 1;
    gs_cli_table t;
    gs_cli_table_init(&t, 7);
    gs_cli_table_rowf(&t, "size(B)\tcount\ttype\ttime(us)\talgbw(GB/s)\tbusbw(GB/s)\tfit(us)");
    for (size_t si = 0; si < nsizes; si++) {
        double s = secs[si], sz = (double)sizes[si], algbw = s > 0 ? sz / s * 1e-9 : 0;
        gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\tfloat\t%.2f\t%.3f\t%.3f\t%.2f", sizes[si], sizes[si] / 4 / per,
                          s * 1e6, algbw, algbw * bus, (fit->alpha_s + sz / fit->beta_bytes_per_s) * 1e6);
    }
    gs_cli_table_print(&t, f, 2);
    gs_cli_table_fini(&t);
    fprintf(f, "  fit: latency %.2f us, bandwidth %.3f GB/s (algbw), R^2(log) %.4f, rms residual %.1f%%, %zu outlier%s\n",
            fit->alpha_s * 1e6, fit->beta_bytes_per_s * 1e-9, fit->r2, 100 * fit->rms_rel_resid, fit->outliers,
            fit->outliers == 1 ? "" : "s");
}

gs_status gs_cal_gnuplot(const char *prefix, const char *which, gs_error *err)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s-%s.gp' 2>&1", prefix, which);
    FILE *p = popen(cmd, "r");
    char out[512];
    size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[got] = 0;
    int st = p ? pclose(p) : -1;
    if (st != 0)
        return gs_error_set(err, GS_ERR_RUNTIME, "gnuplot is missing or failed (%s); the data and script are in "
                            "%s-%s.dat/.gp", got ? out : "exit status nonzero", prefix, which);
    return GS_OK;
}

gs_status gs_cal_coll_plot(const char *prefix, const char *title, const gs_cal_series *s, size_t n,
                           const uint64_t *sizes, size_t nsizes, gs_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s-coll.dat", prefix);
    FILE *f = fopen(path, "w");
    if (!f)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# one block per (op, ranks): size_bytes measured_s fitted_s\n");
    for (size_t b = 0; b < n; b++) {
        fprintf(f, "# %s %" PRIu64 "%s%s\n", gs_cal_c_names[s[b].op], s[b].ranks, s[b].label ? " " : "",
                s[b].label ? s[b].label : "");
        for (size_t si = 0; si < nsizes; si++) {
            double sz = (double)sizes[si];
            fprintf(f, "%.0f %.9g %.9g\n", sz, s[b].secs[si], s[b].fit->alpha_s + sz / s[b].fit->beta_bytes_per_s);
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    snprintf(path, sizeof path, "%s-coll.gp", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "set terminal pngcairo noenhanced size 1000,700\nset output '%s-coll.png'\nset logscale xy\n"
               "set xlabel 'size (bytes)'\nset ylabel 'time (s)'\nset key left top\n"
               "set title '%s: measured medians (points) and alpha-beta fits (lines)'\nplot ",
            prefix, title);
    for (size_t b = 0; b < n; b++)
        fprintf(f, "%s'%s-coll.dat' index %zu using 1:2 with points lc %zu title '%s n=%" PRIu64 "%s%s', "
                   "'' index %zu using 1:3 with lines lc %zu notitle",
                b ? ", \\\n     " : "", prefix, b, b + 1, gs_cal_c_names[s[b].op], s[b].ranks, s[b].label ? " " : "",
                s[b].label ? s[b].label : "", b, b + 1);
    fprintf(f, "\n");
    fclose(f);
    return gs_cal_gnuplot(prefix, "coll", err);
}

void gs_cal_spell_note(const gs_cal_spell *s, const char *where)
{
    if (s->count > 0)
        fprintf(stderr, "calibrate: GRIDSTEP_CALIB_SPELL: timed collective calls %ld .. %ld of %ld (%s) slowed by %g s\n",
                s->first, s->first + s->count - 1, s->calls, where, s->delay_s);
}

void gs_calib_dev_print(const gs_calib_dev *c, FILE *f)
{
    double peak, eff;
    gs_calib_dev_gemm_peak(c, &peak, &eff);
    fprintf(f, "calibration through the %s driver (events on its streams), against %s at %s; medians of %d repeats\n",
            c->ops->name, c->gpu, c->precision, c->reps);
    if (strcmp(c->precision, "fp32") != 0)
        fprintf(f, "note: the scenario trains in %s; the driver's kernels run on fp32 buffers and its GEMMs as %s "
                   "(the cuda driver's default for bf16 scenarios is bf16 inputs; GRIDSTEP_CUDA_GEMM and "
                   "GRIDSTEP_HOST_GEMM override), so this file describes what exec runs, not a %s training\n",
                c->precision, c->gemm_math[0] ? c->gemm_math : "fp32", c->precision);
    fprintf(f, "\nGEMM (the driver's linear): measured against the tile model at efficiency 1 (%.1f TFLOP/s peak)\n",
            c->cm.peak_flops * 1e-12);
    gs_cli_table t;
    gs_cli_table_init(&t, 9);
    gs_cli_table_rowf(&t, "m\tn\tk\ttime(us)\tTFLOP/s\tmodel\tratio\tfitted\tbwd/2fwd");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gs_calib_dev_gemm *g = &c->gemm[i];
        gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%.1f\t%.2f\t%.2f\t%.3f\t%s\t%.2f", g->m, g->n, g->k,
                          g->secs * 1e6, g->rate * 1e-12, g->model_rate * 1e-12, g->rate / g->model_rate,
                          g->fitted ? "yes" : "no (memory-bound)", g->bwd_secs / (2.0 * g->secs));
    }
    gs_cli_table_print(&t, f, 2);
    gs_cli_table_fini(&t);
    fprintf(f, "  fit: measured = %.3f x model (median of %zu ratios; rms relative residual %.1f%%, %zu outliers) -> "
               "compute.gemm_efficiency %.3f, peak_flops %.4g\n",
            c->gemm_fit.scale, c->gemm_fit.n, 100 * c->gemm_fit.rms_rel_resid, c->gemm_fit.outliers, eff, peak);
    fprintf(f, "  backward (dx and dw) over twice the forward: median %.3f (compute.gemm_bwd_factor)\n", c->bwd_factor);
    const char *ap = getenv("GRIDSTEP_CUDA_ATTENTION");
    fprintf(f, "  attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ", %s, GRIDSTEP_CUDA_ATTENTION %s): "
               "fwd %.1f us, bwd %.1f us, %.2f TFLOP/s (the schedule's FLOP count; compute.attn_flops)\n",
            c->attn_seq, c->attn_nh, c->attn_hd, c->attn_flash ? "flash" : "probabilities kept",
            ap && ap[0] ? ap : "auto", c->attn_fwd_s * 1e6, c->attn_bwd_s * 1e6, c->attn_flops * 1e-12);
    fprintf(f, "\nelementwise kernels (bytes as the schedule counts them, fp32): t = alpha + bytes / bw\n");
    gs_cal_ew_print(f, c->ew_fit, "copy (read+write)", &c->copy_fit);
    fprintf(f, "  compute.hbm_bw: the copy's %.1f GB/s (the preset says %.1f GB/s)\n",
            c->copy_fit.beta_bytes_per_s * 1e-9, c->cm.hbm_bw * 1e-9);
    fprintf(f, "  rotary embedding: %.4f us per token; a one-element kernel back to back: %.2f us (compute.launch_s)\n",
            c->rope_s * 1e6, c->launch_s * 1e6);
    if (!c->coll_max) {
        fprintf(f, "\ncollectives: not measured (%s)\n", c->coll_note[0] ? c->coll_note : "no group");
        return;
    }
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++) {
            if (!c->coll_ok[op][gi])
                continue;
            uint64_t n = op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi];
            char head[96];
            snprintf(head, sizeof head, "%s over %" PRIu64 " ranks (nccl-tests' columns; float)", gs_cal_c_names[op], n);
            gs_cal_coll_print(f, head, op, n, c->sizes, c->nsizes, c->coll_s[op][gi], &c->coll_fit[op][gi]);
        }
    if (c->coll_note[0])
        fprintf(f, "  larger groups not measured: %s\n", c->coll_note);
}

gs_status gs_calib_dev_plot(const gs_calib_dev *c, const char *prefix, gs_error *err)
{
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s-gemm.dat", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# flops measured_flops_per_s fitted_flops_per_s (scale x tile model) m n k fitted\n");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gs_calib_dev_gemm *g = &c->gemm[i];
        fprintf(f, "%.0f %.6g %.6g %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n",
                2.0 * (double)g->m * (double)g->n * (double)g->k, g->rate, g->model_rate * c->gemm_fit.scale, g->m, g->n,
                g->k, g->fitted);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s-gemm.gp", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "set terminal pngcairo noenhanced size 900,600\nset output '%s-gemm.png'\nset logscale x\n"
               "set xlabel 'FLOPs of one GEMM call (2mnk)'\nset ylabel 'TFLOP/s'\nset key left top\n"
               "set title '%s GEMMs on %s: measured and %.3f x the tile model'\n"
               "plot '%s-gemm.dat' using 1:($2*1e-12) with points pt 7 title 'measured', "
               "'' using 1:($3*1e-12) with points pt 6 title 'fitted model'\n",
            prefix, c->ops->name, c->gpu, c->gemm_fit.scale, prefix);
    fclose(f);
    gs_status rc = gs_cal_gnuplot(prefix, "gemm", err);
    if (rc != GS_OK || !c->coll_max)
        return rc;
    gs_cal_series ser[GS_CAL_C_COUNT * GS_CAL_GROUPS];
    size_t ns = 0;
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++)
            if (c->coll_ok[op][gi])
                ser[ns++] = (gs_cal_series){op, op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi], NULL, c->coll_s[op][gi],
                                            &c->coll_fit[op][gi]};
    char title[96];
    snprintf(title, sizeof title, "%s collectives", c->ops->name);
    return gs_cal_coll_plot(prefix, title, ser, ns, c->sizes, c->nsizes, err);
}

void gs_calib_procs_print(const gs_calib_procs *c, FILE *f)
{
    fprintf(f, "\nbetween processes: %d on %d host%s%s\n", c->procs, c->hosts, c->hosts == 1 ? "" : "s",
            c->regular && c->hosts >= 2 && c->per_host >= 2
                ? (c->regular == 1 ? " in blocks (a host's processes: intra; one per host: inter)"
                                   : " round robin (a host's processes: intra; one per host: inter)")
                : "");
    for (int cl = 0; cl < GS_CALIB_CLASS_COUNT; cl++)
        for (int op = 0; op < GS_CAL_C_COUNT; op++) {
            if (!c->ok[cl][op])
                continue;
            uint64_t n = op == GS_CAL_C_P2P ? 2 : c->nranks[cl];
            char head[128];
            snprintf(head, sizeof head, "%s over %" PRIu64 " processes, %s (nccl-tests' columns; float)",
                     gs_cal_c_names[op], n, gs_calib_class_names[cl]);
            gs_cal_coll_print(f, head, op, n, c->sizes, c->nsizes, c->secs[cl][op], &c->fit[cl][op]);
        }
}
