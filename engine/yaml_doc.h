/* Internal helpers shared by the YAML loaders (engine/scenario*.c, engine/expect.c): reading
 * libyaml document nodes, and error messages placed at PATH:LINE:COL that say what was found and
 * what was expected.
 *
 * Ownership: a gs__yaml_loader lives on the stack of one load and borrows its path, document and
 * error; every helper borrows nodes from that document and writes messages into caller buffers,
 * except gs__yaml_read_file, whose text the caller owns and frees. */
#ifndef GS_YAML_DOC_H
#define GS_YAML_DOC_H

#include <stddef.h>

#include <yaml.h>

#include "engine/status.h"

/* Scenario files larger than this are refused before parsing (bytes). Real ones are a few kB. */
#define GS__YAML_MAX_FILE_BYTES (1u << 20)

/* Deepest [ / { nesting accepted. libyaml's scanner is quadratic in flow nesting depth (100000
 * levels take about 20 s), and a scenario needs three or four levels. */
#define GS__YAML_MAX_FLOW_DEPTH 64

/* What one load carries from function to function: the file name for messages, the parsed
 * document, where errors go. */
typedef struct gs__yaml_loader {
    const char *path;
    yaml_document_t *doc;
    gs_error *err;
} gs__yaml_loader;

/* Line and column of a node, counted from 1. */
unsigned long gs__yaml_node_line(const yaml_node_t *n);
unsigned long gs__yaml_node_col(const yaml_node_t *n);

const char *gs__yaml_scalar_text(const yaml_node_t *n);
int gs__yaml_scalar_is_quoted(const yaml_node_t *n);
/* A plain empty, "~" or "null" scalar: YAML's null. */
int gs__yaml_scalar_is_null(const yaml_node_t *n);
/* n (NULL allowed) is a non-null scalar written without quotes: where a number may stand. */
int gs__yaml_is_bare_scalar(const yaml_node_t *n);
/* n (NULL allowed) is a non-null, non-empty scalar, quoted or not: where a name or text may
 * stand. */
int gs__yaml_is_text_scalar(const yaml_node_t *n);

/* The text of a scalar, cut to fit and with control characters replaced, so that messages stay
 * one readable line. Returns buf. */
const char *gs__yaml_shown(const yaml_node_t *n, char *buf, size_t len);
/* Describes a node (NULL allowed) for "found X": nothing, a mapping, a list, null, a bare value
 * or a quoted string. Returns buf. */
const char *gs__yaml_describe(const yaml_node_t *n, char *buf, size_t len);
/* "a, b, c" */
void gs__yaml_join_names(const char *const *names, size_t n, char *buf, size_t len);
/* The name in `names` closest to s, or NULL when none is close enough to be a likely typo. */
const char *gs__yaml_nearest_name(const char *s, const char *const *names, size_t n);

/* Sets l->err to "PATH:LINE:COL: <message>" (or "PATH: <message>" when n is NULL) with status
 * st, and returns st. */
gs_status gs__yaml_fail_at(const gs__yaml_loader *l, const yaml_node_t *n, gs_status st,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The value of `key` in mapping map (NULL when absent); its key node goes to *key_node when
 * key_node is not NULL and the key is there. */
yaml_node_t *gs__yaml_lookup(const gs__yaml_loader *l, const yaml_node_t *map, const char *key,
                             yaml_node_t **key_node);
/* Checks that the keys of mapping map are scalars from `keys`, each at most once; messages start
 * with `section`. */
gs_status gs__yaml_check_keys(const gs__yaml_loader *l, const yaml_node_t *map,
                              const char *section, const char *const *keys, size_t nkeys);

/* Turns a libyaml parser failure into an error with the problem's position. */
gs_status gs__yaml_parser_failure(const gs__yaml_loader *l, const yaml_parser_t *p);
/* Refuses flow collections nested deeper than GS__YAML_MAX_FLOW_DEPTH in text (len bytes)
 * before libyaml sees them; errors go to l->err, placed in l->path. */
gs_status gs__yaml_check_flow_depth(const gs__yaml_loader *l, const char *text, size_t len);

/* Refuses text nested too deep (gs__yaml_check_flow_depth), then starts *parser on text and
 * loads its first document into *l->doc. On GS_OK the caller holds both and frees them with
 * yaml_document_delete and yaml_parser_delete (the parser may load more documents first); after
 * an error it holds neither. */
gs_status gs__yaml_load_first(const gs__yaml_loader *l, yaml_parser_t *parser, const char *text,
                              size_t len);

/* Reads the regular file at path, at most GS__YAML_MAX_FILE_BYTES, into *text (NUL-terminated,
 * *size bytes before the NUL). The caller frees *text; it is NULL after an error. */
gs_status gs__yaml_read_file(const char *path, char **text, size_t *size, gs_error *err);

#endif
