/* The closed-form lower bound on the simulated step (sim/bound.h). */
#include "sim/bound.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"
#include "engine/schedule.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/topology.h"

/* Base seconds of one micro-batch's compute: one layer's forward, backward and recompute, each
 * the longest chain to its last compute event through its compute events and the TP collectives
 * between them (dependencies and stream order; the compute stream waits for a TP call its next
 * event needs); the embedding's forward and backward; the head's (and loss's). And the bytes a
 * stage sends its neighbour per micro-batch: activations forward, gradients backward. */
typedef struct layer_costs {
    double f, b, r, ef, eb, hf, hb;
    uint64_t act_bytes, grad_bytes;
} layer_costs;

/* What the one-layer costs depend on besides the base scenario's model, GPU and kernels. */
typedef struct cost_key {
    uint64_t tp, micro, cp, cp_a2a, ep, etp;
    uint32_t sp, tpo, recompute, recompute_modules, precision, flash, xent, fp8, fp8_params, dispatcher, cp_comm;
} cost_key;

typedef struct cost_entry {
    cost_key key;
    layer_costs c;
} cost_entry;

struct gs_sim_bound {
    cost_entry *v;
    size_t n, cap;
};

gs_status gs_sim_bound_create(gs_sim_bound **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? GS_OK : GS_ERR_NOMEM;
}

void gs_sim_bound_destroy(gs_sim_bound *b)
{
    if (b)
        free(b->v);
    free(b);
}

/* The longest chain, base seconds, through the events of list r with this layer and phase, to
 * the last compute event among them: each starts after its dependencies among them and the one
 * before it on its stream. cost[k]: event k's base seconds. */
static double pass_chain(const gs_rank_events *r, const double *cost, int32_t layer, int phase, double *end)
{
    double last[GS_STREAM_COUNT] = {0}, chain = 0;
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        end[k] = -1;
        if (e->layer != layer || e->phase != phase ||
            (e->kind != GS_EV_COMPUTE && !(e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP)))
            continue;
        double t = last[e->stream];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            if (end[d[j]] > t)
                t = end[d[j]];
        end[k] = last[e->stream] = t + cost[k];
        if (e->kind == GS_EV_COMPUTE)
            chain = end[k];
    }
    return chain;
}

/* The costs from a schedule of s's shapes with two stages of one layer, one micro-batch and the
 * least data parallelism that keeps a rank's events: cp and ep as s has them (dp x cp = ep x cp
 * ranks per stage, each stage a node; the events of any layer are the same; sharding changes only
 * the optimizer, which the bound leaves out). */
static gs_status measure(const gs_scenario *s, const gs_mesh *mesh, layer_costs *out, gs_error *err)
{
    gs_scenario t = *s;
    uint64_t tp = mesh->size[GS_DIM_TP], cp = mesh->cp ? mesh->cp : 1, ep = mesh->ep ? mesh->ep : 1;
    t.nstragglers = 0;
    t.model.layers = 2;
    /* replicas: dp x cp must hold the EP group, and expert TP below tp needs a second one */
    uint64_t reps = mesh->etp && ep * cp < 2 ? 2 : ep;
    t.grid.dp = reps;
    t.grid.cp = cp;
    t.grid.ep = ep;
    t.grid.etp = mesh->etp; /* 0: tp */
    t.grid.pp = 2;
    t.grid.tp = tp;
    t.grid.allow_tp_cross_node = 1;
    gs_grid_split_even(&t.grid);
    t.cluster.nodes = 2;
    t.cluster.gpus_per_node = tp * cp * reps;
    t.batch.global_seqs = s->batch.micro_seqs * reps;
    t.strategy.sharding = GS_SHARD_NO_SHARD; /* and the data-parallel knobs it takes */
    t.strategy.reshard_after_forward = 0;
    t.strategy.forward_prefetch = 0;
    t.strategy.overlap_grad_reduce = 1;
    t.strategy.overlap_param_gather = 0;
    t.strategy.grad_sync = GS_GRAD_SYNC_AUTO;
    t.strategy.bucket_stages = GS_BUCKET_STAGES_ALL;
    t.strategy.offload = 0;
    t.strategy.pipeline = GS_PIPE_1F1B;
    t.strategy.virtual_stages = 1;
    /* the combined 1F1B only reorders a layer's events and hides the expert exchanges, which the
     * chains below do not count: the plain order has the same chains */
    t.strategy.ep_overlap = 0;
    gs_mesh two;
    gs_schedule *sch = NULL;
    double *cost = NULL, *end = NULL;
    gs_status rc = gs_scenario_mesh(&t, &two, NULL, err);
    if (rc == GS_OK)
        rc = gs_schedule_build_unnamed(&t, &two, 0, &sch, err);
    if (rc != GS_OK)
        return rc;
    gs_compute_model cm;
    gs_compute_model_for_scenario(&cm, s); /* the sim's compute model: kernels, framework, fit */
    gs_topo topo;
    gs_topo_init(&topo, &s->cluster);
    gs_coll_shape tp_shape = {tp, 1, tp, 1, 0.0}; /* the planner keeps TP inside a node */
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sch->nranks && rc == GS_OK; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        free(cost);
        free(end);
        cost = calloc(r->nevents + 1, sizeof *cost);
        end = calloc(r->nevents + 1, sizeof *end);
        if (!cost || !end) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "bound: out of memory");
            break;
        }
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            gs_coll_cost cc;
            tp_shape.nranks = e->group_size;
            if (e->kind == GS_EV_COMPUTE && e->phase != GS_PHASE_OPTIM)
                cost[k] = gs_compute_time(&cm, e);
            else if (e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP &&
                     gs_coll_estimate(&topo, (gs_coll_op)e->op, &tp_shape, e->bytes, GS_ALGO_COUNT, &cc) == GS_OK)
                cost[k] = cc.time_s;
            int fwd = e->phase == GS_PHASE_FWD;
            if (e->kind == GS_EV_COMPUTE && e->layer == GS_LAYER_EMBED)
                *(fwd ? &out->ef : &out->eb) += cost[k];
            else if (e->kind == GS_EV_COMPUTE && e->layer == GS_LAYER_HEAD)
                *(fwd ? &out->hf : &out->hb) += cost[k];
            else if (e->kind == GS_EV_SEND && e->phase != GS_PHASE_OPTIM)
                *(fwd ? &out->act_bytes : &out->grad_bytes) = e->bytes;
        }
        if (i == 0) { /* stage 0's layer (layer 0) */
            out->f = pass_chain(r, cost, 0, GS_PHASE_FWD, end);
            out->b = pass_chain(r, cost, 0, GS_PHASE_BWD, end);
            out->r = pass_chain(r, cost, 0, GS_PHASE_RECOMPUTE, end);
        }
    }
    free(cost);
    free(end);
    gs_schedule_destroy(sch);
    return rc;
}

static gs_status costs_of(gs_sim_bound *b, const gs_scenario *s, const gs_mesh *mesh, layer_costs *out,
                          gs_error *err)
{
    const gs_strategy *st = &s->strategy;
    cost_key k;
    memset(&k, 0, sizeof k);
    k.tp = mesh->size[GS_DIM_TP];
    k.micro = s->batch.micro_seqs;
    k.sp = (uint32_t)st->sequence_parallel;
    k.tpo = (uint32_t)st->tp_comm_overlap;
    k.recompute = (uint32_t)st->recompute;
    k.recompute_modules = gs_strategy_recompute_modules(st);
    k.precision = (uint32_t)st->precision;
    k.flash = (uint32_t)st->flash_attention;
    k.xent = (uint32_t)st->cross_entropy;
    k.fp8 = (uint32_t)st->fp8;
    k.fp8_params = (uint32_t)st->fp8_params;
    k.cp = mesh->cp ? mesh->cp : 1; /* measure() keeps cp (with its a2a level), ep and etp */
    k.cp_a2a = mesh->cp_a2a;
    k.ep = mesh->ep ? mesh->ep : 1;
    k.etp = mesh->etp;
    k.dispatcher = (uint32_t)st->moe_dispatcher;
    k.cp_comm = (uint32_t)st->cp_comm;
    for (size_t i = 0; i < b->n; i++)
        if (memcmp(&b->v[i].key, &k, sizeof k) == 0) {
            *out = b->v[i].c;
            return GS_OK;
        }
    gs_status rc = measure(s, mesh, out, err);
    if (rc != GS_OK)
        return rc;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        cost_entry *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return gs_error_set(err, GS_ERR_NOMEM, "bound: out of memory");
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = (cost_entry){k, *out};
    return GS_OK;
}

gs_status gs_sim_step_bound(const gs_scenario *s, const gs_mesh *mesh, void *ctx, double *lower_s, gs_error *err)
{
    layer_costs c;
    gs_status rc = costs_of(ctx, s, mesh, &c, err);
    if (rc != GS_OK)
        return rc;
    uint64_t pp = mesh->size[GS_DIM_PP], m = gs_scenario_microbatches(s);
    uint64_t v = gs_strategy_chunks(&s->strategy, pp);
    if (m == 0)
        m = 1;
    gs_topo topo;
    gs_topo_init(&topo, &s->cluster);
    double best = 0, fill = 0, drain = 0;
    for (uint64_t st = 0; st < pp; st++) {
        double layers = (double)gs_mesh_stage_layers(mesh, s->model.layers, st);
        double w = (double)m * (layers * (c.f + c.b + c.r) + (st == 0 ? c.ef + c.eb : 0) +
                                (st + 1 == pp ? c.hf + c.hb : 0));
        /* the chain through the stages before: the last backward layer's own work may follow
         * its gradient's send, so it is left out of the middle term */
        double chain = st > 0 ? fill + (w - c.b) + drain : w;
        if (w > best)
            best = w;
        if (chain > best)
            best = chain;
        double chunk = (double)gs_pipe_chunk_layers(mesh, s->model.layers, v, st, 0);
        fill += chunk * c.f + (st == 0 ? c.ef : 0);
        drain += chunk * c.b + (st == 0 ? c.eb : 0);
        if (st + 1 < pp) { /* the boundary's send: activations on, gradients back */
            uint64_t a[GS_DIM_COUNT] = {0}, b[GS_DIM_COUNT] = {0};
            a[GS_DIM_PP] = st;
            b[GS_DIM_PP] = st + 1;
            int same = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, a)) ==
                       gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, b));
            fill += c.act_bytes ? gs_p2p_time(&topo, same, c.act_bytes) : 0;
            drain += c.grad_bytes ? gs_p2p_time(&topo, same, c.grad_bytes) : 0;
        }
    }
    *lower_s = best;
    return GS_OK;
}

/* ---- communication --------------------------------------------------------------------------- */

/* The least seconds per byte a rank sends (gs_event_sent_bytes) that a collective `op` over a
 * group of this shape takes under the tuner: min over sizes of time / (size x the op's sent bytes
 * per size). A call's time is its chosen algorithm's latency plus its bytes at that algorithm's
 * rate, so it is at least its bytes at the best rate; the sizes reach where latency vanishes. */
static double coll_per_sent_byte(const gs_topo *topo, gs_coll_op op, gs_coll_shape shape)
{
    static const double sizes[] = {1048576.0, 67108864.0, 4294967296.0, 1099511627776.0};
    double n = (double)shape.nranks, sent = op == GS_COLL_ALLREDUCE ? 2 * (n - 1) / n : (n - 1) / n;
    double best = INFINITY;
    if (shape.nranks <= 1)
        return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        gs_coll_cost c;
        if (gs_coll_estimate(topo, op, &shape, (uint64_t)sizes[i], GS_ALGO_COUNT, &c) != GS_OK)
            return 0;
        double k = c.time_s / (sizes[i] * sent);
        if (k < best)
            best = k;
    }
    return best;
}

/* The least per sent byte over the ops and group kinds a traffic kind may use, for the stage
 * representative `rank`. */
static double kind_per_sent_byte(const gs_topo *topo, const gs_mesh *mesh, uint64_t rank, gs_traffic_kind k)
{
    static const gs_group_kind dp_groups[] = {GS_GROUP_DP, GS_GROUP_DP_INTRA, GS_GROUP_DP_INTER};
    double best = INFINITY;
    if (k == GS_TRAFFIC_PP) {
        double g = (double)(1u << 30); /* the rate without the latency */
        double a = (gs_p2p_time(topo, 0, 2u << 30) - gs_p2p_time(topo, 0, 1u << 30)) / g;
        double b = (gs_p2p_time(topo, 1, 2u << 30) - gs_p2p_time(topo, 1, 1u << 30)) / g;
        return a < b ? a : b;
    }
    for (size_t g = 0; g < (k == GS_TRAFFIC_TP ? 1 : 3); g++) {
        gs_coll_shape shape;
        gs_topo_group_shape(mesh, k == GS_TRAFFIC_TP ? GS_GROUP_TP : dp_groups[g], rank, &shape);
        for (int op = 0; op < 3; op++) { /* all-gather, reduce-scatter, all-reduce */
            if (k == GS_TRAFFIC_DP_ALLGATHER && op != GS_COLL_ALLGATHER)
                continue;
            if (k == GS_TRAFFIC_DP_REDUCE_SCATTER && op != GS_COLL_REDUCE_SCATTER)
                continue;
            if (k == GS_TRAFFIC_DP_ALLREDUCE && op != GS_COLL_ALLREDUCE)
                continue;
            double v = coll_per_sent_byte(topo, (gs_coll_op)op, shape);
            if (v < best)
                best = v;
        }
    }
    return best == INFINITY ? 0 : best;
}

gs_status gs_sim_comm_bound(const gs_scenario *s, const gs_mesh *mesh, const gs_ledger *l, void *ctx,
                            double *lower_s, gs_error *err)
{
    (void)ctx;
    (void)err;
    gs_topo topo;
    gs_topo_init(&topo, &s->cluster);
    double best = 0;
    for (size_t i = 0; i < l->nranks; i++) {
        const gs_ledger_rank *r = &l->ranks[i];
        uint64_t c[GS_DIM_COUNT] = {0};
        c[GS_DIM_PP] = r->stage;
        uint64_t rank = gs_mesh_coords_rank(mesh, c);
        double dp = 0, tp = 0, pp = 0;
        for (int k = GS_TRAFFIC_DP_ALLGATHER; k <= GS_TRAFFIC_DP_ALLREDUCE; k++)
            if (r->traffic[k])
                dp += (double)r->traffic[k] * kind_per_sent_byte(&topo, mesh, rank, (gs_traffic_kind)k);
        if (r->traffic[GS_TRAFFIC_TP])
            tp = (double)r->traffic[GS_TRAFFIC_TP] * kind_per_sent_byte(&topo, mesh, rank, GS_TRAFFIC_TP);
        if (r->traffic[GS_TRAFFIC_PP])
            pp = (double)r->traffic[GS_TRAFFIC_PP] * kind_per_sent_byte(&topo, mesh, rank, GS_TRAFFIC_PP);
        /* each on its own stream, one call at a time; the ceiling of all-reduce chunks can make
         * the sent bytes exceed the size's share by a byte per chunk: a margin of 1e-3 */
        double m = (dp > tp ? dp : tp) > pp ? (dp > tp ? dp : tp) : pp;
        if (m * 0.999 > best)
            best = m * 0.999;
    }
    *lower_s = best;
    return GS_OK;
}
