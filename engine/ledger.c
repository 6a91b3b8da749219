/* Memory and traffic ledgers: exact per-rank bytes by kind, and bytes sent per step by mesh
 * dimension and link class, each with its formula (the static checks behind `gridstep mem`).
 *
 * Conventions (stated once, used everywhere below):
 *  - States follow the seed's 16 B/param: bf16/fp16 working params 2, fp32 master 4, Adam m 4,
 *    Adam v 4, gradients 2 (fp32 training: params 4, no separate master, m 4, v 4, grads 4);
 *    strategy.grad_dtype sets the gradients' bytes (fp32 under bf16: 18 B/param).
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

#include "engine/partition.h"
#include "engine/pipeline.h"
#include "engine/units.h"

/* ---- checked arithmetic context: the first overflow is remembered with what was computed --- */

typedef struct calc {
    int overflow;
    const char *what; /* quantity that overflowed */
    int explain;      /* 1: write the explain lines and the peak's description; 0: numbers only */
} calc;

static uint64_t mul(calc *c, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { /* as gs_mul_u64, inlined: the peak loop calls it per layer */
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
    if (__builtin_add_overflow(a, b, &r)) { /* as gs_add_u64, inlined */
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

static void line_add(const calc *c, gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends an explain line (nothing when c->explain is 0: the planner reads only the numbers). */
static void line_add(const calc *c, gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
{
    if (!c->explain || r->nlines >= GS_LEDGER_MAX_LINES)
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
    calc c = {0, NULL, 0};
    act_terms a;
    layer_activation_terms(m, st, micro_seqs, tp ? tp : 1, &c, &a);
    uint64_t r = act_stored(&a, st->recompute, &c);
    return c.overflow ? UINT64_MAX : r;
}

uint64_t gs_act_layer_stored(const gs_act_sizes *a, int64_t l)
{
    return gs_every_nth_block(a->every, (uint64_t)l) ? a->stored : a->stored_kept;
}

uint64_t gs_act_layer_remat(const gs_act_sizes *a, int64_t l)
{
    return gs_every_nth_block(a->every, (uint64_t)l) ? a->remat : 0;
}

uint64_t gs_act_stash(const gs_act_sizes *a, int64_t lo, int64_t hi)
{
    if (hi < lo)
        return 0;
    uint64_t n = (uint64_t)(hi - lo + 1), ck = gs_every_nth_blocks_in(a->every, lo, hi);
    return ck * a->stored + (n - ck) * a->stored_kept;
}

/* ---- the strategy's treatment of parameters and gradients --------------------------------------- */

void gs_shard_plan_init(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank, uint64_t microbatches,
                        gs_shard_plan *plan)
{
    const gs_strategy *st = &s->strategy;
    uint64_t dp = mesh->size[GS_DIM_DP];
    memset(plan, 0, sizeof *plan);
    plan->wb = gs_precision_bytes(st->precision);
    plan->gb = gs_grad_bytes(st);
    plan->mixed = st->precision != GS_PREC_FP32;
    plan->microbatches = microbatches ? microbatches : 1;
    plan->N = dp;
    plan->R = 1;
    if (st->sharding == GS_SHARD_HYBRID_SHARD) {
        plan->N = gs_mesh_group_local_size(mesh, GS_DIM_DP, rank);
        plan->R = dp / plan->N;
    }
    int fsdp = gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD;
    plan->shard_grads = gs_sharding_shards_grads(st->sharding) && plan->N > 1;
    plan->shard_opt = gs_sharding_shards_optimizer(st->sharding) && plan->N > 1;
    plan->stored_sharded = fsdp && plan->N > 1;
    plan->gather_root = plan->stored_sharded;
    int keep = st->sharding == GS_SHARD_GRAD_OP || !st->reshard_after_forward;
    plan->gather_all = plan->stored_sharded && keep;
    plan->gather_per_pass = plan->stored_sharded && !keep;
    plan->prefetch_bwd = st->prefetch == GS_PREFETCH_BACKWARD_PRE ? 1 : st->prefetch == GS_PREFETCH_BACKWARD_POST ? 2 : 0;
    plan->prefetch_fwd = st->forward_prefetch ? 1 : 0;
    plan->sync_every = st->grad_sync == GS_GRAD_SYNC_EVERY || !gs_sharding_allows_no_sync(st->sharding) ||
                       (st->grad_sync == GS_GRAD_SYNC_AUTO && plan->shard_grads) || plan->microbatches == 1;
    plan->hold_full_grads = plan->shard_grads && !plan->sync_every;
    plan->transient_grads = plan->shard_grads && plan->sync_every;
    plan->grad_allreduce = st->sharding == GS_SHARD_NO_SHARD;
    plan->bucketed = !fsdp;
    plan->ag_after_optimizer = !fsdp && plan->shard_opt;
    plan->offload = st->offload;
}

/* ---- activation tensor sizes -------------------------------------------------------------------- */

gs_status gs_ledger_act_sizes(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, gs_act_sizes *out,
                              gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = mesh->size[GS_DIM_TP], pp = mesh->size[GS_DIM_PP], b = s->batch.micro_seqs;
    calc c = {0, NULL, 0};
    act_terms a;
    memset(out, 0, sizeof *out);
    layer_activation_terms(m, st, b, tp, &c, &a);
    out->stored = out->stored_kept = act_stored(&a, st->recompute, &c);
    if (st->recompute == GS_RECOMPUTE_FULL)
        out->remat = act_stored(&a, GS_RECOMPUTE_NONE, &c);
    else if (st->recompute == GS_RECOMPUTE_SELECTIVE)
        out->remat = a.scores;
    if (st->recompute == GS_RECOMPUTE_FULL && st->recompute_every > 1) {
        out->every = st->recompute_every;
        out->stored_kept = act_stored(&a, GS_RECOMPUTE_NONE, &c);
    }
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t sbh = mul(&c, mul(&c, m->seq, b, "activations"), m->hidden, "activations");
    if (stage == 0 && m->dropout)
        out->emb_mask = st->sequence_parallel ? ceil_div(sbh, tp) : sbh;
    if (stage + 1 == pp) {
        uint64_t fn = mul(&c, e, sbh, "final norm input");
        if (st->sequence_parallel)
            fn = ceil_div(fn, tp);
        uint64_t logits = mul(&c, 4, mul(&c, mul(&c, m->seq, b, "logits"), ceil_div(m->vocab, tp), "logits"), "logits");
        out->head_act = add(&c, fn, logits, "head activations");
    }
    out->boundary = mul(&c, e, sbh, "pipeline boundary");
    if (st->sequence_parallel)
        out->boundary = ceil_div(out->boundary, tp);
    if (c.overflow)
        return gs_error_set(err, GS_ERR_OVERFLOW, "%s: %s bytes would overflow 64 bits", s->path, c.what);
    return GS_OK;
}

/* ---- memory moments ----------------------------------------------------------------------------- */

/* Bytes live on the device at one moment, by kind. */
typedef struct moment {
    uint64_t mem[GS_MEM_KIND_COUNT];
    uint64_t total;
    const char *what; /* the moment, formatted by moment_where once the peak is known; NULL: none yet */
    int64_t layer;    /* stage-local layer, -1 for none */
    uint32_t mb;
    uint64_t chunk;
} moment;

typedef struct stage_ctx {
    const gs_partition *p;
    const gs_shard_plan *plan;
    const gs_act_sizes *act;
    uint64_t resident[GS_MEM_KIND_COUNT]; /* params, master, m, v, grads, workspace */
    uint64_t stage, pp, v, layers_per_chunk;
    uint64_t nonroot_params;
    int last;
    int root_grad_live;  /* the root's transient gradient outlives the pass that allocated it
                            (interleaved chunks writing it before the root chunk reduces it) */
    moment best;
    calc *c;
    uint64_t fixed_bytes; /* resident params + master + m + v + workspace (valid when fixed_ok) */
    int fixed_ok;         /* 1: that sum does not overflow 64 bits */
} stage_ctx;

static uint64_t chunk_stash(const stage_ctx *x, uint64_t chunk)
{
    uint64_t b = gs_act_stash(x->act, (int64_t)(chunk * x->layers_per_chunk),
                              (int64_t)((chunk + 1) * x->layers_per_chunk) - 1);
    if (x->stage == 0 && chunk == 0)
        b += x->act->emb_mask;
    if (x->last && chunk + 1 == x->v)
        b += x->act->head_act;
    return b;
}

/* The bytes of one moment beyond the resident states: the current pass's activations, the other
 * passes' stashes, gathered parameters, transient gradients. */
typedef struct moment_bytes {
    uint64_t act, others, gather, tgrads;
} moment_bytes;

/* Offers the moment (what, at stage-local layer, micro-batch, chunk) as the peak. */
static void moment_offer(stage_ctx *x, const moment_bytes *mbytes, const char *what, int64_t layer, uint32_t mb,
                         uint64_t chunk)
{
    uint64_t act = mbytes->act, others = mbytes->others, gather = mbytes->gather;
    uint64_t grads = x->resident[GS_MEM_GRADS] + mbytes->tgrads, total;
    if (x->fixed_ok) {
        /* The same checked sum as below, the kinds that do not vary between moments added once
         * (a sum of non-negative terms overflows in any order or in none). */
        total = add(x->c, x->fixed_bytes, grads, "peak");
        total = add(x->c, total, act, "peak");
        total = add(x->c, total, others, "peak");
        total = add(x->c, total, gather, "peak");
    } else {
        total = 0;
        for (int k = 0; k < GS_MEM_KIND_COUNT; k++) {
            uint64_t v = k == GS_MEM_GRADS ? grads : k == GS_MEM_ACTIVATIONS ? act : k == GS_MEM_PIPE_INFLIGHT ? others
                         : k == GS_MEM_GATHER ? gather : x->resident[k];
            total = add(x->c, total, v, "peak");
        }
    }
    if (total <= x->best.total && x->best.what)
        return;
    for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
        x->best.mem[k] = x->resident[k];
    x->best.mem[GS_MEM_GRADS] = grads;
    x->best.mem[GS_MEM_ACTIVATIONS] = act;
    x->best.mem[GS_MEM_PIPE_INFLIGHT] = others;
    x->best.mem[GS_MEM_GATHER] = gather;
    x->best.total = total;
    x->best.what = what;
    x->best.layer = layer;
    x->best.mb = mb;
    x->best.chunk = chunk;
}

/* The passes whose memory moments were already offered, keyed by (chunk, stash of the other
 * passes in flight, root gradient live). It remembers exactly what a list of 64 entries written at
 * index (count % 64), count stopping at 64, holds: the first entry and entries 1..63 for good, each
 * later one in index 0 in turn (so a pass is skipped exactly where that list skipped it), with a
 * hash lookup instead of a scan. */
#define PASS_MEMO_SLOTS 128 /* > 2 x 63 entries: probes stay short */
typedef struct pass_key {
    uint64_t chunk, others;
    int root;
} pass_key;

typedef struct pass_memo {
    pass_key slot0;               /* index 0 of the list */
    pass_key tab[PASS_MEMO_SLOTS]; /* indices 1..63 */
    uint8_t used[PASS_MEMO_SLOTS];
    size_t n;                     /* entries written, at most 64 */
    pass_key hit;                 /* the last key found in tab (it stays there): checked first */
    int have_hit;
} pass_memo;

static size_t pass_hash(const pass_key *k)
{
    uint64_t h = k->chunk * 0x9e3779b97f4a7c15ULL ^ k->others * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)k->root;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return (size_t)h & (PASS_MEMO_SLOTS - 1);
}

static int pass_key_eq(const pass_key *a, const pass_key *b)
{
    return a->chunk == b->chunk && a->others == b->others && a->root == b->root;
}

static int pass_memo_has(pass_memo *m, const pass_key *k)
{
    if ((m->have_hit && pass_key_eq(&m->hit, k)) || (m->n > 0 && pass_key_eq(&m->slot0, k)))
        return 1;
    if (m->n <= 1)
        return 0;
    for (size_t i = pass_hash(k);; i = (i + 1) & (PASS_MEMO_SLOTS - 1)) {
        if (!m->used[i])
            return 0;
        if (pass_key_eq(&m->tab[i], k)) {
            m->hit = *k;
            m->have_hit = 1;
            return 1;
        }
    }
}

static void pass_memo_add(pass_memo *m, const pass_key *k)
{
    if (m->n == 0 || m->n == 64) {
        m->slot0 = *k;
    } else {
        size_t i = pass_hash(k);
        while (m->used[i])
            i = (i + 1) & (PASS_MEMO_SLOTS - 1);
        m->used[i] = 1;
        m->tab[i] = *k;
    }
    if (m->n < 64)
        m->n++;
}

/* The peak moment's description, e.g. "backward of local layer 3, micro-batch 0" (empty when
 * no moment was offered). */
static void moment_where(const stage_ctx *x, char *out, size_t len)
{
    const moment *mo = &x->best;
    if (!mo->what) {
        if (len)
            out[0] = '\0';
    } else if (mo->layer >= 0) {
        snprintf(out, len, "%s of local layer %" PRId64 ", micro-batch %u%s", mo->what, mo->layer, mo->mb,
                 x->v > 1 ? (mo->chunk ? ", later chunk" : ", chunk 0") : "");
    } else {
        snprintf(out, len, "%s, micro-batch %u", mo->what, mo->mb);
    }
}

/* The moments of one backward pass of (mb, chunk), given the stash of the other passes in flight.
 * Order of a backward pass (the schedule builders emit the same): head backward; per layer from
 * the top: gathers (with backward_pre: the next layer's too), recompute, backward compute (the
 * first event allocates the units' gradients and the outgoing pipeline gradient, the last frees
 * the layer's stash, its rematerialized activations, the incoming pipeline gradient and, under
 * FULL_SHARD, the gathered units); backward_post gathers the next layer now; reduce-scatters;
 * embedding backward. */
static void backward_moments(stage_ctx *x, uint32_t mb, uint64_t chunk, uint64_t others)
{
    const gs_partition *p = x->p;
    const gs_shard_plan *pl = x->plan;
    uint64_t wb = pl->wb, gb = pl->gb;
    int has_head = x->last && chunk + 1 == x->v;
    int has_emb = x->stage == 0 && chunk == 0;
    int has_next = !has_head, has_prev = !has_emb;
    uint64_t root = gs_partition_root(p);
    int root_writes = gs_partition_root_written_by(p, x->stage, x->pp, x->v, chunk);
    uint64_t base_g = (pl->gather_root ? mul(x->c, root, wb, "gather") : 0) +
                      (pl->gather_all ? mul(x->c, x->nonroot_params, wb, "gather") : 0);
    uint64_t root_grad = pl->transient_grads && (root_writes || x->root_grad_live) ? mul(x->c, root, gb, "grads")
                                                                                   : 0;
    int64_t bot = (int64_t)(chunk * x->layers_per_chunk), top = bot + (int64_t)x->layers_per_chunk - 1;
    uint64_t xb = x->act->boundary;
    if (has_head) {
        uint64_t g = base_g + (pl->gather_per_pass && pl->prefetch_bwd == 1 && top >= bot
                                   ? mul(x->c, gs_partition_covering(p, top), wb, "gather") : 0);
        moment_offer(x, &(moment_bytes){chunk_stash(x, chunk), others, g, root_grad}, "head backward", -1, mb, chunk);
    }
    for (int64_t l = top; l >= bot; l--) {
        uint64_t stash = gs_act_stash(x->act, bot, l) + (has_emb ? x->act->emb_mask : 0);
        uint64_t act = stash + gs_act_layer_remat(x->act, l) + (l == top && has_next ? xb : 0) +
                       (l == bot && has_prev ? xb : 0);
        uint64_t cov = gs_partition_covering(p, l);
        uint64_t g = base_g;
        if (pl->gather_per_pass)
            g += mul(x->c, cov + (pl->prefetch_bwd == 1 && l > bot ? gs_partition_prefetch(p, l, l - 1) : 0), wb,
                     "gather");
        uint64_t tg = root_grad + (pl->transient_grads ? mul(x->c, cov, gb, "grads") : 0);
        moment_offer(x, &(moment_bytes){act, others, g, tg}, "backward", l, mb, chunk);
        if (pl->gather_per_pass && pl->prefetch_bwd == 2 && l > bot) {
            uint64_t g2 = base_g + mul(x->c, gs_partition_covering(p, l - 1), wb, "gather");
            moment_offer(x, &(moment_bytes){stash - gs_act_layer_stored(x->act, l), others, g2, tg},
                         "backward_post prefetch after", l, mb, chunk);
        }
    }
    if (has_emb)
        moment_offer(x, &(moment_bytes){x->act->emb_mask, others, base_g, root_grad}, "embedding backward", -1, mb,
                     chunk);
}

/* Non-root units whose first layer lies in [lo, hi] (stage-local), parameters. */
static uint64_t units_beginning_in(const gs_partition *p, int64_t lo, int64_t hi)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < p->nunits; i++) {
        const gs_unit *u = &p->units[i];
        if (u->layer_begin != GS_PART_ROOT && u->layer_begin >= lo && u->layer_begin <= hi)
            sum += u->params;
    }
    return sum;
}

/* The moments of one forward pass of (mb, chunk). Order: receive the input (into the first
 * layer's stash) or embed; per layer: gathers (FULL_SHARD every pass, SHARD_GRAD_OP the first
 * time; forward_prefetch also the next layer's), the layer's compute (its first event allocates
 * the layer's stash and, on the top layer, the outgoing activation; its last frees per-pass
 * gathers); the head; the send. `seen` marks chunks that already ran a forward pass this step. */
static void forward_moments(stage_ctx *x, uint32_t mb, uint64_t chunk, uint64_t others, const uint8_t *seen)
{
    const gs_partition *p = x->p;
    const gs_shard_plan *pl = x->plan;
    uint64_t wb = pl->wb;
    int has_head = x->last && chunk + 1 == x->v;
    int has_emb = x->stage == 0 && chunk == 0;
    int has_next = !has_head;
    int64_t bot = (int64_t)(chunk * x->layers_per_chunk), top = bot + (int64_t)x->layers_per_chunk - 1;
    uint64_t root_g = pl->gather_root ? mul(x->c, gs_partition_root(p), wb, "gather") : 0;
    uint64_t root_grad = pl->transient_grads && x->root_grad_live ? mul(x->c, gs_partition_root(p), pl->gb, "grads") : 0;
    uint64_t seen_g = 0;
    if (pl->gather_all)
        for (uint64_t ch = 0; ch < x->v; ch++)
            if (seen[ch] && ch != chunk)
                seen_g += units_beginning_in(p, (int64_t)(ch * x->layers_per_chunk),
                                             (int64_t)((ch + 1) * x->layers_per_chunk) - 1);
    for (int64_t l = bot; l <= top; l++) {
        uint64_t act = gs_act_stash(x->act, bot, l) + (has_emb ? x->act->emb_mask : 0) +
                       (l == top && has_next ? x->act->boundary : 0);
        int64_t ahead = pl->prefetch_fwd && l < top ? l + 1 : l;
        uint64_t g = root_g;
        if (pl->gather_per_pass)
            g += mul(x->c, gs_partition_covering(p, l) + (ahead > l ? gs_partition_prefetch(p, l, ahead) : 0), wb,
                     "gather");
        if (pl->gather_all)
            g += mul(x->c, seen_g + (seen[chunk] ? units_beginning_in(p, bot, top) : units_beginning_in(p, bot, ahead)),
                     wb, "gather");
        moment_offer(x, &(moment_bytes){act, others, g, root_grad}, "forward", l, mb, chunk);
    }
    if (has_head) {
        uint64_t g = root_g + (pl->gather_all ? mul(x->c, seen_g + units_beginning_in(p, bot, top), wb, "gather") : 0);
        moment_offer(x, &(moment_bytes){chunk_stash(x, chunk), others, g, root_grad}, "head forward", -1, mb, chunk);
    }
}

/* ---- one rank class (pipeline stage) ----------------------------------------------------------- */

static const char *prec_label(gs_precision p)
{
    return p == GS_PREC_FP32 ? "fp32" : gs_precision_name(p);
}

/* What building one stage's ledger row works on: the scenario, the stage and its first rank, the
 * partition, shard plan and activation sizes, the unit sums, the resident states' bytes (after
 * CPU offload), and the row it fills. */
typedef struct stage_build {
    const gs_scenario *s;
    const gs_mesh *mesh;
    uint64_t stage, mb, rank, tp, dp, pp;
    gs_partition part;
    gs_shard_plan plan;
    gs_act_sizes act;
    uint64_t shard, largest, root, nonroot; /* elements: the padded shards' sum, the largest unit, root, rest */
    uint64_t mem_params, mem_master, mem_m, mem_v, mem_g, mem_hold, ws; /* bytes on the device */
    uint64_t dp_bytes, ar_net; /* traffic: DP collectives (not HSDP's cross-node part), HSDP's */
    gs_ledger_rank *r;
    calc *c;
} stage_build;

/* The states resident for the whole step (params, master, Adam m and v, gradients, the no_sync
 * gradient, the workspace) and their explain lines; CPU offload moves some to the host. */
static void stage_states(stage_build *b)
{
    const gs_strategy *st = &b->s->strategy;
    const gs_shard_plan *plan = &b->plan;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    const char *pl = prec_label(st->precision);
    uint64_t P = b->part.params, N = plan->N, wb = plan->wb, gb = plan->gb;
    uint64_t p_el = plan->stored_sharded ? b->shard : P;
    uint64_t g_el = plan->shard_grads ? b->shard : P;
    uint64_t o_el = plan->shard_opt ? b->shard : P;
    b->mem_params = mul(c, p_el, wb, "params");
    b->mem_master = plan->mixed ? mul(c, o_el, 4, "master") : 0;
    b->mem_m = mul(c, o_el, 4, "adam m"), b->mem_v = mul(c, o_el, 4, "adam v");
    b->mem_g = mul(c, g_el, gb, "grads");
    r->state_bytes = add(c, add(c, add(c, b->mem_params, b->mem_master, "states"), add(c, b->mem_m, b->mem_v, "states"),
                                "states"), b->mem_g, "states");
    line_add(c, r, "params", b->mem_params, "%s %s: %" PRIu64 " elements x %" PRIu64 " B (P=%" PRIu64
             " on stage %" PRIu64 ", tp slice 1/%" PRIu64 "%s)", pl, plan->stored_sharded ? "shard" : "full", p_el,
             wb, P, b->stage, b->tp, plan->stored_sharded ? ", padded shard of each FSDP unit over N" : "");
    if (plan->mixed)
        line_add(c, r, "master", b->mem_master, "fp32 %s: %" PRIu64 " x 4 B", plan->shard_opt ? "shard" : "full", o_el);
    line_add(c, r, "adam_m", b->mem_m, "fp32 %s: %" PRIu64 " x 4 B", plan->shard_opt ? "shard" : "full", o_el);
    line_add(c, r, "adam_v", b->mem_v, "fp32 %s: %" PRIu64 " x 4 B", plan->shard_opt ? "shard" : "full", o_el);
    line_add(c, r, "grads", b->mem_g, "%s %s: %" PRIu64 " x %" PRIu64 " B",
             st->grad_dtype >= 0 ? gs_precision_name((gs_precision)st->grad_dtype) : pl,
             plan->shard_grads ? "shard" : "full", g_el, gb);
    if (plan->shard_opt)
        line_add(c, r, "shard group", 0, "N = %" PRIu64 " ranks (%s)%s, %zu FSDP units%s", N,
                 st->sharding == GS_SHARD_HYBRID_SHARD ? "the DP ranks on this node" : "the DP group",
                 st->sharding == GS_SHARD_HYBRID_SHARD ? ", replicated across R nodes" : "", b->part.nunits,
                 b->part.has_root ? " (the last is the root: embedding, head, stray params)" : "");
    if (plan->offload) {
        uint64_t host = add(c, add(c, b->mem_master, add(c, b->mem_m, b->mem_v, "host"), "host"),
                            plan->stored_sharded ? add(c, b->mem_params, b->mem_g, "host") : 0, "host");
        r->host_bytes = host;
        line_add(c, r, "host (offload)", host, "%s master + m + v moved to host memory; the optimizer runs on the CPU",
                 plan->stored_sharded ? "param and grad shards," : "");
        b->mem_master = b->mem_m = b->mem_v = 0;
        if (plan->stored_sharded)
            b->mem_params = b->mem_g = 0;
    }
    b->mem_hold = 0;
    if (plan->hold_full_grads) {
        b->mem_hold = mul(c, P, gb, "grads");
        line_add(c, r, "grads (no_sync)", b->mem_hold, "full gradient accumulated unsharded until the last of %" PRIu64
                 " micro-batches: P x %" PRIu64 " B", b->mb, gb);
    }
    uint64_t comms = 0, ub;
    for (int d = 0; d < GS_DIM_COUNT; d++)
        comms += b->mesh->size[d] > 1;
    b->ws = gs_workspace_bytes(b->s, b->mesh, &ub);
    line_add(c, r, "workspace", b->ws, "estimate: cuBLAS 32 MiB + NCCL buffers 128 MiB x %" PRIu64
             " communicators (dims of size > 1)%s", comms,
             ub ? " + Transformer Engine userbuffers 10 x s*b*h (tp_comm_overlap)" : "");
}

/* The activation sizes' explain lines. */
static void stage_act_lines(const stage_build *b)
{
    const gs_model *m = &b->s->model;
    const gs_strategy *st = &b->s->strategy;
    const gs_act_sizes *act = &b->act;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    act_terms a;
    layer_activation_terms(m, st, b->s->batch.micro_seqs, b->tp, c, &a);
    const char *how = st->recompute == GS_RECOMPUTE_FULL && act->every > 1
                          ? "full recompute on every recompute_every-th block: layer input only"
                      : st->recompute == GS_RECOMPUTE_FULL ? "full recompute: layer input only"
                      : st->recompute == GS_RECOMPUTE_SELECTIVE ? "selective recompute: attention scores dropped"
                                                                : "no recompute";
    line_add(c, r, "act: per layer", act->stored,
             "%s%s%s; replicated %" PRIu64 " + split %" PRIu64 " + scores %" PRIu64 " + lse %" PRIu64
             " B (Korthikanti 2022; b=%" PRIu64 ", s=%" PRIu64 ", h=%" PRIu64 ", a=%" PRIu64 ", t=%" PRIu64 ")",
             how, st->sequence_parallel ? ", sequence parallel" : "", st->flash_attention ? ", flash attention" : "",
             a.replicated, a.split, a.scores, a.lse, b->s->batch.micro_seqs, m->seq, m->hidden, m->heads, b->tp);
    if (act->every > 1)
        line_add(c, r, "act: unchecked layer", act->stored_kept,
                 "a block recompute_every=%" PRIu64 " leaves unchecked keeps its full activations", act->every);
    if (act->remat)
        line_add(c, r, "act: recompute set", act->remat, "one layer's %s rematerialized during its backward",
                 st->recompute == GS_RECOMPUTE_FULL ? "full activations" : "attention scores");
    if (act->emb_mask)
        line_add(c, r, "act: embedding", act->emb_mask, "dropout mask 1 B x s*b*h%s",
                 st->sequence_parallel ? " / tp" : "");
    if (act->head_act)
        line_add(c, r, "act: head", act->head_act, "final-norm input e*s*b*h + fp32 logits 4*s*b*V/t = 4*%" PRIu64
                 "*%" PRIu64 "*%" PRIu64 "/%" PRIu64, m->seq, b->s->batch.micro_seqs, m->vocab, b->tp);
}

/* The moments' context of the stage: its resident bytes and what the passes' moments need. */
static void peak_ctx_init(const stage_build *b, uint64_t v, stage_ctx *x)
{
    memset(x, 0, sizeof *x);
    x->p = &b->part;
    x->plan = &b->plan;
    x->act = &b->act;
    x->c = b->c;
    x->stage = b->stage;
    x->pp = b->pp;
    x->v = v;
    x->layers_per_chunk = b->part.layers / v;
    x->nonroot_params = b->nonroot;
    x->last = b->stage + 1 == b->pp;
    x->resident[GS_MEM_PARAMS] = b->mem_params;
    x->resident[GS_MEM_MASTER] = b->mem_master;
    x->resident[GS_MEM_ADAM_M] = b->mem_m;
    x->resident[GS_MEM_ADAM_V] = b->mem_v;
    x->resident[GS_MEM_GRADS] = add(b->c, b->mem_g, b->mem_hold, "grads");
    x->resident[GS_MEM_WORKSPACE] = b->ws;
    calc fc = {0, NULL, 0};
    uint64_t f = 0;
    for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
        if (k != GS_MEM_GRADS && k != GS_MEM_ACTIVATIONS && k != GS_MEM_PIPE_INFLIGHT && k != GS_MEM_GATHER)
            f = add(&fc, f, x->resident[k], "peak");
    x->fixed_bytes = f;
    x->fixed_ok = !fc.overflow;
}

/* Every pass's memory moments in pipeline order (passes in flight differ only in their chunk; a
 * backward pass's moments depend only on its chunk and on the stash of the others, so identical
 * (chunk, others) pairs are skipped). *max_inflight: the most passes in flight. */
static gs_status peak_walk(const stage_build *b, const gs_pipe_order *order, stage_ctx *x, size_t *max_inflight,
                           gs_error *err)
{
    calc *c = b->c;
    uint64_t v = x->v, root_chunk = gs_partition_root_chunk(&b->part, b->stage, b->pp, v);
    size_t cur_inflight = 0;
    uint64_t *inflight = calloc(v, sizeof *inflight);
    uint8_t *seen = calloc(v, 1);
    pass_memo *memo = malloc(2 * sizeof *memo); /* [0] backward passes, [1] forward passes */
    gs_status rc = GS_OK;
    if (!inflight || !seen || !memo) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    pass_memo *bmemo = &memo[0], *fmemo = &memo[1];
    bmemo->n = fmemo->n = 0;
    bmemo->have_hit = fmemo->have_hit = 0;
    memset(bmemo->used, 0, sizeof bmemo->used);
    memset(fmemo->used, 0, sizeof fmemo->used);
    *max_inflight = 0;
    for (size_t i = 0; i < order->nops; i++) {
        const gs_pipe_op *op = &order->ops[i];
        uint64_t others = 0;
        for (uint64_t ch = 0; ch < v; ch++)
            others = add(c, others, mul(c, inflight[ch], chunk_stash(x, ch), "stash"), "stash");
        if (!op->backward) {
            pass_key key = {op->chunk, others, x->root_grad_live};
            if (!(seen[op->chunk] && pass_memo_has(fmemo, &key))) {
                forward_moments(x, op->mb, op->chunk, others, seen);
                pass_memo_add(fmemo, &key);
            }
            seen[op->chunk] = 1;
            inflight[op->chunk]++;
            if (++cur_inflight > *max_inflight)
                *max_inflight = cur_inflight;
            continue;
        }
        others -= chunk_stash(x, op->chunk);
        pass_key key = {op->chunk, others, x->root_grad_live};
        if (!pass_memo_has(bmemo, &key)) {
            backward_moments(x, op->mb, op->chunk, others);
            pass_memo_add(bmemo, &key);
        }
        if (gs_partition_root_written_by(&b->part, b->stage, b->pp, v, op->chunk))
            x->root_grad_live = 1;
        if (op->chunk == root_chunk)
            x->root_grad_live = 0;
        inflight[op->chunk]--;
        cur_inflight--;
    }
out:
    free(inflight);
    free(seen);
    free(memo);
    return rc;
}

/* The peak: every pass's memory moments in pipeline order, the largest with where it happens, and
 * the lines explaining it. */
static gs_status stage_peak(stage_build *b, gs_error *err)
{
    const gs_strategy *st = &b->s->strategy;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t v = st->pipeline == GS_PIPE_INTERLEAVED && b->pp > 1 && st->virtual_stages ? st->virtual_stages : 1;
    gs_pipe_order order = {NULL, 0, 0};
    gs_status rc = gs_pipe_order_build(st->pipeline, b->pp, b->stage, b->mb, v, &order, err);
    stage_ctx x;
    size_t max_inflight = 0;
    if (rc != GS_OK)
        goto out;
    peak_ctx_init(b, v, &x);
    if ((rc = peak_walk(b, &order, &x, &max_inflight, err)) != GS_OK)
        goto out;
    for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
        r->mem[k] = x.best.mem[k];
    r->peak_bytes = x.best.total;
    if (c->explain)
        moment_where(&x, r->peak_where, sizeof r->peak_where);
    r->inflight_microbatches = max_inflight;
    line_add(c, r, "activations", r->mem[GS_MEM_ACTIVATIONS], "at the peak: the current pass's stash, its "
             "rematerialized layer and pipeline gradients in flight");
    if (b->pp > 1)
        line_add(c, r, "pipeline_inflight", r->mem[GS_MEM_PIPE_INFLIGHT], "%s: up to %zu passes in flight on "
                 "stage %" PRIu64 " (warm-up %" PRIu64 "); the others' stashes at the peak",
                 v > 1 ? "interleaved 1F1B" : gs_pipeline_name(st->pipeline), max_inflight, b->stage, order.warmup);
    if (b->plan.stored_sharded)
        line_add(c, r, "gather_buffers", r->mem[GS_MEM_GATHER], "root unit %" PRIu64 " params gathered for the step%s"
                 " x %" PRIu64 " B", b->root,
                 b->plan.gather_all ? " + every layer unit kept gathered (shard_grad_op / no reshard)"
                 : b->plan.prefetch_bwd ? " + the layer's unit and the prefetched next" : " + the layer's unit",
                 b->plan.wb);
    line_add(c, r, "peak", r->peak_bytes, "at %s", r->peak_where);
out:
    gs_pipe_order_fini(&order);
    return rc;
}

/* Per pass over the stage's units, the bytes a rank sends (before x wb or gb): a layer unit's
 * gather, the reductions (DDP / ZeRO buckets; FSDP reduce-scatter and HSDP's cross-node
 * all-reduce), ZeRO's gather of the updated parameters. bucket_stages first (Megatron-Core): a
 * model chunk other than chunk 0 of stage 0 reduces its units' gradients, and gathers their
 * parameters, as one bucket padded to N. */
typedef struct dp_pass {
    uint64_t layer, red, inter, opt; /* elements */
    uint64_t chunk_buckets;          /* model chunks reduced as one bucket */
} dp_pass;

static gs_status dp_pass_elements(const stage_build *b, dp_pass *d, gs_error *err)
{
    const gs_strategy *st = &b->s->strategy;
    const gs_shard_plan *plan = &b->plan;
    const gs_partition *part = &b->part;
    calc *c = b->c;
    uint64_t N = plan->N, R = plan->R;
    uint64_t nchunks = st->pipeline == GS_PIPE_INTERLEAVED && b->pp > 1 && st->virtual_stages ? st->virtual_stages : 1;
    int chunk_buckets = plan->bucketed && st->bucket_stages == GS_BUCKET_STAGES_FIRST;
    uint64_t *chunk_params = NULL; /* per model chunk, parameters in its one bucket */
    memset(d, 0, sizeof *d);
    if (chunk_buckets && !(chunk_params = calloc((size_t)nchunks, sizeof *chunk_params)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < part->nunits; i++) {
        uint64_t u = part->units[i].params;
        if (!(part->has_root && i + 1 == part->nunits))
            d->layer = add(c, d->layer, mul(c, N - 1, ceil_div(u, N), "traffic"), "traffic");
        uint64_t ch = chunk_buckets ? gs_partition_unit_chunk(part, i, b->stage, b->pp, nchunks) : 0;
        if (chunk_buckets && gs_strategy_chunk_one_bucket(st, b->stage, ch)) {
            chunk_params[ch] = add(c, chunk_params[ch], u, "traffic");
            continue;
        }
        d->opt = add(c, d->opt, mul(c, N - 1, ceil_div(u, N), "traffic"), "traffic");
        if (plan->bucketed) {
            /* the buckets' sum in closed form (a 1e17-parameter unit has 4e9 buckets of
             * 25 MiB): gs_bucket_params gives `each` to the first u / each buckets and the
             * rest (if any) to one, each bucket sending ceil(its share / N) */
            uint64_t nb = gs_bucket_count(u, plan->gb, st->bucket_bytes);
            uint64_t each = ceil_div(u, nb), full = each ? u / each : 0, rest = u - full * each;
            uint64_t shares = add(c, mul(c, full, ceil_div(each, N), "traffic"), rest ? ceil_div(rest, N) : 0,
                                  "traffic");
            d->red = add(c, d->red, mul(c, (plan->grad_allreduce ? 2 : 1) * (N - 1), shares, "traffic"), "traffic");
        } else {
            d->red = add(c, d->red, mul(c, N - 1, ceil_div(u, N), "traffic"), "traffic");
            if (R > 1)
                d->inter = add(c, d->inter, mul(c, 2 * (R - 1), ceil_div(ceil_div(u, N), R), "traffic"), "traffic");
        }
    }
    for (uint64_t ch = 0; chunk_buckets && ch < nchunks; ch++)
        if (chunk_params[ch]) {
            uint64_t per = mul(c, N - 1, ceil_div(chunk_params[ch], N), "traffic");
            d->red = add(c, d->red, mul(c, plan->grad_allreduce ? 2 : 1, per, "traffic"), "traffic");
            d->opt = add(c, d->opt, per, "traffic");
            d->chunk_buckets++;
        }
    free(chunk_params);
    return GS_OK;
}

/* Data-parallel traffic per step: gathers, reduce-scatters or all-reduces, HSDP's cross-node
 * all-reduce; by link class. */
static gs_status stage_dp_traffic(stage_build *b, gs_error *err)
{
    const gs_strategy *st = &b->s->strategy;
    const gs_shard_plan *plan = &b->plan;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    char b1[GS_FMT_BYTES];
    uint64_t N = plan->N, R = plan->R, wb = plan->wb, gb = plan->gb, mb = b->mb;
    int dp_net = gs_mesh_group_nodes(b->mesh, GS_DIM_DP, b->rank) > 1;
    uint64_t n_sync = plan->sync_every ? mb : 1;
    uint64_t ag = 0, rs = 0, ar = 0, ar_net = 0;
    uint64_t root_pass = b->root ? mul(c, mul(c, N - 1, ceil_div(b->root, N), "traffic"), wb, "traffic") : 0;
    dp_pass d;
    gs_status rc = dp_pass_elements(b, &d, err);
    if (rc != GS_OK)
        return rc;
    uint64_t layer_pass = mul(c, d.layer, wb, "traffic"), opt_pass = mul(c, d.opt, wb, "traffic");
    uint64_t red_pass = mul(c, d.red, gb, "traffic"), inter_pass = mul(c, d.inter, gb, "traffic");
    if (N > 1) {
        if (plan->gather_root)
            ag = add(c, ag, root_pass, "traffic");
        if (plan->gather_per_pass)
            ag = add(c, ag, mul(c, layer_pass, 2 * mb, "traffic"), "traffic");
        if (plan->gather_all)
            ag = add(c, ag, layer_pass, "traffic");
        if (plan->ag_after_optimizer) /* opt_pass counts the root's with its chunk */
            ag = add(c, ag, opt_pass, "traffic");
        if (plan->grad_allreduce)
            ar = mul(c, red_pass, n_sync, "traffic");
        else
            rs = mul(c, red_pass, n_sync, "traffic");
    }
    /* HSDP: the cross-node all-reduce runs even with one DP rank per node (N = 1) */
    if (R > 1)
        ar_net = mul(c, inter_pass, n_sync, "traffic");
    if (ag)
        line_add(c, r, "dp all-gather", ag, "%s%s%s (N=%" PRIu64 ", (N-1) x padded shard x %" PRIu64 " B per unit%s)",
                 plan->gather_root ? "root once + " : "",
                 plan->gather_per_pass ? "every layer unit before each forward and backward pass (2 x m)"
                 : plan->gather_all ? "every layer unit once per step"
                                    : "updated params once per step",
                 "", N, wb, d.chunk_buckets ? "; bucket_stages first: per model chunk" : "");
    if (rs)
        line_add(c, r, "dp reduce-scatter", rs, "%" PRIu64 " x %s of gradients%s%s", n_sync,
                 (c->explain ? gs_fmt_bytes(red_pass, b1, sizeof b1) : ""),
                 n_sync == 1 ? " (once per step: no_sync until the last micro-batch)" : " (every micro-batch)",
                 d.chunk_buckets ? "; bucket_stages first: each model chunk after stage 0's first in one "
                                   "bucket" : "");
    if (ar)
        line_add(c, r, "dp all-reduce", ar, "%" PRIu64 " x %s: 2 (N-1)/N over %" PRIu64 " B buckets, N=%" PRIu64 "%s%s",
                 n_sync, (c->explain ? gs_fmt_bytes(red_pass, b1, sizeof b1) : ""), st->bucket_bytes, N,
                 n_sync == 1 ? " (no_sync until the last micro-batch)" : "",
                 d.chunk_buckets ? "; bucket_stages first: each model chunk after stage 0's first in one "
                                   "bucket" : "");
    if (ar_net)
        line_add(c, r, "hsdp all-reduce", ar_net, "2 (R-1)/R x gradient shard x %" PRIu64 " B x %" PRIu64
                 " syncs, R=%" PRIu64 " nodes", gb, n_sync, R);
    r->traffic[GS_TRAFFIC_DP_ALLGATHER] = ag;
    r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER] = rs;
    r->traffic[GS_TRAFFIC_DP_ALLREDUCE] = add(c, ar, ar_net, "traffic");
    b->dp_bytes = add(c, add(c, ag, rs, "traffic"), ar, "traffic");
    b->ar_net = ar_net;
    r->traffic_link[dp_net && st->sharding != GS_SHARD_HYBRID_SHARD ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] +=
        b->dp_bytes;
    r->traffic_link[GS_LINKCLASS_NET] += ar_net;
    return GS_OK;
}

/* TP traffic per step: per layer and pass, 2 all-reduces of s*b*h in forward and 2 in backward
 * (sequence parallel: all-gather + reduce-scatter pairs of the same bytes); full recompute repeats
 * the forward's 2 in backward; the vocab-parallel embedding adds 1 in forward, the head 1 in
 * backward; the cross-entropy's statistics; SP's norm-gradient all-reduce. */
static void stage_tp_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t tp = b->tp, stage = b->stage, pp = b->pp, mb = b->mb;
    int tp_net = gs_mesh_group_nodes(b->mesh, GS_DIM_TP, b->rank) > 1;
    uint64_t tpb = 0;
    if (tp > 1) {
        uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
        uint64_t xb = mul(c, mul(c, mul(c, m->seq, s->batch.micro_seqs, "traffic"), m->hidden, "traffic"), e,
                          "traffic");
        uint64_t ar1 = mul(c, 2 * (tp - 1), ceil_div(xb, tp), "traffic");
        /* 4 per block (2 forward, 2 backward); full recompute repeats the forward's 2; under
         * tp_comm_overlap the backward re-gathers the norms' sequence-parallel outputs for the
         * weight gradients (2 all-gathers: one more equivalent) */
        int regather = st->tp_comm_overlap && st->sequence_parallel;
        uint64_t per_layer = 4 + (regather ? 1 : 0);
        uint64_t ckpt = r->layers ? gs_strategy_checkpointed_in(st, 0, (int64_t)r->layers - 1) : 0;
        uint64_t colls = add(c, mul(c, per_layer, r->layers, "traffic"), mul(c, 2, ckpt, "traffic"), "traffic") +
                         (stage == 0) + (stage + 1 == pp);
        per_layer += st->recompute == GS_RECOMPUTE_FULL ? 2 : 0; /* a checkpointed block's */
        tpb = mul(c, mul(c, colls, ar1, "traffic"), mb, "traffic");
        /* the last stage's vocab-parallel cross-entropy: an all-gather of 12 B (3 fp32) per
         * token per micro-batch, (t-1)/t of t x that sent */
        uint64_t xent = stage + 1 == pp ? mul(c, mul(c, mul(c, m->seq, s->batch.micro_seqs, "traffic"),
                                                     12 * (tp - 1), "traffic"), mb, "traffic") : 0;
        tpb = add(c, tpb, xent, "traffic");
        /* sequence parallelism: one all-reduce of the stage's norm-weight gradients per step */
        uint64_t spn = st->sequence_parallel ? mul(c, 2 * (tp - 1),
                                                   ceil_div(mul(c, gs_sp_norm_params(s, r->layers, stage + 1 == pp),
                                                                gs_grad_bytes(st), "traffic"), tp), "traffic") : 0;
        tpb = add(c, tpb, spn, "traffic");
        line_add(c, r, "tp", tpb, "%" PRIu64 " all-reduce equivalents x 2 (t-1) x ceil(s*b*h*%" PRIu64 " B / t) x %"
                 PRIu64 " micro-batches (%" PRIu64 " per layer%s%s, t=%" PRIu64 ")%s%s", colls, e, mb, per_layer,
                 st->recompute == GS_RECOMPUTE_FULL
                     ? (st->recompute_every > 1 ? " on a checkpointed block, incl. its recomputed forward"
                                                : " incl. the recomputed forward")
                     : "",
                 st->sequence_parallel ? (regather ? ", as all-gather + reduce-scatter pairs, with the backward's "
                                                     "re-gathers of tp_comm_overlap"
                                                   : ", as all-gather + reduce-scatter pairs")
                                       : "",
                 tp,
                 xent ? " + the cross-entropy statistics all-gather, (t-1) x s*b*12 B per micro-batch" : "",
                 spn ? " + the norm-weight gradient all-reduce of sequence parallelism" : "");
    }
    r->traffic[GS_TRAFFIC_TP] = tpb;
    r->traffic_link[tp_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += tpb;
}

/* PP traffic per step: each forward pass of a chunk with a next stage sends its output
 * activation; each backward pass of a chunk with a previous stage sends its input gradient; tied
 * embeddings exchange the word embedding's gradient between the first and last stages. */
static void stage_pp_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_strategy *st = &s->strategy;
    const gs_mesh *mesh = b->mesh;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t stage = b->stage, pp = b->pp, mb = b->mb;
    uint64_t v = st->pipeline == GS_PIPE_INTERLEAVED && pp > 1 && st->virtual_stages ? st->virtual_stages : 1;
    uint64_t ppb = 0;
    if (pp > 1) {
        uint64_t fwd = mul(c, mb, v, "traffic") - (stage + 1 == pp ? mb : 0);
        uint64_t bwd = mul(c, mb, v, "traffic") - (stage == 0 ? mb : 0);
        ppb = mul(c, add(c, fwd, bwd, "traffic"), b->act.boundary, "traffic");
        line_add(c, r, "pp", ppb, "(%" PRIu64 " activation + %" PRIu64 " gradient sends) x %" PRIu64 " B", fwd, bwd,
                 b->act.boundary);
        uint64_t cn[GS_DIM_COUNT] = {0};
        cn[GS_DIM_PP] = stage + 1 < pp ? stage + 1 : stage - 1;
        int pp_net = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, cn)) != gs_mesh_rank_node(mesh, b->rank);
        r->traffic_link[pp_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += ppb;
        /* tied embeddings: the first and last stages exchange the word embedding's gradient
         * (engine/build.c's epilogue), over the link to the other end of the pipeline */
        if (s->model.tied_embeddings && (stage == 0 || stage + 1 == pp)) {
            uint64_t gbt = gs_grad_bytes(st);
            uint64_t eb = mul(c, b->part.word_params, gbt, "traffic");
            line_add(c, r, "pp", eb, "the tied word embedding's gradient, [vocab/tp, h] x %" PRIu64
                     " B, sent to the other end of the pipeline", gbt);
            ppb = add(c, ppb, eb, "traffic");
            cn[GS_DIM_PP] = stage == 0 ? pp - 1 : 0;
            int far_net = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, cn)) != gs_mesh_rank_node(mesh, b->rank);
            r->traffic_link[far_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += eb;
        }
    }
    r->traffic[GS_TRAFFIC_PP] = ppb;
    r->traffic_bytes = add(c, add(c, add(c, b->dp_bytes, b->ar_net, "traffic"), r->traffic[GS_TRAFFIC_TP], "traffic"),
                           ppb, "traffic");
}

static gs_status build_stage(stage_build *b, gs_error *err)
{
    const gs_mesh *mesh = b->mesh;
    gs_ledger_rank *r = b->r;
    calc *c = b->c;
    uint64_t coords[GS_DIM_COUNT] = {0};
    coords[GS_DIM_PP] = b->stage;
    b->rank = gs_mesh_coords_rank(mesh, coords);
    b->tp = mesh->size[GS_DIM_TP], b->dp = mesh->size[GS_DIM_DP], b->pp = mesh->size[GS_DIM_PP];
    if (c->explain) {
        memset(r, 0, sizeof *r);
    } else { /* the explain lines stay unwritten: only the numbers ahead of them are cleared */
        memset(r, 0, offsetof(gs_ledger_rank, lines));
        r->nlines = 0;
    }
    memset(&b->part, 0, sizeof b->part);
    r->stage = b->stage;
    r->first_rank = b->rank;
    r->count = b->dp * b->tp;
    gs_status rc = gs_partition_stage(b->s, mesh, b->stage, &b->part, err);
    if (rc != GS_OK)
        return rc;
    r->layers = b->part.layers;
    r->params = b->part.params;
    gs_shard_plan_init(b->s, mesh, b->rank, b->mb, &b->plan);
    r->dp_shard_group = b->plan.N;
    r->dp_replica_group = b->plan.R;
    b->shard = b->largest = b->nonroot = 0;
    b->root = gs_partition_root(&b->part);
    for (size_t i = 0; i < b->part.nunits; i++) {
        b->shard = add(c, b->shard, ceil_div(b->part.units[i].params, b->plan.N), "shard");
        if (b->part.units[i].params > b->largest)
            b->largest = b->part.units[i].params;
        if (!(b->part.has_root && i + 1 == b->part.nunits))
            b->nonroot += b->part.units[i].params;
    }
    r->unit_params = b->largest;
    stage_states(b);
    if ((rc = gs_ledger_act_sizes(b->s, mesh, b->stage, &b->act, err)) == GS_OK) {
        stage_act_lines(b);
        if ((rc = stage_peak(b, err)) == GS_OK && (rc = stage_dp_traffic(b, err)) == GS_OK) {
            stage_tp_traffic(b);
            stage_pp_traffic(b);
        }
    }
    gs_partition_fini(&b->part);
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

static gs_status ledger_create(const gs_scenario *s, const gs_mesh *mesh, int explain, gs_ledger **out, gs_error *err)
{
    gs_status rc = GS_OK;
    calc c = {0, NULL, explain};
    *out = NULL;
    gs_ledger *l = explain ? calloc(1, sizeof *l) : malloc(sizeof *l);
    if (l && !explain) { /* everything but the notes, which stay unwritten */
        memset(l, 0, offsetof(gs_ledger, notes));
        l->nnotes = 0;
    }
    if (!l)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory allocating the ledger");
    uint64_t pp = mesh->size[GS_DIM_PP];
    /* without the explain lines each stage clears only its numbers (build_stage) */
    l->ranks = explain ? calloc(pp, sizeof *l->ranks) : malloc(pp * sizeof *l->ranks);
    if (!l->ranks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory: %" PRIu64 " pipeline stages", pp);
        goto out;
    }
    l->nranks = pp;
    l->params = gs_model_params(&s->model);
    /* working params + fp32 master (mixed precision) + Adam m and v + gradients: 16 B in both
     * precisions with gradients in the training precision, 18 B with fp32 gradients under bf16 */
    {
        const gs_strategy *st = &s->strategy;
        l->bytes_per_param = gs_precision_bytes(st->precision) + (st->precision != GS_PREC_FP32 ? 4 : 0) + 8 +
                             gs_grad_bytes(st);
    }
    l->states_total_bytes = mul(&c, l->params, l->bytes_per_param, "total state bytes");
    l->gpu_bytes = s->cluster.gpu.hbm_bytes;
    l->microbatches = s->batch.global_seqs / (s->batch.micro_seqs * mesh->size[GS_DIM_DP]);
    if (l->microbatches == 0)
        l->microbatches = 1;
    l->min_gpus = l->gpu_bytes ? ceil_div(l->states_total_bytes, l->gpu_bytes) : 0;

    for (uint64_t stage = 0; stage < pp; stage++) {
        gs_ledger_rank *r = &l->ranks[stage];
        stage_build sb = {.s = s, .mesh = mesh, .stage = stage, .mb = l->microbatches, .r = r, .c = &c};
        rc = build_stage(&sb, err);
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
    if (explain)
        seed_cross_checks(l, s, mesh);
out:
    if (rc != GS_OK) {
        gs_ledger_destroy(l);
        return rc;
    }
    *out = l;
    return GS_OK;
}

gs_status gs_ledger_create(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err)
{
    return ledger_create(s, mesh, 1, out, err);
}

gs_status gs_ledger_create_numbers(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err)
{
    return ledger_create(s, mesh, 0, out, err);
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

uint64_t gs_sp_norm_params(const gs_scenario *s, uint64_t stage_layers, int last)
{
    const gs_model *m = &s->model;
    uint64_t per_norm = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * m->hidden : m->hidden;
    return stage_layers * 2 * per_norm + (last ? per_norm : 0);
}

uint64_t gs_workspace_bytes(const gs_scenario *s, const gs_mesh *mesh, uint64_t *ub_bytes)
{
    uint64_t comms = 0, ub = 0, tokens, x;
    for (int d = 0; d < GS_DIM_COUNT; d++)
        comms += mesh->size[d] > 1;
    const gs_strategy *st = &s->strategy;
    if (st->tp_comm_overlap && st->sequence_parallel && mesh->size[GS_DIM_TP] > 1 &&
        (gs_mul_u64(s->model.seq, s->batch.micro_seqs, &tokens) != 0 || gs_mul_u64(tokens, s->model.hidden, &x) != 0 ||
         gs_mul_u64(x, 10 * gs_precision_bytes(st->precision), &ub) != 0))
        ub = UINT64_MAX;
    if (ub_bytes)
        *ub_bytes = ub;
    uint64_t base = (32ull << 20) + comms * (128ull << 20);
    return ub > UINT64_MAX - base ? UINT64_MAX : base + ub;
}
