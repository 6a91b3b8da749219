/* The planner: enumerates every legal grid and strategy for a model on a cluster, rejects what
 * fails the mesh checks or the memory ledger (counting each reason), prunes provably dominated
 * configurations, simulates the rest through a caller-supplied evaluator (so the engine never
 * names a backend) with a shortened, extrapolated step, and ranks them by tokens/s.
 *
 * Ownership: gs_plan_run allocates the gs_plan and everything it points to; gs_plan_destroy
 * frees it. The evaluator borrows the scenario and mesh it is handed for the call only and is
 * called from several threads at once (it must not share mutable state between calls). */
#ifndef GS_PLAN_H
#define GS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/mesh.h"
#include "engine/report.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* Simulates one scenario on its mesh and fills rep (the caller of the evaluator calls
 * gs_report_fini on success). The CLI wraps gs_sim_scenario (analytic mode, class path). */
typedef gs_status (*gs_plan_eval)(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep,
                                  gs_error *err);

/* Progress: `done` of `total` simulations finished. Called under the planner's lock, from any of
 * its threads; may be NULL. */
typedef void (*gs_plan_progress)(void *ctx, uint64_t done, uint64_t total);

#define GS_PLAN_LIST_MAX 32

/* A constraint on one dimension: the values allowed (n = 0: every value). */
typedef struct gs_plan_list {
    uint64_t v[GS_PLAN_LIST_MAX];
    size_t n;
} gs_plan_list;

typedef struct gs_plan_opts {
    gs_plan_list tp, pp, dp, micro;  /* micro n = 0: {1, 2, 4, 8} */
    unsigned sharding_mask;          /* bit (1u << gs_sharding); 0: every strategy */
    uint64_t max_candidates;         /* stop enumerating after this many configurations; 0: no cap */
    int threads;                     /* worker threads (>= 1) */
    int no_extrapolate;              /* 1: simulate every candidate's full step (slow; for checks) */
    /* Bound pruning (R4): when keep > 0 and compute_slowdown >= 1, only the best `keep`
     * candidates are guaranteed exact and simulated in full; a candidate whose lower bound is
     * slower than the keep-th best simulated step is not simulated. compute_slowdown is the
     * evaluator's largest factor on a compute event's base duration (the sim's overlap slowdown). */
    size_t keep;
    double compute_slowdown;
    /* Sharding: shard_count > 1 simulates only the configurations of shard shard_index: the
     * fitting configurations are grouped as R4 groups them (same grid, micro, recompute, pipeline,
     * virtual stages, SP: they differ in sharding and offload), the groups sorted by that key, and
     * group g belongs to shard g % shard_count. Enumeration, rejections and R1-R3 are every
     * shard's; the shard's best `keep` are exact, and the union of all shards' best `keep` holds
     * the serial best `keep`. A shard with no configuration returns an empty plan, not an error
     * (unless nothing fits at all). 0 or 1: no sharding. */
    uint64_t shard_index, shard_count;
    gs_plan_eval eval;
    void *eval_ctx;
    gs_plan_progress progress;
    void *progress_ctx;
} gs_plan_opts;

/* Defaults: no constraints, 2 threads, extrapolation on; eval must still be set. */
void gs_plan_opts_init(gs_plan_opts *o);

/* One simulated configuration. */
typedef struct gs_plan_candidate {
    uint64_t dp, pp, tp;
    gs_strategy strategy;
    uint64_t micro;             /* sequences per micro-batch */
    uint64_t microbatches;      /* per step per pipeline */
    uint64_t key;               /* enumeration index: the stable last sort key */
    double step_time_s;
    double tokens_per_s, tokens_per_s_per_gpu;
    double mfu, hfu, tflops_per_gpu;
    double comm_share, bubble_share;
    double compute_s;                 /* compute stream busy, critical rank */
    double comm_s[GS_DIM_COUNT];      /* per dimension */
    double exposed_s[GS_DIM_COUNT];   /* per dimension, not hidden behind compute */
    uint64_t events;
    uint64_t peak_bytes;              /* memory ledger peak, bytes per rank (the real step) */
    uint64_t gpu_bytes;
    uint64_t sim_m1, sim_m2;          /* micro-batches simulated (m2 = 0: one full simulation) */
} gs_plan_candidate;

/* A reason and how many configurations (or grids, for grid-level reasons) it counts. */
typedef struct gs_plan_count {
    char reason[96];
    uint64_t count;
    int grids;                        /* 1: counts grids (mesh checks), 0: configurations */
} gs_plan_count;

typedef struct gs_plan {
    gs_plan_candidate *cands;         /* simulated, best first */
    size_t ncands;
    gs_plan_count *rejected;          /* by count descending, then name */
    size_t nrejected;
    gs_plan_count *pruned;            /* dominance rules and the configurations each removed */
    size_t npruned;
    uint64_t grids, legal_grids;      /* (dp, pp, tp) triples enumerated / passing the mesh checks */
    uint64_t evaluated;               /* configurations enumerated on the legal grids */
    uint64_t simulated;               /* configurations simulated (= ncands) */
    uint64_t sim_runs;                /* evaluator calls (2 per extrapolated candidate) */
    uint64_t bounded;                 /* candidates skipped by the bound (R4) */
    int truncated;                    /* 1: max_candidates stopped the enumeration */
    uint64_t gpus;
    uint64_t global_seqs;
} gs_plan;

/* Runs the search for base's model, cluster and batch (its grid and strategy are ignored; the
 * strategy's precision, wrap and prefetch defaults are the seed's). Fails with GS_ERR_INPUT when
 * no configuration survives (err says the rejection counts) or options are inconsistent; an
 * evaluator failure is returned as is, prefixed with the candidate. */
gs_status gs_plan_run(const gs_scenario *base, const gs_plan_opts *o, gs_plan **out, gs_error *err);
void gs_plan_destroy(gs_plan *p);

/* The shortened, extrapolated step for one scenario whose mesh passed gs_scenario_mesh:
 * with m micro-batches per step, p = pp and m1 = min(m, max(2, 2p)) (rounded up to a multiple of
 * p for interleaved schedules), m2 = m1 + p: when m > m2 it simulates m1 and m2 micro-batches and
 * extrapolates every time linearly, step(m) = step(m2) + (m - m2) (step(m2) - step(m1)) / (m2 - m1)
 * (1F1B, GPipe, interleaved and gradient accumulation repeat per micro-batch in steady state);
 * otherwise it simulates the step itself. Peak memory is the ledger's for the real step.
 * m1/m2 receive what was simulated (m2 = 0: the full step). */
gs_status gs_plan_simulate(const gs_scenario *s, const gs_mesh *mesh, gs_plan_eval eval, void *ctx,
                           gs_plan_candidate *out, gs_error *err);

/* Reason category of a gs_scenario_mesh error: "heads not divisible by tp", "layers < pp",
 * "tp crosses nodes", "batch not divisible by micro x dp", ...; else the first words of its
 * first line with numbers dropped. */
void gs_plan_reason(const char *msg, char *out, size_t len);

#endif
