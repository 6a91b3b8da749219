/* The collective tuner: for each call, the algorithm and protocol with the lowest predicted
 * time, as NCCL's topoGetAlgoInfo does (reference 3.6), plus point-to-point and all-to-all
 * times, nccl-tests' bus-bandwidth factors, and NCCL's tuning constants (reference 3.2, NCCL
 * 2.30.7 src/graph/tuning.cc, ncclTunerConstantsDefaults) that the algorithm files share. */
#include <math.h>
#include <stddef.h>

#include "sim/collective.h"
#include "sim/collective_internal.h"

/* ------------------------------------------------------------------ NCCL's constants ----- */

/* Base latencies, us, [algo][LL, LL128, Simple] (ref 3.2). */
static const double base_lat_us[GS__NCCL_ALGO_COUNT][GS_PROTO_COUNT] = {
    [GS__NCCL_TREE] = {6.8, 14.0, 8.4},
    [GS__NCCL_RING] = {6.6, 14.0, 8.4},
    [GS__NCCL_NVLS] = {0.0, 0.0, 0.0},
    [GS__NCCL_NVLS_TREE] = {0.0, 0.0, 0.0},
};

/* Hardware latencies, us, [hw][algo][LL, LL128, Simple] (ref 3.2 hwLatencies). */
static const double hw_lat_us[GS_HOP_COUNT][GS__NCCL_ALGO_COUNT][GS_PROTO_COUNT] = {
    [GS_HOP_NVLINK] = {[GS__NCCL_TREE] = {0.6, 1.25, 4.0},
                       [GS__NCCL_RING] = {0.6, 1.9, 3.4},
                       [GS__NCCL_NVLS] = {0.0, 0.0, 25.0},
                       [GS__NCCL_NVLS_TREE] = {0.0, 0.0, 25.0}},
    [GS_HOP_PCI] = {[GS__NCCL_TREE] = {1.0, 1.9, 4.0},
                    [GS__NCCL_RING] = {1.0, 2.5, 5.7},
                    [GS__NCCL_NVLS] = {0.0, 0.0, 0.0},
                    [GS__NCCL_NVLS_TREE] = {0.0, 0.0, 0.0}},
    [GS_HOP_NET] = {[GS__NCCL_TREE] = {5.0, 8.5, 14.0},
                    [GS__NCCL_RING] = {2.7, 4.0, 14.0},
                    [GS__NCCL_NVLS] = {0.0, 0.0, 18.0},
                    [GS__NCCL_NVLS_TREE] = {0.0, 0.0, 20.9}},
};

/* Bandwidth caps, GB/s, [compute-capability row][1 node, 2 nodes, > 2 nodes] (ref 3.2). */
static const double ll_max_bws[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
static const double per_ch_max_ring_ll128_bws[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
static const double per_ch_max_tree_ll128_bws[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
static const double per_ch_max_tree_bws[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
static const double per_ch_max_nvls_tree_bws[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
static const double nvls_efficiency[4] = {0.0, 0.0, 0.85, 0.74};

/* treeCorrectionFactor[proto][log2(bytes >> 6)], powers of two from 64 B (ref 3.6). */
#define GS__TREE_CORRECTION_BUCKETS 24
static const double tree_correction[GS_PROTO_COUNT][GS__TREE_CORRECTION_BUCKETS] = {
    [GS_PROTO_LL] = {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1, 1},
    [GS_PROTO_LL128] = {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1, 1},
    [GS_PROTO_SIMPLE] = {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
                         .9, .9},
};

double gs__base_latency_us(gs__nccl_algo a, gs_proto p) { return base_lat_us[a][p]; }

double gs__hw_latency_us(gs_hop h, gs__nccl_algo a, gs_proto p) { return hw_lat_us[h][a][p]; }

int gs__nodes_index(uint64_t nnodes) { return nnodes <= 2 ? (int)(nnodes ? nnodes - 1 : 0) : 2; }

double gs__ll_max_bw(const gs_topo *t, uint64_t nnodes)
{
    /* One node: the GPU's row. Across nodes NCCL indexes by CPU vendor, row 0 = Intel (ref 3.2
     * note); gridstep assumes Intel x86 as for the net overhead. */
    return ll_max_bws[nnodes <= 1 ? t->cc_index : 0][gs__nodes_index(nnodes)];
}

double gs__per_ch_max_ring_ll128_bw(const gs_topo *t, uint64_t nnodes)
{
    return per_ch_max_ring_ll128_bws[t->cc_index][gs__nodes_index(nnodes)];
}

double gs__per_ch_max_tree_bw(const gs_topo *t, uint64_t nnodes)
{
    return per_ch_max_tree_bws[t->cc_index][gs__nodes_index(nnodes)];
}

double gs__per_ch_max_tree_ll128_bw(const gs_topo *t, uint64_t nnodes)
{
    return per_ch_max_tree_ll128_bws[t->cc_index][gs__nodes_index(nnodes)];
}

double gs__per_ch_max_nvls_tree_bw(const gs_topo *t, uint64_t nnodes)
{
    return per_ch_max_nvls_tree_bws[t->cc_index][gs__nodes_index(nnodes)];
}

double gs__nvls_efficiency(const gs_topo *t) { return nvls_efficiency[t->cc_index]; }

int gs__log2i(uint64_t v)
{
    int l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l;
}

double gs__tree_correction(gs_proto p, double bytes, int buckets)
{
    /* NCCL looks the factor up at floor(log2(bytes / 64)) and applies it while that bucket is
     * below `buckets` (23 for Tree, 24 for NVLSTree). gridstep interpolates linearly in log2
     * size between the table's points (and 1.0 past its end), which equals NCCL at every power
     * of two (nccl-tests' sizes) and keeps time growing with size: a factor step from 0.5 to
     * 0.6 at a bucket edge would otherwise make a bigger message faster. */
    double x, frac, f0, f1;
    int b;
    if (bytes < 64.0)
        return 1.0; /* log2(bytes >> 6) < 0: NCCL applies no correction */
    x = log2(bytes / 64.0);
    b = (int)floor(x);
    if (b >= buckets || b >= GS__TREE_CORRECTION_BUCKETS)
        return 1.0;
    frac = x - (double)b;
    f0 = tree_correction[p][b];
    f1 = b + 1 < buckets && b + 1 < GS__TREE_CORRECTION_BUCKETS ? tree_correction[p][b + 1] : 1.0;
    return f0 + (f1 - f0) * frac;
}

double gs__nsteps(gs_coll_op op, uint64_t n)
{
    if (op == GS_COLL_ALLREDUCE)
        return 2.0 * (double)(n - 1);
    if (op == GS_COLL_ALLGATHER || op == GS_COLL_REDUCE_SCATTER)
        return (double)(n - 1);
    return (double)n;
}

int gs__ll128_enabled(const gs_topo *t)
{
    /* ref 3.6: LL128 needs the intra-node path to be NVLink (<= NVB) and the GPU-NIC path on a
     * PCIe switch (<= PXB/PXN), not before sm70. NVLink presets are DGX/HGX designs with
     * GPUDirect NICs; the PCIe presets are commodity nodes with CPU-attached NICs. */
    return t->intra_hop == GS_HOP_NVLINK && t->cluster.gpu.compute_capability >= 70;
}

/* ------------------------------------------------------------------- public helpers ----- */

double gs_busbw_factor(gs_coll_op op, uint64_t n)
{
    if (n == 0)
        return 0.0;
    switch (op) {
    case GS_COLL_ALLREDUCE: return 2.0 * (double)(n - 1) / (double)n;
    case GS_COLL_ALLGATHER:
    case GS_COLL_REDUCE_SCATTER:
    case GS_COLL_ALLTOALL: return (double)(n - 1) / (double)n;
    case GS_COLL_BROADCAST:
    default: return 1.0;
    }
}

const char *gs_algo_name(gs_algo a)
{
    switch (a) {
    case GS_ALGO_RING: return "ring";
    case GS_ALGO_TREE: return "tree";
    case GS_ALGO_NVLS: return "nvls";
    case GS_ALGO_PAT: return "pat";
    default: return "p2p"; /* all-to-all and send/recv: NCCL runs them as grouped p2p */
    }
}

const char *gs_proto_name(gs_proto p)
{
    switch (p) {
    case GS_PROTO_LL: return "LL";
    case GS_PROTO_LL128: return "LL128";
    case GS_PROTO_SIMPLE: return "Simple";
    default: return "?";
    }
}

int gs_coll_channels(const gs_topo *t, const gs_coll_shape *shape)
{
    gs__graph g;
    if (shape->nranks < 2)
        return 0;
    gs__graph_ring(t, shape, &g);
    return g.nch;
}

double gs_p2p_time(const gs_topo *t, int same_node, uint64_t bytes)
{
    /* One message: the fabric's per-hop latency (NVLink / PCIe Simple) and per-GPU bandwidth
     * inside a node; the NIC's per-step latency and one NIC's achievable rate across nodes
     * (NCCL does not stripe one peer's traffic over several NICs, ref 2.3). */
    if (bytes == 0)
        return 0.0;
    double measured = gs__measured_p2p_time(t, same_node, (double)bytes);
    if (isfinite(measured))
        return measured;
    if (same_node) {
        /* a switchless mesh links a pair by 1 / (G - 1) of a GPU's links */
        double bw = t->cluster.intra.mesh > 1 ? t->intra_bw / (double)(t->cluster.intra.mesh - 1) : t->intra_bw;
        return t->cluster.intra.latency_s + (double)bytes / bw;
    }
    return t->cluster.nic.latency_s + (double)bytes / (gs__nic_gbs(t, 2) * 1e9);
}

/* All-to-all: every rank sends size/n to every other rank at once, as grouped send/recv. The
 * (ppn-1)/n of the buffer bound for local peers crosses the GPU's NVLink/PCIe; the (n-ppn)/n
 * bound for other nodes crosses the NICs, which the node's ppn GPUs share and which a rank
 * cannot aggregate beyond one ("the performance of a single NIC", ref 2.3, nccl-tests#267).
 * The two streams overlap; latency is one message of each class. */
static double alltoall_time(const gs_topo *t, const gs_coll_shape *s, double bytes, double *net_bytes)
{
    double n = (double)s->nranks, ppn = (double)s->ppn;
    double local = bytes * (ppn - 1.0) / n, remote = bytes * (n - ppn) / n;
    if (s->net_share > 0.0 && s->nnodes > 1) {
        /* the flex (DeepEP) dispatch: each token once over RDMA to each remote node, then once
         * over NVLink to each GPU there (the rows bound for the node's other GPUs, forwarded or
         * local, pass this one's NVLink ports); the kernel pipelines the two */
        local = bytes * (ppn - 1.0) / ppn;
        remote = bytes * s->net_share;
    }
    double t_local = 0.0, t_remote = 0.0, lat = 0.0;
    *net_bytes = 0.0;
    if (local > 0.0) {
        t_local = local / t->intra_bw;
        lat = t->cluster.intra.latency_s;
    }
    if (remote > 0.0) {
        uint64_t nics = gs__nics_near(t, s->ppn);
        double per_gpu = (double)nics * gs__nic_gbs(t, s->nnodes) * 1e9 / ppn;
        double one_nic = gs__nic_gbs(t, s->nnodes) * 1e9;
        t_remote = remote / fmin(per_gpu, one_nic);
        lat = fmax(lat, t->cluster.nic.latency_s);
        *net_bytes = remote * ppn / (double)nics;
    }
    return lat + fmax(t_local, t_remote);
}

typedef double (*algo_time_fn)(const gs_topo *, gs_coll_op, const gs_coll_shape *, double, gs_proto,
                               double *);

/* The algorithms in tie-breaking order: the first of equal times wins. */
static const algo_time_fn algo_time[GS_ALGO_COUNT] = {
    [GS_ALGO_RING] = gs__ring_time,
    [GS_ALGO_TREE] = gs__tree_time,
    [GS_ALGO_NVLS] = gs__nvls_time,
    [GS_ALGO_PAT] = gs__pat_time,
};

gs_status gs_coll_estimate(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, uint64_t bytes,
                           gs_algo force, gs_coll_cost *out)
{
    double best = INFINITY, best_net = 0.0, size = (double)bytes;
    gs_algo best_algo = GS_ALGO_RING;
    gs_proto best_proto = GS_PROTO_SIMPLE;

    if (!t || !shape || !out || (unsigned)op >= GS_COLL_COUNT || (unsigned)force > GS_ALGO_COUNT)
        return GS_ERR_INPUT;
    if (shape->nranks == 0 || shape->nnodes == 0 || shape->ppn == 0 || shape->ppn > shape->nranks ||
        shape->nnodes > shape->nranks || shape->ppn > t->gpus_per_node ||
        (double)shape->ppn * (double)shape->nnodes < (double)shape->nranks)
        return GS_ERR_INPUT;
    out->time_s = 0.0;
    out->algo = GS_ALGO_RING;
    out->proto = GS_PROTO_SIMPLE;
    out->algbw = out->busbw = out->net_bytes = 0.0;
    if (shape->nranks == 1 || bytes == 0)
        return GS_OK; /* nothing moves */
    if (force == GS_ALGO_COUNT) {
        double measured = gs__measured_time(t, op, shape, size);
        if (isfinite(measured)) {
            out->time_s = measured;
            out->algo = GS_ALGO_COUNT;
            out->algbw = size / measured;
            out->busbw = out->algbw * gs_busbw_factor(op, shape->nranks);
            return GS_OK;
        }
    }

    if (op == GS_COLL_ALLTOALL) {
        if (force != GS_ALGO_COUNT)
            return GS_ERR_UNSUPPORTED;
        best = alltoall_time(t, shape, size, &best_net);
        best_algo = GS_ALGO_COUNT;
    } else {
        for (int a = 0; a < GS_ALGO_COUNT; a++) {
            if (force != GS_ALGO_COUNT && (gs_algo)a != force)
                continue;
            for (int p = 0; p < GS_PROTO_COUNT; p++) {
                double net = 0.0;
                double tm = algo_time[a](t, op, shape, size, (gs_proto)p, &net);
                if (tm < best) {
                    best = tm;
                    best_net = net;
                    best_algo = (gs_algo)a;
                    best_proto = (gs_proto)p;
                }
            }
        }
        if (!isfinite(best))
            return GS_ERR_UNSUPPORTED;
    }
    out->time_s = best;
    out->algo = best_algo;
    out->proto = best_proto;
    out->algbw = size / best;
    out->busbw = out->algbw * gs_busbw_factor(op, shape->nranks);
    out->net_bytes = best_net;
    return GS_OK;
}
