/* Flash-style causal attention with grouped KV heads (FlashAttention-2's algorithm, Dao 2023) on
 * strided token rows, in fp32 on the CPU: the forward keeps a running maximum and sum per query
 * row over key tiles (online softmax) and saves only the logsumexp per row; the backward
 * recomputes each tile's probabilities from it. Nothing of size seq x seq exists; key tiles past a
 * query tile's last row are never touched. Products go through gs_k_gemm on tiles.
 *
 * Ownership: every buffer is the caller's (kernels/host/kernels.h); two tiles of stack scratch
 * (64 KiB). */
#include <math.h>
#include <string.h>

#include "kernels/host/kernels.h"

/* Query rows x key columns of a tile: 32 KiB of floats (64 x 128 ran fastest of 32/64 x 64/128
 * in tests/bench/bench_kernels at seq 512 and 2048). */
enum { FLASH_BQ = 64, FLASH_BK = 128 };

/* The keys a query row may see: row a0 + a sees keys <= a0 + a, so in the tile starting at key
 * b0 the first `valid` columns (0 when the tile lies wholly above the row). */
static size_t flash_valid(size_t a0, size_t a, size_t b0, size_t nb)
{
    size_t last = a0 + a; /* the row's last visible key */
    if (last < b0)
        return 0;
    return last - b0 + 1 < nb ? last - b0 + 1 : nb;
}

/* The dropout factor of probability (head, a, b): 1 / (1 - p) kept, 0 dropped. */
static float flash_z(const gs_dropout *drop, uint64_t sk, size_t head, size_t seq, size_t a, size_t b)
{
    return gs_dropout_keep(sk, ((drop->first + head) * seq + a) * seq + b, drop->threshold) ? drop->scale : 0.0f;
}

/* Per query tile A: out_A = sum over key tiles B <= A's last row of exp(S_AB - m) V_B, rescaled
 * whenever a row's running maximum m grows, then divided by the row's sum l; lse = m + log l.
 * Dropout (FlashAttention's): the sum l counts every probability, the product with V only the kept
 * ones, scaled. */
void gs_k_attn_fwd_flash_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                                 size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                 const gs_dropout *drop)
{
    size_t group = nh / nkv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float tile[FLASH_BQ * FLASH_BK];
    float mx[FLASH_BQ];
    double sum[FLASH_BQ];
    int dropping = drop && drop->threshold;
    for (size_t s = 0; s < nseq; s++) {
        size_t row0 = s * seq;
        uint64_t sk = dropping ? gs_dropout_seq_key(drop->key, drop->seq0 + s) : 0;
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / group;
            const float *qh = q + row0 * ldq + i * hd;
            const float *kh = k + row0 * ldkv + j * hd;
            const float *vh = v + row0 * ldkv + j * hd;
            float *oh = out + row0 * ldo + i * hd;
            float *lh = lse + (s * nh + i) * seq;
            for (size_t a0 = 0; a0 < seq; a0 += FLASH_BQ) {
                size_t na = seq - a0 < FLASH_BQ ? seq - a0 : FLASH_BQ;
                size_t kend = a0 + na; /* keys past the tile's last row are masked for all of it */
                for (size_t a = 0; a < na; a++) {
                    mx[a] = -INFINITY;
                    sum[a] = 0.0;
                    memset(oh + (a0 + a) * ldo, 0, hd * sizeof(float));
                }
                for (size_t b0 = 0; b0 < kend; b0 += FLASH_BK) {
                    size_t nb = kend - b0 < FLASH_BK ? kend - b0 : FLASH_BK;
                    gs_k_gemm(0, 1, na, nb, hd, scale, qh + a0 * ldq, ldq, kh + b0 * ldkv, ldkv, 0.0f, tile,
                              FLASH_BK);
                    for (size_t a = 0; a < na; a++) {
                        float *row = tile + a * FLASH_BK;
                        size_t nv = flash_valid(a0, a, b0, nb);
                        float m = mx[a];
                        for (size_t b = 0; b < nv; b++)
                            m = row[b] > m ? row[b] : m;
                        if (m > mx[a]) { /* rescale what the earlier tiles summed */
                            float c = expf(mx[a] - m); /* 0 on the row's first tile */
                            sum[a] *= c;
                            gs_k_scale(oh + (a0 + a) * ldo, c, hd);
                            mx[a] = m;
                        }
                        double part = 0.0;
                        for (size_t b = 0; b < nv; b++) {
                            row[b] = expf(row[b] - m);
                            part += row[b];
                        }
                        for (size_t b = nv; b < nb; b++)
                            row[b] = 0.0f;
                        sum[a] += part;
                        for (size_t b = 0; dropping && b < nv; b++)
                            row[b] *= flash_z(drop, sk, i, seq, a0 + a, b0 + b);
                    }
                    gs_k_gemm(0, 0, na, hd, nb, 1.0f, tile, FLASH_BK, vh + b0 * ldkv, ldkv, 1.0f, oh + a0 * ldo, ldo);
                }
                for (size_t a = 0; a < na; a++) {
                    gs_k_scale(oh + (a0 + a) * ldo, (float)(1.0 / sum[a]), hd);
                    lh[a0 + a] = (float)((double)mx[a] + log(sum[a]));
                }
            }
        }
    }
}

/* Per query tile A and key tile B on or below the diagonal:
 *   P = exp(S - lse) (recomputed), dv_B += P^T dout_A, dP = dout_A V_B^T,
 *   dS = P (dP - D) / sqrt(hd) with D_a = sum_d dout_ad out_ad, dq_A += dS K_B, dk_B += dS^T Q_A.
 * Dropout (Z: the mask redrawn, kept 1 / (1 - p), dropped 0): dv_B += (Z P)^T dout_A and
 * dP = Z (dout_A V_B^T); D is unchanged (dout_a . out_a = sum_b P_ab dP_ab still).
 * Heads, query tiles and key tiles are visited in a fixed order, so the GQA sums into dk, dv and
 * the tile sums into dq have a fixed order. */
void gs_k_attn_bwd_flash_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                                 const float *out, const float *lse, const float *dout, size_t ldo, float *dq, float *dk,
                                 float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                 const gs_dropout *drop)
{
    size_t group = nh / nkv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float pt[FLASH_BQ * FLASH_BK], dst[FLASH_BQ * FLASH_BK];
    float dsum[FLASH_BQ];
    int dropping = drop && drop->threshold;
    for (size_t s = 0; s < nseq; s++) {
        size_t row0 = s * seq;
        uint64_t sk = dropping ? gs_dropout_seq_key(drop->key, drop->seq0 + s) : 0;
        for (size_t r = row0; r < row0 + seq; r++)
            for (size_t j = 0; j < nkv; j++) {
                memset(dk + r * ldkv + j * hd, 0, hd * sizeof(float));
                memset(dv + r * ldkv + j * hd, 0, hd * sizeof(float));
            }
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / group;
            const float *qh = q + row0 * ldq + i * hd, *doh = dout + row0 * ldo + i * hd;
            const float *oh = out + row0 * ldo + i * hd;
            const float *kh = k + row0 * ldkv + j * hd, *vh = v + row0 * ldkv + j * hd;
            const float *lh = lse + (s * nh + i) * seq;
            float *dqh = dq + row0 * ldq + i * hd;
            float *dkh = dk + row0 * ldkv + j * hd, *dvh = dv + row0 * ldkv + j * hd;
            for (size_t a0 = 0; a0 < seq; a0 += FLASH_BQ) {
                size_t na = seq - a0 < FLASH_BQ ? seq - a0 : FLASH_BQ;
                size_t kend = a0 + na;
                for (size_t a = 0; a < na; a++) {
                    double d = 0.0;
                    const float *o = oh + (a0 + a) * ldo, *g = doh + (a0 + a) * ldo;
                    for (size_t c = 0; c < hd; c++)
                        d += (double)g[c] * o[c];
                    dsum[a] = (float)d;
                    memset(dqh + (a0 + a) * ldq, 0, hd * sizeof(float));
                }
                for (size_t b0 = 0; b0 < kend; b0 += FLASH_BK) {
                    size_t nb = kend - b0 < FLASH_BK ? kend - b0 : FLASH_BK;
                    gs_k_gemm(0, 1, na, nb, hd, scale, qh + a0 * ldq, ldq, kh + b0 * ldkv, ldkv, 0.0f, pt, FLASH_BK);
                    for (size_t a = 0; a < na; a++) {
                        float *row = pt + a * FLASH_BK, l = lh[a0 + a];
                        size_t nv = flash_valid(a0, a, b0, nb);
                        for (size_t b = 0; b < nv; b++)
                            row[b] = expf(row[b] - l);
                        for (size_t b = nv; b < nb; b++)
                            row[b] = 0.0f;
                    }
                    gs_k_gemm(0, 1, na, nb, hd, 1.0f, doh + a0 * ldo, ldo, vh + b0 * ldkv, ldkv, 0.0f, dst, FLASH_BK);
                    for (size_t a = 0; a < na; a++) {
                        float d = dsum[a];
                        size_t nv = dropping ? flash_valid(a0, a, b0, nb) : 0;
                        for (size_t b = 0; b < nb; b++) {
                            float z = b < nv ? flash_z(drop, sk, i, seq, a0 + a, b0 + b) : 1.0f;
                            dst[a * FLASH_BK + b] = pt[a * FLASH_BK + b] * (dst[a * FLASH_BK + b] * z - d) * scale;
                            pt[a * FLASH_BK + b] *= z; /* Z P, for dv */
                        }
                    }
                    gs_k_gemm(1, 0, nb, hd, na, 1.0f, pt, FLASH_BK, doh + a0 * ldo, ldo, 1.0f, dvh + b0 * ldkv, ldkv);
                    gs_k_gemm(0, 0, na, hd, nb, 1.0f, dst, FLASH_BK, kh + b0 * ldkv, ldkv, 1.0f, dqh + a0 * ldq, ldq);
                    gs_k_gemm(1, 0, nb, hd, na, 1.0f, dst, FLASH_BK, qh + a0 * ldq, ldq, 1.0f, dkh + b0 * ldkv, ldkv);
                }
            }
        }
    }
}

void gs_k_attn_fwd_flash(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                         size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    gs_k_attn_fwd_flash_dropout(q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, NULL);
}

void gs_k_attn_bwd_flash(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                         const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd)
{
    gs_k_attn_bwd_flash_dropout(q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, NULL);
}
