/* Internals shared by the collective cost files: NCCL's tuner constants (tuner.c), the
 * per-channel graph NCCL's topology search would build (topology.c), and one time function per
 * algorithm (ring.c, tree.c, nvls.c, pat.c). Units follow NCCL's tuning.cc inside these
 * functions: bandwidths in GB/s (1e9 B/s), latencies in microseconds; the time functions return
 * seconds. Reference = shared/reference/hardware-and-models.md.
 *
 * Ownership: pure functions over caller values; nothing allocates. */
#ifndef GS_SIM_COLLECTIVE_INTERNAL_H
#define GS_SIM_COLLECTIVE_INTERNAL_H

#include <stdint.h>

#include "sim/collective.h"
#include "sim/topology.h"

/* ------------------------------------------------------------ NCCL's constants (tuner.c) -- */

/* The NCCL algorithms whose constants the four gridstep algorithms use (ref 3.1): ring.c uses
 * RING, tree.c TREE, nvls.c NVLS on one node and NVLS_TREE across nodes. */
typedef enum gs__nccl_algo {
    GS__NCCL_TREE,
    GS__NCCL_RING,
    GS__NCCL_NVLS,
    GS__NCCL_NVLS_TREE,
    GS__NCCL_ALGO_COUNT
} gs__nccl_algo;

/* NCCL's channel limit for ring/tree graphs: MAXCHANNELS / 2 (ref 3.1: MAXCHANNELS 64). */
#define GS__MAX_CHANNELS 32
/* NCCL_MAX_NVLS_ARITY (ref 3.1): at most 32 NVLS heads. */
#define GS__MAX_NVLS_ARITY 32

double gs__base_latency_us(gs__nccl_algo a, gs_proto p);          /* ref 3.2 baseLat */
double gs__hw_latency_us(gs_hop h, gs__nccl_algo a, gs_proto p);  /* ref 3.2 hwLatencies */
/* The nNodes column of the cap tables: 0 for one node, 1 for two, 2 beyond (ref 3.2). */
int gs__nodes_index(uint64_t nnodes);
double gs__ll_max_bw(const gs_topo *t, uint64_t nnodes);                /* GB/s, total */
double gs__per_ch_max_ring_ll128_bw(const gs_topo *t, uint64_t nnodes); /* GB/s per channel */
double gs__per_ch_max_tree_bw(const gs_topo *t, uint64_t nnodes);       /* GB/s per channel */
double gs__per_ch_max_tree_ll128_bw(const gs_topo *t, uint64_t nnodes); /* GB/s per channel */
double gs__per_ch_max_nvls_tree_bw(const gs_topo *t, uint64_t nnodes);  /* GB/s per channel */
double gs__nvls_efficiency(const gs_topo *t);
/* treeCorrectionFactor[p][log2(bytes >> 6)] (ref 3.6), used while the bucket is below
 * `buckets` (GS__TREE_BUCKETS, GS__NVLS_TREE_BUCKETS); 1 outside. Interpolated in log2 size
 * between powers of two (see tuner.c). */
#define GS__TREE_BUCKETS 23
#define GS__NVLS_TREE_BUCKETS 24
double gs__tree_correction(gs_proto p, double bytes, int buckets);
/* floor(log2(v)) for v >= 1, 0 for v == 0 (NCCL's log2i). */
int gs__log2i(uint64_t v);
/* NCCL's nsteps (ref 3.3 item 1): 2(n-1) all-reduce, n-1 all-gather / reduce-scatter, n else. */
double gs__nsteps(gs_coll_op op, uint64_t n);
/* Is LL128 enabled on this machine (ref 3.6, "LL128 default enable")? */
int gs__ll128_enabled(const gs_topo *t);

/* -------------------------------------------------- the searched graph (topology.c) ------ */

/* What NCCL's topology search (ref 3.4, src/graph/search.cc) settles on for a communicator of
 * the given shape: channel count and per-channel speeds. */
typedef struct gs__graph {
    int nch;         /* channels */
    double bw_intra; /* GB/s per channel inside the node */
    double bw_inter; /* GB/s per channel across nodes (= bw_intra on one node) */
} gs__graph;

/* Ring pattern: each channel passes once through every local GPU's NVLink/PCIe and, across
 * nodes, enters and leaves the node through one NIC. */
void gs__graph_ring(const gs_topo *t, const gs_coll_shape *s, gs__graph *g);
/* Tree pattern: the ring's graph, then bw_intra raised up to 2 x bw_inter while the intra-node
 * links allow (search.cc pass 2; used by the tuner on one or two nodes). */
void gs__graph_tree(const gs_topo *t, const gs_coll_shape *s, gs__graph *g);
/* NVLS pattern: one channel per local GPU (the head), each costing its head 2 x the speed and
 * every other GPU 1 x on its NVSwitch links; across nodes each head also needs a NIC. nch is 0
 * when NVLS does not apply (no NVLS fabric, fewer than 2 local GPUs). */
void gs__graph_nvls(const gs_topo *t, const gs_coll_shape *s, gs__graph *g);

/* NICs a group with ppn GPUs on a node reaches: the NICs nearest its GPUs, ceil(ppn x NICs per
 * GPU), at least 1, at most the node's. */
uint64_t gs__nics_near(const gs_topo *t, uint64_t ppn);
/* Achievable GB/s of one NIC for traffic spanning nnodes nodes: the preset's achievable rate,
 * divided by the leaf-to-spine oversubscription when the traffic leaves the leaf switches. */
double gs__nic_gbs(const gs_topo *t, uint64_t nnodes);
/* Latency a NIC adds per inter-node step beyond NCCL's NET constants (NCCL's latencyInter):
 * the preset's per-step latency minus NCCL's NET Ring Simple hw latency, >= 0 (the kernel TCP
 * path of the socket transport; 0 for InfiniBand and RoCE). */
double gs__inter_extra_us(const gs_topo *t);

/* ------------------------------------------------------------- the algorithms ------------ */

/* Each returns the predicted seconds of one call of `bytes` (nccl-tests size) over the group,
 * or INFINITY when the algorithm or protocol does not apply. net_bytes (may be NULL) receives
 * the bytes each NIC of a node sends, 0 on one node. Groups of one are the tuner's business. */
double gs__ring_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes);
double gs__tree_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes);
double gs__nvls_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                     double *net_bytes);
double gs__pat_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                    double *net_bytes);

/* Calibrated (sim/measured.c): the measured alpha-beta line of op over the group's link class,
 * or INFINITY when the calibration has none. */
double gs__measured_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes);
double gs__measured_p2p_time(const gs_topo *t, int same_node, double bytes);

/* The ring formula with a given graph and a cap (GB/s) on the bus bandwidth the hardware
 * sustains. */
double gs__ring_time_graph(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes, gs_proto p,
                           const gs__graph *g, double busbw_cap_gbs);

#endif
