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
 * by the analytic mode's fixed worst-case division. */
#include "sim/flow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/collective_internal.h"

/* A link counts as full once its residual capacity is under this fraction of its capacity. */
#define GS__FLOW_FULL_EPS 1e-9
/* Nodes per leaf group behind one uplink (a SuperPOD scalable unit). */
#define GS__FLOW_LEAF_NODES 32

/* ---------------------------------------------------------------------- the solver ------- */

typedef struct flow_slot {
    uint32_t *link;     /* links crossed */
    double *demand;     /* bytes/s on each at full speed */
    uint32_t n, cap;
    uint32_t version;
    int active;
    int frozen;         /* solver scratch */
    double work_left;   /* seconds at full speed still to run, as of `last` */
    double last;        /* when work_left was last brought up to date */
    double speed;       /* 0..1 */
    double new_speed;   /* solver scratch */
    double end;         /* projected end */
} flow_slot;

typedef struct link_slot {
    double cap;
    uint32_t *flows; /* active flows crossing the link, in start order */
    uint32_t n, cap_flows;
    uint32_t mark;
    double residual, load; /* solver scratch */
} link_slot;

struct gs_flow_net {
    link_slot *l;
    size_t nlinks;
    flow_slot *f;
    size_t nf, fcap;
    uint32_t *free_ids; /* slots free for reuse, used last-in first-out */
    size_t nfree, free_cap;
    uint32_t *fmark;    /* per slot: component mark */
    /* the flow being described */
    uint32_t *blink;
    double *bbytes;
    size_t bn, bcap;
    uint32_t *bpos; /* per link: index in blink + 1 while described, 0 otherwise */
    /* component scratch */
    uint32_t *clinks, *cflows;
    size_t cl_cap, cf_cap;
    uint32_t mark;
    gs_flow_change *chg;
    size_t nchg, chg_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

gs_status gs_flow_net_create(size_t nlinks, const double *capacity, gs_flow_net **out)
{
    gs_flow_net *n = calloc(1, sizeof *n);
    *out = NULL;
    if (!n)
        return GS_ERR_NOMEM;
    n->nlinks = nlinks;
    n->l = calloc(nlinks ? nlinks : 1, sizeof *n->l);
    n->bpos = calloc(nlinks ? nlinks : 1, sizeof *n->bpos);
    if (!n->l || !n->bpos) {
        gs_flow_net_destroy(n);
        return GS_ERR_NOMEM;
    }
    for (size_t i = 0; i < nlinks; i++) {
        if (!(capacity[i] > 0.0)) {
            gs_flow_net_destroy(n);
            return GS_ERR_INPUT;
        }
        n->l[i].cap = capacity[i];
    }
    *out = n;
    return GS_OK;
}

void gs_flow_net_destroy(gs_flow_net *n)
{
    if (!n)
        return;
    if (n->l)
        for (size_t i = 0; i < n->nlinks; i++)
            free(n->l[i].flows);
    for (size_t i = 0; i < n->nf; i++) {
        free(n->f[i].link);
        free(n->f[i].demand);
    }
    free(n->l);
    free(n->f);
    free(n->free_ids);
    free(n->fmark);
    free(n->blink);
    free(n->bbytes);
    free(n->bpos);
    free(n->clinks);
    free(n->cflows);
    free(n->chg);
    free(n);
}

void gs_flow_begin(gs_flow_net *n)
{
    for (size_t i = 0; i < n->bn; i++)
        n->bpos[n->blink[i]] = 0;
    n->bn = 0;
}

gs_status gs_flow_add_bytes(gs_flow_net *n, uint32_t link, double bytes)
{
    if (link >= n->nlinks)
        return GS_ERR_INPUT;
    if (!(bytes > 0.0))
        return GS_OK;
    if (n->bpos[link]) {
        n->bbytes[n->bpos[link] - 1] += bytes;
        return GS_OK;
    }
    size_t c1 = n->bcap, c2 = n->bcap;
    if (grow((void **)&n->blink, &c1, n->bn + 1, sizeof *n->blink) != 0 ||
        grow((void **)&n->bbytes, &c2, n->bn + 1, sizeof *n->bbytes) != 0)
        return GS_ERR_NOMEM;
    n->bcap = c1 < c2 ? c1 : c2;
    n->blink[n->bn] = link;
    n->bbytes[n->bn] = bytes;
    n->bpos[link] = (uint32_t)++n->bn;
    return GS_OK;
}

static int add_change(gs_flow_net *n, uint32_t id)
{
    if (grow((void **)&n->chg, &n->chg_cap, n->nchg + 1, sizeof *n->chg) != 0)
        return -1;
    n->chg[n->nchg++] = (gs_flow_change){id, n->f[id].version, n->f[id].end};
    return 0;
}

/* Collect the connected component of links and flows reachable from the given links. */
static int component(gs_flow_net *n, const uint32_t *seed, size_t nseed, size_t *ncl, size_t *ncf)
{
    size_t nl = 0, nfl = 0;
    uint32_t mk = ++n->mark;
    if (mk == 0) { /* wrapped: clear the marks */
        for (size_t i = 0; i < n->nlinks; i++)
            n->l[i].mark = 0;
        memset(n->fmark, 0, n->nf * sizeof *n->fmark);
        mk = n->mark = 1;
    }
    for (size_t i = 0; i < nseed; i++) {
        link_slot *ls = &n->l[seed[i]];
        if (ls->mark == mk)
            continue;
        ls->mark = mk;
        if (grow((void **)&n->clinks, &n->cl_cap, nl + 1, sizeof *n->clinks) != 0)
            return -1;
        n->clinks[nl++] = seed[i];
    }
    for (size_t q = 0; q < nl; q++) {
        link_slot *ls = &n->l[n->clinks[q]];
        for (uint32_t j = 0; j < ls->n; j++) {
            uint32_t fid = ls->flows[j];
            if (n->fmark[fid] == mk)
                continue;
            n->fmark[fid] = mk;
            if (grow((void **)&n->cflows, &n->cf_cap, nfl + 1, sizeof *n->cflows) != 0)
                return -1;
            n->cflows[nfl++] = fid;
            const flow_slot *fs = &n->f[fid];
            for (uint32_t k = 0; k < fs->n; k++) {
                link_slot *lk = &n->l[fs->link[k]];
                if (lk->mark == mk)
                    continue;
                lk->mark = mk;
                if (grow((void **)&n->clinks, &n->cl_cap, nl + 1, sizeof *n->clinks) != 0)
                    return -1;
                n->clinks[nl++] = fs->link[k];
            }
        }
    }
    *ncl = nl;
    *ncf = nfl;
    return 0;
}

/* Progressive filling over the component: raise the common speed of every unfrozen flow until a
 * link fills (its flows freeze at that speed) or the speed reaches 1. Then bring every flow whose
 * speed changed up to date at now and list it. `fresh` (or UINT32_MAX) is always listed. */
static int solve(gs_flow_net *n, size_t ncl, size_t ncf, double now, uint32_t fresh)
{
    double level = 0.0;
    size_t unfrozen = ncf;
    for (size_t i = 0; i < ncl; i++)
        n->l[n->clinks[i]].residual = n->l[n->clinks[i]].cap;
    for (size_t i = 0; i < ncf; i++) {
        flow_slot *fs = &n->f[n->cflows[i]];
        fs->frozen = 0;
        fs->new_speed = 1.0;
    }
    while (unfrozen > 0) {
        double delta = 1.0 - level;
        for (size_t i = 0; i < ncl; i++)
            n->l[n->clinks[i]].load = 0.0;
        for (size_t i = 0; i < ncf; i++) {
            const flow_slot *fs = &n->f[n->cflows[i]];
            if (fs->frozen)
                continue;
            for (uint32_t k = 0; k < fs->n; k++)
                n->l[fs->link[k]].load += fs->demand[k];
        }
        for (size_t i = 0; i < ncl; i++) {
            const link_slot *ls = &n->l[n->clinks[i]];
            if (ls->load > 0.0 && ls->residual / ls->load < delta)
                delta = ls->residual / ls->load;
        }
        if (delta < 0.0)
            delta = 0.0;
        level += delta;
        for (size_t i = 0; i < ncl; i++) {
            link_slot *ls = &n->l[n->clinks[i]];
            if (ls->load > 0.0)
                ls->residual -= delta * ls->load;
        }
        if (level >= 1.0 - GS__FLOW_FULL_EPS) {
            for (size_t i = 0; i < ncf; i++) {
                flow_slot *fs = &n->f[n->cflows[i]];
                if (!fs->frozen)
                    fs->new_speed = 1.0;
            }
            break;
        }
        for (size_t i = 0; i < ncf; i++) {
            flow_slot *fs = &n->f[n->cflows[i]];
            if (fs->frozen)
                continue;
            for (uint32_t k = 0; k < fs->n; k++) {
                const link_slot *ls = &n->l[fs->link[k]];
                if (ls->residual <= GS__FLOW_FULL_EPS * ls->cap) {
                    fs->frozen = 1;
                    fs->new_speed = level;
                    unfrozen--;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < ncf; i++) {
        uint32_t fid = n->cflows[i];
        flow_slot *fs = &n->f[fid];
        if (fid != fresh && fs->new_speed == fs->speed)
            continue;
        if (fid != fresh) {
            fs->work_left -= fs->speed * (now - fs->last);
            if (fs->work_left < 0.0)
                fs->work_left = 0.0;
        }
        fs->last = now;
        fs->speed = fs->new_speed > 0.0 ? fs->new_speed : GS__FLOW_FULL_EPS;
        fs->end = now + fs->work_left / fs->speed;
        fs->version++;
        if (add_change(n, fid) != 0)
            return -1;
    }
    return 0;
}

gs_status gs_flow_start(gs_flow_net *n, double now_s, double work_s, uint32_t *id)
{
    uint32_t fid;
    flow_slot *fs;
    double scale = 1.0;
    n->nchg = 0;
    if (!(work_s > 0.0))
        return GS_ERR_INPUT;
    if (n->nfree > 0) {
        fid = n->free_ids[--n->nfree];
    } else {
        size_t c1 = n->fcap, c2 = n->fcap;
        if (grow((void **)&n->f, &c1, n->nf + 1, sizeof *n->f) != 0 ||
            grow((void **)&n->fmark, &c2, n->nf + 1, sizeof *n->fmark) != 0)
            return GS_ERR_NOMEM;
        n->fcap = c1 < c2 ? c1 : c2;
        fid = (uint32_t)n->nf++;
        memset(&n->f[fid], 0, sizeof n->f[fid]);
        n->fmark[fid] = 0;
    }
    fs = &n->f[fid];
    if (fs->cap < n->bn) {
        uint32_t *l = realloc(fs->link, n->bn * sizeof *l);
        if (l)
            fs->link = l;
        double *d = realloc(fs->demand, n->bn * sizeof *d);
        if (d)
            fs->demand = d;
        if (!l || !d)
            return GS_ERR_NOMEM; /* the slot stays inactive; the run stops */
        fs->cap = (uint32_t)n->bn;
    }
    fs->n = (uint32_t)n->bn;
    for (size_t i = 0; i < n->bn; i++) {
        double d = n->bbytes[i] / work_s, c = n->l[n->blink[i]].cap;
        fs->link[i] = n->blink[i];
        fs->demand[i] = d;
        if (d * scale > c)
            scale = c / d;
    }
    for (uint32_t i = 0; i < fs->n; i++) {
        link_slot *ls = &n->l[fs->link[i]];
        size_t cap = ls->cap_flows;
        fs->demand[i] *= scale;
        if (grow((void **)&ls->flows, &cap, ls->n + 1, sizeof *ls->flows) != 0)
            return GS_ERR_NOMEM;
        ls->cap_flows = (uint32_t)cap;
        ls->flows[ls->n++] = fid;
    }
    fs->active = 1;
    fs->work_left = work_s;
    fs->last = now_s;
    fs->speed = 0.0;
    *id = fid;
    if (fs->n == 0) {
        fs->speed = 1.0;
        fs->end = now_s + work_s;
        fs->version++;
        return add_change(n, fid) == 0 ? GS_OK : GS_ERR_NOMEM;
    }
    size_t ncl, ncf;
    if (component(n, fs->link, fs->n, &ncl, &ncf) != 0 || solve(n, ncl, ncf, now_s, fid) != 0)
        return GS_ERR_NOMEM;
    return GS_OK;
}

gs_status gs_flow_finish(gs_flow_net *n, double now_s, uint32_t id)
{
    flow_slot *fs;
    n->nchg = 0;
    if (id >= n->nf || !n->f[id].active)
        return GS_ERR_INPUT;
    fs = &n->f[id];
    for (uint32_t i = 0; i < fs->n; i++) {
        link_slot *ls = &n->l[fs->link[i]];
        for (uint32_t j = 0; j < ls->n; j++)
            if (ls->flows[j] == id) {
                /* keep the start order: shift, not swap */
                memmove(&ls->flows[j], &ls->flows[j + 1], (ls->n - j - 1) * sizeof *ls->flows);
                ls->n--;
                break;
            }
    }
    fs->active = 0;
    fs->version++;
    if (grow((void **)&n->free_ids, &n->free_cap, n->nfree + 1, sizeof *n->free_ids) != 0)
        return GS_ERR_NOMEM;
    n->free_ids[n->nfree++] = id;
    if (fs->n == 0)
        return GS_OK;
    size_t ncl, ncf;
    if (component(n, fs->link, fs->n, &ncl, &ncf) != 0 || solve(n, ncl, ncf, now_s, UINT32_MAX) != 0)
        return GS_ERR_NOMEM;
    return GS_OK;
}

size_t gs_flow_changes(const gs_flow_net *n, const gs_flow_change **out)
{
    *out = n->chg;
    return n->nchg;
}

int gs_flow_current(const gs_flow_net *n, uint32_t id, uint32_t version)
{
    return id < n->nf && n->f[id].active && n->f[id].version == version;
}

double gs_flow_speed(const gs_flow_net *n, uint32_t id) { return id < n->nf ? n->f[id].speed : 0.0; }

double gs_flow_end(const gs_flow_net *n, uint32_t id) { return id < n->nf ? n->f[id].end : 0.0; }

/* -------------------------------------------------------------- the cluster's links ------- */

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
    uint64_t *nodes_seen;
    size_t nseen_cap;
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
    if (!cap || !m->node_mark || !m->node_nics || !m->leaf_mark || !m->leaf_count) {
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

gs_status gs_flow_model_p2p(gs_flow_model *m, double now_s, uint64_t src_rank, uint64_t dst_rank, uint64_t bytes,
                            double work_s, uint32_t *id)
{
    gs_flow_net *n = m->net;
    uint64_t sn = rank_node(m, src_rank), dn = rank_node(m, dst_rank), a, b;
    double v = (double)bytes;
    gs_status rc = GS_OK;
    gs_flow_begin(n);
    if (sn == dn) {
        rc = gs_flow_add_bytes(n, (uint32_t)(m->gpu_base + sn * m->gpn + src_rank % m->gpn), v);
    } else {
        rank_nics(m, src_rank, &a, &b);
        for (uint64_t k = a; k <= b && rc == GS_OK; k++)
            rc = gs_flow_add_bytes(n, (uint32_t)(sn * m->nics + k), v / (double)(b - a + 1));
        rank_nics(m, dst_rank, &a, &b);
        for (uint64_t k = a; k <= b && rc == GS_OK; k++)
            rc = gs_flow_add_bytes(n, (uint32_t)(m->nic_in_base + dn * m->nics + k), v / (double)(b - a + 1));
        if (rc == GS_OK && m->uplinks && sn / m->leaf_nodes != dn / m->leaf_nodes) {
            rc = gs_flow_add_bytes(n, (uint32_t)(m->up_base + sn / m->leaf_nodes), v);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes(n, (uint32_t)(m->down_base + dn / m->leaf_nodes), v);
        }
    }
    if (rc != GS_OK)
        return rc;
    return gs_flow_start(n, now_s, work_s, id);
}

static int popcount64(uint64_t x)
{
    int c = 0;
    while (x) {
        x &= x - 1;
        c++;
    }
    return c;
}

gs_status gs_flow_model_coll(gs_flow_model *m, double now_s, gs_coll_op op, const gs_coll_shape *shape,
                             uint64_t bytes, const gs_coll_cost *cost, const uint64_t *ranks, size_t nranks,
                             double work_s, uint32_t *id)
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
        intra = op == GS_COLL_ALLTOALL ? size * (double)(shape->ppn - 1) / (double)shape->nranks
                                       : size * gs_busbw_factor(op, shape->ppn);
    /* the nodes of the present members and the NICs they use there */
    for (size_t i = 0; i < nranks; i++) {
        uint64_t nd = rank_node(m, ranks[i]), a, b, lf = nd / m->leaf_nodes;
        if (m->node_mark[nd] != mk) {
            m->node_mark[nd] = mk;
            m->node_nics[nd] = 0;
            if (grow((void **)&m->nodes_seen, &m->nseen_cap, nseen + 1, sizeof *m->nodes_seen) != 0)
                return GS_ERR_NOMEM;
            m->nodes_seen[nseen++] = nd;
            if (m->leaf_mark[lf] != mk) {
                m->leaf_mark[lf] = mk;
                m->leaf_count[lf] = 0;
            }
            m->leaf_count[lf]++;
        }
        rank_nics(m, ranks[i], &a, &b);
        for (uint64_t k = a; k <= b; k++)
            m->node_nics[nd] |= k < 64 ? UINT64_C(1) << k : ~UINT64_C(0);
    }
    gs_flow_begin(n);
    for (size_t i = 0; i < nranks && rc == GS_OK && intra > 0.0; i++)
        rc = gs_flow_add_bytes(n, (uint32_t)(m->gpu_base + rank_node(m, ranks[i]) * m->gpn + ranks[i] % m->gpn), intra);
    for (size_t j = 0; j < nseen && rc == GS_OK && node_net > 0.0; j++) {
        uint64_t nd = m->nodes_seen[j], mask = m->node_nics[nd], lf = nd / m->leaf_nodes;
        uint64_t used = m->nics < 64 ? (uint64_t)popcount64(mask) : m->nics;
        double per = node_net / (double)(used ? used : 1);
        for (uint64_t k = 0; k < m->nics && rc == GS_OK; k++) {
            if (k < 64 && !(mask >> k & 1))
                continue;
            rc = gs_flow_add_bytes(n, (uint32_t)(nd * m->nics + k), per);
            if (rc == GS_OK)
                rc = gs_flow_add_bytes(n, (uint32_t)(m->nic_in_base + nd * m->nics + k), per);
        }
        if (rc == GS_OK && m->uplinks && nseen > 1) {
            double away = (double)(nseen - m->leaf_count[lf]) / (double)(nseen - 1);
            if (away > 0.0) {
                rc = gs_flow_add_bytes(n, (uint32_t)(m->up_base + lf), node_net * away);
                if (rc == GS_OK)
                    rc = gs_flow_add_bytes(n, (uint32_t)(m->down_base + lf), node_net * away);
            }
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
    case GS_ALGO_HIER: lat = gs__hier_time(t, op, shape, 0.0, cost->proto, NULL); break;
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
