/* Check suite for the schedule builders (engine/build*.c): event counts per strategy derived by
 * hand in the comments, and gs_schedule_validate (structure + both ledger equalities) on every
 * built schedule, over a grid of strategies on both the class and the exact path. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/partition.h"
#include "engine/roles.h"
#include "engine/schedule.h"

/* 4 layers, h 256, 4 heads, ffn 512, vocab 1000, seq 64: small enough to build exactly. */
#define SMALL "model: {layers: 4, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"

static int depends_on(const gs_rank_events *r, size_t ev, size_t on);

static gs_scenario g_s;
static gs_mesh g_m;

static gs_schedule *build(const char *yaml, int exact)
{
    gs_error err;
    gs_error_init(&err);
    gs_diag w;
    gs_diag_init(&w);
    gs_status st = gs_scenario_load_string(yaml, strlen(yaml), "test", &g_s, &err);
    ck_assert_msg(st == GS_OK, "load: %s", err.msg);
    st = gs_scenario_mesh(&g_s, &g_m, &w, &err);
    ck_assert_msg(st == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
    gs_schedule *sch = NULL;
    st = gs_schedule_build(&g_s, &g_m, exact, &sch, &err);
    ck_assert_msg(st == GS_OK, "build: %s", err.msg);
    st = gs_schedule_validate(sch, &g_s, &err);
    ck_assert_msg(st == GS_OK, "validate: %s\n%s", err.msg, yaml);
    return sch;
}

/* Events of rank list i matching kind (and, for collectives, op and group; -1 = any). */
static size_t count(const gs_schedule *sch, size_t i, gs_event_kind kind, int op, int group)
{
    size_t n = 0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind != kind)
            continue;
        if (op >= 0 && e->op != op)
            continue;
        if (group >= 0 && e->group != group)
            continue;
        n++;
    }
    return n;
}

static size_t count_phase(const gs_schedule *sch, size_t i, gs_phase phase)
{
    size_t n = 0;
    const gs_rank_events *r = &sch->ranks[i];
    for (size_t k = 0; k < r->nevents; k++)
        n += r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == phase;
    return n;
}

/* 1F1B and GPipe, p = 4, m = 8: every micro-batch crosses each of the 3 boundaries forward and
 * backward: stage 0 sends 8 activations and receives 8 gradients; stages 1 and 2 send and
 * receive 16; stage 3 sends 8 gradients. 2 m (p - 1) = 48 sends in all. */
START_TEST(test_pipeline_sends)
{
    static const char *kinds[] = {"1f1b", "gpipe"};
    for (int k = 0; k < 2; k++) {
        char y[512];
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {pp: 4}\n"
                              "strategy: {sharding: no_shard, pipeline: %s}\nbatch: {global: 8}\n", kinds[k]);
        gs_schedule *sch = build(y, 0);
        ck_assert_uint_eq(sch->nranks, 4);
        static const size_t sends[4] = {8, 16, 16, 8};
        size_t total = 0;
        for (size_t i = 0; i < 4; i++) {
            ck_assert_uint_eq(count(sch, i, GS_EV_SEND, -1, -1), sends[i]);
            ck_assert_uint_eq(count(sch, i, GS_EV_RECV, -1, -1), sends[i]);
            total += sends[i];
        }
        ck_assert_uint_eq(total, 2 * 8 * 3);
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* Interleaved 1F1B, p = 2, v = 2, m = 4: each stage runs m v = 8 forward and 8 backward chunk
 * passes. Stage 0: all 8 forward passes have a next stage (chunk 0 -> stage 1 chunk 0, chunk 1
 * -> stage 1 chunk 1), only chunk 1's 4 backward passes have a previous one: 12 sends. Stage 1:
 * chunk 0's 4 forwards go to stage 0 chunk 1, all 8 backwards have a previous stage: 12. The
 * p2p count is v times 1F1B's, less the two pipeline ends: 2 m v - m = 12. */
START_TEST(test_interleaved_sends)
{
    gs_schedule *sch = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 2}\ngrid: {pp: 2}\n"
                                   "strategy: {sharding: no_shard, pipeline: interleaved, virtual_stages: 2}\n"
                                   "batch: {global: 4}\n", 0);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_uint_eq(count(sch, i, GS_EV_SEND, -1, -1), 12);
        ck_assert_uint_eq(count(sch, i, GS_EV_RECV, -1, -1), 12);
    }
    gs_schedule_destroy(sch);
}
END_TEST

/* FULL_SHARD, dp = 4, per-layer wrap, m = 2: 5 units (4 blocks + the root: embedding, final norm,
 * head). All-gathers: the root once, each block before each forward and each backward pass:
 * 1 + 4 x 2 x 2 = 17. Reduce-scatters: every micro-batch by default (sharded gradients): 10;
 * grad_sync last (no_sync): one per unit = 5. SHARD_GRAD_OP gathers each unit once: 5. */
START_TEST(test_fsdp_counts)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\nbatch: {global: 8}\n";
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: full_shard}\n", base);
    gs_schedule *sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_DP), 17);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP), 10);
    gs_schedule_destroy(sch);
    snprintf(y, sizeof y, "%sstrategy: {sharding: full_shard, grad_sync: last}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP), 5);
    gs_schedule_destroy(sch);
    snprintf(y, sizeof y, "%sstrategy: {sharding: shard_grad_op, grad_sync: last}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_DP), 5);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP), 5);
    gs_schedule_destroy(sch);
    /* CPU offload: one host-to-device copy per all-gather, one device-to-host per reduce-scatter */
    snprintf(y, sizeof y, "%sstrategy: {sharding: full_shard, offload: true}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COPY_H2D, -1, -1), 17);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COPY_D2H, -1, -1), 10);
    gs_schedule_destroy(sch);
}
END_TEST

/* Events of rank list i with role `role`. */
static size_t count_role(const gs_schedule *sch, size_t i, gs_role role)
{
    size_t n = 0;
    for (size_t k = 0; k < sch->ranks[i].nevents; k++)
        n += sch->ranks[i].events[k].role == role;
    return n;
}

/* PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py) copies on the
 * compute stream around its collectives, DeepSpeed ZeRO-3 after its gathers only (its gradient
 * copies run on a side stream); FSDP1 and Megatron-FSDP do not. FULL_SHARD,
 * dp = 4, m = 2, bf16 parameters, fp32 gradients, as test_fsdp_counts: 17 all-gathers, each used
 * by a layer, so 17 copy-outs (foreach_all_gather_copy_out), each reading and writing its
 * gather's output: 2 x the gather's bytes; 10 reduce-scatters, each after a copy-in
 * (foreach_reduce's chunk_cat) that reads the bf16 gradient (2 bytes an element) and writes the
 * fp32 input (4): 6 / 4 of the reduce-scatter's bytes. A copy-out waits for its gather and sits
 * on the compute stream right before its layer's first event; a copy-in waits for its unit's
 * last backward event and the reduce-scatter waits for it. */
START_TEST(test_fsdp2_copies)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\nbatch: {global: 8}\n";
    /* the last: Megatron-LM's --use-torch-fsdp2, FSDP2's fully_shard under Megatron's kernels */
    static const char *const fw[] = {"fsdp2", "deepspeed", "megatron", "fsdp1", "auto", "megatron"};
    for (int f = 0; f < 6; f++) {
        char y[512];
        /* DeepSpeed as ZeRO-3 with FSDP's layer units, so the gathers are test_fsdp_counts' */
        snprintf(y, sizeof y, "%sstrategy: {framework: %s, sharding: %s, precision: bf16, grad_dtype: fp32%s}\n",
                 base, fw[f], f == 1 ? "zero3" : "full_shard",
                 f == 1 ? ", wrap: layer" : f == 5 ? ", torch_fsdp2: true" : "");
        gs_schedule *sch = build(y, 0);
        const gs_rank_events *r = &sch->ranks[0];
        size_t outs = count_role(sch, 0, GS_ROLE_UNIT_COPY_OUT), ins = count_role(sch, 0, GS_ROLE_GRAD_COPY_IN);
        if (f >= 2 && f < 5) { /* Megatron-FSDP; FSDP1 (auto resolves full_shard to it) */
            ck_assert_uint_eq(outs, 0);
            ck_assert_uint_eq(ins, 0);
            gs_schedule_destroy(sch);
            continue;
        }
        ck_assert_uint_eq(outs, 17);
        ck_assert_uint_eq(ins, f == 1 ? 0 : 10);
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            if (e->role == GS_ROLE_UNIT_COPY_OUT) {
                ck_assert_int_eq(e->stream, GS_STREAM_COMPUTE);
                const uint32_t *deps = gs_event_list(r, e, GS_LINK_DEPS);
                ck_assert_uint_eq(e->nlinks[GS_LINK_DEPS], 1);
                const gs_event *g = &r->events[deps[0]];
                ck_assert_int_eq(g->role, GS_ROLE_UNIT_GATHER);
                ck_assert_uint_eq(g->unit, e->unit);
                ck_assert_uint_eq(e->bytes, 2 * g->bytes);
                /* the next compute-stream event is the layer's own (the root's: the embedding) */
                size_t n = k + 1;
                while (n < r->nevents && r->events[n].stream != GS_STREAM_COMPUTE)
                    n++;
                ck_assert_uint_lt(n, r->nevents);
                if (e->layer >= 0)
                    ck_assert_int_eq(r->events[n].layer, e->layer);
                ck_assert(depends_on(r, n, k));
            }
            if (e->role == GS_ROLE_GRAD_REDUCE_SCATTER) {
                const uint32_t *deps = gs_event_list(r, e, GS_LINK_DEPS);
                const gs_event *c = NULL;
                for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
                    if (r->events[deps[j]].role == GS_ROLE_GRAD_COPY_IN)
                        c = &r->events[deps[j]];
                if (f == 1)
                    continue;
                ck_assert_msg(c != NULL, "reduce-scatter %zu without its copy-in", k);
                ck_assert_uint_eq(c->unit, e->unit);
                ck_assert_uint_eq(4 * c->bytes, 6 * e->bytes);
            }
        }
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* DDP and ZeRO, dp = 4, m = 2, units far below the 25 MiB bucket: one bucket per unit.
 * NO_SHARD: 5 all-reduces after the last micro-batch. ZeRO-1: 5 reduce-scatters once, then 5
 * all-gathers of the updated parameters. ZeRO-2 reduces every micro-batch: 10, then 5. */
START_TEST(test_ddp_zero_counts)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\nbatch: {global: 8}\n";
    static const struct { const char *sh; size_t ar, rs, ag; } cases[] = {
        {"no_shard", 5, 0, 0}, {"zero1", 0, 5, 5}, {"zero2", 0, 10, 5}};
    for (size_t i = 0; i < 3; i++) {
        char y[512];
        snprintf(y, sizeof y, "%sstrategy: {sharding: %s}\n", base, cases[i].sh);
        gs_schedule *sch = build(y, 0);
        ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP), cases[i].ar);
        ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP), cases[i].rs);
        ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_DP), cases[i].ag);
        gs_schedule_destroy(sch);
    }
    /* a 1 MiB bucket splits each block's gradient (4 x 256^2 + 2 x 3 x 256 x 512... elements) */
    gs_schedule *sch = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\n"
                                   "strategy: {sharding: no_shard, bucket_mb: 1}\n", 0);
    /* block: q k v o 4 x 256 x 256 + MLP 3 x 256 x 512 + 2 norms x 256 = 655,872 params = 1.31 MB
     * in bf16 -> 2 buckets of 1 MiB each; root: 2 x 1000 x 256 + 256 = 512,256 -> 1 bucket. */
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP), 4 * 2 + 1);
    /* each all-reduce is a bucket of its unit's gradient: part 1 + the bucket, in order (block:
     * parts 1 and 2; the root: part 1) */
    const gs_rank_events *r = &sch->ranks[0];
    uint32_t next[5] = {1, 1, 1, 1, 1};
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind != GS_EV_COLLECTIVE || e->group != GS_GROUP_DP)
            continue;
        ck_assert_uint_eq(e->role, GS_ROLE_GRAD_BUCKET_REDUCE);
        ck_assert_uint_lt(e->unit, 5);
        ck_assert_uint_eq(e->part, next[e->unit]++);
    }
    for (int u = 0; u < 4; u++)
        ck_assert_uint_eq(next[u], 3);
    ck_assert_uint_eq(next[4], 2);
    gs_schedule_destroy(sch);
}
END_TEST

/* Sums over rank list 0: bytes of the DP collectives of op, and of the tensors of kind. */
static uint64_t dp_bytes(const gs_schedule *sch, int op)
{
    uint64_t b = 0;
    const gs_rank_events *r = &sch->ranks[0];
    for (size_t k = 0; k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].group == GS_GROUP_DP && r->events[k].op == op)
            b += r->events[k].bytes;
    return b;
}

static uint64_t tensor_bytes(const gs_schedule *sch, int kind)
{
    uint64_t b = 0;
    const gs_rank_events *r = &sch->ranks[0];
    for (size_t k = 0; k < r->ntensors; k++)
        if (r->tensors[k].kind == kind)
            b += r->tensors[k].bytes;
    return b;
}

/* grad_dtype fp32 under bf16 (Megatron-LM's default): ZeRO-1's gradient buffers and their
 * reduce-scatters take 4 B per element instead of 2 (twice the bytes), the parameter all-gathers
 * stay bf16; with DDP (no_shard) the all-reduced buckets double too. Under FSDP (full_shard) the
 * reduce-scatter is MixedPrecision's reduce_dtype: doubled, the gathers not. build() checks each
 * against the ledger's closed forms, which must follow. */
START_TEST(test_grad_dtype)
{
    static const struct { const char *sh; int rs; } cases[] = {
        {"zero1", GS_COLL_REDUCE_SCATTER}, {"no_shard", GS_COLL_ALLREDUCE}, {"full_shard", GS_COLL_REDUCE_SCATTER}};
    for (size_t i = 0; i < 3; i++) {
        char y[512];
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\n"
                                    "batch: {global: 8}\nstrategy: {sharding: %s}\n", cases[i].sh);
        gs_schedule *a = build(y, 0);
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\n"
                                    "batch: {global: 8}\nstrategy: {sharding: %s, grad_dtype: fp32}\n", cases[i].sh);
        gs_schedule *f = build(y, 0);
        ck_assert_uint_gt(dp_bytes(a, cases[i].rs), 0);
        ck_assert_uint_eq(dp_bytes(f, cases[i].rs), 2 * dp_bytes(a, cases[i].rs));
        ck_assert_uint_eq(dp_bytes(f, GS_COLL_ALLGATHER), dp_bytes(a, GS_COLL_ALLGATHER));
        uint64_t ga = tensor_bytes(a, GS_T_GRAD) + tensor_bytes(a, GS_T_GRAD_SHARD);
        uint64_t gf = tensor_bytes(f, GS_T_GRAD) + tensor_bytes(f, GS_T_GRAD_SHARD);
        ck_assert_uint_gt(ga, 0);
        ck_assert_uint_eq(gf, 2 * ga);
        ck_assert_uint_eq(tensor_bytes(f, GS_T_PARAM_SHARD), tensor_bytes(a, GS_T_PARAM_SHARD));
        gs_schedule_destroy(a);
        gs_schedule_destroy(f);
    }
    /* the buckets hold gradient bytes: a block of 655,872 parameters is 1.31 MB in bf16 (2 buckets
     * of 1 MiB, test_ddp_zero_counts) and 2.62 MB in fp32 (3 buckets); the root's 512,256, 1.02 MB
     * and 2.05 MB: 1 and 2 buckets. 4 x 2 + 1 = 9 all-reduces become 4 x 3 + 2 = 14. */
    gs_schedule *b = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\n"
                                 "strategy: {sharding: no_shard, bucket_mb: 1, grad_dtype: fp32}\n", 0);
    ck_assert_uint_eq(count(b, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP), 4 * 3 + 2);
    gs_schedule_destroy(b);
    /* fp32 training with bf16 gradients halves the reductions; the offloaded gradient shard's copy
     * to the host (full_shard + offload) and sequence parallelism's norm-gradient all-reduce (tp 2)
     * follow the gradient bytes too */
    static const char *const variants[] = {
        "grid: {dp: 4}\nstrategy: {sharding: full_shard, precision: fp32%s}\n",
        "grid: {dp: 4}\nstrategy: {sharding: full_shard, offload: true%s}\n",
        "grid: {dp: 2, tp: 2}\nstrategy: {sharding: zero1, sequence_parallel: true%s}\n"};
    static const char *const dtypes[] = {", grad_dtype: bf16", ", grad_dtype: fp32", ", grad_dtype: fp32"};
    for (size_t i = 0; i < 3; i++) {
        char y[512], st[256];
        snprintf(st, sizeof st, variants[i], "");
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\nbatch: {global: 8}\n%s", st);
        gs_schedule *p = build(y, 0);
        snprintf(st, sizeof st, variants[i], dtypes[i]);
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\nbatch: {global: 8}\n%s", st);
        gs_schedule *q = build(y, 0);
        const gs_rank_events *rp = &p->ranks[0], *rq = &q->ranks[0];
        uint64_t bp = 0, bq = 0;
        for (size_t k = 0; k < rp->nevents; k++) {
            const gs_event *e = &rp->events[k];
            if ((i == 0 && e->kind == GS_EV_COLLECTIVE && e->op == GS_COLL_REDUCE_SCATTER) ||
                (i == 1 && e->kind == GS_EV_COPY_D2H) ||
                (i == 2 && e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP && e->phase == GS_PHASE_OPTIM))
                bp += e->bytes;
        }
        for (size_t k = 0; k < rq->nevents; k++) {
            const gs_event *e = &rq->events[k];
            if ((i == 0 && e->kind == GS_EV_COLLECTIVE && e->op == GS_COLL_REDUCE_SCATTER) ||
                (i == 1 && e->kind == GS_EV_COPY_D2H) ||
                (i == 2 && e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP && e->phase == GS_PHASE_OPTIM))
                bq += e->bytes;
        }
        ck_assert_msg(bp > 0, "variant %zu: nothing to compare", i);
        if (i == 0)
            ck_assert_uint_eq(2 * bq, bp);
        else
            ck_assert_uint_eq(bq, 2 * bp);
        gs_schedule_destroy(p);
        gs_schedule_destroy(q);
    }
}
END_TEST

/* overlap_grad_reduce false (DDP and ZeRO-1, 2 pipeline stages, 4 micro-batches): every DP
 * reduction of a stage comes after its last backward compute event and depends on it (the same
 * count as test_ddp_zero_counts' per stage: its 2 blocks + the root on either stage); with the
 * default each block's reduction follows the block's own last backward instead. */
START_TEST(test_grad_reduce_after_backward)
{
    static const char *const sh[] = {"no_shard", "zero1"};
    for (size_t i = 0; i < 2; i++) {
        char y[512];
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                                    "batch: {global: 8}\nstrategy: {sharding: %s, overlap_grad_reduce: false}\n", sh[i]);
        gs_schedule *sch = build(y, 0);
        for (size_t st = 0; st < 2; st++) {
            const gs_rank_events *r = &sch->ranks[st];
            size_t last_bwd = 0, nred = 0;
            for (size_t k = 0; k < r->nevents; k++)
                if (r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == GS_PHASE_BWD)
                    last_bwd = k;
            for (size_t k = 0; k < r->nevents; k++) {
                const gs_event *e = &r->events[k];
                if (e->kind != GS_EV_COLLECTIVE || e->group != GS_GROUP_DP || e->phase != GS_PHASE_BWD)
                    continue;
                nred++;
                ck_assert_msg(k > last_bwd, "stage %zu: reduction %zu before the last backward %zu", st, k, last_bwd);
                ck_assert(depends_on(r, k, last_bwd) || (k > 0 && r->events[k - 1].kind == GS_EV_COLLECTIVE));
            }
            ck_assert_uint_ge(nred, 2);
        }
        gs_schedule_destroy(sch);
        /* the default: the first reduction comes before the last backward */
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                                    "batch: {global: 8}\nstrategy: {sharding: %s}\n", sh[i]);
        sch = build(y, 0);
        const gs_rank_events *r = &sch->ranks[0];
        size_t last_bwd = 0, first_red = SIZE_MAX;
        for (size_t k = 0; k < r->nevents; k++) {
            if (r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == GS_PHASE_BWD)
                last_bwd = k;
            if (first_red == SIZE_MAX && r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].group == GS_GROUP_DP &&
                r->events[k].phase == GS_PHASE_BWD)
                first_red = k;
        }
        ck_assert(first_red < last_bwd);
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* HYBRID_SHARD on 2 nodes of 8 GPUs, dp = 16: reduce-scatter inside the node (8 ranks) then
 * all-reduce of the shard across the 2 nodes, per unit (m = 1): 5 + 5. */
START_TEST(test_hsdp_counts)
{
    gs_schedule *sch = build(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 16}\n"
                                   "strategy: {sharding: hybrid_shard}\n", 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP_INTRA), 5);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER), 5);
    const gs_rank_events *r = &sch->ranks[0];
    for (size_t k = 0; k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].group == GS_GROUP_DP_INTER)
            ck_assert_uint_eq(r->events[k].group_size, 2);
    gs_schedule_destroy(sch);
}
END_TEST

/* HYBRID_SHARD with one DP rank per node (2 nodes of 2 GPUs, dp 2 x tp 2): the shard group has
 * size 1, so nothing is reduce-scattered and each unit's whole gradient is all-reduced across the
 * 2 nodes: 4 layer units + the root = 5 all-reduces of group size 2, each of the unit's full
 * gradient (bytes = the unit's parameters x 2 B, padded to a multiple of 2 elements), once per step
 * (grad_sync auto keeps the full gradient until the last micro-batch). gs_schedule_validate holds
 * their traffic against the ledger's. The same with the pipeline inside the node (dp 2 x
 * interleaved pp 2, order tp-pp-dp): per stage 2 layer units + the root. */
START_TEST(test_hsdp_one_rank_per_node)
{
    gs_schedule *sch = build(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 2}\n"
                                   "grid: {dp: 2, tp: 2}\nstrategy: {sharding: hybrid_shard}\n"
                                   "batch: {global: 4, micro: 1}\n", 1);
    for (size_t i = 0; i < sch->nranks; i++) {
        ck_assert_uint_eq(count(sch, i, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, -1), 0);
        ck_assert_uint_eq(count(sch, i, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER), 5);
        const gs_rank_events *r = &sch->ranks[i];
        for (size_t k = 0; k < r->nevents; k++)
            if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].group == GS_GROUP_DP_INTER) {
                ck_assert_uint_eq(r->events[k].group_size, 2);
                ck_assert_uint_eq(r->events[k].bytes % 4, 0);
                ck_assert_uint_gt(r->events[k].bytes, 0);
            }
    }
    gs_schedule_destroy(sch);
    sch = build(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 2}\n"
                      "grid: {dp: 2, pp: 2, order: tp-pp-dp}\n"
                      "strategy: {sharding: hybrid_shard, pipeline: interleaved, virtual_stages: 2, grad_sync: every}\n"
                      "batch: {global: 8, micro: 1}\n", 0);
    /* grad_sync every, m = 4 micro-batches: 3 units x 4 */
    for (size_t i = 0; i < sch->nranks; i++)
        ck_assert_uint_eq(count(sch, i, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER), 3 * 4);
    gs_schedule_destroy(sch);
}
END_TEST

/* Tied embeddings under PP4 (tp 2): the first and last stages exchange the word embedding's
 * gradient once per step before the optimizer, one send and one receive each, to each other
 * (ranks 3 stages apart), [ceil(1000 / 2) = 500, 256] x 4 B (fp32 gradients) = 512000 B; the
 * middle stages and an untied model have none. gs_schedule_validate (in build) matches the
 * pairs and holds the traffic to the ledger's, which counts the same bytes. */
START_TEST(test_tied_embedding_exchange)
{
    for (int tied = 0; tied < 2; tied++) {
        char y[640];
        snprintf(y, sizeof y,
                 "model: {layers: 4, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64, tied_embeddings: %s}\n"
                 "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 8}\n"
                 "grid: {pp: 4, tp: 2}\nstrategy: {sharding: no_shard, precision: fp32}\n"
                 "batch: {global: 4, micro: 1}\n", tied ? "true" : "false");
        gs_schedule *sch = build(y, 1);
        for (size_t i = 0; i < sch->nranks; i++) {
            const gs_rank_events *r = &sch->ranks[i];
            size_t sends = 0, recvs = 0, opt = SIZE_MAX, last_x = 0;
            for (size_t k = 0; k < r->nevents; k++) {
                const gs_event *e = &r->events[k];
                if (e->kind == GS_EV_COMPUTE && e->op == GS_OP_OPTIMIZER)
                    opt = k;
                if ((e->kind != GS_EV_SEND && e->kind != GS_EV_RECV) || e->phase != GS_PHASE_OPTIM)
                    continue;
                ck_assert_uint_eq(e->bytes, 500u * 256u * 4u);
                uint64_t other = r->stage == 0 ? 3 : 0;
                uint64_t c[GS_DIM_COUNT];
                gs_mesh_rank_coords(&sch->mesh, e->peer, c);
                ck_assert_uint_eq(c[GS_DIM_PP], other);
                sends += e->kind == GS_EV_SEND;
                recvs += e->kind == GS_EV_RECV;
                last_x = k;
            }
            int end = r->stage == 0 || r->stage == 3;
            ck_assert_uint_eq(sends, tied && end ? 1 : 0);
            ck_assert_uint_eq(recvs, tied && end ? 1 : 0);
            if (tied && end) {
                ck_assert_uint_ne(opt, SIZE_MAX);
                ck_assert_msg(depends_on(r, opt, last_x), "rank list %zu: the optimizer does not wait for the "
                              "embedding gradient's exchange", i);
            }
        }
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* wrap: model under interleaved PP2 (v = 2, 8 layers, dp 2, m = 4, grad_sync every): the one
 * unit is the root, and every chunk's backward writes its gradient. The root's full gradient must
 * be live at every backward compute event of both chunks on both stages (the schedule used to
 * allocate it only in the root chunk's pass), and it is reduce-scattered once per micro-batch,
 * after the lowest chunk's (chunk 0's) backward: 4 reduce-scatters, 4 allocations of it.
 * gs_schedule_validate (in build) holds its lifetime and the memory high-water to the ledger. */
START_TEST(test_wrap_model_interleaved_root_grad)
{
    gs_schedule *sch = build("model: {layers: 8, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"
                             "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 4}\n"
                             "grid: {dp: 2, pp: 2}\nstrategy: {sharding: full_shard, wrap: model, "
                             "pipeline: interleaved, virtual_stages: 2, grad_sync: every}\n"
                             "batch: {global: 8, micro: 1}\n", 0);
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        size_t live = 0, allocs = 0, bwd = 0, chunks_seen[2] = {0, 0};
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            const uint32_t *al = gs_event_list(r, e, GS_LINK_ALLOCS), *fr = gs_event_list(r, e, GS_LINK_FREES);
            for (uint16_t j = 0; j < e->nlinks[GS_LINK_ALLOCS]; j++)
                if (r->tensors[al[j]].kind == GS_T_GRAD)
                    live++, allocs++;
            if (e->kind == GS_EV_COMPUTE && e->phase == GS_PHASE_BWD) {
                ck_assert_msg(live == 1, "rank list %zu event %zu (layer %d, mb %u): %zu root gradients live", i, k,
                              (int)e->layer, e->mb, live);
                bwd++;
                /* global layer L is in virtual stage L / 2 (2 layers each), chunk (L / 2) / pp */
                if (e->layer >= 0)
                    chunks_seen[(e->layer / 2) / 2] = 1;
            }
            for (uint16_t j = 0; j < e->nlinks[GS_LINK_FREES]; j++)
                if (r->tensors[fr[j]].kind == GS_T_GRAD)
                    live--;
        }
        ck_assert_uint_eq(live, 0);
        ck_assert_uint_eq(allocs, 4);
        ck_assert_uint_gt(bwd, 0);
        ck_assert(chunks_seen[0] && chunks_seen[1]);
        ck_assert_uint_eq(count(sch, i, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_DP), 4);
    }
    gs_schedule_destroy(sch);
}
END_TEST

/* TP = 2, m = 1: per block 2 all-reduces in forward and 2 in backward, plus the embedding's
 * (forward) and the head's (backward): 4 x 4 + 2 = 18. Full recompute adds the forward's 2 per
 * block: 26. Sequence parallel turns each into an all-gather + reduce-scatter pair: 18 + 18, and
 * adds one all-reduce of the norm-weight gradients per step. The vocab-parallel cross-entropy
 * adds one all-gather of its statistics per micro-batch: 1. */
START_TEST(test_tp_counts)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 2}\ngrid: {tp: 2}\n";
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, recompute: none}\n", base);
    gs_schedule *sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_TP), 18);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_TP), 1);
    gs_schedule_destroy(sch);
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, recompute: full}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_TP), 26);
    gs_schedule_destroy(sch);
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, sequence_parallel: true}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_TP), 1);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_TP), 18 + 1);
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_TP), 18);
    gs_schedule_destroy(sch);
}
END_TEST

/* Roles, TP 2 with sequence parallelism, 1 block, no DP: Megatron's layout (Korthikanti et al.
 * 2022, fig. 5): the embedding's partial sums reduce-scattered; per block half an all-gather of
 * the norm's output before its first GEMM (g) and a reduce-scatter after its last (g-bar), the
 * backward the conjugates in reverse (all-gather of the output's gradient, reduce-scatter of the
 * input's); the head's norm output gathered, the loss statistics gathered; after the backward
 * the norms' gradients all-reduced over TP, then the optimizer. 39 events. */
START_TEST(test_roles)
{
    gs_schedule *sch = build("model: {layers: 1, hidden: 64, heads: 2, ffn: 128, vocab: 100, seq: 16}\n"
                             "cluster: {preset: dgx-a100-80g, gpus_per_node: 2}\ngrid: {tp: 2}\n"
                             "strategy: {sharding: no_shard, sequence_parallel: true, recompute: none}\n"
                             "batch: {global: 1, micro: 1}\n", 0);
    static const gs_role want[] = {
        GS_ROLE_EMBED, GS_ROLE_TP_EMBED,
        GS_ROLE_ATTN_NORM, GS_ROLE_TP_ATTN_IN, GS_ROLE_QKV, GS_ROLE_ATTN_CORE, GS_ROLE_OPROJ, GS_ROLE_TP_ATTN_OUT,
        GS_ROLE_MLP_NORM, GS_ROLE_TP_MLP_IN, GS_ROLE_MLP_UP, GS_ROLE_MLP_ACT, GS_ROLE_MLP_DOWN, GS_ROLE_TP_MLP_OUT,
        GS_ROLE_HEAD_NORM, GS_ROLE_TP_HEAD_IN, GS_ROLE_HEAD, GS_ROLE_LOSS, GS_ROLE_TP_LOSS_STATS,
        GS_ROLE_LOSS, GS_ROLE_HEAD, GS_ROLE_TP_HEAD_IN, GS_ROLE_HEAD_NORM,
        GS_ROLE_TP_MLP_OUT, GS_ROLE_MLP_DOWN, GS_ROLE_MLP_ACT, GS_ROLE_MLP_UP, GS_ROLE_TP_MLP_IN, GS_ROLE_MLP_NORM,
        GS_ROLE_TP_ATTN_OUT, GS_ROLE_OPROJ, GS_ROLE_ATTN_CORE, GS_ROLE_QKV, GS_ROLE_TP_ATTN_IN, GS_ROLE_ATTN_NORM,
        GS_ROLE_TP_EMBED, GS_ROLE_EMBED,
        GS_ROLE_TP_NORM_GRADS, GS_ROLE_OPTIMIZER};
    const gs_rank_events *r = &sch->ranks[0];
    ck_assert_uint_eq(r->nevents, sizeof want / sizeof want[0]);
    for (size_t k = 0; k < r->nevents; k++) {
        char nm[GS_EVENT_NAME_BYTES];
        gs_event_name(r, &r->events[k], nm, sizeof nm);
        ck_assert_msg(r->events[k].role == want[k], "event %zu (%s): role %s, expected %s", k, nm,
                      gs_role_name((gs_role)r->events[k].role), gs_role_name(want[k]));
        ck_assert_uint_eq(r->events[k].part, 0);
    }
    gs_schedule_destroy(sch);
    /* FSDP over 2 ranks: every gather a unit's, every reduce-scatter a unit's gradient; a
     * pipeline's sends and receives; the tied embedding's exchange */
    sch = build("model: {layers: 4, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64, tied_embeddings: true}\n"
                "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                "strategy: {sharding: full_shard}\n", 0);
    size_t seen[GS_ROLE_COUNT] = {0};
    for (size_t i = 0; i < sch->nranks; i++)
        for (size_t k = 0; k < sch->ranks[i].nevents; k++) {
            const gs_event *e = &sch->ranks[i].events[k];
            seen[e->role]++;
            if (e->kind == GS_EV_COLLECTIVE)
                ck_assert_uint_eq(e->role, e->op == GS_COLL_ALLGATHER ? GS_ROLE_UNIT_GATHER : GS_ROLE_GRAD_REDUCE_SCATTER);
            if (e->kind == GS_EV_SEND)
                ck_assert_uint_eq(e->role, e->phase == GS_PHASE_OPTIM ? GS_ROLE_TIED_SEND : GS_ROLE_PP_SEND);
            if (e->kind == GS_EV_RECV)
                ck_assert_uint_eq(e->role, e->phase == GS_PHASE_OPTIM ? GS_ROLE_TIED_RECV : GS_ROLE_PP_RECV);
        }
    /* one exchange each way on each of the 2 stages */
    ck_assert_uint_eq(seen[GS_ROLE_TIED_SEND], 2);
    ck_assert_uint_eq(seen[GS_ROLE_TIED_RECV], 2);
    ck_assert_uint_eq(seen[GS_ROLE_NONE], 0);
    gs_schedule_destroy(sch);
}
END_TEST

/* Index of the event named `name` in rank list r (the test fails without one). */
static size_t event_named(const gs_rank_events *r, const char *name)
{
    char nm[GS_EVENT_NAME_BYTES];
    for (size_t k = 0; k < r->nevents; k++) {
        gs_event_name(r, &r->events[k], nm, sizeof nm);
        if (strcmp(nm, name) == 0)
            return k;
    }
    ck_abort_msg("no event %s", name);
    return SIZE_MAX;
}

/* Scratch tensors (TP 2 with SP, PP 2, 1F1B, 4 micro-batches; stage 0 holds layers 0 and 1 and
 * the embedding): the TP exchanges' buffers are tensors of the schedule, and validation checks
 * that every pair of events on two streams touching one (one writing) is ordered.
 *  - Stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3 (one warm-up forward). B3 follows B2 directly: B3's
 *    first events are the receive of L1's output gradient and L1's all-gather of it, which waits
 *    for the receive only, while the compute stream may still run B2's embedding backward. The
 *    embedding reads its gathered gradient from its own scratch tensor; had it used the blocks'
 *    (as exec's program once did), the gather and the embedding's backward would race: refused.
 *  - Within a pass the GEMM after a gather depends on it (read after write): without that
 *    dependency the two race too. */
START_TEST(test_scratch_hazards)
{
    gs_schedule *sch = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {tp: 2, pp: 2}\n"
                                   "strategy: {sharding: no_shard, sequence_parallel: true, pipeline: 1f1b}\n"
                                   "batch: {global: 4, micro: 1}\n", 0);
    gs_rank_events *r = &sch->ranks[0];
    uint32_t scratch[GS_SCRATCH_COUNT];
    for (int k = 0; k < GS_SCRATCH_COUNT; k++)
        scratch[k] = UINT32_MAX;
    for (size_t t = 0; t < r->ntensors; t++)
        if (r->tensors[t].kind == GS_T_SCRATCH) {
            ck_assert_uint_lt(r->tensors[t].unit, GS_SCRATCH_COUNT);
            scratch[r->tensors[t].unit] = (uint32_t)t;
        }
    /* stage 0: the blocks' five, the embedding's two; the head's is the last stage's */
    for (int k = 0; k < GS_SCRATCH_COUNT; k++)
        ck_assert_msg((scratch[k] != UINT32_MAX) == (k != GS_SCRATCH_HEAD_DX), "scratch %d", k);
    /* the embedding's backward reads its own gathered gradient */
    size_t emb = event_named(r, "emb.mb2.bwd");
    const uint32_t *rd = gs_event_list(r, &r->events[emb], GS_LINK_READS);
    int reads_own = 0;
    for (uint16_t j = 0; j < r->events[emb].nlinks[GS_LINK_READS]; j++)
        reads_own |= rd[j] == scratch[GS_SCRATCH_EMBED_DY];
    ck_assert(reads_own);

    /* the embedding's events on the blocks' buffer instead */
    gs_error err;
    gs_error_init(&err);
    for (size_t k = 0; k < r->npool; k++)
        if (r->pool[k] == scratch[GS_SCRATCH_EMBED_DY])
            r->pool[k] = scratch[GS_SCRATCH_BLOCK_DY];
    ck_assert_int_eq(gs_schedule_validate_structure(sch, &err), GS_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "emb.mb2.bwd (compute stream)") && strstr(err.msg, "L1.mb3.bwd.tp_ag (tp stream)") &&
                  strstr(err.msg, "(scratch), one writing, and no dependency orders them"), "%s", err.msg);
    gs_schedule_destroy(sch);

    /* a gather's reader without its dependency on the gather */
    sch = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {tp: 2, pp: 2}\n"
                      "strategy: {sharding: no_shard, sequence_parallel: true, pipeline: 1f1b}\n"
                      "batch: {global: 4, micro: 1}\n", 0);
    r = &sch->ranks[0];
    size_t ag = event_named(r, "L1.mb0.bwd.tp_ag"), down = event_named(r, "L1.mb0.bwd.mlp_down");
    gs_event *e = &r->events[down];
    uint32_t *d = &r->pool[e->links];
    ck_assert_uint_eq(e->nlinks[GS_LINK_DEPS], 1);
    ck_assert_uint_eq(d[0], ag);
    e->nlinks[GS_LINK_DEPS] = 0; /* its lists shift by one: rebuild them in place */
    memmove(d, d + 1, (size_t)(e->nlinks[1] + e->nlinks[2] + e->nlinks[3] + e->nlinks[4]) * sizeof *d);
    ck_assert_int_eq(gs_schedule_validate_structure(sch, &err), GS_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "L1.mb0.bwd.tp_ag (tp stream)") && strstr(err.msg, "L1.mb0.bwd.mlp_down (compute stream)") &&
                  strstr(err.msg, "no dependency orders them"), "%s", err.msg);
    gs_schedule_destroy(sch);
}
END_TEST

/* Sums over rank list 0: compute FLOPs and TP collective bytes. */
static void totals(const gs_schedule *sch, double *flops, uint64_t *tp_bytes)
{
    *flops = 0.0;
    *tp_bytes = 0;
    const gs_rank_events *r = &sch->ranks[0];
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind == GS_EV_COMPUTE)
            *flops += e->flops;
        else if (e->kind == GS_EV_COLLECTIVE && e->group == GS_GROUP_TP)
            *tp_bytes += e->bytes;
    }
}

static int depends_on(const gs_rank_events *r, size_t ev, size_t on)
{
    const gs_event *e = &r->events[ev];
    for (size_t i = 0; i < e->nlinks[GS_LINK_DEPS]; i++)
        if (r->pool[e->links + i] == on)
            return 1;
    return 0;
}

/* tp_comm_overlap (tp 4, sequence parallel, 4 blocks of T = 64 tokens, 1 micro-batch, no
 * recompute). Each block has 4 all-gather -> GEMM or GEMM -> reduce-scatter pairs per pass
 * (forward: AG->QKV, out-proj->RS, AG->MLP up, MLP down->RS; backward: AG->down, up->RS,
 * AG->out-proj, QKV->RS). Overlapped, every pair's GEMM becomes two events (8 more compute events
 * per block: 32), the forward's 2 reduce-scatters become 4 (main + the last chunk's: 4 x 2 = 8
 * more), and the backward re-gathers the norms' sequence-parallel outputs for the weight
 * gradients of QKV and MLP up (2 per block: 8 more all-gathers than test_tp_counts' 18 + 1).
 * FLOPs are conserved (the split parts carry the op's shares); build() also checks the bytes
 * sent and the memory peak against the ledger, which counts the re-gathers and TE's
 * userbuffers. */
START_TEST(test_tp_comm_overlap)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {tp: 4}\n";
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, sequence_parallel: true}\n", base);
    gs_schedule *plain = build(y, 0);
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, sequence_parallel: true, tp_comm_overlap: true}\n", base);
    gs_schedule *ov = build(y, 0);
    ck_assert_uint_eq(count(ov, 0, GS_EV_COMPUTE, -1, -1), count(plain, 0, GS_EV_COMPUTE, -1, -1) + 32);
    ck_assert_uint_eq(count(ov, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_TP), 18 + 1 + 8);
    ck_assert_uint_eq(count(ov, 0, GS_EV_COLLECTIVE, GS_COLL_REDUCE_SCATTER, GS_GROUP_TP), 18 + 8);
    double f0, f1;
    uint64_t b0, b1;
    totals(plain, &f0, &b0);
    totals(ov, &f1, &b1);
    ck_assert_msg(fabs(f1 - f0) <= 1e-9 * f0, "FLOPs %.17g vs %.17g", f1, f0);
    /* the re-gathers add 8 all-gathers of the tp x ceil(T h e / tp) = 64 x 256 x 2 B activation */
    ck_assert_uint_eq(b1, b0 + 8 * (64 * 256 * 2));
    const gs_rank_events *r = &ov->ranks[0];
    /* forward, block 0: norm, AG, QKV part A (3 of 4 ring chunks, beside the gather), QKV part B
     * (the last chunk, after it), attention, out-proj's first of 4 chunks, the other 3, RS of 3
     * chunks (after the first chunk only), RS of the last chunk (after the last 3) */
    size_t ag = SIZE_MAX;
    for (size_t k = 0; k < r->nevents && ag == SIZE_MAX; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].op == GS_COLL_ALLGATHER &&
            r->events[k].phase == GS_PHASE_FWD && r->events[k].layer == 0)
            ag = k;
    ck_assert(ag != SIZE_MAX);
    const gs_event *qa = &r->events[ag + 1], *qb = &r->events[ag + 2];
    ck_assert(qa->kind == GS_EV_COMPUTE && qa->op == GS_OP_QKV && qb->op == GS_OP_QKV);
    ck_assert(!depends_on(r, ag + 1, ag) && depends_on(r, ag + 1, ag - 1) && depends_on(r, ag + 2, ag));
    /* the gather at the attention's input; the GEMM's parts 1 (beside it) and 2 (after it) */
    ck_assert_uint_eq(r->events[ag].role, GS_ROLE_TP_ATTN_IN);
    ck_assert(qa->role == GS_ROLE_QKV && qa->part == 1 && qb->role == GS_ROLE_QKV && qb->part == 2);
    ck_assert_uint_eq(qa->gemm_m, 16); /* T / tp rows per chunk call */
    ck_assert_uint_eq(qb->gemm_m, 16);
    ck_assert(fabs(qa->flops - 3.0 * qb->flops) <= 1e-9 * qa->flops);
    size_t o1 = ag + 4, o2 = ag + 5, rs = ag + 6, tail = ag + 7;
    ck_assert(r->events[o1].op == GS_OP_OPROJ && r->events[o2].op == GS_OP_OPROJ);
    ck_assert(r->events[rs].kind == GS_EV_COLLECTIVE && r->events[rs].op == GS_COLL_REDUCE_SCATTER);
    ck_assert(r->events[tail].kind == GS_EV_COLLECTIVE && r->events[tail].op == GS_COLL_REDUCE_SCATTER);
    ck_assert(depends_on(r, rs, o1) && !depends_on(r, rs, o2) && depends_on(r, tail, o2));
    ck_assert(r->events[o1].part == 1 && r->events[o2].part == 2);
    ck_assert(r->events[rs].role == GS_ROLE_TP_ATTN_OUT && r->events[rs].part == 1);
    ck_assert(r->events[tail].role == GS_ROLE_TP_ATTN_OUT && r->events[tail].part == 2);
    ck_assert(fabs(r->events[o2].flops - 3.0 * r->events[o1].flops) <= 1e-9 * r->events[o2].flops);
    ck_assert_uint_eq(r->events[rs].bytes, 3 * r->events[tail].bytes);
    /* backward, block 3 (the first backward pass): AG of the output gradient, MLP down's dgrad
     * chunks (3 of 4: 3/8 of the event's dgrad + wgrad FLOPs) beside it, the last chunk + wgrad
     * (5/8) after it; the activation; the re-gather of the norm output, MLP up's dgrad beside it,
     * its wgrad after both, dgrad's RS after dgrad only (under wgrad), then the norm after the RS */
    size_t a = SIZE_MAX;
    for (size_t k = 0; k < r->nevents && a == SIZE_MAX; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].op == GS_COLL_ALLGATHER &&
            r->events[k].phase == GS_PHASE_BWD && r->events[k].layer == 3)
            a = k;
    ck_assert(a != SIZE_MAX);
    const gs_event *da = &r->events[a + 1], *db = &r->events[a + 2];
    ck_assert(da->op == GS_OP_MLP_DOWN && db->op == GS_OP_MLP_DOWN && da->phase == GS_PHASE_BWD);
    ck_assert(!depends_on(r, a + 1, a) && r->events[a + 1].nlinks[GS_LINK_DEPS] > 0 && depends_on(r, a + 2, a));
    ck_assert(fabs(5.0 * da->flops - 3.0 * db->flops) <= 1e-9 * db->flops);
    ck_assert(r->events[a + 3].op == GS_OP_ACT);
    size_t rg = a + 4, dg = a + 5, wg = a + 6, brs = a + 7, norm = a + 8;
    ck_assert(r->events[rg].kind == GS_EV_COLLECTIVE && r->events[rg].op == GS_COLL_ALLGATHER);
    ck_assert(r->events[dg].op == GS_OP_MLP_UP && r->events[wg].op == GS_OP_MLP_UP);
    ck_assert(r->events[brs].kind == GS_EV_COLLECTIVE && r->events[brs].op == GS_COLL_REDUCE_SCATTER);
    ck_assert(r->events[norm].op == GS_OP_NORM);
    ck_assert(!depends_on(r, dg, rg) && depends_on(r, dg, a + 3));
    ck_assert(depends_on(r, wg, rg) && depends_on(r, wg, dg));
    ck_assert(depends_on(r, brs, dg) && !depends_on(r, brs, wg));
    ck_assert(depends_on(r, norm, brs));
    ck_assert_uint_eq(r->events[a].role, GS_ROLE_TP_MLP_OUT); /* the output's gradient gathered */
    ck_assert(da->part == 1 && db->part == 2);
    ck_assert_uint_eq(r->events[rg].role, GS_ROLE_TP_MLP_REGATHER);
    ck_assert(r->events[dg].part == 1 && r->events[wg].part == 2);
    ck_assert(r->events[brs].role == GS_ROLE_TP_MLP_IN && r->events[brs].part == 0); /* not split */
    ck_assert_uint_eq(r->events[norm].role, GS_ROLE_MLP_NORM);
    ck_assert(fabs(r->events[dg].flops - r->events[wg].flops) <= 1e-9 * r->events[wg].flops);
    gs_schedule_destroy(plain);
    gs_schedule_destroy(ov);
    /* without sequence parallelism the switch is refused (Megatron asserts it) */
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, tp_comm_overlap: true}\n", base);
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_int_eq(gs_scenario_load_string(y, strlen(y), "t", &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, &w, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs sequence_parallel"));
    gs_diag_fini(&w);
}
END_TEST

/* Index of the DP all-gather of unit u in rank list r (SIZE_MAX: none). */
static size_t unit_gather(const gs_rank_events *r, uint32_t u)
{
    for (size_t k = 0; k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].op == GS_COLL_ALLGATHER &&
            r->events[k].group == GS_GROUP_DP && r->events[k].unit == u)
            return k;
    return SIZE_MAX;
}

/* The first forward compute event of global layer l in rank list r (SIZE_MAX: none). */
static size_t first_forward(const gs_rank_events *r, int32_t l)
{
    for (size_t k = 0; k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == GS_PHASE_FWD && r->events[k].layer == l)
            return k;
    return SIZE_MAX;
}

/* overlap_param_gather (zero1, dp 4, 4 blocks, units 0-3 = blocks, unit 4 = the root): the 5
 * parameter all-gathers move from after the optimizer into the forward, as Megatron issues them:
 * the first unit the forward needs (the root, holding the embedding) and the one after it (block
 * 0) at the step's start, every later one when the forward reaches its predecessor (block u + 1's
 * gather after the event before block u's first forward), each block's first forward waiting
 * for its own gather. Counts and bytes are those of test_ddp_zero_counts. */
START_TEST(test_overlap_param_gather)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 4}\nbatch: {global: 8}\n";
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: zero1, overlap_param_gather: true}\n", base);
    gs_schedule *sch = build(y, 0);
    const gs_rank_events *r = &sch->ranks[0];
    ck_assert_uint_eq(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLGATHER, GS_GROUP_DP), 5);
    size_t root = unit_gather(r, 4), g0 = unit_gather(r, 0);
    ck_assert_uint_eq(root, 0);
    ck_assert_uint_eq(r->events[root].nlinks[GS_LINK_DEPS], 0);
    ck_assert_uint_eq(r->events[g0].nlinks[GS_LINK_DEPS], 0);
    for (uint32_t u = 0; u < 4; u++) {
        size_t g = unit_gather(r, u), f = first_forward(r, (int32_t)u);
        ck_assert(g != SIZE_MAX && f != SIZE_MAX && g < f);
        ck_assert_msg(depends_on(r, f, g), "block %u's first forward does not wait for its gather", u);
        if (u + 1 < 4) {
            /* the next gather: issued after the event before this block's first forward (the
             * embedding's, or the previous block's last forward event) */
            const gs_event *n = &r->events[unit_gather(r, u + 1)];
            ck_assert_uint_eq(n->nlinks[GS_LINK_DEPS], 1);
            uint32_t d = r->pool[n->links];
            ck_assert(d < f && r->events[d].phase == GS_PHASE_FWD &&
                      r->events[d].layer == (u == 0 ? GS_LAYER_EMBED : (int32_t)u - 1));
        }
    }
    /* nothing is gathered after the optimizer */
    const gs_event *last = &r->events[r->nevents - 1];
    ck_assert(last->kind == GS_EV_COMPUTE && last->op == GS_OP_OPTIMIZER);
    gs_schedule_destroy(sch);
    /* wrap: model on 2 pipeline stages: stage 1 has no embedding; its first forward still waits
     * for the root unit's gather (which holds every block), issued at its step's start */
    sch = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\nbatch: {global: 8}\n"
                      "strategy: {sharding: zero1, overlap_param_gather: true, wrap: model}\n",
                0);
    r = &sch->ranks[1];
    ck_assert_uint_eq(r->stage, 1);
    size_t g = SIZE_MAX;
    for (size_t k = 0; k < r->nevents && g == SIZE_MAX; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].op == GS_COLL_ALLGATHER && r->events[k].group == GS_GROUP_DP)
            g = k;
    ck_assert(g != SIZE_MAX);
    ck_assert_uint_eq(r->events[g].nlinks[GS_LINK_DEPS], 0);
    size_t f = first_forward(r, 2); /* stage 1 holds blocks 2 and 3 */
    ck_assert(f != SIZE_MAX);
    ck_assert_msg(depends_on(r, f, g), "stage 1's first forward does not wait for the root's gather");
    gs_schedule_destroy(sch);
}
END_TEST

/* Index of the last backward compute event of rank list r before event `before`. */
static size_t last_backward_before(const gs_rank_events *r, size_t before)
{
    size_t last = SIZE_MAX;
    for (size_t k = 0; k < before && k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == GS_PHASE_BWD)
            last = k;
    return last;
}

/* The DP collectives of op in rank list r, their indices into idx (at most cap); the count. */
static size_t dp_colls(const gs_rank_events *r, int op, size_t *idx, size_t cap)
{
    size_t n = 0;
    for (size_t k = 0; k < r->nevents; k++)
        if (r->events[k].kind == GS_EV_COLLECTIVE && r->events[k].group == GS_GROUP_DP && r->events[k].op == op) {
            if (n < cap)
                idx[n] = k;
            n++;
        }
    return n;
}

/* bucket_stages first (Megatron-Core: bucketing only on model chunk 0 of pipeline rank 0), zero1,
 * dp 2, pp 2, m = 8 / 2 = 4, bucket_mb 1 = 524,288 bf16 gradient elements per bucket. SMALL's
 * block: 4 x 256^2 + 3 x 256 x 512 + 2 x 256 = 655,872 parameters (2 buckets); stage 0's root is
 * the embedding, 1000 x 256 = 256,000 (1 bucket); stage 1's root is the final norm and the head,
 * 256 + 1000 x 256 = 256,256.
 *  - stage 0 keeps its buckets: 2 blocks x 2 + 1 = 5 reduce-scatters (no_sync: once per step);
 *  - stage 1 reduces its whole gradient in ONE reduce-scatter: P = 2 x 655,872 + 256,256 =
 *    1,568,000 parameters x 2 B = 3,136,000 B (N = 2 divides P: no padding), right after the
 *    stage's last backward compute event (micro-batch 3, block 2's last op), which is its only
 *    dependency; the same total bytes as with bucket_stages all (5 buckets, none padded).
 *  - ZeRO-1's parameter all-gather after the optimizer: stage 0 per unit (3), stage 1 one of
 *    3,136,000 B. */
START_TEST(test_bucket_stages_first)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                             "batch: {global: 8}\n";
    const uint64_t block = 4 * 256 * 256 + 3 * 256 * 512 + 2 * 256, head = 256 + 1000 * 256;
    ck_assert_uint_eq(block, 655872);
    const uint64_t stage1_bytes = (2 * block + head) * 2;
    ck_assert_uint_eq(stage1_bytes, 3136000);
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: zero1, bucket_mb: 1, bucket_stages: first}\n", base);
    gs_schedule *f = build(y, 0);
    snprintf(y, sizeof y, "%sstrategy: {sharding: zero1, bucket_mb: 1}\n", base);
    gs_schedule *a = build(y, 0);
    size_t idx[16];
    ck_assert_uint_eq(dp_colls(&f->ranks[0], GS_COLL_REDUCE_SCATTER, idx, 16), 5);
    ck_assert_uint_eq(dp_colls(&a->ranks[0], GS_COLL_REDUCE_SCATTER, idx, 16), 5);
    ck_assert_uint_eq(dp_colls(&a->ranks[1], GS_COLL_REDUCE_SCATTER, idx, 16), 5);
    const gs_rank_events *r = &f->ranks[1];
    ck_assert_uint_eq(r->stage, 1);
    ck_assert_uint_eq(dp_colls(r, GS_COLL_REDUCE_SCATTER, idx, 16), 1);
    const gs_event *rs = &r->events[idx[0]];
    ck_assert_uint_eq(rs->bytes, stage1_bytes);
    ck_assert_uint_eq(rs->mb, 3);
    size_t lb = last_backward_before(r, r->nevents);
    ck_assert_uint_eq(last_backward_before(r, idx[0]), lb); /* no backward after it */
    ck_assert_int_eq(r->events[lb].layer, 2);               /* stage 1's bottom block */
    ck_assert_uint_eq(r->events[lb].mb, 3);
    ck_assert_uint_eq(rs->nlinks[GS_LINK_DEPS], 1);
    ck_assert(depends_on(r, idx[0], lb));
    ck_assert_uint_eq(rs->nlinks[GS_LINK_READS], 3); /* the 2 blocks' and the root's gradients */
    /* the same bytes as the buckets of bucket_stages all */
    uint64_t sum = 0;
    size_t n = dp_colls(&a->ranks[1], GS_COLL_REDUCE_SCATTER, idx, 16);
    for (size_t i = 0; i < n; i++)
        sum += a->ranks[1].events[idx[i]].bytes;
    ck_assert_uint_eq(sum, stage1_bytes);
    /* the updated parameters' gather: per unit on stage 0, one on stage 1 */
    ck_assert_uint_eq(dp_colls(&f->ranks[0], GS_COLL_ALLGATHER, idx, 16), 3);
    ck_assert_uint_eq(dp_colls(r, GS_COLL_ALLGATHER, idx, 16), 1);
    ck_assert_uint_eq(r->events[idx[0]].bytes, stage1_bytes);
    gs_schedule_destroy(f);
    gs_schedule_destroy(a);

    /* DDP: the same one bucket as an all-reduce; without overlap_grad_reduce too (after the last
     * backward either way) */
    static const char *const ddp[] = {"", ", overlap_grad_reduce: false"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, bucket_mb: 1, bucket_stages: first%s}\n", base, ddp[i]);
        f = build(y, 0);
        ck_assert_uint_eq(dp_colls(&f->ranks[0], GS_COLL_ALLREDUCE, idx, 16), 5);
        ck_assert_uint_eq(dp_colls(&f->ranks[1], GS_COLL_ALLREDUCE, idx, 16), 1);
        ck_assert_uint_eq(f->ranks[1].events[idx[0]].bytes, stage1_bytes);
        ck_assert(depends_on(&f->ranks[1], idx[0], last_backward_before(&f->ranks[1], f->ranks[1].nevents)));
        gs_schedule_destroy(f);
    }
}
END_TEST

/* bucket_stages first with interleaved 1F1B (p 2, v 2, 4 blocks: stage 0 holds chunk 0 = block 0
 * + the embedding and chunk 1 = block 2; stage 1 chunk 0 = block 1, chunk 1 = block 3 + the head).
 * Only stage 0's chunk 0 keeps buckets: 2 + 1 = 3 reduce-scatters, then chunk 1's block in one
 * (655,872 x 2 B = 1,311,744 B, above the 1 MiB bucket yet one event), after chunk 1's last
 * backward (micro-batch 3, block 2). Stage 1: one per chunk, 1,311,744 B and (655,872 + 256,256)
 * x 2 B = 1,824,256 B. */
START_TEST(test_bucket_stages_first_interleaved)
{
    gs_schedule *f = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                                 "batch: {global: 8}\nstrategy: {sharding: zero1, bucket_mb: 1, "
                                 "bucket_stages: first, pipeline: interleaved, virtual_stages: 2}\n",
                           0);
    size_t idx[16];
    const gs_rank_events *r = &f->ranks[0];
    ck_assert_uint_eq(dp_colls(r, GS_COLL_REDUCE_SCATTER, idx, 16), 4);
    size_t chunk1 = SIZE_MAX;
    for (size_t i = 0; i < 4; i++)
        if (r->events[idx[i]].layer == 2)
            chunk1 = idx[i];
    ck_assert(chunk1 != SIZE_MAX);
    ck_assert_uint_eq(r->events[chunk1].bytes, 1311744);
    ck_assert_uint_eq(r->events[chunk1].nlinks[GS_LINK_DEPS], 1);
    uint32_t d = r->pool[r->events[chunk1].links];
    ck_assert(r->events[d].kind == GS_EV_COMPUTE && r->events[d].phase == GS_PHASE_BWD && r->events[d].layer == 2 &&
              r->events[d].mb == 3);
    for (size_t k = d + 1; k < r->nevents; k++) /* chunk 1's last backward event */
        ck_assert(!(r->events[k].kind == GS_EV_COMPUTE && r->events[k].phase == GS_PHASE_BWD &&
                    r->events[k].layer == 2));
    r = &f->ranks[1];
    ck_assert_uint_eq(dp_colls(r, GS_COLL_REDUCE_SCATTER, idx, 16), 2);
    uint64_t b0 = r->events[idx[0]].bytes, b1 = r->events[idx[1]].bytes;
    ck_assert((b0 == 1311744 && b1 == 1824256) || (b0 == 1824256 && b1 == 1311744));
    gs_schedule_destroy(f);
}
END_TEST

/* bucket_stages first with overlap_param_gather (zero1, pp 2): stage 1's updated parameters are
 * one bucket, gathered at the step's start (no dependency: the first bucket Megatron dispatches)
 * and awaited by the stage's first forward (block 2's); its bytes are stage 1's 3,136,000 of
 * test_bucket_stages_first. Stage 0 keeps test_overlap_param_gather's per-unit gathers (3). */
START_TEST(test_bucket_stages_first_param_gather)
{
    gs_schedule *f = build(SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                                 "batch: {global: 8}\nstrategy: {sharding: zero1, bucket_mb: 1, "
                                 "bucket_stages: first, overlap_param_gather: true}\n",
                           0);
    size_t idx[16];
    ck_assert_uint_eq(dp_colls(&f->ranks[0], GS_COLL_ALLGATHER, idx, 16), 3);
    const gs_rank_events *r = &f->ranks[1];
    ck_assert_uint_eq(dp_colls(r, GS_COLL_ALLGATHER, idx, 16), 1);
    const gs_event *g = &r->events[idx[0]];
    ck_assert_uint_eq(g->bytes, 3136000);
    ck_assert_uint_eq(g->nlinks[GS_LINK_DEPS], 0);
    size_t fw = first_forward(r, 2);
    ck_assert(fw != SIZE_MAX && idx[0] < fw);
    ck_assert_msg(depends_on(r, fw, idx[0]), "stage 1's first forward does not wait for its one gather");
    /* and the head's forward (the root is in the same bucket) */
    size_t head = first_forward(r, GS_LAYER_HEAD);
    ck_assert(head != SIZE_MAX);
    ck_assert_msg(depends_on(r, head, idx[0]), "stage 1's head forward does not wait for its one gather");
    gs_schedule_destroy(f);
}
END_TEST

/* Recompute, m = 2, 4 blocks: full recompute re-runs a block's 8 forward compute ops (2 norms,
 * QKV, attention, out-proj, MLP up, activation, down) in backward: 4 x 8 x 2 = 64 events; selective
 * recompute (without flash attention) re-runs the attention core only: 4 x 2 = 8. */
START_TEST(test_recompute_counts)
{
    const char *base = SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 1}\ngrid: {dp: 1}\nbatch: {global: 2}\n";
    char y[512];
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, recompute: full}\n", base);
    gs_schedule *sch = build(y, 0);
    ck_assert_uint_eq(count_phase(sch, 0, GS_PHASE_RECOMPUTE), 64);
    gs_schedule_destroy(sch);
    snprintf(y, sizeof y, "%sstrategy: {sharding: no_shard, recompute: selective, flash_attention: false}\n", base);
    sch = build(y, 0);
    ck_assert_uint_eq(count_phase(sch, 0, GS_PHASE_RECOMPUTE), 8);
    gs_schedule_destroy(sch);
}
END_TEST

/* The exact path: every rank, each identical to its stage representative up to group ids. */
START_TEST(test_exact_matches_class)
{
    const char *y = SMALL "cluster: {preset: dgx-a100-80g}\ngrid: {dp: 2, pp: 2, tp: 2}\n"
                          "strategy: {sharding: full_shard, recompute: full}\nbatch: {global: 8}\n";
    gs_schedule *cls = build(y, 0);
    gs_schedule *all = build(y, 1);
    ck_assert_uint_eq(all->nranks, 8);
    for (size_t i = 0; i < all->nranks; i++) {
        const gs_rank_events *r = &all->ranks[i];
        const gs_rank_events *c = &cls->ranks[r->stage];
        ck_assert_uint_eq(r->nevents, c->nevents);
        ck_assert_uint_eq(gs_rank_peak_bytes(r), gs_rank_peak_bytes(c));
    }
    gs_schedule_destroy(cls);
    gs_schedule_destroy(all);
}
END_TEST

/* Shared lists (gs_schedule_build_shared) against the copies gs_schedule_build makes: the same
 * events bit for bit except `peer`, and gs_event_peer giving the copy's peer; every rank but
 * the stage representatives (dp = tp = 0) shares. */
static void shared_matches_copy(const char *y, size_t owning_expected)
{
    gs_schedule *all = build(y, 1);
    gs_schedule *sh = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_schedule_build_shared(&g_s, &g_m, 1, &sh, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(sh->nranks, all->nranks);
    size_t owning = 0;
    for (size_t i = 0; i < sh->nranks; i++) {
        const gs_rank_events *a = &all->ranks[i], *b = &sh->ranks[i];
        ck_assert_uint_eq(a->rank, b->rank);
        ck_assert_uint_eq(a->stage, b->stage);
        ck_assert_uint_eq(a->nevents, b->nevents);
        owning += b->shared == NULL;
        if (b->shared)
            ck_assert_uint_eq(b->shared->stage, b->stage);
        for (size_t k = 0; k < a->nevents; k++) {
            gs_event x = a->events[k], z = b->events[k];
            ck_assert_uint_eq(gs_event_peer(&g_m, b, &b->events[k]), x.peer);
            x.peer = z.peer = 0;
            ck_assert_msg(memcmp(&x, &z, sizeof x) == 0, "rank %zu event %zu", i, k);
        }
    }
    ck_assert_uint_eq(owning, owning_expected);
    gs_schedule_destroy(sh);
    gs_schedule_destroy(all);
}

START_TEST(test_shared_matches_copy)
{
    /* 3 stages (pipeline peers differ in both directions), tied embeddings (the first and last
     * stages exchange), TP and FSDP groups: 3 representatives own their lists */
    shared_matches_copy("model: {layers: 3, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64, "
                        "tied_embeddings: true}\ncluster: {preset: dgx-a100-80g, nodes: 3, gpus_per_node: 4}\n"
                        "grid: {dp: 2, pp: 3, tp: 2}\nstrategy: {sharding: full_shard}\nbatch: {global: 8}\n", 3);
    /* pp 2: next and previous stage are one rank */
    shared_matches_copy(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                              "grid: {dp: 2, pp: 2, tp: 2}\nstrategy: {sharding: zero1, pipeline: interleaved, "
                              "virtual_stages: 2}\nbatch: {global: 8}\n", 2);
}
END_TEST

/* Property: every combination below builds a schedule that validates (acyclic, matched
 * collectives and p2p, tensor lifetimes, traffic = ledger, memory high-water = ledger peak). */
START_TEST(test_strategy_grid)
{
    static const char *shard[] = {"no_shard", "shard_grad_op", "full_shard", "hybrid_shard", "zero1", "zero2", "zero3"};
    static const char *rec[] = {"none", "selective", "full"};
    static const char *pipe[] = {"pipeline: 1f1b", "pipeline: gpipe", "pipeline: interleaved, virtual_stages: 2"};
    static const char *pref[] = {"none", "backward_pre", "backward_post"};
    size_t n = 0;
    for (size_t a = 0; a < 7; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++) {
                char y[1024];
                snprintf(y, sizeof y,
                         SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                               "grid: {dp: 2, pp: 2, tp: 2}\n"
                               "strategy: {sharding: %s, recompute: %s, %s, prefetch: %s, flash_attention: %s,"
                               " sequence_parallel: %s, offload: %s, grad_sync: %s, forward_prefetch: %s,"
                               " wrap: %s, tp_comm_overlap: %s, overlap_param_gather: %s}\n"
                               "batch: {global: 8, micro: 1}\n",
                         shard[a], rec[b], pipe[c], pref[(a + b) % 3], (a + c) % 2 ? "true" : "false",
                         (b + c) % 2 ? "true" : "false", a % 3 == 0 ? "true" : "false",
                         (a + b + c) % 2 ? "last" : "every", c % 2 ? "true" : "false",
                         (a + c) % 3 == 0 ? "model" : (a + c) % 3 == 1 ? "layer" : "{min_params: 1e5}",
                         (b + c) % 2 && (a + b) % 2 == 0 ? "true" : "false", a >= 4 && a <= 5 ? "true" : "false");
                gs_schedule *sch = build(y, (a + b + c) % 4 == 0);
                gs_schedule_destroy(sch);
                n++;
            }
    ck_assert_uint_eq(n, 63);
}
END_TEST

/* The embedding and the loss counted in the split, by hand: 10 layers + 2 over pp 2 and 3
 * virtual stages, 2 slots each. Virtual stage k = chunk x 2 + stage holds slots 2k, 2k + 1 of
 * [embedding, layers 0-9, loss]: k 0 (stage 0, chunk 0) layer 0; k 1 (1, 0) layers 1, 2; k 2
 * (0, 1) 3, 4; k 3 (1, 1) 5, 6; k 4 (0, 2) 7, 8; k 5 (1, 2) layer 9. Every compute event of a
 * layer runs on that layer's stage, each stage computes its 5, every send and receive names a
 * layer of its chunk, and the forward receives arrive at the chunks' first layers: 3 and 7 on
 * stage 0, 1, 5 and 9 on stage 1. */
START_TEST(test_split_accounting_chunks)
{
    static const int stage_of[10] = {0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, chunk_of[10] = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2};
    static const int fwd_recv[2][10] = {{0, 0, 0, 1, 0, 0, 0, 1, 0, 0}, {0, 1, 0, 0, 0, 1, 0, 0, 0, 1}};
    gs_schedule *sch = build("model: {layers: 10, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"
                             "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 2}\n"
                             "grid: {dp: 1, pp: 2, tp: 1, account_for_embedding: true, account_for_loss: true}\n"
                             "strategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 3}\n"
                             "batch: {global: 4, micro: 1}\n",
                             1);
    ck_assert_uint_eq(sch->nranks, 2);
    for (size_t i = 0; i < 2; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        int computed[10] = {0}, received[10] = {0};
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            if (e->layer < 0 || e->phase == GS_PHASE_OPTIM)
                continue;
            ck_assert_int_lt(e->layer, 10);
            if (e->kind == GS_EV_COMPUTE) {
                ck_assert_msg(stage_of[e->layer] == (int)r->stage, "rank %zu computes layer %d", i, (int)e->layer);
                computed[e->layer] = 1;
            } else if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV) {
                ck_assert_msg(stage_of[e->layer] == (int)r->stage && chunk_of[e->layer] == (int)e->chunk,
                              "rank %zu: a p2p event of layer %d in chunk %d", i, (int)e->layer, (int)e->chunk);
                if (e->kind == GS_EV_RECV && e->phase == GS_PHASE_FWD)
                    received[e->layer] = 1;
            }
        }
        for (int l = 0; l < 10; l++) {
            ck_assert_int_eq(computed[l], stage_of[l] == (int)r->stage);
            ck_assert_int_eq(received[l], fwd_recv[i][l]);
        }
    }
    gs_schedule_destroy(sch);
}
END_TEST

/* Property: the embedding and the loss counted in the split (both over 10 layers: stages of 5,
 * 3 virtual stages of 1, 2, 2 on stage 0 and 2, 2, 1 on stage 1; one of them over 11: stages of
 * 5 and 6 or 6 and 5) validate under every sharding and pipeline, the wrap policies and the
 * class and exact paths taking turns: 7 x 3 x 3 = 63 combinations, the memory high-water and
 * the bytes sent equal to the ledger's, which walks the same chunks. */
START_TEST(test_split_accounting_grid)
{
    static const char *shard[] = {"no_shard", "shard_grad_op", "full_shard", "hybrid_shard", "zero1", "zero2", "zero3"};
    static const char *pipe[] = {"pipeline: 1f1b", "pipeline: gpipe", "pipeline: interleaved, virtual_stages: 3"};
    static const char *account[] = {"account_for_embedding: true, account_for_loss: true",
                                    "account_for_embedding: true", "account_for_loss: true"};
    size_t n = 0;
    for (size_t a = 0; a < 7; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++) {
                char y[1024];
                snprintf(y, sizeof y,
                         "model: {layers: %d, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"
                         "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                         "grid: {dp: 2, pp: 2, tp: 2, %s}\n"
                         "strategy: {sharding: %s, %s, recompute: %s, wrap: %s}\n"
                         "batch: {global: 8, micro: 1}\n",
                         c == 0 ? 10 : 11, account[c], shard[a], pipe[b], (a + b) % 2 ? "full" : "none",
                         (a + b + c) % 3 == 0 ? "model" : (a + b + c) % 3 == 1 ? "layer" : "{min_params: 1e5}");
                gs_schedule *sch = build(y, (a + b + c) % 2);
                gs_schedule_destroy(sch);
                n++;
            }
    ck_assert_uint_eq(n, 63);
}
END_TEST

/* Property: bucket_stages first validates (structure, and bytes sent and memory peak equal to the
 * ledgers, which count each one-bucket chunk's reduction and gather on their own) for DDP and
 * ZeRO-1 under every pipeline, wrap policy and overlap setting, with TP 2: 2 x 3 x 3 x 2 = 36
 * combinations alternating the class and the exact path. */
START_TEST(test_bucket_stages_first_grid)
{
    static const char *shard[] = {"no_shard", "zero1"};
    static const char *pipe[] = {"pipeline: 1f1b", "pipeline: gpipe", "pipeline: interleaved, virtual_stages: 2"};
    static const char *wrap[] = {"model", "layer", "{min_params: 1e5}"};
    size_t n = 0;
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < 2; d++) {
                    char y[1024];
                    snprintf(y, sizeof y,
                             SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                                   "grid: {dp: 2, pp: 2, tp: 2}\n"
                                   "strategy: {sharding: %s, %s, wrap: %s, bucket_mb: 1, bucket_stages: first, "
                                   "overlap_grad_reduce: %s, grad_sync: %s, overlap_param_gather: %s}\n"
                                   "batch: {global: 8, micro: 1}\n",
                             shard[a], pipe[b], wrap[c], d ? "false" : "true", d ? "last" : "every",
                             a == 1 && d == 0 ? "true" : "false");
                    gs_schedule *sch = build(y, (a + b + c + d) % 2);
                    gs_schedule_destroy(sch);
                    n++;
                }
    ck_assert_uint_eq(n, 36);
}
END_TEST

/* Property: HYBRID_SHARD with one DP rank per node (tp 2 x pp 2 fill each 4-GPU node, dp 2
 * across the 2 nodes) validates under every wrap policy, pipeline, grad_sync and offload setting;
 * the 3 x 3 x 2 x 2 = 36 combinations alternate the class and the exact path. */
START_TEST(test_hsdp_one_rank_per_node_grid)
{
    static const char *wrap[] = {"model", "layer", "{min_params: 1e5}"};
    static const char *pipe[] = {"pipeline: 1f1b", "pipeline: gpipe", "pipeline: interleaved, virtual_stages: 2"};
    size_t n = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 2; c++)
                for (size_t d = 0; d < 2; d++) {
                    char y[1024];
                    snprintf(y, sizeof y,
                             SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                                   "grid: {dp: 2, pp: 2, tp: 2, order: tp-pp-dp}\n"
                                   "strategy: {sharding: hybrid_shard, wrap: %s, %s, grad_sync: %s, offload: %s}\n"
                                   "batch: {global: 8, micro: 1}\n",
                             wrap[a], pipe[b], c ? "last" : "every", d ? "true" : "false");
                    gs_schedule *sch = build(y, (a + b + c + d) % 2);
                    ck_assert_uint_gt(count(sch, 0, GS_EV_COLLECTIVE, GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER), 0);
                    gs_schedule_destroy(sch);
                    n++;
                }
    ck_assert_uint_eq(n, 36);
}
END_TEST

/* The partition's per-layer index (gs_partition_units_covering, gs_partition_covering) against a
 * scan of every unit (a unit covers stage-local layer l when it is not the root and
 * layer_begin <= l <= layer_end): the same units in the same ascending order, the same sums.
 * min_params wraps give units of part of a block, whole blocks, and one unit spanning a chunk's
 * list of blocks (several layers); model wrap leaves only the root (no layer is covered). */
START_TEST(test_partition_index)
{
    static const char *wraps[] = {"layer", "model", "{min_params: 100000000}", "{min_params: 20000000}",
                                  "{min_params: 500000000}"};
    for (size_t w = 0; w < sizeof wraps / sizeof wraps[0]; w++)
        for (uint64_t stage = 0; stage < 2; stage++) {
            char y[512];
            snprintf(y, sizeof y,
                     "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 2, pp: 2, tp: 2}\n"
                     "strategy: {sharding: full_shard, wrap: %s, pipeline: interleaved, virtual_stages: 2}\n"
                     "batch: {global: 8, micro: 1}\n", wraps[w]);
            gs_error err;
            gs_error_init(&err);
            ck_assert_msg(gs_scenario_load_string(y, strlen(y), "t", &g_s, &err) == GS_OK, "%s", err.msg);
            ck_assert_msg(gs_scenario_mesh(&g_s, &g_m, NULL, &err) == GS_OK, "%s", err.msg);
            gs_partition p;
            ck_assert_msg(gs_partition_stage(&g_s, &g_m, stage, &p, &err) == GS_OK, "%s", err.msg);
            ck_assert_uint_eq(p.layers, 16); /* 32 layers over pp = 2 */
            size_t covered = 0;
            for (int64_t l = -1; l <= (int64_t)p.layers; l++) {
                const size_t *units;
                size_t n = gs_partition_units_covering(&p, l, &units), k = 0;
                uint64_t sum = 0;
                for (size_t u = 0; u < p.nunits; u++) {
                    const gs_unit *un = &p.units[u];
                    if (un->layer_begin == GS_PART_ROOT || un->layer_begin > l || l > un->layer_end)
                        continue;
                    ck_assert_msg(k < n && units[k] == u, "%s stage %llu layer %lld: unit %zu missing", wraps[w],
                                  (unsigned long long)stage, (long long)l, u);
                    k++;
                    sum += un->params;
                }
                ck_assert_uint_eq(k, n);
                ck_assert_uint_eq(gs_partition_covering(&p, l), sum);
                covered += n;
            }
            if (w == 1)
                ck_assert_uint_eq(covered, 0);
            else
                ck_assert_uint_ge(covered, p.layers);
            gs_partition_fini(&p);
        }
}
END_TEST

/* The loss's HBM bytes (strategy.cross_entropy). SMALL with tp 2: T = 64 tokens, V/tp = 500
 * logits per token, 32000 logits per micro-batch on a rank. Megatron-LM's
 * vocab_parallel_cross_entropy, pass by pass over the logits (megatron/core/tensor_parallel/
 * cross_entropy.py): forward .float() (read 2, write 4 under bf16; nothing under fp32, where
 * .float() is the tensor itself), max (read 4), -= max (4 + 4), exp (4 + 4), sum (4), div_ by
 * the sum (4 + 4): 38 B per bf16 logit, 32 per fp32 one; backward mul_ by the loss gradient
 * (4 + 4) and the cast back (read 4, write 2 under bf16): 14 and 8. A fused kernel reads the
 * logits twice forward and reads them and writes their gradient backward: 2 e each way. */
static void loss_bytes(const char *xent, const char *prec, uint64_t fwd, uint64_t bwd)
{
    char y[512];
    snprintf(y, sizeof y,
             SMALL "cluster: {preset: dgx-a100-80g, gpus_per_node: 2}\ngrid: {tp: 2}\n"
                   "strategy: {sharding: no_shard, precision: %s%s%s}\nbatch: {global: 1, micro: 1}\n",
             prec, xent ? ", cross_entropy: " : "", xent ? xent : "");
    gs_schedule *sch = build(y, 0);
    const gs_rank_events *r = &sch->ranks[0];
    size_t nf = 0, nb = 0;
    for (size_t k = 0; k < r->nevents; k++) {
        const gs_event *e = &r->events[k];
        if (e->kind != GS_EV_COMPUTE || e->op != GS_OP_LOSS)
            continue;
        if (e->phase == GS_PHASE_FWD) {
            ck_assert_msg(e->bytes == 32000 * fwd, "%s %s forward: %llu B", xent ? xent : "default", prec,
                          (unsigned long long)e->bytes);
            nf++;
        } else {
            ck_assert_msg(e->bytes == 32000 * bwd, "%s %s backward: %llu B", xent ? xent : "default", prec,
                          (unsigned long long)e->bytes);
            nb++;
        }
    }
    ck_assert_uint_eq(nf, 1);
    ck_assert_uint_eq(nb, 1);
    gs_schedule_destroy(sch);
}

START_TEST(test_loss_bytes)
{
    loss_bytes(NULL, "bf16", 38, 14); /* unfused is the default */
    loss_bytes("unfused", "bf16", 38, 14);
    loss_bytes("unfused", "fp32", 32, 8);
    loss_bytes("fused", "bf16", 4, 4);
    loss_bytes("fused", "fp32", 8, 8);
}
END_TEST

/* FP8 (Transformer Engine): a resident layer unit also holds its cached FP8 weight and transpose,
 * 2 B per element (gs__ledger_stage_states); the built schedule's memory high-water mark must
 * equal the ledger's (build() validates both) for the resident shardings, and the FSDP ones that
 * carry the copies in their gathered units. */
START_TEST(test_fp8_resident_cache)
{
    static const char *const shardings[] = {"no_shard", "zero1", "zero2", "full_shard"};
    for (size_t i = 0; i < 4; i++) {
        char y[512];
        snprintf(y, sizeof y, SMALL "cluster: {preset: dgx-h100, gpus_per_node: 4}\ngrid: {dp: 2, pp: 2}\n"
                 "strategy: {sharding: %s, precision: fp8}\nbatch: {global: 4}\n", shardings[i]);
        gs_schedule *sch = build(y, 0);
        const gs_rank_events *r = &sch->ranks[0];
        uint64_t layer_params = 0, held = 0;
        for (size_t t = 0; t < r->ntensors; t++)
            if (r->tensors[t].kind == GS_T_PARAM_SHARD && r->tensors[t].layer >= 0) {
                held += r->tensors[t].bytes;
                layer_params += 1;
            }
        ck_assert_uint_gt(layer_params, 0);
        if (i < 3) { /* resident: the 2 blocks of stage 0, 4 B per parameter (bf16 + FP8 cache) */
            gs_model m = g_s.model;
            ck_assert_uint_eq(held, 2 * gs_model_layer_params(&m) * 4);
        }
        gs_schedule_destroy(sch);
    }
}
END_TEST

static Suite *build_suite(void)
{
    Suite *s = suite_create("build");
    TCase *pp = tcase_create("pipeline");
    tcase_add_test(pp, test_pipeline_sends);
    tcase_add_test(pp, test_interleaved_sends);
    suite_add_tcase(s, pp);
    TCase *dp = tcase_create("data_parallel");
    tcase_add_test(dp, test_fsdp_counts);
    tcase_add_test(dp, test_fsdp2_copies);
    tcase_add_test(dp, test_ddp_zero_counts);
    tcase_add_test(dp, test_grad_dtype);
    tcase_add_test(dp, test_grad_reduce_after_backward);
    tcase_add_test(dp, test_hsdp_counts);
    tcase_add_test(dp, test_hsdp_one_rank_per_node);
    tcase_add_test(dp, test_tied_embedding_exchange);
    tcase_add_test(dp, test_wrap_model_interleaved_root_grad);
    tcase_add_test(dp, test_partition_index);
    suite_add_tcase(s, dp);
    TCase *tp = tcase_create("tensor_parallel");
    tcase_add_test(tp, test_tp_counts);
    tcase_add_test(tp, test_roles);
    tcase_add_test(tp, test_scratch_hazards);
    tcase_add_test(tp, test_recompute_counts);
    tcase_add_test(tp, test_tp_comm_overlap);
    tcase_add_test(tp, test_loss_bytes);
    tcase_add_test(dp, test_overlap_param_gather);
    tcase_add_test(dp, test_bucket_stages_first);
    tcase_add_test(dp, test_bucket_stages_first_interleaved);
    tcase_add_test(dp, test_bucket_stages_first_param_gather);
    suite_add_tcase(s, tp);
    TCase *v = tcase_create("validation");
    tcase_set_timeout(v, 120);
    tcase_add_test(v, test_exact_matches_class);
    tcase_add_test(v, test_shared_matches_copy);
    tcase_add_test(v, test_strategy_grid);
    tcase_add_test(v, test_split_accounting_grid);
    tcase_add_test(v, test_split_accounting_chunks);
    tcase_add_test(v, test_hsdp_one_rank_per_node_grid);
    tcase_add_test(v, test_bucket_stages_first_grid);
    tcase_add_test(v, test_fp8_resident_cache);
    suite_add_tcase(s, v);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(build_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
