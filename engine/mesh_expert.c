/* The expert grid of a mixture-of-experts model (engine/mesh.h: gs_mesh.ep, gs_mesh.etp):
 * Megatron-Core's second decomposition of each pipeline stage's ranks
 * (megatron/core/parallel_state.py, initialize_model_parallel's expert RankGenerator, order
 * tp-ep-dp-pp with tp read as the expert tensor-parallel size): the EP, EDP and ETP groups as
 * arithmetic progressions of ranks.
 *
 * Ownership: functions of a borrowed gs_mesh; nothing is allocated. */
#include "engine/mesh.h"

gs_status gs_mesh_set_etp(gs_mesh *m, uint64_t etp, gs_error *err)
{
    uint64_t tp = m->size[GS_DIM_TP];
    if (etp == 0 || tp % etp != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "expert tensor parallelism etp=%llu must divide tp=%llu (each expert's GEMMs are split "
                            "over etp of the tp ranks)",
                            (unsigned long long)etp, (unsigned long long)tp);
    if (etp != tp && m->stride[GS_DIM_DP] != tp * m->stride[GS_DIM_TP])
        return gs_error_set(err, GS_ERR_INPUT,
                            "expert tensor parallelism etp=%llu below tp=%llu needs tp directly inside dp in "
                            "grid.order (tp-dp-pp, tp-cp-dp-pp or pp-tp-dp: Megatron-Core's expert grid reads "
                            "a stage's ranks as etp-ep-edp)",
                            (unsigned long long)etp, (unsigned long long)tp);
    m->etp = etp == tp ? 0 : etp;
    return GS_OK;
}

uint64_t gs_mesh_etp(const gs_mesh *m)
{
    return m->etp ? m->etp : m->size[GS_DIM_TP];
}

int gs_mesh_expert_split(const gs_mesh *m)
{
    return (m->ep ? m->ep : 1) > 1 || gs_mesh_etp(m) != m->size[GS_DIM_TP];
}

/* The rank's flat index f in its stage's tp x dp block (tp directly inside dp), the block's
 * rank base (rank = base + f x stride[TP]) and its pipeline stage. */
static uint64_t flat_index(const gs_mesh *m, uint64_t rank, uint64_t *base, uint64_t *stage)
{
    uint64_t st = m->stride[GS_DIM_TP], tp = m->size[GS_DIM_TP];
    uint64_t f = (rank / st) % tp + tp * ((rank / m->stride[GS_DIM_DP]) % m->size[GS_DIM_DP]);
    *base = rank - f * st;
    *stage = (rank / m->stride[GS_DIM_PP]) % m->size[GS_DIM_PP];
    return f;
}

gs_status gs_mesh_set_ep(gs_mesh *m, uint64_t ep, gs_error *err)
{
    uint64_t ranks = m->size[GS_DIM_TP] / gs_mesh_etp(m) * m->size[GS_DIM_DP];
    if (ep == 0 || ranks % ep != 0) {
        if (m->etp)
            return gs_error_set(err, GS_ERR_INPUT,
                                "expert parallelism ep=%llu must divide a stage's tp / etp x dp x cp = %llu expert "
                                "ranks (etp=%llu)",
                                (unsigned long long)ep, (unsigned long long)ranks, (unsigned long long)m->etp);
        return gs_error_set(err, GS_ERR_INPUT,
                            "expert parallelism ep=%llu must divide the data-parallel ranks (dp x cp = %llu)",
                            (unsigned long long)ep, (unsigned long long)m->size[GS_DIM_DP]);
    }
    m->ep = ep;
    return GS_OK;
}

uint64_t gs_mesh_edp_size(const gs_mesh *m)
{
    uint64_t ep = m->ep ? m->ep : 1;
    return m->size[GS_DIM_TP] / gs_mesh_etp(m) * m->size[GS_DIM_DP] / ep;
}

uint64_t gs_mesh_ep_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t ep = m->ep ? m->ep : 1, sd = m->stride[GS_DIM_DP], pos = (rank / sd) % m->size[GS_DIM_DP];
    if (m->etp) {
        uint64_t base, stage, etp = m->etp, st = m->stride[GS_DIM_TP];
        uint64_t f = flat_index(m, rank, &base, &stage), block = m->size[GS_DIM_TP] * m->size[GS_DIM_DP];
        if (first)
            *first = base + (f - ((f / etp) % ep) * etp) * st;
        if (stride)
            *stride = etp * st;
        return stage * (block / ep) + f % etp + etp * (f / (etp * ep));
    }
    if (first)
        *first = rank - (pos % ep) * sd;
    if (stride)
        *stride = sd;
    return gs_mesh_group(m, GS_DIM_DP, rank, NULL) * (m->size[GS_DIM_DP] / ep) + pos / ep;
}

uint64_t gs_mesh_edp_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t ep = m->ep ? m->ep : 1, sd = m->stride[GS_DIM_DP], pos = (rank / sd) % m->size[GS_DIM_DP];
    if (m->etp) {
        uint64_t base, stage, etp = m->etp, st = m->stride[GS_DIM_TP];
        uint64_t f = flat_index(m, rank, &base, &stage);
        if (first)
            *first = base + (f % (etp * ep)) * st;
        if (stride)
            *stride = etp * ep * st;
        return stage * etp * ep + f % (etp * ep);
    }
    if (first)
        *first = rank - (pos / ep) * ep * sd;
    if (stride)
        *stride = ep * sd;
    return gs_mesh_group(m, GS_DIM_DP, rank, NULL) * ep + pos % ep;
}

uint64_t gs_mesh_etp_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t st = m->stride[GS_DIM_TP];
    if (m->etp) {
        uint64_t base, stage, etp = m->etp;
        uint64_t f = flat_index(m, rank, &base, &stage), block = m->size[GS_DIM_TP] * m->size[GS_DIM_DP];
        if (first)
            *first = base + (f - f % etp) * st;
        if (stride)
            *stride = st;
        return stage * (block / etp) + f / etp;
    }
    if (first)
        *first = rank - ((rank / st) % m->size[GS_DIM_TP]) * st;
    if (stride)
        *stride = st;
    return gs_mesh_group(m, GS_DIM_TP, rank, NULL);
}

int gs_mesh_tpep_ok(const gs_mesh *m)
{
    return (m->ep ? m->ep : 1) <= 1 || gs_mesh_etp(m) <= 1 || m->stride[GS_DIM_DP] == m->size[GS_DIM_TP] * m->stride[GS_DIM_TP];
}

uint64_t gs_mesh_tpep_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t ep = m->ep ? m->ep : 1, etp = gs_mesh_etp(m);
    if (!gs_mesh_tpep_ok(m)) { /* no progression: the rank alone (nothing uses this group then) */
        if (first)
            *first = rank;
        if (stride)
            *stride = 1;
        return rank;
    }
    if (ep <= 1)
        return gs_mesh_etp_group(m, rank, first, stride);
    if (etp <= 1)
        return gs_mesh_ep_group(m, rank, first, stride);
    uint64_t base, stage, st = m->stride[GS_DIM_TP], n = etp * ep;
    uint64_t f = flat_index(m, rank, &base, &stage), block = m->size[GS_DIM_TP] * m->size[GS_DIM_DP];
    if (first)
        *first = base + (f - f % n) * st;
    if (stride)
        *stride = st;
    return stage * (block / n) + f / n;
}

uint64_t gs_mesh_tpep_size(const gs_mesh *m)
{
    return gs_mesh_tpep_ok(m) ? gs_mesh_etp(m) * (m->ep ? m->ep : 1) : 1;
}
