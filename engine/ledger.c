/* Memory and traffic ledgers: exact per-rank bytes by kind, and bytes sent per step by mesh
 * dimension and link class, each with its formula (the static checks behind `gridstep mem`).
 *
 * Conventions (stated once, used everywhere below):
 *  - States follow the seed's 16 B/param: bf16/fp16 working params 2, fp32 master 4, Adam m 4,
 *    Adam v 4, gradients 2 (fp32 training: params 4, no separate master, m 4, v 4, grads 4).
 *  - FSDP flat parameters are padded to a multiple of the shard group per unit: a rank's shard
 *    of a unit of u elements is ceil(u / N) elements.
 *  - Traffic is what a rank sends per step, counted as nccl-tests counts bus bytes for ring
 *    collectives: all-gather and reduce-scatter of a unit send (N-1) x shard bytes, all-reduce
 *    sends 2 (N-1) x shard bytes.
 *  - Activations follow Korthikanti et al. 2022 op by op (Table 2 for GPT-style blocks), generalized
 *    to GQA and SwiGLU; see layer_activation_terms(). */
#include "engine/ledger.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/units.h"

/* ---- checked arithmetic context: the first overflow is remembered with what was computed --- */

typedef struct calc {
    int overflow;
    const char *what; /* quantity that overflowed */
} calc;

static uint64_t mul(calc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (gs_mul_u64(a, b, &r) != 0) {
        if (!c->overflow) {
            c->overflow = 1;
            c->what = what;
        }
        return UINT64_MAX;
    }
    return r;
}

static uint64_t add(calc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (gs_add_u64(a, b, &r) != 0) {
        if (!c->overflow) {
            c->overflow = 1;
            c->what = what;
        }
        return UINT64_MAX;
    }
    return r;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- names ---------------------------------------------------------------------------------- */

const char *gs_mem_kind_name(gs_mem_kind k)
{
    static const char *names[GS_MEM_KIND_COUNT] = {
        "params", "master", "adam_m", "adam_v", "grads",
        "activations", "pipeline_inflight", "gather_buffers", "workspace"};
    return (unsigned)k < GS_MEM_KIND_COUNT ? names[k] : "?";
}

const char *gs_traffic_kind_name(gs_traffic_kind k)
{
    static const char *names[GS_TRAFFIC_KIND_COUNT] = {
        "dp_allgather", "dp_reduce_scatter", "dp_allreduce", "tp", "pp"};
    return (unsigned)k < GS_TRAFFIC_KIND_COUNT ? names[k] : "?";
}

/* ---- explain lines -------------------------------------------------------------------------- */

static void line_add(gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void line_add(gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
{
    if (r->nlines >= GS_LEDGER_MAX_LINES)
        return;
    gs_ledger_line *l = &r->lines[r->nlines++];
    snprintf(l->label, sizeof l->label, "%s", label);
    l->bytes = bytes;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->formula, sizeof l->formula, fmt, ap);
    va_end(ap);
}

static void note_add(gs_ledger *l, const char *label, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void note_add(gs_ledger *l, const char *label, uint64_t bytes, const char *fmt, ...)
{
    if (l->nnotes >= sizeof l->notes / sizeof l->notes[0])
        return;
    gs_ledger_line *n = &l->notes[l->nnotes++];
    snprintf(n->label, sizeof n->label, "%s", label);
    n->bytes = bytes;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->formula, sizeof n->formula, fmt, ap);
    va_end(ap);
}

/* ---- parameters of one rank: its stage and TP slice, as FSDP units ---------------------------- */

/* A module of the model tree, sized for one TP rank (parameters). */
typedef struct unit_list {
    uint64_t *params; /* per FSDP unit, this rank's TP slice (unsharded), elements */
    size_t count;
    size_t cap;
} unit_list;

static gs_status units_push(unit_list *u, uint64_t p)
{
    if (p == 0)
        return GS_OK;
    if (u->count == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 64;
        uint64_t *n = realloc(u->params, cap * sizeof *n);
        if (!n)
            return GS_ERR_NOMEM;
        u->params = n;
        u->cap = cap;
    }
    u->params[u->count++] = p;
    return GS_OK;
}

/* Per-rank (TP slice) sizes of the pieces of one block. Linears split Megatron-style: q, k, v, and
 * MLP up/gate column-parallel (their biases split too), o and down row-parallel (biases
 * replicated). KV heads fewer than tp are replicated: ceil(kv/tp) heads per rank. */
typedef struct block_slice {
    uint64_t linear[8]; /* q k v o (attn), then up gate down / fc1 fc2 (mlp) */
    size_t nattn, nmlp;
    uint64_t norm1, norm2;
    uint64_t total;
} block_slice;

static void block_slice_init(const gs_model *m, uint64_t tp, calc *c, block_slice *b)
{
    memset(b, 0, sizeof *b);
    uint64_t h = m->hidden, hd = m->head_dim, qh = m->heads / tp, kvh = ceil_div(m->kv_heads, tp);
    uint64_t f = m->ffn / tp, bias = m->bias ? 1 : 0;
    b->linear[0] = add(c, mul(c, h, mul(c, qh, hd, "q"), "q"), bias * qh * hd, "q");
    b->linear[1] = add(c, mul(c, h, mul(c, kvh, hd, "k"), "k"), bias * kvh * hd, "k");
    b->linear[2] = b->linear[1];
    b->linear[3] = add(c, mul(c, mul(c, qh, hd, "o"), h, "o"), bias * h, "o");
    b->nattn = 4;
    if (m->mlp == GS_MLP_SWIGLU) {
        b->linear[4] = mul(c, h, f, "mlp");
        b->linear[5] = b->linear[4];
        b->linear[6] = b->linear[4];
        b->nmlp = 3;
    } else {
        b->linear[4] = add(c, mul(c, h, f, "fc1"), bias * f, "fc1");
        b->linear[5] = add(c, mul(c, f, h, "fc2"), bias * h, "fc2");
        b->nmlp = 2;
    }
    uint64_t normp = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * h : h;
    b->norm1 = normp;
    b->norm2 = normp;
    b->total = b->norm1 + b->norm2;
    for (size_t i = 0; i < b->nattn + b->nmlp; i++)
        b->total = add(c, b->total, b->linear[i], "block params");
}

/* The stage's FSDP units for the wrap policy, in forward order. Root params (those in no wrapped
 * child: embedding and head under per-layer wrap) form the root unit, which FSDP always has.
 * min_params follows PyTorch's size_based_auto_wrap_policy bottom-up: a module is wrapped when
 * the parameters not already in wrapped descendants reach min_params. */
static gs_status stage_units(const gs_scenario *s, uint64_t tp, uint64_t stage, uint64_t pp,
                             uint64_t layers_here, calc *c, unit_list *out, uint64_t *total)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    gs_status rc = GS_OK;
    int first = stage == 0, last = stage + 1 == pp;
    uint64_t emb = 0, head = 0;
    uint64_t layer_total = 0;
    block_slice blk;
    memset(&blk, 0, sizeof blk);

    if (m->nominal_params) {
        layer_total = ceil_div(gs_model_layer_params(m), tp);
        if (first)
            emb = ceil_div(gs_model_embedding_params(m), tp);
    } else {
        block_slice_init(m, tp, c, &blk);
        layer_total = blk.total;
        uint64_t hid = m->hidden;
        uint64_t vocab_slice = mul(c, ceil_div(m->vocab, tp), hid, "embedding");
        if (first) {
            emb = vocab_slice;
            if (m->pos == GS_POS_LEARNED)
                emb = add(c, emb, mul(c, m->seq, hid, "position embedding"), "embedding");
        }
        if (last) {
            uint64_t fnorm = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * hid : hid;
            /* Tied embeddings: the head reuses the embedding on a single stage; with pp > 1 the
             * last stage keeps its own copy (Megatron), synchronized by an all-reduce. */
            uint64_t lm = (m->tied_embeddings && pp == 1) ? 0 : vocab_slice;
            head = add(c, fnorm, lm, "head");
        }
    }
    uint64_t stage_total = add(c, add(c, emb, head, "stage params"),
                               mul(c, layer_total, layers_here, "stage params"), "stage params");
    *total = stage_total;
    if (c->overflow)
        return GS_OK;

    switch (st->wrap) {
    case GS_WRAP_MODEL:
        rc = units_push(out, stage_total);
        break;
    case GS_WRAP_LAYER:
        for (uint64_t i = 0; i < layers_here && rc == GS_OK; i++)
            rc = units_push(out, layer_total);
        if (rc == GS_OK)
            rc = units_push(out, emb + head); /* root unit */
        break;
    case GS_WRAP_MIN_PARAMS: {
        uint64_t min = st->wrap_min_params ? st->wrap_min_params : 1;
        uint64_t root = 0;
        if (first && emb >= min)
            rc = units_push(out, emb);
        else
            root += emb;
        uint64_t unwrapped_layers = 0; /* params left for the ModuleList of layers */
        for (uint64_t i = 0; i < layers_here && rc == GS_OK; i++) {
            uint64_t left = 0; /* params of this layer not in a wrapped descendant */
            if (m->nominal_params) {
                left = layer_total;
            } else {
                uint64_t attn_left = 0, mlp_left = 0;
                for (size_t k = 0; k < blk.nattn && rc == GS_OK; k++) {
                    if (blk.linear[k] >= min)
                        rc = units_push(out, blk.linear[k]);
                    else
                        attn_left += blk.linear[k];
                }
                if (attn_left >= min && rc == GS_OK)
                    rc = units_push(out, attn_left), attn_left = 0;
                for (size_t k = blk.nattn; k < blk.nattn + blk.nmlp && rc == GS_OK; k++) {
                    if (blk.linear[k] >= min)
                        rc = units_push(out, blk.linear[k]);
                    else
                        mlp_left += blk.linear[k];
                }
                if (mlp_left >= min && rc == GS_OK)
                    rc = units_push(out, mlp_left), mlp_left = 0;
                left = attn_left + mlp_left + blk.norm1 + blk.norm2;
            }
            if (left >= min && rc == GS_OK)
                rc = units_push(out, left);
            else
                unwrapped_layers += left;
        }
        if (rc != GS_OK)
            break;
        if (unwrapped_layers >= min)
            rc = units_push(out, unwrapped_layers);
        else
            root += unwrapped_layers;
        if (rc != GS_OK)
            break;
        if (last && head >= min)
            rc = units_push(out, head);
        else
            root += head;
        if (rc == GS_OK)
            rc = units_push(out, root);
        break;
    }
    }
    return rc;
}

/* ---- activations ------------------------------------------------------------------------------ */

typedef struct act_terms {
    uint64_t replicated; /* bytes held whole on every TP rank unless sequence parallel */
    uint64_t split;      /* bytes already divided by tp (per rank) */
    uint64_t scores;     /* s x s attention terms per rank (softmax, its dropout), bytes */
    uint64_t lse;        /* flash attention: fp32 logsumexp per rank, bytes */
    uint64_t input;      /* the layer input (kept under full recompute), bytes per rank */
} act_terms;

/* One block, one micro-batch of b sequences, one TP rank; see the file comment.
 * GPT (dropout, GELU, LayerNorm, MHA, ffn = 4h) reduces to Korthikanti's
 * s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes. */
static void layer_activation_terms(const gs_model *m, const gs_strategy *st, uint64_t b,
                                   uint64_t t, calc *c, act_terms *a)
{
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2; /* bytes per activation element */
    uint64_t sb = mul(c, m->seq, b, "tokens per micro-batch");
    uint64_t sbh = mul(c, sb, m->hidden, "activation");
    uint64_t heads = m->heads / t, kvh = ceil_div(m->kv_heads, t), hd = m->head_dim;
    uint64_t f = m->ffn / t;
    uint64_t mask = m->dropout ? 1 : 0;
    memset(a, 0, sizeof *a);

    /* Whole on each TP rank: the two norm inputs, the QKV input, the MLP input (e elements
     * each), plus the two residual dropout masks (1 byte). */
    a->replicated = add(c, mul(c, 4 * e, sbh, "activation"), mul(c, 2 * mask, sbh, "activation"),
                        "activation");
    /* Split by tp: Q, K (saved for QK^T), V, out-proj input; MLP intermediates. */
    uint64_t q = mul(c, sb, heads * hd, "activation"), kv = mul(c, sb, kvh * hd, "activation");
    uint64_t split = mul(c, e, add(c, add(c, q, kv, "activation"), add(c, kv, q, "activation"),
                                   "activation"), "activation");
    uint64_t sbf = mul(c, sb, f, "activation");
    if (m->mlp == GS_MLP_SWIGLU)
        split = add(c, split, mul(c, 3 * e, sbf, "activation"), "activation"); /* gate, up, down in */
    else
        split = add(c, split, mul(c, 2 * e, sbf, "activation"), "activation"); /* GELU in, fc2 in */
    a->split = split;
    /* Scores: softmax output e*a*s^2*b, plus its dropout mask and dropout output. */
    uint64_t ss = mul(c, mul(c, m->seq, m->seq, "attention scores"), mul(c, b, heads, "attention scores"),
                      "attention scores");
    a->scores = mul(c, e + (m->dropout ? 1 + e : 0), ss, "attention scores");
    if (st->flash_attention) {
        a->scores = 0;
        a->lse = mul(c, 4, mul(c, sb, heads, "logsumexp"), "logsumexp");
    }
    a->input = mul(c, e, sbh, "layer input");
    if (st->sequence_parallel) {
        a->replicated = ceil_div(a->replicated, t);
        a->input = ceil_div(a->input, t);
    }
}

static uint64_t act_stored(const act_terms *a, gs_recompute r, calc *c)
{
    switch (r) {
    case GS_RECOMPUTE_FULL:
        return a->input;
    case GS_RECOMPUTE_SELECTIVE:
        return add(c, add(c, a->replicated, a->split, "activation"), a->lse, "activation");
    case GS_RECOMPUTE_NONE:
    default:
        return add(c, add(c, add(c, a->replicated, a->split, "activation"), a->scores, "activation"),
                   a->lse, "activation");
    }
}

uint64_t gs_ledger_layer_activation_bytes(const gs_model *m, const gs_strategy *st,
                                          uint64_t micro_seqs, uint64_t tp)
{
    calc c = {0, NULL};
    act_terms a;
    layer_activation_terms(m, st, micro_seqs, tp ? tp : 1, &c, &a);
    uint64_t r = act_stored(&a, st->recompute, &c);
    return c.overflow ? UINT64_MAX : r;
}

/* Micro-batches (interleaved: model chunks) whose activations a stage holds at its peak. */
static uint64_t inflight_units(const gs_strategy *st, uint64_t pp, uint64_t stage, uint64_t mb)
{
    if (pp <= 1)
        return 1;
    switch (st->pipeline) {
    case GS_PIPE_GPIPE:
        return mb;
    case GS_PIPE_INTERLEAVED: {
        /* Megatron's warm-up: (pp - stage - 1) * 2 + (v - 1) * pp chunks, plus the one in its
         * steady-state forward; capped by the m * v chunks that exist. */
        uint64_t v = st->virtual_stages ? st->virtual_stages : 1;
        uint64_t k = (pp - stage - 1) * 2 + (v - 1) * pp + 1;
        return k < mb * v ? k : mb * v;
    }
    case GS_PIPE_1F1B:
    default: {
        uint64_t k = pp - stage;
        return k < mb ? k : mb;
    }
    }
}

/* ---- one rank class (pipeline stage) ----------------------------------------------------------- */

static const char *prec_label(gs_precision p)
{
    return p == GS_PREC_FP32 ? "fp32" : gs_precision_name(p);
}

static gs_status build_stage(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage,
                             uint64_t mb, gs_ledger_rank *r, calc *c, gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = mesh->size[GS_DIM_TP], dp = mesh->size[GS_DIM_DP], pp = mesh->size[GS_DIM_PP];
    uint64_t coords[GS_DIM_COUNT] = {0};
    coords[GS_DIM_PP] = stage;
    uint64_t rank = gs_mesh_coords_rank(mesh, coords);
    unit_list units = {NULL, 0, 0};
    gs_status rc = GS_OK;
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES];
    const char *pl = prec_label(st->precision);

    memset(r, 0, sizeof *r);
    r->stage = stage;
    r->first_rank = rank;
    r->count = dp * tp;
    r->layers = gs_mesh_stage_layers(mesh, m->layers, stage);

    uint64_t P = 0;
    rc = stage_units(s, tp, stage, pp, r->layers, c, &units, &P);
    if (rc != GS_OK) {
        gs_error_set(err, rc, "out of memory building FSDP units");
        goto out;
    }
    r->params = P;

    /* Shard group: who shares this rank's states. */
    uint64_t N = 1, R = 1;
    int shard_grads = gs_sharding_shards_grads(st->sharding);
    int shard_opt = gs_sharding_shards_optimizer(st->sharding);
    if (st->sharding == GS_SHARD_HYBRID_SHARD) {
        N = gs_mesh_group_local_size(mesh, GS_DIM_DP, rank);
        R = dp / N;
    } else if (shard_opt) {
        N = dp;
    }
    r->dp_shard_group = N;
    r->dp_replica_group = st->sharding == GS_SHARD_HYBRID_SHARD ? R : 1;

    /* Shard of every unit, padded per unit. */
    uint64_t shard = 0, largest = 0;
    for (size_t i = 0; i < units.count; i++) {
        shard = add(c, shard, ceil_div(units.params[i], N), "shard");
        if (units.params[i] > largest)
            largest = units.params[i];
    }
    r->unit_params = largest;
    uint64_t wb = gs_precision_bytes(st->precision);
    int mixed = st->precision != GS_PREC_FP32;

    /* ---- states ---- */
    /* FSDP stores every sharding strategy but NO_SHARD as flat parameter shards between steps
     * (SHARD_GRAD_OP too: it reshards after backward); ZeRO-1/2 keep full parameters. */
    int stored_sharded = gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD && N > 1;
    uint64_t p_elems = stored_sharded ? shard : P;
    uint64_t g_elems = shard_grads ? shard : P;
    uint64_t o_elems = shard_opt ? shard : P;
    uint64_t mem_params = mul(c, p_elems, wb, "params");
    uint64_t mem_master = mixed ? mul(c, o_elems, 4, "master") : 0;
    uint64_t mem_m = mul(c, o_elems, 4, "adam m"), mem_v = mul(c, o_elems, 4, "adam v");
    /* Gradient accumulation with no_sync on sharded gradients: the stage's full gradient is
     * held until the last micro-batch reduces it. */
    int sync_every = st->grad_sync == GS_GRAD_SYNC_EVERY || !gs_sharding_allows_no_sync(st->sharding);
    int hold_full_grads = shard_grads && !sync_every && mb > 1;
    if (hold_full_grads)
        g_elems = P;
    uint64_t mem_g = mul(c, g_elems, wb, "grads");
    r->state_bytes = add(c, add(c, add(c, mem_params, mem_master, "states"), add(c, mem_m, mem_v, "states"),
                                "states"), mem_g, "states");
    const char *pw = stored_sharded ? "shard" : "full";
    line_add(r, "params", mem_params, "%s %s: %" PRIu64 " elements x %" PRIu64 " B (P=%" PRIu64
             " on stage %" PRIu64 ", tp slice 1/%" PRIu64 "%s)", pl, pw, p_elems, wb, P, stage, tp,
             stored_sharded ? ", padded shards of each FSDP unit over N" : "");
    if (mixed)
        line_add(r, "master", mem_master, "fp32 %s: %" PRIu64 " x 4 B", shard_opt ? "shard" : "full",
                 o_elems);
    line_add(r, "adam_m", mem_m, "fp32 %s: %" PRIu64 " x 4 B", shard_opt ? "shard" : "full", o_elems);
    line_add(r, "adam_v", mem_v, "fp32 %s: %" PRIu64 " x 4 B", shard_opt ? "shard" : "full", o_elems);
    line_add(r, "grads", mem_g, "%s %s: %" PRIu64 " x %" PRIu64 " B%s", pl,
             shard_grads && !hold_full_grads ? "shard" : "full", g_elems, wb,
             hold_full_grads ? " (no_sync: accumulated unsharded until the last micro-batch)" : "");
    if (shard_opt)
        line_add(r, "shard group", 0, "N = %" PRIu64 " ranks (%s)%s", N,
                 st->sharding == GS_SHARD_HYBRID_SHARD ? "the DP ranks on this node" : "the DP group",
                 st->sharding == GS_SHARD_HYBRID_SHARD ? ", replicated across R nodes" : "");

    if (st->offload) {
        /* FSDP CPU offload: the parameter shard, gradients and optimizer live on the host;
         * the GPU keeps only gathered units. */
        r->host_bytes = r->state_bytes;
        line_add(r, "host (offload)", r->host_bytes,
                 "params + master + m + v + grads moved to host memory; optimizer runs on the CPU");
        mem_params = mem_master = mem_m = mem_v = mem_g = 0;
    }
    r->mem[GS_MEM_PARAMS] = mem_params;
    r->mem[GS_MEM_MASTER] = mem_master;
    r->mem[GS_MEM_ADAM_M] = mem_m;
    r->mem[GS_MEM_ADAM_V] = mem_v;
    r->mem[GS_MEM_GRADS] = mem_g;

    /* ---- activations ---- */
    {
        act_terms a;
        uint64_t b = s->batch.micro_seqs;
        layer_activation_terms(m, st, b, tp, c, &a);
        uint64_t per_layer = act_stored(&a, st->recompute, c);
        uint64_t layers_act = mul(c, per_layer, r->layers, "activations");
        uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
        uint64_t sbh = mul(c, mul(c, m->seq, b, "activations"), m->hidden, "activations");
        uint64_t extra = 0;
        if (stage == 0 && m->dropout) {
            /* The embedding's backward needs only the token ids; its output is layer 0's input
             * (counted there). Only the embedding dropout mask is extra: 1 B x s*b*h. */
            uint64_t embo = sbh;
            if (st->sequence_parallel)
                embo = ceil_div(embo, tp);
            extra = add(c, extra, embo, "activations");
            line_add(r, "act: embedding", embo, "dropout mask 1 B x s*b*h = %" PRIu64 "*%" PRIu64 "*%" PRIu64 "%s",
                     m->seq, b, m->hidden, st->sequence_parallel ? " / tp" : "");
        }
        if (stage + 1 == pp) {
            uint64_t fn = mul(c, e, sbh, "final norm input");
            if (st->sequence_parallel)
                fn = ceil_div(fn, tp);
            /* Korthikanti's 4*s*b*V/t: fp32 logits of the vocab-parallel head kept for the loss. */
            uint64_t logits = mul(c, 4, mul(c, mul(c, m->seq, b, "logits"), ceil_div(m->vocab, tp), "logits"),
                                  "logits");
            extra = add(c, extra, add(c, fn, logits, "activations"), "activations");
            line_add(r, "act: head", fn + logits, "final-norm input %" PRIu64 " B + fp32 logits 4*s*b*V/t = 4*%"
                     PRIu64 "*%" PRIu64 "*%" PRIu64 "/%" PRIu64, e, m->seq, b, m->vocab, tp);
        }
        /* Working set of recompute: one layer's activations rematerialized during backward. */
        uint64_t remat = 0;
        if (st->recompute == GS_RECOMPUTE_FULL)
            remat = act_stored(&a, GS_RECOMPUTE_NONE, c);
        else if (st->recompute == GS_RECOMPUTE_SELECTIVE)
            remat = a.scores;
        uint64_t one_mb = add(c, add(c, layers_act, extra, "activations"), remat, "activations");
        r->mem[GS_MEM_ACTIVATIONS] = one_mb;
        const char *how = st->recompute == GS_RECOMPUTE_FULL ? "full recompute: layer input only, e*s*b*h"
                          : st->recompute == GS_RECOMPUTE_SELECTIVE
                              ? "selective recompute: attention scores dropped"
                              : "no recompute";
        line_add(r, "act: per layer", per_layer,
                 "%s%s; replicated %" PRIu64 " + split %" PRIu64 " + scores %" PRIu64 " B (Korthikanti 2022, b=%"
                 PRIu64 ", s=%" PRIu64 ", h=%" PRIu64 ", a=%" PRIu64 ", t=%" PRIu64 ")",
                 how, st->sequence_parallel ? ", sequence parallel" : "", a.replicated, a.split,
                 st->recompute == GS_RECOMPUTE_NONE ? a.scores : 0, b, m->seq, m->hidden, m->heads, tp);
        line_add(r, "activations", one_mb, "one micro-batch: %" PRIu64 " layers x %s%s%s", r->layers,
                 gs_fmt_bytes(per_layer, b1, sizeof b1), extra ? " + embedding/head terms" : "",
                 remat ? " + one layer rematerialized in backward" : "");
        if (remat)
            line_add(r, "act: recompute set", remat, "one layer's %s rematerialized during its backward",
                     st->recompute == GS_RECOMPUTE_FULL ? "full activations" : "attention scores");

        uint64_t k = inflight_units(st, pp, stage, mb);
        r->inflight_microbatches = k;
        uint64_t stash = 0;
        if (st->pipeline == GS_PIPE_INTERLEAVED && pp > 1) {
            uint64_t v = st->virtual_stages ? st->virtual_stages : 1;
            /* k chunks of layers/v layers each, minus the one micro-batch counted above. */
            uint64_t chunk = mul(c, per_layer, r->layers / v, "pipeline activations");
            stash = k * (r->layers / v) > r->layers ? mul(c, chunk, k, "pipeline activations") -
                                                           mul(c, per_layer, r->layers, "pipeline activations")
                                                     : 0;
            line_add(r, "pipeline_inflight", stash, "interleaved 1F1B, v=%" PRIu64 ": %" PRIu64
                     " chunks of %" PRIu64 " layers in flight on stage %" PRIu64 " (warm-up (p-s-1)*2+(v-1)*p+1), minus"
                     " the micro-batch above", v, k, r->layers / v, stage);
        } else if (k > 1) {
            stash = mul(c, layers_act, k - 1, "pipeline activations");
            line_add(r, "pipeline_inflight", stash, "%s: %" PRIu64 " micro-batches in flight on stage %" PRIu64
                     " (%s), %" PRIu64 " more x %s", gs_pipeline_name(st->pipeline), k, stage,
                     st->pipeline == GS_PIPE_GPIPE ? "all m stashed" : "min(p - stage, m)", k - 1,
                     gs_fmt_bytes(layers_act, b2, sizeof b2));
        }
        r->mem[GS_MEM_PIPE_INFLIGHT] = stash;
    }

    /* ---- FSDP gathered units ---- */
    if (stored_sharded) {
        uint64_t gather;
        if (st->sharding == GS_SHARD_GRAD_OP || !st->reshard_after_forward) {
            /* Units stay gathered from their forward to their backward: the whole stage. */
            gather = mul(c, P, wb, "gather buffers");
            line_add(r, "gather_buffers", gather, "%s: every unit stays gathered from its forward through "
                     "its backward, P x %" PRIu64 " B",
                     st->sharding == GS_SHARD_GRAD_OP ? "shard_grad_op" : "reshard_after_forward off", wb);
        } else {
            /* Prefetch keeps the next unit's gather in flight: nothing to prefetch with one unit. */
            uint64_t depth = (st->prefetch != GS_PREFETCH_NONE || st->forward_prefetch) && units.count > 1 ? 1 : 0;
            gather = mul(c, mul(c, largest, 1 + depth, "gather buffers"), wb, "gather buffers");
            line_add(r, "gather_buffers", gather, "largest unit %" PRIu64 " params x (1 + prefetch %" PRIu64
                     ") x %" PRIu64 " B", largest, depth, wb);
        }
        if (!hold_full_grads) {
            uint64_t ugrad = mul(c, largest, wb, "unsharded grad");
            gather = add(c, gather, ugrad, "gather buffers");
            line_add(r, "unsharded grad", ugrad, "largest unit's full gradient before its reduce-scatter: %"
                     PRIu64 " x %" PRIu64 " B", largest, wb);
        }
        r->mem[GS_MEM_GATHER] = gather;
    }

    /* ---- workspace (estimate) ---- */
    {
        uint64_t comms = 0;
        for (int d = 0; d < GS_DIM_COUNT; d++)
            comms += mesh->size[d] > 1;
        uint64_t ws = 32ull << 20; /* cuBLAS workspace: 32 MiB (Hopper default) */
        ws += comms * (128ull << 20);
        r->mem[GS_MEM_WORKSPACE] = ws;
        line_add(r, "workspace", ws, "estimate: cuBLAS 32 MiB + NCCL buffers 128 MiB x %" PRIu64
                 " communicators (dims of size > 1)", comms);
    }

    uint64_t peak = 0;
    for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
        peak = add(c, peak, r->mem[k], "peak");
    r->peak_bytes = peak;

    /* ---- traffic ---- */
    {
        uint64_t node = gs_mesh_rank_node(mesh, rank);
        int dp_net = gs_mesh_group_nodes(mesh, GS_DIM_DP, rank) > 1;
        int tp_net = gs_mesh_group_nodes(mesh, GS_DIM_TP, rank) > 1;
        uint64_t ag = 0, rs = 0, ar = 0, ar_net = 0;
        uint64_t gb = wb; /* gradients reduced in the working precision */
        /* One pass over the units: bytes a rank sends to all-gather / reduce-scatter once. */
        uint64_t pass = 0;
        for (size_t i = 0; i < units.count; i++)
            pass = add(c, pass, mul(c, N - 1, ceil_div(units.params[i], N), "traffic"), "traffic");
        uint64_t pass_ag = mul(c, pass, wb, "traffic"), pass_rs = mul(c, pass, gb, "traffic");
        uint64_t n_ag = 0, n_rs = 0, n_ar = 0;
        uint64_t n_sync = sync_every ? mb : 1; /* gradient reductions per step */
        switch (st->sharding) {
        case GS_SHARD_NO_SHARD:
            n_ar = dp > 1 ? n_sync : 0;
            break;
        case GS_SHARD_ZERO1:
        case GS_SHARD_ZERO2:
            n_rs = n_sync, n_ag = 1;
            break;
        case GS_SHARD_GRAD_OP:
            n_ag = mb, n_rs = n_sync;
            break;
        case GS_SHARD_FULL_SHARD:
        case GS_SHARD_ZERO3:
        case GS_SHARD_HYBRID_SHARD:
            n_ag = mul(c, mb, st->reshard_after_forward ? 2 : 1, "traffic");
            n_rs = n_sync;
            break;
        default:
            break;
        }
        if (N <= 1)
            n_ag = n_rs = 0;
        if (n_ar) {
            /* DDP: ring all-reduce of the whole gradient over the DP group, once per step
             * (no_sync during accumulation). */
            ar = mul(c, mul(c, mul(c, 2 * (dp - 1), ceil_div(P, dp), "traffic"), gb, "traffic"), n_ar, "traffic");
            line_add(r, "dp all-reduce", ar, "2 (N-1)/N x P x %" PRIu64 " B x %" PRIu64 ", N=%" PRIu64 " (%s)", gb,
                     n_ar, dp, n_ar == 1 ? "once per step: no_sync until the last micro-batch" : "every micro-batch");
        }
        ag = mul(c, pass_ag, n_ag, "traffic");
        rs = mul(c, pass_rs, n_rs, "traffic");
        if (n_ag)
            line_add(r, "dp all-gather", ag, "%" PRIu64 " passes x (N-1) x shard x %" PRIu64 " B = %" PRIu64
                     " x %s, N=%" PRIu64 " (%s)", n_ag, wb, n_ag, gs_fmt_bytes(pass_ag, b1, sizeof b1), N,
                     st->sharding == GS_SHARD_ZERO1 || st->sharding == GS_SHARD_ZERO2
                         ? "updated params once per step"
                     : st->reshard_after_forward ? "forward + backward re-gather, per micro-batch"
                                                 : "forward only, per micro-batch");
        if (n_rs)
            line_add(r, "dp reduce-scatter", rs, "%" PRIu64 " passes x (N-1) x shard x %" PRIu64 " B = %" PRIu64
                     " x %s (%s)", n_rs, gb, n_rs, gs_fmt_bytes(pass_rs, b1, sizeof b1),
                     n_rs == 1 ? "once per step" : "every micro-batch");
        if (st->sharding == GS_SHARD_HYBRID_SHARD && R > 1) {
            /* Cross-node all-reduce of each rank's gradient shard, after each reduce-scatter. */
            uint64_t sh = 0;
            for (size_t i = 0; i < units.count; i++)
                sh = add(c, sh, mul(c, 2 * (R - 1), ceil_div(ceil_div(units.params[i], N), R), "traffic"),
                         "traffic");
            ar_net = mul(c, mul(c, sh, gb, "traffic"), n_sync, "traffic");
            line_add(r, "hsdp all-reduce", ar_net, "2 (R-1)/R x shard x %" PRIu64 " B x %" PRIu64
                     " syncs, R=%" PRIu64 " nodes", gb, n_sync, R);
        }
        r->traffic[GS_TRAFFIC_DP_ALLGATHER] = ag;
        r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER] = rs;
        r->traffic[GS_TRAFFIC_DP_ALLREDUCE] = add(c, ar, ar_net, "traffic");
        uint64_t dp_bytes = add(c, add(c, ag, rs, "traffic"), ar, "traffic");
        r->traffic_link[dp_net && st->sharding != GS_SHARD_HYBRID_SHARD ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] +=
            dp_bytes;
        r->traffic_link[GS_LINKCLASS_NET] += ar_net;

        /* TP: per layer per micro-batch, 2 all-reduces of s*b*h in forward and 2 in backward
         * (sequence parallel: all-gather + reduce-scatter pairs, half the bytes each); full
         * recompute repeats the forward's 2 in backward. Plus the vocab-parallel embedding
         * (forward) and head (backward). */
        uint64_t tpb = 0;
        if (tp > 1) {
            uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
            uint64_t x = mul(c, mul(c, mul(c, m->seq, s->batch.micro_seqs, "traffic"), m->hidden, "traffic"), e,
                             "traffic");
            uint64_t ar1 = mul(c, 2 * (tp - 1), ceil_div(x, tp), "traffic"); /* one all-reduce of x */
            uint64_t per_layer = 4 + (st->recompute == GS_RECOMPUTE_FULL ? 2 : 0);
            uint64_t colls = mul(c, per_layer, r->layers, "traffic");
            if (stage == 0)
                colls += 1;
            if (stage + 1 == pp)
                colls += 1;
            tpb = mul(c, mul(c, colls, ar1, "traffic"), mb, "traffic");
            line_add(r, "tp", tpb, "%" PRIu64 " all-reduce equivalents x 2 (t-1)/t x s*b*h*%" PRIu64 " B x %" PRIu64
                     " micro-batches (%" PRIu64 " per layer%s%s, t=%" PRIu64 ")",
                     colls, e, mb, per_layer, st->recompute == GS_RECOMPUTE_FULL ? " incl. recomputed forward" : "",
                     st->sequence_parallel ? ", as AG+RS pairs" : "", tp);
        }
        r->traffic[GS_TRAFFIC_TP] = tpb;
        r->traffic_link[tp_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += tpb;

        /* PP: activations forward to stage+1, gradients backward to stage-1, per micro-batch
         * (interleaved: per chunk; the last chunk's forward and first chunk's backward stay). */
        uint64_t ppb = 0;
        if (pp > 1) {
            uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
            uint64_t x = mul(c, mul(c, mul(c, m->seq, s->batch.micro_seqs, "traffic"), m->hidden, "traffic"), e,
                             "traffic");
            if (st->sequence_parallel)
                x = ceil_div(x, tp);
            uint64_t v = st->pipeline == GS_PIPE_INTERLEAVED && st->virtual_stages ? st->virtual_stages : 1;
            uint64_t fwd = mul(c, mb, v, "traffic") - (stage + 1 == pp ? mb : 0);
            uint64_t bwd = mul(c, mb, v, "traffic") - (stage == 0 ? mb : 0);
            ppb = mul(c, add(c, fwd, bwd, "traffic"), x, "traffic");
            line_add(r, "pp", ppb, "(%" PRIu64 " activation + %" PRIu64 " gradient sends) x s*b*h*%" PRIu64 " B%s",
                     fwd, bwd, e, st->sequence_parallel ? " / tp" : "");
            uint64_t cn[GS_DIM_COUNT] = {0};
            cn[GS_DIM_PP] = stage + 1 < pp ? stage + 1 : stage - 1;
            int pp_net = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, cn)) != node;
            r->traffic_link[pp_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += ppb;
        }
        r->traffic[GS_TRAFFIC_PP] = ppb;
        r->traffic_bytes = add(c, add(c, add(c, dp_bytes, ar_net, "traffic"), tpb, "traffic"), ppb, "traffic");
    }
    (void)b2;
out:
    free(units.params);
    return rc;
}

/* ---- the ledger -------------------------------------------------------------------------------- */

static void seed_cross_checks(gs_ledger *l, const gs_scenario *s, const gs_mesh *mesh)
{
    uint64_t tp = mesh->size[GS_DIM_TP], dp = mesh->size[GS_DIM_DP], pp = mesh->size[GS_DIM_PP];
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES];
    if (pp <= 1 || !gs_sharding_shards_params(s->strategy.sharding))
        return;
    /* The seed's grid B hand figures divide by dp x tp and by tp only: show what they miss. */
    uint64_t wb = gs_precision_bytes(s->strategy.precision);
    double M = (double)l->params * (double)wb;
    double hand_state = (double)l->states_total_bytes / (double)(dp * tp);
    double exact_state = (double)l->states_total_bytes / (double)(dp * tp * pp);
    note_add(l, "hand check: states", (uint64_t)hand_state,
             "dividing the states by dp x tp = %" PRIu64 " gives %s per rank (the seed's \"1/32, about 35 GB\" for grid B); "
             "it leaves out the PP split: each rank holds 1/(tp x pp) = 1/%" PRIu64 " of the parameters and "
             "1/(dp x tp x pp) = 1/%" PRIu64 " of the states, %s",
             dp * tp, gs_fmt_bytes((uint64_t)hand_state, b1, sizeof b1), tp * pp, dp * tp * pp,
             gs_fmt_bytes((uint64_t)exact_state, b2, sizeof b2));
    double hand_traffic = 2.0 * (M / (double)tp) * (double)(dp - 1) / (double)dp;
    double exact_traffic = 2.0 * (M / (double)(tp * pp)) * (double)(dp - 1) / (double)dp;
    note_add(l, "hand check: traffic", (uint64_t)hand_traffic,
             "2 x (M/tp) x (dp-1)/dp = %s per pass (the seed's \"about 26 GB\") slices the model by tp only; "
             "with the PP split each rank's FSDP slice is M/(tp x pp) = %s, so one AG+RS pass moves %s "
             "(the 2x convention; FULL_SHARD's backward re-gather makes it 3x, and every micro-batch repeats it)",
             gs_fmt_bytes((uint64_t)hand_traffic, b3, sizeof b3),
             gs_fmt_bytes((uint64_t)(M / (double)(tp * pp)), b1, sizeof b1),
             gs_fmt_bytes((uint64_t)exact_traffic, b4, sizeof b4));
}

gs_status gs_ledger_create(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err)
{
    gs_status rc = GS_OK;
    calc c = {0, NULL};
    *out = NULL;
    gs_ledger *l = calloc(1, sizeof *l);
    if (!l)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory allocating the ledger");
    uint64_t pp = mesh->size[GS_DIM_PP];
    l->ranks = calloc(pp, sizeof *l->ranks);
    if (!l->ranks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory: %" PRIu64 " pipeline stages", pp);
        goto out;
    }
    l->nranks = pp;
    l->params = gs_model_params(&s->model);
    l->bytes_per_param = 16;
    l->states_total_bytes = mul(&c, l->params, l->bytes_per_param, "total state bytes");
    l->gpu_bytes = s->cluster.gpu.hbm_bytes;
    l->microbatches = s->batch.global_seqs / (s->batch.micro_seqs * mesh->size[GS_DIM_DP]);
    if (l->microbatches == 0)
        l->microbatches = 1;
    l->min_gpus = l->gpu_bytes ? ceil_div(l->states_total_bytes, l->gpu_bytes) : 0;

    for (uint64_t stage = 0; stage < pp; stage++) {
        gs_ledger_rank *r = &l->ranks[stage];
        rc = build_stage(s, mesh, stage, l->microbatches, r, &c, err);
        if (rc != GS_OK)
            goto out;
        if (c.overflow)
            break;
        if (r->state_bytes > l->per_rank_state_bytes)
            l->per_rank_state_bytes = r->state_bytes;
        if (r->peak_bytes > l->peak_bytes)
            l->peak_bytes = r->peak_bytes;
        if (r->traffic_bytes > l->traffic_bytes || stage == 0) {
            l->traffic_bytes = r->traffic_bytes;
            l->traffic_by_dim[GS_DIM_DP] = r->traffic[GS_TRAFFIC_DP_ALLGATHER] +
                                           r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER] +
                                           r->traffic[GS_TRAFFIC_DP_ALLREDUCE];
            l->traffic_by_dim[GS_DIM_TP] = r->traffic[GS_TRAFFIC_TP];
            l->traffic_by_dim[GS_DIM_PP] = r->traffic[GS_TRAFFIC_PP];
        }
    }
    if (c.overflow) {
        rc = gs_error_set(err, GS_ERR_OVERFLOW,
                          "%s: %s would overflow a 64-bit byte count (model %s, %" PRIu64 " ranks); "
                          "the scenario is beyond what any machine holds",
                          s->path, c.what ? c.what : "a size", s->model.name, mesh->world);
        goto out;
    }
    seed_cross_checks(l, s, mesh);
out:
    if (rc != GS_OK) {
        gs_ledger_destroy(l);
        return rc;
    }
    *out = l;
    return GS_OK;
}

void gs_ledger_destroy(gs_ledger *l)
{
    if (!l)
        return;
    free(l->ranks);
    free(l);
}

const gs_ledger_rank *gs_ledger_peak_rank(const gs_ledger *l)
{
    const gs_ledger_rank *best = NULL;
    for (size_t i = 0; i < l->nranks; i++)
        if (!best || l->ranks[i].peak_bytes > best->peak_bytes)
            best = &l->ranks[i];
    return best;
}
