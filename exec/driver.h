/* The exec driver interface: what the dispatcher and the training program need from a machine
 * (memory, streams and stream events, a clock, collectives over a process group, point-to-point
 * send and receive) and, in a table of their own (gs_driver_kernels), the model's kernels the
 * schedule's compute ops run. The host driver (exec/driver_host.c:
 * CPU threads, shared-memory collectives) implements it today; a CUDA driver (streams, cuBLAS,
 * NCCL) implements the same table later, and nothing above this header knows which one runs.
 *
 * Execution model (CUDA's): work is issued to a stream and runs in issue order on it; an event
 * recorded on a stream completes when the work issued before it has; a stream can be told to wait
 * for an event of another stream. Compute ops and collectives are called from inside a launched
 * function (gs_drv_fn) and run in that stream's order; on the host they run synchronously in the
 * stream's worker thread, on CUDA they would be enqueued. Every blocking wait has the driver's
 * timeout; a failure anywhere aborts every rank (gs_driver_ops.abort) and every wait returns it.
 *
 * Ownership: a driver's state (gs_drv) is created by open() and freed by close(); streams, events
 * and buffers belong to the driver and are freed by their destroy/free calls (close() frees what
 * is left). Callers own nothing inside them; the buffers passed to ops are borrowed for the call. */
#ifndef GS_EXEC_DRIVER_H
#define GS_EXEC_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/mesh.h"
#include "exec/boot.h"
#include "engine/schedule.h"
#include "engine/status.h"
#include "kernels/dropout.h"
#include "kernels/host/kernels.h"

typedef struct gs_drv gs_drv;               /* one driver instance: every rank of one process */
typedef struct gs_drv_stream gs_drv_stream; /* an in-order work queue of one rank */
typedef struct gs_drv_event gs_drv_event;   /* a point in a stream's work */

/* What a person chose for the drivers through the environment, as written (cli/ reads the
 * variables; library code reads none): each driver checks the values it takes and names the
 * variable when one is not among them. NULL / 0: unset. */
typedef struct gs_driver_settings {
    const char *host_p2p;       /* GRIDSTEP_HOST_P2P: eager or rendezvous (host driver) */
    const char *host_gemm;      /* GRIDSTEP_HOST_GEMM: fp32 or bf16 (host driver) */
    const char *cuda_gemm;      /* GRIDSTEP_CUDA_GEMM: fp32, tf32 or bf16 (cuda driver) */
    const char *cuda_attention; /* GRIDSTEP_CUDA_ATTENTION: auto, kernels or gemm (cuda driver) */
    const char *launcher_var;   /* the variable through which a launcher announced its process count */
    long launcher_procs;        /* ... and that count (0: no launcher) */
    const char *cuda_fp8;       /* GRIDSTEP_CUDA_FP8: emulate or cublaslt (cuda driver) */
} gs_driver_settings;

typedef struct gs_driver_opts {
    double timeout_s; /* every blocking wait gives up after this long (seconds; 0: 60) */
    /* The engine's group map (gs_group_of), for drivers that build communicators at open (a
     * driver in a module reaches the engine only through it); NULL: not needed (host). */
    uint64_t (*group_of)(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *size);
    /* The memory ledger's peak per rank (bytes, fp32; mesh world entries) for drivers with
     * device memory to check before allocating; NULL: unknown. Borrowed for open(). */
    const uint64_t *rank_peak_bytes;
    /* The schedule the driver will run (one list per rank) and the attention heads per rank (the
     * model's heads and kv heads / tp), for drivers whose ops take scratch memory beyond the
     * ledger's tensors (the cuda driver's GEMM attention path) to count it before allocating;
     * NULL or 0 heads: unknown (not counted); with rank_peak_bytes NULL: not checked. Borrowed
     * for open(). */
    const gs_schedule *sch;
    uint64_t attn_heads, attn_kv_heads;
    /* The attention calls' sequences over the schedule events' (0: 1): under context
     * parallelism's p2p and all_gather, cp (exec runs each CP rank's attention over the whole
     * sequence, its queries among zero rows); under a2a the heads above are / cp instead. */
    uint64_t attn_seq_mult;
    /* The scenario's strategy.flash_attention: 1, exec calls attn_fwd_flash / attn_bwd_flash (the
     * cuda driver's GEMM attention path, which keeps the probabilities, then never runs). */
    int attn_flash;
    /* A multi-process run (exec/boot.h; NULL or one process: every rank in this process): this
     * process runs rank boot->proc only, and talks to the others through boot. Borrowed for the
     * driver's life. */
    const gs_exec_boot *boot;
    /* 1: this process runs every rank of the mesh itself even when a launcher started it among
     * others (calibrate's measurements inside one process of an MPI job; boot then unused). */
    int process_local;
    /* 1: the scenario trains in bf16 (strategy.precision, the seed's mixed precision), so a
     * driver whose GEMMs can take bf16 inputs (cuda: cuBLASLt, bf16 in, fp32 accumulate and
     * out, fp32 master weights) does so unless told otherwise (GRIDSTEP_CUDA_GEMM); the host
     * driver, the fp32 reference, ignores it (GRIDSTEP_HOST_GEMM=bf16 rounds alike). 0: fp32. */
    int gemm_bf16;
    /* 1: the scenario's linear layers run in FP8 (strategy.precision fp8): a driver whose FP8
     * kernels take scratch beyond the ledger's tensors (cuda: the GEMM inputs' dequantized FP8
     * copies) counts it before allocating. */
    int fp8;
    /* 1: the run sends around each TP group's ring (tp_comm_overlap's all_gather_ring): a driver
     * that connects its p2p peers at open (cuda) connects these too. */
    int tp_ring_p2p;
    /* 1: every attention call draws dropout masks (the model's dropout layers at a nonzero
     * attention rate): a driver whose default path for such calls takes no scratch (cuda's
     * attention kernels) leaves that scratch out of its memory pre-flight. */
    int attn_dropout;
    /* The environment's choices (gs_driver_settings). */
    gs_driver_settings set;
} gs_driver_opts;

/* A process group as the schedule names it: kind and index (gs_group_of), its members in
 * ascending rank order and the caller's position among them. */
typedef struct gs_drv_group {
    gs_group_kind kind;
    uint64_t index;
    uint64_t size;
    uint64_t pos;            /* caller's position in members */
    const uint64_t *members; /* size global ranks, ascending */
} gs_drv_group;

/* Work issued to a stream: returns a status and fills err on failure (the driver then aborts
 * every rank with err's message). */
typedef gs_status (*gs_drv_fn)(void *arg, gs_drv_stream *s, gs_error *err);

/* One send (recv 0: bytes of buf to peer) or receive (recv 1: bytes into buf from peer) of a
 * p2p group. */
typedef struct gs_drv_p2p {
    int recv;
    uint64_t peer;
    void *buf;
    uint64_t bytes;
} gs_drv_p2p;

/* The model's kernels a driver runs (kernels/host/kernels.h semantics, fp32, each issued on stream
 * s): what the training program calls for the transformer's ops, apart from the machine's
 * operations (memory, streams, events, collectives, p2p) in gs_driver_ops. */
/* A GEMM's scale blocks along its k and n dimensions and along its t token rows (the rows of x
 * and of dy; kernels/host/kernels.h gs_fp8_cut). */
typedef struct gs_fp8_split {
    gs_fp8_cut k, n, t;
} gs_fp8_split;

/* Delayed scaling (Transformer Engine's DelayedScaling): the scales an FP8 GEMM's casts use, given
 * by the caller's amax history instead of each tensor's own amax, and where the casts record the
 * amaxes of the tensors they cast (each the maximum of what is there and the tensor's amax, NaN
 * sticking; NULL: not recorded). Forward: x and w at scale x and w, recording amax_x and amax_w;
 * backward: x and w at the forward's scales (their forward codes), dy at scale dy, recording
 * amax_dy. A value beyond the format's largest saturates to it. The amaxes are host memory the op
 * writes before it returns. */
typedef struct gs_fp8_scales {
    float x, w, dy;
    float *amax_x, *amax_w, *amax_dy;
} gs_fp8_scales;

typedef struct gs_driver_kernels {
    void (*linear_fwd)(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n);
    /* dx = dy w (skipped when dx is NULL), dw += dy^T x (skipped when dw is NULL) */
    void (*linear_bwd)(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                       size_t t, size_t k, size_t n);
    void (*add)(gs_drv_stream *s, float *y, const float *x, size_t n);
    void (*scale)(gs_drv_stream *s, float *y, float a, size_t n);
    void (*embed_fwd)(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t vocab_lo,
                      size_t vocab_n, size_t h, float *y);
    void (*embed_bwd)(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t vocab_lo,
                      size_t vocab_n, size_t h, float *dw);
    void (*rmsnorm_fwd)(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                        float eps);
    void (*rmsnorm_bwd)(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                        float *dx, float *dg, size_t t, size_t h);
    void (*rope_fwd)(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta);
    void (*rope_bwd)(gs_drv_stream *s, float *dx, size_t t, size_t seq, size_t nh, size_t hd, size_t ld,
                     float theta);
    /* Attention (gs_k_attn_fwd_dropout / gs_k_attn_bwd_dropout): drop, attention dropout on the
     * probabilities (kernels/dropout.h; NULL or threshold 0: none). */
    void (*attn_fwd)(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                     float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                     const gs_dropout *drop);
    void (*attn_bwd)(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                     const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                     size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop);
    /* Flash-style (gs_k_attn_fwd_flash / gs_k_attn_bwd_flash): lse [nseq][nh][seq] in place of p;
     * the backward reads the forward's out (same ldo as dout). Scenarios with
     * strategy.flash_attention use these. */
    void (*attn_fwd_flash)(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                           size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                           size_t nkv, size_t hd, const gs_dropout *drop);
    void (*attn_bwd_flash)(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                           size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo, float *dq,
                           float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                           const gs_dropout *drop);
    /* Hidden dropout in place on rows x h (gs_k_dropout_rows): the forward, and on the gradient
     * the backward (the same mask drawn again). */
    void (*dropout)(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop);
    void (*swiglu_fwd)(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f);
    void (*swiglu_bwd)(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f);
    void (*xent_stats)(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t vocab_lo,
                       size_t vocab_n, float *stats);
    /* lse[t] from the stats of `parts` slices; *loss_sum (host memory) = sum of lse - target logit. */
    void (*xent_combine)(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse,
                         double *loss_sum);
    void (*xent_bwd)(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                     size_t vocab_lo, size_t vocab_n, float scale, float *dlogits);
    void (*adamw)(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, uint64_t step);
    /* GPT blocks: LayerNorm (mean and rstd per row saved), GELU (tanh), linear biases */
    void (*layernorm_fwd)(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                          float *rstd, size_t t, size_t h, float eps);
    void (*layernorm_bwd)(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                          const float *dy, float *dx, float *dg, float *db, size_t t, size_t h);
    void (*gelu_fwd)(gs_drv_stream *s, const float *x, float *y, size_t n);
    void (*gelu_bwd)(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n);
    void (*bias_add)(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n);
    void (*bias_grad)(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n);
    /* Mixture of experts (kernels/host/kernels.h's gs_k_moe_*, gs_k_rows_*); NULL: the driver
     * runs no MoE blocks (exec refuses them). idx arrays are int32 in the driver's memory. */
    void (*moe_topk_fwd)(gs_drv_stream *s, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                         float *probs);
    void (*moe_topk_bwd)(gs_drv_stream *s, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                         size_t experts, size_t k, float *dlogits);
    void (*rows_gather)(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                        float *dst);
    void (*rows_scatter_add)(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n,
                             size_t h, float *dst);
    void (*rows_dot)(gs_drv_stream *s, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                     float *out);
    /* FP8 linear layers under current scaling (a scenario's precision: fp8, fp8_recipe: current;
     * the semantics of linear_fwd and linear_bwd otherwise): each GEMM input cast to FP8 with a
     * per-tensor scale from its own amax, the products accumulated in fp32, the output in fp32.
     * The forward's x and w in E4M3; the backward's dy in E5M2 and x and w in E4M3 (Transformer
     * Engine's HYBRID format). sp (NULL: per tensor) cuts the operands into scale blocks as TP
     * shards them (gs_k_fp8_round_blocks): x's k and w's k by sp->k, w's n and dy's n by sp->n;
     * drivers without fp8_blocks take NULL only. sc (NULL: current scaling) gives the scales of
     * delayed scaling (gs_fp8_scales; every block at the one scale, the blocks still splitting the
     * sums); drivers without fp8_delayed take NULL only. NULL ops: the driver runs no FP8 (exec
     * refuses FP8 scenarios). */
    void (*linear_fwd_fp8)(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n,
                           const gs_fp8_split *sp, const gs_fp8_scales *sc);
    void (*linear_bwd_fp8)(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                           size_t t, size_t k, size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc);
    int fp8_blocks;  /* 1: the FP8 ops take scale blocks (sp non-NULL) */
    int fp8_delayed; /* 1: the FP8 ops take delayed scaling's scales (sc non-NULL) */
    /* A MoE block's local experts' linear layers in one call: `groups` GEMMs, group g's rows[g]
     * rows consecutive in x, y, dy and dx (after the rows of the groups before it), its weight
     * [n, k] at w + g w_stride floats and its gradient at dw + g w_stride: the semantics of one
     * linear_fwd / linear_bwd per group (a group of no rows reads and writes nothing). NULL:
     * exec calls linear_fwd / linear_bwd per group. */
    void (*linear_fwd_grouped)(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, float *y,
                               const uint64_t *rows, size_t groups, size_t k, size_t n);
    void (*linear_bwd_grouped)(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, const float *dy,
                               float *dx, float *dw, const uint64_t *rows, size_t groups, size_t k, size_t n);

} gs_driver_kernels;

typedef struct gs_driver_ops {
    const char *name;        /* "host" */
    const char *description; /* one line for --help */

    /* ---- lifetime ---- */
    gs_status (*open)(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err);
    void (*close)(gs_drv *d);
    /* Stops every rank: every current and later wait returns GS_ERR_RUNTIME with msg (the first
     * abort's message wins). */
    void (*abort)(gs_drv *d, const char *msg);
    /* 1 after an abort, with its message in err (when not NULL). */
    int (*aborted)(gs_drv *d, gs_error *err);

    /* ---- memory (fp32 buffers on rank's device; zero-filled) ---- */
    void *(*alloc)(gs_drv *d, uint64_t rank, uint64_t bytes); /* NULL when out of memory */
    void (*free)(gs_drv *d, uint64_t rank, void *p);
    void (*upload)(gs_drv *d, gs_drv_stream *s, void *dst, const void *host_src, uint64_t bytes);
    void (*download)(gs_drv *d, gs_drv_stream *s, void *host_dst, const void *src, uint64_t bytes);
    void (*copy)(gs_drv *d, gs_drv_stream *s, void *dst, const void *src, uint64_t bytes);
    void (*fill)(gs_drv *d, gs_drv_stream *s, float *dst, float value, size_t n);

    /* ---- streams, events, clock ---- */
    gs_status (*stream_create)(gs_drv *d, uint64_t rank, gs_stream kind, gs_drv_stream **out, gs_error *err);
    void (*stream_destroy)(gs_drv *d, gs_drv_stream *s);
    /* Issues fn(arg) to run after the work already issued to s. */
    gs_status (*launch)(gs_drv *d, gs_drv_stream *s, gs_drv_fn fn, void *arg, gs_error *err);
    gs_status (*event_create)(gs_drv *d, gs_drv_event **out, gs_error *err);
    void (*event_destroy)(gs_drv *d, gs_drv_event *e);
    gs_status (*event_record)(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err);
    /* Work issued to s after this call waits until e has completed. */
    gs_status (*stream_wait_event)(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, gs_error *err);
    /* Blocks until everything issued to s has run; the abort's status and message if any. */
    gs_status (*stream_sync)(gs_drv *d, gs_drv_stream *s, gs_error *err);
    /* When a completed event completed, and now, on the driver's clock (seconds). */
    double (*event_time_s)(gs_drv *d, const gs_drv_event *e);
    double (*clock_s)(gs_drv *d);
    /* Called from inside launched work after a collective or p2p op: when it began moving data
     * (every party present), on the driver clock, then forgets it; -1 when unknown (the caller
     * then counts from when the work was posted). May be NULL. */
    double (*op_start_s)(gs_drv *d, gs_drv_stream *s);

    /* ---- the model's kernels ---- */
    gs_driver_kernels k;
    /* 1: this instance's sends wait for their receivers although the driver's are eager by
     * default (the host driver under GRIDSTEP_HOST_P2P=rendezvous); exec then plans its p2p
     * groups as for p2p_rendezvous. */
    int (*sends_wait)(gs_drv *d);
    /* The linear layers' GEMM arithmetic this instance runs, for reports: "fp32", "tf32" or
     * "bf16 inputs, fp32 accumulate" (GRIDSTEP_HOST_GEMM / GRIDSTEP_CUDA_GEMM). */
    const char *(*gemm_math)(gs_drv *d);
    /* ---- collectives over g, issued on s by every member in the same order ----
     * fp32 sums are taken in ascending rank order, so results do not depend on timing. */
    /* recv[i*count .. (i+1)*count) = member i's send (count floats per member). */
    gs_status (*all_gather)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                            float *recv, size_t count, gs_error *err);
    /* recv[0..count) = sum over members of their send[pos*count .. (pos+1)*count). */
    gs_status (*reduce_scatter)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                const float *send, float *recv, size_t count, gs_error *err);
    /* buf = sum over members of buf (in place). */
    gs_status (*all_reduce)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                            size_t count, gs_error *err);
    /* buf = the elementwise maximum over members of buf (in place; a NaN wins): FP8 delayed
     * scaling's amax reduction. NULL: the driver has none (exec then refuses delayed scaling). */
    gs_status (*all_reduce_max)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                                size_t count, gs_error *err);
    /* buf = member root's buf. */
    gs_status (*broadcast)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, float *buf,
                           size_t count, uint64_t root, gs_error *err);
    /* recv[i*count .. (i+1)*count) = member i's send[pos*count .. (pos+1)*count) (send holds size
     * x count floats; NCCL: grouped sends and receives). NULL: the driver has none (exec then
     * refuses expert parallelism). */
    gs_status (*all_to_all)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g, const float *send,
                            float *recv, size_t count, gs_error *err);
    /* ---- point to point (in order per (sender, receiver) pair) ---- */
    gs_status (*send)(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, const void *buf, uint64_t bytes,
                      gs_error *err);
    gs_status (*recv)(gs_drv *d, gs_drv_stream *s, uint64_t rank, uint64_t peer, void *buf, uint64_t bytes,
                      gs_error *err);
    /* The sends and receives of ops[0..n) as one operation: all progress together and it
     * returns (CUDA: completes on s) when all are done. A send that waits for its receiver
     * (NCCL's ncclSend is "blocking for the GPU", and its guide says calls that must progress
     * concurrently have to be grouped) must be grouped this way wherever ranks send to each
     * other before receiving (1F1B's steady state, the tied embedding's exchange), or each waits
     * for a receive queued behind its peer's own send. NCCL: one ncclGroupStart/End, as
     * Megatron's batch_isend_irecv. */
    gs_status (*p2p_group)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_p2p *ops, size_t n,
                           gs_error *err);

    /* ---- progress inside launched work (tp_comm_overlap: Transformer Engine's chunked overlaps) ----
     * An all-gather around the group's ring (TE's ring exchange): recv as all_gather leaves it,
     * gathered in size - 1 steps; in step i every member sends the chunk it got last (its own
     * first) to the next member and receives chunk (pos - i - 1) mod size from the previous one,
     * then marks[i] is marked with token (marks has size - 1 entries; NULL entries are not
     * marked). The member's own chunk is in place before step 0. */
    gs_status (*all_gather_ring)(gs_drv *d, gs_drv_stream *s, uint64_t rank, const gs_drv_group *g,
                                 const float *send, float *recv, size_t count, gs_drv_event *const *marks,
                                 uint64_t token, gs_error *err);
    /* From inside work launched on s: e is marked with token at this point of s's work (the work
     * issued before it on s done). Host: at once. CUDA: cudaEventRecord. */
    gs_status (*mark)(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err);
    /* From inside work launched on s: what s runs next waits until e has been marked with a token
     * >= token (tokens only grow). Host: blocks, with the driver's timeout. CUDA:
     * cudaStreamWaitEvent on the mark last issued, so the marking work must have been issued
     * (launched) before the waiting work: exec issues a rank's events in list order, and the
     * schedule puts each chunked collective's marking partner first. */
    gs_status (*wait_mark)(gs_drv *d, gs_drv_stream *s, gs_drv_event *e, uint64_t token, gs_error *err);

    /* ---- optional (NULL / 0 when absent) ---- */
    /* The schedule event whose work is issued to s next (profiler ranges, error messages), and
     * its end. */
    void (*event_begin)(gs_drv *d, gs_drv_stream *s, const char *name);
    void (*event_end)(gs_drv *d, gs_drv_stream *s);
    /* The next launch on s records e when it enqueues its first work (and at its end if it
     * enqueues none): the device's start of that work, after whatever the host spent before
     * enqueuing it, so a late issue shows as a gap before the event, not inside it (exec's
     * dispatch gaps). NULL: the event's start is op_start_s, else when its stream reached it. */
    void (*arm_start)(gs_drv *d, gs_drv_stream *s, gs_drv_event *e);
    /* 1: buffers live in device memory and open() checks opts->rank_peak_bytes against it (the
     * session then skips its host MemAvailable check). */
    int device_memory;
    /* Seconds from completed event a to completed event b of one rank, at the clock's own
     * resolution (cudaEventElapsedTime between the two: event_time_s differences carry the
     * rounding of a time since the clock's base). NULL: the difference of event_time_s. */
    double (*event_elapsed_s)(gs_drv *d, const gs_drv_event *a, const gs_drv_event *b);
    /* 1: a send can wait for its receiver (NCCL's do past their buffering), so exec plans its p2p
     * groups for that (exec/p2p_groups.h: receives issued ahead of their place where the order
     * would otherwise wait in a cycle; the host driver's GRIDSTEP_HOST_P2P=rendezvous mode runs
     * the same plan on the CPU). 0: sends return at once (eager). */
    int p2p_rendezvous;
} gs_driver_ops;

extern const gs_driver_ops gs_driver_host;

/* The layout version of gs_driver_ops and gs_driver_opts as a loadable module sees them: its
 * entry symbol carries it (gs_driver_NAME_module_abiN), so a module built against another layout
 * is refused by name rather than having its table's slots called at the wrong offsets. Bump it
 * whenever either struct changes. 2: the flash attention ops and opts.attn_flash. 3: the GPT
 * block ops. 4: p2p_group, p2p_rendezvous. 5: dropout (the attention ops' drop, the dropout op),
 * gemm_math, sends_wait. 6: all_gather_ring, mark, wait_mark; linear_bwd's dw may be NULL;
 * opts.gemm_bf16, opts.tp_ring_p2p, arm_start. 8: opts.set (the environment's choices, passed down).
 * 9: the kernels in their own table, gs_driver_ops.k. 10: all_to_all and the MoE kernels. 11: the FP8
 * linear kernels. 12: opts.fp8, opts.attn_seq_mult, set.cuda_fp8. 13: gs_mesh.cp_a2a and the CP a2a
 * and p2p group kinds (hierarchical CP). 14: the FP8 ops' scale blocks (gs_fp8_split, fp8_blocks), the
 * grouped linear ops. 15: the stage group kind (FP8 delayed scaling's amax reductions). 16: delayed
 * scaling's scales in the FP8 ops (gs_fp8_scales, fp8_delayed), all_reduce_max. 17: the token row
 * blocks of gs_fp8_split (t) and gs_fp8_cut.zigzag. */
#define GS_DRIVER_ABI 17

/* The drivers this build has, by name (NULL when unknown). */
const gs_driver_ops *gs_driver_find(const char *name);

/* A driver by name: one built in (gs_driver_find), else the module gridstep-NAME.so, looked up
 * in module_path (colon-separated directories, NULL: none; cli/ passes $GRIDSTEP_MODULE_PATH),
 * then next to the running binary, then the install
 * directory (pkglibdir), and asked for its table through gs_driver_NAME_module_abiN() (N =
 * GS_DRIVER_ABI; a module without it was built for another gridstep: GS_ERR_UNSUPPORTED). GS_ERR_INPUT
 * for a name that is no driver; GS_ERR_UNSUPPORTED (with dlerror's text: the module or a library
 * it needs, such as libcudart, missing) when the module cannot be loaded. The module stays
 * loaded for the life of the process. */
gs_status gs_driver_load(const char *name, const char *module_path, const gs_driver_ops **out, gs_error *err);

#endif
