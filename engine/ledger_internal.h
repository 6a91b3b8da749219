/* The memory and traffic ledger's files share this: engine/ledger.c (the ledger, its rows and
 * explain lines, and the conventions they all follow), engine/ledger_states.c (the strategy's
 * treatment of parameters and gradients, the resident states), engine/ledger_act.c
 * (activations), engine/ledger_peak.c (the memory moments of every pass and the peak) and
 * engine/ledger_traffic.c (bytes sent per step by DP, TP and PP).
 *
 * Ownership: a stage_build lives on ledger_create's stack for one pipeline stage; it borrows the
 * scenario, the mesh, the checked-arithmetic context and the row it fills, and owns its
 * partition until build_stage frees it. */
#ifndef GS_LEDGER_INTERNAL_H
#define GS_LEDGER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/ledger.h"
#include "engine/partition.h"

/* ---- checked arithmetic context: the first overflow is remembered with what was computed --- */

typedef struct calc {
    int overflow;
    const char *what; /* quantity that overflowed */
    int explain;      /* 1: write the explain lines and the peak's description; 0: numbers only */
} calc;

/* a * b, or UINT64_MAX (the first overflow noted in c, with `what`) when it does not fit. */
static inline uint64_t mul(calc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { /* as gs_mul_u64, inlined: the peak loop calls it per layer */
        if (!c->overflow) {
            c->overflow = 1;
            c->what = what;
        }
        return UINT64_MAX;
    }
    return r;
}

/* a + b, or UINT64_MAX (the overflow noted in c) when it does not fit. */
static inline uint64_t add(calc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) { /* as gs_add_u64, inlined */
        if (!c->overflow) {
            c->overflow = 1;
            c->what = what;
        }
        return UINT64_MAX;
    }
    return r;
}

static inline uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- one rank class (pipeline stage) ---- */

/* What building one stage's ledger row works on: the scenario, the stage and its first rank, the
 * partition, shard plan and activation sizes, the unit sums, the resident states' bytes (after
 * CPU offload), and the row it fills. */
typedef struct stage_build {
    const gs_scenario *s;
    const gs_mesh *mesh;
    uint64_t stage, mb, rank, tp, dp, pp;
    gs_partition part;
    gs_shard_plan plan;
    gs_act_sizes act;
    uint64_t shard, largest, root, nonroot; /* elements: the padded shards' sum, the largest unit, root, rest */
    uint64_t mem_params, mem_master, mem_m, mem_v, mem_g, mem_hold, ws; /* bytes on the device */
    uint64_t dp_bytes, ar_net; /* traffic: DP collectives (not HSDP's cross-node part), HSDP's */
    gs_ledger_rank *r;
    calc *c;
} stage_build;

/* Appends an explain line to r (nothing when c->explain is 0: the planner reads only the
 * numbers) (engine/ledger.c). */
void gs__ledger_line_add(const calc *c, gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* A context-parallel rank's K and V, KV = 2 T ceil(kv / tp) hd e, and Q = T (heads / tp) hd e
 * bytes per block and micro-batch of b sequences, T = b s / cp tokens (engine/ledger_act.c; the
 * exchange's buffers and its traffic are counted in them). */
void gs__ledger_cp_qkv(const gs_model *m, const gs_strategy *st, uint64_t b, uint64_t tp, uint64_t cp, calc *c,
                       uint64_t *kv, uint64_t *q);

/* The states resident for the whole step and their explain lines; CPU offload moves some to the
 * host (engine/ledger_states.c). */
void gs__ledger_stage_states(stage_build *b);
/* The activation sizes' explain lines (engine/ledger_act.c). */
void gs__ledger_stage_act_lines(const stage_build *b);
/* The peak: every pass's memory moments in pipeline order, the largest with where it happens,
 * and the lines explaining it (engine/ledger_peak.c). */
gs_status gs__ledger_stage_peak(stage_build *b, gs_error *err);
/* Bytes sent per step: data-parallel collectives (b->dp_bytes, b->ar_net), TP collectives, PP
 * sends and the row's total, each by link class (engine/ledger_traffic.c; in this order). */
gs_status gs__ledger_stage_dp_traffic(stage_build *b, gs_error *err);
void gs__ledger_stage_tp_traffic(stage_build *b);
void gs__ledger_stage_pp_traffic(stage_build *b);
void gs__ledger_stage_cp_traffic(stage_build *b);
/* EP traffic (grid.ep > 1): the MoE blocks' dispatch and combine all-to-alls. */
void gs__ledger_stage_ep_traffic(stage_build *b);
/* FP8 delayed scaling's amax all-reduces (engine/fp8_amax.h): one per micro-batch and model chunk
 * each way. */
void gs__ledger_stage_fp8_traffic(stage_build *b);

#endif
