/* The MPI bootstrap of a multi-process exec run (exec/boot.h over MPI): world collectives on a
 * duplicate of MPI_COMM_WORLD, groups by MPI_Comm_split, host-driver collectives as nonblocking
 * MPI collectives polled against the driver's abort and timeout, buffered sends, and abort
 * announcements on their own communicator. Without HAVE_MPI it only detects a launcher and says
 * how to build MPI in. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "cli/mpi_end.h"
#include "cli/mpi_exec.h"

/* The job size a launcher announces (0: none) and this process's index in it (0 when unknown). */
static long env_long(const char *const *vars, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (!v || !*v)
            continue;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (!errno && *end == '\0' && x >= 0)
            return x;
    }
    return -1;
}

static long launcher_size(void)
{
    /* srun: SLURM_STEP_NUM_TASKS, set inside a job step only (SLURM_NTASKS is set in a batch
     * script's own shell too, where one gridstep is one process) */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    long n = env_long(vars, sizeof vars / sizeof vars[0]);
    return n > 0 ? n : 0;
}

static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "PMIX_RANK",
                                       "SLURM_PROCID"};
    long r = env_long(vars, sizeof vars / sizeof vars[0]);
    return r > 0 && r < INT_MAX ? (int)r : 0;
}

#ifdef HAVE_MPI

enum { TAG_P2P = 1, TAG_ABORT = 2 };

typedef struct pending_send {
    struct pending_send *next;
    MPI_Request req;
    unsigned char data[];
} pending_send;

typedef struct mpi_impl {
    MPI_Comm world, p2p, aborts; /* duplicates of MPI_COMM_WORLD: collectives, sends, announcements */
    int rank, size;
    char host[MPI_MAX_PROCESSOR_NAME + 1];
    char *hosts;             /* size names of sizeof host bytes: every process's host, rank order */
    pthread_mutex_t mu;      /* guards everything below */
    pending_send *sends;     /* buffered sends not known complete */
    int announced;           /* this process announced an abort */
    char announce_msg[GS_ERROR_MSG_BYTES];
    MPI_Request *announce_reqs; /* size entries */
    int peer_abort;          /* a peer's announcement was received */
    char peer_msg[GS_ERROR_MSG_BYTES];
    int received;            /* announcements received */
    MPI_Comm *groups;        /* made by group_split, freed by gs_mpi_exec_agree */
    size_t ngroups, capgroups;
} mpi_impl;

static gs_status mpi_fail(gs_error *err, int code, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", code);
    return gs_error_set(err, GS_ERR_RUNTIME, "MPI: %s: %s", what, s);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Receives every announcement that has arrived (never blocks). 1 when some peer has aborted. */
static int poll_aborts(mpi_impl *m, char *msg, size_t len)
{
    for (;;) {
        int flag = 0;
        MPI_Message h;
        MPI_Status st;
        if (MPI_Improbe(MPI_ANY_SOURCE, TAG_ABORT, m->aborts, &flag, &h, &st) != MPI_SUCCESS || !flag)
            break;
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        char *buf = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
        if (!buf) {
            char one[GS_ERROR_MSG_BYTES];
            MPI_Mrecv(one, (int)sizeof one, MPI_CHAR, &h, MPI_STATUS_IGNORE);
            continue;
        }
        MPI_Mrecv(buf, n, MPI_CHAR, &h, MPI_STATUS_IGNORE);
        pthread_mutex_lock(&m->mu);
        m->received++;
        if (!m->peer_abort) {
            m->peer_abort = 1;
            snprintf(m->peer_msg, sizeof m->peer_msg, "%s", buf);
        }
        pthread_mutex_unlock(&m->mu);
        free(buf);
    }
    pthread_mutex_lock(&m->mu);
    int a = m->peer_abort;
    if (a && msg)
        snprintf(msg, len, "%s", m->peer_msg);
    pthread_mutex_unlock(&m->mu);
    return a;
}

static int b_peer_aborted(void *ctx, char *msg, size_t len)
{
    return poll_aborts(ctx, msg, len);
}

static void b_announce_abort(void *ctx, const char *msg)
{
    mpi_impl *m = ctx;
    pthread_mutex_lock(&m->mu);
    int first = !m->announced && !m->peer_abort;
    if (first) {
        m->announced = 1;
        snprintf(m->announce_msg, sizeof m->announce_msg, "%s", msg);
    }
    pthread_mutex_unlock(&m->mu);
    if (!first)
        return;
    for (int p = 0; p < m->size; p++)
        if (p != m->rank)
            MPI_Isend(m->announce_msg, (int)strlen(m->announce_msg) + 1, MPI_CHAR, p, TAG_ABORT, m->aborts,
                      &m->announce_reqs[p]);
}

/* Polls req until it completes, w says stop, a peer aborts, or w's timeout. An abandoned request
 * stays pending (MPI cannot cancel a collective); the run is ending then. */
static gs_boot_outcome wait_req(mpi_impl *m, MPI_Request *req, gs_boot_wait *w, const char *what, gs_error *err)
{
    double t0 = now_s();
    long nap_ns = 2000;
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            mpi_fail(err, rc, what);
            return GS_BOOT_FAILED;
        }
        if (flag)
            return GS_BOOT_DONE;
        if (w->stop && w->stop(w->arg))
            return GS_BOOT_STOPPED;
        if (poll_aborts(m, w->peer_msg, sizeof w->peer_msg))
            return GS_BOOT_PEER_ABORT;
        if (now_s() - t0 > w->timeout_s)
            return GS_BOOT_TIMEOUT;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 500000)
            nap_ns *= 2;
    }
}

/* Bytes as MPI counts: whole MPI_BYTE counts under 2 GiB. */
static int count_ok(size_t bytes, gs_error *err)
{
    if (bytes > INT_MAX) {
        gs_error_set(err, GS_ERR_RUNTIME, "MPI: a message of %zu bytes, expected under 2 GiB", bytes);
        return 0;
    }
    return 1;
}

static gs_status b_bcast(void *ctx, void *buf, size_t bytes, int root, gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_ERR_RUNTIME;
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, m->world);
    return rc == MPI_SUCCESS ? GS_OK : mpi_fail(err, rc, "MPI_Bcast");
}

static gs_status b_allgather(void *ctx, const void *send, size_t bytes, void *recv, gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_ERR_RUNTIME;
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->world);
    return rc == MPI_SUCCESS ? GS_OK : mpi_fail(err, rc, "MPI_Allgather");
}

static gs_status b_allgatherv(void *ctx, const void *send, size_t bytes, void *recv, const size_t *counts,
                              gs_error *err)
{
    mpi_impl *m = ctx;
    int *c = calloc((size_t)m->size, sizeof *c), *d = calloc((size_t)m->size, sizeof *d);
    gs_status st = GS_OK;
    if (!c || !d) {
        st = gs_error_set(err, GS_ERR_NOMEM, "MPI_Allgatherv: out of memory");
        goto out;
    }
    size_t at = 0;
    for (int p = 0; p < m->size; p++) {
        if (!count_ok(counts[p], err) || !count_ok(at, err)) {
            st = GS_ERR_RUNTIME;
            goto out;
        }
        c[p] = (int)counts[p];
        d[p] = (int)at;
        at += counts[p];
    }
    if (!count_ok(bytes, err)) {
        st = GS_ERR_RUNTIME;
        goto out;
    }
    int rc = MPI_Allgatherv(send, (int)bytes, MPI_BYTE, recv, c, d, MPI_BYTE, m->world);
    if (rc != MPI_SUCCESS)
        st = mpi_fail(err, rc, "MPI_Allgatherv");
out:
    free(c);
    free(d);
    return st;
}

static gs_status b_barrier(void *ctx, gs_error *err)
{
    mpi_impl *m = ctx;
    int rc = MPI_Barrier(m->world);
    return rc == MPI_SUCCESS ? GS_OK : mpi_fail(err, rc, "MPI_Barrier");
}

static gs_status b_group_split(void *ctx, int color, int key, void **group, gs_error *err)
{
    mpi_impl *m = ctx;
    *group = NULL;
    if (m->ngroups == m->capgroups) {
        size_t cap = m->capgroups ? 2 * m->capgroups : 8;
        MPI_Comm *g = realloc(m->groups, cap * sizeof *g);
        if (!g)
            return gs_error_set(err, GS_ERR_NOMEM, "MPI_Comm_split: out of memory");
        m->groups = g;
        m->capgroups = cap;
    }
    MPI_Comm c;
    int rc = MPI_Comm_split(m->world, color, key, &c);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Comm_split");
    m->groups[m->ngroups] = c;
    *group = &m->groups[m->ngroups++];
    return GS_OK;
}

static void b_group_free(void *ctx, void *group)
{
    (void)ctx, (void)group; /* the communicators are freed by gs_mpi_exec_agree */
}

static gs_boot_outcome b_group_allgather(void *ctx, void *group, const void *send, size_t bytes, void *recv,
                                         gs_boot_wait *w, gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_BOOT_FAILED;
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, *(MPI_Comm *)group, &req);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Iallgather");
        return GS_BOOT_FAILED;
    }
    return wait_req(m, &req, w, "MPI_Iallgather", err);
}

static gs_boot_outcome b_group_alltoall(void *ctx, void *group, const void *send, size_t bytes, void *recv,
                                        gs_boot_wait *w, gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_BOOT_FAILED;
    MPI_Request req;
    int rc = MPI_Ialltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, *(MPI_Comm *)group, &req);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Ialltoall");
        return GS_BOOT_FAILED;
    }
    return wait_req(m, &req, w, "MPI_Ialltoall", err);
}

static gs_boot_outcome b_group_bcast(void *ctx, void *group, void *buf, size_t bytes, int root, gs_boot_wait *w,
                                     gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_BOOT_FAILED;
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, *(MPI_Comm *)group, &req);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Ibcast");
        return GS_BOOT_FAILED;
    }
    return wait_req(m, &req, w, "MPI_Ibcast", err);
}

/* Frees the buffered sends that have completed (mu held). */
static void reap_sends(mpi_impl *m)
{
    for (pending_send **at = &m->sends; *at;) {
        int flag = 0;
        MPI_Test(&(*at)->req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            pending_send *done = *at;
            *at = done->next;
            free(done);
        } else {
            at = &(*at)->next;
        }
    }
}

static gs_status b_send(void *ctx, int peer, const void *buf, size_t bytes, gs_error *err)
{
    mpi_impl *m = ctx;
    if (!count_ok(bytes, err))
        return GS_ERR_RUNTIME;
    pending_send *p = malloc(sizeof *p + (bytes ? bytes : 1));
    if (!p)
        return gs_error_set(err, GS_ERR_NOMEM, "MPI send of %zu bytes: out of memory", bytes);
    memcpy(p->data, buf, bytes);
    pthread_mutex_lock(&m->mu);
    reap_sends(m);
    /* issued under the lock: sends to one peer leave in the order they were made */
    int rc = MPI_Isend(p->data, (int)bytes, MPI_BYTE, peer, TAG_P2P, m->p2p, &p->req);
    if (rc == MPI_SUCCESS) {
        p->next = m->sends;
        m->sends = p;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc != MPI_SUCCESS) {
        free(p);
        return mpi_fail(err, rc, "MPI_Isend");
    }
    return GS_OK;
}

static gs_boot_outcome b_recv(void *ctx, int peer, void *buf, size_t bytes, gs_boot_wait *w, gs_error *err)
{
    mpi_impl *m = ctx;
    double t0 = now_s();
    long nap_ns = 2000;
    for (;;) {
        int flag = 0;
        MPI_Message h;
        MPI_Status st;
        int rc = MPI_Improbe(peer, TAG_P2P, m->p2p, &flag, &h, &st);
        if (rc != MPI_SUCCESS) {
            mpi_fail(err, rc, "MPI_Improbe");
            return GS_BOOT_FAILED;
        }
        if (flag) {
            int n = 0;
            MPI_Get_count(&st, MPI_BYTE, &n);
            if ((size_t)n != bytes) {
                char one;
                void *sink = n > 0 ? malloc((size_t)n) : &one;
                MPI_Mrecv(sink ? sink : &one, sink ? n : 0, MPI_BYTE, &h, MPI_STATUS_IGNORE);
                if (sink != &one)
                    free(sink);
                gs_error_set(err, GS_ERR_RUNTIME, "got %d B", n);
                return GS_BOOT_FAILED;
            }
            rc = MPI_Mrecv(buf, n, MPI_BYTE, &h, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                mpi_fail(err, rc, "MPI_Mrecv");
                return GS_BOOT_FAILED;
            }
            return GS_BOOT_DONE;
        }
        if (w->stop && w->stop(w->arg))
            return GS_BOOT_STOPPED;
        if (poll_aborts(m, w->peer_msg, sizeof w->peer_msg))
            return GS_BOOT_PEER_ABORT;
        if (now_s() - t0 > w->timeout_s)
            return GS_BOOT_TIMEOUT;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 500000)
            nap_ns *= 2;
    }
}

static const char *thread_level_name(int level)
{
    return level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                                            : "MPI_THREAD_MULTIPLE";
}

static void impl_free(mpi_impl *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->announce_reqs);
    free(m->groups);
    free(m->hosts);
    free(m);
}

/* Where process p sits among the processes on its host (the same name in hosts), counted in rank
 * order; *procs gets how many there are. */
static int host_position(const mpi_impl *m, int p, int *procs)
{
    size_t w = sizeof m->host;
    int pos = 0;
    *procs = 0;
    for (int q = 0; q < m->size; q++)
        if (strncmp(m->hosts + (size_t)q * w, m->hosts + (size_t)p * w, w) == 0) {
            ++*procs;
            if (q < p)
                pos++;
        }
    return pos;
}

/* This host's name and where this process sits among the processes on it: the processes whose
 * MPI_Get_processor_name (or GRIDSTEP_HOST) is the same, counted in rank order. */
static gs_status local_rank(mpi_impl *m, gs_exec_boot *b, gs_error *err)
{
    size_t w = sizeof m->host;
    if (!(m->hosts = calloc((size_t)m->size, w)))
        return gs_error_set(err, GS_ERR_NOMEM, "MPI: out of memory for %d host names", m->size);
    gs_status st = b_allgather(m, m->host, w, m->hosts, err);
    if (st == GS_OK)
        b->local_rank = host_position(m, m->rank, &b->local_procs);
    return st;
}

const char *gs_mpi_exec_host(const gs_mpi_exec *me, int p, int *local_rank, int *local_procs)
{
    const mpi_impl *m = me->impl;
    if (!me->launched || !m || !m->hosts || p < 0 || p >= m->size)
        return NULL;
    *local_rank = host_position(m, p, local_procs);
    return m->hosts + (size_t)p * sizeof m->host;
}

gs_status gs_mpi_exec_begin(gs_mpi_exec *me, int *rank, gs_error *err)
{
    memset(me, 0, sizeof *me);
    *rank = launcher_rank();
    if (launcher_size() <= 1)
        return GS_OK;
    int provided = MPI_THREAD_SINGLE, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized)
        MPI_Query_thread(&provided);
    else if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return gs_error_set(err, GS_ERR_RUNTIME, "MPI_Init_thread failed");
    me->launched = 1;
    mpi_impl *m = calloc(1, sizeof *m);
    if (!m)
        return gs_error_set(err, GS_ERR_NOMEM, "MPI: out of memory");
    pthread_mutex_init(&m->mu, NULL);
    me->impl = m;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    *rank = m->rank;
    MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    MPI_Comm_dup(MPI_COMM_WORLD, &m->p2p);
    MPI_Comm_dup(MPI_COMM_WORLD, &m->aborts);
    if (!(m->announce_reqs = calloc((size_t)m->size, sizeof *m->announce_reqs)))
        return gs_error_set(err, GS_ERR_NOMEM, "MPI: out of memory");
    for (int p = 0; p < m->size; p++)
        m->announce_reqs[p] = MPI_REQUEST_NULL;
    int len = 0;
    MPI_Get_processor_name(m->host, &len);
    m->host[len < (int)sizeof m->host ? len : (int)sizeof m->host - 1] = '\0';
    /* a stand-in host name: rehearses a multi-host layout on one machine (tests, dry runs) */
    const char *fake = getenv("GRIDSTEP_HOST");
    if (fake && *fake)
        snprintf(m->host, sizeof m->host, "%s", fake);
    gs_exec_boot *b = &me->boot;
    b->proc = m->rank;
    b->procs = m->size;
    b->host = m->host;
    b->ctx = m;
    b->bcast = b_bcast;
    b->allgather = b_allgather;
    b->allgatherv = b_allgatherv;
    b->barrier = b_barrier;
    b->group_split = b_group_split;
    b->group_free = b_group_free;
    b->group_allgather = b_group_allgather;
    b->group_alltoall = b_group_alltoall;
    b->group_bcast = b_group_bcast;
    b->send = b_send;
    b->recv = b_recv;
    b->announce_abort = b_announce_abort;
    b->peer_aborted = b_peer_aborted;
    me->thread_level = provided;
    me->threads_ok = provided >= MPI_THREAD_MULTIPLE;
    return local_rank(m, b, err);
}

gs_status gs_mpi_exec_threads_error(const gs_mpi_exec *me, gs_error *err)
{
    return gs_error_set(err, GS_ERR_UNSUPPORTED,
                        "this MPI provides %s, but the host driver across processes issues MPI calls from several "
                        "stream threads and needs MPI_THREAD_MULTIPLE (build Open MPI or MPICH with thread support)",
                        thread_level_name(me->thread_level));
}

gs_status gs_mpi_exec_agree(gs_mpi_exec *me, gs_status local, const char *what, gs_error *err)
{
    if (!me->launched)
        return local;
    mpi_impl *m = me->impl;
    if (!m) /* out of memory in begin: no communicators of our own (every process says so) */
        return local;
    pthread_mutex_lock(&m->mu);
    int32_t announced = m->announced, *all_announced = calloc((size_t)m->size, sizeof *all_announced);
    pthread_mutex_unlock(&m->mu);
    if (!all_announced)
        MPI_Abort(MPI_COMM_WORLD, 1); /* cannot settle the announcements without knowing them */
    gs_status rc = gs__mpi_agree(m->world, local, what, err);
    /* settle the announcements: receive every one still on its way, then complete our own */
    MPI_Allgather(&announced, 1, MPI_INT32_T, all_announced, 1, MPI_INT32_T, m->world);
    int expect = 0;
    for (int p = 0; p < m->size; p++)
        if (p != m->rank && all_announced[p])
            expect++;
    free(all_announced);
    poll_aborts(m, NULL, 0);
    while (m->received < expect) {
        MPI_Message h;
        MPI_Status st;
        MPI_Mprobe(MPI_ANY_SOURCE, TAG_ABORT, m->aborts, &h, &st);
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        char *buf = malloc((size_t)(n > 0 ? n : 1));
        char one;
        MPI_Mrecv(buf ? buf : &one, buf ? n : 0, MPI_CHAR, &h, MPI_STATUS_IGNORE);
        free(buf);
        m->received++;
    }
    MPI_Waitall(m->size, m->announce_reqs, MPI_STATUSES_IGNORE);
    if (rc == GS_OK) {
        /* a clean run on every process: every buffered send has been received */
        pthread_mutex_lock(&m->mu);
        for (pending_send *p = m->sends, *n; p; p = n) {
            n = p->next;
            MPI_Wait(&p->req, MPI_STATUS_IGNORE);
            free(p);
        }
        m->sends = NULL;
        pthread_mutex_unlock(&m->mu);
        for (size_t i = 0; i < m->ngroups; i++)
            MPI_Comm_free(&m->groups[i]);
        MPI_Comm_free(&m->p2p);
        MPI_Comm_free(&m->aborts);
        MPI_Comm_free(&m->world);
        impl_free(m);
    }
    /* after a failure, sends nobody will receive and collectives abandoned mid-way stay pending:
     * their buffers and communicators are left to MPI_Finalize */
    me->impl = NULL;
    return rc;
}

gs_status gs_mpi_exec_end(gs_mpi_exec *me, const char *cmd, gs_status rc, gs_error *err)
{
    if (!me->launched)
        return rc;
    me->launched = 0;
    return gs__mpi_leave(cmd, rc, err);
}



#else /* !HAVE_MPI */

gs_status gs_mpi_exec_threads_error(const gs_mpi_exec *me, gs_error *err)
{
    (void)me;
    return gs_error_set(err, GS_ERR_UNSUPPORTED, "this gridstep was built without MPI");
}

gs_status gs_mpi_exec_begin(gs_mpi_exec *me, int *rank, gs_error *err)
{
    memset(me, 0, sizeof *me);
    *rank = launcher_rank();
    long n = launcher_size();
    if (n > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "started by an MPI launcher as one of %ld processes, but this gridstep was built "
                            "without MPI: install an MPI (apt-get install libopenmpi-dev), then reconfigure with "
                            "--with-mpi and rebuild; or run exec without mpirun/srun (every rank in one process)",
                            n);
    return GS_OK;
}

gs_status gs_mpi_exec_agree(gs_mpi_exec *me, gs_status local, const char *what, gs_error *err)
{
    (void)me, (void)what, (void)err;
    return local;
}

gs_status gs_mpi_exec_end(gs_mpi_exec *me, const char *cmd, gs_status rc, gs_error *err)
{
    (void)me, (void)cmd, (void)err;
    return rc;
}

const char *gs_mpi_exec_host(const gs_mpi_exec *me, int p, int *local_rank, int *local_procs)
{
    (void)me, (void)p, (void)local_rank, (void)local_procs;
    return NULL;
}

#endif
