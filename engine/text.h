/* A growable NUL-terminated text buffer, for generated documents (launch configs, scenario YAML).
 *
 * Ownership: gs_text is caller storage (gs_text_init / gs_text_fini); it owns its buffer, which
 * callers borrow through gs_text_str until the next append or fini. */
#ifndef GS_TEXT_H
#define GS_TEXT_H

#include <stddef.h>

#include "engine/status.h"

typedef struct gs_text {
    char *buf;  /* owned; NULL until the first append */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
} gs_text;

void gs_text_init(gs_text *t);
void gs_text_fini(gs_text *t);
/* Empties the text, keeping its buffer. */
void gs_text_clear(gs_text *t);
/* The text so far ("" when empty); valid until the next append or fini. */
const char *gs_text_str(const gs_text *t);
/* Appends formatted text; GS_ERR_NOMEM when the buffer cannot grow (the text is unchanged). */
gs_status gs_text_printf(gs_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
