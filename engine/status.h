/* Status codes, error messages with context, and collected warnings.
 *
 * Ownership: gs_error and gs_diag are caller storage (init/fini); a gs_diag owns the
 * warning strings it collects and frees them in gs_diag_fini. Library code fills these and
 * never prints or exits; only cli/main.c turns a status into a message and an exit code. */
#ifndef GS_STATUS_H
#define GS_STATUS_H

#include <stddef.h>
#include <stdint.h>

typedef enum gs_status {
    GS_OK = 0,
    GS_ERR_INPUT = -1,      /* bad input or usage: exit code 2 */
    GS_ERR_RUNTIME = -2,    /* runtime failure: exit code 1 */
    GS_ERR_NOMEM = -3,      /* allocation failed: exit code 1 */
    GS_ERR_IO = -4,         /* file could not be read or written: exit code 1 (2 for inputs) */
    GS_ERR_OVERFLOW = -5,   /* a size would overflow 64 bits: treated as bad input, exit 2 */
    GS_ERR_UNSUPPORTED = -6 /* feature not built in or not available here: exit code 1 */
} gs_status;

#define GS_ERROR_MSG_BYTES 1024

typedef struct gs_error {
    gs_status status;
    char msg[GS_ERROR_MSG_BYTES]; /* one or more lines, no trailing newline */
} gs_error;

void gs_error_init(gs_error *err);
/* Sets status and message (printf format); returns st so callers can `return gs_error_set(...)`.
 * err may be NULL. */
gs_status gs_error_set(gs_error *err, gs_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "context: " to an existing message (e.g. the file name). */
void gs_error_prefix(gs_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *gs_status_name(gs_status st);
/* 0 ok, 2 bad input (GS_ERR_INPUT, GS_ERR_OVERFLOW), 1 everything else. */
int gs_status_exit_code(gs_status st);

/* Warnings found by checks that do not stop the run (uneven PP split, KV replication,
 * TP crossing nodes when allowed...). */
typedef struct gs_diag {
    char **warnings; /* owned */
    size_t count;
    size_t cap;
} gs_diag;

void gs_diag_init(gs_diag *d);
void gs_diag_fini(gs_diag *d);
/* Appends a formatted warning; returns GS_ERR_NOMEM on allocation failure. d may be NULL. */
gs_status gs_diag_warn(gs_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Overflow-checked arithmetic on byte and element counts. Return 0 on success, -1 on overflow. */
int gs_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
int gs_add_u64(uint64_t a, uint64_t b, uint64_t *out);

#endif
