/* Vocab-parallel cross-entropy on the GPU (kernels/host/kernels.h semantics): per-row slice
 * statistics (a block per row, sums in double), their combination (one block, rows strided over
 * threads, the loss summed in double in a fixed tree order) and the logits' gradient. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define XS 3 /* GS_K_XENT_STATS */

static __device__ inline int in_slice(int32_t target, size_t lo, size_t vn, size_t *col)
{
    if (target < 0 || (size_t)target < lo || (size_t)target - lo >= vn)
        return 0;
    *col = (size_t)target - lo;
    return 1;
}

static __global__ void k_xent_stats(const float *logits, const int32_t *target, size_t lo, size_t vn, float *stats)
{
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t r = blockIdx.x;
    const float *x = logits + r * vn;
    float mx = -INFINITY;
    for (size_t c = threadIdx.x; c < vn; c += blockDim.x)
        mx = x[c] > mx ? x[c] : mx;
    mx = gs_block_max(mx, redf, -INFINITY);
    double sum = 0.0;
    for (size_t c = threadIdx.x; c < vn; c += blockDim.x)
        sum += exp((double)x[c] - (double)mx);
    sum = gs_block_sum(sum, redd);
    if (threadIdx.x == 0) {
        size_t col;
        stats[r * XS + 0] = mx;
        stats[r * XS + 1] = (float)sum;
        stats[r * XS + 2] = in_slice(target[r], lo, vn, &col) ? x[col] : 0.0f;
    }
}

static __global__ void k_xent_combine(const float *stats, size_t parts, size_t t, float *lse, double *loss_dev)
{
    __shared__ double red[32];
    double loss = 0.0;
    for (size_t r = threadIdx.x; r < t; r += blockDim.x) {
        double mx = -INFINITY;
        for (size_t part = 0; part < parts; part++) {
            double m = stats[(part * t + r) * XS + 0];
            mx = m > mx ? m : mx;
        }
        double sum = 0.0, tl = 0.0;
        for (size_t part = 0; part < parts; part++) {
            const float *s = stats + (part * t + r) * XS;
            if (s[1] > 0.0f)
                sum += (double)s[1] * exp((double)s[0] - mx);
            tl += s[2];
        }
        double l = mx + log(sum);
        lse[r] = (float)l;
        loss += l - tl;
    }
    loss = gs_block_sum(loss, red);
    if (threadIdx.x == 0)
        *loss_dev = loss;
}

static __global__ void k_xent_bwd(const float *logits, const int32_t *target, const float *lse, size_t t, size_t lo,
                                  size_t vn, float scale, float *dlogits)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < t * vn; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / vn, c = i % vn, col;
        float e = (float)exp((double)logits[i] - (double)lse[r]);
        dlogits[i] = in_slice(target[r], lo, vn, &col) && col == c ? scale * (e - 1.0f) : scale * e;
    }
}

extern "C" int gs_cu_xent_stats(cudaStream_t st, const float *logits, const int32_t *target, size_t t,
                                size_t vocab_lo, size_t vocab_n, float *stats)
{
    if (t)
        k_xent_stats<<<(unsigned)t, GS_CU_THREADS, 0, st>>>(logits, target, vocab_lo, vocab_n, stats);
    return gs_cu_last_error();
}

extern "C" int gs_cu_xent_combine(cudaStream_t st, const float *stats, size_t parts, size_t t, float *lse,
                                  double *loss_dev)
{
    k_xent_combine<<<1, 1024, 0, st>>>(stats, parts, t, lse, loss_dev);
    return gs_cu_last_error();
}

extern "C" int gs_cu_xent_bwd(cudaStream_t st, const float *logits, const int32_t *target, const float *lse, size_t t,
                              size_t vocab_lo, size_t vocab_n, float scale, float *dlogits)
{
    if (t * vocab_n)
        k_xent_bwd<<<gs_cu_blocks(t * vocab_n), GS_CU_THREADS, 0, st>>>(logits, target, lse, t, vocab_lo, vocab_n,
                                                                       scale, dlogits);
    return gs_cu_last_error();
}
