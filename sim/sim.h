/* The sim backend: a discrete-event replay of a schedule under modeled compute and links.
 *
 * Ownership: see engine/backend.h. */
#ifndef GS_SIM_H
#define GS_SIM_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/report.h"

extern const gs_backend_ops gs_sim_backend;

/* A step whose busiest host thread issues for more than this share of it is host-bound (the
 * GPU waits for its kernels to be issued): the report warns. */
#define GS_HOST_BOUND_SHARE 0.8

/* Convenience for commands and tests: build the schedule (exact or class path), play it on the
 * sim backend, build the report (with the host thread's issue time, host_issue_s, and a
 * host-bound warning above GS_HOST_BOUND_SHARE). When trace is not NULL the Chrome trace is
 * written to it.
 * exact = 1 without a trace or schedule asked for, where gs_sim_exact_is_class holds, plays
 * one rank per stage: the report is the exact path's (its event count every rank's). */
gs_status gs_sim_scenario(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                          gs_report *rep, FILE *trace, gs_error *err);

/* The same, also handing back the schedule and its timings (timing[i]: one gs_timing per event
 * of sch->ranks[i]) when both out pointers are not NULL, for plots; the caller owns them and
 * frees them with gs_sim_timed_free. */
gs_status gs_sim_scenario_timed(const gs_scenario *s, const gs_mesh *mesh, int exact, const gs_backend_opts *opts,
                                gs_report *rep, FILE *trace, gs_schedule **sch_out, gs_timing ***timing_out,
                                gs_error *err);
void gs_sim_timed_free(gs_schedule *sch, gs_timing **timing);

/* 1 when the exact path's timings are the class path's: analytic mode, no calibration file, no
 * stragglers, and every rank as its stage representative to the cost models (groups of the same
 * sizes and shapes, pipeline neighbours on its node exactly when the representative's are).
 * Then every rank of a stage plays the same events with the same durations from the same
 * start: a collective's members all arrive together, and a send leaves when its receiver's
 * stage representative would send it. tests/check_des holds the two paths equal on the
 * shipped scenarios. */
int gs_sim_exact_is_class(const gs_scenario *s, const gs_mesh *mesh, const gs_backend_opts *opts);

#endif
