/* One call from scenario to report on the sim backend (commands, tests, planner), and when
 * the exact path may play one rank per stage. */
#include <stdlib.h>
#include <string.h>

#include "sim/des_internal.h"
#include "sim/sim.h"

gs_status gs_sim_scenario(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                          gs_report *rep, FILE *trace, gs_error *err)
{
    return gs_sim_scenario_timed(s, mesh, exact, opts, rep, trace, NULL, NULL, err);
}

/* The timings of every rank list in one block (timing[0] points at its start): one
 * allocation, backed by huge pages where it is large. NULL when out of memory. */
static gs_timing **timing_alloc(const gs_schedule *sch)
{
    size_t n = 0;
    for (size_t i = 0; i < sch->nranks; i++)
        n += sch->ranks[i].nevents;
    gs_timing **timing = calloc(sch->nranks ? sch->nranks : 1, sizeof *timing);
    gs_timing *block = des_big_calloc(n ? n : 1, sizeof *block);
    if (!timing || !block) {
        free(timing);
        free(block);
        return NULL;
    }
    timing[0] = block;
    for (size_t i = 0, at = 0; i < sch->nranks; at += sch->ranks[i++].nevents)
        timing[i] = block + at;
    return timing;
}

static void timing_free(gs_timing **timing)
{
    if (timing)
        free(timing[0]);
    free(timing);
}

void gs_sim_timed_free(gs_schedule *sch, gs_timing **timing)
{
    timing_free(timing);
    gs_schedule_destroy(sch);
}

/* Rank `rank`'s neighbour `delta` (+1, -1) stages away, same dp and tp. */
static uint64_t stage_neighbour(const gs_mesh *m, uint64_t rank, int delta)
{
    uint64_t c[GS_DIM_COUNT], pp = m->size[GS_DIM_PP];
    gs_mesh_rank_coords(m, rank, c);
    c[GS_DIM_PP] = (c[GS_DIM_PP] + pp + (uint64_t)(int64_t)delta) % pp;
    return gs_mesh_coords_rank(m, c);
}

/* 1 when rank looks to the cost models as its stage representative rep does: groups of the
 * same sizes and shapes (nodes spanned, ranks per node), pipeline neighbours on its node exactly
 * when rep's are on rep's. */
static int same_as_representative(const gs_mesh *m, uint64_t rank, uint64_t rep)
{
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++) {
        uint64_t a, b;
        gs_coll_shape x, y;
        gs_group_of(m, (gs_group_kind)g, rank, &a);
        gs_group_of(m, (gs_group_kind)g, rep, &b);
        gs_topo_group_shape(m, (gs_group_kind)g, rank, &x);
        gs_topo_group_shape(m, (gs_group_kind)g, rep, &y);
        if (a != b || memcmp(&x, &y, sizeof x) != 0)
            return 0;
    }
    for (int d = -1; d <= 1; d += 2) {
        int here = gs_mesh_rank_node(m, stage_neighbour(m, rank, d)) == gs_mesh_rank_node(m, rank);
        int there = gs_mesh_rank_node(m, stage_neighbour(m, rep, d)) == gs_mesh_rank_node(m, rep);
        if (here != there)
            return 0;
    }
    return 1;
}

int gs_sim_exact_is_class(const gs_scenario *s, const gs_mesh *mesh, const gs_backend_opts *opts)
{
    if ((opts && (opts->flow || opts->calib)) || s->nstragglers > 0)
        return 0;
    for (uint64_t r = 0; r < mesh->world; r++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(mesh, r, c);
        c[GS_DIM_DP] = c[GS_DIM_TP] = 0;
        if (!same_as_representative(mesh, r, gs_mesh_coords_rank(mesh, c)))
            return 0;
    }
    return 1;
}

gs_status gs_sim_scenario_timed(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                                gs_report *rep, FILE *trace, gs_schedule **sch_out, gs_timing ***timing_out,
                                gs_error *err)
{
    gs_schedule *sch = NULL;
    gs_timing **timing = NULL;
    void *state = NULL;
    gs_backend_opts none = {0, NULL, NULL, NULL}, run_opts;
    gs_backend_stats stats;
    gs_status rc;
    /* a straggler breaks the symmetry the class path relies on: simulate every rank */
    if (s->nstragglers > 0)
        exact = 1;
    /* every rank as its representative plays (analytic, symmetric): the class path's timings
     * are every rank's, the exact path's limits and event count stay */
    int by_class = exact && !trace && !sch_out && gs_sim_exact_is_class(s, mesh, opts);
    if (by_class) {
        uint64_t m = gs_scenario_microbatches(s);
        if ((rc = gs_scenario_check_schedule_size(s, mesh, m ? m : 1, 1, err)) != GS_OK)
            return rc;
        exact = 0;
    }
    /* without a trace at most one event is named (a deadlock's): no name index; every rank
     * of a stage plays its representative's list (no copies) */
    rc = exact ? gs_schedule_build_shared(s, mesh, trace != NULL, &sch, err)
         : trace ? gs_schedule_build(s, mesh, 0, &sch, err)
                 : gs_schedule_build_unnamed(s, mesh, 0, &sch, err);
    if (rc != GS_OK)
        return rc;
    if (!(timing = timing_alloc(sch))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
        goto out;
    }
    /* the run's sizes and host time, handed on to the caller's stats when it asks */
    run_opts = opts ? *opts : none;
    memset(&stats, 0, sizeof stats);
    run_opts.stats = &stats;
    if ((rc = gs_sim_backend.open(s, mesh, &run_opts, &state, err)) != GS_OK)
        goto out;
    if ((rc = gs_sim_backend.run(state, sch, timing, err)) != GS_OK)
        goto out;
    if ((rc = gs_report_build(s, sch, timing, rep, err)) != GS_OK)
        goto out;
    if (opts && opts->stats)
        *opts->stats = stats;
    rep->host_issue_s = stats.host_issue_s;
    /* the GPU waits for the host: its kernels are shorter than their issuing */
    if (rep->host_issue_s > GS_HOST_BOUND_SHARE * rep->step_time_s &&
        (rc = gs_diag_warn(&rep->warnings, "host-bound: the host thread needs %.0f%% of the step to issue its "
                           "kernels (small kernels: torch.compile or CUDA graphs launch fewer, a larger micro-batch "
                           "makes each longer)", 100 * rep->host_issue_s / rep->step_time_s)) != GS_OK) {
        gs_report_fini(rep);
        goto out;
    }
    if (by_class) { /* the events of every rank */
        rep->events = 0;
        for (size_t i = 0; i < sch->nranks; i++)
            rep->events += sch->ranks[i].nevents * sch->ranks[i].class_size;
    }
    if (trace && (rc = gs_report_trace(sch, timing, trace, err)) != GS_OK)
        gs_report_fini(rep);
    if (rc == GS_OK && sch_out && timing_out) {
        *sch_out = sch;
        *timing_out = timing;
        sch = NULL;
        timing = NULL;
    }
out:
    if (state)
        gs_sim_backend.close(state);
    timing_free(timing);
    gs_schedule_destroy(sch);
    return rc;
}
