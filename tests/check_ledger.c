/* Check suite for engine/ledger: the seed's figures (DIGEST S1, S7, S11, S12), ZeRO stage formulas
 * (reference 6.3), HSDP traffic (reference 6.4), Korthikanti's activation table (reference 6.2) and
 * pipeline in-flight counts (6.5). Every expected value is derived by hand in the comments, never
 * taken from the code under test. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/partition.h"
#include "engine/scenario.h"

static gs_ledger *ledger_from(const char *yaml, gs_scenario *s, gs_mesh *mesh)
{
    gs_error err;
    gs_error_init(&err);
    gs_diag w;
    gs_diag_init(&w);
    gs_status st = gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err);
    ck_assert_msg(st == GS_OK, "load: %s", err.msg);
    st = gs_scenario_mesh(s, mesh, &w, &err);
    ck_assert_msg(st == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
    gs_ledger *l = NULL;
    st = gs_ledger_create(s, mesh, &l, &err);
    ck_assert_msg(st == GS_OK, "ledger: %s", err.msg);
    return l;
}

static void assert_rel(double got, double want, double tol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= tol * fabs(want), "%s: got %.6f, want %.6f (rel tol %g)", what, got,
                  want, tol);
}

#define NOMINAL7 "model: {params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"

/* S1: 16 B/param: 7B -> 112 GB, 13B -> 208 GB, 70B -> 1.12 TB. */
START_TEST(test_states_16_bytes)
{
    static const struct { const char *params; uint64_t layers; double want; } cases[] = {
        {"7e9", 32, 112e9}, {"13e9", 40, 208e9}, {"70e9", 80, 1.12e12}};
    for (size_t i = 0; i < 3; i++) {
        char y[512];
        snprintf(y, sizeof y,
                 "model: {params: %s, layers: %llu, hidden: 4096, seq: 4096}\n"
                 "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                 "grid: {dp: 8, pp: 1, tp: 1}\n",
                 cases[i].params, (unsigned long long)cases[i].layers);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_uint_eq(l->states_total_bytes, (uint64_t)cases[i].want);
        gs_ledger_destroy(l);
    }
    /* the gradients' bytes: bf16 with fp32 gradients 2 + 4 + 4 + 4 + 4 = 18 B (7B: 126 GB); fp32
     * training with bf16 gradients 4 + 4 + 4 + 2 = 14 B (98 GB) */
    static const struct { const char *st; uint64_t per; } g[] = {
        {"{grad_dtype: fp32}", 18}, {"{precision: fp32, grad_dtype: bf16}", 14}};
    for (size_t i = 0; i < 2; i++) {
        char y[512];
        snprintf(y, sizeof y, NOMINAL7 "cluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8}\nstrategy: %s\n",
                 g[i].st);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_uint_eq(l->bytes_per_param, g[i].per);
        ck_assert_uint_eq(l->states_total_bytes, 7000000000ull * g[i].per);
        gs_ledger_destroy(l);
    }
}
END_TEST

/* S11 grid A: 7e9 FULL_SHARD on 8: 112 GB / 8 = 14 GB of states per rank, exactly (7e9/32 layers =
 * 218,750,000 params per unit, divisible by 8: no padding). */
START_TEST(test_grid_a_full_shard_8)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from(NOMINAL7 "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                                        "grid: {dp: 8, pp: 1, tp: 1}\n"
                                        "strategy: {sharding: full_shard, recompute: full}\n",
                               &s, &m);
    ck_assert_uint_eq(l->per_rank_state_bytes, 14000000000ull);
    ck_assert_uint_eq(l->nranks, 1);
    /* fits 80 GB with room for activations: 14 GB states + gathered units (2 x 437.5 MB) + ... */
    ck_assert(l->peak_bytes < 80000000000ull);
    ck_assert_uint_eq(l->min_gpus, 2); /* ceil(112 / 80) */
    gs_ledger_destroy(l);
}
END_TEST

/* S7: 7e9 fp16 (M = 14 GB) on 64 ranks. SHARD_GRAD_OP: 2 x M x 63/64 = 27.5625 GB per rank per
 * step; at 3 GB/s: 9.1875 s. FULL_SHARD with the backward re-gather: 3 x M x 63/64 = 41.34375 GB.
 * Padding: 218,750,000 / 64 is not whole, so shards carry 0.25 element per unit: relative 1e-6. */
START_TEST(test_s7_traffic_64)
{
    const char *base = NOMINAL7 "cluster: {preset: pcie-a100-25gbe, nodes: 8}\n"
                                "grid: {dp: 64, pp: 1, tp: 1}\n"
                                "batch: {global: 64, micro: 1}\n";
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    snprintf(y, sizeof y, "%sstrategy: {sharding: shard_grad_op, precision: fp16}\n", base);
    gs_ledger *l = ledger_from(y, &s, &m);
    assert_rel((double)l->traffic_bytes, 27.5625e9, 1e-6, "shard_grad_op traffic");
    assert_rel((double)l->traffic_bytes / 3e9, 9.1875, 1e-6, "seconds at 3 GB/s");
    ck_assert_uint_eq(l->traffic_by_dim[GS_DIM_DP], l->traffic_bytes);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER], l->ranks[0].traffic[GS_TRAFFIC_DP_REDUCE_SCATTER]);
    /* 64 ranks over 8 nodes: the DP group spans the network */
    ck_assert_uint_eq(l->ranks[0].traffic_link[GS_LINKCLASS_NET], l->traffic_bytes);
    gs_ledger_destroy(l);
    snprintf(y, sizeof y, "%sstrategy: {sharding: full_shard, precision: fp16}\n", base);
    l = ledger_from(y, &s, &m);
    assert_rel((double)l->traffic_bytes, 41.34375e9, 1e-6, "full_shard traffic");
    /* all-gather twice (forward + backward re-gather), reduce-scatter once */
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER], 2 * l->ranks[0].traffic[GS_TRAFFIC_DP_REDUCE_SCATTER]);
    gs_ledger_destroy(l);
    /* reshard_after_forward off: back to the 2x convention */
    snprintf(y, sizeof y, "%sstrategy: {sharding: full_shard, precision: fp16, reshard_after_forward: false}\n", base);
    l = ledger_from(y, &s, &m);
    assert_rel((double)l->traffic_bytes, 27.5625e9, 1e-6, "full_shard without reshard");
    gs_ledger_destroy(l);
}
END_TEST

/* S12: 70e9 over 64 ranks: 1.12 TB / 64 = 17.5 GB per rank; 2 x 140 GB x 63/64 = 275.625 GB
 * (the seed's 2x convention = SHARD_GRAD_OP). 875,000,000 params per layer / 64 is whole. */
START_TEST(test_s12_pure_fsdp_64)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: {params: 70e9, layers: 80, hidden: 8192, seq: 4096}\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 8}\n"
                               "grid: {dp: 64, pp: 1, tp: 1}\n"
                               "strategy: {sharding: shard_grad_op}\n",
                               &s, &m);
    ck_assert_uint_eq(l->per_rank_state_bytes, 17500000000ull);
    ck_assert_uint_eq(l->traffic_bytes, 275625000000ull);
    gs_ledger_destroy(l);
}
END_TEST

/* S12 grid B (DP4, PP2, TP8) on 70e9: each rank holds 1/(tp x pp) = 1/16 of the parameters
 * (4.375e9) and 1/64 of the states (17.5 GB). One all-gather pass over dp=4 sends
 * 3/4 x 4.375e9 x 2 B = 6.5625 GB; with m = 1 FULL_SHARD does 2 all-gathers and 1
 * reduce-scatter. The hand figures that leave out PP: 1120/32 = 35 GB and 2 x 17.5 x 3/4 =
 * 26.25 GB. */
START_TEST(test_grid_b)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: {params: 70e9, layers: 80, hidden: 8192, seq: 4096}\n"
                               "cluster: {preset: dgx-a100-80g, nodes: 8}\n"
                               "grid: {dp: 4, pp: 2, tp: 8, order: tp-pp-dp}\n"
                               "strategy: {sharding: full_shard, recompute: full}\n"
                               "batch: {global: 4, micro: 1}\n",
                               &s, &m);
    ck_assert_uint_eq(l->nranks, 2);
    ck_assert_uint_eq(l->per_rank_state_bytes, 17500000000ull);
    ck_assert_uint_eq(l->ranks[0].params, 4375000000ull);
    ck_assert_uint_eq(l->ranks[1].params, 4375000000ull);
    ck_assert_uint_eq(l->ranks[0].dp_shard_group, 4);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_DP_REDUCE_SCATTER], 6562500000ull);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER], 13125000000ull);
    ck_assert_uint_ge(l->nnotes, 2);
    ck_assert_uint_eq(l->notes[0].bytes, 35000000000ull);
    ck_assert_ptr_nonnull(strstr(l->notes[0].formula, "PP split"));
    ck_assert_uint_eq(l->notes[1].bytes, 26250000000ull);
    /* TP all-reduces stay on NVLink (tp=8 within a node); PP crosses nodes in tp-pp-dp order
     * (node0 = dp0/pp0, node1 = dp0/pp1). */
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_TP] > 0, 1);
    ck_assert_uint_ge(l->ranks[0].traffic_link[GS_LINKCLASS_INTRA], l->ranks[0].traffic[GS_TRAFFIC_TP]);
    ck_assert_uint_ge(l->ranks[0].traffic_link[GS_LINKCLASS_NET], l->ranks[0].traffic[GS_TRAFFIC_PP]);
    gs_ledger_destroy(l);
}
END_TEST

/* Megatron-Core's precision-aware optimizer (TE FusedAdam): under bf16 the master keeps only the
 * fp32 value's low 16 bits beside the bf16 parameter (store_param_remainders), 2 B instead of 4;
 * bf16 moments halve m and v. Psi = 7e9, ZeRO-1 over N = 8, bf16 gradients: 2 Psi + 2 Psi +
 * (2 + 8) Psi / 8 = 36.75 GB, and with bf16 moments 2 Psi + 2 Psi + (2 + 4) Psi / 8 = 33.25 GB,
 * against the 38.5 GB of test_zero_stages. The moments in bf16 without the switch are refused. */
START_TEST(test_precision_aware_optimizer)
{
    static const struct { const char *st; uint64_t want; } cases[] = {
        {"precision_aware_optimizer: true", 36750000000ull},
        {"precision_aware_optimizer: true, adam_dtype: bf16", 33250000000ull}};
    for (size_t i = 0; i < 2; i++) {
        char y[512];
        snprintf(y, sizeof y, NOMINAL7 "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                                       "grid: {dp: 8}\nstrategy: {sharding: zero1, %s}\n", cases[i].st);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_msg(l->per_rank_state_bytes == cases[i].want, "%s: %llu", cases[i].st,
                      (unsigned long long)l->per_rank_state_bytes);
        gs_ledger_destroy(l);
    }
    const char *bad = NOMINAL7 "cluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8}\n"
                               "strategy: {sharding: zero1, adam_dtype: bf16}\n";
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(bad, strlen(bad), "t", &s, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "precision_aware_optimizer: true"), "%s", err.msg);
}
END_TEST

/* Reference 6.3: ZeRO-1 = 4 Psi + 12 Psi / N; ZeRO-2 = 2 Psi + 14 Psi / N; DDP = 16 Psi.
 * Psi = 7e9, N = 8: 38.5 GB, 26.25 GB, 112 GB. DDP all-reduce: 2 x 7/8 x 14 GB = 24.5 GB. */
START_TEST(test_zero_stages)
{
    static const struct { const char *sh; uint64_t want; } cases[] = {
        {"zero1", 38500000000ull}, {"zero2", 26250000000ull}, {"no_shard", 112000000000ull},
        {"zero3", 14000000000ull}};
    for (size_t i = 0; i < 4; i++) {
        char y[512];
        snprintf(y, sizeof y, NOMINAL7 "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
                                       "grid: {dp: 8}\nstrategy: {sharding: %s}\n", cases[i].sh);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_msg(l->per_rank_state_bytes == cases[i].want, "%s: %llu", cases[i].sh,
                      (unsigned long long)l->per_rank_state_bytes);
        if (strcmp(cases[i].sh, "no_shard") == 0)
            ck_assert_uint_eq(l->traffic_bytes, 24500000000ull);
        gs_ledger_destroy(l);
    }
}
END_TEST

/* Reference 6.4 HSDP: shard over S = 8 GPUs of a node, R = 8 replicas:
 * intra 3 x 7/8 x 14 GB = 36.75 GB; inter 2 x 7/8 x (14 GB / 8) = 3.0625 GB. States 14 GB. */
START_TEST(test_hsdp)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from(NOMINAL7 "cluster: {preset: pcie-a100-25gbe, nodes: 8}\n"
                                        "grid: {dp: 64}\nstrategy: {sharding: hybrid_shard}\n"
                                        "batch: {global: 64}\n",
                               &s, &m);
    const gs_ledger_rank *r = &l->ranks[0];
    ck_assert_uint_eq(r->dp_shard_group, 8);
    ck_assert_uint_eq(r->dp_replica_group, 8);
    ck_assert_uint_eq(r->state_bytes, 14000000000ull);
    ck_assert_uint_eq(r->traffic_link[GS_LINKCLASS_INTRA], 36750000000ull);
    /* 218,750,000 / 8 = 27,343,750 per unit, / 8 = 3,417,968.75: padded per unit, rel 1e-6 */
    assert_rel((double)r->traffic_link[GS_LINKCLASS_NET], 3.0625e9, 1e-6, "hsdp inter");
    gs_ledger_destroy(l);
}
END_TEST

/* HSDP with one DP rank per node (2 nodes of 1 GPU, dp 2): shard group S = 1, R = 2 replicas.
 * Nothing is gathered or reduce-scattered; the cross-node ring all-reduce of the whole bf16
 * gradient (7e9 x 2 B = 14 GB, 32 units of 218,750,000 elements: even, no padding) sends
 * 2 (R-1)/R x 14 GB = 14 GB per rank over the network, once per step (m = 1). */
START_TEST(test_hsdp_one_rank_per_node)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from(NOMINAL7 "cluster: {preset: pcie-a100-25gbe, nodes: 2, gpus_per_node: 1}\n"
                                        "grid: {dp: 2}\nstrategy: {sharding: hybrid_shard}\n"
                                        "batch: {global: 2}\n",
                               &s, &m);
    const gs_ledger_rank *r = &l->ranks[0];
    ck_assert_uint_eq(r->dp_shard_group, 1);
    ck_assert_uint_eq(r->dp_replica_group, 2);
    ck_assert_uint_eq(r->traffic[GS_TRAFFIC_DP_ALLGATHER], 0);
    ck_assert_uint_eq(r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER], 0);
    ck_assert_uint_eq(r->traffic[GS_TRAFFIC_DP_ALLREDUCE], 14000000000ull);
    ck_assert_uint_eq(r->traffic_link[GS_LINKCLASS_NET], 14000000000ull);
    ck_assert_uint_eq(r->traffic_link[GS_LINKCLASS_INTRA], 0);
    gs_ledger_destroy(l);
}
END_TEST

/* Exact llama2-7b FULL_SHARD on 8: per-layer units of 202,383,360 and a root unit of
 * 2 x 131,072,000 + 4,096 (embedding, head, final norm): all divide by 8, so the shard is
 * 6,738,415,616 / 8 = 842,301,952 elements and the states 16 x that = 13,476,831,232 B. */
START_TEST(test_exact_llama2_7b)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: llama2-7b\ncluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n", &s, &m);
    ck_assert_uint_eq(l->params, 6738415616ull);
    ck_assert_uint_eq(l->per_rank_state_bytes, 13476831232ull);
    /* largest unit: the root (262,148,096) beats a layer (202,383,360) */
    ck_assert_uint_eq(l->ranks[0].unit_params, 262148096ull);
    gs_ledger_destroy(l);
}
END_TEST

/* Whole-model wrap (S8 pitfall 1): the one unit is the FSDP root, gathered for the whole step:
 * 7e9 x 2 B = 14 GB, and its unsharded gradient (14 GB) lives through the backward pass, on top
 * of the 14 GB of states (gradient shard 7e9 / 8 x 2 B = 1.75 GB). */
START_TEST(test_whole_model_wrap)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from(NOMINAL7 "cluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n"
                                        "strategy: {wrap: model}\n", &s, &m);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_GATHER], 14000000000ull);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_GRADS], 1750000000ull + 14000000000ull);
    uint64_t whole = l->ranks[0].peak_bytes;
    gs_ledger_destroy(l);
    /* per-layer wrap with backward prefetch: 2 units of 7e9/32 x 2 B = 437.5 MB gathered (the
     * layer's and the prefetched next) and one unit's unsharded gradient */
    l = ledger_from(NOMINAL7 "cluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n", &s, &m);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_GATHER], 2 * 437500000ull);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_GRADS], 1750000000ull + 437500000ull);
    /* whole-model wrapping costs the gathered model (14 GB) plus its gradient (14 GB) less the
     * per-layer buffers (3 x 437.5 MB); its peak moves to the head's backward, where the head's
     * activations are still alive: final-norm input 2 s b h + fp32 logits 4 s b V
     * = 2*4096*4096 + 4*4096*32000 = 557,842,432 B. */
    ck_assert_uint_eq(whole - l->ranks[0].peak_bytes, 28000000000ull - 3 * 437500000ull + 557842432ull);
    gs_ledger_destroy(l);
}
END_TEST

/* Korthikanti Table 2 (reference 6.2) on a GPT-style block (LayerNorm, GELU, ffn = 4h, MHA,
 * dropout): s=2048, b=2, h=4096, a=32, t=8. Per layer, bytes:
 *   no parallelism      sbh (34 + 5as/h)
 *   TP                  sbh (10 + 24/t + 5as/(ht))
 *   TP + SP             sbh/t (34 + 5as/h)
 *   TP + SP + selective 34 sbh / t
 *   full recompute      2 sbh (TP+SP: 2 sbh / t) */
START_TEST(test_korthikanti_table2)
{
    gs_model gm;
    memset(&gm, 0, sizeof gm);
    gm.layers = 24, gm.hidden = 4096, gm.heads = 32, gm.kv_heads = 32, gm.head_dim = 128;
    gm.ffn = 4 * 4096, gm.vocab = 51200, gm.seq = 2048, gm.bias = 1, gm.dropout = 1;
    gm.norm = GS_NORM_LAYERNORM, gm.mlp = GS_MLP_GELU, gm.pos = GS_POS_LEARNED;
    gs_strategy st;
    gs_strategy_defaults(&st);
    st.recompute = GS_RECOMPUTE_NONE;
    st.flash_attention = 0;
    const double s = 2048, b = 2, h = 4096, a = 32, t = 8, sbh = s * b * h;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 1), (uint64_t)(sbh * (34 + 5 * a * s / h)));
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 8),
                      (uint64_t)(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
    st.sequence_parallel = 1;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 8), (uint64_t)(sbh / t * (34 + 5 * a * s / h)));
    st.recompute = GS_RECOMPUTE_SELECTIVE;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 8), (uint64_t)(34 * sbh / t));
    st.recompute = GS_RECOMPUTE_FULL;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 8), (uint64_t)(2 * sbh / t));
    st.sequence_parallel = 0;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&gm, &st, 2, 8), (uint64_t)(2 * sbh));
}
END_TEST

/* Llama block (RMSNorm, SwiGLU, no dropout), op by op, t = 1, bf16, llama2-7b shapes s=4096,
 * b=1, h=4096, a=32, ffn=11008: kept for backward are the two norm inputs, the QKV input, Q, K,
 * V, the out-proj input, the MLP input (8 x 2 sbh), gate, up and down inputs (3 x 2 s b ffn) and
 * the softmax output 2 a s^2 b. */
START_TEST(test_llama_block)
{
    gs_scenario sc;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: llama2-7b\ncluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n"
                               "strategy: {recompute: none, flash_attention: false}\n", &sc, &m);
    const double s = 4096, b = 1, h = 4096, a = 32, f = 11008;
    uint64_t want = (uint64_t)(16 * s * b * h + 6 * s * b * f + 2 * a * s * s * b);
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&sc.model, &sc.strategy, 1, 1), want);
    /* flash attention drops the s^2 term and keeps an fp32 logsumexp per head and token */
    sc.strategy.flash_attention = 1;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&sc.model, &sc.strategy, 1, 1),
                      (uint64_t)(16 * s * b * h + 6 * s * b * f + 4 * a * s * b));
    gs_ledger_destroy(l);
}
END_TEST

/* FP8 (Transformer Engine keeps the linear layers' inputs as FP8, 1 byte): of test_llama_block's
 * set the QKV input, the out-proj input and the MLP input (3 x sbh) and the down input (s b ffn)
 * drop from 2 to 1 byte: 16 sbh + 6 sbf becomes 13 sbh + 5 sbf. Resident: the blocks' parameters
 * gain their FP8 copy and transpose (2 B each) unless the parameters themselves are FP8. FSDP:
 * a gathered layer unit holds 2 + 2 B per element, and fp8_params halves the layer units'
 * all-gather traffic. */
START_TEST(test_fp8)
{
    gs_scenario sc;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: llama2-7b\ncluster: {preset: dgx-h100}\ngrid: {dp: 8}\n"
                               "strategy: {sharding: zero1, recompute: none, flash_attention: true, "
                               "precision: fp8}\n", &sc, &m);
    const double s = 4096, b = 1, h = 4096, a = 32, f = 11008;
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&sc.model, &sc.strategy, 1, 1),
                      (uint64_t)(13 * s * b * h + 5 * s * b * f + 4 * a * s * b));
    /* zero1 keeps the parameters whole: bf16 2 B + FP8 copies 2 B on the blocks' parameters; the
     * blocks of llama2-7b: 32 x (4 h^2 + 3 h f + 2 h) = 6,476,267,520 */
    uint64_t blocks = 32ull * (4ull * 4096 * 4096 + 3ull * 4096 * 11008 + 2ull * 4096);
    gs_scenario sb = sc;
    gs_mesh mb = m;
    sb.strategy.fp8 = GS_FP8_OFF;
    gs_ledger *lb = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&sb, &mb, &lb, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_PARAMS] - lb->ranks[0].mem[GS_MEM_PARAMS], 2 * blocks);
    gs_ledger_destroy(l);
    sc.strategy.fp8_params = 1;
    ck_assert_int_eq(gs_ledger_create(&sc, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_PARAMS], lb->ranks[0].mem[GS_MEM_PARAMS]);
    gs_ledger_destroy(l);
    gs_ledger_destroy(lb);
    /* full_shard over 8: the layer units' all-gathers (2 x per pass, 1 micro-batch) halve with FP8
     * parameters, the root's do not: bf16 - fp8_params = half the layer units' part */
    gs_scenario fs;
    gs_mesh fm;
    gs_ledger *f16 = ledger_from("model: llama2-7b\ncluster: {preset: dgx-h100}\ngrid: {dp: 8}\n"
                                 "strategy: {sharding: full_shard, precision: bf16}\nbatch: {global: 8, micro: 1}\n",
                                 &fs, &fm);
    gs_scenario f8s = fs;
    f8s.strategy.fp8 = GS_FP8_CURRENT;
    f8s.strategy.fp8_params = 1;
    gs_ledger *f8 = NULL;
    ck_assert_int_eq(gs_ledger_create(&f8s, &fm, &f8, &err), GS_OK);
    /* per rank: (N - 1) x padded shard of each layer unit (the 32 blocks, 202,383,360 each,
     * divisible by 8) per pass: 7 x 202,383,360 / 8 x 32 units x 2 passes x (2 - 1) B */
    uint64_t saved = 7ull * (202383360ull / 8) * 32 * 2;
    ck_assert_uint_eq(f16->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER] - f8->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER],
                      saved);
    /* the gathered unit in memory: 2 B (FP8 and its transpose) against bf16's 2 B: the same */
    ck_assert_uint_eq(f8->ranks[0].mem[GS_MEM_GATHER], f16->ranks[0].mem[GS_MEM_GATHER]);
    gs_ledger_destroy(f8);
    f8s.strategy.fp8_params = 0; /* bf16 units plus their FP8 copies: 4 B per gathered element */
    ck_assert_int_eq(gs_ledger_create(&f8s, &fm, &f8, &err), GS_OK);
    ck_assert_uint_gt(f8->ranks[0].mem[GS_MEM_GATHER], f16->ranks[0].mem[GS_MEM_GATHER]);
    ck_assert_uint_eq(f8->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER], f16->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER]);
    gs_ledger_destroy(f8);
    gs_ledger_destroy(f16);
}
END_TEST

/* recompute_every 2 (fms-fsdp / torchtitan count: blocks 1, 3, ... of a stage, 0-based, are
 * checkpointed): a checkpointed llama2-7b block keeps its input 2 s b h (bf16) and rematerializes
 * the full set of test_llama_block; an unchecked one keeps that full set and rematerializes
 * nothing. Four blocks keep 2 x 2 sbh + 2 x full; blocks 1..2 one of each. Every 3rd of 8 blocks
 * is 2 and 5. */
START_TEST(test_recompute_every)
{
    gs_scenario sc;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: llama2-7b\ncluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n"
                               "strategy: {recompute: full, recompute_every: 2, flash_attention: false}\n",
                               &sc, &m);
    const double s = 4096, b = 1, h = 4096, a = 32, f = 11008;
    uint64_t full = (uint64_t)(16 * s * b * h + 6 * s * b * f + 2 * a * s * s * b), in = (uint64_t)(2 * s * b * h);
    gs_act_sizes act;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_act_sizes(&sc, &m, 0, &act, &err), GS_OK);
    ck_assert_uint_eq(gs_act_layer_stored(&act, 0), full);
    ck_assert_uint_eq(gs_act_layer_stored(&act, 1), in);
    ck_assert_uint_eq(gs_act_layer_remat(&act, 0), 0);
    ck_assert_uint_eq(gs_act_layer_remat(&act, 1), full);
    ck_assert_uint_eq(gs_act_stash(&act, 0, 3), 2 * in + 2 * full);
    ck_assert_uint_eq(gs_act_stash(&act, 1, 2), in + full);
    ck_assert_uint_eq(gs_act_stash(&act, 2, 1), 0);
    sc.strategy.recompute_every = 3;
    ck_assert_uint_eq(gs_strategy_checkpointed_in(&sc.strategy, 0, 7), 2);
    ck_assert(gs_strategy_checkpoints_layer(&sc.strategy, 2) && gs_strategy_checkpoints_layer(&sc.strategy, 5));
    ck_assert(!gs_strategy_checkpoints_layer(&sc.strategy, 3));
    sc.strategy.recompute = GS_RECOMPUTE_SELECTIVE; /* every N only under full recompute */
    ck_assert_uint_eq(gs_strategy_checkpointed_in(&sc.strategy, 0, 7), 0);
    gs_ledger_destroy(l);
}
END_TEST

/* Reference 6.5: 1F1B keeps min(p - stage, m) micro-batches in flight; GPipe keeps all m.
 * p = 4, m = 8: stage 0 holds 4, stage 3 holds 1; GPipe: 8 on every stage. */
START_TEST(test_pipeline_inflight)
{
    const char *base = "model: {layers: 8, hidden: 1024, heads: 16, ffn: 4096, vocab: 32000, seq: 1024}\n"
                       "cluster: {preset: dgx-a100-80g}\n"
                       "grid: {dp: 2, pp: 4}\nbatch: {global: 16, micro: 1}\n";
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    snprintf(y, sizeof y, "%sstrategy: {pipeline: 1f1b, sharding: no_shard}\n", base);
    gs_ledger *l = ledger_from(y, &s, &m);
    ck_assert_uint_eq(l->microbatches, 8);
    ck_assert_uint_eq(l->ranks[0].inflight_microbatches, 4);
    ck_assert_uint_eq(l->ranks[3].inflight_microbatches, 1);
    /* middle stages hold only their layers: 3 more micro-batches of stage 1's 2 layers */
    uint64_t per_layer = gs_ledger_layer_activation_bytes(&s.model, &s.strategy, 1, 1);
    ck_assert_uint_eq(l->ranks[1].mem[GS_MEM_PIPE_INFLIGHT], 2 * 2 * per_layer);
    /* 1F1B: stage 0 sends m=8 activations, receives gradients (sends none back); middle stages
     * send 8 + 8; the last sends 8 gradients. Each is s*b*h*2 B = 1024*1024*2. */
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_PP], 8ull * 1024 * 1024 * 2);
    ck_assert_uint_eq(l->ranks[1].traffic[GS_TRAFFIC_PP], 16ull * 1024 * 1024 * 2);
    ck_assert_uint_eq(l->ranks[3].traffic[GS_TRAFFIC_PP], 8ull * 1024 * 1024 * 2);
    gs_ledger_destroy(l);
    snprintf(y, sizeof y, "%sstrategy: {pipeline: gpipe, sharding: no_shard}\n", base);
    l = ledger_from(y, &s, &m);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(l->ranks[i].inflight_microbatches, 8);
    gs_ledger_destroy(l);
    /* interleaved, v = 2: stage 0 warm-up (4-0-1)*2 + (2-1)*4 + 1 = 11 chunks of 1 layer;
     * Korthikanti's factor 1 + (p-1)/(p v) = 1.375 on stage 0's 2 layers x 4 micro-batches = 11. */
    snprintf(y, sizeof y, "%sstrategy: {pipeline: interleaved, virtual_stages: 2, sharding: no_shard}\n", base);
    l = ledger_from(y, &s, &m);
    ck_assert_uint_eq(l->ranks[0].inflight_microbatches, 11);
    gs_ledger_destroy(l);
}
END_TEST

/* TP traffic (reference 6.4): 2 all-reduces of s*b*h in forward and 2 in backward per layer;
 * t = 2: each all-reduce sends 2 (t-1)/t x X = X. One stage of 4 layers, m = 1, plus the
 * embedding's and head's all-reduces: (16 + 2) x X, X = 1024*1*1024*2 B; plus the vocab-parallel
 * cross-entropy's all-gather of 12 B per token, of which a rank sends (t-1)/t of t x 1024 x 12 B. */
START_TEST(test_tp_traffic)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: {layers: 4, hidden: 1024, heads: 16, ffn: 4096, vocab: 32000, seq: 1024}\n"
                               "cluster: {preset: dgx-a100-80g}\ngrid: {dp: 4, tp: 2}\n"
                               "strategy: {sharding: no_shard, recompute: none}\n", &s, &m);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_TP], 18ull * 1024 * 1024 * 2 + 1024 * 12);
    gs_ledger_destroy(l);
}
END_TEST

/* Sizes that overflow 64-bit byte counts are refused, not wrapped. */
START_TEST(test_overflow_refused)
{
    const char *y = "model: {params: 2e18, layers: 100, hidden: 65536, seq: 4096}\n"
                    "cluster: {preset: dgx-a100-80g}\ngrid: {dp: 8}\n";
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_diag w;
    gs_diag_init(&w);
    gs_status st = gs_scenario_load_string(y, strlen(y), "big", &s, &err);
    if (st == GS_OK) {
        st = gs_scenario_mesh(&s, &m, &w, &err);
        ck_assert_int_eq(st, GS_OK);
        gs_ledger *l = NULL;
        st = gs_ledger_create(&s, &m, &l, &err);
        ck_assert_ptr_null(l);
    }
    ck_assert_int_eq(st, GS_ERR_OVERFLOW);
    ck_assert_ptr_nonnull(strstr(err.msg, "overflow"));
    gs_diag_fini(&w);
}
END_TEST

/* 10^15 parameters on 10^7 GPUs: large but representable; the ledger works. */
START_TEST(test_absurd_but_valid)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: {params: 1e15, layers: 1000, hidden: 65536, seq: 4096}\n"
                               "cluster: {preset: dgx-h100, nodes: 1250000}\n"
                               "grid: {dp: 1250000, tp: 8}\nstrategy: {sharding: full_shard}\n"
                               "batch: {global: 1250000}\n", &s, &m);
    ck_assert_uint_eq(l->states_total_bytes, 16000000000000000ull);
    /* 1e15 / 8 (tp) / 1,250,000 (dp) = 1e8 params per rank -> 1.6 GB of states, + padding */
    assert_rel((double)l->per_rank_state_bytes, 1.6e9, 1e-2, "states per rank");
    gs_ledger_destroy(l);
}
END_TEST

/* gs_ledger_create_numbers is the explained ledger without its text: every byte count of every
 * stage equal to gs_ledger_create's (the reference here; its figures are checked by hand above),
 * no lines, notes or peak description. The strategies cover each shard plan branch of the peak
 * loop: FSDP gathers per pass with prefetch, SHARD_GRAD_OP's gathers kept from the first
 * forward (the forward passes' memo), interleaved chunks (passes differing in their chunk and in
 * the root gradient), gpipe's all-forwards warm-up (more distinct passes than the memo's 64
 * entries), offload and recompute. */
START_TEST(test_numbers_only)
{
    static const char *strategies[] = {
        "{sharding: full_shard, prefetch: backward_post, forward_prefetch: true}",
        "{sharding: shard_grad_op, pipeline: interleaved, virtual_stages: 2}",
        "{sharding: full_shard, pipeline: interleaved, virtual_stages: 4, recompute: selective}",
        "{sharding: zero1, pipeline: gpipe}",
        "{sharding: no_shard, pipeline: 1f1b, recompute: full}",
        "{sharding: full_shard, offload: true, pipeline: gpipe}",
        "{sharding: hybrid_shard}",
    };
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        char y[1024];
        snprintf(y, sizeof y,
                 "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 4}\n"
                 "grid: {dp: 4, pp: 4, tp: 2}\nbatch: {global: 512, micro: 1}\nstrategy: %s\n",
                 strategies[i]);
        gs_scenario s;
        gs_mesh m;
        gs_error err;
        gs_error_init(&err);
        gs_ledger *full = ledger_from(y, &s, &m), *num = NULL;
        ck_assert_msg(gs_ledger_create_numbers(&s, &m, &num, &err) == GS_OK, "%s: %s", strategies[i], err.msg);
        ck_assert_uint_eq(num->nranks, full->nranks);
        ck_assert_uint_eq(num->peak_bytes, full->peak_bytes);
        ck_assert_uint_eq(num->per_rank_state_bytes, full->per_rank_state_bytes);
        ck_assert_uint_eq(num->traffic_bytes, full->traffic_bytes);
        ck_assert_uint_eq(num->gpu_bytes, full->gpu_bytes);
        ck_assert_uint_eq(num->microbatches, full->microbatches);
        ck_assert_uint_eq(num->nnotes, 0);
        for (int d = 0; d < GS_DIM_COUNT; d++)
            ck_assert_uint_eq(num->traffic_by_dim[d], full->traffic_by_dim[d]);
        for (size_t r = 0; r < full->nranks; r++) {
            const gs_ledger_rank *a = &full->ranks[r], *b = &num->ranks[r];
            ck_assert_msg(full->ranks[r].nlines > 0, "the explained ledger has lines");
            ck_assert_uint_eq(b->nlines, 0);
            ck_assert_str_eq(b->peak_where, "");
            ck_assert_uint_eq(b->peak_bytes, a->peak_bytes);
            ck_assert_uint_eq(b->state_bytes, a->state_bytes);
            ck_assert_uint_eq(b->host_bytes, a->host_bytes);
            ck_assert_uint_eq(b->inflight_microbatches, a->inflight_microbatches);
            ck_assert_uint_eq(b->traffic_bytes, a->traffic_bytes);
            for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
                ck_assert_msg(b->mem[k] == a->mem[k], "%s stage %zu %s: %llu != %llu", strategies[i], r,
                              gs_mem_kind_name((gs_mem_kind)k), (unsigned long long)b->mem[k],
                              (unsigned long long)a->mem[k]);
            for (int k = 0; k < GS_TRAFFIC_KIND_COUNT; k++)
                ck_assert_uint_eq(b->traffic[k], a->traffic[k]);
        }
        gs_ledger_destroy(num);
        gs_ledger_destroy(full);
    }
}
END_TEST

/* bucket_stages first, zero1, dp 5, pp 2, 4 blocks (h 256, ffn 512: 655,872 parameters each),
 * vocab 1000, bucket_mb 1 (524,288 bf16 elements). Stage 1 holds 2 blocks + the final norm and head
 * (256 + 256,000 = 256,256): P = 1,568,000, one bucket padded to N = 5: ceil(P / 5) = 313,600, so
 * it sends (N-1) x 313,600 x 2 B = 2,508,800 B in its reduce-scatter, and the same in its one
 * all-gather of the updated parameters. bucket_stages all: each block in 2 buckets of 327,936,
 * ceil(/5) = 65,588 each, and the root 256,256 -> 51,252: 4 x 65,588 + 51,252 = 313,604 padded
 * elements per rank, (N-1) x 313,604 x 2 = 2,508,832 B; its per-unit all-gathers pad each block
 * to ceil(655,872 / 5) = 131,175: 4 x (2 x 131,175 + 51,252) x 2 = 2,508,816 B. Stage 0 is the
 * same under both rules. */
START_TEST(test_bucket_stages_first_traffic)
{
    static const char *const rule[] = {"first", "all"};
    static const uint64_t rs1[] = {2508800, 2508832}, ag1[] = {2508800, 2508816};
    uint64_t rs0[2], ag0[2];
    for (int i = 0; i < 2; i++) {
        char y[512];
        snprintf(y, sizeof y,
                 "model: {layers: 4, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"
                 "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 5}\ngrid: {dp: 5, pp: 2}\n"
                 "strategy: {sharding: zero1, bucket_mb: 1, bucket_stages: %s}\nbatch: {global: 10}\n",
                 rule[i]);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_uint_eq(l->ranks[1].params, 1568000);
        ck_assert_uint_eq(l->ranks[1].traffic[GS_TRAFFIC_DP_REDUCE_SCATTER], rs1[i]);
        ck_assert_uint_eq(l->ranks[1].traffic[GS_TRAFFIC_DP_ALLGATHER], ag1[i]);
        rs0[i] = l->ranks[0].traffic[GS_TRAFFIC_DP_REDUCE_SCATTER];
        ag0[i] = l->ranks[0].traffic[GS_TRAFFIC_DP_ALLGATHER];
        gs_ledger_destroy(l);
    }
    ck_assert_uint_eq(rs0[0], rs0[1]);
    ck_assert_uint_eq(ag0[0], ag0[1]);
}
END_TEST


/* MoE models hold every expert on every rank (no expert parallelism): the ledger's states are the
 * total count's. Mixtral 8x7B (46,702,792,704 parameters, model.h's hand count in check_model):
 * full_shard on 8 with per-layer units of 1,451,270,144 and the root 262,148,096, both divisible by
 * 8: 46,702,792,704 / 8 x 16 B = 93,405,585,408 B per rank. With tp = 2 a block's slice is
 * q, o 4096 x 2048 each + k, v 4096 x 512 each + 8 experts x 3 x 4096 x 7168 + the router
 * 4096 x 8 + norms 8192 = 725,655,552; the stage: 32 of them + embedding 16000 x 4096 + head
 * 16000 x 4096 + 4096 = 23,352,053,760. */
START_TEST(test_moe_states)
{
    gs_scenario s;
    gs_mesh m;
    gs_ledger *l = ledger_from("model: mixtral-8x7b\ncluster: {preset: dgx-h200}\ngrid: {dp: 8}\n", &s, &m);
    ck_assert_uint_eq(l->params, 46702792704ull);
    ck_assert_uint_eq(l->ranks[0].params, 46702792704ull);
    ck_assert_uint_eq(l->per_rank_state_bytes, 93405585408ull);
    ck_assert_uint_eq(l->ranks[0].unit_params, 1451270144ull);
    gs_ledger_destroy(l);
    l = ledger_from("model: mixtral-8x7b\ncluster: {preset: dgx-h200}\ngrid: {dp: 4, tp: 2}\n", &s, &m);
    ck_assert_uint_eq(l->ranks[0].params, 23352053760ull);
    gs_ledger_destroy(l);
}
END_TEST

/* DeepSeek-V3 on pp = 2 (61 blocks: 31 + 30): stage 0 holds the 3 dense blocks (583,483,392 each),
 * 28 MoE blocks (11,507,286,016 each) and the embedding 129280 x 7168 = 926,679,040:
 * 324,881,137,664; stage 1 30 MoE blocks and the head 926,679,040 + 7168: 346,145,266,688; the
 * two add up to the model's 671,026,404,352. Every wrap policy partitions the same parameters. */
START_TEST(test_moe_dense_blocks)
{
    static const char *const wraps[] = {"layer", "model", "{min_params: 1}", "{min_params: 10000000}",
                                        "{min_params: 1000000000}"};
    for (size_t w = 0; w < sizeof wraps / sizeof wraps[0]; w++) {
        char y[512];
        snprintf(y, sizeof y,
                 "model: deepseek-v3\ncluster: {preset: dgx-h200, nodes: 2}\ngrid: {dp: 8, pp: 2}\n"
                 "strategy: {wrap: %s}\n",
                 wraps[w]);
        gs_scenario s;
        gs_mesh m;
        gs_ledger *l = ledger_from(y, &s, &m);
        ck_assert_uint_eq(l->ranks[0].params, 324881137664ull);
        ck_assert_uint_eq(l->ranks[1].params, 346145266688ull);
        for (uint64_t stage = 0; stage < 2; stage++) {
            gs_partition p;
            gs_error err;
            gs_error_init(&err);
            ck_assert_msg(gs_partition_stage(&s, &m, stage, &p, &err) == GS_OK, "%s", err.msg);
            uint64_t sum = 0;
            for (size_t u = 0; u < p.nunits; u++)
                sum += p.units[u].params;
            ck_assert_msg(sum == p.params, "wrap %s stage %llu: units %llu, stage %llu", wraps[w],
                          (unsigned long long)stage, (unsigned long long)sum, (unsigned long long)p.params);
            ck_assert_uint_eq(gs_partition_block_params(&p, 0), stage == 0 ? 583483392ull : 11507286016ull);
            ck_assert_uint_eq(gs_partition_block_params(&p, 3), 11507286016ull);
            for (int64_t layer = 0; layer < (int64_t)p.layers && w == 0; layer++)
                ck_assert(!gs_partition_root_holds_layer(&p, layer));
            gs_partition_fini(&p);
        }
        gs_ledger_destroy(l);
    }
}
END_TEST

static Suite *ledger_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *seed = tcase_create("seed");
    tcase_add_test(seed, test_states_16_bytes);
    tcase_add_test(seed, test_grid_a_full_shard_8);
    tcase_add_test(seed, test_s7_traffic_64);
    tcase_add_test(seed, test_s12_pure_fsdp_64);
    tcase_add_test(seed, test_grid_b);
    suite_add_tcase(s, seed);
    TCase *mem = tcase_create("memory");
    tcase_add_test(mem, test_zero_stages);
    tcase_add_test(mem, test_precision_aware_optimizer);
    tcase_add_test(mem, test_exact_llama2_7b);
    tcase_add_test(mem, test_whole_model_wrap);
    tcase_add_test(mem, test_korthikanti_table2);
    tcase_add_test(mem, test_llama_block);
    tcase_add_test(mem, test_fp8);
    tcase_add_test(mem, test_recompute_every);
    tcase_add_test(mem, test_pipeline_inflight);
    tcase_add_test(mem, test_numbers_only);
    tcase_add_test(mem, test_moe_states);
    tcase_add_test(mem, test_moe_dense_blocks);
    suite_add_tcase(s, mem);
    TCase *traffic = tcase_create("traffic");
    tcase_add_test(traffic, test_hsdp);
    tcase_add_test(traffic, test_hsdp_one_rank_per_node);
    tcase_add_test(traffic, test_tp_traffic);
    tcase_add_test(traffic, test_bucket_stages_first_traffic);
    suite_add_tcase(s, traffic);
    TCase *lim = tcase_create("limits");
    tcase_set_timeout(lim, 30);
    tcase_add_test(lim, test_overflow_refused);
    tcase_add_test(lim, test_absurd_but_valid);
    suite_add_tcase(s, lim);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ledger_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
