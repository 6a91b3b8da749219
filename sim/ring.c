/* NCCL's ring: all-reduce as reduce-scatter then all-gather around a ring of all n ranks, in
 * nChannels parallel rings; all-gather, reduce-scatter and broadcast on the same rings. Time is
 * NCCL's own estimate (reference 3.3, 3.5, 3.6): latency + bytes / algBw.
 *
 * Bandwidth, derived: every link of a ring carries the same bytes, nsteps/n x size per
 * channel (2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
 * broadcast), so the ring runs at its slowest link and busBw = nChannels x per-channel speed
 * (topology.c finds the channels NCCL's search would). On one node every channel crosses every
 * GPU's NVLink (H100 12 x 30 = 360 GB/s of 18 x 20.6; A100 12 x 20 = 240). Across nodes a
 * channel leaves each node through one NIC, so the channels share the NICs the group reaches:
 * busBw <= NICs x NIC bandwidth. With one NIC per GPU (rail-optimized DGX, 8 NICs) that is 8 x
 * NIC, each channel striping onto its own rail (DGX A100: 8 x 24 = 192 GB/s, nccl#1576); a
 * single NIC shared by the node's 8 GPUs carries all channels, so busBw is about that one NIC
 * (25 GbE: 2.94 GB/s). busBw is finally capped by the achievable NIC rate (the graph search
 * uses line rate, as NCCL does). algBw = busBw x n / nsteps. Protocols: Simple 1.0 of busBw,
 * LL128 0.92 capped per channel, LL 0.5 capped by llMaxBw (ref 3.3 item 4).
 *
 * Latency: base + per step, (nsteps - nInter) intra-node hops at max(intra hw latency, net
 * overhead) and nInter = 2(N-1) (all-reduce) or N-1 network hops (ref 3.5). */
#include <math.h>

#include "sim/collective_internal.h"

double gs__ring_time_graph(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                           const gs__graph *g, double busbw_cap_gbs)
{
    uint64_t n = s->nranks, nn = s->nnodes;
    double nsteps = gs__nsteps(op, n);
    double bw = nn <= 2 ? g->bw_intra : g->bw_inter; /* ref 3.3 item 2 */
    double busbw = (double)g->nch * bw;
    double algbw, lat, intra_lat, inter_lat, net_over, ninter;

    if (op == GS_COLL_ALLTOALL || n < 2 || g->nch < 1)
        return INFINITY;
    if (p == GS_PROTO_LL128 && !gs__ll128_enabled(t))
        return INFINITY;
    if (busbw_cap_gbs > 0.0 && busbw > busbw_cap_gbs)
        busbw = busbw_cap_gbs;
    if (p == GS_PROTO_LL) {
        busbw *= 0.5; /* half of every LL line is flags (ref 3.1) */
        if (busbw > gs__ll_max_bw(t, nn))
            busbw = gs__ll_max_bw(t, nn);
    } else if (p == GS_PROTO_LL128) {
        double cap = (double)g->nch * gs__per_ch_max_ring_ll128_bw(t, nn);
        busbw *= 0.92;
        if (busbw > cap)
            busbw = cap;
    }
    if (busbw <= 0.0)
        return INFINITY;
    algbw = busbw * (double)n / nsteps;

    /* Latency, ref 3.5. */
    intra_lat = gs__hw_latency_us(t->intra_hop, GS__NCCL_RING, p);
    inter_lat = gs__hw_latency_us(GS_HOP_NET, s->ppn == 1 ? GS__NCCL_TREE : GS__NCCL_RING, p) +
                gs__inter_extra_us(t) * (p == GS_PROTO_SIMPLE ? 2.0 : 1.0);
    net_over = nn > 1 ? t->net_overhead_s * 1e6 * (p == GS_PROTO_SIMPLE ? 3.0 : 1.0) : 0.0;
    lat = gs__base_latency_us(GS__NCCL_RING, p);
    if (op == GS_COLL_BROADCAST) {
        /* One pipelined pass; NCCL charges one hop of the slowest class. */
        lat += nn > 1 ? inter_lat : intra_lat;
    } else {
        ninter = nn > 1 ? (op == GS_COLL_ALLREDUCE ? 2.0 : 1.0) * (double)(nn - 1) : 0.0;
        lat += (nsteps - ninter) * fmax(intra_lat, net_over) + ninter * inter_lat;
        /* The "plateau effect of ring" (ref 3.6). */
        if (p == GS_PROTO_SIMPLE && nn > 1 && op == GS_COLL_ALLREDUCE &&
            bytes / ((double)g->nch * (double)n) >= 64.0)
            lat *= t->cluster.gpu.compute_capability < 80 ? 1.9 : 1.4;
    }
    return (lat + bytes / (1000.0 * algbw)) * 1e-6;
}

double gs__ring_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes)
{
    gs__graph g;
    double cap = 0.0;
    uint64_t nics = gs__nics_near(t, s->ppn);
    if (net_bytes)
        *net_bytes = 0.0;
    if (op == GS_COLL_ALLTOALL || s->nranks < 2)
        return INFINITY;
    gs__graph_ring(t, s, &g);
    if (s->nnodes > 1) {
        /* The NICs the group reaches, at their achievable rate and its share of them beside its
         * siblings, bound the ring. */
        cap = (double)nics * gs__nic_gbs(t, s->nnodes) * gs__nic_share(t, s);
        /* Each channel crosses the node boundary once per direction, carrying the op's bus
         * bytes; the channels stripe over the NICs. */
        if (net_bytes)
            *net_bytes = bytes * gs_busbw_factor(op, s->nranks) / (double)nics;
    }
    return gs__ring_time_graph(t, op, s, bytes, p, &g, cap);
}
