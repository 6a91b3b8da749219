/* The host calibration's kernel timings (`gridstep calibrate` on the host driver): the GEMM
 * shapes, one thread's GEMMs, elementwise kernels, attention and rotary embedding in thread CPU
 * time, and the same GEMMs on k threads at once (the concurrency test); with the timing helpers
 * the other measurements share (cli/calibrate_cmd.h). */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/ops.h"
#include "cli/calibrate_cmd.h"
#include "cli/cli_common.h"
#include "engine/schedule.h"
#include "exec/driver.h"
#include "sim/calib.h"

/* ---- timing -------------------------------------------------------------------------------------------- */

void gs__calib_progress(gs__calib_host *c, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    uint64_t done = c->pdone < c->ptotal ? c->pdone : c->ptotal - 1;
    c->pdone++;
    gs_progress_update(c->prog, done, c->ptotal, what);
}

void gs__calib_fill(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v * (float)(1 + (i % 7)) * 0.125f;
}

/* Kernels are timed in the calling thread's CPU time: what the work costs on a core running it,
 * without the time the OS gave the core to other threads (that share is compute.cores, measured
 * apart, and the sim applies it). */
double gs__calib_now_s(const gs__calib_host *c, gs_drv *d)
{
    (void)c, (void)d;
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double gs__calib_time_calls(const gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs__calib_call_fn fn, void *arg)
{
    double t0 = gs__calib_now_s(c, d);
    fn(arg, s);
    double one = gs__calib_now_s(c, d) - t0;
    double target = c->quick ? 1e-3 : 2e-3;
    size_t calls = one > 0 ? (size_t)ceil(target / one) : 1000;
    if (calls < 1)
        calls = 1;
    if (calls > 2000)
        calls = 2000;
    double v[CALIB_MAX_REPS];
    for (size_t i = 0; i < calls; i++)
        fn(arg, s);
    for (int r = 0; r < c->reps; r++) {
        t0 = gs__calib_now_s(c, d);
        for (size_t i = 0; i < calls; i++)
            fn(arg, s);
        v[r] = (gs__calib_now_s(c, d) - t0) / (double)calls;
    }
    return gs_calib_median(v, (size_t)c->reps);
}

/* Operand sets a GEMM is timed over in turn, so that its operands come from memory, not from the
 * cache the previous call left them in: in a training step a rank touches its whole working set
 * (every layer's weights and activations) between two uses of the same operands. The sets
 * together exceed ROTATE_BYTES (beyond a server core's L2 and its share of the L3), at most
 * ROTATE_MAX of them. */
#define ROTATE_BYTES (32u << 20)
#define ROTATE_MAX 64

static size_t rotate_copies(const gs__calib_host *c, double bytes_per_set)
{
    if (!c->rotate || bytes_per_set <= 0)
        return 1;
    double n = ceil((double)ROTATE_BYTES / bytes_per_set);
    return n < 1 ? 1 : n > ROTATE_MAX ? ROTATE_MAX : (size_t)n;
}

/* CPU number `slot` (modulo their count) among the CPUs this thread may run on; -1 unknown. */
static int allowed_cpu(size_t slot)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) <= 0)
        return -1;
    size_t want = slot % (size_t)CPU_COUNT(&set), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set) && seen++ == want)
            return cpu;
    return -1;
}

/* Pins the calling thread to allowed CPU `slot`; returns the CPU, or -1 (left unpinned). The
 * single-thread kernel measurements and the concurrency test's thread 0 run on the same CPU, so
 * ratio(k) is taken against the CPU the GEMM fit was measured on. Unpinned, the fit could come
 * from a fast vCPU and the ratio's one-thread reference from a slow one, and the difference
 * between them (a quarter on a 2-vCPU cloud VM, which one changing over minutes) would be
 * missed both ways. */
static int pin_self(size_t slot)
{
    int cpu = allowed_cpu(slot);
    if (cpu < 0)
        return -1;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0 ? cpu : -1;
}

/* ---- shapes -------------------------------------------------------------------------------------------- */

static void add_shape(gs__calib_host *c, uint64_t m, uint64_t n, uint64_t k)
{
    for (size_t i = 0; i < c->ngemm; i++)
        if (c->gemm[i].m == m && c->gemm[i].n == n && c->gemm[i].k == k)
            return;
    if (c->ngemm < CALIB_MAX_SHAPES && m && n && k)
        c->gemm[c->ngemm++] = (gs__calib_gemm_point){m, n, k, 0, 0, 0};
}

/* The grid: Llama-style layer GEMMs (tokens x out x in) of hidden 64 .. 1024, scaled down from
 * the presets to what one CPU core runs in milliseconds, plus the scenario's own shapes. */
gs_status gs__calib_pick_shapes(gs__calib_host *c, const char *scenario, gs_error *err)
{
    static const uint64_t grid[][3] = {
        {32, 64, 64},     {64, 192, 64},   {128, 128, 64},   {128, 256, 256},  {256, 64, 256},
        {256, 512, 256},  {256, 768, 256}, {512, 256, 688},  {512, 1376, 256}, {512, 512, 512},
        {1024, 1024, 256}, {256, 1024, 1024}, {128, 768, 256}, {128, 1024, 512},
    };
    static const uint64_t quick[][3] = {{32, 64, 64}, {128, 256, 256}, {256, 512, 256}, {512, 512, 512}};
    size_t ng = c->quick ? sizeof quick / sizeof quick[0] : sizeof grid / sizeof grid[0];
    for (size_t i = 0; i < ng; i++)
        add_shape(c, c->quick ? quick[i][0] : grid[i][0], c->quick ? quick[i][1] : grid[i][1],
                  c->quick ? quick[i][2] : grid[i][2]);
    c->attn_seq = 128, c->attn_nh = 4, c->attn_nkv = 2, c->attn_hd = 64, c->attn_flash = 1;
    c->vocab_row = 1024;
    c->scen_first = c->ngemm;
    if (!scenario)
        return GS_OK;
    gs_scenario s;
    gs_mesh mesh;
    gs_schedule *sch = NULL;
    gs_status rc = gs_cli_load(scenario, &s, &mesh, err);
    if (rc == GS_OK)
        rc = gs_schedule_build(&s, &mesh, 0, &sch, err);
    if (rc != GS_OK)
        return rc;
    for (size_t r = 0; r < sch->nranks; r++)
        for (size_t i = 0; i < sch->ranks[r].nevents; i++) {
            const gs_event *e = &sch->ranks[r].events[i];
            if (e->kind == GS_EV_COMPUTE && e->gemm_m && e->op != GS_OP_ATTN)
                add_shape(c, e->gemm_m, e->gemm_n, e->gemm_k);
            else if (e->kind == GS_EV_COMPUTE && e->op == GS_OP_ATTN && e->gemm_k) {
                c->attn_seq = e->gemm_m;
                c->attn_hd = e->gemm_k;
            }
        }
    uint64_t tp = mesh.size[GS_DIM_TP];
    c->attn_flash = s.strategy.flash_attention != 0;
    c->attn_dropout = s.model.dropout, c->attn_drop_rate = s.model.attention_dropout;
    c->attn_nh = s.model.heads / tp ? s.model.heads / tp : 1;
    c->attn_nkv = s.model.kv_heads / tp ? s.model.kv_heads / tp : 1;
    uint64_t vr = s.model.vocab / (tp ? tp : 1);
    c->vocab_row = vr < 64 ? 64 : vr > 4096 ? 4096 : (size_t)vr;
    gs_schedule_destroy(sch);
    return GS_OK;
}

/* ---- one thread's kernels (run inside a launched function on the rank's compute stream) ---------------- */

typedef struct solo_job {
    gs__calib_host *c;
    gs_drv *d;
    gs_error *err;
} solo_job;

/* The GEMMs of the grid and the scenario, forward and backward, each over its operand sets. */
static gs_status solo_gemms(gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    for (size_t i = 0; i < c->ngemm; i++) {
        gs__calib_gemm_point *g = &c->gemm[i];
        gs__calib_progress(c, "GEMM %zu/%zu (%" PRIu64 " x %" PRIu64 " x %" PRIu64 ")", i + 1, c->ngemm, g->m,
                           g->n, g->k);
        size_t nc = rotate_copies(c, 4.0 * (double)(2 * g->m * g->k + 2 * g->n * g->k + g->m * g->n));
        float *x = malloc(nc * g->m * g->k * sizeof *x), *w = malloc(nc * g->n * g->k * sizeof *w);
        float *y = malloc(nc * g->m * g->n * sizeof *y);
        float *dx = malloc(nc * g->m * g->k * sizeof *dx), *dw = calloc(nc * g->n * g->k, sizeof *dw);
        if (!x || !w || !y || !dx || !dw) {
            free(x), free(w), free(y), free(dx), free(dw);
            return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for a %" PRIu64 " x %" PRIu64 " x %" PRIu64
                                " GEMM", g->m, g->n, g->k);
        }
        gs__calib_fill(x, nc * g->m * g->k, 0.01f);
        gs__calib_fill(w, nc * g->n * g->k, 0.02f);
        gs__calib_fill(y, nc * g->m * g->n, 0.01f);
        gs__calib_fill(dx, nc * g->m * g->k, 0.0f); /* touch every page before timing */
        gs__calib_fill(dw, nc * g->n * g->k, 0.0f);
        gs_cal_gemm a = {c->ops, x, w, y, g->m, g->n, g->k, dx, dw, nc, 0};
        g->secs = gs__calib_time_calls(c, d, s, gs_cal_gemm_fwd, &a);
        g->bwd_secs = gs__calib_time_calls(c, d, s, gs_cal_gemm_bwd, &a);
        g->flops_per_s = 2.0 * (double)g->m * (double)g->n * (double)g->k / g->secs;
        if (g->flops_per_s > c->best_flops)
            c->best_flops = g->flops_per_s;
        free(x), free(w), free(y), free(dx), free(dw);
    }
    return GS_OK;
}

/* The elementwise kernels (calib/ops.h: gs_cal_ew_names) over the planned element counts. */
static gs_status solo_elementwise(gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    gs_status rc = GS_OK;
    for (int kind = 0; kind < GS_CAL_EW_COUNT && rc == GS_OK; kind++)
        for (size_t i = 0; i < c->new_; i++) {
            gs__calib_ew_point *p = &c->ew[kind][i];
            gs__calib_progress(c, "%s, %" PRIu64 " elements", gs_cal_ew_names[kind], p->elements);
            size_t n = p->elements, h = 256;
            if (kind == GS_CAL_EW_XENT || kind == GS_CAL_EW_XENT_BWD)
                h = c->vocab_row;
            gs_cal_ew e = {c->ops, d, kind, calloc(2 * n, 4), calloc(n, 4), calloc(n, 4), calloc(n, 4),
                         calloc(2 * n, 4), calloc(n / h + 1, 4), n, h, 0};
            if (!e.a || !e.b || !e.m || !e.v || !e.y || !e.rstd)
                rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for %s", gs_cal_ew_names[kind]);
            else {
                gs__calib_fill(e.a, 2 * n, 0.01f);
                gs__calib_fill(e.b, n, 0.001f);
                gs__calib_fill(e.m, n, 1.0f);
                /* token ids and targets spread over the rows (embedding: a table of 2 t rows) */
                int32_t *tok = (int32_t *)e.rstd;
                for (size_t r = 0; r < n / h; r++)
                    tok[r] = (int32_t)((r * 7919u) % (kind == GS_CAL_EW_EMBED || kind == GS_CAL_EW_EMBED_BWD ? 2 * (n / h) : h));
                p->bytes = gs_cal_ew_bytes[kind] * (double)n;
                p->secs = gs__calib_time_calls(c, d, s, gs_cal_ew_call, &e);
            }
            free(e.a), free(e.b), free(e.m), free(e.v), free(e.y), free(e.rstd);
        }
    return rc;
}

/* Attention, forward and backward, one sequence at the scenario's shape. */
static gs_status solo_attention(gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    gs_status rc = GS_OK;
    gs__calib_progress(c, "attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ")", c->attn_seq, c->attn_nh,
                       c->attn_hd);
    size_t sq = c->attn_seq, qn = sq * c->attn_nh * c->attn_hd, kvn = sq * c->attn_nkv * c->attn_hd;
    size_t pn = c->attn_nh * sq * (c->attn_flash ? 1 : sq);
    gs_cal_attn a = {c->ops, calloc(qn, 4), calloc(kvn, 4), calloc(kvn, 4), calloc(qn, 4),
                   calloc(pn, 4), calloc(qn, 4), calloc(kvn, 4), calloc(kvn, 4), calloc(qn, 4),
                   sq, c->attn_nh, c->attn_nkv, c->attn_hd, 0, c->attn_flash, {0}};
    gs_cal_attn_dropout(&a.drop, c->attn_dropout, c->attn_drop_rate, sq);
    if (!a.q || !a.k || !a.v || !a.o || !a.p || !a.dq || !a.dk || !a.dv || !a.dout)
        rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for attention");
    else {
        gs__calib_fill(a.q, qn, 0.01f);
        gs__calib_fill(a.k, kvn, 0.02f);
        gs__calib_fill(a.v, kvn, 0.03f);
        gs__calib_fill(a.dout, qn, 0.01f);
        c->attn_fwd_s = gs__calib_time_calls(c, d, s, gs_cal_attn_call, &a);
        a.bwd = 1;
        c->attn_bwd_s = gs__calib_time_calls(c, d, s, gs_cal_attn_call, &a);
        /* the schedule's count: QK^T and PV, 2 x 2 s^2 hd per head forward, twice that backward */
        double fwd = 4.0 * (double)sq * (double)sq * (double)c->attn_hd * (double)c->attn_nh;
        c->attn_flops = 3.0 * fwd / (c->attn_fwd_s + c->attn_bwd_s);
    }
    free(a.q), free(a.k), free(a.v), free(a.o), free(a.p), free(a.dq), free(a.dk), free(a.dv), free(a.dout);
    return rc;
}

/* The rotary embedding the QKV event applies to q and k (and the backward to dq and dk), on seq
 * tokens of the scenario's QKV rows: its cost per token. */
static gs_status solo_rope(gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    gs_status rc = GS_OK;
    gs__calib_progress(c, "rotary embedding");
    gs_cal_rope r = {c->ops, NULL, c->attn_seq, c->attn_nh, c->attn_nkv, c->attn_hd, 0};
    size_t ld = (c->attn_nh + 2 * c->attn_nkv) * c->attn_hd;
    if (!(r.qkv = calloc(c->attn_seq * ld, 4)))
        rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for the rotary embedding");
    else {
        gs__calib_fill(r.qkv, c->attn_seq * ld, 0.01f);
        double fwd = gs__calib_time_calls(c, d, s, gs_cal_rope_call, &r);
        r.bwd = 1;
        double bwd = gs__calib_time_calls(c, d, s, gs_cal_rope_call, &r);
        c->rope_s = 0.5 * (fwd + bwd) / (double)c->attn_seq;
    }
    free(r.qkv);
    return rc;
}

static gs_status solo_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    solo_job *j = arg;
    gs__calib_host *c = j->c;
    c->solo_cpu = pin_self(0);
    gs_status rc = solo_gemms(c, j->d, s, err);
    if (rc == GS_OK)
        rc = solo_elementwise(c, j->d, s, err);
    if (rc == GS_OK)
        rc = solo_attention(c, j->d, s, err);
    if (rc == GS_OK)
        rc = solo_rope(c, j->d, s, err);
    return rc;
}

gs_status gs__calib_measure_kernels(gs__calib_host *c, gs_error *err)
{
    gs_mesh mesh;
    gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
    gs_drv *d = NULL;
    gs_drv_stream *s = NULL;
    solo_job job = {c, NULL, err};
    gs_status rc;
    if ((rc = gs_mesh_init(&mesh, 1, 1, 1, NULL, 1, err)) != GS_OK || (rc = c->ops->open(&mesh, &o, &d, err)) != GS_OK ||
        (rc = c->ops->stream_create(d, 0, GS_STREAM_COMPUTE, &s, err)) != GS_OK)
        goto out;
    job.d = d;
    if ((rc = c->ops->launch(d, s, solo_fn, &job, err)) == GS_OK)
        rc = c->ops->stream_sync(d, s, err);
out:
    if (s)
        c->ops->stream_destroy(d, s);
    if (d)
        c->ops->close(d);
    return rc;
}

/* ---- k threads at once --------------------------------------------------------------------------------- */

/* The concurrency test: k threads (k = 1 .. the online CPUs, at most CALIB_MAX_CONC) each run the
 * scenario's GEMM shapes (forward) on operand sets of their own, used in turn as the GEMM
 * measurement does, started together; the slowest thread's CPU time per pass (the median of
 * its repeats) over the same with one thread is ratio(k): how much longer the same work takes
 * on the slowest core while k - 1 others compute beside it (they share the L3 and the memory
 * bandwidth, and cores differ). CPU time, so the share of the cores other processes take does
 * not count (that is compute.cores). */
typedef struct conc_job {
    const gs__calib_host *c;
    size_t slot; /* thread t of k: pinned to allowed CPU t (thread 0 on the solo kernels' CPU) */
    int cpu;     /* out: the CPU it was pinned to, -1 unpinned */
    int *go; /* set (atomically) once every thread is started: they start together */
    float **x, **w, **y; /* per shape */
    size_t *copies;      /* per shape */
    double pass_s[CALIB_MAX_REPS];
    int ok;
} conc_job;

static size_t conc_first(const gs__calib_host *c)
{
    return c->scen_first < c->ngemm ? c->scen_first : 0;
}

static void conc_pass(conc_job *j, size_t rep)
{
    const gs__calib_host *c = j->c;
    for (size_t i = conc_first(c); i < c->ngemm; i++) {
        const gs__calib_gemm_point *g = &c->gemm[i];
        for (size_t r = 0; r < j->copies[i]; r++) {
            size_t at = (rep * 7 + r) % j->copies[i];
            c->ops->k.linear_fwd(NULL, j->x[i] + at * g->m * g->k, j->w[i] + at * g->n * g->k,
                               j->y[i] + at * g->m * g->n, g->m, g->k, g->n);
        }
    }
}

/* Passes per thread in a round of the concurrency test (the rounds repeat it too). */
static int conc_reps(const gs__calib_host *c)
{
    return c->reps < 3 ? c->reps : 3;
}

static void *conc_main(void *arg)
{
    conc_job *j = arg;
    j->cpu = pin_self(j->slot);
    conc_pass(j, 0); /* warm-up */
    while (!__atomic_load_n(j->go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (int r = 0; r < conc_reps(j->c); r++) {
        double t0 = gs__calib_now_s(j->c, NULL);
        conc_pass(j, (size_t)r + 1);
        j->pass_s[r] = gs__calib_now_s(j->c, NULL) - t0;
    }
    return NULL;
}

/* One round: pass_s[k - 1] = the slowest of k threads started together (each one's median CPU
 * time per pass), for k = 1 .. kmax. The slowest, not the mean: ranks meet at every collective,
 * so a step runs at its slowest rank's pace, and the cores are not equal (on a 2-vCPU cloud VM
 * one vCPU ran the same GEMMs 20-25% slower than the other, pinned with taskset, and which one
 * changed over minutes). */
static gs_status conc_round(gs__calib_host *c, uint64_t kmax, double *pass_s, gs_error *err)
{
    gs_status rc = GS_OK;
    for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++) {
        gs__calib_progress(c, "concurrency (%" PRIu64 " thread%s)", k, k > 1 ? "s" : "");
        conc_job jobs[CALIB_MAX_CONC];
        pthread_t th[CALIB_MAX_CONC];
        int started[CALIB_MAX_CONC] = {0};
        int go = 0;
        memset(jobs, 0, sizeof jobs);
        for (uint64_t t = 0; t < k && rc == GS_OK; t++) {
            conc_job *j = &jobs[t];
            j->c = c;
            j->slot = (size_t)t;
            j->go = &go;
            j->x = calloc(c->ngemm, sizeof *j->x);
            j->w = calloc(c->ngemm, sizeof *j->w);
            j->y = calloc(c->ngemm, sizeof *j->y);
            j->copies = calloc(c->ngemm, sizeof *j->copies);
            if (!j->x || !j->w || !j->y || !j->copies) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for the concurrency test");
                break;
            }
            for (size_t i = conc_first(c); i < c->ngemm && rc == GS_OK; i++) {
                const gs__calib_gemm_point *g = &c->gemm[i];
                size_t nc = rotate_copies(c, 4.0 * (double)(g->m * g->k + g->n * g->k + g->m * g->n));
                j->copies[i] = nc;
                j->x[i] = malloc(nc * g->m * g->k * sizeof(float));
                j->w[i] = malloc(nc * g->n * g->k * sizeof(float));
                j->y[i] = malloc(nc * g->m * g->n * sizeof(float));
                if (!j->x[i] || !j->w[i] || !j->y[i])
                    rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for the concurrency test");
                else {
                    gs__calib_fill(j->x[i], nc * g->m * g->k, 0.01f);
                    gs__calib_fill(j->w[i], nc * g->n * g->k, 0.02f);
                    gs__calib_fill(j->y[i], nc * g->m * g->n, 0.0f);
                }
            }
        }
        if (rc == GS_OK)
            for (uint64_t t = 0; t < k; t++) {
                started[t] = pthread_create(&th[t], NULL, conc_main, &jobs[t]) == 0;
                if (!started[t]) {
                    rc = gs_error_set(err, GS_ERR_RUNTIME, "calibrate: cannot start a thread");
                    break;
                }
            }
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE); /* also after a failed start: the others finish */
        double slowest = 0;
        for (uint64_t t = 0; t < k; t++)
            if (started[t]) {
                pthread_join(th[t], NULL);
                slowest = fmax(slowest, gs_calib_median(jobs[t].pass_s, (size_t)conc_reps(c)));
                c->conc_cpu[t] = jobs[t].cpu;
            }
        for (uint64_t t = 0; t < k; t++) {
            for (size_t i = 0; jobs[t].x && i < c->ngemm; i++)
                free(jobs[t].x[i]), free(jobs[t].w[i]), free(jobs[t].y[i]);
            free(jobs[t].x), free(jobs[t].w), free(jobs[t].y), free(jobs[t].copies);
        }
        if (rc != GS_OK)
            break;
        pass_s[k - 1] = slowest;
    }
    return rc;
}

/* The concurrency test in CALIB_CONC_ROUNDS rounds, each running k = 1 .. kmax back to back: ratio(k)
 * is the median over the rounds of each round's pass(k) / pass(1), so that a drift of the
 * machine between rounds (frequency, a neighbour's burst) cancels within the round and one
 * disturbed round does not set the fit (a single round swung ratio(2) between 0.78 and 1.15 on
 * an idle 2-core machine). */
gs_status gs__calib_measure_concurrency(gs__calib_host *c, gs_error *err)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t kmax = online > 1 ? (uint64_t)online : 1;
    if (kmax > CALIB_MAX_CONC)
        kmax = CALIB_MAX_CONC;
    gs_status rc = GS_OK;
    double ratio[CALIB_MAX_CONC][CALIB_CONC_ROUNDS];
    c->nconc = 0;
    for (int round = 0; round < CALIB_CONC_ROUNDS && rc == GS_OK; round++) {
        double pass_s[CALIB_MAX_CONC];
        rc = conc_round(c, kmax, pass_s, err);
        for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++)
            ratio[k - 1][round] = pass_s[0] > 0 ? pass_s[k - 1] / pass_s[0] : 1.0;
    }
    for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++) {
        c->conc_threads[c->nconc] = k;
        c->conc_ratio[c->nconc++] = gs_calib_median(ratio[k - 1], CALIB_CONC_ROUNDS);
    }
    if (rc == GS_OK && c->nconc > 1) {
        double x[CALIB_MAX_CONC];
        for (size_t i = 0; i < c->nconc; i++)
            x[i] = (double)c->conc_threads[i];
        rc = gs_fit_slowdown(x, c->conc_ratio, c->nconc, &c->conc_fit, err);
    }
    return rc;
}
