/* Hierarchical (2D) collectives over G = ppn GPUs per node x N nodes (reference section 5,
 * "Hierarchical (2D) allreduce"): the software form of what NCCL's NVLSTree and CollNet do in
 * hardware, and what Horovod / torch HSDP-style process groups do by hand.
 *   all-reduce:     intra-node reduce-scatter of size S over G ranks (ring, NVLink/PCIe);
 *                   inter-node all-reduce of S/G over N ranks, G such rings in parallel, one per
 *                   rail (local rank k of every node);
 *                   intra-node all-gather of S over G ranks.
 *   all-gather:     inter-node all-gather to S/G per GPU on the rails, then intra-node
 *                   all-gather to S.
 *   reduce-scatter: intra-node reduce-scatter to S/G per GPU, then inter-node reduce-scatter
 *                   of S/G on the rails to S/n.
 * The phases run one after the other (no pipelining between them). Each phase is a ring
 * (ring.c's formula, same protocol throughout). The rail rings' bandwidth: the G rings share
 * the NICs nearest the group's GPUs, each getting NICs x NIC rate / G: one NIC per GPU when
 * the node has a NIC per GPU (rail-optimized DGX), 1/8 of one NIC on a node with one NIC for
 * 8 GPUs. So a NIC carries 2(N-1)/N x S/G x (G / NICs) bytes of an all-reduce: with a NIC per
 * GPU only 1/G of the data crosses each NIC.
 * It applies to groups that span nodes with more than one GPU on a node; otherwise it is the
 * plain ring and returns INFINITY so the tuner does not list the same thing twice. */
#include <math.h>

#include "sim/collective_internal.h"

double gs__hier_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes)
{
    uint64_t G = s->ppn, N = s->nnodes, nics = gs__nics_near(t, G);
    gs_coll_shape local = {G, 1, G};   /* the node's part of the group */
    gs_coll_shape rail = {N, N, 1};    /* one GPU per node: rank k's rail ring */
    gs__graph rail_graph;
    double rail_cap, shard = bytes / (double)G, t_intra, t_inter;

    if (net_bytes)
        *net_bytes = 0.0;
    if (N < 2 || G < 2 || s->nranks != G * N)
        return INFINITY; /* uneven placements: the rails would not line up */
    if (op != GS_COLL_ALLREDUCE && op != GS_COLL_ALLGATHER && op != GS_COLL_REDUCE_SCATTER)
        return INFINITY;

    /* Rail rings: NCCL's graph for a one-GPU-per-node communicator, at the NIC share each of
     * the G parallel rings gets. */
    gs__graph_ring(t, &rail, &rail_graph);
    rail_cap = (double)nics * gs__nic_gbs(t, N) / (double)G;

    if (op == GS_COLL_ALLREDUCE) {
        t_intra = gs__ring_time(t, GS_COLL_REDUCE_SCATTER, &local, bytes, p, NULL) +
                  gs__ring_time(t, GS_COLL_ALLGATHER, &local, bytes, p, NULL);
    } else {
        gs_coll_op phase = op; /* all-gather then all-gather; reduce-scatter likewise */
        t_intra = gs__ring_time(t, phase, &local, bytes, p, NULL);
    }
    t_inter = gs__ring_time_graph(t, op, &rail, shard, p, &rail_graph, rail_cap);
    if (net_bytes)
        *net_bytes = shard * gs_busbw_factor(op, N) * (double)G / (double)nics;
    return t_intra + t_inter;
}
