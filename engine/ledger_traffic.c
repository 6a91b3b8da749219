/* The traffic ledger (engine/ledger_internal.h): the bytes a rank of a pipeline stage sends per
 * step, counted as nccl-tests counts bus bytes for ring collectives (all-gather and
 * reduce-scatter of a unit send (N-1) x shard bytes, all-reduce 2 (N-1) x shard bytes): the
 * data-parallel gathers and reductions, the TP collectives, the PP sends, each by link class.
 * It writes into the borrowed stage_build and its row; dp_pass_elements owns its per-chunk sums
 * for the call. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fp8_amax.h"
#include "engine/ledger_internal.h"
#include "engine/moe_route.h"
#include "engine/pipeline.h"
#include "engine/units.h"

/* The stage's blocks and what their recompute passes run again (full recompute's checkpointed
 * blocks run their whole forward; selective recompute's modules, engine/strategy.h, a part): MoE
 * blocks, those whose experts' exchanges (router, dispatch, expert TP, combine) run again (full,
 * moe), whose attention's TP pair does (full), whose shared experts' TP pair does (full, moe,
 * shared_experts); dense blocks whose attention's TP pair runs again (full), whose MLP's does
 * (full, mlp); and every block whose attention core does (full, core_attn: context
 * parallelism's exchange). */
typedef struct moe_count {
    uint64_t moe, moe_ckpt, moe_attn_ckpt, moe_shared_ckpt, dense_ckpt, dense_mlp_ckpt, core_ckpt;
    uint64_t op_ckpt; /* recompute op: blocks whose two sequence-parallel gathers run again */
} moe_count;

static void count_moe_blocks(const stage_build *b, moe_count *n)
{
    const gs_scenario *s = b->s;
    const gs_strategy *st = &s->strategy;
    uint64_t layers = b->r->layers, pp = b->pp;
    uint64_t v = gs_strategy_chunks(st, pp);
    memset(n, 0, sizeof *n);
    for (uint64_t l = 0; l < layers; l++) {
        int moe = gs_model_moe_block(&s->model, gs_pipe_global_layer(b->mesh, s->model.layers, v, b->stage, l));
        uint32_t mods = gs_act_layer_recomputes(&b->act, (int64_t)l);
        int full = mods == GS_RECOMPUTE_ALL_MODULES;
        if (mods == GS_RECOMPUTE_OP_MODULES) { /* a dense block: its gathers (the attention core saved) */
            n->op_ckpt += 1;
            continue;
        }
        n->moe += moe;
        n->core_ckpt += (mods & GS_RC_CORE_ATTN) != 0;
        if (moe) {
            n->moe_ckpt += (mods & GS_RC_MOE) != 0;
            n->moe_attn_ckpt += full;
            n->moe_shared_ckpt += (mods & (GS_RC_MOE | GS_RC_SHARED_EXPERTS)) != 0;
        } else {
            n->dense_ckpt += full;
            n->dense_mlp_ckpt += (mods & GS_RC_MLP) != 0;
        }
    }
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
    uint64_t nchunks = gs_strategy_chunks(st, b->pp);
    int chunk_buckets = plan->bucketed && st->bucket_stages == GS_BUCKET_STAGES_FIRST;
    uint64_t *chunk_params = NULL; /* per model chunk and kind (2 ch + expert), parameters in its one bucket */
    memset(d, 0, sizeof *d);
    if (chunk_buckets && !(chunk_params = calloc((size_t)nchunks * 2, sizeof *chunk_params)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < part->nunits; i++) {
        uint64_t u = part->units[i].params;
        /* a MoE block's routed experts under expert parallelism: over the EDP group */
        int ex = part->units[i].expert;
        N = gs_shard_ranks(plan, ex);
        if (!(part->has_root && i + 1 == part->nunits))
            d->layer = add(c, d->layer, mul(c, N - 1, ceil_div(u, N), "traffic"), "traffic");
        uint64_t ch = chunk_buckets ? gs_partition_unit_chunk(part, i, b->stage, b->pp, nchunks) : 0;
        if (chunk_buckets && gs_strategy_chunk_one_bucket(st, b->stage, ch)) {
            chunk_params[2 * ch + ex] = add(c, chunk_params[2 * ch + ex], u, "traffic");
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
    for (uint64_t k = 0; chunk_buckets && k < 2 * nchunks; k++)
        if (chunk_params[k]) {
            N = gs_shard_ranks(plan, (int)(k % 2));
            uint64_t per = mul(c, N - 1, ceil_div(chunk_params[k], N), "traffic");
            d->red = add(c, d->red, mul(c, plan->grad_allreduce ? 2 : 1, per, "traffic"), "traffic");
            d->opt = add(c, d->opt, per, "traffic");
            d->chunk_buckets += k % 2 == 0;
        }
    free(chunk_params);
    return GS_OK;
}

/* Data-parallel traffic per step: gathers, reduce-scatters or all-reduces, HSDP's cross-node
 * all-reduce; by link class. */
gs_status gs__ledger_stage_dp_traffic(stage_build *b, gs_error *err)
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
    /* layer units move gather_wb per element (FP8 parameters: 1 B); the distributed optimizer's
     * parameter all-gather likewise (Megatron-LM's --fp8-param-gather) */
    uint64_t layer_pass = mul(c, d.layer, plan->gather_wb, "traffic"), opt_pass = mul(c, d.opt, plan->gather_wb, "traffic");
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
        gs__ledger_line_add(c, r, "dp all-gather", ag,
                            "%s%s%s (N=%" PRIu64 ", (N-1) x padded shard x %" PRIu64 " B per unit%s)",
                            plan->gather_root ? "root once + " : "",
                            plan->gather_per_pass ? "every layer unit before each forward and backward pass (2 x m)"
                            : plan->gather_all    ? "every layer unit once per step"
                                                  : "updated params once per step",
                            plan->gather_wb != wb ? " (FP8 parameters; the root unit's in bf16)" : "", N,
                            plan->gather_wb, d.chunk_buckets ? "; bucket_stages first: per model chunk" : "");
    if (rs)
        gs__ledger_line_add(c, r, "dp reduce-scatter", rs, "%" PRIu64 " x %s of gradients%s%s", n_sync,
                            (c->explain ? gs_fmt_bytes(red_pass, b1, sizeof b1) : ""),
                            n_sync == 1 ? " (once per step: no_sync until the last micro-batch)"
                                        : " (every micro-batch)",
                            d.chunk_buckets ? "; bucket_stages first: each model chunk after stage 0's first in one "
                                              "bucket"
                                            : "");
    if (ar)
        gs__ledger_line_add(c, r, "dp all-reduce", ar,
                            "%" PRIu64 " x %s: 2 (N-1)/N over %" PRIu64 " B buckets, N=%" PRIu64 "%s%s", n_sync,
                            (c->explain ? gs_fmt_bytes(red_pass, b1, sizeof b1) : ""), st->bucket_bytes, N,
                            n_sync == 1 ? " (no_sync until the last micro-batch)" : "",
                            d.chunk_buckets ? "; bucket_stages first: each model chunk after stage 0's first in one "
                                              "bucket"
                                            : "");
    if (ar_net)
        gs__ledger_line_add(c, r, "hsdp all-reduce", ar_net, "2 (R-1)/R x gradient shard x %" PRIu64 " B x %" PRIu64
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
/* The multi-token prediction modules' TP bytes per step on the last stage (engine/build_mtp.c),
 * per module and micro-batch, with X = s*b*h*e, half(Y) = (t-1) ceil(Y/t) sent by an all-gather
 * or reduce-scatter of Y, ar(Y) = 2 (t-1) ceil(Y/t) by an all-reduce: sequence parallel, forward
 * the embedding's reduce-scatter, eh_proj's input gather (2X), its output gather and the head's
 * gather, backward their mirrors: 6 half(X) + 2 half(2X); otherwise the embedding's all-reduce
 * and eh_proj's output gather forward, the head's and eh_proj's input all-reduces backward:
 * ar(X) + half(X) + ar(X) + ar(2X) = 5 half(X) + 2 half(2X); and the loss statistics' gather,
 * (t-1) x s*b x 12 B. */
static uint64_t mtp_tp_bytes(stage_build *b, uint64_t X)
{
    const gs_scenario *s = b->s;
    calc *c = b->c;
    uint64_t t = b->tp, tokens = mul(c, s->model.seq / (b->mesh->cp ? b->mesh->cp : 1), s->batch.micro_seqs, "traffic");
    uint64_t half = mul(c, t - 1, ceil_div(X, t), "traffic"), half2 = mul(c, t - 1, ceil_div(mul(c, 2, X, "traffic"), t),
                                                                        "traffic");
    uint64_t one = s->strategy.sequence_parallel ? add(c, mul(c, 6, half, "traffic"), mul(c, 2, half2, "traffic"), "traffic")
                                                 : add(c, mul(c, 5, half, "traffic"), mul(c, 2, half2, "traffic"), "traffic");
    one = add(c, one, mul(c, tokens, 12 * (t - 1), "traffic"), "traffic");
    uint64_t total = mul(c, mul(c, one, s->model.mtp_layers, "traffic"), b->mb, "traffic");
    gs__ledger_line_add(c, b->r, "tp", total,
                        "%" PRIu64 " multi-token prediction modules: the embedding's reduction, eh_proj's input and "
                        "output gathers, the head's, each way, and the loss statistics, x %" PRIu64 " micro-batches",
                        s->model.mtp_layers, b->mb);
    return total;
}

void gs__ledger_stage_tp_traffic(stage_build *b)
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
        uint64_t seq = m->seq / (b->mesh->cp ? b->mesh->cp : 1); /* this rank's tokens of a sequence */
        uint64_t xb = mul(c, mul(c, mul(c, seq, s->batch.micro_seqs, "traffic"), m->hidden, "traffic"), e,
                          "traffic");
        uint64_t ar1 = mul(c, 2 * (tp - 1), ceil_div(xb, tp), "traffic");
        /* 4 per block (2 forward, 2 backward); full recompute repeats the forward's 2; under
         * tp_comm_overlap the backward re-gathers the norms' sequence-parallel outputs for the
         * weight gradients (2 all-gathers: one more equivalent) */
        int regather = st->tp_comm_overlap && st->sequence_parallel;
        uint64_t per_layer = 4 + (regather ? 1 : 0);
        moe_count mc; /* MoE blocks: their own sum below */
        count_moe_blocks(b, &mc);
        /* a checkpointed dense block's forward: 2 again (full), or its MLP's 1 (recompute module mlp) */
        uint64_t again = add(c, mul(c, 2, mc.dense_ckpt, "traffic"), mc.dense_mlp_ckpt - mc.dense_ckpt, "traffic");
        /* recompute op: the attention's and the MLP's sequence-parallel gathers, one all-reduce's worth */
        again = add(c, again, st->sequence_parallel ? mc.op_ckpt : 0, "traffic");
        uint64_t colls = add(c, mul(c, per_layer, r->layers - mc.moe, "traffic"), again, "traffic") + (stage == 0) +
                         (stage + 1 == pp);
        per_layer += st->recompute == GS_RECOMPUTE_FULL ? 2 : 0; /* a checkpointed block's */
        tpb = mul(c, mul(c, colls, ar1, "traffic"), mb, "traffic");
        if (mc.moe) {
            /* a MoE block (sequence parallel): the attention's gather and reduce-scatter each way
             * (4 halves of an all-reduce, + its re-gather under tp_comm_overlap), the shared
             * experts' alike, each checkpointed block's forward again; and the expert-TP gather
             * and reduce-scatter of the rows its experts take over the ETP group (etp ranks: tp,
             * or a divisor of it), 2 forward + 2 backward (+ 2) */
            uint64_t half = mul(c, tp - 1, ceil_div(xb, tp), "traffic");
            uint64_t parts = m->moe.shared_experts ? 2 : 1;
            uint64_t again_h = add(c, mul(c, 2, mc.moe_attn_ckpt, "traffic"),
                                   m->moe.shared_experts ? mul(c, 2, mc.moe_shared_ckpt, "traffic") : 0, "traffic");
            uint64_t halves = add(c, mul(c, mul(c, parts, 4 + (regather ? 1 : 0), "traffic"), mc.moe, "traffic"),
                                  again_h, "traffic");
            uint64_t rows = gs_moe_rank_rows(&m->moe, ceil_div(mul(c, seq, s->batch.micro_seqs, "traffic"), tp));
            /* the allgather and flex dispatchers' exchanges span ETP: no separate one (the ep line) */
            uint64_t etp_n =
                st->moe_dispatcher == GS_MOE_ALLGATHER || st->moe_dispatcher == GS_MOE_FLEX ? 1 : gs_mesh_etp(b->mesh);
            uint64_t etp = mul(c, mul(c, etp_n - 1, mul(c, mul(c, rows, m->hidden, "traffic"), e, "traffic"), "traffic"),
                               add(c, mul(c, 4, mc.moe, "traffic"), mul(c, 2, mc.moe_ckpt, "traffic"), "traffic"),
                               "traffic");
            uint64_t moe_b = mul(c, add(c, mul(c, halves, half, "traffic"), etp, "traffic"), mb, "traffic");
            gs__ledger_line_add(c, r, "tp", moe_b,
                                "%" PRIu64 " MoE blocks: attention%s as gather + reduce-scatter pairs (%" PRIu64
                                " halves of an all-reduce of s*b*h*%" PRIu64 " B) + the expert-TP gather and "
                                "reduce-scatter of %" PRIu64 " token rows each way over %" PRIu64 " ranks, x %" PRIu64
                                " micro-batches",
                                mc.moe, m->moe.shared_experts ? " and shared experts" : "", halves, e, rows, etp_n, mb);
            tpb = add(c, tpb, moe_b, "traffic");
        }
        /* the last stage's vocab-parallel cross-entropy: an all-gather of 12 B (3 fp32) per
         * token per micro-batch, (t-1)/t of t x that sent */
        uint64_t xent = stage + 1 == pp ? mul(c, mul(c, mul(c, seq, s->batch.micro_seqs, "traffic"),
                                                     12 * (tp - 1), "traffic"), mb, "traffic") : 0;
        tpb = add(c, tpb, xent, "traffic");
        if (stage + 1 == pp && m->mtp_layers)
            tpb = add(c, tpb, mtp_tp_bytes(b, xb), "traffic");
        /* sequence parallelism: one all-reduce of the stage's norm-weight gradients per step */
        uint64_t spn = st->sequence_parallel ? mul(c, 2 * (tp - 1),
                                                   ceil_div(mul(c, gs_sp_norm_params(s, b->mesh, stage, r->layers),
                                                                gs_grad_bytes(st), "traffic"), tp), "traffic") : 0;
        tpb = add(c, tpb, spn, "traffic");
        gs__ledger_line_add(c, r, "tp", tpb,
                            "%" PRIu64 " all-reduce equivalents x 2 (t-1) x ceil(s*b*h*%" PRIu64 " B / t) x %" PRIu64
                            " micro-batches (%" PRIu64 " per layer%s%s, t=%" PRIu64 ")%s%s", colls, e, mb, per_layer,
                            st->recompute == GS_RECOMPUTE_FULL
                                ? (st->recompute_every > 1 ? " on a checkpointed block, incl. its recomputed forward"
                                                           : " incl. the recomputed forward")
                            : mc.dense_mlp_ckpt ? " + 1 for the recomputed MLP"
                            : mc.op_ckpt && st->sequence_parallel ? " + 1 for the recomputed gathers (recompute op)"
                                                                  : "",
                            st->sequence_parallel
                                ? (regather ? ", as all-gather + reduce-scatter pairs, with the backward's "
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

/* (n-1)/n of bytes, as gs_event_sent_bytes counts a ring's all-gather, reduce-scatter or
 * all-to-all. */
static uint64_t ring_sent(uint64_t bytes, uint64_t n)
{
    return (bytes / n) * (n - 1) + (bytes % n) * (n - 1) / n;
}

/* CP traffic per step (grid.cp > 1), per block and micro-batch, from each rank's K and V,
 * KV = 2 b (s / cp) ceil(kv / tp) hd e: p2p sends (cp - 1) KV around the ring forward and twice
 * that backward (K, V and their gradients); all_gather the same (the backward's gather and the
 * gradients' reduce-scatter); a2a (cp - 1) / cp of Q, K, V and of the output, each way. A
 * recomputed attention core (full recompute's checkpointed blocks; selective recompute's
 * core_attn) exchanges again. */
void gs__ledger_stage_cp_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t cp = b->mesh->cp ? b->mesh->cp : 1, tp = b->tp;
    r->traffic[GS_TRAFFIC_CP] = 0;
    if (cp <= 1)
        return;
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t T = mul(c, m->seq / cp, s->batch.micro_seqs, "traffic");
    uint64_t kv, q, fwd, bwd;
    gs__ledger_cp_qkv(m, st, s->batch.micro_seqs, tp, cp, c, &kv, &q);
    if (st->cp_comm == GS_CP_A2A) {
        fwd = bwd = add(c, ring_sent(add(c, q, kv, "traffic"), cp), ring_sent(q, cp), "traffic");
    } else if (st->cp_comm == GS_CP_A2A_P2P) {
        /* the a2a level's all-to-alls (as a2a's, over A ranks), then the p2p level's ring over cp / A
         * ranks of the K, V the a2a gave the rank (kv's bytes) */
        uint64_t a = gs_mesh_cp_a2a(b->mesh);
        uint64_t a2a = add(c, ring_sent(add(c, q, kv, "traffic"), a), ring_sent(q, a), "traffic");
        fwd = add(c, a2a, mul(c, cp / a - 1, kv, "traffic"), "traffic");
        bwd = add(c, a2a, mul(c, 2 * (cp / a - 1), kv, "traffic"), "traffic");
    } else {
        fwd = mul(c, cp - 1, kv, "traffic");
        bwd = mul(c, 2, fwd, "traffic");
    }
    moe_count mc;
    count_moe_blocks(b, &mc);
    uint64_t remat = mc.core_ckpt; /* blocks whose attention core runs again */
    uint64_t per_mb = add(c, mul(c, r->layers, add(c, fwd, bwd, "traffic"), "traffic"), mul(c, remat, fwd, "traffic"),
                          "traffic");
    uint64_t total = mul(c, per_mb, b->mb, "traffic");
    gs__ledger_line_add(c, r, "cp", total,
                        "%s: %" PRIu64 " blocks x (forward %" PRIu64 " + backward %" PRIu64 " B)%s x %" PRIu64
                        " micro-batches; K, V of a rank 2 x %" PRIu64 " tokens x %" PRIu64 " kv heads x %" PRIu64
                        " x %" PRIu64 " B, cp=%" PRIu64,
                        gs_cp_comm_name(st->cp_comm), r->layers, fwd, bwd,
                        remat ? " + the recomputed forwards" : "", b->mb, T, ceil_div(m->kv_heads, tp), m->head_dim,
                        e, cp);
    r->traffic[GS_TRAFFIC_CP] = total;
    uint64_t stride, first = gs_mesh_cp_first(b->mesh, b->rank, &stride); /* the group's first and last ranks */
    int net = gs_mesh_rank_node(b->mesh, first) != gs_mesh_rank_node(b->mesh, first + (cp - 1) * stride);
    r->traffic_link[net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += total;
}

/* The allgather dispatcher's traffic per step (engine/build_moe.c), per MoE block and micro-batch
 * over the ETP x EP group of n ranks, each rank's share of T_l token rows of h x e B: the dispatch
 * all-gathers it with the routing map and fp32 probabilities (5 B per expert) forward and
 * reduce-scatters its gradient with the probabilities' (4 B) backward; the combine reduce-scatters
 * it forward and all-gathers it backward; a checkpointed block's forward again. Each sends
 * (n-1) x its share. */
static void allgather_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_model *m = &s->model;
    calc *c = b->c;
    uint64_t tp = b->tp, n = gs_mesh_tpep_size(b->mesh);
    if (n <= 1)
        return;
    moe_count mc;
    count_moe_blocks(b, &mc);
    uint64_t e = s->strategy.precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t T = mul(c, m->seq / (b->mesh->cp ? b->mesh->cp : 1), s->batch.micro_seqs, "traffic");
    uint64_t tl = s->strategy.sequence_parallel && tp > 1 ? ceil_div(T, tp) : T;
    uint64_t rows = mul(c, mul(c, tl, m->hidden, "traffic"), e, "traffic"), E = m->moe.experts;
    uint64_t fwd = add(c, add(c, rows, mul(c, tl, 5 * E, "traffic"), "traffic"), rows, "traffic");
    uint64_t bwd = add(c, add(c, rows, mul(c, tl, 4 * E, "traffic"), "traffic"), rows, "traffic");
    uint64_t blk = add(c, mul(c, add(c, fwd, bwd, "traffic"), mc.moe, "traffic"), mul(c, fwd, mc.moe_ckpt, "traffic"),
                       "traffic");
    uint64_t total = mul(c, mul(c, n - 1, blk, "traffic"), b->mb, "traffic");
    gs__ledger_line_add(c, b->r, "ep", total,
                        "%" PRIu64 " MoE blocks%s: the allgather dispatcher's gathers and reduce-scatters, (n-1) x "
                        "%" PRIu64 " token rows x (%" PRIu64 " x %" PRIu64 " B + the routing map and probabilities), "
                        "x %" PRIu64 " micro-batches, n = etp x ep = %" PRIu64,
                        mc.moe, mc.moe_ckpt ? " (+ the recomputed forwards)" : "", tl, m->hidden, e, b->mb, n);
    b->r->traffic[GS_TRAFFIC_EP] = total;
    uint64_t first, stride;
    gs_mesh_tpep_group(b->mesh, b->rank, &first, &stride);
    int net = gs_mesh_rank_node(b->mesh, first) != gs_mesh_rank_node(b->mesh, first + (n - 1) * stride);
    b->r->traffic_link[net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += total;
}

/* EP traffic per step (grid.ep > 1), per MoE block and micro-batch: the token rows' dispatch and
 * combine all-to-alls, forward and backward, again for a checkpointed block's recomputed forward;
 * each moves the busiest EP rank's rows (gs_moe_rank_rows of the rank's sequence-parallel
 * tokens) x h x e bytes, (ep - 1) / ep of them sent. The flex dispatcher moves each token once per
 * destination rank instead (engine/moe_route.h), over the etp x ep ranks under expert TP. */
void gs__ledger_stage_ep_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_model *m = &s->model;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t ep = b->mesh->ep ? b->mesh->ep : 1, tp = b->tp;
    r->traffic[GS_TRAFFIC_EP] = 0;
    if (!m->moe.experts)
        return;
    if (s->strategy.moe_dispatcher == GS_MOE_ALLGATHER) {
        allgather_traffic(b);
        return;
    }
    int flex = s->strategy.moe_dispatcher == GS_MOE_FLEX;
    uint64_t etp = gs_mesh_etp(b->mesh);
    /* flex under expert TP exchanges over the ETP x EP group (Megatron-Core's tp_ep) */
    uint64_t n = flex && etp > 1 ? gs_mesh_tpep_size(b->mesh) : ep;
    if (n <= 1)
        return;
    moe_count mc;
    count_moe_blocks(b, &mc);
    uint64_t e = s->strategy.precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t T = mul(c, m->seq / (b->mesh->cp ? b->mesh->cp : 1), s->batch.micro_seqs, "traffic");
    uint64_t tl = s->strategy.sequence_parallel && tp > 1 ? ceil_div(T, tp) : T;
    uint64_t rows = gs_moe_rank_rows(&m->moe, tl);
    /* flex (DeepEP): each token once per destination rank (engine/moe_route.h) */
    gs_moe_flex fx = flex ? gs_moe_flex_traffic(&m->moe, b->mesh, b->rank, ep, etp, rows) : (gs_moe_flex){rows, 0.0};
    uint64_t one = ring_sent(mul(c, mul(c, fx.rank_rows, m->hidden, "traffic"), e, "traffic"), n);
    uint64_t a2a = add(c, mul(c, 4, mc.moe, "traffic"), mul(c, 2, mc.moe_ckpt, "traffic"), "traffic");
    uint64_t total = mul(c, mul(c, a2a, one, "traffic"), b->mb, "traffic");
    gs__ledger_line_add(c, r, "ep", total,
                        "%" PRIu64 " %s (dispatch and combine, forward and backward%s) x %" PRIu64
                        " micro-batches, each (ep-1)/ep of %" PRIu64 " token rows%s x %" PRIu64 " x %" PRIu64
                        " B, %s=%" PRIu64,
                        a2a, flex ? "flex (DeepEP) exchanges" : "all-to-alls",
                        mc.moe_ckpt ? ", the recomputed forwards" : "", b->mb, fx.rank_rows,
                        flex ? " (one per token and destination rank)" : "", m->hidden, e,
                        n != ep ? "etp x ep" : "ep", n);
    r->traffic[GS_TRAFFIC_EP] = total;
    uint64_t first, stride;
    gs_mesh_ep_group(b->mesh, b->rank, &first, &stride);
    int net = gs_mesh_rank_node(b->mesh, first) != gs_mesh_rank_node(b->mesh, first + (ep - 1) * stride);
    if (flex && net) { /* the node-level share crosses the network, the rest stays on NVLink */
        uint64_t off = (uint64_t)((double)total * fx.net_share);
        r->traffic_link[GS_LINKCLASS_NET] += off;
        r->traffic_link[GS_LINKCLASS_INTRA] += total - off;
        return;
    }
    r->traffic_link[net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += total;
}

/* FP8 delayed scaling's amax traffic per step: per micro-batch, each model chunk's forward and
 * backward all-reduce their chunk's amax buffer over the stage's n = world / pp ranks (a ring's
 * 2 (n - 1) ceil(B / n), as gs_event_sent_bytes counts it). */
void gs__ledger_stage_fp8_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_strategy *st = &s->strategy;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t v = gs_strategy_chunks(st, b->pp);
    uint64_t n = b->mesh->world / b->pp, total = 0, buf = 0;
    r->traffic[GS_TRAFFIC_FP8_AMAX] = 0;
    if (!gs_fp8_amax_reduced(s) || n <= 1)
        return;
    for (uint64_t k = 0; k < v; k++) {
        int64_t bot, top;
        gs_partition_chunk_span(&b->part, v, k, &bot, &top);
        if (top < bot)
            continue;
        for (int ph = 0; ph < 2; ph++) {
            uint64_t B = gs_fp8_amax_bytes(s, b->mesh, v, b->stage, bot, top, ph ? GS_PHASE_BWD : GS_PHASE_FWD);
            buf = add(c, buf, B, "traffic");
            total = add(c, total, mul(c, 2 * (n - 1), ceil_div(B, n), "traffic"), "traffic");
        }
    }
    total = mul(c, total, b->mb, "traffic");
    gs__ledger_line_add(c, r, "fp8_amax", total,
                        "FP8 delayed scaling: %" PRIu64 " B of amaxes a micro-batch (3 fp32 per FP8 GEMM forward, 2 "
                        "backward), all-reduced over the stage's %" PRIu64 " ranks, x %" PRIu64 " micro-batches",
                        buf, n, b->mb);
    r->traffic[GS_TRAFFIC_FP8_AMAX] = total;
    /* the stage's ranks, ascending (engine/schedule_groups.c), span nodes when the first and the
     * last sit on different ones */
    uint64_t sp = b->mesh->stride[GS_DIM_PP], first = (b->rank / sp) % b->pp * sp;
    uint64_t last = first + (b->mesh->world / (sp * b->pp) - 1) * sp * b->pp + sp - 1;
    int net = gs_mesh_rank_node(b->mesh, first) != gs_mesh_rank_node(b->mesh, last);
    r->traffic_link[net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += total;
}

/* PP traffic per step: each forward pass of a chunk with a next stage sends its output
 * activation; each backward pass of a chunk with a previous stage sends its input gradient; tied
 * embeddings exchange the word embedding's gradient between the first and last stages. */
void gs__ledger_stage_pp_traffic(stage_build *b)
{
    const gs_scenario *s = b->s;
    const gs_strategy *st = &s->strategy;
    const gs_mesh *mesh = b->mesh;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    uint64_t stage = b->stage, pp = b->pp, mb = b->mb;
    uint64_t v = gs_strategy_chunks(st, pp);
    uint64_t ppb = 0;
    if (pp > 1) {
        uint64_t fwd = mul(c, mb, v, "traffic") - (stage + 1 == pp ? mb : 0);
        uint64_t bwd = mul(c, mb, v, "traffic") - (stage == 0 ? mb : 0);
        ppb = mul(c, add(c, fwd, bwd, "traffic"), b->act.boundary, "traffic");
        gs__ledger_line_add(c, r, "pp", ppb, "(%" PRIu64 " activation + %" PRIu64 " gradient sends) x %" PRIu64 " B",
                            fwd, bwd, b->act.boundary);
        uint64_t cn[GS_DIM_COUNT] = {0};
        cn[GS_DIM_PP] = stage + 1 < pp ? stage + 1 : stage - 1;
        int pp_net = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, cn)) != gs_mesh_rank_node(mesh, b->rank);
        r->traffic_link[pp_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += ppb;
        /* tied embeddings: the first and last stages exchange the word embedding's gradient
         * (engine/build.c's epilogue), over the link to the other end of the pipeline */
        if (gs_model_embedding_shared(&s->model) && (stage == 0 || stage + 1 == pp)) {
            uint64_t gbt = gs_grad_bytes(st);
            uint64_t eb = mul(c, b->part.word_params, gbt, "traffic");
            gs__ledger_line_add(c, r, "pp", eb, "the %s word embedding's gradient, [vocab/tp, h] x %" PRIu64
                                " B, sent to the other end of the pipeline",
                                s->model.tied_embeddings ? "tied" : "MTP-shared", gbt);
            ppb = add(c, ppb, eb, "traffic");
            cn[GS_DIM_PP] = stage == 0 ? pp - 1 : 0;
            int far_net = gs_mesh_rank_node(mesh, gs_mesh_coords_rank(mesh, cn)) != gs_mesh_rank_node(mesh, b->rank);
            r->traffic_link[far_net ? GS_LINKCLASS_NET : GS_LINKCLASS_INTRA] += eb;
        }
    }
    r->traffic[GS_TRAFFIC_PP] = ppb;
    r->traffic_bytes = add(c, add(c, add(c, b->dp_bytes, b->ar_net, "traffic"), r->traffic[GS_TRAFFIC_TP], "traffic"),
                           add(c, add(c, ppb, r->traffic[GS_TRAFFIC_CP], "traffic"),
                               add(c, r->traffic[GS_TRAFFIC_EP], r->traffic[GS_TRAFFIC_FP8_AMAX], "traffic"),
                               "traffic"), "traffic");
}

uint64_t gs_sp_norm_params(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, uint64_t stage_layers)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t pp = mesh->size[GS_DIM_PP];
    int last = stage + 1 == pp;
    uint64_t per_norm = (m->norm == GS_NORM_LAYERNORM || m->bias) ? 2 * m->hidden : m->hidden;
    uint64_t n = stage_layers * 2 * per_norm + (last ? per_norm * (1 + 3 * m->mtp_layers) : 0); /* + MTP's 3 norms */
    uint64_t v = gs_strategy_chunks(st, pp);
    for (uint64_t l = 0; m->moe.experts && l < stage_layers; l++)
        if (gs_model_moe_block(m, gs_pipe_global_layer(mesh, m->layers, v, stage, l)))
            n += m->hidden * m->moe.experts; /* the router */
    return n;
}
