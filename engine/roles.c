/* The role table: per role, the event kind, stream, the ops of each phase, the groups, the layer
 * and the parts it allows (engine/roles.h). The builders (engine/build*.c) set roles; schedule
 * validation and the backends read this table. */
#include "engine/roles.h"

#include <stdio.h>
#include <string.h>

#define OP(o) ((uint16_t)(1u << (o)))
#define NOOP OP(0) /* sends, receives and copies carry op 0 */
#define G(g) ((uint16_t)(1u << (g)))
#define AG OP(GS_COLL_ALLGATHER)
#define RS OP(GS_COLL_REDUCE_SCATTER)
#define AR OP(GS_COLL_ALLREDUCE)
#define A2A OP(GS_COLL_ALLTOALL)
#define DP_ANY (G(GS_GROUP_DP) | G(GS_GROUP_DP_INTRA))
#define EDP G(GS_GROUP_EDP) /* expert parallelism: the routed experts' gradients and slices */
#define ETP (G(GS_GROUP_TP) | G(GS_GROUP_ETP)) /* the experts' TP: tp's group, or etp's below it */
#define SPLIT 2          /* a GEMM or reduce-scatter split in two parts (tp_comm_overlap) */
#define BUCKETS 0xffffu  /* a unit's gradient in buckets: part = 1 + bucket */

/* ops per phase, in gs_phase order: fwd, bwd, recompute, optim */
#define BLOCK(o) {OP(o), OP(o), OP(o), 0}           /* a block op: forward, backward, recompute */
#define FWD_BWD(o) {OP(o), OP(o), 0, 0}             /* the root's ops: no recompute */
#define TP_IN {AG, RS | AR, AG, 0}                  /* see GS_ROLE_TP_ATTN_IN */
#define TP_OUT {RS | AR, AG, RS | AR, 0}
#define ROUTER {OP(GS_OP_MLP_UP) | OP(GS_OP_ACT), OP(GS_OP_MLP_UP) | OP(GS_OP_ACT), OP(GS_OP_MLP_UP) | OP(GS_OP_ACT), 0}

static const gs_role_info roles[GS_ROLE_COUNT] = {
    [GS_ROLE_NONE] = {"none", GS_EV_KIND_COUNT, GS_STREAM_COUNT, {0, 0, 0, 0}, 0, GS_WHERE_ANY, 0},
    [GS_ROLE_ATTN_NORM] = {"attn_norm", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_NORM), 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_QKV] = {"qkv", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_QKV), 0, GS_WHERE_LAYER, SPLIT},
    [GS_ROLE_ATTN_CORE] = {"attn_core", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_ATTN), 0, GS_WHERE_LAYER,
                           SPLIT},
    [GS_ROLE_OPROJ] = {"oproj", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_OPROJ), 0, GS_WHERE_LAYER, SPLIT},
    [GS_ROLE_MLP_NORM] = {"mlp_norm", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_NORM), 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_MLP_UP] = {"mlp_up", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_MLP_UP), 0, GS_WHERE_LAYER, SPLIT},
    [GS_ROLE_MLP_ACT] = {"mlp_act", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_ACT), 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_MLP_DOWN] = {"mlp_down", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_MLP_DOWN), 0, GS_WHERE_LAYER,
                          SPLIT},
    [GS_ROLE_EMBED] = {"embed", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_EMBED), 0, GS_WHERE_EMBED, 0},
    [GS_ROLE_HEAD_NORM] = {"head_norm", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_NORM), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_HEAD] = {"head", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_HEAD), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_LOSS] = {"loss", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_LOSS), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_OPTIMIZER] = {"optimizer", GS_EV_COMPUTE, GS_STREAM_COMPUTE, {0, 0, 0, OP(GS_OP_OPTIMIZER)}, 0,
                           GS_WHERE_NONE, 0},
    [GS_ROLE_TP_ATTN_IN] = {"tp_attn_in", GS_EV_COLLECTIVE, GS_STREAM_TP, TP_IN, G(GS_GROUP_TP), GS_WHERE_LAYER, 0},
    [GS_ROLE_TP_ATTN_OUT] = {"tp_attn_out", GS_EV_COLLECTIVE, GS_STREAM_TP, TP_OUT, G(GS_GROUP_TP), GS_WHERE_LAYER,
                             SPLIT},
    [GS_ROLE_TP_MLP_IN] = {"tp_mlp_in", GS_EV_COLLECTIVE, GS_STREAM_TP, TP_IN, G(GS_GROUP_TP), GS_WHERE_LAYER, 0},
    [GS_ROLE_TP_MLP_OUT] = {"tp_mlp_out", GS_EV_COLLECTIVE, GS_STREAM_TP, TP_OUT, G(GS_GROUP_TP), GS_WHERE_LAYER,
                            SPLIT},
    [GS_ROLE_TP_ATTN_REGATHER] = {"tp_attn_regather", GS_EV_COLLECTIVE, GS_STREAM_TP, {0, AG, 0, 0}, G(GS_GROUP_TP),
                                  GS_WHERE_LAYER, 0},
    [GS_ROLE_TP_MLP_REGATHER] = {"tp_mlp_regather", GS_EV_COLLECTIVE, GS_STREAM_TP, {0, AG, 0, 0}, G(GS_GROUP_TP),
                                 GS_WHERE_LAYER, 0},
    [GS_ROLE_TP_EMBED] = {"tp_embed", GS_EV_COLLECTIVE, GS_STREAM_TP, {RS | AR, AG, 0, 0}, G(GS_GROUP_TP),
                          GS_WHERE_EMBED, 0},
    [GS_ROLE_TP_HEAD_IN] = {"tp_head_in", GS_EV_COLLECTIVE, GS_STREAM_TP, {AG, RS | AR, 0, 0}, G(GS_GROUP_TP),
                            GS_WHERE_HEAD, 0},
    [GS_ROLE_TP_LOSS_STATS] = {"tp_loss_stats", GS_EV_COLLECTIVE, GS_STREAM_TP, {AG, 0, 0, 0}, G(GS_GROUP_TP),
                               GS_WHERE_HEAD, 0},
    [GS_ROLE_TP_NORM_GRADS] = {"tp_norm_grads", GS_EV_COLLECTIVE, GS_STREAM_TP, {0, 0, 0, AR}, G(GS_GROUP_TP),
                               GS_WHERE_NONE, 0},
    [GS_ROLE_UNIT_GATHER] = {"unit_gather", GS_EV_COLLECTIVE, GS_STREAM_DP, {AG, AG, 0, 0}, DP_ANY | EDP, GS_WHERE_ANY, 0},
    [GS_ROLE_GRAD_REDUCE_SCATTER] = {"grad_reduce_scatter", GS_EV_COLLECTIVE, GS_STREAM_DP, {0, RS, 0, 0}, DP_ANY | EDP,
                                     GS_WHERE_ANY, BUCKETS},
    [GS_ROLE_GRAD_INTER_REDUCE] = {"grad_inter_reduce", GS_EV_COLLECTIVE, GS_STREAM_DP, {0, AR, 0, 0},
                                   G(GS_GROUP_DP_INTER), GS_WHERE_ANY, 0},
    [GS_ROLE_GRAD_BUCKET_REDUCE] = {"grad_bucket_reduce", GS_EV_COLLECTIVE, GS_STREAM_DP, {0, AR, 0, 0},
                                    G(GS_GROUP_DP) | EDP, GS_WHERE_ANY, BUCKETS},
    [GS_ROLE_GRAD_CHUNK_REDUCE] = {"grad_chunk_reduce", GS_EV_COLLECTIVE, GS_STREAM_DP, {0, AR | RS, 0, 0},
                                   G(GS_GROUP_DP) | EDP, GS_WHERE_ANY, 0},
    [GS_ROLE_PARAM_GATHER] = {"param_gather", GS_EV_COLLECTIVE, GS_STREAM_DP, {0, 0, 0, AG},
                              G(GS_GROUP_DP) | EDP, GS_WHERE_ANY, 0},
    [GS_ROLE_OFFLOAD_FETCH] = {"offload_fetch", GS_EV_COPY_H2D, GS_STREAM_COPY, {NOOP, NOOP, 0, 0}, 0, GS_WHERE_ANY,
                               0},
    [GS_ROLE_OFFLOAD_GRAD] = {"offload_grad", GS_EV_COPY_D2H, GS_STREAM_COPY, {0, NOOP, 0, 0}, 0, GS_WHERE_ANY, 0},
    [GS_ROLE_PP_SEND] = {"pp_send", GS_EV_SEND, GS_STREAM_PP, {NOOP, NOOP, 0, 0}, 0, GS_WHERE_ANY, 0},
    [GS_ROLE_PP_RECV] = {"pp_recv", GS_EV_RECV, GS_STREAM_PP, {NOOP, NOOP, 0, 0}, 0, GS_WHERE_ANY, 0},
    [GS_ROLE_TIED_SEND] = {"tied_send", GS_EV_SEND, GS_STREAM_PP, {0, 0, 0, NOOP}, 0, GS_WHERE_NONE, 0},
    [GS_ROLE_TIED_RECV] = {"tied_recv", GS_EV_RECV, GS_STREAM_PP, {0, 0, 0, NOOP}, 0, GS_WHERE_NONE, 0},
    [GS_ROLE_CP_KV] = {"cp_kv", GS_EV_COLLECTIVE, GS_STREAM_TP, {AG, AG | RS, AG, 0}, G(GS_GROUP_CP) | G(GS_GROUP_CP_P2P),
                        GS_WHERE_LAYER, GS_PART_RING},
    [GS_ROLE_CP_A2A] = {"cp_a2a", GS_EV_COLLECTIVE, GS_STREAM_TP, {A2A, A2A, A2A, 0}, G(GS_GROUP_CP) | G(GS_GROUP_CP_A2A),
                        GS_WHERE_LAYER,
                        SPLIT},
    [GS_ROLE_MOE_ROUTER] = {"moe_router", GS_EV_COMPUTE, GS_STREAM_COMPUTE, ROUTER, 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_MOE_PERMUTE] = {"moe_permute", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_ACT), 0, GS_WHERE_LAYER,
                             SPLIT},
    [GS_ROLE_EXPERT_UP] = {"expert_up", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_MLP_UP), 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_EXPERT_ACT] = {"expert_act", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_ACT), 0, GS_WHERE_LAYER, 0},
    [GS_ROLE_EXPERT_DOWN] = {"expert_down", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_MLP_DOWN), 0, GS_WHERE_LAYER,
                             0},
    [GS_ROLE_EP_DISPATCH] = {"ep_dispatch", GS_EV_COLLECTIVE, GS_STREAM_TP, {A2A | AG, A2A | RS, A2A | AG, 0},
                             G(GS_GROUP_EP) | G(GS_GROUP_TPEP), GS_WHERE_LAYER, 0, 1},
    [GS_ROLE_EP_COMBINE] = {"ep_combine", GS_EV_COLLECTIVE, GS_STREAM_TP, {A2A | RS, A2A | AG, A2A | RS, 0},
                            G(GS_GROUP_EP) | G(GS_GROUP_TPEP), GS_WHERE_LAYER, 0, 1},
    [GS_ROLE_ETP_IN] = {"etp_in", GS_EV_COLLECTIVE, GS_STREAM_TP, {AG, RS, AG, 0}, ETP, GS_WHERE_LAYER, 0, 1},
    [GS_ROLE_MLA_DOWN] = {"mla_down", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_QKV), 0, GS_WHERE_LAYER, SPLIT},
    [GS_ROLE_MLA_NORM] = {"mla_norm", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_NORM), 0, GS_WHERE_LAYER, 3},
    [GS_ROLE_MLA_UP] = {"mla_up", GS_EV_COMPUTE, GS_STREAM_COMPUTE, BLOCK(GS_OP_QKV), 0, GS_WHERE_LAYER, SPLIT},
    [GS_ROLE_ETP_OUT] = {"etp_out", GS_EV_COLLECTIVE, GS_STREAM_TP, {RS, AG, RS, 0}, ETP, GS_WHERE_LAYER,
                         0, 1},
    [GS_ROLE_MTP_EMBED] = {"mtp_embed", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_EMBED), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_MTP_NORM] = {"mtp_norm", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_NORM), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_MTP_PROJ] = {"mtp_proj", GS_EV_COMPUTE, GS_STREAM_COMPUTE, FWD_BWD(GS_OP_OPROJ), 0, GS_WHERE_HEAD, 0},
    [GS_ROLE_TP_MTP] = {"tp_mtp", GS_EV_COLLECTIVE, GS_STREAM_TP, {RS | AR | AG, AG | RS | AR, 0, 0}, G(GS_GROUP_TP),
                        GS_WHERE_HEAD, 0},
    /* a MAX all-reduce: the role says the reduction's operator */
    [GS_ROLE_FP8_AMAX] = {"fp8_amax", GS_EV_COLLECTIVE, GS_STREAM_TP, {AR, AR, 0, 0}, G(GS_GROUP_STAGE),
                          GS_WHERE_LAYER, 0},
    [GS_ROLE_UNIT_COPY_OUT] = {"unit_copy_out", GS_EV_COMPUTE, GS_STREAM_COMPUTE,
                               {OP(GS_OP_COPY), OP(GS_OP_COPY), 0, 0}, 0, GS_WHERE_ANY, 0},
    [GS_ROLE_GRAD_COPY_IN] = {"grad_copy_in", GS_EV_COMPUTE, GS_STREAM_COMPUTE, {0, OP(GS_OP_COPY), 0, 0}, 0,
                              GS_WHERE_ANY, 0},
};

const gs_role_info *gs_role_info_of(gs_role r)
{
    return (unsigned)r < GS_ROLE_COUNT ? &roles[r] : NULL;
}

const char *gs_role_name(gs_role r)
{
    return (unsigned)r < GS_ROLE_COUNT ? roles[r].name : "?";
}

gs_role gs_role_by_name(const char *name, size_t len)
{
    for (int r = 0; r < GS_ROLE_COUNT; r++)
        if (strlen(roles[r].name) == len && memcmp(roles[r].name, name, len) == 0)
            return (gs_role)r;
    return GS_ROLE_COUNT;
}

static int where_ok(uint8_t where, int32_t layer)
{
    switch (where) {
    case GS_WHERE_LAYER: return layer >= 0;
    case GS_WHERE_EMBED: return layer == GS_LAYER_EMBED;
    case GS_WHERE_HEAD: return layer == GS_LAYER_HEAD;
    case GS_WHERE_NONE: return layer == GS_LAYER_NONE;
    default: return 1;
    }
}

static const char *const where_words[] = {"a layer", "the embedding", "the head", "no layer", "any layer"};

int gs_role_check(const gs_event *e, char *why, size_t len)
{
    if (e->role == GS_ROLE_NONE || e->role >= GS_ROLE_COUNT) {
        snprintf(why, len, "has no role");
        return 0;
    }
    const gs_role_info *ri = &roles[e->role];
    const char *what = NULL;
    if (e->kind != ri->kind)
        what = "event kind";
    else if (e->stream != ri->stream && !(ri->on_pp && e->stream == GS_STREAM_PP))
        what = "stream";
    else if (e->phase >= GS_PHASE_COUNT || !ri->ops[e->phase])
        what = "phase";
    else if (e->op >= 16 || !(ri->ops[e->phase] & OP(e->op)))
        what = "op";
    else if (e->kind == GS_EV_COLLECTIVE && (e->group >= 16 || !(ri->groups & G(e->group))))
        what = "group";
    if (what) {
        snprintf(why, len, "has role %s, which its %s contradicts", ri->name, what);
        return 0;
    }
    if (!where_ok(ri->where, e->layer)) {
        snprintf(why, len, "has role %s, which sits at %s", ri->name, where_words[ri->where]);
        return 0;
    }
    if (e->part > ri->max_part) {
        snprintf(why, len, "has role %s with part %u (at most %u)", ri->name, (unsigned)e->part,
                 (unsigned)ri->max_part);
        return 0;
    }
    return 1;
}
