/* Causal softmax attention with grouped KV heads (GQA) on strided token rows: forward (scores and
 * P V through gs_k_gemm by query blocks, probabilities saved) and backward (tiled from the saved
 * probabilities, one tile of stack scratch), with or without dropout on the probabilities. */
#include <math.h>
#include <string.h>

#include "kernels/host/kernels.h"

/* Query rows of a block (forward and backward) x key columns of a dS tile (backward, on the
 * stack: 6 KiB). */
enum { ATTN_BQ = 24, ATTN_BK = 64 };

/* Softmax over row a's causal prefix (columns 0..a) in place, zero past it. Sums in double. */
static void attn_softmax_causal(float *row, size_t a, size_t seq)
{
    float mx = row[0];
    for (size_t b = 1; b <= a; b++)
        mx = row[b] > mx ? row[b] : mx;
    double sum = 0.0;
    for (size_t b = 0; b <= a; b++) {
        row[b] = expf(row[b] - mx);
        sum += row[b];
    }
    float inv = (float)(1.0 / sum);
    for (size_t b = 0; b <= a; b++)
        row[b] *= inv;
    for (size_t b = a + 1; b < seq; b++)
        row[b] = 0.0f;
}

/* The dropout factor of probability (head, a, b): 1 / (1 - p) kept, 0 dropped. */
static float attn_z(const gs_dropout *drop, uint64_t sk, size_t head, size_t seq, size_t a, size_t b)
{
    return gs_dropout_keep(sk, ((drop->first + head) * seq + a) * seq + b, drop->threshold) ? drop->scale : 0.0f;
}

/* Per query block A of ATTN_BQ rows, only keys before the block's end are scored:
 * S = Q_A K^T / sqrt(hd) into P's rows, causal softmax in place, out_A = P_A V (with dropout,
 * P_A's kept entries scaled and the others zeroed in a copy: P stays undropped for the backward). */
void gs_k_attn_fwd_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                           size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                           const gs_dropout *drop)
{
    size_t group = nh / nkv; /* query heads per kv head */
    float scale = (float)(1.0 / sqrt((double)hd));
    int dropping = drop && drop->threshold;
    float pd[ATTN_BQ * ATTN_BK];
    for (size_t s = 0; s < nseq; s++) {
        size_t row0 = s * seq;
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / group;
            const float *qh = q + row0 * ldq + i * hd;
            const float *kh = k + row0 * ldkv + j * hd;
            const float *vh = v + row0 * ldkv + j * hd;
            float *ph = p + (s * nh + i) * seq * seq;
            for (size_t a0 = 0; a0 < seq; a0 += ATTN_BQ) {
                size_t na = seq - a0 < ATTN_BQ ? seq - a0 : ATTN_BQ;
                size_t kend = a0 + na;
                gs_k_gemm(0, 1, na, kend, hd, scale, qh + a0 * ldq, ldq, kh, ldkv, 0.0f, ph + a0 * seq, seq);
                for (size_t a = a0; a < kend; a++)
                    attn_softmax_causal(ph + a * seq, a, seq);
                float *out_a = out + (row0 + a0) * ldo + i * hd;
                if (!dropping) {
                    gs_k_gemm(0, 0, na, hd, kend, 1.0f, ph + a0 * seq, seq, vh, ldkv, 0.0f, out_a, ldo);
                    continue;
                }
                /* dropout: out_A = sum over key tiles of (Z P)_AB V_B, a tile of Z P at a time */
                uint64_t sk = gs_dropout_seq_key(drop->key, drop->seq0 + s);
                for (size_t b0 = 0; b0 < kend; b0 += ATTN_BK) {
                    size_t nb = kend - b0 < ATTN_BK ? kend - b0 : ATTN_BK;
                    for (size_t a = 0; a < na; a++)
                        for (size_t b = 0; b < nb; b++)
                            pd[a * ATTN_BK + b] = ph[(a0 + a) * seq + b0 + b] * attn_z(drop, sk, i, seq, a0 + a, b0 + b);
                    gs_k_gemm(0, 0, na, hd, nb, 1.0f, pd, ATTN_BK, vh + b0 * ldkv, ldkv, b0 ? 1.0f : 0.0f, out_a, ldo);
                }
            }
        }
    }
}

void gs_k_attn_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                   float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    gs_k_attn_fwd_dropout(q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, NULL);
}

/* Blocked over (query block A, key block B) tiles on and below the diagonal, all products through
 * gs_k_gemm:
 *   dP = dout_A V_B^T;  D_a = sum_b P_ab dP_ab (a first pass over B);  dS = P (dP - D) / sqrt(hd);
 *   dq_A += dS K_B;  dk_B += dS^T Q_A;  dv_B += P_AB^T dout_A.
 * With dropout (Z: the mask, kept entries 1 / (1 - p), dropped 0): dP = Z (dout_A V_B^T) and
 * dv_B += (Z P_AB)^T dout_A.
 * dP is computed twice (for D, then for dS) so that only one tile of scratch is needed. Heads,
 * query blocks and key blocks are visited in a fixed order, so the GQA sums into dk, dv and the
 * block sums into dq have a fixed order. */
void gs_k_attn_bwd_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *p,
                           const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq, size_t seq,
                           size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    size_t group = nh / nkv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float tile[ATTN_BQ * ATTN_BK], pz[ATTN_BQ * ATTN_BK];
    double dsum[ATTN_BQ];
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
            const float *kh = k + row0 * ldkv + j * hd, *vh = v + row0 * ldkv + j * hd;
            const float *ph = p + (s * nh + i) * seq * seq;
            float *dqh = dq + row0 * ldq + i * hd;
            float *dkh = dk + row0 * ldkv + j * hd, *dvh = dv + row0 * ldkv + j * hd;
            for (size_t a0 = 0; a0 < seq; a0 += ATTN_BQ) {
                size_t na = seq - a0 < ATTN_BQ ? seq - a0 : ATTN_BQ;
                size_t kend = a0 + na; /* keys past the block's last query are masked for all of it */
                for (size_t a = 0; a < na; a++)
                    dsum[a] = 0.0;
                for (size_t b0 = 0; b0 < kend; b0 += ATTN_BK) {
                    size_t nb = kend - b0 < ATTN_BK ? kend - b0 : ATTN_BK;
                    gs_k_gemm(0, 1, na, nb, hd, 1.0f, doh + a0 * ldo, ldo, vh + b0 * ldkv, ldkv, 0.0f, tile, ATTN_BK);
                    for (size_t a = 0; a < na; a++)
                        for (size_t b = 0; b < nb; b++)
                            dsum[a] += (double)ph[(a0 + a) * seq + b0 + b] * tile[a * ATTN_BK + b] *
                                       (dropping ? attn_z(drop, sk, i, seq, a0 + a, b0 + b) : 1.0f);
                }
                for (size_t a = 0; a < na; a++)
                    memset(dqh + (a0 + a) * ldq, 0, hd * sizeof(float));
                for (size_t b0 = 0; b0 < kend; b0 += ATTN_BK) {
                    size_t nb = kend - b0 < ATTN_BK ? kend - b0 : ATTN_BK;
                    const float *pab = ph + a0 * seq + b0;
                    gs_k_gemm(0, 1, na, nb, hd, 1.0f, doh + a0 * ldo, ldo, vh + b0 * ldkv, ldkv, 0.0f, tile, ATTN_BK);
                    for (size_t a = 0; a < na; a++) {
                        float d = (float)dsum[a];
                        for (size_t b = 0; b < nb; b++) {
                            float z = dropping ? attn_z(drop, sk, i, seq, a0 + a, b0 + b) : 1.0f;
                            if (dropping)
                                pz[a * ATTN_BK + b] = pab[a * seq + b] * z;
                            tile[a * ATTN_BK + b] = pab[a * seq + b] * (tile[a * ATTN_BK + b] * z - d) * scale;
                        }
                    }
                    gs_k_gemm(0, 0, na, hd, nb, 1.0f, tile, ATTN_BK, kh + b0 * ldkv, ldkv, 1.0f, dqh + a0 * ldq, ldq);
                    gs_k_gemm(1, 0, nb, hd, na, 1.0f, tile, ATTN_BK, qh + a0 * ldq, ldq, 1.0f, dkh + b0 * ldkv, ldkv);
                    if (dropping)
                        gs_k_gemm(1, 0, nb, hd, na, 1.0f, pz, ATTN_BK, doh + a0 * ldo, ldo, 1.0f, dvh + b0 * ldkv,
                                  ldkv);
                    else
                        gs_k_gemm(1, 0, nb, hd, na, 1.0f, pab, seq, doh + a0 * ldo, ldo, 1.0f, dvh + b0 * ldkv, ldkv);
                }
            }
        }
    }
}

void gs_k_attn_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *p,
                   const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh,
                   size_t nkv, size_t hd)
{
    gs_k_attn_bwd_dropout(q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, NULL);
}
