/* The cuda driver: every rank is one GPU of this process (rank r on device r), each schedule
 * stream a non-blocking CUDA stream, dependencies cudaEventRecord / cudaStreamWaitEvent, event
 * times from CUDA events against a per-device base event, GEMMs through cuBLASLt (fp32 compute;
 * GRIDSTEP_CUDA_GEMM=tf32 selects TF32 tensor cores with fp32 accumulation), the other compute
 * ops kernels/cuda (attention, GRIDSTEP_CUDA_ATTENTION: by default (auto) cuBLAS strided-batched
 * GEMMs with row passes between them, kernels/cuda/attn_gemm_plan.c, in its flash variant (P
 * recomputed from each row's lse, scores in capped scratch) for scenarios with
 * strategy.flash_attention, and the attention kernels for calls that draw dropout masks: the
 * flash kernels, kernels/cuda/attention_flash.cu, or without flash attention the exact per-row
 * kernels that keep the probabilities; kernels selects those always, gemm the GEMMs always),
 * collectives and send/recv NCCL (one communicator per rank and group kind,
 * split from a world communicator; non-blocking communicators polled with the driver's timeout,
 * so a dead peer ends in ncclCommAbort and an error, never a hang).
 *
 * It is built as the module gridstep-cuda.so (dlopen'ed by `gridstep exec --driver cuda`; see
 * exec/driver_module.c), so the gridstep binary never links CUDA. The module exports one symbol,
 * gs_driver_cuda_module_abiN() (N = GS_DRIVER_ABI, exec/driver.h), returning this ops table; it carries its own copy of engine/status.c
 * and reaches the engine only through gs_driver_opts.group_of.
 *
 * Issue model: launch() runs the work function at once in the calling (rank) thread; the ops it
 * calls enqueue on the CUDA stream and return. The only host waits are upload/download, the
 * cross-entropy combine (the loss is a host double) and stream_sync, all polled with the timeout.
 * A failed CUDA / cuBLAS / NCCL call is recorded on its stream with the call, the rank and the
 * schedule event (event_begin) and aborts the driver. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#include "exec/driver.h"
#include "kernels/cuda/attn_gemm_plan.h"
#include "kernels/cuda/kernels_cuda.h"

#define GEMM_WORKSPACE_BYTES ((size_t)32 << 20)
#define EVENT_NAME_BYTES 96
#define PROGRESS_MARKS 32 /* per stream: the last launches' completion, for stall detection */

typedef struct deferred_free {
    struct deferred_free *next;
    void *p;
} deferred_free;

struct gs_drv_stream {
    struct gs_drv_stream *next_of_rank;
    gs_drv *d;
    uint64_t rank;
    int dev;
    gs_stream kind;
    cudaStream_t cs;
    void *workspace; /* cuBLASLt (and cuBLAS) workspace, GEMM_WORKSPACE_BYTES, on first GEMM */
    void *bf16_buf;  /* GRIDSTEP_CUDA_GEMM=bf16: the GEMM inputs cast to bf16, grown on demand */
    size_t bf16_cap; /* bytes */
    cublasHandle_t blas; /* cuBLAS bound to cs and workspace (GEMM attention), on first use */
    cudaEvent_t marks[PROGRESS_MARKS]; /* recorded after each launch, round robin */
    uint64_t nmarks;                   /* marks recorded so far */
    int failed;
    gs_error err;                 /* first failure of work issued here */
    char event[EVENT_NAME_BYTES]; /* the schedule event being issued ("" none) */
    struct gs_drv_event *armed;   /* arm_start: recorded at the next launch's first work */
};

struct gs_drv_event {
    cudaEvent_t ev; /* created at the first record, on the recording stream's device */
    int dev;
    uint64_t rank;
};

typedef struct rank_dev {
    int dev;
    pthread_mutex_t mu; /* recursive: guards this rank's NCCL calls, streams list, frees */
    ncclComm_t world;
    ncclComm_t comm[GS_GROUP_KIND_COUNT];
    cublasLtHandle_t lt;
    cudaStream_t setup;  /* allocation, zero-fill, base events */
    cudaEvent_t base;    /* the clock's base on this device */
    double base_host_s;  /* host monotonic time of base */
    double *loss_dev;    /* one double, device */
    double *loss_host;   /* one double, pinned */
    gs_drv_stream *streams;
    deferred_free *frees;
    int inited;
    gs_status init_rc;
    gs_error init_err;
} rank_dev;

struct gs_drv {
    gs_mesh mesh;
    double timeout_s;
    int tf32;
    int bf16; /* GRIDSTEP_CUDA_GEMM=bf16: the linear layers' GEMMs take bf16 inputs, fp32 accumulate */
    gs_attn_path_pref attn_pref; /* GRIDSTEP_CUDA_ATTENTION (gs_attn_path_gemm decides per call) */
    uint64_t world;
    rank_dev *r;
    ncclUniqueId id;
    const gs_driver_opts *opts;
    /* Across processes (opts->boot active): this process sets up and runs rank `local` alone, on
     * device boot->local_rank; the NCCL id comes from process 0 through the bootstrap.
     * UINT64_MAX: every rank here, rank r on device r. */
    uint64_t local;
    pthread_mutex_t mu; /* abort state, clock base */
    int aborted;
    gs_error abort_err;
};

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec t = {0, 20000}; /* 20 us */
    nanosleep(&t, NULL);
}

static const char *group_name(gs_group_kind k)
{
    static const char *const n[GS_GROUP_KIND_COUNT] = {"dp", "dp_intra", "dp_inter", "tp", "pp"};
    return (int)k < GS_GROUP_KIND_COUNT ? n[k] : "?";
}

static const char *stream_name(gs_stream k)
{
    static const char *const n[GS_STREAM_COUNT] = {"compute", "dp", "tp", "pp", "copy"};
    return (int)k < GS_STREAM_COUNT ? n[k] : "?";
}

/* ---- abort ---------------------------------------------------------------------------------- */

/* Aborts every communicator (each under its rank's lock, so no thread is inside a call on it). */
static void abort_comms(gs_drv *d)
{
    for (uint64_t i = 0; i < d->world; i++) {
        rank_dev *r = &d->r[i];
        if (!r->inited)
            continue;
        pthread_mutex_lock(&r->mu);
        cudaSetDevice(r->dev);
        for (int k = 0; k < GS_GROUP_KIND_COUNT; k++)
            if (r->comm[k]) {
                ncclCommAbort(r->comm[k]);
                r->comm[k] = NULL;
            }
        if (r->world) {
            ncclCommAbort(r->world);
            r->world = NULL;
        }
        pthread_mutex_unlock(&r->mu);
    }
}

static void cuda_abort(gs_drv *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    int first = !d->aborted;
    if (first) {
        d->aborted = 1;
        gs_error_set(&d->abort_err, GS_ERR_RUNTIME, "%s", msg);
    }
    pthread_mutex_unlock(&d->mu);
    if (first)
        abort_comms(d);
}

static int cuda_aborted(gs_drv *d, gs_error *err)
{
    pthread_mutex_lock(&d->mu);
    int a = d->aborted;
    if (a && err)
        *err = d->abort_err;
    pthread_mutex_unlock(&d->mu);
    return a;
}

/* Records the first failure of work issued to s (the call, the rank, the event) and aborts. */
static void fail_stream(gs_drv_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_stream(gs_drv_stream *s, const char *fmt, ...)
{
    char what[GS_ERROR_MSG_BYTES / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!s->failed) {
        s->failed = 1;
        gs_error_set(&s->err, GS_ERR_RUNTIME, "rank %" PRIu64 "%s%s: %s", s->rank, s->event[0] ? ": event " : "",
                     s->event, what);
    }
    cuda_abort(s->d, s->err.msg);
}

#define CU_OK(s, call)                                                                                           \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess)                                                                                   \
            fail_stream((s), "%s: %s", #call, cudaGetErrorString(e_));                                           \
    } while (0)

static gs_status cuda_event_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err);

/* The stream for work about to be enqueued: the first work of a launch first records the event
 * arm_start gave it, so the event's time is when the device began this launch's work, after
 * whatever the host spent before enqueuing it (driver.h: arm_start). */
static cudaStream_t work_on(gs_drv_stream *s)
{
    if (s->armed) {
        gs_drv_event *e = s->armed;
        s->armed = NULL;
        gs_error err;
        gs_error_init(&err);
        if (cuda_event_record(s->d, s, e, &err) != GS_OK)
            fail_stream(s, "%s", err.msg);
    }
    return s->cs;
}

/* Kernel launchers return a cudaError_t as int. */
static void kernel_ok(gs_drv_stream *s, const char *name, int rc)
{
    if (rc != 0)
        fail_stream(s, "kernel %s: %s", name, cudaGetErrorString((cudaError_t)rc));
}

/* ---- polling with the timeout --------------------------------------------------------------- */

/* The async error of rank r's communicators (ncclSuccess when none; r->mu held). */
static ncclResult_t comms_error(rank_dev *r, const char **which)
{
    for (int k = 0; k <= GS_GROUP_KIND_COUNT; k++) {
        ncclComm_t c = k < GS_GROUP_KIND_COUNT ? r->comm[k] : r->world;
        ncclResult_t st = ncclSuccess;
        if (c && ncclCommGetAsyncError(c, &st) == ncclSuccess && st != ncclSuccess && st != ncclInProgress) {
            *which = k < GS_GROUP_KIND_COUNT ? group_name((gs_group_kind)k) : "world";
            return st;
        }
    }
    return ncclSuccess;
}

/* Waits until cs has drained, polling the rank's NCCL errors; a timeout or an NCCL error
 * aborts everyone. After an abort it still waits (up to the timeout) for the stream to drain so
 * that no kernel outlives its buffers, then returns the abort's error. */
/* How many of s's launches have completed (a lower bound from the newest completed mark). */
static uint64_t progress_of(const gs_drv_stream *s)
{
    if (!s)
        return 0;
    uint64_t lo = s->nmarks > PROGRESS_MARKS ? s->nmarks - PROGRESS_MARKS : 0;
    for (uint64_t i = s->nmarks; i > lo; i--)
        if (cudaEventQuery(s->marks[(i - 1) % PROGRESS_MARKS]) == cudaSuccess)
            return i;
    return lo;
}

/* The timeout counts from the last progress: a launch of s (when given) completing. */
static gs_status poll_stream(gs_drv *d, rank_dev *r, uint64_t rank, cudaStream_t cs, const gs_drv_stream *s,
                             const char *what, gs_error *err)
{
    double t0 = mono_s(), t_abort = -1;
    uint64_t seen = progress_of(s);
    for (;;) {
        cudaError_t q = cudaStreamQuery(cs);
        int ab = cuda_aborted(d, NULL);
        if (q == cudaSuccess) {
            if (ab) {
                if (err)
                    cuda_aborted(d, err);
                return GS_ERR_RUNTIME;
            }
            return GS_OK;
        }
        if (q != cudaErrorNotReady) {
            char msg[GS_ERROR_MSG_BYTES];
            snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: cudaStreamQuery: %s", rank, what, cudaGetErrorString(q));
            cuda_abort(d, msg);
            return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
        }
        double now = mono_s();
        uint64_t p = progress_of(s);
        if (p > seen) {
            seen = p;
            t0 = now;
        }
        if (ab) {
            if (t_abort < 0)
                t_abort = now;
            if (now - t_abort > d->timeout_s) {
                cuda_aborted(d, err);
                return GS_ERR_RUNTIME;
            }
        } else {
            const char *which = NULL;
            pthread_mutex_lock(&r->mu);
            ncclResult_t st = comms_error(r, &which);
            pthread_mutex_unlock(&r->mu);
            char msg[GS_ERROR_MSG_BYTES];
            msg[0] = 0;
            if (st != ncclSuccess)
                snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: NCCL error on the %s communicator: %s", rank, what,
                         which, ncclGetErrorString(st));
            else if (now - t0 > d->timeout_s)
                snprintf(msg, sizeof msg,
                         "rank %" PRIu64 ": %s: timed out: no progress for %g s (a collective or a peer did not finish); "
                         "communicators aborted",
                         rank, what, d->timeout_s);
            if (msg[0]) {
                cuda_abort(d, msg);
                t_abort = now;
            }
        }
        nap();
    }
}

/* Waits for a non-blocking communicator's pending call (init, split, group end). */
static gs_status nccl_wait(gs_drv *d, rank_dev *r, ncclComm_t c, uint64_t rank, const char *what, gs_error *err)
{
    double t0 = mono_s();
    for (;;) {
        ncclResult_t st = ncclInProgress;
        pthread_mutex_lock(&r->mu);
        ncclResult_t q = ncclSuccess;
        int gone = cuda_aborted(d, NULL);
        if (!gone)
            q = ncclCommGetAsyncError(c, &st);
        pthread_mutex_unlock(&r->mu);
        if (gone) {
            gs_error e;
            cuda_aborted(d, &e);
            return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": %s: stopped: %s", rank, what, e.msg);
        }
        if (q != ncclSuccess)
            st = q;
        if (st == ncclSuccess)
            return GS_OK;
        char msg[GS_ERROR_MSG_BYTES];
        msg[0] = 0;
        if (st != ncclInProgress)
            snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: %s (%s)", rank, what, ncclGetErrorString(st),
                     ncclGetLastError(c));
        else if (mono_s() - t0 > d->timeout_s)
            snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: timed out after %g s; communicators aborted", rank, what,
                     d->timeout_s);
        if (msg[0]) {
            cuda_abort(d, msg);
            return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
        }
        nap();
    }
}

/* ---- lifetime ------------------------------------------------------------------------------- */

static void release_frees(rank_dev *r)
{
    for (deferred_free *f = r->frees, *n; f; f = n) {
        n = f->next;
        cudaFreeAsync(f->p, r->setup);
        free(f);
    }
    r->frees = NULL;
}

/* Finalizes a non-blocking communicator (polled up to the timeout; aborted past it), then
 * destroys it. */
static void comm_release(gs_drv *d, ncclComm_t c)
{
    ncclResult_t st = ncclCommFinalize(c);
    double t0 = mono_s();
    while (st == ncclInProgress && mono_s() - t0 < d->timeout_s) {
        nap();
        if (ncclCommGetAsyncError(c, &st) != ncclSuccess)
            break;
    }
    if (st == ncclSuccess)
        ncclCommDestroy(c);
    else
        ncclCommAbort(c);
}

static void cuda_close(gs_drv *d)
{
    if (!d)
        return;
    for (uint64_t i = 0; i < d->world; i++) {
        rank_dev *r = &d->r[i];
        if (!r->inited)
            continue;
        cudaSetDevice(r->dev);
        for (gs_drv_stream *s = r->streams; s; s = s->next_of_rank)
            cudaStreamSynchronize(s->cs);
        release_frees(r);
        if (r->setup)
            cudaStreamSynchronize(r->setup);
        for (int k = 0; k <= GS_GROUP_KIND_COUNT; k++) {
            ncclComm_t *c = k < GS_GROUP_KIND_COUNT ? &r->comm[k] : &r->world;
            if (*c)
                comm_release(d, *c);
            *c = NULL;
        }
        if (r->lt)
            cublasLtDestroy(r->lt);
        if (r->loss_dev)
            cudaFree(r->loss_dev);
        if (r->loss_host)
            cudaFreeHost(r->loss_host);
        if (r->base)
            cudaEventDestroy(r->base);
        if (r->setup)
            cudaStreamDestroy(r->setup);
    }
    for (uint64_t i = 0; i < d->world; i++)
        pthread_mutex_destroy(&d->r[i].mu);
    pthread_mutex_destroy(&d->mu);
    free(d->r);
    free(d);
}

/* The number of processes a launcher started (1 when none): the variables cli/mpi_exec.c reads
 * (srun's SLURM_STEP_NUM_TASKS, set inside a job step only: SLURM_NTASKS is set in a batch
 * script's own shell too, where one gridstep is one process with every GPU of the node). */
static long launcher_size(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) {
            *var = vars[i];
            return atol(v);
        }
    }
    return 1;
}

/* Records this device's clock base: a CUDA event and the host time it completed. */
static cudaError_t rebase(rank_dev *r)
{
    cudaError_t e = cudaEventRecord(r->base, r->setup);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(r->base);
    r->base_host_s = mono_s();
    return e;
}

typedef struct init_job {
    gs_drv *d;
    uint64_t rank;
} init_job;

#define INIT_CU(call)                                                                                            \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) {                                                                                 \
            r->init_rc = gs_error_set(&r->init_err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 " (device %d): %s: %s", \
                                      j->rank, r->dev, #call, cudaGetErrorString(e_));                           \
            goto out;                                                                                            \
        }                                                                                                        \
    } while (0)

/* One rank's set-up, in its own thread (as nccl-tests does): device, streams, cuBLASLt, the world
 * communicator from the shared unique id, one split per group kind, p2p connections to the
 * pipeline neighbours (so no later send/recv blocks the issuing thread in a connection). */
static void *init_rank(void *arg)
{
    init_job *j = arg;
    gs_drv *d = j->d;
    rank_dev *r = &d->r[j->rank];
    gs_error *err = &r->init_err;
    float *probe = NULL;
    INIT_CU(cudaSetDevice(r->dev));
    INIT_CU(cudaStreamCreateWithFlags(&r->setup, cudaStreamNonBlocking));
    INIT_CU(cudaEventCreate(&r->base));
    INIT_CU(cudaMalloc((void **)&r->loss_dev, sizeof(double)));
    INIT_CU(cudaMallocHost((void **)&r->loss_host, sizeof(double)));
    INIT_CU(cudaMalloc((void **)&probe, 4 * sizeof(float)));
    cublasStatus_t bs = cublasLtCreate(&r->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": cublasLtCreate: %s", j->rank,
                                  cublasLtGetStatusString(bs));
        goto out;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t nr = ncclCommInitRankConfig(&r->world, (int)d->world, d->id, (int)j->rank, &cfg);
    if (nr != ncclSuccess && nr != ncclInProgress) {
        r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": ncclCommInitRankConfig: %s",
                                  j->rank, ncclGetErrorString(nr));
        goto out;
    }
    r->inited = 1; /* from here on abort_comms may touch it */
    if ((r->init_rc = nccl_wait(d, r, r->world, j->rank, "ncclCommInitRankConfig (world)", err)) != GS_OK)
        goto out;
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++) {
        uint64_t size = 0;
        uint64_t color = d->opts->group_of(&d->mesh, (gs_group_kind)k, j->rank, &size);
        char what[96];
        snprintf(what, sizeof what, "ncclCommSplit (%s group %" PRIu64 ")", group_name((gs_group_kind)k), color);
        pthread_mutex_lock(&r->mu);
        nr = ncclCommSplit(r->world, (int)color, (int)j->rank, &r->comm[k], &cfg);
        pthread_mutex_unlock(&r->mu);
        if (nr != ncclSuccess && nr != ncclInProgress) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": %s: %s", j->rank, what,
                                      ncclGetErrorString(nr));
            goto out;
        }
        /* a non-blocking split completes on the parent (NVIDIA/nccl#1472): the new
         * communicator is filled in when the parent leaves ncclInProgress */
        if ((r->init_rc = nccl_wait(d, r, r->world, j->rank, what, err)) != GS_OK)
            goto out;
        if (!r->comm[k]) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": %s gave no communicator",
                                      j->rank, what);
            goto out;
        }
        if ((r->init_rc = nccl_wait(d, r, r->comm[k], j->rank, what, err)) != GS_OK)
            goto out;
        int count = 0;
        if (ncclCommCount(r->comm[k], &count) != ncclSuccess || (uint64_t)count != size) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME,
                                      "cuda driver: rank %" PRIu64 ": %s has %d members, the mesh says %" PRIu64,
                                      j->rank, what, count, size);
            goto out;
        }
    }
    /* pipeline neighbours (ring order, so interleaved schedules' wrap-around is connected too) */
    uint64_t pp = d->mesh.size[GS_DIM_PP];
    if (pp > 1) {
        uint64_t st = d->mesh.stride[GS_DIM_PP], stage = (j->rank / st) % pp; /* gs_mesh_rank_coords */
        uint64_t next = j->rank - stage * st + ((stage + 1) % pp) * st;
        uint64_t prev = j->rank - stage * st + ((stage + pp - 1) % pp) * st;
        pthread_mutex_lock(&r->mu);
        ncclGroupStart();
        ncclSend(probe, 1, ncclFloat, (int)next, r->world, r->setup);
        ncclRecv(probe + 1, 1, ncclFloat, (int)prev, r->world, r->setup);
        ncclSend(probe + 2, 1, ncclFloat, (int)prev, r->world, r->setup);
        ncclRecv(probe + 3, 1, ncclFloat, (int)next, r->world, r->setup);
        nr = ncclGroupEnd();
        pthread_mutex_unlock(&r->mu);
        if (nr != ncclSuccess && nr != ncclInProgress) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": p2p warm-up: %s", j->rank,
                                      ncclGetErrorString(nr));
            goto out;
        }
        if ((r->init_rc = nccl_wait(d, r, r->world, j->rank, "p2p warm-up with the pipeline neighbours", err)) !=
                GS_OK ||
            (r->init_rc = poll_stream(d, r, j->rank, r->setup, NULL, "p2p warm-up", err)) != GS_OK)
            goto out;
    }
    /* TP ring neighbours, when tp_comm_overlap's ring all-gather will send around them: connected
     * here too, not inside the first step's timed events */
    int tpn = 0, tpos = 0;
    if (d->opts->tp_ring_p2p && r->comm[GS_GROUP_TP] && ncclCommCount(r->comm[GS_GROUP_TP], &tpn) == ncclSuccess &&
        tpn > 1 && ncclCommUserRank(r->comm[GS_GROUP_TP], &tpos) == ncclSuccess) {
        ncclComm_t tc = r->comm[GS_GROUP_TP];
        pthread_mutex_lock(&r->mu);
        ncclGroupStart();
        ncclSend(probe, 1, ncclFloat, (tpos + 1) % tpn, tc, r->setup);
        ncclRecv(probe + 1, 1, ncclFloat, (tpos + tpn - 1) % tpn, tc, r->setup);
        nr = ncclGroupEnd();
        pthread_mutex_unlock(&r->mu);
        if (nr != ncclSuccess && nr != ncclInProgress) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": TP ring warm-up: %s",
                                      j->rank, ncclGetErrorString(nr));
            goto out;
        }
        if ((r->init_rc = nccl_wait(d, r, tc, j->rank, "p2p warm-up with the TP ring neighbours", err)) != GS_OK ||
            (r->init_rc = poll_stream(d, r, j->rank, r->setup, NULL, "TP ring warm-up", err)) != GS_OK)
            goto out;
    }
    INIT_CU(rebase(r));
out:
    if (probe) {
        cudaStreamSynchronize(r->setup);
        cudaFree(probe);
    }
    if (r->init_rc != GS_OK)
        cuda_abort(d, r->init_err.msg);
    return NULL;
}

/* Across processes, every process's outcome of its local checks: the lowest failed process's
 * error for all (so that no process waits for the NCCL id of one that gave up). */
static gs_status agree_local(const gs_exec_boot *b, gs_status rc, gs_error *err)
{
    gs_error *all = calloc((size_t)b->procs, sizeof *all);
    gs_error mine = *err, e2;
    gs_error_init(&e2);
    mine.status = rc;
    if (!all)
        return gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
    gs_status st = b->allgather(b->ctx, &mine, sizeof mine, all, &e2);
    if (st != GS_OK)
        *err = e2;
    for (int p = 0; st == GS_OK && p < b->procs; p++)
        if (all[p].status != GS_OK) {
            st = all[p].status;
            *err = all[p];
        }
    free(all);
    return st;
}

/* The GEMM attention path's largest scratch (bytes) over rank `rank`'s attention events
 * (kernels/cuda/attn_gemm_plan.c, the shapes the calls will have: the backward's dP/dS, or with
 * flash attention the scores and P of either direction); 0 when the schedule or the heads per
 * rank are not known. */
static gs_status attn_scratch_bytes(const gs_driver_opts *opts, uint64_t rank, uint64_t *bytes, gs_error *err)
{
    *bytes = 0;
    if (!opts->sch || !opts->attn_heads || !opts->attn_kv_heads)
        return GS_OK;
    for (size_t k = 0; k < opts->sch->nranks; k++) /* engine code is out of this module's reach: no find_rank */
        if (opts->sch->ranks[k].rank == rank) {
            gs_status rc =
                opts->attn_flash
                    ? gs_attn_gemm_flash_max_scratch_bytes(&opts->sch->ranks[k], (size_t)opts->attn_heads,
                                                           (size_t)opts->attn_kv_heads, GS_ATTN_GEMM_SCRATCH_BYTES,
                                                           bytes, err)
                    : gs_attn_gemm_max_scratch_bytes(&opts->sch->ranks[k], (size_t)opts->attn_heads,
                                                     (size_t)opts->attn_kv_heads, GS_ATTN_GEMM_SCRATCH_BYTES, bytes,
                                                     err);
            if (rc != GS_OK)
                gs_error_prefix(err, "cuda driver: rank %" PRIu64, rank);
            return rc;
        }
    return GS_OK;
}

/* GRIDSTEP_CUDA_GEMM=bf16: the most bytes one GEMM's cast inputs take (cast_inputs), bounded over
 * the rank's schedule by its GEMM events (2 B x (m k + k n + m n) covers the forward's and either
 * backward product's pair, + 256 for the second copy's alignment); 0 when the schedule is not
 * known. */
static uint64_t bf16_scratch_bytes(const gs_driver_opts *opts, uint64_t rank)
{
    uint64_t most = 0;
    if (!opts->sch)
        return 0;
    for (size_t k = 0; k < opts->sch->nranks; k++)
        if (opts->sch->ranks[k].rank == rank)
            for (size_t e = 0; e < opts->sch->ranks[k].nevents; e++) {
                const gs_event *ev = &opts->sch->ranks[k].events[e];
                uint64_t m = ev->gemm_m, n = ev->gemm_n, kk = ev->gemm_k;
                if (ev->kind != GS_EV_COMPUTE || !m || ev->gemm_batch > 1)
                    continue;
                uint64_t b = 2 * (m * kk + kk * n + m * n) + 256;
                most = b > most ? b : most;
            }
    return most;
}

/* The NCCL id of the job: process 0's, broadcast (with whether process 0 could make one). */
typedef struct id_msg {
    int32_t ok;
    ncclUniqueId id;
} id_msg;

static gs_status cuda_open(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err)
{
    *out = NULL;
    const gs_exec_boot *boot = opts && gs_boot_active(opts->boot) ? opts->boot : NULL;
    const char *var = NULL;
    long procs = launcher_size(&var);
    if (procs > 1 && !boot && !(opts && opts->process_local))
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "cuda driver: started as one of %ld processes (%s=%ld) without the process bootstrap: "
                            "run `gridstep exec --driver cuda` under mpirun/srun with a gridstep built with MPI "
                            "(configure --with-mpi), or without a launcher on one node (a thread per GPU)",
                            procs, var, procs);
    if (!opts || !opts->group_of)
        return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: opened without the group map (gs_driver_opts.group_of)");
    /* the environment's choices, refused (below, where every process of a job agrees on failure)
     * when unknown */
    gs_status rc = GS_OK;
    gs_attn_path_pref attn_pref = GS_ATTN_PATH_AUTO;
    if (gs_attn_path_parse(getenv("GRIDSTEP_CUDA_ATTENTION"), &attn_pref, err) != GS_OK) {
        gs_error_prefix(err, "cuda driver");
        rc = GS_ERR_INPUT;
    }
    int attn_gemm = attn_pref != GS_ATTN_PATH_KERNELS; /* the GEMM path may run */
    const char *gm = getenv("GRIDSTEP_CUDA_GEMM");
    int gemm_tf32 = gm && strcmp(gm, "tf32") == 0, gemm_bf16 = gm && strcmp(gm, "bf16") == 0;
    if (!(gm && *gm))
        gemm_bf16 = opts && opts->gemm_bf16; /* the scenario's precision decides (mixed bf16) */
    if (rc == GS_OK && gm && *gm && !gemm_tf32 && !gemm_bf16 && strcmp(gm, "fp32") != 0)
        rc = gs_error_set(err, GS_ERR_INPUT, "cuda driver: GRIDSTEP_CUDA_GEMM is '%s', expected fp32, tf32 or bf16",
                          gm);
    if (boot && (uint64_t)boot->procs != mesh->world)
        return gs_error_set(err, GS_ERR_INPUT, "cuda driver: the scenario has %" PRIu64 " ranks, but %d processes were "
                            "started (one rank per process)", mesh->world, boot->procs);
    /* the ranks this process sets up, and their devices */
    uint64_t lo = boot ? (uint64_t)boot->proc : 0, hi = boot ? lo + 1 : mesh->world;
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (rc != GS_OK)
        ; /* the environment's error */
    else if (ce != cudaSuccess)
        rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: cudaGetDeviceCount: %s (no GPU or no NVIDIA driver here)",
                          cudaGetErrorString(ce));
    else if (!boot && (uint64_t)ndev < mesh->world)
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "cuda driver: the scenario has %" PRIu64 " ranks (" GS_GRID_FMT
                          "), one GPU each, but this machine shows %d GPU%s",
                          mesh->world, mesh->size[GS_DIM_DP], mesh->size[GS_DIM_PP], mesh->size[GS_DIM_TP], ndev,
                          ndev == 1 ? "" : "s");
    else if (boot && ndev < boot->local_procs)
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "cuda driver: rank %d: host %s runs %d ranks of the job (one GPU each, by local rank), but "
                          "shows %d GPU%s",
                          boot->proc, boot->host ? boot->host : "?", boot->local_procs, ndev, ndev == 1 ? "" : "s");
    /* the memory ledger's peak per rank, plus on the GEMM attention path the largest dP/dS scratch
     * a backward attention call of the rank's schedule allocates, and with bf16 GEMM inputs the
     * largest pair of cast inputs (both cudaMallocAsync, outside the ledger), vs the device's free
     * memory */
    for (uint64_t i = lo; rc == GS_OK && opts->rank_peak_bytes && i < hi; i++) {
        size_t freeb = 0, total = 0;
        uint64_t scratch = 0;
        int dev = boot ? boot->local_rank : (int)i;
        /* auto runs the kernels for every call of a model with attention dropout: no scratch */
        int gemm_may_run = attn_gemm && !(attn_pref == GS_ATTN_PATH_AUTO && opts->attn_dropout);
        if (gemm_may_run && (rc = attn_scratch_bytes(opts, i, &scratch, err)) != GS_OK)
            break;
        /* auto runs the kernels for a call whose one kv head exceeds the cap, so the calls it
         * runs on the GEMM path take the cap at most */
        if (attn_pref == GS_ATTN_PATH_AUTO && scratch > GS_ATTN_GEMM_SCRATCH_BYTES)
            scratch = GS_ATTN_GEMM_SCRATCH_BYTES;
        if (gemm_bf16)
            scratch += bf16_scratch_bytes(opts, i);
        uint64_t need = opts->rank_peak_bytes[i] > UINT64_MAX - scratch ? UINT64_MAX
                                                                           : opts->rank_peak_bytes[i] + scratch;
        if ((ce = cudaSetDevice(dev)) != cudaSuccess || (ce = cudaMemGetInfo(&freeb, &total)) != cudaSuccess)
            rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: device %d: cudaMemGetInfo: %s", dev,
                              cudaGetErrorString(ce));
        else if (need > freeb && scratch)
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "cuda driver: rank %" PRIu64 " needs the memory ledger's peak %.3f GiB (fp32) + "
                              "scratch %.3f GiB (the GEMM attention path's scores, none with GRIDSTEP_CUDA_ATTENTION=kernels; "
                              "bf16 GEMM inputs: their casts) > "
                              "free %.3f GiB on device %d (of %.3f GiB); refused before allocating",
                              i, (double)opts->rank_peak_bytes[i] / 1073741824.0, (double)scratch / 1073741824.0,
                              (double)freeb / 1073741824.0, dev, (double)total / 1073741824.0);
        else if (need > freeb)
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "cuda driver: rank %" PRIu64 " needs %.3f GiB (the memory ledger's peak, fp32) but "
                              "device %d has %.3f GiB free of %.3f GiB; refused before allocating",
                              i, (double)opts->rank_peak_bytes[i] / 1073741824.0, dev, (double)freeb / 1073741824.0,
                              (double)total / 1073741824.0);
    }
    if (boot)
        rc = agree_local(boot, rc, err);
    if (rc != GS_OK)
        return rc;
    gs_drv *d = calloc(1, sizeof *d);
    pthread_t *th = NULL;
    init_job *jobs = NULL;
    int *started = NULL;
    if (!d)
        return gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
    d->mesh = *mesh;
    d->world = mesh->world;
    d->opts = opts;
    d->local = boot ? lo : UINT64_MAX;
    d->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : 60.0;
    d->tf32 = gemm_tf32;
    d->bf16 = gemm_bf16;
    d->attn_pref = attn_pref;
    pthread_mutex_init(&d->mu, NULL);
    gs_error_init(&d->abort_err);
    d->r = calloc(d->world, sizeof *d->r);
    th = calloc(d->world, sizeof *th);
    jobs = calloc(d->world, sizeof *jobs);
    started = calloc(d->world, sizeof *started);
    if (!d->r || !th || !jobs || !started) {
        free(d->r);
        d->r = NULL;
        d->world = 0;
        rc = gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
        goto out;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    for (uint64_t i = 0; i < d->world; i++) {
        d->r[i].dev = boot ? (i == lo ? boot->local_rank : -1) : (int)i;
        pthread_mutex_init(&d->r[i].mu, &ma);
        gs_error_init(&d->r[i].init_err);
    }
    pthread_mutexattr_destroy(&ma);
    /* collectives connect at init, not in the middle of a step's issue */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    if (!boot) {
        ncclResult_t nr = ncclGetUniqueId(&d->id);
        if (nr != ncclSuccess) {
            rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: ncclGetUniqueId: %s", ncclGetErrorString(nr));
            goto out;
        }
    } else {
        /* process 0 makes the id; every process gets it (or process 0's failure) */
        id_msg m;
        memset(&m, 0, sizeof m);
        if (boot->proc == 0) {
            ncclResult_t nr = ncclGetUniqueId(&m.id);
            m.ok = nr == ncclSuccess;
            if (!m.ok)
                gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank 0: ncclGetUniqueId: %s", ncclGetErrorString(nr));
        }
        if ((rc = boot->bcast(boot->ctx, &m, sizeof m, 0, err)) != GS_OK)
            goto out;
        if (!m.ok) {
            rc = boot->proc == 0 ? GS_ERR_RUNTIME
                                 : gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank 0 could not make the NCCL id");
            goto out;
        }
        d->id = m.id;
    }
    for (uint64_t i = lo; i < hi; i++) {
        jobs[i] = (init_job){d, i};
        started[i] = pthread_create(&th[i], NULL, init_rank, &jobs[i]) == 0;
        if (!started[i]) {
            rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: cannot start the set-up thread of rank %" PRIu64, i);
            cuda_abort(d, err->msg);
        }
    }
    for (uint64_t i = lo; i < hi; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    for (uint64_t i = lo; i < hi && rc == GS_OK; i++)
        if (d->r[i].init_rc != GS_OK) {
            rc = d->r[i].init_rc;
            *err = d->r[i].init_err;
        }
    if (rc == GS_OK && cuda_aborted(d, err))
        rc = GS_ERR_RUNTIME;
out:
    free(th);
    free(jobs);
    free(started);
    if (rc != GS_OK) {
        cuda_close(d);
        return rc;
    }
    *out = d;
    return GS_OK;
}

/* ---- memory --------------------------------------------------------------------------------- */

static void *cuda_alloc(gs_drv *d, uint64_t rank, uint64_t bytes)
{
    if (rank >= d->world)
        return NULL;
    rank_dev *r = &d->r[rank];
    void *p = NULL;
    if (cudaSetDevice(r->dev) != cudaSuccess)
        return NULL;
    size_t n = bytes ? (size_t)bytes : 4;
    /* stream-ordered: no device-wide synchronization that could stall NCCL kernels */
    if (cudaMallocAsync(&p, n, r->setup) != cudaSuccess)
        return NULL;
    if (cudaMemsetAsync(p, 0, n, r->setup) != cudaSuccess || cudaStreamSynchronize(r->setup) != cudaSuccess) {
        cudaFreeAsync(p, r->setup);
        cudaStreamSynchronize(r->setup);
        return NULL;
    }
    return p;
}

/* Deferred until every stream of the rank is idle (work issued before may still read p). */
static void cuda_free(gs_drv *d, uint64_t rank, void *p)
{
    if (!p || rank >= d->world)
        return;
    rank_dev *r = &d->r[rank];
    deferred_free *f = malloc(sizeof *f);
    pthread_mutex_lock(&r->mu);
    if (f) {
        f->p = p;
        f->next = r->frees;
        r->frees = f;
    } else {
        /* no memory to remember it: wait for the rank's streams and free now */
        cudaSetDevice(r->dev);
        for (gs_drv_stream *s = r->streams; s; s = s->next_of_rank)
            cudaStreamSynchronize(s->cs);
        cudaFreeAsync(p, r->setup);
    }
    pthread_mutex_unlock(&r->mu);
}

static void cuda_copy_kind(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes,
                           enum cudaMemcpyKind kind, int wait)
{
    if (!bytes || dst == src)
        return;
    CU_OK(s, cudaSetDevice(s->dev));
    CU_OK(s, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, work_on(s)));
    if (wait) {
        gs_error e;
        gs_error_init(&e);
        if (poll_stream(d, &d->r[s->rank], s->rank, s->cs, s, kind == cudaMemcpyHostToDevice ? "upload" : "download",
                        &e) != GS_OK)
            fail_stream(s, "%s", e.msg);
    }
}

static void cuda_upload(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes)
{
    cuda_copy_kind(d, s, dst, src, bytes, cudaMemcpyHostToDevice, 1);
}

static void cuda_download(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes)
{
    cuda_copy_kind(d, s, dst, src, bytes, cudaMemcpyDeviceToHost, 1);
}

static void cuda_copy(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes)
{
    cuda_copy_kind(d, s, dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
}

static void cuda_fill(gs_drv *d, gs_drv_stream *s, float *dst, float value, size_t n)
{
    (void)d;
    CU_OK(s, cudaSetDevice(s->dev));
    kernel_ok(s, "fill", gs_cu_fill(work_on(s), dst, value, n));
}

/* ---- streams, events, clock ----------------------------------------------------------------- */

static cublasStatus_t blas_create(gs_drv_stream *s, const char **call);
static void cuda_stream_destroy(gs_drv *d, gs_drv_stream *s);

static gs_status cuda_stream_create(gs_drv *d, uint64_t rank, gs_stream kind, gs_drv_stream **out, gs_error *err)
{
    *out = NULL;
    if (rank >= d->world)
        return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: no rank %" PRIu64, rank);
    rank_dev *r = &d->r[rank];
    gs_drv_stream *s = calloc(1, sizeof *s);
    if (!s)
        return gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
    s->d = d;
    s->rank = rank;
    s->dev = r->dev;
    s->kind = kind;
    gs_error_init(&s->err);
    cudaError_t e = cudaSetDevice(r->dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s->cs, cudaStreamNonBlocking);
    for (int i = 0; i < PROGRESS_MARKS && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&s->marks[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
        for (int i = 0; i < PROGRESS_MARKS; i++)
            if (s->marks[i])
                cudaEventDestroy(s->marks[i]);
        if (s->cs)
            cudaStreamDestroy(s->cs);
        free(s);
        return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 " stream %s: cudaStreamCreateWithFlags: %s",
                            rank, stream_name(kind), cudaGetErrorString(e));
    }
    pthread_mutex_lock(&r->mu);
    s->next_of_rank = r->streams;
    r->streams = s;
    pthread_mutex_unlock(&r->mu);
    const char *call = NULL;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (d->attn_pref != GS_ATTN_PATH_KERNELS && kind == GS_STREAM_COMPUTE &&
        (bs = blas_create(s, &call)) != CUBLAS_STATUS_SUCCESS) {
        cuda_stream_destroy(d, s);
        return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 " stream %s: %s (attention's cuBLAS "
                            "handle): %s", rank, stream_name(kind), call, cublasGetStatusString(bs));
    }
    *out = s;
    return GS_OK;
}

static void cuda_stream_destroy(gs_drv *d, gs_drv_stream *s)
{
    if (!s)
        return;
    rank_dev *r = &d->r[s->rank];
    cudaSetDevice(s->dev);
    cudaStreamSynchronize(s->cs);
    pthread_mutex_lock(&r->mu);
    for (gs_drv_stream **p = &r->streams; *p; p = &(*p)->next_of_rank)
        if (*p == s) {
            *p = s->next_of_rank;
            break;
        }
    pthread_mutex_unlock(&r->mu);
    if (s->blas)
        cublasDestroy(s->blas);
    if (s->workspace)
        cudaFreeAsync(s->workspace, s->cs);
    if (s->bf16_buf)
        cudaFreeAsync(s->bf16_buf, s->cs);
    cudaStreamSynchronize(s->cs);
    for (int i = 0; i < PROGRESS_MARKS; i++)
        cudaEventDestroy(s->marks[i]);
    cudaStreamDestroy(s->cs);
    free(s);
}

static gs_status stream_status(gs_drv_stream *s, gs_error *err)
{
    if (!s->failed)
        return GS_OK;
    if (err)
        *err = s->err;
    return GS_ERR_RUNTIME;
}

static gs_status cuda_launch(gs_drv *d, gs_drv_stream *s, gs_drv_fn fn, void *arg, gs_error *err)
{
    if (cuda_aborted(d, err))
        return GS_ERR_RUNTIME;
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": cudaSetDevice(%d) failed", s->rank, s->dev);
    gs_status rc = fn(arg, s, err);
    if (rc == GS_OK && s->armed)
        work_on(s); /* it enqueued nothing: its start is its end */
    s->armed = NULL;
    if (rc != GS_OK) {
        cuda_abort(d, err->msg[0] ? err->msg : gs_status_name(rc));
        return rc;
    }
    if (cudaEventRecord(s->marks[s->nmarks % PROGRESS_MARKS], s->cs) == cudaSuccess)
        s->nmarks++;
    return stream_status(s, err);
}

static void cuda_arm_start(gs_drv *d, gs_drv_stream *s, gs_drv_event *e)
{
    (void)d;
    s->armed = e;
}

static gs_status cuda_event_create(gs_drv *d, gs_drv_event **out, gs_error *err)
{
    (void)d;
    if (!(*out = calloc(1, sizeof **out)))
        return gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
    (*out)->dev = -1;
    return GS_OK;
}

static void cuda_event_destroy(gs_drv *d, gs_drv_event *e)
{
    (void)d;
    if (!e)
        return;
    if (e->ev) {
        cudaSetDevice(e->dev);
        cudaEventDestroy(e->ev);
    }
    free(e);
}

static gs_status cuda_event_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    (void)d;
    cudaError_t ce = cudaSetDevice(s->dev);
    if (ce == cudaSuccess && e->ev && e->dev != s->dev) {
        cudaSetDevice(e->dev);
        cudaEventDestroy(e->ev);
        e->ev = NULL;
        ce = cudaSetDevice(s->dev);
    }
    if (ce == cudaSuccess && !e->ev) {
        ce = cudaEventCreate(&e->ev);
        e->dev = s->dev;
    }
    e->rank = s->rank;
    if (ce == cudaSuccess)
        ce = cudaEventRecord(e->ev, s->cs);
    if (ce != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 " stream %s: cudaEventRecord: %s", s->rank,
                            stream_name(s->kind), cudaGetErrorString(ce));
    return GS_OK;
}

static gs_status cuda_stream_wait_event(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
{
    (void)d;
    if (!e->ev)
        return GS_OK; /* never recorded: nothing to wait for (CUDA's rule) */
    cudaError_t ce = cudaSetDevice(s->dev);
    if (ce == cudaSuccess)
        ce = cudaStreamWaitEvent(s->cs, e->ev, 0);
    if (ce != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 " stream %s: cudaStreamWaitEvent: %s", s->rank,
                            stream_name(s->kind), cudaGetErrorString(ce));
    return GS_OK;
}

/* 1 when every stream of the rank has drained (r->mu held). */
static int rank_idle(rank_dev *r)
{
    for (gs_drv_stream *s = r->streams; s; s = s->next_of_rank)
        if (cudaStreamQuery(s->cs) != cudaSuccess)
            return 0;
    return 1;
}

static gs_status cuda_stream_sync(gs_drv *d, gs_drv_stream *s, gs_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "stream %s", stream_name(s->kind));
    cudaSetDevice(s->dev);
    gs_status rc = poll_stream(d, &d->r[s->rank], s->rank, s->cs, s, what, err);
    if (rc == GS_OK && (rc = stream_status(s, err)) == GS_OK) {
        rank_dev *r = &d->r[s->rank];
        pthread_mutex_lock(&r->mu);
        if (r->frees && rank_idle(r))
            release_frees(r);
        pthread_mutex_unlock(&r->mu);
    }
    return rc;
}

static double cuda_event_elapsed_s(gs_drv *d, const gs_drv_event *a, const gs_drv_event *b)
{
    (void)d;
    float ms = 0;
    if (!a->ev || !b->ev || a->dev != b->dev || cudaSetDevice(a->dev) != cudaSuccess ||
        cudaEventElapsedTime(&ms, a->ev, b->ev) != cudaSuccess)
        return -1;
    return (double)ms * 1e-3;
}

static double cuda_event_time_s(gs_drv *d, const gs_drv_event *e)
{
    if (!e->ev || e->rank >= d->world)
        return -1;
    rank_dev *r = &d->r[e->rank];
    float ms = 0;
    cudaSetDevice(e->dev);
    if (cudaEventElapsedTime(&ms, r->base, e->ev) != cudaSuccess)
        return -1;
    return r->base_host_s + (double)ms * 1e-3;
}

/* Host monotonic time. When every stream is idle (between steps) the per-device bases are
 * re-recorded, so event times stay within float milliseconds' precision of their base. */
static double cuda_clock_s(gs_drv *d)
{
    int idle = 1;
    for (uint64_t i = 0; i < d->world && idle; i++) {
        if (d->local != UINT64_MAX && i != d->local)
            continue; /* another process's rank */
        pthread_mutex_lock(&d->r[i].mu);
        cudaSetDevice(d->r[i].dev);
        idle = d->r[i].inited && rank_idle(&d->r[i]);
        pthread_mutex_unlock(&d->r[i].mu);
    }
    if (idle && !cuda_aborted(d, NULL))
        for (uint64_t i = 0; i < d->world; i++) {
            if (d->local != UINT64_MAX && i != d->local)
                continue;
            cudaSetDevice(d->r[i].dev);
            rebase(&d->r[i]);
        }
    return mono_s();
}

static void cuda_event_begin(gs_drv *d, gs_drv_stream *s, const char *name)
{
    (void)d;
    snprintf(s->event, sizeof s->event, "%s", name);
    nvtxRangePushA(name);
}

static void cuda_event_end(gs_drv *d, gs_drv_stream *s)
{
    (void)d;
    s->event[0] = 0;
    nvtxRangePop();
}

/* ---- GEMM through cuBLASLt ------------------------------------------------------------------- */

/* The largest power of two (<= 256) dividing the address: the buffer's alignment in bytes. */
static uint32_t alignment_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al)
        al /= 2;
    return al;
}

/* The stream's GEMM workspace (allocated on the stream at its first GEMM); 0 when it failed. */
static int ensure_workspace(gs_drv_stream *s)
{
    if (s->workspace)
        return 1;
    cudaError_t e = cudaMallocAsync(&s->workspace, GEMM_WORKSPACE_BYTES, work_on(s));
    if (e != cudaSuccess) {
        s->workspace = NULL;
        fail_stream(s, "cudaMallocAsync (cuBLASLt workspace): %s", cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

/* GRIDSTEP_CUDA_GEMM=bf16: A's and B's stored extents (na, nb elements from a and b) cast to
 * bf16 into the stream's buffer, same layout; *a16, *b16 point at the copies. 0 on failure (the
 * stream failed). */
static int cast_inputs(gs_drv_stream *s, const float *a, size_t na, const float *b, size_t nb, void **a16,
                       void **b16)
{
    size_t bytes = (na + nb) * 2 + 256; /* B's copy starts 256-byte aligned, as cuBLASLt prefers */
    if (bytes > s->bf16_cap) {
        if (s->bf16_buf)
            cudaFreeAsync(s->bf16_buf, s->cs);
        s->bf16_buf = NULL;
        s->bf16_cap = 0;
        cudaError_t e = cudaMallocAsync(&s->bf16_buf, bytes, s->cs);
        if (e != cudaSuccess) {
            s->bf16_buf = NULL;
            fail_stream(s, "cudaMallocAsync (%zu B for bf16 GEMM inputs): %s", bytes, cudaGetErrorString(e));
            return 0;
        }
        s->bf16_cap = bytes;
    }
    *a16 = s->bf16_buf;
    *b16 = (char *)s->bf16_buf + (na * 2 + 255) / 256 * 256;
    int rc = gs_cu_to_bf16(work_on(s), *a16, a, na);
    if (!rc)
        rc = gs_cu_to_bf16(work_on(s), *b16, b, nb);
    if (rc) {
        fail_stream(s, "kernel to_bf16: %s", cudaGetErrorString((cudaError_t)rc));
        return 0;
    }
    return 1;
}

/* Column-major C[m,n] = op(A) op(B) + beta C (alpha 1), fp32 storage, fp32 (or TF32) compute;
 * with GRIDSTEP_CUDA_GEMM=bf16, A and B cast to bf16 first and the product accumulated in fp32
 * into fp32 C (cuBLASLt's bf16-in, fp32-out GEMM). */
static void gemm_cm(gs_drv_stream *s, int ta, int tb, size_t m, size_t n, size_t k, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    if (!m || !n)
        return;
    if (!k) {
        if (beta == 0.0f)
            for (size_t j = 0; j < n; j++)
                CU_OK(s, cudaMemsetAsync(c + j * ldc, 0, m * sizeof(float), work_on(s)));
        else if (beta != 1.0f)
            fail_stream(s, "gemm with k = 0 and beta %g", (double)beta);
        return;
    }
    gs_drv *d = s->d;
    rank_dev *r = &d->r[s->rank];
    if (!ensure_workspace(s))
        return;
    const void *av = a, *bv = b;
    cudaDataType_t in_type = CUDA_R_32F;
    if (d->bf16) {
        void *a16 = NULL, *b16 = NULL;
        /* each stored matrix's extent: (columns - 1) leading dimensions and the last column's rows
         * (no element past it is read) */
        size_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
        if (!cast_inputs(s, a, lda * (ca - 1) + ra, b, ldb * (cb - 1) + rb, &a16, &b16))
            return;
        av = a16, bv = b16, in_type = CUDA_R_16BF;
    }
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t ws = GEMM_WORKSPACE_BYTES;
    float alpha = 1.0f;
    const char *call = "cublasLtMatmulDescCreate";
    cublasStatus_t st = cublasLtMatmulDescCreate(&op, d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                                 CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulDescSetAttribute";
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatrixLayoutCreate";
        st = cublasLtMatrixLayoutCreate(&la, in_type, ta ? k : m, ta ? m : k, (int64_t)lda);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lb, in_type, tb ? n : k, tb ? k : n, (int64_t)ldb);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, (int64_t)ldc);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulPreferenceCreate";
        st = cublasLtMatmulPreferenceCreate(&pref);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* the buffers are often offsets into a flat unit (4-byte aligned only): tell the heuristic,
     * which otherwise assumes 256-byte alignment */
    uint32_t al_a = alignment_of(av), al_b = alignment_of(bv), al_c = alignment_of(c);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulAlgoGetHeuristic";
        st = cublasLtMatmulAlgoGetHeuristic(r->lt, op, la, lb, lc, lc, pref, 1, &heur, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found == 0)
            st = CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmul";
        st = cublasLtMatmul(r->lt, op, &alpha, av, la, bv, lb, &beta, c, lc, c, lc, &heur.algo, s->workspace,
                            GEMM_WORKSPACE_BYTES, work_on(s));
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        fail_stream(s, "%s (m=%zu n=%zu k=%zu%s%s%s): %s", call, m, n, k, ta ? " A^T" : "", tb ? " B^T" : "",
                    d->bf16 ? ", bf16 inputs" : "", cublasLtGetStatusString(st));
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (op)
        cublasLtMatmulDescDestroy(op);
}

/* Row-major y[t,n] = x[t,k] w[n,k]^T is column-major y^T = w x^T: A = w as [k,n] transposed. */
static void k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    gemm_cm(s, 1, 0, n, t, k, w, k, x, k, 0.0f, y, n);
}

static void k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                         size_t t, size_t k, size_t n)
{
    if (dx) /* dx^T [k,t] = w^T [k,n] dy^T [n,t] */
        gemm_cm(s, 0, 0, k, t, n, w, k, dy, n, 0.0f, dx, k);
    if (dw) /* dw^T [k,n] += x^T [k,t] dy [t,n] */
        gemm_cm(s, 0, 1, k, n, t, x, k, dy, n, 1.0f, dw, k);
}

/* ---- attention through cuBLAS GEMMs (GRIDSTEP_CUDA_ATTENTION=gemm) ---------------------------- */

/* Creates the stream's cuBLAS handle: bound to the stream and to its workspace (one handle per
 * stream, so cuBLAS's results do not depend on which stream ran before), default math mode (the
 * compute type of each call chooses fp32 or TF32). Made when a compute stream is created (so
 * that cuBLAS's own set-up allocations happen before the step, not between NCCL kernels), or
 * at the first use on another stream. On failure *call names the failing call. */
static cublasStatus_t blas_create(gs_drv_stream *s, const char **call)
{
    cublasHandle_t h = NULL;
    *call = "cudaMallocAsync (cuBLASLt workspace)";
    if (!s->workspace && cudaMallocAsync(&s->workspace, GEMM_WORKSPACE_BYTES, s->cs) != cudaSuccess) {
        s->workspace = NULL;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *call = "cublasCreate";
    cublasStatus_t st = cublasCreate(&h);
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasSetStream";
        st = cublasSetStream(h, s->cs);
    }
    if (st == CUBLAS_STATUS_SUCCESS) { /* after cublasSetStream, which resets the workspace */
        *call = "cublasSetWorkspace";
        st = cublasSetWorkspace(h, s->workspace, GEMM_WORKSPACE_BYTES);
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasSetMathMode";
        st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        if (h)
            cublasDestroy(h);
        return st;
    }
    s->blas = h;
    return CUBLAS_STATUS_SUCCESS;
}

/* The stream's cuBLAS handle, made at the first use when the stream has none; 0 when that failed
 * (recorded on the stream). */
static int ensure_blas(gs_drv_stream *s)
{
    if (s->blas)
        return 1;
    const char *call = NULL;
    cublasStatus_t st = blas_create(s, &call);
    if (st != CUBLAS_STATUS_SUCCESS)
        fail_stream(s, "%s (attention's cuBLAS handle): %s", call, cublasGetStatusString(st));
    return st == CUBLAS_STATUS_SUCCESS;
}

typedef struct attn_gemm_ctx {
    gs_drv_stream *s;
    const char *op;              /* "attn_fwd" or "attn_bwd" */
    float *const *buf;           /* device base of each gs_attn_buf */
    cublasComputeType_t compute; /* the driver's GEMM math (GRIDSTEP_CUDA_GEMM): fp32 or TF32 */
} attn_gemm_ctx;

/* One step of the plan on the stream; a failure names the call, the step, its sequence, group
 * member and kv heads (fail_stream adds the rank and the event). */
static int attn_gemm_step(void *arg, const gs_attn_step *st)
{
    attn_gemm_ctx *x = arg;
    gs_drv_stream *s = x->s;
    float *a = x->buf[st->a.buf] + st->a.offset, *b = x->buf[st->b.buf] + st->b.offset;
    float *c = x->buf[st->c.buf] + st->c.offset;
    const char *call = "?";
    int rc = 0;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    switch (st->kind) {
    case GS_ATTN_STEP_GEMM:
        call = "cublasGemmStridedBatchedEx";
        work_on(s);
        bs = cublasGemmStridedBatchedEx(s->blas, st->ta ? CUBLAS_OP_T : CUBLAS_OP_N, st->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        (int)st->m, (int)st->n, (int)st->k, &st->alpha, a, CUDA_R_32F, (int)st->a.ld,
                                        (long long)st->a.stride, b, CUDA_R_32F, (int)st->b.ld, (long long)st->b.stride,
                                        &st->beta, c, CUDA_R_32F, (int)st->c.ld, (long long)st->c.stride,
                                        (int)st->batch, x->compute, CUBLAS_GEMM_DEFAULT);
        break;
    case GS_ATTN_STEP_SOFTMAX:
        call = "kernel attn_softmax_rows";
        rc = gs_cu_attn_softmax_rows(work_on(s), c, st->c.ld, st->c.stride, st->m, st->n, st->batch);
        break;
    case GS_ATTN_STEP_DS:
        call = "kernel attn_ds_rows";
        rc = gs_cu_attn_ds_rows(work_on(s), a, st->a.ld, st->a.stride, c, st->c.ld, st->c.stride, st->m, st->n, st->batch);
        break;
    case GS_ATTN_STEP_SOFTMAX_LSE:
        call = "kernel attn_softmax_lse_rows";
        rc = gs_cu_attn_softmax_lse_rows(work_on(s), c, st->c.ld, st->c.stride, b, st->b.stride, st->m, st->n,
                                         st->batch);
        break;
    case GS_ATTN_STEP_P_LSE:
        call = "kernel attn_p_lse_rows";
        rc = gs_cu_attn_p_lse_rows(work_on(s), c, st->c.ld, st->c.stride, b, st->b.stride, st->m, st->n, st->batch);
        break;
    }
    if (bs == CUBLAS_STATUS_SUCCESS && rc == 0)
        return 0;
    fail_stream(s, "%s (gemm path): %s (%s; sequence %zu, group member %zu, kv heads %zu..%zu, m=%zu n=%zu k=%zu): %s",
                x->op, call, st->what, st->seq_index, st->group_member, st->kv0, st->kv0 + st->batch - 1, st->m, st->n,
                st->k, bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs) : cudaGetErrorString((cudaError_t)rc));
    return 1;
}

/* Attention as the plan's GEMMs and row passes; the scratch (the backward's dP/dS; the flash
 * variant's scores and P, both directions) is stream-ordered (cudaMallocAsync, freed on the
 * stream after the last step that reads it). */
static void attn_gemm(gs_drv_stream *s, int backward, int flash, const gs_attn_shape *sh, float **buf)
{
    const char *op = backward ? "attn_bwd" : "attn_fwd";
    if (!sh->nseq || !sh->seq || !sh->nh)
        return;
    gs_error e;
    gs_error_init(&e);
    if (gs_attn_gemm_check(sh, &e) != GS_OK) {
        fail_stream(s, "%s: %s", op, e.msg);
        return;
    }
    if (!ensure_blas(s))
        return;
    attn_gemm_ctx x = {s, op, buf, s->d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    if (!backward && !flash) {
        gs_attn_gemm_fwd(sh, attn_gemm_step, &x, &e);
        return;
    }
    size_t bytes = (flash ? gs_attn_gemm_flash_scratch_floats(sh, backward) : gs_attn_gemm_scratch_floats(sh)) *
                   sizeof(float);
    cudaError_t ce = cudaMallocAsync((void **)&buf[GS_ATTN_SCRATCH], bytes, s->cs);
    if (ce != cudaSuccess) {
        fail_stream(s, "%s (gemm path): cudaMallocAsync (%s scratch, %zu B): %s", op,
                    flash ? "the flash variant's S/P" : "dP/dS", bytes, cudaGetErrorString(ce));
        return;
    }
    if (flash && !backward)
        gs_attn_gemm_flash_fwd(sh, attn_gemm_step, &x, &e);
    else if (flash)
        gs_attn_gemm_flash_bwd(sh, attn_gemm_step, &x, &e);
    else
        gs_attn_gemm_bwd(sh, attn_gemm_step, &x, &e);
    CU_OK(s, cudaFreeAsync(buf[GS_ATTN_SCRATCH], s->cs));
}

/* The GEMM path's forward (writes out and p: the probabilities, or the flash variant's lse) and
 * backward (reads p, writes dq, dk, dv) on the call's tensors. */
static void attn_gemm_fwd(gs_drv_stream *s, int flash, const gs_attn_shape *sh, const float *q, const float *k,
                          const float *v, float *out, float *p)
{
    float *buf[GS_ATTN_BUF_COUNT] = {NULL};
    buf[GS_ATTN_Q] = (float *)q;
    buf[GS_ATTN_K] = (float *)k;
    buf[GS_ATTN_V] = (float *)v;
    buf[GS_ATTN_OUT] = out;
    buf[GS_ATTN_P] = p;
    attn_gemm(s, 0, flash, sh, buf);
}

static void attn_gemm_bwd(gs_drv_stream *s, int flash, const gs_attn_shape *sh, const float *q, const float *k,
                          const float *v, const float *p, const float *dout, float *dq, float *dk, float *dv)
{
    float *buf[GS_ATTN_BUF_COUNT] = {NULL};
    buf[GS_ATTN_Q] = (float *)q;
    buf[GS_ATTN_K] = (float *)k;
    buf[GS_ATTN_V] = (float *)v;
    buf[GS_ATTN_P] = (float *)p;
    buf[GS_ATTN_DOUT] = (float *)dout;
    buf[GS_ATTN_DQ] = dq;
    buf[GS_ATTN_DK] = dk;
    buf[GS_ATTN_DV] = dv;
    attn_gemm(s, 1, flash, sh, buf);
}

/* ---- the other compute ops: kernels/cuda ----------------------------------------------------- */

static void k_add(gs_drv_stream *s, float *y, const float *x, size_t n)
{
    kernel_ok(s, "add", gs_cu_add(work_on(s), y, x, n));
}
static void k_scale(gs_drv_stream *s, float *y, float a, size_t n)
{
    kernel_ok(s, "scale", gs_cu_scale(work_on(s), y, a, n));
}
static void k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn, size_t h,
                        float *y)
{
    kernel_ok(s, "embed_fwd", gs_cu_embed_fwd(work_on(s), tok, t, w, lo, vn, h, y));
}
static void k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                        size_t h, float *dw)
{
    kernel_ok(s, "embed_bwd", gs_cu_embed_bwd(work_on(s), tok, t, dy, lo, vn, h, dw));
}
static void k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                          float eps)
{
    kernel_ok(s, "rmsnorm_fwd", gs_cu_rmsnorm_fwd(work_on(s), x, g, y, rstd, t, h, eps));
}
static void k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                          float *dx, float *dg, size_t t, size_t h)
{
    kernel_ok(s, "rmsnorm_bwd", gs_cu_rmsnorm_bwd(work_on(s), x, g, rstd, dy, dx, dg, t, h));
}
static void k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    kernel_ok(s, "rope_fwd", gs_cu_rope(work_on(s), x, t, seq, nh, hd, ld, th, 1.0));
}
static void k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    kernel_ok(s, "rope_bwd", gs_cu_rope(work_on(s), x, t, seq, nh, hd, ld, th, -1.0));
}
/* The path of one attention call (gs_attn_path_gemm): 1 the GEMM path, 0 the kernels, -1 refused
 * and recorded on the stream (GRIDSTEP_CUDA_ATTENTION=gemm on a call with attention dropout: the
 * GEMM path, either variant, draws no masks). */
static int attn_path(gs_drv_stream *s, const gs_dropout *drop, const gs_attn_shape *sh, int flash)
{
    int g = gs_attn_path_gemm(s->d->attn_pref, drop && drop->threshold, gs_attn_gemm_fits(sh, flash));
    if (g < 0)
        fail_stream(s, "attention dropout: GRIDSTEP_CUDA_ATTENTION=gemm draws no dropout masks; unset it (auto runs "
                       "the attention kernels, flash or per-row, for calls with dropout) or set it to kernels");
    return g;
}

static void k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                       float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                       const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 0);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_fwd(s, 0, &sh, q, k, v, out, p);
        return;
    }
    kernel_ok(s, "attn_fwd",
              gs_cu_attn_fwd_dropout(work_on(s), q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, drop));
}
static void k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                       const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                       size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 0);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_bwd(s, 0, &sh, q, k, v, p, dout, dq, dk, dv);
        return;
    }
    kernel_ok(s, "attn_bwd",
              gs_cu_attn_bwd_dropout(work_on(s), q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop));
}
static void k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                             size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                             size_t nkv, size_t hd, const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 1);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_fwd(s, 1, &sh, q, k, v, out, lse);
        return;
    }
    kernel_ok(s, "attn_fwd_flash",
              gs_cu_attn_fwd_flash_dropout(work_on(s), q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, drop));
}
static void k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                             size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo, float *dq,
                             float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                             const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 1);
    if (g < 0)
        return;
    if (g) { /* D from the recomputed P and dP (sum_b P dP = dout . out): out unread */
        attn_gemm_bwd(s, 1, &sh, q, k, v, lse, dout, dq, dk, dv);
        return;
    }
    kernel_ok(s, "attn_bwd_flash", gs_cu_attn_bwd_flash_dropout(work_on(s), q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk,
                                                                dv, nseq, seq, nh, nkv, hd, drop));
}
static const char *cuda_gemm_math(gs_drv *d)
{
    return d->bf16 ? "bf16 inputs, fp32 accumulate" : d->tf32 ? "tf32" : "fp32";
}
static void k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    kernel_ok(s, "dropout", gs_cu_dropout_rows(work_on(s), x, rows, h, drop));
}
static void k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                            float *rstd, size_t t, size_t h, float eps)
{
    kernel_ok(s, "layernorm_fwd", gs_cu_layernorm_fwd(work_on(s), x, g, b, y, mean, rstd, t, h, eps));
}
static void k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                            const float *dy, float *dx, float *dg, float *db, size_t t, size_t h)
{
    kernel_ok(s, "layernorm_bwd", gs_cu_layernorm_bwd(work_on(s), x, g, mean, rstd, dy, dx, dg, db, t, h));
}
static void k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n)
{
    kernel_ok(s, "gelu_fwd", gs_cu_gelu_fwd(work_on(s), x, y, n));
}
static void k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n)
{
    kernel_ok(s, "gelu_bwd", gs_cu_gelu_bwd(work_on(s), x, dy, dx, n));
}
static void k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n)
{
    kernel_ok(s, "bias_add", gs_cu_bias_add(work_on(s), y, b, t, n));
}
static void k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n)
{
    kernel_ok(s, "bias_grad", gs_cu_bias_grad(work_on(s), dy, db, t, n));
}
static void k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f)
{
    kernel_ok(s, "swiglu_fwd", gs_cu_swiglu_fwd(work_on(s), gu, h, t, f));
}
static void k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    kernel_ok(s, "swiglu_bwd", gs_cu_swiglu_bwd(work_on(s), gu, dh, dgu, t, f));
}
static void k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                         float *stats)
{
    kernel_ok(s, "xent_stats", gs_cu_xent_stats(work_on(s), logits, target, t, lo, vn, stats));
}
/* The loss is a host double: the one op that waits for its stream (polled with the timeout). */
static void k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss)
{
    gs_drv *d = s->d;
    rank_dev *r = &d->r[s->rank];
    *loss = 0;
    kernel_ok(s, "xent_combine", gs_cu_xent_combine(work_on(s), stats, parts, t, lse, r->loss_dev));
    CU_OK(s, cudaMemcpyAsync(r->loss_host, r->loss_dev, sizeof(double), cudaMemcpyDeviceToHost, work_on(s)));
    if (s->failed)
        return;
    gs_error e;
    gs_error_init(&e);
    if (poll_stream(d, r, s->rank, s->cs, s, "xent_combine (reading the loss)", &e) != GS_OK) {
        fail_stream(s, "%s", e.msg);
        return;
    }
    *loss = *r->loss_host;
}
static void k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                       size_t lo, size_t vn, float scale, float *dlogits)
{
    kernel_ok(s, "xent_bwd", gs_cu_xent_bwd(work_on(s), logits, target, lse, t, lo, vn, scale, dlogits));
}
/* The step's scalars exactly as kernels/host/adamw.c computes them. */
static void k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                    float b2, float eps, float wd, uint64_t step)
{
    double bias1 = 1.0 - pow((double)b1, (double)step), bias2 = 1.0 - pow((double)b2, (double)step);
    float decay = (float)(1.0 - (double)lr * (double)wd);
    float step_size = (float)((double)lr / bias1);
    float bias2_sqrt = (float)sqrt(bias2);
    float omb1 = (float)(1.0 - (double)b1), omb2 = (float)(1.0 - (double)b2);
    kernel_ok(s, "adamw",
              gs_cu_adamw(work_on(s), p, g, m, v, n, decay, step_size, bias2_sqrt, b2, omb2, omb1, 1.0f - omb1,
                          omb1 < 0.5f, eps));
}

/* ---- collectives and p2p: NCCL ---------------------------------------------------------------- */

/* The rank's communicator for g, checked against the group's size and the caller's position. */
static gs_status comm_of(gs_drv *d, uint64_t rank, const gs_drv_group *g, ncclComm_t *out, gs_error *err)
{
    if (rank >= d->world || (int)g->kind < 0 || (int)g->kind >= GS_GROUP_KIND_COUNT)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": no such group", rank);
    ncclComm_t c = d->r[rank].comm[g->kind];
    if (!c)
        return cuda_aborted(d, err) ? GS_ERR_RUNTIME
                                    : gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": no %s communicator", rank,
                                                   group_name(g->kind));
    *out = c;
    return GS_OK;
}

/* The status of work refused because the run was aborted: the abort's message after `where`. */
static gs_status stopped(gs_drv *d, const char *where, gs_error *err)
{
    gs_error e;
    cuda_aborted(d, &e);
    return gs_error_set(err, GS_ERR_RUNTIME, "%s: stopped: %s", where, e.msg);
}

typedef enum coll_kind { C_AG, C_RS, C_AR, C_BCAST } coll_kind;

static const char *coll_name(coll_kind k)
{
    static const char *const n[] = {"ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclBroadcast"};
    return n[k];
}

/* One NCCL call inside ncclGroupStart/End, under the rank's lock, then waited for (non-blocking
 * communicators: the call is on the stream once the async state leaves ncclInProgress). */
static gs_status nccl_issue(gs_drv *d, gs_drv_stream *s, uint64_t rank, ncclComm_t c, coll_kind k, const void *send,
                            void *recv, size_t count, ncclDataType_t type, int peer_or_root, const char *where,
                            gs_error *err)
{
    rank_dev *r = &d->r[rank];
    pthread_mutex_lock(&r->mu);
    if (cuda_aborted(d, NULL)) {
        pthread_mutex_unlock(&r->mu);
        return stopped(d, where, err);
    }
    ncclResult_t st = ncclGroupStart(), st2;
    if (st == ncclSuccess) {
        switch (k) {
        case C_AG: st = ncclAllGather(send, recv, count, type, c, work_on(s)); break;
        case C_RS: st = ncclReduceScatter(send, recv, count, type, ncclSum, c, work_on(s)); break;
        case C_AR: st = ncclAllReduce(send, recv, count, type, ncclSum, c, work_on(s)); break;
        case C_BCAST: st = ncclBroadcast(send, recv, count, type, peer_or_root, c, work_on(s)); break;
        }
        st2 = ncclGroupEnd();
        if (st == ncclSuccess || st == ncclInProgress)
            st = st2;
    }
    pthread_mutex_unlock(&r->mu);
    if (st != ncclSuccess && st != ncclInProgress) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: %s: %s (%s)", where, coll_name(k), ncclGetErrorString(st), ncclGetLastError(c));
        cuda_abort(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return nccl_wait(d, r, c, rank, where, err);
}

/* The communicator of group g for an operation named what on count floats, on s's device; where
 * (cap bytes) gets the operation's name for messages. */
static gs_status group_op(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const char *what,
                          size_t count, char *where, size_t cap, ncclComm_t *c, gs_error *err)
{
    snprintf(where, cap, "rank %" PRIu64 ": %s of %zu floats on %s group %" PRIu64, rank, what, count,
             group_name(g->kind), g->index);
    *c = NULL;
    gs_status rc = comm_of(d, rank, g, c, err);
    if (rc != GS_OK)
        return rc;
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaSetDevice failed", where);
    return GS_OK;
}

static gs_status coll(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, coll_kind k,
                      const float *send, float *recv, size_t count, int root, gs_error *err)
{
    char where[160];
    ncclComm_t c;
    gs_status rc = group_op(d, s, rank, g, coll_name(k), count, where, sizeof where, &c, err);
    if (rc != GS_OK)
        return rc;
    return nccl_issue(d, s, rank, c, k, send, recv, count, ncclFloat, root, where, err);
}

static gs_status cuda_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                 float *recv, size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_AG, send, recv, count, 0, err);
}

static gs_status cuda_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                     const float *send, float *recv, size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_RS, send, recv, count, 0, err);
}

static gs_status cuda_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                 size_t count, gs_error *err)
{
    return coll(d, s, rank, g, C_AR, buf, buf, count, 0, err);
}

static gs_status cuda_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                size_t count, uint64_t root, gs_error *err)
{
    if (root >= g->size)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": broadcast root %" PRIu64 " outside the group", rank,
                            root);
    return coll(d, s, rank, g, C_BCAST, buf, buf, count, (int)root, err);
}

/* ops[0..n) as one NCCL group on communicator c (peers: ranks of c), on s; where names it in
 * messages. */
static gs_status nccl_p2p(gs_drv *d, gs_drv_stream *s, uint64_t rank, ncclComm_t c, const gs_drv_p2p *ops, size_t n,
                          const char *where, gs_error *err)
{
    rank_dev *r = &d->r[rank];
    if (!c) {
        return stopped(d, where, err);
    }
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaSetDevice failed", where);
    pthread_mutex_lock(&r->mu);
    if (cuda_aborted(d, NULL)) {
        pthread_mutex_unlock(&r->mu);
        return stopped(d, where, err);
    }
    const char *call = "ncclGroupStart";
    ncclResult_t st = ncclGroupStart(), st2;
    if (st == ncclSuccess) {
        for (size_t i = 0; i < n && (st == ncclSuccess || st == ncclInProgress); i++) {
            call = ops[i].recv ? "ncclRecv" : "ncclSend";
            st = ops[i].recv ? ncclRecv(ops[i].buf, (size_t)ops[i].bytes, ncclInt8, (int)ops[i].peer, c, work_on(s))
                             : ncclSend(ops[i].buf, (size_t)ops[i].bytes, ncclInt8, (int)ops[i].peer, c, work_on(s));
        }
        st2 = ncclGroupEnd();
        if (st == ncclSuccess || st == ncclInProgress) {
            call = "ncclGroupEnd";
            st = st2;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (st != ncclSuccess && st != ncclInProgress) {
        char msg[GS_ERROR_MSG_BYTES];
        snprintf(msg, sizeof msg, "%s: %s: %s (%s)", where, call, ncclGetErrorString(st), ncclGetLastError(c));
        cuda_abort(d, msg);
        return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
    }
    return nccl_wait(d, r, c, rank, where, err);
}

/* A p2p group as one NCCL group (driver.h: p2p_group): its sends and receives progress together,
 * so ranks that send to each other at once do not each wait for a receive queued behind their
 * own send. */
static gs_status cuda_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                                gs_error *err)
{
    char where[160];
    int at = n == 1 ? snprintf(where, sizeof where, "rank %" PRIu64 ":", rank)
                    : snprintf(where, sizeof where, "rank %" PRIu64 ": p2p group of %zu:", rank, n);
    for (size_t i = 0; i < n && at > 0 && (size_t)at < sizeof where; i++)
        at += snprintf(where + at, sizeof where - (size_t)at, " %s %" PRIu64 " B %s %" PRIu64,
                       ops[i].recv ? "recv" : "send", ops[i].bytes, ops[i].recv ? "from" : "to", ops[i].peer);
    if (rank >= d->world)
        return gs_error_set(err, GS_ERR_RUNTIME, "%s: no such rank", where);
    for (size_t i = 0; i < n; i++)
        if (ops[i].peer >= d->world)
            return gs_error_set(err, GS_ERR_RUNTIME, "%s: no rank %" PRIu64, where, ops[i].peer);
    return nccl_p2p(d, s, rank, d->r[rank].world, ops, n, where, err);
}

static gs_status cuda_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                           gs_error *err)
{
    const gs_drv_p2p op = {0, peer, (void *)buf, bytes};
    return cuda_p2p_group(d, s, rank, &op, 1, err);
}

static gs_status cuda_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                           gs_error *err)
{
    const gs_drv_p2p op = {1, peer, buf, bytes};
    return cuda_p2p_group(d, s, rank, &op, 1, err);
}

/* From inside launched work: a progress mark is a recorded CUDA event (driver.h: mark); the
 * token orders host waits only. */
static gs_status cuda_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)token;
    return cuda_event_record(d, s, e, err);
}

static gs_status cuda_wait_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err)
{
    (void)token;
    return cuda_stream_wait_event(d, s, e, err);
}

/* Transformer Engine's ring exchange without userbuffers (driver.h: all_gather_ring): size - 1
 * NCCL groups of one send to the next member and one receive from the previous on the group's
 * communicator, each followed by its mark, so a GEMM on the compute stream can start on a chunk
 * as soon as it has come. */
static gs_status cuda_all_gather_ring(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                      const float *send, float *recv, size_t count, gs_drv_event *const *marks,
                                      uint64_t token, gs_error *err)
{
    char where[200];
    ncclComm_t c;
    gs_status rc = group_op(d, s, rank, g, "ring all-gather", count, where, sizeof where, &c, err);
    if (rc != GS_OK)
        return rc;
    uint64_t n = g->size, pos = g->pos;
    size_t bytes = count * sizeof(float);
    if (recv + pos * count != send && bytes) {
        cudaError_t ce = cudaMemcpyAsync(recv + pos * count, send, bytes, cudaMemcpyDeviceToDevice, work_on(s));
        if (ce != cudaSuccess)
            return gs_error_set(err, GS_ERR_RUNTIME, "%s: cudaMemcpyAsync: %s", where, cudaGetErrorString(ce));
    }
    for (uint64_t i = 0; i + 1 < n && rc == GS_OK; i++) {
        uint64_t out = (pos + n - i) % n, in = (pos + n - i - 1) % n;
        const gs_drv_p2p ops[2] = {{0, (pos + 1) % n, recv + out * count, bytes},
                                   {1, (pos + n - 1) % n, recv + in * count, bytes}};
        char step[260];
        snprintf(step, sizeof step, "%.200s, step %" PRIu64 " of %" PRIu64, where, i + 1, n - 1);
        rc = nccl_p2p(d, s, rank, c, ops, 2, step, err);
        if (rc == GS_OK && marks && marks[i])
            rc = cuda_mark(d, s, marks[i], token, err);
    }
    return rc;
}

static double cuda_op_start_s(gs_drv *d, gs_drv_stream *s)
{
    (void)d, (void)s;
    return -1; /* the stream's order decides; the event's posted time stands for its start */
}

static const gs_driver_ops gs_driver_cuda = {
    .name = "cuda",
    .description = "NVIDIA GPUs: a GPU per rank, a CUDA stream per schedule stream, cuBLASLt, kernels/cuda, NCCL",
    .open = cuda_open,
    .close = cuda_close,
    .abort = cuda_abort,
    .aborted = cuda_aborted,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .launch = cuda_launch,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_sync = cuda_stream_sync,
    .event_time_s = cuda_event_time_s,
    .clock_s = cuda_clock_s,
    .op_start_s = cuda_op_start_s,
    .linear_fwd = k_linear_fwd,
    .linear_bwd = k_linear_bwd,
    .add = k_add,
    .scale = k_scale,
    .embed_fwd = k_embed_fwd,
    .embed_bwd = k_embed_bwd,
    .rmsnorm_fwd = k_rmsnorm_fwd,
    .rmsnorm_bwd = k_rmsnorm_bwd,
    .rope_fwd = k_rope_fwd,
    .rope_bwd = k_rope_bwd,
    .attn_fwd = k_attn_fwd,
    .attn_bwd = k_attn_bwd,
    .attn_fwd_flash = k_attn_fwd_flash,
    .attn_bwd_flash = k_attn_bwd_flash,
    .dropout = k_dropout,
    .gemm_math = cuda_gemm_math,
    .swiglu_fwd = k_swiglu_fwd,
    .swiglu_bwd = k_swiglu_bwd,
    .layernorm_fwd = k_layernorm_fwd,
    .layernorm_bwd = k_layernorm_bwd,
    .gelu_fwd = k_gelu_fwd,
    .gelu_bwd = k_gelu_bwd,
    .bias_add = k_bias_add,
    .bias_grad = k_bias_grad,
    .xent_stats = k_xent_stats,
    .xent_combine = k_xent_combine,
    .xent_bwd = k_xent_bwd,
    .adamw = k_adamw,
    .all_gather = cuda_all_gather,
    .reduce_scatter = cuda_reduce_scatter,
    .all_reduce = cuda_all_reduce,
    .broadcast = cuda_broadcast,
    .send = cuda_send,
    .recv = cuda_recv,
    .p2p_group = cuda_p2p_group,
    .all_gather_ring = cuda_all_gather_ring,
    .arm_start = cuda_arm_start,
    .mark = cuda_mark,
    .wait_mark = cuda_wait_mark,
    .p2p_rendezvous = 1,
    .event_begin = cuda_event_begin,
    .event_end = cuda_event_end,
    .device_memory = 1,
    .event_elapsed_s = cuda_event_elapsed_s,
};

/* The module's one exported symbol. */
#define GS_MODULE_ENTRY_(n) gs_driver_cuda_module_abi##n
#define GS_MODULE_ENTRY(n) GS_MODULE_ENTRY_(n)
__attribute__((visibility("default"))) const gs_driver_ops *GS_MODULE_ENTRY(GS_DRIVER_ABI)(void);
const gs_driver_ops *GS_MODULE_ENTRY(GS_DRIVER_ABI)(void)
{
    return &gs_driver_cuda;
}
