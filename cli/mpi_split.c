/* The MPI split of sweeps and plan searches: launcher detection, rank and size, the pieces
 * gathered on rank 0 and merged there. The only file that names MPI; without HAVE_MPI it only
 * detects a launcher and refuses to run as N silent duplicates. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "cli/merge.h"
#include "cli/mpi_end.h"
#include "cli/mpi_split.h"

/* The job size a launcher announces in the environment: Open MPI, MPICH/Hydra and Intel MPI
 * (PMI), MVAPICH, Slurm's srun with PMI. 0: no launcher said anything. */
static long launcher_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (!v || !*v)
            continue;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!errno && *end == '\0' && n >= 1)
            return n;
    }
    return 0;
}

/* 1 when a launcher started this process (a size, or a PMIx rank without one). */
static int launched_by_mpirun(void)
{
    return launcher_size() > 0 || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

gs_status gs_mpi_split_begin(gs_mpi_split *sp, gs_error *err)
{
    sp->launched = 0;
    sp->rank = 0;
    sp->size = 1;
    if (!launched_by_mpirun())
        return GS_OK;
#ifdef HAVE_MPI
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return gs_error_set(err, GS_ERR_RUNTIME, "MPI_Init failed");
    sp->launched = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &sp->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &sp->size);
    return GS_OK;
#else
    long n = launcher_size();
    if (n > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "started by an MPI launcher as one of %ld processes, but this gridstep was built without "
                            "MPI; reconfigure with --with-mpi, or use --shard I/N and gridstep merge",
                            n);
    return GS_OK;
#endif
}

int gs_mpi_split_active(const gs_mpi_split *sp)
{
    return sp->size > 1;
}

#ifdef HAVE_MPI
/* Rank 0: the pieces (text[r], NUL-terminated) joined as gridstep merge joins them and written to
 * out_path (NULL: standard output, flushed here so that a failed write is known before the
 * ranks agree on the outcome). */
static gs_status root_merge(const gs_mpi_split *sp, char **text, const char *out_path, gs_error *err)
{
    char **names = NULL;
    FILE *out = stdout;
    gs_status rc = GS_OK;
    size_t n = (size_t)sp->size;
    if (!(names = calloc(n, sizeof *names))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %d pieces", sp->size);
        goto out;
    }
    for (int r = 0; r < sp->size; r++) {
        if (!(names[r] = malloc(32))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %d pieces", sp->size);
            goto out;
        }
        snprintf(names[r], 32, "rank %d", r);
    }
    if (out_path && !(out = fopen(out_path, "w"))) {
        out = stdout;
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
        goto out;
    }
    rc = gs_merge_pieces(text, names, n, out, err);
    if (out != stdout) {
        int bad = ferror(out);
        if ((fclose(out) != 0 || bad) && rc == GS_OK)
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
        out = stdout;
    } else if (fflush(stdout) != 0 && rc == GS_OK) {
        rc = gs_error_set(err, GS_ERR_IO, "cannot write output: %s", strerror(errno));
    }
out:
    for (int r = 0; names && r < sp->size; r++)
        free(names[r]);
    free(names);
    return rc;
}

/* Collective: every rank's piece gathered on rank 0 and merged there. Rank 0 returns the merge's
 * status (its memory, the pieces, the output); the other ranks return GS_OK (they only sent). */
static gs_status gather_merge(const gs_mpi_split *sp, const char *piece, size_t len, const char *out_path,
                              gs_error *err)
{
    int mine = (int)len, *counts = NULL, *displs = NULL, go = 1;
    char *bytes = NULL, **text = NULL;
    gs_status rc = GS_OK;
    if (sp->rank == 0) {
        size_t n = (size_t)sp->size;
        counts = calloc(n, sizeof *counts);
        displs = calloc(n, sizeof *displs);
        text = calloc(n, sizeof *text);
        if (!counts || !displs || !text) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %d pieces", sp->size);
            go = 0;
        }
    }
    /* rank 0 says whether it can receive, here and below: no rank sends into nothing */
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!go)
        goto out;
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (sp->rank == 0) {
        /* each piece followed by a NUL of its own (calloc), for the merge's C strings */
        int64_t total = 0;
        for (int r = 0; r < sp->size; r++) {
            displs[r] = (int)total;
            total += (int64_t)counts[r] + 1;
            if (total >= INT_MAX) {
                rc = gs_error_set(err, GS_ERR_RUNTIME,
                                  "the pieces of ranks 0 to %d hold %" PRId64 " bytes, expected under 2 GiB for "
                                  "MPI_Gatherv", r, total);
                go = 0;
                break;
            }
        }
        if (go && !(bytes = calloc((size_t)total, 1))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %" PRId64 " bytes of pieces", total);
            go = 0;
        }
    }
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!go)
        goto out;
    MPI_Gatherv(piece, mine, MPI_CHAR, bytes, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (sp->rank == 0) {
        for (int r = 0; r < sp->size; r++)
            text[r] = bytes + displs[r];
        rc = root_merge(sp, text, out_path, err);
    }
out:
    free(counts);
    free(displs);
    free(text);
    free(bytes);
    return rc;
}
#endif

gs_status gs_mpi_split_finish(gs_mpi_split *sp, const char *cmd, gs_status local, const char *piece, size_t len,
                              const char *out_path, gs_error *err)
{
#ifdef HAVE_MPI
    if (!sp->launched)
        return local;
    if (!gs_mpi_split_active(sp)) {
        MPI_Finalize();
        sp->launched = 0;
        return local;
    }
    char what[64];
    snprintf(what, sizeof what, "the %s", cmd);
    if (local == GS_OK && len >= INT_MAX)
        local = gs_error_set(err, GS_ERR_RUNTIME, "a piece of %zu bytes, expected under 2 GiB for MPI_Gatherv", len);
    /* 1. the ranks' own work: a failure anywhere ends every rank with it, before any piece moves */
    gs_status rc = gs__mpi_agree(MPI_COMM_WORLD, local, what, err);
    /* 2. the merge and the output, on rank 0 alone: its failure ends every rank with it too */
    if (rc == GS_OK)
        rc = gs__mpi_agree(MPI_COMM_WORLD, gather_merge(sp, piece, len, out_path, err), what, err);
    sp->launched = 0;
    return gs__mpi_leave(cmd, rc, err);
#else
    (void)sp;
    (void)cmd;
    (void)piece;
    (void)len;
    (void)out_path;
    (void)err;
    return local;
#endif
}
