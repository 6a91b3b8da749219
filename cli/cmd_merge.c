/* `gridstep merge`: joins the --shard pieces of a sweep (CSV or JSON) or a plan (JSON) into the
 * output the serial run prints. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/merge.h"
#include "engine/input_file.h"
#include "cli/plot.h"

const char gs_cmd_merge_help[] =
    "Joins the pieces that `gridstep sweep --shard I/N` or `gridstep plan --shard I/N --json` wrote\n"
    "(one per shard, in any order) into one output on standard output (or --out FILE).\n"
    "\n"
    "sweep pieces (CSV or JSON): the rows of all pieces sorted by point index, under the serial\n"
    "run's header. The result is byte for byte what the serial sweep prints. Every shard 0..N-1\n"
    "must be given exactly once, with the same scenario, keys and point count; a missing or\n"
    "repeated point is an error.\n"
    "\n"
    "plan pieces (JSON): the candidates of all pieces ranked again (tokens/s, then memory\n"
    "headroom, then enumeration order, as the planner ranks), the best --top kept. Each shard\n"
    "simulated the configurations of its own bound groups and kept its own best --top, which holds\n"
    "every global top-K member of that shard, so the merged candidates equal the serial plan's.\n"
    "The counts of the checks every shard makes before memory (mesh, batch, model states) are the\n"
    "serial plan's; `simulated`, every entry of `pruned` and the ledger-peak entry of `rejected`\n"
    "count what each shard examined: each shard bounds against its own best, so the pieces together\n"
    "examine more configurations than one search would; merge reports their sums.\n"
    "\n"
    "options:\n"
    "  --out FILE   write the merged output to FILE\n"
    "  --plot FILE.png|FILE.svg  (JSON sweep pieces) the curves gridstep sweep --plot draws, from\n"
    "               the merged rows\n"
    "\n"
    "examples:\n"
    "  for i in 0 1 2; do gridstep sweep --vary gpus=8..64 --shard $i/3 --out p$i.csv scenarios/tiny-llama-2x2x2.yaml; done\n"
    "  gridstep merge p0.csv p1.csv p2.csv > sweep.csv\n"
    "  for i in 0 1; do gridstep plan scenarios/tiny-llama-2x2x2.yaml --json --shard $i/2 > plan$i.json; done\n"
    "  gridstep merge plan0.json plan1.json\n";

static const char usage[] = "gridstep merge [--out FILE] [--plot FILE.png|FILE.svg] PIECE...";

#define NOFIT_REASON "does not fit in GPU memory (ledger peak)"

static gs_status read_file(const char *path, char **out, size_t *len, gs_error *err)
{
    return gs_input_read(path, "piece", UINT64_C(1) << 30, out, len, err);
}

/* ---- CSV sweep pieces ----------------------------------------------------------------------- */

typedef struct csv_row {
    uint64_t point;
    const char *line; /* points into the piece's text, through its '\n' */
    size_t len;
} csv_row;

static int csv_row_cmp(const void *a, const void *b)
{
    const csv_row *x = a, *y = b;
    return x->point < y->point ? -1 : x->point > y->point;
}

static gs_status merge_csv(char **text, char *const *paths, size_t n, FILE *out, gs_error *err)
{
    uint64_t count = 0, points = 0, sweep_id = 0;
    const char *header = NULL;
    size_t header_len = 0, nrows = 0, cap = 0;
    csv_row *rows = NULL;
    unsigned char *seen_shard = NULL;
    gs_status rc = GS_OK;
    for (size_t i = 0; i < n; i++) {
        char *t = text[i];
        uint64_t si, sn, sp, id;
        int used = 0;
        if (sscanf(t, "# gridstep sweep shard %" SCNu64 "/%" SCNu64 " of %" SCNu64 " points, sweep %16" SCNx64 "%n",
                   &si, &sn, &sp, &id, &used) != 4 ||
            t[used] != '\n') {
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "%s: found no '# gridstep sweep shard I/N of P points, sweep ID' line, expected a piece "
                              "written by gridstep sweep --shard",
                              paths[i]);
            goto out;
        }
        if (i > 0 && id != sweep_id) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: sweep %016" PRIx64 ", not a piece of the same sweep as %s (sweep "
                              "%016" PRIx64 ": its scenario, mode or varied values differ)",
                              paths[i], id, paths[0], sweep_id);
            goto out;
        }
        if (i == 0) {
            sweep_id = id;
            count = sn;
            points = sp;
            if (!(seen_shard = calloc(count ? count : 1, 1))) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                goto out;
            }
        } else if (sn != count || sp != points) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: shard %" PRIu64 "/%" PRIu64 " of %" PRIu64
                                                 " points, expected a shard of %" PRIu64 " of %" PRIu64 " points (as %s)",
                              paths[i], si, sn, sp, count, points, paths[0]);
            goto out;
        }
        if (si >= sn || seen_shard[si]) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: shard %" PRIu64 "/%" PRIu64 " given twice", paths[i], si, sn);
            goto out;
        }
        seen_shard[si] = 1;
        const char *h = t + used + 1, *e = strchr(h, '\n');
        if (!e) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: no header line after the shard line", paths[i]);
            goto out;
        }
        size_t hl = (size_t)(e - h) + 1;
        if (!header) {
            header = h;
            header_len = hl;
        } else if (hl != header_len || memcmp(h, header, hl) != 0) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: its header differs from %s's (not the same sweep)", paths[i],
                              paths[0]);
            goto out;
        }
        for (const char *l = e + 1; *l;) {
            const char *le = strchr(l, '\n');
            size_t ll = le ? (size_t)(le - l) + 1 : strlen(l);
            char *end;
            errno = 0;
            uint64_t p = strtoull(l, &end, 10);
            if (end == l || *end != ',' || errno || p >= points) {
                rc = gs_error_set(err, GS_ERR_INPUT, "%s: found the row '%.40s', expected a point index below %" PRIu64,
                                  paths[i], l, points);
                goto out;
            }
            if (p % count != si) {
                rc = gs_error_set(err, GS_ERR_INPUT, "%s: point %" PRIu64 " does not belong to shard %" PRIu64 "/%" PRIu64,
                                  paths[i], p, si, count);
                goto out;
            }
            if (nrows == cap) {
                size_t c = cap ? 2 * cap : 256;
                csv_row *r = realloc(rows, c * sizeof *r);
                if (!r) {
                    rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                    goto out;
                }
                rows = r;
                cap = c;
            }
            rows[nrows].point = p;
            rows[nrows].line = l;
            rows[nrows++].len = ll;
            l += ll;
        }
    }
    for (uint64_t s = 0; s < count; s++)
        if (!seen_shard[s]) {
            rc = gs_error_set(err, GS_ERR_INPUT, "shard %" PRIu64 "/%" PRIu64 " is missing", s, count);
            goto out;
        }
    qsort(rows, nrows, sizeof *rows, csv_row_cmp);
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].point != i) {
            rc = gs_error_set(err, GS_ERR_INPUT, "point %zu is %s", i,
                              i < nrows && rows[i].point < i ? "given twice" : "missing");
            goto out;
        }
    if (nrows != points) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%zu rows, expected %" PRIu64 " points", nrows, points);
        goto out;
    }
    fwrite(header, 1, header_len, out);
    for (size_t i = 0; i < nrows; i++) {
        fwrite(rows[i].line, 1, rows[i].len, out);
        if (rows[i].line[rows[i].len - 1] != '\n')
            fputc('\n', out);
    }
out:
    free(rows);
    free(seen_shard);
    return rc;
}

/* ---- JSON pieces ------------------------------------------------------------------------------ */

typedef struct json_item {
    json_t *v;       /* borrowed */
    uint64_t order;  /* sweep: point; plan: enumeration key */
    double tokens_per_s; /* plan: exact, from the piece's "order" */
    double headroom;     /* plan: gpu_bytes - peak_bytes */
} json_item;

static int point_cmp(const void *a, const void *b)
{
    const json_item *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The planner's ranking (engine/plan.c rank_cmp). */
static int rank_cmp(const void *a, const void *b)
{
    const json_item *x = a, *y = b;
    if (x->tokens_per_s != y->tokens_per_s)
        return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    if (x->headroom != y->headroom)
        return x->headroom > y->headroom ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int pruned_cmp(const void *a, const void *b)
{
    const json_item *x = a, *y = b; /* order = count, v = the key as a string */
    if (x->order != y->order)
        return x->order > y->order ? -1 : 1;
    return strcmp(json_string_value(x->v), json_string_value(y->v));
}

static const char *str_or(json_t *v, const char *fallback)
{
    const char *s = json_string_value(v);
    return s ? s : fallback;
}

/* The curves of a merged JSON sweep: its axes rebuilt from "vary", its rows' numbers. */
static gs_status plot_sweep_doc(json_t *doc, const gs_plot *plot, gs_error *err)
{
    gs_sweep sw;
    gs_sweep_init(&sw);
    json_t *vary = json_object_get(doc, "vary"), *rows = json_object_get(doc, "rows");
    gs_status rc = GS_OK;
    for (size_t a = 0; a < json_array_size(vary) && rc == GS_OK; a++) {
        json_t *ax = json_array_get(vary, a), *vals = json_object_get(ax, "values");
        char arg[GS_SWEEP_MAX_VALUES * (GS_SWEEP_VALUE_BYTES + 1) + 64];
        size_t used = (size_t)snprintf(arg, sizeof arg, "%s=", str_or(json_object_get(ax, "key"), "?"));
        for (size_t i = 0; i < json_array_size(vals) && used < sizeof arg; i++) {
            json_t *v = json_array_get(vals, i);
            const char *sep = i ? "," : "";
            if (json_is_integer(v))
                used += (size_t)snprintf(arg + used, sizeof arg - used, "%s%" JSON_INTEGER_FORMAT, sep,
                                         json_integer_value(v));
            else if (json_is_real(v))
                used += (size_t)snprintf(arg + used, sizeof arg - used, "%s%.6g", sep, json_real_value(v));
            else
                used += (size_t)snprintf(arg + used, sizeof arg - used, "%s%s", sep, str_or(v, "?"));
        }
        rc = gs_sweep_add(&sw, arg, err);
    }
    if (rc != GS_OK)
        return rc;
    size_t n = json_array_size(rows);
    if (sw.naxes == 0 || n != gs_sweep_points(&sw))
        return gs_error_set(err, GS_ERR_INPUT, "--plot: the merged sweep's \"vary\" does not span its %zu rows", n);
    gs_plot_sweep_point *pts = calloc(n ? n : 1, sizeof *pts);
    if (!pts)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot");
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, i);
        const char *st = json_string_value(json_object_get(r, "status"));
        pts[i].point = i;
        pts[i].ran = st && strcmp(st, "ok") == 0;
        pts[i].tokens_per_s = json_number_value(json_object_get(r, "tokens_per_s"));
        pts[i].mfu = json_number_value(json_object_get(r, "mfu"));
        pts[i].step_time_s = json_number_value(json_object_get(r, "step_time_s"));
    }
    gs_plot_sweep_info info = {str_or(json_object_get(doc, "scenario"), "sweep"),
                               str_or(json_object_get(doc, "mode"), "analytic"),
                               json_string_value(json_object_get(doc, "held_fixed"))};
    rc = gs_plot_sweep(plot, &info, &sw, pts, n, err);
    free(pts);
    return rc;
}

/* json_equal, with two absent values equal (sweep pieces have no "top"). */
static int same_or_absent(json_t *a, json_t *b)
{
    return (!a && !b) || json_equal(a, b);
}

static gs_status merge_json(char **text, char *const *paths, size_t n, FILE *out, const gs_plot *plot,
                            gs_error *err)
{
    json_t **doc = calloc(n, sizeof *doc);
    json_item *items = NULL;
    unsigned char *seen = NULL;
    json_t *merged = NULL;
    size_t nitems = 0, cap = 0;
    gs_status rc = GS_OK;
    const char *command = NULL;
    json_int_t count = 0;
    if (!doc)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        if (!(doc[i] = json_loads(text[i], 0, &je))) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s:%d:%d: %s", paths[i], je.line, je.column, je.text);
            goto out;
        }
        json_t *sh = json_object_get(doc[i], "shard");
        const char *cmd = json_string_value(json_object_get(sh, "command"));
        json_t *ji = json_object_get(sh, "index"), *jn = json_object_get(sh, "count");
        if (!cmd || !json_is_integer(ji) || !json_is_integer(jn) || json_integer_value(jn) < 1 ||
            json_integer_value(ji) < 0 || json_integer_value(ji) >= json_integer_value(jn)) {
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "%s: found no \"shard\": {command, index, count}, expected a piece written with --shard",
                              paths[i]);
            goto out;
        }
        if (i == 0) {
            command = cmd;
            count = json_integer_value(jn);
            if (!(seen = calloc((size_t)count, 1))) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                goto out;
            }
        } else if (strcmp(cmd, command) != 0 || json_integer_value(jn) != count ||
                   !same_or_absent(json_object_get(sh, "top"), json_object_get(json_object_get(doc[0], "shard"), "top"))) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: a %s piece of %" JSON_INTEGER_FORMAT " shards, expected a %s piece of %"
                                                 JSON_INTEGER_FORMAT " with the same --top (as %s)",
                              paths[i], cmd, json_integer_value(jn), command, count, paths[0]);
            goto out;
        }
        json_int_t si = json_integer_value(ji);
        if (seen[si]) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: shard %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " given twice",
                              paths[i], si, count);
            goto out;
        }
        seen[si] = 1;
    }
    for (json_int_t s = 0; s < count; s++)
        if (!seen[s]) {
            rc = gs_error_set(err, GS_ERR_INPUT, "shard %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " is missing",
                              s, count);
            goto out;
        }
    int plan = strcmp(command, "plan") == 0;
    if (!plan && strcmp(command, "sweep") != 0) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%s: a '%s' piece, expected sweep or plan", paths[0], command);
        goto out;
    }
    const char *list = plan ? "candidates" : "rows";
    /* the rest of every piece must be the same document */
    merged = json_deep_copy(doc[0]);
    json_object_del(merged, "shard");
    json_t *ref = json_deep_copy(merged);
    json_object_del(ref, list);
    if (plan) {
        json_object_del(ref, "simulated");
        json_object_del(ref, "pruned");
        json_object_del(json_object_get(ref, "rejected"), NOFIT_REASON);
    }
    for (size_t i = 0; i < n && rc == GS_OK; i++) {
        json_t *d = json_deep_copy(doc[i]);
        json_object_del(d, "shard");
        json_object_del(d, list);
        if (plan) {
            json_object_del(d, "simulated");
            json_object_del(d, "pruned");
            json_object_del(json_object_get(d, "rejected"), NOFIT_REASON);
        }
        if (!json_equal(d, ref))
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: not a piece of the same %s as %s (its other fields differ)",
                              paths[i], command, paths[0]);
        json_decref(d);
        json_t *arr = json_object_get(doc[i], list);
        if (rc == GS_OK && !json_is_array(arr))
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: no \"%s\" array", paths[i], list);
        for (size_t k = 0; rc == GS_OK && k < json_array_size(arr); k++) {
            json_t *v = json_array_get(arr, k);
            if (nitems == cap) {
                size_t c = cap ? 2 * cap : 256;
                json_item *t = realloc(items, c * sizeof *t);
                if (!t) {
                    rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                    break;
                }
                items = t;
                cap = c;
            }
            json_item *it = &items[nitems++];
            memset(it, 0, sizeof *it);
            it->v = v;
            if (plan) {
                json_t *o = json_object_get(v, "order");
                const char *tps = json_string_value(json_object_get(o, "tokens_per_s"));
                json_t *key = json_object_get(o, "key");
                if (!tps || !json_is_integer(key)) {
                    rc = gs_error_set(err, GS_ERR_INPUT, "%s: a candidate without its \"order\" {tokens_per_s, key}",
                                      paths[i]);
                    break;
                }
                it->tokens_per_s = strtod(tps, NULL);
                it->order = (uint64_t)json_integer_value(key);
                it->headroom = (double)json_integer_value(json_object_get(v, "gpu_bytes")) -
                               (double)json_integer_value(json_object_get(v, "peak_bytes"));
            } else {
                json_t *p = json_object_get(v, "point");
                if (!json_is_integer(p)) {
                    rc = gs_error_set(err, GS_ERR_INPUT, "%s: a row without its \"point\"", paths[i]);
                    break;
                }
                it->order = (uint64_t)json_integer_value(p);
                if (it->order % (uint64_t)count != (uint64_t)json_integer_value(json_object_get(json_object_get(doc[i], "shard"), "index")))
                    rc = gs_error_set(err, GS_ERR_INPUT, "%s: point %" PRIu64 " does not belong to this shard", paths[i],
                                      it->order);
            }
        }
    }
    json_decref(ref);
    if (rc != GS_OK)
        goto out;
    json_t *arr = json_array();
    if (plan) {
        qsort(items, nitems, sizeof *items, rank_cmp);
        json_int_t top = json_integer_value(json_object_get(json_object_get(doc[0], "shard"), "top"));
        for (size_t k = 0; k < nitems && (json_int_t)k < top; k++) {
            json_t *c = json_deep_copy(items[k].v);
            json_object_del(c, "order");
            json_array_append_new(arr, c);
        }
        /* simulated, every pruned entry and the ledger-peak rejections: the sums, re-sorted */
        json_int_t sim = 0, nofit = 0;
        json_t *sums = json_object(), *npr = json_object();
        for (size_t i = 0; i < n; i++) {
            const char *k;
            json_t *v;
            sim += json_integer_value(json_object_get(doc[i], "simulated"));
            nofit += json_integer_value(json_object_get(json_object_get(doc[i], "rejected"), NOFIT_REASON));
            json_object_foreach(json_object_get(doc[i], "pruned"), k, v) {
                json_int_t had = json_integer_value(json_object_get(sums, k));
                json_object_set_new(sums, k, json_integer(had + json_integer_value(v)));
            }
        }
        json_object_set_new(merged, "simulated", json_integer(sim));
        if (nofit) /* in place: the other entries keep the serial order */
            json_object_set_new(json_object_get(merged, "rejected"), NOFIT_REASON, json_integer(nofit));
        json_item pv[64];
        size_t np = 0;
        const char *k;
        json_t *v;
        json_object_foreach(sums, k, v) {
            if (np == 64)
                break;
            pv[np].v = json_string(k);
            pv[np].order = (uint64_t)json_integer_value(v);
            np++;
        }
        json_decref(sums);
        qsort(pv, np, sizeof *pv, pruned_cmp);
        for (size_t i = 0; i < np; i++) {
            json_object_set_new(npr, json_string_value(pv[i].v), json_integer((json_int_t)pv[i].order));
            json_decref(pv[i].v);
        }
        json_object_set_new(merged, "pruned", npr);
    } else {
        qsort(items, nitems, sizeof *items, point_cmp);
        json_int_t points = json_integer_value(json_object_get(merged, "points"));
        for (size_t k = 0; k < nitems; k++) {
            if (items[k].order != k) {
                rc = gs_error_set(err, GS_ERR_INPUT, "point %zu is %s", k,
                                  items[k].order < k ? "given twice" : "missing");
                json_decref(arr);
                goto out;
            }
            json_array_append(arr, items[k].v);
        }
        if ((json_int_t)nitems != points) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%zu rows, expected %" JSON_INTEGER_FORMAT " points", nitems,
                              points);
            json_decref(arr);
            goto out;
        }
    }
    json_object_set_new(merged, list, arr);
    rc = gs_cli_json_fprint(out, merged, err);
    if (rc == GS_OK && plot) {
        if (plan)
            rc = gs_error_set(err, GS_ERR_INPUT, "--plot: plan pieces have no curves (it plots sweep pieces)");
        else
            rc = plot_sweep_doc(merged, plot, err);
    }
out:
    json_decref(merged);
    for (size_t i = 0; i < n; i++)
        json_decref(doc[i]);
    free(doc);
    free(items);
    free(seen);
    return rc;
}

/* CSV or JSON by the first piece; mixed pieces are refused. */
static gs_status merge_any(char **text, char *const *names, size_t n, FILE *out, const gs_plot *plot,
                           gs_error *err)
{
    int json = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = text[i] + strspn(text[i], " \t\r\n");
        int is_json = *p == '{';
        if (i == 0)
            json = is_json;
        else if (is_json != json)
            return gs_error_set(err, GS_ERR_INPUT, "%s: a %s piece, expected %s like %s", names[i],
                                is_json ? "JSON" : "CSV", json ? "JSON" : "CSV", names[0]);
    }
    if (plot && !json)
        return gs_error_set(err, GS_ERR_INPUT, "--plot needs JSON sweep pieces (gridstep sweep --json --shard I/N)");
    return json ? merge_json(text, names, n, out, plot, err) : merge_csv(text, names, n, out, err);
}

gs_status gs_merge_pieces(char **text, char *const *names, size_t n, FILE *out, gs_error *err)
{
    if (n == 0)
        return gs_error_set(err, GS_ERR_INPUT, "no pieces to merge");
    return merge_any(text, names, n, out, NULL, err);
}

gs_status gs_cmd_merge(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"plot", required_argument, NULL, 'p'}, {NULL, 0, NULL, 0}};
    const char *out_path = NULL;
    gs_plot plot;
    int c, plotting = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'o') {
            out_path = optarg;
        } else if (c == 'p') {
            gs_status prc = gs_plot_init(&plot, "--plot", optarg, err);
            if (prc != GS_OK)
                return prc;
            plotting = 1;
        } else {
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    size_t n = (size_t)(argc - optind);
    if (n == 0)
        return gs_error_set(err, GS_ERR_INPUT, "merge needs the pieces to join\nusage: %s", usage);
    char **text = calloc(n, sizeof *text);
    FILE *out = stdout;
    gs_status rc = GS_OK;
    if (!text)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == GS_OK; i++) {
        size_t len;
        rc = read_file(argv[optind + (int)i], &text[i], &len, err);
    }
    if (rc != GS_OK)
        goto out;
    if (out_path && !(out = fopen(out_path, "w"))) {
        out = stdout;
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
        goto out;
    }
    rc = merge_any(text, argv + optind, n, out, plotting ? &plot : NULL, err);
    if (out != stdout) {
        int bad = ferror(out);
        if (fclose(out) != 0 || bad)
            if (rc == GS_OK)
                rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
        out = stdout;
    }
out:
    if (out != stdout)
        fclose(out);
    for (size_t i = 0; i < n; i++)
        free(text[i]);
    free(text);
    return rc;
}
