/* Progress of a long command (plan, sweep, exec, calibrate) on standard error, with a percentage
 * and an estimate of the time left: "gridstep sweep: 45% (9 of 20 points), 12 s, about 15 s left".
 * On a terminal it is one line rewritten in place (at most 5 times a second, ended by
 * gs_progress_end); elsewhere, as in a Slurm log, a whole line every few seconds (every
 * GRIDSTEP_PROGRESS_S seconds, default 5; the first after that long, so a short run prints
 * nothing). --quiet (on = 0) prints nothing. The estimate assumes the work left goes at the pace
 * of the work done.
 *
 * Ownership: caller storage (gs_progress_init / gs_progress_end); label and unit are borrowed
 * for the progress's life. Updates may come from several threads (a lock orders them). */
#ifndef GS_CLI_PROGRESS_H
#define GS_CLI_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

typedef struct gs_progress {
    const char *label;   /* "gridstep plan" */
    const char *unit;    /* what is counted, plural: "points" */
    int on;              /* 0: print nothing (--quiet, or not the first process) */
    int tty;             /* 1: standard error is a terminal */
    int bound;           /* 1: the total is an upper bound ("of at most N") */
    double every_s;      /* seconds between lines off a terminal (between redraws on one: 0.2) */
    double start_s;      /* monotonic clock at init */
    double last_s;       /* when the last line was printed */
    int open;            /* a terminal line is drawn and not yet ended */
    uint64_t shown;      /* the largest count a line has shown: threads that finish their work
                            in one order may report it in another, and the lines never go back */
    pthread_mutex_t lock;
} gs_progress;

/* on: 1 to report (0 for --quiet). Reads GRIDSTEP_PROGRESS_S (seconds between lines off a
 * terminal, default 5; 0 prints every update, for tests). */
void gs_progress_init(gs_progress *p, const char *label, const char *unit, int on);

/* done of total units finished; what (may be NULL or "") says what runs now. */
void gs_progress_update(gs_progress *p, uint64_t done, uint64_t total, const char *what);

/* Ends a terminal line (a newline) and frees the lock. */
void gs_progress_end(gs_progress *p);

/* For an engine callback of the form void (*)(void *ctx, uint64_t done, uint64_t total): ctx is
 * the gs_progress. */
void gs_progress_callback(void *ctx, uint64_t done, uint64_t total);

#endif
