/* tp_comm_overlap's chunks on the exec side: the ring all-gather and the GEMM part beside it, the
 * pipelined GEMM's splits and the reduce-scatter beside them, and the tokens of their marks. */
#include "exec/train_internal.h"

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

gs_status gs__train_ring_gather(const ctx *c, const float *shard, float *full)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    return t->ops->all_gather_ring(t->drv, c->s, r->rank, &r->groups[GS_GROUP_TP], shard, full, t->Tl * t->h,
                                   r->ring_marks, mark_token(c, (size_t)(c->e - c->re->events)), c->err);
}

/* The j-th chunk a ring-exchanged GEMM's part computes (j = 0, 1, ... until *in is NULL): chunk
 * *q of the gathered rows, read from *in (the rank's own chunk from src's shard, unless
 * own_from_full: then from the gathered copy after the first step's mark, for a shard the
 * gather's own event writes). Part 1 waits for each later chunk's mark. */
gs_status gs__train_ring_chunk(const ctx *c, const ring_src *src, uint64_t j, uint64_t *q, const float **in)
{
    const float *shard = src->shard, *full = src->full;
    uint64_t width = src->width;
    int own_from_full = src->own_from_full;
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
static void split_gemm(const ctx *c, gs_lin which, const float *in, const float *w, float *out, uint64_t k,
                       uint64_t j)
{
    gs_train *t = c->t;
    uint64_t S = t->Tl, h = t->h, lo, hi;
    split_rows(S, j, &lo, &hi);
    for (uint64_t q = 0; q < t->tp && hi > lo; q++)
        gs__train_linear_fwd(c, which, 0, in + (q * S + lo) * k, w, out + (t->tp * lo + q * (hi - lo)) * h, hi - lo,
                             k, h);
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
gs_status gs__train_split_gemm_part(const ctx *c, gs_lin which, const float *in, const float *w, float *out,
                                    uint64_t k)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    if (c->pl->part == 1) {
        split_gemm(c, which, in, w, out, k, 0);
        return GS_OK;
    }
    uint64_t tok = mark_token(c, (size_t)(c->e - c->re->events));
    gs_status rc = GS_OK;
    for (uint64_t j = 1; j < UB_SPLITS && rc == GS_OK; j++) {
        split_gemm(c, which, in, w, out, k, j);
        if (j + 1 < UB_SPLITS)
            rc = t->ops->mark(t->drv, c->s, r->split_marks[j - 1], tok, c->err);
    }
    return rc;
}

/* The pipelined reduce-scatter's part (1: splits 0 .. UB_SPLITS - 2 as they come; 2: the last). */
gs_status gs__train_split_rs_part(const ctx *c, float *part, float *out_sp)
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

