/* The sim backend's discrete-event core: per rank and stream, issue every event whose
 * dependencies are done, whose stream is free and which the rank's host thread has issued (its
 * template's host_s: the framework's issuing in list order, sim/compute.h); a collective starts
 * when every member of its group present in the schedule has reached it, a send/recv pair when
 * both sides are posted; pop the earliest completion (binary heap, ties broken by insertion
 * order, so the same schedule gives the same times); release its dependents. Costs come from
 * sim/compute.c and sim/tuner.c; this loop holds no cost formula.
 *
 * Every rank list is played from its template (sim/des_internal.h): a shared list
 * (gs_schedule_build_shared) reads its stage representative's events, and its collective
 * instances and send/recv pairs are numbered arithmetically from its own groups and peers
 * (sim/des_index.c). Flow mode and the host driver's shared cores live in sim/des_flow.c: in
 * flow mode a collective or send that moves bytes starts as a flow on the shared links; the
 * shared cores (cm.cores > 0) apply in both modes, and a collective or send whose thread is
 * woken by another stream starts its flow that much later (a deferred start, DEFER_ENTRY).
 *
 * Streams run their events in list order (like CUDA streams). Time is in seconds from 0. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/calib_file.h"
#include "sim/des_internal.h"
#include "sim/sim.h"

/* The duration of event k of rank list ri issued now: a compute event runs 1/f as fast while a
 * communication stream of its rank is busy (f: that stream's overlap factor for a tensor-bound
 * or a memory-bound kernel; the largest when several are), for as long as the running
 * communication event lasts (to its end when it has started; the whole event, at the waiting
 * factor, while it waits for its peers), then at full speed; and it is stretched by its rank's
 * straggler factor. */
static inline double event_duration(const run_ctx *c, size_t ri, uint32_t k)
{
    const rank_rt *rt = &c->rt[ri];
    const des_tmpl *t = &c->tmpl[rt->tmpl];
    const des_variant *v = &t->variants[rt->variant];
    double base = v->base_s[k];
    if (t->kind[k] != GS_EV_COMPUTE)
        return base;
    double f = 1.0, window = 0.0;
    const int tensor = t->tensor[k];
    const double *moving = tensor ? v->overlap : v->overlap_mem;
    static const int comm[] = {GS_STREAM_DP, GS_STREAM_TP, GS_STREAM_PP};
    for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++) {
        int s = comm[i];
        if (!rt->busy[s] || !(moving[s] > 1.0))
            continue;
        uint32_t ev = t->stream_ev[t->stream_off[s] + rt->cursor[s]];
        const gs_timing *tm = &c->timing[ri][ev];
        /* started: its end is known. Posted at this instant: taken as starting now (its peers'
         * arrivals at the same instant are processed after this one in some order, and the
         * answer must not depend on that order, nor differ from the class path's, where the
         * rank's collectives start on arrival). Else it waits for its peers, for as long as
         * that takes. */
        int started = tm->end_s > 0.0, arriving = !started && tm->posted_s == c->now;
        double end = started ? tm->end_s : c->now + v->base_s[ev]; /* the end it will have, rounded alike */
        double w = started || arriving ? (end > c->now ? end - c->now : 0.0) : HUGE_VAL;
        double fs = started || arriving ? moving[s] : tensor ? v->overlap_wait[s] : 1.0;
        if (fs > f) {
            f = fs;
            window = w;
        }
    }
    double d = base * f;
    if (f > 1.0 && window < d)
        d = window + (base - window / f); /* the work left after the overlap runs at full speed */
    return d * rt->slowdown;
}

int des_complete_at(run_ctx *c, uint64_t id, double start, double dur)
{
    gs_timing *t = des_timing(c, id);
    t->start_s = start;
    t->end_s = start + dur;
    return gs_queue_push(&c->h, start + dur, id, (uint32_t)EV_LIST(id)); /* an event's entry carries its list */
}

int des_complete_instance(run_ctx *c, uint64_t in, double start, double dur)
{
    uint64_t lo = c->inst_off[in], n = c->inst_arrived[in];
    for (uint64_t m = lo + n; m-- > lo;) {
        gs_timing *t = des_timing(c, c->inst_member[m]);
        t->start_s = start;
        t->end_s = start + dur;
    }
    return gs_queue_push_span(&c->h, start + dur, INST_BIT | in, 0, n);
}

double des_cross_stream_wake(const run_ctx *c, size_t ri, uint32_t k)
{
    if (c->st->cm.wake_s <= 0)
        return 0;
    const gs_rank_events *r = c->tmpl[c->rt[ri].tmpl].list;
    const gs_event *e = &r->events[k];
    const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
    for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
        if (r->events[d[j]].stream != e->stream)
            return c->st->cm.wake_s;
    return 0;
}

/* ---- issuing -------------------------------------------------------------------------------- */

/* Collective event id arrives at its instance; the last member to arrive starts it: every
 * member starts at the latest arrival and takes the same time, or (flow mode) the instance
 * becomes a flow. Members are visited in reverse order of arrival. */
static int issue_collective(run_ctx *c, uint64_t id, double dur)
{
    size_t ri = EV_LIST(id);
    uint32_t k = EV_INDEX(id);
    uint64_t in = des_match(c, ri, k);
    uint64_t lo = c->inst_off[in], need = c->inst_off[in + 1] - lo;
    if (c->inst_arrived[in] >= need) { /* a member beyond the group's: never starts (a deadlock) */
        c->inst_arrived[in]++;
        return 0;
    }
    c->inst_member[lo + c->inst_arrived[in]] = id;
    /* a member whose thread is woken by another stream arrives that much later (the host
     * driver) */
    double arrive = c->now + des_cross_stream_wake(c, ri, k);
    if (arrive > c->inst_ready[in])
        c->inst_ready[in] = arrive;
    if (++c->inst_arrived[in] != need)
        return 0;
    coll_plan plan;
    if (c->fm && coll_flow_plan(c, ri, k, &plan) == 0) {
        /* the members' CPU load starts now, as in analytic mode; the flow when the last woken
         * member is there */
        for (uint64_t m = lo + need; m-- > lo;)
            if (ps_coll_start(c, c->inst_member[m], dur) != 0)
                return -1;
        if (c->inst_ready[in] > c->now)
            return gs_queue_push(&c->h, c->inst_ready[in], id, DEFER_ENTRY) != 0 ? -1 : 0;
        return start_coll_flow(c, in, ri, k, &plan) < 0 ? -1 : 0;
    }
    if (!c->ps_coll)
        return des_complete_instance(c, in, c->inst_ready[in], dur);
    for (uint64_t m = lo + need; m-- > lo;)
        if (des_complete_at(c, c->inst_member[m], c->inst_ready[in], dur) != 0 ||
            ps_coll_start(c, c->inst_member[m], dur) != 0)
            return -1;
    return 0;
}

/* Analytic mode's send/recv: NCCL p2p through proxy buffers: a send proceeds once posted and
 * lands in the receiver's buffer; the receive completes when it is posted and the data is
 * there. */
static int issue_p2p(run_ctx *c, uint64_t id, double dur)
{
    size_t ri = EV_LIST(id);
    uint32_t k = EV_INDEX(id);
    uint64_t p = des_match(c, ri, k);
    if (c->tmpl[c->rt[ri].tmpl].kind[k] == GS_EV_SEND) {
        c->pair_posted[p] |= 1;
        /* a sender woken by the compute stream's thread starts that much later (host) */
        double t0 = c->now + des_cross_stream_wake(c, ri, k);
        if (des_complete_at(c, id, t0, dur) != 0)
            return -1;
        c->pair_end[p] = t0 + dur;
        uint64_t recv = c->pair[2 * p + 1];
        /* the receiver was waiting: the transfer runs from the send's start to its end */
        if (recv != DES_NONE && (c->pair_posted[p] & 2))
            return des_complete_at(c, recv, c->now, t0 - c->now + dur);
        return 0;
    }
    c->pair_posted[p] |= 2;
    if (!isnan(c->pair_end[p])) {
        /* the data is in flight or landed: receive what is left of the transfer */
        double end = c->pair_end[p] > c->now ? c->pair_end[p] : c->now;
        return des_complete_at(c, id, c->now, end - c->now);
    }
    if (c->pair[2 * p] == DES_NONE) /* the sender is not in this schedule (a class representative's peer) */
        return des_complete_at(c, id, c->now, dur);
    return 0;
}

/* A compute event on the host driver's shared cores. */
static int issue_compute_shared(run_ctx *c, uint64_t id, double dur)
{
    const gs_compute_model *cm = &c->st->cm;
    size_t ri = EV_LIST(id);
    double launch = gs_compute_launch_time(cm, des_event(c, ri, EV_INDEX(id)));
    /* the part of the launches that is work on the shared cores, not latency */
    double delay = launch - (cm->launch_s > 0 ? launch * fmin(1.0, cm->launch_cpu_s / cm->launch_s) : 0);
    /* a dependency on another stream: that stream's thread wakes this one */
    double wake = des_cross_stream_wake(c, ri, EV_INDEX(id));
    delay += wake - fmin(wake, wake > 0 ? cm->wake_cpu_s : 0);
    return ps_start(c, id, dur + wake, delay);
}

/* Whether every dependency of event k has retired: its stream's cursor has passed it. */
static inline int deps_done(const rank_rt *rt, const des_tmpl *t, uint32_t k)
{
    for (uint32_t j = t->dep_off[k]; j < t->dep_off[k + 1]; j++) {
        uint32_t d = t->dep_on[j];
        if (rt->cursor[d >> DEP_POS_BITS] <= (d & ((1u << DEP_POS_BITS) - 1)))
            return 0;
    }
    return 1;
}

/* Try to start the head event of each stream of rank list ri: the communication streams first
 * (a compute event released at the same instant as a collective it runs beside starts with
 * that stream busy, and so pays the overlap factor). */
static int try_issue(run_ctx *c, size_t ri)
{
    rank_rt *rt = &c->rt[ri];
    const des_tmpl *t = &c->tmpl[rt->tmpl];
    for (int si = 0; si < GS_STREAM_COUNT; si++) {
        int s = si + 1 < GS_STREAM_COUNT ? si + 1 : GS_STREAM_COMPUTE;
        if (!(rt->ready & 1u << s))
            continue;
        rt->ready &= (uint8_t)~(1u << s);
        if (rt->busy[s])
            continue;
        size_t pos = t->stream_off[s] + rt->cursor[s];
        if (pos >= t->stream_off[s + 1])
            continue;
        uint32_t k = t->stream_ev[pos];
        if (!deps_done(rt, t, k))
            continue;
        uint64_t id = EV_ID(ri, k);
        /* the host thread has not issued it yet: wake the stream when it has (once) */
        if (t->host_s && c->now < t->host_end_s && c->now < t->host_s[k]) {
            if (!(rt->host_armed & 1u << s)) {
                rt->host_armed |= (uint8_t)(1u << s);
                if (gs_queue_push(&c->h, t->host_s[k], id, HOST_ENTRY) != 0)
                    return -1;
            }
            continue;
        }
        uint8_t kind = t->kind[k];
        rt->busy[s] = 1;
        c->timing[ri][k].posted_s = c->now;
        double dur = event_duration(c, ri, k);
        int rc;
        if (kind == GS_EV_COLLECTIVE)
            rc = issue_collective(c, id, dur);
        else if ((kind == GS_EV_SEND || kind == GS_EV_RECV) && c->fm)
            rc = issue_p2p_flow(c, id, dur);
        else if (kind == GS_EV_SEND || kind == GS_EV_RECV)
            rc = issue_p2p(c, id, dur);
        else if (kind == GS_EV_COMPUTE && c->ps_active)
            rc = issue_compute_shared(c, id, dur);
        else
            rc = des_complete_at(c, id, c->now, dur);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ---- the loop ------------------------------------------------------------------------------- */

/* Event id is done at c->now: free its stream, release its dependents, issue what is ready. */
static int retire(run_ctx *c, uint64_t id)
{
    size_t ri = EV_LIST(id);
    uint32_t k = EV_INDEX(id);
    rank_rt *rt = &c->rt[ri];
    const des_tmpl *t = &c->tmpl[rt->tmpl];
    if (ps_coll_end(c, id) != 0)
        return -1;
    uint8_t stream = t->stream[k];
    rt->busy[stream] = 0;
    rt->cursor[stream]++;
    /* its stream's next event, and the streams of the events waiting for it, may be ready */
    rt->ready |= (uint8_t)(1u << stream | t->dep_streams[k]);
    c->done++;
    return try_issue(c, ri);
}

/* A deferred flow start (DEFER_ENTRY): the send, or the collective of its last member. */
static int start_deferred(run_ctx *c, uint64_t id)
{
    size_t ri = EV_LIST(id);
    uint32_t k = EV_INDEX(id);
    if (c->tmpl[c->rt[ri].tmpl].kind[k] != GS_EV_COLLECTIVE)
        return start_send_flow(c, id, event_duration(c, ri, k));
    coll_plan plan;
    if (coll_flow_plan(c, ri, k, &plan) != 0)
        return -1; /* planned as a flow when deferred */
    return start_coll_flow(c, des_match(c, ri, k), ri, k, &plan);
}

/* Pops entries until the heap is empty; records the heap's peak size. */
static int run_loop(run_ctx *c, size_t *queue_peak)
{
    for (size_t i = 0; i < c->sch->nranks; i++)
        if (try_issue(c, i) != 0)
            return -1;
    while (c->h.n > 0) {
        if (c->h.n > *queue_peak)
            *queue_peak = c->h.n;
        gs_qnode nd = gs_queue_pop(&c->h);
        if (nd.id & FLOW_BIT) {
            /* a flow's projected end: stale unless its version is current */
            uint32_t id = (uint32_t)(nd.id & ~FLOW_BIT);
            if (!gs_flow_current(gs_flow_model_net(c->fm), id, nd.ver))
                continue;
            c->now = nd.t;
            if (finish_flow(c, id) != 0)
                return -1;
            continue;
        }
        if (nd.id & INST_BIT) {
            /* a collective's members, in the order their entries would have had */
            uint64_t in = nd.id & ~INST_BIT, lo = c->inst_off[in];
            c->now = nd.t;
            for (uint64_t m = lo + c->inst_arrived[in]; m-- > lo;)
                if (retire(c, c->inst_member[m]) != 0)
                    return -1;
            continue;
        }
        if (nd.ver == HOST_ENTRY) {
            /* the host has issued a stream's head: try it again */
            size_t ri = EV_LIST(nd.id);
            rank_rt *rt = &c->rt[ri];
            uint8_t s = c->tmpl[rt->tmpl].stream[EV_INDEX(nd.id)];
            c->now = nd.t;
            rt->host_armed &= (uint8_t)~(1u << s);
            rt->ready |= (uint8_t)(1u << s);
            if (try_issue(c, ri) != 0)
                return -1;
            continue;
        }
        if (nd.ver == DEFER_ENTRY) {
            c->now = nd.t;
            if (start_deferred(c, nd.id) < 0)
                return -1;
            continue;
        }
        if (nd.ver & PS_ENTRY) {
            /* a shared-core compute event's projected end (its version, not its rank list) */
            c->now = nd.t;
            int r = ps_pop(c, nd.id, nd.ver & ~PS_ENTRY);
            if (r < 0)
                return -1;
            if (r > 0)
                continue;
        }
        c->now = nd.t;
        if (retire(c, nd.id) != 0)
            return -1;
    }
    return 0;
}

static void fill_stats(const run_ctx *c, size_t queue_peak, gs_backend_stats *stats)
{
    const gs_schedule *sch = c->sch;
    memset(stats, 0, sizeof *stats);
    stats->rank_lists = sch->nranks;
    stats->events = c->total;
    for (size_t i = 0; i < sch->nranks; i++) {
        stats->collectives += c->tmpl[c->rt[i].tmpl].collectives;
        stats->tensors += sch->ranks[i].ntensors;
    }
    for (size_t i = 0; i < c->ntmpl; i++)
        if (c->tmpl[i].host_s && c->tmpl[i].host_end_s > stats->host_issue_s)
            stats->host_issue_s = c->tmpl[i].host_end_s;
    stats->queue_peak = queue_peak;
    stats->queue_bytes = gs_queue_bytes(&c->h);
    stats->state_bytes = des_state_bytes(c) + stats->queue_bytes;
}

/* Names a stuck event when not every event ran. */
static gs_status report_deadlock(const run_ctx *c, gs_error *err)
{
    const gs_schedule *sch = c->sch;
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (int s = 0; s < GS_STREAM_COUNT; s++) {
            size_t pos = t->stream_off[s] + c->rt[i].cursor[s];
            if (pos < t->stream_off[s + 1]) {
                char name[GS_EVENT_NAME_BYTES];
                const gs_rank_events *r = &sch->ranks[i];
                gs_event_name(r, &r->events[t->stream_ev[pos]], name, sizeof name);
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "sim: deadlock after %" PRIu64 " of %" PRIu64 " events: rank %" PRIu64
                                    " waits in %s on the %s stream", c->done, c->total, r->rank, name,
                                    gs_stream_name((gs_stream)s));
            }
        }
    }
    return GS_OK;
}

static gs_status sim_run(void *state, const gs_schedule *sch, gs_timing *const *timing, gs_error *err)
{
    const sim_state *st = state;
    run_ctx c;
    size_t queue_peak = 0;
    gs_status rc = des_ctx_init(&c, st, sch, timing, err);
    if (rc == GS_OK && run_loop(&c, &queue_peak) != 0)
        rc = gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
    if (rc == GS_OK && st->stats)
        fill_stats(&c, queue_peak, st->stats);
    if (rc == GS_OK && c.done != c.total)
        rc = report_deadlock(&c, err);
    des_ctx_fini(&c);
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
