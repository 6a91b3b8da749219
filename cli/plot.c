/* Plots through gnuplot: paths, terminal, quoting, and the gnuplot process (popen). */
#include "cli/plot.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

gs_status gs_plot_init(gs_plot *p, const char *opt, const char *image, gs_error *err)
{
    memset(p, 0, sizeof *p);
    const char *dot = strrchr(image, '.');
    const char *slash = strrchr(image, '/');
    if (dot && slash && dot < slash)
        dot = NULL;
    if (!dot || dot == image || (slash && dot == slash + 1) ||
        (strcasecmp(dot, ".png") != 0 && strcasecmp(dot, ".svg") != 0))
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a FILE.png or FILE.svg", opt, image);
    size_t n = strlen(image);
    if (n + 8 >= GS_PLOT_PATH_BYTES)
        return gs_error_set(err, GS_ERR_INPUT, "%s: the path '%.40s...' is too long", opt, image);
    p->format = strcasecmp(dot, ".svg") == 0 ? GS_PLOT_SVG : GS_PLOT_PNG;
    snprintf(p->image, sizeof p->image, "%s", image);
    snprintf(p->base, sizeof p->base, "%.*s", (int)(dot - image), image);
    if (snprintf(p->script, sizeof p->script, "%s.gp", p->base) >= (int)sizeof p->script)
        return gs_error_set(err, GS_ERR_INPUT, "%s: the path '%.40s...' is too long", opt, image);
    return GS_OK;
}

gs_status gs_plot_open_data(const gs_plot *p, const char *suffix, char *path, FILE **out, gs_error *err)
{
    if (snprintf(path, GS_PLOT_PATH_BYTES, "%s%s.dat", p->base, suffix) >= GS_PLOT_PATH_BYTES)
        return gs_error_set(err, GS_ERR_INPUT, "%s%s.dat: path too long", p->base, suffix);
    if (!(*out = fopen(path, "w")))
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return GS_OK;
}

gs_status gs_plot_close_data(FILE *f, const char *path, gs_error *err)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return GS_OK;
}

const char *gs_plot_quote(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    if (len < 3) {
        if (len)
            buf[0] = '\0';
        return buf;
    }
    buf[o++] = '\'';
    for (; *s && o + 3 < len; s++) {
        if (*s == '\'')
            buf[o++] = '\'';
        buf[o++] = *s;
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

/* Writes text as a gnuplot string expression broken into lines of about `width` characters after
 * its ", " separators: 'first part,'."\n".'second part' (a title that fits the 1200-pixel image). */
static void put_wrapped(FILE *s, const char *text, size_t width)
{
    char line[640], q[1300];
    size_t n = 0, first = 1;
    const char *p = text;
    while (*p) {
        const char *sep = strstr(p, ", ");
        size_t piece = sep ? (size_t)(sep - p) + 1 : strlen(p); /* through the comma */
        if (n && n + piece > width) {
            fprintf(s, "%s%s", first ? "" : ".\"\\n\".", gs_plot_quote(line, q, sizeof q));
            first = 0;
            n = 0;
            if (*p == ' ')
                p++, piece--;
        }
        if (n + piece >= sizeof line)
            piece = sizeof line - 1 - n;
        memcpy(line + n, p, piece);
        n += piece;
        line[n] = '\0';
        p += piece;
        if (!piece)
            break;
    }
    if (n || first)
        fprintf(s, "%s%s", first ? "" : ".\"\\n\".", gs_plot_quote(n ? line : "", q, sizeof q));
}

/* 1 when an executable `gnuplot` is in one of PATH's directories. */
static int gnuplot_in_path(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return 0;
    char dir[4096];
    for (const char *p = path;;) {
        size_t l = strcspn(p, ":");
        if (l + 10 < sizeof dir) {
            if (l == 0)
                snprintf(dir, sizeof dir, "./gnuplot");
            else
                snprintf(dir, sizeof dir, "%.*s/gnuplot", (int)l, p);
            if (access(dir, X_OK) == 0)
                return 1;
        }
        if (!p[l])
            return 0;
        p += l + 1;
    }
}

gs_status gs_plot_run(const gs_plot *p, const char *data_paths, const char *body, gs_error *err)
{
    char q[2 * GS_PLOT_PATH_BYTES + 4];
    FILE *gp = fopen(p->script, "w");
    if (!gp)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", p->script, strerror(errno));
    fprintf(gp, "# gridstep plot: run `gnuplot %s` to redraw %s\n", p->script, p->image);
    if (p->format == GS_PLOT_SVG)
        fprintf(gp, "set terminal svg size 1200,800 dynamic noenhanced font 'Sans,12' background rgb 'white'\n");
    else
        fprintf(gp, "set terminal pngcairo size 1200,800 noenhanced font 'Sans,12' background rgb 'white'\n");
    fprintf(gp, "set output %s\n", gs_plot_quote(p->image, q, sizeof q));
    fputs(body, gp);
    fprintf(gp, "unset output\n");
    int bad = ferror(gp);
    if (fclose(gp) != 0 || bad)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", p->script, strerror(errno));
    if (!gnuplot_in_path())
        return gs_error_set(err, GS_ERR_RUNTIME,
                            "gnuplot not found in PATH; data written to %s and %s, run `gnuplot %s`", data_paths,
                            p->script, p->script);
    fflush(stdout);
    fflush(stderr);
    FILE *pipe = popen("gnuplot", "w");
    if (!pipe)
        return gs_error_set(err, GS_ERR_RUNTIME, "cannot start gnuplot: %s; data written to %s and %s", strerror(errno),
                            data_paths, p->script);
    fprintf(pipe, "load %s\n", gs_plot_quote(p->script, q, sizeof q));
    int st = pclose(pipe);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return gs_error_set(err, GS_ERR_RUNTIME, "gnuplot failed on %s (exit status %d); data written to %s",
                            p->script, st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                            data_paths);
    return GS_OK;
}

/* ---- sweep: throughput and MFU curves ---------------------------------------------------------- */

static int values_numeric_wide(const gs_sweep_axis *ax)
{
    if (!gs_sweep_key_is_number(ax->key) || ax->key == GS_SWEEP_OFFLOAD)
        return 0;
    if (gs_sweep_key_is_scale(ax->key))
        return 1;
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < ax->n; i++) {
        double v = strtod(ax->values[i], NULL);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    return lo > 0 && hi >= 8 * lo;
}

static const char *key_axis_label(gs_sweep_key k)
{
    switch (k) {
    case GS_SWEEP_GPUS: return "GPUs";
    case GS_SWEEP_NODES: return "nodes";
    case GS_SWEEP_NIC: return "NIC";
    case GS_SWEEP_NIC_GBPS: return "NIC line rate (Gb/s)";
    case GS_SWEEP_FABRIC: return "intra-node fabric";
    case GS_SWEEP_GLOBAL_BATCH: return "global batch (sequences per step)";
    case GS_SWEEP_MICRO: return "micro-batch (sequences)";
    case GS_SWEEP_SEQ: return "sequence length (tokens)";
    case GS_SWEEP_TP: return "tensor-parallel degree tp";
    case GS_SWEEP_PP: return "pipeline-parallel degree pp";
    case GS_SWEEP_DP: return "data-parallel degree dp";
    case GS_SWEEP_SHARDING: return "sharding strategy";
    case GS_SWEEP_RECOMPUTE: return "activation recompute";
    case GS_SWEEP_PIPELINE: return "pipeline schedule";
    case GS_SWEEP_OFFLOAD: return "CPU offload";
    default: return "?";
    }
}

/* The legend title of line `line` (a combination of the keys after the first). */
static void line_title(const char *name, const gs_sweep *sw, uint64_t line, char *t, size_t len)
{
    size_t idx[GS_SWEEP_MAX_AXES], used = 0;
    gs_sweep_point_indices(sw, line, idx); /* point `line` has x index 0 and this line's others */
    t[0] = '\0';
    for (size_t a = 1; a < sw->naxes && used < len; a++)
        used += (size_t)snprintf(t + used, len - used, "%s%s=%s", a > 1 ? ", " : "", gs_sweep_key_name(sw->axes[a].key),
                                 sw->axes[a].values[idx[a]]);
    if (sw->naxes == 1)
        snprintf(t, len, "%s", name);
}

/* One panel's plot command: a line per data block, y given as a gnuplot using-column. */
static void plot_command(FILE *s, const char *name, const gs_sweep *sw, const long *block_of, uint64_t lines,
                         const char *dat, int numeric, const char *ycol)
{
    char q[2 * GS_PLOT_PATH_BYTES + 4], t[512], lt[560], qt[1200];
    gs_plot_quote(dat, q, sizeof q);
    for (uint64_t line = 0; line < lines; line++) {
        line_title(name, sw, line, t, sizeof t);
        fputs(line ? ", \\\n     " : "plot ", s);
        if (block_of[line] >= 0) {
            fprintf(s, "%s index %ld using %s:%s with linespoints lw 2 pt 7 ps 1.2 title %s", q, block_of[line],
                    numeric ? "2" : "1", ycol, gs_plot_quote(t, qt, sizeof qt));
        } else { /* a legend entry saying so, no line */
            snprintf(lt, sizeof lt, "%s (no point ran)", t);
            fprintf(s, "NaN title %s", gs_plot_quote(lt, qt, sizeof qt));
        }
    }
    fputc('\n', s);
}

/* FILE.dat: one block per combination of the other keys that has a point that ran (blocks
 * separated by two blank lines, gnuplot's `index`), rows "x_index x tokens_per_s mfu step_time_s";
 * FILE.gp: tokens/s over MFU, sharing x. rows[p] is point p. */
gs_status gs_plot_sweep(const gs_plot *plot, const gs_plot_sweep_info *info, const gs_sweep *sw,
                        const gs_plot_sweep_point *rows, size_t nrows, gs_error *err)
{
    char dat[GS_PLOT_PATH_BYTES], t[512], qt[1200], t2[600];
    const char *name = info->name;
    const gs_sweep_axis *x = &sw->axes[0];
    uint64_t per_line = x->n, lines = gs_sweep_points(sw) / per_line;
    int numeric = gs_sweep_key_is_number(x->key), wide = values_numeric_wide(x);
    FILE *f = NULL, *s = NULL;
    char *script = NULL;
    size_t slen = 0;
    long *block_of = calloc(lines, sizeof *block_of);
    gs_status rc = GS_OK;
    if (!block_of)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot");
    if ((rc = gs_plot_open_data(plot, "", dat, &f, err)) != GS_OK)
        goto out;
    fprintf(f, "# gridstep sweep of %s: x = %s; one block per combination of the other keys\n", name,
            gs_sweep_key_name(x->key));
    fprintf(f, "# columns: x_index x tokens_per_s mfu step_time_s (points that did not run are left out)\n");
    long block = 0;
    for (uint64_t line = 0; line < lines; line++) {
        block_of[line] = -1;
        for (uint64_t xi = 0; xi < per_line; xi++) {
            uint64_t p = xi * lines + line; /* x varies slowest */
            if (p >= nrows || rows[p].point != p || !rows[p].ran)
                continue;
            if (block_of[line] < 0) {
                line_title(name, sw, line, t, sizeof t);
                fprintf(f, "%s# %s\n", block ? "\n\n" : "", t);
                block_of[line] = block++;
            }
            fprintf(f, "%" PRIu64 " %s %.9g %.9g %.9g\n", xi, numeric ? x->values[xi] : "0", rows[p].tokens_per_s,
                    rows[p].mfu, rows[p].step_time_s);
        }
    }
    rc = gs_plot_close_data(f, dat, err);
    f = NULL;
    if (rc != GS_OK)
        goto out;

    if (!(s = open_memstream(&script, &slen))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
        goto out;
    }
    snprintf(t, sizeof t, "%s: throughput and MFU against %s (simulated, %s mode)", name,
             gs_sweep_key_name(x->key), info->mode);
    snprintf(t2, sizeof t2, "held fixed: %s", info->fixed && info->fixed[0] ? info->fixed : "the rest of the scenario");
    fprintf(s, "set multiplot layout 2,1 title %s.\"\\n\".", gs_plot_quote(t, qt, sizeof qt));
    put_wrapped(s, t2, 110);
    fprintf(s, " font 'Sans,13'\n");
    fprintf(s, "set grid\nset key outside right top box opaque width 2\nset border lw 1.5\nset lmargin 12\n");
    fprintf(s, "set xlabel %s\n", gs_plot_quote(key_axis_label(x->key), qt, sizeof qt));
    fprintf(s, "set xtics (");
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < x->n; i++) {
        double v = numeric ? strtod(x->values[i], NULL) : (double)i;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        fprintf(s, "%s\"%s\" %.9g", i ? ", " : "", x->values[i], v);
    }
    fprintf(s, ")\n");
    if (wide)
        fprintf(s, "set logscale x 2\nset xrange [%.9g:%.9g]\n", lo / 1.2, hi * 1.2);
    else if (numeric && hi > lo)
        fprintf(s, "set xrange [%.9g:%.9g]\n", lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
    else
        fprintf(s, "set xrange [%.9g:%.9g]\n", lo - 0.5, hi + 0.5);
    fprintf(s, "set ylabel 'throughput (tokens/s, whole job)'\nset format y '%%.1s%%c'\nset yrange [0:*]\n");
    plot_command(s, name, sw, block_of, lines, dat, numeric, "3");
    fprintf(s, "set ylabel 'MFU (%% of peak FLOP/s)'\nset format y '%%g'\nset yrange [0:*]\n");
    plot_command(s, name, sw, block_of, lines, dat, numeric, "($4*100)");
    fprintf(s, "unset multiplot\n");
    if (fclose(s) != 0 || !script) {
        s = NULL;
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
        goto out;
    }
    s = NULL;
    rc = gs_plot_run(plot, dat, script, err);
out:
    if (f)
        fclose(f);
    if (s)
        fclose(s);
    free(script);
    free(block_of);
    return rc;
}

/* ---- mem: stacked bars per stage ------------------------------------------------------------ */

gs_status gs_plot_mem(const gs_plot *p, const gs_scenario *s, const gs_ledger *l, gs_error *err)
{
    char dat[GS_PLOT_PATH_BYTES], q[2 * GS_PLOT_PATH_BYTES + 4], t[400], qt[820];
    FILE *f = NULL;
    char *body = NULL;
    size_t blen = 0;
    gs_status rc = gs_plot_open_data(p, "", dat, &f, err);
    if (rc != GS_OK)
        return rc;
    fprintf(f, "# gridstep mem of %s: bytes per rank of each pipeline stage's ranks\n", s->name);
    fprintf(f, "# stage first_rank params master optimizer grads activations buffers total\n");
    uint64_t top = l->gpu_bytes;
    for (size_t i = 0; i < l->nranks; i++) {
        const gs_ledger_rank *r = &l->ranks[i];
        const uint64_t *m = r->mem;
        fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                   " %" PRIu64 "\n",
                r->stage, r->first_rank, m[GS_MEM_PARAMS], m[GS_MEM_MASTER], m[GS_MEM_ADAM_M] + m[GS_MEM_ADAM_V],
                m[GS_MEM_GRADS], m[GS_MEM_ACTIVATIONS] + m[GS_MEM_PIPE_INFLIGHT], m[GS_MEM_GATHER] + m[GS_MEM_WORKSPACE],
                r->peak_bytes);
        if (r->peak_bytes > top)
            top = r->peak_bytes;
    }
    if ((rc = gs_plot_close_data(f, dat, err)) != GS_OK)
        return rc;
    FILE *b = open_memstream(&body, &blen);
    if (!b)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    double cap = (double)l->gpu_bytes / 1e9; /* GB, as gridstep mem prints */
    char t2[200], qt2[420];
    snprintf(t, sizeof t, "%s: memory per rank by pipeline stage, grid " GS_GRID_FMT ", %s", s->name, s->grid.dp,
             s->grid.pp, s->grid.tp, gs_sharding_name(s->strategy.sharding));
    snprintf(t2, sizeof t2, "peak %.2f GB per rank, GPU memory %.2f GB", (double)l->peak_bytes / 1e9, cap);
    fprintf(b, "set title %s.\"\\n\".%s font 'Sans,14'\n", gs_plot_quote(t, qt, sizeof qt), gs_plot_quote(t2, qt2, sizeof qt2));
    fprintf(b, "set style data histograms\nset style histogram rowstacked\nset boxwidth 0.6 relative\n");
    fprintf(b, "set style fill solid 0.9 border rgb 'black'\nset grid ytics\nset key outside right top box\n");
    fprintf(b, "set ylabel 'GB per rank (1 GB = 10^9 bytes)'\n"
               "set xlabel 'pipeline stage (its ranks hold the same bytes)' offset 0,-1\nset bmargin 6\n");
    fprintf(b, "set yrange [0:%.6g]\n", (double)top / 1e9 * 1.12);
    fprintf(b, "set arrow 1 from graph 0, first %.6g to graph 1, first %.6g nohead lc rgb '#d62728' lw 3 dt 2 front\n",
            cap, cap);
    fprintf(b, "set label 1 'GPU memory %.2f GB' at graph 0.01, first %.6g offset 0,0.7 tc rgb '#d62728' front\n", cap,
            cap);
    static const char *const names[] = {"params", "master (fp32)", "optimizer (Adam m, v)", "grads",
                                        "activations", "buffers (gathers, workspace)"};
    static const char *const colors[] = {"#4e79a7", "#a0cbe8", "#f28e2b", "#59a14f", "#e15759", "#b07aa1"};
    gs_plot_quote(dat, q, sizeof q);
    for (int c = 0; c < 6; c++)
        fprintf(b, "%s%s using ($%d/1e9)%s title '%s' lc rgb '%s'", c ? ", \\\n     " : "plot ", q, c + 3,
                c == 0 ? ":xtic(sprintf(\"stage %d\\nranks like %d\", $1, $2))" : "", names[c], colors[c]);
    fprintf(b, "\n");
    fclose(b);
    if (!body)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    rc = gs_plot_run(p, dat, body, err);
    free(body);
    return rc;
}

/* ---- sim: the step's timeline ------------------------------------------------------------------ */

enum { KIND_FWD, KIND_BWD, KIND_RECOMPUTE, KIND_OPTIM, KIND_DP, KIND_TP, KIND_PP, KIND_COPY, KIND_COUNT };

static int event_plot_kind(const gs_event *e)
{
    switch (e->stream) {
    case GS_STREAM_DP: return KIND_DP;
    case GS_STREAM_TP: return KIND_TP;
    case GS_STREAM_PP: return KIND_PP;
    case GS_STREAM_COPY: return KIND_COPY;
    default: break;
    }
    switch (e->phase) {
    case GS_PHASE_BWD: return KIND_BWD;
    case GS_PHASE_RECOMPUTE: return KIND_RECOMPUTE;
    case GS_PHASE_OPTIM: return KIND_OPTIM;
    default: return KIND_FWD;
    }
}

/* The timeline's second title line: which ranks it shows, with their (dp, pp, tp) coordinates,
 * out of how many, on which grid. */
static void timeline_ranks_text(const gs_scenario *s, const gs_schedule *sch, const size_t *lists, size_t nlists,
                                char *t, size_t len)
{
    size_t used = (size_t)snprintf(t, len, "ranks shown (of %" PRIu64 ", grid " GS_GRID_FMT "):", sch->mesh.world,
                                   s->grid.dp, s->grid.pp, s->grid.tp);
    for (size_t i = 0; i < nlists && used < len; i++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(&sch->mesh, sch->ranks[lists[i]].rank, c);
        used += (size_t)snprintf(t + used, len - used, "%s %" PRIu64 " (dp %" PRIu64 " pp %" PRIu64 " tp %" PRIu64 ")",
                                 i ? "," : "", sch->ranks[lists[i]].rank, c[GS_DIM_DP], c[GS_DIM_PP], c[GS_DIM_TP]);
    }
}

gs_status gs_plot_timeline(const gs_plot *p, const gs_scenario *s, const gs_schedule *sch, gs_timing *const *timing,
                           const size_t *lists, size_t nlists, double step_s, gs_error *err)
{
    static const char *const names[KIND_COUNT] = {"forward",        "backward",       "recompute",
                                                  "optimizer",      "DP/FSDP collective", "TP collective",
                                                  "PP send/recv",   "host copy"};
    static const char *const colors[KIND_COUNT] = {"#4e79a7", "#59a14f", "#f28e2b", "#b07aa1",
                                                   "#e15759", "#edc948", "#76b7b2", "#9c755f"};
    char dat[GS_PLOT_PATH_BYTES], q[2 * GS_PLOT_PATH_BYTES + 4], t[400], qt[820];
    FILE *f = NULL, *b = NULL;
    char *body = NULL;
    size_t blen = 0;
    gs_status rc = GS_OK;
    /* rows: (list, stream) pairs with at least one event */
    int row_of[64][GS_STREAM_COUNT];
    size_t nrows = 0;
    int has[KIND_COUNT] = {0};
    double scale = step_s < 1.0 ? 1e3 : 1.0;
    const char *unit = step_s < 1.0 ? "ms" : "s";
    if (nlists > 64)
        nlists = 64;
    for (size_t i = 0; i < nlists; i++) {
        const gs_rank_events *r = &sch->ranks[lists[i]];
        int used[GS_STREAM_COUNT] = {0};
        for (size_t e = 0; e < r->nevents; e++) {
            used[r->events[e].stream] = 1;
            has[event_plot_kind(&r->events[e])] = 1;
        }
        for (int st = 0; st < GS_STREAM_COUNT; st++)
            row_of[i][st] = used[st] ? (int)nrows++ : -1;
    }
    if ((rc = gs_plot_open_data(p, "", dat, &f, err)) != GS_OK)
        return rc;
    fprintf(f, "# gridstep sim timeline of %s: one block per event kind, rows: start end row (%s); events of a kind\n"
               "# on a row less than 1/4000 of the step apart are joined\n",
            s->name, unit);
    int block = 0, block_of[KIND_COUNT];
    for (int k = 0; k < KIND_COUNT; k++) {
        block_of[k] = -1;
        if (!has[k])
            continue;
        block_of[k] = block;
        fprintf(f, "%s# %s\n", block ? "\n\n" : "", names[k]);
        block++;
        /* per row, events of this kind closer than 1/4000 of the step (under a pixel) are
         * drawn as one box: the picture is the same, gnuplot draws far fewer boxes */
        double join_s = step_s / 4000.0;
        for (size_t i = 0; i < nlists; i++) {
            const gs_rank_events *r = &sch->ranks[lists[i]];
            for (int st = 0; st < GS_STREAM_COUNT; st++) {
                double b0 = 0, b1 = -1;
                for (size_t e = 0; e < r->nevents; e++) {
                    const gs_event *ev = &r->events[e];
                    if (ev->stream != st || event_plot_kind(ev) != k)
                        continue;
                    const gs_timing *tm = &timing[lists[i]][e];
                    if (b1 >= b0 && tm->start_s >= b0 && tm->start_s - b1 <= join_s) {
                        b1 = tm->end_s > b1 ? tm->end_s : b1;
                        continue;
                    }
                    if (b1 >= b0)
                        fprintf(f, "%.9g %.9g %d\n", b0 * scale, b1 * scale, row_of[i][st]);
                    b0 = tm->start_s;
                    b1 = tm->end_s;
                }
                if (b1 >= b0)
                    fprintf(f, "%.9g %.9g %d\n", b0 * scale, b1 * scale, row_of[i][st]);
            }
        }
    }
    if ((rc = gs_plot_close_data(f, dat, err)) != GS_OK)
        return rc;
    if (!(b = open_memstream(&body, &blen)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    snprintf(t, sizeof t, "%s: one training step (%.4g %s), one row per rank and stream", s->name, step_s * scale, unit);
    char t2[600];
    timeline_ranks_text(s, sch, lists, nlists, t2, sizeof t2);
    fprintf(b, "set title %s.\"\\n\".", gs_plot_quote(t, qt, sizeof qt));
    put_wrapped(b, t2, 110);
    fprintf(b, " font 'Sans,13'\n");
    fprintf(b, "set xlabel 'time in the step (%s)'\nset xrange [0:%.9g]\n", unit, step_s * scale * 1.001);
    fprintf(b, "set yrange [%zu.6:-0.6]\nset ytics (", nrows ? nrows - 1 : 0);
    int first = 1;
    for (size_t i = 0; i < nlists; i++)
        for (int st = 0; st < GS_STREAM_COUNT; st++)
            if (row_of[i][st] >= 0) {
                fprintf(b, "%s\"rank %" PRIu64 " %s\" %d", first ? "" : ", ", sch->ranks[lists[i]].rank,
                        gs_stream_name((gs_stream)st), row_of[i][st]);
                first = 0;
            }
    fprintf(b, ")\nset ytics nomirror scale 0\nset grid xtics\nset border lw 1.2\n");
    fprintf(b, "set key outside bottom center horizontal box\nset bmargin 7\nset style fill solid 1.0 noborder\n");
    gs_plot_quote(dat, q, sizeof q);
    int n = 0;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (block_of[k] < 0)
            continue;
        fprintf(b, "%s%s index %d using (($1+$2)/2):3:(($2-$1)/2):(0.38) with boxxyerror lc rgb '%s' title '%s'",
                n ? ", \\\n     " : "plot ", q, block_of[k], colors[k], names[k]);
        n++;
    }
    if (n == 0)
        fprintf(b, "plot 0 notitle");
    fprintf(b, "\n");
    fclose(b);
    if (!body)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    rc = gs_plot_run(p, dat, body, err);
    free(body);
    return rc;
}

/* ---- sim: communication per dimension --------------------------------------------------------- */

gs_status gs_plot_comm(const gs_plot *p, const gs_scenario *s, const gs_report *r, gs_error *err)
{
    char dat[GS_PLOT_PATH_BYTES], q[2 * GS_PLOT_PATH_BYTES + 4], t[400], qt[820];
    FILE *f = NULL, *b = NULL;
    char *body = NULL;
    size_t blen = 0;
    gs_status rc = gs_plot_open_data(p, "", dat, &f, err);
    if (rc != GS_OK)
        return rc;
    static const struct { gs_dim d; const char *name; } dims[] = {{GS_DIM_DP, "dp"}, {GS_DIM_TP, "tp"}, {GS_DIM_PP, "pp"}};
    fprintf(f, "# gridstep sim of %s: communication per dimension on the critical rank %" PRIu64 " (seconds)\n",
            s->name, r->critical_rank);
    fprintf(f, "# dim overlapped_s exposed_s comm_s\n");
    double top = 0;
    for (int i = 0; i < 3; i++) {
        double c = r->comm_s[dims[i].d], e = r->exposed_s[dims[i].d];
        fprintf(f, "%s %.12g %.12g %.12g\n", dims[i].name, c - e, e, c);
        top = c > top ? c : top;
    }
    if ((rc = gs_plot_close_data(f, dat, err)) != GS_OK)
        return rc;
    if (!(b = open_memstream(&body, &blen)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    double scale = r->step_time_s < 1.0 ? 1e3 : 1.0;
    const char *unit = r->step_time_s < 1.0 ? "ms" : "s";
    char t2[200], qt2[420];
    snprintf(t, sizeof t, "%s: communication per dimension", s->name);
    snprintf(t2, sizeof t2, "step %.4g %s, NCCL share %.1f%%, critical rank %" PRIu64, r->step_time_s * scale, unit,
             100 * r->comm_share, r->critical_rank);
    fprintf(b, "set title %s.\"\\n\".%s font 'Sans,14'\n", gs_plot_quote(t, qt, sizeof qt), gs_plot_quote(t2, qt2, sizeof qt2));
    fprintf(b, "set style data histograms\nset style histogram rowstacked\nset boxwidth 0.5 relative\n");
    fprintf(b, "set style fill solid 0.9 border rgb 'black'\nset grid ytics\nset key inside right top box opaque\n");
    fprintf(b, "set ylabel '%s per step (one rank)'\nset xlabel 'mesh dimension (its stream on the critical rank)'\n",
            scale > 1 ? "milliseconds" : "seconds");
    fprintf(b, "set yrange [0:%.9g]\n", top > 0 ? top * scale * 1.15 : 1.0);
    gs_plot_quote(dat, q, sizeof q);
    fprintf(b, "plot %s using ($2*%g):xtic(1) title 'overlapped (hidden behind compute)' lc rgb '#59a14f', \\\n"
               "     %s using ($3*%g) title 'exposed (on the critical path)' lc rgb '#e15759'\n",
            q, scale, q, scale);
    fclose(b);
    if (!body)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot script");
    rc = gs_plot_run(p, dat, body, err);
    free(body);
    return rc;
}

gs_status gs_plot_pick_ranks(const gs_schedule *sch, const char *ranks, size_t *lists, size_t *nlists, gs_error *err)
{
    *nlists = 0;
    if (!ranks) {
        /* per stage, the list with the lowest rank; stages in order */
        uint64_t pp = sch->mesh.size[GS_DIM_PP];
        for (uint64_t st = 0; st < pp && *nlists < 8; st++) {
            long best = -1;
            for (size_t i = 0; i < sch->nranks; i++)
                if (sch->ranks[i].stage == st && (best < 0 || sch->ranks[i].rank < sch->ranks[best].rank))
                    best = (long)i;
            if (best >= 0)
                lists[(*nlists)++] = (size_t)best;
        }
        return GS_OK;
    }
    const char *p = ranks;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long long r = strtoull(p, &end, 10);
        if (end == p || errno || (*end && *end != ',') || *p == '-')
            return gs_error_set(err, GS_ERR_INPUT, "--plot-ranks: found '%s', expected ranks R,R,... (integers)", ranks);
        if (*nlists == GS_PLOT_MAX_RANKS)
            return gs_error_set(err, GS_ERR_INPUT, "--plot-ranks: more than %d ranks", GS_PLOT_MAX_RANKS);
        long at = -1;
        for (size_t i = 0; i < sch->nranks; i++)
            if (sch->ranks[i].rank == r)
                at = (long)i;
        if (at < 0) {
            if (r >= sch->mesh.world)
                return gs_error_set(err, GS_ERR_INPUT, "--plot-ranks: rank %llu, expected a rank below %" PRIu64, r,
                                    sch->mesh.world);
            char have[256] = "";
            size_t used = 0;
            for (size_t i = 0; i < sch->nranks && used + 24 < sizeof have; i++)
                used += (size_t)snprintf(have + used, sizeof have - used, "%s%" PRIu64, i ? ", " : "", sch->ranks[i].rank);
            return gs_error_set(err, GS_ERR_INPUT,
                                "--plot-ranks: rank %llu was not simulated (one rank per pipeline stage: %s); add --exact",
                                r, have);
        }
        lists[(*nlists)++] = (size_t)at;
        if (!*end)
            break;
        p = end + 1;
    }
    return GS_OK;
}
