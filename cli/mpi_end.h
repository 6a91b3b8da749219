/* The end of a job of several MPI processes, shared by exec and compare (cli/mpi_exec.c) and the
 * split sweeps and plans (cli/mpi_split.c): every process's status agreed, the error printed once
 * by rank 0 and one line by each other process, before any process leaves MPI, then every process
 * returns the same status (main's exit code).
 *
 * Ownership: nothing is kept; messages are copied into the caller's gs_error. Included only by the
 * files of libgsmpi.a (compiled with MPI's flags); without HAVE_MPI it declares nothing. */
#ifndef GS_CLI_MPI_END_H
#define GS_CLI_MPI_END_H

#ifdef HAVE_MPI /* config.h comes first in the including file */
#include <mpi.h>

#include "engine/status.h"

/* Collective over comm: every process's status and message (err's when `local` failed) are
 * gathered on every process, and every process returns the lowest failed process's status (GS_OK
 * when none failed). Then rank 0's err holds that process's error ("rank R of N: " prefixed when R
 * is not 0 and the message does not name rank R already); the other processes' err holds one line
 * instead, "rank P of N: WHAT failed; rank 0 reports the error" (WHAT e.g. "the sweep"; NULL:
 * "the run"), so that the error is printed once. */
gs_status gs__mpi_agree(MPI_Comm comm, gs_status local, const char *what, gs_error *err);

/* The last act of a process of a launched job, after gs__mpi_agree gave every process rc: when rc
 * failed, err's message goes to standard error as "gridstep CMD: MESSAGE"; a barrier on
 * MPI_COMM_WORLD (the first process to exit non-zero makes mpirun kill the others, so no process
 * leaves before every one has printed); MPI_Finalize; then, when rc failed, standard error goes to
 * /dev/null so that main's copy of the message is not printed a second time. Returns rc, or
 * GS_ERR_IO when standard error cannot be quieted. */
gs_status gs__mpi_leave(const char *cmd, gs_status rc, gs_error *err);
#endif

#endif
