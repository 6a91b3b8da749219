/* The planner's tiers (engine/plan_internal.h).
 *
 * Tier 1, every configuration: the mesh and batch checks (plan_space.c); the model states
 * against the GPU's memory (one ledger per grid, sharding and offload); R3 (configurations whose
 * per-rank shard plan and knobs are equal build the same schedule: one simulation for all); and a
 * closed-form lower bound on the simulated step per bound group (opts->bound: same compute
 * events, whatever the sharding and communication knobs).
 * Tier 2, in order of the bound: the memory ledger (R1 and R2 prune a configuration whose
 * lighter twin, without offload or with less recompute, fits: it is never slower), then the
 * extrapolated simulation (gs_plan_simulate), in waves of fixed size, until the next bound is
 * slower than the keep-th best step simulated (R4). The bound is a lower bound on the full
 * simulation; configurations never reached are counted under R4, their memory unknown.
 *
 * R1, R2: in the analytic simulation an event starts at the max of its dependencies' ends and
 * its stream's previous end (a max-plus system), so no finish time decreases when an event is
 * added or lengthened and the per-stream order is kept. Recompute only adds forward
 * recomputation to the compute stream before each backward (selective: the attention core; full:
 * the whole layer, a superset); offload only adds host<->device copies and moves the optimizer to
 * the host, whose per-rank bandwidth is below HBM's. Caveats, stated in the help: the overlap
 * slowdown factor is decided per compute event at its start, so a shifted overlap could in
 * principle move a step by a fraction of that factor on one event; at an exactly equal step the
 * pruned twin would have won the headroom tie-break. A lighter twin's bound is never above its
 * heavier twin's and its enumeration index is lower, so it is always examined first. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/plan_internal.h"

/* The candidate's fields on a scenario copied from base once (cheaper than a whole copy). */
static void cand_fields(const cand *c, const gs_scenario *base, gs_scenario *s)
{
    s->grid.dp = c->dp;
    s->grid.pp = c->pp;
    s->grid.tp = c->tp;
    s->grid.cp = c->cp ? c->cp : 1;
    s->grid.ep = c->ep ? c->ep : 1;
    s->grid.etp = c->etp; /* as gs__plan_cand_scenario */
    s->grid.cp_a2a = gs__plan_cp_a2a(base, s->grid.cp, c->st.cp_comm);
    s->batch.micro_seqs = c->micro;
    s->strategy = c->st;
}

/* ---- worker threads ------------------------------------------------------------------------ */

/* WORK_SIM: the estimate (tier 2: the periodic closed form where the search has a bound to
 * keep, else the extrapolated simulation); WORK_FULL: the extrapolated simulation. */
typedef enum work_kind { WORK_LEDGER, WORK_SIM, WORK_FULL } work_kind;

typedef struct pool {
    search *x;
    work_kind kind;
    const size_t *items; /* candidate indices */
    size_t nitems, next;
    uint64_t sim_runs;
    pthread_mutex_t lock;
    gs_status rc;        /* the first failure (lowest item) */
    gs_error err;
    size_t failed_item;
} pool;

static gs_status ledger_one(search *x, cand *c, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_ledger *l = NULL;
    gs__plan_cand_scenario(x, c, &s);
    gs_status rc = gs_scenario_mesh(&s, &mesh, NULL, err);
    if (rc == GS_OK)
        rc = gs_ledger_create_numbers(&s, &mesh, &l, err); /* the peak only: no explain text */
    if (rc == GS_OK) {
        c->peak_bytes = l->peak_bytes;
        c->gpu_bytes = l->gpu_bytes;
        if (x->o->comm_bound && l->peak_bytes <= l->gpu_bytes)
            rc = x->o->comm_bound(&s, &mesh, l, NULL, &c->comm_lower_s, err);
    } else if (rc == GS_ERR_OVERFLOW) {
        c->peak_bytes = UINT64_MAX; /* sizes beyond 64 bits: certainly beyond the GPU */
        c->gpu_bytes = s.cluster.gpu.hbm_bytes;
        rc = GS_OK;
    }
    c->ledgered = 1;
    gs_ledger_destroy(l);
    return rc;
}

static gs_status sim_one(search *x, cand *c, int full, gs_plan_candidate *out, uint64_t *runs, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs__plan_cand_scenario(x, c, &s);
    gs_status rc = gs_scenario_mesh(&s, &mesh, NULL, err);
    if (rc != GS_OK)
        return rc;
    memset(out, 0, sizeof *out);
    if (x->o->no_extrapolate) {
        gs_report r;
        if ((rc = x->o->eval(&s, &mesh, x->o->eval_ctx, &r, err)) != GS_OK)
            return rc;
        gs__plan_copy_report(&r, out);
        gs_report_fini(&r);
        out->sim_m1 = gs_scenario_microbatches(&s);
        *runs = 1;
    } else {
        int estimate = !full && x->o->keep && x->o->bound;
        rc = estimate ? gs_plan_estimate(&s, &mesh, x->o->eval, x->o->eval_ctx, out, err)
                      : gs_plan_simulate(&s, &mesh, x->o->eval, x->o->eval_ctx, out, err);
        if (rc != GS_OK)
            return rc;
        *runs = (out->sim_m2 ? 2 : 1) * (out->sim_layers ? 2 : 1);
    }
    out->dp = c->dp;
    out->pp = c->pp;
    out->tp = c->tp;
    out->cp = c->cp ? c->cp : 1;
    out->ep = c->ep ? c->ep : 1;
    out->etp = c->etp;
    out->micro = c->micro;
    out->strategy = c->st;
    out->microbatches = gs_scenario_microbatches(&s);
    out->peak_bytes = c->peak_bytes;
    out->gpu_bytes = c->gpu_bytes;
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
        gs_status rc = p->kind == WORK_LEDGER ? ledger_one(p->x, c, &e)
                                              : sim_one(p->x, c, p->kind == WORK_FULL, &p->x->res[c->res], &runs, &e);
        pthread_mutex_lock(&p->lock);
        p->sim_runs += runs;
        if (rc != GS_OK && (p->rc == GS_OK || item < p->failed_item)) {
            p->rc = rc;
            p->err = e;
            p->failed_item = item;
        }
        pthread_mutex_unlock(&p->lock);
    }
}

static gs_status run_pool(search *x, work_kind kind, const size_t *items, size_t nitems, gs_error *err)
{
    pool p;
    memset(&p, 0, sizeof p);
    p.x = x;
    p.kind = kind;
    p.items = items;
    p.nitems = nitems;
    gs_error_init(&p.err);
    if (nitems == 0)
        return GS_OK;
    if (pthread_mutex_init(&p.lock, NULL) != 0)
        return gs_error_set(err, GS_ERR_RUNTIME, "plan: pthread_mutex_init failed");
    int nthreads = x->o->threads > 1 ? x->o->threads : 1;
    if ((size_t)nthreads > nitems)
        nthreads = (int)nitems;
    if (nthreads > 64)
        nthreads = 64;
    pthread_t tid[64];
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
    x->sim_runs += p.sim_runs;
    if (p.rc != GS_OK) {
        const cand *c = &x->c[items[p.failed_item]];
        *err = p.err;
        gs_error_prefix(err, "plan: dp=%llu cp=%llu ep=%llu etp=%llu pp=%llu tp=%llu %s micro=%llu",
                        (unsigned long long)c->dp, (unsigned long long)c->cp, (unsigned long long)c->ep,
                        (unsigned long long)(c->etp ? c->etp : c->tp), (unsigned long long)c->pp,
                        (unsigned long long)c->tp, gs_sharding_name(c->st.sharding), (unsigned long long)c->micro);
        return p.rc;
    }
    return GS_OK;
}

/* ---- tier 1 ---------------------------------------------------------------------------------- */

/* The model states (working params, fp32 master, Adam m and v) held on a stage depend on the
 * grid, the sharding and offload only, and are part of the peak: when they alone exceed the GPU
 * on some stage, every configuration sharing grid, sharding and offload is rejected with one
 * ledger. A grid's configurations are contiguous; its first of each (sharding, offload) runs it. */
static gs_status check_states(search *x, gs_error *err)
{
    gs_status rc = GS_OK;
    gs_scenario s = *x->base;
    for (size_t lo = 0; lo < x->n && rc == GS_OK;) {
        size_t hi = lo;
        while (hi < x->n && x->c[hi].dp == x->c[lo].dp && x->c[hi].pp == x->c[lo].pp && x->c[hi].tp == x->c[lo].tp &&
               x->c[hi].cp == x->c[lo].cp && x->c[hi].ep == x->c[lo].ep && x->c[hi].etp == x->c[lo].etp)
            hi++;
        int verdict[GS_SHARD_COUNT][2]; /* -1 unknown, 0 fits, 1 too large */
        memset(verdict, 0xff, sizeof verdict);
        for (size_t i = lo; i < hi && rc == GS_OK; i++) {
            cand *c = &x->c[i];
            int *v = &verdict[c->st.sharding][c->st.offload ? 1 : 0];
            if (*v < 0) {
                gs_mesh mesh;
                gs_ledger *l = NULL;
                gs__plan_cand_scenario(x, c, &s);
                rc = gs_scenario_mesh(&s, &mesh, NULL, err);
                gs_status lr = rc == GS_OK ? gs_ledger_create_numbers(&s, &mesh, &l, err) : rc;
                if (lr == GS_ERR_OVERFLOW) {
                    *v = 1;
                    rc = GS_OK;
                } else if ((rc = lr) == GS_OK) {
                    *v = 0;
                    for (size_t k = 0; k < l->nranks; k++) {
                        const uint64_t *mem = l->ranks[k].mem;
                        if (mem[GS_MEM_PARAMS] + mem[GS_MEM_MASTER] + mem[GS_MEM_ADAM_M] + mem[GS_MEM_ADAM_V] >
                            l->gpu_bytes)
                            *v = 1;
                    }
                }
                gs_ledger_destroy(l);
            }
            if (rc == GS_OK && *v == 1) {
                c->state = CAND_STATES_NOFIT;
                rc = gs__plan_count_add(&x->rejected, GS_PLAN_REASON_STATES, 0, 1, err);
            }
        }
        lo = hi;
    }
    return rc;
}

/* R3: the schedule builder reads the strategy's sharding only through the shard plan
 * (gs_shard_plan_init) and the DP group kind (HSDP's intra-node group); every other input is the
 * same for configurations equal in everything else. Equal plans therefore build the same schedule
 * and simulate to the same report: simulate one, list all. Only members of one bound group can be
 * equal (the rest of the key is the group's). */
typedef struct plan_sig {
    uint64_t bucket_bytes;
    uint32_t offload, hybrid, ogr, opg, bucket_stages, reshard, prefetch, fwd;
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
    gs_status rc = GS_OK;
    plan_sig *v = NULL;
    size_t cap = 0;
    gs_scenario s = *x->base;
    for (size_t lo = 0; lo < x->n && rc == GS_OK;) {
        size_t hi = lo, n = 0;
        while (hi < x->n && x->c[hi].group == x->c[lo].group)
            hi++;
        if (hi - lo > cap) {
            cap = 2 * (hi - lo);
            plan_sig *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
                break;
            }
            v = nv;
        }
        for (size_t i = lo; i < hi; i++) {
            const cand *c = &x->c[i];
            if (c->state != CAND_LEGAL)
                continue;
            gs_mesh mesh;
            plan_sig *g = &v[n++];
            memset(g, 0, sizeof *g);
            g->bucket_bytes = c->st.bucket_bytes;
            g->offload = (uint32_t)c->st.offload;
            g->hybrid = c->st.sharding == GS_SHARD_HYBRID_SHARD;
            g->ogr = (uint32_t)c->st.overlap_grad_reduce;
            g->opg = (uint32_t)c->st.overlap_param_gather;
            g->bucket_stages = (uint32_t)c->st.bucket_stages;
            g->reshard = (uint32_t)c->st.reshard_after_forward;
            g->prefetch = (uint32_t)c->st.prefetch;
            g->fwd = (uint32_t)c->st.forward_prefetch;
            g->index = i;
            cand_fields(c, x->base, &s);
            if (gs_scenario_mesh(&s, &mesh, NULL, NULL) == GS_OK)
                gs_shard_plan_init(&s, &mesh, 0, gs_scenario_microbatches(&s), &g->plan);
            if (g->hybrid) /* rank-dependent plan: never merged */
                g->plan.N = UINT64_MAX - i;
        }
        if (n > 1)
            qsort(v, n, sizeof *v, sig_cmp);
        for (size_t i = 1; i < n; i++)
            if (memcmp(&v[i - 1], &v[i], offsetof(plan_sig, index)) == 0) {
                size_t first = x->c[v[i - 1].index].state == CAND_COPY ? x->c[v[i - 1].index].twin : v[i - 1].index;
                x->c[v[i].index].state = CAND_COPY;
                x->c[v[i].index].twin = first;
            }
        lo = hi;
    }
    free(v);
    return rc;
}

/* The closed-form lower bound of each bound group (0 without a bound function). */
static gs_status bound_groups(search *x, gs_error *err)
{
    if (!x->o->bound)
        return GS_OK;
    gs_scenario s = *x->base;
    for (size_t g = 0; g < x->ngroups; g++) {
        bound_group *bg = &x->groups[g];
        if (bg->first == SIZE_MAX)
            continue;
        gs_mesh mesh;
        cand_fields(&x->c[bg->first], x->base, &s);
        gs_status rc = gs_scenario_mesh(&s, &mesh, NULL, err);
        if (rc == GS_OK)
            rc = x->o->bound(&s, &mesh, x->o->bound_ctx, &bg->lower_s, err);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* Sharding (opts shard_count > 1): the search units (grid, micro, pipeline, SP, TP overlap: the
 * three bound groups of recompute, with every R1 and R2 twin) in enumeration order, unit u to
 * shard u % shard_count; an R3 copy follows its twin. */
static void shard_filter(search *x)
{
    const gs_plan_opts *o = x->o;
    if (o->shard_count < 2)
        return;
    for (size_t i = 0; i < x->n; i++) {
        cand *c = &x->c[i];
        if ((c->group / 3) % o->shard_count != o->shard_index &&
            (c->state == CAND_LEGAL || c->state == CAND_COPY))
            c->state = CAND_OTHER_SHARD;
    }
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_COPY && x->c[x->c[i].twin].state == CAND_OTHER_SHARD)
            x->c[i].state = CAND_OTHER_SHARD;
}

/* ---- tier 2 ---------------------------------------------------------------------------------- */

typedef struct order_item {
    double lower_s;
    size_t index;
} order_item;

static int order_cmp(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    if (x->lower_s != y->lower_s)
        return x->lower_s < y->lower_s ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* 1 when candidate i is known to fit: ledgered and fitting, or pruned for a fitting twin. */
static int known_fit(const search *x, long i)
{
    if (i < 0)
        return 0;
    const cand *c = &x->c[i];
    if (c->state == CAND_COPY)
        c = &x->c[c->twin];
    return c->state == CAND_FITS || c->state == CAND_DONE || c->state == CAND_PRUNED;
}

/* R1 / R2 for candidate i: 1 when a twin without offload fits, 2 when a lighter-recompute twin
 * fits, else 0. */
static int dominated(const search *x, size_t i)
{
    const cand *c = &x->c[i];
    const block_slots *bs = &x->blocks[c->block];
    int r = (int)c->st.recompute, off = c->st.offload ? 1 : 0;
    if (off && known_fit(x, bs->slot[r][0]))
        return 1;
    for (int q = 0; q < r; q++)
        if (known_fit(x, bs->slot[q][off]))
            return 2;
    return 0;
}

static gs_status prune(search *x, cand *c, int why, gs_error *err)
{
    c->state = CAND_PRUNED;
    c->why = (uint8_t)why;
    return gs__plan_count_add(&x->pruned, why == 1 ? GS_PLAN_REASON_R1 : GS_PLAN_REASON_R2, 0, 1, err);
}

/* The keep-th best step among the simulated, counting the R3 copies of each (INFINITY if
 * fewer). mult[i]: 1 + the copies of candidate i. */
static double kth_best(const search *x, const uint64_t *mult, size_t keep, order_item *buf)
{
    size_t n = 0;
    for (size_t r = 0; r < x->nres; r++) /* res[r].key: its candidate */
        if (x->c[x->res[r].key].state == CAND_DONE) {
            buf[n].lower_s = x->res[r].step_time_s;
            buf[n++].index = x->res[r].key;
        }
    qsort(buf, n, sizeof *buf, order_cmp);
    uint64_t seen = 0;
    for (size_t k = 0; k < n; k++) {
        seen += mult[buf[k].index];
        if (seen >= keep)
            return buf[k].lower_s;
    }
    return INFINITY;
}

/* One wave: the next configurations in bound order whose bound is at most best_s, up to WAVE
 * needing a ledger; ledgers, then R1 / R2 and the fit in order, then the simulations. Returns
 * the new position in the order (pos unchanged: nothing left under best_s). */
enum { WAVE = 16 };

static gs_status wave(search *x, const order_item *ord, size_t nord, size_t *pos, double best_s, gs_error *err)
{
    size_t take[WAVE] = {0}, ntake = 0, sim[WAVE] = {0}, nsim = 0, p = *pos;
    gs_status rc = GS_OK;
    for (; p < nord && ntake < WAVE && ord[p].lower_s <= best_s; p++) {
        cand *c = &x->c[ord[p].index];
        int why = dominated(x, ord[p].index);
        if (why) {
            if ((rc = prune(x, c, why, err)) != GS_OK)
                return rc;
            continue;
        }
        take[ntake++] = ord[p].index;
    }
    if ((rc = run_pool(x, WORK_LEDGER, take, ntake, err)) != GS_OK)
        return rc;
    for (size_t k = 0; k < ntake && rc == GS_OK; k++) {
        cand *c = &x->c[take[k]];
        int why = dominated(x, take[k]); /* a twin earlier in this wave */
        if (why) {
            rc = prune(x, c, why, err);
        } else if (c->peak_bytes > c->gpu_bytes) {
            c->state = CAND_NOFIT;
            rc = gs__plan_count_add(&x->rejected, GS_PLAN_REASON_NOFIT, 0, 1, err);
        } else if (c->comm_lower_s > best_s) {
            c->state = CAND_BOUNDED; /* its traffic alone is slower than the best kept (R4) */
        } else {
            c->state = CAND_FITS;
            sim[nsim++] = take[k];
        }
    }
    if (rc == GS_OK && x->nres + nsim > x->rcap) {
        size_t cap = x->rcap ? 2 * x->rcap : 256;
        while (cap < x->nres + nsim)
            cap *= 2;
        gs_plan_candidate *r = realloc(x->res, cap * sizeof *r);
        if (!r)
            return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        x->res = r;
        x->rcap = cap;
    }
    for (size_t k = 0; k < nsim; k++)
        x->c[sim[k]].res = x->nres++;
    if (rc == GS_OK && (rc = run_pool(x, WORK_SIM, sim, nsim, err)) == GS_OK)
        for (size_t k = 0; k < nsim; k++) {
            x->c[sim[k]].state = CAND_DONE;
            x->res[x->c[sim[k]].res].key = sim[k];
        }
    x->simulated += nsim;
    *pos = p;
    return rc;
}

/* Progress: simulated so far of (simulated + the configurations still under the bound, at most;
 * some of them will be pruned or will not fit). */
static void report_progress(const search *x, const order_item *ord, size_t nord, size_t pos, double best_s)
{
    if (!x->o->progress)
        return;
    size_t lo = pos, hi = nord; /* the first position whose bound is above best_s */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ord[mid].lower_s <= best_s)
            lo = mid + 1;
        else
            hi = mid;
    }
    x->o->progress(x->o->progress_ctx, x->simulated, x->simulated + (lo - pos));
}

#define GS_PLAN_TIER3_MARGIN 0.02

static gs_status tier2(search *x, gs_error *err)
{
    const gs_plan_opts *o = x->o;
    gs_status rc = GS_OK;
    order_item *ord = malloc((x->n ? x->n : 1) * sizeof *ord), *buf = malloc((x->n ? x->n : 1) * sizeof *buf);
    uint64_t *mult = calloc(x->n ? x->n : 1, sizeof *mult);
    if (!ord || !buf || !mult) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    size_t nord = 0;
    for (size_t i = 0; i < x->n; i++) {
        const cand *c = &x->c[i];
        if (c->state == CAND_LEGAL || c->state == CAND_COPY)
            mult[c->state == CAND_COPY ? c->twin : i]++;
        if (c->state == CAND_LEGAL)
            ord[nord++] = (order_item){x->groups[c->group].lower_s, i};
    }
    qsort(ord, nord, sizeof *ord, order_cmp);
    size_t pos = 0;
    while (pos < nord && rc == GS_OK) {
        /* the estimates are within 1% of the simulation: a bound above the keep-th best estimate
         * by more than the margin is above the keep-th best simulation */
        double best = o->keep ? kth_best(x, mult, o->keep, buf) * (1 + GS_PLAN_TIER3_MARGIN) : INFINITY;
        report_progress(x, ord, nord, pos, best);
        size_t before = pos;
        rc = wave(x, ord, nord, &pos, best, err);
        if (pos == before)
            break;
    }
    for (size_t p = pos; p < nord; p++)
        if (x->c[ord[p].index].state == CAND_LEGAL)
            x->c[ord[p].index].state = CAND_BOUNDED;
out:
    free(ord);
    free(buf);
    free(mult);
    return rc;
}

/* Tier 3: the configurations whose estimate (the periodic closed form) is within 2% of the
 * keep-th best, simulated in full (extrapolated in micro-batches only), which the ranking
 * then uses. The closed form is within 1% of the simulation (tests/check_plan), so nothing else
 * can enter the best keep. */
static gs_status tier3(search *x, gs_error *err)
{
    if (!x->o->keep || !x->o->bound || x->o->no_extrapolate)
        return GS_OK;
    gs_status rc = GS_OK;
    order_item *buf = malloc((x->n ? x->n : 1) * sizeof *buf);
    uint64_t *mult = calloc(x->n ? x->n : 1, sizeof *mult);
    size_t *items = malloc((x->n ? x->n : 1) * sizeof *items), n = 0;
    if (!buf || !mult || !items) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < x->n; i++)
        if (x->c[i].state == CAND_DONE || (x->c[i].state == CAND_COPY && x->c[x->c[i].twin].state == CAND_DONE))
            mult[x->c[i].state == CAND_COPY ? x->c[i].twin : i]++;
    double best = kth_best(x, mult, x->o->keep, buf) * (1 + GS_PLAN_TIER3_MARGIN);
    for (size_t i = 0; i < x->n; i++) {
        const cand *c = &x->c[i];
        if (c->state == CAND_DONE && x->res[c->res].sim_layers && x->res[c->res].step_time_s <= best)
            items[n++] = i;
    }
    rc = run_pool(x, WORK_FULL, items, n, err);
    for (size_t k = 0; k < n && rc == GS_OK; k++)
        x->res[x->c[items[k]].res].key = items[k];
out:
    free(buf);
    free(mult);
    free(items);
    return rc;
}

/* Copies (R3) take their twin's fate: listed beside a simulated twin, else counted where the
 * twin is. */
static gs_status settle_copies(search *x, gs_error *err)
{
    gs_status rc = GS_OK;
    for (size_t i = 0; i < x->n && rc == GS_OK; i++) {
        cand *c = &x->c[i];
        if (c->state != CAND_COPY)
            continue;
        const cand *t = &x->c[c->twin];
        c->peak_bytes = t->peak_bytes;
        c->gpu_bytes = t->gpu_bytes;
        if (t->state == CAND_DONE)
            rc = gs__plan_count_add(&x->pruned, GS_PLAN_REASON_R3, 0, 1, err);
        else if (t->state == CAND_NOFIT)
            rc = gs__plan_count_add(&x->rejected, GS_PLAN_REASON_NOFIT, 0, 1, err);
        else if (t->state == CAND_PRUNED)
            rc = gs__plan_count_add(&x->pruned, t->why == 1 ? GS_PLAN_REASON_R1 : GS_PLAN_REASON_R2, 0, 1, err);
        else if (t->state == CAND_BOUNDED)
            c->state = CAND_BOUNDED;
    }
    for (size_t i = 0; i < x->n; i++)
        x->bounded += x->c[i].state == CAND_BOUNDED;
    if (rc == GS_OK && x->bounded)
        rc = gs__plan_count_add(&x->pruned, GS_PLAN_REASON_R4, 0, x->bounded, err);
    return rc;
}

gs_status gs__plan_tier1(search *x, gs_error *err)
{
    gs_status rc;
    if ((rc = check_states(x, err)) != GS_OK || (rc = merge_identical(x, err)) != GS_OK)
        return rc;
    shard_filter(x);
    return bound_groups(x, err);
}

gs_status gs__plan_search(search *x, gs_error *err)
{
    gs_status rc;
    if ((rc = tier2(x, err)) != GS_OK || (rc = tier3(x, err)) != GS_OK)
        return rc;
    return settle_copies(x, err);
}
