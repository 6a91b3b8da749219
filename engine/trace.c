/* The Chrome trace (JSON Object Format, as Perfetto and chrome://tracing read it) of a schedule and
 * its timings: a process per rank list, a thread per stream, a complete ("X") slice per event,
 * a memory counter, and flow arrows from each collective's first member to the others and from
 * each send to its receive.
 *
 * Times are whole nanoseconds: every time is rounded once, to the nanosecond, and a slice's
 * "dur" is its rounded end minus its rounded start, both printed as exact decimals of
 * microseconds ("12.345" = 12345 ns). A slice that ends where the next one on its stream begins
 * then ends exactly there in the file, as a reader that turns microseconds back into nanoseconds
 * sees it (Perfetto: llround(us x 1000)); printing ts and dur each rounded to %.3f let neighbours
 * overlap by a nanosecond, and Perfetto drops a complete event that overlaps its neighbour. */
#include "engine/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Seconds -> whole nanoseconds (rounded to nearest; times are never negative). */
static int64_t ns_of(double s)
{
    return (int64_t)llround(s * 1e9);
}

/* Prints ns as microseconds with exactly three decimals: 12345 -> "12.345", -5 -> "-0.005". */
static void put_us(FILE *f, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
}

/* A JSON string (RFC 8259 section 7): quote, backslash and the control characters escaped; other
 * bytes (UTF-8 included) pass through. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7F)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* ------------------------------------------------------------------------- flows ---- */

/* One end of a flow: a collective's member or a send / receive, keyed so that the members of one
 * collective (group kind, group index, its n-th call on that group) or one send and its receive
 * (sender, receiver, n-th message between them) sort next to each other. */
typedef struct flow_point {
    uint64_t key[3];
    uint8_t p2p;   /* 0 collective, 1 send/recv */
    uint8_t role;  /* p2p: 0 send, 1 recv */
    int64_t start_ns;
    size_t rank;   /* index into sch->ranks */
    size_t event;
} flow_point;

static int flow_cmp(const void *x, const void *y)
{
    const flow_point *a = x, *b = y;
    if (a->p2p != b->p2p)
        return a->p2p - b->p2p;
    for (int i = 0; i < 3; i++)
        if (a->key[i] != b->key[i])
            return a->key[i] < b->key[i] ? -1 : 1;
    if (a->role != b->role)
        return a->role - b->role;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Messages counted so far from one rank to one peer (sends) or from one peer (recvs). */
typedef struct peer_count {
    uint64_t peer;
    uint64_t sends, recvs;
} peer_count;

/* The n-th message with peer (0-based) and the count bumped; GS_ERR_NOMEM. */
static gs_status next_msg(peer_count **pc, size_t *n, size_t *cap, uint64_t peer, int recv, uint64_t *seq)
{
    size_t i = 0;
    while (i < *n && (*pc)[i].peer != peer)
        i++;
    if (i == *n) {
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            peer_count *g = realloc(*pc, nc * sizeof *g);
            if (!g)
                return GS_ERR_NOMEM;
            *pc = g, *cap = nc;
        }
        (*pc)[(*n)++] = (peer_count){peer, 0, 0};
    }
    *seq = recv ? (*pc)[i].recvs++ : (*pc)[i].sends++;
    return GS_OK;
}

/* Collects the flow points of every rank list in *out (caller frees), sorted. */
static gs_status collect_flows(const gs_schedule *sch, gs_timing *const *timing, flow_point **out, size_t *count)
{
    size_t n = 0, cap = 0, npc = 0, cappc = 0;
    flow_point *v = NULL;
    peer_count *pc = NULL;
    gs_status st = GS_OK;
    for (size_t i = 0; i < sch->nranks && st == GS_OK; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        uint64_t coll_seq[GS_GROUP_KIND_COUNT] = {0};
        npc = 0;
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            flow_point p = {{0, 0, 0}, 0, 0, ns_of(timing[i][k].start_s), i, k};
            int coll = e->kind == GS_EV_COLLECTIVE && e->group < GS_GROUP_KIND_COUNT;
            if (!coll && e->kind != GS_EV_SEND && e->kind != GS_EV_RECV)
                continue;
            uint64_t peer = gs_event_peer(&sch->mesh, r, e); /* this rank's, also on a shared list */
            if (coll) {
                p.key[0] = e->group, p.key[1] = peer, p.key[2] = coll_seq[e->group]++;
            } else {
                int recv = e->kind == GS_EV_RECV;
                uint64_t seq;
                if ((st = next_msg(&pc, &npc, &cappc, peer, recv, &seq)) != GS_OK)
                    break;
                p.p2p = 1, p.role = (uint8_t)recv;
                p.key[0] = recv ? peer : r->rank, p.key[1] = recv ? r->rank : peer, p.key[2] = seq;
            }
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                flow_point *g = realloc(v, nc * sizeof *g);
                if (!g) {
                    st = GS_ERR_NOMEM;
                    break;
                }
                v = g, cap = nc;
            }
            v[n++] = p;
        }
    }
    free(pc);
    if (st != GS_OK) {
        free(v);
        return st;
    }
    if (n > 1)
        qsort(v, n, sizeof *v, flow_cmp);
    *out = v;
    *count = n;
    return GS_OK;
}

static int same_flow(const flow_point *a, const flow_point *b)
{
    return a->p2p == b->p2p && a->key[0] == b->key[0] && a->key[1] == b->key[1] && a->key[2] == b->key[2];
}

/* One flow event: phase s (first), t (step) or f (last), bound to the slice that encloses its
 * time ("bp": "e"), at the middle of that slice so that a neighbour touching it at either end is
 * not taken for it. */
static void put_flow_point(FILE *f, const gs_schedule *sch, gs_timing *const *timing, const flow_point *p, char ph,
                           uint64_t id, const char *name)
{
    const gs_rank_events *r = &sch->ranks[p->rank];
    const gs_timing *t = &timing[p->rank][p->event];
    int64_t a = ns_of(t->start_s), b = ns_of(t->end_s);
    if (b < a)
        b = a;
    fprintf(f, ",\n{\"ph\": \"%c\", \"id\": %" PRIu64 ", \"cat\": \"%s\", \"name\": ", ph, id,
            p->p2p ? "p2p" : "collective");
    json_str(f, name);
    fprintf(f, ", \"pid\": %" PRIu64 ", \"tid\": %d, \"ts\": ", r->rank, r->events[p->event].stream);
    put_us(f, a + (b - a) / 2);
    fputs(", \"bp\": \"e\"}", f);
}

/* The flows: one chain per collective call over its members present in the trace (earliest
 * start first), one arrow per send to its receive. */
static gs_status put_flows(FILE *f, const gs_schedule *sch, gs_timing *const *timing)
{
    flow_point *v = NULL;
    size_t n = 0;
    gs_status st = collect_flows(sch, timing, &v, &n);
    if (st != GS_OK)
        return st;
    uint64_t id = 1;
    char name[64];
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && same_flow(&v[i], &v[j]))
            j++;
        /* a send without its receive (or a receive without its send) has no arrow: the peer's
         * list is not in the trace */
        if (j - i >= 2 && (!v[i].p2p || (j - i == 2 && v[i].role == 0 && v[i + 1].role == 1))) {
            const gs_event *e = &sch->ranks[v[i].rank].events[v[i].event];
            if (v[i].p2p)
                snprintf(name, sizeof name, "send -> recv");
            else
                snprintf(name, sizeof name, "%s %s", gs_coll_op_name((gs_coll_op)e->op),
                         gs_group_kind_name((gs_group_kind)e->group));
            for (size_t k = i; k < j; k++)
                put_flow_point(f, sch, timing, &v[k], k == i ? 's' : k + 1 == j ? 'f' : 't', id, name);
            id++;
        }
        i = j;
    }
    free(v);
    return GS_OK;
}

/* ------------------------------------------------------------------------ slices ---- */

static void put_rank_header(FILE *f, const gs_rank_events *r, int first)
{
    char label[160];
    if (r->class_size > 1)
        snprintf(label, sizeof label, "rank %" PRIu64 " (stage %" PRIu64 ", x%" PRIu64 ": stands for %" PRIu64
                 " ranks with this schedule)", r->rank, r->stage, r->class_size, r->class_size);
    else
        snprintf(label, sizeof label, "rank %" PRIu64 " (stage %" PRIu64 ")", r->rank, r->stage);
    fprintf(f, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %" PRIu64 ", \"args\": {\"name\": ",
            first ? "" : ",\n", r->rank);
    json_str(f, label);
    fputs("}}", f);
    fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %" PRIu64
               ", \"args\": {\"sort_index\": %" PRIu64 "}}",
            r->rank, r->rank);
    for (int s = 0; s < GS_STREAM_COUNT; s++) {
        fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %" PRIu64 ", \"tid\": %d, \"args\": {\"name\": ",
                r->rank, s);
        json_str(f, gs_stream_name((gs_stream)s));
        fputs("}}", f);
    }
}

static void put_memory(FILE *f, uint64_t rank, int64_t ns, uint64_t live)
{
    fprintf(f, ",\n{\"ph\": \"C\", \"pid\": %" PRIu64 ", \"name\": \"memory\", \"ts\": ", rank);
    put_us(f, ns);
    fprintf(f, ", \"args\": {\"bytes\": %" PRIu64 "}}", live);
}

static void put_rank_events(FILE *f, const gs_mesh *mesh, const gs_rank_events *r, const gs_timing *timing)
{
    char name[GS_EVENT_NAME_BYTES];
    uint64_t live = 0;
    for (size_t t = 0; t < r->ntensors; t++)
        if (r->tensors[t].resident && !r->tensors[t].on_host)
            live += r->tensors[t].bytes;
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        const gs_timing *t = &timing[k];
        int64_t a = ns_of(t->start_s), b = ns_of(t->end_s);
        if (b < a)
            b = a;
        gs_event_name(r, e, name, sizeof name);
        fprintf(f, ",\n{\"ph\": \"X\", \"pid\": %" PRIu64 ", \"tid\": %d, \"ts\": ", r->rank, e->stream);
        put_us(f, a);
        fputs(", \"dur\": ", f);
        put_us(f, b - a);
        fputs(", \"name\": ", f);
        json_str(f, name);
        fprintf(f, ", \"args\": {\"bytes\": %" PRIu64, e->bytes);
        if (e->kind == GS_EV_COMPUTE)
            fprintf(f, ", \"flops\": %.6g", e->flops);
        if (e->kind == GS_EV_COLLECTIVE)
            fprintf(f, ", \"group\": \"%s\", \"group_size\": %" PRIu64 ", \"op\": \"%s\"",
                    gs_group_kind_name((gs_group_kind)e->group), e->group_size, gs_coll_op_name((gs_coll_op)e->op));
        if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV)
            fprintf(f, ", \"peer\": %" PRIu64, gs_event_peer(mesh, r, e));
        int64_t posted = ns_of(t->posted_s);
        if (a > posted) {
            fputs(", \"waited_us\": ", f);
            put_us(f, a - posted);
        }
        fputs("}}", f);
        const uint32_t *al = gs_event_list(r, e, GS_LINK_ALLOCS);
        const uint32_t *fr = gs_event_list(r, e, GS_LINK_FREES);
        if (e->nlinks[GS_LINK_ALLOCS]) {
            for (uint16_t x = 0; x < e->nlinks[GS_LINK_ALLOCS]; x++)
                if (!r->tensors[al[x]].on_host)
                    live += r->tensors[al[x]].bytes;
            put_memory(f, r->rank, a, live);
        }
        if (e->nlinks[GS_LINK_FREES]) {
            for (uint16_t x = 0; x < e->nlinks[GS_LINK_FREES]; x++)
                if (!r->tensors[fr[x]].on_host)
                    live -= r->tensors[fr[x]].bytes;
            put_memory(f, r->rank, b, live);
        }
    }
}

gs_status gs_report_trace(const gs_schedule *sch, gs_timing *const *timing, FILE *f, gs_error *err)
{
    int classes = 0;
    for (size_t i = 0; i < sch->nranks; i++)
        classes |= sch->ranks[i].class_size > 1;
    fputs("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"scenario\": ", f);
    json_str(f, sch->scenario);
    fputs(", \"times\": \"microseconds with three decimals: whole nanoseconds\"", f);
    if (classes)
        fputs(", \"xN\": \"a rank labelled xN stands for N ranks whose schedules equal its own up to their group "
              "ids (sim's one-rank-per-class path); sim --exact traces every rank\"",
              f);
    fputs("},\n\"traceEvents\": [\n", f);
    for (size_t i = 0; i < sch->nranks; i++) {
        put_rank_header(f, &sch->ranks[i], i == 0);
        put_rank_events(f, &sch->mesh, &sch->ranks[i], timing[i]);
    }
    if (put_flows(f, sch, timing) != GS_OK)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory linking the trace's flows");
    fputs("\n]}\n", f);
    if (ferror(f))
        return gs_error_set(err, GS_ERR_IO, "cannot write the trace");
    return GS_OK;
}
