/* `gridstep exec` / `compare` across the processes of an MPI job: launcher detection, MPI_Init_thread,
 * the process bootstrap (exec/boot.h) implemented over MPI, and the end of the job (every
 * process's status agreed, rank 0 reports, every process exits with it, MPI_Finalize).
 *
 * Ownership: gs_mpi_exec is caller storage; gs_mpi_exec_begin fills it (the boot table points
 * into it) and gs_mpi_exec_agree then gs_mpi_exec_end (each called once on every process,
 * whatever happened in between) release what it holds. */
#ifndef GS_CLI_MPI_EXEC_H
#define GS_CLI_MPI_EXEC_H

#include "engine/status.h"
#include "exec/boot.h"

typedef struct gs_mpi_exec {
    int launched;      /* 1: MPI is initialized (a launcher started us with more than one process) */
    gs_exec_boot boot; /* valid when launched */
    void *impl;        /* the MPI state (cli/mpi_exec.c) */
    int threads_ok;    /* launched: MPI_Init_thread provided MPI_THREAD_MULTIPLE */
    int thread_level;  /* what it provided (MPI_THREAD_*) */
} gs_mpi_exec;

/* Without a launcher (or a launcher of one process): not launched, MPI untouched. Under a
 * launcher of N > 1 processes with MPI built in: MPI_Init_thread asking for MPI_THREAD_MULTIPLE
 * (threads_ok says whether it was given), the boot table, the local rank. Without MPI built in:
 * GS_ERR_INPUT saying how to build it (every process returns it). *rank gets this process's
 * index (from the launcher's environment when MPI is absent; 0 when unknown), so that the caller
 * can keep the other processes quiet even then. */
gs_status gs_mpi_exec_begin(gs_mpi_exec *m, int *rank, gs_error *err);
/* GS_ERR_UNSUPPORTED: the host driver across processes needs MPI_THREAD_MULTIPLE (its stream
 * workers call MPI concurrently), which this MPI did not provide. */
gs_status gs_mpi_exec_threads_error(const gs_mpi_exec *m, gs_error *err);

/* Collective when launched (cli/mpi_end.h, gs__mpi_agree): every process's status is gathered
 * and every process returns the lowest failed process's status (the exit status is the same on
 * every process). Rank 0's err gets that process's error ("rank R of N: ..." prefixed when R is
 * not 0 and the message does not name it); the other processes' err one line instead ("rank P of
 * N: WHAT failed; rank 0 reports the error", WHAT e.g. "the save"; NULL: "the run"), so the error
 * is printed once. Then the pending transport messages are settled. MPI stays up until
 * gs_mpi_exec_end. Not launched: returns `local`. */
gs_status gs_mpi_exec_agree(gs_mpi_exec *m, gs_status local, const char *what, gs_error *err);
/* Launched (cli/mpi_end.h, gs__mpi_leave): rc's message printed ("gridstep CMD: ...") when rc
 * failed, a barrier (no process leaves before every one has printed: the first to exit non-zero
 * makes mpirun kill the others), MPI_Finalize, then standard error quiet after a failure (main's
 * copy is not printed again); returns rc (GS_ERR_IO when standard error cannot be quieted).
 * Called once on every process after gs_mpi_exec_agree, whatever happened in between. Not
 * launched: returns rc, prints nothing. */
gs_status gs_mpi_exec_end(gs_mpi_exec *m, const char *cmd, gs_status rc, gs_error *err);

/* Launched: process p's host name (MPI_Get_processor_name, or the environment's GRIDSTEP_HOST
 * when set: a stand-in to rehearse a multi-host layout on one machine) and where it sits among
 * that host's processes (*local_rank of *local_procs, rank order; the cuda driver's device).
 * NULL when not launched or p is out of range. The name is me's. */
const char *gs_mpi_exec_host(const gs_mpi_exec *m, int p, int *local_rank, int *local_procs);

#endif
