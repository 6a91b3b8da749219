/* Check suite: sim/compute.c's GEMM model against GEMMs measured on one NVIDIA H200 (700 W,
 * driver 580.159.04, CUDA 13.0's cuBLASLt) by tests/gpu/gemm_sweep through
 * tests/gpu/device-check.sh on 2026-12-04:
 *   tests/data/h200-gemm-2026-12-04.csv: 57 shapes, each in bf16 and in FP8 (E4M3, bf16 out)
 *     with fast and with split accumulation, the heuristic's first algorithm timed in bursts of
 *     20 ms or more;
 *   tests/data/h200-gemm-sustained-2026-12-04.csv: two shapes held for 15 s per type
 *     (gemm_sweep --sustain), half-second windows; the GPU sat at its 700 W cap, the SM clock at
 *     1,425-1,590 MHz (1,980 MHz idle), per nvidia-smi's log of the run.
 * The measurements are independent of the model's constants (the MAMF figures of ref 1.2 and
 * the sustained fraction fitted on published runs), so each assertion could fail. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/hardware.h"
#include "sim/compute.h"

#define MAX_ROWS 256

typedef struct row {
    char type[24], name[48];
    double m, n, k, seconds; /* the heuristic's first algorithm, seconds per call */
} row;

static row rows[MAX_ROWS];
static int nrows;

static FILE *open_data(const char *name)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s", top ? top : ".", name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    return f;
}

static void load_sweep(void)
{
    FILE *f = open_data("h200-gemm-2026-12-04.csv");
    char line[512];
    ck_assert(fgets(line, sizeof line, f) != NULL); /* header */
    nrows = 0;
    while (fgets(line, sizeof line, f) && nrows < MAX_ROWS) {
        row *r = &rows[nrows];
        double best;
        ck_assert_msg(sscanf(line, "%23[^,],%47[^,],%lf,%lf,%lf,%lf,%lf", r->type, r->name, &r->m, &r->n, &r->k,
                             &r->seconds, &best) == 7,
                      "bad row: %s", line);
        nrows++;
    }
    fclose(f);
    ck_assert_int_eq(nrows, 171); /* 57 shapes x 3 types */
}

/* The H200 preset's model with FP8 on, as gs_compute_model_for_scenario sets it for a
 * Transformer Engine recipe. */
static gs_compute_model h200(void)
{
    const gs_gpu *g = gs_gpu_preset_find("h200");
    ck_assert(g != NULL);
    gs_compute_model m;
    gs_compute_model_init(&m, g, GS_PREC_BF16);
    m.fp8_peak_flops = g->peak_flops_fp8 * gs_gpu_clock_factor(g);
    m.fp8_gemm_mamf = g->gemm_efficiency_fp8;
    m.fp8_gemm_efficiency = g->gemm_efficiency_fp8 * m.gemm_efficiency / m.gemm_mamf;
    return m;
}

static double model_s(const gs_compute_model *m, const char *type, double M, double N, double K)
{
    double flop = 2.0 * M * N * K;
    if (strcmp(type, "bf16") == 0)
        return flop / (m->peak_flops * gs_gemm_efficiency(m, (uint64_t)M, (uint64_t)N, (uint64_t)K, 1));
    return flop / (m->fp8_peak_flops * m->fp8_gemm_efficiency *
                   gs_fp8_gemm_shape(m, (uint64_t)M, (uint64_t)N, (uint64_t)K, 1));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Transformer Engine runs a linear layer's forward GEMM with fast accumulation and its two
 * backward GEMMs with split accumulation (transformer_engine/pytorch/module/base.py:
 * _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True). Over a layer's three GEMMs of
 * equal FLOPs, the FP8 speed-up over bf16 is 3 / r_bf16 / (1 / r_fast + 2 / r_split). Measured at
 * the power cap (the last half-second window of each sustained run): 1.842 for Llama 3 8B's
 * gate+up GEMM, 1.822 for Llama 3 70B's QKV under TP 8. The model's FP8 rate is the MAMF ratio
 * of ref 1.2 (1453.4 of 1979 against 794.5 of 989) with the same sustained fraction: within 5%
 * of each. (With fast accumulation throughout the measured speed-up would be 1.92 on both.) */
START_TEST(test_fp8_speedup_at_the_power_cap)
{
    FILE *f = open_data("h200-gemm-sustained-2026-12-04.csv");
    char line[256];
    double rate[2][3] = {{0}}; /* [shape][bf16, fast, split], TFLOP/s of the last window */
    const char *shapes[2] = {"l8b_up", "l70b_tp8_qkv"};
    const double dims[2][3] = {{8192, 28672, 4096}, {8192, 1280, 8192}};
    ck_assert(fgets(line, sizeof line, f) != NULL);
    while (fgets(line, sizeof line, f)) {
        char type[24], name[48];
        double first, last;
        ck_assert(sscanf(line, "%23[^,],%47[^,],%lf,%lf", type, name, &first, &last) == 4);
        for (int s = 0; s < 2; s++) {
            if (strcmp(name, shapes[s]) != 0)
                continue;
            int t = strcmp(type, "bf16") == 0 ? 0 : strcmp(type, "fp8_fast_accum") == 0 ? 1 : 2;
            rate[s][t] = last;
        }
    }
    fclose(f);
    gs_compute_model m = h200();
    for (int s = 0; s < 2; s++) {
        ck_assert(rate[s][0] > 0 && rate[s][1] > 0 && rate[s][2] > 0);
        double measured = 3.0 / rate[s][0] / (1.0 / rate[s][1] + 2.0 / rate[s][2]);
        double modelled = model_s(&m, "bf16", dims[s][0], dims[s][1], dims[s][2]) /
                          model_s(&m, "fp8", dims[s][0], dims[s][1], dims[s][2]);
        ck_assert_msg(fabs(modelled / measured - 1.0) < 0.05, "%s: FP8 over bf16 modelled %.3f, measured %.3f",
                      shapes[s], modelled, measured);
    }
}
END_TEST

/* The shape model explains part of how the rate varies from shape to shape: over the rows that
 * take 20 us or more (below that the kernel's fixed time, which the event's launch term carries,
 * dominates), the spread of log(model / measured) around its mean is smaller than the spread of
 * the measured log rates themselves (what a single rate for every shape would leave). Measured
 * 2026-12-04: bf16 0.102 against 0.114, FP8 fast 0.108 against 0.148, FP8 split 0.150 against
 * 0.195 (rms, natural log). */
START_TEST(test_shape_model_explains_the_spread)
{
    load_sweep();
    gs_compute_model m = h200();
    static const char *types[] = {"bf16", "fp8_fast_accum", "fp8_split_accum"};
    for (size_t t = 0; t < 3; t++) {
        double res[MAX_ROWS], lr[MAX_ROWS];
        int n = 0;
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            if (strcmp(r->type, types[t]) != 0 || r->seconds < 20e-6)
                continue;
            res[n] = log(model_s(&m, r->type, r->m, r->n, r->k) / r->seconds);
            lr[n] = log(2.0 * r->m * r->n * r->k / r->seconds);
            n++;
        }
        ck_assert_int_ge(n, 40);
        double mr = 0, ml = 0, sr = 0, sl = 0;
        for (int i = 0; i < n; i++)
            mr += res[i] / n, ml += lr[i] / n;
        for (int i = 0; i < n; i++)
            sr += (res[i] - mr) * (res[i] - mr) / n, sl += (lr[i] - ml) * (lr[i] - ml) / n;
        ck_assert_msg(sqrt(sr) < sqrt(sl), "%s: model residual %.3f, measured spread %.3f", types[t], sqrt(sr),
                      sqrt(sl));
    }
}
END_TEST

/* The model's bf16 rate is a step's sustained one (the MAMF ratio times the fraction fitted on
 * published runs, 0.83): slower than one GPU's bursts, by less than the clock falls at the cap.
 * Over the bf16 shapes of 0.1 TFLOP or more, the median model time over the measured one lies in
 * [1.0, 1.15] (measured 2026-12-04: 1.064; the sustained runs ran 3.6% and 11% below their first
 * window). */
START_TEST(test_bf16_median_is_sustained)
{
    load_sweep();
    gs_compute_model m = h200();
    double ratio[MAX_ROWS];
    int n = 0;
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        if (strcmp(r->type, "bf16") != 0 || 2.0 * r->m * r->n * r->k < 1e11)
            continue;
        ratio[n++] = model_s(&m, r->type, r->m, r->n, r->k) / r->seconds;
    }
    ck_assert_int_ge(n, 30);
    qsort(ratio, (size_t)n, sizeof ratio[0], cmp_double);
    double med = n % 2 ? ratio[n / 2] : 0.5 * (ratio[n / 2 - 1] + ratio[n / 2]);
    ck_assert_msg(med >= 1.0 && med <= 1.15, "median model / measured %.3f over %d shapes", med, n);
}
END_TEST

/* A tile's fixed cost outside its K loop is a time: at the FP8 rate the mainloop covers the same
 * K in about half of it, so short-K FP8 GEMMs lose more to it than bf16 ones
 * (gs_fp8_gemm_shape). On the FP8 shapes with K <= 1024 and 0.03 TFLOP or more (K = 256 to 1024
 * at 8192 x 8192, GPT-2's head, Llama 3 70B's output projection under TP 8), timed with fast
 * accumulation, the model with the cost as a time is closer to the measurement than the bf16
 * tile model's shape factor applied unchanged, on every one: the latter left them 7-29% fast. */
START_TEST(test_fp8_per_tile_cost_is_a_time)
{
    load_sweep();
    gs_compute_model m = h200();
    int n = 0;
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        if (strcmp(r->type, "fp8_fast_accum") != 0 || r->k > 1024 || 2.0 * r->m * r->n * r->k < 3e10)
            continue;
        double flop = 2.0 * r->m * r->n * r->k;
        double unchanged = flop / (m.fp8_peak_flops * m.fp8_gemm_efficiency *
                                   gs_gemm_efficiency(&m, (uint64_t)r->m, (uint64_t)r->n, (uint64_t)r->k, 1) /
                                   m.gemm_efficiency);
        double timed = model_s(&m, r->type, r->m, r->n, r->k);
        ck_assert_msg(fabs(log(timed / r->seconds)) < fabs(log(unchanged / r->seconds)),
                      "%s: model %.3g s (bf16 shape factor %.3g s), measured %.3g s", r->name, timed, unchanged,
                      r->seconds);
        ck_assert_msg(timed > unchanged, "%s: the FP8 per-tile cost made the GEMM faster", r->name);
        n++;
    }
    ck_assert_int_ge(n, 5);
}
END_TEST

static Suite *gemm_measured_suite(void)
{
    Suite *s = suite_create("gemm_measured");
    TCase *tc = tcase_create("h200");
    tcase_add_test(tc, test_fp8_speedup_at_the_power_cap);
    tcase_add_test(tc, test_shape_model_explains_the_spread);
    tcase_add_test(tc, test_bf16_median_is_sustained);
    tcase_add_test(tc, test_fp8_per_tile_cost_is_a_time);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gemm_measured_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
