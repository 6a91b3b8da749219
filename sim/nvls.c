/* NVLink SHARP (NVLS): the NVSwitch reduces and multicasts, so each GPU sends its data into the
 * switch once and reads the result once. One node: all-reduce, all-gather, reduce-scatter
 * (NCCL's NVLS). Across nodes: all-reduce only, as NVLSTree (in-switch reduction inside each
 * node, a tree of NICs between nodes); NVLS all-gather / reduce-scatter across nodes need
 * CollNet (SHARP switches), which gridstep does not model. Simple protocol only (ref 3.6).
 *
 * Bandwidth (ref 3.3 item 3), with the graph from topology.c: one channel per local GPU (its
 * head), each loading the head's NVSwitch links 2 x the speed and the others' 1 x, so the
 * speed is the ladder rung under NVLink / (ppn + 1): H100 370.8 / 9 -> 40 GB/s x 8 channels.
 *   intraBw = bwIntra x nvlsEfficiency x (nCh - 1) / nCh, x 2 for all-reduce (it pipelines
 *             the reduce and the multicast), x (ppn - 1) / ppn for all-gather / reduce-scatter;
 *   interBw = bwInter (x 2 for NVLSTree on two nodes);
 *   busBw   = nCh x min(intraBw, interBw, NVLSTree ? perChMaxNVLSTreeBw : inf).
 * H100: 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476 GB/s, the ~475-480 nccl-tests measure
 * (nccl-tests#212, #272, #290). algBw = busBw x n / nsteps for all-reduce; NVLS all-gather and
 * reduce-scatter keep algBw = busBw (no conversion, ref 3.3 item 5).
 *
 * Latency: NVLS hw latency (25 us NVLink), plus 2 log2(N) network hops for NVLSTree (ref 3.5). */
#include <math.h>

#include "sim/collective_internal.h"

double gs__nvls_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes)
{
    gs__graph g;
    uint64_t n = s->nranks, nn = s->nnodes, ppn = s->ppn;
    int tree = nn > 1;
    gs__nccl_algo a = tree ? GS__NCCL_NVLS_TREE : GS__NCCL_NVLS;
    double intra_bw, inter_bw, bw, busbw, algbw, lat;

    if (net_bytes)
        *net_bytes = 0.0;
    if (p != GS_PROTO_SIMPLE || n < 2 || !t->nvls)
        return INFINITY;
    if (op != GS_COLL_ALLREDUCE && (tree || (op != GS_COLL_ALLGATHER && op != GS_COLL_REDUCE_SCATTER)))
        return INFINITY;
    gs__graph_nvls(t, s, &g);
    if (g.nch < 2) /* NVLS needs at least two channels (ref 3.3 item 3) */
        return INFINITY;

    intra_bw = g.bw_intra * gs__nvls_efficiency(t) * (double)(g.nch - 1) / (double)g.nch;
    intra_bw *= op == GS_COLL_ALLREDUCE ? 2.0 : (double)(ppn - 1) / (double)ppn;
    inter_bw = g.bw_inter * (tree && nn <= 2 ? 2.0 : 1.0);
    bw = fmin(intra_bw, inter_bw);
    if (tree)
        bw = fmin(bw, gs__per_ch_max_nvls_tree_bw(t, nn));
    busbw = (double)g.nch * bw;
    if (tree) {
        /* Each head's share crosses the node's NICs up and down the tree, as tree.c argues. */
        uint64_t nics = gs__nics_near(t, ppn);
        double cap = (double)nics * gs__nic_gbs(t, nn) * (nn <= 2 ? 2.0 : 1.0) * gs__nic_share(t, s);
        if (busbw > cap)
            busbw = cap;
        if (net_bytes)
            *net_bytes = bytes * (nn <= 2 ? 1.0 : 2.0) / (double)nics;
    }
    if (busbw <= 0.0)
        return INFINITY;
    algbw = op == GS_COLL_ALLREDUCE ? busbw * (double)n / gs__nsteps(op, n) : busbw;
    /* NVLSTree gets the tree correction on Blackwell x86 (ref 3.6). */
    if (tree && t->cc_index >= 3)
        algbw *= gs__tree_correction(p, bytes, GS__NVLS_TREE_BUCKETS);

    lat = gs__base_latency_us(a, p) + gs__hw_latency_us(t->intra_hop, a, p);
    if (tree)
        lat += 2.0 * (double)gs__log2i(nn) *
               (gs__hw_latency_us(GS_HOP_NET, a, p) + 2.0 * gs__inter_extra_us(t));
    return (lat + bytes / (1000.0 * algbw)) * 1e-6;
}
