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

#endif
