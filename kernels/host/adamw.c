/* AdamW on a flat fp32 shard, in the order of operations of PyTorch's single-tensor
 * torch.optim.AdamW: decay, moment updates, bias-corrected step. */
#include <math.h>

#include "kernels/host/kernels.h"

void gs_k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, uint64_t step)
{
    double bias1 = 1.0 - pow((double)beta1, (double)step);
    double bias2 = 1.0 - pow((double)beta2, (double)step);
    float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    float step_size = (float)((double)lr / bias1);
    float bias2_sqrt = (float)sqrt(bias2);
    float one_minus_b1 = (float)(1.0 - (double)beta1), one_minus_b2 = (float)(1.0 - (double)beta2);
    /* exp_avg.lerp_(grad, w) with w = 1 - beta1 evaluates m + w (g - m) for w < 0.5, else
     * g - (g - m)(1 - w). */
    float lerp_w = one_minus_b1, lerp_1mw = 1.0f - one_minus_b1;
    int lerp_low = lerp_w < 0.5f;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        /* param.mul_(1 - lr wd) */
        p[i] *= decay;
        m[i] = lerp_low ? m[i] + lerp_w * (gi - m[i]) : gi - (gi - m[i]) * lerp_1mw;
        /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
        v[i] = v[i] * beta2 + one_minus_b2 * gi * gi;
        /* denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps);
         * param.addcdiv_(exp_avg, denom, value=-step_size) */
        float denom = sqrtf(v[i]) / bias2_sqrt + eps;
        p[i] = p[i] + (-step_size * m[i]) / denom;
    }
}
