/* `gridstep calibrate` through a device driver, timed with its stream events (calib/device.h). */
#include "calib/device.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/ops.h"
#include "engine/schedule.h"
#include "sim/calib.h"
#include "sim/collective.h"
#include "sim/compute.h"


/* A measurement starts: counts it and reports the share finished (at most ptotal - 1 until the
 * end: the count is planned by progress_total). Called by one thread at a time (the collectives'
 * rank 0 while the others measure with it). */
static void progress(gs_calib_dev *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(gs_calib_dev *c, const char *fmt, ...)
{
    if (!c->o.progress)
        return;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    uint64_t done = c->pdone < c->ptotal ? c->pdone : c->ptotal - 1;
    c->pdone++;
    c->o.progress(c->o.progress_arg, done, c->ptotal, what);
}

/* ---- timing: a batch of calls between two stream events ---------------------------------------------- */

typedef void (*dev_call)(void *arg, gs_drv_stream *s);

typedef struct dev_batch {
    dev_call fn;
    void *arg;
    size_t calls;
} dev_batch;

static gs_status batch_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    (void)err;
    dev_batch *b = arg;
    for (size_t i = 0; i < b->calls; i++)
        b->fn(b->arg, s);
    return GS_OK;
}

typedef struct dev_timer {
    const gs_driver_ops *ops;
    gs_drv *d;
    gs_drv_stream *s;
    gs_drv_event *e0, *e1;
} dev_timer;

/* Seconds between e0 and e1 around `calls` calls of fn issued on the stream. */
static gs_status timed(const dev_timer *t, dev_call fn, void *arg, size_t calls, double *secs, gs_error *err)
{
    dev_batch b = {fn, arg, calls};
    gs_status rc;
    if ((rc = t->ops->event_record(t->d, t->s, t->e0, err)) != GS_OK ||
        (rc = t->ops->launch(t->d, t->s, batch_fn, &b, err)) != GS_OK ||
        (rc = t->ops->event_record(t->d, t->s, t->e1, err)) != GS_OK || (rc = t->ops->stream_sync(t->d, t->s, err)) != GS_OK)
        return rc;
    if (t->ops->aborted(t->d, err))
        return GS_ERR_RUNTIME;
    *secs = gs_cal_elapsed(t->ops, t->d, t->e0, t->e1);
    return GS_OK;
}

static size_t batch_calls(double target, double per_call)
{
    size_t calls = per_call > 0 ? (size_t)ceil(target / per_call) : 1000;
    return calls < 1 ? 1 : calls > 1000 ? 1000 : calls;
}

/* Median seconds per call of fn: one cold call and a warm-up batch sized from it, then c->reps
 * timed batches sized from the warm-up (the first call carries one-time costs: library setup,
 * lazy kernel loading), each about target seconds of work (1 .. 1000 calls). */
static gs_status time_calls(const gs_calib_dev *c, const dev_timer *t, dev_call fn, void *arg, double *per_call,
                            gs_error *err)
{
    double one = 0, v[GS_CALIB_DEV_MAX_REPS];
    gs_status rc = timed(t, fn, arg, 1, &one, err);
    double target = c->o.small ? 1e-3 : c->o.quick ? 2e-3 : 10e-3;
    size_t calls = batch_calls(target, one);
    double warm = 0;
    if (rc == GS_OK)
        rc = timed(t, fn, arg, calls, &warm, err);
    calls = batch_calls(target, warm / (double)calls);
    for (int r = 0; r < c->reps && rc == GS_OK; r++) {
        rc = timed(t, fn, arg, calls, &v[r], err);
        v[r] /= (double)calls;
    }
    if (rc == GS_OK)
        *per_call = gs_calib_median(v, (size_t)c->reps);
    return rc;
}

/* ---- buffers ----------------------------------------------------------------------------------------- */

typedef struct fill_job {
    const gs_driver_ops *ops;
    gs_drv *d;
    float *p;
    size_t n;
    float v;
    const void *host;    /* upload instead of fill when set */
    size_t host_bytes;
} fill_job;

static gs_status fill_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    (void)err;
    fill_job *f = arg;
    if (f->host)
        f->ops->upload(f->d, s, f->p, f->host, f->host_bytes);
    else
        f->ops->fill(f->d, s, f->p, f->v, f->n);
    return GS_OK;
}

/* n floats of device memory filled with v (host: NULL) or the host bytes uploaded. */
static gs_status dev_buffer(const dev_timer *t, size_t n, float v, const void *host, size_t host_bytes, float **out,
                            const char *what, gs_error *err)
{
    *out = t->ops->alloc(t->d, 0, (uint64_t)(n ? n : 1) * sizeof(float));
    if (!*out)
        return gs_error_set(err, GS_ERR_NOMEM, "calibrate: %s: cannot allocate %zu B of device memory", what,
                            n * sizeof(float));
    fill_job f = {t->ops, t->d, *out, n, v, host, host_bytes};
    gs_status rc = t->ops->launch(t->d, t->s, fill_fn, &f, err);
    return rc == GS_OK ? t->ops->stream_sync(t->d, t->s, err) : rc;
}

static void dev_free(const dev_timer *t, float **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) {
            t->ops->free(t->d, 0, p[i]);
            p[i] = NULL;
        }
}

/* ---- shapes ------------------------------------------------------------------------------------------ */

static void add_shape(gs_calib_dev *c, uint64_t m, uint64_t n, uint64_t k)
{
    for (size_t i = 0; i < c->ngemm; i++)
        if (c->gemm[i].m == m && c->gemm[i].n == n && c->gemm[i].k == k)
            return;
    if (c->ngemm < GS_CALIB_DEV_MAX_SHAPES && m && n && k)
        c->gemm[c->ngemm++] = (gs_calib_dev_gemm){m, n, k, 0, 0, 0, 0, 0};
}

/* The grid (tokens x out x in): squares 1K .. 8K and Llama-7B-like layer shapes at 2K and 4K
 * tokens, where a GPU's GEMMs run from wave-limited to their plateau; the scenario's shapes after
 * them. The test grid (small) is what one CPU core runs in a millisecond. */
static gs_status pick(gs_calib_dev *c, gs_error *err)
{
    static const uint64_t grid[][3] = {
        {1024, 1024, 1024}, {2048, 2048, 2048},  {4096, 4096, 4096},  {8192, 8192, 8192},
        {2048, 12288, 4096}, {2048, 4096, 4096}, {2048, 22016, 4096}, {2048, 4096, 11008},
        {4096, 1024, 4096}, {512, 4096, 4096},   {4096, 32000, 4096}, {8192, 4096, 1024},
    };
    static const uint64_t small[][3] = {{32, 64, 64}, {64, 128, 64}, {128, 128, 128}, {96, 160, 64}};
    size_t ng = c->o.small ? sizeof small / sizeof small[0] : c->o.quick ? 4 : sizeof grid / sizeof grid[0];
    for (size_t i = 0; i < ng; i++)
        c->o.small ? add_shape(c, small[i][0], small[i][1], small[i][2]) : add_shape(c, grid[i][0], grid[i][1], grid[i][2]);

    const gs_scenario *sc = c->o.scenario;
    const gs_mesh *mesh = c->o.mesh;
    gs_schedule *sch = NULL;
    gs_status rc = gs_schedule_build(sc, mesh, 0, &sch, err);
    if (rc != GS_OK)
        return rc;
    snprintf(c->scenario, sizeof c->scenario, "%s", c->o.scenario_path ? c->o.scenario_path : sc->name);
    snprintf(c->gpu, sizeof c->gpu, "%s", sc->cluster.gpu.name);
    c->precision = gs_precision_name(sc->strategy.precision);
    c->gemm_bf16 = sc->strategy.precision == GS_PREC_BF16;
    gs_compute_model_init(&c->cm, &sc->cluster.gpu, sc->strategy.precision);
    c->cm.gemm_efficiency = 1.0;
    c->attn_seq = c->o.small ? 64 : 2048, c->attn_nh = c->o.small ? 2 : 32, c->attn_nkv = c->attn_nh;
    c->attn_hd = c->o.small ? 32 : 128;
    c->attn_flash = sc->strategy.flash_attention != 0;
    c->attn_dropout = sc->model.dropout, c->attn_drop_rate = sc->model.attention_dropout;
    for (size_t r = 0; r < sch->nranks && r < 1; r++)
        for (size_t i = 0; i < sch->ranks[r].nevents; i++) {
            const gs_event *e = &sch->ranks[r].events[i];
            if (e->kind != GS_EV_COMPUTE || !e->gemm_m)
                continue;
            if (e->op != GS_OP_ATTN) {
                if (!c->o.small)
                    add_shape(c, e->gemm_m, e->gemm_n, e->gemm_k);
            } else if (e->gemm_k && !c->o.small) {
                c->attn_seq = e->gemm_m;
                c->attn_hd = e->gemm_k;
            }
        }
    uint64_t tp = mesh->size[GS_DIM_TP] ? mesh->size[GS_DIM_TP] : 1;
    if (!c->o.small) {
        c->attn_nh = sc->model.heads / tp ? sc->model.heads / tp : 1;
        c->attn_nkv = sc->model.kv_heads / tp ? sc->model.kv_heads / tp : 1;
    }
    uint64_t vr = sc->model.vocab / tp;
    c->vocab_row = c->o.small ? 256 : vr < 64 ? 64 : vr > 32768 ? 32768 : (size_t)vr;
    /* the norm and embedding kernels reduce over rows one column per thread (dg, the embedding's
     * dw: deterministic sums in row order), so on a GPU their speed follows the row width: they
     * are timed at the width the schedule runs them at */
    uint64_t hw = sc->model.hidden;
    c->hidden_row = c->o.small ? 256 : hw < 256 ? 256 : hw > 32768 ? 32768 : (size_t)hw;
    gs_schedule_destroy(sch);

    /* elementwise: 2^16 .. 2^26 elements x4 (quick: x16 and 2^26; small: 2^10 .. 2^14 x4) */
    uint64_t lo = c->o.small ? 1u << 10 : 1u << 16, hi = c->o.small ? 1u << 14 : 1u << 26;
    for (uint64_t n = lo; n <= hi && c->new_ < GS_CALIB_DEV_MAX_EW; n *= c->o.quick && !c->o.small ? 16 : 4)
        c->ew_elems[c->new_++] = n;
    if (c->o.quick)
        c->ew_elems[c->new_ - 1] = hi; /* keep the largest */
    /* collectives: 1 KiB .. 1 GiB x4 (quick x16; small 1 .. 64 KiB x4) */
    uint64_t cmax = c->o.small ? 64u << 10 : 1u << 30;
    for (uint64_t b = 1024; b <= cmax && c->nsizes < GS_CALIB_DEV_MAX_SIZES; b *= c->o.quick && !c->o.small ? 16 : 4)
        c->sizes[c->nsizes++] = b;
    return GS_OK;
}

/* ---- one device: GEMMs, kernels, attention, launch ---------------------------------------------------- */

static gs_status measure_gemms(gs_calib_dev *c, const dev_timer *t, gs_error *err)
{
    gs_status rc = GS_OK;
    for (size_t i = 0; i < c->ngemm && rc == GS_OK; i++) {
        gs_calib_dev_gemm *g = &c->gemm[i];
        progress(c, "GEMM %zu/%zu (%" PRIu64 " x %" PRIu64 " x %" PRIu64 ")", i + 1, c->ngemm, g->m, g->n, g->k);
        float *b[5] = {0};
        size_t mk = g->m * g->k, nk = g->n * g->k, mn = g->m * g->n;
        if ((rc = dev_buffer(t, mk, 0.01f, NULL, 0, &b[0], "GEMM x", err)) == GS_OK &&
            (rc = dev_buffer(t, nk, 0.02f, NULL, 0, &b[1], "GEMM w", err)) == GS_OK &&
            (rc = dev_buffer(t, mn, 0.01f, NULL, 0, &b[2], "GEMM y", err)) == GS_OK &&
            (rc = dev_buffer(t, mk, 0.0f, NULL, 0, &b[3], "GEMM dx", err)) == GS_OK &&
            (rc = dev_buffer(t, nk, 0.0f, NULL, 0, &b[4], "GEMM dw", err)) == GS_OK) {
            gs_cal_gemm a = {c->ops, b[0], b[1], b[2], g->m, g->n, g->k, b[3], b[4], 1, 0};
            if ((rc = time_calls(c, t, gs_cal_gemm_fwd, &a, &g->secs, err)) == GS_OK)
                rc = time_calls(c, t, gs_cal_gemm_bwd, &a, &g->bwd_secs, err);
        }
        dev_free(t, b, 5);
        if (rc != GS_OK) {
            gs_error_prefix(err, "GEMM %" PRIu64 " x %" PRIu64 " x %" PRIu64, g->m, g->n, g->k);
            return rc;
        }
        double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
        g->rate = flops / g->secs;
        g->model_rate = c->cm.peak_flops * gs_gemm_efficiency(&c->cm, g->m, g->n, g->k, 1);
        /* memory-bound by the model (fp32 operands read and the result written at HBM speed take
         * longer than the FLOPs at the model's rate): the tile model is not what limits it */
        double bytes = 4.0 * (double)(mk + nk + mn);
        g->fitted = flops / g->model_rate >= bytes / (c->cm.hbm_bw * c->cm.hbm_efficiency);
    }
    return rc;
}

/* Operand sets a kernel is timed over in turn, so that its bytes come from device memory, not
 * from the L2 the previous call left them in (50 MB on an H100 or H200): the sets together
 * exceed DEV_ROTATE_BYTES, at most DEV_ROTATE_MAX of them (the test sizes: 1 MiB, so that the
 * rotation runs there too). */
#define DEV_ROTATE_BYTES ((size_t)256 << 20)
#define DEV_ROTATE_MAX 64

static size_t dev_sets(const gs_calib_dev *c, double bytes_per_set)
{
    double target = c->o.small ? (double)(1u << 20) : (double)DEV_ROTATE_BYTES;
    double n = bytes_per_set > 0 ? ceil(target / bytes_per_set) : 1;
    return n < 1 ? 1 : n > DEV_ROTATE_MAX ? DEV_ROTATE_MAX : (size_t)n;
}

typedef struct ew_rot {
    gs_cal_ew *e;
    size_t n, next;
} ew_rot;

static void ew_rot_call(void *arg, gs_drv_stream *s)
{
    ew_rot *r = arg;
    gs_cal_ew_call(&r->e[r->next++ % r->n], s);
}

static gs_status measure_kernels(gs_calib_dev *c, const dev_timer *t, gs_error *err)
{
    gs_status rc = GS_OK;
    for (int kind = 0; kind < GS_CAL_EW_COUNT && rc == GS_OK; kind++)
        for (size_t i = 0; i < c->new_ && rc == GS_OK; i++) {
            size_t n = c->ew_elems[i], h = 256;
            if (kind == GS_CAL_EW_XENT || kind == GS_CAL_EW_XENT_BWD)
                h = c->vocab_row;
            else if (kind == GS_CAL_EW_RMSNORM || kind == GS_CAL_EW_RMSNORM_BWD || kind == GS_CAL_EW_EMBED ||
                     kind == GS_CAL_EW_EMBED_BWD)
                h = c->hidden_row;
            if (n < h)
                n = h;
            size_t rows = n / h, sets = dev_sets(c, 4.0 * (7.0 * (double)n + (double)rows + 1.0));
            progress(c, "%s, %zu elements (%zu operand set%s)", gs_cal_ew_names[kind], n, sets,
                     sets == 1 ? "" : "s");
            int32_t *tok = malloc((rows + 1) * sizeof *tok);
            float **b = calloc(6 * sets, sizeof *b);
            gs_cal_ew *e = calloc(sets, sizeof *e);
            if (!tok || !b || !e) {
                free(tok), free(b), free(e);
                return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
            }
            int emb = kind == GS_CAL_EW_EMBED || kind == GS_CAL_EW_EMBED_BWD;
            for (size_t r = 0; r <= rows; r++)
                tok[r] = (int32_t)((r * 7919u) % (emb ? 2 * rows : h));
            const char *nm = gs_cal_ew_names[kind];
            for (size_t k = 0; k < sets && rc == GS_OK; k++) {
                float **x = b + 6 * k;
                if ((rc = dev_buffer(t, 2 * n, 0.01f, NULL, 0, &x[0], nm, err)) == GS_OK &&
                    (rc = dev_buffer(t, n, 0.001f, NULL, 0, &x[1], nm, err)) == GS_OK &&
                    (rc = dev_buffer(t, n, 1.0f, NULL, 0, &x[2], nm, err)) == GS_OK &&
                    (rc = dev_buffer(t, n, 0.0f, NULL, 0, &x[3], nm, err)) == GS_OK &&
                    (rc = dev_buffer(t, 2 * n, 0.0f, NULL, 0, &x[4], nm, err)) == GS_OK &&
                    (rc = dev_buffer(t, rows + 1, 0, tok, (rows + 1) * sizeof *tok, &x[5], nm, err)) == GS_OK)
                    e[k] = (gs_cal_ew){c->ops, t->d, kind, x[0], x[1], x[2], x[3], x[4], x[5], n, h, 0};
            }
            if (rc == GS_OK) {
                ew_rot rot = {e, sets, 0};
                rc = time_calls(c, t, ew_rot_call, &rot, &c->ew_s[kind][i], err);
            }
            c->ew_n[kind][i] = rows * h; /* what the kernel runs on: whole rows */
            dev_free(t, b, 6 * sets);
            free(b), free(e), free(tok);
            if (rc != GS_OK)
                gs_error_prefix(err, "%s", nm);
        }
    return rc;
}

typedef struct copy_args {
    const gs_driver_ops *ops;
    gs_drv *d;
    float **buf; /* sets pairs: source, destination */
    size_t n, sets, next;
} copy_args;

static void copy_call(void *arg, gs_drv_stream *s)
{
    copy_args *a = arg;
    size_t k = a->next++ % a->sets;
    a->ops->copy(a->d, s, a->buf[2 * k + 1], a->buf[2 * k], a->n * sizeof(float));
}

typedef struct tiny_args {
    const gs_driver_ops *ops;
    gs_drv *d;
    float *p;
} tiny_args;

static void tiny_call(void *arg, gs_drv_stream *s)
{
    tiny_args *a = arg;
    a->ops->fill(a->d, s, a->p, 1.0f, 1);
}

static gs_status measure_copy_launch(gs_calib_dev *c, const dev_timer *t, gs_error *err)
{
    gs_status rc = GS_OK;
    for (size_t i = 0; i < c->new_ && rc == GS_OK; i++) {
        size_t n = c->ew_elems[i], sets = dev_sets(c, 8.0 * (double)n);
        progress(c, "copy, %zu floats (%zu operand set%s)", n, sets, sets == 1 ? "" : "s");
        float **b = calloc(2 * sets, sizeof *b);
        if (!b)
            return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
        for (size_t k = 0; k < sets && rc == GS_OK; k++)
            if ((rc = dev_buffer(t, n, 0.5f, NULL, 0, &b[2 * k], "copy", err)) == GS_OK)
                rc = dev_buffer(t, n, 0.0f, NULL, 0, &b[2 * k + 1], "copy", err);
        if (rc == GS_OK) {
            copy_args a = {c->ops, t->d, b, n, sets, 0};
            rc = time_calls(c, t, copy_call, &a, &c->copy_s[i], err);
        }
        dev_free(t, b, 2 * sets);
        free(b);
    }
    float *p = NULL;
    if (rc == GS_OK && (rc = dev_buffer(t, 1, 0.0f, NULL, 0, &p, "launch", err)) == GS_OK) {
        progress(c, "launch");
        tiny_args a = {c->ops, t->d, p};
        rc = time_calls(c, t, tiny_call, &a, &c->launch_s, err);
    }
    dev_free(t, &p, 1);
    return rc;
}

static gs_status measure_attention(gs_calib_dev *c, const dev_timer *t, gs_error *err)
{
    progress(c, "attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ")", c->attn_seq, c->attn_nh,
             c->attn_hd);
    size_t sq = c->attn_seq, qn = sq * c->attn_nh * c->attn_hd, kvn = sq * c->attn_nkv * c->attn_hd;
    size_t pn = c->attn_nh * sq * (c->attn_flash ? 1 : sq);
    size_t sizes[9] = {qn, kvn, kvn, qn, pn, qn, kvn, kvn, qn};
    float vals[9] = {0.01f, 0.02f, 0.03f, 0, 0, 0, 0, 0, 0.01f};
    float *b[9] = {0};
    gs_status rc = GS_OK;
    for (int i = 0; i < 9 && rc == GS_OK; i++)
        rc = dev_buffer(t, sizes[i], vals[i], NULL, 0, &b[i], "attention", err);
    if (rc == GS_OK) {
        gs_cal_attn a = {c->ops, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], sq, c->attn_nh, c->attn_nkv,
                         c->attn_hd, 0, c->attn_flash, {0}};
        gs_cal_attn_dropout(&a.drop, c->attn_dropout, c->attn_drop_rate, sq);
        if ((rc = time_calls(c, t, gs_cal_attn_call, &a, &c->attn_fwd_s, err)) == GS_OK) {
            a.bwd = 1;
            rc = time_calls(c, t, gs_cal_attn_call, &a, &c->attn_bwd_s, err);
        }
        /* the schedule's count: QK^T and PV, 2 x 2 s^2 hd per head forward, twice that backward */
        double fwd = 4.0 * (double)sq * (double)sq * (double)c->attn_hd * (double)c->attn_nh;
        if (rc == GS_OK)
            c->attn_flops = 3.0 * fwd / (c->attn_fwd_s + c->attn_bwd_s);
    }
    dev_free(t, b, 9);
    if (rc == GS_OK) {
        progress(c, "rotary embedding");
        size_t ld = (c->attn_nh + 2 * c->attn_nkv) * c->attn_hd;
        float *q = NULL;
        if ((rc = dev_buffer(t, sq * ld, 0.01f, NULL, 0, &q, "rotary embedding", err)) == GS_OK) {
            gs_cal_rope r = {c->ops, q, sq, c->attn_nh, c->attn_nkv, c->attn_hd, 0};
            double fwd = 0, bwd = 0;
            if ((rc = time_calls(c, t, gs_cal_rope_call, &r, &fwd, err)) == GS_OK) {
                r.bwd = 1;
                rc = time_calls(c, t, gs_cal_rope_call, &r, &bwd, err);
            }
            c->rope_s = 0.5 * (fwd + bwd) / (double)sq;
        }
        dev_free(t, &q, 1);
    }
    return rc;
}

typedef struct solo_job {
    gs_calib_dev *c;
    dev_timer t;
} solo_job;

static gs_status measure_solo(gs_calib_dev *c, gs_error *err)
{
    gs_mesh mesh;
    gs_driver_opts o = {.timeout_s = c->o.timeout_s, .group_of = gs_group_of, .process_local = 1,
                        .gemm_bf16 = c->gemm_bf16, .set = c->o.set};
    dev_timer t = {c->ops, NULL, NULL, NULL, NULL};
    gs_status rc = gs_mesh_init(&mesh, 1, 1, 1, NULL, 1, err);
    if (rc == GS_OK)
        rc = c->ops->open(&mesh, &o, &t.d, err);
    if (rc == GS_OK && c->ops->gemm_math)
        snprintf(c->gemm_math, sizeof c->gemm_math, "%s", c->ops->gemm_math(t.d));
    if (rc == GS_OK)
        rc = c->ops->stream_create(t.d, 0, GS_STREAM_COMPUTE, &t.s, err);
    if (rc == GS_OK && (rc = c->ops->event_create(t.d, &t.e0, err)) == GS_OK)
        rc = c->ops->event_create(t.d, &t.e1, err);
    if (rc == GS_OK)
        rc = measure_gemms(c, &t, err);
    if (rc == GS_OK)
        rc = measure_kernels(c, &t, err);
    if (rc == GS_OK)
        rc = measure_copy_launch(c, &t, err);
    if (rc == GS_OK)
        rc = measure_attention(c, &t, err);
    if (t.e0)
        c->ops->event_destroy(t.d, t.e0);
    if (t.e1)
        c->ops->event_destroy(t.d, t.e1);
    if (t.s)
        c->ops->stream_destroy(t.d, t.s);
    if (t.d)
        c->ops->close(t.d);
    return rc;
}

/* ---- collectives: a thread per rank, every op and size in the same order ------------------------------- */

typedef struct coll_job {
    gs_calib_dev *c;
    gs_drv *d;
    uint64_t rank, n;
    uint64_t members[8];
    double per_call[GS_CAL_C_COUNT][GS_CALIB_DEV_MAX_SIZES][GS_CALIB_DEV_MAX_REPS];
    gs_status rc;
    gs_error err;
    /* the call in flight */
    int op;
    size_t bytes;
    float *a, *b;
} coll_job;

/* One launch's calls: its own count, since a host driver runs launched work later, on its
 * stream's thread (a count changed in the job after the launch would race with it). */
typedef struct coll_batch {
    coll_job *j;
    size_t iters;
} coll_batch;

static gs_status coll_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    const coll_batch *cb = arg;
    coll_job *j = cb->j;
    const gs_driver_ops *ops = j->c->ops;
    gs_drv_group g = {GS_GROUP_DP, 0, j->n, j->rank, j->members};
    size_t floats = j->bytes / 4;
    gs_status rc = GS_OK;
    for (size_t i = 0; i < cb->iters && rc == GS_OK; i++)
        switch (j->op) {
        case GS_CAL_C_AG: rc = ops->all_gather(j->d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_RS: rc = ops->reduce_scatter(j->d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_AR: rc = ops->all_reduce(j->d, s, j->rank, &g, j->a, floats, err); break;
        case GS_CAL_C_BC: rc = ops->broadcast(j->d, s, j->rank, &g, j->a, floats, 0, err); break;
        default: /* ping-pong */
            if (j->rank == 0) {
                if ((rc = ops->send(j->d, s, 0, 1, j->a, j->bytes, err)) == GS_OK)
                    rc = ops->recv(j->d, s, 0, 1, j->b, j->bytes, err);
            } else if ((rc = ops->recv(j->d, s, 1, 0, j->b, j->bytes, err)) == GS_OK) {
                rc = ops->send(j->d, s, 1, 0, j->b, j->bytes, err);
            }
            break;
        }
    return rc;
}

static void *coll_main(void *arg)
{
    coll_job *j = arg;
    gs_calib_dev *c = j->c;
    const gs_driver_ops *ops = c->ops;
    gs_drv_stream *s = NULL;
    gs_drv_event *e0 = NULL, *e1 = NULL;
    gs_error *err = &j->err;
    uint64_t maxb = c->sizes[c->nsizes - 1];
    gs_status rc = ops->stream_create(j->d, j->rank, GS_STREAM_DP, &s, err);
    if (rc == GS_OK && (rc = ops->event_create(j->d, &e0, err)) == GS_OK)
        rc = ops->event_create(j->d, &e1, err);
    if (rc == GS_OK) {
        j->a = ops->alloc(j->d, j->rank, maxb);
        j->b = ops->alloc(j->d, j->rank, maxb);
        if (!j->a || !j->b)
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: rank %" PRIu64 ": cannot allocate 2 x %" PRIu64
                              " B of device memory for the collectives", j->rank, maxb);
    }
    for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++) {
        if (op == GS_CAL_C_P2P && j->n != 2)
            continue;
        for (size_t si = 0; si < c->nsizes && rc == GS_OK; si++) {
            j->op = op, j->bytes = c->sizes[si];
            if (j->rank == 0)
                progress(c, "%s, %" PRIu64 " ranks, %zu B", gs_cal_c_names[op], j->n, j->bytes);
            /* 5 warm-up calls, then batches of 20 (nccl-tests' default), 50 up to 1 MiB so that a
             * batch of short calls spans far more than the event clock's resolution (quick: 5 and
             * 20); every rank the same count */
            size_t timed_iters = j->bytes <= (1u << 20) ? (c->o.quick || c->o.small ? 20 : 50) : (c->o.quick ? 5 : 20);
            coll_batch warm = {j, 5}, one = {j, 1}, batch = {j, timed_iters};
            rc = ops->launch(j->d, s, coll_fn, &warm, err);
            if (rc == GS_OK)
                rc = ops->stream_sync(j->d, s, err);
            for (int r = 0; r < c->reps && rc == GS_OK; r++) {
                double secs = 0;
                /* one untimed call first: every member leaves it together, so e0 does not count
                 * the wait for the last member to arrive; then the batch (coll_fn itself: a
                 * collective returns its status) */
                if ((rc = ops->launch(j->d, s, coll_fn, &one, err)) != GS_OK)
                    break;
                if ((rc = ops->event_record(j->d, s, e0, err)) == GS_OK && (rc = ops->launch(j->d, s, coll_fn, &batch, err)) == GS_OK &&
                    (rc = ops->event_record(j->d, s, e1, err)) == GS_OK && (rc = ops->stream_sync(j->d, s, err)) == GS_OK)
                    secs = gs_cal_elapsed(ops, j->d, e0, e1);
                j->per_call[op][si][r] = secs / (double)timed_iters * (op == GS_CAL_C_P2P ? 0.5 : 1.0);
            }
        }
    }
    if (rc != GS_OK) {
        gs_error_prefix(err, "rank %" PRIu64, j->rank);
        ops->abort(j->d, err->msg); /* the other ranks' waits end */
    }
    if (j->a)
        ops->free(j->d, j->rank, j->a);
    if (j->b)
        ops->free(j->d, j->rank, j->b);
    if (e0)
        ops->event_destroy(j->d, e0);
    if (e1)
        ops->event_destroy(j->d, e1);
    if (s)
        ops->stream_destroy(j->d, s);
    j->rc = rc;
    return NULL;
}

/* The measurements progress() will count, in the order they run: GEMMs, kernels, copies, the
 * launch, attention and the rotary embedding, then per group size up to max_ranks its opening
 * and each op at each size (send/recv at 2 ranks only). A group the machine cannot open ends the
 * count early: the line then jumps to the end. */
static uint64_t progress_total(const gs_calib_dev *c)
{
    uint64_t cap = c->o.max_ranks ? c->o.max_ranks : 8, n = c->ngemm + (uint64_t)GS_CAL_EW_COUNT * c->new_ + c->new_ + 3;
    for (int gi = 0; gi < GS_CAL_GROUPS && gs_cal_group_sizes[gi] <= cap; gi++)
        n += 1 + c->nsizes * (uint64_t)(GS_CAL_C_COUNT - (gs_cal_group_sizes[gi] == 2 ? 0 : 1));
    return n;
}

static gs_status measure_colls(gs_calib_dev *c, gs_error *err)
{
    uint64_t cap = c->o.max_ranks ? c->o.max_ranks : 8;
    for (int gi = 0; gi < GS_CAL_GROUPS; gi++) {
        uint64_t n = gs_cal_group_sizes[gi];
        if (n > cap) {
            snprintf(c->coll_note, sizeof c->coll_note, "groups of at most %" PRIu64 " ranks asked for", cap);
            break;
        }
        gs_mesh mesh;
        gs_drv *d = NULL;
        gs_driver_opts o = {.timeout_s = c->o.timeout_s, .group_of = gs_group_of, .process_local = 1,
                            .gemm_bf16 = c->gemm_bf16, .set = c->o.set};
        gs_error oe;
        gs_error_init(&oe);
        gs_status rc = gs_mesh_init(&mesh, 1, n, 1, NULL, n, err);
        if (rc != GS_OK)
            return rc;
        progress(c, "opening %" PRIu64 " ranks", n);
        gs_status orc = c->ops->open(&mesh, &o, &d, &oe);
        if (orc == GS_ERR_INPUT) {
            /* not an error: this machine has fewer devices (the driver says why) */
            snprintf(c->coll_note, sizeof c->coll_note, "%" PRIu64 " ranks: %.400s", n, oe.msg);
            break;
        }
        if (orc != GS_OK) {
            *err = oe;
            gs_error_prefix(err, "calibrate: opening %" PRIu64 " ranks", n);
            return orc;
        }
        coll_job *jobs = calloc(n, sizeof *jobs);
        pthread_t *th = calloc(n, sizeof *th);
        int *started = calloc(n, sizeof *started);
        if (!jobs || !th || !started)
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
        for (uint64_t r = 0; r < n && rc == GS_OK; r++) {
            jobs[r].c = c, jobs[r].d = d, jobs[r].rank = r, jobs[r].n = n;
            gs_error_init(&jobs[r].err);
            for (uint64_t m = 0; m < n; m++)
                jobs[r].members[m] = m;
            started[r] = pthread_create(&th[r], NULL, coll_main, &jobs[r]) == 0;
            if (!started[r]) {
                c->ops->abort(d, "calibrate: cannot start a thread");
                rc = gs_error_set(err, GS_ERR_RUNTIME, "calibrate: cannot start a thread");
            }
        }
        for (uint64_t r = 0; r < n && jobs && started; r++)
            if (started[r]) {
                pthread_join(th[r], NULL);
                if (jobs[r].rc != GS_OK && rc == GS_OK) {
                    rc = jobs[r].rc;
                    *err = jobs[r].err;
                }
            }
        if (rc == GS_OK) {
            /* per repeat: the slowest member (the call ends when the last one leaves) */
            for (int op = 0; op < GS_CAL_C_COUNT; op++) {
                if (op == GS_CAL_C_P2P && n != 2)
                    continue;
                for (size_t si = 0; si < c->nsizes; si++) {
                    double v[GS_CALIB_DEV_MAX_REPS];
                    for (int rep = 0; rep < c->reps; rep++) {
                        v[rep] = 0;
                        for (uint64_t r = 0; r < n; r++)
                            v[rep] = fmax(v[rep], jobs[r].per_call[op][si][rep]);
                    }
                    c->coll_s[op][gi][si] = gs_calib_median(v, (size_t)c->reps);
                }
                double x[GS_CALIB_DEV_MAX_SIZES];
                for (size_t si = 0; si < c->nsizes; si++)
                    x[si] = (double)c->sizes[si];
                if ((rc = gs_fit_alpha_beta(x, c->coll_s[op][gi], c->nsizes, &c->coll_fit[op][gi], err)) != GS_OK) {
                    gs_error_prefix(err, "%s over %" PRIu64 " ranks", gs_cal_c_names[op], n);
                    break;
                }
                c->coll_ok[op][gi] = 1;
            }
            c->coll_max = n;
        }
        free(jobs), free(th), free(started);
        c->ops->close(d);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* ---- run and fits ------------------------------------------------------------------------------------- */

gs_status gs_calib_dev_run(const gs_driver_ops *ops, const gs_calib_dev_opts *o, gs_calib_dev **out, gs_error *err)
{
    *out = NULL;
    if (!o->scenario || !o->mesh)
        return gs_error_set(err, GS_ERR_INPUT, "calibrate --driver %s needs SCENARIO.yaml: its GPU preset and precision "
                            "are what the GEMM model is fitted against, and its shapes are measured", ops->name);
    gs_calib_dev *c = calloc(1, sizeof *c);
    if (!c)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    c->ops = ops;
    c->o = *o;
    if (c->o.timeout_s <= 0)
        c->o.timeout_s = 120.0;
    c->reps = c->o.quick || c->o.small ? 3 : 5;
    gs_status rc = pick(c, err);
    if (rc == GS_OK) {
        c->ptotal = progress_total(c);
        rc = measure_solo(c, err);
    }
    if (rc == GS_OK)
        rc = measure_colls(c, err);
    if (c->o.progress)
        c->o.progress(c->o.progress_arg, c->ptotal, c->ptotal, "fitting");
    /* fits */
    if (rc == GS_OK) {
        double meas[GS_CALIB_DEV_MAX_SHAPES], model[GS_CALIB_DEV_MAX_SHAPES], r[GS_CALIB_DEV_MAX_SHAPES];
        size_t n = 0;
        for (size_t i = 0; i < c->ngemm; i++)
            if (c->gemm[i].fitted) {
                r[n] = c->gemm[i].bwd_secs / (2.0 * c->gemm[i].secs);
                meas[n] = c->gemm[i].rate, model[n++] = c->gemm[i].model_rate;
            }
        if (n == 0)
            rc = gs_error_set(err, GS_ERR_RUNTIME, "calibrate: every GEMM shape is memory-bound by the model of %s: "
                              "nothing to fit the GEMM efficiency to", c->gpu);
        else
            rc = gs_fit_scale_median(meas, model, n, &c->gemm_fit, err);
        if (n)
            c->bwd_factor = gs_calib_median(r, n); /* over the shapes fitted, as the scale */
    }
    for (int k = 0; k < GS_CAL_EW_COUNT && rc == GS_OK; k++) {
        double x[GS_CALIB_DEV_MAX_EW];
        for (size_t i = 0; i < c->new_; i++)
            x[i] = gs_cal_ew_bytes[k] * (double)c->ew_n[k][i];
        if ((rc = gs_fit_alpha_beta(x, c->ew_s[k], c->new_, &c->ew_fit[k], err)) != GS_OK)
            gs_error_prefix(err, "%s", gs_cal_ew_names[k]);
    }
    if (rc == GS_OK) {
        double x[GS_CALIB_DEV_MAX_EW];
        for (size_t i = 0; i < c->new_; i++)
            x[i] = 2.0 * 4.0 * (double)c->ew_elems[i]; /* read and written */
        if ((rc = gs_fit_alpha_beta(x, c->copy_s, c->new_, &c->copy_fit, err)) != GS_OK)
            gs_error_prefix(err, "copy");
    }
    if (rc != GS_OK) {
        free(c);
        return rc;
    }
    *out = c;
    return GS_OK;
}

double gs_calib_dev_gemm_scale(const gs_calib_dev *c)
{
    return c->gemm_fit.scale;
}

double gs_calib_dev_copy_bw(const gs_calib_dev *c)
{
    return c->copy_fit.beta_bytes_per_s;
}

void gs_calib_dev_free(gs_calib_dev *c)
{
    free(c);
}
