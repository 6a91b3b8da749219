/* Unit formatting and count parsing. */
#include "engine/units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *gs_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000.0 && u < 6) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}

char *gs_fmt_bytes_bin(uint64_t bytes, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}

char *gs_fmt_count(uint64_t n, char *buf, size_t len)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    size_t nd = strlen(digits), o = 0;
    for (size_t i = 0; i < nd && o + 2 < len; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

char *gs_fmt_seconds(double s, char *buf, size_t len)
{
    double a = fabs(s);
    if (a >= 1.0 || a == 0.0)
        snprintf(buf, len, "%.2f s", s);
    else if (a >= 1e-3)
        snprintf(buf, len, "%.1f ms", s * 1e3);
    else
        snprintf(buf, len, "%.1f us", s * 1e6);
    return buf;
}

char *gs_fmt_flops(double f, char *buf, size_t len)
{
    if (f >= 1e15)
        snprintf(buf, len, "%.2f PFLOP/s", f / 1e15);
    else if (f >= 1e12)
        snprintf(buf, len, "%.1f TFLOP/s", f / 1e12);
    else
        snprintf(buf, len, "%.1f GFLOP/s", f / 1e9);
    return buf;
}

char *gs_fmt_bw(double b, char *buf, size_t len)
{
    if (b >= 1e12)
        snprintf(buf, len, "%.2f TB/s", b / 1e12);
    else
        snprintf(buf, len, "%.2f GB/s", b / 1e9);
    return buf;
}

int gs_parse_count(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    const char *p = s;
    while (*p == ' ')
        p++;
    if (*p == '-')
        return -2;
    /* Plain integers first: exact for every uint64_t. */
    char *end = NULL;
    errno = 0;
    unsigned long long u = strtoull(p, &end, 10);
    if (end != p && *end == '\0') {
        if (errno == ERANGE)
            return -2;
        *out = (uint64_t)u;
        return 0;
    }
    errno = 0;
    double v = strtod(p, &end);
    if (end == p)
        return -1;
    double mult = 1.0;
    if (*end == 'K' || *end == 'k')
        mult = 1e3, end++;
    else if (*end == 'M')
        mult = 1e6, end++;
    else if (*end == 'B' || *end == 'G')
        mult = 1e9, end++;
    else if (*end == 'T')
        mult = 1e12, end++;
    if (*end != '\0')
        return -1;
    v *= mult;
    if (!isfinite(v) || v < 0.0)
        return -2;
    if (v >= 18446744073709551616.0)
        return -2;
    double r = nearbyint(v);
    if (fabs(r - v) > 1e-6 * (v > 1.0 ? v : 1.0))
        return -2;
    *out = (uint64_t)r;
    return 0;
}
