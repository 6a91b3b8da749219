/* The simulated machine's links: what one GPU sees inside its node (NVLink through NVSwitch, or
 * PCIe) and across nodes (its share of the node's NICs, rails, switch tiers), and the shape of a
 * process group on it.
 *
 * Ownership: gs_topo is a plain value copied from the cluster; nothing allocates. */
#ifndef GS_SIM_TOPOLOGY_H
#define GS_SIM_TOPOLOGY_H

#include <stdint.h>

#include "engine/hardware.h"
#include "engine/mesh.h"
#include "engine/schedule.h"

typedef enum gs_hop { GS_HOP_NVLINK, GS_HOP_PCI, GS_HOP_NET, GS_HOP_COUNT } gs_hop; /* NCCL's hw classes */

/* Measured collective times from a calibration file: t = alpha_s + bytes / beta_bytes_per_s
 * (bytes = nccl-tests size) for each op and each measured group size. */
#define GS_COLL_FIT_SIZES 8
typedef struct gs_coll_fit {
    uint64_t nranks;         /* group size measured (0: slot unused) */
    double alpha_s;          /* seconds */
    double beta_bytes_per_s; /* bytes/s */
} gs_coll_fit;

typedef struct gs_link_fits {
    int set;                                            /* 1: any fit given */
    gs_coll_fit coll[GS_COLL_COUNT][GS_COLL_FIT_SIZES]; /* by op, ascending nranks */
    gs_coll_fit p2p;                                    /* send/recv (nranks 2) */
} gs_link_fits;

typedef struct gs_topo {
    gs_cluster cluster;
    gs_hop intra_hop;       /* NVLINK or PCI */
    double intra_bw;        /* bytes/s per GPU per direction inside a node, as NCCL assigns it */
    double nic_bw;          /* bytes/s per NIC per direction, achievable */
    double nic_line_bw;     /* bytes/s per NIC per direction, line rate */
    uint64_t gpus_per_node, nics_per_node;
    int nvls;               /* NVLink SHARP available */
    int cc_index;           /* NCCL compute-capability row: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell */
    double net_overhead_s;  /* NCCL net post overhead per inter-node step */
    gs_link_fits fit_intra; /* calibrated: groups inside one node (sim/measured.c) */
    gs_link_fits fit_inter; /* calibrated: groups spanning nodes */
    int one_machine;        /* calibrated on the host driver: every rank is a thread of one
                               machine, so fit_intra applies to every group and peer */
} gs_topo;

void gs_topo_init(gs_topo *t, const gs_cluster *c);

/* Shape of one process group: ranks, nodes spanned, most ranks on one node. */
typedef struct gs_coll_shape {
    uint64_t nranks;
    uint64_t nnodes;
    uint64_t ppn;
    uint64_t siblings; /* groups of the same kind with members on each of this group's nodes,
                          this one included, that run their collectives at the same time (a
                          step's schedule is the same on every rank) and so share the node's
                          NICs; 0 or 1: alone on them (gridstep coll's single call) */
    double net_share;  /* ALLTOALL: the share of a rank's bytes that leaves its node when each
                          token goes once per remote node (the flex / DeepEP dispatcher's
                          gs_event.net_share); 0: NCCL's all-to-all, a row per remote rank */
} gs_coll_shape;

/* The share of its nearest NICs a group's traffic gets while its siblings' runs beside it: 1 /
 * max(1, siblings x nics_near(ppn) / nics per node). Rail-optimized nodes with a NIC per GPU
 * give every sibling its own rail (1); one NIC for a node's 8 GPUs is shared by 8 one-GPU-per-node
 * groups (1/8). */
double gs__nic_share(const gs_topo *t, const gs_coll_shape *s);

/* The shape of rank's group of the given kind on the mesh. */
void gs_topo_group_shape(const gs_mesh *mesh, gs_group_kind g, uint64_t rank, gs_coll_shape *out);

#endif
