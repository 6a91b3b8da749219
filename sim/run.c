/* One call from scenario to report on the sim backend (commands, tests, planner). */
#include <stdlib.h>

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

gs_status gs_sim_scenario_timed(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                                gs_report *rep, FILE *trace, gs_schedule **sch_out, gs_timing ***timing_out,
                                gs_error *err)
{
    gs_schedule *sch = NULL;
    gs_timing **timing = NULL;
    void *state = NULL;
    gs_backend_opts none = {0, NULL, NULL};
    /* a straggler breaks the symmetry the class path relies on: simulate every rank */
    if (s->nstragglers > 0)
        exact = 1;
    /* without a trace at most one event is named (a deadlock's): no name index; every rank
     * of a stage plays its representative's list (no copies) */
    gs_status rc = exact ? gs_schedule_build_shared(s, mesh, trace != NULL, &sch, err)
                   : trace ? gs_schedule_build(s, mesh, 0, &sch, err)
                           : gs_schedule_build_unnamed(s, mesh, 0, &sch, err);
    if (rc != GS_OK)
        return rc;
    if (!(timing = timing_alloc(sch))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
        goto out;
    }
    if ((rc = gs_sim_backend.open(s, mesh, opts ? opts : &none, &state, err)) != GS_OK)
        goto out;
    if ((rc = gs_sim_backend.run(state, sch, timing, err)) != GS_OK)
        goto out;
    if ((rc = gs_report_build(s, sch, timing, rep, err)) != GS_OK)
        goto out;
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
