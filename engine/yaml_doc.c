/* Node access and placed error messages for the libyaml document loaders (see yaml_doc.h). */
#include "engine/yaml_doc.h"

#include "engine/input_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/hardware.h" /* gs_edit_distance */

/* ------------------------------------------------------------------------ messages ---- */

unsigned long gs__yaml_node_line(const yaml_node_t *n)
{
    return (unsigned long)n->start_mark.line + 1;
}

unsigned long gs__yaml_node_col(const yaml_node_t *n)
{
    return (unsigned long)n->start_mark.column + 1;
}

gs_status gs__yaml_fail_at(const gs__yaml_loader *l, const yaml_node_t *n, gs_status st,
                           const char *fmt, ...)
{
    char what[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (n)
        return gs_error_set(l->err, st, "%s:%lu:%lu: %s", l->path, gs__yaml_node_line(n),
                            gs__yaml_node_col(n), what);
    return gs_error_set(l->err, st, "%s: %s", l->path, what);
}

const char *gs__yaml_scalar_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

int gs__yaml_scalar_is_quoted(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

int gs__yaml_scalar_is_null(const yaml_node_t *n)
{
    if (gs__yaml_scalar_is_quoted(n))
        return 0;
    const char *t = gs__yaml_scalar_text(n);
    return t[0] == '\0' || strcmp(t, "~") == 0 || strcasecmp(t, "null") == 0;
}

int gs__yaml_is_bare_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(n) &&
           !gs__yaml_scalar_is_quoted(n);
}

int gs__yaml_is_text_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(n) &&
           gs__yaml_scalar_text(n)[0] != '\0';
}

const char *gs__yaml_shown(const yaml_node_t *n, char *buf, size_t len)
{
    const char *t = gs__yaml_scalar_text(n);
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

const char *gs__yaml_describe(const yaml_node_t *n, char *buf, size_t len)
{
    if (!n)
        snprintf(buf, len, "nothing");
    else if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, len, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "a list");
    else if (gs__yaml_scalar_is_null(n))
        snprintf(buf, len, "null");
    else if (gs__yaml_scalar_is_quoted(n)) {
        char text[72];
        snprintf(buf, len, "the string \"%s\"", gs__yaml_shown(n, text, sizeof text));
    } else
        gs__yaml_shown(n, buf, len);
    return buf;
}

void gs__yaml_join_names(const char *const *names, size_t n, char *buf, size_t len)
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

const char *gs__yaml_nearest_name(const char *s, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t len = strlen(s);
    size_t limit = len / 3 > 2 ? len / 3 : 2, best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        /* only a name within the limit and closer than the best so far matters */
        size_t d = gs_edit_distance_max(s, names[i], best_d - 1);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    if (best)
        return best;
    /* A prefix of a name, or a name plus a tail ("memory" for memory_gb): a likely slip. */
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        size_t shorter = len < nl ? len : nl;
        if (shorter >= 3 && strncmp(s, names[i], shorter) == 0)
            return names[i];
    }
    return NULL;
}

/* -------------------------------------------------------------------- mapping keys ---- */

gs_status gs__yaml_check_keys(const gs__yaml_loader *l, const yaml_node_t *map,
                              const char *section, const char *const *keys, size_t nkeys)
{
    char found[96], list[512];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        if (!k || k->type != YAML_SCALAR_NODE) {
            gs__yaml_join_names(keys, nkeys, list, sizeof list);
            return gs__yaml_fail_at(l, k ? k : map, GS_ERR_INPUT,
                                    "%s: found %s as a key, expected one of %s", section,
                                    gs__yaml_describe(k, found, sizeof found), list);
        }
        const char *name = gs__yaml_scalar_text(k);
        size_t i = 0;
        while (i < nkeys && strcmp(keys[i], name) != 0)
            i++;
        if (i == nkeys) {
            char hint[96] = "";
            const char *near = gs__yaml_nearest_name(name, keys, nkeys);
            if (near)
                snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
            gs__yaml_join_names(keys, nkeys, list, sizeof list);
            return gs__yaml_fail_at(l, k, GS_ERR_INPUT,
                                    "%s: found unknown key '%s'%s, expected one of %s", section,
                                    gs__yaml_shown(k, found, sizeof found), hint, list);
        }
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *qk = yaml_document_get_node(l->doc, q->key);
            if (qk && qk->type == YAML_SCALAR_NODE &&
                strcmp(gs__yaml_scalar_text(qk), name) == 0)
                return gs__yaml_fail_at(l, k, GS_ERR_INPUT,
                                        "%s: duplicate key '%s': found it again, expected each "
                                        "key once (first at line %lu)",
                                        section, name, gs__yaml_node_line(qk));
        }
    }
    return GS_OK;
}

yaml_node_t *gs__yaml_lookup(const gs__yaml_loader *l, const yaml_node_t *map, const char *key,
                             yaml_node_t **key_node)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strcmp(gs__yaml_scalar_text(k), key) == 0) {
            if (key_node)
                *key_node = k;
            return yaml_document_get_node(l->doc, p->value);
        }
    }
    return NULL;
}

/* --------------------------------------------------------------------------- text ---- */

gs_status gs__yaml_parser_failure(const gs__yaml_loader *l, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return gs_error_set(l->err, GS_ERR_NOMEM, "%s: out of memory while parsing YAML",
                            l->path);
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset only: count lines in the text (read from a string). */
        const unsigned char *text = p->input.string.start;
        size_t end = (size_t)(p->input.string.end - text), at = p->problem_offset;
        unsigned long line = 1, col = 1;
        for (size_t i = 0; text && i < at && i < end; i++, col++)
            if (text[i] == '\n')
                line++, col = 0;
        return gs_error_set(l->err, GS_ERR_INPUT,
                            "%s:%lu:%lu: cannot read YAML: %s at byte %zu: found bad text, "
                            "expected UTF-8",
                            l->path, line, col, problem, at);
    }
    char context[160] = "";
    if (p->context)
        snprintf(context, sizeof context, " (%s at line %lu column %lu)", p->context,
                 (unsigned long)p->context_mark.line + 1,
                 (unsigned long)p->context_mark.column + 1);
    return gs_error_set(l->err, GS_ERR_INPUT, "%s:%lu:%lu: YAML syntax error: %s%s", l->path,
                        (unsigned long)p->problem_mark.line + 1,
                        (unsigned long)p->problem_mark.column + 1, problem, context);
}

/* 1 when a quote at text[i] opens a quoted scalar: it starts a token, first on its line after
 * blanks or after one of : , [ { - ? and blanks, so that an apostrophe inside a plain scalar
 * ("it's") is not a quote. */
static int quote_opens(const char *text, size_t i)
{
    while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t'))
        i--;
    if (i == 0 || text[i - 1] == '\n')
        return 1;
    return strchr(":,[{-?", text[i - 1]) != NULL;
}

/* Counts [ and { outside quoted scalars and comments; a plain scalar holding brackets can only
 * make the count larger, never hide nesting. A # opens a comment at the start of a line or after
 * a blank. */
gs_status gs__yaml_check_flow_depth(const gs__yaml_loader *l, const char *text, size_t len)
{
    unsigned long line = 1, col = 1;
    size_t depth = 0;
    char quote = 0;
    int comment = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n') {
            line++;
            col = 1;
            comment = 0;
            continue;
        }
        if (comment) {
            /* rest of the line */
        } else if (quote) {
            if (quote == '"' && c == '\\' && i + 1 < len && text[i + 1] != '\n')
                i++, col++;
            else if (c == quote)
                quote = 0;
        } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' ||
                                text[i - 1] == '\n')) {
            comment = 1;
        } else if ((c == '"' || c == '\'') && quote_opens(text, i)) {
            quote = c;
        } else if (c == '[' || c == '{') {
            if (++depth > GS__YAML_MAX_FLOW_DEPTH)
                return gs_error_set(l->err, GS_ERR_INPUT,
                                    "%s:%lu:%lu: nesting too deep: found more than %d "
                                    "nested [ or {, expected a scenario a few levels deep",
                                    l->path, line, col, GS__YAML_MAX_FLOW_DEPTH);
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
        col++;
    }
    return GS_OK;
}

gs_status gs__yaml_load_first(const gs__yaml_loader *l, yaml_parser_t *parser, const char *text,
                              size_t len)
{
    gs_status st = gs__yaml_check_flow_depth(l, text, len);
    if (st != GS_OK)
        return st;
    if (!yaml_parser_initialize(parser))
        return gs_error_set(l->err, GS_ERR_NOMEM, "%s: cannot initialize the YAML parser",
                            l->path);
    yaml_parser_set_input_string(parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(parser, l->doc)) {
        st = gs__yaml_parser_failure(l, parser);
        yaml_parser_delete(parser);
        return st;
    }
    return GS_OK;
}

gs_status gs__yaml_read_file(const char *path, char **text, size_t *size, gs_error *err)
{
    /* regular files only: a FIFO would block, a device never ends (engine/input_file.h) */
    return gs_input_read(path, "scenario file", GS__YAML_MAX_FILE_BYTES, text, size, err);
}
