/* Check suite for context parallelism (grid.cp): the rank order and CP groups of the mesh, the
 * activation ledger per CP rank, the schedule's CP exchanges and the traffic ledger, the
 * scenario keys and their round trip, and the simulated step. Expected values are hand
 * arithmetic written beside each assertion, or a second implementation (brute-force enumeration
 * of the ranks). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/plan.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/scenario_write.h"
#include "engine/schedule.h"
#include "sim/bound.h"
#include "sim/sim.h"
#include "sim/topology.h"

/* ---- the mesh ------------------------------------------------------------------------------- */

START_TEST(test_cp_order)
{
    gs_dim o[GS_DIM_COUNT];
    int has, outer;
    char buf[32];
    ck_assert_int_eq(gs_mesh_order_parse_cp("tp-cp-dp-pp", o, &has, &outer), 0);
    ck_assert(o[0] == GS_DIM_TP && o[1] == GS_DIM_DP && o[2] == GS_DIM_PP && has == 1 && outer == 0);
    gs_mesh_order_format_cp(o, 1, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "tp-cp-dp-pp");
    ck_assert_int_eq(gs_mesh_order_parse_cp("tp-dp-cp-pp", o, &has, &outer), 0);
    ck_assert(has == 1 && outer == 1);
    gs_mesh_order_format_cp(o, 1, 1, buf, sizeof buf);
    ck_assert_str_eq(buf, "tp-dp-cp-pp");
    ck_assert_int_eq(gs_mesh_order_parse_cp("TP-PP-DP-CP", o, &has, &outer), 0); /* cp last, after dp */
    ck_assert(o[0] == GS_DIM_TP && o[1] == GS_DIM_PP && o[2] == GS_DIM_DP && outer == 1);
    ck_assert_int_eq(gs_mesh_order_parse_cp("cp-tp-dp-pp", o, &has, &outer), -2); /* not next to dp */
    ck_assert_int_eq(gs_mesh_order_parse_cp("tp-cp-pp", o, &has, &outer), -1);
    ck_assert_int_eq(gs_mesh_order_parse_cp("tp-cp-cp-dp", o, &has, &outer), -1);
    ck_assert_int_eq(gs_mesh_order_parse_cp("tp-dp-pp", o, &has, &outer), 0);
    ck_assert_int_eq(has, 0);
}
END_TEST

/* tp 2, dp 2, cp 4, pp 2 on nodes of 8: rank = tp + 2 (pos + 8 pp) with the DP position
 * pos = replica x 4 + cp index (cp inside dp) or cp index x 2 + replica (cp outside). Rank 5:
 * tp 1, pos 2, pp 0: inside, replica 0, cp index 2, members pos 0..3 = ranks 1, 3, 5, 7; outside,
 * cp index 1, replica 0, members pos 0, 2, 4, 6 = ranks 1, 5, 9, 13. */
START_TEST(test_cp_groups)
{
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    uint64_t mem[4], stride;
    ck_assert_int_eq(gs_mesh_init(&m, 2, 8, 2, NULL, 8, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_cp(&m, 3, 0, &err), GS_ERR_INPUT); /* 3 does not divide 8 */
    ck_assert_int_eq(gs_mesh_set_cp(&m, 4, 0, &err), GS_OK);
    ck_assert_uint_eq(gs_mesh_dp_replicas(&m), 2);
    gs_mesh_cp_group(&m, 5, mem, &stride);
    ck_assert(mem[0] == 1 && mem[1] == 3 && mem[2] == 5 && mem[3] == 7 && stride == 2);
    ck_assert_int_eq(gs_mesh_set_cp(&m, 4, 1, &err), GS_OK);
    gs_mesh_cp_group(&m, 5, mem, &stride);
    ck_assert(mem[0] == 1 && mem[1] == 5 && mem[2] == 9 && mem[3] == 13 && stride == 4);
    /* second implementation, both placements: ranks of one group share tp, pp and replica and
     * differ in cp index; the indices number the world / cp groups 0 .. 7 once each */
    for (int outer = 0; outer <= 1; outer++) {
        ck_assert_int_eq(gs_mesh_set_cp(&m, 4, outer, &err), GS_OK);
        int seen[8] = {0};
        for (uint64_t r = 0; r < m.world; r++) {
            uint64_t c[GS_DIM_COUNT], g = gs_mesh_cp_group(&m, r, mem, NULL), size;
            gs_mesh_rank_coords(&m, r, c);
            ck_assert_uint_lt(g, 8);
            ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_CP, r, &size), g);
            ck_assert_uint_eq(size, 4);
            int in = 0;
            for (int i = 0; i < 4; i++) {
                uint64_t ci[GS_DIM_COUNT];
                gs_mesh_rank_coords(&m, mem[i], ci);
                uint64_t rep_r = outer ? c[GS_DIM_DP] % 2 : c[GS_DIM_DP] / 4;
                uint64_t rep_i = outer ? ci[GS_DIM_DP] % 2 : ci[GS_DIM_DP] / 4;
                ck_assert(ci[GS_DIM_TP] == c[GS_DIM_TP] && ci[GS_DIM_PP] == c[GS_DIM_PP] && rep_i == rep_r);
                ck_assert_uint_eq(outer ? ci[GS_DIM_DP] / 2 : ci[GS_DIM_DP] % 4, (uint64_t)i);
                in += mem[i] == r;
            }
            ck_assert_int_eq(in, 1);
            if (mem[0] == r)
                seen[g]++;
        }
        for (int g = 0; g < 8; g++)
            ck_assert_int_eq(seen[g], 1);
    }
}
END_TEST

/* Hierarchical CP, tp 2, dp x cp = 8 (cp 8, cp inside dp), cp_a2a 2, on nodes of 8: the CP
 * group of rank 0 is ranks 0, 2, .., 14 (DP positions 0..7 at stride 2), as Megatron-Core's
 * create_hierarchical_groups splits it for --hierarchical-context-parallel-sizes 2 4: a2a groups
 * of 2 adjacent positions ({0, 2}, {4, 6}, ..), p2p groups of the positions with the same parity
 * ({0, 4, 8, 12}, {2, 6, 10, 14}). Rank 6 is position 3: a2a {4, 6}, p2p {2, 6, 10, 14}. A second
 * implementation checks every rank: a2a members share the CP group and position / 2, p2p members
 * the CP group and position mod 2, and each group's index is counted once. */
START_TEST(test_cp_hier_groups)
{
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    uint64_t first, stride, mem[8], n;
    ck_assert_int_eq(gs_mesh_init(&m, 2, 8, 1, NULL, 8, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_cp(&m, 8, 0, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_cp_a2a(&m, 3, &err), GS_ERR_INPUT); /* 3 does not divide 8 */
    ck_assert_int_eq(gs_mesh_set_cp_a2a(&m, 2, &err), GS_OK);
    ck_assert_uint_eq(gs_mesh_cp_a2a(&m), 2);
    gs_mesh_cp_a2a_group(&m, 0, &first, &stride);
    ck_assert(first == 0 && stride == 2);
    gs_mesh_cp_p2p_group(&m, 0, &first, &stride);
    ck_assert(first == 0 && stride == 4);
    n = gs_group_members_of(&m, GS_GROUP_CP_A2A, 6, mem);
    ck_assert(n == 2 && mem[0] == 4 && mem[1] == 6);
    n = gs_group_members_of(&m, GS_GROUP_CP_P2P, 6, mem);
    ck_assert(n == 4 && mem[0] == 2 && mem[1] == 6 && mem[2] == 10 && mem[3] == 14);
    int seen_a[8] = {0}, seen_p[4] = {0};
    for (uint64_t r = 0; r < m.world; r++) {
        uint64_t cpm[8], g = gs_mesh_cp_group(&m, r, cpm, NULL), pos = 0, size;
        while (cpm[pos] != r)
            pos++;
        uint64_t ia = gs_group_of(&m, GS_GROUP_CP_A2A, r, &size);
        ck_assert(size == 2 && ia < 8);
        n = gs_group_members_of(&m, GS_GROUP_CP_A2A, r, mem);
        for (uint64_t i = 0; i < n; i++) /* the same CP group, the same pair of positions */
            ck_assert(mem[i] == cpm[pos / 2 * 2 + i]);
        uint64_t ip = gs_group_of(&m, GS_GROUP_CP_P2P, r, &size);
        ck_assert(size == 4 && ip < 4);
        n = gs_group_members_of(&m, GS_GROUP_CP_P2P, r, mem);
        for (uint64_t j = 0; j < n; j++) /* the same CP group, the positions of the same parity */
            ck_assert(mem[j] == cpm[j * 2 + pos % 2]);
        ck_assert(g < 2);
        if (pos % 2 == 0)
            seen_a[ia]++;
        if (pos < 2)
            seen_p[ip]++;
    }
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(seen_a[i], 1);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(seen_p[i], 1);
}
END_TEST

/* ---- scenarios ------------------------------------------------------------------------------ */

/* A 4-layer model, 8 heads of 32 (2 KV heads), sequence 256, on 2 nodes of 8 GPUs. */
#define TINY "model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256}\n"

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

START_TEST(test_cp_scenario)
{
    gs_scenario s, b;
    gs_mesh m;
    load(TINY "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 2, cp: 4, tp: 2, order: tp-dp-cp-pp}\n"
              "strategy: {sharding: zero1, cp_comm: all_gather}\nbatch: {global: 4}\n", &s, &m);
    ck_assert(s.grid.cp == 4 && s.grid.cp_outer == 1 && s.strategy.cp_comm == GS_CP_ALL_GATHER);
    ck_assert(m.cp == 4 && m.size[GS_DIM_DP] == 8 && m.world == 16);
    ck_assert_uint_eq(gs_scenario_microbatches(&s), 2); /* 4 sequences / (micro 1 x dp 2) */
    gs_text t;
    gs_error err;
    gs_error_init(&err);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "cp: 4, order: tp-dp-cp-pp") && strstr(gs_text_str(&t), "  cp_comm: all_gather\n"),
                  "%s", gs_text_str(&t));
    load(gs_text_str(&t), &b, &m);
    ck_assert(b.grid.cp == 4 && b.grid.cp_outer == 1 && b.strategy.cp_comm == GS_CP_ALL_GATHER);
    gs_text_fini(&t);
    /* 256 tokens in 2 x cp = 6 chunks do not divide */
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 1, cp: 3}\n", "multiple of 6");
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 2, cp: 4, order: cp-tp-dp-pp}\n",
               "expected cp next to dp");
    /* Ulysses: 8 heads over cp 4 x tp 4 */
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {cp: 4, tp: 4}\nstrategy: {cp_comm: a2a}\n",
               "heads a multiple of 16");
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8}\nstrategy: {cp_comm: ring}\n",
               "strategy.cp_comm: found unknown value 'ring'");
    /* hierarchical CP: cp_a2a only with a2a+p2p, a divisor of cp below it, heads over tp x cp_a2a */
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8, cp_a2a: 2}\n",
               "expected strategy.cp_comm a2a+p2p");
    load_fails("model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 255}\n"
               "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8, cp_a2a: 2}\n",
               "found cp_comm p2p, cp=1"); /* the level's error, not the sequence's (cp = 1 splits nothing) */
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8}\nstrategy: {cp_comm: a2a+p2p}\n",
               "found grid.cp_a2a=0");
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8, cp_a2a: 8}\nstrategy: {cp_comm: a2a+p2p}\n",
               "found grid.cp_a2a=8");
    load_fails(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8, cp_a2a: 4}\nstrategy: {cp_comm: a2a+p2p}\n",
               "multiples of tp x cp_a2a = 4"); /* 2 KV heads */
    load(TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {cp: 8, cp_a2a: 2}\nstrategy: {cp_comm: a2a+p2p}\n", &s,
         &m);
    ck_assert(s.grid.cp_a2a == 2 && m.cp_a2a == 2 && s.strategy.cp_comm == GS_CP_A2A_P2P);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "cp: 8, cp_a2a: 2,") && strstr(gs_text_str(&t), "  cp_comm: a2a+p2p\n"),
                  "%s", gs_text_str(&t));
    load(gs_text_str(&t), &b, &m);
    ck_assert(b.grid.cp_a2a == 2 && b.strategy.cp_comm == GS_CP_A2A_P2P);
    gs_text_fini(&t);
}
END_TEST

/* ---- ledger --------------------------------------------------------------------------------- */

/* One Llama-3-8B-shaped block (h 4096, 32 heads, 8 KV heads of 128, ffn 14336, SwiGLU, RMSNorm,
 * no dropout), bf16, flash attention, no recompute, tp 1, b 1, sequence 8192 over cp 4: 2048
 * tokens per rank.
 *   replicated (2 norm inputs + QKV and MLP inputs) 8 B x 2048 x 4096      =  67,108,864
 *   Q, K, V 2 B x (2048 x 4096 + 2 x 2048 x 1024), out-proj input 2 B x 2048 x 4096
 *                                                                          =  41,943,040
 *   gate, up, down input 6 B x 2048 x 14336                                = 176,160,768
 *   logsumexp 4 B x 2048 x 32                                              =     262,144
 *                                                                    total = 285,474,816
 * Every term is linear in the tokens: cp 1 keeps four times as much. */
START_TEST(test_cp_activations)
{
    gs_scenario s;
    gs_mesh m;
    load("model: {preset: llama3-8b, seq: 8192}\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 2, cp: 4}\n"
         "strategy: {recompute: none, flash_attention: true, precision: bf16}\n", &s, &m);
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes_cp(&s.model, &s.strategy, 1, 1, 4), 285474816ull);
    ck_assert_uint_eq(gs_ledger_layer_activation_bytes(&s.model, &s.strategy, 1, 1), 4ull * 285474816ull);
    gs_act_sizes a;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
    ck_assert_uint_eq(a.stored, 285474816ull);
    ck_assert_uint_eq(a.boundary, 2ull * 2048 * 4096); /* s/cp x h x 2 B */
    /* the exchange's buffers (Transformer Engine's attention with CP): a rank's K and V are
     * KV = 2 x 2048 tokens x 8 KV heads x 128 x 2 B = 8,388,608 B, its Q 2048 x 32 x 128 x 2 B =
     * 16,777,216 B. p2p: the forward's list of cp = 4 K, V chunks, 33,554,432 B; the backward's two
     * buffers of K, V and their gradients, 4 KV, the same. */
    ck_assert_uint_eq(a.cp_fwd, 4ull * 8388608ull);
    ck_assert_uint_eq(a.cp_bwd, 4ull * 8388608ull);
}
END_TEST

/* The exchange's buffers by cp_comm, and where they show in the peak. Llama 3 8B over cp 4 and
 * pp 2, no recompute: stage 0 (16 blocks, no head) peaks at the top block's backward of
 * micro-batch 0, with micro-batch 1's stash in flight, the same moment for every exchange. Its
 * backward buffers (KV = 8,388,608 B, Q = 16,777,216 B as above): p2p 4 KV = 33,554,432 B;
 * all_gather the gathered K, V and their gradients, 2 cp KV = 67,108,864 B; a2a Q, K, V and the
 * output, 2 Q + KV = 41,943,040 B. The peaks differ by exactly those differences. */
START_TEST(test_cp_buffers_peak)
{
    static const char *const comm[3] = {"p2p", "all_gather", "a2a"};
    static const uint64_t bwd[3] = {33554432ull, 67108864ull, 41943040ull};
    static const uint64_t fwd[3] = {33554432ull, 33554432ull, 41943040ull};
    uint64_t peak[3];
    for (int i = 0; i < 3; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "model: {preset: llama3-8b, seq: 8192}\ncluster: {preset: dgx-h100, nodes: 1}\n"
                 "grid: {dp: 1, cp: 4, pp: 2}\nstrategy: {recompute: none, flash_attention: true, precision: bf16, "
                 "cp_comm: %s}\nbatch: {global: 4, micro: 1}\n",
                 comm[i]);
        gs_scenario s;
        gs_mesh m;
        load(yaml, &s, &m);
        gs_act_sizes a;
        gs_error err;
        gs_error_init(&err);
        ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
        ck_assert_uint_eq(a.cp_fwd, fwd[i]);
        ck_assert_uint_eq(a.cp_bwd, bwd[i]);
        gs_ledger *l = NULL;
        ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
        ck_assert_uint_eq(l->ranks[0].stage, 0);
        peak[i] = l->ranks[0].peak_bytes;
        gs_ledger_destroy(l);
    }
    ck_assert_uint_eq(peak[1] - peak[0], 67108864ull - 33554432ull);
    ck_assert_uint_eq(peak[2] - peak[0], 41943040ull - 33554432ull);
}
END_TEST

/* A recomputed attention runs its forward's exchange again. TINY over cp 8 (32 tokens a rank),
 * full recompute, one rank per CP position: KV = 2 x 32 tokens x 2 KV heads x 32 x 2 B = 8,192
 * B. p2p's forward keeps cp KV = 65,536 B, its backward 4 KV = 32,768 B; all_gather's forward cp
 * KV, its backward 2 cp KV = 131,072 B. Each stage peaks at its top layer's backward pass, where
 * the stash and the rematerialized activations are the same for both: all_gather in the
 * backward (stash + remat + 16 KV), p2p in the recompute just before it (stash + remat + 8 KV;
 * its backward holds only 4 KV). The peaks differ by 8 KV = 65,536 B (without the recompute's
 * buffers they would differ by 12 KV), and each built schedule's high-water mark is its
 * ledger's peak (gs_schedule_validate in build()). */
static gs_schedule *build(const char *yaml, gs_scenario *s, gs_mesh *m);

START_TEST(test_cp_recompute_buffers)
{
    static const char *const comm[2] = {"p2p", "all_gather"};
    uint64_t peak[2];
    char where[2][96];
    for (int i = 0; i < 2; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 1, cp: 8}\n"
                      "strategy: {sharding: zero1, recompute: full, flash_attention: true, cp_comm: %s}\n"
                      "batch: {global: 2, micro: 1}\n",
                 comm[i]);
        gs_scenario s;
        gs_mesh m;
        gs_schedule *sch = build(yaml, &s, &m);
        gs_schedule_destroy(sch);
        gs_ledger *l = NULL;
        gs_error err;
        gs_error_init(&err);
        ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
        peak[i] = l->ranks[0].peak_bytes;
        snprintf(where[i], sizeof where[i], "%s", l->ranks[0].peak_where);
        gs_ledger_destroy(l);
    }
    ck_assert_msg(strncmp(where[0], "recompute of local layer 3", 26) == 0, "p2p peaks at %s", where[0]);
    ck_assert_msg(strncmp(where[1], "backward of local layer 3", 25) == 0, "all_gather peaks at %s", where[1]);
    ck_assert_uint_eq(peak[1] - peak[0], 65536ull);
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

/* CP collectives of rank list i by role, op and phase; their bytes summed into *bytes. */
static size_t cp_events(const gs_schedule *sch, size_t i, int role, int op, int phase, uint64_t *bytes)
{
    size_t n = 0;
    *bytes = 0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind != GS_EV_COLLECTIVE || e->group != GS_GROUP_CP || e->role != role || e->op != op ||
            e->phase != phase)
            continue;
        ck_assert_uint_eq(e->group_size, 4);
        n++;
        *bytes += e->bytes;
    }
    return n;
}

/* TINY with tp 2 (1 KV head each of 32), cp 4, 2 micro-batches of 1: a rank's K and V per block
 * and micro-batch are 2 x 64 tokens x 32 x 2 B = 8,192 B; a CP all-gather carries cp x that,
 * 32,768 B, and sends 3/4 of it. p2p: forward 4 blocks x 2 mb = 8 gathers of 32,768 B, backward 8
 * of 65,536 (K, V and their gradients); the traffic ledger's CP line, 8 x (24,576 + 49,152) =
 * 589,824 B, equals what the events send. all_gather: the backward gathers and reduce-scatters
 * 32,768 B each. a2a (Ulysses needs KV heads for every CP rank: 8 KV heads here, 4 per TP rank):
 * Q, K, V 64 x (4 x 32 + 2 x 4 x 32) x 2 B = 49,152 B out, the output 64 x 4 x 32 x 2 B = 16,384
 * B back, each way. */
START_TEST(test_cp_schedule)
{
    const char *base = TINY "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 2, cp: 4, tp: 2}\n"
                            "strategy: {sharding: zero1, recompute: none, flash_attention: true, cp_comm: %s}\n"
                            "batch: {global: 4}\n";
    char y[512];
    gs_scenario s;
    gs_mesh m;
    uint64_t b;
    snprintf(y, sizeof y, base, "p2p");
    gs_schedule *sch = build(y, &s, &m);
    ck_assert_uint_eq(sch->nranks, 16);
    ck_assert_uint_eq(cp_events(sch, 5, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, GS_PHASE_FWD, &b), 8);
    ck_assert_uint_eq(b, 8ull * 32768);
    ck_assert_uint_eq(cp_events(sch, 5, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, GS_PHASE_BWD, &b), 8);
    ck_assert_uint_eq(b, 8ull * 65536);
    gs_ledger *l = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_CP], 589824ull);
    gs_ledger_destroy(l);
    /* the attention runs in two parts, the first beside the ring, the second after it */
    size_t parts[3] = {0, 0, 0};
    for (size_t k = 0; k < sch->ranks[0].nevents; k++) {
        const gs_event *e = &sch->ranks[0].events[k];
        if (e->role == GS_ROLE_ATTN_CORE && e->part <= 2)
            parts[e->part]++;
    }
    ck_assert(parts[0] == 0 && parts[1] == 16 && parts[2] == 16); /* 8 passes x fwd, bwd */
    gs_schedule_destroy(sch);

    snprintf(y, sizeof y, base, "all_gather");
    sch = build(y, &s, &m);
    ck_assert_uint_eq(cp_events(sch, 0, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, GS_PHASE_BWD, &b), 8);
    ck_assert_uint_eq(b, 8ull * 32768);
    ck_assert_uint_eq(cp_events(sch, 0, GS_ROLE_CP_KV, GS_COLL_REDUCE_SCATTER, GS_PHASE_BWD, &b), 8);
    ck_assert_uint_eq(b, 8ull * 32768);
    gs_schedule_destroy(sch);

    char mha[512];
    snprintf(mha, sizeof mha, "%s", y);
    memcpy(strstr(mha, "kv_heads: 2"), "kv_heads: 8", 11);
    memcpy(strstr(mha, "cp_comm: all_gather"), "cp_comm: a2a       ", 19);
    sch = build(mha, &s, &m);
    ck_assert_uint_eq(cp_events(sch, 0, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, GS_PHASE_FWD, &b), 16);
    ck_assert_uint_eq(b, 8ull * (49152 + 16384));
    ck_assert_uint_eq(cp_events(sch, 0, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, GS_PHASE_BWD, &b), 16);
    ck_assert_uint_eq(b, 8ull * (49152 + 16384));
    gs_schedule_destroy(sch);
}
END_TEST

/* Collectives of rank list i on group g by role, op and phase (each of n ranks); bytes summed. */
static size_t group_events(const gs_schedule *sch, size_t i, int g, uint64_t n, int role, int op, int phase,
                           uint64_t *bytes)
{
    size_t count = 0;
    *bytes = 0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind != GS_EV_COLLECTIVE || e->group != g || e->role != role || e->op != op || e->phase != phase)
            continue;
        ck_assert_uint_eq(e->group_size, n);
        count++;
        *bytes += e->bytes;
    }
    return count;
}

/* Hierarchical CP: TINY with 8 KV heads, tp 2, cp 4 = a2a 2 x p2p 2, 2 micro-batches of 1 (8
 * block passes). Per pass a rank's Q (and its output) are 64 tokens x 4 heads x 32 x 2 B = 16,384
 * B, its K and V 2 x 64 x 4 x 32 x 2 B = 32,768 B.
 *   a2a level (2 ranks): Q, K, V out (49,152 B) and the output back (16,384 B), forward and
 *     backward (the output's gradient first); sends half of each: 24,576 + 8,192 = 32,768 B;
 *   p2p level (2 ranks): the ring over the K, V of A s = 128 tokens x 4 / 2 heads (32,768 B, as
 *     the rank's own): a gather of 2 x 32,768 = 65,536 B forward, 131,072 B backward (with the
 *     gradients); sends 32,768 and 65,536 B.
 *   CP traffic: 8 x (32,768 + 32,768 + 32,768 + 65,536) = 1,310,720 B.
 *   buffers: the a2a's 2 Q + KV = 65,536 B, with the ring's 2 chunks of K, V forward (65,536 B,
 *     131,072 in all) and 4 KV backward (131,072 B, 196,608 in all).
 * The attention's two parts each run A s = 128 queries against one chunk of 128 keys, b x 4 / 2
 * heads. */
START_TEST(test_cp_hier_schedule)
{
    const char *y = "model: {layers: 4, hidden: 256, heads: 8, kv_heads: 8, ffn: 512, vocab: 1000, seq: 256}\n"
                    "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 2, cp: 4, cp_a2a: 2, tp: 2}\n"
                    "strategy: {sharding: zero1, recompute: none, flash_attention: true, cp_comm: a2a+p2p}\n"
                    "batch: {global: 4}\n";
    gs_scenario s;
    gs_mesh m;
    uint64_t b;
    gs_schedule *sch = build(y, &s, &m);
    for (int ph = GS_PHASE_FWD; ph <= GS_PHASE_BWD; ph++) {
        ck_assert_uint_eq(group_events(sch, 3, GS_GROUP_CP_A2A, 2, GS_ROLE_CP_A2A, GS_COLL_ALLTOALL, ph, &b), 16);
        ck_assert_uint_eq(b, 8ull * (49152 + 16384));
        ck_assert_uint_eq(group_events(sch, 3, GS_GROUP_CP_P2P, 2, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, ph, &b), 8);
        ck_assert_uint_eq(b, 8ull * (ph == GS_PHASE_FWD ? 65536 : 131072));
        ck_assert_uint_eq(group_events(sch, 3, GS_GROUP_CP, 4, GS_ROLE_CP_KV, GS_COLL_ALLGATHER, ph, &b), 0);
    }
    size_t parts = 0;
    for (size_t k = 0; k < sch->ranks[0].nevents; k++) {
        const gs_event *e = &sch->ranks[0].events[k];
        if (e->role == GS_ROLE_ATTN_CORE && (e->part == 1 || e->part == 2)) {
            ck_assert(e->gemm_m == 128 && e->gemm_n == 128 && e->gemm_batch == 2);
            parts++;
        }
    }
    ck_assert_uint_eq(parts, 32); /* 8 passes x fwd, bwd x 2 parts */
    gs_schedule_destroy(sch);
    gs_ledger *l = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_CP], 1310720ull);
    gs_ledger_destroy(l);
    gs_act_sizes a;
    ck_assert_int_eq(gs_ledger_act_sizes(&s, &m, 0, &a, &err), GS_OK);
    ck_assert_uint_eq(a.cp_fwd, 131072ull);
    ck_assert_uint_eq(a.cp_bwd, 196608ull);
}
END_TEST

/* ---- Megatron-LM's flags ------------------------------------------------------------------- */

/* --context-parallel-size 4 on 2 nodes of 8 with tp 2: dp = 16 / (2 x 4) = 2; the emitted
 * command carries the CP flags, and reading them back gives the same grid. */
START_TEST(test_cp_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "llama3-8b";
    o.nodes = 2;
    gs_error_init(&err);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args("--tensor-model-parallel-size 2 --context-parallel-size 4 --cp-comm-type "
                                          "a2a a2a --bf16", "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.grid.tp == 2 && s.grid.cp == 4 && s.grid.dp == 2 && s.strategy.cp_comm == GS_CP_A2A);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_OK);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--context-parallel-size 4 --cp-comm-type a2a"), "%s", gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.grid.cp == 4 && b.grid.dp == 2 && b.strategy.cp_comm == GS_CP_A2A);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--context-parallel-size 2 --cp-comm-type p2p a2a", "run.sh", &o, &s, &ig,
                                             &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "expected one type for every layer"), "%s", err.msg);
    ck_assert_int_eq(gs_import_megatron_args("--context-parallel-size 2 --cp-comm-type a2a+p2p", "run.sh", &o, &s,
                                             &ig, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "found no --hierarchical-context-parallel-sizes"), "%s", err.msg);
    /* hierarchical CP: read, emitted, read back; sizes whose product is not cp refused */
    const char *hier = "--tensor-model-parallel-size 2 --context-parallel-size 8 --cp-comm-type a2a+p2p "
                       "--hierarchical-context-parallel-sizes 2 4 --bf16";
    o.nodes = 4;
    ck_assert_msg(gs_import_megatron_args(hier, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.grid.cp == 8 && s.grid.cp_a2a == 2 && s.grid.dp == 2 && s.strategy.cp_comm == GS_CP_A2A_P2P);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_OK);
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--cp-comm-type a2a+p2p") &&
                      strstr(gs_text_str(&t), "--hierarchical-context-parallel-sizes 2 4"),
                  "%s", gs_text_str(&t));
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.grid.cp == 8 && b.grid.cp_a2a == 2 && b.strategy.cp_comm == GS_CP_A2A_P2P);
    gs_text_fini(&t);
    ck_assert_int_eq(gs_import_megatron_args("--context-parallel-size 8 --cp-comm-type a2a+p2p "
                                             "--hierarchical-context-parallel-sizes 2 2", "run.sh", &o, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "found 2 x 2, expected two sizes of 2 or more whose product is "
                                  "--context-parallel-size 8"), "%s", err.msg);
    ck_assert_int_eq(gs_import_megatron_args("--context-parallel-size 8 --cp-comm-type a2a+p2p "
                                             "--hierarchical-context-parallel-sizes 2 2 2", "run.sh", &o, &s, &ig,
                                             &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "found a third size"), "%s", err.msg);
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

/* Llama 3 8B at 32k tokens on 2 DGX H100 nodes. Splitting each sequence over cp 2 halves every
 * rank's compute (the compute stream's busy time within 10% of half: the exchanges slow some of
 * it); the same cp 2 group across the two nodes (cp outside dp, dp 8 apart) sends its K and V
 * over InfiniBand instead of NVLink and exposes more of it; p2p hides the exchange that
 * all_gather waits for. */
START_TEST(test_cp_sim)
{
    gs_report a, b, c, d;
    const char *head = "model: {preset: llama3-8b, seq: 32768}\ncluster: {preset: dgx-h100, nodes: 2}\n";
    char y[768];
    snprintf(y, sizeof y, "%sgrid: {dp: 16}\nstrategy: {sharding: zero1, recompute: full}\nbatch: {global: 16}\n", head);
    step(y, &a);
    snprintf(y, sizeof y, "%sgrid: {dp: 8, cp: 2}\nstrategy: {sharding: zero1, recompute: full}\nbatch: {global: 8}\n",
             head);
    step(y, &b);
    ck_assert_msg(b.compute_s > 0.45 * a.compute_s && b.compute_s < 0.55 * a.compute_s, "cp2 %g s vs cp1 %g s",
                  b.compute_s, a.compute_s);
    ck_assert(b.comm_s[GS_DIM_TP] > 0.0); /* CP's exchanges, on the TP stream */
    snprintf(y, sizeof y,
             "%sgrid: {dp: 8, cp: 2, order: tp-dp-cp-pp}\nstrategy: {sharding: zero1, recompute: full}\n"
             "batch: {global: 8}\n", head);
    step(y, &c);
    ck_assert_msg(c.comm_s[GS_DIM_TP] > 2.0 * b.comm_s[GS_DIM_TP], "across nodes %g s, inside %g s",
                  c.comm_s[GS_DIM_TP], b.comm_s[GS_DIM_TP]);
    snprintf(y, sizeof y,
             "%sgrid: {dp: 8, cp: 2, order: tp-dp-cp-pp}\nstrategy: {sharding: zero1, recompute: full, "
             "cp_comm: all_gather}\nbatch: {global: 8}\n", head);
    step(y, &d);
    ck_assert_msg(d.exposed_s[GS_DIM_TP] > c.exposed_s[GS_DIM_TP], "all_gather %g s exposed, p2p %g s",
                  d.exposed_s[GS_DIM_TP], c.exposed_s[GS_DIM_TP]);
}
END_TEST

/* Llama 3 8B at 32k tokens over cp 16 on 2 DGX H100 nodes (tp 1, dp 1, full recompute). The CP
 * group spans both nodes; hierarchical CP with cp_a2a 8 keeps its a2a level inside a node (8
 * ranks, one node) and leaves a ring of 2 ranks on 2 nodes (one per node). Per block and
 * micro-batch a rank's K, V are KV = 2 x 2048 tokens x 8 KV heads x 128 x 2 B = 8.4 MB, its Q
 * 16.8 MB. p2p's ring passes 15 KV, each step waiting for its hop between the nodes on one NIC
 * (48 GB/s): 2.62 ms forward, 5.24 backward (with the gradients). a2a+p2p: 7/8 of Q, K, V (25.2
 * MB) and of the output (16.8 MB) over NVLink (about 370 GB/s), 0.099 ms, and one KV over one
 * NIC, 0.175 ms forward, 0.35 backward. Forward, recomputed forward and backward of 32 blocks:
 * 336 ms against 31.9 ms communicating (latencies aside: the test allows 10% and 15% above). */
START_TEST(test_cp_hier_sim)
{
    const char *head = "model: {preset: llama3-8b, seq: 32768}\ncluster: {preset: dgx-h100, nodes: 2}\n";
    char y[768];
    gs_scenario s;
    gs_mesh m;
    gs_coll_shape sh;
    snprintf(y, sizeof y, "%sgrid: {cp: 16, cp_a2a: 8}\nstrategy: {recompute: full, cp_comm: a2a+p2p}\n"
             "batch: {global: 1}\n", head);
    load(y, &s, &m);
    gs_topo_group_shape(&m, GS_GROUP_CP_A2A, 9, &sh);
    ck_assert(sh.nranks == 8 && sh.nnodes == 1 && sh.ppn == 8);
    gs_topo_group_shape(&m, GS_GROUP_CP_P2P, 9, &sh);
    ck_assert(sh.nranks == 2 && sh.nnodes == 2 && sh.ppn == 1);
    gs_report h, p;
    step(y, &h);
    snprintf(y, sizeof y, "%sgrid: {cp: 16}\nstrategy: {recompute: full, cp_comm: p2p}\nbatch: {global: 1}\n", head);
    step(y, &p);
    ck_assert_msg(p.comm_s[GS_DIM_TP] > 0.336 && p.comm_s[GS_DIM_TP] < 1.10 * 0.336, "p2p %g s communicating",
                  p.comm_s[GS_DIM_TP]);
    ck_assert_msg(h.comm_s[GS_DIM_TP] > 0.0319 && h.comm_s[GS_DIM_TP] < 1.15 * 0.0319,
                  "a2a+p2p %g s communicating", h.comm_s[GS_DIM_TP]);
}
END_TEST

/* ---- the planner ----------------------------------------------------------------------------- */

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

/* plan --cp 1,2 on TINY (one node of 8): with the step bound and the traffic bound on (they
 * build reduced schedules of each candidate's shapes, cp included), every grid is searched with
 * cp 1 and 2; candidates of both are simulated and each keeps dp x cp x pp x tp = 8. */
START_TEST(test_cp_plan)
{
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    const char *y = TINY "cluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8}\n"
                         "strategy: {framework: megatron, sharding: zero1}\nbatch: {global: 16, micro: 1}\n";
    ck_assert_msg(gs_scenario_load_string(y, strlen(y), "test", &s, &err) == GS_OK, "%s", err.msg);
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.eval = eval_sim;
    o.keep = 100000; /* every candidate that fits, each through the bounds */
    gs_sim_bound *bound = NULL;
    ck_assert_int_eq(gs_sim_bound_create(&bound), GS_OK);
    o.bound = gs_sim_step_bound;
    o.bound_ctx = bound;
    o.comm_bound = gs_sim_comm_bound;
    o.cp.v[0] = 1;
    o.cp.v[1] = 2;
    o.cp.n = 2;
    o.sharding_mask = 1u << GS_SHARD_ZERO1;
    gs_plan *p = NULL;
    ck_assert_msg(gs_plan_run(&s, &o, &p, &err) == GS_OK, "%s", err.msg);
    int seen[3] = {0, 0, 0};
    for (size_t i = 0; i < p->ncands; i++) {
        const gs_plan_candidate *c = &p->cands[i];
        ck_assert(c->cp == 1 || c->cp == 2);
        ck_assert_uint_eq(c->dp * c->cp * c->pp * c->tp, 8);
        seen[c->cp]++;
    }
    ck_assert_msg(seen[1] && seen[2], "cp 1: %d, cp 2: %d", seen[1], seen[2]);
    gs_plan_destroy(p);
    gs_sim_bound_destroy(bound);
}
END_TEST

static Suite *cp_suite(void)
{
    Suite *s = suite_create("cp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cp_order);
    tcase_add_test(tc, test_cp_groups);
    tcase_add_test(tc, test_cp_hier_groups);
    tcase_add_test(tc, test_cp_hier_schedule);
    tcase_add_test(tc, test_cp_recompute_buffers);
    tcase_add_test(tc, test_cp_scenario);
    tcase_add_test(tc, test_cp_activations);
    tcase_add_test(tc, test_cp_buffers_peak);
    tcase_add_test(tc, test_cp_schedule);
    tcase_add_test(tc, test_cp_megatron);
    tcase_add_test(tc, test_cp_sim);
    tcase_add_test(tc, test_cp_hier_sim);
    tcase_add_test(tc, test_cp_plan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
