/* The calibration's driver calls (calib/ops.h). */
#include "calib/ops.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "kernels/dropout.h"

const char *const gs_cal_ew_names[GS_CAL_EW_COUNT] = {"adamw",       "rmsnorm",    "swiglu",   "add",      "xent",
                                               "embed",       "rmsnorm_bwd", "swiglu_bwd", "xent_bwd", "embed_bwd"};
/* bytes per element the schedule counts in fp32 (engine/build*.c): the optimizer 2 x 8 + 2 x 4,
 * a norm 5 x 4 (backward 10 x 4), SwiGLU 3 x 4 (backward 6 x 4); add: read y and x, write y;
 * the loss per logit as strategy.cross_entropy fused counts it (the kernels exec runs:
 * gs_xent_bytes_per_logit(GS_XENT_FUSED, 4, bwd), 8 each way); the embedding 4 per output
 * element (backward 8) */
const double gs_cal_ew_bytes[GS_CAL_EW_COUNT] = {24, 20, 12, 12, 8, 4, 40, 24, 8, 8};

const char *const gs_cal_c_names[GS_CAL_C_COUNT] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast",
                                                     "send_recv"};
const gs_coll_op gs_cal_c_ops[GS_CAL_C_COUNT] = {GS_COLL_ALLGATHER, GS_COLL_REDUCE_SCATTER, GS_COLL_ALLREDUCE,
                                                 GS_COLL_BROADCAST, GS_COLL_COUNT};

void gs_cal_gemm_fwd(void *arg, gs_drv_stream *s)
{
    gs_cal_gemm *a = arg;
    size_t i = a->copies > 1 ? a->next++ % a->copies : 0;
    a->ops->k.linear_fwd(s, a->x + i * a->m * a->k, a->w + i * a->n * a->k, a->y + i * a->m * a->n, a->m, a->k, a->n);
}

void gs_cal_gemm_bwd(void *arg, gs_drv_stream *s)
{
    gs_cal_gemm *a = arg;
    size_t i = a->copies > 1 ? a->next++ % a->copies : 0;
    a->ops->k.linear_bwd(s, a->x + i * a->m * a->k, a->w + i * a->n * a->k, a->y + i * a->m * a->n,
                       a->dx + i * a->m * a->k, a->dw + i * a->n * a->k, a->m, a->k, a->n);
}

void gs_cal_ew_call(void *arg, gs_drv_stream *s)
{
    gs_cal_ew *e = arg;
    size_t t = e->n / e->h;
    const int32_t *tok = (const int32_t *)e->rstd;
    double loss = 0;
    switch (e->kind) {
    case GS_CAL_EW_ADAMW: e->ops->k.adamw(s, e->a, e->b, e->m, e->v, e->n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1); break;
    case GS_CAL_EW_RMSNORM:
        if (e->calls++ % 2) { /* the layer's second norm: x + attention output first */
            e->ops->copy(e->d, s, e->y, e->a, e->n * sizeof(float));
            e->ops->k.add(s, e->y, e->b, e->n);
        }
        e->ops->k.rmsnorm_fwd(s, e->a, e->m, e->y + e->n, e->v, t, e->h, 1e-5f);
        break;
    case GS_CAL_EW_RMSNORM_BWD:
        e->ops->k.rmsnorm_bwd(s, e->a, e->m, e->m, e->b, e->y, e->v, t, e->h);
        e->ops->k.add(s, e->y, e->b, e->n);
        break;
    case GS_CAL_EW_SWIGLU: e->ops->k.swiglu_fwd(s, e->a, e->y, t, e->h); break;
    case GS_CAL_EW_SWIGLU_BWD: e->ops->k.swiglu_bwd(s, e->a, e->b, e->y, t, e->h); break;
    case GS_CAL_EW_XENT:
        e->ops->k.xent_stats(s, e->a, tok, t, 0, e->h, e->m);
        e->ops->k.xent_combine(s, e->m, 1, t, e->v, &loss);
        break;
    case GS_CAL_EW_XENT_BWD: e->ops->k.xent_bwd(s, e->a, tok, e->v, t, 0, e->h, 1e-3f, e->y); break;
    case GS_CAL_EW_EMBED: e->ops->k.embed_fwd(s, tok, t, e->a, 0, 2 * t, e->h, e->y); break;
    case GS_CAL_EW_EMBED_BWD: e->ops->k.embed_bwd(s, tok, t, e->b, 0, 2 * t, e->h, e->a); break;
    default: e->ops->k.add(s, e->y, e->a, e->n); break;
    }
}

void gs_cal_attn_dropout(gs_dropout *d, int dropout, double rate, uint64_t seq)
{
    memset(d, 0, sizeof *d);
    d->threshold = dropout ? gs_dropout_threshold(rate) : 0;
    if (!d->threshold)
        return;
    d->scale = (float)(1.0 / (1.0 - d->threshold / 16777216.0));
    d->key = gs_dropout_site_key(0, 0, GS_DROP_ATTN, 0);
    d->seq_len = seq;
}

void gs_cal_attn_call(void *arg, gs_drv_stream *s)
{
    gs_cal_attn *a = arg;
    size_t ldq = a->nh * a->hd, ldkv = a->nkv * a->hd;
    const gs_dropout *dr = a->drop.threshold ? &a->drop : NULL;
    if (a->flash && !a->bwd)
        a->ops->k.attn_fwd_flash(s, a->q, ldq, a->k, a->v, ldkv, a->o, ldq, a->p, 1, a->seq, a->nh, a->nkv, a->hd, dr);
    else if (a->flash)
        a->ops->k.attn_bwd_flash(s, a->q, ldq, a->k, a->v, ldkv, a->o, a->p, a->dout, ldq, a->dq, a->dk, a->dv, 1,
                               a->seq, a->nh, a->nkv, a->hd, dr);
    else if (!a->bwd)
        a->ops->k.attn_fwd(s, a->q, ldq, a->k, a->v, ldkv, a->o, ldq, a->p, 1, a->seq, a->nh, a->nkv, a->hd, dr);
    else
        a->ops->k.attn_bwd(s, a->q, ldq, a->k, a->v, ldkv, a->p, a->dout, ldq, a->dq, a->dk, a->dv, 1, a->seq, a->nh,
                         a->nkv, a->hd, dr);
}

void gs_cal_rope_call(void *arg, gs_drv_stream *s)
{
    gs_cal_rope *r = arg;
    size_t ld = (r->nh + 2 * r->nkv) * r->hd;
    float *q = r->qkv, *k = r->qkv + r->nh * r->hd;
    if (!r->bwd) {
        r->ops->k.rope_fwd(s, q, r->seq, r->seq, r->nh, r->hd, ld, 10000.0f);
        r->ops->k.rope_fwd(s, k, r->seq, r->seq, r->nkv, r->hd, ld, 10000.0f);
    } else {
        r->ops->k.rope_bwd(s, q, r->seq, r->seq, r->nh, r->hd, ld, 10000.0f);
        r->ops->k.rope_bwd(s, k, r->seq, r->seq, r->nkv, r->hd, ld, 10000.0f);
    }
}

json_t *gs_cal_fit_json(uint64_t ranks, const gs_fit_ab *f, int stats)
{
    json_t *o = json_object();
    if (ranks)
        json_object_set_new(o, "ranks", json_integer((json_int_t)ranks));
    json_object_set_new(o, "alpha_s", json_real(f->alpha_s));
    json_object_set_new(o, "beta_bytes_per_s", json_real(f->beta_bytes_per_s));
    if (stats) {
        json_object_set_new(o, "r2_log", json_real(f->r2));
        json_object_set_new(o, "rms_rel_resid", json_real(f->rms_rel_resid));
        json_object_set_new(o, "points", json_integer((json_int_t)f->n));
        json_object_set_new(o, "outliers", json_integer((json_int_t)f->outliers));
    }
    return o;
}

void gs_cal_ew_rates_json(json_t *compute, const gs_fit_ab fit[GS_CAL_EW_COUNT])
{
    json_t *ew = json_object(), *ewb = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s", gs_cal_ew_names[k]);
        if (k >= GS_CAL_EW_FIRST_BWD)
            nm[strlen(nm) - 4] = 0; /* "_bwd" */
        json_object_set_new(k >= GS_CAL_EW_FIRST_BWD ? ewb : ew, nm, json_real(fit[k].beta_bytes_per_s));
    }
    json_object_set_new(compute, "elementwise_bw", ew);
    json_object_set_new(compute, "elementwise_bw_bwd", ewb);
}

const uint64_t gs_cal_group_sizes[GS_CAL_GROUPS] = {2, 4, 8};

json_t *gs_cal_class_json(const gs_fit_ab fit[GS_CAL_C_COUNT][GS_CAL_GROUPS], const int ok[GS_CAL_C_COUNT][GS_CAL_GROUPS])
{
    json_t *cls = json_object();
    for (int op = 0; op < GS_CAL_C_COUNT; op++) {
        if (op == GS_CAL_C_P2P) {
            if (ok[op][0])
                json_object_set_new(cls, gs_cal_c_names[op], gs_cal_fit_json(0, &fit[op][0], 0));
            continue;
        }
        json_t *arr = json_array();
        for (int g = 0; g < GS_CAL_GROUPS; g++)
            if (ok[op][g])
                json_array_append_new(arr, gs_cal_fit_json(gs_cal_group_sizes[g], &fit[op][g], 0));
        json_object_set_new(cls, gs_cal_c_names[op], arr);
    }
    return cls;
}

json_t *gs_cal_points_json(const uint64_t *sizes, const double *secs, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "size", json_integer((json_int_t)sizes[i]));
        json_object_set_new(p, "time_s", json_real(secs[i]));
        json_array_append_new(arr, p);
    }
    return arr;
}

json_t *gs_cal_colls_json(const uint64_t *sizes, size_t nsizes, const double *secs, size_t max_sizes,
                          const int ok[GS_CAL_C_COUNT][GS_CAL_GROUPS])
{
    json_t *co = json_object();
    for (int op = 0; op < GS_CAL_C_COUNT; op++) {
        json_t *o = json_object();
        for (int g = 0; g < GS_CAL_GROUPS; g++) {
            if (!ok[op][g])
                continue;
            char k[16];
            snprintf(k, sizeof k, "%" PRIu64, op == GS_CAL_C_P2P ? 2 : gs_cal_group_sizes[g]);
            json_object_set_new(o, k, gs_cal_points_json(sizes, secs + ((size_t)op * GS_CAL_GROUPS + (size_t)g) * max_sizes,
                                                         nsizes));
        }
        json_object_set_new(co, gs_cal_c_names[op], o);
    }
    return co;
}

json_t *gs_cal_attn_json(uint64_t seq, uint64_t heads, uint64_t kv_heads, uint64_t head_dim, int flash, double fwd_s,
                         double bwd_s)
{
    json_t *at = json_object();
    json_object_set_new(at, "flash", json_boolean(flash));
    json_object_set_new(at, "seq", json_integer((json_int_t)seq));
    json_object_set_new(at, "heads", json_integer((json_int_t)heads));
    json_object_set_new(at, "kv_heads", json_integer((json_int_t)kv_heads));
    json_object_set_new(at, "head_dim", json_integer((json_int_t)head_dim));
    json_object_set_new(at, "fwd_s", json_real(fwd_s));
    json_object_set_new(at, "bwd_s", json_real(bwd_s));
    return at;
}

double gs_cal_elapsed(const gs_driver_ops *ops, gs_drv *d, const gs_drv_event *a, const gs_drv_event *b)
{
    if (ops->event_elapsed_s)
        return ops->event_elapsed_s(d, a, b);
    return ops->event_time_s(d, b) - ops->event_time_s(d, a);
}

gs_status gs_cal_spell_parse(gs_cal_spell *s, const char *v, gs_error *err)
{
    memset(s, 0, sizeof *s);
    if (!v || !*v)
        return GS_OK;
    char tail;
    if (sscanf(v, "%ld:%ld:%lf%c", &s->first, &s->count, &s->delay_s, &tail) != 3 || s->first < 0 || s->count <= 0 ||
        !(s->delay_s > 0) || s->delay_s > 10) {
        memset(s, 0, sizeof *s);
        return gs_error_set(err, GS_ERR_INPUT, "GRIDSTEP_CALIB_SPELL: found '%s', expected FIRST:COUNT:DELAY (rank 0's "
                            "timed collective calls FIRST >= 0 .. FIRST + COUNT - 1 slowed by 0 < DELAY <= 10 s)", v);
    }
    return GS_OK;
}

double gs_cal_spell_next(gs_cal_spell *s)
{
    if (s->count <= 0)
        return 0.0;
    long k = s->calls++;
    return k >= s->first && k < s->first + s->count ? s->delay_s : 0.0;
}

void gs_cal_sleep(double secs)
{
    struct timespec ts = {(time_t)secs, (long)((secs - floor(secs)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
