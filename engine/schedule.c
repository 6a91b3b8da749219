/* The schedule's storage, names, byte counts, structural validation and serialization (text
 * dump and loader, streamed JSON). The builders that fill it live in engine/build*.c.
 *
 * Text format (version 1), one record per line, single spaces, every field always written in
 * this order so that dump(load(dump(x))) is byte-identical to dump(x):
 *
 *   gridstep-schedule 1
 *   scenario NAME                      NAME percent-encoded (bytes <= ' ', '%', >= 0x7f), "-" if empty
 *   mesh tp T dp D pp P order tp-dp-pp gpus_per_node G
 *   microbatches M
 *   exact 0|1
 *   ranks N
 *   rank R class C stage S tensors NT events NE        then NT tensor lines, NE event lines
 *   t I kind K bytes B layer L mb M unit U resident 0|1 host 0|1
 *   e I KIND stream S phase P op O group G chunk C layer L mb M unit U gemm m n k b peer P
 *     gsize N bytes B flops F deps LIST reads LIST writes LIST allocs LIST frees LIST
 *   ...                                (the next rank header, ...)
 *   end
 *
 * (an `e` record is one line). I counts from 0 within the rank and must be sequential.
 * K: gs_tensor_kind_name; KIND: gs_event_kind_name; S: gs_stream_name; P: gs_phase_name.
 * O: gs_op_name for compute, gs_coll_op_name for collectives, else a number ("-" for 0).
 * G: gs_group_kind_name for collectives, else a number ("-" for 0).
 * L: a layer index >= 0, or "emb", "head", "none" (GS_LAYER_EMBED / HEAD / NONE).
 * F: FLOPs printed with "%.17g" (round-trips bit for bit); finite, not negative.
 * LIST: comma-separated indices, or "-" when empty: deps index the rank's events (any index
 * below NE; cycles are gs_schedule_validate_structure's business), the other four its tensors.
 * The loader checks every word and number and reports "PATH:LINE: found X, expected Y". */
#include "engine/schedule.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule_internal.h"

/* ------------------------------------------------------------------------ name tables ---- */

static const char *const event_kind_names[GS_EV_KIND_COUNT] = {"compute", "collective", "send",
                                                               "recv",    "h2d",        "d2h"};
static const char *const stream_names[GS_STREAM_COUNT] = {"compute", "dp", "tp", "pp", "copy"};
static const char *const phase_names[GS_PHASE_COUNT] = {"fwd", "bwd", "recompute", "optim"};
static const char *const op_names[GS_OP_COUNT] = {"embed",  "norm",     "qkv",  "attn",
                                                  "oproj",  "mlp_up",   "act",  "mlp_down",
                                                  "head",   "loss",     "optimizer"};
static const char *const coll_names[GS_COLL_COUNT] = {"all_gather", "reduce_scatter", "all_reduce",
                                                      "broadcast", "all_to_all"};
static const char *const coll_short[GS_COLL_COUNT] = {"ag", "rs", "ar", "bcast", "a2a"};
static const char *const group_names[GS_GROUP_KIND_COUNT] = {"dp", "dp_intra", "dp_inter", "tp", "pp"};
static const char *const tensor_kind_names[GS_T_KIND_COUNT] = {
    "param_shard", "param_full", "grad",    "grad_shard", "activation",
    "boundary",    "master",     "opt_state", "workspace"};
static const char *const link_names[GS_LINK_LISTS] = {"deps", "reads", "writes", "allocs", "frees"};

const char *gs_event_kind_name(gs_event_kind k)
{
    return (unsigned)k < GS_EV_KIND_COUNT ? event_kind_names[k] : "?";
}

const char *gs_stream_name(gs_stream s)
{
    return (unsigned)s < GS_STREAM_COUNT ? stream_names[s] : "?";
}

const char *gs_phase_name(gs_phase p)
{
    return (unsigned)p < GS_PHASE_COUNT ? phase_names[p] : "?";
}

const char *gs_op_name(gs_op o)
{
    return (unsigned)o < GS_OP_COUNT ? op_names[o] : "?";
}

const char *gs_coll_op_name(gs_coll_op c)
{
    return (unsigned)c < GS_COLL_COUNT ? coll_names[c] : "?";
}

const char *gs_group_kind_name(gs_group_kind g)
{
    return (unsigned)g < GS_GROUP_KIND_COUNT ? group_names[g] : "?";
}

const char *gs_tensor_kind_name(gs_tensor_kind k)
{
    return (unsigned)k < GS_T_KIND_COUNT ? tensor_kind_names[k] : "?";
}

/* ---------------------------------------------------------------------------- storage ---- */

/* Grows *p (cap elements of elem bytes) to hold at least need, doubling. 0 ok, -1 no memory. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return -1;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

gs_status gs_schedule_create(size_t nranks, gs_schedule **out)
{
    *out = NULL;
    gs_schedule *sch = calloc(1, sizeof *sch);
    if (!sch)
        return GS_ERR_NOMEM;
    if (nranks) {
        sch->ranks = calloc(nranks, sizeof *sch->ranks);
        if (!sch->ranks) {
            free(sch);
            return GS_ERR_NOMEM;
        }
    }
    sch->nranks = nranks;
    *out = sch;
    return GS_OK;
}

static void rank_fini(gs_rank_events *r)
{
    if (r->shared) { /* borrowed arrays */
        memset(r, 0, sizeof *r);
        return;
    }
    free(r->events);
    free(r->tensors);
    free(r->pool);
    free(r->dups);
    free(r->name_hash);
    memset(r, 0, sizeof *r);
}

void gs_schedule_destroy(gs_schedule *sch)
{
    if (!sch)
        return;
    for (size_t i = 0; i < sch->nranks; i++)
        rank_fini(&sch->ranks[i]);
    free(sch->ranks);
    free(sch);
}

const gs_rank_events *gs_schedule_find_rank(const gs_schedule *sch, uint64_t rank)
{
    for (size_t i = 0; i < sch->nranks; i++)
        if (sch->ranks[i].rank == rank)
            return &sch->ranks[i];
    return NULL;
}

gs_status gs_rank_add_tensor(gs_rank_events *r, const gs_tensor *t, uint32_t *id)
{
    if (r->ntensors >= UINT32_MAX)
        return GS_ERR_OVERFLOW;
    if (grow((void **)&r->tensors, &r->cap_tensors, r->ntensors + 1, sizeof *r->tensors) != 0)
        return GS_ERR_NOMEM;
    r->tensors[r->ntensors] = *t;
    if (id)
        *id = (uint32_t)r->ntensors;
    r->ntensors++;
    return GS_OK;
}

const uint32_t *gs_event_list(const gs_rank_events *r, const gs_event *e, int which)
{
    size_t off = e->links;
    for (int w = 0; w < which; w++)
        off += e->nlinks[w];
    return r->pool + off;
}

/* ----------------------------------------------------------------- names and their index ---- */

enum { NK_LAYER = 1, NK_UNIT = 2, NK_MB = 4, NK_CHUNK = 8, NK_WORD = 16 };

/* The fields a name shows, the others zeroed: equal keys <=> equal names (before "#n"). */
typedef struct name_key {
    int32_t layer;
    uint32_t mb, chunk, unit;
    uint8_t kind, word, group, phase, flags;
} name_key;

static int is_dp_group(unsigned g)
{
    return g == GS_GROUP_DP || g == GS_GROUP_DP_INTRA || g == GS_GROUP_DP_INTER;
}

static void name_key_of(const gs_event *e, name_key *k)
{
    memset(k, 0, sizeof *k);
    k->kind = e->kind;
    k->phase = e->phase;
    int copy = e->kind == GS_EV_COPY_H2D || e->kind == GS_EV_COPY_D2H;
    if (e->layer != GS_LAYER_NONE) {
        k->flags |= NK_LAYER;
        k->layer = e->layer;
    } else if ((e->kind == GS_EV_COLLECTIVE && is_dp_group(e->group)) || copy ||
               (e->kind == GS_EV_COMPUTE && e->unit != 0)) {
        k->flags |= NK_UNIT;
        k->unit = e->unit;
    }
    if (e->phase != GS_PHASE_OPTIM) {
        k->flags |= NK_MB;
        k->mb = e->mb;
    }
    if (e->chunk != 0 && e->layer < 0) {
        k->flags |= NK_CHUNK;
        k->chunk = e->chunk;
    }
    if (e->kind == GS_EV_COMPUTE) {
        int implied = (e->op == GS_OP_EMBED && e->layer == GS_LAYER_EMBED) ||
                      (e->op == GS_OP_HEAD && e->layer == GS_LAYER_HEAD) ||
                      (e->op == GS_OP_OPTIMIZER && e->phase == GS_PHASE_OPTIM);
        if (!implied) {
            k->flags |= NK_WORD;
            k->word = e->op;
        }
    } else if (e->kind == GS_EV_COLLECTIVE) {
        k->flags |= NK_WORD;
        k->word = e->op;
        k->group = e->group == GS_GROUP_DP_INTRA ? GS_GROUP_DP : e->group;
    }
}

static int name_key_eq(const name_key *a, const name_key *b)
{
    return a->layer == b->layer && a->mb == b->mb && a->chunk == b->chunk && a->unit == b->unit &&
           a->kind == b->kind && a->word == b->word && a->group == b->group && a->phase == b->phase &&
           a->flags == b->flags;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t name_key_hash(const name_key *k)
{
    uint64_t h = mix64(((uint64_t)(uint32_t)k->layer << 32) | k->mb);
    h = mix64(h ^ (((uint64_t)k->chunk << 32) | k->unit));
    h = mix64(h ^ ((uint64_t)k->kind | (uint64_t)k->word << 8 | (uint64_t)k->group << 16 |
                   (uint64_t)k->phase << 24 | (uint64_t)k->flags << 32));
    return h;
}

/* n of "#n" for event id (1 = no suffix). */
static uint32_t name_ordinal(const gs_rank_events *r, uint32_t id)
{
    if (r->unnamed) {
        name_key k, other;
        uint32_t n = 1;
        name_key_of(&r->events[id], &k);
        for (uint32_t i = 0; i < id; i++) {
            name_key_of(&r->events[i], &other);
            n += name_key_eq(&k, &other);
        }
        return n;
    }
    size_t lo = 0, hi = r->ndups;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t v = r->dups[2 * mid];
        if (v == id)
            return r->dups[2 * mid + 1];
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 1;
}

/* The slot of key k (fingerprint fp): an empty one (0), or that of the latest event with k. */
static size_t name_hash_find(const gs_rank_events *r, const name_key *k, uint32_t fp)
{
    size_t mask = r->name_hash_cap - 1;
    size_t h = fp & mask;
    for (;;) {
        uint64_t v = r->name_hash[h];
        if (v == 0)
            return h;
        if ((uint32_t)(v >> 32) == fp) {
            name_key other;
            name_key_of(&r->events[(uint32_t)v - 1], &other);
            if (name_key_eq(k, &other))
                return h;
        }
        h = (h + 1) & mask;
    }
}

/* Makes the index hold the first n events with room for one more: grows it (moving entries,
 * which does not touch the events) or rebuilds it from the events after gs_rank_finish. */
static int name_hash_reserve(gs_rank_events *r, size_t n)
{
    if (r->name_hash && (n + 1) * 10 <= r->name_hash_cap * 7)
        return 0;
    size_t cap = 1024;
    while ((n + 1) * 10 > cap * 7) {
        if (cap > SIZE_MAX / 32)
            return -1;
        cap *= 2;
    }
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    uint64_t *old = r->name_hash;
    size_t old_cap = r->name_hash_cap;
    r->name_hash = t;
    r->name_hash_cap = cap;
    if (old) {
        for (size_t i = 0; i < old_cap; i++)
            if (old[i]) {
                size_t h = (size_t)(old[i] >> 32) & (cap - 1);
                while (t[h])
                    h = (h + 1) & (cap - 1);
                t[h] = old[i];
            }
        free(old);
    } else {
        for (size_t i = 0; i < n; i++) { /* in list order: the latest event of each name wins */
            name_key k;
            name_key_of(&r->events[i], &k);
            uint32_t fp = (uint32_t)(name_key_hash(&k) >> 32);
            t[name_hash_find(r, &k, fp)] = (uint64_t)fp << 32 | ((uint64_t)i + 1);
        }
    }
    return 0;
}

gs_status gs_rank_reserve(gs_rank_events *r, size_t events, size_t pool, size_t tensors)
{
    if (grow((void **)&r->events, &r->cap_events, events, sizeof *r->events) != 0 ||
        grow((void **)&r->pool, &r->cap_pool, pool, sizeof *r->pool) != 0 ||
        grow((void **)&r->tensors, &r->cap_tensors, tensors, sizeof *r->tensors) != 0)
        return GS_ERR_NOMEM;
    return GS_OK;
}

gs_status gs_rank_add_event(gs_rank_events *r, const gs_event *ev, const uint32_t *const lists[GS_LINK_LISTS],
                            uint32_t *id)
{
    size_t total = 0;
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        if (ev->nlinks[w] && (!lists || !lists[w]))
            return GS_ERR_INPUT;
        total += ev->nlinks[w];
    }
    if (r->nevents >= UINT32_MAX - 1 || r->npool + total > UINT32_MAX)
        return GS_ERR_OVERFLOW;
    if (grow((void **)&r->events, &r->cap_events, r->nevents + 1, sizeof *r->events) != 0 ||
        grow((void **)&r->pool, &r->cap_pool, r->npool + total, sizeof *r->pool) != 0 ||
        (!r->unnamed && (grow((void **)&r->dups, &r->cap_dups, 2 * (r->ndups + 1), sizeof *r->dups) != 0 ||
                         name_hash_reserve(r, r->nevents) != 0)))
        return GS_ERR_NOMEM;

    gs_event e = *ev;
    e.links = (uint32_t)r->npool;
    uint32_t *dst = r->pool + r->npool;
    for (int w = 0; w < GS_LINK_LISTS; w++) { /* a few ids each: copied inline, not by memcpy calls */
        const uint32_t *src = lists ? lists[w] : NULL;
        for (uint16_t j = 0; j < ev->nlinks[w]; j++)
            *dst++ = src[j];
    }
    r->npool += total;
    uint32_t me = (uint32_t)r->nevents;
    if (!r->unnamed) {
        name_key k;
        name_key_of(&e, &k);
        uint32_t fp = (uint32_t)(name_key_hash(&k) >> 32);
        size_t slot = name_hash_find(r, &k, fp);
        if (r->name_hash[slot] != 0) {
            uint32_t n = name_ordinal(r, (uint32_t)r->name_hash[slot] - 1) + 1;
            r->dups[2 * r->ndups] = me;
            r->dups[2 * r->ndups + 1] = n;
            r->ndups++;
        }
        r->name_hash[slot] = (uint64_t)fp << 32 | ((uint64_t)me + 1);
    }
    r->events[me] = e;
    r->nevents++;
    if (id)
        *id = me;
    return GS_OK;
}

static void shrink(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n == *cap || n == 0)
        return;
    void *q = realloc(*p, n * elem);
    if (q) {
        *p = q;
        *cap = n;
    }
}

void gs_rank_finish(gs_rank_events *r)
{
    free(r->name_hash);
    r->name_hash = NULL;
    r->name_hash_cap = 0;
    shrink((void **)&r->events, &r->cap_events, r->nevents, sizeof *r->events);
    shrink((void **)&r->tensors, &r->cap_tensors, r->ntensors, sizeof *r->tensors);
    shrink((void **)&r->pool, &r->cap_pool, r->npool, sizeof *r->pool);
    if (r->ndups == 0) {
        free(r->dups);
        r->dups = NULL;
        r->cap_dups = 0;
    } else {
        shrink((void **)&r->dups, &r->cap_dups, 2 * r->ndups, sizeof *r->dups);
    }
}

/* Appends printf output at *pos of buf (len bytes), never overrunning. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    if (*pos >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (n > 0)
        *pos = (size_t)n >= len - *pos ? len - 1 : *pos + (size_t)n;
}

void gs_event_name(const gs_rank_events *r, const gs_event *e, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    name_key k;
    name_key_of(e, &k);
    size_t pos = 0;
    const char *sep = "";
    if (k.flags & NK_LAYER) {
        if (k.layer == GS_LAYER_EMBED)
            append(buf, len, &pos, "emb");
        else if (k.layer == GS_LAYER_HEAD)
            append(buf, len, &pos, "head");
        else
            append(buf, len, &pos, "L%" PRId32, k.layer);
        sep = ".";
    } else if (k.flags & NK_UNIT) {
        append(buf, len, &pos, "unit%" PRIu32, k.unit);
        sep = ".";
    }
    if (k.flags & NK_MB) {
        append(buf, len, &pos, "%smb%" PRIu32, sep, k.mb);
        sep = ".";
    }
    if (k.flags & NK_CHUNK) {
        append(buf, len, &pos, "%sc%" PRIu32, sep, k.chunk);
        sep = ".";
    }
    if (k.phase < GS_PHASE_COUNT)
        append(buf, len, &pos, "%s%s", sep, phase_names[k.phase]);
    else
        append(buf, len, &pos, "%sphase%u", sep, (unsigned)k.phase);
    switch (k.kind) {
    case GS_EV_COMPUTE:
        if (k.flags & NK_WORD) {
            if (k.word < GS_OP_COUNT)
                append(buf, len, &pos, ".%s", op_names[k.word]);
            else
                append(buf, len, &pos, ".op%u", (unsigned)k.word);
        }
        break;
    case GS_EV_COLLECTIVE: {
        const char *prefix = "";
        char gbuf[16];
        switch (k.group) {
        case GS_GROUP_DP: break;
        case GS_GROUP_DP_INTER: prefix = "inter_"; break;
        case GS_GROUP_TP: prefix = "tp_"; break;
        case GS_GROUP_PP: prefix = "pp_"; break;
        default:
            snprintf(gbuf, sizeof gbuf, "g%u_", (unsigned)k.group);
            prefix = gbuf;
        }
        if (k.word < GS_COLL_COUNT)
            append(buf, len, &pos, ".%s%s", prefix, coll_short[k.word]);
        else
            append(buf, len, &pos, ".%scoll%u", prefix, (unsigned)k.word);
        break;
    }
    case GS_EV_SEND: append(buf, len, &pos, ".send"); break;
    case GS_EV_RECV: append(buf, len, &pos, ".recv"); break;
    case GS_EV_COPY_H2D: append(buf, len, &pos, ".h2d"); break;
    case GS_EV_COPY_D2H: append(buf, len, &pos, ".d2h"); break;
    default: append(buf, len, &pos, ".kind%u", (unsigned)k.kind); break;
    }
    if (r && e >= r->events && e < r->events + r->nevents) {
        uint32_t n = name_ordinal(r, (uint32_t)(e - r->events));
        if (n > 1)
            append(buf, len, &pos, "#%" PRIu32, n);
    }
}

/* ------------------------------------------------------------------ bytes and memory ---- */

/* floor(bytes * num / n) without overflow, for num < n. */
static uint64_t frac_floor(uint64_t bytes, uint64_t num, uint64_t n)
{
    return (bytes / n) * num + (bytes % n) * num / n;
}

uint64_t gs_event_sent_bytes(const gs_event *e)
{
    uint64_t n = e->group_size;
    switch (e->kind) {
    case GS_EV_SEND:
        return e->bytes;
    case GS_EV_COLLECTIVE:
        if (n <= 1)
            return 0;
        switch (e->op) {
        case GS_COLL_ALLGATHER:
        case GS_COLL_REDUCE_SCATTER:
        case GS_COLL_ALLTOALL:
            return frac_floor(e->bytes, n - 1, n); /* (n-1)/n x bytes (exact: bytes = n x shard) */
        case GS_COLL_ALLREDUCE: {
            uint64_t chunk = e->bytes / n + (e->bytes % n != 0); /* ring: ceil(bytes/n) per step */
            return 2 * (n - 1) * chunk;
        }
        case GS_COLL_BROADCAST:
            return e->bytes; /* nccl-tests: busbw factor 1 */
        default:
            return 0;
        }
    default:
        return 0;
    }
}

uint64_t gs_rank_peak_bytes(const gs_rank_events *r)
{
    uint64_t cur = 0;
    for (size_t i = 0; i < r->ntensors; i++)
        if (r->tensors[i].resident && !r->tensors[i].on_host)
            cur += r->tensors[i].bytes;
    uint64_t peak = cur;
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        const uint32_t *a = gs_event_list(r, e, GS_LINK_ALLOCS);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_ALLOCS]; j++)
            if (a[j] < r->ntensors && !r->tensors[a[j]].on_host)
                cur += r->tensors[a[j]].bytes;
        if (cur > peak)
            peak = cur;
        const uint32_t *f = gs_event_list(r, e, GS_LINK_FREES);
        for (uint32_t j = 0; j < e->nlinks[GS_LINK_FREES]; j++)
            if (f[j] < r->ntensors && !r->tensors[f[j]].on_host) {
                uint64_t b = r->tensors[f[j]].bytes;
                cur = cur >= b ? cur - b : 0;
            }
    }
    return peak;
}

/* --------------------------------------------------------------------------- groups ---- */

/* HSDP parts of rank's DP group: the group's members first + i*s (i < n) split by node. */
typedef struct dp_parts {
    uint64_t g, first, s, n, gpn;
} dp_parts;

static void dp_parts_of(const gs_mesh *m, uint64_t rank, dp_parts *p)
{
    p->g = gs_mesh_group(m, GS_DIM_DP, rank, NULL);
    p->first = gs_mesh_group_first(m, GS_DIM_DP, p->g);
    p->s = m->stride[GS_DIM_DP];
    p->n = m->size[GS_DIM_DP];
    p->gpn = m->gpus_per_node;
}

/* [lo, hi] member indices of the part holding member i. */
static void dp_part(const dp_parts *p, uint64_t i, uint64_t *lo, uint64_t *hi)
{
    uint64_t node_lo = ((p->first + i * p->s) / p->gpn) * p->gpn;
    uint64_t node_hi = node_lo + (p->gpn - 1);
    *lo = node_lo <= p->first ? 0 : (node_lo - p->first + p->s - 1) / p->s;
    uint64_t h = node_hi < p->first ? 0 : (node_hi - p->first) / p->s;
    *hi = h < p->n - 1 ? h : p->n - 1;
}

static uint64_t dp_sub_members(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *out,
                               uint64_t *index)
{
    dp_parts p;
    dp_parts_of(m, rank, &p);
    uint64_t i = (rank - p.first) / p.s, lo, hi;
    dp_part(&p, i, &lo, &hi);
    uint64_t count = 0;
    if (g == GS_GROUP_DP_INTRA) {
        *index = p.g * p.n + lo;
        for (uint64_t j = lo; j <= hi; j++, count++)
            if (out)
                out[count] = p.first + j * p.s;
        return count;
    }
    uint64_t pos = i - lo;
    *index = p.g * p.n + pos;
    for (uint64_t j = 0; j < p.n;) { /* walk the parts */
        uint64_t plo, phi;
        dp_part(&p, j, &plo, &phi);
        if (phi - plo >= pos) {
            if (out)
                out[count] = p.first + (plo + pos) * p.s;
            count++;
        }
        j = phi + 1;
    }
    return count;
}

static gs_dim group_dim(gs_group_kind g)
{
    return g == GS_GROUP_TP ? GS_DIM_TP : g == GS_GROUP_PP ? GS_DIM_PP : GS_DIM_DP;
}

uint64_t gs_group_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *size)
{
    uint64_t index = 0, n;
    if (g == GS_GROUP_DP_INTRA || g == GS_GROUP_DP_INTER) {
        n = dp_sub_members(m, g, rank, NULL, &index);
    } else {
        index = gs_mesh_group(m, group_dim(g), rank, NULL);
        n = m->size[group_dim(g)];
    }
    if (size)
        *size = n;
    return index;
}

uint64_t gs_group_members_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *out)
{
    uint64_t index;
    if (g == GS_GROUP_DP_INTRA || g == GS_GROUP_DP_INTER)
        return dp_sub_members(m, g, rank, out, &index);
    gs_mesh_group(m, group_dim(g), rank, out);
    return m->size[group_dim(g)];
}

/* ------------------------------------------------------------------------ validation ---- */

static const char *layer_word(int32_t layer, char *buf, size_t len)
{
    if (layer == GS_LAYER_EMBED)
        return "emb";
    if (layer == GS_LAYER_HEAD)
        return "head";
    if (layer == GS_LAYER_NONE)
        return "none";
    snprintf(buf, len, "%" PRId32, layer);
    return buf;
}

static const char *tensor_desc(const gs_rank_events *r, uint32_t t, char *buf, size_t len)
{
    const gs_tensor *x = &r->tensors[t];
    char lb[16];
    snprintf(buf, len, "tensor %" PRIu32 " (%s, layer %s, mb %" PRIu32 ", unit %" PRIu32 ", %" PRIu64 " B)", t,
             gs_tensor_kind_name((gs_tensor_kind)x->kind), layer_word(x->layer, lb, sizeof lb), x->mb, x->unit,
             x->bytes);
    return buf;
}

#define EV_NAME(r, i, buf) (gs_event_name((r), &(r)->events[i], (buf), sizeof(buf)), (buf))

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
                                        r->rank, EV_NAME(r, i, nm), link_names[w], l[j], r->ntensors);
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
                                    r->rank, EV_NAME(r, i, nm), group_names[e->group], e->peer, r->rank,
                                    group_names[e->group], gidx[e->group]);
            if (e->group_size != gsize[e->group])
                return gs_error_set(err, GS_ERR_RUNTIME,
                                    "rank %" PRIu64 ": event %s says its %s group has %" PRIu64
                                    " ranks, but it has %" PRIu64,
                                    r->rank, EV_NAME(r, i, nm), group_names[e->group], e->group_size,
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
                            append(msg, sizeof msg, &pos, "... (%zu more) -> ", top - k);
                            k = top;
                        }
                        append(msg, sizeof msg, &pos, "%s -> ", EV_NAME(r, stack[k], nm));
                    }
                    append(msg, sizeof msg, &pos, "%s", EV_NAME(r, d, nm));
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
                                          group_names[k], gm[a].group, mr->rank, rr->rank, EV_NAME(rr, rs[j], nm),
                                          coll_desc(&rr->events[rs[j]], d1, sizeof d1), j + 1);
                        goto out;
                    }
                    if (j >= rn) {
                        st = gs_error_set(err, GS_ERR_RUNTIME,
                                          "collective mismatch on %s group %" PRIu64 ": rank %" PRIu64
                                          " is missing a collective that rank %" PRIu64
                                          " issues as %s (%s; its collective #%zu on the group)",
                                          group_names[k], gm[a].group, rr->rank, mr->rank, EV_NAME(mr, ms[j], nm),
                                          coll_desc(&mr->events[ms[j]], d1, sizeof d1), j + 1);
                        goto out;
                    }
                    const gs_event *x = &rr->events[rs[j]], *y = &mr->events[ms[j]];
                    if (x->op != y->op || x->bytes != y->bytes || x->group_size != y->group_size) {
                        char nm2[GS_EVENT_NAME_BYTES];
                        st = gs_error_set(err, GS_ERR_RUNTIME,
                                          "collective mismatch on %s group %" PRIu64 ": rank %" PRIu64
                                          " event %s is %s, rank %" PRIu64 " has %s: %s (collective #%zu on the group)",
                                          group_names[k], gm[a].group, rr->rank, EV_NAME(rr, rs[j], nm),
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
    if ((st = check_collectives(sch, err)) != GS_OK)
        goto out;
    st = check_p2p(sch, by_rank, err);
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

/* ------------------------------------------------------------------------- text dump ---- */

/* A buffered writer: dumps run to 10^7 lines, and stdio's printf per field dominates. */
#define OUT_BYTES 65536

typedef struct writer {
    FILE *f;
    size_t n;
    char buf[OUT_BYTES];
} writer;

static void out_flush(writer *o)
{
    if (o->n)
        fwrite(o->buf, 1, o->n, o->f);
    o->n = 0;
}

static void out_reserve(writer *o, size_t k)
{
    if (o->n + k > OUT_BYTES)
        out_flush(o);
}

static void out_mem(writer *o, const char *s, size_t k)
{
    if (k > OUT_BYTES / 2) {
        out_flush(o);
        fwrite(s, 1, k, o->f);
        return;
    }
    out_reserve(o, k);
    memcpy(o->buf + o->n, s, k);
    o->n += k;
}

static void out_str(writer *o, const char *s)
{
    out_mem(o, s, strlen(s));
}

static void out_char(writer *o, char c)
{
    out_reserve(o, 1);
    o->buf[o->n++] = c;
}

static void out_u64(writer *o, uint64_t v)
{
    char tmp[20];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    out_reserve(o, 20);
    while (i)
        o->buf[o->n++] = tmp[--i];
}

static void out_i64(writer *o, int64_t v)
{
    if (v < 0) {
        out_char(o, '-');
        out_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        out_u64(o, (uint64_t)v);
    }
}

/* "%.17g": integral values below 10^17 print as their digits (what %.17g writes for them). */
static void out_double(writer *o, double d)
{
    if (d >= 0 && d < 1e17 && d == (double)(uint64_t)d && !(d == 0 && signbit(d))) {
        out_u64(o, (uint64_t)d);
        return;
    }
    out_reserve(o, 40);
    int k = snprintf(o->buf + o->n, 40, "%.17g", d);
    if (k > 0)
        o->n += (size_t)k < 40 ? (size_t)k : 39;
}

static void out_layer(writer *o, int32_t layer)
{
    char b[16];
    out_str(o, layer_word(layer, b, sizeof b));
}

static void out_list(writer *o, const uint32_t *l, uint32_t n, char empty)
{
    if (n == 0 && empty) {
        out_char(o, empty);
        return;
    }
    for (uint32_t j = 0; j < n; j++) {
        if (j)
            out_char(o, ',');
        out_u64(o, l[j]);
    }
}

/* "-" for 0 (a field the kind does not use), else the number. */
static void out_small(writer *o, unsigned v)
{
    if (v == 0)
        out_char(o, '-');
    else
        out_u64(o, v);
}

static gs_status out_finish(writer *o, gs_error *err, const char *what)
{
    out_flush(o);
    int bad = ferror(o->f);
    int saved = errno;
    free(o);
    if (bad)
        return gs_error_set(err, GS_ERR_IO, "writing the schedule %s: %s", what, strerror(saved));
    return GS_OK;
}

gs_status gs_schedule_dump(const gs_schedule *sch, FILE *f, gs_error *err)
{
    char order[32];
    writer *o = malloc(sizeof *o);
    if (!o)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory writing the schedule dump");
    o->f = f;
    o->n = 0;
    out_str(o, "gridstep-schedule 1\nscenario ");
    size_t slen = strnlen(sch->scenario, sizeof sch->scenario);
    if (slen == 0) {
        out_char(o, '-');
    } else if (slen == 1 && sch->scenario[0] == '-') {
        out_str(o, "%2D");
    } else {
        for (size_t i = 0; i < slen; i++) {
            unsigned char c = (unsigned char)sch->scenario[i];
            if (c <= ' ' || c == '%' || c >= 0x7f) {
                char esc[4];
                snprintf(esc, sizeof esc, "%%%02X", c);
                out_str(o, esc);
            } else {
                out_char(o, (char)c);
            }
        }
    }
    gs_mesh_order_format(sch->mesh.order, order, sizeof order);
    out_str(o, "\nmesh tp ");
    out_u64(o, sch->mesh.size[GS_DIM_TP]);
    out_str(o, " dp ");
    out_u64(o, sch->mesh.size[GS_DIM_DP]);
    out_str(o, " pp ");
    out_u64(o, sch->mesh.size[GS_DIM_PP]);
    out_str(o, " order ");
    out_str(o, order);
    out_str(o, " gpus_per_node ");
    out_u64(o, sch->mesh.gpus_per_node);
    out_str(o, "\nmicrobatches ");
    out_u64(o, sch->microbatches);
    out_str(o, "\nexact ");
    out_i64(o, sch->exact);
    out_str(o, "\nranks ");
    out_u64(o, sch->nranks);
    out_char(o, '\n');
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        out_str(o, "rank ");
        out_u64(o, r->rank);
        out_str(o, " class ");
        out_u64(o, r->class_size);
        out_str(o, " stage ");
        out_u64(o, r->stage);
        out_str(o, " tensors ");
        out_u64(o, r->ntensors);
        out_str(o, " events ");
        out_u64(o, r->nevents);
        out_char(o, '\n');
        for (size_t i = 0; i < r->ntensors; i++) {
            const gs_tensor *t = &r->tensors[i];
            out_str(o, "t ");
            out_u64(o, i);
            out_str(o, " kind ");
            out_str(o, gs_tensor_kind_name((gs_tensor_kind)t->kind));
            out_str(o, " bytes ");
            out_u64(o, t->bytes);
            out_str(o, " layer ");
            out_layer(o, t->layer);
            out_str(o, " mb ");
            out_u64(o, t->mb);
            out_str(o, " unit ");
            out_u64(o, t->unit);
            out_str(o, " resident ");
            out_u64(o, t->resident);
            out_str(o, " host ");
            out_u64(o, t->on_host);
            out_char(o, '\n');
        }
        for (size_t i = 0; i < r->nevents; i++) {
            const gs_event *e = &r->events[i];
            out_str(o, "e ");
            out_u64(o, i);
            out_char(o, ' ');
            out_str(o, gs_event_kind_name((gs_event_kind)e->kind));
            out_str(o, " stream ");
            out_str(o, gs_stream_name((gs_stream)e->stream));
            out_str(o, " phase ");
            out_str(o, gs_phase_name((gs_phase)e->phase));
            out_str(o, " op ");
            if (e->kind == GS_EV_COMPUTE)
                out_str(o, gs_op_name((gs_op)e->op));
            else if (e->kind == GS_EV_COLLECTIVE)
                out_str(o, gs_coll_op_name((gs_coll_op)e->op));
            else
                out_small(o, e->op);
            out_str(o, " group ");
            if (e->kind == GS_EV_COLLECTIVE)
                out_str(o, gs_group_kind_name((gs_group_kind)e->group));
            else
                out_small(o, e->group);
            out_str(o, " chunk ");
            out_u64(o, e->chunk);
            out_str(o, " layer ");
            out_layer(o, e->layer);
            out_str(o, " mb ");
            out_u64(o, e->mb);
            out_str(o, " unit ");
            out_u64(o, e->unit);
            out_str(o, " gemm ");
            out_u64(o, e->gemm_m);
            out_char(o, ' ');
            out_u64(o, e->gemm_n);
            out_char(o, ' ');
            out_u64(o, e->gemm_k);
            out_char(o, ' ');
            out_u64(o, e->gemm_batch);
            out_str(o, " peer ");
            out_u64(o, e->peer);
            out_str(o, " gsize ");
            out_u64(o, e->group_size);
            out_str(o, " bytes ");
            out_u64(o, e->bytes);
            out_str(o, " flops ");
            out_double(o, e->flops);
            for (int w = 0; w < GS_LINK_LISTS; w++) {
                out_char(o, ' ');
                out_str(o, link_names[w]);
                out_char(o, ' ');
                out_list(o, gs_event_list(r, e, w), e->nlinks[w], '-');
            }
            out_char(o, '\n');
        }
    }
    out_str(o, "end\n");
    return out_finish(o, err, "dump");
}

/* ---------------------------------------------------------------------------- loader ---- */

#define LOAD_MAX_TOKENS 64

typedef struct loader {
    FILE *f;
    const char *path;
    size_t lineno;
    char *line;
    size_t cap;
    char *tok[LOAD_MAX_TOKENS];
    size_t ntok;
    int too_many; /* the line had more than LOAD_MAX_TOKENS words */
    gs_error *err;
} loader;

/* Reads the next line and splits it at spaces. Returns 1, or 0 at end of file. */
static int load_line(loader *ld)
{
    errno = 0;
    ssize_t n = getline(&ld->line, &ld->cap, ld->f);
    if (n < 0)
        return 0;
    ld->lineno++;
    if (n > 0 && ld->line[n - 1] == '\n')
        ld->line[--n] = '\0';
    if (n > 0 && ld->line[n - 1] == '\r')
        ld->line[--n] = '\0';
    ld->ntok = 0;
    ld->too_many = 0;
    char *p = ld->line;
    while (*p) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        if (ld->ntok == LOAD_MAX_TOKENS) {
            ld->too_many = 1;
            break;
        }
        ld->tok[ld->ntok++] = p;
        while (*p && *p != ' ')
            p++;
    }
    return 1;
}

/* "found X, expected Y" for token i of the current line (or the end of the line / file). */
static gs_status load_fail(loader *ld, size_t i, const char *expected, ...) __attribute__((format(printf, 3, 4)));
static gs_status load_fail(loader *ld, size_t i, const char *expected, ...)
{
    char what[256], found[64];
    va_list ap;
    va_start(ap, expected);
    vsnprintf(what, sizeof what, expected, ap);
    va_end(ap);
    if (i == SIZE_MAX) {
        snprintf(found, sizeof found, "end of file");
        return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found %s, expected %s", ld->path, ld->lineno + 1, found, what);
    }
    if (i >= ld->ntok) {
        snprintf(found, sizeof found, "end of line");
    } else {
        size_t k = 0;
        found[k++] = '\'';
        for (const char *p = ld->tok[i]; *p && k < 44; p++)
            found[k++] = (*p > ' ' && *p < 0x7f) ? *p : '?';
        if (strlen(ld->tok[i]) > 42) {
            memcpy(found + k, "...", 3);
            k += 3;
        }
        found[k++] = '\'';
        found[k] = '\0';
    }
    return gs_error_set(ld->err, GS_ERR_INPUT, "%s:%zu: found %s, expected %s", ld->path, ld->lineno, found, what);
}

static gs_status load_next(loader *ld, const char *expected)
{
    if (!load_line(ld)) {
        if (ferror(ld->f))
            return gs_error_set(ld->err, GS_ERR_IO, "%s:%zu: read error: %s", ld->path, ld->lineno + 1, strerror(errno));
        return load_fail(ld, SIZE_MAX, "%s", expected);
    }
    return GS_OK;
}

static gs_status load_word(loader *ld, size_t i, const char *word)
{
    if (i >= ld->ntok || strcmp(ld->tok[i], word) != 0)
        return load_fail(ld, i, "'%s'", word);
    return GS_OK;
}

static gs_status load_end_of_line(loader *ld, size_t i)
{
    if (ld->ntok > i || ld->too_many)
        return load_fail(ld, i, "end of line");
    return GS_OK;
}

static gs_status load_u64(loader *ld, size_t i, const char *what, uint64_t max, uint64_t *out)
{
    const char *s = i < ld->ntok ? ld->tok[i] : NULL;
    uint64_t v = 0;
    if (!s || !*s || (s[0] == '0' && s[1]))
        return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return load_fail(ld, i, "%s (an integer from 0 to %" PRIu64 ")", what, max);
    *out = v;
    return GS_OK;
}

/* "KEY VALUE" at tokens i, i+1. */
static gs_status load_kv_u64(loader *ld, size_t i, const char *key, uint64_t max, uint64_t *out)
{
    gs_status st = load_word(ld, i, key);
    return st != GS_OK ? st : load_u64(ld, i + 1, key, max, out);
}

static gs_status load_kv_u32(loader *ld, size_t i, const char *key, uint32_t *out)
{
    uint64_t v;
    gs_status st = load_kv_u64(ld, i, key, UINT32_MAX, &v);
    if (st == GS_OK)
        *out = (uint32_t)v;
    return st;
}

/* Index of token i in names[0..n), or a failure. */
static gs_status load_name(loader *ld, size_t i, const char *what, const char *const *names, int n, int *out)
{
    if (i < ld->ntok)
        for (int k = 0; k < n; k++)
            if (strcmp(ld->tok[i], names[k]) == 0) {
                *out = k;
                return GS_OK;
            }
    char list[256];
    size_t pos = 0;
    for (int k = 0; k < n; k++)
        append(list, sizeof list, &pos, "%s%s", k ? (k == n - 1 ? " or " : ", ") : "", names[k]);
    return load_fail(ld, i, "%s (%s)", what, list);
}

/* A byte that is "-" (0) or a number 1..255. */
static gs_status load_small(loader *ld, size_t i, const char *what, uint8_t *out)
{
    if (i < ld->ntok && strcmp(ld->tok[i], "-") == 0) {
        *out = 0;
        return GS_OK;
    }
    uint64_t v;
    gs_status st = load_u64(ld, i, what, 255, &v);
    if (st == GS_OK && v == 0)
        return load_fail(ld, i, "%s ('-' for 0, or 1 to 255)", what);
    if (st == GS_OK)
        *out = (uint8_t)v;
    return st;
}

static gs_status load_layer(loader *ld, size_t i, int32_t *out)
{
    const char *s = i < ld->ntok ? ld->tok[i] : "";
    if (strcmp(s, "emb") == 0)
        *out = GS_LAYER_EMBED;
    else if (strcmp(s, "head") == 0)
        *out = GS_LAYER_HEAD;
    else if (strcmp(s, "none") == 0)
        *out = GS_LAYER_NONE;
    else {
        uint64_t v;
        if (load_u64(ld, i, "layer", INT32_MAX, &v) != GS_OK)
            return load_fail(ld, i, "a layer (an index from 0 to %d, emb, head or none)", INT32_MAX);
        *out = (int32_t)v;
    }
    return GS_OK;
}

static gs_status load_flag(loader *ld, size_t i, const char *key, uint8_t *out)
{
    uint64_t v;
    gs_status st = load_word(ld, i, key);
    if (st == GS_OK && (i + 1 >= ld->ntok || (strcmp(ld->tok[i + 1], "0") != 0 && strcmp(ld->tok[i + 1], "1") != 0)))
        st = load_fail(ld, i + 1, "%s (0 or 1)", key);
    if (st == GS_OK) {
        v = ld->tok[i + 1][0] == '1';
        *out = (uint8_t)v;
    }
    return st;
}

/* A list "a,b,c" or "-" of indices below limit, appended to *buf. */
static gs_status load_list(loader *ld, size_t i, const char *what, uint32_t limit, uint32_t **buf, size_t *n,
                           size_t *cap, uint16_t *count)
{
    const char *s = i < ld->ntok ? ld->tok[i] : NULL;
    if (s && strcmp(s, "-") == 0) {
        *count = 0;
        return GS_OK;
    }
    if (!s || !*s)
        return load_fail(ld, i, "the %s list (comma-separated indices, or '-')", what);
    size_t start = *n;
    const char *p = s;
    for (;;) {
        uint64_t v = 0;
        const char *q = p;
        while (*q >= '0' && *q <= '9' && v <= UINT32_MAX)
            v = v * 10 + (uint64_t)(*q++ - '0');
        if (q == p || (*q != ',' && *q != '\0') || (p[0] == '0' && q - p > 1))
            return load_fail(ld, i, "the %s list (comma-separated indices, or '-')", what);
        if (v >= limit)
            return load_fail(ld, i, "%s indices below %" PRIu32 " (found %" PRIu64 ")", what, limit, v);
        if (*n - start >= UINT16_MAX)
            return load_fail(ld, i, "at most %u %s", (unsigned)UINT16_MAX, what);
        if (grow((void **)buf, cap, *n + 1, sizeof **buf) != 0)
            return gs_error_set(ld->err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld->path, ld->lineno);
        (*buf)[(*n)++] = (uint32_t)v;
        if (*q == '\0')
            break;
        p = q + 1;
    }
    *count = (uint16_t)(*n - start);
    return GS_OK;
}

static gs_status load_tensor(loader *ld, gs_rank_events *r, size_t idx)
{
    gs_tensor t;
    memset(&t, 0, sizeof t);
    uint64_t v;
    int k;
    gs_status st;
    if ((st = load_word(ld, 0, "t")) != GS_OK)
        return st;
    if ((st = load_u64(ld, 1, "the tensor index", UINT64_MAX, &v)) != GS_OK)
        return st;
    if (v != idx)
        return load_fail(ld, 1, "tensor index %zu", idx);
    if ((st = load_word(ld, 2, "kind")) != GS_OK ||
        (st = load_name(ld, 3, "a tensor kind", tensor_kind_names, GS_T_KIND_COUNT, &k)) != GS_OK)
        return st;
    t.kind = (uint8_t)k;
    if ((st = load_kv_u64(ld, 4, "bytes", UINT64_MAX, &t.bytes)) != GS_OK || (st = load_word(ld, 6, "layer")) != GS_OK ||
        (st = load_layer(ld, 7, &t.layer)) != GS_OK || (st = load_kv_u32(ld, 8, "mb", &t.mb)) != GS_OK ||
        (st = load_kv_u32(ld, 10, "unit", &t.unit)) != GS_OK || (st = load_flag(ld, 12, "resident", &t.resident)) != GS_OK ||
        (st = load_flag(ld, 14, "host", &t.on_host)) != GS_OK || (st = load_end_of_line(ld, 16)) != GS_OK)
        return st;
    if (gs_rank_add_tensor(r, &t, NULL) != GS_OK)
        return gs_error_set(ld->err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld->path, ld->lineno);
    return GS_OK;
}

typedef struct list_scratch {
    uint32_t *buf;
    size_t n, cap;
} list_scratch;

static gs_status load_event(loader *ld, gs_rank_events *r, size_t idx, size_t nevents, list_scratch *ls)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    uint64_t v;
    int k;
    gs_status st;
    if ((st = load_word(ld, 0, "e")) != GS_OK || (st = load_u64(ld, 1, "the event index", UINT64_MAX, &v)) != GS_OK)
        return st;
    if (v != idx)
        return load_fail(ld, 1, "event index %zu", idx);
    if ((st = load_name(ld, 2, "an event kind", event_kind_names, GS_EV_KIND_COUNT, &k)) != GS_OK)
        return st;
    e.kind = (uint8_t)k;
    if ((st = load_word(ld, 3, "stream")) != GS_OK ||
        (st = load_name(ld, 4, "a stream", stream_names, GS_STREAM_COUNT, &k)) != GS_OK)
        return st;
    e.stream = (uint8_t)k;
    if ((st = load_word(ld, 5, "phase")) != GS_OK ||
        (st = load_name(ld, 6, "a phase", phase_names, GS_PHASE_COUNT, &k)) != GS_OK)
        return st;
    e.phase = (uint8_t)k;
    if ((st = load_word(ld, 7, "op")) != GS_OK)
        return st;
    if (e.kind == GS_EV_COMPUTE)
        st = load_name(ld, 8, "a compute op", op_names, GS_OP_COUNT, &k), e.op = (uint8_t)k;
    else if (e.kind == GS_EV_COLLECTIVE)
        st = load_name(ld, 8, "a collective", coll_names, GS_COLL_COUNT, &k), e.op = (uint8_t)k;
    else
        st = load_small(ld, 8, "op", &e.op);
    if (st != GS_OK || (st = load_word(ld, 9, "group")) != GS_OK)
        return st;
    if (e.kind == GS_EV_COLLECTIVE)
        st = load_name(ld, 10, "a group kind", group_names, GS_GROUP_KIND_COUNT, &k), e.group = (uint8_t)k;
    else
        st = load_small(ld, 10, "group", &e.group);
    if (st != GS_OK || (st = load_kv_u64(ld, 11, "chunk", 255, &v)) != GS_OK)
        return st;
    e.chunk = (uint8_t)v;
    if ((st = load_word(ld, 13, "layer")) != GS_OK || (st = load_layer(ld, 14, &e.layer)) != GS_OK ||
        (st = load_kv_u32(ld, 15, "mb", &e.mb)) != GS_OK || (st = load_kv_u32(ld, 17, "unit", &e.unit)) != GS_OK ||
        (st = load_word(ld, 19, "gemm")) != GS_OK || (st = load_u64(ld, 20, "gemm m", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_m = (uint32_t)v;
    if ((st = load_u64(ld, 21, "gemm n", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_n = (uint32_t)v;
    if ((st = load_u64(ld, 22, "gemm k", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_k = (uint32_t)v;
    if ((st = load_u64(ld, 23, "gemm batch", UINT32_MAX, &v)) != GS_OK)
        return st;
    e.gemm_batch = (uint32_t)v;
    if ((st = load_kv_u64(ld, 24, "peer", UINT64_MAX, &e.peer)) != GS_OK ||
        (st = load_kv_u64(ld, 26, "gsize", UINT64_MAX, &e.group_size)) != GS_OK ||
        (st = load_kv_u64(ld, 28, "bytes", UINT64_MAX, &e.bytes)) != GS_OK || (st = load_word(ld, 30, "flops")) != GS_OK)
        return st;
    {
        const char *s = 31 < ld->ntok ? ld->tok[31] : NULL;
        char *end = NULL;
        if (s)
            e.flops = strtod(s, &end);
        if (!s || end == s || *end || !isfinite(e.flops) || e.flops < 0 ||
            !((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] == '0')))
            return load_fail(ld, 31, "a FLOP count (a finite number >= 0)");
    }
    ls->n = 0;
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        size_t at = 32 + 2 * (size_t)w;
        uint32_t limit = w == GS_LINK_DEPS ? (uint32_t)nevents : (uint32_t)r->ntensors;
        if ((st = load_word(ld, at, link_names[w])) != GS_OK ||
            (st = load_list(ld, at + 1, w == GS_LINK_DEPS ? "event" : "tensor", limit, &ls->buf, &ls->n, &ls->cap,
                            &e.nlinks[w])) != GS_OK)
            return st;
    }
    if ((st = load_end_of_line(ld, 42)) != GS_OK)
        return st;
    const uint32_t *lists[GS_LINK_LISTS];
    size_t off = 0;
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        lists[w] = ls->buf ? ls->buf + off : NULL; /* no list read yet: buf is NULL */
        off += e.nlinks[w];
    }
    st = gs_rank_add_event(r, &e, lists, NULL);
    if (st != GS_OK)
        return gs_error_set(ld->err, st, "%s:%zu: cannot store the event (%s)", ld->path, ld->lineno, gs_status_name(st));
    return GS_OK;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

gs_status gs_schedule_load(FILE *f, const char *path, gs_schedule **out, gs_error *err)
{
    loader ld = {.f = f, .path = path ? path : "<schedule>", .err = err};
    gs_schedule *sch = NULL;
    list_scratch ls = {NULL, 0, 0};
    gs_status st;
    uint64_t v, tp, dp, pp, gpn, nranks;
    *out = NULL;
    if ((st = gs_schedule_create(0, &sch)) != GS_OK) {
        st = gs_error_set(err, st, "%s: out of memory", ld.path);
        goto out;
    }
    if ((st = load_next(&ld, "'gridstep-schedule 1'")) != GS_OK || (st = load_word(&ld, 0, "gridstep-schedule")) != GS_OK)
        goto out;
    if (ld.ntok < 2 || strcmp(ld.tok[1], "1") != 0) {
        st = load_fail(&ld, 1, "format version 1");
        goto out;
    }
    if ((st = load_end_of_line(&ld, 2)) != GS_OK)
        goto out;

    if ((st = load_next(&ld, "'scenario NAME'")) != GS_OK || (st = load_word(&ld, 0, "scenario")) != GS_OK)
        goto out;
    if (ld.ntok < 2) {
        st = load_fail(&ld, 1, "the scenario name");
        goto out;
    }
    if (strcmp(ld.tok[1], "-") != 0) {
        size_t k = 0;
        for (const char *p = ld.tok[1]; *p; p++) {
            unsigned c = (unsigned char)*p;
            if (c == '%') {
                int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
                unsigned hv = hi < 0 || lo < 0 ? 0 : (unsigned)(hi * 16 + lo);
                if (hv == 0) {
                    st = load_fail(&ld, 1, "a percent-encoded scenario name (%%XX escapes)");
                    goto out;
                }
                c = hv;
                p += 2;
            }
            if (k + 1 >= sizeof sch->scenario) {
                st = load_fail(&ld, 1, "a scenario name of at most %zu bytes", sizeof sch->scenario - 1);
                goto out;
            }
            sch->scenario[k++] = (char)c;
        }
        sch->scenario[k] = '\0';
    }
    if ((st = load_end_of_line(&ld, 2)) != GS_OK)
        goto out;

    if ((st = load_next(&ld, "'mesh tp T dp D pp P order O gpus_per_node G'")) != GS_OK ||
        (st = load_word(&ld, 0, "mesh")) != GS_OK || (st = load_kv_u64(&ld, 1, "tp", UINT64_MAX, &tp)) != GS_OK ||
        (st = load_kv_u64(&ld, 3, "dp", UINT64_MAX, &dp)) != GS_OK || (st = load_kv_u64(&ld, 5, "pp", UINT64_MAX, &pp)) != GS_OK ||
        (st = load_word(&ld, 7, "order")) != GS_OK)
        goto out;
    gs_dim order[GS_DIM_COUNT];
    if (ld.ntok < 9 || gs_mesh_order_parse(ld.tok[8], order) != 0) {
        st = load_fail(&ld, 8, "a rank order (a permutation like tp-dp-pp)");
        goto out;
    }
    if ((st = load_kv_u64(&ld, 9, "gpus_per_node", UINT64_MAX, &gpn)) != GS_OK || (st = load_end_of_line(&ld, 11)) != GS_OK)
        goto out;
    {
        gs_error merr;
        gs_error_init(&merr);
        if (gs_mesh_init(&sch->mesh, tp, dp, pp, order, gpn, &merr) != GS_OK) {
            st = gs_error_set(err, GS_ERR_INPUT, "%s:%zu: found an impossible mesh, expected a valid one (%s)", ld.path,
                              ld.lineno, merr.msg);
            goto out;
        }
    }
    if ((st = load_next(&ld, "'microbatches M'")) != GS_OK ||
        (st = load_kv_u64(&ld, 0, "microbatches", UINT64_MAX, &sch->microbatches)) != GS_OK ||
        (st = load_end_of_line(&ld, 2)) != GS_OK)
        goto out;
    if ((st = load_next(&ld, "'exact 0' or 'exact 1'")) != GS_OK || (st = load_kv_u64(&ld, 0, "exact", 1, &v)) != GS_OK ||
        (st = load_end_of_line(&ld, 2)) != GS_OK)
        goto out;
    sch->exact = (int)v;
    if ((st = load_next(&ld, "'ranks N'")) != GS_OK ||
        (st = load_kv_u64(&ld, 0, "ranks", sch->mesh.world < UINT32_MAX - 1 ? sch->mesh.world : UINT32_MAX - 1, &nranks)) != GS_OK ||
        (st = load_end_of_line(&ld, 2)) != GS_OK)
        goto out;

    size_t cap_ranks = 0;
    for (uint64_t p = 0; p < nranks; p++) {
        uint64_t nt, ne;
        if (grow((void **)&sch->ranks, &cap_ranks, sch->nranks + 1, sizeof *sch->ranks) != 0) {
            st = gs_error_set(err, GS_ERR_NOMEM, "%s:%zu: out of memory", ld.path, ld.lineno);
            goto out;
        }
        gs_rank_events *r = &sch->ranks[sch->nranks];
        memset(r, 0, sizeof *r);
        sch->nranks++;
        if ((st = load_next(&ld, "'rank R class C stage S tensors T events E'")) != GS_OK ||
            (st = load_kv_u64(&ld, 0, "rank", sch->mesh.world - 1, &r->rank)) != GS_OK ||
            (st = load_kv_u64(&ld, 2, "class", sch->mesh.world, &r->class_size)) != GS_OK ||
            (st = load_kv_u64(&ld, 4, "stage", sch->mesh.size[GS_DIM_PP] - 1, &r->stage)) != GS_OK ||
            (st = load_kv_u64(&ld, 6, "tensors", UINT32_MAX, &nt)) != GS_OK ||
            (st = load_kv_u64(&ld, 8, "events", UINT32_MAX - 1, &ne)) != GS_OK || (st = load_end_of_line(&ld, 10)) != GS_OK)
            goto out;
        for (uint64_t i = 0; i < nt; i++)
            if ((st = load_next(&ld, "a tensor line 't ...'")) != GS_OK || (st = load_tensor(&ld, r, (size_t)i)) != GS_OK)
                goto out;
        for (uint64_t i = 0; i < ne; i++)
            if ((st = load_next(&ld, "an event line 'e ...'")) != GS_OK ||
                (st = load_event(&ld, r, (size_t)i, (size_t)ne, &ls)) != GS_OK)
                goto out;
        gs_rank_finish(r);
    }
    if ((st = load_next(&ld, "'end'")) != GS_OK || (st = load_word(&ld, 0, "end")) != GS_OK ||
        (st = load_end_of_line(&ld, 1)) != GS_OK)
        goto out;
    if (load_line(&ld)) {
        st = load_fail(&ld, 0, "end of file after 'end'");
        goto out;
    }
    *out = sch;
    sch = NULL;
    st = GS_OK;
out:
    free(ld.line);
    free(ls.buf);
    gs_schedule_destroy(sch);
    return st;
}

/* ------------------------------------------------------------------------- JSON dump ---- */

static void out_json_str(writer *o, const char *s, size_t len)
{
    out_char(o, '"');
    for (size_t i = 0; i < len && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out_char(o, '\\');
            out_char(o, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            out_str(o, esc);
        } else {
            out_char(o, (char)c);
        }
    }
    out_char(o, '"');
}

static void out_json_bool(writer *o, int v)
{
    out_str(o, v ? "true" : "false");
}

gs_status gs_schedule_dump_json(const gs_schedule *sch, FILE *f, gs_error *err)
{
    char order[32], nm[GS_EVENT_NAME_BYTES];
    writer *o = malloc(sizeof *o);
    if (!o)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory writing the schedule as JSON");
    o->f = f;
    o->n = 0;
    gs_mesh_order_format(sch->mesh.order, order, sizeof order);
    out_str(o, "{\n  \"format\": \"gridstep-schedule\",\n  \"version\": 1,\n  \"scenario\": ");
    out_json_str(o, sch->scenario, sizeof sch->scenario);
    out_str(o, ",\n  \"mesh\": {\"tp\": ");
    out_u64(o, sch->mesh.size[GS_DIM_TP]);
    out_str(o, ", \"dp\": ");
    out_u64(o, sch->mesh.size[GS_DIM_DP]);
    out_str(o, ", \"pp\": ");
    out_u64(o, sch->mesh.size[GS_DIM_PP]);
    out_str(o, ", \"order\": \"");
    out_str(o, order);
    out_str(o, "\", \"gpus_per_node\": ");
    out_u64(o, sch->mesh.gpus_per_node);
    out_str(o, "},\n  \"microbatches\": ");
    out_u64(o, sch->microbatches);
    out_str(o, ",\n  \"exact\": ");
    out_json_bool(o, sch->exact);
    out_str(o, ",\n  \"ranks\": [");
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        out_str(o, p ? ",\n    {\"rank\": " : "\n    {\"rank\": ");
        out_u64(o, r->rank);
        out_str(o, ", \"class\": ");
        out_u64(o, r->class_size);
        out_str(o, ", \"stage\": ");
        out_u64(o, r->stage);
        out_str(o, ",\n     \"tensors\": [");
        for (size_t i = 0; i < r->ntensors; i++) {
            const gs_tensor *t = &r->tensors[i];
            out_str(o, i ? ",\n      {\"id\": " : "\n      {\"id\": ");
            out_u64(o, i);
            out_str(o, ", \"kind\": \"");
            out_str(o, gs_tensor_kind_name((gs_tensor_kind)t->kind));
            out_str(o, "\", \"bytes\": ");
            out_u64(o, t->bytes);
            out_str(o, ", \"layer\": ");
            out_i64(o, t->layer);
            out_str(o, ", \"mb\": ");
            out_u64(o, t->mb);
            out_str(o, ", \"unit\": ");
            out_u64(o, t->unit);
            out_str(o, ", \"resident\": ");
            out_json_bool(o, t->resident);
            out_str(o, ", \"host\": ");
            out_json_bool(o, t->on_host);
            out_char(o, '}');
        }
        out_str(o, r->ntensors ? "\n     ],\n     \"events\": [" : "],\n     \"events\": [");
        for (size_t i = 0; i < r->nevents; i++) {
            const gs_event *e = &r->events[i];
            gs_event_name(r, e, nm, sizeof nm);
            out_str(o, i ? ",\n      {\"id\": " : "\n      {\"id\": ");
            out_u64(o, i);
            out_str(o, ", \"name\": ");
            out_json_str(o, nm, sizeof nm);
            out_str(o, ", \"kind\": \"");
            out_str(o, gs_event_kind_name((gs_event_kind)e->kind));
            out_str(o, "\", \"stream\": \"");
            out_str(o, gs_stream_name((gs_stream)e->stream));
            out_str(o, "\", \"phase\": \"");
            out_str(o, gs_phase_name((gs_phase)e->phase));
            out_str(o, "\", \"op\": ");
            if (e->kind == GS_EV_COMPUTE || e->kind == GS_EV_COLLECTIVE) {
                out_char(o, '"');
                out_str(o, e->kind == GS_EV_COMPUTE ? gs_op_name((gs_op)e->op) : gs_coll_op_name((gs_coll_op)e->op));
                out_char(o, '"');
            } else {
                out_u64(o, e->op);
            }
            out_str(o, ", \"group\": ");
            if (e->kind == GS_EV_COLLECTIVE) {
                out_char(o, '"');
                out_str(o, gs_group_kind_name((gs_group_kind)e->group));
                out_char(o, '"');
            } else {
                out_u64(o, e->group);
            }
            out_str(o, ", \"chunk\": ");
            out_u64(o, e->chunk);
            out_str(o, ", \"layer\": ");
            out_i64(o, e->layer);
            out_str(o, ", \"mb\": ");
            out_u64(o, e->mb);
            out_str(o, ", \"unit\": ");
            out_u64(o, e->unit);
            out_str(o, ", \"gemm\": [");
            out_u64(o, e->gemm_m);
            out_str(o, ", ");
            out_u64(o, e->gemm_n);
            out_str(o, ", ");
            out_u64(o, e->gemm_k);
            out_str(o, ", ");
            out_u64(o, e->gemm_batch);
            out_str(o, "], \"peer\": ");
            out_u64(o, e->peer);
            out_str(o, ", \"group_size\": ");
            out_u64(o, e->group_size);
            out_str(o, ", \"bytes\": ");
            out_u64(o, e->bytes);
            out_str(o, ", \"flops\": ");
            out_double(o, isfinite(e->flops) ? e->flops : 0.0);
            for (int w = 0; w < GS_LINK_LISTS; w++) {
                out_str(o, ", \"");
                out_str(o, link_names[w]);
                out_str(o, "\": [");
                out_list(o, gs_event_list(r, e, w), e->nlinks[w], 0);
                out_char(o, ']');
            }
            out_char(o, '}');
        }
        out_str(o, r->nevents ? "\n     ]}" : "]}");
    }
    out_str(o, sch->nranks ? "\n  ]\n}\n" : "]\n}\n");
    return out_finish(o, err, "as JSON");
}

/* --------------------------------------------------------------------------- equality ---- */

int gs_schedule_diff(const gs_schedule *a, const gs_schedule *b, char *buf, size_t len)
{
    char dummy[8];
    if (!buf || len == 0) {
        buf = dummy;
        len = sizeof dummy;
    }
    buf[0] = '\0';
#define DIFF(...)                                                                                  \
    do {                                                                                           \
        snprintf(buf, len, __VA_ARGS__);                                                           \
        return 1;                                                                                  \
    } while (0)
    if (strncmp(a->scenario, b->scenario, sizeof a->scenario) != 0)
        DIFF("scenario '%.*s' vs '%.*s'", (int)sizeof a->scenario, a->scenario, (int)sizeof b->scenario, b->scenario);
    for (int d = 0; d < GS_DIM_COUNT; d++) {
        if (a->mesh.size[d] != b->mesh.size[d])
            DIFF("mesh %s %" PRIu64 " vs %" PRIu64, gs_dim_name((gs_dim)d), a->mesh.size[d], b->mesh.size[d]);
        if (a->mesh.order[d] != b->mesh.order[d] || a->mesh.stride[d] != b->mesh.stride[d])
            DIFF("mesh rank order differs");
    }
    if (a->mesh.world != b->mesh.world || a->mesh.gpus_per_node != b->mesh.gpus_per_node)
        DIFF("mesh: %" PRIu64 " GPUs per node vs %" PRIu64, a->mesh.gpus_per_node, b->mesh.gpus_per_node);
    if (a->microbatches != b->microbatches)
        DIFF("micro-batches %" PRIu64 " vs %" PRIu64, a->microbatches, b->microbatches);
    if (a->exact != b->exact)
        DIFF("exact %d vs %d", a->exact, b->exact);
    if (a->nranks != b->nranks)
        DIFF("%zu rank lists vs %zu", a->nranks, b->nranks);
    for (size_t p = 0; p < a->nranks; p++) {
        const gs_rank_events *x = &a->ranks[p], *y = &b->ranks[p];
        if (x->rank != y->rank)
            DIFF("rank list %zu: rank %" PRIu64 " vs %" PRIu64, p, x->rank, y->rank);
        if (x->class_size != y->class_size || x->stage != y->stage)
            DIFF("rank %" PRIu64 ": class %" PRIu64 " stage %" PRIu64 " vs class %" PRIu64 " stage %" PRIu64, x->rank,
                 x->class_size, x->stage, y->class_size, y->stage);
        if (x->ntensors != y->ntensors)
            DIFF("rank %" PRIu64 ": %zu tensors vs %zu", x->rank, x->ntensors, y->ntensors);
        if (x->nevents != y->nevents)
            DIFF("rank %" PRIu64 ": %zu events vs %zu", x->rank, x->nevents, y->nevents);
        for (size_t i = 0; i < x->ntensors; i++) {
            const gs_tensor *s = &x->tensors[i], *t = &y->tensors[i];
            if (s->bytes != t->bytes || s->layer != t->layer || s->mb != t->mb || s->unit != t->unit || s->kind != t->kind ||
                s->resident != t->resident || s->on_host != t->on_host)
                DIFF("rank %" PRIu64 ": tensor %zu differs (%s %" PRIu64 " B layer %" PRId32 " vs %s %" PRIu64
                     " B layer %" PRId32 ")",
                     x->rank, i, gs_tensor_kind_name((gs_tensor_kind)s->kind), s->bytes, s->layer,
                     gs_tensor_kind_name((gs_tensor_kind)t->kind), t->bytes, t->layer);
        }
        for (size_t i = 0; i < x->nevents; i++) {
            const gs_event *s = &x->events[i], *t = &y->events[i];
            char nm[GS_EVENT_NAME_BYTES];
            const char *what = NULL;
            if (s->kind != t->kind || s->stream != t->stream || s->phase != t->phase || s->op != t->op ||
                s->group != t->group || s->chunk != t->chunk)
                what = "kind, stream, phase, op, group or chunk";
            else if (s->layer != t->layer || s->mb != t->mb || s->unit != t->unit)
                what = "layer, micro-batch or unit";
            else if (s->gemm_m != t->gemm_m || s->gemm_n != t->gemm_n || s->gemm_k != t->gemm_k ||
                     s->gemm_batch != t->gemm_batch)
                what = "GEMM shape";
            else if (s->peer != t->peer || s->group_size != t->group_size)
                what = "peer or group";
            else if (s->bytes != t->bytes)
                what = "bytes";
            else if (memcmp(&s->flops, &t->flops, sizeof s->flops) != 0)
                what = "FLOPs";
            for (int w = 0; w < GS_LINK_LISTS && !what; w++) {
                if (s->nlinks[w] != t->nlinks[w] ||
                    memcmp(gs_event_list(x, s, w), gs_event_list(y, t, w), s->nlinks[w] * sizeof(uint32_t)) != 0)
                    what = link_names[w];
            }
            if (what)
                DIFF("rank %" PRIu64 ": event %zu (%s): %s differ", x->rank, i, EV_NAME(x, i, nm), what);
        }
    }
#undef DIFF
    return 0;
}

int gs_schedule_equal(const gs_schedule *a, const gs_schedule *b)
{
    return gs_schedule_diff(a, b, NULL, 0) == 0;
}
