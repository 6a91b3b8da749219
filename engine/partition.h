/* The FSDP units of one pipeline stage's parameters on one TP rank: which parameters are
 * flattened, gathered and reduced together, under the wrap policy. Both the ledger and the
 * schedule builders start from this partition (it is the input they share); each then derives
 * bytes and memory on its own.
 *
 * Ownership: gs_partition is caller storage (init by gs_partition_stage, free with
 * gs_partition_fini); it owns its unit array, its per-layer index and its block_params. */
#ifndef GS_PARTITION_H
#define GS_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

typedef struct gs_unit {
    uint64_t params;     /* elements of this TP rank's slice of the unit (unsharded) */
    int32_t layer_begin; /* first stage-local layer (0 = the stage's first) it covers; root: GS_PART_ROOT */
    int32_t layer_end;   /* last stage-local layer it covers (inclusive) */
    int expert;          /* 1: a MoE block's routed experts on this EP rank (ep > 1 or etp < tp,
                            gs_mesh_expert_split), whose gradients reduce and states shard over the
                            expert-data-parallel group */
} gs_unit;

#define GS_PART_ROOT (-100) /* layer_begin of the root unit (embedding, head, stray params) */

typedef struct gs_partition {
    gs_unit *units;       /* forward order; the root unit (if any params remain) is last */
    size_t nunits;
    size_t cap;
    int has_root;         /* units[nunits-1] is the root */
    uint64_t params;      /* all parameters of this rank's stage slice */
    uint64_t layer_params;/* one transformer block's slice (a MoE model's: a MoE block's) */
    uint64_t routed_params; /* ep > 1 or etp < tp: a MoE block's routed experts on this rank (its expert
                             * unit under wrap layer), else 0 */
    uint64_t *block_params; /* a MoE model with dense blocks: each stage-local layer's
                             * block slice; NULL when every block is layer_params */
    uint64_t emb_params;  /* embedding slice (stage 0), else 0 */
    uint64_t head_params; /* final norm + LM head slice (last stage), else 0 */
    uint64_t word_params; /* the word embedding's TP slice, ceil(vocab / tp) x hidden, on every
                           * stage (the size of the tied embedding's gradient exchange) */
    uint64_t first_layer; /* global index of the stage's first layer */
    uint64_t layers;      /* layers on this stage */
    int chunk0_fewer;     /* 1: model chunk 0 holds one layer fewer than the others (the
                           * embedding accounted in the split, stage 0; gs_pipe_chunk_layers) */
    int last_chunk_fewer; /* 1: the last model chunk holds one fewer (the loss, last stage) */
    uint16_t nchunk_end;  /* a custom pipeline layout (gs_mesh.layout): the stage's chunks, each
                           * ending (exclusive, stage-local) at chunk_end[c]; 0 otherwise */
    uint16_t chunk_end[GS_LAYOUT_MAX];
    /* Index by stage-local layer, built by gs_partition_stage (NULL when it is not): the non-root
     * units covering layer l are cover_units[cover_off[l] .. cover_off[l + 1]), ascending; their
     * parameters sum to cover_params[l]. */
    size_t *cover_off, *cover_units;
    uint64_t *cover_params;
} gs_partition;

/* Builds the partition of `stage` for the scenario's wrap policy:
 *  - layer: one unit per transformer block, plus the root (embedding / final norm / head);
 *  - model: one unit holding everything (it is the root);
 *  - min_params: PyTorch's size_based_auto_wrap_policy bottom-up over the module tree
 *    (linears, attention, MLP, block, the list of blocks), the rest in the root.
 * Linears split Megatron-style across TP; KV heads fewer than tp are replicated. A MoE block
 * holds experts / ep routed experts (each split across TP) and the replicated router; with
 * ep > 1 (wrap layer) its routed experts are a unit of their own after the block's (expert = 1);
 * under min_params each expert, the list of experts, the shared experts and the MoE module are
 * modules too. Sizes that overflow fail with GS_ERR_OVERFLOW. */
gs_status gs_partition_stage(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, gs_partition *p,
                             gs_error *err);
void gs_partition_fini(gs_partition *p);

/* Sum of non-root units covering stage-local layer l (what must be gathered to compute it). */
uint64_t gs_partition_covering(const gs_partition *p, int64_t layer);
/* The non-root units covering stage-local layer l, ascending (*units; the count is returned). */
size_t gs_partition_units_covering(const gs_partition *p, int64_t layer, const size_t **units);
/* Sum of non-root units covering layer `next` but not layer `cur` (what a prefetch adds). */
uint64_t gs_partition_prefetch(const gs_partition *p, int64_t cur, int64_t next);
/* Stage-local layer l's block slice: layer_params, or a dense block's in a MoE model. */
uint64_t gs_partition_block_params(const gs_partition *p, int64_t layer);
/* Root unit's params (0 without a root). */
uint64_t gs_partition_root(const gs_partition *p);
/* Whether the root unit holds parameters of stage-local layer l (wrap: model; min_params' strays). */
int gs_partition_root_holds_layer(const gs_partition *p, int64_t layer);
/* The stage-local layers *bot .. *top of model chunk `chunk` of v (the split of
 * gs_pipe_chunk_begin; *top < *bot when the chunk holds none). */
void gs_partition_chunk_span(const gs_partition *p, uint64_t v, uint64_t chunk, int64_t *bot, int64_t *top);
/* Whether the backward pass of model chunk `chunk` (of v on this stage of pp) writes the root
 * unit's gradient: it runs the embedding's or the head's backward, or a layer the root holds. */
int gs_partition_root_written_by(const gs_partition *p, uint64_t stage, uint64_t pp, uint64_t v, uint64_t chunk);
/* The chunk whose backward pass reduces the root unit's gradient: the lowest chunk writing it. A
 * micro-batch's backward passes run from its last chunk down to chunk 0, so that one comes last
 * (gs_pipe_root_chunk when the root holds no layer). */
uint64_t gs_partition_root_chunk(const gs_partition *p, uint64_t stage, uint64_t pp, uint64_t v);

/* The model chunk (of v on this stage of pp) whose backward pass reduces unit u: a layer unit's is
 * the chunk of its first layer (its backward comes last), the root's gs_partition_root_chunk. */
uint64_t gs_partition_unit_chunk(const gs_partition *p, size_t u, uint64_t stage, uint64_t pp, uint64_t v);

/* DDP / ZeRO gradient buckets: a unit of u elements of wb bytes is reduced in
 * ceil(u x wb / bucket_bytes) buckets of ceil(u / n) elements (the last one smaller). */
uint64_t gs_bucket_count(uint64_t unit_params, uint64_t wb, uint64_t bucket_bytes);
uint64_t gs_bucket_params(uint64_t unit_params, uint64_t nbuckets, uint64_t i);

#endif
