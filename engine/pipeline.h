/* The order in which one pipeline stage runs its forward and backward passes over micro-batches
 * (and model chunks, for interleaved 1F1B): GPipe, 1F1B (PipeDream-Flush) and Megatron's
 * interleaved 1F1B. Both the schedule builders and the ledger's memory moments walk this order.
 *
 * Ownership: gs_pipe_order owns its op array (init by gs_pipe_order_build, free with
 * gs_pipe_order_fini). */
#ifndef GS_PIPELINE_H
#define GS_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/mesh.h"
#include "engine/status.h"
#include "engine/strategy.h"

typedef struct gs_pipe_op {
    uint32_t mb;      /* micro-batch */
    uint16_t chunk;   /* model chunk on this stage (0 .. v-1) */
    uint8_t backward; /* 0: forward pass, 1: backward pass */
    uint8_t pad_;
} gs_pipe_op;

typedef struct gs_pipe_order {
    gs_pipe_op *ops;  /* 2 x m x v ops, in issue order */
    size_t nops;
    uint64_t warmup;  /* forward passes before the first backward */
} gs_pipe_order;

/* pp == 1 gives F0 B0 F1 B1 ... (gradient accumulation). v = virtual stages (1 unless
 * interleaved). Interleaved requires m % pp == 0 (checked by the scenario). combined
 * (strategy.ep_overlap, Megatron-Core's combined 1F1B): one more warm-up forward, so every
 * steady-state forward is followed by a backward of another micro-batch, the pair run as one
 * combined step; pp == 1 gives F0 F1 B0 F2 B1 ... B(m-1). */
gs_status gs_pipe_order_build(gs_pipeline kind, uint64_t pp, uint64_t stage, uint64_t m, uint64_t v, int combined,
                              gs_pipe_order *out, gs_error *err);
void gs_pipe_order_fini(gs_pipe_order *o);

/* The stage-local layers of model chunk `chunk` (of v on `stage`): chunk c of stage s holds the
 * layers of virtual stage c * pp + s. Each stage's layers (gs_mesh_stage_layers, uneven first /
 * last stages included) split into v equal chunks; with the embedding or loss accounted in the
 * split (gs_mesh_set_split_accounting) every chunk holds (layers + 1 (+ 1)) / (pp v) but chunk 0
 * of stage 0 one fewer (the embedding's place) and the last chunk of the last stage one fewer
 * (the loss's). v <= 1: one chunk, the stage's layers. */
uint64_t gs_pipe_chunk_layers(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t chunk);
/* The stage-local index of the first layer of `chunk`. */
uint64_t gs_pipe_chunk_begin(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t chunk);
/* The chunk holding stage-local layer `local`. */
uint64_t gs_pipe_chunk_of(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t local);

/* Global layer index of stage-local layer `local` (0 .. stage_layers-1) in chunk terms. For
 * v == 1 this is first_layer + local. */
uint64_t gs_pipe_global_layer(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t local);
/* The chunk whose backward pass reduces the FSDP root unit when the root holds no layer: the
 * embedding's (chunk 0 of stage 0), the head's (the last chunk of the last stage), else chunk 0.
 * gs_partition_root_chunk (engine/partition.h) covers roots that hold layers (wrap: model). */
uint64_t gs_pipe_root_chunk(uint64_t stage, uint64_t pp, uint64_t v);

#endif
