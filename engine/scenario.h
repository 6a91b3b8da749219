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
#include "engine/pipeline_layout.h"
#include "engine/status.h"
#include "engine/strategy.h"

typedef struct gs_grid {
    uint64_t dp, pp, tp;
    uint64_t cp;                /* context parallelism: ranks sharing each sequence; default 1.
                                   The world is dp x cp x pp x tp (engine/mesh.h folds cp into
                                   the DP dimension) */
    int cp_outer;               /* order names cp after dp (tp-dp-cp-pp); default 0 (tp-cp-dp-pp) */
    uint64_t cp_a2a;            /* hierarchical CP (strategy.cp_comm a2a+p2p): the a2a level's size, a
                                   divisor of cp (Megatron-Core's --hierarchical-context-parallel-sizes
                                   A cp/A); 0 (default): not hierarchical */
    uint64_t ep;                /* expert parallelism: ranks sharing a MoE layer's experts, carved out
                                   of dp x cp (engine/mesh.h); default 1 */
    uint64_t etp;               /* expert tensor parallelism: ranks splitting each routed expert's
                                   GEMMs, a divisor of tp (Megatron-Core's
                                   --expert-tensor-parallel-size); 0 (default): tp */
    gs_dim order[GS_DIM_COUNT]; /* default tp-dp-pp */
    int allow_tp_cross_node;    /* 1: a TP group spanning nodes is a warning, not an error */
    uint64_t first_stage_layers; /* layers of the first pipeline stage (Megatron-LM's
                                    --decoder-first-pipeline-num-layers); 0: the even split's */
    uint64_t last_stage_layers;  /* of the last (--decoder-last-pipeline-num-layers); 0: the split's */
    int account_for_embedding;  /* 1: the embedding counts as a layer of the pipeline split
                                   (--account-for-embedding-in-pipeline-split); default 0 */
    int account_for_loss;       /* 1: the loss does (--account-for-loss-in-pipeline-split); default 0 */
    gs_layout layout;           /* each virtual stage's decoder layers (Megatron-Core's
                                   --pipeline-model-parallel-layout); n 0: the split's rules */
    uint32_t grid_line, grid_col; /* 1-based position of `grid:` in the file; 0 when built in code */
} gs_grid;

typedef struct gs_batch {
    uint64_t global_seqs; /* sequences per optimizer step, all DP replicas together */
    uint64_t micro_seqs;  /* sequences per micro-batch per replica */
    uint32_t batch_line, batch_col; /* 1-based position of `batch:` (or of `grid:` when batch is
                                       absent); 0 when built in code */
} gs_batch;

/* A rank or a whole node that runs slower than the rest (compute time x slowdown). */
typedef struct gs_straggler {
    int node;         /* 1: id is a node; 0: id is a rank */
    uint64_t id;
    double slowdown;  /* >= 1: compute events take this many times longer */
} gs_straggler;

#define GS_MAX_STRAGGLERS 64

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
    gs_straggler stragglers[GS_MAX_STRAGGLERS]; /* `stragglers:` list */
    size_t nstragglers;
} gs_scenario;

/* Compute slowdown of a rank: the product of its own and its node's straggler factors (1 when
 * none). */
double gs_scenario_slowdown(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank);

/* Drops the grid's pinned split of the layers over pipeline stages (first / last stage counts,
 * the accounted embedding and loss, a layout): the stages then split the layers evenly. For
 * callers that change pp, the virtual stages or the layer count. */
void gs_grid_split_even(gs_grid *g);

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

/* The largest schedule gs_schedule_build makes: estimated events over all rank lists (an event
 * takes about 110 bytes with its links, so about 11 GB). */
#define GS_SCHEDULE_MAX_EVENTS 100000000u
/* Events per layer per micro-batch the estimate counts (forward, backward, their collectives;
 * measured 20 for Llama with TP, so the estimate errs low). */
#define GS_SCHEDULE_EVENTS_PER_LAYER_PASS 16u
/* DDP / ZeRO-1/2 gradient buckets per stage a schedule may hold (each is a few events; the ledger
 * sums them in closed form at any count). */
#define GS_SCHEDULE_MAX_BUCKETS 1000000u
/* Micro-batches per step a scenario may have (gs_scenario_mesh refuses more, naming the batch):
 * the memory ledger walks every one of them through the pipeline. */
#define GS_SCENARIO_MAX_MICROBATCHES (1u << 24)

/* Refuses, before anything is built, a model the schedule cannot build under the grid and strategy
 * (mixture of experts with tp but no sequence parallelism, latent attention with tp_comm_overlap
 * or cp: GS_ERR_INPUT at the grid), more than GS_SCHEDULE_MAX_BUCKETS gradient buckets per
 * stage (GS_ERR_INPUT, naming bucket_bytes and the size it would need) and a schedule above
 * GS_SCHEDULE_MAX_EVENTS: rank lists (world
 * when exact, else pp) x microbatches x (layers per stage + 2) x GS_SCHEDULE_EVENTS_PER_LAYER_PASS.
 * GS_ERR_OVERFLOW with a message at the batch (or grid, when exact) saying how to shrink it. */
gs_status gs_scenario_check_schedule_size(const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches,
                                          int exact, gs_error *err);

/* Tokens per optimizer step: global_seqs * seq. */
double gs_scenario_tokens(const gs_scenario *s);

#endif
