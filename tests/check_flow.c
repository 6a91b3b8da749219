/* Check suite for flow mode (sim/flow_net.c, sim/flow.c and their use in sim/des.c): the max-min
 * fair solver on hand-built flows, the cluster's links (a shared NIC, an oversubscribed uplink,
 * the class path's copies), one collective with every rank as flows (sim/flow_coll.c, coll
 * --exact), flow mode against analytic mode when nothing shares a link, the class path against the
 * exact path, and determinism. Expected values are derived by hand in the comments. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/report.h"
#include "sim/collective.h"
#include "sim/flow.h"
#include "sim/sim.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol) * fmax(1.0, fabs(b)))

/* ---------------------------------------------------------------------- the solver ------- */

static gs_flow_net *net;

static void net_setup(void)
{
    /* link A carries 10 bytes/s, link B 12 bytes/s */
    static const double cap[2] = {10.0, 12.0};
    ck_assert_int_eq(gs_flow_net_create(2, cap, &net), GS_OK);
}

static void net_teardown(void)
{
    gs_flow_net_destroy(net);
    net = NULL;
}

static uint32_t start(double now, double work, double bytes_a, double bytes_b)
{
    uint32_t id;
    gs_flow_begin(net);
    if (bytes_a > 0)
        ck_assert_int_eq(gs_flow_add_bytes(net, 0, bytes_a), GS_OK);
    if (bytes_b > 0)
        ck_assert_int_eq(gs_flow_add_bytes(net, 1, bytes_b), GS_OK);
    ck_assert_int_eq(gs_flow_start(net, now, work, &id), GS_OK);
    return id;
}

/* Three flows on two links, all started at t = 0. Each asks 10 bytes/s of every link it crosses
 * at full speed: f1 (A only, 0.25 s of work: 2.5 bytes), f2 (A and B, 1 s: 10 bytes on each),
 * f3 (B only, 1 s: 10 bytes).
 * Progressive filling: all rise together; A (cap 10, asked 20) fills at speed 0.5, B (cap 12,
 * asked 20) would fill at 0.6, so f1 and f2 freeze at 0.5. B then has 12 - 0.5 x 20 = 2 bytes/s
 * left for f3 alone (asking 10): f3 rises 0.2 more, to 0.7.
 * Ends: f1 0.25 / 0.5 = 0.5 s; f2 1 / 0.5 = 2 s; f3 1 / 0.7 = 1.428571 s.
 * f1 ends at 0.5: f2 is alone on A (may go to 1) and shares B with f3: 20 asked of 12 -> both
 * 0.6. Work left: f2 1 - 0.5 x 0.5 = 0.75 -> ends 0.5 + 0.75 / 0.6 = 1.75 s; f3 1 - 0.7 x 0.5
 * = 0.65 -> ends 0.5 + 0.65 / 0.6 = 1.583333 s.
 * f3 ends at 1.583333: f2 has 0.75 - 0.6 x 1.083333 = 0.1 left, alone (A 10/10, B 12/10) at
 * speed 1 -> ends 1.683333 s. */
START_TEST(test_solver_three_flows)
{
    uint32_t f1 = start(0.0, 0.25, 2.5, 0.0);
    ck_assert(NEAR(gs_flow_speed(net, f1), 1.0, 1e-12)); /* alone: A carries its 10 bytes/s */
    uint32_t f2 = start(0.0, 1.0, 10.0, 10.0);
    uint32_t f3 = start(0.0, 1.0, 0.0, 10.0);
    ck_assert_msg(NEAR(gs_flow_speed(net, f1), 0.5, 1e-9), "f1 %g", gs_flow_speed(net, f1));
    ck_assert_msg(NEAR(gs_flow_speed(net, f2), 0.5, 1e-9), "f2 %g", gs_flow_speed(net, f2));
    ck_assert_msg(NEAR(gs_flow_speed(net, f3), 0.7, 1e-9), "f3 %g", gs_flow_speed(net, f3));
    ck_assert(NEAR(gs_flow_end(net, f1), 0.5, 1e-9));
    ck_assert(NEAR(gs_flow_end(net, f2), 2.0, 1e-9));
    ck_assert(NEAR(gs_flow_end(net, f3), 1.0 / 0.7, 1e-9));

    ck_assert_int_eq(gs_flow_finish(net, 0.5, f1), GS_OK);
    ck_assert_msg(NEAR(gs_flow_speed(net, f2), 0.6, 1e-9), "f2 %g", gs_flow_speed(net, f2));
    ck_assert_msg(NEAR(gs_flow_speed(net, f3), 0.6, 1e-9), "f3 %g", gs_flow_speed(net, f3));
    ck_assert_msg(NEAR(gs_flow_end(net, f2), 1.75, 1e-9), "f2 end %g", gs_flow_end(net, f2));
    ck_assert_msg(NEAR(gs_flow_end(net, f3), 0.5 + 0.65 / 0.6, 1e-9), "f3 end %g", gs_flow_end(net, f3));

    ck_assert_int_eq(gs_flow_finish(net, 0.5 + 0.65 / 0.6, f3), GS_OK);
    ck_assert(NEAR(gs_flow_speed(net, f2), 1.0, 1e-9));
    ck_assert_msg(NEAR(gs_flow_end(net, f2), 0.5 + 0.65 / 0.6 + 0.1, 1e-9), "f2 end %g", gs_flow_end(net, f2));
}
END_TEST

/* Versions: every flow whose end moved is listed with a new version; older versions are stale
 * (the DES ignores their heap entries). Starting f2 next to f1 on A halves f1: both listed. */
START_TEST(test_solver_versions)
{
    const gs_flow_change *ch;
    uint32_t f1 = start(0.0, 1.0, 10.0, 0.0);
    ck_assert_int_eq(gs_flow_changes(net, &ch), 1);
    uint32_t v1 = ch[0].version;
    ck_assert(gs_flow_current(net, f1, v1));
    uint32_t f2 = start(0.0, 1.0, 10.0, 0.0);
    ck_assert_int_eq(gs_flow_changes(net, &ch), 2);
    ck_assert(!gs_flow_current(net, f1, v1));
    ck_assert(NEAR(gs_flow_end(net, f1), 2.0, 1e-12));
    ck_assert(NEAR(gs_flow_end(net, f2), 2.0, 1e-12));
    /* a flow on B alone does not touch the flows on A */
    start(0.0, 1.0, 0.0, 6.0);
    ck_assert_int_eq(gs_flow_changes(net, &ch), 1);
}
END_TEST

/* A flow alone is never slowed below its own time: asking 30 bytes/s of a 10 bytes/s link means
 * the cost model already priced that link, so it runs at speed 1. */
START_TEST(test_solver_alone_full_speed)
{
    uint32_t f = start(0.0, 1.0, 30.0, 0.0);
    ck_assert(NEAR(gs_flow_speed(net, f), 1.0, 1e-12));
    ck_assert(NEAR(gs_flow_end(net, f), 1.0, 1e-12));
}
END_TEST

/* ------------------------------------------------------------- the cluster's links ------- */

static gs_cluster cluster_of(const char *preset, uint64_t nodes, double over)
{
    const gs_cluster *p = gs_cluster_preset_find(preset);
    ck_assert_ptr_nonnull(p);
    gs_cluster c = *p;
    c.nodes = nodes;
    c.oversubscription = over;
    return c;
}

/* Two DP all-reduces of 1 GiB, groups {0, 8} and {1, 9}, on 2 pcie-a100-25gbe nodes (one
 * 25 GbE NIC per node, ~2.94 GB/s achievable). A ring over 2 ranks on 2 nodes pushes
 * 2 (n-1)/n x S = S through each node's NIC and its busBw is capped at that NIC's rate, so
 * alone it asks exactly the NIC. Both groups use GPU 0/1 of the same two nodes, hence the same
 * NIC: max-min fairness gives each half (speed 0.5), so the bandwidth part takes 2x the
 * analytic time and the whole call 2 x work + latency. */
START_TEST(test_shared_nic)
{
    gs_cluster c = cluster_of("pcie-a100-25gbe", 2, 1.0);
    gs_topo t;
    gs_flow_model *m;
    gs_coll_cost cost;
    gs_coll_shape shape = {2, 2, 1, 1, 0.0};
    uint64_t bytes = UINT64_C(1) << 30, g1[2] = {0, 8}, g2[2] = {1, 9};
    uint32_t a, b;
    gs_topo_init(&t, &c);
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLREDUCE, &shape, bytes, GS_ALGO_COUNT, &cost), GS_OK);
    double lat = gs_flow_coll_latency(&t, GS_COLL_ALLREDUCE, &shape, &cost), work = cost.time_s - lat;
    ck_assert(lat >= 0.0 && work > 0.0);
    /* the NIC sets the analytic time: S / 2.94 GB/s within 1% */
    ck_assert_msg(NEAR(work, (double)bytes / t.nic_bw, 0.01), "work %g", work);
    ck_assert_int_eq(gs_flow_model_create(&t, 2, &m), GS_OK);
    gs_flow_net *n = gs_flow_model_net(m);
    ck_assert_int_eq(gs_flow_model_coll(m, 0.0, GS_COLL_ALLREDUCE, &shape, bytes, &cost, g1, 2, work, NULL, &a), GS_OK);
    ck_assert(NEAR(gs_flow_speed(n, a), 1.0, 1e-9)); /* alone: analytic speed */
    ck_assert_int_eq(gs_flow_model_coll(m, 0.0, GS_COLL_ALLREDUCE, &shape, bytes, &cost, g2, 2, work, NULL, &b), GS_OK);
    /* 0.5 within 1e-3: the ring's "plateau" latency (x 1.4 on large calls) counts as work, so
     * the call asks a hair under the whole NIC */
    ck_assert_msg(NEAR(gs_flow_speed(n, a), 0.5, 1e-3), "a %g", gs_flow_speed(n, a));
    ck_assert_msg(NEAR(gs_flow_speed(n, b), 0.5, 1e-3), "b %g", gs_flow_speed(n, b));
    double flow_time = gs_flow_end(n, b) + lat;
    ck_assert_msg(NEAR(flow_time / cost.time_s, 2.0, 0.01), "flow %g s vs analytic %g s", flow_time, cost.time_s);
    gs_flow_model_destroy(m);
}
END_TEST

/* 96 dgx-a100-80g nodes = 3 leaf groups of 32 (8 HDR rails, ~24 GB/s each). Each of the 256
 * GPUs of leaf 0 sends 1 GB to the same GPU of node + 32 in leaf 1: every send has its own
 * rail NIC at both ends, so alone it runs at the NIC rate. Oversubscription 1: no uplink link,
 * all at speed 1. Oversubscription 2: leaf 0's uplink carries 32 x 8 x 24 / 2 = 128 NICs' worth
 * while the sends ask 256: each gets speed 0.5, 2x the time. A send inside leaf 2 (node 64 GPU 0
 * -> node 65 GPU 0, idle NICs) crosses no uplink and keeps speed 1 either way. */
static double uplink_speed(double over, double *inside)
{
    gs_cluster c = cluster_of("dgx-a100-80g", 96, over);
    gs_topo t, flat;
    gs_flow_model *m;
    uint32_t id = 0, last;
    double bytes = 1e9;
    gs_topo_init(&t, &c);
    c.oversubscription = 1.0;
    gs_topo_init(&flat, &c);
    double lat = gs_flow_p2p_latency(&flat, 0), work = gs_p2p_time(&flat, 0, (uint64_t)bytes) - lat;
    ck_assert(NEAR(work, bytes / t.nic_bw, 1e-9));
    ck_assert_int_eq(gs_flow_model_create(&t, 96, &m), GS_OK);
    ck_assert_uint_eq(gs_flow_model_leaf_nodes(m), 32);
    for (uint64_t r = 0; r < 256; r++)
        ck_assert_int_eq(gs_flow_model_p2p(m, 0.0, r, r + 256, (uint64_t)bytes, work, NULL, &id), GS_OK);
    ck_assert_int_eq(gs_flow_model_p2p(m, 0.0, 64 * 8, 65 * 8, (uint64_t)bytes, work, NULL, &last), GS_OK);
    *inside = gs_flow_speed(gs_flow_model_net(m), last);
    double s = gs_flow_speed(gs_flow_model_net(m), id);
    ck_assert(NEAR(gs_flow_speed(gs_flow_model_net(m), 0), s, 1e-12)); /* all cross sends alike */
    gs_flow_model_destroy(m);
    return s;
}

START_TEST(test_oversubscribed_uplink)
{
    double in1, in2;
    double s1 = uplink_speed(1.0, &in1), s2 = uplink_speed(2.0, &in2);
    ck_assert_msg(NEAR(s1, 1.0, 1e-9), "oversubscription 1: speed %g", s1);
    ck_assert_msg(NEAR(s2, 0.5, 1e-6), "oversubscription 2: speed %g", s2);
    ck_assert_msg(NEAR(s1 / s2, 2.0, 1e-6), "slowdown %g", s1 / s2);
    ck_assert(NEAR(in1, 1.0, 1e-9) && NEAR(in2, 1.0, 1e-9)); /* inside a leaf: untouched */
}
END_TEST

/* The class path's copies (flow.c "The class path"). Mesh TP 8 x DP 2 (tp-dp-pp) on 2 nodes of
 * 8 GPUs: node 0 holds the TP group 0-7, and DP group i is {i, 8 + i}, so the 8 ranks of a node
 * sit in 8 different DP groups that all cross the node's NICs at once with the same all-reduce.
 * On the class path only rank 0 is present, standing for all 16.
 *   pcie-a100-25gbe (one NIC for 8 GPUs, no rails): the 8 groups' transfers share that NIC, so
 *   rank 0's flow counts 8 copies: alone its own bytes fill the NIC (as in test_shared_nic),
 *   with its copies it gets 1/8 (0.125, within 1e-3 for the ring's plateau latency), exactly
 *   what each of the 8 flows gets on the exact path where all 8 groups are present.
 *   dgx-a100-80g (a NIC per GPU, rails): GPU i's group leaves through NIC i alone: 1 copy,
 *   speed 1.
 * Sends: mesh TP 8 x PP 2 (stage 0 = node 0, stage 1 = node 1); rank 0 -> rank 8 stands for
 * i -> 8 + i, i = 0..7: 8 copies on the shared NIC (one send alone fills a NIC: speed 1/8),
 * 1 with rails. */
static double class_coll_speed(const char *preset, int exact_path)
{
    gs_cluster c = cluster_of(preset, 2, 1.0);
    gs_topo t;
    gs_mesh mesh;
    gs_error err;
    gs_flow_model *m;
    gs_coll_cost cost;
    gs_coll_shape shape = {2, 2, 1, 1, 0.0};
    uint64_t bytes = UINT64_C(1) << 30;
    uint32_t id = 0, first = 0;
    gs_error_init(&err);
    gs_topo_init(&t, &c);
    ck_assert_int_eq(gs_mesh_init(&mesh, 8, 2, 1, NULL, 8, &err), GS_OK);
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLREDUCE, &shape, bytes, GS_ALGO_COUNT, &cost), GS_OK);
    double lat = gs_flow_coll_latency(&t, GS_COLL_ALLREDUCE, &shape, &cost), work = cost.time_s - lat;
    gs_flow_class cls = {&mesh, GS_GROUP_DP};
    ck_assert_int_eq(gs_flow_model_create(&t, 2, &m), GS_OK);
    for (uint64_t i = 0; i < (exact_path ? 8u : 1u); i++) {
        uint64_t g[2] = {i, 8 + i};
        ck_assert_int_eq(gs_flow_model_coll(m, 0.0, GS_COLL_ALLREDUCE, &shape, bytes, &cost, g, 2, work,
                                            exact_path ? NULL : &cls, &id), GS_OK);
        if (i == 0)
            first = id;
    }
    double sp = gs_flow_speed(gs_flow_model_net(m), first);
    gs_flow_model_destroy(m);
    return sp;
}

static double class_send_speed(const char *preset)
{
    gs_cluster c = cluster_of(preset, 2, 1.0);
    gs_topo t;
    gs_mesh mesh;
    gs_error err;
    gs_flow_model *m;
    uint64_t bytes = UINT64_C(1) << 30;
    uint32_t id;
    gs_error_init(&err);
    gs_topo_init(&t, &c);
    ck_assert_int_eq(gs_mesh_init(&mesh, 8, 1, 2, NULL, 8, &err), GS_OK);
    gs_flow_class cls = {&mesh, GS_GROUP_PP};
    double work = gs_p2p_time(&t, 0, bytes) - gs_flow_p2p_latency(&t, 0);
    ck_assert_int_eq(gs_flow_model_create(&t, 2, &m), GS_OK);
    ck_assert_int_eq(gs_flow_model_p2p(m, 0.0, 0, 8, bytes, work, &cls, &id), GS_OK);
    double sp = gs_flow_speed(gs_flow_model_net(m), id);
    gs_flow_model_destroy(m);
    return sp;
}

START_TEST(test_class_copies)
{
    double shared = class_coll_speed("pcie-a100-25gbe", 0), exact = class_coll_speed("pcie-a100-25gbe", 1);
    ck_assert_msg(NEAR(shared, 0.125, 1e-3), "class path, shared NIC: speed %g", shared);
    ck_assert_msg(NEAR(shared, exact, 1e-9), "class %g vs exact %g", shared, exact);
    double rails = class_coll_speed("dgx-a100-80g", 0);
    ck_assert_msg(NEAR(rails, 1.0, 1e-9), "class path, rails: speed %g", rails);
    double send_shared = class_send_speed("pcie-a100-25gbe"), send_rails = class_send_speed("dgx-a100-80g");
    ck_assert_msg(NEAR(send_shared, 0.125, 1e-9), "class send, shared NIC: speed %g", send_shared);
    ck_assert_msg(NEAR(send_rails, 1.0, 1e-9), "class send, rails: speed %g", send_rails);
}
END_TEST

/* ------------------------------------------- one collective, every rank (coll --exact) ---- */

static gs_flow_exact coll_exact(gs_cluster c, uint64_t ranks, gs_algo force, uint64_t bytes)
{
    gs_topo t;
    gs_flow_exact x;
    gs_coll_shape shape = {ranks, (ranks + c.gpus_per_node - 1) / c.gpus_per_node, c.gpus_per_node, 1, 0.0};
    c.nodes = shape.nnodes;
    gs_topo_init(&t, &c);
    ck_assert_int_eq(gs_flow_coll_exact(&t, GS_COLL_ALLREDUCE, &shape, bytes, force, &x), GS_OK);
    return x;
}

/* No link shared beyond the plan. 1 GiB all-reduce, ring, 16 ranks on 2 dgx-a100-80g nodes:
 * NCCL's graph gives 8 channels of 24 GB/s (HDR line rate 25 GB/s), one per rail NIC, each
 * crossing each node boundary once per direction, and busBw = 8 x 24 = 192 GB/s: by hand the
 * bandwidth part is 2 x 15/16 x 2^30 B / 192 GB/s = 10.49 ms, plus 16 ranks' latency (well
 * under 0.3 ms). Each rail NIC carries one channel's bus bytes in that time, under its 24 GB/s,
 * so every flow runs alone: slowest speed 1 and the solved time = the model's (within 5%).
 * The case, 64 MiB over 1,024 ranks on 128 DGX A100 nodes (the tuner's tree, LL128):
 * each NIC carries one channel of both of NCCL's trees, a node's interior tree 3 x and its leaf
 * tree 1 x the channel's half: 2 / channels of the buffer per NIC, which the tree's busBw
 * (105.8 GB/s) leaves under the NIC: again speed 1. */
START_TEST(test_coll_exact_no_sharing)
{
    double hand = 2.0 * 15.0 / 16.0 * 1073741824.0 / 192e9;
    gs_flow_exact x = coll_exact(cluster_of("dgx-a100-80g", 2, 1.0), 16, GS_ALGO_RING, UINT64_C(1) << 30);
    ck_assert_msg(x.algo == GS_ALGO_RING && x.flows == 8 * 16, "algo %d, %llu flows", (int)x.algo,
                  (unsigned long long)x.flows);
    ck_assert_msg(NEAR(x.min_speed, 1.0, 1e-9), "slowest flow %g", x.min_speed);
    ck_assert_msg(NEAR(x.time_s, x.analytic_s, 0.05), "exact %g s vs analytic %g s", x.time_s, x.analytic_s);
    ck_assert_msg(x.time_s > hand && x.time_s < hand + 3e-4, "exact %g s vs hand %g s + latency", x.time_s, hand);
    x = coll_exact(cluster_of("dgx-a100-80g", 128, 1.0), 1024, GS_ALGO_COUNT, UINT64_C(64) << 20);
    ck_assert_int_eq(x.algo, GS_ALGO_TREE);
    ck_assert_msg(NEAR(x.min_speed, 1.0, 1e-9), "slowest flow %g", x.min_speed);
    ck_assert_msg(NEAR(x.time_s, x.analytic_s, 0.05), "exact %g s vs analytic %g s", x.time_s, x.analytic_s);
}
END_TEST

/* 8 GPUs on one NIC, no rails. 1 GiB ring all-reduce, 16 ranks on 2 pcie-a100-25gbe nodes: the
 * ring crosses each node boundary once per channel each way, so the node's one NIC carries the
 * op's bus bytes, 2 x 15/16 x 2^30 B, at 2.94 GB/s at best: 684.9 ms, whatever the channels. The
 * flows, every channel through the one NIC, find the model's time (within 5%) and never beat
 * that bound. With 8 rail NICs the channels stripe over them and the NIC bound is 8x lower. */
START_TEST(test_coll_exact_shared_nic)
{
    gs_cluster c = cluster_of("pcie-a100-25gbe", 2, 1.0);
    const double bus = 2.0 * 15.0 / 16.0 * 1073741824.0;
    gs_flow_exact x = coll_exact(c, 16, GS_ALGO_RING, UINT64_C(1) << 30);
    ck_assert_msg(x.time_s >= bus / c.nic.bw * (1 - 1e-9), "exact %g s under the NIC bound %g s", x.time_s,
                  bus / c.nic.bw);
    ck_assert_msg(NEAR(x.time_s, x.analytic_s, 0.05), "exact %g s vs analytic %g s", x.time_s, x.analytic_s);
    c.nics_per_node = 8;
    c.rail_optimized = 1;
    gs_flow_exact r = coll_exact(c, 16, GS_ALGO_RING, UINT64_C(1) << 30);
    ck_assert_msg(r.time_s >= bus / (8.0 * c.nic.bw) * (1 - 1e-9), "rails: exact %g s", r.time_s);
    ck_assert_msg(NEAR(r.time_s, r.analytic_s, 0.05), "rails: exact %g s vs analytic %g s", r.time_s, r.analytic_s);
    ck_assert(r.time_s < x.time_s);
}
END_TEST

/* -------------------------------------------------------------- through the simulator ---- */

#define SEED7B "model: {params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"

static void simulate(const char *yaml, int exact, int flow, gs_report *rep, FILE *trace)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag w;
    gs_backend_opts bo = {flow, NULL, NULL, NULL};
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", &s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&s, &m, &w, &err) == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
    ck_assert_msg(gs_sim_scenario(&s, &m, exact, &bo, rep, trace, &err) == GS_OK, "sim: %s", err.msg);
}

/* When no two transfers share a link at the same time, every flow runs alone at speed 1 and
 * takes latency + work = the analytic time, so the step matches analytic mode (within 1%):
 *   - one DP group of 64 (7B SHARD_GRAD_OP, 8 pcie-a100-25gbe nodes): its collectives run one
 *     after the other on the DP stream, nothing else communicates;
 *   - TP 8 on one DGX A100 node: one TP group, its collectives one after the other. */
START_TEST(test_no_overlap_equals_analytic)
{
    static const char *const cases[] = {
        SEED7B "cluster: {preset: pcie-a100-25gbe, nodes: 8}\ngrid: {dp: 64}\n"
               "strategy: {sharding: shard_grad_op, precision: fp16}\nbatch: {global: 64}\n",
        SEED7B "cluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {tp: 8}\nbatch: {global: 4}\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_report a, f;
        simulate(cases[i], 1, 0, &a, NULL);
        simulate(cases[i], 1, 1, &f, NULL);
        ck_assert_msg(NEAR(f.step_time_s, a.step_time_s, 0.01), "case %zu: flow %g s vs analytic %g s", i,
                      f.step_time_s, a.step_time_s);
        gs_report_fini(&a);
        gs_report_fini(&f);
    }
}
END_TEST

/* DP 8 x TP 2 on 2 pcie-a100-25gbe nodes: the two DP groups (TP rank 0 and TP rank 1) both
 * cross the one 25 GbE NIC of each node at the same time. Flow mode halves the NIC between them
 * while they overlap; analytic mode gives each group its half from the start (the groups are
 * siblings on the node, gs__nic_share), so the two agree within the part of the calls that do
 * not overlap (within 10%). */
START_TEST(test_dp_groups_share_nic)
{
    const char *y = SEED7B "cluster: {preset: pcie-a100-25gbe, nodes: 2}\ngrid: {dp: 8, tp: 2}\n"
                           "strategy: {sharding: shard_grad_op, precision: fp16}\nbatch: {global: 8}\n";
    gs_report a, f;
    simulate(y, 1, 0, &a, NULL);
    simulate(y, 1, 1, &f, NULL);
    double r = f.comm_s[GS_DIM_DP] / a.comm_s[GS_DIM_DP];
    ck_assert_msg(r > 0.9 && r <= 1.1, "DP comm flow / analytic = %g", r);
    gs_report_fini(&a);
    gs_report_fini(&f);
}
END_TEST

/* The class path meets the groups it does not simulate. DP 2 x TP 4 (tp-dp-pp) on 2
 * pcie-a100-25gbe nodes given 4 GPUs each: node 0 holds TP group 0-3, and DP group i is
 * {i, 4 + i}, so k = 4 identical DP groups (SHARD_GRAD_OP gathers and reduce-scatters, all issued
 * at the same points of the step) cross each node's one 25 GbE NIC together. A DP call alone
 * fills the NIC (a 2-rank ring across 2 nodes is NIC-bound), so four at once each get 1/4 of it.
 * Analytic mode charges each group its quarter (4 siblings on one NIC, gs__nic_share); the flows
 * find the same share: DP communication within 5% of analytic's on both paths. The class path
 * simulates rank 0 alone (class of 8); its flows count the 3 other groups' copies on the NIC, so
 * its step matches the exact path's, which simulates all 8 ranks and their 4 groups, within 2%.
 * By hand the analytic DP time is at least 4 x a lone group's NIC-bound bytes / (NIC rate). */
START_TEST(test_class_path_shared_nic)
{
    const char *y = SEED7B "cluster: {preset: pcie-a100-25gbe, nodes: 2, gpus_per_node: 4}\ngrid: {dp: 2, tp: 4}\n"
                           "strategy: {sharding: shard_grad_op, precision: fp16}\nbatch: {global: 8}\n";
    gs_report a, cf, ef;
    simulate(y, 0, 0, &a, NULL);
    simulate(y, 0, 1, &cf, NULL);
    simulate(y, 1, 1, &ef, NULL);
    ck_assert_msg(NEAR(cf.step_time_s, ef.step_time_s, 0.02), "class flow %g s vs exact flow %g s", cf.step_time_s,
                  ef.step_time_s);
    double rc = cf.comm_s[GS_DIM_DP] / a.comm_s[GS_DIM_DP], re = ef.comm_s[GS_DIM_DP] / a.comm_s[GS_DIM_DP];
    ck_assert_msg(rc > 0.95 && rc < 1.05, "class path DP comm flow / analytic = %g", rc);
    ck_assert_msg(re > 0.95 && re < 1.05, "exact path DP comm flow / analytic = %g", re);
    gs_report_fini(&a);
    gs_report_fini(&cf);
    gs_report_fini(&ef);
}
END_TEST

/* Same input, same bytes: two flow-mode runs with contention write identical traces. */
START_TEST(test_determinism)
{
    const char *y = SEED7B "cluster: {preset: pcie-a100-25gbe, nodes: 2}\ngrid: {dp: 4, tp: 2, pp: 2}\n"
                           "strategy: {sharding: full_shard, precision: fp16}\nbatch: {global: 8}\n";
    char *buf[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    double step[2];
    for (int k = 0; k < 2; k++) {
        gs_report r;
        FILE *tf = open_memstream(&buf[k], &len[k]);
        ck_assert_ptr_nonnull(tf);
        simulate(y, 1, 1, &r, tf);
        fclose(tf);
        step[k] = r.step_time_s;
        gs_report_fini(&r);
    }
    ck_assert(step[0] == step[1]);
    ck_assert(len[0] > 0 && len[0] == len[1]);
    ck_assert(memcmp(buf[0], buf[1], len[0]) == 0);
    free(buf[0]);
    free(buf[1]);
}
END_TEST

static Suite *flow_suite(void)
{
    Suite *s = suite_create("flow");
    TCase *solver = tcase_create("solver");
    tcase_add_checked_fixture(solver, net_setup, net_teardown);
    tcase_add_test(solver, test_solver_three_flows);
    tcase_add_test(solver, test_solver_versions);
    tcase_add_test(solver, test_solver_alone_full_speed);
    suite_add_tcase(s, solver);
    TCase *links = tcase_create("links");
    tcase_add_test(links, test_shared_nic);
    tcase_add_test(links, test_oversubscribed_uplink);
    tcase_add_test(links, test_class_copies);
    suite_add_tcase(s, links);
    TCase *exact = tcase_create("coll_exact");
    tcase_add_test(exact, test_coll_exact_no_sharing);
    tcase_add_test(exact, test_coll_exact_shared_nic);
    suite_add_tcase(s, exact);
    TCase *sim = tcase_create("sim");
    tcase_set_timeout(sim, 120);
    tcase_add_test(sim, test_no_overlap_equals_analytic);
    tcase_add_test(sim, test_dp_groups_share_nic);
    tcase_add_test(sim, test_class_path_shared_nic);
    tcase_add_test(sim, test_determinism);
    suite_add_tcase(s, sim);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(flow_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
