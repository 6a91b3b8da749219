/* Megatron-LM flags -> the scenario's model and strategy, with Megatron-LM's defaults where a
 * flag is absent (engine/import_megatron_internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/import_megatron_internal.h"
#include "engine/units.h"

/* Dropout, normalization and positions (Megatron-LM's defaults: 0.1, LayerNorm, learned). */
static gs_status mg_model_kinds(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_model *m,
                                gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_status rc;
    char *e1 = NULL, *e2 = NULL; /* both rates a number and zero (not "lots", which strtod reads as 0) */
    int drop_off = st->given[MG_ATT_DROP] && st->given[MG_HID_DROP] &&
                   strtod(st->str[MG_ATT_DROP], &e1) == 0.0 && e1 != st->str[MG_ATT_DROP] && !*e1 &&
                   strtod(st->str[MG_HID_DROP], &e2) == 0.0 && e2 != st->str[MG_HID_DROP] && !*e2;
    m->dropout = !drop_off;
    /* the rates exec draws its masks with (Megatron-LM's default 0.1 each) */
    for (int d = 0; d < 2 && m->dropout; d++) {
        int key = d ? MG_HID_DROP : MG_ATT_DROP;
        char *end = NULL;
        double p = st->given[key] ? strtod(st->str[key], &end) : GS_DROPOUT_DEFAULT;
        if (!(p >= 0.0 && p < 1.0) || (end && (end == st->str[key] || *end))) /* "lots" is no rate */
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s %s: expected a probability 0 <= p < 1",
                                gs__mg_where(origin, ws, st->at[key], where, sizeof where),
                                d ? "hidden-dropout" : "attention-dropout", st->str[key]);
        *(d ? &m->hidden_dropout : &m->attention_dropout) = p;
    }
    if (!m->dropout)
        m->attention_dropout = m->hidden_dropout = 0.0;
    m->norm = GS_NORM_LAYERNORM;
    if (st->given[MG_NORM]) {
        static const char *const norms[] = {"LayerNorm", "RMSNorm"};
        int e = 0;
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_NORM], where, sizeof where),
                            "normalization", st->str[MG_NORM], norms, 2, &e, err)) != GS_OK)
            return rc;
        m->norm = e == 1 ? GS_NORM_RMSNORM : GS_NORM_LAYERNORM;
    }
    m->pos = GS_POS_LEARNED;
    if (st->given[MG_POSEMB]) {
        static const char *const kinds[] = {"learned_absolute", "rope", "none"};
        int e = 0;
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_POSEMB], where, sizeof where),
                            "position-embedding-type", st->str[MG_POSEMB], kinds, 3, &e, err)))
            return rc;
        m->pos = e == 0 ? GS_POS_LEARNED : GS_POS_ROPE; /* none: no parameters, like rope */
    }
    if (st->given[MG_ROPE] || st->given[MG_NO_POSEMB])
        m->pos = GS_POS_ROPE;
    if (st->given[MG_MAXPOS] && st->u[MG_MAXPOS] != m->seq &&
        (rc = gs__import_ignored(ignored, err,
                           "%s: --max-position-embeddings: ignored: gridstep sizes a learned "
                           "position table by --seq-length",
                           gs__mg_where(origin, ws, st->at[MG_MAXPOS], where, sizeof where))) != GS_OK)
        return rc;
    return GS_OK;
}

gs_status gs__mg_model(const char *origin, const gs__words *ws, const gs__mg_state *st,
                          const gs_import_opts *o, uint64_t tp, gs_scenario *s, gs_diag *ignored,
                          gs_error *err)
{
    static const gs__mg_act arch[] = {MG_GQA, MG_GROUPS, MG_FFN, MG_VOCAB, MG_PADDED_VOCAB, MG_VOCAB_DIV, MG_KV_CH,
                                  MG_SWIGLU, MG_UNTIE, MG_NORM, MG_POSEMB, MG_NO_POSEMB, MG_ROPE,
                                  MG_NO_BIAS, MG_ATT_DROP, MG_HID_DROP, MG_MAXPOS};
    char where[600];
    gs_model *m = &s->model;
    int shape = st->given[MG_LAYERS] || st->given[MG_HIDDEN] || st->given[MG_HEADS];
    gs_status rc;
    if (!shape) {
        if (!o->model)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: no model: found neither --model nor --num-layers, "
                                "--hidden-size and --num-attention-heads, expected one of them",
                                origin ? origin : "--from-megatron");
        for (size_t i = 0; i < sizeof arch / sizeof arch[0]; i++)
            if (st->given[arch[i]] &&
                (rc = gs__import_ignored(ignored, err,
                                   "%s: %s: ignored: the model is --model %s (no "
                                   "--num-layers/--hidden-size/--num-attention-heads)",
                                   gs__mg_where(origin, ws, st->at[arch[i]], where, sizeof where),
                                   ws->w[st->at[arch[i]]].text, m->name)) != GS_OK)
                return rc;
        if (st->given[MG_SEQ])
            m->seq = st->u[MG_SEQ];
        return GS_OK;
    }
    static const gs__mg_act need[] = {MG_LAYERS, MG_HIDDEN, MG_HEADS};
    static const char *const need_names[] = {"--num-layers", "--hidden-size",
                                             "--num-attention-heads"};
    for (int i = 0; i < 3; i++)
        if (!st->given[need[i]]) {
            size_t at = st->given[MG_LAYERS] ? st->at[MG_LAYERS]
                        : st->given[MG_HIDDEN] ? st->at[MG_HIDDEN] : st->at[MG_HEADS];
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: model shape: found no %s, expected --num-layers, "
                                "--hidden-size and --num-attention-heads together",
                                gs__mg_where(origin, ws, at, where, sizeof where), need_names[i]);
        }
    uint64_t preset_vocab = o->model ? m->vocab : 0, preset_seq = o->model ? m->seq : 0;
    char name[GS_MODEL_NAME_BYTES];
    snprintf(name, sizeof name, "%s", o->model ? m->name : "megatron");
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->layers = st->u[MG_LAYERS];
    m->hidden = st->u[MG_HIDDEN];
    m->heads = st->u[MG_HEADS];
    m->kv_heads = m->heads;
    if (st->given[MG_GROUPS]) {
        if (st->given[MG_GQA])
            m->kv_heads = st->u[MG_GROUPS];
        else if ((rc = gs__import_ignored(ignored, err,
                                    "%s: --num-query-groups: ignored: Megatron-LM uses it only "
                                    "with --group-query-attention",
                                    gs__mg_where(origin, ws, st->at[MG_GROUPS], where,
                                             sizeof where))) != GS_OK)
            return rc;
    }
    m->head_dim = st->given[MG_KV_CH] ? st->u[MG_KV_CH] : 0;
    m->mlp = st->given[MG_SWIGLU] ? GS_MLP_SWIGLU : GS_MLP_GELU;
    if (st->given[MG_FFN])
        m->ffn = st->u[MG_FFN];
    else if (m->mlp == GS_MLP_SWIGLU)
        m->ffn = 4 * m->hidden * 2 / 3 / 64 * 64; /* Megatron-LM's SwiGLU default */
    else
        m->ffn = 4 * m->hidden;
    m->seq = st->given[MG_SEQ] ? st->u[MG_SEQ] : preset_seq;
    if (!m->seq)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: no --seq-length: expected --seq-length N (or --model M for its "
                            "sequence length)",
                            origin ? origin : "--from-megatron");
    uint64_t vocab = st->given[MG_VOCAB] ? st->u[MG_VOCAB] : preset_vocab;
    if (!vocab && !st->given[MG_PADDED_VOCAB])
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: no --vocab-size: Megatron-LM takes it from the tokenizer, "
                            "expected --vocab-size N (or --model M for its vocabulary)",
                            origin ? origin : "--from-megatron");
    uint64_t div = st->given[MG_VOCAB_DIV] ? st->u[MG_VOCAB_DIV] : IMPORT_MEGATRON_VOCAB_DIVISOR;
    uint64_t multiple, padded; /* Megatron-LM pads the vocabulary to a multiple of div x tp */
    if (gs_mul_u64(div, tp, &multiple) != 0 || gs_add_u64(vocab, multiple - 1, &padded) != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --make-vocab-size-divisible-by %llu: padding the vocabulary (%llu) to a multiple "
                            "of it times the tensor-parallel size (%llu) overflows 64 bits; expected a divisor like "
                            "128",
                            origin ? origin : "--from-megatron", (unsigned long long)div, (unsigned long long)vocab,
                            (unsigned long long)tp);
    m->vocab = padded / multiple * multiple;
    if (st->given[MG_PADDED_VOCAB]) { /* the padded size itself (Megatron's printed arguments hold it) */
        if (st->u[MG_PADDED_VOCAB] < vocab || st->u[MG_PADDED_VOCAB] % tp != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --padded-vocab-size: found %" PRIu64 ", expected a multiple of tp %" PRIu64
                                " no smaller than the vocabulary %" PRIu64,
                                gs__mg_where(origin, ws, st->at[MG_PADDED_VOCAB], where, sizeof where),
                                st->u[MG_PADDED_VOCAB], tp, vocab);
        m->vocab = st->u[MG_PADDED_VOCAB];
    }
    m->tied_embeddings = !st->given[MG_UNTIE];
    m->bias = !st->given[MG_NO_BIAS];
    return mg_model_kinds(origin, ws, st, m, ignored, err);
}


/* An ignored-flag line for the flag at action act: "WHERE: --FLAG: ignored: WHY". */
static gs_status mg_ignored(const char *origin, const gs__words *ws, const gs__mg_state *st, gs__mg_act act,
                            const char *why, gs_diag *ignored, gs_error *err)
{
    char where[600];
    return gs__import_ignored(ignored, err, "%s: %s: ignored: %s", gs__mg_where(origin, ws, st->at[act], where, sizeof where),
                              ws->w[st->at[act]].text, why);
}

/* HSDP through Megatron-FSDP: --num-distributed-optimizer-instances K > 1 replicates the sharded
 * model K times (the outer data-parallel dimension); gridstep's hybrid_shard is FULL_SHARD inside
 * each replica with the replicas' gradients all-reduced, i.e. optim_grads_params inside and
 * --outer-dp-sharding-strategy no_shard. (The replica size is checked against the node after
 * the mesh exists: engine/import_megatron.c.) */
static gs_status mg_hsdp(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                         gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    uint64_t k = st->given[MG_DOI] ? st->u[MG_DOI] : 1;
    if (st->given[MG_OUTER_DP] && k > 1) {
        static const char *const outer[] = {"no_shard", "optim"};
        int e = 0;
        gs_status rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_OUTER_DP], where, sizeof where),
                                     "outer-dp-sharding-strategy", st->str[MG_OUTER_DP], outer, 2, &e, err);
        if (rc != GS_OK)
            return rc;
        if (e == 1)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --outer-dp-sharding-strategy optim: sharding the optimizer state across "
                                "the replicas too is not modelled, expected no_shard (HSDP: hybrid_shard)",
                                where);
    } else if (st->given[MG_OUTER_DP]) {
        gs_status rc = mg_ignored(origin, ws, st, MG_OUTER_DP,
                                  "Megatron-LM uses it only with --num-distributed-optimizer-instances > 1",
                                  ignored, err);
        if (rc != GS_OK)
            return rc;
    }
    if (k <= 1)
        return GS_OK;
    gs__mg_where(origin, ws, st->at[MG_DOI], where, sizeof where);
    if (!st->given[MG_CUSTOM_FSDP])
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --num-distributed-optimizer-instances %" PRIu64 " without --use-megatron-fsdp: "
                            "a distributed optimizer sharded within replicas is not modelled, expected 1 (or "
                            "--use-megatron-fsdp for HSDP)",
                            where, k);
    if (g->sharding != GS_SHARD_ZERO3)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --num-distributed-optimizer-instances %" PRIu64 " with --data-parallel-sharding-"
                            "strategy %s: gridstep's HSDP (hybrid_shard) shards parameters, gradients and "
                            "optimizer state inside a replica, expected optim_grads_params",
                            where, k, st->str[MG_DP_SHARD]);
    if (s->grid.dp % k != 0 || s->grid.dp / k < 2)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --num-distributed-optimizer-instances: found %" PRIu64 ", expected a divisor of "
                            "the data-parallel size %" PRIu64 " that leaves at least 2 ranks per replica",
                            where, k, s->grid.dp);
    g->sharding = GS_SHARD_HYBRID_SHARD;
    return GS_OK;
}

/* Sharding: DDP, the distributed optimizer (zero1), torch FSDP2, Megatron-FSDP (and its HSDP). */
static gs_status mg_sharding(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                             gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    gs_status rc;
    int e = 0;
    g->framework = GS_FW_MEGATRON; /* the flags are Megatron-LM's: its fused kernels (TE) */
    g->sharding = GS_SHARD_NO_SHARD;
    if (st->given[MG_DIST_OPT])
        g->sharding = GS_SHARD_ZERO1;
    if (st->given[MG_TORCH_FSDP2]) {
        g->sharding = st->given[MG_FSDP2_NO_RESHARD] ? GS_SHARD_GRAD_OP : GS_SHARD_FULL_SHARD;
        g->torch_fsdp2 = 1;
    }
    else if (st->given[MG_FSDP2_NO_RESHARD] &&
             (rc = mg_ignored(origin, ws, st, MG_FSDP2_NO_RESHARD, "Megatron-LM uses it only with --use-torch-fsdp2",
                              ignored, err)) != GS_OK)
        return rc;
    if (st->given[MG_CUSTOM_FSDP]) {
        static const gs_sharding map[] = {GS_SHARD_NO_SHARD, GS_SHARD_ZERO1, GS_SHARD_ZERO2, GS_SHARD_ZERO3};
        g->sharding = GS_SHARD_ZERO3; /* Megatron-FSDP's default optim_grads_params */
        if (st->given[MG_DP_SHARD]) {
            static const char *const names[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
            if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_DP_SHARD], where, sizeof where),
                                    "data-parallel-sharding-strategy", st->str[MG_DP_SHARD], names, 4, &e, err)) !=
                GS_OK)
                return rc;
            g->sharding = map[e];
        }
    } else if (st->given[MG_DP_SHARD] &&
               (rc = mg_ignored(origin, ws, st, MG_DP_SHARD, "Megatron-LM uses it only with --use-megatron-fsdp",
                                ignored, err)) != GS_OK) {
        return rc;
    }
    if ((rc = mg_hsdp(origin, ws, st, s, ignored, err)) != GS_OK)
        return rc;
    g->reshard_after_forward = gs_sharding_shards_params(g->sharding);
    if (st->given[MG_OPTIMIZER] && strcasecmp(st->str[MG_OPTIMIZER], "adam") != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --optimizer: found '%s', expected adam (the optimizer state "
                            "gridstep accounts for)",
                            gs__mg_where(origin, ws, st->at[MG_OPTIMIZER], where, sizeof where),
                            st->str[MG_OPTIMIZER]);
    return GS_OK;
}

/* --recompute-modules NAME... (Megatron-Core's selective recompute modules; its default
 * core_attn when absent): each word may hold several names ("mla_up_proj,mlp" or a dump's
 * "['mla_up_proj', 'mlp']"). */
static gs_status mg_recompute_modules(const char *origin, const gs__words *ws, const gs__mg_state *st,
                                      uint32_t *mask, gs_error *err)
{
    char where[600], word[64];
    *mask = GS_RC_DEFAULT;
    if (!st->given[MG_REC_MODULES])
        return GS_OK;
    size_t at = st->at[MG_REC_MODULES];
    uint32_t m = 0;
    for (size_t i = at; i < ws->n; i++) {
        const char *t = ws->w[i].text;
        if (i == at) { /* the flag itself: its =VALUE, if any */
            t = strchr(t, '=');
            if (!t)
                continue;
            t++;
        } else if (strncmp(t, "--", 2) == 0) {
            break;
        }
        if (gs_recompute_modules_parse(t, &m, word, sizeof word) != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --recompute-modules: found '%s', expected core_attn, moe_act, layernorm, "
                                "mla_up_proj, mlp, moe or shared_experts",
                                gs__mg_where(origin, ws, i, where, sizeof where), word);
    }
    *mask = m;
    return GS_OK;
}

/* Activation recompute: --recompute-activations / -granularity / -method / -num-layers /
 * -modules. */
static gs_status mg_recompute(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                              gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    gs_status rc;
    int e = 0;
    /* recompute */
    g->recompute = GS_RECOMPUTE_NONE;
    if (st->given[MG_REC_ACT])
        g->recompute = GS_RECOMPUTE_SELECTIVE;
    if (st->given[MG_REC_GRAN]) {
        static const char *const grans[] = {"full", "selective"};
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_REC_GRAN], where, sizeof where),
                            "recompute-granularity", st->str[MG_REC_GRAN], grans, 2, &e, err)))
            return rc;
        g->recompute = e == 0 ? GS_RECOMPUTE_FULL : GS_RECOMPUTE_SELECTIVE;
    }
    int method = 0; /* uniform */
    if (st->given[MG_REC_METHOD]) {
        static const char *const methods[] = {"uniform", "block"};
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_REC_METHOD], where, sizeof where),
                            "recompute-method", st->str[MG_REC_METHOD], methods, 2, &method, err)))
            return rc;
    }
    /* the middle stages' layers when the embedding / loss count in the split */
    uint64_t per_stage =
        (s->model.layers + (uint64_t)st->given[MG_ACCOUNT_EMB] + (uint64_t)st->given[MG_ACCOUNT_LOSS]) / s->grid.pp;
    if (g->recompute == GS_RECOMPUTE_FULL && method == 1 && st->given[MG_REC_NLAYERS] &&
        st->u[MG_REC_NLAYERS] < per_stage)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --recompute-num-layers: found %" PRIu64 " with --recompute-method "
                            "block, expected at least the %" PRIu64 " layers of a stage: gridstep "
                            "recomputes every layer of a stage or none",
                            gs__mg_where(origin, ws, st->at[MG_REC_NLAYERS], where, sizeof where),
                            st->u[MG_REC_NLAYERS], per_stage);
    if (g->recompute == GS_RECOMPUTE_FULL && method == 0 && st->given[MG_REC_NLAYERS] &&
        st->u[MG_REC_NLAYERS] > 1 &&
        (rc = gs__import_ignored(ignored, err,
                           "%s: --recompute-num-layers %" PRIu64 ": ignored: uniform groups of "
                           "layers keep fewer checkpoints; gridstep keeps one per layer",
                           gs__mg_where(origin, ws, st->at[MG_REC_NLAYERS], where, sizeof where),
                           st->u[MG_REC_NLAYERS])) != GS_OK)
        return rc;
    if ((rc = mg_recompute_modules(origin, ws, st, &g->recompute_modules, err)) != GS_OK)
        return rc;
    if (g->recompute != GS_RECOMPUTE_SELECTIVE && st->given[MG_REC_MODULES] &&
        (rc = gs__import_ignored(ignored, err,
                                 "%s: --recompute-modules: ignored: Megatron-LM uses it only with "
                                 "--recompute-granularity selective",
                                 gs__mg_where(origin, ws, st->at[MG_REC_MODULES], where, sizeof where))) != GS_OK)
        return rc;
    char why[160];
    if (gs_recompute_modules_check(gs_strategy_recompute_modules(g), s->model.mla.kv_lora_rank != 0,
                                   s->model.moe.experts != 0, s->model.moe.shared_experts != 0, why,
                                   sizeof why) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --recompute-modules: %s",
                            gs__mg_where(origin, ws, st->at[MG_REC_MODULES], where, sizeof where), why);
    if (g->recompute != GS_RECOMPUTE_FULL) {
        static const gs__mg_act only_full[] = {MG_REC_METHOD, MG_REC_NLAYERS};
        for (int i = 0; i < 2; i++)
            if (st->given[only_full[i]] &&
                (rc = gs__import_ignored(ignored, err,
                                   "%s: %s: ignored: Megatron-LM uses it only with "
                                   "--recompute-granularity full",
                                   gs__mg_where(origin, ws, st->at[only_full[i]], where, sizeof where),
                                   ws->w[st->at[only_full[i]]].text)) != GS_OK)
                return rc;
    }
    return GS_OK;
}

/* The precision-aware optimizer (--use-precision-aware-optimizer: TE FusedAdam with the master's
 * 16-bit remainders under bf16) and Adam's moments, --exp-avg-dtype / --exp-avg-sq-dtype (fp32
 * without the switch). gridstep holds both moments in fp32 or both in bf16 (strategy.adam_dtype). */
static gs_status mg_adam_dtype(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_strategy *g,
                               gs_error *err)
{
    char where[600];
    static const char *const dtypes[] = {"fp32", "bf16"};
    int d[2] = {0, 0};
    const gs__mg_act acts[2] = {MG_EXP_AVG, MG_EXP_AVG_SQ};
    for (int i = 0; i < 2; i++) {
        if (!st->given[acts[i]])
            continue;
        gs__mg_where(origin, ws, st->at[acts[i]], where, sizeof where);
        gs_status rc = gs__mg_choice(where, i ? "exp-avg-sq-dtype" : "exp-avg-dtype", st->str[acts[i]], dtypes, 2,
                                     &d[i], err);
        if (rc != GS_OK)
            return rc;
        if (d[i] && !st->given[MG_PA_OPT])
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s bf16 without --use-precision-aware-optimizer: expected "
                                "the switch (Megatron-LM asserts it)", where, i ? "exp-avg-sq-dtype" : "exp-avg-dtype");
    }
    if (d[0] != d[1])
        return gs_error_set(err, GS_ERR_INPUT, "%s: --exp-avg-dtype %s with --exp-avg-sq-dtype %s: gridstep holds "
                            "both moments in one dtype (strategy.adam_dtype); expected the same for both",
                            gs__mg_where(origin, ws, st->at[st->given[MG_EXP_AVG_SQ] ? MG_EXP_AVG_SQ : MG_EXP_AVG],
                                         where, sizeof where),
                            dtypes[d[0]], dtypes[d[1]]);
    g->adam_bf16 = d[0];
    g->precision_aware = st->given[MG_PA_OPT];
    return GS_OK;
}

/* --hierarchical-context-parallel-sizes A B under --cp-comm-type a2a+p2p: the a2a level's A
 * (grid.cp_a2a), with A x B the context-parallel size (Megatron-LM's validate_args asserts the
 * product; Transformer Engine's a2a+p2p takes exactly the two levels). */
static gs_status mg_hier_cp(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                            gs_diag *ignored, gs_error *err)
{
    char where[600];
    size_t at = st->at[MG_HIER_CP];
    gs__mg_where(origin, ws, at, where, sizeof where);
    if (s->strategy.cp_comm != GS_CP_A2A_P2P)
        return gs__import_ignored(ignored, err, "%s: --hierarchical-context-parallel-sizes: ignored: its groups "
                                  "serve --cp-comm-type a2a+p2p only", where);
    uint64_t size[2], n = 0, cp = st->given[MG_CP] ? st->u[MG_CP] : 1;
    for (size_t i = at + 1; i < ws->n && strncmp(ws->w[i].text, "--", 2) != 0; i++) {
        gs__mg_where(origin, ws, i, where, sizeof where);
        if (n == 2)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --hierarchical-context-parallel-sizes: found a third size, "
                                "expected two (a2a+p2p's a2a and p2p levels)", where);
        gs_status rc = gs__mg_count(where, "hierarchical-context-parallel-sizes", ws->w[i].text, &size[n++], 0, err);
        if (rc != GS_OK)
            return rc;
    }
    gs__mg_where(origin, ws, at, where, sizeof where);
    if (n != 2 || size[0] < 2 || size[1] < 2 || cp % size[0] != 0 || cp / size[0] != size[1]) {
        char found[80];
        if (n == 2)
            snprintf(found, sizeof found, "%llu x %llu", (unsigned long long)size[0], (unsigned long long)size[1]);
        else
            snprintf(found, sizeof found, "%llu size%s", (unsigned long long)n, n == 1 ? "" : "s");
        return gs_error_set(err, GS_ERR_INPUT, "%s: --hierarchical-context-parallel-sizes: found %s, expected two "
                            "sizes of 2 or more whose product is --context-parallel-size %llu",
                            where, found, (unsigned long long)cp);
    }
    s->grid.cp_a2a = size[0];
    return GS_OK;
}

/* --cp-comm-type (Megatron-Core: one type, or one per layer): p2p, all_gather, a2a or a2a+p2p
 * (with --hierarchical-context-parallel-sizes), the same for every layer. */
static gs_status mg_cp_comm(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                            gs_diag *ignored, gs_error *err)
{
    char where[600];
    static const char *const types[] = {"p2p", "all_gather", "a2a", "a2a+p2p"};
    gs_strategy *g = &s->strategy;
    if (!st->given[MG_CP_COMM]) {
        if (st->given[MG_HIER_CP])
            return mg_hier_cp(origin, ws, st, s, ignored, err);
        return GS_OK;
    }
    size_t at = st->at[MG_CP_COMM];
    int first = -1;
    for (size_t i = at + 1; i < ws->n && strncmp(ws->w[i].text, "--", 2) != 0; i++) {
        int k;
        gs__mg_where(origin, ws, i, where, sizeof where);
        gs_status rc = gs__mg_choice(where, "cp-comm-type", ws->w[i].text, types, 4, &k, err);
        if (rc != GS_OK)
            return rc;
        if (first >= 0 && k != first)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --cp-comm-type: found %s after %s, expected one type for "
                                "every layer (gridstep builds every block alike)", where, types[k], types[first]);
        first = k;
    }
    if (first < 0) { /* --cp-comm-type=TYPE */
        gs__mg_where(origin, ws, at, where, sizeof where);
        gs_status rc = gs__mg_choice(where, "cp-comm-type", st->str[MG_CP_COMM], types, 4, &first, err);
        if (rc != GS_OK)
            return rc;
    }
    g->cp_comm = (gs_cp_comm)first;
    if (g->cp_comm == GS_CP_A2A_P2P && !st->given[MG_HIER_CP]) {
        gs__mg_where(origin, ws, at, where, sizeof where);
        return gs_error_set(err, GS_ERR_INPUT, "%s: --cp-comm-type a2a+p2p: found no "
                            "--hierarchical-context-parallel-sizes, expected the a2a and p2p levels' sizes "
                            "(Megatron-LM asserts them)", where);
    }
    return st->given[MG_HIER_CP] ? mg_hier_cp(origin, ws, st, s, ignored, err) : GS_OK;
}

/* Training and gradient precision, gradient buckets and when they reduce. */
static gs_status mg_precision(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                              gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    gs_status rc;
    /* precision */
    if (st->given[MG_BF16] && st->given[MG_FP16])
        return gs_error_set(err, GS_ERR_INPUT, "%s: found both --bf16 and --fp16, expected one",
                            gs__mg_where(origin, ws, st->at[MG_FP16], where, sizeof where));
    g->precision = st->given[MG_BF16] ? GS_PREC_BF16 : st->given[MG_FP16] ? GS_PREC_FP16
                                                                          : GS_PREC_FP32;
    g->sequence_parallel = st->given[MG_SP];
    if ((rc = gs__mg_fp8(origin, ws, st, g, ignored, err)) != GS_OK || (rc = mg_cp_comm(origin, ws, st, s, ignored, err)) != GS_OK ||
        (rc = mg_adam_dtype(origin, ws, st, g, err)) != GS_OK)
        return rc;
    /* gradients (Megatron-LM's validate_args): under bf16 accumulated and reduced in fp32 unless
     * --grad-reduce-in-bf16 (which wins over --accumulate-allreduce-grads-in-fp32); under fp16
     * in fp16 unless --accumulate-allreduce-grads-in-fp32; fp32 training keeps fp32 */
    int bf16 = g->precision == GS_PREC_BF16;
    if (st->given[MG_GRAD_BF16] && !bf16 &&
        (rc = gs__import_ignored(ignored, err, "%s: --grad-reduce-in-bf16: ignored: Megatron-LM reads it only with "
                                               "--bf16",
                                 gs__mg_where(origin, ws, st->at[MG_GRAD_BF16], where, sizeof where))) != GS_OK)
        return rc;
    if (st->given[MG_GRAD_BF16] && bf16 && st->given[MG_GRAD_FP32] &&
        (rc = gs__import_ignored(ignored, err, "%s: --accumulate-allreduce-grads-in-fp32: ignored: "
                                               "--grad-reduce-in-bf16 wins under --bf16 (Megatron-LM)",
                                 gs__mg_where(origin, ws, st->at[MG_GRAD_FP32], where, sizeof where))) != GS_OK)
        return rc;
    if (bf16)
        g->grad_dtype = st->given[MG_GRAD_BF16] ? GS_PREC_BF16 : GS_PREC_FP32;
    else
        g->grad_dtype = g->precision == GS_PREC_FP16 && st->given[MG_GRAD_FP32] ? GS_PREC_FP32 : -1;
    /* DDP / distributed-optimizer buckets, in parameters: --ddp-bucket-size, else Megatron-Core's
     * max(40M, 1M x dp) (DistributedDataParallel); gridstep splits each unit's gradient into
     * buckets of that many bytes, rounded up to a whole MiB (strategy.bucket_mb's unit) */
    /* DDP and the distributed optimizer reduce under the backward only with --overlap-grad-reduce
     * (otherwise in one bucket after it); Megatron-FSDP's reduce-scatters are per layer anyway */
    g->overlap_grad_reduce = st->given[MG_OGR] || st->given[MG_CUSTOM_FSDP] || st->given[MG_TORCH_FSDP2] ||
                             (g->sharding == GS_SHARD_ZERO2 && g->grad_sync != GS_GRAD_SYNC_LAST);
    {
        uint64_t dp = s->grid.dp ? s->grid.dp : 1, bucket = 40000000, bytes;
        if (dp > 40 && gs_mul_u64(dp, 1000000, &bucket) != 0)
            bucket = UINT64_MAX;
        if (st->given[MG_BUCKET])
            bucket = st->u[MG_BUCKET];
        if (gs_mul_u64(bucket, gs_grad_bytes(g), &bytes) != 0 || bytes > UINT64_MAX - ((1u << 20) - 1))
            return gs_error_set(err, GS_ERR_INPUT, "%s: --ddp-bucket-size: found %" PRIu64 " parameters, too large",
                                gs__mg_where(origin, ws, st->at[MG_BUCKET], where, sizeof where), bucket);
        g->bucket_bytes = (bytes + ((1u << 20) - 1)) >> 20 << 20;
    }
    /* Megatron-Core's DistributedDataParallel buckets only model chunk 0 of pipeline rank 0
     * (bucket_size None elsewhere: one bucket per model chunk); Megatron-FSDP and torch FSDP2 are
     * other classes, reducing per unit */
    if (!st->given[MG_CUSTOM_FSDP] && !st->given[MG_TORCH_FSDP2] && gs_strategy_can_bucket_first(g))
        g->bucket_stages = GS_BUCKET_STAGES_FIRST;
    return GS_OK;
}

/* Overlaps Megatron asserts the preconditions of, the attention kernel and the loss. */
static gs_status mg_overlaps(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                             gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    gs_status rc;
    int e = 0;
    /* overlaps: the distributed optimizer's parameter all-gather under the next forward (Megatron
     * asserts the distributed optimizer); TE's userbuffer overlap of the TP collectives (Megatron
     * asserts sequence parallelism) */
    if (st->given[MG_OPG]) {
        const char *at = gs__mg_where(origin, ws, st->at[MG_OPG], where, sizeof where);
        if (!st->given[MG_OGR] && g->sharding != GS_SHARD_NO_SHARD)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --overlap-param-gather needs --overlap-grad-reduce (Megatron-LM asserts "
                                "it): found no --overlap-grad-reduce",
                                at);
        if (g->sharding == GS_SHARD_ZERO1 || g->sharding == GS_SHARD_ZERO2)
            g->overlap_param_gather = 1;
        else if (g->sharding == GS_SHARD_NO_SHARD)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --overlap-param-gather needs --use-distributed-optimizer (Megatron-LM "
                                "asserts it): found no distributed optimizer",
                                at);
        else if ((rc = gs__import_ignored(ignored, err,
                                          "%s: --overlap-param-gather: ignored: Megatron-FSDP gathers each "
                                          "layer before its forward anyway (the %s schedule)",
                                          at, gs_sharding_name(g->sharding))) != GS_OK)
            return rc;
    }
    g->ep_overlap = st->given[MG_EP_OVERLAP] != 0; /* its asserts: the scenario's (engine/scenario_mesh.c) */
    if (st->given[MG_TPCO]) {
        const char *at = gs__mg_where(origin, ws, st->at[MG_TPCO], where, sizeof where);
        if (s->grid.tp > 1 && !g->sequence_parallel)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --tp-comm-overlap needs --sequence-parallel (Megatron-LM asserts it): "
                                "found tensor-model-parallel-size %llu without it",
                                at, (unsigned long long)s->grid.tp);
        if (s->grid.tp > 1)
            g->tp_comm_overlap = 1;
        else if ((rc = gs__import_ignored(ignored, err,
                                          "%s: --tp-comm-overlap: ignored: tensor-model-parallel-size 1 has "
                                          "no TP communication to overlap",
                                          at)) != GS_OK)
            return rc;
    }
    /* attention kernel */
    if (st->given[MG_ATT_BACKEND]) {
        static const char *const backends[] = {"flash", "fused", "auto", "unfused", "local"};
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_ATT_BACKEND], where, sizeof where),
                            "attention-backend", st->str[MG_ATT_BACKEND], backends, 5, &e, err)))
            return rc;
        g->flash_attention = e < 3;
    }
    if (st->given[MG_FLASH])
        g->flash_attention = 1;
    /* the loss: Megatron's vocab_parallel_cross_entropy (tensor ops) unless fused */
    g->cross_entropy = st->given[MG_XENT_FUSION] ? GS_XENT_FUSED : GS_XENT_UNFUSED;
    /* CUDA graphs: --cuda-graph-impl local (Megatron-Core's own capture) or transformer_engine
     * (TE's make_graphed_callables); --enable-cuda-graph and --external-cuda-graph before it */
    g->cuda_graphs = st->given[MG_CUDA_GRAPH] || st->given[MG_CUDA_GRAPH_EXT];
    if (st->given[MG_CUDA_GRAPH_IMPL]) {
        static const char *const impls[] = {"none", "local", "transformer_engine"};
        if ((rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_CUDA_GRAPH_IMPL], where, sizeof where),
                                "cuda-graph-impl", st->str[MG_CUDA_GRAPH_IMPL], impls, 3, &e, err)))
            return rc;
        g->cuda_graphs = e > 0;
    }
    return GS_OK;
}

/* --pipeline-model-parallel-layout: the stages' layers (engine/pipeline_layout.h); Megatron-Core
 * derives the virtual stages per rank from its length and refuses the other split flags beside
 * it (arguments.py, transformer_config.py). */
static gs_status mg_layout(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                           gs_error *err)
{
    char where[600], why[200];
    gs__mg_where(origin, ws, st->at[MG_PP_LAYOUT], where, sizeof where);
    static const gs__mg_act others[] = {MG_FIRST_LAYERS, MG_LAST_LAYERS, MG_ACCOUNT_EMB, MG_ACCOUNT_LOSS,
                                        MG_VPP_LAYERS};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (st->given[others[i]])
            return gs_error_set(err, GS_ERR_INPUT, "%s: --pipeline-model-parallel-layout with %s: expected one way "
                                "of splitting the layers (Megatron-LM refuses both)",
                                where, ws->w[st->at[others[i]]].text);
    if (gs_layout_parse(st->str[MG_PP_LAYOUT], &s->grid.layout, why, sizeof why) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --pipeline-model-parallel-layout: %s", where, why);
    uint64_t n = s->grid.layout.n, pp = s->grid.pp;
    if (n % pp != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --pipeline-model-parallel-layout names %" PRIu64 " stages: "
                            "expected a multiple of --pipeline-model-parallel-size %" PRIu64, where, n, pp);
    if (st->given[MG_VPP_STAGES] && st->u[MG_VPP_STAGES] != n / pp)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --num-virtual-stages-per-pipeline-rank %" PRIu64 " beside a layout "
                            "of %" PRIu64 " stages over pp %" PRIu64 ": expected %" PRIu64, where,
                            st->u[MG_VPP_STAGES], n, pp, n / pp);
    if (n / pp > 1) {
        s->strategy.pipeline = GS_PIPE_INTERLEAVED;
        s->strategy.virtual_stages = n / pp;
    }
    return GS_OK;
}

/* The pipeline schedule: 1F1B, or interleaved with virtual stages. */
static gs_status mg_pipeline(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                             gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    g->pipeline = GS_PIPE_1F1B;
    g->virtual_stages = 1;
    /* uneven first / last stages (the scenario checks them against the layers and pp) */
    s->grid.first_stage_layers = st->given[MG_FIRST_LAYERS] ? st->u[MG_FIRST_LAYERS] : 0;
    s->grid.last_stage_layers = st->given[MG_LAST_LAYERS] ? st->u[MG_LAST_LAYERS] : 0;
    /* the embedding / loss as layers of the split; Megatron-LM refuses them beside the first /
     * last counts (megatron/core/transformer/transformer_config.py, __post_init__) */
    s->grid.account_for_embedding = st->given[MG_ACCOUNT_EMB];
    s->grid.account_for_loss = st->given[MG_ACCOUNT_LOSS];
    if ((s->grid.account_for_embedding || s->grid.account_for_loss) &&
        (s->grid.first_stage_layers || s->grid.last_stage_layers))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --%s with --decoder-%s-pipeline-num-layers: expected one of the two (Megatron-LM "
                            "refuses both)",
                            gs__mg_where(origin, ws, st->at[s->grid.account_for_embedding ? MG_ACCOUNT_EMB
                                                                                           : MG_ACCOUNT_LOSS],
                                         where, sizeof where),
                            s->grid.account_for_embedding ? "account-for-embedding-in-pipeline-split"
                                                          : "account-for-loss-in-pipeline-split",
                            s->grid.first_stage_layers ? "first" : "last");
    if (st->given[MG_PP_LAYOUT])
        return mg_layout(origin, ws, st, s, err);
    /* megatron/training/arguments.py: --num-layers-per-virtual-pipeline-stage divides the layers
     * per stage with the embedding / loss counted */
    uint64_t split_layers = s->model.layers + (uint64_t)s->grid.account_for_embedding +
                            (uint64_t)s->grid.account_for_loss;
    uint64_t per_stage = split_layers / s->grid.pp;
    uint64_t vs = 0;
    if (st->given[MG_VPP_LAYERS] && (s->grid.first_stage_layers || s->grid.last_stage_layers))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --num-layers-per-virtual-pipeline-stage with uneven first / last stages: "
                            "expected --num-virtual-stages-per-pipeline-rank (the stages hold different layer counts)",
                            gs__mg_where(origin, ws, st->at[MG_VPP_LAYERS], where, sizeof where));
    if (st->given[MG_VPP_LAYERS]) {
        uint64_t n = st->u[MG_VPP_LAYERS];
        if (per_stage % n != 0 || split_layers % s->grid.pp != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --num-layers-per-virtual-pipeline-stage: found %" PRIu64
                                ", expected a divisor of the %" PRIu64 " layers per stage (%" PRIu64
                                " layers%s / pp %" PRIu64 ")",
                                gs__mg_where(origin, ws, st->at[MG_VPP_LAYERS], where, sizeof where),
                                n, per_stage, split_layers,
                                split_layers != s->model.layers ? ", the embedding / loss counted," : "",
                                s->grid.pp);
        vs = per_stage / n;
    }
    if (st->given[MG_VPP_STAGES]) {
        if (vs && vs != st->u[MG_VPP_STAGES])
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --num-virtual-stages-per-pipeline-rank: found %" PRIu64
                                ", expected %" PRIu64 " as --num-layers-per-virtual-pipeline-stage "
                                "implies (or one of the two)",
                                gs__mg_where(origin, ws, st->at[MG_VPP_STAGES], where, sizeof where),
                                st->u[MG_VPP_STAGES], vs);
        vs = st->u[MG_VPP_STAGES];
    }
    if (vs > 1) {
        if (s->grid.pp < 2)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: virtual pipeline stages: found %" PRIu64 " with "
                                "--pipeline-model-parallel-size 1, expected pp >= 2",
                                gs__mg_where(origin, ws,
                                         st->given[MG_VPP_LAYERS] ? st->at[MG_VPP_LAYERS]
                                                                  : st->at[MG_VPP_STAGES],
                                         where, sizeof where),
                                vs);
        g->pipeline = GS_PIPE_INTERLEAVED;
        g->virtual_stages = vs;
    }
    return GS_OK;
}

gs_status gs__mg_strategy(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                          gs_diag *ignored, gs_error *err)
{
    gs_status rc;
    if ((rc = mg_sharding(origin, ws, st, s, ignored, err)) != GS_OK ||
        (rc = mg_recompute(origin, ws, st, s, ignored, err)) != GS_OK ||
        (rc = mg_precision(origin, ws, st, s, ignored, err)) != GS_OK ||
        (rc = mg_overlaps(origin, ws, st, s, ignored, err)) != GS_OK)
        return rc;
    return mg_pipeline(origin, ws, st, s, ignored, err);
}
