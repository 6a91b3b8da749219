/* The scenario's strategy section (engine/scenario_internal.h): the defaults, then a mapping's
 * sharding, recompute, precision, pipeline, gradient, overlap and kernel settings, and the
 * refusals of combinations that the frameworks do not run. It fills the caller's gs_strategy and
 * borrows the loader's nodes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/scenario_internal.h"
#include "engine/units.h"

/* ------------------------------------------------------------------- enum adaptors ---- */

#define GS_ENUM_ADAPTOR(fn, parse_fn, type)                                                   \
    static int fn(const char *s, int *out)                                                     \
    {                                                                                          \
        type t;                                                                                \
        if (parse_fn(s, &t) != 0)                                                              \
            return -1;                                                                         \
        *out = (int)t;                                                                         \
        return 0;                                                                              \
    }

GS_ENUM_ADAPTOR(parse_sharding, gs_sharding_parse, gs_sharding)
GS_ENUM_ADAPTOR(parse_prefetch, gs_prefetch_parse, gs_prefetch)
GS_ENUM_ADAPTOR(parse_recompute, gs_recompute_parse, gs_recompute)
GS_ENUM_ADAPTOR(parse_precision, gs_precision_parse, gs_precision)
GS_ENUM_ADAPTOR(parse_pipeline, gs_pipeline_parse, gs_pipeline)
GS_ENUM_ADAPTOR(parse_bucket_stages, gs_bucket_stages_parse, gs_bucket_stages)
GS_ENUM_ADAPTOR(parse_xent, gs_xent_parse, gs_xent)
GS_ENUM_ADAPTOR(parse_framework, gs_framework_parse, gs_framework)
GS_ENUM_ADAPTOR(parse_attention, gs_attn_impl_parse, gs_attn_impl)

/* adam_dtype: fp32 (0) or bf16 (1). */
static int parse_adam_dtype(const char *s, int *out)
{
    if (strcasecmp(s, "fp32") == 0 || strcasecmp(s, "float32") == 0)
        return *out = 0, 0;
    if (strcasecmp(s, "bf16") == 0 || strcasecmp(s, "bfloat16") == 0)
        return *out = 1, 0;
    return -1;
}

/* precision: the training precisions, and fp8 (index PRECISION_FP8: bf16 training with FP8
 * linear layers, strategy.fp8) */
#define PRECISION_FP8 3
static int parse_precision_fp8(const char *s, int *out)
{
    if (strcasecmp(s, "fp8") == 0) {
        *out = PRECISION_FP8;
        return 0;
    }
    return parse_precision(s, out);
}

static int parse_fp8_recipe(const char *s, int *out)
{
    gs_fp8 f;
    if (gs_fp8_recipe_parse(s, &f) != 0)
        return -1;
    *out = (int)f;
    return 0;
}

static const char *const grad_sync_names[] = {"auto", "last", "every"};

/* grad_dtype: auto (-1: the training precision) or a precision name */
static int parse_grad_dtype(const char *s, int *out)
{
    if (strcasecmp(s, "auto") == 0) {
        *out = -1;
        return 0;
    }
    return parse_precision(s, out);
}

static int parse_grad_sync(const char *s, int *out)
{
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, grad_sync_names[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------------- strategy ---- */

static const char *const strategy_keys[] = {
    "sharding", "wrap", "prefetch", "forward_prefetch", "reshard_after_forward",
    "limit_all_gathers", "recompute", "recompute_every", "recompute_modules", "flash_attention", "offload", "precision", "pipeline", "grad_sync",
    "virtual_stages", "sequence_parallel", "bucket_mb", "overlap_param_gather", "tp_comm_overlap", "grad_dtype", "overlap_grad_reduce",
    "bucket_stages", "cross_entropy", "framework", "compile", "cuda_graphs", "torch_fsdp2", "attention", "fp8_recipe",
    "fp8_params",
    "fp8_amax_history", "fp8_amax_algo", "fp8_margin", "cp_comm", "moe_dispatcher", "adam_dtype", "precision_aware_optimizer",
    "overlap_moe_expert_parallel_comm", "moe_flex_dispatcher_num_sms",
};

static const char *const wrap_keys[] = {"min_params"};

static gs_status load_wrap(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    static const char *const names[] = {"layer", "model", "{min_params: N}"};
    if (v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(v)) {
        if (strcasecmp(gs__yaml_scalar_text(v), "layer") == 0) {
            s->wrap = GS_WRAP_LAYER;
            return GS_OK;
        }
        if (strcasecmp(gs__yaml_scalar_text(v), "model") == 0) {
            s->wrap = GS_WRAP_MODEL;
            return GS_OK;
        }
    }
    if (v->type != YAML_MAPPING_NODE)
        return gs__scenario_fail_name(l, v, "strategy.wrap", names, 3);
    gs_status st = gs__yaml_check_keys(l, v, "strategy.wrap", wrap_keys, 1);
    if (st != GS_OK)
        return st;
    yaml_node_t *n = gs__yaml_lookup(l, v, "min_params", NULL);
    if (!n)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "strategy.wrap: found an empty mapping, expected "
                                "{min_params: N}");
    st = gs__scenario_value_count(l, n, "strategy.wrap.min_params", &s->wrap_min_params);
    if (st == GS_OK)
        s->wrap = GS_WRAP_MIN_PARAMS;
    return st;
}

static int parse_cp_comm(const char *s, int *out)
{
    gs_cp_comm c;
    if (gs_cp_comm_parse(s, &c) != 0)
        return -1;
    *out = (int)c;
    return 0;
}

static int parse_fp8_amax_algo(const char *s, int *out)
{
    gs_fp8_amax_algo a;
    if (gs_fp8_amax_algo_parse(s, &a) != 0)
        return -1;
    *out = (int)a;
    return 0;
}

/* The delayed-scaling keys (fp8_amax_history, fp8_amax_algo, fp8_margin); whether the recipe is
 * delayed is checked once AUTO is resolved (gs__scenario_fp8_recipe_keys). */
static gs_status strategy_fp8_delayed(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const char *algo_names[2] = {gs_fp8_amax_algo_name(GS_FP8_AMAX_MOST_RECENT), gs_fp8_amax_algo_name(GS_FP8_AMAX_MAX)};
    const gs__scenario_names algos = {algo_names, 2, parse_fp8_amax_algo};
    int e = (int)s->fp8_amax_algo;
    gs_status st;
    if ((st = gs__scenario_opt_count(l, v, "strategy", "fp8_amax_history", &s->fp8_amax_history, NULL)) ||
        (st = gs__scenario_opt_enum(l, v, "strategy", "fp8_amax_algo", &algos, &e)))
        return st;
    s->fp8_amax_algo = (gs_fp8_amax_algo)e;
    const yaml_node_t *mv = gs__yaml_lookup(l, v, "fp8_margin", NULL);
    if (mv && (st = gs__scenario_value_u64(l, mv, "strategy.fp8_margin", &s->fp8_margin, 1)))
        return st;
    if (s->fp8_margin > 16) /* a margin of 2^16 leaves E4M3 nothing to scale to */
        return gs__yaml_fail_at(l, mv, GS_ERR_INPUT, "strategy.fp8_margin %" PRIu64 ": expected 0 to 16 (the scale is "
                                "fp8_max / 2^margin / amax)", s->fp8_margin);
    return GS_OK;
}

gs_status gs__scenario_fp8_recipe_keys(const gs__yaml_loader *l, const yaml_node_t *v, const gs_strategy *s)
{
    static const char *const keys[] = {"fp8_amax_history", "fp8_amax_algo", "fp8_margin"};
    for (size_t i = 0; v && s->fp8 != GS_FP8_DELAYED && i < 3; i++)
        if (gs__yaml_lookup(l, v, keys[i], NULL))
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, keys[i], NULL), GS_ERR_INPUT,
                                    "strategy.%s applies to delayed scaling: found fp8_recipe %s (for framework "
                                    "%s), expected fp8_recipe: delayed (or drop %s)", keys[i], gs_fp8_name(s->fp8),
                                    gs_framework_name(s->framework), keys[i]);
    return GS_OK;
}

/* fp8_recipe, fp8_params and the delayed recipe's keys, which only precision: fp8 reads. */
static gs_status strategy_fp8(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const char *recipe_names[4] = {gs_fp8_name(GS_FP8_DELAYED), gs_fp8_name(GS_FP8_CURRENT), gs_fp8_name(GS_FP8_MX),
                                   gs_fp8_name(GS_FP8_AUTO)};
    const gs__scenario_names recipes = {recipe_names, 4, parse_fp8_recipe};
    static const char *const keys[] = {"fp8_recipe", "fp8_params", "fp8_amax_history", "fp8_amax_algo", "fp8_margin"};
    gs_status st;
    if (s->fp8 == GS_FP8_OFF) {
        for (size_t i = 0; i < 5; i++)
            if (gs__yaml_lookup(l, v, keys[i], NULL))
                return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, keys[i], NULL), GS_ERR_INPUT,
                                        "strategy.%s applies to FP8 training: found precision %s, expected "
                                        "precision: fp8 (or drop %s)", keys[i], gs_precision_name(s->precision),
                                        keys[i]);
        return GS_OK;
    }
    int e = (int)s->fp8;
    if ((st = gs__scenario_opt_enum(l, v, "strategy", "fp8_recipe", &recipes, &e)))
        return st;
    s->fp8 = (gs_fp8)e;
    if ((st = gs__scenario_opt_bool(l, v, "strategy", "fp8_params", &s->fp8_params, NULL)))
        return st;
    return strategy_fp8_delayed(l, v, s);
}

static int parse_moe_dispatcher(const char *s, int *out)
{
    gs_moe_dispatcher d;
    if (gs_moe_dispatcher_parse(s, &d) != 0)
        return -1;
    *out = (int)d;
    return 0;
}

/* moe_dispatcher: a MoE model's token dispatch (read for any model: a dense one ignores it). */
static gs_status strategy_moe(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const char *names[3] = {gs_moe_dispatcher_name(GS_MOE_ALLTOALL), gs_moe_dispatcher_name(GS_MOE_ALLGATHER),
                            gs_moe_dispatcher_name(GS_MOE_FLEX)};
    const gs__scenario_names ds = {names, 3, parse_moe_dispatcher};
    int e = (int)s->moe_dispatcher;
    gs_status st = gs__scenario_opt_enum(l, v, "strategy", "moe_dispatcher", &ds, &e);
    s->moe_dispatcher = (gs_moe_dispatcher)e;
    int given = 0;
    if (st == GS_OK &&
        (st = gs__scenario_opt_count(l, v, "strategy", "moe_flex_dispatcher_num_sms", &s->flex_sms, &given)) == GS_OK &&
        given && s->moe_dispatcher != GS_MOE_FLEX)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "moe_flex_dispatcher_num_sms", NULL), GS_ERR_INPUT,
                                "strategy.moe_flex_dispatcher_num_sms is the flex dispatcher's SM count: found "
                                "moe_dispatcher %s, expected flex",
                                gs_moe_dispatcher_name(s->moe_dispatcher));
    return st;
}

/* cp_comm: context parallelism's exchange (read whatever grid.cp is: a sweep may vary cp). */
static gs_status strategy_cp(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const char *names[4] = {gs_cp_comm_name(GS_CP_P2P), gs_cp_comm_name(GS_CP_ALL_GATHER), gs_cp_comm_name(GS_CP_A2A),
                            gs_cp_comm_name(GS_CP_A2A_P2P)};
    const gs__scenario_names comms = {names, 4, parse_cp_comm};
    int e = (int)s->cp_comm;
    gs_status st = gs__scenario_opt_enum(l, v, "strategy", "cp_comm", &comms, &e);
    s->cp_comm = (gs_cp_comm)e;
    return st;
}

/* recompute_modules: [core_attn, mla_up_proj, ...] or "mla_up_proj,mlp,moe" (Megatron's
 * --recompute-modules names, gs_recompute_modules_parse), with recompute: selective only. */
static gs_status strategy_recompute_modules(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const yaml_node_t *mv = gs__yaml_lookup(l, v, "recompute_modules", NULL);
    char found[96], word[64];
    if (!mv)
        return GS_OK;
    if (s->recompute != GS_RECOMPUTE_SELECTIVE)
        return gs__yaml_fail_at(l, mv, GS_ERR_INPUT,
                                "strategy.recompute_modules: found with recompute %s, expected recompute: selective "
                                "(the modules are what selective recompute checkpoints)",
                                gs_recompute_name(s->recompute));
    uint32_t mask = 0;
    size_t n = mv->type == YAML_SEQUENCE_NODE ? (size_t)(mv->data.sequence.items.top - mv->data.sequence.items.start)
                                              : 1;
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *it = mv->type == YAML_SEQUENCE_NODE
                                    ? yaml_document_get_node(l->doc, mv->data.sequence.items.start[i])
                                    : mv;
        if (!it || !gs__yaml_is_text_scalar(it))
            return gs__yaml_fail_at(l, it ? it : mv, GS_ERR_INPUT,
                                    "strategy.recompute_modules: found %s, expected a list of module names like "
                                    "[mla_up_proj, mlp, moe]",
                                    it ? gs__yaml_describe(it, found, sizeof found) : "nothing");
        if (gs_recompute_modules_parse(gs__yaml_scalar_text(it), &mask, word, sizeof word) != 0)
            return gs__yaml_fail_at(l, it, GS_ERR_INPUT,
                                    "strategy.recompute_modules: found '%s', expected core_attn, moe_act, "
                                    "layernorm, mla_up_proj, mlp, moe or shared_experts",
                                    word);
    }
    s->recompute_modules = mask;
    return GS_OK;
}

/* How parameters are sharded and prefetched, what is recomputed, the training precision and
 * the pipeline schedule. */
static gs_status strategy_schemes(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    const char *sharding[GS_SHARD_COUNT], *prefetch[3], *recompute[GS_RECOMPUTE_COUNT], *precision[4], *pipeline[3];
    for (int i = 0; i < GS_SHARD_COUNT; i++)
        sharding[i] = gs_sharding_name((gs_sharding)i);
    for (int i = 0; i < GS_RECOMPUTE_COUNT; i++)
        recompute[i] = gs_recompute_name((gs_recompute)i);
    for (int i = 0; i < 3; i++) {
        prefetch[i] = gs_prefetch_name((gs_prefetch)i);
        precision[i] = gs_precision_name((gs_precision)i);
        pipeline[i] = gs_pipeline_name((gs_pipeline)i);
    }
    const gs__scenario_names shardings = {sharding, GS_SHARD_COUNT, parse_sharding};
    const gs__scenario_names prefetches = {prefetch, 3, parse_prefetch};
    const gs__scenario_names recomputes = {recompute, GS_RECOMPUTE_COUNT, parse_recompute};
    precision[PRECISION_FP8] = "fp8";
    const gs__scenario_names precisions = {precision, 4, parse_precision_fp8};
    const gs__scenario_names pipelines = {pipeline, 3, parse_pipeline};
    const char *sec = "strategy";
    gs_status st;
    int e = (int)s->sharding;
    if ((st = gs__scenario_opt_enum(l, v, sec, "sharding", &shardings, &e)))
        return st;
    s->sharding = (gs_sharding)e;
    e = (int)s->prefetch;
    if ((st = gs__scenario_opt_enum(l, v, sec, "prefetch", &prefetches, &e)))
        return st;
    s->prefetch = (gs_prefetch)e;
    e = (int)s->recompute;
    if ((st = gs__scenario_opt_enum(l, v, sec, "recompute", &recomputes, &e)))
        return st;
    s->recompute = (gs_recompute)e;
    if ((st = strategy_recompute_modules(l, v, s)))
        return st;
    int every_given = 0;
    if ((st = gs__scenario_opt_count(l, v, sec, "recompute_every", &s->recompute_every, &every_given)))
        return st;
    if (every_given && s->recompute_every > 1 && s->recompute != GS_RECOMPUTE_FULL)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "recompute_every", NULL), GS_ERR_INPUT,
                                "strategy.recompute_every: found %llu with recompute %s, expected recompute: full "
                                "(every N-th block checkpointed whole, the others keeping their activations)",
                                (unsigned long long)s->recompute_every, gs_recompute_name(s->recompute));
    e = (int)s->pipeline;
    if ((st = gs__scenario_opt_enum(l, v, sec, "pipeline", &pipelines, &e)))
        return st;
    s->pipeline = (gs_pipeline)e;
    e = (int)s->precision;
    if ((st = gs__scenario_opt_enum(l, v, sec, "precision", &precisions, &e)))
        return st;
    if (e == PRECISION_FP8) { /* bf16 training, its linear layers in FP8 */
        s->precision = GS_PREC_BF16;
        s->fp8 = GS_FP8_AUTO;
    } else {
        s->precision = (gs_precision)e;
    }
    gs_status fst = strategy_fp8(l, v, s);
    if (fst != GS_OK)
        return fst;
    gs_status cst = strategy_cp(l, v, s);
    return cst != GS_OK ? cst : strategy_moe(l, v, s);
}

/* The gradients' dtype, when they are synchronized, and which stages bucket them per chunk. */
static gs_status strategy_gradients(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    static const char *const grad_names[] = {"auto", "bf16", "fp16", "fp32"};
    static const char *const bucket_stages_names[] = {"all", "first"};
    static const gs__scenario_names grad_dtypes = {grad_names, 4, parse_grad_dtype};
    static const gs__scenario_names grad_syncs = {grad_sync_names, 3, parse_grad_sync};
    static const gs__scenario_names bucket_stages = {bucket_stages_names, 2, parse_bucket_stages};
    const char *sec = "strategy";
    gs_status st;
    int e = s->grad_dtype;
    if ((st = gs__scenario_opt_enum(l, v, sec, "grad_dtype", &grad_dtypes, &e)))
        return st;
    s->grad_dtype = e;
    e = (int)s->grad_sync;
    if ((st = gs__scenario_opt_enum(l, v, sec, "grad_sync", &grad_syncs, &e)))
        return st;
    s->grad_sync = (gs_grad_sync)e;
    e = (int)s->bucket_stages;
    if ((st = gs__scenario_opt_enum(l, v, sec, "bucket_stages", &bucket_stages, &e)))
        return st;
    s->bucket_stages = (gs_bucket_stages)e;
    static const char *const adam_names[] = {"fp32", "bf16"};
    static const gs__scenario_names adam_dtypes = {adam_names, 2, parse_adam_dtype};
    e = s->adam_bf16;
    if ((st = gs__scenario_opt_enum(l, v, sec, "adam_dtype", &adam_dtypes, &e)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "precision_aware_optimizer", &s->precision_aware, NULL)))
        return st;
    s->adam_bf16 = e;
    if (s->adam_bf16 && !s->precision_aware)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "adam_dtype", NULL), GS_ERR_INPUT,
                                "strategy.adam_dtype bf16: expected precision_aware_optimizer: true beside it "
                                "(Megatron-Core keeps the moments in another dtype only in Transformer Engine's "
                                "FusedAdam, --use-precision-aware-optimizer)");
    return GS_OK;
}

/* The kernels: cross-entropy, the framework that runs the step, attention, torch.compile. */
static gs_status strategy_kernels(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    static const char *const xent_names[] = {"unfused", "fused"};
    static const gs__scenario_names xents = {xent_names, 2, parse_xent};
    const char *fw_names[GS_FW_COUNT], *attn_names[GS_ATTN_COUNT];
    for (int i = 0; i < GS_FW_COUNT; i++)
        fw_names[i] = gs_framework_name((gs_framework)i);
    for (int i = 0; i < GS_ATTN_COUNT; i++)
        attn_names[i] = gs_attn_impl_name((gs_attn_impl)i);
    const gs__scenario_names frameworks = {fw_names, GS_FW_COUNT, parse_framework};
    const gs__scenario_names attentions = {attn_names, GS_ATTN_COUNT, parse_attention};
    const char *sec = "strategy";
    gs_status st;
    int e = (int)s->cross_entropy;
    if ((st = gs__scenario_opt_enum(l, v, sec, "cross_entropy", &xents, &e)))
        return st;
    s->cross_entropy = (gs_xent)e;
    e = (int)s->framework;
    if ((st = gs__scenario_opt_enum(l, v, sec, "framework", &frameworks, &e)))
        return st;
    s->framework = (gs_framework)e;
    e = (int)s->attention;
    if ((st = gs__scenario_opt_enum(l, v, sec, "attention", &attentions, &e)))
        return st;
    s->attention = (gs_attn_impl)e;
    if ((st = gs__scenario_opt_bool(l, v, sec, "cuda_graphs", &s->cuda_graphs, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "torch_fsdp2", &s->torch_fsdp2, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "overlap_moe_expert_parallel_comm", &s->ep_overlap, NULL)))
        return st;
    return gs__scenario_opt_bool(l, v, sec, "compile", &s->compile, NULL);
}

/* FSDP wrapping, the on/off switches, virtual stages and bucket sizes. */
static gs_status strategy_switches(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s, int *vs_given)
{
    const char *sec = "strategy";
    gs_status st;
    yaml_node_t *wrap = gs__yaml_lookup(l, v, "wrap", NULL);
    if (wrap && (st = load_wrap(l, wrap, s)) != GS_OK)
        return st;
    uint64_t bucket_mib = 0;
    int reshard_given, bucket_given;
    if ((st = gs__scenario_opt_bool(l, v, sec, "forward_prefetch", &s->forward_prefetch, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "reshard_after_forward", &s->reshard_after_forward,
                                    &reshard_given)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "limit_all_gathers", &s->limit_all_gathers, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "flash_attention", &s->flash_attention, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "offload", &s->offload, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "sequence_parallel", &s->sequence_parallel, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "overlap_param_gather", &s->overlap_param_gather, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "overlap_grad_reduce", &s->overlap_grad_reduce, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, sec, "tp_comm_overlap", &s->tp_comm_overlap, NULL)) ||
        (st = gs__scenario_opt_count(l, v, sec, "virtual_stages", &s->virtual_stages, vs_given)) ||
        (st = gs__scenario_opt_count(l, v, sec, "bucket_mb", &bucket_mib, &bucket_given)))
        return st;
    if (!reshard_given)
        s->reshard_after_forward = gs_sharding_shards_params(s->sharding);
    if (bucket_given && gs_mul_u64(bucket_mib, (uint64_t)1 << 20, &s->bucket_bytes) != 0)
        return gs__yaml_fail_at(
            l, gs__yaml_lookup(l, v, "bucket_mb", NULL), GS_ERR_OVERFLOW,
            "strategy.bucket_mb is too large: found %llu MiB, expected at most %llu",
            (unsigned long long)bucket_mib, (unsigned long long)(UINT64_MAX >> 20));
    return GS_OK;
}

/* Combinations the frameworks refuse: interleaving without virtual stages (or virtual stages
 * without interleaving), reductions after the backward or chunk buckets where the gradients are
 * not held whole, overlap_param_gather without ZeRO. */
static gs_status strategy_refusals(const gs__yaml_loader *l, const yaml_node_t *v, const gs_strategy *s,
                                   int vs_given)
{
    if (s->pipeline == GS_PIPE_INTERLEAVED && s->virtual_stages < 2)
        return gs__yaml_fail_at(
            l,
            vs_given ? gs__yaml_lookup(l, v, "virtual_stages", NULL)
                     : gs__yaml_lookup(l, v, "pipeline", NULL),
            GS_ERR_INPUT,
            "strategy.pipeline interleaved needs virtual_stages >= 2: found "
            "virtual_stages=%llu%s, expected virtual_stages: N with N >= 2 model "
            "chunks per pipeline rank",
            (unsigned long long)s->virtual_stages, vs_given ? "" : " (the default)");
    if (!s->overlap_grad_reduce && !gs_strategy_can_reduce_after_backward(s))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_grad_reduce", NULL), GS_ERR_INPUT,
                                "strategy.overlap_grad_reduce false reduces the gradients after the backward, "
                                "which needs them held until the last micro-batch: found sharding %s with "
                                "grad_sync %s, expected no_shard or zero1 (zero2 reduces every "
                                "micro-batch), grad_sync not every",
                                gs_sharding_name(s->sharding),
                                s->grad_sync == GS_GRAD_SYNC_EVERY ? "every"
                                : s->grad_sync == GS_GRAD_SYNC_LAST ? "last" : "auto");
    if (s->bucket_stages == GS_BUCKET_STAGES_FIRST && !gs_strategy_can_bucket_first(s))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "bucket_stages", NULL), GS_ERR_INPUT,
                                "strategy.bucket_stages first (Megatron-Core's rule) merges a model chunk's "
                                "gradient buckets, held whole in a resident buffer until their one reduction: "
                                "found sharding %s, expected no_shard or zero1 (zero2 reduces every micro-batch "
                                "into transient gradients, FSDP per unit)",
                                gs_sharding_name(s->sharding));
    if (s->overlap_param_gather && s->sharding != GS_SHARD_ZERO1 && s->sharding != GS_SHARD_ZERO2)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_param_gather", NULL), GS_ERR_INPUT,
                                "strategy.overlap_param_gather applies to zero1 and zero2 (the parameter "
                                "all-gather after the optimizer, Megatron's distributed optimizer): found "
                                "sharding %s, which %s",
                                gs_sharding_name(s->sharding),
                                gs_sharding_shards_params(s->sharding)
                                    ? "already gathers each unit before its forward (prefetch settings)"
                                    : "gathers no parameters");
    if (s->cuda_graphs && gs_framework_resolve(s->framework, (int)s->sharding) != GS_FW_MEGATRON)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "cuda_graphs", NULL), GS_ERR_INPUT,
                                "strategy.cuda_graphs captures Megatron-Core's transformer layers "
                                "(--cuda-graph-impl): found framework %s, expected megatron (PyTorch FSDP's "
                                "hooks are not captured)",
                                gs_framework_name(gs_framework_resolve(s->framework, (int)s->sharding)));
    if (s->torch_fsdp2 && (gs_framework_resolve(s->framework, (int)s->sharding) != GS_FW_MEGATRON ||
                           (s->sharding != GS_SHARD_FULL_SHARD && s->sharding != GS_SHARD_GRAD_OP)))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "torch_fsdp2", NULL), GS_ERR_INPUT,
                                "strategy.torch_fsdp2 is Megatron-LM's --use-torch-fsdp2: found framework %s "
                                "with sharding %s, expected framework megatron with full_shard or "
                                "shard_grad_op (--torch-fsdp2-no-reshard-after-forward); PyTorch's own FSDP2 "
                                "is framework: fsdp2",
                                gs_framework_name(gs_framework_resolve(s->framework, (int)s->sharding)),
                                gs_sharding_name(s->sharding));
    if (s->ep_overlap && (gs_framework_resolve(s->framework, (int)s->sharding) != GS_FW_MEGATRON ||
                          s->recompute == GS_RECOMPUTE_FULL))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_moe_expert_parallel_comm", NULL), GS_ERR_INPUT,
                                "strategy.overlap_moe_expert_parallel_comm is Megatron-Core's combined 1F1B "
                                "schedule, which asserts no full recompute: found framework %s with recompute "
                                "%s, expected framework megatron and recompute none or selective",
                                gs_framework_name(gs_framework_resolve(s->framework, (int)s->sharding)),
                                gs_recompute_name(s->recompute));
    if (s->ep_overlap && gs_strategy_regathers(s))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "overlap_moe_expert_parallel_comm", NULL), GS_ERR_INPUT,
                                "strategy.overlap_moe_expert_parallel_comm with parameters gathered before "
                                "every pass is not built (one micro-batch's forward beside another's backward "
                                "may need a block's gather in both): found sharding %s, expected no_shard, "
                                "zero1, zero2 or shard_grad_op",
                                gs_sharding_name(s->sharding));
    if (s->pipeline != GS_PIPE_INTERLEAVED && s->virtual_stages > 1)
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "virtual_stages", NULL), GS_ERR_INPUT,
                                "strategy.virtual_stages=%llu needs pipeline: interleaved: found "
                                "pipeline %s, expected interleaved (or drop virtual_stages)",
                                (unsigned long long)s->virtual_stages,
                                gs_pipeline_name(s->pipeline));
    return GS_OK;
}

gs_status gs__scenario_load_strategy(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s)
{
    gs_status st;
    char found[96];
    gs_strategy_defaults(s);
    if (!v)
        return GS_OK;
    if (v->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "strategy: found %s, expected a mapping like "
                                "{sharding: full_shard, recompute: full}",
                                gs__yaml_describe(v, found, sizeof found));
    st = gs__yaml_check_keys(l, v, "strategy", strategy_keys,
                             sizeof strategy_keys / sizeof strategy_keys[0]);
    if (st != GS_OK)
        return st;
    int vs_given;
    if ((st = strategy_schemes(l, v, s)) || (st = strategy_gradients(l, v, s)) ||
        (st = strategy_kernels(l, v, s)) || (st = strategy_switches(l, v, s, &vs_given)))
        return st;
    if (!gs__yaml_lookup(l, v, "wrap", NULL)) /* the framework's own granularity */
        gs_strategy_default_wrap(s);
    return strategy_refusals(l, v, s, vs_given);
}
