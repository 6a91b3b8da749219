/* Check suite for FP8 delayed scaling's amax reductions (engine/fp8_amax.h): the stage group
 * against enumeration of the mesh (members, index, and the nodes and ranks per node the sim
 * reads), which recipes reduce, the amax buffer's bytes against a hand count of Transformer
 * Engine's FP8 tensors, the schedule's reduction events (count, place, group, bytes, what waits
 * for them) and the traffic ledger against the same hand count. Expected values are hand
 * arithmetic written beside each assertion, or brute-force enumeration of the ranks. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/fp8_amax.h"
#include "engine/ledger.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/topology.h"

/* ---- the stage group ------------------------------------------------------------------------ */

/* Every rank's stage group against enumeration: the ranks whose pipeline coordinate is the
 * rank's, ascending; the index is that coordinate; the nodes spanned and the most members on one
 * node as counted rank by rank. tp 2, dp 3, pp 4 (24 ranks) in three orders, 4 and 8 GPUs a node. */
START_TEST(test_stage_group)
{
    static const gs_dim orders[3][GS_DIM_COUNT] = {
        {GS_DIM_TP, GS_DIM_DP, GS_DIM_PP}, {GS_DIM_PP, GS_DIM_TP, GS_DIM_DP}, {GS_DIM_TP, GS_DIM_PP, GS_DIM_DP}};
    gs_error err;
    gs_error_init(&err);
    for (int o = 0; o < 3; o++)
        for (uint64_t gpn = 4; gpn <= 8; gpn *= 2) {
            gs_mesh m;
            ck_assert_int_eq(gs_mesh_init(&m, 2, 3, 4, orders[o], gpn, &err), GS_OK);
            for (uint64_t r = 0; r < m.world; r++) {
                uint64_t c[GS_DIM_COUNT], mem[24], size, n = gs_group_members_of(&m, GS_GROUP_STAGE, r, mem);
                uint64_t idx = gs_group_of(&m, GS_GROUP_STAGE, r, &size);
                gs_mesh_rank_coords(&m, r, c);
                ck_assert_uint_eq(n, 6); /* 24 / pp 4 */
                ck_assert_uint_eq(size, 6);
                ck_assert_uint_eq(idx, c[GS_DIM_PP]);
                uint64_t k = 0, per_node[6] = {0}, nodes = 0, most = 0;
                for (uint64_t r2 = 0; r2 < m.world; r2++) { /* brute force */
                    uint64_t c2[GS_DIM_COUNT];
                    gs_mesh_rank_coords(&m, r2, c2);
                    if (c2[GS_DIM_PP] != c[GS_DIM_PP])
                        continue;
                    ck_assert_uint_lt(k, n);
                    ck_assert_uint_eq(mem[k++], r2);
                    per_node[r2 / gpn]++;
                }
                ck_assert_uint_eq(k, n);
                for (uint64_t nd = 0; nd < 6; nd++) {
                    nodes += per_node[nd] > 0;
                    most = per_node[nd] > most ? per_node[nd] : most;
                }
                gs_coll_shape sh;
                gs_topo_group_shape(&m, GS_GROUP_STAGE, r, &sh);
                ck_assert_uint_eq(sh.nranks, 6);
                ck_assert_uint_eq(sh.nnodes, nodes);
                ck_assert_uint_eq(sh.ppn, most);
            }
        }
}
END_TEST

/* ---- scenarios ------------------------------------------------------------------------------ */

/* An 8-layer dense model (hidden 256, 8 heads of 32, 2 KV heads, SwiGLU) on 2 DGX H100 nodes. */
#define TINY                                                                                                   \
    "model: {layers: 8, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu}\n"  \
    "cluster: {preset: dgx-h100, nodes: 2}\n"

static void load(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, NULL, &err) == GS_OK, "mesh: %s", err.msg);
}

/* Which recipes reduce: delayed scaling does, under Megatron and when auto resolves to it;
 * current scaling, bf16, and auto under FSDP2 (torchao's dynamic scaling) do not. */
START_TEST(test_reduced)
{
    static const struct {
        const char *strategy;
        int reduced;
    } cases[] = {
        {"{precision: fp8, fp8_recipe: delayed}", 1},
        {"{precision: fp8, fp8_recipe: current}", 0},
        {"{precision: bf16}", 0},
        {"{precision: fp8, framework: megatron}", 1},
        {"{precision: fp8, framework: fsdp2, sharding: full_shard}", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char y[1024];
        gs_scenario s;
        gs_mesh m;
        snprintf(y, sizeof y, TINY "grid: {dp: 16}\nstrategy: %s\n", cases[i].strategy);
        load(y, &s, &m);
        ck_assert_msg(gs_fp8_amax_reduced(&s) == cases[i].reduced, "%s", cases[i].strategy);
    }
}
END_TEST

/* The buffer's bytes by hand: a dense block has 4 GEMMs (QKV, output projection, fc1, fc2), 3
 * fp32 amaxes each forward (12 B) and 2 backward (8 B): 2 blocks = 96 B forward, 64 B backward.
 * DeepSeek-V3 (latent attention with q_lora_rank: q_a, q_b, kv_a, kv_b and the output
 * projection, 5 GEMMs) over ep 8: its 3 dense blocks 5 + 2 = 7 GEMMs each, a MoE block 5 + 2 x
 * 256 / 8 local experts + 2 shared-expert GEMMs = 71, so layers 0-3 hold 21 + 71 = 92 GEMMs:
 * 1104 B forward, 736 B backward. */
START_TEST(test_bytes)
{
    gs_scenario s;
    gs_mesh m;
    load(TINY "grid: {dp: 16}\nstrategy: {precision: fp8, fp8_recipe: delayed}\n", &s, &m);
    ck_assert_uint_eq(gs_fp8_amax_bytes(&s, &m, 1, 0, 0, 1, GS_PHASE_FWD), 96);
    ck_assert_uint_eq(gs_fp8_amax_bytes(&s, &m, 1, 0, 0, 1, GS_PHASE_BWD), 64);
    load("model: {preset: deepseek-v3}\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8, ep: 8}\n"
         "strategy: {precision: fp8, fp8_recipe: delayed, sharding: zero1}\n",
         &s, &m);
    ck_assert_uint_eq(s.model.moe.dense_layers, 3);
    ck_assert_uint_eq(gs_fp8_amax_bytes(&s, &m, 1, 0, 0, 3, GS_PHASE_FWD), 1104);
    ck_assert_uint_eq(gs_fp8_amax_bytes(&s, &m, 1, 0, 0, 3, GS_PHASE_BWD), 736);
}
END_TEST

/* ---- the schedule and the ledger ------------------------------------------------------------ */

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

static size_t count_role(const gs_rank_events *r, int role)
{
    size_t n = 0;
    for (size_t k = 0; k < r->nevents; k++)
        n += r->events[k].role == role;
    return n;
}

/* TINY on dp 4 x tp 2 x pp 2 with the interleaved schedule over 2 model chunks a stage (2 layers
 * each) and 4 micro-batches a DP rank: each rank reduces 2 x 4 x 2 = 16 times, over the 8 ranks
 * of its stage, 96 B forward and 64 B backward (test_bytes); a forward reduction sits at its
 * chunk's top layer after that layer's last op and the pass's send waits for it, a backward one at
 * the chunk's bottom layer, and the rank's next compute event waits for it. The ledger: a ring
 * all-reduce over n = 8 sends 2 (n - 1) ceil(B / n) = 14 x 12 = 168 B forward and 14 x 8 = 112 B
 * backward, x 2 chunks x 4 micro-batches = 2240 B a step. Current scaling has no reductions. */
START_TEST(test_schedule)
{
    const char *base = TINY "grid: {dp: 4, tp: 2, pp: 2}\nbatch: {global: 16, micro: 1}\n"
                            "strategy: {precision: fp8, fp8_recipe: %s, sharding: zero1, pipeline: interleaved, "
                            "virtual_stages: 2}\n";
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    snprintf(y, sizeof y, base, "delayed");
    gs_schedule *sch = build(y, &s, &m);
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        ck_assert_uint_eq(count_role(r, GS_ROLE_FP8_AMAX), 16);
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            if (e->role != GS_ROLE_FP8_AMAX)
                continue;
            int fwd = e->phase == GS_PHASE_FWD;
            ck_assert(fwd || e->phase == GS_PHASE_BWD);
            ck_assert_uint_eq(e->kind, GS_EV_COLLECTIVE);
            ck_assert_uint_eq(e->op, GS_COLL_ALLREDUCE);
            ck_assert_uint_eq(e->group, GS_GROUP_STAGE);
            ck_assert_uint_eq(e->group_size, 8);
            ck_assert_uint_eq(e->peer, r->stage);
            ck_assert_uint_eq(e->bytes, fwd ? 96 : 64);
            /* global layers: stage s holds chunk c's layers 2 (c pp + s) and 2 (c pp + s) + 1 */
            int32_t bot = (int32_t)(2 * (e->chunk * 2 + r->stage));
            ck_assert_int_eq(e->layer, fwd ? bot + 1 : bot);
            /* it waits for its pass's last layer op: under tp 2 without sequence parallelism the
             * MLP output's all-reduce forward, the input norm's backward */
            const uint32_t *deps = gs_event_list(r, e, GS_LINK_DEPS);
            ck_assert_uint_eq(e->nlinks[GS_LINK_DEPS], 1);
            const gs_event *d = &r->events[deps[0]];
            ck_assert_int_eq(d->layer, e->layer);
            ck_assert_uint_eq(d->mb, e->mb);
            ck_assert_uint_eq(d->role, fwd ? GS_ROLE_TP_MLP_OUT : GS_ROLE_ATTN_NORM);
            /* the compute stream waits for it: the rank's next compute event depends on it */
            size_t nx = k + 1;
            while (nx < r->nevents && r->events[nx].kind != GS_EV_COMPUTE)
                nx++;
            if (nx < r->nevents) {
                const gs_event *ne = &r->events[nx];
                const uint32_t *nd = gs_event_list(r, ne, GS_LINK_DEPS);
                int found = 0;
                for (uint16_t q = 0; q < ne->nlinks[GS_LINK_DEPS]; q++)
                    found |= nd[q] == k;
                ck_assert_msg(found, "rank %zu: compute event %zu does not wait for the amax reduction %zu", i, nx, k);
            }
        }
        /* a send of a pass that has one waits for its reduction */
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            if (e->kind != GS_EV_SEND || e->role != GS_ROLE_PP_SEND)
                continue;
            const uint32_t *deps = gs_event_list(r, e, GS_LINK_DEPS);
            ck_assert_uint_eq(e->nlinks[GS_LINK_DEPS], 1);
            ck_assert_uint_eq(r->events[deps[0]].role, GS_ROLE_FP8_AMAX);
            ck_assert_uint_eq(r->events[deps[0]].mb, e->mb);
            ck_assert_uint_eq(r->events[deps[0]].phase, e->phase);
        }
    }
    gs_ledger *l = NULL;
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    for (size_t j = 0; j < l->nranks; j++)
        ck_assert_uint_eq(l->ranks[j].traffic[GS_TRAFFIC_FP8_AMAX], 2240);
    gs_ledger_destroy(l);
    gs_schedule_destroy(sch);

    snprintf(y, sizeof y, base, "current");
    sch = build(y, &s, &m);
    for (size_t i = 0; i < sch->nranks; i++)
        ck_assert_uint_eq(count_role(&sch->ranks[i], GS_ROLE_FP8_AMAX), 0);
    gs_schedule_destroy(sch);
}
END_TEST

static Suite *fp8_amax_suite(void)
{
    Suite *s = suite_create("fp8_amax");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_stage_group);
    tcase_add_test(tc, test_reduced);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_schedule);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fp8_amax_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
