/* A scenario written back as YAML that gs_scenario_load_* reads into the same scenario (used by
 * `gridstep sim --from-... --dump-scenario`).
 *
 * Ownership: borrows the scenario; appends to the caller's gs_text. */
#ifndef GS_SCENARIO_WRITE_H
#define GS_SCENARIO_WRITE_H

#include "engine/scenario.h"
#include "engine/status.h"
#include "engine/text.h"

/* Appends the scenario as YAML: the model as its preset name when it is an unmodified preset,
 * else every model field; the cluster as its preset with nodes and the per-node counts; grid,
 * strategy (every field), batch and stragglers. GS_ERR_UNSUPPORTED for what the format cannot
 * say (a cluster whose GPU, fabric or NIC is not its preset's; a DDP bucket that is not a whole
 * MiB), GS_ERR_NOMEM when out cannot grow. */
gs_status gs_scenario_write_yaml(const gs_scenario *s, gs_text *out, gs_error *err);

/* Appends the model on one line as the scenario's `model:` value reads it back: its preset name
 * when it is an unmodified preset, else a flow mapping of every field. GS_ERR_NOMEM. */
gs_status gs_model_write_flow(const gs_model *m, gs_text *out);

#endif
