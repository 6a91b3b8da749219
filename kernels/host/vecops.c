/* Element-wise vector updates: residual adds, gradient accumulation and scaling; rounding to
 * bfloat16. */
#include <string.h>

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

void gs_k_round_bf16(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        if ((u & 0x7f800000u) == 0x7f800000u) /* inf, NaN: truncated; a NaN keeps a mantissa bit */
            u = (u & 0xffff0000u) | ((u & 0x007fffffu) ? 0x00400000u : 0u);
        else /* to nearest, ties to the even upper half; a carry may reach the exponent (or inf) */
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&dst[i], &u, sizeof u);
    }
}
