/* Check suite for selective recompute's modules (strategy.recompute_modules, Megatron-Core's
 * --recompute-modules) and torchtitan's per-op checkpointing (recompute: op): the scenario keys
 * and their refusals, what each module drops from a block's
 * activations against hand counts, the recompute pass's events (their FLOPs, collectives and the
 * ledgers' traffic), Megatron-LM's flag both ways, and the simulated trade of time for memory.
 * Expected values are hand arithmetic written beside each assertion. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/scenario_write.h"
#include "engine/schedule.h"
#include "sim/sim.h"

/* 2 layers, hidden 256, 8 heads of 32 (2 KV heads), SwiGLU of 512, vocab 1000, sequence 256, no
 * dropout, on one node of 4 GPUs. */
#define DENSE                                                                                              \
    "model: {layers: 2, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, " \
    "norm: rmsnorm, tied_embeddings: false}\ncluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\n"
/* DENSE's shapes with 4 experts of 128 (top-2, dropless), one shared expert, and latent attention
 * (q latent 64, kv latent 32, 16 rope dimensions); both blocks are MoE blocks. */
#define MOE                                                                                                \
    "model: {layers: 2, hidden: 256, heads: 8, head_dim: 32, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, " \
    "norm: rmsnorm, tied_embeddings: false, mla: {q_lora_rank: 64, kv_lora_rank: 32, rope_head_dim: 16}, "   \
    "moe: {experts: 4, top_k: 2, expert_ffn: 128, shared_experts: 1}}\n"                                    \
    "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\n"

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

/* The stored activations of one block of `model` (tp 1, one sequence) under `strategy`. */
static uint64_t stored(const char *model, const char *strategy)
{
    char y[2048];
    snprintf(y, sizeof y, "%sgrid: {dp: 4}\nstrategy: {sharding: no_shard, %s}\nbatch: {global: 4}\n", model,
             strategy);
    gs_scenario s;
    gs_mesh m;
    load(y, &s, &m);
    gs_act_sizes a;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
    return a.stored;
}

START_TEST(test_key_and_refusals)
{
    gs_scenario s;
    gs_mesh m;
    load(DENSE "grid: {dp: 4}\nstrategy: {recompute: selective}\n", &s, &m);
    ck_assert_uint_eq(s.strategy.recompute_modules, GS_RC_CORE_ATTN); /* Megatron's default */
    load(MOE "grid: {dp: 4}\nstrategy: {recompute: selective, recompute_modules: [mla_up_proj, moe]}\n", &s, &m);
    ck_assert_uint_eq(s.strategy.recompute_modules, GS_RC_MLA_UP_PROJ | GS_RC_MOE);
    load(MOE "grid: {dp: 4}\nstrategy: {recompute: selective, recompute_modules: \"layernorm,moe_act\"}\n", &s, &m);
    ck_assert_uint_eq(s.strategy.recompute_modules, GS_RC_LAYERNORM | GS_RC_MOE_ACT);
    /* the key written back reads the same */
    gs_text t;
    gs_text_init(&t);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "recompute_modules: [moe_act, layernorm]"), "%s", gs_text_str(&t));
    gs_scenario b;
    load(gs_text_str(&t), &b, &m);
    ck_assert_uint_eq(b.strategy.recompute_modules, GS_RC_LAYERNORM | GS_RC_MOE_ACT);
    gs_text_fini(&t);
    load_fails(DENSE "grid: {dp: 4}\nstrategy: {recompute: full, recompute_modules: [mlp]}\n",
               "expected recompute: selective");
    load_fails(DENSE "grid: {dp: 4}\nstrategy: {recompute: selective, recompute_modules: [attention]}\n",
               "found 'attention'");
    load_fails(DENSE "grid: {dp: 4}\nstrategy: {recompute: selective, recompute_modules: [mla_up_proj]}\n",
               "needs latent attention");
    load_fails(DENSE "grid: {dp: 4}\nstrategy: {recompute: selective, recompute_modules: [moe]}\n",
               "needs mixture-of-experts");
}
END_TEST

/* DENSE, tp 1, 256 tokens, bf16, flash attention, per block (check_ledger's terms):
 *   norm inputs 2 x 2 B + QKV and MLP inputs 2 x 2 B, x 256 x 256        = 524,288
 *   Q 2 B x 256 x 256, K and V 2 B x 256 x 64 each, out-proj input 2 B x 256 x 256 = 327,680
 *   gate, up (2 B each) and down input (2 B) x 256 x 512                = 786,432
 *   logsumexp 4 B x 256 x 8                                              =   8,192
 *                                                                 total = 1,646,592
 * layernorm drops the QKV and MLP inputs (4 B x 65,536 = 262,144), mlp the MLP's intermediates
 * (786,432); core_attn drops nothing under flash attention (no scores), 2 B x 8 x 256 x 256 =
 * 1,048,576 of scores without it. */
START_TEST(test_dense_activations)
{
    ck_assert_uint_eq(stored(DENSE, "recompute: none"), 1646592);
    ck_assert_uint_eq(stored(DENSE, "recompute: selective"), 1646592);
    ck_assert_uint_eq(stored(DENSE, "recompute: selective, recompute_modules: [layernorm]"), 1646592 - 262144);
    ck_assert_uint_eq(stored(DENSE, "recompute: selective, recompute_modules: [mlp]"), 1646592 - 786432);
    ck_assert_uint_eq(stored(DENSE, "recompute: selective, recompute_modules: [mlp, layernorm]"),
                      1646592 - 786432 - 262144);
    ck_assert_uint_eq(stored(DENSE, "recompute: none, flash_attention: false") -
                          stored(DENSE, "recompute: selective, flash_attention: false"),
                      1048576);
}
END_TEST

/* MOE, tp 1, 256 tokens: latent attention's Q and K (8 heads x (32 + 16)) and V (8 x 32), 2 B
 * each: 256 x 8 x 128 x 2 = 524,288 (mla_up_proj). The experts take 256 x 2 = 512 rows of the 4
 * experts of 128: their activation outputs (the down projection's input) 512 x 128 x 2 B =
 * 131,072 (moe_act); the shared expert's gate, up and down input 6 B x 256 x 128 = 196,608
 * (shared_experts). moe drops the whole MLP half: the fp32 router probabilities 256 x 4 x 4 =
 * 4,096, the experts' inputs 512 x 256 x 2 = 262,144, their intermediates 512 x 128 x 6 = 393,216,
 * their outputs 512 x 256 x 2 = 262,144 and the shared expert's 196,608: 1,118,208, which holds
 * moe_act's and shared_experts' too. */
START_TEST(test_moe_mla_activations)
{
    uint64_t none = stored(MOE, "recompute: none");
    ck_assert_uint_eq(none - stored(MOE, "recompute: selective, recompute_modules: [mla_up_proj]"), 524288);
    ck_assert_uint_eq(none - stored(MOE, "recompute: selective, recompute_modules: [moe_act]"), 131072);
    ck_assert_uint_eq(none - stored(MOE, "recompute: selective, recompute_modules: [shared_experts]"), 196608);
    ck_assert_uint_eq(none - stored(MOE, "recompute: selective, recompute_modules: [moe]"), 1118208);
    ck_assert_uint_eq(none - stored(MOE, "recompute: selective, recompute_modules: [moe, moe_act, shared_experts]"),
                      1118208);
}
END_TEST

/* Rank list 0's events of `role` in phase `phase`: their count, FLOPs and bytes sent. */
static size_t role_events(const gs_schedule *sch, int role, int phase, double *flops, uint64_t *sent)
{
    size_t n = 0;
    *flops = 0.0;
    *sent = 0;
    const gs_rank_events *r = &sch->ranks[0];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role != role || e->phase != phase)
            continue;
        n++;
        *flops += e->flops;
        *sent += gs_event_sent_bytes(e);
    }
    return n;
}

static gs_schedule *build(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    load(yaml, s, m);
    gs_schedule *sch = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_schedule_build(s, m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, s, &err) == GS_OK, "validate: %s", err.msg);
    return sch;
}

/* DENSE on tp 2 with sequence parallelism, 2 micro-batches of 1 sequence (256 tokens), mlp
 * recomputed: per block and micro-batch the recompute pass runs gate+up, 2 x 256 x 512 x 256 =
 * 67,108,864 FLOPs, and down, 2 x 256 x 256 x 256 = 33,554,432, with the MLP's sequence-parallel
 * gather and reduce-scatter of 256 x 256 x 2 B = 131,072 B, each sending (2-1) x 65,536 B: over 2
 * blocks x 2 micro-batches, 4 of each. The schedule validates against the ledgers (the tp line
 * counts the recomputed pair). layernorm adds 2 norm events per block and micro-batch; core_attn
 * under flash attention runs the attention core again (4 events), and nothing else. */
START_TEST(test_recompute_pass)
{
    gs_scenario s;
    gs_mesh m;
    double f;
    uint64_t sent;
    gs_schedule *sch = build(DENSE "grid: {dp: 2, tp: 2}\nstrategy: {sequence_parallel: true, recompute: "
                                   "selective, recompute_modules: [mlp]}\nbatch: {global: 4, micro: 1}\n",
                             &s, &m);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_UP, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_double_eq(f, 4 * 67108864.0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_DOWN, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_double_eq(f, 4 * 33554432.0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_MLP_IN, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(sent, 4 * 65536);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_MLP_OUT, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(sent, 4 * 65536);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_ATTN_CORE, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_QKV, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    gs_schedule_destroy(sch);
    sch = build(DENSE "grid: {dp: 2, tp: 2}\nstrategy: {sequence_parallel: true, recompute: selective, "
                      "recompute_modules: [layernorm, core_attn]}\nbatch: {global: 4, micro: 1}\n",
                &s, &m);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_ATTN_NORM, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_NORM, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_ATTN_CORE, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_UP, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_MLP_IN, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    gs_schedule_destroy(sch);
}
END_TEST

/* MOE on ep 2 (dp 4), 2 micro-batches: moe runs the whole MLP half again, its dispatch and
 * combine all-to-alls among them (2 blocks x 2 micro-batches = 4 of each; the schedule validates
 * against the ep line, which counts them); mla_up_proj runs q_b (2 x 256 x 384 x 64 = 12,582,912
 * FLOPs) and kv_b (2 x 256 x 512 x 32 = 8,388,608) again and no down projection; moe_act alone
 * runs only the experts' activation. */
START_TEST(test_recompute_moe)
{
    gs_scenario s;
    gs_mesh m;
    double f;
    uint64_t sent;
    gs_schedule *sch = build(MOE "grid: {dp: 4, ep: 2}\nstrategy: {recompute: selective, recompute_modules: "
                                 "[mla_up_proj, moe]}\nbatch: {global: 8, micro: 1}\n",
                             &s, &m);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EP_DISPATCH, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EP_COMBINE, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EXPERT_UP, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MOE_ROUTER, GS_PHASE_RECOMPUTE, &f, &sent) > 0, 1);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLA_UP, GS_PHASE_RECOMPUTE, &f, &sent), 8);
    ck_assert_double_eq(f, 4 * (12582912.0 + 8388608.0));
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLA_DOWN, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_ATTN_CORE, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    gs_schedule_destroy(sch);
    sch = build(MOE "grid: {dp: 4, ep: 2}\nstrategy: {recompute: selective, recompute_modules: [moe_act]}\n"
                    "batch: {global: 8, micro: 1}\n",
                &s, &m);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EXPERT_ACT, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EXPERT_UP, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_EP_DISPATCH, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    gs_schedule_destroy(sch);
}
END_TEST

/* Megatron-LM: --recompute-modules read (also as one comma-joined word), written back by the
 * launch emitter, and refused for a module the model lacks, with the flag's place. */
START_TEST(test_megatron)
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
    const char *cmd = "--pipeline-model-parallel-size 8 --expert-model-parallel-size 8 --num-experts 256 "
                      "--moe-router-topk 8 --moe-token-dispatcher-type alltoall --use-distributed-optimizer --bf16 "
                      "--recompute-granularity selective --recompute-modules mla_up_proj mlp,moe";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.strategy.recompute, GS_RECOMPUTE_SELECTIVE);
    ck_assert_uint_eq(s.strategy.recompute_modules, GS_RC_MLA_UP_PROJ | GS_RC_MLP | GS_RC_MOE);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--recompute-granularity selective --recompute-modules mla_up_proj mlp moe"),
                  "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(b.strategy.recompute_modules, GS_RC_MLA_UP_PROJ | GS_RC_MLP | GS_RC_MOE);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    o.model = "llama2-7b";
    o.nodes = 1;
    ck_assert_int_eq(gs_import_megatron_args("--recompute-granularity selective --recompute-modules core_attn "
                                             "mla_up_proj",
                                             "run.sh", &o, &b, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "run.sh") && strstr(err.msg, "needs latent attention"), "%s", err.msg);
    gs_diag_fini(&ig);
}
END_TEST

/* What recompute trades: with the MLP recomputed the step is longer (its forward runs twice)
 * and the peak lower (its intermediates are not kept) than without recompute. */
START_TEST(test_sim_trade)
{
    const char *strat[2] = {"recompute: none", "recompute: selective, recompute_modules: [mlp]"};
    double step[2];
    uint64_t peak[2];
    for (int i = 0; i < 2; i++) {
        char y[1024];
        snprintf(y, sizeof y, DENSE "grid: {dp: 4}\nstrategy: {sharding: no_shard, %s}\nbatch: {global: 16}\n",
                 strat[i]);
        gs_scenario s;
        gs_mesh m;
        load(y, &s, &m);
        gs_report r;
        gs_backend_opts bo = {0, NULL, NULL, NULL};
        gs_error err;
        gs_error_init(&err);
        ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, &r, NULL, &err) == GS_OK, "%s", err.msg);
        step[i] = r.step_time_s;
        peak[i] = r.peak_bytes;
    }
    ck_assert(step[1] > step[0]);
    ck_assert(peak[1] < peak[0]);
}
END_TEST

/* recompute op, torchtitan's per-op policy, on DENSE. tp 1, one sequence of 256 tokens, per
 * block the policy keeps the input 2 B x 256 x 256 = 131,072; wq's Q and SDPA's output,
 * 2 x 2 B x 256 x 256 = 262,144; wv's V 2 B x 256 x 64 = 32,768; the logsumexp 4 B x 256 x 8 =
 * 8,192; w1's output 2 B x 256 x 512 = 262,144; w2's 2 B x 256 x 256 = 131,072: 827,392. On tp 2
 * with sequence parallelism: the input's shard 65,536; Q and the output 2 x 2 B x 256 x 128 =
 * 131,072; V (one KV head of 32) 16,384; logsumexp 4 B x 256 x 4 = 4,096; w1 2 B x 256 x 256 =
 * 131,072; w2's whole partial sum 131,072 and the two reduce-scatters' shards 2 x 65,536: 610,304.
 * Refused where the policy's matmul count would mean other ops: a GELU MLP, TP without sequence
 * parallelism (its all-reduces), a MoE block. */
START_TEST(test_op_ledger)
{
    ck_assert_uint_eq(stored(DENSE, "recompute: op"), 827392);
    char y[1024];
    snprintf(y, sizeof y, DENSE "grid: {dp: 2, tp: 2}\nstrategy: {sequence_parallel: true, recompute: op}\n"
             "batch: {global: 2}\n");
    gs_scenario s;
    gs_mesh m;
    load(y, &s, &m);
    gs_act_sizes a;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
    ck_assert_uint_eq(a.stored, 610304);
    load_fails("model: {layers: 2, hidden: 256, heads: 8, ffn: 1024, vocab: 1000, seq: 256, mlp: gelu}\n"
               "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\ngrid: {dp: 4}\nstrategy: {recompute: op}\n",
               "SwiGLU");
    load_fails(DENSE "grid: {dp: 2, tp: 2}\nstrategy: {sequence_parallel: false, recompute: op}\n",
               "sequence_parallel: true");
    load_fails(MOE "grid: {dp: 4}\nstrategy: {recompute: op}\n", "without latent attention or experts");
}
END_TEST

/* recompute op on DENSE, tp 2 with sequence parallelism, 2 micro-batches: per block and
 * micro-batch the recompute runs wk, 2 x 256 x 32 x 256 = 4,194,304 FLOPs (one KV head of 32 on
 * the rank), wo, 2 x 256 x 256 x 128 = 16,777,216, and w3, 2 x 256 x 256 x 256 = 33,554,432,
 * with the two sequence-parallel gathers; not the attention core, wq, wv, w1, w2 or the
 * reduce-scatters. The schedule validates against the ledgers (the tp line counts the gathers). */
START_TEST(test_op_schedule)
{
    gs_scenario s;
    gs_mesh m;
    double f;
    uint64_t sent;
    gs_schedule *sch = build(DENSE "grid: {dp: 2, tp: 2}\nstrategy: {sequence_parallel: true, recompute: op}\n"
                                   "batch: {global: 4, micro: 1}\n",
                             &s, &m);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_QKV, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_double_eq(f, 4 * 4194304.0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_OPROJ, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_double_eq(f, 4 * 16777216.0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_UP, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_double_eq(f, 4 * 33554432.0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_ATTN_IN, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_MLP_IN, GS_PHASE_RECOMPUTE, &f, &sent), 4);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_TP_ATTN_OUT, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_ATTN_CORE, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    ck_assert_uint_eq(role_events(sch, GS_ROLE_MLP_DOWN, GS_PHASE_RECOMPUTE, &f, &sent), 0);
    gs_schedule_destroy(sch);
}
END_TEST

/* Per-op checkpointing lies between none and full: slower than none, faster than full; a
 * lower peak than none, a higher one than full. */
START_TEST(test_op_between)
{
    const char *strat[3] = {"recompute: none", "recompute: op", "recompute: full"};
    double step[3];
    uint64_t peak[3];
    for (int i = 0; i < 3; i++) {
        char y[1024];
        snprintf(y, sizeof y, DENSE "grid: {dp: 4}\nstrategy: {sharding: no_shard, %s}\nbatch: {global: 16}\n",
                 strat[i]);
        gs_scenario s;
        gs_mesh m;
        load(y, &s, &m);
        gs_report r;
        gs_backend_opts bo = {0, NULL, NULL, NULL};
        gs_error err;
        gs_error_init(&err);
        ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, &r, NULL, &err) == GS_OK, "%s", err.msg);
        step[i] = r.step_time_s;
        peak[i] = r.peak_bytes;
    }
    ck_assert(step[0] < step[1] && step[1] < step[2]);
    ck_assert(peak[0] > peak[1] && peak[1] > peak[2]);
}
END_TEST

static Suite *recompute_suite(void)
{
    Suite *s = suite_create("recompute");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_key_and_refusals);
    tcase_add_test(tc, test_dense_activations);
    tcase_add_test(tc, test_moe_mla_activations);
    tcase_add_test(tc, test_recompute_pass);
    tcase_add_test(tc, test_recompute_moe);
    tcase_add_test(tc, test_megatron);
    tcase_add_test(tc, test_sim_trade);
    tcase_add_test(tc, test_op_ledger);
    tcase_add_test(tc, test_op_schedule);
    tcase_add_test(tc, test_op_between);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(recompute_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
