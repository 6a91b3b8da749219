/* Helpers shared by the subcommands: scenario + mesh loading, JSON output, aligned tables. */
#include "config.h"

#include "cli/cli_common.h"

#include <ctype.h>
#ifdef HAVE_MALLOC_H
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim/calib_file.h"

void gs_cli_keep_freed_memory(void)
{
#if defined(HAVE_MALLOPT) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD) && defined(M_ARENA_MAX)
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* bytes: blocks below come from the heap */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);  /* bytes of free heap top kept before trimming */
    mallopt(M_ARENA_MAX, 1);             /* one heap: a thread's arena frees whole heaps back */
#endif
}

gs_status gs_cli_load(const char *path, gs_scenario *s, gs_mesh *mesh, gs_error *err)
{
    gs_diag warnings;
    gs_diag_init(&warnings);
    gs_status st = gs_scenario_load_file(path, s, err);
    if (st != GS_OK)
        goto out;
    st = gs_scenario_mesh(s, mesh, &warnings, err);
    for (size_t i = 0; i < warnings.count; i++)
        fprintf(stderr, "gridstep: warning: %s: %s\n", path, warnings.warnings[i]);
out:
    gs_diag_fini(&warnings);
    return st;
}

/* 1 when key names an unsigned count: a byte or parameter count ("*bytes*", "*params*"), not a
 * difference ("*_delta"). */
static int unsigned_count(const char *key)
{
    return (strstr(key, "bytes") || strstr(key, "params")) && !strstr(key, "delta");
}

/* Byte and parameter counts are unsigned: a negative one passed 2^63 - 1 on its way into JSON
 * (a uint64_t cast to json_int_t). Refused, naming its key, rather than printed. */
static gs_status check_counts(const json_t *v, const char *key, gs_error *err)
{
    if (json_is_integer(v) && json_integer_value(v) < 0 && unsigned_count(key))
        return gs_error_set(err, GS_ERR_OVERFLOW, "--json: %s is past 2^63 - 1 (%llu), more than the JSON output "
                            "carries as an exact integer; the text output shows it",
                            key, (unsigned long long)json_integer_value(v));
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            gs_status rc = check_counts(x, k, err);
            if (rc != GS_OK)
                return rc;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            gs_status rc = check_counts(x, key, err);
            if (rc != GS_OK)
                return rc;
        }
    }
    return GS_OK;
}

gs_status gs_cli_json_print(json_t *doc, gs_error *err)
{
    return gs_cli_json_fprint(stdout, doc, err);
}

gs_status gs_cli_json_fprint(FILE *f, json_t *doc, gs_error *err)
{
    gs_status rc = check_counts(doc, "the document", err);
    if (rc != GS_OK)
        return rc;
    json_t *versioned = NULL;
    if (json_is_object(doc) && !json_object_get(doc, "schema_version")) {
        /* a shallow copy with the version first: keys keep their insertion order */
        versioned = json_object();
        if (!versioned || json_object_set_new(versioned, "schema_version", json_integer(GS_JSON_SCHEMA_VERSION)) != 0 ||
            json_object_update(versioned, doc) != 0) {
            json_decref(versioned);
            return gs_error_set(err, GS_ERR_NOMEM, "cannot serialize JSON output");
        }
        doc = versioned;
    }
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(versioned);
    if (!text)
        return gs_error_set(err, GS_ERR_NOMEM, "cannot serialize JSON output");
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return GS_OK;
}

gs_status gs_cli_one_positional(int argc, char **argv, int optind_, const char *usage,
                                const char **out, gs_error *err)
{
    if (optind_ >= argc)
        return gs_error_set(err, GS_ERR_INPUT, "missing scenario file\nusage: %s", usage);
    if (argc - optind_ > 1)
        return gs_error_set(err, GS_ERR_INPUT, "unexpected argument '%s'\nusage: %s",
                            argv[optind_ + 1], usage);
    *out = argv[optind_];
    return GS_OK;
}

void gs_cli_table_init(gs_cli_table *t, size_t ncols)
{
    t->ncols = ncols;
    t->nrows = 0;
    t->cap = 0;
    t->cells = NULL;
}

void gs_cli_table_fini(gs_cli_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    gs_cli_table_init(t, t->ncols);
}

gs_status gs_cli_table_row(gs_cli_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * t->ncols * sizeof *c);
        if (!c)
            return GS_ERR_NOMEM;
        t->cells = c;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t j = 0; j < t->ncols; j++) {
        row[j] = strdup(cells[j] ? cells[j] : "");
        if (!row[j]) {
            for (size_t k = 0; k < j; k++)
                free(row[k]);
            return GS_ERR_NOMEM;
        }
    }
    t->nrows++;
    return GS_OK;
}

gs_status gs_cli_table_rowf(gs_cli_table *t, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *cells[64];
    size_t n = 0;
    char *p = buf;
    while (n < t->ncols && n < 64) {
        cells[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    while (n < t->ncols && n < 64)
        cells[n++] = "";
    return gs_cli_table_row(t, cells);
}

/* A cell is numeric when it starts with a digit, sign or dot and has a digit. */
static int cell_is_numeric(const char *s)
{
    if (!*s)
        return 0;
    if (!(isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
        return 0;
    for (const char *p = s; *p; p++)
        if (isdigit((unsigned char)*p))
            return 1;
    return 0;
}

void gs_cli_table_print(const gs_cli_table *t, FILE *f, int indent)
{
    size_t width[64] = {0};
    size_t nc = t->ncols < 64 ? t->ncols : 64;
    for (size_t i = 0; i < t->nrows; i++)
        for (size_t j = 0; j < nc; j++) {
            size_t w = strlen(t->cells[i * t->ncols + j]);
            if (w > width[j])
                width[j] = w;
        }
    for (size_t i = 0; i < t->nrows; i++) {
        fprintf(f, "%*s", indent, "");
        for (size_t j = 0; j < nc; j++) {
            const char *c = t->cells[i * t->ncols + j];
            int last = (j + 1 == nc);
            if (i > 0 && cell_is_numeric(c))
                fprintf(f, "%*s", (int)width[j], c);
            else if (last)
                fputs(c, f);
            else
                fprintf(f, "%-*s", (int)width[j], c);
            if (!last)
                fputs("  ", f);
        }
        fputc('\n', f);
        if (i == 0 && t->nrows > 1) {
            fprintf(f, "%*s", indent, "");
            for (size_t j = 0; j < nc; j++) {
                for (size_t k = 0; k < width[j]; k++)
                    fputc('-', f);
                if (j + 1 < nc)
                    fputs("  ", f);
            }
            fputc('\n', f);
        }
    }
}

gs_status gs_cli_bad_option(const char *arg, const struct option *opts, const char *shortopts,
                            const char *usage, gs_error *err)
{
    const char *needs = NULL;
    if (arg && strncmp(arg, "--", 2) == 0 && arg[2] && !strchr(arg, '=')) {
        size_t n = strlen(arg + 2);
        for (const struct option *o = opts; o && o->name; o++)
            if (strncmp(o->name, arg + 2, n) == 0 && o->has_arg == required_argument) {
                needs = o->name;
                break;
            }
    } else if (arg && arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2] && shortopts) {
        const char *c = strchr(shortopts, arg[1]);
        if (c && c[1] == ':')
            needs = arg;
    }
    if (needs)
        return gs_error_set(err, GS_ERR_INPUT, "option '%s%s' needs a value\nusage: %s",
                            needs == arg ? "" : "--", needs, usage);
    return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", arg ? arg : "?", usage);
}

void gs_cli_calib_notes(const char *calib_path, const gs_scenario *s)
{
    if (!calib_path || !s)
        return;
    gs_calib cal;
    gs_error err;
    gs_error_init(&err);
    char buf[512];
    const char *note;
    if (gs_calib_load(calib_path, &cal, &err) == GS_OK &&
        (note = gs_calib_attention_note(&cal, calib_path, s->strategy.flash_attention, buf, sizeof buf)) != NULL)
        fprintf(stderr, "gridstep: %s\n", note);
}

gs_driver_settings gs_cli_driver_settings(void)
{
    gs_driver_settings st = {getenv("GRIDSTEP_HOST_P2P"), getenv("GRIDSTEP_HOST_GEMM"), getenv("GRIDSTEP_CUDA_GEMM"),
                             getenv("GRIDSTEP_CUDA_ATTENTION"), NULL, 0, getenv("GRIDSTEP_CUDA_FP8")};
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) {
            st.launcher_var = vars[i];
            st.launcher_procs = atol(v);
            break;
        }
    }
    return st;
}
