/* The DP x PP x TP device grid: rank <-> coordinates, groups, node placement and checks, all in
 * O(1) per query from the three degrees and the rank order (no per-rank arrays).
 *
 * Rank layout. The order lists the dimensions fastest-varying first, so with order {a, b, c}
 *     rank = c_a + size_a * (c_b + size_b * c_c),
 * i.e. stride[a] = 1, stride[b] = size_a, stride[c] = size_a * size_b. Megatron-LM's default
 * "tp-dp-pp" gives rank = tp + TP * (dp + DP * pp); "tp-pp-dp" (Megatron's
 * --use-tp-pp-dp-mapping, and the seed's section 4.2 table) gives rank = tp + TP * (pp + PP * dp).
 * Placement: node = rank / gpus_per_node (ranks fill nodes in order, as torchrun assigns them).
 *
 * Group numbering. The group along d that holds a rank is identified by the rank's other two
 * coordinates; its number enumerates them in the mesh order, the faster of the two varying
 * fastest. Equivalently it is the rank with digit d deleted:
 *     g = rank % stride[d] + stride[d] * (rank / (stride[d] * size[d])).
 * Group numbers therefore increase with each group's lowest rank; for "tp-dp-pp" the TP groups
 * are numbered dp + DP * pp, as Megatron builds them. Members are listed in ascending
 * coordinate (and rank) order: first + i * stride[d]. */
#include "engine/mesh.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Node-crossing search: at most this many distinct group blocks are examined (see
 * gs_mesh_dim_crosses_nodes); beyond it a closed form decides. Only matters for nodes of more
 * than 2^22 GPUs, which no cluster has. */
#define GS_MESH_CROSS_SEARCH_LIMIT ((uint64_t)1 << 22)

/* Longest message line built by the checks, bytes. */
#define GS_MESH_LINE_BYTES 512

static const char *const gs_dim_names[GS_DIM_COUNT] = {"tp", "dp", "pp"};

static uint64_t gs__mesh_group_index(const gs_mesh *m, gs_dim d, uint64_t rank);

const char *gs_dim_name(gs_dim d)
{
    if ((unsigned)d >= GS_DIM_COUNT)
        return "?";
    return gs_dim_names[d];
}

static int gs__mesh_order_valid(const gs_dim order[GS_DIM_COUNT])
{
    int seen[GS_DIM_COUNT] = {0, 0, 0};
    for (int i = 0; i < GS_DIM_COUNT; i++) {
        if ((unsigned)order[i] >= GS_DIM_COUNT || seen[order[i]])
            return 0;
        seen[order[i]] = 1;
    }
    return 1;
}

int gs_mesh_order_parse(const char *s, gs_dim order[GS_DIM_COUNT])
{
    gs_dim parsed[GS_DIM_COUNT];
    if (!s)
        return -1;
    const char *p = s;
    for (int i = 0; i < GS_DIM_COUNT; i++) {
        int found = -1;
        for (int d = 0; d < GS_DIM_COUNT; d++) {
            if (strncasecmp(p, gs_dim_names[d], 2) == 0) { /* TP-DP-PP as precision's BF16 */
                found = d;
                break;
            }
        }
        if (found < 0)
            return -1;
        parsed[i] = (gs_dim)found;
        p += 2;
        if (i < GS_DIM_COUNT - 1) {
            if (*p != '-')
                return -1;
            p++;
        }
    }
    if (*p != '\0' || !gs__mesh_order_valid(parsed))
        return -1;
    memcpy(order, parsed, sizeof parsed);
    return 0;
}

void gs_mesh_order_format(const gs_dim order[GS_DIM_COUNT], char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    snprintf(buf, len, "%s-%s-%s", gs_dim_name(order[0]), gs_dim_name(order[1]),
             gs_dim_name(order[2]));
}

gs_status gs_mesh_init(gs_mesh *m, uint64_t tp, uint64_t dp, uint64_t pp,
                       const gs_dim order[GS_DIM_COUNT], uint64_t gpus_per_node, gs_error *err)
{
    static const gs_dim megatron_default[GS_DIM_COUNT] = {GS_DIM_TP, GS_DIM_DP, GS_DIM_PP};
    gs_mesh built;
    uint64_t tp_dp = 0;

    if (!order)
        order = megatron_default;
    if (tp == 0 || dp == 0 || pp == 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "grid degrees must be positive: dp=%llu, pp=%llu, tp=%llu",
                            (unsigned long long)dp, (unsigned long long)pp,
                            (unsigned long long)tp);
    if (gpus_per_node == 0)
        return gs_error_set(err, GS_ERR_INPUT, "gpus_per_node must be positive, got 0");
    if (!gs__mesh_order_valid(order))
        return gs_error_set(err, GS_ERR_INPUT,
                            "grid order must be a permutation of tp, dp and pp (e.g. tp-dp-pp)");

    built.size[GS_DIM_TP] = tp;
    built.size[GS_DIM_DP] = dp;
    built.size[GS_DIM_PP] = pp;
    if (gs_mul_u64(tp, dp, &tp_dp) != 0 || gs_mul_u64(tp_dp, pp, &built.world) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "grid dp=%llu x pp=%llu x tp=%llu: the rank count overflows 64 bits",
                            (unsigned long long)dp, (unsigned long long)pp,
                            (unsigned long long)tp);
    /* Strides cannot overflow: each is a partial product of the world size. */
    uint64_t stride = 1;
    for (int i = 0; i < GS_DIM_COUNT; i++) {
        built.order[i] = order[i];
        built.stride[order[i]] = stride;
        stride *= built.size[order[i]];
    }
    built.gpus_per_node = gpus_per_node;
    built.first_layers = built.last_layers = 0;
    built.account_embedding = built.account_loss = 0;
    memset(&built.layout, 0, sizeof built.layout);
    built.cp = 1;
    built.cp_outer = 0;
    built.cp_a2a = 0;
    built.ep = 1;
    built.etp = 0;
    built.mtp_layers = 0;
    *m = built;
    return GS_OK;
}

int gs_mesh_order_parse_cp(const char *s, gs_dim order[GS_DIM_COUNT], int *has_cp, int *cp_outer)
{
    char plain[16];
    const char *cp = NULL;
    for (const char *q = s; q && q[0] && !cp; q++)
        if (strncasecmp(q, "cp", 2) == 0)
            cp = q;
    *has_cp = 0;
    *cp_outer = 0;
    if (!cp)
        return gs_mesh_order_parse(s, order);
    /* drop "cp" and one of the dashes beside it, then parse the three others */
    size_t at = (size_t)(cp - s), n = strlen(s);
    if (n >= sizeof plain || n != 11 || at % 3 != 0)
        return -1;
    size_t cut = at == 9 ? at - 1 : at; /* the last name: drop the dash before it */
    memcpy(plain, s, cut);
    memcpy(plain + cut, s + cut + 3, n - cut - 3 + 1);
    if (gs_mesh_order_parse(plain, order) != 0)
        return -1;
    /* cp must sit next to dp: the name before or after it */
    int before = at >= 3 && strncasecmp(s + at - 3, "dp", 2) == 0;
    int after = at + 3 < n && strncasecmp(s + at + 3, "dp", 2) == 0;
    if (!before && !after)
        return -2;
    *has_cp = 1;
    *cp_outer = before; /* dp faster than cp: cp ranks dp positions apart */
    return 0;
}

void gs_mesh_order_format_cp(const gs_dim order[GS_DIM_COUNT], int with_cp, int cp_outer, char *buf, size_t len)
{
    if (!with_cp) {
        gs_mesh_order_format(order, buf, len);
        return;
    }
    size_t used = 0;
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < GS_DIM_COUNT && used < len; i++) {
        const char *name = gs_dim_name(order[i]);
        int w;
        if (order[i] == GS_DIM_DP)
            w = snprintf(buf + used, len - used, "%s%s-%s", i ? "-" : "", cp_outer ? "dp" : "cp", cp_outer ? "cp" : "dp");
        else
            w = snprintf(buf + used, len - used, "%s%s", i ? "-" : "", name);
        if (w < 0)
            return;
        used += (size_t)w;
    }
}

gs_status gs_mesh_set_cp(gs_mesh *m, uint64_t cp, int cp_outer, gs_error *err)
{
    if (cp == 0 || m->size[GS_DIM_DP] % cp != 0)
        return gs_error_set(err, GS_ERR_INPUT, "context parallelism cp=%llu must divide the data-parallel ranks (%llu)",
                            (unsigned long long)cp, (unsigned long long)m->size[GS_DIM_DP]);
    m->cp = cp;
    m->cp_outer = cp_outer ? 1 : 0;
    m->cp_a2a = 0;
    return GS_OK;
}

void gs_mesh_grid_text(const gs_mesh *m, char *buf, size_t len)
{
    int n;
    if (m->cp > 1 && m->cp_a2a > 1)
        n = snprintf(buf, len, "dp=%" PRIu64 " x cp=%" PRIu64 " (a2a %" PRIu64 " x p2p %" PRIu64 ") x pp=%" PRIu64
                     " x tp=%" PRIu64, gs_mesh_dp_replicas(m), m->cp, m->cp_a2a, m->cp / m->cp_a2a,
                     m->size[GS_DIM_PP], m->size[GS_DIM_TP]);
    else if (m->cp > 1)
        n = snprintf(buf, len, "dp=%" PRIu64 " x cp=%" PRIu64 " x pp=%" PRIu64 " x tp=%" PRIu64, gs_mesh_dp_replicas(m),
                     m->cp, m->size[GS_DIM_PP], m->size[GS_DIM_TP]);
    else
        n = snprintf(buf, len, GS_GRID_FMT, m->size[GS_DIM_DP], m->size[GS_DIM_PP], m->size[GS_DIM_TP]);
    if (m->ep > 1 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", ep=%" PRIu64, m->ep);
    if (m->etp && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", etp=%" PRIu64, m->etp);
}

uint64_t gs_mesh_dp_replicas(const gs_mesh *m)
{
    return m->cp > 1 ? m->size[GS_DIM_DP] / m->cp : m->size[GS_DIM_DP];
}

uint64_t gs_mesh_cp_first(const gs_mesh *m, uint64_t rank, uint64_t *stride)
{
    uint64_t cp = m->cp ? m->cp : 1, reps = m->size[GS_DIM_DP] / cp, sd = m->stride[GS_DIM_DP];
    uint64_t step = m->cp_outer ? reps * sd : sd;
    if (stride)
        *stride = step;
    return rank - ((rank / step) % cp) * step; /* the rank's cp index: (rank / step) % cp */
}

uint64_t gs_mesh_cp_group(const gs_mesh *m, uint64_t rank, uint64_t *out, uint64_t *stride)
{
    uint64_t cp = m->cp ? m->cp : 1, reps = m->size[GS_DIM_DP] / cp, sd = m->stride[GS_DIM_DP], step;
    uint64_t pos = (rank / sd) % m->size[GS_DIM_DP], rep = m->cp_outer ? pos % reps : pos / cp;
    uint64_t first = gs_mesh_cp_first(m, rank, &step);
    for (uint64_t i = 0; out && i < cp; i++)
        out[i] = first + i * step;
    if (stride)
        *stride = step;
    return gs__mesh_group_index(m, GS_DIM_DP, rank) * reps + rep;
}

void gs_mesh_set_stage_layers(gs_mesh *m, uint64_t first, uint64_t last)
{
    m->first_layers = first;
    m->last_layers = last;
}

void gs_mesh_set_split_accounting(gs_mesh *m, int embedding, int loss)
{
    m->account_embedding = embedding != 0;
    m->account_loss = loss != 0;
}

void gs_mesh_set_layout(gs_mesh *m, const gs_layout *layout)
{
    if (layout)
        m->layout = *layout;
    else
        memset(&m->layout, 0, sizeof m->layout);
}

void gs_mesh_rank_coords(const gs_mesh *m, uint64_t rank, uint64_t coords[GS_DIM_COUNT])
{
    for (int d = 0; d < GS_DIM_COUNT; d++)
        coords[d] = (rank / m->stride[d]) % m->size[d];
}

uint64_t gs_mesh_coords_rank(const gs_mesh *m, const uint64_t coords[GS_DIM_COUNT])
{
    uint64_t rank = 0;
    for (int d = 0; d < GS_DIM_COUNT; d++)
        rank += coords[d] * m->stride[d];
    return rank;
}

uint64_t gs_mesh_rank_node(const gs_mesh *m, uint64_t rank)
{
    return rank / m->gpus_per_node;
}

uint64_t gs_mesh_nodes(const gs_mesh *m)
{
    return m->world / m->gpus_per_node + (m->world % m->gpus_per_node != 0);
}

/* Ranks covered by one block of groups along d: stride[d] groups interleaved, size[d] deep. */
static uint64_t gs__mesh_block(const gs_mesh *m, gs_dim d)
{
    return m->stride[d] * m->size[d];
}

static uint64_t gs__mesh_group_index(const gs_mesh *m, gs_dim d, uint64_t rank)
{
    return rank % m->stride[d] + m->stride[d] * (rank / gs__mesh_block(m, d));
}

uint64_t gs_mesh_group_first(const gs_mesh *m, gs_dim d, uint64_t g)
{
    return g % m->stride[d] + (g / m->stride[d]) * gs__mesh_block(m, d);
}

void gs_mesh_group_members(const gs_mesh *m, gs_dim d, uint64_t g, uint64_t *out)
{
    uint64_t first = gs_mesh_group_first(m, d, g);
    for (uint64_t i = 0; i < m->size[d]; i++)
        out[i] = first + i * m->stride[d];
}

uint64_t gs_mesh_group(const gs_mesh *m, gs_dim d, uint64_t rank, uint64_t *out)
{
    uint64_t g = gs__mesh_group_index(m, d, rank);
    if (out)
        gs_mesh_group_members(m, d, g, out);
    return g;
}

uint64_t gs_mesh_group_count(const gs_mesh *m, gs_dim d)
{
    return m->world / m->size[d];
}

/* Members form an arithmetic progression first, first + s, ..., last with node = r / G
 * non-decreasing along it. When s >= G every member is on its own node; when s < G a step
 * advances the node by at most one, so every node between the first and the last is hit. */
uint64_t gs_mesh_group_nodes(const gs_mesh *m, gs_dim d, uint64_t rank)
{
    uint64_t g = gs__mesh_group_index(m, d, rank);
    uint64_t first = gs_mesh_group_first(m, d, g);
    uint64_t s = m->stride[d];
    uint64_t last = first + (m->size[d] - 1) * s;
    if (s >= m->gpus_per_node)
        return m->size[d];
    return gs_mesh_rank_node(m, last) - gs_mesh_rank_node(m, first) + 1;
}

/* Members on rank's node [lo, lo + G): indices i with lo <= first + i*s <= hi, where hi is the
 * node's last rank clipped to the group's last member (computed without overflowing). */
uint64_t gs_mesh_group_local_size(const gs_mesh *m, gs_dim d, uint64_t rank)
{
    uint64_t g = gs__mesh_group_index(m, d, rank);
    uint64_t first = gs_mesh_group_first(m, d, g);
    uint64_t s = m->stride[d];
    uint64_t last = first + (m->size[d] - 1) * s;
    uint64_t G = m->gpus_per_node;
    uint64_t lo = (rank / G) * G;
    uint64_t hi = (last - lo <= G - 1) ? last : lo + (G - 1);
    uint64_t i_lo = lo <= first ? 0 : (lo - first + s - 1) / s;
    uint64_t i_hi = (hi - first) / s; /* hi >= rank >= first */
    return i_hi - i_lo + 1;
}

static uint64_t gs__gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Groups along d start at f = a + b*S (a < s = stride[d], b < B = world / S, S = s * size[d])
 * and end at f + span, span = (size[d]-1) * s = S - s. Group (a, b) crosses a node boundary
 * iff (f mod G) + span >= G. For a fixed block b with x = b*S mod G, some a < s crosses iff
 * x > G - S (the smallest such a is max(0, G - x - span)). So a crossing exists iff S > G, or
 * some block's residue x = b*S mod G exceeds G - S. The residues repeat with period
 * P = G / gcd(S, G) and over a full period are exactly the multiples of gcd(S, G), the largest
 * being G - gcd(S, G): when B >= P a crossing exists iff S does not divide G. The code walks
 * the first min(B, P) residues (P <= G: a handful of steps for real node sizes), which is exact;
 * only when both B and P exceed GS_MESH_CROSS_SEARCH_LIMIT (nodes of millions of GPUs) does it
 * stop early and answer with the full-period closed form, which is exact when B >= P and may
 * otherwise report a crossing that the actual (shorter) range of blocks avoids. With tp
 * fastest (s = 1, S = tp) on whole nodes this is the familiar test gpus_per_node % tp != 0.
 * The example is the lowest-numbered crossing group (lowest block b, then lowest a), so
 * messages name the first offender. */
int gs_mesh_dim_crosses_nodes(const gs_mesh *m, gs_dim d, uint64_t *example_rank)
{
    uint64_t s = m->stride[d];
    uint64_t S = gs__mesh_block(m, d);
    uint64_t G = m->gpus_per_node;
    uint64_t blocks = m->world / S;

    if (example_rank)
        *example_rank = UINT64_MAX;
    if (m->size[d] <= 1)
        return 0;
    uint64_t span = S - s; /* last member minus first member of any group */
    uint64_t period = S > G ? 1 : G / gs__gcd_u64(S, G);
    uint64_t walk = blocks < period ? blocks : period;
    if (walk > GS_MESH_CROSS_SEARCH_LIMIT)
        walk = GS_MESH_CROSS_SEARCH_LIMIT;
    uint64_t step = S % G;
    uint64_t x = 0; /* b*S mod G */
    for (uint64_t b = 0; b < walk; b++) {
        if (S > G || x > G - S) {
            /* The smallest a that crosses: x + a + span >= G, and x + a stays below G. */
            if (example_rank) {
                uint64_t need = G - x; /* >= 1 */
                uint64_t a = span >= need ? 0 : need - span;
                *example_rank = b * S + a;
            }
            return 1;
        }
        x = (x >= G - step) ? x - (G - step) : x + step;
    }
    if (walk == blocks || walk == period)
        return 0; /* every distinct residue was examined */
    return G % S != 0;
}

/* Writes a group's members compactly: "6-8" when contiguous, "0, 16, 32" when short,
 * "0, 16, ..., 496" otherwise. */
static void gs__mesh_format_members(const gs_mesh *m, gs_dim d, uint64_t g, char *buf,
                                    size_t len)
{
    uint64_t first = gs_mesh_group_first(m, d, g);
    uint64_t s = m->stride[d];
    uint64_t n = m->size[d];
    uint64_t last = first + (n - 1) * s;
    if (n == 1) {
        snprintf(buf, len, "%llu", (unsigned long long)first);
    } else if (s == 1) {
        snprintf(buf, len, "%llu-%llu", (unsigned long long)first, (unsigned long long)last);
    } else if (n <= 8) {
        size_t used = 0;
        buf[0] = '\0';
        for (uint64_t i = 0; i < n && used < len; i++) {
            int w = snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)(first + i * s));
            if (w < 0)
                break;
            used += (size_t)w;
        }
    } else {
        snprintf(buf, len, "%llu, %llu, ..., %llu", (unsigned long long)first,
                 (unsigned long long)(first + s), (unsigned long long)last);
    }
}

/* Appends one line to a bounded message buffer (newline-separated). */
static void gs__mesh_append_line(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void gs__mesh_append_line(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
    if (*used >= cap)
        return;
    if (*used > 0) {
        int w = snprintf(buf + *used, cap - *used, "\n");
        if (w < 0)
            return;
        *used += (size_t)w;
        if (*used >= cap) {
            *used = cap;
            return;
        }
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    *used += (size_t)w;
    if (*used > cap)
        *used = cap;
}

/* "stages hold 27, 27, 26 layers" for short pipelines, a two-range summary for long ones. */
static void gs__mesh_format_split(uint64_t layers, uint64_t pp, char *buf, size_t len)
{
    uint64_t q = layers / pp;
    uint64_t r = layers % pp;
    if (pp <= 8) {
        size_t used = (size_t)snprintf(buf, len, "stages hold ");
        for (uint64_t st = 0; st < pp && used < len; st++) {
            int w = snprintf(buf + used, len - used, "%s%llu", st ? ", " : "",
                             (unsigned long long)(st < r ? q + 1 : q));
            if (w < 0)
                return;
            used += (size_t)w;
        }
        if (used < len)
            snprintf(buf + used, len - used, " layers");
        return;
    }
    snprintf(buf, len, "stages 0-%llu hold %llu layers, stages %llu-%llu hold %llu",
             (unsigned long long)(r - 1), (unsigned long long)(q + 1), (unsigned long long)r,
             (unsigned long long)(pp - 1), (unsigned long long)q);
}

/* The errors gs_mesh_check collects, one line each. */
typedef struct mesh_errors {
    char text[GS_ERROR_MSG_BYTES];
    size_t used; /* bytes of text */
} mesh_errors;

/* 1. The grid must use every GPU exactly once. */
static void check_world(const gs_mesh *m, uint64_t gpus, mesh_errors *e)
{
    uint64_t tp = m->size[GS_DIM_TP];
    uint64_t dp = m->size[GS_DIM_DP];
    uint64_t pp = m->size[GS_DIM_PP];
    uint64_t G = m->gpus_per_node;
    if (m->world != gpus) {
        if (gpus % G == 0)
            gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                                 "grid dp=%llu x pp=%llu x tp=%llu = %llu ranks but the cluster "
                                 "has %llu nodes x %llu GPUs = %llu GPUs",
                                 (unsigned long long)dp, (unsigned long long)pp,
                                 (unsigned long long)tp, (unsigned long long)m->world,
                                 (unsigned long long)(gpus / G), (unsigned long long)G,
                                 (unsigned long long)gpus);
        else
            gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                                 "grid dp=%llu x pp=%llu x tp=%llu = %llu ranks but the cluster "
                                 "has %llu GPUs",
                                 (unsigned long long)dp, (unsigned long long)pp,
                                 (unsigned long long)tp, (unsigned long long)m->world,
                                 (unsigned long long)gpus);
    }
}

/* 2. TP groups inside one node: an error, or a warning when allow_tp_cross_node; GS_ERR_NOMEM
 * when the warning cannot be recorded. */
static gs_status check_tp_nodes(const gs_mesh *m, int allow_tp_cross_node, gs_diag *warnings, mesh_errors *e)
{
    char line[GS_MESH_LINE_BYTES];
    gs_status st = GS_OK;
    uint64_t tp = m->size[GS_DIM_TP];
    uint64_t G = m->gpus_per_node;
    uint64_t example = UINT64_MAX;
    if (gs_mesh_dim_crosses_nodes(m, GS_DIM_TP, &example)) {
        const char *tail = allow_tp_cross_node
                               ? "accepted because grid.allow_tp_cross_node is true; expect "
                                 "TP all-reduces at network speed"
                               : "set grid.allow_tp_cross_node: true to accept";
        if (tp > G) {
            uint64_t spans = tp / G + (tp % G != 0);
            if (example != UINT64_MAX)
                spans = gs_mesh_group_nodes(m, GS_DIM_TP, example);
            snprintf(line, sizeof line,
                     "tp=%llu spans %llu nodes of %llu GPUs: TP all-reduces would cross the "
                     "network (%s)",
                     (unsigned long long)tp, (unsigned long long)spans, (unsigned long long)G,
                     tail);
        } else if (example != UINT64_MAX) {
            char members[160];
            char order[16];
            uint64_t g = gs__mesh_group_index(m, GS_DIM_TP, example);
            uint64_t first = gs_mesh_group_first(m, GS_DIM_TP, g);
            uint64_t last = first + (tp - 1) * m->stride[GS_DIM_TP];
            gs__mesh_format_members(m, GS_DIM_TP, g, members, sizeof members);
            gs_mesh_order_format(m->order, order, sizeof order);
            snprintf(line, sizeof line,
                     "tp=%llu with order %s on %llu-GPU nodes puts TP group %llu (ranks %s) on "
                     "%llu nodes (%llu-%llu): TP all-reduces would cross the network (%s)",
                     (unsigned long long)tp, order, (unsigned long long)G,
                     (unsigned long long)g, members,
                     (unsigned long long)gs_mesh_group_nodes(m, GS_DIM_TP, example),
                     (unsigned long long)gs_mesh_rank_node(m, first),
                     (unsigned long long)gs_mesh_rank_node(m, last), tail);
        } else {
            char order[16];
            gs_mesh_order_format(m->order, order, sizeof order);
            snprintf(line, sizeof line,
                     "tp=%llu with order %s on %llu-GPU nodes puts some TP groups across nodes: "
                     "TP all-reduces would cross the network (%s)",
                     (unsigned long long)tp, order, (unsigned long long)G, tail);
        }
        if (allow_tp_cross_node) {
            st = gs_diag_warn(warnings, "%s", line);
            if (st != GS_OK)
                return st;
        } else {
            gs__mesh_append_line(e->text, sizeof e->text, &e->used, "%s", line);
        }
    }
    return st;
}

/* 3, uneven: the first / last stage counts and an even split of the rest over the others, as
 * Megatron-LM asserts them. */
static void check_stage_layers(const gs_mesh *m, uint64_t L, mesh_errors *e)
{
    uint64_t pp = m->size[GS_DIM_PP], f = m->first_layers, l = m->last_layers;
    uint64_t others = pp - (f ? 1 : 0) - (l ? 1 : 0);
    if (pp < 2)
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "first_stage_layers / last_stage_layers need pp >= 2: found pp=%llu",
                             (unsigned long long)pp);
    else if (f > L || l > L - f || (others == 0 && f + l != L) || (others > 0 && (L - f - l) / others == 0) ||
             (others > 0 && (L - f - l) % others != 0))
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "first_stage_layers=%llu, last_stage_layers=%llu: the other %llu stages "
                             "must split the remaining layers of %llu evenly, at least one each "
                             "(Megatron-LM asserts the same)",
                             (unsigned long long)f, (unsigned long long)l, (unsigned long long)others,
                             (unsigned long long)L);
}

/* 3, with the embedding or loss accounted as a layer (Megatron-LM d98e8a6, Core 0.20: transformer_config.py
 * TransformerConfig.__post_init__ and transformer_block.py get_num_layers_to_build): not with
 * first / last stage counts, layers + 1 (+ 1) a multiple of pp. */
static void check_split_accounting(const gs_mesh *m, uint64_t L, mesh_errors *e)
{
    uint64_t pp = m->size[GS_DIM_PP], ea = (uint64_t)m->account_embedding, la = (uint64_t)m->account_loss;
    uint64_t n = L + ea + la;
    const char *what = ea && la ? "account_for_embedding and account_for_loss"
                       : ea     ? "account_for_embedding" : "account_for_loss";
    if (m->first_layers || m->last_layers)
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "%s with first_stage_layers / last_stage_layers: Megatron-LM refuses the two "
                             "ways of an uneven split together; use one",
                             what);
    else if (n % pp != 0)
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "%s: the %llu layers + %llu must split evenly over pp=%llu stages: found %llu, "
                             "expected a multiple of %llu (Megatron-LM asserts the same)",
                             what, (unsigned long long)L, (unsigned long long)(ea + la),
                             (unsigned long long)pp, (unsigned long long)n, (unsigned long long)pp);
    /* a stage left with the embedding or loss alone needs layers + 1 (+ 1) = pp: pp > layers
     * refuses that before */
}

/* 3 and 4. The model over the grid: layers over pipeline stages; attention heads, KV heads, MLP
 * and vocabulary over TP ranks. GS_ERR_NOMEM when a warning cannot be recorded. */
static gs_status check_model_split(const gs_mesh *m, const gs_model *model, gs_diag *warnings, mesh_errors *e)
{
    gs_status st = GS_OK;
    uint64_t tp = m->size[GS_DIM_TP];
    uint64_t pp = m->size[GS_DIM_PP];
    /* 3. Layers over pipeline stages. */
    if (model->layers > 0) {
        if (pp > model->layers) {
            gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                                 "pp=%llu exceeds the model's %llu layers: stages %llu-%llu "
                                 "would hold no layer",
                                 (unsigned long long)pp, (unsigned long long)model->layers,
                                 (unsigned long long)model->layers,
                                 (unsigned long long)(pp - 1));
        } else if (m->layout.n) {
            /* a custom layout: its counts are checked against the model (engine/scenario_mesh.c) */
        } else if (m->account_embedding || m->account_loss) {
            check_split_accounting(m, model->layers, e);
        } else if (m->first_layers || m->last_layers) {
            check_stage_layers(m, model->layers, e);
        } else if (model->layers % pp != 0) {
            char split[GS_MESH_LINE_BYTES / 2];
            gs__mesh_format_split(model->layers, pp, split, sizeof split);
            st = gs_diag_warn(warnings, "%llu layers do not divide by pp=%llu: %s",
                              (unsigned long long)model->layers, (unsigned long long)pp, split);
            if (st != GS_OK)
                return st;
        }
    }

    /* 4. Attention heads, KV heads, MLP and vocabulary over TP ranks. */
    if (model->heads > 0 && model->heads % tp != 0)
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "heads=%llu not divisible by tp=%llu: each TP rank must hold whole "
                             "attention heads",
                             (unsigned long long)model->heads, (unsigned long long)tp);
    uint64_t kv = model->kv_heads ? model->kv_heads : model->heads;
    if (kv > 0 && kv % tp != 0) {
        if (tp % kv == 0) {
            st = gs_diag_warn(warnings,
                              "kv_heads=%llu < tp=%llu: each KV head is replicated on %llu TP "
                              "ranks",
                              (unsigned long long)kv, (unsigned long long)tp,
                              (unsigned long long)(tp / kv));
            if (st != GS_OK)
                return st;
        } else {
            gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                                 "kv_heads=%llu and tp=%llu: neither divides the other, so KV "
                                 "heads can be neither split nor evenly replicated across TP "
                                 "ranks",
                                 (unsigned long long)kv, (unsigned long long)tp);
        }
    }
    if (model->ffn > 0 && model->ffn % tp != 0)
        gs__mesh_append_line(e->text, sizeof e->text, &e->used,
                             "ffn=%llu not divisible by tp=%llu: the MLP cannot be split evenly "
                             "across TP ranks",
                             (unsigned long long)model->ffn, (unsigned long long)tp);
    if (model->vocab > 0 && model->vocab % tp != 0) {
        uint64_t per_rank = model->vocab / tp + 1;
        st = gs_diag_warn(warnings,
                          "vocab=%llu not divisible by tp=%llu: the embedding and LM head are "
                          "padded to %llu rows (%llu per TP rank)",
                          (unsigned long long)model->vocab, (unsigned long long)tp,
                          (unsigned long long)(per_rank * tp), (unsigned long long)per_rank);
        if (st != GS_OK)
            return st;
    }
    return st;
}

gs_status gs_mesh_check(const gs_mesh *m, uint64_t gpus, const gs_model *model,
                        int allow_tp_cross_node, gs_diag *warnings, gs_error *err)
{
    mesh_errors e;
    e.text[0] = '\0';
    e.used = 0;
    check_world(m, gpus, &e);
    gs_status st = check_tp_nodes(m, allow_tp_cross_node, warnings, &e);
    if (st == GS_OK && model)
        st = check_model_split(m, model, warnings, &e);
    if (st != GS_OK)
        return gs_error_set(err, st, "out of memory while recording a mesh warning");
    if (e.used > 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s", e.text);
    return GS_OK;
}

/* Layers of each stage that neither a first nor a last count names (uneven split only). */
static uint64_t middle_stage_layers(const gs_mesh *m, uint64_t layers)
{
    uint64_t pp = m->size[GS_DIM_PP], f = m->first_layers, l = m->last_layers;
    uint64_t stages = pp - (f ? 1 : 0) - (l ? 1 : 0), rest = layers >= f + l ? layers - f - l : 0;
    return stages ? rest / stages : 0;
}

/* Megatron-LM's split with the embedding / loss as layers: (layers + 1 (+ 1)) / pp per stage. */
static uint64_t accounted_stage_layers(const gs_mesh *m, uint64_t layers)
{
    return (layers + (uint64_t)m->account_embedding + (uint64_t)m->account_loss) / m->size[GS_DIM_PP];
}

void gs_mesh_set_mtp(gs_mesh *m, uint64_t mtp_layers)
{
    m->mtp_layers = mtp_layers;
}

static uint64_t decoder_stage_layers(const gs_mesh *m, uint64_t layers, uint64_t stage);

uint64_t gs_mesh_stage_layers(const gs_mesh *m, uint64_t layers, uint64_t stage)
{
    uint64_t n = decoder_stage_layers(m, layers, stage);
    return stage + 1 == m->size[GS_DIM_PP] ? n + m->mtp_layers : n;
}

/* The stage's decoder layers (gs_mesh_stage_layers without the MTP blocks). */
static uint64_t decoder_stage_layers(const gs_mesh *m, uint64_t layers, uint64_t stage)
{
    uint64_t pp = m->size[GS_DIM_PP];
    if (m->layout.n) { /* the stage's virtual stages k = chunk x pp + stage */
        uint64_t n = 0;
        for (uint64_t k = stage; k < m->layout.n; k += pp)
            n += m->layout.layers[k];
        return n;
    }
    if (m->account_embedding || m->account_loss) {
        /* transformer_block.py get_num_layers_to_build: the stage's share less the embedding on
         * the first stage and the loss on the last (each of those known to hold more) */
        uint64_t n = accounted_stage_layers(m, layers);
        n -= stage == 0 && m->account_embedding && n ? 1 : 0;
        n -= stage + 1 == pp && m->account_loss && n ? 1 : 0;
        return n;
    }
    if ((m->first_layers || m->last_layers) && pp > 1) {
        if (stage == 0 && m->first_layers)
            return m->first_layers;
        if (stage + 1 == pp && m->last_layers)
            return m->last_layers;
        return middle_stage_layers(m, layers);
    }
    uint64_t q = layers / pp;
    uint64_t r = layers % pp;
    return stage < r ? q + 1 : q;
}

uint64_t gs_mesh_stage_first_layer(const gs_mesh *m, uint64_t layers, uint64_t stage)
{
    uint64_t pp = m->size[GS_DIM_PP];
    if (m->layout.n) /* its first virtual stage's first layer */
        return gs_layout_layers_before(&m->layout, stage);
    if (m->account_embedding || m->account_loss) /* transformer_layer.py get_transformer_layer_offset */
        return stage == 0 ? 0 : stage * accounted_stage_layers(m, layers) - (uint64_t)m->account_embedding;
    if ((m->first_layers || m->last_layers) && pp > 1) {
        uint64_t mid = middle_stage_layers(m, layers);
        return stage == 0 ? 0 : (m->first_layers ? m->first_layers : mid) + (stage - 1) * mid;
    }
    uint64_t q = layers / pp;
    uint64_t r = layers % pp;
    return stage * q + (stage < r ? stage : r);
}
