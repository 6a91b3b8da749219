/* The seed article's troubleshooting table (its section 5, plus its pitfalls of states above the
 * GPU, CPU offload and TP across nodes) walked
 * against one scenario: for each row, whether the symptom applies (with the ledger and simulation
 * numbers behind the verdict) and the simulated effect of the row's fix, measured by applying the
 * fix to a copy of the scenario and re-running the ledger and the step through a caller-supplied
 * evaluator (the engine never names a backend).
 *
 * Ownership: gs_diagnosis is caller storage (fixed arrays, no heap pointers); gs_diagnose_run
 * fills it and frees everything it allocated before returning. The evaluator borrows the
 * scenario and mesh it is handed for the call only. */
#ifndef GS_DIAGNOSE_H
#define GS_DIAGNOSE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/plan.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* Does the row's symptom apply to the scenario? */
typedef enum gs_diagnose_verdict {
    GS_DIAGNOSE_NO,      /* the check passes */
    GS_DIAGNOSE_AT_RISK, /* passes, but within the row's warning margin */
    GS_DIAGNOSE_YES,     /* the symptom applies */
    GS_DIAGNOSE_NA       /* cannot be checked from one simulated step */
} gs_diagnose_verdict;

/* How checkpoints are written (not part of the step; it sets the host memory rank 0 needs). */
typedef enum gs_state_dict {
    GS_STATE_DICT_FULL,    /* FULL_STATE_DICT: everything gathered on rank 0 (PyTorch's default) */
    GS_STATE_DICT_SHARDED  /* SHARDED_STATE_DICT: each rank writes its own shard */
} gs_state_dict;

/* Default host memory per node, bytes: DGX H100's 2 TB DDR5 (shared/reference 2.1). */
#define GS_DIAGNOSE_HOST_BYTES_DEFAULT 2000000000000ull

typedef struct gs_diagnose_opts {
    gs_plan_eval eval;      /* simulates one scenario (the CLI wraps gs_sim_scenario) */
    void *eval_ctx;
    int full_step;          /* 1: simulate every micro-batch; 0: gs_plan_simulate's extrapolation */
    gs_state_dict state_dict;
    uint64_t host_bytes;    /* host memory per node, bytes */
} gs_diagnose_opts;

/* Defaults: extrapolated step, FULL_STATE_DICT, GS_DIAGNOSE_HOST_BYTES_DEFAULT; eval must be set. */
void gs_diagnose_opts_init(gs_diagnose_opts *o);

/* What one configuration measures: the ledger's peak and the simulated step. */
typedef struct gs_diagnose_measure {
    uint64_t peak_bytes;       /* per rank, max over ranks (memory ledger) */
    uint64_t gpu_bytes;        /* the GPU's memory, bytes */
    uint64_t host_ckpt_bytes;  /* host memory rank 0 needs to save a checkpoint, bytes */
    double step_time_s;        /* simulated step */
    double tokens_per_s;       /* global */
    double comm_share;         /* time any communication runs / step */
    double bubble_share;       /* time a GPU neither computes nor communicates / step */
    double exposed_dp_s;       /* DP/FSDP communication not hidden behind compute, seconds */
    double exposed_tp_s;       /* TP communication not hidden behind compute, seconds */
    double host_issue_s;       /* the busiest host thread's time to issue the step, seconds (the
                                  evaluator's report; 0 where it does not model the host) */
} gs_diagnose_measure;

#define GS_DIAGNOSE_TEXT_BYTES 256
#define GS_DIAGNOSE_MAX_FIXES 2
#define GS_DIAGNOSE_MAX_ROWS 16

/* One fix and its simulated effect (with the fix - without it). */
typedef struct gs_diagnose_fix {
    char fix[GS_DIAGNOSE_TEXT_BYTES]; /* what is changed: "wrap: layer", "recompute: full" */
    int simulated;                    /* 1: the fixed copy was measured; 0: see note */
    int counterfactual;               /* 1: the scenario has the fix already; the effect is the
                                         scenario against a copy without it (named in note) */
    char note[GS_DIAGNOSE_TEXT_BYTES];/* why it was not simulated, or a caveat ("" when none) */
    gs_diagnose_measure after;        /* with the fix; valid when simulated */
    int64_t peak_bytes_delta;         /* bytes per rank */
    double step_time_s_delta;         /* seconds */
    double tokens_per_s_delta;        /* global tokens/s */
    int64_t host_bytes_delta;         /* rank 0's checkpoint host memory, bytes */
} gs_diagnose_fix;

typedef struct gs_diagnose_row {
    const char *id;        /* "oom-at-start", ... (static) */
    const char *symptom;   /* the table's symptom (static) */
    const char *cause;     /* the table's cause (static) */
    const char *check;     /* the quantity checked and its threshold, in words (static) */
    const char *advice;    /* the table's fix, in words (static) */
    gs_diagnose_verdict applies;
    double measured;       /* the checked quantity, in `unit` */
    double threshold;      /* the value at which the symptom applies, in `unit` */
    const char *unit;      /* "bytes", "fraction", "ranks", "" (static) */
    char detail[GS_DIAGNOSE_TEXT_BYTES * 2]; /* the numbers, for people */
    gs_diagnose_fix fixes[GS_DIAGNOSE_MAX_FIXES];
    size_t nfixes;
} gs_diagnose_row;

typedef struct gs_diagnosis {
    gs_diagnose_measure base;   /* the scenario as given */
    uint64_t params;            /* model parameters */
    uint64_t unit_params;       /* largest FSDP unit on the peak rank's stage (its TP slice) */
    uint64_t unit_bytes;        /* ... in the working precision, bytes: what one all-gather holds */
    uint64_t ckpt_full_bytes;   /* rank 0 host bytes to save a FULL_STATE_DICT (12 B x params) */
    uint64_t ckpt_sharded_bytes;/* rank 0 host bytes to save its SHARDED_STATE_DICT shard */
    int problems;               /* rows whose verdict is YES */
    gs_diagnose_row rows[GS_DIAGNOSE_MAX_ROWS];
    size_t nrows;               /* in the table's order */
} gs_diagnosis;

/* Walks every row for s (loaded, mesh not needed: TP groups crossing nodes are allowed here so
 * that the cross-node TP row can be diagnosed). Errors: the scenario's own mesh or ledger
 * failing, or the evaluator failing on it. A fix whose copy fails the mesh checks is reported
 * in the row (simulated = 0, note = the first line of the error), not as an error. */
gs_status gs_diagnose_run(const gs_scenario *s, const gs_diagnose_opts *o, gs_diagnosis *out, gs_error *err);

const char *gs_diagnose_verdict_name(gs_diagnose_verdict v); /* "no", "at risk", "yes", "n/a" */

/* The rule table, for help text and tests: number of rows and the id of row i. */
size_t gs_diagnose_rule_count(void);
const char *gs_diagnose_rule_id(size_t i);

#endif
