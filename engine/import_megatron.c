/* Megatron-LM flags -> scenario: a launch script read as bash would run it (engine/import_shell.c)
 * or Megatron's printed argument dump (import_megatron_dump.c) gives the words; every flag is
 * mapped (import_megatron_map.c), reported as ignored, or refused at FILE:LINE or "argument N"
 * (engine/import.h). Flags Megatron-LM has that gridstep does not model are ignored and listed in
 * one summary line; flags Megatron-LM does not have are errors with a did-you-mean hint. */
#include "engine/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/import_megatron_internal.h"
#include "engine/megatron_args.h"
#include "engine/mesh.h"
#include "engine/schedule.h"
#include "engine/units.h"
#include "engine/yaml_doc.h"

static const char mg_train[] = "training-loop setting: no effect on the step";
static const char mg_io[] = "data, checkpoint or logging setting: no effect on the step";
static const char mg_fusion[] = "kernel fusion is not modelled (kernels are timed by the roofline "
                                "model)";
static const char mg_router[] = "router numerics and load-balancing losses: the load is model.moe.routing_skew";

const gs__mg_flag gs__mg_flags[] = {
    {"tensor-model-parallel-size", MG_ONE, MG_TP, NULL},
    {"pipeline-model-parallel-size", MG_ONE, MG_PP, NULL},
    {"context-parallel-size", MG_ONE, MG_CP, NULL},
    {"cp-comm-type", MG_MANY, MG_CP_COMM, NULL},
    {"hierarchical-context-parallel-sizes", MG_MANY, MG_HIER_CP, NULL},
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
    {"recompute-modules", MG_MANY, MG_REC_MODULES, NULL},
    {"use-distributed-optimizer", MG_SWITCH, MG_DIST_OPT, NULL},
    {"use-megatron-fsdp", MG_SWITCH, MG_CUSTOM_FSDP, NULL},
    {"data-parallel-sharding-strategy", MG_ONE, MG_DP_SHARD, NULL},
    {"use-torch-fsdp2", MG_SWITCH, MG_TORCH_FSDP2, NULL},
    {"torch-fsdp2-no-reshard-after-forward", MG_SWITCH, MG_FSDP2_NO_RESHARD, NULL},
    {"num-distributed-optimizer-instances", MG_ONE, MG_DOI, NULL},
    {"outer-dp-sharding-strategy", MG_ONE, MG_OUTER_DP, NULL},
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
    {"padded-vocab-size", MG_ONE, MG_PADDED_VOCAB, NULL},
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
    {"overlap-grad-reduce", MG_SWITCH, MG_OGR, NULL},
    {"overlap-param-gather", MG_SWITCH, MG_OPG, NULL},
    {"tp-comm-overlap", MG_SWITCH, MG_TPCO, NULL},
    {"cross-entropy-loss-fusion", MG_SWITCH, MG_XENT_FUSION, NULL},
    {"cuda-graph-impl", MG_ONE, MG_CUDA_GRAPH_IMPL, NULL},
    {"enable-cuda-graph", MG_SWITCH, MG_CUDA_GRAPH, NULL},
    {"external-cuda-graph", MG_SWITCH, MG_CUDA_GRAPH_EXT, NULL},
    {"cuda-graph-scope", MG_MANY, MG_IGNORE, "which modules a graph captures: strategy.cuda_graphs captures "
                                             "whole transformer layers"},
    {"cuda-graph-modules", MG_MANY, MG_IGNORE, "which modules a graph captures: strategy.cuda_graphs captures "
                                               "whole transformer layers"},
    {"cuda-graph-warmup-steps", MG_ONE, MG_IGNORE, mg_train},
    {"cross-entropy-fusion-impl", MG_ONE, MG_IGNORE, "which fused cross-entropy kernel (native or te): both "
                                                     "are modelled as strategy.cross_entropy: fused"},
    {"no-gradient-accumulation-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-masked-softmax-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-gelu-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-swiglu-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-bias-dropout-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"no-rope-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"accumulate-allreduce-grads-in-fp32", MG_SWITCH, MG_GRAD_FP32, NULL},
    {"grad-reduce-in-bf16", MG_SWITCH, MG_GRAD_BF16, NULL},
    {"attention-softmax-in-fp32", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"use-mcore-models", MG_SWITCH, MG_IGNORE, "model implementation choice: no effect on the step"},
    {"transformer-impl", MG_ONE, MG_IGNORE, "model implementation choice: no effect on the step"},
    {"ddp-bucket-size", MG_ONE, MG_BUCKET, NULL},
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
    {"num-experts", MG_ONE, MG_EXPERTS, NULL},
    {"expert-tensor-parallel-size", MG_ONE, MG_ETP, NULL},
    {"moe-router-topk", MG_ONE, MG_MOE_TOPK, NULL},
    {"moe-ffn-hidden-size", MG_ONE, MG_MOE_FFN, NULL},
    {"moe-shared-expert-intermediate-size", MG_ONE, MG_MOE_SHARED, NULL},
    {"moe-expert-capacity-factor", MG_ONE, MG_MOE_CAPACITY, NULL},
    {"moe-layer-freq", MG_ONE, MG_MOE_FREQ, NULL},
    {"moe-token-dispatcher-type", MG_ONE, MG_MOE_DISPATCHER, NULL},
    {"moe-flex-dispatcher-backend", MG_ONE, MG_MOE_BACKEND, NULL},
    {"moe-enable-deepep", MG_SWITCH, MG_MOE_DEEPEP, NULL},
    {"moe-router-num-groups", MG_ONE, MG_MOE_GROUPS, NULL},
    {"moe-router-group-topk", MG_ONE, MG_MOE_GROUP_TOPK, NULL},
    {"multi-latent-attention", MG_SWITCH, MG_MLA, NULL},
    {"q-lora-rank", MG_ONE, MG_Q_LORA, NULL},
    {"kv-lora-rank", MG_ONE, MG_KV_LORA, NULL},
    {"qk-head-dim", MG_ONE, MG_QK_HEAD, NULL},
    {"qk-pos-emb-head-dim", MG_ONE, MG_QK_POS, NULL},
    {"v-head-dim", MG_ONE, MG_V_HEAD, NULL},
    {"mtp-num-layers", MG_ONE, MG_MTP, NULL},
    {"moe-grouped-gemm", MG_SWITCH, MG_IGNORE, "the experts are always timed as one grouped GEMM per layer"},
    {"moe-permute-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"moe-router-fusion", MG_SWITCH, MG_IGNORE, mg_fusion},
    {"moe-aux-loss-coeff", MG_ONE, MG_IGNORE, mg_router},
    {"moe-z-loss-coeff", MG_ONE, MG_IGNORE, mg_router},
    {"moe-router-load-balancing-type", MG_ONE, MG_IGNORE, mg_router},
    {"moe-router-score-function", MG_ONE, MG_IGNORE, mg_router},
    {"moe-router-pre-softmax", MG_SWITCH, MG_IGNORE, mg_router},
    {"moe-router-topk-scaling-factor", MG_ONE, MG_IGNORE, mg_router},
    {"moe-router-enable-expert-bias", MG_SWITCH, MG_IGNORE, mg_router},
    {"moe-router-bias-update-rate", MG_ONE, MG_IGNORE, mg_router},
    {"moe-router-dtype", MG_ONE, MG_IGNORE, mg_router},
    {"moe-token-drop-policy", MG_ONE, MG_IGNORE, mg_router},
    {"moe-pad-expert-input-to-capacity", MG_SWITCH, MG_IGNORE,
     "the experts are timed with the busiest rank's rows (model.moe.capacity_factor caps them)"},
    {"moe-shared-expert-overlap", MG_SWITCH, MG_IGNORE,
     "the shared experts run after the routed ones (their overlap with the all-to-alls is not modelled)"},
    {"moe-per-layer-logging", MG_SWITCH, MG_IGNORE, mg_io},
    {"overlap-moe-expert-parallel-comm", MG_SWITCH, MG_EP_OVERLAP, NULL},
    {"moe-flex-dispatcher-num-sms", MG_ONE, MG_FLEX_SMS, NULL},
    {"moe-deepep-num-sms", MG_ONE, MG_FLEX_SMS, NULL},
    {"moe-hybridep-num-sms", MG_ONE, MG_FLEX_SMS, NULL},
    {"delay-wgrad-compute", MG_SWITCH, MG_IGNORE,
     "where each block's weight gradients run inside its backward: a block's backward pieces keep "
     "their FLOPs whole"},
    {"fp8-format", MG_ONE, MG_FP8_FORMAT, NULL},
    {"fp8-recipe", MG_ONE, MG_FP8_RECIPE, NULL},
    {"fp8-param-gather", MG_SWITCH, MG_FP8_PARAM, NULL},
    {"fp8-amax-history-len", MG_ONE, MG_FP8_HIST, NULL},
    {"fp8-amax-compute-algo", MG_ONE, MG_FP8_ALGO, NULL},
    {"fp8-margin", MG_ONE, MG_FP8_MARGIN, NULL},
    {"optimizer-cpu-offload", MG_SWITCH, MG_REFUSE,
     "gridstep's offload moves parameters and optimizer state together (write a scenario with "
     "offload: true and an FSDP strategy)"},
    {"decoder-first-pipeline-num-layers", MG_ONE, MG_FIRST_LAYERS, NULL},
    {"decoder-last-pipeline-num-layers", MG_ONE, MG_LAST_LAYERS, NULL},
    {"account-for-embedding-in-pipeline-split", MG_SWITCH, MG_ACCOUNT_EMB, NULL},
    {"pipeline-model-parallel-layout", MG_ONE, MG_PP_LAYOUT, NULL},
    {"use-precision-aware-optimizer", MG_SWITCH, MG_PA_OPT, NULL},
    {"exp-avg-dtype", MG_ONE, MG_EXP_AVG, NULL},
    {"exp-avg-sq-dtype", MG_ONE, MG_EXP_AVG_SQ, NULL},
    {"account-for-loss-in-pipeline-split", MG_SWITCH, MG_ACCOUNT_LOSS, NULL},
};

const size_t gs__mg_nflags = sizeof gs__mg_flags / sizeof gs__mg_flags[0];

const char *gs__mg_where(const char *origin, const gs__words *ws, size_t i, char *buf, size_t len)
{
    if (origin)
        snprintf(buf, len, "%s:%u", origin, i < ws->n ? ws->w[i].line : 0u);
    else
        snprintf(buf, len, "--from-megatron: argument %zu", i + 1);
    return buf;
}

/* Former names Megatron-LM no longer has, read as their current ones with a note. */
static const struct {
    const char *old_name, *name;
} mg_renamed[] = {
    {"use-custom-fsdp", "use-megatron-fsdp"}, /* renamed in Megatron-LM in Aug 2025 */
};

static const gs__mg_flag *mg_find(const char *name, size_t n)
{
    for (size_t i = 0; i < gs__mg_nflags; i++)
        if (strlen(gs__mg_flags[i].name) == n && strncmp(gs__mg_flags[i].name, name, n) == 0)
            return &gs__mg_flags[i];
    return NULL;
}

gs_status gs__mg_count(const char *where, const char *flag, const char *v, uint64_t *out, int allow_zero,
                       gs_error *err)
{
    if (gs_parse_count(v, out) == 0 && (allow_zero || *out > 0))
        return GS_OK;
    return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found '%s'%s, expected a %s integer", where, flag, v,
                        v[0] == '$' ? " (a variable the script does not set)" : "",
                        allow_zero ? "non-negative" : "positive");
}

gs_status gs__mg_choice(const char *where, const char *flag, const char *v, const char *const *names, size_t n,
                        int *out, gs_error *err)
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
    return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found '%s'%s, expected one of %s", where, flag, v, hint,
                        list);
}

/* Reads the launcher prefix (words [0, end)): torchrun's --nnodes and --nproc_per_node. A value
 * the script leaves to its environment ($SLURM_NNODES) leaves the count to --nodes. */
static gs_status mg_launcher(const char *origin, const gs__words *ws, size_t end, uint64_t *nnodes, uint64_t *nproc,
                             size_t *nproc_at, gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_status rc;
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
        gs__mg_where(origin, ws, i, where, sizeof where);
        if (v[0] == '$') {
            *dst = 0;
            if ((rc = gs__import_ignored(ignored, err,
                                         "%s: launcher %.*s %s: ignored: set outside the script (give --nodes)",
                                         where, (int)n, t, v)) != GS_OK)
                return rc;
            continue;
        }
        if (gs_parse_count(v, dst) != 0 || *dst == 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: launcher %.*s: found '%s', expected a positive integer "
                                "(elastic MIN:MAX ranges are not modelled)",
                                where, (int)n, t, v);
    }
    if (end > 0)
        return gs__import_ignored(ignored, err,
                                  "%s: launcher '%s ... %s': ignored but for --nnodes and "
                                  "--nproc_per_node: no effect on the step",
                                  gs__mg_where(origin, ws, 0, where, sizeof where), ws->w[0].text, ws->w[end].text);
    return GS_OK;
}

/* Megatron-LM flags gridstep does not model, collected for one summary line. */
typedef struct mg_unmodeled {
    char list[720]; /* "--a (line 3), --b (line 7), ..." */
    size_t count, shown;
} mg_unmodeled;

static void unmodeled_add(mg_unmodeled *u, const char *origin, const gs__words *ws, size_t i, const char *name)
{
    size_t len = strlen(u->list);
    char item[160];
    if (origin)
        snprintf(item, sizeof item, "%s--%s (line %u)", u->count ? ", " : "", name, ws->w[i].line);
    else
        snprintf(item, sizeof item, "%s--%s", u->count ? ", " : "", name);
    if (len + strlen(item) + 16 < sizeof u->list) {
        memcpy(u->list + len, item, strlen(item) + 1);
        u->shown++;
    }
    u->count++;
}

static gs_status unmodeled_report(const mg_unmodeled *u, const char *origin, gs_diag *ignored, gs_error *err)
{
    if (!u->count)
        return GS_OK;
    char more[48] = "";
    if (u->shown < u->count)
        snprintf(more, sizeof more, ", and %zu more", u->count - u->shown);
    return gs__import_ignored(ignored, err,
                              "%s: %zu Megatron-LM flag%s: ignored: not modeled (no effect on gridstep's model of "
                              "the step): %s%s",
                              origin ? origin : "--from-megatron", u->count, u->count == 1 ? "" : "s", u->list,
                              more);
}

/* A flag Megatron-LM has and gridstep does not model: its values are skipped as argparse would
 * take them (arity from Megatron's table); words past them up to the next --flag (a quoted value
 * that an unquoted ${ARRAY[@]} split, which argparse would reject) are skipped with a note.
 * *last = the index of its last word. */
static gs_status skip_unmodeled(const gs__mg_arg *a, const gs__words *ws, size_t i, const char *eq,
                                const char *where, size_t *last, gs_diag *ignored, gs_error *err)
{
    size_t k = i;
    int take = a->arity;
    if (eq && take == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found a value '%s', expected none (a switch)", where,
                            a->name, eq + 1);
    if (eq)
        take = take > 0 ? take - 1 : 0;
    if (take > 0) {
        while (take > 0 && k + 1 < ws->n && strncmp(ws->w[k + 1].text, "--", 2) != 0)
            k++, take--;
        if (take > 0)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found %zu value%s, expected %d", where, a->name,
                                k - i, k - i == 1 ? "" : "s", a->arity);
    } else if (!eq && take != 0) { /* +, *, ? */
        while (k + 1 < ws->n && strncmp(ws->w[k + 1].text, "--", 2) != 0) {
            k++;
            if (take == GS__MG_ARITY_OPT)
                break;
        }
        if (take == GS__MG_ARITY_MANY && k == i)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found no value, expected one or more", where,
                                a->name);
    }
    size_t extra = 0;
    while (k + 1 < ws->n && strncmp(ws->w[k + 1].text, "--", 2) != 0)
        k++, extra++;
    *last = k;
    if (extra)
        return gs__import_ignored(ignored, err,
                                  "%s: --%s: %zu more word%s than its %d value%s, skipped with it (argparse would "
                                  "reject them: a value with blanks split by an unquoted expansion? quote it, as "
                                  "\"${ARGS[@]}\")",
                                  where, a->name, extra, extra == 1 ? "" : "s", a->arity, a->arity == 1 ? "" : "s");
    return GS_OK;
}

/* A flag neither gridstep nor Megatron-LM knows: an error with the nearest Megatron-LM name. */
static gs_status unknown_flag(const char *name, size_t nlen, const char *where, gs_error *err)
{
    char bare[128], hint[200] = "";
    snprintf(bare, sizeof bare, "%.*s", (int)(nlen < 120 ? nlen : 120), name);
    const char *near = gs__mg_arg_nearest(bare);
    if (strcmp(bare, "data-parallel-size") == 0)
        snprintf(hint, sizeof hint, " (Megatron-LM derives it: world size / (tensor x pipeline x context "
                                    "parallel size); give torchrun --nnodes or --nodes)");
    else if (near)
        snprintf(hint, sizeof hint, " (did you mean '--%s'?)", near);
    return gs_error_set(err, GS_ERR_INPUT, "%s: found '--%s'%s, expected a Megatron-LM flag (Megatron-LM has no "
                                           "such flag; its flags: %s)",
                        where, bare, hint, gs__mg_args_source);
}

/* The value of flag f at word i (advancing *i past it), or NULL for a switch. */
static gs_status flag_value(const gs__mg_flag *f, const gs__words *ws, size_t *i, const char *eq, const char *where,
                            const char **value, gs_error *err)
{
    *value = NULL;
    if (f->values == MG_SWITCH) {
        if (eq)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found a value '%s', expected none (a switch)", where,
                                f->name, eq + 1);
    } else if (eq) {
        *value = eq + 1;
    } else if (*i + 1 < ws->n && strncmp(ws->w[*i + 1].text, "--", 2) != 0) {
        *value = ws->w[++*i].text;
        if (f->values == MG_MANY)
            while (*i + 1 < ws->n && strncmp(ws->w[*i + 1].text, "--", 2) != 0)
                ++*i;
    } else {
        return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: found no value, expected one", where, f->name);
    }
    return GS_OK;
}

/* Parses the flags of words [first, n) into st. */
static gs_status mg_parse(const char *origin, const gs__words *ws, size_t first, gs__mg_state *st, gs_diag *ignored,
                          gs_error *err)
{
    char where[600];
    mg_unmodeled un;
    memset(&un, 0, sizeof un);
    gs_status rc;
    for (size_t i = first; i < ws->n; i++) {
        const char *t = ws->w[i].text;
        size_t at = i;
        gs__mg_where(origin, ws, i, where, sizeof where);
        if (strncmp(t, "--", 2) != 0 || !t[2])
            return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a --flag (a value follows its flag)%s",
                                where, t,
                                t[0] == '$' ? "; a variable or command the script does not set: give the flags "
                                              "it holds"
                                            : "");
        const char *name = t + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const gs__mg_flag *f = mg_find(name, nlen);
        for (size_t r = 0; !f && r < sizeof mg_renamed / sizeof mg_renamed[0]; r++)
            if (strlen(mg_renamed[r].old_name) == nlen && strncmp(name, mg_renamed[r].old_name, nlen) == 0) {
                f = mg_find(mg_renamed[r].name, strlen(mg_renamed[r].name));
                if ((rc = gs__import_ignored(ignored, err, "%s: --%s: read as --%s, its name in Megatron-LM since Aug "
                                                           "2025 (current Megatron-LM rejects --%s)",
                                             where, mg_renamed[r].old_name, f->name, mg_renamed[r].old_name)) != GS_OK)
                    return rc;
            }
        if (!f) {
            const gs__mg_arg *a = gs__mg_arg_find(name, nlen);
            if (!a)
                return unknown_flag(name, nlen, where, err);
            if ((rc = skip_unmodeled(a, ws, i, eq, where, &i, ignored, err)) != GS_OK)
                return rc;
            unmodeled_add(&un, origin, ws, at, a->name);
            continue;
        }
        const char *value;
        if ((rc = flag_value(f, ws, &i, eq, where, &value, err)) != GS_OK)
            return rc;
        if (f->act == MG_IGNORE) {
            if ((rc = gs__import_ignored(ignored, err, "%s: --%s: ignored: %s", where, f->name, f->why)) != GS_OK)
                return rc;
            continue;
        }
        if (f->act == MG_REFUSE)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s: not supported: %s", where, f->name, f->why);
        st->given[f->act] = 1;
        st->at[f->act] = at;
        st->str[f->act] = value;
        switch (f->act) {
        case MG_TP: case MG_PP: case MG_CP: case MG_EP: case MG_VPP_LAYERS: case MG_VPP_STAGES: case MG_MBS:
        case MG_GBS: case MG_REC_NLAYERS: case MG_LAYERS: case MG_HIDDEN: case MG_HEADS: case MG_GROUPS:
        case MG_FFN: case MG_SEQ: case MG_MAXPOS: case MG_VOCAB: case MG_PADDED_VOCAB: case MG_VOCAB_DIV: case MG_KV_CH:
        case MG_BUCKET: case MG_DOI: case MG_FIRST_LAYERS: case MG_LAST_LAYERS: case MG_ETP: case MG_EXPERTS:
        case MG_MOE_TOPK: case MG_MOE_FFN: case MG_MOE_SHARED: case MG_Q_LORA: case MG_KV_LORA: case MG_QK_HEAD:
        case MG_QK_POS: case MG_V_HEAD: case MG_MTP: case MG_FP8_HIST: case MG_FP8_MARGIN: case MG_MOE_GROUPS:
        case MG_MOE_GROUP_TOPK: case MG_FLEX_SMS:
            if ((rc = gs__mg_count(where, f->name, value, &st->u[f->act], f->act == MG_FP8_MARGIN, err)) != GS_OK)
                return rc;
            break;
        default:
            break;
        }
    }
    return unmodeled_report(&un, origin, ignored, err);
}

/* The index of the first *.py word (the training script), or n when there is none. */
static size_t mg_script_index(const gs__words *ws)
{
    for (size_t i = 0; i < ws->n; i++) {
        size_t l = strlen(ws->w[i].text);
        if (l > 3 && strcmp(ws->w[i].text + l - 3, ".py") == 0)
            return i;
    }
    return ws->n;
}

/* The grid: tp, pp, cp and ep from the flags, dp from the world size (the launcher's nodes,
 * --nodes, or the dump's world_size). */
typedef struct mg_world {
    uint64_t nnodes, nproc; /* the launcher's, 0 when absent */
    size_t nproc_at;
    gs__mg_dump_info dump;
} mg_world;

static gs_status mg_grid(const char *origin, const gs__words *ws, const gs__mg_state *st, const gs_import_opts *o,
                         const mg_world *w, gs_scenario *s, uint64_t *nodes_out, gs_error *err)
{
    char where[600];
    const char *who = origin ? origin : "--from-megatron";
    uint64_t tp = st->given[MG_TP] ? st->u[MG_TP] : 1, pp = st->given[MG_PP] ? st->u[MG_PP] : 1;
    uint64_t cp = st->given[MG_CP] ? st->u[MG_CP] : 1;
    (void)where;
    s->grid.ep = st->given[MG_EP] ? st->u[MG_EP] : 1; /* carved out of dp x cp (engine/mesh.h) */
    s->grid.tp = tp;
    s->grid.pp = pp;
    s->grid.cp = cp; /* Megatron's order tp-cp-ep-dp-pp: cp next to dp, inside it */
    s->grid.cp_outer = 0;
    if (st->given[MG_TPPPDP]) {
        s->grid.order[1] = GS_DIM_PP;
        s->grid.order[2] = GS_DIM_DP;
    }
    uint64_t gpn = s->cluster.gpus_per_node, nodes = o->nodes, tp_pp = tp * pp * cp, world;
    if (w->nproc && w->nproc != gpn)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: launcher --nproc_per_node: found %" PRIu64 ", expected %" PRIu64
                            " (the GPUs per node of cluster %s)",
                            gs__mg_where(origin, ws, w->nproc_at, where, sizeof where), w->nproc, gpn, s->cluster.name);
    if (!nodes)
        nodes = w->nnodes;
    if (!nodes && w->dump.world_size) {
        if (w->dump.world_size % gpn != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s:%u: world_size %" PRIu64 " does not fill whole nodes of %" PRIu64
                                " GPUs (cluster %s), expected a multiple of %" PRIu64 " (or --nodes)",
                                who, w->dump.world_line, w->dump.world_size, gpn, s->cluster.name, gpn);
        nodes = w->dump.world_size / gpn;
    }
    if (!nodes)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: no node count: Megatron-LM takes the world size from the launcher, expected "
                            "--nodes N (or torchrun --nnodes N in the command)",
                            who);
    if (gs_mul_u64(nodes, gpn, &world) != 0 || world % tp_pp != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: tp x pp%s = %" PRIu64 " does not divide the %" PRIu64 " x %" PRIu64
                            " GPUs, expected a divisor of %" PRIu64 " (or --nodes N)",
                            st->given[MG_TP] || st->given[MG_PP]
                                ? gs__mg_where(origin, ws, st->given[MG_TP] ? st->at[MG_TP] : st->at[MG_PP], where,
                                               sizeof where)
                                : who,
                            cp > 1 ? " x cp" : "", tp_pp, nodes, gpn, nodes * gpn);
    s->grid.dp = world / tp_pp;
    if (w->dump.data_parallel_size && w->dump.data_parallel_size != s->grid.dp)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s:%u: data_parallel_size: found %" PRIu64 ", expected %" PRIu64 " = %" PRIu64
                            " GPUs / (tp %" PRIu64 " x pp %" PRIu64 "%s)",
                            who, w->dump.dp_line, w->dump.data_parallel_size, s->grid.dp, world, tp, pp,
                            cp > 1 ? " x cp" : "");
    *nodes_out = nodes;
    return GS_OK;
}

/* Megatron-FSDP's HSDP replicates the sharded model --num-distributed-optimizer-instances times;
 * gridstep's hybrid_shard shards within a node: the replica must be the DP ranks of one node. */
static gs_status mg_check_hsdp(const char *origin, const gs__words *ws, const gs__mg_state *st, const gs_scenario *s,
                               gs_error *err)
{
    char where[600];
    gs_mesh m;
    gs_error e2;
    gs_error_init(&e2);
    if (s->strategy.sharding != GS_SHARD_HYBRID_SHARD || gs_scenario_mesh(s, &m, NULL, &e2) != GS_OK)
        return GS_OK; /* a mesh error is reported where the scenario is used */
    uint64_t intra = 0;
    gs_group_of(&m, GS_GROUP_DP_INTRA, 0, &intra);
    uint64_t k = st->u[MG_DOI];
    if (intra * k != s->grid.dp)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --num-distributed-optimizer-instances: found %" PRIu64 ", expected %" PRIu64
                            ": gridstep's hybrid_shard shards over the %" PRIu64 " data-parallel ranks of a node "
                            "and replicates across the %" PRIu64 " nodes",
                            gs__mg_where(origin, ws, st->at[MG_DOI], where, sizeof where), k,
                            intra ? s->grid.dp / intra : 0, intra, intra ? s->grid.dp / intra : 0);
    return GS_OK;
}

/* The words of the command or dump: launcher prefix read, then the flags parsed into st. */
static gs_status mg_read(const char *args, const char *origin, gs__words *ws, gs__mg_state *st, mg_world *w,
                         gs_diag *ignored, gs_error *err)
{
    gs_status rc;
    if (gs__mg_is_dump(args))
        rc = gs__mg_dump_words(args, origin, ws, &w->dump, ignored, err);
    else
        rc = gs__shell_training_command(args, origin, ws, err);
    if (rc != GS_OK)
        return rc;
    size_t script = mg_script_index(ws);
    size_t first = script < ws->n ? script + 1 : 0;
    if (script < ws->n &&
        (rc = mg_launcher(origin, ws, script, &w->nnodes, &w->nproc, &w->nproc_at, ignored, err)) != GS_OK)
        return rc;
    return mg_parse(origin, ws, first, st, ignored, err);
}

gs_status gs_import_megatron_args(const char *args, const char *origin, const gs_import_opts *o, gs_scenario *s,
                                  gs_diag *ignored, gs_error *err)
{
    const char *who = origin ? origin : "--from-megatron";
    gs__words ws;
    gs__words_init(&ws);
    gs__mg_state *st = calloc(1, sizeof *st);
    mg_world w;
    memset(&w, 0, sizeof w);
    uint64_t nodes = 0;
    gs_status rc = GS_OK;
    if (!st) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory reading the Megatron-LM flags");
        goto out;
    }
    if ((rc = gs__import_base(origin ? origin : "megatron", o, s, err)) != GS_OK ||
        (rc = mg_read(args, origin, &ws, st, &w, ignored, err)) != GS_OK)
        goto out;
    if (o->nodes && w.nnodes && o->nodes != w.nnodes &&
        (rc = gs__import_ignored(ignored, err, "%s: launcher --nnodes %" PRIu64 ": ignored: --nodes %" PRIu64
                                               " given",
                                 who, w.nnodes, o->nodes)) != GS_OK)
        goto out;
    if ((rc = mg_grid(origin, &ws, st, o, &w, s, &nodes, err)) != GS_OK ||
        (rc = gs__mg_model(origin, &ws, st, o, s->grid.tp, s, ignored, err)) != GS_OK ||
        (rc = gs__mg_moe(origin, &ws, st, s, err)) != GS_OK ||
        (rc = gs__mg_strategy(origin, &ws, st, s, ignored, err)) != GS_OK)
        goto out;
    rc = gs__import_finish(o, nodes, st->given[MG_MBS] ? st->u[MG_MBS] : 0, st->given[MG_GBS] ? st->u[MG_GBS] : 0,
                           s, err);
    if (rc == GS_OK)
        rc = mg_check_hsdp(origin, &ws, st, s, err);
out:
    gs__words_fini(&ws);
    free(st);
    return rc;
}

gs_status gs_import_megatron_file(const char *path, const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                  gs_error *err)
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
