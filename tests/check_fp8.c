/* Check suite for the FP8 casts (kernels/host/fp8.c): every cast against the nearest of the 256
 * codes (decoded here from the bit fields in double, ties to the even code), on random, boundary,
 * tie, subnormal and overflow inputs, and the formats' landmark values from the OCP FP8 spec. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/host/kernels.h"

/* ---- the reference: the format's codes decoded in double ----------------------------------- */

typedef struct ref_fmt {
    gs_fp8_fmt f;
    int ebits, mbits, bias;
    int e4m3; /* no infinities, S.1111.111 is NaN */
} ref_fmt;

static const ref_fmt E4M3 = {GS_FP8_E4M3, 4, 3, 7, 1};
static const ref_fmt E5M2 = {GS_FP8_E5M2, 5, 2, 15, 0};

/* the value of code c in double; *finite = 0 for NaN and infinities */
static double ref_decode(const ref_fmt *r, unsigned c, int *finite)
{
    unsigned ef = (c >> r->mbits) & ((1u << r->ebits) - 1), m = c & ((1u << r->mbits) - 1);
    double sign = (c & 0x80) ? -1.0 : 1.0;
    unsigned top = (1u << r->ebits) - 1;
    *finite = 1;
    if (r->e4m3 && ef == top && m == (1u << r->mbits) - 1) {
        *finite = 0;
        return NAN;
    }
    if (!r->e4m3 && ef == top) {
        *finite = 0;
        return m ? NAN : sign * INFINITY;
    }
    double frac = (double)m / (double)(1u << r->mbits);
    if (ef == 0)
        return sign * frac * pow(2.0, 1 - r->bias);
    return sign * (1.0 + frac) * pow(2.0, (int)ef - r->bias);
}

/* The nearest finite code of x's sign (so beyond the largest finite value: the largest), ties to
 * the code whose last bit is 0 (the even mantissa). */
static unsigned ref_encode(const ref_fmt *r, double x)
{
    unsigned sign = signbit(x) ? 0x80u : 0u, best = sign;
    double bestd = INFINITY;
    for (unsigned c = sign; c < sign + 0x80u; c++) {
        int finite;
        double v = ref_decode(r, c, &finite);
        if (!finite)
            continue;
        double d = fabs(x - v);
        if (d < bestd || (d == bestd && (c & 1u) == 0)) {
            best = c;
            bestd = d;
        }
    }
    return best;
}

static void check_cast(const ref_fmt *r, float x)
{
    unsigned got = gs_k_fp8_encode(r->f, x), want = ref_encode(r, x);
    ck_assert_msg(got == want, "fmt %d: cast(%a) = 0x%02x, the nearest code is 0x%02x", r->ebits, (double)x, got, want);
}

/* xorshift64* */
static double rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
}

/* ---- decode: the landmarks -------------------------------------------------------------------- */

START_TEST(test_landmarks)
{
    /* E4M3: S.1111.110 = 448 the largest, S.1111.111 NaN, 0.0000.001 = 2^-9, 0.0001.000 = 2^-6 */
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0x7E), 448.0f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0xFE), -448.0f);
    ck_assert(isnan(gs_k_fp8_decode(GS_FP8_E4M3, 0x7F)));
    ck_assert(isnan(gs_k_fp8_decode(GS_FP8_E4M3, 0xFF)));
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0x01), 0x1p-9f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0x07), 0x7p-9f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0x08), 0x1p-6f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E4M3, 0x38), 1.0f);
    ck_assert_float_eq(gs_k_fp8_max(GS_FP8_E4M3), 448.0f);
    /* E5M2: 0.11110.11 = 57344 the largest, 0.11111.00 inf, 0.00000.01 = 2^-16 */
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E5M2, 0x7B), 57344.0f);
    ck_assert(isinf(gs_k_fp8_decode(GS_FP8_E5M2, 0x7C)) && gs_k_fp8_decode(GS_FP8_E5M2, 0x7C) > 0);
    ck_assert(isinf(gs_k_fp8_decode(GS_FP8_E5M2, 0xFC)) && gs_k_fp8_decode(GS_FP8_E5M2, 0xFC) < 0);
    ck_assert(isnan(gs_k_fp8_decode(GS_FP8_E5M2, 0x7D)));
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E5M2, 0x01), 0x1p-16f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E5M2, 0x04), 0x1p-14f);
    ck_assert_float_eq(gs_k_fp8_decode(GS_FP8_E5M2, 0x3C), 1.0f);
    ck_assert_float_eq(gs_k_fp8_max(GS_FP8_E5M2), 57344.0f);
    /* every code decodes as the reference does */
    const ref_fmt *fm[2] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++)
        for (unsigned c = 0; c < 256; c++) {
            int finite;
            double v = ref_decode(fm[k], c, &finite);
            float g = gs_k_fp8_decode(fm[k]->f, (uint8_t)c);
            if (isnan(v))
                ck_assert_msg(isnan(g), "code 0x%02x", c);
            else
                ck_assert_msg((double)g == v, "fmt %d code 0x%02x: %a, want %a", k, c, (double)g, v);
        }
}
END_TEST

START_TEST(test_landmark_casts)
{
    /* saturation: past 448 (464 is the tie with the would-be 480) and infinities give 448 */
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 448.0f), 0x7E);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 464.0f), 0x7E);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 1e30f), 0x7E);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, INFINITY), 0x7E);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, -INFINITY), 0xFE);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, 61440.0f), 0x7B);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, INFINITY), 0x7B);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, -1e30f), 0xFB);
    /* NaN stays NaN; signed zero keeps its sign */
    ck_assert(isnan(gs_k_fp8_decode(GS_FP8_E4M3, gs_k_fp8_encode(GS_FP8_E4M3, NAN))));
    ck_assert(isnan(gs_k_fp8_decode(GS_FP8_E5M2, gs_k_fp8_encode(GS_FP8_E5M2, NAN))));
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, -0.0f), 0x80);
    /* ties to even at half a step: 1 + 1/16 between 1 (mantissa 000) and 1.125 (001) -> 1;
     * 1 + 3/16 between 1.125 and 1.25 (010) -> 1.25 */
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 1.0625f), 0x38);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 1.1875f), 0x3A);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, 1.125f), 0x3C);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, 1.375f), 0x3E);
    /* subnormals: half the smallest is a tie with 0 (even); 1.5 of it rounds to 2; just over half
     * rounds up */
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 0x1p-10f), 0x00);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 0x3p-10f), 0x02);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, nextafterf(0x1p-10f, 1.0f)), 0x01);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, 0x1p-17f), 0x00);
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E5M2, 0x3p-17f), 0x02);
    /* the largest subnormal and the smallest normal: their midpoint goes to the even normal */
    ck_assert_uint_eq(gs_k_fp8_encode(GS_FP8_E4M3, 0xFp-10f), 0x08);
}
END_TEST

/* ---- casts against the nearest code -------------------------------------------------------- */

START_TEST(test_exhaustive_boundaries)
{
    const ref_fmt *fm[2] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++) {
        const ref_fmt *r = fm[k];
        for (unsigned c = 0; c < 256; c++) {
            int finite, fn;
            double v = ref_decode(r, c, &finite);
            if (!finite)
                continue;
            check_cast(r, (float)v); /* every code round-trips */
            unsigned n = (c & 0x80) ? c - 1 : c + 1; /* the next code away from zero */
            if (c == 0x80 || (n & 0x7F) == 0)
                continue;
            double w = ref_decode(r, n, &fn);
            if (!fn) /* past the largest: the would-be next step's tie and beyond */
                w = v + (v - ref_decode(r, (c & 0x80) ? c + 1 : c - 1, &fn));
            float mid = (float)((v + w) / 2); /* exact in fp32 */
            check_cast(r, mid);
            check_cast(r, nextafterf(mid, 0.0f));
            check_cast(r, nextafterf(mid, INFINITY));
            check_cast(r, nextafterf(mid, -INFINITY));
            check_cast(r, nextafterf((float)v, 0.0f));
            check_cast(r, nextafterf((float)v, (float)w));
        }
    }
}
END_TEST

START_TEST(test_random)
{
    uint64_t seed = UINT64_C(0x9E3779B97F4A7C15);
    const ref_fmt *fm[2] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 20000; i++) {
            /* magnitudes from far below the smallest subnormal to past the largest value */
            double e = -26.0 + 46.0 * rnd(&seed);
            double x = ldexp(1.0 + rnd(&seed), (int)floor(e)) * (rnd(&seed) < 0.5 ? -1.0 : 1.0);
            check_cast(fm[k], (float)x);
        }
}
END_TEST

/* ---- scaled casts ------------------------------------------------------------------------------ */

START_TEST(test_scaled)
{
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N];
    uint64_t seed = 7;
    for (size_t i = 0; i < N; i++)
        x[i] = (float)((rnd(&seed) - 0.5) * 0.02 * exp(4.0 * rnd(&seed)));
    x[123] = -3.0f; /* the amax, negative */
    ck_assert_float_eq(gs_k_amax(x, N), 3.0f);
    ck_assert_float_eq(gs_k_amax(x, 0), 0.0f);
    const ref_fmt *fm[2] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++) {
        const ref_fmt *r = fm[k];
        double fmax = r->e4m3 ? 448.0 : 57344.0;
        float scale = gs_k_fp8_current_scale(r->f, 3.0f);
        ck_assert_float_eq(scale, (float)(fmax / 3.0));
        gs_k_fp8_quantize(r->f, scale, x, q, N);
        for (size_t i = 0; i < N; i++)
            ck_assert_uint_eq(q[i], ref_encode(r, (double)(x[i] * scale)));
        /* the amax lands on the largest value */
        int fin;
        ck_assert(ref_decode(r, q[123], &fin) == -fmax);
        gs_k_fp8_dequantize(r->f, scale, q, y, N);
        for (size_t i = 0; i < N; i++)
            ck_assert(y[i] == (float)ref_decode(r, q[i], &fin) * (1.0f / scale));
        /* dequantize(quantize(x)) under current scaling, in place */
        float z[N];
        for (size_t i = 0; i < N; i++)
            z[i] = x[i];
        ck_assert_float_eq(gs_k_fp8_round_current(r->f, z, z, N), scale);
        for (size_t i = 0; i < N; i++)
            ck_assert(z[i] == y[i]);
    }
    /* degenerate amax: scale 1 (Transformer Engine's compute_scale_from_amax) */
    ck_assert_float_eq(gs_k_fp8_current_scale(GS_FP8_E4M3, 0.0f), 1.0f);
    ck_assert_float_eq(gs_k_fp8_current_scale(GS_FP8_E4M3, INFINITY), 1.0f);
    ck_assert(isinf(3.4e38f * 10) && gs_k_fp8_current_scale(GS_FP8_E5M2, 1e-40f) == 3.40282347e38f);
}
END_TEST

/* ---- delayed scaling ------------------------------------------------------------------------- */

/* A cast at a given scale is the reference encoding of x scale, saturating beyond the largest
 * finite value, decoded times 1 / scale, and returns x's amax; the update rule is Transformer
 * Engine's: fp8 max / amax, the old scale for an amax of 0, infinity or NaN, FLT_MAX for an
 * amax so small the quotient overflows. */
START_TEST(test_delayed)
{
    enum { N = 1024 };
    static float x[N], y[N];
    uint64_t seed = 11;
    for (size_t i = 0; i < N; i++)
        x[i] = (float)((rnd(&seed) - 0.5) * 4.0);
    x[7] = 5.0f; /* the amax: beyond 448 / 100 and 57344 / 20000, so it saturates */
    const ref_fmt *fm[2] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++) {
        const ref_fmt *r = fm[k];
        double fmax = r->e4m3 ? 448.0 : 57344.0;
        float scale = r->e4m3 ? 100.0f : 20000.0f;
        ck_assert_float_eq(gs_k_fp8_round_scaled(r->f, scale, x, y, N), 5.0f);
        int fin;
        for (size_t i = 0; i < N; i++) {
            double want = ref_decode(r, ref_encode(r, (double)(x[i] * scale)), &fin) * (double)(1.0f / scale);
            ck_assert_msg(y[i] == (float)want, "%zu: %g -> %g, want %g", i, (double)x[i], (double)y[i], want);
        }
        ck_assert(y[7] == (float)(fmax * (double)(1.0f / scale))); /* saturated at the largest code */
        ck_assert_float_eq(gs_k_fp8_delayed_scale(r->f, 4.0f, 2.0f, 0), (float)(fmax / 4.0));
        ck_assert_float_eq(gs_k_fp8_delayed_scale(r->f, 4.0f, 2.0f, 3), (float)(fmax / 8.0 / 4.0)); /* margin 3 */
        ck_assert_float_eq(gs_k_fp8_delayed_scale(r->f, 0.0f, 2.0f, 0), 2.0f);
        ck_assert_float_eq(gs_k_fp8_delayed_scale(r->f, INFINITY, 2.0f, 0), 2.0f);
        ck_assert_float_eq(gs_k_fp8_delayed_scale(r->f, NAN, 2.0f, 0), 2.0f);
        ck_assert(gs_k_fp8_delayed_scale(r->f, 1e-40f, 2.0f, 0) == 3.40282347e38f);
    }
    x[9] = NAN;
    ck_assert(isnan(gs_k_fp8_round_scaled(GS_FP8_E4M3, 1.0f, x, y, N)));
}
END_TEST

/* An amax history of length 3 (Transformer Engine's delayed_scaling.cu kernel): over a sequence
 * of reduced amaxes, the max algorithm gives the largest of the last 3 non-zero ones (a 0, no
 * cast since, changes nothing; a NaN is passed over while it stays in the window), the
 * most-recent one the amax itself. The expected values are worked out by hand from that rule. */
START_TEST(test_amax_history)
{
    static const struct {
        float last, want_max;
    } seq[] = {
        {5.0f, 5.0f},    /* window 5 */
        {2.0f, 5.0f},    /* 5 2 */
        {0.0f, 0.0f},    /* nothing cast: no roll, the scale kept */
        {1.0f, 5.0f},    /* 5 2 1 */
        {3.0f, 3.0f},    /* 2 1 3: the 5 has left */
        {NAN, 3.0f},     /* 1 3 NaN */
        {0.5f, 3.0f},    /* 3 NaN 0.5 */
        {0.25f, 0.5f},   /* NaN 0.5 0.25 */
        {0.125f, 0.5f},  /* 0.5 0.25 0.125 */
    };
    float hmax[3] = {0}, hrec[3] = {0}, h1[1] = {0};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        float got = gs_k_fp8_amax_history(hmax, 3, seq[i].last, 1);
        ck_assert_msg(got == seq[i].want_max, "step %zu: max %g, want %g", i, (double)got, (double)seq[i].want_max);
        ck_assert(hmax[0] == 0.0f);
        float rec = gs_k_fp8_amax_history(hrec, 3, seq[i].last, 0);
        ck_assert_msg(rec == seq[i].last || (isnan(rec) && isnan(seq[i].last)), "step %zu: most recent %g", i,
                      (double)rec);
        /* length 1: the max of a window of one is the amax itself (a NaN passed over: 0, the scale kept) */
        float one = gs_k_fp8_amax_history(h1, 1, seq[i].last, 1);
        ck_assert_msg(one == (isnan(seq[i].last) ? 0.0f : seq[i].last), "step %zu: length 1 gives %g", i,
                      (double)one);
    }
    /* the scale after one more amax, 0.1: E4M3's 448 over the largest of 0.25 0.125 0.1 */
    ck_assert_float_eq(gs_k_fp8_delayed_scale(GS_FP8_E4M3, gs_k_fp8_amax_history(hmax, 3, 0.1f, 1), 1.0f, 0),
                       448.0f / 0.25f);
}
END_TEST

/* ---- scale blocks: a TP rank's shard cast at its own scale ------------------------------------ */

/* x [rows, cols] with rows cut by rc into rp parts and cols by cc into cp parts (rc NULL: rp 1):
 * block (bi, bj) copied out as the TP rank would hold it (its slice of every row segment, its
 * columns), cast with gs_k_fp8_round_current, and written back: what the ranks' casts give. */
static void shard_casts(gs_fp8_fmt f, const float *x, float *y, size_t rows, size_t cols, const gs_fp8_cut *rc,
                        const gs_fp8_cut *cc)
{
    size_t rp = rc ? rc->parts : 1, cp = cc ? cc->parts : 1;
    size_t nseg = rc && rc->nseg ? rc->nseg : 1;
    float *buf = malloc(rows * cols * sizeof *buf);
    size_t *ri = malloc(rows * sizeof *ri);
    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(ri);
    for (size_t bi = 0; bi < rp; bi++)
        for (size_t bj = 0; bj < cp; bj++) {
            /* the rank's rows: slice bi of each segment, in order */
            size_t nr = 0, base = 0;
            for (size_t g = 0; g < nseg; g++) {
                size_t sl = rc && rc->nseg ? rc->seg[g] : rows, w = sl / rp;
                for (size_t i = 0; i < w; i++)
                    ri[nr++] = base + bi * w + i;
                base += sl;
            }
            size_t wc = cols / cp, n = 0;
            for (size_t i = 0; i < nr; i++)
                for (size_t j = 0; j < wc; j++)
                    buf[n++] = x[ri[i] * cols + bj * wc + j];
            gs_k_fp8_round_current(f, buf, buf, n);
            n = 0;
            for (size_t i = 0; i < nr; i++)
                for (size_t j = 0; j < wc; j++)
                    y[ri[i] * cols + bj * wc + j] = buf[n++];
        }
    free(buf);
    free(ri);
}

START_TEST(test_tp_shard_blocks)
{
    enum { R = 64, C = 48 };
    static float x[R * C], got[R * C], want[R * C], whole[R * C];
    uint64_t seed = 11;
    /* QKV-like rows (Q 32, K 16, V 16), and magnitudes that differ by shard so that each shard's
     * scale differs from the whole tensor's */
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = (float)((rnd(&seed) - 0.5) * (1 + 9 * ((i % 32) >= 16)) * (1 + 99 * (j >= C / 2)));
    const gs_fp8_cut qkv2 = {2, 3, {32, 16, 16}, 0}, qkv4 = {4, 3, {32, 16, 16}, 0}, gated2 = {2, 2, {32, 32}, 0},
                     k2 = {2, 0, {0}, 0}, k4 = {4, 0, {0}, 0}, one = {1, 0, {0}, 0};
    const gs_fp8_cut *rows[] = {&qkv2, &qkv4, &gated2, NULL, NULL, &qkv2, &one};
    const gs_fp8_cut *cols[] = {NULL, NULL, NULL, &k2, &k4, &k2, &one};
    for (int f = 0; f < 2; f++)
        for (size_t c = 0; c < sizeof rows / sizeof rows[0]; c++) {
            ck_assert(gs_k_fp8_cut_ok(rows[c], R) && gs_k_fp8_cut_ok(cols[c], C));
            gs_k_fp8_round_blocks((gs_fp8_fmt)f, x, got, R, C, rows[c], cols[c]);
            shard_casts((gs_fp8_fmt)f, x, want, R, C, rows[c], cols[c]);
            gs_k_fp8_round_current((gs_fp8_fmt)f, x, whole, R * C);
            size_t differ = 0;
            for (size_t i = 0; i < R * C; i++) {
                ck_assert_msg(got[i] == want[i], "fmt %d cut %zu: element %zu: %a, the shard's cast %a", f, c, i,
                              (double)got[i], (double)want[i]);
                differ += got[i] != whole[i];
            }
            /* blocks of one are the whole tensor's cast; real cuts change some codes */
            if (c == 6)
                ck_assert_uint_eq(differ, 0);
            else
                ck_assert_msg(differ > 0, "fmt %d cut %zu: the blocks cast as the whole tensor", f, c);
        }
    /* block_of: slice p of every segment is block p */
    ck_assert_uint_eq(gs_k_fp8_block_of(&qkv2, R, 15), 0);
    ck_assert_uint_eq(gs_k_fp8_block_of(&qkv2, R, 16), 1);
    ck_assert_uint_eq(gs_k_fp8_block_of(&qkv2, R, 32), 0);
    ck_assert_uint_eq(gs_k_fp8_block_of(&qkv2, R, 40), 1);
    ck_assert_uint_eq(gs_k_fp8_block_of(&qkv2, R, 63), 1);
    /* cuts that do not slice evenly, or whose segments miss the dimension, are refused */
    const gs_fp8_cut odd = {3, 0, {0}, 0}, short_seg = {2, 2, {32, 16}, 0}, uneven = {4, 3, {32, 18, 14}, 0};
    ck_assert(!gs_k_fp8_cut_ok(&odd, C + 1));
    ck_assert(!gs_k_fp8_cut_ok(&short_seg, R));
    ck_assert(!gs_k_fp8_cut_ok(&uneven, R));
}
END_TEST

/* Context parallelism's token rows: a micro-batch of 2 sequences of 16 tokens over CP 2 puts
 * chunks of 4 on ranks 0, 1, 1, 0 and over CP 4 chunks of 2 on ranks 0, 1, 2, 3, 3, 2, 1, 0
 * (rank i holds chunks i and 2 cp - 1 - i). Each rank casts its rows at their own amax: the
 * zig-zag cut's blocks give bit for bit what casting each rank's gathered rows does, alone and
 * with a column cut beside it (a row-parallel GEMM's input under TP 2 as well). */
START_TEST(test_cp_token_blocks)
{
    enum { SEQ = 16, R = 2 * SEQ, C = 8 };
    static const int owner2[SEQ] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    static const int owner4[SEQ] = {0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 2, 2, 1, 1, 0, 0};
    static float x[R * C], got[R * C], want[R * C], whole[R * C], buf[R * C];
    uint64_t seed = 5;
    /* magnitudes that differ by chunk of 2 tokens, so that every rank's amax is its own */
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = (float)((rnd(&seed) - 0.5) * (1.0 + (double)((i % SEQ) / 2) * 7.0));
    const gs_fp8_cut z2 = {2, 0, {0}, SEQ}, z4 = {4, 0, {0}, SEQ}, k2 = {2, 0, {0}, 0};
    const gs_fp8_cut *cuts[] = {&z2, &z4, &z2};
    const gs_fp8_cut *cols[] = {NULL, NULL, &k2};
    const int *owners[] = {owner2, owner4, owner2};
    const int nranks[] = {2, 4, 2};
    for (int f = 0; f < 2; f++)
        for (int c = 0; c < 3; c++) {
            ck_assert(gs_k_fp8_cut_ok(cuts[c], R));
            for (size_t i = 0; i < R; i++)
                ck_assert_uint_eq(gs_k_fp8_block_of(cuts[c], R, i), (size_t)owners[c][i % SEQ]);
            gs_k_fp8_round_blocks((gs_fp8_fmt)f, x, got, R, C, cuts[c], cols[c]);
            /* the second way: each rank's rows (and column half) gathered, cast whole, put back */
            int halves = cols[c] ? 2 : 1;
            for (int p = 0; p < nranks[c]; p++)
                for (int h = 0; h < halves; h++) {
                    size_t n = 0, w = C / (size_t)halves;
                    for (size_t i = 0; i < R; i++)
                        if (owners[c][i % SEQ] == p)
                            for (size_t j = 0; j < w; j++)
                                buf[n++] = x[i * C + (size_t)h * w + j];
                    gs_k_fp8_round_current((gs_fp8_fmt)f, buf, buf, n);
                    n = 0;
                    for (size_t i = 0; i < R; i++)
                        if (owners[c][i % SEQ] == p)
                            for (size_t j = 0; j < w; j++)
                                want[i * C + (size_t)h * w + j] = buf[n++];
                }
            gs_k_fp8_round_current((gs_fp8_fmt)f, x, whole, R * C);
            size_t differ = 0;
            for (size_t i = 0; i < R * C; i++) {
                ck_assert_msg(got[i] == want[i], "fmt %d cut %d: element %zu: %a, the rank's cast %a", f, c, i,
                              (double)got[i], (double)want[i]);
                differ += got[i] != whole[i];
            }
            ck_assert_msg(differ > 0, "fmt %d cut %d: the ranks' blocks cast as the whole tensor", f, c);
        }
    /* whole sequences only, each in 2 x ranks equal chunks */
    const gs_fp8_cut z3 = {3, 0, {0}, SEQ};
    ck_assert(!gs_k_fp8_cut_ok(&z2, R + 4));
    ck_assert(!gs_k_fp8_cut_ok(&z3, R));
}
END_TEST

static Suite *fp8_suite(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("formats");
    tcase_add_test(tc, test_landmarks);
    tcase_add_test(tc, test_landmark_casts);
    suite_add_tcase(s, tc);
    tc = tcase_create("casts");
    tcase_add_test(tc, test_exhaustive_boundaries);
    tcase_add_test(tc, test_random);
    tcase_add_test(tc, test_scaled);
    tcase_add_test(tc, test_delayed);
    tcase_add_test(tc, test_amax_history);
    tcase_add_test(tc, test_tp_shard_blocks);
    tcase_add_test(tc, test_cp_token_blocks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fp8_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
