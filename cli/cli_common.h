/* Helpers shared by the cmd_*.c files: loading a scenario with its mesh, printing warnings,
 * JSON output and aligned tables.
 *
 * Ownership: gs_cli_table owns its cell strings until gs_cli_table_fini; JSON values follow
 * jansson's reference counting (gs_cli_json_print does not steal). */
#ifndef GS_CLI_COMMON_H
#define GS_CLI_COMMON_H

#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* Loads the scenario file and builds its mesh; prints the check warnings to stderr as
 * "gridstep: warning: ...". On error, err says file:line:column where there is one. */
gs_status gs_cli_load(const char *path, gs_scenario *s, gs_mesh *mesh, gs_error *err);
/* Commands that build and simulate thousands of schedules (plan) call this before starting
 * threads: freed blocks of a few MiB stay in one process heap instead of going back to the
 * kernel and faulting in again for the next schedule (glibc's mallopt: no mmap below 32 MiB,
 * no trim below 1 GiB, one arena; a no-op where mallopt is missing). */
void gs_cli_keep_freed_memory(void);

/* The version of the key layout of every --json document (its first key, "schema_version"; the
 * keys of each command are listed in doc/json.md). Raised when a key is renamed, removed or
 * changes meaning; new keys do not raise it. */
#define GS_JSON_SCHEMA_VERSION 1

/* Writes one JSON document (2-space indent, keys in insertion order, reals with 12
 * significant digits) and a newline to stdout. An object without "schema_version" is written
 * with it first (GS_JSON_SCHEMA_VERSION); doc itself is not changed. */
gs_status gs_cli_json_print(json_t *doc, gs_error *err);

/* The same document to f (gs_cli_json_print is this on stdout). */
gs_status gs_cli_json_fprint(FILE *f, json_t *doc, gs_error *err);

/* Exactly one positional argument (the scenario) after options; else a usage error. */
gs_status gs_cli_one_positional(int argc, char **argv, int optind_, const char *usage,
                                const char **out, gs_error *err);

/* The usage error for the option getopt_long refused (arg = argv[optind - 1]): "option '--x'
 * needs a value" when arg names (or abbreviates) an option of opts, or a short option of
 * shortopts, that takes one; else "unknown option 'arg'". Both end with the usage line. */
gs_status gs_cli_bad_option(const char *arg, const struct option *opts, const char *shortopts,
                            const char *usage, gs_error *err);

/* Aligned text table: add rows of cells, print with columns padded to the widest cell.
 * Numeric-looking cells are right-aligned. */
typedef struct gs_cli_table {
    size_t ncols;
    size_t nrows;
    size_t cap;
    char **cells; /* nrows * ncols, owned */
} gs_cli_table;

void gs_cli_table_init(gs_cli_table *t, size_t ncols);
void gs_cli_table_fini(gs_cli_table *t);
/* Adds one row of ncols strings (copied). */
gs_status gs_cli_table_row(gs_cli_table *t, const char *const *cells);
/* Adds one row given as printf-style cells separated by '\t'. */
gs_status gs_cli_table_rowf(gs_cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints with `indent` leading spaces and two spaces between columns; the first row is a
 * header, underlined with dashes. */
void gs_cli_table_print(const gs_cli_table *t, FILE *f, int indent);

/* With --calib FILE: prints to stderr the calibration's note on the scenario (attention timed on
 * the other kernels than its flash_attention selects), if any. Loading errors are left to the
 * sim, which reports them. */
void gs_cli_calib_notes(const char *calib_path, const gs_scenario *s);

#endif
