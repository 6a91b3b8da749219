/* One collective with every rank simulated as flows (`gridstep coll --exact`): the transfers of
 * all n ranks of the call, put on the cluster's links and solved with the max-min fair solver
 * (flow_net.c's gs_flow_net).
 *
 * Placement and links. Rank r sits on node r / ppn as GPU r % ppn (coll fills nodes ppn at a
 * time). Links per direction, bytes/s: each node's NIC egress and ingress (nic.bw), each GPU's
 * intra-node egress (intra.nccl_bw). A GPU reaches its rail NICs on a rail-optimized cluster
 * (flow.c's mapping), every NIC of its node otherwise; a group's ranks on a node reach the
 * union of theirs, and channel c of an algorithm leaves and enters a node through the
 * (c mod that many)-th of them, as NCCL spreads its channels over the NICs.
 *
 * The transfers, per algorithm the tuner picked (or --algo forced):
 *   ring       per channel (topology.c's graph), every rank sends to its ring neighbour
 *              (rank + 1, node-major) the op's bus bytes of the channel: factor(op, n) x size /
 *              channels (broadcast: size / channels, and the last rank sends nothing); a
 *              neighbour on the node is the sender's GPU link, one on the next node the two
 *              nodes' NICs.
 *   tree       all-reduce; per channel, on both of NCCL's trees (ncclGetDtree: tree 1 mirrors
 *              tree 0, or shifts it for an odd node count; NCCL duplicates the channels and
 *              gives the copies tree 1, so a channel's NIC carries both), size / (2 x channels)
 *              per tree: a chain through the node's GPUs, up and down, and the binary tree's
 *              edges between nodes, up and down, so a node's NICs carry 3x on the tree where it
 *              is interior and 1x on the other, 2 x size in all as tree.c counts.
 *   nvls       each GPU pushes its input into the NVSwitch over its link (all-reduce and
 *              reduce-scatter: size, all-gather: its size / n shard); across nodes (NVLSTree)
 *              the heads' tree edges as above, one channel per head GPU.
 *   pat        (one GPU per node) the ring's transfers: each node's NIC carries the op's bus
 *              bytes either way; the time model is pat.c's.
 *   p2p        all-to-all: each rank its (ppn - 1) / n of the buffer over its GPU link and its
 *              (n - ppn) / n over its NICs, out and in.
 * Each flow carries its bytes on the wire: LL doubles them (a flag per word), LL128 adds 8/120.
 * A flow's time alone (its work) is its phase's time from the cost model minus the phase's
 * latency (a ring's latency at the call's size, its "plateau" included): every flow of a phase
 * moves in lockstep, as the algorithm's pipeline does, so a phase takes its latency plus its
 * work over its slowest flow's speed (the pipeline runs at its slowest link; faster flows
 * finishing early would not free the links that hold it). Where the model planned a link
 * right, its flows fit and run at speed 1, and the solved time is the model's: the tuner's
 * formulas already divide the NICs among a call's own channels. The call is O(ranks x channels) flows
 * and one progressive filling per phase (gs_flow_solve_all). */
#include <math.h>
#include <stdlib.h>

#include "sim/collective_internal.h"
#include "sim/flow.h"

/* The cluster's links for one call. */
typedef struct exact_net {
    const gs_topo *t;
    uint64_t n, ppn, nodes, nics, gpn;
    int rail;
    uint32_t nic_in_base, gpu_base;
    size_t nlinks;
    gs_flow_net *net;
    uint64_t flows;    /* flows of the phase being built */
    uint64_t total;    /* flows over all phases */
} exact_net;

/* A set of ranks one phase's ring runs over: first + j x stride, j < count (node-major). */
/* The links of one collective's ranks: per node the NICs' egress and ingress, then each
 * GPU's own link. */
static gs_status net_init(exact_net *e, const gs_topo *t, const gs_coll_shape *shape)
{
    e->t = t;
    e->n = shape->nranks;
    e->ppn = shape->ppn;
    e->nodes = (e->n + e->ppn - 1) / e->ppn;
    e->gpn = t->gpus_per_node ? t->gpus_per_node : 1;
    e->nics = t->nics_per_node ? t->nics_per_node : 1;
    e->rail = t->cluster.rail_optimized;
    if (2 * e->nodes * e->nics + e->n >= UINT32_MAX)
        return GS_ERR_OVERFLOW;
    e->nic_in_base = (uint32_t)(e->nodes * e->nics);
    e->gpu_base = (uint32_t)(2 * e->nodes * e->nics);
    e->nlinks = (size_t)(2 * e->nodes * e->nics + e->n);
    return GS_OK;
}

typedef struct exact_comm {
    uint64_t first, stride, count;
} exact_comm;

static uint64_t node_of(const exact_net *e, uint64_t r) { return r / e->ppn; }

/* Bytes on the wire per byte of data: LL sends a flag with every 4-byte word (half of each
 * 8-byte line), LL128 120 data bytes per 128-byte line, Simple the data alone (ref 3.1). */
static double wire_factor(gs_proto p)
{
    return p == GS_PROTO_LL ? 2.0 : p == GS_PROTO_LL128 ? 128.0 / 120.0 : 1.0;
}

/* NICs GPU r reaches: [*a, *b] (flow.c's rank_nics). */
static void gpu_nics(const exact_net *e, uint64_t r, uint64_t *a, uint64_t *b)
{
    uint64_t g = r % e->ppn;
    if (!e->rail) {
        *a = 0;
        *b = e->nics - 1;
        return;
    }
    *a = g * e->nics / e->gpn;
    *b = ((g + 1) * e->nics + e->gpn - 1) / e->gpn - 1;
    if (*b < *a)
        *b = *a;
    if (*b >= e->nics)
        *b = e->nics - 1;
}

/* The NIC channel c of comm uses on node nd: the (c mod k)-th of the k NICs the comm's ranks
 * on nd reach (their GPUs are consecutive, so the NICs are a range). */
static uint64_t comm_nic(const exact_net *e, const exact_comm *cm, uint64_t nd, uint64_t c)
{
    uint64_t lo = nd * e->ppn, hi = lo + e->ppn - 1, a, b, lo_last, hi_first; /* NICs of GPUs lo, hi */
    uint64_t last = cm->first + (cm->count - 1) * cm->stride;
    if (cm->stride == 1) {
        lo = lo > cm->first ? lo : cm->first;
        hi = hi < last ? hi : last;
    } else { /* one member per node (rail rings) */
        lo = hi = nd * e->ppn + (cm->first % e->ppn);
    }
    gpu_nics(e, lo, &a, &lo_last);
    gpu_nics(e, hi, &hi_first, &b);
    return a + c % (b - a + 1);
}

static gs_status net_open(exact_net *e)
{
    double *cap = malloc(e->nlinks * sizeof *cap);
    gs_status rc;
    if (!cap)
        return GS_ERR_NOMEM;
    for (size_t i = 0; i < e->nlinks; i++)
        cap[i] = i < e->gpu_base ? e->t->nic_bw : e->t->intra_bw;
    rc = gs_flow_net_create(e->nlinks, cap, &e->net);
    free(cap);
    e->flows = 0;
    return rc;
}

/* Posts one transfer of `bytes` from rank src to rank dst (channel c of comm) taking work_s. */
static gs_status post_send(exact_net *e, const exact_comm *cm, uint64_t c, uint64_t src, uint64_t dst, double bytes,
                           double work_s)
{
    uint64_t sn = node_of(e, src), dn = node_of(e, dst);
    uint32_t id;
    gs_status rc;
    gs_flow_begin(e->net);
    if (sn == dn) {
        rc = gs_flow_add_bytes(e->net, (uint32_t)(e->gpu_base + src), bytes);
    } else {
        rc = gs_flow_add_bytes(e->net, (uint32_t)(sn * e->nics + comm_nic(e, cm, sn, c)), bytes);
        if (rc == GS_OK)
            rc = gs_flow_add_bytes(e->net, (uint32_t)(e->nic_in_base + dn * e->nics + comm_nic(e, cm, dn, c)), bytes);
    }
    if (rc == GS_OK)
        rc = gs_flow_post(e->net, 0.0, work_s, &id);
    e->flows++;
    return rc;
}

/* Solves the posted flows; *slowest = the latest end (seconds from the phase's start). */
static gs_status net_solve(exact_net *e, double *slowest)
{
    const gs_flow_change *ch;
    gs_status rc = gs_flow_solve_all(e->net, 0.0);
    size_t nc = rc == GS_OK ? gs_flow_changes(e->net, &ch) : 0;
    *slowest = 0.0;
    for (size_t i = 0; i < nc; i++)
        if (ch[i].end_s > *slowest)
            *slowest = ch[i].end_s;
    e->total += e->flows;
    gs_flow_net_destroy(e->net);
    e->net = NULL;
    return rc;
}

/* Ring transfers of one phase over comm: nch channels, each rank sending `bytes` per channel to
 * its successor (broadcast: not the last). */
static gs_status post_ring(exact_net *e, const exact_comm *cm, int nch, int bcast, double bytes, double work_s)
{
    gs_status rc = GS_OK;
    for (uint64_t c = 0; c < (uint64_t)nch && rc == GS_OK; c++)
        for (uint64_t j = 0; j < cm->count && rc == GS_OK; j++) {
            if (bcast && j + 1 == cm->count)
                break;
            uint64_t src = cm->first + j * cm->stride, dst = cm->first + ((j + 1) % cm->count) * cm->stride;
            rc = post_send(e, cm, c, src, dst, bytes, work_s);
        }
    return rc;
}

/* NCCL's binary tree over n nodes (ncclGetBtree): the parent of `rank`, -1 for the root. */
static int64_t btree_parent(int64_t n, int64_t rank)
{
    int64_t bit, up;
    if (rank == 0)
        return -1;
    for (bit = 1; bit < n; bit <<= 1)
        if (bit & rank)
            break;
    up = (rank ^ bit) | (bit << 1);
    if (up >= n)
        up = rank ^ bit;
    return up;
}

/* The parent of node `rank` in tree t (0 or 1) of NCCL's double binary tree (ncclGetDtree:
 * tree 1 shifts by one for an odd count, mirrors for an even one). */
static int64_t dtree_parent(int64_t n, int64_t rank, int t)
{
    int64_t u;
    if (t == 0)
        return btree_parent(n, rank);
    if (n % 2 == 1) {
        u = btree_parent(n, (rank - 1 + n) % n);
        return u < 0 ? -1 : (u + 1) % n;
    }
    u = btree_parent(n, n - 1 - rank);
    return u < 0 ? -1 : n - 1 - u;
}

/* Tree transfers: per channel, on both of NCCL's trees (NCCL duplicates the channels and gives
 * the copies the second tree, so each channel's NIC carries half its data on each tree), the
 * chain through each node's GPUs (when `chain`) and the node tree's edges between head GPUs
 * (the node's first rank, or GPU c for NVLSTree's heads); `bytes` per channel and tree. */
static gs_status post_tree(exact_net *e, int nch, int chain, int head_per_channel, double bytes, double work_s)
{
    exact_comm all = {0, 1, e->n};
    gs_status rc = GS_OK;
    for (uint64_t c = 0; c < (uint64_t)nch && rc == GS_OK; c++)
        for (int t = 0; t < 2 && rc == GS_OK; t++)
            for (uint64_t nd = 0; nd < e->nodes && rc == GS_OK; nd++) {
                uint64_t first = nd * e->ppn, local = e->n - first < e->ppn ? e->n - first : e->ppn;
                for (uint64_t l = 1; chain && l < local && rc == GS_OK; l++) {
                    rc = post_send(e, &all, c, first + l, first + l - 1, bytes, work_s); /* up */
                    if (rc == GS_OK)
                        rc = post_send(e, &all, c, first + l - 1, first + l, bytes, work_s); /* down */
                }
                int64_t parent = dtree_parent((int64_t)e->nodes, (int64_t)nd, t);
                if (parent < 0 || rc != GS_OK)
                    continue;
                uint64_t h = head_per_channel ? c % e->ppn : 0;
                uint64_t child = first + h, up = (uint64_t)parent * e->ppn + h;
                exact_comm heads = {h, e->ppn, e->nodes};
                const exact_comm *via = head_per_channel ? &heads : &all;
                if (up >= e->n)
                    up = (uint64_t)parent * e->ppn;
                rc = post_send(e, via, c, child, up, bytes, work_s);
                if (rc == GS_OK)
                    rc = post_send(e, via, c, up, child, bytes, work_s);
            }
    return rc;
}

/* One phase: latency lat_s, work_s of bandwidth time alone; adds its solved time to *time_s. */
static gs_status finish_phase(exact_net *e, double lat_s, double work_s, double *time_s, double *min_speed)
{
    double end;
    gs_status rc = net_solve(e, &end);
    if (rc != GS_OK)
        return rc;
    if (work_s > 0.0 && end > 0.0 && work_s / end < *min_speed)
        *min_speed = work_s / end;
    *time_s += lat_s + (end > work_s ? end : work_s);
    return GS_OK;
}

/* A ring phase: ncomms rings of the same shape sh (comm j = cm0 shifted by j x step), all at
 * once, each planned by ring.c for sh as if alone; `bytes` is each ring's nccl-tests size. Adds
 * the phase's solved time to *time_s. */
static gs_status ring_phase(exact_net *e, exact_comm cm0, uint64_t step, uint64_t ncomms, gs_coll_op op,
                            const gs_coll_shape *sh, double bytes, gs_proto p, double *time_s, double *min_speed)
{
    gs__graph g;
    double full = gs__ring_time(e->t, op, sh, bytes, p, NULL);
    double more = gs__ring_time(e->t, op, sh, bytes * (1.0 + 1.0 / 1024.0), p, NULL);
    gs_status rc;
    if (!isfinite(full) || !isfinite(more))
        return GS_ERR_UNSUPPORTED;
    /* ring.c's time is latency + bytes / algbw, its latency growing 1.4x past the "plateau"
     * size: the latency at this size is the time less 1024 x what 1/1024 more bytes add */
    double lat = full - 1024.0 * (more - full);
    lat = lat < 0.0 ? 0.0 : lat > full ? full : lat;
    double work = full - lat > 0.0 ? full - lat : 1e-30;
    gs__graph_ring(e->t, sh, &g);
    if ((rc = net_open(e)) != GS_OK)
        return rc;
    double per = wire_factor(p) * (op == GS_COLL_BROADCAST ? 1.0 : gs_busbw_factor(op, sh->nranks)) * bytes /
                 (double)g.nch;
    for (uint64_t j = 0; j < ncomms && rc == GS_OK; j++) {
        exact_comm cm = {cm0.first + j * step, cm0.stride, cm0.count};
        rc = post_ring(e, &cm, g.nch, op == GS_COLL_BROADCAST, per, work);
    }
    if (rc != GS_OK) {
        gs_flow_net_destroy(e->net);
        e->net = NULL;
        return rc;
    }
    return finish_phase(e, lat, work, time_s, min_speed);
}

gs_status gs_flow_coll_exact(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, uint64_t bytes,
                             gs_algo force, gs_flow_exact *out)
{
    exact_net e = {0};
    gs_coll_cost cost;
    gs_status rc;
    double size = (double)bytes, lat, work;
    out->time_s = out->analytic_s = 0.0;
    out->min_speed = 1.0;
    out->flows = 0;
    rc = gs_coll_estimate(t, op, shape, bytes, force, &cost);
    if (rc != GS_OK)
        return rc;
    out->analytic_s = cost.time_s;
    out->algo = cost.algo;
    out->proto = cost.proto;
    if (!(cost.time_s > 0.0))
        return GS_OK; /* nothing moves */
    if (net_init(&e, t, shape) != GS_OK)
        return GS_ERR_OVERFLOW;
    lat = gs_flow_coll_latency(t, op, shape, &cost);
    work = cost.time_s - lat;
    if (!(work > 0.0))
        work = 1e-30; /* all latency: the flows' speeds still count */
    double wire = wire_factor(cost.proto);

    switch (op == GS_COLL_ALLTOALL ? GS_ALGO_COUNT : cost.algo) {
    case GS_ALGO_RING:
    case GS_ALGO_PAT: { /* PAT (one GPU per node) moves the ring's bus bytes over each node's NIC */
        exact_comm all = {0, 1, e.n};
        rc = ring_phase(&e, all, 0, 1, op, shape, size, cost.proto, &out->time_s, &out->min_speed);
        out->flows = e.total;
        return rc;
    }
    case GS_ALGO_TREE: {
        gs__graph g;
        gs__graph_tree(t, shape, &g);
        if ((rc = net_open(&e)) != GS_OK)
            return rc;
        rc = post_tree(&e, g.nch, 1, 0, wire * size / (2.0 * (double)g.nch), work);
        break;
    }
    case GS_ALGO_NVLS: {
        gs__graph g;
        gs__graph_nvls(t, shape, &g);
        if ((rc = net_open(&e)) != GS_OK)
            return rc;
        double push = wire * (op == GS_COLL_ALLGATHER ? size / (double)e.n : size);
        for (uint64_t r = 0; r < e.n && rc == GS_OK; r++) {
            uint32_t id;
            gs_flow_begin(e.net);
            rc = gs_flow_add_bytes(e.net, (uint32_t)(e.gpu_base + r), push);
            if (rc == GS_OK)
                rc = gs_flow_post(e.net, 0.0, work, &id);
            e.flows++;
        }
        if (rc == GS_OK && e.nodes > 1 && g.nch > 0)
            rc = post_tree(&e, g.nch, 0, 1, wire * size / (2.0 * (double)g.nch), work);
        break;
    }
    default: { /* all-to-all as grouped p2p: one flow per rank, out and in */
        if ((rc = net_open(&e)) != GS_OK)
            return rc;
        for (uint64_t r = 0; r < e.n && rc == GS_OK; r++) {
            uint64_t nd = node_of(&e, r), on_node = e.n - nd * e.ppn < e.ppn ? e.n - nd * e.ppn : e.ppn, a, b;
            double local = wire * size * (double)(on_node - 1) / (double)e.n;
            double remote = wire * size * (double)(e.n - on_node) / (double)e.n;
            uint32_t id;
            gs_flow_begin(e.net);
            if (local > 0.0)
                rc = gs_flow_add_bytes(e.net, (uint32_t)(e.gpu_base + r), local);
            gpu_nics(&e, r, &a, &b);
            for (uint64_t k = a; k <= b && rc == GS_OK && remote > 0.0; k++) {
                rc = gs_flow_add_bytes(e.net, (uint32_t)(nd * e.nics + k), remote / (double)(b - a + 1));
                if (rc == GS_OK)
                    rc = gs_flow_add_bytes(e.net, (uint32_t)(e.nic_in_base + nd * e.nics + k),
                                           remote / (double)(b - a + 1));
            }
            if (rc == GS_OK)
                rc = gs_flow_post(e.net, 0.0, work, &id);
            e.flows++;
        }
        break;
    }
    }
    if (rc != GS_OK) {
        gs_flow_net_destroy(e.net);
        return rc;
    }
    rc = finish_phase(&e, lat, work, &out->time_s, &out->min_speed);
    out->flows = e.total;
    return rc;
}

gs_status gs_flow_sendrecv_exact(const gs_topo *t, const gs_coll_shape *shape, uint64_t bytes, gs_flow_exact *out)
{
    exact_net e = {0};
    gs_status rc;
    double v = (double)bytes, end = 0.0;
    out->time_s = out->analytic_s = 0.0;
    out->min_speed = 1.0;
    out->flows = 0;
    out->algo = GS_ALGO_COUNT;
    out->proto = GS_PROTO_SIMPLE;
    if (shape->nranks < 2 || bytes == 0)
        return GS_OK;
    out->analytic_s = gs_p2p_time(t, shape->nnodes == 1, bytes);
    if (net_init(&e, t, shape) != GS_OK)
        return GS_ERR_OVERFLOW;
    if ((rc = net_open(&e)) != GS_OK)
        return rc;
    /* rank r -> r + 1 mod n; one peer's traffic on one NIC (NCCL does not stripe a peer over
     * several NICs, ref 2.3): the first NIC of the sender's GPU and of the receiver's */
    for (uint64_t r = 0; r < e.n && rc == GS_OK; r++) {
        uint64_t dst = (r + 1) % e.n;
        int same = node_of(&e, r) == node_of(&e, dst);
        double lat = gs_flow_p2p_latency(t, same), work = gs_p2p_time(t, same, bytes) - lat;
        exact_comm self = {r, e.ppn, 1}, peer = {dst, e.ppn, 1};
        uint32_t id;
        gs_flow_begin(e.net);
        if (same) {
            rc = gs_flow_add_bytes(e.net, (uint32_t)(e.gpu_base + r), v);
        } else {
            rc = gs_flow_add_bytes(e.net, (uint32_t)(node_of(&e, r) * e.nics + comm_nic(&e, &self, node_of(&e, r), 0)),
                                   v);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes(e.net, (uint32_t)(e.nic_in_base + node_of(&e, dst) * e.nics +
                                                         comm_nic(&e, &peer, node_of(&e, dst), 0)),
                                       v);
        }
        if (rc == GS_OK)
            rc = gs_flow_post(e.net, 0.0, work > 0.0 ? work : 1e-30, &id);
        e.flows++;
    }
    if (rc == GS_OK)
        rc = gs_flow_solve_all(e.net, 0.0);
    if (rc == GS_OK) {
        /* each flow's end plus its own latency; flows are numbered by sender */
        for (uint64_t r = 0; r < e.n; r++) {
            int same = node_of(&e, r) == node_of(&e, (r + 1) % e.n);
            double done = gs_flow_end(e.net, (uint32_t)r) + gs_flow_p2p_latency(t, same);
            double work = gs_p2p_time(t, same, bytes) - gs_flow_p2p_latency(t, same);
            double sp = gs_flow_speed(e.net, (uint32_t)r);
            if (done > end)
                end = done;
            if (work > 0.0 && sp < out->min_speed)
                out->min_speed = sp;
        }
    }
    out->flows = e.flows;
    out->time_s = end;
    gs_flow_net_destroy(e.net);
    return rc;
}
