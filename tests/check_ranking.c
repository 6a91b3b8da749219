/* Check suite for the planner's ranking: wherever the published runs measure two configurations
 * of the same model on the same kind of cluster that differ in one choice (torch.compile or
 * eager, the TP degree, the GPU generation, the GPU count, FP8 or BF16), the simulated order
 * must agree with the measured one and the simulated ratio (the published metric of b over a)
 * must be within 15% of the measured ratio. The pairs are every such pair in scenarios/published (the list below was
 * drawn from the data by that rule); the expected ratios are the published numbers, not the
 * model's.
 *
 * Pairs where the model is known to miss (the order or the ratio) stay in the list with their
 * reason; doc/accuracy.md reports them with the physics that is missing. A known miss that starts
 * agreeing fails the suite, so that the list is kept true. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/expect.h"
#include "engine/mesh.h"
#include "engine/scenario.h"
#include "sim/fit.h"

typedef struct pair {
    const char *what, *a, *b; /* scenario files under scenarios/published */
    const char *miss;         /* NULL: the ratio must agree within 15%; else why it does not */
} pair;

static const pair pairs[] = {
    /* eager against torch.compile, same cluster, grid and batch (fms-fsdp, the PyTorch blogs) */
    {"compile", "ibmfsdp1-001.yaml", "fmsfsdp-c-001.yaml", NULL},
    {"compile", "ibmfsdp1-002.yaml", "fmsfsdp-c-002.yaml", NULL},
    {"compile", "ibmfsdp1-003.yaml", "fmsfsdp-c-003.yaml", NULL},
    {"compile", "ibmfsdp1-004.yaml", "fmsfsdp-c-004.yaml", NULL},
    {"compile", "ibmfsdp1-005.yaml", "fmsfsdp-c-005.yaml", NULL},
    {"compile", "ibmfsdp1-006.yaml", "fmsfsdp-c-006.yaml", NULL},
    {"compile", "ibmfsdp1-007.yaml", "fmsfsdp-c-007.yaml", NULL},
    {"compile", "ibmfsdp1-008.yaml", "fmsfsdp-c-008.yaml", NULL},
    {"compile", "ibmfsdp2-001.yaml", "ibmfsdp2-002.yaml", NULL},
    {"compile", "ibmfsdp2-003.yaml", "ibmfsdp2-004.yaml", NULL},
    {"compile", "ibmfsdp2-005.yaml", "ibmfsdp2-006.yaml", NULL},
    {"compile", "ibmfsdp2-007.yaml", "ibmfsdp2-008.yaml", NULL},
    /* the TP degree at a fixed GPU count (KempnerForge, H200) */
    {"tp", "kforge-mfu-002.yaml", "kforge-mfu-003.yaml", NULL},
    {"tp", "kforge-mfu-004.yaml", "kforge-mfu-005.yaml",
     "TP4 costs 35% measured, 25% simulated: PyTorch TP's own costs past the layout copies (DTensor "
     "redistributions, the output layer's gathers) are not modelled"},
    {"tp", "kforge-mfu-004.yaml", "kforge-mfu-006.yaml", "as above, TP2 x FSDP2"},
    {"tp", "kforge-mfu-008.yaml", "kforge-mfu-009.yaml", NULL},
    /* weak scaling: GPU count at a fixed per-GPU batch */
    {"gpus", "kforge-ws-001.yaml", "kforge-ws-005.yaml", NULL},
    {"gpus", "kforge-ws-007.yaml", "kforge-ws-011.yaml", NULL},
    {"gpus", "mpt-h100l-012.yaml", "mpt-h100l-010.yaml", NULL},
    {"gpus", "mpt-a100-40-021.yaml", "mpt-a100-40-017.yaml", NULL},
    /* the GPU generation: A100 80GB against H100, same model, sequence, GPUs and micro-batch */
    {"gpu", "mpt-a100-80-001.yaml", "mpt-h100-001.yaml", NULL},
    {"gpu", "mpt-a100-80-003.yaml", "mpt-h100-003.yaml", NULL},
    {"gpu", "mpt-a100-80-017.yaml", "mpt-h100-019.yaml", NULL},
    {"gpu", "mpt-a100-80-019.yaml", "mpt-h100-021.yaml", NULL},
    {"gpu", "mpt-a100-80-025.yaml", "mpt-h100-027.yaml", NULL},
    {"gpu", "mpt-a100-80-033.yaml", "mpt-h100-037.yaml", NULL},
    {"gpu", "mpt-a100-80-041.yaml", "mpt-h100-047.yaml", NULL},
    /* FP8 against BF16, same model, GPUs and layout (NVIDIA's dgxc-benchmarking, NeMo on H100) */
    {"fp8", "dgxc-001.yaml", "dgxc-002.yaml", NULL},
    {"fp8", "dgxc-003.yaml", "dgxc-004.yaml", NULL},
    {"fp8", "dgxc-005.yaml", "dgxc-006.yaml", NULL},
    /* ... Llama 3.1 8B, 70B and 405B with context parallelism 2 (NeMo 24.09) */
    {"fp8", "dgxc-007.yaml", "dgxc-008.yaml", NULL},
    {"fp8", "dgxc-009.yaml", "dgxc-010.yaml", NULL},
    {"fp8", "dgxc-012.yaml", "dgxc-013.yaml", NULL},
    /* torchtitan's December 2024 runs (500 W H100s): eager against torch.compile, Float8 against
     * BF16 under compile, on 8 and on 128 GPUs; 8 against 128 GPUs at the same local batch; TP's
     * AsyncTP against its plain collectives (70B, FSDP 32 x TP 8) */
    {"compile", "titan-001.yaml", "titan-002.yaml", NULL},
    {"compile", "titan-004.yaml", "titan-005.yaml", NULL},
    {"fp8", "titan-002.yaml", "titan-003.yaml", NULL},
    {"fp8", "titan-005.yaml", "titan-006.yaml", NULL},
    {"gpus", "titan-001.yaml", "titan-004.yaml", NULL},
    {"tp overlap", "titan-011.yaml", "titan-012.yaml", NULL},
    /* FP8 current scaling against MXFP8, same recipe otherwise (Megatron Bridge 25.11, the
     * parenthesized figures; B200 and GB200) */
    {"fp8 mx", "mbridge-003.yaml", "mbridge-010.yaml",
     "MXFP8 4% slower measured, 3% faster simulated: its block-scaled GEMMs are taken at the FP8 "
     "rate (no MXFP8 GEMM rate measured) and its casts, one kernel writing both copies, are cheaper "
     "than current scaling's amax pass and cast"},
    {"fp8 mx", "mbridge-004.yaml", "mbridge-011.yaml", "as above, 405B on 128 B200"},
    {"fp8 mx", "mbridge-006.yaml", "mbridge-012.yaml", "as above, GB200"},
};

#define NPAIRS (sizeof pairs / sizeof pairs[0])

typedef struct loaded {
    gs_scenario s;
    gs_mesh mesh;
    gs_expect e;
} loaded;

static void load(const char *name, loaded *l)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    gs_error err;
    int present = 0;
    gs_error_init(&err);
    snprintf(path, sizeof path, "%s/scenarios/published/%s", top ? top : ".", name);
    gs_diag warnings;
    gs_diag_init(&warnings);
    ck_assert_msg(gs_scenario_load_file(path, &l->s, &err) == GS_OK, "%s: %s", path, err.msg);
    ck_assert_msg(gs_scenario_mesh(&l->s, &l->mesh, &warnings, &err) == GS_OK, "%s: %s", path, err.msg);
    gs_diag_fini(&warnings);
    ck_assert_msg(gs_expect_load(path, &l->e, &present, &err) == GS_OK && present, "%s: expect", path);
}

START_TEST(test_ranking)
{
    loaded *L = calloc(2 * NPAIRS, sizeof *L);
    gs_fit_run *r = calloc(2 * NPAIRS, sizeof *r);
    gs_error err;
    gs_error_init(&err);
    ck_assert(L && r);
    for (size_t i = 0; i < NPAIRS; i++) {
        load(pairs[i].a, &L[2 * i]);
        load(pairs[i].b, &L[2 * i + 1]);
    }
    for (size_t i = 0; i < 2 * NPAIRS; i++) {
        r[i].s = &L[i].s;
        r[i].mesh = &L[i].mesh;
        r[i].e = &L[i].e;
    }
    ck_assert(gs_fit_simulate(r, 2 * NPAIRS, NULL, NULL, 0, NULL, &err) == GS_OK);
    int agree = 0, bad = 0;
    char why[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < NPAIRS; i++) {
        const gs_fit_run *a = &r[2 * i], *b = &r[2 * i + 1];
        ck_assert_msg(a->ok && b->ok, "%s / %s did not simulate", pairs[i].a, pairs[i].b);
        ck_assert_msg(a->e->metric == b->e->metric, "%s / %s: different metrics", pairs[i].a, pairs[i].b);
        double measured = b->e->value / a->e->value, simulated = b->predicted / a->predicted;
        int order = (measured > 1.0) == (simulated > 1.0) || fabs(measured - 1.0) < 0.02;
        int close = fabs(simulated / measured - 1.0) <= 0.15;
        int ok = pairs[i].miss ? !(order && close) : order && close;
        printf("%-8s %-22s %-22s measured %.3f simulated %.3f%s%s\n", pairs[i].what, pairs[i].a, pairs[i].b,
               measured, simulated, pairs[i].miss ? " (known miss)" : "", ok ? "" : "  <- FAILS");
        if (!ok && used < sizeof why) {
            int w = snprintf(why + used, sizeof why - used, "\n  %s / %s: measured %.3f, simulated %.3f: %s", pairs[i].a,
                             pairs[i].b, measured, simulated,
                             pairs[i].miss ? "a known miss now agrees within 15% (drop it from the list)"
                             : !order      ? "the order disagrees"
                                           : "more than 15% off");
            used += w > 0 ? (size_t)w : 0;
        }
        bad += !ok;
        agree += close;
    }
    printf("%d of %zu pairs within 15%%\n", agree, NPAIRS);
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d pair(s) fail:%s", bad, why);
    free(L);
    free(r);
}
END_TEST

static Suite *ranking_suite(void)
{
    Suite *s = suite_create("ranking");
    TCase *tc = tcase_create("published pairs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_ranking);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ranking_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
