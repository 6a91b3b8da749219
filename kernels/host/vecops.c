/* Element-wise vector updates: residual adds, gradient accumulation and scaling. */
#include "kernels/host/kernels.h"

void gs_k_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void gs_k_scale(float *y, float a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] *= a;
}
