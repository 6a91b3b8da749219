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
    p->units[p->nunits++] = (gs_unit){params, begin, end, 0};
    return GS_OK;
}

/* Per-rank (TP slice) sizes of the pieces of one block: the attention linears, then one MLP's
 * (one expert's in a MoE block). Linears split Megatron-style: q, k, v, up/gate/fc1
 * column-parallel (their biases split too), o and down/fc2 row-parallel (biases replicated).
 * KV heads fewer than tp are replicated: ceil(kv/tp) heads per rank. MLA (engine/model.h): q_a and
 * kv_a replicated, q_b and kv_b column-parallel, o row-parallel. A MoE block repeats the MLP
 * linears for each routed expert, adds the shared experts' MLP and the replicated router. */
typedef struct block_slice {
    uint64_t linear[8];
    size_t nattn, nmlp;
    uint64_t attn_norms; /* MLA's latent norms (inside the attention module) */
    uint64_t experts;    /* copies of the MLP linears: 1 in a dense block */
    uint64_t shared[3];  /* the shared experts' MLP linears (MoE block), else 0 */
    uint64_t router;     /* MoE block: hidden x experts, replicated; else 0 */
    uint64_t norms;
    uint64_t routed;     /* the routed experts' part of total (this EP rank's experts) */
    uint64_t total;
} block_slice;

static uint64_t norm_slice(const gs_model *m, uint64_t width)
{
    return (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * width : width;
}

static void attention_slice(const gs_model *m, uint64_t tp, pcalc *c, block_slice *b)
{
    uint64_t h = m->hidden, hd = m->head_dim, qh = m->heads / tp, kvh = ceil_div(m->kv_heads, tp);
    uint64_t bias = m->bias ? 1 : 0;
    if (m->mla.kv_lora_rank) {
        uint64_t qr = m->mla.q_lora_rank, kr = m->mla.kv_lora_rank, r = m->mla.rope_head_dim;
        uint64_t qk = pmul(c, qh, padd(c, hd, r, "q"), "q");
        b->nattn = 0;
        if (qr)
            b->linear[b->nattn++] = pmul(c, h, qr, "q_a");
        b->linear[b->nattn++] = pmul(c, qr ? qr : h, qk, "q");
        b->linear[b->nattn++] = pmul(c, h, padd(c, kr, r, "kv_a"), "kv_a");
        b->linear[b->nattn++] = pmul(c, kr, pmul(c, qh, 2 * hd, "kv_b"), "kv_b");
        b->linear[b->nattn++] = pmul(c, pmul(c, qh, hd, "o"), h, "o");
        b->attn_norms = padd(c, norm_slice(m, kr), qr ? norm_slice(m, qr) : 0, "latent norms");
        return;
    }
    b->linear[0] = padd(c, pmul(c, h, pmul(c, qh, hd, "q"), "q"), bias * qh * hd, "q");
    b->linear[1] = padd(c, pmul(c, h, pmul(c, kvh, hd, "k"), "k"), bias * kvh * hd, "k");
    b->linear[2] = b->linear[1];
    b->linear[3] = padd(c, pmul(c, pmul(c, qh, hd, "o"), h, "o"), bias * h, "o");
    b->nattn = 4;
}

/* One MLP of intermediate size `width` (its TP slice: width / tp) into out[0..2]; returns how
 * many linears it has. */
static size_t mlp_slice(const gs_model *m, uint64_t width, uint64_t tp, pcalc *c, uint64_t out[3])
{
    uint64_t h = m->hidden, f = width / tp, bias = m->bias ? 1 : 0;
    if (m->mlp == GS_MLP_SWIGLU) {
        out[0] = pmul(c, h, f, "mlp");
        out[1] = out[0];
        out[2] = out[0];
        return 3;
    }
    out[0] = padd(c, pmul(c, h, f, "fc1"), bias * f, "fc1");
    out[1] = padd(c, pmul(c, f, h, "fc2"), bias * h, "fc2");
    out[2] = 0;
    return 2;
}

/* One block's slice: a MoE block when moe_block (experts / ep of its routed experts, each split
 * over etp ranks; the shared experts over tp as the dense MLP), else a dense one. */
static void block_slice_init(const gs_model *m, uint64_t tp, uint64_t etp, uint64_t ep, int moe_block, pcalc *c,
                             block_slice *b)
{
    memset(b, 0, sizeof *b);
    attention_slice(m, tp, c, b);
    b->experts = 1;
    if (moe_block) {
        uint64_t ef = m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn;
        b->nmlp = mlp_slice(m, ef, etp, c, &b->linear[b->nattn]);
        b->experts = m->moe.experts / (ep ? ep : 1);
        if (m->moe.shared_experts)
            mlp_slice(m, pmul(c, m->moe.shared_experts, ef, "shared experts"), tp, c, b->shared);
        b->router = pmul(c, m->hidden, m->moe.experts, "router");
    } else {
        b->nmlp = mlp_slice(m, m->ffn, tp, c, &b->linear[b->nattn]);
    }
    b->norms = 2 * norm_slice(m, m->hidden);
    b->total = padd(c, b->norms, b->attn_norms, "block params");
    for (size_t i = 0; i < b->nattn; i++)
        b->total = padd(c, b->total, b->linear[i], "block params");
    uint64_t mlp = 0;
    for (size_t i = b->nattn; i < b->nattn + b->nmlp; i++)
        mlp = padd(c, mlp, b->linear[i], "block params");
    b->routed = moe_block ? pmul(c, mlp, b->experts, "experts") : 0;
    b->total = padd(c, b->total, pmul(c, mlp, b->experts, "experts"), "block params");
    for (size_t i = 0; i < 3; i++)
        b->total = padd(c, b->total, b->shared[i], "block params");
    b->total = padd(c, b->total, b->router, "block params");
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

/* Whether stage-local layer l of `stage` is one of a MoE model's dense blocks. */
static int local_layer_dense(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, int64_t l)
{
    const gs_model *m = &s->model;
    if (!gs_model_has_dense_blocks(m) || m->nominal_params)
        return 0;
    uint64_t v = gs_strategy_chunks(&s->strategy, mesh->size[GS_DIM_PP]);
    return !gs_model_moe_block(m, gs_pipe_global_layer(mesh, m->layers, v, stage, (uint64_t)l));
}

/* Stage stage's parameter counts per TP rank into p: its layers, each layer's, the embedding's
 * (first stage), the head's (last stage) and the total; c records an overflow, blk[0] gets the
 * common block's linear layers (a MoE block in a MoE model), blk[1] a dense block's
 * (not for nominal parameter counts). */
static void stage_params(const gs_model *m, const gs_mesh *mesh, uint64_t stage, pcalc *c, block_slice blk[2],
                         gs_partition *p)
{
    uint64_t tp = mesh->size[GS_DIM_TP], pp = mesh->size[GS_DIM_PP];
    int first = stage == 0, last = stage + 1 == pp;
    p->layers = gs_mesh_stage_layers(mesh, m->layers, stage);
    p->first_layer = gs_mesh_stage_first_layer(mesh, m->layers, stage);
    p->chunk0_fewer = mesh->account_embedding && first;
    p->last_chunk_fewer = mesh->account_loss && last;
    p->nchunk_end = 0;
    for (uint64_t k = stage, end = 0; mesh->layout.n && k < mesh->layout.n; k += pp) {
        end += mesh->layout.layers[k];
        p->chunk_end[p->nchunk_end++] = (uint16_t)end;
    }

    if (m->nominal_params) {
        p->layer_params = ceil_div(gs_model_layer_params(m), tp);
        if (first)
            p->emb_params = ceil_div(gs_model_embedding_params(m), tp);
    } else {
        uint64_t ep = mesh->ep ? mesh->ep : 1, etp = gs_mesh_etp(mesh);
        block_slice_init(m, tp, etp, ep, m->moe.experts != 0, c, &blk[0]);
        blk[1] = blk[0];
        if (gs_model_has_dense_blocks(m))
            block_slice_init(m, tp, etp, ep, 0, c, &blk[1]);
        p->layer_params = blk[0].total;
        p->routed_params = gs_mesh_expert_split(mesh) ? blk[0].routed : 0;
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
            if (m->mtp_layers) {
                /* each MTP module's enorm, hnorm and final norm and its eh_proj (2h x h / tp);
                 * under a pipeline, the stage's copy of the word embedding (untied: besides the
                 * head; tied: the head's own) */
                uint64_t mod = padd(c, pmul(c, 3, norm_slice(m, hid), "mtp"), pmul(c, 2 * hid, hid / tp, "mtp"), "mtp");
                p->head_params = padd(c, p->head_params, pmul(c, m->mtp_layers, mod, "mtp"), "head");
                if (pp > 1 && !m->tied_embeddings)
                    p->head_params = padd(c, p->head_params, vocab_slice, "head");
            }
        }
    }
    p->params = padd(c, padd(c, p->emb_params, p->head_params, "stage params"),
                     pmul(c, p->layer_params, p->layers, "stage params"), "stage params");
}

/* A MoE model's dense blocks on this stage: p->block_params per stage-local layer and
 * the stage total with them (dense models and MoE models without dense blocks keep NULL). */
static gs_status dense_block_index(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage,
                                   const block_slice blk[2], pcalc *c, gs_partition *p)
{
    if (!gs_model_has_dense_blocks(&s->model) || s->model.nominal_params)
        return GS_OK;
    p->block_params = malloc((p->layers ? p->layers : 1) * sizeof *p->block_params);
    if (!p->block_params)
        return GS_ERR_NOMEM;
    uint64_t blocks = 0;
    for (uint64_t l = 0; l < p->layers; l++) {
        p->block_params[l] = local_layer_dense(s, mesh, stage, (int64_t)l) ? blk[1].total : blk[0].total;
        blocks = padd(c, blocks, p->block_params[l], "stage params");
    }
    p->params = padd(c, padd(c, p->emb_params, p->head_params, "stage params"), blocks, "stage params");
    return GS_OK;
}

/* A MoE block's MLP under min_params (the router, the ModuleList of routed experts, each expert
 * an MLP, the shared experts' MLP, all inside the MoE module): pushes what reaches min from the
 * bottom up; returns what stays unwrapped in the MoE module. */
static gs_status wrap_moe_mlp(const block_slice *b, uint64_t min, int32_t l, gs_partition *p, uint64_t *left)
{
    gs_status rc = GS_OK;
    uint64_t router_left = 0, experts_left = 0, shared_left = 0, one_left = 0;
    if (b->router >= min)
        rc = push(p, b->router, l, l);
    else
        router_left = b->router;
    for (uint64_t e = 0; e < b->experts && rc == GS_OK; e++) {
        one_left = 0;
        for (size_t k = b->nattn; k < b->nattn + b->nmlp && rc == GS_OK; k++) {
            if (b->linear[k] >= min)
                rc = push(p, b->linear[k], l, l);
            else
                one_left += b->linear[k];
        }
        if (one_left >= min && rc == GS_OK)
            rc = push(p, one_left, l, l), one_left = 0;
        experts_left += one_left;
    }
    if (experts_left >= min && rc == GS_OK)
        rc = push(p, experts_left, l, l), experts_left = 0;
    for (size_t k = 0; k < 3 && rc == GS_OK; k++) {
        if (b->shared[k] >= min)
            rc = push(p, b->shared[k], l, l);
        else
            shared_left += b->shared[k];
    }
    if (shared_left >= min && rc == GS_OK)
        rc = push(p, shared_left, l, l), shared_left = 0;
    *left = router_left + experts_left + shared_left;
    if (*left >= min && rc == GS_OK)
        rc = push(p, *left, l, l), *left = 0;
    return rc;
}

/* wrap min_params: PyTorch's _recursive_wrap with size_based_auto_wrap_policy: children first; a
 * module is wrapped when the parameters not already in wrapped descendants reach min_params.
 * Pushes the units; *root gets what stays in the root unit. */
static gs_status wrap_min_params(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, const block_slice blk[2],
                                 gs_partition *p, uint64_t *root)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    gs_status rc = GS_OK;
    int32_t l0 = 0, l1 = (int32_t)p->layers - 1; /* stage-local layer indices */
    uint64_t min = st->wrap_min_params ? st->wrap_min_params : 1;
    /* The embedding and the head stay in the root: they are touched outside the blocks. */
    *root += p->emb_params + p->head_params;
    uint64_t unwrapped_layers = 0;
    uint64_t v = gs_strategy_chunks(st, mesh->size[GS_DIM_PP]), chunk = 0;
    int64_t chunk_bot, chunk_top;
    gs_partition_chunk_span(p, v, chunk, &chunk_bot, &chunk_top);
    for (int32_t l = l0; l <= l1 && rc == GS_OK; l++) {
        uint64_t left = 0;
        const block_slice *b = local_layer_dense(s, mesh, stage, l) ? &blk[1] : &blk[0];
        if (m->nominal_params) {
            left = p->layer_params;
        } else {
            uint64_t attn_left = b->attn_norms, mlp_left = 0;
            for (size_t k = 0; k < b->nattn && rc == GS_OK; k++) {
                if (b->linear[k] >= min)
                    rc = push(p, b->linear[k], l, l);
                else
                    attn_left += b->linear[k];
            }
            if (attn_left >= min && rc == GS_OK)
                rc = push(p, attn_left, l, l), attn_left = 0;
            if (b->router && rc == GS_OK) { /* a MoE block */
                rc = wrap_moe_mlp(b, min, l, p, &mlp_left);
            } else {
                for (size_t k = b->nattn; k < b->nattn + b->nmlp && rc == GS_OK; k++) {
                    if (b->linear[k] >= min)
                        rc = push(p, b->linear[k], l, l);
                    else
                        mlp_left += b->linear[k];
                }
                if (mlp_left >= min && rc == GS_OK)
                    rc = push(p, mlp_left, l, l), mlp_left = 0;
            }
            left = attn_left + mlp_left + b->norms;
        }
        if (rc != GS_OK)
            break;
        if (left >= min)
            rc = push(p, left, l, l);
        else
            unwrapped_layers += left;
        /* The list of blocks of each model chunk (interleaved: v chunks) is one module. */
        if (rc == GS_OK && l == chunk_top) {
            if (unwrapped_layers >= min)
                rc = push(p, unwrapped_layers, (int32_t)chunk_bot, l);
            else
                *root += unwrapped_layers;
            unwrapped_layers = 0;
            if (++chunk < v)
                gs_partition_chunk_span(p, v, chunk, &chunk_bot, &chunk_top);
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
    gs_status rc = GS_OK;
    pcalc c = {0, NULL};
    block_slice blk[2];
    memset(blk, 0, sizeof blk);
    memset(p, 0, sizeof *p);
    stage_params(m, mesh, stage, &c, blk, p);
    if ((rc = dense_block_index(s, mesh, stage, blk, &c, p)) != GS_OK) {
        gs_error_set(err, rc, "out of memory indexing the blocks of stage %" PRIu64, stage);
        goto out;
    }
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
        for (int32_t l = l0; l <= l1 && rc == GS_OK; l++) {
            /* expert parallelism (or etp < tp): a MoE block's routed experts in a unit of their own */
            uint64_t routed = local_layer_dense(s, mesh, stage, l) ? 0 : p->routed_params;
            rc = push(p, gs_partition_block_params(p, l) - routed, l, l);
            if (rc == GS_OK && routed && (rc = push(p, routed, l, l)) == GS_OK)
                p->units[p->nunits - 1].expert = 1;
        }
        root = p->emb_params + p->head_params;
        break;
    case GS_WRAP_MIN_PARAMS:
        rc = wrap_min_params(s, mesh, stage, blk, p, &root);
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
    free(p->block_params);
    p->block_params = NULL;
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
    return p->has_root && gs_partition_covering(p, layer) < gs_partition_block_params(p, layer);
}

uint64_t gs_partition_block_params(const gs_partition *p, int64_t layer)
{
    if (p->block_params && layer >= 0 && (uint64_t)layer < p->layers)
        return p->block_params[layer];
    return p->layer_params;
}

void gs_partition_chunk_span(const gs_partition *p, uint64_t v, uint64_t chunk, int64_t *bot, int64_t *top)
{
    if (v <= 1) {
        *bot = 0;
        *top = (int64_t)p->layers - 1;
        return;
    }
    if (p->nchunk_end) { /* a custom layout's chunks */
        uint64_t c = chunk < p->nchunk_end ? chunk : (uint64_t)p->nchunk_end - 1;
        *bot = c ? (int64_t)p->chunk_end[c - 1] : 0;
        *top = (int64_t)p->chunk_end[c] - 1;
        return;
    }
    /* every chunk holds per layers but chunk 0 and the last one a layer fewer where the
     * embedding / loss takes its place (gs_pipe_chunk_begin) */
    uint64_t fewer0 = (uint64_t)p->chunk0_fewer, per = (p->layers + fewer0 + (uint64_t)p->last_chunk_fewer) / v;
    uint64_t b = chunk == 0 ? 0 : chunk * per - fewer0;
    uint64_t e = chunk + 1 >= v ? p->layers : (chunk + 1) * per - fewer0;
    *bot = (int64_t)b;
    *top = (int64_t)e - 1;
}

int gs_partition_root_written_by(const gs_partition *p, uint64_t stage, uint64_t pp, uint64_t v, uint64_t chunk)
{
    if (!p->has_root)
        return 0;
    if ((stage == 0 && chunk == 0 && p->emb_params) || (stage + 1 == pp && chunk + 1 == v && p->head_params))
        return 1;
    int64_t bot, top;
    gs_partition_chunk_span(p, v, chunk, &bot, &top);
    for (int64_t l = bot; l <= top; l++)
        if (gs_partition_root_holds_layer(p, l))
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
    uint64_t c = 0;
    int64_t bot, top;
    for (gs_partition_chunk_span(p, v, c, &bot, &top); c + 1 < v && un->layer_begin > top; c++)
        gs_partition_chunk_span(p, v, c + 1, &bot, &top);
    return c;
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
