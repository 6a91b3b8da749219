/* Internal context shared by the schedule builders (engine/build*.c): one rank's partition, shard
 * plan, activation sizes, tensor ids and the event-appending helpers.
 *
 * Ownership: gs_bctx is created and destroyed by engine/build.c for one rank at a time; it
 * borrows the scenario, mesh and the rank's event list, and owns its id arrays. */
#ifndef GS_BUILD_INTERNAL_H
#define GS_BUILD_INTERNAL_H

#include <stdint.h>

#include "engine/ledger.h"
#include "engine/moe_route.h"
#include "engine/partition.h"
#include "engine/pipeline.h"
#include "engine/schedule.h"

/* a / b rounded up (b > 0): the builders' shards and slices. */
static inline uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

#define GS_NO_ID UINT32_MAX
#define GS_BUILD_MAX_LIST 256
/* Vocab-parallel cross-entropy: bytes per token of one TP rank's statistics (max, sum exp,
 * target logit; fp32). */
#define GS_XENT_STAT_BYTES 12

typedef struct gs_bctx {
    const gs_scenario *s;
    const gs_mesh *mesh;
    gs_rank_events *r;
    gs_error *err;
    uint64_t rank, stage, pp, tp, v, mb_count;
    int last;
    gs_partition part;
    gs_shard_plan plan;
    gs_act_sizes act;
    size_t root;                 /* index of the root unit, or SIZE_MAX */
    /* group index and size of this rank per group kind */
    uint64_t group[GS_GROUP_KIND_COUNT];
    uint64_t group_size[GS_GROUP_KIND_COUNT];
    gs_group_kind dp_group;      /* DP or DP_INTRA (HSDP) for gathers and reduce-scatters */
    gs_moe_flex_route moe_route; /* moe_dispatcher flex: where this rank's tokens go (moe_route.h) */
    /* resident tensors */
    uint32_t *param_t;           /* per unit: parameter storage (shard or full) */
    uint32_t *grad_t;            /* per unit: gradient storage (shard or full) */
    uint32_t *hold_t;            /* per unit: full gradient accumulated under no_sync */
    uint32_t master_t, adam_t, ws_t;
    uint32_t scratch_t[GS_SCRATCH_COUNT]; /* tp > 1: the TP exchanges' buffers (GS_NO_ID: none) */
    /* transient per unit */
    uint32_t *gathered_t;        /* live gathered copy or GS_NO_ID */
    uint32_t *gathered_ev;       /* event that gathered it (dependency for computes); with
                                    gather_copies, its copy-out once a layer has used it */
    uint8_t *copy_pending;       /* the live gathered copy awaits its copy-out (gather_copies) */
    int gather_copies;           /* FSDP2, ZeRO-3: gathered units copied out (gs_framework_gather_copies) */
    int grad_copies;             /* FSDP2: gradients copied into the reduce-scatters' input */
    uint32_t *ugrad_t;           /* live transient full gradient or GS_NO_ID */
    uint32_t *reduce_ev;         /* last reduction of a unit's resident gradient (DDP reducing after
                                    every micro-batch): the next backward writing it waits for it */
    /* activations in flight, indexed [(mb % window) * layers + local layer] */
    uint64_t window;
    uint32_t *stash_t;
    uint32_t *emb_mask_t, *head_act_t; /* per mb % window */
    uint32_t *xent_ev;           /* per mb % window: the head forward's cross-entropy all-gather (TP) */
    uint32_t root_grad_t;
    uint32_t last_compute;       /* last compute event appended (data dependency chain) */
    uint32_t compute_wait;       /* an event the next compute event waits for (FP8 delayed scaling's
                                    amax reduction: the compute stream waits for it); GS_NO_ID: none */
    uint32_t last_dp;            /* last DP-stream event */
    uint32_t first_layer_global;
    int chunk_buckets;           /* bucket_stages first on a bucketed sharding with N > 1: model chunks
                                    other than chunk 0 of stage 0 reduce and gather as one bucket */
    int param_gather_fwd;        /* ZeRO-1/2 overlap_param_gather: gathers issued by the forward */
    int param_gathers_issued;    /* ... how many so far */
} gs_bctx;

/* Appending an event: the builder fills a gs_event and up to GS_BUILD_MAX_LIST ids per list. */
typedef struct gs_evb {
    gs_event e;
    uint32_t list[GS_LINK_LISTS][GS_BUILD_MAX_LIST];
} gs_evb;

void gs__evb_init(gs_evb *b, gs_event_kind kind, gs_stream stream, gs_phase phase, int32_t layer, uint32_t mb);
void gs__evb_add(gs_evb *b, int which, uint32_t id); /* ignores GS_NO_ID */
gs_status gs__evb_emit(gs_bctx *x, gs_evb *b, uint32_t *id);
/* Appends a copy of tensor t (its kind, bytes, layer, mb, unit, resident and host flags). */
gs_status gs__tensor(gs_bctx *x, const gs_tensor *t, uint32_t *id);
/* Global layer index of a stage-local layer. */
int32_t gs__global_layer(const gs_bctx *x, int64_t local);

/* engine/build_dp.c: units and data-parallel collectives. */
int gs__is_root(const gs_bctx *x, size_t u);
int gs__covers(const gs_unit *u, int64_t local_layer);
int32_t gs__unit_layer(const gs_bctx *x, size_t u);
/* All-gathers unit u (allocating its gathered copy; CPU offload copies the shard in first). */
gs_status gs__gather_unit(gs_bctx *x, size_t u, gs_phase phase, uint32_t mb, uint32_t dep);
/* Gathers every unit covering stage-local layer l that is not live. */
gs_status gs__gather_covering(gs_bctx *x, int64_t l, gs_phase phase, uint32_t mb, uint32_t dep);
/* Reduces unit u's gradient after its backward (dep) and frees the transient gradient. */
gs_status gs__reduce_unit(gs_bctx *x, size_t u, uint32_t mb, uint32_t dep);
/* FSDP2, ZeRO-3: unit u's copy-out on the compute stream (GS_ROLE_UNIT_COPY_OUT), when its gathered copy
 * awaits one; later computes then depend on it. A no-op otherwise. */
gs_status gs__copy_out_unit(gs_bctx *x, size_t u, gs_phase phase, uint32_t mb);
/* The model chunk whose backward reduces unit u (gs_partition_unit_chunk on this rank's stage). */
uint64_t gs__unit_chunk(const gs_bctx *x, size_t u);
/* Whether model chunk `chunk` of this rank reduces and gathers as one bucket (bucket_stages first). */
int gs__chunk_one_bucket(const gs_bctx *x, uint64_t chunk);
/* The units model chunk `chunk` reduces, as one bucket (the expert units when expert, else the
 * others: expert parallelism reduces them over their own group): their parameters, the lowest-index one
 * (its bottom layer's, or the root; SIZE_MAX for none) and how many; GS_ERR_UNSUPPORTED when more
 * than one event's lists hold. */
gs_status gs__chunk_bucket(const gs_bctx *x, uint64_t chunk, int expert, uint64_t *params, size_t *first,
                           size_t *count);
/* bucket_stages first: one reduction of every unit model chunk `chunk` reduces (the root's with its
 * chunk), after dep, its bytes the chunk's whole gradient padded to the DP group. */
gs_status gs__reduce_chunk(gs_bctx *x, uint64_t chunk, uint32_t mb, uint32_t dep);

/* engine/build_pass.c: the pipeline passes of (mb, chunk), and what engine/build.c shares with
 * them: the rank of the next (or previous) pipeline stage, and ZeRO-1/2's all-gather of a unit's
 * (or a one-bucket model chunk's) updated parameters after dep. */
gs_status gs__forward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk);
gs_status gs__backward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk);
/* strategy.ep_overlap: forward pass (fmb, fchunk) and backward pass (bmb, bchunk) as one combined
 * step, their layers paired (the forward's first with the backward's last) and each pair's
 * pieces interleaved (engine/build_pass.c); the remaining layers after, backward's first. */
gs_status gs__combined_pass(gs_bctx *x, uint32_t fmb, uint16_t fchunk, uint32_t bmb, uint16_t bchunk);
uint64_t gs__peer_rank(const gs_bctx *x, int next);
gs_status gs__param_allgather(gs_bctx *x, size_t u, uint32_t dep, uint32_t *ev);
gs_status gs__param_allgather_chunk(gs_bctx *x, uint64_t chunk, uint32_t dep);

/* engine/build_layer.c: compute ops of one layer, the embedding and the head, with their TP
 * collectives. `first_alloc` / `last_free` are tensors allocated by the first event / freed by
 * the last one; `deps` are data dependencies of the first event. */
#define GS_IO_MAX 32
typedef struct gs_layer_io {
    uint32_t alloc[GS_IO_MAX];
    size_t nalloc;
    uint32_t free[GS_IO_MAX];
    size_t nfree;
    uint32_t deps[GS_BUILD_MAX_LIST];
    size_t ndeps;
    uint32_t reads[GS_IO_MAX];
    size_t nreads;
} gs_layer_io;

/* The scratch tensors of a rank with tp > 1 (engine/build_layer.c): the blocks', the embedding's
 * on the first stage, the head's on the last. */
gs_status gs__scratch_tensors(gs_bctx *x);
gs_status gs__layer_forward(gs_bctx *x, int64_t local, uint32_t mb, gs_phase phase, const gs_layer_io *io,
                            uint32_t *last_ev);
gs_status gs__layer_backward(gs_bctx *x, int64_t local, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev);
gs_status gs__embed_forward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev);
gs_status gs__embed_backward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev);
gs_status gs__head_forward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev);
gs_status gs__head_backward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev);

/* The pieces of a block that Megatron-Core's combined 1F1B schedule (strategy.ep_overlap,
 * megatron/core/models/common/model_chunk_schedule_plan.py TransformerLayerSchedulePlan) runs
 * apart, so that one micro-batch's token exchanges run under another's compute: PRE the
 * attention half with the router (its "pre_dispatch_computation"), DISPATCH and COMBINE the
 * exchanges, MLP the experts, POST what follows the combine on the compute stream. */
typedef enum gs_block_seg {
    GS_SEG_PRE,
    GS_SEG_DISPATCH,
    GS_SEG_MLP,
    GS_SEG_COMBINE,
    GS_SEG_POST,
    GS_SEG_COUNT
} gs_block_seg;

/* Whether global layer `layer` is a mixture-of-experts block (gs_model_moe_block). */
static inline int gs__moe_block(const gs_bctx *x, int32_t layer)
{
    return x->s->model.moe.experts && layer >= 0 && gs_model_moe_block(&x->s->model, (uint64_t)layer);
}

/* engine/build_recompute.c: the modules of `modules` (selective recompute's gs_recompute_module
 * bits) that global block `layer` has ops for (a dense block no MoE modules, a MoE block no dense
 * MLP): 0 when its recompute pass would be empty. */
uint32_t gs__recompute_modules_of_block(const gs_bctx *x, uint32_t modules, int32_t layer);

#endif
