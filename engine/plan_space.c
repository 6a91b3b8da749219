/* The planner's space (engine/plan_internal.h): every configuration a user tunes, on every
 * grid whose product is the GPU count.
 *
 * Per grid (tp, pp, dp; cp from the options or the base, every ep of a MoE model): the sharding strategies (hybrid_shard only where DP spans nodes); every
 * micro-batch size that divides global / dp; the pipeline schedules (pp > 1: 1f1b, gpipe, and
 * interleaved with every virtual stage count v >= 2 that splits the layers, layers % (pp v) = 0);
 * sequence parallelism and, with it, TP communication overlap (tp > 1); per sharding the knobs it
 * has: DDP / ZeRO gradient bucket sizes (no_shard, zero1, zero2), overlap_grad_reduce (no_shard,
 * zero1), overlap_param_gather (zero1, zero2), FSDP backward prefetch (none, backward_pre,
 * backward_post: where parameters are re-gathered in backward) and forward prefetch (sharded
 * parameters); recompute (none, selective, full); CPU offload (FSDP strategies). The rest is the
 * base's: precision, gradient dtype, kernels, bucket_stages where the buckets can follow it. */
#include <stdlib.h>
#include <string.h>

#include "engine/plan_internal.h"

static const uint64_t default_buckets_mib[] = {10, 25, 100, 400};

static int allowed(const gs_plan_list *l, uint64_t v)
{
    if (l->n == 0)
        return 1;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == v)
            return 1;
    return 0;
}

static gs_status grow(void **p, size_t *cap, size_t need, size_t elem, gs_error *err)
{
    if (need <= *cap)
        return GS_OK;
    size_t c = *cap ? 2 * *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory (%zu configurations)", need);
    *p = q;
    *cap = c;
    return GS_OK;
}

/* The variants of one sharding's communication knobs, written into v (room for 64). */
static size_t comm_variants(const search *x, gs_sharding sh, gs_strategy *v)
{
    const gs_strategy *b = &x->base->strategy;
    gs_strategy t;
    memset(&t, 0, sizeof t); /* every field, padding included (R3 compares them) */
    gs_strategy_defaults(&t);
    t.sharding = sh;
    t.reshard_after_forward = gs_sharding_shards_params(sh);
    size_t n = 0;
    if (sh == GS_SHARD_NO_SHARD || sh == GS_SHARD_ZERO1 || sh == GS_SHARD_ZERO2) {
        uint64_t buckets[8];
        size_t nb = 0;
        buckets[nb++] = b->bucket_bytes;
        for (size_t i = 0; i < sizeof default_buckets_mib / sizeof *default_buckets_mib; i++)
            if (default_buckets_mib[i] << 20 != b->bucket_bytes)
                buckets[nb++] = default_buckets_mib[i] << 20;
        int ogr = gs_strategy_can_reduce_after_backward(&t) ? 2 : 1;
        int opg = sh != GS_SHARD_NO_SHARD ? 2 : 1;
        for (size_t i = 0; i < nb; i++)
            for (int g = 0; g < ogr; g++)
                for (int p = 0; p < opg; p++) {
                    v[n] = t;
                    v[n].bucket_bytes = buckets[i];
                    v[n].overlap_grad_reduce = !g;
                    v[n++].overlap_param_gather = p;
                }
        return n;
    }
    /* FSDP with sharded parameters: forward prefetch; backward prefetch where the backward
     * re-gathers them (reshard after forward) */
    static const gs_prefetch pre[] = {GS_PREFETCH_BACKWARD_PRE, GS_PREFETCH_BACKWARD_POST, GS_PREFETCH_NONE};
    size_t npre = t.reshard_after_forward ? 3 : 1;
    for (size_t i = 0; i < npre; i++)
        for (int f = 0; f < 2; f++) {
            v[n] = t;
            v[n].prefetch = pre[i];
            v[n++].forward_prefetch = f;
        }
    return n;
}

/* One configuration: the scenario's batch and pipeline checks (config-level reasons), then it
 * joins the candidates. */
static gs_status consider(search *x, cand *c, gs_error *err)
{
    if (x->o->max_candidates && x->evaluated >= x->o->max_candidates) {
        x->truncated = 1;
        return GS_OK;
    }
    x->evaluated++;
    gs_scenario s;
    gs_mesh mesh;
    gs_error e;
    gs_error_init(&e);
    gs__plan_cand_scenario(x, c, &s);
    if (gs_scenario_mesh(&s, &mesh, NULL, &e) != GS_OK) {
        char reason[96];
        gs_plan_reason(e.msg, reason, sizeof reason);
        return gs__plan_count_add(&x->rejected, reason, 0, 1, err);
    }
    c->state = CAND_LEGAL;
    c->block = x->nblocks - 1;
    c->group = x->ngroups - 1;
    if (x->groups[c->group].first == SIZE_MAX)
        x->groups[c->group].first = x->n;
    x->blocks[c->block].slot[c->st.recompute][c->st.offload ? 1 : 0] = (long)x->n;
    gs_status rc = grow((void **)&x->c, &x->cap, x->n + 1, sizeof *x->c, err);
    if (rc == GS_OK)
        x->c[x->n++] = *c;
    return rc;
}

/* A new R1/R2 block, or bound group. */
static gs_status new_block(search *x, gs_error *err)
{
    gs_status rc = grow((void **)&x->blocks, &x->bcap, x->nblocks + 1, sizeof *x->blocks, err);
    if (rc != GS_OK)
        return rc;
    block_slots *b = &x->blocks[x->nblocks++];
    for (int r = 0; r < 3; r++)
        b->slot[r][0] = b->slot[r][1] = -1;
    return GS_OK;
}

static gs_status new_group(search *x, gs_error *err)
{
    gs_status rc = grow((void **)&x->groups, &x->gcap, x->ngroups + 1, sizeof *x->groups, err);
    if (rc == GS_OK)
        x->groups[x->ngroups++] = (bound_group){SIZE_MAX, 0.0};
    return rc;
}

/* The configurations of one (grid, micro, pipeline, SP, TP overlap): each recompute forms a
 * bound group, each sharding's knob variant a block of recompute x offload. */
static gs_status enumerate_strategies(search *x, const cand *proto, int dp_spans, gs_error *err)
{
    const gs_plan_opts *o = x->o;
    const gs_strategy *b = &x->base->strategy;
    gs_status rc = GS_OK;
    size_t first_block = x->nblocks;
    for (int r = 0; r < 3 && rc == GS_OK; r++) {
        if ((rc = new_group(x, err)) != GS_OK)
            break;
        size_t blk = first_block;
        for (int sh = 0; sh < GS_SHARD_COUNT && rc == GS_OK; sh++) {
            if ((o->sharding_mask && !(o->sharding_mask & (1u << sh))) || (sh == GS_SHARD_HYBRID_SHARD && !dp_spans) ||
                !gs_framework_runs(b->framework, sh)) /* the base's framework's shardings only */
                continue;
            gs_strategy var[64];
            size_t nvar = comm_variants(x, (gs_sharding)sh, var);
            int offloads = gs_sharding_is_fsdp((gs_sharding)sh) ? 2 : 1;
            for (size_t k = 0; k < nvar && rc == GS_OK; k++, blk++) {
                if (r == 0 && (rc = new_block(x, err)) != GS_OK)
                    break;
                for (int off = 0; off < offloads && rc == GS_OK; off++) {
                    cand c = *proto;
                    c.st = var[k];
                    c.st.precision = b->precision;
                    c.st.grad_dtype = b->grad_dtype;
                    c.st.flash_attention = b->flash_attention; /* the framework's kernels */
                    c.st.cross_entropy = b->cross_entropy;
                    c.st.cp_comm = b->cp_comm; /* and its a2a level: gs__plan_cp_a2a */
                    c.st.moe_dispatcher = b->moe_dispatcher; /* the framework's token dispatch */
                    c.st.framework = b->framework; /* resolved in gs_plan_run */
                    gs_strategy_default_wrap(&c.st); /* DeepSpeed ZeRO-3's fetch granularity */
                    c.st.compile = b->compile;
                    c.st.attention = b->attention;
                    c.st.recompute = (gs_recompute)r;
                    c.st.pipeline = proto->st.pipeline;
                    c.st.virtual_stages = proto->st.virtual_stages;
                    c.st.sequence_parallel = proto->st.sequence_parallel;
                    c.st.tp_comm_overlap = proto->st.tp_comm_overlap;
                    c.st.offload = off;
                    /* the base's overlap of the exchanges, where Megatron-Core allows it */
                    c.st.flex_sms = b->flex_sms;
                    c.st.ep_overlap = b->ep_overlap && gs_strategy_ep_overlap_fits(&c.st, proto->ep, proto->pp);
                    if (gs_strategy_can_bucket_first(&c.st)) /* the base's bucket rule */
                        c.st.bucket_stages = b->bucket_stages;
                    size_t save = x->nblocks;
                    x->nblocks = blk + 1; /* consider() files it under block blk */
                    rc = consider(x, &c, err);
                    x->nblocks = save;
                }
            }
        }
    }
    return rc;
}

/* The micro-batch sizes of a grid: the options' list, or every size dividing global / dp (1
 * when dp does not divide the batch, which the batch check then rejects). */
static size_t micro_sizes(const search *x, uint64_t dp, uint64_t *out, size_t cap)
{
    const gs_plan_opts *o = x->o;
    if (o->micro.n) {
        for (size_t i = 0; i < o->micro.n; i++)
            out[i] = o->micro.v[i];
        return o->micro.n;
    }
    uint64_t per = x->base->batch.global_seqs / dp, n = 0;
    if (per == 0 || x->base->batch.global_seqs % dp)
        per = 1;
    for (uint64_t u = 1; u <= per && n < cap; u++)
        if (per % u == 0)
            out[n++] = u;
    return n;
}

/* The grid's data-parallel ranks split into dp replicas x cp, and ep over them. */
typedef struct grid_dims {
    uint64_t tp, pp, dp, cp, ep, etp; /* etp 0: tp */
} grid_dims;

static gs_status enumerate_grid(search *x, const grid_dims *g, int dp_spans, gs_error *err)
{
    uint64_t tp = g->tp, pp = g->pp, dp = g->dp;
    /* a MoE model's blocks need sequence parallelism with TP (Megatron-Core); latent attention is
     * built without TP communication overlap */
    int sp_only = x->base->model.moe.experts && tp > 1, no_tpo = x->base->model.mla.kv_lora_rank != 0;
    uint64_t micros[256];
    size_t nmicro = micro_sizes(x, dp, micros, sizeof micros / sizeof *micros);
    uint64_t layers = x->base->model.layers;
    gs_status rc = GS_OK;
    for (size_t mi = 0; mi < nmicro && rc == GS_OK; mi++)
        for (uint64_t v = 0; v <= (pp > 1 ? layers / pp : 0) && rc == GS_OK; v++) {
            /* v = 0: 1f1b; v = 1: gpipe; v >= 2: interleaved with v virtual stages */
            if (pp == 1 && v > 0)
                break;
            if (v >= 2 && layers % (pp * v) != 0)
                continue;
            for (int sp = sp_only; sp <= (tp > 1) && rc == GS_OK; sp++)
                for (int tpo = 0;
                     tpo <= (sp && !no_tpo && gs_framework_tp_overlap(x->base->strategy.framework)) && rc == GS_OK;
                     tpo++) {
                    cand c;
                    memset(&c, 0, sizeof c);
                    c.dp = dp;
                    c.pp = pp;
                    c.tp = tp;
                    c.cp = g->cp;
                    c.ep = g->ep;
                    c.etp = g->etp;
                    c.micro = micros[mi];
                    c.st.pipeline = v == 0 ? GS_PIPE_1F1B : v == 1 ? GS_PIPE_GPIPE : GS_PIPE_INTERLEAVED;
                    c.st.virtual_stages = v >= 2 ? v : 1;
                    c.st.sequence_parallel = sp;
                    c.st.tp_comm_overlap = tpo;
                    rc = enumerate_strategies(x, &c, dp_spans, err);
                }
        }
    return rc;
}

/* The cp values of a grid with dpc data-parallel ranks: the options' list, or the base's cp; each
 * dividing dpc and splitting the sequence into 2 cp chunks. */
static size_t cp_values(const search *x, uint64_t dpc, uint64_t *out, size_t cap)
{
    const gs_plan_list *l = &x->o->cp;
    uint64_t base = x->base->grid.cp ? x->base->grid.cp : 1, seq = x->base->model.seq;
    size_t n = 0;
    for (size_t i = 0; i < (l->n ? l->n : 1) && n < cap; i++) {
        uint64_t cp = l->n ? l->v[i] : base;
        /* latent attention is built without context parallelism */
        if (cp && dpc % cp == 0 && (cp == 1 || (seq % (2 * cp) == 0 && !x->base->model.mla.kv_lora_rank)))
            out[n++] = cp;
    }
    return n;
}

/* The ep values over dpc expert ranks of a stage (the DP positions, or tp x them with expert TP
 * 1): 1 for a dense model; for a MoE model the options' list or every ep dividing both dpc and
 * the routed experts. */
static size_t ep_values(const search *x, uint64_t dpc, uint64_t *out, size_t cap)
{
    uint64_t experts = x->base->model.moe.experts;
    size_t n = 0;
    if (!experts) {
        out[0] = 1;
        return 1;
    }
    for (uint64_t ep = 1; ep <= dpc && ep <= experts && n < cap; ep++)
        if (dpc % ep == 0 && experts % ep == 0 && allowed(&x->o->ep, ep))
            out[n++] = ep;
    return n;
}

gs_status gs__plan_enumerate(search *x, gs_error *err)
{
    const gs_plan_opts *o = x->o;
    uint64_t G = gs_cluster_gpus(&x->base->cluster);
    gs_status rc = GS_OK;
    for (uint64_t tp = 1; tp <= G && rc == GS_OK; tp++) {
        if (G % tp || !allowed(&o->tp, tp))
            continue;
        for (uint64_t pp = 1; pp <= G / tp && rc == GS_OK; pp++) {
            if ((G / tp) % pp || !allowed(&o->pp, pp))
                continue;
            uint64_t dpc = G / tp / pp, cps[GS_PLAN_LIST_MAX], eps[64];
            size_t ncp = cp_values(x, dpc, cps, GS_PLAN_LIST_MAX), nep = ep_values(x, dpc, eps, 64);
            for (size_t ci = 0; ci < ncp && rc == GS_OK; ci++) {
                uint64_t dp = dpc / cps[ci];
                if (!allowed(&o->dp, dp))
                    continue;
                x->grids++;
                gs_mesh mesh;
                gs_error e;
                gs_error_init(&e);
                if (gs_mesh_init(&mesh, tp, dpc, pp, NULL, x->base->cluster.gpus_per_node, &e) != GS_OK ||
                    gs_mesh_check(&mesh, G, &x->base->model, 0, NULL, &e) != GS_OK) {
                    char reason[96];
                    gs_plan_reason(e.msg, reason, sizeof reason);
                    rc = gs__plan_count_add(&x->rejected, reason, 1, 1, err);
                    continue;
                }
                x->legal_grids++;
                int dp_spans = gs_mesh_dim_crosses_nodes(&mesh, GS_DIM_DP, NULL);
                for (size_t ei = 0; ei < nep && rc == GS_OK; ei++) {
                    grid_dims g = {tp, pp, dp, cps[ci], eps[ei], 0};
                    rc = enumerate_grid(x, &g, dp_spans, err);
                }
                /* a MoE model under TP: expert TP 1 too (whole experts, Megatron-Core's
                 * --expert-tensor-parallel-size 1), its ep over the tp x dp x cp ranks; one
                 * data-parallel rank leaves its experts' gradients to TP ranks (refused) */
                if (x->base->model.moe.experts && tp > 1 && dpc > 1 && allowed(&o->etp, 1)) {
                    uint64_t eps1[64];
                    size_t nep1 = ep_values(x, tp * dpc, eps1, 64);
                    for (size_t ei = 0; ei < nep1 && rc == GS_OK; ei++) {
                        grid_dims g = {tp, pp, dp, cps[ci], eps1[ei], 1};
                        rc = enumerate_grid(x, &g, dp_spans, err);
                    }
                }
            }
        }
    }
    return rc;
}
