/* The sim backend's discrete-event core, shared between its files: sim/des.c (the loop and
 * the backend ops), sim/des_index.c (templates, per-rank state, collective instances and
 * send/recv pairs, event costs) and sim/des_flow.c (flow mode and the host's shared cores).
 *
 * Every rank list the schedule holds is played from a template: the event list it reads (its
 * own, or its stage representative's when it is a shared list). What the loop needs of an
 * event that does not depend on the rank (stream order, dependents, kind, the slot and
 * sequence number that name its collective instance or send/recv pair) is kept once per
 * template; its duration once per template and variant (ranks whose groups have the same shape
 * and whose pipeline peers sit on the same nodes). A stream runs its events in list order, so
 * an event is done exactly when its stream's cursor has passed it: an event is ready when the
 * cursors of its dependencies' streams have passed their positions, and no per-event counter
 * is kept. Per rank list: its cursors and flags, and the timings the caller owns.
 *
 * Ownership: run_ctx lives on sim_run's stack and owns every array it points to (freed by
 * des_ctx_fini); the schedule, timings and sim_state are borrowed for the run. */
#ifndef GS_SIM_DES_INTERNAL_H
#define GS_SIM_DES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/roles.h"
#include "sim/compute.h"
#include "sim/flow.h"
#include "sim/queue.h"
#include "sim/topology.h"

#define DES_NONE UINT64_MAX
#define DES_NO_SLOT UINT16_MAX

/* Heap entries: an event's entry carries its event id (rank list << 32 | index in the list),
 * a flow's end FLOW_BIT | the flow id. The version field holds the rank list index of an
 * ordinary completion, PS_ENTRY | the version of a shared-core event's projected end, or
 * DEFER_ENTRY: flow mode starts the flow of this event (a collective's last member to arrive,
 * or a send) now, its thread woken by another stream's at the time of the entry. */
#define FLOW_BIT (1ULL << 63)
#define INST_BIT (1ULL << 62) /* INST_BIT | instance: its members' ends (des_complete_instance) */
#define PS_ENTRY 0x80000000u
#define DEFER_ENTRY 0x7fffffffu
#define HOST_ENTRY 0x7ffffffeu /* the host thread has issued event id: its stream may start it */
#define EV_ID(ri, k) ((uint64_t)(ri) << 32 | (uint64_t)(k))
#define EV_LIST(id) ((size_t)((id) >> 32))
#define EV_INDEX(id) ((uint32_t)(id))
#define DEP_POS_BITS 29 /* a dependency's position within its stream (dep_on) */

typedef struct sim_state {
    gs_scenario s;
    gs_mesh mesh;
    gs_topo topo;
    gs_compute_model cm;
    int flow;
    gs_topo flow_topo;   /* flow mode's costs: topo with oversubscription 1 (the uplinks share instead) */
    double host_link_bw; /* bytes/s GPU <-> host (PCIe: NCCL's 24 GB/s gen4, 48 GB/s gen5) */
    gs_backend_stats *stats; /* borrowed from the options; NULL when not asked for */
} sim_state;

/* A slot of a template: the collectives on one (group kind, group) or the sends (recvs) to
 * (from) one peer; an event's instance or pair is its slot's first one plus its sequence
 * number within the slot. */
typedef struct des_slot {
    uint8_t kind;        /* gs_event_kind: GS_EV_COLLECTIVE, GS_EV_SEND or GS_EV_RECV */
    uint8_t group;       /* gs_group_kind (collectives) */
    uint32_t count;      /* events in the slot */
    uint64_t peer;       /* the template's group index or peer rank */
    uint32_t first_event; /* the slot's first event (for gs_event_peer) */
} des_slot;

/* What one rank's groups and pipeline peers look like to the cost models: its collectives'
 * and sends' durations depend on nothing else. */
typedef struct des_variant {
    gs_coll_shape shape[GS_GROUP_KIND_COUNT];
    uint64_t same_node; /* bit j: the peer of p2p slot j is on the rank's node */
    double *base_s;     /* per event of the template: duration before the overlap and straggler
                           factors, seconds */
    double overlap[GS_STREAM_COUNT];      /* a tensor-bound kernel's slowdown while this
                                             communication stream moves data (sim/contention.h,
                                             from the shapes) */
    double overlap_mem[GS_STREAM_COUNT];  /* ... a memory-bound kernel's */
    double overlap_wait[GS_STREAM_COUNT]; /* ... while its event waits for its peers: the SMs
                                             the NCCL kernel holds, no traffic */
} des_variant;

typedef struct des_tmpl {
    const gs_rank_events *list;   /* the events */
    uint32_t *stream_ev;          /* event indices per stream in list order, concatenated */
    size_t stream_off[GS_STREAM_COUNT + 1];
    uint32_t *dep_off;            /* CSR of dependencies: event k waits for dep_on[dep_off[k] ..] */
    uint32_t *dep_on;             /* stream << DEP_POS_BITS | position of the dependency in it */
    uint8_t *dep_streams;         /* bit s: some event of stream s waits for event k */
    uint8_t *kind;                /* gs_event_kind per event */
    uint8_t *tensor;              /* 1: a compute event bound by its FLOPs (the overlap factor
                                     of tensor-bound kernels slows it), else 0 */
    uint8_t *stream;              /* gs_stream per event */
    uint16_t *slot;               /* collective / send / recv: its slot, else DES_NO_SLOT */
    uint32_t *seq;                /* its sequence number within the slot */
    des_slot *slots;
    size_t nslots;
    des_variant *variants;
    size_t nvariants, cap_variants;
    uint64_t collectives;         /* collective events in the list */
    double *host_s;               /* per event: when the rank's host thread has issued it, seconds
                                     from the step's start (the host costs of it and every event
                                     before it in the list); NULL: the host is not modelled */
    double host_end_s;            /* the last of them: past it no event waits for the host */
} des_tmpl;

/* A slot as one rank list resolves it: for collectives and sends, instance / pair
 * first + seq; for recvs, first + seq while seq < lim (the sender's pairs), own + seq - lim
 * beyond (receives nobody in the schedule sends). */
typedef struct des_rslot {
    uint64_t peer;  /* the group index or peer rank of this rank */
    uint64_t first, own;
    uint32_t lim;
} des_rslot;

typedef struct rank_rt {
    /* what the loop reads on every event of the rank, first (one cache line) */
    uint64_t base;                   /* offset of its events in the per-event arrays (shared cores) */
    uint32_t tmpl;                   /* its template */
    uint32_t variant;                /* its durations (des_tmpl.variants) */
    uint32_t cursor[GS_STREAM_COUNT];
    uint8_t busy[GS_STREAM_COUNT];
    uint8_t ready;                   /* bit s: stream s's head may have become issuable since
                                        try_issue last looked (its stream freed, or one of the
                                        rank's events had its last dependency done) */
    uint8_t host_armed;              /* bit s: stream s's head waits for the host to issue it
                                        (a HOST_ENTRY is in the heap) */
    double slowdown;                 /* straggler factor on compute (1 = none) */
    /* setup and flow mode */
    size_t rslot;                    /* its resolved slots: c->rslots[rslot ..] */
    uint64_t node;
    uint64_t group[GS_GROUP_KIND_COUNT]; /* gs_group_of for each kind */
} rank_rt;

/* What a flow's end completes: the members of a collective instance, a send (and its waiting
 * receive), or one event alone. */
typedef enum flow_kind { FLOW_COLL, FLOW_PAIR, FLOW_SINGLE } flow_kind;
typedef struct flow_rec {
    flow_kind kind;
    uint64_t idx;     /* instance, pair or event id */
    double start_s;   /* when the transfer started */
    double lat_s;     /* latency added after the bytes have moved */
    /* a collective on shared cores (follow_coll_cpu; 0 otherwise) */
    double end_s;     /* when its bytes were last projected to have moved, seconds */
    double cpu_per_s; /* a member's CPU work, core-seconds, per second its bytes take */
    double cpu_t;     /* when its members' ps_coll_left were last brought up to date, seconds */
} flow_rec;

typedef struct run_ctx {
    const sim_state *st;
    const gs_schedule *sch;
    gs_timing *const *timing;
    des_tmpl *tmpl;
    size_t ntmpl;
    rank_rt *rt;
    des_rslot *rslots;
    uint64_t total;       /* events, all rank lists */
    /* collective instances: members arrive into inst_member[inst_off[i] ..] in order; the
     * instance starts when inst_off[i + 1] - inst_off[i] have arrived */
    uint64_t *inst_off;
    uint64_t *inst_member; /* event ids */
    uint32_t *inst_arrived;
    double *inst_ready;   /* the latest member's arrival, seconds */
    size_t ninst;
    /* send/recv pairs: [2p] the send's event id, [2p + 1] the recv's (DES_NONE: not in the
     * schedule); pair_posted bit 0: the send is posted, bit 1: the recv */
    uint64_t *pair;
    double *pair_end;     /* when the send's data has landed (NAN before the send) */
    uint8_t *pair_posted;
    size_t npairs;
    gs_queue h;
    double now;
    uint64_t done;
    /* flow mode (NULL / unused in analytic mode) */
    gs_flow_model *fm;
    flow_rec *fr;         /* per flow id: what its end completes */
    size_t fr_cap;
    uint64_t *members;    /* scratch: ranks of a collective's present members */
    size_t members_cap;
    /* shared cores (cm.cores > 0): running compute events share them equally; per-event arrays
     * are indexed by rank list base + index */
    double *ps_left;      /* per event: seconds of work left at full speed */
    double *ps_delay;     /* per event: launch latency after its work (not shared) */
    uint32_t *ps_ver;     /* per event: version of its latest projected end (0: not shared) */
    uint64_t *ps_active;  /* running compute events (event ids) */
    size_t ps_n;
    double ps_load;       /* ranks computing (class members counted) */
    double *ps_coll;      /* per event: the cores a running collective keeps busy (0: none) */
    size_t ps_ncoll;      /* collectives running with ps_coll > 0 */
    double ps_coll_load;  /* their sum */
    double *ps_coll_left; /* flow mode: per event, the core-seconds of CPU work a running
                             collective's member still has to do (follow_coll_cpu); else NULL */
    double ps_rate;       /* speed of each, fraction of one core */
    double ps_t;          /* when ps_left was last brought up to date */
} run_ctx;

/* ---- sim/des_index.c ---- */

/* Zeroed memory for arrays of millions of entries: 2 MiB aligned and, where the kernel offers
 * it, backed by huge pages (a first touch per 2 MiB instead of per 4 KiB page); free() frees
 * it. NULL when out of memory. */
void *des_big_calloc(size_t n, size_t size);

/* Sets up everything but the loop (templates, rank state, instances, pairs, durations, shared
 * core arrays). GS_ERR_NOMEM or GS_ERR_INPUT (a collective group or rank beyond the mesh). */
gs_status des_ctx_init(run_ctx *c, const sim_state *st, const gs_schedule *sch, gs_timing *const *timing,
                       gs_error *err);
void des_ctx_fini(run_ctx *c);
/* Bytes held by c's arrays (the heap not counted). */
uint64_t des_state_bytes(const run_ctx *c);
/* The collective instance or send/recv pair of event k of rank list ri. */
uint64_t des_match(const run_ctx *c, size_t ri, uint32_t k);
/* The peer of event k of rank list ri (its own, not its template's). */
uint64_t des_peer(const run_ctx *c, size_t ri, uint32_t k);

/* The group shape collective e is timed on: p2p CP's ring (a cp_kv all-gather of part
 * GS_PART_RING) on a group spanning nodes steps at its inter-node hop's pace, one NIC each (the
 * same-node hops beside it finish first), so it is timed as a ring with one rank per node. */
static inline gs_coll_shape des_coll_shape(gs_coll_shape shape, const gs_event *e)
{
    shape.nranks = e->group_size;
    shape.net_share = e->net_share;
    if (e->role == GS_ROLE_CP_KV && e->part == GS_PART_RING && shape.nnodes > 1) {
        shape.nnodes = shape.nranks;
        shape.ppn = 1;
        shape.siblings = 1;
    }
    return shape;
}

static inline const gs_event *des_event(const run_ctx *c, size_t ri, uint32_t k)
{
    return &c->tmpl[c->rt[ri].tmpl].list->events[k];
}

static inline gs_timing *des_timing(const run_ctx *c, uint64_t id)
{
    return &c->timing[EV_LIST(id)][EV_INDEX(id)];
}

/* ---- sim/des.c ---- */

int des_complete_at(run_ctx *c, uint64_t id, double start, double dur);
/* Every member of collective instance `in` runs from start for dur: as des_complete_at for each
 * in reverse order of arrival, with one heap entry standing for all (gs_queue_push_span). Only
 * where nothing else is pushed between the members' ends (no shared cores). */
int des_complete_instance(run_ctx *c, uint64_t in, double start, double dur);
/* The host's wake-up latency when event k of rank list ri waits for an event of another
 * stream (compute.wake_s, 0 unless calibrated). */
double des_cross_stream_wake(const run_ctx *c, size_t ri, uint32_t k);

/* ---- sim/des_flow.c ---- */

/* Shared cores (cm.cores > 0): see des_flow.c. Each returns 0, or -1 out of memory (ps_pop: 1
 * when the entry is stale or its launch latency is still to run). */
int ps_start(run_ctx *c, uint64_t id, double dur, double delay);
int ps_pop(run_ctx *c, uint64_t id, uint32_t ver);
int ps_coll_start(run_ctx *c, uint64_t id, double dur);
int ps_coll_end(run_ctx *c, uint64_t id);

/* A collective as a flow: its group's shape, its cost alone, the latency part and the seconds
 * its bytes take alone. */
typedef struct coll_plan {
    gs_coll_shape shape;
    gs_coll_cost cost;
    double lat_s, work_s;
} coll_plan;

/* 1 when collective event k of rank list ri moves no bytes over a link, 0 when it is a flow
 * (p filled). */
int coll_flow_plan(const run_ctx *c, size_t ri, uint32_t k, coll_plan *p);
int start_coll_flow(run_ctx *c, uint64_t in, size_t ri, uint32_t k, const coll_plan *p);
int start_send_flow(run_ctx *c, uint64_t id, double dur);
int issue_p2p_flow(run_ctx *c, uint64_t id, double dur);
int finish_flow(run_ctx *c, uint32_t flow);

#endif
