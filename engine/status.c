/* Status codes, error messages and warning lists. */
#include "engine/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gs_error_init(gs_error *err)
{
    if (!err)
        return;
    err->status = GS_OK;
    err->msg[0] = '\0';
}

gs_status gs_error_set(gs_error *err, gs_status st, const char *fmt, ...)
{
    if (!err)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = st;
    return st;
}

void gs_error_prefix(gs_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[GS_ERROR_MSG_BYTES];
    char old[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    err->msg[n] = ':';
    err->msg[n + 1] = ' ';
    size_t room = sizeof err->msg - (n + 2) - 1, olen = strlen(old);
    if (olen > room)
        olen = room;
    memcpy(err->msg + n + 2, old, olen);
    err->msg[n + 2 + olen] = '\0';
}

const char *gs_status_name(gs_status st)
{
    switch (st) {
    case GS_OK: return "ok";
    case GS_ERR_INPUT: return "bad input";
    case GS_ERR_RUNTIME: return "runtime failure";
    case GS_ERR_NOMEM: return "out of memory";
    case GS_ERR_IO: return "i/o error";
    case GS_ERR_OVERFLOW: return "size overflow";
    case GS_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}

int gs_status_exit_code(gs_status st)
{
    switch (st) {
    case GS_OK: return 0;
    case GS_ERR_INPUT:
    case GS_ERR_OVERFLOW: return 2;
    default: return 1;
    }
}

void gs_diag_init(gs_diag *d)
{
    d->warnings = NULL;
    d->count = 0;
    d->cap = 0;
}

void gs_diag_fini(gs_diag *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->count; i++)
        free(d->warnings[i]);
    free(d->warnings);
    gs_diag_init(d);
}

gs_status gs_diag_warn(gs_diag *d, const char *fmt, ...)
{
    if (!d)
        return GS_OK;
    char buf[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        char **w = realloc(d->warnings, cap * sizeof *w);
        if (!w)
            return GS_ERR_NOMEM;
        d->warnings = w;
        d->cap = cap;
    }
    char *copy = strdup(buf);
    if (!copy)
        return GS_ERR_NOMEM;
    d->warnings[d->count++] = copy;
    return GS_OK;
}

int gs_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int gs_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}
