/* The sim backend's discrete-event core: per rank and stream, issue every event whose
 * dependencies are done and whose stream is free; a collective starts when every member of its
 * group present in the schedule has reached it, a send/recv pair when both sides are posted; pop
 * the earliest completion (binary heap, ties broken by insertion order, so the same schedule
 * gives the same times); release its dependents. Costs come from sim/compute.c and
 * sim/tuner.c; this loop holds no cost formula.
 *
 * Flow mode (sim/flow.c): a collective or send that moves bytes starts as a flow on the shared
 * links instead of taking a fixed time; its end moves whenever a flow on its links starts or
 * ends. Heap entries for flow ends carry the flow's version and are skipped once stale (an
 * event's entry carries its rank list index in that field instead); the
 * members complete the flow's latency after its bytes have moved. Analytic mode never enters
 * these paths. On the class path (one representative per pipeline stage) a flow also loads the
 * shared links with the copies of it that the rest of the class runs at the same time
 * (gs_flow_class; the count is derived in flow.c), so groups that share a NIC still meet.
 * The host driver's shared cores (cm.cores > 0, below) apply in both modes: in flow mode a
 * collective's CPU work follows the time its flow actually takes (follow_coll_cpu), and a
 * collective or send whose thread is woken by another stream starts its flow that much later
 * (a deferred start, DEFER_ENTRY).
 *
 * Streams run their events in list order (like CUDA streams). Time is in seconds from 0. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/calib_file.h"
#include "sim/contention.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/queue.h"
#include "sim/flow.h"
#include "sim/sim.h"
#include "sim/topology.h"

#define NONE UINT64_MAX

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

/* ---- a small open-addressing map from 64-bit keys to 64-bit values ------------------------------ */

typedef struct map64 {
    uint64_t *keys, *vals;
    size_t cap, n;
} map64;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int map_init(map64 *m, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2 + 16)
        cap *= 2;
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (!m->keys || !m->vals)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = NONE;
    m->cap = cap;
    m->n = 0;
    return 0;
}

static void map_fini(map64 *m)
{
    free(m->keys);
    free(m->vals);
}

/* Returns the slot of key, inserting it with value `fresh` when absent (*inserted = 1). */
static size_t map_slot(map64 *m, uint64_t key, uint64_t fresh, int *inserted)
{
    size_t i = (size_t)mix64(key) & (m->cap - 1);
    while (m->keys[i] != NONE && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == NONE) {
        m->keys[i] = key;
        m->vals[i] = fresh;
        m->n++;
        if (inserted)
            *inserted = 1;
    } else if (inserted) {
        *inserted = 0;
    }
    return i;
}

static uint64_t key3(uint64_t a, uint64_t b, uint64_t c)
{
    return mix64(a * 0x9e3779b97f4a7c15ULL ^ mix64(b + 0x632be59bd9b4e019ULL) ^ mix64(c * 31 + 7));
}

/* ---- the cost cache: seconds by a triple of 64-bit keys, compared whole ---------------------------- */

typedef struct cost_entry {
    uint64_t key[3];
    double cost_s;
    int used;
} cost_entry;

typedef struct cost_map {
    cost_entry *v;
    size_t cap, n;
} cost_map;

static int cost_map_init(cost_map *m, size_t cap)
{
    m->v = calloc(cap, sizeof *m->v);
    m->cap = cap;
    m->n = 0;
    return m->v ? 0 : -1;
}

/* The entry of (a, b, c); a new one (used = 0, key filled) when absent: the caller sets cost_s
 * and used, then calls cost_map_grow. */
static cost_entry *cost_map_find(const cost_map *m, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ b * 0xc2b2ae3d27d4eb4fULL ^ c * 0x165667b19e3779f9ULL;
    size_t i = (size_t)(h ^ h >> 29 ^ h >> 47) & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        cost_entry *e = &m->v[i];
        if (!e->used) {
            e->key[0] = a;
            e->key[1] = b;
            e->key[2] = c;
            return e;
        }
        if (e->key[0] == a && e->key[1] == b && e->key[2] == c)
            return e;
    }
}

/* Counts a new entry and doubles the table when it is half full (stays correct if that fails). */
static void cost_map_grow(cost_map *m)
{
    if (++m->n * 2 < m->cap)
        return;
    cost_map bigger;
    if (cost_map_init(&bigger, 2 * m->cap) != 0)
        return;
    for (size_t i = 0; i < m->cap; i++)
        if (m->v[i].used)
            *cost_map_find(&bigger, m->v[i].key[0], m->v[i].key[1], m->v[i].key[2]) = m->v[i];
    bigger.n = m->n;
    free(m->v);
    *m = bigger;
}

/* ---- the run ------------------------------------------------------------------------------------ */

typedef struct rank_rt {
    uint64_t base;                   /* global id of event 0 */
    uint32_t *stream_ev;             /* events of each stream in order, concatenated */
    size_t stream_off[GS_STREAM_COUNT + 1];
    size_t cursor[GS_STREAM_COUNT];
    int busy[GS_STREAM_COUNT];
    gs_coll_shape shape[GS_GROUP_KIND_COUNT];
    uint64_t node;
    double slowdown;                 /* straggler factor on compute (1 = none) */
    double overlap[GS_STREAM_COUNT]; /* compute slowdown while this communication stream moves
                                        data (gs_compute_overlap_factor of its group's bandwidth) */
    double overlap_wait[GS_STREAM_COUNT]; /* ... while its event waits for its peers: the SMs the
                                             NCCL kernel holds, no traffic */
} rank_rt;

/* What the loop reads of an event when it issues or completes it, packed (16 bytes, in global
 * id order) so that it does not load the 80-byte gs_event: its duration before the compute
 * overlap slowdown and straggler factor (event_base_s), kind and stream. */
typedef struct hot_event {
    double base_s;      /* seconds */
    uint32_t rank_list; /* index of its rank list in the schedule (< PS_ENTRY, checked) */
    uint8_t kind;       /* gs_event_kind */
    uint8_t stream;     /* gs_stream */
} hot_event;

typedef struct run_ctx {
    cost_map cost_cache;  /* event cost by (shape, op) or (rank list, group, op, bytes): seconds */
    const sim_state *st;
    const gs_schedule *sch;
    gs_timing *const *timing;
    rank_rt *rt;
    uint64_t total;
    hot_event *hot;       /* per global event */
    uint32_t *remaining;  /* per global event: deps not done */
    uint64_t *dep_off;    /* CSR of dependents, per global event */
    uint64_t *dep_list;
    uint64_t *match;      /* per global event: collective instance or p2p pair index, NONE */
    /* collective instances */
    uint64_t *inst_needed, *inst_arrived, *inst_head; /* waiting list head (global id) */
    uint64_t *wait_next;  /* per global event: next waiting member */
    double *inst_ready;
    size_t ninst;
    /* p2p pairs: [2k] send gid, [2k+1] recv gid; posted flags via timing */
    uint64_t *pair;
    double *pair_end;     /* per pair: when the send's data has landed (NAN before the send) */
    uint8_t *posted;      /* per global event */
    size_t npairs;
    uint64_t *rank_of;    /* per global event: rank list index (compact: filled lazily) */
    gs_queue h;
    double now;
    uint64_t done;
    /* flow mode (NULL / unused in analytic mode) */
    gs_flow_model *fm;
    struct flow_rec *fr;  /* per flow id: what its end completes */
    size_t fr_cap;
    uint64_t *members;    /* scratch: ranks of a collective's present members */
    size_t members_cap;
    /* shared cores (cm.cores > 0): running compute events share them equally */
    double *ps_left;      /* per global event: seconds of work left at full speed */
    double *ps_delay;     /* per global event: launch latency after its work (not shared) */
    uint32_t *ps_ver;     /* per global event: version of its latest projected end (0: not shared) */
    uint64_t *ps_active;  /* running compute events */
    size_t ps_n;
    double ps_load;       /* ranks computing (class members counted) */
    double *ps_coll;      /* per global event: the cores a running collective keeps busy (0: none) */
    size_t ps_ncoll;      /* collectives running with ps_coll > 0 */
    double ps_coll_load;  /* their sum */
    double *ps_coll_left; /* flow mode: per global event, the core-seconds of CPU work a running
                             collective's member still has to do (follow_coll_cpu); else NULL */
    double ps_rate;       /* speed of each, fraction of one core */
    double ps_t;          /* when ps_left was last brought up to date */
} run_ctx;

/* What a flow's end completes: the members of a collective instance, a send (and its waiting
 * receive), or one event alone. */
typedef enum flow_kind { FLOW_COLL, FLOW_PAIR, FLOW_SINGLE } flow_kind;
typedef struct flow_rec {
    flow_kind kind;
    uint64_t idx;     /* instance, pair or global event id */
    double start_s;   /* when the transfer started */
    double lat_s;     /* latency added after the bytes have moved */
    /* a collective on shared cores (follow_coll_cpu; 0 otherwise) */
    double end_s;     /* when its bytes were last projected to have moved, seconds */
    double cpu_per_s; /* a member's CPU work, core-seconds, per second its bytes take */
    double cpu_t;     /* when its members' ps_coll_left were last brought up to date, seconds */
} flow_rec;

/* The rank list of global event gid (filled in the packed record while the run is set up). */
static size_t rank_index_of(const run_ctx *c, uint64_t gid)
{
    return c->hot[gid].rank_list;
}

/* An event's duration as far as it does not depend on the moment it starts (everything but a
 * compute event's overlap slowdown and its rank's straggler factor, see event_duration); computed
 * once per event while the run is set up. */
static double event_base_s(run_ctx *c, size_t ri, const gs_event *e)
{
    const sim_state *st = c->st;
    const rank_rt *rt = &c->rt[ri];
    const gs_topo *topo = st->flow ? &st->flow_topo : &st->topo;
    switch ((gs_event_kind)e->kind) {
    case GS_EV_COMPUTE: {
        /* identical ops (every layer, every micro-batch) cost the same: cache by shape */
        cost_entry *ce = cost_map_find(&c->cost_cache,
                                       ((uint64_t)e->op << 8 | e->phase) ^ ((uint64_t)e->gemm_batch << 16),
                                       (uint64_t)e->gemm_m << 32 | e->gemm_n,
                                       ((uint64_t)e->gemm_k << 32) ^ e->bytes ^ ((uint64_t)(e->flops * 1e-3) << 7));
        double t;
        if (!ce->used) {
            t = (e->phase == GS_PHASE_OPTIM && st->s.strategy.offload) ? gs_compute_time_host(&st->cm, e)
                                                                       : gs_compute_time(&st->cm, e);
            ce->cost_s = t;
            ce->used = 1;
            cost_map_grow(&c->cost_cache);
        } else {
            t = ce->cost_s;
        }
        return t;
    }
    case GS_EV_COLLECTIVE: {
        cost_entry *ce = cost_map_find(&c->cost_cache, (uint64_t)ri << 16 | (uint64_t)e->group << 8 | e->op,
                                       e->bytes, e->group_size | 1ULL << 63);
        double t = 0.0;
        if (!ce->used) {
            gs_coll_cost cost;
            gs_coll_shape shape = rt->shape[e->group];
            shape.nranks = e->group_size;
            if (st->flow)
                shape.siblings = 1; /* flow mode shares the NICs among the flows themselves */
            if (gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, e->bytes, GS_ALGO_COUNT, &cost) == GS_OK)
                t = cost.time_s;
            ce->cost_s = t;
            ce->used = 1;
            cost_map_grow(&c->cost_cache);
        } else {
            t = ce->cost_s;
        }
        return t;
    }
    case GS_EV_SEND:
    case GS_EV_RECV: {
        int same = gs_mesh_rank_node(&st->mesh, e->peer) == rt->node;
        return gs_p2p_time(topo, same, e->bytes);
    }
    case GS_EV_COPY_H2D:
    case GS_EV_COPY_D2H:
        return 2e-6 + (double)e->bytes / st->host_link_bw;
    default:
        return 0.0;
    }
}

/* The duration of an event issued now: a compute event runs 1/f as fast while a communication
 * stream of its rank is busy (f: that stream's overlap factor; the largest when several are),
 * for as long as the running communication event lasts (to its end when it has started; the
 * whole event when it still waits for its peers), then at full speed; and it is stretched by its
 * rank's straggler factor. */
static double event_duration(const run_ctx *c, size_t ri, const hot_event *h)
{
    if (h->kind != GS_EV_COMPUTE)
        return h->base_s;
    const rank_rt *rt = &c->rt[ri];
    double t = h->base_s, f = 1.0, window = 0.0;
    static const int comm[] = {GS_STREAM_DP, GS_STREAM_TP, GS_STREAM_PP};
    for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++) {
        int s = comm[i];
        if (!rt->busy[s] || !(rt->overlap[s] > 1.0))
            continue;
        uint32_t ev = rt->stream_ev[rt->stream_off[s] + rt->cursor[s]];
        const gs_timing *tm = &c->timing[ri][ev];
        int moving = tm->end_s > 0.0; /* started: its end is known */
        double w = moving ? (tm->end_s > c->now ? tm->end_s - c->now : 0.0) : HUGE_VAL;
        double fs = moving ? rt->overlap[s] : rt->overlap_wait[s];
        if (fs > f) {
            f = fs;
            window = w;
        }
    }
    double d = t * f;
    if (f > 1.0 && window < d)
        d = window + (t - window / f); /* the work left after the overlap runs at full speed */
    return d * rt->slowdown;
}

static int complete_at(run_ctx *c, uint64_t gid, double start, double dur)
{
    size_t ri = c->hot[gid].rank_list;
    gs_timing *t = &c->timing[ri][gid - c->rt[ri].base];
    t->start_s = start;
    t->end_s = start + dur;
    return gs_queue_push(&c->h, start + dur, gid, (uint32_t)ri); /* an event's entry carries its rank list */
}

/* A heap entry's version field: the rank list index of an ordinary completion, or PS_ENTRY |
 * the version of a shared-core event's projected end, or DEFER_ENTRY: flow mode starts the
 * flow of this event (a collective's last member to arrive, or a send) now, its thread woken
 * by another stream's (cross_stream_wake) at the time of the entry. */
#define PS_ENTRY 0x80000000u
#define DEFER_ENTRY 0x7fffffffu

/* ---- shared cores ------------------------------------------------------------------------------- */

/* The host driver's ranks are threads of one machine: k compute events running at once on C
 * cores, beside L runnable threads of other processes, each progress at min(1, C / (L + k)) of
 * full speed (the OS shares the cores fairly among runnable threads), divided by
 * 1 + s (min(k, C) - 1) for the contention of the ones running at once (s:
 * concurrency_slowdown, 0 unless calibrated). Their
 * ends move whenever one starts or ends; heap entries carry the event's version and stale ones
 * are skipped. */
static void ps_advance(run_ctx *c)
{
    double dt = c->now - c->ps_t;
    if (dt > 0)
        for (size_t i = 0; i < c->ps_n; i++)
            c->ps_left[c->ps_active[i]] -= dt * c->ps_rate;
    c->ps_t = c->now;
}

static int ps_reschedule(run_ctx *c)
{
    double cores = c->st->cm.cores, busy = c->ps_load + c->ps_coll_load, demand = busy + c->st->cm.background_load;
    c->ps_rate = demand > cores ? cores / demand : 1.0;
    /* n of our threads on the cores at once (at most the cores) contend for their caches and
     * memory bandwidth: each compute event's work takes 1 + s (n - 1) times as long */
    double n = busy < cores ? busy : cores;
    if (c->st->cm.concurrency_slowdown > 0 && n > 1)
        c->ps_rate /= 1.0 + c->st->cm.concurrency_slowdown * (n - 1);
    for (size_t i = 0; i < c->ps_n; i++) {
        uint64_t g = c->ps_active[i];
        double left = c->ps_left[g] > 0 ? c->ps_left[g] : 0;
        if (gs_queue_push(&c->h, c->now + left / c->ps_rate, g, PS_ENTRY | ++c->ps_ver[g]) != 0)
            return -1;
    }
    return 0;
}

static int ps_start(run_ctx *c, size_t ri, uint64_t gid, double dur, double delay)
{
    gs_timing *t = &c->timing[ri][gid - c->rt[ri].base];
    ps_advance(c);
    t->start_s = c->now;
    t->end_s = c->now + dur;
    if (delay > dur)
        delay = dur;
    c->ps_left[gid] = dur - delay;
    c->ps_delay[gid] = delay;
    c->ps_active[c->ps_n++] = gid;
    c->ps_load += (double)c->sch->ranks[ri].class_size;
    return ps_reschedule(c);
}

/* The popped entry of gid with version ver: 1 when stale or when the work is done but the
 * launch latency is still to run (its end is then pushed as an ordinary completion), 0 when
 * the event ended now, -1 out of memory. */
static int ps_pop(run_ctx *c, uint64_t gid, uint32_t ver)
{
    if (ver != c->ps_ver[gid])
        return 1;
    ps_advance(c);
    size_t ri = rank_index_of(c, gid);
    double delay = c->ps_delay[gid];
    c->timing[ri][gid - c->rt[ri].base].end_s = c->now + delay;
    for (size_t i = 0; i < c->ps_n; i++)
        if (c->ps_active[i] == gid) {
            c->ps_active[i] = c->ps_active[--c->ps_n];
            break;
        }
    c->ps_ver[gid] = 0; /* done: any later entry (version >= 1) is stale */
    c->ps_load -= (double)c->sch->ranks[ri].class_size;
    if (c->ps_n == 0)
        c->ps_load = 0;
    if (ps_reschedule(c) != 0)
        return -1;
    if (delay > 0)
        return gs_queue_push(&c->h, c->now + delay, gid, (uint32_t)ri) != 0 ? -1 : 1;
    return 0;
}

/* The host's wake-up latency when event e of rank list r waits for an event of another stream
 * (that stream's thread wakes e's; compute.wake_s, 0 unless calibrated). */
static double cross_stream_wake(const run_ctx *c, const gs_rank_events *r, const gs_event *e)
{
    if (c->st->cm.wake_s <= 0)
        return 0;
    const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
    for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
        if (r->events[d[j]].stream != e->stream)
            return c->st->cm.wake_s;
    return 0;
}

/* The copying and summing part of a host collective's CPU work, core-seconds per member:
 * coll_cpu_share x (its time - its zero-byte time) under the mode's links (0 when not
 * calibrated). */
static double coll_copy_cpu_s(const run_ctx *c, size_t ri, const gs_event *e)
{
    const sim_state *st = c->st;
    const gs_topo *topo = st->flow ? &st->flow_topo : &st->topo;
    gs_coll_shape shape = c->rt[ri].shape[e->group];
    shape.nranks = e->group_size;
    gs_coll_cost full, zero;
    if (st->cm.coll_cpu_share > 0 && e->bytes > 0 &&
        gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, e->bytes, GS_ALGO_COUNT, &full) == GS_OK &&
        gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, 0, GS_ALGO_COUNT, &zero) == GS_OK)
        return st->cm.coll_cpu_share * (full.time_s - zero.time_s);
    return 0;
}

/* Sets the cores the running collective gid keeps busy (ranks of its class counted). */
static void ps_coll_set(run_ctx *c, uint64_t gid, double load)
{
    if (c->ps_coll[gid] > 0)
        c->ps_ncoll--;
    c->ps_coll_load += load - c->ps_coll[gid];
    c->ps_coll[gid] = load;
    if (load > 0)
        c->ps_ncoll++;
    if (c->ps_ncoll == 0)
        c->ps_coll_load = 0;
}

/* A host collective's members copy and sum on the shared cores: from its start to its end the
 * collective keeps coll_cpu_share x (its time - its zero-byte time) / its time of a core busy
 * per member (the rest of its time is the members meeting, blocked), plus the CPU part of its
 * dispatch (launch_cpu_s, and wake_cpu_s when it waits for another stream) over the same span.
 * Its time is dur, the time it takes alone; in flow mode follow_coll_cpu respreads that work
 * when its flow's end moves. */
static int ps_coll_start(run_ctx *c, size_t ri, uint64_t gid, const gs_event *e, double dur)
{
    const sim_state *st = c->st;
    if (!c->ps_coll || dur <= 0)
        return 0;
    /* its dispatch: the CPU part of its launch and of a cross-stream wake-up, as for compute */
    const gs_rank_events *r = &c->sch->ranks[ri];
    double wake = cross_stream_wake(c, r, e);
    double cpu = (st->cm.launch_s > 0 ? fmin(st->cm.launch_cpu_s, st->cm.launch_s) : 0) +
                 (wake > 0 ? fmin(st->cm.wake_cpu_s, wake) : 0);
    cpu += coll_copy_cpu_s(c, ri, e);
    double frac = cpu / dur;
    if (!(frac > 0))
        return 0;
    if (frac > 1)
        frac = 1;
    ps_advance(c);
    if (c->ps_coll_left)
        c->ps_coll_left[gid] = frac * dur; /* the work the load above does by the end of dur */
    c->ps_coll[gid] = frac * (double)c->sch->ranks[ri].class_size;
    c->ps_coll_load += c->ps_coll[gid];
    c->ps_ncoll++;
    return ps_reschedule(c);
}

static int ps_coll_end(run_ctx *c, uint64_t gid)
{
    if (!c->ps_coll || c->ps_coll[gid] <= 0)
        return 0;
    ps_advance(c);
    c->ps_coll_load -= c->ps_coll[gid];
    c->ps_coll[gid] = 0;
    if (--c->ps_ncoll == 0)
        c->ps_coll_load = 0;
    return ps_reschedule(c);
}

/* ---- flow mode ---------------------------------------------------------------------------------- */

/* A host collective's CPU work follows the time its flow takes. Each member's work is
 * W = dispatch + coll_cpu_share x (T - T0) x (the time its bytes take / the time they take
 * alone), T and T0 its time alone and at zero bytes (ps_coll_start): the copying goes on while
 * the bytes move, however slowly. Spread evenly from the collective's start to its end as in
 * analytic mode: when the flow's projected end moves by d, each member's work still to do
 * (ps_coll_left) grows by cpu_per_s x d and the member keeps (that work / the time left until
 * its projected end) of a core busy, at most one. A flow that never shares a link keeps its
 * first projection, so its members' load is analytic mode's. */
static int follow_coll_cpu(run_ctx *c, const gs_flow_change *ch, size_t n)
{
    int moved = 0;
    for (size_t i = 0; i < n; i++) {
        if (ch[i].flow >= c->fr_cap)
            continue;
        flow_rec *fr = &c->fr[ch[i].flow];
        if (fr->kind != FLOW_COLL || ch[i].end_s == fr->end_s)
            continue;
        if (!moved)
            ps_advance(c);
        moved = 1;
        double left_s = ch[i].end_s + fr->lat_s - c->now; /* until the members' projected end */
        for (uint64_t g = c->inst_head[fr->idx]; g != NONE; g = c->wait_next[g]) {
            double members = (double)c->sch->ranks[rank_index_of(c, g)].class_size;
            double work = c->ps_coll_left[g] - c->ps_coll[g] / members * (c->now - fr->cpu_t) +
                          fr->cpu_per_s * (ch[i].end_s - fr->end_s);
            double frac = left_s > 0 && work > 0 ? fmin(1.0, work / left_s) : 0;
            c->ps_coll_left[g] = work;
            ps_coll_set(c, g, frac * members);
        }
        fr->end_s = ch[i].end_s;
        fr->cpu_t = c->now;
    }
    return moved ? ps_reschedule(c) : 0;
}

/* Pushes the new ends the flow solver reports. */
static int push_flow_changes(run_ctx *c)
{
    const gs_flow_change *ch;
    size_t n = gs_flow_changes(gs_flow_model_net(c->fm), &ch);
    for (size_t i = 0; i < n; i++)
        if (gs_queue_push(&c->h, ch[i].end_s, c->total + ch[i].flow, ch[i].version) != 0)
            return -1;
    return c->ps_coll_left ? follow_coll_cpu(c, ch, n) : 0;
}

/* Records what flow id's end completes; a collective's members on shared cores (cpu_per_s
 * > 0 or dispatch work) started their load at cpu_t, the flow alone moving its bytes in work_s. */
static int record_flow(run_ctx *c, uint32_t id, flow_kind kind, uint64_t idx, double lat, double work_s,
                       double cpu_per_s, double cpu_t)
{
    if (id >= c->fr_cap) {
        size_t cap = c->fr_cap ? c->fr_cap : 256;
        while (cap <= id)
            cap *= 2;
        flow_rec *fr = realloc(c->fr, cap * sizeof *fr);
        if (!fr)
            return -1;
        c->fr = fr;
        c->fr_cap = cap;
    }
    c->fr[id] = (flow_rec){kind, idx, c->now, lat, c->now + work_s, cpu_per_s, cpu_t};
    return push_flow_changes(c);
}

/* A collective as a flow: its group's shape, its cost alone, the latency part and the seconds
 * its bytes take alone. */
typedef struct coll_plan {
    gs_coll_shape shape;
    gs_coll_cost cost;
    double lat_s, work_s;
} coll_plan;

/* The plan of event e of rank list ri; 1 when it does not move bytes over a link (it then
 * takes its fixed duration), 0 when it is a flow. */
static int coll_flow_plan(const run_ctx *c, size_t ri, const gs_event *e, coll_plan *p)
{
    const gs_topo *topo = &c->st->flow_topo;
    p->shape = c->rt[ri].shape[e->group];
    p->shape.nranks = e->group_size;
    if (gs_coll_estimate(topo, (gs_coll_op)e->op, &p->shape, e->bytes, GS_ALGO_COUNT, &p->cost) != GS_OK ||
        !(p->cost.time_s > 0.0))
        return 1;
    p->lat_s = gs_flow_coll_latency(topo, (gs_coll_op)e->op, &p->shape, &p->cost);
    p->work_s = p->cost.time_s - p->lat_s;
    return p->work_s > 0.0 ? 0 : 1;
}

/* Starts collective instance `in` (every member present, the last one being event e of rank
 * list ri) as the flow planned in p. Returns 0, or -1 out of memory. */
static int start_coll_flow(run_ctx *c, uint64_t in, size_t ri, const gs_event *e, const coll_plan *p)
{
    size_t n = 0;
    uint32_t id;
    double arrived = 0; /* when the last member arrived: the members' CPU load started then */
    for (uint64_t g = c->inst_head[in]; g != NONE; g = c->wait_next[g]) {
        size_t gr = rank_index_of(c, g);
        double posted = c->timing[gr][g - c->rt[gr].base].posted_s;
        if (posted > arrived)
            arrived = posted;
        if (n == c->members_cap) {
            size_t cap = c->members_cap ? 2 * c->members_cap : 64;
            uint64_t *m = realloc(c->members, cap * sizeof *m);
            if (!m)
                return -1;
            c->members = m;
            c->members_cap = cap;
        }
        c->members[n++] = c->sch->ranks[rank_index_of(c, g)].rank;
    }
    gs_flow_class cls = {&c->st->mesh, (gs_group_kind)e->group};
    if (gs_flow_model_coll(c->fm, c->now, (gs_coll_op)e->op, &p->shape, e->bytes, &p->cost, c->members, n,
                           p->work_s, c->sch->exact ? NULL : &cls, &id) != GS_OK)
        return -1;
    double cpu_per_s = c->ps_coll_left ? coll_copy_cpu_s(c, ri, e) / p->work_s : 0;
    return record_flow(c, id, FLOW_COLL, in, p->lat_s, p->work_s, cpu_per_s, arrived);
}

/* Starts a send (or a receive whose sender is not in the schedule) of event e on rank list ri
 * as a flow. Returns 1 when it moves no bytes, 0 when started, -1 out of memory. */
static int start_p2p_flow(run_ctx *c, size_t ri, const gs_event *e, flow_kind kind, uint64_t idx)
{
    const gs_topo *topo = &c->st->flow_topo;
    uint64_t self = c->sch->ranks[ri].rank;
    int same = gs_mesh_rank_node(&c->st->mesh, e->peer) == c->rt[ri].node;
    uint32_t id;
    if (e->bytes == 0)
        return 1;
    double lat = gs_flow_p2p_latency(topo, same);
    double work = gs_p2p_time(topo, same, e->bytes) - lat;
    if (!(work > 0.0))
        return 1;
    uint64_t src = e->kind == GS_EV_SEND ? self : e->peer, dst = e->kind == GS_EV_SEND ? e->peer : self;
    gs_flow_class cls = {&c->st->mesh, GS_GROUP_PP};
    if (gs_flow_model_p2p(c->fm, c->now, src, dst, e->bytes, work, c->sch->exact ? NULL : &cls, &id) != GS_OK)
        return -1;
    return record_flow(c, id, kind, idx, lat, work, 0, c->now);
}

/* Starts the send gid (event e of rank list ri, posted) now: its flow, or, moving no bytes,
 * done after dur as in analytic mode. */
static int start_send_flow(run_ctx *c, size_t ri, uint64_t gid, const gs_event *e, double dur)
{
    uint64_t p = c->match[gid];
    int r;
    if ((r = start_p2p_flow(c, ri, e, FLOW_PAIR, p)) <= 0)
        return r;
    if (complete_at(c, gid, c->now, dur) != 0)
        return -1;
    c->pair_end[p] = c->now + dur;
    uint64_t recv = c->pair[2 * p + 1];
    if (recv != NONE && c->posted[recv] && complete_at(c, recv, c->now, dur) != 0)
        return -1;
    return 0;
}

/* Flow mode's send/recv issue: as the analytic branch of try_issue, with the transfer's end
 * known only when its flow finishes. */
static int issue_p2p_flow(run_ctx *c, size_t ri, uint64_t gid, const gs_event *e, double dur)
{
    uint64_t p = c->match[gid];
    int r;
    c->posted[gid] = 1;
    if (e->kind == GS_EV_SEND) {
        /* a sender woken by the compute stream's thread starts that much later (host) */
        double wake = cross_stream_wake(c, &c->sch->ranks[ri], e);
        if (wake > 0)
            return gs_queue_push(&c->h, c->now + wake, gid, DEFER_ENTRY) != 0 ? -1 : 0;
        return start_send_flow(c, ri, gid, e, dur);
    }
    if (!isnan(c->pair_end[p])) {
        double end = c->pair_end[p] > c->now ? c->pair_end[p] : c->now;
        return complete_at(c, gid, c->now, end - c->now);
    }
    if (c->pair[2 * p] == NONE) {
        if ((r = start_p2p_flow(c, ri, e, FLOW_SINGLE, gid)) <= 0)
            return r;
        return complete_at(c, gid, c->now, dur);
    }
    return 0; /* the send is not posted yet, or its flow is running: its end completes us */
}

/* A flow's bytes have moved at c->now: take it off the links, then complete what it carried
 * after its latency. */
static int finish_flow(run_ctx *c, uint32_t id)
{
    flow_rec fr = c->fr[id];
    double end = c->now + fr.lat_s;
    if (gs_flow_finish(gs_flow_model_net(c->fm), c->now, id) != GS_OK || push_flow_changes(c) != 0)
        return -1;
    switch (fr.kind) {
    case FLOW_COLL:
        for (uint64_t g = c->inst_head[fr.idx]; g != NONE; g = c->wait_next[g])
            if (complete_at(c, g, fr.start_s, end - fr.start_s) != 0)
                return -1;
        return 0;
    case FLOW_PAIR: {
        uint64_t send = c->pair[2 * fr.idx], recv = c->pair[2 * fr.idx + 1];
        if (complete_at(c, send, fr.start_s, end - fr.start_s) != 0)
            return -1;
        c->pair_end[fr.idx] = end;
        if (recv != NONE && c->posted[recv]) {
            size_t ri = rank_index_of(c, recv);
            double start = c->timing[ri][recv - c->rt[ri].base].posted_s;
            if (start < fr.start_s)
                start = fr.start_s;
            if (complete_at(c, recv, start, end - start) != 0)
                return -1;
        }
        return 0;
    }
    case FLOW_SINGLE:
    default:
        return complete_at(c, fr.idx, fr.start_s, end - fr.start_s);
    }
}

/* Try to start the head event of each stream of rank list ri. */
static int try_issue(run_ctx *c, size_t ri)
{
    rank_rt *rt = &c->rt[ri];
    const gs_rank_events *r = &c->sch->ranks[ri];
    /* the communication streams first: a compute event released at the same instant as a
     * collective it runs beside starts with that stream busy, and so pays the overlap factor */
    for (int si = 0; si < GS_STREAM_COUNT; si++) {
        int s = si + 1 < GS_STREAM_COUNT ? si + 1 : GS_STREAM_COMPUTE;
        if (rt->busy[s])
            continue;
        size_t pos = rt->stream_off[s] + rt->cursor[s];
        if (pos >= rt->stream_off[s + 1])
            continue;
        uint32_t ev = rt->stream_ev[pos];
        uint64_t gid = rt->base + ev;
        if (c->remaining[gid])
            continue;
        const hot_event *h = &c->hot[gid];
        uint8_t kind = h->kind;
        const gs_event *e = &r->events[ev]; /* read only on the paths that need the whole event */
        rt->busy[s] = 1;
        c->timing[ri][ev].posted_s = c->now;
        double dur = event_duration(c, ri, h);
        if (kind == GS_EV_COLLECTIVE && c->match[gid] != NONE) {
            uint64_t in = c->match[gid];
            c->wait_next[gid] = c->inst_head[in];
            c->inst_head[in] = gid;
            /* a member whose thread is woken by another stream arrives that much later (the
             * host driver) */
            double arrive = c->now + cross_stream_wake(c, r, e);
            if (arrive > c->inst_ready[in])
                c->inst_ready[in] = arrive;
            if (++c->inst_arrived[in] == c->inst_needed[in]) {
                coll_plan plan;
                if (c->fm && coll_flow_plan(c, ri, e, &plan) == 0) {
                    /* the members' CPU load starts now, as in analytic mode; the flow when the
                     * last woken member is there */
                    for (uint64_t g = c->inst_head[in]; g != NONE; g = c->wait_next[g]) {
                        size_t gr = rank_index_of(c, g);
                        if (ps_coll_start(c, gr, g, &c->sch->ranks[gr].events[g - c->rt[gr].base], dur) != 0)
                            return -1;
                    }
                    if (c->inst_ready[in] > c->now) {
                        if (gs_queue_push(&c->h, c->inst_ready[in], gid, DEFER_ENTRY) != 0)
                            return -1;
                    } else if (start_coll_flow(c, in, ri, e, &plan) < 0) {
                        return -1;
                    }
                    continue;
                }
                /* everyone is here: all members start now and take the same time */
                for (uint64_t g = c->inst_head[in]; g != NONE; g = c->wait_next[g]) {
                    size_t gr = rank_index_of(c, g);
                    if (complete_at(c, g, c->inst_ready[in], dur) != 0 ||
                        ps_coll_start(c, gr, g, &c->sch->ranks[gr].events[g - c->rt[gr].base], dur) != 0)
                        return -1;
                }
            }
        } else if ((kind == GS_EV_SEND || kind == GS_EV_RECV) && c->match[gid] != NONE && c->fm) {
            if (issue_p2p_flow(c, ri, gid, &r->events[ev], dur) != 0)
                return -1;
        } else if ((kind == GS_EV_SEND || kind == GS_EV_RECV) && c->match[gid] != NONE) {
            /* NCCL p2p through proxy buffers: a send proceeds once posted and lands in the
             * receiver's buffer; the receive completes when it is posted and the data is there. */
            uint64_t p = c->match[gid];
            c->posted[gid] = 1;
            if (kind == GS_EV_SEND) {
                /* a sender woken by the compute stream's thread starts that much later (host) */
                double t0 = c->now + cross_stream_wake(c, r, e);
                if (complete_at(c, gid, t0, dur) != 0)
                    return -1;
                c->pair_end[p] = t0 + dur;
                uint64_t recv = c->pair[2 * p + 1];
                if (recv != NONE && c->posted[recv]) {
                    /* the receiver was waiting: the transfer runs from the send's start to its end */
                    if (complete_at(c, recv, c->now, t0 - c->now + dur) != 0)
                        return -1;
                }
            } else if (!isnan(c->pair_end[p])) {
                /* the data is in flight or landed: receive what is left of the transfer */
                double end = c->pair_end[p] > c->now ? c->pair_end[p] : c->now;
                if (complete_at(c, gid, c->now, end - c->now) != 0)
                    return -1;
            } else if (c->pair[2 * p] == NONE) {
                /* the sender is not in this schedule (a class representative's peer): alone */
                if (complete_at(c, gid, c->now, dur) != 0)
                    return -1;
            }
        } else if (kind == GS_EV_COMPUTE && c->ps_active) {
            const gs_compute_model *cm = &c->st->cm;
            double launch = gs_compute_launch_time(cm, e);
            /* the part of the launches that is work on the shared cores, not latency */
            double delay = launch - (cm->launch_s > 0 ? launch * fmin(1.0, cm->launch_cpu_s / cm->launch_s) : 0);
            /* a dependency on another stream: that stream's thread wakes this one */
            double wake = cross_stream_wake(c, r, e);
            delay += wake - fmin(wake, wake > 0 ? cm->wake_cpu_s : 0);
            dur += wake;
            if (ps_start(c, ri, gid, dur, delay) != 0)
                return -1;
        } else {
            if (complete_at(c, gid, c->now, dur) != 0)
                return -1;
        }
    }
    return 0;
}

static gs_status sim_run(void *state, const gs_schedule *sch, gs_timing *const *timing, gs_error *err)
{
    const sim_state *st = state;
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.st = st;
    c.sch = sch;
    c.timing = timing;
    gs_status rc = GS_OK;
    map64 present, inst_map, pair_map, seq_map;
    memset(&present, 0, sizeof present);
    memset(&inst_map, 0, sizeof inst_map);
    memset(&pair_map, 0, sizeof pair_map);
    memset(&seq_map, 0, sizeof seq_map);

    if (sch->nranks >= DEFER_ENTRY) /* heap entries carry a rank list index in 31 bits, below DEFER_ENTRY */
        return gs_error_set(err, GS_ERR_INPUT, "sim: %zu rank lists is more than the event heap indexes", sch->nranks);
    c.rt = calloc(sch->nranks ? sch->nranks : 1, sizeof *c.rt);
    if (!c.rt)
        goto nomem;
    uint64_t total = 0, ncoll = 0, np2p = 0;
    for (size_t i = 0; i < sch->nranks; i++) { /* collectives and p2p are counted in the CSR pass */
        c.rt[i].base = total;
        total += sch->ranks[i].nevents;
    }
    c.total = total;
    c.remaining = calloc(total ? total : 1, sizeof *c.remaining);
    c.dep_off = calloc(total + 1, sizeof *c.dep_off);
    c.match = malloc((total ? total : 1) * sizeof *c.match);
    c.hot = malloc((total ? total : 1) * sizeof *c.hot);
    c.wait_next = malloc((total ? total : 1) * sizeof *c.wait_next);
    c.posted = calloc(total ? total : 1, 1);
    if (!c.remaining || !c.dep_off || !c.match || !c.hot || !c.wait_next || !c.posted)
        goto nomem;
    if (st->cm.cores > 0) {
        c.ps_left = calloc(total ? total : 1, sizeof *c.ps_left);
        c.ps_ver = calloc(total ? total : 1, sizeof *c.ps_ver);
        c.ps_delay = calloc(total ? total : 1, sizeof *c.ps_delay);
        c.ps_active = calloc(sch->nranks ? sch->nranks : 1, sizeof *c.ps_active);
        if (!c.ps_left || !c.ps_ver || !c.ps_active || !c.ps_delay)
            goto nomem;
        if ((st->cm.coll_cpu_share > 0 || st->cm.launch_cpu_s > 0 || st->cm.wake_cpu_s > 0) &&
            !(c.ps_coll = calloc(total ? total : 1, sizeof *c.ps_coll)))
            goto nomem;
        if (c.ps_coll && st->flow && !(c.ps_coll_left = calloc(total ? total : 1, sizeof *c.ps_coll_left)))
            goto nomem;
    }

    /* ranks present, and how many members of each group are present */
    if (cost_map_init(&c.cost_cache, 1024) != 0 || map_init(&present, sch->nranks * GS_GROUP_KIND_COUNT) != 0 ||
        map_init(&seq_map, 1024) != 0)
        goto nomem;
    for (size_t i = 0; i < sch->nranks; i++) {
        rank_rt *rt = &c.rt[i];
        uint64_t rank = sch->ranks[i].rank;
        rt->node = gs_mesh_rank_node(&st->mesh, rank);
        rt->slowdown = gs_scenario_slowdown(&st->s, &st->mesh, rank);
        for (int g = 0; g < GS_GROUP_KIND_COUNT; g++) {
            gs_topo_group_shape(&st->mesh, (gs_group_kind)g, rank, &rt->shape[g]);
            uint64_t idx = gs_group_of(&st->mesh, (gs_group_kind)g, rank, NULL);
            size_t slot = map_slot(&present, key3(1, (uint64_t)g, idx), 0, NULL);
            present.vals[slot]++;
        }
        if (i > 0 && memcmp(rt->shape, c.rt[i - 1].shape, sizeof rt->shape) == 0) {
            memcpy(rt->overlap, c.rt[i - 1].overlap, sizeof rt->overlap); /* the same groups' shapes */
            memcpy(rt->overlap_wait, c.rt[i - 1].overlap_wait, sizeof rt->overlap_wait);
        } else {
            gs_contention_streams(&st->cm, st->flow ? &st->flow_topo : &st->topo, st->s.strategy.tp_comm_overlap,
                                  rt->shape, rt->overlap, rt->overlap_wait);
        }
        map_slot(&present, key3(2, rank, 0), i, NULL);
    }

    /* dependents (CSR), stream queues, collective instances, p2p pairs */
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        rank_rt *rt = &c.rt[i];
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            ncoll += e->kind == GS_EV_COLLECTIVE;
            np2p += e->kind == GS_EV_SEND || e->kind == GS_EV_RECV;
            c.remaining[rt->base + k] = e->nlinks[GS_LINK_DEPS];
            const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
            for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
                c.dep_off[rt->base + d[j] + 1]++;
            rt->stream_off[e->stream + 1]++;
        }
        for (int s = 0; s < GS_STREAM_COUNT; s++)
            rt->stream_off[s + 1] += rt->stream_off[s];
        rt->stream_ev = malloc((r->nevents ? r->nevents : 1) * sizeof *rt->stream_ev);
        if (!rt->stream_ev)
            goto nomem;
        size_t fill[GS_STREAM_COUNT];
        for (int s = 0; s < GS_STREAM_COUNT; s++)
            fill[s] = rt->stream_off[s];
        for (size_t k = 0; k < r->nevents; k++)
            rt->stream_ev[fill[r->events[k].stream]++] = (uint32_t)k;
    }
    for (uint64_t g = 0; g < total; g++)
        c.dep_off[g + 1] += c.dep_off[g];
    c.dep_list = malloc((c.dep_off[total] ? c.dep_off[total] : 1) * sizeof *c.dep_list);
    if (!c.dep_list)
        goto nomem;
    {
        uint64_t *fill = malloc((total ? total : 1) * sizeof *fill);
        if (!fill)
            goto nomem;
        memcpy(fill, c.dep_off, total * sizeof *fill);
        for (size_t i = 0; i < sch->nranks; i++) {
            const gs_rank_events *r = &sch->ranks[i];
            for (size_t k = 0; k < r->nevents; k++) {
                const uint32_t *d = gs_event_list(r, &r->events[k], GS_LINK_DEPS);
                for (uint16_t j = 0; j < r->events[k].nlinks[GS_LINK_DEPS]; j++)
                    c.dep_list[fill[c.rt[i].base + d[j]]++] = c.rt[i].base + k;
            }
        }
        free(fill);
    }
    if (map_init(&inst_map, ncoll / 2 + 16) != 0 || map_init(&pair_map, np2p + 16) != 0)
        goto nomem;
    /* collective instance = (group kind, group index, k-th collective of this rank on it) */
    c.inst_needed = malloc((ncoll ? ncoll : 1) * sizeof *c.inst_needed);
    c.inst_arrived = calloc(ncoll ? ncoll : 1, sizeof *c.inst_arrived);
    c.inst_head = malloc((ncoll ? ncoll : 1) * sizeof *c.inst_head);
    c.inst_ready = calloc(ncoll ? ncoll : 1, sizeof *c.inst_ready);
    c.pair = malloc((np2p ? 2 * np2p : 2) * sizeof *c.pair);
    c.pair_end = malloc((np2p ? np2p : 1) * sizeof *c.pair_end);
    if (!c.inst_needed || !c.inst_arrived || !c.inst_head || !c.inst_ready || !c.pair || !c.pair_end)
        goto nomem;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        uint64_t rank = r->rank;
        map64 local; /* per rank: k-th collective per (kind, idx), k-th send/recv per peer */
        if (map_init(&local, 256) != 0)
            goto nomem;
        /* A rank is in one group of each kind: the first group seen per kind keeps its count and
         * present members here instead of in the maps. A group with this rank as its only member
         * present gets a new instance per collective (nobody else can match it). */
        uint64_t own_group[GS_GROUP_KIND_COUNT], own_seq[GS_GROUP_KIND_COUNT], own_present[GS_GROUP_KIND_COUNT];
        for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
            own_group[g] = NONE;
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            uint64_t gid = c.rt[i].base + k;
            c.hot[gid].base_s = event_base_s(&c, i, e);
            c.hot[gid].rank_list = (uint32_t)i;
            c.hot[gid].kind = e->kind;
            c.hot[gid].stream = e->stream;
            c.match[gid] = NONE;
            c.wait_next[gid] = NONE;
            if (e->kind == GS_EV_COLLECTIVE && e->group < GS_GROUP_KIND_COUNT &&
                (own_group[e->group] == NONE || own_group[e->group] == e->peer)) {
                if (own_group[e->group] == NONE) {
                    own_group[e->group] = e->peer;
                    own_seq[e->group] = 0;
                    own_present[e->group] = present.vals[map_slot(&present, key3(1, e->group, e->peer), 0, NULL)];
                }
                uint64_t seq = own_seq[e->group]++;
                if (own_present[e->group] <= 1) {
                    c.inst_needed[c.ninst] = 1;
                    c.inst_head[c.ninst] = NONE;
                    c.match[gid] = c.ninst++;
                    continue;
                }
                int fresh;
                size_t slot = map_slot(&inst_map, key3(e->group, e->peer, seq), c.ninst, &fresh);
                if (fresh) {
                    c.inst_needed[c.ninst] = own_present[e->group];
                    c.inst_head[c.ninst] = NONE;
                    c.ninst++;
                }
                c.match[gid] = inst_map.vals[slot];
            } else if (e->kind == GS_EV_COLLECTIVE) {
                size_t ls = map_slot(&local, key3(3, e->group, e->peer), 0, NULL);
                uint64_t seq = local.vals[ls]++;
                int fresh;
                size_t slot = map_slot(&inst_map, key3(e->group, e->peer, seq), c.ninst, &fresh);
                if (fresh) {
                    size_t ps = map_slot(&present, key3(1, e->group, e->peer), 0, NULL);
                    c.inst_needed[c.ninst] = present.vals[ps] ? present.vals[ps] : 1;
                    c.inst_head[c.ninst] = NONE;
                    c.ninst++;
                }
                c.match[gid] = inst_map.vals[slot];
            } else if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV) {
                int send = e->kind == GS_EV_SEND;
                uint64_t src = send ? rank : e->peer, dst = send ? e->peer : rank;
                size_t ls = map_slot(&local, key3(send ? 4 : 5, e->peer, 0), 0, NULL);
                uint64_t seq = local.vals[ls]++;
                int fresh;
                size_t slot = map_slot(&pair_map, key3(src, dst, seq), c.npairs, &fresh);
                if (fresh) {
                    c.pair[2 * c.npairs] = NONE;
                    c.pair[2 * c.npairs + 1] = NONE;
                    c.pair_end[c.npairs] = NAN;
                    c.npairs++;
                }
                uint64_t p = pair_map.vals[slot];
                c.pair[2 * p + (send ? 0 : 1)] = gid;
                c.match[gid] = p;
            }
        }
        map_fini(&local);
    }

    if (st->flow && gs_flow_model_create(&st->flow_topo, st->s.cluster.nodes > gs_mesh_nodes(&st->mesh)
                                                             ? st->s.cluster.nodes : gs_mesh_nodes(&st->mesh),
                                         &c.fm) != GS_OK)
        goto nomem;

    /* the loop */
    for (size_t i = 0; i < sch->nranks; i++)
        if (try_issue(&c, i) != 0)
            goto nomem;
    size_t queue_peak = 0;
    while (c.h.n > 0) {
        if (c.h.n > queue_peak)
            queue_peak = c.h.n;
        gs_qnode nd = gs_queue_pop(&c.h);
        if (nd.id >= total) {
            /* a flow's projected end: stale unless its version is current */
            uint32_t id = (uint32_t)(nd.id - total);
            if (!gs_flow_current(gs_flow_model_net(c.fm), id, nd.ver))
                continue;
            c.now = nd.t;
            if (finish_flow(&c, id) != 0)
                goto nomem;
            continue;
        }
        if (nd.ver == DEFER_ENTRY) {
            /* a flow whose thread has been woken: the send, or the collective of its last member */
            c.now = nd.t;
            size_t dr = rank_index_of(&c, nd.id);
            const gs_event *e = &sch->ranks[dr].events[nd.id - c.rt[dr].base];
            coll_plan plan;
            int r = e->kind != GS_EV_COLLECTIVE ? start_send_flow(&c, dr, nd.id, e, c.hot[nd.id].base_s)
                    : coll_flow_plan(&c, dr, e, &plan) == 0 ? start_coll_flow(&c, c.match[nd.id], dr, e, &plan)
                                                            : -1; /* planned as a flow when deferred */
            if (r < 0)
                goto nomem;
            continue;
        }
        size_t ri = nd.ver;
        if (nd.ver & PS_ENTRY) {
            /* a shared-core compute event's projected end (its version, not its rank list) */
            c.now = nd.t;
            int r = ps_pop(&c, nd.id, nd.ver & ~PS_ENTRY);
            if (r < 0)
                goto nomem;
            if (r > 0)
                continue;
            ri = rank_index_of(&c, nd.id);
        }
        c.now = nd.t;
        uint8_t stream = c.hot[nd.id].stream;
        if (ps_coll_end(&c, nd.id) != 0)
            goto nomem;
        c.rt[ri].busy[stream] = 0;
        c.rt[ri].cursor[stream]++;
        c.done++;
        for (uint64_t j = c.dep_off[nd.id]; j < c.dep_off[nd.id + 1]; j++)
            c.remaining[c.dep_list[j]]--;
        if (try_issue(&c, ri) != 0)
            goto nomem;
    }
    if (st->stats) {
        gs_backend_stats *stats = st->stats;
        memset(stats, 0, sizeof *stats);
        stats->rank_lists = sch->nranks;
        stats->events = total;
        for (size_t i = 0; i < sch->nranks; i++) /* counted here: the setup sizes by events */
            for (size_t k = 0; k < sch->ranks[i].nevents; k++)
                stats->collectives += sch->ranks[i].events[k].kind == GS_EV_COLLECTIVE;
        for (size_t i = 0; i < sch->nranks; i++)
            stats->tensors += sch->ranks[i].ntensors;
        stats->queue_peak = queue_peak;
        stats->queue_bytes = (uint64_t)c.h.cap * sizeof *c.h.a;
    }
    if (c.done != total) {
        /* find a stuck event to name */
        for (size_t i = 0; i < sch->nranks && rc == GS_OK; i++)
            for (int s = 0; s < GS_STREAM_COUNT; s++) {
                size_t pos = c.rt[i].stream_off[s] + c.rt[i].cursor[s];
                if (pos < c.rt[i].stream_off[s + 1]) {
                    char name[GS_EVENT_NAME_BYTES];
                    const gs_rank_events *r = &sch->ranks[i];
                    gs_event_name(r, &r->events[c.rt[i].stream_ev[pos]], name, sizeof name);
                    rc = gs_error_set(err, GS_ERR_RUNTIME,
                                      "sim: deadlock after %" PRIu64 " of %" PRIu64 " events: rank %" PRIu64
                                      " waits in %s on the %s stream", c.done, total, r->rank, name,
                                      gs_stream_name((gs_stream)s));
                    break;
                }
            }
    }
    goto out;
nomem:
    rc = gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
out:
    if (c.rt)
        for (size_t i = 0; i < sch->nranks; i++)
            free(c.rt[i].stream_ev);
    free(c.rt);
    free(c.remaining);
    free(c.dep_off);
    free(c.dep_list);
    free(c.match);
    free(c.hot);
    free(c.wait_next);
    free(c.posted);
    free(c.inst_needed);
    free(c.inst_arrived);
    free(c.inst_head);
    free(c.inst_ready);
    free(c.pair);
    free(c.pair_end);
    gs_queue_fini(&c.h);
    gs_flow_model_destroy(c.fm);
    free(c.fr);
    free(c.members);
    free(c.ps_left);
    free(c.ps_ver);
    free(c.ps_delay);
    free(c.ps_active);
    free(c.ps_coll);
    free(c.ps_coll_left);
    free(c.cost_cache.v);
    map_fini(&present);
    map_fini(&inst_map);
    map_fini(&pair_map);
    map_fini(&seq_map);
    return rc;
}

static gs_status sim_open(const gs_scenario *s, const gs_mesh *mesh, const gs_backend_opts *opts, void **state,
                          gs_error *err)
{
    sim_state *st = calloc(1, sizeof *st);
    if (!st)
        return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
    st->s = *s;
    st->mesh = *mesh;
    gs_topo_init(&st->topo, &s->cluster);
    gs_compute_model_for_scenario(&st->cm, s);
    if (opts && opts->fit)
        gs_compute_model_fit(&st->cm, opts->fit);
    st->flow = opts ? opts->flow : 0;
    st->stats = opts ? opts->stats : NULL;
    if (st->flow) {
        gs_cluster flat = s->cluster;
        flat.oversubscription = 1.0;
        gs_topo_init(&st->flow_topo, &flat);
    }
    st->host_link_bw = s->cluster.gpu.compute_capability >= 90 ? 48e9 : 24e9;
    if (opts && opts->calib) {
        gs_calib cal;
        gs_status rc = gs_calib_load(opts->calib, &cal, err);
        if (rc != GS_OK) {
            free(st);
            return rc;
        }
        gs_calib_apply(&cal, mesh->world, &st->cm, &st->topo);
        if (st->flow) {
            gs_compute_model unused = st->cm;
            gs_calib_apply(&cal, mesh->world, &unused, &st->flow_topo);
        }
    }
    *state = st;
    return GS_OK;
}

static void sim_close(void *state)
{
    free(state);
}

const gs_backend_ops gs_sim_backend = {
    "sim",
    "discrete-event replay under modeled NVLink / PCIe / InfiniBand / Ethernet links",
    sim_open,
    sim_run,
    sim_close,
};
