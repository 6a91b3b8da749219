/* Vocab-parallel cross-entropy in three steps: per-slice statistics (max, sum of exponentials,
 * target logit), their combination into the global log-sum-exp and summed loss, and the logits'
 * gradient on each slice from the global lse. Reductions are summed in double, in order. */
#include <math.h>

#include "kernels/host/kernels.h"

/* 1 when target lies in [vocab_lo, vocab_lo + vocab_n), with its column in *col. */
static int xent_in_slice(int32_t target, size_t vocab_lo, size_t vocab_n, size_t *col)
{
    if (target < 0 || (size_t)target < vocab_lo || (size_t)target - vocab_lo >= vocab_n)
        return 0;
    *col = (size_t)target - vocab_lo;
    return 1;
}

void gs_k_xent_stats(const float *logits, const int32_t *target, size_t t, size_t vocab_lo, size_t vocab_n,
                     float *stats)
{
    for (size_t r = 0; r < t; r++) {
        const float *x = logits + r * vocab_n;
        float mx = -INFINITY;
        for (size_t c = 0; c < vocab_n; c++)
            mx = x[c] > mx ? x[c] : mx;
        double sum = 0.0;
        for (size_t c = 0; c < vocab_n; c++)
            sum += exp((double)x[c] - (double)mx);
        size_t col;
        stats[r * GS_K_XENT_STATS + 0] = mx;
        stats[r * GS_K_XENT_STATS + 1] = (float)sum;
        stats[r * GS_K_XENT_STATS + 2] = xent_in_slice(target[r], vocab_lo, vocab_n, &col) ? x[col] : 0.0f;
    }
}

double gs_k_xent_combine(const float *stats, size_t parts, size_t t, float *lse)
{
    double loss = 0.0;
    for (size_t r = 0; r < t; r++) {
        double mx = -INFINITY;
        for (size_t part = 0; part < parts; part++) {
            double m = stats[(part * t + r) * GS_K_XENT_STATS + 0];
            mx = m > mx ? m : mx;
        }
        double sum = 0.0, target_logit = 0.0;
        for (size_t part = 0; part < parts; part++) {
            const float *st = stats + (part * t + r) * GS_K_XENT_STATS;
            if (st[1] > 0.0f) /* an empty slice has max -inf and sum 0 */
                sum += (double)st[1] * exp((double)st[0] - mx);
            target_logit += st[2];
        }
        double l = mx + log(sum);
        lse[r] = (float)l;
        loss += l - target_logit;
    }
    return loss;
}

void gs_k_xent_bwd(const float *logits, const int32_t *target, const float *lse, size_t t, size_t vocab_lo,
                   size_t vocab_n, float scale, float *dlogits)
{
    for (size_t r = 0; r < t; r++) {
        const float *x = logits + r * vocab_n;
        float *dx = dlogits + r * vocab_n;
        for (size_t c = 0; c < vocab_n; c++)
            dx[c] = scale * (float)exp((double)x[c] - (double)lse[r]);
        size_t col;
        if (xent_in_slice(target[r], vocab_lo, vocab_n, &col))
            dx[col] = scale * ((float)exp((double)x[col] - (double)lse[r]) - 1.0f);
    }
}
