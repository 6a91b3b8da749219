/* The host driver's compute ops: kernels/host on the stream's worker thread
 * (exec/driver_host_internal.h). */
#include "exec/driver_host_internal.h"

#include <inttypes.h>
#include <stdlib.h>

#include "kernels/host/kernels.h"

/* ---- compute: kernels/host ------------------------------------------------------------------- */

float *gs__host_round_room(gs_drv_stream *s, size_t floats)
{
    if (floats > s->round_cap) {
        float *p = realloc(s->round_buf, floats * sizeof *p);
        if (!p)
            return NULL;
        s->round_buf = p;
        s->round_cap = floats;
    }
    return s->round_buf;
}

void gs__host_round_failed(gs_drv_stream *s, const char *what)
{
    char msg[120];
    snprintf(msg, sizeof msg, "rank %" PRIu64 ": out of memory for the %s GEMM inputs", s->rank, what);
    gs__host_abort(s->d, msg);
}

void gs__host_k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    if (s && s->d->gemm_bf16) {
        float *r = gs__host_round_room(s, t * k + n * k);
        if (!r) {
            gs__host_round_failed(s, "bf16");
            return;
        }
        gs_k_round_bf16(r, x, t * k);
        gs_k_round_bf16(r + t * k, w, n * k);
        x = r, w = r + t * k;
    }
    gs_k_linear_fwd(x, w, y, t, k, n);
}
void gs__host_k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                           size_t t, size_t k, size_t n)
{
    if (s && s->d->gemm_bf16) { /* both products take bf16 inputs: dx = dy w, dw += dy^T x */
        float *r = gs__host_round_room(s, t * k + n * k + t * n);
        if (!r) {
            gs__host_round_failed(s, "bf16");
            return;
        }
        /* only what the products asked for is read (tp_comm_overlap's dgrad runs while x is
         * gathered again) */
        if (dw)
            gs_k_round_bf16(r, x, t * k);
        if (dx)
            gs_k_round_bf16(r + t * k, w, n * k);
        gs_k_round_bf16(r + t * k + n * k, dy, t * n);
        x = r, w = r + t * k, dy = r + t * k + n * k;
    }
    gs_k_linear_bwd(x, w, dy, dx, dw, t, k, n);
}
void gs__host_k_linear_fwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, float *y,
                                   const uint64_t *rows, size_t groups, size_t k, size_t n)
{
    for (size_t g = 0, o = 0; g < groups; o += rows[g++])
        if (rows[g])
            gs__host_k_linear_fwd(s, x + o * k, w + g * w_stride, y + o * n, rows[g], k, n);
}
void gs__host_k_linear_bwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride,
                                   const float *dy, float *dx, float *dw, const uint64_t *rows, size_t groups,
                                   size_t k, size_t n)
{
    for (size_t g = 0, o = 0; g < groups; o += rows[g++])
        if (rows[g])
            gs__host_k_linear_bwd(s, x ? x + o * k : NULL, w + g * w_stride, dy + o * n, dx ? dx + o * k : NULL,
                                  dw ? dw + g * w_stride : NULL, rows[g], k, n);
}
void gs__host_k_add(gs_drv_stream *s, float *y, const float *x, size_t n)
{
    (void)s;
    gs_k_add(y, x, n);
}
void gs__host_k_scale(gs_drv_stream *s, float *y, float a, size_t n)
{
    (void)s;
    gs_k_scale(y, a, n);
}
void gs__host_k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn,
                          size_t h, float *y)
{
    (void)s;
    gs_k_embed_fwd(tok, t, w, lo, vn, h, y);
}
void gs__host_k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                          size_t h, float *dw)
{
    (void)s;
    gs_k_embed_bwd(tok, t, dy, lo, vn, h, dw);
}
void gs__host_k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                            float eps)
{
    (void)s;
    gs_k_rmsnorm_fwd(x, g, y, rstd, t, h, eps);
}
void gs__host_k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                            float *dx, float *dg, size_t t, size_t h)
{
    (void)s;
    gs_k_rmsnorm_bwd(x, g, rstd, dy, dx, dg, t, h);
}
void gs__host_k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    (void)s;
    gs_k_rope_fwd(x, t, seq, nh, hd, ld, th);
}
void gs__host_k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    (void)s;
    gs_k_rope_bwd(x, t, seq, nh, hd, ld, th);
}
void gs__host_k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                         const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_fwd_dropout(q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, drop);
}
void gs__host_k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_bwd_dropout(q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop);
}
void gs__host_k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                               size_t nkv, size_t hd, const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_fwd_flash_dropout(q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, drop);
}
void gs__host_k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                               float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                               size_t hd, const gs_dropout *drop)
{
    (void)s;
    gs_k_attn_bwd_flash_dropout(q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop);
}
int gs__host_sends_wait(gs_drv *d)
{
    return d->rendezvous;
}
const char *gs__host_gemm_math(gs_drv *d)
{
    return d->gemm_bf16 ? "bf16 inputs, fp32 accumulate" : "fp32";
}
void gs__host_k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    (void)s;
    gs_k_dropout_rows(x, rows, h, drop);
}
void gs__host_k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                              float *rstd, size_t t, size_t h, float eps)
{
    (void)s;
    gs_k_layernorm_fwd(x, g, b, y, mean, rstd, t, h, eps);
}
void gs__host_k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                              const float *dy, float *dx, float *dg, float *db, size_t t, size_t h)
{
    (void)s;
    gs_k_layernorm_bwd(x, g, mean, rstd, dy, dx, dg, db, t, h);
}
void gs__host_k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n)
{
    (void)s;
    gs_k_gelu_fwd(x, y, n);
}
void gs__host_k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n)
{
    (void)s;
    gs_k_gelu_bwd(x, dy, dx, n);
}
void gs__host_k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n)
{
    (void)s;
    gs_k_bias_add(y, b, t, n);
}
void gs__host_k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n)
{
    (void)s;
    gs_k_bias_grad(dy, db, t, n);
}
void gs__host_k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f)
{
    (void)s;
    gs_k_swiglu_fwd(gu, h, t, f);
}
void gs__host_k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    (void)s;
    gs_k_swiglu_bwd(gu, dh, dgu, t, f);
}
void gs__host_k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                           float *stats)
{
    (void)s;
    gs_k_xent_stats(logits, target, t, lo, vn, stats);
}
void gs__host_k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss)
{
    (void)s;
    *loss = gs_k_xent_combine(stats, parts, t, lse);
}
void gs__host_k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                         size_t lo, size_t vn, float scale, float *dlogits)
{
    (void)s;
    gs_k_xent_bwd(logits, target, lse, t, lo, vn, scale, dlogits);
}
void gs__host_k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, uint64_t step)
{
    (void)s;
    gs_k_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, step);
}
void gs__host_k_moe_topk_fwd(gs_drv_stream *s, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                             float *probs)
{
    (void)s;
    gs_k_moe_topk_fwd(logits, t, experts, k, idx, probs);
}
void gs__host_k_moe_topk_bwd(gs_drv_stream *s, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                             size_t experts, size_t k, float *dlogits)
{
    (void)s;
    gs_k_moe_topk_bwd(probs, dprobs, idx, t, experts, k, dlogits);
}
void gs__host_k_rows_gather(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                            float *dst)
{
    (void)s;
    gs_k_rows_gather(src, idx, w, n, h, dst);
}
void gs__host_k_rows_scatter_add(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n,
                                 size_t h, float *dst)
{
    (void)s;
    gs_k_rows_scatter_add(src, idx, w, n, h, dst);
}
void gs__host_k_rows_dot(gs_drv_stream *s, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                         float *out)
{
    (void)s;
    gs_k_rows_dot(a, idx, b, n, h, out);
}
