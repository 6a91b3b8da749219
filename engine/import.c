/* Launch configurations read back as scenarios: accelerate config YAML and Megatron-LM flags,
 * every input field mapped or reported (engine/import.h). */
#include "engine/import.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/units.h"
#include "engine/yaml_doc.h"

/* Megatron-LM's default --make-vocab-size-divisible-by. */
#define IMPORT_MEGATRON_VOCAB_DIVISOR 128
/* Most flags one Megatron command may hold. */
#define IMPORT_MAX_WORDS 1024

void gs_import_opts_init(gs_import_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* ------------------------------------------------------------------------ common ---- */

static void base_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    const char *dot = strrchr(b, '.');
    if (dot && dot != b)
        n = (size_t)(dot - b);
    if (n >= len)
        n = len - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

/* The scenario before the input is read: defaults, the cluster preset, the model preset when
 * given; grid 1 x 1 x 1 in Megatron's order. */
static gs_status import_base(const char *origin, const gs_import_opts *o, gs_scenario *s,
                             gs_error *err)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", origin);
    base_name(origin, s->name, sizeof s->name);
    gs_strategy_defaults(&s->strategy);
    s->grid.dp = s->grid.pp = s->grid.tp = 1;
    s->grid.order[0] = GS_DIM_TP;
    s->grid.order[1] = GS_DIM_DP;
    s->grid.order[2] = GS_DIM_PP;
    if (!o->cluster)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--cluster is required with an imported config: the config does not "
                            "name the hardware (see gridstep presets clusters)");
    const gs_cluster *c = gs_cluster_preset_find(o->cluster);
    if (!c)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--cluster: found unknown cluster '%s' (did you mean '%s'?), expected "
                            "a preset from gridstep presets clusters",
                            o->cluster, gs_cluster_preset_nearest(o->cluster));
    s->cluster = *c;
    if (o->model) {
        const gs_model *m = gs_model_preset_find(o->model);
        if (!m)
            return gs_error_set(err, GS_ERR_INPUT,
                                "--model: found unknown model '%s' (did you mean '%s'?), expected "
                                "a preset from gridstep presets models",
                                o->model, gs_model_preset_nearest(o->model));
        s->model = *m;
    }
    return GS_OK;
}

/* Nodes, batch and the final checks of model and cluster. in_micro / in_global: the input's
 * batch (0 when it has none). */
static gs_status import_finish(const gs_import_opts *o, uint64_t nodes, uint64_t in_micro,
                               uint64_t in_global, gs_scenario *s, gs_error *err)
{
    gs_status st;
    s->cluster.nodes = nodes;
    if ((st = gs_cluster_validate(&s->cluster, err)) != GS_OK) {
        gs_error_prefix(err, "%s", s->path);
        return st;
    }
    if ((st = gs_model_validate(&s->model, err)) != GS_OK) {
        gs_error_prefix(err, "%s: model", s->path);
        return st;
    }
    s->batch.micro_seqs = o->micro_seqs ? o->micro_seqs : in_micro ? in_micro : 1;
    s->batch.global_seqs = o->global_seqs ? o->global_seqs : in_global;
    if (!s->batch.global_seqs &&
        gs_mul_u64(s->batch.micro_seqs, s->grid.dp, &s->batch.global_seqs) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW, "%s: micro x dp overflows", s->path);
    return GS_OK;
}

static gs_status note_ignored(gs_diag *ignored, gs_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gs_status note_ignored(gs_diag *ignored, gs_error *err, const char *fmt, ...)
{
    char msg[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (gs_diag_warn(ignored, "%s", msg) != GS_OK)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory listing ignored fields");
    return GS_OK;
}

/* -------------------------------------------------------------------- accelerate ---- */

/* A known key: mapped onto the scenario (ignore == NULL), ignored for the reason given, or
 * refused (refuse != NULL). */
typedef struct accel_key {
    const char *key;
    const char *ignore;
    const char *refuse;
} accel_key;

static const char no_effect[] = "no effect on the step";

static const accel_key accel_top[] = {
    {"compute_environment", NULL, NULL},
    {"distributed_type", NULL, NULL},
    {"fsdp_config", NULL, NULL},
    {"mixed_precision", NULL, NULL},
    {"num_machines", NULL, NULL},
    {"num_processes", NULL, NULL},
    {"use_cpu", NULL, NULL},
    {"debug", no_effect, NULL},
    {"downcast_bf16", "TPU only: no effect on the step", NULL},
    {"enable_cpu_affinity", no_effect, NULL},
    {"gpu_ids", "which GPUs of a node: no effect on the step", NULL},
    {"machine_rank", no_effect, NULL},
    {"main_process_ip", no_effect, NULL},
    {"main_process_port", no_effect, NULL},
    {"main_training_function", no_effect, NULL},
    {"rdzv_backend", no_effect, NULL},
    {"same_network", no_effect, NULL},
    {"num_cpu_threads_per_process", no_effect, NULL},
    {"tpu_env", "TPU only: no effect on the step", NULL},
    {"tpu_use_cluster", "TPU only: no effect on the step", NULL},
    {"tpu_use_sudo", "TPU only: no effect on the step", NULL},
    {"tpu_name", "TPU only: no effect on the step", NULL},
    {"tpu_zone", "TPU only: no effect on the step", NULL},
    {"commands", "TPU only: no effect on the step", NULL},
    {"command_file", "TPU only: no effect on the step", NULL},
    {"dynamo_config", "torch.compile is not modelled (kernels are timed by the roofline model)",
     NULL},
    {"deepspeed_config", NULL,
     "a DeepSpeed config is not imported: write a scenario with sharding zero1, zero2 or zero3"},
    {"megatron_lm_config", NULL,
     "accelerate's Megatron-LM plugin is not imported: give its flags to --from-megatron"},
    {"fp8_config", NULL, "FP8 training is not modelled (precision: bf16, fp16 or fp32)"},
    {"parallelism_config", NULL,
     "accelerate's ParallelismConfig (TP / context parallel with FSDP2) is not imported: give "
     "the grid as a scenario"},
    {"ipex_config", NULL, "Intel IPEX (CPU training) is not modelled"},
    {"mpirun_config", NULL, "CPU training over mpirun is not modelled"},
};

static const accel_key accel_fsdp[] = {
    {"fsdp_sharding_strategy", NULL, NULL},
    {"fsdp_auto_wrap_policy", NULL, NULL},
    {"fsdp_transformer_layer_cls_to_wrap", NULL, NULL},
    {"fsdp_min_num_params", NULL, NULL},
    {"fsdp_backward_prefetch", NULL, NULL},
    {"fsdp_backward_prefetch_policy", NULL, NULL},
    {"fsdp_forward_prefetch", NULL, NULL},
    {"fsdp_offload_params", NULL, NULL},
    {"fsdp_activation_checkpointing", NULL, NULL},
    {"fsdp_version", NULL, NULL},
    {"fsdp_reshard_after_forward", NULL, NULL},
    {"fsdp_state_dict_type", "checkpoint format: no effect on the step", NULL},
    {"fsdp_use_orig_params", no_effect, NULL},
    {"fsdp_sync_module_states", "initialization only: no effect on the step", NULL},
    {"fsdp_cpu_ram_efficient_loading", "model loading only: no effect on the step", NULL},
};

#define ACCEL_TOP_N (sizeof accel_top / sizeof accel_top[0])
#define ACCEL_FSDP_N (sizeof accel_fsdp / sizeof accel_fsdp[0])

/* Checks the keys of map against the table (unknown: error with a did-you-mean hint; duplicates;
 * refused keys), and reports the ignored ones present. */
static gs_status accel_keys(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                            const accel_key *keys, size_t n, gs_diag *ignored)
{
    const char *names[64];
    for (size_t i = 0; i < n; i++)
        names[i] = keys[i].key;
    gs_status st = gs__yaml_check_keys(l, map, section, names, n);
    int nested = strcmp(section, "fsdp_config") == 0; /* messages name fsdp_config.KEY */
    if (st != GS_OK)
        return st;
    /* in file order, so that the report follows the file */
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        size_t i = 0;
        while (i < n && strcmp(keys[i].key, gs__yaml_scalar_text(k)) != 0)
            i++;
        if (i == n)
            continue;
        if (keys[i].refuse)
            return gs__yaml_fail_at(l, k, GS_ERR_INPUT, "%s%s%s: %s", nested ? section : "",
                                    nested ? "." : "", keys[i].key, keys[i].refuse);
        if (keys[i].ignore &&
            (st = note_ignored(ignored, l->err, "%s:%lu: %s: ignored: %s", l->path,
                               gs__yaml_node_line(k), keys[i].key, keys[i].ignore)) != GS_OK)
            return st;
    }
    return GS_OK;
}

static const char *scalar_or_null(const yaml_node_t *v)
{
    return v && v->type == YAML_SCALAR_NODE && !gs__yaml_scalar_is_null(v) ? gs__yaml_scalar_text(v)
                                                                          : NULL;
}

static gs_status accel_bool(const gs__yaml_loader *l, const yaml_node_t *v, const char *key,
                            int *out)
{
    const char *t = scalar_or_null(v);
    if (t && (strcasecmp(t, "true") == 0 || strcasecmp(t, "yes") == 0)) {
        *out = 1;
        return GS_OK;
    }
    if (t && (strcasecmp(t, "false") == 0 || strcasecmp(t, "no") == 0)) {
        *out = 0;
        return GS_OK;
    }
    char found[96];
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected true or false", key,
                            gs__yaml_describe(v, found, sizeof found));
}

static gs_status accel_count(const gs__yaml_loader *l, const yaml_node_t *v, const char *key,
                             uint64_t *out)
{
    const char *t = scalar_or_null(v);
    if (t && gs_parse_count(t, out) == 0 && *out > 0)
        return GS_OK;
    char found[96];
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s, expected a positive integer", key,
                            gs__yaml_describe(v, found, sizeof found));
}

/* A name from `names` (case-insensitive); its index in *out. Unknown: error with a hint. */
static gs_status accel_enum(const gs__yaml_loader *l, const yaml_node_t *v, const char *key,
                            const char *const *names, size_t n, int *out)
{
    const char *t = scalar_or_null(v);
    char found[96], list[512], hint[96] = "";
    for (size_t i = 0; t && i < n; i++)
        if (strcasecmp(t, names[i]) == 0) {
            *out = (int)i;
            return GS_OK;
        }
    gs__yaml_join_names(names, n, list, sizeof list);
    if (t) {
        const char *near = gs__yaml_nearest_name(t, names, n);
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    }
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "%s: found %s%s, expected one of %s", key,
                            gs__yaml_describe(v, found, sizeof found), hint, list);
}

static gs_status accel_fsdp_config(const gs__yaml_loader *l, const yaml_node_t *fc, gs_scenario *s,
                                   gs_diag *ignored)
{
    static const char *const strategies[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD",
                                             "HYBRID_SHARD", "HYBRID_SHARD_ZERO2",
                                             "1", "2", "3", "4", "5"};
    static const gs_sharding strategy_map[] = {GS_SHARD_FULL_SHARD, GS_SHARD_GRAD_OP,
                                               GS_SHARD_NO_SHARD, GS_SHARD_HYBRID_SHARD};
    static const char *const policies[] = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"};
    static const char *const prefetches[] = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
    static const char *const versions[] = {"1", "2"};
    gs_strategy *st = &s->strategy;
    char found[96];
    gs_status rc;
    int e, reshard = -1, version = 1;
    yaml_node_t *v, *k;

    if (fc->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, fc, GS_ERR_INPUT,
                                "fsdp_config: found %s, expected a mapping of fsdp_* keys",
                                gs__yaml_describe(fc, found, sizeof found));
    if ((rc = accel_keys(l, fc, "fsdp_config", accel_fsdp, ACCEL_FSDP_N, ignored)) != GS_OK)
        return rc;
    if ((v = gs__yaml_lookup(l, fc, "fsdp_version", NULL))) {
        if ((rc = accel_enum(l, v, "fsdp_config.fsdp_version", versions, 2, &e)) != GS_OK)
            return rc;
        version = e + 1;
    }
    st->sharding = GS_SHARD_FULL_SHARD; /* accelerate's default */
    if ((v = gs__yaml_lookup(l, fc, "fsdp_sharding_strategy", NULL))) {
        if ((rc = accel_enum(l, v, "fsdp_config.fsdp_sharding_strategy", strategies, 10, &e)))
            return rc;
        if (e >= 5)
            e -= 5; /* the numeric form: 1 = FULL_SHARD ... */
        if (e == 4)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_sharding_strategy: found HYBRID_SHARD_ZERO2, "
                                    "which gridstep does not model: expected FULL_SHARD, "
                                    "SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD");
        st->sharding = strategy_map[e];
    }
    if ((v = gs__yaml_lookup(l, fc, "fsdp_reshard_after_forward", &k))) {
        if (version != 2)
            return gs__yaml_fail_at(l, k, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_reshard_after_forward: found it with "
                                    "fsdp_version 1, expected fsdp_version: 2 (FSDP1 ties "
                                    "resharding to fsdp_sharding_strategy)");
        if ((rc = accel_bool(l, v, "fsdp_config.fsdp_reshard_after_forward", &reshard)) != GS_OK)
            return rc;
        if (!gs__yaml_lookup(l, fc, "fsdp_sharding_strategy", NULL))
            st->sharding = reshard ? GS_SHARD_FULL_SHARD : GS_SHARD_GRAD_OP;
    }
    st->reshard_after_forward = reshard >= 0 ? reshard : gs_sharding_shards_params(st->sharding);

    e = 0;
    yaml_node_t *policy = gs__yaml_lookup(l, fc, "fsdp_auto_wrap_policy", NULL);
    if (policy && (rc = accel_enum(l, policy, "fsdp_config.fsdp_auto_wrap_policy", policies, 3,
                                   &e)) != GS_OK)
        return rc;
    yaml_node_t *cls_key = NULL, *min_key = NULL;
    yaml_node_t *cls = gs__yaml_lookup(l, fc, "fsdp_transformer_layer_cls_to_wrap", &cls_key);
    yaml_node_t *min = gs__yaml_lookup(l, fc, "fsdp_min_num_params", &min_key);
    if (e == 0) {
        st->wrap = GS_WRAP_LAYER;
        if (cls && !gs__yaml_is_text_scalar(cls) && cls->type != YAML_SEQUENCE_NODE)
            return gs__yaml_fail_at(l, cls, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_transformer_layer_cls_to_wrap: found %s, "
                                    "expected the decoder-layer class name (like "
                                    "LlamaDecoderLayer)",
                                    gs__yaml_describe(cls, found, sizeof found));
        if (min && (rc = note_ignored(ignored, l->err,
                                      "%s:%lu: fsdp_min_num_params: ignored: used by "
                                      "SIZE_BASED_WRAP only, the policy here is "
                                      "TRANSFORMER_BASED_WRAP",
                                      l->path, gs__yaml_node_line(min_key))) != GS_OK)
            return rc;
    } else {
        if (e == 1) {
            if (!min)
                return gs__yaml_fail_at(l, policy, GS_ERR_INPUT,
                                        "fsdp_config.fsdp_auto_wrap_policy: found SIZE_BASED_WRAP "
                                        "without fsdp_min_num_params, expected both");
            if ((rc = accel_count(l, min, "fsdp_config.fsdp_min_num_params",
                                  &st->wrap_min_params)) != GS_OK)
                return rc;
            st->wrap = GS_WRAP_MIN_PARAMS;
        } else {
            st->wrap = GS_WRAP_MODEL;
            if (min && (rc = note_ignored(ignored, l->err,
                                          "%s:%lu: fsdp_min_num_params: ignored: used by "
                                          "SIZE_BASED_WRAP only, the policy here is NO_WRAP",
                                          l->path, gs__yaml_node_line(min_key))) != GS_OK)
                return rc;
        }
        if (cls && (rc = note_ignored(ignored, l->err,
                                      "%s:%lu: fsdp_transformer_layer_cls_to_wrap: ignored: used "
                                      "by TRANSFORMER_BASED_WRAP only, the policy here is %s",
                                      l->path, gs__yaml_node_line(cls_key), policies[e])) != GS_OK)
            return rc;
    }

    yaml_node_t *bp = gs__yaml_lookup(l, fc, "fsdp_backward_prefetch", NULL);
    yaml_node_t *bp_old = gs__yaml_lookup(l, fc, "fsdp_backward_prefetch_policy", &k);
    if (bp && bp_old)
        return gs__yaml_fail_at(l, k, GS_ERR_INPUT,
                                "fsdp_config: found both fsdp_backward_prefetch and its old name "
                                "fsdp_backward_prefetch_policy, expected one");
    if (!bp)
        bp = bp_old;
    if (bp) {
        if ((rc = accel_enum(l, bp, "fsdp_config.fsdp_backward_prefetch", prefetches, 3, &e)))
            return rc;
        st->prefetch = e == 0 ? GS_PREFETCH_BACKWARD_PRE
                       : e == 1 ? GS_PREFETCH_BACKWARD_POST
                                : GS_PREFETCH_NONE;
    }
    int recompute = 0;
    if (((v = gs__yaml_lookup(l, fc, "fsdp_forward_prefetch", NULL)) &&
         (rc = accel_bool(l, v, "fsdp_config.fsdp_forward_prefetch", &st->forward_prefetch))) ||
        ((v = gs__yaml_lookup(l, fc, "fsdp_offload_params", NULL)) &&
         (rc = accel_bool(l, v, "fsdp_config.fsdp_offload_params", &st->offload))) ||
        ((v = gs__yaml_lookup(l, fc, "fsdp_activation_checkpointing", NULL)) &&
         (rc = accel_bool(l, v, "fsdp_config.fsdp_activation_checkpointing", &recompute))))
        return rc;
    st->recompute = recompute ? GS_RECOMPUTE_FULL : GS_RECOMPUTE_NONE;
    return GS_OK;
}

static gs_status accel_root(const gs__yaml_loader *l, const yaml_node_t *root,
                            const gs_import_opts *o, gs_scenario *s, gs_diag *ignored)
{
    static const char *const dist_types[] = {"FSDP", "MULTI_GPU", "NO", "DEEPSPEED",
                                             "MEGATRON_LM", "MULTI_CPU", "XLA", "TPU",
                                             "MULTI_NPU", "MULTI_XPU", "MULTI_MLU", "MULTI_MUSA"};
    static const char *const precisions[] = {"bf16", "fp16", "no", "fp8"};
    static const char *const environments[] = {"LOCAL_MACHINE", "AMAZON_SAGEMAKER"};
    char found[96];
    gs_status rc;
    int e;
    yaml_node_t *v, *k;

    if (root->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, root, GS_ERR_INPUT,
                                "accelerate config: found %s at the top level, expected a mapping "
                                "(distributed_type, fsdp_config, num_processes, ...)",
                                gs__yaml_describe(root, found, sizeof found));
    if ((rc = accel_keys(l, root, "accelerate config", accel_top, ACCEL_TOP_N, ignored)) != GS_OK)
        return rc;
    if ((v = gs__yaml_lookup(l, root, "compute_environment", NULL))) {
        if ((rc = accel_enum(l, v, "compute_environment", environments, 2, &e)) != GS_OK)
            return rc;
        if (e != 0)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "compute_environment: found AMAZON_SAGEMAKER, expected "
                                    "LOCAL_MACHINE (the cluster comes from --cluster)");
    }
    int use_cpu = 0;
    if ((v = gs__yaml_lookup(l, root, "use_cpu", NULL)) &&
        (rc = accel_bool(l, v, "use_cpu", &use_cpu)) != GS_OK)
        return rc;
    if (use_cpu)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "use_cpu: found true, expected false (gridstep models GPU training)");
    v = gs__yaml_lookup(l, root, "distributed_type", &k);
    if (!v)
        return gs__yaml_fail_at(l, root, GS_ERR_INPUT,
                                "accelerate config: no distributed_type, expected distributed_type: "
                                "FSDP (or MULTI_GPU for DDP)");
    if ((rc = accel_enum(l, v, "distributed_type", dist_types, 12, &e)) != GS_OK)
        return rc;
    int dist = e;
    const yaml_node_t *dist_node = v;
    yaml_node_t *fc_key = NULL;
    yaml_node_t *fc = gs__yaml_lookup(l, root, "fsdp_config", &fc_key);
    if (e >= 3)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "distributed_type: found %s, expected FSDP, MULTI_GPU or NO: %s",
                                dist_types[e],
                                e == 3   ? "DeepSpeed configs are not imported (write a scenario "
                                           "with sharding zero1, zero2 or zero3)"
                                : e == 4 ? "give Megatron-LM's flags to --from-megatron"
                                         : "gridstep models NVIDIA GPU training");
    if (e == 0) {
        if (!fc)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "distributed_type: found FSDP without fsdp_config, expected "
                                    "an fsdp_config mapping (fsdp_sharding_strategy, ...)");
        if ((rc = accel_fsdp_config(l, fc, s, ignored)) != GS_OK)
            return rc;
    } else {
        if (fc)
            return gs__yaml_fail_at(l, fc_key, GS_ERR_INPUT,
                                    "fsdp_config: found it with distributed_type %s, expected "
                                    "distributed_type: FSDP",
                                    dist_types[e]);
        /* DDP: replicated parameters, gradients all-reduced in buckets */
        s->strategy.sharding = GS_SHARD_NO_SHARD;
        s->strategy.reshard_after_forward = 0;
    }
    if ((v = gs__yaml_lookup(l, root, "mixed_precision", NULL))) {
        if ((rc = accel_enum(l, v, "mixed_precision", precisions, 4, &e)) != GS_OK)
            return rc;
        if (e == 3)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "mixed_precision: found fp8, which gridstep does not model: "
                                    "expected bf16, fp16 or no");
        s->strategy.precision = e == 0 ? GS_PREC_BF16 : e == 1 ? GS_PREC_FP16 : GS_PREC_FP32;
    } else {
        s->strategy.precision = GS_PREC_FP32; /* accelerate's default: no mixed precision */
    }

    uint64_t nodes = 1, procs = 0, gpn = s->cluster.gpus_per_node;
    yaml_node_t *nm = gs__yaml_lookup(l, root, "num_machines", NULL);
    yaml_node_t *np = gs__yaml_lookup(l, root, "num_processes", NULL);
    if (nm && (rc = accel_count(l, nm, "num_machines", &nodes)) != GS_OK)
        return rc;
    if (np && (rc = accel_count(l, np, "num_processes", &procs)) != GS_OK)
        return rc;
    if (o->nodes) {
        if (nm && nodes != o->nodes)
            return gs__yaml_fail_at(l, nm, GS_ERR_INPUT,
                                    "num_machines: found %" PRIu64 " and --nodes %" PRIu64
                                    ", expected them equal (or leave --nodes out)",
                                    nodes, o->nodes);
        nodes = o->nodes;
    }
    uint64_t world;
    if (gs_mul_u64(nodes, gpn, &world) != 0)
        return gs__yaml_fail_at(l, nm, GS_ERR_OVERFLOW, "num_machines: %" PRIu64 " is too many",
                                nodes);
    if (np && procs != world)
        return gs__yaml_fail_at(l, np, GS_ERR_INPUT,
                                "num_processes: found %" PRIu64 ", expected %" PRIu64 " = %" PRIu64
                                " machine%s x %" PRIu64 " GPUs per node of cluster %s (gridstep "
                                "runs one process per GPU of every node)",
                                procs, world, nodes, nodes == 1 ? "" : "s", gpn, s->cluster.name);
    if (!nm && !o->nodes && np && procs % gpn == 0)
        nodes = procs / gpn, world = procs;
    if (dist == 2 && world != 1)
        return gs__yaml_fail_at(l, dist_node, GS_ERR_INPUT,
                                "distributed_type: found NO (one process), expected FSDP or "
                                "MULTI_GPU: cluster %s runs %" PRIu64 " GPUs and gridstep places "
                                "one process on each",
                                s->cluster.name, world);
    s->grid.dp = world;
    return import_finish(o, nodes, 0, 0, s, l->err);
}

/* Puts ignored->warnings[first..] ("PATH:LINE: ...") in line order (a stable insertion sort),
 * so that the report follows the file. */
static void sort_by_line(gs_diag *ignored, size_t first, const char *path)
{
    size_t skip = strlen(path) + 1;
    for (size_t i = first + 1; ignored && i < ignored->count; i++)
        for (size_t j = i; j > first; j--) {
            char *a = ignored->warnings[j - 1], *b = ignored->warnings[j];
            if (strtoul(a + skip, NULL, 10) <= strtoul(b + skip, NULL, 10))
                break;
            ignored->warnings[j - 1] = b;
            ignored->warnings[j] = a;
        }
}

gs_status gs_import_accelerate_string(const char *text, size_t len, const char *name,
                                      const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                      gs_error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int loaded = 0;
    const char *path = name ? name : "<accelerate>";
    gs__yaml_loader l = {path, &doc, err};
    gs_status st = import_base(path, o, s, err);
    if (st != GS_OK)
        goto out;
    if (!o->model) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: --model is required with --from-accelerate: an accelerate config "
                          "does not describe the model",
                          path);
        goto out;
    }
    st = gs__yaml_load_first(&l, &parser, text, len);
    if (st != GS_OK)
        goto out;
    loaded = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: empty accelerate config: found no YAML document, expected a "
                          "mapping with distributed_type and fsdp_config",
                          path);
        goto out;
    }
    size_t first = ignored ? ignored->count : 0;
    st = accel_root(&l, root, o, s, ignored);
    sort_by_line(ignored, first, path);
out:
    if (loaded) {
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
    }
    return st;
}

gs_status gs_import_accelerate_file(const char *path, const gs_import_opts *o, gs_scenario *s,
                                    gs_diag *ignored, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK)
        st = gs_import_accelerate_string(text, size, path, o, s, ignored, err);
    free(text);
    return st;
}

/* ---------------------------------------------------------------------- Megatron ---- */

/* What a flag does to the scenario. */
typedef enum mg_act {
    MG_IGNORE, MG_REFUSE, MG_TP, MG_PP, MG_DP, MG_CP, MG_EP, MG_VPP_LAYERS, MG_VPP_STAGES, MG_SP,
    MG_TPPPDP, MG_MBS, MG_GBS, MG_REC_GRAN, MG_REC_METHOD, MG_REC_NLAYERS, MG_REC_ACT,
    MG_DIST_OPT, MG_CUSTOM_FSDP, MG_DP_SHARD, MG_TORCH_FSDP2, MG_BF16, MG_FP16, MG_LAYERS,
    MG_HIDDEN, MG_HEADS, MG_GQA, MG_GROUPS, MG_FFN, MG_SEQ, MG_MAXPOS, MG_VOCAB, MG_VOCAB_DIV,
    MG_KV_CH, MG_SWIGLU, MG_UNTIE, MG_NORM, MG_POSEMB, MG_NO_POSEMB, MG_ROPE, MG_NO_BIAS,
    MG_ATT_DROP, MG_HID_DROP, MG_ATT_BACKEND, MG_FLASH, MG_OPTIMIZER, MG_ACT_COUNT
} mg_act;

/* Values a flag takes. */
enum { MG_SWITCH = 0, MG_ONE = 1, MG_MANY = 2 };

typedef struct mg_flag {
    const char *name; /* without the leading -- */
    int values;       /* MG_SWITCH, MG_ONE or MG_MANY (up to the next --flag) */
    mg_act act;
    const char *why;  /* MG_IGNORE / MG_REFUSE: the reason */
} mg_flag;

static const char mg_train[] = "training-loop setting: no effect on the step";
static const char mg_io[] = "data, checkpoint or logging setting: no effect on the step";
static const char mg_fusion[] = "kernel fusion is not modelled (kernels are timed by the roofline "
                                "model)";
static const char mg_uneven[] = "uneven pipeline splits are not modelled (gridstep splits the "
                                "layers evenly)";

static const mg_flag mg_flags[] = {
    {"tensor-model-parallel-size", MG_ONE, MG_TP, NULL},
    {"pipeline-model-parallel-size", MG_ONE, MG_PP, NULL},
    {"data-parallel-size", MG_ONE, MG_DP, NULL},
    {"context-parallel-size", MG_ONE, MG_CP, NULL},
    {"expert-model-parallel-size", MG_ONE, MG_EP, NULL},
    {"num-layers-per-virtual-pipeline-stage", MG_ONE, MG_VPP_LAYERS, NULL},
    {"num-virtual-stages-per-pipeline-rank", MG_ONE, MG_VPP_STAGES, NULL},
    {"sequence-parallel", MG_SWITCH, MG_SP, NULL},
    {"use-tp-pp-dp-mapping", MG_SWITCH, MG_TPPPDP, NULL},
    {"micro-batch-size", MG_ONE, MG_MBS, NULL},
    {"global-batch-size", MG_ONE, MG_GBS, NULL},
    {"recompute-granularity", MG_ONE, MG_REC_GRAN, NULL},
    {"recompute-method", MG_ONE, MG_REC_METHOD, NULL},
    {"recompute-num-layers", MG_ONE, MG_REC_NLAYERS, NULL},
    {"recompute-activations", MG_SWITCH, MG_REC_ACT, NULL},
    {"use-distributed-optimizer", MG_SWITCH, MG_DIST_OPT, NULL},
    {"use-custom-fsdp", MG_SWITCH, MG_CUSTOM_FSDP, NULL},
    {"use-megatron-fsdp", MG_SWITCH, MG_CUSTOM_FSDP, NULL},
    {"data-parallel-sharding-strategy", MG_ONE, MG_DP_SHARD, NULL},
    {"use-torch-fsdp2", MG_SWITCH, MG_TORCH_FSDP2, NULL},
    {"bf16", MG_SWITCH, MG_BF16, NULL},
    {"fp16", MG_SWITCH, MG_FP16, NULL},
    {"num-layers", MG_ONE, MG_LAYERS, NULL},
    {"hidden-size", MG_ONE, MG_HIDDEN, NULL},
    {"num-attention-heads", MG_ONE, MG_HEADS, NULL},
    {"group-query-attention", MG_SWITCH, MG_GQA, NULL},
    {"num-query-groups", MG_ONE, MG_GROUPS, NULL},
    {"ffn-hidden-size", MG_ONE, MG_FFN, NULL},
    {"seq-length", MG_ONE, MG_SEQ, NULL},
    {"max-position-embeddings", MG_ONE, MG_MAXPOS, NULL},
    {"vocab-size", MG_ONE, MG_VOCAB, NULL},
    {"make-vocab-size-divisible-by", MG_ONE, MG_VOCAB_DIV, NULL},
    {"kv-channels", MG_ONE, MG_KV_CH, NULL},
    {"swiglu", MG_SWITCH, MG_SWIGLU, NULL},
    {"untie-embeddings-and-output-weights", MG_SWITCH, MG_UNTIE, NULL},
    {"normalization", MG_ONE, MG_NORM, NULL},
    {"position-embedding-type", MG_ONE, MG_POSEMB, NULL},
    {"no-position-embedding", MG_SWITCH, MG_NO_POSEMB, NULL},
    {"use-rotary-position-embeddings", MG_SWITCH, MG_ROPE, NULL},
    {"disable-bias-linear", MG_SWITCH, MG_NO_BIAS, NULL},
    {"attention-dropout", MG_ONE, MG_ATT_DROP, NULL},
    {"hidden-dropout", MG_ONE, MG_HID_DROP, NULL},
    {"attention-backend", MG_ONE, MG_ATT_BACKEND, NULL},
    {"use-flash-attn", MG_SWITCH, MG_FLASH, NULL},
    {"optimizer", MG_ONE, MG_OPTIMIZER, NULL},
    {"overlap-grad-reduce", MG_SWITCH, MG_IGNORE,
     "the schedule already overlaps bucketed gradient reduction with backward"},
    {"overlap-param-gather", MG_SWITCH, MG_IGNORE,
     "the schedule already overlaps parameter all-gathers with compute"},
    {"no-gradient-accumulation-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-masked-softmax-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-gelu-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-swiglu-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-dropout-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-rope-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"accumulate-allreduce-grads-in-fp32", MG_SWITCH, MG_IGNORE,
     "gridstep reduces gradients in the training precision"},
    {"attention-softmax-in-fp32", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"use-mcore-models", MG_SWITCH, MG_IGNORE, "model implementation choice: no effect on the step"},
    {"transformer-impl", MG_ONE, MG_IGNORE, "model implementation choice: no effect on the step"},
    {"ddp-bucket-size", MG_ONE, MG_IGNORE,
     "gridstep's DDP bucket is strategy.bucket_mb (write a scenario to change it)"},
    {"norm-epsilon", MG_ONE, MG_IGNORE, "numerics only: no effect on the step"},
    {"rotary-base", MG_ONE, MG_IGNORE, "numerics only: no effect on the step"},
    {"rotary-percent", MG_ONE, MG_IGNORE, "numerics only: no effect on the step"},
    {"init-method-std", MG_ONE, MG_IGNORE, mg_train},
    {"lr", MG_ONE, MG_IGNORE, mg_train},
    {"min-lr", MG_ONE, MG_IGNORE, mg_train},
    {"lr-decay-style", MG_ONE, MG_IGNORE, mg_train},
    {"lr-decay-iters", MG_ONE, MG_IGNORE, mg_train},
    {"lr-decay-samples", MG_ONE, MG_IGNORE, mg_train},
    {"lr-warmup-iters", MG_ONE, MG_IGNORE, mg_train},
    {"lr-warmup-fraction", MG_ONE, MG_IGNORE, mg_train},
    {"lr-warmup-samples", MG_ONE, MG_IGNORE, mg_train},
    {"train-iters", MG_ONE, MG_IGNORE, mg_train},
    {"train-samples", MG_ONE, MG_IGNORE, mg_train},
    {"weight-decay", MG_ONE, MG_IGNORE, mg_train},
    {"clip-grad", MG_ONE, MG_IGNORE, mg_train},
    {"adam-beta1", MG_ONE, MG_IGNORE, mg_train},
    {"adam-beta2", MG_ONE, MG_IGNORE, mg_train},
    {"adam-eps", MG_ONE, MG_IGNORE, mg_train},
    {"seed", MG_ONE, MG_IGNORE, mg_train},
    {"save", MG_ONE, MG_IGNORE, mg_io},
    {"load", MG_ONE, MG_IGNORE, mg_io},
    {"save-interval", MG_ONE, MG_IGNORE, mg_io},
    {"ckpt-format", MG_ONE, MG_IGNORE, mg_io},
    {"no-load-optim", MG_SWITCH, MG_IGNORE, mg_io},
    {"no-load-rng", MG_SWITCH, MG_IGNORE, mg_io},
    {"data-path", MG_MANY, MG_IGNORE, mg_io},
    {"train-data-path", MG_MANY, MG_IGNORE, mg_io},
    {"valid-data-path", MG_MANY, MG_IGNORE, mg_io},
    {"test-data-path", MG_MANY, MG_IGNORE, mg_io},
    {"data-cache-path", MG_ONE, MG_IGNORE, mg_io},
    {"mock-data", MG_SWITCH, MG_IGNORE, mg_io},
    {"split", MG_ONE, MG_IGNORE, mg_io},
    {"num-workers", MG_ONE, MG_IGNORE, mg_io},
    {"tokenizer-type", MG_ONE, MG_IGNORE, mg_io},
    {"tokenizer-model", MG_ONE, MG_IGNORE, mg_io},
    {"vocab-file", MG_ONE, MG_IGNORE, mg_io},
    {"merge-file", MG_ONE, MG_IGNORE, mg_io},
    {"log-interval", MG_ONE, MG_IGNORE, mg_io},
    {"log-throughput", MG_SWITCH, MG_IGNORE, mg_io},
    {"eval-interval", MG_ONE, MG_IGNORE, mg_io},
    {"eval-iters", MG_ONE, MG_IGNORE, mg_io},
    {"exit-interval", MG_ONE, MG_IGNORE, mg_io},
    {"tensorboard-dir", MG_ONE, MG_IGNORE, mg_io},
    {"wandb-project", MG_ONE, MG_IGNORE, mg_io},
    {"wandb-exp-name", MG_ONE, MG_IGNORE, mg_io},
    {"distributed-backend", MG_ONE, MG_IGNORE, "NCCL is what gridstep models"},
    {"distributed-timeout-minutes", MG_ONE, MG_IGNORE, mg_io},
    {"num-experts", MG_ONE, MG_REFUSE, "mixture-of-experts models are not modelled"},
    {"fp8-format", MG_ONE, MG_REFUSE, "FP8 training is not modelled (--bf16 or --fp16)"},
    {"optimizer-cpu-offload", MG_SWITCH, MG_REFUSE,
     "gridstep's offload moves parameters and optimizer state together (write a scenario with "
     "offload: true and an FSDP strategy)"},
    {"decoder-first-pipeline-num-layers", MG_ONE, MG_REFUSE, mg_uneven},
    {"decoder-last-pipeline-num-layers", MG_ONE, MG_REFUSE, mg_uneven},
    {"account-for-embedding-in-pipeline-split", MG_SWITCH, MG_REFUSE, mg_uneven},
    {"account-for-loss-in-pipeline-split", MG_SWITCH, MG_REFUSE, mg_uneven},
};

#define MG_NFLAGS (sizeof mg_flags / sizeof mg_flags[0])

/* One shell word and the line it starts on (1-based). */
typedef struct mg_word {
    const char *text;
    unsigned line;
} mg_word;

/* The words of a command: owned copies in `store`. */
typedef struct mg_words {
    mg_word w[IMPORT_MAX_WORDS];
    size_t n;
    char *store;
} mg_words;

/* Where word i is, for messages: "PATH:LINE" or "--from-megatron: argument N". */
static const char *mg_where(const char *origin, const mg_words *ws, size_t i, char *buf, size_t len)
{
    if (origin)
        snprintf(buf, len, "%s:%u", origin, i < ws->n ? ws->w[i].line : 0u);
    else
        snprintf(buf, len, "--from-megatron: argument %zu", i + 1);
    return buf;
}

/* Splits text as a POSIX shell would split one command: blanks, 'single' and "double" quotes,
 * backslash escapes and line continuations, # comments at the start of a word. */
static gs_status mg_split(const char *text, const char *origin, mg_words *ws, gs_error *err)
{
    const char *who = origin ? origin : "--from-megatron";
    size_t len = strlen(text);
    ws->n = 0;
    ws->store = malloc(len + 1);
    if (!ws->store)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory splitting the Megatron-LM flags");
    char *out = ws->store;
    const char *p = text;
    unsigned line = 1;
    while (*p) {
        if (*p == '\n') {
            line++, p++;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\r') {
            p++;
            continue;
        }
        if (p[0] == '\\' && p[1] == '\n') {
            line++, p += 2;
            continue;
        }
        if (*p == '#') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (ws->n == IMPORT_MAX_WORDS)
            return gs_error_set(err, GS_ERR_INPUT, "%s:%u: more than %d words, expected one command",
                                who, line, IMPORT_MAX_WORDS);
        ws->w[ws->n].text = out;
        ws->w[ws->n].line = line;
        unsigned start = line;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            if (p[0] == '\\' && p[1] == '\n') {
                line++, p += 2;
            } else if (p[0] == '\\' && p[1]) {
                *out++ = p[1];
                p += 2;
            } else if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p && *p != q) {
                    if (q == '"' && p[0] == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    if (*p == '\n')
                        line++;
                    *out++ = *p++;
                }
                if (!*p)
                    return gs_error_set(err, GS_ERR_INPUT,
                                        "%s:%u: found an unterminated %s quote, expected its "
                                        "closing %c",
                                        who, start, q == '"' ? "double" : "single", q);
                p++;
            } else {
                *out++ = *p++;
            }
        }
        *out++ = '\0';
        ws->n++;
    }
    return GS_OK;
}

static const mg_flag *mg_find(const char *name, size_t n)
{
    for (size_t i = 0; i < MG_NFLAGS; i++)
        if (strlen(mg_flags[i].name) == n && strncmp(mg_flags[i].name, name, n) == 0)
            return &mg_flags[i];
    return NULL;
}

/* What the flags said; 0 / -1 = not given. */
typedef struct mg_state {
    uint64_t u[MG_ACT_COUNT];   /* numeric values by action */
    const char *str[MG_ACT_COUNT]; /* text values by action */
    int given[MG_ACT_COUNT];    /* 1 when the flag appeared */
    size_t at[MG_ACT_COUNT];    /* word index of the flag, for messages */
} mg_state;

static gs_status mg_count(const char *where, const char *flag, const char *v, uint64_t *out,
                          int allow_zero, gs_error *err)
{
    if (gs_parse_count(v, out) == 0 && (allow_zero || *out > 0))
        return GS_OK;
    return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found '%s', expected a %s integer", where,
                        flag, v, allow_zero ? "non-negative" : "positive");
}

/* A name from a list (case-insensitive) -> its index; else an error with a hint. */
static gs_status mg_choice(const char *where, const char *flag, const char *v,
                           const char *const *names, size_t n, int *out, gs_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(v, names[i]) == 0) {
            *out = (int)i;
            return GS_OK;
        }
    char list[256], hint[96] = "";
    gs__yaml_join_names(names, n, list, sizeof list);
    const char *near = gs__yaml_nearest_name(v, names, n);
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found '%s'%s, expected one of %s", where,
                        flag, v, hint, list);
}

/* Reads the launcher prefix (words [0, end)): torchrun's --nnodes and --nproc_per_node. */
static gs_status mg_launcher(const char *origin, const mg_words *ws, size_t end, uint64_t *nnodes,
                             uint64_t *nproc, size_t *nproc_at, gs_diag *ignored, gs_error *err)
{
    char where[600];
    for (size_t i = 0; i < end; i++) {
        const char *t = ws->w[i].text;
        uint64_t *dst = NULL;
        size_t n = 0;
        if (strncmp(t, "--nnodes", 8) == 0)
            dst = nnodes, n = 8;
        else if (strncmp(t, "--nproc_per_node", 16) == 0 || strncmp(t, "--nproc-per-node", 16) == 0)
            dst = nproc, n = 16;
        if (!dst || (t[n] != '\0' && t[n] != '='))
            continue;
        if (dst == nproc)
            *nproc_at = i;
        const char *v = t[n] == '=' ? t + n + 1 : i + 1 < end ? ws->w[++i].text : "";
        mg_where(origin, ws, i, where, sizeof where);
        if (gs_parse_count(v, dst) != 0 || *dst == 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: launcher %.*s: found '%s', expected a positive integer "
                                "(elastic MIN:MAX ranges are not modelled)",
                                where, (int)n, t, v);
    }
    if (end > 0)
        return note_ignored(ignored, err,
                            "%s: launcher '%s ... %s': ignored but for --nnodes and "
                            "--nproc_per_node: no effect on the step",
                            mg_where(origin, ws, 0, where, sizeof where), ws->w[0].text,
                            ws->w[end].text);
    return GS_OK;
}

/* Parses the flags of words [first, n) into st. */
static gs_status mg_parse(const char *origin, const mg_words *ws, size_t first, mg_state *st,
                          gs_diag *ignored, gs_error *err)
{
    char where[600];
    const char *names[MG_NFLAGS];
    for (size_t i = 0; i < MG_NFLAGS; i++)
        names[i] = mg_flags[i].name;
    for (size_t i = first; i < ws->n; i++) {
        const char *t = ws->w[i].text;
        size_t at = i;
        mg_where(origin, ws, i, where, sizeof where);
        if (strncmp(t, "--", 2) != 0 || !t[2])
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: found '%s', expected a --flag (a value follows its flag)",
                                where, t);
        const char *name = t + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const mg_flag *f = mg_find(name, nlen);
        if (!f) {
            char bare[128], hint[160] = "";
            snprintf(bare, sizeof bare, "%.*s", (int)(nlen < 120 ? nlen : 120), name);
            const char *near = gs__yaml_nearest_name(bare, names, MG_NFLAGS);
            if (near)
                snprintf(hint, sizeof hint, " (did you mean '--%s'?)", near);
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: found unknown flag '--%s'%s, expected a Megatron-LM flag "
                                "gridstep maps or knows to ignore (see gridstep help sim)",
                                where, bare, hint);
        }
        const char *value = NULL;
        if (f->values == MG_SWITCH) {
            if (eq)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "%s: --%s: found a value '%s', expected none (a switch)",
                                    where, f->name, eq + 1);
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < ws->n && strncmp(ws->w[i + 1].text, "--", 2) != 0) {
            value = ws->w[++i].text;
            if (f->values == MG_MANY)
                while (i + 1 < ws->n && strncmp(ws->w[i + 1].text, "--", 2) != 0)
                    i++;
        } else {
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found no value, expected one",
                                where, f->name);
        }
        gs_status rc;
        switch (f->act) {
        case MG_IGNORE:
            if ((rc = note_ignored(ignored, err, "%s: --%s: ignored: %s", where, f->name,
                                   f->why)) != GS_OK)
                return rc;
            continue;
        case MG_REFUSE:
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: not supported: %s", where, f->name,
                                f->why);
        default:
            break;
        }
        st->given[f->act] = 1;
        st->at[f->act] = at;
        st->str[f->act] = value;
        switch (f->act) {
        case MG_TP: case MG_PP: case MG_DP: case MG_CP: case MG_EP: case MG_VPP_LAYERS:
        case MG_VPP_STAGES: case MG_MBS: case MG_GBS: case MG_REC_NLAYERS: case MG_LAYERS:
        case MG_HIDDEN: case MG_HEADS: case MG_GROUPS: case MG_FFN: case MG_SEQ: case MG_MAXPOS:
        case MG_VOCAB: case MG_VOCAB_DIV: case MG_KV_CH:
            if ((rc = mg_count(where, f->name, value, &st->u[f->act], 0, err)) != GS_OK)
                return rc;
            break;
        default:
            break;
        }
    }
    return GS_OK;
}

/* The index of the first *.py word (the training script), or n when there is none. */
static size_t mg_script_index(const mg_words *ws)
{
    for (size_t i = 0; i < ws->n; i++) {
        size_t l = strlen(ws->w[i].text);
        if (l > 3 && strcmp(ws->w[i].text + l - 3, ".py") == 0)
            return i;
    }
    return ws->n;
}

/* The model: from the shape flags when given, else the --model preset. */
static gs_status mg_model(const char *origin, const mg_words *ws, const mg_state *st,
                          const gs_import_opts *o, uint64_t tp, gs_scenario *s, gs_diag *ignored,
                          gs_error *err)
{
    static const mg_act arch[] = {MG_GQA, MG_GROUPS, MG_FFN, MG_VOCAB, MG_VOCAB_DIV, MG_KV_CH,
                                  MG_SWIGLU, MG_UNTIE, MG_NORM, MG_POSEMB, MG_NO_POSEMB, MG_ROPE,
                                  MG_NO_BIAS, MG_ATT_DROP, MG_HID_DROP, MG_MAXPOS};
    char where[600];
    gs_model *m = &s->model;
    int shape = st->given[MG_LAYERS] || st->given[MG_HIDDEN] || st->given[MG_HEADS];
    gs_status rc;
    if (!shape) {
        if (!o->model)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: no model: found neither --model nor --num-layers, "
                                "--hidden-size and --num-attention-heads, expected one of them",
                                origin ? origin : "--from-megatron");
        for (size_t i = 0; i < sizeof arch / sizeof arch[0]; i++)
            if (st->given[arch[i]] &&
                (rc = note_ignored(ignored, err,
                                   "%s: %s: ignored: the model is --model %s (no "
                                   "--num-layers/--hidden-size/--num-attention-heads)",
                                   mg_where(origin, ws, st->at[arch[i]], where, sizeof where),
                                   ws->w[st->at[arch[i]]].text, m->name)) != GS_OK)
                return rc;
        if (st->given[MG_SEQ])
            m->seq = st->u[MG_SEQ];
        return GS_OK;
    }
    static const mg_act need[] = {MG_LAYERS, MG_HIDDEN, MG_HEADS};
    static const char *const need_names[] = {"--num-layers", "--hidden-size",
                                             "--num-attention-heads"};
    for (int i = 0; i < 3; i++)
        if (!st->given[need[i]]) {
            size_t at = st->given[MG_LAYERS] ? st->at[MG_LAYERS]
                        : st->given[MG_HIDDEN] ? st->at[MG_HIDDEN] : st->at[MG_HEADS];
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: model shape: found no %s, expected --num-layers, "
                                "--hidden-size and --num-attention-heads together",
                                mg_where(origin, ws, at, where, sizeof where), need_names[i]);
        }
    uint64_t preset_vocab = o->model ? m->vocab : 0, preset_seq = o->model ? m->seq : 0;
    char name[GS_MODEL_NAME_BYTES];
    snprintf(name, sizeof name, "%s", o->model ? m->name : "megatron");
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->layers = st->u[MG_LAYERS];
    m->hidden = st->u[MG_HIDDEN];
    m->heads = st->u[MG_HEADS];
    m->kv_heads = m->heads;
    if (st->given[MG_GROUPS]) {
        if (st->given[MG_GQA])
            m->kv_heads = st->u[MG_GROUPS];
        else if ((rc = note_ignored(ignored, err,
                                    "%s: --num-query-groups: ignored: Megatron-LM uses it only "
                                    "with --group-query-attention",
                                    mg_where(origin, ws, st->at[MG_GROUPS], where,
                                             sizeof where))) != GS_OK)
            return rc;
    }
    m->head_dim = st->given[MG_KV_CH] ? st->u[MG_KV_CH] : 0;
    m->mlp = st->given[MG_SWIGLU] ? GS_MLP_SWIGLU : GS_MLP_GELU;
    if (st->given[MG_FFN])
        m->ffn = st->u[MG_FFN];
    else if (m->mlp == GS_MLP_SWIGLU)
        m->ffn = 4 * m->hidden * 2 / 3 / 64 * 64; /* Megatron-LM's SwiGLU default */
    else
        m->ffn = 4 * m->hidden;
    m->seq = st->given[MG_SEQ] ? st->u[MG_SEQ] : preset_seq;
    if (!m->seq)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: no --seq-length: expected --seq-length N (or --model M for its "
                            "sequence length)",
                            origin ? origin : "--from-megatron");
    uint64_t vocab = st->given[MG_VOCAB] ? st->u[MG_VOCAB] : preset_vocab;
    if (!vocab)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: no --vocab-size: Megatron-LM takes it from the tokenizer, "
                            "expected --vocab-size N (or --model M for its vocabulary)",
                            origin ? origin : "--from-megatron");
    uint64_t div = st->given[MG_VOCAB_DIV] ? st->u[MG_VOCAB_DIV] : IMPORT_MEGATRON_VOCAB_DIVISOR;
    uint64_t multiple = div * tp; /* Megatron-LM pads the vocabulary to this */
    m->vocab = (vocab + multiple - 1) / multiple * multiple;
    m->tied_embeddings = !st->given[MG_UNTIE];
    m->bias = !st->given[MG_NO_BIAS];
    int drop_off = st->given[MG_ATT_DROP] && st->given[MG_HID_DROP] &&
                   strtod(st->str[MG_ATT_DROP], NULL) == 0.0 &&
                   strtod(st->str[MG_HID_DROP], NULL) == 0.0;
    m->dropout = !drop_off;
    m->norm = GS_NORM_LAYERNORM;
    if (st->given[MG_NORM]) {
        static const char *const norms[] = {"LayerNorm", "RMSNorm"};
        int e = 0;
        if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_NORM], where, sizeof where),
                            "normalization", st->str[MG_NORM], norms, 2, &e, err)) != GS_OK)
            return rc;
        m->norm = e == 1 ? GS_NORM_RMSNORM : GS_NORM_LAYERNORM;
    }
    m->pos = GS_POS_LEARNED;
    if (st->given[MG_POSEMB]) {
        static const char *const kinds[] = {"learned_absolute", "rope", "none"};
        int e = 0;
        if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_POSEMB], where, sizeof where),
                            "position-embedding-type", st->str[MG_POSEMB], kinds, 3, &e, err)))
            return rc;
        m->pos = e == 0 ? GS_POS_LEARNED : GS_POS_ROPE; /* none: no parameters, like rope */
    }
    if (st->given[MG_ROPE] || st->given[MG_NO_POSEMB])
        m->pos = GS_POS_ROPE;
    if (st->given[MG_MAXPOS] && st->u[MG_MAXPOS] != m->seq &&
        (rc = note_ignored(ignored, err,
                           "%s: --max-position-embeddings: ignored: gridstep sizes a learned "
                           "position table by --seq-length",
                           mg_where(origin, ws, st->at[MG_MAXPOS], where, sizeof where))) != GS_OK)
        return rc;
    return GS_OK;
}

static gs_status mg_strategy(const char *origin, const mg_words *ws, const mg_state *st,
                             gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_strategy *g = &s->strategy;
    gs_status rc;
    int e = 0;
    /* sharding */
    g->sharding = GS_SHARD_NO_SHARD;
    if (st->given[MG_DIST_OPT])
        g->sharding = GS_SHARD_ZERO1;
    if (st->given[MG_TORCH_FSDP2])
        g->sharding = GS_SHARD_FULL_SHARD;
    if (st->given[MG_CUSTOM_FSDP]) {
        static const gs_sharding map[] = {GS_SHARD_NO_SHARD, GS_SHARD_ZERO1, GS_SHARD_ZERO2,
                                          GS_SHARD_ZERO3};
        g->sharding = GS_SHARD_ZERO3; /* Megatron-FSDP's default optim_grads_params */
        if (st->given[MG_DP_SHARD]) {
            static const char *const names[] = {"no_shard", "optim", "optim_grads",
                                                "optim_grads_params"};
            if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_DP_SHARD], where, sizeof where),
                                "data-parallel-sharding-strategy", st->str[MG_DP_SHARD], names, 4,
                                &e, err)) != GS_OK)
                return rc;
            g->sharding = map[e];
        }
    } else if (st->given[MG_DP_SHARD] &&
               (rc = note_ignored(ignored, err,
                                  "%s: --data-parallel-sharding-strategy: ignored: Megatron-LM "
                                  "uses it only with --use-custom-fsdp",
                                  mg_where(origin, ws, st->at[MG_DP_SHARD], where,
                                           sizeof where))) != GS_OK)
        return rc;
    g->reshard_after_forward = gs_sharding_shards_params(g->sharding);
    if (st->given[MG_OPTIMIZER] && strcasecmp(st->str[MG_OPTIMIZER], "adam") != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --optimizer: found '%s', expected adam (the optimizer state "
                            "gridstep accounts for)",
                            mg_where(origin, ws, st->at[MG_OPTIMIZER], where, sizeof where),
                            st->str[MG_OPTIMIZER]);
    /* recompute */
    g->recompute = GS_RECOMPUTE_NONE;
    if (st->given[MG_REC_ACT])
        g->recompute = GS_RECOMPUTE_SELECTIVE;
    if (st->given[MG_REC_GRAN]) {
        static const char *const grans[] = {"full", "selective"};
        if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_REC_GRAN], where, sizeof where),
                            "recompute-granularity", st->str[MG_REC_GRAN], grans, 2, &e, err)))
            return rc;
        g->recompute = e == 0 ? GS_RECOMPUTE_FULL : GS_RECOMPUTE_SELECTIVE;
    }
    int method = 0; /* uniform */
    if (st->given[MG_REC_METHOD]) {
        static const char *const methods[] = {"uniform", "block"};
        if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_REC_METHOD], where, sizeof where),
                            "recompute-method", st->str[MG_REC_METHOD], methods, 2, &method, err)))
            return rc;
    }
    uint64_t per_stage = s->model.layers / s->grid.pp;
    if (g->recompute == GS_RECOMPUTE_FULL && method == 1 && st->given[MG_REC_NLAYERS] &&
        st->u[MG_REC_NLAYERS] < per_stage)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --recompute-num-layers: found %" PRIu64 " with --recompute-method "
                            "block, expected at least the %" PRIu64 " layers of a stage: gridstep "
                            "recomputes every layer of a stage or none",
                            mg_where(origin, ws, st->at[MG_REC_NLAYERS], where, sizeof where),
                            st->u[MG_REC_NLAYERS], per_stage);
    if (g->recompute == GS_RECOMPUTE_FULL && method == 0 && st->given[MG_REC_NLAYERS] &&
        st->u[MG_REC_NLAYERS] > 1 &&
        (rc = note_ignored(ignored, err,
                           "%s: --recompute-num-layers %" PRIu64 ": ignored: uniform groups of "
                           "layers keep fewer checkpoints; gridstep keeps one per layer",
                           mg_where(origin, ws, st->at[MG_REC_NLAYERS], where, sizeof where),
                           st->u[MG_REC_NLAYERS])) != GS_OK)
        return rc;
    if (g->recompute != GS_RECOMPUTE_FULL) {
        static const mg_act only_full[] = {MG_REC_METHOD, MG_REC_NLAYERS};
        for (int i = 0; i < 2; i++)
            if (st->given[only_full[i]] &&
                (rc = note_ignored(ignored, err,
                                   "%s: %s: ignored: Megatron-LM uses it only with "
                                   "--recompute-granularity full",
                                   mg_where(origin, ws, st->at[only_full[i]], where, sizeof where),
                                   ws->w[st->at[only_full[i]]].text)) != GS_OK)
                return rc;
    }
    /* precision */
    if (st->given[MG_BF16] && st->given[MG_FP16])
        return gs_error_set(err, GS_ERR_INPUT, "%s: found both --bf16 and --fp16, expected one",
                            mg_where(origin, ws, st->at[MG_FP16], where, sizeof where));
    g->precision = st->given[MG_BF16] ? GS_PREC_BF16 : st->given[MG_FP16] ? GS_PREC_FP16
                                                                          : GS_PREC_FP32;
    g->sequence_parallel = st->given[MG_SP];
    /* attention kernel */
    if (st->given[MG_ATT_BACKEND]) {
        static const char *const backends[] = {"flash", "fused", "auto", "unfused", "local"};
        if ((rc = mg_choice(mg_where(origin, ws, st->at[MG_ATT_BACKEND], where, sizeof where),
                            "attention-backend", st->str[MG_ATT_BACKEND], backends, 5, &e, err)))
            return rc;
        g->flash_attention = e < 3;
    }
    if (st->given[MG_FLASH])
        g->flash_attention = 1;
    /* pipeline */
    g->pipeline = GS_PIPE_1F1B;
    g->virtual_stages = 1;
    uint64_t vs = 0;
    if (st->given[MG_VPP_LAYERS]) {
        uint64_t n = st->u[MG_VPP_LAYERS];
        if (per_stage % n != 0 || s->model.layers % s->grid.pp != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --num-layers-per-virtual-pipeline-stage: found %" PRIu64
                                ", expected a divisor of the %" PRIu64 " layers per stage (%" PRIu64
                                " layers / pp %" PRIu64 ")",
                                mg_where(origin, ws, st->at[MG_VPP_LAYERS], where, sizeof where),
                                n, per_stage, s->model.layers, s->grid.pp);
        vs = per_stage / n;
    }
    if (st->given[MG_VPP_STAGES]) {
        if (vs && vs != st->u[MG_VPP_STAGES])
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --num-virtual-stages-per-pipeline-rank: found %" PRIu64
                                ", expected %" PRIu64 " as --num-layers-per-virtual-pipeline-stage "
                                "implies (or one of the two)",
                                mg_where(origin, ws, st->at[MG_VPP_STAGES], where, sizeof where),
                                st->u[MG_VPP_STAGES], vs);
        vs = st->u[MG_VPP_STAGES];
    }
    if (vs > 1) {
        if (s->grid.pp < 2)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: virtual pipeline stages: found %" PRIu64 " with "
                                "--pipeline-model-parallel-size 1, expected pp >= 2",
                                mg_where(origin, ws,
                                         st->given[MG_VPP_LAYERS] ? st->at[MG_VPP_LAYERS]
                                                                  : st->at[MG_VPP_STAGES],
                                         where, sizeof where),
                                vs);
        g->pipeline = GS_PIPE_INTERLEAVED;
        g->virtual_stages = vs;
    }
    return GS_OK;
}

gs_status gs_import_megatron_args(const char *args, const char *origin, const gs_import_opts *o,
                                  gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    char where[600];
    mg_words *ws = calloc(1, sizeof *ws);
    mg_state *st = calloc(1, sizeof *st);
    gs_status rc = GS_OK;
    if (!ws || !st) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory reading the Megatron-LM flags");
        goto out;
    }
    if ((rc = import_base(origin ? origin : "megatron", o, s, err)) != GS_OK ||
        (rc = mg_split(args, origin, ws, err)) != GS_OK)
        goto out;
    size_t script = mg_script_index(ws);
    size_t first = script < ws->n ? script + 1 : 0;
    uint64_t nnodes = 0, nproc = 0;
    size_t nproc_at = 0;
    if (script < ws->n &&
        (rc = mg_launcher(origin, ws, script, &nnodes, &nproc, &nproc_at, ignored, err)) != GS_OK)
        goto out;
    if ((rc = mg_parse(origin, ws, first, st, ignored, err)) != GS_OK)
        goto out;
    const char *who = origin ? origin : "--from-megatron";
    uint64_t tp = st->given[MG_TP] ? st->u[MG_TP] : 1, pp = st->given[MG_PP] ? st->u[MG_PP] : 1;
    static const mg_act must_be_one[] = {MG_CP, MG_EP};
    for (int i = 0; i < 2; i++)
        if (st->given[must_be_one[i]] && st->u[must_be_one[i]] != 1) {
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "%s: %s: found %" PRIu64 ", expected 1 (%s is not modelled)",
                              mg_where(origin, ws, st->at[must_be_one[i]], where, sizeof where),
                              ws->w[st->at[must_be_one[i]]].text, st->u[must_be_one[i]],
                              i == 0 ? "context parallelism" : "expert parallelism");
            goto out;
        }
    s->grid.tp = tp;
    s->grid.pp = pp;
    if (st->given[MG_TPPPDP]) {
        s->grid.order[1] = GS_DIM_PP;
        s->grid.order[2] = GS_DIM_DP;
    }
    uint64_t gpn = s->cluster.gpus_per_node, nodes = o->nodes, tp_pp = tp * pp, world;
    if (nproc && nproc != gpn) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "%s: launcher --nproc_per_node: found %" PRIu64 ", expected %" PRIu64
                          " (the GPUs per node of cluster %s)",
                          mg_where(origin, ws, nproc_at, where, sizeof where), nproc, gpn,
                          s->cluster.name);
        goto out;
    }
    if (nodes && nnodes && nodes != nnodes) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "%s: launcher --nnodes %" PRIu64 " and --nodes %" PRIu64
                          " differ, expected them equal (or leave --nodes out)",
                          who, nnodes, nodes);
        goto out;
    }
    if (!nodes)
        nodes = nnodes;
    if (!nodes && st->given[MG_DP]) {
        uint64_t w = tp_pp * st->u[MG_DP];
        if (w % gpn != 0) {
            rc = gs_error_set(err, GS_ERR_INPUT,
                              "%s: tp x pp x dp = %" PRIu64 " GPUs do not fill whole nodes of "
                              "%" PRIu64 ", expected a multiple of %" PRIu64,
                              who, w, gpn, gpn);
            goto out;
        }
        nodes = w / gpn;
    }
    if (!nodes) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "%s: no node count: Megatron-LM takes the world size from the "
                          "launcher, expected --nodes N (or torchrun --nnodes N in the command)",
                          who);
        goto out;
    }
    if (gs_mul_u64(nodes, gpn, &world) != 0 || world % tp_pp != 0) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "%s: tp x pp = %" PRIu64 " does not divide the %" PRIu64 " x %" PRIu64
                          " GPUs, expected a divisor of %" PRIu64,
                          st->given[MG_TP] || st->given[MG_PP]
                              ? mg_where(origin, ws, st->given[MG_TP] ? st->at[MG_TP] : st->at[MG_PP],
                                         where, sizeof where)
                              : who,
                          tp_pp, nodes, gpn, nodes * gpn);
        goto out;
    }
    s->grid.dp = world / tp_pp;
    if (st->given[MG_DP] && st->u[MG_DP] != s->grid.dp) {
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "%s: --data-parallel-size: found %" PRIu64 ", expected %" PRIu64
                          " = %" PRIu64 " GPUs / (tp %" PRIu64 " x pp %" PRIu64 ")",
                          mg_where(origin, ws, st->at[MG_DP], where, sizeof where), st->u[MG_DP],
                          s->grid.dp, world, tp, pp);
        goto out;
    }
    if ((rc = mg_model(origin, ws, st, o, tp, s, ignored, err)) != GS_OK ||
        (rc = mg_strategy(origin, ws, st, s, ignored, err)) != GS_OK)
        goto out;
    rc = import_finish(o, nodes, st->given[MG_MBS] ? st->u[MG_MBS] : 0,
                       st->given[MG_GBS] ? st->u[MG_GBS] : 0, s, err);
out:
    if (ws)
        free(ws->store);
    free(ws);
    free(st);
    return rc;
}

gs_status gs_import_megatron_file(const char *path, const gs_import_opts *o, gs_scenario *s,
                                  gs_diag *ignored, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK && strlen(text) != size)
        st = gs_error_set(err, GS_ERR_INPUT, "%s: found a NUL byte, expected a text file", path);
    if (st == GS_OK)
        st = gs_import_megatron_args(text, path, o, s, ignored, err);
    free(text);
    return st;
}
