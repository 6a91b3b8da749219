/* Check suite for multi-token prediction modules (model.mtp_layers, Megatron-Core's
 * --mtp-num-layers): the refusals, the last stage's parameters, the schedule's MTP ops (eh_proj's
 * FLOPs, the extra head, the TP exchanges, the embedding's gradient exchange) against hand
 * counts, Megatron-LM's flag both ways, and the simulated cost on a pipeline. Expected values are
 * hand arithmetic written beside each assertion. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/partition.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

/* A 4-layer model: hidden 256, 8 heads of 32 (2 KV heads), SwiGLU of 512, vocab 1000, sequence
 * 256, untied embeddings, on one 4-GPU node. */
#define TINY                                                                                               \
    "model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, " \
    "norm: rmsnorm, tied_embeddings: false%s}\ncluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\n"

static void load(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, &w, &err) == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
}

static void load_fails(const char *yaml, const char *needle)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_status st = gs_scenario_load_string(yaml, strlen(yaml), "test", &s, &err);
    if (st == GS_OK)
        st = gs_scenario_mesh(&s, &m, NULL, &err);
    ck_assert_int_eq(st, GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, needle), "%s", err.msg);
}

START_TEST(test_mtp_refusals)
{
    char y[1024];
    snprintf(y, sizeof y, TINY "grid: {dp: 1, pp: 2, tp: 2}\nstrategy: {pipeline: interleaved, virtual_stages: 2}\n",
             ", mtp_layers: 1");
    load_fails(y, "interleaved pipeline");
    snprintf(y, sizeof y, TINY "grid: {dp: 4}\n", ", mtp_layers: 17");
    load_fails(y, "expected 0 to 16");
    load_fails("model: {preset: llama2-7b, params: 7e9, mtp_layers: 1}\ncluster: {preset: dgx-h100, nodes: 1}\n"
               "grid: {dp: 8}\n", "nominal parameter count");
}
END_TEST

/* TINY on pp 2 x tp 2: the last stage holds its 2 decoder blocks and the MTP block (3 blocks),
 * and its head grows by the module's enorm, hnorm and final norm (3 x 256), eh_proj's
 * 2 x 256 x 256 / 2 = 65,536, and the stage's copy of the word embedding, 1000 / 2 x 256 =
 * 128,000: 194,304 parameters. The first stage is unchanged. */
START_TEST(test_mtp_partition)
{
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_partition a1, b1, a0, b0;
    snprintf(y, sizeof y, TINY "grid: {dp: 1, pp: 2, tp: 2}\nstrategy: {sequence_parallel: true}\n", ", mtp_layers: 1");
    load(y, &s, &m);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 1, &a1, &err), GS_OK);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &a0, &err), GS_OK);
    snprintf(y, sizeof y, TINY "grid: {dp: 1, pp: 2, tp: 2}\nstrategy: {sequence_parallel: true}\n", "");
    load(y, &s, &m);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 1, &b1, &err), GS_OK);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &b0, &err), GS_OK);
    ck_assert_uint_eq(a1.layers, 3);
    ck_assert_uint_eq(b1.layers, 2);
    ck_assert_uint_eq(a1.head_params - b1.head_params, 194304);
    ck_assert_uint_eq(a1.params - b1.params, 194304 + b1.layer_params);
    ck_assert_uint_eq(a0.params, b0.params);
    gs_partition_fini(&a1);
    gs_partition_fini(&b1);
    gs_partition_fini(&a0);
    gs_partition_fini(&b0);
}
END_TEST

/* Events of rank list i with role and phase: their count, bytes sent and FLOPs. */
static size_t role_events(const gs_schedule *sch, size_t i, int role, int phase, uint64_t *sent, double *flops)
{
    size_t n = 0;
    *sent = 0;
    *flops = 0.0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role != role || (phase >= 0 && e->phase != phase))
            continue;
        n++;
        *sent += gs_event_sent_bytes(e);
        *flops += e->flops;
    }
    return n;
}

/* TINY on pp 2 x tp 2 with sequence parallelism, 4 micro-batches of 1 sequence (256 tokens),
 * one MTP module. On the last stage, per micro-batch: eh_proj forward 2 x 256 x 128 x 512 =
 * 33,554,432 FLOPs (backward twice); the output head twice (main and MTP) each way; the module's
 * own TP exchanges, with X = 256 x 256 x 2 B = 131,072 B and each all-gather or reduce-scatter of
 * Y sending (2-1) x Y/2: the embedding's reduce-scatter (65,536), eh_proj's input gather of 2X
 * (131,072) and output gather (65,536), backward the split's gather (65,536), the input
 * gradient's reduce-scatter (131,072) and the embedding's gather (65,536): 524,288 B. The
 * schedule validates against the ledgers (gs_schedule_validate: the tp line and the stage's
 * memory), and the first and last stages exchange the word embedding's gradient once. */
START_TEST(test_mtp_schedule)
{
    char y[1024];
    snprintf(y, sizeof y, TINY "grid: {dp: 1, pp: 2, tp: 2}\nstrategy: {sequence_parallel: true, recompute: none}\n"
             "batch: {global: 4, micro: 1}\n", ", mtp_layers: 1");
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load(y, &s, &m);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, &s, &err) == GS_OK, "validate: %s", err.msg);
    size_t last = SIZE_MAX, first = SIZE_MAX;
    for (size_t i = 0; i < sch->nranks; i++)
        if (sch->ranks[i].stage == 1)
            last = i;
        else
            first = i;
    ck_assert(last != SIZE_MAX && first != SIZE_MAX);
    uint64_t sent;
    double f;
    ck_assert_uint_eq(role_events(sch, last, GS_ROLE_MTP_PROJ, GS_PHASE_FWD, &sent, &f), 4);
    ck_assert_double_eq(f, 4.0 * 33554432.0);
    role_events(sch, last, GS_ROLE_MTP_PROJ, GS_PHASE_BWD, &sent, &f);
    ck_assert_double_eq(f, 4.0 * 2.0 * 33554432.0);
    ck_assert_uint_eq(role_events(sch, last, GS_ROLE_HEAD, GS_PHASE_FWD, &sent, &f), 8);
    ck_assert_uint_eq(role_events(sch, last, GS_ROLE_LOSS, GS_PHASE_BWD, &sent, &f), 8);
    role_events(sch, last, GS_ROLE_TP_MTP, -1, &sent, &f);
    ck_assert_uint_eq(sent, 4ull * 524288);
    ck_assert_uint_eq(role_events(sch, last, GS_ROLE_TIED_SEND, -1, &sent, &f), 1);
    ck_assert_uint_eq(role_events(sch, first, GS_ROLE_TIED_SEND, -1, &sent, &f), 1);
    ck_assert_uint_eq(role_events(sch, first, GS_ROLE_MTP_PROJ, -1, &sent, &f), 0);
    gs_schedule_destroy(sch);
}
END_TEST

/* DeepSeek-V3's flags with --mtp-num-layers 1: read as mtp_layers 1, emitted, read back. */
START_TEST(test_mtp_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "deepseek-v3";
    o.nodes = 16;
    gs_error_init(&err);
    gs_diag_init(&ig);
    const char *cmd = "--pipeline-model-parallel-size 8 --decoder-first-pipeline-num-layers 7 "
                      "--decoder-last-pipeline-num-layers 6 --expert-model-parallel-size 8 --num-experts 256 "
                      "--moe-router-topk 8 --moe-token-dispatcher-type alltoall --mtp-num-layers 1 "
                      "--use-distributed-optimizer --bf16";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.model.mtp_layers, 1);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m, s.model.layers, 7), 6 + 1);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--mtp-num-layers 1"), "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(b.model.mtp_layers, 1);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
}
END_TEST

/* On pp 2 the last stage runs one more block and head than the first: with 1f1b's many
 * micro-batches the step follows the slower stage, so it lengthens; on one rank (dp 4, no
 * pipeline) the same work lengthens it too. */
START_TEST(test_mtp_sim)
{
    const char *grids[2] = {"grid: {dp: 1, pp: 2, tp: 2}\nstrategy: {sequence_parallel: true}\nbatch: {global: 32}\n",
                            "grid: {dp: 4}\nbatch: {global: 32}\n"};
    for (int g = 0; g < 2; g++) {
        char y[1024];
        double t[2];
        for (int k = 0; k < 2; k++) {
            snprintf(y, sizeof y, TINY "%s", k ? ", mtp_layers: 1" : "", grids[g]);
            gs_scenario s;
            gs_mesh m;
            gs_error err;
            gs_error_init(&err);
            load(y, &s, &m);
            gs_report rep;
            gs_backend_opts bo = {0, NULL, NULL, NULL};
            ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, &rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
            t[k] = rep.step_time_s;
        }
        ck_assert_msg(t[1] > 1.05 * t[0], "grid %d: with MTP %g s, without %g s", g, t[1], t[0]);
    }
}
END_TEST

static Suite *mtp_suite(void)
{
    Suite *s = suite_create("mtp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mtp_refusals);
    tcase_add_test(tc, test_mtp_partition);
    tcase_add_test(tc, test_mtp_schedule);
    tcase_add_test(tc, test_mtp_megatron);
    tcase_add_test(tc, test_mtp_sim);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mtp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
