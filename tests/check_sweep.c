/* Check suite for engine/sweep: --vary parsing and ranges written out by hand, the point order,
 * a point applied to a scenario (the grid re-derived by hand), shard specifications; and the
 * planner's shards (engine/plan opts shard_index/shard_count) against the serial search. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan.h"
#include "engine/sweep.h"
#include "sim/compute.h"
#include "sim/bound.h"
#include "sim/sim.h"

static const char tiny_yaml[] =
    "model: {name: tiny, layers: 4, hidden: 256, heads: 4, kv_heads: 2, ffn: 688, vocab: 1024, seq: 128}\n"
    "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
    "grid: {dp: 2, pp: 2, tp: 2}\n"
    "strategy: {sharding: full_shard}\n"
    "batch: {global: 16, micro: 1}\n";

static gs_scenario base;

static void load_base(void)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(tiny_yaml, strlen(tiny_yaml), "check-sweep", &base, &err) == GS_OK, "%s",
                  err.msg);
}

static void add_ok(gs_sweep *sw, const char *arg)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_sweep_add(sw, arg, &err) == GS_OK, "%s: %s", arg, err.msg);
}

static void add_fails(const char *arg, const char *needle)
{
    gs_sweep sw;
    gs_error err;
    gs_sweep_init(&sw);
    gs_error_init(&err);
    ck_assert_int_eq(gs_sweep_add(&sw, arg, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, needle), "%s: '%s' lacks '%s'", arg, err.msg, needle);
}

static void assert_values(const gs_sweep_axis *ax, const char *const *want, size_t n)
{
    ck_assert_uint_eq(ax->n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(ax->values[i], want[i]);
}

START_TEST(test_parse_ranges)
{
    gs_sweep sw;
    gs_sweep_init(&sw);
    /* doubling ranges, by hand: 1..64 = 2^0..2^6; 3..20 stops at 12 (24 > 20); 25..400 Gb/s */
    add_ok(&sw, "gpus=1..64");
    add_ok(&sw, "micro=3..20");
    add_ok(&sw, "nic_gbps=25..400");
    add_ok(&sw, "global-batch=7..7");
    static const char *const g[] = {"1", "2", "4", "8", "16", "32", "64"};
    static const char *const m[] = {"3", "6", "12"};
    static const char *const n[] = {"25", "50", "100", "200", "400"};
    static const char *const b[] = {"7"};
    assert_values(&sw.axes[0], g, 7);
    assert_values(&sw.axes[1], m, 3);
    assert_values(&sw.axes[2], n, 5);
    assert_values(&sw.axes[3], b, 1);
    ck_assert_int_eq(sw.axes[3].key, GS_SWEEP_GLOBAL_BATCH);
    ck_assert_uint_eq(gs_sweep_points(&sw), 7 * 3 * 5 * 1);
}
END_TEST

START_TEST(test_parse_lists)
{
    gs_sweep sw;
    gs_sweep_init(&sw);
    add_ok(&sw, "sharding=full_shard,zero2,no_shard");
    add_ok(&sw, "recompute=none,full");
    add_ok(&sw, "tp=1,2,4");
    add_ok(&sw, "nic=ib-hdr");
    static const char *const s[] = {"full_shard", "zero2", "no_shard"};
    static const char *const t[] = {"1", "2", "4"};
    assert_values(&sw.axes[0], s, 3);
    assert_values(&sw.axes[2], t, 3);
    ck_assert_int_eq(sw.axes[3].key, GS_SWEEP_NIC);
    ck_assert_uint_eq(gs_sweep_points(&sw), 18);
}
END_TEST

START_TEST(test_parse_errors)
{
    add_fails("bogus=1,2", "expected one of gpus, nodes");
    add_fails("tp", "expected KEY=V1,V2");
    add_fails("tp=", "no values");
    add_fails("tp=1,,2", "no empty values");
    add_fails("tp=0", "expected a positive integer");
    add_fails("tp=two", "expected a positive integer");
    add_fails("sharding=full", "expected no_shard, shard_grad_op");
    add_fails("sharding=a..b", "ranges are for numeric keys");
    add_fails("gpus=64..8", "expected A <= B");
    add_fails("nic=ib-hdx", "did you mean 'ib-hdr'");
    add_fails("pipeline=interleaved", "expected 1f1b or gpipe");
    add_fails("offload=2", "expected 0 or 1");
    add_fails("tp_comm_overlap=2", "expected 0 or 1");
    add_fails("flash_attention=2", "expected 0 or 1");
    add_fails("cross_entropy=liger", "expected unfused or fused");
    add_fails("sp=0..1", "ranges are for numeric keys");
    add_fails("nic_gbps=-5", "positive line rate");
    gs_sweep sw;
    gs_error err;
    gs_sweep_init(&sw);
    gs_error_init(&err);
    add_ok(&sw, "gpus=8,16");
    ck_assert_int_eq(gs_sweep_add(&sw, "nodes=1,2", &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "both gpus and nodes"));
    ck_assert_int_eq(gs_sweep_add(&sw, "gpus=32", &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "given twice"));
    ck_assert_int_eq(gs_sweep_add(&sw, "gpus=1..9223372036854775807", &err), GS_ERR_INPUT); /* still a dup */
}
END_TEST

START_TEST(test_point_order)
{
    gs_sweep sw;
    gs_sweep_init(&sw);
    add_ok(&sw, "tp=1,2,4");       /* 3 values: slowest */
    add_ok(&sw, "micro=1,2,4,8");  /* 4 values: fastest */
    size_t idx[GS_SWEEP_MAX_AXES];
    /* nested loops: point = i_tp * 4 + i_micro */
    for (uint64_t p = 0; p < 12; p++) {
        gs_sweep_point_indices(&sw, p, idx);
        ck_assert_uint_eq(idx[0], p / 4);
        ck_assert_uint_eq(idx[1], p % 4);
    }
}
END_TEST

static gs_status apply_one(const char *arg, uint64_t point, gs_scenario *out, gs_error *err)
{
    gs_sweep sw;
    gs_sweep_init(&sw);
    add_ok(&sw, arg);
    return gs_sweep_apply(&base, &sw, point, out, err);
}

START_TEST(test_apply_grid)
{
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    /* tp varied on 8 GPUs with pp 2: dp = 8 / (tp x 2) = 4, 2, 1 */
    for (uint64_t i = 0; i < 3; i++) {
        ck_assert_int_eq(apply_one("tp=1,2,4", i, &s, &err), GS_OK);
        ck_assert_uint_eq(s.grid.tp, 1u << i);
        ck_assert_uint_eq(s.grid.dp, 4u >> i);
        ck_assert_uint_eq(s.cluster.nodes, 1);
    }
    /* tp 8 x pp 2 = 16 does not divide 8 GPUs */
    ck_assert_int_eq(apply_one("tp=8", 0, &s, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "not divisible by tp x pp"));
    /* 16 GPUs: 2 nodes of 8, dp = 16 / 4 = 4 */
    ck_assert_int_eq(apply_one("gpus=16", 0, &s, &err), GS_OK);
    ck_assert_uint_eq(s.cluster.nodes, 2);
    ck_assert_uint_eq(s.cluster.gpus_per_node, 8);
    ck_assert_uint_eq(s.grid.dp, 4);
    /* 4 GPUs: one partial node of 4, dp = 1 */
    ck_assert_int_eq(apply_one("gpus=4", 0, &s, &err), GS_OK);
    ck_assert_uint_eq(s.cluster.nodes, 1);
    ck_assert_uint_eq(s.cluster.gpus_per_node, 4);
    ck_assert_uint_eq(s.grid.dp, 1);
    /* 12 GPUs is not whole 8-GPU nodes */
    ck_assert_int_eq(apply_one("gpus=12", 0, &s, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "whole number of 8-GPU nodes"));
    /* nodes 3: 24 GPUs, dp 6 */
    ck_assert_int_eq(apply_one("nodes=3", 0, &s, &err), GS_OK);
    ck_assert_uint_eq(s.grid.dp, 6);
    /* dp alone sets the GPU count: dp 4 x pp 2 x tp 2 = 16 = 2 nodes; dp 1 -> 4 GPUs, one partial node */
    ck_assert_int_eq(apply_one("dp=1,4", 1, &s, &err), GS_OK);
    ck_assert_uint_eq(s.grid.dp, 4);
    ck_assert_uint_eq(s.cluster.nodes, 2);
    ck_assert_int_eq(apply_one("dp=1,4", 0, &s, &err), GS_OK);
    ck_assert_uint_eq(s.cluster.nodes * s.cluster.gpus_per_node, 4);
}
END_TEST

START_TEST(test_apply_values)
{
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    /* a line rate of 100 Gb/s on the preset's 200 Gb/s HDR NIC halves its achievable bandwidth */
    double bw200 = base.cluster.nic.bw;
    ck_assert_double_eq_tol(base.cluster.nic.gbps, 200.0, 1e-9);
    ck_assert_int_eq(apply_one("nic_gbps=100", 0, &s, &err), GS_OK);
    ck_assert_double_eq_tol(s.cluster.nic.gbps, 100.0, 1e-9);
    ck_assert_double_eq_tol(s.cluster.nic.bw, bw200 / 2, bw200 * 1e-12);
    /* no_shard keeps its gathered params: no reshard after forward */
    ck_assert_int_eq(apply_one("sharding=no_shard", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_NO_SHARD);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 0);
    ck_assert_int_eq(apply_one("recompute=selective", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_SELECTIVE);
    ck_assert_int_eq(apply_one("micro=4", 0, &s, &err), GS_OK);
    ck_assert_uint_eq(s.batch.micro_seqs, 4);
    /* the fabric preset replaces the intra-node fabric: NCCL's 12 GB/s for PCIe gen3 (its table row) */
    ck_assert_int_eq(apply_one("fabric=pcie-gen3", 0, &s, &err), GS_OK);
    ck_assert_str_eq(s.cluster.intra.name, "pcie-gen3");
    ck_assert_double_eq_tol(s.cluster.intra.nccl_bw, 12e9, 1e3);
    /* the strategy switches */
    ck_assert_int_eq(apply_one("sp=1", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.sequence_parallel, 1);
    ck_assert_int_eq(apply_one("tp_comm_overlap=1", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.tp_comm_overlap, 1);
    ck_assert_int_eq(apply_one("overlap_param_gather=1", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.overlap_param_gather, 1);
    ck_assert_int_eq(apply_one("overlap_param_gather=0", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.overlap_param_gather, 0);
    /* the kernel choices */
    ck_assert_int_eq(apply_one("flash_attention=0", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.flash_attention, 0);
    ck_assert_int_eq(apply_one("cross_entropy=fused", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.cross_entropy, GS_XENT_FUSED);
    ck_assert_int_eq(apply_one("cross_entropy=unfused", 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.cross_entropy, GS_XENT_UNFUSED);
    /* varying sharding away from zero1/zero2 drops overlap_param_gather (FSDP gathers anyway),
     * unless it is varied too */
    gs_scenario z = base;
    z.strategy.sharding = GS_SHARD_ZERO1;
    z.strategy.overlap_param_gather = 1;
    gs_sweep sw;
    gs_sweep_init(&sw);
    add_ok(&sw, "sharding=zero2,full_shard");
    ck_assert_int_eq(gs_sweep_apply(&z, &sw, 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.overlap_param_gather, 1);
    ck_assert_int_eq(gs_sweep_apply(&z, &sw, 1, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.overlap_param_gather, 0);
    add_ok(&sw, "overlap_param_gather=1");
    ck_assert_int_eq(gs_sweep_apply(&z, &sw, 1, &s, &err), GS_OK); /* full_shard, kept: the mesh check refuses it */
    ck_assert_int_eq(s.strategy.overlap_param_gather, 1);
    /* likewise Megatron-Core's bucket rule (bucket_stages first) for shardings without resident
     * gradient buckets: kept on no_shard, dropped on zero2 */
    z.strategy.bucket_stages = GS_BUCKET_STAGES_FIRST;
    gs_sweep_init(&sw); /* plain storage: init empties it */
    add_ok(&sw, "sharding=no_shard,zero2");
    ck_assert_int_eq(gs_sweep_apply(&z, &sw, 0, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.bucket_stages, GS_BUCKET_STAGES_FIRST);
    ck_assert_int_eq(gs_sweep_apply(&z, &sw, 1, &s, &err), GS_OK);
    ck_assert_int_eq(s.strategy.bucket_stages, GS_BUCKET_STAGES_ALL);
    /* precision: fp8 on an A100 is refused (no FP8 tensor cores); on an H100 it is bf16 with the
     * framework's recipe (full_shard: fsdp1, current scaling), and back to bf16 turns it off */
    ck_assert_int_eq(apply_one("precision=fp8", 0, &s, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "has no FP8 tensor cores"));
    gs_scenario h = base;
    h.cluster.gpu = *gs_gpu_preset_find("h100-sxm");
    h.strategy.sharding = GS_SHARD_FULL_SHARD;
    h.strategy.framework = GS_FW_AUTO;
    gs_sweep_init(&sw);
    add_ok(&sw, "precision=fp8,BF16,fp32");
    ck_assert_str_eq(sw.axes[0].values[1], "bf16");
    ck_assert_int_eq(gs_sweep_apply(&h, &sw, 0, &s, &err), GS_OK);
    ck_assert(s.strategy.precision == GS_PREC_BF16 && s.strategy.fp8 == GS_FP8_CURRENT);
    h = s;
    ck_assert_int_eq(gs_sweep_apply(&h, &sw, 2, &s, &err), GS_OK);
    ck_assert(s.strategy.precision == GS_PREC_FP32 && s.strategy.fp8 == GS_FP8_OFF);
    /* context parallelism's exchange: from a hierarchical base (cp 8 = 2 x 4), cp_comm p2p drops
     * the a2a level; a2a+p2p keeps it; cp_a2a varied beside it sets it (1: none) */
    gs_scenario c = base;
    c.grid.tp = c.grid.pp = 1; /* the base's 8 GPUs as cp 8 */
    c.grid.cp = 8;
    c.grid.cp_a2a = 2;
    c.strategy.cp_comm = GS_CP_A2A_P2P;
    gs_sweep_init(&sw);
    add_ok(&sw, "cp_comm=p2p,A2A+P2P");
    ck_assert_str_eq(sw.axes[0].values[1], "a2a+p2p");
    ck_assert_int_eq(gs_sweep_apply(&c, &sw, 0, &s, &err), GS_OK);
    ck_assert(s.strategy.cp_comm == GS_CP_P2P && s.grid.cp_a2a == 0);
    ck_assert_int_eq(gs_sweep_apply(&c, &sw, 1, &s, &err), GS_OK);
    ck_assert(s.strategy.cp_comm == GS_CP_A2A_P2P && s.grid.cp_a2a == 2);
    add_ok(&sw, "cp_a2a=1,4");
    ck_assert_int_eq(gs_sweep_apply(&c, &sw, 1, &s, &err), GS_OK); /* p2p, cp_a2a 4: kept, the check refuses */
    ck_assert(s.strategy.cp_comm == GS_CP_P2P && s.grid.cp_a2a == 4);
    ck_assert_int_eq(gs_sweep_apply(&c, &sw, 2, &s, &err), GS_OK);
    ck_assert(s.strategy.cp_comm == GS_CP_A2A_P2P && s.grid.cp_a2a == 0);
    gs_sweep_init(&sw);
    ck_assert_int_eq(gs_sweep_add(&sw, "cp_comm=ring", &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "expected p2p, all_gather, a2a or a2a+p2p"));
    /* the base is borrowed, not changed */
    ck_assert_uint_eq(base.grid.dp, 2);
    ck_assert_double_eq(base.cluster.nic.bw, bw200);
}
END_TEST

START_TEST(test_shard_parse)
{
    uint64_t i, n;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_shard_parse("--shard", "1/3", &i, &n, &err), GS_OK);
    ck_assert_uint_eq(i, 1);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(gs_shard_parse("--shard", "0/1", &i, &n, &err), GS_OK);
    static const char *const bad[] = {"3/3", "1/0", "1/", "/3", "a/3", "1/3x", "-1/3", "13", ""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_msg(gs_shard_parse("--shard", bad[k], &i, &n, &err) == GS_ERR_INPUT, "'%s' accepted", bad[k]);
        ck_assert_ptr_nonnull(strstr(err.msg, "--shard"));
    }
}
END_TEST

/* ---- the planner's shards against the serial search ---- */

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

static gs_plan *plan_shard(const gs_scenario *s, size_t keep, uint64_t index, uint64_t count)
{
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.eval = eval_sim;
    o.keep = keep;
    o.shard_index = index;
    o.shard_count = count;
    gs_sim_bound *bound = NULL;
    ck_assert_int_eq(gs_sim_bound_create(&bound), GS_OK);
    o.bound = gs_sim_step_bound;
    o.bound_ctx = bound;
    o.comm_bound = gs_sim_comm_bound;
    gs_plan *p = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_plan_run(s, &o, &p, &err) == GS_OK, "%s", err.msg);
    gs_sim_bound_destroy(bound);
    return p;
}

static int by_rank(const void *a, const void *b)
{
    const gs_plan_candidate *x = a, *y = b;
    if (x->tokens_per_s != y->tokens_per_s)
        return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    double hx = (double)x->gpu_bytes - (double)x->peak_bytes, hy = (double)y->gpu_bytes - (double)y->peak_bytes;
    if (hx != hy)
        return hx > hy ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

START_TEST(test_plan_shards_union)
{
    /* the 8-GPU node with a 16-sequence batch; keep 4 so the bound (R4) prunes */
    enum { KEEP = 4, SHARDS = 3 };
    gs_plan *serial = plan_shard(&base, KEEP, 0, 0);
    gs_plan_candidate all[4096];
    size_t n = 0;
    uint64_t evaluated = 0;
    for (uint64_t sh = 0; sh < SHARDS; sh++) {
        gs_plan *p = plan_shard(&base, KEEP, sh, SHARDS);
        ck_assert_uint_eq(p->evaluated, serial->evaluated); /* the enumeration is every shard's */
        for (size_t i = 0; i < p->ncands && i < KEEP; i++) {
            ck_assert_uint_lt(n, 4096);
            all[n++] = p->cands[i];
        }
        evaluated += p->ncands;
        gs_plan_destroy(p);
    }
    ck_assert_uint_gt(evaluated, 0);
    qsort(all, n, sizeof *all, by_rank);
    ck_assert_uint_ge(n, KEEP);
    for (size_t i = 0; i < KEEP; i++) {
        ck_assert_uint_eq(all[i].key, serial->cands[i].key);
        ck_assert_double_eq(all[i].step_time_s, serial->cands[i].step_time_s);
        ck_assert_uint_eq(all[i].dp, serial->cands[i].dp);
        ck_assert_int_eq(all[i].strategy.sharding, serial->cands[i].strategy.sharding);
    }
    gs_plan_destroy(serial);
}
END_TEST

static Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *parse = tcase_create("parse");
    tcase_add_test(parse, test_parse_ranges);
    tcase_add_test(parse, test_parse_lists);
    tcase_add_test(parse, test_parse_errors);
    tcase_add_test(parse, test_point_order);
    tcase_add_test(parse, test_shard_parse);
    suite_add_tcase(s, parse);
    TCase *apply = tcase_create("apply");
    tcase_add_checked_fixture(apply, load_base, NULL);
    tcase_add_test(apply, test_apply_grid);
    tcase_add_test(apply, test_apply_values);
    suite_add_tcase(s, apply);
    TCase *shards = tcase_create("plan shards");
    tcase_add_checked_fixture(shards, load_base, NULL);
    tcase_add_test(shards, test_plan_shards_union);
    tcase_set_timeout(shards, 300);
    suite_add_tcase(s, shards);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sweep_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
