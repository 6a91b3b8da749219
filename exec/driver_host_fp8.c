/* The host driver's FP8 linear kernels: a GEMM whose inputs are cast to FP8 with per-tensor
 * current scaling, emulated on the CPU (kernels/host/fp8.c casts, fp32 products and accumulation).
 *
 * Each input is replaced by its dequantized FP8 copy, q(x) / scale, and the fp32 GEMM runs on the
 * copies: a product of two FP8 values is exact in fp32, so this is an FP8 GEMM with fp32
 * accumulation whose scales are applied to each element instead of once to the accumulated sum
 * as cuBLASLt does (the two differ by fp32 rounding, far below FP8's).
 *
 * With scale blocks (sp) one rank computes what a TP run's ranks do: each block of an operand
 * takes its own current scale as each rank casts its shard (and, with token row blocks, as each
 * CP rank casts its tokens' rows of x and dy), and the sums TP splits are split alike: a
 * row-parallel forward (k cut) and a column-parallel backward's dx (n cut) are each block's
 * product (the rank's partial sum), added in block order as the host's reductions add
 * the ranks' in member order. FP8's rounding is a step function: a different fp32 summation
 * order upstream would flip codes next to a midpoint, and the flips grow over steps.
 *
 * Delayed scaling (sc): every cast at the scale given, whatever the blocks (a TP run's ranks
 * share the scale the amax reduction gave them), recording the tensor's amax; the blocks still
 * split the sums as above. */
#include "exec/driver_host_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/host/kernels.h"

/* Room for `floats` cast inputs: the stream's buffer, or (no stream: a direct call) *own. */
static float *cast_room(gs_drv_stream *s, size_t floats, float **own)
{
    *own = NULL;
    if (s)
        return gs__host_round_room(s, floats);
    *own = malloc(floats * sizeof **own);
    return *own;
}

/* A scratch of n floats (at least one), NULL when out of memory. */
static float *room(size_t n)
{
    return malloc((n ? n : 1) * sizeof(float));
}

/* dst [rows, w] = the columns of src [rows, cols] in block b of cut c, in order (w of them). */
static size_t take_cols(const float *src, size_t rows, size_t cols, const gs_fp8_cut *c, size_t b, float *dst)
{
    size_t w = 0;
    for (size_t j = 0; j < cols; j++)
        if (gs_k_fp8_block_of(c, cols, j) == b)
            w++;
    for (size_t i = 0; i < rows; i++) {
        size_t o = 0;
        for (size_t j = 0; j < cols; j++)
            if (gs_k_fp8_block_of(c, cols, j) == b)
                dst[i * w + o++] = src[i * cols + j];
    }
    return w;
}

/* dst = the rows of src [rows, cols] in block b of cut c, in order; their count. */
static size_t take_rows(const float *src, size_t rows, size_t cols, const gs_fp8_cut *c, size_t b, float *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < rows; i++)
        if (gs_k_fp8_block_of(c, rows, i) == b)
            memcpy(dst + o++ * cols, src + i * cols, cols * sizeof *dst);
    return o;
}

/* x [rows, cols] cast into y: at scale *scale recording x's amax in *amax (the maximum with what
 * is there; NULL: none) under delayed scaling (scale non-NULL), else per block of rc x cc at the
 * block's own amax. */
static void cast(gs_fp8_fmt f, const float *x, float *y, size_t rows, size_t cols, const gs_fp8_cut *rc,
                 const gs_fp8_cut *cc, const float *scale, float *amax)
{
    if (!scale) {
        gs_k_fp8_round_blocks(f, x, y, rows, cols, rc, cc);
        return;
    }
    float a = gs_k_fp8_round_scaled(f, *scale, x, y, rows * cols);
    if (amax)
        *amax = gs_k_max_nan(*amax, a);
}

/* y [t, n] = sum over the k blocks of xq's and wq's block products, in block order (a TP run's
 * row-parallel partial sums and their reduction). 0 when out of memory. */
static int fwd_k_blocks(const float *xq, const float *wq, float *y, size_t t, size_t k, size_t n,
                        const gs_fp8_cut *ck)
{
    float *xb = room(t * k), *wb = room(n * k), *pb = room(t * n);
    int ok = xb && wb && pb;
    for (size_t b = 0; ok && b < ck->parts; b++) {
        size_t kw = take_cols(xq, t, k, ck, b, xb);
        take_cols(wq, n, k, ck, b, wb);
        gs_k_linear_fwd(xb, wb, b ? pb : y, t, kw, n);
        if (b)
            gs_k_add(y, pb, t * n);
    }
    free(xb);
    free(wb);
    free(pb);
    return ok;
}

/* dx [t, k] = sum over the n blocks of dyq's and wq's block products, in block order (a TP run's
 * column-parallel input gradients and their reduction). 0 when out of memory. */
static int bwd_dx_n_blocks(const float *wq, const float *dyq, float *dx, size_t t, size_t k, size_t n,
                           const gs_fp8_cut *cn)
{
    float *dyb = room(t * n), *wb = room(n * k), *pb = room(t * k);
    int ok = dyb && wb && pb;
    for (size_t b = 0; ok && b < cn->parts; b++) {
        size_t nw = take_cols(dyq, t, n, cn, b, dyb);
        take_rows(wq, n, k, cn, b, wb);
        gs_k_linear_bwd(NULL, wb, dyb, b ? pb : dx, NULL, t, k, nw);
        if (b)
            gs_k_add(dx, pb, t * k);
    }
    free(dyb);
    free(wb);
    free(pb);
    return ok;
}

/* dw [n, k] = the sum over the token row blocks of dyq's and xq's block products, in block order
 * (a CP run's ranks' weight gradients over their own tokens, and their reduction, which adds the
 * ranks' in member order). 0 when out of memory. */
static int bwd_dw_t_blocks(const float *xq, const float *dyq, float *dw, size_t t, size_t k, size_t n,
                           const gs_fp8_cut *ct)
{
    float *xb = room(t * k), *dyb = room(t * n), *pb = room(n * k);
    int ok = xb && dyb && pb;
    for (size_t b = 0; ok && b < ct->parts; b++) {
        size_t rows = take_rows(xq, t, k, ct, b, xb);
        take_rows(dyq, t, n, ct, b, dyb);
        float *out = b ? pb : dw;
        for (size_t i = 0; i < n * k; i++)
            out[i] = 0.0f;
        gs_k_linear_bwd(xb, NULL, dyb, NULL, out, rows, k, n);
        if (b)
            gs_k_add(dw, pb, n * k);
    }
    free(xb);
    free(dyb);
    free(pb);
    return ok;
}

void gs__host_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc)
{
    float *own, *r = cast_room(s, t * k + n * k, &own);
    if (!r) {
        if (s)
            gs__host_round_failed(s, "FP8");
        return;
    }
    /* forward: activations and weights in E4M3 */
    cast(GS_FP8_E4M3, x, r, t, k, sp ? &sp->t : NULL, sp ? &sp->k : NULL, sc ? &sc->x : NULL, sc ? sc->amax_x : NULL);
    cast(GS_FP8_E4M3, w, r + t * k, n, k, sp ? &sp->n : NULL, sp ? &sp->k : NULL, sc ? &sc->w : NULL,
         sc ? sc->amax_w : NULL);
    if (sp && sp->k.parts > 1) {
        if (!fwd_k_blocks(r, r + t * k, y, t, k, n, &sp->k) && s)
            gs__host_round_failed(s, "FP8");
    } else {
        gs_k_linear_fwd(r, r + t * k, y, t, k, n);
    }
    free(own);
}

void gs__host_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc)
{
    float *own, *r = cast_room(s, t * k + n * k + t * n + (dw ? n * k : 0), &own);
    if (!r) {
        if (s)
            gs__host_round_failed(s, "FP8");
        return;
    }
    /* backward (HYBRID): the output gradient in E5M2, the forward's inputs cast again in E4M3
     * (current scaling: the same tensors give the forward's scales; delayed: the forward's scales
     * are given, and only dy's amax is recorded); only what the products read is cast (dx = dy w
     * reads w, dw += dy^T x reads x) */
    float *xq = r, *wq = r + t * k, *dyq = r + t * k + n * k, *wgrad = dw ? dyq + t * n : NULL;
    const gs_fp8_cut *ck = sp ? &sp->k : NULL, *cn = sp ? &sp->n : NULL, *ct = sp ? &sp->t : NULL;
    if (dw)
        cast(GS_FP8_E4M3, x, xq, t, k, ct, ck, sc ? &sc->x : NULL, NULL);
    if (dx)
        cast(GS_FP8_E4M3, w, wq, n, k, cn, ck, sc ? &sc->w : NULL, NULL);
    cast(GS_FP8_E5M2, dy, dyq, t, n, ct, cn, sc ? &sc->dy : NULL, sc ? sc->amax_dy : NULL);
    /* the weight gradient GEMM writes its own output, then added to dw, as Transformer Engine's
     * wgrad without gradient-accumulation fusion is (autograd adds it to the gradient): a
     * micro-batch's gradient is then the same sum on any grid, and a data-parallel rank's one
     * micro-batch reaches the reduction as the single rank's does */
    /* token row blocks (a CP run's ranks): each block's weight gradient apart, then their sum */
    if (wgrad && ct && ct->parts > 1 && ct->parts <= GS_FP8_MAX_BLOCKS) {
        if (!bwd_dw_t_blocks(xq, dyq, wgrad, t, k, n, ct) && s)
            gs__host_round_failed(s, "FP8");
        gs_k_add(dw, wgrad, n * k);
        wgrad = NULL;
    } else if (wgrad) {
        for (size_t i = 0; i < n * k; i++)
            wgrad[i] = 0.0f;
    }
    if (dx && sp && sp->n.parts > 1) {
        gs_k_linear_bwd(xq, wq, dyq, NULL, wgrad, t, k, n);
        if (!bwd_dx_n_blocks(wq, dyq, dx, t, k, n, &sp->n) && s)
            gs__host_round_failed(s, "FP8");
    } else {
        gs_k_linear_bwd(xq, wq, dyq, dx, wgrad, t, k, n);
    }
    if (wgrad)
        gs_k_add(dw, wgrad, n * k);
    free(own);
}
