/* Progress lines with a percentage and the time left (see cli/progress.h). */
#include "cli/progress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TTY_REDRAW_S 0.2   /* seconds between redraws of a terminal line */
#define DEFAULT_EVERY_S 5.0 /* seconds between lines in a log */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "12 s", "3 min 20 s", "2 h 05 min" */
static void fmt_duration(double s, char *buf, size_t len)
{
    if (s < 0)
        s = 0;
    uint64_t t = (uint64_t)(s + 0.5);
    if (t < 60)
        snprintf(buf, len, "%" PRIu64 " s", t);
    else if (t < 3600)
        snprintf(buf, len, "%" PRIu64 " min %02" PRIu64 " s", t / 60, t % 60);
    else
        snprintf(buf, len, "%" PRIu64 " h %02" PRIu64 " min", t / 3600, (t % 3600) / 60);
}

void gs_progress_init(gs_progress *p, const char *label, const char *unit, int on)
{
    p->label = label;
    p->unit = unit;
    p->on = on;
    p->tty = isatty(STDERR_FILENO);
    p->bound = 0;
    p->shown = 0;
    p->every_s = DEFAULT_EVERY_S;
    const char *e = getenv("GRIDSTEP_PROGRESS_S");
    if (e && *e) {
        char *end;
        errno = 0;
        double v = strtod(e, &end);
        if (!errno && !*end && v >= 0)
            p->every_s = v;
    }
    if (p->tty)
        p->every_s = TTY_REDRAW_S;
    p->start_s = now_s();
    p->last_s = p->start_s;
    p->open = 0;
    pthread_mutex_init(&p->lock, NULL);
}

void gs_progress_update(gs_progress *p, uint64_t done, uint64_t total, const char *what)
{
    if (!p->on || total == 0)
        return;
    pthread_mutex_lock(&p->lock);
    double t = now_s();
    /* a log gets its first line only after every_s, so that a short run writes none; a count
     * below one already shown (a worker thread reporting late) writes nothing */
    if ((t - p->last_s < p->every_s && !(p->tty && done == total)) || done < p->shown) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->last_s = t;
    p->shown = done;
    double elapsed = t - p->start_s, frac = done > total ? 1.0 : (double)done / (double)total;
    char el[32], left[48] = "";
    fmt_duration(elapsed, el, sizeof el);
    if (done > 0 && done < total) {
        char d[32];
        fmt_duration(elapsed * (1.0 - frac) / frac, d, sizeof d);
        snprintf(left, sizeof left, ", %s %s left", p->bound ? "at most" : "about", d);
    }
    fprintf(stderr, "%s%s: %3d%% (%" PRIu64 " of %s%" PRIu64 " %s%s%s), %s%s%s", p->tty ? "\r\033[K" : "", p->label,
            (int)(100.0 * frac), done, p->bound ? "at most " : "", total, p->unit, what && *what ? ": " : "", what ? what : "",
            el, left, p->tty ? "" : "\n");
    p->open = p->tty;
    fflush(stderr);
    pthread_mutex_unlock(&p->lock);
}

void gs_progress_end(gs_progress *p)
{
    if (p->open) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    p->open = 0;
    pthread_mutex_destroy(&p->lock);
}

void gs_progress_callback(void *ctx, uint64_t done, uint64_t total)
{
    gs_progress_update(ctx, done, total, NULL);
}
