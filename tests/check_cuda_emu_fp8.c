/* Check suite for the cuda driver's FP8 casts (kernels/cuda/fp8.cu) without a GPU: the device
 * code (kernels/cuda/fp8_body.h) compiled as C and run on the CPU emulator of CUDA's execution
 * model (tests/cuda_emu.h), with the launcher's grid and a smaller one that makes every thread
 * loop, against the host driver's emulation (kernels/host/fp8.c, itself checked against the
 * format's codes decoded in double by tests/check_fp8.c). The device casts must give the host's
 * bits: the same scale, the same code for every element, the same dequantized value, so that the
 * cuda driver's FP8 steps keep exec's contract with the host's.
 *
 * Where the build has CUDA's headers (GS_HAVE_CUDA_FP8_H), the body's encoder is also held
 * against NVIDIA's own conversion, __nv_cvt_float_to_fp8 with __NV_SATFINITE (cuda_fp8.hpp's
 * host implementation of the cvt.rn.satfinite instruction Transformer Engine's casts use): an
 * implementation this project did not write. Inputs: a stride through all 2^32 bit patterns, the
 * midpoints between neighbouring codes (ties: to the even code), the floats next to them, and the
 * overflow edges. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host/kernels.h"
#include "tests/cuda_emu.h"

#include "kernels/cuda/fp8_body.h"

#ifdef GS_HAVE_CUDA_FP8_H
#include <cuda_fp8.h>
#endif

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- the inputs ------------------------------------------------------------------------------ */

/* Appends x to v (cap floats; *n so far). */
static void push(float *v, size_t cap, size_t *n, float x)
{
    if (*n < cap)
        v[(*n)++] = x;
}

/* Floats that decide a cast: every code's value, the midpoint to the next code and the floats
 * on either side of it, both signs; the overflow edges; zeros, infinities, NaN. *n set. */
static float *edge_inputs(int fmt, size_t *n)
{
    size_t cap = 256 * 8 + 64;
    float *v = malloc(cap * sizeof *v);
    ck_assert_ptr_nonnull(v);
    *n = 0;
    for (unsigned c = 0; c < 0x7f; c++) {
        float a = gs_k_fp8_decode((gs_fp8_fmt)fmt, c), b = gs_k_fp8_decode((gs_fp8_fmt)fmt, c + 1);
        if (!isfinite(a) || !isfinite(b))
            continue;
        float mid = (float)(((double)a + (double)b) / 2.0); /* exact: FP8 values have few bits */
        float pts[] = {a, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (size_t i = 0; i < 4; i++) {
            push(v, cap, n, pts[i]);
            push(v, cap, n, -pts[i]);
        }
    }
    float mx = gs_k_fp8_max((gs_fp8_fmt)fmt);
    float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, mx, nextafterf(mx, INFINITY), mx * 1.0625f,
                     mx * 1.125f, mx * 2.0f, 3.4e38f, 1e-45f, ldexpf(1.0f, fmt ? -17 : -10),
                     ldexpf(1.5f, fmt ? -17 : -10), ldexpf(1.0f, fmt ? -16 : -9)};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        push(v, cap, n, edges[i]);
        push(v, cap, n, -edges[i]);
    }
    return v;
}

/* ---- the encoder and the decoder ------------------------------------------------------------ */

/* One input: the body's code is the host's. */
static void check_encode_one(int fmt, float x)
{
    unsigned dev = gs_fp8_encode(fmt, x), host = gs_k_fp8_encode((gs_fp8_fmt)fmt, x);
    ck_assert_msg(dev == host, "fmt %d: encode(%a) = 0x%02x on the device, 0x%02x on the host", fmt, (double)x, dev,
                  host);
}

/* check(fmt, x) for both formats over their edge inputs and a stride through every bit pattern
 * (65,537 inputs: normals, subnormals, NaNs). */
static void each_input(void (*check)(int fmt, float x))
{
    for (int fmt = 0; fmt < 2; fmt++) {
        size_t n;
        float *v = edge_inputs(fmt, &n);
        for (size_t i = 0; i < n; i++)
            check(fmt, v[i]);
        free(v);
        for (uint64_t u = 0; u < (1ull << 32); u += 65537)
            check(fmt, from_bits((uint32_t)u));
    }
}

START_TEST(encode_is_the_hosts)
{
    each_input(check_encode_one);
}
END_TEST

START_TEST(decode_is_the_hosts)
{
    for (int fmt = 0; fmt < 2; fmt++)
        for (unsigned c = 0; c < 256; c++) {
            float dev = gs_fp8_decode(fmt, c), host = gs_k_fp8_decode((gs_fp8_fmt)fmt, (uint8_t)c);
            ck_assert_msg(bits(dev) == bits(host) || (isnan(dev) && isnan(host)),
                          "fmt %d: decode(0x%02x) = %a on the device, %a on the host", fmt, c, (double)dev,
                          (double)host);
        }
}
END_TEST

#ifdef GS_HAVE_CUDA_FP8_H
/* One input: the body's code is NVIDIA's (NaN: both a NaN code). */
static void check_nvidia_one(int fmt, float x)
{
    unsigned dev = gs_fp8_encode(fmt, x);
    unsigned nv = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, fmt ? __NV_E5M2 : __NV_E4M3);
    if (isnan(x)) {
        ck_assert_msg(isnan(gs_fp8_decode(fmt, dev)) && isnan(gs_fp8_decode(fmt, nv)),
                      "fmt %d: NaN encodes as 0x%02x here, 0x%02x by cuda_fp8.h", fmt, dev, nv);
        return;
    }
    ck_assert_msg(dev == nv, "fmt %d: encode(%a) = 0x%02x here, 0x%02x by cuda_fp8.h (__NV_SATFINITE)", fmt,
                  (double)x, dev, nv);
}

START_TEST(encode_is_nvidias)
{
    each_input(check_nvidia_one);
}
END_TEST
#endif

/* ---- the kernels on the emulator ------------------------------------------------------------ */

typedef struct fp8_emu_args {
    const float *x;
    size_t n, stride, nparts;
    float *partial, *scale, *y;
    int fmt;
    size_t rows, cols; /* the quantize launch's */
    int transpose;
    unsigned char *q;
    float given; /* gs_fp8_given_kernel's scale */
} fp8_emu_args;

static void amax_thread(const void *p)
{
    const fp8_emu_args *a = p;
    gs_fp8_amax_kernel(a->x, a->n, a->stride, a->partial);
}

static void scale_thread(const void *p)
{
    const fp8_emu_args *a = p;
    gs_fp8_scale_kernel(a->partial, a->nparts, a->fmt, a->scale);
}

static void given_thread(const void *p)
{
    const fp8_emu_args *a = p;
    gs_fp8_given_kernel(a->partial, a->nparts, a->given, a->scale);
}

static void round_thread(const void *p)
{
    const fp8_emu_args *a = p;
    gs_fp8_round_kernel(a->x, a->n, a->stride, a->fmt, a->scale, a->y);
}

static void quantize_thread(const void *p)
{
    const fp8_emu_args *a = p;
    gs_fp8_quantize_kernel(a->x, a->rows, a->cols, a->transpose, a->stride, a->fmt, a->scale, a->q);
}

#define GUARD 16 /* poisoned floats after y */

/* gs_cu_fp8_round_current's three launches on the emulator with `blocks` blocks (0: the
 * launcher's gs_fp8_blocks(n)); y gets n floats, scale[0..2] scale, 1 / scale, amax. */
static void emu_round(int fmt, const float *x, size_t n, size_t blocks, float *y, float scale[3])
{
    char err[200];
    float partial[GS_FP8_AMAX_BLOCKS];
    if (!blocks)
        blocks = gs_fp8_blocks(n);
    ck_assert_uint_le(blocks, GS_FP8_AMAX_BLOCKS);
    fp8_emu_args a = {x, n, blocks * GS_FP8_THREADS, blocks, partial, scale, y, fmt, 0, 0, 0, NULL, 0.0f};
    size_t sh = GS_FP8_THREADS * sizeof(float);
    ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, sh, amax_thread, &a, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(gs_emu_launch(1, 1, 1, GS_FP8_THREADS, sh, scale_thread, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, 0, round_thread, &a, err, sizeof err) == 0,
                  "%s", err);
}

/* The emulated casts of x against gs_k_fp8_round_current: every output's bits and the scale. */
static void check_round(const char *what, int fmt, const float *x, size_t n, size_t blocks)
{
    float *y = malloc((n + GUARD) * sizeof *y), *ref = malloc((n ? n : 1) * sizeof *ref), scale[3];
    ck_assert(y && ref);
    for (size_t i = 0; i < n + GUARD; i++)
        y[i] = from_bits(0x7fc0deadu);
    emu_round(fmt, x, n, blocks, y, scale);
    float ref_scale = gs_k_fp8_round_current((gs_fp8_fmt)fmt, x, ref, n);
    ck_assert_msg(bits(scale[0]) == bits(ref_scale), "%s, fmt %d: scale %a on the device, %a on the host", what, fmt,
                  (double)scale[0], (double)ref_scale);
    ck_assert_msg(bits(scale[1]) == bits(1.0f / ref_scale), "%s: 1 / scale", what);
    float amax = gs_k_amax(x, n);
    ck_assert_msg(bits(scale[2]) == bits(amax) || (isnan(scale[2]) && isnan(amax)), "%s: amax %a, host %a", what,
                  (double)scale[2], (double)amax);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bits(y[i]) == bits(ref[i]) || (isnan(y[i]) && isnan(ref[i])),
                      "%s, fmt %d, element %zu of %zu: x %a -> %a on the device, %a on the host", what, fmt, i, n,
                      (double)x[i], (double)y[i], (double)ref[i]);
    for (size_t i = n; i < n + GUARD; i++)
        ck_assert_msg(bits(y[i]) == 0x7fc0deadu, "%s: wrote y[%zu], past its %zu floats", what, i, n);
    free(y);
    free(ref);
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static float urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

/* gs_cu_fp8_quantize_current's launches on the emulator (the amax, the scale, the codes of a
 * rows x cols tensor, transposed or not), against gs_k_fp8_encode of x times the host's scale,
 * element by element at its place: q[r cols + c], or q[c rows + r] transposed. */
START_TEST(quantize_gives_the_hosts_codes)
{
    const size_t rows = 37, cols = 53; /* 1961 elements: 8 blocks, the last partial */
    float x[37 * 53];
    unsigned char q[37 * 53 + GUARD];
    float partial[GS_FP8_AMAX_BLOCKS], scale[3];
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = urand() * 5.0f;
    x[1000] = 300.5f;
    for (int fmt = 0; fmt < 2; fmt++)
        for (int tr = 0; tr < 2; tr++) {
            char err[200];
            size_t blocks = gs_fp8_blocks(rows * cols), sh = GS_FP8_THREADS * sizeof(float);
            memset(q, 0xA5, sizeof q);
            fp8_emu_args a = {x, rows * cols, blocks * GS_FP8_THREADS, blocks, partial, scale, NULL, fmt,
                              rows, cols, tr, q, 0.0f};
            ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, sh, amax_thread, &a, err, sizeof err) == 0,
                          "%s", err);
            ck_assert_msg(gs_emu_launch(1, 1, 1, GS_FP8_THREADS, sh, scale_thread, &a, err, sizeof err) == 0, "%s", err);
            ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, 0, quantize_thread, &a, err,
                                        sizeof err) == 0, "%s", err);
            float hs = gs_k_fp8_current_scale((gs_fp8_fmt)fmt, gs_k_amax(x, rows * cols));
            ck_assert(bits(scale[0]) == bits(hs));
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) {
                    unsigned want = gs_k_fp8_encode((gs_fp8_fmt)fmt, x[r * cols + c] * hs);
                    unsigned got = q[tr ? c * rows + r : r * cols + c];
                    ck_assert_msg(got == want, "fmt %d, transpose %d, x[%zu][%zu]: code 0x%02x, host 0x%02x", fmt, tr,
                                  r, c, got, want);
                }
            for (size_t g = rows * cols; g < sizeof q; g++)
                ck_assert_msg(q[g] == 0xA5, "wrote q[%zu], past its %zu codes", g, rows * cols);
        }
}
END_TEST

/* Delayed scaling: gs_cu_fp8_round_scaled's launches (the amax, the given scale, the cast) on the
 * emulator against gs_k_fp8_round_scaled: every output's bits, the scale and its inverse as
 * given, and the amax recorded; values past the format's largest saturate, a NaN is recorded. */
START_TEST(scaled_kernels_give_the_hosts_bits)
{
    const size_t n = 3001;
    float *x = malloc(n * sizeof *x), *y = malloc((n + GUARD) * sizeof *y), *ref = malloc(n * sizeof *ref);
    ck_assert(x && y && ref);
    static const float scales[3] = {1.0f, 37.5f, 1e-3f};
    for (int fmt = 0; fmt < 2; fmt++)
        for (int si = 0; si < 3; si++)
            for (int nan = 0; nan < 2; nan++) {
                for (size_t i = 0; i < n; i++)
                    x[i] = urand() * 40.0f;
                x[1234] = -5000.0f; /* the amax; at scale 37.5 past both formats' largest */
                if (nan)
                    x[77] = NAN;
                for (size_t i = 0; i < n + GUARD; i++)
                    y[i] = from_bits(0x7fc0deadu);
                char err[200];
                float partial[GS_FP8_AMAX_BLOCKS], out[3];
                size_t blocks = gs_fp8_blocks(n), sh = GS_FP8_THREADS * sizeof(float);
                fp8_emu_args a = {x, n, blocks * GS_FP8_THREADS, blocks, partial, out, y, fmt, 0, 0, 0, NULL,
                                  scales[si]};
                ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, sh, amax_thread, &a, err,
                                            sizeof err) == 0, "%s", err);
                ck_assert_msg(gs_emu_launch(1, 1, 1, GS_FP8_THREADS, sh, given_thread, &a, err, sizeof err) == 0,
                              "%s", err);
                ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_FP8_THREADS, 0, round_thread, &a, err,
                                            sizeof err) == 0, "%s", err);
                float amax = gs_k_fp8_round_scaled((gs_fp8_fmt)fmt, scales[si], x, ref, n);
                ck_assert(bits(out[0]) == bits(scales[si]) && bits(out[1]) == bits(1.0f / scales[si]));
                ck_assert_msg(bits(out[2]) == bits(amax) || (isnan(out[2]) && isnan(amax)), "amax %a, host %a",
                              (double)out[2], (double)amax);
                ck_assert(nan ? isnan(amax) : amax == 5000.0f);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(bits(y[i]) == bits(ref[i]) || (isnan(y[i]) && isnan(ref[i])),
                                  "fmt %d, scale %g, element %zu: %a -> %a on the device, %a on the host", fmt,
                                  (double)scales[si], i, (double)x[i], (double)y[i], (double)ref[i]);
                for (size_t i = n; i < n + GUARD; i++)
                    ck_assert(bits(y[i]) == 0x7fc0deadu);
            }
    free(x);
    free(y);
    free(ref);
}
END_TEST

START_TEST(kernels_give_the_hosts_bits)
{
    const size_t n = 5003; /* 20 blocks of 256, the last one partial */
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int fmt = 0; fmt < 2; fmt++) {
        for (size_t i = 0; i < n; i++)
            x[i] = urand() * 3.0f;
        x[4711] = -917.25f; /* the amax, in a late block */
        check_round("random", fmt, x, n, 0);
        check_round("random, 3 blocks looping", fmt, x, n, 3);
        check_round("one element", fmt, x, 1, 0);
        for (size_t i = 0; i < n; i++)
            x[i] = urand() * 1e-30f; /* scales far above 1 */
        check_round("tiny", fmt, x, n, 0);
        for (size_t i = 0; i < n; i++)
            x[i] = urand() * 1e-44f; /* subnormal fp32: 448 / amax overflows to FLT_MAX */
        check_round("subnormal amax", fmt, x, n, 0);
        for (size_t i = 0; i < n; i++)
            x[i] = 0.0f;
        check_round("zeros (scale 1)", fmt, x, n, 0);
        for (size_t i = 0; i < n; i++)
            x[i] = urand();
        x[17] = INFINITY; /* scale 1: the other elements saturate or round at scale 1 */
        check_round("an infinity", fmt, x, n, 7);
        x[17] = 2.0f;
        x[2500] = NAN;
        check_round("a NaN", fmt, x, n, 0);
    }
    free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_emu_fp8");
    TCase *tc = tcase_create("fp8");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, encode_is_the_hosts);
    tcase_add_test(tc, decode_is_the_hosts);
#ifdef GS_HAVE_CUDA_FP8_H
    tcase_add_test(tc, encode_is_nvidias);
#endif
    tcase_add_test(tc, kernels_give_the_hosts_bits);
    tcase_add_test(tc, quantize_gives_the_hosts_codes);
    tcase_add_test(tc, scaled_kernels_give_the_hosts_bits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
