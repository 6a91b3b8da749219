/* The schedule's storage, names, byte counts, process groups and equality. Its structural
 * validation is engine/schedule_validate.c (with engine/schedule_hazard.c), its text dump and
 * loader engine/schedule_text.c, its JSON dump engine/schedule_json.c; the builders that fill it
 * live in engine/build*.c. The text format (the dump writes it, the loader reads it):
 *
 * Text format (version 2), one record per line, single spaces, every field always written in
 * this order so that dump(load(dump(x))) is byte-identical to dump(x):
 *
 *   gridstep-schedule 2
 *   scenario NAME                      NAME percent-encoded (bytes <= ' ', '%', >= 0x7f), "-" if empty
 *   mesh tp T dp D pp P order tp-dp-pp gpus_per_node G [stage_layers F L] [account E L]
 *                                      [cp C]; account: 1 where the embedding / loss count as a layer;
 *                                      with cp: the order names it (tp-cp-dp-pp) and D is dp x cp
 *   microbatches M
 *   exact 0|1
 *   ranks N
 *   rank R class C stage S tensors NT events NE        then NT tensor lines, NE event lines
 *   t I kind K bytes B layer L mb M unit U resident 0|1 host 0|1
 *   e I KIND stream S phase P role R part N op O group G chunk C layer L mb M unit U gemm m n k b
 *     peer P gsize N bytes B flops F deps LIST reads LIST writes LIST allocs LIST frees LIST
 *     [net X]
 *   ...                                (the next rank header, ...)
 *   end
 *
 * (an `e` record is one line). I counts from 0 within the rank and must be sequential.
 * K: gs_tensor_kind_name; KIND: gs_event_kind_name; S: gs_stream_name; P: gs_phase_name.
 * R: gs_role_name ("none" loads; validation refuses it); N: the event's part (0: whole).
 * Version 1 (before events carried roles) is refused with a message saying so: a role cannot be
 * recovered from the other fields without guessing from the event's place in its list.
 * O: gs_op_name for compute, gs_coll_op_name for collectives, else a number ("-" for 0).
 * G: gs_group_kind_name for collectives, else a number ("-" for 0).
 * L: a layer index >= 0, or "emb", "head", "none" (GS_LAYER_EMBED / HEAD / NONE).
 * F: FLOPs printed with "%.17g" (round-trips bit for bit); finite, not negative.
 * net X: only on a flex dispatcher's all-to-all (gs_event.net_share > 0): the share of its bytes
 * that leaves the node, in (0, 1], printed with "%.9g" (a float's round trip).
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

#include "engine/roles.h"
#include "engine/schedule_internal.h"

/* ------------------------------------------------------------------------ name tables ---- */

const char *const gs__event_kind_names[GS_EV_KIND_COUNT] = {"compute", "collective", "send",
                                                               "recv",    "h2d",        "d2h"};
const char *const gs__stream_names[GS_STREAM_COUNT] = {"compute", "dp", "tp", "pp", "copy"};
const char *const gs__phase_names[GS_PHASE_COUNT] = {"fwd", "bwd", "recompute", "optim"};
const char *const gs__op_names[GS_OP_COUNT] = {"embed",  "norm",     "qkv",  "attn",
                                                  "oproj",  "mlp_up",   "act",  "mlp_down",
                                                  "head",   "loss",     "optimizer", "copy"};
const char *const gs__coll_names[GS_COLL_COUNT] = {"all_gather", "reduce_scatter", "all_reduce",
                                                      "broadcast", "all_to_all"};
const char *const gs__coll_short[GS_COLL_COUNT] = {"ag", "rs", "ar", "bcast", "a2a"};
const char *const gs__group_names[GS_GROUP_KIND_COUNT] = {"dp", "dp_intra", "dp_inter", "tp", "pp", "cp",
                                                                  "ep", "edp", "etp", "tpep", "cp_a2a", "cp_p2p",
                                                                  "stage"};
const char *const gs__tensor_kind_names[GS_T_KIND_COUNT] = {
    "param_shard", "param_full", "grad",    "grad_shard", "activation",
    "boundary",    "master",     "opt_state", "workspace", "scratch"};
const char *const gs__link_names[GS_LINK_LISTS] = {"deps", "reads", "writes", "allocs", "frees"};

const char *gs_event_kind_name(gs_event_kind k)
{
    return (unsigned)k < GS_EV_KIND_COUNT ? gs__event_kind_names[k] : "?";
}

const char *gs_stream_name(gs_stream s)
{
    return (unsigned)s < GS_STREAM_COUNT ? gs__stream_names[s] : "?";
}

const char *gs_phase_name(gs_phase p)
{
    return (unsigned)p < GS_PHASE_COUNT ? gs__phase_names[p] : "?";
}

const char *gs_op_name(gs_op o)
{
    return (unsigned)o < GS_OP_COUNT ? gs__op_names[o] : "?";
}

const char *gs_coll_op_name(gs_coll_op c)
{
    return (unsigned)c < GS_COLL_COUNT ? gs__coll_names[c] : "?";
}

const char *gs_group_kind_name(gs_group_kind g)
{
    return (unsigned)g < GS_GROUP_KIND_COUNT ? gs__group_names[g] : "?";
}

const char *gs_tensor_kind_name(gs_tensor_kind k)
{
    return (unsigned)k < GS_T_KIND_COUNT ? gs__tensor_kind_names[k] : "?";
}

/* ---------------------------------------------------------------------------- storage ---- */

/* Grows *p (cap elements of elem bytes) to hold at least need, doubling. 0 ok, -1 no memory. */
int gs__grow(void **p, size_t *cap, size_t need, size_t elem)
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
    if (gs__grow((void **)&r->tensors, &r->cap_tensors, r->ntensors + 1, sizeof *r->tensors) != 0)
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
    if (gs__grow((void **)&r->events, &r->cap_events, events, sizeof *r->events) != 0 ||
        gs__grow((void **)&r->pool, &r->cap_pool, pool, sizeof *r->pool) != 0 ||
        gs__grow((void **)&r->tensors, &r->cap_tensors, tensors, sizeof *r->tensors) != 0)
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
    if (gs__grow((void **)&r->events, &r->cap_events, r->nevents + 1, sizeof *r->events) != 0 ||
        gs__grow((void **)&r->pool, &r->cap_pool, r->npool + total, sizeof *r->pool) != 0 ||
        (!r->unnamed && (gs__grow((void **)&r->dups, &r->cap_dups, 2 * (r->ndups + 1), sizeof *r->dups) != 0 ||
                         name_hash_reserve(r, r->nevents) != 0)))
        return GS_ERR_NOMEM;

    gs_event e = *ev;
    e.links = (uint32_t)r->npool;
    uint32_t *dst = total ? r->pool + r->npool : NULL; /* no pool yet when nothing links (UBSan) */
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
void gs__append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
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
            gs__append(buf, len, &pos, "emb");
        else if (k.layer == GS_LAYER_HEAD)
            gs__append(buf, len, &pos, "head");
        else
            gs__append(buf, len, &pos, "L%" PRId32, k.layer);
        sep = ".";
    } else if (k.flags & NK_UNIT) {
        gs__append(buf, len, &pos, "unit%" PRIu32, k.unit);
        sep = ".";
    }
    if (k.flags & NK_MB) {
        gs__append(buf, len, &pos, "%smb%" PRIu32, sep, k.mb);
        sep = ".";
    }
    if (k.flags & NK_CHUNK) {
        gs__append(buf, len, &pos, "%sc%" PRIu32, sep, k.chunk);
        sep = ".";
    }
    if (k.phase < GS_PHASE_COUNT)
        gs__append(buf, len, &pos, "%s%s", sep, gs__phase_names[k.phase]);
    else
        gs__append(buf, len, &pos, "%sphase%u", sep, (unsigned)k.phase);
    switch (k.kind) {
    case GS_EV_COMPUTE:
        if (k.flags & NK_WORD) {
            if (k.word < GS_OP_COUNT)
                gs__append(buf, len, &pos, ".%s", gs__op_names[k.word]);
            else
                gs__append(buf, len, &pos, ".op%u", (unsigned)k.word);
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
        case GS_GROUP_CP: prefix = "cp_"; break;
        case GS_GROUP_EP: prefix = "ep_"; break;
        case GS_GROUP_EDP: prefix = "edp_"; break;
        case GS_GROUP_ETP: prefix = "etp_"; break;
        case GS_GROUP_TPEP: prefix = "tpep_"; break;
        case GS_GROUP_CP_A2A: prefix = "cpa2a_"; break;
        case GS_GROUP_CP_P2P: prefix = "cpp2p_"; break;
        case GS_GROUP_STAGE: prefix = "stage_"; break;
        default:
            snprintf(gbuf, sizeof gbuf, "g%u_", (unsigned)k.group);
            prefix = gbuf;
        }
        if (k.word < GS_COLL_COUNT)
            gs__append(buf, len, &pos, ".%s%s", prefix, gs__coll_short[k.word]);
        else
            gs__append(buf, len, &pos, ".%scoll%u", prefix, (unsigned)k.word);
        break;
    }
    case GS_EV_SEND: gs__append(buf, len, &pos, ".send"); break;
    case GS_EV_RECV: gs__append(buf, len, &pos, ".recv"); break;
    case GS_EV_COPY_H2D: gs__append(buf, len, &pos, ".h2d"); break;
    case GS_EV_COPY_D2H: gs__append(buf, len, &pos, ".d2h"); break;
    default: gs__append(buf, len, &pos, ".kind%u", (unsigned)k.kind); break;
    }
    if (r && e >= r->events && e < r->events + r->nevents) {
        uint32_t n = name_ordinal(r, (uint32_t)(e - r->events));
        if (n > 1)
            gs__append(buf, len, &pos, "#%" PRIu32, n);
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
        if (r->tensors[i].resident && !r->tensors[i].on_host && r->tensors[i].kind != GS_T_SCRATCH)
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

const char *gs__layer_word(int32_t layer, char *buf, size_t len)
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
    if (a->mesh.cp != b->mesh.cp || a->mesh.cp_outer != b->mesh.cp_outer)
        DIFF("mesh cp %" PRIu64 " vs %" PRIu64, a->mesh.cp, b->mesh.cp);
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
            else if (s->role != t->role || s->part != t->part)
                what = "role or part";
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
            else if (memcmp(&s->net_share, &t->net_share, sizeof s->net_share) != 0)
                what = "network share";
            for (int w = 0; w < GS_LINK_LISTS && !what; w++) {
                if (s->nlinks[w] != t->nlinks[w] ||
                    memcmp(gs_event_list(x, s, w), gs_event_list(y, t, w), s->nlinks[w] * sizeof(uint32_t)) != 0)
                    what = gs__link_names[w];
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

