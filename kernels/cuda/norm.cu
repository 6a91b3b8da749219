/* RMSNorm forward and backward on the GPU (kernels/host/kernels.h semantics): a block per row
 * with the sum of squares in double; dg summed over rows by one thread per column, rows in
 * order (deterministic, no atomics). */
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

static __global__ void k_rmsnorm_bwd_dg(const float *x, const float *rstd, const float *dy, float *dg, size_t t,
                                        size_t h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < h; i += (size_t)gridDim.x * blockDim.x) {
        float acc = dg[i];
        for (size_t r = 0; r < t; r++)
            acc += dy[r * h + i] * x[r * h + i] * rstd[r];
        dg[i] = acc;
    }
}

extern "C" int gs_cu_rmsnorm_fwd(cudaStream_t st, const float *x, const float *g, float *y, float *rstd, size_t t,
                                 size_t h, float eps)
{
    if (t && h)
        k_rmsnorm_fwd<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, y, rstd, h, eps);
    return gs_cu_last_error();
}

extern "C" int gs_cu_rmsnorm_bwd(cudaStream_t st, const float *x, const float *g, const float *rstd, const float *dy,
                                 float *dx, float *dg, size_t t, size_t h)
{
    if (!t || !h)
        return gs_cu_last_error();
    /* dg first: dx may be written over dy (in place), as the host kernel allows */
    k_rmsnorm_bwd_dg<<<gs_cu_blocks(h), GS_CU_THREADS, 0, st>>>(x, rstd, dy, dg, t, h);
    k_rmsnorm_bwd_dx<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(x, g, rstd, dy, dx, h);
    return gs_cu_last_error();
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
