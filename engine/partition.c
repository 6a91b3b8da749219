/* FSDP units of one pipeline stage on one TP rank, under the wrap policy. */
#include "engine/partition.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"

typedef struct pcalc {
    int overflow;
    const char *what;
} pcalc;

static uint64_t pmul(pcalc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (gs_mul_u64(a, b, &r) != 0) {
        if (!c->overflow)
            c->overflow = 1, c->what = what;
        return UINT64_MAX;
    }
    return r;
}

static uint64_t padd(pcalc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (gs_add_u64(a, b, &r) != 0) {
        if (!c->overflow)
            c->overflow = 1, c->what = what;
        return UINT64_MAX;
    }
    return r;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static gs_status push(gs_partition *p, uint64_t params, int32_t begin, int32_t end)
{
    if (params == 0)
        return GS_OK;
    if (p->nunits == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        gs_unit *u = realloc(p->units, cap * sizeof *u);
        if (!u)
            return GS_ERR_NOMEM;
        p->units = u;
        p->cap = cap;
    }
    p->units[p->nunits++] = (gs_unit){params, begin, end};
    return GS_OK;
}

/* Per-rank (TP slice) sizes of the pieces of one block: q k v o, then the MLP linears. Linears
 * split Megatron-style: q, k, v, up/gate/fc1 column-parallel (their biases split too), o and
 * down/fc2 row-parallel (biases replicated). KV heads fewer than tp are replicated:
 * ceil(kv/tp) heads per rank. */
typedef struct block_slice {
    uint64_t linear[8];
    size_t nattn, nmlp;
    uint64_t norms;
    uint64_t total;
} block_slice;

static void block_slice_init(const gs_model *m, uint64_t tp, pcalc *c, block_slice *b)
{
    memset(b, 0, sizeof *b);
    uint64_t h = m->hidden, hd = m->head_dim, qh = m->heads / tp, kvh = ceil_div(m->kv_heads, tp);
    uint64_t f = m->ffn / tp, bias = m->bias ? 1 : 0;
    b->linear[0] = padd(c, pmul(c, h, pmul(c, qh, hd, "q"), "q"), bias * qh * hd, "q");
    b->linear[1] = padd(c, pmul(c, h, pmul(c, kvh, hd, "k"), "k"), bias * kvh * hd, "k");
    b->linear[2] = b->linear[1];
    b->linear[3] = padd(c, pmul(c, pmul(c, qh, hd, "o"), h, "o"), bias * h, "o");
    b->nattn = 4;
    if (m->mlp == GS_MLP_SWIGLU) {
        b->linear[4] = pmul(c, h, f, "mlp");
        b->linear[5] = b->linear[4];
        b->linear[6] = b->linear[4];
        b->nmlp = 3;
    } else {
        b->linear[4] = padd(c, pmul(c, h, f, "fc1"), bias * f, "fc1");
        b->linear[5] = padd(c, pmul(c, f, h, "fc2"), bias * h, "fc2");
        b->nmlp = 2;
    }
    uint64_t normp = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * h : h;
    b->norms = 2 * normp;
    b->total = b->norms;
    for (size_t i = 0; i < b->nattn + b->nmlp; i++)
        b->total = padd(c, b->total, b->linear[i], "block params");
}

static int covers(const gs_unit *u, int64_t l);

/* The per-layer index of covering units (the builders and the ledger ask per layer and pass). */
static gs_status build_cover_index(gs_partition *p)
{
    size_t n = (size_t)p->layers, total = 0;
    p->cover_off = calloc(n + 1, sizeof *p->cover_off);
    p->cover_params = calloc(n ? n : 1, sizeof *p->cover_params);
    if (!p->cover_off || !p->cover_params)
        return GS_ERR_NOMEM;
    for (size_t u = 0; u < p->nunits; u++) {
        const gs_unit *un = &p->units[u];
        if (un->layer_begin == GS_PART_ROOT)
            continue;
        for (int64_t l = un->layer_begin < 0 ? 0 : un->layer_begin; l <= un->layer_end && (uint64_t)l < n; l++)
            p->cover_off[l + 1]++;
    }
    for (size_t l = 0; l < n; l++)
        p->cover_off[l + 1] += p->cover_off[l];
    total = p->cover_off[n];
    p->cover_units = malloc((total ? total : 1) * sizeof *p->cover_units);
    size_t *fill = malloc((n ? n : 1) * sizeof *fill);
    if (!p->cover_units || !fill) {
        free(fill);
        return GS_ERR_NOMEM;
    }
    memcpy(fill, p->cover_off, n * sizeof *fill);
    for (size_t u = 0; u < p->nunits; u++) { /* ascending u: each layer's list is ascending */
        const gs_unit *un = &p->units[u];
        if (un->layer_begin == GS_PART_ROOT)
            continue;
        for (int64_t l = un->layer_begin < 0 ? 0 : un->layer_begin; l <= un->layer_end && (uint64_t)l < n; l++) {
            p->cover_units[fill[l]++] = u;
            p->cover_params[l] += un->params;
        }
    }
    free(fill);
    return GS_OK;
}

/* Stage stage's parameter counts per TP rank into p: its layers, each layer's, the embedding's
 * (first stage), the head's (last stage) and the total; c records an overflow, blk gets one
 * block's linear layers (not for nominal parameter counts). */
static void stage_params(const gs_model *m, const gs_mesh *mesh, uint64_t stage, pcalc *c, block_slice *blk,
                         gs_partition *p)
{
    uint64_t tp = mesh->size[GS_DIM_TP], pp = mesh->size[GS_DIM_PP];
    int first = stage == 0, last = stage + 1 == pp;
    p->layers = gs_mesh_stage_layers(mesh, m->layers, stage);
    p->first_layer = gs_mesh_stage_first_layer(mesh, m->layers, stage);

    if (m->nominal_params) {
        p->layer_params = ceil_div(gs_model_layer_params(m), tp);
        if (first)
            p->emb_params = ceil_div(gs_model_embedding_params(m), tp);
    } else {
        block_slice_init(m, tp, c, blk);
        p->layer_params = blk->total;
        uint64_t hid = m->hidden;
        uint64_t vocab_slice = pmul(c, ceil_div(m->vocab, tp), hid, "embedding");
        p->word_params = vocab_slice;
        if (first) {
            p->emb_params = vocab_slice;
            if (m->pos == GS_POS_LEARNED)
                p->emb_params = padd(c, p->emb_params, pmul(c, m->seq, hid, "position embedding"), "embedding");
        }
        if (last) {
            uint64_t fnorm = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * hid : hid;
            /* Tied embeddings: the head reuses the embedding on a single stage; with pp > 1 the
             * last stage keeps its own copy (Megatron), synchronized by an all-reduce. */
            uint64_t lm = (m->tied_embeddings && pp == 1) ? 0 : vocab_slice;
            p->head_params = padd(c, fnorm, lm, "head");
        }
    }
    p->params = padd(c, padd(c, p->emb_params, p->head_params, "stage params"),
                     pmul(c, p->layer_params, p->layers, "stage params"), "stage params");
}

/* wrap min_params: PyTorch's _recursive_wrap with size_based_auto_wrap_policy: children first; a
 * module is wrapped when the parameters not already in wrapped descendants reach min_params.
 * Pushes the units; *root gets what stays in the root unit. */
static gs_status wrap_min_params(const gs_model *m, const gs_strategy *st, uint64_t pp, const block_slice *blk,
                                 gs_partition *p, uint64_t *root)
{
    gs_status rc = GS_OK;
    int32_t l0 = 0, l1 = (int32_t)p->layers - 1; /* stage-local layer indices */
    uint64_t min = st->wrap_min_params ? st->wrap_min_params : 1;
    /* The embedding and the head stay in the root: they are touched outside the blocks. */
    *root += p->emb_params + p->head_params;
    uint64_t unwrapped_layers = 0;
    uint64_t v = st->pipeline == GS_PIPE_INTERLEAVED && pp > 1 && st->virtual_stages ? st->virtual_stages : 1;
    int32_t per_chunk = (int32_t)(p->layers / v ? p->layers / v : 1);
    for (int32_t l = l0; l <= l1 && rc == GS_OK; l++) {
        uint64_t left = 0;
        if (m->nominal_params) {
            left = p->layer_params;
        } else {
            uint64_t attn_left = 0, mlp_left = 0;
            for (size_t k = 0; k < blk->nattn && rc == GS_OK; k++) {
                if (blk->linear[k] >= min)
                    rc = push(p, blk->linear[k], l, l);
                else
                    attn_left += blk->linear[k];
            }
            if (attn_left >= min && rc == GS_OK)
                rc = push(p, attn_left, l, l), attn_left = 0;
            for (size_t k = blk->nattn; k < blk->nattn + blk->nmlp && rc == GS_OK; k++) {
                if (blk->linear[k] >= min)
                    rc = push(p, blk->linear[k], l, l);
                else
                    mlp_left += blk->linear[k];
            }
            if (mlp_left >= min && rc == GS_OK)
                rc = push(p, mlp_left, l, l), mlp_left = 0;
            left = attn_left + mlp_left + blk->norms;
        }
        if (rc != GS_OK)
            break;
        if (left >= min)
            rc = push(p, left, l, l);
        else
            unwrapped_layers += left;
        /* The list of blocks of each model chunk (interleaved: v chunks) is one module. */
        if (rc == GS_OK && (l + 1) % per_chunk == 0) {
            if (unwrapped_layers >= min)
                rc = push(p, unwrapped_layers, l + 1 - (int32_t)per_chunk, l);
            else
                *root += unwrapped_layers;
            unwrapped_layers = 0;
        }
    }
    if (rc != GS_OK)
        return rc;
    *root += unwrapped_layers;
    return GS_OK;
}

gs_status gs_partition_stage(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, gs_partition *p,
                             gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t pp = mesh->size[GS_DIM_PP];
    gs_status rc = GS_OK;
    pcalc c = {0, NULL};
    block_slice blk;
    memset(&blk, 0, sizeof blk);
    memset(p, 0, sizeof *p);
    stage_params(m, mesh, stage, &c, &blk, p);
    if (c.overflow) {
        rc = gs_error_set(err, GS_ERR_OVERFLOW, "%s: the %s parameter count of stage %" PRIu64
                          " would overflow 64 bits", s->path, c.what, stage);
        goto out;
    }

    int32_t l0 = 0, l1 = (int32_t)p->layers - 1; /* stage-local layer indices */
    uint64_t root = 0;
    switch (st->wrap) {
    case GS_WRAP_MODEL:
        root = p->params;
        break;
    case GS_WRAP_LAYER:
        for (int32_t l = l0; l <= l1 && rc == GS_OK; l++)
            rc = push(p, p->layer_params, l, l);
        root = p->emb_params + p->head_params;
        break;
    case GS_WRAP_MIN_PARAMS:
        rc = wrap_min_params(m, st, pp, &blk, p, &root);
        break;
    }
    if (rc == GS_OK && root > 0) {
        rc = push(p, root, GS_PART_ROOT, GS_PART_ROOT);
        p->has_root = rc == GS_OK;
    }
    if (rc == GS_OK)
        rc = build_cover_index(p);
    if (rc != GS_OK && rc != GS_ERR_OVERFLOW)
        gs_error_set(err, rc, "out of memory partitioning stage %" PRIu64 " into FSDP units", stage);
out:
    if (rc != GS_OK)
        gs_partition_fini(p);
    return rc;
}

void gs_partition_fini(gs_partition *p)
{
    free(p->units);
    free(p->cover_off);
    free(p->cover_units);
    free(p->cover_params);
    p->cover_off = p->cover_units = NULL;
    p->cover_params = NULL;
    p->units = NULL;
    p->nunits = p->cap = 0;
    p->has_root = 0;
}

static int covers(const gs_unit *u, int64_t l)
{
    return u->layer_begin != GS_PART_ROOT && u->layer_begin <= l && l <= u->layer_end;
}

uint64_t gs_partition_covering(const gs_partition *p, int64_t layer)
{
    if (p->cover_params && layer >= 0 && (uint64_t)layer < p->layers)
        return p->cover_params[layer];
    uint64_t sum = 0;
    for (size_t i = 0; i < p->nunits; i++)
        if (covers(&p->units[i], layer))
            sum += p->units[i].params;
    return sum;
}

size_t gs_partition_units_covering(const gs_partition *p, int64_t layer, const size_t **units)
{
    if (p->cover_off && layer >= 0 && (uint64_t)layer < p->layers) {
        *units = p->cover_units + p->cover_off[layer];
        return p->cover_off[layer + 1] - p->cover_off[layer];
    }
    *units = NULL;
    return 0;
}

uint64_t gs_partition_prefetch(const gs_partition *p, int64_t cur, int64_t next)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < p->nunits; i++)
        if (covers(&p->units[i], next) && !covers(&p->units[i], cur))
            sum += p->units[i].params;
    return sum;
}

uint64_t gs_partition_root(const gs_partition *p)
{
    return p->has_root ? p->units[p->nunits - 1].params : 0;
}

int gs_partition_root_holds_layer(const gs_partition *p, int64_t layer)
{
    return p->has_root && gs_partition_covering(p, layer) < p->layer_params;
}

int gs_partition_root_written_by(const gs_partition *p, uint64_t stage, uint64_t pp, uint64_t v, uint64_t chunk)
{
    if (!p->has_root)
        return 0;
    if ((stage == 0 && chunk == 0 && p->emb_params) || (stage + 1 == pp && chunk + 1 == v && p->head_params))
        return 1;
    uint64_t per_chunk = p->layers / (v ? v : 1);
    for (uint64_t l = chunk * per_chunk; l < (chunk + 1) * per_chunk; l++)
        if (gs_partition_root_holds_layer(p, (int64_t)l))
            return 1;
    return 0;
}

uint64_t gs_partition_root_chunk(const gs_partition *p, uint64_t stage, uint64_t pp, uint64_t v)
{
    for (uint64_t c = 0; c < v; c++)
        if (gs_partition_root_written_by(p, stage, pp, v, c))
            return c;
    return gs_pipe_root_chunk(stage, pp, v);
}

uint64_t gs_partition_unit_chunk(const gs_partition *p, size_t u, uint64_t stage, uint64_t pp, uint64_t v)
{
    const gs_unit *un = &p->units[u];
    if (un->layer_begin == GS_PART_ROOT)
        return gs_partition_root_chunk(p, stage, pp, v);
    uint64_t per_chunk = p->layers / (v ? v : 1);
    return per_chunk ? (uint64_t)un->layer_begin / per_chunk : 0;
}

uint64_t gs_bucket_count(uint64_t unit_params, uint64_t wb, uint64_t bucket_bytes)
{
    if (bucket_bytes == 0 || unit_params == 0)
        return 1;
    uint64_t per = bucket_bytes / (wb ? wb : 1); /* elements per bucket */
    if (per == 0)
        per = 1;
    return ceil_div(unit_params, per);
}

uint64_t gs_bucket_params(uint64_t unit_params, uint64_t nbuckets, uint64_t i)
{
    uint64_t each = ceil_div(unit_params, nbuckets);
    uint64_t start = each * i;
    if (start >= unit_params)
        return 0;
    return unit_params - start < each ? unit_params - start : each;
}
