/* `gridstep exec` and `gridstep compare` under mpirun or srun: started by a launcher, they run one
 * rank per process (exec/boot.h over MPI, cli/mpi_exec.c); every process ends with the same
 * outcome and exit status, rank 0 prints the output and the error, the others one line on
 * failure. Alone (no launcher), these only read the options and return the status. */
#include <stdio.h>
#include <string.h>

#include "cli/exec_cmd.h"
#include "cli/mpi_exec.h"

gs_status gs__exec_launch_begin(int argc, char **argv, int compare, gs__exec_args *a, gs__exec_proc *p,
                                gs_error *err)
{
    gs_mpi_exec *mx = &p->mx;
    p->prank = 0;
    gs_status rc = gs_mpi_exec_begin(mx, &p->prank, err);
    if (p->prank != 0 && !freopen("/dev/null", "w", stdout))
        rc = gs_error_set(err, GS_ERR_IO, "rank %d: cannot quiet standard output", p->prank);
    if (rc == GS_OK)
        rc = gs__exec_parse(argc, argv, compare, a, err);
    if (rc == GS_OK && mx->launched) {
        if (strcmp(a->o.driver->name, "host") == 0 && !mx->threads_ok)
            rc = gs_mpi_exec_threads_error(mx, err);
        a->o.boot = &mx->boot;
    }
    return rc;
}

/* Every process's outcome agreed: every process returns it (the same exit status). Launched, the
 * error is printed by gs_mpi_exec_end, before the processes part (the first process to exit
 * non-zero makes mpirun kill the others, so rank 0's message must be out first): rank 0 the
 * error, the others one line naming `what` ("the save", "the run"); main's copy then goes to a
 * quiet stderr, as does everything of a process other than rank 0 when MPI is not there (rank 0
 * says why). */
gs_status gs__exec_launch_end(gs__exec_proc *p, const char *cmd, const char *what, gs_status rc, gs_error *err)
{
    int launched = p->mx.launched;
    rc = gs_mpi_exec_agree(&p->mx, rc, what, err);
    rc = gs_mpi_exec_end(&p->mx, cmd, rc, err);
    if (!launched && p->prank != 0 && rc != GS_OK && !freopen("/dev/null", "w", stderr))
        rc = GS_ERR_IO;
    return rc;
}

json_t *gs__exec_processes_json(const gs_mpi_exec *mx)
{
    json_t *arr = json_array();
    int lr, lp;
    const char *h;
    for (int p = 0; (h = gs_mpi_exec_host(mx, p, &lr, &lp)) != NULL; p++) {
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(p));
        json_object_set_new(o, "host", json_string(h));
        json_object_set_new(o, "local_rank", json_integer(lr));
        json_object_set_new(o, "local_procs", json_integer(lp));
        json_array_append_new(arr, o);
    }
    return arr;
}
