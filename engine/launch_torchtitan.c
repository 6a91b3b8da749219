/* A torchtitan train config (TOML, 2025's layout) for a scenario: the keys
 * engine/import_torchtitan.c reads back, so that `gridstep sim --from-torchtitan` of the output
 * gives the same step. What torchtitan cannot express is refused with the reason. */
#include "engine/launch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/framework.h"
#include "engine/import.h"

static int why(char *out, size_t len, const char *msg)
{
    snprintf(out, len, "%s", msg);
    return 0;
}

/* A layout that is torchtitan's own uneven split with the embedding and the output weighing one
 * layer each (gs_torchtitan_split), as its importer writes one. */
static int tt_layout(const gs_scenario *s)
{
    gs_layout l;
    return s->grid.layout.n && gs_torchtitan_split(s->model.layers, s->grid.layout.n, 1, 1, &l) == 0 &&
           memcmp(&l, &s->grid.layout, sizeof l) == 0;
}

/* torchtitan's pipeline_parallel_layers_per_stage for the scenario's stages: the smallest count
 * whose ceil((layers + first + last) / count) is pp x virtual stages (0: none). */
static uint64_t layers_per_stage(const gs_scenario *s)
{
    int both = tt_layout(s);
    uint64_t total = s->model.layers + (uint64_t)(s->grid.account_for_embedding || both) +
                     (uint64_t)(s->grid.account_for_loss || both);
    uint64_t stages = s->grid.pp * (s->strategy.virtual_stages ? s->strategy.virtual_stages : 1);
    uint64_t per = (total + stages - 1) / stages;
    return per && (total + per - 1) / per == stages ? per : 0;
}

int gs_launch_torchtitan_fits(const gs_scenario *s, const gs_mesh *m, char *out, size_t len)
{
    const gs_strategy *st = &s->strategy;
    const char *name, *flavor;
    gs_framework fw = gs_framework_resolve(st->framework, (int)st->sharding);
    if (!gs_torchtitan_flavor(&s->model, &name, &flavor))
        return why(out, len, "the model: torchtitan's flavors are Llama 3 8B / 70B / 405B, Llama 2 7B / 13B / 70B, "
                             "deepseek_v3 16B / 236B / 671B (DeepSeek-V2-Lite, V2, V3), llama4 17bx16e / "
                             "17bx128e (Scout, Maverick) and qwen3 30B-A3B / 235B-A22B");
    if (fw != GS_FW_FSDP2 && !(st->sharding == GS_SHARD_NO_SHARD && fw != GS_FW_MEGATRON && fw != GS_FW_DEEPSPEED))
        return why(out, len, "the framework: torchtitan is FSDP2 (or DDP)");
    if (st->sharding != GS_SHARD_FULL_SHARD && st->sharding != GS_SHARD_HYBRID_SHARD &&
        st->sharding != GS_SHARD_NO_SHARD)
        return why(out, len, "the sharding: torchtitan shards with FSDP2 (full_shard, hybrid_shard) or replicates");
    if (st->recompute == GS_RECOMPUTE_SELECTIVE)
        return why(out, len, "selective recompute: torchtitan's is per-op (recompute: op) or every N-th block");
    if (st->offload)
        return why(out, len, "CPU offload");
    if (st->precision == GS_PREC_FP16)
        return why(out, len, "fp16: torchtitan trains in bf16 or fp32");
    if (gs_fp8_resolve(st->fp8, GS_FW_FSDP2) == GS_FP8_DELAYED || st->fp8 == GS_FP8_MX)
        return why(out, len, "FP8 delayed or MX scaling: torchtitan's float8 is tensorwise dynamic (current) scaling");
    if (s->grid.cp > 1 && st->sharding == GS_SHARD_NO_SHARD)
        return why(out, len, "no_shard with cp: torchtitan shards the parameters over dp_shard x cp");
    if (s->grid.cp > 1 && (st->cp_comm == GS_CP_A2A || st->cp_comm == GS_CP_A2A_P2P))
        return why(out, len, "cp_comm a2a or a2a+p2p: torchtitan rotates K, V by allgather or alltoall (p2p)");
    if (s->model.moe.experts && st->moe_dispatcher != GS_MOE_ALLTOALL)
        return why(out, len, st->moe_dispatcher == GS_MOE_FLEX
                                 ? "the flex (DeepEP) dispatcher: this launch dispatches tokens by all-to-all"
                                 : "the allgather dispatcher: torchtitan dispatches tokens by all-to-all");
    if (s->model.moe.experts && s->grid.etp && s->grid.etp != 1 && s->grid.etp != s->grid.tp)
        return why(out, len, "expert tensor parallelism other than 1 or tp");
    (void)m;
    if (s->grid.tp > 1 && !st->sequence_parallel)
        return why(out, len, "tp without sequence parallelism: torchtitan's TP plan shards the norms");
    if (s->grid.first_stage_layers || s->grid.last_stage_layers || (s->grid.layout.n && !tt_layout(s)))
        return why(out, len, "a pinned pipeline split other than torchtitan's own");
    if (s->grid.pp > 1 && !layers_per_stage(s))
        return why(out, len, "the virtual stages: no pipeline_parallel_layers_per_stage gives them");
    if (s->grid.pp > 1 && s->batch.global_seqs % (s->grid.dp * s->batch.micro_seqs))
        return why(out, len, "the batch: the local batch does not split into pipeline micro-batches");
    if (st->sharding == GS_SHARD_HYBRID_SHARD && s->cluster.gpus_per_node % (s->grid.tp * (s->grid.cp ? s->grid.cp : 1)))
        return why(out, len, "hybrid_shard: a node's data-parallel ranks");
    return 1;
}

/* The parallel degrees and the pipeline. */
static void put_parallelism(gs_text *t, const gs_scenario *s, gs_status *rc)
{
    const gs_strategy *st = &s->strategy;
    uint64_t rep = 1, shard = s->grid.dp, cp = s->grid.cp ? s->grid.cp : 1;
    if (st->sharding == GS_SHARD_NO_SHARD) {
        rep = s->grid.dp;
        shard = 1;
    } else if (st->sharding == GS_SHARD_HYBRID_SHARD) {
        shard = s->cluster.gpus_per_node / (s->grid.tp * cp);
        rep = s->grid.dp / shard;
    }
    int dflt = st->reshard_after_forward == (s->grid.pp == 1);
    *rc = *rc ? *rc
              : gs_text_printf(t,
                               "\n[parallelism]\ndata_parallel_replicate_degree = %" PRIu64
                               "\ndata_parallel_shard_degree = %" PRIu64 "\nfsdp_reshard_after_forward = \"%s\"\n"
                               "tensor_parallel_degree = %" PRIu64 "\nenable_async_tensor_parallel = %s\n"
                               "context_parallel_degree = %" PRIu64 "\n",
                               rep, shard, dflt ? "default" : st->reshard_after_forward ? "always" : "never",
                               s->grid.tp, st->tp_comm_overlap ? "true" : "false", cp);
    if (cp > 1 && !*rc)
        *rc = gs_text_printf(t, "context_parallel_rotate_method = \"%s\"\n",
                             st->cp_comm == GS_CP_P2P ? "alltoall" : "allgather");
    if (s->model.moe.experts && !*rc)
        *rc = gs_text_printf(t, "expert_parallel_degree = %" PRIu64 "\nexpert_tensor_parallel_degree = %" PRIu64 "\n",
                             s->grid.ep ? s->grid.ep : 1, s->grid.etp == 1 ? 1 : s->grid.tp);
    if (!*rc)
        *rc = gs_text_printf(t, "pipeline_parallel_degree = %" PRIu64 "\n", s->grid.pp);
    if (s->grid.pp > 1 && !*rc)
        *rc = gs_text_printf(t,
                             "pipeline_parallel_schedule = \"%s\"\npipeline_parallel_layers_per_stage = %" PRIu64
                             "\npipeline_parallel_first_stage_less_layers = %d\n"
                             "pipeline_parallel_last_stage_less_layers = %d\npipeline_parallel_microbatch_size = %" PRIu64
                             "\n",
                             st->pipeline == GS_PIPE_INTERLEAVED ? "Interleaved1F1B"
                             : st->pipeline == GS_PIPE_GPIPE     ? "GPipe"
                                                                 : "1F1B",
                             layers_per_stage(s), s->grid.account_for_embedding || tt_layout(s),
                             s->grid.account_for_loss || tt_layout(s), s->batch.micro_seqs);
}

gs_status gs__launch_torchtitan(const gs_scenario *s, gs_text *t)
{
    const gs_strategy *st = &s->strategy;
    const char *name = "", *flavor = "";
    gs_torchtitan_flavor(&s->model, &name, &flavor);
    int fp8 = gs_fp8_resolve(st->fp8, GS_FW_FSDP2) == GS_FP8_CURRENT;
    /* with a pipeline the local batch is all a rank's micro-batches of the step; without one it is
     * a micro-batch, and the global batch sets the accumulation */
    uint64_t local = s->grid.pp > 1 ? s->batch.global_seqs / s->grid.dp : s->batch.micro_seqs;
    gs_status rc = gs_text_printf(
        t,
        "# torchtitan train config written by gridstep for %s: %" PRIu64 " x %" PRIu64
        " GPUs (%s); run with\n#   torchrun --nnodes %" PRIu64 " --nproc_per_node %" PRIu64
        " -m torchtitan.train --job.config_file THIS.toml\n"
        "\n[model]\nname = \"%s\"\nflavor = \"%s\"\n%s"
        "\n[training]\nlocal_batch_size = %" PRIu64 "\nglobal_batch_size = %" PRIu64 "\nseq_len = %" PRIu64
        "\nmixed_precision_param = \"%s\"\nmixed_precision_reduce = \"%s\"\n",
        s->name, s->cluster.nodes, s->cluster.gpus_per_node, s->cluster.name, s->cluster.nodes,
        s->cluster.gpus_per_node, name, flavor, fp8 ? "converters = [\"float8\"]\n" : "", local, s->batch.global_seqs,
        s->model.seq, st->precision == GS_PREC_FP32 ? "float32" : "bfloat16",
        gs_grad_bytes(st) == 2 ? "bfloat16" : "float32");
    put_parallelism(t, s, &rc);
    if (!rc) {
        const char *mode = st->recompute == GS_RECOMPUTE_NONE ? "none"
                           : st->recompute == GS_RECOMPUTE_FULL && st->recompute_every <= 1 ? "full"
                                                                                              : "selective";
        rc = gs_text_printf(t, "\n[activation_checkpoint]\nmode = \"%s\"\n", mode);
        if (!rc && st->recompute == GS_RECOMPUTE_OP)
            rc = gs_text_printf(t, "selective_ac_option = \"op\"\n");
        else if (!rc && st->recompute == GS_RECOMPUTE_FULL && st->recompute_every > 1)
            rc = gs_text_printf(t, "selective_ac_option = \"%" PRIu64 "\"\n", st->recompute_every);
    }
    if (!rc)
        rc = gs_text_printf(t, "\n[compile]\nenable = %s\ncomponents = [\"model\", \"loss\"]\n",
                            st->compile ? "true" : "false");
    if (!rc && fp8)
        rc = gs_text_printf(t, "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n"
                               "enable_fsdp_float8_all_gather = %s\nfilter_fqns = [\"output\"]\n",
                            st->fp8_params ? "true" : "false");
    return rc;
}
