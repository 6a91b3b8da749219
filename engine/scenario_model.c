/* The scenario's model section (engine/scenario_internal.h): a preset name, or a mapping that
 * changes a preset's fields or describes a model of its own (Llama conventions fill the rest;
 * moe and mla sub-mappings make it a mixture of experts or give it latent attention),
 * validated and bounded so that the ledger's byte counts fit in 64 bits. It fills the caller's
 * gs_model (a preset is copied by value) and borrows the loader's nodes. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/scenario_internal.h"
#include "engine/units.h"

/* Largest training state per parameter over every precision: bf16/fp16 weights 2 + fp32 master
 * 4 + Adam m 4 + v 4 + grads 2; fp32: weights 4 + m 4 + v 4 + grads 4. Bytes per parameter. */
#define GS_SCENARIO_STATE_BYTES_PER_PARAM 18u /* the most: bf16 with fp32 gradients */

/* Most layers a model may have: per-layer tables (partition, ledger) are sized by it; the
 * largest published models have under 200. */
#define GS_SCENARIO_MAX_LAYERS 1000000u

/* --------------------------------------------------------------- kinds and rates ---- */

static const char *const norm_names[] = {"rmsnorm", "layernorm"};
static const char *const mlp_names[] = {"swiglu", "gelu"};
static const char *const pos_names[] = {"rope", "learned"};

static int parse_in(const char *s, const char *const *names, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    return -1;
}

static int parse_norm(const char *s, int *out)
{
    return parse_in(s, norm_names, 2, out); /* index == gs_norm_kind */
}

static int parse_mlp(const char *s, int *out)
{
    return parse_in(s, mlp_names, 2, out); /* index == gs_mlp_kind */
}

static int parse_pos(const char *s, int *out)
{
    return parse_in(s, pos_names, 2, out); /* index == gs_pos_kind */
}

/* An optional real in [0, below), refused as "expected <expected>". */
static gs_status opt_real_below(const gs__yaml_loader *l, const yaml_node_t *map, const char *section, const char *key,
                                double below, const char *expected, double *dst, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    if (!v)
        return GS_OK;
    char found[96];
    const char *t = gs__yaml_is_bare_scalar(v) ? gs__yaml_scalar_text(v) : NULL;
    char *end = NULL;
    double d = t ? strtod(t, &end) : 0.0;
    if (!t || end == t || *end != '\0' || !isdigit((unsigned char)t[strspn(t, " +-.")]) || !(d >= 0.0 && d < below))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s.%s: found %s, expected %s", section, key,
                                gs__yaml_describe(v, found, sizeof found), expected);
    *dst = d;
    return GS_OK;
}

/* A probability of dropping: 0 <= p < 1. */
static gs_status opt_probability(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                 const char *key, double *dst, int *given)
{
    return opt_real_below(l, map, section, key, 1.0, "a probability 0 <= p < 1", dst, given);
}

/* ------------------------------------------------------------------------- model ---- */

static const char *const model_keys[] = {
    "preset", "name", "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn",
    "vocab", "seq", "tied_embeddings", "bias", "dropout", "attention_dropout", "hidden_dropout", "norm", "mlp",
    "pos", "moe", "mla", "mtp_layers",
};

/* mtp_layers: an integer >= 0, at most 16 (Megatron-Core's MTP depth; DeepSeek-V3 uses 1). */
static gs_status model_mtp(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    yaml_node_t *n = gs__yaml_lookup(l, v, "mtp_layers", NULL);
    if (!n)
        return GS_OK;
    gs_status st = gs__scenario_value_u64(l, n, "model.mtp_layers", &m->mtp_layers, 1);
    if (st == GS_OK && m->mtp_layers > 16)
        return gs__yaml_fail_at(l, n, GS_ERR_INPUT, "model.mtp_layers: found %llu, expected 0 to 16 multi-token "
                                "prediction modules", (unsigned long long)m->mtp_layers);
    return st;
}

static gs_status model_preset(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                              gs_model *m)
{
    const char *name =
        gs__scenario_value_name(l, v, field, "a model preset name (see `gridstep presets`)");
    if (!name)
        return GS_ERR_INPUT;
    const gs_model *p = gs_model_preset_find(name);
    if (!p) {
        const char *near = gs_model_preset_nearest(name);
        char found[96], hint[96] = "";
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return gs__yaml_fail_at(
            l, v, GS_ERR_INPUT,
            "%s: found unknown model preset '%s'%s, expected a preset name (see "
            "`gridstep presets`) or a mapping of model fields",
            field, gs__yaml_shown(v, found, sizeof found), hint);
    }
    *m = *p;
    return GS_OK;
}

/* A user model without a preset: Llama conventions fill what is not given
 * (heads = hidden / 128, ffn = SwiGLU's 8h/3 rounded up to 256 or GELU's 4h, vocab 32000). */
static gs_status model_user_defaults(const gs__yaml_loader *l, const yaml_node_t *map, gs_model *m)
{
    static const char *const required[] = {"layers", "hidden", "seq"};
    for (size_t i = 0; i < 3; i++)
        if (!gs__yaml_lookup(l, map, required[i], NULL))
            return gs__yaml_fail_at(
                l, map, GS_ERR_INPUT,
                "model: no '%s': found a model mapping without 'preset', expected "
                "layers, hidden and seq (or preset: NAME)",
                required[i]);
    if (m->heads == 0) {
        if (m->hidden % 128 != 0)
            return gs__yaml_fail_at(
                l, map, GS_ERR_INPUT,
                "model: no 'heads' and hidden=%llu is not a multiple of 128: found "
                "no heads, expected heads: N",
                (unsigned long long)m->hidden);
        m->heads = m->hidden / 128;
    }
    if (m->ffn == 0) {
        uint64_t x;
        if (gs_mul_u64(m->hidden, 8, &x) != 0)
            return gs__yaml_fail_at(
                l, gs__yaml_lookup(l, map, "hidden", NULL), GS_ERR_OVERFLOW,
                "model.hidden is too large: found %llu, expected a size whose MLP "
                "width fits in 64 bits",
                (unsigned long long)m->hidden);
        if (m->mlp == GS_MLP_SWIGLU)
            m->ffn = (x / 3 + 255) / 256 * 256;
        else
            m->ffn = x / 2;
    }
    if (m->vocab == 0)
        m->vocab = 32000;
    return GS_OK;
}

/* Which of a model mapping's fields were given. */
typedef struct model_given {
    int hidden, heads, head_dim, attention_dropout, hidden_dropout;
} model_given;

/* The model a mapping starts from: its preset, or a custom model with the default kinds. */
static gs_status model_start(const gs__yaml_loader *l, const yaml_node_t *preset, gs_model *m)
{
    if (preset)
        return model_preset(l, preset, "model.preset", m);
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "custom");
    m->norm = GS_NORM_RMSNORM;
    m->mlp = GS_MLP_SWIGLU;
    m->pos = GS_POS_ROPE;
    m->source = NULL;
    return GS_OK;
}

/* The mapping's names, counts, switches and dropout rates. */
static gs_status model_fields(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m, model_given *g)
{
    gs_status st;
    if ((st = gs__scenario_opt_string(l, v, "model", "name", m->name, sizeof m->name)) ||
        (st = gs__scenario_opt_count(l, v, "model", "params", &m->nominal_params, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "model", "layers", &m->layers, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "model", "hidden", &m->hidden, &g->hidden)) ||
        (st = gs__scenario_opt_count(l, v, "model", "heads", &m->heads, &g->heads)) ||
        (st = gs__scenario_opt_count(l, v, "model", "kv_heads", &m->kv_heads, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "model", "head_dim", &m->head_dim, &g->head_dim)) ||
        (st = gs__scenario_opt_count(l, v, "model", "ffn", &m->ffn, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "model", "vocab", &m->vocab, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "model", "seq", &m->seq, NULL)) ||
        (st = model_mtp(l, v, m)) ||
        (st = gs__scenario_opt_bool(l, v, "model", "tied_embeddings", &m->tied_embeddings, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, "model", "bias", &m->bias, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, "model", "dropout", &m->dropout, NULL)) ||
        (st = opt_probability(l, v, "model", "attention_dropout", &m->attention_dropout,
                              &g->attention_dropout)) ||
        (st = opt_probability(l, v, "model", "hidden_dropout", &m->hidden_dropout, &g->hidden_dropout)))
        return st;
    return GS_OK;
}

/* A preset with params is a nominal variant of it; with params and a shape as well, the count
 * would silently override what the shape gives. */
static gs_status model_params_alone(const gs__yaml_loader *l, const yaml_node_t *v, const yaml_node_t *preset,
                                    const yaml_node_t *params_node)
{
    static const char *const shape_keys[] = {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab",
                                             "moe",    "mla"};
    for (size_t k = 0; preset && params_node && k < sizeof shape_keys / sizeof shape_keys[0]; k++)
        if (gs__yaml_lookup(l, v, shape_keys[k], NULL))
            return gs__yaml_fail_at(l, params_node, GS_ERR_INPUT,
                                    "model.params: found with model.preset and model.%s, expected params with "
                                    "a preset alone (a nominal model of that size) or the preset's shape "
                                    "changed without params (params would override the count %s gives)",
                                    shape_keys[k], shape_keys[k]);
    return GS_OK;
}

/* The dropout rates: given only with dropout on; absent, the default rate (0 without dropout). */
static gs_status model_dropout_rates(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m,
                                     const model_given *g)
{
    for (int d = 0; d < 2; d++) {
        const char *key = d ? "hidden_dropout" : "attention_dropout";
        double *rate = d ? &m->hidden_dropout : &m->attention_dropout;
        if (d ? g->hidden_dropout : g->attention_dropout) {
            const yaml_node_t *at = gs__yaml_lookup(l, v, key, NULL);
            if (!m->dropout)
                return gs__yaml_fail_at(l, at, GS_ERR_INPUT,
                                        "model.%s: found a dropout rate with dropout: false, expected "
                                        "dropout: true (or no rate)", key);
        } else {
            *rate = m->dropout ? GS_DROPOUT_DEFAULT : 0.0;
        }
    }
    return GS_OK;
}

/* norm, mlp and pos. */
static gs_status model_kinds(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    static const gs__scenario_names norms = {norm_names, 2, parse_norm};
    static const gs__scenario_names mlps = {mlp_names, 2, parse_mlp};
    static const gs__scenario_names poss = {pos_names, 2, parse_pos};
    gs_status st;
    int kind = (int)m->norm;
    if ((st = gs__scenario_opt_enum(l, v, "model", "norm", &norms, &kind)))
        return st;
    m->norm = (gs_norm_kind)kind;
    kind = (int)m->mlp;
    if ((st = gs__scenario_opt_enum(l, v, "model", "mlp", &mlps, &kind)))
        return st;
    m->mlp = (gs_mlp_kind)kind;
    kind = (int)m->pos;
    if ((st = gs__scenario_opt_enum(l, v, "model", "pos", &poss, &kind)))
        return st;
    m->pos = (gs_pos_kind)kind;
    return GS_OK;
}

/* ------------------------------------------------------------- experts and MLA ---- */

static const char *const moe_keys[] = {"experts", "top_k", "expert_ffn", "shared_experts", "dense_layers",
                                       "every", "capacity_factor", "routing_skew", "groups", "group_topk"};
static const char *const mla_keys[] = {"q_lora_rank", "kv_lora_rank", "rope_head_dim"};

/* An optional integer >= 0 of a sub-mapping. */
static gs_status opt_u64(const gs__yaml_loader *l, const yaml_node_t *map, const char *section, const char *key,
                         uint64_t *dst)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    char field[96];
    if (!v)
        return GS_OK;
    snprintf(field, sizeof field, "%s.%s", section, key);
    return gs__scenario_value_u64(l, v, field, dst, 1);
}

/* An optional finite real >= 0 (0: off). */
static gs_status opt_nonnegative(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                 const char *key, double *dst)
{
    return opt_real_below(l, map, section, key, 1e6, "a number >= 0 (0: off)", dst, NULL);
}

/* The sub-mapping `key` of the model mapping (NULL when absent), its keys checked. */
static gs_status sub_mapping(const gs__yaml_loader *l, const yaml_node_t *v, const char *key,
                             const char *const *keys, size_t nkeys, const char *expected, yaml_node_t **out)
{
    char section[32], found[96];
    *out = gs__yaml_lookup(l, v, key, NULL);
    if (!*out)
        return GS_OK;
    snprintf(section, sizeof section, "model.%s", key);
    if ((*out)->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, *out, GS_ERR_INPUT, "%s: found %s, expected a mapping %s", section,
                                gs__yaml_describe(*out, found, sizeof found), expected);
    return gs__yaml_check_keys(l, *out, section, keys, nkeys);
}

/* moe: {experts, top_k, expert_ffn, shared_experts, dense_layers, every, capacity_factor, routing_skew,
 * groups, group_topk}, over the
 * preset's when there is one; each inconsistency is reported at its key. */
static gs_status model_moe(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    yaml_node_t *e;
    gs_status st = sub_mapping(l, v, "moe", moe_keys, sizeof moe_keys / sizeof moe_keys[0],
                               "{experts: N, top_k: K, ...}", &e);
    if (st != GS_OK || !e)
        return st;
    gs_moe *x = &m->moe;
    if ((st = gs__scenario_opt_count(l, e, "model.moe", "experts", &x->experts, NULL)) ||
        (st = gs__scenario_opt_count(l, e, "model.moe", "top_k", &x->top_k, NULL)) ||
        (st = gs__scenario_opt_count(l, e, "model.moe", "expert_ffn", &x->expert_ffn, NULL)) ||
        (st = opt_u64(l, e, "model.moe", "shared_experts", &x->shared_experts)) ||
        (st = opt_u64(l, e, "model.moe", "dense_layers", &x->dense_layers)) ||
        (st = gs__scenario_opt_count(l, e, "model.moe", "every", &x->every, NULL)) ||
        (st = opt_nonnegative(l, e, "model.moe", "capacity_factor", &x->capacity_factor)) ||
        (st = opt_nonnegative(l, e, "model.moe", "routing_skew", &x->routing_skew)) ||
        (st = opt_u64(l, e, "model.moe", "groups", &x->groups)) ||
        (st = opt_u64(l, e, "model.moe", "group_topk", &x->group_topk)))
        return st;
    const yaml_node_t *at;
    if (x->experts < 2)
        return gs__yaml_fail_at(l, (at = gs__yaml_lookup(l, e, "experts", NULL)) ? at : e, GS_ERR_INPUT,
                                "model.moe.experts: found %llu, expected at least 2 routed experts",
                                (unsigned long long)x->experts);
    if (x->top_k == 0)
        return gs__yaml_fail_at(l, e, GS_ERR_INPUT, "model.moe: no 'top_k', expected top_k: K (experts per token)");
    if (x->top_k > x->experts)
        return gs__yaml_fail_at(l, (at = gs__yaml_lookup(l, e, "top_k", NULL)) ? at : e, GS_ERR_INPUT,
                                "model.moe.top_k: found %llu, expected at most experts = %llu",
                                (unsigned long long)x->top_k, (unsigned long long)x->experts);
    if ((x->groups == 0) != (x->group_topk == 0) || (x->groups && x->experts % x->groups) ||
        x->group_topk > x->groups || (x->groups && x->top_k > x->group_topk * (x->experts / x->groups)))
        return gs__yaml_fail_at(l, (at = gs__yaml_lookup(l, e, "groups", NULL)) ? at : e, GS_ERR_INPUT,
                                "model.moe: groups = %llu, group_topk = %llu, expected both (or neither), "
                                "groups dividing experts = %llu, 1 <= group_topk <= groups and room for "
                                "top_k = %llu experts in group_topk groups",
                                (unsigned long long)x->groups, (unsigned long long)x->group_topk,
                                (unsigned long long)x->experts, (unsigned long long)x->top_k);
    if (m->layers && x->dense_layers >= m->layers)
        return gs__yaml_fail_at(l, (at = gs__yaml_lookup(l, e, "dense_layers", NULL)) ? at : e, GS_ERR_INPUT,
                                "model.moe.dense_layers: found %llu, expected fewer than layers = %llu (at "
                                "least one MoE block)",
                                (unsigned long long)x->dense_layers, (unsigned long long)m->layers);
    if (m->layers && x->every > m->layers)
        return gs__yaml_fail_at(l, (at = gs__yaml_lookup(l, e, "every", NULL)) ? at : e, GS_ERR_INPUT,
                                "model.moe.every: found %llu, expected at most layers = %llu (a MoE block "
                                "every N blocks after the dense_layers leading ones)",
                                (unsigned long long)x->every, (unsigned long long)m->layers);
    return GS_OK;
}

/* mla: {q_lora_rank, kv_lora_rank, rope_head_dim}, over the preset's when there is one. */
static gs_status model_mla(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    yaml_node_t *a;
    gs_status st = sub_mapping(l, v, "mla", mla_keys, sizeof mla_keys / sizeof mla_keys[0],
                               "{kv_lora_rank: N, q_lora_rank: N, rope_head_dim: N}", &a);
    if (st != GS_OK || !a)
        return st;
    if ((st = opt_u64(l, a, "model.mla", "q_lora_rank", &m->mla.q_lora_rank)) ||
        (st = gs__scenario_opt_count(l, a, "model.mla", "kv_lora_rank", &m->mla.kv_lora_rank, NULL)) ||
        (st = opt_u64(l, a, "model.mla", "rope_head_dim", &m->mla.rope_head_dim)))
        return st;
    if (m->mla.kv_lora_rank == 0)
        return gs__yaml_fail_at(l, a, GS_ERR_INPUT, "model.mla: no 'kv_lora_rank', expected kv_lora_rank: N");
    if (m->bias)
        return gs__yaml_fail_at(l, a, GS_ERR_INPUT, "model.mla: found with bias: true, expected bias: false "
                                                    "(MLA's projections have no biases)");
    return GS_OK;
}

/* A mapping of model fields: a preset changed, or a model of its own. */
static gs_status model_mapping(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    gs_status st = gs__yaml_check_keys(l, v, "model", model_keys, sizeof model_keys / sizeof model_keys[0]);
    if (st != GS_OK)
        return st;
    yaml_node_t *preset = gs__yaml_lookup(l, v, "preset", NULL);
    yaml_node_t *params_node = gs__yaml_lookup(l, v, "params", NULL);
    model_given g = {0, 0, 0, 0, 0};
    if ((st = model_start(l, preset, m)) || (st = model_fields(l, v, m, &g)) ||
        (st = model_params_alone(l, v, preset, params_node)) || (st = model_dropout_rates(l, v, m, &g)) ||
        (st = model_kinds(l, v, m)))
        return st;
    /* A preset's head_dim follows hidden / heads unless given: derive it again. */
    if ((g.hidden || g.heads) && !g.head_dim)
        m->head_dim = 0;
    if (preset && (g.hidden || g.heads || gs__yaml_lookup(l, v, "layers", NULL) ||
                   gs__yaml_lookup(l, v, "params", NULL) || gs__yaml_lookup(l, v, "moe", NULL) ||
                   gs__yaml_lookup(l, v, "mla", NULL)))
        m->source = NULL; /* no longer the published configuration */
    if (!preset && (st = model_user_defaults(l, v, m)) != GS_OK)
        return st;
    if ((st = model_moe(l, v, m)) || (st = model_mla(l, v, m)))
        return st;
    /* MLA expands a key and a value per head */
    if (m->mla.kv_lora_rank && !gs__yaml_lookup(l, v, "kv_heads", NULL))
        m->kv_heads = m->heads;
    return GS_OK;
}

/* The model's own checks (which fill its derived fields), then the bounds the ledger and
 * the schedule need. */
static gs_status model_limits(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    gs_status st = gs_model_validate(m, l->err);
    if (st != GS_OK) {
        gs__scenario_prefix_at(l, v);
        return st;
    }
    if (m->layers > GS_SCENARIO_MAX_LAYERS) {
        const yaml_node_t *at = v->type == YAML_MAPPING_NODE ? gs__yaml_lookup(l, v, "layers", NULL) : NULL;
        return gs__yaml_fail_at(l, at ? at : v, GS_ERR_INPUT,
                                "model.layers is too large: found %llu, expected at most %u (the "
                                "ledger and the schedule keep entries per layer)",
                                (unsigned long long)m->layers, GS_SCENARIO_MAX_LAYERS);
    }
    uint64_t params = gs_model_params(m), state;
    if (gs_mul_u64(params, GS_SCENARIO_STATE_BYTES_PER_PARAM, &state) != 0)
        return gs__yaml_fail_at(l, v, GS_ERR_OVERFLOW,
                                "model is too large: %llu parameters x %u bytes of training state "
                                "overflow 64-bit byte counts: expected at most %llu parameters",
                                (unsigned long long)params, GS_SCENARIO_STATE_BYTES_PER_PARAM,
                                (unsigned long long)(UINT64_MAX /
                                                     GS_SCENARIO_STATE_BYTES_PER_PARAM));
    return GS_OK;
}

gs_status gs__scenario_load_model(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    gs_status st = GS_OK;
    char found[96];
    if (v->type == YAML_SCALAR_NODE)
        st = model_preset(l, v, "model", m);
    else if (v->type == YAML_MAPPING_NODE)
        st = model_mapping(l, v, m);
    else
        return gs__yaml_fail_at(
            l, v, GS_ERR_INPUT,
            "model: found %s, expected a preset name or a mapping of model fields",
            gs__yaml_describe(v, found, sizeof found));
    if (st != GS_OK)
        return st;
    return model_limits(l, v, m);
}
