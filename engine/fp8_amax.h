/* FP8 delayed scaling's amax reductions (Transformer Engine's DelayedScaling, the recipe
 * Megatron-LM's --fp8-recipe delayed selects): which scenarios have them, and the bytes of one.
 *
 * Each FP8 GEMM's casts record their tensors' amaxes; when a model chunk's decoder layers end,
 * fp8_autocast's exit concatenates the amaxes the chunk's modules recorded, all-reduces them with
 * MAX over the amax reduction group, and every rank updates its scales from the reduced history;
 * the backward does the same when the first FP8 module's backward ends
 * (transformer_engine/pytorch/quantization.py, FP8GlobalStateManager.reduce_and_update_fp8_tensors:
 * torch.distributed.all_reduce with async_op=False, so the compute stream waits for it). The group
 * is the pipeline stage's ranks (Megatron-Core's parallel_state.get_amax_reduction_group with
 * context parallelism: DP x CP x TP, expert parallelism within them): GS_GROUP_STAGE, role
 * GS_ROLE_FP8_AMAX (engine/build_pass.c emits them; engine/ledger_traffic.c counts their bytes).
 * A recomputed forward reuses the scales its forward saved and reduces nothing.
 *
 * Ownership: pure functions of borrowed scenarios and meshes. */
#ifndef GS_FP8_AMAX_H
#define GS_FP8_AMAX_H

#include <stdint.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/schedule.h"

/* 1 when s's FP8 recipe reduces amaxes: precision fp8 with delayed scaling (after
 * gs_fp8_resolve under s's framework). */
int gs_fp8_amax_reduced(const gs_scenario *s);

/* Bytes of one amax all-reduce of the model chunk holding stage-local layers [bot, top] of
 * pipeline stage `stage` (v model chunks per stage), in `phase` (GS_PHASE_FWD or GS_PHASE_BWD): one
 * fp32 amax per FP8 tensor, three per GEMM forward (input, weight, output) and two backward
 * (output gradient, input gradient) (transformer_engine/pytorch/module/base.py: num_fp8_tensors =
 * num_gemms x 3 forward, x 2 backward). A layer's GEMMs as Megatron-Core's Transformer Engine
 * layer spec builds them: QKV and the output projection (latent attention: q_a when
 * q_lora_rank > 0, q_b or q, kv_a, kv_b and the output projection); the dense MLP's fc1 and fc2,
 * or a MoE block's grouped fc1 and fc2 of one GEMM per local expert (GroupedLinear's num_gemms)
 * and the shared experts' fc1 and fc2. The router stays in the working precision. */
uint64_t gs_fp8_amax_bytes(const gs_scenario *s, const gs_mesh *mesh, uint64_t v, uint64_t stage, int64_t bot,
                           int64_t top, gs_phase phase);

#endif
