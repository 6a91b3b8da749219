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
 * order's last bits into FP8 code flips, which grow over steps. Host memory only (the option
 * runs on the host driver, gs_train_fp8_check). */
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"

/* C when this rank sums token gradients in CP blocks, else 0. */
uint64_t gs__train_cp_blocks(const gs_train *t)
{
    return t->fp8 && t->o.fp8_cp_shards > 1 ? t->o.fp8_cp_shards : 0;
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

static gs_status no_memory(const ctx *c, const char *what)
{
    return gs_error_set(c->err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (%s in CP blocks)", c->r->rank,
                        what);
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
    gs_status rc = GS_OK;
    float *x = malloc(T * h * sizeof *x), *dy = malloc(T * h * sizeof *dy), *dx = malloc(T * h * sizeof *dx);
    float *stat = malloc(2 * T * sizeof *stat), *part = calloc(4 * h, sizeof *part);
    if (!x || !dy || !dx || !stat || !part) {
        rc = no_memory(c, "norm gradient");
        goto out;
    }
    float *dg = part + 2 * h, *db = part + 3 * h;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, n->x, T, h, x);
        take_rank_rows(t, C, p, n->dy, T, h, dy);
        take_rank_rows(t, C, p, n->rstd, T, 1, stat);
        take_rank_rows(t, C, p, n->mean, T, 1, stat + T);
        memset(part, 0, 2 * h * sizeof *part);
        norm_io nb = {x, n->g, NULL, NULL, n->mean ? stat + T : NULL, stat, dy, dx, part, n->db ? part + h : NULL,
                      rows};
        gs__train_norm_bwd(t, c->s, &nb);
        put_rank_rows(t, C, p, dx, T, h, n->dx);
        join_block(c, p, dg, part, h);
        if (n->db)
            join_block(c, p, db, part + h, h);
    }
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
    gs_status rc = GS_OK;
    int32_t *tb = malloc((T ? T : 1) * sizeof *tb);
    float *dyb = malloc(T * h * sizeof *dyb), *part = malloc(2 * vn * h * sizeof *part);
    if (!tb || !dyb || !part) {
        rc = no_memory(c, "embedding gradient");
        goto out;
    }
    float *acc = part + vn * h;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = 0;
        for (uint64_t i = 0; i < T; i++)
            if (row_of_rank(t, C, p, i))
                tb[rows++] = tok[i];
        take_rank_rows(t, C, p, dy, T, h, dyb);
        memset(part, 0, vn * h * sizeof *part);
        t->ops->k.embed_bwd(c->s, tb, rows, dyb, lo, vn, h, part);
        join_block(c, p, acc, part, vn * h);
    }
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
    gs_status rc = GS_OK;
    float *xb = malloc(T * k * sizeof *xb), *dyb = malloc(T * n * sizeof *dyb), *part = malloc(2 * n * k * sizeof *part);
    if (!xb || !dyb || !part) {
        rc = no_memory(c, "weight gradient");
        goto out;
    }
    float *acc = part + n * k;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, x, T, k, xb);
        take_rank_rows(t, C, p, dy, T, n, dyb);
        memset(part, 0, n * k * sizeof *part);
        t->ops->k.linear_bwd(c->s, xb, NULL, dyb, NULL, part, rows, k, n);
        join_block(c, p, acc, part, n * k);
    }
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
    gs_status rc = GS_OK;
    float *dyb = malloc(T * n * sizeof *dyb), *part = malloc(2 * n * sizeof *part);
    if (!dyb || !part) {
        rc = no_memory(c, "bias gradient");
        goto out;
    }
    float *acc = part + n;
    for (uint64_t p = 0; p < C; p++) {
        uint64_t rows = take_rank_rows(t, C, p, dy, T, n, dyb);
        memset(part, 0, n * sizeof *part);
        t->ops->k.bias_grad(c->s, dyb, part, rows, n);
        join_block(c, p, acc, part, n);
    }
    t->ops->k.add(c->s, db, acc, n);
out:
    free(dyb);
    free(part);
    return rc;
}
