/* Quotes and $-expansions of a launch script's words, as bash does them for a launch (see
 * engine/import_shell.c): 'single' and "double" quotes, backslashes, $NAME, ${NAME} with
 * [@] [*] [N] # :- - := = :+ +, $(( arithmetic )), unset variables and $(commands) kept as
 * placeholders, and field splitting of unquoted expansions on blanks. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import_shell_internal.h"

/* ------------------------------------------------------------------- expansion ---- */

/* Fields being built from one word: the current field in cur (started: a quote or text seen),
 * finished ones in out. Unquoted expansions split on blanks; quoted ones do not. */
typedef struct fields {
    gs__words *out;
    gs__shell_buf cur;
    int started;
    unsigned line;
    int oom;
} fields;

static void field_text(fields *f, const char *s, size_t n)
{
    if (gs__shell_buf_add(&f->cur, s, n) != 0)
        f->oom = 1;
    f->started = 1;
}

static void field_end(fields *f)
{
    if (f->started && gs__words_push(f->out, f->cur.s ? f->cur.s : "", f->cur.n, f->line) != GS_OK)
        f->oom = 1;
    f->cur.n = 0;
    if (f->cur.s)
        f->cur.s[0] = '\0';
    f->started = 0;
}

/* Adds an expansion's text: quoted, as is; unquoted, split on blanks (IFS' default). */
static void field_expanded(fields *f, const char *s, size_t n, int quoted)
{
    if (quoted) {
        field_text(f, s, n);
        return;
    }
    size_t i = 0;
    while (i < n) {
        if (isspace((unsigned char)s[i])) {
            field_end(f);
            while (i < n && isspace((unsigned char)s[i]))
                i++;
            continue;
        }
        size_t j = i;
        while (j < n && !isspace((unsigned char)s[j]))
            j++;
        field_text(f, s + i, j - i);
        i = j;
    }
}

static gs_status expand_into(gs__shell *sh, const char *s, size_t n, int in_dq, fields *f);

/* The text of a word with quotes removed and expansions done, no splitting (for assignments and
 * ${NAME:-word} defaults): the fields joined by one blank. */
gs_status gs__shell_expand_string(gs__shell *sh, const char *s, size_t n, unsigned line, gs__shell_buf *out)
{
    gs__words tmp;
    gs__words_init(&tmp);
    fields f = {&tmp, {NULL, 0, 0}, 0, line, 0};
    gs_status st = expand_into(sh, s, n, 1, &f);
    if (st == GS_OK) {
        f.started = 1;
        field_end(&f);
    }
    out->n = 0;
    if (st == GS_OK && !f.oom) {
        if (gs__shell_buf_add(out, "", 0) != 0)
            f.oom = 1;
        for (size_t i = 0; i < tmp.n && !f.oom; i++)
            if ((i && gs__shell_buf_add(out, " ", 1) != 0) || gs__shell_buf_add(out, tmp.w[i].text, strlen(tmp.w[i].text)) != 0)
                f.oom = 1;
    }
    free(f.cur.s);
    gs__words_fini(&tmp);
    if (st == GS_OK && f.oom)
        st = gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory expanding a word", sh->who, line);
    return st;
}

/* $(( ... )): integers, variables, + - * / % and parentheses (bash's unset variable is 0). */
typedef struct arith {
    gs__shell *sh;
    const char *p, *end;
    int bad;
} arith;

static long long arith_expr(arith *a);

static void arith_blank(arith *a)
{
    while (a->p < a->end && isspace((unsigned char)*a->p))
        a->p++;
}

static long long arith_atom(arith *a)
{
    arith_blank(a);
    if (a->p < a->end && (*a->p == '-' || *a->p == '+')) {
        int neg = *a->p++ == '-';
        long long v = arith_atom(a);
        return neg ? -v : v;
    }
    if (a->p < a->end && *a->p == '(') {
        a->p++;
        long long v = arith_expr(a);
        arith_blank(a);
        if (a->p < a->end && *a->p == ')')
            a->p++;
        else
            a->bad = 1;
        return v;
    }
    if (a->p < a->end && isdigit((unsigned char)*a->p)) {
        long long v = 0;
        while (a->p < a->end && isdigit((unsigned char)*a->p))
            v = v * 10 + (*a->p++ - '0');
        return v;
    }
    int dollar = a->p < a->end && *a->p == '$';
    a->p += dollar;
    int brace = dollar && a->p < a->end && *a->p == '{';
    a->p += brace;
    const char *name = a->p;
    while (a->p < a->end && gs__shell_name_char(*a->p))
        a->p++;
    if (a->p == name || (brace && (a->p >= a->end || *a->p++ != '}'))) {
        a->bad = 1;
        return 0;
    }
    gs__shell_var *v = gs__shell_var_find(a->sh, name, (size_t)(a->p - name));
    if (!v || v->vals.n == 0)
        return 0;
    char *e;
    long long x = strtoll(v->vals.w[0].text, &e, 10);
    if (*e != '\0')
        a->bad = 1;
    return x;
}

static long long arith_term(arith *a)
{
    long long v = arith_atom(a);
    for (;;) {
        arith_blank(a);
        if (a->p >= a->end || (*a->p != '*' && *a->p != '/' && *a->p != '%'))
            return v;
        char op = *a->p++;
        long long r = arith_atom(a);
        if (op == '*')
            v *= r;
        else if (r == 0)
            a->bad = 1;
        else
            v = op == '/' ? v / r : v % r;
    }
}

static long long arith_expr(arith *a)
{
    long long v = arith_term(a);
    for (;;) {
        arith_blank(a);
        if (a->p >= a->end || (*a->p != '+' && *a->p != '-'))
            return v;
        char op = *a->p++;
        long long r = arith_term(a);
        v = op == '+' ? v + r : v - r;
    }
}

/* Length of the balanced group starting at s[0] = open, up to and including its close; 0 when
 * it does not close within n. Quotes inside are skipped. */
size_t gs__shell_balanced(const char *s, size_t n, char open, char close)
{
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            i++;
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c)
                j += (c == '"' && s[j] == '\\' && j + 1 < n) ? 2 : 1;
            i = j;
        } else if (c == open) {
            depth++;
        } else if (c == close && --depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

/* Length of a double-quoted string's inside (s: just past the opening quote) up to its closing
 * quote, skipping escapes and the $( ), ${ } and ` ` inside, which may hold quotes of their own;
 * n when it does not close. */
size_t gs__shell_dq_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < n) {
            i += 2;
        } else if (s[i] == '$' && i + 1 < n && (s[i + 1] == '(' || s[i + 1] == '{')) {
            size_t len = gs__shell_balanced(s + i + 1, n - i - 1, s[i + 1], s[i + 1] == '(' ? ')' : '}');
            if (!len)
                return n;
            i += len + 1;
        } else if (s[i] == '`') {
            size_t j = i + 1;
            while (j < n && s[j] != '`')
                j++;
            i = j + 1;
        } else {
            i++;
        }
    }
    return i < n ? i : n;
}

/* ${...} (s = the inside): NAME, NAME[@], NAME[*], NAME[N], #NAME, and NAME with :- - := = :+ +. */
static gs_status expand_brace(gs__shell *sh, const char *s, size_t n, int quoted, fields *f)
{
    size_t i = 0;
    int length = n > 1 && s[0] == '#';
    i += length;
    size_t name_at = i;
    if (i < n && isdigit((unsigned char)s[i]))
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
    else
        while (i < n && gs__shell_name_char(s[i]))
            i++;
    size_t name_len = i - name_at;
    if (name_len == 0)
        return gs__shell_fail(sh, f->line, "found a ${...} expansion gridstep does not read, expected ${NAME}, "
                                 "${NAME[@]} or ${NAME:-default}");
    gs__shell_var *v = gs__shell_var_find(sh, s + name_at, name_len);
    int set = v && v->vals.n > 0 && (v->array || v->vals.w[0].text[0] != '\0');
    int subscript = -2; /* -2 none, -1 [@] or [*], else the index */
    int star = 0;
    if (i < n && s[i] == '[') {
        size_t close = i + 1;
        while (close < n && s[close] != ']')
            close++;
        if (close == n)
            return gs__shell_fail(sh, f->line, "found an unterminated ${NAME[...]}, expected ]");
        if (close == i + 2 && (s[i + 1] == '@' || s[i + 1] == '*'))
            subscript = -1, star = s[i + 1] == '*';
        else
            subscript = atoi(s + i + 1);
        i = close + 1;
    }
    if (length) {
        char num[32];
        size_t len = subscript == -1 ? (v ? v->vals.n : 0) : (set ? strlen(v->vals.w[0].text) : 0);
        snprintf(num, sizeof num, "%zu", len);
        field_expanded(f, num, strlen(num), quoted);
        return GS_OK;
    }
    if (i < n) { /* an operator and its word */
        int colon = s[i] == ':';
        i += colon;
        char op = i < n ? s[i++] : '\0';
        if (op != '-' && op != '=' && op != '+')
            return gs__shell_fail(sh, f->line, "found a ${NAME...} operator gridstep does not read, expected :- - := = :+ +");
        int present = colon ? set : v != NULL;
        if (op == '+')
            return present ? expand_into(sh, s + i, n - i, quoted, f) : GS_OK;
        if (!present) {
            if (op == '=') {
                gs__shell_buf b = {NULL, 0, 0};
                gs_status st = gs__shell_expand_string(sh, s + i, n - i, f->line, &b);
                gs__shell_var *w = st == GS_OK ? gs__shell_var_get(sh, s + name_at, name_len) : NULL;
                if (st == GS_OK && w) {
                    gs__words_fini(&w->vals);
                    w->array = 0;
                    st = gs__words_push(&w->vals, b.s ? b.s : "", b.n, f->line);
                } else if (st == GS_OK) {
                    st = GS_ERR_NOMEM;
                }
                free(b.s);
                if (st != GS_OK)
                    return gs_error_set(sh->err, st, "%s:%u: out of memory assigning a variable", sh->who, f->line);
            }
            return expand_into(sh, s + i, n - i, quoted, f);
        }
    }
    if (!v) { /* not set by the script: a placeholder, one word */
        gs__shell_buf b = {NULL, 0, 0};
        if (gs__shell_buf_add(&b, "$", 1) != 0 || gs__shell_buf_add(&b, s + name_at, name_len) != 0) {
            free(b.s);
            return GS_ERR_NOMEM;
        }
        field_text(f, b.s, b.n);
        free(b.s);
        return GS_OK;
    }
    if (subscript == -1 && v->array && quoted && !star) { /* "${A[@]}": one field per element */
        for (size_t k = 0; k < v->vals.n; k++) {
            if (k)
                field_end(f);
            f->line = v->vals.w[k].line;
            field_text(f, v->vals.w[k].text, strlen(v->vals.w[k].text));
        }
        return GS_OK;
    }
    size_t first = subscript >= 0 ? (size_t)subscript : 0;
    size_t last = subscript == -1 ? v->vals.n : first + 1;
    for (size_t k = first; k < last && k < v->vals.n; k++) {
        if (k > first)
            field_expanded(f, " ", 1, quoted);
        f->line = v->vals.w[k].line;
        field_expanded(f, v->vals.w[k].text, strlen(v->vals.w[k].text), quoted);
    }
    return GS_OK;
}

/* A $-expansion at s (s[0] == '$'); *used = the bytes it spans. */
static gs_status expand_dollar(gs__shell *sh, const char *s, size_t n, int quoted, fields *f, size_t *used)
{
    if (n >= 3 && s[1] == '(' && s[2] == '(') {
        size_t len = gs__shell_balanced(s + 1, n - 1, '(', ')');
        if (len < 4 || s[len - 1] != ')')
            return gs__shell_fail(sh, f->line, "found an unterminated $(( ... )), expected ))");
        arith a = {sh, s + 3, s + len - 1, 0};
        long long v = arith_expr(&a);
        arith_blank(&a);
        if (a.bad || a.p != a.end)
            return gs__shell_fail(sh, f->line, "found a $(( ... )) gridstep cannot evaluate, expected integers, "
                                     "variables and + - * / %");
        char num[32];
        snprintf(num, sizeof num, "%lld", v);
        field_expanded(f, num, strlen(num), quoted);
        *used = len + 1;
        return GS_OK;
    }
    if (n >= 2 && s[1] == '(') { /* command substitution: not run */
        size_t len = gs__shell_balanced(s + 1, n - 1, '(', ')');
        if (!len)
            return gs__shell_fail(sh, f->line, "found an unterminated $( ... ), expected )");
        field_text(f, "$(...)", 6);
        *used = len + 1;
        return GS_OK;
    }
    if (n >= 2 && s[1] == '{') {
        size_t len = gs__shell_balanced(s + 1, n - 1, '{', '}');
        if (!len)
            return gs__shell_fail(sh, f->line, "found an unterminated ${, expected }");
        *used = len + 1;
        return expand_brace(sh, s + 2, len - 2, quoted, f);
    }
    if (n >= 2 && (gs__shell_name_start(s[1]) || isdigit((unsigned char)s[1]))) {
        size_t j = 2;
        if (gs__shell_name_start(s[1]))
            while (j < n && gs__shell_name_char(s[j]))
                j++;
        *used = j;
        return expand_brace(sh, s + 1, j - 1, quoted, f);
    }
    if (n >= 2 && strchr("@*#?$!-", s[1])) {
        *used = 2;
        if (s[1] == '#')
            field_expanded(f, "0", 1, quoted);
        else if (s[1] != '@' && s[1] != '*')
            field_text(f, s, 2); /* $? $$ $! $-: placeholders */
        return GS_OK;
    }
    field_text(f, "$", 1);
    *used = 1;
    return GS_OK;
}

/* Expands s[0..n) into f: quotes removed, $-expansions done (in_dq: inside double quotes). */
static gs_status expand_into(gs__shell *sh, const char *s, size_t n, int in_dq, fields *f)
{
    size_t i = 0;
    gs_status st;
    while (i < n) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            if (in_dq && !strchr("$`\"\\\n", s[i + 1]))
                field_text(f, s + i, 2);
            else if (s[i + 1] != '\n')
                field_text(f, s + i + 1, 1);
            i += 2;
        } else if (c == '\'' && !in_dq) {
            size_t j = i + 1;
            while (j < n && s[j] != '\'')
                j++;
            field_text(f, s + i + 1, j - i - 1);
            i = j + 1;
        } else if (c == '"' && !in_dq) {
            size_t j = i + 1 + gs__shell_dq_len(s + i + 1, n - i - 1);
            f->started = 1;
            if ((st = expand_into(sh, s + i + 1, j - i - 1, 1, f)) != GS_OK)
                return st;
            i = j + 1;
        } else if (c == '$') {
            size_t used = 1;
            if ((st = expand_dollar(sh, s + i, n - i, in_dq, f, &used)) != GS_OK)
                return st;
            i += used;
        } else if (c == '`') {
            size_t j = i + 1;
            while (j < n && s[j] != '`')
                j++;
            field_text(f, "$(...)", 6);
            i = j + 1;
        } else {
            field_text(f, s + i, 1);
            i++;
        }
        if (f->oom)
            return gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory expanding a word", sh->who, f->line);
    }
    return GS_OK;
}

/* Expands one raw word into fields appended to out. */
gs_status gs__shell_expand_word(gs__shell *sh, const gs__word *raw, gs__words *out)
{
    fields f = {out, {NULL, 0, 0}, 0, raw->line, 0};
    gs_status st = expand_into(sh, raw->text, strlen(raw->text), 0, &f);
    if (st == GS_OK)
        field_end(&f);
    free(f.cur.s);
    if (st == GS_OK && f.oom)
        st = gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory expanding a word", sh->who, raw->line);
    return st;
}

