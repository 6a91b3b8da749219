/* The sim's event queue: a 4-ary min-heap of completions ordered by time, ties broken by
 * insertion order, so the same pushes always pop in the same order.
 *
 * Ownership: gs_queue is caller storage (zero-initialize, then gs_queue_fini frees its arrays). */
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

/* An entry's order as two integers: the time's bits mapped so that unsigned order is the
 * doubles' order (gs_queue_time_key), then the insertion order. */
typedef struct gs_qkey {
    uint64_t t;
    uint64_t seq;
} gs_qkey;

/* What an entry carries besides its order. */
typedef struct gs_qval {
    uint64_t id;
    uint32_t ver;
    uint32_t neg_zero; /* pushed at -0.0 (ordered as 0, popped as pushed) */
} gs_qval;

typedef struct gs_queue {
    gs_qkey *key;  /* the heap's keys: entry i at key[i]; its four children share a cache line */
    gs_qval *val;  /* entry i's payload */
    void *key_mem; /* key's allocation */
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
/* The time of the entry at heap position i < q->n (in no particular order; for tests). */
double gs_queue_time_at(const gs_queue *q, size_t i);
/* Bytes allocated for the queue's entries. */
uint64_t gs_queue_bytes(const gs_queue *q);
void gs_queue_fini(gs_queue *q);

#endif
