/* The activation ledger (engine/ledger_internal.h): the bytes one transformer block keeps for its
 * backward, op by op after Korthikanti et al. 2022 (Table 2 for GPT-style blocks), generalized to
 * GQA and SwiGLU, under each recompute setting, tensor and sequence parallelism and flash
 * attention; a stage's activation tensor sizes; their explain lines. Plain values written into
 * caller storage: nothing is allocated. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/ledger_internal.h"
#include "engine/units.h"

/* ---- activations ------------------------------------------------------------------------------ */

typedef struct act_terms {
    uint64_t replicated; /* bytes held whole on every TP rank unless sequence parallel */
    uint64_t split;      /* bytes already divided by tp (per rank) */
    uint64_t scores;     /* s x s attention terms per rank (softmax, its dropout), bytes */
    uint64_t lse;        /* flash attention: fp32 logsumexp per rank, bytes */
    uint64_t input;      /* the layer input (kept under full recompute), bytes per rank */
    /* what each selective recompute module drops (engine/strategy.h), bytes per rank, parts of
     * replicated (norm_out) and split (the others) */
    uint64_t norm_out;   /* layernorm: the two norms' outputs, the QKV and MLP inputs */
    uint64_t mla_qkv;    /* mla_up_proj: latent attention's Q, K and V */
    uint64_t mlp_mid;    /* mlp: a dense MLP's intermediates */
    uint64_t moe_all;    /* moe: everything the MoE MLP half keeps */
    uint64_t moe_act;    /* moe_act: the experts' activation outputs (the down projection's input) */
    uint64_t moe_shared; /* shared_experts: the shared experts' intermediates */
    uint64_t op_kept;    /* recompute op: what torchtitan's per-op policy keeps */
} act_terms;

/* A MoE block's MLP on one TP rank (engine/build_moe.c's ops, Megatron-Core's saved tensors):
 * the router's fp32 probabilities over E experts for the rank's T_l tokens (T_l = sb / t under
 * sequence parallelism), the experts' inputs (li per element) and intermediates (per_f per
 * element of the ETP slice of expert_ffn) for the rows the busiest EP rank's experts take after
 * the ETP gather (gs_moe_rank_rows x etp; etp = t unless the mesh says less), their outputs kept for the weighted unpermute (e), and
 * the shared experts' intermediates as a dense MLP's (width shared_experts x expert_ffn).
 * Every MoE model's blocks are sized as its MoE blocks (a leading dense block holds less), or
 * as its dense ones where those keep more (interleaved models, moe.every > 1).
 * Fills a->moe_all, a->moe_act (li per intermediate element: the down projection's input) and
 * a->moe_shared. */
static void moe_terms(const gs_model *m, const gs_strategy *st, uint64_t sb, uint64_t t, uint64_t etp,
                      uint64_t li, uint64_t per_f, calc *c, act_terms *a)
{
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t ef = (m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn) / t;
    uint64_t ef_e = (m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn) / etp;
    uint64_t tl = st->sequence_parallel && t > 1 ? ceil_div(sb, t) : sb;
    uint64_t rows = gs_moe_rank_rows(&m->moe, tl), gathered = mul(c, rows, etp, "activation");
    uint64_t probs = mul(c, mul(c, tl, m->moe.experts, "activation"), 4, "activation");
    uint64_t in = mul(c, mul(c, gathered, m->hidden, "activation"), li, "activation");
    uint64_t mid_elems = mul(c, gathered, ef_e, "activation");
    uint64_t mid = mul(c, mid_elems, per_f, "activation");
    uint64_t out = mul(c, mul(c, rows, m->hidden, "activation"), e, "activation");
    uint64_t shared = mul(c, mul(c, sb, mul(c, m->moe.shared_experts, ef, "activation"), "activation"), per_f,
                          "activation");
    a->moe_act = mul(c, mid_elems, li, "activation");
    a->moe_shared = shared;
    a->moe_all = add(c, add(c, add(c, probs, in, "activation"), add(c, mid, out, "activation"), "activation"),
                     shared, "activation");
}

/* Latent attention's saved tensors on one TP rank (engine/build_mla.c's ops, after the gather, so
 * whole in every rank's tokens): the q latent before its norm (e) and after it (the q_b GEMM's
 * input, li), the kv latent with its rope dims (e) and the normed kv latent (kv_b's input, li);
 * Q and K of d + r per head, V of d (e each); the out-projection's input (li). */
static uint64_t mla_terms(const gs_model *m, uint64_t sb, uint64_t heads, uint64_t e, uint64_t li, calc *c,
                          uint64_t *qkv_out)
{
    uint64_t qr = m->mla.q_lora_rank, kr = m->mla.kv_lora_rank, r = m->mla.rope_head_dim, d = m->head_dim;
    uint64_t latent = add(c, mul(c, mul(c, sb, qr, "activation"), e + li, "activation"),
                          add(c, mul(c, mul(c, sb, kr + r, "activation"), e, "activation"),
                              mul(c, mul(c, sb, kr, "activation"), li, "activation"), "activation"),
                          "activation");
    uint64_t qkv = mul(c, mul(c, sb, heads, "activation"), mul(c, e, 2 * (d + r) + d, "activation"), "activation");
    uint64_t o = mul(c, mul(c, sb, heads * d, "activation"), li, "activation");
    *qkv_out = qkv;
    return add(c, add(c, latent, qkv, "activation"), o, "activation");
}

/* One block, one micro-batch of b sequences, one TP rank of a CP group of cp; see the file
 * comment. GPT (dropout, GELU, LayerNorm, MHA, ffn = 4h) reduces to Korthikanti's
 * s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes. Context parallelism keeps s / cp tokens of each
 * sequence per rank (Megatron-Core, torchtitan): every token term divides by cp, and the
 * unfused attention's scores are (s / cp) x s per head. */
static void layer_activation_terms(const gs_model *m, const gs_strategy *st, uint64_t b,
                                   uint64_t t, uint64_t etp, uint64_t cp, calc *c, act_terms *a)
{
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2; /* bytes per activation element */
    uint64_t s_local = m->seq / (cp ? cp : 1);
    uint64_t sb = mul(c, s_local, b, "tokens per micro-batch");
    uint64_t sbh = mul(c, sb, m->hidden, "activation");
    uint64_t heads = m->heads / t, kvh = ceil_div(m->kv_heads, t), hd = m->head_dim;
    uint64_t f = m->ffn / t;
    uint64_t mask = m->dropout ? 1 : 0;
    memset(a, 0, sizeof *a);

    /* The inputs of the linear layers are kept for their weight gradients: under FP8 as their
     * FP8 transposes (Transformer Engine saves the cast input, 1 byte), else e. */
    uint64_t li = st->fp8 != GS_FP8_OFF ? 1 : e;
    /* Whole on each TP rank: the two norm inputs (e each), the QKV input, the MLP input (li each),
     * plus the two residual dropout masks (1 byte). */
    a->replicated = add(c, mul(c, 2 * e + 2 * li, sbh, "activation"), mul(c, 2 * mask, sbh, "activation"),
                        "activation");
    a->norm_out = mul(c, 2 * li, sbh, "activation");
    /* Split by tp: Q, K (saved for QK^T), V (e), out-proj input (li); MLP intermediates. */
    uint64_t q = mul(c, sb, heads * hd, "activation"), kv = mul(c, sb, kvh * hd, "activation");
    uint64_t split = m->mla.kv_lora_rank ? mla_terms(m, sb, heads, e, li, c, &a->mla_qkv)
                                         : add(c, mul(c, e, add(c, add(c, q, kv, "activation"), kv, "activation"),
                                                       "activation"),
                                               mul(c, li, q, "activation"), "activation");
    uint64_t per_f = m->mlp == GS_MLP_SWIGLU ? 2 * e + li /* gate, up (e), down in (li) */
                                             : e + li;    /* GELU in (e), fc2 in (li) */
    if (m->moe.experts) {
        moe_terms(m, st, sb, t, etp, li, per_f, c, a);
        uint64_t dense = gs_model_has_dense_blocks(m) ? mul(c, per_f, mul(c, sb, f, "activation"), "activation") : 0;
        split = add(c, split, a->moe_all > dense ? a->moe_all : dense, "activation");
    } else {
        a->mlp_mid = mul(c, per_f, mul(c, sb, f, "activation"), "activation");
        split = add(c, split, a->mlp_mid, "activation");
    }
    a->split = split;
    /* Scores: softmax output e*a*s^2*b, plus its dropout mask and dropout output. */
    uint64_t ss = mul(c, mul(c, s_local, m->seq, "attention scores"), mul(c, b, heads, "attention scores"),
                      "attention scores");
    a->scores = mul(c, e + (m->dropout ? 1 + e : 0), ss, "attention scores");
    if (st->flash_attention) {
        a->scores = 0;
        a->lse = mul(c, 4, mul(c, sb, heads, "logsumexp"), "logsumexp");
    }
    a->input = mul(c, e, sbh, "layer input");
    if (st->sequence_parallel) {
        a->replicated = ceil_div(a->replicated, t);
        a->norm_out = ceil_div(a->norm_out, t);
        a->input = ceil_div(a->input, t);
    }
    /* recompute op (a SwiGLU block, scenario_mesh.c checks): the block's input, and the outputs
     * of the ops the policy saves: wq and wv (the first and third matmuls: Q, V), SDPA's output
     * and logsumexp, w1 (the fifth), w2 (the seventh, whole on each rank before its
     * reduce-scatter), and under sequence parallelism the two reduce-scatters' outputs (e each);
     * wk, wo and w3 (every second matmul), the norms, rotary, SiLU and products run again */
    uint64_t rs = st->sequence_parallel && t > 1 ? mul(c, 2, ceil_div(mul(c, e, sbh, "activation"), t), "activation")
                                                 : 0;
    a->op_kept = add(c, add(c, add(c, a->input, mul(c, e, add(c, mul(c, 2, q, "activation"), kv, "activation"),
                                                         "activation"), "activation"),
                            add(c, a->lse, mul(c, e, mul(c, sb, f, "activation"), "activation"), "activation"),
                            "activation"),
                     add(c, mul(c, e, sbh, "activation"), rs, "activation"), "activation");
}

/* What selective recompute's modules drop from one block, bytes: the sum of their parts, each
 * counted once (moe holds moe_act and shared_experts). */
static uint64_t act_dropped(const act_terms *a, uint32_t modules, calc *c)
{
    uint64_t d = 0;
    if (modules & GS_RC_CORE_ATTN)
        d = add(c, d, a->scores, "activation");
    if (modules & GS_RC_LAYERNORM)
        d = add(c, d, a->norm_out, "activation");
    if (modules & GS_RC_MLA_UP_PROJ)
        d = add(c, d, a->mla_qkv, "activation");
    if (modules & GS_RC_MLP)
        d = add(c, d, a->mlp_mid, "activation");
    if (modules & GS_RC_MOE)
        d = add(c, d, a->moe_all, "activation");
    else {
        if (modules & GS_RC_MOE_ACT)
            d = add(c, d, a->moe_act, "activation");
        if (modules & GS_RC_SHARED_EXPERTS)
            d = add(c, d, a->moe_shared, "activation");
    }
    return d;
}

static uint64_t act_stored(const act_terms *a, gs_recompute r, uint32_t modules, calc *c)
{
    switch (r) {
    case GS_RECOMPUTE_FULL:
        return a->input;
    case GS_RECOMPUTE_OP:
        return a->op_kept;
    case GS_RECOMPUTE_SELECTIVE: /* everything but what the modules drop (never more than held) */
        return add(c, add(c, add(c, a->replicated, a->split, "activation"), a->scores, "activation"), a->lse,
                   "activation") -
               act_dropped(a, modules, c);
    case GS_RECOMPUTE_NONE:
    default:
        return add(c, add(c, add(c, a->replicated, a->split, "activation"), a->scores, "activation"),
                   a->lse, "activation");
    }
}

uint64_t gs_ledger_layer_activation_bytes(const gs_model *m, const gs_strategy *st,
                                          uint64_t micro_seqs, uint64_t tp)
{
    return gs_ledger_layer_activation_bytes_cp(m, st, micro_seqs, tp, 1);
}

uint64_t gs_ledger_layer_activation_bytes_cp(const gs_model *m, const gs_strategy *st, uint64_t micro_seqs,
                                             uint64_t tp, uint64_t cp)
{
    calc c = {0, NULL, 0};
    act_terms a;
    layer_activation_terms(m, st, micro_seqs, tp ? tp : 1, tp ? tp : 1, cp ? cp : 1, &c, &a); /* etp = tp */
    uint64_t r = act_stored(&a, st->recompute, gs_strategy_recompute_modules(st), &c);
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

uint32_t gs_act_layer_recomputes(const gs_act_sizes *a, int64_t l)
{
    return gs_every_nth_block(a->every, (uint64_t)l) ? a->modules : 0;
}

uint64_t gs_act_stash(const gs_act_sizes *a, int64_t lo, int64_t hi)
{
    if (hi < lo)
        return 0;
    uint64_t n = (uint64_t)(hi - lo + 1), ck = gs_every_nth_blocks_in(a->every, lo, hi);
    return ck * a->stored + (n - ck) * a->stored_kept;
}

/* ---- activation tensor sizes -------------------------------------------------------------------- */

/* Context parallelism's exchange buffers around one block's attention, on a rank's T = b s / cp
 * tokens, with KV = 2 T ceil(kv / tp) hd e its own K and V and Q = T (heads / tp) hd e (the
 * traffic ledger's sizes), as Transformer Engine's attention with CP allocates them
 * (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py):
 * - p2p (AttnFuncWithCPAndKVP2P): the forward keeps a list of cp K, V buffers, the first a copy of
 *   the rank's own (torch.cat of k and v), each step's receive a new one, none released before
 *   the attention returns: cp KV; the backward passes K, V with their gradients in two buffers of
 *   2 KV each (one being received while the other is used): 4 KV;
 * - all_gather (AttnFuncWithCPAndKVAllGather): the gathered K and V, cp KV, forward; the backward
 *   gathers them again and holds their full gradients until the reduce-scatter: 2 cp KV;
 * - a2a (Ulysses): the all-to-all's outputs, Q, K, V for heads / cp whole sequences (Q + KV), and
 *   the attention's output before its all-to-all back (Q): 2 Q + KV each way. */
void gs__ledger_cp_qkv(const gs_model *m, const gs_strategy *st, uint64_t b, uint64_t tp, uint64_t cp, calc *c,
                       uint64_t *kv, uint64_t *q)
{
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t Te = mul(c, mul(c, m->seq / cp, b, "cp"), e, "cp");
    *kv = mul(c, mul(c, 2 * ceil_div(m->kv_heads, tp), m->head_dim, "cp"), Te, "cp");
    *q = mul(c, mul(c, m->heads / tp, m->head_dim, "cp"), Te, "cp");
}

static void cp_buffers(const gs_model *m, const gs_strategy *st, uint64_t b, uint64_t tp, const gs_mesh *mesh,
                       calc *c, gs_act_sizes *out)
{
    uint64_t kv, q, cp = mesh->cp;
    gs__ledger_cp_qkv(m, st, b, tp, cp, c, &kv, &q);
    switch (st->cp_comm) {
    case GS_CP_P2P:
        out->cp_fwd = mul(c, cp, kv, "cp buffers");
        out->cp_bwd = mul(c, 4, kv, "cp buffers");
        break;
    case GS_CP_ALL_GATHER:
        out->cp_fwd = mul(c, cp, kv, "cp buffers");
        out->cp_bwd = mul(c, 2 * cp, kv, "cp buffers");
        break;
    case GS_CP_A2A:
        out->cp_fwd = out->cp_bwd = add(c, mul(c, 2, q, "cp buffers"), kv, "cp buffers");
        break;
    case GS_CP_A2A_P2P: {
        /* the a2a level's (as a2a) and the p2p level's ring of cp / A chunks of the K, V the a2a
         * gave the rank (A s tokens x kv heads / A: kv's bytes) */
        uint64_t a = gs_mesh_cp_a2a(mesh), a2a = add(c, mul(c, 2, q, "cp buffers"), kv, "cp buffers");
        out->cp_fwd = add(c, a2a, mul(c, cp / a, kv, "cp buffers"), "cp buffers");
        out->cp_bwd = add(c, a2a, mul(c, 4, kv, "cp buffers"), "cp buffers");
        break;
    }
    }
}

gs_status gs_ledger_act_sizes(const gs_scenario *s, const gs_mesh *mesh, uint64_t stage, gs_act_sizes *out,
                              gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = mesh->size[GS_DIM_TP], pp = mesh->size[GS_DIM_PP], b = s->batch.micro_seqs;
    uint64_t cp = mesh->cp ? mesh->cp : 1;
    calc c = {0, NULL, 0};
    act_terms a;
    memset(out, 0, sizeof *out);
    layer_activation_terms(m, st, b, tp, gs_mesh_etp(mesh), cp, &c, &a);
    uint32_t modules = gs_strategy_recompute_modules(st);
    out->stored = out->stored_kept = act_stored(&a, st->recompute, modules, &c);
    if (st->recompute == GS_RECOMPUTE_FULL)
        out->remat = act_stored(&a, GS_RECOMPUTE_NONE, 0, &c);
    else if (st->recompute == GS_RECOMPUTE_SELECTIVE)
        out->remat = act_dropped(&a, modules, &c);
    else if (st->recompute == GS_RECOMPUTE_OP) { /* what the block's backward needs and the policy did not keep */
        uint64_t all = act_stored(&a, GS_RECOMPUTE_NONE, 0, &c);
        out->remat = all > out->stored ? all - out->stored : 0;
    }
    out->modules = st->recompute == GS_RECOMPUTE_FULL ? GS_RECOMPUTE_ALL_MODULES
                   : st->recompute == GS_RECOMPUTE_OP ? GS_RECOMPUTE_OP_MODULES
                                                      : modules;
    if (st->recompute == GS_RECOMPUTE_FULL && st->recompute_every > 1) {
        out->every = st->recompute_every;
        out->stored_kept = act_stored(&a, GS_RECOMPUTE_NONE, 0, &c);
    }
    uint64_t e = st->precision == GS_PREC_FP32 ? 4 : 2;
    uint64_t sbh = mul(&c, mul(&c, m->seq / cp, b, "activations"), m->hidden, "activations");
    if (stage == 0 && m->dropout)
        out->emb_mask = st->sequence_parallel ? ceil_div(sbh, tp) : sbh;
    if (stage + 1 == pp) {
        uint64_t fn = mul(&c, e, sbh, "final norm input");
        if (st->sequence_parallel)
            fn = ceil_div(fn, tp);
        uint64_t logits =
            mul(&c, 4, mul(&c, mul(&c, m->seq / cp, b, "logits"), ceil_div(m->vocab, tp), "logits"), "logits");
        out->head_act = add(&c, fn, logits, "head activations");
        /* each MTP module keeps its enorm and hnorm inputs (e each), eh_proj's input (2 h, e),
         * its own final-norm input and logits; sequence parallelism shards all but the logits */
        uint64_t mod = mul(&c, 5 * e, sbh, "mtp activations");
        if (st->sequence_parallel)
            mod = ceil_div(mod, tp);
        out->head_act = add(&c, out->head_act, mul(&c, m->mtp_layers, add(&c, mod, add(&c, fn, logits, "mtp"), "mtp"),
                                                   "mtp activations"), "head activations");
    }
    out->boundary = mul(&c, e, sbh, "pipeline boundary");
    if (st->sequence_parallel)
        out->boundary = ceil_div(out->boundary, tp);
    if (cp > 1)
        cp_buffers(m, st, b, tp, mesh, &c, out);
    if (c.overflow)
        return gs_error_set(err, GS_ERR_OVERFLOW, "%s: %s bytes would overflow 64 bits", s->path, c.what);
    return GS_OK;
}

/* ---- explain lines -------------------------------------------------------------------------- */

/* The activation sizes' explain lines. */
void gs__ledger_stage_act_lines(const stage_build *b)
{
    const gs_model *m = &b->s->model;
    const gs_strategy *st = &b->s->strategy;
    const gs_act_sizes *act = &b->act;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    act_terms a;
    uint64_t cp = b->mesh->cp ? b->mesh->cp : 1;
    layer_activation_terms(m, st, b->s->batch.micro_seqs, b->tp, gs_mesh_etp(b->mesh), cp, c, &a);
    char sel[240], mods[160];
    gs_recompute_modules_format(gs_strategy_recompute_modules(st), ", ", mods, sizeof mods);
    snprintf(sel, sizeof sel, "selective recompute of [%s]: their saved tensors dropped", mods);
    const char *how = st->recompute == GS_RECOMPUTE_FULL && act->every > 1
                          ? "full recompute on every recompute_every-th block: layer input only"
                      : st->recompute == GS_RECOMPUTE_FULL ? "full recompute: layer input only"
                      : st->recompute == GS_RECOMPUTE_OP
                          ? "per-op recompute (torchtitan): the input, wq, wv, w1, w2 and attention outputs kept"
                      : st->recompute == GS_RECOMPUTE_SELECTIVE ? sel
                                                                : "no recompute";
    char dropped[48] = "";
    if (st->recompute == GS_RECOMPUTE_SELECTIVE)
        snprintf(dropped, sizeof dropped, " - dropped %" PRIu64, act->remat);
    gs__ledger_line_add(c, r, "act: per layer", act->stored,
                        "%s%s%s; replicated %" PRIu64 " + split %" PRIu64 " + scores %" PRIu64 " + lse %" PRIu64
                        "%s B (Korthikanti 2022; b=%" PRIu64 ", s=%" PRIu64 "%s, h=%" PRIu64 ", a=%" PRIu64
                        ", t=%" PRIu64 ")",
                        how, st->sequence_parallel ? ", sequence parallel" : "",
                        st->flash_attention ? ", flash attention" : "", a.replicated, a.split, a.scores, a.lse, dropped,
                        b->s->batch.micro_seqs, cp > 1 ? m->seq / cp : m->seq, cp > 1 ? " per CP rank" : "",
                        m->hidden, m->heads, b->tp);
    if (act->every > 1)
        gs__ledger_line_add(c, r, "act: unchecked layer", act->stored_kept,
                            "a block recompute_every=%" PRIu64 " leaves unchecked keeps its full activations",
                            act->every);
    if (act->remat)
        gs__ledger_line_add(c, r, "act: recompute set", act->remat, "one layer's %s rematerialized during its backward",
                            st->recompute == GS_RECOMPUTE_FULL ? "full activations" : "dropped tensors");
    if (act->cp_fwd || act->cp_bwd)
        gs__ledger_line_add(c, r, "act: cp buffers", act->cp_fwd > act->cp_bwd ? act->cp_fwd : act->cp_bwd,
                            "%s exchange around one layer's attention: forward %" PRIu64 " B, backward %" PRIu64
                            " B (%s)",
                            gs_cp_comm_name(st->cp_comm), act->cp_fwd, act->cp_bwd,
                            st->cp_comm == GS_CP_P2P         ? "cp K,V chunks; 2 ring buffers of K,V and their gradients"
                            : st->cp_comm == GS_CP_ALL_GATHER ? "the gathered K,V; with their gradients"
                            : st->cp_comm == GS_CP_A2A        ? "Q,K,V and the output for heads/cp whole sequences"
                                                              : "the a2a level's Q,K,V and output; the p2p level's "
                                                                "K,V ring as p2p's");
    if (act->emb_mask)
        gs__ledger_line_add(c, r, "act: embedding", act->emb_mask, "dropout mask 1 B x s*b*h%s",
                            st->sequence_parallel ? " / tp" : "");
    if (act->head_act)
        gs__ledger_line_add(c, r, "act: head", act->head_act,
                            "final-norm input e*s*b*h + fp32 logits 4*s*b*V/t = 4*%" PRIu64 "*%" PRIu64 "*%" PRIu64
                            "/%" PRIu64 "%s", m->seq / cp, b->s->batch.micro_seqs, m->vocab, b->tp,
                            m->mtp_layers ? "; again for each MTP module, with its norm and eh_proj inputs 5*e*s*b*h"
                                          : "");
}
