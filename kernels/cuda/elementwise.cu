/* Element-wise CUDA kernels: add, scale, fill, embedding, SwiGLU, RoPE, AdamW and dropout, with the
 * semantics of kernels/host/kernels.h. */
#include <cuda_bf16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (size_t)gridDim.x * blockDim.x)

static __global__ void k_add(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n) y[i] += x[i];
}

static __global__ void k_scale(float *y, float a, size_t n)
{
    GRID_STRIDE(i, n) y[i] *= a;
}

static __global__ void k_fill(float *y, float value, size_t n)
{
    GRID_STRIDE(i, n) y[i] = value;
}

extern "C" int gs_cu_add(cudaStream_t st, float *y, const float *x, size_t n)
{
    if (n)
        k_add<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(y, x, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_scale(cudaStream_t st, float *y, float a, size_t n)
{
    if (n)
        k_scale<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(y, a, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_fill(cudaStream_t st, float *y, float value, size_t n)
{
    if (n)
        k_fill<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(y, value, n);
    return gs_cu_last_error();
}

/* ---- embedding ---------------------------------------------------------------------------- */

static __device__ inline long embed_row(int32_t tok, size_t lo, size_t vn)
{
    if (tok < 0 || (size_t)tok < lo || (size_t)tok - lo >= vn)
        return -1;
    return (long)((size_t)tok - lo);
}

static __global__ void k_embed_fwd(const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn, size_t h,
                                   float *y)
{
    GRID_STRIDE(i, t * h)
    {
        size_t r = i / h, c = i % h;
        long row = embed_row(tok[r], lo, vn);
        y[i] = row < 0 ? 0.0f : w[(size_t)row * h + c];
    }
}

/* One thread per column, rows in order: repeated tokens add in the host's order. */
static __global__ void k_embed_bwd(const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn, size_t h,
                                   float *dw)
{
    GRID_STRIDE(c, h)
    {
        for (size_t r = 0; r < t; r++) {
            long row = embed_row(tok[r], lo, vn);
            if (row >= 0)
                dw[(size_t)row * h + c] += dy[r * h + c];
        }
    }
}

extern "C" int gs_cu_embed_fwd(cudaStream_t st, const int32_t *tok, size_t t, const float *w, size_t vocab_lo,
                               size_t vocab_n, size_t h, float *y)
{
    if (t * h)
        k_embed_fwd<<<gs_cu_blocks(t * h), GS_CU_THREADS, 0, st>>>(tok, t, w, vocab_lo, vocab_n, h, y);
    return gs_cu_last_error();
}

extern "C" int gs_cu_embed_bwd(cudaStream_t st, const int32_t *tok, size_t t, const float *dy, size_t vocab_lo,
                               size_t vocab_n, size_t h, float *dw)
{
    if (t * h)
        k_embed_bwd<<<gs_cu_blocks(h), GS_CU_THREADS, 0, st>>>(tok, t, dy, vocab_lo, vocab_n, h, dw);
    return gs_cu_last_error();
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

static __device__ inline float sigmoidf_(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

static __global__ void k_swiglu_fwd(const float *gu, float *h, size_t t, size_t f)
{
    GRID_STRIDE(i, t * f)
    {
        size_t r = i / f, c = i % f;
        float g = gu[r * 2 * f + c], u = gu[r * 2 * f + f + c];
        h[i] = g * sigmoidf_(g) * u;
    }
}

static __global__ void k_swiglu_bwd(const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    GRID_STRIDE(i, t * f)
    {
        size_t r = i / f, c = i % f;
        float g = gu[r * 2 * f + c], u = gu[r * 2 * f + f + c], s = sigmoidf_(g), d = dh[i];
        dgu[r * 2 * f + c] = d * u * s * (1.0f + g * (1.0f - s));
        dgu[r * 2 * f + f + c] = d * g * s;
    }
}

extern "C" int gs_cu_swiglu_fwd(cudaStream_t st, const float *gu, float *h, size_t t, size_t f)
{
    if (t * f)
        k_swiglu_fwd<<<gs_cu_blocks(t * f), GS_CU_THREADS, 0, st>>>(gu, h, t, f);
    return gs_cu_last_error();
}

extern "C" int gs_cu_swiglu_bwd(cudaStream_t st, const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    if (t * f)
        k_swiglu_bwd<<<gs_cu_blocks(t * f), GS_CU_THREADS, 0, st>>>(gu, dh, dgu, t, f);
    return gs_cu_last_error();
}

/* ---- RoPE (rotate half), angles in double like the host ----------------------------------- */

static __global__ void k_rope(float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta,
                              double sign)
{
    size_t half = hd / 2;
    GRID_STRIDE(idx, t * nh * half)
    {
        size_t i = idx % half, head = (idx / half) % nh, r = idx / (half * nh);
        double angle = sign * (double)(r % seq) * pow((double)theta, -2.0 * (double)i / (double)hd);
        float c = (float)cos(angle), s = (float)sin(angle);
        float *v = x + r * ld + head * hd;
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
    }
}

extern "C" int gs_cu_rope(cudaStream_t st, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld,
                          float theta, double sign)
{
    size_t n = t * nh * (hd / 2);
    if (n)
        k_rope<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(x, t, seq, nh, hd, ld, theta, sign);
    return gs_cu_last_error();
}

/* ---- AdamW (PyTorch's single-tensor order of operations, as the host kernel) --------------- */

static __global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float decay, float step_size,
                               float bias2_sqrt, float beta2, float one_minus_b2, float lerp_w, float lerp_1mw,
                               int lerp_low, float eps)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i], pi = p[i] * decay, mi = m[i], vi = v[i];
        mi = lerp_low ? mi + lerp_w * (gi - mi) : gi - (gi - mi) * lerp_1mw;
        vi = vi * beta2 + one_minus_b2 * gi * gi;
        float denom = sqrtf(vi) / bias2_sqrt + eps;
        p[i] = pi + (-step_size * mi) / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

extern "C" int gs_cu_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v, size_t n, float decay,
                           float step_size, float bias2_sqrt, float beta2, float one_minus_b2, float lerp_w,
                           float lerp_1mw, int lerp_low, float eps)
{
    if (n)
        k_adamw<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(p, g, m, v, n, decay, step_size, bias2_sqrt, beta2,
                                                          one_minus_b2, lerp_w, lerp_1mw, lerp_low, eps);
    return gs_cu_last_error();
}

/* ---- GELU (tanh approximation, in double like the host) and linear biases ------------------- */

#define GS_CU_GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GS_CU_GELU_A 0.044715

static __global__ void k_gelu_fwd(const float *x, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + tanh(GS_CU_GELU_C * (v + GS_CU_GELU_A * v * v * v))));
    }
}

static __global__ void k_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        double v = x[i], th = tanh(GS_CU_GELU_C * (v + GS_CU_GELU_A * v * v * v));
        double d = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * GS_CU_GELU_C * (1.0 + 3.0 * GS_CU_GELU_A * v * v);
        dx[i] = (float)(d * dy[i]);
    }
}

static __global__ void k_bias_add(float *y, const float *b, size_t t, size_t n)
{
    GRID_STRIDE(i, t * n)
    {
        y[i] += b[i % n];
    }
}

/* One thread per column, rows in order, summed in double (the host kernel's order). */
static __global__ void k_bias_grad(const float *dy, float *db, size_t t, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (size_t r = 0; r < t; r++)
            s += dy[r * n + i];
        db[i] += (float)s;
    }
}

extern "C" int gs_cu_gelu_fwd(cudaStream_t st, const float *x, float *y, size_t n)
{
    if (n)
        k_gelu_fwd<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(x, y, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_gelu_bwd(cudaStream_t st, const float *x, const float *dy, float *dx, size_t n)
{
    if (n)
        k_gelu_bwd<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(x, dy, dx, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_bias_add(cudaStream_t st, float *y, const float *b, size_t t, size_t n)
{
    if (t * n)
        k_bias_add<<<gs_cu_blocks(t * n), GS_CU_THREADS, 0, st>>>(y, b, t, n);
    return gs_cu_last_error();
}

extern "C" int gs_cu_bias_grad(cudaStream_t st, const float *dy, float *db, size_t t, size_t n)
{
    if (t && n)
        k_bias_grad<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>(dy, db, t, n);
    return gs_cu_last_error();
}

/* ---- hidden dropout ----------------------------------------------------------------------- */

/* kernels/dropout.h's hidden indexing: element (r, j) is token drop.first + r of the sequences
 * from drop.seq0, index pos * h + j within its sequence. */
static __global__ void k_dropout_rows(float *x, size_t rows, size_t h, gs_dropout drop)
{
    GRID_STRIDE(e, rows * h)
    {
        size_t r = e / h, j = e - r * h;
        uint64_t tok = drop.first + r, seq = drop.seq0 + tok / drop.seq_len, pos = tok % drop.seq_len;
        uint64_t sk = gs_dropout_seq_key(drop.key, seq);
        x[e] = gs_dropout_keep(sk, pos * h + j, drop.threshold) ? x[e] * drop.scale : 0.0f;
    }
}

extern "C" int gs_cu_dropout_rows(cudaStream_t st, float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    if (drop && drop->threshold && rows && h)
        k_dropout_rows<<<gs_cu_blocks(rows * h), GS_CU_THREADS, 0, st>>>(x, rows, h, *drop);
    return gs_cu_last_error();
}

/* ---- bf16 GEMM inputs --------------------------------------------------------------------- */

static __global__ void k_to_bf16(__nv_bfloat16 *dst, const float *src, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

extern "C" int gs_cu_to_bf16(cudaStream_t st, void *dst, const float *src, size_t n)
{
    if (n)
        k_to_bf16<<<gs_cu_blocks(n), GS_CU_THREADS, 0, st>>>((__nv_bfloat16 *)dst, src, n);
    return gs_cu_last_error();
}
