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
 * schedule event (event_begin) and aborts the driver.
 *
 * This file holds the driver's helpers, polling, memory, streams, events and clock, and the ops
 * table; opening and closing are exec/driver_cuda_open.c, the compute ops
 * exec/driver_cuda_compute.c, NCCL exec/driver_cuda_nccl.c (shared: exec/driver_cuda_internal.h). */
#include <stdarg.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

#include "exec/driver_cuda_internal.h"
#include "kernels/cuda/kernels_cuda.h"

double gs__cuda_mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void gs__cuda_nap(void)
{
    struct timespec t = {0, 20000}; /* 20 us */
    nanosleep(&t, NULL);
}

const char *gs__cuda_group_name(gs_group_kind k)
{
    static const char *const n[GS_GROUP_KIND_COUNT] = {"dp", "dp_intra", "dp_inter", "tp", "pp",
                                                       "cp", "ep", "edp", "etp", "tpep", "cp_a2a", "cp_p2p",
                                                       "stage"};
    return (int)k < GS_GROUP_KIND_COUNT ? n[k] : "?";
}

static const char *stream_name(gs_stream k)
{
    static const char *const n[GS_STREAM_COUNT] = {"compute", "dp", "tp", "pp", "copy"};
    return (int)k < GS_STREAM_COUNT ? n[k] : "?";
}

/* ---- abort ---------------------------------------------------------------------------------- */

/* Aborts every communicator (each under its rank's lock, so no thread is inside a call on it). */
void gs__cuda_abort_comms(gs_drv *d)
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

void gs__cuda_abort(gs_drv *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    int first = !d->aborted;
    if (first) {
        d->aborted = 1;
        gs_error_set(&d->abort_err, GS_ERR_RUNTIME, "%s", msg);
    }
    pthread_mutex_unlock(&d->mu);
    if (first)
        gs__cuda_abort_comms(d);
}

int gs__cuda_aborted(gs_drv *d, gs_error *err)
{
    pthread_mutex_lock(&d->mu);
    int a = d->aborted;
    if (a && err)
        *err = d->abort_err;
    pthread_mutex_unlock(&d->mu);
    return a;
}

/* Records the first failure of work issued to s (the call, the rank, the event) and aborts. */
void gs__cuda_fail_stream(gs_drv_stream *s, const char *fmt, ...)
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
    gs__cuda_abort(s->d, s->err.msg);
}

/* The stream for work about to be enqueued: the first work of a launch first records the event
 * arm_start gave it, so the event's time is when the device began this launch's work, after
 * whatever the host spent before enqueuing it (driver.h: arm_start). */
cudaStream_t gs__cuda_work_on(gs_drv_stream *s)
{
    if (s->armed) {
        gs_drv_event *e = s->armed;
        s->armed = NULL;
        gs_error err;
        gs_error_init(&err);
        if (gs__cuda_event_record(s->d, s, e, &err) != GS_OK)
            gs__cuda_fail_stream(s, "%s", err.msg);
    }
    return s->cs;
}

/* Kernel launchers return a cudaError_t as int. */
void gs__cuda_kernel_ok(gs_drv_stream *s, const char *name, int rc)
{
    if (rc != 0)
        gs__cuda_fail_stream(s, "kernel %s: %s", name, cudaGetErrorString((cudaError_t)rc));
}

/* ---- polling with the timeout --------------------------------------------------------------- */

/* The async error of rank r's communicators (ncclSuccess when none; r->mu held). */
static ncclResult_t comms_error(rank_dev *r, const char **which)
{
    for (int k = 0; k <= GS_GROUP_KIND_COUNT; k++) {
        ncclComm_t c = k < GS_GROUP_KIND_COUNT ? r->comm[k] : r->world;
        ncclResult_t st = ncclSuccess;
        if (c && ncclCommGetAsyncError(c, &st) == ncclSuccess && st != ncclSuccess && st != ncclInProgress) {
            *which = k < GS_GROUP_KIND_COUNT ? gs__cuda_group_name((gs_group_kind)k) : "world";
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
gs_status gs__cuda_poll_stream(gs_drv *d, rank_dev *r, uint64_t rank, cudaStream_t cs, const gs_drv_stream *s,
                               const char *what, gs_error *err)
{
    double t0 = gs__cuda_mono_s(), t_abort = -1;
    uint64_t seen = progress_of(s);
    for (;;) {
        cudaError_t q = cudaStreamQuery(cs);
        int ab = gs__cuda_aborted(d, NULL);
        if (q == cudaSuccess) {
            if (ab) {
                if (err)
                    gs__cuda_aborted(d, err);
                return GS_ERR_RUNTIME;
            }
            return GS_OK;
        }
        if (q != cudaErrorNotReady) {
            char msg[GS_ERROR_MSG_BYTES];
            snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: cudaStreamQuery: %s", rank, what, cudaGetErrorString(q));
            gs__cuda_abort(d, msg);
            return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
        }
        double now = gs__cuda_mono_s();
        uint64_t p = progress_of(s);
        if (p > seen) {
            seen = p;
            t0 = now;
        }
        if (ab) {
            if (t_abort < 0)
                t_abort = now;
            if (now - t_abort > d->timeout_s) {
                gs__cuda_aborted(d, err);
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
                         "rank %" PRIu64
                         ": %s: timed out: no progress for %g s (a collective or a peer did not finish); "
                         "communicators aborted",
                         rank, what, d->timeout_s);
            if (msg[0]) {
                gs__cuda_abort(d, msg);
                t_abort = now;
            }
        }
        gs__cuda_nap();
    }
}

/* Waits for a non-blocking communicator's pending call (init, split, group end). */
gs_status gs__cuda_nccl_wait(gs_drv *d, rank_dev *r, ncclComm_t c, uint64_t rank, const char *what, gs_error *err)
{
    double t0 = gs__cuda_mono_s();
    for (;;) {
        ncclResult_t st = ncclInProgress;
        pthread_mutex_lock(&r->mu);
        ncclResult_t q = ncclSuccess;
        int gone = gs__cuda_aborted(d, NULL);
        if (!gone)
            q = ncclCommGetAsyncError(c, &st);
        pthread_mutex_unlock(&r->mu);
        if (gone) {
            gs_error e;
            gs__cuda_aborted(d, &e);
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
        else if (gs__cuda_mono_s() - t0 > d->timeout_s)
            snprintf(msg, sizeof msg, "rank %" PRIu64 ": %s: timed out after %g s; communicators aborted", rank, what,
                     d->timeout_s);
        if (msg[0]) {
            gs__cuda_abort(d, msg);
            return gs_error_set(err, GS_ERR_RUNTIME, "%s", msg);
        }
        gs__cuda_nap();
    }
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
    CU_OK(s, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, gs__cuda_work_on(s)));
    if (wait) {
        gs_error e;
        gs_error_init(&e);
        if (gs__cuda_poll_stream(d, &d->r[s->rank], s->rank, s->cs, s,
                                 kind == cudaMemcpyHostToDevice ? "upload" : "download", &e) != GS_OK)
            gs__cuda_fail_stream(s, "%s", e.msg);
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
    gs__cuda_kernel_ok(s, "fill", gs_cu_fill(gs__cuda_work_on(s), dst, value, n));
}

/* ---- streams, events, clock ----------------------------------------------------------------- */

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
        return gs_error_set(err, GS_ERR_RUNTIME,
                            "cuda driver: rank %" PRIu64 " stream %s: cudaStreamCreateWithFlags: %s", rank,
                            stream_name(kind), cudaGetErrorString(e));
    }
    pthread_mutex_lock(&r->mu);
    s->next_of_rank = r->streams;
    r->streams = s;
    pthread_mutex_unlock(&r->mu);
    const char *call = NULL;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (d->attn_pref != GS_ATTN_PATH_KERNELS && kind == GS_STREAM_COMPUTE &&
        (bs = gs__cuda_blas_create(s, &call)) != CUBLAS_STATUS_SUCCESS) {
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
    if (s->fp8_buf)
        cudaFreeAsync(s->fp8_buf, s->cs);
    if (s->grp_buf)
        cudaFreeAsync(s->grp_buf, s->cs);
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
    if (gs__cuda_aborted(d, err))
        return GS_ERR_RUNTIME;
    if (cudaSetDevice(s->dev) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": cudaSetDevice(%d) failed", s->rank, s->dev);
    gs_status rc = fn(arg, s, err);
    if (rc == GS_OK && s->armed)
        gs__cuda_work_on(s); /* it enqueued nothing: its start is its end */
    s->armed = NULL;
    if (rc != GS_OK) {
        gs__cuda_abort(d, err->msg[0] ? err->msg : gs_status_name(rc));
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

gs_status gs__cuda_event_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
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

gs_status gs__cuda_stream_wait_event(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err)
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
    gs_status rc = gs__cuda_poll_stream(d, &d->r[s->rank], s->rank, s->cs, s, what, err);
    if (rc == GS_OK && (rc = stream_status(s, err)) == GS_OK) {
        rank_dev *r = &d->r[s->rank];
        pthread_mutex_lock(&r->mu);
        if (r->frees && rank_idle(r))
            gs__cuda_release_frees(r);
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
    if (idle && !gs__cuda_aborted(d, NULL))
        for (uint64_t i = 0; i < d->world; i++) {
            if (d->local != UINT64_MAX && i != d->local)
                continue;
            cudaSetDevice(d->r[i].dev);
            gs__cuda_rebase(&d->r[i]);
        }
    return gs__cuda_mono_s();
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

static double cuda_op_start_s(gs_drv *d, gs_drv_stream *s)
{
    (void)d, (void)s;
    return -1; /* the stream's order decides; the event's posted time stands for its start */
}

static const gs_driver_ops gs_driver_cuda = {
    .name = "cuda",
    .description = "NVIDIA GPUs: a GPU per rank, a CUDA stream per schedule stream, cuBLASLt, kernels/cuda, NCCL",
    .open = gs__cuda_open,
    .close = gs__cuda_close,
    .abort = gs__cuda_abort,
    .aborted = gs__cuda_aborted,
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
    .event_record = gs__cuda_event_record,
    .stream_wait_event = gs__cuda_stream_wait_event,
    .stream_sync = cuda_stream_sync,
    .event_time_s = cuda_event_time_s,
    .clock_s = cuda_clock_s,
    .op_start_s = cuda_op_start_s,
    .k.linear_fwd = gs__cuda_k_linear_fwd,
    .k.linear_bwd = gs__cuda_k_linear_bwd,
    .k.add = gs__cuda_k_add,
    .k.scale = gs__cuda_k_scale,
    .k.embed_fwd = gs__cuda_k_embed_fwd,
    .k.embed_bwd = gs__cuda_k_embed_bwd,
    .k.rmsnorm_fwd = gs__cuda_k_rmsnorm_fwd,
    .k.rmsnorm_bwd = gs__cuda_k_rmsnorm_bwd,
    .k.rope_fwd = gs__cuda_k_rope_fwd,
    .k.rope_bwd = gs__cuda_k_rope_bwd,
    .k.attn_fwd = gs__cuda_k_attn_fwd,
    .k.attn_bwd = gs__cuda_k_attn_bwd,
    .k.attn_fwd_flash = gs__cuda_k_attn_fwd_flash,
    .k.attn_bwd_flash = gs__cuda_k_attn_bwd_flash,
    .k.dropout = gs__cuda_k_dropout,
    .gemm_math = gs__cuda_gemm_math,
    .k.swiglu_fwd = gs__cuda_k_swiglu_fwd,
    .k.swiglu_bwd = gs__cuda_k_swiglu_bwd,
    .k.layernorm_fwd = gs__cuda_k_layernorm_fwd,
    .k.layernorm_bwd = gs__cuda_k_layernorm_bwd,
    .k.gelu_fwd = gs__cuda_k_gelu_fwd,
    .k.gelu_bwd = gs__cuda_k_gelu_bwd,
    .k.bias_add = gs__cuda_k_bias_add,
    .k.bias_grad = gs__cuda_k_bias_grad,
    .k.xent_stats = gs__cuda_k_xent_stats,
    .k.xent_combine = gs__cuda_k_xent_combine,
    .k.xent_bwd = gs__cuda_k_xent_bwd,
    .k.adamw = gs__cuda_k_adamw,
    .k.moe_topk_fwd = gs__cuda_k_moe_topk_fwd,
    .k.moe_topk_bwd = gs__cuda_k_moe_topk_bwd,
    .k.rows_gather = gs__cuda_k_rows_gather,
    .k.rows_scatter_add = gs__cuda_k_rows_scatter_add,
    .k.rows_dot = gs__cuda_k_rows_dot,
    .k.linear_fwd_fp8 = gs__cuda_k_linear_fwd_fp8,
    .k.linear_bwd_fp8 = gs__cuda_k_linear_bwd_fp8,
    .k.fp8_delayed = 1, /* emulated casts at the given scales (exec/driver_cuda_fp8.c) */
    .k.linear_fwd_grouped = gs__cuda_k_linear_fwd_grouped,
    .k.linear_bwd_grouped = gs__cuda_k_linear_bwd_grouped,
    .all_gather = gs__cuda_all_gather,
    .reduce_scatter = gs__cuda_reduce_scatter,
    .all_reduce = gs__cuda_all_reduce,
    .all_reduce_max = gs__cuda_all_reduce_max,
    .broadcast = gs__cuda_broadcast,
    .all_to_all = gs__cuda_all_to_all,
    .send = gs__cuda_send,
    .recv = gs__cuda_recv,
    .p2p_group = gs__cuda_p2p_group,
    .all_gather_ring = gs__cuda_all_gather_ring,
    .arm_start = cuda_arm_start,
    .mark = gs__cuda_mark,
    .wait_mark = gs__cuda_wait_mark,
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
