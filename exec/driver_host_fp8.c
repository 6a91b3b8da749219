/* The host driver's FP8 linear kernels: a GEMM whose inputs are cast to FP8 with per-tensor
 * current scaling, emulated on the CPU (kernels/host/fp8.c casts, fp32 products and accumulation).
 *
 * Each input is replaced by its dequantized FP8 copy, q(x) / scale, and the fp32 GEMM runs on the
 * copies: a product of two FP8 values is exact in fp32, so this is an FP8 GEMM with fp32
 * accumulation whose scales are applied to each element instead of once to the accumulated sum
 * as cuBLASLt does (the two differ by fp32 rounding, far below FP8's). */
#include "exec/driver_host_internal.h"

#include <stdlib.h>

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

void gs__host_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n)
{
    float *own, *r = cast_room(s, t * k + n * k, &own);
    if (!r) {
        if (s)
            gs__host_round_failed(s, "FP8");
        return;
    }
    /* forward: activations and weights in E4M3 */
    gs_k_fp8_round_current(GS_FP8_E4M3, x, r, t * k);
    gs_k_fp8_round_current(GS_FP8_E4M3, w, r + t * k, n * k);
    gs_k_linear_fwd(r, r + t * k, y, t, k, n);
    free(own);
}

void gs__host_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n)
{
    float *own, *r = cast_room(s, t * k + n * k + t * n + (dw ? n * k : 0), &own);
    if (!r) {
        if (s)
            gs__host_round_failed(s, "FP8");
        return;
    }
    /* backward (HYBRID): the output gradient in E5M2, the forward's inputs cast again in E4M3
     * (current scaling: the same tensors give the forward's scales); only what the products
     * read is cast (dx = dy w reads w, dw += dy^T x reads x) */
    float *xq = r, *wq = r + t * k, *dyq = r + t * k + n * k, *wgrad = dw ? dyq + t * n : NULL;
    if (dw)
        gs_k_fp8_round_current(GS_FP8_E4M3, x, xq, t * k);
    if (dx)
        gs_k_fp8_round_current(GS_FP8_E4M3, w, wq, n * k);
    gs_k_fp8_round_current(GS_FP8_E5M2, dy, dyq, t * n);
    /* the weight gradient GEMM writes its own output, then added to dw, as Transformer Engine's
     * wgrad without gradient-accumulation fusion is (autograd adds it to the gradient): a
     * micro-batch's gradient is then the same sum on any grid, and a data-parallel rank's one
     * micro-batch reaches the reduction as the single rank's does */
    if (wgrad)
        for (size_t i = 0; i < n * k; i++)
            wgrad[i] = 0.0f;
    gs_k_linear_bwd(xq, wq, dyq, dx, wgrad, t, k, n);
    if (wgrad)
        gs_k_add(dw, wgrad, n * k);
    free(own);
}
