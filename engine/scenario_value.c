/* The scenario loader's scalar values and optional mapping fields (engine/scenario_internal.h):
 * counts, reals, booleans, strings, preset and enum names, each refused with a message that
 * names the field, says what was found and what was expected, placed at file:line:column.
 * Every reader borrows the loader and its nodes; values go to caller storage (strings copied). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/scenario_internal.h"
#include "engine/units.h"

/* ------------------------------------------------------------------------ messages ---- */

void gs__scenario_prefix_at(const gs__yaml_loader *l, const yaml_node_t *n)
{
    gs_error_prefix(l->err, "%s:%lu:%lu", l->path, gs__yaml_node_line(n), gs__yaml_node_col(n));
}

gs_status gs__scenario_fail_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                 const char *const *names, size_t n)
{
    char found[96], list[512], hint[96] = "";
    gs__yaml_describe(v, found, sizeof found);
    gs__yaml_join_names(names, n, list, sizeof list);
    if (v && v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(v)) {
        const char *near = gs__yaml_nearest_name(gs__yaml_scalar_text(v), names, n);
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s: found unknown value '%s'%s, expected one of %s", field,
                                gs__yaml_shown(v, found, sizeof found), hint, list);
    }
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected one of %s", field, found,
                            list);
}

/* ------------------------------------------------------------------ scalar values ---- */

/* 1 when text is a number (as gs_parse_count reads it) of 2^64 or more. */
static int count_too_large(const char *text)
{
    const char *p = text;
    while (*p == ' ')
        p++;
    int digit = 0;
    for (const char *q = p; *q; q++)
        if (isdigit((unsigned char)*q))
            digit = 1;
    if (!digit)
        return 0;
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p)
        return 0;
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
        return 0;
    v *= mult;
    return v >= 18446744073709551616.0; /* 2^64; also +inf from 1e400 */
}

static const char expect_count[] = "a positive integer (like 32, 7e9 or 6.7B)";

gs_status gs__scenario_value_u64(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                 uint64_t *out, int allow_zero)
{
    char found[96];
    if (!gs__yaml_is_bare_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expect_count);
    const char *t = gs__yaml_scalar_text(v);
    const char *p = t;
    while (*p == ' ')
        p++;
    uint64_t u = 0;
    int rc = gs_parse_count(t, &u);
    if (*p == '-') {
        char *end = NULL;
        (void)strtod(p, &end);
        if (end == p || !isdigit((unsigned char)p[strspn(p, "-+.")]))
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                    gs__yaml_describe(v, found, sizeof found), expect_count);
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s must be positive: found %s, expected %s",
                                field, gs__yaml_describe(v, found, sizeof found), expect_count);
    }
    if (rc == -2 && count_too_large(t))
        return gs__yaml_fail_at(l, v, GS_ERR_OVERFLOW,
                                "%s is too large: found %s, expected at most 18446744073709551615 "
                                "(2^64 - 1)",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (rc != 0)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                                gs__yaml_describe(v, found, sizeof found), expect_count);
    if (u == 0 && !allow_zero)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s must be positive: found %s, expected %s",
                                field, gs__yaml_describe(v, found, sizeof found), expect_count);
    *out = u;
    return GS_OK;
}

gs_status gs__scenario_value_count(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                   uint64_t *out)
{
    return gs__scenario_value_u64(l, v, field, out, 0);
}

/* A finite real number > 0 (and <= max when max > 0). */
static gs_status value_real(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                            double max, double *out)
{
    char found[96];
    if (!gs__yaml_is_bare_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    const char *t = gs__yaml_scalar_text(v);
    char *end = NULL;
    errno = 0;
    double d = strtod(t, &end);
    if (end == t || *end != '\0' || !isdigit((unsigned char)t[strspn(t, " +-.")]))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (!isfinite(d) || (errno == ERANGE && fabs(d) > 1.0))
        return gs__yaml_fail_at(l, v, GS_ERR_OVERFLOW,
                                "%s is too large: found %s, expected a finite "
                                "positive number",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (!(d > 0.0))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s must be positive: found %s, expected a number "
                                "> 0",
                                field, gs__yaml_describe(v, found, sizeof found));
    if (max > 0.0 && d > max)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s is out of range: found %s, expected a number in "
                                "(0, %g]",
                                field, gs__yaml_describe(v, found, sizeof found), max);
    *out = d;
    return GS_OK;
}

/* true/false/yes/no (any case). */
static gs_status value_bool(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                            int *out)
{
    char found[96];
    if (v && v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_quoted(v)) {
        const char *t = gs__yaml_scalar_text(v);
        /* YAML 1.1's booleans, all of them: yes accepted but on refused would surprise */
        if (strcasecmp(t, "true") == 0 || strcasecmp(t, "yes") == 0 || strcasecmp(t, "on") == 0) {
            *out = 1;
            return GS_OK;
        }
        if (strcasecmp(t, "false") == 0 || strcasecmp(t, "no") == 0 || strcasecmp(t, "off") == 0) {
            *out = 0;
            return GS_OK;
        }
    }
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected true or false (or yes/no, on/off)", field,
                            gs__yaml_describe(v, found, sizeof found));
}

/* A non-empty string scalar that fits in len bytes (NUL included). */
static gs_status value_string(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                              char *buf, size_t len)
{
    char found[96];
    if (!gs__yaml_is_text_scalar(v))
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a string", field,
                                gs__yaml_describe(v, found, sizeof found));
    size_t n = v->data.scalar.length;
    if (n >= len || strlen(gs__yaml_scalar_text(v)) != n)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "%s is too long or holds a NUL: found %zu bytes, "
                                "expected at most %zu",
                                field, n, len - 1);
    memcpy(buf, gs__yaml_scalar_text(v), n + 1);
    return GS_OK;
}

const char *gs__scenario_value_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                    const char *expected)
{
    char found[96];
    if (!gs__yaml_is_text_scalar(v)) {
        gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected %s", field,
                         gs__yaml_describe(v, found, sizeof found), expected);
        return NULL;
    }
    return gs__yaml_scalar_text(v);
}

/* ---------------------------------------------------------------- optional fields ---- */

/* The value of `key` in map, NULL when absent; *given (when not NULL) says whether it was there. */
static yaml_node_t *opt_lookup(const gs__yaml_loader *l, const yaml_node_t *map, const char *key, int *given)
{
    yaml_node_t *v = gs__yaml_lookup(l, map, key, NULL);
    if (given)
        *given = v != NULL;
    return v;
}

gs_status gs__scenario_opt_count(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                 const char *key, uint64_t *dst, int *given)
{
    yaml_node_t *v = opt_lookup(l, map, key, given);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return gs__scenario_value_count(l, v, field, dst);
}

gs_status gs__scenario_opt_real(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, double *dst, int *given)
{
    yaml_node_t *v = opt_lookup(l, map, key, given);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_real(l, v, field, 0, dst);
}

gs_status gs__scenario_opt_fraction(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                    const char *key, double *dst, int *given)
{
    yaml_node_t *v = opt_lookup(l, map, key, given);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_real(l, v, field, 1.0, dst);
}

gs_status gs__scenario_opt_bool(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, int *dst, int *given)
{
    yaml_node_t *v = opt_lookup(l, map, key, given);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_bool(l, v, field, dst);
}

gs_status gs__scenario_opt_string(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                  const char *key, char *buf, size_t len)
{
    yaml_node_t *v = opt_lookup(l, map, key, NULL);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    return value_string(l, v, field, buf, len);
}

gs_status gs__scenario_opt_enum(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, const gs__scenario_names *t, int *dst)
{
    yaml_node_t *v = opt_lookup(l, map, key, NULL);
    if (!v)
        return GS_OK;
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    if (v->type != YAML_SCALAR_NODE || gs__yaml_scalar_is_null(v) ||
        t->parse(gs__yaml_scalar_text(v), dst) != 0)
        return gs__scenario_fail_name(l, v, field, t->names, t->n);
    return GS_OK;
}
