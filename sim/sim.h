/* The sim backend: a discrete-event replay of a schedule under modeled compute and links.
 *
 * Ownership: see engine/backend.h. */
#ifndef GS_SIM_H
#define GS_SIM_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/report.h"

extern const gs_backend_ops gs_sim_backend;

/* Convenience for commands and tests: build the schedule (exact or class path), play it on the
 * sim backend, build the report. When trace is not NULL the Chrome trace is written to it. */
gs_status gs_sim_scenario(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                          gs_report *rep, FILE *trace, gs_error *err);

/* The same, also handing back the schedule and its timings (timing[i]: one gs_timing per event
 * of sch->ranks[i]) when both out pointers are not NULL, for plots; the caller owns them and
 * frees them with gs_sim_timed_free. */
gs_status gs_sim_scenario_timed(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                                gs_report *rep, FILE *trace, gs_schedule **sch_out, gs_timing ***timing_out,
                                gs_error *err);
void gs_sim_timed_free(gs_schedule *sch, gs_timing **timing);

#endif
