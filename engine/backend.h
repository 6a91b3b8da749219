/* The backend seam: a backend plays a schedule and says when each event started and ended.
 * The engine never names a backend; cli/backends.c holds the one static table of them.
 *
 * Ownership: a backend's state is created by open() and freed by close(); run() borrows the
 * schedule and fills caller-allocated timing arrays (one gs_timing per event, per rank list). */
#ifndef GS_BACKEND_H
#define GS_BACKEND_H

#include "engine/scenario.h"
#include "engine/schedule.h"
#include "engine/status.h"

/* When one event ran, in seconds from the start of the step. */
typedef struct gs_timing {
    double posted_s; /* reached the head of its stream with its dependencies done */
    double start_s;  /* began (collectives and p2p: all parties present) */
    double end_s;
} gs_timing;

/* Sizes of one run, for `gridstep sim --stats` (counts, and the host thread's issue time). */
typedef struct gs_backend_stats {
    uint64_t rank_lists;  /* rank lists played */
    uint64_t events;      /* events played, all rank lists */
    uint64_t tensors;     /* tensors, all rank lists */
    uint64_t collectives; /* collective events, all rank lists */
    uint64_t queue_peak;  /* most entries the event queue held at once */
    uint64_t queue_bytes; /* bytes allocated for the event queue at its largest */
    uint64_t state_bytes; /* bytes of the run's own state (the queue included, the caller's
                             timings not) */
    double host_issue_s;  /* the sim's host model: the longest time a rank's host thread takes
                             to issue its step's kernels and collectives, seconds (0: not
                             modelled) */
} gs_backend_stats;

/* The sim's fitted cost-model constants (sim/compute.c says what each one means, its source
 * and its fitted value); `gridstep validate --fit` varies them. 0 in a field: the compiled-in
 * value. */
typedef struct gs_fit_params {
    double overlap_hbm_per_byte; /* HBM bytes per byte of a concurrent collective's bus traffic */
    double gemm_sustained;       /* a training step's GEMM throughput over the single-GPU MAMF */
} gs_fit_params;

typedef struct gs_backend_opts {
    int flow;          /* sim: 1 = flow mode (max-min fair sharing), 0 = analytic */
    const char *calib; /* calibration file (NULL: preset defaults) */
    gs_backend_stats *stats; /* NULL, or filled by run() (the caller's storage) */
    const gs_fit_params *fit; /* NULL: the compiled-in fitted constants */
} gs_backend_opts;

typedef struct gs_backend_ops {
    const char *name;
    const char *description;
    gs_status (*open)(const gs_scenario *s, const gs_mesh *mesh, const gs_backend_opts *opts, void **state,
                      gs_error *err);
    /* timing[i] has sch->ranks[i].nevents entries. */
    gs_status (*run)(void *state, const gs_schedule *sch, gs_timing *const *timing, gs_error *err);
    void (*close)(void *state);
} gs_backend_ops;

#endif
