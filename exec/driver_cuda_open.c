/* The cuda driver's opening and closing: per-rank set-up threads, NCCL communicators, teardown
 * (exec/driver_cuda_internal.h). */
#include "exec/driver_cuda_internal.h"
#include "kernels/cuda/kernels_cuda.h"

/* ---- lifetime ------------------------------------------------------------------------------- */

void gs__cuda_release_frees(rank_dev *r)
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
    double t0 = gs__cuda_mono_s();
    while (st == ncclInProgress && gs__cuda_mono_s() - t0 < d->timeout_s) {
        gs__cuda_nap();
        if (ncclCommGetAsyncError(c, &st) != ncclSuccess)
            break;
    }
    if (st == ncclSuccess)
        ncclCommDestroy(c);
    else
        ncclCommAbort(c);
}

void gs__cuda_close(gs_drv *d)
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
        gs__cuda_release_frees(r);
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

/* Records this device's clock base: a CUDA event and the host time it completed. */
cudaError_t gs__cuda_rebase(rank_dev *r)
{
    cudaError_t e = cudaEventRecord(r->base, r->setup);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(r->base);
    r->base_host_s = gs__cuda_mono_s();
    return e;
}

typedef struct init_job {
    gs_drv *d;
    uint64_t rank;
} init_job;

#define INIT_CU(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            r->init_rc =                                                                                               \
                gs_error_set(&r->init_err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 " (device %d): %s: %s",        \
                             j->rank, r->dev, #call, cudaGetErrorString(e_));                                          \
            goto out;                                                                                                  \
        }                                                                                                              \
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
    r->inited = 1; /* from here on gs__cuda_abort_comms may touch it */
    if ((r->init_rc = gs__cuda_nccl_wait(d, r, r->world, j->rank, "ncclCommInitRankConfig (world)", err)) != GS_OK)
        goto out;
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++) {
        uint64_t size = 0;
        /* hierarchical CP's two levels only on a mesh that has them (every rank skips alike,
         * so the collective splits stay matched); a group used nowhere costs a split */
        if ((k == GS_GROUP_CP_A2A || k == GS_GROUP_CP_P2P) && !(d->mesh.cp > 1 && d->mesh.cp_a2a > 1))
            continue;
        uint64_t color = d->opts->group_of(&d->mesh, (gs_group_kind)k, j->rank, &size);
        char what[96];
        snprintf(what, sizeof what, "ncclCommSplit (%s group %" PRIu64 ")", gs__cuda_group_name((gs_group_kind)k),
                 color);
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
        if ((r->init_rc = gs__cuda_nccl_wait(d, r, r->world, j->rank, what, err)) != GS_OK)
            goto out;
        if (!r->comm[k]) {
            r->init_rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank %" PRIu64 ": %s gave no communicator",
                                      j->rank, what);
            goto out;
        }
        if ((r->init_rc = gs__cuda_nccl_wait(d, r, r->comm[k], j->rank, what, err)) != GS_OK)
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
        if ((r->init_rc = gs__cuda_nccl_wait(d, r, r->world, j->rank, "p2p warm-up with the pipeline neighbours",
                                             err)) != GS_OK ||
            (r->init_rc = gs__cuda_poll_stream(d, r, j->rank, r->setup, NULL, "p2p warm-up", err)) != GS_OK)
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
        if ((r->init_rc = gs__cuda_nccl_wait(d, r, tc, j->rank, "p2p warm-up with the TP ring neighbours",
                                             err)) != GS_OK ||
            (r->init_rc = gs__cuda_poll_stream(d, r, j->rank, r->setup, NULL, "TP ring warm-up", err)) != GS_OK)
            goto out;
    }
    INIT_CU(gs__cuda_rebase(r));
out:
    if (probe) {
        cudaStreamSynchronize(r->setup);
        cudaFree(probe);
    }
    if (r->init_rc != GS_OK)
        gs__cuda_abort(d, r->init_err.msg);
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
                                                           (size_t)opts->attn_kv_heads, (size_t)opts->attn_seq_mult,
                                                           GS_ATTN_GEMM_SCRATCH_BYTES, bytes, err)
                    : gs_attn_gemm_max_scratch_bytes(&opts->sch->ranks[k], (size_t)opts->attn_heads,
                                                     (size_t)opts->attn_kv_heads, (size_t)opts->attn_seq_mult,
                                                     GS_ATTN_GEMM_SCRATCH_BYTES, bytes, err);
            if (rc != GS_OK)
                gs_error_prefix(err, "cuda driver: rank %" PRIu64, rank);
            return rc;
        }
    return GS_OK;
}

/* The largest scratch a linear layer's GEMM of the rank's schedule takes outside the ledger,
 * from its GEMM events (m x k inputs, k x n weights, m x n outputs; 0 when the schedule is not
 * known): with bf16 GEMM inputs their casts, 2 B x (m k + k n + m n) (the forward's and either
 * backward product's pair) + 256 for the second copy's alignment; under FP8
 * (exec/driver_cuda_fp8.c) the backward's dequantized copies of x, w, dy and the weight
 * gradient, 4 B x (m k + 2 k n + m n), + the casts' scratch and each copy's 256-byte alignment. */
static uint64_t gemm_scratch_bytes(const gs_driver_opts *opts, uint64_t rank, int fp8)
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
                uint64_t b = fp8 ? 4 * (m * kk + 2 * kk * n + m * n) + 4 * (gs_cu_fp8_scratch_floats() + 5 * 64)
                                 : 2 * (m * kk + kk * n + m * n) + 256;
                most = b > most ? b : most;
            }
    return most;
}

/* The NCCL id of the job: process 0's, broadcast (with whether process 0 could make one). */
typedef struct id_msg {
    int32_t ok;
    ncclUniqueId id;
} id_msg;

/* The environment's choices for the driver (gs_driver_settings), checked. */
typedef struct open_choice {
    gs_attn_path_pref attn_pref; /* GRIDSTEP_CUDA_ATTENTION */
    int gemm_tf32, gemm_bf16;    /* GRIDSTEP_CUDA_GEMM, or the scenario's precision */
    int fp8_lt;                  /* GRIDSTEP_CUDA_FP8=cublaslt */
} open_choice;

/* Fills ch from opts; GS_ERR_INPUT naming the variable when one is unknown (ch then holds what
 * could be read). */
static gs_status open_choices(const gs_driver_opts *opts, open_choice *ch, gs_error *err)
{
    gs_status rc = GS_OK;
    ch->attn_pref = GS_ATTN_PATH_AUTO;
    if (gs_attn_path_parse(opts ? opts->set.cuda_attention : NULL, &ch->attn_pref, err) != GS_OK) {
        gs_error_prefix(err, "cuda driver");
        rc = GS_ERR_INPUT;
    }
    const char *gm = opts ? opts->set.cuda_gemm : NULL;
    ch->gemm_tf32 = gm && strcmp(gm, "tf32") == 0, ch->gemm_bf16 = gm && strcmp(gm, "bf16") == 0;
    if (!(gm && *gm))
        ch->gemm_bf16 = opts && opts->gemm_bf16; /* the scenario's precision decides (mixed bf16) */
    if (rc == GS_OK && gm && *gm && !ch->gemm_tf32 && !ch->gemm_bf16 && strcmp(gm, "fp32") != 0)
        rc = gs_error_set(err, GS_ERR_INPUT, "cuda driver: GRIDSTEP_CUDA_GEMM is '%s', expected fp32, tf32 or bf16",
                          gm);
    const char *f8 = opts ? opts->set.cuda_fp8 : NULL;
    ch->fp8_lt = f8 && strcmp(f8, "cublaslt") == 0;
    if (rc == GS_OK && f8 && *f8 && !ch->fp8_lt && strcmp(f8, "emulate") != 0)
        rc = gs_error_set(err, GS_ERR_INPUT, "cuda driver: GRIDSTEP_CUDA_FP8 is '%s', expected emulate or cublaslt",
                          f8);
    return rc;
}

/* Rank i's memory on device dev: the memory ledger's peak, plus on the GEMM attention path the
 * largest dP/dS scratch a backward attention call of the rank's schedule allocates, with bf16
 * GEMM inputs the largest pair of cast inputs, and under FP8 the largest GEMM's dequantized
 * copies (all cudaMallocAsync, outside the ledger), vs the device's free memory. */
static gs_status check_rank_memory(const gs_driver_opts *opts, const open_choice *ch, uint64_t i, int dev,
                                   gs_error *err)
{
    size_t freeb = 0, total = 0;
    uint64_t scratch = 0;
    gs_status rc = GS_OK;
    int attn_gemm = ch->attn_pref != GS_ATTN_PATH_KERNELS; /* the GEMM path may run */
    /* auto runs the kernels for every call of a model with attention dropout: no scratch */
    int gemm_may_run = attn_gemm && !(ch->attn_pref == GS_ATTN_PATH_AUTO && opts->attn_dropout);
    if (gemm_may_run && (rc = attn_scratch_bytes(opts, i, &scratch, err)) != GS_OK)
        return rc;
    /* auto runs the kernels for a call whose one kv head exceeds the cap, so the calls it
     * runs on the GEMM path take the cap at most */
    if (ch->attn_pref == GS_ATTN_PATH_AUTO && scratch > GS_ATTN_GEMM_SCRATCH_BYTES)
        scratch = GS_ATTN_GEMM_SCRATCH_BYTES;
    if (ch->gemm_bf16)
        scratch += gemm_scratch_bytes(opts, i, 0);
    if (opts->fp8)
        scratch += gemm_scratch_bytes(opts, i, 1);
    uint64_t need = opts->rank_peak_bytes[i] > UINT64_MAX - scratch ? UINT64_MAX : opts->rank_peak_bytes[i] + scratch;
    cudaError_t ce;
    if ((ce = cudaSetDevice(dev)) != cudaSuccess || (ce = cudaMemGetInfo(&freeb, &total)) != cudaSuccess)
        return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: device %d: cudaMemGetInfo: %s", dev,
                            cudaGetErrorString(ce));
    if (need > freeb && scratch)
        return gs_error_set(
            err, GS_ERR_INPUT,
            "cuda driver: rank %" PRIu64 " needs the memory ledger's peak %.3f GiB (fp32) + "
            "scratch %.3f GiB (the GEMM attention path's scores, none with GRIDSTEP_CUDA_ATTENTION=kernels; "
            "bf16 GEMM inputs: their casts; FP8: the GEMM inputs' dequantized copies) > "
            "free %.3f GiB on device %d (of %.3f GiB); refused before allocating",
            i, (double)opts->rank_peak_bytes[i] / 1073741824.0, (double)scratch / 1073741824.0,
            (double)freeb / 1073741824.0, dev, (double)total / 1073741824.0);
    if (need > freeb)
        return gs_error_set(err, GS_ERR_INPUT,
                            "cuda driver: rank %" PRIu64 " needs %.3f GiB (the memory ledger's peak, fp32) but "
                            "device %d has %.3f GiB free of %.3f GiB; refused before allocating",
                            i, (double)opts->rank_peak_bytes[i] / 1073741824.0, dev, (double)freeb / 1073741824.0,
                            (double)total / 1073741824.0);
    return GS_OK;
}

/* The devices this process's ranks [lo, hi) need: enough of them, with room for each rank's
 * memory. rc: the environment's verdict so far (an error is kept; the devices are still
 * counted). */
static gs_status check_devices(const gs_mesh *mesh, const gs_driver_opts *opts, const open_choice *ch, uint64_t lo,
                               gs_status rc, gs_error *err)
{
    const gs_exec_boot *boot = gs_boot_active(opts->boot) ? opts->boot : NULL;
    uint64_t hi = boot ? lo + 1 : mesh->world;
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
    for (uint64_t i = lo; rc == GS_OK && opts->rank_peak_bytes && i < hi; i++)
        rc = check_rank_memory(opts, ch, i, boot ? boot->local_rank : (int)i, err);
    return rc;
}

/* d's NCCL unique id: made here, or across processes by process 0 and broadcast (every process
 * gets it, or process 0's failure). */
static gs_status make_nccl_id(gs_drv *d, const gs_exec_boot *boot, gs_error *err)
{
    if (!boot) {
        ncclResult_t nr = ncclGetUniqueId(&d->id);
        if (nr != ncclSuccess)
            return gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: ncclGetUniqueId: %s", ncclGetErrorString(nr));
        return GS_OK;
    }
    id_msg m;
    memset(&m, 0, sizeof m);
    if (boot->proc == 0) {
        ncclResult_t nr = ncclGetUniqueId(&m.id);
        m.ok = nr == ncclSuccess;
        if (!m.ok)
            gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank 0: ncclGetUniqueId: %s", ncclGetErrorString(nr));
    }
    gs_status rc = boot->bcast(boot->ctx, &m, sizeof m, 0, err);
    if (rc != GS_OK)
        return rc;
    if (!m.ok)
        return boot->proc == 0 ? GS_ERR_RUNTIME
                               : gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: rank 0 could not make the NCCL id");
    d->id = m.id;
    return GS_OK;
}

/* Sets up ranks [lo, hi), a thread each (init_rank); the first failure. */
static gs_status start_ranks(gs_drv *d, uint64_t lo, uint64_t hi, gs_error *err)
{
    gs_status rc = GS_OK;
    pthread_t *th = calloc(d->world, sizeof *th);
    init_job *jobs = calloc(d->world, sizeof *jobs);
    int *started = calloc(d->world, sizeof *started);
    if (!th || !jobs || !started) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
        goto out;
    }
    for (uint64_t i = lo; i < hi; i++) {
        jobs[i] = (init_job){d, i};
        started[i] = pthread_create(&th[i], NULL, init_rank, &jobs[i]) == 0;
        if (!started[i]) {
            rc = gs_error_set(err, GS_ERR_RUNTIME, "cuda driver: cannot start the set-up thread of rank %" PRIu64, i);
            gs__cuda_abort(d, err->msg);
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
    if (rc == GS_OK && gs__cuda_aborted(d, err))
        rc = GS_ERR_RUNTIME;
out:
    free(th);
    free(jobs);
    free(started);
    return rc;
}

/* The driver's state for mesh, its ranks' locks and error slots; NULL out of memory. */
static gs_drv *drv_new(const gs_mesh *mesh, const gs_driver_opts *opts, const open_choice *ch, uint64_t lo)
{
    const gs_exec_boot *boot = gs_boot_active(opts->boot) ? opts->boot : NULL;
    gs_drv *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->mesh = *mesh;
    d->world = mesh->world;
    d->opts = opts;
    d->local = boot ? lo : UINT64_MAX;
    d->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : 60.0;
    d->tf32 = ch->gemm_tf32;
    d->bf16 = ch->gemm_bf16;
    d->fp8_lt = ch->fp8_lt;
    d->attn_pref = ch->attn_pref;
    pthread_mutex_init(&d->mu, NULL);
    gs_error_init(&d->abort_err);
    d->r = calloc(d->world, sizeof *d->r);
    if (!d->r) {
        d->world = 0;
        gs__cuda_close(d);
        return NULL;
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
    return d;
}

gs_status gs__cuda_open(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err)
{
    *out = NULL;
    const gs_exec_boot *boot = opts && gs_boot_active(opts->boot) ? opts->boot : NULL;
    /* the number of processes a launcher started (cli/ reads the variables cli/mpi_exec.c reads:
     * srun's SLURM_STEP_NUM_TASKS, set inside a job step only) */
    const char *var = opts ? opts->set.launcher_var : NULL;
    long procs = opts && opts->set.launcher_procs > 1 ? opts->set.launcher_procs : 1;
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
    open_choice ch;
    gs_status rc = open_choices(opts, &ch, err);
    if (boot && (uint64_t)boot->procs != mesh->world)
        return gs_error_set(err, GS_ERR_INPUT, "cuda driver: the scenario has %" PRIu64 " ranks, but %d processes were "
                            "started (one rank per process)", mesh->world, boot->procs);
    /* the ranks this process sets up, and their devices */
    uint64_t lo = boot ? (uint64_t)boot->proc : 0, hi = boot ? lo + 1 : mesh->world;
    rc = check_devices(mesh, opts, &ch, lo, rc, err);
    if (boot)
        rc = agree_local(boot, rc, err);
    if (rc != GS_OK)
        return rc;
    gs_drv *d = drv_new(mesh, opts, &ch, lo);
    if (!d)
        return gs_error_set(err, GS_ERR_NOMEM, "cuda driver: out of memory");
    /* collectives connect at init, not in the middle of a step's issue */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    if ((rc = make_nccl_id(d, boot, err)) == GS_OK)
        rc = start_ranks(d, lo, hi, err);
    if (rc != GS_OK) {
        gs__cuda_close(d);
        return rc;
    }
    *out = d;
    return GS_OK;
}
