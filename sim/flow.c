/* Flow mode's network model: the max-min fair solver over shared links (gs_flow_net) and the
 * cluster's links as flows see them (gs_flow_model).
 *
 * The links, per direction, bytes/s:
 *   - NIC k of node n, egress and ingress: the NIC's achievable rate (nic.bw). A GPU sends
 *     through its rail NICs when the cluster is rail-optimized (GPU g of G on a node with K NICs:
 *     NICs floor(gK/G) .. max(that, ceil((g+1)K/G) - 1)), through all the node's NICs otherwise.
 *   - GPU g's intra-node fabric egress (NVLink through NVSwitch, or PCIe): the per-GPU rate NCCL
 *     assigns (intra.nccl_bw).
 *   - With oversubscription o > 1, per leaf group of 32 consecutive nodes (a DGX SuperPOD
 *     scalable unit, topology.c's GS__RAIL_SU_NODES; the same grouping is used for clusters that
 *     are not rail-optimized) one uplink and one downlink aggregate to the spine, each carrying
 *     (nodes in the group x NICs per node x nic.bw) / o.
 * What a transfer puts on them:
 *   - a send: its bytes on the sender's rail NIC egress and the receiver's rail NIC ingress (or
 *     the sender's intra-node egress on one node), and on the uplink of the sender's leaf group
 *     and the downlink of the receiver's when they differ;
 *   - a collective: on each node of a present member, net_bytes x NICs-near (the cost model's
 *     bytes per NIC, times the NICs it spreads over: the node's whole inter-node volume) spread
 *     evenly over the NICs the members on that node use, in both directions (rings and trees
 *     send and receive the same volume); the share of it bound for other leaf groups, taken as
 *     the fraction of the group's other nodes that sit outside the node's leaf group (traffic
 *     spread evenly over the peers, as ECMP does), on the uplink and downlink; and on each
 *     member's intra-node egress, when the group has several GPUs on a node, the busbw factor of
 *     the op over those ppn GPUs x size (all-to-all: the (ppn - 1) / n of the buffer for local
 *     peers), the bytes a ring of the node's GPUs moves.
 * In flow mode the time a transfer takes alone comes from the same cost models run with
 * oversubscription 1 (sim/des.c); the uplinks then slow traffic down only when it loads them, not
 * by the analytic mode's fixed worst-case division.
 *
 * The class path (gs_flow_class). There the schedule holds one representative per pipeline
 * stage, standing for every rank of its stage; those ranks run the same events at the same
 * times, each on its own groups (DP, TP, HSDP groups are images of the representative's under
 * the mesh's symmetry; every PP group is an image of every other). A link private to one GPU
 * (its intra-node egress) is the representative's alone, but a shared link also carries the
 * images' identical transfers, so the representative's flow loads it with `copies` x its own
 * bytes (gs_flow_add_bytes_shared: its own bytes still set its speed alone, so k copies that
 * each fill a link run at 1/k, as the k flows of the exact path do). Derivation, per link:
 *   - NIC k of node n, a collective of kind g (egress and ingress alike): on the exact path
 *     every group G of kind g with members on n puts node_net spread over the NICs its members
 *     on n use (U_G of them), so NIC k carries node_net x sum over G using k of 1 / |U_G|.
 *     The images are the groups met among n's ranks of the representative's stage; the
 *     representative's group G0 (all its members on n, from the mesh, not only the present
 *     ones) puts node_net / |U_G0| on k, hence
 *         copies(k) = |U_G0| x sum over image groups G on n with k in U_G of 1 / |U_G|,
 *     = the number of such groups when they all use the same NICs. One NIC for 8 GPUs and 8
 *     groups on the node (grid B, tp-pp-dp: the 8 TP ranks of a node in 8 DP groups): 8.
 *     A NIC per GPU with rails: each group's member leaves through its own rail NIC: 1.
 *   - NIC k, a send src -> dst (dst = src + delta): the ranks r of src's stage on src's node
 *     whose send to r + delta also leaves the node, each spreading its bytes over its own NICs:
 *         copies(k) = |NICs(src)| x sum over those r with k in NICs(r) of 1 / |NICs(r)|,
 *     and on dst's node the ranks of dst's stage receiving from r - delta across nodes.
 *   - A leaf group's uplink (and downlink): the exact path puts node_net x away on it once per
 *     (group, node of the group in the leaf); away is the share of the group's nodes outside
 *     the leaf, taken from the group's members on the mesh. copies = the number of (image
 *     group, node) pairs in the representative's leaf; for a send, the number of sends of the
 *     stage from the leaf to another leaf (into the leaf from another, for the downlink).
 * The images' transfers are assumed identical to the representative's (same bytes, same
 * shape), which the mesh's regularity gives; ranks of another stage are another class, whose
 * representative runs its own flows at its own times. The exact path passes no class. */
#include "sim/flow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/collective_internal.h"
#include "sim/flow_internal.h"

/* Nodes per leaf group behind one uplink (a SuperPOD scalable unit). */
#define GS__FLOW_LEAF_NODES 32

/* -------------------------------------------------------------- the cluster's links ------- */

/* One group of the collective's kind met among a node's ranks (class path). */
typedef struct node_group {
    uint64_t idx;  /* gs_group_of index */
    uint64_t mask; /* NICs its members on the node use (bit k; beyond 64 fold onto all) */
    int image;     /* runs the representative's collective: its members are of the
                      representative's stage (every PP group is one) */
} node_group;

struct gs_flow_model {
    gs_flow_net *net;
    gs_topo topo;
    uint64_t nodes, gpn, nics, leaf_nodes, nleaves;
    int rail, uplinks;
    uint32_t nic_in_base, gpu_base, up_base, down_base;
    /* scratch for one collective: per node the NICs its members use, per leaf its nodes */
    uint32_t *node_mark, *leaf_mark, mark;
    uint64_t *node_nics; /* bit k: NIC k used (NICs beyond 64 fold onto all) */
    uint32_t *leaf_count;
    uint64_t *node_rep;  /* per node: its first present member */
    uint64_t *nodes_seen;
    size_t nseen_cap;
    /* class path scratch */
    node_group *groups; /* gpn entries */
    uint64_t *members;
    size_t members_cap;
};

gs_status gs_flow_model_create(const gs_topo *t, uint64_t nodes, gs_flow_model **out)
{
    gs_flow_model *m = calloc(1, sizeof *m);
    double *cap = NULL;
    gs_status rc = GS_OK;
    *out = NULL;
    if (!m)
        return GS_ERR_NOMEM;
    m->topo = *t;
    m->nodes = nodes ? nodes : 1;
    m->gpn = t->gpus_per_node ? t->gpus_per_node : 1;
    m->nics = t->nics_per_node ? t->nics_per_node : 1;
    m->rail = t->cluster.rail_optimized;
    m->leaf_nodes = GS__FLOW_LEAF_NODES;
    m->nleaves = (m->nodes + m->leaf_nodes - 1) / m->leaf_nodes;
    m->uplinks = t->cluster.oversubscription > 1.0 && m->nleaves > 1;
    uint64_t nl = 2 * m->nodes * m->nics + m->nodes * m->gpn + (m->uplinks ? 2 * m->nleaves : 0);
    if (nl >= UINT32_MAX) {
        free(m);
        return GS_ERR_OVERFLOW;
    }
    m->nic_in_base = (uint32_t)(m->nodes * m->nics);
    m->gpu_base = (uint32_t)(2 * m->nodes * m->nics);
    m->up_base = (uint32_t)(m->gpu_base + m->nodes * m->gpn);
    m->down_base = (uint32_t)(m->up_base + (m->uplinks ? m->nleaves : 0));
    cap = malloc(nl * sizeof *cap);
    m->node_mark = calloc(m->nodes, sizeof *m->node_mark);
    m->node_nics = calloc(m->nodes, sizeof *m->node_nics);
    m->leaf_mark = calloc(m->nleaves, sizeof *m->leaf_mark);
    m->leaf_count = calloc(m->nleaves, sizeof *m->leaf_count);
    m->node_rep = calloc(m->nodes, sizeof *m->node_rep);
    m->groups = calloc(m->gpn, sizeof *m->groups);
    if (!cap || !m->node_mark || !m->node_nics || !m->leaf_mark || !m->leaf_count || !m->node_rep || !m->groups) {
        rc = GS_ERR_NOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < 2 * m->nodes * m->nics; i++)
        cap[i] = t->nic_bw;
    for (uint64_t i = 0; i < m->nodes * m->gpn; i++)
        cap[m->gpu_base + i] = t->intra_bw;
    if (m->uplinks)
        for (uint64_t lf = 0; lf < m->nleaves; lf++) {
            uint64_t in_leaf = lf + 1 < m->nleaves ? m->leaf_nodes : m->nodes - lf * m->leaf_nodes;
            double c = (double)in_leaf * (double)m->nics * t->nic_bw / t->cluster.oversubscription;
            cap[m->up_base + lf] = c;
            cap[m->down_base + lf] = c;
        }
    rc = gs_flow_net_create((size_t)nl, cap, &m->net);
out:
    free(cap);
    if (rc != GS_OK)
        gs_flow_model_destroy(m);
    else
        *out = m;
    return rc;
}

void gs_flow_model_destroy(gs_flow_model *m)
{
    if (!m)
        return;
    gs_flow_net_destroy(m->net);
    free(m->node_mark);
    free(m->node_nics);
    free(m->leaf_mark);
    free(m->leaf_count);
    free(m->nodes_seen);
    free(m->node_rep);
    free(m->groups);
    free(m->members);
    free(m);
}

gs_flow_net *gs_flow_model_net(gs_flow_model *m) { return m->net; }

uint64_t gs_flow_model_leaf_nodes(const gs_flow_model *m) { return m->leaf_nodes; }

/* The NICs rank's GPU sends through: [*first, *last]. */
static void rank_nics(const gs_flow_model *m, uint64_t rank, uint64_t *first, uint64_t *last)
{
    uint64_t g = rank % m->gpn;
    if (!m->rail) {
        *first = 0;
        *last = m->nics - 1;
        return;
    }
    *first = g * m->nics / m->gpn;
    *last = ((g + 1) * m->nics + m->gpn - 1) / m->gpn - 1;
    if (*last < *first)
        *last = *first;
    if (*last >= m->nics)
        *last = m->nics - 1;
}

static uint64_t rank_node(const gs_flow_model *m, uint64_t rank)
{
    uint64_t n = rank / m->gpn;
    return n < m->nodes ? n : m->nodes - 1;
}

/* ------------------------------------------------ the class path's symmetry ------------- */

static int popcount64(uint64_t x)
{
    int c = 0;
    while (x) {
        x &= x - 1;
        c++;
    }
    return c;
}

static uint64_t rank_stage(const gs_mesh *mesh, uint64_t rank)
{
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, rank, c);
    return c[GS_DIM_PP];
}

/* Class path, a send from src to dst on other nodes: the weight w of NIC k of the node of
 * `self` (src for egress, dst for ingress), k in self's NICs, such that the class's copies of
 * the send put w x bytes on it, counting self: sum over the ranks r of self's stage on that
 * node whose own send (peer r + delta for egress, r - delta for ingress) also leaves the node
 * and whose NICs hold k, of 1 / (their NIC count). With one NIC per GPU and rails, only self:
 * 1 / 1. */
static double class_p2p_nic_weight(const gs_flow_model *m, const gs_mesh *mesh, uint64_t self, int64_t delta,
                                   uint64_t k)
{
    uint64_t nd = rank_node(m, self), stage = rank_stage(mesh, self), a, b;
    double w = 0.0;
    for (uint64_t r = nd * m->gpn; r < (nd + 1) * m->gpn && r < mesh->world; r++) {
        int64_t peer = (int64_t)r + delta;
        if (peer < 0 || (uint64_t)peer >= mesh->world || rank_node(m, (uint64_t)peer) == nd ||
            rank_stage(mesh, r) != stage)
            continue;
        rank_nics(m, r, &a, &b);
        if (k >= a && k <= b)
            w += 1.0 / (double)(b - a + 1);
    }
    return w;
}

/* Class path: how many copies of a send cross the link between self's leaf group and the
 * spine: the ranks r of self's stage in that leaf whose peer r + delta sits in another leaf.
 * Uplink: self = the sender, delta = dst - src; downlink: self = the receiver, -delta. */
static double class_p2p_leaf_copies(const gs_flow_model *m, const gs_mesh *mesh, uint64_t self, int64_t delta)
{
    uint64_t lf = rank_node(m, self) / m->leaf_nodes, stage = rank_stage(mesh, self);
    uint64_t first = lf * m->leaf_nodes * m->gpn, last = (lf + 1) * m->leaf_nodes * m->gpn;
    double copies = 0.0;
    for (uint64_t r = first; r < last && r < mesh->world; r++) {
        int64_t peer = (int64_t)r + delta;
        if (peer < 0 || (uint64_t)peer >= mesh->world || rank_node(m, (uint64_t)peer) / m->leaf_nodes == lf ||
            rank_stage(mesh, r) != stage)
            continue;
        copies += 1.0;
    }
    return copies > 1.0 ? copies : 1.0;
}

gs_status gs_flow_model_p2p(gs_flow_model *m, double now_s, uint64_t src_rank, uint64_t dst_rank, uint64_t bytes,
                            double work_s, const gs_flow_class *cls, uint32_t *id)
{
    gs_flow_net *n = m->net;
    uint64_t sn = rank_node(m, src_rank), dn = rank_node(m, dst_rank), a, b;
    int64_t delta = (int64_t)dst_rank - (int64_t)src_rank;
    double v = (double)bytes, copies = 1.0;
    gs_status rc = GS_OK;
    gs_flow_begin(n);
    if (sn == dn) {
        /* a GPU's own link: no other rank of the class sends on it */
        rc = gs_flow_add_bytes(n, (uint32_t)(m->gpu_base + sn * m->gpn + src_rank % m->gpn), v);
    } else {
        rank_nics(m, src_rank, &a, &b);
        for (uint64_t k = a; k <= b && rc == GS_OK; k++) {
            if (cls)
                copies = class_p2p_nic_weight(m, cls->mesh, src_rank, delta, k) * (double)(b - a + 1);
            rc = gs_flow_add_bytes_shared(n, (uint32_t)(sn * m->nics + k), v / (double)(b - a + 1),
                                          copies > 1.0 ? copies : 1.0);
        }
        rank_nics(m, dst_rank, &a, &b);
        for (uint64_t k = a; k <= b && rc == GS_OK; k++) {
            if (cls)
                copies = class_p2p_nic_weight(m, cls->mesh, dst_rank, -delta, k) * (double)(b - a + 1);
            rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->nic_in_base + dn * m->nics + k), v / (double)(b - a + 1),
                                          copies > 1.0 ? copies : 1.0);
        }
        if (rc == GS_OK && m->uplinks && sn / m->leaf_nodes != dn / m->leaf_nodes) {
            rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->up_base + sn / m->leaf_nodes), v,
                                          cls ? class_p2p_leaf_copies(m, cls->mesh, src_rank, delta) : 1.0);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->down_base + dn / m->leaf_nodes), v,
                                              cls ? class_p2p_leaf_copies(m, cls->mesh, dst_rank, -delta) : 1.0);
        }
    }
    if (rc != GS_OK)
        return rc;
    return gs_flow_start(n, now_s, work_s, id);
}

static uint64_t nic_mask(const gs_flow_model *m, uint64_t rank)
{
    uint64_t a, b, mask = 0;
    rank_nics(m, rank, &a, &b);
    for (uint64_t k = a; k <= b; k++)
        mask |= k < 64 ? UINT64_C(1) << k : ~UINT64_C(0);
    return mask;
}

static double mask_count(const gs_flow_model *m, uint64_t mask)
{
    int c = popcount64(mask);
    return m->nics < 64 ? (double)(c ? c : 1) : (double)m->nics;
}

/* The groups of cls->kind met on node nd (into m->groups, at most gpn); returns the count. */
static size_t node_groups(gs_flow_model *m, const gs_flow_class *cls, uint64_t nd, uint64_t stage)
{
    size_t ng = 0;
    for (uint64_t r = nd * m->gpn; r < (nd + 1) * m->gpn && r < cls->mesh->world; r++) {
        uint64_t gi = gs_group_of(cls->mesh, cls->kind, r, NULL);
        size_t j = 0;
        while (j < ng && m->groups[j].idx != gi)
            j++;
        if (j == ng)
            m->groups[ng++] = (node_group){gi, 0, 0};
        m->groups[j].mask |= nic_mask(m, r);
        if (cls->kind == GS_GROUP_PP || rank_stage(cls->mesh, r) == stage)
            m->groups[j].image = 1;
    }
    return ng;
}

/* Class path: the share of the group's traffic from node nd that leaves nd's leaf group,
 * taken from the whole group on the mesh (its present members are only the representatives). */
static gs_status class_away(gs_flow_model *m, const gs_flow_class *cls, uint64_t rep, uint64_t nd, double *away)
{
    uint64_t size = 0, lf = nd / m->leaf_nodes, nn = 0, in_leaf = 0, last = UINT64_MAX;
    gs_group_of(cls->mesh, cls->kind, rep, &size);
    if (gs__flow_grow((void **)&m->members, &m->members_cap, size ? size : 1, sizeof *m->members) != 0)
        return GS_ERR_NOMEM;
    size = gs_group_members_of(cls->mesh, cls->kind, rep, m->members);
    for (uint64_t i = 0; i < size; i++) { /* ascending ranks: a node's members are one run */
        uint64_t n2 = rank_node(m, m->members[i]);
        if (n2 == last)
            continue;
        last = n2;
        nn++;
        in_leaf += n2 / m->leaf_nodes == lf;
    }
    *away = nn > 1 ? (double)(nn - in_leaf) / (double)(nn - 1) : 0.0;
    return GS_OK;
}

/* Class path: how many (node, group) pairs of the class's copies of the collective lie in
 * nd's leaf group, each sending its node's share through the leaf's uplink. */
static double class_leaf_copies(gs_flow_model *m, const gs_flow_class *cls, uint64_t nd, uint64_t stage)
{
    uint64_t lf = nd / m->leaf_nodes, end = (lf + 1) * m->leaf_nodes;
    double copies = 0.0;
    for (uint64_t n2 = lf * m->leaf_nodes; n2 < end && n2 < m->nodes; n2++) {
        size_t ng = node_groups(m, cls, n2, stage);
        for (size_t j = 0; j < ng; j++)
            copies += m->groups[j].image;
    }
    return copies > 1.0 ? copies : 1.0;
}

gs_status gs_flow_model_coll(gs_flow_model *m, double now_s, gs_coll_op op, const gs_coll_shape *shape,
                             uint64_t bytes, const gs_coll_cost *cost, const uint64_t *ranks, size_t nranks,
                             double work_s, const gs_flow_class *cls, uint32_t *id)
{
    gs_flow_net *n = m->net;
    double size = (double)bytes, node_net = 0.0, intra = 0.0;
    size_t nseen = 0;
    gs_status rc = GS_OK;
    uint32_t mk = ++m->mark;
    if (mk == 0) {
        memset(m->node_mark, 0, m->nodes * sizeof *m->node_mark);
        memset(m->leaf_mark, 0, m->nleaves * sizeof *m->leaf_mark);
        mk = m->mark = 1;
    }
    if (shape->nnodes > 1)
        node_net = cost->net_bytes * (double)gs__nics_near(&m->topo, shape->ppn);
    if (shape->ppn > 1)
        intra = op == GS_COLL_ALLTOALL ? size * (double)(shape->ppn - 1) /
                                             (double)(shape->net_share > 0.0 ? shape->ppn : shape->nranks)
                                       : size * gs_busbw_factor(op, shape->ppn);
    /* the nodes of the present members and the NICs they use there */
    for (size_t i = 0; i < nranks; i++) {
        uint64_t nd = rank_node(m, ranks[i]), lf = nd / m->leaf_nodes;
        if (m->node_mark[nd] != mk) {
            m->node_mark[nd] = mk;
            m->node_nics[nd] = 0;
            m->node_rep[nd] = ranks[i];
            if (gs__flow_grow((void **)&m->nodes_seen, &m->nseen_cap, nseen + 1, sizeof *m->nodes_seen) != 0)
                return GS_ERR_NOMEM;
            m->nodes_seen[nseen++] = nd;
            if (m->leaf_mark[lf] != mk) {
                m->leaf_mark[lf] = mk;
                m->leaf_count[lf] = 0;
            }
            m->leaf_count[lf]++;
        }
        m->node_nics[nd] |= nic_mask(m, ranks[i]);
    }
    gs_flow_begin(n);
    /* a member's own GPU link: no other rank of the class uses it */
    for (size_t i = 0; i < nranks && rc == GS_OK && intra > 0.0; i++)
        rc = gs_flow_add_bytes(n, (uint32_t)(m->gpu_base + rank_node(m, ranks[i]) * m->gpn + ranks[i] % m->gpn), intra);
    for (size_t j = 0; j < nseen && rc == GS_OK && node_net > 0.0; j++) {
        uint64_t nd = m->nodes_seen[j], mask = m->node_nics[nd], lf = nd / m->leaf_nodes, rep = m->node_rep[nd];
        uint64_t stage = cls ? rank_stage(cls->mesh, rep) : 0;
        size_t ng = 0, own = 0;
        if (cls) {
            /* the representative's group on this node, all its members (the mesh's, not only
             * the present ones), and the class's other groups there */
            uint64_t g0 = gs_group_of(cls->mesh, cls->kind, rep, NULL);
            ng = node_groups(m, cls, nd, stage);
            while (own < ng && m->groups[own].idx != g0)
                own++;
            if (own < ng)
                mask = m->groups[own].mask;
        }
        double used = mask_count(m, mask), per = node_net / used;
        for (uint64_t k = 0; k < m->nics && rc == GS_OK; k++) {
            double copies = 1.0;
            if (k < 64 && !(mask >> k & 1))
                continue;
            if (cls && own < ng) {
                /* per NIC, the class's groups on the node that use it, each spreading the same
                 * node_net over its own NICs: used x sum of node_net / used_i, over node_net */
                double w = 0.0;
                for (size_t i = 0; i < ng; i++)
                    if (m->groups[i].image && (k >= 64 || (m->groups[i].mask >> k & 1)))
                        w += 1.0 / mask_count(m, m->groups[i].mask);
                copies = w * used > 1.0 ? w * used : 1.0;
            }
            rc = gs_flow_add_bytes_shared(n, (uint32_t)(nd * m->nics + k), per, copies);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->nic_in_base + nd * m->nics + k), per, copies);
        }
        if (rc != GS_OK || !m->uplinks)
            continue;
        double away = 0.0, copies = 1.0;
        if (cls) {
            if ((rc = class_away(m, cls, rep, nd, &away)) != GS_OK)
                break;
            copies = class_leaf_copies(m, cls, nd, stage);
        } else if (nseen > 1) {
            away = (double)(nseen - m->leaf_count[lf]) / (double)(nseen - 1);
        }
        if (away > 0.0) {
            rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->up_base + lf), node_net * away, copies);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes_shared(n, (uint32_t)(m->down_base + lf), node_net * away, copies);
        }
    }
    if (rc != GS_OK)
        return rc;
    return gs_flow_start(n, now_s, work_s, id);
}

double gs_flow_coll_latency(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, const gs_coll_cost *cost)
{
    double lat;
    switch (cost->algo) {
    case GS_ALGO_RING: lat = gs__ring_time(t, op, shape, 0.0, cost->proto, NULL); break;
    case GS_ALGO_TREE: lat = gs__tree_time(t, op, shape, 0.0, cost->proto, NULL); break;
    case GS_ALGO_NVLS: lat = gs__nvls_time(t, op, shape, 0.0, cost->proto, NULL); break;
    case GS_ALGO_PAT: lat = gs__pat_time(t, op, shape, 0.0, cost->proto, NULL); break;
    default: /* all-to-all as grouped p2p (tuner.c): one message of the slowest class */
        lat = shape->nnodes > 1 ? t->cluster.nic.latency_s : shape->ppn > 1 ? t->cluster.intra.latency_s : 0.0;
        break;
    }
    if (!isfinite(lat) || lat < 0.0)
        lat = 0.0;
    return lat < cost->time_s ? lat : cost->time_s;
}

double gs_flow_p2p_latency(const gs_topo *t, int same_node)
{
    return same_node ? t->cluster.intra.latency_s : t->cluster.nic.latency_s;
}
