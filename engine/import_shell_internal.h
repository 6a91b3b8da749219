/* Internal to the launch-script reader (engine/import_shell.c: words, variables, commands;
 * engine/import_shell_expand.c: quotes and $-expansions).
 *
 * Ownership: a gs__shell owns its variables (freed when the reading ends); text is borrowed. */
#ifndef GS_IMPORT_SHELL_INTERNAL_H
#define GS_IMPORT_SHELL_INTERNAL_H

#include <stddef.h>

#include "engine/import_internal.h"

/* A variable: a scalar (vals.w[0]) or an array (every element with the line it was written on). */
typedef struct gs__shell_var {
    char *name;
    int array;
    gs__words vals;
} gs__shell_var;

typedef struct gs__shell {
    const char *who;  /* origin for messages */
    const char *text; /* the script */
    const char *p;    /* read position */
    unsigned line;    /* line of p (1-based) */
    gs__shell_var *vars;
    size_t nvars, capvars;
    gs_error *err;
} gs__shell;

/* Growing text, NUL-terminated once anything was added. */
typedef struct gs__shell_buf {
    char *s;
    size_t n, cap;
} gs__shell_buf;

/* 0, or -1 when out of memory or past 1 MiB. */
int gs__shell_buf_add(gs__shell_buf *b, const char *s, size_t n);

gs__shell_var *gs__shell_var_find(gs__shell *sh, const char *name, size_t len);
/* The variable, created empty when absent; NULL when out of memory. */
gs__shell_var *gs__shell_var_get(gs__shell *sh, const char *name, size_t len);
/* GS_ERR_INPUT "WHO:LINE: what". */
gs_status gs__shell_fail(gs__shell *sh, unsigned line, const char *what);
int gs__shell_name_start(char c);
int gs__shell_name_char(char c);

/* Length of the group opening at s[0] (open) through its close, quotes skipped; 0 if unclosed. */
size_t gs__shell_balanced(const char *s, size_t n, char open, char close);
/* Length of a double-quoted inside (s past the opening quote) to the closing quote; n if none. */
size_t gs__shell_dq_len(const char *s, size_t n);

/* One raw word (quotes and expansions as written) -> its fields, appended to out. */
gs_status gs__shell_expand_word(gs__shell *sh, const gs__word *raw, gs__words *out);
/* A raw value -> one string (no field splitting: assignments, ${X:=...}) in out. */
gs_status gs__shell_expand_string(gs__shell *sh, const char *s, size_t n, unsigned line, gs__shell_buf *out);

#endif
