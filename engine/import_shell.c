/* A launch script read as bash would run it, as far as a launch needs: variables, arrays
 * (NAME=( ... ), NAME+=( ... ), "${NAME[@]}"), ${NAME:-default} and the other default forms,
 * $(( arithmetic )), export / declare, quotes, backslash continuations and comments; out comes
 * the command that starts the training script (the one naming a *.py file), word by word, each
 * word with the line it was written on. Nothing is executed: $(command) and variables the script
 * does not set stay as placeholders ($NAME, $(...)); if / for / while / case / functions are
 * refused with their line. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import_shell_internal.h"

/* Most words a command, and bytes a value, may hold: a launch script is far smaller. */
#define SHELL_MAX_WORDS 100000
#define SHELL_MAX_VALUE ((size_t)1 << 20)

/* ----------------------------------------------------------------------- words ---- */

void gs__words_init(gs__words *w)
{
    memset(w, 0, sizeof *w);
}

void gs__words_fini(gs__words *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->w[i].text);
    free(w->w);
    memset(w, 0, sizeof *w);
}

gs_status gs__words_push(gs__words *w, const char *text, size_t len, unsigned line)
{
    if (w->n == SHELL_MAX_WORDS)
        return GS_ERR_INPUT;
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 64;
        gs__word *g = realloc(w->w, nc * sizeof *g);
        if (!g)
            return GS_ERR_NOMEM;
        w->w = g, w->cap = nc;
    }
    char *t = malloc(len + 1);
    if (!t)
        return GS_ERR_NOMEM;
    memcpy(t, text, len);
    t[len] = '\0';
    w->w[w->n].text = t;
    w->w[w->n].line = line;
    w->n++;
    return GS_OK;
}

/* ------------------------------------------------------------------- variables ---- */

gs__shell_var *gs__shell_var_find(gs__shell *sh, const char *name, size_t len)
{
    for (size_t i = 0; i < sh->nvars; i++)
        if (strlen(sh->vars[i].name) == len && strncmp(sh->vars[i].name, name, len) == 0)
            return &sh->vars[i];
    return NULL;
}

/* The variable, created empty when it does not exist; NULL when out of memory. */
gs__shell_var *gs__shell_var_get(gs__shell *sh, const char *name, size_t len)
{
    gs__shell_var *v = gs__shell_var_find(sh, name, len);
    if (v)
        return v;
    if (sh->nvars == sh->capvars) {
        size_t nc = sh->capvars ? sh->capvars * 2 : 32;
        gs__shell_var *g = realloc(sh->vars, nc * sizeof *g);
        if (!g)
            return NULL;
        sh->vars = g, sh->capvars = nc;
    }
    v = &sh->vars[sh->nvars];
    memset(v, 0, sizeof *v);
    if (!(v->name = malloc(len + 1)))
        return NULL;
    memcpy(v->name, name, len);
    v->name[len] = '\0';
    sh->nvars++;
    return v;
}

static void shell_fini(gs__shell *sh)
{
    for (size_t i = 0; i < sh->nvars; i++) {
        free(sh->vars[i].name);
        gs__words_fini(&sh->vars[i].vals);
    }
    free(sh->vars);
}

gs_status gs__shell_fail(gs__shell *sh, unsigned line, const char *what)
{
    return gs_error_set(sh->err, GS_ERR_INPUT, "%s:%u: %s", sh->who, line, what);
}

int gs__shell_name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_';
}

int gs__shell_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* ---------------------------------------------------------------- growing text ---- */

int gs__shell_buf_add(gs__shell_buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > SHELL_MAX_VALUE)
        return -1;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *g = realloc(b->s, nc);
        if (!g)
            return -1;
        b->s = g, b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
    return 0;
}

/* ----------------------------------------------------------------------- lexing ---- */

/* Copies the word that starts at sh->p (unquoted blanks, newlines, ; & | < > end it) into raw,
 * quotes and expansions kept for expand_word; an array literal NAME=( ... ) is one word. */
static gs_status read_word(gs__shell *sh, gs__shell_buf *b, unsigned *start)
{
    const char *p = sh->p;
    *start = sh->line;
    b->n = 0;
    while (*p && !strchr(" \t\r\n;&|<>", *p)) {
        const char *q = p;
        if (*p == '\\' && p[1] == '\n') {
            sh->line++, p += 2;
            continue;
        }
        if (*p == '\\' && p[1]) {
            p += 2;
        } else if (*p == '\'' || *p == '"') {
            char c = *p++;
            const char *close = c == '"' ? p + gs__shell_dq_len(p, strlen(p)) : strchr(p, '\'');
            if (!close)
                close = p + strlen(p);
            for (; p < close; p++)
                sh->line += *p == '\n';
            if (!*p) {
                sh->p = p;
                return gs_error_set(sh->err, GS_ERR_INPUT,
                                    "%s:%u: found an unterminated %s quote, expected its closing %c", sh->who, *start,
                                    c == '"' ? "double" : "single", c);
            }
            p++;
        } else if (*p == '$' && (p[1] == '(' || p[1] == '{')) {
            size_t len = gs__shell_balanced(p + 1, strlen(p + 1), p[1], p[1] == '(' ? ')' : '}');
            if (!len) {
                sh->p = p;
                return gs_error_set(sh->err, GS_ERR_INPUT, "%s:%u: found an unterminated $%c, expected its closing %c",
                                    sh->who, sh->line, p[1], p[1] == '(' ? ')' : '}');
            }
            for (size_t k = 0; k < len + 1; k++)
                sh->line += p[k] == '\n';
            p += len + 1;
        } else if (*p == '(' && b->n + (size_t)(p - sh->p) > 0 && p[-1] == '=') { /* NAME=( ... ) */
            size_t len = gs__shell_balanced(p, strlen(p), '(', ')');
            if (!len) {
                sh->p = p;
                return gs_error_set(sh->err, GS_ERR_INPUT, "%s:%u: found an unterminated array ( ... ), expected )",
                                    sh->who, *start);
            }
            for (size_t k = 0; k < len; k++)
                sh->line += p[k] == '\n';
            p += len;
        } else if (*p == '(' || *p == ')') {
            sh->p = p;
            return gs_error_set(sh->err, GS_ERR_INPUT,
                                "%s:%u: found '%c': subshells and functions are not read, expected variables, "
                                "arrays and the training command",
                                sh->who, sh->line, *p);
        } else {
            p++;
        }
        if (gs__shell_buf_add(b, q, (size_t)(p - q)) != 0)
            return gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory reading a word", sh->who, *start);
    }
    sh->p = p;
    if (gs__shell_buf_add(b, "", 0) != 0)
        return gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory reading a word", sh->who, *start);
    return GS_OK;
}

/* Reads the raw words of the next simple command into raw (empty at the end of the text). */
static gs_status read_command(gs__shell *sh, gs__words *raw)
{
    gs__shell_buf b = {NULL, 0, 0};
    gs_status st = GS_OK;
    int drop_next = 0; /* the word after a redirection: its target */
    while (*sh->p) {
        char c = *sh->p;
        if (c == ' ' || c == '\t' || c == '\r') {
            sh->p++;
        } else if (c == '\\' && sh->p[1] == '\n') {
            sh->line++, sh->p += 2;
        } else if (c == '#') {
            while (*sh->p && *sh->p != '\n')
                sh->p++;
        } else if (c == '\n' || c == ';' || c == '&' || c == '|') {
            sh->line += c == '\n';
            sh->p++;
            if (c != '\n' && *sh->p == c) /* && || ;; */
                sh->p++;
            if (raw->n)
                break;
        } else if (c == '<' || c == '>') {
            if (raw->n && strspn(raw->w[raw->n - 1].text, "0123456789") == strlen(raw->w[raw->n - 1].text)) {
                free(raw->w[--raw->n].text); /* the fd of 2>&1 */
            }
            while (*sh->p == '<' || *sh->p == '>')
                sh->p++;
            if (*sh->p == '&') { /* >&2 */
                sh->p++;
                while (isdigit((unsigned char)*sh->p) || *sh->p == '-')
                    sh->p++;
            } else {
                drop_next = 1;
            }
        } else {
            unsigned start;
            if ((st = read_word(sh, &b, &start)) != GS_OK)
                break;
            if (drop_next)
                drop_next = 0;
            else if ((st = gs__words_push(raw, b.s, b.n, start)) != GS_OK) {
                st = gs_error_set(sh->err, st, "%s:%u: %s", sh->who, start,
                                  st == GS_ERR_NOMEM ? "out of memory" : "too many words in one command");
                break;
            }
        }
    }
    free(b.s);
    return st;
}

/* --------------------------------------------------------------------- commands ---- */

/* Length of NAME in NAME=... or NAME+=... at s, with *append; 0 when s is no assignment. */
static size_t assignment_name(const char *s, int *append)
{
    size_t i = 0;
    if (!gs__shell_name_start(s[0]))
        return 0;
    while (gs__shell_name_char(s[i]))
        i++;
    *append = s[i] == '+';
    return s[i + *append] == '=' ? i : 0;
}

/* The elements of an array literal's inside (between the parentheses, line = where it opens). */
static gs_status array_elements(gs__shell *sh, const char *inside, size_t n, unsigned line, gs__words *out)
{
    char *copy = malloc(n + 1);
    if (!copy)
        return gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory", sh->who, line);
    memcpy(copy, inside, n);
    copy[n] = '\0';
    gs__shell sub = *sh; /* same variables, own position */
    sub.text = copy, sub.p = copy, sub.line = line;
    gs__words raw;
    gs__words_init(&raw);
    gs_status st = GS_OK;
    while (st == GS_OK && *sub.p) {
        /* inside an array a newline or ; is a blank */
        if (*sub.p == '\n' || *sub.p == ';') {
            sub.line += *sub.p == '\n';
            sub.p++;
            continue;
        }
        size_t before = raw.n;
        st = read_command(&sub, &raw);
        if (st == GS_OK && raw.n == before)
            break;
    }
    for (size_t i = 0; st == GS_OK && i < raw.n; i++)
        st = gs__shell_expand_word(&sub, &raw.w[i], out);
    sh->vars = sub.vars, sh->nvars = sub.nvars, sh->capvars = sub.capvars;
    gs__words_fini(&raw);
    free(copy);
    return st;
}

/* Performs one NAME=value, NAME+=value, NAME=( ... ) or NAME+=( ... ). The value is expanded
 * before the variable is looked up: an expansion may create variables (${X:=...}). */
static gs_status assign(gs__shell *sh, const gs__word *w)
{
    int append;
    size_t len = assignment_name(w->text, &append);
    const char *value = w->text + len + append + 1;
    gs__words vals;
    gs__words_init(&vals);
    int array = value[0] == '(';
    gs_status st;
    if (array) {
        st = array_elements(sh, value + 1, strlen(value) - 2, w->line, &vals);
    } else {
        gs__shell_buf b = {NULL, 0, 0};
        st = gs__shell_expand_string(sh, value, strlen(value), w->line, &b);
        if (st == GS_OK && gs__words_push(&vals, b.s ? b.s : "", b.n, w->line) != GS_OK)
            st = gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory", sh->who, w->line);
        free(b.s);
    }
    gs__shell_var *v = st == GS_OK ? gs__shell_var_get(sh, w->text, len) : NULL;
    if (st == GS_OK && !v)
        st = gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory", sh->who, w->line);
    if (st != GS_OK) {
        gs__words_fini(&vals);
        return st;
    }
    if (!append || v->vals.n == 0) { /* (re)defined */
        gs__words_fini(&v->vals);
        v->vals = vals;
        v->array = array;
        return GS_OK;
    }
    if (array) { /* A+=( ... ): the elements follow */
        for (size_t k = 0; k < vals.n && st == GS_OK; k++)
            st = gs__words_push(&v->vals, vals.w[k].text, strlen(vals.w[k].text), vals.w[k].line);
        v->array = 1;
    } else { /* A+=text: appended to the scalar (element 0 of an array) */
        gs__shell_buf c = {NULL, 0, 0};
        if (gs__shell_buf_add(&c, v->vals.w[0].text, strlen(v->vals.w[0].text)) == 0 &&
            gs__shell_buf_add(&c, vals.w[0].text, strlen(vals.w[0].text)) == 0) {
            free(v->vals.w[0].text);
            v->vals.w[0].text = c.s;
        } else {
            free(c.s);
            st = GS_ERR_NOMEM;
        }
    }
    gs__words_fini(&vals);
    if (st != GS_OK)
        return gs_error_set(sh->err, GS_ERR_NOMEM, "%s:%u: out of memory", sh->who, w->line);
    return GS_OK;
}

static int is_keyword(const char *w)
{
    static const char *const kw[] = {"if", "then", "elif", "else", "fi", "for", "while", "until", "do",
                                     "done", "case", "esac", "function", "select", "{", "}", "[[", "[",
                                     "((", "test"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(w, kw[i]) == 0)
            return 1;
    return 0;
}

static int ends_py(const char *s)
{
    size_t n = strlen(s);
    return n > 3 && strcmp(s + n - 3, ".py") == 0;
}

/* Runs one command's raw words: assignments are made; the expanded words of a command naming a
 * *.py script go to cmd (*cmd_line = its line). Other commands (echo, mkdir, set) do nothing,
 * but while every command so far starts with a --flag their words gather in first (a text of
 * flags alone; *flags_only drops to 0 at the first that does not). */
static gs_status run_command(gs__shell *sh, const gs__words *raw, gs__words *cmd, unsigned *cmd_line, gs__words *first,
                             int *flags_only)
{
    size_t i = 0;
    int append;
    gs_status st;
    if (is_keyword(raw->w[0].text) || (strlen(raw->w[0].text) > 2 && strstr(raw->w[0].text, "()")))
        return gs_error_set(sh->err, GS_ERR_INPUT,
                            "%s:%u: found shell '%s': if, for, while, case, tests and functions are not "
                            "read, expected variables, arrays and one training command (put the launch "
                            "flags outside of them)",
                            sh->who, raw->w[0].line, raw->w[0].text);
    while (i < raw->n && assignment_name(raw->w[i].text, &append))
        i++;
    if (i == raw->n) { /* assignments alone */
        for (size_t k = 0; k < raw->n; k++)
            if ((st = assign(sh, &raw->w[k])) != GS_OK)
                return st;
        return GS_OK;
    }
    const char *verb = raw->w[i].text;
    if (!strcmp(verb, "export") || !strcmp(verb, "declare") || !strcmp(verb, "typeset") ||
        !strcmp(verb, "local") || !strcmp(verb, "readonly")) {
        for (size_t k = i + 1; k < raw->n; k++)
            if (assignment_name(raw->w[k].text, &append) && (st = assign(sh, &raw->w[k])) != GS_OK)
                return st;
        return GS_OK;
    }
    if (!strcmp(verb, "unset")) {
        for (size_t k = i + 1; k < raw->n; k++) {
            gs__shell_var *v = gs__shell_var_find(sh, raw->w[k].text, strlen(raw->w[k].text));
            if (v) {
                gs__words_fini(&v->vals);
                free(v->name);
                *v = sh->vars[--sh->nvars];
            }
        }
        return GS_OK;
    }
    gs__words out;
    gs__words_init(&out);
    for (size_t k = i; k < raw->n; k++)
        if ((st = gs__shell_expand_word(sh, &raw->w[k], &out)) != GS_OK) {
            gs__words_fini(&out);
            return st;
        }
    int py = 0;
    for (size_t k = 0; k < out.n && !py; k++)
        py = ends_py(out.w[k].text);
    if (py && cmd->n) {
        unsigned at = raw->w[i].line;
        gs__words_fini(&out);
        return gs_error_set(sh->err, GS_ERR_INPUT,
                            "%s:%u: found a second command starting a *.py script (the first is on line %u), "
                            "expected one training command",
                            sh->who, at, *cmd_line);
    }
    if (py) {
        *cmd = out;
        *cmd_line = raw->w[i].line;
        return GS_OK;
    }
    /* not a training command: kept in case the text is flags alone (lines of --flags) */
    if (out.n && strncmp(out.w[0].text, "--", 2) != 0)
        *flags_only = 0;
    for (size_t k = 0; k < out.n && *flags_only; k++)
        if ((st = gs__words_push(first, out.w[k].text, strlen(out.w[k].text), out.w[k].line)) != GS_OK) {
            gs__words_fini(&out);
            return gs_error_set(sh->err, st, "%s:%u: out of memory", sh->who, out.w[k].line);
        }
    gs__words_fini(&out);
    return GS_OK;
}

gs_status gs__shell_training_command(const char *text, const char *origin, gs__words *out, gs_error *err)
{
    gs__shell sh = {origin ? origin : "--from-megatron", text, text, 1, NULL, 0, 0, err};
    gs__words raw, first;
    unsigned cmd_line = 0, commands = 0;
    int flags_only = 1;
    gs_status st = GS_OK;
    gs__words_init(&raw);
    gs__words_init(&first);
    gs__words_init(out);
    while (st == GS_OK && *sh.p) {
        gs__words_fini(&raw);
        if ((st = read_command(&sh, &raw)) != GS_OK || raw.n == 0)
            break;
        commands++;
        st = run_command(&sh, &raw, out, &cmd_line, &first, &flags_only);
    }
    if (st == GS_OK && !out->n) {
        /* no *.py command: the text is flags alone */
        if (flags_only && first.n) {
            *out = first;
            gs__words_init(&first);
        } else if (commands == 0) {
            st = gs_error_set(err, GS_ERR_INPUT, "%s: found no command, expected Megatron-LM flags or a launch "
                                                 "script", sh.who);
        } else {
            st = gs_error_set(err, GS_ERR_INPUT,
                              "%s: found no command that starts a *.py script (torchrun ... pretrain_gpt.py "
                              "FLAGS), expected one, or the flags alone",
                              sh.who);
        }
    }
    if (st != GS_OK)
        gs__words_fini(out);
    gs__words_fini(&raw);
    gs__words_fini(&first);
    shell_fini(&sh);
    return st;
}

