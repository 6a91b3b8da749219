/* LayerNorm (GPT: y = (x - mean) / sqrt(var + eps) * g + b, biased variance) forward and
 * backward. Row reductions are summed in double, in order. */
#include <math.h>

#include "kernels/host/kernels.h"

void gs_k_layernorm_fwd(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd, size_t t,
                        size_t h, float eps)
{
    for (size_t r = 0; r < t; r++) {
        const float *xr = x + r * h;
        float *yr = y + r * h;
        double sum = 0.0;
        for (size_t i = 0; i < h; i++)
            sum += xr[i];
        double mu = sum / (double)h, var = 0.0;
        for (size_t i = 0; i < h; i++)
            var += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        float m = (float)mu, rs = (float)(1.0 / sqrt(var / (double)h + (double)eps));
        mean[r] = m;
        rstd[r] = rs;
        for (size_t i = 0; i < h; i++)
            yr[i] = (xr[i] - m) * rs * g[i] + b[i];
    }
}

/* With xh = (x - mean) r and dxh = g dy: dx = r (dxh - mean(dxh) - xh mean(dxh xh)) (the mean's
 * and the variance's dependence on x); dg += dy xh, db += dy. */
void gs_k_layernorm_bwd(const float *x, const float *g, const float *mean, const float *rstd, const float *dy,
                        float *dx, float *dg, float *db, size_t t, size_t h)
{
    for (size_t r = 0; r < t; r++) {
        const float *xr = x + r * h, *dyr = dy + r * h;
        float *dxr = dx + r * h;
        float m = mean[r], rs = rstd[r];
        double s1 = 0.0, s2 = 0.0;
        for (size_t i = 0; i < h; i++) {
            double xh = ((double)xr[i] - m) * rs, dxh = (double)g[i] * dyr[i];
            s1 += dxh;
            s2 += dxh * xh;
        }
        float c1 = (float)(s1 / (double)h), c2 = (float)(s2 / (double)h);
        for (size_t i = 0; i < h; i++) {
            float xh = (xr[i] - m) * rs;
            dxr[i] = rs * (g[i] * dyr[i] - c1 - xh * c2);
            dg[i] += dyr[i] * xh;
            db[i] += dyr[i];
        }
    }
}
