/* The simulated machine's links as one GPU sees them (gs_topo), the shape of a process group on
 * the mesh, and the per-channel graph NCCL's topology search would settle on for a group
 * (reference section 3.4; NCCL src/graph/search.cc ncclTopoCompute). Bandwidths in the gs__
 * helpers are GB/s as in NCCL; gs_topo itself holds bytes/s and seconds. */
#include "sim/topology.h"

#include <math.h>
#include <string.h>

#include "sim/collective_internal.h"

/* NCCL's net post overhead per inter-node step on Intel x86 (ref 2.5, tuning.cc getNetOverhead);
 * AMD would be 2 us. The presets do not name a CPU vendor; DGX H100 nodes are Intel (ref 2.1). */
#define GS__NET_OVERHEAD_INTEL_S 1.0e-6
/* NCCL's NET Ring Simple hw latency (ref 3.2), what the NIC presets' latency_s starts from. */
#define GS__NCCL_NET_SIMPLE_LAT_US 14.0
/* A rail-optimized scalable unit: 32 nodes whose same-rail traffic is one leaf hop away; beyond
 * it traffic crosses the spine (ref 2.2, DGX SuperPOD SU row [V]). */
#define GS__RAIL_SU_NODES 32
/* Relative slack when asking how many channels of a speed fit in a link (240 / 40 = 6 must not
 * come out as 5.999...). */
#define GS__FIT_SLACK 1e-9

void gs_topo_init(gs_topo *t, const gs_cluster *c)
{
    uint32_t cc = c->gpu.compute_capability;
    memset(t, 0, sizeof *t);
    t->cluster = *c;
    t->intra_hop = c->intra.kind == GS_LINK_NVLINK ? GS_HOP_NVLINK : GS_HOP_PCI;
    t->intra_bw = c->intra.nccl_bw; /* NVLink: links x NCCL's per-link bw (ref 3.4); PCIe: ref 2.4 */
    t->nic_bw = c->nic.bw;
    t->nic_line_bw = c->nic.gbps * 1e9 / 8.0; /* NCCL: bw = Mbps / 8000 GB/s (ref 2.3) */
    t->gpus_per_node = c->gpus_per_node;
    t->nics_per_node = c->nics_per_node;
    /* ref 3.1: the compute-capability rows Volta (< 80), Ampere (80-89), Hopper (90-99),
     * Blackwell (>= 100). */
    t->cc_index = cc < 80 ? 0 : cc < 90 ? 1 : cc < 100 ? 2 : 3;
    /* NVLS needs NVSwitch with SHARP and sm90+ (ref 3.2: nvlsEfficiency 0 before Hopper). */
    t->nvls = c->intra.kind == GS_LINK_NVLINK && c->intra.nvswitch && c->intra.nvls && cc >= 90;
    t->net_overhead_s = GS__NET_OVERHEAD_INTEL_S;
}

/* Most members of the group on one node: members are first + i * stride, ascending, so the
 * members of a node form one run. O(group size), no storage. */
static uint64_t group_max_per_node(const gs_mesh *m, gs_dim d, uint64_t rank)
{
    uint64_t g = gs_mesh_group(m, d, rank, NULL);
    uint64_t first = gs_mesh_group_first(m, d, g), stride = m->stride[d], n = m->size[d];
    uint64_t best = 0, run = 0, node = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nd = (first + i * stride) / m->gpus_per_node;
        run = nd == node ? run + 1 : 1;
        node = nd;
        if (run > best)
            best = run;
    }
    return best;
}

double gs__nic_share(const gs_topo *t, const gs_coll_shape *s)
{
    uint64_t nics = t->nics_per_node ? t->nics_per_node : 1;
    double k = (double)(s->siblings ? s->siblings : 1) * (double)gs__nics_near(t, s->ppn) / (double)nics;
    return k > 1.0 ? 1.0 / k : 1.0;
}

/* Groups of a kind with members on one node: the node's GPUs over the group's members there. */
static uint64_t siblings_of(const gs_mesh *mesh, uint64_t ppn)
{
    uint64_t gpn = mesh->gpus_per_node < mesh->world ? mesh->gpus_per_node : mesh->world;
    return ppn && gpn > ppn ? gpn / ppn : 1;
}

/* A group of n members in arithmetic progression, first + i * stride (CP, EP and EDP groups:
 * gs_mesh_cp_first, gs_mesh_ep_group, gs_mesh_edp_group): the nodes they span and the most on one
 * node, walked member by member (O(n): tens for CP and EP, the DP degree / ep for EDP). */
static void progression_shape(const gs_mesh *mesh, uint64_t first, uint64_t stride, uint64_t n, gs_coll_shape *out)
{
    uint64_t nodes = 0, best = 0, run = 0, node = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nd = (first + i * stride) / mesh->gpus_per_node;
        run = nd == node ? run + 1 : 1;
        nodes += nd != node;
        node = nd;
        if (run > best)
            best = run;
    }
    out->nranks = n;
    out->nnodes = nodes;
    out->ppn = best;
    out->siblings = nodes > 1 ? siblings_of(mesh, best) : 1;
}

static void cp_shape(const gs_mesh *mesh, uint64_t rank, gs_coll_shape *out)
{
    uint64_t stride, n = mesh->cp ? mesh->cp : 1;
    uint64_t first = gs_mesh_cp_first(mesh, rank, &stride); /* members are first + i * stride */
    progression_shape(mesh, first, stride, n, out);
}

/* A pipeline stage's ranks (GS_GROUP_STAGE): blocks of stride[PP] consecutive ranks, one every
 * stride[PP] x pp ranks (engine/schedule_groups.c), walked block by block and node by node within
 * a block: O(nodes + blocks), no storage. */
static void stage_shape(const gs_mesh *mesh, uint64_t rank, gs_coll_shape *out)
{
    uint64_t s = mesh->stride[GS_DIM_PP], P = mesh->size[GS_DIM_PP], gpn = mesh->gpus_per_node;
    uint64_t c = (rank / s) % P, nodes = 0, best = 0, run = 0, node = UINT64_MAX;
    for (uint64_t a = c * s; a < mesh->world; a += s * P) {
        uint64_t last = a + s - 1;
        for (uint64_t nd = a / gpn; nd <= last / gpn; nd++) {
            uint64_t lo = nd * gpn > a ? nd * gpn : a, hi = (nd + 1) * gpn - 1 < last ? (nd + 1) * gpn - 1 : last;
            run = nd == node ? run + (hi - lo + 1) : hi - lo + 1;
            nodes += nd != node;
            node = nd;
            if (run > best)
                best = run;
        }
    }
    out->nranks = mesh->world / P;
    out->nnodes = nodes;
    out->ppn = best;
    out->siblings = nodes > 1 ? siblings_of(mesh, best) : 1;
}

void gs_topo_group_shape(const gs_mesh *mesh, gs_group_kind g, uint64_t rank, gs_coll_shape *out)
{
    uint64_t size = 0;
    gs_dim d;
    out->siblings = 1;
    out->net_share = 0.0;
    switch (g) {
    case GS_GROUP_DP_INTRA:
        /* HSDP's shard group: the DP members on the rank's node (schedule.h), one node. */
        gs_group_of(mesh, g, rank, &size);
        out->nranks = size;
        out->nnodes = 1;
        out->ppn = size;
        return;
    case GS_GROUP_DP_INTER:
        /* HSDP's replica group: one member per node part at the rank's position, so every
         * member sits on its own node (schedule.h, dp_sub_members). */
        gs_group_of(mesh, g, rank, &size);
        out->nranks = size;
        out->nnodes = size;
        out->ppn = 1;
        out->siblings = siblings_of(mesh, 1);
        return;
    case GS_GROUP_CP:
        cp_shape(mesh, rank, out);
        return;
    case GS_GROUP_STAGE:
        stage_shape(mesh, rank, out);
        return;
    case GS_GROUP_EP:
    case GS_GROUP_EDP:
    case GS_GROUP_ETP:
    case GS_GROUP_TPEP:
    case GS_GROUP_CP_A2A:
    case GS_GROUP_CP_P2P: {
        uint64_t first, stride, n;
        if (g == GS_GROUP_EP)
            gs_mesh_ep_group(mesh, rank, &first, &stride);
        else if (g == GS_GROUP_EDP)
            gs_mesh_edp_group(mesh, rank, &first, &stride);
        else if (g == GS_GROUP_ETP)
            gs_mesh_etp_group(mesh, rank, &first, &stride);
        else if (g == GS_GROUP_CP_A2A)
            gs_mesh_cp_a2a_group(mesh, rank, &first, &stride);
        else if (g == GS_GROUP_CP_P2P)
            gs_mesh_cp_p2p_group(mesh, rank, &first, &stride);
        else
            gs_mesh_tpep_group(mesh, rank, &first, &stride);
        gs_group_of(mesh, g, rank, &n);
        progression_shape(mesh, first, stride, n, out);
        return;
    }
    case GS_GROUP_TP: d = GS_DIM_TP; break;
    case GS_GROUP_PP: d = GS_DIM_PP; break;
    case GS_GROUP_DP:
    default: d = GS_DIM_DP; break;
    }
    out->nranks = mesh->size[d];
    out->nnodes = gs_mesh_group_nodes(mesh, d, rank);
    out->ppn = group_max_per_node(mesh, d, rank);
    if (out->ppn < gs_mesh_group_local_size(mesh, d, rank))
        out->ppn = gs_mesh_group_local_size(mesh, d, rank);
    out->siblings = out->nnodes > 1 ? siblings_of(mesh, out->ppn) : 1;
}

/* ------------------------------------------------------------ NIC and latency helpers ---- */

uint64_t gs__nics_near(const gs_topo *t, uint64_t ppn)
{
    uint64_t nics = t->nics_per_node ? t->nics_per_node : 1;
    uint64_t gpn = t->gpus_per_node ? t->gpus_per_node : 1;
    uint64_t near;
    if (ppn > gpn)
        ppn = gpn;
    near = (ppn * nics + gpn - 1) / gpn;
    if (near < 1)
        near = 1;
    return near > nics ? nics : near;
}

double gs__nic_gbs(const gs_topo *t, uint64_t nnodes)
{
    double bw = t->nic_bw / 1e9;
    double over = t->cluster.oversubscription;
    /* Rail-optimized: same-rail traffic stays on its leaf within a scalable unit. Otherwise
     * (or beyond an SU) assume the worst case, every flow through the spine. */
    int leaves_leaf = t->cluster.rail_optimized ? nnodes > GS__RAIL_SU_NODES : nnodes > 1;
    if (leaves_leaf && over > 1.0)
        bw /= over;
    return bw;
}

double gs__inter_extra_us(const gs_topo *t)
{
    double extra = t->cluster.nic.latency_s * 1e6 - GS__NCCL_NET_SIMPLE_LAT_US;
    return extra > 0.0 ? extra : 0.0;
}

/* ----------------------------------------------------------------- the graph search ------ */

/* Per-channel speed ladders NCCL tries, highest first (ref 3.4; NCCL src/graph/search.cc
 * speedArrayIntra/Inter, sm90 and sm100 variants). Intra ladders are used when the
 * communicator has no network, inter ladders otherwise. */
static const double ladder_intra_pre90[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
static const double ladder_inter_pre90[] = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9,
                                            7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
static const double ladder_intra_sm90[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
static const double ladder_inter_sm90[] = {48, 45, 42, 40, 30, 24, 22, 20, 17.5,
                                           15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
static const double ladder_intra_sm100[] = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
static const double ladder_inter_sm100[] = {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22,
                                            20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};

#define GS__LEN(a) (sizeof(a) / sizeof((a)[0]))

typedef struct ladder {
    const double *speed;
    int n;
} ladder;

static ladder ladder_for(const gs_topo *t, int inter)
{
    ladder l;
    uint32_t cc = t->cluster.gpu.compute_capability;
    if (cc >= 100) {
        l.speed = inter ? ladder_inter_sm100 : ladder_intra_sm100;
        l.n = inter ? (int)GS__LEN(ladder_inter_sm100) : (int)GS__LEN(ladder_intra_sm100);
    } else if (cc >= 90) {
        l.speed = inter ? ladder_inter_sm90 : ladder_intra_sm90;
        l.n = inter ? (int)GS__LEN(ladder_inter_sm90) : (int)GS__LEN(ladder_intra_sm90);
    } else {
        l.speed = inter ? ladder_inter_pre90 : ladder_intra_pre90;
        l.n = inter ? (int)GS__LEN(ladder_inter_pre90) : (int)GS__LEN(ladder_intra_pre90);
    }
    return l;
}

/* The links one channel of a group loads on one node, GB/s. */
typedef struct fit_links {
    double intra;   /* a local GPU's NVLink/PCIe per direction; 0 when no local hop (ppn 1) */
    double nic;     /* one NIC's NCCL model bandwidth (line rate); 0 on one node */
    uint64_t nics;  /* NICs the group reaches */
} fit_links;

/* How many times `need` GB/s fits in `have` GB/s. */
static long fits(double have, double need)
{
    return (long)floor(have / need * (1.0 + GS__FIT_SLACK));
}

/* Ring channels that fit at per-channel speed s: each channel crosses every local GPU's links
 * once per direction and, across nodes, one NIC per direction (full duplex). */
static long ring_channels_at(const fit_links *f, double s)
{
    long n = GS__MAX_CHANNELS;
    if (f->intra > 0.0 && fits(f->intra, s) < n)
        n = fits(f->intra, s);
    if (f->nic > 0.0 && (long)f->nics * fits(f->nic, s) < n)
        n = (long)f->nics * fits(f->nic, s);
    return n;
}

static void fit_links_of(const gs_topo *t, const gs_coll_shape *s, fit_links *f)
{
    f->intra = s->ppn > 1 ? t->intra_bw / 1e9 : 0.0;
    /* a switchless mesh: the group's GPUs reach each other over their share of the links */
    if (t->cluster.intra.mesh > 1 && s->ppn > 1 && s->ppn < (uint64_t)t->cluster.intra.mesh)
        f->intra *= (double)(s->ppn - 1) / (double)(t->cluster.intra.mesh - 1);
    f->nic = s->nnodes > 1 ? t->nic_line_bw / 1e9 : 0.0;
    f->nics = gs__nics_near(t, s->ppn);
}

void gs__graph_ring(const gs_topo *t, const gs_coll_shape *s, gs__graph *g)
{
    fit_links f;
    int inter = s->nnodes > 1;
    ladder l = ladder_for(t, inter);
    /* ncclTopoSearchInit: maxBw = the best single path (GPU-GPU on one node, GPU-NIC across
     * nodes); totalBw = a GPU's total NVLink (or PCIe) bandwidth. */
    double total = t->intra_bw / 1e9;
    double max_bw;
    long best_n = 0;
    double best_s = 0.0;
    int i;

    fit_links_of(t, s, &f);
    max_bw = inter ? f.nic : total;
    if (inter && f.intra > 0.0 && f.intra < max_bw)
        max_bw = f.intra;
    for (i = 0; i < l.n - 1 && l.speed[i] > max_bw; i++)
        ;
    /* Pass 1: from the highest speed down, keep the graph with the most channels x speed; stop
     * once it covers totalBw or the next speed is under half the best's (the .49 rule). */
    for (; i < l.n; i++) {
        double sp = l.speed[i];
        long n;
        if (best_n > 0 && sp / best_s <= 0.49)
            break;
        n = ring_channels_at(&f, sp);
        if (n >= 1 && (double)n * sp > (double)best_n * best_s) {
            best_n = n;
            best_s = sp;
        }
        if ((double)best_n * best_s >= total)
            break;
    }
    if (best_n == 0) {
        /* Nothing on the ladder fits (a link slower than its last rung): one channel at what
         * the slowest link carries (NCCL falls back to a "simple order" graph). */
        double cap = max_bw;
        if (f.intra > 0.0 && f.intra < cap)
            cap = f.intra;
        g->nch = 1;
        g->bw_intra = g->bw_inter = cap;
        return;
    }
    /* ncclTopoDupChannels: fast channels are split in two for more SMs, same total. */
    if (best_s >= 25.0 &&
        !(t->cluster.gpu.compute_capability > 80 && best_s < 50.0 && best_n > 4)) {
        long dup = 2 * best_n < GS__MAX_CHANNELS ? 2 * best_n : GS__MAX_CHANNELS;
        best_s /= (double)((dup + best_n - 1) / best_n);
        best_n = dup;
    }
    /* Pass 2: raise the speed while the same channel count still fits. */
    for (i = l.n - 1; i > 0 && l.speed[i] <= best_s; i--)
        ;
    for (; i >= 0 && l.speed[i] > best_s; i--) {
        if (ring_channels_at(&f, l.speed[i]) < best_n)
            break;
        best_s = l.speed[i];
    }
    g->nch = (int)best_n;
    g->bw_intra = g->bw_inter = best_s;
}

void gs__graph_tree(const gs_topo *t, const gs_coll_shape *s, gs__graph *g)
{
    ladder l = ladder_for(t, s->nnodes > 1);
    double intra = s->ppn > 1 ? t->intra_bw / 1e9 : 0.0;
    gs__graph_ring(t, s, g);
    /* search.cc pass 2 for trees: raise bwIntra while below 2 x bwInter and the chain inside
     * the node still carries every channel at the new speed. */
    for (int i = l.n - 1; i >= 0; i--) {
        double sp = l.speed[i];
        if (sp <= g->bw_intra)
            continue;
        if (g->bw_intra >= 2.0 * g->bw_inter)
            break;
        if (intra > 0.0 && (double)g->nch * sp > intra * (1.0 + GS__FIT_SLACK))
            break;
        g->bw_intra = sp;
    }
}

void gs__graph_nvls(const gs_topo *t, const gs_coll_shape *s, gs__graph *g)
{
    int inter = s->nnodes > 1;
    ladder l = ladder_for(t, inter);
    double intra = t->intra_bw / 1e9;
    double nic = t->nic_line_bw / 1e9;
    uint64_t nics = gs__nics_near(t, s->ppn);
    long heads = (long)(s->ppn < GS__MAX_NVLS_ARITY ? s->ppn : GS__MAX_NVLS_ARITY);
    int i;

    g->nch = 0;
    g->bw_intra = g->bw_inter = 0.0;
    if (!t->nvls || s->ppn < 2)
        return;
    /* ncclTopoSearchTryNvls: channel h loads its head GPU's NVSwitch links 2 x the speed and
     * every other GPU's 1 x; with one channel per GPU each GPU carries (ppn + 1) x speed. Across
     * nodes every head also sends through a NIC. */
    for (i = 0; i < l.n; i++) {
        double sp = l.speed[i];
        if ((double)(s->ppn + 1) * sp > intra * (1.0 + GS__FIT_SLACK))
            continue;
        if (inter && (long)nics * fits(nic, sp) < heads)
            continue;
        break;
    }
    if (i == l.n)
        return;
    g->nch = (int)heads;
    g->bw_intra = g->bw_inter = l.speed[i];
    /* search.cc pass 2 for NVLS: raise bwInter while below 2 x bwIntra (and the NICs carry it). */
    for (i = i - 1; i >= 0; i--) {
        double sp = l.speed[i];
        if (g->bw_inter >= 2.0 * g->bw_intra)
            break;
        if (inter && (long)nics * fits(nic, sp) < heads)
            break;
        g->bw_inter = sp;
    }
}
