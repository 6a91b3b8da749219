/* RMSNorm (Llama: y = x / rms(x) * g, no mean subtraction, no bias) forward and backward. Row
 * reductions are summed in double, in order. */
#include <math.h>

#include "kernels/host/kernels.h"

void gs_k_rmsnorm_fwd(const float *x, const float *g, float *y, float *rstd, size_t t, size_t h, float eps)
{
    for (size_t r = 0; r < t; r++) {
        const float *xr = x + r * h;
        float *yr = y + r * h;
        double sumsq = 0.0;
        for (size_t i = 0; i < h; i++)
            sumsq += (double)xr[i] * xr[i];
        float rs = (float)(1.0 / sqrt(sumsq / (double)h + (double)eps));
        rstd[r] = rs;
        for (size_t i = 0; i < h; i++)
            yr[i] = xr[i] * rs * g[i];
    }
}

/* With r = rstd: y_i = g_i x_i r and dr/dx_j = -r^3 x_j / h, so
 * dx_j = r (g_j dy_j - x_j r^2 sum_i(dy_i g_i x_i) / h). */
void gs_k_rmsnorm_bwd(const float *x, const float *g, const float *rstd, const float *dy, float *dx, float *dg,
                      size_t t, size_t h)
{
    for (size_t r = 0; r < t; r++) {
        const float *xr = x + r * h, *dyr = dy + r * h;
        float *dxr = dx + r * h;
        float rs = rstd[r];
        double dot = 0.0;
        for (size_t i = 0; i < h; i++)
            dot += (double)dyr[i] * g[i] * xr[i];
        float coef = (float)(dot * (double)rs * (double)rs / (double)h);
        for (size_t i = 0; i < h; i++) {
            dxr[i] = rs * (g[i] * dyr[i] - xr[i] * coef);
            dg[i] += dyr[i] * xr[i] * rs;
        }
    }
}
