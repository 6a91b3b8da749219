/* A loaded scenario against its mesh (engine/scenario.h): the grid, stragglers, batch and
 * strategy checks that need the mesh, the size limits of the schedule built from it, and the
 * quantities derived from both (micro-batches and tokens per step, a rank's slowdown). The
 * scenario and mesh are borrowed; gs_scenario_mesh fills the caller's mesh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scenario.h"
#include "engine/units.h"

/* Where a section was written, for messages: "PATH:LINE:COL", or the path alone ("<scenario>"
 * when there is none) for a scenario built in code. */
static void section_at(const gs_scenario *s, uint32_t line, uint32_t col, char *buf, size_t len)
{
    if (line)
        snprintf(buf, len, "%s:%u:%u", s->path, line, col);
    else
        snprintf(buf, len, "%s", s->path[0] ? s->path : "<scenario>");
}

/* Every straggler names a rank or node of the grid. */
static gs_status check_stragglers(const gs_scenario *s, const gs_mesh *mesh, gs_error *err)
{
    for (size_t i = 0; i < s->nstragglers; i++) {
        const gs_straggler *g = &s->stragglers[i];
        uint64_t limit = g->node ? gs_mesh_nodes(mesh) : mesh->world;
        if (g->id >= limit)
            return gs_error_set(err, GS_ERR_INPUT, "%s: stragglers: %s %llu does not exist (the grid has %llu %s)",
                                s->path[0] ? s->path : "<scenario>", g->node ? "node" : "rank",
                                (unsigned long long)g->id, (unsigned long long)limit, g->node ? "nodes" : "ranks");
    }
    return GS_OK;
}

/* The batch splits into micro-batches of every DP replica, each within a GEMM's 32-bit rows, at
 * most GS_SCENARIO_MAX_MICROBATCHES per step; *per_step_out: sequences per micro-batch over the
 * DP replicas (micro x dp). */
static gs_status check_batch(const gs_scenario *s, const char *batch_at, uint64_t *per_step_out, gs_error *err)
{
    uint64_t per_step, micro = s->batch.micro_seqs, dp = s->grid.dp;
    if (micro == 0 || s->batch.global_seqs == 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch must be positive: found global=%llu, micro=%llu, "
                            "expected both >= 1",
                            batch_at, (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)micro);
    if (gs_mul_u64(micro, dp, &per_step) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "%s: batch: micro=%llu x dp=%llu is too large: expected a product "
                            "below 2^64",
                            batch_at, (unsigned long long)micro, (unsigned long long)dp);
    uint64_t mb_tokens;
    if (s->model.seq &&
        (gs_mul_u64(micro, s->model.seq, &mb_tokens) != 0 || mb_tokens > UINT32_MAX))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch: micro=%llu sequences of %llu tokens is too many tokens per "
                            "micro-batch: expected at most 4294967295 (a GEMM's rows are 32-bit)",
                            batch_at, (unsigned long long)micro, (unsigned long long)s->model.seq);
    if (s->batch.global_seqs % per_step != 0) {
        uint64_t below = s->batch.global_seqs / per_step * per_step;
        uint64_t above = below + per_step;
        char hint[96] = "";
        if (below > 0 && above > below)
            snprintf(hint, sizeof hint, " (like %llu or %llu)", (unsigned long long)below,
                     (unsigned long long)above);
        else if (above > below)
            snprintf(hint, sizeof hint, " (like %llu)", (unsigned long long)above);
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch.global=%llu is not a multiple of micro=%llu x dp=%llu: "
                            "found %llu, expected a multiple of %llu%s",
                            batch_at, (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)micro, (unsigned long long)dp,
                            (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)per_step, hint);
    }
    /* the ledger's pipeline walks every micro-batch of a step: bounded, with the batch's place */
    if (s->batch.global_seqs / per_step > GS_SCENARIO_MAX_MICROBATCHES)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch: global=%llu / (micro=%llu x dp=%llu) = %llu micro-batches per step, "
                            "expected at most %u (a larger batch.micro or a smaller batch.global)",
                            batch_at, (unsigned long long)s->batch.global_seqs, (unsigned long long)micro,
                            (unsigned long long)dp, (unsigned long long)(s->batch.global_seqs / per_step),
                            GS_SCENARIO_MAX_MICROBATCHES);
    *per_step_out = per_step;
    return GS_OK;
}

/* The strategy's overlap switches, for scenarios not read from a file (imports, sweep points);
 * a file's are also checked where they are written, at their line. */
static gs_status check_overlap(const gs_scenario *s, const char *grid_at, gs_error *err)
{
    const gs_strategy *sg = &s->strategy;
    if (sg->tp_comm_overlap && s->grid.tp > 1 && !sg->sequence_parallel)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.tp_comm_overlap with tp=%llu needs sequence_parallel: true "
                            "(Megatron-Core asserts it: Transformer Engine's userbuffers overlap the "
                            "sequence-parallel all-gathers and reduce-scatters with the GEMMs)",
                            grid_at, (unsigned long long)s->grid.tp);
    if (!sg->overlap_grad_reduce && !gs_strategy_can_reduce_after_backward(sg))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.overlap_grad_reduce false reduces the gradients after the "
                            "backward, which needs them held until the last micro-batch: found sharding "
                            "%s with grad_sync %s, expected no_shard or zero1 (zero2 reduces every "
                            "micro-batch), grad_sync not every",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding),
                            sg->grad_sync == GS_GRAD_SYNC_EVERY ? "every"
                            : sg->grad_sync == GS_GRAD_SYNC_LAST ? "last" : "auto");
    if (sg->bucket_stages == GS_BUCKET_STAGES_FIRST && !gs_strategy_can_bucket_first(sg))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.bucket_stages first (Megatron-Core's rule) merges a model chunk's "
                            "gradient buckets, held whole in a resident buffer until their one reduction: "
                            "found sharding %s, expected no_shard or zero1 (zero2 reduces every micro-batch "
                            "into transient gradients, FSDP per unit)",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding));
    if (sg->overlap_param_gather && sg->sharding != GS_SHARD_ZERO1 && sg->sharding != GS_SHARD_ZERO2)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: strategy.overlap_param_gather applies to zero1 and zero2 (the "
                            "parameter all-gather after the optimizer): found sharding %s",
                            s->path[0] ? s->path : "<scenario>", gs_sharding_name(sg->sharding));
    return GS_OK;
}

/* An interleaved pipeline splits every stage's layers into virtual_stages equal chunks, and the
 * micro-batches of a step into multiples of pp (Megatron's requirements). With the embedding or
 * loss accounted in the split (layers + 1 (+ 1)) / pp splits into them (Megatron-LM d98e8a6,
 * transformer_config.py TransformerConfig.__post_init__), and every chunk keeps a layer
 * (Megatron allows a chunk of the embedding or loss alone; gridstep does not). */
static gs_status check_interleaved(const gs_scenario *s, const gs_mesh *mesh, uint64_t per_step,
                                   const char *grid_at, const char *batch_at, gs_error *err)
{
    uint64_t v = s->strategy.virtual_stages, pp = s->grid.pp, chunks;
    if (s->grid.layout.n) {
        /* the layout names every chunk (check_layout) */
    } else if (s->grid.account_for_embedding || s->grid.account_for_loss) {
        uint64_t extra = (uint64_t)s->grid.account_for_embedding + (uint64_t)s->grid.account_for_loss;
        uint64_t per_stage = (s->model.layers + extra) / pp; /* gs_mesh_check: a whole number */
        if (v && per_stage % v != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: grid: interleaved pipeline with virtual_stages=%llu and the embedding / loss "
                                "accounted in the split needs (layers + %llu) / pp = (%llu + %llu) / %llu = %llu "
                                "to split into %llu equal chunks: expected a multiple of %llu",
                                grid_at, (unsigned long long)v, (unsigned long long)extra,
                                (unsigned long long)s->model.layers, (unsigned long long)extra,
                                (unsigned long long)pp, (unsigned long long)per_stage, (unsigned long long)v,
                                (unsigned long long)v);
        if (v && per_stage / v <= 1)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: grid: interleaved pipeline with virtual_stages=%llu: (%llu layers + %llu) / "
                                "(pp x virtual_stages) = 1 per chunk leaves the %s chunk with no decoder layer; "
                                "gridstep needs one in every chunk (fewer virtual_stages)",
                                grid_at, (unsigned long long)v, (unsigned long long)s->model.layers,
                                (unsigned long long)extra,
                                s->grid.account_for_embedding ? "first stage's first" : "last stage's last");
    } else if (s->grid.first_stage_layers || s->grid.last_stage_layers) {
        /* Megatron-LM: each stage's layers split into the virtual stages evenly */
        for (uint64_t k = 0; k < mesh->size[GS_DIM_PP]; k++)
            if (v && gs_mesh_stage_layers(mesh, s->model.layers, k) % v != 0)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "%s: grid: interleaved pipeline with virtual_stages=%llu needs every "
                                    "stage's layers to split into %llu equal chunks: stage %llu holds %llu "
                                    "(first_stage_layers %llu, last_stage_layers %llu)",
                                    grid_at, (unsigned long long)v, (unsigned long long)v,
                                    (unsigned long long)k,
                                    (unsigned long long)gs_mesh_stage_layers(mesh, s->model.layers, k),
                                    (unsigned long long)s->grid.first_stage_layers,
                                    (unsigned long long)s->grid.last_stage_layers);
    } else if (gs_mul_u64(pp, v, &chunks) != 0 || s->model.layers % chunks != 0) {
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: grid: interleaved pipeline with pp=%llu and "
                            "virtual_stages=%llu needs the %llu layers to split into "
                            "pp x virtual_stages equal chunks: found %llu layers, expected "
                            "a multiple of %llu (or first_stage_layers / last_stage_layers "
                            "that leave every stage a multiple of virtual_stages)",
                            grid_at, (unsigned long long)pp, (unsigned long long)v,
                            (unsigned long long)s->model.layers,
                            (unsigned long long)s->model.layers,
                            (unsigned long long)(pp * v));
    }
    uint64_t mb = s->batch.global_seqs / per_step;
    if (mb % pp != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: batch: interleaved pipeline needs micro-batches per step "
                            "to be a multiple of pp=%llu (Megatron's requirement): found "
                            "global / (micro x dp) = %llu / %llu = %llu, expected a "
                            "multiple of %llu",
                            batch_at, (unsigned long long)pp,
                            (unsigned long long)s->batch.global_seqs,
                            (unsigned long long)per_step, (unsigned long long)mb,
                            (unsigned long long)pp);
    return GS_OK;
}

/* strategy.overlap_moe_expert_parallel_comm: the asserts of Megatron-Core's TransformerConfig
 * (megatron/core/transformer/transformer_config.py): expert parallelism, the alltoall or flex
 * dispatcher, virtual pipeline stages when pp > 1, at most one MTP layer. */
static gs_status check_ep_overlap(const gs_scenario *s, gs_error *err)
{
    if (!s->model.moe.experts || s->grid.ep <= 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "strategy.overlap_moe_expert_parallel_comm overlaps the expert-parallel token "
                            "exchanges: found %s, expected a MoE model (model.moe) with grid.ep >= 2",
                            s->model.moe.experts ? "grid.ep = 1" : "a dense model");
    if (s->strategy.moe_dispatcher == GS_MOE_ALLGATHER)
        return gs_error_set(err, GS_ERR_INPUT,
                            "strategy.overlap_moe_expert_parallel_comm: Megatron-Core supports it with the "
                            "alltoall and flex token dispatchers; found moe_dispatcher allgather");
    if (s->grid.pp > 1 && s->strategy.pipeline != GS_PIPE_INTERLEAVED)
        return gs_error_set(err, GS_ERR_INPUT,
                            "strategy.overlap_moe_expert_parallel_comm with grid.pp = %llu needs virtual "
                            "pipeline stages (Megatron-Core asserts it): found pipeline %s, expected "
                            "pipeline: interleaved with virtual_stages >= 2",
                            (unsigned long long)s->grid.pp, gs_pipeline_name(s->strategy.pipeline));
    if (s->model.mtp_layers > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "strategy.overlap_moe_expert_parallel_comm supports at most one MTP layer "
                            "(Megatron-Core asserts it): found model.mtp_layers = %llu",
                            (unsigned long long)s->model.mtp_layers);
    return GS_OK;
}

/* Context parallelism splits each sequence into 2 cp chunks (the load-balanced order of
 * Megatron-Core and torchtitan for causal attention: rank i holds chunks i and 2 cp - 1 - i), so
 * the sequence must divide by 2 cp; Ulysses' all-to-all splits the heads, which must divide by
 * cp x tp. */
/* Expert parallelism (grid.ep > 1, or etp below tp) spreads a MoE model's routed experts: the
 * experts must divide over ep; a block's dense and expert parameters are two units (wrap: layer)
 * and the expert ones are reduced, sharded and gathered over their own expert-data-parallel
 * group: Megatron-Core's gradient buffers (no_shard, zero1), DeepSpeed's ZeRO-2/3 and FSDP (as
 * torchtitan shards experts over dp_shard / ep). Refused: HSDP, CPU offload, other wraps, and the
 * sharded strategies with an EDP group of one (experts whole on every rank). */
static gs_status check_ep(const gs_scenario *s, uint64_t ep, gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    if (!m->moe.experts && ep == 1)
        return gs_error_set(err, GS_ERR_INPUT, "etp=%llu: model %s has no experts (model.moe), expected no etp",
                            (unsigned long long)s->grid.etp, m->name);
    if (!m->moe.experts)
        return gs_error_set(err, GS_ERR_INPUT, "ep=%llu: model %s has no experts (model.moe), expected ep: 1",
                            (unsigned long long)ep, m->name);
    if (m->moe.experts % ep != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "ep=%llu must divide the %llu routed experts of model %s (each EP rank holds experts / ep)",
                            (unsigned long long)ep, (unsigned long long)m->moe.experts, m->name);
    /* Megatron-Core's gradient buffers (no_shard, zero1), DeepSpeed's ZeRO-2/3 and FSDP, the
     * experts sharded like the rest over their expert-data-parallel group; a block's dense and
     * expert parameters in two units (wrap: layer) */
    const char *what = ep > 1 ? "expert parallelism" : "expert tensor parallelism below tp";
    if (st->sharding == GS_SHARD_HYBRID_SHARD || st->wrap != GS_WRAP_LAYER || st->offload)
        return gs_error_set(err, GS_ERR_INPUT,
                            "ep=%llu: %s is built for sharding no_shard, zero1, zero2, zero3 / full_shard or "
                            "shard_grad_op with wrap: layer and no CPU offload (the experts a unit of their own); "
                            "found sharding %s, wrap %s%s",
                            (unsigned long long)ep, what, gs_sharding_name(st->sharding), gs_wrap_name(st->wrap),
                            st->offload ? ", offload" : "");
    return GS_OK;
}

/* The expert grid against the data-parallel one, once the mesh holds it: with one data-parallel
 * rank the builders reduce nothing, so an EDP group spanning TP ranks (etp below tp) is not built.
 * An EDP group of one under a sharded strategy (ep = tp / etp x dp x cp) holds each rank's
 * experts whole, as FSDP2 on torchtitan's dp_shard_mod_ep mesh of size 1 does: their gathers and
 * reduce-scatters run on a group of one and move nothing. */
static gs_status check_edp(const gs_mesh *mesh, gs_error *err)
{
    uint64_t edp = gs_mesh_edp_size(mesh);
    if (mesh->size[GS_DIM_DP] <= 1 && edp > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "etp=%llu below tp=%llu with one data-parallel rank (dp x cp = 1): the experts' gradients "
                            "would be summed over %llu TP ranks, which is not built; use etp = tp or dp x cp > 1",
                            (unsigned long long)gs_mesh_etp(mesh), (unsigned long long)mesh->size[GS_DIM_TP],
                            (unsigned long long)edp);
    return GS_OK;
}

/* Multi-token prediction (model.mtp_layers) is built for a model of shapes (not a nominal
 * parameter count) on a non-interleaved pipeline: the MTP blocks join the last stage's only
 * chunk (Megatron-Core places them in the last virtual chunk; gridstep does not yet). */
static gs_status check_mtp(const gs_scenario *s, gs_error *err)
{
    if (s->model.nominal_params)
        return gs_error_set(err, GS_ERR_INPUT, "model.mtp_layers: found with a nominal parameter count (model.params), "
                            "expected a model given by its shapes");
    if (s->strategy.pipeline == GS_PIPE_INTERLEAVED && s->grid.pp > 1)
        return gs_error_set(err, GS_ERR_INPUT, "model.mtp_layers %llu with the interleaved pipeline: the MTP blocks "
                            "are built on the last stage of a 1f1b or gpipe pipeline only (found virtual stages)",
                            (unsigned long long)s->model.mtp_layers);
    return GS_OK;
}

static gs_status check_cp(const gs_scenario *s, uint64_t cp, gs_error *err)
{
    const gs_model *m = &s->model;
    if (cp > 1 && m->seq % (2 * cp) != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "cp=%llu splits each %llu-token sequence into 2 x cp = %llu load-balanced chunks: "
                            "expected a sequence length that is a multiple of %llu",
                            (unsigned long long)cp, (unsigned long long)m->seq, (unsigned long long)(2 * cp),
                            (unsigned long long)(2 * cp));
    if (s->grid.cp_a2a > 1 && (cp <= 1 || s->strategy.cp_comm != GS_CP_A2A_P2P))
        return gs_error_set(err, GS_ERR_INPUT,
                            "grid.cp_a2a=%llu is hierarchical CP's a2a level: expected strategy.cp_comm a2a+p2p "
                            "and cp > 1 (found cp_comm %s, cp=%llu)",
                            (unsigned long long)s->grid.cp_a2a, gs_cp_comm_name(s->strategy.cp_comm),
                            (unsigned long long)cp);
    if (s->strategy.cp_comm == GS_CP_A2A_P2P) {
        uint64_t a = s->grid.cp_a2a;
        if (a < 2 || a >= cp || cp % a != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "strategy.cp_comm a2a+p2p (hierarchical CP) with cp=%llu: found grid.cp_a2a=%llu, "
                                "expected the a2a level's size, a divisor of cp between 2 and cp / 2 (Megatron-"
                                "Core's --hierarchical-context-parallel-sizes A cp/A)",
                                (unsigned long long)cp, (unsigned long long)a);
        if (m->heads % (s->grid.tp * a) != 0 || m->kv_heads % (s->grid.tp * a) != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "strategy.cp_comm a2a+p2p splits each rank's heads over the a2a level: with tp=%llu "
                                "and cp_a2a=%llu found %llu heads and %llu kv heads, expected both multiples of "
                                "tp x cp_a2a = %llu",
                                (unsigned long long)s->grid.tp, (unsigned long long)a, (unsigned long long)m->heads,
                                (unsigned long long)m->kv_heads, (unsigned long long)(s->grid.tp * a));
    }
    if (s->strategy.cp_comm == GS_CP_A2A && (m->heads % (cp * s->grid.tp) != 0 || m->kv_heads % cp != 0))
        return gs_error_set(err, GS_ERR_INPUT,
                            "strategy.cp_comm a2a (Ulysses) with cp=%llu and tp=%llu gives each rank heads / (cp x tp) "
                            "heads: found %llu heads and %llu kv heads, expected heads a multiple of %llu and kv "
                            "heads of %llu (or cp_comm: p2p)",
                            (unsigned long long)cp, (unsigned long long)s->grid.tp, (unsigned long long)m->heads,
                            (unsigned long long)m->kv_heads, (unsigned long long)(cp * s->grid.tp),
                            (unsigned long long)cp);
    return GS_OK;
}

/* Per-op selective checkpointing (recompute: op) is built for torchtitan's Llama blocks: SwiGLU,
 * no dropout, no latent attention or experts, flash attention (the saved SDPA), and sequence
 * parallelism under TP (torchtitan's TP plan), whose reduce-scatters the policy saves. */
static gs_status check_recompute_op(const gs_scenario *s, gs_error *err)
{
    const gs_model *m = &s->model;
    const char *why = m->nominal_params                ? "a model given by its shapes"
                      : m->mlp != GS_MLP_SWIGLU         ? "a SwiGLU MLP (mlp: swiglu)"
                      : m->dropout                      ? "no dropout"
                      : m->mla.kv_lora_rank || m->moe.experts ? "dense blocks without latent attention or experts"
                      : !s->strategy.flash_attention    ? "flash attention (the policy saves flash or efficient SDPA)"
                      : s->grid.tp > 1 && !s->strategy.sequence_parallel
                          ? "sequence_parallel: true under tp > 1 (torchtitan's TP plan)"
                          : NULL;
    if (!why)
        return GS_OK;
    return gs_error_set(err, GS_ERR_INPUT, "%s: strategy.recompute op (torchtitan's per-op selective checkpointing) "
                        "is built for Llama-style blocks: expected %s", s->path, why);
}

/* grid.layout against the grid and model: pp x virtual stages entries (Megatron-Core derives the
 * virtual stages from the layout's length; gridstep asks for strategy.virtual_stages to agree),
 * the model's layers, and its MTP modules ('m'). */
static gs_status check_layout(const gs_scenario *s, gs_error *err)
{
    const gs_layout *l = &s->grid.layout;
    uint64_t v = gs_strategy_chunks(&s->strategy, s->grid.pp);
    if ((uint64_t)l->n != s->grid.pp * v)
        return gs_error_set(err, GS_ERR_INPUT,
                            "layout names %u virtual stages: expected pp x virtual_stages = %llu x %llu = %llu "
                            "(set strategy.pipeline interleaved with virtual_stages %llu for a layout of %u)",
                            (unsigned)l->n, (unsigned long long)s->grid.pp, (unsigned long long)v,
                            (unsigned long long)(s->grid.pp * v), (unsigned long long)(l->n / (s->grid.pp ? s->grid.pp : 1)),
                            (unsigned)l->n);
    if (gs_layout_total(l) != s->model.layers)
        return gs_error_set(err, GS_ERR_INPUT, "layout holds %llu decoder layers ('t'): expected the model's %llu",
                            (unsigned long long)gs_layout_total(l), (unsigned long long)s->model.layers);
    if (l->mtp != s->model.mtp_layers)
        return gs_error_set(err, GS_ERR_INPUT,
                            "layout holds %u MTP modules ('m'): expected model.mtp_layers = %llu (Megatron-LM "
                            "asserts the same)",
                            (unsigned)l->mtp, (unsigned long long)s->model.mtp_layers);
    return GS_OK;
}

gs_status gs_scenario_mesh(const gs_scenario *s, gs_mesh *mesh, gs_diag *warnings, gs_error *err)
{
    if (s->strategy.recompute == GS_RECOMPUTE_OP) {
        gs_status rst = check_recompute_op(s, err);
        if (rst != GS_OK)
            return rst;
    }
    char grid_at[600], batch_at[600];
    section_at(s, s->grid.grid_line, s->grid.grid_col, grid_at, sizeof grid_at);
    section_at(s, s->batch.batch_line, s->batch.batch_col, batch_at, sizeof batch_at);

    uint64_t cp = s->grid.cp ? s->grid.cp : 1, dp_cp;
    if (gs_mul_u64(s->grid.dp, cp, &dp_cp) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW, "%s: grid dp=%llu x cp=%llu: the rank count overflows 64 bits",
                            grid_at, (unsigned long long)s->grid.dp, (unsigned long long)cp);
    gs_status st = gs_mesh_init(mesh, s->grid.tp, dp_cp, s->grid.pp, s->grid.order, s->cluster.gpus_per_node, err);
    if (st == GS_OK)
        st = gs_mesh_set_cp(mesh, cp, s->grid.cp_outer, err);
    int etp_below = s->grid.etp && s->grid.etp != s->grid.tp;
    if (st == GS_OK && (s->grid.ep > 1 || etp_below) && (st = check_ep(s, s->grid.ep, err)) == GS_OK &&
        (st = gs_mesh_set_etp(mesh, s->grid.etp ? s->grid.etp : s->grid.tp, err)) == GS_OK &&
        (st = gs_mesh_set_ep(mesh, s->grid.ep, err)) == GS_OK && (st = check_edp(mesh, err)) == GS_OK &&
        s->model.moe.experts && s->strategy.moe_dispatcher == GS_MOE_ALLGATHER && !gs_mesh_tpep_ok(mesh))
        st = gs_error_set(err, GS_ERR_INPUT,
                          "strategy.moe_dispatcher allgather gathers over the ETP x EP ranks, which needs tp "
                          "directly inside dp in grid.order (tp-dp-pp, tp-cp-dp-pp or pp-tp-dp), as Megatron-Core "
                          "orders them");
    if (st == GS_OK && s->model.moe.experts && s->strategy.moe_dispatcher == GS_MOE_FLEX) {
        uint64_t etp = s->grid.etp ? s->grid.etp : s->grid.tp;
        if (s->grid.ep <= 1 && etp <= 1)
            st = gs_error_set(err, GS_ERR_INPUT,
                              "strategy.moe_dispatcher flex (DeepEP) needs TP x EP > 1 (Megatron-Core's "
                              "MoEFlexTokenDispatcher asserts it); found grid.ep = 1 and expert TP 1, expected "
                              "grid.ep >= 2 or moe_dispatcher: alltoall");
        else if (etp > 1 && !gs_mesh_tpep_ok(mesh))
            st = gs_error_set(err, GS_ERR_INPUT,
                              "strategy.moe_dispatcher flex with expert TP %llu exchanges over the ETP x EP ranks "
                              "(Megatron-Core's tp_ep group), which needs tp directly inside dp in grid.order "
                              "(tp-dp-pp, tp-cp-dp-pp or pp-tp-dp), as Megatron-Core orders them",
                              (unsigned long long)etp);
    }
    if (st == GS_OK && gs_strategy_torch_fsdp2(&s->strategy) && (s->grid.pp > 1 || s->grid.ep > 1))
        st = gs_error_set(err, GS_ERR_INPUT,
                          "strategy.torch_fsdp2: Megatron-LM asserts --use-torch-fsdp2 without pipeline or "
                          "expert parallelism; found grid.pp = %llu, grid.ep = %llu, expected both 1 (or "
                          "framework: fsdp2, or Megatron-FSDP: drop torch_fsdp2)",
                          (unsigned long long)s->grid.pp, (unsigned long long)s->grid.ep);
    if (st == GS_OK && s->strategy.ep_overlap)
        st = check_ep_overlap(s, err);
    if (st == GS_OK)
        gs_mesh_set_stage_layers(mesh, s->grid.first_stage_layers, s->grid.last_stage_layers);
    if (st == GS_OK)
        gs_mesh_set_split_accounting(mesh, s->grid.account_for_embedding, s->grid.account_for_loss);
    if (st == GS_OK && s->grid.layout.n && (st = check_layout(s, err)) == GS_OK)
        gs_mesh_set_layout(mesh, &s->grid.layout);
    if (st == GS_OK && s->model.mtp_layers && (st = check_mtp(s, err)) == GS_OK)
        gs_mesh_set_mtp(mesh, s->model.mtp_layers);
    if (st == GS_OK && (cp > 1 || s->grid.cp_a2a > 1))
        st = check_cp(s, cp, err);
    if (st == GS_OK && s->strategy.cp_comm == GS_CP_A2A_P2P && cp > 1)
        st = gs_mesh_set_cp_a2a(mesh, s->grid.cp_a2a, err);
    if (st == GS_OK)
        st = gs_mesh_check(mesh, gs_cluster_gpus(&s->cluster), &s->model,
                           s->grid.allow_tp_cross_node, warnings, err);
    if (st != GS_OK) {
        gs_error_prefix(err, "%s: grid", grid_at);
        return st;
    }
    uint64_t per_step = 0;
    if ((st = check_stragglers(s, mesh, err)) || (st = check_batch(s, batch_at, &per_step, err)) ||
        (st = check_overlap(s, grid_at, err)))
        return st;
    if (s->strategy.pipeline == GS_PIPE_INTERLEAVED)
        return check_interleaved(s, mesh, per_step, grid_at, batch_at, err);
    return GS_OK;
}

uint64_t gs_scenario_microbatches(const gs_scenario *s)
{
    uint64_t per_step;
    if (gs_mul_u64(s->batch.micro_seqs, s->grid.dp, &per_step) != 0 || per_step == 0)
        return 0;
    return s->batch.global_seqs / per_step;
}

double gs_scenario_tokens(const gs_scenario *s)
{
    return (double)s->batch.global_seqs * (double)s->model.seq;
}

/* DDP and ZeRO-1/2 cut a stage's gradients into bucket_bytes buckets, each a few events: refuses
 * a bucket count above GS_SCHEDULE_MAX_BUCKETS before anything is built. */
static gs_status check_bucket_count(const gs_scenario *s, const gs_mesh *mesh, gs_error *err)
{
    const gs_strategy *st = &s->strategy;
    if ((gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD) || st->bucket_bytes == 0)
        return GS_OK;
    uint64_t pp = mesh->size[GS_DIM_PP] ? mesh->size[GS_DIM_PP] : 1, tp = mesh->size[GS_DIM_TP] ? mesh->size[GS_DIM_TP] : 1;
    uint64_t params = gs_model_params(&s->model), stage = params / pp / tp + 1, bytes;
    if (params == UINT64_MAX || gs_mul_u64(stage, gs_grad_bytes(st), &bytes) != 0)
        bytes = UINT64_MAX;
    uint64_t buckets = bytes / st->bucket_bytes + 1;
    if (buckets <= GS_SCHEDULE_MAX_BUCKETS)
        return GS_OK;
    return gs_error_set(err, GS_ERR_INPUT,
                        "%s: strategy.bucket_bytes: %llu B buckets cut a stage's gradients (about %.3g parameters, "
                        "%.3g B) into about %.3g buckets, expected at most %u; raise bucket_bytes to at least %.3g B "
                        "(`gridstep mem` works at any size)",
                        s->path[0] ? s->path : "<scenario>", (unsigned long long)st->bucket_bytes, (double)stage,
                        (double)bytes, (double)buckets, GS_SCHEDULE_MAX_BUCKETS,
                        (double)bytes / GS_SCHEDULE_MAX_BUCKETS + 1);
}

/* The schedule builds dense and mixture-of-experts blocks with MHA/GQA or latent attention
 * (engine/build_layer.c, engine/build_moe.c, engine/build_mla.c); latent attention is built
 * without TP communication overlap and context parallelism, and refused with them. A MoE block is built as Megatron-Core's
 * all-to-all token dispatcher runs it, so its constraints are Megatron-Core's: sequence
 * parallelism with tp > 1 (megatron/training/arguments.py asserts it for MoE with TP). */
static gs_status check_schedulable_model(const gs_scenario *s, gs_error *err)
{
    const gs_model *m = &s->model;
    char at[600];
    section_at(s, s->grid.grid_line, s->grid.grid_col, at, sizeof at);
    if (m->mla.kv_lora_rank && ((s->strategy.tp_comm_overlap && s->grid.tp > 1) || s->grid.cp > 1))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: model %s has latent attention (MLA), built without %s: expected %s",
                            at, m->name, s->grid.cp > 1 ? "context parallelism" : "tp_comm_overlap",
                            s->grid.cp > 1 ? "cp: 1" : "tp_comm_overlap: false");
    if (m->moe.experts && s->grid.tp > 1 && !s->strategy.sequence_parallel)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: model %s is a mixture of experts with tp=%llu: its blocks are built as "
                            "Megatron-Core's token dispatcher runs them, which needs sequence_parallel: true "
                            "with tensor parallelism",
                            at, m->name, (unsigned long long)s->grid.tp);
    return GS_OK;
}

gs_status gs_scenario_check_schedule_size(const gs_scenario *s, const gs_mesh *mesh, uint64_t microbatches,
                                          int exact, gs_error *err)
{
    gs_status mrc = check_schedulable_model(s, err);
    if (mrc != GS_OK)
        return mrc;
    gs_status brc = check_bucket_count(s, mesh, err);
    if (brc != GS_OK)
        return brc;
    uint64_t pp = mesh->size[GS_DIM_PP], lists = exact ? mesh->world : pp;
    uint64_t stage_layers = (s->model.layers + pp - 1) / pp + 2; /* + embedding and head */
    uint64_t events = 0;
    int over = gs_mul_u64(lists, microbatches, &events) != 0 ||
               gs_mul_u64(events, stage_layers, &events) != 0 ||
               gs_mul_u64(events, GS_SCHEDULE_EVENTS_PER_LAYER_PASS, &events) != 0 ||
               events > GS_SCHEDULE_MAX_EVENTS;
    if (!over)
        return GS_OK;
    char at[600];
    uint32_t line = exact ? s->grid.grid_line : s->batch.batch_line;
    uint32_t col = exact ? s->grid.grid_col : s->batch.batch_col;
    section_at(s, line, col, at, sizeof at);
    double shown = (double)lists * (double)microbatches * (double)stage_layers *
                   GS_SCHEDULE_EVENTS_PER_LAYER_PASS;
    return gs_error_set(err, GS_ERR_OVERFLOW,
                        "%s: %s: the schedule is too large to build: found %llu rank list%s x %llu "
                        "micro-batch%s x %llu layers per stage (with embedding and head) x %u = "
                        "about %.3g events, expected at most %.3g; %suse fewer micro-batches per "
                        "step (a larger batch.micro or a smaller batch.global); `gridstep mem` "
                        "works at any size",
                        at, exact ? "grid" : "batch", (unsigned long long)lists,
                        lists == 1 ? "" : "s", (unsigned long long)microbatches,
                        microbatches == 1 ? "" : "es", (unsigned long long)stage_layers,
                        GS_SCHEDULE_EVENTS_PER_LAYER_PASS, shown, (double)GS_SCHEDULE_MAX_EVENTS,
                        exact ? "simulate one rank per class (no --exact, no stragglers) or " : "");
}

double gs_scenario_slowdown(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank)
{
    double f = 1.0;
    for (size_t i = 0; i < s->nstragglers; i++) {
        const gs_straggler *g = &s->stragglers[i];
        if (g->node ? g->id == gs_mesh_rank_node(mesh, rank) : g->id == rank)
            f *= g->slowdown;
    }
    return f;
}

