/* What the files of `gridstep exec` and `gridstep compare` share: their options, their start and
 * end under a launcher, the step loop with its saves, the Ctrl-C and SIGTERM watcher, and exec's
 * report. cli/cmd_exec.c and cli/cmd_compare.c are the commands; cli/exec_args.c reads the
 * options and the environment; cli/exec_launch.c runs them across the processes of an MPI job;
 * cli/exec_steps.c runs the steps; cli/exec_signals.c stops them on a signal; cli/exec_report.c
 * prints exec's result.
 *
 * Ownership: gs__exec_args points into argv and the environment; gs__exec_proc and
 * gs__exec_sigwatch are caller storage, released by gs__exec_launch_end and
 * gs__exec_sigwatch_restore; gs__exec_run is cmd_exec.c's, which frees what it holds, and is
 * borrowed by the report. */
#ifndef GS_CLI_EXEC_CMD_H
#define GS_CLI_EXEC_CMD_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include <jansson.h>

#include "cli/mpi_exec.h"
#include "cli/progress.h"
#include "engine/mesh.h"
#include "engine/report.h"
#include "engine/scenario.h"
#include "engine/status.h"
#include "exec/dispatch_gaps.h"
#include "exec/exec.h"

/* ---- cli/exec_args.c ----------------------------------------------------------------------------------- */

/* The options of exec and compare. */
typedef struct gs__exec_args {
    const char *path, *trace, *driver, *save, *load, *calib, *save_full;
    uint64_t steps, save_every; /* save_every: 0 = only after the last step */
    int json;
    int allow_nonfinite; /* --allow-nonfinite */
    int quiet; /* no progress on standard error */
    int flow; /* compare: the sim in flow mode */
    gs_exec_opts o;
} gs__exec_args;

/* exec's options (compare: 1, compare's), the test hook GRIDSTEP_FAULT (exec), the driver
 * loaded and the environment's choices for it; a usage error names the option. */
gs_status gs__exec_parse(int argc, char **argv, int compare, gs__exec_args *a, gs_error *err);

/* ---- cli/exec_launch.c --------------------------------------------------------------------------------- */

/* This process of the command: the MPI job it is one of (not launched: alone). */
typedef struct gs__exec_proc {
    gs_mpi_exec mx;
    int prank; /* this process's index (0 when alone) */
} gs__exec_proc;

/* MPI started when launched (the other processes' standard output quieted), then the options
 * read (the boot table set in a->o when launched). */
gs_status gs__exec_launch_begin(int argc, char **argv, int compare, gs__exec_args *a, gs__exec_proc *p,
                                gs_error *err);
/* Every process's outcome agreed and returned by every process; rank 0 prints the error, the
 * others one line naming `what` ("the save", "the run"; NULL: "the run"). */
gs_status gs__exec_launch_end(gs__exec_proc *p, const char *cmd, const char *what, gs_status rc, gs_error *err);
/* [{rank, host, local_rank, local_procs}] of a launched run, one per process (= rank). */
json_t *gs__exec_processes_json(const gs_mpi_exec *mx);

/* ---- cli/exec_signals.c -------------------------------------------------------------------------------- */

/* Ctrl-C and SIGTERM while exec runs: blocked in every thread but a watcher, which aborts the
 * session. */
typedef struct gs__exec_sigwatch {
    gs_exec_session *x;
    pthread_mutex_t mu;
    int done; /* guarded by mu */
    pthread_t th;
    int started;
    sigset_t old_mask; /* the main thread's mask before the signals were blocked */
    struct sigaction old_int, old_term;
} gs__exec_sigwatch;

/* Blocks SIGINT and SIGTERM in this thread (and so in every thread created after), installs the
 * handler. */
void gs__exec_sigwatch_block(gs__exec_sigwatch *w);
/* Starts the watcher that aborts x on a signal. */
void gs__exec_sigwatch_start(gs__exec_sigwatch *w, gs_exec_session *x);
/* Stops the watcher, puts back the handlers and the mask. */
void gs__exec_sigwatch_restore(gs__exec_sigwatch *w);
/* The signal that stopped the run (0: none). */
int gs__exec_interrupted(void);

/* ---- cli/exec_steps.c ---------------------------------------------------------------------------------- */

/* What exec saves while it runs: --save DIR every save_every steps and after the last. */
typedef struct gs__exec_save_plan {
    const char *dir;
    uint64_t every;
    uint64_t saved_step; /* the optimizer step of the last checkpoint written; 0: none */
    int failed;          /* gs__exec_run_steps returned a save's failure */
    int allow_nonfinite; /* 1: a NaN or infinite loss or parameter is warned about, not fatal */
    int warned;          /* the warning was printed */
} gs__exec_save_plan;

/* The steps to run: losses and step times go into the arrays (steps entries each). */
typedef struct gs__exec_step_loop {
    uint64_t steps;
    double *loss, *secs;
    gs__exec_save_plan *sp; /* periodic saves; may be NULL */
    int across;             /* 1: one rank per process (mpirun, srun) */
    gs_progress *prog;      /* steps done, with the last step's loss and time */
} gs__exec_step_loop;

/* Runs the steps; *done gets the steps completed. */
gs_status gs__exec_run_steps(gs_exec_session *x, const gs__exec_step_loop *l, uint64_t *done, gs_error *err);

/* ---- cli/exec_report.c --------------------------------------------------------------------------------- */

/* One exec run: the scenario, its session and what its steps measured. */
typedef struct gs__exec_run {
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x;
    double *loss, *secs;   /* per step */
    uint64_t first;        /* the first step this run takes */
    gs_report rep;         /* the last step's; valid when have_rep */
    int have_rep;
    gs_dispatch_gaps gaps; /* the last step's */
} gs__exec_run;

/* The run's result on standard output: the --json document or the steps and the report. */
gs_status gs__exec_output(const gs__exec_args *a, const gs__exec_run *r, const gs_mpi_exec *mx, gs_error *err);

#endif
