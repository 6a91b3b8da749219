/* Where a mixture-of-experts block's routed tokens go, for dispatchers that send a token once per
 * destination rather than once per routed copy: the flex dispatcher (Megatron-Core's
 * MoEFlexTokenDispatcher over DeepEP, megatron/core/transformer/moe/token_dispatcher.py
 * _DeepepManager; deepseek-ai/DeepEP's normal, "hybrid" kernels). DeepEP's dispatch sends a token
 * over RDMA once to each remote node that holds one of its top_k experts (to the GPU of the same
 * local index there), then forwards it over NVLink once to each GPU of that node that holds one;
 * the combine comes back the same way, summing on the way (DeepEP docs/legacy.md, "normal kernels
 * with NVLink and RDMA forwarding"; tests/legacy/test_internode.py counts the RDMA bytes as the
 * token's distinct destination nodes, the NVLink bytes as its distinct destination ranks).
 *
 * Routing is taken as balanced, as everywhere in the model (model.h gs_moe): each token's top_k
 * experts a uniform draw among the experts of group_topk groups, themselves a uniform draw among
 * `groups` (group-limited routing, DeepSeek-V3 sec. 2.1.2: n_group 8, topk_group 4; none when
 * groups is 0). Experts sit in consecutive blocks: EP rank r holds experts [r L, (r + 1) L), L =
 * experts / ep, and a node's EP ranks are consecutive, as Megatron-Core places them.
 *
 * Ownership: pure functions of borrowed structures. */
#ifndef GS_MOE_ROUTE_H
#define GS_MOE_ROUTE_H

#include <stdint.h>

#include "engine/mesh.h"
#include "engine/model.h"

/* The expected number of distinct blocks of `block` consecutive experts (the last one shorter
 * when block does not divide the experts) that one token's top_k experts fall in, under balanced
 * group-limited routing: the sum over blocks of P(the block is hit) = the sum over the sets J of
 * the groups it overlaps of P(exactly J are among the group_topk chosen of `groups`)
 * x (1 - C(S - c_J, k) / C(S, k)), S = group_topk x experts / groups the experts a token may pick,
 * c_J the block's experts in J. 0 when moe has no experts or block is 0; NaN out of memory. */
double gs_moe_blocks_hit(const gs_moe *moe, uint64_t block);

/* The members of `rank`'s EP group (gs_mesh_ep_group) on that rank's node: 1 when each EP rank
 * has a node of its own, ep when the group fits in one node. */
uint64_t gs_moe_ep_ranks_per_node(const gs_mesh *m, uint64_t rank);

/* One flex dispatch's traffic from one rank: `rank_rows` the distinct (token, destination rank)
 * rows it sends (to itself included; the NVLink level) for `routed_rows` routed copies, and
 * `net_share` the share of those rows' bytes that leave its node (the distinct (token, remote
 * node) pairs over rank_rows; 0 when the EP group sits in one node). */
typedef struct gs_moe_flex {
    uint64_t rank_rows;
    double net_share;
} gs_moe_flex;

/* What a flex dispatch from `rank` over the ETP x EP group of etp x ep ranks does with each
 * token, whatever the micro-batch: `ranks` its expected distinct destination ranks (top_k when
 * ep <= 1 and etp <= 1: no deduplication), `net_share` as gs_moe_flex's. Under expert TP
 * (Megatron-Core's MoEFlexTokenDispatcher._initialize_metadata: the routing map replicated over
 * the ETP ranks of each expert, the group tp_ep) a token goes to every one of the etp ranks of
 * each EP position it picks, consecutive ranks of one node, so its ranks are etp times the EP
 * positions it hits while its RDMA copies stay one per remote node; the combine sums the etp
 * ranks' partial outputs on the way back. A schedule build computes it once per rank. */
typedef struct gs_moe_flex_route {
    double ranks;
    double net_share;
} gs_moe_flex_route;

gs_moe_flex_route gs_moe_flex_route_of(const gs_moe *moe, const gs_mesh *m, uint64_t rank, uint64_t ep,
                                       uint64_t etp);

/* The dispatch of `routed_rows` routed copies (tokens x top_k, with any skew) under route r. */
gs_moe_flex gs_moe_flex_rows(const gs_moe *moe, const gs_moe_flex_route *r, uint64_t routed_rows);

/* The two in one: the flex dispatch of `routed_rows` routed copies from `rank` over etp x ep
 * ranks. */
gs_moe_flex gs_moe_flex_traffic(const gs_moe *moe, const gs_mesh *m, uint64_t rank, uint64_t ep, uint64_t etp,
                                uint64_t routed_rows);

#endif
