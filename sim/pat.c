/* NCCL's PAT algorithm (Parallel Aggregated Trees, NCCL 2.23 and later): all-gather and
 * reduce-scatter for communicators with one GPU per node, in log2(N) steps of a Bruck-style
 * exchange instead of the ring's N - 1, so that its latency grows with log2(N), not N
 * (reference 3.3, 3.5, 3.6; NCCL 2.30.7 src/graph/tuning.cc):
 *   busBw = nChannels x bwInter x 0.75 (item 4: "PAT: x0.75"), algBw = busBw (item 5: PAT keeps
 *           busBw for AG/RS, no n / (n - 1) conversion);
 *   latency = log2(N) x interLat / 3.5 + n x 2.8 us, interLat the NET tree latency (ppn = 1)
 *           (3.5 table, PAT row), no base latency;
 *   Simple protocol only; never all-reduce (3.6: "AllReduce never uses PAT").
 * NCCL enables it for AG/RS with one local rank ("1 GPU per node, host net only"); groups with
 * more ranks on a node use Ring (or NVLS / CollNet), as NCCL has no hierarchical AG/RS. */
#include <math.h>

#include "sim/collective_internal.h"

double gs__pat_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                    double *net_bytes)
{
    gs__graph g;
    uint64_t n = s->nranks, N = s->nnodes;
    if (net_bytes)
        *net_bytes = 0.0;
    if ((op != GS_COLL_ALLGATHER && op != GS_COLL_REDUCE_SCATTER) || p != GS_PROTO_SIMPLE || s->ppn != 1 || N < 2 ||
        n != N)
        return INFINITY;
    gs__graph_ring(t, s, &g);
    double busbw = (double)g.nch * g.bw_inter * 0.75;
    double cap = (double)gs__nics_near(t, 1) * gs__nic_gbs(t, N) * gs__nic_share(t, s);
    if (cap > 0.0 && busbw > cap)
        busbw = cap;
    if (!(busbw > 0.0))
        return INFINITY;
    double inter_lat = gs__hw_latency_us(GS_HOP_NET, GS__NCCL_TREE, p) + gs__inter_extra_us(t) * 2.0;
    double lat = log2((double)N) * inter_lat / 3.5 + (double)n * 2.8;
    if (net_bytes)
        *net_bytes = bytes * gs_busbw_factor(op, n);
    return (lat + bytes / (1000.0 * busbw)) * 1e-6;
}
