/* FP8 casts on the GPU under current scaling: the launchers of the kernels written in
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

extern "C" int gs_cu_fp8_round_current(cudaStream_t st, int fmt, const float *x, size_t n, float *scratch, float *y)
{
    if (fmt != 0 && fmt != 1)
        return (int)cudaErrorInvalidValue;
    size_t b = gs_fp8_blocks(n);
    size_t sh = GS_FP8_THREADS * sizeof(float);
    float *partial = scratch, *scale = scratch + GS_FP8_AMAX_BLOCKS;
    gs_fp8_amax_kernel<<<(unsigned)b, GS_FP8_THREADS, sh, st>>>(x, n, b * GS_FP8_THREADS, partial);
    int rc = gs_cu_last_error();
    if (rc)
        return rc;
    gs_fp8_scale_kernel<<<1, GS_FP8_THREADS, sh, st>>>(partial, b, fmt, scale);
    rc = gs_cu_last_error();
    if (rc || !n)
        return rc;
    gs_fp8_round_kernel<<<(unsigned)b, GS_FP8_THREADS, 0, st>>>(x, n, b * GS_FP8_THREADS, fmt, scale, y);
    return gs_cu_last_error();
}
