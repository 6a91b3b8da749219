/* Megatron-LM flags -> scenario: a command split as the shell would, every flag mapped, reported
 * as ignored, or refused at FILE:LINE or "argument N" (engine/import.h). */
#include "engine/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/import_internal.h"
#include "engine/units.h"
#include "engine/yaml_doc.h"

/* Megatron-LM's default --make-vocab-size-divisible-by. */
#define IMPORT_MEGATRON_VOCAB_DIVISOR 128
/* Most words one Megatron command may hold. */
#define IMPORT_MAX_WORDS 1024

/* What a flag does to the scenario. */
typedef enum mg_act {
    MG_IGNORE, MG_REFUSE, MG_TP, MG_PP, MG_DP, MG_CP, MG_EP, MG_VPP_LAYERS, MG_VPP_STAGES, MG_SP,
    MG_TPPPDP, MG_MBS, MG_GBS, MG_REC_GRAN, MG_REC_METHOD, MG_REC_NLAYERS, MG_REC_ACT,
    MG_DIST_OPT, MG_CUSTOM_FSDP, MG_DP_SHARD, MG_TORCH_FSDP2, MG_BF16, MG_FP16, MG_LAYERS,
    MG_HIDDEN, MG_HEADS, MG_GQA, MG_GROUPS, MG_FFN, MG_SEQ, MG_MAXPOS, MG_VOCAB, MG_VOCAB_DIV,
    MG_KV_CH, MG_SWIGLU, MG_UNTIE, MG_NORM, MG_POSEMB, MG_NO_POSEMB, MG_ROPE, MG_NO_BIAS,
    MG_ATT_DROP, MG_HID_DROP, MG_ATT_BACKEND, MG_FLASH, MG_OPTIMIZER, MG_OPG, MG_TPCO, MG_OGR, MG_GRAD_FP32, MG_GRAD_BF16, MG_BUCKET, MG_XENT_FUSION, MG_ACT_COUNT
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
    {"overlap-grad-reduce", MG_SWITCH, MG_OGR, NULL},
    {"overlap-param-gather", MG_SWITCH, MG_OPG, NULL},
    {"tp-comm-overlap", MG_SWITCH, MG_TPCO, NULL},
    {"cross-entropy-loss-fusion", MG_SWITCH, MG_XENT_FUSION, NULL},
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
        return gs__import_ignored(ignored, err,
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
                                "%s: found '%s', expected a --flag (a value follows its flag)%s",
                                where, t,
                                t[0] == '$' ? "; shell variables are not expanded: give the flags "
                                              "they hold"
                                            : "");
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
            if ((rc = gs__import_ignored(ignored, err, "%s: --%s: ignored: %s", where, f->name,
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
        case MG_VOCAB: case MG_VOCAB_DIV: case MG_KV_CH: case MG_BUCKET:
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
                (rc = gs__import_ignored(ignored, err,
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
        else if ((rc = gs__import_ignored(ignored, err,
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
    uint64_t multiple, padded; /* Megatron-LM pads the vocabulary to a multiple of div x tp */
    if (gs_mul_u64(div, tp, &multiple) != 0 || gs_add_u64(vocab, multiple - 1, &padded) != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --make-vocab-size-divisible-by %llu: padding the vocabulary (%llu) to a multiple "
                            "of it times the tensor-parallel size (%llu) overflows 64 bits; expected a divisor like "
                            "128",
                            origin ? origin : "--from-megatron", (unsigned long long)div, (unsigned long long)vocab,
                            (unsigned long long)tp);
    m->vocab = padded / multiple * multiple;
    m->tied_embeddings = !st->given[MG_UNTIE];
    m->bias = !st->given[MG_NO_BIAS];
    char *e1 = NULL, *e2 = NULL; /* both rates a number and zero (not "lots", which strtod reads as 0) */
    int drop_off = st->given[MG_ATT_DROP] && st->given[MG_HID_DROP] &&
                   strtod(st->str[MG_ATT_DROP], &e1) == 0.0 && e1 != st->str[MG_ATT_DROP] && !*e1 &&
                   strtod(st->str[MG_HID_DROP], &e2) == 0.0 && e2 != st->str[MG_HID_DROP] && !*e2;
    m->dropout = !drop_off;
    /* the rates exec draws its masks with (Megatron-LM's default 0.1 each) */
    for (int d = 0; d < 2 && m->dropout; d++) {
        int key = d ? MG_HID_DROP : MG_ATT_DROP;
        char *end = NULL;
        double p = st->given[key] ? strtod(st->str[key], &end) : GS_DROPOUT_DEFAULT;
        if (!(p >= 0.0 && p < 1.0) || (end && (end == st->str[key] || *end))) /* "lots" is no rate */
            return gs_error_set(err, GS_ERR_INPUT, "%s: --%s %s: expected a probability 0 <= p < 1",
                                mg_where(origin, ws, st->at[key], where, sizeof where),
                                d ? "hidden-dropout" : "attention-dropout", st->str[key]);
        *(d ? &m->hidden_dropout : &m->attention_dropout) = p;
    }
    if (!m->dropout)
        m->attention_dropout = m->hidden_dropout = 0.0;
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
        (rc = gs__import_ignored(ignored, err,
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
    g->framework = GS_FW_MEGATRON; /* the flags are Megatron-LM's: its fused kernels */
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
               (rc = gs__import_ignored(ignored, err,
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
        (rc = gs__import_ignored(ignored, err,
                           "%s: --recompute-num-layers %" PRIu64 ": ignored: uniform groups of "
                           "layers keep fewer checkpoints; gridstep keeps one per layer",
                           mg_where(origin, ws, st->at[MG_REC_NLAYERS], where, sizeof where),
                           st->u[MG_REC_NLAYERS])) != GS_OK)
        return rc;
    if (g->recompute != GS_RECOMPUTE_FULL) {
        static const mg_act only_full[] = {MG_REC_METHOD, MG_REC_NLAYERS};
        for (int i = 0; i < 2; i++)
            if (st->given[only_full[i]] &&
                (rc = gs__import_ignored(ignored, err,
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
    /* gradients (Megatron-LM's validate_args): under bf16 accumulated and reduced in fp32 unless
     * --grad-reduce-in-bf16 (which wins over --accumulate-allreduce-grads-in-fp32); under fp16
     * in fp16 unless --accumulate-allreduce-grads-in-fp32; fp32 training keeps fp32 */
    int bf16 = g->precision == GS_PREC_BF16;
    if (st->given[MG_GRAD_BF16] && !bf16 &&
        (rc = gs__import_ignored(ignored, err, "%s: --grad-reduce-in-bf16: ignored: Megatron-LM reads it only with "
                                               "--bf16",
                                 mg_where(origin, ws, st->at[MG_GRAD_BF16], where, sizeof where))) != GS_OK)
        return rc;
    if (st->given[MG_GRAD_BF16] && bf16 && st->given[MG_GRAD_FP32] &&
        (rc = gs__import_ignored(ignored, err, "%s: --accumulate-allreduce-grads-in-fp32: ignored: "
                                               "--grad-reduce-in-bf16 wins under --bf16 (Megatron-LM)",
                                 mg_where(origin, ws, st->at[MG_GRAD_FP32], where, sizeof where))) != GS_OK)
        return rc;
    if (bf16)
        g->grad_dtype = st->given[MG_GRAD_BF16] ? GS_PREC_BF16 : GS_PREC_FP32;
    else
        g->grad_dtype = g->precision == GS_PREC_FP16 && st->given[MG_GRAD_FP32] ? GS_PREC_FP32 : -1;
    /* DDP / distributed-optimizer buckets, in parameters: --ddp-bucket-size, else Megatron-Core's
     * max(40M, 1M x dp) (DistributedDataParallel); gridstep splits each unit's gradient into
     * buckets of that many bytes, rounded up to a whole MiB (strategy.bucket_mb's unit) */
    /* DDP and the distributed optimizer reduce under the backward only with --overlap-grad-reduce
     * (otherwise in one bucket after it); Megatron-FSDP's reduce-scatters are per layer anyway */
    g->overlap_grad_reduce = st->given[MG_OGR] || st->given[MG_CUSTOM_FSDP] || st->given[MG_TORCH_FSDP2] ||
                             (g->sharding == GS_SHARD_ZERO2 && g->grad_sync != GS_GRAD_SYNC_LAST);
    {
        uint64_t dp = s->grid.dp ? s->grid.dp : 1, bucket = 40000000, bytes;
        if (dp > 40 && gs_mul_u64(dp, 1000000, &bucket) != 0)
            bucket = UINT64_MAX;
        if (st->given[MG_BUCKET])
            bucket = st->u[MG_BUCKET];
        if (gs_mul_u64(bucket, gs_grad_bytes(g), &bytes) != 0 || bytes > UINT64_MAX - ((1u << 20) - 1))
            return gs_error_set(err, GS_ERR_INPUT, "%s: --ddp-bucket-size: found %" PRIu64 " parameters, too large",
                                mg_where(origin, ws, st->at[MG_BUCKET], where, sizeof where), bucket);
        g->bucket_bytes = (bytes + ((1u << 20) - 1)) >> 20 << 20;
    }
    /* Megatron-Core's DistributedDataParallel buckets only model chunk 0 of pipeline rank 0
     * (bucket_size None elsewhere: one bucket per model chunk); Megatron-FSDP and torch FSDP2 are
     * other classes, reducing per unit */
    if (!st->given[MG_CUSTOM_FSDP] && !st->given[MG_TORCH_FSDP2] && gs_strategy_can_bucket_first(g))
        g->bucket_stages = GS_BUCKET_STAGES_FIRST;
    /* overlaps: the distributed optimizer's parameter all-gather under the next forward (Megatron
     * asserts the distributed optimizer); TE's userbuffer overlap of the TP collectives (Megatron
     * asserts sequence parallelism) */
    if (st->given[MG_OPG]) {
        const char *at = mg_where(origin, ws, st->at[MG_OPG], where, sizeof where);
        if (!st->given[MG_OGR] && g->sharding != GS_SHARD_NO_SHARD)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --overlap-param-gather needs --overlap-grad-reduce (Megatron-LM asserts "
                                "it): found no --overlap-grad-reduce",
                                at);
        if (g->sharding == GS_SHARD_ZERO1 || g->sharding == GS_SHARD_ZERO2)
            g->overlap_param_gather = 1;
        else if (g->sharding == GS_SHARD_NO_SHARD)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --overlap-param-gather needs --use-distributed-optimizer (Megatron-LM "
                                "asserts it): found no distributed optimizer",
                                at);
        else if ((rc = gs__import_ignored(ignored, err,
                                          "%s: --overlap-param-gather: ignored: Megatron-FSDP gathers each "
                                          "layer before its forward anyway (the %s schedule)",
                                          at, gs_sharding_name(g->sharding))) != GS_OK)
            return rc;
    }
    if (st->given[MG_TPCO]) {
        const char *at = mg_where(origin, ws, st->at[MG_TPCO], where, sizeof where);
        if (s->grid.tp > 1 && !g->sequence_parallel)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --tp-comm-overlap needs --sequence-parallel (Megatron-LM asserts it): "
                                "found tensor-model-parallel-size %llu without it",
                                at, (unsigned long long)s->grid.tp);
        if (s->grid.tp > 1)
            g->tp_comm_overlap = 1;
        else if ((rc = gs__import_ignored(ignored, err,
                                          "%s: --tp-comm-overlap: ignored: tensor-model-parallel-size 1 has "
                                          "no TP communication to overlap",
                                          at)) != GS_OK)
            return rc;
    }
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
    /* the loss: Megatron's vocab_parallel_cross_entropy (tensor ops) unless fused */
    g->cross_entropy = st->given[MG_XENT_FUSION] ? GS_XENT_FUSED : GS_XENT_UNFUSED;
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
    if ((rc = gs__import_base(origin ? origin : "megatron", o, s, err)) != GS_OK ||
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
    rc = gs__import_finish(o, nodes, st->given[MG_MBS] ? st->u[MG_MBS] : 0,
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
