/* The planner: enumeration of grids and strategies, rejection by mesh checks and the memory
 * ledger, dominance pruning, extrapolated simulation on worker threads, and ranking.
 *
 * Pruning rules (each removes a configuration only when another one is at least as fast; see
 * check_memory, merge_identical and bound_search for the arguments):
 *   R1 offload:   a CPU-offload configuration whose twin without offload fits is pruned;
 *   R2 recompute: selective recompute is pruned when its twin without recompute fits, full
 *                 recompute when the twin without or with selective recompute fits;
 *   R3 identical: configurations whose strategies give the same per-rank shard plan (for example
 *                 zero3 and full_shard) build the same schedule: simulated once, both listed;
 *   R4 bound:     see bound_search. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/plan.h"

static const uint64_t default_micro[] = {1, 2, 4, 8};

void gs_plan_opts_init(gs_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 2;
}

/* ---- reasons ------------------------------------------------------------------------------ */

void gs_plan_reason(const char *msg, char *out, size_t len)
{
    static const struct { const char *needle; const char *reason; } table[] = {
        {"each TP rank must hold whole attention heads", "heads not divisible by tp"},
        {"neither divides the other, so KV", "kv_heads and tp do not divide"},
        {"the MLP cannot be split evenly", "ffn not divisible by tp"},
        {"exceeds the model's", "layers < pp"},
        {"would cross the network", "tp crosses nodes"},
        {"ranks but the cluster has", "grid product != GPUs"},
        {"is not a multiple of micro", "batch not divisible by micro x dp"},
        {"split into pp x virtual_stages", "layers not divisible by pp x virtual stages"},
        {"micro-batches per step to be a multiple of pp", "micro-batches not a multiple of pp (interleaved)"},
        {"batch must be positive", "batch not positive"},
    };
    /* the first line only: later lines are further errors on the same grid */
    char line[GS_ERROR_MSG_BYTES];
    size_t n = strcspn(msg, "\n");
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, msg, n);
    line[n] = '\0';
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(line, table[i].needle)) {
            snprintf(out, len, "%s", table[i].reason);
            return;
        }
    /* fallback: up to five words after the location prefix, to the first colon, numbers dropped */
    const char *p = line, *c;
    while ((c = strstr(p, ": ")) != NULL && c - p < 600 && strchr(c + 2, ':'))
        p = c + 2;
    size_t o = 0, words = 0;
    int in_word = 0;
    for (; *p && *p != ':' && words < 5 && o + 1 < len; p++) {
        if (*p >= '0' && *p <= '9')
            continue;
        if (*p == ' ') {
            if (in_word)
                words++;
            in_word = 0;
            if (o > 0 && out[o - 1] != ' ' && words < 5)
                out[o++] = ' ';
            continue;
        }
        in_word = 1;
        out[o++] = *p;
    }
    while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '='))
        o--;
    if (len)
        out[o < len ? o : len - 1] = '\0';
}

/* ---- candidates --------------------------------------------------------------------------- */

typedef enum cand_state {
    CAND_LEGAL,      /* passed the mesh checks; ledger pending */
    CAND_NOFIT,      /* ledger peak above GPU memory */
    CAND_FITS,       /* fits; to simulate */
    CAND_PRUNED,     /* dominated (R1, R2) */
    CAND_COPY,       /* same schedule as cand[twin] (R3) */
    CAND_DONE,       /* simulated */
    CAND_BOUNDED,    /* not simulated: its lower bound is slower than the keep-th best (R4) */
    CAND_OTHER_SHARD /* fits, but its bound group belongs to another shard (opts shard_count) */
} cand_state;

typedef struct cand {
    uint64_t dp, pp, tp, micro;
    gs_strategy st;
    cand_state state;
    size_t block;        /* configurations sharing everything but recompute and offload */
    size_t twin;         /* CAND_COPY: the candidate simulated for it */
    double lower_s;      /* R4: lower bound on the step, seconds (0: none) */
    uint64_t peak_bytes, gpu_bytes;
    uint64_t states_bytes;  /* ledger: params + master + Adam m, v of the largest stage, bytes */
    int ledgered;           /* 1: gs_ledger_create ran for it */
    gs_plan_candidate res;
} cand;

typedef struct block_slots {
    long slot[3][2];     /* [recompute][offload] -> candidate index, -1 when not enumerated */
} block_slots;

typedef struct counts {
    gs_plan_count *v;
    size_t n, cap;
} counts;

static gs_status count_add(counts *c, const char *reason, int grids, uint64_t k, gs_error *err)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].grids == grids && strcmp(c->v[i].reason, reason) == 0) {
            c->v[i].count += k;
            return GS_OK;
        }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        gs_plan_count *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory counting reasons");
        c->v = v;
        c->cap = cap;
    }
    gs_plan_count *e = &c->v[c->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->reason, sizeof e->reason, "%s", reason);
    e->grids = grids;
    e->count = k;
    return GS_OK;
}

static int count_cmp(const void *a, const void *b)
{
    const gs_plan_count *x = a, *y = b;
    if (x->grids != y->grids)
        return x->grids ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->reason, y->reason);
}

typedef struct search {
    const gs_scenario *base;
    const gs_plan_opts *o;
    cand *c;
    size_t n, cap;
    block_slots *blocks;
    size_t nblocks, bcap;
    counts rejected, pruned;
    uint64_t grids, legal_grids, evaluated;
    int truncated;
} search;

static int allowed(const gs_plan_list *l, uint64_t v)
{
    if (l->n == 0)
        return 1;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == v)
            return 1;
    return 0;
}

/* The scenario of one candidate: base's model, cluster and batch, the candidate's grid, micro
 * and strategy, the rest of the strategy at the seed's defaults. */
static void cand_scenario(const search *x, const cand *c, gs_scenario *s)
{
    *s = *x->base;
    s->nstragglers = 0;
    s->grid.dp = c->dp;
    s->grid.pp = c->pp;
    s->grid.tp = c->tp;
    s->grid.order[0] = GS_DIM_TP;
    s->grid.order[1] = GS_DIM_DP;
    s->grid.order[2] = GS_DIM_PP;
    s->grid.allow_tp_cross_node = 0;
    s->grid.grid_line = s->grid.grid_col = 0;
    s->batch.micro_seqs = c->micro;
    s->batch.batch_line = s->batch.batch_col = 0;
    s->strategy = c->st;
}

static gs_status push_cand(search *x, const cand *c, gs_error *err)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 1024;
        cand *v = realloc(x->c, cap * sizeof *v);
        if (!v)
            return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory (%zu candidates)", cap);
        x->c = v;
        x->cap = cap;
    }
    x->c[x->n++] = *c;
    return GS_OK;
}

static gs_status new_block(search *x, gs_error *err)
{
    if (x->nblocks == x->bcap) {
        size_t cap = x->bcap ? 2 * x->bcap : 256;
        block_slots *v = realloc(x->blocks, cap * sizeof *v);
        if (!v)
            return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        x->blocks = v;
        x->bcap = cap;
    }
    block_slots *b = &x->blocks[x->nblocks++];
    for (int r = 0; r < 3; r++)
        b->slot[r][0] = b->slot[r][1] = -1;
    return GS_OK;
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
    cand_scenario(x, c, &s);
    if (gs_scenario_mesh(&s, &mesh, NULL, &e) != GS_OK) {
        char reason[96];
        gs_plan_reason(e.msg, reason, sizeof reason);
        return count_add(&x->rejected, reason, 0, 1, err);
    }
    c->state = CAND_LEGAL;
    c->block = x->nblocks - 1;
    x->blocks[c->block].slot[c->st.recompute][c->st.offload ? 1 : 0] = (long)x->n;
    c->res.key = x->n;
    return push_cand(x, c, err);
}

static gs_status enumerate(search *x, gs_error *err)
{
    const gs_plan_opts *o = x->o;
    uint64_t G = gs_cluster_gpus(&x->base->cluster);
    const uint64_t *micros = o->micro.n ? o->micro.v : default_micro;
    size_t nmicro = o->micro.n ? o->micro.n : sizeof default_micro / sizeof default_micro[0];
    gs_status rc = GS_OK;
    for (uint64_t tp = 1; tp <= G && rc == GS_OK; tp++) {
        if (G % tp || !allowed(&o->tp, tp))
            continue;
        for (uint64_t pp = 1; pp <= G / tp && rc == GS_OK; pp++) {
            if ((G / tp) % pp || !allowed(&o->pp, pp))
                continue;
            uint64_t dp = G / tp / pp;
            if (!allowed(&o->dp, dp))
                continue;
            x->grids++;
            gs_mesh mesh;
            gs_error e;
            gs_error_init(&e);
            if (gs_mesh_init(&mesh, tp, dp, pp, NULL, x->base->cluster.gpus_per_node, &e) != GS_OK ||
                gs_mesh_check(&mesh, G, &x->base->model, 0, NULL, &e) != GS_OK) {
                char reason[96];
                gs_plan_reason(e.msg, reason, sizeof reason);
                rc = count_add(&x->rejected, reason, 1, 1, err);
                continue;
            }
            x->legal_grids++;
            int dp_spans = gs_mesh_dim_crosses_nodes(&mesh, GS_DIM_DP, NULL);
            for (int sh = 0; sh < GS_SHARD_COUNT && rc == GS_OK; sh++) {
                if (o->sharding_mask && !(o->sharding_mask & (1u << sh)))
                    continue;
                if (sh == GS_SHARD_HYBRID_SHARD && !dp_spans)
                    continue;
                for (size_t mi = 0; mi < nmicro && rc == GS_OK; mi++) {
                    /* pipeline variants: 1f1b, gpipe, interleaved v = 2, 4 where the layers split */
                    static const struct { gs_pipeline kind; uint64_t v; } pipes[] = {
                        {GS_PIPE_1F1B, 1}, {GS_PIPE_GPIPE, 1}, {GS_PIPE_INTERLEAVED, 2}, {GS_PIPE_INTERLEAVED, 4}};
                    size_t npipes = pp > 1 ? 4 : 1;
                    for (size_t pi = 0; pi < npipes && rc == GS_OK; pi++) {
                        if (pipes[pi].v > 1 && x->base->model.layers % (pp * pipes[pi].v) != 0)
                            continue;
                        for (int sp = 0; sp <= (tp > 1) && rc == GS_OK; sp++) {
                            if ((rc = new_block(x, err)) != GS_OK)
                                break;
                            for (int r = 0; r < 3 && rc == GS_OK; r++) {
                                int offloads = gs_sharding_is_fsdp((gs_sharding)sh) ? 2 : 1;
                                for (int off = 0; off < offloads && rc == GS_OK; off++) {
                                    cand c;
                                    memset(&c, 0, sizeof c);
                                    c.dp = dp;
                                    c.pp = pp;
                                    c.tp = tp;
                                    c.micro = micros[mi];
                                    gs_strategy_defaults(&c.st);
                                    c.st.precision = x->base->strategy.precision;
                                    c.st.grad_dtype = x->base->strategy.grad_dtype;
                                    c.st.bucket_bytes = x->base->strategy.bucket_bytes;
                                    /* the base's kernels: the framework's, not the grid's choice */
                                    c.st.flash_attention = x->base->strategy.flash_attention;
                                    c.st.cross_entropy = x->base->strategy.cross_entropy;
                                    c.st.framework = x->base->strategy.framework;
                                    c.st.compile = x->base->strategy.compile;
                                    c.st.attention = x->base->strategy.attention;
                                    c.st.sharding = (gs_sharding)sh;
                                    c.st.reshard_after_forward = gs_sharding_shards_params(c.st.sharding);
                                    c.st.recompute = (gs_recompute)r;
                                    c.st.pipeline = pipes[pi].kind;
                                    c.st.virtual_stages = pipes[pi].v;
                                    c.st.sequence_parallel = sp;
                                    c.st.offload = off;
                                    /* the base's framework overlaps, where the candidate can have them */
                                    c.st.tp_comm_overlap = x->base->strategy.tp_comm_overlap && sp && tp > 1;
                                    c.st.overlap_param_gather = x->base->strategy.overlap_param_gather &&
                                                                (c.st.sharding == GS_SHARD_ZERO1 ||
                                                                 c.st.sharding == GS_SHARD_ZERO2);
                                    /* the base's bucket rule (Megatron-Core's first), where the
                                     * candidate's buckets can follow it */
                                    if (gs_strategy_can_bucket_first(&c.st))
                                        c.st.bucket_stages = x->base->strategy.bucket_stages;
                                    rc = consider(x, &c, err);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return rc;
}

/* ---- the shortened, extrapolated step ------------------------------------------------------- */

static void copy_report(const gs_report *r, gs_plan_candidate *o)
{
    o->step_time_s = r->step_time_s;
    o->tokens_per_s = r->tokens_per_s;
    o->tokens_per_s_per_gpu = r->tokens_per_s_per_gpu;
    o->mfu = r->mfu;
    o->hfu = r->hfu;
    o->tflops_per_gpu = r->tflops_per_gpu;
    o->comm_share = r->comm_share;
    o->bubble_share = r->bubble_share;
    o->compute_s = r->compute_s;
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        o->comm_s[d] = r->comm_s[d];
        o->exposed_s[d] = r->exposed_s[d];
    }
    o->events = r->events;
    o->peak_bytes = r->peak_bytes;
    o->gpu_bytes = r->gpu_bytes;
}

static gs_status run_eval(const gs_scenario *s, uint64_t m, gs_plan_eval eval, void *ctx, gs_report *rep,
                          gs_error *err)
{
    gs_scenario t = *s;
    gs_mesh mesh;
    t.batch.global_seqs = m * s->batch.micro_seqs * s->grid.dp;
    gs_status rc = gs_scenario_mesh(&t, &mesh, NULL, err);
    if (rc == GS_OK)
        rc = eval(&t, &mesh, ctx, rep, err);
    return rc;
}

gs_status gs_plan_simulate(const gs_scenario *s, const gs_mesh *mesh, gs_plan_eval eval, void *ctx,
                           gs_plan_candidate *out, gs_error *err)
{
    uint64_t m = gs_scenario_microbatches(s), p = mesh->size[GS_DIM_PP];
    uint64_t m1 = 2 * p > 2 ? 2 * p : 2;
    if (s->strategy.pipeline == GS_PIPE_INTERLEAVED && p > 1)
        m1 = (m1 + p - 1) / p * p;
    if (m1 > m)
        m1 = m;
    uint64_t m2 = m1 + p;
    gs_report r1, r2;
    gs_status rc;
    if (m <= m2) {
        if ((rc = eval(s, mesh, ctx, &r2, err)) != GS_OK)
            return rc;
        copy_report(&r2, out);
        out->sim_m1 = m;
        out->sim_m2 = 0;
        gs_report_fini(&r2);
        return GS_OK;
    }
    if ((rc = run_eval(s, m1, eval, ctx, &r1, err)) != GS_OK)
        return rc;
    if ((rc = run_eval(s, m2, eval, ctx, &r2, err)) != GS_OK) {
        gs_report_fini(&r1);
        return rc;
    }
    double k = (double)(m - m2) / (double)(m2 - m1);
#define GS_EXTRA(a, b) ((b) + k * ((b) - (a)))
    double step = GS_EXTRA(r1.step_time_s, r2.step_time_s);
    double world = (double)mesh->world;
    double tokens = gs_scenario_tokens(s);
    double model_flops = gs_model_train_flops(&s->model, tokens);
    double hw_flops = GS_EXTRA(r1.hardware_flops, r2.hardware_flops);
    double comm_time = GS_EXTRA(r1.comm_share * r1.step_time_s, r2.comm_share * r2.step_time_s);
    double idle_time = GS_EXTRA(r1.bubble_share * r1.step_time_s, r2.bubble_share * r2.step_time_s);
    out->step_time_s = step;
    out->tokens_per_s = step > 0 ? tokens / step : 0;
    out->tokens_per_s_per_gpu = out->tokens_per_s / world;
    out->tflops_per_gpu = step > 0 ? model_flops / step / world / 1e12 : 0;
    out->mfu = step > 0 && r2.peak_flops > 0 ? model_flops / (step * world * r2.peak_flops) : 0;
    out->hfu = step > 0 && r2.peak_flops > 0 ? hw_flops / (step * world * r2.peak_flops) : 0;
    out->comm_share = step > 0 ? comm_time / step : 0;
    out->bubble_share = step > 0 && idle_time > 0 ? idle_time / step : 0; /* extrapolated: no -0.0 */
    out->compute_s = GS_EXTRA(r1.compute_s, r2.compute_s);
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        out->comm_s[d] = GS_EXTRA(r1.comm_s[d], r2.comm_s[d]);
        out->exposed_s[d] = GS_EXTRA(r1.exposed_s[d], r2.exposed_s[d]);
    }
    double ev = GS_EXTRA((double)r1.events, (double)r2.events);
    out->events = ev > 0 ? (uint64_t)llround(ev) : 0;
#undef GS_EXTRA
    out->gpu_bytes = r2.gpu_bytes;
    out->peak_bytes = r2.peak_bytes; /* the caller puts the real step's ledger peak here */
    out->sim_m1 = m1;
    out->sim_m2 = m2;
    gs_report_fini(&r1);
    gs_report_fini(&r2);
    return GS_OK;
}

/* ---- worker threads ------------------------------------------------------------------------ */

typedef enum work_kind { WORK_LEDGER, WORK_SIM } work_kind;

typedef struct pool {
    search *x;
    work_kind kind;
    size_t *items;       /* candidate indices, in issue order */
    size_t nitems;
    size_t next;         /* next item to take */
    uint64_t done;
    uint64_t done_before, total; /* progress: simulations finished in earlier pools, upper bound */
    uint64_t sim_runs;
    pthread_mutex_t lock;
    gs_status rc;        /* first failure */
    gs_error err;
    size_t failed_item;  /* item index of the first failure */
} pool;

static gs_status ledger_one(search *x, cand *c, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_ledger *l = NULL;
    cand_scenario(x, c, &s);
    gs_status rc = gs_scenario_mesh(&s, &mesh, NULL, err);
    if (rc == GS_OK)
        rc = gs_ledger_create_numbers(&s, &mesh, &l, err); /* the peak only: no explain text */
    if (rc == GS_OK) {
        c->peak_bytes = l->peak_bytes;
        c->gpu_bytes = l->gpu_bytes;
        c->states_bytes = 0;
        for (size_t i = 0; i < l->nranks; i++) {
            const uint64_t *mem = l->ranks[i].mem;
            uint64_t st = mem[GS_MEM_PARAMS] + mem[GS_MEM_MASTER] + mem[GS_MEM_ADAM_M] + mem[GS_MEM_ADAM_V];
            if (st > c->states_bytes)
                c->states_bytes = st;
        }
        c->state = l->peak_bytes <= l->gpu_bytes ? CAND_FITS : CAND_NOFIT;
    } else if (rc == GS_ERR_OVERFLOW) {
        c->state = CAND_NOFIT; /* sizes beyond 64 bits: certainly beyond the GPU */
        c->states_bytes = UINT64_MAX;
        rc = GS_OK;
    }
    c->ledgered = 1;
    gs_ledger_destroy(l);
    return rc;
}

static gs_status sim_one(search *x, cand *c, uint64_t *runs, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    cand_scenario(x, c, &s);
    gs_status rc = gs_scenario_mesh(&s, &mesh, NULL, err);
    if (rc != GS_OK)
        return rc;
    uint64_t key = c->res.key;
    if (x->o->no_extrapolate) {
        gs_report r;
        if ((rc = x->o->eval(&s, &mesh, x->o->eval_ctx, &r, err)) != GS_OK)
            return rc;
        copy_report(&r, &c->res);
        gs_report_fini(&r);
        c->res.sim_m1 = gs_scenario_microbatches(&s);
        c->res.sim_m2 = 0;
        *runs = 1;
    } else {
        if ((rc = gs_plan_simulate(&s, &mesh, x->o->eval, x->o->eval_ctx, &c->res, err)) != GS_OK)
            return rc;
        *runs = c->res.sim_m2 ? 2 : 1;
    }
    c->res.key = key;
    c->res.dp = c->dp;
    c->res.pp = c->pp;
    c->res.tp = c->tp;
    c->res.micro = c->micro;
    c->res.strategy = c->st;
    c->res.microbatches = gs_scenario_microbatches(&s);
    c->res.peak_bytes = c->peak_bytes;
    c->state = CAND_DONE;
    return GS_OK;
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (p->next >= p->nitems || p->rc != GS_OK) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        size_t item = p->next++;
        pthread_mutex_unlock(&p->lock);

        cand *c = &p->x->c[p->items[item]];
        gs_error e;
        gs_error_init(&e);
        uint64_t runs = 0;
        gs_status rc = p->kind == WORK_LEDGER ? ledger_one(p->x, c, &e) : sim_one(p->x, c, &runs, &e);

        pthread_mutex_lock(&p->lock);
        p->done++;
        p->sim_runs += runs;
        /* keep the failure of the earliest item, whatever thread finished first */
        if (rc != GS_OK && (p->rc == GS_OK || item < p->failed_item)) {
            p->rc = rc;
            p->err = e;
            p->failed_item = item;
        }
        if (p->kind == WORK_SIM && p->x->o->progress)
            p->x->o->progress(p->x->o->progress_ctx, p->done_before + p->done, p->total);
        pthread_mutex_unlock(&p->lock);
    }
}

static gs_status run_pool(search *x, work_kind kind, size_t *items, size_t nitems, uint64_t *sim_runs,
                          uint64_t done_before, uint64_t total, gs_error *err)
{
    pool p;
    memset(&p, 0, sizeof p);
    p.done_before = done_before;
    p.total = total;
    p.x = x;
    p.kind = kind;
    p.items = items;
    p.nitems = nitems;
    gs_error_init(&p.err);
    if (pthread_mutex_init(&p.lock, NULL) != 0)
        return gs_error_set(err, GS_ERR_RUNTIME, "plan: pthread_mutex_init failed");
    int nthreads = x->o->threads > 1 ? x->o->threads : 1;
    if ((size_t)nthreads > nitems)
        nthreads = nitems ? (int)nitems : 1;
    pthread_t tid[64];
    if (nthreads > 64)
        nthreads = 64;
    int started = 0;
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&tid[started], NULL, worker, &p) != 0)
            break;
        started++;
    }
    worker(&p); /* the calling thread works too */
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.lock);
    if (sim_runs)
        *sim_runs += p.sim_runs;
    if (p.rc != GS_OK) {
        const cand *c = &x->c[items[p.failed_item]];
        *err = p.err;
        gs_error_prefix(err, "plan: dp=%llu pp=%llu tp=%llu %s micro=%llu", (unsigned long long)c->dp,
                        (unsigned long long)c->pp, (unsigned long long)c->tp, gs_sharding_name(c->st.sharding),
                        (unsigned long long)c->micro);
        return p.rc;
    }
    return GS_OK;
}

/* ---- pruning ------------------------------------------------------------------------------- */

/* Memory, with R1 and R2. R1, R2: in the analytic simulation an event starts at the max of its
 * dependencies' ends and its stream's previous end (a max-plus system), so no finish time
 * decreases when an event is added or lengthened and the per-stream order is kept. Recompute
 * only adds forward recomputation to the compute stream before each backward (selective: the
 * attention core; full: the whole layer, a superset); offload only adds host<->device copies and
 * moves the optimizer to the host, whose per-rank bandwidth (1/8 of a node's DRAM) is below HBM's.
 * Neither changes any other event. So the lighter twin is at least as fast, and when it fits the
 * heavier one is pruned (without its ledger: it keeps fewer activations or fewer states on the GPU
 * and would fit too). Caveats, stated in the help: the overlap slowdown factor is decided per
 * compute event at its start, so a shifted overlap could in principle move a step by a fraction
 * of that factor on one event; at an exactly equal step the pruned twin would have won the
 * headroom tie-break.
 *
 * The model states (working params, fp32 master, Adam m and v) held on a stage depend on the grid,
 * the sharding and offload only, not on micro-batch, recompute, pipeline schedule or sequence
 * parallelism, and they are part of the peak: when they alone exceed the GPU on some stage, every
 * configuration sharing grid, sharding and offload is rejected with one ledger. */
static int fits_or_pruned(const search *x, long i)
{
    return i >= 0 && (x->c[i].state == CAND_FITS || x->c[i].state == CAND_PRUNED);
}

static gs_status check_memory(search *x, size_t *items, gs_error *err)
{
    gs_status rc = GS_OK;
    /* 1. one ledger per (grid, sharding, offload): its first configuration */
    size_t n = 0;
    for (size_t i = 0; i < x->n; i++) {
        const cand *c = &x->c[i];
        int first = 1;
        for (size_t j = i; j-- > 0;) {
            const cand *d = &x->c[j];
            if (d->dp != c->dp || d->pp != c->pp || d->tp != c->tp || d->st.sharding != c->st.sharding)
                break; /* enumeration keeps a (grid, sharding) contiguous */
            if (d->st.offload == c->st.offload) {
                first = 0;
                break;
            }
        }
        if (first)
            items[n++] = i;
    }
    if ((rc = run_pool(x, WORK_LEDGER, items, n, NULL, 0, 0, err)) != GS_OK)
        return rc;
    for (size_t k = 0; k < n; k++) {
        const cand *r = &x->c[items[k]];
        if (r->states_bytes <= r->gpu_bytes && r->states_bytes != UINT64_MAX)
            continue;
        for (size_t i = items[k]; i < x->n; i++) {
            cand *c = &x->c[i];
            if (c->dp != r->dp || c->pp != r->pp || c->tp != r->tp || c->st.sharding != r->st.sharding)
                break;
            if (c->st.offload == r->st.offload && c->state == CAND_LEGAL)
                c->state = CAND_NOFIT;
        }
    }
    /* 2. the rest, lightest recompute and no offload first, skipping dominated twins */
    for (int r = 0; r < 3 && rc == GS_OK; r++)
        for (int off = 0; off < 2 && rc == GS_OK; off++) {
            n = 0;
            for (size_t b = 0; b < x->nblocks && rc == GS_OK; b++) {
                const block_slots *bs = &x->blocks[b];
                long i = bs->slot[r][off];
                if (i < 0 || (x->c[i].state != CAND_LEGAL && x->c[i].state != CAND_FITS))
                    continue;
                int lighter = 0;
                for (int q = 0; q < r; q++)
                    lighter |= fits_or_pruned(x, bs->slot[q][off]);
                int no_offload = off && fits_or_pruned(x, bs->slot[r][0]);
                if (no_offload) {
                    x->c[i].state = CAND_PRUNED;
                    rc = count_add(&x->pruned, "offload with a fitting twin without offload (R1)", 0, 1, err);
                } else if (lighter) {
                    x->c[i].state = CAND_PRUNED;
                    rc = count_add(&x->pruned, "recompute with a fitting lighter-recompute twin (R2)", 0, 1, err);
                } else if (x->c[i].state == CAND_LEGAL) {
                    items[n++] = (size_t)i;
                }
            }
            if (rc == GS_OK)
                rc = run_pool(x, WORK_LEDGER, items, n, NULL, 0, 0, err);
        }
    for (size_t i = 0; i < x->n && rc == GS_OK; i++)
        if (x->c[i].state == CAND_NOFIT)
            rc = count_add(&x->rejected, "does not fit in GPU memory (ledger peak)", 0, 1, err);
    return rc;
}

/* R3: the schedule builder reads the strategy's sharding only through the shard plan
 * (gs_shard_plan_init) and the DP group kind (HSDP's intra-node group); every other input is
 * the same for candidates differing only in sharding. Equal plans therefore build the same
 * schedule and simulate to the same report: simulate one, copy it to the others. */
typedef struct plan_sig {
    uint64_t dp, pp, tp, micro, v;
    uint32_t recompute, pipeline, sp, offload, hybrid;
    gs_shard_plan plan;
    size_t index;
} plan_sig;

static int sig_cmp(const void *a, const void *b)
{
    const plan_sig *x = a, *y = b;
    int c = memcmp(x, y, offsetof(plan_sig, index));
    if (c)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

static gs_status merge_identical(search *x, gs_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < x->n; i++)
        n += x->c[i].state == CAND_FITS;
    if (n == 0)
        return GS_OK;
    plan_sig *v = calloc(n, sizeof *v);
    if (!v)
        return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < x->n; i++) {
        cand *c = &x->c[i];
        if (c->state != CAND_FITS)
            continue;
        gs_scenario s;
        gs_mesh mesh;
        gs_error e;
        cand_scenario(x, c, &s);
        plan_sig *g = &v[k++];
        memset(g, 0, sizeof *g);
        g->dp = c->dp;
        g->pp = c->pp;
        g->tp = c->tp;
        g->micro = c->micro;
        g->v = c->st.virtual_stages;
        g->recompute = c->st.recompute;
        g->pipeline = c->st.pipeline;
        g->sp = (uint32_t)c->st.sequence_parallel;
        g->offload = (uint32_t)c->st.offload;
        g->hybrid = c->st.sharding == GS_SHARD_HYBRID_SHARD;
        g->index = i;
        gs_error_init(&e);
        if (gs_scenario_mesh(&s, &mesh, NULL, &e) == GS_OK)
            gs_shard_plan_init(&s, &mesh, 0, gs_scenario_microbatches(&s), &g->plan);
        if (g->hybrid) /* rank-dependent plan: never merged */
            g->plan.N = UINT64_MAX - i;
    }
    qsort(v, n, sizeof *v, sig_cmp);
    gs_status rc = GS_OK;
    for (size_t i = 1; i < n && rc == GS_OK; i++) {
        size_t first = i - 1;
        while (i < n && memcmp(&v[first], &v[i], offsetof(plan_sig, index)) == 0) {
            x->c[v[i].index].state = CAND_COPY;
            x->c[v[i].index].twin = v[first].index;
            rc = count_add(&x->pruned, "same schedule as another sharding (R3: simulated once, both listed)", 0, 1,
                           err);
            i++;
        }
    }
    free(v);
    return rc;
}

/* ---- ranking ------------------------------------------------------------------------------- */

static int rank_cmp(const void *a, const void *b)
{
    const gs_plan_candidate *x = a, *y = b;
    if (x->tokens_per_s != y->tokens_per_s)
        return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    double hx = (double)x->gpu_bytes - (double)x->peak_bytes, hy = (double)y->gpu_bytes - (double)y->peak_bytes;
    if (hx != hy)
        return hx > hy ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

typedef struct cost_item {
    double cost;
    size_t index;
} cost_item;

static int cost_cmp(const void *a, const void *b)
{
    const cost_item *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* ---- bound search (R4) ------------------------------------------------------------------------ */

/* Simulation cost estimate: micro-batches simulated (about 5 pp, at most m) with recompute's
 * extra passes; the most expensive go first so the threads finish together. */
static double sim_cost(const search *x, const cand *c)
{
    uint64_t m = x->base->batch.global_seqs / (c->micro * c->dp);
    uint64_t ms = 5 * c->pp > m ? m : 5 * c->pp;
    return (double)(ms < 5 ? 5 : ms) * (1.0 + (double)c->st.recompute * 0.3);
}

static gs_status sim_items(search *x, size_t *items, size_t n, int by_cost, uint64_t *done, uint64_t total,
                           uint64_t *runs, gs_error *err)
{
    if (n == 0)
        return GS_OK;
    if (by_cost) {
        cost_item *order = malloc(n * sizeof *order);
        if (!order)
            return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        for (size_t i = 0; i < n; i++) {
            order[i].cost = sim_cost(x, &x->c[items[i]]);
            order[i].index = items[i];
        }
        qsort(order, n, sizeof *order, cost_cmp);
        for (size_t i = 0; i < n; i++)
            items[i] = order[i].index;
        free(order);
    }
    gs_status rc = run_pool(x, WORK_SIM, items, n, runs, *done, total, err);
    *done += n;
    return rc;
}

/* Candidates sharing grid, micro-batch, recompute, pipeline schedule and sequence parallelism
 * build the same compute events on every rank except one: the optimizer step, whose size is the
 * optimizer shard (params / dp when the optimizer is sharded) and which runs on the host, slower,
 * under offload. The compute stream runs its events one at a time, so a member's step is at least
 * the sum of its base compute durations on any rank; the simulated compute busy time of the
 * member with the smallest optimizer (sharded over dp, no offload, not hybrid) is at most
 * compute_slowdown times its own base sum, which is at most any member's. Hence
 * lower bound = compute busy / compute_slowdown - 1 us (the optimizer shards of zero1/2 and FSDP
 * differ by a few elements of rounding) for every member. Members are simulated in order of
 * their bound, in waves of fixed size (the result does not depend on the thread count), while
 * the bound is at most the keep-th best step found; the rest cannot enter the best keep. */
typedef struct group_item {
    uint64_t key[8];
    size_t index;
} group_item;

static int group_cmp(const void *a, const void *b)
{
    const group_item *x = a, *y = b;
    for (int i = 0; i < 8; i++)
        if (x->key[i] != y->key[i])
            return x->key[i] < y->key[i] ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int lower_cmp(const void *a, const void *b)
{
    const cost_item *x = a, *y = b; /* cost holds the bound here */
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int is_min_optimizer(const cand *c)
{
    if (c->st.offload || c->st.sharding == GS_SHARD_HYBRID_SHARD)
        return 0;
    return c->dp == 1 || gs_sharding_shards_optimizer(c->st.sharding);
}

typedef struct step_mult {
    double step_s;
    uint64_t mult;
} step_mult;

static int step_cmp(const void *a, const void *b)
{
    const step_mult *x = a, *y = b;
    return x->step_s < y->step_s ? -1 : x->step_s > y->step_s;
}

/* The keep-th best step among simulated candidates counting their copies (INFINITY if fewer). */
static double kth_best(const search *x, const uint64_t *mult, size_t keep, step_mult *buf)
{
    size_t n = 0;
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_DONE) {
            buf[n].step_s = x->c[i].res.step_time_s;
            buf[n++].mult = mult[i];
        }
    qsort(buf, n, sizeof *buf, step_cmp);
    uint64_t seen = 0;
    for (size_t k = 0; k < n; k++) {
        seen += buf[k].mult;
        if (seen >= keep)
            return buf[k].step_s;
    }
    return INFINITY;
}

static gs_status bound_search(search *x, size_t *items, uint64_t *nsim, uint64_t *runs, uint64_t *bounded,
                              gs_error *err)
{
    const gs_plan_opts *o = x->o;
    size_t nfit = 0;
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_FITS)
            items[nfit++] = i;
    *nsim = 0;
    *bounded = 0;
    if (o->keep == 0 || o->compute_slowdown < 1.0)
        return sim_items(x, items, nfit, 1, nsim, nfit, runs, err);

    gs_status rc = GS_OK;
    group_item *g = calloc(nfit ? nfit : 1, sizeof *g);
    uint64_t *mult = calloc(x->n, sizeof *mult);
    step_mult *buf = calloc(x->n ? x->n : 1, sizeof *buf);
    cost_item *rest = calloc(nfit ? nfit : 1, sizeof *rest);
    if (!g || !mult || !buf || !rest) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_FITS || x->c[i].state == CAND_COPY)
            mult[x->c[i].state == CAND_COPY ? x->c[i].twin : i]++;
    for (size_t i = 0; i < nfit; i++) {
        const cand *c = &x->c[items[i]];
        uint64_t k[8] = {c->dp, c->pp, c->tp, c->micro, (uint64_t)c->st.recompute, (uint64_t)c->st.pipeline,
                         c->st.virtual_stages, (uint64_t)c->st.sequence_parallel};
        memcpy(g[i].key, k, sizeof k);
        g[i].index = items[i];
    }
    qsort(g, nfit, sizeof *g, group_cmp);

    /* phase A: one representative per group */
    size_t nrep = 0;
    for (size_t i = 0; i < nfit;) {
        size_t j = i;
        long rep = -1;
        while (j < nfit && memcmp(g[j].key, g[i].key, sizeof g[i].key) == 0) {
            if (rep < 0 && is_min_optimizer(&x->c[g[j].index]))
                rep = (long)g[j].index;
            j++;
        }
        if (rep >= 0)
            items[nrep++] = (size_t)rep;
        i = j;
    }
    if ((rc = sim_items(x, items, nrep, 1, nsim, nfit, runs, err)) != GS_OK)
        goto out;
    for (size_t i = 0; i < nfit;) {
        size_t j = i;
        double lower = 0;
        while (j < nfit && memcmp(g[j].key, g[i].key, sizeof g[i].key) == 0) {
            const cand *c = &x->c[g[j].index];
            if (c->state == CAND_DONE && is_min_optimizer(c))
                lower = c->res.compute_s / o->compute_slowdown - 1e-6;
            j++;
        }
        for (size_t k = i; k < j; k++)
            x->c[g[k].index].lower_s = lower > 0 ? lower : 0;
        i = j;
    }

    /* phase B: the others in order of their bound, in waves */
    size_t nrest = 0;
    for (size_t i = 0; i < nfit; i++) {
        const cand *c = &x->c[g[i].index];
        if (c->state == CAND_FITS) {
            rest[nrest].cost = c->lower_s;
            rest[nrest++].index = g[i].index;
        }
    }
    qsort(rest, nrest, sizeof *rest, lower_cmp);
    enum { WAVE = 16 };
    size_t pos = 0;
    while (pos < nrest) {
        double best_k = kth_best(x, mult, o->keep, buf);
        size_t n = 0;
        while (pos + n < nrest && n < WAVE && rest[pos + n].cost <= best_k) {
            items[n] = rest[pos + n].index;
            n++;
        }
        if (n == 0)
            break;
        if ((rc = sim_items(x, items, n, 0, nsim, nfit, runs, err)) != GS_OK)
            goto out;
        pos += n;
    }
    for (; pos < nrest; pos++) {
        x->c[rest[pos].index].state = CAND_BOUNDED;
        (*bounded)++;
    }
out:
    free(g);
    free(mult);
    free(buf);
    free(rest);
    return rc;
}

/* Sharding: the fitting candidates' bound groups (bound_search's key: grid, micro, recompute,
 * pipeline, virtual stages, SP) in their sorted order, group g to shard g % shard_count; the
 * others are set aside. A group stays whole, so its bound (R4) is the serial one, and an R3 copy
 * shares its twin's group. Each shard ranks its own candidates exactly in its best `keep`; a
 * global top-keep member is among the best `keep` of its shard, so the union of the shards' best
 * `keep` holds the global best `keep`. */
static gs_status shard_filter(search *x, gs_error *err)
{
    const gs_plan_opts *o = x->o;
    size_t nfit = 0;
    for (size_t i = 0; i < x->n; i++)
        nfit += x->c[i].state == CAND_FITS;
    if (o->shard_count < 2 || nfit == 0)
        return GS_OK;
    group_item *g = calloc(nfit, sizeof *g);
    if (!g)
        return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < x->n; i++) {
        const cand *c = &x->c[i];
        if (c->state != CAND_FITS)
            continue;
        uint64_t key[8] = {c->dp, c->pp, c->tp, c->micro, (uint64_t)c->st.recompute, (uint64_t)c->st.pipeline,
                           c->st.virtual_stages, (uint64_t)c->st.sequence_parallel};
        memcpy(g[k].key, key, sizeof key);
        g[k++].index = i;
    }
    qsort(g, nfit, sizeof *g, group_cmp);
    uint64_t group = 0;
    for (size_t i = 0; i < nfit; i++) {
        if (i > 0 && memcmp(g[i].key, g[i - 1].key, sizeof g[i].key) != 0)
            group++;
        if (group % o->shard_count != o->shard_index)
            x->c[g[i].index].state = CAND_OTHER_SHARD;
    }
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_COPY && x->c[x->c[i].twin].state == CAND_OTHER_SHARD)
            x->c[i].state = CAND_OTHER_SHARD;
    free(g);
    return GS_OK;
}

gs_status gs_plan_run(const gs_scenario *base, const gs_plan_opts *o, gs_plan **out, gs_error *err)
{
    *out = NULL;
    if (!o->eval)
        return gs_error_set(err, GS_ERR_INPUT, "plan: no evaluator");
    search x;
    memset(&x, 0, sizeof x);
    /* every candidate runs under the base's framework: varying the sharding must not swap eager
     * kernels for fused ones behind the user's back (AUTO resolves from the base's sharding) */
    gs_scenario pinned = *base;
    pinned.strategy.framework = gs_framework_resolve(base->strategy.framework, (int)base->strategy.sharding);
    x.base = &pinned;
    x.o = o;
    gs_plan *p = NULL;
    size_t *items = NULL;
    gs_status rc = enumerate(&x, err);
    if (rc != GS_OK)
        goto out;

    if (!(items = malloc((x.n ? x.n : 1) * sizeof *items))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    if ((rc = check_memory(&x, items, err)) != GS_OK || (rc = merge_identical(&x, err)) != GS_OK)
        goto out;
    size_t nfit_all = 0; /* before sharding: whether anything fits at all */
    for (size_t i = 0; i < x.n; i++)
        nfit_all += x.c[i].state == CAND_FITS || x.c[i].state == CAND_COPY;
    if ((rc = shard_filter(&x, err)) != GS_OK)
        goto out;

    if (!(p = calloc(1, sizeof *p))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    uint64_t nsim = 0;
    if ((rc = bound_search(&x, items, &nsim, &p->sim_runs, &p->bounded, err)) != GS_OK)
        goto out;

    /* a copy (R3) of a candidate the bound skipped is skipped with it */
    for (size_t i = 0; i < x.n; i++)
        if (x.c[i].state == CAND_COPY && x.c[x.c[i].twin].state == CAND_BOUNDED) {
            x.c[i].state = CAND_BOUNDED;
            p->bounded++;
        }
    if (p->bounded && (rc = count_add(&x.pruned, "lower bound slower than the best kept (R4)", 0, p->bounded, err)) !=
                          GS_OK)
        goto out;

    size_t ncands = 0;
    for (size_t i = 0; i < x.n; i++)
        ncands += x.c[i].state == CAND_DONE || x.c[i].state == CAND_COPY;
    if (ncands == 0 && nfit_all == 0) {
        char buf[GS_ERROR_MSG_BYTES] = "";
        size_t used = 0;
        qsort(x.rejected.v, x.rejected.n, sizeof *x.rejected.v, count_cmp);
        for (size_t i = 0; i < x.rejected.n && used + 1 < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "\n  %s: %llu %s", x.rejected.v[i].reason,
                                     (unsigned long long)x.rejected.v[i].count,
                                     x.rejected.v[i].grids ? "grids" : "configurations");
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "plan: no configuration of %s on %llu GPUs fits and passes the checks "
                          "(%llu grids, %llu configurations enumerated):%s",
                          base->model.name, (unsigned long long)gs_cluster_gpus(&base->cluster),
                          (unsigned long long)x.grids, (unsigned long long)x.evaluated, buf);
        goto out;
    }
    if (!(p->cands = calloc(ncands ? ncands : 1, sizeof *p->cands))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < x.n; i++) {
        const cand *c = &x.c[i];
        if (c->state == CAND_DONE) {
            p->cands[p->ncands++] = c->res;
        } else if (c->state == CAND_COPY) {
            gs_plan_candidate r = x.c[c->twin].res;
            r.key = i;
            r.strategy = c->st;
            r.peak_bytes = c->peak_bytes;
            p->cands[p->ncands++] = r;
        }
    }
    /* qsort's base must not be NULL even for 0 elements (C11 7.1.4): lists may be empty */
    if (p->ncands > 0)
        qsort(p->cands, p->ncands, sizeof *p->cands, rank_cmp);
    if (x.rejected.n > 0)
        qsort(x.rejected.v, x.rejected.n, sizeof *x.rejected.v, count_cmp);
    if (x.pruned.n > 0)
        qsort(x.pruned.v, x.pruned.n, sizeof *x.pruned.v, count_cmp);
    p->rejected = x.rejected.v;
    p->nrejected = x.rejected.n;
    x.rejected.v = NULL;
    p->pruned = x.pruned.v;
    p->npruned = x.pruned.n;
    x.pruned.v = NULL;
    p->grids = x.grids;
    p->legal_grids = x.legal_grids;
    p->evaluated = x.evaluated;
    p->simulated = nsim;
    p->truncated = x.truncated;
    p->gpus = gs_cluster_gpus(&base->cluster);
    p->global_seqs = base->batch.global_seqs;
    *out = p;
    p = NULL;
out:
    gs_plan_destroy(p);
    free(items);
    free(x.c);
    free(x.blocks);
    free(x.rejected.v);
    free(x.pruned.v);
    return rc;
}

void gs_plan_destroy(gs_plan *p)
{
    if (!p)
        return;
    free(p->cands);
    free(p->rejected);
    free(p->pruned);
    free(p);
}
