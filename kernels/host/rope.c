/* Rotary position embedding in the "rotate half" form of HF Llama / GPT-NeoX, forward and its
 * transpose, in place on strided token rows. Angles are computed in double. */
#include <math.h>

#include "kernels/host/kernels.h"

/* Rotates every pair (i, i + hd/2) of the nh heads of each row by sign * pos * theta^(-2i/hd). */
static void rope_rotate(float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta, double sign)
{
    size_t half = hd / 2;
    for (size_t r = 0; r < t; r++) {
        double pos = (double)(r % seq);
        float *row = x + r * ld;
        for (size_t i = 0; i < half; i++) {
            double angle = sign * pos * pow((double)theta, -2.0 * (double)i / (double)hd);
            float c = (float)cos(angle), s = (float)sin(angle);
            for (size_t head = 0; head < nh; head++) {
                float *v = row + head * hd;
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c - x1 * s;
                v[i + half] = x0 * s + x1 * c;
            }
        }
    }
}

void gs_k_rope_fwd(float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta)
{
    rope_rotate(x, t, seq, nh, hd, ld, theta, 1.0);
}

void gs_k_rope_bwd(float *dx, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta)
{
    rope_rotate(dx, t, seq, nh, hd, ld, theta, -1.0);
}
