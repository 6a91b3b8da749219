/* Check suite for custom pipeline layouts (grid.layout, Megatron-Core's
 * --pipeline-model-parallel-layout): the string syntax both ways and its refusals, the stage and
 * chunk layer maps against hand counts of Megatron's get_layer_offset, the scenario checks,
 * Megatron-LM's flag both ways, and two equivalences with the older keys simulated side by side
 * (a second implementation of the same split must give the same step). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/partition.h"
#include "engine/pipeline.h"
#include "engine/pipeline_layout.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

static void parse_ok(const char *s, uint16_t n, const uint8_t *layers, uint8_t mtp)
{
    gs_layout l;
    char why[200];
    ck_assert_msg(gs_layout_parse(s, &l, why, sizeof why) == 0, "%s: %s", s, why);
    ck_assert_uint_eq(l.n, n);
    ck_assert_uint_eq(l.mtp, mtp);
    for (uint16_t k = 0; k < n; k++)
        ck_assert_msg(l.layers[k] == layers[k], "%s: stage %u holds %u, expected %u", s, k, l.layers[k], layers[k]);
}

static void parse_fails(const char *s, const char *needle)
{
    gs_layout l;
    char why[200];
    ck_assert_msg(gs_layout_parse(s, &l, why, sizeof why) != 0, "%s parsed", s);
    ck_assert_msg(strstr(why, needle), "%s: %s", s, why);
}

/* NeMo's DeepSeek-V3 layout on pp 8 x 2 virtual stages: the first stage E + 4, fourteen of 4,
 * the last 1 + L (61 layers); nested repeats: E(t(t|)*2)*2tL = Ett|t|tt|t|tL; a module 'm'
 * before the loss. Formatting folds the runs back into the same text. */
START_TEST(test_syntax)
{
    uint8_t dsv3[16];
    for (int k = 0; k < 15; k++)
        dsv3[k] = 4;
    dsv3[15] = 1;
    parse_ok("Et*4|(t*4|)*14tL", 16, dsv3, 0);
    parse_ok("Et*4|(t*4|)*14,tL", 16, dsv3, 0); /* commas are cosmetic */
    parse_ok("E(t(t|)*2)*2tL", 5, (const uint8_t[]){2, 1, 2, 1, 1}, 0);
    parse_ok("Ett|ttmL", 2, (const uint8_t[]){2, 2}, 1);
    gs_layout l;
    char why[200], text[256];
    ck_assert_int_eq(gs_layout_parse("Et*4|(t*4|)*14tL", &l, why, sizeof why), 0);
    gs_layout_format(&l, text, sizeof text);
    ck_assert_str_eq(text, "Et*4|(t*4|)*14tL");
    ck_assert_uint_eq(gs_layout_total(&l), 61);
    ck_assert_uint_eq(gs_layout_layers_before(&l, 8), 32);
    ck_assert_int_eq(gs_layout_parse("Ett|ttmL", &l, why, sizeof why), 0);
    gs_layout_format(&l, text, sizeof text);
    ck_assert_str_eq(text, "Et*2|t*2mL");
    parse_fails("t|tL", "opens with 'E'");
    parse_fails("EtL|t", "'L' (the loss) must close");
    parse_fails("Et*|tL", "without a repeat count");
    parse_fails("Et(t|tL", "without its ')'");
    parse_fails("Et)|tL", "without its '('");
    parse_fails("EtxL", "expected E, t, m, L");
    parse_fails("Etm|tL", "outside the last virtual stage");
    parse_fails("Ettt|(tt|)*29,m|L", "outside the last virtual stage");
    parse_fails("Et||tL", "holds no decoder layer");
}
END_TEST

/* 13 layers on pp 2 x 2 virtual stages, one node of 2 GPUs, one sequence per micro-batch. */
#define LAYOUT13(lay)                                                                                         \
    "model: {layers: 13, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, " \
    "norm: rmsnorm, tied_embeddings: false}\ncluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}\n"      \
    "grid: {dp: 1, pp: 2, tp: 1, layout: \"" lay "\"}\n"                                                      \
    "strategy: {sharding: no_shard, pipeline: interleaved, virtual_stages: 2}\nbatch: {global: 4, micro: 1}\n"

static gs_status try_load(const char *yaml, gs_scenario *s, gs_mesh *m, gs_error *err)
{
    gs_status st = gs_scenario_load_string(yaml, strlen(yaml), "test", s, err);
    return st == GS_OK ? gs_scenario_mesh(s, m, NULL, err) : st;
}

static void load(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(try_load(yaml, s, m, &err) == GS_OK, "load: %s", err.msg);
}

static void load_fails(const char *yaml, const char *needle)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(try_load(yaml, &s, &m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, needle), "%s", err.msg);
}

/* "Et*4|t*4|t*4|tL": virtual stages k = chunk x pp + stage hold 4, 4, 4, 1; stage 0 runs k 0
 * (layers 0-3) and k 2 (8-11), stage 1 k 1 (4-7) and k 3 (12): 8 and 5 layers. Stage 1's
 * second chunk starts at its local layer 4, global layer 12. The partition's chunk spans agree,
 * and the schedule validates against the ledgers. */
START_TEST(test_maps)
{
    gs_scenario s;
    gs_mesh m;
    load(LAYOUT13("Et*4|t*4|t*4|tL"), &s, &m);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m, 13, 0), 8);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m, 13, 1), 5);
    ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 13, 2, 1, 1), 1);
    ck_assert_uint_eq(gs_pipe_chunk_begin(&m, 13, 2, 1, 1), 4);
    ck_assert_uint_eq(gs_pipe_chunk_of(&m, 13, 2, 1, 4), 1);
    ck_assert_uint_eq(gs_pipe_global_layer(&m, 13, 2, 0, 4), 8);
    ck_assert_uint_eq(gs_pipe_global_layer(&m, 13, 2, 1, 3), 7);
    ck_assert_uint_eq(gs_pipe_global_layer(&m, 13, 2, 1, 4), 12);
    gs_partition p;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 1, &p, &err), GS_OK);
    int64_t bot, top;
    gs_partition_chunk_span(&p, 2, 0, &bot, &top);
    ck_assert(bot == 0 && top == 3);
    gs_partition_chunk_span(&p, 2, 1, &bot, &top);
    ck_assert(bot == 4 && top == 4);
    gs_partition_fini(&p);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, &s, &err) == GS_OK, "%s", err.msg);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_refusals)
{
    load_fails(LAYOUT13("Et*4|t*4|t*5L"), "3 virtual stages");
    load_fails(LAYOUT13("Et*4|t*4|t*4|t*2L"), "14 decoder layers");
    load_fails(LAYOUT13("Et*4|t*4|t*4|tmL"), "1 MTP modules");
    load_fails("model: {layers: 13, hidden: 256, heads: 8, ffn: 512, vocab: 1000, seq: 256}\n"
               "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}\n"
               "grid: {dp: 1, pp: 2, first_stage_layers: 7, layout: \"Et*7|t*6L\"}\n",
               "found beside first_stage_layers");
    load_fails("model: {layers: 13, hidden: 256, heads: 8, ffn: 512, vocab: 1000, seq: 256}\n"
               "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}\ngrid: {dp: 1, pp: 2, layout: \"Et*7|t*6\"}\n",
               "test:3:");
}
END_TEST

/* Megatron-LM: the layout flag sets the virtual stages from its length, the emitter writes it
 * back, and the other split flags beside it are refused at their place. */
START_TEST(test_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.nodes = 1;
    gs_error_init(&err);
    gs_diag_init(&ig);
    const char *cmd = "--num-layers 13 --hidden-size 256 --num-attention-heads 8 --seq-length 256 --vocab-size 1024 "
                      "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*4|t*4|t*4|tL' "
                      "--micro-batch-size 1 --global-batch-size 16";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.strategy.pipeline, GS_PIPE_INTERLEAVED);
    ck_assert_uint_eq(s.strategy.virtual_stages, 2);
    ck_assert_uint_eq(s.grid.layout.n, 4);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--pipeline-model-parallel-layout 'Et*4|t*4|t*4|tL'"), "%s",
                  gs_text_str(&t));
    ck_assert_msg(!strstr(gs_text_str(&t), "--num-layers-per-virtual-pipeline-stage"), "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(b.grid.layout.n, 4);
    ck_assert_uint_eq(b.grid.layout.layers[3], 1);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--num-layers 13 --hidden-size 256 --num-attention-heads 8 "
                                             "--seq-length 256 --vocab-size 1024 --pipeline-model-parallel-size 2 "
                                             "--decoder-first-pipeline-num-layers 7 "
                                             "--pipeline-model-parallel-layout 'Et*7|t*6L'",
                                             "run.sh", &o, &b, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "run.sh") && strstr(err.msg, "--decoder-first-pipeline-num-layers"), "%s", err.msg);
    gs_diag_fini(&ig);
}
END_TEST

static double step_of(const char *yaml)
{
    gs_scenario s;
    gs_mesh m;
    load(yaml, &s, &m);
    gs_report r;
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, &r, NULL, &err) == GS_OK, "%s", err.msg);
    return r.step_time_s;
}

#define MODEL16                                                                                               \
    "model: {layers: 16, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, " \
    "norm: rmsnorm, tied_embeddings: false}\ncluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\n"

/* A layout that spells out a split the older keys give simulates to the same step: the even
 * interleaved split of 16 layers over pp 2 x 2 virtual stages, and uneven first / last stages
 * (3 and 7 of 16 over pp 4, the middle two 3 each). */
START_TEST(test_same_as_older_keys)
{
    const char *st = "strategy: {sharding: no_shard, pipeline: interleaved, virtual_stages: 2}\n"
                     "batch: {global: 8, micro: 1}\n";
    char a[2048], b[2048];
    snprintf(a, sizeof a, MODEL16 "grid: {dp: 2, pp: 2}\n%s", st);
    snprintf(b, sizeof b, MODEL16 "grid: {dp: 2, pp: 2, layout: \"Et*4|t*4|t*4|t*4L\"}\n%s", st);
    ck_assert_double_eq(step_of(a), step_of(b));
    snprintf(a, sizeof a, MODEL16 "grid: {dp: 1, pp: 4, first_stage_layers: 3, last_stage_layers: 7}\n"
             "batch: {global: 8, micro: 1}\n");
    snprintf(b, sizeof b, MODEL16 "grid: {dp: 1, pp: 4, layout: \"Et*3|t*3|t*3|t*7L\"}\nbatch: {global: 8, micro: 1}\n");
    ck_assert_double_eq(step_of(a), step_of(b));
}
END_TEST

static Suite *layout_suite(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_syntax);
    tcase_add_test(tc, test_maps);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_megatron);
    tcase_add_test(tc, test_same_as_older_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(layout_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
