/* The training program's per-rank state: the rank's place (coordinates, partition, shard plan,
 * process groups), the maps from layers to units, the buffers of the schedule's parameter and
 * gradient tensors and of the Adam state, the token data, the activations and the scratch buffers
 * the TP exchanges share (the schedule's scratch tensors), and their release. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"

/* The rank's coordinates, stage partition, shard plan and process groups. */
static gs_status rank_place(gs_train *t, rank_st *r, gs_error *err)
{
    const gs_scenario *s = t->s;
    const gs_mesh *mesh = &t->sch->mesh;
    gs_status rc;
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(mesh, r->rank, c);
    r->stage = c[GS_DIM_PP];
    r->tp_pos = c[GS_DIM_TP];
    r->dp_pos = c[GS_DIM_DP];
    /* context parallelism: the CP group's ranks share the replica's sequences (engine/mesh.h) */
    uint64_t cp = mesh->cp > 1 ? mesh->cp : 1, reps = mesh->size[GS_DIM_DP] / cp;
    r->replica = mesh->cp_outer ? r->dp_pos % reps : r->dp_pos / cp;
    r->cp_pos = mesh->cp_outer ? r->dp_pos / reps : r->dp_pos % cp;
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
    return GS_OK;
}

/* The per-unit and per-layer maps, the plans and the tensor buffer table. */
static gs_status rank_maps(gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
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
    return GS_OK;
}

/* The buffers of the schedule's parameter and gradient tensors (resident ones named per unit). */
static void rank_tensor_bufs(gs_train *t, rank_st *r, const gs_rank_events *re, int *ok)
{
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
            n = r->plan.stored_sharded ? ui->S : ui->N * ui->S;
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
            n = ui->N * ui->S;
            break;
        case GS_T_PARAM_FULL:
            n = ui->N * ui->S;
            break;
        default:
            continue;
        }
        r->tbuf[i] = gs__train_dalloc(t, r, n, ok);
    }
}

/* Parameter and gradient storage, pending gradients, Adam state, and the tied exchange's buffers. */
static gs_status rank_tensors(gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
    int ok = 1;
    rank_tensor_bufs(t, r, re, &ok);
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
        uint64_t n = r->plan.stored_sharded || r->own_slice ? r->units[u].S : r->units[u].N * r->units[u].S;
        if (gs__train_pending_id(r, re, u) == re->ntensors + u)
            r->tbuf[re->ntensors + u] = gs__train_dalloc(t, r, r->units[u].N * r->units[u].S, &ok);
        r->m[u] = gs__train_dalloc(t, r, n, &ok);
        r->v[u] = gs__train_dalloc(t, r, n, &ok);
        r->tmp[u] = gs__train_dalloc(t, r, r->units[u].S, &ok);
    }
    if (r->tied_x) {
        /* exec's own buffers (the ledger counts what Megatron holds: its all-reduce is in place) */
        r->xbuf = gs__train_dalloc(t, r, r->word_n, &ok);
        if (r->N > 1 && r->plan.shard_grads)
            r->xstage = gs__train_dalloc(t, r, r->word_n, &ok);
    }
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s parameters", r->rank);
    return GS_OK;
}

uint64_t gs__train_seq0(const gs_train *t, const rank_st *r, uint64_t mb)
{
    uint64_t R = t->o.fp8_amax_replicas > 1 ? t->o.fp8_amax_replicas : 1;
    if (R > 1) /* the replicas' micro-batches in turn: replica mb % R's micro-batch mb / R */
        return ((mb % R) * (t->mbs / R) + mb / R) * t->b;
    return (r->replica * t->mbs + mb) * t->b;
}

/* The tokens and targets of this rank's micro-batches (global sequence gs__train_seq0 + j; under
 * context parallelism the rank's sl tokens of each), and the positions learned position
 * embeddings look up. */
static gs_status rank_tokens(gs_train *t, rank_st *r, gs_drv_stream *st, gs_error *err)
{
    uint64_t T = t->T, sq = t->seq, sl = t->sl;
    if (r->first || r->last) {
        int32_t *tok = malloc((sq + 1) * sizeof *tok);
        int32_t *in = malloc(t->mbs * T * sizeof *in), *tg = malloc(t->mbs * T * sizeof *tg);
        if (!tok || !in || !tg) {
            free(tok), free(in), free(tg);
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        }
        for (uint64_t mb = 0; mb < t->mbs; mb++)
            for (uint64_t j = 0; j < t->b; j++) {
                gs_k_tokens(t->o.seed, gs__train_seq0(t, r, mb) + j, sq, t->s->model.vocab, tok);
                for (uint64_t w = 0; w < sl; w++) {
                    uint64_t p = gs_train_cp_position(t->seq, t->cp, r->cp_pos, w);
                    in[mb * T + j * sl + w] = tok[p];
                    tg[mb * T + j * sl + w] = tok[p + 1];
                }
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
                pos[i] = (int32_t)gs_train_cp_position(t->seq, t->cp, r->cp_pos, i % sl);
        if (pos && r->positions)
            t->ops->upload(t->drv, st, r->positions, pos, T * sizeof(int32_t));
        free(pos);
        if (!pos || !r->positions || (r->tp_pos == 0 && !r->posb))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    }
    return GS_OK;
}

/* One layer's saved activations for one micro-batch. */
static void layer_acts(gs_train *t, rank_st *r, layer_act *a, int *ok)
{
    uint64_t T = t->T, Tl = t->Tl, h = t->h;
    a->n1s = gs__train_dalloc(t, r, Tl * h, ok);
    a->rstd1 = gs__train_dalloc(t, r, Tl, ok);
    a->mean1 = t->ln ? gs__train_dalloc(t, r, Tl, ok) : NULL;
    a->mean2 = t->ln ? gs__train_dalloc(t, r, Tl, ok) : NULL;
    a->n1 = t->sp ? gs__train_dalloc(t, r, T * h, ok) : a->n1s;
    a->qkv = gs__train_dalloc(t, r, T * t->nqkv, ok);
    a->ao = gs__train_dalloc(t, r, T * t->a_t * t->hd, ok);
    a->p = gs__train_dalloc(t, r, t->attn_saved, ok);
    a->op = gs__train_dalloc(t, r, T * h, ok);
    a->ar = gs__train_dalloc(t, r, Tl * h, ok);
    a->xm = gs__train_dalloc(t, r, Tl * h, ok);
    a->n2s = gs__train_dalloc(t, r, Tl * h, ok);
    a->rstd2 = gs__train_dalloc(t, r, Tl, ok);
    a->n2 = t->sp ? gs__train_dalloc(t, r, T * h, ok) : a->n2s;
    a->gu = gs__train_dalloc(t, r, T * 2 * t->f_max, ok);
    a->hh = gs__train_dalloc(t, r, T * t->f_max, ok);
    a->dp = gs__train_dalloc(t, r, T * h, ok);
    a->mr = gs__train_dalloc(t, r, Tl * h, ok);
}

/* The scratch buffers the backward passes and the TP exchanges share (the schedule's scratch
 * tensors where a TP collective touches them: engine/build_layer.c's scratch_uses). */
static void rank_scratch(gs_train *t, rank_st *r, int *ok)
{
    uint64_t T = t->T, Tl = t->Tl, h = t->h;
    scratch *sc = &r->sc;
    sc->dyf = gs__train_dalloc(t, r, T * h, ok);
    sc->dh = gs__train_dalloc(t, r, T * t->f_max, ok);
    sc->dgu = gs__train_dalloc(t, r, T * 2 * t->f_max, ok);
    sc->dn2 = gs__train_dalloc(t, r, T * h, ok);
    sc->dn2s = gs__train_dalloc(t, r, Tl * h, ok);
    sc->dxm = gs__train_dalloc(t, r, Tl * h, ok);
    sc->dxmf = gs__train_dalloc(t, r, T * h, ok);
    sc->dao = gs__train_dalloc(t, r, T * t->a_t * t->hd, ok);
    sc->dqkv = gs__train_dalloc(t, r, T * t->nqkv, ok);
    sc->dn1 = gs__train_dalloc(t, r, T * h, ok);
    sc->dn1s = gs__train_dalloc(t, r, Tl * h, ok);
    sc->dlogits = r->last ? gs__train_dalloc(t, r, T * t->v_t, ok) : NULL;
    sc->dhn = gs__train_dalloc(t, r, T * h, ok);
    sc->dhns = gs__train_dalloc(t, r, Tl * h, ok);
    sc->embp = gs__train_dalloc(t, r, T * h, ok);
    sc->demb = gs__train_dalloc(t, r, T * h, ok);
    if (t->hdrop_thr) {
        sc->dyd = gs__train_dalloc(t, r, Tl * h, ok);
        sc->dxmd = gs__train_dalloc(t, r, Tl * h, ok);
    }
}

/* The stage boundaries' activations and gradients, each layer's saved activations, the head's,
 * and the scratch buffers. */
static gs_status rank_acts(gs_train *t, rank_st *r, gs_error *err)
{
    uint64_t T = t->T, Tl = t->Tl, h = t->h, L = t->layers, nl = r->part.layers;
    int ok = 1;
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
            r->x[pos * t->mbs + mb] = gs__train_dalloc(t, r, Tl * h, &ok);
            r->dx[pos * t->mbs + mb] = gs__train_dalloc(t, r, Tl * h, &ok);
        }
    }
    for (uint64_t i = 0; i < nl * t->mbs; i++)
        layer_acts(t, r, &r->acts[i], &ok);
    if (r->last)
        for (uint64_t mb = 0; mb < t->mbs; mb++) {
            head_act *hh = &r->heads[mb];
            hh->hns = gs__train_dalloc(t, r, Tl * h, &ok);
            hh->rstd = gs__train_dalloc(t, r, Tl, &ok);
            hh->mean = t->ln ? gs__train_dalloc(t, r, Tl, &ok) : NULL;
            hh->hn = t->sp ? gs__train_dalloc(t, r, T * h, &ok) : hh->hns;
            hh->logits = gs__train_dalloc(t, r, T * t->v_t, &ok);
            hh->stats = gs__train_dalloc(t, r, T * GS_K_XENT_STATS, &ok);
            hh->allstats = gs__train_dalloc(t, r, t->vparts * T * GS_K_XENT_STATS, &ok);
            hh->lse = gs__train_dalloc(t, r, T, &ok);
        }
    rank_scratch(t, r, &ok);
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for rank %" PRIu64 "'s activations", r->rank);
    return GS_OK;
}

/* tp_comm_overlap's progress marks: tp - 1 for the ring, UB_SPLITS - 1 for the pipelined GEMM. */
static gs_status rank_marks(gs_train *t, rank_st *r, gs_error *err)
{
    gs_status rc;
    if (!t->ovl)
        return GS_OK;
    if (!(r->ring_marks = calloc(t->tp, sizeof *r->ring_marks)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (uint64_t i = 0; i + 1 < t->tp; i++)
        if ((rc = t->ops->event_create(t->drv, &r->ring_marks[i], err)) != GS_OK)
            return rc;
    for (int i = 0; i < UB_SPLITS - 1; i++)
        if ((rc = t->ops->event_create(t->drv, &r->split_marks[i], err)) != GS_OK)
            return rc;
    return GS_OK;
}

gs_status gs__train_rank_init(gs_train *t, gs_dispatch *disp, size_t ri, gs_error *err)
{
    const gs_rank_events *re = &t->sch->ranks[ri];
    rank_st *r = &t->r[ri];
    gs_status rc;
    r->rank = re->rank;
    if ((rc = rank_place(t, r, err)) != GS_OK || (rc = rank_maps(t, r, re, err)) != GS_OK ||
        (rc = gs__train_moe_rank_init(t, r, err)) != GS_OK ||
        (rc = gs__train_rank_units(t, r, err)) != GS_OK || (rc = rank_tensors(t, r, re, err)) != GS_OK ||
        (rc = gs__train_rank_params(t, disp, ri, err)) != GS_OK ||
        (rc = rank_tokens(t, r, gs_dispatch_stream(disp, ri, GS_STREAM_COMPUTE), err)) != GS_OK ||
        (rc = rank_acts(t, r, err)) != GS_OK || (rc = rank_marks(t, r, err)) != GS_OK ||
        (rc = gs__train_cp_init(t, r, err)) != GS_OK || (rc = gs__train_cp_acc_init(t, r, err)) != GS_OK ||
        (rc = gs__train_fp8_rank_init(t, r, err)) != GS_OK)
        return rc;
    return gs__train_plan_rank(t, r, re, err);
}

void gs__train_rank_fini(gs_train *t, rank_st *r, const gs_rank_events *re)
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
    gs__train_cp_fini(t, r);
    gs__train_cp_acc_fini(r);
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
    gs__train_moe_rank_fini(t, r);
    gs__train_fp8_rank_fini(t, r);
    gs_partition_fini(&r->part);
}

