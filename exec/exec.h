/* The exec backend: runs training steps of a scenario's schedule on a driver (host threads
 * today), measures every event, and offers the same report and trace as the sim. A session
 * holds the schedule, the driver, the dispatcher and the training program across steps.
 *
 * Ownership: gs_exec_session is created by gs_exec_session_create and freed by
 * gs_exec_session_destroy; it copies the scenario and owns everything else it builds. */
#ifndef GS_EXEC_EXEC_H
#define GS_EXEC_EXEC_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/report.h"
#include "exec/dispatch.h"
#include "exec/driver.h"
#include "exec/train.h"

extern const gs_backend_ops gs_exec_backend;

typedef struct gs_exec_opts {
    const gs_driver_ops *driver; /* NULL: the host driver */
    double timeout_s;            /* every blocking wait (0: 60 s) */
    gs_train_opts train;
    const char *fail_event;      /* test hook: this event (gs_event_name) fails on fail_rank */
    uint64_t fail_rank;
    gs_fault_kind fail_kind;     /* ... or stalls, or kills the rank there */
    int skip_memory_check;       /* 1: do not compare the need with MemAvailable */
    /* A multi-process run (exec/boot.h): this process plays rank boot->proc only; steps gather
     * what the report, trace and loss need from the other processes, so every process ends a
     * step with the whole run's loss, step time, timings and first error. NULL or one process:
     * every rank here. Borrowed for the exec session's life. */
    const gs_exec_boot *boot;
} gs_exec_opts;

void gs_exec_opts_defaults(gs_exec_opts *o);

typedef struct gs_exec_session gs_exec_session;

/* Multi-process (o->boot active): refuses (GS_ERR_INPUT) a launch whose process count is not the
 * scenario's rank count, and agrees with the other processes on the outcome (every process
 * returns the lowest failed process's error).
 * Builds the exact schedule, refuses (GS_ERR_INPUT, with the memory ledger's numbers) a scenario
 * whose ranks together need more memory than /proc/meminfo's MemAvailable, then opens the
 * driver and initializes every rank. */
gs_status gs_exec_session_create(const gs_scenario *s, const gs_mesh *mesh, const gs_exec_opts *o,
                                 gs_exec_session **out, gs_error *err);
void gs_exec_session_destroy(gs_exec_session *x);

/* One optimizer step; *loss (may be NULL) gets its loss (mean over the global batch's tokens),
 * *step_s (may be NULL) the measured wall time (seconds). rank_err (may be NULL, one per rank)
 * gets each rank's own outcome (multi-process: only this process's rank is filled).
 * Multi-process: a barrier, then each process's clock zero (timings are seconds from there, so
 * processes are aligned to within the barrier's exit skew); after the step every process gets
 * every rank's timings, the loss summed in rank order, the slowest process's step time, and the
 * lowest failed process's error. */
gs_status gs_exec_session_step(gs_exec_session *x, double *loss, double *step_s, gs_error *rank_err,
                               gs_error *err);

/* The report and the Chrome trace of the last step (same content as the sim's). */
gs_status gs_exec_session_report(gs_exec_session *x, gs_report *rep, gs_error *err);
gs_status gs_exec_session_trace(gs_exec_session *x, FILE *f, gs_error *err);

const gs_schedule *gs_exec_session_schedule(const gs_exec_session *x);
gs_timing *const *gs_exec_session_timing(const gs_exec_session *x);
gs_train *gs_exec_session_train(gs_exec_session *x);
/* The driver's GEMM arithmetic (gs_driver_ops.gemm_math; "fp32" when it does not say). */
const char *gs_exec_session_gemm_math(const gs_exec_session *x);

/* Stops the run from any thread (e.g. a signal watcher): the current step's waits return at
 * once with msg, and so does every later step; the exec session can still be saved or destroyed. */
void gs_exec_session_abort(gs_exec_session *x, const char *msg);

/* Sharded checkpoint of every rank's parameters and Adam state (exec/checkpoint.h's directory
 * format; each element written once, by its primary owner), and its load: any grid of the same
 * model can load it (pieces are matched by element range) and continues at the saved step.
 * Multi-process: collective; each process writes its rank's file, process 0 creates the
 * temporary directory, checks every rank's pieces and commits; every process returns the same
 * outcome (the files are the one-process save's, byte for byte). The test hook fail_event
 * "save:PHASE" (fail_kind fail or die, on fail_rank) hits a step of the save. */
gs_status gs_exec_session_save(gs_exec_session *x, const char *dir, gs_error *err);
gs_status gs_exec_session_load(gs_exec_session *x, const char *dir, gs_error *err);
/* One plain safetensors FILE of the full parameters under their HF Llama names (exec/checkpoint.h's
 * full format): every rank's primary pieces gathered (DP replicas once), written atomically.
 * Multi-process: collective; the other processes send their pieces to process 0 over the
 * bootstrap's point-to-point transport, and only process 0 holds the full model and writes. */
gs_status gs_exec_session_save_full(gs_exec_session *x, const char *path, gs_error *err);

/* MemAvailable from /proc/meminfo in bytes (0 when unknown). */
uint64_t gs_exec_mem_available(void);

#endif
