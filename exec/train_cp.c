/* Context parallelism on the exec side (grid.cp > 1): the rank's tokens in Megatron-Core's
 * load-balanced order, the CP exchanges the schedule names (roles cp_kv and cp_a2a) and the
 * attention core of a CP rank.
 *
 * Each rank holds sl = seq / cp tokens of every sequence: of its 2 cp chunks, chunks cp_pos and
 * 2 cp - 1 - cp_pos (megatron/core/utils.py, _get_batch_on_this_cp_rank_per_sequence_balancing,
 * which get_batch_on_this_cp_rank calls for sequences without cu_seqlens). Every token-wise op
 * runs on those T = b sl rows; the attention works in the sequences' own layout ([b seq] rows, a
 * "full" buffer), where RoPE's position and the causal mask are those of the single rank:
 *   p2p, all_gather  the rank's queries at their rows (the other rows zero, so their outputs and
 *                    gradients are discarded and their dK, dV terms are exact zeros), every CP
 *                    rank's K, V rows from the all-gather; the rank keeps its rows of the output
 *                    and of dQ, and sends each owner the dK, dV of its rows: the reduce-scatter
 *                    the schedule names (all_gather), or the ring's last hop at the end of the
 *                    attention's second part (p2p: the schedule counts K, V and their gradients
 *                    in the one exchange beside the first part);
 *   a2a (Ulysses)    the all-to-all's data moves through an all-gather (of which each rank
 *                    keeps what the all-to-all gives it: its heads / cp of whole sequences, then
 *                    back to its tokens of every head);
 *   a2a+p2p          the same all-gathers over the a2a level's A ranks (gs_mesh_cp_a2a_group)
 *                    leave the rank heads / A of its a2a group's rows of the sequences' layout,
 *                    the others zero; the p2p level's exchange (over gs_mesh_cp_p2p_group) gathers
 *                    the K, V of those heads for the other rows, as p2p does, and returns their
 *                    dK, dV by a reduce-scatter in the attention's second backward part; then the
 *                    a2a level's all-gathers back.
 * The kernels are the single rank's, so every query row sees the keys, positions and dropout
 * draws it sees there. */
#include <inttypes.h>
#include <stdlib.h>

#include "exec/train_internal.h"

/* The exchanges' buffers of one rank (floats; b seq = cp T rows). */
struct cp_bufs {
    /* per (local layer x mbs + mb): p2p and all_gather, every CP rank's K, V rows
     * [cp][T][2 kv_t hd] as the all-gather leaves them; a2a, U: the rank's heads of the
     * sequences [b seq][nqc] (RoPE applied by the forward), and uo: their output [b seq][ac hd] */
    float **kv, **uo;
    float *pack;             /* [T][2 kv_t hd]: the rank's K, V rows, packed for the all-gather */
    float *full, *dfull;     /* [b seq][nqkv]: q, k, v in the sequences' layout; dq, dk, dv */
    float *out, *dout;       /* [b seq][a_t hd]: the output and its gradient there */
    float *dkv_send, *dkv;   /* [cp][T][2 kv_t hd] dK, dV rows by owner; [T][2 kv_t hd] the rank's */
    float *ag, *du, *duo;    /* a2a: the all-gather's [cp T][nqkv]; dU [b seq][nqc]; [b seq][ac hd] */
    float *kvg;              /* a2a+p2p: the p2p level's all-gathered K, V [cp T][2 kvc hd] (pack: the
                                rank's [A T][2 kvc hd], dkv_send [cp T][2 kvc hd], dkv [A T][...]) */
    size_t n;                /* entries of kv and uo */
};

uint64_t gs_train_cp_position(uint64_t seq, uint64_t cp, uint64_t cp_pos, uint64_t w)
{
    if (cp <= 1)
        return w;
    uint64_t chunk = seq / (2 * cp), half = w / chunk;
    return (half ? 2 * cp - 1 - cp_pos : cp_pos) * chunk + w % chunk;
}

uint64_t gs_train_cp_owner(uint64_t seq, uint64_t cp, uint64_t pos)
{
    if (cp <= 1)
        return 0;
    uint64_t k = pos / (seq / (2 * cp)); /* chunk k of 2 cp: rank k, or 2 cp - 1 - k */
    return k < cp ? k : 2 * cp - 1 - k;
}

/* The row, in the sequences' layout, of CP rank `who`'s local token row r. */
static uint64_t full_row(const gs_train *t, uint64_t who, uint64_t r)
{
    return r / t->sl * t->seq + gs_train_cp_position(t->seq, t->cp, who, r % t->sl);
}

/* Rows of floats: base and leading dimension (floats from one row to the next). */
typedef struct row_span {
    float *p;
    uint64_t ld;
} row_span;

/* width floats of each of rank who's T local rows between the local layout and the sequences'
 * layout: to_full 1 copies loc -> full, 0 full -> loc. */
static void move_rows(const ctx *c, uint64_t who, int to_full, row_span full, row_span loc, uint64_t width)
{
    const gs_train *t = c->t;
    for (uint64_t r = 0; r < t->T; r++) {
        float *f = full.p + full_row(t, who, r) * full.ld, *l = loc.p + r * loc.ld;
        t->ops->copy(t->drv, c->s, to_full ? f : l, to_full ? l : f, width * sizeof(float));
    }
}

/* width floats of each of n rows from src to dst. */
static void copy_rows(const ctx *c, row_span dst, row_span src, uint64_t width, uint64_t n)
{
    for (uint64_t r = 0; r < n; r++)
        c->t->ops->copy(c->t->drv, c->s, dst.p + r * dst.ld, src.p + r * src.ld, width * sizeof(float));
}

gs_status gs__train_cp_init(gs_train *t, rank_st *r, gs_error *err)
{
    if (t->cp <= 1)
        return GS_OK;
    struct cp_bufs *b = calloc(1, sizeof *b);
    if (!b)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    r->cpb = b;
    uint64_t T = t->T, rows = t->b * t->seq, hd = t->hd, kvw = 2 * t->kv_t * hd, ahd = t->a_t * hd;
    gs_cp_comm how = t->s->strategy.cp_comm;
    int a2a = how == GS_CP_A2A || how == GS_CP_A2A_P2P, ok = 1;
    uint64_t A = how == GS_CP_A2A ? t->cp : how == GS_CP_A2A_P2P ? t->cp_a2a : 1, kvcw = kvw / A;
    b->n = r->part.layers * t->mbs;
    b->kv = calloc(b->n + 1, sizeof *b->kv);
    b->uo = calloc(b->n + 1, sizeof *b->uo);
    if (!b->kv || !b->uo)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (size_t i = 0; i < b->n; i++) {
        b->kv[i] = gs__train_dalloc(t, r, a2a ? rows * t->nqkv / A : t->cp * T * kvw, &ok);
        if (a2a)
            b->uo[i] = gs__train_dalloc(t, r, rows * ahd / A, &ok);
    }
    if (a2a) {
        b->ag = gs__train_dalloc(t, r, rows * t->nqkv, &ok);
        b->du = gs__train_dalloc(t, r, rows * t->nqkv / A, &ok);
        b->duo = gs__train_dalloc(t, r, rows * ahd / A, &ok);
    }
    if (how == GS_CP_A2A_P2P) {
        b->pack = gs__train_dalloc(t, r, A * T * kvcw, &ok);
        b->kvg = gs__train_dalloc(t, r, t->cp * T * kvcw, &ok);
        b->dkv_send = gs__train_dalloc(t, r, t->cp * T * kvcw, &ok);
        b->dkv = gs__train_dalloc(t, r, A * T * kvcw, &ok);
    } else if (!a2a) {
        b->pack = gs__train_dalloc(t, r, T * kvw, &ok);
        b->full = gs__train_dalloc(t, r, rows * t->nqkv, &ok);
        b->dfull = gs__train_dalloc(t, r, rows * t->nqkv, &ok);
        b->out = gs__train_dalloc(t, r, rows * ahd, &ok);
        b->dout = gs__train_dalloc(t, r, rows * ahd, &ok);
        b->dkv_send = gs__train_dalloc(t, r, t->cp * T * kvw, &ok);
        b->dkv = gs__train_dalloc(t, r, T * kvw, &ok);
    }
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s context-parallel buffers",
                            r->rank);
    return GS_OK;
}

void gs__train_cp_fini(gs_train *t, rank_st *r)
{
    struct cp_bufs *b = r->cpb;
    if (!b)
        return;
    float *one[] = {b->pack, b->full, b->dfull, b->out, b->dout, b->dkv_send, b->dkv, b->ag, b->du, b->duo, b->kvg};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        if (one[i])
            t->ops->free(t->drv, r->rank, one[i]);
    for (size_t i = 0; i < b->n; i++) {
        if (b->kv && b->kv[i])
            t->ops->free(t->drv, r->rank, b->kv[i]);
        if (b->uo && b->uo[i])
            t->ops->free(t->drv, r->rank, b->uo[i]);
    }
    free(b->kv);
    free(b->uo);
    free(b);
    r->cpb = NULL;
}

/* The event's layer activations and its (layer, micro-batch) index into the CP buffers. */
static layer_act *event_acts(const ctx *c, size_t *idx)
{
    int64_t ll = c->r->local_of_global[c->e->layer];
    *idx = (size_t)((uint64_t)ll * c->t->mbs + c->e->mb);
    return &c->r->acts[*idx];
}

static gs_status cp_all_gather(const ctx *c, const float *send, float *recv, uint64_t count)
{
    const gs_train *t = c->t;
    return t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_CP], send, recv, count, c->err);
}

/* ---- p2p and all_gather: K, V gathered, their gradients returned ---- */

/* The rank's K, V rows, all-gathered over the CP group into kv [cp][T][2 kv_t hd]. */
static gs_status gather_kv(const ctx *c, const layer_act *a, float *kv)
{
    const gs_train *t = c->t;
    uint64_t kvw = 2 * t->kv_t * t->hd;
    copy_rows(c, (row_span){c->r->cpb->pack, kvw}, (row_span){a->qkv + t->a_t * t->hd, t->nqkv}, kvw, t->T);
    return cp_all_gather(c, c->r->cpb->pack, kv, t->T * kvw);
}

/* The dK, dV rows each rank computed for this rank's tokens, summed (reduce-scatter over the CP
 * group, members in rank order) into the K, V columns of the QKV gradient. */
static gs_status return_dkv(const ctx *c)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t kvw = 2 * t->kv_t * t->hd;
    gs_status rc = t->ops->reduce_scatter(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_CP], b->dkv_send, b->dkv,
                                          t->T * kvw, c->err);
    if (rc == GS_OK)
        copy_rows(c, (row_span){c->r->sc.dqkv + t->a_t * t->hd, t->nqkv}, (row_span){b->dkv, kvw}, kvw, t->T);
    return rc;
}

/* The sequences' layout, the rank's own part: every row zero but the rank's queries and K, V
 * (bwd: also its output rows and their gradient, the others zero). */
static void full_own(const ctx *c, const layer_act *a, int bwd)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t rows = t->b * t->seq, ahd = t->a_t * t->hd, me = c->r->cp_pos;
    t->ops->fill(t->drv, c->s, b->full, 0.0f, rows * t->nqkv);
    move_rows(c, me, 1, (row_span){b->full, t->nqkv}, (row_span){a->qkv, t->nqkv}, t->nqkv);
    if (!bwd)
        return;
    t->ops->fill(t->drv, c->s, b->out, 0.0f, rows * ahd);
    t->ops->fill(t->drv, c->s, b->dout, 0.0f, rows * ahd);
    move_rows(c, me, 1, (row_span){b->out, ahd}, (row_span){a->ao, ahd}, ahd);
    move_rows(c, me, 1, (row_span){b->dout, ahd}, (row_span){c->r->sc.dao, ahd}, ahd);
}

/* The sequences' layout, the other ranks' K, V rows from the all-gather, then RoPE on q and k
 * at their positions. */
static void full_peers(const ctx *c, const float *kv)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t rows = t->b * t->seq, ahd = t->a_t * t->hd, kvw = 2 * t->kv_t * t->hd;
    for (uint64_t i = 0; i < t->cp; i++)
        if (i != c->r->cp_pos)
            move_rows(c, i, 1, (row_span){b->full + ahd, t->nqkv}, (row_span){(float *)kv + i * t->T * kvw, kvw}, kvw);
    if (t->rope) {
        t->ops->k.rope_fwd(c->s, b->full, rows, t->seq, t->a_t, t->hd, t->nqkv, ROPE_THETA);
        t->ops->k.rope_fwd(c->s, b->full + ahd, rows, t->seq, t->kv_t, t->hd, t->nqkv, ROPE_THETA);
    }
}

/* The attention's kernels on q, k, v (leading dimension ld) of whole sequences: nh query heads,
 * nkv KV heads, out and dout at ldo; saved: a->p (probabilities, or flash attention's lse). */
typedef struct attn_call {
    float *q, *out, *dout, *dq;
    uint64_t ld, ldo, nh, nkv;
    const gs_dropout *drop;
} attn_call;

static void kernel_fwd(const ctx *c, const attn_call *k, float *saved)
{
    const gs_train *t = c->t;
    float *kk = k->q + k->nh * t->hd, *vv = kk + k->nkv * t->hd;
    if (t->flash)
        t->ops->k.attn_fwd_flash(c->s, k->q, k->ld, kk, vv, k->ld, k->out, k->ldo, saved, t->b, t->seq, k->nh, k->nkv,
                                 t->hd, k->drop);
    else
        t->ops->k.attn_fwd(c->s, k->q, k->ld, kk, vv, k->ld, k->out, k->ldo, saved, t->b, t->seq, k->nh, k->nkv, t->hd,
                           k->drop);
}

/* dq, dk, dv (at k->dq, leading dimension k->ld), RoPE's transpose applied to dq and dk. */
static void kernel_bwd(const ctx *c, const attn_call *k, const float *saved)
{
    const gs_train *t = c->t;
    uint64_t hd = t->hd, rows = t->b * t->seq;
    float *kk = k->q + k->nh * hd, *vv = kk + k->nkv * hd, *dk = k->dq + k->nh * hd, *dv = dk + k->nkv * hd;
    if (t->flash)
        t->ops->k.attn_bwd_flash(c->s, k->q, k->ld, kk, vv, k->ld, k->out, saved, k->dout, k->ldo, k->dq, dk, dv, t->b,
                                 t->seq, k->nh, k->nkv, hd, k->drop);
    else
        t->ops->k.attn_bwd(c->s, k->q, k->ld, kk, vv, k->ld, saved, k->dout, k->ldo, k->dq, dk, dv, t->b, t->seq, k->nh,
                           k->nkv, hd, k->drop);
    if (t->rope) {
        t->ops->k.rope_bwd(c->s, k->dq, rows, t->seq, k->nh, hd, k->ld, ROPE_THETA);
        t->ops->k.rope_bwd(c->s, dk, rows, t->seq, k->nkv, hd, k->ld, ROPE_THETA);
    }
}

/* p2p and all_gather: the rank's queries against every key of their sequences. p2p's first part
 * (beside the ring exchange) lays out the rank's own rows, its second part the others' and runs
 * the kernels; all_gather's one event does both. */
static gs_status gathered_attention(const ctx *c, action act, layer_act *a, float *kv)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t ahd = t->a_t * t->hd, kvw = 2 * t->kv_t * t->hd, me = c->r->cp_pos;
    int bwd = act == A_ATTN_BWD, part = c->pl->part;
    gs_dropout d;
    attn_call k = {b->full, b->out, b->dout, b->dfull, t->nqkv, ahd, t->a_t, t->kv_t,
                   gs__train_drop_at(c, GS_DROP_ATTN, c->r->tp_pos * t->a_t, &d)};
    if (part != 2)
        full_own(c, a, bwd);
    if (part == 1)
        return GS_OK;
    full_peers(c, kv);
    if (!bwd) {
        kernel_fwd(c, &k, a->p);
        move_rows(c, me, 0, (row_span){b->out, ahd}, (row_span){a->ao, ahd}, ahd);
        return GS_OK;
    }
    kernel_bwd(c, &k, a->p);
    move_rows(c, me, 0, (row_span){b->dfull, t->nqkv}, (row_span){c->r->sc.dqkv, t->nqkv}, ahd);
    for (uint64_t i = 0; i < t->cp; i++)
        move_rows(c, i, 0, (row_span){b->dfull + ahd, t->nqkv}, (row_span){b->dkv_send + i * t->T * kvw, kvw}, kvw);
    if (part != 2)
        return GS_OK; /* all_gather: the schedule's reduce-scatter returns them */
    /* p2p: the ring's last hop, inside this part; the event's start stays its own work's */
    gs_status rc = return_dkv(c);
    if (t->ops->op_start_s)
        (void)t->ops->op_start_s(t->drv, c->s);
    return rc;
}

/* ---- a2a (Ulysses): heads / n of the a2a group's rows; a2a+p2p's first level ---- */

/* The all-to-all's group: the CP group (a2a: n = cp) or hierarchical CP's a2a level (n = A);
 * this rank's index `me` in it, and the CP position of its first member (members base + i). */
typedef struct a2a_level {
    const gs_drv_group *g;
    uint64_t n, me, base;
} a2a_level;

static a2a_level level_of(const ctx *c)
{
    const gs_train *t = c->t;
    if (t->s->strategy.cp_comm == GS_CP_A2A)
        return (a2a_level){&c->r->groups[GS_GROUP_CP], t->cp, c->r->cp_pos, 0};
    uint64_t me = c->r->cp_pos % t->cp_a2a;
    return (a2a_level){&c->r->groups[GS_GROUP_CP_A2A], t->cp_a2a, me, c->r->cp_pos - me};
}

static gs_status level_all_gather(const ctx *c, const a2a_level *l, const float *send, float *recv, uint64_t count)
{
    const gs_train *t = c->t;
    return t->ops->all_gather(t->drv, c->s, c->r->rank, l->g, send, recv, count, c->err);
}

/* Heads of one kind in a row: q, k or v (0, 1, 2), in the rank's T-row layout (a_t, kv_t heads)
 * and in the head-split one (ac, kvc heads of the level's member `who`). */
static uint64_t local_col(const gs_train *t, uint64_t n, int kind, uint64_t who)
{
    uint64_t ac = t->a_t / n, kvc = t->kv_t / n;
    return (kind == 0 ? who * ac : kind == 1 ? t->a_t + who * kvc : t->a_t + t->kv_t + who * kvc) * t->hd;
}

static uint64_t split_col(const gs_train *t, uint64_t n, int kind)
{
    uint64_t ac = t->a_t / n, kvc = t->kv_t / n;
    return (kind == 0 ? 0 : kind == 1 ? ac : ac + kvc) * t->hd;
}

static uint64_t kind_width(const gs_train *t, uint64_t n, int kind)
{
    return (kind == 0 ? t->a_t : t->kv_t) / n * t->hd;
}

/* Forward, part 1: every member's Q, K, V rows; this rank keeps its heads of their tokens, in
 * the sequences' layout (u; under a2a+p2p the other rows zero). */
static gs_status a2a_qkv_fwd(const ctx *c, const a2a_level *l, const layer_act *a, float *u)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t nqc = t->nqkv / l->n, rows = t->b * t->seq;
    if (l->n != t->cp)
        t->ops->fill(t->drv, c->s, u, 0.0f, rows * nqc);
    gs_status rc = level_all_gather(c, l, a->qkv, b->ag, t->T * t->nqkv);
    for (uint64_t i = 0; i < l->n && rc == GS_OK; i++)
        for (int kind = 0; kind < 3; kind++)
            move_rows(c, l->base + i, 1, (row_span){u + split_col(t, l->n, kind), nqc},
                      (row_span){b->ag + i * t->T * t->nqkv + local_col(t, l->n, kind, l->me), t->nqkv},
                      kind_width(t, l->n, kind));
    return rc;
}

/* Forward, part 2: every member's heads of the output; this rank keeps its tokens' rows. */
static gs_status a2a_out_fwd(const ctx *c, const a2a_level *l, layer_act *a, const float *uo)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t ahd = t->a_t * t->hd, acd = ahd / l->n, rows = t->b * t->seq;
    gs_status rc = level_all_gather(c, l, uo, b->ag, rows * acd);
    for (uint64_t i = 0; i < l->n && rc == GS_OK; i++)
        move_rows(c, c->r->cp_pos, 0, (row_span){b->ag + i * rows * acd, acd}, (row_span){a->ao + i * acd, ahd}, acd);
    return rc;
}

/* Backward, part 2 (first): every member's output gradient; this rank keeps its heads of their
 * tokens (duo; under a2a+p2p the other rows zero, so they add nothing to dK, dV). */
static gs_status a2a_dout_bwd(const ctx *c, const a2a_level *l)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t ahd = t->a_t * t->hd, acd = ahd / l->n;
    if (l->n != t->cp)
        t->ops->fill(t->drv, c->s, b->duo, 0.0f, t->b * t->seq * acd);
    gs_status rc = level_all_gather(c, l, c->r->sc.dao, b->ag, t->T * ahd);
    for (uint64_t i = 0; i < l->n && rc == GS_OK; i++)
        move_rows(c, l->base + i, 1, (row_span){b->duo, acd}, (row_span){b->ag + i * t->T * ahd + l->me * acd, ahd},
                  acd);
    return rc;
}

/* Backward, part 1: every member's dQ, dK, dV of its heads; this rank keeps its tokens' rows. */
static gs_status a2a_dqkv_bwd(const ctx *c, const a2a_level *l)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t nqc = t->nqkv / l->n, rows = t->b * t->seq;
    gs_status rc = level_all_gather(c, l, b->du, b->ag, rows * nqc);
    for (uint64_t i = 0; i < l->n && rc == GS_OK; i++)
        for (int kind = 0; kind < 3; kind++)
            move_rows(c, c->r->cp_pos, 0, (row_span){b->ag + i * rows * nqc + split_col(t, l->n, kind), nqc},
                      (row_span){c->r->sc.dqkv + local_col(t, l->n, kind, i), t->nqkv}, kind_width(t, l->n, kind));
    return rc;
}

/* ---- a2a+p2p's second level: the K, V of the rank's heads over its p2p group ---- */

/* Each a2a group's K, V rows (heads / A) between u (the sequences' layout) and a packed
 * [A T][2 kvc hd] block: to_pack 1 packs a2a group g's rows of u, 0 unpacks them into u. */
static void kv_block(const ctx *c, uint64_t g, int to_pack, float *u, float *blk)
{
    const gs_train *t = c->t;
    uint64_t A = t->cp_a2a, nqc = t->nqkv / A, kvcw = 2 * (t->kv_t / A) * t->hd, qw = t->a_t / A * t->hd;
    for (uint64_t i = 0; i < A; i++)
        move_rows(c, g * A + i, !to_pack, (row_span){u + qw, nqc}, (row_span){blk + i * t->T * kvcw, kvcw}, kvcw);
}

/* The p2p level's exchange: this rank's a2a group's K, V (of its heads) all-gathered over the
 * p2p group, the other groups' written into u. Forward before RoPE (the attention's second part
 * rotates every row); backward the rotated rows, which u holds already the same. */
static gs_status hier_gather_kv(const ctx *c, float *u)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    uint64_t A = t->cp_a2a, B = t->cp / A, mine = c->r->cp_pos / A, kvcw = 2 * (t->kv_t / A) * t->hd;
    kv_block(c, mine, 1, u, b->pack);
    gs_status rc = t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_CP_P2P], b->pack, b->kvg,
                                      A * t->T * kvcw, c->err);
    for (uint64_t j = 0; j < B && rc == GS_OK; j++)
        if (j != mine)
            kv_block(c, j, 0, u, b->kvg + j * A * t->T * kvcw);
    return rc;
}

/* The attention on this rank's heads: a2a's of whole sequences; a2a+p2p's second part, of its a2a
 * group's queries against every row's K, V (RoPE applied to u's q and k in place by the forward,
 * which the backward reads), then dK, dV of each a2a group's rows reduce-scattered over the p2p
 * group to their owners (the ring's last hop, inside the part). */
static gs_status a2a_attention(const ctx *c, action act, layer_act *a, float *u, float *uo)
{
    const gs_train *t = c->t;
    struct cp_bufs *b = c->r->cpb;
    a2a_level l = level_of(c);
    int hier = t->s->strategy.cp_comm == GS_CP_A2A_P2P;
    if (hier && c->pl->part == 1)
        return GS_OK; /* beside the p2p exchange, which placed the K, V */
    uint64_t ac = t->a_t / l.n, kvc = t->kv_t / l.n, nqc = t->nqkv / l.n, rows = t->b * t->seq;
    gs_dropout d;
    attn_call k = {u, uo, b->duo, b->du, nqc, ac * t->hd, ac, kvc,
                   gs__train_drop_at(c, GS_DROP_ATTN, c->r->tp_pos * t->a_t + l.me * ac, &d)};
    if (act != A_ATTN_BWD) {
        if (t->rope) {
            t->ops->k.rope_fwd(c->s, u, rows, t->seq, ac, t->hd, nqc, ROPE_THETA);
            t->ops->k.rope_fwd(c->s, u + ac * t->hd, rows, t->seq, kvc, t->hd, nqc, ROPE_THETA);
        }
        kernel_fwd(c, &k, a->p);
        return GS_OK;
    }
    kernel_bwd(c, &k, a->p);
    if (!hier)
        return GS_OK;
    uint64_t A = t->cp_a2a, B = t->cp / A, mine = c->r->cp_pos / A, kvcw = 2 * kvc * t->hd;
    for (uint64_t j = 0; j < B; j++)
        kv_block(c, j, 1, b->du, b->dkv_send + j * A * t->T * kvcw);
    gs_status rc = t->ops->reduce_scatter(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_CP_P2P], b->dkv_send,
                                          b->dkv, A * t->T * kvcw, c->err);
    if (rc == GS_OK)
        kv_block(c, mine, 0, b->du, b->dkv);
    if (t->ops->op_start_s)
        (void)t->ops->op_start_s(t->drv, c->s);
    return rc;
}

/* ---- the actions ---- */

gs_status gs__train_cp_attention(const ctx *c, action act, layer_act *a)
{
    size_t idx;
    (void)event_acts(c, &idx);
    struct cp_bufs *b = c->r->cpb;
    gs_cp_comm how = c->t->s->strategy.cp_comm;
    if (how == GS_CP_A2A || how == GS_CP_A2A_P2P)
        return a2a_attention(c, act, a, b->kv[idx], b->uo[idx]);
    return gathered_attention(c, act, a, b->kv[idx]);
}

gs_status gs__train_cp_action(const ctx *c, action act)
{
    const gs_event *e = c->e;
    size_t idx;
    layer_act *a = event_acts(c, &idx);
    struct cp_bufs *b = c->r->cpb;
    gs_cp_comm how = c->t->s->strategy.cp_comm;
    int bwd = e->phase == GS_PHASE_BWD, a2a = how == GS_CP_A2A || how == GS_CP_A2A_P2P;
    gs_group_kind ring = how == GS_CP_A2A_P2P ? GS_GROUP_CP_P2P : GS_GROUP_CP;
    if (act == A_CP_KV && how != GS_CP_A2A && e->op == GS_COLL_ALLGATHER && e->group == ring)
        return how == GS_CP_A2A_P2P ? hier_gather_kv(c, b->kv[idx]) : gather_kv(c, a, b->kv[idx]);
    if (act == A_CP_KV && !a2a && e->op == GS_COLL_REDUCE_SCATTER && bwd)
        return return_dkv(c);
    if (act == A_CP_A2A && a2a && e->op == GS_COLL_ALLTOALL && (e->part == 1 || e->part == 2) &&
        e->group == (how == GS_CP_A2A ? GS_GROUP_CP : GS_GROUP_CP_A2A)) {
        a2a_level l = level_of(c);
        if (e->part == 1)
            return bwd ? a2a_dqkv_bwd(c, &l) : a2a_qkv_fwd(c, &l, a, b->kv[idx]);
        return bwd ? a2a_dout_bwd(c, &l) : a2a_out_fwd(c, &l, a, b->uo[idx]);
    }
    return gs_error_set(c->err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": %s %s on the CP group under cp_comm %s is not "
                        "implemented by the host program", c->r->rank, gs_role_name((gs_role)e->role),
                        gs_coll_op_name((gs_coll_op)e->op), gs_cp_comm_name(c->t->s->strategy.cp_comm));
}
