/* Schedule builder, data-parallel side: FSDP all-gathers of units (with CPU offload's copies),
 * and gradient reductions: FSDP reduce-scatters (HSDP: then the cross-node all-reduce of the
 * shard), DDP / ZeRO buckets (bucket_stages first: a model chunk's in one). The pass order that
 * places them is engine/build.c's. */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "engine/build_internal.h"
#include "engine/roles.h"

int gs__is_root(const gs_bctx *x, size_t u)
{
    return x->part.has_root && u + 1 == x->part.nunits;
}

int gs__covers(const gs_unit *u, int64_t l)
{
    return u->layer_begin != GS_PART_ROOT && u->layer_begin <= l && l <= u->layer_end;
}

int32_t gs__unit_layer(const gs_bctx *x, size_t u)
{
    if (gs__is_root(x, u))
        return GS_LAYER_NONE;
    return gs__global_layer(x, x->part.units[u].layer_end);
}

/* All-gather unit u (allocating its gathered copy) over its shard group: the DP (or HSDP shard)
 * group, or a MoE block's routed experts' expert-data-parallel group; with CPU offload an H2D copy
 * of the shard comes first and allocates the copy's destination. */
gs_status gs__gather_unit(gs_bctx *x, size_t u, gs_phase phase, uint32_t mb, uint32_t dep)
{
    gs_status rc;
    /* a layer unit under FP8: gathered as gather_wb bytes per element, held with its FP8 copies
     * (gwb); the root unit (embedding, head) in the working precision */
    int root = gs__is_root(x, u);
    int ex = x->part.units[u].expert;
    gs_group_kind g = ex ? GS_GROUP_EDP : x->dp_group;
    uint64_t N = gs_shard_ranks(&x->plan, ex), wb = root ? x->plan.wb : x->plan.gather_wb,
             params = x->part.units[u].params;
    uint64_t held = root ? x->plan.wb : x->plan.gwb;
    uint32_t t;
    gs_tensor full = {.kind = GS_T_PARAM_FULL, .bytes = params * held, .layer = gs__unit_layer(x, u), .mb = mb,
                      .unit = (uint32_t)u};
    if ((rc = gs__tensor(x, &full, &t)) != GS_OK)
        return rc;
    gs_evb b;
    uint32_t copy = GS_NO_ID;
    if (x->plan.offload) {
        gs__evb_init(&b, GS_EV_COPY_H2D, GS_STREAM_COPY, phase, gs__unit_layer(x, u), mb);
        b.e.role = GS_ROLE_OFFLOAD_FETCH;
        b.e.unit = (uint32_t)u;
        b.e.bytes = ceil_div(params, N) * wb;
        gs__evb_add(&b, GS_LINK_DEPS, dep);
        gs__evb_add(&b, GS_LINK_READS, x->param_t[u]);
        gs__evb_add(&b, GS_LINK_ALLOCS, t);
        if ((rc = gs__evb_emit(x, &b, &copy)) != GS_OK)
            return rc;
    }
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, phase, gs__unit_layer(x, u), mb);
    b.e.op = GS_COLL_ALLGATHER;
    b.e.role = GS_ROLE_UNIT_GATHER;
    b.e.group = (uint8_t)g;
    b.e.peer = x->group[g];
    b.e.group_size = x->group_size[g];
    b.e.unit = (uint32_t)u;
    b.e.bytes = N * ceil_div(params, N) * wb;
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    gs__evb_add(&b, GS_LINK_DEPS, copy);
    gs__evb_add(&b, GS_LINK_READS, x->param_t[u]);
    gs__evb_add(&b, GS_LINK_WRITES, t);
    if (copy == GS_NO_ID)
        gs__evb_add(&b, GS_LINK_ALLOCS, t);
    uint32_t ev;
    if ((rc = gs__evb_emit(x, &b, &ev)) != GS_OK)
        return rc;
    x->gathered_t[u] = t;
    x->gathered_ev[u] = ev;
    x->copy_pending[u] = (uint8_t)x->gather_copies;
    return GS_OK;
}

/* A gathered unit's copy-out (FSDP2's foreach_all_gather_copy_out, ZeRO-3's coalesced handle's
 * wait): the compute stream waits for the all-gather, then reads the gathered buffer and writes
 * each parameter's tensor, the gather's bytes twice. It runs where the layer first needs the
 * unit (FSDP2's wait_for_unshard in the pre-forward and pre-backward hooks, DeepSpeed's
 * fetch_sub_module), so a prefetched gather still overlaps the layers before. */
gs_status gs__copy_out_unit(gs_bctx *x, size_t u, gs_phase phase, uint32_t mb)
{
    if (u == SIZE_MAX || !x->copy_pending[u] || x->gathered_t[u] == GS_NO_ID)
        return GS_OK;
    gs_evb b;
    gs__evb_init(&b, GS_EV_COMPUTE, GS_STREAM_COMPUTE, phase == GS_PHASE_FWD ? GS_PHASE_FWD : GS_PHASE_BWD,
                 gs__unit_layer(x, u), mb);
    b.e.op = GS_OP_COPY;
    b.e.role = GS_ROLE_UNIT_COPY_OUT;
    b.e.unit = (uint32_t)u;
    b.e.bytes = 2 * x->r->events[x->gathered_ev[u]].bytes; /* the all-gather's output, read and written */
    gs__evb_add(&b, GS_LINK_DEPS, x->gathered_ev[u]);
    gs__evb_add(&b, GS_LINK_READS, x->gathered_t[u]);
    gs__evb_add(&b, GS_LINK_WRITES, x->gathered_t[u]);
    uint32_t ev;
    gs_status rc = gs__evb_emit(x, &b, &ev);
    if (rc != GS_OK)
        return rc;
    x->gathered_ev[u] = ev;
    x->copy_pending[u] = 0;
    return GS_OK;
}

/* FSDP2's copy-in before a reduce-scatter (foreach_reduce's chunk_cat): the unit's unsharded
 * gradient read in the working precision and written into the reduce-scatter's input in the
 * reduce dtype, on the compute stream, after `dep` (the unit's last backward). *ev: the copy. */
static gs_status grad_copy_in(gs_bctx *x, size_t u, uint32_t mb, uint32_t dep, uint32_t grad, uint32_t *ev)
{
    uint64_t N = gs_shard_ranks(&x->plan, x->part.units[u].expert);
    gs_evb b;
    gs__evb_init(&b, GS_EV_COMPUTE, GS_STREAM_COMPUTE, GS_PHASE_BWD, gs__unit_layer(x, u), mb);
    b.e.op = GS_OP_COPY;
    b.e.role = GS_ROLE_GRAD_COPY_IN;
    b.e.unit = (uint32_t)u;
    b.e.bytes = N * ceil_div(x->part.units[u].params, N) * (x->plan.wb + x->plan.gb);
    gs__evb_add(&b, GS_LINK_DEPS, dep);
    gs__evb_add(&b, GS_LINK_READS, grad);
    return gs__evb_emit(x, &b, ev);
}

/* Gathers every unit covering stage-local layer l that is not live. */
gs_status gs__gather_covering(gs_bctx *x, int64_t l, gs_phase phase, uint32_t mb, uint32_t dep)
{
    const size_t *cov;
    size_t ncov = gs_partition_units_covering(&x->part, l, &cov);
    for (size_t k = 0; k < ncov; k++) {
        size_t u = cov[k];
        /* a MoE block's routed experts held whole on each rank (ep = dp x cp: an EDP group of
         * one) are not sharded, so not gathered: the pass uses them in place */
        if (x->gathered_t[u] != GS_NO_ID || (x->part.units[u].expert && gs_shard_ranks(&x->plan, 1) <= 1))
            continue;
        gs_status rc = gs__gather_unit(x, u, phase, mb, dep);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* One reduction collective of a unit's gradient: what it does and the tensors and event around it. */
typedef struct reduction {
    gs_coll_op op;
    gs_group_kind group;
    gs_role role;
    uint16_t part;   /* 1 + the bucket, 0: the whole unit */
    uint64_t params; /* gradient elements reduced */
    uint32_t mb, dep, grad, frees; /* micro-batch; the event after which it runs; the gradient read;
                                      the tensor its event frees (GS_NO_ID: none) */
} reduction;

static gs_status reduce_one(gs_bctx *x, size_t u, const reduction *rd, uint32_t *ev)
{
    gs_evb b;
    uint64_t n = x->group_size[rd->group], gb = x->plan.gb;
    gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_BWD, gs__unit_layer(x, u), rd->mb);
    b.e.op = (uint8_t)rd->op;
    b.e.role = (uint8_t)rd->role;
    b.e.part = rd->part;
    b.e.group = (uint8_t)rd->group;
    b.e.peer = x->group[rd->group];
    b.e.group_size = n;
    b.e.unit = (uint32_t)u;
    b.e.bytes = n * ceil_div(rd->params, n) * gb;
    gs__evb_add(&b, GS_LINK_DEPS, rd->dep);
    gs__evb_add(&b, GS_LINK_READS, rd->grad);
    gs__evb_add(&b, GS_LINK_WRITES, x->grad_t[u]);
    gs__evb_add(&b, GS_LINK_FREES, rd->frees);
    return gs__evb_emit(x, &b, ev);
}

/* Gradient reduction of unit u after its backward (dep): FSDP reduce-scatter (+ HSDP's
 * cross-node all-reduce of the shard; of the whole unit with one DP rank per node), or the DDP /
 * ZeRO buckets. Frees the transient gradient. */
gs_status gs__reduce_unit(gs_bctx *x, size_t u, uint32_t mb, uint32_t dep)
{
    const gs_shard_plan *pl = &x->plan;
    uint64_t params = x->part.units[u].params;
    /* a MoE block's routed experts reduce over their expert-data-parallel group (ep > 1) */
    int expert = x->part.units[u].expert;
    uint64_t N = gs_shard_ranks(pl, expert);
    uint32_t grad = x->ugrad_t[u] != GS_NO_ID ? x->ugrad_t[u] : (x->hold_t ? x->hold_t[u] : x->grad_t[u]);
    uint32_t transient = x->ugrad_t[u];
    uint32_t ev = GS_NO_ID;
    gs_status rc = GS_OK;
    if (pl->N <= 1 && pl->R > 1) {
        /* HSDP with one DP rank per node: the shard group has size 1, so the "shard" is the whole
         * unit; only the cross-node all-reduce of the full gradient remains */
        reduction rd = {GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER, GS_ROLE_GRAD_INTER_REDUCE, 0, params, mb, dep, grad,
                        transient};
        rc = reduce_one(x, u, &rd, &ev);
        if (transient == GS_NO_ID)
            x->reduce_ev[u] = ev;
        x->ugrad_t[u] = GS_NO_ID;
        return rc;
    }
    if (N <= 1) {
        /* nothing to reduce: drop the transient gradient with the backward's last event */
        x->ugrad_t[u] = GS_NO_ID;
        return GS_OK;
    }
    if (pl->bucketed) {
        uint64_t nb = gs_bucket_count(params, pl->gb, x->s->strategy.bucket_bytes);
        for (uint64_t k = 0; k < nb && rc == GS_OK; k++) {
            reduction rd = {pl->grad_allreduce ? GS_COLL_ALLREDUCE : GS_COLL_REDUCE_SCATTER,
                            expert ? GS_GROUP_EDP : GS_GROUP_DP,
                            pl->grad_allreduce ? GS_ROLE_GRAD_BUCKET_REDUCE : GS_ROLE_GRAD_REDUCE_SCATTER,
                            (uint16_t)(k + 1), gs_bucket_params(params, nb, k), mb, dep, grad,
                            k + 1 == nb ? transient : GS_NO_ID};
            rc = reduce_one(x, u, &rd, &ev);
        }
    } else {
        int inter = pl->R > 1;
        uint32_t copy_free = pl->offload && !inter ? transient : GS_NO_ID;
        if (x->grad_copies && (rc = grad_copy_in(x, u, mb, dep, grad, &dep)) != GS_OK)
            return rc;
        reduction rd = {GS_COLL_REDUCE_SCATTER, expert ? GS_GROUP_EDP : x->dp_group, GS_ROLE_GRAD_REDUCE_SCATTER, 0,
                        params, mb, dep, grad, inter || pl->offload ? GS_NO_ID : transient};
        rc = reduce_one(x, u, &rd, &ev);
        if (rc == GS_OK && inter) {
            reduction ri = {GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER, GS_ROLE_GRAD_INTER_REDUCE, 0,
                            ceil_div(params, pl->N), mb, ev, grad, pl->offload ? GS_NO_ID : transient};
            rc = reduce_one(x, u, &ri, &ev);
        }
        if (rc == GS_OK && pl->offload) {
            gs_evb b;
            gs__evb_init(&b, GS_EV_COPY_D2H, GS_STREAM_COPY, GS_PHASE_BWD, gs__unit_layer(x, u), mb);
            b.e.role = GS_ROLE_OFFLOAD_GRAD;
            b.e.unit = (uint32_t)u;
            b.e.bytes = ceil_div(params, pl->N) * pl->gb;
            gs__evb_add(&b, GS_LINK_DEPS, ev);
            gs__evb_add(&b, GS_LINK_READS, grad);
            gs__evb_add(&b, GS_LINK_WRITES, x->grad_t[u]);
            gs__evb_add(&b, GS_LINK_FREES, transient);
            rc = gs__evb_emit(x, &b, &ev);
            (void)copy_free;
        }
    }
    if (transient == GS_NO_ID)
        x->reduce_ev[u] = ev;
    x->ugrad_t[u] = GS_NO_ID;
    return rc;
}


uint64_t gs__unit_chunk(const gs_bctx *x, size_t u)
{
    return gs_partition_unit_chunk(&x->part, u, x->stage, x->pp, x->v);
}

int gs__chunk_one_bucket(const gs_bctx *x, uint64_t chunk)
{
    return x->chunk_buckets && gs_strategy_chunk_one_bucket(&x->s->strategy, x->stage, chunk);
}

gs_status gs__chunk_bucket(const gs_bctx *x, uint64_t chunk, int expert, uint64_t *params, size_t *first,
                           size_t *count)
{
    *params = 0;
    *first = SIZE_MAX;
    *count = 0;
    for (size_t u = 0; u < x->part.nunits; u++)
        if (gs__unit_chunk(x, u) == chunk && x->part.units[u].expert == expert) {
            *params += x->part.units[u].params;
            *first = *first == SIZE_MAX ? u : *first;
            (*count)++;
        }
    if (*count > GS_BUILD_MAX_LIST)
        return gs_error_set(x->err, GS_ERR_UNSUPPORTED,
                            "rank %" PRIu64 ": strategy.bucket_stages first: model chunk %" PRIu64 " of stage %" PRIu64
                            " holds %zu units, more than one bucket's event can list (%d); use fewer units "
                            "(wrap: layer or model) or bucket_stages: all",
                            x->rank, chunk, x->stage, *count, GS_BUILD_MAX_LIST);
    return GS_OK;
}

/* Megatron-Core with bucket_size None: the chunk's whole gradient buffer is one bucket, reduced
 * once its last gradient is ready (after the chunk's last backward, `dep`); under expert
 * parallelism the experts' buffer is a second bucket, reduced over the expert-data-parallel group
 * (Megatron-Core's expert_parallel_buffers). The event names the bucket's first unit and lists
 * every unit's gradient. */
static gs_status reduce_chunk_bucket(gs_bctx *x, uint64_t chunk, int expert, uint32_t mb, uint32_t dep)
{
    const gs_shard_plan *pl = &x->plan;
    gs_group_kind g = expert ? GS_GROUP_EDP : GS_GROUP_DP;
    uint64_t params, n = x->group_size[g];
    size_t first, count;
    gs_status rc = gs__chunk_bucket(x, chunk, expert, &params, &first, &count);
    if (rc != GS_OK || count == 0)
        return rc;
    int none = n <= 1; /* experts held whole: nothing to reduce, the gradients are freed */
    uint32_t ev = GS_NO_ID;
    if (!none) {
        gs_evb b;
        gs__evb_init(&b, GS_EV_COLLECTIVE, GS_STREAM_DP, GS_PHASE_BWD, gs__unit_layer(x, first), mb);
        b.e.op = (uint8_t)(pl->grad_allreduce ? GS_COLL_ALLREDUCE : GS_COLL_REDUCE_SCATTER);
        /* one unit: the role of that unit's own bucket or reduce-scatter */
        b.e.role = count > 1 ? GS_ROLE_GRAD_CHUNK_REDUCE
                   : pl->grad_allreduce ? GS_ROLE_GRAD_BUCKET_REDUCE : GS_ROLE_GRAD_REDUCE_SCATTER;
        b.e.part = count == 1 && pl->grad_allreduce ? 1 : 0;
        b.e.group = (uint8_t)g;
        b.e.peer = x->group[g];
        b.e.group_size = n;
        b.e.unit = (uint32_t)first;
        b.e.bytes = n * ceil_div(params, n) * pl->gb;
        gs__evb_add(&b, GS_LINK_DEPS, dep);
        for (size_t u = 0; u < x->part.nunits; u++) {
            if (gs__unit_chunk(x, u) != chunk || x->part.units[u].expert != expert)
                continue;
            uint32_t grad = x->ugrad_t[u] != GS_NO_ID ? x->ugrad_t[u] : (x->hold_t ? x->hold_t[u] : x->grad_t[u]);
            gs__evb_add(&b, GS_LINK_READS, grad);
            gs__evb_add(&b, GS_LINK_WRITES, x->grad_t[u]);
            gs__evb_add(&b, GS_LINK_FREES, x->ugrad_t[u]);
        }
        if ((rc = gs__evb_emit(x, &b, &ev)) != GS_OK)
            return rc;
    }
    for (size_t u = 0; u < x->part.nunits; u++)
        if (gs__unit_chunk(x, u) == chunk && x->part.units[u].expert == expert) {
            if (x->ugrad_t[u] == GS_NO_ID)
                x->reduce_ev[u] = ev;
            x->ugrad_t[u] = GS_NO_ID;
        }
    return GS_OK;
}

gs_status gs__reduce_chunk(gs_bctx *x, uint64_t chunk, uint32_t mb, uint32_t dep)
{
    gs_status rc = reduce_chunk_bucket(x, chunk, 0, mb, dep);
    return rc == GS_OK ? reduce_chunk_bucket(x, chunk, 1, mb, dep) : rc;
}
