/* Internal helpers shared by the importers (engine/import.c, import_accelerate.c,
 * import_megatron.c).
 *
 * Ownership: all work on caller storage; gs__import_ignored copies its message into the
 * caller's gs_diag. */
#ifndef GS_IMPORT_INTERNAL_H
#define GS_IMPORT_INTERNAL_H

#include <stdint.h>

#include "engine/import.h"

/* The scenario before the input is read: defaults, the --cluster preset (required), the --model
 * preset when given; grid 1 x 1 x 1 in Megatron's order; path and name from origin. */
gs_status gs__import_base(const char *origin, const gs_import_opts *o, gs_scenario *s,
                          gs_error *err);

/* Sets the node count and the batch (options first, then the input's in_micro / in_global,
 * 0 when it has none, then micro 1 and global micro x dp), and validates model and cluster. */
gs_status gs__import_finish(const gs_import_opts *o, uint64_t nodes, uint64_t in_micro,
                            uint64_t in_global, gs_scenario *s, gs_error *err);

/* Appends one "WHERE: FIELD: ignored: REASON" line to ignored (NULL allowed); GS_ERR_NOMEM in
 * err when it cannot. */
gs_status gs__import_ignored(gs_diag *ignored, gs_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One word of a command and the line (1-based) it was written on. */
typedef struct gs__word {
    char *text; /* owned */
    unsigned line;
} gs__word;

/* A list of words (owned). */
typedef struct gs__words {
    gs__word *w;
    size_t n, cap;
} gs__words;

void gs__words_init(gs__words *w);
void gs__words_fini(gs__words *w);
/* Appends a copy of text[0..len). GS_ERR_NOMEM; GS_ERR_INPUT past 100000 words. */
gs_status gs__words_push(gs__words *w, const char *text, size_t len, unsigned line);

/* Reads a launch script as bash would run it, as far as a launch needs (engine/import_shell.c:
 * variables, arrays, defaults, arithmetic, export; nothing is executed) and writes the words of
 * its training command (the command naming a *.py script) to out, which it initializes; a text
 * without one that is a single command of --flags is taken whole. GS_ERR_INPUT at
 * ORIGIN:LINE for what it does not read (if, for, functions, ...). */
gs_status gs__shell_training_command(const char *text, const char *origin, gs__words *out, gs_error *err);

#endif
