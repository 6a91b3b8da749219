/* A scenario: model, cluster, grid, strategy and batch, loaded from YAML with file:line:column
 * errors, or assembled in code.
 *
 * Ownership: gs_scenario is a plain value (no heap pointers); the loader builds it in caller
 * storage and frees its parser state before returning. */
#ifndef GS_SCENARIO_H
#define GS_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "engine/hardware.h"
#include "engine/mesh.h"
#include "engine/model.h"
#include "engine/status.h"
#include "engine/strategy.h"

typedef struct gs_grid {
    uint64_t dp, pp, tp;
    gs_dim order[GS_DIM_COUNT]; /* default tp-dp-pp */
    int allow_tp_cross_node;    /* 1: a TP group spanning nodes is a warning, not an error */
    uint32_t grid_line, grid_col; /* 1-based position of `grid:` in the file; 0 when built in code */
} gs_grid;

typedef struct gs_batch {
    uint64_t global_seqs; /* sequences per optimizer step, all DP replicas together */
    uint64_t micro_seqs;  /* sequences per micro-batch per replica */
    uint32_t batch_line, batch_col; /* 1-based position of `batch:` (or of `grid:` when batch is
                                       absent); 0 when built in code */
} gs_batch;

typedef struct gs_scenario {
    char path[512];   /* file it came from ("<string>" for in-memory text) */
    char name[128];   /* file base name without .yaml */
    char title[128];  /* top-level `name:` (display only); "" when absent */
    char description[512]; /* top-level `description:`; "" when absent */
    gs_model model;
    gs_cluster cluster;
    gs_grid grid;
    gs_strategy strategy;
    gs_batch batch;
} gs_scenario;

/* Loads and validates (model, cluster, strategy, batch; not the mesh checks, which need the
 * mesh: see gs_scenario_mesh). Errors carry "file:line:column: found X, expected Y". */
gs_status gs_scenario_load_file(const char *path, gs_scenario *out, gs_error *err);
gs_status gs_scenario_load_string(const char *text, size_t len, const char *name,
                                  gs_scenario *out, gs_error *err);

/* Builds the mesh and runs gs_mesh_check; also checks batch divisibility
 * (global % (micro * dp) == 0). */
gs_status gs_scenario_mesh(const gs_scenario *s, gs_mesh *mesh, gs_diag *warnings, gs_error *err);

/* Micro-batches per optimizer step per pipeline (= gradient-accumulation steps):
 * global / (micro * dp). Valid after gs_scenario_mesh succeeded. */
uint64_t gs_scenario_microbatches(const gs_scenario *s);

/* Tokens per optimizer step: global_seqs * seq. */
double gs_scenario_tokens(const gs_scenario *s);

#endif
