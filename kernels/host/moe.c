/* Mixture-of-experts kernels: the router's top-k with the softmax over the chosen logits
 * (Megatron-Core's default softmax router, moe_router_pre_softmax off) and its backward, and the
 * row moves of token permutation (gather, weighted scatter-add, per-row dot products). */
#include <math.h>

#include "kernels/host/kernels.h"

void gs_k_moe_topk_fwd(const float *logits, size_t t, size_t experts, size_t k, int32_t *idx, float *probs)
{
    for (size_t r = 0; r < t; r++) {
        const float *l = logits + r * experts;
        int32_t *ix = idx + r * k;
        float *p = probs + r * k;
        /* selection: the largest remaining logit, ties to the lower expert; chosen in descending order */
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
        /* softmax over the k chosen logits (the largest first: its exponent is 0) */
        double m = l[ix[0]], sum = 0.0;
        for (size_t j = 0; j < k; j++)
            sum += exp((double)l[ix[j]] - m);
        for (size_t j = 0; j < k; j++)
            p[j] = (float)(exp((double)l[ix[j]] - m) / sum);
    }
}

void gs_k_moe_topk_bwd(const float *probs, const float *dprobs, const int32_t *idx, size_t t, size_t experts,
                       size_t k, float *dlogits)
{
    for (size_t r = 0; r < t; r++) {
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
}

void gs_k_rows_gather(const float *src, const int32_t *idx, const float *w, size_t n, size_t h, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        const float *s = src + (size_t)idx[i] * h;
        float *d = dst + i * h;
        if (w)
            for (size_t c = 0; c < h; c++)
                d[c] = w[i] * s[c];
        else
            for (size_t c = 0; c < h; c++)
                d[c] = s[c];
    }
}

void gs_k_rows_scatter_add(const float *src, const int32_t *idx, const float *w, size_t n, size_t h, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        const float *s = src + i * h;
        float *d = dst + (size_t)idx[i] * h;
        if (w)
            for (size_t c = 0; c < h; c++)
                d[c] += w[i] * s[c];
        else
            for (size_t c = 0; c < h; c++)
                d[c] += s[c];
    }
}

void gs_k_rows_dot(const float *a, const int32_t *idx, const float *b, size_t n, size_t h, float *out)
{
    for (size_t i = 0; i < n; i++) {
        const float *x = a + (size_t)idx[i] * h, *y = b + i * h;
        double acc = 0.0;
        for (size_t c = 0; c < h; c++)
            acc += (double)x[c] * y[c];
        out[i] = (float)acc;
    }
}
