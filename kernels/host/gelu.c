/* GELU, the tanh approximation GPT-2 and Megatron's bias_gelu use:
 * y = x/2 (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi); and the bias of a linear layer added
 * to each row, and its gradient (the column sums of dy, in double, in row order). */
#include <math.h>

#include "kernels/host/kernels.h"

#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715

void gs_k_gelu_fwd(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + tanh(GELU_C * (v + GELU_A * v * v * v))));
    }
}

/* d/dx: 0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3a x^2), th = tanh(c (x + a x^3)). */
void gs_k_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i], th = tanh(GELU_C * (v + GELU_A * v * v * v));
        double d = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * GELU_C * (1.0 + 3.0 * GELU_A * v * v);
        dx[i] = (float)(d * dy[i]);
    }
}

void gs_k_bias_add(float *y, const float *b, size_t t, size_t n)
{
    for (size_t r = 0; r < t; r++)
        for (size_t i = 0; i < n; i++)
            y[r * n + i] += b[i];
}

void gs_k_bias_grad(const float *dy, float *db, size_t t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t r = 0; r < t; r++)
            s += dy[r * n + i];
        db[i] += (float)s;
    }
}
