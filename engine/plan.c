/* The planner: options, rejection reasons, the shortened and extrapolated step, the run and
 * its result. The space is engine/plan_space.c's, the search's tiers engine/plan_search.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/ledger.h"
#include "engine/plan_internal.h"

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
        {"parallelism is built for sharding", "ep > 1 needs wrap layer, no HSDP, no offload"},
        {"routed experts of model", "experts not divisible by ep"},
        {"load-balanced chunks", "seq not divisible by 2 x cp"},
        {"is hierarchical CP's a2a level", "cp_a2a without cp > 1 and cp_comm a2a+p2p"},
        {"(hierarchical CP) with cp=", "cp_a2a not a divisor of cp below it"},
        {"splits each rank's heads over the a2a level", "heads not divisible by tp x cp_a2a"},
        {"exchanges over the ETP x EP ranks", "flex with expert TP: tp not directly inside dp"},
        {"flex (DeepEP) needs TP x EP > 1", "flex dispatcher with ep = 1"},
        {"asserts --use-torch-fsdp2 without pipeline", "torch FSDP2 (Megatron-LM) with pp or ep > 1"},
        {"overlaps the expert-parallel token exchanges", "EP overlap with ep = 1"},
        {"needs virtual pipeline stages (Megatron-Core asserts", "EP overlap with pp > 1 not interleaved"},
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

/* ---- counts --------------------------------------------------------------------------------- */

gs_status gs__plan_count_add(counts *c, const char *reason, int grids, uint64_t k, gs_error *err)
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

uint64_t gs__plan_cp_a2a(const gs_scenario *base, uint64_t cp, gs_cp_comm comm)
{
    return cp > 1 && comm == GS_CP_A2A_P2P ? base->grid.cp_a2a : 0;
}

void gs__plan_cand_scenario(const search *x, const cand *c, gs_scenario *s)
{
    *s = *x->base;
    s->nstragglers = 0;
    s->grid.dp = c->dp;
    s->grid.pp = c->pp;
    s->grid.tp = c->tp;
    s->grid.cp = c->cp ? c->cp : 1;
    s->grid.cp_outer = 0; /* Megatron's tp-cp-dp-pp */
    s->grid.cp_a2a = gs__plan_cp_a2a(x->base, s->grid.cp, c->st.cp_comm);
    s->grid.ep = c->ep ? c->ep : 1;
    s->grid.etp = c->etp; /* 0: tp */
    s->grid.order[0] = GS_DIM_TP;
    s->grid.order[1] = GS_DIM_DP;
    s->grid.order[2] = GS_DIM_PP;
    s->grid.allow_tp_cross_node = 0;
    /* the base splits its layers evenly (gs_plan_run): pp varies */
    s->grid.grid_line = s->grid.grid_col = 0;
    s->batch.micro_seqs = c->micro;
    s->batch.batch_line = s->batch.batch_col = 0;
    s->strategy = c->st;
}

/* ---- the shortened, extrapolated step ------------------------------------------------------- */

void gs__plan_copy_report(const gs_report *r, gs_plan_candidate *o)
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
    o->host_issue_s = r->host_issue_s;
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
        gs__plan_copy_report(&r2, out);
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
    out->host_issue_s = GS_EXTRA(r1.host_issue_s, r2.host_issue_s);
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

/* ---- the periodic closed form ------------------------------------------------------------------ */

/* What a report says that grows with the step: extrapolated as a whole. */
enum { XQ_STEP, XQ_HW, XQ_COMM, XQ_IDLE, XQ_COMPUTE, XQ_HOST, XQ_EVENTS, XQ_DIMS, XQ_COUNT = XQ_DIMS + 2 * GS_DIM_COUNT };

static void xq_of(const gs_report *r, double *q)
{
    q[XQ_STEP] = r->step_time_s;
    q[XQ_HW] = r->hardware_flops;
    q[XQ_COMM] = r->comm_share * r->step_time_s;
    q[XQ_IDLE] = r->bubble_share * r->step_time_s;
    q[XQ_COMPUTE] = r->compute_s;
    q[XQ_HOST] = r->host_issue_s;
    q[XQ_EVENTS] = (double)r->events;
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        q[XQ_DIMS + d] = r->comm_s[d];
        q[XQ_DIMS + GS_DIM_COUNT + d] = r->exposed_s[d];
    }
}

/* out = b + k (b - a), element by element (a line through a at 0 and b at 1, at 1 + k). */
static void xq_line(const double *a, const double *b, double k, double *out)
{
    for (int i = 0; i < XQ_COUNT; i++)
        out[i] = b[i] + k * (b[i] - a[i]);
}

/* One run at m micro-batches and (chunk > 0) chunk layers per model chunk: the model keeps its
 * shapes, its stages their uneven remainder (layers % pp). */
static gs_status run_reduced(const gs_scenario *s, uint64_t m, uint64_t chunk, gs_plan_eval eval, void *ctx,
                             double *q, double *peak_flops, gs_error *err)
{
    gs_scenario t = *s;
    gs_mesh mesh;
    gs_report r;
    uint64_t pp = s->grid.pp, v = s->strategy.pipeline == GS_PIPE_INTERLEAVED ? s->strategy.virtual_stages : 1;
    t.batch.global_seqs = m * s->batch.micro_seqs * s->grid.dp;
    if (chunk) {
        t.model.layers = pp * v * chunk + s->model.layers % (pp * v);
        gs_grid_split_even(&t.grid); /* the reduced model */
    }
    gs_status rc = gs_scenario_mesh(&t, &mesh, NULL, err);
    if (rc == GS_OK)
        rc = eval(&t, &mesh, ctx, &r, err);
    if (rc != GS_OK)
        return rc;
    xq_of(&r, q);
    *peak_flops = r.peak_flops;
    gs_report_fini(&r);
    return GS_OK;
}

gs_status gs_plan_estimate(const gs_scenario *s, const gs_mesh *mesh, gs_plan_eval eval, void *ctx,
                           gs_plan_candidate *out, gs_error *err)
{
    uint64_t m = gs_scenario_microbatches(s), p = mesh->size[GS_DIM_PP];
    uint64_t v = s->strategy.pipeline == GS_PIPE_INTERLEAVED ? s->strategy.virtual_stages : 1;
    uint64_t m1 = 2 * p > 2 ? 2 * p : 2;
    if (s->strategy.pipeline == GS_PIPE_INTERLEAVED && p > 1)
        m1 = (m1 + p - 1) / p * p;
    if (m1 > m)
        m1 = m;
    uint64_t m2 = m1 + p, chunk = s->model.layers / (p * v), c1 = 2, c2 = 3;
    /* a nominal model spreads its total over its layers: fewer layers would be larger ones */
    int by_m = m > m2, by_layers = chunk > c2 && !s->model.nominal_params;
    if (!by_layers) { /* nothing periodic to cut in depth: the extrapolation in m alone */
        gs_status rc = gs_plan_simulate(s, mesh, eval, ctx, out, err);
        out->sim_layers = 0;
        return rc;
    }
    double q[4][XQ_COUNT], a[XQ_COUNT], b[XQ_COUNT], r[XQ_COUNT], peak = 0;
    uint64_t ms[2] = {by_m ? m1 : m, m2};
    gs_status rc = GS_OK;
    for (int i = 0; i < (by_m ? 2 : 1) && rc == GS_OK; i++)
        for (int j = 0; j < 2 && rc == GS_OK; j++)
            rc = run_reduced(s, ms[i], j ? c2 : c1, eval, ctx, q[2 * i + j], &peak, err);
    if (rc != GS_OK)
        return rc;
    if (by_m) { /* in m at each depth, then in depth */
        xq_line(q[0], q[2], (double)(m - m2) / (double)(m2 - m1), a);
        xq_line(q[1], q[3], (double)(m - m2) / (double)(m2 - m1), b);
    } else {
        memcpy(a, q[0], sizeof a);
        memcpy(b, q[1], sizeof b);
    }
    xq_line(a, b, (double)(chunk - c2) / (double)(c2 - c1), r);
    double world = (double)mesh->world, step = r[XQ_STEP], tokens = gs_scenario_tokens(s);
    double model_flops = gs_model_train_flops(&s->model, tokens);
    memset(out, 0, sizeof *out);
    out->step_time_s = step;
    out->tokens_per_s = step > 0 ? tokens / step : 0;
    out->tokens_per_s_per_gpu = out->tokens_per_s / world;
    out->tflops_per_gpu = step > 0 ? model_flops / step / world / 1e12 : 0;
    out->mfu = step > 0 && peak > 0 ? model_flops / (step * world * peak) : 0;
    out->hfu = step > 0 && peak > 0 ? r[XQ_HW] / (step * world * peak) : 0;
    out->comm_share = step > 0 ? r[XQ_COMM] / step : 0;
    out->bubble_share = step > 0 ? r[XQ_IDLE] / step : 0;
    out->compute_s = r[XQ_COMPUTE];
    out->host_issue_s = r[XQ_HOST];
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        out->comm_s[d] = r[XQ_DIMS + d];
        out->exposed_s[d] = r[XQ_DIMS + GS_DIM_COUNT + d];
    }
    out->events = r[XQ_EVENTS] > 0 ? (uint64_t)llround(r[XQ_EVENTS]) : 0;
    out->sim_m1 = by_m ? m1 : m;
    out->sim_m2 = by_m ? m2 : 0;
    out->sim_layers = c2;
    return GS_OK;
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

/* The error when no configuration survives: the rejection counts. */
static gs_status nothing_fits(const gs_scenario *base, search *x, gs_error *err)
{
    char buf[GS_ERROR_MSG_BYTES] = "";
    size_t used = 0;
    if (x->rejected.n > 0)
        qsort(x->rejected.v, x->rejected.n, sizeof *x->rejected.v, count_cmp);
    for (size_t i = 0; i < x->rejected.n && used + 1 < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "\n  %s: %llu %s", x->rejected.v[i].reason,
                                 (unsigned long long)x->rejected.v[i].count,
                                 x->rejected.v[i].grids ? "grids" : "configurations");
    return gs_error_set(err, GS_ERR_INPUT,
                        "plan: no configuration of %s on %llu GPUs fits and passes the checks "
                        "(%llu grids, %llu configurations enumerated):%s",
                        base->model.name, (unsigned long long)gs_cluster_gpus(&base->cluster),
                        (unsigned long long)x->grids, (unsigned long long)x->evaluated, buf);
}

/* The plan from a finished search: the simulated and their copies, best first; the counts. */
static gs_status assemble(const gs_scenario *base, search *x, gs_plan **out, gs_error *err)
{
    size_t ncands = 0;
    for (size_t i = 0; i < x->n; i++)
        ncands += x->c[i].state == CAND_DONE || (x->c[i].state == CAND_COPY && x->c[x->c[i].twin].state == CAND_DONE);
    gs_plan *p = calloc(1, sizeof *p);
    if (!p || !(p->cands = calloc(ncands ? ncands : 1, sizeof *p->cands))) {
        gs_plan_destroy(p);
        return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
    }
    for (size_t i = 0; i < x->n; i++) {
        const cand *c = &x->c[i];
        if (c->state == CAND_DONE) {
            p->cands[p->ncands++] = x->res[c->res];
        } else if (c->state == CAND_COPY && x->c[c->twin].state == CAND_DONE) {
            gs_plan_candidate r = x->res[x->c[c->twin].res];
            r.key = i;
            r.strategy = c->st;
            r.peak_bytes = c->peak_bytes;
            p->cands[p->ncands++] = r;
        }
    }
    /* qsort's base must not be NULL even for 0 elements (C11 7.1.4): lists may be empty */
    if (p->ncands > 0)
        qsort(p->cands, p->ncands, sizeof *p->cands, rank_cmp);
    if (x->rejected.n > 0)
        qsort(x->rejected.v, x->rejected.n, sizeof *x->rejected.v, count_cmp);
    if (x->pruned.n > 0)
        qsort(x->pruned.v, x->pruned.n, sizeof *x->pruned.v, count_cmp);
    p->rejected = x->rejected.v;
    p->nrejected = x->rejected.n;
    x->rejected.v = NULL;
    p->pruned = x->pruned.v;
    p->npruned = x->pruned.n;
    x->pruned.v = NULL;
    p->grids = x->grids;
    p->legal_grids = x->legal_grids;
    p->evaluated = x->evaluated;
    p->simulated = x->simulated;
    p->sim_runs = x->sim_runs;
    p->bounded = x->bounded;
    p->truncated = x->truncated;
    p->gpus = gs_cluster_gpus(&base->cluster);
    p->global_seqs = base->batch.global_seqs;
    *out = p;
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
    /* the grids vary pp and the virtual stages: each candidate splits the layers evenly */
    gs_grid_split_even(&pinned.grid);
    x.base = &pinned;
    x.o = o;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    gs_status rc = gs__plan_enumerate(&x, err);
    if (rc == GS_OK)
        rc = gs__plan_tier1(&x, err);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    double tier1_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (rc == GS_OK)
        rc = gs__plan_search(&x, err);
    if (rc == GS_OK) {
        size_t listed = 0, passed = 0; /* passed: every check before memory, on any shard */
        for (size_t i = 0; i < x.n; i++) {
            listed += x.c[i].state == CAND_DONE;
            passed += x.c[i].state != CAND_STATES_NOFIT;
        }
        if (listed == 0 && (o->shard_count < 2 || passed == 0))
            rc = nothing_fits(base, &x, err);
    }
    if (rc == GS_OK && (rc = assemble(base, &x, out, err)) == GS_OK)
        (*out)->tier1_cpu_s = tier1_s;
    free(x.c);
    free(x.blocks);
    free(x.groups);
    free(x.res);
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
