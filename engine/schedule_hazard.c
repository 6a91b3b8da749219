/* Stream hazards of one rank's list: every scratch tensor (a buffer events of two streams share)
 * that events of two streams touch, one of them writing (writes, allocations and frees count as
 * writes), is touched in an order that the dependencies and the streams' list order fix.
 * Otherwise a backend that plays exactly the schedule could run the two at once: a read racing a
 * write of the same buffer. (Only scratch tensors: the parameter and gradient tensors' lifetimes
 * are the memory model's, whose order the builders do not state for every stream pair.)
 *
 * Happens-before comes from vector clocks over the streams: walking the events in a topological
 * order of (dependencies + each stream's list order), an event's clock holds, per stream, how
 * many of that stream's events happen before it or are it. Per tensor the walk keeps the last
 * write and the last read on each stream (the earlier ones on that stream happen before those),
 * so a write is checked against the last write and read of every other stream and a read against
 * the last write of every other stream: O(events x streams + links x streams). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule_internal.h"

#define NONE UINT32_MAX

typedef struct hz {
    const gs_rank_events *r;
    uint32_t *clock; /* [event][stream]: events of that stream at or before it */
    uint32_t *spos;  /* the event's place in its stream */
    uint32_t *last;  /* [tensor][stream][read 0 / write 1]: event id or NONE */
} hz;

static unsigned stream_of(const gs_event *e)
{
    return e->stream < GS_STREAM_COUNT ? e->stream : GS_STREAM_COMPUTE;
}

/* 1 when event a happens before event b (a != b) */
static int before(const hz *h, uint32_t a, uint32_t b)
{
    unsigned s = stream_of(&h->r->events[a]);
    return h->clock[(size_t)b * GS_STREAM_COUNT + s] > h->spos[a];
}

/* The order to walk: Kahn's algorithm over deps and stream order (0 with *n < nevents on a cycle,
 * which gs_schedule_validate_structure reports before calling here). */
static int topo_order(const gs_rank_events *r, uint32_t *order, size_t *n)
{
    size_t ne = r->nevents;
    uint32_t *indeg = calloc(ne ? ne : 1, sizeof *indeg), *nsucc = calloc(ne + 1, sizeof *nsucc);
    uint32_t *succ = NULL, prev[GS_STREAM_COUNT];
    int ok = indeg && nsucc;
    size_t nedges = 0;
    for (size_t i = 0; ok && i < ne; i++)
        nedges += r->events[i].nlinks[GS_LINK_DEPS] + 1u;
    ok = ok && (succ = malloc((nedges ? nedges : 1) * sizeof *succ)) != NULL;
    if (!ok)
        goto out;
    /* successor lists (CSR): a dependency d of i, and i's predecessor on its stream */
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        prev[s] = NONE;
    for (size_t i = 0; i < ne; i++) {
        const gs_event *e = &r->events[i];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            nsucc[d[j] + 1]++, indeg[i]++;
        unsigned s = stream_of(e);
        if (prev[s] != NONE)
            nsucc[prev[s] + 1]++, indeg[i]++;
        prev[s] = (uint32_t)i;
    }
    for (size_t i = 0; i < ne; i++)
        nsucc[i + 1] += nsucc[i];
    uint32_t *fill = malloc((ne ? ne : 1) * sizeof *fill);
    if (!(ok = fill != NULL))
        goto out;
    memcpy(fill, nsucc, ne * sizeof *fill);
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        prev[s] = NONE;
    for (size_t i = 0; i < ne; i++) {
        const gs_event *e = &r->events[i];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            succ[fill[d[j]]++] = (uint32_t)i;
        unsigned s = stream_of(e);
        if (prev[s] != NONE)
            succ[fill[prev[s]]++] = (uint32_t)i;
        prev[s] = (uint32_t)i;
    }
    free(fill);
    /* the ready events in ascending id (a queue in order: list order where deps allow) */
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < ne; i++)
        if (indeg[i] == 0)
            order[tail++] = (uint32_t)i;
    while (head < tail) {
        uint32_t i = order[head++];
        for (uint32_t k = nsucc[i]; k < nsucc[i + 1]; k++)
            if (--indeg[succ[k]] == 0)
                order[tail++] = succ[k];
    }
    *n = tail;
out:
    free(indeg);
    free(nsucc);
    free(succ);
    return ok;
}

/* Checks access (event i, tensor t, write or not) against the last accesses of the other
 * streams; on a race writes the other event's id to *other. */
static int access_ok(const hz *h, uint32_t i, uint32_t t, int write, uint32_t *other)
{
    unsigned s = stream_of(&h->r->events[i]);
    const uint32_t *l = &h->last[(size_t)t * GS_STREAM_COUNT * 2];
    for (unsigned q = 0; q < GS_STREAM_COUNT; q++) {
        if (q == s)
            continue;
        uint32_t w = l[q * 2 + 1], rd = l[q * 2];
        if (w != NONE && w != i && !before(h, w, i)) {
            *other = w;
            return 0;
        }
        if (write && rd != NONE && rd != i && !before(h, rd, i)) {
            *other = rd;
            return 0;
        }
    }
    return 1;
}

gs_status gs__schedule_check_hazards(const gs_rank_events *r, gs_error *err)
{
    size_t ne = r->nevents, n = 0, nscratch = 0;
    for (size_t t = 0; t < r->ntensors; t++)
        nscratch += r->tensors[t].kind == GS_T_SCRATCH;
    if (nscratch == 0)
        return GS_OK;
    hz h = {r, NULL, NULL, NULL};
    uint32_t *order = malloc((ne ? ne : 1) * sizeof *order);
    gs_status st = GS_OK;
    h.clock = calloc((ne ? ne : 1) * GS_STREAM_COUNT, sizeof *h.clock);
    h.spos = malloc((ne ? ne : 1) * sizeof *h.spos);
    h.last = malloc((r->ntensors ? r->ntensors : 1) * GS_STREAM_COUNT * 2 * sizeof *h.last);
    if (!order || !h.clock || !h.spos || !h.last || !topo_order(r, order, &n)) {
        st = gs_error_set(err, GS_ERR_NOMEM, "out of memory checking rank %" PRIu64 "'s stream hazards", r->rank);
        goto out;
    }
    if (n < ne) /* dependencies against stream order (a wait cycle): no order to check */
        goto out;
    memset(h.last, 0xff, r->ntensors * GS_STREAM_COUNT * 2 * sizeof *h.last);
    uint32_t cnt[GS_STREAM_COUNT] = {0}, prev[GS_STREAM_COUNT];
    for (size_t i = 0; i < ne; i++)
        h.spos[i] = cnt[stream_of(&r->events[i])]++;
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        prev[s] = NONE;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        const gs_event *e = &r->events[i];
        uint32_t *c = &h.clock[(size_t)i * GS_STREAM_COUNT];
        const uint32_t *d = gs_event_list(r, e, GS_LINK_DEPS);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            for (int s = 0; s < GS_STREAM_COUNT; s++)
                if (h.clock[(size_t)d[j] * GS_STREAM_COUNT + s] > c[s])
                    c[s] = h.clock[(size_t)d[j] * GS_STREAM_COUNT + s];
        /* and the stream predecessor's (walked before i: the order keeps each stream's) */
        unsigned s0 = stream_of(e);
        if (prev[s0] != NONE)
            for (int s = 0; s < GS_STREAM_COUNT; s++)
                if (h.clock[(size_t)prev[s0] * GS_STREAM_COUNT + s] > c[s])
                    c[s] = h.clock[(size_t)prev[s0] * GS_STREAM_COUNT + s];
        prev[s0] = i;
        c[s0] = h.spos[i] + 1;
        for (int w = GS_LINK_READS; w < GS_LINK_LISTS; w++) {
            const uint32_t *l = gs_event_list(r, e, w);
            int write = w != GS_LINK_READS;
            for (uint16_t j = 0; j < e->nlinks[w]; j++) {
                uint32_t other;
                if (r->tensors[l[j]].kind != GS_T_SCRATCH)
                    continue;
                if (!access_ok(&h, i, l[j], write, &other)) {
                    char a[GS_EVENT_NAME_BYTES], b[GS_EVENT_NAME_BYTES];
                    gs_event_name(r, &r->events[other], a, sizeof a);
                    gs_event_name(r, e, b, sizeof b);
                    st = gs_error_set(err, GS_ERR_RUNTIME,
                                      "rank %" PRIu64 ": events %s (%s stream) and %s (%s stream) both touch tensor "
                                      "%" PRIu32 " (%s), one writing, and no dependency orders them",
                                      r->rank, a, gs_stream_name((gs_stream)stream_of(&r->events[other])), b,
                                      gs_stream_name((gs_stream)s0), l[j],
                                      gs_tensor_kind_name((gs_tensor_kind)r->tensors[l[j]].kind));
                    goto out;
                }
                h.last[((size_t)l[j] * GS_STREAM_COUNT + s0) * 2 + (unsigned)write] = i;
            }
        }
    }
out:
    free(order);
    free(h.clock);
    free(h.spos);
    free(h.last);
    return st;
}
