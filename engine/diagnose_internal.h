/* What engine/diagnose.c (the table, the checks, the runner) and engine/diagnose_fix.c (the
 * fixes) share: the configuration under diagnosis, the facts the checks read, and the fixes'
 * signature.
 *
 * Ownership: plain values; nothing here allocates. */
#ifndef GS_DIAGNOSE_INTERNAL_H
#define GS_DIAGNOSE_INTERNAL_H

#include <stdint.h>

#include "engine/diagnose.h"
#include "engine/mesh.h"

#define TXT GS_DIAGNOSE_TEXT_BYTES
#define GATHER_RISK_DIV 4 /* oom-at-start: at risk above GPU memory / 4 (the wrap fix names TP too) */

/* A configuration under diagnosis: the scenario and how it writes checkpoints. */
typedef struct dcase {
    gs_scenario s;
    gs_state_dict state_dict;
} dcase;

/* What the checks read about the scenario as given (ledger quantities of the peak rank class,
 * mesh facts, and the measure). */
typedef struct facts {
    gs_diagnose_measure m;
    dcase c;
    gs_mesh mesh;
    uint64_t host_bytes;     /* host memory per node, bytes */
    uint64_t params;
    uint64_t states;         /* params + master + m + v + grads held between steps, peak rank, bytes */
    uint64_t gather;         /* FSDP gathered units + unsharded grads at the peak rank, bytes */
    uint64_t act;            /* saved activations, this and in-flight micro-batches, bytes */
    uint64_t unit_params;    /* largest FSDP unit on the peak rank's stage (its TP slice), params */
    uint64_t wb;             /* bytes per working element */
    uint64_t per_rank_state; /* max over ranks, bytes */
    uint64_t min_gpus;       /* states total / GPU memory, rounded up */
    uint64_t peak_stage;
    char peak_where[96];
    uint64_t microbatches;
    int dp_cross;            /* a DP group spans nodes */
    uint64_t dp_local;       /* DP ranks of rank 0's group on its node */
    uint64_t tp_nodes;       /* nodes spanned by a TP group that crosses nodes (1: none does) */
    uint64_t cp_nodes;       /* nodes spanned by rank 0's CP group (1: one node, or no CP) */
    uint64_t cp_local;       /* its ranks on rank 0's node */
    uint64_t host_offload;   /* rank 0's offloaded states, bytes */
    uint64_t ckpt_full;      /* rank 0 host bytes for FULL_STATE_DICT (model + Adam state) */
    uint64_t ckpt_model;     /* of which the model in fp32, bytes */
    uint64_t ckpt_sharded;   /* rank 0 host bytes for SHARDED_STATE_DICT */
} facts;

typedef void (*check_fn)(const facts *f, gs_diagnose_row *row);

typedef enum fix_result {
    FIX_NONE,    /* the fix does not apply here; why says why */
    FIX_APPLIED, /* the copy has the fix; label says what changed */
    FIX_ALREADY  /* the scenario has the fix already; the copy is the scenario without it, and why
                    names what it was set back to */
} fix_result;
/* Edits the copy c of the scenario for one fix. */
typedef fix_result (*fix_fn)(const facts *f, dcase *c, char *label, char *why);

typedef struct rule {
    const char *id;
    const char *symptom;
    const char *cause;
    const char *check;
    const char *advice;
    const char *unit;
    check_fn check_fn;
    fix_fn fix[GS_DIAGNOSE_MAX_FIXES];
} rule;

/* Formats into a TXT-byte label or note. */
void gs__diag_say(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The fixes (engine/diagnose_fix.c), each named for what it sets. */
fix_result gs__fix_wrap_layer(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_recompute_full(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_micro_half(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_micro_double(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_hybrid_shard(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_interleaved(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_sharded_state_dict(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_tp_in_node(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_tp_comm_overlap(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_overlap_param_gather(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_fused_loss(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_no_offload(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_full_shard(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_fewer_issues(const facts *f, dcase *c, char *label, char *why);
fix_result gs__fix_hierarchical_cp(const facts *f, dcase *c, char *label, char *why);

#endif
