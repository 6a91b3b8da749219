/* Check suite for strategy.overlap_moe_expert_parallel_comm (Megatron-Core's combined 1F1B): the
 * pipeline order with its extra warm-up forward, the combined step's pieces in the order of
 * TransformerLayerSchedulePlan.run (megatron/core/models/common/model_chunk_schedule_plan.py),
 * the share of the token exchanges that no other micro-batch can hide, the memory of the forward
 * stash growing while the backward's shrinks, the asserts Megatron-Core makes, and the
 * Megatron-LM flag both ways. Expected values are hand counts written beside each assertion. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/pipeline.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

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
    ck_assert_msg(strstr(err.msg, needle), "%s (wanted: %s)", err.msg, needle);
}

/* ---- the order of the passes ------------------------------------------------------------- */

/* Without pipelining, combined_1f1b_schedule_for_no_pipelining runs micro-batch 0's forward
 * alone, then (forward i+1, backward i) pairs, then the last backward: F0 F1 B0 F2 B1 F3 B2 B3
 * for 4 micro-batches, where plain gradient accumulation runs F0 B0 F1 B1 ... Interleaved, every
 * stage warms up one forward more than Megatron's (pp - s - 1) 2 + (v - 1) pp: on pp 2, v 2, stage
 * 0: 2 + 2 + 1 = 5, stage 1: 0 + 2 + 1 = 3; the passes stay 2 m v. */
START_TEST(test_overlap_order)
{
    gs_error err;
    gs_error_init(&err);
    gs_pipe_order o;
    static const struct { uint32_t mb; uint8_t bwd; } want[] = {{0, 0}, {1, 0}, {0, 1}, {2, 0},
                                                              {1, 1}, {3, 0}, {2, 1}, {3, 1}};
    ck_assert_int_eq(gs_pipe_order_build(GS_PIPE_1F1B, 1, 0, 4, 1, 1, &o, &err), GS_OK);
    ck_assert_uint_eq(o.nops, 8);
    ck_assert_uint_eq(o.warmup, 1);
    for (size_t i = 0; i < 8; i++)
        ck_assert(o.ops[i].mb == want[i].mb && o.ops[i].backward == want[i].bwd && o.ops[i].chunk == 0);
    gs_pipe_order_fini(&o);
    for (uint64_t stage = 0; stage < 2; stage++) {
        gs_pipe_order plain;
        ck_assert_int_eq(gs_pipe_order_build(GS_PIPE_INTERLEAVED, 2, stage, 4, 2, 0, &plain, &err), GS_OK);
        ck_assert_int_eq(gs_pipe_order_build(GS_PIPE_INTERLEAVED, 2, stage, 4, 2, 1, &o, &err), GS_OK);
        ck_assert_uint_eq(o.warmup, stage == 0 ? 5 : 3);
        ck_assert_uint_eq(o.warmup, plain.warmup + 1);
        ck_assert_uint_eq(o.nops, 16);
        for (size_t i = 0; i < o.warmup; i++)
            ck_assert(!o.ops[i].backward);
        gs_pipe_order_fini(&plain);
        gs_pipe_order_fini(&o);
    }
}
END_TEST

/* ---- the combined step's pieces ---------------------------------------------------------- */

#define TINY_MOE                                                                                              \
    "model: {layers: 4, hidden: 256, heads: 4, kv_heads: 4, ffn: 512, vocab: 1024, seq: 128, mlp: swiglu, " \
    "moe: {experts: 8, top_k: 2, expert_ffn: 128}}\ncluster: {preset: dgx-h100, nodes: 1}\n"

/* The index in rank 0's list of the first event with this role, phase, micro-batch and global
 * layer on stream `stream` (SIZE_MAX: none). */
static size_t find(const gs_rank_events *r, int role, int phase, uint32_t mb, int32_t layer, int stream)
{
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role == role && e->phase == phase && e->mb == mb && e->layer == layer && e->stream == stream)
            return k;
    }
    return SIZE_MAX;
}

/* TINY_MOE on one node, dp 8 = ep 8, 2 micro-batches, the alltoall dispatcher: the order is F0
 * (F1 + B0) B1; in the combined step the forward's block 1 runs beside the backward's block 2
 * (4 blocks: the forward's i-th with the backward's (3 - i)-th). Megatron's order, its comm
 * stream (here the PP stream's exchanges) combine_bwd, dispatch_fwd, dispatch_bwd, combine_fwd;
 * its comp stream pre_dispatch_fwd, mlp_bwd, mlp_fwd, pre_dispatch_bwd, so in the list: B0's
 * combine exchange < F1's attention norm < B0's experts < F1's dispatch < B0's dispatch < F1's
 * experts < F1's combine < B0's attention core < F1's unpermute (the permute's part 2). Without
 * the overlap, F1 starts after B0 ends. */
START_TEST(test_overlap_pieces)
{
    static const char *fmt = TINY_MOE "grid: {dp: 8, ep: 8}\nstrategy: {framework: megatron, sharding: zero1, "
                             "recompute: none, flash_attention: true%s}\nbatch: {global: 16}\n";
    char y[1024];
    gs_error err;
    gs_error_init(&err);
    for (int ov = 0; ov < 2; ov++) {
        snprintf(y, sizeof y, fmt, ov ? ", overlap_moe_expert_parallel_comm: true" : "");
        gs_scenario s;
        gs_mesh m;
        load(y, &s, &m);
        gs_schedule *sch = NULL;
        ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
        ck_assert_msg(gs_schedule_validate(sch, &s, &err) == GS_OK, "validate: %s", err.msg);
        const gs_rank_events *r = &sch->ranks[0];
        /* the exchanges on the PP stream under the overlap (Megatron's communication stream) */
        const int F = GS_PHASE_FWD, B = GS_PHASE_BWD, C = GS_STREAM_COMPUTE, T = ov ? GS_STREAM_PP : GS_STREAM_TP;
        size_t seq[] = {
            find(r, GS_ROLE_EP_COMBINE, B, 0, 2, T),    find(r, GS_ROLE_ATTN_NORM, F, 1, 1, C),
            find(r, GS_ROLE_EXPERT_UP, B, 0, 2, C),     find(r, GS_ROLE_EP_DISPATCH, F, 1, 1, T),
            find(r, GS_ROLE_EP_DISPATCH, B, 0, 2, T),   find(r, GS_ROLE_EXPERT_UP, F, 1, 1, C),
            find(r, GS_ROLE_EP_COMBINE, F, 1, 1, T),    find(r, GS_ROLE_ATTN_CORE, B, 0, 2, C),
        };
        for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
            ck_assert_msg(seq[i] != SIZE_MAX, "piece %zu missing", i);
        if (ov) {
            for (size_t i = 1; i < sizeof seq / sizeof seq[0]; i++)
                ck_assert_msg(seq[i - 1] < seq[i], "piece %zu at %zu, piece %zu at %zu", i - 1, seq[i - 1], i, seq[i]);
            /* the unpermute after the backward's attention half: the last permute event of F1's block 1 */
            size_t unperm = SIZE_MAX;
            for (size_t k = 0; k < r->nevents; k++)
                if (r->events[k].role == GS_ROLE_MOE_PERMUTE && r->events[k].phase == F && r->events[k].mb == 1 &&
                    r->events[k].layer == 1)
                    unperm = k;
            ck_assert_uint_gt(unperm, seq[7]);
        } else { /* F1's first block after B0's last (block 0) */
            ck_assert_uint_gt(find(r, GS_ROLE_ATTN_NORM, F, 1, 0, C), find(r, GS_ROLE_ATTN_NORM, B, 0, 0, C));
        }
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* The combined schedule passes validation (tensors alive when read, collectives matched, roles,
 * the traffic ledger's bytes and the memory ledger's peak equal to the events' own) under the
 * interleaved pipeline (pp 2, v 2: combined steps of different model chunks, one of them with
 * the embedding, one with the head), the flex dispatcher (no unpermute after the combine), TP
 * with sequence parallelism and its overlap, expert TP below it, selective recompute, zero2's
 * transient gradients, shard_grad_op's gathers kept for the step, and Megatron's chunk buckets
 * with overlapped parameter gathers, each against the same exchange bytes as the plain
 * schedule. */
START_TEST(test_overlap_validates)
{
    static const char *const variants[] = {
        "grid: {dp: 4, ep: 4, pp: 2}\nstrategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 2",
        "grid: {dp: 8, ep: 8}\nstrategy: {sharding: zero1, moe_dispatcher: flex",
        "grid: {dp: 4, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, tp_comm_overlap: true",
        "grid: {dp: 4, ep: 8, tp: 2, etp: 1}\nstrategy: {sharding: zero1, sequence_parallel: true, moe_dispatcher: flex",
        "grid: {dp: 8, ep: 4}\nstrategy: {sharding: zero1, recompute: selective",
        "grid: {dp: 8, ep: 8}\nstrategy: {sharding: zero2",
        "grid: {dp: 8, ep: 8}\nstrategy: {sharding: shard_grad_op, wrap: layer",
        "grid: {dp: 8, ep: 8}\nstrategy: {sharding: shard_grad_op, wrap: layer, forward_prefetch: true",
        /* experts held whole (ep = dp) under Megatron's chunk buckets and overlapped parameter
         * gathers: nothing to gather for them, and their chunk's bucket gathered once */
        "grid: {dp: 4, ep: 4, pp: 2}\nstrategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 2, "
        "overlap_param_gather: true, bucket_stages: first",
    };
    gs_error err;
    gs_error_init(&err);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        uint64_t bytes[2] = {0, 0};
        for (int ov = 0; ov < 2; ov++) {
            char y[1024];
            snprintf(y, sizeof y, TINY_MOE "%s, framework: megatron%s}\nbatch: {global: 32}\n", variants[v],
                     ov ? ", overlap_moe_expert_parallel_comm: true" : "");
            gs_scenario s;
            gs_mesh m;
            load(y, &s, &m);
            gs_schedule *sch = NULL;
            ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "variant %zu build: %s", v, err.msg);
            ck_assert_msg(gs_schedule_validate(sch, &s, &err) == GS_OK, "variant %zu (overlap %d): %s", v, ov,
                          err.msg);
            for (size_t i = 0; i < sch->nranks; i++)
                for (size_t k = 0; k < sch->ranks[i].nevents; k++) {
                    const gs_event *e = &sch->ranks[i].events[k];
                    if (e->role == GS_ROLE_EP_DISPATCH || e->role == GS_ROLE_EP_COMBINE)
                        bytes[ov] += e->bytes;
                }
            gs_schedule_destroy(sch);
        }
        ck_assert_msg(bytes[0] > 0 && bytes[1] == bytes[0], "variant %zu: %llu vs %llu B", v,
                      (unsigned long long)bytes[1], (unsigned long long)bytes[0]);
    }
}
END_TEST

/* ---- the simulated step ------------------------------------------------------------------ */

static void sim(const char *yaml, gs_report *rep)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load(yaml, &s, &m);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
}

/* A Mixtral-shaped model (8 blocks) on one DGX H100 node, ep 8, 8 micro-batches of 4096 tokens:
 * each block's exchanges take far less than its attention or experts, so in every combined step
 * they are hidden. Only the first micro-batch's forward and the last one's backward run alone:
 * 1 of 8 forward passes and 1 of 8 backward passes, each with the same exchanges (forward and
 * backward move the same rows), so 2 / 16 = 1/8 of the exchange time stays exposed, no less (no
 * other compute runs beside those two passes) and, hidden elsewhere, not much more. Without the
 * overlap every exchange is exposed, and the step is longer. */
START_TEST(test_overlap_exposed)
{
    static const char *fmt = "model: {preset: mixtral-8x7b, layers: 8, seq: 4096}\ncluster: {preset: dgx-h100, "
                             "nodes: 1}\ngrid: {dp: 8, ep: 8}\nstrategy: {framework: megatron, sharding: zero1, "
                             "recompute: none, flash_attention: true%s}\nbatch: {global: 64, micro: 1}\n";
    char y[1024];
    gs_report a, b;
    snprintf(y, sizeof y, fmt, "");
    sim(y, &a);
    snprintf(y, sizeof y, fmt, ", overlap_moe_expert_parallel_comm: true");
    sim(y, &b);
    double all = a.comm_s[GS_DIM_TP];
    ck_assert_double_eq_tol(b.comm_s[GS_DIM_TP], all, 1e-9 * all); /* the same exchanges */
    ck_assert_double_eq_tol(a.exposed_s[GS_DIM_TP], all, 1e-6 * all);
    double share = b.exposed_s[GS_DIM_TP] / all;
    ck_assert_msg(share >= 0.125 * (1.0 - 1e-6) && share <= 0.15, "exposed share %g", share);
    ck_assert_msg(b.step_time_s < a.step_time_s, "overlap %g s, plain %g s", b.step_time_s, a.step_time_s);
}
END_TEST

/* ---- memory --------------------------------------------------------------------------------- */

/* The same model, pp 1: in each combined step the forward's stash grows by a block while the
 * backward's shrinks by one, so the combined moments hold at most one block's stored activations
 * (gs_act_layer_stored) more than the plain schedule's backward moments, never a second
 * micro-batch's stash (8 blocks); the lone first forward keeps the plain peak as a floor. The
 * schedule's own high-water mark, walking its tensors' allocations and frees in list order, is
 * a second count of the same peak. */
START_TEST(test_overlap_memory)
{
    static const char *fmt = "model: {preset: mixtral-8x7b, layers: 8, seq: 4096}\ncluster: {preset: dgx-h100, "
                             "nodes: 1}\ngrid: {dp: 8, ep: 8}\nstrategy: {framework: megatron, sharding: zero1, "
                             "recompute: none, flash_attention: true%s}\nbatch: {global: 64, micro: 1}\n";
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_ledger *la = NULL, *lb = NULL;
    snprintf(y, sizeof y, fmt, "");
    load(y, &s, &m);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &la, &err), GS_OK);
    gs_act_sizes act;
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &act, &err), GS_OK);
    uint64_t block = gs_act_layer_stored(&act, 0);
    snprintf(y, sizeof y, fmt, ", overlap_moe_expert_parallel_comm: true");
    load(y, &s, &m);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &lb, &err), GS_OK);
    ck_assert_msg(lb->peak_bytes >= la->peak_bytes && lb->peak_bytes <= la->peak_bytes + block,
                  "peak %llu, plain %llu, a block %llu (%s / %s)", (unsigned long long)lb->peak_bytes,
                  (unsigned long long)la->peak_bytes, (unsigned long long)block, lb->ranks[0].peak_where,
                  la->ranks[0].peak_where);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_uint_eq(gs_rank_peak_bytes(&sch->ranks[0]), lb->ranks[0].peak_bytes);
    gs_schedule_destroy(sch);
    gs_ledger_destroy(la);
    gs_ledger_destroy(lb);
}
END_TEST

/* ---- Megatron-Core's asserts -------------------------------------------------------------- */

START_TEST(test_overlap_refusals)
{
    char y[1024];
    static const char *fmt = TINY_MOE "grid: {dp: 8, ep: %d%s}\nstrategy: {framework: %s, sharding: zero1, "
                             "recompute: %s, moe_dispatcher: %s%s, overlap_moe_expert_parallel_comm: true}\n"
                             "batch: {global: 16}\n";
    snprintf(y, sizeof y, fmt, 1, "", "megatron", "none", "alltoall", "");
    load_fails(y, "with grid.ep >= 2");
    snprintf(y, sizeof y, fmt, 8, "", "megatron", "none", "allgather", "");
    load_fails(y, "found moe_dispatcher allgather");
    snprintf(y, sizeof y, fmt, 4, ", pp: 2", "megatron", "none", "alltoall", "");
    load_fails(y, "needs virtual pipeline stages"); /* refused before the ranks are counted */
    snprintf(y, sizeof y, fmt, 8, "", "megatron", "full", "alltoall", "");
    load_fails(y, "test:4:");
    load_fails(y, "recompute full");
    snprintf(y, sizeof y, fmt, 8, "", "fsdp2", "none", "alltoall", "");
    load_fails(y, "expected framework megatron");
    load_fails(TINY_MOE "grid: {dp: 8, ep: 8}\nstrategy: {framework: megatron, sharding: full_shard, "
               "overlap_moe_expert_parallel_comm: true}\n",
               "parameters gathered before every pass is not built");
    load_fails("model: {preset: llama3-8b, layers: 4}\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8}\n"
               "strategy: {framework: megatron, sharding: zero1, overlap_moe_expert_parallel_comm: true}\n",
               "a dense model");
    /* interleaved pp 2 is accepted */
    gs_scenario s;
    gs_mesh m;
    snprintf(y, sizeof y,
             TINY_MOE "grid: {dp: 4, ep: 4, pp: 2}\nstrategy: {framework: megatron, sharding: zero1, recompute: none, "
                      "pipeline: interleaved, virtual_stages: 2, overlap_moe_expert_parallel_comm: true}\n"
                      "batch: {global: 16}\n");
    load(y, &s, &m);
    ck_assert(s.strategy.ep_overlap);
}
END_TEST

/* ---- Megatron-LM's flag ------------------------------------------------------------------- */

/* --overlap-moe-expert-parallel-comm is read, written back by the launcher and read again;
 * --delay-wgrad-compute is noted as ignored. */
START_TEST(test_overlap_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "mixtral-8x7b";
    o.nodes = 2;
    gs_error_init(&err);
    gs_diag_init(&ig);
    const char *cmd = "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 4 "
                      "--num-experts 8 --moe-router-topk 2 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
                      "--use-distributed-optimizer --bf16 --overlap-moe-expert-parallel-comm --delay-wgrad-compute";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.strategy.ep_overlap);
    int noted = 0;
    for (size_t i = 0; i < ig.count; i++)
        noted |= strstr(ig.warnings[i], "--delay-wgrad-compute: ignored") != NULL;
    ck_assert(noted);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--overlap-moe-expert-parallel-comm"), "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.strategy.ep_overlap);
    gs_text_fini(&t);
    /* the flex dispatcher's SM count under its three names; the launcher writes the current one */
    static const char *const names[] = {"moe-flex-dispatcher-num-sms", "moe-deepep-num-sms", "moe-hybridep-num-sms"};
    for (size_t i = 0; i < 3; i++) {
        char c2[512];
        snprintf(c2, sizeof c2, "--expert-model-parallel-size 8 --num-experts 8 --moe-token-dispatcher-type flex "
                 "--use-distributed-optimizer --bf16 --%s 32", names[i]);
        ck_assert_msg(gs_import_megatron_args(c2, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
        ck_assert_uint_eq(s.strategy.flex_sms, 32);
    }
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--moe-flex-dispatcher-num-sms 32"), "%s", gs_text_str(&t));
    gs_text_fini(&t);
    gs_diag_fini(&ig);
}
END_TEST

/* The flex dispatcher's SMs slow the compute beside its exchanges: under the overlap, 64 SMs of
 * the H100's 132 leave 68 to the other micro-batch's kernels where DeepEP's default 20 leave 112,
 * so the step is longer; without the overlap no compute runs beside an exchange and the count
 * changes nothing. */
START_TEST(test_overlap_flex_sms)
{
    static const char *fmt = "model: {preset: mixtral-8x7b, layers: 8, seq: 4096, moe: {experts: 16}}\ncluster: "
                             "{preset: dgx-h100, nodes: 2}\ngrid: {dp: 16, ep: 16}\nstrategy: {framework: megatron, "
                             "sharding: zero1, recompute: none, moe_dispatcher: flex%s%s}\nbatch: {global: 64, micro: 1}\n";
    char y[1024];
    gs_report r[2][2];
    for (int ov = 0; ov < 2; ov++)
        for (int big = 0; big < 2; big++) {
            snprintf(y, sizeof y, fmt, ov ? ", overlap_moe_expert_parallel_comm: true" : "",
                     big ? ", moe_flex_dispatcher_num_sms: 64" : "");
            sim(y, &r[ov][big]);
        }
    ck_assert_double_eq(r[0][1].step_time_s, r[0][0].step_time_s);
    ck_assert_msg(r[1][1].compute_s > r[1][0].compute_s && r[1][1].step_time_s > r[1][0].step_time_s,
                  "64 SMs: %g s (compute %g s), 20: %g s (%g s)", r[1][1].step_time_s, r[1][1].compute_s,
                  r[1][0].step_time_s, r[1][0].compute_s);
}
END_TEST

static Suite *ep_overlap_suite(void)
{
    Suite *s = suite_create("ep_overlap");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_overlap_order);
    tcase_add_test(tc, test_overlap_pieces);
    tcase_add_test(tc, test_overlap_validates);
    tcase_add_test(tc, test_overlap_exposed);
    tcase_add_test(tc, test_overlap_memory);
    tcase_add_test(tc, test_overlap_refusals);
    tcase_add_test(tc, test_overlap_megatron);
    tcase_add_test(tc, test_overlap_flex_sms);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ep_overlap_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
