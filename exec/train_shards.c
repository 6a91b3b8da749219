/* The shards a rank owns, listed for checkpoints and tests: each unit's segments cut to this
 * rank's stored window, pointing into its parameters and Adam moments (host copies on a
 * device-memory driver), FP8 delayed scaling's state (exec/train_fp8_delayed.c), and the upload
 * after a load. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"

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
    size_t total = gs__train_fp8_meta_count(t, r);
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
        /* NO_SHARD's routed experts: a replica on every rank of their EDP group but the first */
        int unit_replica = ui->expert && sh == GS_SHARD_NO_SHARD ? ui->pos != 0 : replica;
        /* FSDP's stored shard, or ZeRO-1/2's own slice (the one its Adam state covers) */
        int slice = r->plan.stored_sharded || r->own_slice;
        uint64_t lo = slice ? ui->pos * ui->S : 0;
        uint64_t hi = slice ? lo + ui->S : ui->N * ui->S;
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
            hi = ui->N * ui->S;
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
            st->primary = !unit_replica && (!sg->tp_replicated || r->tp_pos == 0) && !sg->copy;
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
    /* FP8 delayed scaling's state, in host memory whatever the driver */
    if ((rc = gs__train_fp8_meta_shards(t, &t->r[ri], out->tensors, &out->ntensors, err)) != GS_OK)
        goto out;
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
