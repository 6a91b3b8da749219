/* The Megatron-LM launch (engine/launch.h): pretrain_gpt.py's flags for the scenario's grid,
 * model, strategy and batch, with the notes on what the flags cannot say, and the torchrun line
 * around them. engine/launch.c decides whether Megatron-LM expresses a scenario
 * (gs_launch_megatron_fits) and calls this for the megatron, torchrun and Slurm launches. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/launch_internal.h"
#include "engine/scenario_write.h"
#include "engine/schedule.h"

/* Megatron-LM's default --make-vocab-size-divisible-by. */
#define LAUNCH_MEGATRON_VOCAB_DIVISOR 128

static void put(launch_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(launch_doc *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gs__launch_vput(d, fmt, ap);
    va_end(ap);
}

/* Megatron-FSDP's --data-parallel-sharding-strategy for the sharding, or NULL when the sharding
 * is not Megatron-FSDP's (DDP, the distributed optimizer). */
static const char *megatron_dp_sharding(gs_sharding s)
{
    switch (s) {
    case GS_SHARD_ZERO2: return "optim_grads";
    case GS_SHARD_FULL_SHARD:
    case GS_SHARD_HYBRID_SHARD:
    case GS_SHARD_ZERO3: return "optim_grads_params";
    default: return NULL;
    }
}

/* HSDP's replicas: the DP group over the DP ranks of one node (gridstep's shard group), i.e.
 * Megatron-FSDP's --num-distributed-optimizer-instances; 1 when not hybrid_shard. */
static uint64_t megatron_hsdp_replicas(const gs_scenario *s, const gs_mesh *m)
{
    if (s->strategy.sharding != GS_SHARD_HYBRID_SHARD)
        return 1;
    uint64_t intra = 0;
    gs_group_of(m, GS_GROUP_DP_INTRA, 0, &intra);
    return intra ? m->size[GS_DIM_DP] / intra : 1;
}

/* The divisor for --make-vocab-size-divisible-by that leaves the vocabulary as the scenario has
 * it: Megatron pads to a multiple of divisor x tp. 0 when no divisor does (vocab % tp != 0). */
static uint64_t megatron_vocab_divisor(uint64_t vocab, uint64_t tp)
{
    if (vocab % (LAUNCH_MEGATRON_VOCAB_DIVISOR * tp) == 0)
        return LAUNCH_MEGATRON_VOCAB_DIVISOR;
    return vocab % tp == 0 ? 1 : 0;
}

/* Megatron notes, each a "# note:" line. */
void gs__launch_megatron_notes(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    const gs_strategy *st = &s->strategy;
    const gs_model *md = &s->model;
    if (st->sharding == GS_SHARD_FULL_SHARD && !gs_strategy_torch_fsdp2(st))
        put(d, "# note: sharding full_shard is written as Megatron-FSDP "
               "--data-parallel-sharding-strategy optim_grads_params (gridstep schedules both "
               "alike; it reads back as zero3)\n");
    if (st->sharding == GS_SHARD_HYBRID_SHARD && megatron_hsdp_replicas(s, m) == 1)
        put(d, "# note: hybrid_shard with the whole DP group on one node is FULL_SHARD: no "
               "--num-distributed-optimizer-instances (it reads back as zero3)\n");
    if (gs_strategy_torch_fsdp2(st) && m->size[GS_DIM_TP] > 1)
        put(d, "# warning: tp=%" PRIu64 " with torch FSDP2: Megatron-LM warns against the pair before "
               "Blackwell GPUs; TP's overlap wants CUDA_DEVICE_MAX_CONNECTIONS=1 and FSDP2's gathers "
               "overlap only without it, so TP communication overlaps less than gridstep schedules it\n",
            m->size[GS_DIM_TP]);
    else if (megatron_dp_sharding(st->sharding) && m->size[GS_DIM_TP] > 1)
        put(d, "# warning: tp=%" PRIu64 " with Megatron-FSDP: Megatron-LM warns against the pair before "
               "Blackwell GPUs; TP's overlap wants CUDA_DEVICE_MAX_CONNECTIONS=1 and Megatron-FSDP "
               "asserts it is not 1, so TP communication overlaps less than gridstep schedules it\n",
            m->size[GS_DIM_TP]);
    if (gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD) {
        const char *impl = gs_strategy_torch_fsdp2(st) ? "Megatron-LM's torch FSDP2" : "Megatron-FSDP";
        if (st->wrap != GS_WRAP_LAYER)
            put(d, "# note: wrap %s: %s shards per transformer layer\n", gs_wrap_name(st->wrap), impl);
        if (st->prefetch != GS_PREFETCH_BACKWARD_PRE || st->forward_prefetch)
            put(d, "# note: prefetch %s%s: %s prefetches the next layer itself (no flag)\n",
                gs_prefetch_name(st->prefetch), st->forward_prefetch ? " + forward_prefetch" : "", impl);
    }
    /* Megatron-Core's DistributedDataParallel (no_shard, zero1 here) has no flag to bucket every
     * stage: bucket_size is None on pipeline ranks > 0 and for model chunks > 0 */
    if (st->bucket_stages == GS_BUCKET_STAGES_ALL && m->size[GS_DIM_PP] > 1 && m->size[GS_DIM_DP] > 1 &&
        (st->sharding == GS_SHARD_NO_SHARD || st->sharding == GS_SHARD_ZERO1))
        put(d, "# note: bucket_stages all (every pipeline stage and model chunk in --ddp-bucket-size buckets) "
               "has no Megatron-LM flag: Megatron-Core buckets only model chunk 0 of pipeline rank 0 and "
               "reduces every other chunk's gradient as one bucket (bucket_stages: first, what this "
               "launch runs)\n");
    if (st->sequence_parallel && m->size[GS_DIM_TP] == 1)
        put(d, "# note: sequence_parallel with tp=1 has nothing to split; --sequence-parallel "
               "left out\n");
    if (md->nominal_params)
        put(d, "# note: the model is nominal (params: %" PRIu64 "); these are its derived shapes, "
               "whose exact parameter count differs\n",
            md->nominal_params);
    if (megatron_vocab_divisor(md->vocab, m->size[GS_DIM_TP]) == 0)
        put(d, "# note: vocab %" PRIu64 " is not a multiple of tp=%" PRIu64 ": Megatron-LM pads it "
               "to %" PRIu64 "\n",
            md->vocab, m->size[GS_DIM_TP],
            (md->vocab + m->size[GS_DIM_TP] - 1) / m->size[GS_DIM_TP] * m->size[GS_DIM_TP]);
    gs__launch_put_code_notes(d, s, 1);
}

/* A list of flag lines: each starts with the indent, all but the last end with " \". */
typedef struct flag_lines {
    launch_doc *d;
    const char *indent;
    int count; /* lines written so far */
} flag_lines;

static void flag(flag_lines *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void flag(flag_lines *f, const char *fmt, ...)
{
    char line[GS_LAUNCH_LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    put(f->d, "%s%s%s", f->count ? " \\\n" : "", f->indent, line);
    f->count++;
}

/* A mixture-of-experts model's flags (megatron/training/arguments.py _add_moe_args): the experts,
 * their routing groups, parallelism and token dispatcher (flex with the DeepEP backend), grouped
 * GEMMs, the exchanges' overlap with another micro-batch. */
static void put_megatron_moe(flag_lines *f, const gs_model *md, const gs_mesh *m, const gs_strategy *st)
{
    gs_moe_dispatcher disp = st->moe_dispatcher;
    const gs_moe *moe = &md->moe;
    uint64_t ef = moe->expert_ffn ? moe->expert_ffn : md->ffn;
    flag(f, "--num-experts %" PRIu64 " --moe-router-topk %" PRIu64, moe->experts, moe->top_k);
    if (ef != md->ffn)
        flag(f, "--moe-ffn-hidden-size %" PRIu64, ef);
    if (moe->shared_experts)
        flag(f, "--moe-shared-expert-intermediate-size %" PRIu64, moe->shared_experts * ef);
    uint64_t every = moe->every ? moe->every : 1;
    if (every > 1) { /* the leading dense blocks, then a MoE block and every - 1 dense ones, repeated */
        uint64_t rest = md->layers - moe->dense_layers, groups = rest / every, tail = rest % every;
        char pat[160] = "";
        size_t at = 0;
        if (moe->dense_layers)
            at += (size_t)snprintf(pat + at, sizeof pat - at, "[0]*%" PRIu64, moe->dense_layers);
        if (groups)
            at += (size_t)snprintf(pat + at, sizeof pat - at, "%s([1]*1+[0]*%" PRIu64 ")*%" PRIu64, at ? "+" : "",
                                   every - 1, groups);
        if (tail)
            at += (size_t)snprintf(pat + at, sizeof pat - at, "%s[1]*1", at ? "+" : "");
        if (tail > 1)
            snprintf(pat + at, sizeof pat - at, "+[0]*%" PRIu64, tail - 1);
        flag(f, "--moe-layer-freq \"%s\"", pat);
    } else if (moe->dense_layers)
        flag(f, "--moe-layer-freq \"([0]*%" PRIu64 "+[1]*%" PRIu64 ")\"", moe->dense_layers,
             md->layers - moe->dense_layers);
    if (moe->capacity_factor > 0.0)
        flag(f, "--moe-expert-capacity-factor %.17g", moe->capacity_factor);
    if (moe->groups)
        flag(f, "--moe-router-num-groups %" PRIu64 " --moe-router-group-topk %" PRIu64, moe->groups, moe->group_topk);
    flag(f, "--expert-model-parallel-size %" PRIu64 " --moe-token-dispatcher-type %s --moe-grouped-gemm",
         m->ep ? m->ep : 1, gs_moe_dispatcher_name(disp));
    if (disp == GS_MOE_FLEX) /* DeepEP's fused dispatch and combine; it takes fp32 routing probabilities */
        flag(f, "--moe-flex-dispatcher-backend deepep --moe-router-dtype fp32");
    if (m->etp)
        flag(f, "--expert-tensor-parallel-size %" PRIu64, m->etp);
    if (disp == GS_MOE_FLEX && st->flex_sms)
        flag(f, "--moe-flex-dispatcher-num-sms %" PRIu64, st->flex_sms);
    if (st->ep_overlap) /* the combined 1F1B schedule (megatron/training/arguments.py) */
        flag(f, "--overlap-moe-expert-parallel-comm");
}

/* The Megatron-LM flags, one per line, each line starting with `indent` and ending " \" except
 * the last, which ends the command. */
/* The grid's flags: TP, PP and its split, CP, the rank order. */
static void put_megatron_grid(flag_lines *fl, const gs_scenario *s, const gs_mesh *m)
{
    flag_lines f = *fl;
    const gs_strategy *st = &s->strategy;
    const gs_model *md = &s->model;
    uint64_t tp = m->size[GS_DIM_TP], pp = m->size[GS_DIM_PP];
    flag(&f, "--tensor-model-parallel-size %" PRIu64, tp);
    flag(&f, "--pipeline-model-parallel-size %" PRIu64, pp);
    if (m->cp > 1)
        flag(&f, "--context-parallel-size %" PRIu64 " --cp-comm-type %s", m->cp, gs_cp_comm_name(st->cp_comm));
    if (m->cp > 1 && st->cp_comm == GS_CP_A2A_P2P)
        flag(&f, "--hierarchical-context-parallel-sizes %" PRIu64 " %" PRIu64, gs_mesh_cp_a2a(m),
             m->cp / gs_mesh_cp_a2a(m));
    if (gs__launch_order_is(m, GS_DIM_TP, GS_DIM_PP, GS_DIM_DP))
        flag(&f, "--use-tp-pp-dp-mapping");
    int uneven = pp > 1 && (m->first_layers || m->last_layers);
    if (uneven && m->first_layers)
        flag(&f, "--decoder-first-pipeline-num-layers %" PRIu64, m->first_layers);
    if (uneven && m->last_layers)
        flag(&f, "--decoder-last-pipeline-num-layers %" PRIu64, m->last_layers);
    if (m->account_embedding)
        flag(&f, "--account-for-embedding-in-pipeline-split");
    if (m->account_loss)
        flag(&f, "--account-for-loss-in-pipeline-split");
    uneven = uneven || m->account_embedding || m->account_loss;
    if (m->layout.n) { /* the layout names every chunk; the virtual stages follow from its length */
        char lay[1024];
        gs_layout_format(&m->layout, lay, sizeof lay);
        flag(&f, "--pipeline-model-parallel-layout '%s'", lay);
    } else if (pp > 1 && st->pipeline == GS_PIPE_INTERLEAVED && uneven) /* the stages' chunks differ in size */
        flag(&f, "--num-virtual-stages-per-pipeline-rank %" PRIu64, st->virtual_stages);
    else if (pp > 1 && st->pipeline == GS_PIPE_INTERLEAVED)
        flag(&f, "--num-layers-per-virtual-pipeline-stage %" PRIu64,
            md->layers / (pp * st->virtual_stages));
    *fl = f;
}

/* The model's flags (with sequence parallelism, MoE and MLA). */
static void put_megatron_model(flag_lines *fl, const gs_scenario *s, const gs_mesh *m)
{
    flag_lines f = *fl;
    const gs_strategy *st = &s->strategy;
    const gs_model *md = &s->model;
    uint64_t tp = m->size[GS_DIM_TP];
    if (st->sequence_parallel && tp > 1)
        flag(&f, "--sequence-parallel");
    if (md->moe.experts)
        put_megatron_moe(&f, md, m, &s->strategy);
    if (md->mla.kv_lora_rank) { /* Megatron-LM's MLA sizes (MLATransformerConfig; no --q-lora-rank: None) */
        flag(&f, "--multi-latent-attention --kv-lora-rank %" PRIu64 " --qk-head-dim %" PRIu64
             " --qk-pos-emb-head-dim %" PRIu64 " --v-head-dim %" PRIu64,
             md->mla.kv_lora_rank, md->head_dim, md->mla.rope_head_dim, md->head_dim);
        if (md->mla.q_lora_rank)
            flag(&f, "--q-lora-rank %" PRIu64, md->mla.q_lora_rank);
    }
    flag(&f, "--num-layers %" PRIu64, md->layers);
    if (md->mtp_layers)
        flag(&f, "--mtp-num-layers %" PRIu64, md->mtp_layers);
    flag(&f, "--hidden-size %" PRIu64, md->hidden);
    flag(&f, "--num-attention-heads %" PRIu64, md->heads);
    if (md->kv_heads != md->heads)
        flag(&f, "--group-query-attention --num-query-groups %" PRIu64, md->kv_heads);
    if (md->head_dim * md->heads != md->hidden)
        flag(&f, "--kv-channels %" PRIu64, md->head_dim);
    flag(&f, "--ffn-hidden-size %" PRIu64, md->ffn);
    flag(&f, "--seq-length %" PRIu64 " --max-position-embeddings %" PRIu64, md->seq,
        md->seq);
    uint64_t div = megatron_vocab_divisor(md->vocab, tp);
    flag(&f, "--vocab-size %" PRIu64 " --make-vocab-size-divisible-by %" PRIu64,
        md->vocab, div ? div : 1);
    if (md->mlp == GS_MLP_SWIGLU)
        flag(&f, "--swiglu");
    flag(&f, "--normalization %s", md->norm == GS_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    flag(&f, "--position-embedding-type %s",
        md->pos == GS_POS_ROPE ? "rope" : "learned_absolute");
    if (!md->tied_embeddings)
        flag(&f, "--untie-embeddings-and-output-weights");
    if (!md->bias)
        flag(&f, "--disable-bias-linear");
    if (!md->dropout)
        flag(&f, "--attention-dropout 0 --hidden-dropout 0");
    flag(&f, "--attention-backend %s", st->flash_attention ? "flash" : "unfused");
    if (st->cross_entropy == GS_XENT_FUSED)
        flag(&f, "--cross-entropy-loss-fusion");
    if (st->cuda_graphs)
        flag(&f, "--cuda-graph-impl local");
    *fl = f;
}

void gs__launch_megatron_flags(launch_doc *d, const gs_scenario *s, const gs_mesh *m,
                               const char *indent)
{
    flag_lines f = {d, indent, 0};
    const gs_strategy *st = &s->strategy;
    uint64_t tp = m->size[GS_DIM_TP];
    put_megatron_grid(&f, s, m);
    put_megatron_model(&f, s, m);
    flag(&f, "--micro-batch-size %" PRIu64, s->batch.micro_seqs);
    flag(&f, "--global-batch-size %" PRIu64, s->batch.global_seqs);
    if (st->recompute == GS_RECOMPUTE_FULL)
        flag(&f, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    else if (st->recompute == GS_RECOMPUTE_SELECTIVE && st->recompute_modules == GS_RC_DEFAULT)
        flag(&f, "--recompute-granularity selective");
    else if (st->recompute == GS_RECOMPUTE_SELECTIVE && st->recompute_modules) { /* none: nothing to flag */
        char mods[160];
        gs_recompute_modules_format(st->recompute_modules, " ", mods, sizeof mods);
        flag(&f, "--recompute-granularity selective --recompute-modules %s", mods);
    }
    int torch_fsdp2 = gs_strategy_torch_fsdp2(st);
    const char *dps = torch_fsdp2 ? NULL : megatron_dp_sharding(st->sharding);
    if (torch_fsdp2) /* Megatron-LM asserts no distributed optimizer, no accumulation fusion */
        flag(&f, "--use-torch-fsdp2%s --no-gradient-accumulation-fusion",
             st->sharding == GS_SHARD_GRAD_OP ? " --torch-fsdp2-no-reshard-after-forward" : "");
    if (dps) /* Megatron-FSDP asserts --ckpt-format fsdp_dtensor */
        flag(&f, "--use-megatron-fsdp --data-parallel-sharding-strategy %s --ckpt-format fsdp_dtensor "
                 "--no-gradient-accumulation-fusion",
             dps);
    uint64_t replicas = megatron_hsdp_replicas(s, m);
    if (replicas > 1) /* HSDP: Megatron-FSDP inside a node's DP ranks, replicas across nodes */
        flag(&f, "--num-distributed-optimizer-instances %" PRIu64 " --outer-dp-sharding-strategy no_shard", replicas);
    if (st->sharding != GS_SHARD_NO_SHARD && !torch_fsdp2)
        flag(&f, "--use-distributed-optimizer");
    if (st->precision_aware)
        flag(&f, "--use-precision-aware-optimizer%s", st->adam_bf16 ? " --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
                                                                     : "");
    /* DDP / distributed-optimizer buckets (in parameters), reduced under the backward as gridstep's
     * schedule does */
    uint64_t gb = gs_grad_bytes(st);
    if (!dps && st->overlap_grad_reduce)
        flag(&f, "--overlap-grad-reduce%s", st->overlap_param_gather ? " --overlap-param-gather" : "");
    flag(&f, "--ddp-bucket-size %" PRIu64, st->bucket_bytes / gb);
    /* gradient precision, against Megatron-LM's defaults (fp32 under bf16, the training precision
     * otherwise) */
    if (st->precision == GS_PREC_BF16 && gb == 2)
        flag(&f, "--grad-reduce-in-bf16");
    else if (st->precision == GS_PREC_FP16 && gb == 4)
        flag(&f, "--accumulate-allreduce-grads-in-fp32");
    if (st->tp_comm_overlap && st->sequence_parallel && tp > 1)
        flag(&f, "--tp-comm-overlap");
    if (st->precision != GS_PREC_FP32) /* fp32 is Megatron-LM's default: no flag */
        flag(&f, "%s", st->precision == GS_PREC_BF16 ? "--bf16" : "--fp16");
    if (st->fp8 != GS_FP8_OFF) /* resolved at load: delayed or current */
        flag(&f, "--fp8-format hybrid --fp8-recipe %s%s",
             st->fp8 == GS_FP8_CURRENT ? "tensorwise" : st->fp8 == GS_FP8_MX ? "mxfp8" : "delayed",
             st->fp8_params ? " --fp8-param-gather" : "");
    if (st->fp8 == GS_FP8_DELAYED && st->fp8_amax_history > 1)
        flag(&f, "--fp8-amax-history-len %" PRIu64, st->fp8_amax_history);
    if (st->fp8 == GS_FP8_DELAYED && st->fp8_amax_algo != GS_FP8_AMAX_MOST_RECENT)
        flag(&f, "--fp8-amax-compute-algo %s", gs_fp8_amax_algo_name(st->fp8_amax_algo));
    if (st->fp8 == GS_FP8_DELAYED && st->fp8_margin)
        flag(&f, "--fp8-margin %" PRIu64, st->fp8_margin);
    put(d, "\n");
}

/* CUDA_DEVICE_MAX_CONNECTIONS as Megatron-LM's validate_args wants it: 1 with TP (it asserts
 * so for tensor or context parallelism before Blackwell, unless FSDP); Megatron-FSDP asserts it
 * is not 1, so a launch with it unsets what a container may have exported; torch FSDP2 runs
 * without the assert, and overlaps its gathers only when it is not 1. */
void gs__launch_megatron_env(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    if (gs_strategy_torch_fsdp2(&s->strategy))
        put(d, "unset CUDA_DEVICE_MAX_CONNECTIONS  # torch FSDP2 overlaps its gathers only when it is not 1\n");
    else if (megatron_dp_sharding(s->strategy.sharding))
        put(d, "unset CUDA_DEVICE_MAX_CONNECTIONS  # Megatron-FSDP asserts it is not 1\n");
    else if (m->size[GS_DIM_TP] > 1)
        put(d, "export CUDA_DEVICE_MAX_CONNECTIONS=1  # Megatron-LM asserts it with tensor parallelism\n");
}

void gs__launch_megatron(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    uint64_t nodes = gs_mesh_nodes(m);
    put(d, "# Megatron-LM launch for %s: ", s->name);
    gs__launch_put_subject(d, s, m);
    put(d, "\n");
    if (nodes > 1)
        put(d, "# run on every node with MASTER_ADDR = the first node's address (placeholder)\n");
    put(d, "# placeholders: add your data and tokenizer flags (--data-path, --tokenizer-type, "
           "...) and the optimizer's (--lr, --train-iters, ...)\n");
    gs__launch_megatron_notes(d, s, m);
    gs__launch_megatron_env(d, s, m);
    gs__launch_put_torchrun(d, m, "gridstep", "$MASTER_ADDR:29500");
    put(d, " pretrain_gpt.py \\\n");
    gs__launch_megatron_flags(d, s, m, "    ");
}
