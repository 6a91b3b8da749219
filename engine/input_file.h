/* Opening an input file: a regular file of bounded size only. A FIFO without a writer would
 * block the reader forever and a device (/dev/zero) has no end, so neither is opened for reading
 * (the open itself does not wait: O_NONBLOCK until the file is known to be regular).
 *
 * Ownership: *out is the caller's to fclose. */
#ifndef GS_INPUT_FILE_H
#define GS_INPUT_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "engine/status.h"

/* Opens path for reading when it is a regular file of at most max_bytes (*bytes, may be NULL,
 * gets its size). GS_ERR_INPUT otherwise, "PATH: WHAT: ..." naming what it is (a FIFO, a device,
 * a directory) or its size and the bound; what: e.g. "scenario file". */
gs_status gs_input_open(const char *path, const char *what, uint64_t max_bytes, FILE **out, uint64_t *bytes,
                        gs_error *err);

/* Reads such a file whole into *text (NUL-terminated, the caller's to free) of *size bytes. */
gs_status gs_input_read(const char *path, const char *what, uint64_t max_bytes, char **text, size_t *size,
                        gs_error *err);

#endif
