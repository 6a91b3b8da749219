/* Check suite for multi-head latent attention (model.mla) in the schedule and the ledgers: the
 * projections' GEMMs and the attention core against hand counts and the model's FLOP formula,
 * the saved activations against a hand count, validation across strategies, and the refusals.
 * Expected values are hand arithmetic written beside each assertion. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"

/* 2 layers, hidden 256, 8 heads of 32 with q latent 64, kv latent 32 and 16 rope dims, SwiGLU
 * ffn 512, sequence 128, one micro-batch of 1 per step on 2 GPUs. */
#define TINY_MLA                                                                                               \
    "model: {layers: 2, hidden: 256, heads: 8, head_dim: 32, ffn: 512, vocab: 1000, seq: 128, mlp: swiglu, "   \
    "norm: rmsnorm, bias: false, mla: {q_lora_rank: 64, kv_lora_rank: 32, rope_head_dim: 16}}\n"
/* one node of n GPUs */
#define NODE(n) "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: " #n "}\n"

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

static gs_schedule *build(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    load(yaml, s, m);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_scenario_check_schedule_size(s, m, gs_scenario_microbatches(s), 1, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_schedule_build(s, m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, s, &err) == GS_OK, "validate: %s", err.msg);
    return sch;
}

/* Forward FLOPs of rank list i's events with role (and part, 0: any) in layer 0. */
static double fwd_flops(const gs_schedule *sch, size_t i, int role, int part)
{
    double f = 0.0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role == role && e->phase == GS_PHASE_FWD && e->layer == 0 && (!part || e->part == part))
            f += e->flops;
    }
    return f;
}

/* tp 2, T = 128 tokens, 4 heads per rank:
 *   q_a  2 x 128 x 64 x 256              = 4,194,304 (whole on each rank: duplicated)
 *   kv_a 2 x 128 x (32 + 16) x 256       = 3,145,728 (duplicated)
 *   q_b  2 x 128 x 4 (32 + 16) x 64      = 3,145,728
 *   kv_b 2 x 128 x 4 x 2 x 32 x 32       = 2,097,152
 *   attention 2 x 128 x 128 x 4 x (2 x 32 + 16) = 10,485,760, half the model's per-layer forward
 *   term 2 T s heads (2d + r) = 20,971,520.
 * With tp 1 the four projections add up to the model's: 2 T (h qr + qr H (d + r) + h (kr + r) +
 * kr H 2d) = 2 x 128 x (16,384 + 24,576 + 12,288 + 16,384) = 17,825,792. */
START_TEST(test_mla_flops)
{
    gs_scenario s;
    gs_mesh m;
    gs_schedule *sch = build(TINY_MLA NODE(2) "grid: {dp: 1, tp: 2}\nstrategy: {sharding: no_shard, sequence_parallel: true, "
                                      "flash_attention: true, recompute: none}\nbatch: {global: 1}\n", &s, &m);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_MLA_DOWN, 1), 4194304.0);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_MLA_DOWN, 2), 3145728.0);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_MLA_UP, 1), 3145728.0);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_MLA_UP, 2), 2097152.0);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_ATTN_CORE, 0), 10485760.0);
    gs_schedule_destroy(sch);
    sch = build(TINY_MLA NODE(1) "grid: {dp: 1}\nstrategy: {sharding: no_shard, flash_attention: true, recompute: none}\n"
                         "batch: {global: 1}\n", &s, &m);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_MLA_DOWN, 0) + fwd_flops(sch, 0, GS_ROLE_MLA_UP, 0), 17825792.0);
    ck_assert_double_eq(fwd_flops(sch, 0, GS_ROLE_ATTN_CORE, 0), 20971520.0);
    gs_schedule_destroy(sch);
}
END_TEST

/* Saved per block, tp 1, 128 tokens, bf16, flash attention, no recompute:
 *   norm inputs and the QKV and MLP inputs 8 B x 128 x 256            = 262,144
 *   q latent 128 x 64 x (2 + 2), kv latent 128 x 48 x 2, normed 128 x 32 x 2 = 53,248
 *   Q, K 128 x 8 x 48 x 2 B each, V 128 x 8 x 32 x 2 B                 = 262,144
 *   out-projection input 128 x 256 x 2 B                              =  65,536
 *   gate, up, down input 6 B x 128 x 512                               = 393,216
 *   logsumexp 4 B x 128 x 8                                            =   4,096
 *                                                               total = 1,040,384 */
START_TEST(test_mla_activations)
{
    gs_scenario s;
    gs_mesh m;
    load(TINY_MLA NODE(1) "grid: {dp: 1}\nstrategy: {sharding: no_shard, flash_attention: true, recompute: none}\n"
                  "batch: {global: 1}\n", &s, &m);
    gs_act_sizes a;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
    ck_assert_uint_eq(a.stored, 1040384ull);
}
END_TEST

/* Every sharding, recompute and grid below builds and validates (bytes sent and the memory peak
 * equal to the ledgers'), the schedule's own check. */
START_TEST(test_mla_strategies)
{
    static const char *const cases[] = {
        "grid: {dp: 2, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, recompute: selective}\n",
        "grid: {dp: 4}\nstrategy: {sharding: full_shard, recompute: full}\n",
        "grid: {dp: 2, pp: 2}\nstrategy: {sharding: zero1, recompute: none}\n",
        "grid: {dp: 1, tp: 4}\nstrategy: {sharding: no_shard, recompute: full, sequence_parallel: true}\n",
        "grid: {dp: 2, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, precision: fp8}\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char y[1024];
        snprintf(y, sizeof y, TINY_MLA NODE(4) "%sbatch: {global: 8}\n", cases[i]);
        gs_scenario s;
        gs_mesh m;
        gs_schedule *sch = build(y, &s, &m);
        gs_schedule_destroy(sch);
    }
}
END_TEST

START_TEST(test_mla_refused)
{
    static const char *const cases[][2] = {
        {"grid: {dp: 1, tp: 2}\nstrategy: {sequence_parallel: true, tp_comm_overlap: true}\n", "tp_comm_overlap"},
        {"grid: {dp: 1, cp: 2}\n", "context parallelism"},
    };
    for (size_t i = 0; i < 2; i++) {
        char y[1024];
        snprintf(y, sizeof y, TINY_MLA NODE(2) "%s", cases[i][0]);
        gs_scenario s;
        gs_mesh m;
        gs_error err;
        gs_error_init(&err);
        load(y, &s, &m);
        ck_assert_int_eq(gs_scenario_check_schedule_size(&s, &m, 1, 0, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, cases[i][1]), "%s", err.msg);
    }
}
END_TEST

/* DeepSeek-V3's attention through Megatron-LM's flags: read (with its preset's experts), written
 * by the megatron launch document, read back to the same sizes; a key head size different from
 * the value head size is refused. */
START_TEST(test_mla_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "deepseek-v3";
    o.nodes = 4;
    gs_error_init(&err);
    gs_diag_init(&ig);
    const char *cmd = "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 8 "
                      "--moe-token-dispatcher-type alltoall --multi-latent-attention --q-lora-rank 1536 "
                      "--kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 "
                      "--use-distributed-optimizer --bf16";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.model.mla.q_lora_rank == 1536 && s.model.mla.kv_lora_rank == 512 && s.model.mla.rope_head_dim == 64);
    ck_assert(s.model.head_dim == 128 && s.model.kv_heads == s.model.heads && s.grid.ep == 8);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    o.model = NULL; /* the emitted shape alone */
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.model.mla.q_lora_rank == 1536 && b.model.mla.kv_lora_rank == 512 && b.model.mla.rope_head_dim == 64);
    ck_assert(b.model.head_dim == 128 && b.model.moe.experts == 256 && b.model.moe.dense_layers == 3);
    ck_assert_uint_eq(gs_model_params(&b.model), gs_model_params(&s.model));
    gs_text_fini(&t);
    o.model = "deepseek-v3";
    ck_assert_int_eq(gs_import_megatron_args("--multi-latent-attention --qk-head-dim 192 --v-head-dim 128 "
                                             "--moe-token-dispatcher-type alltoall", "run.sh", &o, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "found them different"), "%s", err.msg);
    gs_diag_fini(&ig);
}
END_TEST

static Suite *mla_suite(void)
{
    Suite *s = suite_create("mla");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mla_flops);
    tcase_add_test(tc, test_mla_activations);
    tcase_add_test(tc, test_mla_strategies);
    tcase_add_test(tc, test_mla_refused);
    tcase_add_test(tc, test_mla_megatron);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mla_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
