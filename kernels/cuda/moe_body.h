/* The device code of the mixture-of-experts kernels of the cuda driver (kernels/cuda/moe.cu): the
 * router's top-k with the softmax over the chosen logits and its backward, and the row moves of
 * the token permutation (gather, weighted scatter-add, per-row dot products), with the semantics
 * and the bits of kernels/host/moe.c. Written once in the C subset that nvcc (C++) and gcc (C11)
 * both accept, so that kernels/cuda/moe.cu compiles it for the GPU and tests/check_cuda_emu_moe.c
 * runs the same text on the CPU emulator of CUDA's execution model (tests/cuda_emu.h).
 *
 * The includer defines GS_KERNEL, GS_DEVICE, GS_TID, GS_BDIM, GS_BID_X (attention_flash_body.h
 * says what each stands for) and may define GS_FMUL / GS_FADD (CUDA: __fmul_rn / __fadd_rn, so
 * that nvcc does not contract a product and a sum into one fused multiply-add: the host's C
 * rounds each, and the bits must be the host's). No atomics, no shared memory: every kernel is a
 * loop per thread in the host loop's order.
 *
 * Work split: top-k (forward and backward) and rows_dot run a thread per row; rows_gather a
 * thread per element (grid-stride, `stride` = the launch's threads); rows_scatter_add a thread
 * per column, walking the rows in order, so that two copies of a token adding into one row add in
 * the host's order (deterministic, the host's bits; the parallelism is the row width, which a
 * token-sorted variant would have to beat).
 *
 * Ownership: the kernels borrow every pointer (device memory) for the launch. */
#ifndef GS_MOE_BODY_H
#define GS_MOE_BODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifndef GS_FMUL
#define GS_FMUL(a, b) ((a) * (b))
#endif
#ifndef GS_FADD
#define GS_FADD(a, b) ((a) + (b))
#endif

#define GS_MOE_THREADS 128 /* threads per block of every MoE launch */

/* The global index of the calling thread. */
GS_DEVICE size_t gs_moe_gid(void)
{
    return (size_t)GS_BID_X * (size_t)GS_BDIM + (size_t)GS_TID;
}

/* Row r of t x experts logits: its k largest (ties: the lower expert, in descending order) into
 * idx[r k ..], their softmax into probs[r k ..] (double sums, the largest first). */
GS_KERNEL gs_moe_topk_fwd_kernel(const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                                 float *probs)
{
    size_t r = gs_moe_gid();
    if (r >= t)
        return;
    const float *l = logits + r * experts;
    int32_t *ix = idx + r * k;
    float *p = probs + r * k;
    for (size_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (size_t e = 0; e < experts; e++) {
            int taken = 0;
            for (size_t q = 0; q < j && !taken; q++)
                taken = ix[q] == (int32_t)e;
            if (!taken && (best < 0 || l[e] > l[best]))
                best = (int32_t)e;
        }
        ix[j] = best;
    }
    double m = l[ix[0]], sum = 0.0;
    for (size_t j = 0; j < k; j++)
        sum += exp((double)l[ix[j]] - m);
    for (size_t j = 0; j < k; j++)
        p[j] = (float)(exp((double)l[ix[j]] - m) / sum);
}

/* dlogits (t x experts, written in full) from the k probabilities' gradients through the softmax:
 * dl[idx_j] = p_j (dp_j - sum_i p_i dp_i), 0 elsewhere. */
GS_KERNEL gs_moe_topk_bwd_kernel(const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                                 size_t experts, size_t k, float *dlogits)
{
    size_t r = gs_moe_gid();
    if (r >= t)
        return;
    const float *p = probs + r * k, *dp = dprobs + r * k;
    float *dl = dlogits + r * experts;
    double dot = 0.0;
    for (size_t j = 0; j < k; j++)
        dot += (double)p[j] * dp[j];
    for (size_t e = 0; e < experts; e++)
        dl[e] = 0.0f;
    for (size_t j = 0; j < k; j++)
        dl[idx[r * k + j]] = (float)((double)p[j] * ((double)dp[j] - dot));
}

/* dst[i][c] = w[i] src[idx[i]][c] (w NULL: a copy), i < n, c < h; elements from the thread's
 * global index in steps of `stride`. */
GS_KERNEL gs_rows_gather_kernel(const float *src, const int32_t *idx, const float *w, size_t n, size_t h, float *dst,
                                size_t stride)
{
    for (size_t e = gs_moe_gid(); e < n * h; e += stride) {
        size_t i = e / h, c = e % h;
        float v = src[(size_t)idx[i] * h + c];
        dst[e] = w ? GS_FMUL(w[i], v) : v;
    }
}

/* dst[idx[i]][c] += w[i] src[i][c] for i = 0, 1, .., n - 1 in that order (w NULL: weight 1), one
 * thread per column c < h. */
GS_KERNEL gs_rows_scatter_add_kernel(const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                                     float *dst)
{
    size_t c = gs_moe_gid();
    if (c >= h)
        return;
    for (size_t i = 0; i < n; i++) {
        float *d = dst + (size_t)idx[i] * h + c;
        float v = src[i * h + c];
        *d = GS_FADD(*d, w ? GS_FMUL(w[i], v) : v);
    }
}

/* out[i] = sum over c of a[idx[i]][c] b[i][c], in double in column order, one thread per row. */
GS_KERNEL gs_rows_dot_kernel(const float *a, const int32_t *idx, const float *b, size_t n, size_t h, float *out)
{
    size_t i = gs_moe_gid();
    if (i >= n)
        return;
    const float *x = a + (size_t)idx[i] * h, *y = b + i * h;
    double acc = 0.0;
    for (size_t c = 0; c < h; c++)
        acc += (double)x[c] * y[c];
    out[i] = (float)acc;
}

/* Blocks of GS_MOE_THREADS for `threads` threads (at least one). */
static inline size_t gs_moe_blocks(size_t threads)
{
    size_t b = (threads + GS_MOE_THREADS - 1) / GS_MOE_THREADS;
    return b ? b : 1;
}

/* rows_gather's grid: a block per GS_MOE_THREADS elements, at most 65535 x 8 blocks (the
 * kernel's grid-stride loop covers the rest). */
static inline size_t gs_rows_gather_blocks(size_t n, size_t h)
{
    size_t b = gs_moe_blocks(n * h);
    return b > 65535u * 8u ? 65535u * 8u : b;
}

#endif
