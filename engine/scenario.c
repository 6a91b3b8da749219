/* Scenario loading: YAML text (libyaml's document API) -> gs_scenario, every error placed at
 * file:line:column and saying what was found and what was expected. */
#include "engine/scenario.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/units.h"
#include "engine/yaml_doc.h"

/* Largest training state per parameter over every precision: bf16/fp16 weights 2 + fp32 master
 * 4 + Adam m 4 + v 4 + grads 2; fp32: weights 4 + m 4 + v 4 + grads 4. Bytes per parameter. */
#define GS_SCENARIO_STATE_BYTES_PER_PARAM 18u /* the most: bf16 with fp32 gradients */

/* Most layers a model may have: per-layer tables (partition, ledger) are sized by it; the
 * largest published models have under 200. */
#define GS_SCENARIO_MAX_LAYERS 1000000u

/* ------------------------------------------------------------------------ messages ---- */

/* Prefixes an error set by another module (whose message names its subject) with the
 * location of node n. */
static void prefix_at(const gs__yaml_loader *l, const yaml_node_t *n)
{
    gs_error_prefix(l->err, "%s:%lu:%lu", l->path, gs__yaml_node_line(n), gs__yaml_node_col(n));
}

/* Error for a name outside a fixed list: "FIELD: found unknown value 'x' (did you mean 'y'?),
 * expected one of ...". */
static gs_status fail_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                           const char *const *names, size_t n)
{
    char found[96], list[512], hint[96] = "";
    gs__yaml_describe(v, found, sizeof found);
    gs__yaml_join_names(names, n, list, sizeof list);
    if (v && v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(v)) {
        const char *near = gs__yaml_nearest_name(gs__yaml_scalar_text(v), names, n);
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s: found unknown value '%s'%s, expected one of %s", field,
                                gs__yaml_shown(v, found, sizeof found), hint, list);
    }
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected one of %s", field, found,
                            list);
}

/* ------------------------------------------------------------------ scalar values ---- */

/* 1 when text is a number (as gs_parse_count reads it) of 2^64 or more. */
static int count_too_large(const char *text)
{
    const char *p = text;
    while (*p == ' ')
        p++;
    int digit = 0;
    for (const char *q = p; *q; q++)
        if (isdigit((unsigned char)*q))
            digit = 1;
    if (!digit)
        return 0;
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p)
        return 0;
    double mult = 1.0;
    if (*end == 'K' || *end == 'k')
        mult = 1e3, end++;
    else if (*end == 'M')
        mult = 1e6, end++;
    else if (*end == 'B' || *end == 'G')
        mult = 1e9, end++;
    else if (*end == 'T')
        mult = 1e12, end++;
    if (*end != '\0')
        return 0;
    v *= mult;
    return v >= 18446744073709551616.0; /* 2^64; also +inf from 1e400 */
}

static const char expect_count[] = "a positive integer (like 32, 7e9 or 6.7B)";

/* A positive integer: plain, integral scientific notation (7e9) or K/M/B/T suffixed. */
static gs_status value_u64(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                           uint64_t *out, int allow_zero)
{
    char found[96];
    if (!gs__yaml_is_bare_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expect_count);
    const char *t = gs__yaml_scalar_text(v);
    const char *p = t;
    while (*p == ' ')
        p++;
    uint64_t u = 0;
    int rc = gs_parse_count(t, &u);
    if (*p == '-') {
        char *end = NULL;
        (void)strtod(p, &end);
        if (end == p || !isdigit((unsigned char)p[strspn(p, "-+.")]))
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                    gs__yaml_describe(v, found, sizeof found), expect_count);
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s must be positive: found %s, expected %s",
                                field, gs__yaml_describe(v, found, sizeof found), expect_count);
    }
    if (rc == -2 && count_too_large(t))
        return gs__yaml_fail_at(l, v, GS_ERR_OVERFLOW,
                                "%s is too large: found %s, expected at most 18446744073709551615 "
                                "(2^64 - 1)",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (rc != 0)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expect_count);
    if (u == 0 && !allow_zero)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s must be positive: found %s, expected %s",
                                field, gs__yaml_describe(v, found, sizeof found), expect_count);
    *out = u;
    return GS_OK;
}

static gs_status value_count(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                             uint64_t *out)
{
    return value_u64(l, v, field, out, 0);
}

/* A finite real number > 0 (and <= max when max > 0). */
static gs_status value_real(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                            double max, double *out)
{
    char found[96];
    if (!gs__yaml_is_bare_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    const char *t = gs__yaml_scalar_text(v);
    char *end = NULL;
    errno = 0;
    double d = strtod(t, &end);
    if (end == t || *end != '\0' || !isdigit((unsigned char)t[strspn(t, " +-.")]))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (!isfinite(d) || (errno == ERANGE && fabs(d) > 1.0))
        return gs__yaml_fail_at(l, v, GS_ERR_OVERFLOW,
                                "%s is too large: found %s, expected a finite "
                                "positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (!(d > 0.0))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s must be positive: found %s, expected a number "
                                "> 0",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (max > 0.0 && d > max)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s is out of range: found %s, expected a number in "
                                "(0, %g]",
                                field, gs__yaml_describe(v, found, sizeof found), max);
    *out = d;
    return GS_OK;
}

/* true/false/yes/no (any case). */
static gs_status value_bool(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                            int *out)
{
    char found[96];
    if (v && v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_quoted(v)) {
        const char *t = gs__yaml_scalar_text(v);
        /* YAML 1.1's booleans, all of them: yes accepted but on refused would surprise */
        if (strcasecmp(t, "true") == 0 || strcasecmp(t, "yes") == 0 || strcasecmp(t, "on") == 0) {
            *out = 1;
            return GS_OK;
        }
        if (strcasecmp(t, "false") == 0 || strcasecmp(t, "no") == 0 || strcasecmp(t, "off") == 0) {
            *out = 0;
            return GS_OK;
        }
    }
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected true or false (or yes/no, on/off)", field,
                            gs__yaml_describe(v, found, sizeof found));
}

/* A non-empty string scalar that fits in len bytes (NUL included). */
static gs_status value_string(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                              char *buf, size_t len)
{
    char found[96];
    if (!gs__yaml_is_text_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a string", field,
                                gs__yaml_describe(v, found, sizeof found));
    size_t n = v->data.scalar.length;
    if (n >= len || strlen(gs__yaml_scalar_text(v)) != n)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s is too long or holds a NUL: found %zu bytes, "
                                "expected at most %zu",
                                field, n, len - 1);
    memcpy(buf, gs__yaml_scalar_text(v), n + 1);
    return GS_OK;
}

/* A preset name: a plain or quoted non-null scalar. Returns its text or NULL after an error. */
static const char *value_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                              const char *expected)
{
    char found[96];
    if (!gs__yaml_is_text_scalar(v)) {
        gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                         gs__yaml_describe(v, found, sizeof found), expected);
        return NULL;
    }
    return gs__yaml_scalar_text(v);
}

/* Optional fields of a mapping: absent leaves *dst alone; `given` (may be NULL) says whether the
 * key was there. */
static gs_status opt_count(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                           const char *key, uint64_t *dst, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_count(l, v, field, dst);
}

static gs_status opt_real(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                          const char *key, double max, double *dst, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_real(l, v, field, max, dst);
}

/* A probability of dropping: 0 <= p < 1. */
static gs_status opt_probability(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                 const char *key, double *dst, int *given)
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
    if (!t || end == t || *end != '\0' || !isdigit((unsigned char)t[strspn(t, " +-.")]) || !(d >= 0.0 && d < 1.0))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s.%s: found %s, expected a probability 0 <= p < 1", section,
                                key, gs__yaml_describe(v, found, sizeof found));
    *dst = d;
    return GS_OK;
}

static gs_status opt_bool(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                          const char *key, int *dst, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_bool(l, v, field, dst);
}

static gs_status opt_string(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                            const char *key, char *buf, size_t len)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_string(l, v, field, buf, len);
}

/* A name from a fixed table: parse() returns 0 on success; names[] lists the canonical ones. */
static gs_status opt_enum(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                          const char *key, const char *const *names, size_t n,
                          int (*parse)(const char *, int *), int *dst, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    if (v->type != YAML_SCALAR_NODE || gs__yaml_scalar_is_null(v) ||
        parse(gs__yaml_scalar_text(v), dst) != 0)
        return fail_name(l, v, field, names, n);
    return GS_OK;
}

/* ------------------------------------------------------------------- enum adaptors ---- */

#define GS_ENUM_ADAPTOR(fn, parse_fn, type)                                                   \
    static int fn(const char *s, int *out)                                                     \
    {                                                                                          \
        type t;                                                                                \
        if (parse_fn(s, &t) != 0)                                                              \
            return -1;                                                                         \
        *out = (int)t;                                                                         \
        return 0;                                                                              \
    }

GS_ENUM_ADAPTOR(parse_sharding, gs_sharding_parse, gs_sharding)
GS_ENUM_ADAPTOR(parse_prefetch, gs_prefetch_parse, gs_prefetch)
GS_ENUM_ADAPTOR(parse_recompute, gs_recompute_parse, gs_recompute)
GS_ENUM_ADAPTOR(parse_precision, gs_precision_parse, gs_precision)
GS_ENUM_ADAPTOR(parse_pipeline, gs_pipeline_parse, gs_pipeline)
GS_ENUM_ADAPTOR(parse_bucket_stages, gs_bucket_stages_parse, gs_bucket_stages)
GS_ENUM_ADAPTOR(parse_xent, gs_xent_parse, gs_xent)
GS_ENUM_ADAPTOR(parse_framework, gs_framework_parse, gs_framework)
GS_ENUM_ADAPTOR(parse_attention, gs_attn_impl_parse, gs_attn_impl)

static const char *const norm_names[] = {"rmsnorm", "layernorm"};
static const char *const mlp_names[] = {"swiglu", "gelu"};
static const char *const pos_names[] = {"rope", "learned"};
static const char *const grad_sync_names[] = {"auto", "last", "every"};

/* grad_dtype: auto (-1: the training precision) or a precision name */
static int parse_grad_dtype(const char *s, int *out)
{
    if (strcasecmp(s, "auto") == 0) {
        *out = -1;
        return 0;
    }
    return parse_precision(s, out);
}

static int parse_grad_sync(const char *s, int *out)
{
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, grad_sync_names[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

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

/* ------------------------------------------------------------------------- model ---- */

static const char *const model_keys[] = {
    "preset", "name", "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn",
    "vocab", "seq", "tied_embeddings", "bias", "dropout", "attention_dropout", "hidden_dropout", "norm", "mlp",
    "pos",
};

static gs_status model_preset(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                              gs_model *m)
{
    const char *name = value_name(l, v, field, "a model preset name (see `gridstep presets`)");
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

static gs_status load_model(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m)
{
    gs_status st = GS_OK;
    char found[96];
    if (v->type == YAML_SCALAR_NODE) {
        st = model_preset(l, v, "model", m);
        if (st != GS_OK)
            return st;
    } else if (v->type == YAML_MAPPING_NODE) {
        st = gs__yaml_check_keys(l, v, "model", model_keys,
                                 sizeof model_keys / sizeof model_keys[0]);
        if (st != GS_OK)
            return st;
        yaml_node_t *preset = gs__yaml_lookup(l, v, "preset", NULL);
        yaml_node_t *params_node = gs__yaml_lookup(l, v, "params", NULL);
        if (preset) {
            st = model_preset(l, preset, "model.preset", m);
            if (st != GS_OK)
                return st;
        } else {
            memset(m, 0, sizeof *m);
            snprintf(m->name, sizeof m->name, "custom");
            m->norm = GS_NORM_RMSNORM;
            m->mlp = GS_MLP_SWIGLU;
            m->pos = GS_POS_ROPE;
            m->source = NULL;
        }
        int hidden_given = 0, heads_given = 0, head_dim_given = 0, adrop_given = 0, hdrop_given = 0, kind;
        if ((st = opt_string(l, v, "model", "name", m->name, sizeof m->name)) ||
            (st = opt_count(l, v, "model", "params", &m->nominal_params, NULL)) ||
            (st = opt_count(l, v, "model", "layers", &m->layers, NULL)) ||
            (st = opt_count(l, v, "model", "hidden", &m->hidden, &hidden_given)) ||
            (st = opt_count(l, v, "model", "heads", &m->heads, &heads_given)) ||
            (st = opt_count(l, v, "model", "kv_heads", &m->kv_heads, NULL)) ||
            (st = opt_count(l, v, "model", "head_dim", &m->head_dim, &head_dim_given)) ||
            (st = opt_count(l, v, "model", "ffn", &m->ffn, NULL)) ||
            (st = opt_count(l, v, "model", "vocab", &m->vocab, NULL)) ||
            (st = opt_count(l, v, "model", "seq", &m->seq, NULL)) ||
            (st = opt_bool(l, v, "model", "tied_embeddings", &m->tied_embeddings, NULL)) ||
            (st = opt_bool(l, v, "model", "bias", &m->bias, NULL)) ||
            (st = opt_bool(l, v, "model", "dropout", &m->dropout, NULL)) ||
            (st = opt_probability(l, v, "model", "attention_dropout", &m->attention_dropout, &adrop_given)) ||
            (st = opt_probability(l, v, "model", "hidden_dropout", &m->hidden_dropout, &hdrop_given)))
            return st;
        /* a preset with params is a nominal variant of it; with params and a shape as well, the
         * count would silently override what the shape gives */
        static const char *const shape_keys[] = {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"};
        for (size_t k = 0; preset && params_node && k < sizeof shape_keys / sizeof shape_keys[0]; k++)
            if (gs__yaml_lookup(l, v, shape_keys[k], NULL))
                return gs__yaml_fail_at(l, params_node, GS_ERR_INPUT,
                                        "model.params: found with model.preset and model.%s, expected params with "
                                        "a preset alone (a nominal model of that size) or the preset's shape "
                                        "changed without params (params would override the count %s gives)",
                                        shape_keys[k], shape_keys[k]);
        for (int d = 0; d < 2; d++) {
            const char *key = d ? "hidden_dropout" : "attention_dropout";
            double *rate = d ? &m->hidden_dropout : &m->attention_dropout;
            if (d ? hdrop_given : adrop_given) {
                const yaml_node_t *at = gs__yaml_lookup(l, v, key, NULL);
                if (!m->dropout)
                    return gs__yaml_fail_at(l, at, GS_ERR_INPUT,
                                            "model.%s: found a dropout rate with dropout: false, expected "
                                            "dropout: true (or no rate)", key);
            } else {
                *rate = m->dropout ? GS_DROPOUT_DEFAULT : 0.0;
            }
        }
        kind = (int)m->norm;
        if ((st = opt_enum(l, v, "model", "norm", norm_names, 2, parse_norm, &kind, NULL)))
            return st;
        m->norm = (gs_norm_kind)kind;
        kind = (int)m->mlp;
        if ((st = opt_enum(l, v, "model", "mlp", mlp_names, 2, parse_mlp, &kind, NULL)))
            return st;
        m->mlp = (gs_mlp_kind)kind;
        kind = (int)m->pos;
        if ((st = opt_enum(l, v, "model", "pos", pos_names, 2, parse_pos, &kind, NULL)))
            return st;
        m->pos = (gs_pos_kind)kind;
        /* A preset's head_dim follows hidden / heads unless given: derive it again. */
        if ((hidden_given || heads_given) && !head_dim_given)
            m->head_dim = 0;
        if (preset && (hidden_given || heads_given || gs__yaml_lookup(l, v, "layers", NULL) ||
                       gs__yaml_lookup(l, v, "params", NULL)))
            m->source = NULL; /* no longer the published configuration */
        if (!preset && (st = model_user_defaults(l, v, m)) != GS_OK)
            return st;
    } else {
        return gs__yaml_fail_at(
            l, v, GS_ERR_INPUT,
            "model: found %s, expected a preset name or a mapping of model fields",
            gs__yaml_describe(v, found, sizeof found));
    }

    st = gs_model_validate(m, l->err);
    if (st != GS_OK) {
        prefix_at(l, v);
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

/* ----------------------------------------------------------------------- cluster ---- */

static const char *const cluster_keys[] = {
    "preset", "name", "nodes", "gpus_per_node", "nics_per_node", "gpu", "intra", "fabric",
    "nic", "nic_gbps", "rail_optimized", "oversubscription",
};

static const char *const gpu_keys[] = {
    "preset", "name", "bf16_tflops", "fp16_tflops", "fp32_tflops", "gemm_efficiency",
    "memory_gb", "hbm_tbps", "power_w",
};

/* Collects the names of a preset table for "expected one of" lists (at most cap). */
static size_t preset_names(size_t (*count)(void), const char *(*name_at)(size_t), const char **out,
                           size_t cap)
{
    size_t n = count();
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++)
        out[i] = name_at(i);
    return n;
}

static const char *gpu_name_at(size_t i)
{
    return gs_gpu_preset_at(i)->name;
}

static const char *fabric_name_at(size_t i)
{
    return gs_fabric_preset_at(i)->name;
}

static const char *nic_name_at(size_t i)
{
    return gs_nic_preset_at(i)->name;
}

static const char *cluster_name_at(size_t i)
{
    return gs_cluster_preset_at(i)->name;
}

/* Error for an unknown hardware preset name, listing the known ones. */
static gs_status fail_preset(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                             const char *kind, const char *near, size_t (*count)(void),
                             const char *(*name_at)(size_t))
{
    const char *names[64];
    char found[96], list[640] = "", hint[96] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    size_t n = preset_names(count, name_at, names, 64);
    gs__yaml_join_names(names, n, list, sizeof list);
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                            "%s: found unknown %s preset '%s'%s, expected one of %s", field, kind,
                            gs__yaml_shown(v, found, sizeof found), hint, list);
}

static gs_status load_gpu(const gs__yaml_loader *l, const yaml_node_t *v, gs_gpu *g)
{
    gs_status st;
    const yaml_node_t *name_node = v;
    if (v->type == YAML_MAPPING_NODE) {
        st = gs__yaml_check_keys(l, v, "cluster.gpu", gpu_keys,
                                 sizeof gpu_keys / sizeof gpu_keys[0]);
        if (st != GS_OK)
            return st;
        name_node = gs__yaml_lookup(l, v, "preset", NULL);
    } else if (v->type != YAML_SCALAR_NODE) {
        char found[96];
        return gs__yaml_fail_at(
            l, v, GS_ERR_INPUT,
            "cluster.gpu: found %s, expected a GPU preset name or a mapping of GPU "
            "fields",
            gs__yaml_describe(v, found, sizeof found));
    }
    if (name_node) {
        const char *field = name_node == v ? "cluster.gpu" : "cluster.gpu.preset";
        const char *name = value_name(l, name_node, field, "a GPU preset name");
        if (!name)
            return GS_ERR_INPUT;
        const gs_gpu *p = gs_gpu_preset_find(name);
        if (!p)
            return fail_preset(l, name_node, field, "GPU", gs_gpu_preset_nearest(name),
                               gs_gpu_preset_count, gpu_name_at);
        *g = *p;
    }
    if (v->type != YAML_MAPPING_NODE)
        return GS_OK;
    double tflops, gb, tbps;
    int given;
    const char *sec = "cluster.gpu";
    if ((st = opt_string(l, v, sec, "name", g->name, sizeof g->name)))
        return st;
    if ((st = opt_real(l, v, sec, "bf16_tflops", 0, &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_bf16 = tflops * 1e12;
    if ((st = opt_real(l, v, sec, "fp16_tflops", 0, &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_fp16 = tflops * 1e12;
    if ((st = opt_real(l, v, sec, "fp32_tflops", 0, &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_fp32 = tflops * 1e12;
    if ((st = opt_real(l, v, sec, "gemm_efficiency", 1.0, &g->gemm_efficiency, NULL)))
        return st;
    if ((st = opt_real(l, v, sec, "memory_gb", 0, &gb, &given)))
        return st;
    if (given) {
        double bytes = gb * 1e9; /* vendor GB */
        if (bytes >= 18446744073709551616.0)
            return gs__yaml_fail_at(
                l, gs__yaml_lookup(l, v, "memory_gb", NULL), GS_ERR_OVERFLOW,
                "cluster.gpu.memory_gb is too large: found %g, expected at most %g", gb,
                18446744073.709551615);
        g->hbm_bytes = (uint64_t)llround(bytes);
    }
    if ((st = opt_real(l, v, sec, "hbm_tbps", 0, &tbps, &given)))
        return st;
    if (given)
        g->hbm_bw = tbps * 1e12; /* TB/s -> bytes/s */
    double watts;
    if ((st = opt_real(l, v, sec, "power_w", 0, &watts, &given)))
        return st;
    if (given) {
        if (g->tdp_w > 0.0 && watts > g->tdp_w)
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "power_w", NULL), GS_ERR_INPUT,
                                    "cluster.gpu.power_w: found %g W, expected at most the GPU's %g W (its "
                                    "peaks are specified there; a lower cap slows the clock)",
                                    watts, g->tdp_w);
        if (watts < 1.0)
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "power_w", NULL), GS_ERR_INPUT,
                                    "cluster.gpu.power_w: found %g W, expected a power cap in watts (>= 1)", watts);
        g->power_w = watts;
    }
    g->source = NULL;
    return GS_OK;
}

static gs_status load_cluster(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c)
{
    gs_status st = GS_OK;
    char found[96];
    const char *name;
    if (v->type == YAML_SCALAR_NODE) {
        name = value_name(l, v, "cluster", "a cluster preset name");
        if (!name)
            return GS_ERR_INPUT;
        const gs_cluster *p = gs_cluster_preset_find(name);
        if (!p)
            return fail_preset(l, v, "cluster", "cluster", gs_cluster_preset_nearest(name),
                               gs_cluster_preset_count, cluster_name_at);
        *c = *p;
    } else if (v->type == YAML_MAPPING_NODE) {
        st = gs__yaml_check_keys(l, v, "cluster", cluster_keys,
                                 sizeof cluster_keys / sizeof cluster_keys[0]);
        if (st != GS_OK)
            return st;
        yaml_node_t *preset = gs__yaml_lookup(l, v, "preset", NULL);
        yaml_node_t *intra = gs__yaml_lookup(l, v, "intra", NULL);
        yaml_node_t *fabric = gs__yaml_lookup(l, v, "fabric", NULL);
        yaml_node_t *gpu = gs__yaml_lookup(l, v, "gpu", NULL);
        yaml_node_t *nic = gs__yaml_lookup(l, v, "nic", NULL);
        if (intra && fabric)
            return gs__yaml_fail_at(
                l, fabric, GS_ERR_INPUT,
                "cluster: found both 'intra' and 'fabric', expected one of them "
                "(they name the same thing: the intra-node fabric)");
        if (!intra)
            intra = fabric;
        if (preset) {
            name = value_name(l, preset, "cluster.preset", "a cluster preset name");
            if (!name)
                return GS_ERR_INPUT;
            const gs_cluster *p = gs_cluster_preset_find(name);
            if (!p)
                return fail_preset(l, preset, "cluster.preset", "cluster",
                                   gs_cluster_preset_nearest(name), gs_cluster_preset_count,
                                   cluster_name_at);
            *c = *p;
        } else {
            static const char *const required[] = {"gpu", "intra", "nic", "gpus_per_node"};
            const yaml_node_t *have[] = {gpu, intra, nic,
                                         gs__yaml_lookup(l, v, "gpus_per_node", NULL)};
            for (size_t i = 0; i < 4; i++)
                if (!have[i])
                    return gs__yaml_fail_at(
                        l, v, GS_ERR_INPUT,
                        "cluster: no '%s': found a cluster mapping without 'preset', "
                        "expected preset: NAME or gpu, intra, nic and gpus_per_node",
                        required[i]);
            memset(c, 0, sizeof *c);
            snprintf(c->name, sizeof c->name, "custom");
            c->nodes = 1;
            c->oversubscription = 1.0;
        }
        if (gpu && (st = load_gpu(l, gpu, &c->gpu)) != GS_OK)
            return st;
        if (intra) {
            const char *field = intra == fabric ? "cluster.fabric" : "cluster.intra";
            name = value_name(l, intra, field, "an intra-node fabric preset name");
            if (!name)
                return GS_ERR_INPUT;
            const gs_fabric *f = gs_fabric_preset_find(name);
            if (!f)
                return fail_preset(l, intra, field, "fabric", gs_fabric_preset_nearest(name),
                                   gs_fabric_preset_count, fabric_name_at);
            c->intra = *f;
        }
        if (nic) {
            name = value_name(l, nic, "cluster.nic", "a NIC preset name");
            if (!name)
                return GS_ERR_INPUT;
            const gs_nic *n = gs_nic_preset_find(name);
            if (!n)
                return fail_preset(l, nic, "cluster.nic", "NIC", gs_nic_preset_nearest(name),
                                   gs_nic_preset_count, nic_name_at);
            c->nic = *n;
        }
        double gbps;
        int gbps_given, npn_given;
        if ((st = opt_real(l, v, "cluster", "nic_gbps", 0, &gbps, &gbps_given)))
            return st;
        if (gbps_given && !(gbps >= 1e-3 && gbps <= 1e6)) /* gs_cluster_validate's nic.gbps range */
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "nic_gbps", NULL), GS_ERR_INPUT,
                                    "cluster.nic_gbps: found %g, expected a line rate in [0.001, 1e+06] Gb/s", gbps);
        if (gbps_given) {
            /* A new line rate scales the achievable bandwidth by the same factor. */
            if (c->nic.gbps > 0.0 && c->nic.bw > 0.0)
                c->nic.bw *= gbps / c->nic.gbps;
            else
                c->nic.bw = gbps * 1e9 / 8.0;
            c->nic.gbps = gbps;
        }
        if ((st = opt_string(l, v, "cluster", "name", c->name, sizeof c->name)) ||
            (st = opt_count(l, v, "cluster", "nodes", &c->nodes, NULL)) ||
            (st = opt_count(l, v, "cluster", "gpus_per_node", &c->gpus_per_node, NULL)) ||
            (st = opt_count(l, v, "cluster", "nics_per_node", &c->nics_per_node, &npn_given)) ||
            (st = opt_bool(l, v, "cluster", "rail_optimized", &c->rail_optimized, NULL)) ||
            (st = opt_real(l, v, "cluster", "oversubscription", 0, &c->oversubscription, NULL)))
            return st;
        if (!preset && !npn_given)
            c->nics_per_node = c->gpus_per_node;
        if (c->oversubscription < 1.0)
            return gs__yaml_fail_at(
                l, gs__yaml_lookup(l, v, "oversubscription", NULL), GS_ERR_INPUT,
                "cluster.oversubscription must be at least 1: found %g, expected a "
                "ratio >= 1 (1 = non-blocking)",
                c->oversubscription);
        if (preset && (gpu || intra || nic || gbps_given))
            c->source = NULL; /* no longer the published configuration */
    } else {
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "cluster: found %s, expected a cluster preset name or a mapping",
                                gs__yaml_describe(v, found, sizeof found));
    }
    st = gs_cluster_validate(c, l->err);
    if (st != GS_OK)
        prefix_at(l, v);
    return st;
}

/* -------------------------------------------------------------------------- grid ---- */

static const char *const grid_keys[] = {"dp", "pp", "tp", "order", "allow_tp_cross_node", "first_stage_layers",
                                        "last_stage_layers"};

static gs_status load_grid(const gs__yaml_loader *l, const yaml_node_t *v, gs_grid *g)
{
    gs_status st;
    char found[96];
    g->dp = g->pp = g->tp = 1;
    g->order[0] = GS_DIM_TP;
    g->order[1] = GS_DIM_DP;
    g->order[2] = GS_DIM_PP;
    g->allow_tp_cross_node = 0;
    g->first_stage_layers = g->last_stage_layers = 0;
    g->grid_line = (uint32_t)gs__yaml_node_line(v);
    g->grid_col = (uint32_t)gs__yaml_node_col(v);
    if (v->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "grid: found %s, expected a mapping like {dp: 4, pp: "
                                "2, tp: 8}",
                                gs__yaml_describe(v, found, sizeof found));
    if ((st = gs__yaml_check_keys(l, v, "grid", grid_keys,
                                  sizeof grid_keys / sizeof grid_keys[0])) ||
        (st = opt_count(l, v, "grid", "dp", &g->dp, NULL)) ||
        (st = opt_count(l, v, "grid", "pp", &g->pp, NULL)) ||
        (st = opt_count(l, v, "grid", "tp", &g->tp, NULL)) ||
        (st = opt_bool(l, v, "grid", "allow_tp_cross_node", &g->allow_tp_cross_node, NULL)) ||
        (st = opt_count(l, v, "grid", "first_stage_layers", &g->first_stage_layers, NULL)) ||
        (st = opt_count(l, v, "grid", "last_stage_layers", &g->last_stage_layers, NULL)))
        return st;
    yaml_node_t *order = gs__yaml_lookup(l, v, "order", NULL);
    if (order && (order->type != YAML_SCALAR_NODE || gs__yaml_scalar_is_null(order) ||
                  gs_mesh_order_parse(gs__yaml_scalar_text(order), g->order) != 0))
        return gs__yaml_fail_at(
            l, order, GS_ERR_INPUT,
            "grid.order: found %s, expected a permutation of tp, dp and pp, fastest "
            "first (tp-dp-pp is Megatron's default; the seed's table is tp-pp-dp)",
            gs__yaml_describe(order, found, sizeof found));
    return GS_OK;
}

/* ---------------------------------------------------------------------- strategy ---- */

static const char *const strategy_keys[] = {
    "sharding", "wrap", "prefetch", "forward_prefetch", "reshard_after_forward",
    "limit_all_gathers", "recompute", "recompute_every", "flash_attention", "offload", "precision", "pipeline", "grad_sync",
    "virtual_stages", "sequence_parallel", "bucket_mb", "overlap_param_gather", "tp_comm_overlap", "grad_dtype", "overlap_grad_reduce",
    "bucket_stages", "cross_entropy", "framework", "compile", "attention",
};

static const char *const wrap_keys[] = {"min_params"};

static gs_status load_wrap(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    static const char *const names[] = {"layer", "model", "{min_params: N}"};
    if (v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(v)) {
        if (strcasecmp(gs__yaml_scalar_text(v), "layer") == 0) {
            s->wrap = GS_WRAP_LAYER;
            return GS_OK;
        }
        if (strcasecmp(gs__yaml_scalar_text(v), "model") == 0) {
            s->wrap = GS_WRAP_MODEL;
            return GS_OK;
        }
    }
    if (v->type != YAML_MAPPING_NODE)
        return fail_name(l, v, "strategy.wrap", names, 3);
    gs_status st = gs__yaml_check_keys(l, v, "strategy.wrap", wrap_keys, 1);
    if (st != GS_OK)
        return st;
    yaml_node_t *n = gs__yaml_lookup(l, v, "min_params", NULL);
    if (!n)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "strategy.wrap: found an empty mapping, expected "
                                "{min_params: N}");
    st = value_count(l, n, "strategy.wrap.min_params", &s->wrap_min_params);
    if (st == GS_OK)
        s->wrap = GS_WRAP_MIN_PARAMS;
    return st;
}

static gs_status load_strategy(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    gs_status st;
    char found[96];
    const char *sharding[GS_SHARD_COUNT], *prefetch[3], *recompute[3], *precision[3],
        *pipeline[3];
    for (int i = 0; i < GS_SHARD_COUNT; i++)
        sharding[i] = gs_sharding_name((gs_sharding)i);
    for (int i = 0; i < 3; i++) {
        prefetch[i] = gs_prefetch_name((gs_prefetch)i);
        recompute[i] = gs_recompute_name((gs_recompute)i);
        precision[i] = gs_precision_name((gs_precision)i);
        pipeline[i] = gs_pipeline_name((gs_pipeline)i);
    }
    gs_strategy_defaults(s);
    if (!v)
        return GS_OK;
    if (v->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "strategy: found %s, expected a mapping like "
                                "{sharding: full_shard, recompute: full}",
                                gs__yaml_describe(v, found, sizeof found));
    st = gs__yaml_check_keys(l, v, "strategy", strategy_keys,
                             sizeof strategy_keys / sizeof strategy_keys[0]);
    if (st != GS_OK)
        return st;
    const char *sec = "strategy";
    int e, reshard_given, vs_given;
    e = (int)s->sharding;
    if ((st = opt_enum(l, v, sec, "sharding", sharding, GS_SHARD_COUNT, parse_sharding, &e, NULL)))
        return st;
    s->sharding = (gs_sharding)e;
    e = (int)s->prefetch;
    if ((st = opt_enum(l, v, sec, "prefetch", prefetch, 3, parse_prefetch, &e, NULL)))
        return st;
    s->prefetch = (gs_prefetch)e;
    e = (int)s->recompute;
    if ((st = opt_enum(l, v, sec, "recompute", recompute, 3, parse_recompute, &e, NULL)))
        return st;
    s->recompute = (gs_recompute)e;
    int every_given = 0;
    if ((st = opt_count(l, v, sec, "recompute_every", &s->recompute_every, &every_given)))
        return st;
    if (every_given && s->recompute_every > 1 && s->recompute != GS_RECOMPUTE_FULL)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "recompute_every", NULL), GS_ERR_INPUT,
                                "strategy.recompute_every: found %llu with recompute %s, expected recompute: full "
                                "(every N-th block checkpointed whole, the others keeping their activations)",
                                (unsigned long long)s->recompute_every, gs_recompute_name(s->recompute));
    e = (int)s->precision;
    if ((st = opt_enum(l, v, sec, "precision", precision, 3, parse_precision, &e, NULL)))
        return st;
    s->precision = (gs_precision)e;
    e = (int)s->pipeline;
    if ((st = opt_enum(l, v, sec, "pipeline", pipeline, 3, parse_pipeline, &e, NULL)))
        return st;
    s->pipeline = (gs_pipeline)e;
    {
        static const char *const grad_names[] = {"auto", "bf16", "fp16", "fp32"};
        e = s->grad_dtype;
        if ((st = opt_enum(l, v, sec, "grad_dtype", grad_names, 4, parse_grad_dtype, &e, NULL)))
            return st;
        s->grad_dtype = e;
    }
    e = (int)s->grad_sync;
    if ((st = opt_enum(l, v, sec, "grad_sync", grad_sync_names, 3, parse_grad_sync, &e, NULL)))
        return st;
    s->grad_sync = (gs_grad_sync)e;
    {
        static const char *const bucket_stages_names[] = {"all", "first"};
        e = (int)s->bucket_stages;
        if ((st = opt_enum(l, v, sec, "bucket_stages", bucket_stages_names, 2, parse_bucket_stages, &e, NULL)))
            return st;
        s->bucket_stages = (gs_bucket_stages)e;
    }
    {
        static const char *const xent_names[] = {"unfused", "fused"};
        e = (int)s->cross_entropy;
        if ((st = opt_enum(l, v, sec, "cross_entropy", xent_names, 2, parse_xent, &e, NULL)))
            return st;
        s->cross_entropy = (gs_xent)e;
    }
    {
        const char *fw_names[GS_FW_COUNT], *attn_names[GS_ATTN_COUNT];
        for (int i = 0; i < GS_FW_COUNT; i++)
            fw_names[i] = gs_framework_name((gs_framework)i);
        for (int i = 0; i < GS_ATTN_COUNT; i++)
            attn_names[i] = gs_attn_impl_name((gs_attn_impl)i);
        e = (int)s->framework;
        if ((st = opt_enum(l, v, sec, "framework", fw_names, GS_FW_COUNT, parse_framework, &e, NULL)))
            return st;
        s->framework = (gs_framework)e;
        e = (int)s->attention;
        if ((st = opt_enum(l, v, sec, "attention", attn_names, GS_ATTN_COUNT, parse_attention, &e, NULL)))
            return st;
        s->attention = (gs_attn_impl)e;
        if ((st = opt_bool(l, v, sec, "compile", &s->compile, NULL)))
            return st;
    }
    yaml_node_t *wrap = gs__yaml_lookup(l, v, "wrap", NULL);
    if (wrap && (st = load_wrap(l, wrap, s)) != GS_OK)
        return st;
    uint64_t bucket_mib = 0;
    int bucket_given;
    if ((st = opt_bool(l, v, sec, "forward_prefetch", &s->forward_prefetch, NULL)) ||
        (st = opt_bool(l, v, sec, "reshard_after_forward", &s->reshard_after_forward,
                       &reshard_given)) ||
        (st = opt_bool(l, v, sec, "limit_all_gathers", &s->limit_all_gathers, NULL)) ||
        (st = opt_bool(l, v, sec, "flash_attention", &s->flash_attention, NULL)) ||
        (st = opt_bool(l, v, sec, "offload", &s->offload, NULL)) ||
        (st = opt_bool(l, v, sec, "sequence_parallel", &s->sequence_parallel, NULL)) ||
        (st = opt_bool(l, v, sec, "overlap_param_gather", &s->overlap_param_gather, NULL)) ||
        (st = opt_bool(l, v, sec, "overlap_grad_reduce", &s->overlap_grad_reduce, NULL)) ||
        (st = opt_bool(l, v, sec, "tp_comm_overlap", &s->tp_comm_overlap, NULL)) ||
        (st = opt_count(l, v, sec, "virtual_stages", &s->virtual_stages, &vs_given)) ||
        (st = opt_count(l, v, sec, "bucket_mb", &bucket_mib, &bucket_given)))
        return st;
    if (!reshard_given)
        s->reshard_after_forward = gs_sharding_shards_params(s->sharding);
    if (bucket_given && gs_mul_u64(bucket_mib, (uint64_t)1 << 20, &s->bucket_bytes) != 0)
        return gs__yaml_fail_at(
            l, gs__yaml_lookup(l, v, "bucket_mb", NULL), GS_ERR_OVERFLOW,
            "strategy.bucket_mb is too large: found %llu MiB, expected at most %llu",
            (unsigned long long)bucket_mib, (unsigned long long)(UINT64_MAX >> 20));
    if (s->pipeline == GS_PIPE_INTERLEAVED && s->virtual_stages < 2)
        return gs__yaml_fail_at(
            l,
            vs_given ? gs__yaml_lookup(l, v, "virtual_stages", NULL)
                     : gs__yaml_lookup(l, v, "pipeline", NULL),
            GS_ERR_INPUT,
            "strategy.pipeline interleaved needs virtual_stages >= 2: found "
            "virtual_stages=%llu%s, expected virtual_stages: N with N >= 2 model "
            "chunks per pipeline rank",
            (unsigned long long)s->virtual_stages, vs_given ? "" : " (the default)");
    if (!s->overlap_grad_reduce && !gs_strategy_can_reduce_after_backward(s))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_grad_reduce", NULL), GS_ERR_INPUT,
                                "strategy.overlap_grad_reduce false reduces the gradients after the backward, "
                                "which needs them held until the last micro-batch: found sharding %s with "
                                "grad_sync %s, expected no_shard or zero1 (zero2 reduces every "
                                "micro-batch), grad_sync not every",
                                gs_sharding_name(s->sharding),
                                s->grad_sync == GS_GRAD_SYNC_EVERY ? "every"
                                : s->grad_sync == GS_GRAD_SYNC_LAST ? "last" : "auto");
    if (s->bucket_stages == GS_BUCKET_STAGES_FIRST && !gs_strategy_can_bucket_first(s))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "bucket_stages", NULL), GS_ERR_INPUT,
                                "strategy.bucket_stages first (Megatron-Core's rule) merges a model chunk's "
                                "gradient buckets, held whole in a resident buffer until their one reduction: "
                                "found sharding %s, expected no_shard or zero1 (zero2 reduces every micro-batch "
                                "into transient gradients, FSDP per unit)",
                                gs_sharding_name(s->sharding));
    if (s->overlap_param_gather && s->sharding != GS_SHARD_ZERO1 && s->sharding != GS_SHARD_ZERO2)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_param_gather", NULL), GS_ERR_INPUT,
                                "strategy.overlap_param_gather applies to zero1 and zero2 (the parameter "
                                "all-gather after the optimizer, Megatron's distributed optimizer): found "
                                "sharding %s, which %s",
                                gs_sharding_name(s->sharding),
                                gs_sharding_shards_params(s->sharding)
                                    ? "already gathers each unit before its forward (prefetch settings)"
                                    : "gathers no parameters");
    if (s->pipeline != GS_PIPE_INTERLEAVED && s->virtual_stages > 1)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "virtual_stages", NULL), GS_ERR_INPUT,
                                "strategy.virtual_stages=%llu needs pipeline: interleaved: found "
                                "pipeline %s, expected interleaved (or drop virtual_stages)",
                                (unsigned long long)s->virtual_stages,
                                gs_pipeline_name(s->pipeline));
    return GS_OK;
}

/* ------------------------------------------------------------------------- batch ---- */

static const char *const batch_keys[] = {"global", "micro"};

static gs_status load_batch(const gs__yaml_loader *l, const yaml_node_t *v, const gs_grid *g,
                            gs_batch *b)
{
    gs_status st;
    char found[96];
    int global_given = 0;
    b->micro_seqs = 1;
    b->global_seqs = 0;
    b->batch_line = g->grid_line;
    b->batch_col = g->grid_col;
    if (v) {
        b->batch_line = (uint32_t)gs__yaml_node_line(v);
        b->batch_col = (uint32_t)gs__yaml_node_col(v);
        if (v->type != YAML_MAPPING_NODE)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "batch: found %s, expected a mapping like "
                                    "{global: 1024, micro: 1}",
                                    gs__yaml_describe(v, found, sizeof found));
        if ((st = gs__yaml_check_keys(l, v, "batch", batch_keys, 2)) ||
            (st = opt_count(l, v, "batch", "global", &b->global_seqs, &global_given)) ||
            (st = opt_count(l, v, "batch", "micro", &b->micro_seqs, NULL)))
            return st;
    }
    if (!global_given && gs_mul_u64(b->micro_seqs, g->dp, &b->global_seqs) != 0)
        return gs__yaml_fail_at(
            l, v, GS_ERR_OVERFLOW,
            "batch: micro=%llu x dp=%llu sequences per step is too large: expected "
            "a product below 2^64",
            (unsigned long long)b->micro_seqs, (unsigned long long)g->dp);
    return GS_OK;
}

/* -------------------------------------------------------------------------- root ---- */

/* `expect` (a published figure to compare with) is read by engine/expect.c; accepted and
 * skipped here. */
static const char *const top_keys[] = {"name", "description", "model", "cluster",
                                       "grid", "strategy", "batch", "expect", "stragglers"};

static const char *const straggler_keys[] = {"rank", "node", "slowdown"};

/* stragglers: [{rank: 3, slowdown: 1.3}, {node: 2, slowdown: 1.1}] */
static gs_status load_stragglers(const gs__yaml_loader *l, const yaml_node_t *v, gs_scenario *s)
{
    char found[96];
    s->nstragglers = 0;
    if (!v)
        return GS_OK;
    if (v->type != YAML_SEQUENCE_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "stragglers: found %s, expected a list like [{rank: 3, slowdown: "
                                "1.3}, {node: 1, slowdown: 1.1}]",
                                gs__yaml_describe(v, found, sizeof found));
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(l->doc, *it);
        gs_status st;
        if (!e || e->type != YAML_MAPPING_NODE)
            return gs__yaml_fail_at(
                l, e, GS_ERR_INPUT,
                "stragglers: found %s, expected a mapping {rank: R, slowdown: F} or "
                "{node: N, slowdown: F}",
                gs__yaml_describe(e, found, sizeof found));
        if (s->nstragglers == GS_MAX_STRAGGLERS)
            return gs__yaml_fail_at(l, e, GS_ERR_INPUT, "stragglers: found more than %d entries, expected at most %d",
                                    GS_MAX_STRAGGLERS, GS_MAX_STRAGGLERS);
        if ((st = gs__yaml_check_keys(l, e, "stragglers", straggler_keys, 3)) != GS_OK)
            return st;
        gs_straggler *g = &s->stragglers[s->nstragglers];
        int has_rank, has_node, has_slow;
        uint64_t node = 0;
        yaml_node_t *rv = gs__yaml_lookup(l, e, "rank", NULL), *nv = gs__yaml_lookup(l, e, "node", NULL);
        has_rank = rv != NULL;
        has_node = nv != NULL;
        if ((rv && (st = value_u64(l, rv, "stragglers.rank", &g->id, 1))) ||
            (nv && (st = value_u64(l, nv, "stragglers.node", &node, 1))))
            return st;
        if (has_rank == has_node)
            return gs__yaml_fail_at(l, e, GS_ERR_INPUT,
                                    "stragglers: found %s, expected exactly one of rank or node",
                                    has_rank ? "both rank and node" : "neither rank nor node");
        if (has_node) {
            g->node = 1;
            g->id = node;
        }
        /* listed twice, a rank's (or node's) factors would multiply without a word */
        for (size_t k = 0; k < s->nstragglers; k++)
            if (s->stragglers[k].node == g->node && s->stragglers[k].id == g->id)
                return gs__yaml_fail_at(l, e, GS_ERR_INPUT,
                                        "stragglers: %s %llu is listed twice (entries %zu and %zu), expected each "
                                        "rank or node once with its one slowdown",
                                        g->node ? "node" : "rank", (unsigned long long)g->id, k + 1,
                                        s->nstragglers + 1);
        if ((st = opt_real(l, e, "stragglers", "slowdown", 0, &g->slowdown, &has_slow)))
            return st;
        if (!has_slow || !(g->slowdown >= 1.0) || g->slowdown > 1000.0)
            return gs__yaml_fail_at(
                l, has_slow ? gs__yaml_lookup(l, e, "slowdown", NULL) : e, GS_ERR_INPUT,
                "stragglers.slowdown: found %s, expected a factor between 1 and 1000",
                has_slow ? gs__yaml_describe(gs__yaml_lookup(l, e, "slowdown", NULL), found,
                                             sizeof found)
                         : "nothing");
        s->nstragglers++;
    }
    return GS_OK;
}

static gs_status load_root(const gs__yaml_loader *l, const yaml_node_t *root, gs_scenario *s)
{
    gs_status st;
    char found[96];
    if (root->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(
            l, root, GS_ERR_INPUT,
            "scenario: found %s at the top level, expected a mapping with model, "
            "cluster, grid (and strategy, batch)",
            gs__yaml_describe(root, found, sizeof found));
    st = gs__yaml_check_keys(l, root, "scenario", top_keys, sizeof top_keys / sizeof top_keys[0]);
    if (st != GS_OK)
        return st;
    if ((st = opt_string(l, root, "scenario", "name", s->title, sizeof s->title)) ||
        (st = opt_string(l, root, "scenario", "description", s->description,
                         sizeof s->description)))
        return st;
    static const char *const required[] = {"model", "cluster", "grid"};
    static const char *const example[] = {
        "model: llama2-70b",
        "cluster: {preset: dgx-a100-80g, nodes: 8}",
        "grid: {dp: 4, pp: 2, tp: 8}",
    };
    for (size_t i = 0; i < 3; i++)
        if (!gs__yaml_lookup(l, root, required[i], NULL))
            return gs__yaml_fail_at(
                l, NULL, GS_ERR_INPUT,
                "%s is required: found no '%s' key at the top level, expected e.g. "
                "'%s'",
                required[i], required[i], example[i]);
    if ((st = load_model(l, gs__yaml_lookup(l, root, "model", NULL), &s->model)) ||
        (st = load_cluster(l, gs__yaml_lookup(l, root, "cluster", NULL), &s->cluster)) ||
        (st = load_grid(l, gs__yaml_lookup(l, root, "grid", NULL), &s->grid)) ||
        (st = load_strategy(l, gs__yaml_lookup(l, root, "strategy", NULL), &s->strategy)) ||
        (st = load_batch(l, gs__yaml_lookup(l, root, "batch", NULL), &s->grid, &s->batch)) ||
        (st = load_stragglers(l, gs__yaml_lookup(l, root, "stragglers", NULL), s)))
        return st;
    /* AUTO is resolved once, from the file's sharding (the default's when none is given): a
     * plan, sweep or diagnose fix that changes the sharding keeps the framework */
    s->strategy.framework = gs_framework_resolve(s->strategy.framework, (int)s->strategy.sharding);
    return GS_OK;
}

double gs_scenario_slowdown(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank)
{
    double f = 1.0;
    for (size_t i = 0; i < s->nstragglers; i++) {
        const gs_straggler *g = &s->stragglers[i];
        if (g->node ? g->id == gs_mesh_rank_node(mesh, rank) : g->id == rank)
            f *= g->slowdown;
    }
    return f;
}

/* The display name: base name of path without .yaml / .yml. */
static void base_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".yaml") == 0)
        n -= 5;
    else if (n > 4 && strcmp(b + n - 4, ".yml") == 0)
        n -= 4;
    if (n >= len)
        n = len - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

static gs_status load_text(const char *text, size_t len, const char *path, gs_scenario *out,
                           gs_error *err)
{
    gs_status st = GS_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int loaded = 0, have_extra = 0; /* loaded: parser and doc both held */
    gs__yaml_loader l = {path, &doc, err};

    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    base_name(path, out->name, sizeof out->name);
    gs_strategy_defaults(&out->strategy);

    st = gs__yaml_load_first(&l, &parser, text, len);
    if (st != GS_OK)
        goto out;
    loaded = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: empty scenario: found no YAML document, expected a mapping with "
                          "model, cluster and grid",
                          path);
        goto out;
    }
    st = load_root(&l, root, out);
    if (st != GS_OK)
        goto out;
    if (!yaml_parser_load(&parser, &extra)) {
        st = gs__yaml_parser_failure(&l, &parser);
        goto out;
    }
    have_extra = 1;
    yaml_node_t *second = yaml_document_get_root_node(&extra);
    if (second) {
        l.doc = &extra;
        st = gs__yaml_fail_at(&l, second, GS_ERR_INPUT,
                              "found a second YAML document, expected one "
                              "scenario per file");
        goto out;
    }
out:
    if (have_extra)
        yaml_document_delete(&extra);
    if (loaded) {
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
    }
    return st;
}

/* --------------------------------------------------------------------------- API ---- */

gs_status gs_scenario_load_string(const char *text, size_t len, const char *name,
                                  gs_scenario *out, gs_error *err)
{
    return load_text(text, len, name ? name : "<string>", out, err);
}

gs_status gs_scenario_load_file(const char *path, gs_scenario *out, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK)
        st = load_text(text, size, path, out, err);
    free(text);
    return st;
}

gs_status gs_scenario_mesh(const gs_scenario *s, gs_mesh *mesh, gs_diag *warnings, gs_error *err)
{
    char grid_at[600], batch_at[600];
    if (s->grid.grid_line)
        snprintf(grid_at, sizeof grid_at, "%s:%u:%u", s->path, s->grid.grid_line,
                 s->grid.grid_col);
    else
        snprintf(grid_at, sizeof grid_at, "%s", s->path[0] ? s->path : "<scenario>");
    if (s->batch.batch_line)
        snprintf(batch_at, sizeof batch_at, "%s:%u:%u", s->path, s->batch.batch_line,
                 s->batch.batch_col);
    else
        snprintf(batch_at, sizeof batch_at, "%s", s->path[0] ? s->path : "<scenario>");

    gs_status st = gs_mesh_init(mesh, s->grid.tp, s->grid.dp, s->grid.pp, s->grid.order,
                                s->cluster.gpus_per_node, err);
    if (st == GS_OK)
        gs_mesh_set_stage_layers(mesh, s->grid.first_stage_layers, s->grid.last_stage_layers);
    if (st == GS_OK)
        st = gs_mesh_check(mesh, gs_cluster_gpus(&s->cluster), &s->model,
                           s->grid.allow_tp_cross_node, warnings, err);
    if (st != GS_OK) {
        gs_error_prefix(err, "%s: grid", grid_at);
        return st;
    }
    for (size_t i = 0; i < s->nstragglers; i++) {
        const gs_straggler *g = &s->stragglers[i];
        uint64_t limit = g->node ? gs_mesh_nodes(mesh) : mesh->world;
        if (g->id >= limit)
            return gs_error_set(err, GS_ERR_INPUT, "%s: stragglers: %s %llu does not exist (the grid has %llu %s)",
                                s->path[0] ? s->path : "<scenario>", g->node ? "node" : "rank",
                                (unsigned long long)g->id, (unsigned long long)limit, g->node ? "nodes" : "ranks");
    }

    uint64_t per_step, micro = s->batch.micro_seqs, dp = s->grid.dp;
    if (micro == 0 || s->batch.global_seqs == 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch must be positive: found global=%llu, micro=%llu, "
                            "expected both >= 1",
                            batch_at, (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)micro);
    if (gs_mul_u64(micro, dp, &per_step) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "%s: batch: micro=%llu x dp=%llu is too large: expected a product "
                            "below 2^64",
                            batch_at, (unsigned long long)micro, (unsigned long long)dp);
    uint64_t mb_tokens;
    if (s->model.seq &&
        (gs_mul_u64(micro, s->model.seq, &mb_tokens) != 0 || mb_tokens > UINT32_MAX))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch: micro=%llu sequences of %llu tokens is too many tokens per "
                            "micro-batch: expected at most 4294967295 (a GEMM's rows are 32-bit)",
                            batch_at, (unsigned long long)micro, (unsigned long long)s->model.seq);
    if (s->batch.global_seqs % per_step != 0) {
        uint64_t below = s->batch.global_seqs / per_step * per_step;
        uint64_t above = below + per_step;
        char hint[96] = "";
        if (below > 0 && above > below)
            snprintf(hint, sizeof hint, " (like %llu or %llu)", (unsigned long long)below,
                     (unsigned long long)above);
        else if (above > below)
            snprintf(hint, sizeof hint, " (like %llu)", (unsigned long long)above);
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch.global=%llu is not a multiple of micro=%llu x dp=%llu: "
                            "found %llu, expected a multiple of %llu%s",
                            batch_at, (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)micro, (unsigned long long)dp,
                            (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)per_step, hint);
    }
    /* the ledger's pipeline walks every micro-batch of a step: bounded, with the batch's place */
    if (s->batch.global_seqs / per_step > GS_SCENARIO_MAX_MICROBATCHES)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch: global=%llu / (micro=%llu x dp=%llu) = %llu micro-batches per step, "
                            "expected at most %u (a larger batch.micro or a smaller batch.global)",
                            batch_at, (unsigned long long)s->batch.global_seqs, (unsigned long long)micro,
                            (unsigned long long)dp, (unsigned long long)(s->batch.global_seqs / per_step),
                            GS_SCENARIO_MAX_MICROBATCHES);

    /* the strategy's overlap switches, for scenarios not read from a file (imports, sweep points);
     * a file's are also checked where they are written, at their line */
    const gs_strategy *sg = &s->strategy;
    if (sg->tp_comm_overlap && s->grid.tp > 1 && !sg->sequence_parallel)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.tp_comm_overlap with tp=%llu needs sequence_parallel: true "
                            "(Megatron-Core asserts it: Transformer Engine's userbuffers overlap the "
                            "sequence-parallel all-gathers and reduce-scatters with the GEMMs)",
                            grid_at, (unsigned long long)s->grid.tp);
    if (!sg->overlap_grad_reduce && !gs_strategy_can_reduce_after_backward(sg))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.overlap_grad_reduce false reduces the gradients after the "
                            "backward, which needs them held until the last micro-batch: found sharding "
                            "%s with grad_sync %s, expected no_shard or zero1 (zero2 reduces every "
                            "micro-batch), grad_sync not every",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding),
                            sg->grad_sync == GS_GRAD_SYNC_EVERY ? "every"
                            : sg->grad_sync == GS_GRAD_SYNC_LAST ? "last" : "auto");
    if (sg->bucket_stages == GS_BUCKET_STAGES_FIRST && !gs_strategy_can_bucket_first(sg))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.bucket_stages first (Megatron-Core's rule) merges a model chunk's "
                            "gradient buckets, held whole in a resident buffer until their one reduction: "
                            "found sharding %s, expected no_shard or zero1 (zero2 reduces every micro-batch "
                            "into transient gradients, FSDP per unit)",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding));
    if (sg->overlap_param_gather && sg->sharding != GS_SHARD_ZERO1 && sg->sharding != GS_SHARD_ZERO2)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.overlap_param_gather applies to zero1 and zero2 (the "
                            "parameter all-gather after the optimizer): found sharding %s",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding));

    if (s->strategy.pipeline == GS_PIPE_INTERLEAVED) {
        uint64_t v = s->strategy.virtual_stages, pp = s->grid.pp, chunks;
        if (s->grid.first_stage_layers || s->grid.last_stage_layers) {
            /* Megatron-LM: each stage's layers split into the virtual stages evenly */
            for (uint64_t k = 0; k < mesh->size[GS_DIM_PP]; k++)
                if (v && gs_mesh_stage_layers(mesh, s->model.layers, k) % v != 0)
                    return gs_error_set(err, GS_ERR_INPUT,
                                        "%s: grid: interleaved pipeline with virtual_stages=%llu needs every "
                                        "stage's layers to split into %llu equal chunks: stage %llu holds %llu "
                                        "(first_stage_layers %llu, last_stage_layers %llu)",
                                        grid_at, (unsigned long long)v, (unsigned long long)v,
                                        (unsigned long long)k,
                                        (unsigned long long)gs_mesh_stage_layers(mesh, s->model.layers, k),
                                        (unsigned long long)s->grid.first_stage_layers,
                                        (unsigned long long)s->grid.last_stage_layers);
        } else if (gs_mul_u64(pp, v, &chunks) != 0 || s->model.layers % chunks != 0) {
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: grid: interleaved pipeline with pp=%llu and "
                                "virtual_stages=%llu needs the %llu layers to split into "
                                "pp x virtual_stages equal chunks: found %llu layers, expected "
                                "a multiple of %llu (or first_stage_layers / last_stage_layers "
                                "that leave every stage a multiple of virtual_stages)",
                                grid_at, (unsigned long long)pp, (unsigned long long)v,
                                (unsigned long long)s->model.layers,
                                (unsigned long long)s->model.layers,
                                (unsigned long long)(pp * v));
        }
        uint64_t mb = s->batch.global_seqs / per_step;
        if (mb % pp != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: batch: interleaved pipeline needs micro-batches per step "
                                "to be a multiple of pp=%llu (Megatron's requirement): found "
                                "global / (micro x dp) = %llu / %llu = %llu, expected a "
                                "multiple of %llu",
                                batch_at, (unsigned long long)pp,
                                (unsigned long long)s->batch.global_seqs,
                                (unsigned long long)per_step, (unsigned long long)mb,
                                (unsigned long long)pp);
    }
    return GS_OK;
}

uint64_t gs_scenario_microbatches(const gs_scenario *s)
{
    uint64_t per_step;
    if (gs_mul_u64(s->batch.micro_seqs, s->grid.dp, &per_step) != 0 || per_step == 0)
        return 0;
    return s->batch.global_seqs / per_step;
}

double gs_scenario_tokens(const gs_scenario *s)
{
    return (double)s->batch.global_seqs * (double)s->model.seq;
}

/* DDP and ZeRO-1/2 cut a stage's gradients into bucket_bytes buckets, each a few events: refuses
 * a bucket count above GS_SCHEDULE_MAX_BUCKETS before anything is built. */
static gs_status check_bucket_count(const gs_scenario *s, const gs_mesh *mesh, gs_error *err)
{
    const gs_strategy *st = &s->strategy;
    if ((gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD) || st->bucket_bytes == 0)
        return GS_OK;
    uint64_t pp = mesh->size[GS_DIM_PP] ? mesh->size[GS_DIM_PP] : 1, tp = mesh->size[GS_DIM_TP] ? mesh->size[GS_DIM_TP] : 1;
    uint64_t params = gs_model_params(&s->model), stage = params / pp / tp + 1, bytes;
    if (params == UINT64_MAX || gs_mul_u64(stage, gs_grad_bytes(st), &bytes) != 0)
        bytes = UINT64_MAX;
    uint64_t buckets = bytes / st->bucket_bytes + 1;
    if (buckets <= GS_SCHEDULE_MAX_BUCKETS)
        return GS_OK;
    return gs_error_set(err, GS_ERR_INPUT,
                        "%s: strategy.bucket_bytes: %llu B buckets cut a stage's gradients (about %.3g parameters, "
                        "%.3g B) into about %.3g buckets, expected at most %u; raise bucket_bytes to at least %.3g B "
                        "(`gridstep mem` works at any size)",
                        s->path[0] ? s->path : "<scenario>", (unsigned long long)st->bucket_bytes, (double)stage,
                        (double)bytes, (double)buckets, GS_SCHEDULE_MAX_BUCKETS,
                        (double)bytes / GS_SCHEDULE_MAX_BUCKETS + 1);
}

gs_status gs_scenario_check_schedule_size(const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches,
                                          int exact, gs_error *err)
{
    gs_status brc = check_bucket_count(s, mesh, err);
    if (brc != GS_OK)
        return brc;
    uint64_t pp = mesh->size[GS_DIM_PP], lists = exact ? mesh->world : pp;
    uint64_t stage_layers = (s->model.layers + pp - 1) / pp + 2; /* + embedding and head */
    uint64_t events = 0;
    int over = gs_mul_u64(lists, microbatches, &events) != 0 ||
               gs_mul_u64(events, stage_layers, &events) != 0 ||
               gs_mul_u64(events, GS_SCHEDULE_EVENTS_PER_LAYER_PASS, &events) != 0 ||
               events > GS_SCHEDULE_MAX_EVENTS;
    if (!over)
        return GS_OK;
    char at[600];
    uint32_t line = exact ? s->grid.grid_line : s->batch.batch_line;
    uint32_t col = exact ? s->grid.grid_col : s->batch.batch_col;
    if (line)
        snprintf(at, sizeof at, "%s:%u:%u", s->path, line, col);
    else
        snprintf(at, sizeof at, "%s", s->path[0] ? s->path : "<scenario>");
    double shown = (double)lists * (double)microbatches * (double)stage_layers *
                   GS_SCHEDULE_EVENTS_PER_LAYER_PASS;
    return gs_error_set(err, GS_ERR_OVERFLOW,
                        "%s: %s: the schedule is too large to build: found %llu rank list%s x %llu "
                        "micro-batch%s x %llu layers per stage (with embedding and head) x %u = "
                        "about %.3g events, expected at most %.3g; %suse fewer micro-batches per "
                        "step (a larger batch.micro or a smaller batch.global); `gridstep mem` "
                        "works at any size",
                        at, exact ? "grid" : "batch", (unsigned long long)lists,
                        lists == 1 ? "" : "s", (unsigned long long)microbatches,
                        microbatches == 1 ? "" : "es", (unsigned long long)stage_layers,
                        GS_SCHEDULE_EVENTS_PER_LAYER_PASS, shown, (double)GS_SCHEDULE_MAX_EVENTS,
                        exact ? "simulate one rank per class (no --exact, no stragglers) or " : "");
}
