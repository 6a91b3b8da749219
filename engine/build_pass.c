/* Schedule builder, the pipeline passes: a forward pass of (micro-batch, model chunk) receives its
 * input or embeds, gathers each layer's units (FSDP: every pass, or once per step; ZeRO's
 * overlapped gathers one unit ahead), runs the layers and the head, sends its output; a backward
 * pass runs the head's backward or receives the output gradient, then per layer from the top:
 * gathers, recompute, backward, backward_post's prefetch, the reductions of the units that end
 * there, then the embedding's backward, the root's reduction and the send of the input gradient.
 * Under FP8 delayed scaling each pass reduces its amaxes when its decoder layers end.
 * The order of the passes is engine/build.c's (engine/pipeline.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/build_internal.h"
#include "engine/build_ops.h"
#include "engine/fp8_amax.h"
#include "engine/roles.h"

uint64_t gs__peer_rank(const gs_bctx *x, int next)
{
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(x->mesh, x->rank, c);
    if (next)
        c[GS_DIM_PP] = (c[GS_DIM_PP] + 1) % x->pp;
    else
        c[GS_DIM_PP] = (c[GS_DIM_PP] + x->pp - 1) % x->pp;
    return gs_mesh_coords_rank(x->mesh, c);
}

static void io_reset(gs_layer_io *io)
{
    memset(io, 0, sizeof *io);
}

static void io_add(uint32_t *arr, size_t *n, size_t cap, uint32_t id)
{
    if (id != GS_NO_ID && *n < cap)
        arr[(*n)++] = id;
}

/* The stage-local layers of one model chunk and its ends: the embedding lives in chunk 0 of
 * stage 0, the head in the last chunk of the last stage; every other chunk receives from and
 * sends to a neighbour. */
typedef struct chunk_geo {
    int64_t bot, top;
    int has_emb, has_head;
} chunk_geo;

static void chunk_geometry(const gs_bctx *x, uint16_t chunk, chunk_geo *g)
{
    gs_partition_chunk_span(&x->part, x->v, chunk, &g->bot, &g->top);
    g->has_emb = x->stage == 0 && chunk == 0;
    g->has_head = x->last && (uint64_t)chunk + 1 == x->v;
}

/* ZeRO-1/2 with overlap_param_gather (Megatron's distributed optimizer): the previous step's
 * optimizer output is all-gathered while this step's forward runs. Megatron issues the gather of
 * the first bucket the forward touches in the optimizer's zero_grad (the step's start), and each
 * bucket's forward pre-hook waits for its gather and issues the next bucket's, so the rest run one
 * unit ahead of the forward: unit u's gather is issued when the forward reaches u's predecessor
 * (after `dep`, the event the forward is at; on a later pipeline stage that is after its first
 * receive), and u's forward waits for it. One step of this schedule is the steady state: the same
 * bytes as gathering after the optimizer, issued where Megatron issues them. */

/* bucket_stages first: a unit of a one-bucket model chunk is gathered with the whole chunk. Experts
 * held whole (an expert-data-parallel group of one) have nothing to gather: no event marks them
 * gathered, so asking for them must not gather their chunk's bucket again. */
static gs_status issue_gather(gs_bctx *x, size_t u, uint32_t dep)
{
    if (u == SIZE_MAX || x->gathered_ev[u] != GS_NO_ID || gs_shard_ranks(&x->plan, x->part.units[u].expert) <= 1)
        return GS_OK;
    if (x->param_gathers_issued++ == 0)
        dep = GS_NO_ID; /* the first: at the step's start */
    if (gs__chunk_one_bucket(x, gs__unit_chunk(x, u)))
        return gs__param_allgather_chunk(x, gs__unit_chunk(x, u), dep);
    return gs__param_allgather(x, u, dep, &x->gathered_ev[u]);
}

/* The gathers of the units holding local layer l (the root when no unit does), after dep. */
static gs_status layer_gathers(gs_bctx *x, int64_t l, uint32_t dep)
{
    gs_status rc = GS_OK;
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    for (size_t i = 0; i < ncov && rc == GS_OK; i++)
        rc = issue_gather(x, cov[i], dep);
    return rc == GS_OK && ncov == 0 ? issue_gather(x, x->root, dep) : rc;
}

/* The gathers the forward needs at local layer l and the next layer's (one ahead; past the
 * chunk's last layer: the root, for the head), after dep. Under bucket_stages first the next model
 * chunk's one bucket is the one ahead of this chunk's last bucket: issued at this chunk's last
 * layer, or at its first when this chunk is one bucket too (Megatron dispatches the next bucket's
 * all-gather from the pre-hook of the bucket the forward reaches). */
static gs_status forward_gathers(gs_bctx *x, uint16_t chunk, int64_t l, const chunk_geo *g, uint32_t dep)
{
    int64_t bot = g->bot, top = g->top;
    int has_head = g->has_head;
    gs_status rc = layer_gathers(x, l, dep);
    if (rc == GS_OK && (uint64_t)chunk + 1 < x->v && gs__chunk_one_bucket(x, (uint64_t)chunk + 1) &&
        l == (gs__chunk_one_bucket(x, chunk) ? bot : top)) {
        uint64_t params;
        size_t first, count;
        if ((rc = gs__chunk_bucket(x, (uint64_t)chunk + 1, 0, &params, &first, &count)) == GS_OK)
            rc = issue_gather(x, first, dep);
    }
    if (rc != GS_OK)
        return rc;
    return l < top ? layer_gathers(x, l + 1, dep) : has_head ? issue_gather(x, x->root, dep) : GS_OK;
}

/* One pipeline pass of (mb, chunk) while it is built: where it sits, its last event so far, the
 * stage boundaries' tensors, and (backward) when its gradients are reduced. */
typedef struct pass_state {
    uint32_t mb;
    uint16_t chunk;
    gs_phase phase;
    chunk_geo g;
    int has_prev, has_next; /* a stage before (receives the input), after (sends the output) */
    uint64_t w;             /* mb % window: the stash slot */
    uint32_t prev;          /* the pass's last event so far (GS_NO_ID: none) */
    uint32_t boundary_out;  /* forward: the outgoing activation */
    uint32_t gin, gout;     /* backward: the incoming and outgoing gradients */
    uint32_t end1, end2;    /* forward: the last two layers' last events (limit_all_gathers) */
    int sync;               /* backward: this pass reduces the units whose backward ends in it */
    int one_bucket;         /* backward: the chunk's units are reduced as one bucket */
    int root_grad_pending;  /* backward: the root's transient gradient waits for its first writer */
} pass_state;

static void pass_state_init(const gs_bctx *x, pass_state *ps, uint32_t mb, uint16_t chunk, gs_phase phase)
{
    memset(ps, 0, sizeof *ps);
    ps->mb = mb;
    ps->chunk = chunk;
    ps->phase = phase;
    chunk_geometry(x, chunk, &ps->g);
    ps->has_prev = !ps->g.has_emb;
    ps->has_next = !ps->g.has_head;
    ps->w = mb % x->window;
    ps->prev = ps->boundary_out = ps->gin = ps->gout = ps->end1 = ps->end2 = GS_NO_ID;
}

static uint32_t *stash_of(gs_bctx *x, const pass_state *ps, int64_t l)
{
    return &x->stash_t[ps->w * x->part.layers + (uint64_t)l];
}

/* A pipeline send of buf (freed by it, after the pass's last event) or a receive into buf
 * (allocated by it; it becomes the pass's last event), at global layer `layer`, to or from the
 * next stage (to_next) or the previous one. */
static gs_status p2p(gs_bctx *x, pass_state *ps, gs_event_kind kind, int32_t layer, int to_next, uint32_t buf)
{
    gs_evb b;
    int send = kind == GS_EV_SEND;
    gs__evb_init(&b, kind, GS_STREAM_PP, ps->phase, layer, ps->mb);
    b.e.role = send ? GS_ROLE_PP_SEND : GS_ROLE_PP_RECV;
    b.e.chunk = (uint8_t)ps->chunk;
    b.e.peer = gs__peer_rank(x, to_next);
    b.e.bytes = x->act.boundary;
    gs__evb_add(&b, GS_LINK_DEPS, send ? ps->prev : GS_NO_ID);
    gs__evb_add(&b, GS_LINK_ALLOCS, send ? GS_NO_ID : buf);
    gs__evb_add(&b, GS_LINK_FREES, send ? buf : GS_NO_ID);
    gs__evb_add(&b, send ? GS_LINK_READS : GS_LINK_WRITES, buf);
    uint32_t ev;
    gs_status rc = gs__evb_emit(x, &b, &ev);
    if (rc == GS_OK && !send)
        ps->prev = ev;
    return rc;
}

/* FP8 delayed scaling: the pass's amax all-reduce over the stage's ranks when its decoder layers
 * end (engine/fp8_amax.h), forward at its top layer, backward at its bottom one; it becomes the
 * pass's last event, and the next compute event in the rank's order waits for it (the compute
 * stream waits for the call, whichever pass its next kernel belongs to). */
static gs_status fp8_amax(gs_bctx *x, pass_state *ps)
{
    if (!gs_fp8_amax_reduced(x->s) || ps->g.top < ps->g.bot)
        return GS_OK;
    int fwd = ps->phase == GS_PHASE_FWD;
    gs_evb b;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_TP, ps->phase, gs__global_layer(x, fwd ? ps->g.top : ps->g.bot),
                 ps->mb);
    b.e.op = GS_COLL_ALLREDUCE;
    b.e.role = GS_ROLE_FP8_AMAX;
    b.e.group = GS_GROUP_STAGE;
    b.e.peer = x->group[GS_GROUP_STAGE];
    b.e.group_size = x->group_size[GS_GROUP_STAGE];
    b.e.chunk = (uint8_t)ps->chunk;
    b.e.bytes = gs_fp8_amax_bytes(x->s, x->mesh, x->v, x->stage, ps->g.bot, ps->g.top, ps->phase);
    gs__evb_add(&b, GS_LINK_DEPS, ps->prev);
    gs_status rc = gs__evb_emit(x, &b, &ps->prev);
    x->compute_wait = ps->prev; /* every later compute op, this pass's or the next one's */
    return rc;
}

/* A forward pass's start: the layers' stashes, then the receive of its input or the embedding. */
static gs_status forward_start(gs_bctx *x, pass_state *ps)
{
    gs_status rc;
    int64_t bot = ps->g.bot, top = ps->g.top;
    uint32_t mb = ps->mb;
    gs_layer_io io;
    for (int64_t l = bot; l <= top; l++)
        if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = gs_act_layer_stored(&x->act, l),
                                             .layer = gs__global_layer(x, l), .mb = mb},
                             stash_of(x, ps, l))) != GS_OK)
            return rc;
    if (ps->has_prev && (rc = p2p(x, ps, GS_EV_RECV, gs__global_layer(x, bot), 0, *stash_of(x, ps, bot))) != GS_OK)
        return rc;
    if (!ps->g.has_emb)
        return GS_OK;
    io_reset(&io);
    x->emb_mask_t[ps->w] = GS_NO_ID;
    if (x->act.emb_mask &&
        (rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = x->act.emb_mask, .layer = GS_LAYER_EMBED,
                                         .mb = mb},
                         &x->emb_mask_t[ps->w])) != GS_OK)
        return rc;
    io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->emb_mask_t[ps->w]);
    /* overlap_param_gather: the root's gather at the step's start, the first layer's next */
    if (x->param_gather_fwd &&
        ((rc = issue_gather(x, x->root, GS_NO_ID)) != GS_OK || (rc = layer_gathers(x, bot, GS_NO_ID)) != GS_OK))
        return rc;
    if ((rc = gs__copy_out_unit(x, x->root, GS_PHASE_FWD, mb)) != GS_OK)
        return rc;
    if (x->root != SIZE_MAX)
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
    return gs__embed_forward(x, mb, &io, &ps->prev);
}

/* FSDP2, ZeRO-3: the copy-outs of the units local layer l reads (the root's when it holds the layer)
 * whose gathered copies await one, before the layer's first event. */
static gs_status copy_outs(gs_bctx *x, int64_t l, gs_phase phase, uint32_t mb)
{
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    gs_status rc = GS_OK;
    for (size_t k = 0; k < ncov && rc == GS_OK; k++)
        rc = gs__copy_out_unit(x, cov[k], phase, mb);
    if (rc == GS_OK && x->root != SIZE_MAX && gs_partition_root_holds_layer(&x->part, l))
        rc = gs__copy_out_unit(x, x->root, phase, mb);
    return rc;
}

/* The start of one layer of a forward pass: its gathers (FSDP's; without forward_prefetch FSDP
 * still issues a unit's all-gather from its pre-forward hook, while the previous layer's kernels
 * run, and limit_all_gathers keeps at most two gathered units in flight, so the gather waits for
 * the layer before the previous one), ZeRO's overlapped gathers and copy-outs, and in *iop the io
 * of the layer's events (forward_layer emits them; a combined step piece by piece). */
static gs_status forward_layer_open(gs_bctx *x, pass_state *ps, int64_t l, gs_layer_io *iop)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    int64_t bot = ps->g.bot, top = ps->g.top;
    uint32_t mb = ps->mb;
    gs_layer_io io;
    if (pl->gather_per_pass || pl->gather_all) {
        uint32_t dep = pl->prefetch_fwd ? GS_NO_ID : x->s->strategy.limit_all_gathers ? ps->end2 : ps->end1;
        if ((rc = gs__gather_covering(x, l, GS_PHASE_FWD, mb, dep)) != GS_OK)
            return rc;
        if (pl->prefetch_fwd && l < top && (rc = gs__gather_covering(x, l + 1, GS_PHASE_FWD, mb, GS_NO_ID)) != GS_OK)
            return rc;
    }
    if (x->param_gather_fwd && (rc = forward_gathers(x, ps->chunk, l, &ps->g, ps->prev)) != GS_OK)
        return rc;
    if ((rc = copy_outs(x, l, GS_PHASE_FWD, mb)) != GS_OK)
        return rc;
    io_reset(&io);
    if (!(l == bot && ps->has_prev))
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, *stash_of(x, ps, l));
    if (l == top && ps->has_next) {
        if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_BOUNDARY, .bytes = x->act.boundary,
                                             .layer = gs__global_layer(x, l), .mb = mb},
                             &ps->boundary_out)) != GS_OK)
            return rc;
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, ps->boundary_out);
    }
    io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, ps->prev);
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    int gathered = 0;
    for (size_t k = 0; k < ncov; k++) {
        size_t u = cov[k];
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[u]);
        io_add(io.reads, &io.nreads, GS_IO_MAX, x->gathered_t[u]);
        if (pl->gather_per_pass && x->part.units[u].layer_end == l)
            io_add(io.free, &io.nfree, GS_IO_MAX, x->gathered_t[u]);
        gathered |= x->gathered_ev[u] != GS_NO_ID;
    }
    if (x->root != SIZE_MAX)
        io_add(io.reads, &io.nreads, GS_IO_MAX, pl->gather_root ? x->gathered_t[x->root] : x->param_t[x->root]);
    /* a layer held by the root unit (wrap: model) reads the root's gathered copy: wait for its
     * all-gather (otherwise implied by a layer unit's gather after it on the DP stream) */
    if (!gathered && x->root != SIZE_MAX) /* FSDP's root gather, or ZeRO's overlapped one */
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
    *iop = io;
    return GS_OK;
}

/* After layer l's forward events (the last in ps->prev): the limiter's window moves, the per-pass
 * gathers of the units that end at l are spent. */
static void forward_layer_close(gs_bctx *x, pass_state *ps, int64_t l)
{
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    ps->end2 = ps->end1;
    ps->end1 = ps->prev;
    if (x->plan.gather_per_pass)
        for (size_t k = 0; k < ncov; k++)
            if (x->part.units[cov[k]].layer_end == l)
                x->gathered_t[cov[k]] = GS_NO_ID, x->gathered_ev[cov[k]] = GS_NO_ID;
}

static gs_status forward_layer(gs_bctx *x, pass_state *ps, int64_t l)
{
    gs_layer_io io;
    gs_status rc = forward_layer_open(x, ps, l, &io);
    if (rc == GS_OK && (rc = gs__layer_forward(x, l, ps->mb, GS_PHASE_FWD, &io, &ps->prev)) == GS_OK)
        forward_layer_close(x, ps, l);
    return rc;
}

/* A forward pass's end, after its layers: FP8 delayed scaling's amax reduction (fp8_autocast's
 * exit after the decoder layers), the head, the send of the output. */
static gs_status forward_end(gs_bctx *x, pass_state *pps)
{
    pass_state ps = *pps;
    uint32_t mb = ps.mb;
    gs_status rc = fp8_amax(x, &ps);
    if (rc != GS_OK)
        return rc;
    if (ps.g.has_head) {
        gs_layer_io io;
        io_reset(&io);
        if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = x->act.head_act,
                                             .layer = GS_LAYER_HEAD, .mb = mb},
                             &x->head_act_t[ps.w])) != GS_OK)
            return rc;
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->head_act_t[ps.w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, ps.prev);
        if ((rc = gs__copy_out_unit(x, x->root, GS_PHASE_FWD, mb)) != GS_OK)
            return rc;
        if (x->root != SIZE_MAX) /* the head's weights: the root's gather, when one is pending */
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
        if ((rc = gs__head_forward(x, mb, &io, &ps.prev)) != GS_OK)
            return rc;
        x->xent_ev[ps.w] = x->tp > 1 ? ps.prev : GS_NO_ID;
    }
    if (ps.has_next)
        rc = p2p(x, &ps, GS_EV_SEND, gs__global_layer(x, ps.g.top), 1, ps.boundary_out);
    return rc;
}

gs_status gs__forward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk)
{
    pass_state ps;
    pass_state_init(x, &ps, mb, chunk, GS_PHASE_FWD);
    gs_status rc = forward_start(x, &ps);
    for (int64_t l = ps.g.bot; l <= ps.g.top && rc == GS_OK; l++)
        rc = forward_layer(x, &ps, l);
    return rc == GS_OK ? forward_end(x, &ps) : rc;
}

/* A backward pass's start: the root's transient gradient (from the first pass writing it, under
 * wrap: model every chunk does, to its reduction after the root chunk's pass), then the head's
 * backward or the receive of the output gradient. */
static gs_status backward_start(gs_bctx *x, pass_state *ps)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    uint32_t mb = ps->mb;
    int root_writes =
        x->root != SIZE_MAX && gs_partition_root_written_by(&x->part, x->stage, x->pp, x->v, ps->chunk);
    if (root_writes && pl->transient_grads && x->ugrad_t[x->root] == GS_NO_ID) {
        if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_GRAD, .bytes = x->part.units[x->root].params * pl->gb,
                                             .layer = GS_LAYER_NONE, .mb = mb, .unit = (uint32_t)x->root},
                             &x->ugrad_t[x->root])) != GS_OK)
            return rc;
        ps->root_grad_pending = 1;
    }
    if (ps->g.has_head) {
        gs_layer_io io;
        if (pl->gather_per_pass && pl->prefetch_bwd == 1 &&
            (rc = gs__gather_covering(x, ps->g.top, GS_PHASE_BWD, mb, GS_NO_ID)) != GS_OK)
            return rc;
        io_reset(&io);
        if (ps->root_grad_pending)
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[x->root]), ps->root_grad_pending = 0;
        io_add(io.free, &io.nfree, GS_IO_MAX, x->head_act_t[ps->w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->last_compute);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->xent_ev[ps->w]); /* the loss needs the global lse */
        if (x->root != SIZE_MAX)
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
        return gs__head_backward(x, mb, &io, &ps->prev);
    }
    if (!ps->has_next)
        return GS_OK;
    if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_BOUNDARY, .bytes = x->act.boundary,
                                         .layer = gs__global_layer(x, ps->g.top), .mb = mb},
                         &ps->gin)) != GS_OK)
        return rc;
    return p2p(x, ps, GS_EV_RECV, gs__global_layer(x, ps->g.top), 1, ps->gin);
}

/* A layer's recompute under activation checkpointing: its rematerialized activations (*remat),
 * from its stash, after the pass's last event and its units' gathers. */
static gs_status backward_recompute(gs_bctx *x, pass_state *ps, int64_t l, uint32_t *remat)
{
    gs_status rc;
    gs_layer_io io;
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    *remat = GS_NO_ID;
    uint64_t remat_bytes = gs_act_layer_remat(&x->act, l);
    uint32_t mods = gs_act_layer_recomputes(&x->act, l);
    if (!mods || (mods != GS_RECOMPUTE_ALL_MODULES &&
                  !gs__recompute_modules_of_block(x, mods, gs__global_layer(x, l)))) /* nothing to run again */
        return GS_OK;
    if (remat_bytes && (rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_ACTIVATION, .bytes = remat_bytes,
                                                        .layer = gs__global_layer(x, l), .mb = ps->mb, .unit = 1},
                                        remat)) != GS_OK)
        return rc;
    io_reset(&io);
    if (remat_bytes)
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, *remat);
    io_add(io.reads, &io.nreads, GS_IO_MAX, *stash_of(x, ps, l));
    io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, ps->prev);
    for (size_t k = 0; k < ncov; k++)
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[cov[k]]);
    return gs__layer_forward(x, l, ps->mb, GS_PHASE_RECOMPUTE, &io, &ps->prev);
}

/* The inputs, allocations and frees of a layer's backward events: the units' transient gradients
 * (allocated by their first backward), the gathers and last reductions it waits for, the per-pass
 * gathers and the stash it frees, the outgoing gradient on the chunk's bottom layer. */
static gs_status backward_io(gs_bctx *x, pass_state *ps, int64_t l, uint32_t remat, gs_layer_io *io)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    uint32_t st = *stash_of(x, ps, l);
    io_reset(io);
    if (ps->root_grad_pending)
        io_add(io->alloc, &io->nalloc, GS_IO_MAX, x->ugrad_t[x->root]), ps->root_grad_pending = 0;
    for (size_t k = 0; k < ncov; k++) {
        size_t u = cov[k];
        if (pl->transient_grads && x->ugrad_t[u] == GS_NO_ID) {
            if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_GRAD, .bytes = x->part.units[u].params * pl->gb,
                                                 .layer = gs__unit_layer(x, u), .mb = ps->mb, .unit = (uint32_t)u},
                                 &x->ugrad_t[u])) != GS_OK)
                return rc;
            io_add(io->alloc, &io->nalloc, GS_IO_MAX, x->ugrad_t[u]);
        }
        io_add(io->deps, &io->ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[u]);
        io_add(io->deps, &io->ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[u]);
        if (pl->gather_per_pass && x->part.units[u].layer_begin == l)
            io_add(io->free, &io->nfree, GS_IO_MAX, x->gathered_t[u]);
        /* experts held whole (an EDP group of one): no collective reduces their gradient, so the
         * unit's last backward event frees its transient gradient (gs__reduce_unit then has
         * nothing to do), as the ledger's backward moment counts it */
        if (pl->transient_grads && ps->sync && !ps->one_bucket && x->part.units[u].expert &&
            gs_shard_ranks(pl, 1) <= 1 && x->part.units[u].layer_begin == l)
            io_add(io->free, &io->nfree, GS_IO_MAX, x->ugrad_t[u]);
    }
    /* a layer the root holds writes the root's gradient: wait for its last reduction */
    if (x->root != SIZE_MAX && gs_partition_root_holds_layer(&x->part, l))
        io_add(io->deps, &io->ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
    if (l == ps->g.bot && ps->has_prev) {
        if ((rc = gs__tensor(x, &(gs_tensor){.kind = GS_T_BOUNDARY, .bytes = x->act.boundary,
                                             .layer = gs__global_layer(x, l), .mb = ps->mb},
                             &ps->gout)) != GS_OK)
            return rc;
        io_add(io->alloc, &io->nalloc, GS_IO_MAX, ps->gout);
    }
    io_add(io->deps, &io->ndeps, GS_BUILD_MAX_LIST, ps->prev);
    io_add(io->reads, &io->nreads, GS_IO_MAX, st);
    io_add(io->free, &io->nfree, GS_IO_MAX, st);
    io_add(io->free, &io->nfree, GS_IO_MAX, remat);
    if (l == ps->g.top)
        io_add(io->free, &io->nfree, GS_IO_MAX, ps->gin);
    return GS_OK;
}

/* The start of one layer of a backward pass: its gathers, copy-outs and recompute, and in *io
 * the io of its backward events (backward_layer emits them, then backward_layer_close:
 * backward_post's prefetch and the reduction of the units whose backward ends here, every
 * micro-batch or the last one under no_sync). */
static gs_status backward_layer_open(gs_bctx *x, pass_state *ps, int64_t l, gs_layer_io *io)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    uint32_t mb = ps->mb, remat;
    if (pl->gather_per_pass) {
        if ((rc = gs__gather_covering(x, l, GS_PHASE_BWD, mb, x->last_compute)) != GS_OK)
            return rc;
        if (pl->prefetch_bwd == 1 && l > ps->g.bot &&
            (rc = gs__gather_covering(x, l - 1, GS_PHASE_BWD, mb, GS_NO_ID)) != GS_OK)
            return rc;
    }
    if ((rc = copy_outs(x, l, GS_PHASE_BWD, mb)) != GS_OK || (rc = backward_recompute(x, ps, l, &remat)) != GS_OK)
        return rc;
    return backward_io(x, ps, l, remat, io);
}

/* After layer l's backward events (the last: last_bwd): the per-pass gathers spent, backward_post's
 * prefetch, the reductions of the units whose backward ends at l. */
static gs_status backward_layer_close(gs_bctx *x, pass_state *ps, int64_t l, uint32_t last_bwd)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    uint32_t mb = ps->mb;
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    ps->prev = last_bwd;
    if (pl->gather_per_pass)
        for (size_t k = 0; k < ncov; k++)
            if (x->part.units[cov[k]].layer_begin == l)
                x->gathered_t[cov[k]] = GS_NO_ID, x->gathered_ev[cov[k]] = GS_NO_ID;
    if (pl->gather_per_pass && pl->prefetch_bwd == 2 && l > ps->g.bot &&
        (rc = gs__gather_covering(x, l - 1, GS_PHASE_BWD, mb, last_bwd)) != GS_OK)
        return rc;
    for (size_t u = 0; u < x->part.nunits; u++) {
        const gs_unit *un = &x->part.units[u];
        if (gs__is_root(x, u) || un->layer_begin != l)
            continue;
        if (ps->sync) {
            if (!ps->one_bucket && (rc = gs__reduce_unit(x, u, mb, last_bwd)) != GS_OK)
                return rc;
        } else if (x->s->strategy.overlap_grad_reduce) {
            x->ugrad_t[u] = GS_NO_ID;
        }
    }
    return GS_OK;
}

static gs_status backward_layer(gs_bctx *x, pass_state *ps, int64_t l)
{
    gs_layer_io io;
    uint32_t last_bwd;
    gs_status rc;
    if ((rc = backward_layer_open(x, ps, l, &io)) != GS_OK || (rc = gs__layer_backward(x, l, ps->mb, &io, &last_bwd)))
        return rc;
    return backward_layer_close(x, ps, l, last_bwd);
}

static void backward_init(const gs_bctx *x, pass_state *ps, uint32_t mb, uint16_t chunk)
{
    pass_state_init(x, ps, mb, chunk, GS_PHASE_BWD);
    /* overlap_grad_reduce false: the reductions wait for the stage's last backward (build_rank) */
    ps->sync = (x->plan.sync_every || mb + 1 == x->mb_count) && x->s->strategy.overlap_grad_reduce;
    /* bucket_stages first: the chunk's units are reduced together after its bottom layer */
    ps->one_bucket = gs__chunk_one_bucket(x, chunk);
}

/* A backward pass's end, after its layers: FP8 delayed scaling's amax reduction (after the first
 * FP8 module's backward), the embedding's backward, the root's or the chunk's reduction, the
 * send of the input gradient. */
static gs_status backward_end(gs_bctx *x, pass_state *pps)
{
    pass_state ps = *pps;
    uint32_t mb = ps.mb;
    uint16_t chunk = ps.chunk;
    uint64_t root_chunk = gs_partition_root_chunk(&x->part, x->stage, x->pp, x->v);
    int root_here = x->root != SIZE_MAX && chunk == root_chunk;
    gs_status rc = fp8_amax(x, &ps);
    if (rc != GS_OK)
        return rc;
    if (ps.g.has_emb) {
        gs_layer_io io;
        io_reset(&io);
        if (ps.root_grad_pending)
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[x->root]), ps.root_grad_pending = 0;
        io_add(io.free, &io.nfree, GS_IO_MAX, x->emb_mask_t[ps.w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, ps.prev);
        if (x->root != SIZE_MAX)
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
        if ((rc = gs__embed_backward(x, mb, &io, &ps.prev)) != GS_OK)
            return rc;
    }
    if (root_here && ps.sync && !ps.one_bucket && (rc = gs__reduce_unit(x, x->root, mb, ps.prev)) != GS_OK)
        return rc;
    /* Megatron-Core's bucket_size None: the chunk's whole gradient is one bucket, ready when the
     * chunk's last gradient is (its bottom layer's backward; the root's with it) */
    if (ps.one_bucket && ps.sync && (rc = gs__reduce_chunk(x, chunk, mb, ps.prev)) != GS_OK)
        return rc;
    if (ps.has_prev)
        rc = p2p(x, &ps, GS_EV_SEND, gs__global_layer(x, ps.g.bot), 0, ps.gout);
    return rc;
}

gs_status gs__backward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk)
{
    pass_state ps;
    backward_init(x, &ps, mb, chunk);
    gs_status rc = backward_start(x, &ps);
    for (int64_t l = ps.g.top; l >= ps.g.bot && rc == GS_OK; l--)
        rc = backward_layer(x, &ps, l);
    return rc == GS_OK ? backward_end(x, &ps) : rc;
}


/* ---- Megatron-Core's combined 1F1B (strategy.ep_overlap) ---- */

/* The order in which the combined step runs a forward block's and a backward block's pieces
 * (TransformerLayerSchedulePlan.run, megatron/core/models/common/model_chunk_schedule_plan.py):
 *   comm stream:  combine_bwd      | dispatch_fwd, dispatch_bwd | combine_fwd
 *   comp stream:  pre_dispatch_fwd | mlp_bwd                    | mlp_fwd      | pre_dispatch_bwd
 * The exchanges are events on the TP stream here, the pieces' compute on the compute stream, so
 * one micro-batch's exchange runs while the other's piece computes, as on Megatron's two
 * streams. POST: the alltoall dispatcher's unpermute, which needs the combine, after the backward's
 * attention half. */
static const struct {
    uint8_t bwd;
    uint8_t seg; /* gs_block_seg */
} combined_order[] = {
    {1, GS_SEG_COMBINE}, {0, GS_SEG_PRE}, {1, GS_SEG_MLP}, {0, GS_SEG_DISPATCH}, {1, GS_SEG_DISPATCH},
    {0, GS_SEG_MLP},     {0, GS_SEG_COMBINE}, {1, GS_SEG_PRE}, {0, GS_SEG_POST},
};

/* Forward local layer lf of F beside backward local layer lb of B, piece by piece. */
static gs_status layer_pair(gs_bctx *x, pass_state *F, int64_t lf, pass_state *B, int64_t lb)
{
    gs_layer_io fio, bio;
    gs_block_run run[2];
    uint32_t last[2] = {GS_NO_ID, GS_NO_ID};
    int ended[2] = {0, 0};
    gs_status rc;
    if ((rc = backward_layer_open(x, B, lb, &bio)) != GS_OK || (rc = forward_layer_open(x, F, lf, &fio)) != GS_OK)
        return rc;
    gs__block_begin(&run[0], x, lf, F->mb, GS_PHASE_FWD, &fio);
    gs__block_begin(&run[1], x, lb, B->mb, GS_PHASE_BWD, &bio);
    for (size_t i = 0; i < sizeof combined_order / sizeof combined_order[0] && rc == GS_OK; i++) {
        int k = combined_order[i].bwd;
        gs_block_seg seg = (gs_block_seg)combined_order[i].seg;
        if (ended[k])
            continue;
        ended[k] = seg == gs__block_last_piece(&run[k]);
        rc = gs__block_piece(&run[k], seg, ended[k], &last[k]);
    }
    if (rc != GS_OK)
        return rc;
    F->prev = last[0];
    forward_layer_close(x, F, lf);
    return backward_layer_close(x, B, lb, last[1]);
}

gs_status gs__combined_pass(gs_bctx *x, uint32_t fmb, uint16_t fchunk, uint32_t bmb, uint16_t bchunk)
{
    pass_state F, B;
    pass_state_init(x, &F, fmb, fchunk, GS_PHASE_FWD);
    backward_init(x, &B, bmb, bchunk);
    gs_status rc = forward_start(x, &F);
    if (rc == GS_OK)
        rc = backward_start(x, &B);
    int64_t nf = F.g.top >= F.g.bot ? F.g.top - F.g.bot + 1 : 0, nb = B.g.top >= B.g.bot ? B.g.top - B.g.bot + 1 : 0;
    int64_t n = nf < nb ? nf : nb, i;
    /* the overlapped layers, then the backward's remaining ones, then the forward's */
    for (i = 0; i < n && rc == GS_OK; i++)
        rc = layer_pair(x, &F, F.g.bot + i, &B, B.g.top - i);
    for (i = n; i < nb && rc == GS_OK; i++)
        rc = backward_layer(x, &B, B.g.top - i);
    for (i = n; i < nf && rc == GS_OK; i++)
        rc = forward_layer(x, &F, F.g.bot + i);
    if (rc == GS_OK)
        rc = forward_end(x, &F);
    return rc == GS_OK ? backward_end(x, &B) : rc;
}

/* ---- ZeRO's gathers of the updated parameters ---- */

/* ZeRO-1/2's all-gather of unit u's updated parameters over the DP group (each rank contributes
 * its shard), after `dep`. */
gs_status gs__param_allgather(gs_bctx *x, size_t u, uint32_t dep, uint32_t *ev)
{
    gs_evb b;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_OPTIM, gs__unit_layer(x, u), 0);
    b.e.op = GS_COLL_ALLGATHER;
    b.e.role = GS_ROLE_PARAM_GATHER;
    /* an expert unit's slices are gathered over its expert-data-parallel group */
    gs_group_kind g = x->part.units[u].expert ? GS_GROUP_EDP : GS_GROUP_DP;
    uint64_t n = gs_shard_ranks(&x->plan, x->part.units[u].expert);
    if (n <= 1) { /* experts held whole (ep = dp x cp): the update is already in place */
        *ev = dep;
        return GS_OK;
    }
    b.e.group = (uint8_t)g;
    b.e.peer = x->group[g];
    b.e.group_size = x->group_size[g];
    b.e.unit = (uint32_t)u;
    /* FP8 parameters (--fp8-param-gather) move gather_wb per element; the ledger counts alike */
    b.e.bytes = n * ceil_div(x->part.units[u].params, n) * x->plan.gather_wb;
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    gs__evb_add(&b, GS_LINK_WRITES, x->param_t[u]);
    return gs__evb_emit(x, &b, ev);
}

/* bucket_stages first: one all-gather of the updated parameters of every unit model chunk `chunk`
 * reduces (Megatron-Core's one bucket; under expert parallelism the experts' bucket is a second
 * one, over the expert-data-parallel group), after `dep`; the gathered event of each of its units. */
static gs_status param_allgather_bucket(gs_bctx *x, uint64_t chunk, int expert, uint32_t dep)
{
    gs_group_kind g = expert ? GS_GROUP_EDP : GS_GROUP_DP;
    uint64_t params, N = x->group_size[g];
    size_t first, count;
    gs_status rc = gs__chunk_bucket(x, chunk, expert, &params, &first, &count);
    if (rc != GS_OK || count == 0)
        return rc;
    uint32_t ev = dep; /* experts held whole (N = 1): the update is in place */
    if (N > 1) {
        gs_evb b;
        gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_OPTIM, gs__unit_layer(x, first), 0);
        b.e.op = GS_COLL_ALLGATHER;
        b.e.role = GS_ROLE_PARAM_GATHER;
        b.e.group = (uint8_t)g;
        b.e.peer = x->group[g];
        b.e.group_size = N;
        b.e.unit = (uint32_t)first;
        b.e.bytes = N * ceil_div(params, N) * x->plan.gather_wb;
        gs__evb_add(&b, GS_LINK_DEPS, dep);
        for (size_t u = 0; u < x->part.nunits; u++)
            if (gs__unit_chunk(x, u) == chunk && x->part.units[u].expert == expert)
                gs__evb_add(&b, GS_LINK_WRITES, x->param_t[u]);
        if ((rc = gs__evb_emit(x, &b, &ev)) != GS_OK)
            return rc;
    }
    for (size_t u = 0; u < x->part.nunits; u++)
        if (gs__unit_chunk(x, u) == chunk && x->part.units[u].expert == expert)
            x->gathered_ev[u] = ev;
    return GS_OK;
}

gs_status gs__param_allgather_chunk(gs_bctx *x, uint64_t chunk, uint32_t dep)
{
    gs_status rc = param_allgather_bucket(x, chunk, 0, dep);
    return rc == GS_OK ? param_allgather_bucket(x, chunk, 1, dep) : rc;
}

