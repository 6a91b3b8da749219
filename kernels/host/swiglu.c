/* SwiGLU activation of the Llama MLP: h = silu(gate) * up on a fused [gate | up] row, and its
 * backward. */
#include <math.h>

#include "kernels/host/kernels.h"

static float swiglu_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

void gs_k_swiglu_fwd(const float *gu, float *h, size_t t, size_t f)
{
    for (size_t r = 0; r < t; r++) {
        const float *gate = gu + r * 2 * f, *up = gate + f;
        for (size_t i = 0; i < f; i++)
            h[r * f + i] = gate[i] * swiglu_sigmoid(gate[i]) * up[i];
    }
}

/* d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g). */
void gs_k_swiglu_bwd(const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    for (size_t r = 0; r < t; r++) {
        const float *gate = gu + r * 2 * f, *up = gate + f;
        float *dgate = dgu + r * 2 * f, *dup = dgate + f;
        for (size_t i = 0; i < f; i++) {
            float g = gate[i], s = swiglu_sigmoid(g), d = dh[r * f + i];
            dgate[i] = d * up[i] * s * (1.0f + g * (1.0f - s));
            dup[i] = d * g * s;
        }
    }
}
