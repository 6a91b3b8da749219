/* Check suite for expert tensor parallelism below tp (grid.etp, Megatron-Core's
 * --expert-tensor-parallel-size): the expert grid's EP, EDP and ETP groups against a brute-force
 * reading of each stage's ranks, the refusals, the expert units and their reduction group, the
 * schedule's dispatch, expert-TP exchanges and grouped GEMMs against hand counts, Megatron-LM's
 * flag both ways, and the simulated effect of keeping the all-to-alls inside a node. Expected
 * values are hand arithmetic written beside each assertion, or a second implementation. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/partition.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

/* ---- the mesh ------------------------------------------------------------------------------- */

/* The expert grid read by hand: a stage's ranks numbered f = tp position + tp x DP position, then
 * f = et + etp x (e + ep x ed). Two ranks share an EP group when they share the stage, et and
 * ed; an EDP group when they share the stage, et and e; an ETP group when they share the stage,
 * e and ed. */
static void expert_coords(const gs_mesh *m, uint64_t r, uint64_t etp, uint64_t ep, uint64_t out[4])
{
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(m, r, c);
    uint64_t f = c[GS_DIM_TP] + m->size[GS_DIM_TP] * c[GS_DIM_DP];
    out[0] = c[GS_DIM_PP];
    out[1] = f % etp;
    out[2] = (f / etp) % ep;
    out[3] = f / (etp * ep);
}

/* tp 4, dp 2 x cp 2, pp 2 (32 ranks), in Megatron's order and with pp innermost, etp 1 and 2,
 * every ep that divides the stage's 16 / etp expert ranks from 2 to 16: each rank's three groups
 * equal the brute-force sets (members ascending), and each kind's indices number its groups
 * once each. */
START_TEST(test_etp_groups)
{
    static const gs_dim orders[2][GS_DIM_COUNT] = {{GS_DIM_TP, GS_DIM_DP, GS_DIM_PP}, {GS_DIM_PP, GS_DIM_TP, GS_DIM_DP}};
    static const gs_group_kind kinds[3] = {GS_GROUP_EP, GS_GROUP_EDP, GS_GROUP_ETP};
    gs_error err;
    gs_error_init(&err);
    for (int o = 0; o < 2; o++)
        for (uint64_t etp = 1; etp <= 2; etp++)
            for (uint64_t ep = 2; ep <= 16 / etp; ep *= 2) {
                gs_mesh m;
                ck_assert_int_eq(gs_mesh_init(&m, 4, 4, 2, orders[o], 8, &err), GS_OK);
                ck_assert_int_eq(gs_mesh_set_cp(&m, 2, 0, &err), GS_OK);
                ck_assert_int_eq(gs_mesh_set_etp(&m, etp, &err), GS_OK);
                ck_assert_int_eq(gs_mesh_set_ep(&m, ep, &err), GS_OK);
                ck_assert(gs_mesh_expert_split(&m));
                ck_assert_uint_eq(gs_mesh_edp_size(&m), 16 / (etp * ep));
                for (int k = 0; k < 3; k++) {
                    uint64_t want_n = k == 0 ? ep : k == 1 ? 16 / (etp * ep) : etp;
                    int seen[32] = {0};
                    for (uint64_t r = 0; r < m.world; r++) {
                        uint64_t mem[32], size, me[4];
                        uint64_t n = gs_group_members_of(&m, kinds[k], r, mem);
                        uint64_t idx = gs_group_of(&m, kinds[k], r, &size);
                        ck_assert_uint_eq(n, want_n);
                        ck_assert_uint_eq(size, n);
                        ck_assert_uint_lt(idx, 32 / n);
                        expert_coords(&m, r, etp, ep, me);
                        uint64_t count = 0;
                        for (uint64_t r2 = 0; r2 < m.world; r2++) {
                            uint64_t c2[4];
                            expert_coords(&m, r2, etp, ep, c2);
                            int same = c2[0] == me[0] &&
                                       (k == 0   ? c2[1] == me[1] && c2[3] == me[3]  /* EP: et, ed */
                                        : k == 1 ? c2[1] == me[1] && c2[2] == me[2]  /* EDP: et, e */
                                                 : c2[2] == me[2] && c2[3] == me[3]); /* ETP: e, ed */
                            if (!same)
                                continue;
                            ck_assert_uint_lt(count, n);
                            ck_assert_uint_eq(mem[count], r2);
                            count++;
                        }
                        ck_assert_uint_eq(count, n);
                        if (mem[0] == r)
                            seen[idx]++;
                    }
                    for (uint64_t i = 0; i < 32 / want_n; i++)
                        ck_assert_int_eq(seen[i], 1);
                }
            }
}
END_TEST

/* Refused: etp not dividing tp, etp below tp with dp inside tp, and an ep that does not divide
 * the 4 / 2 x 4 = 8 expert ranks of a stage. etp = tp leaves the mesh as it was. */
START_TEST(test_etp_mesh_refusals)
{
    static const gs_dim dp_inner[GS_DIM_COUNT] = {GS_DIM_DP, GS_DIM_TP, GS_DIM_PP};
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 4, 4, 1, NULL, 8, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_etp(&m, 3, &err), GS_ERR_INPUT);
    ck_assert_int_eq(gs_mesh_set_etp(&m, 4, &err), GS_OK);
    ck_assert_uint_eq(m.etp, 0);
    ck_assert(!gs_mesh_expert_split(&m));
    ck_assert_int_eq(gs_mesh_set_etp(&m, 2, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_ep(&m, 16, &err), GS_ERR_INPUT);
    ck_assert_int_eq(gs_mesh_set_ep(&m, 8, &err), GS_OK); /* more than dp = 4: spans TP ranks */
    ck_assert_int_eq(gs_mesh_init(&m, 4, 4, 1, dp_inner, 16, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_etp(&m, 1, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "directly inside dp"), "%s", err.msg);
}
END_TEST

/* ---- scenarios ------------------------------------------------------------------------------ */

/* A 4-layer MoE model: hidden 256, 8 heads of 32 (2 KV heads), SwiGLU, 8 experts of 128, top 2,
 * sequence 256, on 2 DGX H100 nodes. */
#define TINY_MOE                                                                                               \
    "model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, "    \
    "moe: {experts: 8, top_k: 2, expert_ffn: 128}}\ncluster: {preset: dgx-h100, nodes: 2}\n"

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

START_TEST(test_etp_scenario_refusals)
{
    load_fails(TINY_MOE "grid: {dp: 8, ep: 4, etp: 1, tp: 2}\nstrategy: {sharding: hybrid_shard, sequence_parallel: "
               "true}\n", "sharding no_shard, zero1");
    load_fails(TINY_MOE "grid: {dp: 8, etp: 1, tp: 2}\nstrategy: {sharding: hybrid_shard, sequence_parallel: true}\n",
               "expert tensor parallelism below tp is built for");
    load_fails("model: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 4, tp: 2, etp: 1}\n",
               "has no experts");
    /* one data-parallel rank: the experts' reduction over the TP ranks is not built */
    load_fails("model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, "
               "moe: {experts: 8, top_k: 2, expert_ffn: 128}}\ncluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}\n"
               "grid: {dp: 1, tp: 2, etp: 1}\nstrategy: {sequence_parallel: true}\n", "with one data-parallel rank");
}
END_TEST

/* ---- partition ------------------------------------------------------------------------------ */

/* TINY_MOE, dp 8 x tp 2, ep 4, etp 1: each rank holds 8 / 4 = 2 whole experts (etp 1), 3 linears
 * of 256 x 128 each: 2 x 3 x 32,768 = 196,608 parameters, twice the 98,304 of etp = tp = 2; the
 * block's other unit is the same under both. The expert units shard over EDP groups of 2 x 8 /
 * (1 x 4) = 4 ranks (under etp = tp: 8 / 4 = 2). ep 1 with etp 1 still splits the units: the
 * experts, whole on every rank, reduce over all 16 ranks of the stage. */
START_TEST(test_etp_partition)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    const char *fmt = TINY_MOE "grid: {dp: 8, ep: %d, etp: %d, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: "
                               "true}\n";
    char y[1024];
    gs_partition p1, p2, p0;
    gs_shard_plan pl1, pl2, pl0;
    snprintf(y, sizeof y, fmt, 4, 1);
    load(y, &s, &m);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p1, &err), GS_OK);
    gs_shard_plan_init(&s, &m, 0, 2, &pl1);
    snprintf(y, sizeof y, fmt, 4, 2);
    load(y, &s, &m);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p2, &err), GS_OK);
    gs_shard_plan_init(&s, &m, 0, 2, &pl2);
    snprintf(y, sizeof y, fmt, 1, 1);
    load(y, &s, &m);
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p0, &err), GS_OK);
    gs_shard_plan_init(&s, &m, 0, 2, &pl0);
    ck_assert_uint_eq(p1.nunits, 2 * 4 + 1);
    ck_assert_uint_eq(p0.nunits, 2 * 4 + 1);
    for (int l = 0; l < 4; l++) {
        ck_assert(p1.units[2 * l + 1].expert && p2.units[2 * l + 1].expert && p0.units[2 * l + 1].expert);
        ck_assert_uint_eq(p1.units[2 * l + 1].params, 196608);
        ck_assert_uint_eq(p2.units[2 * l + 1].params, 98304);
        ck_assert_uint_eq(p0.units[2 * l + 1].params, 8ull * 3 * 32768);
        ck_assert_uint_eq(p1.units[2 * l].params, p2.units[2 * l].params);
    }
    ck_assert_uint_eq(gs_shard_ranks(&pl1, 1), 4);
    ck_assert_uint_eq(gs_shard_ranks(&pl2, 1), 2);
    ck_assert_uint_eq(gs_shard_ranks(&pl0, 1), 16);
    ck_assert_uint_eq(gs_shard_ranks(&pl1, 0), 8);
    gs_partition_fini(&p1);
    gs_partition_fini(&p2);
    gs_partition_fini(&p0);
}
END_TEST

/* ---- schedule ------------------------------------------------------------------------------- */

static gs_schedule *build(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    load(yaml, s, m);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(s, m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, s, &err) == GS_OK, "validate: %s", err.msg);
    return sch;
}

/* Events of rank list i with role and phase: their count, bytes, FLOPs, and the group and size
 * of the last. */
static size_t role_events(const gs_schedule *sch, size_t i, int role, int phase, uint64_t *bytes, double *flops,
                          int *group, uint64_t *gsize)
{
    size_t n = 0;
    *bytes = 0;
    *flops = 0.0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role != role || e->phase != phase)
            continue;
        n++;
        *bytes += e->bytes;
        *flops += e->flops;
        *group = e->group;
        *gsize = e->group_size;
    }
    return n;
}

/* TINY_MOE on dp 8 x tp 2, ep 4, etp 1, zero1, no recompute, 2 micro-batches of 1 sequence: each
 * TP rank's 128 sequence-parallel tokens, routed to 2 experts each, are 256 rows of 256 x 2 B =
 * 131,072 B per all-to-all over an EP group of 4 consecutive ranks (both TP ranks of 2 DP
 * positions); no expert-TP exchange (etp 1). The grouped GEMMs of one block and micro-batch run
 * 256 rows over 2 local experts (m = 128) of the whole expert_ffn 128: up 2 x 128 x 256 x 256 x 2
 * = 33,554,432 FLOPs, down 2 x 128 x 256 x 128 x 2 = 16,777,216: the same 2 T k 3 h f_e / tp as
 * under etp = tp (the stage's expert FLOPs split over the same 16 ranks). The expert gradients
 * reduce over EDP groups of 4. With tp 4, etp 2, ep 2 on dp 4: 64 tokens per rank, 128 rows =
 * 65,536 B per all-to-all; the expert-TP gather runs over an ETP group of 2 (not the TP group of
 * 4) and carries 2 x 65,536 = 131,072 B; its text dump loads back to the same schedule, etp 2. */
START_TEST(test_etp_schedule)
{
    char y[1024];
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, etp: 1, tp: 2}\nstrategy: {sharding: zero1, "
             "sequence_parallel: true, recompute: none, flash_attention: true}\nbatch: {global: 16}\n");
    gs_scenario s;
    gs_mesh m;
    gs_schedule *sch = build(y, &s, &m);
    uint64_t b, gsize;
    double f, up, down;
    int g;
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f, &g, &gsize), 8);
    ck_assert_uint_eq(b, 8ull * 131072);
    ck_assert_int_eq(g, GS_GROUP_EP);
    ck_assert_uint_eq(gsize, 4);
    uint64_t mem[4];
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_EP, 3, mem), 4);
    ck_assert(mem[0] == 0 && mem[1] == 1 && mem[2] == 2 && mem[3] == 3);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_ETP_IN, GS_PHASE_FWD, &b, &f, &g, &gsize), 0);
    role_events(sch, 3, GS_ROLE_EXPERT_UP, GS_PHASE_FWD, &b, &up, &g, &gsize);
    role_events(sch, 3, GS_ROLE_EXPERT_DOWN, GS_PHASE_FWD, &b, &down, &g, &gsize);
    ck_assert_double_eq(up, 8.0 * 33554432.0);
    ck_assert_double_eq(down, 8.0 * 16777216.0);
    ck_assert_double_eq(up + down, 8.0 * 2.0 * 256 * 2 * 3 * 256 * 128 / 2);
    size_t edp = 0;
    for (size_t k = 0; k < sch->ranks[3].nevents; k++) {
        const gs_event *e = &sch->ranks[3].events[k];
        if (e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_EDP) {
            ck_assert_uint_eq(e->group_size, 4);
            edp++;
        }
    }
    ck_assert_uint_ge(edp, 4);
    gs_schedule_destroy(sch);

    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 4, ep: 2, etp: 2, tp: 4}\nstrategy: {sharding: zero1, "
             "sequence_parallel: true, recompute: none, flash_attention: true}\nbatch: {global: 8}\n");
    sch = build(y, &s, &m);
    ck_assert_uint_eq(role_events(sch, 0, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f, &g, &gsize), 8);
    ck_assert_uint_eq(b, 8ull * 65536);
    ck_assert_uint_eq(role_events(sch, 0, GS_ROLE_ETP_IN, GS_PHASE_FWD, &b, &f, &g, &gsize), 8);
    ck_assert_uint_eq(b, 8ull * 131072);
    ck_assert_int_eq(g, GS_GROUP_ETP);
    ck_assert_uint_eq(gsize, 2);
    /* the text dump carries etp: loaded back, the same schedule and mesh */
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(mf);
    gs_error lerr;
    gs_error_init(&lerr);
    ck_assert_int_eq(gs_schedule_dump(sch, mf, &lerr), GS_OK);
    fclose(mf);
    mf = fmemopen(text, len, "r");
    gs_schedule *back = NULL;
    ck_assert_msg(gs_schedule_load(mf, "x.sched", &back, &lerr) == GS_OK, "%s", lerr.msg);
    fclose(mf);
    ck_assert_uint_eq(back->mesh.etp, 2);
    char why[256];
    ck_assert_msg(gs_schedule_diff(sch, back, why, sizeof why) == 0, "%s", why);
    gs_schedule_destroy(back);
    free(text);
    gs_schedule_destroy(sch);
}
END_TEST

/* ---- Megatron-LM's flag ------------------------------------------------------------------- */

/* Mixtral 8x7B on 2 nodes of 8, tp 2, ep 8, --expert-tensor-parallel-size 1: read as etp 1,
 * emitted, read back; a size that does not divide tp is refused with the flag named. */
START_TEST(test_etp_megatron)
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
    const char *cmd = "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 8 "
                      "--expert-tensor-parallel-size 1 --num-experts 8 --moe-router-topk 2 "
                      "--moe-token-dispatcher-type alltoall --use-distributed-optimizer --bf16";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.grid.tp == 2 && s.grid.ep == 8 && s.grid.etp == 1 && s.grid.dp == 8);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(gs_mesh_etp(&m), 1);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--expert-tensor-parallel-size 1"), "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.grid.etp == 1 && b.grid.ep == 8 && b.grid.tp == 2);
    gs_text_fini(&t);
    ck_assert_int_eq(gs_import_megatron_args("--num-experts 8 --moe-token-dispatcher-type alltoall "
                                             "--tensor-model-parallel-size 2 --expert-tensor-parallel-size 3",
                                             "run.sh", &o, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "--expert-tensor-parallel-size") && strstr(err.msg, "divisor"), "%s", err.msg);
    gs_diag_fini(&ig);
}
END_TEST

/* ---- the simulated step ------------------------------------------------------------------- */

static double step(const char *yaml, gs_report *rep)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load(yaml, &s, &m);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
    return rep->step_time_s;
}

/* A Mixtral-shaped model on 2 DGX H100 nodes, tp 2, ep 8. Under etp = tp the EP group is 8 DP
 * positions 2 ranks apart, over both nodes, so half of each all-to-all crosses InfiniBand; under
 * etp 1 it is 8 consecutive ranks of one node, all NVLink, and no expert-TP exchange runs: the
 * TP-and-EP stream is busy less than half as long, and the step is shorter. */
START_TEST(test_etp_sim)
{
    const char *fmt = "model: {preset: mixtral-8x7b, layers: 8, seq: 4096}\n"
                      "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 8, tp: 2, ep: 8%s}\n"
                      "strategy: {sharding: zero1, recompute: full, sequence_parallel: true}\nbatch: {global: 32}\n";
    char y[768];
    gs_report a, b;
    gs_scenario s;
    gs_mesh m;
    snprintf(y, sizeof y, fmt, "");
    load(y, &s, &m);
    uint64_t first, stride;
    gs_mesh_ep_group(&m, 0, &first, &stride);
    ck_assert(gs_mesh_rank_node(&m, first) != gs_mesh_rank_node(&m, first + 7 * stride));
    step(y, &a);
    snprintf(y, sizeof y, fmt, ", etp: 1");
    load(y, &s, &m);
    gs_mesh_ep_group(&m, 0, &first, &stride);
    ck_assert(gs_mesh_rank_node(&m, first) == gs_mesh_rank_node(&m, first + 7 * stride));
    step(y, &b);
    ck_assert_msg(b.comm_s[GS_DIM_TP] < 0.5 * a.comm_s[GS_DIM_TP], "etp 1 %g s, etp 2 %g s", b.comm_s[GS_DIM_TP],
                  a.comm_s[GS_DIM_TP]);
    ck_assert_msg(b.step_time_s < a.step_time_s, "etp 1 %g s, etp 2 %g s", b.step_time_s, a.step_time_s);
}
END_TEST

static Suite *etp_suite(void)
{
    Suite *s = suite_create("etp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_etp_groups);
    tcase_add_test(tc, test_etp_mesh_refusals);
    tcase_add_test(tc, test_etp_scenario_refusals);
    tcase_add_test(tc, test_etp_partition);
    tcase_add_test(tc, test_etp_schedule);
    tcase_add_test(tc, test_etp_megatron);
    tcase_add_test(tc, test_etp_sim);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(etp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
