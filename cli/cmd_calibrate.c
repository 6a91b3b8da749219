/* `gridstep calibrate`: measures this machine through an exec driver (GEMM rates over a grid of
 * shapes, elementwise kernel bandwidths, attention, collectives per op, size and group size,
 * send/recv, per-event dispatch cost, how many cores ranks really get), fits the sim's models
 * to the medians (sim/calib.c) and writes the calibration file `sim --calib` reads. */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "calib/device.h"
#include "calib/ops.h"
#include "calib/procs.h"
#include "cli/calib_print.h"
#include "cli/progress.h"
#include "cli/mpi_exec.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/schedule.h"
#include "exec/driver.h"
#include "exec/exec.h"
#include "sim/calib.h"
#include "sim/collective.h"

const char gs_cmd_calibrate_help[] =
    "Measures this machine through the driver and writes a calibration file for `gridstep sim\n"
    "--calib` and `gridstep compare --calib`. Every figure is the median of repeats after a\n"
    "warm-up. Kernels are timed in thread CPU time (their cost on a core); collectives and the\n"
    "cores test in wall time, so those depend on the load: calibrate under the load you compare\n"
    "under (the file records the load average).\n"
    "  GEMM       the driver's linear, forward and backward, over a grid of shapes (m, n, k), fp32,\n"
    "             plus the GEMM shapes of SCENARIO's schedule when one is given; the efficiency\n"
    "             (rate / best rate) is fitted against one call's FLOPs (compute.gemm_curve), and\n"
    "             the time against the shape's terms 2mnk, kn, mk and 1 (compute.gemm_terms,\n"
    "             what the sim uses: a short m amortizes the packing of the k x n operand over\n"
    "             fewer rows); operands are used in turn from sets beyond the caches; the\n"
    "             backward over twice the forward is compute.gemm_bwd_factor\n"
    "  rope       the rotary embedding of q and k per token (compute.qkv_rope_s_per_token)\n"
    "  concurrency the scenario's GEMMs on 1 .. P threads at once, the slowest one's CPU time\n"
    "             over one thread's (median of 5 rounds): 1 + s (k - 1) (compute.concurrency_slowdown);\n"
    "             each thread pinned to a CPU of its own, the first on the CPU the kernels\n"
    "             above were measured on (the one-thread reference is the GEMM fit's CPU)\n"
    "  kernels    the non-GEMM work of each event as exec runs it (AdamW, the norms with their\n"
    "             residual adds, SwiGLU, the loss, the embedding; forward and backward): alpha-beta\n"
    "             fit of time against the bytes the schedule counts for them\n"
    "             (compute.elementwise_bw, compute.elementwise_bw_bwd); attention forward+backward\n"
    "             at SCENARIO's shape (compute.attn_flops, the schedule's FLOP count)\n"
    "  dispatch   no-op events on one stream, and chained across two streams, of each of 1, 2,\n"
    "             4, 8 ranks as the dispatcher issues them (compute.launch_s_by_ranks: launch_s\n"
    "             and the cross-stream wake_s; the driver's per-event cost grows with its\n"
    "             thread count; launch_cpu_s and wake_cpu_s: the process's CPU time of them)\n"
    "  cores      the CPU-time share of GEMM threads, P and 2P of them at once (P online CPUs):\n"
    "             with sched_autogroup (Linux's default: CPUs shared fairly between sessions)\n"
    "             compute.cores is this process's share in cores; otherwise compute.cores = P\n"
    "             and compute.background_load the other runnable threads. With SCENARIO, two\n"
    "             training steps of it run for real and the process's CPU time over wall time\n"
    "             in the second is its share under a real step (used when larger)\n"
    "  links      all-gather, reduce-scatter, all-reduce, broadcast over 2, 4 and 8 ranks and\n"
    "             send/recv, 1 KiB .. 16 MiB (--quick: .. 1 MiB) in x4 steps, printed as\n"
    "             nccl-tests does (busbw: all-reduce 2(n-1)/n, all-gather and reduce-scatter\n"
    "             (n-1)/n, broadcast and send/recv 1); robust alpha-beta fit per op and group\n"
    "             size (links.intra). The cap: the host driver's ranks are threads sharing this\n"
    "             machine's cores and memory bandwidth, so 8 ranks x 16 MiB already take\n"
    "             seconds per call, and the host scenarios move at most a few MiB per call.\n"
    "\n"
    "A driver with device memory (--driver cuda: the module gridstep-cuda.so) is measured through\n"
    "its stream events instead (CUDA events around batches of calls, as nccl-tests times), and\n"
    "needs SCENARIO.yaml: its GPU preset and precision are what the GEMMs are fitted against.\n"
    "  GEMM       a grid (1K..8K squares, Llama-7B-like layer shapes) plus the scenario's shapes,\n"
    "             forward and backward; fitted as one scale on the preset's tile model (wave and\n"
    "             tile quantization, split-K, short K: the shape's physics stays the model's), the\n"
    "             median of measured / model: compute.gemm_efficiency (a scale above 1 raises\n"
    "             peak_flops instead); shapes the model calls memory-bound are not fitted\n"
    "  kernels    the same non-GEMM kernels, 2^16..2^26 elements; a device-to-device copy gives\n"
    "             compute.hbm_bw; a one-element kernel back to back compute.launch_s; attention\n"
    "             and the rotary embedding at the scenario's shape\n"
    "  links      all-gather, reduce-scatter, all-reduce, broadcast over 2, 4 and 8 GPUs of this\n"
    "             process and a send/recv ping-pong, 1 KiB .. 1 GiB (--quick: x16 steps),\n"
    "             nccl-tests' columns, alpha-beta fits (links.intra); groups larger than the\n"
    "             GPUs the driver opens are skipped, with its reason in the summary and the file\n"
    "Built and tested through the host driver (--events); not yet run on a GPU.\n"
    "\n"
    "Under mpirun or srun (a gridstep built --with-mpi), process 0 measures its machine as above\n"
    "while the others wait, then every process takes part in the collectives between processes,\n"
    "one rank each, timed with the driver's events (the slowest process per repeat): with L\n"
    "processes on each of H >= 2 hosts in blocks, a host's L (links.intra at L ranks) and one per\n"
    "host (links.inter at H ranks), each class's groups at once as a step runs them; otherwise\n"
    "all of them (intra on one host, inter across hosts); send/recv between process 0 and a\n"
    "process on its host and on another host. Process 0 writes the file (those lines replace\n"
    "the same group sizes measured in one process) and every process exits with one status.\n"
    "\n"
    "options:\n"
    "  --driver D       host, or a driver module such as cuda (as for exec)\n"
    "  --events         time through the driver's stream events as for a GPU (the default for a\n"
    "                   device driver); with the host driver this runs the device calibration on\n"
    "                   this CPU at test sizes (how the tests check that path)\n"
    "  --out FILE       the calibration file (default calib.json)\n"
    "  --quick          fewer shapes, sizes and repeats (about 10 s)\n"
    "  --warm           time GEMMs on the same operands every call (default: operand sets over\n"
    "                   32 MiB used in turn, so operands come from memory as in a step)\n"
    "  --plot PREFIX    PREFIX-coll.dat/.gp/.png (time vs size, log-log, points + fitted lines)\n"
    "                   and PREFIX-gemm.dat/.gp/.png (efficiency vs FLOPs + the fitted curve)\n"
    "                   through gnuplot; without gnuplot the data and scripts stay, exit 1\n"
    "\n"
    "examples:\n"
    "  gridstep calibrate --driver host --out host.json tests/calib/a-dp2-tp2.yaml\n"
    "  gridstep sim --calib host.json tests/calib/b-dp4.yaml\n"
    "  gridstep compare --calib host.json tests/calib/b-dp4.yaml\n"
    "  GRIDSTEP_CUDA_GEMM=tf32 gridstep calibrate --driver cuda --out gpu.json scenarios/llama2-7b-8l-1xh200.yaml\n"
    "  GRIDSTEP_CUDA_GEMM=tf32 gridstep compare --driver cuda --calib gpu.json scenarios/llama2-7b-8l-1xh200.yaml\n"
    "  mpirun -np 16 --map-by ppr:8:node gridstep calibrate --driver cuda --out cluster.json scenarios/llama2-7b-8l-1xh200.yaml\n";

static const char usage[] =
    "gridstep calibrate [--driver host|cuda] [--events] [--out FILE] [--quick] [--warm] [--plot PREFIX] [SCENARIO.yaml]";

#define MAX_SHAPES 64
#define MAX_SIZES 16
#define MAX_REPS 16
#define GROUP_SIZES GS_CAL_GROUPS
#define DISPATCH_SIZES 4

#define group_sizes gs_cal_group_sizes

#define MAX_CONC 8 /* thread counts of the concurrency test */

typedef struct gemm_point {
    uint64_t m, n, k;
    double secs; /* median per call */
    double bwd_secs; /* linear_bwd (dx and dw: two GEMMs) median per call */
    double flops_per_s;
} gemm_point;

typedef struct ew_point {
    uint64_t elements;
    double bytes; /* as the schedule counts them */
    double secs;
} ew_point;


typedef struct cal {
    const gs_driver_ops *ops;
    int quick, reps;
    gs_progress *prog;       /* measurements started of ptotal (progress() counts them) */
    uint64_t pdone, ptotal;
    int rotate; /* 1: GEMMs are timed over operand sets beyond the caches (0: --warm) */
    gemm_point gemm[MAX_SHAPES];
    size_t ngemm;
    double best_flops;
    double bwd_factor; /* median over shapes of linear_bwd / (2 x linear_fwd) */
    ew_point ew[GS_CAL_EW_COUNT][MAX_SIZES];
    size_t new_;
    uint64_t attn_seq, attn_nh, attn_nkv, attn_hd;
    int attn_flash; /* the scenario's strategy.flash_attention (default on) */
    int attn_dropout;      /* the scenario's model has dropout layers */
    double attn_drop_rate; /* its attention dropout */
    size_t vocab_row;       /* the loss kernels' row: the scenario's vocabulary slice (64 .. 4096) */
    size_t scen_first;      /* gemm[scen_first..]: the scenario's own shapes (none: the grid's) */
    double rope_s;          /* rotary embedding of q and k per token, mean of forward and backward */
    uint64_t conc_threads[MAX_CONC];
    double conc_ratio[MAX_CONC]; /* CPU time per GEMM pass with k threads over one thread's */
    int solo_cpu;                /* the CPU the single-thread kernels ran on (pinned), -1: unpinned */
    int conc_cpu[MAX_CONC];      /* the concurrency test's thread t ran on CPU conc_cpu[t] (-1: unpinned) */
    size_t nconc;
    gs_fit_slow conc_fit;
    double attn_fwd_s, attn_bwd_s, attn_flops;
    double launch_s;
    uint64_t dispatch_ranks[DISPATCH_SIZES];
    double dispatch_s[DISPATCH_SIZES]; /* per event on one stream, by world size */
    double wake_s[DISPATCH_SIZES];     /* more when the event waits for another stream */
    double dispatch_cpu_s[DISPATCH_SIZES]; /* the process's CPU time per event of the chains */
    double wake_cpu_s[DISPATCH_SIZES];     /* more when the event waits for another stream */
    double single_flops, multi_flops, cores, background;
    int autogroup; /* the kernel shares the CPUs between sessions (sched_autogroup_enabled) */
    double exec_share; /* CPU time over wall time of the process during a training step */
    uint64_t exec_ranks;
    size_t cores_calls; /* GEMM calls per thread in the cores test */
    uint64_t cores_threads[2];
    double cores_share[2]; /* mean CPU time / wall time of a thread in each pass */
    uint64_t sizes[MAX_SIZES];
    size_t nsizes;
    double coll_s[GS_CAL_C_COUNT][GROUP_SIZES][MAX_SIZES]; /* median seconds; 0 = not measured */
    gs_fit_ab coll_fit[GS_CAL_C_COUNT][GROUP_SIZES];
    int coll_fit_ok[GS_CAL_C_COUNT][GROUP_SIZES];
    gs_fit_gemm gemm_fit;
    gs_fit_gemm_terms gemm_terms;
    gs_fit_ab ew_fit[GS_CAL_EW_COUNT];
    gs_cal_spell spell; /* the test hook GRIDSTEP_CALIB_SPELL (calib/ops.h); rank 0's thread counts */
} cal;

/* A measurement starts: counts it and reports the share finished (at most ptotal - 1 until the
 * end: the count is planned by progress_total). */
static void progress(cal *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(cal *c, const char *fmt, ...)
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

static void fill(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v * (float)(1 + (i % 7)) * 0.125f;
}

/* ---- one-rank measurements (run inside a launched function on the rank's compute stream) --------- */

typedef struct solo_job {
    cal *c;
    gs_drv *d;
    gs_error *err;
} solo_job;

/* CPU seconds per call of fn(arg): calls batched to about 2 ms (1 ms quick) per repeat, one
 * warm-up batch, the median of the repeats. */
typedef void (*call_fn)(void *arg, gs_drv_stream *s);
/* Kernels are timed in the calling thread's CPU time: what the work costs on a core running it,
 * without the time the OS gave the core to other threads (that share is compute.cores, measured
 * apart, and the sim applies it). */
static double now_s(const cal *c, gs_drv *d)
{
    (void)c, (void)d;
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double now_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double time_calls(const cal *c, gs_drv *d, gs_drv_stream *s, call_fn fn, void *arg)
{
    double t0 = now_s(c, d);
    fn(arg, s);
    double one = now_s(c, d) - t0;
    double target = c->quick ? 1e-3 : 2e-3;
    size_t calls = one > 0 ? (size_t)ceil(target / one) : 1000;
    if (calls < 1)
        calls = 1;
    if (calls > 2000)
        calls = 2000;
    double v[MAX_REPS];
    for (size_t i = 0; i < calls; i++)
        fn(arg, s);
    for (int r = 0; r < c->reps; r++) {
        t0 = now_s(c, d);
        for (size_t i = 0; i < calls; i++)
            fn(arg, s);
        v[r] = (now_s(c, d) - t0) / (double)calls;
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

static size_t rotate_copies(const cal *c, double bytes_per_set)
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

static gs_status solo_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    solo_job *j = arg;
    cal *c = j->c;
    gs_status rc = GS_OK;
    c->solo_cpu = pin_self(0);
    /* GEMMs */
    for (size_t i = 0; i < c->ngemm; i++) {
        gemm_point *g = &c->gemm[i];
        progress(c, "GEMM %zu/%zu (%" PRIu64 " x %" PRIu64 " x %" PRIu64 ")", i + 1, c->ngemm, g->m, g->n,
                 g->k);
        size_t nc = rotate_copies(c, 4.0 * (double)(2 * g->m * g->k + 2 * g->n * g->k + g->m * g->n));
        float *x = malloc(nc * g->m * g->k * sizeof *x), *w = malloc(nc * g->n * g->k * sizeof *w);
        float *y = malloc(nc * g->m * g->n * sizeof *y);
        float *dx = malloc(nc * g->m * g->k * sizeof *dx), *dw = calloc(nc * g->n * g->k, sizeof *dw);
        if (!x || !w || !y || !dx || !dw) {
            free(x), free(w), free(y), free(dx), free(dw);
            return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for a %" PRIu64 " x %" PRIu64 " x %" PRIu64
                                " GEMM", g->m, g->n, g->k);
        }
        fill(x, nc * g->m * g->k, 0.01f);
        fill(w, nc * g->n * g->k, 0.02f);
        fill(y, nc * g->m * g->n, 0.01f);
        fill(dx, nc * g->m * g->k, 0.0f); /* touch every page before timing */
        fill(dw, nc * g->n * g->k, 0.0f);
        gs_cal_gemm a = {c->ops, x, w, y, g->m, g->n, g->k, dx, dw, nc, 0};
        g->secs = time_calls(c, j->d, s, gs_cal_gemm_fwd, &a);
        g->bwd_secs = time_calls(c, j->d, s, gs_cal_gemm_bwd, &a);
        g->flops_per_s = 2.0 * (double)g->m * (double)g->n * (double)g->k / g->secs;
        if (g->flops_per_s > c->best_flops)
            c->best_flops = g->flops_per_s;
        free(x), free(w), free(y), free(dx), free(dw);
    }
    /* elementwise kernels */
    for (int kind = 0; kind < GS_CAL_EW_COUNT && rc == GS_OK; kind++)
        for (size_t i = 0; i < c->new_; i++) {
            ew_point *p = &c->ew[kind][i];
            progress(c, "%s, %" PRIu64 " elements", gs_cal_ew_names[kind], p->elements);
            size_t n = p->elements, h = 256;
            if (kind == GS_CAL_EW_XENT || kind == GS_CAL_EW_XENT_BWD)
                h = c->vocab_row;
            gs_cal_ew e = {c->ops, j->d, kind, calloc(2 * n, 4), calloc(n, 4), calloc(n, 4), calloc(n, 4),
                         calloc(2 * n, 4), calloc(n / h + 1, 4), n, h, 0};
            if (!e.a || !e.b || !e.m || !e.v || !e.y || !e.rstd)
                rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for %s", gs_cal_ew_names[kind]);
            else {
                fill(e.a, 2 * n, 0.01f);
                fill(e.b, n, 0.001f);
                fill(e.m, n, 1.0f);
                /* token ids and targets spread over the rows (embedding: a table of 2 t rows) */
                int32_t *tok = (int32_t *)e.rstd;
                for (size_t r = 0; r < n / h; r++)
                    tok[r] = (int32_t)((r * 7919u) % (kind == GS_CAL_EW_EMBED || kind == GS_CAL_EW_EMBED_BWD ? 2 * (n / h) : h));
                p->bytes = gs_cal_ew_bytes[kind] * (double)n;
                p->secs = time_calls(c, j->d, s, gs_cal_ew_call, &e);
            }
            free(e.a), free(e.b), free(e.m), free(e.v), free(e.y), free(e.rstd);
        }
    /* attention, forward and backward, one sequence */
    if (rc == GS_OK) {
        progress(c, "attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ")", c->attn_seq, c->attn_nh,
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
            fill(a.q, qn, 0.01f), fill(a.k, kvn, 0.02f), fill(a.v, kvn, 0.03f), fill(a.dout, qn, 0.01f);
            c->attn_fwd_s = time_calls(c, j->d, s, gs_cal_attn_call, &a);
            a.bwd = 1;
            c->attn_bwd_s = time_calls(c, j->d, s, gs_cal_attn_call, &a);
            /* the schedule's count: QK^T and PV, 2 x 2 s^2 hd per head forward, twice that backward */
            double fwd = 4.0 * (double)sq * (double)sq * (double)c->attn_hd * (double)c->attn_nh;
            c->attn_flops = 3.0 * fwd / (c->attn_fwd_s + c->attn_bwd_s);
        }
        free(a.q), free(a.k), free(a.v), free(a.o), free(a.p), free(a.dq), free(a.dk), free(a.dv), free(a.dout);
    }
    /* the rotary embedding the QKV event applies to q and k (and the backward to dq and dk), on
     * seq tokens of the scenario's QKV rows: its cost per token */
    if (rc == GS_OK) {
        progress(c, "rotary embedding");
        gs_cal_rope r = {c->ops, NULL, c->attn_seq, c->attn_nh, c->attn_nkv, c->attn_hd, 0};
        size_t ld = (c->attn_nh + 2 * c->attn_nkv) * c->attn_hd;
        if (!(r.qkv = calloc(c->attn_seq * ld, 4)))
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for the rotary embedding");
        else {
            fill(r.qkv, c->attn_seq * ld, 0.01f);
            double fwd = time_calls(c, j->d, s, gs_cal_rope_call, &r);
            r.bwd = 1;
            double bwd = time_calls(c, j->d, s, gs_cal_rope_call, &r);
            c->rope_s = 0.5 * (fwd + bwd) / (double)c->attn_seq;
        }
        free(r.qkv);
    }
    return rc;
}

static gs_status noop_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    (void)arg, (void)s, (void)err;
    return GS_OK;
}

/* The dispatch cost of one event as the exec backend pays it, for a world of R ranks: every
 * rank has its five stream threads and an issuing thread (as the dispatcher runs them), and each
 * issues a chain of no-op events on its compute stream (record, launch, record); the cost per
 * event is the chain's wall time over its length, averaged over the ranks. Then the same with
 * each compute no-op waiting for a no-op on the DP stream (a cross-stream dependency: one thread
 * wakes another); the difference is the wake-up. Every state change of the host driver wakes
 * all of its threads, so both grow with R (and with the machine's load). */
typedef struct chain_job {
    const gs_driver_ops *ops;
    gs_drv *d;
    gs_drv_stream *st[GS_STREAM_COUNT];
    int n;
    int cross; /* 1: each compute no-op waits for a DP-stream no-op */
    double t0, t1;
    gs_status rc;
    gs_error err;
} chain_job;

static void *chain_main(void *arg)
{
    chain_job *j = arg;
    const gs_driver_ops *o = j->ops;
    gs_drv_event **ev = calloc((size_t)(3 * j->n), sizeof *ev);
    gs_status rc = ev ? GS_OK : gs_error_set(&j->err, GS_ERR_NOMEM, "calibrate: out of memory");
    for (int i = 0; i < 3 * j->n && rc == GS_OK; i++)
        rc = o->event_create(j->d, &ev[i], &j->err);
    j->t0 = o->clock_s(j->d);
    for (int i = 0; i < j->n && rc == GS_OK; i++) {
        gs_drv_stream *cs = j->st[GS_STREAM_COMPUTE], *ds = j->st[GS_STREAM_DP];
        if (!j->cross) {
            if ((rc = o->event_record(j->d, cs, ev[3 * i + 1], &j->err)) == GS_OK &&
                (rc = o->launch(j->d, cs, noop_fn, NULL, &j->err)) == GS_OK)
                rc = o->event_record(j->d, cs, ev[3 * i + 2], &j->err);
            continue;
        }
        if ((rc = o->launch(j->d, ds, noop_fn, NULL, &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, ds, ev[3 * i], &j->err)) == GS_OK &&
            (rc = o->stream_wait_event(j->d, cs, ev[3 * i], &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, cs, ev[3 * i + 1], &j->err)) == GS_OK &&
            (rc = o->launch(j->d, cs, noop_fn, NULL, &j->err)) == GS_OK &&
            (rc = o->event_record(j->d, cs, ev[3 * i + 2], &j->err)) == GS_OK)
            rc = o->stream_wait_event(j->d, ds, ev[3 * i + 2], &j->err);
    }
    if (rc == GS_OK)
        rc = o->stream_sync(j->d, j->st[GS_STREAM_COMPUTE], &j->err);
    j->t1 = o->clock_s(j->d);
    /* the DP stream's last wait may still hold an event: drain it before destroying them */
    if (rc == GS_OK && j->cross)
        rc = o->stream_sync(j->d, j->st[GS_STREAM_DP], &j->err);
    for (int i = 0; ev && i < 3 * j->n; i++)
        if (ev[i])
            o->event_destroy(j->d, ev[i]);
    free(ev);
    j->rc = rc;
    return NULL;
}

static double rusage_s(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + 1e-6 * (double)u->ru_utime.tv_usec + (double)u->ru_stime.tv_sec +
           1e-6 * (double)u->ru_stime.tv_usec;
}

static gs_status measure_dispatch(cal *c, gs_error *err)
{
    static const uint64_t worlds[DISPATCH_SIZES] = {1, 2, 4, 8};
    gs_status rc = GS_OK;
    for (int w = 0; w < 2 * DISPATCH_SIZES && rc == GS_OK; w++) {
        uint64_t R = worlds[w % DISPATCH_SIZES];
        int cross = w >= DISPATCH_SIZES;
        progress(c, "dispatch cost, %" PRIu64 " rank%s", R, R > 1 ? "s" : "");
        gs_mesh mesh;
        gs_drv *d = NULL;
        gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
        chain_job jobs[8];
        pthread_t th[8];
        int started[8] = {0};
        memset(jobs, 0, sizeof jobs);
        if ((rc = gs_mesh_init(&mesh, 1, R, 1, NULL, R, err)) == GS_OK)
            rc = c->ops->open(&mesh, &o, &d, err);
        for (uint64_t r = 0; r < R && rc == GS_OK; r++) {
            jobs[r].ops = c->ops;
            jobs[r].d = d;
            jobs[r].n = c->quick ? 40 : 150;
            jobs[r].cross = cross;
            for (int k = 0; k < GS_STREAM_COUNT && rc == GS_OK; k++)
                rc = c->ops->stream_create(d, r, (gs_stream)k, &jobs[r].st[k], err);
        }
        /* the CPU time the whole process spends meanwhile: every thread the driver wakes for an
         * event, not only the issuing one (its condition variable wakes them all) */
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        for (uint64_t r = 0; r < R && rc == GS_OK; r++)
            started[r] = pthread_create(&th[r], NULL, chain_main, &jobs[r]) == 0;
        double per = 0;
        for (uint64_t r = 0; r < R; r++) {
            if (started[r]) {
                pthread_join(th[r], NULL);
                if (jobs[r].rc != GS_OK && rc == GS_OK) {
                    rc = jobs[r].rc;
                    *err = jobs[r].err;
                }
                per += (jobs[r].t1 - jobs[r].t0) / jobs[r].n / (double)R;
            } else if (rc == GS_OK && d) {
                rc = gs_error_set(err, GS_ERR_RUNTIME, "calibrate: cannot start a thread");
            }
            for (int k = 0; k < GS_STREAM_COUNT; k++)
                if (jobs[r].st[k])
                    c->ops->stream_destroy(d, jobs[r].st[k]);
        }
        getrusage(RUSAGE_SELF, &u1);
        if (d)
            c->ops->close(d);
        double cpu = rusage_s(&u1) - rusage_s(&u0), events = (double)R * (double)(c->quick ? 40 : 150);
        double cpu_per = cpu / events;
        c->dispatch_ranks[w % DISPATCH_SIZES] = R;
        if (cross) {
            c->wake_s[w % DISPATCH_SIZES] = per - c->dispatch_s[w % DISPATCH_SIZES] > 0
                                                 ? per - c->dispatch_s[w % DISPATCH_SIZES] : 0;
            double extra = cpu_per - c->dispatch_cpu_s[w % DISPATCH_SIZES];
            /* CPU work of a wake-up is part of its time: at most all of it */
            c->wake_cpu_s[w % DISPATCH_SIZES] = extra <= 0 ? 0 : fmin(extra, c->wake_s[w % DISPATCH_SIZES]);
        } else {
            c->dispatch_s[w] = per;
            c->dispatch_cpu_s[w] = fmin(cpu_per, per);
        }
    }
    c->launch_s = c->dispatch_s[0];
    return rc;
}

/* ---- many ranks: the cores test and the collectives ------------------------------------------------ */

typedef struct rank_job {
    cal *c;
    gs_drv *d;
    uint64_t rank, n;
    int what;       /* C_* or -1: the cores test */
    size_t bytes;   /* nccl-tests size */
    uint64_t members[8];
    double t[4]; /* collectives: the warm-up call's seconds, the timed call's; the cores test: start, end
                  * on the driver clock and in thread CPU time */
    float *a, *b;
} rank_job;

static gs_status rank_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    rank_job *j = arg;
    const gs_driver_ops *ops = j->c->ops;
    gs_drv *d = j->d;
    if (j->what < 0) {
        gs_cal_gemm g = {ops, j->a, j->a, j->b, 128, 128, 128, NULL, NULL, 1, 0};
        j->t[0] = ops->clock_s(d);
        j->t[2] = now_s(j->c, d);
        for (size_t i = 0; i < j->c->cores_calls; i++)
            gs_cal_gemm_fwd(&g, s);
        j->t[1] = ops->clock_s(d);
        j->t[3] = now_s(j->c, d);
        return GS_OK;
    }
    gs_drv_group g = {GS_GROUP_DP, 0, j->n, j->rank, j->members};
    size_t floats = j->bytes / 4;
    gs_status rc = GS_OK;
    for (int r = 0; r <= 1 && rc == GS_OK; r++) { /* call 0 meets the members, call 1 is timed */
        double t0 = ops->clock_s(d);
        switch (j->what) {
        case GS_CAL_C_AG: rc = ops->all_gather(d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_RS: rc = ops->reduce_scatter(d, s, j->rank, &g, j->a, j->b, floats / j->n, err); break;
        case GS_CAL_C_AR: rc = ops->all_reduce(d, s, j->rank, &g, j->a, floats, err); break;
        case GS_CAL_C_BC: rc = ops->broadcast(d, s, j->rank, &g, j->a, floats, 0, err); break;
        default:
            /* ping-pong: half the round trip */
            if (j->rank == 0) {
                if ((rc = ops->send(d, s, 0, 1, j->a, j->bytes, err)) == GS_OK)
                    rc = ops->recv(d, s, 0, 1, j->b, j->bytes, err);
            } else {
                if ((rc = ops->recv(d, s, 1, 0, j->b, j->bytes, err)) == GS_OK)
                    rc = ops->send(d, s, 1, 0, j->b, j->bytes, err);
            }
            break;
        }
        if (r == 1 && j->rank == 0 && rc == GS_OK) {
            double late = gs_cal_spell_next(&j->c->spell);
            if (late > 0)
                gs_cal_sleep(late);
        }
        j->t[r] = (ops->clock_s(d) - t0) * (j->what == GS_CAL_C_P2P ? 0.5 : 1.0);
    }
    return rc;
}

/* A driver of n ranks, each with a stream, kept open across launches. */
typedef struct rank_pool {
    gs_drv *d;
    gs_drv_stream *st[16];
    uint64_t n;
} rank_pool;

static gs_status pool_open(cal *c, uint64_t n, rank_pool *p, gs_error *err)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    gs_mesh mesh;
    gs_status rc = gs_mesh_init(&mesh, 1, n, 1, NULL, n, err);
    gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
    if (rc == GS_OK)
        rc = c->ops->open(&mesh, &o, &p->d, err);
    for (uint64_t r = 0; r < n && rc == GS_OK; r++)
        rc = c->ops->stream_create(p->d, r, GS_STREAM_DP, &p->st[r], err);
    return rc;
}

static void pool_close(cal *c, rank_pool *p)
{
    for (uint64_t r = 0; r < p->n; r++)
        if (p->st[r])
            c->ops->stream_destroy(p->d, p->st[r]);
    if (p->d)
        c->ops->close(p->d);
    memset(p, 0, sizeof *p);
}

/* Runs jobs[0..n) on the pool's ranks and waits for every one. */
static gs_status pool_run(cal *c, rank_pool *p, rank_job *jobs, gs_error *err)
{
    gs_status rc = GS_OK;
    uint64_t launched = 0;
    for (; launched < p->n && rc == GS_OK; launched++) {
        jobs[launched].d = p->d;
        rc = c->ops->launch(p->d, p->st[launched], rank_fn, &jobs[launched], err);
    }
    for (uint64_t r = 0; r < launched; r++) {
        gs_error e2;
        gs_error_init(&e2);
        gs_status s2 = c->ops->stream_sync(p->d, p->st[r], &e2);
        if (s2 != GS_OK && rc == GS_OK) {
            rc = s2;
            *err = e2;
        }
    }
    return rc;
}

/* Runs jobs[0..n) on ranks 0..n-1 of a fresh driver. */
static gs_status run_ranks(cal *c, uint64_t n, rank_job *jobs, gs_error *err)
{
    rank_pool p;
    gs_status rc = pool_open(c, n, &p, err);
    if (rc == GS_OK)
        rc = pool_run(c, &p, jobs, err);
    pool_close(c, &p);
    return rc;
}

/* The machine's compute as the OS shares it: P online CPUs and L other runnable threads (the
 * load other processes put on it). With k of our threads runnable, a fair scheduler gives each
 * P / (L + k) of a core (at most 1), so k threads together run at k P / (L + k) times one
 * thread's full-speed rate. k = P and k = 2P threads each run 128^3 GEMMs for about 0.5 s of
 * full-speed work (quick: 0.1 s), long enough for the scheduler's sharing to show; each thread's
 * CPU time over its wall time is its share s, so L = P / mean(s) - k; the mean of the two
 * passes, at least 0. */
static gs_status measure_cores(cal *c, gs_error *err)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    double P = online > 0 ? (double)online : 1.0;
    rank_job jobs[16];
    gs_status rc = GS_OK;
    float *a = calloc(128 * 128, 4), *b = calloc(128 * 128, 4);
    if (!a || !b) {
        free(a), free(b);
        return gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
    }
    fill(a, 128 * 128, 0.01f);
    gs_cal_gemm g = {c->ops, a, a, b, 128, 128, 128, NULL, NULL, 1, 0};
    double one = time_calls(c, NULL, NULL, gs_cal_gemm_fwd, &g);
    free(a), free(b);
    double flops_call = 2.0 * 128 * 128 * 128;
    c->single_flops = flops_call / one;
    c->cores_calls = (size_t)ceil((c->quick ? 0.1 : 0.5) / one);
    double lsum = 0;
    for (int pass = 0; pass < 2 && rc == GS_OK; pass++) {
        uint64_t k = (uint64_t)P * (pass + 1);
        if (k > 16)
            k = 16;
        progress(c, "cores (%" PRIu64 " threads)", k);
        memset(jobs, 0, sizeof jobs);
        for (uint64_t r = 0; r < k; r++) {
            jobs[r] = (rank_job){.c = c, .rank = r, .n = k, .what = -1};
            jobs[r].a = calloc(128 * 128, 4);
            jobs[r].b = calloc(128 * 128, 4);
            if (!jobs[r].a || !jobs[r].b)
                rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
        }
        if (rc == GS_OK)
            rc = run_ranks(c, k, jobs, err);
        double t0 = INFINITY, t1 = 0, share = 0;
        for (uint64_t r = 0; r < k; r++) {
            t0 = fmin(t0, jobs[r].t[0]);
            t1 = fmax(t1, jobs[r].t[1]);
            share += (jobs[r].t[3] - jobs[r].t[2]) / (jobs[r].t[1] - jobs[r].t[0]) / (double)k;
            free(jobs[r].a), free(jobs[r].b);
        }
        c->multi_flops = (double)k * (double)c->cores_calls * flops_call / (t1 - t0);
        lsum += share > 0 ? P / fmin(share, 1.0) - (double)k : 0;
        c->cores_threads[pass] = k;
        c->cores_share[pass] = share;
    }
    /* Linux with sched_autogroup (the default on most distributions) shares the CPUs fairly
     * between sessions, not threads: this process gets a share of the machine whatever its
     * thread count, and the threads it has runnable split that share. Then compute.cores is the
     * share (the passes' aggregate CPU rate, in cores) and there is no background term. */
    c->autogroup = 0;
    FILE *ag = fopen("/proc/sys/kernel/sched_autogroup_enabled", "r");
    if (ag) {
        c->autogroup = fgetc(ag) == '1';
        fclose(ag);
    }
    if (c->autogroup) {
        double agg = 0.5 * ((double)c->cores_threads[0] * c->cores_share[0] +
                            (double)c->cores_threads[1] * c->cores_share[1]);
        c->cores = agg > P ? P : agg > 0.01 ? agg : 0.01;
        c->background = 0;
    } else {
        c->cores = P;
        c->background = lsum / 2 > 0 ? lsum / 2 : 0;
    }
    return rc;
}

/* The concurrency test: k threads (k = 1 .. the online CPUs, at most MAX_CONC) each run the
 * scenario's GEMM shapes (forward) on operand sets of their own, used in turn as the GEMM
 * measurement does, started together; the slowest thread's CPU time per pass (the median of
 * its repeats) over the same with one thread is ratio(k): how much longer the same work takes
 * on the slowest core while k - 1 others compute beside it (they share the L3 and the memory
 * bandwidth, and cores differ). CPU time, so the share of the cores other processes take does
 * not count (that is compute.cores). */
typedef struct conc_job {
    const cal *c;
    size_t slot; /* thread t of k: pinned to allowed CPU t (thread 0 on the solo kernels' CPU) */
    int cpu;     /* out: the CPU it was pinned to, -1 unpinned */
    int *go; /* set (atomically) once every thread is started: they start together */
    float **x, **w, **y; /* per shape */
    size_t *copies;      /* per shape */
    double pass_s[MAX_REPS];
    int ok;
} conc_job;

static size_t conc_first(const cal *c)
{
    return c->scen_first < c->ngemm ? c->scen_first : 0;
}

static void conc_pass(conc_job *j, size_t rep)
{
    const cal *c = j->c;
    for (size_t i = conc_first(c); i < c->ngemm; i++) {
        const gemm_point *g = &c->gemm[i];
        for (size_t r = 0; r < j->copies[i]; r++) {
            size_t at = (rep * 7 + r) % j->copies[i];
            c->ops->k.linear_fwd(NULL, j->x[i] + at * g->m * g->k, j->w[i] + at * g->n * g->k,
                               j->y[i] + at * g->m * g->n, g->m, g->k, g->n);
        }
    }
}

/* Passes per thread in a round of the concurrency test (the rounds repeat it too). */
static int conc_reps(const cal *c)
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
        double t0 = now_s(j->c, NULL);
        conc_pass(j, (size_t)r + 1);
        j->pass_s[r] = now_s(j->c, NULL) - t0;
    }
    return NULL;
}

/* One round: pass_s[k - 1] = the slowest of k threads started together (each one's median CPU
 * time per pass), for k = 1 .. kmax. The slowest, not the mean: ranks meet at every collective,
 * so a step runs at its slowest rank's pace, and the cores are not equal (on a 2-vCPU cloud VM
 * one vCPU ran the same GEMMs 20-25% slower than the other, pinned with taskset, and which one
 * changed over minutes). */
static gs_status conc_round(cal *c, uint64_t kmax, double *pass_s, gs_error *err)
{
    gs_status rc = GS_OK;
    for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++) {
        progress(c, "concurrency (%" PRIu64 " thread%s)", k, k > 1 ? "s" : "");
        conc_job jobs[MAX_CONC];
        pthread_t th[MAX_CONC];
        int started[MAX_CONC] = {0};
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
                const gemm_point *g = &c->gemm[i];
                size_t nc = rotate_copies(c, 4.0 * (double)(g->m * g->k + g->n * g->k + g->m * g->n));
                j->copies[i] = nc;
                j->x[i] = malloc(nc * g->m * g->k * sizeof(float));
                j->w[i] = malloc(nc * g->n * g->k * sizeof(float));
                j->y[i] = malloc(nc * g->m * g->n * sizeof(float));
                if (!j->x[i] || !j->w[i] || !j->y[i])
                    rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for the concurrency test");
                else {
                    fill(j->x[i], nc * g->m * g->k, 0.01f);
                    fill(j->w[i], nc * g->n * g->k, 0.02f);
                    fill(j->y[i], nc * g->m * g->n, 0.0f);
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

#define CONC_ROUNDS 5 /* rounds of the concurrency test (3 passes each) */

/* The concurrency test in CONC_ROUNDS rounds, each running k = 1 .. kmax back to back: ratio(k)
 * is the median over the rounds of each round's pass(k) / pass(1), so that a drift of the
 * machine between rounds (frequency, a neighbour's burst) cancels within the round and one
 * disturbed round does not set the fit (a single round swung ratio(2) between 0.78 and 1.15 on
 * an idle 2-core machine). */
static gs_status measure_concurrency(cal *c, gs_error *err)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t kmax = online > 1 ? (uint64_t)online : 1;
    if (kmax > MAX_CONC)
        kmax = MAX_CONC;
    gs_status rc = GS_OK;
    double ratio[MAX_CONC][CONC_ROUNDS];
    c->nconc = 0;
    for (int round = 0; round < CONC_ROUNDS && rc == GS_OK; round++) {
        double pass_s[MAX_CONC];
        rc = conc_round(c, kmax, pass_s, err);
        for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++)
            ratio[k - 1][round] = pass_s[0] > 0 ? pass_s[k - 1] / pass_s[0] : 1.0;
    }
    for (uint64_t k = 1; k <= kmax && rc == GS_OK; k++) {
        c->conc_threads[c->nconc] = k;
        c->conc_ratio[c->nconc++] = gs_calib_median(ratio[k - 1], CONC_ROUNDS);
    }
    if (rc == GS_OK && c->nconc > 1) {
        double x[MAX_CONC];
        for (size_t i = 0; i < c->nconc; i++)
            x[i] = (double)c->conc_threads[i];
        rc = gs_fit_slowdown(x, c->conc_ratio, c->nconc, &c->conc_fit, err);
    }
    return rc;
}

/* The ranks' collectives. A repeat is one pass over every (op, group size, size), each point a
 * warm-up call (it absorbs the members' staggered starts) then one timed call, on a driver per
 * group size kept open throughout (hot, as in a step); the point is the median over the passes
 * of the slowest member's time (the call ends when the last one leaves). Passes over the whole grid,
 * not repeats back to back per point, so that a slow spell of the machine (another job, a
 * scheduler slice; tens of ms) lands in one repeat of many points, which the median drops,
 * rather than in every repeat of a few neighbouring sizes, which would bend the fit. The
 * buffers are allocated once, at the largest size, for every rank. */
static gs_status measure_colls(cal *c, gs_error *err)
{
    gs_status rc = GS_OK;
    size_t maxb = c->nsizes ? c->sizes[c->nsizes - 1] : 0, npts = (size_t)GS_CAL_C_COUNT * GROUP_SIZES * MAX_SIZES;
    float *bufa[8] = {0}, *bufb[8] = {0};
    rank_pool pool[GROUP_SIZES];
    memset(pool, 0, sizeof pool);
    for (int gi = 0; gi < GROUP_SIZES && rc == GS_OK; gi++)
        rc = pool_open(c, group_sizes[gi], &pool[gi], err);
    double *rep_s = calloc(npts * (size_t)c->reps, sizeof *rep_s); /* [op][gi][si][rep] */
    if (!rep_s)
        rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory");
    for (int r = 0; r < 8 && rc == GS_OK; r++) {
        bufa[r] = malloc(maxb), bufb[r] = malloc(maxb);
        if (!bufa[r] || !bufb[r])
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: out of memory for 2 x %zu B buffers per rank", maxb);
        else
            fill(bufa[r], maxb / 4, 0.5f);
    }
#define REP_AT(op, gi, si, rep) (((((size_t)(op) * GROUP_SIZES + (size_t)(gi)) * MAX_SIZES + (si)) * (size_t)c->reps) + (size_t)(rep))
    for (int rep = 0; rep < c->reps && rc == GS_OK; rep++)
        for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++)
            for (int gi = 0; gi < GROUP_SIZES && rc == GS_OK; gi++) {
                uint64_t n = op == GS_CAL_C_P2P ? 2 : group_sizes[gi];
                if (op == GS_CAL_C_P2P && gi > 0)
                    break;
                for (size_t si = 0; si < c->nsizes && rc == GS_OK; si++) {
                    size_t bytes = c->sizes[si];
                    progress(c, "%s, %" PRIu64 " ranks, %zu B, repeat %d/%d", gs_cal_c_names[op], n, bytes,
                             rep + 1, c->reps);
                    rank_job jobs[8];
                    memset(jobs, 0, sizeof jobs);
                    for (uint64_t r = 0; r < n; r++) {
                        jobs[r].c = c;
                        jobs[r].rank = r;
                        jobs[r].n = n;
                        jobs[r].what = op;
                        jobs[r].bytes = bytes;
                        for (uint64_t m = 0; m < n; m++)
                            jobs[r].members[m] = m;
                        jobs[r].a = bufa[r];
                        jobs[r].b = bufb[r];
                    }
                    if ((rc = pool_run(c, &pool[gi], jobs, err)) != GS_OK)
                        break;
                    double slowest = 0;
                    for (uint64_t r = 0; r < n; r++)
                        slowest = fmax(slowest, jobs[r].t[1]);
                    rep_s[REP_AT(op, gi, si, rep)] = slowest;
                }
            }
    for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++)
        for (int gi = 0; gi < GROUP_SIZES && !(op == GS_CAL_C_P2P && gi > 0); gi++)
            for (size_t si = 0; si < c->nsizes; si++)
                c->coll_s[op][gi][si] = gs_calib_median(rep_s + REP_AT(op, gi, si, 0), (size_t)c->reps);
#undef REP_AT
    for (int gi = 0; gi < GROUP_SIZES; gi++)
        pool_close(c, &pool[gi]);
    for (int r = 0; r < 8; r++)
        free(bufa[r]), free(bufb[r]);
    free(rep_s);
    return rc;
}

/* The process's CPU share while it runs the scenario's training step for real (the exec
 * backend on this driver): CPU time of the whole process over the wall time of the second of
 * two steps (the first warms up). This is how much of the machine an exec run gets, its
 * threads blocking and waking as the step makes them, beside whatever else the machine runs. */
static gs_status measure_exec_share(cal *c, const char *scenario, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x = NULL;
    gs_exec_opts o;
    gs_exec_opts_defaults(&o);
    o.driver = c->ops;
    o.driver_set = gs_cli_driver_settings();
    gs_status rc = gs_cli_load(scenario, &s, &mesh, err);
    if (rc == GS_OK)
        rc = gs_exec_session_create(&s, &mesh, &o, &x, err);
    for (int step = 0; step < 2 && rc == GS_OK; step++) {
        progress(c, "a training step of %s (%d/2)", scenario, step + 1);
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        double w0 = now_wall();
        rc = gs_exec_session_step(x, NULL, NULL, NULL, err);
        double w1 = now_wall();
        getrusage(RUSAGE_SELF, &r1);
        double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + 1e-6 * (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + 1e-6 * (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
        c->exec_share = w1 > w0 ? cpu / (w1 - w0) : 0;
        c->exec_ranks = mesh.world;
    }
    gs_exec_session_destroy(x);
    return rc;
}

/* ---- shapes ------------------------------------------------------------------------------------------ */

static void add_shape(cal *c, uint64_t m, uint64_t n, uint64_t k)
{
    for (size_t i = 0; i < c->ngemm; i++)
        if (c->gemm[i].m == m && c->gemm[i].n == n && c->gemm[i].k == k)
            return;
    if (c->ngemm < MAX_SHAPES && m && n && k)
        c->gemm[c->ngemm++] = (gemm_point){m, n, k, 0, 0, 0};
}

/* The grid: Llama-style layer GEMMs (tokens x out x in) of hidden 64 .. 1024, scaled down from
 * the presets to what one CPU core runs in milliseconds, plus the scenario's own shapes. */
static gs_status pick_shapes(cal *c, const char *scenario, gs_error *err)
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

/* ---- output ------------------------------------------------------------------------------------------- */

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ')
                    p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    fclose(f);
}

static json_t *build_json(const cal *c, const char *driver, const char *scenario)
{
    json_t *doc = json_object();
    char host[256] = "unknown", cpu[256], date[64];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_t *mach = json_object();
    json_object_set_new(mach, "hostname", json_string(host));
    json_object_set_new(mach, "cpu", json_string(cpu));
    json_object_set_new(mach, "cores_online", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) > 0)
        json_object_set_new(mach, "load_average_1min", json_real(load[0]));
    json_object_set_new(doc, "machine", mach);
    json_object_set_new(doc, "date", json_string(date));
    json_object_set_new(doc, "driver", json_string(driver));
    json_t *units = json_object();
    json_object_set_new(units, "time", json_string("seconds"));
    json_object_set_new(units, "size", json_string("bytes (nccl-tests size; elementwise: the schedule's fp32 count)"));
    json_object_set_new(units, "rate", json_string("FLOP/s, bytes/s"));
    json_object_set_new(doc, "units", units);

    json_t *comp = json_object();
    json_object_set_new(comp, "peak_flops", json_real(c->best_flops));
    json_object_set_new(comp, "gemm_efficiency", json_real(1.0));
    json_object_set_new(comp, "hbm_bw", json_real(c->ew_fit[GS_CAL_EW_ADD].beta_bytes_per_s));
    json_object_set_new(comp, "hbm_efficiency", json_real(1.0));
    json_object_set_new(comp, "launch_s", json_real(c->launch_s));
    json_t *lr = json_array();
    for (int w = 0; w < DISPATCH_SIZES; w++) {
        json_t *o = json_object();
        json_object_set_new(o, "ranks", json_integer((json_int_t)c->dispatch_ranks[w]));
        json_object_set_new(o, "launch_s", json_real(c->dispatch_s[w]));
        json_object_set_new(o, "wake_s", json_real(c->wake_s[w]));
        json_object_set_new(o, "launch_cpu_s", json_real(c->dispatch_cpu_s[w]));
        json_object_set_new(o, "wake_cpu_s", json_real(c->wake_cpu_s[w]));
        json_array_append_new(lr, o);
    }
    json_object_set_new(comp, "launch_s_by_ranks", lr);
    json_object_set_new(comp, "overlap_slowdown", json_real(1.0));
    json_object_set_new(comp, "cores", json_real(c->cores));
    json_object_set_new(comp, "background_load", json_real(c->background));
    json_object_set_new(mach, "sched_autogroup", json_boolean(c->autogroup));
    json_object_set_new(comp, "attn_flops", json_real(c->attn_flops));
    json_object_set_new(comp, "gemm_bwd_factor", json_real(c->bwd_factor));
    json_t *gc = json_object();
    json_object_set_new(gc, "form", json_string(gs_gemm_form_name(c->gemm_fit.form)));
    json_object_set_new(gc, "e_max", json_real(fmin(1.0, c->gemm_fit.e_max)));
    json_object_set_new(gc, "f0_flops", json_real(c->gemm_fit.f0_flops));
    json_object_set_new(comp, "gemm_curve", gc);
    json_t *gt = json_object();
    json_object_set_new(gt, "s_per_flop", json_real(c->gemm_terms.s_per_flop));
    json_object_set_new(gt, "s_per_kn", json_real(c->gemm_terms.s_per_kn));
    json_object_set_new(gt, "s_per_mk", json_real(c->gemm_terms.s_per_mk));
    json_object_set_new(gt, "s_per_call", json_real(c->gemm_terms.s_per_call));
    json_object_set_new(comp, "gemm_terms", gt);
    gs_cal_ew_rates_json(comp, c->ew_fit);
    json_object_set_new(comp, "qkv_rope_s_per_token", json_real(c->rope_s));
    json_object_set_new(comp, "concurrency_slowdown", json_real(c->conc_fit.s));
    /* the host driver's collectives copy and sum in the members' own threads (exec/driver_host.c):
     * all of their bandwidth time is work on the shared cores */
    json_object_set_new(comp, "collective_cpu_share", json_real(1.0));
    json_object_set_new(doc, "compute", comp);

    json_t *links = json_object();
    json_object_set_new(links, "intra", gs_cal_class_json(c->coll_fit, c->coll_fit_ok));
    json_object_set_new(doc, "links", links);

    json_t *fits = json_object();
    json_t *gf = json_object();
    json_object_set_new(gf, "form", json_string(gs_gemm_form_name(c->gemm_fit.form)));
    json_object_set_new(gf, "e_max", json_real(c->gemm_fit.e_max));
    json_object_set_new(gf, "f0_flops", json_real(c->gemm_fit.f0_flops));
    json_object_set_new(gf, "r2", json_real(c->gemm_fit.r2));
    json_object_set_new(gf, "rms_rel_resid", json_real(c->gemm_fit.rms_rel_resid));
    json_object_set_new(fits, "gemm_curve", gf);
    json_t *ef = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++)
        json_object_set_new(ef, gs_cal_ew_names[k], gs_cal_fit_json(0, &c->ew_fit[k], 1));
    json_object_set_new(fits, "elementwise", ef);
    json_t *cf = json_object();
    for (int op = 0; op < GS_CAL_C_COUNT; op++) {
        json_t *o = json_object();
        for (int gi = 0; gi < GROUP_SIZES; gi++)
            if (c->coll_fit_ok[op][gi]) {
                char k[16];
                snprintf(k, sizeof k, "%" PRIu64, op == GS_CAL_C_P2P ? 2 : group_sizes[gi]);
                json_object_set_new(o, k, gs_cal_fit_json(0, &c->coll_fit[op][gi], 1));
            }
        json_object_set_new(cf, gs_cal_c_names[op], o);
    }
    json_object_set_new(fits, "collectives", cf);
    json_object_set_new(fits, "method", json_string(
        "medians of repeats; collectives and elementwise kernels: t = alpha + size / beta by robust regression "
        "(bisquare, gsl_multifit_robust) on relative residuals; GEMM: efficiency (rate / best rate) against one "
        "call's FLOPs, e_max f/(f+f0) or e_max (1-exp(-f/f0)) by gsl_multifit_nlinear on log efficiency, the "
        "smaller residual kept"));
    json_object_set_new(doc, "fits", fits);

    json_t *meas = json_object();
    if (scenario)
        json_object_set_new(meas, "scenario", json_string(scenario));
    json_object_set_new(meas, "repeats", json_integer(c->reps));
    json_t *ga = json_array();
    for (size_t i = 0; i < c->ngemm; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "m", json_integer((json_int_t)c->gemm[i].m));
        json_object_set_new(o, "n", json_integer((json_int_t)c->gemm[i].n));
        json_object_set_new(o, "k", json_integer((json_int_t)c->gemm[i].k));
        json_object_set_new(o, "time_s", json_real(c->gemm[i].secs));
        json_object_set_new(o, "bwd_time_s", json_real(c->gemm[i].bwd_secs));
        json_object_set_new(o, "flops_per_s", json_real(c->gemm[i].flops_per_s));
        json_array_append_new(ga, o);
    }
    json_object_set_new(meas, "gemm", ga);
    json_t *ea = json_object();
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        json_t *arr = json_array();
        for (size_t i = 0; i < c->new_; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "elements", json_integer((json_int_t)c->ew[k][i].elements));
            json_object_set_new(o, "bytes", json_real(c->ew[k][i].bytes));
            json_object_set_new(o, "time_s", json_real(c->ew[k][i].secs));
            json_array_append_new(arr, o);
        }
        json_object_set_new(ea, gs_cal_ew_names[k], arr);
    }
    json_object_set_new(meas, "elementwise", ea);
    json_object_set_new(meas, "attention", gs_cal_attn_json(c->attn_seq, c->attn_nh, c->attn_nkv, c->attn_hd, c->attn_flash,
                                                          c->attn_fwd_s, c->attn_bwd_s));
    json_object_set_new(meas, "launch_s", json_real(c->launch_s));
    json_object_set_new(meas, "gemm_flops_1_thread", json_real(c->single_flops));
    if (scenario)
        json_object_set_new(meas, "exec_step_cpu_share", json_real(c->exec_share));
    json_object_set_new(meas, "gemm_flops_all_threads", json_real(c->multi_flops));
    json_t *ct = json_array();
    for (int pass = 0; pass < 2; pass++) {
        json_t *o = json_object();
        json_object_set_new(o, "threads", json_integer((json_int_t)c->cores_threads[pass]));
        json_object_set_new(o, "cpu_share_per_thread", json_real(c->cores_share[pass]));
        json_array_append_new(ct, o);
    }
    json_object_set_new(meas, "cores_test", ct);
    json_t *cc = json_array();
    for (size_t i = 0; i < c->nconc; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "threads", json_integer((json_int_t)c->conc_threads[i]));
        json_object_set_new(o, "cpu_time_ratio", json_real(c->conc_ratio[i]));
        json_array_append_new(cc, o);
    }
    json_object_set_new(meas, "concurrency_test", cc);
    /* where the single-thread kernels and the concurrency threads ran (-1: not pinned) */
    json_object_set_new(meas, "single_thread_cpu", json_integer(c->solo_cpu));
    json_t *cp = json_array();
    for (size_t t = 0; t < c->nconc && t < MAX_CONC; t++)
        json_array_append_new(cp, json_integer(c->conc_cpu[t]));
    json_object_set_new(meas, "concurrency_cpus", cp);
    json_object_set_new(meas, "gemm_operands", json_string(c->rotate ? "rotated" : "warm"));
    json_t *co = gs_cal_colls_json(c->sizes, c->nsizes, &c->coll_s[0][0][0], MAX_SIZES, c->coll_fit_ok);
    json_object_set_new(meas, "collectives", co);
    json_object_set_new(doc, "measurements", meas);
    return doc;
}

static void print_summary(const cal *c)
{
    char host[256] = "unknown", cpu[256];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    printf("calibration of %s (%s, %ld cores online), host driver, fp32; medians of %d repeats\n", host, cpu,
           sysconf(_SC_NPROCESSORS_ONLN), c->reps);
    printf("\nGEMM (the driver's linear, one thread, CPU time):\n");
    gs_cli_table t;
    gs_cli_table_init(&t, 9);
    gs_cli_table_rowf(&t, "m\tn\tk\ttime(us)\tGFLOP/s\teff\tfit\tterms(us)\tbwd/2fwd");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gemm_point *g = &c->gemm[i];
        double f = 2.0 * (double)g->m * (double)g->n * (double)g->k;
        gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%.1f\t%.2f\t%.3f\t%.3f\t%.1f\t%.2f", g->m, g->n,
                          g->k, g->secs * 1e6, g->flops_per_s * 1e-9, g->flops_per_s / c->best_flops,
                          gs_gemm_curve_eval(c->gemm_fit.form, c->gemm_fit.e_max, c->gemm_fit.f0_flops, f),
                          1e6 * gs_gemm_terms_eval(c->gemm_terms.s_per_flop, c->gemm_terms.s_per_kn,
                                                   c->gemm_terms.s_per_mk, c->gemm_terms.s_per_call, (double)g->m,
                                                   (double)g->n, (double)g->k),
                          g->bwd_secs / (2.0 * g->secs));
    }
    gs_cli_table_print(&t, stdout, 2);
    gs_cli_table_fini(&t);
    printf("  best %.2f GFLOP/s; fit (%s): eff = %.3f x %s, f0 = %.3g FLOP; R^2 %.3f, rms relative residual %.1f%%\n",
           c->best_flops * 1e-9, gs_gemm_form_name(c->gemm_fit.form), c->gemm_fit.e_max,
           c->gemm_fit.form == GS_GEMM_FORM_EXP ? "(1 - exp(-f/f0))" : "f / (f + f0)", c->gemm_fit.f0_flops,
           c->gemm_fit.r2, 100 * c->gemm_fit.rms_rel_resid);
    printf("  terms (compute.gemm_terms, used by the sim): t = 2mnk / %.2f GFLOP/s + kn x %.3g ns + mk x %.3g ns + "
           "%.2f us; rms relative residual %.1f%%\n", 1e-9 / c->gemm_terms.s_per_flop, c->gemm_terms.s_per_kn * 1e9,
           c->gemm_terms.s_per_mk * 1e9, c->gemm_terms.s_per_call * 1e6, 100 * c->gemm_terms.rms_rel_resid);
    printf("  backward (linear_bwd: dx and dw) over twice the forward: median %.3f (compute.gemm_bwd_factor)\n",
           c->bwd_factor);
    printf("  attention (seq %" PRIu64 ", %" PRIu64 " heads of %" PRIu64 ", %s): fwd %.1f us, bwd %.1f us, %.2f GFLOP/s "
           "(the schedule's FLOP count)\n", c->attn_seq, c->attn_nh, c->attn_hd,
           c->attn_flash ? "flash kernels" : "probabilities kept", c->attn_fwd_s * 1e6,
           c->attn_bwd_s * 1e6, c->attn_flops * 1e-9);
    printf("\nelementwise kernels (bytes as the schedule counts them, fp32): t = alpha + bytes / bw\n");
    gs_cal_ew_print(stdout, c->ew_fit, NULL, NULL);
    printf("  rotary embedding (q and k, %" PRIu64 " + %" PRIu64 " heads of %" PRIu64 "): %.2f us per token "
           "(compute.qkv_rope_s_per_token)\n", c->attn_nh, c->attn_nkv, c->attn_hd, c->rope_s * 1e6);
    printf("  GEMM operands: %s\n", c->rotate ? "rotated over sets beyond the caches (as a step finds them)"
                                               : "warm (--warm: the same operands every call)");
    printf("\nconcurrency (the scenario's GEMMs, k threads at once, the slowest one's CPU time over one "
           "thread's, median of 5 rounds):");
    for (size_t i = 0; i < c->nconc; i++)
        printf(" %.3f with %" PRIu64 "%s", c->conc_ratio[i], c->conc_threads[i], i + 1 < c->nconc ? "," : "");
    printf("\n  fit: 1 + s (k - 1), s = %.3f (compute.concurrency_slowdown), rms residual %.1f%%\n", c->conc_fit.s,
           100 * c->conc_fit.rms_rel_resid);    if (c->solo_cpu >= 0) {
        printf("  pinned: the single-thread kernels and thread 1 on CPU %d, threads 2.. on CPUs", c->solo_cpu);
        for (size_t q = 1; q < c->nconc && q < MAX_CONC; q++)
            printf("%s%d", q > 1 ? "," : " ", c->conc_cpu[q]);
        printf("\n");
    } else
        printf("  not pinned (no CPU affinity): the one-thread reference may not be the GEMM fit's CPU\n");
    printf("\ndispatch per event (+ a cross-stream wake-up):");
    for (int w = 0; w < DISPATCH_SIZES; w++)
        printf(" %.1f (+%.1f) us with %" PRIu64 " rank%s%s", c->dispatch_s[w] * 1e6, c->wake_s[w] * 1e6,
               c->dispatch_ranks[w], c->dispatch_ranks[w] > 1 ? "s" : "", w + 1 < DISPATCH_SIZES ? "," : "");
    printf("\n  of which CPU work (the process's CPU time per event, every thread woken):");
    for (int w = 0; w < DISPATCH_SIZES; w++)
        printf(" %.1f (+%.1f) us%s", c->dispatch_cpu_s[w] * 1e6, c->wake_cpu_s[w] * 1e6, w + 1 < DISPATCH_SIZES ? "," : "");
    printf("\nscheduler: %s\n", c->autogroup ? "sched_autogroup (fair between sessions): cores = this process's share"
                                                  : "fair between threads: cores = CPUs, with the other runnable threads");
    if (c->exec_ranks)
        printf("a training step of the scenario (%" PRIu64 " ranks): the process used %.2f cores (CPU time / wall)\n",
               c->exec_ranks, c->exec_share);
    printf("cores: %.2f, other runnable threads: %.2f (CPU share per thread: %.3f with "
           "%" PRIu64 " threads, %.3f with %" PRIu64 "; 128^3 GEMMs, one thread in CPU time %.2f GFLOP/s)\n",
           c->cores, c->background, c->cores_share[0], c->cores_threads[0], c->cores_share[1],
           c->cores_threads[1], c->single_flops * 1e-9);
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GROUP_SIZES; gi++) {
            uint64_t n = op == GS_CAL_C_P2P ? 2 : group_sizes[gi];
            if (op == GS_CAL_C_P2P && gi > 0)
                break;
            char head[96];
            snprintf(head, sizeof head, "%s, %" PRIu64 " ranks (host threads, shared memory):", gs_cal_c_names[op], n);
            gs_cal_coll_print(stdout, head, op, n, c->sizes, c->nsizes, c->coll_s[op][gi], &c->coll_fit[op][gi]);
        }
}

/* ---- plots --------------------------------------------------------------------------------------------- */

static gs_status write_plots(const cal *c, const char *prefix, gs_error *err)
{
    gs_cal_series ser[GS_CAL_C_COUNT * GROUP_SIZES];
    size_t ns = 0;
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GROUP_SIZES && !(op == GS_CAL_C_P2P && gi > 0); gi++)
            ser[ns++] = (gs_cal_series){op, op == GS_CAL_C_P2P ? 2 : group_sizes[gi], NULL, c->coll_s[op][gi],
                                        &c->coll_fit[op][gi]};
    gs_status rc = gs_cal_coll_plot(prefix, "host collectives", ser, ns, c->sizes, c->nsizes, err);
    if (rc != GS_OK)
        return rc;
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s-gemm.dat", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# flops efficiency fitted m n k\n");
    for (size_t i = 0; i < c->ngemm; i++) {
        const gemm_point *g = &c->gemm[i];
        double fl = 2.0 * (double)g->m * (double)g->n * (double)g->k;
        fprintf(f, "%.0f %.6f %.6f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", fl, g->flops_per_s / c->best_flops,
                gs_gemm_curve_eval(c->gemm_fit.form, c->gemm_fit.e_max, c->gemm_fit.f0_flops, fl), g->m, g->n, g->k);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s-gemm.gp", prefix);
    if (!(f = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "set terminal pngcairo noenhanced size 900,600\nset output '%s-gemm.png'\nset logscale x\n"
               "set xlabel 'FLOPs of one GEMM call (2mnk)'\nset ylabel 'efficiency (rate / best rate)'\n"
               "set yrange [0:1.1]\nset key left top\nset title 'host GEMM efficiency'\n",
            prefix);
    if (c->gemm_fit.form == GS_GEMM_FORM_EXP)
        fprintf(f, "f(x) = %.9g * (1 - exp(-x / %.9g))\n", c->gemm_fit.e_max, c->gemm_fit.f0_flops);
    else
        fprintf(f, "f(x) = %.9g * x / (x + %.9g)\n", c->gemm_fit.e_max, c->gemm_fit.f0_flops);
    fprintf(f, "set samples 200\nplot '%s-gemm.dat' using 1:2 with points pt 7 title 'measured', "
               "[1e4:1e10] f(x) with lines title 'fit (%s)'\n", prefix, gs_gemm_form_name(c->gemm_fit.form));
    fclose(f);
    if ((rc = gs_cal_gnuplot(prefix, "gemm", err)) != GS_OK)
        return rc;
    printf("\nplots: %s-coll.png, %s-gemm.png (data and gnuplot scripts beside them)\n", prefix, prefix);
    return GS_OK;
}

/* ---- the command --------------------------------------------------------------------------------------- */

/* The options. */
typedef struct calib_args {
    const char *driver, *out, *plot, *scenario;
    int quick, warm, events, quiet;
    const gs_driver_ops *ops;
} calib_args;

static gs_status parse(int argc, char **argv, calib_args *a, gs_error *err)
{
    static const struct option opts[] = {
        {"driver", required_argument, NULL, 'd'}, {"out", required_argument, NULL, 'o'},
        {"quick", no_argument, NULL, 'q'},        {"plot", required_argument, NULL, 'p'},
        {"warm", no_argument, NULL, 'w'},        {"events", no_argument, NULL, 'e'},
        {"quiet", no_argument, NULL, 'Q'},        {NULL, 0, NULL, 0},
    };
    *a = (calib_args){"host", "calib.json", NULL, NULL, 0, 0, 0, 0, NULL};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': a->driver = optarg; break;
        case 'o': a->out = optarg; break;
        case 'q': a->quick = 1; break;
        case 'p': a->plot = optarg; break;
        case 'w': a->warm = 1; break;
        case 'e': a->events = 1; break;
        case 'Q': a->quiet = 1; break;
        default: return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (optind < argc)
        a->scenario = argv[optind++];
    if (optind < argc)
        return gs_error_set(err, GS_ERR_INPUT, "one scenario at most, found '%s' too\nusage: %s", argv[optind], usage);
    return gs_driver_load(a->driver, getenv("GRIDSTEP_MODULE_PATH"), &a->ops, err);
}

/* This machine, through the driver: measures, fits, prints the summary and the plots, and
 * returns the calibration file's document (written by the caller). */
/* The measurements progress() will count on this path, in the order they run: GEMMs, kernels,
 * attention and the rotary embedding, dispatch over 1-8 ranks (alone and across streams), cores
 * (2 passes), concurrency (CONC_ROUNDS rounds of 1..kmax threads), the collectives (repeats x
 * sizes x every op and group size, send/recv at 2 ranks only) and a scenario's two steps. */
static uint64_t progress_total(const cal *c, const char *scenario)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t kmax = online > 1 ? (uint64_t)online : 1;
    if (kmax > MAX_CONC)
        kmax = MAX_CONC;
    uint64_t colls = (uint64_t)c->reps * c->nsizes * ((GS_CAL_C_COUNT - 1) * GROUP_SIZES + 1);
    return c->ngemm + (uint64_t)GS_CAL_EW_COUNT * c->new_ + 2 + 2 * DISPATCH_SIZES + 2 + CONC_ROUNDS * kmax + colls +
           (scenario ? 2 : 0);
}

/* The device calibration's progress, on the command's progress display (calib/device.h). */
static void dev_progress(void *arg, uint64_t done, uint64_t total, const char *what)
{
    gs_progress_update(arg, done, total, what);
}

/* machine.environment of a device calibration's file: the variables that shape what it measures. */
static json_t *dev_environment(void)
{
    json_t *env = json_object();
    static const char *const vars[] = {"GRIDSTEP_CUDA_GEMM", "GRIDSTEP_HOST_GEMM", "GRIDSTEP_CUDA_ATTENTION",
                                       "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        json_object_set_new(env, vars[i], v ? json_string(v) : json_null());
    }
    return env;
}

/* Through a device's driver (or --events): the measurement timed with its stream events
 * (calib/device.c), its summary and plots; *doc gets the calibration file's document. */
static gs_status calibrate_device(const calib_args *a, gs_progress *prog, json_t **doc, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_calib_dev_opts dopt = {.scenario_path = a->scenario, .quick = a->quick, .small = !a->ops->device_memory,
                              .progress = dev_progress, .progress_arg = prog, .max_ranks = 8,
                              .set = gs_cli_driver_settings()};
    gs_calib_dev *dc = NULL;
    json_t *env = dev_environment();
    gs_status rc = GS_OK;
    dopt.environment = env;
    if (a->scenario) {
        if ((rc = gs_cli_load(a->scenario, &s, &mesh, err)) != GS_OK)
            goto out;
        dopt.scenario = &s, dopt.mesh = &mesh;
    }
    if ((rc = gs_calib_dev_run(a->ops, &dopt, &dc, err)) != GS_OK)
        goto out;
    *doc = gs_calib_dev_json(dc);
    gs_calib_dev_print(dc, stdout);
    if (a->plot && (rc = gs_calib_dev_plot(dc, a->plot, err)) == GS_OK)
        printf("\nplots: %s-gemm.png%s%s%s (data and gnuplot scripts beside them)\n", a->plot,
               json_object_get(*doc, "links") ? ", " : "", json_object_get(*doc, "links") ? a->plot : "",
               json_object_get(*doc, "links") ? "-coll.png" : "");
out:
    gs_calib_dev_free(dc);
    json_decref(env);
    return rc;
}

static gs_status calibrate_here(const calib_args *a, json_t **doc_out, gs_error *err)
{
    const char *out = a->out, *plot = a->plot, *scenario = a->scenario;
    (void)out;
    *doc_out = NULL;
    cal *c = calloc(1, sizeof *c);
    if (!c)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    c->solo_cpu = -1;
    for (int t = 0; t < MAX_CONC; t++)
        c->conc_cpu[t] = -1;
    c->ops = a->ops;
    c->quick = a->quick;
    c->rotate = a->warm ? -1 : 0;
    gs_progress prog;
    gs_progress_init(&prog, "gridstep calibrate", "measurements", !a->quiet);
    gs_status rc = GS_OK;
    json_t *doc = NULL;
    gs_drv *d = NULL;
    gs_drv_stream *s = NULL;
    if (c->ops->device_memory || a->events) {
        /* a device's driver (or --events): timed with its stream events */
        rc = calibrate_device(a, &prog, &doc, err);
        goto done;
    }
    c->rotate = c->rotate < 0 ? 0 : 1;
    c->reps = c->quick ? 3 : 7;
    if ((rc = gs_cal_spell_parse(&c->spell, getenv("GRIDSTEP_CALIB_SPELL"), err)) != GS_OK)
        goto done;
    if ((rc = pick_shapes(c, scenario, err)) != GS_OK)
        goto done;
    /* elementwise sizes: 2^12 .. 2^20 elements (x4; quick x16) */
    for (uint64_t n = 4096; n <= (1u << 20); n *= c->quick ? 16 : 4)
        c->ew[0][c->new_++].elements = n;
    for (int k = 1; k < GS_CAL_EW_COUNT; k++)
        for (size_t i = 0; i < c->new_; i++)
            c->ew[k][i].elements = c->ew[0][i].elements;
    /* collective sizes: 1 KiB .. 16 MiB (quick: 1 MiB), x4 */
    for (uint64_t b = 1024; b <= (c->quick ? (1u << 20) : (16u << 20)); b *= 4)
        c->sizes[c->nsizes++] = b;

    c->prog = &prog;
    c->ptotal = progress_total(c, scenario);
    /* one rank: kernels and dispatch */
    gs_mesh mesh;
    gs_driver_opts o = {.timeout_s = 600.0, .set = gs_cli_driver_settings()};
    if ((rc = gs_mesh_init(&mesh, 1, 1, 1, NULL, 1, err)) != GS_OK || (rc = c->ops->open(&mesh, &o, &d, err)) != GS_OK ||
        (rc = c->ops->stream_create(d, 0, GS_STREAM_COMPUTE, &s, err)) != GS_OK)
        goto done;
    solo_job job = {c, d, err};
    if ((rc = c->ops->launch(d, s, solo_fn, &job, err)) != GS_OK || (rc = c->ops->stream_sync(d, s, err)) != GS_OK)
        goto done;
    c->ops->stream_destroy(d, s);
    s = NULL;
    c->ops->close(d);
    d = NULL;
    if ((rc = measure_dispatch(c, err)) != GS_OK || (rc = measure_cores(c, err)) != GS_OK ||
        (rc = measure_concurrency(c, err)) != GS_OK || (rc = measure_colls(c, err)) != GS_OK)
        goto done;
    gs_cal_spell_note(&c->spell, "ranks");
    if (scenario) {
        if ((rc = measure_exec_share(c, scenario, err)) != GS_OK)
            goto done;
        /* a real step's threads block and wake, and the scheduler treats them unlike the busy
         * GEMM threads: under sched_autogroup the step's own share is the better figure (the
         * busy threads' share when that is larger: the step may not have had work for every
         * core) */
        if (c->autogroup && c->exec_share > c->cores) {
            long online = sysconf(_SC_NPROCESSORS_ONLN);
            c->cores = online > 0 && c->exec_share > (double)online ? (double)online : c->exec_share;
        }
    }
    gs_progress_update(&prog, c->ptotal, c->ptotal, "fitting");

    /* fits */
    double fl[MAX_SHAPES], eff[MAX_SHAPES];
    for (size_t i = 0; i < c->ngemm; i++) {
        fl[i] = 2.0 * (double)c->gemm[i].m * (double)c->gemm[i].n * (double)c->gemm[i].k;
        eff[i] = c->gemm[i].flops_per_s / c->best_flops;
    }
    if ((rc = gs_fit_gemm_curve(fl, eff, c->ngemm, &c->gemm_fit, err)) != GS_OK)
        goto done;
    {
        double gm[MAX_SHAPES], gn[MAX_SHAPES], gk[MAX_SHAPES], gt[MAX_SHAPES];
        for (size_t i = 0; i < c->ngemm; i++)
            gm[i] = (double)c->gemm[i].m, gn[i] = (double)c->gemm[i].n, gk[i] = (double)c->gemm[i].k,
            gt[i] = c->gemm[i].secs;
        if ((rc = gs_fit_gemm_terms_fit(gm, gn, gk, gt, c->ngemm, &c->gemm_terms, err)) != GS_OK)
            goto done;
    }
    {
        double r[MAX_SHAPES];
        for (size_t i = 0; i < c->ngemm; i++)
            r[i] = c->gemm[i].bwd_secs / (2.0 * c->gemm[i].secs);
        c->bwd_factor = gs_calib_median(r, c->ngemm);
    }
    for (int k = 0; k < GS_CAL_EW_COUNT; k++) {
        double x[MAX_SIZES], y[MAX_SIZES];
        for (size_t i = 0; i < c->new_; i++)
            x[i] = c->ew[k][i].bytes, y[i] = c->ew[k][i].secs;
        if ((rc = gs_fit_alpha_beta(x, y, c->new_, &c->ew_fit[k], err)) != GS_OK) {
            gs_error_prefix(err, "%s", gs_cal_ew_names[k]);
            goto done;
        }
    }
    for (int op = 0; op < GS_CAL_C_COUNT; op++)
        for (int gi = 0; gi < GROUP_SIZES; gi++) {
            if (op == GS_CAL_C_P2P && gi > 0)
                break;
            double x[MAX_SIZES];
            for (size_t i = 0; i < c->nsizes; i++)
                x[i] = (double)c->sizes[i];
            if ((rc = gs_fit_alpha_beta(x, c->coll_s[op][gi], c->nsizes, &c->coll_fit[op][gi], err)) != GS_OK) {
                gs_error_prefix(err, "%s over %" PRIu64 " ranks", gs_cal_c_names[op], group_sizes[gi]);
                goto done;
            }
            c->coll_fit_ok[op][gi] = 1;
        }

    doc = build_json(c, c->ops->name, scenario);
    print_summary(c);
    if (plot)
        rc = write_plots(c, plot, err);
done:
    gs_progress_end(&prog);
    if (s)
        c->ops->stream_destroy(d, s);
    if (d)
        c->ops->close(d);
    if (rc == GS_OK)
        *doc_out = doc;
    else
        json_decref(doc);
    free(c);
    return rc;
}

/* links.<cls> of doc gets the lines measured between processes: a group size already there is
 * replaced (the processes' transport is what a multi-process run uses), others added. */
static void merge_links(json_t *doc, json_t *procs_links)
{
    json_t *links = json_object_get(doc, "links");
    if (!links) {
        links = json_object();
        json_object_set_new(doc, "links", links);
    }
    const char *cls;
    json_t *from;
    json_object_foreach(procs_links, cls, from) {
        json_t *to = json_object_get(links, cls);
        if (!to) {
            json_object_set(links, cls, from);
            continue;
        }
        const char *op;
        json_t *v;
        json_object_foreach(from, op, v) {
            json_t *have = json_object_get(to, op);
            if (!json_is_array(v) || !json_is_array(have)) {
                json_object_set(to, op, v);
                continue;
            }
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *line = json_array_get(v, i);
                json_int_t n = json_integer_value(json_object_get(line, "ranks"));
                size_t j = 0, at = json_array_size(have);
                for (j = 0; j < json_array_size(have); j++) {
                    json_int_t m = json_integer_value(json_object_get(json_array_get(have, j), "ranks"));
                    if (m == n)
                        break;
                    if (m > n && at == json_array_size(have))
                        at = j;
                }
                if (j < json_array_size(have))
                    json_array_set(have, j, line);
                else
                    json_array_insert(have, at, line); /* ascending group sizes */
            }
        }
    }
}

/* 1 on every process when `mine` is 1 on every process (collective over the job's processes);
 * a failed exchange is this process's error. */
static int all_agree(const gs_exec_boot *b, int mine, gs_status *rc, gs_error *err)
{
    unsigned char me = mine ? 1 : 0, *all = calloc((size_t)b->procs, 1);
    gs_error e2;
    gs_error_init(&e2);
    gs_status s2 = all ? b->allgather(b->ctx, &me, 1, all, &e2) : gs_error_set(&e2, GS_ERR_NOMEM, "out of memory");
    int ok = s2 == GS_OK;
    for (int p = 0; ok && p < b->procs; p++)
        ok = all[p];
    if (s2 != GS_OK && *rc == GS_OK)
        *rc = s2, *err = e2;
    free(all);
    return ok;
}

/* Process 0's progress line for the collectives between processes, on a terminal
 * (calib/procs.h: progress): what is being measured, cleared once done (what NULL). */
static void procs_progress(void *arg, const char *what)
{
    (void)arg;
    if (what)
        fprintf(stderr, "\r\033[Kcalibrate: %s", what);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/* Under a launcher: process 0 measures its machine alone first (the others wait for its word,
 * polling quietly); then, when every process is ready (its own options read, the same driver
 * and sizes), every process takes part in the collectives between processes
 * (calib/procs.c); process 0 merges them into the document. Every process returns its own
 * status (agreed by the caller, which reports the failed process's error), and *all_ok 1 only
 * when every process succeeded (the file is written only then). */
static gs_status calibrate_launched(gs_mpi_exec *mx, int prank, const calib_args *a, gs_status rc, json_t **doc,
                                    int *all_ok, gs_error *err)
{
    const gs_exec_boot *b = &mx->boot;
    *all_ok = 0;
    unsigned char go = 0;
    if (prank == 0) {
        if (rc == GS_OK)
            rc = calibrate_here(a, doc, err);
        go = rc == GS_OK;
        for (int p = 1; p < b->procs; p++) {
            gs_error e2;
            gs_error_init(&e2);
            gs_status s2 = b->send(b->ctx, p, &go, 1, &e2);
            if (s2 != GS_OK && rc == GS_OK)
                rc = s2, *err = e2;
        }
    } else {
        gs_boot_wait w = {.timeout_s = 4 * 3600.0};
        gs_error e2;
        gs_error_init(&e2);
        gs_boot_outcome oc = b->recv(b->ctx, 0, &go, 1, &w, &e2);
        if (oc != GS_BOOT_DONE) {
            go = 0;
            if (rc == GS_OK)
                rc = oc == GS_BOOT_FAILED ? (*err = e2, GS_ERR_RUNTIME)
                                          : gs_error_set(err, GS_ERR_RUNTIME, "rank %d: process 0 did not finish its "
                                                         "part of the calibration", prank);
        }
    }
    /* every process or none: a process whose options failed has no driver, and one that failed
     * otherwise could pick other sizes (the collectives would not match) */
    if (!all_agree(b, go && rc == GS_OK, &rc, err))
        return rc;
    int procs = b->procs, lr, lp;
    const char **hosts = calloc((size_t)procs, sizeof *hosts);
    if (!hosts)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (int p = 0; p < procs; p++)
        hosts[p] = gs_mpi_exec_host(mx, p, &lr, &lp);
    /* nccl-tests' 1 KiB .. 1 GiB on a device (x16 quick), the host scenarios' 1 KiB .. 16 MiB
     * (1 MiB quick) on the host driver, x4 */
    uint64_t sizes[24];
    size_t ns = 0;
    uint64_t top = a->ops->device_memory ? (1u << 30) : a->quick ? (1u << 20) : (16u << 20);
    for (uint64_t sz = 1024; sz <= top && ns < 24; sz *= a->ops->device_memory && a->quick ? 16 : 4)
        sizes[ns++] = sz;
    gs_calib_procs *cp = NULL;
    gs_cal_spell spell; /* the same value on every process: the environment is theirs in common */
    gs_calib_procs_opts po = {.hosts = hosts, .sizes = sizes, .nsizes = ns, .quick = a->quick,
                              .set = gs_cli_driver_settings(), .spell = &spell};
    if (prank == 0 && !a->quiet && isatty(STDERR_FILENO))
        po.progress = procs_progress;
    rc = gs_cal_spell_parse(&spell, getenv("GRIDSTEP_CALIB_SPELL"), err);
    if (rc == GS_OK)
        rc = gs_calib_procs_run(a->ops, b, &po, &cp, err);
    if (rc == GS_OK && prank == 0)
        gs_cal_spell_note(&spell, "between processes");
    free(hosts);
    if (rc == GS_OK && prank == 0) {
        json_t *links = gs_calib_procs_links(cp);
        merge_links(*doc, links);
        json_decref(links);
        json_t *meas = json_object_get(*doc, "measurements");
        if (meas)
            json_object_set_new(meas, "between_processes", gs_calib_procs_measurements(cp));
        gs_calib_procs_print(cp, stdout);
    }
    gs_calib_procs_free(cp);
    /* the file is written only when every process measured (a process that sees another one
     * fail keeps its own status: the agreement afterwards gives every one the failed one's) */
    *all_ok = all_agree(b, rc == GS_OK, &rc, err);
    return rc;
}

gs_status gs_cmd_calibrate(int argc, char **argv, gs_error *err)
{
    calib_args a;
    gs_mpi_exec mx;
    int prank = 0;
    json_t *doc = NULL;
    gs_status rc = gs_mpi_exec_begin(&mx, &prank, err);
    if (prank != 0 && !freopen("/dev/null", "w", stdout))
        rc = gs_error_set(err, GS_ERR_IO, "rank %d: cannot quiet standard output", prank);
    if (rc == GS_OK)
        rc = parse(argc, argv, &a, err);
    if (rc == GS_OK && mx.launched && strcmp(a.ops->name, "host") == 0 && !mx.threads_ok)
        rc = gs_mpi_exec_threads_error(&mx, err);
    int all_ok = 1;
    if (mx.launched)
        rc = calibrate_launched(&mx, prank, &a, rc, &doc, &all_ok, err);
    else if (rc == GS_OK)
        rc = calibrate_here(&a, &doc, err);
    if (rc == GS_OK && all_ok && prank == 0) {
        if (json_dump_file(doc, a.out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) != 0)
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write", a.out);
        else
            printf("\nwrote %s (use: gridstep sim --calib %s SCENARIO, gridstep compare%s%s --calib %s SCENARIO)\n",
                   a.out, a.out, strcmp(a.ops->name, "host") ? " --driver " : "",
                   strcmp(a.ops->name, "host") ? a.ops->name : "", a.out);
    }
    fflush(stdout);
    json_decref(doc);
    /* every process's outcome agreed (process 0's write included), rank 0 prints the error
     * before any process leaves MPI (as exec's launch_end) */
    int launched = mx.launched;
    rc = gs_mpi_exec_agree(&mx, rc, "the calibration", err);
    rc = gs_mpi_exec_end(&mx, "calibrate", rc, err);
    if (!launched && prank != 0 && rc != GS_OK && !freopen("/dev/null", "w", stderr))
        rc = GS_ERR_IO;
    return rc;
}
