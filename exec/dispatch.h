/* The exec dispatcher: plays one step of an exact (every-rank) schedule on a driver. Per rank
 * (one host thread each) it walks the rank's events in list order, issues each to its stream,
 * makes it wait for its dependencies on other streams (driver events; same-stream order is the
 * stream's) and for nothing else: it adds, drops and reorders no wait. It records when it was posted and when it ended on the driver clock, and fills the
 * gs_timing[] the sim fills. What an event does is the program's business (a callback), so the
 * dispatcher knows neither the driver nor the model.
 *
 * Ownership: gs_dispatch is created by gs_dispatch_create and freed by gs_dispatch_destroy; it
 * borrows the driver and the schedule (both must outlive it) and owns its streams and events. */
#ifndef GS_EXEC_DISPATCH_H
#define GS_EXEC_DISPATCH_H

#include "engine/backend.h"
#include "engine/schedule.h"
#include "exec/driver.h"

/* Runs event `event` of rank list `rank_index` on stream s (called from inside the stream's work,
 * in stream order, after the event's dependencies completed). */
typedef gs_status (*gs_dispatch_run_fn)(void *prog, size_t rank_index, size_t event, gs_drv_stream *s,
                                        gs_error *err);

/* What the test hook does to its event. */
typedef enum gs_fault_kind {
    GS_FAULT_FAIL = 0, /* the event fails with "injected failure (test hook)" */
    GS_FAULT_STALL,    /* the event never completes: it sleeps until the run is aborted (by a
                          peer's timeout), as a hung rank would */
    GS_FAULT_DIE,      /* the rank dies there: this event and every later one of the rank are
                          skipped silently, as if its process had exited */
} gs_fault_kind;

typedef struct gs_dispatch_opts {
    /* Test hook: event `fail_event` (gs_event_name) of rank `fail_rank` does what fail_kind says
     * instead of running; NULL: none. */
    const char *fail_event;
    uint64_t fail_rank;
    gs_fault_kind fail_kind;
    /* The watchdog, seconds (0: 60): a step in which no event completes for timeout_s + 0.5 s
     * is aborted, naming the rank and the event that did not complete (a rank stalled in its
     * last events, which no other rank waits for, is found so). */
    double timeout_s;
} gs_dispatch_opts;

typedef struct gs_dispatch gs_dispatch;

/* The schedule must be exact (every rank) and its dependencies must point to earlier events. */
gs_status gs_dispatch_create(const gs_driver_ops *ops, gs_drv *drv, const gs_schedule *sch, gs_dispatch **out,
                             gs_error *err);
void gs_dispatch_destroy(gs_dispatch *d);

/* A dispatcher that plays rank list `only` of sch alone (a multi-process run: the other lists are
 * other processes'); GS_DISPATCH_ALL: every list (gs_dispatch_create). Lists it does not play have
 * no streams (gs_dispatch_stream: NULL), and gs_dispatch_step leaves their timing alone. */
#define GS_DISPATCH_ALL ((size_t)-1)
gs_status gs_dispatch_create_local(const gs_driver_ops *ops, gs_drv *drv, const gs_schedule *sch, size_t only,
                                   gs_dispatch **out, gs_error *err);
/* 1 when this dispatcher plays rank list i. */
int gs_dispatch_is_local(const gs_dispatch *d, size_t i);

/* 1 when a step gave up on a rank's thread (see gs_dispatch_step): the driver and everything the
 * threads use must then be left in place, not freed. */
int gs_dispatch_wedged(const gs_dispatch *d);

/* Events of the last (or current) step completed so far, and the events of the ranks played. */
void gs_dispatch_progress(const gs_dispatch *d, uint64_t *done, uint64_t *total);

/* The stream of rank list i, kind k (for the program's set-up work). */
gs_drv_stream *gs_dispatch_stream(gs_dispatch *d, size_t i, gs_stream k);

/* One step: every rank's events through run(prog, ...). timing[i][e] gets seconds from the step's
 * start (may be NULL). rank_err (may be NULL) gets each rank list's own outcome. On failure the
 * first error (the abort's: it names the rank and the event) is returned. A rank succeeds only
 * when every one of its events completed (a rank that died, even in an event nothing waits for,
 * fails the step naming it). Every wait ends: the watchdog (opts->timeout_s) aborts a step that
 * stops completing events, and after an abort the rank threads not back within 0.8 s are given
 * up (left running, detached): the dispatcher is then wedged (gs_dispatch_wedged), runs no
 * further step, and destroy frees nothing (the threads may still use it). */
gs_status gs_dispatch_step(gs_dispatch *d, gs_dispatch_run_fn run, void *prog, const gs_dispatch_opts *opts,
                           gs_timing *const *timing, gs_error *rank_err, gs_error *err);

#endif
