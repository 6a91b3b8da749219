/* Schedule builder: turns a scenario into one step's events per rank (or per rank class).
 *
 * This file owns the order: the pipeline passes (engine/pipeline.c; each pass is built by
 * engine/build_pass.c), and inside them the FSDP / ZeRO / DDP collectives of engine/build_dp.c
 * around the compute of engine/build_layer.c, the pipeline sends and receives, and the tensors
 * each event allocates and frees. The semantics (which tensors live
 * when) are those the memory ledger's moments assume (engine/ledger_peak.c, backward_moments); the
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
#include "engine/framework.h"
#include "engine/roles.h"
#include "engine/schedule_internal.h"

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
    if (b->e.kind == GS_EV_COMPUTE && x->compute_wait != GS_NO_ID) {
        gs__evb_add(b, GS_LINK_DEPS, x->compute_wait);
        lists[GS_LINK_DEPS] = b->list[GS_LINK_DEPS];
        x->compute_wait = GS_NO_ID;
    }
    gs_status rc = gs_rank_add_event(x->r, &b->e, lists, id);
    if (rc != GS_OK)
        return gs_error_set(x->err, rc, "out of memory adding events for rank %" PRIu64, x->rank);
    if (b->e.kind == GS_EV_COMPUTE)
        x->last_compute = *id;
    if (b->e.stream == GS_STREAM_DP)
        x->last_dp = *id;
    return GS_OK;
}

gs_status gs__tensor(gs_bctx *x, const gs_tensor *t, uint32_t *id)
{
    gs_tensor c = *t;
    c.resident = (uint8_t)(t->resident ? 1 : 0);
    gs_status rc = gs_rank_add_tensor(x->r, &c, id);
    if (rc != GS_OK)
        return gs_error_set(x->err, rc, "out of memory adding tensors for rank %" PRIu64, x->rank);
    return GS_OK;
}

int32_t gs__global_layer(const gs_bctx *x, int64_t local)
{
    return (int32_t)gs_pipe_global_layer(x->mesh, x->s->model.layers, x->v, x->stage, (uint64_t)local);
}

/* ---- one rank ------------------------------------------------------------------------------------ */

static void bctx_fini(gs_bctx *x)
{
    gs_partition_fini(&x->part);
    free(x->param_t);
    free(x->grad_t);
    free(x->hold_t);
    free(x->gathered_t);
    free(x->gathered_ev);
    free(x->copy_pending);
    free(x->ugrad_t);
    free(x->reduce_ev);
    free(x->stash_t);
    free(x->emb_mask_t);
    free(x->head_act_t);
    free(x->xent_ev);
}

/* The builder's context for rank r: its place, partition, shard plan, activation sizes, groups,
 * pipeline order and the per-unit and per-slot id arrays. */
static gs_status bctx_init(gs_bctx *x, const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches,
                           gs_rank_events *r, gs_pipe_order *order)
{
    gs_status rc;
    gs_error *err = x->err;
    x->s = s;
    x->mesh = mesh;
    x->r = r;
    x->rank = r->rank;
    uint64_t coords[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, r->rank, coords);
    x->stage = coords[GS_DIM_PP];
    x->pp = mesh->size[GS_DIM_PP];
    x->tp = mesh->size[GS_DIM_TP];
    x->last = x->stage + 1 == x->pp;
    x->mb_count = microbatches;
    x->v = gs_strategy_chunks(&s->strategy, x->pp);
    x->last_compute = x->last_dp = x->compute_wait = GS_NO_ID;
    x->root_grad_t = GS_NO_ID;
    r->stage = x->stage;
    if ((rc = gs_partition_stage(s, mesh, x->stage, &x->part, err)) != GS_OK)
        return rc;
    gs_shard_plan_init(s, mesh, r->rank, microbatches, &x->plan);
    if ((rc = gs_ledger_act_sizes(s, mesh, x->stage, &x->act, err)) != GS_OK)
        return rc;
    x->root = x->part.has_root ? x->part.nunits - 1 : SIZE_MAX;
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
        x->group[g] = gs_group_of(mesh, (gs_group_kind)g, r->rank, &x->group_size[g]);
    x->dp_group = s->strategy.sharding == GS_SHARD_HYBRID_SHARD ? GS_GROUP_DP_INTRA : GS_GROUP_DP;
    if (s->model.moe.experts && s->strategy.moe_dispatcher == GS_MOE_FLEX) /* once, not per MoE block */
        x->moe_route = gs_moe_flex_route_of(&s->model.moe, mesh, r->rank, mesh->ep ? mesh->ep : 1, gs_mesh_etp(mesh));
    if ((rc = gs_pipe_order_build(s->strategy.pipeline, x->pp, x->stage, microbatches, x->v,
                                  s->strategy.ep_overlap, order, err)) != GS_OK)
        return rc;
    /* in-flight micro-batches span fewer than warm-up + 2 + 2 p v consecutive ids */
    x->window = order->warmup + 2 + 2 * x->pp * x->v;
    if (x->window > microbatches)
        x->window = microbatches;
    size_t nu = x->part.nunits ? x->part.nunits : 1;
    x->param_t = malloc(nu * sizeof *x->param_t);
    x->grad_t = malloc(nu * sizeof *x->grad_t);
    x->gathered_t = malloc(nu * sizeof *x->gathered_t);
    x->gathered_ev = malloc(nu * sizeof *x->gathered_ev);
    x->copy_pending = calloc(nu, sizeof *x->copy_pending);
    x->ugrad_t = malloc(nu * sizeof *x->ugrad_t);
    x->reduce_ev = malloc(nu * sizeof *x->reduce_ev);
    x->stash_t = malloc((size_t)(x->window * (x->part.layers ? x->part.layers : 1)) * sizeof *x->stash_t);
    x->emb_mask_t = malloc((size_t)x->window * sizeof *x->emb_mask_t);
    x->head_act_t = malloc((size_t)x->window * sizeof *x->head_act_t);
    x->xent_ev = malloc((size_t)x->window * sizeof *x->xent_ev);
    if (x->plan.hold_full_grads)
        x->hold_t = malloc(nu * sizeof *x->hold_t);
    if (!x->param_t || !x->grad_t || !x->gathered_t || !x->gathered_ev || !x->copy_pending || !x->ugrad_t ||
        !x->reduce_ev || !x->stash_t || !x->emb_mask_t || !x->head_act_t || !x->xent_ev ||
        (x->plan.hold_full_grads && !x->hold_t))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory building rank %" PRIu64, r->rank);
    for (size_t i = 0; i < x->window; i++)
        x->emb_mask_t[i] = x->head_act_t[i] = x->xent_ev[i] = GS_NO_ID;
    return GS_OK;
}

/* The tensors resident for the whole step: each unit's parameters and gradients (and the no_sync
 * full gradient), master weights, Adam state, workspace, scratch; CPU offload puts the states on
 * the host. *o_el: the optimizer's elements. */
static gs_status resident_tensors(gs_bctx *x, uint64_t *o_el)
{
    gs_status rc;
    const gs_shard_plan *pl = &x->plan;
    gs_rank_events *r = x->r;
    uint64_t shard = 0;
    for (size_t u = 0; u < x->part.nunits; u++) {
        uint64_t p = x->part.units[u].params, sh = ceil_div(p, gs_shard_ranks(pl, x->part.units[u].expert));
        shard += sh;
        int32_t layer = gs__unit_layer(x, u);
        /* FP8: a resident (unsharded) layer unit also holds Transformer Engine's cached FP8 copy
         * and transpose, fp8_cache bytes per element, as the ledger counts (gs__ledger_stage_states) */
        uint64_t held = pl->wb + (!pl->stored_sharded && !gs__is_root(x, u) ? pl->fp8_cache : 0);
        gs_tensor pt = {.kind = GS_T_PARAM_SHARD, .bytes = pl->stored_sharded ? sh * pl->wb : p * held, .layer = layer,
                        .unit = (uint32_t)u, .resident = 1};
        gs_tensor gt = {.kind = pl->shard_grads ? GS_T_GRAD_SHARD : GS_T_GRAD,
                        .bytes = (pl->shard_grads ? sh : p) * pl->gb, .layer = layer, .unit = (uint32_t)u,
                        .resident = 1};
        if ((rc = gs__tensor(x, &pt, &x->param_t[u])) != GS_OK || (rc = gs__tensor(x, &gt, &x->grad_t[u])) != GS_OK)
            return rc;
        if (pl->offload && pl->stored_sharded) {
            r->tensors[x->param_t[u]].on_host = 1;
            r->tensors[x->grad_t[u]].on_host = 1;
        }
        gs_tensor ht = {.kind = GS_T_GRAD, .bytes = p * pl->gb, .layer = layer, .unit = (uint32_t)u, .resident = 1};
        if (pl->hold_full_grads && (rc = gs__tensor(x, &ht, &x->hold_t[u])) != GS_OK)
            return rc;
        x->gathered_t[u] = x->gathered_ev[u] = x->ugrad_t[u] = x->reduce_ev[u] = GS_NO_ID;
    }
    *o_el = pl->shard_opt ? shard : x->part.params;
    x->master_t = x->adam_t = GS_NO_ID;
    gs_tensor mt = {.kind = GS_T_MASTER, .bytes = *o_el * gs_master_bytes(&x->s->strategy), .layer = GS_LAYER_NONE,
                    .resident = 1};
    gs_tensor at = {.kind = GS_T_OPT_STATE, .bytes = *o_el * gs_adam_state_bytes(&x->s->strategy), .layer = GS_LAYER_NONE,
                    .resident = 1};
    if ((pl->mixed && (rc = gs__tensor(x, &mt, &x->master_t)) != GS_OK) ||
        (rc = gs__tensor(x, &at, &x->adam_t)) != GS_OK)
        return rc;
    if (pl->offload) {
        if (x->master_t != GS_NO_ID)
            r->tensors[x->master_t].on_host = 1;
        r->tensors[x->adam_t].on_host = 1;
    }
    gs_tensor wt = {.kind = GS_T_WORKSPACE, .bytes = gs_workspace_bytes(x->s, x->mesh, NULL),
                    .layer = GS_LAYER_NONE, .resident = 1};
    if ((rc = gs__tensor(x, &wt, &x->ws_t)) != GS_OK)
        return rc;
    return gs__scratch_tensors(x);
}

/* overlap_grad_reduce false (Megatron without --overlap-grad-reduce, Megatron-LM 2021's local
 * DDP): every unit's gradient is reduced after the stage's last backward event, the last layer's
 * first as the buckets fill in that order, the root (embedding, head) last; under bucket_stages
 * first a one-bucket chunk's units (the root's with its chunk) in one reduction where its first
 * would be. */
static gs_status reductions_after_backward(gs_bctx *x)
{
    gs_status rc = GS_OK;
    uint32_t mb = (uint32_t)(x->mb_count - 1), after = x->last_compute;
    if (!x->chunk_buckets) {
        for (size_t k = x->part.nunits; k-- > 0 && rc == GS_OK;)
            if (!gs__is_root(x, k))
                rc = gs__reduce_unit(x, k, mb, after);
        if (rc == GS_OK && x->root != SIZE_MAX)
            rc = gs__reduce_unit(x, x->root, mb, after);
        return rc;
    }
    for (uint64_t ch = x->v; ch-- > 0 && rc == GS_OK;) {
        if (gs__chunk_one_bucket(x, ch)) {
            rc = gs__reduce_chunk(x, ch, mb, after);
            continue;
        }
        for (size_t k = x->part.nunits; k-- > 0 && rc == GS_OK;)
            if (!gs__is_root(x, k) && gs__unit_chunk(x, k) == ch)
                rc = gs__reduce_unit(x, k, mb, after);
    }
    if (rc == GS_OK && x->root != SIZE_MAX && !gs__chunk_one_bucket(x, gs__unit_chunk(x, x->root)))
        rc = gs__reduce_unit(x, x->root, mb, after);
    return rc;
}

/* Under sequence parallelism each TP rank's norm-weight (and MoE router) gradients cover only its
 * slice of the tokens: one TP all-reduce of them (Megatron's allreduce_sequence_parallel_grads)
 * once the DP reductions are done. *ev: its id (GS_NO_ID: none). */
static gs_status sp_norm_grads(gs_bctx *x, uint32_t *ev)
{
    *ev = GS_NO_ID;
    if (!(x->s->strategy.sequence_parallel && x->tp > 1))
        return GS_OK;
    gs_evb b;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_TP, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
    b.e.op = GS_COLL_ALLREDUCE;
    b.e.role = GS_ROLE_TP_NORM_GRADS;
    b.e.group = GS_GROUP_TP;
    b.e.peer = x->group[GS_GROUP_TP];
    b.e.group_size = x->tp;
    b.e.bytes = gs_sp_norm_params(x->s, x->mesh, x->stage, x->part.layers) * x->plan.gb;
    gs__evb_add(&b, GS_LINK_DEPS, x->last_dp);
    gs__evb_add(&b, GS_LINK_DEPS, x->last_compute);
    return gs__evb_emit(x, &b, ev);
}

/* Tied embeddings under a pipeline: the last stage holds its own copy of the word embedding
 * (engine/partition.c), and Megatron's _allreduce_word_embedding_grads sums the two copies'
 * gradients over the embedding group {first stage, last stage} once the DP reductions are done.
 * Two ranks: an exchange of the [vocab / tp, h] gradient, each side sending its own (eager sends,
 * so both directions run at once, as the group's all-reduce moves the same bytes each way); the
 * peers are the pipeline ring's wrap-around neighbours. ev[0], ev[1]: the send and the receive. */
static gs_status tied_exchange(gs_bctx *x, uint32_t ev[2])
{
    gs_status rc = GS_OK;
    ev[0] = ev[1] = GS_NO_ID;
    if (!(gs_model_embedding_shared(&x->s->model) && x->pp > 1 && (x->stage == 0 || x->last)))
        return GS_OK;
    for (int k = 0; k < 2 && rc == GS_OK; k++) {
        gs_evb b;
        gs__evb_init(&b, k ? GS_EV_RECV : GS_EV_SEND, GS_STREAM_PP, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
        b.e.role = k ? GS_ROLE_TIED_RECV : GS_ROLE_TIED_SEND;
        b.e.peer = gs__peer_rank(x, !(x->stage == 0));
        b.e.bytes = x->part.word_params * x->plan.gb;
        gs__evb_add(&b, GS_LINK_DEPS, x->last_dp);
        gs__evb_add(&b, GS_LINK_DEPS, x->last_compute);
        rc = gs__evb_emit(x, &b, &ev[k]);
    }
    return rc;
}

/* The optimizer on this rank's shard (frees the step's gathers), after the reductions, SP's norm
 * all-reduce and the tied exchange; then ZeRO-1/2's gather of the updated parameters. */
static gs_status optimizer(gs_bctx *x, uint64_t o_el, uint32_t sp_norms, const uint32_t emb_x[2])
{
    const gs_shard_plan *pl = &x->plan;
    gs_status rc;
    gs_evb b;
    gs__evb_init(&b, GS_EV_COMPUTE, GS_STREAM_COMPUTE, GS_PHASE_OPTIM, GS_LAYER_NONE, 0);
    b.e.op = GS_OP_OPTIMIZER;
    b.e.role = GS_ROLE_OPTIMIZER;
    b.e.flops = 12.0 * (double)o_el;
    /* the master, m and v read and written; the gradient read and the working parameter written */
    b.e.bytes = o_el * (2 * (gs_master_bytes(&x->s->strategy) + gs_adam_state_bytes(&x->s->strategy)) + pl->wb +
                        pl->gb);
    gs__evb_add(&b, GS_LINK_DEPS, x->last_dp);
    gs__evb_add(&b, GS_LINK_DEPS, x->last_compute);
    gs__evb_add(&b, GS_LINK_DEPS, sp_norms);
    gs__evb_add(&b, GS_LINK_DEPS, emb_x[0]);
    gs__evb_add(&b, GS_LINK_DEPS, emb_x[1]);
    gs__evb_add(&b, GS_LINK_READS, x->adam_t);
    gs__evb_add(&b, GS_LINK_WRITES, x->master_t);
    for (size_t u = 0; u < x->part.nunits; u++)
        if (x->gathered_t[u] != GS_NO_ID) {
            gs__evb_add(&b, GS_LINK_FREES, x->gathered_t[u]);
            x->gathered_t[u] = GS_NO_ID;
        }
    uint32_t opt;
    if ((rc = gs__evb_emit(x, &b, &opt)) != GS_OK)
        return rc;
    if (!(pl->ag_after_optimizer && pl->N > 1 && !x->param_gather_fwd))
        return GS_OK;
    for (size_t u = 0; u < x->part.nunits && rc == GS_OK; u++) {
        uint32_t ev;
        if (!gs__chunk_one_bucket(x, gs__unit_chunk(x, u)))
            rc = gs__param_allgather(x, u, opt, &ev);
        else if (x->gathered_ev[u] == GS_NO_ID) /* the chunk's one bucket, at its first unit */
            rc = gs__param_allgather_chunk(x, gs__unit_chunk(x, u), opt);
    }
    return rc;
}

static gs_status build_rank(const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches, gs_rank_events *r,
                            gs_error *err)
{
    gs_bctx x;
    gs_pipe_order order = {NULL, 0, 0};
    gs_status rc;
    uint64_t o_el = 0;
    uint32_t sp_norms, emb_x[2];
    memset(&x, 0, sizeof x);
    x.err = err;
    if ((rc = bctx_init(&x, s, mesh, microbatches, r, &order)) != GS_OK || (rc = resident_tensors(&x, &o_el)) != GS_OK)
        goto out;
    const gs_shard_plan *pl = &x.plan;
    gs_framework fw = gs_framework_resolve(s->strategy.framework, (int)s->strategy.sharding);
    x.gather_copies = gs_framework_gather_copies(fw, (int)s->strategy.sharding, s->strategy.torch_fsdp2);
    x.grad_copies = gs_framework_grad_copies(fw, (int)s->strategy.sharding, s->strategy.torch_fsdp2);
    /* prologue: the root unit, gathered for the whole step */
    if (pl->gather_root && x.root != SIZE_MAX && (rc = gs__gather_unit(&x, x.root, GS_PHASE_FWD, 0, GS_NO_ID)) != GS_OK)
        goto out;
    /* ZeRO-1/2 with overlap_param_gather: the forward issues the gathers (forward_gathers) */
    x.param_gather_fwd = pl->ag_after_optimizer && pl->N > 1 && s->strategy.overlap_param_gather;
    x.chunk_buckets = pl->bucketed && pl->N > 1 && s->strategy.bucket_stages == GS_BUCKET_STAGES_FIRST;
    for (size_t i = 0; i < order.nops && rc == GS_OK; i++) {
        const gs_pipe_op *op = &order.ops[i], *next = i + 1 < order.nops ? &order.ops[i + 1] : NULL;
        if (s->strategy.ep_overlap && !op->backward && next && next->backward) { /* a steady-state pair */
            rc = gs__combined_pass(&x, op->mb, op->chunk, next->mb, next->chunk);
            i++;
        } else {
            rc = op->backward ? gs__backward_pass(&x, op->mb, op->chunk) : gs__forward_pass(&x, op->mb, op->chunk);
        }
    }
    if (rc == GS_OK && !s->strategy.overlap_grad_reduce)
        rc = reductions_after_backward(&x);
    /* epilogue: SP's norm gradients, the tied exchange, then the optimizer and ZeRO's gathers */
    if (rc == GS_OK && (rc = sp_norm_grads(&x, &sp_norms)) == GS_OK && (rc = tied_exchange(&x, emb_x)) == GS_OK)
        rc = optimizer(&x, o_el, sp_norms, emb_x);
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
    uint64_t dp = gs_mesh_dp_replicas(mesh), pp = mesh->size[GS_DIM_PP];
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
                else if (e->group == GS_GROUP_CP || e->group == GS_GROUP_CP_A2A || e->group == GS_GROUP_CP_P2P)
                    sent[GS_TRAFFIC_CP] += b;
                else if (e->group == GS_GROUP_ETP) /* the experts' TP: the ledger's tp line */
                    sent[GS_TRAFFIC_TP] += b;
                else if (e->group == GS_GROUP_EP || e->group == GS_GROUP_TPEP)
                    sent[GS_TRAFFIC_EP] += b;
                else if (e->group == GS_GROUP_STAGE)
                    sent[GS_TRAFFIC_FP8_AMAX] += b;
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
