/* The cuda driver's kernels against the host reference kernels, and their speed: loads the
 * module (gridstep-cuda.so), opens its driver on one GPU, runs every compute op on seeded inputs
 * next to kernels/host on the same inputs and prints the normwise relative error
 * max|cuda - host| / max|host| per op against its tolerance; then (unless --quick) the HBM
 * bandwidth of AdamW and RMSNorm next to a device-to-device copy, and the TFLOP/s of the
 * driver's linear layer at the model's GEMM shapes next to the best of cuBLASLt's top
 * heuristic algorithms timed directly. Then it opens the driver a second time with
 * GRIDSTEP_CUDA_ATTENTION=gemm and checks the GEMM attention path the same way (forward,
 * backward, masked probabilities exactly 0, the backward's bits equal on a rerun) and, unless
 * --quick, times both attention paths at llama2-7b's shape. The flash attention kernels
 * (gs_cu_attn_fwd_flash / gs_cu_attn_bwd_flash, linked in from kernels/cuda/attention_flash.o and
 * called on a stream of this program's own) are checked the same way against kernels/host (out,
 * dq/dk/dv; lse against log sum exp in double; the backward's bits on a rerun; no write past
 * the outputs) and timed at the same shape. Exits 77 when there is no GPU (automake's SKIP), 1
 * when an op is outside its tolerance.
 *
 * usage: kernel_check [--quick] [--tokens T] MODULE.so */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "exec/driver.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/host/kernels.h"

/* fp32 with different summation orders: errors of a few ulps times sqrt(length) */
#define TOL_ELEMENTWISE 1e-5
#define TOL_REDUCTION 1e-4
#define TOL_GEMM_FP32 1e-4
#define TOL_GEMM_TF32 5e-3

typedef struct ctx {
    const gs_driver_ops *ops;
    gs_drv *d;
    gs_drv_stream *s;
    int failures;
    double tol_gemm;
} ctx;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *host_rand(size_t n, float scale)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * urand();
    return p;
}

static float *host_copy(const float *src, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static void *dev_from(ctx *c, const void *h, size_t bytes)
{
    void *p = c->ops->alloc(c->d, 0, bytes);
    if (!p) {
        fprintf(stderr, "kernel_check: device allocation of %zu B failed\n", bytes);
        exit(1);
    }
    if (h)
        c->ops->upload(c->d, c->s, p, h, bytes);
    return p;
}

static void sync_or_die(ctx *c, const char *what)
{
    gs_error e;
    gs_error_init(&e);
    if (c->ops->stream_sync(c->d, c->s, &e) != GS_OK) {
        fprintf(stderr, "kernel_check: %s: %s\n", what, e.msg);
        exit(1);
    }
}

/* Compares n floats of device buffer dev with the host reference; prints a row. */
static void compare(ctx *c, const char *name, const float *ref, const float *dev, size_t n, double tol)
{
    float *got = malloc((n ? n : 1) * sizeof *got);
    sync_or_die(c, name);
    c->ops->download(c->d, c->s, got, dev, n * sizeof *got);
    double maxref = 0, maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)ref[i]), df = fabs((double)got[i] - (double)ref[i]);
        if (!(df <= maxdiff)) /* NaN counts */
            maxdiff = isnan(df) ? INFINITY : df;
        if (r > maxref)
            maxref = r;
    }
    double rel = maxdiff / (maxref > 0 ? maxref : 1);
    int ok = rel <= tol;
    printf("  %-14s %10zu  rel err %.2e  tol %.0e  %s\n", name, n, rel, tol, ok ? "ok" : "FAIL");
    c->failures += !ok;
    free(got);
}

/* RMSNorm on the shapes its launchers treat apart (kernels/cuda/norm.cu): a row not a multiple
 * of 4 floats and one past 8192 (the scalar forward, not the float4 registers), the forward in
 * place (y over x), and more rows than 1024 chunks of 32 hold (the dg stage's chunks grow). */
static void check_rmsnorm_shapes(ctx *c)
{
    const gs_driver_ops *o = c->ops;
    static const size_t shapes[][2] = {{64, 4098}, {16, 8196}, {40000, 64}, {48, 512}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t t = shapes[i][0], h = shapes[i][1];
        int in_place = i == 3;
        float *x = host_rand(t * h, 1), *g = host_rand(h, 1), *dy = host_rand(t * h, 1), *y = calloc(t * h, 4);
        float *rstd = calloc(t, 4), *dx = calloc(t * h, 4), *dg0 = host_rand(h, 0.1f), *dg = host_copy(dg0, h);
        gs_k_rmsnorm_fwd(x, g, y, rstd, t, h, 1e-5f);
        gs_k_rmsnorm_bwd(x, g, rstd, dy, dx, dg, t, h);
        float *dX = dev_from(c, x, t * h * 4), *dG = dev_from(c, g, h * 4), *dR = dev_from(c, NULL, t * 4);
        float *dDY = dev_from(c, dy, t * h * 4), *dDX = dev_from(c, NULL, t * h * 4), *dDG = dev_from(c, dg0, h * 4);
        float *dY = in_place ? dev_from(c, x, t * h * 4) : dev_from(c, NULL, t * h * 4);
        char name[48];
        o->k.rmsnorm_fwd(c->s, in_place ? dY : dX, dG, dY, dR, t, h, 1e-5f);
        snprintf(name, sizeof name, "rmsnorm %zux%zu%s", t, h, in_place ? " in place" : "");
        compare(c, name, y, dY, t * h, TOL_REDUCTION);
        o->k.rmsnorm_bwd(c->s, dX, dG, dR, dDY, dDX, dDG, t, h);
        snprintf(name, sizeof name, "rmsnorm_bwd %zux%zu dx", t, h);
        compare(c, name, dx, dDX, t * h, TOL_REDUCTION);
        snprintf(name, sizeof name, "rmsnorm_bwd %zux%zu dg", t, h);
        compare(c, name, dg, dDG, h, TOL_REDUCTION);
        free(x), free(g), free(dy), free(y), free(rstd), free(dx), free(dg0), free(dg);
    }
}

static void check_kernels(ctx *c)
{
    const gs_driver_ops *o = c->ops;
    size_t t = 256, h = 512, n = 384, f = 344, vocab = 1000, vlo = 200, vn = 500;
    printf("kernels vs kernels/host (normwise relative error):\n");
    /* linear */
    float *x = host_rand(t * h, 1), *w = host_rand(n * h, 0.05f), *dy = host_rand(t * n, 1);
    float *dw0 = host_rand(n * h, 0.01f), *y = calloc(t * n, 4), *dx = calloc(t * h, 4), *dw = host_copy(dw0, n * h);
    gs_k_linear_fwd(x, w, y, t, h, n);
    gs_k_linear_bwd(x, w, dy, dx, dw, t, h, n);
    float *dX = dev_from(c, x, t * h * 4), *dW = dev_from(c, w, n * h * 4), *dDY = dev_from(c, dy, t * n * 4);
    float *dY = dev_from(c, NULL, t * n * 4), *dDX = dev_from(c, NULL, t * h * 4), *dDW = dev_from(c, dw0, n * h * 4);
    o->k.linear_fwd(c->s, dX, dW, dY, t, h, n);
    compare(c, "linear_fwd", y, dY, t * n, c->tol_gemm);
    o->k.linear_bwd(c->s, dX, dW, dDY, dDX, dDW, t, h, n);
    compare(c, "linear_bwd dx", dx, dDX, t * h, c->tol_gemm);
    compare(c, "linear_bwd dw", dw, dDW, n * h, c->tol_gemm);
    /* add, scale, fill */
    float *a = host_rand(t * h, 1), *b = host_rand(t * h, 1);
    float *dA = dev_from(c, a, t * h * 4), *dB = dev_from(c, b, t * h * 4);
    gs_k_add(a, b, t * h);
    gs_k_scale(a, 0.75f, t * h);
    o->k.add(c->s, dA, dB, t * h);
    o->k.scale(c->s, dA, 0.75f, t * h);
    compare(c, "add+scale", a, dA, t * h, TOL_ELEMENTWISE);
    for (size_t i = 0; i < t * h; i++)
        a[i] = -2.5f;
    o->fill(c->d, c->s, dA, -2.5f, t * h);
    compare(c, "fill", a, dA, t * h, 0);
    /* embedding (a vocabulary slice, tokens inside and outside it, repeats) */
    int32_t *tok = malloc(t * sizeof *tok);
    for (size_t i = 0; i < t; i++)
        tok[i] = (int32_t)((i * 7919u + (i % 5 == 0 ? 3 : 0)) % vocab);
    float *ew = host_rand(vn * h, 1), *ey = calloc(t * h, 4), *edw0 = host_rand(vn * h, 0.1f);
    float *edw = host_copy(edw0, vn * h), *edy = host_rand(t * h, 1);
    gs_k_embed_fwd(tok, t, ew, vlo, vn, h, ey);
    gs_k_embed_bwd(tok, t, edy, vlo, vn, h, edw);
    int32_t *dTok = dev_from(c, tok, t * 4);
    float *dEW = dev_from(c, ew, vn * h * 4), *dEY = dev_from(c, NULL, t * h * 4);
    float *dEDW = dev_from(c, edw0, vn * h * 4), *dEDY = dev_from(c, edy, t * h * 4);
    o->k.embed_fwd(c->s, dTok, t, dEW, vlo, vn, h, dEY);
    compare(c, "embed_fwd", ey, dEY, t * h, 0);
    o->k.embed_bwd(c->s, dTok, t, dEDY, vlo, vn, h, dEDW);
    compare(c, "embed_bwd", edw, dEDW, vn * h, TOL_ELEMENTWISE);
    /* RMSNorm */
    float *g = host_rand(h, 1), *ny = calloc(t * h, 4), *rstd = calloc(t, 4), *ndx = calloc(t * h, 4);
    float *ndg0 = host_rand(h, 0.1f), *ndg = host_copy(ndg0, h);
    gs_k_rmsnorm_fwd(x, g, ny, rstd, t, h, 1e-5f);
    gs_k_rmsnorm_bwd(x, g, rstd, b, ndx, ndg, t, h);
    float *dG = dev_from(c, g, h * 4), *dNY = dev_from(c, NULL, t * h * 4), *dR = dev_from(c, NULL, t * 4);
    float *dNDX = dev_from(c, NULL, t * h * 4), *dNDG = dev_from(c, ndg0, h * 4);
    o->k.rmsnorm_fwd(c->s, dX, dG, dNY, dR, t, h, 1e-5f);
    compare(c, "rmsnorm_fwd", ny, dNY, t * h, TOL_REDUCTION);
    compare(c, "rmsnorm rstd", rstd, dR, t, TOL_REDUCTION);
    o->k.rmsnorm_bwd(c->s, dX, dG, dR, dB, dNDX, dNDG, t, h);
    compare(c, "rmsnorm_bwd dx", ndx, dNDX, t * h, TOL_REDUCTION);
    compare(c, "rmsnorm_bwd dg", ndg, dNDG, h, TOL_REDUCTION);
    check_rmsnorm_shapes(c);
    /* LayerNorm, GELU and linear biases (GPT blocks) */
    float *lb = host_rand(h, 0.5f), *ly = calloc(t * h, 4), *lmean = calloc(t, 4), *lrstd = calloc(t, 4);
    float *ldx = calloc(t * h, 4), *ldg0 = host_rand(h, 0.1f), *ldb0 = host_rand(h, 0.1f);
    float *ldg = host_copy(ldg0, h), *ldb = host_copy(ldb0, h);
    gs_k_layernorm_fwd(x, g, lb, ly, lmean, lrstd, t, h, 1e-5f);
    gs_k_layernorm_bwd(x, g, lmean, lrstd, b, ldx, ldg, ldb, t, h);
    float *dLB = dev_from(c, lb, h * 4), *dLY = dev_from(c, NULL, t * h * 4), *dLM = dev_from(c, NULL, t * 4);
    float *dLR = dev_from(c, NULL, t * 4), *dLDX = dev_from(c, NULL, t * h * 4);
    float *dLDG = dev_from(c, ldg0, h * 4), *dLDB = dev_from(c, ldb0, h * 4);
    o->k.layernorm_fwd(c->s, dX, dG, dLB, dLY, dLM, dLR, t, h, 1e-5f);
    compare(c, "layernorm_fwd", ly, dLY, t * h, TOL_REDUCTION);
    compare(c, "layernorm mean", lmean, dLM, t, TOL_REDUCTION);
    o->k.layernorm_bwd(c->s, dX, dG, dLM, dLR, dB, dLDX, dLDG, dLDB, t, h);
    compare(c, "layernorm_bwd dx", ldx, dLDX, t * h, TOL_REDUCTION);
    compare(c, "layernorm_bwd dg", ldg, dLDG, h, TOL_REDUCTION);
    compare(c, "layernorm_bwd db", ldb, dLDB, h, TOL_REDUCTION);
    float *gy = calloc(t * h, 4), *gdx = calloc(t * h, 4), *dGY = dev_from(c, NULL, t * h * 4);
    float *dGDX = dev_from(c, NULL, t * h * 4);
    gs_k_gelu_fwd(x, gy, t * h);
    gs_k_gelu_bwd(x, b, gdx, t * h);
    o->k.gelu_fwd(c->s, dX, dGY, t * h);
    compare(c, "gelu_fwd", gy, dGY, t * h, TOL_ELEMENTWISE);
    o->k.gelu_bwd(c->s, dX, dB, dGDX, t * h);
    compare(c, "gelu_bwd", gdx, dGDX, t * h, TOL_ELEMENTWISE);
    gs_k_bias_add(gy, lb, t, h);
    o->k.bias_add(c->s, dGY, dLB, t, h);
    compare(c, "bias_add", gy, dGY, t * h, TOL_ELEMENTWISE);
    gs_k_bias_grad(b, ldb, t, h);
    o->k.bias_grad(c->s, dB, dLDB, t, h);
    compare(c, "bias_grad", ldb, dLDB, h, TOL_REDUCTION);
    free(lb), free(ly), free(lmean), free(lrstd), free(ldx), free(ldg0), free(ldb0), free(ldg), free(ldb);
    free(gy), free(gdx);
    /* attention with GQA and RoPE: nseq 2 x seq 128, 8 heads, 2 kv heads, head dim 64, fused qkv rows */
    size_t nseq = 2, seq = 128, nh = 8, nkv = 2, hd = 64, T = nseq * seq, ld = (nh + 2 * nkv) * hd;
    float *qkv = host_rand(T * ld, 1), *out = calloc(T * nh * hd, 4), *p = calloc(nseq * nh * seq * seq, 4);
    float *dout = host_rand(T * nh * hd, 1), *dqkv = calloc(T * ld, 4);
    float *dQKV = dev_from(c, qkv, T * ld * 4);
    gs_k_rope_fwd(qkv, T, seq, nh, hd, ld, 10000.0f);
    gs_k_rope_fwd(qkv + nh * hd, T, seq, nkv, hd, ld, 10000.0f);
    o->k.rope_fwd(c->s, dQKV, T, seq, nh, hd, ld, 10000.0f);
    o->k.rope_fwd(c->s, dQKV + nh * hd, T, seq, nkv, hd, ld, 10000.0f);
    compare(c, "rope_fwd", qkv, dQKV, T * ld, TOL_ELEMENTWISE);
    float *q = qkv, *k = qkv + nh * hd, *v = qkv + (nh + nkv) * hd;
    gs_k_attn_fwd(q, ld, k, v, ld, out, nh * hd, p, nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd(q, ld, k, v, ld, p, dout, nh * hd, dqkv, dqkv + nh * hd, dqkv + (nh + nkv) * hd, nseq, seq, nh, nkv,
                  hd);
    /* the device starts from the host's rotated q, k so attention is compared on equal inputs */
    c->ops->upload(c->d, c->s, dQKV, qkv, T * ld * 4);
    float *dOut = dev_from(c, NULL, T * nh * hd * 4), *dP = dev_from(c, NULL, nseq * nh * seq * seq * 4);
    float *dDout = dev_from(c, dout, T * nh * hd * 4), *dDQKV = dev_from(c, NULL, T * ld * 4);
    o->k.attn_fwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, nh * hd, dP, nseq, seq, nh, nkv,
                hd, NULL);
    compare(c, "attn_fwd out", out, dOut, T * nh * hd, TOL_REDUCTION);
    compare(c, "attn_fwd p", p, dP, nseq * nh * seq * seq, TOL_REDUCTION);
    o->k.attn_bwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dP, dDout, nh * hd, dDQKV,
                dDQKV + nh * hd, dDQKV + (nh + nkv) * hd, nseq, seq, nh, nkv, hd, NULL);
    compare(c, "attn_bwd dqkv", dqkv, dDQKV, T * ld, TOL_REDUCTION);
    {
        /* attention dropout (p 0.1, heads as global heads 8.., sequences 3..): the exact kernels
         * and the flash kernels against the host's with the same masks; hidden dropout rows to
         * the bit (the same hash, and a multiply by the same scale) */
        gs_dropout dr = {gs_dropout_threshold(0.1), 0, gs_dropout_site_key(1, 2, GS_DROP_ATTN, 3), 3, 8, seq};
        dr.scale = (float)(1.0 / (1.0 - dr.threshold / 16777216.0));
        float *hout = calloc(T * nh * hd, 4), *hdq = calloc(T * ld, 4), *hlse = calloc(nseq * nh * seq, 4);
        gs_k_attn_fwd_dropout(q, ld, k, v, ld, hout, nh * hd, p, nseq, seq, nh, nkv, hd, &dr);
        gs_k_attn_bwd_dropout(q, ld, k, v, ld, p, dout, nh * hd, hdq, hdq + nh * hd, hdq + (nh + nkv) * hd, nseq, seq,
                              nh, nkv, hd, &dr);
        o->k.attn_fwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, nh * hd, dP, nseq, seq, nh, nkv,
                    hd, &dr);
        compare(c, "attn_fwd dropout out", hout, dOut, T * nh * hd, TOL_REDUCTION);
        o->k.attn_bwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dP, dDout, nh * hd, dDQKV,
                    dDQKV + nh * hd, dDQKV + (nh + nkv) * hd, nseq, seq, nh, nkv, hd, &dr);
        compare(c, "attn_bwd dropout dqkv", hdq, dDQKV, T * ld, TOL_REDUCTION);
        float *dLse = dev_from(c, NULL, nseq * nh * seq * 4);
        gs_k_attn_fwd_flash_dropout(q, ld, k, v, ld, hout, nh * hd, hlse, nseq, seq, nh, nkv, hd, &dr);
        gs_k_attn_bwd_flash_dropout(q, ld, k, v, ld, hout, hlse, dout, nh * hd, hdq, hdq + nh * hd,
                                    hdq + (nh + nkv) * hd, nseq, seq, nh, nkv, hd, &dr);
        o->k.attn_fwd_flash(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, nh * hd, dLse, nseq, seq,
                          nh, nkv, hd, &dr);
        compare(c, "flash dropout out", hout, dOut, T * nh * hd, TOL_REDUCTION);
        o->k.attn_bwd_flash(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, dLse, dDout, nh * hd,
                          dDQKV, dDQKV + nh * hd, dDQKV + (nh + nkv) * hd, nseq, seq, nh, nkv, hd, &dr);
        compare(c, "flash dropout dqkv", hdq, dDQKV, T * ld, TOL_REDUCTION);
        gs_dropout dh = dr;
        dh.key = gs_dropout_site_key(1, 2, GS_DROP_MLP_OUT, 3);
        dh.first = 40;
        float *hx = host_rand(T * 64, 3), *dHX = dev_from(c, hx, T * 64 * 4);
        gs_k_dropout_rows(hx, T, 64, &dh);
        o->k.dropout(c->s, dHX, T, 64, &dh);
        compare(c, "dropout rows", hx, dHX, T * 64, 0.0);
        free(hout), free(hdq), free(hlse), free(hx);
    }
    /* rope_bwd from equal inputs: the dropout checks above left their own dqkv on the device */
    c->ops->upload(c->d, c->s, dDQKV, dqkv, T * ld * 4);
    gs_k_rope_bwd(dqkv, T, seq, nh, hd, ld, 10000.0f);
    o->k.rope_bwd(c->s, dDQKV, T, seq, nh, hd, ld, 10000.0f);
    compare(c, "rope_bwd", dqkv, dDQKV, T * ld, TOL_REDUCTION);
    /* SwiGLU */
    float *gu = host_rand(t * 2 * f, 2), *sh = calloc(t * f, 4), *sdh = host_rand(t * f, 1), *sdgu = calloc(t * 2 * f, 4);
    gs_k_swiglu_fwd(gu, sh, t, f);
    gs_k_swiglu_bwd(gu, sdh, sdgu, t, f);
    float *dGU = dev_from(c, gu, t * 2 * f * 4), *dSH = dev_from(c, NULL, t * f * 4);
    float *dSDH = dev_from(c, sdh, t * f * 4), *dSDGU = dev_from(c, NULL, t * 2 * f * 4);
    o->k.swiglu_fwd(c->s, dGU, dSH, t, f);
    compare(c, "swiglu_fwd", sh, dSH, t * f, TOL_ELEMENTWISE);
    o->k.swiglu_bwd(c->s, dGU, dSDH, dSDGU, t, f);
    compare(c, "swiglu_bwd", sdgu, dSDGU, t * 2 * f, TOL_ELEMENTWISE);
    /* cross-entropy over two vocabulary slices (as TP 2 would split it) */
    size_t half = vocab / 2;
    float *logits = host_rand(t * vocab, 4), *stats = calloc(2 * t * 3, 4), *lse = calloc(t, 4);
    float *sl0 = malloc(t * half * 4), *sl1 = malloc(t * half * 4), *dl = calloc(t * half, 4);
    int32_t *tgt = malloc(t * 4);
    for (size_t r = 0; r < t; r++) {
        tgt[r] = (int32_t)((r * 31u) % vocab);
        memcpy(sl0 + r * half, logits + r * vocab, half * 4);
        memcpy(sl1 + r * half, logits + r * vocab + half, half * 4);
    }
    gs_k_xent_stats(sl0, tgt, t, 0, half, stats);
    gs_k_xent_stats(sl1, tgt, t, half, half, stats + t * 3);
    double loss = gs_k_xent_combine(stats, 2, t, lse);
    gs_k_xent_bwd(sl1, tgt, lse, t, half, half, 0.01f, dl);
    float *dS0 = dev_from(c, sl0, t * half * 4), *dS1 = dev_from(c, sl1, t * half * 4);
    int32_t *dTgt = dev_from(c, tgt, t * 4);
    float *dStats = dev_from(c, NULL, 2 * t * 3 * 4), *dLse = dev_from(c, NULL, t * 4), *dDL = dev_from(c, NULL, t * half * 4);
    o->k.xent_stats(c->s, dS0, dTgt, t, 0, half, dStats);
    o->k.xent_stats(c->s, dS1, dTgt, t, half, half, dStats + t * 3);
    compare(c, "xent_stats", stats, dStats, 2 * t * 3, TOL_REDUCTION);
    double dloss = 0;
    o->k.xent_combine(c->s, dStats, 2, t, dLse, &dloss);
    compare(c, "xent_combine", lse, dLse, t, TOL_REDUCTION);
    double lrel = fabs(dloss - loss) / fabs(loss);
    printf("  %-14s %10d  rel err %.2e  tol %.0e  %s\n", "xent loss", 1, lrel, TOL_REDUCTION,
           lrel <= TOL_REDUCTION ? "ok" : "FAIL");
    c->failures += !(lrel <= TOL_REDUCTION);
    o->k.xent_bwd(c->s, dS1, dTgt, dLse, t, half, half, 0.01f, dDL);
    compare(c, "xent_bwd", dl, dDL, t * half, TOL_REDUCTION);
    /* AdamW, three steps */
    size_t na = 100003;
    float *ap = host_rand(na, 1), *ag = host_rand(na, 1), *am = calloc(na, 4), *av = calloc(na, 4);
    float *dAP = dev_from(c, ap, na * 4), *dAG = dev_from(c, ag, na * 4), *dAM = dev_from(c, am, na * 4),
          *dAV = dev_from(c, av, na * 4);
    for (uint64_t st = 1; st <= 3; st++) {
        gs_k_adamw(ap, ag, am, av, na, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, st);
        o->k.adamw(c->s, dAP, dAG, dAM, dAV, na, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, st);
    }
    compare(c, "adamw p", ap, dAP, na, TOL_ELEMENTWISE);
    compare(c, "adamw v", av, dAV, na, TOL_ELEMENTWISE);
    /* host buffers are left to the process exit; device ones to the driver's close */
}

/* The GEMM attention path (a driver opened with GRIDSTEP_CUDA_ATTENTION=gemm) against
 * kernels/host on the shape of check_kernels' attention (GQA, fused qkv rows). Its products are
 * cuBLAS GEMMs in the driver's math mode, so the GEMM tolerance applies (fp32 1e-4; TF32 5e-3:
 * tests/check_attn_gemm_plan emulates TF32 on this shape and finds 4.9e-4 rounded, 1.4e-3
 * truncated). */
static void check_attn_gemm(ctx *c)
{
    const gs_driver_ops *o = c->ops;
    size_t nseq = 2, seq = 128, nh = 8, nkv = 2, hd = 64, T = nseq * seq, ld = (nh + 2 * nkv) * hd;
    size_t np = nseq * nh * seq * seq;
    printf("attention through cuBLAS GEMMs (GRIDSTEP_CUDA_ATTENTION=gemm) vs kernels/host:\n");
    float *qkv = host_rand(T * ld, 1), *out = calloc(T * nh * hd, 4), *p = calloc(np, 4);
    float *dout = host_rand(T * nh * hd, 1), *dqkv = calloc(T * ld, 4);
    gs_k_attn_fwd(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, nh * hd, p, nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, p, dout, nh * hd, dqkv, dqkv + nh * hd,
                  dqkv + (nh + nkv) * hd, nseq, seq, nh, nkv, hd);
    float *dQKV = dev_from(c, qkv, T * ld * 4), *dOut = dev_from(c, NULL, T * nh * hd * 4);
    float *dP = dev_from(c, NULL, np * 4), *dDout = dev_from(c, dout, T * nh * hd * 4);
    float *dDQKV = dev_from(c, NULL, T * ld * 4), *dDQKV2 = dev_from(c, NULL, T * ld * 4);
    o->k.attn_fwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, nh * hd, dP, nseq, seq, nh, nkv,
                hd, NULL);
    compare(c, "attn_gemm out", out, dOut, T * nh * hd, c->tol_gemm);
    compare(c, "attn_gemm p", p, dP, np, c->tol_gemm);
    /* masked probabilities exactly 0 (p's row a of each head: entries b > a) */
    float *got = malloc(np * 4);
    c->ops->download(c->d, c->s, got, dP, np * 4);
    size_t nonzero = 0;
    for (size_t r = 0; r < np / seq; r++)
        for (size_t b = r % seq + 1; b < seq; b++)
            nonzero += got[r * seq + b] != 0.0f;
    printf("  %-14s %10zu  nonzero %zu  %s\n", "attn_gemm mask", np, nonzero, nonzero ? "FAIL" : "ok");
    c->failures += nonzero != 0;
    for (int rep = 0; rep < 2; rep++)
        o->k.attn_bwd(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dP, dDout, nh * hd,
                    rep ? dDQKV2 : dDQKV, (rep ? dDQKV2 : dDQKV) + nh * hd, (rep ? dDQKV2 : dDQKV) + (nh + nkv) * hd,
                    nseq, seq, nh, nkv, hd, NULL);
    compare(c, "attn_gemm dqkv", dqkv, dDQKV, T * ld, c->tol_gemm);
    /* the same inputs twice: the same bits (GQA sums in a fixed order, no atomics) */
    float *g2 = malloc(T * ld * 4), *g1 = malloc(T * ld * 4);
    sync_or_die(c, "attn_gemm rerun");
    c->ops->download(c->d, c->s, g1, dDQKV, T * ld * 4);
    c->ops->download(c->d, c->s, g2, dDQKV2, T * ld * 4);
    int same = memcmp(g1, g2, T * ld * 4) == 0;
    printf("  %-14s %10zu  %s  %s\n", "attn_gemm rerun", T * ld, same ? "bitwise equal" : "bits differ",
           same ? "ok" : "FAIL");
    c->failures += !same;
    free(g1);
    free(g2);
    free(got);
}

/* The GEMM path's flash variant (GRIDSTEP_CUDA_ATTENTION=gemm on a flash scenario: the driver's
 * attn_fwd_flash / attn_bwd_flash ops, P recomputed from the lse) vs kernels/host's flash kernels
 * on the same inputs: out, lse, dqkv under the GEMM tolerances; the backward twice, the same
 * bits. Shapes: check_kernels' (GQA 8:2, hd 64) and seq 97 with one kv head, hd 128. */
static void check_gflash_shape(ctx *c, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    const gs_driver_ops *o = c->ops;
    size_t T = nseq * seq, ld = (nh + 2 * nkv) * hd, nl = nseq * nh * seq;
    printf("  attn_gflash shape: nseq %zu seq %zu heads %zu kv heads %zu hd %zu\n", nseq, seq, nh, nkv, hd);
    float *qkv = host_rand(T * ld, 1), *out = calloc(T * nh * hd, 4), *lse = calloc(nl, 4);
    float *dout = host_rand(T * nh * hd, 1), *dqkv = calloc(T * ld, 4);
    gs_k_attn_fwd_flash(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, nh * hd, lse, nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd_flash(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, lse, dout, nh * hd, dqkv,
                        dqkv + nh * hd, dqkv + (nh + nkv) * hd, nseq, seq, nh, nkv, hd);
    float *dQKV = dev_from(c, qkv, T * ld * 4), *dOut = dev_from(c, NULL, T * nh * hd * 4);
    float *dL = dev_from(c, NULL, nl * 4), *dDout = dev_from(c, dout, T * nh * hd * 4);
    float *dDQKV = dev_from(c, NULL, T * ld * 4), *dDQKV2 = dev_from(c, NULL, T * ld * 4);
    o->k.attn_fwd_flash(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, nh * hd, dL, nseq, seq, nh,
                      nkv, hd, NULL);
    compare(c, "attn_gflash out", out, dOut, T * nh * hd, c->tol_gemm);
    compare(c, "attn_gflash lse", lse, dL, nl, c->tol_gemm);
    for (int rep = 0; rep < 2; rep++) {
        float *g = rep ? dDQKV2 : dDQKV;
        o->k.attn_bwd_flash(c->s, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, dL, dDout, nh * hd, g,
                          g + nh * hd, g + (nh + nkv) * hd, nseq, seq, nh, nkv, hd, NULL);
    }
    compare(c, "attn_gflash dqkv", dqkv, dDQKV, T * ld, c->tol_gemm);
    float *g1 = malloc(T * ld * 4), *g2 = malloc(T * ld * 4);
    sync_or_die(c, "attn_gflash rerun");
    c->ops->download(c->d, c->s, g1, dDQKV, T * ld * 4);
    c->ops->download(c->d, c->s, g2, dDQKV2, T * ld * 4);
    int same = memcmp(g1, g2, T * ld * 4) == 0;
    printf("  %-14s %10zu  %s  %s\n", "attn_gflash rerun", T * ld, same ? "bitwise equal" : "bits differ",
           same ? "ok" : "FAIL");
    c->failures += !same;
    free(g1), free(g2), free(qkv), free(out), free(lse), free(dout), free(dqkv);
}

static void check_attn_gflash(ctx *c)
{
    printf("flash attention through cuBLAS GEMMs (GRIDSTEP_CUDA_ATTENTION=gemm, lse kept) vs kernels/host's flash:\n");
    check_gflash_shape(c, 2, 128, 8, 2, 64);
    check_gflash_shape(c, 1, 97, 4, 1, 128);
}

/* ---- flash attention: the kernels called directly on a stream of our own ------------------- */

static void cuda_or_die(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "kernel_check: %s: %s\n", what, cudaGetErrorString(rc));
        exit(1);
    }
}

static float *cuda_from(const float *h, size_t n)
{
    float *p = NULL;
    cuda_or_die(cudaMalloc((void **)&p, (n ? n : 1) * sizeof *p), "cudaMalloc");
    if (h)
        cuda_or_die(cudaMemcpy(p, h, n * sizeof *p, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    else
        cuda_or_die(cudaMemset(p, 0xff, n * sizeof *p), "cudaMemset"); /* NaN until written */
    return p;
}

/* Like compare() on host copies, over rows x cols of row-major buffers of leading dim ld. */
static void report_strided(ctx *c, const char *name, const float *ref, const float *got, size_t rows, size_t cols,
                           size_t ld, double tol)
{
    double maxref = 0, maxdiff = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t x = 0; x < cols; x++) {
            double f = fabs((double)ref[r * ld + x]), df = fabs((double)got[r * ld + x] - (double)ref[r * ld + x]);
            if (!(df <= maxdiff)) /* NaN counts */
                maxdiff = isnan(df) ? INFINITY : df;
            if (f > maxref)
                maxref = f;
        }
    double rel = maxdiff / (maxref > 0 ? maxref : 1);
    int ok = rel <= tol;
    printf("  %-14s %10zu  rel err %.2e  tol %.0e  %s\n", name, rows * cols, rel, tol, ok ? "ok" : "FAIL");
    c->failures += !ok;
}

/* Columns [w, ld) of each of rows rows: still NaN (the device buffer was filled with 0xff bytes). */
static void report_gap(ctx *c, const char *name, const float *got, size_t rows, size_t w, size_t ld)
{
    size_t touched = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t x = w; x < ld; x++)
            touched += !isnan(got[r * ld + x]);
    printf("  %-14s %10zu  touched %zu  %s\n", name, rows * (ld - w), touched, touched ? "FAIL" : "ok");
    c->failures += touched != 0;
}

/* One flash shape against kernels/host: fused qkv rows with 3 spare floats (NaN, so that a read
 * there would show), out/dout rows of nh * hd + 2 (the out's spare floats must stay untouched).
 * lse's reference is log sum exp in double. fp32 on both sides with different summation orders:
 * TOL_REDUCTION, as attn_fwd (the CPU emulator test, tests/check_flash_emu.c, holds 1e-5). */
static void check_flash_shape(ctx *c, cudaStream_t st, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    size_t T = nseq * seq, ld = (nh + 2 * nkv) * hd + 3, ldo = nh * hd + 2, nl = nseq * nh * seq;
    float *qkv = host_rand(T * ld, 1), *dout = host_rand(T * ldo, 1);
    for (size_t t = 0; t < T; t++) {
        for (size_t x = (nh + 2 * nkv) * hd; x < ld; x++)
            qkv[t * ld + x] = NAN;
        for (size_t x = nh * hd; x < ldo; x++)
            dout[t * ldo + x] = NAN;
    }
    float *out = calloc(T * ldo, 4), *p = calloc(nseq * nh * seq * seq, 4), *dqkv = calloc(T * ld, 4);
    float *lse = malloc(nl * 4);
    double *sc = malloc(seq * sizeof *sc);
    float *got = malloc(T * ld * 4), *got2 = malloc(T * ld * 4), *gout = malloc(T * ldo * 4), *glse = malloc(nl * 4);
    const float *q = qkv, *k = qkv + nh * hd, *v = qkv + (nh + nkv) * hd;
    gs_k_attn_fwd(q, ld, k, v, ld, out, ldo, p, nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd(q, ld, k, v, ld, p, dout, ldo, dqkv, dqkv + nh * hd, dqkv + (nh + nkv) * hd, nseq, seq, nh, nkv, hd);
    for (size_t s = 0; s < nseq; s++)
        for (size_t i = 0; i < nh; i++)
            for (size_t a = 0; a < seq; a++) {
                size_t j = i / (nh / nkv);
                double mx = -INFINITY, sum = 0;
                for (size_t b = 0; b <= a; b++) {
                    double dot = 0;
                    for (size_t d = 0; d < hd; d++)
                        dot += (double)q[(s * seq + a) * ld + i * hd + d] * k[(s * seq + b) * ld + j * hd + d];
                    sc[b] = dot / sqrt((double)hd);
                    mx = sc[b] > mx ? sc[b] : mx;
                }
                for (size_t b = 0; b <= a; b++)
                    sum += exp(sc[b] - mx);
                lse[(s * nh + i) * seq + a] = (float)(mx + log(sum));
            }
    float *dQKV = cuda_from(qkv, T * ld), *dDout = cuda_from(dout, T * ldo), *dOut = cuda_from(NULL, T * ldo);
    float *dLse = cuda_from(NULL, nl), *dDQ = cuda_from(NULL, T * ld), *dDQ2 = cuda_from(NULL, T * ld);
    int rc = gs_cu_attn_fwd_flash(st, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, ldo, dLse, nseq, seq,
                                  nh, nkv, hd);
    for (int rep = 0; rep < 2 && !rc; rep++) {
        float *g = rep ? dDQ2 : dDQ;
        rc = gs_cu_attn_bwd_flash(st, dQKV, ld, dQKV + nh * hd, dQKV + (nh + nkv) * hd, ld, dOut, dLse, dDout, ldo, g,
                                  g + nh * hd, g + (nh + nkv) * hd, nseq, seq, nh, nkv, hd);
    }
    if (!rc)
        rc = (int)cudaStreamSynchronize(st);
    printf("  attn_flash shape: nseq %zu seq %zu heads %zu kv heads %zu hd %zu\n", nseq, seq, nh, nkv, hd);
    if (rc) {
        printf("  %-14s %10d  %s  FAIL\n", "attn_flash run", 0, cudaGetErrorString((cudaError_t)rc));
        c->failures++;
    } else {
        cuda_or_die(cudaMemcpy(gout, dOut, T * ldo * 4, cudaMemcpyDeviceToHost), "download out");
        cuda_or_die(cudaMemcpy(glse, dLse, nl * 4, cudaMemcpyDeviceToHost), "download lse");
        cuda_or_die(cudaMemcpy(got, dDQ, T * ld * 4, cudaMemcpyDeviceToHost), "download dqkv");
        cuda_or_die(cudaMemcpy(got2, dDQ2, T * ld * 4, cudaMemcpyDeviceToHost), "download dqkv rerun");
        report_strided(c, "attn_flash out", out, gout, T, nh * hd, ldo, TOL_REDUCTION);
        report_gap(c, "attn_flash ogap", gout, T, nh * hd, ldo);
        report_strided(c, "attn_flash lse", lse, glse, 1, nl, nl, TOL_REDUCTION);
        report_strided(c, "attn_flash dqkv", dqkv, got, T, (nh + 2 * nkv) * hd, ld, TOL_REDUCTION);
        report_gap(c, "attn_flash dgap", got, T, (nh + 2 * nkv) * hd, ld);
        int same = memcmp(got, got2, T * ld * 4) == 0;
        printf("  %-14s %10zu  %s  %s\n", "attn_flash rerun", T * ld, same ? "bitwise equal" : "bits differ",
               same ? "ok" : "FAIL");
        c->failures += !same;
    }
    cudaFree(dQKV);
    cudaFree(dDout);
    cudaFree(dOut);
    cudaFree(dLse);
    cudaFree(dDQ);
    cudaFree(dDQ2);
    free(qkv);
    free(dout);
    free(out);
    free(p);
    free(dqkv);
    free(lse);
    free(sc);
    free(got);
    free(got2);
    free(gout);
    free(glse);
}

/* The flash kernels on check_kernels' attention shape (GQA 8:2, hd 64), on seq 97 (not a multiple
 * of the 32-row tile, MQA, hd 128) and on seq 33 (one past a tile, hd 256, the maximum). */
static void check_attn_flash(ctx *c)
{
    cudaStream_t st;
    cuda_or_die(cudaStreamCreate(&st), "cudaStreamCreate");
    printf("flash attention kernels (gs_cu_attn_fwd_flash / gs_cu_attn_bwd_flash) vs kernels/host:\n");
    check_flash_shape(c, st, 2, 128, 8, 2, 64);
    check_flash_shape(c, st, 1, 97, 4, 1, 128);
    check_flash_shape(c, st, 2, 33, 2, 1, 256);
    cudaStreamDestroy(st);
}

/* The flash kernels at time_attention's shape, timed with CUDA events; the same line format. */
static void time_attention_flash(void)
{
    size_t nseq = 1, seq = 2048, nh = 32, nkv = 32, hd = 128, T = nseq * seq, ld = (nh + 2 * nkv) * hd;
    cudaStream_t st;
    cudaEvent_t ev[4]; /* forward start, end; backward start, end */
    cuda_or_die(cudaStreamCreate(&st), "cudaStreamCreate");
    for (int e = 0; e < 4; e++)
        cuda_or_die(cudaEventCreate(&ev[e]), "cudaEventCreate");
    float *h = host_rand(T * ld, 1);
    float *qkv = cuda_from(h, T * ld), *out = cuda_from(NULL, T * nh * hd), *dout = cuda_from(h, T * nh * hd);
    float *lse = cuda_from(NULL, nseq * nh * seq), *dqkv = cuda_from(NULL, T * ld);
    free(h);
    const int iters = 5;
    int rc = 0;
    for (int it = -1; it < iters && !rc; it++) { /* it -1: warm-up */
        if (it == 0)
            cudaEventRecord(ev[0], st);
        rc = gs_cu_attn_fwd_flash(st, qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, nh * hd, lse, nseq, seq,
                                  nh, nkv, hd);
    }
    cudaEventRecord(ev[1], st);
    for (int it = -1; it < iters && !rc; it++) {
        if (it == 0)
            cudaEventRecord(ev[2], st);
        rc = gs_cu_attn_bwd_flash(st, qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, lse, dout, nh * hd,
                                  dqkv, dqkv + nh * hd, dqkv + (nh + nkv) * hd, nseq, seq, nh, nkv, hd);
    }
    cudaEventRecord(ev[3], st);
    if (!rc)
        rc = (int)cudaEventSynchronize(ev[3]);
    float fwd_ms = 0, bwd_ms = 0;
    if (!rc) {
        cudaEventElapsedTime(&fwd_ms, ev[0], ev[1]);
        cudaEventElapsedTime(&bwd_ms, ev[2], ev[3]);
        printf("  attention %-6s seq %zu heads %zu hd %zu: fwd %.2f ms  bwd %.2f ms\n", "flash", seq, nh, hd,
               fwd_ms / iters, bwd_ms / iters);
    } else {
        printf("  attention flash  timing: %s\n", cudaGetErrorString((cudaError_t)rc));
    }
    cudaFree(qkv);
    cudaFree(out);
    cudaFree(dout);
    cudaFree(lse);
    cudaFree(dqkv);
    for (int e = 0; e < 4; e++)
        cudaEventDestroy(ev[e]);
    cudaStreamDestroy(st);
}

typedef struct attn_arg {
    float *qkv, *out, *p, *dout, *dqkv;
    size_t nseq, seq, nh, nkv, hd;
} attn_arg;

static void run_attn_fwd(ctx *c, void *v)
{
    attn_arg *a = v;
    size_t ld = (a->nh + 2 * a->nkv) * a->hd;
    c->ops->k.attn_fwd(c->s, a->qkv, ld, a->qkv + a->nh * a->hd, a->qkv + (a->nh + a->nkv) * a->hd, ld, a->out,
                     a->nh * a->hd, a->p, a->nseq, a->seq, a->nh, a->nkv, a->hd, NULL);
}

static void run_attn_bwd(ctx *c, void *v)
{
    attn_arg *a = v;
    size_t ld = (a->nh + 2 * a->nkv) * a->hd;
    c->ops->k.attn_bwd(c->s, a->qkv, ld, a->qkv + a->nh * a->hd, a->qkv + (a->nh + a->nkv) * a->hd, ld, a->p, a->dout,
                     a->nh * a->hd, a->dqkv, a->dqkv + a->nh * a->hd, a->dqkv + (a->nh + a->nkv) * a->hd, a->nseq,
                     a->seq, a->nh, a->nkv, a->hd, NULL);
}

static void run_attn_fwd_flash(ctx *c, void *v)
{
    attn_arg *a = v;
    size_t ld = (a->nh + 2 * a->nkv) * a->hd;
    c->ops->k.attn_fwd_flash(c->s, a->qkv, ld, a->qkv + a->nh * a->hd, a->qkv + (a->nh + a->nkv) * a->hd, ld, a->out,
                           a->nh * a->hd, a->p, a->nseq, a->seq, a->nh, a->nkv, a->hd, NULL);
}

static void run_attn_bwd_flash(ctx *c, void *v)
{
    attn_arg *a = v;
    size_t ld = (a->nh + 2 * a->nkv) * a->hd;
    c->ops->k.attn_bwd_flash(c->s, a->qkv, ld, a->qkv + a->nh * a->hd, a->qkv + (a->nh + a->nkv) * a->hd, ld, a->out,
                           a->p, a->dout, a->nh * a->hd, a->dqkv, a->dqkv + a->nh * a->hd,
                           a->dqkv + (a->nh + a->nkv) * a->hd, a->nseq, a->seq, a->nh, a->nkv, a->hd, NULL);
}

typedef void (*bench_fn)(ctx *c, void *arg);
static double time_op(ctx *c, bench_fn fn, void *arg, int iters);

/* One layer's attention at llama2-7b's shape (a sequence of 2048 tokens, 32 heads of 128, MHA),
 * the path the driver was opened with; one line the device check reads. */
static void time_attention(ctx *c, const char *path)
{
    attn_arg a = {NULL, NULL, NULL, NULL, NULL, 1, 2048, 32, 32, 128};
    size_t T = a.nseq * a.seq, ld = (a.nh + 2 * a.nkv) * a.hd;
    float *h = host_rand(T * ld, 1);
    a.qkv = dev_from(c, h, T * ld * 4);
    free(h);
    a.out = dev_from(c, NULL, T * a.nh * a.hd * 4);
    a.dout = dev_from(c, NULL, T * a.nh * a.hd * 4);
    a.dqkv = dev_from(c, NULL, T * ld * 4);
    a.p = dev_from(c, NULL, a.nseq * a.nh * a.seq * a.seq * 4);
    int flash = strcmp(path, "gflash") == 0; /* the driver's flash ops: p holds the lse */
    double tf = time_op(c, flash ? run_attn_fwd_flash : run_attn_fwd, &a, 5);
    double tb = time_op(c, flash ? run_attn_bwd_flash : run_attn_bwd, &a, 5);
    printf("  attention %-6s seq %zu heads %zu hd %zu: fwd %.2f ms  bwd %.2f ms\n", path, a.seq, a.nh, a.hd, tf * 1e3,
           tb * 1e3);
    c->ops->free(c->d, 0, a.qkv);
    c->ops->free(c->d, 0, a.out);
    c->ops->free(c->d, 0, a.dout);
    c->ops->free(c->d, 0, a.dqkv);
    c->ops->free(c->d, 0, a.p);
    sync_or_die(c, "attention timing");
}

/* Seconds per call of fn over iters calls, timed by the driver's events. */

static double time_op(ctx *c, bench_fn fn, void *arg, int iters)
{
    gs_drv_event *e0, *e1;
    gs_error e;
    gs_error_init(&e);
    c->ops->event_create(c->d, &e0, &e);
    c->ops->event_create(c->d, &e1, &e);
    fn(c, arg); /* warm-up */
    c->ops->event_record(c->d, c->s, e0, &e);
    for (int i = 0; i < iters; i++)
        fn(c, arg);
    c->ops->event_record(c->d, c->s, e1, &e);
    sync_or_die(c, "benchmark");
    double s = (c->ops->event_time_s(c->d, e1) - c->ops->event_time_s(c->d, e0)) / iters;
    c->ops->event_destroy(c->d, e0);
    c->ops->event_destroy(c->d, e1);
    return s;
}

typedef struct bw_arg {
    float *a, *b, *c2, *d2;
    size_t n, t, h;
} bw_arg;

static void run_copy(ctx *c, void *v)
{
    bw_arg *a = v;
    c->ops->copy(c->d, c->s, a->b, a->a, a->n * 4);
}
static void run_adamw(ctx *c, void *v)
{
    bw_arg *a = v;
    c->ops->k.adamw(c->s, a->a, a->b, a->c2, a->d2, a->n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10);
}
static void run_rmsnorm(ctx *c, void *v)
{
    bw_arg *a = v;
    c->ops->k.rmsnorm_fwd(c->s, a->a, a->c2, a->b, a->d2, a->t, a->h, 1e-5f);
}

typedef struct gemm_arg {
    float *x, *w, *y;
    size_t t, k, n;
} gemm_arg;

static void run_linear(ctx *c, void *v)
{
    gemm_arg *g = v;
    c->ops->k.linear_fwd(c->s, g->x, g->w, g->y, g->t, g->k, g->n);
}

/* The fastest of cuBLASLt's top heuristic algorithms for the same column-major GEMM the
 * driver issues (y^T = w x^T), timed with CUDA events on a stream of our own. */
static double cublas_best(const gemm_arg *g, int tf32, int *nalgos)
{
    cublasLtHandle_t lt;
    cudaStream_t st;
    cudaEvent_t a, b;
    void *ws;
    size_t wsb = (size_t)32 << 20;
    double best = INFINITY;
    cublasLtCreate(&lt);
    cudaStreamCreate(&st);
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaMalloc(&ws, wsb);
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    cublasLtMatmulDescCreate(&op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, g->k, g->n, (int64_t)g->k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, g->k, g->t, (int64_t)g->k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, g->n, g->t, (int64_t)g->n);
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsu = wsb;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsu, sizeof wsu);
    cublasLtMatmulHeuristicResult_t res[8];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res, &found);
    float alpha = 1, beta = 0;
    for (int i = 0; i < found; i++) {
        if (cublasLtMatmul(lt, op, &alpha, g->w, la, g->x, lb, &beta, g->y, lc, g->y, lc, &res[i].algo, ws, wsb, st) !=
            CUBLAS_STATUS_SUCCESS)
            continue;
        cudaEventRecord(a, st);
        for (int it = 0; it < 10; it++)
            cublasLtMatmul(lt, op, &alpha, g->w, la, g->x, lb, &beta, g->y, lc, g->y, lc, &res[i].algo, ws, wsb, st);
        cudaEventRecord(b, st);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (ms / 10e3 < best)
            best = ms / 10e3;
    }
    *nalgos = found;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    cudaFree(ws);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(st);
    cublasLtDestroy(lt);
    return best;
}

static void check_speed(ctx *c, size_t tokens, int tf32)
{
    bw_arg bw = {0};
    bw.n = (size_t)64 << 20; /* 64 Mi floats = 256 MiB per buffer */
    bw.a = dev_from(c, NULL, bw.n * 4);
    bw.b = dev_from(c, NULL, bw.n * 4);
    bw.c2 = dev_from(c, NULL, bw.n * 4);
    bw.d2 = dev_from(c, NULL, bw.n * 4);
    double tc = time_op(c, run_copy, &bw, 20), ta = time_op(c, run_adamw, &bw, 20);
    bw.h = 4096;
    bw.t = bw.n / bw.h;
    double tr = time_op(c, run_rmsnorm, &bw, 20);
    double gc = 2.0 * bw.n * 4 / tc / 1e9, ga = 7.0 * bw.n * 4 / ta / 1e9, gr = (2.0 * bw.n + bw.h) * 4 / tr / 1e9;
    printf("HBM bandwidth (bytes moved / time):\n");
    printf("  %-22s %8.0f GB/s\n", "device-to-device copy", gc);
    printf("  %-22s %8.0f GB/s  %5.1f%% of the copy (28 B per element)\n", "adamw", ga, 100 * ga / gc);
    printf("  %-22s %8.0f GB/s  %5.1f%% of the copy (t=%zu h=%zu)\n", "rmsnorm_fwd", gr, 100 * gr / gc, bw.t, bw.h);
    /* llama2-7b GEMMs at `tokens` rows: QKV, O, gate+up, down, LM head (y = x w^T) */
    static const size_t shapes[][3] = {{4096, 12288, 0}, {4096, 4096, 0}, {4096, 22016, 0}, {11008, 4096, 0},
                                       {4096, 32000, 0}};
    static const char *names[] = {"qkv", "o_proj", "gate_up", "down", "lm_head"};
    printf("GEMM (llama2-7b shapes, %zu tokens, %s): driver linear_fwd vs the best of cuBLASLt's top algorithms\n",
           tokens, tf32 ? "TF32" : "fp32");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        gemm_arg g = {NULL, NULL, NULL, tokens, shapes[i][0], shapes[i][1]};
        g.x = dev_from(c, NULL, g.t * g.k * 4);
        g.w = dev_from(c, NULL, g.n * g.k * 4);
        g.y = dev_from(c, NULL, g.t * g.n * 4);
        double fl = 2.0 * g.t * g.k * g.n;
        double td = time_op(c, run_linear, &g, 10);
        int na = 0;
        double tb = cublas_best(&g, tf32, &na);
        printf("  %-8s t=%zu k=%-6zu n=%-6zu driver %7.1f TFLOP/s  cuBLASLt best of %d %7.1f TFLOP/s  (%5.1f%%)\n",
               names[i], g.t, g.k, g.n, fl / td / 1e12, na, fl / tb / 1e12, 100 * tb / td);
        c->ops->free(c->d, 0, g.x);
        c->ops->free(c->d, 0, g.w);
        c->ops->free(c->d, 0, g.y);
        sync_or_die(c, "gemm");
    }
}

static uint64_t one_group(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *size)
{
    (void)m, (void)g, (void)rank;
    if (size)
        *size = 1;
    return 0;
}

int main(int argc, char **argv)
{
    int quick = 0;
    size_t tokens = 2048;
    const char *module = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc)
            tokens = (size_t)strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !module)
            module = argv[i];
        else {
            fprintf(stderr, "usage: kernel_check [--quick] [--tokens T] MODULE.so\n");
            return 2;
        }
    }
    if (!module) {
        fprintf(stderr, "usage: kernel_check [--quick] [--tokens T] MODULE.so\n");
        return 2;
    }
    /* the module and its entry first: neither needs a GPU, so a module that cannot load or an
     * entry of another name fails here on every machine with the toolkit, not only on a GPU */
    void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "kernel_check: %s\n", dlerror());
        return 1;
    }
    /* the entry carries the table layout (exec/driver.h, as gs_driver_load asks for it) */
    char sym[64];
    snprintf(sym, sizeof sym, "gs_driver_cuda_module_abi%d", GS_DRIVER_ABI);
    const gs_driver_ops *(*entry)(void);
    *(void **)&entry = dlsym(h, sym);
    if (!entry) {
        fprintf(stderr, "kernel_check: %s: no %s (built for another gridstep?)\n", module, sym);
        return 1;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU (cudaGetDeviceCount)\n");
        return 77;
    }
    ctx c = {entry(), NULL, NULL, 0, TOL_GEMM_FP32};
    const char *gm = getenv("GRIDSTEP_CUDA_GEMM");
    int tf32 = gm && strcmp(gm, "tf32") == 0;
    if (tf32)
        c.tol_gemm = TOL_GEMM_TF32;
    gs_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        mesh.size[d] = 1;
        mesh.stride[d] = 1;
        mesh.order[d] = (gs_dim)d;
    }
    mesh.world = 1;
    mesh.gpus_per_node = 1;
    gs_driver_opts opts = {.timeout_s = 120, .group_of = one_group, .set = {.cuda_gemm = gm}};
    gs_error err;
    gs_error_init(&err);
    opts.set.cuda_attention = "kernels"; /* the attention kernels first */
    if (c.ops->open(&mesh, &opts, &c.d, &err) != GS_OK) {
        fprintf(stderr, "kernel_check: open: %s\n", err.msg);
        return 1;
    }
    if (c.ops->stream_create(c.d, 0, GS_STREAM_COMPUTE, &c.s, &err) != GS_OK) {
        fprintf(stderr, "kernel_check: %s\n", err.msg);
        return 1;
    }
    check_kernels(&c);
    check_attn_flash(&c);
    if (!quick) {
        check_speed(&c, tokens, tf32);
        printf("attention, one layer (%s GEMM math where GEMMs are used):\n", tf32 ? "TF32" : "fp32");
        time_attention(&c, "simple");
        time_attention_flash();
    }
    c.ops->stream_destroy(c.d, c.s);
    c.ops->close(c.d);
    /* the GEMM attention path: a second driver */
    opts.set.cuda_attention = "gemm";
    c.d = NULL;
    c.s = NULL;
    if (c.ops->open(&mesh, &opts, &c.d, &err) != GS_OK ||
        c.ops->stream_create(c.d, 0, GS_STREAM_COMPUTE, &c.s, &err) != GS_OK) {
        fprintf(stderr, "kernel_check: open (GRIDSTEP_CUDA_ATTENTION=gemm): %s\n", err.msg);
        return 1;
    }
    check_attn_gemm(&c);
    check_attn_gflash(&c);
    if (!quick) {
        time_attention(&c, "gemm");
        time_attention(&c, "gflash");
    }
    c.ops->stream_destroy(c.d, c.s);
    c.ops->close(c.d);
    printf("kernel check: %d failure%s\n", c.failures, c.failures == 1 ? "" : "s");
    return c.failures ? 1 : 0;
}
