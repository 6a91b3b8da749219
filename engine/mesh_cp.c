/* Hierarchical context parallelism on the mesh (engine/mesh.h: gs_mesh.cp_a2a): Transformer
 * Engine's a2a+p2p attention takes two process groups, which Megatron-Core builds from
 * --hierarchical-context-parallel-sizes A B (megatron/core/parallel_state.py,
 * create_hierarchical_groups): the a2a groups are A consecutive ranks of a CP group, the p2p
 * groups the B = cp / A ranks holding the same position within them.
 *
 * Ownership: functions of a borrowed mesh, O(1). */
#include "engine/mesh.h"

gs_status gs_mesh_set_cp_a2a(gs_mesh *m, uint64_t a, gs_error *err)
{
    uint64_t cp = m->cp ? m->cp : 1;
    if (a == 0 || cp % a != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "hierarchical context parallelism: the a2a level cp_a2a=%llu must divide cp=%llu",
                            (unsigned long long)a, (unsigned long long)cp);
    m->cp_a2a = a > 1 ? a : 0;
    return GS_OK;
}

uint64_t gs_mesh_cp_a2a(const gs_mesh *m)
{
    return m->cp_a2a ? m->cp_a2a : 1;
}

/* The rank's CP group (index, first member, stride) and its position in it. */
static uint64_t cp_position(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *step, uint64_t *pos)
{
    uint64_t index = gs_mesh_cp_group(m, rank, NULL, step);
    *first = gs_mesh_cp_first(m, rank, NULL);
    *pos = (rank - *first) / *step;
    return index;
}

uint64_t gs_mesh_cp_a2a_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t a = gs_mesh_cp_a2a(m), cp = m->cp ? m->cp : 1, f, step, pos;
    uint64_t index = cp_position(m, rank, &f, &step, &pos);
    if (first)
        *first = f + (pos / a) * a * step;
    if (stride)
        *stride = step;
    return index * (cp / a) + pos / a;
}

uint64_t gs_mesh_cp_p2p_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride)
{
    uint64_t a = gs_mesh_cp_a2a(m), f, step, pos;
    uint64_t index = cp_position(m, rank, &f, &step, &pos);
    if (first)
        *first = f + (pos % a) * step;
    if (stride)
        *stride = a * step;
    return index * a + pos % a;
}
