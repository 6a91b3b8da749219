/* What the files of `gridstep calibrate` share: its options, the host calibration's state and the
 * functions that fill it. cli/cmd_calibrate.c is the command (help, options, the file written);
 * cli/calibrate_run.c measures this machine and fits; cli/calibrate_kernels.c and
 * cli/calibrate_ranks.c are the host driver's measurements; cli/calibrate_report.c the file's
 * document, the summary and the plots; cli/calibrate_procs.c the part between the processes of an
 * MPI job.
 *
 * Ownership: gs__calib_host is allocated and freed by calibrate_run.c for one calibration; the
 * measuring functions fill its fields, the report's read them. gs__calib_args points into argv
 * (and its ops at the loaded driver). */
#ifndef GS_CLI_CALIBRATE_CMD_H
#define GS_CLI_CALIBRATE_CMD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "calib/ops.h"
#include "cli/mpi_exec.h"
#include "cli/progress.h"
#include "engine/status.h"
#include "exec/driver.h"
#include "sim/calib.h"

/* The options. */
typedef struct gs__calib_args {
    const char *driver, *out, *plot, *scenario;
    int quick, warm, events, quiet;
    const gs_driver_ops *ops;
} gs__calib_args;

#define CALIB_MAX_SHAPES 64
#define CALIB_MAX_SIZES 16
#define CALIB_MAX_REPS 16
#define CALIB_DISPATCH_SIZES 4
#define CALIB_MAX_CONC 8    /* thread counts of the concurrency test */
#define CALIB_CONC_ROUNDS 5 /* rounds of the concurrency test (3 passes each) */

typedef struct gs__calib_gemm_point {
    uint64_t m, n, k;
    double secs; /* median per call */
    double bwd_secs; /* linear_bwd (dx and dw: two GEMMs) median per call */
    double flops_per_s;
} gs__calib_gemm_point;

typedef struct gs__calib_ew_point {
    uint64_t elements;
    double bytes; /* as the schedule counts them */
    double secs;
} gs__calib_ew_point;

/* One host calibration: what is measured, the medians, the fits. */
typedef struct gs__calib_host {
    const gs_driver_ops *ops;
    int quick, reps;
    gs_progress *prog;       /* measurements started of ptotal (gs__calib_progress counts them) */
    uint64_t pdone, ptotal;
    int rotate; /* 1: GEMMs are timed over operand sets beyond the caches (0: --warm) */
    gs__calib_gemm_point gemm[CALIB_MAX_SHAPES];
    size_t ngemm;
    double best_flops;
    double bwd_factor; /* median over shapes of linear_bwd / (2 x linear_fwd) */
    gs__calib_ew_point ew[GS_CAL_EW_COUNT][CALIB_MAX_SIZES];
    size_t new_;
    uint64_t attn_seq, attn_nh, attn_nkv, attn_hd;
    int attn_flash; /* the scenario's strategy.flash_attention (default on) */
    int attn_dropout;      /* the scenario's model has dropout layers */
    double attn_drop_rate; /* its attention dropout */
    size_t vocab_row;       /* the loss kernels' row: the scenario's vocabulary slice (64 .. 4096) */
    size_t scen_first;      /* gemm[scen_first..]: the scenario's own shapes (none: the grid's) */
    double rope_s;          /* rotary embedding of q and k per token, mean of forward and backward */
    uint64_t conc_threads[CALIB_MAX_CONC];
    double conc_ratio[CALIB_MAX_CONC]; /* CPU time per GEMM pass with k threads over one thread's */
    int solo_cpu;                /* the CPU the single-thread kernels ran on (pinned), -1: unpinned */
    int conc_cpu[CALIB_MAX_CONC]; /* the concurrency test's thread t ran on CPU conc_cpu[t] (-1: unpinned) */
    size_t nconc;
    gs_fit_slow conc_fit;
    double attn_fwd_s, attn_bwd_s, attn_flops;
    double launch_s;
    uint64_t dispatch_ranks[CALIB_DISPATCH_SIZES];
    double dispatch_s[CALIB_DISPATCH_SIZES]; /* per event on one stream, by world size */
    double wake_s[CALIB_DISPATCH_SIZES];     /* more when the event waits for another stream */
    double dispatch_cpu_s[CALIB_DISPATCH_SIZES]; /* the process's CPU time per event of the chains */
    double wake_cpu_s[CALIB_DISPATCH_SIZES];     /* more when the event waits for another stream */
    double single_flops, multi_flops, cores, background;
    int autogroup; /* the kernel shares the CPUs between sessions (sched_autogroup_enabled) */
    double exec_share; /* CPU time over wall time of the process during a training step */
    uint64_t exec_ranks;
    size_t cores_calls; /* GEMM calls per thread in the cores test */
    uint64_t cores_threads[2];
    double cores_share[2]; /* mean CPU time / wall time of a thread in each pass */
    uint64_t sizes[CALIB_MAX_SIZES];
    size_t nsizes;
    double coll_s[GS_CAL_C_COUNT][GS_CAL_GROUPS][CALIB_MAX_SIZES]; /* median seconds; 0 = not measured */
    gs_fit_ab coll_fit[GS_CAL_C_COUNT][GS_CAL_GROUPS];
    int coll_fit_ok[GS_CAL_C_COUNT][GS_CAL_GROUPS];
    gs_fit_gemm gemm_fit;
    gs_fit_gemm_terms gemm_terms;
    gs_fit_ab ew_fit[GS_CAL_EW_COUNT];
    gs_cal_spell spell; /* the test hook GRIDSTEP_CALIB_SPELL (calib/ops.h); rank 0's thread counts */
} gs__calib_host;

/* ---- cli/calibrate_run.c ------------------------------------------------------------------------------- */

/* This machine, through the driver: measures, fits, prints the summary and the plots, and
 * returns the calibration file's document (written by the caller). */
gs_status gs__calib_here(const gs__calib_args *a, json_t **doc_out, gs_error *err);

/* ---- cli/calibrate_procs.c ----------------------------------------------------------------------------- */

/* One process of a calibration under a launcher. */
typedef struct gs__calib_proc {
    gs_mpi_exec *mx;         /* launched */
    int prank;               /* this process's index */
    const gs__calib_args *a; /* its options (read when its status is GS_OK) */
} gs__calib_proc;

/* Process 0 measures its machine alone, then every process takes part in the collectives between
 * processes; *doc (process 0's) gets them, *all_ok is 1 only when every process succeeded. */
gs_status gs__calib_launched(const gs__calib_proc *p, gs_status rc, json_t **doc, int *all_ok, gs_error *err);

/* ---- cli/calibrate_kernels.c --------------------------------------------------------------------------- */

/* A measurement starts: counts it and reports the share finished (at most ptotal - 1 until the
 * end: the count is planned by calibrate_run.c's progress_total). */
void gs__calib_progress(gs__calib_host *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* p[0..n) a repeating pattern scaled by v (touches every page). */
void gs__calib_fill(float *p, size_t n, float v);
/* The calling thread's CPU time in seconds (kernels are timed in it). */
double gs__calib_now_s(const gs__calib_host *c, gs_drv *d);

/* CPU seconds per call of fn(arg): calls batched to about 2 ms (1 ms quick) per repeat, one
 * warm-up batch, the median of the repeats. */
typedef void (*gs__calib_call_fn)(void *arg, gs_drv_stream *s);
double gs__calib_time_calls(const gs__calib_host *c, gs_drv *d, gs_drv_stream *s, gs__calib_call_fn fn, void *arg);

/* The GEMM grid plus the scenario's shapes (scenario may be NULL), its attention and loss row. */
gs_status gs__calib_pick_shapes(gs__calib_host *c, const char *scenario, gs_error *err);
/* One rank's kernels on a driver of one rank: GEMMs, elementwise kernels, attention, rotary. */
gs_status gs__calib_measure_kernels(gs__calib_host *c, gs_error *err);
/* The scenario's GEMMs on 1 .. P threads at once: compute.concurrency_slowdown. */
gs_status gs__calib_measure_concurrency(gs__calib_host *c, gs_error *err);

/* ---- cli/calibrate_ranks.c ----------------------------------------------------------------------------- */

/* The dispatch cost per event of 1, 2, 4, 8 ranks, alone and across streams. */
gs_status gs__calib_measure_dispatch(gs__calib_host *c, gs_error *err);
/* The machine's cores as the OS shares them: compute.cores, compute.background_load. */
gs_status gs__calib_measure_cores(gs__calib_host *c, gs_error *err);
/* Every collective over every group size and size: links.intra. */
gs_status gs__calib_measure_colls(gs__calib_host *c, gs_error *err);
/* The process's CPU share over a real training step of the scenario. */
gs_status gs__calib_measure_exec_share(gs__calib_host *c, const char *scenario, gs_error *err);

/* ---- cli/calibrate_report.c ---------------------------------------------------------------------------- */

/* The calibration file's document (the caller owns it). */
json_t *gs__calib_host_json(const gs__calib_host *c, const char *driver, const char *scenario);
/* The summary on standard output. */
void gs__calib_host_print(const gs__calib_host *c);
/* PREFIX-coll and PREFIX-gemm .dat/.gp/.png through gnuplot. */
gs_status gs__calib_host_plots(const gs__calib_host *c, const char *prefix, gs_error *err);

#endif
