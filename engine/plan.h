/* The planner: enumerates every configuration a user tunes for a model on a cluster (grids,
 * shardings, micro-batch sizes, pipeline schedules and virtual stages, sequence parallelism and
 * TP overlap, bucket sizes, prefetch and overlap flags, recompute, offload), rejects what fails
 * the mesh checks or the memory ledger (counting each reason), and evaluates the rest in tiers:
 * a closed-form lower bound on the step for every configuration (caller-supplied, so the engine
 * never names a backend), then, in order of the bound, the memory ledger and a shortened,
 * extrapolated simulation through a caller-supplied evaluator, until the bound says no
 * configuration left can enter the best `keep`. Ranked by tokens/s.
 *
 * Ownership: gs_plan_run allocates the gs_plan and everything it points to; gs_plan_destroy
 * frees it. The evaluator borrows the scenario and mesh it is handed for the call only and is
 * called from several threads at once (it must not share mutable state between calls); the bound
 * is called from the calling thread only. */
#ifndef GS_PLAN_H
#define GS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/ledger.h"
#include "engine/mesh.h"
#include "engine/report.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* Simulates one scenario on its mesh and fills rep (the caller of the evaluator calls
 * gs_report_fini on success). The CLI wraps gs_sim_scenario (analytic mode, class path). */
typedef gs_status (*gs_plan_eval)(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep,
                                  gs_error *err);

/* A lower bound on the step_time_s the evaluator gives for the full step of s (seconds; 0 when
 * none is known). Called once per bound group (configurations with the same grid, micro-batch,
 * recompute, pipeline schedule and virtual stages, SP and TP overlap), from the calling thread.
 * The CLI wraps gs_sim_step_bound. */
typedef gs_status (*gs_plan_bound)(const gs_scenario *s, const gs_mesh *mesh, void *ctx, double *lower_s,
                                   gs_error *err);

/* A lower bound on the same step from the configuration's memory and traffic ledger (l: its
 * bytes sent per step by kind); called from the worker threads (no shared mutable state). The CLI
 * wraps gs_sim_comm_bound. */
typedef gs_status (*gs_plan_comm_bound)(const gs_scenario *s, const gs_mesh *mesh, const gs_ledger *l, void *ctx,
                                        double *lower_s, gs_error *err);

/* Progress: `done` simulations finished of about `total` (the simulations done and the
 * configurations whose bound is still under the best kept; it shrinks as the search goes).
 * Called from the calling thread between waves; may be NULL. */
typedef void (*gs_plan_progress)(void *ctx, uint64_t done, uint64_t total);

#define GS_PLAN_LIST_MAX 32

/* A constraint on one dimension: the values allowed (n = 0: every value). */
typedef struct gs_plan_list {
    uint64_t v[GS_PLAN_LIST_MAX];
    size_t n;
} gs_plan_list;

typedef struct gs_plan_opts {
    gs_plan_list tp, pp, dp, micro;  /* micro n = 0: every size dividing global / dp */
    gs_plan_list cp;                 /* context parallelism; n = 0: the base scenario's cp only */
    gs_plan_list etp;                /* expert tensor parallelism searched besides tp (MoE models
                                        under TP): n = 0: 1; a list without 1: tp only */
    gs_plan_list ep;                 /* expert parallelism (MoE models); n = 0: every ep dividing
                                        both dp x cp and the experts (1 for dense models) */
    unsigned sharding_mask;          /* bit (1u << gs_sharding); 0: every strategy */
    uint64_t max_candidates;         /* stop enumerating after this many configurations; 0: no cap */
    int threads;                     /* worker threads (>= 1) */
    int no_extrapolate;              /* 1: simulate every candidate's full step (slow; for checks) */
    /* Bound pruning (R4): when keep > 0 and bound is set, only the best `keep` candidates are
     * guaranteed exact; configurations are examined in order of their bound and the search stops
     * when the next bound is slower than the keep-th best simulated step. keep = 0: every
     * configuration that fits is simulated. */
    size_t keep;
    gs_plan_bound bound;
    void *bound_ctx;
    gs_plan_comm_bound comm_bound; /* NULL: none; a configuration whose ledger's traffic bound is
                                      above the keep-th best is not simulated (R4) */
    /* Sharding: shard_count > 1 simulates only the configurations of shard shard_index: search
     * units (same grid, micro, pipeline, virtual stages, SP and TP overlap: with every R1 and R2
     * twin) in enumeration order, unit u to shard u % shard_count. Enumeration, the mesh, batch
     * and model-state rejections are every shard's; the memory ledger, R1-R4 count what the
     * shard examined. The shard's best `keep` are exact, and the union of all shards' best
     * `keep` holds the serial best `keep`. A shard with no configuration returns an empty plan,
     * not an error (unless nothing passes the checks at all). 0 or 1: no sharding. */
    uint64_t shard_index, shard_count;
    gs_plan_eval eval;
    void *eval_ctx;
    gs_plan_progress progress;
    void *progress_ctx;
} gs_plan_opts;

/* Defaults: no constraints, 2 threads, extrapolation on, no bound; eval must still be set. */
void gs_plan_opts_init(gs_plan_opts *o);

/* One simulated configuration. */
typedef struct gs_plan_candidate {
    uint64_t dp, pp, tp;
    uint64_t cp, ep;            /* context and expert parallelism (1: none) */
    uint64_t etp;               /* expert tensor parallelism below tp (0: etp = tp) */
    gs_strategy strategy;
    uint64_t micro;             /* sequences per micro-batch */
    uint64_t microbatches;      /* per step per pipeline */
    uint64_t key;               /* enumeration index: the stable last sort key */
    double step_time_s;
    double tokens_per_s, tokens_per_s_per_gpu;
    double mfu, hfu, tflops_per_gpu;
    double comm_share, bubble_share;
    double compute_s;                 /* compute stream busy, critical rank */
    double host_issue_s;              /* the busiest host thread's issuing time (gs_report) */
    double comm_s[GS_DIM_COUNT];      /* per dimension */
    double exposed_s[GS_DIM_COUNT];   /* per dimension, not hidden behind compute */
    uint64_t events;
    uint64_t peak_bytes;              /* memory ledger peak, bytes per rank (the real step) */
    uint64_t gpu_bytes;
    uint64_t sim_m1, sim_m2;          /* micro-batches simulated (m2 = 0: one full simulation) */
    uint64_t sim_layers;              /* > 0: the periodic closed form (gs_plan_estimate) from runs
                                         of 2 and up to sim_layers layers per model chunk */
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
    uint64_t simulated;               /* configurations simulated */
    uint64_t sim_runs;                /* evaluator calls (2 per extrapolated candidate) */
    uint64_t bounded;                 /* candidates skipped by the bound (R4) */
    int truncated;                    /* 1: max_candidates stopped the enumeration */
    double tier1_cpu_s;               /* CPU seconds of the enumeration and tier 1 (one thread) */
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

/* The periodic closed form: where each model chunk holds more than 3 layers (of a model given by
 * its shapes, not a nominal parameter count), the step with
 * chunks of 2 and 3 layers (each stage keeping its uneven remainder) at the micro-batch counts
 * gs_plan_simulate uses (m1, m2; or the real m when it is at most m2), and every time extended
 * bilinearly in (micro-batches, layers per chunk): exact where the schedule is periodic (layers
 * identical, micro-batches in steady state), as the step of 1F1B, GPipe, interleaved schedules and
 * gradient accumulation is ((m + p - 1) x a stage's per-micro-batch time, itself a + b x layers)
 * plus ends that do not grow with either. Elsewhere gs_plan_simulate. tests/check_plan draws
 * configurations at random and holds it within 1% of the full simulation. */
gs_status gs_plan_estimate(const gs_scenario *s, const gs_mesh *mesh, gs_plan_eval eval, void *ctx,
                           gs_plan_candidate *out, gs_error *err);

/* Reason category of a gs_scenario_mesh error: "heads not divisible by tp", "layers < pp",
 * "tp crosses nodes", "batch not divisible by micro x dp", ...; else the first words of its
 * first line with numbers dropped. */
void gs_plan_reason(const char *msg, char *out, size_t len);

#endif
