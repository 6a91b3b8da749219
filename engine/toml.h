/* A TOML reader for configuration files (torchtitan's train configs): tables, dotted keys, and
 * values that are strings (basic and literal), integers, floats, booleans and arrays of those
 * (nested arrays kept as their text). Arrays of tables and inline tables are refused. Each value
 * keeps its line and column for messages.
 *
 * Ownership: gs_toml owns its items and their strings; gs_toml_fini frees them. The input text is
 * borrowed for the call. */
#ifndef GS_TOML_H
#define GS_TOML_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

typedef enum gs_toml_type {
    GS_TOML_STRING,
    GS_TOML_INT,
    GS_TOML_FLOAT,
    GS_TOML_BOOL,
    GS_TOML_ARRAY
} gs_toml_type;

typedef struct gs_toml_item {
    char *key;      /* the full dotted key, "table.sub.key" (owned) */
    gs_toml_type type;
    char *text;     /* STRING: the value; INT, FLOAT, BOOL: the literal as written; ARRAY: the
                       items joined by ", " (owned) */
    int64_t i;      /* INT */
    double f;       /* INT and FLOAT */
    int b;          /* BOOL */
    char **items;   /* ARRAY: each item's text (strings unquoted, nested arrays as written) (owned) */
    size_t nitems;
    unsigned line, col; /* of the key, 1-based; 0 for a value gs_toml_set gave */
    unsigned arg;       /* gs_toml_set's argument number (1-based), 0 for a value of the text */
} gs_toml_item;

typedef struct gs_toml {
    gs_toml_item *items; /* in the order written (owned) */
    size_t n, cap;
} gs_toml;

/* Parses text[0..len) into out (initialized here). GS_ERR_INPUT at ORIGIN:LINE:COL for what is
 * not TOML or not read here (a duplicate key, an array of tables, an inline table, an unclosed
 * string or array); GS_ERR_NOMEM. On error out is left empty. */
gs_status gs_toml_parse(const char *text, size_t len, const char *origin, gs_toml *out, gs_error *err);
void gs_toml_fini(gs_toml *t);

/* Sets key to a value given as text on a command line (torchtitan's `--section.key VALUE`
 * overrides), replacing the file's: "true" / "false" (any case) a boolean, an integer or a float
 * as written, else a string; as_array: a comma-separated list. `arg` numbers the argument for
 * messages. GS_ERR_NOMEM. */
gs_status gs_toml_set(gs_toml *t, const char *key, const char *value, int as_array, unsigned arg, gs_error *err);

/* The item with this full dotted key, or NULL. */
const gs_toml_item *gs_toml_find(const gs_toml *t, const char *key);

#endif
