/* Check suite for engine/diagnose: scenarios built to trigger each row of the seed's
 * troubleshooting table, with the quantities derived by hand, and healthy scenarios that trigger
 * none. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/diagnose.h"
#include "sim/sim.h"

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

static void load(const char *yaml, gs_scenario *s)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "check-diagnose", s, &err) == GS_OK, "%s", err.msg);
}

static gs_diagnosis *diagnose_opts(const char *yaml, const gs_diagnose_opts *o)
{
    gs_scenario s;
    load(yaml, &s);
    gs_diagnosis *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_diagnose_run(&s, o, d, &err) == GS_OK, "%s", err.msg);
    return d;
}

static gs_diagnosis *diagnose(const char *yaml)
{
    gs_diagnose_opts o;
    gs_diagnose_opts_init(&o);
    o.eval = eval_sim;
    return diagnose_opts(yaml, &o);
}

static const gs_diagnose_row *row_of(const gs_diagnosis *d, const char *id)
{
    for (size_t i = 0; i < d->nrows; i++)
        if (strcmp(d->rows[i].id, id) == 0)
            return &d->rows[i];
    ck_abort_msg("no row %s", id);
    return NULL;
}

/* Llama 2 70B by hand (h 8192, 64 heads, 8 KV heads of 128, ffn 28672, vocab 32000, untied):
 * per layer q + o 2 h^2 = 134,217,728; k + v 2 h 1024 = 16,777,216; SwiGLU 3 h ffn = 704,643,072;
 * two RMSNorms 2 h = 16,384: 855,654,400; x 80 = 68,452,352,000; embedding + head 2 x 32000 x 8192
 * = 524,288,000; final norm 8192: 68,976,648,192 parameters. */
#define P70 68976648192ull
#define L70 855654400ull

static const char whole_model_70b[] =
    "model: llama2-70b\n"
    "cluster: {preset: dgx-a100-80g, nodes: 8}\n"
    "grid: {dp: 64, pp: 1, tp: 1}\n"
    "strategy: {sharding: full_shard, wrap: model, recompute: full, precision: bf16}\n"
    "batch: {global: 1024, micro: 1}\n";

/* The seed's pitfall (1): one unit for the whole model gathers all of it: params x 2 B in bf16
 * = 137,953,296,384 B on every rank, above the 80 GB card. Per layer the unit is 855,654,400 x 2
 * = 1.71 GB, so the fix removes at least the whole-model unit less a few layer units (the
 * unsharded whole-model gradient goes too). */
START_TEST(test_oom_at_start_whole_model)
{
    gs_diagnosis *d = diagnose(whole_model_70b);
    ck_assert_uint_eq(d->params, P70);
    ck_assert_uint_eq(d->unit_params, P70);
    ck_assert_uint_eq(d->unit_bytes, P70 * 2);
    const gs_diagnose_row *r = row_of(d, "oom-at-start");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured >= (double)(P70 * 2)); /* the gathered unit is at least the whole model */
    ck_assert(d->base.peak_bytes > 80000000000ull);
    ck_assert_uint_eq(d->base.gpu_bytes, 80000000000ull);
    ck_assert_uint_ge(r->nfixes, 1);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert_msg(fx->simulated, "%s", fx->note);
    ck_assert(strstr(fx->fix, "wrap: layer") != NULL);
    ck_assert(fx->peak_bytes_delta < -(int64_t)(P70 * 2 - 4 * L70 * 2));
    ck_assert_uint_le(fx->after.peak_bytes, fx->after.gpu_bytes); /* fits after the fix */
    ck_assert(fx->after.step_time_s > 0);
    /* the activations are not the problem here (full recompute) */
    ck_assert_int_ne(row_of(d, "oom-first-step")->applies, GS_DIAGNOSE_YES);
    ck_assert_int_eq(row_of(d, "tp-cross-node")->applies, GS_DIAGNOSE_NO);
    free(d);
}
END_TEST

/* FULL_STATE_DICT gathers the fp32 model and Adam m, v on rank 0: 12 B x P70 = 827,719,778,304 B.
 * Against 2 TB per node: above the 250 GB per-GPU share (at risk), below the node (not yes);
 * against 500 GB: yes. SHARDED keeps rank 0's 1/64 shard: P70 / 64 = 1,077,760,128 elements
 * (one whole-model unit, divisible), x 12 B = 12,933,121,536 B. */
START_TEST(test_checkpoint_full_state_dict)
{
    gs_diagnose_opts o;
    gs_diagnose_opts_init(&o);
    o.eval = eval_sim;
    gs_diagnosis *d = diagnose_opts(whole_model_70b, &o);
    ck_assert_uint_eq(d->ckpt_full_bytes, 12 * P70);
    ck_assert_uint_eq(d->ckpt_sharded_bytes, 12ull * 1077760128ull);
    const gs_diagnose_row *r = row_of(d, "checkpoint-oom");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_AT_RISK);
    ck_assert(r->measured == (double)(12 * P70));
    ck_assert(r->threshold == 2e12);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert(fx->simulated);
    ck_assert_int_eq(fx->host_bytes_delta, (int64_t)(12ull * 1077760128ull) - (int64_t)(12 * P70));
    ck_assert_int_eq(fx->peak_bytes_delta, 0);            /* checkpoints are not part of the step */
    ck_assert(fx->step_time_s_delta == 0);
    free(d);

    o.host_bytes = 500000000000ull;
    d = diagnose_opts(whole_model_70b, &o);
    ck_assert_int_eq(row_of(d, "checkpoint-oom")->applies, GS_DIAGNOSE_YES);
    free(d);

    o.state_dict = GS_STATE_DICT_SHARDED;
    d = diagnose_opts(whole_model_70b, &o);
    r = row_of(d, "checkpoint-oom");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_NO);
    ck_assert(r->measured == (double)(12ull * 1077760128ull));
    /* already sharded: the effect is measured against FULL_STATE_DICT */
    ck_assert_int_eq(r->fixes[0].simulated, 1);
    ck_assert_int_eq(r->fixes[0].counterfactual, 1);
    ck_assert_int_eq(r->fixes[0].host_bytes_delta, (int64_t)(12ull * 1077760128ull) - (int64_t)(12 * P70));
    free(d);
}
END_TEST

/* TP 16 on 8-GPU nodes: each TP group spans 16 / 8 = 2 nodes; the fix keeps tp at 8 and doubles
 * dp (same 32 GPUs). TP's per-layer all-reduces then run on NVLink instead of IB (S13): the
 * step gets shorter. */
START_TEST(test_tp_cross_node)
{
    gs_diagnosis *d = diagnose("model: llama2-70b\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 4}\n"
                               "grid: {dp: 2, pp: 1, tp: 16}\n"
                               "strategy: {sharding: full_shard, recompute: full}\n"
                               "batch: {global: 16, micro: 1}\n");
    const gs_diagnose_row *r = row_of(d, "tp-cross-node");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured == 2);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert_msg(fx->simulated, "%s", fx->note);
    ck_assert(strstr(fx->fix, "tp 16 -> 8, dp 2 -> 4") != NULL);
    ck_assert(fx->step_time_s_delta < 0);
    free(d);
}
END_TEST

/* 7B nominal (h 4096, 32 layers, s 4096) on 8 A100 80GB without recompute, micro 8: saved
 * activations per layer with flash attention are about 34 s b h bytes (Korthikanti 2022, no
 * s^2 term) = 34 x 4096 x 8 x 4096 = 4.56 GB; x 32 layers = 146 GB, above the card and far above
 * the 14 GB of states. Full recompute keeps the 2 s b h = 268 MB layer input per layer (8.6 GB)
 * plus one layer's rematerialized set (4.56 GB): a drop of over 100 GB. Halving the micro-batch
 * halves the saved activations: over 50 GB less. */
static const char act_7b[] = "model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
                             "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                             "grid: {dp: 8, pp: 1, tp: 1}\n"
                             "strategy: {sharding: full_shard, recompute: none}\n"
                             "batch: {global: 64, micro: 8}\n";

START_TEST(test_oom_first_step_activations)
{
    gs_diagnosis *d = diagnose(act_7b);
    const gs_diagnose_row *r = row_of(d, "oom-first-step");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured > 0.9 * 32 * 34.0 * 4096 * 8 * 4096);
    ck_assert_int_ne(row_of(d, "oom-at-start")->applies, GS_DIAGNOSE_YES);
    ck_assert_uint_eq(r->nfixes, 2);
    const gs_diagnose_fix *rc = &r->fixes[0], *mb = &r->fixes[1];
    ck_assert(strstr(rc->fix, "recompute: full") != NULL);
    ck_assert(rc->simulated && mb->simulated);
    ck_assert(rc->peak_bytes_delta < -100000000000ll);
    ck_assert_uint_le(rc->after.peak_bytes, rc->after.gpu_bytes);
    ck_assert(rc->step_time_s_delta > 0); /* recompute costs a forward pass per layer */
    ck_assert(strstr(mb->fix, "micro: 8 -> 4") != NULL);
    ck_assert(mb->peak_bytes_delta < -50000000000ll);
    free(d);
}
END_TEST

/* The seed's S7 example: 7B fp16 SHARD_GRAD_OP over 64 ranks on 25 GbE moves 2 x 14 GB x 63/64 =
 * 27.56 GB per rank per step, over 9 s at ~3 GB/s, against about 1 s of compute (6 x 7e9 x 4096
 * tokens per GPU at A100 rates): NCCL share far above 30%, DP across 8 nodes. The seed's fix,
 * HYBRID_SHARD, keeps the shard traffic inside the node, but its 8 replica groups (one per GPU of
 * a node) all-reduce their 1/8 of the 14 GB of gradients across the 8 nodes at once, through the
 * node's one NIC: 8 x 2 x 7/8 x 14 GB / 8 = 24.5 GB, against SHARD_GRAD_OP's 27.56: at the 25 Gb/s
 * line rate at least 7.84 s, so the fix is simulated and gains at most a little (the step stays
 * above 0.85 of the original). */
START_TEST(test_flat_throughput_25gbe)
{
    gs_diagnosis *d = diagnose("model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
                               "cluster: {preset: pcie-a100-25gbe, nodes: 8}\n"
                               "grid: {dp: 64, pp: 1, tp: 1}\n"
                               "strategy: {sharding: shard_grad_op, recompute: full, precision: fp16}\n"
                               "batch: {global: 64, micro: 1}\n");
    const gs_diagnose_row *r = row_of(d, "flat-throughput");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured > 0.30);
    ck_assert(d->base.step_time_s > 27.5625e9 / 3.125e9); /* 25 Gb/s line rate = 3.125 GB/s */
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert(strstr(fx->fix, "hybrid_shard") != NULL);
    ck_assert_msg(fx->simulated, "%s", fx->note);
    double fixed = d->base.step_time_s + fx->step_time_s_delta;
    ck_assert_msg(fixed > 24.5e9 / 3.125e9, "hybrid_shard step %g s under its NIC bound", fixed);
    ck_assert_msg(fixed > 0.85 * d->base.step_time_s, "hybrid_shard %g s against %g s", fixed, d->base.step_time_s);
    ck_assert_int_eq(r->fixes[1].simulated, 0); /* one micro-batch per step: nothing to merge */
    free(d);
}
END_TEST

/* seed-7b-64gpu-25gbe-hsdp: HYBRID_SHARD is already the scenario's; its worth is measured against
 * FULL_SHARD over all 64 ranks. Memory: 16 B x 7e9 sharded over the 8 GPUs of a node = 14 GB
 * against 16 B x 7e9 / 64 = 1.75 GB: +12.25 GB per rank (up to the shards' padding to 64, a few
 * bytes per unit); time: the shard traffic leaves the 25 GbE link, so the step is shorter. */
START_TEST(test_hybrid_counterfactual)
{
    gs_diagnosis *d = diagnose("model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
                               "cluster: {preset: pcie-a100-25gbe, nodes: 8}\n"
                               "grid: {dp: 64, pp: 1, tp: 1}\n"
                               "strategy: {sharding: hybrid_shard, recompute: full, precision: fp16}\n"
                               "batch: {global: 64, micro: 1}\n");
    const gs_diagnose_fix *fx = &row_of(d, "flat-throughput")->fixes[0];
    ck_assert(fx->simulated && fx->counterfactual);
    ck_assert(strstr(fx->note, "against full_shard") != NULL);
    ck_assert(fx->peak_bytes_delta > 12250000000ll - 1000000 && fx->peak_bytes_delta <= 12250000000ll);
    ck_assert(fx->step_time_s_delta < 0);
    free(d);
}
END_TEST

/* tiny-llama-2x2x2 with GPipe: p = 2, m = 8 / (2 x 2) = 2, bubble (p-1)/(m+p-1) = 1/3 by hand;
 * halving the micro-batch doubles m to 4: 1/5. */
START_TEST(test_pipeline_bubble)
{
    gs_diagnosis *d = diagnose("model: {name: tiny, layers: 4, hidden: 256, heads: 4, kv_heads: 2, ffn: 688, "
                               "vocab: 1024, seq: 128}\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                               "grid: {dp: 2, pp: 2, tp: 2}\n"
                               "strategy: {sharding: full_shard, recompute: none, pipeline: gpipe}\n"
                               "batch: {global: 8, micro: 2}\n");
    const gs_diagnose_row *r = row_of(d, "pipeline-bubble");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured > 0.15);
    ck_assert(strstr(r->detail, "(p-1)/(m+p-1) = 33.3% for p=2, m=2") != NULL);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert(strstr(fx->fix, "micro: 2 -> 1") != NULL);
    ck_assert(fx->simulated);
    ck_assert(fx->after.bubble_share < d->base.bubble_share);
    ck_assert_uint_eq(r->nfixes, 2);
    ck_assert(strstr(r->fixes[1].fix, "interleaved") != NULL);
    free(d);
}
END_TEST

/* The seed's pitfall (3): CPU offload fetches parameters from host memory; turning it off makes
 * the step faster (the seed: offload is 30-50% slower). */
START_TEST(test_offload)
{
    gs_diagnosis *d = diagnose("model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                               "grid: {dp: 8, pp: 1, tp: 1}\n"
                               "strategy: {sharding: full_shard, recompute: full, offload: true}\n"
                               "batch: {global: 8, micro: 1}\n");
    const gs_diagnose_row *r = row_of(d, "cpu-offload-slow");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured > 0);
    ck_assert(r->fixes[0].simulated);
    ck_assert(r->fixes[0].step_time_s_delta < 0);
    ck_assert(r->fixes[0].peak_bytes_delta > 0); /* the states come back to the GPU */
    free(d);
}
END_TEST

/* S1: 70B under DDP (no_shard) on 8 GPUs holds all 16 B x P70 = 1,103,626,371,072 B of states on
 * every rank, 14x the card; FULL_SHARD divides them by 8 (still above 80 GB: 138 GB). */
START_TEST(test_states_too_big)
{
    gs_diagnosis *d = diagnose("model: llama2-70b\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                               "grid: {dp: 8, pp: 1, tp: 1}\n"
                               "strategy: {sharding: no_shard, recompute: full}\n"
                               "batch: {global: 8, micro: 1}\n");
    const gs_diagnose_row *r = row_of(d, "states-too-big");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured == (double)(16 * P70));
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert(fx->simulated);
    ck_assert(fx->peak_bytes_delta < -(int64_t)(16 * P70 / 8 * 7) + 8000000000ll);
    ck_assert(strstr(fx->note, "still does not fit") != NULL);
    free(d);
}
END_TEST

/* The seed's grid A (7B on one 8 x A100 80GB node, FULL_SHARD, per-layer wrap, full recompute):
 * 14 GB of states per card, one node, no pipeline, no TP: no row applies; the loss row is n/a. */
START_TEST(test_healthy_grid_a)
{
    const char *y = "model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
                    "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                    "grid: {dp: 8, pp: 1, tp: 1}\n"
                    "strategy: {sharding: full_shard, wrap: layer, recompute: full, precision: bf16}\n"
                    "batch: {global: 8, micro: 1}\n";
    gs_diagnosis *d = diagnose(y);
    ck_assert_int_eq(d->problems, 0);
    ck_assert_uint_eq(d->nrows, gs_diagnose_rule_count());
    for (size_t i = 0; i < d->nrows; i++) {
        const gs_diagnose_row *r = &d->rows[i];
        if (strcmp(r->id, "loss-after-scale") == 0)
            ck_assert_int_eq(r->applies, GS_DIAGNOSE_NA);
        else
            ck_assert_msg(r->applies == GS_DIAGNOSE_NO, "%s: %s", r->id, gs_diagnose_verdict_name(r->applies));
    }
    /* states 7e9 x 16 B / 8 = 14 GB per card (S11) */
    ck_assert(row_of(d, "states-too-big")->measured == 14e9);
    /* 84 GB of FULL_STATE_DICT (7e9 x 12 B) is below a 2 TB node's 250 GB per GPU */
    ck_assert(row_of(d, "checkpoint-oom")->measured == 84e9);
    /* full recompute is already on: its effect is measured against recompute none. Without it each
     * of the 32 layers keeps at most 34 s b h = 34 x 4096 x 1 x 4096 B = 570 MB (flash attention:
     * no s^2 term), 18.25 GB in all; with it at least the 2 s b h = 33.5 MB layer inputs stay
     * (1.07 GB) plus one layer rematerialized: the peak drops by 18.25 GB at most, over 10 GB. */
    const gs_diagnose_fix *rc = &row_of(d, "oom-first-step")->fixes[0];
    ck_assert(rc->simulated && rc->counterfactual);
    ck_assert(rc->peak_bytes_delta >= -18253611008ll && rc->peak_bytes_delta < -10000000000ll);
    ck_assert(rc->step_time_s_delta > 0);
    ck_assert(rc->after.step_time_s == d->base.step_time_s); /* "after" is the scenario itself */
    /* same input, same bytes */
    gs_diagnosis *d2 = diagnose(y);
    ck_assert(memcmp(d, d2, sizeof *d) == 0);
    free(d);
    free(d2);
}
END_TEST

/* --full-step simulates all 16 micro-batches of tiny 2x2x2 (global 64 / (micro 2 x dp 2)) where
 * the default extrapolates from 4 and 6 (gs_plan_simulate): same verdicts, same ledger peaks, and
 * steps within 1% (the extrapolation's tolerance in check_plan). */
START_TEST(test_full_step)
{
    const char *y = "model: {name: tiny, layers: 4, hidden: 256, heads: 4, kv_heads: 2, ffn: 688, vocab: 1024, "
                    "seq: 128}\n"
                    "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                    "grid: {dp: 2, pp: 2, tp: 2}\n"
                    "strategy: {sharding: full_shard, recompute: none}\n"
                    "batch: {global: 64, micro: 2}\n";
    gs_diagnose_opts o;
    gs_diagnose_opts_init(&o);
    o.eval = eval_sim;
    gs_diagnosis *ex = diagnose_opts(y, &o);
    o.full_step = 1;
    gs_diagnosis *full = diagnose_opts(y, &o);
    ck_assert_uint_eq(ex->base.peak_bytes, full->base.peak_bytes);
    ck_assert(fabs(ex->base.step_time_s - full->base.step_time_s) < 0.01 * full->base.step_time_s);
    for (size_t i = 0; i < ex->nrows; i++)
        ck_assert_int_eq(ex->rows[i].applies, full->rows[i].applies);
    free(ex);
    free(full);
}
END_TEST

/* The table's rows in the seed's order, then the extra pitfalls. */
START_TEST(test_rule_table)
{
    static const char *ids[] = {"oom-at-start",   "oom-first-step", "flat-throughput",
                                "pipeline-bubble", "checkpoint-oom", "loss-after-scale",
                                "tp-cross-node",  "cpu-offload-slow", "states-too-big",
                                "tp-comm-exposed", "cp-ring-nodes", "zero-gather-exposed",
                                "loss-passes", "host-bound"};
    ck_assert_uint_eq(gs_diagnose_rule_count(), sizeof ids / sizeof ids[0]);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        ck_assert_str_eq(gs_diagnose_rule_id(i), ids[i]);
    ck_assert_ptr_null(gs_diagnose_rule_id(sizeof ids / sizeof ids[0]));
    ck_assert_str_eq(gs_diagnose_verdict_name(GS_DIAGNOSE_AT_RISK), "at risk");
}
END_TEST

START_TEST(test_errors)
{
    gs_scenario s;
    load("model: {name: 7b, params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
         "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
         "grid: {dp: 4, pp: 1, tp: 1}\n"
         "batch: {global: 8, micro: 1}\n",
         &s);
    gs_diagnosis *d = calloc(1, sizeof *d);
    gs_diagnose_opts o;
    gs_diagnose_opts_init(&o);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_diagnose_run(&s, &o, d, &err), GS_ERR_INPUT); /* no evaluator */
    o.eval = eval_sim;
    gs_error_init(&err);
    ck_assert_int_eq(gs_diagnose_run(&s, &o, d, &err), GS_ERR_INPUT); /* 4 ranks on 8 GPUs */
    ck_assert(err.msg[0] != '\0');
    free(d);
}
END_TEST

/* llama2-7b, tp 8 with sequence parallelism on 2 DGX A100 nodes, dp 2, zero1: the TP collectives
 * sit between the GEMMs (exposed: the row applies), and the fix (tp_comm_overlap) shortens the
 * step and adds Transformer Engine's userbuffers to the peak: 10 x s*b*h*2 B = 10 x 4096 x 4096 x
 * 2 = 335,544,320 B. The ZeRO gather row reads exposed DP; its fix shortens the step and leaves
 * the peak (the same tensors, gathered earlier). With both on, each fix is the counterfactual:
 * removing it lengthens the step. */
START_TEST(test_overlaps)
{
    static const char y[] = "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {tp: 8, dp: 2}\n"
                            "strategy: {sharding: zero1, sequence_parallel: true}\nbatch: {global: 8, micro: 1}\n";
    gs_diagnosis *d = diagnose(y);
    const gs_diagnose_row *r = row_of(d, "tp-comm-exposed");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert(r->measured > 0.10 && r->measured * d->base.step_time_s <= d->base.step_time_s);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert_msg(fx->simulated, "%s", fx->note);
    ck_assert(fx->step_time_s_delta < 0);
    ck_assert_int_eq(fx->peak_bytes_delta, 335544320);
    const gs_diagnose_row *g = row_of(d, "zero-gather-exposed");
    ck_assert(g->measured > 0);
    ck_assert(g->fixes[0].simulated && g->fixes[0].step_time_s_delta < 0 && g->fixes[0].peak_bytes_delta == 0);
    free(d);
    static const char both[] = "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {tp: 8, dp: 2}\n"
                               "strategy: {sharding: zero1, sequence_parallel: true, tp_comm_overlap: true,"
                               " overlap_param_gather: true}\nbatch: {global: 8, micro: 1}\n";
    d = diagnose(both);
    fx = &row_of(d, "tp-comm-exposed")->fixes[0];
    ck_assert(fx->simulated && fx->counterfactual && fx->step_time_s_delta < 0);
    fx = &row_of(d, "zero-gather-exposed")->fixes[0];
    ck_assert(fx->simulated && fx->counterfactual && fx->step_time_s_delta < 0);
    ck_assert_int_eq(row_of(d, "zero-gather-exposed")->applies, GS_DIAGNOSE_NO);
    free(d);
}
END_TEST

/* The loss row, MCORE-H100-1.7B's shapes on one DGX H100 (dp 8, global 32: 4 micro-batches of
 * one 4096-token sequence per rank). Logits per step on a rank: 4 x 4096 x 131072 = 2,147,483,648;
 * unfused bf16 moves 38 + 14 = 52 B each (Megatron's passes, engine/strategy.h): 111.67 GB,
 * 33.3 ms at H100's 3.35 TB/s. The measured share is that over the simulated step; the fix
 * (fused, 4 + 4 B per logit) saves about the difference at the sim's elementwise rate (3.35 TB/s
 * x 0.85): 2.147e9 x 44 B / 2.8475e12 B/s = 33.2 ms, within the extrapolated step's noise. Fused
 * already: no, and the fix is the counterfactual (the fused scenario against an unfused copy: shorter). */
START_TEST(test_loss_passes)
{
    static const char y[] = "model: {name: g, layers: 24, hidden: 2048, heads: 16, ffn: 8192, vocab: 131072, seq: 4096,"
                            " mlp: gelu, norm: layernorm, pos: learned, bias: true, tied_embeddings: false}\n"
                            "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8}\n"
                            "strategy: {sharding: zero1}\nbatch: {global: 32, micro: 1}\n";
    gs_diagnosis *d = diagnose(y);
    const gs_diagnose_row *r = row_of(d, "loss-passes");
    double secs = 2147483648.0 * 52.0 / 3.35e12;
    ck_assert_msg(fabs(r->measured - secs / d->base.step_time_s) < 1e-9, "measured %g, by hand %g", r->measured,
                  secs / d->base.step_time_s);
    ck_assert_int_eq(r->applies, r->measured > 0.05 ? GS_DIAGNOSE_YES : GS_DIAGNOSE_AT_RISK);
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    const gs_diagnose_fix *fx = &r->fixes[0];
    ck_assert_msg(fx->simulated, "%s", fx->note);
    double saved = 2147483648.0 * 44.0 / (3.35e12 * 0.85);
    ck_assert_msg(fabs(-fx->step_time_s_delta - saved) < 0.05 * saved, "step %+g s, by hand -%g s",
                  fx->step_time_s_delta, saved);
    ck_assert_int_eq(fx->peak_bytes_delta, 0);
    free(d);
    char f[600];
    snprintf(f, sizeof f, "%s", y);
    char *at = strstr(f, "sharding: zero1");
    memcpy(at, "sharding: zero1, cross_entropy: fused}\nbatch: {global: 32, micro: 1}\n",
           strlen("sharding: zero1, cross_entropy: fused}\nbatch: {global: 32, micro: 1}\n") + 1);
    d = diagnose(f);
    r = row_of(d, "loss-passes");
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_NO);
    ck_assert(r->fixes[0].simulated && r->fixes[0].counterfactual && r->fixes[0].step_time_s_delta < 0);
    free(d);
}
END_TEST

/* A two-layer model of width 64 on one H100 in eager FSDP2: every kernel runs for a few
 * microseconds, and the host issues each in 8 us. By hand, the kernels of one step: a block's
 * forward 27 (norm 7 = the residual add + RMSNorm's six eager passes, QKV 1 + rotary 6, attention
 * 1, output projection 1, norm 7, up 1, SwiGLU 2, down 1), its backward 48 (norms 2 x 14, QKV's
 * two GEMMs + rotary 6, attention 2, the other three GEMM events 2 each, SwiGLU 4); embedding,
 * final norm, head and loss 1 each forward, 1, 1, 2, 1 backward; the optimizer 1: 2 x (27 + 48) +
 * 4 + 5 + 1 = 160 kernels, 1.28 ms of issuing, nearly all of the step. torch.compile fuses the
 * norms and SwiGLU: fewer kernels, a shorter step. Llama 2 7B's blocks on 8 GPUs run for
 * milliseconds: not host-bound. */
START_TEST(test_host_bound)
{
    gs_diagnosis *d = diagnose("model: {layers: 2, hidden: 64, heads: 2, ffn: 128, vocab: 100, seq: 16}\n"
                               "cluster: {preset: dgx-h100, gpus_per_node: 1}\ngrid: {dp: 1}\n"
                               "batch: {global: 1, micro: 1}\nstrategy: {framework: fsdp2, compile: false}\n");
    const gs_diagnose_row *r = row_of(d, "host-bound");
    ck_assert_msg(fabs(d->base.host_issue_s - 160 * 8e-6) < 1e-12, "host %.9g s, by hand 1.28 ms", d->base.host_issue_s);
    ck_assert(fabs(r->measured - d->base.host_issue_s / d->base.step_time_s) < 1e-12);
    ck_assert_int_eq(r->applies, GS_DIAGNOSE_YES);
    ck_assert_msg(r->fixes[0].simulated && r->fixes[0].step_time_s_delta < 0, "compile: %s", r->fixes[0].note);
    ck_assert(r->fixes[0].after.host_issue_s < d->base.host_issue_s);
    ck_assert(!r->fixes[1].simulated); /* global 1: no larger micro-batch */
    free(d);
    d = diagnose("model: llama2-7b\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8}\n"
                 "strategy: {sharding: full_shard, framework: fsdp2}\nbatch: {global: 16, micro: 1}\n");
    r = row_of(d, "host-bound");
    ck_assert_msg(r->applies == GS_DIAGNOSE_NO, "7B on 8 GPUs: host %.3g of the step", r->measured);
    ck_assert(r->measured > 0 && r->measured < 0.5);
    free(d);
}
END_TEST

/* p2p CP's ring across nodes: Llama 3 8B at 32k over cp 16 on 2 nodes of 8 (full recompute)
 * holds 8 CP ranks on each node; the ring's steps wait for their hop between nodes (2.62 ms of
 * ring per block forward, by hand, against about 1 ms of attention), so the TP stream's
 * exposed share passes 10%, and the fix (a2a+p2p with the a2a level the 8 ranks a node holds,
 * Megatron's --hierarchical-context-parallel-sizes 8 2) shortens the step. The same cp 16 with
 * tp 1 on 16 nodes of 1 GPU has one rank per node: every hop alike, the rule does not apply. */
START_TEST(test_cp_ring_nodes)
{
    gs_diagnosis *d = diagnose("model: {preset: llama3-8b, seq: 32768}\ncluster: {preset: dgx-h100, nodes: 2}\n"
                               "grid: {cp: 16}\nstrategy: {recompute: full, cp_comm: p2p}\nbatch: {global: 1}\n");
    const gs_diagnose_row *r = row_of(d, "cp-ring-nodes");
    ck_assert_msg(r->applies == GS_DIAGNOSE_YES, "exposed %.3g: %s", r->measured, r->detail);
    ck_assert_ptr_nonnull(strstr(r->detail, "spans 2 nodes, 8 on each"));
    ck_assert_msg(r->fixes[0].simulated && r->fixes[0].step_time_s_delta < 0, "%s", r->fixes[0].note);
    ck_assert_ptr_nonnull(strstr(r->fixes[0].fix, "cp_a2a: 8"));
    free(d);
    d = diagnose("model: {preset: llama3-8b, seq: 32768}\ncluster: {preset: dgx-h100, nodes: 16, gpus_per_node: 1}\n"
                 "grid: {cp: 16}\nstrategy: {recompute: full, cp_comm: p2p}\nbatch: {global: 1}\n");
    r = row_of(d, "cp-ring-nodes");
    ck_assert_msg(r->applies == GS_DIAGNOSE_NO, "%s", r->detail);
    ck_assert(!r->fixes[0].simulated);
    free(d);
}
END_TEST

static Suite *diagnose_suite(void)
{
    Suite *s = suite_create("diagnose");
    TCase *core = tcase_create("core");
    tcase_add_test(core, test_rule_table);
    tcase_add_test(core, test_healthy_grid_a);
    tcase_add_test(core, test_errors);
    tcase_add_test(core, test_full_step);
    suite_add_tcase(s, core);
    TCase *rows = tcase_create("rows");
    tcase_add_test(rows, test_oom_at_start_whole_model);
    tcase_add_test(rows, test_checkpoint_full_state_dict);
    tcase_add_test(rows, test_tp_cross_node);
    tcase_add_test(rows, test_oom_first_step_activations);
    tcase_add_test(rows, test_flat_throughput_25gbe);
    tcase_add_test(rows, test_hybrid_counterfactual);
    tcase_add_test(rows, test_pipeline_bubble);
    tcase_add_test(rows, test_cp_ring_nodes);
    tcase_add_test(rows, test_offload);
    tcase_add_test(rows, test_states_too_big);
    tcase_add_test(rows, test_overlaps);
    tcase_add_test(rows, test_loss_passes);
    tcase_add_test(rows, test_host_bound);
    tcase_set_timeout(rows, 120);
    suite_add_tcase(s, rows);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(diagnose_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
