/* Check suite for the size limits across modules: 10^6 GPUs, 10^15 parameters, 10^6
 * micro-batches and 64-bit byte counts either work (ledger, class-path schedule and sim) or are
 * refused with GS_ERR_OVERFLOW and a message saying where and why; the class path's memory does
 * not grow with the data-parallel degree. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/model.h"
#include "engine/schedule.h"
#include "sim/sim.h"

/* ------------------------------------------------------------------------ helpers ---- */

static void load_mesh(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "t.yaml", s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, &w, &err) == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
}

/* Simulates on the class path and returns the run's sizes. */
static void sim_stats(const char *yaml, gs_backend_stats *stats, gs_report *rep)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load_mesh(yaml, &s, &m);
    gs_backend_opts bo = {0, NULL, stats, NULL};
    ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
}

/* A 10^6-GPU job: 125,000 DGX H100 nodes as TP 8 x PP 8 x DP 15,625, one micro-batch each. */
#define MILLION_GPUS                                                                              \
    "model: llama3.1-405b\n"                                                                      \
    "cluster: {preset: dgx-h100, nodes: 125000}\n"                                                \
    "grid: {tp: 8, pp: 8, dp: 15625}\n" /* line 3, { at column 7 */                               \
    "strategy: {sharding: no_shard, recompute: full}\n"                                           \
    "batch: {global: 15625, micro: 1}\n"

/* ------------------------------------------------------------------------- tests ---- */

/* 10^6 GPUs: the ledger, the class-path schedule (one rank list per stage: 8) and the sim all
 * work; --exact would hold 10^6 rank lists of about 400 events and is refused at grid:. */
START_TEST(limits_million_gpus)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load_mesh(MILLION_GPUS, &s, &m);
    ck_assert_uint_eq(m.world, 1000000);
    gs_ledger *l = NULL;
    ck_assert_msg(gs_ledger_create(&s, &m, &l, &err) == GS_OK, "%s", err.msg);
    /* no_shard: every rank holds its TP x PP slice of the 16 B/param states: 16 x params / 64. */
    double slice = 16.0 * (double)gs_model_params(&s.model) / 64.0;
    ck_assert_msg(fabs((double)l->per_rank_state_bytes - slice) < 0.05 * slice, "states %llu B vs %.4g B",
                  (unsigned long long)l->per_rank_state_bytes, slice);
    gs_ledger_destroy(l);

    gs_backend_stats st;
    gs_report rep;
    sim_stats(MILLION_GPUS, &st, &rep);
    ck_assert_uint_eq(st.rank_lists, 8);
    ck_assert_msg(rep.step_time_s > 0 && isfinite(rep.step_time_s), "step %g s", rep.step_time_s);
    gs_report_fini(&rep);

    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_build(&s, &m, 1, &sch, &err), GS_ERR_OVERFLOW);
    ck_assert_ptr_null(sch);
    ck_assert_msg(strncmp(err.msg, "t.yaml:3:7: grid: the schedule is too large", 43) == 0, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "1000000 rank lists") != NULL, "%s", err.msg);
}
END_TEST

/* 10^6 micro-batches: the ledger works (its size does not depend on them); a schedule would
 * hold 10^6 x (32 + 2) x 16 = 5.4e8 events and is refused at batch:, before any is built. */
START_TEST(limits_million_microbatches)
{
    static const char yaml[] = "model: llama2-7b\n"
                               "cluster: dgx-a100-80g\n"
                               "grid: {tp: 8}\n"
                               "batch: {global: 1e6, micro: 1}\n"; /* line 4, { at column 8 */
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load_mesh(yaml, &s, &m);
    ck_assert_uint_eq(gs_scenario_microbatches(&s), 1000000);
    gs_ledger *l = NULL;
    ck_assert_msg(gs_ledger_create(&s, &m, &l, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(l->microbatches, 1000000);
    gs_ledger_destroy(l);
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_build(&s, &m, 0, &sch, &err), GS_ERR_OVERFLOW);
    ck_assert_msg(strncmp(err.msg, "t.yaml:4:8: batch: the schedule is too large", 44) == 0, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "1000000 micro-batches") != NULL, "%s", err.msg);
    /* The check itself: 10^4 micro-batches x 34 x 16 = 5.4e6 events pass. */
    ck_assert_int_eq(gs_scenario_check_schedule_size(&s, &m, 10000, 0, &err), GS_OK);
    /* A product that overflows 64 bits is refused, not wrapped to a small number. */
    ck_assert_int_eq(gs_scenario_check_schedule_size(&s, &m, UINT64_MAX / 4, 0, &err), GS_ERR_OVERFLOW);
}
END_TEST

/* 10^15 parameters: 12 h^2 L = 12 x 262144^2 x 1212 = 9.995e14 in the layers (plus embeddings);
 * the states, 16 B each = 1.6e16 B, fit in 64 bits and the ledger's totals agree with a double
 * computation of the same product. */
START_TEST(limits_petaparameters)
{
    static const char yaml[] = "model: {layers: 1212, hidden: 262144, heads: 2048, seq: 2048, vocab: 32000}\n"
                               "cluster: {preset: dgx-h100, nodes: 124937}\n"
                               "grid: {tp: 8, pp: 101, dp: 1237}\n"
                               "strategy: {sharding: full_shard, recompute: full}\n"
                               "batch: {global: 1237, micro: 1}\n";
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load_mesh(yaml, &s, &m);
    double params = (double)gs_model_params(&s.model);
    double hand = 12.0 * 262144.0 * 262144.0 * 1212.0;
    ck_assert_msg(params > hand && params < 1.002 * hand, "params %.6g vs 12 h^2 L = %.6g", params, hand);
    gs_ledger *l = NULL;
    ck_assert_msg(gs_ledger_create(&s, &m, &l, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(l->params, gs_model_params(&s.model));
    ck_assert_msg(fabs((double)l->states_total_bytes - 16.0 * params) <= 16.0, "states %llu B",
                  (unsigned long long)l->states_total_bytes);
    gs_ledger_destroy(l);
}
END_TEST

/* Byte counts past 2^64: 10^6 micro-batches of 10^6 sequences x 4096 x 65536 x 2 B = 5.4e14 B
 * sent per boundary each, 5.4e20 B per step > 1.8e19: the ledger refuses instead of wrapping. */
START_TEST(limits_byte_overflow)
{
    static const char yaml[] = "model: {layers: 2, hidden: 65536, heads: 512, seq: 4096, vocab: 32000}\n"
                               "cluster: {preset: dgx-h100, nodes: 2}\n"
                               "grid: {tp: 8, pp: 2}\n"
                               "batch: {global: 1e12, micro: 1e6}\n";
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load_mesh(yaml, &s, &m);
    gs_ledger *l = NULL;
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_ERR_OVERFLOW);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(err.msg, "overflow") != NULL, "%s", err.msg);
}
END_TEST

/* The class path's size does not grow with DP: the same model and pipeline on 1,024 and on
 * 16,384 GPUs (DP 64 vs 1024, 4 micro-batches each) plays the same 2 rank lists, the same
 * events and the same queue; only the collectives' groups are larger. */
START_TEST(limits_class_path_bounded)
{
    static const char small[] = "model: llama2-7b\n"
                                "cluster: {preset: dgx-h100, nodes: 128}\n"
                                "grid: {tp: 8, pp: 2, dp: 64}\n"
                                "batch: {global: 256, micro: 1}\n";
    static const char large[] = "model: llama2-7b\n"
                                "cluster: {preset: dgx-h100, nodes: 2048}\n"
                                "grid: {tp: 8, pp: 2, dp: 1024}\n"
                                "batch: {global: 4096, micro: 1}\n";
    gs_backend_stats a, b;
    gs_report ra, rb;
    sim_stats(small, &a, &ra);
    sim_stats(large, &b, &rb);
    ck_assert_uint_eq(a.rank_lists, 2);
    ck_assert_uint_eq(b.rank_lists, 2);
    ck_assert_uint_eq(a.events, b.events);
    ck_assert_uint_eq(a.tensors, b.tensors);
    ck_assert_uint_eq(a.queue_peak, b.queue_peak);
    ck_assert_uint_eq(a.queue_bytes, b.queue_bytes);
    ck_assert_uint_eq(ra.events, a.events);
    /* a larger DP ring takes longer for the same bytes per rank: the step cannot get shorter */
    ck_assert_msg(rb.step_time_s >= ra.step_time_s, "%g s on 16K GPUs vs %g s on 1K", rb.step_time_s,
                  ra.step_time_s);
    gs_report_fini(&ra);
    gs_report_fini(&rb);
}
END_TEST

/* ------------------------------------------------------------------------- suite ---- */

static Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, limits_million_gpus);
    tcase_add_test(tc, limits_million_microbatches);
    tcase_add_test(tc, limits_petaparameters);
    tcase_add_test(tc, limits_byte_overflow);
    tcase_add_test(tc, limits_class_path_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(limits_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
