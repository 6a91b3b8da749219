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
#include "engine/mesh.h"
#include "engine/schedule.h"
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
    {"parallelism_config", NULL, NULL},
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
    {"fp8_config", NULL, NULL},
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

/* accelerate's ParallelismConfig keys as `accelerate config` writes them (accelerate >= 1.10,
 * commands/config/cluster.py; read by commands/launch.py and parallelism_config.py). */
static const accel_key accel_par[] = {
    {"parallelism_config_dp_replicate_size", NULL, NULL},
    {"parallelism_config_dp_shard_size", NULL, NULL},
    {"parallelism_config_tp_size", NULL, NULL},
    {"parallelism_config_cp_size", NULL, NULL},
    {"parallelism_config_sp_size", NULL, NULL},
    {"parallelism_config_cp_comm_strategy", NULL, NULL},
    {"parallelism_config_cp_backend", NULL, NULL},
    {"parallelism_config_sp_backend", NULL, NULL},
    {"parallelism_config_sp_seq_length", NULL, NULL},
    {"parallelism_config_sp_seq_length_is_variable", NULL, NULL},
    {"parallelism_config_sp_attn_implementation", NULL, NULL},
};

#define ACCEL_TOP_N (sizeof accel_top / sizeof accel_top[0])
#define ACCEL_PAR_N (sizeof accel_par / sizeof accel_par[0])
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

/* What the file says that shapes the grid: the FSDP version and the parallelism config. */
typedef struct accel_read {
    int fsdp_version;              /* 1 or 2 (FSDP); 0 otherwise */
    uint64_t replicate, shard, tp; /* parallelism_config sizes; 0 when absent */
    const yaml_node_t *par;        /* the parallelism_config node (messages), NULL when absent/empty */
} accel_read;

static gs_status accel_note(const gs__yaml_loader *l, const yaml_node_t *k, gs_diag *ignored, const char *key,
                            const char *why)
{
    return gs__import_ignored(ignored, l->err, "%s:%lu: %s: %s", l->path, gs__yaml_node_line(k), key, why);
}

/* The sharding: accelerate >= 1.6 writes fsdp_reshard_after_forward (FSDP1: the sharding
 * strategy's name; FSDP2: a bool, FULL_SHARD when true, SHARD_GRAD_OP's resharding when false);
 * fsdp_sharding_strategy is its deprecated FSDP1 name (utils/dataclasses.py,
 * FullyShardedDataParallelPlugin). Default FULL_SHARD / true. */
static gs_status accel_sharding(const gs__yaml_loader *l, const yaml_node_t *fc, int version, gs_scenario *s,
                                gs_diag *ignored)
{
    static const char *const strategies[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                             "HYBRID_SHARD_ZERO2", "1", "2", "3", "4", "5"};
    static const gs_sharding strategy_map[] = {GS_SHARD_FULL_SHARD, GS_SHARD_GRAD_OP, GS_SHARD_NO_SHARD,
                                               GS_SHARD_HYBRID_SHARD};
    gs_strategy *st = &s->strategy;
    yaml_node_t *k_new = NULL, *k_old = NULL;
    yaml_node_t *v_new = gs__yaml_lookup(l, fc, "fsdp_reshard_after_forward", &k_new);
    yaml_node_t *v_old = gs__yaml_lookup(l, fc, "fsdp_sharding_strategy", &k_old);
    gs_status rc;
    int e = 0, reshard = 1;
    if (version == 2) {
        if (v_old && (rc = accel_note(l, k_old, ignored, "fsdp_sharding_strategy",
                                      "ignored: FSDP2 reads fsdp_reshard_after_forward")) != GS_OK)
            return rc;
        if (v_new && (rc = accel_bool(l, v_new, "fsdp_config.fsdp_reshard_after_forward (fsdp_version 2)",
                                      &reshard)) != GS_OK)
            return rc;
        st->sharding = reshard ? GS_SHARD_FULL_SHARD : GS_SHARD_GRAD_OP;
        st->reshard_after_forward = reshard;
        return GS_OK;
    }
    int idx[2] = {-1, -1};
    yaml_node_t *vals[2] = {v_new, v_old};
    static const char *const keys[2] = {"fsdp_config.fsdp_reshard_after_forward", "fsdp_config.fsdp_sharding_strategy"};
    for (int i = 0; i < 2; i++) {
        if (!vals[i])
            continue;
        if ((rc = accel_enum(l, vals[i], keys[i], strategies, 10, &e)) != GS_OK)
            return rc;
        idx[i] = e >= 5 ? e - 5 : e; /* the numeric form: 1 = FULL_SHARD ... */
        if (idx[i] == 4)
            return gs__yaml_fail_at(l, vals[i], GS_ERR_INPUT,
                                    "%s: found HYBRID_SHARD_ZERO2, which gridstep does not model: expected "
                                    "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD", keys[i]);
    }
    if (idx[0] >= 0 && idx[1] >= 0 && idx[0] != idx[1])
        return gs__yaml_fail_at(l, k_old, GS_ERR_INPUT,
                                "fsdp_config: found fsdp_sharding_strategy %s and fsdp_reshard_after_forward %s, "
                                "expected one (fsdp_sharding_strategy is the name accelerate used before 1.6)",
                                strategies[idx[1]], strategies[idx[0]]);
    if (idx[0] < 0 && idx[1] >= 0 &&
        (rc = accel_note(l, k_old, ignored, "fsdp_sharding_strategy",
                         "read as fsdp_reshard_after_forward, its name since accelerate 1.6")) != GS_OK)
        return rc;
    st->sharding = strategy_map[idx[0] >= 0 ? idx[0] : idx[1] >= 0 ? idx[1] : 0];
    st->reshard_after_forward = gs_sharding_shards_params(st->sharding);
    return GS_OK;
}

/* The wrap policy: per transformer layer, by size, or the whole model. */
static gs_status accel_wrap(const gs__yaml_loader *l, const yaml_node_t *fc, gs_scenario *s, gs_diag *ignored)
{
    static const char *const policies[] = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"};
    gs_strategy *st = &s->strategy;
    char found[96];
    gs_status rc;
    int e = 0;
    yaml_node_t *policy = gs__yaml_lookup(l, fc, "fsdp_auto_wrap_policy", NULL);
    if (policy && (rc = accel_enum(l, policy, "fsdp_config.fsdp_auto_wrap_policy", policies, 3, &e)) != GS_OK)
        return rc;
    yaml_node_t *cls_key = NULL, *min_key = NULL;
    yaml_node_t *cls = gs__yaml_lookup(l, fc, "fsdp_transformer_layer_cls_to_wrap", &cls_key);
    yaml_node_t *min = gs__yaml_lookup(l, fc, "fsdp_min_num_params", &min_key);
    if (e == 0) {
        st->wrap = GS_WRAP_LAYER;
        if (cls && !gs__yaml_is_text_scalar(cls) && cls->type != YAML_SEQUENCE_NODE)
            return gs__yaml_fail_at(l, cls, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_transformer_layer_cls_to_wrap: found %s, expected the "
                                    "decoder-layer class name (like LlamaDecoderLayer)",
                                    gs__yaml_describe(cls, found, sizeof found));
        if (cls && (rc = check_layer_classes(l, cls)) != GS_OK)
            return rc;
        if (min && (rc = accel_note(l, min_key, ignored, "fsdp_min_num_params",
                                    "ignored: used by SIZE_BASED_WRAP only, the policy here is "
                                    "TRANSFORMER_BASED_WRAP")) != GS_OK)
            return rc;
        return GS_OK;
    }
    if (e == 1) {
        if (!min)
            return gs__yaml_fail_at(l, policy, GS_ERR_INPUT,
                                    "fsdp_config.fsdp_auto_wrap_policy: found SIZE_BASED_WRAP without "
                                    "fsdp_min_num_params, expected both");
        if ((rc = accel_count(l, min, "fsdp_config.fsdp_min_num_params", &st->wrap_min_params)) != GS_OK)
            return rc;
        st->wrap = GS_WRAP_MIN_PARAMS;
    } else {
        st->wrap = GS_WRAP_MODEL;
        if (min && (rc = accel_note(l, min_key, ignored, "fsdp_min_num_params",
                                    "ignored: used by SIZE_BASED_WRAP only, the policy here is NO_WRAP")) != GS_OK)
            return rc;
    }
    if (cls) {
        char why[160];
        snprintf(why, sizeof why, "ignored: used by TRANSFORMER_BASED_WRAP only, the policy here is %s", policies[e]);
        if ((rc = accel_note(l, cls_key, ignored, "fsdp_transformer_layer_cls_to_wrap", why)) != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* Prefetch (FSDP1's keys; FSDP2 has none: accelerate drops them with a warning, and FSDP2
 * prefetches the next layer's gather in backward itself), offload and checkpointing. */
static gs_status accel_prefetch(const gs__yaml_loader *l, const yaml_node_t *fc, int version, gs_scenario *s,
                                gs_diag *ignored)
{
    static const char *const prefetches[] = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
    gs_strategy *st = &s->strategy;
    gs_status rc;
    int e = 0, recompute = 0;
    yaml_node_t *k, *v;
    yaml_node_t *bp = gs__yaml_lookup(l, fc, "fsdp_backward_prefetch", NULL);
    yaml_node_t *bp_old = gs__yaml_lookup(l, fc, "fsdp_backward_prefetch_policy", &k);
    if (bp && bp_old)
        return gs__yaml_fail_at(l, k, GS_ERR_INPUT,
                                "fsdp_config: found both fsdp_backward_prefetch and its old name "
                                "fsdp_backward_prefetch_policy, expected one");
    if (!bp)
        bp = bp_old;
    yaml_node_t *fk = NULL, *fp = gs__yaml_lookup(l, fc, "fsdp_forward_prefetch", &fk);
    if (version == 2) {
        if (bp) {
            const char *name = bp == bp_old ? "fsdp_backward_prefetch_policy" : "fsdp_backward_prefetch";
            yaml_node_t *bk = NULL;
            gs__yaml_lookup(l, fc, name, &bk);
            if ((rc = accel_note(l, bk, ignored, name,
                                 "ignored: FSDP2 has none (it prefetches in backward itself: BACKWARD_PRE)")) != GS_OK)
                return rc;
        }
        if (fp && (rc = accel_note(l, fk, ignored, "fsdp_forward_prefetch", "ignored: FSDP2 has none")) != GS_OK)
            return rc;
        st->prefetch = GS_PREFETCH_BACKWARD_PRE;
        st->forward_prefetch = 0;
    } else {
        if (bp) {
            if ((rc = accel_enum(l, bp, "fsdp_config.fsdp_backward_prefetch", prefetches, 3, &e)))
                return rc;
            st->prefetch = e == 0 ? GS_PREFETCH_BACKWARD_PRE : e == 1 ? GS_PREFETCH_BACKWARD_POST : GS_PREFETCH_NONE;
        }
        if (fp && (rc = accel_bool(l, fp, "fsdp_config.fsdp_forward_prefetch", &st->forward_prefetch)) != GS_OK)
            return rc;
    }
    if (((v = gs__yaml_lookup(l, fc, "fsdp_offload_params", NULL)) &&
         (rc = accel_bool(l, v, "fsdp_config.fsdp_offload_params", &st->offload))) ||
        ((v = gs__yaml_lookup(l, fc, "fsdp_activation_checkpointing", NULL)) &&
         (rc = accel_bool(l, v, "fsdp_config.fsdp_activation_checkpointing", &recompute))))
        return rc;
    st->recompute = recompute ? GS_RECOMPUTE_FULL : GS_RECOMPUTE_NONE;
    return GS_OK;
}

static gs_status accel_fsdp_config(const gs__yaml_loader *l, const yaml_node_t *fc, gs_scenario *s,
                                   accel_read *rd, gs_diag *ignored)
{
    static const char *const versions[] = {"1", "2"};
    char found[96];
    gs_status rc;
    int e;
    yaml_node_t *v;
    if (fc->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, fc, GS_ERR_INPUT, "fsdp_config: found %s, expected a mapping of fsdp_* keys",
                                gs__yaml_describe(fc, found, sizeof found));
    if ((rc = accel_keys(l, fc, "fsdp_config", accel_fsdp, ACCEL_FSDP_N, ignored)) != GS_OK)
        return rc;
    rd->fsdp_version = 1;
    if ((v = gs__yaml_lookup(l, fc, "fsdp_version", NULL))) {
        if ((rc = accel_enum(l, v, "fsdp_config.fsdp_version", versions, 2, &e)) != GS_OK)
            return rc;
        rd->fsdp_version = e + 1;
    }
    /* accelerate's FSDP plugin wraps torch.distributed.fsdp (1) or fully_shard (2) */
    s->strategy.framework = rd->fsdp_version == 2 ? GS_FW_FSDP2 : GS_FW_FSDP1;
    if ((rc = accel_sharding(l, fc, rd->fsdp_version, s, ignored)) != GS_OK ||
        (rc = accel_wrap(l, fc, s, ignored)) != GS_OK)
        return rc;
    return accel_prefetch(l, fc, rd->fsdp_version, s, ignored);
}

/* parallelism_config (FSDP2 only): dp_replicate x dp_shard x tp (x cp x sp, which must be 1). */
static gs_status accel_parallelism(const gs__yaml_loader *l, const yaml_node_t *pc, accel_read *rd, gs_diag *ignored)
{
    static const char *const sizes[] = {"parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
                                        "parallelism_config_tp_size", "parallelism_config_cp_size",
                                        "parallelism_config_sp_size"};
    char found[96];
    gs_status rc;
    if (pc->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, pc, GS_ERR_INPUT, "parallelism_config: found %s, expected a mapping of "
                                                     "parallelism_config_* keys",
                                gs__yaml_describe(pc, found, sizeof found));
    if (pc->data.mapping.pairs.top == pc->data.mapping.pairs.start)
        return GS_OK; /* {}: what `accelerate config` writes when it is not used */
    if ((rc = accel_keys(l, pc, "parallelism_config", accel_par, ACCEL_PAR_N, ignored)) != GS_OK)
        return rc;
    uint64_t v[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        yaml_node_t *n = gs__yaml_lookup(l, pc, sizes[i], NULL);
        char key[80];
        snprintf(key, sizeof key, "parallelism_config.%s", sizes[i]);
        if (n && (rc = accel_count(l, n, key, &v[i])) != GS_OK)
            return rc;
        if (n && i >= 3 && v[i] != 1)
            return gs__yaml_fail_at(l, n, GS_ERR_INPUT, "%s: found %" PRIu64 ", expected 1 (%s is not modelled)", key,
                                    v[i], i == 3 ? "context parallelism" : "sequence parallelism (DeepSpeed Ulysses)");
    }
    /* the rest configure context or sequence parallelism, off here */
    for (yaml_node_pair_t *p = pc->data.mapping.pairs.start; p < pc->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        const char *name = gs__yaml_scalar_text(k);
        int size_key = 0;
        for (int i = 0; i < 5; i++)
            size_key |= strcmp(name, sizes[i]) == 0;
        if (!size_key && (rc = accel_note(l, k, ignored, name, "ignored: context and sequence parallelism are off "
                                                               "(cp_size and sp_size 1)")) != GS_OK)
            return rc;
    }
    rd->replicate = v[0], rd->shard = v[1], rd->tp = v[2];
    rd->par = pc;
    return GS_OK;
}

/* distributed_type (FSDP, MULTI_GPU for DDP, NO), with fsdp_config and parallelism_config. */
static gs_status accel_distributed(const gs__yaml_loader *l, const yaml_node_t *root, gs_scenario *s, accel_read *rd,
                                   int *dist, gs_diag *ignored)
{
    static const char *const dist_types[] = {"FSDP", "MULTI_GPU", "NO", "DEEPSPEED", "MEGATRON_LM", "MULTI_CPU",
                                             "XLA", "TPU", "MULTI_NPU", "MULTI_XPU", "MULTI_MLU", "MULTI_MUSA"};
    gs_status rc;
    int e;
    yaml_node_t *k, *fc_key = NULL, *pc_key = NULL;
    yaml_node_t *v = gs__yaml_lookup(l, root, "distributed_type", &k);
    if (!v)
        return gs__yaml_fail_at(l, root, GS_ERR_INPUT,
                                "accelerate config: no distributed_type, expected distributed_type: "
                                "FSDP (or MULTI_GPU for DDP)");
    if ((rc = accel_enum(l, v, "distributed_type", dist_types, 12, &e)) != GS_OK)
        return rc;
    *dist = e;
    yaml_node_t *fc = gs__yaml_lookup(l, root, "fsdp_config", &fc_key);
    yaml_node_t *pc = gs__yaml_lookup(l, root, "parallelism_config", &pc_key);
    if (e >= 3)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "distributed_type: found %s, expected FSDP, MULTI_GPU or NO: %s",
                                dist_types[e],
                                e == 3   ? "DeepSpeed configs are not imported (write a scenario "
                                           "with sharding zero1, zero2 or zero3)"
                                : e == 4 ? "give Megatron-LM's flags to --from-megatron"
                                         : "gridstep models NVIDIA GPU training");
    if (e == 0) {
        if (!fc)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "distributed_type: found FSDP without fsdp_config, expected "
                                    "an fsdp_config mapping (fsdp_reshard_after_forward, ...)");
        if ((rc = accel_fsdp_config(l, fc, s, rd, ignored)) != GS_OK)
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
    if (pc && (rc = accel_parallelism(l, pc, rd, ignored)) != GS_OK)
        return rc;
    if (rd->par && rd->fsdp_version != 2) /* accelerate's launch refuses it (commands/launch.py) */
        return gs__yaml_fail_at(l, pc_key, GS_ERR_INPUT,
                                "parallelism_config: found it with %s, expected distributed_type FSDP with "
                                "fsdp_version: 2 (accelerate uses it with FSDP2 only)",
                                e == 0 ? "fsdp_version 1" : "no FSDP");
    return GS_OK;
}

/* mixed_precision; fp8 is bf16 training with FP8 linear layers, whose recipe follows
 * fp8_config.backend: TE (accelerate's default, Transformer Engine's DelayedScaling) or AO
 * (torchao's dynamic, current scaling); MS-AMP is not modelled. fp8_config's other settings
 * (format, amax history, margin) do not change what a step costs. */
static gs_status accel_precision(const gs__yaml_loader *l, const yaml_node_t *root, gs_scenario *s, gs_diag *ignored)
{
    static const char *const precisions[] = {"bf16", "fp16", "no", "fp8"};
    static const char *const backends[] = {"TE", "AO", "MSAMP"};
    int e, b = 0;
    gs_status rc;
    yaml_node_t *v = gs__yaml_lookup(l, root, "mixed_precision", NULL);
    yaml_node_t *f8 = gs__yaml_lookup(l, root, "fp8_config", NULL);
    e = 2; /* accelerate's default: no mixed precision */
    if (v && (rc = accel_enum(l, v, "mixed_precision", precisions, 4, &e)) != GS_OK)
        return rc;
    if (e != 3) {
        s->strategy.precision = e == 0 ? GS_PREC_BF16 : e == 1 ? GS_PREC_FP16 : GS_PREC_FP32;
        if (f8)
            return gs__import_ignored(ignored, l->err, "%s:%lu: fp8_config: ignored: mixed_precision is %s, not fp8",
                                      l->path, gs__yaml_node_line(f8), precisions[e]);
        return GS_OK;
    }
    yaml_node_t *bk = f8 && f8->type == YAML_MAPPING_NODE ? gs__yaml_lookup(l, f8, "backend", NULL) : NULL;
    if (bk && (rc = accel_enum(l, bk, "fp8_config.backend", backends, 3, &b)) != GS_OK)
        return rc;
    if (b == 2)
        return gs__yaml_fail_at(l, bk, GS_ERR_INPUT, "fp8_config.backend: found MSAMP, which gridstep does not "
                                "model: expected TE (Transformer Engine) or AO (torchao)");
    s->strategy.precision = GS_PREC_BF16;
    s->strategy.fp8 = b == 1 ? GS_FP8_CURRENT : GS_FP8_DELAYED;
    return GS_OK;
}

/* Nodes and processes: num_machines x the cluster's GPUs per node = num_processes. */
static gs_status accel_world(const gs__yaml_loader *l, const yaml_node_t *root, const gs_import_opts *o, int dist,
                             const gs_scenario *s, uint64_t *nodes_out, uint64_t *world_out)
{
    uint64_t nodes = 1, procs = 0, gpn = s->cluster.gpus_per_node, world;
    gs_status rc;
    yaml_node_t *nm = gs__yaml_lookup(l, root, "num_machines", NULL);
    yaml_node_t *np = gs__yaml_lookup(l, root, "num_processes", NULL);
    yaml_node_t *dist_node = gs__yaml_lookup(l, root, "distributed_type", NULL);
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
    if (gs_mul_u64(nodes, gpn, &world) != 0)
        return gs__yaml_fail_at(l, nm, GS_ERR_OVERFLOW, "num_machines: %" PRIu64 " is too many", nodes);
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
    *nodes_out = nodes;
    *world_out = world;
    return GS_OK;
}

/* The grid from the world and the parallelism config: tp, dp = world / tp; dp_replicate > 1
 * is HSDP (hybrid_shard), which shards over dp_shard consecutive DP ranks. */
static gs_status accel_grid(const gs__yaml_loader *l, const accel_read *rd, uint64_t world, gs_scenario *s)
{
    if (!rd->par) {
        s->grid.dp = world;
        return GS_OK;
    }
    uint64_t total = rd->replicate * rd->shard * rd->tp;
    if (total != world)
        return gs__yaml_fail_at(l, rd->par, GS_ERR_INPUT,
                                "parallelism_config: dp_replicate %" PRIu64 " x dp_shard %" PRIu64 " x tp %" PRIu64
                                " = %" PRIu64 ", expected num_processes %" PRIu64,
                                rd->replicate, rd->shard, rd->tp, total, world);
    s->grid.tp = rd->tp;
    s->grid.dp = world / rd->tp;
    if (rd->replicate > 1) {
        if (rd->shard == 1)
            return gs__yaml_fail_at(l, rd->par, GS_ERR_INPUT,
                                    "parallelism_config: dp_replicate_size %" PRIu64 " with dp_shard_size 1 is "
                                    "plain data parallelism, which accelerate refuses here: expected "
                                    "distributed_type MULTI_GPU, or dp_shard_size > 1 (HSDP)",
                                    rd->replicate);
        if (!s->strategy.reshard_after_forward)
            return gs__yaml_fail_at(l, rd->par, GS_ERR_INPUT,
                                    "parallelism_config: HSDP with fsdp_reshard_after_forward false (FSDP's "
                                    "HYBRID_SHARD_ZERO2) is not modelled: expected fsdp_reshard_after_forward true");
        s->strategy.sharding = GS_SHARD_HYBRID_SHARD;
    }
    return GS_OK;
}

/* HSDP's shard group is a node's DP ranks in gridstep: dp_shard_size must be that many. */
static gs_status accel_check_hsdp(const gs__yaml_loader *l, const accel_read *rd, const gs_scenario *s)
{
    gs_mesh m;
    gs_error e2;
    gs_error_init(&e2);
    if (s->strategy.sharding != GS_SHARD_HYBRID_SHARD || !rd->par || gs_scenario_mesh(s, &m, NULL, &e2) != GS_OK)
        return GS_OK;
    uint64_t intra = 0;
    gs_group_of(&m, GS_GROUP_DP_INTRA, 0, &intra);
    if (intra != rd->shard)
        return gs__yaml_fail_at(l, rd->par, GS_ERR_INPUT,
                                "parallelism_config: dp_shard_size %" PRIu64 ", expected %" PRIu64
                                ": gridstep's hybrid_shard shards over the data-parallel ranks of one node",
                                rd->shard, intra);
    return GS_OK;
}

/* The batch gridstep wrote ("# gridstep batch: {global: G, micro: M}"), 0 when absent. */
typedef struct accel_lines {
    uint64_t global, micro;
} accel_lines;

static gs_status accel_root(const gs__yaml_loader *l, const yaml_node_t *root, const gs_import_opts *o,
                            const accel_lines *lines, gs_scenario *s, gs_diag *ignored)
{
    static const char *const environments[] = {"LOCAL_MACHINE", "AMAZON_SAGEMAKER"};
    accel_read rd = {0, 0, 0, 0, NULL};
    char found[96];
    gs_status rc;
    int e, dist = 0, use_cpu = 0;
    yaml_node_t *v;

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
    if ((v = gs__yaml_lookup(l, root, "use_cpu", NULL)) && (rc = accel_bool(l, v, "use_cpu", &use_cpu)) != GS_OK)
        return rc;
    if (use_cpu)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT, "use_cpu: found true, expected false (gridstep models GPU training)");
    uint64_t nodes = 0, world = 0;
    if ((rc = accel_distributed(l, root, s, &rd, &dist, ignored)) != GS_OK ||
        (rc = accel_precision(l, root, s, ignored)) != GS_OK ||
        (rc = accel_world(l, root, o, dist, s, &nodes, &world)) != GS_OK ||
        (rc = accel_grid(l, &rd, world, s)) != GS_OK ||
        (rc = gs__import_finish(o, nodes, lines->micro, lines->global, s, l->err)) != GS_OK)
        return rc;
    return accel_check_hsdp(l, &rd, s);
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

/* The value of the whole-line comment "# gridstep KEY: VALUE" in text (gridstep writes its
 * model and batch so; accelerate's config has no keys for them), copied into buf; NULL when absent. */
static const char *gridstep_line(const char *text, size_t len, const char *key, char *buf, size_t cap)
{
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "# gridstep %s: ", key);
    for (const char *p = text, *end = text + len; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t ll = eol ? (size_t)(eol - p) : (size_t)(end - p);
        if (ll > (size_t)n && memcmp(p, prefix, (size_t)n) == 0) {
            size_t vl = ll - (size_t)n;
            if (vl >= cap)
                return NULL;
            memcpy(buf, p + n, vl);
            buf[vl] = '\0';
            return buf;
        }
        p = eol ? eol + 1 : end;
    }
    return NULL;
}

/* The model of a "# gridstep model:" line (a preset name or a flow mapping, as a scenario's
 * model: reads it), or --model. */
static gs_status accel_model(const char *text, size_t len, const char *path, const gs_import_opts *o, gs_scenario *s,
                             gs_error *err)
{
    char line[2048];
    const char *model = gridstep_line(text, len, "model", line, sizeof line);
    if (o->model)
        return GS_OK; /* gs__import_base took it */
    if (!model)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --model is required with --from-accelerate: an accelerate config does not describe "
                            "the model (one gridstep wrote says it in a '# gridstep model:' line)",
                            path);
    char yaml[2300];
    const gs_cluster *c = gs_cluster_preset_find(o->cluster); /* gs__import_base found it */
    snprintf(yaml, sizeof yaml, "model: %s\ncluster: {preset: %s, nodes: 1}\ngrid: {dp: %" PRIu64 "}\n", model,
             o->cluster, c ? c->gpus_per_node : 1);
    gs_scenario tmp;
    gs_error e2;
    gs_error_init(&e2);
    if (gs_scenario_load_string(yaml, strlen(yaml), path, &tmp, &e2) != GS_OK)
        return gs_error_set(err, GS_ERR_INPUT, "%s: '# gridstep model: %s': %s", path, model, e2.msg);
    s->model = tmp.model;
    return GS_OK;
}

gs_status gs_import_accelerate_string(const char *text, size_t len, const char *name, const gs_import_opts *o,
                                      gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int loaded = 0;
    const char *path = name ? name : "<accelerate>";
    gs__yaml_loader l = {path, &doc, err};
    accel_lines lines = {0, 0};
    char batch[256];
    gs_status st = gs__import_base(path, o, s, err);
    if (st == GS_OK)
        st = accel_model(text, len, path, o, s, err);
    if (st != GS_OK)
        goto out;
    if (gridstep_line(text, len, "batch", batch, sizeof batch) &&
        sscanf(batch, "{global: %" SCNu64 ", micro: %" SCNu64 "}", &lines.global, &lines.micro) != 2) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: '# gridstep batch: %s': expected {global: G, micro: M}", path, batch);
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
    st = accel_root(&l, root, o, &lines, s, ignored);
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
