/* accelerate config YAML -> scenario: every key mapped, reported as ignored, or refused at
 * FILE:LINE:COLUMN (engine/import.h). */
#include "engine/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "engine/import_internal.h"
#include "engine/units.h"
#include "engine/yaml_doc.h"

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
            (st = gs__import_ignored(ignored, l->err, "%s:%lu: %s: ignored: %s", l->path,
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

/* A class accelerate would wrap by name must be a decoder layer's: a name ending in "Layer" or
 * "Block" (LlamaDecoderLayer, GPT2Block, GPTNeoXLayer). Another name (a typo, a model class) is
 * refused: gridstep would wrap per layer where accelerate stops, finding no such class. */
static gs_status check_layer_classes(const gs__yaml_loader *l, yaml_node_t *cls)
{
    size_t n = cls->type == YAML_SEQUENCE_NODE ? (size_t)(cls->data.sequence.items.top - cls->data.sequence.items.start)
                                               : 1;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *v = cls->type == YAML_SEQUENCE_NODE
                             ? yaml_document_get_node(l->doc, cls->data.sequence.items.start[i])
                             : cls;
        char found[96];
        const char *t = v && gs__yaml_is_text_scalar(v) ? gs__yaml_scalar_text(v) : NULL;
        size_t len = t ? strlen(t) : 0;
        int ok = t && ((len > 5 && strcmp(t + len - 5, "Layer") == 0) || (len > 5 && strcmp(t + len - 5, "Block") == 0));
        if (!ok)
            return gs__yaml_fail_at(l, v ? v : cls, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_transformer_layer_cls_to_wrap: found %s, expected the model's "
                                    "decoder-layer class (a name ending in Layer or Block, like LlamaDecoderLayer "
                                    "or GPT2Block): accelerate stops when the model has no such class",
                                    v ? gs__yaml_describe(v, found, sizeof found) : "nothing");
    }
    return GS_OK;
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
    st->framework = GS_FW_FSDP1; /* accelerate's FSDP plugin wraps torch.distributed.fsdp */
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
        if (cls && (rc = check_layer_classes(l, cls)) != GS_OK)
            return rc;
        if (min && (rc = gs__import_ignored(ignored, l->err,
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
            if (min && (rc = gs__import_ignored(ignored, l->err,
                                          "%s:%lu: fsdp_min_num_params: ignored: used by "
                                          "SIZE_BASED_WRAP only, the policy here is NO_WRAP",
                                          l->path, gs__yaml_node_line(min_key))) != GS_OK)
                return rc;
        }
        if (cls && (rc = gs__import_ignored(ignored, l->err,
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
    return gs__import_finish(o, nodes, 0, 0, s, l->err);
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
    gs_status st = gs__import_base(path, o, s, err);
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
