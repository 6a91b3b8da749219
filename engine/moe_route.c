/* Expected destinations of balanced group-limited routing (engine/moe_route.h).
 * Ownership: none (pure functions). */
#include "engine/moe_route.h"

#include <math.h>
#include <stdlib.h>

/* C(a - x, k) / C(a, k): the chance that a uniform k-subset of a items misses x given ones. */
static double miss_all(uint64_t a, uint64_t x, uint64_t k)
{
    if (x > a || a - x < k)
        return 0.0;
    double p = 1.0;
    for (uint64_t i = 0; i < k; i++)
        p *= (double)(a - x - i) / (double)(a - i);
    return p;
}

/* log C(n, r) */
static double log_choose(uint64_t n, uint64_t r)
{
    return lgamma((double)n + 1.0) - lgamma((double)r + 1.0) - lgamma((double)(n - r) + 1.0);
}

/* The hypergeometric chance that j of q marked groups are among t drawn of g. */
static double hyper(uint64_t g, uint64_t q, uint64_t t, uint64_t j)
{
    if (j > q || j > t || t - j > g - q)
        return 0.0;
    return exp(log_choose(q, j) + log_choose(g - q, t - j) - log_choose(g, t));
}

/* P(a token hits experts [b0, b0 + B)): over the subsets J of the groups the block overlaps,
 * P(exactly J of them among the t chosen of g) x (1 - miss(S, the block's experts in J, k)); the
 * subsets by size and overlap counted by a table (ways[j][s]), as the overlaps may differ. */
static double block_hit(uint64_t b0, uint64_t B, uint64_t gsize, uint64_t g, uint64_t t, uint64_t k)
{
    uint64_t S = t * gsize, g0 = b0 / gsize, g1 = (b0 + B - 1) / gsize, q = g1 - g0 + 1;
    size_t w = (size_t)B + 1;
    double *ways = calloc((size_t)(q + 1) * w, sizeof *ways), p = 0.0;
    if (!ways)
        return NAN;
    ways[0] = 1.0;
    for (uint64_t gi = g0; gi <= g1; gi++) {
        uint64_t lo = gi * gsize > b0 ? gi * gsize : b0, hi = (gi + 1) * gsize < b0 + B ? (gi + 1) * gsize : b0 + B;
        uint64_t c = hi - lo;
        for (uint64_t j = gi - g0 + 1; j >= 1; j--) /* take group gi: from j - 1 taken to j */
            for (uint64_t sum = B; sum >= c; sum--) {
                ways[j * w + sum] += ways[(j - 1) * w + sum - c];
                if (sum == 0)
                    break;
            }
    }
    for (uint64_t j = 1; j <= q && j <= t; j++) {
        double pick = hyper(g, q, t, j) / exp(log_choose(q, j)); /* one given subset of size j */
        for (uint64_t sum = 1; sum <= B; sum++)
            if (ways[j * w + sum] > 0.0)
                p += ways[j * w + sum] * pick * (1.0 - miss_all(S, sum, k));
    }
    free(ways);
    return p;
}

double gs_moe_blocks_hit(const gs_moe *moe, uint64_t block)
{
    uint64_t E = moe->experts, k = moe->top_k;
    if (!E || !block || !k)
        return 0.0;
    if (block > E)
        block = E;
    uint64_t g = moe->groups ? moe->groups : 1, t = moe->groups ? moe->group_topk : 1;
    double hits = 0.0;
    for (uint64_t b0 = 0; b0 < E; b0 += block)
        hits += block_hit(b0, b0 + block <= E ? block : E - b0, E / g, g, t, k);
    return hits;
}

uint64_t gs_moe_ep_ranks_per_node(const gs_mesh *m, uint64_t rank)
{
    uint64_t first, stride, n = m->ep ? m->ep : 1, on = 0;
    gs_mesh_ep_group(m, rank, &first, &stride);
    uint64_t node = gs_mesh_rank_node(m, rank);
    for (uint64_t i = 0; i < n; i++)
        on += gs_mesh_rank_node(m, first + i * stride) == node;
    return on ? on : 1;
}

gs_moe_flex_route gs_moe_flex_route_of(const gs_moe *moe, const gs_mesh *m, uint64_t rank, uint64_t ep,
                                       uint64_t etp)
{
    gs_moe_flex_route r = {(double)moe->top_k, 0.0};
    if (!etp)
        etp = 1;
    if ((ep <= 1 && etp <= 1) || !moe->experts || !moe->top_k)
        return r;
    if (!ep)
        ep = 1;
    uint64_t L = moe->experts / ep, ppn = ep > 1 ? gs_moe_ep_ranks_per_node(m, rank) : 1, nodes = ep / ppn;
    double positions = gs_moe_blocks_hit(moe, L); /* distinct EP positions per token */
    r.ranks = (double)etp * positions;            /* each position's etp ranks, all of them */
    if (nodes > 1 && r.ranks > 0.0)
        r.net_share = gs_moe_blocks_hit(moe, L * ppn) * (double)(nodes - 1) / (double)nodes / r.ranks;
    return r;
}

gs_moe_flex gs_moe_flex_rows(const gs_moe *moe, const gs_moe_flex_route *r, uint64_t routed_rows)
{
    gs_moe_flex f = {routed_rows, r->net_share};
    if (moe->top_k && r->ranks != (double)moe->top_k)
        f.rank_rows = (uint64_t)ceil((double)routed_rows * r->ranks / (double)moe->top_k);
    return f;
}

gs_moe_flex gs_moe_flex_traffic(const gs_moe *moe, const gs_mesh *m, uint64_t rank, uint64_t ep, uint64_t etp,
                                uint64_t routed_rows)
{
    gs_moe_flex_route r = gs_moe_flex_route_of(moe, m, rank, ep, etp);
    return gs_moe_flex_rows(moe, &r, routed_rows);
}
