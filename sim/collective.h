/* Collective cost models: one algorithm per file (ring.c, tree.c, nvls.c, pat.c), each
 * owning its time formula and nccl-tests bus-bandwidth factor; tuner.c picks, per call, the
 * algorithm and protocol with the lowest predicted time as NCCL's tuner does (reference section 3).
 *
 * Ownership: pure functions over caller values. */
#ifndef GS_SIM_COLLECTIVE_H
#define GS_SIM_COLLECTIVE_H

#include <stdint.h>

#include "engine/schedule.h"
#include "engine/status.h"
#include "sim/topology.h"

typedef enum gs_algo { GS_ALGO_RING, GS_ALGO_TREE, GS_ALGO_NVLS, GS_ALGO_PAT, GS_ALGO_COUNT } gs_algo;
typedef enum gs_proto { GS_PROTO_LL, GS_PROTO_LL128, GS_PROTO_SIMPLE, GS_PROTO_COUNT } gs_proto;

typedef struct gs_coll_cost {
    double time_s;    /* predicted time of the call */
    gs_algo algo;
    gs_proto proto;
    double algbw;     /* bytes / time (nccl-tests: size / time), bytes/s */
    double busbw;     /* algbw x the nccl-tests factor for the op and group size, bytes/s */
    double net_bytes; /* bytes this rank's node sends through its NICs per NIC (for reports) */
} gs_coll_cost;

/* Time of one collective of `bytes` (nccl-tests "size": the full buffer for all-reduce and
 * broadcast, the gathered output for all-gather, the input for reduce-scatter and all-to-all)
 * over a group of the given shape. Chooses the algorithm and protocol (or uses `force` when it is
 * not GS_ALGO_COUNT). A group of one rank costs 0. */
gs_status gs_coll_estimate(const gs_topo *t, gs_coll_op op, const gs_coll_shape *shape, uint64_t bytes,
                           gs_algo force, gs_coll_cost *out);

/* The channels (one CTA, on one SM, each) NCCL's ring graph gives a group of this shape: what an
 * NCCL kernel holds of the GPU while it runs. 0 for a group of one. */
int gs_coll_channels(const gs_topo *t, const gs_coll_shape *shape);

/* Point-to-point send of `bytes` between two ranks, same node or not. */
double gs_p2p_time(const gs_topo *t, int same_node, uint64_t bytes);

/* nccl-tests bus-bandwidth factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
 * all-to-all (n-1)/n; broadcast 1. */
double gs_busbw_factor(gs_coll_op op, uint64_t n);

const char *gs_algo_name(gs_algo a);
const char *gs_proto_name(gs_proto p);

#endif
