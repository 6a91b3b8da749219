/* The sim's event queue: a 4-ary min-heap of completions ordered by time, ties broken by
 * insertion order, so the same pushes always pop in the same order.
 *
 * Ownership: gs_queue is caller storage (zero-initialize, then gs_queue_fini frees its array). */
#ifndef GS_SIM_QUEUE_H
#define GS_SIM_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct gs_qnode {
    double t;      /* seconds */
    uint64_t seq;  /* insertion order: the tie-break */
    uint64_t id;   /* what completes (the DES's global event id, or a flow) */
    uint32_t ver;  /* version when pushed (flow mode: older versions are stale) */
} gs_qnode;

typedef struct gs_queue {
    gs_qnode *a;
    size_t n, cap;
    uint64_t seq;
} gs_queue;

/* Returns 0, or -1 when out of memory. */
int gs_queue_push(gs_queue *q, double t, uint64_t id, uint32_t ver);
/* One entry standing for n (>= 1) entries pushed one after another at the same t: it takes the
 * insertion order of the first and the next n - 1 are skipped, so it pops where they would
 * have, one after another, and whatever is pushed while they are handled pops after them. */
int gs_queue_push_span(gs_queue *q, double t, uint64_t id, uint32_t ver, uint64_t n);
/* The earliest entry; q must not be empty. */
gs_qnode gs_queue_pop(gs_queue *q);
void gs_queue_fini(gs_queue *q);

#endif
