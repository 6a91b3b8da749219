/* The row passes of the GEMM attention path (kernels/cuda/attn_gemm_plan.c has the GEMMs and the
 * layouts): the causal softmax of score rows in place, and dS = P o (dP - D) from dP in place;
 * for the flash variant the softmax writing each row's lse, and P recomputed from the lse.
 * A block per (row, batch member); each thread walks its columns in a fixed order and the block
 * combines them in a fixed tree (gs_block_sum/max), so a launch gives the same bits every run.
 * Sums in double like kernels/host/attention.c. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define ROW_THREADS 256

/* Row a of member h: x = p + h*stride + a*ld, columns 0..n-1; softmax over b <= a, 0 past it. */
static __global__ void k_softmax_causal_rows(float *p, size_t ld, size_t stride, size_t n)
{
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t a = blockIdx.x, h = blockIdx.y;
    float *row = p + h * stride + a * ld;
    size_t last = a < n ? a : n - 1; /* keys 0..last are visible */
    float mx = -INFINITY;
    for (size_t b = threadIdx.x; b <= last; b += blockDim.x)
        mx = row[b] > mx ? row[b] : mx;
    mx = gs_block_max(mx, redf, -INFINITY);
    double sum = 0.0;
    for (size_t b = threadIdx.x; b <= last; b += blockDim.x) {
        float e = expf(row[b] - mx);
        row[b] = e;
        sum += e;
    }
    sum = gs_block_sum(sum, redd); /* synchronizes: every e is written before it is rescaled */
    float inv = (float)(1.0 / sum);
    for (size_t b = threadIdx.x; b < n; b += blockDim.x)
        row[b] = b <= last ? row[b] * inv : 0.0f;
}

/* Row a of member h: D = sum_{b<=a} P_ab dP_ab (double), then dS_ab = P_ab (dP_ab - D) in place
 * of dP for b <= a and exactly 0 past a. */
static __global__ void k_ds_causal_rows(const float *p, size_t ldp, size_t pstride, float *x, size_t ldx,
                                        size_t xstride, size_t n)
{
    __shared__ double redd[32];
    size_t a = blockIdx.x, h = blockIdx.y;
    const float *prow = p + h * pstride + a * ldp;
    float *xrow = x + h * xstride + a * ldx;
    size_t last = a < n ? a : n - 1;
    double part = 0.0;
    for (size_t b = threadIdx.x; b <= last; b += blockDim.x)
        part += (double)prow[b] * xrow[b];
    float d = (float)gs_block_sum(part, redd);
    for (size_t b = threadIdx.x; b < n; b += blockDim.x)
        xrow[b] = b <= last ? prow[b] * (xrow[b] - d) : 0.0f;
}

/* The flash variant's forward row pass: as k_softmax_causal_rows, and the row's lse (as
 * kernels/host/attention_flash.c forms it: max + log of the double sum). */
static __global__ void k_softmax_lse_rows(float *p, size_t ld, size_t stride, float *lse, size_t lstride, size_t n)
{
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t a = blockIdx.x, h = blockIdx.y;
    float *row = p + h * stride + a * ld;
    size_t last = a < n ? a : n - 1;
    float mx = -INFINITY;
    for (size_t b = threadIdx.x; b <= last; b += blockDim.x)
        mx = row[b] > mx ? row[b] : mx;
    mx = gs_block_max(mx, redf, -INFINITY);
    double sum = 0.0;
    for (size_t b = threadIdx.x; b <= last; b += blockDim.x) {
        float e = expf(row[b] - mx);
        row[b] = e;
        sum += e;
    }
    sum = gs_block_sum(sum, redd);
    if (threadIdx.x == 0)
        lse[h * lstride + a] = (float)((double)mx + log(sum));
    float inv = (float)(1.0 / sum);
    for (size_t b = threadIdx.x; b < n; b += blockDim.x)
        row[b] = b <= last ? row[b] * inv : 0.0f;
}

/* The flash variant's backward row pass: P_ab = exp(S_ab - lse_a) for b <= a, exactly 0 past a. */
static __global__ void k_p_lse_rows(float *x, size_t ld, size_t stride, const float *lse, size_t lstride, size_t n)
{
    size_t a = blockIdx.x, h = blockIdx.y;
    float *row = x + h * stride + a * ld;
    float l = lse[h * lstride + a];
    size_t last = a < n ? a : n - 1;
    for (size_t b = threadIdx.x; b < n; b += blockDim.x)
        row[b] = b <= last ? expf(row[b] - l) : 0.0f;
}

extern "C" int gs_cu_attn_softmax_lse_rows(cudaStream_t st, float *p, size_t ld, size_t stride, float *lse,
                                           size_t lstride, size_t rows, size_t n, size_t batch)
{
    if (!rows || !n || !batch)
        return 0;
    if (rows > 0x7fffffffu || batch > 65535 || ld < n)
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)rows, (unsigned)batch);
    k_softmax_lse_rows<<<grid, ROW_THREADS, 0, st>>>(p, ld, stride, lse, lstride, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_attn_p_lse_rows(cudaStream_t st, float *x, size_t ld, size_t stride, const float *lse,
                                     size_t lstride, size_t rows, size_t n, size_t batch)
{
    if (!rows || !n || !batch)
        return 0;
    if (rows > 0x7fffffffu || batch > 65535 || ld < n)
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)rows, (unsigned)batch);
    k_p_lse_rows<<<grid, ROW_THREADS, 0, st>>>(x, ld, stride, lse, lstride, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_attn_softmax_rows(cudaStream_t st, float *p, size_t ld, size_t stride, size_t rows, size_t n,
                                       size_t batch)
{
    if (!rows || !n || !batch)
        return 0;
    if (rows > 0x7fffffffu || batch > 65535 || ld < n)
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)rows, (unsigned)batch);
    k_softmax_causal_rows<<<grid, ROW_THREADS, 0, st>>>(p, ld, stride, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_attn_ds_rows(cudaStream_t st, const float *p, size_t ldp, size_t pstride, float *x, size_t ldx,
                                  size_t xstride, size_t rows, size_t n, size_t batch)
{
    if (!rows || !n || !batch)
        return 0;
    if (rows > 0x7fffffffu || batch > 65535 || ldp < n || ldx < n)
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)rows, (unsigned)batch);
    k_ds_causal_rows<<<grid, ROW_THREADS, 0, st>>>(p, ldp, pstride, x, ldx, xstride, n);
    return gs_cu_last_error();
}
