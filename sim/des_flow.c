/* The DES's host cores and flow mode (sim/des_internal.h).
 *
 * Shared cores: the host driver's ranks are threads of one machine: k compute events running
 * at once on C cores, beside L runnable threads of other processes, each progress at
 * min(1, C / (L + k)) of full speed (the OS shares the cores fairly among runnable threads),
 * divided by 1 + s (min(k, C) - 1) for the contention of the ones running at once (s:
 * concurrency_slowdown, 0 unless calibrated). Their ends move whenever one starts or ends; heap
 * entries carry the event's version and stale ones are skipped.
 *
 * Flow mode (sim/flow.c): a collective or send that moves bytes starts as a flow on the shared
 * links instead of taking a fixed time; its end moves whenever a flow on its links starts or
 * ends. Heap entries for flow ends carry the flow's version and are skipped once stale; the
 * members complete the flow's latency after its bytes have moved. On the class path (one
 * representative per pipeline stage) a flow also loads the shared links with the copies of it
 * that the rest of the class runs at the same time (gs_flow_class; the count is derived in
 * flow.c), so groups that share a NIC still meet. */
#include <math.h>
#include <stdlib.h>

#include "sim/collective.h"
#include "sim/des_internal.h"

/* ---- shared cores -------------------------------------------------------------------------- */

static uint64_t ev_slot(const run_ctx *c, uint64_t id)
{
    return c->rt[EV_LIST(id)].base + EV_INDEX(id);
}

static double class_size(const run_ctx *c, uint64_t id)
{
    return (double)c->sch->ranks[EV_LIST(id)].class_size;
}

static void ps_advance(run_ctx *c)
{
    double dt = c->now - c->ps_t;
    if (dt > 0)
        for (size_t i = 0; i < c->ps_n; i++)
            c->ps_left[ev_slot(c, c->ps_active[i])] -= dt * c->ps_rate;
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
        uint64_t id = c->ps_active[i], g = ev_slot(c, id);
        double left = c->ps_left[g] > 0 ? c->ps_left[g] : 0;
        if (gs_queue_push(&c->h, c->now + left / c->ps_rate, id, PS_ENTRY | ++c->ps_ver[g]) != 0)
            return -1;
    }
    return 0;
}

int ps_start(run_ctx *c, uint64_t id, double dur, double delay)
{
    gs_timing *t = des_timing(c, id);
    uint64_t g = ev_slot(c, id);
    ps_advance(c);
    t->start_s = c->now;
    t->end_s = c->now + dur;
    if (delay > dur)
        delay = dur;
    c->ps_left[g] = dur - delay;
    c->ps_delay[g] = delay;
    c->ps_active[c->ps_n++] = id;
    c->ps_load += class_size(c, id);
    return ps_reschedule(c);
}

/* The popped entry of event id with version ver: 1 when stale or when the work is done but the
 * launch latency is still to run (its end is then pushed as an ordinary completion), 0 when
 * the event ended now, -1 out of memory. */
int ps_pop(run_ctx *c, uint64_t id, uint32_t ver)
{
    uint64_t g = ev_slot(c, id);
    if (ver != c->ps_ver[g])
        return 1;
    ps_advance(c);
    double delay = c->ps_delay[g];
    des_timing(c, id)->end_s = c->now + delay;
    for (size_t i = 0; i < c->ps_n; i++)
        if (c->ps_active[i] == id) {
            c->ps_active[i] = c->ps_active[--c->ps_n];
            break;
        }
    c->ps_ver[g] = 0; /* done: any later entry (version >= 1) is stale */
    c->ps_load -= class_size(c, id);
    if (c->ps_n == 0)
        c->ps_load = 0;
    if (ps_reschedule(c) != 0)
        return -1;
    if (delay > 0)
        return gs_queue_push(&c->h, c->now + delay, id, (uint32_t)EV_LIST(id)) != 0 ? -1 : 1;
    return 0;
}

/* The group shape of collective event k of rank list ri, its size the event's. */
static gs_coll_shape coll_shape(const run_ctx *c, size_t ri, const gs_event *e)
{
    const rank_rt *rt = &c->rt[ri];
    return des_coll_shape(c->tmpl[rt->tmpl].variants[rt->variant].shape[e->group], e);
}

/* The copying and summing part of a host collective's CPU work, core-seconds per member:
 * coll_cpu_share x (its time - its zero-byte time) under the mode's links (0 when not
 * calibrated). */
static double coll_copy_cpu_s(const run_ctx *c, size_t ri, const gs_event *e)
{
    const sim_state *st = c->st;
    const gs_topo *topo = st->flow ? &st->flow_topo : &st->topo;
    gs_coll_shape shape = coll_shape(c, ri, e);
    gs_coll_cost full, zero;
    if (st->cm.coll_cpu_share > 0 && e->bytes > 0 &&
        gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, e->bytes, GS_ALGO_COUNT, &full) == GS_OK &&
        gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, 0, GS_ALGO_COUNT, &zero) == GS_OK)
        return st->cm.coll_cpu_share * (full.time_s - zero.time_s);
    return 0;
}

/* Sets the cores the running collective (per-event slot g) keeps busy (ranks of its class
 * counted). */
static void ps_coll_set(run_ctx *c, uint64_t g, double load)
{
    if (c->ps_coll[g] > 0)
        c->ps_ncoll--;
    c->ps_coll_load += load - c->ps_coll[g];
    c->ps_coll[g] = load;
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
int ps_coll_start(run_ctx *c, uint64_t id, double dur)
{
    const sim_state *st = c->st;
    if (!c->ps_coll || dur <= 0)
        return 0;
    size_t ri = EV_LIST(id);
    const gs_event *e = des_event(c, ri, EV_INDEX(id));
    double wake = des_cross_stream_wake(c, ri, EV_INDEX(id));
    double cpu = (st->cm.launch_s > 0 ? fmin(st->cm.launch_cpu_s, st->cm.launch_s) : 0) +
                 (wake > 0 ? fmin(st->cm.wake_cpu_s, wake) : 0);
    cpu += coll_copy_cpu_s(c, ri, e);
    double frac = cpu / dur;
    if (!(frac > 0))
        return 0;
    if (frac > 1)
        frac = 1;
    ps_advance(c);
    uint64_t g = ev_slot(c, id);
    if (c->ps_coll_left)
        c->ps_coll_left[g] = frac * dur; /* the work the load above does by the end of dur */
    c->ps_coll[g] = frac * class_size(c, id);
    c->ps_coll_load += c->ps_coll[g];
    c->ps_ncoll++;
    return ps_reschedule(c);
}

int ps_coll_end(run_ctx *c, uint64_t id)
{
    if (!c->ps_coll)
        return 0;
    uint64_t g = ev_slot(c, id);
    if (c->ps_coll[g] <= 0)
        return 0;
    ps_advance(c);
    c->ps_coll_load -= c->ps_coll[g];
    c->ps_coll[g] = 0;
    if (--c->ps_ncoll == 0)
        c->ps_coll_load = 0;
    return ps_reschedule(c);
}

/* ---- flow mode ------------------------------------------------------------------------------ */

/* A host collective's CPU work follows the time its flow takes. Each member's work is
 * W = dispatch + coll_cpu_share x (T - T0) x (the time its bytes take / the time they take
 * alone), T and T0 its time alone and at zero bytes (ps_coll_start): the copying goes on while
 * the bytes move, however slowly. Spread evenly from the collective's start to its end as in
 * analytic mode: when the flow's projected end moves by d, each member's work still to do
 * (ps_coll_left) grows by cpu_per_s x d and the member keeps (that work / the time left until
 * its projected end) of a core busy, at most one. A flow that never shares a link keeps its
 * first projection, so its members' load is analytic mode's. Members in reverse order of
 * arrival. */
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
        for (uint64_t m = c->inst_off[fr->idx] + c->inst_arrived[fr->idx]; m-- > c->inst_off[fr->idx];) {
            uint64_t id = c->inst_member[m], g = ev_slot(c, id);
            double members = class_size(c, id);
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
        if (gs_queue_push(&c->h, ch[i].end_s, FLOW_BIT | ch[i].flow, ch[i].version) != 0)
            return -1;
    return c->ps_coll_left ? follow_coll_cpu(c, ch, n) : 0;
}

/* Records what flow id's end completes; a collective's members on shared cores (cpu_per_s
 * > 0 or dispatch work) started their load at cpu_t, the flow alone moving its bytes in work_s. */
static int record_flow(run_ctx *c, uint32_t id, const flow_rec *rec)
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
    c->fr[id] = *rec;
    return push_flow_changes(c);
}

int coll_flow_plan(const run_ctx *c, size_t ri, uint32_t k, coll_plan *p)
{
    const gs_topo *topo = &c->st->flow_topo;
    const gs_event *e = des_event(c, ri, k);
    p->shape = coll_shape(c, ri, e);
    if (gs_coll_estimate(topo, (gs_coll_op)e->op, &p->shape, e->bytes, GS_ALGO_COUNT, &p->cost) != GS_OK ||
        !(p->cost.time_s > 0.0))
        return 1;
    p->lat_s = gs_flow_coll_latency(topo, (gs_coll_op)e->op, &p->shape, &p->cost);
    p->work_s = p->cost.time_s - p->lat_s;
    return p->work_s > 0.0 ? 0 : 1;
}

/* Starts collective instance `in` (every member present, the last one being event k of rank
 * list ri) as the flow planned in p. Returns 0, or -1 out of memory. */
int start_coll_flow(run_ctx *c, uint64_t in, size_t ri, uint32_t k, const coll_plan *p)
{
    size_t n = 0;
    uint32_t id;
    double arrived = 0; /* when the last member arrived: the members' CPU load started then */
    const gs_event *e = des_event(c, ri, k);
    for (uint64_t m = c->inst_off[in] + c->inst_arrived[in]; m-- > c->inst_off[in];) {
        uint64_t g = c->inst_member[m];
        double posted = des_timing(c, g)->posted_s;
        if (posted > arrived)
            arrived = posted;
        if (n == c->members_cap) {
            size_t cap = c->members_cap ? 2 * c->members_cap : 64;
            uint64_t *mm = realloc(c->members, cap * sizeof *mm);
            if (!mm)
                return -1;
            c->members = mm;
            c->members_cap = cap;
        }
        c->members[n++] = c->sch->ranks[EV_LIST(g)].rank;
    }
    gs_flow_class cls = {&c->st->mesh, (gs_group_kind)e->group};
    if (gs_flow_model_coll(c->fm, c->now, (gs_coll_op)e->op, &p->shape, e->bytes, &p->cost, c->members, n,
                           p->work_s, c->sch->exact ? NULL : &cls, &id) != GS_OK)
        return -1;
    double cpu_per_s = c->ps_coll_left ? coll_copy_cpu_s(c, ri, e) / p->work_s : 0;
    flow_rec rec = {FLOW_COLL, in, c->now, p->lat_s, c->now + p->work_s, cpu_per_s, arrived};
    return record_flow(c, id, &rec);
}

/* Starts a send (or a receive whose sender is not in the schedule), event `ev`, as a flow.
 * Returns 1 when it moves no bytes, 0 when started, -1 out of memory. */
static int start_p2p_flow(run_ctx *c, uint64_t ev, flow_kind kind, uint64_t idx)
{
    const gs_topo *topo = &c->st->flow_topo;
    size_t ri = EV_LIST(ev);
    const gs_event *e = des_event(c, ri, EV_INDEX(ev));
    uint64_t self = c->sch->ranks[ri].rank, peer = des_peer(c, ri, EV_INDEX(ev));
    int same = gs_mesh_rank_node(&c->st->mesh, peer) == c->rt[ri].node;
    uint32_t id;
    if (e->bytes == 0)
        return 1;
    double lat = gs_flow_p2p_latency(topo, same);
    double work = gs_p2p_time(topo, same, e->bytes) - lat;
    if (!(work > 0.0))
        return 1;
    uint64_t src = e->kind == GS_EV_SEND ? self : peer, dst = e->kind == GS_EV_SEND ? peer : self;
    gs_flow_class cls = {&c->st->mesh, GS_GROUP_PP};
    if (gs_flow_model_p2p(c->fm, c->now, src, dst, e->bytes, work, c->sch->exact ? NULL : &cls, &id) != GS_OK)
        return -1;
    flow_rec rec = {kind, idx, c->now, lat, c->now + work, 0, c->now};
    return record_flow(c, id, &rec);
}

int start_send_flow(run_ctx *c, uint64_t id, double dur)
{
    uint64_t p = des_match(c, EV_LIST(id), EV_INDEX(id));
    int r;
    if ((r = start_p2p_flow(c, id, FLOW_PAIR, p)) <= 0)
        return r;
    if (des_complete_at(c, id, c->now, dur) != 0)
        return -1;
    c->pair_end[p] = c->now + dur;
    uint64_t recv = c->pair[2 * p + 1];
    if (recv != DES_NONE && (c->pair_posted[p] & 2) && des_complete_at(c, recv, c->now, dur) != 0)
        return -1;
    return 0;
}

int issue_p2p_flow(run_ctx *c, uint64_t id, double dur)
{
    size_t ri = EV_LIST(id);
    uint32_t k = EV_INDEX(id);
    uint64_t p = des_match(c, ri, k);
    int r, send = c->tmpl[c->rt[ri].tmpl].kind[k] == GS_EV_SEND;
    c->pair_posted[p] |= send ? 1 : 2;
    if (send) {
        /* a sender woken by the compute stream's thread starts that much later (host) */
        double wake = des_cross_stream_wake(c, ri, k);
        if (wake > 0)
            return gs_queue_push(&c->h, c->now + wake, id, DEFER_ENTRY) != 0 ? -1 : 0;
        return start_send_flow(c, id, dur);
    }
    if (!isnan(c->pair_end[p])) {
        double end = c->pair_end[p] > c->now ? c->pair_end[p] : c->now;
        return des_complete_at(c, id, c->now, end - c->now);
    }
    if (c->pair[2 * p] == DES_NONE) {
        if ((r = start_p2p_flow(c, id, FLOW_SINGLE, id)) <= 0)
            return r;
        return des_complete_at(c, id, c->now, dur);
    }
    return 0; /* the send is not posted yet, or its flow is running: its end completes us */
}

/* A flow's bytes have moved at c->now: take it off the links, then complete what it carried
 * after its latency. */
int finish_flow(run_ctx *c, uint32_t id)
{
    flow_rec fr = c->fr[id];
    double end = c->now + fr.lat_s;
    if (gs_flow_finish(gs_flow_model_net(c->fm), c->now, id) != GS_OK || push_flow_changes(c) != 0)
        return -1;
    switch (fr.kind) {
    case FLOW_COLL:
        return des_complete_instance(c, fr.idx, fr.start_s, end - fr.start_s);
    case FLOW_PAIR: {
        uint64_t send = c->pair[2 * fr.idx], recv = c->pair[2 * fr.idx + 1];
        if (des_complete_at(c, send, fr.start_s, end - fr.start_s) != 0)
            return -1;
        c->pair_end[fr.idx] = end;
        if (recv != DES_NONE && (c->pair_posted[fr.idx] & 2)) {
            double start = des_timing(c, recv)->posted_s;
            if (start < fr.start_s)
                start = fr.start_s;
            if (des_complete_at(c, recv, start, end - start) != 0)
                return -1;
        }
        return 0;
    }
    case FLOW_SINGLE:
    default:
        return des_complete_at(c, fr.idx, fr.start_s, end - fr.start_s);
    }
}
