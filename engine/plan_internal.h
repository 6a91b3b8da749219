/* The planner's files (engine/plan.c: options, reasons, the extrapolated step, the result;
 * engine/plan_space.c: the configurations; engine/plan_search.c: the tiers) share this.
 *
 * Ownership: a search lives on gs_plan_run's stack and owns its arrays (search_fini frees
 * them); the base scenario and options are borrowed. */
#ifndef GS_PLAN_INTERNAL_H
#define GS_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/plan.h"

typedef enum cand_state {
    CAND_LEGAL,       /* passed the mesh and batch checks; memory not known yet */
    CAND_NOFIT,       /* ledger peak above GPU memory */
    CAND_FITS,        /* fits; to simulate */
    CAND_PRUNED,      /* dominated by a fitting lighter twin (R1, R2) */
    CAND_COPY,        /* same schedule as cand[twin] (R3) */
    CAND_DONE,        /* simulated */
    CAND_BOUNDED,     /* not simulated: its lower bound is slower than the keep-th best (R4) */
    CAND_OTHER_SHARD, /* its search group belongs to another shard (opts shard_count) */
    CAND_STATES_NOFIT /* the model states alone exceed the GPU (one ledger for its grid, sharding
                         and offload) */
} cand_state;

/* One configuration. */
typedef struct cand {
    uint64_t dp, pp, tp, micro;
    uint64_t cp, ep;   /* context and expert parallelism (1: none); dp counts the replicas */
    uint64_t etp;      /* expert tensor parallelism below tp (0: etp = tp) */
    gs_strategy st;
    size_t block;      /* configurations sharing everything but recompute and offload (R1, R2) */
    size_t twin;       /* CAND_COPY: the candidate simulated for it */
    size_t res;        /* CAND_DONE: its result in search.res */
    size_t group;      /* its bound group (search.groups): same lower bound */
    uint64_t peak_bytes, gpu_bytes;
    double comm_lower_s; /* the traffic bound (opts comm_bound), seconds; 0 before the ledger */
    uint8_t state;     /* cand_state */
    uint8_t ledgered;  /* 1: its ledger ran */
    uint8_t why;       /* CAND_PRUNED: 1 R1, 2 R2 */
} cand;

typedef struct block_slots {
    long slot[3][2];   /* [recompute][offload] -> candidate index, -1 when not enumerated */
} block_slots;

typedef struct counts {
    gs_plan_count *v;
    size_t n, cap;
} counts;

/* Configurations that build the same compute events (grid, micro, recompute, pipeline,
 * virtual stages, SP, TP overlap): one lower bound, seconds (0: none). */
typedef struct bound_group {
    size_t first;      /* a member (candidate index) */
    double lower_s;
} bound_group;

typedef struct search {
    const gs_scenario *base;
    const gs_plan_opts *o;
    cand *c;
    size_t n, cap;
    block_slots *blocks;
    size_t nblocks, bcap;
    bound_group *groups;
    size_t ngroups, gcap;
    gs_plan_candidate *res; /* simulated results */
    size_t nres, rcap;
    counts rejected, pruned;
    uint64_t grids, legal_grids, evaluated;
    uint64_t simulated, sim_runs, bounded;
    int truncated;
} search;

/* plan.c */
gs_status gs__plan_count_add(counts *c, const char *reason, int grids, uint64_t k, gs_error *err);
/* The scenario of one candidate: base's model, cluster and batch, the candidate's grid, micro
 * and strategy. */
/* The candidate's hierarchical CP a2a level: the base's (grid.cp_a2a) under cp_comm a2a+p2p with
 * cp > 1, else none (0). A cp the level does not suit leaves the scenario's check to refuse it. */
uint64_t gs__plan_cp_a2a(const gs_scenario *base, uint64_t cp, gs_cp_comm comm);
void gs__plan_cand_scenario(const search *x, const cand *c, gs_scenario *s);
void gs__plan_copy_report(const gs_report *r, gs_plan_candidate *o);

/* plan_space.c: every configuration on every legal grid (cands in state CAND_LEGAL, blocks
 * and bound groups filled; rejections counted). */
gs_status gs__plan_enumerate(search *x, gs_error *err);

/* plan_search.c: tier 1 (the model states, R3, the shard, the bounds; on the calling thread),
 * then the search (tiers 2 and 3, the copies' fate and the counts). */
gs_status gs__plan_tier1(search *x, gs_error *err);
gs_status gs__plan_search(search *x, gs_error *err);

#define GS_PLAN_REASON_NOFIT "does not fit in GPU memory (ledger peak)"
#define GS_PLAN_REASON_STATES "model states do not fit in GPU memory"
#define GS_PLAN_REASON_R1 "offload with a fitting twin without offload (R1)"
#define GS_PLAN_REASON_R2 "recompute with a fitting lighter-recompute twin (R2)"
#define GS_PLAN_REASON_R3 "same schedule as another sharding (R3: simulated once, both listed)"
#define GS_PLAN_REASON_R4 "lower bound slower than the best kept (R4)"

#endif
