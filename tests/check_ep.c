/* Check suite for mixture-of-experts blocks with expert parallelism (grid.ep): the EP and EDP
 * groups of the mesh, the partition of a block into its dense and expert units, the schedule's
 * dispatch and combine all-to-alls, expert-TP exchanges and grouped GEMMs against hand counts and
 * the model's FLOP count, the expert gradients' reduction group, the traffic ledger, Megatron-LM's
 * flags both ways, and the simulated effects of routing skew, capacity and placement. Expected
 * values are hand arithmetic written beside each assertion, or a second implementation
 * (brute-force enumeration of the ranks). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/ledger.h"
#include "engine/partition.h"
#include "engine/plan.h"
#include "engine/roles.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "sim/sim.h"

/* ---- the mesh ------------------------------------------------------------------------------- */

/* Every rank's EP and EDP groups against enumeration: the EP group is the ranks with the rank's tp
 * and pp coordinates whose DP position (dp x cp folded) falls in the same block of ep
 * consecutive positions; the EDP group those with the same position modulo ep. Group indices
 * number each kind's groups once each. tp 2, dp 4 x cp 2, pp 2 (32 ranks), ep 4 and 2, both
 * Megatron's order and dp outermost. */
START_TEST(test_ep_groups)
{
    static const gs_dim orders[2][GS_DIM_COUNT] = {{GS_DIM_TP, GS_DIM_DP, GS_DIM_PP}, {GS_DIM_PP, GS_DIM_TP, GS_DIM_DP}};
    gs_error err;
    gs_error_init(&err);
    for (int o = 0; o < 2; o++)
        for (uint64_t ep = 2; ep <= 4; ep *= 2) {
            gs_mesh m;
            ck_assert_int_eq(gs_mesh_init(&m, 2, 8, 2, orders[o], 8, &err), GS_OK);
            ck_assert_int_eq(gs_mesh_set_cp(&m, 2, 0, &err), GS_OK);
            ck_assert_int_eq(gs_mesh_set_ep(&m, 3, &err), GS_ERR_INPUT); /* 3 does not divide 8 */
            ck_assert_int_eq(gs_mesh_set_ep(&m, ep, &err), GS_OK);
            int seen_ep[32] = {0}, seen_edp[32] = {0};
            for (uint64_t r = 0; r < m.world; r++) {
                uint64_t c[GS_DIM_COUNT], mem[8], n, size;
                gs_mesh_rank_coords(&m, r, c);
                for (int kind = 0; kind < 2; kind++) {
                    gs_group_kind g = kind ? GS_GROUP_EDP : GS_GROUP_EP;
                    n = gs_group_members_of(&m, g, r, mem);
                    uint64_t idx = gs_group_of(&m, g, r, &size);
                    ck_assert_uint_eq(n, kind ? 8 / ep : ep);
                    ck_assert_uint_eq(size, n);
                    ck_assert_uint_lt(idx, 32 / n);
                    uint64_t expect = 0;
                    for (uint64_t r2 = 0; r2 < m.world; r2++) { /* brute force */
                        uint64_t c2[GS_DIM_COUNT];
                        gs_mesh_rank_coords(&m, r2, c2);
                        int same = c2[GS_DIM_TP] == c[GS_DIM_TP] && c2[GS_DIM_PP] == c[GS_DIM_PP] &&
                                   (kind ? c2[GS_DIM_DP] % ep == c[GS_DIM_DP] % ep
                                         : c2[GS_DIM_DP] / ep == c[GS_DIM_DP] / ep);
                        if (!same)
                            continue;
                        ck_assert_uint_lt(expect, n);
                        ck_assert_uint_eq(mem[expect], r2); /* ascending ranks */
                        expect++;
                    }
                    ck_assert_uint_eq(expect, n);
                    if (mem[0] == r)
                        (kind ? seen_edp : seen_ep)[idx]++;
                }
            }
            for (uint64_t i = 0; i < 32 / ep; i++)
                ck_assert_int_eq(seen_ep[i], 1);
            for (uint64_t i = 0; i < 32 / (8 / ep); i++)
                ck_assert_int_eq(seen_edp[i], 1);
        }
}
END_TEST

/* ---- scenarios ------------------------------------------------------------------------------ */

/* A 4-layer MoE model: hidden 256, 8 heads of 32 (2 KV heads), SwiGLU, 8 experts of 128, top 2,
 * sequence 256, on 2 DGX H100 nodes. */
#define TINY_MOE                                                                                               \
    "model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, ffn: 512, vocab: 1000, seq: 256, mlp: swiglu, "    \
    "moe: {experts: 8, top_k: 2, expert_ffn: 128%s}}\ncluster: {preset: dgx-h100, nodes: 2}\n"

static void load(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, &w, &err) == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
}

static void load_fails(const char *yaml, gs_status want, const char *needle)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    gs_status st = gs_scenario_load_string(yaml, strlen(yaml), "test", &s, &err);
    if (st == GS_OK)
        st = gs_scenario_mesh(&s, &m, NULL, &err);
    if (st == GS_OK)
        st = gs_scenario_check_schedule_size(&s, &m, gs_scenario_microbatches(&s), 0, &err);
    ck_assert_int_eq(st, want);
    ck_assert_msg(strstr(err.msg, needle), "%s", err.msg);
}

START_TEST(test_ep_scenario)
{
    char y[1024];
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true}\n"
             "batch: {global: 16}\n", "");
    gs_scenario s;
    gs_mesh m;
    load(y, &s, &m);
    ck_assert(s.grid.ep == 4 && m.ep == 4 && m.world == 16);
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 3, tp: 2}\nstrategy: {sequence_parallel: true}\n", "");
    load_fails(y, GS_ERR_INPUT, "must divide the 8 routed experts");
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: hybrid_shard, sequence_parallel: true}\n",
             "");
    load_fails(y, GS_ERR_INPUT, "sharding no_shard, zero1");
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, tp: 2}\nstrategy: {sharding: zero1}\n", "");
    load_fails(y, GS_ERR_INPUT, "sequence_parallel: true");
    load_fails("model: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 8, ep: 2}\n", GS_ERR_INPUT,
               "has no experts");
}
END_TEST

/* ---- partition ------------------------------------------------------------------------------ */

/* TINY_MOE, tp 2, ep 4: each EP rank holds 8 / 4 = 2 experts, each 3 linears of 256 x 128 / 2,
 * so its expert unit is 2 x 3 x 256 x 64 = 98,304 parameters; the block's other unit (attention,
 * norms, router) is what an ep 1 block holds less all 8 experts (8 x 49,152 = 393,216). */
START_TEST(test_ep_partition)
{
    char y[1024];
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true}\n",
             "");
    load(y, &s, &m);
    gs_partition p4, p1;
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p4, &err), GS_OK);
    m.ep = 1;
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p1, &err), GS_OK);
    ck_assert_uint_eq(p4.nunits, 2 * 4 + 1); /* 4 blocks x (dense, experts) + the root */
    ck_assert_uint_eq(p1.nunits, 4 + 1);
    for (int l = 0; l < 4; l++) {
        const gs_unit *d = &p4.units[2 * l], *e = &p4.units[2 * l + 1];
        ck_assert(!d->expert && e->expert && d->layer_begin == l && e->layer_begin == l);
        ck_assert_uint_eq(e->params, 98304);
        ck_assert_uint_eq(d->params + 8 * 49152, p1.units[l].params);
    }
    gs_partition_fini(&p4);
    gs_partition_fini(&p1);
}
END_TEST

/* ---- schedule ------------------------------------------------------------------------------- */

static gs_schedule *build(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    load(yaml, s, m);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(s, m, 1, &sch, &err) == GS_OK, "build: %s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, s, &err) == GS_OK, "validate: %s", err.msg);
    return sch;
}

/* Events of rank list i with role and phase: their count, bytes and FLOPs summed. */
static size_t role_events(const gs_schedule *sch, size_t i, int role, int phase, uint64_t *bytes, double *flops)
{
    size_t n = 0;
    *bytes = 0;
    *flops = 0.0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->role != role || e->phase != phase)
            continue;
        n++;
        *bytes += e->bytes;
        *flops += e->flops;
    }
    return n;
}

/* TINY_MOE on dp 8 x tp 2, ep 4, zero1, no recompute, 2 micro-batches of 1 sequence: 256 tokens,
 * 128 per TP rank under sequence parallelism, routed to 2 experts each: 256 rows of 256 x 2 B =
 * 131,072 B per all-to-all (4 blocks x 2 micro-batches = 8 dispatches forward); the expert-TP
 * gather carries tp x that, 262,144 B. The grouped GEMMs of one block and micro-batch run 512
 * gathered rows over 2 local experts (m = 256): up 2 x 256 x 128 x 256 x 2 = 33,554,432 FLOPs,
 * down 2 x 256 x 256 x 64 x 2 = 16,777,216, together 2 T k 3 h f_e / tp = 2 x 256 x 2 x 3 x 256 x
 * 128 / 2 = 50,331,648, the model's routed-expert FLOPs per TP rank. The traffic ledger's EP line:
 * 16 all-to-alls per micro-batch (4 blocks x dispatch, combine x forward, backward), each sending
 * 3/4 of 131,072 B: 2 x 16 x 98,304 = 3,145,728 B. The experts' gradients reduce over EDP groups
 * of 8 / 4 = 2 ranks, the rest over the 8 DP ranks. */
START_TEST(test_ep_schedule)
{
    char y[1024];
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, "
             "recompute: none, flash_attention: true}\nbatch: {global: 16}\n", "");
    gs_scenario s;
    gs_mesh m;
    gs_schedule *sch = build(y, &s, &m);
    uint64_t b;
    double f;
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 131072);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_COMBINE, GS_PHASE_BWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 131072);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_ETP_IN, GS_PHASE_FWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 262144);
    double up, down;
    role_events(sch, 3, GS_ROLE_EXPERT_UP, GS_PHASE_FWD, &b, &up);
    role_events(sch, 3, GS_ROLE_EXPERT_DOWN, GS_PHASE_FWD, &b, &down);
    ck_assert_double_eq(up, 8.0 * 33554432.0);
    ck_assert_double_eq(down, 8.0 * 16777216.0);
    ck_assert_double_eq(up + down, 8.0 * 2.0 * 256 * 2 * 3 * 256 * 128 / 2);
    role_events(sch, 3, GS_ROLE_EXPERT_UP, GS_PHASE_BWD, &b, &f);
    ck_assert_double_eq(f, 2.0 * up); /* data and weight gradients */
    /* the permutations (bf16, 2 B; 128 tokens x top-2 = 256 routed rows of 256): permute reads and
     * writes them (2 x 2 x 256 x 256 = 262,144 B), unpermute weights, zero-fills and scatter-adds
     * (5 x 2 x 65,536 + 2 x 128 x 256 = 720,896 B); with 2 local experts each part also regroups
     * the 512 rows the expert-TP gather assembled (2 x 2 x 512 x 256 = 524,288 B: Megatron sorts
     * after the gather and unsorts before the reduce-scatter), per block and micro-batch */
    role_events(sch, 3, GS_ROLE_MOE_PERMUTE, GS_PHASE_FWD, &b, &f);
    ck_assert_uint_eq(b, 8ull * (262144 + 720896 + 2 * 524288));
    gs_ledger *l = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_EP], 3145728ull);
    gs_ledger_destroy(l);
    /* the gradient reductions: expert units over EDP (2 ranks), the others over DP (8) */
    size_t edp = 0, dp = 0;
    for (size_t k = 0; k < sch->ranks[3].nevents; k++) {
        const gs_event *e = &sch->ranks[3].events[k];
        if (e->role != GS_ROLE_GRAD_REDUCE_SCATTER && e->role != GS_ROLE_GRAD_BUCKET_REDUCE &&
            e->role != GS_ROLE_GRAD_CHUNK_REDUCE)
            continue;
        if (e->group == GS_GROUP_EDP) {
            ck_assert_uint_eq(e->group_size, 2);
            edp++;
        } else {
            ck_assert_uint_eq(e->group, GS_GROUP_DP);
            ck_assert_uint_eq(e->group_size, 8);
            dp++;
        }
    }
    ck_assert(edp >= 4 && dp >= 4); /* at least one per block of each kind */
    /* sequence parallelism's all-reduce of the replicated weights' gradients: 4 blocks x 2 RMSNorms
     * of 256, the final norm (one stage), and each MoE block's router, 256 x 8: 10,496 gradients */
    uint64_t ar = 0;
    for (size_t k = 0; k < sch->ranks[3].nevents; k++)
        if (sch->ranks[3].events[k].role == GS_ROLE_TP_NORM_GRADS)
            ar += sch->ranks[3].events[k].bytes;
    ck_assert_uint_eq(ar, 10496ull * gs_grad_bytes(&s.strategy));
    gs_schedule_destroy(sch);
}
END_TEST

/* TINY_MOE on dp 16, ep 4, sharded as FSDP2, FSDP1, DeepSpeed ZeRO-2 and ZeRO-3 (torchtitan and
 * DeepSpeed-MoE shard the experts over the ranks holding the same ones): each expert unit,
 * 2 experts x 3 x 256 x 128 = 196,608 parameters, is gathered (FSDP, ZeRO-3) and its gradient
 * reduce-scattered over its EDP group of 16 / 4 = 4 ranks (bf16: 4 x 49,152 x 2 = 393,216 B per
 * gather), every other unit over the 16 DP ranks; the schedules validate against the ledgers. */
START_TEST(test_ep_sharded)
{
    static const char *const strat[4] = {"framework: fsdp2, sharding: full_shard", "framework: fsdp1, sharding: full_shard",
                                         "framework: deepspeed, sharding: zero2", "framework: deepspeed, sharding: zero3"};
    for (int k = 0; k < 4; k++) {
        char y[1024];
        snprintf(y, sizeof y, TINY_MOE "grid: {dp: 16, ep: 4}\nstrategy: {%s, wrap: layer, recompute: none}\n"
                 "batch: {global: 32}\n", "", strat[k]);
        gs_scenario s;
        gs_mesh m;
        gs_schedule *sch = build(y, &s, &m);
        size_t ex_ag = 0, ex_rs = 0, dense = 0;
        for (size_t i = 0; i < sch->ranks[0].nevents; i++) {
            const gs_event *e = &sch->ranks[0].events[i];
            if (e->role != GS_ROLE_UNIT_GATHER && e->role != GS_ROLE_GRAD_REDUCE_SCATTER)
                continue;
            if (e->group == GS_GROUP_EDP) {
                ck_assert_uint_eq(e->group_size, 4);
                if (e->role == GS_ROLE_UNIT_GATHER) {
                    ck_assert_uint_eq(e->bytes, 393216);
                    ex_ag++;
                } else {
                    ex_rs++;
                }
            } else {
                ck_assert_uint_eq(e->group_size, 16);
                dense++;
            }
        }
        ck_assert_msg(ex_rs >= 4 && dense >= 4, "%s: %zu expert reductions, %zu dense", strat[k], ex_rs, dense);
        ck_assert_msg(k == 2 ? ex_ag == 0 : ex_ag >= 4, "%s: %zu expert gathers", strat[k], ex_ag);
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* An expert-data-parallel group of one under a sharded strategy: TINY_MOE on dp 8 x tp 2 with ep 8
 * (ep = dp: each rank's one expert is no other rank's), as torchtitan shards experts on its
 * dp_shard_mod_ep mesh of size 1. The experts are held whole: no collective gathers or reduces
 * their units (the builders use them in place), while the dense units' run on the 8 DP ranks; the
 * schedule validates against the ledger (its traffic, and its memory high-water mark equal to the
 * ledger's peak, whose gather terms leave the whole experts out and whose transient gradients
 * are freed by each unit's last backward event). FSDP2 full_shard, FSDP1 shard_grad_op (units
 * kept gathered), DeepSpeed ZeRO-3 and ZeRO-2. Where the parameters are sharded (all but ZeRO-2),
 * a rank's expert parameters are the same as under ep 4 (2 experts sharded over an EDP group of
 * 2): 3 x 256 x 128 / tp 2 = 49,152 per block either way, so the ledgers' parameter bytes are
 * equal. */
START_TEST(test_ep_sharded_whole)
{
    static const char *const strat[4] = {"framework: fsdp2, sharding: full_shard",
                                         "framework: fsdp1, sharding: shard_grad_op",
                                         "framework: deepspeed, sharding: zero3", "framework: deepspeed, sharding: zero2"};
    for (int k = 0; k < 8; k++) {
        int ep = k % 2 ? 4 : 8;
        char y[1024];
        snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: %d, tp: 2}\nstrategy: {%s, wrap: layer, sequence_parallel: "
                 "true, recompute: none}\nbatch: {global: 16}\n", "", ep, strat[k / 2]);
        gs_scenario s;
        gs_mesh m;
        gs_schedule *sch = build(y, &s, &m);
        ck_assert_uint_eq(gs_mesh_edp_size(&m), ep == 8 ? 1 : 2);
        size_t expert = 0, dense = 0;
        for (size_t i = 0; i < sch->ranks[0].nevents; i++) {
            const gs_event *e = &sch->ranks[0].events[i];
            if (e->kind != GS_EV_COLLECTIVE || (e->group != GS_GROUP_EDP && e->group != GS_GROUP_DP))
                continue;
            if (e->group == GS_GROUP_EDP) {
                ck_assert_uint_eq(e->group_size, 2);
                expert++;
            } else {
                ck_assert_uint_eq(e->group_size, 8);
                dense++;
            }
        }
        ck_assert_msg(ep == 8 ? expert == 0 : expert >= 4, "%s, ep %d: %zu expert collectives", strat[k / 2], ep,
                      expert);
        ck_assert_msg(dense >= 4, "%s, ep %d: %zu dense collectives", strat[k / 2], ep, dense);
        gs_schedule_destroy(sch);
        gs_ledger *l = NULL;
        gs_error err;
        gs_error_init(&err);
        ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
        static uint64_t params8;
        if (ep == 8)
            params8 = l->ranks[0].mem[GS_MEM_PARAMS];
        else if (k / 2 != 3) /* ZeRO-2 keeps whole parameters: ep 4 holds 2 experts to ep 8's 1 */
            ck_assert_uint_eq(l->ranks[0].mem[GS_MEM_PARAMS], params8);
        gs_ledger_destroy(l);
    }
}
END_TEST

/* The allgather dispatcher on TINY_MOE, dp 8 x tp 2, ep 4 (zero1, no recompute, 2 micro-batches of
 * 1 sequence): its group is the tp x ep = 8 ranks of 4 DP positions (rank 3's: ranks 0 to 7).
 * Each rank's share is its 128 sequence-parallel tokens: forward the dispatch gathers 128 x
 * (256 x 2 B + 5 B x 8 experts) = 70,656 B from each of the 8 (565,248 B) and the combine
 * reduce-scatters 8 x 128 x 512 = 524,288 B; backward the dispatch reduce-scatters 8 x 128 x
 * (512 + 4 x 8) = 557,056 B; no expert-TP exchange. The experts run the same 512 rows as under the
 * all-to-all (the same FLOPs). The ep line: 7 x 128 x ((552 + 512) + (544 + 512)) B x 4 blocks x
 * 2 micro-batches = 15,196,160 B. */
START_TEST(test_ep_allgather)
{
    char y[1024];
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, "
             "recompute: none, flash_attention: true, moe_dispatcher: allgather}\nbatch: {global: 16}\n", "");
    gs_scenario s;
    gs_mesh m;
    gs_schedule *sch = build(y, &s, &m);
    uint64_t b, mem[8];
    double f, up;
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_TPEP, 3, mem), 8);
    for (uint64_t i = 0; i < 8; i++)
        ck_assert_uint_eq(mem[i], i);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 565248);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_COMBINE, GS_PHASE_FWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 524288);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_DISPATCH, GS_PHASE_BWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 557056);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_ETP_IN, GS_PHASE_FWD, &b, &f), 0);
    role_events(sch, 3, GS_ROLE_EXPERT_UP, GS_PHASE_FWD, &b, &up);
    ck_assert_double_eq(up, 8.0 * 33554432.0);
    for (size_t k = 0; k < sch->ranks[3].nevents; k++) {
        const gs_event *e = &sch->ranks[3].events[k];
        if (e->role == GS_ROLE_EP_DISPATCH)
            ck_assert_int_eq(e->op, e->phase == GS_PHASE_BWD ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLGATHER);
        if (e->role == GS_ROLE_EP_COMBINE)
            ck_assert_int_eq(e->op, e->phase == GS_PHASE_BWD ? GS_COLL_ALLGATHER : GS_COLL_REDUCE_SCATTER);
    }
    gs_ledger *l = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_EP], 15196160ull);
    gs_ledger_destroy(l);
    gs_schedule_destroy(sch);
    /* dp inside tp: the tp x ep ranks are no arithmetic progression, refused with the reason */
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2, order: dp-tp-pp, allow_tp_cross_node: true}\n"
             "strategy: {sharding: zero1, sequence_parallel: true, moe_dispatcher: allgather}\n", "");
    load_fails(y, GS_ERR_INPUT, "needs tp directly inside dp");
}
END_TEST

/* The flex dispatcher under expert TP 2 (Megatron-Core's MoEFlexTokenDispatcher over its tp_ep
 * group, the routing map replicated over each expert's ETP ranks): TINY_MOE on dp 8 x tp 2, ep 4.
 * Each of a rank's 128 tokens picks 2 of 8 experts; an EP position holds 2, so it hits
 * 4 x (1 - C(6, 2) / C(8, 2)) = 4 x 13 / 28 = 1.857143 positions, 2 ranks each: 3.714286 rows a
 * token, ceil(256 x 3.714286 / 2) = 476 rows of 256 x 2 B = 243,712 B a dispatch, over the 8
 * ranks of the ETP x EP group (one node: nothing leaves it). No expert-TP gather or reduce-scatter
 * runs (the combine sums the ETP ranks' partial outputs); the experts' GEMMs are the all-to-all
 * dispatcher's (512 gathered rows over 2 local experts). The EP line: 16 exchanges a micro-batch,
 * each 7/8 of 243,712 B, x 2 micro-batches = 6,823,936 B; the TP line loses the all-to-all
 * dispatcher's expert-TP part, 16 x 131,072 B x 2 micro-batches = 4,194,304 B. */
START_TEST(test_ep_flex_expert_tp)
{
    char y[1024];
    gs_scenario s, s0;
    gs_mesh m, m0;
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, "
             "recompute: none, flash_attention: true, moe_dispatcher: flex}\nbatch: {global: 16}\n", "");
    gs_schedule *sch = build(y, &s, &m);
    uint64_t b;
    double f, up;
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 243712);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_EP_COMBINE, GS_PHASE_BWD, &b, &f), 8);
    ck_assert_uint_eq(b, 8ull * 243712);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_ETP_IN, GS_PHASE_FWD, &b, &f), 0);
    ck_assert_uint_eq(role_events(sch, 3, GS_ROLE_ETP_OUT, GS_PHASE_FWD, &b, &f), 0);
    role_events(sch, 3, GS_ROLE_EXPERT_UP, GS_PHASE_FWD, &b, &up);
    ck_assert_double_eq(up, 8.0 * 33554432.0);
    for (size_t k = 0; k < sch->ranks[3].nevents; k++) {
        const gs_event *e = &sch->ranks[3].events[k];
        if (e->role == GS_ROLE_EP_DISPATCH || e->role == GS_ROLE_EP_COMBINE) {
            ck_assert_int_eq(e->group, GS_GROUP_TPEP);
            ck_assert_uint_eq(e->group_size, 8);
            ck_assert(e->net_share == 0.0f);
        }
    }
    gs_ledger *l = NULL, *l0 = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ledger_create(&s, &m, &l, &err), GS_OK);
    ck_assert_uint_eq(l->ranks[0].traffic[GS_TRAFFIC_EP], 6823936ull);
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, "
             "recompute: none, flash_attention: true}\nbatch: {global: 16}\n", "");
    load(y, &s0, &m0);
    ck_assert_int_eq(gs_ledger_create(&s0, &m0, &l0, &err), GS_OK);
    ck_assert_uint_eq(l0->ranks[0].traffic[GS_TRAFFIC_TP] - l->ranks[0].traffic[GS_TRAFFIC_TP], 4194304ull);
    gs_ledger_destroy(l);
    gs_ledger_destroy(l0);
    gs_schedule_destroy(sch);
    /* dp inside tp: the tp x ep ranks are no arithmetic progression, refused with the reason */
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8, ep: 4, tp: 2, order: dp-tp-pp, allow_tp_cross_node: true}\n"
             "strategy: {sharding: zero1, sequence_parallel: true, moe_dispatcher: flex}\n", "");
    load_fails(y, GS_ERR_INPUT, "needs tp directly inside dp");
}
END_TEST

/* Routing skew 0.5 makes the busiest EP rank take 1.5 x the rows: 384 per all-to-all
 * (196,608 B); a capacity factor of 1.25 caps it at 320 (163,840 B). */
START_TEST(test_ep_skew)
{
    char y[1024];
    const char *rest = "grid: {dp: 8, ep: 4, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true, "
                       "recompute: none}\nbatch: {global: 16}\n";
    gs_scenario s;
    gs_mesh m;
    uint64_t b;
    double f;
    char moe[64];
    snprintf(moe, sizeof moe, ", routing_skew: 0.5");
    snprintf(y, sizeof y, TINY_MOE "%s", moe, rest);
    gs_schedule *sch = build(y, &s, &m);
    role_events(sch, 0, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f);
    ck_assert_uint_eq(b, 8ull * 196608);
    gs_schedule_destroy(sch);
    snprintf(moe, sizeof moe, ", routing_skew: 0.5, capacity_factor: 1.25");
    snprintf(y, sizeof y, TINY_MOE "%s", moe, rest);
    sch = build(y, &s, &m);
    role_events(sch, 0, GS_ROLE_EP_DISPATCH, GS_PHASE_FWD, &b, &f);
    ck_assert_uint_eq(b, 8ull * 163840);
    gs_schedule_destroy(sch);
}
END_TEST

/* ---- Megatron-LM's flags ------------------------------------------------------------------- */

/* Mixtral 8x7B on 2 nodes of 8 with tp 2 and ep 4, the first block dense: read, emitted, read
 * back to the same model and grid. */
START_TEST(test_ep_megatron)
{
    gs_scenario s, b;
    gs_mesh m;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "mixtral-8x7b";
    o.nodes = 2;
    gs_error_init(&err);
    gs_diag_init(&ig);
    const char *cmd = "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 4 "
                      "--num-experts 8 --moe-router-topk 2 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
                      "--moe-layer-freq '([0]*1+[1]*31)' --moe-expert-capacity-factor 1.5 --use-distributed-optimizer "
                      "--bf16";
    ck_assert_msg(gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.grid.tp == 2 && s.grid.ep == 4 && s.grid.dp == 8);
    ck_assert(s.model.moe.experts == 8 && s.model.moe.top_k == 2 && s.model.moe.dense_layers == 1);
    ck_assert_double_eq(s.model.moe.capacity_factor, 1.5);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall"), "%s",
                  gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.grid.ep == 4 && b.model.moe.experts == 8 && b.model.moe.dense_layers == 1 && b.model.moe.top_k == 2);
    ck_assert_double_eq(b.model.moe.capacity_factor, 1.5);
    gs_text_fini(&t);
    /* Megatron-LM's default dispatcher is allgather; flex with the DeepEP backend (its default)
     * and the routing groups are read */
    ck_assert_msg(gs_import_megatron_args("--num-experts 8 --tensor-model-parallel-size 2 --sequence-parallel",
                                          "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.moe_dispatcher, GS_MOE_ALLGATHER);
    ck_assert_msg(gs_import_megatron_args("--num-experts 8 --moe-token-dispatcher-type flex --moe-router-num-groups 4 "
                                          "--moe-router-group-topk 2",
                                          "run.sh", &o, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.moe_dispatcher, GS_MOE_FLEX);
    ck_assert(s.model.moe.groups == 4 && s.model.moe.group_topk == 2);
    ck_assert_int_eq(gs_import_megatron_args("--num-experts 8 --moe-token-dispatcher-type deepep", "run.sh", &o, &s, &ig,
                                             &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "expected alltoall, allgather or flex"), "%s", err.msg);
    ck_assert_int_eq(gs_import_megatron_args("--num-experts 8 --moe-token-dispatcher-type alltoall "
                                             "--tensor-model-parallel-size 2 --expert-tensor-parallel-size 3",
                                             "run.sh", &o, &s, &ig, &err), GS_ERR_INPUT);
    gs_diag_fini(&ig);
}
END_TEST

/* --moe-layer-freq in Megatron-LM's forms (megatron/training/arguments.py moe_freq_type: an int k
 * places a MoE block at every k-th block from block 0, a string is a Python list expression),
 * each as (dense_layers, every) by hand for 8 blocks; patterns whose MoE blocks do not come at a
 * fixed step after the leading dense ones are refused at the flag. Llama 4 Maverick's layout
 * (dense_layers 1, every 2 over 48 blocks) is emitted and read back. */
START_TEST(test_moe_layer_freq)
{
    static const struct {
        const char *freq;
        uint64_t dense, every; /* 0, 0: refused */
    } cases[] = {
        {"1", 0, 1},
        {"2", 0, 2},
        {"'([0]*1+[1]*1)*4'", 1, 2},
        {"'[1,0,0,1,0,0,1,0]'", 0, 3},
        {"'[0]*3+[1]*5'", 3, 1},
        {"\"[0]*2+([1]*1+[0]*2)*2\"", 2, 3},
        {"'[0]*7+[1]'", 7, 1},
        {"'[0,1,1,0,1,1,0,1]'", 0, 0},  /* no fixed step */
        {"'[0]*8'", 0, 0},              /* no MoE block */
        {"'([0]*1+[1]*1)*3'", 0, 0},    /* 6 entries for 8 blocks */
        {"'[0]*2+[1]*3+[2]*3'", 0, 0},  /* not 0/1 */
        {"9", 0, 0},                    /* past the blocks */
    };
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "mixtral-8x7b";
    o.nodes = 1;
    gs_diag ig;
    gs_error err;
    gs_diag_init(&ig);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[256];
        gs_scenario s;
        snprintf(cmd, sizeof cmd, "--num-layers 8 --hidden-size 4096 --num-attention-heads 32 --num-experts 8 "
                 "--moe-router-topk 2 --moe-layer-freq %s",
                 cases[i].freq);
        gs_status rc = gs_import_megatron_args(cmd, "run.sh", &o, &s, &ig, &err);
        if (!cases[i].every) {
            ck_assert_msg(rc == GS_ERR_INPUT && strstr(err.msg, "--moe-layer-freq"), "%s: %s", cases[i].freq,
                          rc == GS_OK ? "accepted" : err.msg);
            continue;
        }
        ck_assert_msg(rc == GS_OK, "%s: %s", cases[i].freq, err.msg);
        ck_assert_msg(s.model.moe.dense_layers == cases[i].dense && s.model.moe.every == cases[i].every,
                      "%s: dense %llu every %llu", cases[i].freq, (unsigned long long)s.model.moe.dense_layers,
                      (unsigned long long)s.model.moe.every);
    }
    /* Maverick out and back: the pattern Megatron would eval, then the same layout */
    gs_scenario s, b;
    gs_mesh m;
    o.model = "llama4-maverick";
    o.nodes = 2;
    load("model: {preset: llama4-maverick}\ncluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 16, ep: 8}\n"
         "strategy: {sharding: zero1, moe_dispatcher: alltoall}\nbatch: {global: 16, micro: 1}\n",
         &s, &m);
    ck_assert(s.model.moe.dense_layers == 1 && s.model.moe.every == 2);
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "--moe-layer-freq \"[0]*1+([1]*1+[0]*1)*23+[1]*1\""), "%s",
                  gs_text_str(&t));
    ck_assert_msg(gs_import_megatron_args(gs_text_str(&t), "emitted", &o, &b, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(b.model.moe.dense_layers == 1 && b.model.moe.every == 2 && b.model.moe.experts == 128);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
}
END_TEST

/* ---- the simulated step ------------------------------------------------------------------- */

static double step(const char *yaml, gs_report *rep)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load(yaml, &s, &m);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    ck_assert_msg(gs_sim_scenario(&s, &m, 0, &bo, rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
    return rep->step_time_s;
}

/* A Mixtral-shaped model at 4k tokens on 2 DGX H100 nodes, 16 experts, tp 1. A skewed router
 * (the busiest rank 1.5 x the mean) slows the step; capping the experts' capacity at the mean
 * (capacity factor 1.0) gives exactly the balanced schedule, so exactly its step; an EP group of
 * 16 spans both nodes and sends half its all-to-all over InfiniBand, where one of 8 stays on
 * NVLink: its all-to-alls take more than twice as long. */
START_TEST(test_ep_sim)
{
    const char *fmt = "model: {preset: mixtral-8x7b, layers: 8, seq: 4096, moe: {experts: 16%s}}\n"
                      "cluster: {preset: dgx-h100, nodes: 2}\ngrid: {dp: 16, ep: %d}\n"
                      "strategy: {sharding: zero1, recompute: full}\nbatch: {global: 32}\n";
    char y[768];
    gs_report a, b, c, d;
    snprintf(y, sizeof y, fmt, "", 8);
    step(y, &a);
    snprintf(y, sizeof y, fmt, ", routing_skew: 0.5", 8);
    step(y, &b);
    ck_assert_msg(b.step_time_s > 1.05 * a.step_time_s, "skewed %g s, balanced %g s", b.step_time_s, a.step_time_s);
    snprintf(y, sizeof y, fmt, ", routing_skew: 0.5, capacity_factor: 1.0", 8);
    step(y, &c);
    ck_assert_double_eq(c.step_time_s, a.step_time_s);
    snprintf(y, sizeof y, fmt, "", 16);
    step(y, &d);
    ck_assert_msg(d.comm_s[GS_DIM_TP] > 2.0 * a.comm_s[GS_DIM_TP], "ep 16 %g s, ep 8 %g s", d.comm_s[GS_DIM_TP],
                  a.comm_s[GS_DIM_TP]);
}
END_TEST

/* ---- the planner ------------------------------------------------------------------------ */

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

/* TINY_MOE (8 experts) on one node of 8 under Megatron-LM's distributed optimizer: the plan
 * searches ep over every value dividing both dp and the experts (1, 2, 4, 8 where dp allows), so
 * its simulated candidates hold several; each one's step, simulated again from its own scenario,
 * is the plan's (no extrapolation). */
START_TEST(test_ep_plan)
{
    char y[1024];
    snprintf(y, sizeof y, TINY_MOE "grid: {dp: 8}\nstrategy: {framework: megatron, sharding: zero1}\n"
             "batch: {global: 16, micro: 1}\n", "");
    memcpy(strstr(y, "nodes: 2"), "nodes: 1", 8);
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(y, strlen(y), "test", &s, &err) == GS_OK, "%s", err.msg);
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.eval = eval_sim;
    o.no_extrapolate = 1;
    o.sharding_mask = 1u << GS_SHARD_ZERO1;
    o.micro.v[0] = 1;
    o.micro.n = 1;
    gs_plan *p = NULL;
    ck_assert_msg(gs_plan_run(&s, &o, &p, &err) == GS_OK, "%s", err.msg);
    int seen[9] = {0}, etp1 = 0;
    for (size_t i = 0; i < p->ncands; i++) {
        const gs_plan_candidate *c = &p->cands[i];
        /* expert TP 1 (searched beside tp under TP) spreads ep over tp x dp x cp ranks */
        uint64_t ranks = (c->etp ? c->tp / c->etp : 1) * c->dp * c->cp;
        ck_assert(c->ep >= 1 && c->ep <= 8 && 8 % c->ep == 0 && ranks % c->ep == 0);
        ck_assert(c->etp == 0 || (c->etp == 1 && c->tp > 1));
        seen[c->ep]++;
        etp1 += c->etp == 1;
    }
    ck_assert_msg(seen[1] && seen[2] && seen[4] && seen[8], "ep 1 %d, 2 %d, 4 %d, 8 %d", seen[1], seen[2], seen[4],
                  seen[8]);
    ck_assert(etp1 > 0);
    size_t first_etp = 0;
    while (first_etp < p->ncands && p->cands[first_etp].etp != 1)
        first_etp++;
    for (size_t k = 0; k < 4; k++) { /* the top 3 and the best with expert TP 1: the plan's step is sim's */
        size_t i = k < 3 ? k : first_etp;
        if (i >= p->ncands)
            continue;
        const gs_plan_candidate *c = &p->cands[i];
        gs_scenario w = s;
        gs_mesh m;
        gs_report r;
        w.grid.dp = c->dp;
        w.grid.pp = c->pp;
        w.grid.tp = c->tp;
        w.grid.ep = c->ep;
        w.grid.etp = c->etp;
        w.strategy = c->strategy;
        w.batch.micro_seqs = c->micro;
        ck_assert_msg(gs_scenario_mesh(&w, &m, NULL, &err) == GS_OK, "%s", err.msg);
        ck_assert_int_eq(gs_sim_scenario(&w, &m, 0, NULL, &r, NULL, &err), GS_OK);
        ck_assert_double_eq(r.step_time_s, c->step_time_s);
        gs_report_fini(&r);
    }
    gs_plan_destroy(p);
}
END_TEST

static Suite *ep_suite(void)
{
    Suite *s = suite_create("ep");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ep_groups);
    tcase_add_test(tc, test_ep_scenario);
    tcase_add_test(tc, test_ep_partition);
    tcase_add_test(tc, test_ep_schedule);
    tcase_add_test(tc, test_ep_sharded);
    tcase_add_test(tc, test_ep_sharded_whole);
    tcase_add_test(tc, test_ep_allgather);
    tcase_add_test(tc, test_ep_flex_expert_tp);
    tcase_add_test(tc, test_ep_skew);
    tcase_add_test(tc, test_ep_megatron);
    tcase_add_test(tc, test_moe_layer_freq);
    tcase_add_test(tc, test_ep_sim);
    tcase_add_test(tc, test_ep_plan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ep_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
