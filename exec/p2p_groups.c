/* p2p groups (exec/p2p_groups.h): the pairing, then the rendezvous play and its hoists. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/p2p_groups.h"
#include "exec/dispatch.h"

#define NONE UINT32_MAX

/* The play's view of one rank list. */
typedef struct play_rank {
    const gs_rank_events *re;
    uint8_t *done, *posted, *arrived; /* per event */
    uint32_t *pr, *pe;                /* p2p: the partner's rank index and event */
    uint32_t *inst;                   /* collective: its instance (every member's same call) */
    uint32_t *first, *last;           /* issuing event: its group's first and last members (itself) */
    uint32_t *spos;                   /* the event's place in its stream's list */
    uint32_t *slist[GS_STREAM_COUNT]; /* the events of each stream, in list order */
    size_t slen[GS_STREAM_COUNT], head[GS_STREAM_COUNT];
} play_rank;

typedef struct p2p_tup {
    uint64_t src, dst, ord;
    uint32_t recv, ri, ev;
} p2p_tup;

typedef struct coll_tup {
    uint64_t kind, index, ord;
    uint32_t ri, ev;
} coll_tup;

static int p2p_cmp(const void *a, const void *b)
{
    const p2p_tup *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->ord != y->ord)
        return x->ord < y->ord ? -1 : 1;
    return (x->recv > y->recv) - (x->recv < y->recv);
}

static int coll_cmp(const void *a, const void *b)
{
    const coll_tup *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    if (x->ord != y->ord)
        return x->ord < y->ord ? -1 : 1;
    return (x->ri > y->ri) - (x->ri < y->ri);
}

static int is_p2p(const gs_event *e)
{
    return e->kind == GS_EV_SEND || e->kind == GS_EV_RECV;
}

/* The partner of a deferred send counts as issued once the receive that issues it is. */
static int issued(const play_rank *P, uint32_t ri, uint32_t e, uint32_t *const *lead)
{
    uint32_t l = lead[ri][e];
    return l ? P[ri].posted[l - 1] : P[ri].posted[e];
}

static uint8_t stream_of(const gs_event *e)
{
    return e->stream < GS_STREAM_COUNT ? e->stream : GS_STREAM_COMPUTE;
}

/* The first member of the group that j issues whose partner is not issued yet (NONE: every one
 * is, so the group completes). */
static uint32_t group_waits_on(const play_rank *P, uint32_t ri, uint32_t j, uint32_t *const *lead)
{
    const play_rank *r = &P[ri];
    uint8_t k = stream_of(&r->re->events[j]);
    for (uint32_t p = r->spos[r->first[j]]; p <= r->spos[r->last[j]]; p++) {
        uint32_t m = r->slist[k][p];
        if ((m == j || lead[ri][m] == j + 1) && !issued(P, r->pr[m], r->pe[m], lead))
            return m;
    }
    return NONE;
}

static int ready(const play_rank *r, uint32_t e)
{
    const gs_event *ev = &r->re->events[e];
    const uint32_t *deps = gs_event_list(r->re, ev, GS_LINK_DEPS);
    for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS]; j++)
        if (!r->done[deps[j]])
            return 0;
    return 1;
}

/* Plays until nothing moves; returns the events completed. */
static size_t play(play_rank *P, size_t nr, const uint32_t *inst_need, uint32_t *inst_count,
                   uint32_t *const *lead)
{
    size_t completed = 0;
    int moved;
    do {
        moved = 0;
        for (size_t i = 0; i < nr; i++) {
            play_rank *r = &P[i];
            for (int k = 0; k < GS_STREAM_COUNT; k++)
                while (r->head[k] < r->slen[k]) {
                    uint32_t e = r->slist[k][r->head[k]];
                    const gs_event *ev = &r->re->events[e];
                    if (!ready(r, e))
                        break;
                    if (ev->kind == GS_EV_COLLECTIVE) {
                        if (!r->arrived[e]) {
                            r->arrived[e] = 1;
                            inst_count[r->inst[e]]++;
                            moved = 1;
                        }
                        if (inst_count[r->inst[e]] < inst_need[r->inst[e]])
                            break;
                    } else if (is_p2p(ev) && !lead[i][e]) {
                        if (!r->posted[e]) {
                            r->posted[e] = 1;
                            moved = 1;
                        }
                        if (group_waits_on(P, (uint32_t)i, e, lead) != NONE)
                            break;
                    }
                    r->done[e] = 1;
                    r->head[k]++;
                    completed++;
                    moved = 1;
                }
        }
    } while (moved);
    return completed;
}

/* A receive that may be issued ahead of its place: no dependencies (the pipeline's receives; not
 * the tied exchange's, whose add follows it), not issued by another event, issuing no receives
 * of its own. Sends it issues are left to go alone (detach). */
static int hoistable(const play_rank *r, uint32_t e, uint32_t *const *lead, size_t ri)
{
    const gs_event *ev = &r->re->events[e];
    return ev->kind == GS_EV_RECV && ev->phase != GS_PHASE_OPTIM && ev->nlinks[GS_LINK_DEPS] == 0 &&
           lead[ri][e] == 0 && r->last[e] == e;
}

/* The sends e issues go alone again. */
static void detach(play_rank *r, uint32_t e, uint32_t *const *lead, size_t ri)
{
    uint8_t k = stream_of(&r->re->events[e]);
    for (uint32_t p = r->spos[r->first[e]]; p < r->spos[e]; p++)
        if (lead[ri][r->slist[k][p]] == e + 1)
            lead[ri][r->slist[k][p]] = 0;
    r->first[e] = e;
}

/* A hoist: a group that waits for a receive its peer has not issued, because the peer's stream is
 * held by a p2p event of its own that waits, gets that receive (and the peer's receives from the
 * same sender before it, which NCCL matches first) into the peer's waiting group, as Megatron
 * posts the next forward's receive with the current sends. 1 when one was made. */
static int hoist_one(play_rank *P, size_t nr, uint32_t *const *lead, size_t *hoisted)
{
    for (size_t i = 0; i < nr; i++) {
        play_rank *r = &P[i];
        for (int k = 0; k < GS_STREAM_COUNT; k++) {
            if (r->head[k] >= r->slen[k])
                continue;
            uint32_t e = r->slist[k][r->head[k]];
            if (!is_p2p(&r->re->events[e]) || lead[i][e] || !r->posted[e])
                continue;
            uint32_t m = group_waits_on(P, (uint32_t)i, e, lead);
            if (m == NONE || r->re->events[m].kind != GS_EV_SEND)
                continue;
            uint32_t qi = r->pr[m], R = r->pe[m];
            play_rank *q = &P[qi];
            const gs_event *rv = &q->re->events[R];
            uint8_t kq = stream_of(rv);
            if (q->head[kq] >= q->slen[kq])
                continue;
            uint32_t H = q->slist[kq][q->head[kq]];
            if (!is_p2p(&q->re->events[H]) || lead[qi][H] || !q->posted[H] || q->spos[R] <= q->spos[H])
                continue;
            /* the receives to hoist: R and the unissued ones from the same sender before it; the
             * group's members counted up to its last (which may lie past R) */
            size_t members = 0, ok = 1;
            uint32_t end = q->spos[R] > q->spos[q->last[H]] ? q->spos[R] : q->spos[q->last[H]];
            for (uint32_t p = q->spos[q->first[H]]; p <= end && ok; p++) {
                uint32_t x = q->slist[kq][p];
                const gs_event *xe = &q->re->events[x];
                if (x == H || lead[qi][x] == H + 1)
                    members++;
                else if (p > q->spos[H] && p <= q->spos[R] && xe->kind == GS_EV_RECV && xe->peer == rv->peer &&
                         lead[qi][x] == 0) {
                    ok = hoistable(q, x, lead, qi);
                    members++;
                }
            }
            if (!ok || members > GS_P2P_GROUP_MAX_SENDS)
                continue;
            for (uint32_t p = q->spos[H] + 1; p <= q->spos[R]; p++) {
                uint32_t x = q->slist[kq][p];
                const gs_event *xe = &q->re->events[x];
                if (xe->kind == GS_EV_RECV && xe->peer == rv->peer && lead[qi][x] == 0) {
                    detach(q, x, lead, qi);
                    lead[qi][x] = H + 1;
                    ++*hoisted;
                }
            }
            if (q->spos[R] > q->spos[q->last[H]])
                q->last[H] = R;
            return 1;
        }
    }
    return 0;
}

/* The error of a play that stays stuck: the first few streams that wait, and on what. */
static gs_status stuck_error(const play_rank *P, size_t nr, uint32_t *const *lead, gs_error *err)
{
    char msg[GS_ERROR_MSG_BYTES];
    int at = snprintf(msg, sizeof msg, "the schedule's sends and receives then wait in a cycle that no grouping of the "
                                       "sends breaks:");
    int shown = 0;
    for (size_t i = 0; i < nr && shown < 4; i++) {
        const play_rank *r = &P[i];
        for (int k = 0; k < GS_STREAM_COUNT && shown < 4; k++) {
            if (r->head[k] >= r->slen[k])
                continue;
            uint32_t e = r->slist[k][r->head[k]];
            const gs_event *ev = &r->re->events[e];
            if (!is_p2p(ev) || lead[i][e] || !r->posted[e])
                continue;
            uint32_t m = group_waits_on(P, (uint32_t)i, e, lead);
            if (m == NONE)
                continue;
            char a[GS_EVENT_NAME_BYTES], b[GS_EVENT_NAME_BYTES];
            gs_event_name(r->re, ev, a, sizeof a);
            const play_rank *q = &P[r->pr[m]];
            gs_event_name(q->re, &q->re->events[r->pe[m]], b, sizeof b);
            if (at > 0 && (size_t)at < sizeof msg)
                at += snprintf(msg + at, sizeof msg - (size_t)at, "%s rank %" PRIu64 "'s %s waits for rank %" PRIu64
                               "'s %s", shown ? ";" : "", r->re->rank, a, q->re->rank, b);
            shown++;
        }
    }
    if (!shown && at > 0 && (size_t)at < sizeof msg)
        snprintf(msg + at, sizeof msg - (size_t)at, " (the waits are collectives or dependencies)");
    return gs_error_set(err, GS_ERR_UNSUPPORTED, "%s", msg);
}

/* Pairing: a send and the receive next on its stream share a lead (lead[i][send] = recv + 1).
 * Returns the events of every rank. */
static size_t pair_sends(const gs_schedule *sch, int pair, uint32_t *const *lead)
{
    size_t total = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *re = &sch->ranks[i];
        memset(lead[i], 0, re->nevents * sizeof *lead[i]);
        uint32_t last[GS_STREAM_COUNT];
        for (int k = 0; k < GS_STREAM_COUNT; k++)
            last[k] = NONE;
        for (size_t e = 0; e < re->nevents && pair; e++) {
            uint8_t k = stream_of(&re->events[e]);
            if (re->events[e].kind == GS_EV_RECV && last[k] != NONE && re->events[last[k]].kind == GS_EV_SEND)
                lead[i][last[k]] = (uint32_t)e + 1;
            last[k] = (uint32_t)e;
        }
        total += re->nevents;
    }
    return total;
}

/* The planner's working state: the play of every rank, the sends and receives and the
 * collectives as tuples, the collective instances (owned; plan_fini frees them). */
typedef struct plan_state {
    const gs_schedule *sch;
    size_t nr;
    uint64_t world;
    play_rank *P;
    p2p_tup *pt;
    coll_tup *ct;
    size_t np, nc, ninst;
    uint32_t *idx, *inst_need, *inst_count;
    uint64_t *sends_to, *recvs_from;
} plan_state;

static void plan_fini(plan_state *ps)
{
    if (ps->P)
        for (size_t i = 0; i < ps->nr; i++) {
            play_rank *r = &ps->P[i];
            free(r->done);
            free(r->posted);
            free(r->arrived);
            free(r->pr);
            free(r->pe);
            free(r->inst);
            free(r->first);
            free(r->last);
            free(r->spos);
            for (int k = 0; k < GS_STREAM_COUNT; k++)
                free(r->slist[k]);
        }
    free(ps->P);
    free(ps->pt);
    free(ps->ct);
    free(ps->idx);
    free(ps->inst_need);
    free(ps->inst_count);
    free(ps->sends_to);
    free(ps->recvs_from);
}

/* Rank i's play: its streams' event lists and the per-event state; counts its sends and
 * receives into ps->np and its collectives into ps->nc. */
static gs_status play_rank_init(plan_state *ps, size_t i, uint32_t *const *lead, gs_error *err)
{
    play_rank *r = &ps->P[i];
    const gs_rank_events *re = &ps->sch->ranks[i];
    size_t n = re->nevents ? re->nevents : 1;
    r->re = re;
    r->done = calloc(n, 1);
    r->posted = calloc(n, 1);
    r->arrived = calloc(n, 1);
    r->pr = malloc(n * sizeof *r->pr);
    r->pe = malloc(n * sizeof *r->pe);
    r->inst = malloc(n * sizeof *r->inst);
    r->first = malloc(n * sizeof *r->first);
    r->last = malloc(n * sizeof *r->last);
    r->spos = malloc(n * sizeof *r->spos);
    for (int k = 0; k < GS_STREAM_COUNT; k++)
        r->slist[k] = malloc(n * sizeof *r->slist[k]);
    int ok = r->done && r->posted && r->arrived && r->pr && r->pe && r->inst && r->first && r->last &&
             r->spos;
    for (int k = 0; k < GS_STREAM_COUNT; k++)
        ok = ok && r->slist[k];
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory planning p2p groups");
    for (size_t e = 0; e < re->nevents; e++) {
        const gs_event *ev = &re->events[e];
        uint8_t k = stream_of(ev);
        r->spos[e] = (uint32_t)r->slen[k];
        r->slist[k][r->slen[k]++] = (uint32_t)e;
        r->pr[e] = r->pe[e] = r->inst[e] = NONE;
        r->first[e] = r->last[e] = (uint32_t)e;
        ps->np += is_p2p(ev);
        ps->nc += ev->kind == GS_EV_COLLECTIVE;
    }
    for (size_t e = 0; e < re->nevents; e++)
        if (lead[i][e])
            r->first[lead[i][e] - 1] = (uint32_t)e;
    return GS_OK;
}

/* Every rank's index in the schedule (ps->idx) and its play. */
static gs_status plan_ranks(plan_state *ps, uint32_t *const *lead, gs_error *err)
{
    ps->P = calloc(ps->nr, sizeof *ps->P);
    ps->idx = malloc(ps->world * sizeof *ps->idx);
    ps->sends_to = calloc(ps->world, sizeof *ps->sends_to);
    ps->recvs_from = calloc(ps->world, sizeof *ps->recvs_from);
    if (!ps->P || !ps->idx || !ps->sends_to || !ps->recvs_from)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory planning p2p groups");
    for (uint64_t g = 0; g < ps->world; g++)
        ps->idx[g] = NONE;
    for (size_t i = 0; i < ps->nr; i++) {
        uint64_t rank = ps->sch->ranks[i].rank;
        if (rank >= ps->world || ps->idx[rank] != NONE)
            return gs_error_set(err, GS_ERR_INPUT, "exec: the schedule's rank lists are not one per rank");
        ps->idx[rank] = (uint32_t)i;
    }
    gs_status rc = GS_OK;
    for (size_t i = 0; i < ps->nr && rc == GS_OK; i++)
        rc = play_rank_init(ps, i, lead, err);
    return rc;
}

/* The sends and receives as (src, dst, order between the pair) tuples, the collectives as
 * (kind, group, order in the group) tuples. */
static gs_status gather_tuples(plan_state *ps, gs_error *err)
{
    uint64_t world = ps->world;
    ps->pt = malloc((ps->np ? ps->np : 1) * sizeof *ps->pt);
    ps->ct = malloc((ps->nc ? ps->nc : 1) * sizeof *ps->ct);
    if (!ps->pt || !ps->ct)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory planning p2p groups");
    ps->np = ps->nc = 0;
    for (size_t i = 0; i < ps->nr; i++) {
        const gs_rank_events *re = &ps->sch->ranks[i];
        uint64_t coll_ord[GS_GROUP_KIND_COUNT + 1] = {0};
        memset(ps->sends_to, 0, world * sizeof *ps->sends_to);
        memset(ps->recvs_from, 0, world * sizeof *ps->recvs_from);
        for (size_t e = 0; e < re->nevents; e++) {
            const gs_event *ev = &re->events[e];
            if (is_p2p(ev)) {
                if (ev->peer >= world)
                    return gs_error_set(err, GS_ERR_INPUT,
                                        "exec: rank %" PRIu64 " has a send or receive with rank %" PRIu64
                                        ", outside the mesh",
                                        re->rank, ev->peer);
                int rv = ev->kind == GS_EV_RECV;
                ps->pt[ps->np++] = (p2p_tup){rv ? ev->peer : re->rank, rv ? re->rank : ev->peer,
                                             rv ? ps->recvs_from[ev->peer]++ : ps->sends_to[ev->peer]++, (uint32_t)rv,
                                             (uint32_t)i, (uint32_t)e};
            } else if (ev->kind == GS_EV_COLLECTIVE) {
                uint64_t kind = ev->group < GS_GROUP_KIND_COUNT ? ev->group : GS_GROUP_KIND_COUNT;
                ps->ct[ps->nc++] = (coll_tup){kind, ev->peer, coll_ord[kind]++, (uint32_t)i, (uint32_t)e};
            }
        }
    }
    return GS_OK;
}

/* Matches every send with its receive (the k-th send from a to b with the k-th receive at b from
 * a); an unmatched one is an input error naming it. */
static gs_status match_p2p(plan_state *ps, gs_error *err)
{
    p2p_tup *pt = ps->pt;
    play_rank *P = ps->P;
    size_t np = ps->np;
    qsort(pt, np, sizeof *pt, p2p_cmp);
    for (size_t a = 0; a < np; a += 2) {
        if (a + 1 >= np || pt[a].recv || !pt[a + 1].recv || pt[a].src != pt[a + 1].src || pt[a].dst != pt[a + 1].dst ||
            pt[a].ord != pt[a + 1].ord) {
            const p2p_tup *u = &pt[a];
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(P[u->ri].re, &P[u->ri].re->events[u->ev], name, sizeof name);
            return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 "'s %s (%s rank %" PRIu64 ") has no match",
                                P[u->ri].re->rank, name, u->recv ? "from" : "to", u->recv ? u->src : u->dst);
        }
        P[pt[a].ri].pr[pt[a].ev] = pt[a + 1].ri;
        P[pt[a].ri].pe[pt[a].ev] = pt[a + 1].ev;
        P[pt[a + 1].ri].pr[pt[a + 1].ev] = pt[a].ri;
        P[pt[a + 1].ri].pe[pt[a + 1].ev] = pt[a].ev;
    }
    return GS_OK;
}

/* Numbers the collective instances (the members' events of one call) and how many members each
 * waits for. */
static gs_status number_instances(plan_state *ps, gs_error *err)
{
    coll_tup *ct = ps->ct;
    size_t nc = ps->nc;
    qsort(ct, nc, sizeof *ct, coll_cmp);
    ps->inst_need = malloc((nc ? nc : 1) * sizeof *ps->inst_need);
    ps->inst_count = calloc(nc ? nc : 1, sizeof *ps->inst_count);
    if (!ps->inst_need || !ps->inst_count)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory planning p2p groups");
    for (size_t a = 0; a < nc;) {
        size_t b = a;
        while (b < nc && ct[b].kind == ct[a].kind && ct[b].index == ct[a].index && ct[b].ord == ct[a].ord)
            ps->P[ct[b].ri].inst[ct[b].ev] = (uint32_t)ps->ninst, b++;
        ps->inst_need[ps->ninst++] = (uint32_t)(b - a);
        a = b;
    }
    return GS_OK;
}

gs_status gs_p2p_groups_plan(const gs_schedule *sch, int pair, int rendezvous, uint32_t *const *lead,
                             size_t *hoisted, gs_error *err)
{
    gs_status rc = GS_OK;
    size_t nhoisted = 0;
    plan_state ps = {.sch = sch, .nr = sch->nranks, .world = sch->mesh.world};
    if (hoisted)
        *hoisted = 0;
    size_t total = pair_sends(sch, pair, lead);
    if (!pair || !rendezvous || ps.nr == 0)
        return GS_OK;
    if (!sch->exact || ps.nr != ps.world)
        return gs_error_set(err, GS_ERR_INPUT, "exec: p2p groups need the schedule of every rank");
    if ((rc = plan_ranks(&ps, lead, err)) != GS_OK || (rc = gather_tuples(&ps, err)) != GS_OK ||
        (rc = match_p2p(&ps, err)) != GS_OK || (rc = number_instances(&ps, err)) != GS_OK)
        goto out;
    size_t completed = 0;
    for (;;) {
        completed += play(ps.P, ps.nr, ps.inst_need, ps.inst_count, lead);
        if (completed == total)
            break;
        if (!hoist_one(ps.P, ps.nr, lead, &nhoisted)) {
            rc = stuck_error(ps.P, ps.nr, lead, err);
            goto out;
        }
    }
    if (hoisted)
        *hoisted = nhoisted;
out:
    plan_fini(&ps);
    return rc;
}
