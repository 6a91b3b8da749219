/* Launch configurations (torchrun, accelerate FSDP YAML, Slurm sbatch; Megatron-LM's flags are
 * engine/launch_megatron.c's, the torchtitan config engine/launch_torchtitan.c's) drawn from a
 * scenario and its mesh, with the mismatches each launcher has named rather than hidden. */
#include "engine/launch.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/framework.h"
#include "engine/launch_internal.h"
#include "engine/scenario_write.h"
#include "engine/schedule.h"

/* Rendezvous port written into the launch lines (torchrun's default, 29500). */
#define LAUNCH_MASTER_PORT 29500
/* DDP's default gradient bucket, bytes (PyTorch bucket_cap_mb = 25). */
#define LAUNCH_DEFAULT_BUCKET_BYTES ((uint64_t)25 << 20)

static const char *const kind_names[GS_LAUNCH_KIND_COUNT] = {"torchrun", "accelerate", "megatron",
                                                             "slurm", "torchtitan"};

const char *gs_launch_kind_name(gs_launch_kind k)
{
    return (unsigned)k < GS_LAUNCH_KIND_COUNT ? kind_names[k] : "?";
}

int gs_launch_kind_parse(const char *s, gs_launch_kind *out)
{
    for (int i = 0; i < GS_LAUNCH_KIND_COUNT; i++)
        if (strcasecmp(s, kind_names[i]) == 0) {
            *out = (gs_launch_kind)i;
            return 0;
        }
    return -1;
}

/* ------------------------------------------------------------------- grid strings ---- */

int gs__launch_order_is(const gs_mesh *m, gs_dim a, gs_dim b, gs_dim c)
{
    return m->order[0] == a && m->order[1] == b && m->order[2] == c;
}

static uint64_t nproc_per_node(const gs_mesh *m)
{
    return m->world < m->gpus_per_node ? m->world : m->gpus_per_node;
}

/* The torch DeviceMesh of a mesh with CP: init_device_mesh lays ranks out row-major (last
 * dimension fastest), slowest first, and the DP dimension splits into its replicas and the cp
 * ranks (cp inside them, or outside with tp-dp-cp-pp). */
static void device_mesh_cp(const gs_mesh *m, gs_launch_grid *l)
{
    char dims[3][40];
    uint64_t sz[3][2];
    for (int i = 0; i < 3; i++) {
        gs_dim d = m->order[2 - i];
        uint64_t reps = gs_mesh_dp_replicas(m);
        if (d != GS_DIM_DP) {
            snprintf(dims[i], sizeof dims[i], "\"%s\"", gs_dim_name(d));
            sz[i][0] = m->size[d], sz[i][1] = 0;
        } else if (m->cp_outer) {
            snprintf(dims[i], sizeof dims[i], "\"cp\", \"dp\"");
            sz[i][0] = m->cp, sz[i][1] = reps;
        } else {
            snprintf(dims[i], sizeof dims[i], "\"dp\", \"cp\"");
            sz[i][0] = reps, sz[i][1] = m->cp;
        }
    }
    char shape[96];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, i ? ", " : "", sz[i][0]);
        if (sz[i][1])
            n += snprintf(shape + n, sizeof shape - (size_t)n, ", %" PRIu64, sz[i][1]);
    }
    snprintf(l->device_mesh, sizeof l->device_mesh, "init_device_mesh(\"cuda\", (%s), mesh_dim_names=(%s, %s, %s))",
             shape, dims[0], dims[1], dims[2]);
}

void gs_launch_grid_build(const gs_mesh *m, gs_launch_grid *l)
{
    int is_default = gs__launch_order_is(m, GS_DIM_TP, GS_DIM_DP, GS_DIM_PP);
    int is_tp_pp_dp = gs__launch_order_is(m, GS_DIM_TP, GS_DIM_PP, GS_DIM_DP);

    gs_mesh_order_format_cp(m->order, m->cp > 1, m->cp_outer, l->order, sizeof l->order);
    char cp[192] = "", ep[128] = "";
    if (m->cp > 1 && m->cp_a2a > 1) /* the groups serve a2a+p2p only: the type goes with them */
        snprintf(cp, sizeof cp, " --context-parallel-size %" PRIu64 " --cp-comm-type a2a+p2p "
                 "--hierarchical-context-parallel-sizes %" PRIu64 " %" PRIu64, m->cp, m->cp_a2a, m->cp / m->cp_a2a);
    else if (m->cp > 1)
        snprintf(cp, sizeof cp, " --context-parallel-size %" PRIu64, m->cp);
    if (m->ep > 1 && m->etp)
        snprintf(ep, sizeof ep, " --expert-model-parallel-size %" PRIu64 " --expert-tensor-parallel-size %" PRIu64,
                 m->ep, m->etp);
    else if (m->ep > 1)
        snprintf(ep, sizeof ep, " --expert-model-parallel-size %" PRIu64, m->ep);
    snprintf(l->megatron, sizeof l->megatron,
             "--tensor-model-parallel-size %" PRIu64 " --pipeline-model-parallel-size %" PRIu64 "%s%s%s",
             m->size[GS_DIM_TP], m->size[GS_DIM_PP], cp, ep, is_tp_pp_dp ? " --use-tp-pp-dp-mapping" : "");
    l->megatron_note[0] = '\0';
    if (is_tp_pp_dp)
        snprintf(l->megatron_note, sizeof l->megatron_note,
                 "order tp-pp-dp differs from Megatron-LM's default tp-dp-pp; "
                 "--use-tp-pp-dp-mapping selects it");
    else if (is_default && m->cp > 1 && m->cp_outer)
        snprintf(l->megatron_note, sizeof l->megatron_note,
                 "Megatron-LM cannot express order %s: it places the context-parallel ranks inside the "
                 "data-parallel ones (tp-cp-dp-pp); with these flags its CP groups differ from this table",
                 l->order);
    else if (!is_default)
        snprintf(l->megatron_note, sizeof l->megatron_note,
                 "Megatron-LM cannot express order %s: it orders ranks tp-dp-pp, or tp-pp-dp with "
                 "--use-tp-pp-dp-mapping; with these flags its groups differ from this table",
                 l->order);
    /* init_device_mesh lays ranks out row-major (last dimension fastest): slowest first. */
    if (m->cp > 1)
        device_mesh_cp(m, l);
    else
        snprintf(l->device_mesh, sizeof l->device_mesh,
                 "init_device_mesh(\"cuda\", (%" PRIu64 ", %" PRIu64 ", %" PRIu64
                 "), mesh_dim_names=(\"%s\", \"%s\", \"%s\"))",
                 m->size[m->order[2]], m->size[m->order[1]], m->size[m->order[0]], gs_dim_name(m->order[2]),
                 gs_dim_name(m->order[1]), gs_dim_name(m->order[0]));
    snprintf(l->torchrun, sizeof l->torchrun,
             "torchrun --nnodes %" PRIu64 " --nproc_per_node %" PRIu64
             " --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port %d train.py",
             gs_mesh_nodes(m), nproc_per_node(m), LAUNCH_MASTER_PORT);
}

/* ---------------------------------------------------------------- what fits where ---- */

const char *gs_launch_layer_class(const gs_model *m)
{
    if (strncasecmp(m->name, "llama", 5) == 0 ||
        (m->mlp == GS_MLP_SWIGLU && m->norm == GS_NORM_RMSNORM && m->pos == GS_POS_ROPE))
        return "LlamaDecoderLayer";
    if (strncasecmp(m->name, "gpt", 3) == 0 ||
        (m->mlp == GS_MLP_GELU && m->norm == GS_NORM_LAYERNORM && m->pos == GS_POS_LEARNED))
        return "GPT2Block";
    return NULL;
}

/* Returns 0 after writing the reason (printf format) into why. */
static int no_fit(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int no_fit(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && len)
        vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return 0;
}

/* TP in accelerate: FSDP2 with parallelism_config (accelerate >= 1.10), whose mesh puts tp
 * fastest; FSDP2 has no NO_SHARD (a replicated-only dp is DDP, which has no TP plan there), no
 * prefetch keys, and no sequence parallelism or TP overlap for the TP plan. */
static int accelerate_tp_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len)
{
    const gs_strategy *st = &s->strategy;
    uint64_t tp = m->size[GS_DIM_TP];
    if (m->order[0] != GS_DIM_TP)
        return no_fit(why, len, "grid tp=%" PRIu64 " not fastest in grid.order: accelerate's parallelism_config mesh "
                                "puts tp fastest (use --emit megatron)", tp);
    if (st->sharding == GS_SHARD_NO_SHARD)
        return no_fit(why, len, "grid tp=%" PRIu64 " with sharding no_shard: accelerate's TP runs under FSDP2, which "
                                "has no NO_SHARD (use --emit megatron)", tp);
    if (st->sequence_parallel || st->tp_comm_overlap)
        return no_fit(why, len, "grid tp=%" PRIu64 " with %s: accelerate's parallelism_config has no key for it (use "
                                "--emit megatron)", tp, st->sequence_parallel ? "sequence_parallel" : "tp_comm_overlap");
    if (st->prefetch != GS_PREFETCH_BACKWARD_PRE || st->forward_prefetch)
        return no_fit(why, len, "grid tp=%" PRIu64 " with prefetch %s%s: accelerate's TP needs FSDP2, which has no "
                                "fsdp_backward_prefetch or fsdp_forward_prefetch (it prefetches the next layer "
                                "itself: backward_pre)", tp, gs_prefetch_name(st->prefetch),
                      st->forward_prefetch ? " + forward_prefetch" : "");
    return 1;
}

int gs_launch_accelerate_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len)
{
    const gs_strategy *st = &s->strategy;
    if (m->size[GS_DIM_TP] > 1 && !accelerate_tp_fits(s, m, why, len))
        return 0;
    if (st->fp8 == GS_FP8_MX)
        return no_fit(why, len, "strategy.fp8_recipe mxfp8: accelerate's fp8_config names a backend (TE, AO), not "
                                "Transformer Engine's MXFP8 recipe (use --emit megatron)");
    if (m->size[GS_DIM_PP] > 1)
        return no_fit(why, len,
                      "grid pp=%" PRIu64 ": accelerate's FSDP config has no pipeline parallelism "
                      "(use --emit megatron)",
                      m->size[GS_DIM_PP]);
    if (st->sharding == GS_SHARD_ZERO1)
        return no_fit(why, len,
                      "strategy.sharding zero1: FSDP cannot shard the optimizer state alone; that "
                      "is DeepSpeed ZeRO stage 1 or Megatron-LM's --use-distributed-optimizer "
                      "(use --emit megatron)");
    if (st->sharding == GS_SHARD_ZERO2)
        return no_fit(why, len,
                      "strategy.sharding zero2: DeepSpeed ZeRO stage 2 (gradients reduced into "
                      "shards, no flat-parameter units) has no FSDP strategy; FSDP's nearest, "
                      "shard_grad_op, schedules differently (use --emit megatron, or sharding: "
                      "shard_grad_op)");
    if (st->recompute == GS_RECOMPUTE_SELECTIVE || st->recompute == GS_RECOMPUTE_OP)
        return no_fit(why, len,
                      "strategy.recompute %s: fsdp_activation_checkpointing recomputes "
                      "whole decoder layers (recompute: full); selective recompute of the "
                      "attention core is Megatron-LM's --recompute-granularity selective, per-op "
                      "checkpointing torchtitan's selective_ac_option op",
                      gs_recompute_name(st->recompute));
    if (st->reshard_after_forward != gs_sharding_shards_params(st->sharding))
        return no_fit(why, len,
                      "strategy.reshard_after_forward %s with sharding %s: accelerate's FSDP "
                      "config ties resharding to the sharding (fsdp_reshard_after_forward: FULL_SHARD "
                      "reshards, SHARD_GRAD_OP keeps parameters through backward)",
                      st->reshard_after_forward ? "true" : "false",
                      gs_sharding_name(st->sharding));
    return 1;
}

int gs_launch_megatron_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len)
{
    const gs_strategy *st = &s->strategy;
    if (!gs__launch_order_is(m, GS_DIM_TP, GS_DIM_DP, GS_DIM_PP) && !gs__launch_order_is(m, GS_DIM_TP, GS_DIM_PP, GS_DIM_DP)) {
        char order[16];
        gs_mesh_order_format(m->order, order, sizeof order);
        return no_fit(why, len,
                      "grid.order %s: Megatron-LM orders ranks tp-dp-pp, or tp-pp-dp with "
                      "--use-tp-pp-dp-mapping",
                      order);
    }
    if (m->cp > 1 && m->cp_outer)
        return no_fit(why, len,
                      "grid.order with cp after dp: Megatron-LM orders ranks tp-cp-ep-dp-pp, context "
                      "parallelism inside data parallelism (write tp-cp-dp-pp)");
    if (st->sharding == GS_SHARD_GRAD_OP && !gs_strategy_torch_fsdp2(st))
        return no_fit(why, len,
                      "strategy.sharding shard_grad_op: Megatron-FSDP has no unit that keeps "
                      "parameters through backward; its nearest, optim_grads, is zero2, which "
                      "schedules differently (use torch_fsdp2: true for --use-torch-fsdp2 "
                      "--torch-fsdp2-no-reshard-after-forward, --emit accelerate: SHARD_GRAD_OP, "
                      "or sharding: zero2)");
    if (st->offload)
        return no_fit(why, len,
                      "strategy.offload true: Megatron-LM has no flag that keeps parameters and "
                      "optimizer state on the CPU (--optimizer-cpu-offload moves the optimizer "
                      "only)");
    if (st->recompute == GS_RECOMPUTE_OP)
        return no_fit(why, len,
                      "strategy.recompute op: Megatron-LM has no per-op checkpointing policy (its "
                      "selective recompute checkpoints modules: recompute: selective with "
                      "recompute_modules)");
    if (m->size[GS_DIM_PP] > 1 && st->pipeline == GS_PIPE_GPIPE)
        return no_fit(why, len,
                      "strategy.pipeline gpipe: Megatron-LM schedules pipelines as 1F1B or "
                      "interleaved 1F1B only");
    return 1;
}

/* ------------------------------------------------------------------- documents ---- */

void gs__launch_vput(launch_doc *d, const char *fmt, va_list ap)
{
    if (d->st != GS_OK)
        return;
    va_list again;
    va_copy(again, ap);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0 || (size_t)n < sizeof small) {
        va_end(again);
        d->st = n < 0 ? GS_ERR_NOMEM : gs_text_printf(d->t, "%s", small);
        return;
    }
    /* long line: format again into a buffer of the right size */
    char *big = malloc((size_t)n + 1);
    if (!big) {
        va_end(again);
        d->st = GS_ERR_NOMEM;
        return;
    }
    vsnprintf(big, (size_t)n + 1, fmt, again);
    va_end(again);
    d->st = gs_text_printf(d->t, "%s", big);
    free(big);
}

static void put(launch_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(launch_doc *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gs__launch_vput(d, fmt, ap);
    va_end(ap);
}

void gs__launch_put_subject(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    char grid[160];
    gs_mesh_grid_text(m, grid, sizeof grid); /* dp counts the replicas, with cp (and ep) beside */
    put(d, "%s on %" PRIu64 " x %s (%" PRIu64 " GPUs), grid %s, %s", s->model.name, gs_mesh_nodes(m),
        s->cluster.name, m->world, grid, gs_sharding_name(s->strategy.sharding));
}

static void put_batch_comment(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    put(d,
        "# batch (the training script's, not a launcher setting): micro-batch %" PRIu64
        " sequence%s per GPU x %" PRIu64 " accumulation step%s x dp %" PRIu64 " = global %" PRIu64
        " sequences of %" PRIu64 " tokens\n",
        s->batch.micro_seqs, s->batch.micro_seqs == 1 ? "" : "s", gs_scenario_microbatches(s),
        gs_scenario_microbatches(s) == 1 ? "" : "s", gs_mesh_dp_replicas(m), s->batch.global_seqs,
        s->model.seq);
}

void gs__launch_put_code_notes(launch_doc *d, const gs_scenario *s, int megatron)
{
    const gs_strategy *st = &s->strategy;
    if (!st->flash_attention)
        put(d, "# note: flash_attention false is the model code's attention implementation "
               "(attn_implementation=\"eager\"), not a launcher setting\n");
    if (st->grad_sync != GS_GRAD_SYNC_AUTO)
        put(d, "# note: grad_sync %s is the training loop's choice (no_sync() around the "
               "accumulation steps), not a launcher setting\n",
            st->grad_sync == GS_GRAD_SYNC_LAST ? "last" : "every");
    if (!megatron && st->bucket_bytes != LAUNCH_DEFAULT_BUCKET_BYTES && !gs_sharding_is_fsdp(st->sharding))
        put(d, "# note: bucket_mb %" PRIu64 " is DDP(bucket_cap_mb=%" PRIu64 ") in the training "
               "code, not a launcher setting\n",
            st->bucket_bytes >> 20, st->bucket_bytes >> 20);
    uint64_t gb = gs_grad_bytes(st), wb = gs_precision_bytes(st->precision);
    if (!megatron && st->grad_dtype >= 0 && gb != wb && gs_sharding_is_fsdp(st->sharding))
        put(d, "# note: grad_dtype %s is the reduction's dtype, FSDP's MixedPrecision(reduce_dtype=torch.%s), "
               "set in the training code, not a launcher setting\n",
            gs_precision_name((gs_precision)st->grad_dtype),
            st->grad_dtype == GS_PREC_FP32 ? "float32" : st->grad_dtype == GS_PREC_FP16 ? "float16" : "bfloat16");
    if (megatron && st->precision == GS_PREC_FP32 && gb != 4)
        put(d, "# note: grad_dtype %s has no Megatron-LM flag with fp32 training (gradients stay fp32)\n",
            gs_precision_name((gs_precision)st->grad_dtype));
    if (!megatron && !st->overlap_grad_reduce) /* read back, the config would be another scenario */
        put(d, "# note: overlap_grad_reduce false (gradients reduced after the backward, not under it) has no "
               "accelerate config key: the training code's choice; read back, this config overlaps\n");
}

static const char *fsdp_strategy_name(gs_sharding s)
{
    switch (s) {
    case GS_SHARD_NO_SHARD: return "NO_SHARD";
    case GS_SHARD_GRAD_OP: return "SHARD_GRAD_OP";
    case GS_SHARD_HYBRID_SHARD: return "HYBRID_SHARD";
    default: return "FULL_SHARD";
    }
}

/* The DP ranks of one node: HSDP's shard group (gs_group_of's DP_INTRA). */
static uint64_t dp_ranks_per_node(const gs_mesh *m)
{
    uint64_t intra = 0;
    gs_group_of(m, GS_GROUP_DP_INTRA, 0, &intra);
    return intra ? intra : 1;
}

/* accelerate's FSDP version for the scenario: 2 (FSDP2 with parallelism_config, accelerate >=
 * 1.10) when there is TP to express or the scenario runs FSDP2 (framework fsdp2, a sharded
 * strategy), else 1. */
static int accelerate_fsdp_version(gs_framework fw, const gs_strategy *st, const gs_mesh *m)
{
    return m->size[GS_DIM_TP] > 1 || (fw == GS_FW_FSDP2 && st->sharding != GS_SHARD_NO_SHARD) ? 2 : 1;
}

/* The fsdp_config block, keys sorted as `accelerate config` writes them (its
 * commands/config/cluster.py; accelerate >= 1.6 writes fsdp_reshard_after_forward, holding the
 * FSDP1 sharding strategy's name or FSDP2's bool, and no longer the deprecated
 * fsdp_sharding_strategy; FSDP2 has no backward/forward prefetch, sync_module_states or
 * use_orig_params keys). */
static void put_fsdp_config(launch_doc *d, const gs_scenario *s, int version)
{
    const gs_strategy *st = &s->strategy;
    const char *cls = gs_launch_layer_class(&s->model);
    static const char *const wraps[] = {"TRANSFORMER_BASED_WRAP", "NO_WRAP", "SIZE_BASED_WRAP"};
    put(d, "fsdp_config:\n");
    put(d, "  fsdp_activation_checkpointing: %s\n", st->recompute == GS_RECOMPUTE_FULL ? "true" : "false");
    put(d, "  fsdp_auto_wrap_policy: %s\n",
        wraps[st->wrap == GS_WRAP_LAYER ? 0 : st->wrap == GS_WRAP_MODEL ? 1 : 2]);
    if (version == 1)
        put(d, "  fsdp_backward_prefetch: %s\n",
            st->prefetch == GS_PREFETCH_BACKWARD_PRE    ? "BACKWARD_PRE"
            : st->prefetch == GS_PREFETCH_BACKWARD_POST ? "BACKWARD_POST"
                                                        : "NO_PREFETCH");
    put(d, "  fsdp_cpu_ram_efficient_loading: true\n");
    if (version == 1)
        put(d, "  fsdp_forward_prefetch: %s\n", st->forward_prefetch ? "true" : "false");
    if (st->wrap == GS_WRAP_MIN_PARAMS)
        put(d, "  fsdp_min_num_params: %" PRIu64 "\n", st->wrap_min_params);
    put(d, "  fsdp_offload_params: %s\n", st->offload ? "true" : "false");
    if (version == 1)
        put(d, "  fsdp_reshard_after_forward: %s\n", fsdp_strategy_name(st->sharding));
    else
        put(d, "  fsdp_reshard_after_forward: %s\n", st->reshard_after_forward ? "true" : "false");
    put(d, "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
    if (version == 1)
        put(d, "  fsdp_sync_module_states: true\n");
    if (st->wrap == GS_WRAP_LAYER) {
        if (cls)
            put(d, "  fsdp_transformer_layer_cls_to_wrap: %s\n", cls);
        else
            put(d, "  fsdp_transformer_layer_cls_to_wrap: DecoderLayer  # placeholder: your "
                   "model's decoder-layer class\n");
    }
    if (version == 1)
        put(d, "  fsdp_use_orig_params: true\n");
    put(d, "  fsdp_version: %d\n", version);
}

/* accelerate's ParallelismConfig (accelerate >= 1.10, FSDP2 only; the keys `accelerate config`
 * writes): its device mesh is (dp_replicate, dp_shard, cp, sp, tp), tp fastest, so the shard
 * group is dp_shard consecutive DP ranks: HSDP shards over a node's DP ranks. */
static void put_parallelism_config(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    uint64_t dp = m->size[GS_DIM_DP];
    uint64_t shard = s->strategy.sharding == GS_SHARD_HYBRID_SHARD ? dp_ranks_per_node(m) : dp;
    put(d, "parallelism_config:\n");
    put(d, "  parallelism_config_cp_size: 1\n");
    put(d, "  parallelism_config_dp_replicate_size: %" PRIu64 "\n", dp / shard);
    put(d, "  parallelism_config_dp_shard_size: %" PRIu64 "\n", shard);
    put(d, "  parallelism_config_tp_size: %" PRIu64 "\n", m->size[GS_DIM_TP]);
}

/* gridstep's own lines: the model and batch the YAML cannot hold, read back on import. */
static void put_gridstep_lines(launch_doc *d, const gs_scenario *s)
{
    gs_text model;
    gs_text_init(&model);
    if (gs_model_write_flow(&s->model, &model) != GS_OK) {
        d->st = GS_ERR_NOMEM;
    } else {
        put(d, "# gridstep model: %s\n", gs_text_str(&model));
        put(d, "# gridstep batch: {global: %" PRIu64 ", micro: %" PRIu64 "}\n", s->batch.global_seqs,
            s->batch.micro_seqs);
    }
    gs_text_fini(&model);
}

static void emit_accelerate(launch_doc *d, const gs_scenario *s, const gs_mesh *m)
{
    const gs_strategy *st = &s->strategy;
    uint64_t nodes = gs_mesh_nodes(m);
    gs_framework fw = gs_framework_resolve(st->framework, (int)st->sharding);
    int version = accelerate_fsdp_version(fw, st, m);
    put(d, "# accelerate FSDP config for %s: ", s->name);
    gs__launch_put_subject(d, s, m);
    put(d, "\n# launch on every node: accelerate launch --config_file accelerate_fsdp.yaml "
           "--machine_rank $NODE_RANK train.py\n");
    put(d, "# for accelerate >= %s (fsdp_reshard_after_forward%s)\n", version == 2 ? "1.10" : "1.6",
        version == 2 ? ", FSDP2, parallelism_config" : "; older versions call it fsdp_sharding_strategy");
    put_batch_comment(d, s, m);
    put_gridstep_lines(d, s);
    if (st->sharding == GS_SHARD_ZERO3)
        put(d, "# note: sharding zero3 is written as FSDP %s (the same shard plan and "
               "schedule in gridstep)\n", version == 2 ? "fsdp_reshard_after_forward true" : "FULL_SHARD");
    if (version == 2 && fw != GS_FW_FSDP2)
        put(d, "# note: accelerate runs tp under FSDP2 (fully_shard), not the scenario's %s: gridstep sim "
               "with strategy.framework fsdp2 times this run (FSDP2 copies each gathered unit and "
               "gradient on the compute stream)\n",
            gs_framework_name(fw));
    if (version == 2 && m->size[GS_DIM_TP] > 1)
        put(d, "# note: tp=%" PRIu64 " through parallelism_config needs a model with a tensor-parallel "
               "plan (transformers' tp_plan): attention and MLP GEMMs split as Megatron-LM splits them\n",
            m->size[GS_DIM_TP]);
    if (!st->limit_all_gathers)
        put(d, "# note: limit_all_gathers false has no accelerate config key (FSDP's default is "
               "limit_all_gathers=True): set it where the training code wraps the model\n");
    gs__launch_put_code_notes(d, s, 0);
    put(d, "compute_environment: LOCAL_MACHINE\n");
    put(d, "debug: false\n");
    put(d, "distributed_type: FSDP\n");
    put(d, "downcast_bf16: 'no'\n");
    put(d, "enable_cpu_affinity: false\n");
    put_fsdp_config(d, s, version);
    if (nodes == 1)
        put(d, "machine_rank: 0\n");
    else
        put(d, "machine_rank: 0  # placeholder: 0 on the first node, up to %" PRIu64 " on the last\n",
            nodes - 1);
    if (nodes > 1) {
        put(d, "main_process_ip: 10.0.0.1  # placeholder: the first node's address\n");
        put(d, "main_process_port: %d\n", LAUNCH_MASTER_PORT);
    }
    put(d, "main_training_function: main\n");
    if (st->fp8 != GS_FP8_OFF) /* accelerate's FP8 backends: TE (delayed scaling), AO (torchao, current) */
        put(d, "fp8_config:\n  backend: %s\n", st->fp8 == GS_FP8_CURRENT ? "AO" : "TE");
    put(d, "mixed_precision: %s\n", st->fp8 != GS_FP8_OFF ? "fp8"
                                     : st->precision == GS_PREC_BF16 ? "bf16"
                                     : st->precision == GS_PREC_FP16 ? "fp16" : "'no'");
    put(d, "num_machines: %" PRIu64 "\n", nodes);
    put(d, "num_processes: %" PRIu64 "\n", m->world);
    if (version == 2)
        put_parallelism_config(d, s, m);
    put(d, "rdzv_backend: static\n");
    put(d, "same_network: true\n");
    put(d, "tpu_env: []\n");
    put(d, "tpu_use_cluster: false\n");
    put(d, "tpu_use_sudo: false\n");
    put(d, "use_cpu: false\n");
}

/* torchrun's rendezvous line (no trailing newline): c10d on node 0, or --standalone on one node. */
void gs__launch_put_torchrun(launch_doc *d, const gs_mesh *m, const char *rdzv_id, const char *endpoint)
{
    uint64_t nodes = gs_mesh_nodes(m);
    if (nodes == 1)
        put(d, "torchrun --standalone --nnodes 1 --nproc_per_node %" PRIu64, nproc_per_node(m));
    else
        put(d, "torchrun --nnodes %" PRIu64 " --nproc_per_node %" PRIu64
               " --rdzv_id %s --rdzv_backend c10d --rdzv_endpoint %s",
            nodes, nproc_per_node(m), rdzv_id, endpoint);
}

static void emit_torchrun(launch_doc *d, const gs_scenario *s, const gs_mesh *m,
                          const char *accelerate_why)
{
    if (accelerate_why) {
        put(d, "# no accelerate FSDP config: %s\n", accelerate_why);
        gs__launch_megatron(d, s, m);
        return;
    }
    uint64_t nodes = gs_mesh_nodes(m);
    put(d, "# torchrun launch for %s: ", s->name);
    gs__launch_put_subject(d, s, m);
    put(d, "\n");
    if (nodes > 1)
        put(d, "# run on every node with MASTER_ADDR = the first node's address (placeholder); "
               "the c10d rendezvous numbers the nodes\n");
    put(d, "# train.py wraps the model as the accelerate config below says (FSDP %s, per-%s "
           "units, %s)\n",
        fsdp_strategy_name(s->strategy.sharding),
        s->strategy.wrap == GS_WRAP_LAYER ? "layer" : s->strategy.wrap == GS_WRAP_MODEL ? "model" : "size",
        gs_precision_name(s->strategy.precision));
    gs__launch_put_torchrun(d, m, "gridstep", "$MASTER_ADDR:29500");
    put(d, " train.py\n---\n");
    emit_accelerate(d, s, m);
}

static void emit_slurm(launch_doc *d, const gs_scenario *s, const gs_mesh *m,
                       const char *accelerate_why)
{
    uint64_t nodes = gs_mesh_nodes(m);
    put(d, "#!/bin/bash\n");
    put(d, "# sbatch script for %s: ", s->name);
    gs__launch_put_subject(d, s, m);
    put(d, "\n# placeholders: --cpus-per-task (the node's cores / tasks), --time, and your "
           "--partition / --account lines\n");
    put(d, "#SBATCH --job-name=%s\n", s->name[0] ? s->name : "gridstep");
    put(d, "#SBATCH --nodes=%" PRIu64 "\n", nodes);
    put(d, "# one torchrun per node; it starts %" PRIu64 " ranks\n", nproc_per_node(m));
    put(d, "#SBATCH --ntasks-per-node=1\n");
    put(d, "#SBATCH --gpus-per-node=%" PRIu64 "\n", nproc_per_node(m));
    put(d, "#SBATCH --cpus-per-task=32\n");
    put(d, "#SBATCH --exclusive\n");
    put(d, "#SBATCH --time=01:00:00\n");
    put(d, "#SBATCH --output=%%x-%%j.out\n");
    put(d, "set -euo pipefail\n");
    put(d, "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n");
    put(d, "export MASTER_PORT=%d\n", LAUNCH_MASTER_PORT);
    if (accelerate_why) {
        put(d, "# Megatron-LM (no accelerate FSDP config: %s)\n", accelerate_why);
        gs__launch_megatron_notes(d, s, m);
        gs__launch_megatron_env(d, s, m);
    } else {
        put_batch_comment(d, s, m);
        put(d, "# train.py wraps the model with FSDP %s as `gridstep ... --emit accelerate` "
               "writes it\n",
            fsdp_strategy_name(s->strategy.sharding));
    }
    put(d, "srun --kill-on-bad-exit=1 ");
    if (nodes == 1)
        put(d, "torchrun --standalone --nnodes 1 --nproc_per_node %" PRIu64, nproc_per_node(m));
    else
        put(d, "torchrun --nnodes $SLURM_NNODES --nproc_per_node %" PRIu64
               " --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d --rdzv_endpoint "
               "$MASTER_ADDR:$MASTER_PORT",
            nproc_per_node(m));
    if (accelerate_why) {
        put(d, " \\\n    pretrain_gpt.py \\\n");
        gs__launch_megatron_flags(d, s, m, "    ");
    } else {
        put(d, " train.py\n");
    }
}

gs_status gs_launch_emit(const gs_scenario *s, const gs_mesh *m, gs_launch_kind k, gs_text *out,
                         gs_error *err)
{
    char acc_why[GS_LAUNCH_LINE_BYTES], meg_why[GS_LAUNCH_LINE_BYTES];
    int acc = gs_launch_accelerate_fits(s, m, acc_why, sizeof acc_why);
    int meg = gs_launch_megatron_fits(s, m, meg_why, sizeof meg_why);
    launch_doc d = {out, GS_OK};
    switch (k) {
    case GS_LAUNCH_ACCELERATE:
        if (!acc)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --emit accelerate: cannot express %s",
                                s->path, acc_why);
        emit_accelerate(&d, s, m);
        break;
    case GS_LAUNCH_MEGATRON:
        if (!meg)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --emit megatron: cannot express %s",
                                s->path, meg_why);
        gs__launch_megatron(&d, s, m);
        break;
    case GS_LAUNCH_TORCHTITAN: {
        char tt_why[GS_LAUNCH_LINE_BYTES];
        if (!gs_launch_torchtitan_fits(s, m, tt_why, sizeof tt_why))
            return gs_error_set(err, GS_ERR_INPUT, "%s: --emit torchtitan: cannot express %s", s->path, tt_why);
        d.st = gs__launch_torchtitan(s, out);
        break;
    }
    case GS_LAUNCH_TORCHRUN:
    case GS_LAUNCH_SLURM:
        if (!acc && !meg)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --emit %s: neither launcher expresses the scenario: "
                                "accelerate: %s; Megatron-LM: %s",
                                s->path, gs_launch_kind_name(k), acc_why, meg_why);
        if (k == GS_LAUNCH_TORCHRUN)
            emit_torchrun(&d, s, m, acc ? NULL : acc_why);
        else
            emit_slurm(&d, s, m, acc ? NULL : acc_why);
        break;
    default:
        return gs_error_set(err, GS_ERR_INPUT, "unknown launch kind %d", (int)k);
    }
    if (d.st != GS_OK)
        return gs_error_set(err, d.st, "out of memory writing the %s launch configuration",
                            gs_launch_kind_name(k));
    return GS_OK;
}
