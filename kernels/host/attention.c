/* Causal softmax attention with grouped KV heads (GQA) on strided token rows, forward (scores and
 * P V through gs_k_gemm, probabilities saved) and backward (row by row from the saved
 * probabilities, no scratch memory). */
#include <math.h>
#include <string.h>

#include "kernels/host/kernels.h"

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

void gs_k_attn_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                   float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd)
{
    size_t group = nh / nkv; /* query heads per kv head */
    float scale = (float)(1.0 / sqrt((double)hd));
    for (size_t s = 0; s < nseq; s++) {
        size_t row0 = s * seq;
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / group;
            const float *qh = q + row0 * ldq + i * hd;
            const float *kh = k + row0 * ldkv + j * hd;
            const float *vh = v + row0 * ldkv + j * hd;
            float *ph = p + (s * nh + i) * seq * seq;
            /* Full score square (the masked half is overwritten by the softmax). */
            gs_k_gemm(0, 1, seq, seq, hd, scale, qh, ldq, kh, ldkv, 0.0f, ph, seq);
            for (size_t a = 0; a < seq; a++)
                attn_softmax_causal(ph + a * seq, a, seq);
            gs_k_gemm(0, 0, seq, hd, seq, 1.0f, ph, seq, vh, ldkv, 0.0f, out + row0 * ldo + i * hd, ldo);
        }
    }
}

static float attn_dot(const float *x, const float *y, size_t n)
{
    float acc = 0.0f;
    for (size_t d = 0; d < n; d++)
        acc += x[d] * y[d];
    return acc;
}

static void attn_axpy(float *y, float a, const float *x, size_t n)
{
    for (size_t d = 0; d < n; d++)
        y[d] += a * x[d];
}

/* Per query row a: dP_ab = dout_a . v_b; D_a = sum_b P_ab dP_ab; dS_ab = P_ab (dP_ab - D_a);
 * dq_a = scale sum_b dS_ab k_b; dk_b += scale dS_ab q_a; dv_b += P_ab dout_a. dP is computed twice
 * (once for D, once for dS) so no scratch row is needed. Query heads are visited in order, so the
 * GQA sums into dk, dv have a fixed order. */
void gs_k_attn_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *p,
                   const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh,
                   size_t nkv, size_t hd)
{
    size_t group = nh / nkv;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (size_t s = 0; s < nseq; s++) {
        size_t row0 = s * seq;
        for (size_t r = row0; r < row0 + seq; r++)
            for (size_t j = 0; j < nkv; j++) {
                memset(dk + r * ldkv + j * hd, 0, hd * sizeof(float));
                memset(dv + r * ldkv + j * hd, 0, hd * sizeof(float));
            }
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / group;
            const float *ph = p + (s * nh + i) * seq * seq;
            for (size_t a = 0; a < seq; a++) {
                const float *qa = q + (row0 + a) * ldq + i * hd;
                const float *doa = dout + (row0 + a) * ldo + i * hd;
                float *dqa = dq + (row0 + a) * ldq + i * hd;
                const float *pa = ph + a * seq;
                double dsum = 0.0;
                for (size_t b = 0; b <= a; b++)
                    dsum += (double)pa[b] * attn_dot(doa, v + (row0 + b) * ldkv + j * hd, hd);
                float drow = (float)dsum;
                memset(dqa, 0, hd * sizeof(float));
                for (size_t b = 0; b <= a; b++) {
                    size_t kvoff = (row0 + b) * ldkv + j * hd;
                    float dp = attn_dot(doa, v + kvoff, hd);
                    float ds = pa[b] * (dp - drow) * scale;
                    attn_axpy(dqa, ds, k + kvoff, hd);
                    attn_axpy(dk + kvoff, ds, qa, hd);
                    attn_axpy(dv + kvoff, pa[b], doa, hd);
                }
            }
        }
    }
}
