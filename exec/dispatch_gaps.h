/* Dispatch gaps: how much of a measured step the compute stream spent idle with its next event
 * ready, waiting for the dispatcher (the target: at most 3% of the step).
 *
 * On a rank's compute stream, event b after event a (list order is stream order) is ready at
 * max(end of a, end of each dependency of b on another stream); anything between that and b's
 * start is the dispatcher's: the issuing thread had not put b on the stream yet (a GPU run
 * bound by its host), or the worker had not picked it up (the host driver). Waiting for a
 * collective, a receive or a gather is not a gap: those are dependencies. The step starts at 0,
 * so the first compute event's wait for its issue counts too.
 *
 * Ownership: pure functions over caller-owned data. */
#ifndef GS_EXEC_DISPATCH_GAPS_H
#define GS_EXEC_DISPATCH_GAPS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/schedule.h"

typedef struct gs_dispatch_gaps {
    double gap_s;     /* the largest over the ranks of one rank's summed gaps (seconds) */
    uint64_t rank;    /* the rank with it */
    size_t gaps;      /* its number of compute events that started later than ready */
    double largest_s; /* its largest single gap */
} gs_dispatch_gaps;

/* One rank list's gaps: *gap_s summed, *count and *largest_s as above. timing[e] for each
 * event of re (seconds from the step's start). */
void gs_dispatch_gaps_rank(const gs_rank_events *re, const gs_timing *timing, double *gap_s, size_t *count,
                           double *largest_s);

/* Over every rank list with timing (timing[i] NULL: not measured here, skipped). */
void gs_dispatch_gaps_step(const gs_schedule *sch, gs_timing *const *timing, gs_dispatch_gaps *out);

#endif
