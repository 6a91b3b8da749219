/* The cuda driver's FP8 linear layers under Transformer Engine's current scaling
 * (gs_driver_kernels.linear_fwd_fp8 / linear_bwd_fp8), with exec/driver_host_fp8.c's semantics:
 * each GEMM input is replaced by its dequantized FP8 copy, q(x scale) / scale with the scale from
 * the tensor's own amax (kernels/cuda/fp8.cu: amax, scale and cast on the device, the host's
 * bits; no host synchronization), and the driver's own GEMM (gs__cuda_k_linear_*: cuBLASLt, with
 * the arithmetic GRIDSTEP_CUDA_GEMM chooses) runs on the copies. A product of two FP8 values is
 * exact in fp32, so under fp32 GEMMs this is an FP8 GEMM with fp32 accumulation whose scales are
 * applied to each element rather than once to the sum, as cuBLASLt's FP8 kernels apply them; the
 * two differ by fp32 rounding only. The forward casts x and w to E4M3; the backward (HYBRID) dy to
 * E5M2 and what its products read of x and w to E4M3; the weight gradient is computed into its
 * own buffer and then added to dw, as the host does.
 *
 * Memory: one buffer per stream (gs_drv_stream.fp8_buf), grown on demand on the stream: the casts'
 * scratch, then the copies, each 256-byte aligned. */
#include "exec/driver_cuda_internal.h"
#include "kernels/cuda/kernels_cuda.h"

#define FP8_ALIGN_FLOATS 64 /* 256 B */

static size_t aligned(size_t floats)
{
    return (floats + FP8_ALIGN_FLOATS - 1) / FP8_ALIGN_FLOATS * FP8_ALIGN_FLOATS;
}

/* The stream's FP8 buffer with room for the scratch and copies of the given sizes (n of them,
 * 0-sized ones allowed); *scratch and copy[i] point into it. 0 when it could not be had (the
 * stream failed). */
static int fp8_room(gs_drv_stream *s, const size_t *sizes, size_t n, float **scratch, float **copy)
{
    size_t floats = aligned(gs_cu_fp8_scratch_floats());
    for (size_t i = 0; i < n; i++)
        floats += aligned(sizes[i]);
    size_t bytes = floats * sizeof(float);
    if (bytes > s->fp8_cap) {
        if (s->fp8_buf)
            cudaFreeAsync(s->fp8_buf, s->cs);
        s->fp8_buf = NULL;
        s->fp8_cap = 0;
        cudaError_t e = cudaMallocAsync(&s->fp8_buf, bytes, s->cs);
        if (e != cudaSuccess) {
            s->fp8_buf = NULL;
            gs__cuda_fail_stream(s, "cudaMallocAsync (%zu B for FP8 GEMM inputs): %s", bytes, cudaGetErrorString(e));
            return 0;
        }
        s->fp8_cap = bytes;
    }
    float *p = s->fp8_buf;
    *scratch = p;
    p += aligned(gs_cu_fp8_scratch_floats());
    for (size_t i = 0; i < n; i++) {
        copy[i] = p;
        p += aligned(sizes[i]);
    }
    return 1;
}

/* y = x's dequantized FP8 copy in format fmt (0 E4M3, 1 E5M2) at x's current scale. */
static int round_current(gs_drv_stream *s, int fmt, const float *x, size_t n, float *scratch, float *y)
{
    int rc = gs_cu_fp8_round_current(gs__cuda_work_on(s), fmt, x, n, scratch, y);
    gs__cuda_kernel_ok(s, fmt ? "fp8_round_e5m2" : "fp8_round_e4m3", rc);
    return rc == 0;
}

void gs__cuda_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n)
{
    const size_t sizes[2] = {t * k, n * k};
    float *scratch, *c[2];
    if (!fp8_room(s, sizes, 2, &scratch, c))
        return;
    if (round_current(s, 0, x, t * k, scratch, c[0]) && round_current(s, 0, w, n * k, scratch, c[1]))
        gs__cuda_k_linear_fwd(s, c[0], c[1], y, t, k, n);
}

void gs__cuda_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n)
{
    /* only what the products read is cast: dx = dy w reads w, dw += dy^T x reads x */
    const size_t sizes[4] = {dw ? t * k : 0, dx ? n * k : 0, t * n, dw ? n * k : 0};
    float *scratch, *c[4];
    if (!fp8_room(s, sizes, 4, &scratch, c))
        return;
    float *xq = c[0], *wq = c[1], *dyq = c[2], *wgrad = dw ? c[3] : NULL;
    if (dw && !round_current(s, 0, x, t * k, scratch, xq))
        return;
    if (dx && !round_current(s, 0, w, n * k, scratch, wq))
        return;
    if (!round_current(s, 1, dy, t * n, scratch, dyq))
        return;
    if (wgrad)
        CU_OK(s, cudaMemsetAsync(wgrad, 0, n * k * sizeof(float), gs__cuda_work_on(s)));
    gs__cuda_k_linear_bwd(s, xq, dx ? wq : w, dyq, dx, wgrad, t, k, n);
    if (wgrad)
        gs__cuda_k_add(s, dw, wgrad, n * k);
}
