/* The schedule's structural validation (gs_schedule_validate_structure, engine/schedule.h): per
 * rank the events' fields, cycles and tensor lifetimes; across ranks collectives and p2p matched;
 * roles against engine/roles.c; scratch tensors' stream hazards (engine/schedule_hazard.c); and
 * gs_schedule_validate, which adds the ledger equalities. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/roles.h"
#include "engine/schedule_internal.h"

/* ------------------------------------------------------------------------ validation ---- */

static const char *tensor_desc(const gs_rank_events *r, uint32_t t, char *buf, size_t len)
{
    const gs_tensor *x = &r->tensors[t];
    char lb[16];
    snprintf(buf, len, "tensor %" PRIu32 " (%s, layer %s, mb %" PRIu32 ", unit %" PRIu32 ", %" PRIu64 " B)", t,
             gs_tensor_kind_name((gs_tensor_kind)x->kind), gs__layer_word(x->layer, lb, sizeof lb), x->mb, x->unit,
             x->bytes);
    return buf;
}

/* Per-event field checks: enums, layers, flops, link indices, collective groups, p2p peers. */
static gs_status check_events(const gs_schedule *sch, const gs_rank_events *r, gs_error *err)
{
    char nm[GS_EVENT_NAME_BYTES];
    uint64_t gidx[GS_GROUP_KIND_COUNT], gsize[GS_GROUP_KIND_COUNT];
    int have[GS_GROUP_KIND_COUNT] = {0};
    for (size_t i = 0; i < r->ntensors; i++) {
        const gs_tensor *t = &r->tensors[i];
        if (t->kind >= GS_T_KIND_COUNT || t->layer < GS_LAYER_HEAD || t->resident > 1 || t->on_host > 1)
            return gs_error_set(err, GS_ERR_RUNTIME,
                                "rank %" PRIu64 ": tensor %zu has kind %u, layer %" PRId32
                                ", resident %u, host %u (out of range)",
                                r->rank, i, (unsigned)t->kind, t->layer, (unsigned)t->resident,
                                (unsigned)t->on_host);
    }
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        if (e->kind >= GS_EV_KIND_COUNT || e->stream >= GS_STREAM_COUNT || e->phase >= GS_PHASE_COUNT ||
            (e->kind == GS_EV_COMPUTE && e->op >= GS_OP_COUNT) ||
            (e->kind == GS_EV_COLLECTIVE && (e->op >= GS_COLL_COUNT || e->group >= GS_GROUP_KIND_COUNT)))
            return gs_error_set(err, GS_ERR_RUNTIME,
                                "rank %" PRIu64 ": event %s has kind %u, stream %u, phase %u, op %u, "
                                "group %u (out of range)",
                                r->rank, EV_NAME(r, i, nm), (unsigned)e->kind, (unsigned)e->stream,
                                (unsigned)e->phase, (unsigned)e->op, (unsigned)e->group);
        if (e->layer < GS_LAYER_HEAD)
            return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s has layer %" PRId32 " (out of range)",
                                r->rank, EV_NAME(r, i, nm), e->layer);
        if (!isfinite(e->flops) || e->flops < 0)
            return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s has %g FLOPs", r->rank,
                                EV_NAME(r, i, nm), e->flops);
        if ((size_t)e->links + e->nlinks[0] + e->nlinks[1] + e->nlinks[2] + e->nlinks[3] + e->nlinks[4] > r->npool)
            return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s: lists beyond the link pool",
                                r->rank, EV_NAME(r, i, nm));
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            if (d[j] >= r->nevents)
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "rank %" PRIu64 ": event %s depends on event #%" PRIu32
                                    ", but the rank has %zu events",
                                    r->rank, EV_NAME(r, i, nm), d[j], r->nevents);
        for (int w = GS_LINK_READS; w < GS_LINK_LISTS; w++) {
            const uint32_t *l = gs_event_list(r, e, w);
            for (uint32_t j = 0; j < e->nlinks[w]; j++)
                if (l[j] >= r->ntensors)
                    return gs_error_set(err, GS_ERR_RUNTIME,
                                        "rank %" PRIu64 ": event %s %s tensor %" PRIu32 ", but the rank has %zu tensors",
                                        r->rank, EV_NAME(r, i, nm), gs__link_names[w], l[j], r->ntensors);
        }
        if (e->kind == GS_EV_COLLECTIVE) {
            if (!have[e->group]) {
                gidx[e->group] = gs_group_of(&sch->mesh, (gs_group_kind)e->group, r->rank, &gsize[e->group]);
                have[e->group] = 1;
            }
            if (e->peer != gidx[e->group])
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "rank %" PRIu64 ": event %s runs on %s group %" PRIu64
                                    ", but rank %" PRIu64 " belongs to %s group %" PRIu64,
                                    r->rank, EV_NAME(r, i, nm), gs__group_names[e->group], e->peer, r->rank,
                                    gs__group_names[e->group], gidx[e->group]);
            if (e->group_size != gsize[e->group])
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "rank %" PRIu64 ": event %s says its %s group has %" PRIu64
                                    " ranks, but it has %" PRIu64,
                                    r->rank, EV_NAME(r, i, nm), gs__group_names[e->group], e->group_size,
                                    gsize[e->group]);
        } else if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV) {
            if (e->peer >= sch->mesh.world || e->peer == r->rank)
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "rank %" PRIu64 ": event %s has peer rank %" PRIu64
                                    " (the mesh has %" PRIu64 " ranks)",
                                    r->rank, EV_NAME(r, i, nm), e->peer, sch->mesh.world);
        }
    }
    return GS_OK;
}

/* (a) Cycles: deps pointing backwards cannot close one; otherwise an iterative DFS. */
static gs_status check_cycles(const gs_rank_events *r, gs_error *err)
{
    int forward = 0;
    for (size_t i = 0; i < r->nevents && !forward; i++) {
        const gs_event *e = &r->events[i];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            if (d[j] >= i)
                forward = 1;
    }
    if (!forward)
        return GS_OK;
    gs_status st = GS_OK;
    uint8_t *color = calloc(r->nevents, 1); /* 0 new, 1 on the stack, 2 done */
    uint32_t *stack = malloc(r->nevents * sizeof *stack);
    uint32_t *next = malloc(r->nevents * sizeof *next); /* next dep to follow, per stack level */
    if (!color || !stack || !next) {
        st = gs_error_set(err, GS_ERR_NOMEM, "out of memory checking rank %" PRIu64 " for cycles", r->rank);
        goto out;
    }
    for (size_t s = 0; s < r->nevents; s++) {
        if (color[s])
            continue;
        size_t top = 0;
        stack[0] = (uint32_t)s;
        next[0] = 0;
        color[s] = 1;
        for (;;) {
            uint32_t v = stack[top];
            const gs_event *e = &r->events[v];
            if (next[top] < e->nlinks[GS_LINK_DEPS]) {
                uint32_t d = gs_event_list(r, e, GS_LINK_DEPS)[next[top]++];
                if (color[d] == 0) {
                    color[d] = 1;
                    top++;
                    stack[top] = d;
                    next[top] = 0;
                } else if (color[d] == 1) {
                    size_t from = top;
                    while (stack[from] != d)
                        from--;
                    char msg[GS_ERROR_MSG_BYTES - 64], nm[GS_EVENT_NAME_BYTES];
                    size_t pos = 0;
                    size_t shown = 0;
                    for (size_t k = from; k <= top; k++, shown++) {
                        if (shown == 12 && top - k > 1) {
                            gs__append(msg, sizeof msg, &pos, "... (%zu more) -> ", top - k);
                            k = top;
                        }
                        gs__append(msg, sizeof msg, &pos, "%s -> ", EV_NAME(r, stack[k], nm));
                    }
                    gs__append(msg, sizeof msg, &pos, "%s", EV_NAME(r, d, nm));
                    st = gs_error_set(err, GS_ERR_RUNTIME,
                                      "rank %" PRIu64 ": cycle through event %s (each waits for the next)",
                                      r->rank, msg);
                    goto out;
                }
            } else {
                color[v] = 2;
                if (top == 0)
                    break;
                top--;
            }
        }
    }
out:
    free(color);
    free(stack);
    free(next);
    return st;
}

/* (d) Tensor lifetimes in list order: allocs before the event, frees after it. */
static gs_status check_lifetimes(const gs_rank_events *r, gs_error *err)
{
    enum { T_NEW = 0, T_LIVE = 1, T_FREED = 2 };
    gs_status st = GS_OK;
    uint8_t *state = malloc(r->ntensors ? r->ntensors : 1);
    uint32_t *freed_by = malloc((r->ntensors ? r->ntensors : 1) * sizeof *freed_by);
    char nm[GS_EVENT_NAME_BYTES], nm2[GS_EVENT_NAME_BYTES], td[160];
    if (!state || !freed_by) {
        st = gs_error_set(err, GS_ERR_NOMEM, "out of memory checking rank %" PRIu64 " tensors", r->rank);
        goto out;
    }
    for (size_t t = 0; t < r->ntensors; t++)
        state[t] = r->tensors[t].resident ? T_LIVE : T_NEW;
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        const uint32_t *l = gs_event_list(r, e, GS_LINK_ALLOCS);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_ALLOCS]; j++) {
            if (state[l[j]] == T_LIVE) {
                st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s allocates %s, which is already live",
                                  r->rank, EV_NAME(r, i, nm), tensor_desc(r, l[j], td, sizeof td));
                goto out;
            }
            state[l[j]] = T_LIVE;
        }
        for (int w = GS_LINK_READS; w <= GS_LINK_WRITES; w++) {
            const char *verb = w == GS_LINK_READS ? "reads" : "writes";
            l = gs_event_list(r, e, w);
            for (uint32_t j = 0; j < e->nlinks[w]; j++) {
                if (state[l[j]] == T_NEW) {
                    st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s %s %s before it is allocated",
                                      r->rank, EV_NAME(r, i, nm), verb, tensor_desc(r, l[j], td, sizeof td));
                    goto out;
                }
                if (state[l[j]] == T_FREED) {
                    st = gs_error_set(err, GS_ERR_RUNTIME,
                                      "rank %" PRIu64 ": event %s %s %s after event %s freed it", r->rank,
                                      EV_NAME(r, i, nm), verb, tensor_desc(r, l[j], td, sizeof td),
                                      EV_NAME(r, freed_by[l[j]], nm2));
                    goto out;
                }
            }
        }
        l = gs_event_list(r, e, GS_LINK_FREES);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_FREES]; j++) {
            if (state[l[j]] == T_FREED) {
                st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s frees %s, already freed by event %s (double free)",
                                  r->rank, EV_NAME(r, i, nm), tensor_desc(r, l[j], td, sizeof td),
                                  EV_NAME(r, freed_by[l[j]], nm2));
                goto out;
            }
            if (state[l[j]] == T_NEW) {
                st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s frees %s, which was never allocated",
                                  r->rank, EV_NAME(r, i, nm), tensor_desc(r, l[j], td, sizeof td));
                goto out;
            }
            state[l[j]] = T_FREED;
            freed_by[l[j]] = (uint32_t)i;
        }
    }
out:
    free(state);
    free(freed_by);
    return st;
}

/* Present ranks: list positions sorted by global rank (for lookups by rank). */
typedef struct rank_pos {
    uint64_t rank;
    uint32_t pos;
} rank_pos;

static int cmp_rank_pos(const void *a, const void *b)
{
    const rank_pos *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Position of global rank in the schedule, or -1. */
static long find_pos(const rank_pos *by_rank, size_t n, uint64_t rank)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_rank[mid].rank == rank)
            return (long)by_rank[mid].pos;
        if (by_rank[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

typedef struct group_member {
    uint64_t group; /* group index */
    uint64_t rank;
    uint32_t pos;
} group_member;

static int cmp_group_member(const void *a, const void *b)
{
    const group_member *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static const char *coll_desc(const gs_event *e, char *buf, size_t len)
{
    snprintf(buf, len, "%s %" PRIu64 " B over %" PRIu64 " ranks", gs_coll_op_name((gs_coll_op)e->op), e->bytes,
             e->group_size);
    return buf;
}

/* (b) Every present member of a group issues the same collectives on it, in the same order. */
static gs_status check_collectives(const gs_schedule *sch, gs_error *err)
{
    const size_t R = sch->nranks, K = GS_GROUP_KIND_COUNT;
    gs_status st = GS_OK;
    size_t *off = calloc(R * K + 1, sizeof *off);
    uint32_t *seq = NULL;
    size_t *fill = NULL;
    group_member *gm = NULL;
    char nm[GS_EVENT_NAME_BYTES], d1[96], d2[96];
    if (!off)
        goto nomem;
    size_t total = 0;
    int used[GS_GROUP_KIND_COUNT] = {0};
    for (size_t p = 0; p < R; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        for (size_t i = 0; i < r->nevents; i++)
            if (r->events[i].kind == GS_EV_COLLECTIVE) {
                off[p * K + r->events[i].group + 1]++;
                used[r->events[i].group] = 1;
                total++;
            }
    }
    if (total == 0)
        goto out;
    for (size_t i = 1; i <= R * K; i++)
        off[i] += off[i - 1];
    seq = malloc(total * sizeof *seq);
    fill = malloc(R * K * sizeof *fill);
    gm = malloc((R ? R : 1) * sizeof *gm);
    if (!seq || !fill || !gm)
        goto nomem;
    memcpy(fill, off, R * K * sizeof *fill);
    for (size_t p = 0; p < R; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        for (size_t i = 0; i < r->nevents; i++)
            if (r->events[i].kind == GS_EV_COLLECTIVE)
                seq[fill[p * K + r->events[i].group]++] = (uint32_t)i;
    }
    for (size_t k = 0; k < K; k++) {
        if (!used[k])
            continue;
        for (size_t p = 0; p < R; p++) {
            gm[p].rank = sch->ranks[p].rank;
            gm[p].pos = (uint32_t)p;
            gm[p].group = gs_group_of(&sch->mesh, (gs_group_kind)k, sch->ranks[p].rank, NULL);
        }
        qsort(gm, R, sizeof *gm, cmp_group_member);
        for (size_t a = 0; a < R;) {
            size_t b = a + 1;
            while (b < R && gm[b].group == gm[a].group)
                b++;
            const size_t ref = gm[a].pos;
            const gs_rank_events *rr = &sch->ranks[ref];
            const uint32_t *rs = seq + off[ref * K + k];
            const size_t rn = off[ref * K + k + 1] - off[ref * K + k];
            for (size_t c = a + 1; c < b; c++) {
                const size_t mp = gm[c].pos;
                const gs_rank_events *mr = &sch->ranks[mp];
                const uint32_t *ms = seq + off[mp * K + k];
                const size_t mn = off[mp * K + k + 1] - off[mp * K + k];
                for (size_t j = 0; j < rn || j < mn; j++) {
                    if (j >= mn) {
                        st = gs_error_set(err, GS_ERR_RUNTIME,
                                          "collective mismatch on %s group %" PRIu64 ": rank %" PRIu64
                                          " is missing a collective that rank %" PRIu64
                                          " issues as %s (%s; its collective #%zu on the group)",
                                          gs__group_names[k], gm[a].group, mr->rank, rr->rank, EV_NAME(rr, rs[j], nm),
                                          coll_desc(&rr->events[rs[j]], d1, sizeof d1), j + 1);
                        goto out;
                    }
                    if (j >= rn) {
                        st = gs_error_set(err, GS_ERR_RUNTIME,
                                          "collective mismatch on %s group %" PRIu64 ": rank %" PRIu64
                                          " is missing a collective that rank %" PRIu64
                                          " issues as %s (%s; its collective #%zu on the group)",
                                          gs__group_names[k], gm[a].group, rr->rank, mr->rank, EV_NAME(mr, ms[j], nm),
                                          coll_desc(&mr->events[ms[j]], d1, sizeof d1), j + 1);
                        goto out;
                    }
                    const gs_event *x = &rr->events[rs[j]], *y = &mr->events[ms[j]];
                    if (x->op != y->op || x->bytes != y->bytes || x->group_size != y->group_size) {
                        char nm2[GS_EVENT_NAME_BYTES];
                        st = gs_error_set(err, GS_ERR_RUNTIME,
                                          "collective mismatch on %s group %" PRIu64 ": rank %" PRIu64
                                          " event %s is %s, rank %" PRIu64 " has %s: %s (collective #%zu on the group)",
                                          gs__group_names[k], gm[a].group, rr->rank, EV_NAME(rr, rs[j], nm),
                                          coll_desc(x, d1, sizeof d1), mr->rank, EV_NAME(mr, ms[j], nm2),
                                          coll_desc(y, d2, sizeof d2), j + 1);
                        goto out;
                    }
                }
            }
            a = b;
        }
    }
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "out of memory matching collectives");
out:
    free(off);
    free(seq);
    free(fill);
    free(gm);
    return st;
}

typedef struct p2p_rec {
    uint64_t src, dst;
    uint32_t pos; /* list position of the rank holding the event */
    uint32_t ev;
} p2p_rec;

static int cmp_p2p(const void *a, const void *b)
{
    const p2p_rec *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return x->ev < y->ev ? -1 : x->ev > y->ev;
}

/* (c) Sends and receives between present ranks pair up in order with equal bytes. */
static gs_status check_p2p(const gs_schedule *sch, const rank_pos *by_rank, gs_error *err)
{
    const size_t R = sch->nranks;
    size_t ns = 0, nr = 0;
    gs_status st = GS_OK;
    for (size_t p = 0; p < R; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        for (size_t i = 0; i < r->nevents; i++) {
            ns += r->events[i].kind == GS_EV_SEND;
            nr += r->events[i].kind == GS_EV_RECV;
        }
    }
    if (ns + nr == 0)
        return GS_OK;
    p2p_rec *s = malloc((ns ? ns : 1) * sizeof *s), *v = malloc((nr ? nr : 1) * sizeof *v);
    char nm[GS_EVENT_NAME_BYTES], nm2[GS_EVENT_NAME_BYTES];
    if (!s || !v) {
        st = gs_error_set(err, GS_ERR_NOMEM, "out of memory matching sends and receives");
        goto out;
    }
    ns = nr = 0;
    for (size_t p = 0; p < R; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        for (size_t i = 0; i < r->nevents; i++) {
            const gs_event *e = &r->events[i];
            if ((e->kind != GS_EV_SEND && e->kind != GS_EV_RECV) || find_pos(by_rank, R, e->peer) < 0)
                continue;
            p2p_rec x = {e->kind == GS_EV_SEND ? r->rank : e->peer, e->kind == GS_EV_SEND ? e->peer : r->rank,
                         (uint32_t)p, (uint32_t)i};
            if (e->kind == GS_EV_SEND)
                s[ns++] = x;
            else
                v[nr++] = x;
        }
    }
    qsort(s, ns, sizeof *s, cmp_p2p);
    qsort(v, nr, sizeof *v, cmp_p2p);
    size_t i = 0, j = 0;
    while (i < ns || j < nr) {
        int c = i >= ns ? 1 : j >= nr ? -1
                : s[i].src != v[j].src ? (s[i].src < v[j].src ? -1 : 1)
                : s[i].dst != v[j].dst ? (s[i].dst < v[j].dst ? -1 : 1)
                : 0;
        if (c < 0) {
            const gs_rank_events *r = &sch->ranks[s[i].pos];
            st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": send %s to rank %" PRIu64 " has no matching recv",
                              r->rank, EV_NAME(r, s[i].ev, nm), s[i].dst);
            goto out;
        }
        if (c > 0) {
            const gs_rank_events *r = &sch->ranks[v[j].pos];
            st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": recv %s from rank %" PRIu64 " has no matching send",
                              r->rank, EV_NAME(r, v[j].ev, nm), v[j].src);
            goto out;
        }
        const gs_rank_events *rs = &sch->ranks[s[i].pos], *rv = &sch->ranks[v[j].pos];
        const gs_event *es = &rs->events[s[i].ev], *ev = &rv->events[v[j].ev];
        if (es->bytes != ev->bytes) {
            st = gs_error_set(err, GS_ERR_RUNTIME,
                              "rank %" PRIu64 ": send %s to rank %" PRIu64 " carries %" PRIu64
                              " B, but its matching recv %s on rank %" PRIu64 " expects %" PRIu64 " B",
                              rs->rank, EV_NAME(rs, s[i].ev, nm), s[i].dst, es->bytes, EV_NAME(rv, v[j].ev, nm2),
                              rv->rank, ev->bytes);
            goto out;
        }
        i++;
        j++;
    }
out:
    free(s);
    free(v);
    return st;
}

/* (e) Roles: every event has one, and agrees with engine/roles.c's entry for it. */
static gs_status check_roles(const gs_rank_events *r, gs_error *err)
{
    char nm[GS_EVENT_NAME_BYTES], why[96];
    for (size_t i = 0; i < r->nevents; i++)
        if (!gs_role_check(&r->events[i], why, sizeof why))
            return gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 ": event %s %s", r->rank, EV_NAME(r, i, nm), why);
    return GS_OK;
}

gs_status gs_schedule_validate_structure(const gs_schedule *sch, gs_error *err)
{
    const gs_mesh *m = &sch->mesh;
    if (m->world == 0 || m->gpus_per_node == 0 || m->size[GS_DIM_TP] * m->size[GS_DIM_DP] * m->size[GS_DIM_PP] != m->world)
        return gs_error_set(err, GS_ERR_RUNTIME, "schedule: the mesh is not initialized");
    if (sch->nranks >= UINT32_MAX)
        return gs_error_set(err, GS_ERR_RUNTIME, "schedule: %zu rank lists (too many)", sch->nranks);
    gs_status st = GS_OK;
    rank_pos *by_rank = malloc((sch->nranks ? sch->nranks : 1) * sizeof *by_rank);
    if (!by_rank)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory validating the schedule");
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        uint64_t c[GS_DIM_COUNT];
        if (r->rank >= m->world) {
            st = gs_error_set(err, GS_ERR_RUNTIME, "rank list %zu is for rank %" PRIu64 ", but the mesh has %" PRIu64 " ranks",
                              p, r->rank, m->world);
            goto out;
        }
        gs_mesh_rank_coords(m, r->rank, c);
        if (r->stage != c[GS_DIM_PP] || r->class_size == 0) {
            st = gs_error_set(err, GS_ERR_RUNTIME,
                              "rank %" PRIu64 ": stage %" PRIu64 " and class size %" PRIu64
                              " (the mesh puts it on stage %" PRIu64 "; class size must be at least 1)",
                              r->rank, r->stage, r->class_size, c[GS_DIM_PP]);
            goto out;
        }
        by_rank[p].rank = r->rank;
        by_rank[p].pos = (uint32_t)p;
    }
    qsort(by_rank, sch->nranks, sizeof *by_rank, cmp_rank_pos);
    for (size_t p = 1; p < sch->nranks; p++)
        if (by_rank[p].rank == by_rank[p - 1].rank) {
            st = gs_error_set(err, GS_ERR_RUNTIME, "rank %" PRIu64 " appears twice in the schedule (lists %" PRIu32 " and %" PRIu32 ")",
                              by_rank[p].rank, by_rank[p - 1].pos, by_rank[p].pos);
            goto out;
        }
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        if ((st = check_events(sch, r, err)) != GS_OK || (st = check_cycles(r, err)) != GS_OK ||
            (st = check_lifetimes(r, err)) != GS_OK)
            goto out;
    }
    if ((st = check_collectives(sch, err)) != GS_OK || (st = check_p2p(sch, by_rank, err)) != GS_OK)
        goto out;
    for (size_t p = 0; p < sch->nranks && st == GS_OK; p++)
        if ((st = check_roles(&sch->ranks[p], err)) == GS_OK)
            st = gs__schedule_check_hazards(&sch->ranks[p], err);
out:
    free(by_rank);
    return st;
}

gs_status gs_schedule_validate(const gs_schedule *sch, const gs_scenario *s, gs_error *err)
{
    gs_status st = gs_schedule_validate_structure(sch, err);
    if (st != GS_OK)
        return st;
    /* The ledger equalities (bytes sent, memory peak) live beside the builders: engine/build.c. */
    return gs__schedule_check_ledger(sch, s, err);
}

