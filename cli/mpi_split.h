/* Splitting a sweep or a plan search across the ranks of an MPI job: whether a launcher
 * (mpirun, mpiexec, srun) started this process, this rank's shard, every rank's piece gathered
 * on rank 0 and joined there as `gridstep merge` joins --shard pieces, and every rank ending with
 * the same status.
 *
 * Ownership: gs_mpi_split is caller storage. gs_mpi_split_begin initializes MPI only when a
 * launcher started this process; gs_mpi_split_finish (called once on every rank, whatever
 * happened in between) agrees, gathers, merges, reports and finalizes it. Pieces are borrowed. */
#ifndef GS_CLI_MPI_SPLIT_H
#define GS_CLI_MPI_SPLIT_H

#include <stddef.h>
#include <stdio.h>

#include "engine/status.h"

typedef struct gs_mpi_split {
    int launched;    /* 1: MPI_Init was called (a launcher started us and MPI is built in) */
    int rank, size;  /* this process in MPI_COMM_WORLD; 0 of 1 when not split */
} gs_mpi_split;

/* Reads the launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...). Under a
 * launcher, with MPI built in: MPI_Init, rank and size. Without a launcher: rank 0 of 1 and MPI
 * is never touched. Without MPI built in and a launcher size above 1: GS_ERR_INPUT on every rank
 * (this gridstep was built without MPI; N copies would each write the whole output). */
gs_status gs_mpi_split_begin(gs_mpi_split *sp, gs_error *err);

/* 1 when the work is split across more than one rank: the caller computes shard rank/size as a
 * --shard piece and hands it to gs_mpi_split_finish instead of printing it. */
int gs_mpi_split_active(const gs_mpi_split *sp);

/* Collective when split. First every rank's status is agreed (cli/mpi_end.h): a failure on any
 * rank, the lowest failed rank's, becomes every rank's status. Else every rank's piece (the text
 * --shard rank/size writes, `len` bytes) goes to rank 0, which joins the pieces as `gridstep
 * merge` does and writes the result to out_path (NULL: standard output, flushed), and its status
 * (the output could not be written, ...) is agreed in turn. Every rank returns the same status.
 * After a failure rank 0 prints the error on standard error as "gridstep CMD: ..." ("rank R of N:
 * ..." when R is not 0), each other rank one line ("rank P of N: the CMD failed; rank 0 reports the
 * error"), all before any rank leaves; then MPI_Finalize, and standard error goes to /dev/null so
 * that main does not print the message again. When not split it returns `local` as it is
 * (finalizing MPI after a one-rank launch; main prints the error). */
gs_status gs_mpi_split_finish(gs_mpi_split *sp, const char *cmd, gs_status local, const char *piece, size_t len,
                              const char *out_path, gs_error *err);

#endif
