/* The cuda driver's insides shared by its files (exec/driver_cuda.c: the driver, its streams,
 * events and memory; driver_cuda_open.c: opening and closing; driver_cuda_compute.c: GEMMs and
 * kernels; driver_cuda_moe.c: the mixture-of-experts kernels; driver_cuda_fp8.c: the FP8 linear
 * layers; driver_cuda_nccl.c: collectives and p2p). Private to gridstep-cuda.so.
 *
 * The driver owns its ranks' devices, communicators and streams; a stream belongs to its rank
 * until stream_destroy, an event to its creator until event_destroy. */
#ifndef GS_EXEC_DRIVER_CUDA_INTERNAL_H
#define GS_EXEC_DRIVER_CUDA_INTERNAL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "exec/cuda_attn_plan.h"
#include "exec/driver.h"

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
    void *fp8_buf;   /* FP8 linear layers: the GEMM inputs' dequantized FP8 copies and the casts'
                        amax scratch (exec/driver_cuda_fp8.c), grown on demand */
    size_t fp8_cap;  /* bytes */
    void *grp_buf;   /* grouped GEMMs: the problems' device pointer arrays (exec/driver_cuda_grouped.c) */
    size_t grp_cap;  /* bytes */
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
    int fp8_lt; /* GRIDSTEP_CUDA_FP8=cublaslt: FP8 linear layers through cuBLASLt's FP8 GEMMs */
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

/* A CUDA call on stream s's work: a failure fails the stream (gs__cuda_fail_stream). */
#define CU_OK(s, call)                                                                                           \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess)                                                                                   \
            gs__cuda_fail_stream((s), "%s: %s", #call, cudaGetErrorString(e_));                                  \
    } while (0)

/* ---- exec/driver_cuda.c: helpers, abort, polling, events ---- */
double gs__cuda_mono_s(void);
void gs__cuda_nap(void);
const char *gs__cuda_group_name(gs_group_kind k);
void gs__cuda_abort_comms(gs_drv *d);
void gs__cuda_abort(gs_drv *d, const char *msg);
int gs__cuda_aborted(gs_drv *d, gs_error *err);
/* Records the first failure of work issued to s (the call, the rank, the event) and aborts. */
void gs__cuda_fail_stream(gs_drv_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaStream_t gs__cuda_work_on(gs_drv_stream *s);
void gs__cuda_kernel_ok(gs_drv_stream *s, const char *name, int rc);
gs_status gs__cuda_poll_stream(gs_drv *d, rank_dev *r, uint64_t rank, cudaStream_t cs, const gs_drv_stream *s,
                               const char *what, gs_error *err);
gs_status gs__cuda_nccl_wait(gs_drv *d, rank_dev *r, ncclComm_t c, uint64_t rank, const char *what, gs_error *err);
gs_status gs__cuda_event_record(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err);
gs_status gs__cuda_stream_wait_event(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err);

/* ---- exec/driver_cuda_open.c: lifetime ---- */
void gs__cuda_release_frees(rank_dev *r);
void gs__cuda_close(gs_drv *d);
cudaError_t gs__cuda_rebase(rank_dev *r);
gs_status gs__cuda_open(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err);

/* ---- exec/driver_cuda_compute.c: the compute ops ---- */
/* The stream's GEMM workspace (allocated on the stream at its first GEMM); 0 when it failed. */
int gs__cuda_ensure_workspace(gs_drv_stream *s);
/* *buf (capacity *cap bytes) grown on the stream to at least `bytes` (the old one freed on the
 * stream); NULL when the allocation failed (the stream then fails, naming `what`). */
void *gs__cuda_stream_buffer(gs_drv_stream *s, void **buf, size_t *cap, size_t bytes, const char *what);
/* D = op(A) op(B) + beta C (alpha 1; C and D the same buffer c, layout lc) on the stream's work
 * queue, with cuBLASLt's first heuristic algorithm for `op` within the stream's GEMM workspace
 * (gs__cuda_ensure_workspace) and told the operands' alignments. Returns the status,
 * CUBLAS_STATUS_NOT_SUPPORTED when the heuristic has no algorithm (nothing issued); *call names
 * the call it stopped at. The descriptor and layouts stay the caller's. */
cublasStatus_t gs__cuda_lt_run(gs_drv_stream *s, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                               cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const void *a, const void *b,
                               float beta, float *c, const char **call);
/* Destroys what a GEMM's setup created (each may be NULL). */
void gs__cuda_lt_free(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                      cublasLtMatrixLayout_t lc);
void gs__cuda_k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n);
void gs__cuda_k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                           size_t t, size_t k, size_t n);
cublasStatus_t gs__cuda_blas_create(gs_drv_stream *s, const char **call);
void gs__cuda_k_add(gs_drv_stream *s, float *y, const float *x, size_t n);
void gs__cuda_k_scale(gs_drv_stream *s, float *y, float a, size_t n);
void gs__cuda_k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn,
                          size_t h, float *y);
void gs__cuda_k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                          size_t h, float *dw);
void gs__cuda_k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                            float eps);
void gs__cuda_k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                            float *dx, float *dg, size_t t, size_t h);
void gs__cuda_k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th);
void gs__cuda_k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th);
void gs__cuda_k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                         const gs_dropout *drop);
void gs__cuda_k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop);
void gs__cuda_k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                               size_t nkv, size_t hd, const gs_dropout *drop);
void gs__cuda_k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                               float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                               size_t hd, const gs_dropout *drop);
const char *gs__cuda_gemm_math(gs_drv *d);
void gs__cuda_k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop);
void gs__cuda_k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                              float *rstd, size_t t, size_t h, float eps);
void gs__cuda_k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                              const float *dy, float *dx, float *dg, float *db, size_t t, size_t h);
void gs__cuda_k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n);
void gs__cuda_k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n);
void gs__cuda_k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n);
void gs__cuda_k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n);
void gs__cuda_k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f);
void gs__cuda_k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f);
void gs__cuda_k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                           float *stats);
void gs__cuda_k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss);
void gs__cuda_k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                         size_t lo, size_t vn, float scale, float *dlogits);
void gs__cuda_k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, uint64_t step);

/* ---- exec/driver_cuda_moe.c: the mixture-of-experts kernels ---- */
void gs__cuda_k_moe_topk_fwd(gs_drv_stream *s, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                             float *probs);
void gs__cuda_k_moe_topk_bwd(gs_drv_stream *s, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                             size_t experts, size_t k, float *dlogits);
void gs__cuda_k_rows_gather(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                            float *dst);
void gs__cuda_k_rows_scatter_add(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n,
                                 size_t h, float *dst);
void gs__cuda_k_rows_dot(gs_drv_stream *s, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                         float *out);

/* ---- exec/driver_cuda_fp8.c: FP8 linear layers (current scaling) ---- */
void gs__cuda_k_linear_fwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, float *y,
                                   const uint64_t *rows, size_t groups, size_t k, size_t n);
void gs__cuda_k_linear_bwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride,
                                   const float *dy, float *dx, float *dw, const uint64_t *rows, size_t groups,
                                   size_t k, size_t n);
void gs__cuda_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc);
void gs__cuda_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc);

/* ---- exec/driver_cuda_nccl.c: collectives and p2p ---- */
gs_status gs__cuda_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err);
gs_status gs__cuda_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                  float *recv, size_t count, gs_error *err);
gs_status gs__cuda_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                              size_t count, gs_error *err);
gs_status gs__cuda_all_reduce_max(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                  size_t count, gs_error *err);
gs_status gs__cuda_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                             size_t count, uint64_t root, gs_error *err);
gs_status gs__cuda_all_to_all(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err);
gs_status gs__cuda_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                             gs_error *err);
gs_status gs__cuda_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                        gs_error *err);
gs_status gs__cuda_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                        gs_error *err);
gs_status gs__cuda_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err);
gs_status gs__cuda_wait_mark(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err);
gs_status gs__cuda_all_gather_ring(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                   float *recv, size_t count, gs_drv_event *const *marks, uint64_t token,
                                   gs_error *err);

#endif
