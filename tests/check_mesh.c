/* Check suite for engine/mesh: coordinates, groups, placement, checks and limits. Expected
 * values come from the seed's section 4.2 table, Megatron-LM's documented rank formula, hand
 * arithmetic written beside each assertion, or brute-force enumeration (a second
 * implementation) over every rank. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mesh.h"
#include "engine/partition.h"
#include "engine/pipeline.h"

static const gs_dim order_tp_dp_pp[GS_DIM_COUNT] = {GS_DIM_TP, GS_DIM_DP, GS_DIM_PP};
static const gs_dim order_tp_pp_dp[GS_DIM_COUNT] = {GS_DIM_TP, GS_DIM_PP, GS_DIM_DP};

/* All 6 permutations, fastest dimension first. */
static const gs_dim all_orders[6][GS_DIM_COUNT] = {
    {GS_DIM_TP, GS_DIM_DP, GS_DIM_PP}, {GS_DIM_TP, GS_DIM_PP, GS_DIM_DP},
    {GS_DIM_DP, GS_DIM_TP, GS_DIM_PP}, {GS_DIM_DP, GS_DIM_PP, GS_DIM_TP},
    {GS_DIM_PP, GS_DIM_TP, GS_DIM_DP}, {GS_DIM_PP, GS_DIM_DP, GS_DIM_TP},
};
static const char *const all_order_names[6] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp",
                                               "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};

/* Llama 2 70B shapes (Touvron et al. 2023, table 1 / HF config): 80 layers, 8192 hidden,
 * 64 heads, 8 KV heads, ffn 28672, vocab 32000. Built by hand: mesh only reads fields. */
static gs_model llama2_70b(void)
{
    gs_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "llama2-70b");
    m.layers = 80;
    m.hidden = 8192;
    m.heads = 64;
    m.kv_heads = 8;
    m.head_dim = 128;
    m.ffn = 28672;
    m.vocab = 32000;
    m.seq = 4096;
    return m;
}

static gs_mesh make_mesh(uint64_t tp, uint64_t dp, uint64_t pp, const gs_dim *order, uint64_t g)
{
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_status st = gs_mesh_init(&m, tp, dp, pp, order, g, &err);
    ck_assert_msg(st == GS_OK, "mesh init failed: %s", err.msg);
    return m;
}

/* Concatenated warnings, for substring assertions. */
static int diag_has(const gs_diag *d, const char *needle)
{
    for (size_t i = 0; i < d->count; i++)
        if (strstr(d->warnings[i], needle))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------------ coords ---- */

/* The seed's section 4.2 table, 64 GPUs as (DP4, PP2, TP8) on 8-GPU nodes, order tp-pp-dp:
 * node0 = DP0/PP0 ranks 0-7, node1 = DP0/PP1 8-15, node2 = DP1/PP0 16-23, node3 = DP1/PP1
 * 24-31, node4 = DP2/PP0, node5 = DP2/PP1, node6 = DP3/PP0, node7 = DP3/PP1. */
START_TEST(test_seed_table_tp_pp_dp)
{
    static const uint64_t node_dp_pp[8][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1},
                                              {2, 0}, {2, 1}, {3, 0}, {3, 1}};
    gs_mesh m = make_mesh(8, 4, 2, order_tp_pp_dp, 8);
    ck_assert_uint_eq(m.world, 64);
    ck_assert_uint_eq(gs_mesh_nodes(&m), 8);
    for (uint64_t node = 0; node < 8; node++) {
        for (uint64_t local = 0; local < 8; local++) {
            uint64_t rank = node * 8 + local; /* node n holds ranks 8n .. 8n+7 */
            uint64_t c[GS_DIM_COUNT];
            gs_mesh_rank_coords(&m, rank, c);
            ck_assert_uint_eq(gs_mesh_rank_node(&m, rank), node);
            ck_assert_uint_eq(c[GS_DIM_DP], node_dp_pp[node][0]);
            ck_assert_uint_eq(c[GS_DIM_PP], node_dp_pp[node][1]);
            ck_assert_uint_eq(c[GS_DIM_TP], local);
            ck_assert_uint_eq(gs_mesh_coords_rank(&m, c), rank);
        }
    }
}
END_TEST

/* Megatron-LM's default order tp-dp-pp: rank = tp + TP * (dp + DP * pp). */
START_TEST(test_megatron_default)
{
    gs_mesh m = make_mesh(8, 4, 2, NULL, 8); /* NULL order = Megatron default */
    ck_assert_int_eq(m.order[0], GS_DIM_TP);
    ck_assert_int_eq(m.order[1], GS_DIM_DP);
    ck_assert_int_eq(m.order[2], GS_DIM_PP);
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(&m, 8, c); /* 8 = 0 + 8 * (1 + 4 * 0) */
    ck_assert_uint_eq(c[GS_DIM_DP], 1);
    ck_assert_uint_eq(c[GS_DIM_PP], 0);
    ck_assert_uint_eq(c[GS_DIM_TP], 0);
    gs_mesh_rank_coords(&m, 37, c); /* 37 = 5 + 8 * (0 + 4 * 1) */
    ck_assert_uint_eq(c[GS_DIM_DP], 0);
    ck_assert_uint_eq(c[GS_DIM_PP], 1);
    ck_assert_uint_eq(c[GS_DIM_TP], 5);
    for (uint64_t pp = 0; pp < 2; pp++)
        for (uint64_t dp = 0; dp < 4; dp++)
            for (uint64_t tp = 0; tp < 8; tp++) {
                uint64_t want = tp + 8 * (dp + 4 * pp);
                uint64_t cc[GS_DIM_COUNT];
                cc[GS_DIM_TP] = tp;
                cc[GS_DIM_DP] = dp;
                cc[GS_DIM_PP] = pp;
                ck_assert_uint_eq(gs_mesh_coords_rank(&m, cc), want);
            }
}
END_TEST

/* For every order, enumerating coordinates with the slowest dimension outermost and the fastest
 * innermost must visit ranks 0, 1, 2, ... in sequence (the definition of "fastest-varying"),
 * and rank -> coords -> rank must round-trip for every rank. */
START_TEST(test_all_orders_round_trip)
{
    static const uint64_t shapes[][3] = {{8, 4, 2}, {2, 3, 5}, {1, 7, 1}, {4, 1, 6}, {3, 2, 2}};
    for (size_t o = 0; o < 6; o++) {
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            gs_mesh m = make_mesh(shapes[k][0], shapes[k][1], shapes[k][2], all_orders[o], 4);
            const gs_dim *ord = all_orders[o];
            uint64_t expect = 0;
            uint64_t c[GS_DIM_COUNT];
            for (c[ord[2]] = 0; c[ord[2]] < m.size[ord[2]]; c[ord[2]]++)
                for (c[ord[1]] = 0; c[ord[1]] < m.size[ord[1]]; c[ord[1]]++)
                    for (c[ord[0]] = 0; c[ord[0]] < m.size[ord[0]]; c[ord[0]]++) {
                        uint64_t back[GS_DIM_COUNT];
                        ck_assert_uint_eq(gs_mesh_coords_rank(&m, c), expect);
                        gs_mesh_rank_coords(&m, expect, back);
                        ck_assert_uint_eq(back[GS_DIM_TP], c[GS_DIM_TP]);
                        ck_assert_uint_eq(back[GS_DIM_DP], c[GS_DIM_DP]);
                        ck_assert_uint_eq(back[GS_DIM_PP], c[GS_DIM_PP]);
                        expect++;
                    }
            ck_assert_uint_eq(expect, m.world);
        }
    }
}
END_TEST

START_TEST(test_order_parse_format)
{
    for (size_t o = 0; o < 6; o++) {
        gs_dim ord[GS_DIM_COUNT];
        char buf[16];
        ck_assert_int_eq(gs_mesh_order_parse(all_order_names[o], ord), 0);
        ck_assert_int_eq(ord[0], all_orders[o][0]);
        ck_assert_int_eq(ord[1], all_orders[o][1]);
        ck_assert_int_eq(ord[2], all_orders[o][2]);
        gs_mesh_order_format(ord, buf, sizeof buf);
        ck_assert_str_eq(buf, all_order_names[o]);
    }
    static const char *const bad[] = {"",         "tp",        "tp-dp",     "tp-dp-pp-",
                                      "tp-tp-pp", "tp-dp-cp",  "tpdppp",    "tp_dp_pp",
                                      " tp-dp-pp", "tp-dp-ppx", "dp-pp-tp-tp"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gs_dim ord[GS_DIM_COUNT] = {GS_DIM_PP, GS_DIM_PP, GS_DIM_PP};
        ck_assert_msg(gs_mesh_order_parse(bad[i], ord) == -1, "accepted '%s'", bad[i]);
        ck_assert_int_eq(ord[0], GS_DIM_PP); /* untouched on failure */
    }
    ck_assert_str_eq(gs_dim_name(GS_DIM_TP), "tp");
    ck_assert_str_eq(gs_dim_name(GS_DIM_DP), "dp");
    ck_assert_str_eq(gs_dim_name(GS_DIM_PP), "pp");
}
END_TEST

/* ------------------------------------------------------------------------------ groups ---- */

/* Seed table: TP groups are the node's 8 consecutive ranks 0-7, 8-15, ...; PP pairs the two
 * nodes of one DP replica (rank r with r + 8 for even node); DP groups take one node of each
 * replica: rank 0's DP group is {0, 16, 32, 48}. */
START_TEST(test_seed_groups)
{
    gs_mesh m = make_mesh(8, 4, 2, order_tp_pp_dp, 8);
    uint64_t out[8];
    ck_assert_uint_eq(gs_mesh_group_count(&m, GS_DIM_TP), 8);
    ck_assert_uint_eq(gs_mesh_group_count(&m, GS_DIM_DP), 16);
    ck_assert_uint_eq(gs_mesh_group_count(&m, GS_DIM_PP), 32);
    for (uint64_t g = 0; g < 8; g++) {
        gs_mesh_group_members(&m, GS_DIM_TP, g, out);
        for (uint64_t i = 0; i < 8; i++)
            ck_assert_uint_eq(out[i], 8 * g + i);
        ck_assert_uint_eq(gs_mesh_group_first(&m, GS_DIM_TP, g), 8 * g);
        ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_TP, 8 * g + 3), 1);
        ck_assert_uint_eq(gs_mesh_group_local_size(&m, GS_DIM_TP, 8 * g + 3), 8);
    }
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_TP, 13, out), 1);
    ck_assert_uint_eq(out[0], 8);
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_DP, 0, out), 0);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 16);
    ck_assert_uint_eq(out[2], 32);
    ck_assert_uint_eq(out[3], 48);
    ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_DP, 0), 4); /* nodes 0, 2, 4, 6 */
    ck_assert_uint_eq(gs_mesh_group_local_size(&m, GS_DIM_DP, 0), 1);
    gs_mesh_group(&m, GS_DIM_PP, 3, out);
    ck_assert_uint_eq(out[0], 3);
    ck_assert_uint_eq(out[1], 11); /* node0 -> node1 */
    ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_PP, 3), 2);
}
END_TEST

/* Megatron default tp-dp-pp, same grid: PP group of rank 0 is {0, 32}; DP group of rank 0 is
 * {0, 8, 16, 24}; TP groups still 0-7, 8-15. */
START_TEST(test_megatron_groups)
{
    gs_mesh m = make_mesh(8, 4, 2, order_tp_dp_pp, 8);
    uint64_t out[8];
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_PP, 0, out), 0);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 32);
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_DP, 0, out), 0);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 8);
    ck_assert_uint_eq(out[2], 16);
    ck_assert_uint_eq(out[3], 24);
    /* Rank 45 = tp 5 + 8 * (dp 1 + 4 * pp 1): DP group {37, 45, 53, 61}; its group number
     * enumerates (tp, pp) with tp fastest: 5 + 8 * 1 = 13. */
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_DP, 45, out), 13);
    ck_assert_uint_eq(out[0], 37);
    ck_assert_uint_eq(out[3], 61);
    /* TP group of rank 45 is number dp + DP * pp = 1 + 4 = 5: ranks 40-47. */
    ck_assert_uint_eq(gs_mesh_group(&m, GS_DIM_TP, 45, out), 5);
    ck_assert_uint_eq(out[0], 40);
    ck_assert_uint_eq(out[7], 47);
    ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_PP, 0), 2);     /* nodes 0 and 4 */
    ck_assert_uint_eq(gs_mesh_group_local_size(&m, GS_DIM_PP, 0), 1);
}
END_TEST

/* Brute force over every rank of several meshes and all orders: the group of a rank along d
 * holds exactly the ranks sharing its other two coordinates, in ascending coordinate d; the
 * group number is the other two coordinates enumerated in mesh order (faster one fastest);
 * group_members(g) returns the same list; group numbers grow with the group's lowest rank. */
START_TEST(test_groups_brute_force)
{
    static const uint64_t shapes[][3] = {{8, 4, 2}, {2, 3, 5}, {3, 1, 4}, {1, 6, 1}};
    uint64_t out[8], again[8];
    for (size_t o = 0; o < 6; o++) {
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            gs_mesh m = make_mesh(shapes[k][0], shapes[k][1], shapes[k][2], all_orders[o], 8);
            for (int di = 0; di < GS_DIM_COUNT; di++) {
                gs_dim d = (gs_dim)di;
                /* the other two dims in mesh order */
                gs_dim other[2];
                int n = 0;
                for (int i = 0; i < GS_DIM_COUNT; i++)
                    if (m.order[i] != d)
                        other[n++] = m.order[i];
                uint64_t count = m.world / m.size[d];
                ck_assert_uint_eq(gs_mesh_group_count(&m, d), count);
                uint64_t prev_first = 0;
                for (uint64_t g = 0; g < count; g++) {
                    uint64_t first = gs_mesh_group_first(&m, d, g);
                    if (g > 0)
                        ck_assert_uint_gt(first, prev_first);
                    prev_first = first;
                }
                for (uint64_t r = 0; r < m.world; r++) {
                    uint64_t c[GS_DIM_COUNT];
                    gs_mesh_rank_coords(&m, r, c);
                    uint64_t g = gs_mesh_group(&m, d, r, out);
                    ck_assert_uint_eq(g, c[other[0]] + m.size[other[0]] * c[other[1]]);
                    ck_assert_uint_lt(g, count);
                    gs_mesh_group_members(&m, d, g, again);
                    int found = 0;
                    for (uint64_t i = 0; i < m.size[d]; i++) {
                        uint64_t mc[GS_DIM_COUNT];
                        gs_mesh_rank_coords(&m, out[i], mc);
                        ck_assert_uint_eq(mc[d], i);
                        ck_assert_uint_eq(mc[other[0]], c[other[0]]);
                        ck_assert_uint_eq(mc[other[1]], c[other[1]]);
                        ck_assert_uint_eq(again[i], out[i]);
                        if (i > 0)
                            ck_assert_uint_gt(out[i], out[i - 1]);
                        found |= out[i] == r;
                    }
                    ck_assert(found);
                }
            }
        }
    }
}
END_TEST

/* ---------------------------------------------------------------------------- placement ---- */

/* HSDP: 64 ranks, dp=64, tp=pp=1, 8-GPU nodes: the one DP group spans all 8 nodes and shares
 * each node with 8 of its members (the intra-node FULL_SHARD sub-group). */
START_TEST(test_hsdp_local_size)
{
    gs_mesh m = make_mesh(1, 64, 1, NULL, 8);
    ck_assert_uint_eq(gs_mesh_group_count(&m, GS_DIM_DP), 1);
    for (uint64_t r = 0; r < 64; r++) {
        ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_DP, r), 8);
        ck_assert_uint_eq(gs_mesh_group_local_size(&m, GS_DIM_DP, r), 8);
    }
    /* dp=2 fastest under tp=8 (order dp-tp-pp): DP pairs are neighbours {2k, 2k+1}. */
    static const gs_dim dp_tp_pp[GS_DIM_COUNT] = {GS_DIM_DP, GS_DIM_TP, GS_DIM_PP};
    gs_mesh n = make_mesh(8, 2, 1, dp_tp_pp, 8);
    uint64_t out[2];
    gs_mesh_group(&n, GS_DIM_DP, 5, out);
    ck_assert_uint_eq(out[0], 4);
    ck_assert_uint_eq(out[1], 5);
    ck_assert_uint_eq(gs_mesh_group_local_size(&n, GS_DIM_DP, 5), 2);
    ck_assert_uint_eq(gs_mesh_group_nodes(&n, GS_DIM_DP, 5), 1);
    /* ... and its TP peers are 2 apart: 1, 3, ..., 15 spans nodes 0-1, 4 per node. */
    ck_assert_uint_eq(gs_mesh_group_nodes(&n, GS_DIM_TP, 1), 2);
    ck_assert_uint_eq(gs_mesh_group_local_size(&n, GS_DIM_TP, 1), 4);
    ck_assert_uint_eq(gs_mesh_group_local_size(&n, GS_DIM_TP, 15), 4);
    /* Nodes: ceil(world / gpus_per_node). */
    gs_mesh p = make_mesh(3, 3, 1, NULL, 4);
    ck_assert_uint_eq(gs_mesh_nodes(&p), 3); /* 9 ranks on 4-GPU nodes: 4 + 4 + 1 */
}
END_TEST

/* Second implementation: walk every group's members to count nodes, local sizes and node
 * crossings; compare with the closed forms, for every order and awkward node sizes. */
START_TEST(test_placement_brute_force)
{
    static const uint64_t shapes[][3] = {{8, 4, 2}, {2, 3, 5}, {3, 4, 2}, {4, 6, 1},
                                         {6, 2, 3}, {5, 1, 7}, {1, 9, 2}, {2, 2, 2}};
    static const uint64_t node_sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 64};
    uint64_t members[16];
    for (size_t o = 0; o < 6; o++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (size_t ns = 0; ns < sizeof node_sizes / sizeof node_sizes[0]; ns++) {
                uint64_t G = node_sizes[ns];
                gs_mesh m = make_mesh(shapes[k][0], shapes[k][1], shapes[k][2], all_orders[o], G);
                for (int di = 0; di < GS_DIM_COUNT; di++) {
                    gs_dim d = (gs_dim)di;
                    int crosses = 0;
                    uint64_t first_crossing = UINT64_MAX; /* lowest crossing group number */
                    for (uint64_t r = 0; r < m.world; r++) {
                        gs_mesh_group(&m, d, r, members);
                        uint64_t nodes = 1, local = 0;
                        for (uint64_t i = 0; i < m.size[d]; i++) {
                            if (i > 0 && members[i] / G != members[i - 1] / G)
                                nodes++; /* node numbers never decrease along the group */
                            local += members[i] / G == r / G;
                        }
                        ck_assert_uint_eq(gs_mesh_group_nodes(&m, d, r), nodes);
                        ck_assert_uint_eq(gs_mesh_group_local_size(&m, d, r), local);
                        crosses |= nodes > 1;
                        if (nodes > 1) {
                            uint64_t g = gs_mesh_group(&m, d, r, NULL);
                            if (g < first_crossing)
                                first_crossing = g;
                        }
                    }
                    uint64_t example = 0;
                    ck_assert_msg(gs_mesh_dim_crosses_nodes(&m, d, &example) == crosses,
                                  "order %s shape %llux%llux%llu G=%llu dim %s",
                                  all_order_names[o], (unsigned long long)shapes[k][0],
                                  (unsigned long long)shapes[k][1],
                                  (unsigned long long)shapes[k][2], (unsigned long long)G,
                                  gs_dim_name(d));
                    if (crosses) {
                        ck_assert_uint_lt(example, m.world);
                        ck_assert_uint_gt(gs_mesh_group_nodes(&m, d, example), 1);
                        ck_assert_uint_eq(gs_mesh_group(&m, d, example, NULL), first_crossing);
                    }
                }
            }
}
END_TEST

/* -------------------------------------------------------------------------------- checks ---- */

START_TEST(test_check_clean)
{
    gs_model model = llama2_70b();
    gs_mesh m = make_mesh(8, 4, 2, order_tp_pp_dp, 8);
    gs_diag w;
    gs_error err;
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 64, &model, 0, &w, &err), GS_OK);
    ck_assert_uint_eq(w.count, 0);
    gs_diag_fini(&w);
}
END_TEST

START_TEST(test_check_world_mismatch)
{
    gs_model model = llama2_70b();
    gs_mesh m = make_mesh(8, 4, 2, NULL, 8);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 56, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "grid dp=4 x pp=2 x tp=8 = 64 ranks but the cluster "
                                          "has 7 nodes x 8 GPUs = 56 GPUs"));
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 60, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "= 64 ranks but the cluster has 60 GPUs"));
}
END_TEST

START_TEST(test_check_tp_cross_node)
{
    gs_model model = llama2_70b();
    gs_mesh m = make_mesh(16, 4, 1, NULL, 8); /* 64 GPUs, TP 16 over 8-GPU nodes */
    gs_diag w;
    gs_error err;
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 64, &model, 0, &w, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "tp=16 spans 2 nodes of 8 GPUs: TP all-reduces would "
                                          "cross the network (set grid.allow_tp_cross_node: "
                                          "true to accept)"));
    /* allowed: a warning naming the same numbers; the KV replication warning too
     * (kv_heads 8 < tp 16: 16 / 8 = 2 ranks per KV head). */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 64, &model, 1, &w, &err), GS_OK);
    ck_assert(diag_has(&w, "tp=16 spans 2 nodes of 8 GPUs"));
    ck_assert(diag_has(&w, "kv_heads=8 < tp=16: each KV head is replicated on 2 TP ranks"));
    gs_diag_fini(&w);
}
END_TEST

/* tp smaller than the node but the order or the node size makes groups straddle. */
START_TEST(test_check_tp_straddle)
{
    gs_error err;
    gs_diag w;
    /* order dp-tp-pp, dp=8, tp=2: TP peers are 8 apart, rank r and r + 8 on adjacent nodes. */
    static const gs_dim dp_tp_pp[GS_DIM_COUNT] = {GS_DIM_DP, GS_DIM_TP, GS_DIM_PP};
    gs_mesh a = make_mesh(2, 8, 1, dp_tp_pp, 8);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&a, 16, NULL, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "tp=2 with order dp-tp-pp on 8-GPU nodes puts TP "
                                          "group 0 (ranks 0, 8) on 2 nodes (0-1)"));
    /* tp=4 fastest on 6-GPU nodes, 24 ranks: group 1 = ranks 4-7 covers nodes 0 and 1. */
    gs_mesh b = make_mesh(4, 6, 1, NULL, 6);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&b, 24, NULL, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "TP group 1 (ranks 4-7) on 2 nodes (0-1)"));
    /* ... and allowed, it is a warning. */
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&b, 24, NULL, 1, &w, &err), GS_OK);
    ck_assert_uint_eq(w.count, 1);
    ck_assert(diag_has(&w, "accepted because grid.allow_tp_cross_node is true"));
    gs_diag_fini(&w);
    /* tp=2 on 6-GPU nodes: 6 % 2 == 0, every pair inside a node. */
    gs_mesh c = make_mesh(2, 12, 1, NULL, 6);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&c, 24, NULL, 0, NULL, &err), GS_OK);
    /* tp=3 on 8-GPU nodes but the whole grid fits one node (world 6): no crossing. */
    gs_mesh d = make_mesh(3, 2, 1, NULL, 8);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&d, 6, NULL, 0, NULL, &err), GS_OK);
    /* tp=3 on 8-GPU nodes, 24 ranks: group 2 = ranks 6-8 straddles nodes 0 and 1. */
    gs_mesh e = make_mesh(3, 8, 1, NULL, 8);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&e, 24, NULL, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "TP group 2 (ranks 6-8) on 2 nodes (0-1)"));
}
END_TEST

START_TEST(test_check_layers)
{
    gs_model model = llama2_70b();
    gs_diag w;
    gs_error err;
    /* 80 layers over pp=3: 80 = 3 * 26 + 2, so the first two stages take 27. */
    gs_mesh m = make_mesh(8, 1, 3, NULL, 8);
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 24, &model, 0, &w, &err), GS_OK);
    ck_assert_uint_eq(w.count, 1);
    ck_assert_str_eq(w.warnings[0],
                     "80 layers do not divide by pp=3: stages hold 27, 27, 26 layers");
    gs_diag_fini(&w);
    /* pp=12: 80 = 12 * 6 + 8: stages 0-7 hold 7, stages 8-11 hold 6. */
    gs_mesh m12 = make_mesh(8, 1, 12, NULL, 8);
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m12, 96, &model, 0, &w, &err), GS_OK);
    ck_assert(diag_has(&w, "80 layers do not divide by pp=12: stages 0-7 hold 7 layers, "
                           "stages 8-11 hold 6"));
    gs_diag_fini(&w);
    /* More stages than layers is an error. */
    model.layers = 2;
    gs_mesh m4 = make_mesh(8, 1, 4, NULL, 8);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m4, 32, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "pp=4 exceeds the model's 2 layers"));
}
END_TEST

START_TEST(test_check_heads_kv_ffn_vocab)
{
    gs_model model = llama2_70b();
    gs_diag w;
    gs_error err;
    /* heads 64 % tp 6 = 4: error. kv 8 and tp 6: neither divides the other: error too.
     * ffn 28672 % 6 = 4 (28672 = 6 * 4778 + 4): error. All reported together. */
    gs_mesh m6 = make_mesh(6, 1, 1, NULL, 6);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m6, 6, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "heads=64 not divisible by tp=6"));
    ck_assert_ptr_nonnull(strstr(err.msg, "kv_heads=8 and tp=6"));
    ck_assert_ptr_nonnull(strstr(err.msg, "ffn=28672 not divisible by tp=6"));
    /* kv 8, tp 12 (heads 96, ffn 24576 = 12 * 2048 to isolate it): error. */
    model.heads = 96;
    model.ffn = 24576;
    gs_mesh m12 = make_mesh(12, 1, 1, NULL, 12);
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m12, 12, &model, 0, &w, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "kv_heads=8 and tp=12: neither divides the other"));
    ck_assert_ptr_null(strstr(err.msg, "heads=96"));
    ck_assert_ptr_null(strstr(err.msg, "ffn="));
    gs_diag_fini(&w);
    /* kv 8, tp 16 on 16-GPU nodes: a warning only, 16 / 8 = 2 ranks per KV head. */
    model = llama2_70b();
    gs_mesh m16 = make_mesh(16, 1, 1, NULL, 16);
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m16, 16, &model, 0, &w, &err), GS_OK);
    ck_assert_uint_eq(w.count, 1);
    ck_assert_str_eq(w.warnings[0], "kv_heads=8 < tp=16: each KV head is replicated on 2 TP ranks");
    gs_diag_fini(&w);
    /* ffn alone: 28000 % 8 = 0 but 28004 % 8 = 4. */
    model.ffn = 28004;
    gs_mesh m8 = make_mesh(8, 1, 1, NULL, 8);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m8, 8, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "ffn=28004 not divisible by tp=8: the MLP cannot be split evenly "
                              "across TP ranks");
    /* vocab 32001 over tp 8: padded to ceil(32001 / 8) = 4001 rows per rank, 32008 total. */
    model = llama2_70b();
    model.vocab = 32001;
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m8, 8, &model, 0, &w, &err), GS_OK);
    ck_assert(diag_has(&w, "vocab=32001 not divisible by tp=8: the embedding and LM head are "
                           "padded to 32008 rows (4001 per TP rank)"));
    gs_diag_fini(&w);
}
END_TEST

/* A nominal model (params: 7e9 style) keeps its shapes, so the same checks apply. */
START_TEST(test_check_nominal)
{
    gs_model model;
    memset(&model, 0, sizeof model);
    model.nominal_params = 7000000000ULL;
    model.layers = 32;
    model.hidden = 4096;
    model.heads = 32;
    model.kv_heads = 32;
    model.ffn = 11008;
    model.seq = 4096;
    gs_mesh m = make_mesh(6, 1, 1, NULL, 8);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 6, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "heads=32 not divisible by tp=6")); /* 32 = 6*5 + 2 */
    gs_mesh m8 = make_mesh(8, 1, 1, NULL, 8); /* 32 % 8 = 0, 11008 = 8 * 1376 */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m8, 8, &model, 0, NULL, &err), GS_OK);
}
END_TEST

/* Stage split: 80 layers, pp 3 -> 27, 27, 26 starting at 0, 27, 54; pp 2 -> 40, 40 at 0, 40. */
START_TEST(test_stage_layers)
{
    gs_mesh m3 = make_mesh(1, 1, 3, NULL, 8);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m3, 80, 0), 27);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m3, 80, 1), 27);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m3, 80, 2), 26);
    ck_assert_uint_eq(gs_mesh_stage_first_layer(&m3, 80, 0), 0);
    ck_assert_uint_eq(gs_mesh_stage_first_layer(&m3, 80, 1), 27);
    ck_assert_uint_eq(gs_mesh_stage_first_layer(&m3, 80, 2), 54);
    gs_mesh m2 = make_mesh(8, 4, 2, NULL, 8);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m2, 80, 0), 40);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m2, 80, 1), 40);
    ck_assert_uint_eq(gs_mesh_stage_first_layer(&m2, 80, 1), 40);
    /* pp 7 over 10 layers: 2, 2, 2, 1, 1, 1, 1 — first layers are running sums. */
    gs_mesh m7 = make_mesh(1, 1, 7, NULL, 8);
    static const uint64_t want[7] = {2, 2, 2, 1, 1, 1, 1};
    uint64_t sum = 0;
    for (uint64_t st = 0; st < 7; st++) {
        ck_assert_uint_eq(gs_mesh_stage_layers(&m7, 10, st), want[st]);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&m7, 10, st), sum);
        sum += want[st];
    }
    ck_assert_uint_eq(sum, 10);
}
END_TEST

/* Uneven first / last stages, as Megatron-LM's get_num_layers_to_build splits them: Llama 3
 * 405B's 126 layers over pp 16 with 7 on the first and the last stage leave 112 for 14 stages,
 * 8 each; stage s > 0 starts at 7 + 8 (s - 1), the last at 119, and 119 + 7 = 126. Only a first
 * count (10 layers, pp 4, first 1): the other 3 stages hold 3 each, starting at 0, 1, 4, 7. */
START_TEST(test_stage_layers_uneven)
{
    gs_mesh m = make_mesh(8, 16, 16, NULL, 8);
    gs_mesh_set_stage_layers(&m, 7, 7);
    uint64_t sum = 0;
    for (uint64_t st = 0; st < 16; st++) {
        uint64_t want = st == 0 || st == 15 ? 7 : 8;
        ck_assert_uint_eq(gs_mesh_stage_layers(&m, 126, st), want);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&m, 126, st), sum);
        sum += want;
    }
    ck_assert_uint_eq(sum, 126);
    ck_assert_uint_eq(gs_mesh_stage_first_layer(&m, 126, 15), 119);
    gs_mesh f = make_mesh(1, 1, 4, NULL, 8);
    gs_mesh_set_stage_layers(&f, 1, 0);
    static const uint64_t first[4] = {0, 1, 4, 7}, held[4] = {1, 3, 3, 3};
    for (uint64_t st = 0; st < 4; st++) {
        ck_assert_uint_eq(gs_mesh_stage_layers(&f, 10, st), held[st]);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&f, 10, st), first[st]);
    }
    /* the checks: a rest that does not divide (126 - 7 - 6 = 113 over 14 stages), counts past
     * the layers, and pp 1 are refused; 7 / 7 passes */
    gs_model model = llama2_70b();
    model.layers = 126;
    model.heads = 128, model.kv_heads = 8, model.hidden = 16384, model.ffn = 53248, model.vocab = 128256;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 2048, &model, 0, NULL, &err), GS_OK);
    gs_mesh_set_stage_layers(&m, 7, 6);
    ck_assert_int_eq(gs_mesh_check(&m, 2048, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "the other 14 stages must split the remaining layers of 126 evenly"));
    gs_mesh_set_stage_layers(&m, 100, 30);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 2048, &model, 0, NULL, &err), GS_ERR_INPUT);
    gs_mesh one = make_mesh(8, 256, 1, NULL, 8);
    gs_mesh_set_stage_layers(&one, 7, 0);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&one, 2048, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "need pp >= 2"));
}
END_TEST

/* The interleaved order over uneven stages: 6 layers, pp 2, 2 virtual stages, the first stage 2
 * layers (chunks of 1), the second 4 (chunks of 2). Virtual stages in order: (chunk 0, stage 0)
 * = layer 0, (0, 1) = 1-2, (1, 0) = 3, (1, 1) = 4-5. */
START_TEST(test_global_layer_uneven_interleaved)
{
    gs_mesh m = make_mesh(1, 1, 2, NULL, 8);
    gs_mesh_set_stage_layers(&m, 2, 0);
    static const uint64_t s0[2] = {0, 3}, s1[4] = {1, 2, 4, 5};
    for (uint64_t l = 0; l < 2; l++)
        ck_assert_uint_eq(gs_pipe_global_layer(&m, 6, 2, 0, l), s0[l]);
    for (uint64_t l = 0; l < 4; l++)
        ck_assert_uint_eq(gs_pipe_global_layer(&m, 6, 2, 1, l), s1[l]);
    /* even: 8 layers, pp 2, v 2: (chunk * pp + stage) * 2 + within */
    gs_mesh e = make_mesh(1, 1, 2, NULL, 8);
    ck_assert_uint_eq(gs_pipe_global_layer(&e, 8, 2, 1, 3), 7);
    ck_assert_uint_eq(gs_pipe_global_layer(&e, 8, 2, 0, 2), 4);
    ck_assert_uint_eq(gs_pipe_global_layer(&e, 8, 1, 1, 3), 7);
}
END_TEST

/* The embedding and the loss counted as layers of the split (Megatron-LM's
 * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split), by hand.
 * Llama 3.1 405B, 126 layers, pp 8, v 8, both: (126 + 2) / 64 = 2 per virtual stage; virtual
 * stage k = chunk x 8 + stage holds 2 but k = 0 (the embedding's place) and k = 63 (the loss's)
 * hold 1: 1 + 62 x 2 + 1 = 126. In k order the first layers are 0, 1, 3, 5, ..., 2k - 1, the
 * last virtual stage's 125. Stage 0 holds 1 + 7 x 2 = 15, stages 1-6 16, stage 7 15; stage 0's
 * chunk 1 (k = 8) starts at stage-local layer 1, global 15. */
START_TEST(test_stage_layers_accounted_interleaved)
{
    gs_mesh m = make_mesh(8, 8, 8, NULL, 8);
    gs_mesh_set_split_accounting(&m, 1, 1);
    uint64_t next = 0; /* the next global layer, virtual stage by virtual stage */
    for (uint64_t k = 0; k < 64; k++) {
        uint64_t stage = k % 8, chunk = k / 8, want = k == 0 || k == 63 ? 1 : 2;
        uint64_t begin = gs_pipe_chunk_begin(&m, 126, 8, stage, chunk);
        ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 126, 8, stage, chunk), want);
        ck_assert_uint_eq(begin, stage == 0 && chunk > 0 ? 2 * chunk - 1 : 2 * chunk);
        for (uint64_t w = 0; w < want; w++) {
            ck_assert_uint_eq(gs_pipe_chunk_of(&m, 126, 8, stage, begin + w), chunk);
            ck_assert_uint_eq(gs_pipe_global_layer(&m, 126, 8, stage, begin + w), next + w);
        }
        next += want;
    }
    ck_assert_uint_eq(next, 126);
    ck_assert_uint_eq(gs_pipe_global_layer(&m, 126, 8, 0, 1), 15);
    for (uint64_t st = 0; st < 8; st++)
        ck_assert_uint_eq(gs_mesh_stage_layers(&m, 126, st), st == 0 || st == 7 ? 15 : 16);

    /* the partition's chunk spans agree: stage 0 is [0, 0], [1, 2], ..., [13, 14]; stage 7
     * [0, 1], ..., [12, 13], [14, 14] */
    gs_partition p;
    memset(&p, 0, sizeof p);
    p.layers = 15;
    p.chunk0_fewer = 1;
    int64_t bot, top;
    gs_partition_chunk_span(&p, 8, 0, &bot, &top);
    ck_assert_int_eq(bot, 0);
    ck_assert_int_eq(top, 0);
    gs_partition_chunk_span(&p, 8, 7, &bot, &top);
    ck_assert_int_eq(bot, 13);
    ck_assert_int_eq(top, 14);
    p.chunk0_fewer = 0, p.last_chunk_fewer = 1;
    gs_partition_chunk_span(&p, 8, 6, &bot, &top);
    ck_assert_int_eq(bot, 12);
    ck_assert_int_eq(top, 13);
    gs_partition_chunk_span(&p, 8, 7, &bot, &top);
    ck_assert_int_eq(bot, 14);
    ck_assert_int_eq(top, 14);
}
END_TEST

/* Without virtual stages: 126 layers, pp 8, both counted: 128 / 8 = 16 per stage, the first and
 * the last 15, first layers 0, 15, 31, ..., 111 (16 s - 1). Only the embedding, 31 layers over
 * pp 4: 32 / 4 = 8, stage 0 holds 7; first layers 0, 7, 15, 23. Only the loss, 31 over 4: the
 * last stage 7, the others 8 from 0, 8, 16, 24. The checks: 32 + 1 over pp 4 does not divide,
 * and first_stage_layers beside either is refused. */
START_TEST(test_stage_layers_accounted)
{
    gs_mesh m = make_mesh(8, 8, 8, NULL, 8);
    gs_mesh_set_split_accounting(&m, 1, 1);
    for (uint64_t st = 0; st < 8; st++) {
        ck_assert_uint_eq(gs_mesh_stage_layers(&m, 126, st), st == 0 || st == 7 ? 15 : 16);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&m, 126, st), st ? 16 * st - 1 : 0);
        ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 126, 1, st, 0), st == 0 || st == 7 ? 15 : 16);
    }
    gs_mesh e = make_mesh(1, 1, 4, NULL, 8);
    gs_mesh_set_split_accounting(&e, 1, 0);
    static const uint64_t held_e[4] = {7, 8, 8, 8}, first_e[4] = {0, 7, 15, 23};
    for (uint64_t st = 0; st < 4; st++) {
        ck_assert_uint_eq(gs_mesh_stage_layers(&e, 31, st), held_e[st]);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&e, 31, st), first_e[st]);
    }
    gs_mesh_set_split_accounting(&e, 0, 1);
    static const uint64_t held_l[4] = {8, 8, 8, 7}, first_l[4] = {0, 8, 16, 24};
    for (uint64_t st = 0; st < 4; st++) {
        ck_assert_uint_eq(gs_mesh_stage_layers(&e, 31, st), held_l[st]);
        ck_assert_uint_eq(gs_mesh_stage_first_layer(&e, 31, st), first_l[st]);
    }
    gs_model model = llama2_70b();
    model.layers = 32;
    gs_error err;
    gs_error_init(&err);
    gs_mesh_set_split_accounting(&e, 1, 0);
    ck_assert_int_eq(gs_mesh_check(&e, 4, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "the 32 layers + 1 must split evenly over pp=4 stages: found 33"));
    model.layers = 31;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&e, 4, &model, 0, NULL, &err), GS_OK);
    gs_mesh_set_stage_layers(&e, 7, 0);
    ck_assert_int_eq(gs_mesh_check(&e, 4, &model, 0, NULL, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "Megatron-LM refuses"));
}
END_TEST

/* -------------------------------------------------------------------------------- limits ---- */

/* 10^7 ranks: tp 8 x dp 125000 x pp 10, Megatron order. The last rank 9999999 is
 * tp 7, dp 124999, pp 9 (7 + 8 * (124999 + 125000 * 9) = 9999999), on node 1249999. */
START_TEST(test_limits_ten_million)
{
    gs_model model = llama2_70b();
    gs_mesh m = make_mesh(8, 125000, 10, NULL, 8);
    ck_assert_uint_eq(m.world, 10000000);
    ck_assert_uint_eq(gs_mesh_nodes(&m), 1250000);
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(&m, 9999999, c);
    ck_assert_uint_eq(c[GS_DIM_TP], 7);
    ck_assert_uint_eq(c[GS_DIM_DP], 124999);
    ck_assert_uint_eq(c[GS_DIM_PP], 9);
    ck_assert_uint_eq(gs_mesh_coords_rank(&m, c), 9999999);
    ck_assert_uint_eq(gs_mesh_rank_node(&m, 9999999), 1249999);
    /* DP group of rank 0: 0, 8, ..., 999992 (125000 members) over 125000 nodes, 1 per node. */
    ck_assert_uint_eq(gs_mesh_group_count(&m, GS_DIM_DP), 80);
    ck_assert_uint_eq(gs_mesh_group_nodes(&m, GS_DIM_DP, 0), 125000);
    ck_assert_uint_eq(gs_mesh_group_local_size(&m, GS_DIM_DP, 0), 1);
    ck_assert_uint_eq(gs_mesh_group_first(&m, GS_DIM_PP, gs_mesh_group_count(&m, GS_DIM_PP) - 1),
                      999999); /* last PP group starts at the last rank of stage 0 */
    /* 80 layers % 10 = 0, heads and kv fine for tp 8: the check is clean and O(1). */
    gs_error err;
    gs_diag w;
    gs_diag_init(&w);
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_check(&m, 10000000, &model, 0, &w, &err), GS_OK);
    ck_assert_uint_eq(w.count, 0);
    gs_diag_fini(&w);
    /* TP 3 over 8-GPU nodes at this scale is found as crossing too, without enumeration. */
    gs_mesh t3 = make_mesh(3, 3333333, 1, NULL, 8);
    uint64_t ex;
    ck_assert_int_eq(gs_mesh_dim_crosses_nodes(&t3, GS_DIM_TP, &ex), 1);
    ck_assert_uint_gt(gs_mesh_group_nodes(&t3, GS_DIM_TP, ex), 1);
    /* Absurd node size 2^23 + 1 with tp 2 over 2^24 ranks: node 0 holds ranks 0 .. 2^23, so
     * the TP pair (2^23, 2^23 + 1) straddles nodes 0 and 1. Beyond the search bound; the
     * answer must still be "crosses". */
    const uint64_t two23 = (uint64_t)1 << 23;
    gs_mesh big = make_mesh(2, two23, 1, NULL, two23 + 1);
    ck_assert_uint_eq(gs_mesh_rank_node(&big, two23), 0);
    ck_assert_uint_eq(gs_mesh_rank_node(&big, two23 + 1), 1);
    ck_assert_uint_eq(gs_mesh_group_nodes(&big, GS_DIM_TP, two23), 2);
    ck_assert_int_eq(gs_mesh_dim_crosses_nodes(&big, GS_DIM_TP, NULL), 1);
}
END_TEST

START_TEST(test_limits_errors)
{
    gs_mesh m;
    gs_error err;
    const uint64_t two40 = (uint64_t)1 << 40;
    /* 2^40 x 2^40 = 2^80 ranks: overflow. */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, two40, two40, 1, NULL, 8, &err), GS_ERR_OVERFLOW);
    ck_assert_ptr_nonnull(strstr(err.msg, "overflows"));
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 1, two40, two40, NULL, 8, &err), GS_ERR_OVERFLOW);
    /* 2^32 x 2^31 x 2 = 2^64: one past the largest value. */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, (uint64_t)1 << 32, (uint64_t)1 << 31, 2, NULL, 8, &err),
                     GS_ERR_OVERFLOW);
    /* 2^32 x 2^31 x 1 = 2^63 fits. */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, (uint64_t)1 << 32, (uint64_t)1 << 31, 1, NULL, 8, &err),
                     GS_OK);
    ck_assert_uint_eq(m.world, (uint64_t)1 << 63);
    /* Zero degrees, zero node size, bad order. */
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 8, 0, 2, NULL, 8, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "dp=0"));
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 8, 4, 2, NULL, 0, &err), GS_ERR_INPUT);
    static const gs_dim dup[GS_DIM_COUNT] = {GS_DIM_TP, GS_DIM_TP, GS_DIM_PP};
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 8, 4, 2, dup, 8, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "permutation"));
}
END_TEST

static Suite *mesh_suite(void)
{
    Suite *s = suite_create("mesh");
    TCase *tc = tcase_create("coords");
    tcase_add_test(tc, test_seed_table_tp_pp_dp);
    tcase_add_test(tc, test_megatron_default);
    tcase_add_test(tc, test_all_orders_round_trip);
    tcase_add_test(tc, test_order_parse_format);
    suite_add_tcase(s, tc);

    tc = tcase_create("groups");
    tcase_add_test(tc, test_seed_groups);
    tcase_add_test(tc, test_megatron_groups);
    tcase_add_test(tc, test_groups_brute_force);
    suite_add_tcase(s, tc);

    tc = tcase_create("placement");
    tcase_add_test(tc, test_hsdp_local_size);
    tcase_add_test(tc, test_placement_brute_force);
    suite_add_tcase(s, tc);

    tc = tcase_create("checks");
    tcase_add_test(tc, test_check_clean);
    tcase_add_test(tc, test_check_world_mismatch);
    tcase_add_test(tc, test_check_tp_cross_node);
    tcase_add_test(tc, test_check_tp_straddle);
    tcase_add_test(tc, test_check_layers);
    tcase_add_test(tc, test_check_heads_kv_ffn_vocab);
    tcase_add_test(tc, test_check_nominal);
    tcase_add_test(tc, test_stage_layers);
    tcase_add_test(tc, test_stage_layers_uneven);
    tcase_add_test(tc, test_stage_layers_accounted);
    tcase_add_test(tc, test_stage_layers_accounted_interleaved);
    tcase_add_test(tc, test_global_layer_uneven_interleaved);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_add_test(tc, test_limits_ten_million);
    tcase_add_test(tc, test_limits_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mesh_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
