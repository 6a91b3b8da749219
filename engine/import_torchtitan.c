/* torchtitan train config (TOML) -> scenario: every key mapped, reported as ignored, or refused
 * at FILE:LINE:COLUMN (engine/import.h). Both layouts torchtitan shipped are read: December 2024's
 * (parallel degrees under [training] and [experimental], [float8], training.batch_size,
 * training.compile) and 2025's ([parallelism], [compile], [quantize.linear.float8] or [float8],
 * training.local_batch_size / global_batch_size); defaults are torchtitan's JobConfig
 * (torchtitan/config/job_config.py at 9810191bb^, the last commit with TOML configs). */
#include "engine/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import_internal.h"
#include "engine/toml.h"
#include "engine/yaml_doc.h"

/* A key: mapped (ignore == NULL), or ignored for the reason given. */
typedef struct tt_key {
    const char *key;
    const char *ignore;
} tt_key;

static const char no_effect[] = "no effect on the step";

static const tt_key tt_keys[] = {
    {"model.name", NULL}, {"model.flavor", NULL}, {"model.converters", NULL},
    {"model.norm_type", "the norm kernels are fsdp2's eager (or compiled) RMSNorm passes"},
    {"model.tokenizer_path", no_effect}, {"model.hf_assets_path", no_effect},
    {"model.print_after_conversion", no_effect},
    {"training.seq_len", NULL}, {"training.batch_size", NULL}, {"training.local_batch_size", NULL},
    {"training.global_batch_size", NULL}, {"training.compile", NULL}, {"training.mixed_precision_param", NULL},
    {"training.mixed_precision_reduce", NULL}, {"training.enable_cpu_offload", NULL},
    {"training.data_parallel_replicate_degree", NULL}, {"training.data_parallel_shard_degree", NULL},
    {"training.tensor_parallel_degree", NULL},
    {"training.disable_loss_parallel", "the loss is taken vocabulary-parallel over tp"},
    {"training.dtype", "the model's dtype without FSDP; mixed_precision_param sets the compute precision"},
    {"training.dataset", no_effect}, {"training.dataset_path", no_effect}, {"training.max_norm", no_effect},
    {"training.steps", no_effect}, {"training.warmup_steps", no_effect}, {"training.seed", no_effect},
    {"training.deterministic", no_effect}, {"training.gc_freq", no_effect}, {"training.gc_debug", no_effect},
    {"parallelism.data_parallel_replicate_degree", NULL}, {"parallelism.data_parallel_shard_degree", NULL},
    {"parallelism.fsdp_reshard_after_forward", NULL}, {"parallelism.tensor_parallel_degree", NULL},
    {"parallelism.disable_loss_parallel", "the loss is taken vocabulary-parallel over tp"},
    {"parallelism.enable_async_tensor_parallel", NULL}, {"parallelism.pipeline_parallel_degree", NULL},
    {"parallelism.pipeline_parallel_schedule", NULL}, {"parallelism.pipeline_parallel_microbatch_size", NULL},
    {"parallelism.pipeline_parallel_layers_per_stage", NULL},
    {"parallelism.pipeline_parallel_first_stage_less_layers", NULL},
    {"parallelism.pipeline_parallel_last_stage_less_layers", NULL},
    {"parallelism.pipeline_parallel_schedule_csv", NULL}, {"parallelism.module_fqns_per_model_part", NULL},
    {"parallelism.pipeline_parallel_split_points", NULL}, {"parallelism.context_parallel_degree", NULL},
    {"parallelism.context_parallel_rotate_method", NULL},
    {"parallelism.context_parallel_load_balancer", "the sequence is split head-tail (zig-zag), torchtitan's default"},
    {"parallelism.expert_parallel_degree", NULL}, {"parallelism.expert_tensor_parallel_degree", NULL},
    {"parallelism.pipeline_parallel_expert_parallel_overlap",
     "the all-to-alls' overlap with another micro-batch's compute is not modelled"},
    {"parallelism.expert_parallel_comm_backend", NULL},
    {"experimental.context_parallel_degree", NULL}, {"experimental.context_parallel_rotate_method", NULL},
    {"experimental.pipeline_parallel_degree", NULL}, {"experimental.pipeline_parallel_schedule", NULL},
    {"experimental.pipeline_parallel_microbatches", NULL}, {"experimental.pipeline_parallel_split_points", NULL},
    {"experimental.pipeline_parallel_schedule_csv", NULL}, {"experimental.enable_async_tensor_parallel", NULL},
    {"experimental.enable_compiled_autograd", "compiled autograd is not modelled apart from compile"},
    {"experimental.custom_import", no_effect}, {"experimental.custom_args_module", no_effect},
    {"activation_checkpoint.mode", NULL}, {"activation_checkpoint.selective_ac_option", NULL},
    {"activation_checkpoint.preserve_rng_state", no_effect}, {"activation_checkpoint.early_stop", no_effect},
    {"activation_checkpoint.determinism_check", no_effect}, {"activation_checkpoint.debug", no_effect},
    {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
     "the per-op policy's matmuls are counted by their order in the block"},
    {"compile.enable", NULL}, {"compile.components", NULL}, {"compile.backend", NULL},
    {"float8.enable_float8_linear", NULL}, {"float8.enable_fsdp_float8_all_gather", NULL},
    {"float8.precompute_float8_dynamic_scale_for_fsdp", "one amax all-reduce per step instead of one per parameter"},
    {"float8.scaling_type_input", NULL}, {"float8.scaling_type_weight", NULL}, {"float8.scaling_type_grad_output", NULL},
    {"float8.recipe_name", NULL}, {"float8.filter_fqns", "the LM head stays in bf16 in gridstep's FP8 model"},
    {"float8.emulate", NULL},
    {"float8.moe_fqns", "the experts' grouped GEMMs follow the precision like the other linear layers"},
    {"quantize.linear.float8.enable_fsdp_float8_all_gather", NULL},
    {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
     "one amax all-reduce per step instead of one per parameter"},
    {"quantize.linear.float8.recipe_name", NULL},
    {"quantize.linear.float8.filter_fqns", "the LM head stays in bf16 in gridstep's FP8 model"},
    {"quantize.linear.float8.emulate", NULL},
    {"optimizer.name", NULL}, {"optimizer.lr", no_effect}, {"optimizer.eps", no_effect},
    {"optimizer.weight_decay", no_effect}, {"optimizer.beta1", no_effect}, {"optimizer.beta2", no_effect},
    {"optimizer.fused", "the optimizer's kernels are fused in gridstep's model"},
    {"optimizer.implementation", "the optimizer's kernels are fused in gridstep's model"},
    {"optimizer.early_step_in_backward", NULL},
};
#define TT_KEYS_N (sizeof tt_keys / sizeof tt_keys[0])

/* Tables whose every key has no effect on a training step. */
static const char *const tt_quiet[] = {"job.", "profiling.", "metrics.", "checkpoint.", "comm.", "lr_scheduler.",
                                       "memory_estimation.", "fault_tolerance.", "validation.", "debug.",
                                       "training.dataloader.", "quantize.grouped_mm."};

typedef struct tt {
    const gs_toml *t;
    const char *path;
    gs_error *err;
} tt;

static gs_status tt_fail(const tt *x, const gs_toml_item *it, const char *fmt, const char *a, const char *b)
{
    char msg[GS_ERROR_MSG_BYTES];
    snprintf(msg, sizeof msg, fmt, a, b);
    if (it->arg)
        return gs_error_set(x->err, GS_ERR_INPUT, "%s: argument %u: --%s: %s", x->path, it->arg, it->key, msg);
    return gs_error_set(x->err, GS_ERR_INPUT, "%s:%u:%u: %s: %s", x->path, it->line, it->col, it->key, msg);
}

/* Where an item was given, for the ignored list: "PATH:LINE" or "PATH: argument N". */
static void tt_where(const tt *x, const gs_toml_item *it, char *buf, size_t len)
{
    if (it->arg)
        snprintf(buf, len, "%s: argument %u", x->path, it->arg);
    else
        snprintf(buf, len, "%s:%u", x->path, it->line);
}

#define TT_QUIET_N (sizeof tt_quiet / sizeof tt_quiet[0])

/* Every key is mapped, ignored (reported; a table of tt_quiet once, at its first key), or an error
 * with the nearest known key. */
static gs_status tt_check_keys(const tt *x, gs_diag *ignored)
{
    unsigned char quiet_seen[TT_QUIET_N] = {0};
    for (size_t i = 0; i < x->t->n; i++) {
        const gs_toml_item *it = &x->t->items[i];
        const char *why = NULL;
        int known = 0;
        for (size_t k = 0; k < TT_KEYS_N && !known; k++)
            if (strcmp(tt_keys[k].key, it->key) == 0)
                known = 1, why = tt_keys[k].ignore;
        for (size_t k = 0; k < TT_QUIET_N && !known; k++)
            if (strncmp(it->key, tt_quiet[k], strlen(tt_quiet[k])) == 0) {
                known = 1;
                if (!quiet_seen[k]) {
                    char where[GS_ERROR_MSG_BYTES / 2];
                    quiet_seen[k] = 1;
                    tt_where(x, it, where, sizeof where);
                    gs_status st = gs__import_ignored(ignored, x->err, "%s: [%.*s]: ignored: %s", where,
                                                      (int)strlen(tt_quiet[k]) - 1, tt_quiet[k], no_effect);
                    if (st != GS_OK)
                        return st;
                }
            }
        if (!known) {
            const char *best = NULL;
            for (size_t k = 0; k < TT_KEYS_N; k++)
                if (gs_name_closer(it->key, tt_keys[k].key, best))
                    best = tt_keys[k].key;
            return tt_fail(x, it, "unknown torchtitan option (did you mean %s?)%s", best ? best : "?", "");
        }
        gs_status st;
        char where[GS_ERROR_MSG_BYTES / 2];
        tt_where(x, it, where, sizeof where);
        if (why && (st = gs__import_ignored(ignored, x->err, "%s: %s: ignored: %s", where, it->key, why)) != GS_OK)
            return st;
    }
    return GS_OK;
}

/* The first of the keys given (a 2025 name and its 2024 place), or NULL. */
static const gs_toml_item *tt_get(const tt *x, const char *key, const char *old)
{
    const gs_toml_item *it = gs_toml_find(x->t, key);
    return it ? it : old ? gs_toml_find(x->t, old) : NULL;
}

static gs_status tt_int(const tt *x, const char *key, const char *old, int64_t def, int64_t min, int64_t *out)
{
    const gs_toml_item *it = tt_get(x, key, old);
    *out = def;
    if (!it)
        return GS_OK;
    if (it->type != GS_TOML_INT)
        return tt_fail(x, it, "found '%s', expected an integer%s", it->text, "");
    if (it->i < min) {
        char m[32];
        snprintf(m, sizeof m, "%" PRId64, min);
        return tt_fail(x, it, "found %s, expected at least %s", it->text, m);
    }
    *out = it->i;
    return GS_OK;
}

static gs_status tt_bool(const tt *x, const char *key, const char *old, int def, int *out)
{
    const gs_toml_item *it = tt_get(x, key, old);
    *out = def;
    if (!it)
        return GS_OK;
    if (it->type != GS_TOML_BOOL)
        return tt_fail(x, it, "found '%s', expected true or false%s", it->text, "");
    *out = it->b;
    return GS_OK;
}

/* A string option that must be one of names[0..n) (case-sensitive, as torchtitan reads them);
 * *out its index, def when absent. */
static gs_status tt_enum(const tt *x, const char *key, const char *old, const char *const *names, int n, int def,
                         const char *expected, int *out)
{
    const gs_toml_item *it = tt_get(x, key, old);
    *out = def;
    if (!it)
        return GS_OK;
    for (int i = 0; i < n && it->type == GS_TOML_STRING; i++)
        if (strcmp(it->text, names[i]) == 0) {
            *out = i;
            return GS_OK;
        }
    return tt_fail(x, it, "found '%s', expected %s", it->text, expected);
}

/* torchtitan's (model.name, model.flavor) of each gridstep preset it has. */
static const char *const tt_flavors[][3] = {
    {"llama3", "8B", "llama3-8b"}, {"llama3", "70B", "llama3-70b"}, {"llama3", "405B", "llama3.1-405b"},
    {"llama2", "7B", "llama2-7b"}, {"llama2", "13B", "llama2-13b"}, {"llama2", "70B", "llama2-70b"},
    {"deepseek_v3", "16B", "deepseek-v2-lite"}, {"deepseek_v3", "236B", "deepseek-v2"},
    {"deepseek_v3", "671B", "deepseek-v3"}, {"llama4", "17bx16e", "llama4-scout"},
    {"llama4", "17bx128e", "llama4-maverick"}, {"qwen3", "30B-A3B", "qwen3-30b-a3b"},
    {"qwen3", "235B-A22B", "qwen3-235b-a22b"},
};
#define TT_FLAVORS_N (sizeof tt_flavors / sizeof tt_flavors[0])

const char *gs_torchtitan_preset(const char *name, const char *flavor)
{
    for (size_t i = 0; i < TT_FLAVORS_N; i++)
        if (strcmp(tt_flavors[i][0], name) == 0 && strcmp(tt_flavors[i][1], flavor) == 0)
            return tt_flavors[i][2];
    return NULL;
}

int gs_torchtitan_flavor(const gs_model *m, const char **name, const char **flavor)
{
    for (size_t i = 0; i < TT_FLAVORS_N; i++) {
        const gs_model *p = gs_model_preset_find(tt_flavors[i][2]);
        if (!p)
            continue;
        gs_model a = *m;
        a.seq = p->seq;
        if (memcmp(&a, p, sizeof a) == 0) {
            *name = tt_flavors[i][0];
            *flavor = tt_flavors[i][1];
            return 1;
        }
    }
    return 0;
}

/* model.name and model.flavor as a gridstep preset (--model wins). */
static gs_status tt_model(const tt *x, const gs_import_opts *o, gs_scenario *s)
{
    const gs_toml_item *name = gs_toml_find(x->t, "model.name"), *flavor = gs_toml_find(x->t, "model.flavor");
    const char *n = name && name->type == GS_TOML_STRING ? name->text : "llama3";
    const char *f = flavor && flavor->type == GS_TOML_STRING ? flavor->text : "debugmodel";
    if (o->model)
        return GS_OK; /* gs__import_base took it */
    const char *preset = gs_torchtitan_preset(n, f);
    if (preset) {
        s->model = *gs_model_preset_find(preset);
        return GS_OK;
    }
    return gs_error_set(x->err, GS_ERR_INPUT,
                        "%s: model %s, flavor %s: no gridstep preset for it (llama3 8B / 70B / 405B, llama2 7B / "
                        "13B / 70B, deepseek_v3 16B / 236B / 671B, llama4 17bx16e / 17bx128e, qwen3 30B-A3B / "
                        "235B-A22B are mapped): give "
                        "--model",
                        x->path, n, f);
}

/* FP8: [float8] enable_float8_linear (2024) or model.converters naming float8 (2025), with its
 * scaling (delayed or dynamic: current) and the FP8 all-gather of FSDP2's parameters. */
static gs_status tt_float8(const tt *x, gs_scenario *s)
{
    gs_status st;
    int on = 0, ag = 0, emulate = 0;
    const gs_toml_item *conv = gs_toml_find(x->t, "model.converters");
    for (size_t i = 0; conv && i < conv->nitems; i++) {
        if (strcmp(conv->items[i], "float8") == 0 || strcmp(conv->items[i], "quantize.linear.float8") == 0)
            on = 1;
        else
            return tt_fail(x, conv, "found converter '%s', expected float8 (%s are not modelled)", conv->items[i],
                           "MX formats and other converters");
    }
    int old_on;
    if ((st = tt_bool(x, "float8.enable_float8_linear", NULL, 0, &old_on)) != GS_OK ||
        (st = tt_bool(x, "quantize.linear.float8.enable_fsdp_float8_all_gather", "float8.enable_fsdp_float8_all_gather", 0,
                      &ag)) != GS_OK ||
        (st = tt_bool(x, "quantize.linear.float8.emulate", "float8.emulate", 0, &emulate)) != GS_OK)
        return st;
    on |= old_on;
    if (!on)
        return GS_OK;
    if (emulate)
        return tt_fail(x, tt_get(x, "quantize.linear.float8.emulate", "float8.emulate"),
                       "found true, expected false (%s)%s", "emulated FP8 runs bf16 kernels", "");
    static const char *const recipes[] = {"tensorwise"};
    int r;
    if ((st = tt_enum(x, "quantize.linear.float8.recipe_name", "float8.recipe_name", recipes, 1, 0,
                      "tensorwise (rowwise scaling is not modelled)", &r)) != GS_OK)
        return st;
    static const char *const scalings[] = {"dynamic", "delayed"};
    int delayed = 0;
    for (int k = 0; k < 3; k++) {
        static const char *const keys[] = {"float8.scaling_type_input", "float8.scaling_type_weight",
                                           "float8.scaling_type_grad_output"};
        int d;
        if ((st = tt_enum(x, keys[k], NULL, scalings, 2, 0, "dynamic or delayed", &d)) != GS_OK)
            return st;
        delayed |= d;
    }
    s->strategy.fp8 = delayed ? GS_FP8_DELAYED : GS_FP8_CURRENT;
    s->strategy.fp8_params = ag;
    return GS_OK;
}

/* Activation checkpointing: none, full, selective with the per-op policy ("op") or every N-th
 * block fully ("N"). */
static gs_status tt_recompute(const tt *x, gs_scenario *s)
{
    static const char *const modes[] = {"none", "selective", "full", "memory_budget"};
    gs_status st;
    int mode;
    if ((st = tt_enum(x, "activation_checkpoint.mode", NULL, modes, 4, 1, "none, selective or full", &mode)) != GS_OK)
        return st;
    if (mode == 3)
        return tt_fail(x, gs_toml_find(x->t, "activation_checkpoint.mode"),
                       "found memory_budget, expected none, selective or full (%s)%s",
                       "the compiler's memory-budget partitioner is not modelled", "");
    s->strategy.recompute = mode == 0 ? GS_RECOMPUTE_NONE : GS_RECOMPUTE_FULL;
    s->strategy.recompute_every = 1;
    if (mode != 1)
        return GS_OK;
    const gs_toml_item *opt = gs_toml_find(x->t, "activation_checkpoint.selective_ac_option");
    const char *v = opt ? opt->text : "2"; /* JobConfig's default */
    if (strcmp(v, "op") == 0) {
        s->strategy.recompute = GS_RECOMPUTE_OP;
        return GS_OK;
    }
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end != '\0' || n < 1 || v[0] == '-')
        return tt_fail(x, opt, "found '%s', expected op or a positive integer (every N-th block%s)", v,
                       " checkpointed whole");
    s->strategy.recompute_every = n;
    return GS_OK;
}

/* The parallel degrees, read from [parallelism] or their December 2024 places. */
typedef struct tt_dims {
    int64_t rep, shard, tp, pp, cp, ep, etp;
} tt_dims;

static gs_status tt_degrees(const tt *x, tt_dims *d)
{
    gs_status st;
    int64_t shard;
    if ((st = tt_int(x, "parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree", 1, 1,
                     &d->rep)) != GS_OK ||
        (st = tt_int(x, "parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree", -1, -1,
                     &shard)) != GS_OK ||
        (st = tt_int(x, "parallelism.tensor_parallel_degree", "training.tensor_parallel_degree", 1, 1, &d->tp)) != GS_OK ||
        (st = tt_int(x, "parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree", 1, 1, &d->pp)) !=
            GS_OK ||
        (st = tt_int(x, "parallelism.context_parallel_degree", "experimental.context_parallel_degree", 1, 1, &d->cp)) !=
            GS_OK ||
        (st = tt_int(x, "parallelism.expert_parallel_degree", NULL, 1, 1, &d->ep)) != GS_OK ||
        (st = tt_int(x, "parallelism.expert_tensor_parallel_degree", NULL, 1, 1, &d->etp)) != GS_OK)
        return st;
    if (shard == 0)
        return tt_fail(x, tt_get(x, "parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree"),
                       "found 0, expected -1 (the GPUs left) or a positive degree%s%s", "", "");
    d->shard = shard;
    return GS_OK;
}

/* The node count (--nodes, or the degrees' product when data_parallel_shard_degree is fixed) and
 * the shard degree it leaves. */
static gs_status tt_world(const tt *x, const gs_import_opts *o, const gs_scenario *s, tt_dims *d, uint64_t *nodes)
{
    uint64_t per_node = s->cluster.gpus_per_node, rest = (uint64_t)(d->rep * d->tp * d->pp * d->cp), world;
    if (o->nodes) {
        world = o->nodes * per_node;
        if (world % rest)
            return gs_error_set(x->err, GS_ERR_INPUT,
                                "%s: %" PRIu64 " GPUs (--nodes %" PRIu64 " x %" PRIu64 ") do not divide by replicate x tp "
                                "x pp x cp = %" PRIu64,
                                x->path, world, o->nodes, per_node, rest);
        if (d->shard < 0)
            d->shard = (int64_t)(world / rest);
        else if ((uint64_t)d->shard * rest != world)
            return gs_error_set(x->err, GS_ERR_INPUT,
                                "%s: the degrees make %" PRIu64 " GPUs but --nodes %" PRIu64 " gives %" PRIu64, x->path,
                                (uint64_t)d->shard * rest, o->nodes, world);
        *nodes = o->nodes;
        return GS_OK;
    }
    if (d->shard < 0)
        return gs_error_set(x->err, GS_ERR_INPUT,
                            "%s: data_parallel_shard_degree -1 takes the GPUs the job is launched on, which the config "
                            "does not say: give --nodes",
                            x->path);
    world = (uint64_t)d->shard * rest;
    if (world % per_node)
        return gs_error_set(x->err, GS_ERR_INPUT,
                            "%s: the degrees make %" PRIu64 " GPUs, not whole nodes of %" PRIu64 " (%s): give a "
                            "cluster whose nodes they fill",
                            x->path, world, per_node, s->cluster.name);
    *nodes = world / per_node;
    return GS_OK;
}

/* Expert parallelism (torchtitan's ParallelDims): ep ranks share a MoE layer's experts, carved out
 * of dp_shard x cp, and of tp too when the experts are not split over TP (expert tensor parallel
 * degree 1; otherwise it equals tp); the experts' FSDP2 shards over the rest of dp_shard. The
 * all-to-all dispatch ("standard") is modelled, DeepEP's is not. */
static gs_status tt_experts(const tt *x, const tt_dims *d, gs_scenario *s)
{
    static const char *const backends[] = {"standard", "deepep"};
    gs_status st;
    int be;
    if ((st = tt_enum(x, "parallelism.expert_parallel_comm_backend", NULL, backends, 2, 0, "standard or deepep",
                      &be)) != GS_OK)
        return st;
    if (!s->model.moe.experts) {
        if (d->ep > 1 || d->etp > 1)
            return tt_fail(x, tt_get(x, d->ep > 1 ? "parallelism.expert_parallel_degree"
                                                  : "parallelism.expert_tensor_parallel_degree", NULL),
                           "found more than 1, expected 1 (%s)%s", "the model has no experts", "");
        return GS_OK;
    }
    if (be == 1)
        return tt_fail(x, tt_get(x, "parallelism.expert_parallel_comm_backend", NULL),
                       "found 'deepep', expected standard (%s)%s", "DeepEP's dispatch kernels are not modelled", "");
    if (d->etp != 1 && d->etp != d->tp) {
        char found[32], tp[32];
        snprintf(found, sizeof found, "%lld", (long long)d->etp);
        snprintf(tp, sizeof tp, "%lld", (long long)d->tp);
        return tt_fail(x, tt_get(x, "parallelism.expert_tensor_parallel_degree", NULL),
                       "found %s, expected 1 or tensor_parallel_degree %s (torchtitan's ParallelDims accepts no other)",
                       found, tp);
    }
    s->grid.ep = (uint64_t)d->ep;
    s->grid.etp = d->tp > 1 && d->etp == 1 ? 1 : 0;
    s->strategy.moe_dispatcher = GS_MOE_ALLTOALL;
    return GS_OK;
}

/* Sharding (FSDP2 over dp_shard x cp, DDP over dp_replicate, HSDP both), reshard_after_forward and the
 * grid; the mesh order is torchtitan's [pp, dp_replicate, dp_shard, cp, tp], gridstep's
 * tp-cp-dp-pp. */
static gs_status tt_grid(const tt *x, const tt_dims *d, gs_scenario *s)
{
    static const char *const policies[] = {"default", "always", "never"};
    gs_status st;
    int pol;
    s->grid.dp = (uint64_t)(d->rep * d->shard);
    s->grid.tp = (uint64_t)d->tp;
    s->grid.pp = (uint64_t)d->pp;
    s->grid.cp = (uint64_t)d->cp;
    s->strategy.framework = GS_FW_FSDP2;
    /* torchtitan applies FSDP over dp_shard x cp (its dp_shard_cp mesh): context parallelism
     * shards the parameters even with dp_shard 1 */
    int fsdp = d->shard > 1 || d->cp > 1;
    if (fsdp && d->rep > 1) {
        uint64_t in_node = s->cluster.gpus_per_node / (uint64_t)(d->tp * d->cp);
        if ((uint64_t)d->shard != in_node)
            return gs_error_set(x->err, GS_ERR_INPUT,
                                "%s: HSDP shards over %" PRId64 " ranks; gridstep's hybrid_shard shards over a node's "
                                "data-parallel ranks (%" PRIu64 " here)",
                                x->path, d->shard, in_node);
        s->strategy.sharding = GS_SHARD_HYBRID_SHARD;
    } else {
        s->strategy.sharding = fsdp ? GS_SHARD_FULL_SHARD : GS_SHARD_NO_SHARD;
    }
    if ((st = tt_enum(x, "parallelism.fsdp_reshard_after_forward", NULL, policies, 3, 0, "default, always or never",
                      &pol)) != GS_OK)
        return st;
    /* torchtitan's apply_fsdp: "default" reshards unless pipeline parallel (no per-micro-batch gathers) */
    s->strategy.reshard_after_forward = s->strategy.sharding != GS_SHARD_NO_SHARD &&
                                        (pol == 1 || (pol == 0 && d->pp == 1));
    int async_tp;
    if ((st = tt_bool(x, "parallelism.enable_async_tensor_parallel", "experimental.enable_async_tensor_parallel", 0,
                      &async_tp)) != GS_OK)
        return st;
    s->strategy.sequence_parallel = d->tp > 1; /* torchtitan's TP plan: SequenceParallel norms */
    s->strategy.tp_comm_overlap = d->tp > 1 && async_tp;
    static const char *const rotate[] = {"allgather", "alltoall"};
    int r;
    if ((st = tt_enum(x, "parallelism.context_parallel_rotate_method", "experimental.context_parallel_rotate_method",
                      rotate, 2, 0, "allgather or alltoall", &r)) != GS_OK)
        return st;
    /* alltoall passes the K, V shards around the ring: the p2p exchange */
    s->strategy.cp_comm = r == 0 ? GS_CP_ALL_GATHER : GS_CP_P2P;
    return tt_experts(x, d, s);
}

/* A list-valued option that must be empty (a custom split or schedule gridstep does not read). */
static gs_status tt_empty(const tt *x, const char *key, const char *why)
{
    const gs_toml_item *it = gs_toml_find(x->t, key);
    if (it && ((it->type == GS_TOML_ARRAY && it->nitems) || (it->type == GS_TOML_STRING && it->text[0])))
        return tt_fail(x, it, "found '%s', expected none (%s)", it->text, why);
    return GS_OK;
}

int gs_torchtitan_split(uint64_t layers, uint64_t stages, uint64_t first_less, uint64_t last_less, gs_layout *out)
{
    memset(out, 0, sizeof *out);
    if (stages == 0 || stages > GS_LAYOUT_MAX)
        return -1;
    uint64_t eff = layers + first_less + last_less, per = eff / stages, extra = eff % stages, placed = 0;
    for (uint64_t k = 0; k < stages; k++) {
        uint64_t n = per + (k < extra);
        uint64_t less = (k == 0 ? first_less : 0) + (k + 1 == stages ? last_less : 0);
        n = n > less ? n - less : 0;
        if (n > layers - placed)
            n = layers - placed;
        if (n == 0 || n > 255)
            return -1;
        out->layers[k] = (uint8_t)n;
        placed += n;
    }
    out->n = (uint16_t)stages;
    return placed == layers ? 0 : -1;
}

/* torchtitan's split when the layers and the embedding's and the output's weights do not divide
 * evenly over the stages (gs_torchtitan_split), as an explicit layout (grid.layout: virtual
 * stage k = chunk x pp + stage, torchtitan's looped placement): the mesh's even rule does not
 * apply. Llama 3 8B on pp 4: 32 + 2 over 4 stages gives 9, 9, 8, 8 less the weights: 8, 9, 8, 7. */
static gs_status tt_uneven_layout(const tt *x, uint64_t layers, uint64_t stages, uint64_t first_less,
                                  uint64_t last_less, gs_scenario *s)
{
    gs_layout l;
    if (gs_torchtitan_split(layers, stages, first_less, last_less, &l) != 0) {
        char what[96];
        snprintf(what, sizeof what, "%" PRIu64 " layers over %" PRIu64 " pipeline stages", layers, stages);
        return tt_fail(x, gs_toml_find(x->t, "parallelism.pipeline_parallel_degree"),
                       "gives %s: torchtitan's split leaves a stage without a layer or with more than 255%s", what,
                       ", or more stages than gridstep lays out");
    }
    s->grid.layout = l;
    s->grid.account_for_embedding = s->grid.account_for_loss = 0;
    return GS_OK;
}

/* The pipeline: schedule (torch.distributed.pipelining's names, read case-blind as
 * get_schedule_class does), virtual stages as torchtitan's pipeline_module_split counts them
 * (layers_per_stage given: ceil((layers + first_less + last_less) / layers_per_stage) stages; else
 * 1 per rank for single-stage schedules, 2 for multi-stage ones), and the first / last stage's
 * fewer layers (1 each by default: the embedding and the loss weigh a layer, Megatron's
 * account-for-embedding / -loss split). *microbatches: 0 for pipeline_parallel_microbatch_size's
 * rule, else the 2024 count. */
static gs_status tt_pipeline(const tt *x, const tt_dims *d, gs_scenario *s, uint64_t *microbatches)
{
    gs_status st;
    *microbatches = 0;
    if ((st = tt_empty(x, "parallelism.pipeline_parallel_schedule_csv", "a schedule from a CSV file")) ||
        (st = tt_empty(x, "experimental.pipeline_parallel_schedule_csv", "a schedule from a CSV file")) ||
        (st = tt_empty(x, "parallelism.module_fqns_per_model_part", "a hand-written split of the model")) ||
        (st = tt_empty(x, "parallelism.pipeline_parallel_split_points", "hand-written split points")) ||
        (st = tt_empty(x, "experimental.pipeline_parallel_split_points", "hand-written split points")))
        return st;
    const gs_toml_item *sch = tt_get(x, "parallelism.pipeline_parallel_schedule", "experimental.pipeline_parallel_schedule");
    char low[64] = "1f1b";
    if (sch) {
        size_t n = strlen(sch->text);
        for (size_t i = 0; i < n && i + 1 < sizeof low; i++)
            low[i] = (char)(sch->text[i] >= 'A' && sch->text[i] <= 'Z' ? sch->text[i] - 'A' + 'a' : sch->text[i]);
        low[n < sizeof low ? n : sizeof low - 1] = '\0';
    }
    int multi = strcmp(low, "interleaved1f1b") == 0;
    if (!multi && strcmp(low, "1f1b") != 0 && strcmp(low, "gpipe") != 0)
        return tt_fail(x, sch, "found '%s', expected 1F1B, GPipe or Interleaved1F1B (%s are not modelled)", sch->text,
                       "zero-bubble, looped-BFS and DualPipe schedules");
    s->strategy.pipeline = multi ? GS_PIPE_INTERLEAVED : low[0] == 'g' ? GS_PIPE_GPIPE : GS_PIPE_1F1B;
    int64_t first_less, last_less, per_stage, mbs;
    if ((st = tt_int(x, "parallelism.pipeline_parallel_first_stage_less_layers", NULL, 1, 0, &first_less)) ||
        (st = tt_int(x, "parallelism.pipeline_parallel_last_stage_less_layers", NULL, 1, 0, &last_less)) ||
        (st = tt_int(x, "parallelism.pipeline_parallel_layers_per_stage", NULL, 0, 1, &per_stage)) ||
        (st = tt_int(x, "experimental.pipeline_parallel_microbatches", NULL, 0, 1, &mbs)))
        return st;
    if (d->pp == 1) { /* no pipeline: the schedule is not used (torchtitan's default names Interleaved1F1B) */
        s->strategy.pipeline = GS_PIPE_1F1B;
        return GS_OK;
    }
    if (first_less > 1 || last_less > 1)
        return tt_fail(x, gs_toml_find(x->t, first_less > 1 ? "parallelism.pipeline_parallel_first_stage_less_layers"
                                                            : "parallelism.pipeline_parallel_last_stage_less_layers"),
                       "found more than 1, expected 0 or 1 (%s)%s", "the embedding or the loss weighing one layer", "");
    /* 2024's torchtitan split the layers evenly (split points generated per stage) */
    int y2025 = gs_toml_find(x->t, "parallelism.pipeline_parallel_degree") != NULL;
    s->grid.account_for_embedding = y2025 && first_less == 1;
    s->grid.account_for_loss = y2025 && last_less == 1;
    uint64_t layers = s->model.layers, stages = (uint64_t)d->pp * (multi ? 2 : 1);
    if (per_stage)
        stages = (layers + (uint64_t)first_less + (uint64_t)last_less + (uint64_t)per_stage - 1) / (uint64_t)per_stage;
    if (stages % (uint64_t)d->pp || (multi ? stages / (uint64_t)d->pp < 2 : stages != (uint64_t)d->pp))
        return tt_fail(x, gs_toml_find(x->t, "parallelism.pipeline_parallel_layers_per_stage"),
                       "gives %s stages, expected %s", per_stage ? "a count of" : "", multi ? "2 or more per rank"
                                                                                            : "one per rank");
    s->strategy.virtual_stages = stages / (uint64_t)d->pp;
    *microbatches = (uint64_t)mbs;
    if (y2025 && (first_less || last_less) && (layers + (uint64_t)first_less + (uint64_t)last_less) % stages)
        return tt_uneven_layout(x, layers, stages, (uint64_t)first_less, (uint64_t)last_less, s);
    return GS_OK;
}

/* Batch: local_batch_size (2024: batch_size) sequences per data-parallel rank, global_batch_size
 * (-1: local x dp, no accumulation); with a pipeline, micro-batches of
 * pipeline_parallel_microbatch_size (2024: local / pipeline_parallel_microbatches, pp by default). */
static gs_status tt_batch(const tt *x, const tt_dims *d, uint64_t pp_mbs, uint64_t *micro, uint64_t *global)
{
    gs_status st;
    int64_t local, glob, mbsz;
    if ((st = tt_int(x, "training.local_batch_size", "training.batch_size", 8, 1, &local)) ||
        (st = tt_int(x, "training.global_batch_size", NULL, -1, -1, &glob)) ||
        (st = tt_int(x, "parallelism.pipeline_parallel_microbatch_size", NULL, 1, 1, &mbsz)))
        return st;
    uint64_t dp = (uint64_t)(d->rep * d->shard), step = (uint64_t)local * dp;
    *global = glob > 0 ? (uint64_t)glob : step;
    if (*global % step)
        return tt_fail(x, gs_toml_find(x->t, "training.global_batch_size"),
                       "found %s, expected a multiple of local_batch_size x the data-parallel degree%s",
                       gs_toml_find(x->t, "training.global_batch_size")->text, "");
    *micro = (uint64_t)local;
    if (d->pp > 1) {
        uint64_t n = pp_mbs ? pp_mbs : gs_toml_find(x->t, "parallelism.pipeline_parallel_degree") ? 0 : (uint64_t)d->pp;
        *micro = n ? (uint64_t)local / n : (uint64_t)mbsz;
        if (!*micro || (uint64_t)local % *micro)
            return gs_error_set(x->err, GS_ERR_INPUT,
                                "%s: a local batch of %" PRId64 " sequences does not split into pipeline micro-batches "
                                "of %" PRIu64,
                                x->path, local, *micro);
    }
    return GS_OK;
}

/* Precision, compile, optimizer and CPU offload. */
static gs_status tt_step_options(const tt *x, gs_scenario *s)
{
    static const char *const dtypes[] = {"bfloat16", "float32"};
    gs_status st;
    int param, reduce, compile, offload, early;
    if ((st = tt_enum(x, "training.mixed_precision_param", NULL, dtypes, 2, 0, "bfloat16 or float32", &param)) ||
        (st = tt_enum(x, "training.mixed_precision_reduce", NULL, dtypes, 2, 1, "bfloat16 or float32", &reduce)) ||
        (st = tt_bool(x, "compile.enable", "training.compile", 0, &compile)) ||
        (st = tt_bool(x, "training.enable_cpu_offload", NULL, 0, &offload)) ||
        (st = tt_bool(x, "optimizer.early_step_in_backward", NULL, 0, &early)))
        return st;
    s->strategy.precision = param == 0 ? GS_PREC_BF16 : GS_PREC_FP32;
    s->strategy.grad_dtype = reduce == 0 ? (int)GS_PREC_BF16 : (int)GS_PREC_FP32;
    const gs_toml_item *comp = gs_toml_find(x->t, "compile.components");
    int model = !comp;
    for (size_t i = 0; comp && i < comp->nitems; i++)
        model |= strcmp(comp->items[i], "model") == 0;
    s->strategy.compile = compile && model;
    const gs_toml_item *be = gs_toml_find(x->t, "compile.backend");
    if (be && compile && strcmp(be->text, "inductor") != 0)
        return tt_fail(x, be, "found '%s', expected inductor (%s)", be->text, "other backends' fusion is not modelled");
    if (offload)
        return tt_fail(x, gs_toml_find(x->t, "training.enable_cpu_offload"), "found true, expected false (%s)%s",
                       "FSDP2's CPUOffloadPolicy is not modelled", "");
    if (early)
        return tt_fail(x, gs_toml_find(x->t, "optimizer.early_step_in_backward"), "found true, expected false (%s)%s",
                       "the optimizer step inside the backward is not modelled", "");
    static const char *const opts[] = {"AdamW", "Adam"};
    int o;
    if ((st = tt_enum(x, "optimizer.name", NULL, opts, 2, 0, "AdamW or Adam (the states gridstep counts)", &o)))
        return st;
    s->strategy.flash_attention = 1;
    s->strategy.attention = GS_ATTN_SDPA;
    return GS_OK;
}

/* The options torchtitan takes as lists (a command line gives them comma-separated). */
static int tt_list_key(const char *key)
{
    static const char *const lists[] = {"model.converters", "compile.components", "float8.filter_fqns",
                                        "float8.moe_fqns", "quantize.linear.float8.filter_fqns"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (strcmp(key, lists[i]) == 0)
            return 1;
    return 0;
}

/* torchtitan's command-line overrides, `--section.key VALUE`, `--section.key=VALUE` or a bare
 * `--section.key` (true), over the file's values. */
static gs_status tt_overrides(gs_toml *t, const char *path, const char *const *args, size_t nargs, gs_error *err)
{
    for (size_t i = 0; i < nargs; i++) {
        const char *a = args[i];
        size_t at = i + 1; /* the option's argument number */
        char key[256];
        const char *value = "true", *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0 || strlen(a) < 3)
            return gs_error_set(err, GS_ERR_INPUT, "%s: argument %zu: found '%s', expected --section.key VALUE", path,
                                i + 1, a);
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof key)
            return gs_error_set(err, GS_ERR_INPUT, "%s: argument %zu: the option name is too long", path, i + 1);
        memcpy(key, a + 2, n);
        key[n] = '\0';
        for (char *c = key; *c; c++)
            if (*c == '-')
                *c = '_'; /* torchtitan's command line takes dashes for underscores */
        if (eq)
            value = eq + 1;
        else if (i + 1 < nargs && strncmp(args[i + 1], "--", 2) != 0)
            value = args[++i];
        gs_status st = gs_toml_set(t, key, value, tt_list_key(key), (unsigned)at, err);
        if (st != GS_OK)
            return st;
    }
    return GS_OK;
}

gs_status gs_import_torchtitan_string(const char *text, size_t len, const char *name, const gs_import_opts *o,
                                      gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    return gs_import_torchtitan_command(text, len, name, NULL, 0, o, s, ignored, err);
}

gs_status gs_import_torchtitan_command(const char *text, size_t len, const char *name, const char *const *args,
                                       size_t nargs, const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                       gs_error *err)
{
    const char *path = name ? name : "<torchtitan>";
    gs_toml t;
    gs_status st = gs__import_base(path, o, s, err);
    if (st != GS_OK)
        return st;
    if ((st = gs_toml_parse(text, len, path, &t, err)) != GS_OK)
        return st;
    tt x = {&t, path, err};
    if ((st = tt_overrides(&t, path, args, nargs, err)) != GS_OK)
        goto out;
    tt_dims d;
    uint64_t nodes = 0, pp_mbs = 0, micro = 0, global = 0;
    int64_t seq;
    if ((st = tt_check_keys(&x, ignored)) || (st = tt_model(&x, o, s)) ||
        (st = tt_int(&x, "training.seq_len", NULL, 2048, 1, &seq)))
        goto out;
    s->model.seq = (uint64_t)seq;
    if ((st = tt_degrees(&x, &d)) || (st = tt_world(&x, o, s, &d, &nodes)) || (st = tt_grid(&x, &d, s)) ||
        (st = tt_pipeline(&x, &d, s, &pp_mbs)) || (st = tt_batch(&x, &d, pp_mbs, &micro, &global)) ||
        (st = tt_recompute(&x, s)) || (st = tt_float8(&x, s)) || (st = tt_step_options(&x, s)))
        goto out;
    st = gs__import_finish(o, nodes, micro, global, s, err);
out:
    gs_toml_fini(&t);
    return st;
}

gs_status gs_import_torchtitan_file(const char *path, const char *const *args, size_t nargs, const gs_import_opts *o,
                                    gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK)
        st = gs_import_torchtitan_command(text, size, path, args, nargs, o, s, ignored, err);
    free(text);
    return st;
}
