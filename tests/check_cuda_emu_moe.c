/* Check suite for the cuda driver's mixture-of-experts kernels (kernels/cuda/moe.cu) without a
 * GPU: the device code (kernels/cuda/moe_body.h) compiled as C and run on the CPU emulator of
 * CUDA's execution model (tests/cuda_emu.h) with the launchers' grids, against the host driver's
 * kernels (kernels/host/moe.c, whose semantics tests/check_kernels.c and exec's contract check).
 * Every output must be the host's bits: the top-k's choices (ties to the lower expert) and
 * weights, the softmax's gradient, the gathered rows, the scatter-add's sums (a token's k copies
 * added into one row in the host's order: fp32 addition is not associative, and the test shows
 * that the reversed order gives other bits on these inputs, so an order change would be seen)
 * and the dot products. Outputs carry poisoned guard floats after them: nothing may be written
 * past them. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host/kernels.h"
#include "tests/cuda_emu.h"

#include "kernels/cuda/moe_body.h"

#define GUARD 16
#define POISON 0x7fc0deadu

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* n floats and GUARD poisoned ones after them. */
static float *poisoned(size_t n)
{
    float *v = malloc((n + GUARD) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    uint32_t p = POISON;
    for (size_t i = 0; i < n + GUARD; i++)
        memcpy(&v[i], &p, sizeof p);
    return v;
}

static float *randv(size_t n, float scale)
{
    float *v = poisoned(n);
    for (size_t i = 0; i < n; i++)
        v[i] = urand() * scale;
    return v;
}

/* got[0..n) has ref's bits and its guard is untouched. */
static void same_bits(const char *what, const float *got, const float *ref, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bits(got[i]) == bits(ref[i]), "%s[%zu]: %a on the device, %a on the host", what, i,
                      (double)got[i], (double)ref[i]);
    for (size_t i = n; i < n + GUARD; i++)
        ck_assert_msg(bits(got[i]) == POISON, "%s: wrote element %zu, past its %zu", what, i, n);
}

/* ---- launches ---- */

typedef struct moe_args {
    const float *a, *b, *w;
    const int32_t *idx;
    int32_t *idx_out;
    float *out, *out2;
    size_t t, experts, k, n, h, stride;
} moe_args;

static void topk_fwd_thread(const void *p)
{
    const moe_args *a = p;
    gs_moe_topk_fwd_kernel(a->a, a->t, a->experts, a->k, a->idx_out, a->out);
}
static void topk_bwd_thread(const void *p)
{
    const moe_args *a = p;
    gs_moe_topk_bwd_kernel(a->a, a->b, a->idx, a->t, a->experts, a->k, a->out);
}
static void gather_thread(const void *p)
{
    const moe_args *a = p;
    gs_rows_gather_kernel(a->a, a->idx, a->w, a->n, a->h, a->out, a->stride);
}
static void scatter_thread(const void *p)
{
    const moe_args *a = p;
    gs_rows_scatter_add_kernel(a->a, a->idx, a->w, a->n, a->h, a->out);
}
static void dot_thread(const void *p)
{
    const moe_args *a = p;
    gs_rows_dot_kernel(a->a, a->idx, a->b, a->n, a->h, a->out);
}

static void launch(size_t blocks, gs_emu_thread_fn fn, const moe_args *a)
{
    char err[200];
    ck_assert_msg(gs_emu_launch((unsigned)blocks, 1, 1, GS_MOE_THREADS, 0, fn, a, err, sizeof err) == 0, "%s", err);
}

/* ---- tests ---- */

START_TEST(topk_is_the_hosts)
{
    const size_t t = 301, E = 8; /* 3 blocks, the last partial */
    for (size_t k = 1; k <= 3; k++) {
        float *logits = randv(t * E, 4.0f);
        for (size_t r = 0; r < t; r += 5) /* ties: equal logits, the lower expert first */
            logits[r * E + 6] = logits[r * E + 2];
        for (size_t e = 0; e < E; e++) /* a row of equal logits */
            logits[7 * E + e] = 0.5f;
        int32_t *idx = malloc(t * k * sizeof *idx), *ridx = malloc(t * k * sizeof *ridx);
        float *probs = poisoned(t * k), *rprobs = poisoned(t * k);
        ck_assert(idx && ridx);
        moe_args a = {.a = logits, .idx_out = idx, .out = probs, .t = t, .experts = E, .k = k};
        launch(gs_moe_blocks(t), topk_fwd_thread, &a);
        gs_k_moe_topk_fwd(logits, t, E, k, ridx, rprobs);
        ck_assert_msg(memcmp(idx, ridx, t * k * sizeof *idx) == 0, "top-%zu: other experts chosen", k);
        same_bits("probs", probs, rprobs, t * k);
        ck_assert_int_eq(idx[7 * k], 0); /* all equal: expert 0 first */

        float *dprobs = randv(t * k, 1.0f), *dl = poisoned(t * E), *rdl = poisoned(t * E);
        moe_args b = {.a = probs, .b = dprobs, .idx = idx, .out = dl, .t = t, .experts = E, .k = k};
        launch(gs_moe_blocks(t), topk_bwd_thread, &b);
        gs_k_moe_topk_bwd(rprobs, dprobs, ridx, t, E, k, rdl);
        same_bits("dlogits", dl, rdl, t * E);
        free(logits), free(idx), free(ridx), free(probs), free(rprobs), free(dprobs), free(dl), free(rdl);
    }
}
END_TEST

/* n routed rows of src's `rows` tokens, each token routed k times (its copies spread over the
 * list, as a permutation sorted by expert leaves them). */
static int32_t *routing(size_t rows, size_t k)
{
    int32_t *idx = malloc(rows * k * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    for (size_t i = 0; i < rows * k; i++)
        idx[i] = (int32_t)((i * 7 + i / rows) % rows);
    return idx;
}

START_TEST(row_moves_are_the_hosts)
{
    const size_t rows = 40, k = 4, n = rows * k, h = 133; /* h: 2 blocks of columns, one partial */
    int32_t *idx = routing(rows, k);
    float *src = randv(rows * h, 2.0f), *w = randv(n, 1.0f);
    for (int weighted = 0; weighted < 2; weighted++) {
        const float *wp = weighted ? w : NULL;
        /* gather: the launcher's grid, then 3 blocks looping over the 21,280 elements */
        for (size_t blocks = 0; blocks < 2; blocks++) {
            size_t b = blocks ? 3 : gs_rows_gather_blocks(n, h);
            float *dst = poisoned(n * h), *ref = poisoned(n * h);
            moe_args a = {.a = src, .idx = idx, .w = wp, .out = dst, .n = n, .h = h, .stride = b * GS_MOE_THREADS};
            launch(b, gather_thread, &a);
            gs_k_rows_gather(src, idx, wp, n, h, ref);
            same_bits(weighted ? "weighted gather" : "gather", dst, ref, n * h);
            free(dst), free(ref);
        }
        /* scatter-add: n rows back into the rows tokens, k copies each, onto nonzero rows */
        float *rowsv = randv(n * h, 1.0f), *dst = randv(rows * h, 1.0f), *ref = poisoned(rows * h);
        memcpy(ref, dst, rows * h * sizeof *ref);
        float *rev = poisoned(rows * h);
        memcpy(rev, dst, rows * h * sizeof *rev);
        moe_args a = {.a = rowsv, .idx = idx, .w = wp, .out = dst, .n = n, .h = h};
        launch(gs_moe_blocks(h), scatter_thread, &a);
        gs_k_rows_scatter_add(rowsv, idx, wp, n, h, ref);
        same_bits(weighted ? "weighted scatter-add" : "scatter-add", dst, ref, rows * h);
        /* the same sums in reverse row order: other bits somewhere, so the comparison above would
         * have seen a kernel that adds in another order */
        size_t differ = 0;
        for (size_t i = n; i-- > 0;)
            for (size_t c = 0; c < h; c++)
                rev[(size_t)idx[i] * h + c] += wp ? wp[i] * rowsv[i * h + c] : rowsv[i * h + c];
        for (size_t i = 0; i < rows * h; i++)
            differ += bits(rev[i]) != bits(ref[i]);
        ck_assert_msg(differ > 0, "the reversed order gives the same bits: the test could not see an order change");
        free(rowsv), free(dst), free(ref), free(rev);
    }
    /* dot products of each routed row with a row of its own */
    float *b = randv(n * h, 1.0f), *out = poisoned(n), *ref = poisoned(n);
    moe_args a = {.a = src, .idx = idx, .b = b, .out = out, .n = n, .h = h};
    launch(gs_moe_blocks(n), dot_thread, &a);
    gs_k_rows_dot(src, idx, b, n, h, ref);
    same_bits("rows_dot", out, ref, n);
    free(b), free(out), free(ref), free(idx), free(src), free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_emu_moe");
    TCase *tc = tcase_create("moe");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, topk_is_the_hosts);
    tcase_add_test(tc, row_moves_are_the_hosts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
