/* FP8 casts on the GPU under current scaling (and delayed scaling's casts at a given scale): the launchers of the kernels written in
 * kernels/cuda/fp8_body.h (tests/check_cuda_emu_fp8.c runs the same text on the CPU emulator).
 * Three launches per tensor on the stream, no host synchronization: per-block maxima of |x|, one
 * block for the amax and the scale (left in device memory), the cast and its inverse. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define GS_KERNEL static __global__ void __launch_bounds__(GS_FP8_THREADS)
#define GS_DEVICE static __device__ inline
#define GS_DYN_SHARED(name) extern __shared__ float name[]
#define GS_SYNC() __syncthreads()
#define GS_TID threadIdx.x
#define GS_BDIM blockDim.x
#define GS_BID_X blockIdx.x
#define GS_FMUL(a, b) __fmul_rn((a), (b))

#include "kernels/cuda/fp8_body.h"

extern "C" size_t gs_cu_fp8_scratch_floats(void)
{
    return GS_FP8_AMAX_BLOCKS + 4;
}

/* The amax and scale launches of x's n elements into scratch. */
static int amax_scale(cudaStream_t st, int fmt, const float *x, size_t n, float *scratch, size_t *blocks)
{
    size_t b = gs_fp8_blocks(n);
    size_t sh = GS_FP8_THREADS * sizeof(float);
    gs_fp8_amax_kernel<<<(unsigned)b, GS_FP8_THREADS, sh, st>>>(x, n, b * GS_FP8_THREADS, scratch);
    int rc = gs_cu_last_error();
    if (rc)
        return rc;
    gs_fp8_scale_kernel<<<1, GS_FP8_THREADS, sh, st>>>(scratch, b, fmt, scratch + GS_FP8_AMAX_BLOCKS);
    *blocks = b;
    return gs_cu_last_error();
}

extern "C" const float *gs_cu_fp8_inverse_scale(const float *scratch)
{
    return scratch + GS_FP8_AMAX_BLOCKS + 1;
}

extern "C" int gs_cu_fp8_quantize_current(cudaStream_t st, int fmt, const float *x, size_t rows, size_t cols,
                                          int transpose, float *scratch, unsigned char *q)
{
    if (fmt != 0 && fmt != 1)
        return (int)cudaErrorInvalidValue;
    size_t b = 0, n = rows * cols;
    int rc = amax_scale(st, fmt, x, n, scratch, &b);
    if (rc || !n)
        return rc;
    gs_fp8_quantize_kernel<<<(unsigned)b, GS_FP8_THREADS, 0, st>>>(x, rows, cols, transpose, b * GS_FP8_THREADS, fmt,
                                                                   scratch + GS_FP8_AMAX_BLOCKS, q);
    return gs_cu_last_error();
}

extern "C" int gs_cu_fp8_round_scaled(cudaStream_t st, int fmt, float scale, const float *x, size_t n,
                                      float *scratch, float *y)
{
    if (fmt != 0 && fmt != 1)
        return (int)cudaErrorInvalidValue;
    size_t b = gs_fp8_blocks(n), sh = GS_FP8_THREADS * sizeof(float);
    float *out = scratch + GS_FP8_AMAX_BLOCKS;
    gs_fp8_amax_kernel<<<(unsigned)b, GS_FP8_THREADS, sh, st>>>(x, n, b * GS_FP8_THREADS, scratch);
    int rc = gs_cu_last_error();
    if (rc)
        return rc;
    gs_fp8_given_kernel<<<1, GS_FP8_THREADS, sh, st>>>(scratch, b, scale, out);
    if ((rc = gs_cu_last_error()) || !n)
        return rc;
    gs_fp8_round_kernel<<<(unsigned)b, GS_FP8_THREADS, 0, st>>>(x, n, b * GS_FP8_THREADS, fmt, out, y);
    return gs_cu_last_error();
}

extern "C" const float *gs_cu_fp8_amax_of(const float *scratch)
{
    return scratch + GS_FP8_AMAX_BLOCKS + 2;
}

extern "C" int gs_cu_fp8_round_current(cudaStream_t st, int fmt, const float *x, size_t n, float *scratch, float *y)
{
    if (fmt != 0 && fmt != 1)
        return (int)cudaErrorInvalidValue;
    size_t b = 0;
    float *scale = scratch + GS_FP8_AMAX_BLOCKS;
    int rc = amax_scale(st, fmt, x, n, scratch, &b);
    if (rc || !n)
        return rc;
    gs_fp8_round_kernel<<<(unsigned)b, GS_FP8_THREADS, 0, st>>>(x, n, b * GS_FP8_THREADS, fmt, scale, y);
    return gs_cu_last_error();
}
