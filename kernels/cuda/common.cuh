/* Shared helpers of the CUDA kernels: grid sizing and block reductions (fixed tree order, so a
 * launch gives the same bits for the same inputs and block size). */
#ifndef GS_KERNELS_CUDA_COMMON_CUH
#define GS_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#define GS_CU_THREADS 256

/* Blocks for n elements at GS_CU_THREADS per block, capped (kernels loop grid-stride). */
static inline unsigned gs_cu_blocks(size_t n)
{
    size_t b = (n + GS_CU_THREADS - 1) / GS_CU_THREADS;
    if (b > 65535u * 8u)
        b = 65535u * 8u;
    return b ? (unsigned)b : 1u;
}

static inline int gs_cu_last_error(void)
{
    return (int)cudaGetLastError();
}

template <typename T> __device__ inline T gs_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <typename T> __device__ inline T gs_warp_max(T v)
{
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_down_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. */
template <typename T> __device__ inline T gs_block_sum(T v, T *shared32)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = gs_warp_sum(v);
    __syncthreads();
    if (lane == 0)
        shared32[warp] = v;
    __syncthreads();
    T r = 0;
    if (warp == 0) {
        r = lane < nw ? shared32[lane] : (T)0;
        r = gs_warp_sum(r);
        if (lane == 0)
            shared32[0] = r;
    }
    __syncthreads();
    r = shared32[0];
    __syncthreads();
    return r;
}

template <typename T> __device__ inline T gs_block_max(T v, T *shared32, T lowest)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = gs_warp_max(v);
    __syncthreads();
    if (lane == 0)
        shared32[warp] = v;
    __syncthreads();
    T r = lowest;
    if (warp == 0) {
        r = lane < nw ? shared32[lane] : lowest;
        r = gs_warp_max(r);
        if (lane == 0)
            shared32[0] = r;
    }
    __syncthreads();
    r = shared32[0];
    __syncthreads();
    return r;
}

#endif
