/* The training program's internals, shared by its files (exec/train*.c): the per-rank state, the
 * event plan's types, the action context, and the functions one concern offers the others.
 * Layout and initialization: exec/train_layout.c; per-rank state: exec/train_rank.c; the event
 * plan and the role table exec dispatches on: exec/train_plan.c; the actions' shared helpers
 * (buffers, norms, TP reductions, dropout): exec/train_ops.c; a transformer block's forward and
 * backward: exec/train_block.c; embedding, head and loss: exec/train_root.c; data-parallel
 * gathers and reductions: exec/train_dp.c; the optimizer: exec/train_optim.c; pipeline p2p and
 * the tied embedding's exchange: exec/train_p2p.c; tp_comm_overlap's chunks:
 * exec/train_overlap.c; context parallelism's exchanges and attention: exec/train_cp.c;
 * checkpoint shards: exec/train_shards.c; mixture-of-experts blocks: exec/train_moe.c; create,
 * destroy and the loss: exec/train.c.
 *
 * Ownership: a gs_train owns its rank_st array and everything each rank_st points to (freed by
 * gs__train_rank_fini); a ctx borrows them for one event. */
#ifndef GS_EXEC_TRAIN_INTERNAL_H
#define GS_EXEC_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/ledger.h"
#include "engine/partition.h"
#include "engine/pipeline.h"
#include "engine/roles.h"
#include "exec/train.h"
#include "kernels/host/kernels.h"

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f
#define NO_ID UINT32_MAX
#define INIT_ONES 0
#define INIT_ZEROS UINT64_MAX

/* The forward's pipelined GEMM and reduce-scatter split each sequence shard into this many row
 * blocks (engine/build_layer.c's GS_UB_PIPELINE_SPLITS: Transformer Engine's default). */
#define UB_SPLITS 4

/* What an event does: its role's action in its direction (exec/train_plan.c's role_actions). */
typedef enum action {
    A_NONE,
    A_EMB_FWD, A_EMB_TP, A_EMB_AG, A_EMB_BWD,
    A_N1_FWD, A_N1_AG, A_QKV_FWD, A_ATTN_FWD, A_O_FWD, A_O_TP, A_N2_FWD, A_N2_AG, A_UP_FWD, A_ACT_FWD,
    A_DOWN_FWD, A_DOWN_TP,
    A_DY_AG, A_DOWN_BWD, A_ACT_BWD, A_N2_REAG, A_UP_BWD, A_UP_TP, A_N2_BWD, A_DXM_AG, A_O_BWD, A_ATTN_BWD,
    A_N1_REAG, A_QKV_BWD, A_QKV_TP, A_N1_BWD,
    A_HN_FWD, A_HN_AG, A_HEAD_FWD, A_LOSS_FWD, A_LOSS_AG, A_LOSS_BWD, A_HEAD_BWD, A_HEAD_TP, A_HN_BWD,
    A_UNIT_AG, A_UNIT_RS, A_INTER_AR, A_BUCKET_AR, A_CHUNK_AR, A_CHUNK_RS, A_OWN_AG, A_OPTIM, A_SP_NORM_AR,
    A_SEND_FWD, A_RECV_FWD, A_SEND_BWD, A_RECV_BWD, A_TIED_SEND, A_TIED_RECV,
    /* mixture of experts (exec/train_moe.c), either direction: the event's phase says which */
    A_MOE_ROUTER, A_MOE_PERMUTE, A_EP_DISPATCH, A_ETP_IN, A_EXPERT_UP, A_EXPERT_ACT, A_EXPERT_DOWN, A_ETP_OUT,
    A_EP_COMBINE,
    A_CP_KV, A_CP_A2A,
    A_FP8_AMAX /* FP8 delayed scaling's amax reduction and scale update (exec/train_fp8_delayed.c) */
} action;

typedef struct ev_plan {
    uint8_t act;
    uint32_t ptid, gtid;      /* parameter and gradient tensors the event uses (unit of its layer) */
    uint32_t rptid, rgtid;    /* the root unit's, for embed / head events */
    uint64_t off, count;      /* bucket all-reduce: element range */
    /* p2p groups (exec/p2p_groups.h): lead, 1 + the event that issues this send or receive in
     * its p2p_group (0: the event issues itself); for an issuing event, 1 + its group's first and
     * last members (first1, last1; 0: none before or after it) */
    uint32_t lead, first1, last1;
    /* tp_comm_overlap (engine/build_layer.c's ag_gemm and gemm_rs): the event's part (1 or 2: the
     * first or second part of a GEMM split around its TP collective, or of the forward's
     * pipelined reduce-scatter; 0: a whole event), and for a side that waits for marks, the event
     * that marks them (NO_ID: none) */
    uint8_t part;
    uint32_t partner;
} ev_plan;

/* One tensor's place in a unit's flat buffer: nrows rows of row_len elements at flat_off; row r
 * is at full_off0 + r * full_stride in the full tensor. */
typedef struct segment {
    char name[80];
    int ndim;
    uint64_t shape[2];
    uint64_t init_id;       /* INIT_ONES (norm weights), INIT_ZEROS (biases), else a normal stream */
    uint64_t flat_off, nrows, row_len, full_off0, full_stride;
    int tp_replicated;
    int copy;               /* a copy of a tensor another stage owns (the tied embedding on the
                             * last stage): loaded, never written by a save */
} segment;

typedef struct unit_info {
    uint64_t P, S;          /* elements: TP slice, padded shard */
    /* the group its gradient is reduced and its state sharded over: size and this rank's
     * position (the DP shard group; a MoE block's routed experts under expert parallelism: the
     * EDP group, engine/partition.h's expert units) */
    uint64_t N, pos;
    int expert;
    int root;
    segment *segs;
    size_t nsegs, cap;
} unit_info;

typedef struct layer_act {
    float *n1s, *rstd1, *n1, *qkv, *ao, *p, *op, *ar, *xm, *n2s, *rstd2, *n2, *gu, *hh, *dp, *mr;
    float *mean1, *mean2; /* LayerNorm's row means (NULL under RMSNorm) */
} layer_act;

typedef struct head_act {
    float *hns, *rstd, *hn, *logits, *stats, *allstats, *lse;
    float *mean; /* LayerNorm */
} head_act;

typedef struct scratch {
    float *dyf, *dh, *dgu, *dn2, *dn2s, *dxm, *dxmf, *dao, *dqkv, *dn1, *dn1s, *dlogits, *dhn, *dhns, *embp;
    float *demb; /* the embedding output's gradient, gathered under SP (its own: the blocks' dyf is
                  * the next backward pass's, which may gather while the embedding still reads) */
    /* hidden dropout: the gradients into the MLP's and attention's output (dropped as their
     * forward was), beside the residual's undropped ones */
    float *dyd, *dxmd;
} scratch;

typedef struct rank_st {
    uint64_t rank, stage, tp_pos, dp_pos, N, R, shard_pos;
    int first, last;
    int own_slice; /* ZeRO-1/2 (Megatron's distributed optimizer): full parameters stay resident,
                    * and this rank updates (and its Adam state covers) only its slice
                    * [shard_pos S, (shard_pos + 1) S) of each unit, all-gathered afterwards */
    gs_partition part;
    gs_shard_plan plan;
    unit_info *units;
    size_t nunits;
    int64_t *unit_of_local; /* per stage-local layer */
    uint64_t *off_of_local; /* offset of the layer's block in its unit */
    int64_t *local_of_global;
    uint64_t emb_off, pos_off, hn_off, head_off; /* offsets in the root unit (pos_off: learned positions) */
    /* tied embeddings under a pipeline, first and last stages: the word embedding (or its copy)
     * is the first word_n elements of the root unit, and the root's shard size is the larger of
     * the two stages' (so both split the word embedding at the same places over DP); xbuf gets
     * the peer's gradient, xstage (gradient shards only) this rank's for sending */
    int tied_x;
    uint64_t word_n;
    float *xbuf, *xstage;
    uint32_t *param_t, *grad_t, *hold_t; /* resident tensors per unit */
    ev_plan *plans;
    float **tbuf;            /* per tensor id: buffer (param / grad kinds) */
    float **m, **v;          /* per unit: Adam state, like the parameter storage */
    float **tmp;             /* per unit: HSDP reduce-scatter result (S) */
    int32_t *tokens, *targets; /* [mb][T] */
    int32_t *positions;        /* [T]: row % seq (learned position embeddings) */
    float *posb;               /* [T, h]: the position rows, added to the embedding's partial sums */
    float **x, **dx;         /* [(pos) * mbs + mb], pos 0..layers */
    layer_act *acts;         /* [local layer * mbs + mb] */
    head_act *heads;         /* [mb] */
    scratch sc;
    double loss_sum;
    int has_recompute;       /* the schedule recomputes (else the forward keeps everything) */
    gs_drv_group groups[GS_GROUP_KIND_COUNT];
    uint64_t *members[GS_GROUP_KIND_COUNT];
    /* tp_comm_overlap: the ring all-gather's marks (tp - 1, one per step) and the pipelined GEMM's
     * (one per split handed to the reduce-scatter beside it); tokens: mark_token */
    gs_drv_event **ring_marks, *split_marks[UB_SPLITS - 1];
    struct moe_rank *moe;    /* MoE blocks' routing and buffers (exec/train_moe.c); NULL: none */
    /* context parallelism (exec/train_cp.c): the data-parallel replica whose sequences the rank
     * holds (its DP position when cp = 1), its place in the CP group, and the exchanges' buffers */
    uint64_t replica, cp_pos;
    struct cp_bufs *cpb;
    struct fp8_rank *f8; /* FP8 delayed scaling's scales and amaxes (exec/train_fp8_delayed.c); NULL: none */
    /* per unit under opts fp8_cp_accumulate: the fp8_cp_shards C CP rank blocks' gradients of the
     * step so far, C buffers of the unit's N x S floats one after another (host memory,
     * exec/train_fp8_cp.c); NULL: none */
    float **cp_acc;
} rank_st;

struct gs_train {
    const gs_scenario *s;
    const gs_schedule *sch;
    const gs_driver_ops *ops;
    gs_drv *drv;
    gs_train_opts o;
    uint64_t mbs, T, Tl, b, seq, h, hd, a_t, kv_t, f_t, v_t, nqkv, block, tp, layers;
    uint64_t f_max; /* the widest MLP's f_t: the dense one's, or a MoE block's shared experts' */
    uint64_t vstages; /* model chunks a stage holds: the interleaved schedule's virtual stages, else 1 */
    /* context parallelism: grid.cp, and each rank's tokens of a sequence (seq / cp, two chunks of
     * Megatron-Core's load-balanced order); T = b x sl tokens a micro-batch on a rank */
    uint64_t cp, sl;
    uint64_t cp_a2a; /* hierarchical CP (cp_comm a2a+p2p): the a2a level's ranks; 1 otherwise */
    int sp;
    int ovl; /* strategy.tp_comm_overlap with tp > 1 (and so sequence parallelism) */
    /* the block's kind: LayerNorm (else RMSNorm), a bias on each norm (LayerNorm, or any norm of
     * a model with biases), biases on the attention linears, GELU MLP (else SwiGLU) with biases,
     * RoPE (else learned absolute positions in the root unit); the up GEMM's width (f or 2f) */
    int ln, norm_bias, attn_bias, gelu, mlp_bias, rope;
    uint64_t up_n;
    /* strategy.flash_attention: the attention kernels keep a logsumexp per query row (a->p holds
     * b x a_t x seq floats) instead of the probabilities (b x a_t x seq x seq) */
    int flash;
    /* precision: fp8 (current scaling): the FP8-eligible roles' GEMMs take the driver's FP8
     * kernels (gs__train_linear_fwd / _bwd), per TP shard's scale under o.fp8_tp_shards */
    int fp8;
    /* the vocab-parallel head's slices: tp; on tp 1 under FP8 with o.fp8_tp_shards S, S (the one
     * rank computes the TP ranks' logits, statistics and gradients slice by slice, and sums the
     * head's input gradient in slice order, as the TP reduction does) */
    uint64_t vparts;
    uint64_t attn_saved; /* floats in a->p */
    /* dropout (model.dropout): the draw thresholds and scales of the attention probabilities
     * and of the hidden sites (embedding, attention and MLP outputs); threshold 0: none */
    uint32_t adrop_thr, hdrop_thr;
    float adrop_scale, hdrop_scale;
    gs_recompute recompute;
    uint64_t step;
    uint64_t epoch;    /* steps begun in this process (the marks' tokens grow with it) */
    rank_st *r;
    size_t nr;
    gs_dispatch *disp; /* borrowed: the streams a checkpoint's copies go on */
    int p2p_groups;    /* sends go out in p2p groups with a receive (gs_train_opts.p2p_groups) */
    uint32_t **lead;   /* while the ranks are planned: per rank list, per event, the p2p plan */
    size_t hoisted_recvs; /* receives the plan issues ahead of their place (rendezvous drivers) */
};


/* What one action works on: the program, the rank, its list, the event, its plan, the stream the
 * event runs on and where errors go. */

typedef struct ctx {
    gs_train *t;
    rank_st *r;
    const gs_rank_events *re;
    const gs_event *e;
    const ev_plan *pl;
    gs_drv_stream *s;
    gs_error *err;
} ctx;


/* The block weights (or their gradients) of the event's layer inside buffer base. */
typedef struct blockp {
    float *g1, *b1, *wqkv, *bqkv, *wo, *bo, *g2, *b2, *wgu, *bu, *wd, *bd; /* biases NULL when absent */
} blockp;


static inline uint64_t gs__train_ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- layout and initialization (exec/train_layout.c) ---- */
/* One tensor's segment as gs__train_add_seg appends it: its name and full [R, C] shape, its
 * initial values (INIT_ONES, INIT_ZEROS or the id of a normal stream), the rank's slice (rows
 * [first, first + n) of the tensor, or with colsplit columns [first, first + n) of every row) and
 * whether every TP rank holds the same (replicated). */
typedef struct seg_spec {
    const char *name;
    int ndim;
    uint64_t R, C, init_id;
    int colsplit;
    uint64_t first, n;
    int replicated;
} seg_spec;
/* Appends the segment of a tensor at *flat (advanced past it). 0 when out of memory. */
int gs__train_add_seg(unit_info *u, uint64_t *flat, const seg_spec *sp);
/* A buffer of n floats on rank r's device; *ok = 0 (and NULL) once an allocation failed. */
float *gs__train_dalloc(gs_train *t, rank_st *r, uint64_t n, int *ok);
/* The units of rank r and their flat layout (segments, offsets of layers, sizes). */
gs_status gs__train_rank_units(gs_train *t, rank_st *r, gs_error *err);
/* The initial parameters of every unit, uploaded into this rank's storage on its compute stream. */
gs_status gs__train_rank_params(gs_train *t, gs_dispatch *disp, size_t ri, gs_error *err);

/* ---- per-rank state (exec/train_rank.c) ---- */
gs_status gs__train_rank_init(gs_train *t, gs_dispatch *disp, size_t ri, gs_error *err);
void gs__train_rank_fini(gs_train *t, rank_st *r, const gs_rank_events *re);

/* ---- the event plan (exec/train_plan.c) ---- */
/* The tensor id of unit u's pending gradient (a virtual id past the schedule's when the rank
 * accumulates new gradients apart from the resident ones), else its resident gradient. */
uint32_t gs__train_pending_id(const rank_st *r, const gs_rank_events *re, size_t u);
/* The global index of the first sequence of rank r's micro-batch mb: (replica x micro-batches +
 * mb) x sequences a micro-batch, or under opts fp8_amax_replicas R the replicas' micro-batches in
 * turn (exec/train_rank.c). */
uint64_t gs__train_seq0(const gs_train *t, const rank_st *r, uint64_t mb);
/* Classifies every event of rank r by its role and binds its tensors. */
gs_status gs__train_plan_rank(gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err);

/* ---- FP8 linear layers (exec/train_fp8.c) ---- */
/* The FP8-eligible GEMMs by how TP shards them: column-parallel (QKV, MLP up, experts' up: the
 * outputs), row-parallel (attention output, MLP down, experts' down: the inputs). */
typedef enum gs_lin {
    GS_LIN_QKV,
    GS_LIN_O,
    GS_LIN_UP,
    GS_LIN_DOWN,
    GS_LIN_EXPERT_UP,
    GS_LIN_EXPERT_DOWN
} gs_lin;
/* The GEMMs of the FP8-eligible roles: the driver's linear_fwd / linear_bwd, or their FP8 forms
 * when the scenario is FP8 (with scale blocks by `which` under opts fp8_tp_shards; with delayed
 * scaling's scales of `which`, expert j's for the experts' GEMMs). */
void gs__train_linear_fwd(const ctx *c, gs_lin which, uint64_t j, const float *x, const float *w, float *y, size_t t,
                          size_t k, size_t n);
/* The backward fails only when it keeps CP blocks' weight gradients apart (dw non-NULL under opts
 * fp8_cp_accumulate: GS_ERR_NOMEM). */
gs_status gs__train_linear_bwd(const ctx *c, gs_lin which, uint64_t j, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, size_t t, size_t k, size_t n);

/* ---- FP8 delayed scaling (exec/train_fp8_delayed.c) ---- */
/* Rank r's scales and amaxes (r->f8), when the scenario is FP8 with delayed scaling; freed by
 * _fini. */
gs_status gs__train_fp8_rank_init(gs_train *t, rank_st *r, gs_error *err);
void gs__train_fp8_rank_fini(gs_train *t, rank_st *r);
/* The scales and amax outputs of GEMM `which` (expert j's) at the event's layer and micro-batch,
 * forward (bwd 0, the forward and recompute phases) or backward, in *sc; NULL when the rank has no
 * delayed scaling (current scaling). */
const gs_fp8_scales *gs__train_fp8_scales(const ctx *c, gs_lin which, uint64_t j, int bwd, gs_fp8_scales *sc);
/* The fp8_amax event's action. */
gs_status gs__train_fp8_amax_action(const ctx *c, action a);
/* Checkpoints: the tensors of r's FP8 state (0 without delayed scaling; a layer's, and a MoE
 * block's experts'), appended at out[*n] with their pieces allocated (gs_shard_list_fini frees
 * them), pointing at the scales and histories themselves (their names: gs_train_state_tensor). */
size_t gs__train_fp8_meta_count(const gs_train *t, const rank_st *r);
gs_status gs__train_fp8_meta_shards(const gs_train *t, rank_st *r, gs_shard_tensor *out, size_t *n, gs_error *err);

/* ---- helpers the actions share (exec/train_ops.c) ---- */
float *gs__train_buf(const ctx *c, uint32_t id);
void gs__train_poison(const ctx *c, float *p, size_t n);
gs_status gs__train_need(const ctx *c, const void *p, const char *what);
void gs__train_block_at(const gs_train *t, float *base, blockp *b);
/* A block norm's operands: input x, weight g and bias b (NULL: none), output y, LayerNorm's
 * mean (NULL under RMSNorm) and rstd; the backward's dy in, dx out, dg and db accumulated. */
typedef struct norm_io {
    const float *x, *g, *b;
    float *y, *mean, *rstd;
    const float *dy;
    float *dx, *dg, *db;
    uint64_t rows;
} norm_io;
void gs__train_norm_fwd(const gs_train *t, gs_drv_stream *s, const norm_io *n);
void gs__train_norm_bwd(const gs_train *t, gs_drv_stream *s, const norm_io *n);
gs_status gs__train_tp_reduce(const ctx *c, float *part, float *out_sp, float **res);
gs_status gs__train_tp_gather(const ctx *c, const float *shard, float *full);
const gs_dropout *gs__train_drop_at(const ctx *c, uint32_t site, uint64_t first, gs_dropout *d);
const gs_dropout *gs__train_hidden_drop(const ctx *c, uint32_t site, int rows_sliced, gs_dropout *d);

/* ---- tp_comm_overlap (exec/train_overlap.c) ---- */
gs_status gs__train_ring_gather(const ctx *c, const float *shard, float *full);
/* One ring-exchanged GEMM part's chunk source (gs__train_ring_chunk). */
typedef struct ring_src {
    const float *shard, *full; /* the rank's own rows, and the gathered ones */
    uint64_t width;            /* elements per row */
    int own_from_full;         /* the own chunk from the gathered copy (its gather's event wrote it) */
} ring_src;
gs_status gs__train_ring_chunk(const ctx *c, const ring_src *src, uint64_t j, uint64_t *q, const float **in);
gs_status gs__train_split_gemm_part(const ctx *c, gs_lin which, const float *in, const float *w, float *out,
                                    uint64_t k);
gs_status gs__train_split_rs_part(const ctx *c, float *part, float *out_sp);

/* ---- mixture of experts (exec/train_moe.c) ---- */
/* 1: global layer l is a MoE block (its MLP is the router, routed and shared experts). */
int gs__train_moe_layer(const gs_train *t, uint64_t l);
gs_status gs__train_moe_rank_init(gs_train *t, rank_st *r, gs_error *err);
void gs__train_moe_rank_fini(gs_train *t, rank_st *r);
/* A MoE block's MLP segments after its post-attention norm: the router, the shared experts, and
 * with with_experts the routed experts of this EP rank (else they go in the expert unit, through
 * gs__train_moe_expert_segs). u is the unit being laid out (its index unit), ll the stage-local
 * layer. 0 when out of memory. */
int gs__train_moe_block_segs(const gs_train *t, rank_st *r, unit_info *ui, size_t unit, uint64_t *flat, int64_t ll,
                             uint64_t l, int with_experts);
int gs__train_moe_expert_segs(const gs_train *t, rank_st *r, unit_info *ui, size_t unit, uint64_t *flat, int64_t ll,
                              uint64_t l);
/* A MoE block's shared experts in b (wgu, wd) and their width (*f_t, *up_n; 0 without shared
 * experts), the dense layout's MLP fields replaced. */
void gs__train_moe_block_at(const gs_train *t, float *base, blockp *b, uint64_t *f_t, uint64_t *up_n);
/* The unit whose parameters an event of stage-local layer ll uses: the routed experts' unit for
 * expert roles, else u. */
int64_t gs__train_moe_event_unit(const rank_st *r, const gs_event *e, int64_t ll, int64_t u);
/* The routed experts' output of the event's layer and micro-batch (the shared experts' last
 * forward event adds it to the layer's output). */
const float *gs__train_moe_routed_out(const ctx *c);
gs_status gs__train_moe_action(const ctx *c, action act);
/* ---- the single rank of a CP run under FP8 current scaling (exec/train_fp8_cp.c) ---- */
/* opts fp8_cp_shards C when the rank sums the token gradients outside the FP8 GEMMs in the C CP
 * ranks' blocks, each from zero, added in rank order; else 0. */
uint64_t gs__train_cp_blocks(const gs_train *t);
/* gs__train_norm_bwd, the driver's embed_bwd (the table's width h) and a linear backward's weight
 * gradient (dw += dy^T x), their token sums in those blocks when gs__train_cp_blocks says so
 * (GS_ERR_NOMEM). */
gs_status gs__train_cp_norm_bwd(const ctx *c, const norm_io *n);
gs_status gs__train_cp_embed_bwd(const ctx *c, const int32_t *tok, uint64_t T, const float *dy, uint64_t lo,
                                 uint64_t vn, float *dw);
gs_status gs__train_cp_linear_dw(const ctx *c, const float *x, const float *dy, float *dw, uint64_t T, uint64_t k,
                                 uint64_t n);
gs_status gs__train_cp_bias_grad(const ctx *c, const float *dy, float *db, uint64_t T, uint64_t n);
/* An FP8 GEMM's backward under opts fp8_cp_accumulate (gs__train_cp_accumulates): dx as
 * gs__train_linear_bwd gives it, and each block's weight gradient (its rows of x and dy cast at
 * their own amax, from zero) added to the block's buffer (GS_ERR_NOMEM). */
gs_status gs__train_cp_linear_bwd_fp8(const ctx *c, const float *x, const float *w, const float *dy, float *dx,
                                      float *dw, size_t T, size_t k, size_t n, const gs_fp8_split *sp,
                                      const gs_fp8_scales *sc);
/* 1 when the rank keeps each CP block's gradients over the step (opts fp8_cp_accumulate). */
int gs__train_cp_accumulates(const gs_train *t);
/* Rank r's block buffers (r->cp_acc) when it keeps them, zeroed; their release. */
gs_status gs__train_cp_acc_init(gs_train *t, rank_st *r, gs_error *err);
void gs__train_cp_acc_fini(rank_st *r);
/* Before the optimizer: each unit's block buffers added in rank order, their sum to the unit's
 * gradient, the buffers zeroed for the next step (nothing when the rank keeps none). */
void gs__train_cp_acc_flush(const ctx *c);
/* ---- context parallelism (exec/train_cp.c) ---- */
/* The exchanges' buffers of rank r (nothing when cp = 1), and their release. */
gs_status gs__train_cp_init(gs_train *t, rank_st *r, gs_error *err);
void gs__train_cp_fini(gs_train *t, rank_st *r);
/* The attention core of a CP rank (A_ATTN_FWD, A_ATTN_BWD) on layer activations a. */
gs_status gs__train_cp_attention(const ctx *c, action act, layer_act *a);

/* ---- the actions (one file per concern) ---- */
gs_status gs__train_block_action(const ctx *c, action act);
gs_status gs__train_root_action(const ctx *c, action act);
gs_status gs__train_dp_action(const ctx *c, action act);
gs_status gs__train_optim_action(const ctx *c, action act);
gs_status gs__train_sp_norm_action(const ctx *c, action act);
gs_status gs__train_p2p_action(const ctx *c, action act);
gs_status gs__train_cp_action(const ctx *c, action act);
/* The optimizer's window of unit u (exec/train_optim.c): n parameters at *p, flat offset *lo,
 * from n gradients at *g; 0 when the gradient storage does not hold n elements for it. */
int gs__train_opt_window(const rank_st *r, size_t u, float **p, float **g, uint64_t *lo, uint64_t *n);

#endif
