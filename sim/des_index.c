/* The DES's setup (sim/des_internal.h): templates, per-rank state, collective instances and
 * send/recv pairs numbered arithmetically, and the event durations the loop reads.
 *
 * A collective instance is (group kind, group index, k-th collective of a member on that
 * group): the instances of group (g, i) are numbered from inst_first[g][i], so an event's
 * instance is its slot's first instance plus its sequence number within the slot. A send/recv
 * pair is (sender, receiver, k-th send from the one to the other): the sender's slot owns a
 * block of pair numbers, and the receiver's slot for that sender points into it. No map is
 * consulted once the run starts. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim/collective.h"
#include "sim/contention.h"
#include "sim/des_internal.h"

void *des_big_calloc(size_t n, size_t size)
{
    size_t bytes = n * size, huge = (size_t)2 << 20;
    if (size && bytes / size != n)
        return NULL;
    if (bytes < 2 * huge)
        return calloc(n ? n : 1, size ? size : 1);
    void *p = NULL;
    bytes = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without it, 4 KiB pages */
#endif
    memset(p, 0, bytes);
    return p;
}

/* ---- the cost cache: seconds by a triple of 64-bit keys, compared whole ---------------------- */

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

/* An event's duration as far as it does not depend on the moment it starts (everything but a
 * compute event's overlap slowdown and its rank's straggler factor): identical compute ops
 * (every layer, every micro-batch) cost the same, cached by shape; a collective's cost depends
 * on its group's shape, a send's on whether its peer shares the node (the variant v, whose
 * slot j's same-node bit is `same`). */
static double event_base_s(const sim_state *st, cost_map *cache, const des_variant *v, size_t vi,
                           const gs_event *e, int same)
{
    const gs_topo *topo = st->flow ? &st->flow_topo : &st->topo;
    cost_entry *ce;
    switch ((gs_event_kind)e->kind) {
    case GS_EV_COMPUTE:
        /* the role too: it decides the kernels of an op (a block's norm against the final one) */
        ce = cost_map_find(cache, ((uint64_t)e->op << 8 | e->phase) ^ ((uint64_t)e->gemm_batch << 16) ^
                                      ((uint64_t)e->role << 56),
                           (uint64_t)e->gemm_m << 32 | e->gemm_n,
                           ((uint64_t)e->gemm_k << 32) ^ e->bytes ^ ((uint64_t)(e->flops * 1e-3) << 7));
        if (!ce->used) {
            ce->cost_s = (e->phase == GS_PHASE_OPTIM && st->s.strategy.offload) ? gs_compute_time_host(&st->cm, e)
                                                                                : gs_compute_time(&st->cm, e);
            ce->used = 1;
            cost_map_grow(cache);
        }
        return ce->cost_s;
    case GS_EV_COLLECTIVE:
        ce = cost_map_find(cache, (uint64_t)vi << 16 | (uint64_t)e->group << 8 | e->op, e->bytes,
                           e->group_size | (uint64_t)(e->role == GS_ROLE_CP_KV && e->part == GS_PART_RING) << 62 |
                               1ULL << 63 | (uint64_t)(e->net_share > 0.0f) << 61);
        if (!ce->used) {
            gs_coll_cost cost;
            gs_coll_shape shape = des_coll_shape(v->shape[e->group], e);
            ce->cost_s = gs_coll_estimate(topo, (gs_coll_op)e->op, &shape, e->bytes, GS_ALGO_COUNT, &cost) == GS_OK
                             ? cost.time_s
                             : 0.0;
            ce->used = 1;
            cost_map_grow(cache);
        }
        return ce->cost_s;
    case GS_EV_SEND:
    case GS_EV_RECV:
        return gs_p2p_time(topo, same, e->bytes);
    case GS_EV_COPY_H2D:
    case GS_EV_COPY_D2H:
        return 2e-6 + (double)e->bytes / st->host_link_bw;
    default:
        return 0.0;
    }
}

/* ---- templates --------------------------------------------------------------------------- */

/* The slot of event e in t (appended when new); DES_NO_SLOT when e has none. */
static int event_slot(des_tmpl *t, const gs_event *e, uint32_t k, uint16_t *slot)
{
    *slot = DES_NO_SLOT;
    if (e->kind != GS_EV_COLLECTIVE && e->kind != GS_EV_SEND && e->kind != GS_EV_RECV)
        return 0;
    for (size_t j = 0; j < t->nslots; j++)
        if (t->slots[j].kind == e->kind && t->slots[j].peer == e->peer &&
            (e->kind != GS_EV_COLLECTIVE || t->slots[j].group == e->group)) {
            *slot = (uint16_t)j;
            return 0;
        }
    if (t->nslots >= DES_NO_SLOT)
        return -1;
    des_slot *v = realloc(t->slots, (t->nslots + 1) * sizeof *v);
    if (!v)
        return -1;
    t->slots = v;
    t->slots[t->nslots] = (des_slot){e->kind, e->group, 0, e->peer, k};
    *slot = (uint16_t)t->nslots++;
    return 0;
}

/* Fills t's per-event arrays from its list: stream order, dependencies as (stream, position)
 * pairs, the streams of each event's dependents, kinds, slots and sequence numbers. */
static int tmpl_prepare(des_tmpl *t)
{
    const gs_rank_events *r = t->list;
    size_t n = r->nevents ? r->nevents : 1, ndep = 0;
    for (size_t k = 0; k < r->nevents; k++)
        ndep += r->events[k].nlinks[GS_LINK_DEPS];
    t->stream_ev = malloc(n * sizeof *t->stream_ev);
    t->dep_off = calloc(r->nevents + 1, sizeof *t->dep_off);
    t->dep_on = malloc((ndep ? ndep : 1) * sizeof *t->dep_on);
    t->dep_streams = calloc(n, 1);
    t->kind = malloc(n);
    t->tensor = malloc(n);
    t->stream = malloc(n);
    t->slot = malloc(n * sizeof *t->slot);
    t->seq = malloc(n * sizeof *t->seq);
    uint32_t *spos = malloc(n * sizeof *spos); /* position of each event in its stream */
    if (!t->stream_ev || !t->dep_off || !t->dep_on || !t->dep_streams || !t->kind || !t->tensor || !t->stream || !t->slot ||
        !t->seq || !spos || r->nevents >= (size_t)1 << DEP_POS_BITS) {
        free(spos);
        return -1;
    }
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        spos[k] = (uint32_t)t->stream_off[e->stream + 1]++;
        t->kind[k] = e->kind;
        t->tensor[k] = (uint8_t)gs_compute_event_tensor_bound(e);
        t->stream[k] = e->stream;
        t->collectives += e->kind == GS_EV_COLLECTIVE;
        if (event_slot(t, e, (uint32_t)k, &t->slot[k]) != 0) {
            free(spos);
            return -1;
        }
        t->seq[k] = t->slot[k] != DES_NO_SLOT ? t->slots[t->slot[k]].count++ : 0;
    }
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        t->stream_off[s + 1] += t->stream_off[s];
    for (size_t k = 0; k < r->nevents; k++)
        t->stream_ev[t->stream_off[r->events[k].stream] + spos[k]] = (uint32_t)k;
    size_t at = 0;
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++) {
            t->dep_on[at++] = (uint32_t)r->events[d[j]].stream << DEP_POS_BITS | spos[d[j]];
            t->dep_streams[d[j]] |= (uint8_t)(1u << e->stream);
        }
        t->dep_off[k + 1] = (uint32_t)at;
    }
    free(spos);
    return 0;
}

static void tmpl_fini(des_tmpl *t)
{
    free(t->stream_ev);
    free(t->dep_off);
    free(t->dep_on);
    free(t->dep_streams);
    free(t->kind);
    free(t->tensor);
    free(t->stream);
    free(t->slot);
    free(t->seq);
    free(t->slots);
    free(t->host_s);
    for (size_t v = 0; v < t->nvariants; v++)
        free(t->variants[v].base_s);
    free(t->variants);
}

/* Rank list ri's variant: an existing one of its template with the same group shapes and
 * same-node peers, else a new one whose durations are computed now (cache: the cost cache,
 * keyed by the variant's global number *nvar for collectives). */
static int rank_variant(run_ctx *c, size_t ri, cost_map *cache, size_t *nvar)
{
    rank_rt *rt = &c->rt[ri];
    des_tmpl *t = &c->tmpl[rt->tmpl];
    des_variant key;
    memset(&key, 0, sizeof key);
    uint64_t rank = c->sch->ranks[ri].rank;
    for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
        gs_topo_group_shape(&c->st->mesh, (gs_group_kind)g, rank, &key.shape[g]);
    if (c->st->flow) /* flow mode shares the NICs among the flows themselves */
        for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
            key.shape[g].siblings = 1;
    for (size_t j = 0; j < t->nslots && j < 64; j++)
        if (t->slots[j].kind != GS_EV_COLLECTIVE &&
            gs_mesh_rank_node(&c->st->mesh, c->rslots[rt->rslot + j].peer) == rt->node)
            key.same_node |= 1ULL << j;
    for (size_t v = 0; v < t->nvariants; v++)
        if (memcmp(t->variants[v].shape, key.shape, sizeof key.shape) == 0 &&
            t->variants[v].same_node == key.same_node) {
            rt->variant = (uint32_t)v;
            return 0;
        }
    if (t->nvariants == t->cap_variants) {
        size_t cap = t->cap_variants ? 2 * t->cap_variants : 2;
        des_variant *nv = realloc(t->variants, cap * sizeof *nv);
        if (!nv)
            return -1;
        t->variants = nv;
        t->cap_variants = cap;
    }
    const gs_rank_events *r = t->list;
    if (!(key.base_s = malloc((r->nevents ? r->nevents : 1) * sizeof *key.base_s)))
        return -1;
    size_t vi = (*nvar)++;
    const gs_strategy *st = &c->st->s.strategy;
    int ep_overlap = !st->ep_overlap ? GS_EP_OVERLAP_NONE
                     : st->moe_dispatcher == GS_MOE_FLEX ? GS_EP_OVERLAP_FLEX : GS_EP_OVERLAP_A2A;
    gs_contention_streams(&c->st->cm, c->st->flow ? &c->st->flow_topo : &c->st->topo, st->tp_comm_overlap,
                          ep_overlap, st->flex_sms, key.shape, key.overlap, key.overlap_mem, key.overlap_wait);
    for (size_t k = 0; k < r->nevents; k++) {
        uint16_t s = t->slot[k];
        int same = s != DES_NO_SLOT && s < 64 ? (int)(key.same_node >> s & 1) : 0;
        if (s != DES_NO_SLOT && s >= 64) /* beyond the bit mask: ask the mesh */
            same = gs_mesh_rank_node(&c->st->mesh, c->rslots[rt->rslot + s].peer) == rt->node;
        key.base_s[k] = event_base_s(c->st, cache, &key, vi, &r->events[k], same);
    }
    rt->variant = (uint32_t)t->nvariants;
    t->variants[t->nvariants++] = key;
    return 0;
}

/* ---- rank lists, templates, resolved slots ----------------------------------------------- */

/* Assigns templates (in order of their first rank list), bases and the per-rank fields, and
 * resolves each list's slots to its own groups and peers. */
static gs_status setup_ranks(run_ctx *c, gs_error *err)
{
    const gs_schedule *sch = c->sch;
    const gs_mesh *mesh = &c->st->mesh;
    uint32_t *tmpl_of = malloc((sch->nranks ? sch->nranks : 1) * sizeof *tmpl_of);
    c->tmpl = calloc(sch->nranks ? sch->nranks : 1, sizeof *c->tmpl);
    if (posix_memalign((void **)&c->rt, 64, (sch->nranks ? sch->nranks : 1) * sizeof *c->rt) != 0)
        c->rt = NULL; /* cache-line aligned: a rank's hot fields in one line */
    if (!tmpl_of || !c->tmpl || !c->rt)
        goto nomem;
    memset(c->rt, 0, (sch->nranks ? sch->nranks : 1) * sizeof *c->rt);
    for (size_t i = 0; i < sch->nranks; i++)
        tmpl_of[i] = UINT32_MAX;
    size_t nslots = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        const gs_rank_events *owner = r->shared ? r->shared : r;
        size_t oi = (size_t)(owner - sch->ranks);
        if (r->rank >= mesh->world) {
            free(tmpl_of);
            return gs_error_set(err, GS_ERR_INPUT, "sim: rank list %zu is rank %" PRIu64 ", beyond the mesh's %" PRIu64,
                                i, r->rank, mesh->world);
        }
        if (tmpl_of[oi] == UINT32_MAX) {
            des_tmpl *t = &c->tmpl[c->ntmpl];
            t->list = owner;
            if (tmpl_prepare(t) != 0) {
                c->ntmpl++;
                goto nomem;
            }
            tmpl_of[oi] = (uint32_t)c->ntmpl++;
        }
        rank_rt *rt = &c->rt[i];
        rt->tmpl = tmpl_of[oi];
        rt->base = c->total;
        rt->ready = (1u << GS_STREAM_COUNT) - 1;
        rt->rslot = nslots;
        rt->node = gs_mesh_rank_node(mesh, r->rank);
        rt->slowdown = gs_scenario_slowdown(&c->st->s, mesh, r->rank);
        for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
            rt->group[g] = gs_group_of(mesh, (gs_group_kind)g, r->rank, NULL);
        c->total += r->nevents;
        nslots += c->tmpl[rt->tmpl].nslots;
    }
    free(tmpl_of);
    tmpl_of = NULL;
    if (!(c->rslots = calloc(nslots ? nslots : 1, sizeof *c->rslots)))
        goto nomem;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t j = 0; j < t->nslots; j++) {
            des_rslot *rs = &c->rslots[c->rt[i].rslot + j];
            const des_slot *sl = &t->slots[j];
            rs->peer = gs_event_peer(mesh, r, &t->list->events[sl->first_event]);
            rs->lim = UINT32_MAX;
            if (sl->kind == GS_EV_COLLECTIVE && (sl->group >= GS_GROUP_KIND_COUNT || rs->peer >= mesh->world))
                return gs_error_set(err, GS_ERR_INPUT,
                                    "sim: rank %" PRIu64 "'s collectives name group %" PRIu64 " of kind %u, beyond "
                                    "the mesh's %" PRIu64 " ranks", r->rank, rs->peer, (unsigned)sl->group,
                                    mesh->world);
        }
    }
    return GS_OK;
nomem:
    free(tmpl_of);
    return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
}

/* Collective instances: group (g, i) has as many as the most collectives a member present
 * issues on it; each needs every member present (at least 1, as a group nobody else holds). */
static int setup_instances(run_ctx *c)
{
    const gs_schedule *sch = c->sch;
    uint64_t world = c->st->mesh.world;
    int rc = -1;
    uint64_t *present = calloc(GS_GROUP_KIND_COUNT * world, sizeof *present);
    uint64_t *first = calloc(GS_GROUP_KIND_COUNT * world, sizeof *first); /* count, then first instance */
    if (!present || !first)
        goto out;
    for (size_t i = 0; i < sch->nranks; i++)
        for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
            present[g * world + c->rt[i].group[g]]++;
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t j = 0; j < t->nslots; j++)
            if (t->slots[j].kind == GS_EV_COLLECTIVE) {
                uint64_t *n = &first[t->slots[j].group * world + c->rslots[c->rt[i].rslot + j].peer];
                if (t->slots[j].count > *n)
                    *n = t->slots[j].count;
            }
    }
    uint64_t ninst = 0, nmembers = 0;
    for (uint64_t gi = 0; gi < GS_GROUP_KIND_COUNT * world; gi++) {
        uint64_t n = first[gi];
        first[gi] = ninst;
        ninst += n;
        nmembers += n * (present[gi] ? present[gi] : 1);
    }
    c->ninst = ninst;
    c->inst_off = malloc((ninst + 1) * sizeof *c->inst_off);
    c->inst_member = des_big_calloc(nmembers ? nmembers : 1, sizeof *c->inst_member);
    c->inst_arrived = calloc(ninst ? ninst : 1, sizeof *c->inst_arrived);
    c->inst_ready = calloc(ninst ? ninst : 1, sizeof *c->inst_ready);
    if (!c->inst_off || !c->inst_member || !c->inst_arrived || !c->inst_ready)
        goto out;
    uint64_t at = 0, in = 0;
    for (uint64_t gi = 0; gi < GS_GROUP_KIND_COUNT * world; gi++) {
        uint64_t end = gi + 1 < GS_GROUP_KIND_COUNT * world ? first[gi + 1] : ninst;
        for (; in < end; in++) {
            c->inst_off[in] = at;
            at += present[gi] ? present[gi] : 1;
        }
    }
    c->inst_off[ninst] = at;
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t j = 0; j < t->nslots; j++) {
            des_rslot *rs = &c->rslots[c->rt[i].rslot + j];
            if (t->slots[j].kind == GS_EV_COLLECTIVE)
                rs->first = first[t->slots[j].group * world + rs->peer];
        }
    }
    rc = 0;
out:
    free(present);
    free(first);
    return rc;
}

/* Send/recv pairs: each send slot owns a block; a recv slot points into its sender's block for
 * as many receives as the sender sends, beyond that (or with no sender in the schedule) into a
 * block of its own. Then every pair learns its two events. */
static int setup_pairs(run_ctx *c)
{
    const gs_schedule *sch = c->sch;
    uint64_t world = c->st->mesh.world;
    size_t *list_of = malloc(world * sizeof *list_of); /* rank -> its first rank list */
    if (!list_of)
        return -1;
    for (uint64_t r = 0; r < world; r++)
        list_of[r] = SIZE_MAX;
    for (size_t i = sch->nranks; i-- > 0;)
        list_of[sch->ranks[i].rank] = i;
    uint64_t np = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t j = 0; j < t->nslots; j++)
            if (t->slots[j].kind == GS_EV_SEND) {
                c->rslots[c->rt[i].rslot + j].first = np;
                np += t->slots[j].count;
            }
    }
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t j = 0; j < t->nslots; j++) {
            if (t->slots[j].kind != GS_EV_RECV)
                continue;
            des_rslot *rs = &c->rslots[c->rt[i].rslot + j];
            size_t a = rs->peer < world ? list_of[rs->peer] : SIZE_MAX;
            rs->lim = 0;
            if (a != SIZE_MAX) {
                const des_tmpl *ta = &c->tmpl[c->rt[a].tmpl];
                for (size_t q = 0; q < ta->nslots; q++) {
                    const des_rslot *sa = &c->rslots[c->rt[a].rslot + q];
                    if (ta->slots[q].kind == GS_EV_SEND && sa->peer == sch->ranks[i].rank) {
                        rs->first = sa->first;
                        rs->lim = ta->slots[q].count;
                        break;
                    }
                }
            }
            rs->own = np;
            if (t->slots[j].count > rs->lim)
                np += t->slots[j].count - rs->lim;
        }
    }
    free(list_of);
    c->npairs = np;
    c->pair = malloc((np ? 2 * np : 2) * sizeof *c->pair);
    c->pair_end = malloc((np ? np : 1) * sizeof *c->pair_end);
    c->pair_posted = calloc(np ? np : 1, 1);
    if (!c->pair || !c->pair_end || !c->pair_posted)
        return -1;
    for (uint64_t p = 0; p < np; p++) {
        c->pair[2 * p] = c->pair[2 * p + 1] = DES_NONE;
        c->pair_end[p] = NAN;
    }
    for (size_t i = 0; i < sch->nranks; i++) {
        const des_tmpl *t = &c->tmpl[c->rt[i].tmpl];
        for (size_t k = 0; k < t->list->nevents; k++)
            if (t->kind[k] == GS_EV_SEND || t->kind[k] == GS_EV_RECV)
                c->pair[2 * des_match(c, i, (uint32_t)k) + (t->kind[k] == GS_EV_RECV)] = EV_ID(i, k);
    }
    return 0;
}

uint64_t des_match(const run_ctx *c, size_t ri, uint32_t k)
{
    const des_tmpl *t = &c->tmpl[c->rt[ri].tmpl];
    const des_rslot *rs = &c->rslots[c->rt[ri].rslot + t->slot[k]];
    uint32_t seq = t->seq[k];
    return seq < rs->lim ? rs->first + seq : rs->own + (seq - rs->lim);
}

uint64_t des_peer(const run_ctx *c, size_t ri, uint32_t k)
{
    const des_tmpl *t = &c->tmpl[c->rt[ri].tmpl];
    return t->slot[k] == DES_NO_SLOT ? t->list->events[k].peer : c->rslots[c->rt[ri].rslot + t->slot[k]].peer;
}

/* Per-event arrays: the shared cores' state when the host driver's cores are modeled. */
static int setup_events(run_ctx *c)
{
    uint64_t n = c->total ? c->total : 1;
    const gs_compute_model *cm = &c->st->cm;
    if (cm->cores <= 0)
        return 0;
    c->ps_left = calloc(n, sizeof *c->ps_left);
    c->ps_ver = calloc(n, sizeof *c->ps_ver);
    c->ps_delay = calloc(n, sizeof *c->ps_delay);
    c->ps_active = calloc(c->sch->nranks ? c->sch->nranks : 1, sizeof *c->ps_active);
    if (!c->ps_left || !c->ps_ver || !c->ps_active || !c->ps_delay)
        return -1;
    if ((cm->coll_cpu_share > 0 || cm->launch_cpu_s > 0 || cm->wake_cpu_s > 0) &&
        !(c->ps_coll = calloc(n, sizeof *c->ps_coll)))
        return -1;
    if (c->ps_coll && c->st->flow && !(c->ps_coll_left = calloc(n, sizeof *c->ps_coll_left)))
        return -1;
    return 0;
}

/* The host thread's issue time of every template event (sim/compute.h host_kernel_s): the
 * prefix sum of the host costs in list order, the order the framework's one Python thread per
 * rank issues its kernels and collectives; host and GPU start the step together (the previous
 * step ends in a synchronisation: the loss read for logging, the gradient norm's check). Not on
 * the host driver's shared cores, whose measured dispatch holds it. */
static int setup_host(run_ctx *c)
{
    const gs_compute_model *cm = &c->st->cm;
    if (!(cm->host_kernel_s > 0.0) || cm->cores > 0.0)
        return 0;
    for (size_t i = 0; i < c->ntmpl; i++) {
        des_tmpl *t = &c->tmpl[i];
        const gs_rank_events *r = t->list;
        if (!(t->host_s = malloc((r->nevents ? r->nevents : 1) * sizeof *t->host_s)))
            return -1;
        double at = 0.0;
        uint64_t graph = 0; /* the CUDA graph the host launched last (0: none) */
        for (size_t k = 0; k < r->nevents; k++) {
            uint64_t g = gs_compute_graph_key(cm, &r->events[k]);
            if (!g)
                at += gs_compute_host_time(cm, &r->events[k]);
            else if (g != graph) /* a graph's events cost its launch, once */
                at += cm->host_kernel_s;
            if (g)
                graph = g;
            t->host_s[k] = at;
        }
        t->host_end_s = at;
    }
    return 0;
}

gs_status des_ctx_init(run_ctx *c, const sim_state *st, const gs_schedule *sch, gs_timing *const *timing,
                       gs_error *err)
{
    memset(c, 0, sizeof *c);
    c->st = st;
    c->sch = sch;
    c->timing = timing;
    if (sch->nranks >= HOST_ENTRY) /* heap entries carry a rank list index in 31 bits */
        return gs_error_set(err, GS_ERR_INPUT, "sim: %zu rank lists is more than the event heap indexes", sch->nranks);
    for (size_t i = 0; i < sch->nranks; i++)
        if (sch->ranks[i].nevents > UINT32_MAX - 1)
            return gs_error_set(err, GS_ERR_INPUT, "sim: rank %" PRIu64 " has more events than an index holds",
                                sch->ranks[i].rank);
    gs_status rc = setup_ranks(c, err);
    if (rc != GS_OK)
        return rc;
    if (setup_instances(c) != 0 || setup_pairs(c) != 0 || setup_events(c) != 0 || setup_host(c) != 0)
        return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
    cost_map cache;
    if (cost_map_init(&cache, 1024) != 0)
        return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
    size_t nvar = 0;
    for (size_t i = 0; i < sch->nranks; i++)
        if (rank_variant(c, i, &cache, &nvar) != 0) {
            free(cache.v);
            return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
        }
    free(cache.v);
    if (st->flow && gs_flow_model_create(&st->flow_topo, st->s.cluster.nodes > gs_mesh_nodes(&st->mesh)
                                                             ? st->s.cluster.nodes : gs_mesh_nodes(&st->mesh),
                                         &c->fm) != GS_OK)
        return gs_error_set(err, GS_ERR_NOMEM, "sim: out of memory");
    return GS_OK;
}

uint64_t des_state_bytes(const run_ctx *c)
{
    uint64_t b = c->ntmpl * sizeof *c->tmpl + c->sch->nranks * sizeof *c->rt;
    for (size_t i = 0; i < c->ntmpl; i++) {
        const des_tmpl *t = &c->tmpl[i];
        uint64_t n = t->list->nevents;
        b += n * (sizeof *t->stream_ev + sizeof *t->dep_off + 3 + sizeof *t->slot + sizeof *t->seq) +
             (uint64_t)t->dep_off[n] * sizeof *t->dep_on + t->nslots * sizeof *t->slots +
             t->nvariants * (sizeof *t->variants + n * sizeof(double)) + (t->host_s ? n * sizeof(double) : 0);
    }
    for (size_t i = 0; i < c->sch->nranks; i++)
        b += c->tmpl[c->rt[i].tmpl].nslots * sizeof *c->rslots;
    b += (c->ninst + 1) * sizeof *c->inst_off + c->inst_off[c->ninst] * sizeof *c->inst_member +
         c->ninst * (sizeof *c->inst_arrived + sizeof *c->inst_ready);
    b += c->npairs * (2 * sizeof *c->pair + sizeof *c->pair_end + 1);
    b += c->fr_cap * sizeof *c->fr + c->members_cap * sizeof *c->members;
    if (c->ps_left) /* shared cores: left, delay, version, and the collectives' loads */
        b += c->total * (2 * sizeof(double) + sizeof(uint32_t) + (c->ps_coll ? 8 : 0) + (c->ps_coll_left ? 8 : 0));
    return b;
}

void des_ctx_fini(run_ctx *c)
{
    for (size_t t = 0; t < c->ntmpl; t++)
        tmpl_fini(&c->tmpl[t]);
    free(c->tmpl);
    free(c->rt);
    free(c->rslots);
    free(c->inst_off);
    free(c->inst_member);
    free(c->inst_arrived);
    free(c->inst_ready);
    free(c->pair);
    free(c->pair_end);
    free(c->pair_posted);
    gs_queue_fini(&c->h);
    gs_flow_model_destroy(c->fm);
    free(c->fr);
    free(c->members);
    free(c->ps_left);
    free(c->ps_ver);
    free(c->ps_delay);
    free(c->ps_active);
    free(c->ps_coll);
    free(c->ps_coll_left);
}
