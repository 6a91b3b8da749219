/* Plots through gnuplot: paths, terminal, quoting, and the gnuplot process (popen). */
#include "cli/plot.h"

#include <ctype.h>
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
        fprintf(gp, "set terminal svg size 1200,800 dynamic enhanced font 'Sans,12' background rgb 'white'\n");
    else
        fprintf(gp, "set terminal pngcairo size 1200,800 enhanced font 'Sans,12' background rgb 'white'\n");
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
