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
/* Rank 0: the lowest failed rank's error, else the pieces merged into out_path. */
static gs_status root_merge(const gs_mpi_split *sp, const int *meta, const char *bytes, const int *displs,
                            const char *out_path, gs_error *err)
{
    char **text = NULL, **names = NULL;
    FILE *out = stdout;
    gs_status rc = GS_OK;
    for (int r = 0; r < sp->size; r++)
        if (meta[2 * r] != GS_OK) {
            if (r == 0) /* err already holds rank 0's own message */
                return (gs_status)meta[0];
            return gs_error_set(err, (gs_status)meta[2 * r], "rank %d of %d: %s", r, sp->size, bytes + displs[r]);
        }
    size_t n = sp->size > 0 ? (size_t)sp->size : 1;
    text = calloc(n, sizeof *text);
    names = calloc(n, sizeof *names);
    if (!text || !names) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for %d pieces", sp->size);
        goto out;
    }
    for (int r = 0; r < sp->size; r++) {
        text[r] = (char *)bytes + displs[r];
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
    }
out:
    for (int r = 0; names && r < sp->size; r++)
        free(names[r]);
    free(names);
    free(text);
    return rc;
}
#endif

gs_status gs_mpi_split_finish(gs_mpi_split *sp, gs_status local, const char *piece, size_t len,
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
    /* what this rank sends: its piece, or its error message; NUL-terminated either way */
    const char *mine = local == GS_OK ? (piece ? piece : "") : err->msg;
    size_t mlen = local == GS_OK ? (piece ? len : 0) : strlen(err->msg);
    if (local == GS_OK && mlen >= INT_MAX) {
        local = gs_error_set(err, GS_ERR_RUNTIME, "a piece of %zu bytes, expected under 2 GiB for MPI_Gatherv", mlen);
        mine = err->msg;
        mlen = strlen(err->msg);
    }
    char *sendbuf = malloc(mlen + 1);
    int meta_mine[2] = {local, 0}, *meta = NULL, *counts = NULL, *displs = NULL;
    char *bytes = NULL;
    gs_status rc = local;
    if (sendbuf) {
        memcpy(sendbuf, mine, mlen);
        sendbuf[mlen] = '\0';
        meta_mine[1] = (int)mlen + 1;
    } else { /* no memory even for the message: an empty one still takes part in the collectives */
        meta_mine[0] = GS_ERR_NOMEM;
        meta_mine[1] = 0;
    }
    if (sp->rank == 0) {
        meta = calloc(2 * (size_t)sp->size, sizeof *meta);
        counts = calloc((size_t)sp->size, sizeof *counts);
        displs = calloc((size_t)sp->size, sizeof *displs);
        if (!meta || !counts || !displs) /* MPI cannot gather into nothing: stop the job */
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(meta_mine, 2, MPI_INT, meta, 2, MPI_INT, 0, MPI_COMM_WORLD);
    int64_t total = 0;
    if (sp->rank == 0) {
        for (int r = 0; r < sp->size; r++) {
            counts[r] = meta[2 * r + 1];
            displs[r] = (int)total;
            total += counts[r];
            if (total >= INT_MAX)
                MPI_Abort(MPI_COMM_WORLD, 1); /* more than 2 GiB of output in all */
        }
        if (!(bytes = malloc((size_t)total + 1)))
            MPI_Abort(MPI_COMM_WORLD, 1);
        bytes[total] = '\0';
    }
    MPI_Gatherv(sendbuf, meta_mine[1], MPI_CHAR, bytes, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    int agreed = GS_OK;
    if (sp->rank == 0) {
        for (int r = 0; r < sp->size; r++)
            if (counts[r] == 0) /* a rank that had no memory for its message */
                displs[r] = (int)total;
        rc = root_merge(sp, meta, bytes, displs, out_path, err);
        agreed = rc;
    }
    MPI_Bcast(&agreed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (sp->rank != 0) {
        /* Rank 0 reports the agreed status and exits with it (mpirun passes rank 0's code on).
         * The other ranks exit 0: a rank exiting non-zero first makes mpirun abort the job, and
         * with it rank 0 before it has said why. */
        (void)agreed;
        rc = GS_OK;
    }
    free(sendbuf);
    free(meta);
    free(counts);
    free(displs);
    free(bytes);
    MPI_Finalize();
    sp->launched = 0;
    return rc;
#else
    (void)sp;
    (void)piece;
    (void)len;
    (void)out_path;
    (void)err;
    return local;
#endif
}
