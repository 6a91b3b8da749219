/* The memory moments of a pipeline stage (engine/ledger_internal.h): every forward and backward
 * pass walked in the pipeline schedule's order, the bytes live at each moment of it by kind
 * (resident states, the current pass's activations, the other passes' stashes, gathered
 * parameters, transient gradients), and the largest of them, the stage's peak, with where it
 * happens. gs__ledger_stage_peak owns the stage's pipeline order and peak_walk its per-chunk
 * counters and pass memos, each freed before it returns. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger_internal.h"
#include "engine/pipeline.h"

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
    uint64_t stage, pp, v;
    uint64_t nonroot_params;
    int last;
    int root_grad_live;  /* the root's transient gradient outlives the pass that allocated it
                            (interleaved chunks writing it before the root chunk reduces it) */
    moment best;
    calc *c;
    uint64_t fixed_bytes; /* resident params + master + m + v + workspace (valid when fixed_ok) */
    int fixed_ok;         /* 1: that sum does not overflow 64 bits */
} stage_ctx;

/* ---- what a gather brings in ------------------------------------------------------------------ */

/* Experts held whole (an EDP group of one under a sharded strategy) are never gathered: the
 * builders use them in place (engine/build_dp.c), so the gather terms leave their units out. */
static int experts_whole(const stage_ctx *x)
{
    return x->plan->expert_split && x->plan->edp <= 1;
}

/* Parameters of the expert units held whole that cover layer `in` and not layer `out` (-1: none). */
static uint64_t whole_experts(const stage_ctx *x, int64_t in, int64_t out)
{
    uint64_t sum = 0;
    for (size_t i = 0; experts_whole(x) && i < x->p->nunits; i++) {
        const gs_unit *u = &x->p->units[i];
        if (u->expert && u->layer_begin <= in && in <= u->layer_end && !(u->layer_begin <= out && out <= u->layer_end))
            sum += u->params;
    }
    return sum;
}

/* The units covering layer l a gather brings in (gs_partition_covering less whole experts). */
static uint64_t gathered_covering(const stage_ctx *x, int64_t l)
{
    return gs_partition_covering(x->p, l) - whole_experts(x, l, -1);
}

/* Those covering next and not cur (gs_partition_prefetch less whole experts). */
static uint64_t gathered_prefetch(const stage_ctx *x, int64_t cur, int64_t next)
{
    return gs_partition_prefetch(x->p, cur, next) - whole_experts(x, next, cur);
}

static uint64_t chunk_stash(const stage_ctx *x, uint64_t chunk)
{
    int64_t bot, top;
    gs_partition_chunk_span(x->p, x->v, chunk, &bot, &top);
    uint64_t b = gs_act_stash(x->act, bot, top);
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
                      (pl->gather_all ? mul(x->c, x->nonroot_params, pl->gwb, "gather") : 0);
    uint64_t root_grad = pl->transient_grads && (root_writes || x->root_grad_live) ? mul(x->c, root, gb, "grads")
                                                                                   : 0;
    int64_t bot, top;
    gs_partition_chunk_span(p, x->v, chunk, &bot, &top);
    uint64_t xb = x->act->boundary;
    if (has_head) {
        uint64_t g = base_g + (pl->gather_per_pass && pl->prefetch_bwd == 1 && top >= bot
                                   ? mul(x->c, gathered_covering(x, top), pl->gwb, "gather") : 0);
        moment_offer(x, &(moment_bytes){chunk_stash(x, chunk), others, g, root_grad}, "head backward", -1, mb, chunk);
    }
    for (int64_t l = top; l >= bot; l--) {
        uint64_t stash = gs_act_stash(x->act, bot, l) + (has_emb ? x->act->emb_mask : 0);
        uint64_t remat = stash + gs_act_layer_remat(x->act, l) + (l == top && has_next ? xb : 0);
        uint64_t act = remat + (l == bot && has_prev ? xb : 0) + x->act->cp_bwd;
        uint64_t cov = gs_partition_covering(p, l);
        uint64_t g = base_g;
        if (pl->gather_per_pass)
            g += mul(x->c, gathered_covering(x, l) + (pl->prefetch_bwd == 1 && l > bot ? gathered_prefetch(x, l, l - 1) : 0),
                     pl->gwb, "gather");
        /* a recomputed attention runs the forward's CP exchange again, with the layer's
         * rematerialized activations allocated and its gradients not yet */
        if (x->act->cp_fwd && (gs_act_layer_recomputes(x->act, l) & GS_RC_CORE_ATTN))
            moment_offer(x, &(moment_bytes){remat + x->act->cp_fwd, others, g, root_grad}, "recompute", l, mb, chunk);
        uint64_t tg = root_grad + (pl->transient_grads ? mul(x->c, cov, gb, "grads") : 0);
        moment_offer(x, &(moment_bytes){act, others, g, tg}, "backward", l, mb, chunk);
        if (pl->gather_per_pass && pl->prefetch_bwd == 2 && l > bot) {
            uint64_t g2 = base_g + mul(x->c, gathered_covering(x, l - 1), pl->gwb, "gather");
            moment_offer(x, &(moment_bytes){stash - gs_act_layer_stored(x->act, l), others, g2, tg},
                         "backward_post prefetch after", l, mb, chunk);
        }
    }
    if (has_emb)
        moment_offer(x, &(moment_bytes){x->act->emb_mask, others, base_g, root_grad}, "embedding backward", -1, mb,
                     chunk);
}

/* Non-root units whose first layer lies in [lo, hi] (stage-local) that a gather brings in (not
 * whole experts), parameters. */
static uint64_t units_beginning_in(const stage_ctx *x, int64_t lo, int64_t hi)
{
    const gs_partition *p = x->p;
    uint64_t sum = 0;
    for (size_t i = 0; i < p->nunits; i++) {
        const gs_unit *u = &p->units[i];
        if (u->layer_begin != GS_PART_ROOT && u->layer_begin >= lo && u->layer_begin <= hi &&
            !(u->expert && experts_whole(x)))
            sum += u->params;
    }
    return sum;
}

/* Those whose first layer lies in model chunk ch, parameters. */
static uint64_t chunk_units(const stage_ctx *x, uint64_t ch)
{
    int64_t lo, hi;
    gs_partition_chunk_span(x->p, x->v, ch, &lo, &hi);
    return units_beginning_in(x, lo, hi);
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
    int64_t bot, top;
    gs_partition_chunk_span(p, x->v, chunk, &bot, &top);
    uint64_t root_g = pl->gather_root ? mul(x->c, gs_partition_root(p), wb, "gather") : 0;
    uint64_t root_grad = pl->transient_grads && x->root_grad_live ? mul(x->c, gs_partition_root(p), pl->gb, "grads") : 0;
    uint64_t seen_g = 0;
    if (pl->gather_all)
        for (uint64_t ch = 0; ch < x->v; ch++)
            if (seen[ch] && ch != chunk)
                seen_g += chunk_units(x, ch);
    for (int64_t l = bot; l <= top; l++) {
        uint64_t act = gs_act_stash(x->act, bot, l) + (has_emb ? x->act->emb_mask : 0) +
                       (l == top && has_next ? x->act->boundary : 0) + x->act->cp_fwd;
        int64_t ahead = pl->prefetch_fwd && l < top ? l + 1 : l;
        uint64_t g = root_g;
        if (pl->gather_per_pass)
            g += mul(x->c, gathered_covering(x, l) + (ahead > l ? gathered_prefetch(x, l, ahead) : 0), pl->gwb,
                     "gather");
        if (pl->gather_all)
            g += mul(x->c, seen_g + (seen[chunk] ? units_beginning_in(x, bot, top) : units_beginning_in(x, bot, ahead)),
                     pl->gwb, "gather");
        moment_offer(x, &(moment_bytes){act, others, g, root_grad}, "forward", l, mb, chunk);
    }
    if (has_head) {
        uint64_t g = root_g + (pl->gather_all ? mul(x->c, seen_g + units_beginning_in(x, bot, top), pl->gwb, "gather") : 0);
        moment_offer(x, &(moment_bytes){chunk_stash(x, chunk), others, g, root_grad}, "head forward", -1, mb, chunk);
    }
}

/* The moments of a combined step (strategy.ep_overlap, engine/build_pass.c gs__combined_pass): the
 * backward pass of (bmb, bc) and the forward pass of (fmb, fc) layer by layer together, the
 * forward's layer bot + i beside the backward's top - i, so the forward's stash (counted with the
 * passes in flight) grows while the backward's shrinks; then the layers one of them has left, the
 * forward's head, the backward's embedding. `others`: the stash of the passes in flight besides
 * these two. */
static void combined_moments(stage_ctx *x, uint32_t fmb, uint64_t fc, uint32_t bmb, uint64_t bc, uint64_t others)
{
    const gs_partition *p = x->p;
    const gs_shard_plan *pl = x->plan;
    int f_emb = x->stage == 0 && fc == 0, f_next = !(x->last && fc + 1 == x->v);
    int b_head = x->last && bc + 1 == x->v, b_emb = x->stage == 0 && bc == 0, b_next = !b_head, b_prev = !b_emb;
    uint64_t root = gs_partition_root(p), xb = x->act->boundary;
    uint64_t g0 = (pl->gather_root ? mul(x->c, root, pl->wb, "gather") : 0) +
                  (pl->gather_all ? mul(x->c, x->nonroot_params, pl->gwb, "gather") : 0);
    int root_writes = gs_partition_root_written_by(p, x->stage, x->pp, x->v, bc);
    uint64_t root_grad = pl->transient_grads && (root_writes || x->root_grad_live) ? mul(x->c, root, pl->gb, "grads")
                                                                                   : 0;
    int64_t fb, ft, bb, bt;
    gs_partition_chunk_span(p, x->v, fc, &fb, &ft);
    gs_partition_chunk_span(p, x->v, bc, &bb, &bt);
    int64_t nf = ft >= fb ? ft - fb + 1 : 0, nb = bt >= bb ? bt - bb + 1 : 0, n = nf > nb ? nf : nb;
    /* the forward's start came first: its received input (the first block's stash) or its
     * embedding's mask */
    uint64_t f_in = f_emb ? x->act->emb_mask : fb <= ft ? gs_act_layer_stored(x->act, fb) : 0;
    if (b_head)
        moment_offer(x, &(moment_bytes){chunk_stash(x, bc), add(x->c, others, f_in, "stash"), g0, root_grad},
                     "head backward", -1, bmb, bc);
    for (int64_t i = 0; i < n; i++) {
        int64_t lf = i < nf ? fb + i : ft, lb = bt - i;
        uint64_t fst = gs_act_stash(x->act, fb, lf) + (f_emb ? x->act->emb_mask : 0) +
                       (lf == ft && f_next ? xb : 0) + (i < nf ? x->act->cp_fwd : 0);
        /* past the backward's last block: its outgoing gradient awaits the send */
        uint64_t bact = (b_emb ? x->act->emb_mask : 0) + (i >= nb && b_prev ? xb : 0), tg = root_grad, g = g0;
        if (i < nb) {
            bact += gs_act_stash(x->act, bb, lb) + gs_act_layer_remat(x->act, lb) + (lb == bt && b_next ? xb : 0) +
                    (lb == bb && b_prev ? xb : 0) + x->act->cp_bwd;
            tg += pl->transient_grads ? mul(x->c, gs_partition_covering(p, lb), pl->gb, "grads") : 0;
            if (pl->gather_per_pass) /* with backward_pre's prefetch, as backward_moments counts */
                g += mul(x->c, gathered_covering(x, lb) + (pl->prefetch_bwd == 1 && lb > bb ? gathered_prefetch(x, lb, lb - 1) : 0),
                         pl->gwb, "gather");
        }
        if (pl->gather_per_pass && i < nf) /* with forward_prefetch's, as forward_moments counts */
            g += mul(x->c, gathered_covering(x, lf) + (pl->prefetch_fwd && lf < ft ? gathered_prefetch(x, lf, lf + 1) : 0),
                     pl->gwb, "gather");
        moment_offer(x, &(moment_bytes){bact, add(x->c, others, fst, "stash"), g, tg}, "combined forward and backward",
                     i < nb ? lb : lf, i < nb ? bmb : fmb, i < nb ? bc : fc);
    }
    if (!f_next) /* before the backward's end: its embedding's mask or its outgoing gradient */
        moment_offer(x, &(moment_bytes){chunk_stash(x, fc), add(x->c, others, (b_emb ? x->act->emb_mask : 0) +
                                                                             (b_prev && nb ? xb : 0), "stash"),
                                        g0, root_grad},
                     "head forward", -1, fmb, fc);
}

/* ---- the peak of a stage ------------------------------------------------------------------------ */

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
    x->nonroot_params = b->nonroot;
    for (size_t i = 0; experts_whole(x) && i < x->p->nunits; i++) /* never gathered */
        if (x->p->units[i].expert)
            x->nonroot_params -= x->p->units[i].params;
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
        const gs_pipe_op *op = &order->ops[i], *next = i + 1 < order->nops ? &order->ops[i + 1] : NULL;
        uint64_t others = 0;
        for (uint64_t ch = 0; ch < v; ch++)
            others = add(c, others, mul(c, inflight[ch], chunk_stash(x, ch), "stash"), "stash");
        if (b->s->strategy.ep_overlap && !op->backward && next && next->backward) {
            /* a combined step (every one offered: its moments depend on both passes) */
            combined_moments(x, op->mb, op->chunk, next->mb, next->chunk, others - chunk_stash(x, next->chunk));
            seen[op->chunk] = 1;
            if (cur_inflight + 1 > *max_inflight)
                *max_inflight = cur_inflight + 1;
            if (gs_partition_root_written_by(&b->part, b->stage, b->pp, v, next->chunk))
                x->root_grad_live = 1;
            if (next->chunk == root_chunk)
                x->root_grad_live = 0;
            inflight[op->chunk]++;
            inflight[next->chunk]--;
            i++;
            continue;
        }
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
gs_status gs__ledger_stage_peak(stage_build *b, gs_error *err)
{
    const gs_strategy *st = &b->s->strategy;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t v = gs_strategy_chunks(st, b->pp);
    gs_pipe_order order = {NULL, 0, 0};
    gs_status rc = gs_pipe_order_build(st->pipeline, b->pp, b->stage, b->mb, v, st->ep_overlap, &order, err);
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
    gs__ledger_line_add(c, r, "activations", r->mem[GS_MEM_ACTIVATIONS],
                        "at the peak: the current pass's stash, its rematerialized layer and pipeline gradients in "
                        "flight");
    if (b->pp > 1)
        gs__ledger_line_add(c, r, "pipeline_inflight", r->mem[GS_MEM_PIPE_INFLIGHT],
                            "%s: up to %zu passes in flight on stage %" PRIu64 " (warm-up %" PRIu64
                            "); the others' stashes at the peak",
                            v > 1 ? "interleaved 1F1B" : gs_pipeline_name(st->pipeline), max_inflight, b->stage,
                            order.warmup);
    if (b->plan.stored_sharded)
        gs__ledger_line_add(c, r, "gather_buffers", r->mem[GS_MEM_GATHER],
                            "root unit %" PRIu64 " params gathered for the step x %" PRIu64 " B%s x %" PRIu64 " B%s",
                            b->root, b->plan.wb,
                            b->plan.gather_all     ? " + every layer unit kept gathered (shard_grad_op / no reshard)"
                            : b->plan.prefetch_bwd ? " + the layer's unit and the prefetched next"
                                                   : " + the layer's unit",
                            b->plan.gwb, b->plan.gwb != b->plan.wb ? " (with their FP8 copies)" : "");
    gs__ledger_line_add(c, r, "peak", r->peak_bytes, "at %s", r->peak_where);
out:
    gs_pipe_order_fini(&order);
    return rc;
}
