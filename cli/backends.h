/* The one static table of backends (sim, exec), as `gridstep --help` lists them.
 *
 * Ownership: static const table; callers borrow the ops. */
#ifndef GS_CLI_BACKENDS_H
#define GS_CLI_BACKENDS_H

#include <stddef.h>

#include "engine/backend.h"

size_t gs_backend_count(void);
const gs_backend_ops *gs_backend_at(size_t i);
const gs_backend_ops *gs_backend_find(const char *name);

#endif
