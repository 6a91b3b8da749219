/* The training program of the exec backend: per rank state, the event -> action table, the
 * actions (kernels and collectives through the driver), init and the shard listing. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ledger.h"
#include "engine/partition.h"
#include "engine/pipeline.h"
#include "engine/roles.h"
#include "exec/p2p_groups.h"
#include "exec/train.h"
#include "kernels/host/kernels.h"

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f
#define NO_ID UINT32_MAX

void gs_train_opts_defaults(gs_train_opts *o)
{
    o->seed = 1234;
    o->lr = 1e-3f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->init_std = 0.02f;
}

/* The forward's pipelined GEMM and reduce-scatter split each sequence shard into this many row
 * blocks (engine/build_layer.c's GS_UB_PIPELINE_SPLITS: Transformer Engine's default). */
#define UB_SPLITS 4

/* What an event does (derived once from its kind, op, phase, layer and place in its pass). */
typedef enum action {
    A_NONE,
    A_EMB_FWD, A_EMB_TP, A_EMB_AG, A_EMB_BWD,
    A_N1_FWD, A_N1_AG, A_QKV_FWD, A_ATTN_FWD, A_O_FWD, A_O_TP, A_N2_FWD, A_N2_AG, A_UP_FWD, A_ACT_FWD,
    A_DOWN_FWD, A_DOWN_TP,
    A_DY_AG, A_DOWN_BWD, A_ACT_BWD, A_N2_REAG, A_UP_BWD, A_UP_TP, A_N2_BWD, A_DXM_AG, A_O_BWD, A_ATTN_BWD,
    A_N1_REAG, A_QKV_BWD, A_QKV_TP, A_N1_BWD,
    A_HN_FWD, A_HN_AG, A_HEAD_FWD, A_LOSS_FWD, A_LOSS_AG, A_LOSS_BWD, A_HEAD_BWD, A_HEAD_TP, A_HN_BWD,
    A_UNIT_AG, A_UNIT_RS, A_INTER_AR, A_BUCKET_AR, A_CHUNK_AR, A_CHUNK_RS, A_OWN_AG, A_OPTIM, A_SP_NORM_AR,
    A_SEND_FWD, A_RECV_FWD, A_SEND_BWD, A_RECV_BWD, A_TIED_SEND, A_TIED_RECV
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
} rank_st;

struct gs_train {
    const gs_scenario *s;
    const gs_schedule *sch;
    const gs_driver_ops *ops;
    gs_drv *drv;
    gs_train_opts o;
    uint64_t mbs, T, Tl, b, seq, h, hd, a_t, kv_t, f_t, v_t, nqkv, block, tp, layers;
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
    int p2p_groups;    /* sends go out in p2p groups with a receive (exec/p2p_groups.h);
                        * GRIDSTEP_P2P_GROUPS=0 turns that off (a test of the rendezvous check) */
    uint32_t **lead;   /* while the ranks are planned: per rank list, per event, the p2p plan */
    size_t hoisted_recvs; /* receives the plan issues ahead of their place (rendezvous drivers) */
};

/* ---- set-up helpers --------------------------------------------------------------------------- */

#define INIT_ONES 0
#define INIT_ZEROS UINT64_MAX

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static float *dalloc(gs_train *t, rank_st *r, uint64_t n, int *ok)
{
    if (!*ok)
        return NULL;
    float *p = t->ops->alloc(t->drv, r->rank, (n ? n : 1) * sizeof(float));
    if (!p)
        *ok = 0;
    return p;
}

static int seg_push(unit_info *u, const segment *sg)
{
    if (u->nsegs == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 16;
        segment *n = realloc(u->segs, cap * sizeof *n);
        if (!n)
            return 0;
        u->segs = n;
        u->cap = cap;
    }
    u->segs[u->nsegs++] = *sg;
    return 1;
}

/* Appends the segment of a tensor: rows [row0, row0 + nrows) of a [R, C] tensor (row split), or
 * columns [col0, col0 + ncols) of every row (column split: nrows = R). */
static int add_seg(unit_info *u, uint64_t *flat, const char *name, int ndim, uint64_t R, uint64_t C, uint64_t init_id,
                   int colsplit, uint64_t first, uint64_t n, int replicated)
{
    segment sg;
    memset(&sg, 0, sizeof sg);
    snprintf(sg.name, sizeof sg.name, "%s", name);
    sg.ndim = ndim;
    sg.shape[0] = R;
    sg.shape[1] = C;
    sg.init_id = init_id;
    sg.flat_off = *flat;
    sg.tp_replicated = replicated;
    if (colsplit) {
        sg.nrows = R;
        sg.row_len = n;
        sg.full_off0 = first;
        sg.full_stride = C;
    } else {
        sg.nrows = 1;
        sg.row_len = n * C;
        sg.full_off0 = first * C;
        sg.full_stride = 0;
    }
    *flat += sg.nrows * sg.row_len;
    return seg_push(u, &sg);
}

/* A layer's block, in the order block_at reads it: input norm (weight, bias), q/k/v weights then
 * their biases (rows of the TP rank's heads), o_proj (columns of its heads) and its bias
 * (replicated: added once, after the TP reduction), post-attention norm, then the MLP: SwiGLU's
 * gate, up and down, or GELU's up (fc1, rows of the rank's ffn slice) and its bias, down (fc2)
 * and its bias (replicated). Biases start at zero, norm weights at one. */
static int add_layer_segs(const gs_train *t, const rank_st *r, unit_info *u, uint64_t *flat, uint64_t l)
{
    const gs_model *m = &t->s->model;
    char nm[80];
    uint64_t h = t->h, hd = t->hd, tp = r->tp_pos, id = 16 + l * 8;
    uint64_t qlo = tp * t->a_t * hd, kvlo = tp * t->kv_t * hd, flo = tp * t->f_t;
    int ok = 1;
#define LNAME(s) (snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".%s.weight", l, s), nm)
#define BNAME(s) (snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".%s.bias", l, s), nm)
    ok = ok && add_seg(u, flat, LNAME("input_layernorm"), 1, h, 1, INIT_ONES, 0, 0, h, 1);
    if (t->norm_bias)
        ok = ok && add_seg(u, flat, BNAME("input_layernorm"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    ok = ok && add_seg(u, flat, LNAME("self_attn.q_proj"), 2, m->heads * hd, h, id + 0, 0, qlo, t->a_t * hd, 0);
    ok = ok && add_seg(u, flat, LNAME("self_attn.k_proj"), 2, m->kv_heads * hd, h, id + 1, 0, kvlo, t->kv_t * hd, 0);
    ok = ok && add_seg(u, flat, LNAME("self_attn.v_proj"), 2, m->kv_heads * hd, h, id + 2, 0, kvlo, t->kv_t * hd, 0);
    if (t->attn_bias) {
        ok = ok && add_seg(u, flat, BNAME("self_attn.q_proj"), 1, m->heads * hd, 1, INIT_ZEROS, 0, qlo, t->a_t * hd, 0);
        ok = ok && add_seg(u, flat, BNAME("self_attn.k_proj"), 1, m->kv_heads * hd, 1, INIT_ZEROS, 0, kvlo,
                           t->kv_t * hd, 0);
        ok = ok && add_seg(u, flat, BNAME("self_attn.v_proj"), 1, m->kv_heads * hd, 1, INIT_ZEROS, 0, kvlo,
                           t->kv_t * hd, 0);
    }
    ok = ok && add_seg(u, flat, LNAME("self_attn.o_proj"), 2, h, m->heads * hd, id + 3, 1, qlo, t->a_t * hd, 0);
    if (t->attn_bias)
        ok = ok && add_seg(u, flat, BNAME("self_attn.o_proj"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    ok = ok && add_seg(u, flat, LNAME("post_attention_layernorm"), 1, h, 1, INIT_ONES, 0, 0, h, 1);
    if (t->norm_bias)
        ok = ok && add_seg(u, flat, BNAME("post_attention_layernorm"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    if (!t->gelu) {
        ok = ok && add_seg(u, flat, LNAME("mlp.gate_proj"), 2, m->ffn, h, id + 4, 0, flo, t->f_t, 0);
        ok = ok && add_seg(u, flat, LNAME("mlp.up_proj"), 2, m->ffn, h, id + 5, 0, flo, t->f_t, 0);
        ok = ok && add_seg(u, flat, LNAME("mlp.down_proj"), 2, h, m->ffn, id + 6, 1, flo, t->f_t, 0);
    } else {
        ok = ok && add_seg(u, flat, LNAME("mlp.up_proj"), 2, m->ffn, h, id + 5, 0, flo, t->f_t, 0);
        if (t->mlp_bias)
            ok = ok && add_seg(u, flat, BNAME("mlp.up_proj"), 1, m->ffn, 1, INIT_ZEROS, 0, flo, t->f_t, 0);
        ok = ok && add_seg(u, flat, LNAME("mlp.down_proj"), 2, h, m->ffn, id + 6, 1, flo, t->f_t, 0);
        if (t->mlp_bias)
            ok = ok && add_seg(u, flat, BNAME("mlp.down_proj"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    }
#undef LNAME
#undef BNAME
    return ok;
}

/* Elements col0 .. col0 + n - 1 of one row of a segment's initial values. */
static void init_piece(const gs_train *t, const segment *sg, uint64_t row, uint64_t col0, uint64_t n, float *full)
{
    float *dst = full + sg->flat_off + row * sg->row_len + col0;
    if (sg->init_id == INIT_ONES || sg->init_id == INIT_ZEROS)
        for (uint64_t j = 0; j < n; j++)
            dst[j] = sg->init_id == INIT_ONES ? 1.0f : 0.0f;
    else
        gs_k_init_normal(dst, n, t->o.seed, sg->init_id, sg->full_off0 + row * sg->full_stride + col0, t->o.init_std);
}

/* A unit's values split among threads in pieces of INIT_PIECE elements (a segment's row may be a
 * whole tensor): each value is a pure function of its index, so the split changes nothing but
 * the time (a billion normals take about 25 s on one core). */
enum { INIT_PIECE = 1u << 16 };

typedef struct init_job {
    const gs_train *t;
    const unit_info *u;
    float *full;
    size_t worker, workers;
} init_job;

static void *init_worker(void *arg)
{
    const init_job *j = arg;
    uint64_t k = 0; /* pieces in unit order, dealt out in turn */
    for (size_t i = 0; i < j->u->nsegs; i++) {
        const segment *sg = &j->u->segs[i];
        for (uint64_t row = 0; row < sg->nrows; row++)
            for (uint64_t c = 0; c < sg->row_len; c += INIT_PIECE, k++)
                if (k % j->workers == j->worker)
                    init_piece(j->t, sg, row, c, sg->row_len - c < INIT_PIECE ? sg->row_len - c : INIT_PIECE,
                               j->full);
    }
    return NULL;
}

static void init_unit(const gs_train *t, const unit_info *u, float *full)
{
    enum { INIT_MAX_THREADS = 32 };
    uint64_t elems = 0;
    for (size_t i = 0; i < u->nsegs; i++)
        elems += u->segs[i].nrows * u->segs[i].row_len;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    size_t workers = online > 1 ? (size_t)online : 1;
    if (workers > INIT_MAX_THREADS)
        workers = INIT_MAX_THREADS;
    if (workers > elems / (1u << 20)) /* a thread per MiB of values at least */
        workers = elems / (1u << 20) ? (size_t)(elems / (1u << 20)) : 1;
    init_job jobs[INIT_MAX_THREADS];
    pthread_t th[INIT_MAX_THREADS];
    size_t started = 0;
    for (size_t w = 0; w < workers; w++)
        jobs[w] = (init_job){t, u, full, w, workers};
    for (size_t w = 0; w < workers; w++) {
        if (w > 0 && pthread_create(&th[w], NULL, init_worker, &jobs[w]) != 0)
            break;
        started = w + 1;
    }
    /* threads that could not start: their pieces fall to this one */
    for (size_t w = started; w < workers; w++)
        init_worker(&jobs[w]);
    init_worker(&jobs[0]);
    for (size_t w = 1; w < started; w++)
        pthread_join(th[w], NULL);
}

static gs_status check_supported(const gs_scenario *s, const gs_mesh *mesh, gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = mesh->size[GS_DIM_TP];
    const char *why = NULL;
    if (m->nominal_params)
        why = "a nominal model (params: N) has no shapes to run";
    else if ((m->pos == GS_POS_ROPE && m->head_dim % 2) || m->heads % tp || m->kv_heads % tp || m->ffn % tp ||
             m->vocab % tp)
        why = "heads, kv_heads, ffn and vocab must be divisible by tp (and head_dim even under rope)";
    else if (st->wrap == GS_WRAP_MIN_PARAMS)
        why = "wrap: min_params splits blocks; the host program supports wrap layer or model";
    else if (st->sequence_parallel && tp > 1 && (s->batch.micro_seqs * m->seq) % tp)
        why = "sequence parallelism needs micro-batch tokens divisible by tp";
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: %s", why);
    return GS_OK;
}

/* ---- per-event plan --------------------------------------------------------------------------- */

static int is_tp(const gs_event *e)
{
    return e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP;
}

/* DDP (NO_SHARD), and HSDP with one DP rank per node, keep one resident full gradient that every
 * reduction reads and writes: reducing it in place after each micro-batch would count earlier
 * micro-batches again. Each rank therefore
 * accumulates its new gradients in a pending buffer (a virtual tensor id past the schedule's) that
 * a reduction sums over the group and adds to the resident gradient, as DDP's buckets do. */
static uint32_t pending_id(const rank_st *r, const gs_rank_events *re, size_t u)
{
    uint32_t g = r->grad_t[u];
    if ((r->N <= 1 && r->R <= 1) || g == NO_ID || re->tensors[g].kind != GS_T_GRAD)
        return g;
    return (uint32_t)(re->ntensors + u);
}

/* 1 when the n tensors are each their unit's resident parameters (ZeRO-1/2's gathers) */
static int own_params(const rank_st *r, const gs_rank_events *re, const uint32_t *ids, uint16_t n)
{
    for (uint16_t j = 0; j < n; j++) {
        uint32_t u = re->tensors[ids[j]].unit;
        if (u >= r->nunits || ids[j] != r->param_t[u])
            return 0;
    }
    return n > 0;
}

/* The one table exec dispatches on: per role, the action of its event going forward (the forward
 * and recompute phases), backward, and after the backward (the optimizer phase). A_NONE where the
 * role has no event in that direction, or (CPU offload's copies) where the host program has
 * nothing to do: it keeps every tensor in the driver's memory. */
enum { DIR_FWD, DIR_BWD, DIR_OPTIM, DIR_COUNT };
static const uint8_t role_actions[GS_ROLE_COUNT][DIR_COUNT] = {
    [GS_ROLE_ATTN_NORM] = {A_N1_FWD, A_N1_BWD, A_NONE},
    [GS_ROLE_QKV] = {A_QKV_FWD, A_QKV_BWD, A_NONE},
    [GS_ROLE_ATTN_CORE] = {A_ATTN_FWD, A_ATTN_BWD, A_NONE},
    [GS_ROLE_OPROJ] = {A_O_FWD, A_O_BWD, A_NONE},
    [GS_ROLE_MLP_NORM] = {A_N2_FWD, A_N2_BWD, A_NONE},
    [GS_ROLE_MLP_UP] = {A_UP_FWD, A_UP_BWD, A_NONE},
    [GS_ROLE_MLP_ACT] = {A_ACT_FWD, A_ACT_BWD, A_NONE},
    [GS_ROLE_MLP_DOWN] = {A_DOWN_FWD, A_DOWN_BWD, A_NONE},
    [GS_ROLE_EMBED] = {A_EMB_FWD, A_EMB_BWD, A_NONE},
    [GS_ROLE_HEAD_NORM] = {A_HN_FWD, A_HN_BWD, A_NONE},
    [GS_ROLE_HEAD] = {A_HEAD_FWD, A_HEAD_BWD, A_NONE},
    [GS_ROLE_LOSS] = {A_LOSS_FWD, A_LOSS_BWD, A_NONE},
    [GS_ROLE_OPTIMIZER] = {A_NONE, A_NONE, A_OPTIM},
    [GS_ROLE_TP_ATTN_IN] = {A_N1_AG, A_QKV_TP, A_NONE},
    [GS_ROLE_TP_ATTN_OUT] = {A_O_TP, A_DXM_AG, A_NONE},
    [GS_ROLE_TP_MLP_IN] = {A_N2_AG, A_UP_TP, A_NONE},
    [GS_ROLE_TP_MLP_OUT] = {A_DOWN_TP, A_DY_AG, A_NONE},
    [GS_ROLE_TP_ATTN_REGATHER] = {A_NONE, A_N1_REAG, A_NONE},
    [GS_ROLE_TP_MLP_REGATHER] = {A_NONE, A_N2_REAG, A_NONE},
    [GS_ROLE_TP_EMBED] = {A_EMB_TP, A_EMB_AG, A_NONE},
    [GS_ROLE_TP_HEAD_IN] = {A_HN_AG, A_HEAD_TP, A_NONE},
    [GS_ROLE_TP_LOSS_STATS] = {A_LOSS_AG, A_NONE, A_NONE},
    [GS_ROLE_TP_NORM_GRADS] = {A_NONE, A_NONE, A_SP_NORM_AR},
    [GS_ROLE_UNIT_GATHER] = {A_UNIT_AG, A_UNIT_AG, A_NONE},
    [GS_ROLE_GRAD_REDUCE_SCATTER] = {A_NONE, A_UNIT_RS, A_NONE},
    [GS_ROLE_GRAD_INTER_REDUCE] = {A_NONE, A_INTER_AR, A_NONE},
    [GS_ROLE_GRAD_BUCKET_REDUCE] = {A_NONE, A_BUCKET_AR, A_NONE},
    [GS_ROLE_GRAD_CHUNK_REDUCE] = {A_NONE, A_CHUNK_AR, A_NONE}, /* A_CHUNK_RS for a reduce-scatter */
    [GS_ROLE_PARAM_GATHER] = {A_NONE, A_NONE, A_OWN_AG},
    [GS_ROLE_PP_SEND] = {A_SEND_FWD, A_SEND_BWD, A_NONE},
    [GS_ROLE_PP_RECV] = {A_RECV_FWD, A_RECV_BWD, A_NONE},
    [GS_ROLE_TIED_SEND] = {A_NONE, A_NONE, A_TIED_SEND},
    [GS_ROLE_TIED_RECV] = {A_NONE, A_NONE, A_TIED_RECV},
};

static int dir_of(const gs_event *e)
{
    return e->phase == GS_PHASE_BWD ? DIR_BWD : e->phase == GS_PHASE_OPTIM ? DIR_OPTIM : DIR_FWD;
}

/* The action of a DP collective, with what it needs checked (unit in range; ZeRO's gather of
 * the updated slices and the one-bucket reductions on the state they assume), and its bucket's
 * element range. */
static gs_status plan_dp(const gs_train *t, rank_st *r, const gs_rank_events *re, size_t i, action *a,
                         gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    size_t nu = r->nunits;
    const uint32_t *reads = gs_event_list(re, e, GS_LINK_READS), *writes = gs_event_list(re, e, GS_LINK_WRITES);
    if (e->unit >= nu)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": event %zu names unit %" PRIu32 " of %zu",
                            r->rank, i, e->unit, nu);
    const char *why = NULL;
    if (*a == A_OWN_AG && !(r->own_slice && own_params(r, re, writes, e->nlinks[GS_LINK_WRITES])))
        why = "a gather of updated parameter slices where this rank keeps no resident parameters to gather into";
    if (*a == A_CHUNK_AR && e->op == GS_COLL_REDUCE_SCATTER) {
        *a = A_CHUNK_RS;
        if (!r->own_slice)
            why = "a one-bucket reduce-scatter where this rank keeps no resident gradient to reduce into";
    }
    for (uint16_t j = 0; !why && (*a == A_CHUNK_AR || *a == A_CHUNK_RS) && j < e->nlinks[GS_LINK_READS]; j++) {
        const gs_tensor *tt = &re->tensors[reads[j]];
        if (tt->unit >= nu || reads[j] != r->grad_t[tt->unit])
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": event %zu reduces a tensor that is not "
                                "a unit's resident gradient", r->rank, i);
    }
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": %s on %s (%s): %s", r->rank,
                            gs_coll_op_name((gs_coll_op)e->op), gs_group_kind_name((gs_group_kind)e->group),
                            gs_role_name((gs_role)e->role), why);
    if (*a == A_BUCKET_AR) { /* bucket part - 1 of the unit's gradient (part 0: the whole unit) */
        uint64_t P = r->units[e->unit].P;
        uint64_t nb = gs_bucket_count(P, r->plan.gb, t->s->strategy.bucket_bytes), k = e->part ? e->part - 1u : 0;
        uint64_t off = 0;
        for (uint64_t q = 0; q < k && q < nb; q++)
            off += gs_bucket_params(P, nb, q);
        pl->off = off;
        pl->count = !e->part ? P : k < nb ? gs_bucket_params(P, nb, k) : 0;
    }
    return GS_OK;
}

/* The parameter and gradient tensors a DP collective reads and writes. cur_full: the live
 * gathered copy of each unit (an all-gather makes its output the unit's). */
static void plan_dp_tensors(rank_st *r, const gs_rank_events *re, size_t i, action a, uint32_t *cur_full)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    uint32_t u = e->unit;
    const uint32_t *reads = gs_event_list(re, e, GS_LINK_READS), *writes = gs_event_list(re, e, GS_LINK_WRITES);
    if (a == A_UNIT_AG)
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_WRITES]; j++)
            if (re->tensors[writes[j]].kind == GS_T_PARAM_FULL)
                cur_full[u] = writes[j];
    pl->ptid = e->nlinks[GS_LINK_READS] ? reads[0] : NO_ID; /* AG: the shard; RS/AR: the gradient */
    /* ZeRO-1's reduce-scatter reads and writes the resident full gradient: it reduces the
     * pending one (this step's new gradients) into the resident one's own slice */
    if ((a == A_BUCKET_AR || a == A_UNIT_RS || (a == A_INTER_AR && r->N <= 1)) && pl->ptid == r->grad_t[u])
        pl->ptid = pending_id(r, re, u);
    pl->gtid = e->nlinks[GS_LINK_WRITES] ? writes[0] : NO_ID; /* AG: the gathered copy; RS/AR: storage */
    if (a == A_OWN_AG)
        pl->ptid = pl->gtid;
}

/* A compute or TP event's parameters and gradients: its layer's unit's and the root's, as the
 * list's allocations and frees leave them live at this point (the memory ledger's walk). */
static gs_status plan_layer_tensors(const gs_train *t, rank_st *r, const gs_rank_events *re, size_t i,
                                    const uint32_t *cur_full, const uint32_t *cur_grad, gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    size_t nu = r->nunits;
    int64_t u = -1;
    if (e->layer >= 0 && (uint64_t)e->layer < t->layers && r->local_of_global[e->layer] >= 0)
        u = r->unit_of_local[r->local_of_global[e->layer]];
    size_t root = r->part.has_root ? nu - 1 : SIZE_MAX;
    for (int which = 0; which < 2; which++) {
        int64_t uu = which == 0 ? u : (root == SIZE_MAX ? -1 : (int64_t)root);
        if (uu < 0)
            continue;
        uint32_t p = cur_full[uu] != NO_ID ? cur_full[uu] : (r->plan.stored_sharded ? NO_ID : r->param_t[uu]);
        uint32_t g = r->N <= 1 && r->R <= 1 ? r->grad_t[uu]
                     : cur_grad[uu] != NO_ID ? cur_grad[uu]
                     : r->hold_t[uu] != NO_ID ? r->hold_t[uu] : pending_id(r, re, (size_t)uu);
        /* a backward op accumulates into a full gradient: the schedule must hold one */
        int used = which == 0 || e->layer == GS_LAYER_EMBED || e->layer == GS_LAYER_HEAD;
        if (used && e->phase == GS_PHASE_BWD && e->kind == GS_EV_COMPUTE && r->N > 1 &&
            (g == NO_ID || (g < re->ntensors && re->tensors[g].kind == GS_T_GRAD_SHARD))) {
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(re, e, name, sizeof name);
            return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 " event %s writes unit %" PRId64
                                "'s gradient where the schedule holds no full gradient of it", r->rank, name, uu);
        }
        if (which == 0)
            pl->ptid = p, pl->gtid = g;
        else
            pl->rptid = p, pl->rgtid = g;
    }
    return GS_OK;
}

/* ---- tp_comm_overlap partners ----
 * A chunked overlap's two sides meet through driver marks: the ring all-gather marks each step
 * and the GEMM part beside it waits for the step its next chunk needs; the pipelined GEMM's
 * second part marks each split and the reduce-scatter beside it waits. Each side finds the other
 * by its role, phase, layer, micro-batch, chunk and part (never by its place in the list), and
 * the token of a marking is its event's id in the step, so the marks pair without counting. */
typedef struct ev_key {
    uint64_t hi, lo; /* role, part, phase, chunk | layer, micro-batch */
    uint32_t ev;
} ev_key;

static void key_of(const gs_event *e, gs_role role, uint16_t part, ev_key *k)
{
    k->hi = (uint64_t)role << 40 | (uint64_t)part << 24 | (uint64_t)e->phase << 16 | (uint64_t)e->chunk;
    k->lo = (uint64_t)(uint32_t)e->layer << 32 | e->mb;
}

static int cmp_key(const void *a, const void *b)
{
    const ev_key *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The event with the key of e but role `role` and part `part` (NO_ID: none). */
static uint32_t find_key(const ev_key *keys, size_t n, const gs_event *e, gs_role role, uint16_t part)
{
    ev_key k;
    key_of(e, role, part, &k);
    const ev_key *f = bsearch(&k, keys, n, sizeof *keys, cmp_key);
    return f ? f->ev : NO_ID;
}

/* The partner a tp_comm_overlap side waits for (ring GEMM part 1: its all-gather; pipelined
 * reduce-scatter part 1: its GEMM's part 2), and the checks that it has one issued before it and
 * that each split operation has both parts. */
static gs_status plan_partner(rank_st *r, const gs_rank_events *re, const ev_key *keys, size_t nkeys, size_t i,
                              gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    int fwd = e->phase != GS_PHASE_BWD;
    gs_role role = (gs_role)e->role;
    /* ring-exchanged GEMMs and their gathers; the pipelined GEMMs and their reduce-scatters */
    gs_role ring_ag = fwd ? (role == GS_ROLE_QKV ? GS_ROLE_TP_ATTN_IN : role == GS_ROLE_MLP_UP ? GS_ROLE_TP_MLP_IN
                                                                                               : GS_ROLE_NONE)
                          : (role == GS_ROLE_OPROJ ? GS_ROLE_TP_ATTN_OUT
                             : role == GS_ROLE_MLP_DOWN ? GS_ROLE_TP_MLP_OUT : GS_ROLE_NONE);
    gs_role rs_gemm = !fwd ? GS_ROLE_NONE : role == GS_ROLE_TP_ATTN_OUT ? GS_ROLE_OPROJ
                                          : role == GS_ROLE_TP_MLP_OUT ? GS_ROLE_MLP_DOWN : GS_ROLE_NONE;
    int gemm = role == GS_ROLE_QKV || role == GS_ROLE_OPROJ || role == GS_ROLE_MLP_UP || role == GS_ROLE_MLP_DOWN;
    const char *why = NULL;
    pl->partner = NO_ID;
    if ((gemm || rs_gemm != GS_ROLE_NONE) && (e->part == 1 || e->part == 2) &&
        find_key(keys, nkeys, e, role, (uint16_t)(3 - e->part)) == NO_ID)
        why = "a split operation without its other part";
    else if (gemm && ring_ag != GS_ROLE_NONE && e->part) {
        uint32_t ag = find_key(keys, nkeys, e, ring_ag, 0);
        const uint32_t *deps = gs_event_list(re, e, GS_LINK_DEPS);
        int on_ag = 0;
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            on_ag |= deps[j] == ag;
        if (ag == NO_ID || re->events[ag].op != GS_COLL_ALLGATHER)
            why = "a ring-exchanged GEMM part without its all-gather";
        else if (e->part == 2 && !on_ag)
            why = "a ring-exchanged GEMM's second part that does not wait for its all-gather";
        else if (e->part == 1 && (ag > i || on_ag))
            why = "a ring-exchanged GEMM's first part not beside an all-gather issued before it";
        if (e->part == 1)
            pl->partner = ag;
    } else if (rs_gemm != GS_ROLE_NONE && e->part == 1) {
        uint32_t g2 = find_key(keys, nkeys, e, rs_gemm, 2);
        if (g2 == NO_ID || g2 > i)
            why = "a pipelined reduce-scatter's first part without its GEMM's second part issued before it";
        pl->partner = g2;
    }
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 " event %zu: tp_comm_overlap: %s", r->rank, i,
                            why);
    return GS_OK;
}

static gs_status plan_partners(const gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
    if (!t->ovl)
        return GS_OK;
    ev_key *keys = malloc((re->nevents ? re->nevents : 1) * sizeof *keys);
    if (!keys)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < re->nevents; i++)
        if (re->events[i].layer >= 0 && re->events[i].phase != GS_PHASE_OPTIM) {
            key_of(&re->events[i], (gs_role)re->events[i].role, re->events[i].part, &keys[n]);
            keys[n++].ev = (uint32_t)i;
        }
    qsort(keys, n, sizeof *keys, cmp_key);
    gs_status rc = GS_OK;
    for (size_t i = 0; i + 1 < n && rc == GS_OK; i++)
        if (cmp_key(&keys[i], &keys[i + 1]) == 0)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": events %" PRIu32 " and %" PRIu32 " have the "
                              "same role, part, phase, layer, micro-batch and chunk", r->rank, keys[i].ev,
                              keys[i + 1].ev);
    for (size_t i = 0; i < re->nevents && rc == GS_OK; i++)
        if (re->events[i].layer >= 0 && re->events[i].phase != GS_PHASE_OPTIM)
            rc = plan_partner(r, re, keys, n, i, err);
    free(keys);
    return rc;
}

/* p2p groups (exec/p2p_groups.h): each event that issues a group learns its members' span. */
static void plan_p2p(const gs_train *t, rank_st *r)
{
    const gs_rank_events *re = &t->sch->ranks[r - t->r];
    const uint32_t *lead = t->lead ? t->lead[r - t->r] : NULL;
    for (size_t i = 0; lead && i < re->nevents; i++)
        if (lead[i]) {
            ev_plan *g = &r->plans[lead[i] - 1];
            r->plans[i].lead = lead[i];
            if (i < lead[i] - 1 && (!g->first1 || i + 1 < g->first1))
                g->first1 = (uint32_t)i + 1;
            if (i > lead[i] - 1 && i + 1 > g->last1)
                g->last1 = (uint32_t)i + 1;
        }
}

/* Classifies every event of rank r by its role (role_actions) and records which tensors hold the
 * parameters and the gradients it uses, walking the list's allocations and frees as the memory
 * ledger does. */
static gs_status plan_rank(gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
    size_t nu = r->nunits;
    uint32_t *cur_full = malloc((nu ? nu : 1) * sizeof *cur_full);
    uint32_t *cur_grad = malloc((nu ? nu : 1) * sizeof *cur_grad);
    gs_status rc = GS_OK;
    if (!cur_full || !cur_grad) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t u = 0; u < nu; u++)
        cur_full[u] = cur_grad[u] = NO_ID;
    for (size_t i = 0; i < re->nevents && rc == GS_OK; i++) {
        const gs_event *e = &re->events[i];
        ev_plan *pl = &r->plans[i];
        const uint32_t *allocs = gs_event_list(re, e, GS_LINK_ALLOCS), *frees = gs_event_list(re, e, GS_LINK_FREES);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_ALLOCS]; j++) {
            const gs_tensor *tt = &re->tensors[allocs[j]];
            if (tt->kind == GS_T_GRAD && tt->unit < nu)
                cur_grad[tt->unit] = allocs[j];
        }
        action a = e->role < GS_ROLE_COUNT ? (action)role_actions[e->role][dir_of(e)] : A_NONE;
        int dp = e->kind == GS_EV_COLLECTIVE && e->group != GS_GROUP_TP;
        if ((a == A_TIED_SEND || a == A_TIED_RECV) && !r->tied_x)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": event %zu: a pipeline send or receive "
                              "after the backward pass the host program has no use for", r->rank, i);
        else if (dp && a == A_NONE)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": %s on %s (%s) is not implemented by the "
                              "host program", r->rank, gs_coll_op_name((gs_coll_op)e->op),
                              gs_group_kind_name((gs_group_kind)e->group), gs_role_name((gs_role)e->role));
        else if (dp)
            rc = plan_dp(t, r, re, i, &a, err);
        if (rc != GS_OK)
            break;
        if (dp)
            plan_dp_tensors(r, re, i, a, cur_full);
        pl->act = (uint8_t)a;
        pl->part = (uint8_t)e->part;
        if (e->phase == GS_PHASE_RECOMPUTE)
            r->has_recompute = 1;
        if ((e->kind == GS_EV_COMPUTE || is_tp(e)) && e->phase != GS_PHASE_OPTIM)
            rc = plan_layer_tensors(t, r, re, i, cur_full, cur_grad, err);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_FREES]; j++) {
            const gs_tensor *tt = &re->tensors[frees[j]];
            if (tt->unit < nu && tt->kind == GS_T_PARAM_FULL && cur_full[tt->unit] == frees[j])
                cur_full[tt->unit] = NO_ID;
            if (tt->unit < nu && tt->kind == GS_T_GRAD && cur_grad[tt->unit] == frees[j])
                cur_grad[tt->unit] = NO_ID;
        }
    }
    if (rc == GS_OK)
        rc = plan_partners(t, r, re, err);
    if (rc == GS_OK)
        plan_p2p(t, r);
out:
    free(cur_full);
    free(cur_grad);
    return rc;
}

/* ---- create / destroy ------------------------------------------------------------------------- */

static void rank_fini(gs_train *t, rank_st *r, const gs_rank_events *re)
{
    const gs_driver_ops *ops = t->ops;
#define DFREE(p) do { if (p) ops->free(t->drv, r->rank, p); } while (0)
    if (r->tbuf && re)
        for (size_t i = 0; i < re->ntensors + r->nunits; i++)
            DFREE(r->tbuf[i]);
    for (size_t u = 0; u < r->nunits; u++) {
        if (r->m) DFREE(r->m[u]);
        if (r->v) DFREE(r->v[u]);
        if (r->tmp) DFREE(r->tmp[u]);
        if (r->units) free(r->units[u].segs);
    }
    if (r->x)
        for (uint64_t i = 0; i < (t->layers + 1) * t->mbs; i++) {
            DFREE(r->x[i]);
            DFREE(r->dx[i]);
        }
    if (r->acts)
        for (uint64_t i = 0; i < r->part.layers * t->mbs; i++) {
            layer_act *a = &r->acts[i];
            float *bufs[] = {a->n1s, a->rstd1, t->sp ? a->n1 : NULL, a->qkv, a->ao, a->p, a->op, a->ar, a->xm, a->n2s,
                             a->rstd2, t->sp ? a->n2 : NULL, a->gu, a->hh, a->dp, a->mr, a->mean1, a->mean2};
            for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
                DFREE(bufs[k]);
        }
    if (r->heads)
        for (uint64_t i = 0; i < t->mbs; i++) {
            head_act *hh = &r->heads[i];
            DFREE(hh->hns);
            DFREE(hh->rstd);
            DFREE(hh->mean);
            if (t->sp)
                DFREE(hh->hn);
            DFREE(hh->logits);
            DFREE(hh->stats);
            DFREE(hh->allstats);
            DFREE(hh->lse);
        }
    {
        float **f = (float **)&r->sc;
        for (size_t k = 0; k < sizeof r->sc / sizeof(float *); k++)
            DFREE(f[k]);
    }
    DFREE(r->tokens);
    DFREE(r->targets);
    DFREE(r->positions);
    DFREE(r->posb);
    DFREE(r->xbuf);
    DFREE(r->xstage);
#undef DFREE
    free(r->tbuf);
    free(r->m);
    free(r->v);
    free(r->tmp);
    free(r->units);
    free(r->unit_of_local);
    free(r->off_of_local);
    free(r->local_of_global);
    free(r->param_t);
    free(r->grad_t);
    free(r->hold_t);
    free(r->plans);
    free(r->x);
    free(r->dx);
    free(r->acts);
    free(r->heads);
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++)
        free(r->members[k]);
    if (r->ring_marks)
        for (uint64_t i = 0; i + 1 < t->tp; i++)
            if (r->ring_marks[i])
                ops->event_destroy(t->drv, r->ring_marks[i]);
    free(r->ring_marks);
    for (int i = 0; i < UB_SPLITS - 1; i++)
        if (r->split_marks[i])
            ops->event_destroy(t->drv, r->split_marks[i]);
    gs_partition_fini(&r->part);
}

/* The p2p plan, once the ranks are planned (and on destroy). */
static void free_lead(gs_train *t)
{
    if (t->lead)
        for (size_t i = 0; i < t->nr; i++)
            free(t->lead[i]);
    free(t->lead);
    t->lead = NULL;
}

void gs_train_destroy(gs_train *t)
{
    if (!t)
        return;
    if (t->r)
        for (size_t i = 0; i < t->nr; i++)
            rank_fini(t, &t->r[i], &t->sch->ranks[i]);
    free(t->r);
    free_lead(t);
    free(t);
}

static gs_status rank_init(gs_train *t, gs_dispatch *disp, size_t ri, gs_error *err)
{
    const gs_scenario *s = t->s;
    const gs_mesh *mesh = &t->sch->mesh;
    const gs_rank_events *re = &t->sch->ranks[ri];
    rank_st *r = &t->r[ri];
    gs_status rc;
    int ok = 1;
    r->rank = re->rank;
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, r->rank, c);
    r->stage = c[GS_DIM_PP];
    r->tp_pos = c[GS_DIM_TP];
    r->dp_pos = c[GS_DIM_DP];
    r->first = r->stage == 0;
    r->last = r->stage + 1 == mesh->size[GS_DIM_PP];
    if ((rc = gs_partition_stage(s, mesh, r->stage, &r->part, err)) != GS_OK)
        return rc;
    gs_shard_plan_init(s, mesh, r->rank, t->mbs, &r->plan);
    r->N = r->plan.N ? r->plan.N : 1;
    r->R = r->plan.R ? r->plan.R : 1;
    for (int k = 0; k < GS_GROUP_KIND_COUNT; k++) {
        uint64_t size;
        uint64_t idx = gs_group_of(mesh, (gs_group_kind)k, r->rank, &size);
        if (!(r->members[k] = malloc((size ? size : 1) * sizeof *r->members[k])))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        uint64_t n = gs_group_members_of(mesh, (gs_group_kind)k, r->rank, r->members[k]);
        uint64_t pos = 0;
        for (uint64_t q = 0; q < n; q++)
            if (r->members[k][q] == r->rank)
                pos = q;
        r->groups[k] = (gs_drv_group){(gs_group_kind)k, idx, n, pos, r->members[k]};
    }
    gs_group_kind shard_group = s->strategy.sharding == GS_SHARD_HYBRID_SHARD ? GS_GROUP_DP_INTRA : GS_GROUP_DP;
    r->shard_pos = r->groups[shard_group].pos;
    r->own_slice = r->plan.shard_opt && !r->plan.stored_sharded; /* the ledger's plan: zero1, zero2 with DP > 1 */

    /* units and their flat layout */
    r->nunits = r->part.nunits;
    size_t nu = r->nunits ? r->nunits : 1;
    uint64_t nl = r->part.layers;
    r->units = calloc(nu, sizeof *r->units);
    r->unit_of_local = malloc((nl ? nl : 1) * sizeof *r->unit_of_local);
    r->off_of_local = malloc((nl ? nl : 1) * sizeof *r->off_of_local);
    r->local_of_global = malloc((t->layers ? t->layers : 1) * sizeof *r->local_of_global);
    r->param_t = malloc(nu * sizeof *r->param_t);
    r->grad_t = malloc(nu * sizeof *r->grad_t);
    r->hold_t = malloc(nu * sizeof *r->hold_t);
    r->m = calloc(nu, sizeof *r->m);
    r->v = calloc(nu, sizeof *r->v);
    r->tmp = calloc(nu, sizeof *r->tmp);
    r->plans = calloc(re->nevents ? re->nevents : 1, sizeof *r->plans);
    r->tbuf = calloc(re->ntensors + r->nunits + 1, sizeof *r->tbuf);
    if (!r->units || !r->unit_of_local || !r->off_of_local || !r->local_of_global || !r->param_t || !r->grad_t ||
        !r->hold_t || !r->m || !r->v || !r->tmp || !r->plans || !r->tbuf)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (uint64_t l = 0; l < t->layers; l++)
        r->local_of_global[l] = -1;
    uint64_t v = s->strategy.pipeline == GS_PIPE_INTERLEAVED && mesh->size[GS_DIM_PP] > 1 && s->strategy.virtual_stages
                     ? s->strategy.virtual_stages : 1;
    for (uint64_t ll = 0; ll < nl; ll++) {
        uint64_t g = gs_pipe_global_layer(t->layers, mesh->size[GS_DIM_PP], v, r->stage, ll);
        r->local_of_global[g] = (int64_t)ll;
        r->unit_of_local[ll] = -1;
    }
    r->tied_x = s->model.tied_embeddings && mesh->size[GS_DIM_PP] > 1 && (r->first || r->last);
    r->word_n = t->v_t * t->h;
    for (size_t u = 0; u < r->nunits; u++) {
        unit_info *ui = &r->units[u];
        const gs_unit *pu = &r->part.units[u];
        ui->root = r->part.has_root && u + 1 == r->nunits;
        uint64_t flat = 0;
        int64_t lb = pu->layer_begin, le = pu->layer_end;
        if (ui->root && s->strategy.wrap == GS_WRAP_MODEL)
            lb = 0, le = (int64_t)nl - 1;
        if (ui->root && r->tied_x) {
            /* the word embedding first: the first stage's own, the last stage's copy of it
             * (initialized alike: the same normal stream and offsets; saved by the first stage) */
            r->emb_off = r->head_off = 0;
            ok = ok && add_seg(ui, &flat, "model.embed_tokens.weight", 2, s->model.vocab, t->h, 1, 0,
                               r->tp_pos * t->v_t, t->v_t, 0);
            if (ok && r->last)
                ui->segs[ui->nsegs - 1].copy = 1;
        }
        if (!(ui->root && s->strategy.wrap != GS_WRAP_MODEL))
            for (int64_t ll = lb; ll <= le; ll++) {
                r->unit_of_local[ll] = (int64_t)u;
                r->off_of_local[ll] = flat;
                ok = ok && add_layer_segs(t, r, ui, &flat, gs_pipe_global_layer(t->layers, mesh->size[GS_DIM_PP], v,
                                                                              r->stage, (uint64_t)ll));
            }
        if (ui->root) {
            uint64_t V = s->model.vocab, h = t->h;
            if (r->first && !r->tied_x) {
                r->emb_off = flat;
                ok = ok && add_seg(ui, &flat, "model.embed_tokens.weight", 2, V, h, 1, 0, r->tp_pos * t->v_t, t->v_t, 0);
            }
            if (r->first) {
                /* learned absolute positions: [seq, h], replicated over TP */
                r->pos_off = flat;
                if (!t->rope)
                    ok = ok && add_seg(ui, &flat, "model.embed_positions.weight", 2, t->seq, h, 3, 0, 0, t->seq, 1);
            }
            if (r->last) {
                r->hn_off = flat;
                ok = ok && add_seg(ui, &flat, "model.norm.weight", 1, h, 1, INIT_ONES, 0, 0, h, 1);
                if (t->norm_bias)
                    ok = ok && add_seg(ui, &flat, "model.norm.bias", 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
                /* tied: the head is the embedding's [vocab/tp, h] slice itself (one stage: its backward
                 * accumulates into the embedding's gradient) or the copy at the root's start */
                if (s->model.tied_embeddings) {
                    r->head_off = r->emb_off;
                } else {
                    r->head_off = flat;
                    ok = ok && add_seg(ui, &flat, "lm_head.weight", 2, V, h, 2, 0, r->tp_pos * t->v_t, t->v_t, 0);
                }
            }
        }
        if (!ok)
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        if (flat != pu->params)
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 " unit %zu: the layout holds %" PRIu64
                                " elements but the partition says %" PRIu64, r->rank, u, flat, pu->params);
        ui->P = flat;
        ui->S = ceil_div(flat, r->N);
        if (ui->root && r->tied_x) {
            gs_partition op;
            if ((rc = gs_partition_stage(s, mesh, r->first ? mesh->size[GS_DIM_PP] - 1 : 0, &op, err)) != GS_OK)
                return rc;
            uint64_t so = ceil_div(gs_partition_root(&op), r->N);
            gs_partition_fini(&op);
            if (so > ui->S)
                ui->S = so;
        }
        r->param_t[u] = r->grad_t[u] = r->hold_t[u] = NO_ID;
    }
    for (uint64_t ll = 0; ll < nl; ll++)
        if (r->unit_of_local[ll] < 0)
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": no unit covers layer %" PRIu64,
                                r->rank, ll);

    /* resident tensors and buffers of every parameter / gradient tensor */
    for (size_t i = 0; i < re->ntensors; i++) {
        const gs_tensor *tt = &re->tensors[i];
        if (tt->unit >= r->nunits)
            continue;
        const unit_info *ui = &r->units[tt->unit];
        uint64_t n;
        switch (tt->kind) {
        case GS_T_PARAM_SHARD:
            if (tt->resident)
                r->param_t[tt->unit] = (uint32_t)i;
            n = r->plan.stored_sharded ? ui->S : r->N * ui->S;
            break;
        case GS_T_GRAD_SHARD:
            if (tt->resident)
                r->grad_t[tt->unit] = (uint32_t)i;
            n = ui->S;
            break;
        case GS_T_GRAD:
            if (tt->resident) {
                if (r->grad_t[tt->unit] == NO_ID)
                    r->grad_t[tt->unit] = (uint32_t)i;
                else
                    r->hold_t[tt->unit] = (uint32_t)i;
            }
            n = r->N * ui->S;
            break;
        case GS_T_PARAM_FULL:
            n = r->N * ui->S;
            break;
        default:
            continue;
        }
        r->tbuf[i] = dalloc(t, r, n, &ok);
    }
    /* hold_t found before grad_t (a GRAD then a GRAD_SHARD): swap into place */
    for (size_t u = 0; u < r->nunits; u++) {
        if (r->grad_t[u] != NO_ID && re->tensors[r->grad_t[u]].kind == GS_T_GRAD && r->hold_t[u] != NO_ID &&
            re->tensors[r->hold_t[u]].kind == GS_T_GRAD_SHARD) {
            uint32_t x = r->grad_t[u];
            r->grad_t[u] = r->hold_t[u];
            r->hold_t[u] = x;
        }
        if (r->param_t[u] == NO_ID || r->grad_t[u] == NO_ID)
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 " unit %zu has no resident parameter or "
                                "gradient tensor in the schedule", r->rank, u);
    }
    for (size_t u = 0; u < r->nunits; u++) {
        uint64_t n = r->plan.stored_sharded || r->own_slice ? r->units[u].S : r->N * r->units[u].S;
        if (pending_id(r, re, u) == re->ntensors + u)
            r->tbuf[re->ntensors + u] = dalloc(t, r, r->N * r->units[u].S, &ok);
        r->m[u] = dalloc(t, r, n, &ok);
        r->v[u] = dalloc(t, r, n, &ok);
        r->tmp[u] = dalloc(t, r, r->units[u].S, &ok);
    }
    if (r->tied_x) {
        /* exec's own buffers (the ledger counts what Megatron holds: its all-reduce is in place) */
        r->xbuf = dalloc(t, r, r->word_n, &ok);
        if (r->N > 1 && r->plan.shard_grads)
            r->xstage = dalloc(t, r, r->word_n, &ok);
    }
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s parameters", r->rank);

    /* initial parameters: the unit's full flat content, then this rank's part */
    gs_drv_stream *st = gs_dispatch_stream(disp, ri, GS_STREAM_COMPUTE);
    for (size_t u = 0; u < r->nunits; u++) {
        const unit_info *ui = &r->units[u];
        float *full = calloc(r->N * ui->S + 1, sizeof *full);
        if (!full)
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        init_unit(t, ui, full);
        if (r->plan.stored_sharded)
            t->ops->upload(t->drv, st, r->tbuf[r->param_t[u]], full + r->shard_pos * ui->S, ui->S * sizeof(float));
        else
            t->ops->upload(t->drv, st, r->tbuf[r->param_t[u]], full, r->N * ui->S * sizeof(float));
        free(full);
    }

    /* tokens of this rank's micro-batches: global sequence (dp * mbs + mb) * micro + j */
    uint64_t T = t->T, sq = t->seq;
    if (r->first || r->last) {
        int32_t *tok = malloc((sq + 1) * sizeof *tok);
        int32_t *in = malloc(t->mbs * T * sizeof *in), *tg = malloc(t->mbs * T * sizeof *tg);
        if (!tok || !in || !tg) {
            free(tok), free(in), free(tg);
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        }
        for (uint64_t mb = 0; mb < t->mbs; mb++)
            for (uint64_t j = 0; j < t->b; j++) {
                gs_k_tokens(t->o.seed, (r->dp_pos * t->mbs + mb) * t->b + j, sq, s->model.vocab, tok);
                memcpy(in + mb * T + j * sq, tok, sq * sizeof *tok);
                memcpy(tg + mb * T + j * sq, tok + 1, sq * sizeof *tok);
            }
        r->tokens = t->ops->alloc(t->drv, r->rank, t->mbs * T * sizeof(int32_t));
        r->targets = t->ops->alloc(t->drv, r->rank, t->mbs * T * sizeof(int32_t));
        if (r->tokens && r->targets) {
            t->ops->upload(t->drv, st, r->tokens, in, t->mbs * T * sizeof(int32_t));
            t->ops->upload(t->drv, st, r->targets, tg, t->mbs * T * sizeof(int32_t));
        }
        free(tok), free(in), free(tg);
        if (!r->tokens || !r->targets)
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    }
    if (r->first && !t->rope) {
        /* every first-stage rank reads the positions' gradient; TP rank 0 alone adds them */
        int32_t *pos = malloc(T * sizeof *pos);
        r->positions = t->ops->alloc(t->drv, r->rank, T * sizeof(int32_t));
        r->posb = r->tp_pos == 0 ? t->ops->alloc(t->drv, r->rank, T * t->h * sizeof(float)) : NULL;
        if (pos && r->positions)
            for (uint64_t i = 0; i < T; i++)
                pos[i] = (int32_t)(i % sq);
        if (pos && r->positions)
            t->ops->upload(t->drv, st, r->positions, pos, T * sizeof(int32_t));
        free(pos);
        if (!pos || !r->positions || (r->tp_pos == 0 && !r->posb))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    }

    /* activations */
    uint64_t h = t->h, Tl = t->Tl, L = t->layers;
    r->x = calloc((L + 1) * t->mbs, sizeof *r->x);
    r->dx = calloc((L + 1) * t->mbs, sizeof *r->dx);
    r->acts = calloc(nl * t->mbs + 1, sizeof *r->acts);
    r->heads = calloc(t->mbs, sizeof *r->heads);
    if (!r->x || !r->dx || !r->acts || !r->heads)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (uint64_t pos = 0; pos <= L; pos++) {
        int used = (pos < L && r->local_of_global[pos] >= 0) || (pos > 0 && r->local_of_global[pos - 1] >= 0) ||
                   (pos == 0 && r->first) || (pos == L && r->last);
        if (!used)
            continue;
        for (uint64_t mb = 0; mb < t->mbs; mb++) {
            r->x[pos * t->mbs + mb] = dalloc(t, r, Tl * h, &ok);
            r->dx[pos * t->mbs + mb] = dalloc(t, r, Tl * h, &ok);
        }
    }
    for (uint64_t i = 0; i < nl * t->mbs; i++) {
        layer_act *a = &r->acts[i];
        a->n1s = dalloc(t, r, Tl * h, &ok);
        a->rstd1 = dalloc(t, r, Tl, &ok);
        a->mean1 = t->ln ? dalloc(t, r, Tl, &ok) : NULL;
        a->mean2 = t->ln ? dalloc(t, r, Tl, &ok) : NULL;
        a->n1 = t->sp ? dalloc(t, r, T * h, &ok) : a->n1s;
        a->qkv = dalloc(t, r, T * t->nqkv, &ok);
        a->ao = dalloc(t, r, T * t->a_t * t->hd, &ok);
        a->p = dalloc(t, r, t->attn_saved, &ok);
        a->op = dalloc(t, r, T * h, &ok);
        a->ar = dalloc(t, r, Tl * h, &ok);
        a->xm = dalloc(t, r, Tl * h, &ok);
        a->n2s = dalloc(t, r, Tl * h, &ok);
        a->rstd2 = dalloc(t, r, Tl, &ok);
        a->n2 = t->sp ? dalloc(t, r, T * h, &ok) : a->n2s;
        a->gu = dalloc(t, r, T * 2 * t->f_t, &ok);
        a->hh = dalloc(t, r, T * t->f_t, &ok);
        a->dp = dalloc(t, r, T * h, &ok);
        a->mr = dalloc(t, r, Tl * h, &ok);
    }
    if (r->last)
        for (uint64_t mb = 0; mb < t->mbs; mb++) {
            head_act *hh = &r->heads[mb];
            hh->hns = dalloc(t, r, Tl * h, &ok);
            hh->rstd = dalloc(t, r, Tl, &ok);
            hh->mean = t->ln ? dalloc(t, r, Tl, &ok) : NULL;
            hh->hn = t->sp ? dalloc(t, r, T * h, &ok) : hh->hns;
            hh->logits = dalloc(t, r, T * t->v_t, &ok);
            hh->stats = dalloc(t, r, T * GS_K_XENT_STATS, &ok);
            hh->allstats = dalloc(t, r, t->tp * T * GS_K_XENT_STATS, &ok);
            hh->lse = dalloc(t, r, T, &ok);
        }
    scratch *sc = &r->sc;
    sc->dyf = dalloc(t, r, T * h, &ok);
    sc->dh = dalloc(t, r, T * t->f_t, &ok);
    sc->dgu = dalloc(t, r, T * 2 * t->f_t, &ok);
    sc->dn2 = dalloc(t, r, T * h, &ok);
    sc->dn2s = dalloc(t, r, Tl * h, &ok);
    sc->dxm = dalloc(t, r, Tl * h, &ok);
    sc->dxmf = dalloc(t, r, T * h, &ok);
    sc->dao = dalloc(t, r, T * t->a_t * t->hd, &ok);
    sc->dqkv = dalloc(t, r, T * t->nqkv, &ok);
    sc->dn1 = dalloc(t, r, T * h, &ok);
    sc->dn1s = dalloc(t, r, Tl * h, &ok);
    sc->dlogits = r->last ? dalloc(t, r, T * t->v_t, &ok) : NULL;
    sc->dhn = dalloc(t, r, T * h, &ok);
    sc->dhns = dalloc(t, r, Tl * h, &ok);
    sc->embp = dalloc(t, r, T * h, &ok);
    sc->demb = dalloc(t, r, T * h, &ok);
    if (t->hdrop_thr) {
        sc->dyd = dalloc(t, r, Tl * h, &ok);
        sc->dxmd = dalloc(t, r, Tl * h, &ok);
    }
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s activations", r->rank);
    if (t->ovl) { /* tp_comm_overlap's progress marks */
        if (!(r->ring_marks = calloc(t->tp, sizeof *r->ring_marks)))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        for (uint64_t i = 0; i + 1 < t->tp; i++)
            if ((rc = t->ops->event_create(t->drv, &r->ring_marks[i], err)) != GS_OK)
                return rc;
        for (int i = 0; i < UB_SPLITS - 1; i++)
            if ((rc = t->ops->event_create(t->drv, &r->split_marks[i], err)) != GS_OK)
                return rc;
    }
    return plan_rank(t, r, re, err);
}

/* The p2p groups of every rank (exec/p2p_groups.h), with receives hoisted where sends wait for
 * their receivers:
 * on a driver flagged p2p_rendezvous (NCCL's sends), and on the host driver under
 * GRIDSTEP_HOST_P2P=rendezvous, which shows on the CPU what such a driver would do. */
static gs_status plan_groups(gs_train *t, gs_error *err)
{
    int rendezvous = t->ops->p2p_rendezvous || (t->ops->sends_wait && t->ops->sends_wait(t->drv));
    if (!(t->lead = calloc(t->nr ? t->nr : 1, sizeof *t->lead)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (size_t i = 0; i < t->nr; i++)
        if (!(t->lead[i] = calloc(t->sch->ranks[i].nevents ? t->sch->ranks[i].nevents : 1, sizeof *t->lead[i])))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    gs_status rc = gs_p2p_groups_plan(t->sch, t->p2p_groups, rendezvous, t->lead, &t->hoisted_recvs, err);
    if (rc == GS_ERR_UNSUPPORTED)
        gs_error_prefix(err, "exec: the %s driver's sends wait for their receivers%s", t->ops->name,
                        t->ops->p2p_rendezvous ? " (NCCL's are blocking)" : " (GRIDSTEP_HOST_P2P=rendezvous)");
    return rc;
}

gs_status gs_train_create(const gs_scenario *s, const gs_schedule *sch, const gs_driver_ops *ops, gs_drv *drv,
                          gs_dispatch *disp, const gs_train_opts *o, gs_train **out, gs_error *err)
{
    *out = NULL;
    gs_status rc = check_supported(s, &sch->mesh, err);
    if (rc != GS_OK)
        return rc;
    if (sch->nranks != sch->mesh.world)
        return gs_error_set(err, GS_ERR_INPUT, "exec: the schedule must hold every rank (build it exact)");
    gs_train *t = calloc(1, sizeof *t);
    if (!t)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    t->s = s;
    t->sch = sch;
    t->ops = ops;
    t->drv = drv;
    t->disp = disp;
    if (o)
        t->o = *o;
    else
        gs_train_opts_defaults(&t->o);
    const gs_model *m = &s->model;
    t->tp = sch->mesh.size[GS_DIM_TP];
    t->mbs = sch->microbatches;
    t->b = s->batch.micro_seqs;
    t->seq = m->seq;
    t->T = t->b * t->seq;
    t->sp = s->strategy.sequence_parallel && t->tp > 1;
    t->Tl = t->sp ? t->T / t->tp : t->T;
    t->ovl = s->strategy.tp_comm_overlap && t->sp;
    if (t->ovl && (!ops->all_gather_ring || !ops->mark || !ops->wait_mark)) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED, "exec: the %s driver cannot run tp_comm_overlap's chunked "
                          "overlaps (no all_gather_ring, mark or wait_mark); set tp_comm_overlap: false", ops->name);
        goto out;
    }
    t->flash = s->strategy.flash_attention != 0;
    if (t->flash && (!ops->attn_fwd_flash || !ops->attn_bwd_flash)) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED,
                          "exec: the %s driver has no flash attention kernels; write flash_attention: false in the "
                          "scenario's strategy to run the kernels that keep the probabilities", ops->name);
        goto out;
    }
    t->h = m->hidden;
    t->hd = m->head_dim;
    t->a_t = m->heads / t->tp;
    t->kv_t = m->kv_heads / t->tp;
    t->f_t = m->ffn / t->tp;
    t->v_t = m->vocab / t->tp;
    t->nqkv = (t->a_t + 2 * t->kv_t) * t->hd;
    t->ln = m->norm == GS_NORM_LAYERNORM;
    t->norm_bias = t->ln || m->bias; /* as engine/partition.c counts the norms */
    t->attn_bias = m->bias != 0;
    t->gelu = m->mlp == GS_MLP_GELU;
    t->mlp_bias = t->gelu && m->bias;
    t->rope = m->pos == GS_POS_ROPE;
    t->up_n = t->gelu ? t->f_t : 2 * t->f_t;
    t->attn_saved = t->b * t->a_t * t->seq * (t->flash ? 1 : t->seq);
    t->layers = m->layers;
    t->recompute = s->strategy.recompute;
    if (m->dropout) {
        t->adrop_thr = gs_dropout_threshold(m->attention_dropout);
        t->hdrop_thr = gs_dropout_threshold(m->hidden_dropout);
        /* the kept share is exactly 1 - threshold / 2^24: scaled by its inverse, unbiased */
        t->adrop_scale = (float)(1.0 / (1.0 - t->adrop_thr / 16777216.0));
        t->hdrop_scale = (float)(1.0 / (1.0 - t->hdrop_thr / 16777216.0));
    }
    const char *pg = getenv("GRIDSTEP_P2P_GROUPS");
    if (pg && *pg && strcmp(pg, "0") != 0 && strcmp(pg, "1") != 0) {
        rc = gs_error_set(err, GS_ERR_INPUT, "exec: GRIDSTEP_P2P_GROUPS is '%s', expected 0 or 1", pg);
        goto out;
    }
    t->p2p_groups = !(pg && strcmp(pg, "0") == 0);
    t->nr = sch->nranks;
    if (!(t->r = calloc(t->nr, sizeof *t->r))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    if ((rc = plan_groups(t, err)) != GS_OK)
        goto out;
    /* a multi-process run: the ranks of other processes stay empty here */
    for (size_t i = 0; i < t->nr && rc == GS_OK; i++)
        if (gs_dispatch_is_local(disp, i))
            rc = rank_init(t, disp, i, err);
    free_lead(t);
    for (size_t i = 0; i < t->nr && rc == GS_OK; i++)
        if (gs_dispatch_is_local(disp, i))
            rc = t->ops->stream_sync(t->drv, gs_dispatch_stream(disp, i, GS_STREAM_COMPUTE), err);
out:
    if (rc != GS_OK) {
        gs_train_destroy(t);
        return rc;
    }
    *out = t;
    return GS_OK;
}

void gs_train_begin_step(gs_train *t)
{
    t->step++;
    t->epoch++;
    for (size_t i = 0; i < t->nr; i++)
        t->r[i].loss_sum = 0;
}

double gs_train_loss_sum(const gs_train *t)
{
    double sum = 0;
    for (size_t i = 0; i < t->nr; i++)
        if (t->r[i].last && t->r[i].tp_pos == 0)
            sum += t->r[i].loss_sum;
    return sum;
}

double gs_train_loss_tokens(const gs_train *t)
{
    return (double)t->s->batch.global_seqs * (double)t->seq;
}

double gs_train_loss(const gs_train *t)
{
    return gs_train_loss_sum(t) / gs_train_loss_tokens(t);
}

size_t gs_train_p2p_hoisted(const gs_train *t)
{
    return t->hoisted_recvs;
}

uint64_t gs_train_step(const gs_train *t)
{
    return t->step;
}

void gs_train_set_step(gs_train *t, uint64_t step)
{
    t->step = step;
}

/* ---- the actions ------------------------------------------------------------------------------- */

typedef struct ctx {
    gs_train *t;
    rank_st *r;
    const gs_rank_events *re;
    const gs_event *e;
    const ev_plan *pl;
    gs_drv_stream *s;
    gs_error *err;
} ctx;

static float *tb(const ctx *c, uint32_t id)
{
    return id == NO_ID ? NULL : c->r->tbuf[id];
}

static void poison(const ctx *c, float *p, size_t n)
{
    c->t->ops->fill(c->t->drv, c->s, p, NAN, n);
}

/* The block weights (or their gradients) of the event's layer inside buffer base. */
typedef struct blockp {
    float *g1, *b1, *wqkv, *bqkv, *wo, *bo, *g2, *b2, *wgu, *bu, *wd, *bd; /* biases NULL when absent */
} blockp;

/* add_layer_segs' order */
static void block_at(const gs_train *t, float *base, blockp *b)
{
    uint64_t h = t->h;
    float *p = base;
#define TAKE(field, n, present) (b->field = (present) ? p : NULL, p += (present) ? (n) : 0)
    TAKE(g1, h, 1);
    TAKE(b1, h, t->norm_bias);
    TAKE(wqkv, t->nqkv * h, 1);
    TAKE(bqkv, t->nqkv, t->attn_bias);
    TAKE(wo, h * t->a_t * t->hd, 1);
    TAKE(bo, h, t->attn_bias);
    TAKE(g2, h, 1);
    TAKE(b2, h, t->norm_bias);
    TAKE(wgu, t->up_n * h, 1);
    TAKE(bu, t->f_t, t->mlp_bias);
    TAKE(wd, h * t->f_t, 1);
    TAKE(bd, h, t->mlp_bias);
#undef TAKE
}

/* The block's norms: LayerNorm (weight, bias; mean and rstd saved) or RMSNorm (weight and, with
 * norm_bias, a bias added after it). dg and db accumulate; dx is written. */
static void norm_fwd(const gs_train *t, gs_drv_stream *s, const float *x, const float *g, const float *b, float *y,
                     float *mean, float *rstd, uint64_t rows)
{
    if (t->ln) {
        t->ops->layernorm_fwd(s, x, g, b, y, mean, rstd, rows, t->h, NORM_EPS);
        return;
    }
    t->ops->rmsnorm_fwd(s, x, g, y, rstd, rows, t->h, NORM_EPS);
    if (b)
        t->ops->bias_add(s, y, b, rows, t->h);
}

static void norm_bwd(const gs_train *t, gs_drv_stream *s, const float *x, const float *g, const float *mean,
                     const float *rstd, const float *dy, float *dx, float *dg, float *db, uint64_t rows)
{
    if (t->ln) {
        t->ops->layernorm_bwd(s, x, g, mean, rstd, dy, dx, dg, db, rows, t->h);
        return;
    }
    if (db)
        t->ops->bias_grad(s, dy, db, rows, t->h);
    t->ops->rmsnorm_bwd(s, x, g, rstd, dy, dx, dg, rows, t->h);
}

/* TP reduction of a [T, h] partial: all-reduce in place, or (sequence parallel) reduce-scatter
 * into out's Tl rows. Returns the reduced rows. */
static gs_status tp_reduce(const ctx *c, float *part, float *out_sp, float **res)
{
    gs_train *t = c->t;
    const gs_drv_group *g = &c->r->groups[GS_GROUP_TP];
    *res = t->sp ? out_sp : part;
    if (t->tp <= 1)
        return GS_OK;
    if (t->sp)
        return t->ops->reduce_scatter(t->drv, c->s, c->r->rank, g, part, out_sp, t->Tl * t->h, c->err);
    return t->ops->all_reduce(t->drv, c->s, c->r->rank, g, part, t->T * t->h, c->err);
}

static gs_status tp_gather(const ctx *c, const float *shard, float *full)
{
    gs_train *t = c->t;
    return t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], shard, full, t->Tl * t->h,
                              c->err);
}

/* ---- tp_comm_overlap: Transformer Engine's overlaps, chunk by chunk (engine/build_layer.c) ----
 *
 * ring exchange  the all-gather goes round the TP ring in tp - 1 steps (all_gather_ring), marking
 *                each; the GEMM beside it (part 1) computes the rank's own chunk from its shard,
 *                then each chunk as its step's mark comes, tp - 1 chunks in all; the last chunk
 *                arrives with the gather's end, and part 2 (which depends on the gather) computes
 *                it (and, in backward, the weight gradient over every row);
 * pipeline       the forward's GEMM before a reduce-scatter runs in UB_SPLITS row splits of every
 *                shard: part 1 the first split, part 2 the others, marking each; the first
 *                reduce-scatter, beside part 2, reduces splits 0 .. UB_SPLITS - 2 as their marks
 *                come, the second (after part 2) the last split;
 * bulk           the backward's GEMM before a reduce-scatter: dgrad (part 1) beside the
 *                re-gather of the input the weight gradient needs, then wgrad (part 2) beside
 *                the reduce-scatter of dgrad's output.
 * A chunk's rows give the whole GEMM's bits (kernels/host/gemm.c: the bits depend neither on the
 * blocking nor on the rows), and the reduce-scatters sum in the same order, so the step gives the
 * unsplit step's bits. */

/* The token with which event ev of this rank marks in this step: it grows along each stream's
 * list and from step to step, as the driver's marks need; the waiting side computes it from the
 * marking event it names (ev_plan.partner). */
static uint64_t mark_token(const ctx *c, size_t ev)
{
    return c->t->epoch * (c->re->nevents + 1) + ev + 1;
}

static gs_status ring_gather(const ctx *c, const float *shard, float *full)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    return t->ops->all_gather_ring(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], shard, full, t->Tl * t->h,
                                   r->ring_marks, mark_token(c, (size_t)(c->e - c->re->events)), c->err);
}

/* The j-th chunk a ring-exchanged GEMM's part computes (j = 0, 1, ... until *in is NULL): chunk
 * *q of the gathered rows, read from *in (the rank's own chunk from its shard, unless
 * own_from_full: then from the gathered copy after the first step's mark, for a shard the
 * gather's own event writes). Part 1 waits for each later chunk's mark. */
static gs_status ring_chunk(const ctx *c, const float *shard, const float *full, uint64_t width, int own_from_full,
                            uint64_t j, uint64_t *q, const float **in)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    uint64_t n = t->tp, pos = r->tp_pos, S = t->Tl;
    *in = NULL;
    if (c->pl->part == 2) {
        if (j == 0) {
            *q = (pos + 1) % n;
            *in = full + *q * S * width;
        }
        return GS_OK;
    }
    if (j + 1 >= n)
        return GS_OK;
    *q = (pos + n - j) % n;
    if (j > 0 || own_from_full) {
        gs_status rc =
            t->ops->wait_mark(t->drv, c->s, r->ring_marks[j ? j - 1 : 0], mark_token(c, c->pl->partner), c->err);
        if (rc != GS_OK)
            return rc;
    }
    *in = j == 0 && !own_from_full ? shard : full + *q * S * width;
    return GS_OK;
}

/* Rows [lo, hi) of split j of each sequence shard of S rows. */
static void split_rows(uint64_t S, uint64_t j, uint64_t *lo, uint64_t *hi)
{
    *lo = j * S / UB_SPLITS;
    *hi = (j + 1) * S / UB_SPLITS;
}

/* Split j of the pipelined GEMM out = in w^T (in: T rows of k; w: [h, k]): each shard's rows of
 * the split, into out's split-major layout (split j's blocks at tp x lo x h, shard by shard), which
 * is what the split's reduce-scatter sends. */
static void split_gemm(const ctx *c, const float *in, const float *w, float *out, uint64_t k, uint64_t j)
{
    gs_train *t = c->t;
    uint64_t S = t->Tl, h = t->h, lo, hi;
    split_rows(S, j, &lo, &hi);
    for (uint64_t q = 0; q < t->tp && hi > lo; q++)
        t->ops->linear_fwd(c->s, in + (q * S + lo) * k, w, out + (t->tp * lo + q * (hi - lo)) * h, hi - lo, k, h);
}

static gs_status split_rs(const ctx *c, float *part, float *out_sp, uint64_t j)
{
    gs_train *t = c->t;
    uint64_t h = t->h, lo, hi;
    split_rows(t->Tl, j, &lo, &hi);
    if (hi == lo)
        return GS_OK;
    return t->ops->reduce_scatter(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], part + t->tp * lo * h,
                                  out_sp + lo * h, (hi - lo) * h, c->err);
}

/* The pipelined GEMM's part (1: split 0; 2: the others, marking each for the reduce-scatter). */
static gs_status split_gemm_part(const ctx *c, const float *in, const float *w, float *out, uint64_t k)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    if (c->pl->part == 1) {
        split_gemm(c, in, w, out, k, 0);
        return GS_OK;
    }
    uint64_t tok = mark_token(c, (size_t)(c->e - c->re->events));
    gs_status rc = GS_OK;
    for (uint64_t j = 1; j < UB_SPLITS && rc == GS_OK; j++) {
        split_gemm(c, in, w, out, k, j);
        if (j + 1 < UB_SPLITS)
            rc = t->ops->mark(t->drv, c->s, r->split_marks[j - 1], tok, c->err);
    }
    return rc;
}

/* The pipelined reduce-scatter's part (1: splits 0 .. UB_SPLITS - 2 as they come; 2: the last). */
static gs_status split_rs_part(const ctx *c, float *part, float *out_sp)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    if (c->pl->part == 2)
        return split_rs(c, part, out_sp, UB_SPLITS - 1);
    uint64_t tok = mark_token(c, c->pl->partner);
    gs_status rc = split_rs(c, part, out_sp, 0);
    for (uint64_t j = 1; j + 1 < UB_SPLITS && rc == GS_OK; j++)
        if ((rc = t->ops->wait_mark(t->drv, c->s, r->split_marks[j - 1], tok, c->err)) == GS_OK)
            rc = split_rs(c, part, out_sp, j);
    return rc;
}

static const gs_dropout *hidden_drop(const ctx *c, uint32_t site, int rows_sliced, gs_dropout *d);

/* The layer's output x[l+1] = xm + reduced MLP output (with hidden dropout: xm + dropout(MLP
 * output + fc2's bias), Megatron's bias-dropout-add), and what the recompute policy drops. */
static void finish_layer(const ctx *c, layer_act *a, float *xout, float *mlp, const float *bd)
{
    gs_train *t = c->t;
    const gs_driver_ops *ops = t->ops;
    uint64_t Tl = t->Tl, T = t->T, h = t->h;
    if (c->e->phase != GS_PHASE_FWD)
        return;
    gs_dropout dd;
    const gs_dropout *drop = hidden_drop(c, GS_DROP_MLP_OUT, t->sp, &dd);
    if (drop) { /* the reduced rows are not read again: dropped in place */
        if (bd)
            ops->bias_add(c->s, mlp, bd, Tl, h);
        ops->dropout(c->s, mlp, Tl, h, drop);
        bd = NULL;
    }
    ops->copy(t->drv, c->s, xout, a->xm, Tl * h * sizeof(float));
    ops->add(c->s, xout, mlp, Tl * h);
    if (bd) /* fc2's bias, once, on the reduced rows */
        ops->bias_add(c->s, xout, bd, Tl, h);
    /* what the forward pass does not keep (the schedule recomputes it) is gone: poison it, so a
     * backward that reads it without the recompute shows up as NaN */
    if (!c->r->has_recompute)
        return;
    if (t->recompute == GS_RECOMPUTE_FULL) {
        float *bufs[] = {a->n1s, a->qkv, a->ao, a->op, a->ar, a->xm, a->n2s, a->gu, a->hh, a->dp, a->mr};
        size_t ns[] = {Tl * h, T * t->nqkv, T * t->a_t * t->hd, T * h, Tl * h, Tl * h, Tl * h, T * 2 * t->f_t,
                       T * t->f_t, T * h, Tl * h};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            poison(c, bufs[i], ns[i]);
        poison(c, a->rstd1, Tl);
        poison(c, a->rstd2, Tl);
        if (t->ln) {
            poison(c, a->mean1, Tl);
            poison(c, a->mean2, Tl);
        }
        if (t->sp) {
            poison(c, a->n1, T * h);
            poison(c, a->n2, T * h);
        }
        poison(c, a->p, t->attn_saved);
    } else if (t->recompute == GS_RECOMPUTE_SELECTIVE) {
        poison(c, a->p, t->attn_saved);
        poison(c, a->ao, T * t->a_t * t->hd);
    }
}

static gs_status need(const ctx *c, const void *p, const char *what)
{
    if (p)
        return GS_OK;
    return gs_error_set(c->err, GS_ERR_RUNTIME, "no %s at this point of the schedule", what);
}

/* The dropout of site (kernels/dropout.h) at this event's layer, micro-batch and step: its
 * sequences are those the data gave this micro-batch (global index (dp position x micro-batches
 * + mb) x sequences per micro-batch); first as kernels/dropout.h says. NULL when the site drops
 * nothing. */
static const gs_dropout *drop_at(const ctx *c, uint32_t site, uint64_t first, gs_dropout *d)
{
    const gs_train *t = c->t;
    int attn = site == GS_DROP_ATTN;
    d->threshold = attn ? t->adrop_thr : t->hdrop_thr;
    if (!d->threshold)
        return NULL;
    d->scale = attn ? t->adrop_scale : t->hdrop_scale;
    uint64_t layer = c->e->layer >= 0 ? (uint64_t)c->e->layer : UINT64_MAX;
    d->key = gs_dropout_site_key(t->o.seed, t->step, site, site == GS_DROP_EMBED ? UINT64_MAX : layer);
    d->seq0 = (c->r->dp_pos * t->mbs + c->e->mb) * t->b;
    d->first = first;
    d->seq_len = t->seq;
    return d;
}

/* A hidden site's dropout on this rank's rows (its token slice under sequence parallelism, else
 * every token: first 0). */
static const gs_dropout *hidden_drop(const ctx *c, uint32_t site, int rows_sliced, gs_dropout *d)
{
    return drop_at(c, site, rows_sliced ? c->r->tp_pos * c->t->Tl : 0, d);
}

static gs_status layer_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    const gs_event *e = c->e;
    int64_t ll = r->local_of_global[e->layer];
    uint64_t mbs = t->mbs, mb = e->mb, T = t->T, Tl = t->Tl, h = t->h, hd = t->hd, nq = t->nqkv;
    layer_act *a = &r->acts[(uint64_t)ll * mbs + mb];
    float *xin = r->x[(uint64_t)e->layer * mbs + mb], *xout = r->x[((uint64_t)e->layer + 1) * mbs + mb];
    float *dxin = r->dx[(uint64_t)e->layer * mbs + mb], *dxout = r->dx[((uint64_t)e->layer + 1) * mbs + mb];
    scratch *sc = &r->sc;
    gs_status rc;
    blockp w, g;
    float *pbase = tb(c, c->pl->ptid), *gbase = tb(c, c->pl->gtid);
    if ((rc = need(c, pbase, "gathered parameters of this layer")) != GS_OK)
        return rc;
    uint64_t off = r->off_of_local[ll];
    block_at(t, pbase + off, &w);
    if (gbase)
        block_at(t, gbase + off, &g);
    else
        memset(&g, 0, sizeof g);
    float *q = a->qkv, *k = a->qkv + t->a_t * hd, *v = a->qkv + (t->a_t + t->kv_t) * hd;
    float *res;
    /* dropout: the attention probabilities (this rank's heads), attention's output (before the
     * residual add) and, in the backward, the MLP's output */
    gs_dropout ad, hd_out, hd_mlp;
    const gs_dropout *adrop = drop_at(c, GS_DROP_ATTN, r->tp_pos * t->a_t, &ad);
    const gs_dropout *hdrop_out = hidden_drop(c, GS_DROP_ATTN_OUT, t->sp, &hd_out);
    const gs_dropout *hdrop_mlp = hidden_drop(c, GS_DROP_MLP_OUT, t->sp, &hd_mlp);
    switch (act) {
    case A_N1_FWD:
        norm_fwd(t, c->s, xin, w.g1, w.b1, a->n1s, a->mean1, a->rstd1, Tl);
        return GS_OK;
    case A_N1_AG:
        return t->ovl ? ring_gather(c, a->n1s, a->n1) : tp_gather(c, a->n1s, a->n1);
    case A_QKV_FWD:
        if (c->pl->part) { /* ring exchange: chunk by chunk; RoPE over every row once all are in */
            uint64_t cq;
            const float *in;
            for (uint64_t j = 0; (rc = ring_chunk(c, a->n1s, a->n1, h, 0, j, &cq, &in)) == GS_OK && in; j++) {
                ops->linear_fwd(c->s, in, w.wqkv, a->qkv + cq * Tl * nq, Tl, h, nq);
                if (w.bqkv)
                    ops->bias_add(c->s, a->qkv + cq * Tl * nq, w.bqkv, Tl, nq);
            }
            if (rc != GS_OK || c->pl->part == 1)
                return rc;
            if (t->rope) {
                ops->rope_fwd(c->s, q, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
                ops->rope_fwd(c->s, k, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
            }
            return GS_OK;
        }
        ops->linear_fwd(c->s, a->n1, w.wqkv, a->qkv, T, h, nq);
        if (w.bqkv)
            ops->bias_add(c->s, a->qkv, w.bqkv, T, nq);
        if (t->rope) {
            ops->rope_fwd(c->s, q, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
            ops->rope_fwd(c->s, k, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
        }
        return GS_OK;
    case A_ATTN_FWD:
        if (t->flash)
            ops->attn_fwd_flash(c->s, q, nq, k, v, nq, a->ao, t->a_t * hd, a->p, t->b, t->seq, t->a_t, t->kv_t, hd,
                                adrop);
        else
            ops->attn_fwd(c->s, q, nq, k, v, nq, a->ao, t->a_t * hd, a->p, t->b, t->seq, t->a_t, t->kv_t, hd, adrop);
        return GS_OK;
    case A_O_FWD:
        if (c->pl->part)
            return split_gemm_part(c, a->ao, w.wo, a->op, t->a_t * hd);
        ops->linear_fwd(c->s, a->ao, w.wo, a->op, T, t->a_t * hd, h);
        return GS_OK;
    case A_O_TP:
        if (c->pl->part)
            return split_rs_part(c, a->op, a->ar);
        return tp_reduce(c, a->op, a->ar, &res);
    case A_N2_FWD:
        if (hdrop_out) { /* bias-dropout-add on the reduced rows, which nothing reads again */
            float *o = t->sp ? a->ar : a->op;
            if (w.bo)
                ops->bias_add(c->s, o, w.bo, Tl, h);
            ops->dropout(c->s, o, Tl, h, hdrop_out);
            ops->copy(t->drv, c->s, a->xm, xin, Tl * h * sizeof(float));
            ops->add(c->s, a->xm, o, Tl * h);
            norm_fwd(t, c->s, a->xm, w.g2, w.b2, a->n2s, a->mean2, a->rstd2, Tl);
            return GS_OK;
        }
        ops->copy(t->drv, c->s, a->xm, xin, Tl * h * sizeof(float));
        ops->add(c->s, a->xm, t->sp ? a->ar : a->op, Tl * h);
        if (w.bo) /* o_proj's bias, once, on the reduced rows */
            ops->bias_add(c->s, a->xm, w.bo, Tl, h);
        norm_fwd(t, c->s, a->xm, w.g2, w.b2, a->n2s, a->mean2, a->rstd2, Tl);
        return GS_OK;
    case A_N2_AG:
        return t->ovl ? ring_gather(c, a->n2s, a->n2) : tp_gather(c, a->n2s, a->n2);
    case A_UP_FWD:
        if (c->pl->part) {
            uint64_t cq;
            const float *in;
            for (uint64_t j = 0; (rc = ring_chunk(c, a->n2s, a->n2, h, 0, j, &cq, &in)) == GS_OK && in; j++) {
                ops->linear_fwd(c->s, in, w.wgu, a->gu + cq * Tl * t->up_n, Tl, h, t->up_n);
                if (w.bu)
                    ops->bias_add(c->s, a->gu + cq * Tl * t->up_n, w.bu, Tl, t->f_t);
            }
            return rc;
        }
        ops->linear_fwd(c->s, a->n2, w.wgu, a->gu, T, h, t->up_n);
        if (w.bu)
            ops->bias_add(c->s, a->gu, w.bu, T, t->f_t);
        return GS_OK;
    case A_ACT_FWD:
        if (t->gelu)
            ops->gelu_fwd(c->s, a->gu, a->hh, T * t->f_t);
        else
            ops->swiglu_fwd(c->s, a->gu, a->hh, T, t->f_t);
        return GS_OK;
    case A_DOWN_FWD:
        if (c->pl->part)
            return split_gemm_part(c, a->hh, w.wd, a->dp, t->f_t);
        ops->linear_fwd(c->s, a->hh, w.wd, a->dp, T, t->f_t, h);
        if (t->tp <= 1)
            finish_layer(c, a, xout, a->dp, w.bd);
        return GS_OK;
    case A_DOWN_TP:
        if (c->pl->part == 1)
            return split_rs_part(c, a->dp, a->mr);
        if ((rc = c->pl->part ? split_rs_part(c, a->dp, a->mr) : tp_reduce(c, a->dp, a->mr, &res)) != GS_OK)
            return rc;
        finish_layer(c, a, xout, c->pl->part ? a->mr : res, w.bd);
        return GS_OK;
    default:
        break;
    }
    /* backward */
    if ((rc = need(c, gbase, "gradient buffer of this layer")) != GS_OK)
        return rc;
    /* with hidden dropout the MLP's and attention's outputs get the dropped gradients (dyd, dxmd),
     * the residual the undropped ones */
    float *dy = hdrop_mlp ? sc->dyd : dxout, *dxmo = hdrop_out ? sc->dxmd : sc->dxm;
    float *dyf = t->sp ? sc->dyf : dy;
    float *dxmf = t->sp ? sc->dxmf : dxmo;
    if (hdrop_mlp && act == (t->sp ? A_DY_AG : A_DOWN_BWD)) { /* the layer's first backward event */
        ops->copy(t->drv, c->s, sc->dyd, dxout, Tl * h * sizeof(float));
        ops->dropout(c->s, sc->dyd, Tl, h, hdrop_mlp);
    }
    switch (act) {
    case A_DY_AG:
        return t->ovl ? ring_gather(c, dy, sc->dyf) : tp_gather(c, dy, sc->dyf);
    case A_DOWN_BWD:
        if (c->pl->part) { /* ring exchange: dgrad chunk by chunk, then wgrad over every row */
            uint64_t cq;
            const float *in;
            for (uint64_t j = 0; (rc = ring_chunk(c, dy, dyf, h, hdrop_mlp != NULL, j, &cq, &in)) == GS_OK && in; j++)
                ops->linear_bwd(c->s, a->hh + cq * Tl * t->f_t, w.wd, in, sc->dh + cq * Tl * t->f_t, NULL, Tl,
                                t->f_t, h);
            if (rc == GS_OK && c->pl->part == 2)
                ops->linear_bwd(c->s, a->hh, w.wd, dyf, NULL, g.wd, T, t->f_t, h);
            return rc;
        }
        ops->linear_bwd(c->s, a->hh, w.wd, dyf, sc->dh, g.wd, T, t->f_t, h);
        return GS_OK;
    case A_ACT_BWD:
        if (t->gelu)
            ops->gelu_bwd(c->s, a->gu, sc->dh, sc->dgu, T * t->f_t);
        else
            ops->swiglu_bwd(c->s, a->gu, sc->dh, sc->dgu, T, t->f_t);
        return GS_OK;
    case A_N2_REAG: /* bulk overlap: the input the weight gradient needs, beside dgrad */
        return tp_gather(c, a->n2s, a->n2);
    case A_UP_BWD:
        if (c->pl->part == 2) { /* bulk overlap: wgrad beside the reduce-scatter of dgrad's output */
            ops->linear_bwd(c->s, a->n2, w.wgu, sc->dgu, NULL, g.wgu, T, h, t->up_n);
            return GS_OK;
        }
        if (g.bu)
            ops->bias_grad(c->s, sc->dgu, g.bu, T, t->f_t);
        ops->linear_bwd(c->s, a->n2, w.wgu, sc->dgu, sc->dn2, c->pl->part ? NULL : g.wgu, T, h, t->up_n);
        return GS_OK;
    case A_UP_TP:
        return tp_reduce(c, sc->dn2, sc->dn2s, &res);
    case A_N2_BWD:
        norm_bwd(t, c->s, a->xm, w.g2, a->mean2, a->rstd2, t->sp ? sc->dn2s : sc->dn2, sc->dxm, g.g2, g.b2, Tl);
        ops->add(c->s, sc->dxm, dxout, Tl * h);
        if (hdrop_out) {
            ops->copy(t->drv, c->s, sc->dxmd, sc->dxm, Tl * h * sizeof(float));
            ops->dropout(c->s, sc->dxmd, Tl, h, hdrop_out);
        }
        /* the replicated biases added to this rank's rows: fc2's at x_out, o_proj's at xm (under
         * sequence parallelism partial sums, all-reduced over TP with the norms); under dropout
         * inside it, from the dropped gradients */
        if (g.bd)
            ops->bias_grad(c->s, dy, g.bd, Tl, h);
        if (g.bo)
            ops->bias_grad(c->s, dxmo, g.bo, Tl, h);
        return GS_OK;
    case A_DXM_AG:
        return t->ovl ? ring_gather(c, dxmo, sc->dxmf) : tp_gather(c, dxmo, sc->dxmf);
    case A_O_BWD:
        if (c->pl->part) {
            uint64_t cq, ahd = t->a_t * hd;
            const float *in;
            for (uint64_t j = 0; (rc = ring_chunk(c, dxmo, dxmf, h, 0, j, &cq, &in)) == GS_OK && in; j++)
                ops->linear_bwd(c->s, a->ao + cq * Tl * ahd, w.wo, in, sc->dao + cq * Tl * ahd, NULL, Tl, ahd, h);
            if (rc == GS_OK && c->pl->part == 2)
                ops->linear_bwd(c->s, a->ao, w.wo, dxmf, NULL, g.wo, T, ahd, h);
            return rc;
        }
        ops->linear_bwd(c->s, a->ao, w.wo, dxmf, sc->dao, g.wo, T, t->a_t * hd, h);
        return GS_OK;
    case A_ATTN_BWD:
        if (t->flash)
            ops->attn_bwd_flash(c->s, q, nq, k, v, nq, a->ao, a->p, sc->dao, t->a_t * hd, sc->dqkv,
                                sc->dqkv + t->a_t * hd, sc->dqkv + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t,
                                t->kv_t, hd, adrop);
        else
            ops->attn_bwd(c->s, q, nq, k, v, nq, a->p, sc->dao, t->a_t * hd, sc->dqkv, sc->dqkv + t->a_t * hd,
                          sc->dqkv + (t->a_t + t->kv_t) * hd, t->b, t->seq, t->a_t, t->kv_t, hd, adrop);
        return GS_OK;
    case A_N1_REAG:
        return tp_gather(c, a->n1s, a->n1);
    case A_QKV_BWD:
        if (c->pl->part == 2) {
            ops->linear_bwd(c->s, a->n1, w.wqkv, sc->dqkv, NULL, g.wqkv, T, h, nq);
            return GS_OK;
        }
        if (t->rope) {
            ops->rope_bwd(c->s, sc->dqkv, T, t->seq, t->a_t, hd, nq, ROPE_THETA);
            ops->rope_bwd(c->s, sc->dqkv + t->a_t * hd, T, t->seq, t->kv_t, hd, nq, ROPE_THETA);
        }
        if (g.bqkv)
            ops->bias_grad(c->s, sc->dqkv, g.bqkv, T, nq);
        ops->linear_bwd(c->s, a->n1, w.wqkv, sc->dqkv, sc->dn1, c->pl->part ? NULL : g.wqkv, T, h, nq);
        return GS_OK;
    case A_QKV_TP:
        return tp_reduce(c, sc->dn1, sc->dn1s, &res);
    case A_N1_BWD:
        norm_bwd(t, c->s, xin, w.g1, a->mean1, a->rstd1, t->sp ? sc->dn1s : sc->dn1, dxin, g.g1, g.b1, Tl);
        ops->add(c->s, dxin, sc->dxm, Tl * h);
        return GS_OK;
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no layer action %d", (int)act);
    }
}

static gs_status root_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    uint64_t mbs = t->mbs, mb = c->e->mb, T = t->T, Tl = t->Tl, h = t->h, L = t->layers;
    scratch *sc = &r->sc;
    float *pbase = tb(c, c->pl->rptid), *gbase = tb(c, c->pl->rgtid);
    gs_status rc;
    if ((rc = need(c, pbase, "gathered root unit (embedding / head)")) != GS_OK)
        return rc;
    int32_t *tok = r->tokens ? r->tokens + mb * T : NULL, *tgt = r->targets ? r->targets + mb * T : NULL;
    uint64_t vlo = r->tp_pos * t->v_t;
    float *res;
    gs_dropout ed;
    const gs_dropout *edrop = hidden_drop(c, GS_DROP_EMBED, t->sp, &ed);
    switch (act) {
    case A_EMB_FWD:
        ops->embed_fwd(c->s, tok, T, pbase + r->emb_off, vlo, t->v_t, h, t->sp ? sc->embp : r->x[mb]);
        /* learned positions: added once, by TP rank 0, to the partial sums the TP reduction adds */
        if (r->posb) {
            ops->embed_fwd(c->s, r->positions, T, pbase + r->pos_off, 0, t->seq, h, r->posb);
            ops->add(c->s, t->sp ? sc->embp : r->x[mb], r->posb, T * h);
        }
        if (t->tp <= 1 && edrop) /* embedding dropout, on the whole sums (TP: after the reduction) */
            ops->dropout(c->s, r->x[mb], T, h, edrop);
        return GS_OK;
    case A_EMB_TP:
        rc = t->sp ? tp_reduce(c, sc->embp, r->x[mb], &res) : tp_reduce(c, r->x[mb], NULL, &res);
        if (rc == GS_OK && edrop)
            ops->dropout(c->s, r->x[mb], t->Tl, h, edrop);
        return rc;
    case A_EMB_AG:
        if (edrop) /* the embedding dropout's backward on this rank's rows, before they are gathered */
            ops->dropout(c->s, r->dx[mb], t->Tl, h, edrop);
        return tp_gather(c, r->dx[mb], sc->demb);
    case A_EMB_BWD:
        if ((rc = need(c, gbase, "root gradient")) != GS_OK)
            return rc;
        if (edrop && !t->sp)
            ops->dropout(c->s, r->dx[mb], T, h, edrop);
        ops->embed_bwd(c->s, tok, T, t->sp ? sc->demb : r->dx[mb], vlo, t->v_t, h, gbase + r->emb_off);
        /* the positions' gradient from the whole rows: every TP rank has it; under sequence
         * parallelism rank 0 alone adds it, the TP all-reduce of replicated gradients follows */
        if (!t->rope && (!t->sp || r->tp_pos == 0))
            ops->embed_bwd(c->s, r->positions, T, t->sp ? sc->demb : r->dx[mb], 0, t->seq, h, gbase + r->pos_off);
        return GS_OK;
    default:
        break;
    }
    head_act *ha = &r->heads[mb];
    float *xL = r->x[L * mbs + mb], *dxL = r->dx[L * mbs + mb];
    float *wn = pbase + r->hn_off, *wh = pbase + r->head_off, *bn = t->norm_bias ? wn + h : NULL;
    switch (act) {
    case A_HN_FWD:
        norm_fwd(t, c->s, xL, wn, bn, ha->hns, ha->mean, ha->rstd, Tl);
        return GS_OK;
    case A_HN_AG:
        return tp_gather(c, ha->hns, ha->hn);
    case A_HEAD_FWD:
        ops->linear_fwd(c->s, ha->hn, wh, ha->logits, T, h, t->v_t);
        return GS_OK;
    case A_LOSS_FWD:
        ops->xent_stats(c->s, ha->logits, tgt, T, vlo, t->v_t, ha->stats);
        if (t->tp <= 1) {
            double l = 0;
            ops->xent_combine(c->s, ha->stats, 1, T, ha->lse, &l);
            r->loss_sum += l;
        }
        return GS_OK;
    case A_LOSS_AG: {
        if ((rc = t->ops->all_gather(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], ha->stats, ha->allstats,
                                     T * GS_K_XENT_STATS, c->err)) != GS_OK)
            return rc;
        double l = 0;
        ops->xent_combine(c->s, ha->allstats, t->tp, T, ha->lse, &l);
        r->loss_sum += l;
        return GS_OK;
    }
    default:
        break;
    }
    if ((rc = need(c, gbase, "root gradient")) != GS_OK)
        return rc;
    float scale = (float)(1.0 / ((double)t->s->batch.global_seqs * (double)t->seq));
    switch (act) {
    case A_LOSS_BWD:
        ops->xent_bwd(c->s, ha->logits, tgt, ha->lse, T, vlo, t->v_t, scale, sc->dlogits);
        return GS_OK;
    case A_HEAD_BWD:
        ops->linear_bwd(c->s, ha->hn, wh, sc->dlogits, sc->dhn, gbase + r->head_off, T, h, t->v_t);
        return GS_OK;
    case A_HEAD_TP:
        return tp_reduce(c, sc->dhn, sc->dhns, &res);
    case A_HN_BWD:
        norm_bwd(t, c->s, xL, wn, ha->mean, ha->rstd, t->sp ? sc->dhns : sc->dhn, dxL, gbase + r->hn_off,
                 t->norm_bias ? gbase + r->hn_off + h : NULL, Tl);
        return GS_OK;
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no root action %d", (int)act);
    }
}

/* Unit u's gradient `in` (full) reduce-scattered over g into `out`: a shard (FSDP, ZeRO-2) or,
 * when out_full, this rank's slice of ZeRO-1's resident full gradient; HSDP's cross-node
 * all-reduce adds it instead (R > 1). `in` is zeroed for the next gradients. */
static gs_status reduce_into(const ctx *c, const gs_drv_group *g, float *in, float *out, int out_full, size_t u)
{
    rank_st *r = c->r;
    const gs_driver_ops *ops = c->t->ops;
    uint64_t S = r->units[u].S;
    gs_status rc = ops->reduce_scatter(c->t->drv, c->s, r->rank, g, in, r->tmp[u], S, c->err);
    if (rc != GS_OK)
        return rc;
    if (r->R <= 1)
        ops->add(c->s, out + (out_full ? r->shard_pos * S : 0), r->tmp[u], S);
    ops->fill(c->t->drv, c->s, in, 0.0f, r->N * S);
    return GS_OK;
}

static gs_status dp_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    const gs_event *e = c->e;
    const unit_info *ui = &r->units[e->unit];
    const gs_drv_group *g = &r->groups[e->group];
    float *in = tb(c, c->pl->ptid), *out = tb(c, c->pl->gtid);
    gs_status rc;
    if ((rc = need(c, in, "input tensor")) != GS_OK || (rc = need(c, out, "output tensor")) != GS_OK)
        return rc;
    switch (act) {
    case A_UNIT_AG:
        return ops->all_gather(t->drv, c->s, r->rank, g, in, out, ui->S, c->err);
    case A_UNIT_RS:
        return reduce_into(c, g, in, out, r->own_slice && c->re->tensors[c->pl->gtid].kind == GS_T_GRAD, e->unit);
    case A_OWN_AG: {
        /* in place: this rank's slice of the resident parameters is the member's input */
        const uint32_t *writes = gs_event_list(c->re, e, GS_LINK_WRITES);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_WRITES]; j++) {
            size_t u = c->re->tensors[writes[j]].unit;
            uint64_t S = r->units[u].S;
            float *p = tb(c, writes[j]);
            if ((rc = need(c, p, "parameters")) != GS_OK ||
                (rc = ops->all_gather(t->drv, c->s, r->rank, g, p + r->shard_pos * S, p, S, c->err)) != GS_OK)
                return rc;
        }
        return GS_OK;
    }
    case A_INTER_AR: {
        if (r->N <= 1) {
            /* one DP rank per node: the whole unit's pending gradient, summed over the replicas */
            if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, in, ui->S, c->err)) != GS_OK)
                return rc;
            ops->add(c->s, out, in, ui->S);
            ops->fill(t->drv, c->s, in, 0.0f, ui->S);
            return GS_OK;
        }
        float *tmp = r->tmp[e->unit];
        if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, tmp, ui->S, c->err)) != GS_OK)
            return rc;
        ops->add(c->s, out, tmp, ui->S);
        return GS_OK;
    }
    case A_CHUNK_AR: {
        /* one bucket of several units (bucket_stages first): the host all-reduce sums element by
         * element in member order, so reducing unit by unit gives the bits one call over the
         * concatenation would */
        const uint32_t *reads = gs_event_list(c->re, e, GS_LINK_READS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_READS]; j++) {
            size_t u = c->re->tensors[reads[j]].unit;
            float *pend = tb(c, pending_id(r, c->re, u)), *grad = tb(c, r->grad_t[u]);
            uint64_t n = r->units[u].P;
            if ((rc = need(c, pend, "input tensor")) != GS_OK || (rc = need(c, grad, "output tensor")) != GS_OK ||
                (rc = ops->all_reduce(t->drv, c->s, r->rank, g, pend, n, c->err)) != GS_OK)
                return rc;
            if (pend != grad) {
                ops->add(c->s, grad, pend, n);
                ops->fill(t->drv, c->s, pend, 0.0f, n);
            }
        }
        return GS_OK;
    }
    case A_CHUNK_RS: {
        /* ZeRO-1's bucket_stages: first bucket: each unit's pending gradient into its own slice */
        const uint32_t *reads = gs_event_list(c->re, e, GS_LINK_READS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_READS]; j++) {
            size_t u = c->re->tensors[reads[j]].unit;
            float *pend = tb(c, pending_id(r, c->re, u)), *grad = tb(c, r->grad_t[u]);
            if ((rc = need(c, pend, "input tensor")) != GS_OK || (rc = need(c, grad, "output tensor")) != GS_OK ||
                (rc = reduce_into(c, g, pend, grad, 1, u)) != GS_OK)
                return rc;
        }
        return GS_OK;
    }
    case A_BUCKET_AR: {
        uint64_t o = c->pl->off, n = c->pl->count;
        if ((rc = ops->all_reduce(t->drv, c->s, r->rank, g, in + o, n, c->err)) != GS_OK)
            return rc;
        if (in != out) {
            ops->add(c->s, out + o, in + o, n);
            ops->fill(t->drv, c->s, in + o, 0.0f, n);
        }
        return GS_OK;
    }
    default:
        return gs_error_set(c->err, GS_ERR_RUNTIME, "no DP action %d", (int)act);
    }
}

/* What the optimizer updates of unit u: n parameters at *p (flat offset *lo of the unit) from n
 * gradients at *g. The whole unit, FSDP's stored shard, or ZeRO-1/2's own slice of the resident
 * parameters (from its slice of ZeRO-1's full gradient or ZeRO-2's gradient shard; an all-gather,
 * A_OWN_AG, shares it). 0 when the gradient storage does not hold n elements for it. */
static int opt_window(const rank_st *r, size_t u, float **p, float **g, uint64_t *lo, uint64_t *n)
{
    uint64_t S = r->units[u].S;
    *n = r->plan.stored_sharded ? S : r->N * S;
    *p = r->tbuf[r->param_t[u]];
    *g = r->tbuf[r->grad_t[u]];
    *lo = r->plan.stored_sharded ? r->shard_pos * S : 0;
    uint64_t gn = r->N <= 1 || !r->plan.shard_grads ? *n : S;
    if (r->own_slice) {
        *p += r->shard_pos * S;
        if (gn == *n)
            *g += r->shard_pos * S;
        *lo = r->shard_pos * S;
        *n = gn = S;
    }
    return gn == *n;
}

static gs_status optim_action(const ctx *c)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_driver_ops *ops = t->ops;
    for (size_t u = 0; u < r->nunits; u++) {
        float *p, *g;
        uint64_t lo, n;
        if (!opt_window(r, u, &p, &g, &lo, &n))
            return gs_error_set(c->err, GS_ERR_RUNTIME, "unit %zu: %" PRIu64 " parameters but fewer gradients", u, n);
        ops->adamw(c->s, p, g, r->m[u], r->v[u], n, t->o.lr, t->o.beta1, t->o.beta2, t->o.eps, t->o.weight_decay,
                   t->step);
        ops->fill(t->drv, c->s, g, 0.0f, n);
        if (r->hold_t[u] != NO_ID)
            ops->fill(t->drv, c->s, r->tbuf[r->hold_t[u]], 0.0f, r->N * r->units[u].S);
    }
    return GS_OK;
}

/* Sequence parallelism: the norm weights' gradients of this rank's storage, summed over TP. Every
 * TP peer holds the same flat ranges, so the buffer is the stage's norm gradients with zeros where
 * this rank stores nothing. */
static gs_status sp_norm_action(const ctx *c)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    uint64_t total = 0;
    for (size_t u = 0; u < r->nunits; u++)
        for (size_t k = 0; k < r->units[u].nsegs; k++)
            if (r->units[u].segs[k].tp_replicated)
                total += r->units[u].segs[k].row_len * r->units[u].segs[k].nrows;
    float *buf = t->ops->alloc(t->drv, r->rank, (total + 1) * sizeof(float));
    if (!buf)
        return gs_error_set(c->err, GS_ERR_NOMEM, "out of memory");
    int sharded = r->plan.shard_grads && r->N > 1;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t at = 0;
        for (size_t u = 0; u < r->nunits; u++) {
            const unit_info *ui = &r->units[u];
            uint64_t lo = sharded ? r->shard_pos * ui->S : 0, hi = sharded ? lo + ui->S : r->N * ui->S;
            float *g = r->tbuf[r->grad_t[u]];
            for (size_t k = 0; k < ui->nsegs; k++) {
                const segment *sg = &ui->segs[k];
                if (!sg->tp_replicated)
                    continue;
                uint64_t n = sg->row_len * sg->nrows, f0 = sg->flat_off, f1 = f0 + n;
                uint64_t a = f0 > lo ? f0 : lo, b = f1 < hi ? f1 : hi;
                if (a < b) {
                    if (pass == 0)
                        t->ops->copy(t->drv, c->s, buf + at + (a - f0), g + (a - lo), (b - a) * sizeof(float));
                    else
                        t->ops->copy(t->drv, c->s, g + (a - lo), buf + at + (a - f0), (b - a) * sizeof(float));
                }
                at += n;
            }
        }
        if (pass == 0) {
            gs_status rc = t->ops->all_reduce(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], buf, total, c->err);
            if (rc != GS_OK) {
                t->ops->free(t->drv, r->rank, buf);
                return rc;
            }
        }
    }
    t->ops->free(t->drv, r->rank, buf);
    return GS_OK;
}

/* The tied embedding's gradient window: the root unit's gradients the optimizer reads (at g,
 * flat offset lo, len elements). */
static void tied_window(const rank_st *r, float **g, uint64_t *lo, uint64_t *len)
{
    float *p;
    opt_window(r, r->nunits - 1, &p, g, lo, len);
}

/* A p2p event's buffer and size; the tied exchange's send side stages this rank's gradient over
 * [0, word_n) (zeros outside its window when the gradient is sharded: only the window is read
 * by the peer, whose window is the same). */
static void *p2p_buf(const ctx *c, const gs_event *e, action act, uint64_t *bytes)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    uint64_t mbs = t->mbs, mb = e->mb, l = (uint64_t)e->layer;
    *bytes = t->Tl * t->h * sizeof(float);
    switch (act) {
    case A_RECV_FWD: return r->x[l * mbs + mb];
    case A_SEND_FWD: return r->x[(l + 1) * mbs + mb];
    case A_RECV_BWD: return r->dx[(l + 1) * mbs + mb];
    case A_SEND_BWD: return r->dx[l * mbs + mb];
    case A_TIED_RECV: *bytes = r->word_n * sizeof(float); return r->xbuf;
    case A_TIED_SEND: {
        *bytes = r->word_n * sizeof(float);
        float *g;
        uint64_t lo, len;
        tied_window(r, &g, &lo, &len);
        if (!r->xstage) /* the whole unit's gradient (zeros outside a ZeRO-1 slice): its first word_n */
            return r->tbuf[r->grad_t[r->nunits - 1]];
        t->ops->fill(t->drv, c->s, r->xstage, 0.0f, r->word_n);
        if (lo < r->word_n)
            t->ops->copy(t->drv, c->s, r->xstage + lo, g,
                         (lo + len < r->word_n ? len : r->word_n - lo) * sizeof(float));
        return r->xstage;
    }
    default: return NULL;
    }
}

/* After the tied exchange's receive: the peer's gradient added over this rank's window. Both
 * sides add the same two operands, so the copies stay equal to the bit. */
static void tied_add(const ctx *c)
{
    rank_st *r = c->r;
    float *g;
    uint64_t lo, len;
    tied_window(r, &g, &lo, &len);
    if (lo < r->word_n)
        c->t->ops->add(c->s, g, r->xbuf + lo, lo + len < r->word_n ? len : r->word_n - lo);
}

static gs_status p2p_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_event *e = c->e;
    gs_status rc = GS_OK;
    if (c->pl->lead)
        return GS_OK; /* issued in the group of another event on this stream */
    /* the group: the sends before this event that it issues, this event, the receives after it
     * that it issues (sends first, then receives in list order, as the host driver posts them) */
    gs_drv_p2p ops[GS_P2P_GROUP_MAX_SENDS + 2];
    size_t n = 0, j = (size_t)(e - c->re->events);
    size_t lo = c->pl->first1 ? c->pl->first1 - 1 : j, hi = c->pl->last1 ? c->pl->last1 - 1 : j;
    int self_recv = !(act == A_SEND_FWD || act == A_SEND_BWD || act == A_TIED_SEND);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = lo; i <= hi; i++) {
            const gs_event *me = &c->re->events[i];
            action ma = i == j ? act : (action)r->plans[i].act;
            int is_recv = i == j ? self_recv : me->kind == GS_EV_RECV;
            if ((i != j && (me->stream != e->stream || r->plans[i].lead != j + 1)) || is_recv != pass)
                continue;
            if (n == sizeof ops / sizeof ops[0])
                return gs_error_set(c->err, GS_ERR_RUNTIME, "a p2p group of more than %zu operations", n);
            ops[n].recv = is_recv;
            ops[n].peer = me->peer;
            ops[n].buf = p2p_buf(c, me, ma, &ops[n].bytes);
            n++;
        }
    if (n > 1 && t->ops->p2p_group)
        rc = t->ops->p2p_group(t->drv, c->s, r->rank, ops, n, c->err);
    else
        for (size_t i = 0; i < n && rc == GS_OK; i++)
            rc = ops[i].recv ? t->ops->recv(t->drv, c->s, r->rank, ops[i].peer, ops[i].buf, ops[i].bytes, c->err)
                             : t->ops->send(t->drv, c->s, r->rank, ops[i].peer, ops[i].buf, ops[i].bytes, c->err);
    if (rc == GS_OK && act == A_TIED_RECV)
        tied_add(c);
    return rc;
}

gs_status gs_train_run_event(void *prog, size_t rank_index, size_t event, gs_drv_stream *s, gs_error *err)
{
    gs_train *t = prog;
    ctx c = {t, &t->r[rank_index], &t->sch->ranks[rank_index], NULL, NULL, s, err};
    c.e = &c.re->events[event];
    c.pl = &c.r->plans[event];
    action a = (action)c.pl->act;
    gs_status rc = GS_OK;
    if (a >= A_N1_FWD && a <= A_N1_BWD)
        rc = layer_action(&c, a);
    else if (a >= A_EMB_FWD && a <= A_EMB_BWD)
        rc = root_action(&c, a);
    else if (a >= A_HN_FWD && a <= A_HN_BWD)
        rc = root_action(&c, a);
    else if (a >= A_UNIT_AG && a <= A_OWN_AG)
        rc = dp_action(&c, a);
    else if (a == A_OPTIM)
        rc = optim_action(&c);
    else if (a == A_SP_NORM_AR)
        rc = sp_norm_action(&c);
    else if (a >= A_SEND_FWD && a <= A_TIED_RECV)
        rc = p2p_action(&c, a);
    if (rc != GS_OK)
        return rc;
    /* a gathered copy the event frees is gone: poison it, so a later use without a new gather
     * shows up as NaN */
    const uint32_t *frees = gs_event_list(c.re, c.e, GS_LINK_FREES);
    for (uint16_t j = 0; j < c.e->nlinks[GS_LINK_FREES]; j++) {
        const gs_tensor *tt = &c.re->tensors[frees[j]];
        if (tt->kind == GS_T_PARAM_FULL && c.r->tbuf[frees[j]] && tt->unit < c.r->nunits)
            poison(&c, c.r->tbuf[frees[j]], c.r->N * c.r->units[tt->unit].S);
    }
    return GS_OK;
}

/* ---- shards ------------------------------------------------------------------------------------ */

void gs_shard_list_fini(gs_shard_list *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntensors; i++)
        free(s->tensors[i].pieces);
    free(s->tensors);
    for (size_t i = 0; i < s->nstages; i++)
        free(s->stages[i].host);
    free(s->stages);
    memset(s, 0, sizeof *s);
}

static gs_status add_piece(gs_shard_tensor *st, size_t *cap, const gs_shard_piece *p)
{
    if (st->npieces == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        gs_shard_piece *n = realloc(st->pieces, nc * sizeof *n);
        if (!n)
            return GS_ERR_NOMEM;
        st->pieces = n;
        *cap = nc;
    }
    st->pieces[st->npieces++] = *p;
    return GS_OK;
}

/* Downloads n elements of the device buffer dev into a new stage of l; *host = its copy. */
static gs_status stage_download(const gs_train *t, size_t ri, gs_shard_list *l, float *dev, uint64_t n, float **host,
                                gs_error *err)
{
    gs_shard_stage *ns = realloc(l->stages, (l->nstages + 1) * sizeof *ns);
    if (!ns)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    l->stages = ns;
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for a %" PRIu64 "-byte host copy of rank "
                            "%" PRIu64 "'s parameters", n * (uint64_t)sizeof *h, l->rank);
    l->stages[l->nstages++] = (gs_shard_stage){dev, h, n};
    t->ops->download(t->drv, gs_dispatch_stream(t->disp, ri, GS_STREAM_COMPUTE), h, dev, n * sizeof *h);
    *host = h;
    return GS_OK;
}

/* Appends the piece [a, b) of a segment row (flat offsets, full offset fo of a) with the
 * parameters at p + a and, for ZeRO-1/2 loads, the moments split at the own slice [slo, shi):
 * inside, m and v + (a - slo); outside, the throwaway `drop` + a (the load reads them there). */
static gs_status add_load_pieces(gs_shard_tensor *st, size_t *cap, uint64_t a, uint64_t b, uint64_t fo, float *p,
                                 float *m, float *v, float *drop, uint64_t slo, uint64_t shi)
{
    while (a < b) {
        int inside = a >= slo && a < shi;
        uint64_t end = inside ? (b < shi ? b : shi) : (a < slo ? (b < slo ? b : slo) : b);
        gs_shard_piece pc = {fo, end - a, p + a, inside ? m + (a - slo) : drop + a,
                             inside ? v + (a - slo) : drop + a};
        if (add_piece(st, cap, &pc) != GS_OK)
            return GS_ERR_NOMEM;
        fo += end - a;
        a = end;
    }
    return GS_OK;
}

static gs_status shards(const gs_train *t, size_t ri, int for_load, gs_shard_list *out, gs_error *err);

gs_status gs_train_shards(const gs_train *t, size_t ri, gs_shard_list *out, gs_error *err)
{
    return shards(t, ri, 0, out, err);
}

gs_status gs_train_shards_for_load(const gs_train *t, size_t ri, gs_shard_list *out, gs_error *err)
{
    return shards(t, ri, 1, out, err);
}

static gs_status shards(const gs_train *t, size_t ri, int for_load, gs_shard_list *out, gs_error *err)
{
    gs_status rc = GS_OK;
    memset(out, 0, sizeof *out);
    if (ri >= t->nr)
        return gs_error_set(err, GS_ERR_INPUT, "exec: no rank list %zu", ri);
    const rank_st *r = &t->r[ri];
    out->rank = r->rank;
    out->step = t->step;
    size_t total = 0;
    for (size_t u = 0; u < r->nunits; u++)
        total += r->units[u].nsegs;
    if (!(out->tensors = calloc(total ? total : 1, sizeof *out->tensors)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    /* a replica of the parameters: NO_SHARD's other DP ranks, HSDP's other nodes */
    gs_sharding sh = t->s->strategy.sharding;
    int replica = sh == GS_SHARD_NO_SHARD ? r->dp_pos != 0
                  : sh == GS_SHARD_HYBRID_SHARD ? r->groups[GS_GROUP_DP_INTER].pos != 0 : 0;
    for (size_t u = 0; u < r->nunits; u++) {
        const unit_info *ui = &r->units[u];
        /* FSDP's stored shard, or ZeRO-1/2's own slice (the one its Adam state covers) */
        int slice = r->plan.stored_sharded || r->own_slice;
        uint64_t lo = slice ? r->shard_pos * ui->S : 0;
        uint64_t hi = slice ? lo + ui->S : r->N * ui->S;
        float *p = r->tbuf[r->param_t[u]] + (r->own_slice ? lo : 0), *m = r->m[u], *v = r->v[u];
        /* a ZeRO-1/2 load fills the whole resident parameter buffer (every rank reads every
         * element: nothing gathers the slices before the first forward) and the moments of the
         * own slice only; the other slices' moments go to a scratch copy that is dropped */
        int load_full = for_load && r->own_slice;
        uint64_t slo = lo, shi = hi;
        float *drop = NULL;
        if (load_full) {
            p = r->tbuf[r->param_t[u]];
            lo = 0;
            hi = r->N * ui->S;
            gs_shard_stage *ns = realloc(out->stages, (out->nstages + 1) * sizeof *ns);
            if (!ns || !(drop = malloc((hi ? hi : 1) * sizeof *drop))) {
                if (ns)
                    out->stages = ns;
                rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for a checkpoint load's scratch");
                goto out;
            }
            out->stages = ns;
            out->stages[out->nstages++] = (gs_shard_stage){NULL, drop, hi}; /* not uploaded */
        }
        if (t->ops->device_memory) {
            float **pmv[3] = {&p, &m, &v};
            for (int b = 0; b < 3; b++)
                if ((rc = stage_download(t, ri, out, *pmv[b], b == 0 ? hi - lo : shi - slo, pmv[b], err)) != GS_OK)
                    goto out;
        }
        for (size_t k = 0; k < ui->nsegs; k++) {
            const segment *sg = &ui->segs[k];
            gs_shard_tensor *st = &out->tensors[out->ntensors++];
            size_t cap = 0;
            snprintf(st->name, sizeof st->name, "%s", sg->name);
            st->ndim = sg->ndim;
            st->shape[0] = sg->shape[0];
            st->shape[1] = sg->shape[1];
            st->primary = !replica && (!sg->tp_replicated || r->tp_pos == 0) && !sg->copy;
            for (uint64_t row = 0; row < sg->nrows; row++) {
                uint64_t f0 = sg->flat_off + row * sg->row_len, f1 = f0 + sg->row_len;
                uint64_t a = f0 > lo ? f0 : lo, b = f1 < hi ? f1 : hi;
                if (a >= b)
                    continue;
                if (load_full) {
                    if (add_load_pieces(st, &cap, a, b, sg->full_off0 + row * sg->full_stride + (a - f0), p, m, v,
                                        drop, slo, shi) != GS_OK) {
                        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
                        goto out;
                    }
                    continue;
                }
                gs_shard_piece pc = {sg->full_off0 + row * sg->full_stride + (a - f0), b - a, p + (a - lo),
                                     m + (a - lo), v + (a - lo)};
                if (add_piece(st, &cap, &pc) != GS_OK) {
                    rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
                    goto out;
                }
            }
        }
    }
    /* the downloads waited on the stream; an asynchronous failure shows here */
    if (out->nstages)
        rc = t->ops->stream_sync(t->drv, gs_dispatch_stream(t->disp, ri, GS_STREAM_COMPUTE), err);
out:
    if (rc != GS_OK)
        gs_shard_list_fini(out);
    return rc;
}

gs_status gs_train_shards_upload(const gs_train *t, size_t ri, const gs_shard_list *s, gs_error *err)
{
    if (!s->nstages)
        return GS_OK;
    gs_drv_stream *st = gs_dispatch_stream(t->disp, ri, GS_STREAM_COMPUTE);
    for (size_t i = 0; i < s->nstages; i++)
        if (s->stages[i].dev) /* NULL: a load's scratch */
            t->ops->upload(t->drv, st, s->stages[i].dev, s->stages[i].host, s->stages[i].n * sizeof(float));
    return t->ops->stream_sync(t->drv, st, err);
}
