/* Megatron-LM's printed argument dump (megatron/training/arguments.py _print_args: a
 * "---- arguments ----" line, one "  NAME ..... VALUE" line per argument in argparse's dest
 * names, sorted, and a "---- end of arguments ----" line) read back as the flags that give it. A
 * log prefix before the dashes ("[rank0]: ") is allowed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import_megatron_internal.h"
#include "engine/megatron_args.h"
#include "engine/units.h"

static const char dump_begin[] = " arguments ------------------------";
static const char dump_end[] = " end of arguments ---------------------";

/* The first occurrence of needle[0..n) in s[0..len), or NULL. */
static const char *find_in(const char *s, size_t len, const char *needle, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(s + i, needle, n) == 0)
            return s + i;
    return NULL;
}

int gs__mg_is_dump(const char *text)
{
    return strstr(text, "------------------------ arguments ------------------------") != NULL;
}

/* One "NAME ... VALUE" line after the prefix: the name and value (trailing blanks cut). */
static int dump_line(const char *line, size_t len, const char **name, size_t *nlen, const char **val, size_t *vlen)
{
    const char *p = line, *end = line + len;
    while (p < end && *p == ' ')
        p++;
    *name = p;
    while (p < end && *p != ' ')
        p++;
    *nlen = (size_t)(p - *name);
    if (*nlen == 0 || p == end)
        return -1;
    p++;
    while (p < end && *p == '.')
        p++;
    if (p < end && *p == ' ')
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\r'))
        end--;
    *val = p;
    *vlen = (size_t)(end - p);
    return 0;
}

/* The value without Python's quotes or an enum's class ("AttnBackend.flash" -> "flash"). */
static void plain_value(const char *v, size_t n, char *out, size_t len)
{
    if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0])
        v++, n -= 2;
    const char *dot = memchr(v, '.', n);
    if (dot && dot > v && v[0] >= 'A' && v[0] <= 'Z') {
        int word = 1;
        for (const char *q = v; q < dot; q++)
            word &= (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_';
        if (word)
            n -= (size_t)(dot + 1 - v), v = dot + 1;
    }
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), v);
}

/* 1 when the printed value equals the argument's default (as the table holds it). */
static int at_default(const gs__mg_arg *a, const char *plain)
{
    char def[256];
    plain_value(a->def, strlen(a->def), def, sizeof def);
    return strcmp(a->def, "?") != 0 && strcmp(def, plain) == 0;
}

/* Up to this many names are listed in the summary line; the rest are counted. */
#define DUMP_SHOWN_BYTES 600

typedef struct dump_summary {
    char unmodeled[DUMP_SHOWN_BYTES];
    size_t n_unmodeled, shown_unmodeled;
    size_t n_derived;
} dump_summary;

static void summary_add(dump_summary *d, const char *name, size_t n)
{
    size_t len = strlen(d->unmodeled);
    if (len + n + 4 < sizeof d->unmodeled) {
        snprintf(d->unmodeled + len, sizeof d->unmodeled - len, "%s%.*s", d->n_unmodeled ? ", " : "", (int)n, name);
        d->shown_unmodeled++;
    }
    d->n_unmodeled++;
}

/* The words one dump line gives: its gridstep flags with the value, when away from the default. */
static gs_status translate(const gs__mg_arg *a, const char *plain, unsigned line, gs__words *out, int *mapped)
{
    *mapped = 0;
    for (size_t i = 0; i < gs__mg_nflags; i++) {
        const gs__mg_flag *f = &gs__mg_flags[i];
        const gs__mg_arg *fa = gs__mg_arg_find(f->name, strlen(f->name));
        if (!fa || strcmp(fa->dest, a->dest) != 0 || f->act == MG_IGNORE)
            continue;
        *mapped = 1;
        if (strcmp(plain, "None") == 0 || at_default(fa, plain))
            continue;
        char flag[160];
        snprintf(flag, sizeof flag, "--%s", f->name);
        gs_status st = GS_OK;
        if (fa->kind == GS__MG_TRUE || fa->kind == GS__MG_FALSE) {
            /* a switch gives the value its kind stores: True for store_true, False for store_false */
            if (strcmp(plain, fa->kind == GS__MG_TRUE ? "True" : "False") == 0)
                st = gs__words_push(out, flag, strlen(flag), line);
        } else if ((st = gs__words_push(out, flag, strlen(flag), line)) == GS_OK) {
            st = gs__words_push(out, plain, strlen(plain), line);
        }
        if (st != GS_OK)
            return st;
    }
    return GS_OK;
}

/* Values Megatron derives that gridstep reads: world_size, data_parallel_size. */
static int derived(const char *name, size_t n, const char *plain, unsigned line, gs__mg_dump_info *info)
{
    uint64_t v;
    if (gs_parse_count(plain, &v) != 0)
        return 0;
    if (n == 10 && strncmp(name, "world_size", n) == 0)
        info->world_size = v, info->world_line = line;
    else if (n == 18 && strncmp(name, "data_parallel_size", n) == 0)
        info->data_parallel_size = v, info->dp_line = line;
    else
        return 0;
    return 1;
}

gs_status gs__mg_dump_words(const char *text, const char *origin, gs__words *out, gs__mg_dump_info *info,
                            gs_diag *ignored, gs_error *err)
{
    const char *who = origin ? origin : "--from-megatron";
    dump_summary sum;
    memset(&sum, 0, sizeof sum);
    memset(info, 0, sizeof *info);
    gs__words_init(out);
    const char *begin = strstr(text, dump_begin);
    unsigned line = 1;
    for (const char *q = text; q < begin; q++)
        line += *q == '\n';
    const char *p = strchr(begin, '\n');
    int ended = 0;
    gs_status st = GS_OK;
    while (st == GS_OK && p && *p) {
        p++, line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (find_in(p, len, dump_end, sizeof dump_end - 1)) {
            ended = 1;
            break;
        }
        if (strspn(p, " \t\r") >= len) { /* a blank line */
            p = eol;
            continue;
        }
        const char *name, *val;
        size_t nlen, vlen;
        const char *bracket = find_in(p, len, "]: ", 3); /* a log prefix such as "[rank0]: " */
        const char *from = bracket && bracket < p + len ? bracket + 3 : p;
        if (dump_line(from, len - (size_t)(from - p), &name, &nlen, &val, &vlen) != 0) {
            st = gs_error_set(err, GS_ERR_INPUT, "%s:%u: found '%.*s', expected 'NAME ..... VALUE' (Megatron-LM's "
                                                 "argument dump)",
                              who, line, (int)(len < 80 ? len : 80), p);
            break;
        }
        char plain[512], dest[128];
        plain_value(val, vlen, plain, sizeof plain);
        snprintf(dest, sizeof dest, "%.*s", (int)(nlen < sizeof dest ? nlen : sizeof dest - 1), name);
        const gs__mg_arg *a = gs__mg_arg_by_dest(dest);
        int mapped = 0;
        if (a) {
            st = translate(a, plain, line, out, &mapped);
            if (st == GS_OK && !mapped && strcmp(plain, "None") != 0 && !at_default(a, plain))
                summary_add(&sum, name, nlen);
        } else if (!derived(name, nlen, plain, line, info)) {
            sum.n_derived++;
        }
        p = eol;
    }
    if (st == GS_OK && !ended)
        st = gs_error_set(err, GS_ERR_INPUT, "%s: found no '%s' line, expected the whole argument dump", who,
                          dump_end + 1);
    if (st == GS_OK && (sum.n_unmodeled || sum.n_derived)) {
        char more[48] = "";
        if (sum.shown_unmodeled < sum.n_unmodeled)
            snprintf(more, sizeof more, ", and %zu more", sum.n_unmodeled - sum.shown_unmodeled);
        st = gs__import_ignored(ignored, err,
                                "%s: %zu argument%s away from Megatron-LM's defaults: ignored: not modeled (no effect "
                                "on gridstep's model of the step)%s%s%s; %zu value%s Megatron-LM derives (rank, "
                                "world_size, ...) read only for the world size",
                                who, sum.n_unmodeled, sum.n_unmodeled == 1 ? "" : "s", sum.n_unmodeled ? ": " : "",
                                sum.unmodeled, more, sum.n_derived, sum.n_derived == 1 ? "" : "s");
    }
    if (st == GS_ERR_NOMEM)
        st = gs_error_set(err, st, "%s: out of memory reading the argument dump", who);
    if (st != GS_OK)
        gs__words_fini(out);
    return st;
}
