/* Internal to the Megatron-LM importer (engine/import_megatron.c: flags and the command;
 * import_megatron_map.c: model and strategy; import_megatron_dump.c: the printed argument dump):
 * the flags gridstep maps, what a command said, and the helpers for messages.
 *
 * Ownership: the flag table is static; gs__mg_state borrows the words' text; all else works on
 * caller storage. */
#ifndef GS_IMPORT_MEGATRON_INTERNAL_H
#define GS_IMPORT_MEGATRON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/import_internal.h"

/* Megatron-LM's default --make-vocab-size-divisible-by. */
#define IMPORT_MEGATRON_VOCAB_DIVISOR 128

/* What a flag does to the scenario. */
typedef enum gs__mg_act {
    MG_IGNORE, MG_REFUSE, MG_TP, MG_PP, MG_CP, MG_EP, MG_ETP, MG_EXPERTS, MG_MOE_TOPK, MG_MOE_FFN, MG_MOE_SHARED,
    MG_MOE_CAPACITY, MG_MOE_FREQ, MG_MOE_DISPATCHER, MG_MLA, MG_Q_LORA, MG_KV_LORA, MG_QK_HEAD, MG_QK_POS, MG_V_HEAD,
    MG_VPP_LAYERS, MG_VPP_STAGES, MG_SP,
    MG_TPPPDP, MG_MBS, MG_GBS, MG_REC_GRAN, MG_REC_METHOD, MG_REC_NLAYERS, MG_REC_ACT, MG_REC_MODULES,
    MG_DIST_OPT, MG_CUSTOM_FSDP, MG_DP_SHARD, MG_TORCH_FSDP2, MG_FSDP2_NO_RESHARD, MG_DOI, MG_OUTER_DP,
    MG_BF16, MG_FP16, MG_LAYERS, MG_HIDDEN, MG_HEADS, MG_GQA, MG_GROUPS, MG_FFN, MG_SEQ, MG_MAXPOS,
    MG_VOCAB, MG_PADDED_VOCAB, MG_VOCAB_DIV, MG_KV_CH, MG_SWIGLU, MG_UNTIE, MG_NORM, MG_POSEMB, MG_NO_POSEMB, MG_ROPE,
    MG_NO_BIAS, MG_ATT_DROP, MG_HID_DROP, MG_ATT_BACKEND, MG_FLASH, MG_OPTIMIZER, MG_OPG, MG_TPCO,
    MG_OGR, MG_GRAD_FP32, MG_GRAD_BF16, MG_BUCKET, MG_XENT_FUSION, MG_FIRST_LAYERS, MG_LAST_LAYERS, MG_FP8_FORMAT, MG_FP8_RECIPE,
    MG_FP8_PARAM, MG_CP_COMM, MG_HIER_CP, MG_ACCOUNT_EMB, MG_ACCOUNT_LOSS, MG_MTP, MG_PP_LAYOUT, MG_PA_OPT, MG_EXP_AVG, MG_EXP_AVG_SQ,
    MG_CUDA_GRAPH, MG_CUDA_GRAPH_EXT, MG_CUDA_GRAPH_IMPL, MG_FP8_HIST, MG_FP8_ALGO, MG_FP8_MARGIN, MG_MOE_BACKEND,
    MG_MOE_DEEPEP, MG_MOE_GROUPS, MG_MOE_GROUP_TOPK, MG_EP_OVERLAP, MG_FLEX_SMS, MG_ACT_COUNT
} gs__mg_act;

/* Values a flag takes. */
enum { MG_SWITCH = 0, MG_ONE = 1, MG_MANY = 2 };

typedef struct gs__mg_flag {
    const char *name;    /* without the leading -- */
    int values;          /* MG_SWITCH, MG_ONE or MG_MANY (up to the next --flag) */
    gs__mg_act act;
    const char *why;     /* MG_IGNORE / MG_REFUSE: the reason */
} gs__mg_flag;

/* The flags gridstep maps, ignores for a stated reason, or refuses (every name is Megatron-LM's,
 * engine/megatron_args.tsv). */
extern const gs__mg_flag gs__mg_flags[];
extern const size_t gs__mg_nflags;

/* What the flags said; 0 / -1 = not given. */
typedef struct gs__mg_state {
    uint64_t u[MG_ACT_COUNT];      /* numeric values by action */
    const char *str[MG_ACT_COUNT]; /* text values by action */
    int given[MG_ACT_COUNT];       /* 1 when the flag appeared */
    size_t at[MG_ACT_COUNT];       /* word index of the flag, for messages */
} gs__mg_state;

/* engine/import_megatron_moe.c: a mixture-of-experts model from --num-experts and the --moe-*
 * flags into s->model.moe (over the preset's), --expert-tensor-parallel-size checked against tp,
 * and latent attention from --multi-latent-attention and its sizes into s->model.mla. Nothing
 * when none of these flags was given. */
gs_status gs__mg_moe(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                     gs_error *err);

/* Where word i is, for messages: "PATH:LINE" or "--from-megatron: argument N". */
const char *gs__mg_where(const char *origin, const gs__words *ws, size_t i, char *buf, size_t len);
/* A positive (or, allow_zero, non-negative) integer value of a flag; else an error. */
gs_status gs__mg_count(const char *where, const char *flag, const char *v, uint64_t *out, int allow_zero,
                       gs_error *err);
/* A name from a list (case-insensitive) -> its index; else an error with a hint. */
gs_status gs__mg_choice(const char *where, const char *flag, const char *v, const char *const *names, size_t n,
                        int *out, gs_error *err);

/* The model from the shape flags (or the --model preset) and the strategy from the rest
 * (import_megatron_map.c). tp: the tensor-parallel size (vocabulary padding). */
gs_status gs__mg_model(const char *origin, const gs__words *ws, const gs__mg_state *st, const gs_import_opts *o,
                       uint64_t tp, gs_scenario *s, gs_diag *ignored, gs_error *err);
/* FP8's flags into g (engine/import_megatron_fp8.c). */
gs_status gs__mg_fp8(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_strategy *g,
                     gs_diag *ignored, gs_error *err);
gs_status gs__mg_strategy(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                          gs_diag *ignored, gs_error *err);

/* Megatron-LM's printed argument dump ("---- arguments ----" ... "---- end of arguments ----",
 * one "  name ..... value" line each), when text holds one. */
int gs__mg_is_dump(const char *text);

/* What the dump says beyond flags: world_size and data_parallel_size (0 when absent). */
typedef struct gs__mg_dump_info {
    uint64_t world_size, data_parallel_size;
    unsigned world_line, dp_line;
} gs__mg_dump_info;

/* The dump as the flags that give it (values at Megatron-LM's defaults left out, each word at
 * its dump line), in out (initialized here); the arguments gridstep does not model that differ
 * from their defaults, and the values Megatron derives, go to `ignored` as one summary line. */
gs_status gs__mg_dump_words(const char *text, const char *origin, gs__words *out, gs__mg_dump_info *info,
                            gs_diag *ignored, gs_error *err);

#endif
