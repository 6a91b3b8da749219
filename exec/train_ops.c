/* The helpers the training program's actions share: tensor buffers, poisoning what the schedule
 * says is gone, a block's weights in its flat buffer, the norms, TP reductions and gathers of
 * activations, and the dropout of a site. */
#include <math.h>

#include "exec/train_internal.h"

float *gs__train_buf(const ctx *c, uint32_t id)
{
    return id == NO_ID ? NULL : c->r->tbuf[id];
}

void gs__train_poison(const ctx *c, float *p, size_t n)
{
    c->t->ops->fill(c->t->drv, c->s, p, NAN, n);
}

/* The block's tensors in exec/train_layout.c's order (add_layer_segs) */
void gs__train_block_at(const gs_train *t, float *base, blockp *b)
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

/* The block's norms: LayerNorm (weight, bias; mean and rstd saved) or RMSNorm (weight and, with a
 * bias, the bias added after it). dg and db accumulate; dx is written. */
void gs__train_norm_fwd(const gs_train *t, gs_drv_stream *s, const norm_io *n)
{
    if (t->ln) {
        t->ops->k.layernorm_fwd(s, n->x, n->g, n->b, n->y, n->mean, n->rstd, n->rows, t->h, NORM_EPS);
        return;
    }
    t->ops->k.rmsnorm_fwd(s, n->x, n->g, n->y, n->rstd, n->rows, t->h, NORM_EPS);
    if (n->b)
        t->ops->k.bias_add(s, n->y, n->b, n->rows, t->h);
}

void gs__train_norm_bwd(const gs_train *t, gs_drv_stream *s, const norm_io *n)
{
    if (t->ln) {
        t->ops->k.layernorm_bwd(s, n->x, n->g, n->mean, n->rstd, n->dy, n->dx, n->dg, n->db, n->rows, t->h);
        return;
    }
    if (n->db)
        t->ops->k.bias_grad(s, n->dy, n->db, n->rows, t->h);
    t->ops->k.rmsnorm_bwd(s, n->x, n->g, n->rstd, n->dy, n->dx, n->dg, n->rows, t->h);
}

/* TP reduction of a [T, h] partial: all-reduce in place, or (sequence parallel) reduce-scatter
 * into out's Tl rows. Returns the reduced rows. */
gs_status gs__train_tp_reduce(const ctx *c, float *part, float *out_sp, float **res)
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

gs_status gs__train_tp_gather(const ctx *c, const float *shard, float *full)
{
    gs_train *t = c->t;
    return t->ops->all_gather(t->drv, c->s, c->r->rank, &c->r->groups[GS_GROUP_TP], shard, full, t->Tl * t->h,
                              c->err);
}

gs_status gs__train_need(const ctx *c, const void *p, const char *what)
{
    if (p)
        return GS_OK;
    return gs_error_set(c->err, GS_ERR_RUNTIME, "no %s at this point of the schedule", what);
}

/* The dropout of site (kernels/dropout.h) at this event's layer, micro-batch and step: its
 * sequences are those the data gave this micro-batch (global index gs__train_seq0); first as
 * kernels/dropout.h says. NULL when the site drops
 * nothing. */
const gs_dropout *gs__train_drop_at(const ctx *c, uint32_t site, uint64_t first, gs_dropout *d)
{
    const gs_train *t = c->t;
    int attn = site == GS_DROP_ATTN;
    d->threshold = attn ? t->adrop_thr : t->hdrop_thr;
    if (!d->threshold)
        return NULL;
    d->scale = attn ? t->adrop_scale : t->hdrop_scale;
    uint64_t layer = c->e->layer >= 0 ? (uint64_t)c->e->layer : UINT64_MAX;
    d->key = gs_dropout_site_key(t->o.seed, t->step, site, site == GS_DROP_EMBED ? UINT64_MAX : layer);
    d->seq0 = gs__train_seq0(t, c->r, c->e->mb);
    d->first = first;
    d->seq_len = t->seq;
    return d;
}

/* A hidden site's dropout on this rank's rows (its token slice under sequence parallelism, else
 * every token: first 0). */
const gs_dropout *gs__train_hidden_drop(const ctx *c, uint32_t site, int rows_sliced, gs_dropout *d)
{
    return gs__train_drop_at(c, site, rows_sliced ? c->r->tp_pos * c->t->Tl : 0, d);
}

