/* The step report, from a schedule and its timings (any backend); the trace is engine/trace.c. */
#include "engine/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/units.h"

typedef struct ival {
    double a, b;
} ival;

static int ival_cmp(const void *x, const void *y)
{
    const ival *p = x, *q = y;
    if (p->a < q->a)
        return -1;
    if (p->a > q->a)
        return 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* Sorts and merges intervals in place; returns the count. A stream's intervals usually come in
 * order already (a stream runs its events one after another): the sort is skipped then. */
static size_t ival_union(ival *v, size_t n)
{
    if (n == 0)
        return 0;
    size_t sorted = 1;
    while (sorted < n && ival_cmp(&v[sorted - 1], &v[sorted]) <= 0)
        sorted++;
    if (sorted < n)
        qsort(v, n, sizeof *v, ival_cmp);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].a <= v[m].b) {
            if (v[i].b > v[m].b)
                v[m].b = v[i].b;
        } else {
            v[++m] = v[i];
        }
    }
    return m + 1;
}

/* Merges the sorted lists v[GS_STREAM_DP .. GS_STREAM_PP] (n[k] intervals each) into out, in
 * ival_cmp order; returns the count. */
static size_t ival_merge3(ival *const v[GS_STREAM_COUNT], const size_t n[GS_STREAM_COUNT], ival *out)
{
    size_t pos[GS_STREAM_COUNT] = {0}, m = 0;
    for (;;) {
        int best = -1;
        for (int k = GS_STREAM_DP; k <= GS_STREAM_PP; k++)
            if (pos[k] < n[k] && (best < 0 || ival_cmp(&v[k][pos[k]], &v[best][pos[best]]) < 0))
                best = k;
        if (best < 0)
            return m;
        out[m++] = v[best][pos[best]++];
    }
}

static double ival_len(const ival *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i].b - v[i].a;
    return s;
}

/* Length of the intersection of two merged, sorted interval lists. */
static double ival_overlap(const ival *x, size_t nx, const ival *y, size_t ny)
{
    double s = 0;
    size_t i = 0, j = 0;
    while (i < nx && j < ny) {
        double a = x[i].a > y[j].a ? x[i].a : y[j].a;
        double b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a)
            s += b - a;
        if (x[i].b < y[j].b)
            i++;
        else
            j++;
    }
    return s;
}

static gs_dim stream_dim(gs_stream s)
{
    return s == GS_STREAM_TP ? GS_DIM_TP : s == GS_STREAM_PP ? GS_DIM_PP : GS_DIM_DP;
}

/* The step's time (the last event anywhere), its critical rank and the throughput figures;
 * returns the critical rank's index in sch. */
static size_t report_throughput(const gs_scenario *s, const gs_schedule *sch, gs_timing *const *timing, gs_report *r)
{
    double step = 0;
    size_t crit = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        r->events += sch->ranks[i].nevents * 1;
        for (size_t k = 0; k < sch->ranks[i].nevents; k++)
            if (timing[i][k].end_s > step) {
                step = timing[i][k].end_s;
                crit = i;
            }
    }
    r->step_time_s = step;
    r->critical_rank = sch->nranks ? sch->ranks[crit].rank : 0;
    uint64_t world = sch->mesh.world;
    double tokens = gs_scenario_tokens(s);
    r->peak_flops = gs_gpu_peak_flops(&s->cluster.gpu, s->strategy.precision);
    r->model_flops = gs_model_train_flops(&s->model, tokens);
    if (step > 0) {
        r->tokens_per_s = tokens / step;
        r->tokens_per_s_per_gpu = r->tokens_per_s / (double)world;
        r->tflops_per_gpu = r->model_flops / step / (double)world / 1e12;
        if (r->peak_flops > 0)
            r->mfu = r->model_flops / (step * (double)world * r->peak_flops);
    }
    return crit;
}

/* Per-rank working buffers of busy intervals: one list per stream and their merged
 * communication (each as long as the longest rank's event list). */
typedef struct report_bufs {
    ival *buf[GS_STREAM_COUNT];
    ival *comm;
} report_bufs;

/* Busy time per rank: the compute, communication and exposed communication of the critical
 * rank crit, the largest communication share, the bubble and the hardware FLOPs. */
static void report_busy(const gs_schedule *sch, gs_timing *const *timing, report_bufs *b, size_t crit, gs_report *r)
{
    ival **buf = b->buf, *comm = b->comm;
    double step = r->step_time_s;
    uint64_t world = sch->mesh.world;
    double bubble_sum = 0, weight = 0, hw = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *re = &sch->ranks[i];
        size_t n[GS_STREAM_COUNT] = {0};
        double flops = 0;
        for (size_t k = 0; k < re->nevents; k++) {
            const gs_event *e = &re->events[k];
            const gs_timing *t = &timing[i][k];
            /* a collective on the PP stream is an expert exchange (overlap_moe_expert_parallel_comm):
             * reported with TP and EP */
            int s = e->stream == GS_STREAM_PP && e->kind == GS_EV_COLLECTIVE ? GS_STREAM_TP : e->stream;
            if (t->end_s > t->start_s)
                buf[s][n[s]++] = (ival){t->start_s, t->end_s};
            if (e->kind == GS_EV_COMPUTE)
                flops += e->flops;
        }
        hw += flops * (double)re->class_size;
        size_t nc = ival_union(buf[GS_STREAM_COMPUTE], n[GS_STREAM_COMPUTE]);
        size_t ncomm = 0, ncomm_k[GS_STREAM_COUNT] = {0};
        double comm_by_dim[GS_DIM_COUNT] = {0}, exposed[GS_DIM_COUNT] = {0};
        for (int k = GS_STREAM_DP; k <= GS_STREAM_PP; k++) {
            size_t m = ival_union(buf[k], n[k]);
            gs_dim d = stream_dim((gs_stream)k);
            double len = ival_len(buf[k], m);
            comm_by_dim[d] += len;
            exposed[d] += len - ival_overlap(buf[k], m, buf[GS_STREAM_COMPUTE], nc);
            ncomm_k[k] = m;
        }
        ncomm = ival_merge3(buf, ncomm_k, comm);
        ncomm = ival_union(comm, ncomm);
        double compute = ival_len(buf[GS_STREAM_COMPUTE], nc);
        double comm_len = ival_len(comm, ncomm);
        double busy = compute + comm_len - ival_overlap(comm, ncomm, buf[GS_STREAM_COMPUTE], nc);
        if (step > 0) {
            double share = comm_len / step;
            if (share > r->comm_share)
                r->comm_share = share;
            bubble_sum += (step - busy) / step * (double)re->class_size;
            weight += (double)re->class_size;
        }
        if (i == crit) {
            r->compute_s = compute;
            for (int d = 0; d < GS_DIM_COUNT; d++) {
                r->comm_s[d] = comm_by_dim[d];
                r->exposed_s[d] = exposed[d];
            }
        }
    }
    r->hardware_flops = hw;
    if (step > 0 && r->peak_flops > 0)
        r->hfu = hw / (step * (double)world * r->peak_flops);
    r->bubble_share = weight > 0 ? bubble_sum / weight : 0;
    if (r->bubble_share < 0) /* rounding of interval sums */
        r->bubble_share = 0;
}

/* The warnings: the seed's troubleshooting table (DIGEST section 5). led: the ledger whose peak
 * rank names the moment of an out-of-memory peak. */
static void report_warnings(const gs_scenario *s, const gs_schedule *sch, const gs_ledger *led, gs_report *r)
{
    double step = r->step_time_s;
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES];
    if (r->peak_bytes > r->gpu_bytes) {
        const gs_ledger_rank *pr = gs_ledger_peak_rank(led);
        const char *fix;
        if (pr->mem[GS_MEM_GATHER] >= pr->mem[GS_MEM_ACTIVATIONS] + pr->mem[GS_MEM_PIPE_INFLIGHT] &&
            pr->mem[GS_MEM_GATHER] > pr->peak_bytes / 4)
            fix = "OOM at start: the FSDP unit is too large (all-gather peak); wrap per layer or lower min_num_params";
        else if (pr->mem[GS_MEM_ACTIVATIONS] + pr->mem[GS_MEM_PIPE_INFLIGHT] > pr->peak_bytes / 3)
            fix = "OOM at the first step: activations; enable activation checkpointing (recompute), or a smaller "
                  "micro-batch";
        else
            fix = "states do not fit: shard further (FULL_SHARD / ZeRO-3), add GPUs or pipeline stages";
        gs_diag_warn(&r->warnings, "peak memory %s exceeds the GPU's %s (stage %" PRIu64 ", %s): %s",
                     gs_fmt_bytes(r->peak_bytes, b1, sizeof b1), gs_fmt_bytes(r->gpu_bytes, b2, sizeof b2), pr->stage,
                     pr->peak_where, fix);
    }
    if (r->comm_share > 0.30)
        gs_diag_warn(&r->warnings, "communication takes %.0f%% of the step (over 30%%): throughput will stay flat as "
                     "GPUs grow; the seed's fix: HYBRID_SHARD, or cut the cross-node FSDP traffic with TP/PP",
                     100 * r->comm_share);
    if (sch->mesh.size[GS_DIM_PP] > 1 && r->bubble_share > 0.15)
        gs_diag_warn(&r->warnings, "GPUs idle %.0f%% of the step (pipeline bubble, (p-1)/(m+p-1) = %.0f%% for p=%"
                     PRIu64 ", m=%" PRIu64 "): more micro-batches per step, or interleaved 1F1B",
                     100 * r->bubble_share,
                     100.0 * (double)(sch->mesh.size[GS_DIM_PP] - 1) /
                         (double)(sch->microbatches + sch->mesh.size[GS_DIM_PP] - 1),
                     sch->mesh.size[GS_DIM_PP], sch->microbatches);
    if (gs_mesh_group_nodes(&sch->mesh, GS_DIM_TP, 0) > 1)
        gs_diag_warn(&r->warnings, "TP groups span nodes: every layer's all-reduces cross the network; keep TP "
                     "within a node (bigger TP is not better)");
    if (step > 0 && r->exposed_s[GS_DIM_DP] > 0.2 * step) {
        /* the fix the strategy has: FSDP's prefetches, or the distributed optimizer's gather under
         * the forward; the cross-node traffic for any */
        const gs_strategy *st = &s->strategy;
        int zero12 = st->sharding == GS_SHARD_ZERO1 || st->sharding == GS_SHARD_ZERO2;
        int one_bucket = st->bucket_stages == GS_BUCKET_STAGES_FIRST && sch->mesh.size[GS_DIM_PP] > 1;
        const char *fix = zero12 ? (st->overlap_param_gather ? one_bucket ? "a larger micro-batch or global batch (the "
                                                               "gradient reduction overlaps only the last "
                                                               "micro-batch's backward; under bucket_stages first "
                                                               "the stages after the first reduce each model "
                                                               "chunk whole after its last backward)"
                                                             : "a larger micro-batch or global batch (the "
                                                               "gradient reduction overlaps only the last "
                                                               "micro-batch's backward)"
                                                             : "overlap_param_gather (Megatron "
                                                               "--overlap-param-gather)")
                                 : "enable backward_pre prefetch and forward_prefetch";
        gs_diag_warn(&r->warnings, "DP/FSDP communication is exposed for %.0f%% of the step: %s, or reduce the "
                     "shard group's cross-node traffic",
                     100 * r->exposed_s[GS_DIM_DP] / step, fix);
    }
}

gs_status gs_report_build(const gs_scenario *s, const gs_schedule *sch, gs_timing *const *timing, gs_report *r,
                          gs_error *err)
{
    gs_status rc = GS_OK;
    memset(r, 0, sizeof *r);
    gs_diag_init(&r->warnings);
    report_bufs b = {{NULL}, NULL};
    gs_ledger *led = NULL;
    size_t maxev = 1;
    for (size_t i = 0; i < sch->nranks; i++)
        if (sch->ranks[i].nevents > maxev)
            maxev = sch->ranks[i].nevents;
    for (int k = 0; k < GS_STREAM_COUNT; k++)
        if (!(b.buf[k] = malloc(maxev * sizeof *b.buf[k])))
            goto nomem;
    if (!(b.comm = malloc(maxev * sizeof *b.comm)))
        goto nomem;
    size_t crit = report_throughput(s, sch, timing, r);
    report_busy(sch, timing, &b, crit, r);

    /* the numbers only; the explained ledger when a warning names the peak's moment */
    if ((rc = gs_ledger_create_numbers(s, &sch->mesh, &led, err)) != GS_OK)
        goto out;
    r->peak_bytes = led->peak_bytes;
    r->gpu_bytes = led->gpu_bytes;
    if (r->peak_bytes > r->gpu_bytes) {
        gs_ledger_destroy(led);
        led = NULL;
        if ((rc = gs_ledger_create(s, &sch->mesh, &led, err)) != GS_OK)
            goto out;
    }
    report_warnings(s, sch, led, r);
    goto out;
nomem:
    rc = gs_error_set(err, GS_ERR_NOMEM, "report: out of memory");
out:
    for (int k = 0; k < GS_STREAM_COUNT; k++)
        free(b.buf[k]);
    free(b.comm);
    gs_ledger_destroy(led);
    return rc;
}

void gs_report_fini(gs_report *r)
{
    gs_diag_fini(&r->warnings);
}
