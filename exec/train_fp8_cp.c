/* The single rank a CP run under FP8 current scaling must equal (gs_train_opts.fp8_cp_shards C):
 * the gradients summed over a micro-batch's tokens outside the FP8 GEMMs (the norms', the
 * embedding's and positions', the LM head's) summed as the C CP ranks sum them.
 *
 * A CP rank sums such a gradient over its own tokens (its two zig-zag chunks of every sequence,
 * in that order), and the gradient reduction adds the ranks' sums in ascending member order
 * (exec/driver_host_coll.c) before the micro-batch's sum joins the gradient (FSDP and ZeRO-2
 * reduce every micro-batch). Here each block of a CP rank's rows takes its own sum from zero,
 * as the rank's kernel does on its buffer, and the blocks are added in rank order, so these
 * gradients carry the CP run's last bits as the FP8 GEMMs' weight gradients already do
 * (exec/driver_host_fp8.c, token row blocks): current scaling's per-tensor amaxes turn any other
 * order's last bits into FP8 code flips, which grow over steps.
 *
 * A run that accumulates its micro-batches before it reduces (NO_SHARD, ZeRO-1: opts
 * fp8_cp_accumulate) sums each rank's micro-batches first, in its pending gradient, and the
 * reduction at the step's end adds the ranks' sums. Then each block's gradient, the FP8 GEMMs'
 * weight gradients too (gs__train_cp_linear_bwd_fp8), goes into the block's own buffer
 * (rank_st.cp_acc, the rank's pending gradient), by the kernel the rank runs on its pending one,
 * and the optimizer first adds the buffers in rank order (gs__train_cp_acc_flush). Host memory
 * only (the options run on the host driver, gs_train_fp8_check). */
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"

/* C when this rank sums token gradients in CP blocks, else 0. */
uint64_t gs__train_cp_blocks(const gs_train *t)
{
    return t->fp8 && t->o.fp8_cp_shards > 1 ? t->o.fp8_cp_shards : 0;
}

int gs__train_cp_accumulates(const gs_train *t)
{
    return gs__train_cp_blocks(t) && t->o.fp8_cp_accumulate;
}

/* 1 when token row `row` of a micro-batch lies in CP rank p's chunks of C. */
static int row_of_rank(const gs_train *t, uint64_t C, uint64_t p, uint64_t row)
{
    return gs_train_cp_owner(t->seq, C, row % t->seq) == p;
}

/* dst = the rows of src [rows, width] that CP rank p of C holds, in the rank's order; their
 * count. width in floats; src NULL: nothing copied. */
static uint64_t take_rank_rows(const gs_train *t, uint64_t C, uint64_t p, const float *src, uint64_t rows,
                               uint64_t width, float *dst)
{
    uint64_t o = 0;
    for (uint64_t i = 0; i < rows; i++)
        if (row_of_rank(t, C, p, i)) {
            if (src)
                memcpy(dst + o * width, src + i * width, width * sizeof *dst);
            o++;
        }
    return o;
}

/* The rows of src [rank's rows, width] back to their places in dst [rows, width]. */
static void put_rank_rows(const gs_train *t, uint64_t C, uint64_t p, const float *src, uint64_t rows, uint64_t width,
                          float *dst)
{
    for (uint64_t i = 0, o = 0; i < rows; i++)
        if (row_of_rank(t, C, p, i))
            memcpy(dst + i * width, src + o++ * width, width * sizeof *dst);
}

/* part (n floats), CP rank p's sum, into the blocks' running sum acc (rank 0's starts it). */
static void join_block(const ctx *c, uint64_t p, float *acc, const float *part, uint64_t n)
{
    if (p == 0)
        memcpy(acc, part, n * sizeof *acc);
    else
        c->t->ops->k.add(c->s, acc, part, n);
}

/* Where block p's kernel adds its gradient: its kept buffer under fp8_cp_accumulate, else part
 * (n floats) cleared, the block's sum from zero that join_block adds. */
static float *block_out(int keep, float *const *kept, uint64_t p, float *part, uint64_t n)
{
    if (keep)
        return kept[p];
    memset(part, 0, n * sizeof *part);
    return part;
}

static gs_status no_memory(const ctx *c, const char *what)
{
    return gs_error_set(c->err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (%s in CP blocks)", c->r->rank,
                        what);
}

/* bufs[p] = where block p of C keeps gradient dw (n floats of a unit's gradient) under opts
 * fp8_cp_accumulate: dw's place in the unit's p-th block buffer. */
static gs_status block_bufs(const ctx *c, const float *dw, uint64_t n, uint64_t C, float **bufs)
{
    const rank_st *r = c->r;
    uintptr_t at = (uintptr_t)dw;
    for (size_t u = 0; r->cp_acc && u < r->nunits; u++) {
        uintptr_t g = (uintptr_t)r->tbuf[r->grad_t[u]];
        uint64_t len = r->units[u].N * r->units[u].S;
        if (!g || at < g || at + n * sizeof(float) > g + len * sizeof(float))
            continue;
        for (uint64_t p = 0; p < C; p++)
            bufs[p] = r->cp_acc[u] + p * len + (at - g) / sizeof(float);
        return GS_OK;
    }
    return gs_error_set(c->err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": a gradient outside its units' storage "
                        "(fp8_cp_accumulate's block buffers)", r->rank);
}

/* A norm's backward (gs__train_norm_bwd) with dg and db summed in CP blocks. */
gs_status gs__train_cp_norm_bwd(const ctx *c, const norm_io *n)
{
    const gs_train *t = c->t;
    uint64_t C = gs__train_cp_blocks(t), T = n->rows, h = t->h;
    if (!C) {
        gs__train_norm_bwd(t, c->s, n);
        return GS_OK;
    }
    int keep = gs__train_cp_accumulates(t);
    float *dg_keep[GS_FP8_MAX_BLOCKS], *db_keep[GS_FP8_MAX_BLOCKS];
    gs_status rc = GS_OK;
    float *x = malloc(T * h * sizeof *x), *dy = malloc(T * h * sizeof *dy), *dx = malloc(T * h * sizeof *dx);
    float *stat = malloc(2 * T * sizeof *stat), *part = calloc(4 * h, sizeof *part);
    if (!x || !dy || !dx || !stat || !part) {
        rc = no_memory(c, "norm gradient");
        goto out;
    }
    if (keep && ((rc = block_bufs(c, n->dg, h, C, dg_keep)) != GS_OK ||
                 (n->db && (rc = block_bufs(c, n->db, h, C, db_keep)) != GS_OK)))
        goto out;
    float *dg = part + 2 * h, *db = part + 3 * h;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, n->x, T, h, x);
        take_rank_rows(t, C, p, n->dy, T, h, dy);
        take_rank_rows(t, C, p, n->rstd, T, 1, stat);
        take_rank_rows(t, C, p, n->mean, T, 1, stat + T);
        memset(part, 0, 2 * h * sizeof *part);
        norm_io nb = {x, n->g, NULL, NULL, n->mean ? stat + T : NULL, stat, dy, dx, keep ? dg_keep[p] : part,
                      !n->db ? NULL : keep ? db_keep[p] : part + h, rows};
        gs__train_norm_bwd(t, c->s, &nb);
        put_rank_rows(t, C, p, dx, T, h, n->dx);
        if (keep)
            continue;
        join_block(c, p, dg, part, h);
        if (n->db)
            join_block(c, p, db, part + h, h);
    }
    if (keep)
        goto out;
    t->ops->k.add(c->s, n->dg, dg, h);
    if (n->db)
        t->ops->k.add(c->s, n->db, db, h);
out:
    free(x);
    free(dy);
    free(dx);
    free(stat);
    free(part);
    return rc;
}

/* An embedding's backward (the driver's embed_bwd: rows [lo, lo + vn) of a table of width h
 * gather tok's T rows of dy) with its gradient summed in CP blocks. */
gs_status gs__train_cp_embed_bwd(const ctx *c, const int32_t *tok, uint64_t T, const float *dy, uint64_t lo,
                                 uint64_t vn, float *dw)
{
    const gs_train *t = c->t;
    uint64_t C = gs__train_cp_blocks(t), h = t->h;
    if (!C) {
        t->ops->k.embed_bwd(c->s, tok, T, dy, lo, vn, h, dw);
        return GS_OK;
    }
    int keep = gs__train_cp_accumulates(t);
    float *kept[GS_FP8_MAX_BLOCKS];
    gs_status rc = GS_OK;
    int32_t *tb = malloc((T ? T : 1) * sizeof *tb);
    float *dyb = malloc(T * h * sizeof *dyb), *part = malloc(2 * vn * h * sizeof *part);
    if (!tb || !dyb || !part) {
        rc = no_memory(c, "embedding gradient");
        goto out;
    }
    if (keep && (rc = block_bufs(c, dw, vn * h, C, kept)) != GS_OK)
        goto out;
    float *acc = part + vn * h;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = 0;
        for (uint64_t i = 0; i < T; i++)
            if (row_of_rank(t, C, p, i))
                tb[rows++] = tok[i];
        take_rank_rows(t, C, p, dy, T, h, dyb);
        t->ops->k.embed_bwd(c->s, tb, rows, dyb, lo, vn, h, block_out(keep, kept, p, part, vn * h));
        if (!keep)
            join_block(c, p, acc, part, vn * h);
    }
    if (!keep)
        t->ops->k.add(c->s, dw, acc, vn * h);
out:
    free(tb);
    free(dyb);
    free(part);
    return rc;
}

/* dw [n, k] += dy [T, n]^T x [T, k], a plain (not FP8) GEMM's weight gradient, summed in CP
 * blocks; with no blocks, the driver's linear_bwd. */
gs_status gs__train_cp_linear_dw(const ctx *c, const float *x, const float *dy, float *dw, uint64_t T, uint64_t k,
                                 uint64_t n)
{
    const gs_train *t = c->t;
    uint64_t C = gs__train_cp_blocks(t);
    if (!C) {
        t->ops->k.linear_bwd(c->s, x, NULL, dy, NULL, dw, T, k, n);
        return GS_OK;
    }
    int keep = gs__train_cp_accumulates(t);
    float *kept[GS_FP8_MAX_BLOCKS];
    gs_status rc = GS_OK;
    float *xb = malloc(T * k * sizeof *xb), *dyb = malloc(T * n * sizeof *dyb), *part = malloc(2 * n * k * sizeof *part);
    if (!xb || !dyb || !part) {
        rc = no_memory(c, "weight gradient");
        goto out;
    }
    if (keep && (rc = block_bufs(c, dw, n * k, C, kept)) != GS_OK)
        goto out;
    float *acc = part + n * k;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, x, T, k, xb);
        take_rank_rows(t, C, p, dy, T, n, dyb);
        t->ops->k.linear_bwd(c->s, xb, NULL, dyb, NULL, block_out(keep, kept, p, part, n * k), rows, k, n);
        if (!keep)
            join_block(c, p, acc, part, n * k);
    }
    if (!keep)
        t->ops->k.add(c->s, dw, acc, n * k);
out:
    free(xb);
    free(dyb);
    free(part);
    return rc;
}

/* A bias's gradient (the driver's bias_grad: db [n] += the sum of dy's T rows) summed in CP
 * blocks. */
gs_status gs__train_cp_bias_grad(const ctx *c, const float *dy, float *db, uint64_t T, uint64_t n)
{
    const gs_train *t = c->t;
    uint64_t C = gs__train_cp_blocks(t);
    if (!C) {
        t->ops->k.bias_grad(c->s, dy, db, T, n);
        return GS_OK;
    }
    int keep = gs__train_cp_accumulates(t);
    float *kept[GS_FP8_MAX_BLOCKS];
    gs_status rc = GS_OK;
    float *dyb = malloc(T * n * sizeof *dyb), *part = malloc(2 * n * sizeof *part);
    if (!dyb || !part) {
        rc = no_memory(c, "bias gradient");
        goto out;
    }
    if (keep && (rc = block_bufs(c, db, n, C, kept)) != GS_OK)
        goto out;
    float *acc = part + n;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, dy, T, n, dyb);
        t->ops->k.bias_grad(c->s, dyb, block_out(keep, kept, p, part, n), rows, n);
        if (!keep)
            join_block(c, p, acc, part, n);
    }
    if (!keep)
        t->ops->k.add(c->s, db, acc, n);
out:
    free(dyb);
    free(part);
    return rc;
}

gs_status gs__train_cp_linear_bwd_fp8(const ctx *c, const float *x, const float *w, const float *dy, float *dx,
                                      float *dw, size_t T, size_t k, size_t n, const gs_fp8_split *sp,
                                      const gs_fp8_scales *sc)
{
    const gs_train *t = c->t;
    uint64_t C = gs__train_cp_blocks(t);
    float *kept[GS_FP8_MAX_BLOCKS];
    gs_status rc = block_bufs(c, dw, n * k, C, kept);
    if (rc != GS_OK)
        return rc;
    /* the input gradient as without kept blocks (dw NULL: x is not cast) */
    if (dx)
        t->ops->k.linear_bwd_fp8(c->s, x, w, dy, dx, NULL, T, k, n, sp, sc);
    float *xb = malloc((T ? T : 1) * k * sizeof *xb), *dyb = malloc((T ? T : 1) * n * sizeof *dyb);
    if (!xb || !dyb) {
        rc = no_memory(c, "FP8 weight gradient");
        goto out;
    }
    /* block p's rows are CP rank p's tokens: cast whole (one token block), at their own amax as
     * the token cut casts them, into a weight gradient from zero the driver adds to the block's
     * buffer, as rank p's FP8 GEMM adds its own to its pending gradient */
    gs_fp8_split one = *sp;
    one.t = (gs_fp8_cut){1, 0, {0}, 0};
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, x, T, k, xb);
        take_rank_rows(t, C, p, dy, T, n, dyb);
        t->ops->k.linear_bwd_fp8(c->s, xb, w, dyb, NULL, kept[p], rows, k, n, &one, sc);
    }
out:
    free(xb);
    free(dyb);
    return rc;
}

gs_status gs__train_cp_acc_init(gs_train *t, rank_st *r, gs_error *err)
{
    uint64_t C = gs__train_cp_blocks(t);
    if (!gs__train_cp_accumulates(t))
        return GS_OK;
    r->cp_acc = calloc(r->nunits ? r->nunits : 1, sizeof *r->cp_acc);
    for (size_t u = 0; r->cp_acc && u < r->nunits; u++) {
        uint64_t floats = C * r->units[u].N * r->units[u].S;
        if (!(r->cp_acc[u] = calloc(floats ? floats : 1, sizeof(float))))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (CP block buffers)",
                                r->rank);
    }
    if (!r->cp_acc)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (CP block buffers)", r->rank);
    return GS_OK;
}

void gs__train_cp_acc_fini(rank_st *r)
{
    for (size_t u = 0; r->cp_acc && u < r->nunits; u++)
        free(r->cp_acc[u]);
    free(r->cp_acc);
    r->cp_acc = NULL;
}

void gs__train_cp_acc_flush(const ctx *c)
{
    rank_st *r = c->r;
    uint64_t C = gs__train_cp_blocks(c->t);
    /* the reduction at the step's end: each element's rank sums added in ascending member order
     * (exec/driver_host_coll.c), then their sum to the gradient the step's micro-batches left at
     * zero */
    for (size_t u = 0; r->cp_acc && u < r->nunits; u++) {
        uint64_t len = r->units[u].N * r->units[u].S;
        float *sum = r->cp_acc[u];
        for (uint64_t p = 1; p < C; p++)
            c->t->ops->k.add(c->s, sum, sum + p * len, len);
        c->t->ops->k.add(c->s, r->tbuf[r->grad_t[u]], sum, len);
        memset(sum, 0, C * len * sizeof *sum);
    }
}
