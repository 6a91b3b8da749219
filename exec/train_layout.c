/* The training program's layout and initialization: each unit's flat buffer as segments of named
 * tensors (a TP rank's slice of each, in HF Llama / GPT names), the rank's units laid out from its
 * stage's partition, and the initial parameters (each value a pure function of its index, so any
 * grid starts from the single rank's). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/train_internal.h"

float *gs__train_dalloc(gs_train *t, rank_st *r, uint64_t n, int *ok)
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

int gs__train_add_seg(unit_info *u, uint64_t *flat, const seg_spec *sp)
{
    segment sg;
    memset(&sg, 0, sizeof sg);
    snprintf(sg.name, sizeof sg.name, "%s", sp->name);
    sg.ndim = sp->ndim;
    sg.shape[0] = sp->R;
    sg.shape[1] = sp->C;
    sg.init_id = sp->init_id;
    sg.flat_off = *flat;
    sg.tp_replicated = sp->replicated;
    if (sp->colsplit) {
        sg.nrows = sp->R;
        sg.row_len = sp->n;
        sg.full_off0 = sp->first;
        sg.full_stride = sp->C;
    } else {
        sg.nrows = 1;
        sg.row_len = sp->n * sp->C;
        sg.full_off0 = sp->first * sp->C;
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
static int add_layer_segs(const gs_train *t, rank_st *r, unit_info *u, size_t unit, uint64_t *flat, int64_t ll,
                          uint64_t l)
{
    const gs_model *m = &t->s->model;
    char nm[80];
    uint64_t h = t->h, hd = t->hd, tp = r->tp_pos, id = 16 + l * 8;
    uint64_t qlo = tp * t->a_t * hd, kvlo = tp * t->kv_t * hd, flo = tp * t->f_t;
    int ok = 1;
#define SEG(...) (ok = ok && gs__train_add_seg(u, flat, &(seg_spec){__VA_ARGS__}))
#define LNAME(s) (snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".%s.weight", l, s), nm)
#define BNAME(s) (snprintf(nm, sizeof nm, "model.layers.%" PRIu64 ".%s.bias", l, s), nm)
    SEG(LNAME("input_layernorm"), 1, h, 1, INIT_ONES, 0, 0, h, 1);
    if (t->norm_bias)
        SEG(BNAME("input_layernorm"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    SEG(LNAME("self_attn.q_proj"), 2, m->heads * hd, h, id + 0, 0, qlo, t->a_t * hd, 0);
    SEG(LNAME("self_attn.k_proj"), 2, m->kv_heads * hd, h, id + 1, 0, kvlo, t->kv_t * hd, 0);
    SEG(LNAME("self_attn.v_proj"), 2, m->kv_heads * hd, h, id + 2, 0, kvlo, t->kv_t * hd, 0);
    if (t->attn_bias) {
        SEG(BNAME("self_attn.q_proj"), 1, m->heads * hd, 1, INIT_ZEROS, 0, qlo, t->a_t * hd, 0);
        SEG(BNAME("self_attn.k_proj"), 1, m->kv_heads * hd, 1, INIT_ZEROS, 0, kvlo, t->kv_t * hd, 0);
        SEG(BNAME("self_attn.v_proj"), 1, m->kv_heads * hd, 1, INIT_ZEROS, 0, kvlo, t->kv_t * hd, 0);
    }
    SEG(LNAME("self_attn.o_proj"), 2, h, m->heads * hd, id + 3, 1, qlo, t->a_t * hd, 0);
    if (t->attn_bias)
        SEG(BNAME("self_attn.o_proj"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    SEG(LNAME("post_attention_layernorm"), 1, h, 1, INIT_ONES, 0, 0, h, 1);
    if (t->norm_bias)
        SEG(BNAME("post_attention_layernorm"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    if (gs__train_moe_layer(t, l)) /* with the routed experts unless they are a unit of their own */
        ok = ok && gs__train_moe_block_segs(t, r, u, unit, flat, ll, l, t->sch->mesh.ep <= 1);
    else if (!t->gelu) {
        SEG(LNAME("mlp.gate_proj"), 2, m->ffn, h, id + 4, 0, flo, t->f_t, 0);
        SEG(LNAME("mlp.up_proj"), 2, m->ffn, h, id + 5, 0, flo, t->f_t, 0);
        SEG(LNAME("mlp.down_proj"), 2, h, m->ffn, id + 6, 1, flo, t->f_t, 0);
    } else {
        SEG(LNAME("mlp.up_proj"), 2, m->ffn, h, id + 5, 0, flo, t->f_t, 0);
        if (t->mlp_bias)
            SEG(BNAME("mlp.up_proj"), 1, m->ffn, 1, INIT_ZEROS, 0, flo, t->f_t, 0);
        SEG(LNAME("mlp.down_proj"), 2, h, m->ffn, id + 6, 1, flo, t->f_t, 0);
        if (t->mlp_bias)
            SEG(BNAME("mlp.down_proj"), 1, h, 1, INIT_ZEROS, 0, 0, h, 1);
    }
#undef SEG
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


/* The root unit's segments: the word embedding (first stage, unless tied under a pipeline, where it
 * heads the unit), learned positions (first stage), the final norm and the LM head (last stage;
 * tied: the embedding's slice itself, or the copy at the root's start). */
static int root_segs(gs_train *t, rank_st *r, unit_info *ui, uint64_t *flat)
{
    const gs_scenario *s = t->s;
    uint64_t V = s->model.vocab, h = t->h;
    int ok = 1;
    if (r->first && !r->tied_x) {
        r->emb_off = *flat;
        ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){"model.embed_tokens.weight", 2, V, h, 1, 0,
                                                           r->tp_pos * t->v_t, t->v_t, 0});
    }
    if (r->first) {
        /* learned absolute positions: [seq, h], replicated over TP */
        r->pos_off = *flat;
        if (!t->rope)
            ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){"model.embed_positions.weight", 2, t->seq, h, 3, 0, 0,
                                                               t->seq, 1});
    }
    if (r->last) {
        r->hn_off = *flat;
        ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){"model.norm.weight", 1, h, 1, INIT_ONES, 0, 0, h, 1});
        if (t->norm_bias)
            ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){"model.norm.bias", 1, h, 1, INIT_ZEROS, 0, 0, h, 1});
        /* tied: the head is the embedding's [vocab/tp, h] slice itself (one stage: its backward
         * accumulates into the embedding's gradient) or the copy at the root's start */
        if (s->model.tied_embeddings) {
            r->head_off = r->emb_off;
        } else {
            r->head_off = *flat;
            ok = ok && gs__train_add_seg(ui, flat, &(seg_spec){"lm_head.weight", 2, V, h, 2, 0, r->tp_pos * t->v_t,
                                                               t->v_t, 0});
        }
    }
    return ok;
}

/* Unit u's segments and sizes: P, and S (the padded shard; tied under a pipeline the larger of the
 * first and last stages' root shards, so both split the word embedding alike). v: model chunks
 * per stage. */
static gs_status unit_layout(gs_train *t, rank_st *r, size_t u, uint64_t v, gs_error *err)
{
    const gs_scenario *s = t->s;
    const gs_mesh *mesh = &t->sch->mesh;
    unit_info *ui = &r->units[u];
    const gs_unit *pu = &r->part.units[u];
    uint64_t flat = 0, pp = mesh->size[GS_DIM_PP];
    int ok = 1;
    ui->root = r->part.has_root && u + 1 == r->nunits;
    ui->expert = pu->expert;
    ui->N = pu->expert ? r->groups[GS_GROUP_EDP].size : r->N;
    ui->pos = pu->expert ? r->groups[GS_GROUP_EDP].pos : r->shard_pos;
    int64_t lb = pu->layer_begin, le = pu->layer_end;
    if (ui->root && s->strategy.wrap == GS_WRAP_MODEL)
        lb = 0, le = (int64_t)r->part.layers - 1;
    if (ui->root && r->tied_x) {
        /* the word embedding first: the first stage's own, the last stage's copy of it
         * (initialized alike: the same normal stream and offsets; saved by the first stage) */
        r->emb_off = r->head_off = 0;
        ok = ok && gs__train_add_seg(ui, &flat, &(seg_spec){"model.embed_tokens.weight", 2, s->model.vocab, t->h, 1, 0,
                                                            r->tp_pos * t->v_t, t->v_t, 0});
        if (ok && r->last)
            ui->segs[ui->nsegs - 1].copy = 1;
    }
    if (pu->expert) /* a MoE block's routed experts on this EP rank (engine/partition.h) */
        for (int64_t ll = lb; ll <= le; ll++)
            ok = ok && gs__train_moe_expert_segs(t, r, ui, u, &flat, ll,
                                                 gs_pipe_global_layer(mesh, t->layers, v, r->stage, (uint64_t)ll));
    else if (!(ui->root && s->strategy.wrap != GS_WRAP_MODEL))
        for (int64_t ll = lb; ll <= le; ll++) {
            r->unit_of_local[ll] = (int64_t)u;
            r->off_of_local[ll] = flat;
            ok = ok && add_layer_segs(t, r, ui, u, &flat, ll,
                                      gs_pipe_global_layer(mesh, t->layers, v, r->stage, (uint64_t)ll));
        }
    if (ui->root)
        ok = ok && root_segs(t, r, ui, &flat);
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    if (flat != pu->params)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 " unit %zu: the layout holds %" PRIu64
                            " elements but the partition says %" PRIu64, r->rank, u, flat, pu->params);
    ui->P = flat;
    ui->S = gs__train_ceil_div(flat, ui->N);
    if (ui->root && r->tied_x) {
        gs_partition op;
        gs_status rc = gs_partition_stage(s, mesh, r->first ? pp - 1 : 0, &op, err);
        if (rc != GS_OK)
            return rc;
        uint64_t so = gs__train_ceil_div(gs_partition_root(&op), ui->N);
        gs_partition_fini(&op);
        if (so > ui->S)
            ui->S = so;
    }
    r->param_t[u] = r->grad_t[u] = r->hold_t[u] = NO_ID;
    return GS_OK;
}

gs_status gs__train_rank_units(gs_train *t, rank_st *r, gs_error *err)
{
    const gs_scenario *s = t->s;
    const gs_mesh *mesh = &t->sch->mesh;
    uint64_t nl = r->part.layers;
    for (uint64_t l = 0; l < t->layers; l++)
        r->local_of_global[l] = -1;
    uint64_t v = t->vstages;
    for (uint64_t ll = 0; ll < nl; ll++) {
        uint64_t g = gs_pipe_global_layer(mesh, t->layers, v, r->stage, ll);
        r->local_of_global[g] = (int64_t)ll;
        r->unit_of_local[ll] = -1;
    }
    r->tied_x = s->model.tied_embeddings && mesh->size[GS_DIM_PP] > 1 && (r->first || r->last);
    r->word_n = t->v_t * t->h;
    for (size_t u = 0; u < r->nunits; u++) {
        gs_status rc = unit_layout(t, r, u, v, err);
        if (rc != GS_OK)
            return rc;
    }
    for (uint64_t ll = 0; ll < nl; ll++)
        if (r->unit_of_local[ll] < 0)
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": no unit covers layer %" PRIu64,
                                r->rank, ll);
    return GS_OK;
}

/* The initial parameters: each unit's full flat content, then this rank's part of it. */
gs_status gs__train_rank_params(gs_train *t, gs_dispatch *disp, size_t ri, gs_error *err)
{
    rank_st *r = &t->r[ri];
    gs_drv_stream *st = gs_dispatch_stream(disp, ri, GS_STREAM_COMPUTE);
    for (size_t u = 0; u < r->nunits; u++) {
        const unit_info *ui = &r->units[u];
        float *full = calloc(ui->N * ui->S + 1, sizeof *full);
        if (!full)
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        init_unit(t, ui, full);
        if (r->plan.stored_sharded)
            t->ops->upload(t->drv, st, r->tbuf[r->param_t[u]], full + ui->pos * ui->S, ui->S * sizeof(float));
        else
            t->ops->upload(t->drv, st, r->tbuf[r->param_t[u]], full, ui->N * ui->S * sizeof(float));
        free(full);
    }
    return GS_OK;
}
