/* The troubleshooting table's fixes (engine/diagnose_internal.h): each edits a copy of the
 * scenario for one row's remedy, or says why it does not apply. */
#include <inttypes.h>
#include <stdio.h>

#include "engine/diagnose_internal.h"
#include "engine/framework.h"
#include "engine/units.h"

fix_result gs__fix_wrap_layer(const facts *f, dcase *c, char *label, char *why)
{
    gs__diag_say(label, "wrap: layer (one FSDP unit per transformer block)");
    if (c->s.strategy.wrap == GS_WRAP_LAYER) {
        gs__diag_say(why, "already one unit per layer (effect against wrap: model)%s",
                     f->gather > f->m.gpu_bytes / GATHER_RISK_DIV ? "; add TP to shrink the unit" : "");
        c->s.strategy.wrap = GS_WRAP_MODEL;
        return FIX_ALREADY;
    }
    c->s.strategy.wrap = GS_WRAP_LAYER;
    return FIX_APPLIED;
}

fix_result gs__fix_recompute_full(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs__diag_say(label, "recompute: full (activation checkpointing per layer)");
    if (c->s.strategy.recompute == GS_RECOMPUTE_FULL) {
        gs__diag_say(why, "already full recompute (effect against recompute: none)");
        c->s.strategy.recompute = GS_RECOMPUTE_NONE;
        return FIX_ALREADY;
    }
    c->s.strategy.recompute = GS_RECOMPUTE_FULL;
    return FIX_APPLIED;
}

fix_result gs__fix_micro_half(const facts *f, dcase *c, char *label, char *why)
{
    uint64_t mu = c->s.batch.micro_seqs;
    if (mu < 2 || mu % 2) {
        gs__diag_say(label, "smaller micro-batch");
        gs__diag_say(why, "micro is %" PRIu64 ": more micro-batches need a larger global batch, which changes the "
                          "optimization (retune the learning rate)", mu);
        return FIX_NONE;
    }
    gs__diag_say(label, "micro: %" PRIu64 " -> %" PRIu64 " (micro-batches per step %" PRIu64 " -> %" PRIu64 ")", mu, mu / 2,
                 f->microbatches, 2 * f->microbatches);
    c->s.batch.micro_seqs = mu / 2;
    return FIX_APPLIED;
}

fix_result gs__fix_micro_double(const facts *f, dcase *c, char *label, char *why)
{
    uint64_t mu = c->s.batch.micro_seqs, dp = c->s.grid.dp;
    if (f->microbatches < 2 || f->microbatches % 2) {
        gs__diag_say(label, "larger micro-batch");
        gs__diag_say(why, "%" PRIu64 " micro-batch%s per step: global %" PRIu64 " / (dp %" PRIu64 " x micro %" PRIu64
                          ") leaves no room; a larger global batch changes the optimization",
                     f->microbatches, f->microbatches == 1 ? "" : "es", c->s.batch.global_seqs, dp, 2 * mu);
        return FIX_NONE;
    }
    gs__diag_say(label, "micro: %" PRIu64 " -> %" PRIu64 " (fewer passes: micro-batches per step %" PRIu64 " -> %" PRIu64 ")",
                 mu, 2 * mu, f->microbatches, f->microbatches / 2);
    c->s.batch.micro_seqs = 2 * mu;
    return FIX_APPLIED;
}

fix_result gs__fix_hybrid_shard(const facts *f, dcase *c, char *label, char *why)
{
    gs__diag_say(label, "sharding: hybrid_shard (FULL_SHARD inside a node, replicas across nodes)");
    if (c->s.strategy.sharding == GS_SHARD_HYBRID_SHARD) {
        gs__diag_say(why, "already hybrid_shard (effect against full_shard)");
        c->s.strategy.sharding = GS_SHARD_FULL_SHARD;
        return FIX_ALREADY;
    }
    if (!f->dp_cross) {
        gs__diag_say(why, "the DP group stays within a node");
        return FIX_NONE;
    }
    if (f->dp_local < 2) {
        gs__diag_say(why, "one DP rank per node (TP x PP fill the node): no intra-node group to shard over; cut the "
                          "cross-node DP traffic with a larger micro-batch, TP or PP");
        return FIX_NONE;
    }
    c->s.strategy.sharding = GS_SHARD_HYBRID_SHARD;
    c->s.strategy.reshard_after_forward = 1;
    c->s.strategy.bucket_stages = GS_BUCKET_STAGES_ALL; /* FSDP reduces per unit: no buckets */
    return FIX_APPLIED;
}

fix_result gs__fix_interleaved(const facts *f, dcase *c, char *label, char *why)
{
    gs__diag_say(label, "pipeline: %s -> interleaved 1F1B, 2 virtual stages", gs_pipeline_name(c->s.strategy.pipeline));
    if (f->mesh.size[GS_DIM_PP] == 1) {
        gs__diag_say(why, "no pipeline (pp = 1)");
        return FIX_NONE;
    }
    if (c->s.strategy.pipeline == GS_PIPE_INTERLEAVED) {
        gs__diag_say(why, "already interleaved with %" PRIu64 " virtual stages (effect against 1f1b)",
                     c->s.strategy.virtual_stages);
        c->s.strategy.pipeline = GS_PIPE_1F1B;
        c->s.strategy.virtual_stages = 1;
        return FIX_ALREADY;
    }
    c->s.strategy.pipeline = GS_PIPE_INTERLEAVED;
    c->s.strategy.virtual_stages = 2;
    return FIX_APPLIED;
}

fix_result gs__fix_sharded_state_dict(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs__diag_say(label, "checkpoints: SHARDED_STATE_DICT (each rank writes its shard)");
    if (c->state_dict == GS_STATE_DICT_SHARDED) {
        gs__diag_say(why, "already SHARDED_STATE_DICT (effect against FULL_STATE_DICT)");
        c->state_dict = GS_STATE_DICT_FULL;
        return FIX_ALREADY;
    }
    c->state_dict = GS_STATE_DICT_SHARDED;
    return FIX_APPLIED;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

fix_result gs__fix_tp_in_node(const facts *f, dcase *c, char *label, char *why)
{
    uint64_t tp = c->s.grid.tp, gpn = c->s.cluster.gpus_per_node;
    uint64_t tp2 = gcd_u64(tp, gpn);
    if (f->tp_nodes <= 1) {
        gs__diag_say(label, "keep tp <= GPUs per node (%" PRIu64 ")", gpn);
        gs__diag_say(why, "TP groups already within a node");
        return FIX_NONE;
    }
    gs__diag_say(label, "grid: tp %" PRIu64 " -> %" PRIu64 ", dp %" PRIu64 " -> %" PRIu64 " (TP inside the node)", tp, tp2,
                 c->s.grid.dp, c->s.grid.dp * (tp / tp2));
    c->s.grid.dp *= tp / tp2;
    c->s.grid.tp = tp2;
    return FIX_APPLIED;
}

fix_result gs__fix_tp_comm_overlap(const facts *f, dcase *c, char *label, char *why)
{
    gs__diag_say(label, "sequence_parallel + tp_comm_overlap (Megatron-Core --sequence-parallel --tp-comm-overlap)");
    if (f->mesh.size[GS_DIM_TP] <= 1) {
        gs__diag_say(why, "tp = 1: nothing to overlap");
        return FIX_NONE;
    }
    if (c->s.strategy.tp_comm_overlap) {
        gs__diag_say(why, "already overlapped (effect against tp_comm_overlap: false)");
        c->s.strategy.tp_comm_overlap = 0;
        return FIX_ALREADY;
    }
    c->s.strategy.sequence_parallel = 1;
    c->s.strategy.tp_comm_overlap = 1;
    return FIX_APPLIED;
}

fix_result gs__fix_overlap_param_gather(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs__diag_say(label, "overlap_param_gather (Megatron --overlap-param-gather: the gather under the next forward)");
    if (c->s.strategy.sharding != GS_SHARD_ZERO1 && c->s.strategy.sharding != GS_SHARD_ZERO2) {
        gs__diag_say(why, "sharding %s has no gather after the optimizer", gs_sharding_name(c->s.strategy.sharding));
        return FIX_NONE;
    }
    if (c->s.strategy.overlap_param_gather) {
        gs__diag_say(why, "already overlapped (effect against overlap_param_gather: false)");
        c->s.strategy.overlap_param_gather = 0;
        return FIX_ALREADY;
    }
    c->s.strategy.overlap_param_gather = 1;
    return FIX_APPLIED;
}

fix_result gs__fix_fused_loss(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs__diag_say(label, "cross_entropy: fused (Megatron --cross-entropy-loss-fusion; Transformer Engine's or Liger's "
                        "kernel)");
    if (c->s.strategy.cross_entropy == GS_XENT_FUSED) {
        gs__diag_say(why, "already fused (effect against cross_entropy: unfused)");
        c->s.strategy.cross_entropy = GS_XENT_UNFUSED;
        return FIX_ALREADY;
    }
    c->s.strategy.cross_entropy = GS_XENT_FUSED;
    return FIX_APPLIED;
}

fix_result gs__fix_no_offload(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs__diag_say(label, "offload: false (states stay on the GPU)");
    if (!c->s.strategy.offload) {
        gs__diag_say(why, "offload already off");
        return FIX_NONE;
    }
    c->s.strategy.offload = 0;
    return FIX_APPLIED;
}

fix_result gs__fix_full_shard(const facts *f, dcase *c, char *label, char *why)
{
    char c1[32];
    gs__diag_say(label, "sharding: full_shard (params, grads and optimizer state sharded)");
    if (gs_sharding_shards_params(c->s.strategy.sharding)) {
        gs__diag_say(why, "parameters already sharded: the job needs at least %s GPUs (states total / GPU memory), or "
                          "a larger TP x PP slice per rank", gs_fmt_count(f->min_gpus, c1, sizeof c1));
        return FIX_NONE;
    }
    c->s.strategy.sharding = GS_SHARD_FULL_SHARD;
    c->s.strategy.reshard_after_forward = 1;
    c->s.strategy.bucket_stages = GS_BUCKET_STAGES_ALL; /* FSDP reduces per unit: no buckets */
    return FIX_APPLIED;
}

/* Fewer host calls: torch.compile's fused kernels under the PyTorch frameworks, CUDA graphs
 * (one call per layer and micro-batch) under Megatron. */
/* Hierarchical CP with the a2a level on the CP ranks a node holds (Megatron-Core
 * --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes local cp/local): the ring then has
 * one rank per node. */
fix_result gs__fix_hierarchical_cp(const facts *f, dcase *c, char *label, char *why)
{
    const gs_model *m = &c->s.model;
    uint64_t cp = f->mesh.cp, a = f->cp_local, tp = f->mesh.size[GS_DIM_TP];
    gs__diag_say(label, "cp_comm: a2a+p2p with cp_a2a the CP ranks per node (Megatron-Core --cp-comm-type a2a+p2p "
                 "--hierarchical-context-parallel-sizes)");
    if (c->s.strategy.cp_comm == GS_CP_A2A_P2P) {
        gs__diag_say(why, "already hierarchical (effect against cp_comm: p2p)");
        c->s.strategy.cp_comm = GS_CP_P2P;
        c->s.grid.cp_a2a = 0;
        return FIX_ALREADY;
    }
    if (cp <= 1 || f->cp_nodes <= 1 || a <= 1 || a >= cp || cp % a) {
        gs__diag_say(why, "the CP group does not hold several ranks on each of several nodes");
        return FIX_NONE;
    }
    if (m->heads % (tp * a) || m->kv_heads % (tp * a)) {
        gs__diag_say(why, "the heads (%llu, %llu KV) do not divide by tp x %llu", (unsigned long long)m->heads,
                     (unsigned long long)m->kv_heads, (unsigned long long)a);
        return FIX_NONE;
    }
    gs__diag_say(label, "cp_comm: a2a+p2p, cp_a2a: %llu (Megatron-Core --cp-comm-type a2a+p2p "
                 "--hierarchical-context-parallel-sizes %llu %llu)", (unsigned long long)a, (unsigned long long)a,
                 (unsigned long long)(cp / a));
    c->s.strategy.cp_comm = GS_CP_A2A_P2P;
    c->s.grid.cp_a2a = a;
    return FIX_APPLIED;
}

fix_result gs__fix_fewer_issues(const facts *f, dcase *c, char *label, char *why)
{
    (void)f;
    gs_framework fw = gs_framework_resolve(c->s.strategy.framework, (int)c->s.strategy.sharding);
    if (fw == GS_FW_MEGATRON) {
        gs__diag_say(label, "cuda_graphs: true (Megatron --cuda-graph-impl local: a layer's kernels in one call)");
        if (c->s.strategy.cuda_graphs) {
            gs__diag_say(why, "already CUDA graphs (effect against cuda_graphs: false)");
            c->s.strategy.cuda_graphs = 0;
            return FIX_ALREADY;
        }
        c->s.strategy.cuda_graphs = 1;
        return FIX_APPLIED;
    }
    gs__diag_say(label, "compile: true (torch.compile: Inductor fuses the elementwise ops into fewer kernels)");
    if (c->s.strategy.compile) {
        gs__diag_say(why, "already compiled (effect against compile: false)");
        c->s.strategy.compile = 0;
        return FIX_ALREADY;
    }
    c->s.strategy.compile = 1;
    return FIX_APPLIED;
}
