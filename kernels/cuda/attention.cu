/* Causal GQA attention on the GPU (kernels/host/kernels.h semantics), straightforward and exact:
 * forward: a block per (sequence, head, query row) scores the causal prefix (a warp per key),
 * takes the softmax in shared memory (sum in double), saves the probabilities into p and writes
 * P V. Backward from the saved p: a block per query row gives dq and D_a = sum_b P_ab dP_ab; a
 * block per (sequence, kv head, key row) sums dk and dv over its query heads and rows, warps
 * combined in a fixed order (no atomics: the same bits each run). Head dimension <= 256.
 * Attention dropout (kernels/dropout.h): P V multiplies the masked probabilities, p keeps the
 * undropped ones, and the backward draws the mask again for dP and dv. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_MAX_HD 256

static __device__ inline float warp_allsum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The dropout factor of probability (local head i, a, b) of sequence key sk: 1 without dropout. */
static __device__ inline float attn_z(const gs_dropout &drop, uint64_t sk, size_t i, size_t seq, size_t a, size_t b)
{
    if (!drop.threshold)
        return 1.0f;
    return gs_dropout_keep(sk, ((drop.first + i) * seq + a) * seq + b, drop.threshold) ? drop.scale : 0.0f;
}

static __global__ void k_attn_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                                  size_t ldo, float *p, size_t seq, size_t nh, size_t group, size_t hd, float scale,
                                  gs_dropout drop)
{
    extern __shared__ float prow[]; /* seq floats */
    __shared__ float qs[ATT_MAX_HD];
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t a = blockIdx.x, i = blockIdx.y, s = blockIdx.z, j = i / group, row0 = s * seq;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x)
        qs[d] = q[(row0 + a) * ldq + i * hd + d];
    __syncthreads();
    for (size_t b = warp; b <= a; b += ATT_WARPS) {
        const float *kb = k + (row0 + b) * ldkv + j * hd;
        float part = 0.0f;
        for (size_t d = lane; d < hd; d += 32)
            part += qs[d] * kb[d];
        part = warp_allsum(part);
        if (lane == 0)
            prow[b] = scale * part;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (size_t b = threadIdx.x; b <= a; b += blockDim.x)
        mx = prow[b] > mx ? prow[b] : mx;
    mx = gs_block_max(mx, redf, -INFINITY);
    double sum = 0.0;
    for (size_t b = threadIdx.x; b <= a; b += blockDim.x) {
        float e = expf(prow[b] - mx);
        prow[b] = e;
        sum += e;
    }
    sum = gs_block_sum(sum, redd);
    float inv = (float)(1.0 / sum);
    float *pg = p + ((s * nh + i) * seq + a) * seq;
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    for (size_t b = threadIdx.x; b < seq; b += blockDim.x) {
        float x = b <= a ? prow[b] * inv : 0.0f;
        if (b <= a) /* the probabilities P V multiplies: dropped ones 0, kept ones scaled */
            prow[b] = x * attn_z(drop, sk, i, seq, a, b);
        pg[b] = x;
    }
    __syncthreads();
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (size_t b = 0; b <= a; b++)
            acc += prow[b] * v[(row0 + b) * ldkv + j * hd + d];
        out[(row0 + a) * ldo + i * hd + d] = acc;
    }
}

/* dq of one query row and D_a (saved for the dk/dv pass). */
static __global__ void k_attn_bwd_dq(const float *k, const float *v, size_t ldkv, const float *p, const float *dout,
                                     size_t ldo, float *dq, size_t ldq, float *dsum, size_t seq, size_t nh,
                                     size_t group, size_t hd, float scale, gs_dropout drop)
{
    extern __shared__ float ds[]; /* seq floats */
    __shared__ float dos[ATT_MAX_HD];
    __shared__ double redd[32];
    size_t a = blockIdx.x, i = blockIdx.y, s = blockIdx.z, j = i / group, row0 = s * seq;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float *prow = p + ((s * nh + i) * seq + a) * seq;
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x)
        dos[d] = dout[(row0 + a) * ldo + i * hd + d];
    __syncthreads();
    double dpart = 0.0;
    for (size_t b = warp; b <= a; b += ATT_WARPS) {
        const float *vb = v + (row0 + b) * ldkv + j * hd;
        float part = 0.0f;
        for (size_t d = lane; d < hd; d += 32)
            part += dos[d] * vb[d];
        part = warp_allsum(part);
        if (lane == 0) { /* dP = Z (dout v^T) */
            part *= attn_z(drop, sk, i, seq, a, b);
            ds[b] = part;
            dpart += (double)prow[b] * part;
        }
    }
    double D = gs_block_sum(dpart, redd);
    float dd = (float)D;
    if (threadIdx.x == 0)
        dsum[(s * nh + i) * seq + a] = dd;
    for (size_t b = threadIdx.x; b <= a; b += blockDim.x)
        ds[b] = prow[b] * (ds[b] - dd) * scale;
    __syncthreads();
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (size_t b = 0; b <= a; b++)
            acc += ds[b] * k[(row0 + b) * ldkv + j * hd + d];
        dq[(row0 + a) * ldq + i * hd + d] = acc;
    }
}

/* dk and dv of one key row of kv head j: sums over the group's query heads and rows a >= b. */
static __global__ void k_attn_bwd_dkv(const float *q, size_t ldq, const float *v, size_t ldkv, const float *p,
                                      const float *dout, size_t ldo, const float *dsum, float *dk, float *dv,
                                      size_t seq, size_t nh, size_t group, size_t hd, float scale, gs_dropout drop)
{
    __shared__ float vs[ATT_MAX_HD];
    __shared__ float part_k[ATT_WARPS][ATT_MAX_HD];
    __shared__ float part_v[ATT_WARPS][ATT_MAX_HD];
    size_t b = blockIdx.x, j = blockIdx.y, s = blockIdx.z, row0 = s * seq;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x)
        vs[d] = v[(row0 + b) * ldkv + j * hd + d];
    __syncthreads();
    float acck[ATT_MAX_HD / 32], accv[ATT_MAX_HD / 32];
    for (int m = 0; m < ATT_MAX_HD / 32; m++)
        acck[m] = accv[m] = 0.0f;
    for (size_t i = j * group; i < (j + 1) * group; i++) {
        const float *ph = p + (s * nh + i) * seq * seq;
        for (size_t a = b + warp; a < seq; a += ATT_WARPS) {
            const float *doa = dout + (row0 + a) * ldo + i * hd, *qa = q + (row0 + a) * ldq + i * hd;
            float part = 0.0f;
            for (size_t d = lane; d < hd; d += 32)
                part += doa[d] * vs[d];
            float z = attn_z(drop, sk, i, seq, a, b);
            float dp = warp_allsum(part) * z;
            float pab = ph[a * seq + b];
            float dsv = pab * (dp - dsum[(s * nh + i) * seq + a]) * scale;
            float pz = pab * z; /* Z P, for dv */
            int m = 0;
            for (size_t d = lane; d < hd; d += 32, m++) {
                acck[m] += dsv * qa[d];
                accv[m] += pz * doa[d];
            }
        }
    }
    int m = 0;
    for (size_t d = lane; d < hd; d += 32, m++) {
        part_k[warp][d] = acck[m];
        part_v[warp][d] = accv[m];
    }
    __syncthreads();
    for (size_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float sumk = 0.0f, sv = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) {
            sumk += part_k[w][d];
            sv += part_v[w][d];
        }
        dk[(row0 + b) * ldkv + j * hd + d] = sumk;
        dv[(row0 + b) * ldkv + j * hd + d] = sv;
    }
}

static int shared_for(const void *fn, size_t bytes)
{
    if (bytes <= 48 * 1024)
        return 0;
    return (int)cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

static const gs_dropout no_drop = {0, 1.0f, 0, 0, 0, 0};

extern "C" int gs_cu_attn_fwd_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                      size_t ldkv, float *out, size_t ldo, float *p, size_t nseq, size_t seq,
                                      size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    if (hd > ATT_MAX_HD || nkv == 0 || nh % nkv || nh > 65535 || nseq > 65535)
        return (int)cudaErrorInvalidValue;
    if (!nseq || !seq || !nh)
        return 0;
    size_t sh = seq * sizeof(float);
    int rc = shared_for((const void *)k_attn_fwd, sh);
    if (rc)
        return rc;
    dim3 grid((unsigned)seq, (unsigned)nh, (unsigned)nseq);
    k_attn_fwd<<<grid, ATT_THREADS, sh, st>>>(q, ldq, k, v, ldkv, out, ldo, p, seq, nh, nh / nkv, hd,
                                              (float)(1.0 / sqrt((double)hd)), drop ? *drop : no_drop);
    return gs_cu_last_error();
}

extern "C" int gs_cu_attn_fwd(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                              size_t ldkv, float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh,
                              size_t nkv, size_t hd)
{
    return gs_cu_attn_fwd_dropout(st, q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, NULL);
}

extern "C" int gs_cu_attn_bwd_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                      size_t ldkv, const float *p, const float *dout, size_t ldo, float *dq, float *dk,
                                      float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                      const gs_dropout *drop)
{
    gs_dropout z = drop ? *drop : no_drop;
    if (hd > ATT_MAX_HD || nkv == 0 || nh % nkv || nh > 65535 || nseq > 65535)
        return (int)cudaErrorInvalidValue;
    if (!nseq || !seq || !nh)
        return 0;
    float scale = (float)(1.0 / sqrt((double)hd));
    float *dsum = NULL;
    int rc = (int)cudaMallocAsync((void **)&dsum, nseq * nh * seq * sizeof(float), st);
    if (rc)
        return rc;
    size_t sh = seq * sizeof(float);
    if ((rc = shared_for((const void *)k_attn_bwd_dq, sh)) == 0) {
        dim3 gq((unsigned)seq, (unsigned)nh, (unsigned)nseq), gkv((unsigned)seq, (unsigned)nkv, (unsigned)nseq);
        k_attn_bwd_dq<<<gq, ATT_THREADS, sh, st>>>(k, v, ldkv, p, dout, ldo, dq, ldq, dsum, seq, nh, nh / nkv, hd,
                                                   scale, z);
        k_attn_bwd_dkv<<<gkv, ATT_THREADS, 0, st>>>(q, ldq, v, ldkv, p, dout, ldo, dsum, dk, dv, seq, nh, nh / nkv,
                                                    hd, scale, z);
        rc = gs_cu_last_error();
    }
    int rc2 = (int)cudaFreeAsync(dsum, st);
    return rc ? rc : rc2;
}

extern "C" int gs_cu_attn_bwd(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                              size_t ldkv, const float *p, const float *dout, size_t ldo, float *dq, float *dk,
                              float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    return gs_cu_attn_bwd_dropout(st, q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, NULL);
}
