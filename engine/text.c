/* gs_text: a growable NUL-terminated text buffer. */
#include "engine/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void gs_text_init(gs_text *t)
{
    t->buf = NULL;
    t->len = 0;
    t->cap = 0;
}

void gs_text_fini(gs_text *t)
{
    free(t->buf);
    gs_text_init(t);
}

void gs_text_clear(gs_text *t)
{
    t->len = 0;
    if (t->buf)
        t->buf[0] = '\0';
}

const char *gs_text_str(const gs_text *t)
{
    return t->buf ? t->buf : "";
}

gs_status gs_text_printf(gs_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return GS_ERR_NOMEM;
    size_t need = t->len + (size_t)n + 1;
    if (need > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < need)
            cap *= 2;
        char *nb = realloc(t->buf, cap);
        if (!nb)
            return GS_ERR_NOMEM;
        t->buf = nb;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
    return GS_OK;
}
