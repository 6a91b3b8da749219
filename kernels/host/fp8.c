/* FP8 casts emulated in fp32 arithmetic: the OCP 8-bit floating point formats E4M3 (NVIDIA's
 * e4m3fn) and E5M2, round to nearest even, saturating, with a per-tensor scale and amax as
 * Transformer Engine's FP8 recipes use them. */
#include <math.h>

#include "kernels/host/kernels.h"

/* exponent and mantissa bits, bias, largest finite value */
typedef struct fp8_layout {
    int ebits, mbits, bias;
    float max;
} fp8_layout;

static const fp8_layout layouts[] = {
    [GS_FP8_E4M3] = {4, 3, 7, 448.0f},
    [GS_FP8_E5M2] = {5, 2, 15, 57344.0f},
};

float gs_k_fp8_max(gs_fp8_fmt f)
{
    return layouts[f].max;
}

uint8_t gs_k_fp8_encode(gs_fp8_fmt f, float x)
{
    const fp8_layout *l = &layouts[f];
    uint8_t sign = signbit(x) ? 0x80u : 0u;
    if (isnan(x)) /* E4M3's one NaN pattern; E5M2's quiet NaN */
        return (uint8_t)(sign | (f == GS_FP8_E4M3 ? 0x7Fu : 0x7Eu));
    float a = fabsf(x);
    int emin = 1 - l->bias; /* the smallest normal's exponent, also the subnormals' quantum's */
    int e;
    frexpf(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (a == 0.0f || e < emin)
        e = emin;
    /* a / quantum is exact (a power of two apart, far from fp32's limits); rintf rounds to
     * nearest even in the default rounding mode; a carry may reach the next binade */
    float r = ldexpf(rintf(ldexpf(a, l->mbits - e)), e - l->mbits);
    if (!(r <= l->max)) /* saturate: overflow and infinities become the largest finite value */
        r = l->max;
    if (r == 0.0f)
        return sign;
    int re;
    frexpf(r, &re);
    re -= 1;
    if (re < emin) /* subnormal: exponent field 0, the mantissa counts quanta of 2^(emin - mbits) */
        return (uint8_t)(sign | (unsigned)ldexpf(r, l->mbits - emin));
    unsigned mant = (unsigned)ldexpf(r, l->mbits - re) - (1u << l->mbits);
    return (uint8_t)(sign | (unsigned)(re + l->bias) << l->mbits | mant);
}

float gs_k_fp8_decode(gs_fp8_fmt f, uint8_t code)
{
    const fp8_layout *l = &layouts[f];
    unsigned emask = (1u << l->ebits) - 1u, mmask = (1u << l->mbits) - 1u;
    unsigned ef = (code >> l->mbits) & emask, m = code & mmask;
    float sign = (code & 0x80u) ? -1.0f : 1.0f;
    if (f == GS_FP8_E4M3 && ef == emask && m == mmask)
        return NAN;
    if (f == GS_FP8_E5M2 && ef == emask)
        return m ? NAN : sign * INFINITY;
    if (ef == 0)
        return sign * ldexpf((float)m, 1 - l->bias - l->mbits);
    return sign * ldexpf((float)(m | (1u << l->mbits)), (int)ef - l->bias - l->mbits);
}

float gs_k_max_nan(float m, float a)
{
    return isnan(m) ? m : a > m || isnan(a) ? a : m;
}

float gs_k_amax(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n && !isnan(m); i++)
        m = gs_k_max_nan(m, fabsf(x[i]));
    return m;
}

float gs_k_fp8_current_scale(gs_fp8_fmt f, float amax)
{
    /* Transformer Engine's compute_scale_from_amax (transformer_engine/common/recipe/
     * recipe_common.cuh), epsilon 0, no power-of-two rounding */
    if (isinf(amax) || amax == 0.0f)
        return 1.0f;
    float scale = layouts[f].max / amax;
    if (isinf(scale))
        scale = 3.40282347e38f; /* FLT_MAX */
    if (isnan(scale))
        scale = 1.0f;
    return scale;
}

void gs_k_fp8_quantize(gs_fp8_fmt f, float scale, const float *x, uint8_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++)
        q[i] = gs_k_fp8_encode(f, x[i] * scale);
}

void gs_k_fp8_dequantize(gs_fp8_fmt f, float scale, const uint8_t *q, float *y, size_t n)
{
    float inv = 1.0f / scale;
    for (size_t i = 0; i < n; i++)
        y[i] = gs_k_fp8_decode(f, q[i]) * inv;
}

float gs_k_fp8_round_current(gs_fp8_fmt f, const float *x, float *y, size_t n)
{
    float scale = gs_k_fp8_current_scale(f, gs_k_amax(x, n));
    float inv = 1.0f / scale;
    for (size_t i = 0; i < n; i++)
        y[i] = gs_k_fp8_decode(f, gs_k_fp8_encode(f, x[i] * scale)) * inv;
    return scale;
}

float gs_k_fp8_round_scaled(gs_fp8_fmt f, float scale, const float *x, float *y, size_t n)
{
    float amax = gs_k_amax(x, n), inv = 1.0f / scale;
    for (size_t i = 0; i < n; i++)
        y[i] = gs_k_fp8_decode(f, gs_k_fp8_encode(f, x[i] * scale)) * inv;
    return amax;
}

float gs_k_fp8_delayed_scale(gs_fp8_fmt f, float amax, float old, unsigned margin)
{
    /* transformer_engine/common/recipe/delayed_scaling.cu, the update kernel: scaled_max / amax
     * when amax is finite and positive, else the previous scale; an infinite scale is FLT_MAX;
     * scaled_max = fp8 max x 2^-margin (exact: a power of two) */
    if (!(isfinite(amax) && amax > 0.0f))
        return old;
    float scale = ldexpf(layouts[f].max, -(int)margin) / amax;
    return isinf(scale) ? 3.40282347e38f : scale;
}

float gs_k_fp8_amax_history(float *hist, size_t len, float last, int use_max)
{
    /* delayed_scaling.cu's kernel_bulk, one thread's loop in order: entry i takes entry i + 1
     * (the last takes `last`) into the maximum, then is written, entry 0 as 0 */
    float amax = 0.0f;
    if (last != 0.0f)
        for (size_t i = 0; i < len; i++) {
            float a = i + 1 < len ? hist[i + 1] : last;
            amax = fmaxf(amax, a);
            hist[i] = i > 0 ? a : 0.0f;
        }
    return use_max ? amax : last;
}

size_t gs_k_fp8_block_of(const gs_fp8_cut *c, size_t len, size_t i)
{
    if (!c || c->parts <= 1 || c->parts > GS_FP8_MAX_BLOCKS)
        return 0;
    if (c->zigzag) {
        size_t chunk = (i % c->zigzag) / (c->zigzag / (2 * c->parts));
        return chunk < c->parts ? chunk : 2 * c->parts - 1 - chunk;
    }
    size_t nseg = c->nseg ? c->nseg : 1;
    for (size_t g = 0; g < nseg; g++) {
        size_t sl = c->nseg ? c->seg[g] : len;
        if (i < sl)
            return i / (sl / c->parts);
        i -= sl;
    }
    return 0; /* past the segments: refused by gs_k_fp8_cut_ok */
}

int gs_k_fp8_cut_ok(const gs_fp8_cut *c, size_t len)
{
    if (!c || c->parts <= 1)
        return 1;
    if (c->parts > GS_FP8_MAX_BLOCKS || c->nseg > 3)
        return 0;
    if (c->zigzag)
        return len % c->zigzag == 0 && c->zigzag % (2 * c->parts) == 0;
    if (!c->nseg)
        return len % c->parts == 0;
    size_t sum = 0;
    for (size_t g = 0; g < c->nseg; g++) {
        if (c->seg[g] % c->parts)
            return 0;
        sum += c->seg[g];
    }
    return sum == len;
}

void gs_k_fp8_round_blocks(gs_fp8_fmt f, const float *x, float *y, size_t rows, size_t cols, const gs_fp8_cut *rc,
                           const gs_fp8_cut *cc)
{
    size_t nr = rc && rc->parts > 1 && rc->parts <= GS_FP8_MAX_BLOCKS ? rc->parts : 1;
    size_t nc = cc && cc->parts > 1 && cc->parts <= GS_FP8_MAX_BLOCKS ? cc->parts : 1;
    if (nr * nc == 1) {
        gs_k_fp8_round_current(f, x, y, rows * cols);
        return;
    }
    /* each block's amax (NaN sticks), then its scale, then every element at its block's */
    float amax[GS_FP8_MAX_BLOCKS * GS_FP8_MAX_BLOCKS] = {0};
    for (size_t i = 0; i < rows; i++) {
        size_t bi = gs_k_fp8_block_of(rc, rows, i);
        for (size_t j = 0; j < cols; j++) {
            float *m = &amax[bi * nc + gs_k_fp8_block_of(cc, cols, j)];
            *m = gs_k_max_nan(*m, fabsf(x[i * cols + j]));
        }
    }
    float scale[GS_FP8_MAX_BLOCKS * GS_FP8_MAX_BLOCKS];
    for (size_t b = 0; b < nr * nc; b++)
        scale[b] = gs_k_fp8_current_scale(f, amax[b]);
    for (size_t i = 0; i < rows; i++) {
        size_t bi = gs_k_fp8_block_of(rc, rows, i);
        for (size_t j = 0; j < cols; j++) {
            float sc = scale[bi * nc + gs_k_fp8_block_of(cc, cols, j)];
            y[i * cols + j] = gs_k_fp8_decode(f, gs_k_fp8_encode(f, x[i * cols + j] * sc)) * (1.0f / sc);
        }
    }
}
