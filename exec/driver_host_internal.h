/* The host driver's insides shared by its files (exec/driver_host.c: waits, abort, lifetime,
 * memory, streams, events and the ops table; driver_host_compute.c: kernels/host;
 * driver_host_coll.c: collectives; driver_host_p2p.c: send and receive). Private to exec/.
 *
 * The driver owns its streams, events, collective slots and mailboxes, all guarded by its one
 * mutex; a mail owns its copy of the bytes until the receiver takes it. */
#ifndef GS_EXEC_DRIVER_HOST_INTERNAL_H
#define GS_EXEC_DRIVER_HOST_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "exec/boot.h"
#include "exec/driver.h"

/* One rendezvous per process group (kind, index). */
typedef struct coll_slot {
    uint64_t arrived, departed, gen;
    int op;
    size_t count;
    const float **in; /* per member position */
} coll_slot;

typedef struct mail {
    struct mail *next;
    uint64_t bytes;
    unsigned char data[];
} mail;

typedef struct mailbox {
    mail *head, *tail;
    uint64_t posted, taken; /* messages sent and received so far (a rendezvous send waits on taken) */
} mailbox;

typedef enum item_kind { ITEM_FN, ITEM_RECORD, ITEM_WAIT } item_kind;

typedef struct item {
    struct item *next;
    item_kind kind;
    gs_drv_fn fn;
    void *arg;
    gs_drv_event *ev;
} item;

struct gs_drv_event {
    int done;
    double t;       /* seconds, driver clock */
    uint64_t token; /* the largest token it was marked with (host_mark) */
};

/* A thread parked until `on` changes (or the run aborts); lives on the waiting thread's stack and
 * is linked into the driver's list only while it waits (mu held throughout). */
typedef struct waiter {
    struct waiter *prev, *next;
    const void *on;
    pthread_cond_t cv;
    const struct wait_for *wf; /* a wait on another rank (collective, recv), or NULL */
} waiter;

/* What a rank waiting on other ranks waits for, for the timeout message's chain (see
 * append_chain). Lives on the waiting thread's stack. */
typedef struct wait_for {
    uint64_t rank;              /* the waiting rank */
    const struct gs_drv_stream *s; /* its stream (the event it runs) */
    const char *what;           /* "rank R: all_reduce of N floats on tp group G" */
    const gs_drv_group *g;      /* a collective: the members whose input is missing from slot */
    const struct coll_slot *slot;
    uint64_t peer;              /* a recv: the sender; UINT64_MAX: a wait within the rank */
} wait_for;

struct gs_drv_stream {
    gs_drv *d;
    uint64_t rank;
    gs_stream kind;
    item *head, *tail;
    int busy, stop;
    double op_start; /* when the last collective / recv found every party, -1 unknown */
    char event[GS_EVENT_NAME_BYTES]; /* the event the worker runs (event_begin; mu) */
    struct gs_drv_stream *next_all;  /* the driver's list of streams (mu) */
    pthread_t th;
    float *round_buf; /* GRIDSTEP_HOST_GEMM=bf16: the GEMM inputs rounded (the worker's own) */
    size_t round_cap; /* floats */
};

struct gs_drv {
    gs_mesh mesh;
    double timeout_s;
    pthread_mutex_t mu;
    waiter *waiters; /* every parked thread, whatever it waits on */
    gs_drv_stream *streams; /* every stream (next_all) */
    int aborted;
    gs_error abort_err;
    coll_slot *slots[GS_GROUP_KIND_COUNT]; /* world slots per kind (group index < world) */
    mailbox *mail;                         /* world x world, [src * world + dst] */
    char *inbox; /* world: &inbox[dst] is notified whenever mail for dst is posted (a group's
                  * receives wait on it for whichever peer's message comes first) */
    /* Across processes (opts->boot active): this process runs rank boot->proc alone, and every
     * collective and p2p op goes through the bootstrap's transport. */
    const gs_exec_boot *boot;
    void *comm[GS_GROUP_KIND_COUNT]; /* this rank's group of each kind */
    int peer_abort;                  /* the abort came from another process (not announced again) */
    /* GRIDSTEP_HOST_P2P=rendezvous: a send returns only once its receiver has taken the message,
     * as NCCL's (blocking for the GPU) do, so a run shows on the CPU whether its p2p order would
     * deadlock on GPUs (default eager: a send returns at once). One process only. */
    int rendezvous;
    /* GRIDSTEP_HOST_GEMM=bf16: the linear layers' GEMMs take their inputs rounded to bfloat16 and
     * accumulate in fp32, as cuBLASLt's bf16 GEMMs do (the cuda driver's GRIDSTEP_CUDA_GEMM=bf16) */
    int gemm_bf16;
};

/* ---- exec/driver_host.c: waits, abort, op start ---- */
struct timespec gs__host_deadline_in(double s);
void gs__host_notify(gs_drv *d, const void *on);
int gs__host_wait_until(gs_drv *d, const void *on, const struct timespec *dl, const wait_for *wf);
void gs__host_abort_locked(gs_drv *d, const char *msg);
void gs__host_peer_abort_locked(gs_drv *d, const char *msg);
void gs__host_abort(gs_drv *d, const char *msg);
gs_status gs__host_wait_failed_for(gs_drv *d, int why, gs_error *err, const char *what, const wait_for *wf);
gs_status gs__host_wait_failed(gs_drv *d, int why, gs_error *err, const char *what);
void gs__host_mark_start(gs_drv_stream *s);

/* ---- exec/driver_host_compute.c: kernels/host ---- */
void gs__host_k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n);
void gs__host_k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                           size_t t, size_t k, size_t n);
void gs__host_k_add(gs_drv_stream *s, float *y, const float *x, size_t n);
void gs__host_k_scale(gs_drv_stream *s, float *y, float a, size_t n);
void gs__host_k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn,
                          size_t h, float *y);
void gs__host_k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                          size_t h, float *dw);
void gs__host_k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                            float eps);
void gs__host_k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                            float *dx, float *dg, size_t t, size_t h);
void gs__host_k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th);
void gs__host_k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th);
void gs__host_k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                         const gs_dropout *drop);
void gs__host_k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop);
void gs__host_k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                               size_t nkv, size_t hd, const gs_dropout *drop);
void gs__host_k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                               float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                               size_t hd, const gs_dropout *drop);
int gs__host_sends_wait(gs_drv *d);
const char *gs__host_gemm_math(gs_drv *d);
/* Room for a GEMM's rounded or cast inputs in the stream's own buffer (round_buf: the stream's
 * worker is its only user); NULL when it cannot grow, and then gs__host_round_failed aborts the
 * run naming what ("bf16", "FP8"). */
float *gs__host_round_room(gs_drv_stream *s, size_t floats);
void gs__host_round_failed(gs_drv_stream *s, const char *what);
/* The FP8 linear kernels (exec/driver_host_fp8.c). */
void gs__host_k_linear_fwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, float *y,
                                   const uint64_t *rows, size_t groups, size_t k, size_t n);
void gs__host_k_linear_bwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride,
                                   const float *dy, float *dx, float *dw, const uint64_t *rows, size_t groups,
                                   size_t k, size_t n);
void gs__host_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc);
void gs__host_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc);
void gs__host_k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop);
void gs__host_k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                              float *rstd, size_t t, size_t h, float eps);
void gs__host_k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                              const float *dy, float *dx, float *dg, float *db, size_t t, size_t h);
void gs__host_k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n);
void gs__host_k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n);
void gs__host_k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n);
void gs__host_k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n);
void gs__host_k_moe_topk_fwd(gs_drv_stream *s, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                             float *probs);
void gs__host_k_moe_topk_bwd(gs_drv_stream *s, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                             size_t experts, size_t k, float *dlogits);
void gs__host_k_rows_gather(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                            float *dst);
void gs__host_k_rows_scatter_add(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n,
                                 size_t h, float *dst);
void gs__host_k_rows_dot(gs_drv_stream *s, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                         float *out);
void gs__host_k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f);
void gs__host_k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f);
void gs__host_k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                           float *stats);
void gs__host_k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss);
void gs__host_k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                         size_t lo, size_t vn, float scale, float *dlogits);
void gs__host_k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, uint64_t step);

/* ---- exec/driver_host_coll.c: collectives and the bootstrap's transport ---- */
void gs__host_boot_wait_init(gs_drv *d, gs_boot_wait *w);
gs_status gs__host_boot_result(gs_drv *d, gs_boot_outcome o, const gs_boot_wait *w, const gs_error *terr,
                               const char *what, gs_error *err);
gs_status gs__host_all_gather(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err);
gs_status gs__host_reduce_scatter(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                                  float *recv, size_t count, gs_error *err);
gs_status gs__host_all_reduce(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                              size_t count, gs_error *err);
gs_status gs__host_all_reduce_max(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                  size_t count, gs_error *err);
gs_status gs__host_all_to_all(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                              float *recv, size_t count, gs_error *err);
gs_status gs__host_broadcast(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                             size_t count, uint64_t root, gs_error *err);

/* ---- exec/driver_host_p2p.c: point to point ---- */
gs_status gs__host_send(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                        gs_error *err);
gs_status gs__host_recv(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                        gs_error *err);
gs_status gs__host_p2p_group(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                             gs_error *err);

#endif
