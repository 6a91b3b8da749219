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
#include "engine/framework.h"
#include "engine/report.h"
#include "sim/compute.h"
#include "sim/fit.h"
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
    "  tflops_palm, mfu_palm (6 N + 12 L h s) FLOPs per token, the PaLM / nanoGPT / MosaicML /\n"
    "                        FlashAttention convention (palm_params: non_embedding drops the\n"
    "                        embedding from N), per GPU per second or over peak_tflops\n"
    "optional keys: tolerance, peak_tflops, palm_params, dataset (the source family, for\n"
    "--holdout-by source)\n"
    "The published FLOP counts are computed from the scenario with the source's formula, not with\n"
    "gridstep's, so the comparison is on step time under the source's own accounting.\n"
    "\n"
    "Prints one row per run (id, model, GPUs, grid, metric, published, predicted, signed error) and\n"
    "a summary: median, mean and max |error|, and how many runs are within their tolerance. Exit\n"
    "status 0 whatever the errors (it is a report); 2 for bad input; 1 if a simulation failed.\n"
    "\n"
    "Then one row per regime (framework / GPU generation / single- or multi-node): median, mean\n"
    "and max |error| and the signed mean (a bias shows there). The signed mean is taken in one\n"
    "direction for every metric: + means the simulated steps are faster than the measured ones\n"
    "(a rate's error as it is, a step time's negated), so that runs published as step times and\n"
    "runs published as tokens/s or MFU add their biases instead of cancelling them.\n"
    "\n"
    "The sim's fitted constants (overlap_hbm_per_byte: HBM bytes per byte of a concurrent\n"
    "collective; gemm_sustained: a step's GEMM throughput over the GPU's MAMF) are fitted with\n"
    "GSL's simplex on the mean over sources of each source's mean squared log error.\n"
    "--holdout-by source refits them without each source (the scenario's expect.dataset) and\n"
    "predicts that source with them: the leave-one-source-out errors beside the in-sample ones.\n"
    "\n"
    "options:\n"
    "  --exact   simulate every rank (default: one representative per class)\n"
    "  --holdout-by source   leave-one-source-out errors per regime, and the constants fitted on\n"
    "            every source (minutes: each fit simulates every run a few dozen times)\n"
    "  --fit     fit the constants on every source and print them (stderr)\n"
    "  --csv-file FILE   also write the --csv rows to FILE (beside the table or JSON)\n"
    "  --csv     one row per run: id, dataset, regime, metric, published, predicted, error,\n"
    "            holdout_error, fits_memory (for plots; errors are signed fractions)\n"
    "  --json    one JSON document: runs [{id, file, model, gpus, grid {dp, pp, tp}, metric,\n"
    "            published, predicted, error, abs_error, tolerance, within_tolerance, step_time_s,\n"
    "            fits_memory, regime, dataset, holdout_error, speed_error, holdout_speed_error,\n"
    "            formula, source}],\n"
    "            median_abs_error, mean_abs_error, max_abs_error, signed_mean_error,\n"
    "            runs_within_tolerance; with --holdout-by: fitted_on_all, holdout_median_abs_error,\n"
    "            holdout_signed_mean_error (errors are signed fractions: (predicted - published) /\n"
    "            published; speed errors and the signed means: + the simulated step is faster)\n"
    "\n"
    "examples:\n"
    "  gridstep validate " GS_DATADIR "/scenarios/published\n"
    "  gridstep validate --json scenarios/published | jq .median_abs_error\n"
    "  gridstep validate --holdout-by source scenarios/published\n";

static const char usage[] = "gridstep validate [--json | --csv] [--exact] [--fit | --holdout-by source] DIR|FILE...";

/* One scenario with an expect block, and what its simulation predicted (fit.simulated etc.). */
typedef struct validate_run {
    char *path;        /* owned */
    gs_scenario s;
    gs_mesh mesh;
    gs_expect e;
    int simulated;     /* 1: predicted, error, step_time_s are set */
    double predicted;  /* metric's unit */
    double error;      /* signed fraction */
    double step_time_s;
    int fits_memory;   /* 1: the simulated peak fits the GPU */
    double holdout_error; /* signed fraction with the constants fitted without this run's source */
    int holdout_ok;
    char regime[96];   /* framework / GPU generation / single- or multi-node */
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

/* "fsdp1 / hopper / multi-node": the framework the scenario runs under, the GPU's generation, and
 * whether its grid spans nodes. */
static void regime_of(validate_run *r)
{
    uint32_t cc = r->s.cluster.gpu.compute_capability;
    const char *gen = cc < 80 ? "volta" : cc < 90 ? "ampere" : cc < 100 ? "hopper" : "blackwell";
    gs_framework fw = gs_framework_resolve(r->s.strategy.framework, (int)r->s.strategy.sharding);
    snprintf(r->regime, sizeof r->regime, "%s / %s / %s", gs_framework_name(fw), gen,
             r->s.cluster.nodes > 1 ? "multi-node" : "single-node");
}

/* The error e of run r read as speed: + when the simulated step is faster than the measured
 * one, whichever way the metric runs (gs_expect_metric_lower_is_faster), so that a bias adds up
 * over runs of different metrics instead of cancelling. */
static double speed_error(const validate_run *r, double e)
{
    return gs_expect_metric_lower_is_faster(r->e.metric) ? -e : e;
}

static const char *source_of(const validate_run *r)
{
    return r->e.dataset[0] ? r->e.dataset : "(no dataset)";
}

typedef struct validate_summary {
    size_t count;     /* simulated runs */
    size_t within;    /* of which within their tolerance */
    double median, mean, max; /* |error|, fractions */
    double signed_mean;       /* mean speed error (speed_error): + the simulated steps are faster */
    const validate_run *worst;
} validate_summary;

/* Summary of the runs whose regime is `regime` (NULL: all), on the in-sample errors or, with
 * holdout, on the leave-one-source-out ones. */
static gs_status summarize(const validate_run *runs, size_t n, const char *regime, int holdout, validate_summary *out,
                           gs_error *err)
{
    memset(out, 0, sizeof *out);
    double *abs_err = malloc((n ? n : 1) * sizeof *abs_err);
    if (!abs_err)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    double sum = 0, ssum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].simulated || (holdout && !runs[i].holdout_ok) || (regime && strcmp(regime, runs[i].regime)))
            continue;
        double e = holdout ? runs[i].holdout_error : runs[i].error, a = fabs(e);
        abs_err[out->count++] = a;
        sum += a;
        ssum += speed_error(&runs[i], e);
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
        out->signed_mean = ssum / (double)out->count;
    }
    free(abs_err);
    return GS_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct regimes of the runs, sorted (pointers into the runs). */
static size_t regimes(const validate_run *runs, size_t n, const char **out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && strcmp(out[j], runs[i].regime))
            j++;
        if (j == k)
            out[k++] = runs[i].regime;
    }
    qsort(out, k, sizeof *out, cmp_str);
    return k;
}

static gs_status print_regimes(const validate_run *runs, size_t n, int holdout, gs_error *err)
{
    gs_status rc = GS_OK;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    gs_cli_table t;
    gs_cli_table_init(&t, holdout ? 8 : 6);
    if (!names)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    size_t k = regimes(runs, n, names);
    rc = gs_cli_table_rowf(&t, holdout ? "regime\truns\tmedian |err|\tmean |err|\tmax |err|\tsigned mean\tLOSO median\tLOSO signed"
                                       : "regime\truns\tmedian |err|\tmean |err|\tmax |err|\tsigned mean");
    for (size_t i = 0; i <= k && rc == GS_OK; i++) {
        validate_summary a, b;
        const char *name = i < k ? names[i] : NULL;
        if ((rc = summarize(runs, n, name, 0, &a, err)) != GS_OK || (rc = summarize(runs, n, name, 1, &b, err)) != GS_OK)
            break;
        if (!a.count)
            continue;
        if (holdout)
            rc = gs_cli_table_rowf(&t, "%s\t%zu\t%.1f%%\t%.1f%%\t%.1f%%\t%+.1f%%\t%.1f%%\t%+.1f%%", name ? name : "all",
                                   a.count, 100 * a.median, 100 * a.mean, 100 * a.max, 100 * a.signed_mean,
                                   100 * b.median, 100 * b.signed_mean);
        else
            rc = gs_cli_table_rowf(&t, "%s\t%zu\t%.1f%%\t%.1f%%\t%.1f%%\t%+.1f%%", name ? name : "all", a.count,
                                   100 * a.median, 100 * a.mean, 100 * a.max, 100 * a.signed_mean);
        if (rc != GS_OK)
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    }
    if (rc == GS_OK) {
        printf("\nby regime (framework / GPU generation / nodes)%s:\n\n",
               holdout ? "; LOSO: the fitted constants refitted without the run's source" : "");
        gs_cli_table_print(&t, stdout, 0);
    }
    gs_cli_table_fini(&t);
    free(names);
    return rc;
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
        char pub[32], pred[32] = "failed", e[40] = "-", grid[96];
        format_value(r->e.metric, r->e.value, pub, sizeof pub);
        if (r->simulated) {
            format_value(r->e.metric, r->predicted, pred, sizeof pred);
            snprintf(e, sizeof e, "%+.1f%%%s", 100 * r->error, r->fits_memory ? "" : " (no fit)");
        }
        snprintf(grid, sizeof grid, GS_GRID_CELL_FMT, r->s.grid.dp, r->s.grid.pp, r->s.grid.tp);
        if (r->s.grid.cp > 1) /* context parallelism: dp counts the replicas */
            snprintf(grid + strlen(grid), sizeof grid - strlen(grid), " cp%" PRIu64, r->s.grid.cp);
        if (gs_cli_table_rowf(&t, "%s\t%s\t%" PRIu64 "\t%s\t%s\t%s\t%s\t%s", run_id(r), r->s.model.name,
                              run_gpus(r), grid, gs_expect_metric_name(r->e.metric), pub, pred, e) != GS_OK) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    printf("published runs: predicted (sim, analytic mode, %s) vs published; error = (predicted - "
           "published) / published; (no fit): the simulated peak exceeds the GPU's memory\n\n",
           exact ? "every rank" : "class path");
    gs_cli_table_print(&t, stdout, 0);
    printf("\n%zu run%s simulated", sum->count, sum->count == 1 ? "" : "s");
    if (sum->count)
        printf(", %zu within tolerance: median |error| %.1f%%, mean |error| %.1f%%, max |error| %.1f%% (%s), "
               "signed mean %+.1f%% (+: the simulated steps faster than measured)",
               sum->within, 100 * sum->median, 100 * sum->mean, 100 * sum->max, run_id(sum->worst),
               100 * sum->signed_mean);
    printf("\n");
    if (sum->count < n)
        printf("%zu run%s failed to simulate (see stderr)\n", n - sum->count, n - sum->count == 1 ? "" : "s");
out:
    gs_cli_table_fini(&t);
    return rc;
}

/* One CSV row per run (RFC 4180 quoting for the text fields), for plots and scripts. */
static void csv_text(FILE *f, const char *t)
{
    fputc('"', f);
    for (; *t; t++) {
        if (*t == '"')
            fputc('"', f);
        fputc(*t, f);
    }
    fputc('"', f);
}

static void print_csv(FILE *f, const validate_run *runs, size_t n)
{
    fprintf(f, "id,dataset,regime,metric,published,predicted,error,holdout_error,fits_memory\n");
    for (size_t i = 0; i < n; i++) {
        const validate_run *r = &runs[i];
        csv_text(f, run_id(r));
        fputc(',', f);
        csv_text(f, source_of(r));
        fputc(',', f);
        csv_text(f, r->regime);
        fprintf(f, ",%s,%.9g,", gs_expect_metric_name(r->e.metric), r->e.value);
        if (r->simulated)
            fprintf(f, "%.9g,%.6f,", r->predicted, r->error);
        else
            fprintf(f, ",,");
        if (r->holdout_ok)
            fprintf(f, "%.6f", r->holdout_error);
        fprintf(f, ",%d\n", r->simulated && r->fits_memory);
    }
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
        if (r->s.grid.cp > 1)
            json_object_set_new(grid, "cp", json_integer((json_int_t)r->s.grid.cp));
        json_object_set_new(o, "grid", grid);
        json_object_set_new(o, "metric", json_string(gs_expect_metric_name(r->e.metric)));
        json_object_set_new(o, "published", json_real(r->e.value));
        if (r->simulated) {
            json_object_set_new(o, "predicted", json_real(r->predicted));
            json_object_set_new(o, "error", json_real(r->error));
            json_object_set_new(o, "abs_error", json_real(fabs(r->error)));
            json_object_set_new(o, "speed_error", json_real(speed_error(r, r->error)));
        } else {
            json_object_set_new(o, "predicted", json_null());
            json_object_set_new(o, "error", json_null());
            json_object_set_new(o, "abs_error", json_null());
            json_object_set_new(o, "speed_error", json_null());
        }
        json_object_set_new(o, "tolerance", json_real(r->e.tolerance));
        json_object_set_new(o, "within_tolerance",
                            json_boolean(r->simulated && fabs(r->error) <= r->e.tolerance));
        json_object_set_new(o, "step_time_s", r->simulated ? json_real(r->step_time_s) : json_null());
        json_object_set_new(o, "fits_memory", json_boolean(r->simulated && r->fits_memory));
        json_object_set_new(o, "regime", json_string(r->regime));
        json_object_set_new(o, "dataset", json_string(source_of(r)));
        if (r->holdout_ok) {
            json_object_set_new(o, "holdout_error", json_real(r->holdout_error));
            json_object_set_new(o, "holdout_speed_error", json_real(speed_error(r, r->holdout_error)));
        }
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
    json_object_set_new(doc, "signed_mean_error", sum->count ? json_real(sum->signed_mean) : json_null());
    return doc;
}

/* ------------------------------------------------------------- leave one source out ---- */

/* The runs a fit simulates: every source's simulated runs but `skip`'s (NULL: none), at most
 * GS_FIT_PER_SOURCE of each, evenly spaced in file order (the fit weighs every source the same,
 * so a large table gains nothing from more rows but time). */
#define GS_FIT_PER_SOURCE 8
static void fit_sample(const validate_run *runs, size_t n, const char *skip, unsigned char *use)
{
    for (size_t i = 0; i < n; i++) {
        const char *src = source_of(&runs[i]);
        size_t count = 0, rank = 0;
        use[i] = 0;
        if (!runs[i].simulated || (skip && strcmp(src, skip) == 0))
            continue;
        for (size_t j = 0; j < n; j++)
            if (runs[j].simulated && strcmp(source_of(&runs[j]), src) == 0) {
                if (j < i)
                    rank++;
                count++;
            }
        size_t stride = (count + GS_FIT_PER_SOURCE - 1) / GS_FIT_PER_SOURCE;
        use[i] = rank % (stride ? stride : 1) == 0;
    }
}

/* Fits the constants on every source (fitted), then, for each source, on all the others and
 * records the held-out source's errors in holdout_error. Runs whose simulation failed stay out. */
static gs_status holdout_by_source(validate_run *runs, gs_fit_run *fr, size_t n, int progress, gs_fit_params *fitted,
                                   gs_error *err)
{
    gs_status rc = GS_OK;
    unsigned char *use = malloc(n ? n : 1), *done = calloc(n ? n : 1, 1);
    double loss;
    if (!use || !done) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    fit_sample(runs, n, NULL, use);
    if (progress)
        fprintf(stderr, "validate: fitting on every source\n");
    if ((rc = gs_fit_params_fit(fr, n, use, fitted, &loss, err)) != GS_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (done[i] || !runs[i].simulated)
            continue;
        const char *src = source_of(&runs[i]);
        gs_fit_params p;
        fit_sample(runs, n, src, use);
        if (progress)
            fprintf(stderr, "validate: fitting without %s\n", src);
        if ((rc = gs_fit_params_fit(fr, n, use, &p, &loss, err)) != GS_OK)
            goto out;
        for (size_t j = 0; j < n; j++)
            use[j] = runs[j].simulated && strcmp(source_of(&runs[j]), src) == 0;
        if ((rc = gs_fit_simulate(fr, n, use, &p, 0, NULL, err)) != GS_OK)
            goto out;
        for (size_t j = 0; j < n; j++)
            if (use[j]) {
                done[j] = 1;
                runs[j].holdout_ok = fr[j].ok;
                runs[j].holdout_error = fr[j].error;
            }
    }
out:
    free(use);
    free(done);
    return rc;
}

/* ----------------------------------------------------------------------- command ---- */

typedef struct validate_opts {
    int exact, json, csv, holdout, fit_only;
    const char *csv_file; /* --csv-file: the CSV also written there (NULL: not) */
} validate_opts;

static gs_status parse_opts(int argc, char **argv, validate_opts *o, gs_error *err)
{
    static const struct option opts[] = {
        {"exact", no_argument, NULL, 'e'}, {"json", no_argument, NULL, 'j'}, {"csv", no_argument, NULL, 'c'},
        {"holdout-by", required_argument, NULL, 'h'}, {"fit", no_argument, NULL, 'f'},
        {"csv-file", required_argument, NULL, 'F'}, {NULL, 0, NULL, 0},
    };
    int c;
    memset(o, 0, sizeof *o);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': o->exact = 1; break;
        case 'j': o->json = 1; break;
        case 'c': o->csv = 1; break;
        case 'f': o->fit_only = 1; break;
        case 'F': o->csv_file = optarg; break;
        case 'h':
            if (strcmp(optarg, "source") != 0)
                return gs_error_set(err, GS_ERR_INPUT, "--holdout-by: found '%s', expected source", optarg);
            o->holdout = 1;
            break;
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (optind >= argc)
        return gs_error_set(err, GS_ERR_INPUT, "missing directory or scenario file\nusage: %s", usage);
    return GS_OK;
}

/* Loads every scenario with an expect block into runs (calloc'ed, *nruns of them), all before any
 * simulation so that bad input stops the command first. The runs take the paths they use. */
static gs_status load_runs(validate_set *set, validate_run **out, size_t *nruns, gs_error *err)
{
    validate_run *runs = calloc(set->n ? set->n : 1, sizeof *runs);
    *out = runs;
    *nruns = 0;
    if (!runs)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < set->n; i++) {
        validate_run *r = &runs[*nruns];
        int present = 0;
        gs_status rc = gs_expect_load(set->paths[i], &r->e, &present, err);
        if (rc != GS_OK)
            return rc;
        if (!present) {
            if (set->explicit_file[i])
                return gs_error_set(err, GS_ERR_INPUT,
                                    "%s: no expect block: found a scenario without 'expect:', expected "
                                    "expect: {metric: ..., value: ..., formula: ..., source: ...}",
                                    set->paths[i]);
            continue;
        }
        if ((rc = gs_cli_load(set->paths[i], &r->s, &r->mesh, err)) != GS_OK)
            return rc;
        r->path = set->paths[i];
        set->paths[i] = NULL; /* the run owns it now */
        regime_of(r);
        (*nruns)++;
    }
    if (*nruns == 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "found no scenario with an expect: block in the arguments, expected at least one "
                            "(like scenarios/published)");
    return GS_OK;
}

/* Simulates every run under the compiled-in constants; *failed counts those that did not. */
static gs_status simulate_runs(validate_run *runs, gs_fit_run *fr, size_t n, int exact, size_t *failed, gs_error *err)
{
    char (*fail)[GS_ERROR_MSG_BYTES] = calloc(n, sizeof *fail);
    if (!fail)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        fr[i].s = &runs[i].s;
        fr[i].mesh = &runs[i].mesh;
        fr[i].e = &runs[i].e;
    }
    gs_status rc = gs_fit_simulate(fr, n, NULL, NULL, exact, fail, err);
    *failed = 0;
    for (size_t i = 0; rc == GS_OK && i < n; i++) {
        validate_run *r = &runs[i];
        if (!fr[i].ok) {
            snprintf(r->failure, sizeof r->failure, "%s", fail[i][0] ? fail[i] : "the metric came out 0");
            fprintf(stderr, "gridstep validate: %s: simulation failed: %s\n", r->path, r->failure);
            (*failed)++;
            continue;
        }
        r->predicted = fr[i].predicted;
        r->step_time_s = fr[i].step_time_s;
        r->error = fr[i].error;
        r->fits_memory = fr[i].fits_memory;
        r->simulated = 1;
    }
    free(fail);
    return rc;
}

/* --fit: the constants fitted on every source, reported on stderr; the table stays the
 * compiled-in one. */
static gs_status fit_all(const validate_run *runs, gs_fit_run *fr, size_t n, gs_fit_params *fitted, gs_error *err)
{
    unsigned char *use = malloc(n ? n : 1);
    double loss = 0.0;
    if (!use)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    fit_sample(runs, n, NULL, use);
    gs_status rc = gs_fit_params_fit(fr, n, use, fitted, &loss, err);
    free(use);
    if (rc == GS_OK)
        fprintf(stderr, "validate: fitted on every source: overlap_hbm_per_byte %.3f, gemm_sustained %.3f (mean over "
                        "sources of the mean squared log error %.5f)\n",
                fitted->overlap_hbm_per_byte, fitted->gemm_sustained, loss);
    return rc;
}

static gs_status print_json(const validate_run *runs, size_t n, const validate_summary *sum, int holdout,
                            const gs_fit_params *fitted, gs_error *err)
{
    json_t *doc = runs_json(runs, n, sum);
    if (!doc)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    gs_status rc = GS_OK;
    if (holdout) {
        validate_summary h;
        if ((rc = summarize(runs, n, NULL, 1, &h, err)) != GS_OK)
            goto out;
        json_t *f = json_object();
        json_object_set_new(f, "overlap_hbm_per_byte", json_real(fitted->overlap_hbm_per_byte));
        json_object_set_new(f, "gemm_sustained", json_real(fitted->gemm_sustained));
        json_object_set_new(doc, "fitted_on_all", f);
        json_object_set_new(doc, "holdout_median_abs_error", h.count ? json_real(h.median) : json_null());
        json_object_set_new(doc, "holdout_signed_mean_error", h.count ? json_real(h.signed_mean) : json_null());
    }
    rc = gs_cli_json_print(doc, err);
out:
    json_decref(doc);
    return rc;
}

static gs_status print_text(const validate_run *runs, size_t n, const validate_summary *sum, const validate_opts *o,
                            const gs_fit_params *fitted, gs_error *err)
{
    gs_status rc;
    if ((rc = print_table(runs, n, sum, o->exact, err)) != GS_OK || (rc = print_regimes(runs, n, o->holdout, err)) != GS_OK)
        return rc;
    if (o->holdout) {
        gs_fit_params d;
        gs_fit_params_defaults(&d);
        printf("\nfitted constants (sim/compute.c): on every source: overlap_hbm_per_byte %.3f, gemm_sustained "
               "%.3f; compiled in: %.3f, %.3f\n",
               fitted->overlap_hbm_per_byte, fitted->gemm_sustained, d.overlap_hbm_per_byte, d.gemm_sustained);
    }
    return GS_OK;
}

gs_status gs_cmd_validate(int argc, char **argv, gs_error *err)
{
    validate_opts o;
    gs_status rc = parse_opts(argc, argv, &o, err);
    if (rc != GS_OK)
        return rc;
    validate_set set = {NULL, 0, 0, NULL};
    validate_run *runs = NULL;
    size_t nruns = 0, failed = 0;
    int progress = isatty(STDERR_FILENO);
    gs_fit_run *fr = NULL;
    gs_fit_params fitted;
    gs_fit_params_defaults(&fitted);

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
    if ((rc = load_runs(&set, &runs, &nruns, err)) != GS_OK)
        goto out;
    if (!(fr = calloc(nruns, sizeof *fr))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (progress)
        fprintf(stderr, "validate: simulating %zu runs\n", nruns);
    if ((rc = simulate_runs(runs, fr, nruns, o.exact, &failed, err)) != GS_OK)
        goto out;
    if (o.holdout && (rc = holdout_by_source(runs, fr, nruns, progress, &fitted, err)) != GS_OK)
        goto out;
    if (o.fit_only && !o.holdout && (rc = fit_all(runs, fr, nruns, &fitted, err)) != GS_OK)
        goto out;

    validate_summary sum;
    if ((rc = summarize(runs, nruns, NULL, 0, &sum, err)) != GS_OK)
        goto out;
    if (o.csv_file) {
        FILE *f = fopen(o.csv_file, "w");
        if (!f) {
            rc = gs_error_set(err, GS_ERR_RUNTIME, "--csv-file %s: cannot write: %s", o.csv_file, strerror(errno));
            goto out;
        }
        print_csv(f, runs, nruns);
        if (fclose(f) != 0) {
            rc = gs_error_set(err, GS_ERR_RUNTIME, "--csv-file %s: write failed: %s", o.csv_file, strerror(errno));
            goto out;
        }
    }
    if (o.csv)
        print_csv(stdout, runs, nruns);
    else if ((rc = o.json ? print_json(runs, nruns, &sum, o.holdout, &fitted, err)
                          : print_text(runs, nruns, &sum, &o, &fitted, err)) != GS_OK)
        goto out;
    if (failed)
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%zu of %zu runs failed to simulate", failed, nruns);
out:
    free(fr);
    if (runs)
        for (size_t i = 0; i < nruns; i++)
            free(runs[i].path);
    free(runs);
    set_fini(&set);
    return rc;
}
