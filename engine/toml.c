/* The TOML subset of engine/toml.h: a line-oriented reader (a table header or one key = value
 * per line; arrays may span lines). */
#include "engine/toml.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GS_TOML_KEY_MAX 256

typedef struct rd {
    const char *t;
    size_t len, pos;
    unsigned line;
    size_t line_start;
    const char *origin;
    gs_error *err;
} rd;

static unsigned col_of(const rd *r, size_t pos)
{
    return (unsigned)(pos - r->line_start) + 1;
}

static gs_status fail(const rd *r, size_t pos, const char *what)
{
    return gs_error_set(r->err, GS_ERR_INPUT, "%s:%u:%u: %s", r->origin, r->line, col_of(r, pos), what);
}

/* At a position on an earlier line (an array's opening bracket). */
static gs_status fail_at(const rd *r, unsigned line, unsigned col, const char *what)
{
    return gs_error_set(r->err, GS_ERR_INPUT, "%s:%u:%u: %s", r->origin, line, col, what);
}

static int peek(const rd *r)
{
    return r->pos < r->len ? (unsigned char)r->t[r->pos] : -1;
}

/* Skips blanks and a comment, not the newline. */
static void skip_blank(rd *r)
{
    while (r->pos < r->len && (r->t[r->pos] == ' ' || r->t[r->pos] == '\t' || r->t[r->pos] == '\r'))
        r->pos++;
    if (peek(r) == '#')
        while (r->pos < r->len && r->t[r->pos] != '\n')
            r->pos++;
}

static void newline(rd *r)
{
    r->pos++;
    r->line++;
    r->line_start = r->pos;
}

/* Skips blanks, comments and newlines (inside an array). */
static void skip_space(rd *r)
{
    for (;;) {
        skip_blank(r);
        if (peek(r) != '\n')
            return;
        newline(r);
    }
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A quoted string at r->pos (basic "..." with \" \\ \n \t escapes, or literal '...'), into a new
 * buffer. */
static gs_status read_string(rd *r, char **out)
{
    size_t start = r->pos;
    char q = r->t[r->pos++];
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (!s)
        return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
    for (;;) {
        if (r->pos >= r->len || r->t[r->pos] == '\n') {
            free(s);
            return fail(r, start, "unclosed string");
        }
        char c = r->t[r->pos++];
        if (c == q)
            break;
        if (c == '\\' && q == '"') {
            char e = r->pos < r->len ? r->t[r->pos++] : '\0';
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e == '"' ? '"' : e == '\\' ? '\\' : '\0';
            if (!c) {
                free(s);
                return fail(r, r->pos - 2, "unsupported escape in a string");
            }
        }
        if (n + 2 > cap) {
            char *g = realloc(s, cap *= 2);
            if (!g) {
                free(s);
                return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
            }
            s = g;
        }
        s[n++] = c;
    }
    s[n] = '\0';
    *out = s;
    return GS_OK;
}

/* A key: bare (A-Za-z0-9_-) or quoted parts joined by dots, appended to buf after prefix. */
static gs_status read_key(rd *r, char *buf, size_t cap, size_t used)
{
    for (;;) {
        skip_blank(r);
        int c = peek(r);
        size_t n;
        if (c == '"' || c == '\'') {
            char *s;
            gs_status st = read_string(r, &s);
            if (st != GS_OK)
                return st;
            n = strlen(s);
            if (used + n + 2 > cap) {
                free(s);
                return fail(r, r->pos, "key too long");
            }
            memcpy(buf + used, s, n);
            free(s);
        } else {
            size_t b = r->pos;
            while (r->pos < r->len && (isalnum((unsigned char)r->t[r->pos]) || r->t[r->pos] == '_' || r->t[r->pos] == '-'))
                r->pos++;
            n = r->pos - b;
            if (!n)
                return fail(r, r->pos, "expected a key");
            if (used + n + 2 > cap)
                return fail(r, b, "key too long");
            memcpy(buf + used, r->t + b, n);
        }
        used += n;
        buf[used] = '\0';
        skip_blank(r);
        if (peek(r) != '.')
            return GS_OK;
        r->pos++;
        buf[used++] = '.';
    }
}

/* A scalar literal (number or boolean) at r->pos: the characters up to a separator. */
static gs_status read_scalar(rd *r, gs_toml_item *it)
{
    size_t b = r->pos;
    while (r->pos < r->len && !strchr(" \t\r\n,]#", r->t[r->pos]))
        r->pos++;
    size_t n = r->pos - b;
    if (!n)
        return fail(r, b, "expected a value");
    if (!(it->text = dup_n(r->t + b, n)))
        return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
    if (!strcmp(it->text, "true") || !strcmp(it->text, "false")) {
        it->type = GS_TOML_BOOL;
        it->b = it->text[0] == 't';
        return GS_OK;
    }
    char clean[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof clean; i++)
        if (it->text[i] != '_')
            clean[k++] = it->text[i];
    clean[k] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(clean, &end, 10);
    if (*end == '\0' && k && errno == 0) {
        it->type = GS_TOML_INT;
        it->i = v;
        it->f = (double)v;
        return GS_OK;
    }
    errno = 0;
    double d = strtod(clean, &end);
    if (*end == '\0' && k && errno == 0) {
        it->type = GS_TOML_FLOAT;
        it->f = d;
        return GS_OK;
    }
    return fail(r, b, "expected a string, number, boolean or array");
}

static gs_status push_item_text(rd *r, gs_toml_item *it, char *s)
{
    char **g = realloc(it->items, (it->nitems + 1) * sizeof *g);
    if (!g) {
        free(s);
        return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
    }
    it->items = g;
    it->items[it->nitems++] = s;
    return GS_OK;
}

/* An array at r->pos ('['): its items' texts; a nested array is kept as written. */
static gs_status read_array(rd *r, gs_toml_item *it)
{
    gs_status st;
    it->type = GS_TOML_ARRAY;
    unsigned open_line = r->line, open_col = col_of(r, r->pos++);
    for (;;) {
        skip_space(r);
        int c = peek(r);
        if (c < 0)
            return fail_at(r, open_line, open_col, "unclosed array");
        if (c == ']') {
            r->pos++;
            break;
        }
        char *s = NULL;
        if (c == '"' || c == '\'') {
            if ((st = read_string(r, &s)) != GS_OK)
                return st;
        } else if (c == '[') {
            size_t b = r->pos;
            unsigned b_line = r->line, b_col = col_of(r, b);
            int depth = 0;
            do {
                if (r->pos >= r->len)
                    return fail_at(r, b_line, b_col, "unclosed array");
                char ch = r->t[r->pos];
                depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
                if (ch == '\n')
                    newline(r);
                else
                    r->pos++;
            } while (depth > 0);
            if (!(s = dup_n(r->t + b, r->pos - b)))
                return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
        } else if (c == '{') {
            return fail(r, r->pos, "inline tables are not read here");
        } else {
            gs_toml_item one = {0};
            if ((st = read_scalar(r, &one)) != GS_OK) {
                free(one.text);
                return st;
            }
            s = one.text;
        }
        if ((st = push_item_text(r, it, s)) != GS_OK)
            return st;
        skip_space(r);
        if (peek(r) == ',')
            r->pos++;
        else if (peek(r) < 0)
            return fail_at(r, open_line, open_col, "unclosed array");
        else if (peek(r) != ']')
            return fail(r, r->pos, "expected ',' or ']' in an array");
    }
    size_t total = 1;
    for (size_t i = 0; i < it->nitems; i++)
        total += strlen(it->items[i]) + 2;
    if (!(it->text = malloc(total)))
        return gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
    it->text[0] = '\0';
    for (size_t i = 0; i < it->nitems; i++) {
        if (i)
            strcat(it->text, ", ");
        strcat(it->text, it->items[i]);
    }
    return GS_OK;
}

static void item_fini(gs_toml_item *it)
{
    free(it->key);
    free(it->text);
    for (size_t i = 0; i < it->nitems; i++)
        free(it->items[i]);
    free(it->items);
}

/* Appends *it to t (t owns it then). GS_ERR_NOMEM. */
static gs_status push_item(gs_toml *t, const gs_toml_item *it, gs_error *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        gs_toml_item *g = realloc(t->items, cap * sizeof *g);
        if (!g)
            return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        t->items = g;
        t->cap = cap;
    }
    t->items[t->n++] = *it;
    return GS_OK;
}

static gs_status add_item(rd *r, gs_toml *t, gs_toml_item *it, size_t key_pos)
{
    if (gs_toml_find(t, it->key))
        return fail(r, key_pos, "this key is given twice");
    return push_item(t, it, r->err);
}

/* One key = value line under table `table`. */
static gs_status read_pair(rd *r, gs_toml *t, const char *table)
{
    char key[GS_TOML_KEY_MAX];
    size_t used = 0, key_pos = r->pos;
    unsigned line = r->line, col = col_of(r, r->pos);
    if (table[0]) {
        used = strlen(table);
        memcpy(key, table, used);
        key[used++] = '.';
    }
    gs_status st = read_key(r, key, sizeof key, used);
    if (st != GS_OK)
        return st;
    skip_blank(r);
    if (peek(r) != '=')
        return fail(r, r->pos, "expected '=' after the key");
    r->pos++;
    skip_blank(r);
    gs_toml_item it = {0};
    it.line = line;
    it.col = col;
    int c = peek(r);
    if (c == '"' || c == '\'') {
        it.type = GS_TOML_STRING;
        st = read_string(r, &it.text);
    } else if (c == '[') {
        st = read_array(r, &it);
    } else if (c == '{') {
        st = fail(r, r->pos, "inline tables are not read here");
    } else {
        st = read_scalar(r, &it);
    }
    if (st == GS_OK && !(it.key = dup_n(key, strlen(key))))
        st = gs_error_set(r->err, GS_ERR_NOMEM, "out of memory");
    if (st == GS_OK)
        st = add_item(r, t, &it, key_pos);
    if (st != GS_OK)
        item_fini(&it);
    return st;
}

gs_status gs_toml_parse(const char *text, size_t len, const char *origin, gs_toml *out, gs_error *err)
{
    rd r = {text, len, 0, 1, 0, origin, err};
    char table[GS_TOML_KEY_MAX] = "";
    gs_status st = GS_OK;
    memset(out, 0, sizeof *out);
    while (st == GS_OK && r.pos < r.len) {
        skip_blank(&r);
        int c = peek(&r);
        if (c == '\n') {
            newline(&r);
            continue;
        }
        if (c < 0)
            break;
        if (c == '[') {
            if (r.pos + 1 < r.len && r.t[r.pos + 1] == '[') {
                st = fail(&r, r.pos, "arrays of tables are not read here");
                break;
            }
            r.pos++;
            if ((st = read_key(&r, table, sizeof table, 0)) != GS_OK)
                break;
            skip_blank(&r);
            if (peek(&r) != ']') {
                st = fail(&r, r.pos, "expected ']' after the table name");
                break;
            }
            r.pos++;
        } else if ((st = read_pair(&r, out, table)) != GS_OK) {
            break;
        }
        skip_blank(&r);
        if (r.pos < r.len && peek(&r) != '\n')
            st = fail(&r, r.pos, "expected the end of the line");
    }
    if (st != GS_OK)
        gs_toml_fini(out);
    return st;
}

void gs_toml_fini(gs_toml *t)
{
    for (size_t i = 0; i < t->n; i++)
        item_fini(&t->items[i]);
    free(t->items);
    memset(t, 0, sizeof *t);
}

const gs_toml_item *gs_toml_find(const gs_toml *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i].key, key) == 0)
            return &t->items[i];
    return NULL;
}

/* The item's value from command-line text (gs_toml_set). */
static gs_status set_value(gs_toml_item *it, const char *value, int as_array, gs_error *err)
{
    if (as_array) {
        it->type = GS_TOML_ARRAY;
        for (const char *p = value; *p;) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char *one = dup_n(p, n), **g;
            if (!one || !(g = realloc(it->items, (it->nitems + 1) * sizeof *g))) {
                free(one);
                return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            }
            it->items = g;
            it->items[it->nitems++] = one;
            p = comma ? comma + 1 : p + n;
        }
    } else if (!strcasecmp(value, "true") || !strcasecmp(value, "false")) {
        it->type = GS_TOML_BOOL;
        it->b = tolower((unsigned char)value[0]) == 't';
    } else {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (*value && !*end && !errno) {
            it->type = GS_TOML_INT;
            it->i = v;
            it->f = (double)v;
        } else {
            double d = strtod(value, &end);
            it->type = *value && !*end ? GS_TOML_FLOAT : GS_TOML_STRING;
            it->f = d;
        }
    }
    if (!(it->text = dup_n(value, strlen(value))))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    return GS_OK;
}

gs_status gs_toml_set(gs_toml *t, const char *key, const char *value, int as_array, unsigned arg, gs_error *err)
{
    gs_toml_item it = {0};
    it.arg = arg;
    gs_status st = set_value(&it, value, as_array, err);
    if (st == GS_OK && !(it.key = dup_n(key, strlen(key))))
        st = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    if (st != GS_OK) {
        item_fini(&it);
        return st;
    }
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i].key, key) == 0) {
            item_fini(&t->items[i]);
            t->items[i] = it;
            return GS_OK;
        }
    if ((st = push_item(t, &it, err)) != GS_OK)
        item_fini(&it);
    return st;
}

