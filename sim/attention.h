/* Attention as its own kernel class: the time of an attention-core event (GS_OP_ATTN) under the
 * scenario's attention kernel (FlashAttention 1/2/3, cuDNN fused attention, Triton, xformers, or
 * unfused batched GEMMs with the scores through HBM), by GPU architecture, head dim, sequence
 * length and the causal mask.
 *
 * Ownership: gs_attn_model is a plain value filled by gs_attn_model_init. */
#ifndef GS_SIM_ATTENTION_H
#define GS_SIM_ATTENTION_H

#include <stdint.h>

#include "engine/framework.h"
#include "engine/hardware.h"
#include "engine/schedule.h"

typedef struct gs_attn_model {
    gs_attn_impl impl;     /* resolved (never AUTO or SDPA) */
    double fwd_eff;        /* fraction of the dense peak the forward kernel reaches at the
                              reference shape (head dim 128, long non-causal sequence) */
    double bwd_eff;        /* the same for the backward, with FLOPs counted as 2.5 x forward */
    double ref_seq;        /* sequence length (tokens) of the measurement behind fwd_eff */
    double tile;           /* per-tile overhead in keys: efficiency grows as s / (s + tile) */
    double exp_cost;       /* tensor-core FLOPs one exponential costs on this architecture:
                              tensor FLOP per clock per SM / 16 MUFU ex2 per clock per SM */
    int overlapped;        /* 1: the kernel hides the softmax under the GEMMs (FA3, cuDNN) */
    int known;             /* 1: a measured efficiency exists for (impl, architecture) */
} gs_attn_model;

/* Fills m for the kernel `impl` (resolved: gs_attention_resolve) on GPU g. A kernel that does
 * not run on the architecture (FlashAttention on Volta, FlashAttention-3 before Hopper) falls
 * back to the nearest that does, as the libraries do (FA3 -> FA2 on Ampere; FlashAttention on
 * Volta -> unfused). */
void gs_attn_model_init(gs_attn_model *m, gs_attn_impl impl, const gs_gpu *g);

/* Efficiency (fraction of peak) of a fused attention kernel for head dim hd and sequence s,
 * causal, forward (bwd 0) or backward; 0 for the unfused path. */
double gs_attn_efficiency(const gs_attn_model *m, double hd, double s, int bwd);

/* Seconds of one attention-core event on a GPU of `peak_flops` (the precision's dense peak) for
 * a fused kernel: the kernel's own FLOPs (half the schedule's s^2 count under the causal mask,
 * plus the diagonal blocks; the backward 2.5 x the forward's, as FlashAttention's recompute
 * does) at gs_attn_efficiency. Returns -1 for the unfused path (the caller times its GEMMs and
 * score passes). */
double gs_attn_fused_time(const gs_attn_model *m, const gs_event *e, double peak_flops);

#endif
