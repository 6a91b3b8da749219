/* How the processes of an MPI job end together (cli/mpi_end.h): the statuses exchanged and
 * agreed, the error worded once for rank 0 and one line for the others, the print before the
 * barrier and MPI_Finalize. */
#include "config.h"

#include "cli/mpi_end.h"

#ifdef HAVE_MPI

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One process's outcome as exchanged: fixed size, so one MPI_Allgather carries every one. */
typedef struct outcome_record {
    int32_t status;
    char msg[GS_ERROR_MSG_BYTES];
} outcome_record;

/* The error rank 0 reports for a failed process p of procs. */
static gs_status report_error(int p, int procs, gs_status st, const char *msg, gs_error *err)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d", p);
    /* a message that names the rank (exec's dispatcher: "rank R: event E: ...") stands as it is */
    if (p == 0 || strstr(msg, prefix))
        return gs_error_set(err, st, "%s", msg);
    return gs_error_set(err, st, "rank %d of %d: %s", p, procs, msg);
}

gs_status gs__mpi_agree(MPI_Comm comm, gs_status local, const char *what, gs_error *err)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    outcome_record mine, *all = calloc((size_t)size, sizeof *all);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 1); /* cannot agree on anything without the records */
    memset(&mine, 0, sizeof mine);
    mine.status = local;
    if (local != GS_OK)
        snprintf(mine.msg, sizeof mine.msg, "%s", err->msg[0] ? err->msg : gs_status_name(local));
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm);
    int failed = -1;
    for (int p = 0; p < size && failed < 0; p++)
        if (all[p].status != GS_OK)
            failed = p;
    gs_status rc = GS_OK;
    if (failed >= 0 && rank == 0)
        rc = report_error(failed, size, (gs_status)all[failed].status, all[failed].msg, err);
    else if (failed >= 0) /* rank 0's exit status, and one line saying where to look */
        rc = gs_error_set(err, (gs_status)all[failed].status, "rank %d of %d: %s failed; rank 0 reports the error",
                          rank, size, what ? what : "the run");
    free(all);
    return rc;
}

gs_status gs__mpi_leave(const char *cmd, gs_status rc, gs_error *err)
{
    if (rc != GS_OK) {
        fprintf(stderr, "gridstep %s: %s\n", cmd, err->msg[0] ? err->msg : gs_status_name(rc));
        fflush(stderr);
    }
    /* every process has printed what it had to say: none exits before rank 0's message is out */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rc != GS_OK && !freopen("/dev/null", "w", stderr))
        rc = GS_ERR_IO;
    return rc;
}

#else

/* Without MPI there is no job to end (ISO C wants a declaration in every file). */
typedef int gs__mpi_end_unused;

#endif
