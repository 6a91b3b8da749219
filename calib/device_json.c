/* The device calibration's file: the calibration document of a measurement (calib/device.h). */
#define _GNU_SOURCE /* gethostname */
#include "calib/device.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "calib/ops.h"
#include "sim/calib.h"

/* GEMM efficiency and peak as the file states them: the preset's peak and the fitted scale, or
 * (a scale above 1: the device beats the preset's peak, e.g. boost clocks) the peak scaled and
 * efficiency 1. */
void gs_calib_dev_gemm_peak(const gs_calib_dev *c, double *peak, double *eff)
{
    double s = c->gemm_fit.scale;
    *peak = s > 1.0 ? c->cm.peak_flops * s : c->cm.peak_flops;
    *eff = s > 1.0 ? 1.0 : s;
}

json_t *gs_calib_dev_json(const gs_calib_dev *c)
{
    json_t *doc = json_object();
    char host[256] = "unknown", date[64];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_t *mach = json_object();
    json_object_set_new(mach, "hostname", json_string(host));
    json_object_set_new(mach, "gpu_preset", json_string(c->gpu));
    json_object_set_new(mach, "precision", json_string(c->precision));
    json_object_set_new(mach, "scenario", json_string(c->scenario));
    json_object_set_new(mach, "environment", c->o.environment ? json_deep_copy(c->o.environment) : json_object());
    json_object_set_new(mach, "gemm_math", c->gemm_math[0] ? json_string(c->gemm_math) : json_null());
    json_object_set_new(doc, "machine", mach);
    json_object_set_new(doc, "date", json_string(date));
    json_object_set_new(doc, "driver", json_string(c->ops->name));
    json_t *units = json_object();
    json_object_set_new(units, "time", json_string("seconds"));
    json_object_set_new(units, "size", json_string("bytes (nccl-tests size; elementwise: the schedule's fp32 count)"));
    json_object_set_new(units, "rate", json_string("FLOP/s, bytes/s"));
    json_object_set_new(doc, "units", units);

    double peak, eff;
    gs_calib_dev_gemm_peak(c, &peak, &eff);
    json_t *comp = json_object();
    json_object_set_new(comp, "peak_flops", json_real(peak));
    json_object_set_new(comp, "gemm_efficiency", json_real(eff));
    json_object_set_new(comp, "gemm_bwd_factor", json_real(c->bwd_factor));
    json_object_set_new(comp, "hbm_bw", json_real(c->copy_fit.beta_bytes_per_s));
    json_object_set_new(comp, "hbm_efficiency", json_real(1.0));
    json_object_set_new(comp, "launch_s", json_real(c->launch_s));
    json_object_set_new(comp, "attn_flops", json_real(c->attn_flops));
    gs_cal_ew_rates_json(comp, c->ew_fit);
    json_object_set_new(comp, "qkv_rope_s_per_token", json_real(c->rope_s));
    json_object_set_new(doc, "compute", comp);

    if (c->coll_max) {
        json_t *links = json_object();
        json_object_set_new(links, "intra", gs_cal_class_json(c->coll_fit, c->coll_ok));
        json_object_set_new(doc, "links", links);
    }

    json_t *fits = json_object(), *gs = json_object();
    json_object_set_new(gs, "model", json_string("the preset's tile model (sim/compute.c) at efficiency 1"));
    json_object_set_new(gs, "scale", json_real(c->gemm_fit.scale));
    json_object_set_new(gs, "rms_rel_resid", json_real(c->gemm_fit.rms_rel_resid));
    json_object_set_new(gs, "points", json_integer((json_int_t)c->gemm_fit.n));
    json_object_set_new(gs, "outliers", json_integer((json_int_t)c->gemm_fit.outliers));
    json_object_set_new(fits, "gemm_scale", gs);
    json_t *ef = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++)
        json_object_set_new(ef, gs_cal_ew_names[k], gs_cal_fit_json(0, &c->ew_fit[k], 1));
    json_object_set_new(fits, "elementwise", ef);
    json_object_set_new(fits, "copy", gs_cal_fit_json(0, &c->copy_fit, 1));
    json_t *cf = json_object();
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GS_CAL_GROUPS; gi++)
            if (c->coll_ok[op][gi]) {
                char k[48];
                snprintf(k, sizeof k, "%s/%" PRIu64, gs_cal_c_names[op], op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[gi]);
                json_object_set_new(cf, k, gs_cal_fit_json(0, &c->coll_fit[op][gi], 1));
            }
    json_object_set_new(fits, "collectives", cf);
    json_object_set_new(doc, "fits", fits);

    json_t *meas = json_object(), *ga = json_array();
    for (size_t i = 0; i < c->ngemm; i++) {
        const gs_calib_dev_gemm *g = &c->gemm[i];
        json_t *p = json_object();
        json_object_set_new(p, "m", json_integer((json_int_t)g->m));
        json_object_set_new(p, "n", json_integer((json_int_t)g->n));
        json_object_set_new(p, "k", json_integer((json_int_t)g->k));
        json_object_set_new(p, "time_s", json_real(g->secs));
        json_object_set_new(p, "bwd_time_s", json_real(g->bwd_secs));
        json_object_set_new(p, "flops_per_s", json_real(g->rate));
        json_object_set_new(p, "model_flops_per_s", json_real(g->model_rate));
        json_object_set_new(p, "fitted", json_boolean(g->fitted));
        json_array_append_new(ga, p);
    }
    json_object_set_new(meas, "gemm", ga);
    json_t *ea = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        json_t *arr = json_array();
        for (size_t i = 0; i < c->new_; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "elements", json_integer((json_int_t)c->ew_n[k][i]));
            json_object_set_new(o, "bytes", json_real(gs_cal_ew_bytes[k] * (double)c->ew_n[k][i]));
            json_object_set_new(o, "time_s", json_real(c->ew_s[k][i]));
            json_array_append_new(arr, o);
        }
        json_object_set_new(ea, gs_cal_ew_names[k], arr);
    }
    json_object_set_new(meas, "elementwise", ea);
    json_t *cp = json_array();
    for (size_t i = 0; i < c->new_; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "bytes_moved", json_real(8.0 * (double)c->ew_elems[i]));
        json_object_set_new(o, "time_s", json_real(c->copy_s[i]));
        json_array_append_new(cp, o);
    }
    json_object_set_new(meas, "copy", cp);
    json_object_set_new(meas, "attention", gs_cal_attn_json(c->attn_seq, c->attn_nh, c->attn_nkv, c->attn_hd, c->attn_flash,
                                                          c->attn_fwd_s, c->attn_bwd_s));
    json_object_set_new(meas, "launch_s", json_real(c->launch_s));
    json_t *co = gs_cal_colls_json(c->sizes, c->nsizes, &c->coll_s[0][0][0], GS_CALIB_DEV_MAX_SIZES, c->coll_ok);
    json_object_set_new(meas, "collectives", co);
    if (c->coll_note[0])
        json_object_set_new(meas, "collectives_note", json_string(c->coll_note));
    json_object_set_new(doc, "measurements", meas);
    return doc;
}
