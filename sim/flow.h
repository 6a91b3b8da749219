/* Flow mode's network model: a fluid max-min fair sharing of the cluster's links between the
 * transfers in flight (doc/models.md, "Events and links").
 *
 * Two layers. gs_flow_net (flow_net.c) is the solver: links with a capacity (bytes/s) and flows,
 * each with an amount of work (seconds at full speed) and, per link it crosses, the bytes/s it
 * puts on that link at full speed. A flow runs at a speed in (0, 1] (1 = as fast as alone); speeds
 * are set by progressive filling (max-min fairness on speed, weighted by each flow's demand on a
 * link) over the connected component of links and flows touched whenever a flow starts or
 * finishes, and each flow whose speed changed gets a new end time and a new version.
 * gs_flow_model maps the cluster onto links (see flow.c for the list) and turns a collective or
 * a send into a flow on them. gs_flow_coll_exact (flow_coll.c) puts every rank of one
 * collective on the links, one flow per transfer, for `gridstep coll --exact`.
 *
 * Ownership: a gs_flow_net owns its links and flows (gs_flow_net_create / _destroy); a
 * gs_flow_model owns its gs_flow_net (gs_flow_model_create / _destroy); gs_flow_coll_exact
 * builds and frees its own. Nothing is global. */
#ifndef GS_SIM_FLOW_H
#define GS_SIM_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "engine/schedule.h"
#include "engine/status.h"
#include "sim/collective.h"
#include "sim/topology.h"

/* ------------------------------------------------------------------- the solver ------------ */

typedef struct gs_flow_net gs_flow_net;

/* A flow whose end moved: the flow, its new version and its new end (seconds). */
typedef struct gs_flow_change {
    uint32_t flow;
    uint32_t version;
    double end_s;
} gs_flow_change;

/* nlinks links with capacity[i] bytes/s (each > 0). */
gs_status gs_flow_net_create(size_t nlinks, const double *capacity, gs_flow_net **out);
void gs_flow_net_destroy(gs_flow_net *n);

/* Describe the next flow: gs_flow_begin, then gs_flow_add_bytes for each link it loads (bytes
 * added to the same link accumulate), then gs_flow_start. */
void gs_flow_begin(gs_flow_net *n);
gs_status gs_flow_add_bytes(gs_flow_net *n, uint32_t link, double bytes);
/* As gs_flow_add_bytes for a flow that stands for `copies` (>= 1) identical transfers on this
 * link (the class path's symmetry, flow.c): the flow's own bytes decide how fast it runs alone,
 * and bytes x copies load the link. GS_ERR_INPUT for copies < 1. */
gs_status gs_flow_add_bytes_shared(gs_flow_net *n, uint32_t link, double bytes, double copies);
/* Starts the described flow at now_s: it moves its bytes in work_s seconds (> 0) when alone. A
 * flow alone never runs slower than that: bytes above what a link carries in work_s are taken
 * as the cost model's own account of that link (the demand is scaled to the link). The new flow
 * and every flow whose speed changed are listed in gs_flow_changes. */
gs_status gs_flow_start(gs_flow_net *n, double now_s, double work_s, uint32_t *id);
/* Batch form, for many flows starting together: gs_flow_post puts the described flow on its
 * links without solving; gs_flow_solve_all then solves every link at once (one progressive
 * filling instead of one per start) and lists every flow in gs_flow_changes. */
gs_status gs_flow_post(gs_flow_net *n, double now_s, double work_s, uint32_t *id);
gs_status gs_flow_solve_all(gs_flow_net *n, double now_s);
/* Removes flow id at now_s (its end) and re-solves its neighbours (gs_flow_changes). */
gs_status gs_flow_finish(gs_flow_net *n, double now_s, uint32_t id);
/* The changes of the last gs_flow_start or gs_flow_finish, in a fixed order. */
size_t gs_flow_changes(const gs_flow_net *n, const gs_flow_change **out);
/* Is (id, version) the flow's current end (heap entries of older versions are stale)? */
int gs_flow_current(const gs_flow_net *n, uint32_t id, uint32_t version);
double gs_flow_speed(const gs_flow_net *n, uint32_t id); /* 0..1, of its speed alone */
double gs_flow_end(const gs_flow_net *n, uint32_t id);   /* projected end, seconds */

/* --------------------------------------------------------------- the cluster's links ------- */

typedef struct gs_flow_model gs_flow_model;

/* Links of a cluster of `nodes` nodes (topology t, whose cluster gives NICs, rails and the
 * oversubscription). */
gs_status gs_flow_model_create(const gs_topo *t, uint64_t nodes, gs_flow_model **out);
void gs_flow_model_destroy(gs_flow_model *m);
gs_flow_net *gs_flow_model_net(gs_flow_model *m);
uint64_t gs_flow_model_leaf_nodes(const gs_flow_model *m); /* nodes per leaf group */

/* The class path (schedule.h: one representative per pipeline stage stands for the ranks of
 * its stage): the mesh, and the group kind of the collective being started. A transfer started
 * with one loads each shared link (NIC egress and ingress, leaf uplink and downlink) with the
 * copies of it that the other ranks of the class run at the same time; flow.c derives the
 * count. NULL on the exact path, where every rank is present. */
typedef struct gs_flow_class {
    const gs_mesh *mesh;
    gs_group_kind kind; /* collectives only */
} gs_flow_class;

/* Starts a send of `bytes` from src_rank to dst_rank taking work_s at full speed. */
gs_status gs_flow_model_p2p(gs_flow_model *m, double now_s, uint64_t src_rank, uint64_t dst_rank, uint64_t bytes,
                            double work_s, const gs_flow_class *cls, uint32_t *id);
/* Starts a collective of `bytes` (nccl-tests size) over a group of the given shape whose present
 * members are ranks[0..nranks), with cost from gs_coll_estimate, taking work_s at full speed. */
gs_status gs_flow_model_coll(gs_flow_model *m, double now_s, gs_coll_op op, const gs_coll_shape *shape,
                             uint64_t bytes, const gs_coll_cost *cost, const uint64_t *ranks, size_t nranks,
                             double work_s, const gs_flow_class *cls, uint32_t *id);

/* ------------------------------------------- one collective, every rank (flow_coll.c) ------ */

/* What gs_flow_coll_exact found for one call. */
typedef struct gs_flow_exact {
    double time_s;     /* the call's solved time, seconds */
    double analytic_s; /* the cost model's time for the same call (gs_coll_estimate / gs_p2p_time) */
    double min_speed;  /* the slowest flow's speed, 0..1 (1: no link carries more than planned) */
    uint64_t flows;    /* transfers simulated */
    gs_algo algo;      /* as gs_coll_estimate chose (GS_ALGO_COUNT: grouped p2p) */
    gs_proto proto;
} gs_flow_exact;

/* One collective of `bytes` (nccl-tests size) over shape->nranks ranks placed shape->ppn per
 * node, every rank's transfers as flows on the cluster's links of topology t, with the
 * algorithm and protocol gs_coll_estimate picks (or `force`); flow_coll.c lists the transfers.
 * O(ranks x channels). Errors as gs_coll_estimate's; GS_ERR_NOMEM. */
gs_status gs_flow_coll_exact(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, uint64_t bytes,
                             gs_algo force, gs_flow_exact *out);
/* nccl-tests' sendrecv: every rank r sends `bytes` to rank r + 1 (mod n) at once. */
gs_status gs_flow_sendrecv_exact(const gs_topo *t, const gs_coll_shape *shape, uint64_t bytes, gs_flow_exact *out);

/* The latency part (seconds) of a collective's predicted time: the chosen algorithm and
 * protocol's time for 0 bytes, at most cost->time_s. */
double gs_flow_coll_latency(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, const gs_coll_cost *cost);
/* The latency part of gs_p2p_time. */
double gs_flow_p2p_latency(const gs_topo *t, int same_node);

#endif
