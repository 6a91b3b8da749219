/* The `expect:` block of a scenario (a published figure, its FLOP formula and citation) read
 * with libyaml, and the predicted value of the same metric from a simulated report. */
#include "engine/expect.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "engine/yaml_doc.h"

static const char *const metric_names[GS_EXPECT_METRIC_COUNT] = {
    "tflops_per_gpu_eq3", "mfu_megatron", "tflops_per_gpu_hw", "tflops_per_gpu",
    "mfu", "tokens_per_s_per_gpu", "step_time_s", "tflops_palm", "mfu_palm",
};

static const char *const expect_keys[] = {"metric", "value", "formula", "source", "tolerance",
                                          "peak_tflops", "palm_params", "dataset"};
#define GS_EXPECT_NKEYS (sizeof expect_keys / sizeof expect_keys[0])

/* ------------------------------------------------------------------ field values ---- */

/* A finite number > 0, written bare (not quoted), no unit or percent sign. */
static gs_status value_positive(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                const char *expected, double *out)
{
    char found[96];
    if (!gs__yaml_is_bare_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "expect.%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expected);
    const char *t = gs__yaml_scalar_text(v);
    char *end = NULL;
    errno = 0;
    double x = strtod(t, &end);
    while (end && *end == ' ')
        end++;
    if (end == t || !end || *end != '\0' || errno == ERANGE || !isfinite(x))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "expect.%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expected);
    if (!(x > 0))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "expect.%s must be positive: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expected);
    *out = x;
    return GS_OK;
}

/* A non-empty string (quoted or plain) copied into buf. */
static gs_status value_text(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                            const char *expected, char *buf, size_t len)
{
    char found[96];
    if (!gs__yaml_is_text_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "expect.%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expected);
    if (strlen(gs__yaml_scalar_text(v)) >= len)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "expect.%s is too long: found %zu bytes, expected at most %zu",
                                field, strlen(gs__yaml_scalar_text(v)), len - 1);
    snprintf(buf, len, "%s", gs__yaml_scalar_text(v));
    return GS_OK;
}

static gs_status load_block(const gs__yaml_loader *l, const yaml_node_t *v, gs_expect *e)
{
    char found[96], list[256];
    gs_status st;
    if (v->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "expect: found %s, expected a mapping like {metric: "
                                "tflops_per_gpu_eq3, value: 137, formula: \"...\", source: "
                                "\"...\"}",
                                gs__yaml_describe(v, found, sizeof found));
    if ((st = gs__yaml_check_keys(l, v, "expect", expect_keys, GS_EXPECT_NKEYS)) != GS_OK)
        return st;
    static const char *const required[] = {"metric", "value", "formula", "source"};
    static const char *const example[] = {
        "metric: tflops_per_gpu_eq3", "value: 137 (the published number)",
        "formula: \"96 B s l h^2 (1 + s/6h + V/16lh)\"", "source: \"Narayanan et al. SC'21, Table 1\"",
    };
    for (size_t i = 0; i < 4; i++)
        if (!gs__yaml_lookup(l, v, required[i], NULL))
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "expect: no '%s': found a mapping without it, expected %s",
                                    required[i], example[i]);

    yaml_node_t *m = gs__yaml_lookup(l, v, "metric", NULL);
    gs__yaml_join_names(metric_names, GS_EXPECT_METRIC_COUNT, list, sizeof list);
    if (m->type != YAML_SCALAR_NODE || gs__yaml_scalar_is_null(m))
        return gs__yaml_fail_at(l, m, GS_ERR_INPUT, "expect.metric: found %s, expected one of %s",
                                gs__yaml_describe(m, found, sizeof found), list);
    if (gs_expect_metric_parse(gs__yaml_scalar_text(m), &e->metric) != 0) {
        char hint[96] = "";
        const char *near = gs__yaml_nearest_name(gs__yaml_scalar_text(m), metric_names,
                                                 GS_EXPECT_METRIC_COUNT);
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return gs__yaml_fail_at(l, m, GS_ERR_INPUT,
                                "expect.metric: found unknown value '%s'%s, expected one of %s",
                                gs__yaml_shown(m, found, sizeof found), hint, list);
    }

    const char *value_expected = gs_expect_metric_is_fraction(e->metric)
                                     ? "the published number as a fraction (0.41 for 41%)"
                                     : "the published number (a positive number)";
    if ((st = value_positive(l, gs__yaml_lookup(l, v, "value", NULL), "value", value_expected,
                             &e->value)) ||
        (st = value_text(l, gs__yaml_lookup(l, v, "formula", NULL), "formula",
                         "the source's FLOP formula as text", e->formula, sizeof e->formula)) ||
        (st = value_text(l, gs__yaml_lookup(l, v, "source", NULL), "source", "a citation as text",
                         e->source, sizeof e->source)))
        return st;
    if (gs_expect_metric_is_fraction(e->metric) && e->value > 1) {
        yaml_node_t *n = gs__yaml_lookup(l, v, "value", NULL);
        return gs__yaml_fail_at(l, n, GS_ERR_INPUT,
                                "expect.value: found %s for metric %s, expected a fraction "
                                "in (0, 1] (0.41 for 41%%)",
                                gs__yaml_describe(n, found, sizeof found), metric_names[e->metric]);
    }

    yaml_node_t *tol = gs__yaml_lookup(l, v, "tolerance", NULL);
    e->tolerance = GS_EXPECT_DEFAULT_TOLERANCE;
    if (tol) {
        if ((st = value_positive(l, tol, "tolerance", "a relative tolerance in (0, 1] like 0.10",
                                 &e->tolerance)))
            return st;
        if (e->tolerance > 1)
            return gs__yaml_fail_at(l, tol, GS_ERR_INPUT,
                                    "expect.tolerance: found %s, expected a relative tolerance in "
                                    "(0, 1] like 0.10",
                                    gs__yaml_describe(tol, found, sizeof found));
    }

    yaml_node_t *peak_key = NULL, *peak = gs__yaml_lookup(l, v, "peak_tflops", &peak_key);
    e->peak_flops = e->metric == GS_EXPECT_MFU_MEGATRON ? GS_EXPECT_MEGATRON_PEAK_FLOPS : 0;
    if (peak) {
        if (e->metric != GS_EXPECT_MFU_MEGATRON && e->metric != GS_EXPECT_MFU_PALM)
            return gs__yaml_fail_at(l, peak_key, GS_ERR_INPUT,
                                    "expect.peak_tflops: found it with metric %s, expected it "
                                    "only with metric mfu_megatron or mfu_palm (other metrics use "
                                    "the report's own peak)",
                                    metric_names[e->metric]);
        double tflops;
        if ((st = value_positive(l, peak, "peak_tflops", "the source's peak TFLOP/s per GPU like 989",
                                 &tflops)))
            return st;
        e->peak_flops = tflops * 1e12;
    }
    yaml_node_t *pp_key = NULL, *pp = gs__yaml_lookup(l, v, "palm_params", &pp_key);
    if (pp) {
        const char *t = pp->type == YAML_SCALAR_NODE ? gs__yaml_scalar_text(pp) : "";
        if (e->metric != GS_EXPECT_TFLOPS_PALM && e->metric != GS_EXPECT_MFU_PALM)
            return gs__yaml_fail_at(l, pp_key, GS_ERR_INPUT,
                                    "expect.palm_params: found it with metric %s, expected it only "
                                    "with metric tflops_palm or mfu_palm",
                                    metric_names[e->metric]);
        if (strcmp(t, "all") == 0)
            e->palm_non_embedding = 0;
        else if (strcmp(t, "non_embedding") == 0)
            e->palm_non_embedding = 1;
        else
            return gs__yaml_fail_at(l, pp, GS_ERR_INPUT,
                                    "expect.palm_params: found %s, expected all or non_embedding",
                                    gs__yaml_describe(pp, found, sizeof found));
    }
    yaml_node_t *ds = gs__yaml_lookup(l, v, "dataset", NULL);
    if (ds && (st = value_text(l, ds, "dataset", "a short name of the source family like llm-foundry",
                               e->dataset, sizeof e->dataset)))
        return st;
    e->line = (uint32_t)v->start_mark.line + 1;
    e->col = (uint32_t)v->start_mark.column + 1;
    return GS_OK;
}

/* --------------------------------------------------------------------------- API ---- */

gs_status gs_expect_load_string(const char *text, size_t len, const char *name, gs_expect *out,
                                int *present, gs_error *err)
{
    gs_status st = GS_OK;
    yaml_parser_t parser;
    yaml_document_t doc;
    int loaded = 0; /* parser and doc both held */
    gs__yaml_loader l = {name ? name : "<string>", &doc, err};

    memset(out, 0, sizeof *out);
    *present = 0;
    if ((st = gs__yaml_load_first(&l, &parser, text, len)) != GS_OK)
        goto out;
    loaded = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        goto out; /* not a scenario: the scenario loader says why */
    yaml_node_t *block = gs__yaml_lookup(&l, root, "expect", NULL);
    if (!block)
        goto out;
    if ((st = load_block(&l, block, out)) != GS_OK)
        goto out;
    *present = 1;
out:
    if (loaded) {
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
    }
    return st;
}

gs_status gs_expect_load(const char *path, gs_expect *out, int *present, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    memset(out, 0, sizeof *out);
    *present = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK)
        st = gs_expect_load_string(text, size, path, out, present, err);
    free(text);
    return st;
}

double gs_expect_eq3_flops(const gs_model *m, double global_seqs)
{
    double s = (double)m->seq, l = (double)m->layers, h = (double)m->hidden, V = (double)m->vocab;
    return 96.0 * global_seqs * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double gs_expect_megatron_flops(const gs_model *m, double global_seqs)
{
    double s = (double)m->seq, L = (double)m->layers, h = (double)m->hidden, V = (double)m->vocab;
    double a = (double)m->heads, g = (double)(m->kv_heads ? m->kv_heads : m->heads);
    double q = (double)(m->head_dim ? m->head_dim : m->hidden / m->heads) * a; /* kv_channels x a */
    double gated = m->mlp == GS_MLP_SWIGLU ? 1.5 : 1.0;
    double attention = (1.0 + g / a + s / h) * (q / h);
    double mlp = ((double)m->ffn / h) * gated;
    double logit = V / (2.0 * L * h);
    return 12.0 * global_seqs * s * L * h * h * (attention + mlp + logit);
}

double gs_expect_palm_flops(const gs_model *m, double global_seqs, int non_embedding)
{
    double n = (double)gs_model_params(m);
    if (non_embedding)
        n -= (double)gs_model_embedding_params(m);
    double dh = (double)(m->head_dim ? m->head_dim : (m->heads ? m->hidden / m->heads : 0));
    double per_token = 6.0 * n + 12.0 * (double)m->layers * (double)m->heads * dh * (double)m->seq;
    return global_seqs * (double)m->seq * per_token;
}

double gs_expect_predicted(const gs_expect *e, const gs_scenario *s, const gs_report *r)
{
    double step = r->step_time_s;
    double gpus = (double)s->grid.dp * (double)(s->grid.cp ? s->grid.cp : 1) * (double)s->grid.pp * (double)s->grid.tp;
    if (!(step > 0) || !(gpus > 0))
        return 0;
    double seqs = (double)s->batch.global_seqs;
    switch (e->metric) {
    case GS_EXPECT_TFLOPS_PER_GPU_EQ3:
        return gs_expect_eq3_flops(&s->model, seqs) / (step * gpus) / 1e12;
    case GS_EXPECT_MFU_MEGATRON:
        return gs_expect_megatron_flops(&s->model, seqs) / (step * gpus * e->peak_flops);
    case GS_EXPECT_TFLOPS_PER_GPU_HW:
        return r->hardware_flops / (step * gpus) / 1e12;
    case GS_EXPECT_TFLOPS_PER_GPU:
        return r->tflops_per_gpu;
    case GS_EXPECT_MFU:
        return r->mfu;
    case GS_EXPECT_TOKENS_PER_S_PER_GPU:
        return r->tokens_per_s_per_gpu;
    case GS_EXPECT_STEP_TIME_S:
        return step;
    case GS_EXPECT_TFLOPS_PALM:
        return gs_expect_palm_flops(&s->model, seqs, e->palm_non_embedding) / (step * gpus) / 1e12;
    case GS_EXPECT_MFU_PALM: {
        double peak = e->peak_flops > 0 ? e->peak_flops : gs_gpu_peak_flops(&s->cluster.gpu, s->strategy.precision);
        return peak > 0 ? gs_expect_palm_flops(&s->model, seqs, e->palm_non_embedding) / (step * gpus * peak) : 0;
    }
    case GS_EXPECT_METRIC_COUNT:
        break;
    }
    return 0;
}

double gs_expect_error(const gs_expect *e, double predicted)
{
    return (predicted - e->value) / e->value;
}

const char *gs_expect_metric_name(gs_expect_metric m)
{
    return (unsigned)m < GS_EXPECT_METRIC_COUNT ? metric_names[m] : "?";
}

int gs_expect_metric_parse(const char *s, gs_expect_metric *out)
{
    for (int i = 0; i < GS_EXPECT_METRIC_COUNT; i++)
        if (strcmp(s, metric_names[i]) == 0) {
            *out = (gs_expect_metric)i;
            return 0;
        }
    return -1;
}

int gs_expect_metric_is_fraction(gs_expect_metric m)
{
    return m == GS_EXPECT_MFU || m == GS_EXPECT_MFU_MEGATRON || m == GS_EXPECT_MFU_PALM;
}

int gs_expect_metric_lower_is_faster(gs_expect_metric m)
{
    return m == GS_EXPECT_STEP_TIME_S;
}
