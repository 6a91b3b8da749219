/* NCCL's double binary tree, all-reduce only (reference 3.3, 3.5, 3.8): inside a node the
 * ranks form a chain; across nodes two complementary binary trees each reduce half the data up
 * and broadcast it down, so every node is interior in at most one tree and the full link
 * bandwidth is used while the depth stays log2(nodes).
 *
 * Bandwidth: busBw = nChannels x per-channel speed (bwIntra on one or two nodes, where the
 * search raises it up to 2 x bwInter, else bwInter), then NCCL's refinements: x 0.92 capped by
 * perChMaxTreeBw; LL: / 3.8 capped by llMaxBw; LL128: x 7/9 on one node, 120/128 across nodes,
 * capped by perChMaxTreeLL128Bw. algBw = busBw / 2 (NCCL stores half the bus bandwidth for
 * trees: reduce then broadcast move the data twice), times treeCorrectionFactor by size.
 * Physically the tree crosses each node's NICs about twice per byte (up and down), once on two
 * nodes, so the achievable bound on busBw is NICs x NIC rate, doubled on two nodes (where the
 * tree's reported busbw exceeds the NIC limit, ref 2.3).
 *
 * Latency: base + 2 x ((ppn - 1) intra hops + log2(nodes) network hops) (ref 3.5). */
#include <math.h>

#include "sim/collective_internal.h"

double gs__tree_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes)
{
    gs__graph g;
    uint64_t nn = s->nnodes, nics = gs__nics_near(t, s->ppn);
    double busbw, algbw, lat, intra_lat, inter_lat;

    if (net_bytes)
        *net_bytes = 0.0;
    if (op != GS_COLL_ALLREDUCE || s->nranks < 2)
        return INFINITY;
    if (p == GS_PROTO_LL128 && !gs__ll128_enabled(t))
        return INFINITY;
    gs__graph_tree(t, s, &g);
    busbw = (double)g.nch * (nn <= 2 ? g.bw_intra : g.bw_inter);
    if (nn > 1) {
        double cap = (double)nics * gs__nic_gbs(t, nn) * (nn <= 2 ? 2.0 : 1.0) * gs__nic_share(t, s);
        if (busbw > cap)
            busbw = cap;
        if (net_bytes) /* up and down each tree; on two nodes one crossing each way */
            *net_bytes = bytes * (nn <= 2 ? 1.0 : 2.0) / (double)nics;
    }
    /* Refinements in NCCL's order (ref 3.3 item 4). */
    busbw = fmin(busbw * 0.92, (double)g.nch * gs__per_ch_max_tree_bw(t, nn));
    if (p == GS_PROTO_LL)
        busbw = fmin(busbw / 3.8, gs__ll_max_bw(t, nn));
    else if (p == GS_PROTO_LL128)
        busbw = fmin(busbw * (nn == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                     (double)g.nch * gs__per_ch_max_tree_ll128_bw(t, nn));
    algbw = busbw * 0.5 * gs__tree_correction(p, bytes, GS__TREE_BUCKETS);
    if (algbw <= 0.0)
        return INFINITY;

    intra_lat = gs__hw_latency_us(t->intra_hop, GS__NCCL_TREE, p);
    inter_lat = gs__hw_latency_us(GS_HOP_NET, GS__NCCL_TREE, p) +
                gs__inter_extra_us(t) * (p == GS_PROTO_SIMPLE ? 2.0 : 1.0);
    lat = gs__base_latency_us(GS__NCCL_TREE, p) +
          2.0 * ((double)(s->ppn - 1) * intra_lat + (double)gs__log2i(nn) * inter_lat);
    return (lat + bytes / (1000.0 * algbw)) * 1e-6;
}
