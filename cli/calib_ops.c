/* The calibration's driver calls (cli/calib_ops.h). */
#include "cli/calib_ops.h"

const char *const gs_cal_ew_names[GS_CAL_EW_COUNT] = {"adamw",       "rmsnorm",    "swiglu",   "add",      "xent",
                                               "embed",       "rmsnorm_bwd", "swiglu_bwd", "xent_bwd", "embed_bwd"};
/* bytes per element the schedule counts in fp32 (engine/build*.c): the optimizer 2 x 8 + 2 x 4,
 * a norm 5 x 4 (backward 10 x 4), SwiGLU 3 x 4 (backward 6 x 4); add: read y and x, write y;
 * the loss 2 x 4 per logit (backward 4 x 4); the embedding 4 per output element (backward 8) */
const double gs_cal_ew_bytes[GS_CAL_EW_COUNT] = {24, 20, 12, 12, 8, 4, 40, 24, 16, 8};

const char *const gs_cal_c_names[GS_CAL_C_COUNT] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast",
                                                     "send_recv"};
const gs_coll_op gs_cal_c_ops[GS_CAL_C_COUNT] = {GS_COLL_ALLGATHER, GS_COLL_REDUCE_SCATTER, GS_COLL_ALLREDUCE,
                                                 GS_COLL_BROADCAST, GS_COLL_COUNT};

void gs_cal_gemm_fwd(void *arg, gs_drv_stream *s)
{
    gs_cal_gemm *a = arg;
    size_t i = a->copies > 1 ? a->next++ % a->copies : 0;
    a->ops->linear_fwd(s, a->x + i * a->m * a->k, a->w + i * a->n * a->k, a->y + i * a->m * a->n, a->m, a->k, a->n);
}

void gs_cal_gemm_bwd(void *arg, gs_drv_stream *s)
{
    gs_cal_gemm *a = arg;
    size_t i = a->copies > 1 ? a->next++ % a->copies : 0;
    a->ops->linear_bwd(s, a->x + i * a->m * a->k, a->w + i * a->n * a->k, a->y + i * a->m * a->n,
                       a->dx + i * a->m * a->k, a->dw + i * a->n * a->k, a->m, a->k, a->n);
}

void gs_cal_ew_call(void *arg, gs_drv_stream *s)
{
    gs_cal_ew *e = arg;
    size_t t = e->n / e->h;
    const int32_t *tok = (const int32_t *)e->rstd;
    double loss = 0;
    switch (e->kind) {
    case GS_CAL_EW_ADAMW: e->ops->adamw(s, e->a, e->b, e->m, e->v, e->n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1); break;
    case GS_CAL_EW_RMSNORM:
        if (e->calls++ % 2) { /* the layer's second norm: x + attention output first */
            e->ops->copy(e->d, s, e->y, e->a, e->n * sizeof(float));
            e->ops->add(s, e->y, e->b, e->n);
        }
        e->ops->rmsnorm_fwd(s, e->a, e->m, e->y + e->n, e->v, t, e->h, 1e-5f);
        break;
    case GS_CAL_EW_RMSNORM_BWD:
        e->ops->rmsnorm_bwd(s, e->a, e->m, e->m, e->b, e->y, e->v, t, e->h);
        e->ops->add(s, e->y, e->b, e->n);
        break;
    case GS_CAL_EW_SWIGLU: e->ops->swiglu_fwd(s, e->a, e->y, t, e->h); break;
    case GS_CAL_EW_SWIGLU_BWD: e->ops->swiglu_bwd(s, e->a, e->b, e->y, t, e->h); break;
    case GS_CAL_EW_XENT:
        e->ops->xent_stats(s, e->a, tok, t, 0, e->h, e->m);
        e->ops->xent_combine(s, e->m, 1, t, e->v, &loss);
        break;
    case GS_CAL_EW_XENT_BWD: e->ops->xent_bwd(s, e->a, tok, e->v, t, 0, e->h, 1e-3f, e->y); break;
    case GS_CAL_EW_EMBED: e->ops->embed_fwd(s, tok, t, e->a, 0, 2 * t, e->h, e->y); break;
    case GS_CAL_EW_EMBED_BWD: e->ops->embed_bwd(s, tok, t, e->b, 0, 2 * t, e->h, e->a); break;
    default: e->ops->add(s, e->y, e->a, e->n); break;
    }
}

void gs_cal_attn_call(void *arg, gs_drv_stream *s)
{
    gs_cal_attn *a = arg;
    size_t ldq = a->nh * a->hd, ldkv = a->nkv * a->hd;
    if (!a->bwd)
        a->ops->attn_fwd(s, a->q, ldq, a->k, a->v, ldkv, a->o, ldq, a->p, 1, a->seq, a->nh, a->nkv, a->hd);
    else
        a->ops->attn_bwd(s, a->q, ldq, a->k, a->v, ldkv, a->p, a->dout, ldq, a->dq, a->dk, a->dv, 1, a->seq, a->nh,
                         a->nkv, a->hd);
}

void gs_cal_rope_call(void *arg, gs_drv_stream *s)
{
    gs_cal_rope *r = arg;
    size_t ld = (r->nh + 2 * r->nkv) * r->hd;
    float *q = r->qkv, *k = r->qkv + r->nh * r->hd;
    if (!r->bwd) {
        r->ops->rope_fwd(s, q, r->seq, r->seq, r->nh, r->hd, ld, 10000.0f);
        r->ops->rope_fwd(s, k, r->seq, r->seq, r->nkv, r->hd, ld, 10000.0f);
    } else {
        r->ops->rope_bwd(s, q, r->seq, r->seq, r->nh, r->hd, ld, 10000.0f);
        r->ops->rope_bwd(s, k, r->seq, r->seq, r->nkv, r->hd, ld, 10000.0f);
    }
}
