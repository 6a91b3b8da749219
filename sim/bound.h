/* A closed-form lower bound on the step the sim gives (analytic mode, class path), for the
 * planner's first tier: from the compute events, the TP calls between them and the pipeline's
 * sends, whose costs the bound takes from a two-stage, one-layer-per-stage, one-micro-batch
 * schedule of the same shapes (cached).
 *
 * Ownership: gs_sim_bound_create allocates the cache, gs_sim_bound_destroy frees it; one cache
 * serves one thread at a time. */
#ifndef GS_SIM_BOUND_H
#define GS_SIM_BOUND_H

#include "engine/ledger.h"
#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

typedef struct gs_sim_bound gs_sim_bound;

gs_status gs_sim_bound_create(gs_sim_bound **out);
void gs_sim_bound_destroy(gs_sim_bound *b);

/* A lower bound, seconds, on gs_sim_scenario(s, mesh, 0, NULL, ...)'s step_time_s (no
 * calibration, no stragglers). Each stream runs its events one at a time, in list order, and an
 * event takes at least its base duration (the overlap slowdown only lengthens compute). A
 * layer's forward (backward, recompute) pass is contiguous on the compute stream and its compute
 * events wait for the TP calls between them: it takes at least its chain f (b, r; the chain's
 * trailing TP call left out). So a stage's compute takes at least W_s = m micro-batches x (its
 * layers x (f + b + r) + the embedding on the first stage, the head and loss on the last), the
 * optimizer left out. Its first compute event waits for micro-batch 0's forward through the
 * first model chunk of every stage before it and the sends between them, and every stage before
 * it runs its first chunk's backward of its last micro-batch after it (the gradient travels back
 * through the sends):
 *     lower = max over stages s of  sum_{j<s} (F_j + send) + W_s - b + sum_{j<s} (B_j + send),
 * F_j and B_j stage j's first chunk's forward and backward (embedding included on stage 0); one
 * b left out for the last layer's work that may follow its gradient's send.
 * ctx is a gs_sim_bound. GS_ERR_NOMEM, or a build error of the one-layer schedule. */
gs_status gs_sim_step_bound(const gs_scenario *s, const gs_mesh *mesh, void *ctx, double *lower_s, gs_error *err);

/* A lower bound, seconds, on the same step from the ledger's traffic: each stage's DP, TP and PP
 * streams run one call at a time, and a call of S bytes takes at least S at the best rate the
 * tuner reaches for its op and group (sends: the faster of the intra- and inter-node links), so a
 * stream takes at least its bytes sent per step (l->ranks[i].traffic) times the least seconds per
 * sent byte of the ops it may run. Thread-safe (no cache; ctx unused). */
gs_status gs_sim_comm_bound(const gs_scenario *s, const gs_mesh *mesh, const gs_ledger *l, void *ctx,
                            double *lower_s, gs_error *err);

#endif
