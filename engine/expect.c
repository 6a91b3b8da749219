/* The `expect:` block of a scenario (a published figure, its FLOP formula and citation) read
 * with libyaml, and the predicted value of the same metric from a simulated report. */
#include "engine/expect.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <yaml.h>

#include "engine/hardware.h" /* gs_edit_distance */

/* Scenario files larger than this are refused (bytes), as engine/scenario.c does. */
#define GS_EXPECT_MAX_FILE_BYTES (1u << 20)

/* Deepest [ / { nesting accepted before libyaml sees the text (its scanner is quadratic in flow
 * depth); engine/scenario.c applies the same limit. */
#define GS_EXPECT_MAX_FLOW_DEPTH 64

static const char *const metric_names[GS_EXPECT_METRIC_COUNT] = {
    "tflops_per_gpu_eq3", "mfu_megatron", "tflops_per_gpu_hw", "tflops_per_gpu",
    "mfu", "tokens_per_s_per_gpu", "step_time_s",
};

static const char *const expect_keys[] = {"metric", "value", "formula", "source", "tolerance",
                                          "peak_tflops"};
#define GS_EXPECT_NKEYS (sizeof expect_keys / sizeof expect_keys[0])

/* What one load carries: the name for messages, the parsed document, where errors go. */
typedef struct gs_expect_loader {
    const char *path;
    yaml_document_t *doc;
    gs_error *err;
} gs_expect_loader;

/* ------------------------------------------------------------------------ messages ---- */

static const char *scalar_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int scalar_is_quoted(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

static int scalar_is_null(const yaml_node_t *n)
{
    if (scalar_is_quoted(n))
        return 0;
    const char *t = scalar_text(n);
    return t[0] == '\0' || strcmp(t, "~") == 0 || strcasecmp(t, "null") == 0;
}

/* A scalar's text cut to one readable line. */
static const char *shown(const yaml_node_t *n, char *buf, size_t len)
{
    const char *t = scalar_text(n);
    size_t i = 0;
    for (; t[i] && i + 4 < len && i < 60; i++)
        buf[i] = isprint((unsigned char)t[i]) ? t[i] : '?';
    if (t[i] && i + 4 <= len) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* "a mapping", "a list", "null", the bare text or "the string \"...\"". */
static const char *describe(const yaml_node_t *n, char *buf, size_t len)
{
    char text[72];
    if (!n)
        snprintf(buf, len, "nothing");
    else if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, len, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "a list");
    else if (scalar_is_null(n))
        snprintf(buf, len, "null");
    else if (scalar_is_quoted(n))
        snprintf(buf, len, "the string \"%s\"", shown(n, text, sizeof text));
    else
        shown(n, buf, len);
    return buf;
}

static void join_names(const char *const *names, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* " (did you mean 'x'?)" when a name in names is within a third of s's length in edits; else "". */
static const char *hint_for(const char *s, const char *const *names, size_t n, char *buf, size_t len)
{
    size_t best = (size_t)-1, at = 0, slen = strlen(s);
    for (size_t i = 0; i < n; i++) {
        size_t d = gs_edit_distance(s, names[i]);
        if (d < best)
            best = d, at = i;
    }
    buf[0] = '\0';
    if (n && best <= (slen / 3 > 2 ? slen / 3 : 2))
        snprintf(buf, len, " (did you mean '%s'?)", names[at]);
    return buf;
}

/* Sets err to "PATH:LINE:COL: <message>" (or "PATH: <message>" when n is NULL). */
static gs_status fail_at(const gs_expect_loader *l, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gs_status fail_at(const gs_expect_loader *l, const yaml_node_t *n, const char *fmt, ...)
{
    char what[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (n)
        return gs_error_set(l->err, GS_ERR_INPUT, "%s:%lu:%lu: %s", l->path,
                            (unsigned long)n->start_mark.line + 1,
                            (unsigned long)n->start_mark.column + 1, what);
    return gs_error_set(l->err, GS_ERR_INPUT, "%s: %s", l->path, what);
}

/* -------------------------------------------------------------------- mapping keys ---- */

static yaml_node_t *lookup(const gs_expect_loader *l, const yaml_node_t *map, const char *key,
                           yaml_node_t **key_node)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strcmp(scalar_text(k), key) == 0) {
            if (key_node)
                *key_node = k;
            return yaml_document_get_node(l->doc, p->value);
        }
    }
    return NULL;
}

/* Every key of the expect mapping is a scalar from expect_keys, each at most once. */
static gs_status check_keys(const gs_expect_loader *l, const yaml_node_t *map)
{
    char found[96], list[256];
    join_names(expect_keys, GS_EXPECT_NKEYS, list, sizeof list);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            return fail_at(l, k ? k : map, "expect: found %s as a key, expected one of %s",
                           describe(k, found, sizeof found), list);
        size_t i = 0;
        while (i < GS_EXPECT_NKEYS && strcmp(expect_keys[i], scalar_text(k)) != 0)
            i++;
        char hint[96];
        if (i == GS_EXPECT_NKEYS)
            return fail_at(l, k, "expect: found unknown key '%s'%s, expected one of %s",
                           shown(k, found, sizeof found),
                           hint_for(scalar_text(k), expect_keys, GS_EXPECT_NKEYS, hint, sizeof hint),
                           list);
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *qk = yaml_document_get_node(l->doc, q->key);
            if (qk && qk->type == YAML_SCALAR_NODE && strcmp(scalar_text(qk), scalar_text(k)) == 0)
                return fail_at(l, k,
                               "expect: duplicate key '%s': found it again, expected each key "
                               "once (first at line %lu)",
                               expect_keys[i], (unsigned long)qk->start_mark.line + 1);
        }
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ field values ---- */

/* A finite number > 0, written bare (not quoted), no unit or percent sign. */
static gs_status value_positive(const gs_expect_loader *l, const yaml_node_t *v, const char *field,
                                const char *expected, double *out)
{
    char found[96];
    if (!v || v->type != YAML_SCALAR_NODE || scalar_is_null(v) || scalar_is_quoted(v))
        return fail_at(l, v, "expect.%s: found %s, expected %s", field,
                       describe(v, found, sizeof found), expected);
    const char *t = scalar_text(v);
    char *end = NULL;
    errno = 0;
    double x = strtod(t, &end);
    while (end && *end == ' ')
        end++;
    if (end == t || !end || *end != '\0' || errno == ERANGE || !isfinite(x))
        return fail_at(l, v, "expect.%s: found %s, expected %s", field,
                       describe(v, found, sizeof found), expected);
    if (!(x > 0))
        return fail_at(l, v, "expect.%s must be positive: found %s, expected %s", field,
                       describe(v, found, sizeof found), expected);
    *out = x;
    return GS_OK;
}

/* A non-empty string (quoted or plain) copied into buf. */
static gs_status value_text(const gs_expect_loader *l, const yaml_node_t *v, const char *field,
                            const char *expected, char *buf, size_t len)
{
    char found[96];
    if (!v || v->type != YAML_SCALAR_NODE || scalar_is_null(v) || scalar_text(v)[0] == '\0')
        return fail_at(l, v, "expect.%s: found %s, expected %s", field,
                       describe(v, found, sizeof found), expected);
    if (strlen(scalar_text(v)) >= len)
        return fail_at(l, v, "expect.%s is too long: found %zu bytes, expected at most %zu",
                       field, strlen(scalar_text(v)), len - 1);
    snprintf(buf, len, "%s", scalar_text(v));
    return GS_OK;
}

static gs_status load_block(const gs_expect_loader *l, const yaml_node_t *v, gs_expect *e)
{
    char found[96], list[256];
    gs_status st;
    if (v->type != YAML_MAPPING_NODE)
        return fail_at(l, v,
                       "expect: found %s, expected a mapping like {metric: tflops_per_gpu_eq3, "
                       "value: 137, formula: \"...\", source: \"...\"}",
                       describe(v, found, sizeof found));
    if ((st = check_keys(l, v)) != GS_OK)
        return st;
    static const char *const required[] = {"metric", "value", "formula", "source"};
    static const char *const example[] = {
        "metric: tflops_per_gpu_eq3", "value: 137 (the published number)",
        "formula: \"96 B s l h^2 (1 + s/6h + V/16lh)\"", "source: \"Narayanan et al. SC'21, Table 1\"",
    };
    for (size_t i = 0; i < 4; i++)
        if (!lookup(l, v, required[i], NULL))
            return fail_at(l, v, "expect: no '%s': found a mapping without it, expected %s",
                           required[i], example[i]);

    yaml_node_t *m = lookup(l, v, "metric", NULL);
    join_names(metric_names, GS_EXPECT_METRIC_COUNT, list, sizeof list);
    if (m->type != YAML_SCALAR_NODE || scalar_is_null(m))
        return fail_at(l, m, "expect.metric: found %s, expected one of %s",
                       describe(m, found, sizeof found), list);
    char hint[96];
    if (gs_expect_metric_parse(scalar_text(m), &e->metric) != 0)
        return fail_at(l, m, "expect.metric: found unknown value '%s'%s, expected one of %s",
                       shown(m, found, sizeof found),
                       hint_for(scalar_text(m), metric_names, GS_EXPECT_METRIC_COUNT, hint, sizeof hint),
                       list);

    const char *value_expected = gs_expect_metric_is_fraction(e->metric)
                                     ? "the published number as a fraction (0.41 for 41%)"
                                     : "the published number (a positive number)";
    if ((st = value_positive(l, lookup(l, v, "value", NULL), "value", value_expected, &e->value)) ||
        (st = value_text(l, lookup(l, v, "formula", NULL), "formula",
                         "the source's FLOP formula as text", e->formula, sizeof e->formula)) ||
        (st = value_text(l, lookup(l, v, "source", NULL), "source", "a citation as text",
                         e->source, sizeof e->source)))
        return st;
    if (gs_expect_metric_is_fraction(e->metric) && e->value > 1) {
        yaml_node_t *n = lookup(l, v, "value", NULL);
        return fail_at(l, n, "expect.value: found %s for metric %s, expected a fraction in (0, 1] "
                       "(0.41 for 41%%)",
                       describe(n, found, sizeof found), metric_names[e->metric]);
    }

    yaml_node_t *tol = lookup(l, v, "tolerance", NULL);
    e->tolerance = GS_EXPECT_DEFAULT_TOLERANCE;
    if (tol) {
        if ((st = value_positive(l, tol, "tolerance", "a relative tolerance in (0, 1] like 0.10",
                                 &e->tolerance)))
            return st;
        if (e->tolerance > 1)
            return fail_at(l, tol, "expect.tolerance: found %s, expected a relative tolerance in "
                           "(0, 1] like 0.10",
                           describe(tol, found, sizeof found));
    }

    yaml_node_t *peak_key = NULL, *peak = lookup(l, v, "peak_tflops", &peak_key);
    e->peak_flops = e->metric == GS_EXPECT_MFU_MEGATRON ? GS_EXPECT_MEGATRON_PEAK_FLOPS : 0;
    if (peak) {
        if (e->metric != GS_EXPECT_MFU_MEGATRON)
            return fail_at(l, peak_key,
                           "expect.peak_tflops: found it with metric %s, expected it only with "
                           "metric mfu_megatron (other metrics use the report's own peak)",
                           metric_names[e->metric]);
        double tflops;
        if ((st = value_positive(l, peak, "peak_tflops", "the source's peak TFLOP/s per GPU like 989",
                                 &tflops)))
            return st;
        e->peak_flops = tflops * 1e12;
    }
    e->line = (uint32_t)v->start_mark.line + 1;
    e->col = (uint32_t)v->start_mark.column + 1;
    return GS_OK;
}

/* --------------------------------------------------------------------------- text ---- */

/* Refuses flow collections nested deeper than GS_EXPECT_MAX_FLOW_DEPTH. Counts [ and { outside
 * quoted scalars and comments; brackets inside plain scalars only make the count larger. */
static gs_status check_flow_depth(const char *text, size_t len, const char *path, gs_error *err)
{
    unsigned long line = 1, col = 1;
    size_t depth = 0;
    char quote = 0;
    int comment = 0;
    for (size_t i = 0; i < len; i++, col++) {
        char c = text[i];
        if (c == '\n') {
            line++;
            col = 0;
            comment = 0;
            continue;
        }
        if (comment)
            continue;
        if (quote) {
            if (quote == '"' && c == '\\' && i + 1 < len && text[i + 1] != '\n')
                i++, col++;
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n'))
            comment = 1;
        else if ((c == '"' || c == '\'') &&
                 (i == 0 || strchr(" \t\n:,[{-?", text[i - 1]) != NULL))
            quote = c;
        else if (c == '[' || c == '{') {
            if (++depth > GS_EXPECT_MAX_FLOW_DEPTH)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "%s:%lu:%lu: found more than %d nested [ or {, expected a "
                                    "scenario nested a few levels deep",
                                    path, line, col, GS_EXPECT_MAX_FLOW_DEPTH);
        } else if ((c == ']' || c == '}') && depth > 0)
            depth--;
    }
    return GS_OK;
}

static gs_status parser_failure(const gs_expect_loader *l, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return gs_error_set(l->err, GS_ERR_NOMEM, "%s: out of memory while parsing YAML", l->path);
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_READER_ERROR)
        return gs_error_set(l->err, GS_ERR_INPUT,
                            "%s: cannot read YAML: %s at byte %zu: found bad text, expected UTF-8",
                            l->path, problem, p->problem_offset);
    return gs_error_set(l->err, GS_ERR_INPUT, "%s:%lu:%lu: YAML syntax error: %s", l->path,
                        (unsigned long)p->problem_mark.line + 1,
                        (unsigned long)p->problem_mark.column + 1, problem);
}

/* --------------------------------------------------------------------------- API ---- */

gs_status gs_expect_load_string(const char *text, size_t len, const char *name, gs_expect *out,
                                int *present, gs_error *err)
{
    gs_status st = GS_OK;
    yaml_parser_t parser;
    yaml_document_t doc;
    int have_parser = 0, have_doc = 0;
    gs_expect_loader l = {name ? name : "<string>", &doc, err};

    memset(out, 0, sizeof *out);
    *present = 0;
    if ((st = check_flow_depth(text, len, l.path, err)) != GS_OK)
        goto out;
    if (!yaml_parser_initialize(&parser)) {
        st = gs_error_set(err, GS_ERR_NOMEM, "%s: cannot initialize the YAML parser", l.path);
        goto out;
    }
    have_parser = 1;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = parser_failure(&l, &parser);
        goto out;
    }
    have_doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        goto out; /* not a scenario: the scenario loader says why */
    yaml_node_t *block = lookup(&l, root, "expect", NULL);
    if (!block)
        goto out;
    if ((st = load_block(&l, block, out)) != GS_OK)
        goto out;
    *present = 1;
out:
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    return st;
}

gs_status gs_expect_load(const char *path, gs_expect *out, int *present, gs_error *err)
{
    gs_status st = GS_OK;
    char *text = NULL;
    memset(out, 0, sizeof *out);
    *present = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = S_ISDIR(sb.st_mode) ? EISDIR : errno ? errno : EINVAL;
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path, strerror(e));
        goto out;
    }
    if ((uint64_t)sb.st_size > GS_EXPECT_MAX_FILE_BYTES) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: scenario file too large: found %llu bytes, expected at most %u",
                          path, (unsigned long long)sb.st_size, GS_EXPECT_MAX_FILE_BYTES);
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    if (!(text = malloc(size + 1))) {
        st = gs_error_set(err, GS_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, size + 1);
        goto out;
    }
    if (fread(text, 1, size, f) != size || ferror(f)) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path,
                          ferror(f) ? strerror(errno) : "file changed while reading");
        goto out;
    }
    text[size] = '\0';
    st = gs_expect_load_string(text, size, path, out, present, err);
out:
    free(text);
    if (f)
        fclose(f);
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

double gs_expect_predicted(const gs_expect *e, const gs_scenario *s, const gs_report *r)
{
    double step = r->step_time_s;
    double gpus = (double)s->grid.dp * (double)s->grid.pp * (double)s->grid.tp;
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
    return m == GS_EXPECT_MFU || m == GS_EXPECT_MFU_MEGATRON;
}
