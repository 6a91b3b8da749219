/* The schedule's stable text form (format version 2, documented in engine/schedule.c): the
 * buffered writer the dumps share, the text dump and its loader. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "engine/roles.h"
#include "engine/schedule_internal.h"


void gs__out_flush(gs__writer *o)
{
    if (o->n)
        fwrite(o->buf, 1, o->n, o->f);
    o->n = 0;
}

void gs__out_reserve(gs__writer *o, size_t k)
{
    if (o->n + k > GS_OUT_BYTES)
        gs__out_flush(o);
}

void gs__out_mem(gs__writer *o, const char *s, size_t k)
{
    if (k > GS_OUT_BYTES / 2) {
        gs__out_flush(o);
        fwrite(s, 1, k, o->f);
        return;
    }
    gs__out_reserve(o, k);
    memcpy(o->buf + o->n, s, k);
    o->n += k;
}

void gs__out_str(gs__writer *o, const char *s)
{
    gs__out_mem(o, s, strlen(s));
}

void gs__out_char(gs__writer *o, char c)
{
    gs__out_reserve(o, 1);
    o->buf[o->n++] = c;
}

void gs__out_u64(gs__writer *o, uint64_t v)
{
    char tmp[20];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    gs__out_reserve(o, 20);
    while (i)
        o->buf[o->n++] = tmp[--i];
}

void gs__out_i64(gs__writer *o, int64_t v)
{
    if (v < 0) {
        gs__out_char(o, '-');
        gs__out_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        gs__out_u64(o, (uint64_t)v);
    }
}

/* "%.17g": integral values below 10^17 print as their digits (what %.17g writes for them). */
void gs__out_double(gs__writer *o, double d)
{
    if (d >= 0 && d < 1e17 && d == (double)(uint64_t)d && !(d == 0 && signbit(d))) {
        gs__out_u64(o, (uint64_t)d);
        return;
    }
    gs__out_reserve(o, 40);
    int k = snprintf(o->buf + o->n, 40, "%.17g", d);
    if (k > 0)
        o->n += (size_t)k < 40 ? (size_t)k : 39;
}

void gs__out_layer(gs__writer *o, int32_t layer)
{
    char b[16];
    gs__out_str(o, gs__layer_word(layer, b, sizeof b));
}

void gs__out_list(gs__writer *o, const uint32_t *l, uint32_t n, char empty)
{
    if (n == 0 && empty) {
        gs__out_char(o, empty);
        return;
    }
    for (uint32_t j = 0; j < n; j++) {
        if (j)
            gs__out_char(o, ',');
        gs__out_u64(o, l[j]);
    }
}

/* "-" for 0 (a field the kind does not use), else the number. */
void gs__out_small(gs__writer *o, unsigned v)
{
    if (v == 0)
        gs__out_char(o, '-');
    else
        gs__out_u64(o, v);
}

gs_status gs__out_finish(gs__writer *o, gs_error *err, const char *what)
{
    gs__out_flush(o);
    int bad = ferror(o->f);
    int saved = errno;
    free(o);
    if (bad)
        return gs_error_set(err, GS_ERR_IO, "writing the schedule %s: %s", what, strerror(saved));
    return GS_OK;
}

/* The dump's header: format, scenario (escaped), mesh, micro-batches, rank count. */
static void dump_header(gs__writer *o, const gs_schedule *sch)
{
    char order[32];
    gs__out_str(o, "gridstep-schedule 2\nscenario ");
    size_t slen = strnlen(sch->scenario, sizeof sch->scenario);
    if (slen == 0) {
        gs__out_char(o, '-');
    } else if (slen == 1 && sch->scenario[0] == '-') {
        gs__out_str(o, "%2D");
    } else {
        for (size_t i = 0; i < slen; i++) {
            unsigned char c = (unsigned char)sch->scenario[i];
            if (c <= ' ' || c == '%' || c >= 0x7f) {
                char esc[4];
                snprintf(esc, sizeof esc, "%%%02X", c);
                gs__out_str(o, esc);
            } else {
                gs__out_char(o, (char)c);
            }
        }
    }
    gs_mesh_order_format_cp(sch->mesh.order, sch->mesh.cp > 1, sch->mesh.cp_outer, order, sizeof order);
    gs__out_str(o, "\nmesh tp ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_TP]);
    gs__out_str(o, " dp ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_DP]);
    gs__out_str(o, " pp ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_PP]);
    gs__out_str(o, " order ");
    gs__out_str(o, order);
    gs__out_str(o, " gpus_per_node ");
    gs__out_u64(o, sch->mesh.gpus_per_node);
    if (sch->mesh.first_layers || sch->mesh.last_layers) { /* uneven first / last stages only */
        gs__out_str(o, " stage_layers ");
        gs__out_u64(o, sch->mesh.first_layers);
        gs__out_char(o, ' ');
        gs__out_u64(o, sch->mesh.last_layers);
    }
    if (sch->mesh.account_embedding || sch->mesh.account_loss) { /* the embedding / loss as layers */
        gs__out_str(o, " account ");
        gs__out_u64(o, (uint64_t)sch->mesh.account_embedding);
        gs__out_char(o, ' ');
        gs__out_u64(o, (uint64_t)sch->mesh.account_loss);
    }
    if (sch->mesh.cp > 1) { /* context parallelism only: dp above is dp x cp */
        gs__out_str(o, " cp ");
        gs__out_u64(o, sch->mesh.cp);
    }
    if (sch->mesh.cp > 1 && sch->mesh.cp_a2a > 1) { /* hierarchical CP only */
        gs__out_str(o, " cp_a2a ");
        gs__out_u64(o, sch->mesh.cp_a2a);
    }
    if (sch->mesh.ep > 1) { /* expert parallelism only */
        gs__out_str(o, " ep ");
        gs__out_u64(o, sch->mesh.ep);
    }
    if (sch->mesh.etp) { /* expert tensor parallelism below tp only */
        gs__out_str(o, " etp ");
        gs__out_u64(o, sch->mesh.etp);
    }
    if (sch->mesh.layout.n) { /* a custom pipeline layout only */
        char lay[1024];
        gs_layout_format(&sch->mesh.layout, lay, sizeof lay);
        gs__out_str(o, " layout ");
        gs__out_str(o, lay);
    }
    gs__out_str(o, "\nmicrobatches ");
    gs__out_u64(o, sch->microbatches);
    gs__out_str(o, "\nexact ");
    gs__out_i64(o, sch->exact);
    gs__out_str(o, "\nranks ");
    gs__out_u64(o, sch->nranks);
    gs__out_char(o, '\n');
}

/* One tensor's line of a rank list's dump. */
static void dump_tensor(gs__writer *o, size_t i, const gs_tensor *t)
{
    gs__out_str(o, "t ");
    gs__out_u64(o, i);
    gs__out_str(o, " kind ");
    gs__out_str(o, gs_tensor_kind_name((gs_tensor_kind)t->kind));
    gs__out_str(o, " bytes ");
    gs__out_u64(o, t->bytes);
    gs__out_str(o, " layer ");
    gs__out_layer(o, t->layer);
    gs__out_str(o, " mb ");
    gs__out_u64(o, t->mb);
    gs__out_str(o, " unit ");
    gs__out_u64(o, t->unit);
    gs__out_str(o, " resident ");
    gs__out_u64(o, t->resident);
    gs__out_str(o, " host ");
    gs__out_u64(o, t->on_host);
    gs__out_char(o, '\n');
}

/* One event's line of rank list r's dump. */
static void dump_event(gs__writer *o, const gs_rank_events *r, size_t i, const gs_event *e)
{
    gs__out_str(o, "e ");
    gs__out_u64(o, i);
    gs__out_char(o, ' ');
    gs__out_str(o, gs_event_kind_name((gs_event_kind)e->kind));
    gs__out_str(o, " stream ");
    gs__out_str(o, gs_stream_name((gs_stream)e->stream));
    gs__out_str(o, " phase ");
    gs__out_str(o, gs_phase_name((gs_phase)e->phase));
    gs__out_str(o, " role ");
    gs__out_str(o, gs_role_name((gs_role)e->role));
    gs__out_str(o, " part ");
    gs__out_u64(o, e->part);
    gs__out_str(o, " op ");
    if (e->kind == GS_EV_COMPUTE)
        gs__out_str(o, gs_op_name((gs_op)e->op));
    else if (e->kind == GS_EV_COLLECTIVE)
        gs__out_str(o, gs_coll_op_name((gs_coll_op)e->op));
    else
        gs__out_small(o, e->op);
    gs__out_str(o, " group ");
    if (e->kind == GS_EV_COLLECTIVE)
        gs__out_str(o, gs_group_kind_name((gs_group_kind)e->group));
    else
        gs__out_small(o, e->group);
    gs__out_str(o, " chunk ");
    gs__out_u64(o, e->chunk);
    gs__out_str(o, " layer ");
    gs__out_layer(o, e->layer);
    gs__out_str(o, " mb ");
    gs__out_u64(o, e->mb);
    gs__out_str(o, " unit ");
    gs__out_u64(o, e->unit);
    gs__out_str(o, " gemm ");
    gs__out_u64(o, e->gemm_m);
    gs__out_char(o, ' ');
    gs__out_u64(o, e->gemm_n);
    gs__out_char(o, ' ');
    gs__out_u64(o, e->gemm_k);
    gs__out_char(o, ' ');
    gs__out_u64(o, e->gemm_batch);
    gs__out_str(o, " peer ");
    gs__out_u64(o, e->peer);
    gs__out_str(o, " gsize ");
    gs__out_u64(o, e->group_size);
    gs__out_str(o, " bytes ");
    gs__out_u64(o, e->bytes);
    gs__out_str(o, " flops ");
    gs__out_double(o, e->flops);
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        gs__out_char(o, ' ');
        gs__out_str(o, gs__link_names[w]);
        gs__out_char(o, ' ');
        gs__out_list(o, gs_event_list(r, e, w), e->nlinks[w], '-');
    }
    if (e->net_share > 0.0f) {
        char v[32];
        snprintf(v, sizeof v, " net %.9g", (double)e->net_share);
        gs__out_str(o, v);
    }
    gs__out_char(o, '\n');
}

gs_status gs_schedule_dump(const gs_schedule *sch, FILE *f, gs_error *err)
{
    gs__writer *o = malloc(sizeof *o);
    if (!o)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory writing the schedule dump");
    o->f = f;
    o->n = 0;
    dump_header(o, sch);
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        gs__out_str(o, "rank ");
        gs__out_u64(o, r->rank);
        gs__out_str(o, " class ");
        gs__out_u64(o, r->class_size);
        gs__out_str(o, " stage ");
        gs__out_u64(o, r->stage);
        gs__out_str(o, " tensors ");
        gs__out_u64(o, r->ntensors);
        gs__out_str(o, " events ");
        gs__out_u64(o, r->nevents);
        gs__out_char(o, '\n');
        for (size_t i = 0; i < r->ntensors; i++)
            dump_tensor(o, i, &r->tensors[i]);
        for (size_t i = 0; i < r->nevents; i++)
            dump_event(o, r, i, &r->events[i]);
    }
    gs__out_str(o, "end\n");
    return gs__out_finish(o, err, "dump");
}

/* ---------------------------------------------------------------------------- loader ---- */

#define LOAD_MAX_TOKENS 64

typedef struct loader {
    FILE *f;
    const char *path;
    size_t lineno;
    char *line;
    size_t cap;
    char *tok[LOAD_MAX_TOKENS];
    size_t ntok;
    int too_many; /* the line had more than LOAD_MAX_TOKENS words */
    gs_error *err;
} loader;

/* Reads the next line and splits it at spaces. Returns 1, or 0 at end of file. */
static int load_line(loader *ld)
{
    errno = 0;
    ssize_t n = getline(&ld->line, &ld->cap, ld->f);
    if (n < 0)
        return 0;
    ld->lineno++;
    if (n > 0 && ld->line[n - 1] == '\n')
        ld->line[--n] = '\0';
    if (n > 0 && ld->line[n - 1] == '\r')
        ld->line[--n] = '\0';
    ld->ntok = 0;
    ld->too_many = 0;
    char *p = ld->line;
    while (*p) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        if (ld->ntok == LOAD_MAX_TOKENS) {
            ld->too_many = 1;
            break;
        }
        ld->tok[ld->ntok++] = p;
        while (*p && *p != ' ')
            p++;
    }
    return 1;
}

/* "found X, expected Y" for token i of the current line (or the end of the line / file). */
static gs_status load_fail(loader *ld, size_t i, const char *expected, ...) __attribute__((format(printf, 3, 4)));
static gs_status load_fail(loader *ld, size_t i, const char *expected, ...)
{
    char what[640], found[64]; /* what: room for the list of roles */
    va_list ap;
    va_start(ap, expected);
    vsnprintf(what, sizeof what, expected, ap);
    va_end(ap);
    if (i == SIZE_MAX) {
        snprintf(found, sizeof found, "end of file");
        return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found %s, expected %s", ld->path, ld->lineno + 1, found, what);
    }
    if (i >= ld->ntok) {
        snprintf(found, sizeof found, "end of line");
    } else {
        size_t k = 0;
        found[k++] = '\'';
        for (const char *p = ld->tok[i]; *p && k < 44; p++)
            found[k++] = (*p > ' ' && *p < 0x7f) ? *p : '?';
        if (strlen(ld->tok[i]) > 42) {
            memcpy(found + k, "...", 3);
            k += 3;
        }
        found[k++] = '\'';
        found[k] = '\0';
    }
    return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found %s, expected %s", ld->path, ld->lineno, found, what);
}

static gs_status load_next(loader *ld, const char *expected)
{
    if (!load_line(ld)) {
        if (ferror(ld->f))
            return gs_error_set(ld->err, GS_ERR_IO, "%s:%zu: read error: %s", ld->path, ld->lineno + 1, strerror(errno));
        return load_fail(ld, SIZE_MAX, "%s", expected);
    }
    return GS_OK;
}

static gs_status load_word(loader *ld, size_t i, const char *word)
{
    if (i >= ld->ntok || strcmp(ld->tok[i], word) != 0)
        return load_fail(ld, i, "'%s'", word);
    return GS_OK;
}

static gs_status load_end_of_line(loader *ld, size_t i)
{
    if (ld->ntok > i || ld->too_many)
        return load_fail(ld, i, "end of line");
    return GS_OK;
}

static gs_status load_u64(loader *ld, size_t i, const char *what, uint64_t max, uint64_t *out)
{
    const char *s = i < ld->ntok ? ld->tok[i] : NULL;
    uint64_t v = 0;
    if (!s || !*s || (s[0] == '0' && s[1]))
        return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
    *out = v;
    return GS_OK;
}

/* "KEY VALUE" at tokens i, i+1. */
static gs_status load_kv_u64(loader *ld, size_t i, const char *key, uint64_t max, uint64_t *out)
{
    gs_status st = load_word(ld, i, key);
    return st != GS_OK ? st : load_u64(ld, i + 1, key, max, out);
}

static gs_status load_kv_u32(loader *ld, size_t i, const char *key, uint32_t *out)
{
    uint64_t v;
    gs_status st = load_kv_u64(ld, i, key, UINT32_MAX, &v);
    if (st == GS_OK)
        *out = (uint32_t)v;
    return st;
}

/* Index of token i in names[0..n), or a failure. */
static gs_status load_name(loader *ld, size_t i, const char *what, const char *const *names, int n, int *out)
{
    if (i < ld->ntok)
        for (int k = 0; k < n; k++)
            if (strcmp(ld->tok[i], names[k]) == 0) {
                *out = k;
                return GS_OK;
            }
    char list[256];
    size_t pos = 0;
    for (int k = 0; k < n; k++)
        gs__append(list, sizeof list, &pos, "%s%s", k ? (k == n - 1 ? " or " : ", ") : "", names[k]);
    return load_fail(ld, i, "%s (%s)", what, list);
}

/* A byte that is "-" (0) or a number 1..255. */
static gs_status load_small(loader *ld, size_t i, const char *what, uint8_t *out)
{
    if (i < ld->ntok && strcmp(ld->tok[i], "-") == 0) {
        *out = 0;
        return GS_OK;
    }
    uint64_t v;
    gs_status st = load_u64(ld, i, what, 255, &v);
    if (st == GS_OK && v == 0)
        return load_fail(ld, i, "%s ('-' for 0, or 1 to 255)", what);
    if (st == GS_OK)
        *out = (uint8_t)v;
    return st;
}

static gs_status load_layer(loader *ld, size_t i, int32_t *out)
{
    const char *s = i < ld->ntok ? ld->tok[i] : "";
    if (strcmp(s, "emb") == 0)
        *out = GS_LAYER_EMBED;
    else if (strcmp(s, "head") == 0)
        *out = GS_LAYER_HEAD;
    else if (strcmp(s, "none") == 0)
        *out = GS_LAYER_NONE;
    else {
        uint64_t v;
        if (load_u64(ld, i, "layer", INT32_MAX, &v) != GS_OK)
            return load_fail(ld, i, "a layer (an index from 0 to %d, emb, head or none)", INT32_MAX);
        *out = (int32_t)v;
    }
    return GS_OK;
}

static gs_status load_flag(loader *ld, size_t i, const char *key, uint8_t *out)
{
    uint64_t v;
    gs_status st = load_word(ld, i, key);
    if (st == GS_OK && (i + 1 >= ld->ntok || (strcmp(ld->tok[i + 1], "0") != 0 && strcmp(ld->tok[i + 1], "1") != 0)))
        st = load_fail(ld, i + 1, "%s (0 or 1)", key);
    if (st == GS_OK) {
        v = ld->tok[i + 1][0] == '1';
        *out = (uint8_t)v;
    }
    return st;
}

/* A list "a,b,c" or "-" of indices below limit, appended to *buf. */
static gs_status load_list(loader *ld, size_t i, const char *what, uint32_t limit, uint32_t **buf, size_t *n,
                           size_t *cap, uint16_t *count)
{
    const char *s = i < ld->ntok ? ld->tok[i] : NULL;
    if (s && strcmp(s, "-") == 0) {
        *count = 0;
        return GS_OK;
    }
    if (!s || !*s)
        return load_fail(ld, i, "the %s list (comma-separated indices, or '-')", what);
    size_t start = *n;
    const char *p = s;
    for (;;) {
        uint64_t v = 0;
        const char *q = p;
        while (*q >= '0' && *q <= '9' && v <= UINT32_MAX)
            v = v * 10 + (uint64_t)(*q++ - '0');
        if (q == p || (*q != ',' && *q != '\0') || (p[0] == '0' && q - p > 1))
            return load_fail(ld, i, "the %s list (comma-separated indices, or '-')", what);
        if (v >= limit)
            return load_fail(ld, i, "%s indices below %" PRIu32 " (found %" PRIu64 ")", what, limit, v);
        if (*n - start >= UINT16_MAX)
            return load_fail(ld, i, "at most %u %s", (unsigned)UINT16_MAX, what);
        if (gs__grow((void **)buf, cap, *n + 1, sizeof **buf) != 0)
            return gs_error_set(ld->err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld->path, ld->lineno);
        (*buf)[(*n)++] = (uint32_t)v;
        if (*q == '\0')
            break;
        p = q + 1;
    }
    *count = (uint16_t)(*n - start);
    return GS_OK;
}

static gs_status load_tensor(loader *ld, gs_rank_events *r, size_t idx)
{
    gs_tensor t;
    memset(&t, 0, sizeof t);
    uint64_t v;
    int k;
    gs_status st;
    if ((st = load_word(ld, 0, "t")) != GS_OK)
        return st;
    if ((st = load_u64(ld, 1, "the tensor index", UINT64_MAX, &v)) != GS_OK)
        return st;
    if (v != idx)
        return load_fail(ld, 1, "tensor index %zu", idx);
    if ((st = load_word(ld, 2, "kind")) != GS_OK ||
        (st = load_name(ld, 3, "a tensor kind", gs__tensor_kind_names, GS_T_KIND_COUNT, &k)) != GS_OK)
        return st;
    t.kind = (uint8_t)k;
    if ((st = load_kv_u64(ld, 4, "bytes", UINT64_MAX, &t.bytes)) != GS_OK || (st = load_word(ld, 6, "layer")) != GS_OK ||
        (st = load_layer(ld, 7, &t.layer)) != GS_OK || (st = load_kv_u32(ld, 8, "mb", &t.mb)) != GS_OK ||
        (st = load_kv_u32(ld, 10, "unit", &t.unit)) != GS_OK || (st = load_flag(ld, 12, "resident", &t.resident)) != GS_OK ||
        (st = load_flag(ld, 14, "host", &t.on_host)) != GS_OK || (st = load_end_of_line(ld, 16)) != GS_OK)
        return st;
    if (gs_rank_add_tensor(r, &t, NULL) != GS_OK)
        return gs_error_set(ld->err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld->path, ld->lineno);
    return GS_OK;
}

typedef struct list_scratch {
    uint32_t *buf;
    size_t n, cap;
} list_scratch;

static gs_status load_event(loader *ld, gs_rank_events *r, size_t idx, size_t nevents, list_scratch *ls)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    uint64_t v;
    int k;
    gs_status st;
    if ((st = load_word(ld, 0, "e")) != GS_OK || (st = load_u64(ld, 1, "the event index", UINT64_MAX, &v)) != GS_OK)
        return st;
    if (v != idx)
        return load_fail(ld, 1, "event index %zu", idx);
    if ((st = load_name(ld, 2, "an event kind", gs__event_kind_names, GS_EV_KIND_COUNT, &k)) != GS_OK)
        return st;
    e.kind = (uint8_t)k;
    if ((st = load_word(ld, 3, "stream")) != GS_OK ||
        (st = load_name(ld, 4, "a stream", gs__stream_names, GS_STREAM_COUNT, &k)) != GS_OK)
        return st;
    e.stream = (uint8_t)k;
    if ((st = load_word(ld, 5, "phase")) != GS_OK ||
        (st = load_name(ld, 6, "a phase", gs__phase_names, GS_PHASE_COUNT, &k)) != GS_OK)
        return st;
    e.phase = (uint8_t)k;
    if ((st = load_word(ld, 7, "role")) != GS_OK)
        return st;
    gs_role role = 8 < ld->ntok ? gs_role_by_name(ld->tok[8], strlen(ld->tok[8])) : GS_ROLE_COUNT;
    if (role == GS_ROLE_COUNT) { /* "none" loads; validation refuses it */
        char names[512];
        size_t at = 0;
        for (int q = 1; q < GS_ROLE_COUNT && at < sizeof names; q++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", q > 1 ? ", " : "", gs_role_name((gs_role)q));
        return load_fail(ld, 8, "a role (%s)", names);
    }
    e.role = (uint8_t)role;
    if ((st = load_kv_u64(ld, 9, "part", UINT16_MAX, &v)) != GS_OK)
        return st;
    e.part = (uint16_t)v;
    if ((st = load_word(ld, 11, "op")) != GS_OK)
        return st;
    if (e.kind == GS_EV_COMPUTE)
        st = load_name(ld, 12, "a compute op", gs__op_names, GS_OP_COUNT, &k), e.op = (uint8_t)k;
    else if (e.kind == GS_EV_COLLECTIVE)
        st = load_name(ld, 12, "a collective", gs__coll_names, GS_COLL_COUNT, &k), e.op = (uint8_t)k;
    else
        st = load_small(ld, 12, "op", &e.op);
    if (st != GS_OK || (st = load_word(ld, 13, "group")) != GS_OK)
        return st;
    if (e.kind == GS_EV_COLLECTIVE)
        st = load_name(ld, 14, "a group kind", gs__group_names, GS_GROUP_KIND_COUNT, &k), e.group = (uint8_t)k;
    else
        st = load_small(ld, 14, "group", &e.group);
    if (st != GS_OK || (st = load_kv_u64(ld, 15, "chunk", 255, &v)) != GS_OK)
        return st;
    e.chunk = (uint8_t)v;
    if ((st = load_word(ld, 17, "layer")) != GS_OK || (st = load_layer(ld, 18, &e.layer)) != GS_OK ||
        (st = load_kv_u32(ld, 19, "mb", &e.mb)) != GS_OK || (st = load_kv_u32(ld, 21, "unit", &e.unit)) != GS_OK ||
        (st = load_word(ld, 23, "gemm")) != GS_OK || (st = load_u64(ld, 24, "gemm m", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_m = (uint32_t)v;
    if ((st = load_u64(ld, 25, "gemm n", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_n = (uint32_t)v;
    if ((st = load_u64(ld, 26, "gemm k", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_k = (uint32_t)v;
    if ((st = load_u64(ld, 27, "gemm batch", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_batch = (uint32_t)v;
    if ((st = load_kv_u64(ld, 28, "peer", UINT64_MAX, &e.peer)) != GS_OK ||
        (st = load_kv_u64(ld, 30, "gsize", UINT64_MAX, &e.group_size)) != GS_OK ||
        (st = load_kv_u64(ld, 32, "bytes", UINT64_MAX, &e.bytes)) != GS_OK || (st = load_word(ld, 34, "flops")) != GS_OK)
        return st;
    {
        const char *s = 35 < ld->ntok ? ld->tok[35] : NULL;
        char *end = NULL;
        if (s)
            e.flops = strtod(s, &end);
        if (!s || end == s || *end || !isfinite(e.flops) || e.flops < 0 ||
            !((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] == '0')))
            return load_fail(ld, 35, "a FLOP count (a finite number >= 0)");
    }
    ls->n = 0;
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        size_t at = 36 + 2 * (size_t)w;
        uint32_t limit = w == GS_LINK_DEPS ? (uint32_t)nevents : (uint32_t)r->ntensors;
        if ((st = load_word(ld, at, gs__link_names[w])) != GS_OK ||
            (st = load_list(ld, at + 1, w == GS_LINK_DEPS ? "event" : "tensor", limit, &ls->buf, &ls->n, &ls->cap,
                            &e.nlinks[w])) != GS_OK)
            return st;
    }
    if (ld->ntok > 46 && !ld->too_many && strcmp(ld->tok[46], "net") == 0) {
        /* a flex dispatcher's all-to-all: the share of its bytes that leaves the node */
        const char *s = 47 < ld->ntok ? ld->tok[47] : NULL;
        char *end = NULL;
        double x = s ? strtod(s, &end) : 0.0;
        if (!s || end == s || *end || !(x > 0.0 && x <= 1.0) || e.kind != GS_EV_COLLECTIVE ||
            e.op != GS_COLL_ALLTOALL)
            return load_fail(ld, 47, "a network share in (0, 1] (on an all-to-all only)");
        e.net_share = (float)x;
        if ((st = load_end_of_line(ld, 48)) != GS_OK)
            return st;
    } else if ((st = load_end_of_line(ld, 46)) != GS_OK)
        return st;
    const uint32_t *lists[GS_LINK_LISTS];
    size_t off = 0;
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        lists[w] = ls->buf ? ls->buf + off : NULL; /* no list read yet: buf is NULL */
        off += e.nlinks[w];
    }
    st = gs_rank_add_event(r, &e, lists, NULL);
    if (st != GS_OK)
        return gs_error_set(ld->err, st, "%s:%zu: cannot store the event (%s)", ld->path, ld->lineno, gs_status_name(st));
    return GS_OK;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The first line: 'gridstep-schedule 2' (version 1 dumps are refused, saying why). */
static gs_status load_version(loader *ld)
{
    gs_status st;
    if ((st = load_next(ld, "'gridstep-schedule 2'")) != GS_OK || (st = load_word(ld, 0, "gridstep-schedule")) != GS_OK)
        return st;
    if (ld->ntok >= 2 && strcmp(ld->tok[1], "1") == 0)
        /* version 1 had no roles, and a role cannot be told from an event's place in its list */
        return load_fail(ld, 1, "format version 2 (version 1 dumps carry no event roles: write the dump again "
                                "with this gridstep's schedule --dump)");
    if (ld->ntok < 2 || strcmp(ld->tok[1], "2") != 0)
        return load_fail(ld, 1, "format version 2");
    return load_end_of_line(ld, 2);
}

/* 'scenario NAME': the name percent-decoded into sch->scenario ('-': none). */
static gs_status load_scenario_name(loader *ld, gs_schedule *sch)
{
    gs_status st;
    if ((st = load_next(ld, "'scenario NAME'")) != GS_OK || (st = load_word(ld, 0, "scenario")) != GS_OK)
        return st;
    if (ld->ntok < 2)
        return load_fail(ld, 1, "the scenario name");
    if (strcmp(ld->tok[1], "-") != 0) {
        size_t k = 0;
        for (const char *p = ld->tok[1]; *p; p++) {
            unsigned c = (unsigned char)*p;
            if (c == '%') {
                int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
                unsigned hv = hi < 0 || lo < 0 ? 0 : (unsigned)(hi * 16 + lo);
                if (hv == 0)
                    return load_fail(ld, 1, "a percent-encoded scenario name (%%XX escapes)");
                c = hv;
                p += 2;
            }
            if (k + 1 >= sizeof sch->scenario)
                return load_fail(ld, 1, "a scenario name of at most %zu bytes", sizeof sch->scenario - 1);
            sch->scenario[k++] = (char)c;
        }
        sch->scenario[k] = '\0';
    }
    return load_end_of_line(ld, 2);
}

/* 'mesh tp T dp D pp P order O gpus_per_node G [stage_layers F L] [account E L] [cp C [cp_a2a A]] [ep E]'
 * into sch->mesh (account: 1 where the embedding / the loss count as a layer of the split). */
static gs_status load_mesh(loader *ld, gs_schedule *sch)
{
    gs_status st;
    uint64_t tp, dp, pp, gpn, cp = 1, ep = 1;
    int has_cp = 0, cp_outer = 0;
    if ((st = load_next(ld, "'mesh tp T dp D pp P order O gpus_per_node G'")) != GS_OK ||
        (st = load_word(ld, 0, "mesh")) != GS_OK || (st = load_kv_u64(ld, 1, "tp", UINT64_MAX, &tp)) != GS_OK ||
        (st = load_kv_u64(ld, 3, "dp", UINT64_MAX, &dp)) != GS_OK ||
        (st = load_kv_u64(ld, 5, "pp", UINT64_MAX, &pp)) != GS_OK || (st = load_word(ld, 7, "order")) != GS_OK)
        return st;
    gs_dim order[GS_DIM_COUNT];
    if (ld->ntok < 9 || gs_mesh_order_parse_cp(ld->tok[8], order, &has_cp, &cp_outer) != 0)
        return load_fail(ld, 8, "a rank order (a permutation like tp-dp-pp, or tp-cp-dp-pp)");
    uint64_t first_layers = 0, last_layers = 0; /* optional: "stage_layers F L" */
    if ((st = load_kv_u64(ld, 9, "gpus_per_node", UINT64_MAX, &gpn)) != GS_OK)
        return st;
    size_t at = 11;
    if ((ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "stage_layers") == 0) {
        if ((st = load_kv_u64(ld, at, "stage_layers", UINT32_MAX, &first_layers)) != GS_OK ||
            (st = load_u64(ld, at + 2, "the last stage's layers", UINT32_MAX, &last_layers)) != GS_OK)
            return st;
        at += 3;
    }
    uint64_t account_emb = 0, account_loss = 0; /* optional: "account E L" */
    if ((ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "account") == 0) {
        if ((st = load_kv_u64(ld, at, "account", 1, &account_emb)) != GS_OK ||
            (st = load_u64(ld, at + 2, "whether the loss is accounted (0 or 1)", 1, &account_loss)) != GS_OK)
            return st;
        at += 3;
    }
    if (has_cp && (st = load_kv_u64(ld, at, "cp", UINT32_MAX, &cp)) != GS_OK)
        return st;
    at += has_cp ? 2 : 0;
    uint64_t cp_a2a = 1; /* optional after cp: "cp_a2a A" (hierarchical CP) */
    if (has_cp && (ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "cp_a2a") == 0) {
        if ((st = load_kv_u64(ld, at, "cp_a2a", UINT32_MAX, &cp_a2a)) != GS_OK)
            return st;
        at += 2;
    }
    if ((ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "ep") == 0) {
        if ((st = load_kv_u64(ld, at, "ep", UINT32_MAX, &ep)) != GS_OK)
            return st;
        at += 2;
    }
    uint64_t etp = tp; /* optional: "etp T" below tp */
    if ((ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "etp") == 0) {
        if ((st = load_kv_u64(ld, at, "etp", UINT32_MAX, &etp)) != GS_OK)
            return st;
        at += 2;
    }
    gs_layout layout; /* optional: "layout STRING" (Megatron's syntax) */
    memset(&layout, 0, sizeof layout);
    if ((ld->ntok > at || ld->too_many) && strcmp(ld->tok[at], "layout") == 0) {
        char why[200];
        if (ld->ntok <= at + 1)
            return load_fail(ld, at + 1, "a pipeline layout after 'layout'");
        if (gs_layout_parse(ld->tok[at + 1], &layout, why, sizeof why) != 0)
            return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: layout: %s", ld->path, ld->lineno, why);
        at += 2;
    }
    if ((st = load_end_of_line(ld, at)) != GS_OK)
        return st;
    gs_error merr;
    gs_error_init(&merr);
    if (gs_mesh_init(&sch->mesh, tp, dp, pp, order, gpn, &merr) != GS_OK ||
        (has_cp && gs_mesh_set_cp(&sch->mesh, cp, cp_outer, &merr) != GS_OK) ||
        (has_cp && gs_mesh_set_cp_a2a(&sch->mesh, cp_a2a, &merr) != GS_OK) ||
        gs_mesh_set_etp(&sch->mesh, etp, &merr) != GS_OK || gs_mesh_set_ep(&sch->mesh, ep, &merr) != GS_OK)
        return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found an impossible mesh, expected a valid one (%s)",
                            ld->path, ld->lineno, merr.msg);
    gs_mesh_set_stage_layers(&sch->mesh, first_layers, last_layers);
    gs_mesh_set_split_accounting(&sch->mesh, (int)account_emb, (int)account_loss);
    gs_mesh_set_layout(&sch->mesh, &layout);
    return GS_OK;
}

/* 'microbatches M', 'exact 0|1' and 'ranks N' (*nranks). */
static gs_status load_counts(loader *ld, gs_schedule *sch, uint64_t *nranks)
{
    gs_status st;
    uint64_t v;
    if ((st = load_next(ld, "'microbatches M'")) != GS_OK ||
        (st = load_kv_u64(ld, 0, "microbatches", UINT64_MAX, &sch->microbatches)) != GS_OK ||
        (st = load_end_of_line(ld, 2)) != GS_OK)
        return st;
    if (sch->microbatches == 0) /* a step has at least one */
        return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found '0', expected microbatches (an integer from 1)",
                            ld->path, ld->lineno);
    if ((st = load_next(ld, "'exact 0' or 'exact 1'")) != GS_OK || (st = load_kv_u64(ld, 0, "exact", 1, &v)) != GS_OK ||
        (st = load_end_of_line(ld, 2)) != GS_OK)
        return st;
    sch->exact = (int)v;
    uint64_t most = sch->mesh.world < UINT32_MAX - 1 ? sch->mesh.world : UINT32_MAX - 1;
    if ((st = load_next(ld, "'ranks N'")) != GS_OK || (st = load_kv_u64(ld, 0, "ranks", most, nranks)) != GS_OK ||
        (st = load_end_of_line(ld, 2)) != GS_OK)
        return st;
    if (*nranks == 0) /* nothing to play, and nothing to validate: not a schedule */
        return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found '0', expected ranks (an integer from 1 to %llu)",
                            ld->path, ld->lineno, (unsigned long long)sch->mesh.world);
    return GS_OK;
}

/* One rank list: its 'rank ...' line, tensors and events, appended to sch (capacity *cap). */
static gs_status load_rank(loader *ld, gs_schedule *sch, size_t *cap, list_scratch *ls)
{
    gs_status st;
    uint64_t nt, ne;
    if (gs__grow((void **)&sch->ranks, cap, sch->nranks + 1, sizeof *sch->ranks) != 0)
        return gs_error_set(ld->err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld->path, ld->lineno);
    gs_rank_events *r = &sch->ranks[sch->nranks];
    memset(r, 0, sizeof *r);
    sch->nranks++;
    if ((st = load_next(ld, "'rank R class C stage S tensors T events E'")) != GS_OK ||
        (st = load_kv_u64(ld, 0, "rank", sch->mesh.world - 1, &r->rank)) != GS_OK ||
        (st = load_kv_u64(ld, 2, "class", sch->mesh.world, &r->class_size)) != GS_OK ||
        (st = load_kv_u64(ld, 4, "stage", sch->mesh.size[GS_DIM_PP] - 1, &r->stage)) != GS_OK ||
        (st = load_kv_u64(ld, 6, "tensors", UINT32_MAX, &nt)) != GS_OK ||
        (st = load_kv_u64(ld, 8, "events", UINT32_MAX - 1, &ne)) != GS_OK || (st = load_end_of_line(ld, 10)) != GS_OK)
        return st;
    for (uint64_t i = 0; i < nt; i++)
        if ((st = load_next(ld, "a tensor line 't ...'")) != GS_OK || (st = load_tensor(ld, r, (size_t)i)) != GS_OK)
            return st;
    for (uint64_t i = 0; i < ne; i++)
        if ((st = load_next(ld, "an event line 'e ...'")) != GS_OK ||
            (st = load_event(ld, r, (size_t)i, (size_t)ne, ls)) != GS_OK)
            return st;
    gs_rank_finish(r);
    return GS_OK;
}

gs_status gs_schedule_load(FILE *f, const char *path, gs_schedule **out, gs_error *err)
{
    loader ld = {.f = f, .path = path ? path : "<schedule>", .err = err};
    gs_schedule *sch = NULL;
    list_scratch ls = {NULL, 0, 0};
    gs_status st;
    uint64_t nranks;
    *out = NULL;
    if ((st = gs_schedule_create(0, &sch)) != GS_OK) {
        st = gs_error_set(err, st, "%s: out of memory", ld.path);
        goto out;
    }
    if ((st = load_version(&ld)) != GS_OK || (st = load_scenario_name(&ld, sch)) != GS_OK ||
        (st = load_mesh(&ld, sch)) != GS_OK || (st = load_counts(&ld, sch, &nranks)) != GS_OK)
        goto out;
    size_t cap_ranks = 0;
    for (uint64_t p = 0; p < nranks; p++)
        if ((st = load_rank(&ld, sch, &cap_ranks, &ls)) != GS_OK)
            goto out;
    if ((st = load_next(&ld, "'end'")) != GS_OK || (st = load_word(&ld, 0, "end")) != GS_OK ||
        (st = load_end_of_line(&ld, 1)) != GS_OK)
        goto out;
    if (load_line(&ld)) {
        st = load_fail(&ld, 0, "end of file after 'end'");
        goto out;
    }
    *out = sch;
    sch = NULL;
    st = GS_OK;
out:
    free(ld.line);
    free(ls.buf);
    gs_schedule_destroy(sch);
    return st;
}

