/* RMSNorm forward and backward on the GPU (kernels/host/kernels.h semantics): a block per row
 * with the sum of squares in double (rows of up to 8192 floats, 16-byte aligned, are read once
 * into registers as float4s: one pass over HBM); dg summed over rows in two stages, each column's
 * rows in chunks of RMS_DG_ROWS in order, then the chunks in order (deterministic, no atomics),
 * so a launch gives the same bits every run. */
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

static __global__ void k_rmsnorm_fwd(const float *x, const float *g, float *y, float *rstd, size_t h, float eps)
{
    __shared__ double red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * h;
    float *yr = y + r * h;
    double s = 0.0;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        s += (double)xr[i] * xr[i];
    s = gs_block_sum(s, red);
    float rs = (float)(1.0 / sqrt(s / (double)h + (double)eps));
    if (threadIdx.x == 0)
        rstd[r] = rs;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        yr[i] = xr[i] * rs * g[i];
}

#define RMS_VEC 8 /* float4s a thread keeps: rows up to RMS_VEC x 4 x GS_CU_THREADS floats */

static __global__ void __launch_bounds__(GS_CU_THREADS)
    k_rmsnorm_fwd_vec(const float4 *x, const float4 *g, float4 *y, float *rstd, size_t h4, size_t h, float eps)
{
    __shared__ double red[32];
    size_t r = blockIdx.x;
    const float4 *xr = x + r * h4;
    float4 *yr = y + r * h4;
    float4 v[RMS_VEC];
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < RMS_VEC; j++) {
        size_t i = threadIdx.x + (size_t)j * GS_CU_THREADS;
        if (i < h4) {
            v[j] = xr[i];
            s += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z + (double)v[j].w * v[j].w;
        }
    }
    s = gs_block_sum(s, red);
    float rs = (float)(1.0 / sqrt(s / (double)h + (double)eps));
    if (threadIdx.x == 0)
        rstd[r] = rs;
#pragma unroll
    for (int j = 0; j < RMS_VEC; j++) {
        size_t i = threadIdx.x + (size_t)j * GS_CU_THREADS;
        if (i < h4) {
            float4 gg = g[i];
            yr[i] = make_float4(v[j].x * rs * gg.x, v[j].y * rs * gg.y, v[j].z * rs * gg.z, v[j].w * rs * gg.w);
        }
    }
}

static __global__ void k_rmsnorm_bwd_dx(const float *x, const float *g, const float *rstd, const float *dy, float *dx,
                                        size_t h)
{
    __shared__ double red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * h, *dyr = dy + r * h;
    float *dxr = dx + r * h;
    float rs = rstd[r];
    double dot = 0.0;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        dot += (double)dyr[i] * g[i] * xr[i];
    dot = gs_block_sum(dot, red);
    float coef = (float)(dot * (double)rs * (double)rs / (double)h);
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        dxr[i] = rs * (g[i] * dyr[i] - xr[i] * coef);
}

#define RMS_DG_ROWS 32 /* rows a thread sums for one column in the first stage */
#define RMS_DG_MAX_CHUNKS 1024

/* Stage 1: part[c * h + i] = sum over rows c*RMS_DG_ROWS.. (in order) of dy x rstd, column i. */
static __global__ void k_rmsnorm_bwd_dg_part(const float *x, const float *rstd, const float *dy, float *part,
                                             size_t t, size_t h, size_t rows)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, c = blockIdx.y;
    if (i >= h)
        return;
    size_t r0 = c * rows, r1 = r0 + rows < t ? r0 + rows : t;
    float acc = 0.0f;
    for (size_t r = r0; r < r1; r++)
        acc += dy[r * h + i] * x[r * h + i] * rstd[r];
    part[c * h + i] = acc;
}

/* Stage 2: dg[i] += the chunks' sums, in chunk order. */
static __global__ void k_rmsnorm_bwd_dg_sum(const float *part, float *dg, size_t chunks, size_t h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < h; i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (size_t c = 0; c < chunks; c++)
            acc += part[c * h + i];
        dg[i] += acc;
    }
}

extern "C" int gs_cu_rmsnorm_fwd(cudaStream_t st, const float *x, const float *g, float *y, float *rstd, size_t t,
                                 size_t h, float eps)
{
    if (!t || !h)
        return gs_cu_last_error();
    if (h % 4 == 0 && h <= (size_t)RMS_VEC * 4 * GS_CU_THREADS && ((uintptr_t)x | (uintptr_t)g | (uintptr_t)y) % 16 == 0)
        k_rmsnorm_fwd_vec<<<(unsigned)t, GS_CU_THREADS, 0, st>>>((const float4 *)x, (const float4 *)g, (float4 *)y, rstd,
                                                                 h / 4, h, eps);
    else
        k_rmsnorm_fwd<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, y, rstd, h, eps);
    return gs_cu_last_error();
}

extern "C" int gs_cu_rmsnorm_bwd(cudaStream_t st, const float *x, const float *g, const float *rstd, const float *dy,
                                 float *dx, float *dg, size_t t, size_t h)
{
    if (!t || !h)
        return gs_cu_last_error();
    /* dg first: dx may be written over dy (in place), as the host kernel allows. Its chunk sums
     * go to stream-ordered scratch (at most RMS_DG_MAX_CHUNKS x h floats: 16 MiB at h = 4096) */
    size_t rows = RMS_DG_ROWS, chunks = (t + rows - 1) / rows;
    if (chunks > RMS_DG_MAX_CHUNKS) {
        chunks = RMS_DG_MAX_CHUNKS;
        rows = (t + chunks - 1) / chunks;
        chunks = (t + rows - 1) / rows;
    }
    float *part = NULL;
    cudaError_t ce = cudaMallocAsync((void **)&part, chunks * h * sizeof(float), st);
    if (ce != cudaSuccess) {
        (void)cudaGetLastError(); /* not left pending for the next launch's check */
        return (int)ce;
    }
    dim3 grid((unsigned)((h + GS_CU_THREADS - 1) / GS_CU_THREADS), (unsigned)chunks);
    k_rmsnorm_bwd_dg_part<<<grid, GS_CU_THREADS, 0, st>>>(x, rstd, dy, part, t, h, rows);
    k_rmsnorm_bwd_dg_sum<<<gs_cu_blocks(h), GS_CU_THREADS, 0, st>>>(part, dg, chunks, h);
    k_rmsnorm_bwd_dx<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, rstd, dy, dx, h);
    int rc = gs_cu_last_error();
    ce = cudaFreeAsync(part, st);
    return rc ? rc : (int)ce;
}

/* ---- LayerNorm (GPT): a block per row, mean and variance in double; dg and db summed over rows
 * by one thread per column, rows in order ---------------------------------------------------- */

static __global__ void k_layernorm_fwd(const float *x, const float *g, const float *b, float *y, float *mean,
                                       float *rstd, size_t h, float eps)
{
    __shared__ double red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * h;
    float *yr = y + r * h;
    double s = 0.0;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        s += (double)xr[i];
    double mu = gs_block_sum(s, red) / (double)h, v = 0.0;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        v += ((double)xr[i] - mu) * ((double)xr[i] - mu);
    v = gs_block_sum(v, red);
    float m = (float)mu, rs = (float)(1.0 / sqrt(v / (double)h + (double)eps));
    if (threadIdx.x == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
    for (size_t i = threadIdx.x; i < h; i += blockDim.x)
        yr[i] = (xr[i] - m) * rs * g[i] + b[i];
}

static __global__ void k_layernorm_bwd_dx(const float *x, const float *g, const float *mean, const float *rstd,
                                          const float *dy, float *dx, size_t h)
{
    __shared__ double red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * h, *dyr = dy + r * h;
    float *dxr = dx + r * h;
    float m = mean[r], rs = rstd[r];
    double s1 = 0.0, s2 = 0.0;
    for (size_t i = threadIdx.x; i < h; i += blockDim.x) {
        double xh = ((double)xr[i] - m) * rs, dxh = (double)g[i] * dyr[i];
        s1 += dxh;
        s2 += dxh * xh;
    }
    s1 = gs_block_sum(s1, red);
    s2 = gs_block_sum(s2, red);
    float c1 = (float)(s1 / (double)h), c2 = (float)(s2 / (double)h);
    for (size_t i = threadIdx.x; i < h; i += blockDim.x) {
        float xh = (xr[i] - m) * rs;
        dxr[i] = rs * (g[i] * dyr[i] - c1 - xh * c2);
    }
}

static __global__ void k_layernorm_bwd_dgb(const float *x, const float *mean, const float *rstd, const float *dy,
                                           float *dg, float *db, size_t t, size_t h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < h; i += (size_t)gridDim.x * blockDim.x) {
        float ag = dg[i], ab = db[i];
        for (size_t r = 0; r < t; r++) {
            float d = dy[r * h + i];
            ag += d * ((x[r * h + i] - mean[r]) * rstd[r]);
            ab += d;
        }
        dg[i] = ag;
        db[i] = ab;
    }
}

extern "C" int gs_cu_layernorm_fwd(cudaStream_t st, const float *x, const float *g, const float *b, float *y,
                                   float *mean, float *rstd, size_t t, size_t h, float eps)
{
    if (t && h)
        k_layernorm_fwd<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, b, y, mean, rstd, h, eps);
    return gs_cu_last_error();
}

extern "C" int gs_cu_layernorm_bwd(cudaStream_t st, const float *x, const float *g, const float *mean,
                                   const float *rstd, const float *dy, float *dx, float *dg, float *db, size_t t,
                                   size_t h)
{
    if (!t || !h)
        return gs_cu_last_error();
    /* dg and db first: dx may be written over dy (in place), as the host kernel allows */
    k_layernorm_bwd_dgb<<<gs_cu_blocks(h), GS_CU_THREADS, 0, st>>>(x, mean, rstd, dy, dg, db, t, h);
    k_layernorm_bwd_dx<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, mean, rstd, dy, dx, h);
    return gs_cu_last_error();
}
