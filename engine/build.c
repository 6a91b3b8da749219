/* Schedule builder: turns a scenario into one step's events per rank (or per rank class).
 *
 * This file owns the order: the pipeline passes (engine/pipeline.c), and inside them the FSDP /
 * ZeRO / DDP collectives of engine/build_dp.c around the compute of engine/build_layer.c, the
 * pipeline sends and receives, and the tensors each event allocates and frees. The semantics (which tensors live
 * when) are those the memory ledger's moments assume (engine/ledger.c, backward_moments); the
 * ledger derives the same peak from closed forms, and gs__schedule_check_ledger holds the two
 * against each other.
 *
 * Per rank, in list order:
 *   prologue   the FSDP root unit is all-gathered (FSDP1 keeps the root unsharded all step)
 *   passes     forward and backward passes in the pipeline order; a forward pass receives its
 *              input (or embeds), gathers each layer's units (FULL_SHARD: every pass;
 *              SHARD_GRAD_OP: once per step), runs the layer, frees per-pass gathers, runs the
 *              head and sends its output. A backward pass runs the head's backward (or receives
 *              the output gradient), then per layer from the top: gathers (backward_pre also the
 *              next layer's), recompute, backward compute, backward_post gathers, gradient
 *              reduction of the units that end here (every micro-batch, or the last one under
 *              no_sync), then the embedding's backward, the root's reduction, and the send of
 *              the input gradient.
 *   epilogue   the optimizer on this rank's shard (frees the step's gathers); ZeRO-1/2 gather the
 *              updated parameters.
 * Events on one stream run in list order; deps name cross-stream data dependencies. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/build_internal.h"
#include "engine/schedule_internal.h"

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- event and tensor helpers ------------------------------------------------------------------ */

void gs__evb_init(gs_evb *b, gs_event_kind kind, gs_stream stream, gs_phase phase, int32_t layer, uint32_t mb)
{
    memset(&b->e, 0, sizeof b->e);
    b->e.kind = (uint8_t)kind;
    b->e.stream = (uint8_t)stream;
    b->e.phase = (uint8_t)phase;
    b->e.layer = layer;
    b->e.mb = mb;
}

void gs__evb_add(gs_evb *b, int which, uint32_t id)
{
    if (id == GS_NO_ID)
        return;
    uint16_t n = b->e.nlinks[which];
    for (uint16_t i = 0; i < n; i++)
        if (b->list[which][i] == id)
            return;
    if (n < GS_BUILD_MAX_LIST) {
        b->list[which][n] = id;
        b->e.nlinks[which] = (uint16_t)(n + 1);
    }
}

gs_status gs__evb_emit(gs_bctx *x, gs_evb *b, uint32_t *id)
{
    const uint32_t *lists[GS_LINK_LISTS];
    for (int i = 0; i < GS_LINK_LISTS; i++)
        lists[i] = b->list[i];
    gs_status rc = gs_rank_add_event(x->r, &b->e, lists, id);
    if (rc != GS_OK)
        return gs_error_set(x->err, rc, "out of memory adding events for rank %" PRIu64, x->rank);
    if (b->e.kind == GS_EV_COMPUTE)
        x->last_compute = *id;
    if (b->e.stream == GS_STREAM_DP)
        x->last_dp = *id;
    return GS_OK;
}

gs_status gs__tensor(gs_bctx *x, gs_tensor_kind kind, uint64_t bytes, int32_t layer, uint32_t mb, uint32_t unit,
                     int resident, uint32_t *id)
{
    gs_tensor t;
    memset(&t, 0, sizeof t);
    t.kind = (uint8_t)kind;
    t.bytes = bytes;
    t.layer = layer;
    t.mb = mb;
    t.unit = unit;
    t.resident = (uint8_t)(resident ? 1 : 0);
    gs_status rc = gs_rank_add_tensor(x->r, &t, id);
    if (rc != GS_OK)
        return gs_error_set(x->err, rc, "out of memory adding tensors for rank %" PRIu64, x->rank);
    return GS_OK;
}

int32_t gs__global_layer(const gs_bctx *x, int64_t local)
{
    return (int32_t)gs_pipe_global_layer(x->s->model.layers, x->pp, x->v, x->stage, (uint64_t)local);
}

/* ---- pipeline passes --------------------------------------------------------------------------- */

static uint64_t peer_rank(const gs_bctx *x, int next)
{
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(x->mesh, x->rank, c);
    if (next)
        c[GS_DIM_PP] = (c[GS_DIM_PP] + 1) % x->pp;
    else
        c[GS_DIM_PP] = (c[GS_DIM_PP] + x->pp - 1) % x->pp;
    return gs_mesh_coords_rank(x->mesh, c);
}

static gs_status p2p(gs_bctx *x, gs_event_kind kind, gs_phase phase, int32_t layer, uint32_t mb, uint16_t chunk,
                     int to_next, uint32_t dep, uint32_t alloc, uint32_t frees, uint32_t reads, uint32_t *ev)
{
    gs_evb b;
    gs__evb_init(&b, kind, GS_STREAM_PP, phase, layer, mb);
    b.e.chunk = (uint8_t)chunk;
    b.e.peer = peer_rank(x, to_next);
    b.e.bytes = x->act.boundary;
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    gs__evb_add(&b, GS_LINK_ALLOCS, alloc);
    gs__evb_add(&b, GS_LINK_FREES, frees);
    gs__evb_add(&b, kind == GS_EV_SEND ? GS_LINK_READS : GS_LINK_WRITES, kind == GS_EV_SEND ? reads : alloc);
    return gs__evb_emit(x, &b, ev);
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
    g->bot = (int64_t)chunk * (int64_t)x->layers_per_chunk;
    g->top = g->bot + (int64_t)x->layers_per_chunk - 1;
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
static gs_status param_allgather(gs_bctx *x, size_t u, uint32_t dep, uint32_t *ev);
static gs_status param_allgather_chunk(gs_bctx *x, uint64_t chunk, uint32_t dep);

/* bucket_stages first: a unit of a one-bucket model chunk is gathered with the whole chunk. */
static gs_status issue_gather(gs_bctx *x, size_t u, uint32_t dep)
{
    if (u == SIZE_MAX || x->gathered_ev[u] != GS_NO_ID)
        return GS_OK;
    if (x->param_gathers_issued++ == 0)
        dep = GS_NO_ID; /* the first: at the step's start */
    if (gs__chunk_one_bucket(x, gs__unit_chunk(x, u)))
        return param_allgather_chunk(x, gs__unit_chunk(x, u), dep);
    return param_allgather(x, u, dep, &x->gathered_ev[u]);
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
static gs_status forward_gathers(gs_bctx *x, uint16_t chunk, int64_t l, int64_t bot, int64_t top, int has_head,
                                 uint32_t dep)
{
    gs_status rc = layer_gathers(x, l, dep);
    if (rc == GS_OK && (uint64_t)chunk + 1 < x->v && gs__chunk_one_bucket(x, (uint64_t)chunk + 1) &&
        l == (gs__chunk_one_bucket(x, chunk) ? bot : top)) {
        uint64_t params;
        size_t first, count;
        if ((rc = gs__chunk_bucket(x, (uint64_t)chunk + 1, &params, &first, &count)) == GS_OK)
            rc = issue_gather(x, first, dep);
    }
    if (rc != GS_OK)
        return rc;
    return l < top ? layer_gathers(x, l + 1, dep) : has_head ? issue_gather(x, x->root, dep) : GS_OK;
}

static gs_status forward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk)
{
    gs_status rc = GS_OK;
    const gs_shard_plan *pl = &x->plan;
    chunk_geo g;
    chunk_geometry(x, chunk, &g);
    int64_t bot = g.bot, top = g.top;
    int has_emb = g.has_emb, has_head = g.has_head, has_prev = !g.has_emb, has_next = !g.has_head;
    uint64_t w = mb % x->window;
    uint32_t prev = GS_NO_ID, boundary_out = GS_NO_ID;
    gs_layer_io io;
    for (int64_t l = bot; l <= top; l++)
        if ((rc = gs__tensor(x, GS_T_ACTIVATION, x->act.stored, gs__global_layer(x, l), mb, 0, 0,
                             &x->stash_t[w * x->part.layers + (uint64_t)l])) != GS_OK)
            return rc;
    if (has_prev) {
        rc = p2p(x, GS_EV_RECV, GS_PHASE_FWD, gs__global_layer(x, bot), mb, chunk, 0, GS_NO_ID,
                 x->stash_t[w * x->part.layers + (uint64_t)bot], GS_NO_ID, GS_NO_ID, &prev);
        if (rc != GS_OK)
            return rc;
    }
    if (has_emb) {
        io_reset(&io);
        x->emb_mask_t[w] = GS_NO_ID;
        if (x->act.emb_mask &&
            (rc = gs__tensor(x, GS_T_ACTIVATION, x->act.emb_mask, GS_LAYER_EMBED, mb, 0, 0, &x->emb_mask_t[w])) != GS_OK)
            return rc;
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->emb_mask_t[w]);
        /* overlap_param_gather: the root's gather at the step's start, the first layer's next */
        if (x->param_gather_fwd &&
            ((rc = issue_gather(x, x->root, GS_NO_ID)) != GS_OK || (rc = layer_gathers(x, bot, GS_NO_ID)) != GS_OK))
            return rc;
        if (x->root != SIZE_MAX)
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
        if ((rc = gs__embed_forward(x, mb, &io, &prev)) != GS_OK)
            return rc;
    }
    /* Without forward_prefetch FSDP still issues a unit's all-gather from its pre-forward hook,
     * while the previous layer's kernels run; limit_all_gathers keeps at most two gathered
     * units in flight, so the gather waits for the layer before the previous one to finish. */
    uint32_t end1 = GS_NO_ID, end2 = GS_NO_ID;
    for (int64_t l = bot; l <= top; l++) {
        int need = pl->gather_per_pass || pl->gather_all;
        if (need) {
            uint32_t dep = pl->prefetch_fwd ? GS_NO_ID : x->s->strategy.limit_all_gathers ? end2 : end1;
            if ((rc = gs__gather_covering(x, l, GS_PHASE_FWD, mb, dep)) != GS_OK)
                return rc;
            if (pl->prefetch_fwd && l < top && (rc = gs__gather_covering(x, l + 1, GS_PHASE_FWD, mb, GS_NO_ID)) != GS_OK)
                return rc;
        }
        if (x->param_gather_fwd && (rc = forward_gathers(x, chunk, l, bot, top, has_head, prev)) != GS_OK)
            return rc;
        io_reset(&io);
        uint32_t st = x->stash_t[w * x->part.layers + (uint64_t)l];
        if (!(l == bot && has_prev))
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, st);
        if (l == top && has_next) {
            if ((rc = gs__tensor(x, GS_T_BOUNDARY, x->act.boundary, gs__global_layer(x, l), mb, 0, 0, &boundary_out)) != GS_OK)
                return rc;
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, boundary_out);
        }
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, prev);
        const size_t *cov;
        size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
        for (size_t k = 0; k < ncov; k++) {
            size_t u = cov[k];
            {
                io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[u]);
                io_add(io.reads, &io.nreads, GS_IO_MAX, x->gathered_t[u]);
                if (pl->gather_per_pass && x->part.units[u].layer_end == l) {
                    io_add(io.free, &io.nfree, GS_IO_MAX, x->gathered_t[u]);
                }
            }
        }
        if (x->root != SIZE_MAX)
            io_add(io.reads, &io.nreads, GS_IO_MAX, pl->gather_root ? x->gathered_t[x->root] : x->param_t[x->root]);
        /* a layer held by the root unit (wrap: model) reads the root's gathered copy: wait for its
         * all-gather (otherwise implied by a layer unit's gather after it on the DP stream) */
        int gathered = 0;
        for (size_t k = 0; k < ncov; k++)
            if (x->gathered_ev[cov[k]] != GS_NO_ID)
                gathered = 1;
        if (!gathered && x->root != SIZE_MAX) /* FSDP's root gather, or ZeRO's overlapped one */
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
        if ((rc = gs__layer_forward(x, l, mb, GS_PHASE_FWD, &io, &prev)) != GS_OK)
            return rc;
        end2 = end1;
        end1 = prev;
        if (pl->gather_per_pass)
            for (size_t k = 0; k < ncov; k++)
                if (x->part.units[cov[k]].layer_end == l)
                    x->gathered_t[cov[k]] = GS_NO_ID, x->gathered_ev[cov[k]] = GS_NO_ID;
    }
    if (has_head) {
        io_reset(&io);
        if ((rc = gs__tensor(x, GS_T_ACTIVATION, x->act.head_act, GS_LAYER_HEAD, mb, 0, 0, &x->head_act_t[w])) != GS_OK)
            return rc;
        io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->head_act_t[w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, prev);
        if (x->root != SIZE_MAX) /* the head's weights: the root's gather, when one is pending */
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[x->root]);
        if ((rc = gs__head_forward(x, mb, &io, &prev)) != GS_OK)
            return rc;
        x->xent_ev[w] = x->tp > 1 ? prev : GS_NO_ID;
    }
    if (has_next) {
        uint32_t ev;
        rc = p2p(x, GS_EV_SEND, GS_PHASE_FWD, gs__global_layer(x, top), mb, chunk, 1, prev, GS_NO_ID, boundary_out,
                 boundary_out, &ev);
    }
    return rc;
}

static gs_status backward_pass(gs_bctx *x, uint32_t mb, uint16_t chunk)
{
    gs_status rc = GS_OK;
    const gs_shard_plan *pl = &x->plan;
    chunk_geo g;
    chunk_geometry(x, chunk, &g);
    int64_t bot = g.bot, top = g.top;
    int has_emb = g.has_emb, has_head = g.has_head, has_prev = !g.has_emb, has_next = !g.has_head;
    uint64_t w = mb % x->window;
    /* overlap_grad_reduce false: the reductions wait for the stage's last backward (build_rank) */
    int sync = (pl->sync_every || mb + 1 == x->mb_count) && x->s->strategy.overlap_grad_reduce;
    /* bucket_stages first: the chunk's units are reduced together after its bottom layer */
    int one_bucket = gs__chunk_one_bucket(x, chunk);
    /* the root's transient gradient lives from the first backward pass writing it (under wrap:
     * model every chunk does) to its reduction after the root chunk's pass */
    uint64_t root_chunk = gs_partition_root_chunk(&x->part, x->stage, x->pp, x->v);
    int root_here = x->root != SIZE_MAX && chunk == root_chunk;
    int root_writes = x->root != SIZE_MAX && gs_partition_root_written_by(&x->part, x->stage, x->pp, x->v, chunk);
    uint32_t prev = GS_NO_ID, gin = GS_NO_ID, gout = GS_NO_ID;
    int root_grad_pending = 0;
    gs_layer_io io;

    if (root_writes && pl->transient_grads && x->ugrad_t[x->root] == GS_NO_ID) {
        if ((rc = gs__tensor(x, GS_T_GRAD, x->part.units[x->root].params * pl->gb, GS_LAYER_NONE, mb,
                             (uint32_t)x->root, 0, &x->ugrad_t[x->root])) != GS_OK)
            return rc;
        root_grad_pending = 1;
    }
    if (has_head) {
        if (pl->gather_per_pass && pl->prefetch_bwd == 1 &&
            (rc = gs__gather_covering(x, top, GS_PHASE_BWD, mb, GS_NO_ID)) != GS_OK)
            return rc;
        io_reset(&io);
        if (root_grad_pending)
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[x->root]), root_grad_pending = 0;
        io_add(io.free, &io.nfree, GS_IO_MAX, x->head_act_t[w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->last_compute);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->xent_ev[w]); /* the loss needs the global lse */
        if (x->root != SIZE_MAX)
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
        if ((rc = gs__head_backward(x, mb, &io, &prev)) != GS_OK)
            return rc;
    } else if (has_next) {
        if ((rc = gs__tensor(x, GS_T_BOUNDARY, x->act.boundary, gs__global_layer(x, top), mb, 0, 0, &gin)) != GS_OK)
            return rc;
        if ((rc = p2p(x, GS_EV_RECV, GS_PHASE_BWD, gs__global_layer(x, top), mb, chunk, 1, GS_NO_ID, gin, GS_NO_ID,
                      GS_NO_ID, &prev)) != GS_OK)
            return rc;
    }
    for (int64_t l = top; l >= bot; l--) {
        const size_t *cov;
        size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
        if (pl->gather_per_pass) {
            if ((rc = gs__gather_covering(x, l, GS_PHASE_BWD, mb, x->last_compute)) != GS_OK)
                return rc;
            if (pl->prefetch_bwd == 1 && l > bot && (rc = gs__gather_covering(x, l - 1, GS_PHASE_BWD, mb, GS_NO_ID)) != GS_OK)
                return rc;
        }
        uint32_t st = x->stash_t[w * x->part.layers + (uint64_t)l];
        uint32_t remat = GS_NO_ID;
        if (x->act.remat) {
            if ((rc = gs__tensor(x, GS_T_ACTIVATION, x->act.remat, gs__global_layer(x, l), mb, 1, 0, &remat)) != GS_OK)
                return rc;
            io_reset(&io);
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, remat);
            io_add(io.reads, &io.nreads, GS_IO_MAX, st);
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, prev);
            for (size_t k = 0; k < ncov; k++)
                io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[cov[k]]);
            if ((rc = gs__layer_forward(x, l, mb, GS_PHASE_RECOMPUTE, &io, &prev)) != GS_OK)
                return rc;
        }
        io_reset(&io);
        if (root_grad_pending)
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[x->root]), root_grad_pending = 0;
        for (size_t k = 0; k < ncov; k++) {
            size_t u = cov[k];
            if (pl->transient_grads && x->ugrad_t[u] == GS_NO_ID) {
                if ((rc = gs__tensor(x, GS_T_GRAD, x->part.units[u].params * pl->gb, gs__unit_layer(x, u), mb,
                                     (uint32_t)u, 0, &x->ugrad_t[u])) != GS_OK)
                    return rc;
                io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[u]);
            }
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->gathered_ev[u]);
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[u]);
            if (pl->gather_per_pass && x->part.units[u].layer_begin == l)
                io_add(io.free, &io.nfree, GS_IO_MAX, x->gathered_t[u]);
        }
        /* a layer the root holds writes the root's gradient: wait for its last reduction */
        if (x->root != SIZE_MAX && gs_partition_root_holds_layer(&x->part, l))
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
        if (l == bot && has_prev) {
            if ((rc = gs__tensor(x, GS_T_BOUNDARY, x->act.boundary, gs__global_layer(x, l), mb, 0, 0, &gout)) != GS_OK)
                return rc;
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, gout);
        }
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, prev);
        io_add(io.reads, &io.nreads, GS_IO_MAX, st);
        io_add(io.free, &io.nfree, GS_IO_MAX, st);
        io_add(io.free, &io.nfree, GS_IO_MAX, remat);
        if (l == top)
            io_add(io.free, &io.nfree, GS_IO_MAX, gin);
        uint32_t last_bwd;
        if ((rc = gs__layer_backward(x, l, mb, &io, &last_bwd)) != GS_OK)
            return rc;
        prev = last_bwd;
        if (pl->gather_per_pass)
            for (size_t k = 0; k < ncov; k++)
                if (x->part.units[cov[k]].layer_begin == l)
                    x->gathered_t[cov[k]] = GS_NO_ID, x->gathered_ev[cov[k]] = GS_NO_ID;
        if (pl->gather_per_pass && pl->prefetch_bwd == 2 && l > bot &&
            (rc = gs__gather_covering(x, l - 1, GS_PHASE_BWD, mb, last_bwd)) != GS_OK)
            return rc;
        for (size_t u = 0; u < x->part.nunits; u++) {
            const gs_unit *un = &x->part.units[u];
            if (gs__is_root(x, u) || un->layer_begin != l)
                continue;
            if (sync) {
                if (!one_bucket && (rc = gs__reduce_unit(x, u, mb, last_bwd)) != GS_OK)
                    return rc;
            } else if (x->s->strategy.overlap_grad_reduce) {
                x->ugrad_t[u] = GS_NO_ID;
            }
        }
    }
    if (has_emb) {
        io_reset(&io);
        if (root_grad_pending)
            io_add(io.alloc, &io.nalloc, GS_IO_MAX, x->ugrad_t[x->root]), root_grad_pending = 0;
        io_add(io.free, &io.nfree, GS_IO_MAX, x->emb_mask_t[w]);
        io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, prev);
        if (x->root != SIZE_MAX)
            io_add(io.deps, &io.ndeps, GS_BUILD_MAX_LIST, x->reduce_ev[x->root]);
        if ((rc = gs__embed_backward(x, mb, &io, &prev)) != GS_OK)
            return rc;
    }
    if (root_here && sync && !one_bucket && (rc = gs__reduce_unit(x, x->root, mb, prev)) != GS_OK)
        return rc;
    /* Megatron-Core's bucket_size None: the chunk's whole gradient is one bucket, ready when the
     * chunk's last gradient is (its bottom layer's backward; the root's with it) */
    if (one_bucket && sync && (rc = gs__reduce_chunk(x, chunk, mb, prev)) != GS_OK)
        return rc;
    if (has_prev) {
        uint32_t ev;
        rc = p2p(x, GS_EV_SEND, GS_PHASE_BWD, gs__global_layer(x, bot), mb, chunk, 0, prev, GS_NO_ID, gout, gout, &ev);
    }
    return rc;
}

/* ---- one rank ------------------------------------------------------------------------------------ */

/* ZeRO-1/2's all-gather of unit u's updated parameters over the DP group (each rank contributes
 * its shard), after `dep`. */
static gs_status param_allgather(gs_bctx *x, size_t u, uint32_t dep, uint32_t *ev)
{
    gs_evb b;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_OPTIM, gs__unit_layer(x, u), 0);
    b.e.op = GS_COLL_ALLGATHER;
    b.e.group = GS_GROUP_DP;
    b.e.peer = x->group[GS_GROUP_DP];
    b.e.group_size = x->group_size[GS_GROUP_DP];
    b.e.unit = (uint32_t)u;
    b.e.bytes = x->plan.N * ceil_div(x->part.units[u].params, x->plan.N) * x->plan.wb;
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    gs__evb_add(&b, GS_LINK_WRITES, x->param_t[u]);
    return gs__evb_emit(x, &b, ev);
}

/* bucket_stages first: one all-gather of the updated parameters of every unit model chunk `chunk`
 * reduces (Megatron-Core's one bucket), after `dep`; the gathered event of each of its units. */
static gs_status param_allgather_chunk(gs_bctx *x, uint64_t chunk, uint32_t dep)
{
    uint64_t params, N = x->plan.N;
    size_t first, count;
    gs_status rc = gs__chunk_bucket(x, chunk, &params, &first, &count);
    if (rc != GS_OK || count == 0)
        return rc;
    gs_evb b;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_OPTIM, gs__unit_layer(x, first), 0);
    b.e.op = GS_COLL_ALLGATHER;
    b.e.group = GS_GROUP_DP;
    b.e.peer = x->group[GS_GROUP_DP];
    b.e.group_size = x->group_size[GS_GROUP_DP];
    b.e.unit = (uint32_t)first;
    b.e.bytes = N * ceil_div(params, N) * x->plan.wb;
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    for (size_t u = 0; u < x->part.nunits; u++)
        if (gs__unit_chunk(x, u) == chunk)
            gs__evb_add(&b, GS_LINK_WRITES, x->param_t[u]);
    uint32_t ev;
    if ((rc = gs__evb_emit(x, &b, &ev)) != GS_OK)
        return rc;
    for (size_t u = 0; u < x->part.nunits; u++)
        if (gs__unit_chunk(x, u) == chunk)
            x->gathered_ev[u] = ev;
    return GS_OK;
}

static void bctx_fini(gs_bctx *x)
{
    gs_partition_fini(&x->part);
    free(x->param_t);
    free(x->grad_t);
    free(x->hold_t);
    free(x->gathered_t);
    free(x->gathered_ev);
    free(x->ugrad_t);
    free(x->reduce_ev);
    free(x->stash_t);
    free(x->emb_mask_t);
    free(x->head_act_t);
    free(x->xent_ev);
}

static gs_status build_rank(const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches, gs_rank_events *r,
                            gs_error *err)
{
    gs_bctx x;
    gs_pipe_order order = {NULL, 0, 0};
    gs_status rc;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.mesh = mesh;
    x.r = r;
    x.err = err;
    x.rank = r->rank;
    uint64_t coords[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, r->rank, coords);
    x.stage = coords[GS_DIM_PP];
    x.pp = mesh->size[GS_DIM_PP];
    x.tp = mesh->size[GS_DIM_TP];
    x.last = x.stage + 1 == x.pp;
    x.mb_count = microbatches;
    x.v = s->strategy.pipeline == GS_PIPE_INTERLEAVED && x.pp > 1 && s->strategy.virtual_stages
              ? s->strategy.virtual_stages : 1;
    x.last_compute = x.last_dp = GS_NO_ID;
    x.root_grad_t = GS_NO_ID;
    r->stage = x.stage;

    if ((rc = gs_partition_stage(s, mesh, x.stage, &x.part, err)) != GS_OK)
        return rc;
    gs_shard_plan_init(s, mesh, r->rank, microbatches, &x.plan);
    if ((rc = gs_ledger_act_sizes(s, mesh, x.stage, &x.act, err)) != GS_OK)
        goto out;
    x.layers_per_chunk = x.part.layers / x.v;
    x.root = x.part.has_root ? x.part.nunits - 1 : SIZE_MAX;
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
        x.group[g] = gs_group_of(mesh, (gs_group_kind)g, r->rank, &x.group_size[g]);
    x.dp_group = s->strategy.sharding == GS_SHARD_HYBRID_SHARD ? GS_GROUP_DP_INTRA : GS_GROUP_DP;

    if ((rc = gs_pipe_order_build(s->strategy.pipeline, x.pp, x.stage, microbatches, x.v, &order, err)) != GS_OK)
        goto out;
    /* in-flight micro-batches span fewer than warm-up + 2 + 2 p v consecutive ids */
    x.window = order.warmup + 2 + 2 * x.pp * x.v;
    if (x.window > microbatches)
        x.window = microbatches;
    size_t nu = x.part.nunits ? x.part.nunits : 1;
    x.param_t = malloc(nu * sizeof *x.param_t);
    x.grad_t = malloc(nu * sizeof *x.grad_t);
    x.gathered_t = malloc(nu * sizeof *x.gathered_t);
    x.gathered_ev = malloc(nu * sizeof *x.gathered_ev);
    x.ugrad_t = malloc(nu * sizeof *x.ugrad_t);
    x.reduce_ev = malloc(nu * sizeof *x.reduce_ev);
    x.stash_t = malloc((size_t)(x.window * (x.part.layers ? x.part.layers : 1)) * sizeof *x.stash_t);
    x.emb_mask_t = malloc((size_t)x.window * sizeof *x.emb_mask_t);
    x.head_act_t = malloc((size_t)x.window * sizeof *x.head_act_t);
    x.xent_ev = malloc((size_t)x.window * sizeof *x.xent_ev);
    if (x.plan.hold_full_grads)
        x.hold_t = malloc(nu * sizeof *x.hold_t);
    if (!x.param_t || !x.grad_t || !x.gathered_t || !x.gathered_ev || !x.ugrad_t || !x.reduce_ev || !x.stash_t || !x.emb_mask_t ||
        !x.head_act_t || !x.xent_ev || (x.plan.hold_full_grads && !x.hold_t)) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory building rank %" PRIu64, r->rank);
        goto out;
    }
    for (size_t i = 0; i < x.window; i++)
        x.emb_mask_t[i] = x.head_act_t[i] = x.xent_ev[i] = GS_NO_ID;

    /* resident tensors: states and workspace */
    const gs_shard_plan *pl = &x.plan;
    uint64_t shard = 0;
    for (size_t u = 0; u < x.part.nunits; u++) {
        uint64_t p = x.part.units[u].params, sh = ceil_div(p, pl->N);
        shard += sh;
        int32_t layer = gs__unit_layer(&x, u);
        if ((rc = gs__tensor(&x, GS_T_PARAM_SHARD, (pl->stored_sharded ? sh : p) * pl->wb, layer, 0, (uint32_t)u, 1,
                             &x.param_t[u])) != GS_OK ||
            (rc = gs__tensor(&x, pl->shard_grads ? GS_T_GRAD_SHARD : GS_T_GRAD, (pl->shard_grads ? sh : p) * pl->gb,
                             layer, 0, (uint32_t)u, 1, &x.grad_t[u])) != GS_OK)
            goto out;
        if (pl->offload && pl->stored_sharded) {
            r->tensors[x.param_t[u]].on_host = 1;
            r->tensors[x.grad_t[u]].on_host = 1;
        }
        if (pl->hold_full_grads &&
            (rc = gs__tensor(&x, GS_T_GRAD, p * pl->gb, layer, 0, (uint32_t)u, 1, &x.hold_t[u])) != GS_OK)
            goto out;
        x.gathered_t[u] = x.gathered_ev[u] = x.ugrad_t[u] = x.reduce_ev[u] = GS_NO_ID;
    }
    uint64_t o_el = pl->shard_opt ? shard : x.part.params;
    x.master_t = x.adam_t = GS_NO_ID;
    if (pl->mixed && (rc = gs__tensor(&x, GS_T_MASTER, o_el * 4, GS_LAYER_NONE, 0, 0, 1, &x.master_t)) != GS_OK)
        goto out;
    if ((rc = gs__tensor(&x, GS_T_OPT_STATE, o_el * 8, GS_LAYER_NONE, 0, 0, 1, &x.adam_t)) != GS_OK)
        goto out;
    if (pl->offload) {
        if (x.master_t != GS_NO_ID)
            r->tensors[x.master_t].on_host = 1;
        r->tensors[x.adam_t].on_host = 1;
    }
    if ((rc = gs__tensor(&x, GS_T_WORKSPACE, gs_workspace_bytes(s, mesh, NULL), GS_LAYER_NONE, 0, 0, 1,
                         &x.ws_t)) != GS_OK)
        goto out;

    /* prologue: the root unit, gathered for the whole step */
    if (pl->gather_root && x.root != SIZE_MAX && (rc = gs__gather_unit(&x, x.root, GS_PHASE_FWD, 0, GS_NO_ID)) != GS_OK)
        goto out;
    /* ZeRO-1/2 with overlap_param_gather: the forward issues the gathers (forward_gathers) */
    x.param_gather_fwd = pl->ag_after_optimizer && pl->N > 1 && s->strategy.overlap_param_gather;
    x.chunk_buckets = pl->bucketed && pl->N > 1 && s->strategy.bucket_stages == GS_BUCKET_STAGES_FIRST;

    for (size_t i = 0; i < order.nops && rc == GS_OK; i++) {
        const gs_pipe_op *op = &order.ops[i];
        rc = op->backward ? backward_pass(&x, op->mb, op->chunk) : forward_pass(&x, op->mb, op->chunk);
    }
    if (rc != GS_OK)
        goto out;
    /* overlap_grad_reduce false (Megatron without --overlap-grad-reduce, Megatron-LM 2021's local
     * DDP): every unit's gradient is reduced after the stage's last backward event, the last
     * layer's first as the buckets fill in that order, the root (embedding, head) last */
    if (!s->strategy.overlap_grad_reduce && !x.chunk_buckets) {
        uint32_t after = x.last_compute;
        for (size_t k = x.part.nunits; k-- > 0 && rc == GS_OK;)
            if (!gs__is_root(&x, k))
                rc = gs__reduce_unit(&x, k, (uint32_t)(microbatches - 1), after);
        if (rc == GS_OK && x.root != SIZE_MAX)
            rc = gs__reduce_unit(&x, x.root, (uint32_t)(microbatches - 1), after);
        if (rc != GS_OK)
            goto out;
    } else if (!s->strategy.overlap_grad_reduce) {
        /* bucket_stages first: the same order, a one-bucket chunk's units (the root's with its
         * chunk) in one reduction where its first would be */
        uint32_t after = x.last_compute;
        for (uint64_t ch = x.v; ch-- > 0 && rc == GS_OK;) {
            if (gs__chunk_one_bucket(&x, ch)) {
                rc = gs__reduce_chunk(&x, ch, (uint32_t)(microbatches - 1), after);
                continue;
            }
            for (size_t k = x.part.nunits; k-- > 0 && rc == GS_OK;)
                if (!gs__is_root(&x, k) && gs__unit_chunk(&x, k) == ch)
                    rc = gs__reduce_unit(&x, k, (uint32_t)(microbatches - 1), after);
        }
        if (rc == GS_OK && x.root != SIZE_MAX && !gs__chunk_one_bucket(&x, gs__unit_chunk(&x, x.root)))
            rc = gs__reduce_unit(&x, x.root, (uint32_t)(microbatches - 1), after);
        if (rc != GS_OK)
            goto out;
    }

    /* epilogue: under sequence parallelism each TP rank's norm-weight gradients cover only its
     * slice of the tokens: one TP all-reduce of them (Megatron's
     * allreduce_sequence_parallel_grads) once the DP reductions are done; then the optimizer,
     * then ZeRO-1/2's parameter all-gather */
    uint32_t sp_norms = GS_NO_ID;
    if (s->strategy.sequence_parallel && x.tp > 1) {
        gs_evb b;
        gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_TP, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
        b.e.op = GS_COLL_ALLREDUCE;
        b.e.group = GS_GROUP_TP;
        b.e.peer = x.group[GS_GROUP_TP];
        b.e.group_size = x.tp;
        b.e.bytes = gs_sp_norm_params(s, x.part.layers, x.last) * pl->gb;
        gs__evb_add(&b, GS_LINK_DEPS, x.last_dp);
        gs__evb_add(&b, GS_LINK_DEPS, x.last_compute);
        if ((rc = gs__evb_emit(&x, &b, &sp_norms)) != GS_OK)
            goto out;
    }
    /* tied embeddings under a pipeline: the last stage holds its own copy of the word embedding
     * (engine/partition.c), and Megatron's _allreduce_word_embedding_grads sums the two copies'
     * gradients over the embedding group {first stage, last stage} once the DP reductions are
     * done. Two ranks: an exchange of the [vocab / tp, h] gradient, each side sending its own
     * (eager sends, so both directions run at once, as the group's all-reduce moves the same
     * bytes each way); the peers are the pipeline ring's wrap-around neighbours. */
    uint32_t emb_x[2] = {GS_NO_ID, GS_NO_ID};
    if (s->model.tied_embeddings && x.pp > 1 && (x.stage == 0 || x.last)) {
        for (int k = 0; k < 2 && rc == GS_OK; k++) {
            gs_evb b;
            gs__evb_init(&b, k ? GS_EV_RECV : GS_EV_SEND, GS_STREAM_PP, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
            b.e.peer = peer_rank(&x, !(x.stage == 0));
            b.e.bytes = x.part.word_params * pl->gb;
            gs__evb_add(&b, GS_LINK_DEPS, x.last_dp);
            gs__evb_add(&b, GS_LINK_DEPS, x.last_compute);
            rc = gs__evb_emit(&x, &b, &emb_x[k]);
        }
        if (rc != GS_OK)
            goto out;
    }
    {
        gs_evb b;
        gs__evb_init(&b, GS_EV_COMPUTE, GS_STREAM_COMPUTE, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
        b.e.op = GS_OP_OPTIMIZER;
        b.e.flops = 12.0 * (double)o_el;
        b.e.bytes = o_el * (2 * (pl->mixed ? 12 : 8) + pl->wb + pl->gb);
        gs__evb_add(&b, GS_LINK_DEPS, x.last_dp);
        gs__evb_add(&b, GS_LINK_DEPS, x.last_compute);
        gs__evb_add(&b, GS_LINK_DEPS, sp_norms);
        gs__evb_add(&b, GS_LINK_DEPS, emb_x[0]);
        gs__evb_add(&b, GS_LINK_DEPS, emb_x[1]);
        gs__evb_add(&b, GS_LINK_READS, x.adam_t);
        gs__evb_add(&b, GS_LINK_WRITES, x.master_t);
        for (size_t u = 0; u < x.part.nunits; u++)
            if (x.gathered_t[u] != GS_NO_ID) {
                gs__evb_add(&b, GS_LINK_FREES, x.gathered_t[u]);
                x.gathered_t[u] = GS_NO_ID;
            }
        uint32_t opt;
        if ((rc = gs__evb_emit(&x, &b, &opt)) != GS_OK)
            goto out;
        if (pl->ag_after_optimizer && pl->N > 1 && !x.param_gather_fwd)
            for (size_t u = 0; u < x.part.nunits && rc == GS_OK; u++) {
                uint32_t ev;
                if (!gs__chunk_one_bucket(&x, gs__unit_chunk(&x, u)))
                    rc = param_allgather(&x, u, opt, &ev);
                else if (x.gathered_ev[u] == GS_NO_ID) /* the chunk's one bucket, at its first unit */
                    rc = param_allgather_chunk(&x, gs__unit_chunk(&x, u), opt);
            }
    }
out:
    gs_pipe_order_fini(&order);
    bctx_fini(&x);
    return rc;
}

/* ---- the schedule ------------------------------------------------------------------------------- */

/* Rank `rank`'s pipeline neighbours (next and prev stage, the same dp and tp) where the
 * representative src_rank of its stage has src_next as its next: a send or recv of src_rank's
 * list to src_next is rank's to *next, any other to *prev. */
static void clone_p2p_peers(const gs_mesh *mesh, uint64_t src_rank, uint64_t rank, uint64_t *next, uint64_t *prev,
                            uint64_t *src_next)
{
    uint64_t c[GS_DIM_COUNT], sc[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, rank, c);
    gs_mesh_rank_coords(mesh, src_rank, sc);
    uint64_t pp = mesh->size[GS_DIM_PP];
    c[GS_DIM_PP] = (sc[GS_DIM_PP] + 1) % pp;
    *next = gs_mesh_coords_rank(mesh, c);
    c[GS_DIM_PP] = (sc[GS_DIM_PP] + pp - 1) % pp;
    *prev = gs_mesh_coords_rank(mesh, c);
    sc[GS_DIM_PP] = (sc[GS_DIM_PP] + 1) % pp;
    *src_next = gs_mesh_coords_rank(mesh, sc);
}

/* 0 when rank's groups have the sizes of src_rank's (the two are one class: rank's list is
 * src_rank's with its own group ids and pipeline peers), else GS_ERR_RUNTIME. */
static gs_status same_class(const gs_mesh *mesh, uint64_t src_rank, uint64_t rank)
{
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++) {
        uint64_t size, ssize;
        gs_group_of(mesh, (gs_group_kind)g, rank, &size);
        gs_group_of(mesh, (gs_group_kind)g, src_rank, &ssize);
        if (size != ssize)
            return GS_ERR_RUNTIME;
    }
    return GS_OK;
}

uint64_t gs_event_peer(const gs_mesh *mesh, const gs_rank_events *r, const gs_event *e)
{
    if (!r->shared)
        return e->peer;
    if (e->kind == GS_EV_COLLECTIVE)
        return gs_group_of(mesh, (gs_group_kind)e->group, r->rank, NULL);
    if (e->kind != GS_EV_SEND && e->kind != GS_EV_RECV)
        return e->peer;
    uint64_t next, prev, src_next;
    clone_p2p_peers(mesh, r->shared->rank, r->rank, &next, &prev, &src_next);
    return e->peer == src_next ? next : prev;
}

/* Copies the representative's list into r (another rank of the same stage), replacing group
 * indices and pipeline peers with r's own. GS_ERR_RUNTIME when the two ranks' groups differ in
 * size (then they are not one class). */
static gs_status clone_rank(const gs_mesh *mesh, const gs_rank_events *src, gs_rank_events *r)
{
    uint64_t grp[GS_GROUP_KIND_COUNT];
    if (same_class(mesh, src->rank, r->rank) != GS_OK)
        return GS_ERR_RUNTIME;
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
        grp[g] = gs_group_of(mesh, (gs_group_kind)g, r->rank, NULL);
    uint64_t next, prev, src_next;
    clone_p2p_peers(mesh, src->rank, r->rank, &next, &prev, &src_next);
    r->events = malloc((src->nevents ? src->nevents : 1) * sizeof *r->events);
    r->tensors = malloc((src->ntensors ? src->ntensors : 1) * sizeof *r->tensors);
    r->pool = malloc((src->npool ? src->npool : 1) * sizeof *r->pool);
    r->dups = malloc((src->ndups ? 2 * src->ndups : 1) * sizeof *r->dups);
    if (!r->events || !r->tensors || !r->pool || !r->dups)
        return GS_ERR_NOMEM;
    memcpy(r->events, src->events, src->nevents * sizeof *r->events);
    memcpy(r->tensors, src->tensors, src->ntensors * sizeof *r->tensors);
    memcpy(r->pool, src->pool, src->npool * sizeof *r->pool);
    if (src->ndups)
        memcpy(r->dups, src->dups, 2 * src->ndups * sizeof *r->dups);
    r->nevents = r->cap_events = src->nevents;
    r->ntensors = r->cap_tensors = src->ntensors;
    r->npool = r->cap_pool = src->npool;
    r->ndups = src->ndups;
    r->cap_dups = src->ndups ? 2 * src->ndups : 1;
    r->stage = src->stage;
    for (size_t i = 0; i < r->nevents; i++) {
        gs_event *e = &r->events[i];
        if (e->kind == GS_EV_COLLECTIVE)
            e->peer = grp[e->group];
        else if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV)
            e->peer = e->peer == src_next ? next : prev;
    }
    return GS_OK;
}

/* Makes r (another rank of src's stage) borrow src's arrays: gs_event_peer maps the peers.
 * GS_ERR_RUNTIME when the two are not one class. */
static gs_status share_rank(const gs_mesh *mesh, const gs_rank_events *src, gs_rank_events *r)
{
    if (same_class(mesh, src->rank, r->rank) != GS_OK)
        return GS_ERR_RUNTIME;
    r->events = src->events;
    r->tensors = src->tensors;
    r->pool = src->pool;
    r->dups = src->dups;
    r->nevents = r->cap_events = src->nevents;
    r->ntensors = r->cap_tensors = src->ntensors;
    r->npool = r->cap_pool = src->npool;
    r->ndups = r->cap_dups = src->ndups;
    r->stage = src->stage;
    r->shared = src;
    return GS_OK;
}

/* Copies (or, when they are not one class, builds) every non-representative rank; ranks are
 * split into contiguous blocks over up to GS_BUILD_THREADS threads (first-touch page faults
 * dominate this step). Each rank's list is written by one thread only: the result does not
 * depend on the thread count. */
#define GS_BUILD_THREADS 8

typedef struct clone_job {
    const gs_scenario *s;
    const gs_mesh *mesh;
    gs_schedule *sch;
    const uint64_t *rep;
    uint64_t lo, hi;
    int shared;          /* 1: borrow the representative's arrays (share_rank), 0: copy them */
    gs_status rc;
    gs_error err;
} clone_job;

static void *clone_worker(void *arg)
{
    clone_job *j = arg;
    for (uint64_t i = j->lo; i < j->hi && j->rc == GS_OK; i++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(j->mesh, i, c);
        if (j->rep[c[GS_DIM_PP]] == i)
            continue;
        gs_rank_events *r = &j->sch->ranks[i];
        r->rank = i;
        r->class_size = 1;
        r->unnamed = j->sch->ranks[j->rep[c[GS_DIM_PP]]].unnamed;
        const gs_rank_events *src = &j->sch->ranks[j->rep[c[GS_DIM_PP]]];
        gs_status rc = j->shared ? share_rank(j->mesh, src, r) : clone_rank(j->mesh, src, r);
        if (rc == GS_ERR_RUNTIME) /* not identical up to group ids (uneven HSDP groups): build */
            rc = build_rank(j->s, j->mesh, j->sch->microbatches, r, &j->err);
        else if (rc != GS_OK)
            gs_error_set(&j->err, rc, "out of memory copying rank %" PRIu64 "'s events", i);
        if (rc == GS_OK && !r->shared)
            gs_rank_finish(r);
        j->rc = rc;
    }
    return NULL;
}

static gs_status clone_all(const gs_scenario *s, const gs_mesh *mesh, gs_schedule *sch, const uint64_t *rep,
                           int shared, gs_error *err)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t n = sch->nranks, nt = ncpu > 1 ? (uint64_t)ncpu : 1;
    if (nt > GS_BUILD_THREADS)
        nt = GS_BUILD_THREADS;
    if (nt > n / 64 + 1)
        nt = n / 64 + 1;
    clone_job jobs[GS_BUILD_THREADS];
    pthread_t th[GS_BUILD_THREADS];
    int started[GS_BUILD_THREADS] = {0};
    for (uint64_t t = 0; t < nt; t++) {
        jobs[t] = (clone_job){s, mesh, sch, rep, n * t / nt, n * (t + 1) / nt, shared, GS_OK, {GS_OK, {0}}};
        started[t] = t > 0 && pthread_create(&th[t], NULL, clone_worker, &jobs[t]) == 0;
        if (t > 0 && !started[t])
            clone_worker(&jobs[t]);
    }
    clone_worker(&jobs[0]);
    gs_status rc = GS_OK;
    for (uint64_t t = 0; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        if (rc == GS_OK && jobs[t].rc != GS_OK) {
            rc = jobs[t].rc;
            if (err)
                *err = jobs[t].err;
        }
    }
    return rc;
}

static gs_status schedule_build(const gs_scenario *s, const gs_mesh *mesh, int exact, int named, int shared,
                                gs_schedule **out, gs_error *err)
{
    gs_status rc = GS_OK;
    *out = NULL;
    gs_schedule *sch = calloc(1, sizeof *sch);
    if (!sch)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    snprintf(sch->scenario, sizeof sch->scenario, "%s", s->name);
    sch->mesh = *mesh;
    sch->exact = exact ? 1 : 0;
    uint64_t dp = mesh->size[GS_DIM_DP], pp = mesh->size[GS_DIM_PP];
    sch->microbatches = s->batch.global_seqs / (s->batch.micro_seqs * dp);
    if (sch->microbatches == 0)
        sch->microbatches = 1;
    uint64_t n = exact ? mesh->world : pp;
    if ((rc = gs_scenario_check_schedule_size(s, mesh, sch->microbatches, exact, err)) != GS_OK)
        goto out;
    if (n > SIZE_MAX / sizeof *sch->ranks) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%" PRIu64 " rank lists is more than this machine can hold", n);
        goto out;
    }
    sch->ranks = calloc((size_t)n, sizeof *sch->ranks);
    if (!sch->ranks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %" PRIu64 " rank lists (try without --exact)", n);
        goto out;
    }
    sch->nranks = (size_t)n;
    /* Class representatives first (dp = tp = 0 of each stage); on the exact path every other rank
     * is its stage representative's copy with its own group ids and pipeline peers. */
    uint64_t *rep = exact ? malloc((size_t)pp * sizeof *rep) : NULL;
    if (exact && !rep) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint64_t st = 0; st < pp && rc == GS_OK; st++) {
        uint64_t c[GS_DIM_COUNT] = {0};
        c[GS_DIM_PP] = st;
        uint64_t rank = gs_mesh_coords_rank(mesh, c);
        gs_rank_events *r = &sch->ranks[exact ? rank : st];
        r->rank = rank;
        r->class_size = exact ? 1 : mesh->world / pp;
        r->unnamed = !named;
        if (st > 0 && !exact) { /* stages differ by a few events: room for the previous one's */
            const gs_rank_events *prev = &sch->ranks[st - 1];
            if (gs_rank_reserve(r, prev->nevents, prev->npool, prev->ntensors) != GS_OK)
                rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory building rank %" PRIu64, rank);
        }
        if (rc == GS_OK)
            rc = build_rank(s, mesh, sch->microbatches, r, err);
        if (rc == GS_OK)
            gs_rank_finish(r);
        if (exact)
            rep[st] = rank;
    }
    if (exact && rc == GS_OK)
        rc = clone_all(s, mesh, sch, rep, shared, err);
    free(rep);
out:
    if (rc != GS_OK) {
        gs_schedule_destroy(sch);
        return rc;
    }
    *out = sch;
    return GS_OK;
}

gs_status gs_schedule_build(const gs_scenario *s, const gs_mesh *mesh, int exact, gs_schedule **out, gs_error *err)
{
    return schedule_build(s, mesh, exact, 1, 0, out, err);
}

gs_status gs_schedule_build_unnamed(const gs_scenario *s, const gs_mesh *mesh, int exact, gs_schedule **out,
                                    gs_error *err)
{
    return schedule_build(s, mesh, exact, 0, 0, out, err);
}

gs_status gs_schedule_build_shared(const gs_scenario *s, const gs_mesh *mesh, int named, gs_schedule **out,
                                   gs_error *err)
{
    return schedule_build(s, mesh, 1, named, 1, out, err);
}

/* ---- the ledger half of validation ---------------------------------------------------------------- */

gs_status gs__schedule_check_ledger(const gs_schedule *sch, const gs_scenario *s, gs_error *err)
{
    gs_ledger *l = NULL;
    gs_status rc = gs_ledger_create(s, &sch->mesh, &l, err);
    if (rc != GS_OK)
        return rc;
    for (size_t i = 0; i < sch->nranks && rc == GS_OK; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        const gs_ledger_rank *lr = &l->ranks[r->stage];
        uint64_t sent[GS_TRAFFIC_KIND_COUNT] = {0};
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            uint64_t b = gs_event_sent_bytes(e);
            if (e->kind == GS_EV_SEND)
                sent[GS_TRAFFIC_PP] += b;
            else if (e->kind == GS_EV_COLLECTIVE) {
                if (e->group == GS_GROUP_TP)
                    sent[GS_TRAFFIC_TP] += b;
                else if (e->op == GS_COLL_ALLGATHER)
                    sent[GS_TRAFFIC_DP_ALLGATHER] += b;
                else if (e->op == GS_COLL_REDUCE_SCATTER)
                    sent[GS_TRAFFIC_DP_REDUCE_SCATTER] += b;
                else
                    sent[GS_TRAFFIC_DP_ALLREDUCE] += b;
            }
        }
        for (int k = 0; k < GS_TRAFFIC_KIND_COUNT && rc == GS_OK; k++)
            if (sent[k] != lr->traffic[k])
                rc = gs_error_set(err, GS_ERR_RUNTIME,
                                  "rank %" PRIu64 ": its %s events send %" PRIu64 " B per step but the traffic "
                                  "ledger says %" PRIu64 " B", r->rank, gs_traffic_kind_name((gs_traffic_kind)k),
                                  sent[k], lr->traffic[k]);
        if (rc != GS_OK)
            break;
        uint64_t peak = gs_rank_peak_bytes(r);
        if (peak != lr->peak_bytes)
            rc = gs_error_set(err, GS_ERR_RUNTIME,
                              "rank %" PRIu64 ": the memory high-water mark of its events is %" PRIu64
                              " B but the memory ledger's peak is %" PRIu64 " B (at %s)", r->rank, peak,
                              lr->peak_bytes, lr->peak_where);
    }
    gs_ledger_destroy(l);
    return rc;
}
