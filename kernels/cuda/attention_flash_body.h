/* The device code of the flash (tiled, online-softmax) attention kernels, FlashAttention-2
 * (Dao 2023) in fp32, written once in the C subset that nvcc (C++) and gcc (C11) both accept, so
 * that kernels/cuda/attention_flash.cu compiles it for the GPU and tests/check_flash_emu.c runs
 * the same text on a CPU emulator of CUDA's execution model (one pthread per CUDA thread, a
 * barrier per __syncthreads, one block at a time).
 *
 * The includer defines, before including this file:
 *   GS_KERNEL          a kernel's leading keywords (CUDA: static __global__ void)
 *   GS_DEVICE          a device helper's (CUDA: static __device__ inline)
 *   GS_DYN_SHARED(n)   declares float pointer/array n: the block's dynamic shared memory
 *   GS_SYNC()          __syncthreads(): every thread of the block reaches each one
 *   GS_TID, GS_BDIM    threadIdx.x, blockDim.x (1-D blocks)
 *   GS_BID_X/_Y/_Z     blockIdx.x/.y/.z
 *   GS_UNROLL          an unroll pragma or nothing
 * No warp shuffles, votes or atomics: every exchange between threads goes through shared memory
 * and a GS_SYNC, so the emulator's barrier semantics are the GPU's.
 *
 * Tiles: GS_FLASH_TILE (32) query rows x GS_FLASH_TILE key rows, GS_FLASH_THREADS (128) threads
 * per block, GS_FLASH_TPR (4) threads per tile row: thread t owns row t / 4 and the columns
 * c, c + 4, c + 8, ... (c = t % 4) of that row's head-dimension accumulators (<= 64 registers
 * each) and of its 32 scores (8 each). 128 threads x 8 scores = one 32 x 32 score tile per step.
 * Shared rows of q, k, v, dout are padded to hd + 1 floats so that the 8 rows a warp reads at
 * one d fall in different banks; score tiles to 33 for the same reason.
 *
 * Attention dropout (kernels/dropout.h, FlashAttention's): drop (by value; threshold 0: none)
 * masks the probabilities multiplying v, and in the backward the same mask is drawn again for dv
 * and dP; the row sums l and D are those of the undropped probabilities.
 *
 * Ownership: the kernels borrow every pointer (device memory) for the launch; the host helpers
 * below are pure functions of the shape. */
#ifndef GS_ATTENTION_FLASH_BODY_H
#define GS_ATTENTION_FLASH_BODY_H

#include <math.h>
#include <stddef.h>

#include "kernels/dropout.h"

#define GS_FLASH_TILE 32    /* query rows per query tile = key rows per key tile */
#define GS_FLASH_THREADS 128 /* threads per block */
#define GS_FLASH_TPR 4      /* threads per tile row */
#define GS_FLASH_MAX_HD 256
#define GS_FLASH_NS (GS_FLASH_TILE / GS_FLASH_TPR)    /* scores per thread per tile: 8 */
#define GS_FLASH_NACC (GS_FLASH_MAX_HD / GS_FLASH_TPR) /* accumulator registers per thread: 64 */
#define GS_FLASH_SROW (GS_FLASH_TILE + 1)              /* floats per row of a score tile */

/* One past the last key a query tile [q0, q0 + nq) attends to (causal): key tiles starting at or
 * past it are entirely above the diagonal and skipped. Overridable only so that
 * tests/flash_emu_mutant.c can show the tests catch an off-by-one here. */
#ifndef GS_FLASH_KEY_END
#define GS_FLASH_KEY_END(q0, nq) ((q0) + (nq))
#endif

/* ---- host helpers (plain C, used by the launcher and the emulator test) ---------------------- */

/* 1 when the shape is one the kernels take (the checks of gs_cu_attn_fwd, and hd >= 1). */
static inline int gs_flash_args_ok(size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    (void)seq;
    return hd >= 1 && hd <= GS_FLASH_MAX_HD && nkv != 0 && nh % nkv == 0 && nh <= 65535 && nseq <= 65535;
}

static inline size_t gs_flash_tiles(size_t seq)
{
    return (seq + GS_FLASH_TILE - 1) / GS_FLASH_TILE;
}

/* Dynamic shared memory per block, bytes. Forward: q, k, v tiles (32 x (hd + 1) each) and a
 * 32 x 33 score tile: 53,760 B at hd 128, 103,296 B at hd 256. */
static inline size_t gs_flash_fwd_shared_bytes(size_t hd)
{
    return (3 * GS_FLASH_TILE * (hd + 1) + GS_FLASH_TILE * GS_FLASH_SROW) * sizeof(float);
}

/* Backward dq: q, dout, k, v tiles and a dS tile: 70,272 B at hd 128. */
static inline size_t gs_flash_bwd_dq_shared_bytes(size_t hd)
{
    return (4 * GS_FLASH_TILE * (hd + 1) + GS_FLASH_TILE * GS_FLASH_SROW) * sizeof(float);
}

/* Backward dk/dv: k, v, q, dout tiles, P and dS tiles, lse and D of the query tile:
 * 74,752 B at hd 128, 140,288 B at hd 256. */
static inline size_t gs_flash_bwd_dkv_shared_bytes(size_t hd)
{
    return (4 * GS_FLASH_TILE * (hd + 1) + 2 * GS_FLASH_TILE * GS_FLASH_SROW + 2 * GS_FLASH_TILE) * sizeof(float);
}

/* Threads (one per (row, head) pair) and blocks of the D kernel. */
#define GS_FLASH_D_THREADS 128
static inline size_t gs_flash_d_blocks(size_t rows, size_t nh)
{
    return (rows * nh + GS_FLASH_D_THREADS - 1) / GS_FLASH_D_THREADS;
}

/* ---- device code ----------------------------------------------------------------------------- */

/* The dropout factor of probability (local head i, query a, key b): 1 without dropout, else the
 * mask's 1 / (1 - p) or 0. */
GS_DEVICE float gs_flash_z(const gs_dropout *drop, uint64_t sk, size_t i, size_t seq, size_t a, size_t b)
{
    if (!drop->threshold)
        return 1.0f;
    return gs_dropout_keep(sk, ((drop->first + i) * seq + a) * seq + b, drop->threshold) ? drop->scale : 0.0f;
}

/* rows [0, n) of a tile of nrows rows x hd floats from global rows src + r * ld into shared
 * rows dst + r * (hd + 1); rows n..nrows-1 zero. Consecutive threads take consecutive d (coalesced
 * row segments). Tile indices fit 32 bits (<= 32 x 256), whose division is cheaper on the GPU. */
GS_DEVICE void gs_flash_load_tile(float *dst, const float *src, size_t ld, size_t n, size_t nrows, size_t hd)
{
    unsigned hdu = (unsigned)hd, hdp = hdu + 1, total = (unsigned)nrows * hdu;
    for (unsigned idx = GS_TID; idx < total; idx += GS_BDIM) {
        unsigned r = idx / hdu, d = idx - r * hdu;
        dst[r * hdp + d] = r < n ? src[r * ld + d] : 0.0f;
    }
}

/* Forward: a block per (query tile, head i, sequence s). For each key tile at or below the
 * diagonal: S = q k^T / sqrt(hd) (masked b > a to -inf), the row max m, P = exp(S - m_new), the row
 * sum l and acc = acc * exp(m_old - m_new) + P v. At the end out = acc / l, lse = m + log l. */
GS_KERNEL gs_flash_fwd_kernel(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                              size_t ldo, float *lse, size_t seq, size_t nh, size_t group, size_t hd, float scale,
                              gs_dropout drop)
{
    GS_DYN_SHARED(smem);
    size_t hdp = hd + 1;
    float *qs = smem, *ks = qs + GS_FLASH_TILE * hdp, *vs = ks + GS_FLASH_TILE * hdp;
    float *ps = vs + GS_FLASH_TILE * hdp; /* [32][33] */
    size_t qt = GS_BID_X, i = GS_BID_Y, s = GS_BID_Z, j = i / group, row0 = s * seq;
    size_t q0 = qt * GS_FLASH_TILE, nq = seq - q0 < GS_FLASH_TILE ? seq - q0 : GS_FLASH_TILE;
    size_t r = GS_TID / GS_FLASH_TPR, c = GS_TID % GS_FLASH_TPR, a = q0 + r;
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    float acc[GS_FLASH_NACC], sc[GS_FLASH_NS];
    float m = -INFINITY, l = 0.0f;
    GS_UNROLL
    for (int x = 0; x < GS_FLASH_NACC; x++)
        acc[x] = 0.0f;
    gs_flash_load_tile(qs, q + (row0 + q0) * ldq + i * hd, ldq, nq, GS_FLASH_TILE, hd);
    size_t kend = GS_FLASH_KEY_END(q0, nq);
    for (size_t k0 = 0; k0 < kend; k0 += GS_FLASH_TILE) {
        size_t nk = seq - k0 < GS_FLASH_TILE ? seq - k0 : GS_FLASH_TILE;
        GS_SYNC(); /* the previous tile's readers of ks, vs, ps are done */
        gs_flash_load_tile(ks, k + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
        gs_flash_load_tile(vs, v + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
        GS_SYNC();
        GS_UNROLL
        for (int n = 0; n < GS_FLASH_NS; n++)
            sc[n] = 0.0f;
        for (size_t d = 0; d < hd; d++) {
            float qd = qs[r * hdp + d];
            GS_UNROLL
            for (int n = 0; n < GS_FLASH_NS; n++)
                sc[n] += qd * ks[(c + GS_FLASH_TPR * n) * hdp + d];
        }
        GS_UNROLL
        for (int n = 0; n < GS_FLASH_NS; n++) {
            size_t b = c + GS_FLASH_TPR * (size_t)n;
            sc[n] = (b < nk && k0 + b <= a) ? sc[n] * scale : -INFINITY;
            ps[r * GS_FLASH_SROW + b] = sc[n];
        }
        GS_SYNC();
        float mt = -INFINITY;
        for (int b = 0; b < GS_FLASH_TILE; b++)
            mt = ps[r * GS_FLASH_SROW + b] > mt ? ps[r * GS_FLASH_SROW + b] : mt;
        float mnew = mt > m ? mt : m;
        float mref = mnew == -INFINITY ? 0.0f : mnew; /* a row with no key yet: keeps exp() finite */
        float alpha = expf(m - mref);
        GS_SYNC(); /* every thread has read its row's scores before they are overwritten */
        GS_UNROLL
        for (int n = 0; n < GS_FLASH_NS; n++)
            ps[r * GS_FLASH_SROW + c + GS_FLASH_TPR * n] = expf(sc[n] - mref);
        GS_SYNC();
        float lt = 0.0f;
        for (int b = 0; b < GS_FLASH_TILE; b++)
            lt += ps[r * GS_FLASH_SROW + b];
        l = l * alpha + lt;
        m = mnew;
        if (drop.threshold) { /* the same for every thread: the barriers are the block's */
            GS_SYNC();        /* every thread of the row has summed it */
            GS_UNROLL
            for (int n = 0; n < GS_FLASH_NS; n++) {
                size_t b = c + GS_FLASH_TPR * (size_t)n;
                ps[r * GS_FLASH_SROW + b] *= gs_flash_z(&drop, sk, i, seq, a, k0 + b);
            }
            GS_SYNC();
        }
        GS_UNROLL
        for (int x = 0; x < GS_FLASH_NACC; x++)
            acc[x] *= alpha;
        for (int b = 0; b < GS_FLASH_TILE; b++) {
            float p = ps[r * GS_FLASH_SROW + b];
            const float *vb = vs + b * hdp + c;
            GS_UNROLL
            for (int x = 0; x < GS_FLASH_NACC; x++)
                if (c + GS_FLASH_TPR * (size_t)x < hd)
                    acc[x] += p * vb[GS_FLASH_TPR * x];
        }
    }
    if (r < nq) {
        float inv = 1.0f / l;
        float *orow = out + (row0 + a) * ldo + i * hd;
        GS_UNROLL
        for (int x = 0; x < GS_FLASH_NACC; x++)
            if (c + GS_FLASH_TPR * (size_t)x < hd)
                orow[c + GS_FLASH_TPR * x] = acc[x] * inv;
        if (c == 0)
            lse[(s * nh + i) * seq + a] = m + logf(l);
    }
}

/* Backward, first pass: D[s][i][a] = sum_d dout_a . out_a (double), one thread per (row, head).
 * rows = nseq * seq. */
GS_KERNEL gs_flash_bwd_d_kernel(const float *out, const float *dout, size_t ldo, float *dsum, size_t rows, size_t seq,
                                size_t nh, size_t hd)
{
    size_t idx = (size_t)GS_BID_X * GS_BDIM + GS_TID;
    if (idx < rows * nh) {
        size_t t = idx / nh, i = idx - t * nh, s = t / seq, a = t - s * seq;
        const float *o = out + t * ldo + i * hd, *g = dout + t * ldo + i * hd;
        double sum = 0.0;
        for (size_t d = 0; d < hd; d++)
            sum += (double)o[d] * g[d];
        dsum[(s * nh + i) * seq + a] = (float)sum;
    }
}

/* Backward dq: a block per (query tile, head i, sequence s), key tiles at or below the diagonal in
 * order: P = exp(S - lse), dP = dout v^T, dS = P (dP - D) / sqrt(hd), dq += dS k. */
GS_KERNEL gs_flash_bwd_dq_kernel(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                                 const float *lse, const float *dsum, const float *dout, size_t ldo, float *dq,
                                 size_t seq, size_t nh, size_t group, size_t hd, float scale, gs_dropout drop)
{
    GS_DYN_SHARED(smem);
    size_t hdp = hd + 1;
    float *qs = smem, *dos = qs + GS_FLASH_TILE * hdp, *ks = dos + GS_FLASH_TILE * hdp;
    float *vs = ks + GS_FLASH_TILE * hdp, *dss = vs + GS_FLASH_TILE * hdp; /* dS [32][33] */
    size_t qt = GS_BID_X, i = GS_BID_Y, s = GS_BID_Z, j = i / group, row0 = s * seq;
    size_t q0 = qt * GS_FLASH_TILE, nq = seq - q0 < GS_FLASH_TILE ? seq - q0 : GS_FLASH_TILE;
    size_t r = GS_TID / GS_FLASH_TPR, c = GS_TID % GS_FLASH_TPR, a = q0 + r;
    float acc[GS_FLASH_NACC], sc[GS_FLASH_NS], dp[GS_FLASH_NS];
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    GS_UNROLL
    for (int x = 0; x < GS_FLASH_NACC; x++)
        acc[x] = 0.0f;
    float lse_a = r < nq ? lse[(s * nh + i) * seq + a] : 0.0f;
    float d_a = r < nq ? dsum[(s * nh + i) * seq + a] : 0.0f;
    gs_flash_load_tile(qs, q + (row0 + q0) * ldq + i * hd, ldq, nq, GS_FLASH_TILE, hd);
    gs_flash_load_tile(dos, dout + (row0 + q0) * ldo + i * hd, ldo, nq, GS_FLASH_TILE, hd);
    size_t kend = GS_FLASH_KEY_END(q0, nq);
    for (size_t k0 = 0; k0 < kend; k0 += GS_FLASH_TILE) {
        size_t nk = seq - k0 < GS_FLASH_TILE ? seq - k0 : GS_FLASH_TILE;
        GS_SYNC();
        gs_flash_load_tile(ks, k + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
        gs_flash_load_tile(vs, v + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
        GS_SYNC();
        GS_UNROLL
        for (int n = 0; n < GS_FLASH_NS; n++)
            sc[n] = dp[n] = 0.0f;
        for (size_t d = 0; d < hd; d++) {
            float qd = qs[r * hdp + d], gd = dos[r * hdp + d];
            GS_UNROLL
            for (int n = 0; n < GS_FLASH_NS; n++) {
                sc[n] += qd * ks[(c + GS_FLASH_TPR * n) * hdp + d];
                dp[n] += gd * vs[(c + GS_FLASH_TPR * n) * hdp + d];
            }
        }
        GS_UNROLL
        for (int n = 0; n < GS_FLASH_NS; n++) {
            size_t b = c + GS_FLASH_TPR * (size_t)n;
            int seen = r < nq && b < nk && k0 + b <= a;
            float p = seen ? expf(sc[n] * scale - lse_a) : 0.0f, z = seen ? gs_flash_z(&drop, sk, i, seq, a, k0 + b) : 1.0f;
            dss[r * GS_FLASH_SROW + b] = p * (dp[n] * z - d_a) * scale;
        }
        GS_SYNC();
        for (int b = 0; b < GS_FLASH_TILE; b++) {
            float g = dss[r * GS_FLASH_SROW + b];
            const float *kb = ks + b * hdp + c;
            GS_UNROLL
            for (int x = 0; x < GS_FLASH_NACC; x++)
                if (c + GS_FLASH_TPR * (size_t)x < hd)
                    acc[x] += g * kb[GS_FLASH_TPR * x];
        }
    }
    if (r < nq) {
        float *row = dq + (row0 + a) * ldq + i * hd;
        GS_UNROLL
        for (int x = 0; x < GS_FLASH_NACC; x++)
            if (c + GS_FLASH_TPR * (size_t)x < hd)
                row[c + GS_FLASH_TPR * x] = acc[x];
    }
}

/* Backward dk, dv: a block per (key tile, kv head j, sequence s); thread row r is key k0 + r. For
 * the group's query heads in order and, per head, the query tiles from the diagonal down in
 * order: P, dS as in the dq pass (transposed ownership), dv += P^T dout, dk += dS^T q. */
GS_KERNEL gs_flash_bwd_dkv_kernel(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                                  const float *lse, const float *dsum, const float *dout, size_t ldo, float *dk,
                                  float *dv, size_t seq, size_t nh, size_t group, size_t hd, float scale,
                                  gs_dropout drop)
{
    GS_DYN_SHARED(smem);
    size_t hdp = hd + 1;
    float *ks = smem, *vs = ks + GS_FLASH_TILE * hdp, *qs = vs + GS_FLASH_TILE * hdp;
    float *dos = qs + GS_FLASH_TILE * hdp, *ps = dos + GS_FLASH_TILE * hdp; /* P [a][b], 32 x 33 */
    float *dss = ps + GS_FLASH_TILE * GS_FLASH_SROW;                       /* dS [a][b] */
    float *lses = dss + GS_FLASH_TILE * GS_FLASH_SROW, *ds_a = lses + GS_FLASH_TILE;
    size_t kt = GS_BID_X, j = GS_BID_Y, s = GS_BID_Z, row0 = s * seq;
    size_t k0 = kt * GS_FLASH_TILE, nk = seq - k0 < GS_FLASH_TILE ? seq - k0 : GS_FLASH_TILE;
    size_t r = GS_TID / GS_FLASH_TPR, c = GS_TID % GS_FLASH_TPR, b = k0 + r;
    float acck[GS_FLASH_NACC], accv[GS_FLASH_NACC], sc[GS_FLASH_NS], dp[GS_FLASH_NS];
    uint64_t sk = drop.threshold ? gs_dropout_seq_key(drop.key, drop.seq0 + s) : 0;
    GS_UNROLL
    for (int x = 0; x < GS_FLASH_NACC; x++)
        acck[x] = accv[x] = 0.0f;
    gs_flash_load_tile(ks, k + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
    gs_flash_load_tile(vs, v + (row0 + k0) * ldkv + j * hd, ldkv, nk, GS_FLASH_TILE, hd);
    for (size_t i = j * group; i < (j + 1) * group; i++) {
        /* query tiles holding a row a >= k0 (tiles are aligned: the first is the diagonal's) */
        for (size_t q0 = k0 - k0 % GS_FLASH_TILE; q0 < seq; q0 += GS_FLASH_TILE) {
            size_t nq = seq - q0 < GS_FLASH_TILE ? seq - q0 : GS_FLASH_TILE;
            GS_SYNC(); /* the previous tile's readers of qs, dos, ps, dss are done */
            gs_flash_load_tile(qs, q + (row0 + q0) * ldq + i * hd, ldq, nq, GS_FLASH_TILE, hd);
            gs_flash_load_tile(dos, dout + (row0 + q0) * ldo + i * hd, ldo, nq, GS_FLASH_TILE, hd);
            for (size_t x = GS_TID; x < GS_FLASH_TILE; x += GS_BDIM) {
                lses[x] = x < nq ? lse[(s * nh + i) * seq + q0 + x] : 0.0f;
                ds_a[x] = x < nq ? dsum[(s * nh + i) * seq + q0 + x] : 0.0f;
            }
            GS_SYNC();
            GS_UNROLL
            for (int n = 0; n < GS_FLASH_NS; n++)
                sc[n] = dp[n] = 0.0f;
            for (size_t d = 0; d < hd; d++) {
                float kd = ks[r * hdp + d], vd = vs[r * hdp + d];
                GS_UNROLL
                for (int n = 0; n < GS_FLASH_NS; n++) {
                    sc[n] += qs[(c + GS_FLASH_TPR * n) * hdp + d] * kd;
                    dp[n] += dos[(c + GS_FLASH_TPR * n) * hdp + d] * vd;
                }
            }
            GS_UNROLL
            for (int n = 0; n < GS_FLASH_NS; n++) {
                size_t al = c + GS_FLASH_TPR * (size_t)n; /* the query row in the tile */
                int seen = r < nk && al < nq && b <= q0 + al;
                float p = seen ? expf(sc[n] * scale - lses[al]) : 0.0f;
                float z = seen ? gs_flash_z(&drop, sk, i, seq, q0 + al, b) : 1.0f;
                ps[al * GS_FLASH_SROW + r] = p * z; /* Z P, for dv */
                dss[al * GS_FLASH_SROW + r] = p * (dp[n] * z - ds_a[al]) * scale;
            }
            GS_SYNC();
            for (int al = 0; al < GS_FLASH_TILE; al++) {
                float p = ps[al * GS_FLASH_SROW + r], g = dss[al * GS_FLASH_SROW + r];
                const float *da = dos + al * hdp + c, *qa = qs + al * hdp + c;
                GS_UNROLL
                for (int x = 0; x < GS_FLASH_NACC; x++)
                    if (c + GS_FLASH_TPR * (size_t)x < hd) {
                        accv[x] += p * da[GS_FLASH_TPR * x];
                        acck[x] += g * qa[GS_FLASH_TPR * x];
                    }
            }
        }
    }
    if (r < nk) {
        float *krow = dk + (row0 + b) * ldkv + j * hd, *vrow = dv + (row0 + b) * ldkv + j * hd;
        GS_UNROLL
        for (int x = 0; x < GS_FLASH_NACC; x++)
            if (c + GS_FLASH_TPR * (size_t)x < hd) {
                krow[c + GS_FLASH_TPR * x] = acck[x];
                vrow[c + GS_FLASH_TPR * x] = accv[x];
            }
    }
}

#endif
