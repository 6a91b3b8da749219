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

#endif
