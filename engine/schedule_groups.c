/* The process groups of a schedule's collectives: gs_group_of and gs_group_members_of
 * (engine/schedule.h) resolve each gs_group_kind against the mesh: the mesh's dimensions, HSDP's
 * node-split sub-groups of DP, the CP (and hierarchical CP's two levels), EP, EDP, ETP and ETP x EP
 * groups (engine/mesh.h), and a pipeline stage's ranks.
 *
 * Ownership: functions of a borrowed mesh; member lists go to caller arrays. */
#include <stdint.h>

#include "engine/mesh.h"
#include "engine/schedule.h"

/* HSDP parts of rank's DP group: the group's members first + i*s (i < n) split by node. */
typedef struct dp_parts {
    uint64_t g, first, s, n, gpn;
} dp_parts;

static void dp_parts_of(const gs_mesh *m, uint64_t rank, dp_parts *p)
{
    p->g = gs_mesh_group(m, GS_DIM_DP, rank, NULL);
    p->first = gs_mesh_group_first(m, GS_DIM_DP, p->g);
    p->s = m->stride[GS_DIM_DP];
    p->n = m->size[GS_DIM_DP];
    p->gpn = m->gpus_per_node;
}

/* [lo, hi] member indices of the part holding member i. */
static void dp_part(const dp_parts *p, uint64_t i, uint64_t *lo, uint64_t *hi)
{
    uint64_t node_lo = ((p->first + i * p->s) / p->gpn) * p->gpn;
    uint64_t node_hi = node_lo + (p->gpn - 1);
    *lo = node_lo <= p->first ? 0 : (node_lo - p->first + p->s - 1) / p->s;
    uint64_t h = node_hi < p->first ? 0 : (node_hi - p->first) / p->s;
    *hi = h < p->n - 1 ? h : p->n - 1;
}

static uint64_t dp_sub_members(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *out,
                               uint64_t *index)
{
    dp_parts p;
    dp_parts_of(m, rank, &p);
    uint64_t i = (rank - p.first) / p.s, lo, hi;
    dp_part(&p, i, &lo, &hi);
    uint64_t count = 0;
    if (g == GS_GROUP_DP_INTRA) {
        *index = p.g * p.n + lo;
        for (uint64_t j = lo; j <= hi; j++, count++)
            if (out)
                out[count] = p.first + j * p.s;
        return count;
    }
    uint64_t pos = i - lo;
    *index = p.g * p.n + pos;
    for (uint64_t j = 0; j < p.n;) { /* walk the parts */
        uint64_t plo, phi;
        dp_part(&p, j, &plo, &phi);
        if (phi - plo >= pos) {
            if (out)
                out[count] = p.first + (plo + pos) * p.s;
            count++;
        }
        j = phi + 1;
    }
    return count;
}

/* The stage group of rank: the ranks sharing its pipeline coordinate c, which are the blocks
 * [a, a + s) at a = c s + j s P (s = stride[PP], P = pp, j < world / (s P)). Returns c, the
 * group's index; writes the members, ascending, to out (NULL: none). */
static uint64_t stage_members(const gs_mesh *m, uint64_t rank, uint64_t *out, uint64_t *size)
{
    uint64_t s = m->stride[GS_DIM_PP], P = m->size[GS_DIM_PP];
    uint64_t c = (rank / s) % P, n = 0;
    for (uint64_t a = c * s; out && a < m->world; a += s * P)
        for (uint64_t r = a; r < a + s; r++)
            out[n++] = r;
    if (size)
        *size = m->world / P;
    return c;
}

static gs_dim group_dim(gs_group_kind g)
{
    return g == GS_GROUP_TP ? GS_DIM_TP : g == GS_GROUP_PP ? GS_DIM_PP : GS_DIM_DP;
}

uint64_t gs_group_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *size)
{
    uint64_t index = 0, n;
    if (g == GS_GROUP_DP_INTRA || g == GS_GROUP_DP_INTER) {
        n = dp_sub_members(m, g, rank, NULL, &index);
    } else if (g == GS_GROUP_CP) {
        index = gs_mesh_cp_group(m, rank, NULL, NULL);
        n = m->cp ? m->cp : 1;
    } else if (g == GS_GROUP_EP) {
        index = gs_mesh_ep_group(m, rank, NULL, NULL);
        n = m->ep ? m->ep : 1;
    } else if (g == GS_GROUP_EDP) {
        index = gs_mesh_edp_group(m, rank, NULL, NULL);
        n = gs_mesh_edp_size(m);
    } else if (g == GS_GROUP_ETP) {
        index = gs_mesh_etp_group(m, rank, NULL, NULL);
        n = gs_mesh_etp(m);
    } else if (g == GS_GROUP_TPEP) {
        index = gs_mesh_tpep_group(m, rank, NULL, NULL);
        n = gs_mesh_tpep_size(m);
    } else if (g == GS_GROUP_CP_A2A) {
        index = gs_mesh_cp_a2a_group(m, rank, NULL, NULL);
        n = gs_mesh_cp_a2a(m);
    } else if (g == GS_GROUP_CP_P2P) {
        index = gs_mesh_cp_p2p_group(m, rank, NULL, NULL);
        n = (m->cp ? m->cp : 1) / gs_mesh_cp_a2a(m);
    } else if (g == GS_GROUP_STAGE) {
        index = stage_members(m, rank, NULL, &n);
    } else {
        index = gs_mesh_group(m, group_dim(g), rank, NULL);
        n = m->size[group_dim(g)];
    }
    if (size)
        *size = n;
    return index;
}

uint64_t gs_group_members_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *out)
{
    uint64_t index;
    if (g == GS_GROUP_DP_INTRA || g == GS_GROUP_DP_INTER)
        return dp_sub_members(m, g, rank, out, &index);
    if (g == GS_GROUP_CP) {
        gs_mesh_cp_group(m, rank, out, NULL);
        return m->cp ? m->cp : 1;
    }
    if (g == GS_GROUP_STAGE) {
        uint64_t n;
        stage_members(m, rank, out, &n);
        return n;
    }
    if (g == GS_GROUP_EP || g == GS_GROUP_EDP || g == GS_GROUP_ETP || g == GS_GROUP_TPEP || g == GS_GROUP_CP_A2A ||
        g == GS_GROUP_CP_P2P) {
        uint64_t first, stride, n;
        gs_group_of(m, g, rank, &n);
        if (g == GS_GROUP_EP)
            gs_mesh_ep_group(m, rank, &first, &stride);
        else if (g == GS_GROUP_EDP)
            gs_mesh_edp_group(m, rank, &first, &stride);
        else if (g == GS_GROUP_ETP)
            gs_mesh_etp_group(m, rank, &first, &stride);
        else if (g == GS_GROUP_CP_A2A)
            gs_mesh_cp_a2a_group(m, rank, &first, &stride);
        else if (g == GS_GROUP_CP_P2P)
            gs_mesh_cp_p2p_group(m, rank, &first, &stride);
        else
            gs_mesh_tpep_group(m, rank, &first, &stride);
        for (uint64_t i = 0; out && i < n; i++)
            out[i] = first + i * stride;
        return n;
    }
    gs_mesh_group(m, group_dim(g), rank, out);
    return m->size[group_dim(g)];
}
