/* `gridstep validate`: simulate every scenario that carries an `expect:` block (a published
 * measurement) and print predicted against published with the error. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/expect.h"
#include "engine/report.h"
#include "sim/sim.h"

const char gs_cmd_validate_help[] =
    "Simulates every scenario that has an `expect:` block and compares the simulated metric with\n"
    "the published one. A directory argument means every *.yaml in it (sorted by name; files\n"
    "without an expect block are skipped); a file argument must have one.\n"
    "\n"
    "The expect block names a metric, the published value, the source's FLOP formula and the\n"
    "citation, and optionally a relative tolerance (default 0.10):\n"
    "  expect: {metric: tflops_per_gpu_eq3, value: 137, formula: \"...\", source: \"...\"}\n"
    "metrics:\n"
    "  tflops_per_gpu_eq3    Narayanan et al. SC'21 Eq. 3 hardware FLOPs (full recompute counted),\n"
    "                        96 B s l h^2 (1 + s/6h + V/16lh), over the predicted step and GPUs\n"
    "  mfu_megatron          Megatron-Core num_floating_point_operations (no recompute, full s^2\n"
    "                        attention) over predicted step x GPUs x peak (peak_tflops, default 989)\n"
    "  tflops_per_gpu_hw     the report's hardware FLOPs (every compute event) per GPU per second\n"
    "  tflops_per_gpu, mfu, tokens_per_s_per_gpu, step_time_s   the report's own numbers\n"
    "The published FLOP counts are computed from the scenario with the source's formula, not with\n"
    "gridstep's, so the comparison is on step time under the source's own accounting.\n"
    "\n"
    "Prints one row per run (id, model, GPUs, grid, metric, published, predicted, signed error) and\n"
    "a summary: median, mean and max |error|, and how many runs are within their tolerance. Exit\n"
    "status 0 whatever the errors (it is a report); 2 for bad input; 1 if a simulation failed.\n"
    "\n"
    "options:\n"
    "  --exact   simulate every rank (default: one representative per class)\n"
    "  --json    one JSON document: runs [{id, file, model, gpus, grid {dp, pp, tp}, metric,\n"
    "            published, predicted, error, abs_error, tolerance, within_tolerance, step_time_s,\n"
    "            formula, source}], median_abs_error, mean_abs_error, max_abs_error,\n"
    "            runs_within_tolerance (errors are signed fractions: (predicted - published) /\n"
    "            published)\n"
    "\n"
    "examples:\n"
    "  gridstep validate " GS_DATADIR "/scenarios/published\n"
    "  gridstep validate --json scenarios/published | jq .median_abs_error\n";

static const char usage[] = "gridstep validate [--json] [--exact] DIR|FILE...";

/* One scenario with an expect block, and what its simulation predicted. */
typedef struct validate_run {
    char *path;        /* owned */
    gs_scenario s;
    gs_mesh mesh;
    gs_expect e;
    int simulated;     /* 1: predicted, error, step_time_s are set */
    double predicted;  /* metric's unit */
    double error;      /* signed fraction */
    double step_time_s;
    char failure[GS_ERROR_MSG_BYTES]; /* why the simulation failed ("" when it did not) */
} validate_run;

typedef struct validate_set {
    char **paths; /* owned, in the order to run */
    size_t n, cap;
    int *explicit_file; /* 1: named on the command line (must have an expect block) */
} validate_set;

static void set_fini(validate_set *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->paths[i]);
    free(v->paths);
    free(v->explicit_file);
}

static gs_status set_add(validate_set *v, const char *path, int explicit_file, gs_error *err)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 32;
        char **p = realloc(v->paths, cap * sizeof *p);
        if (!p)
            return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        v->paths = p;
        int *x = realloc(v->explicit_file, cap * sizeof *x);
        if (!x)
            return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        v->explicit_file = x;
        v->cap = cap;
    }
    if (!(v->paths[v->n] = strdup(path)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    v->explicit_file[v->n++] = explicit_file;
    return GS_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_yaml_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".yaml") == 0;
}

/* Adds every regular *.yaml file of dir, sorted by name. */
static gs_status add_dir(validate_set *v, const char *dir, gs_error *err)
{
    gs_status rc = GS_OK;
    char **names = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(dir);
    if (!d)
        return gs_error_set(err, GS_ERR_INPUT, "%s: cannot open directory: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || !has_yaml_suffix(de->d_name))
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 32;
            char **p = realloc(names, c * sizeof *p);
            if (!p) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                goto out;
            }
            names = p;
            cap = c;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && rc == GS_OK; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            break;
        }
        size_t dl = strlen(dir);
        snprintf(path, len, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", names[i]);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            rc = set_add(v, path, 0, err);
        free(path);
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

/* ------------------------------------------------------------------------ output ---- */

static void format_value(gs_expect_metric m, double x, char *buf, size_t len)
{
    if (gs_expect_metric_is_fraction(m))
        snprintf(buf, len, "%.1f%%", 100 * x);
    else if (m == GS_EXPECT_STEP_TIME_S)
        snprintf(buf, len, "%.3f s", x);
    else if (m == GS_EXPECT_TOKENS_PER_S_PER_GPU)
        snprintf(buf, len, "%.0f", x);
    else
        snprintf(buf, len, "%.1f", x);
}

static const char *run_id(const validate_run *r)
{
    return r->s.title[0] ? r->s.title : r->s.name;
}

static uint64_t run_gpus(const validate_run *r)
{
    return r->mesh.world;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

typedef struct validate_summary {
    size_t count;     /* simulated runs */
    size_t within;    /* of which within their tolerance */
    double median, mean, max; /* |error|, fractions */
    const validate_run *worst;
} validate_summary;

static gs_status summarize(const validate_run *runs, size_t n, validate_summary *out, gs_error *err)
{
    memset(out, 0, sizeof *out);
    double *abs_err = malloc((n ? n : 1) * sizeof *abs_err);
    if (!abs_err)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].simulated)
            continue;
        double a = fabs(runs[i].error);
        abs_err[out->count++] = a;
        sum += a;
        if (a <= runs[i].e.tolerance)
            out->within++;
        if (!out->worst || a > out->max) {
            out->max = a;
            out->worst = &runs[i];
        }
    }
    if (out->count) {
        qsort(abs_err, out->count, sizeof *abs_err, cmp_double);
        size_t k = out->count / 2;
        out->median = out->count % 2 ? abs_err[k] : 0.5 * (abs_err[k - 1] + abs_err[k]);
        out->mean = sum / (double)out->count;
    }
    free(abs_err);
    return GS_OK;
}

static gs_status print_table(const validate_run *runs, size_t n, const validate_summary *sum, int exact,
                             gs_error *err)
{
    gs_status rc = GS_OK;
    gs_cli_table t;
    gs_cli_table_init(&t, 8);
    if (gs_cli_table_rowf(&t, "id\tmodel\tGPUs\tdp x pp x tp\tmetric\tpublished\tpredicted\terror") != GS_OK) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const validate_run *r = &runs[i];
        char pub[32], pred[32] = "failed", e[32] = "-", grid[96];
        format_value(r->e.metric, r->e.value, pub, sizeof pub);
        if (r->simulated) {
            format_value(r->e.metric, r->predicted, pred, sizeof pred);
            snprintf(e, sizeof e, "%+.1f%%", 100 * r->error);
        }
        snprintf(grid, sizeof grid, GS_GRID_CELL_FMT, r->s.grid.dp, r->s.grid.pp, r->s.grid.tp);
        if (gs_cli_table_rowf(&t, "%s\t%s\t%" PRIu64 "\t%s\t%s\t%s\t%s\t%s", run_id(r), r->s.model.name,
                              run_gpus(r), grid, gs_expect_metric_name(r->e.metric), pub, pred, e) != GS_OK) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    printf("published runs: predicted (sim, analytic mode, %s) vs published; error = (predicted - "
           "published) / published\n\n",
           exact ? "every rank" : "class path");
    gs_cli_table_print(&t, stdout, 0);
    printf("\n%zu run%s simulated", sum->count, sum->count == 1 ? "" : "s");
    if (sum->count)
        printf(", %zu within tolerance: median |error| %.1f%%, mean |error| %.1f%%, max |error| %.1f%% (%s)",
               sum->within, 100 * sum->median, 100 * sum->mean, 100 * sum->max, run_id(sum->worst));
    printf("\n");
    if (sum->count < n)
        printf("%zu run%s failed to simulate (see stderr)\n", n - sum->count, n - sum->count == 1 ? "" : "s");
out:
    gs_cli_table_fini(&t);
    return rc;
}

static json_t *runs_json(const validate_run *runs, size_t n, const validate_summary *sum)
{
    json_t *doc = json_object(), *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const validate_run *r = &runs[i];
        json_t *o = json_object(), *grid = json_object();
        json_object_set_new(o, "id", json_string(run_id(r)));
        json_object_set_new(o, "file", json_string(r->path));
        json_object_set_new(o, "model", json_string(r->s.model.name));
        json_object_set_new(o, "gpus", json_integer((json_int_t)run_gpus(r)));
        json_object_set_new(grid, "dp", json_integer((json_int_t)r->s.grid.dp));
        json_object_set_new(grid, "pp", json_integer((json_int_t)r->s.grid.pp));
        json_object_set_new(grid, "tp", json_integer((json_int_t)r->s.grid.tp));
        json_object_set_new(o, "grid", grid);
        json_object_set_new(o, "metric", json_string(gs_expect_metric_name(r->e.metric)));
        json_object_set_new(o, "published", json_real(r->e.value));
        if (r->simulated) {
            json_object_set_new(o, "predicted", json_real(r->predicted));
            json_object_set_new(o, "error", json_real(r->error));
            json_object_set_new(o, "abs_error", json_real(fabs(r->error)));
        } else {
            json_object_set_new(o, "predicted", json_null());
            json_object_set_new(o, "error", json_null());
            json_object_set_new(o, "abs_error", json_null());
        }
        json_object_set_new(o, "tolerance", json_real(r->e.tolerance));
        json_object_set_new(o, "within_tolerance",
                            json_boolean(r->simulated && fabs(r->error) <= r->e.tolerance));
        json_object_set_new(o, "step_time_s", r->simulated ? json_real(r->step_time_s) : json_null());
        json_object_set_new(o, "formula", json_string(r->e.formula));
        json_object_set_new(o, "source", json_string(r->e.source));
        if (!r->simulated)
            json_object_set_new(o, "failure", json_string(r->failure));
        json_array_append_new(arr, o);
    }
    json_object_set_new(doc, "runs", arr);
    json_object_set_new(doc, "median_abs_error", sum->count ? json_real(sum->median) : json_null());
    json_object_set_new(doc, "mean_abs_error", sum->count ? json_real(sum->mean) : json_null());
    json_object_set_new(doc, "max_abs_error", sum->count ? json_real(sum->max) : json_null());
    json_object_set_new(doc, "runs_within_tolerance", json_integer((json_int_t)sum->within));
    return doc;
}

/* ----------------------------------------------------------------------- command ---- */

gs_status gs_cmd_validate(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"exact", no_argument, NULL, 'e'}, {"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0},
    };
    int exact = 0, json = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': exact = 1; break;
        case 'j': json = 1; break;
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (optind >= argc)
        return gs_error_set(err, GS_ERR_INPUT, "missing directory or scenario file\nusage: %s", usage);

    gs_status rc = GS_OK;
    validate_set set = {NULL, 0, 0, NULL};
    validate_run *runs = NULL;
    size_t nruns = 0, failed = 0;
    json_t *doc = NULL;
    int progress = isatty(STDERR_FILENO);

    for (int i = optind; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: cannot open: %s", argv[i], strerror(errno));
            goto out;
        }
        rc = S_ISDIR(sb.st_mode) ? add_dir(&set, argv[i], err) : set_add(&set, argv[i], 1, err);
        if (rc != GS_OK)
            goto out;
    }
    if (!(runs = calloc(set.n ? set.n : 1, sizeof *runs))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* Load everything first, so that bad input stops the command before any simulation. */
    for (size_t i = 0; i < set.n; i++) {
        validate_run *r = &runs[nruns];
        int present = 0;
        if ((rc = gs_expect_load(set.paths[i], &r->e, &present, err)) != GS_OK)
            goto out;
        if (!present) {
            if (set.explicit_file[i]) {
                rc = gs_error_set(err, GS_ERR_INPUT,
                                  "%s: no expect block: found a scenario without 'expect:', expected "
                                  "expect: {metric: ..., value: ..., formula: ..., source: ...}",
                                  set.paths[i]);
                goto out;
            }
            continue;
        }
        if ((rc = gs_cli_load(set.paths[i], &r->s, &r->mesh, err)) != GS_OK)
            goto out;
        r->path = set.paths[i];
        set.paths[i] = NULL; /* the run owns it now */
        nruns++;
    }
    if (nruns == 0) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "found no scenario with an expect: block in the arguments, expected at least one "
                          "(like scenarios/published)");
        goto out;
    }

    gs_backend_opts bo = {0, NULL, NULL};
    for (size_t i = 0; i < nruns; i++) {
        validate_run *r = &runs[i];
        gs_report rep;
        gs_error serr;
        gs_error_init(&serr);
        if (progress)
            fprintf(stderr, "\rvalidate: [%zu/%zu] %-40.40s", i + 1, nruns, run_id(r));
        gs_status st = gs_sim_scenario(&r->s, &r->mesh, exact, &bo, &rep, NULL, &serr);
        if (st != GS_OK) {
            snprintf(r->failure, sizeof r->failure, "%s", serr.msg[0] ? serr.msg : gs_status_name(st));
            failed++;
            continue;
        }
        r->predicted = gs_expect_predicted(&r->e, &r->s, &rep);
        r->step_time_s = rep.step_time_s;
        r->error = gs_expect_error(&r->e, r->predicted);
        r->simulated = 1;
        gs_report_fini(&rep);
    }
    if (progress)
        fprintf(stderr, "\r%-70s\r", "");
    for (size_t i = 0; i < nruns; i++)
        if (!runs[i].simulated)
            fprintf(stderr, "gridstep validate: %s: simulation failed: %s\n", runs[i].path, runs[i].failure);

    validate_summary sum;
    if ((rc = summarize(runs, nruns, &sum, err)) != GS_OK)
        goto out;
    if (json) {
        if (!(doc = runs_json(runs, nruns, &sum))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((rc = gs_cli_json_print(doc, err)) != GS_OK)
            goto out;
    } else if ((rc = print_table(runs, nruns, &sum, exact, err)) != GS_OK) {
        goto out;
    }
    if (failed)
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%zu of %zu runs failed to simulate", failed, nruns);
out:
    json_decref(doc);
    if (runs)
        for (size_t i = 0; i < nruns; i++)
            free(runs[i].path);
    free(runs);
    set_fini(&set);
    return rc;
}
