/* The process bootstrap of a multi-process exec run (one process per rank, started by mpirun or
 * srun): which process this is, where it sits on its host, byte-level collectives over every
 * process, and the transport the host driver uses for ranks in other processes. exec/ sees it
 * only through these function pointers and never links MPI; the MPI implementation is
 * cli/mpi_exec.c (libgsmpi.a).
 *
 * Contract: one rank per process, rank = proc (the exec session refuses any other launch). The world
 * calls (bcast, allgather, allgatherv, barrier, group_split) are collective: every process makes
 * them in the same order. The transport calls (group_*, send, recv) may be made from several
 * threads at once and poll: they return when done, when wait->stop(wait->arg) turns 1 (a local
 * abort) or when a peer announced an abort (its message in wait->peer_msg), or after
 * wait->timeout_s.
 *
 * Ownership: a gs_exec_boot is the launcher code's (cli/mpi_exec.h); exec borrows it for the life
 * of a session. Group handles from group_split are the bootstrap's (freed by group_free). */
#ifndef GS_EXEC_BOOT_H
#define GS_EXEC_BOOT_H

#include <stddef.h>

#include "engine/status.h"

/* How a transport call waits. */
typedef struct gs_boot_wait {
    double timeout_s;         /* give up after this long (seconds) */
    int (*stop)(void *arg);   /* polled: 1 = stop now (a local abort); may be NULL */
    void *arg;
    char peer_msg[GS_ERROR_MSG_BYTES]; /* out: a peer's abort message (GS_BOOT_PEER_ABORT) */
} gs_boot_wait;

/* What a transport call's wait ended with. */
typedef enum gs_boot_outcome {
    GS_BOOT_DONE = 0,
    GS_BOOT_STOPPED,    /* wait->stop said so */
    GS_BOOT_PEER_ABORT, /* another process aborted the run: its message in wait->peer_msg */
    GS_BOOT_TIMEOUT,
    GS_BOOT_FAILED,     /* the transport failed: err says why */
} gs_boot_outcome;

typedef struct gs_exec_boot {
    int proc, procs;             /* this process's index (= its rank) and the process count */
    int local_rank, local_procs; /* among the processes on this host (same processor name) */
    const char *host;            /* this host's name */
    void *ctx;                   /* the implementation's state */

    /* ---- every process, blocking (bytes per process) ---- */
    gs_status (*bcast)(void *ctx, void *buf, size_t bytes, int root, gs_error *err);
    /* recv[p * bytes .. (p + 1) * bytes) = process p's send */
    gs_status (*allgather)(void *ctx, const void *send, size_t bytes, void *recv, gs_error *err);
    /* process p's send (counts[p] bytes) at recv + sum of counts[0..p) */
    gs_status (*allgatherv)(void *ctx, const void *send, size_t bytes, void *recv, const size_t *counts,
                            gs_error *err);
    gs_status (*barrier)(void *ctx, gs_error *err);

    /* ---- the host driver's transport (NULL when the implementation has none) ---- */
    /* Collective over every process: the processes with the same color form a group, ordered by
     * key; *group is this process's. */
    gs_status (*group_split)(void *ctx, int color, int key, void **group, gs_error *err);
    void (*group_free)(void *ctx, void *group);
    /* recv[i * bytes ..] = member i's send (bytes each). */
    gs_boot_outcome (*group_allgather)(void *ctx, void *group, const void *send, size_t bytes, void *recv,
                                       gs_boot_wait *w, gs_error *err);
    /* recv[i * bytes ..] = member i's send[pos * bytes ..] (pos: this member's position). */
    gs_boot_outcome (*group_alltoall)(void *ctx, void *group, const void *send, size_t bytes, void *recv,
                                      gs_boot_wait *w, gs_error *err);
    gs_boot_outcome (*group_bcast)(void *ctx, void *group, void *buf, size_t bytes, int root, gs_boot_wait *w,
                                   gs_error *err);
    /* Buffered: returns once buf is copied (never waits for the receiver), in order per pair. */
    gs_status (*send)(void *ctx, int peer, const void *buf, size_t bytes, gs_error *err);
    /* Waits for the next message from peer; GS_BOOT_FAILED (err) when its size is not bytes. */
    gs_boot_outcome (*recv)(void *ctx, int peer, void *buf, size_t bytes, gs_boot_wait *w, gs_error *err);
    /* Tells every other process that this one aborted the run, with msg (once per process). */
    void (*announce_abort)(void *ctx, const char *msg);
    /* 1 (msg filled) when another process has announced an abort; never blocks. */
    int (*peer_aborted)(void *ctx, char *msg, size_t len);
} gs_exec_boot;

/* 1 when boot describes a multi-process run (boot not NULL and more than one process). */
static inline int gs_boot_active(const gs_exec_boot *boot)
{
    return boot && boot->procs > 1;
}

#endif
