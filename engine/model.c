/* Decoder-only transformer descriptions: the preset table, validation, exact parameter counts
 * (Megatron-style accounting) and model FLOPs. */
#include "engine/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine/hardware.h" /* gs_edit_distance, gs_name_closer */

/* ------------------------------------------------------------------------- presets ----- */

/* Llama family (Touvron et al. 2023, Llama 2; Meta Llama 3 / 3.1 model cards and HF
 * config.json): RMSNorm (weight only, 2 per block + final), SwiGLU MLP (gate, up, down), no
 * biases, RoPE, untied LM head, no dropout. */
#define GS__LLAMA(nm, l, h, a, kv, f, v, s, src)                                                \
    {                                                                                        \
        .name = nm, .layers = l, .hidden = h, .heads = a, .kv_heads = kv, .head_dim = (h) / (a), \
        .ffn = f, .vocab = v, .seq = s, .tied_embeddings = 0, .bias = 0, .dropout = 0,          \
        .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,                   \
        .nominal_params = 0, .source = src                                                   \
    }

/* Megatron GPT (Shoeybi et al. 2019; Narayanan et al. 2021): LayerNorm (weight + bias), GELU MLP
 * with ffn = 4h, biases on every linear, learned absolute positions, tied embedding / LM head,
 * dropout. Per block 12h^2 + 13h parameters. */
#define GS__MEGATRON_GPT(nm, l, h, a, v, s, src)                                                \
    {                                                                                        \
        .name = nm, .layers = l, .hidden = h, .heads = a, .kv_heads = a, .head_dim = (h) / (a),  \
        .ffn = 4 * (h), .vocab = v, .seq = s, .tied_embeddings = 1, .bias = 1, .dropout = 1,    \
        .attention_dropout = GS_DROPOUT_DEFAULT, .hidden_dropout = GS_DROPOUT_DEFAULT,          \
        .norm = GS_NORM_LAYERNORM, .mlp = GS_MLP_GELU, .pos = GS_POS_LEARNED,                \
        .nominal_params = 0, .source = src                                                   \
    }

/* Mixtral (Jiang et al. 2024, "Mixtral of Experts"; mistralai config.json): the Llama block
 * (RMSNorm, GQA, RoPE, untied) with every MLP a sparse MoE of 8 SwiGLU experts of ffn each,
 * top-2 routing, a bias-free router; no shared experts, no dense blocks, dropless. */
#define GS__MIXTRAL(nm, l, h, a, kv, f, v, s, src)                                              \
    {                                                                                        \
        .name = nm, .layers = l, .hidden = h, .heads = a, .kv_heads = kv, .head_dim = (h) / (a), \
        .ffn = f, .vocab = v, .seq = s, .tied_embeddings = 0, .bias = 0, .dropout = 0,          \
        .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,                   \
        .moe = {.experts = 8, .top_k = 2, .expert_ffn = f, .every = 1}, .nominal_params = 0, .source = src \
    }

#define GS__NAR21_SRC(row)                                                                   \
    "Narayanan et al. SC'21 Table 1 (run " row "): layers, hidden, heads, ffn = 4h, "        \
    "vocab 51200 (Megatron-padded GPT-2 BPE), seq 2048"

static const gs_model model_presets[] = {
    /* 32 x (4*4096^2 + 3*4096*11008 + 2*4096) + 2*32000*4096 + 4096 = 6,738,415,616 */
    GS__LLAMA("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096,
              "Llama 2 (Touvron et al. 2023) / meta-llama/Llama-2-7b-hf config.json"),
    GS__LLAMA("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096,
              "Llama 2 (Touvron et al. 2023) / meta-llama/Llama-2-13b-hf config.json"),
    GS__LLAMA("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096,
              "Llama 2 (Touvron et al. 2023) / meta-llama/Llama-2-70b-hf config.json (GQA, 8 kv heads)"),
    GS__LLAMA("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192,
              "Meta Llama 3 model card / meta-llama/Meta-Llama-3-8B config.json"),
    GS__LLAMA("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192,
              "Meta Llama 3 model card / meta-llama/Meta-Llama-3-70B config.json"),
    GS__LLAMA("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192,
              "Llama 3 herd paper (Dubey et al. 2024) / meta-llama/Llama-3.1-405B config.json; "
              "seq 8192 = pre-training length"),
    /* Per block 4096 x (4096 + 2 x 1024 + 4096) attention + 2 x 4096 norms + 8 x 4096 router
     * + 8 x 3 x 4096 x 14336 experts = 1,451,270,144; x 32 + 2 x 32000 x 4096 + 4096 =
     * 46,702,792,704 total; with 2 experts a block is 394,305,536: 12,879,925,248 active. */
    GS__MIXTRAL("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768,
                "Mixtral of Experts (Jiang et al. 2024) / mistralai/Mixtral-8x7B-v0.1 config.json: "
                "8 experts, top-2; seq 32768 = the paper's pre-training context"),
    GS__MIXTRAL("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 65536,
                "Mistral AI's Mixtral 8x22B announcement / mistralai/Mixtral-8x22B-Instruct-v0.1 "
                "config.json: 8 experts, top-2, vocab 32768 (the v3 tokenizer; the v0.1 base "
                "checkpoint's 32000 gives 9,437,184 fewer); seq 65536 = its context window"),
    /* DeepSeek-V3 (DeepSeek-AI 2024, technical report sec. 4.2; deepseek-ai/DeepSeek-V3
     * config.json): 61 blocks, the first 3 (first_k_dense_replace) with a dense SwiGLU MLP of
     * 18432, the other 58 with 256 routed experts of 2048, top-8, and 1 shared expert; MLA
     * counted exactly (q_lora_rank 1536, kv_lora_rank 512, qk_nope = v head dim 128, rope 64);
     * vocab 129280, untied; the multi-token-prediction module (14B) is not part of the 671B
     * main model and is left out; seq 4096 = the pre-training length. The router's 256-entry
     * score-correction bias (aux-loss-free balancing) is a buffer updated outside the optimizer:
     * not counted. */
    {.name = "deepseek-v3", .layers = 61, .hidden = 7168, .heads = 128, .kv_heads = 128, .head_dim = 128,
     .ffn = 18432, .vocab = 129280, .seq = 4096, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 256, .top_k = 8, .expert_ffn = 2048, .shared_experts = 1, .dense_layers = 3, .every = 1,
             .groups = 8, .group_topk = 4},
     .mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .rope_head_dim = 64}, .nominal_params = 0,
     .source = "DeepSeek-V3 technical report (DeepSeek-AI 2024) / deepseek-ai/DeepSeek-V3 config.json: "
               "3 dense blocks (ffn 18432) then 58 MoE blocks of 256 experts (2048) top-8 + 1 shared, "
               "routed within 4 of 8 groups (n_group, topk_group); MLA counted exactly; MTP module "
               "excluded; seq 4096 = pre-training length"},
    /* DeepSeek-V2 (DeepSeek-AI 2024, arXiv 2405.04434, sec. 3.1; deepseek-ai/DeepSeek-V2
     * config.json): 60 blocks, the first with a dense SwiGLU MLP of 12288, the other 59 with 160
     * routed experts of 1536, top-6, and 2 shared experts; MLA with q_lora_rank 1536, kv_lora_rank
     * 512, qk_nope = v head dim 128, rope 64; vocab 102400, untied; 236B total as published (21B
     * activated per token); seq 4096 = the pre-training length. torchtitan's deepseek_v3 flavor
     * "236B". */
    {.name = "deepseek-v2", .layers = 60, .hidden = 5120, .heads = 128, .kv_heads = 128, .head_dim = 128,
     .ffn = 12288, .vocab = 102400, .seq = 4096, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 160, .top_k = 6, .expert_ffn = 1536, .shared_experts = 2, .dense_layers = 1, .every = 1,
             .groups = 8, .group_topk = 3},
     .mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .rope_head_dim = 64}, .nominal_params = 0,
     .source = "DeepSeek-V2 (DeepSeek-AI 2024, arXiv 2405.04434) / deepseek-ai/DeepSeek-V2 config.json: "
               "1 dense block (ffn 12288) then 59 MoE blocks of 160 experts (1536) top-6 + 2 shared, "
               "routed within 3 of 8 groups (n_group, topk_group); MLA counted exactly; 236B total; "
               "torchtitan deepseek_v3 236B"},
    /* DeepSeek-V2-Lite (deepseek-ai/DeepSeek-V2-Lite config.json and model card: 15.7B total,
     * 2.4B activated): 27 blocks, the first dense (ffn 10944), 26 with 64 routed experts of 1408,
     * top-6, and 2 shared; MLA without a query latent (q_lora_rank 0), kv_lora_rank 512, head
     * dims 128 + rope 64; vocab 102400, untied; seq 4096. torchtitan's deepseek_v3 flavor "16B". */
    {.name = "deepseek-v2-lite", .layers = 27, .hidden = 2048, .heads = 16, .kv_heads = 16, .head_dim = 128,
     .ffn = 10944, .vocab = 102400, .seq = 4096, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 64, .top_k = 6, .expert_ffn = 1408, .shared_experts = 2, .dense_layers = 1, .every = 1},
     .mla = {.q_lora_rank = 0, .kv_lora_rank = 512, .rope_head_dim = 64}, .nominal_params = 0,
     .source = "deepseek-ai/DeepSeek-V2-Lite config.json and model card: 1 dense block (ffn 10944) then 26 "
               "MoE blocks of 64 experts (1408) top-6 + 2 shared; MLA with q_lora_rank 0; 15.7B total; "
               "torchtitan deepseek_v3 16B"},
    /* Llama 4 (Meta's Llama 4 model cards; meta-llama/Llama-4-Scout-17B-16E and
     * Llama-4-Maverick-17B-128E config.json, text_config): 48 blocks of hidden 5120, 40 heads of 128,
     * 8 KV heads, vocab 202048, untied; MoE blocks of `experts` routed experts of 8192
     * (intermediate_size), top-1, and 1 shared expert of 8192; Maverick's
     * interleave_moe_layer_step 2 makes blocks 1, 3, .., 47 MoE blocks and the others dense
     * SwiGLU MLPs of 16384 (intermediate_size_mlp); Scout's step 1, every block. The text model
     * only: Scout 107,769,861,120 and Maverick 400,711,848,960 parameters (the cards' 109B and
     * 400B totals also count the vision encoder), 17.2B active each (the cards' 17B). The QK norm
     * has no weights; iRoPE's chunked attention is run as full causal attention; seq 8192 =
     * torchtitan's llama4 training length. */
    {.name = "llama4-scout", .layers = 48, .hidden = 5120, .heads = 40, .kv_heads = 8, .head_dim = 128,
     .ffn = 16384, .vocab = 202048, .seq = 8192, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 16, .top_k = 1, .expert_ffn = 8192, .shared_experts = 1, .every = 1}, .nominal_params = 0,
     .source = "meta-llama/Llama-4-Scout-17B-16E config.json (text_config): 48 MoE blocks of 16 experts (8192) "
               "top-1 + 1 shared; text model 107.8B (the card's 109B counts the vision encoder), 17B active"},
    {.name = "llama4-maverick", .layers = 48, .hidden = 5120, .heads = 40, .kv_heads = 8, .head_dim = 128,
     .ffn = 16384, .vocab = 202048, .seq = 8192, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 128, .top_k = 1, .expert_ffn = 8192, .shared_experts = 1, .dense_layers = 1, .every = 2},
     .nominal_params = 0,
     .source = "meta-llama/Llama-4-Maverick-17B-128E config.json (text_config): interleave_moe_layer_step 2, "
               "24 MoE blocks of 128 experts (8192) top-1 + 1 shared between 24 dense blocks (ffn 16384); "
               "text model 400.7B, 17B active"},
    /* Qwen3 MoE (Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B config.json; Qwen3 technical report,
     * Yang et al. 2025, Table 2): every block a MoE block of 128 experts (moe_intermediate_size),
     * top-8, no shared expert; 32 or 64 query heads of 128 over 4 KV heads, wider than hidden;
     * vocab 151936, untied; seq 4096 = the pre-training stages' length. Counted: 30,532,110,336
     * (30.5B, 3.35B active) and 235,093,610,496 (235B, 22.19B active), the cards' 30.5B / 3.3B and
     * 235B / 22B; the QK norms' 256 weights a block are not counted. ffn is the dense
     * intermediate_size, which no block uses. */
    {.name = "qwen3-30b-a3b", .layers = 48, .hidden = 2048, .heads = 32, .kv_heads = 4, .head_dim = 128,
     .ffn = 6144, .vocab = 151936, .seq = 4096, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 128, .top_k = 8, .expert_ffn = 768, .every = 1}, .nominal_params = 0,
     .source = "Qwen/Qwen3-30B-A3B config.json: 48 MoE blocks of 128 experts (768) top-8, 32 x 128 query "
               "heads over 4 KV heads; 30.5B total, 3.3B active (QK norms not counted)"},
    {.name = "qwen3-235b-a22b", .layers = 94, .hidden = 4096, .heads = 64, .kv_heads = 4, .head_dim = 128,
     .ffn = 12288, .vocab = 151936, .seq = 4096, .tied_embeddings = 0, .bias = 0, .dropout = 0,
     .norm = GS_NORM_RMSNORM, .mlp = GS_MLP_SWIGLU, .pos = GS_POS_ROPE,
     .moe = {.experts = 128, .top_k = 8, .expert_ffn = 1536, .every = 1}, .nominal_params = 0,
     .source = "Qwen/Qwen3-235B-A22B config.json: 94 MoE blocks of 128 experts (1536) top-8, 64 x 128 query "
               "heads over 4 KV heads; 235B total, 22B active (QK norms not counted)"},
    /* GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, 96 heads, ctx 2048.
     * Vocab: 51200, the GPT-2 BPE's 50257 padded by Megatron to a multiple of 128 * tp (as in the
     * NAR21 rows below); the unpadded count is 11,587,584 smaller (174,604,259,328). */
    GS__MEGATRON_GPT("gpt3-175b", 96, 12288, 96, 51200, 2048,
                     "GPT-3 (Brown et al. 2020, Table 2.1) in Megatron form: vocab 51200 "
                     "(50257 padded), tied embeddings, learned positions"),
    GS__MEGATRON_GPT("gpt-1.7b", 24, 2304, 24, 51200, 2048, GS__NAR21_SRC("NAR21-T1-1")),
    GS__MEGATRON_GPT("gpt-3.6b", 30, 3072, 32, 51200, 2048, GS__NAR21_SRC("NAR21-T1-2")),
    GS__MEGATRON_GPT("gpt-7.5b", 36, 4096, 32, 51200, 2048, GS__NAR21_SRC("NAR21-T1-3")),
    GS__MEGATRON_GPT("gpt-18.4b", 40, 6144, 48, 51200, 2048, GS__NAR21_SRC("NAR21-T1-4")),
    GS__MEGATRON_GPT("gpt-39.1b", 48, 8192, 64, 51200, 2048, GS__NAR21_SRC("NAR21-T1-5")),
    GS__MEGATRON_GPT("gpt-76.1b", 60, 10240, 80, 51200, 2048, GS__NAR21_SRC("NAR21-T1-6")),
    GS__MEGATRON_GPT("gpt-145.6b", 80, 12288, 96, 51200, 2048, GS__NAR21_SRC("NAR21-T1-7")),
    GS__MEGATRON_GPT("gpt-310.1b", 96, 16384, 128, 51200, 2048, GS__NAR21_SRC("NAR21-T1-8")),
    GS__MEGATRON_GPT("gpt-529.6b", 105, 20480, 128, 51200, 2048, GS__NAR21_SRC("NAR21-T1-9")),
    GS__MEGATRON_GPT("gpt-1t", 128, 25600, 160, 51200, 2048, GS__NAR21_SRC("NAR21-T1-10")),
};

#define MODEL_PRESET_COUNT (sizeof model_presets / sizeof model_presets[0])

size_t gs_model_preset_count(void)
{
    return MODEL_PRESET_COUNT;
}

const gs_model *gs_model_preset_at(size_t i)
{
    return i < MODEL_PRESET_COUNT ? &model_presets[i] : NULL;
}

const gs_model *gs_model_preset_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < MODEL_PRESET_COUNT; i++)
        if (strcasecmp(model_presets[i].name, name) == 0)
            return &model_presets[i];
    return NULL;
}

const char *gs_model_preset_nearest(const char *name)
{
    const char *best = NULL;
    if (!name)
        return NULL;
    for (size_t i = 0; i < MODEL_PRESET_COUNT; i++)
        if (gs_name_closer(name, model_presets[i].name, best))
            best = model_presets[i].name;
    return best;
}

/* ------------------------------------------------------------------ parameter counts ----- */

/* Overflow-checked accumulation: the first overflow sets the flag; later results are junk but
 * the flag stays. */
typedef struct checked_u64 {
    int overflow;
} checked_u64;

static uint64_t ck_mul(checked_u64 *ck, uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    if (gs_mul_u64(a, b, &r) != 0)
        ck->overflow = 1;
    return r;
}

static uint64_t ck_add(checked_u64 *ck, uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    if (gs_add_u64(a, b, &r) != 0)
        ck->overflow = 1;
    return r;
}

typedef struct model_counts {
    gs_layer_params parts;       /* a MoE block's; every block's in a dense model */
    gs_layer_params dense_parts; /* a MoE model's dense block's (gs_model_moe_block 0); == parts when dense */
    uint64_t layer;              /* one block: the sum of parts */
    uint64_t dense_layer;        /* one dense block: the sum of dense_parts */
    uint64_t active_layer;       /* what one token goes through in a block of `parts` */
    uint64_t embedding;          /* token (+ learned position) embedding */
    uint64_t head;               /* final norm + untied LM head */
    uint64_t total;
    uint64_t active;             /* per token: every block's active part, embedding and head */
} model_counts;

static uint64_t effective_kv_heads(const gs_model *m)
{
    return m->kv_heads ? m->kv_heads : m->heads;
}

static uint64_t effective_head_dim(const gs_model *m)
{
    if (m->head_dim)
        return m->head_dim;
    return m->heads ? m->hidden / m->heads : 0;
}

static uint64_t effective_expert_ffn(const gs_model *m)
{
    return m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn;
}

/* Parameters of a norm over `width` features: RMSNorm has a weight, LayerNorm a weight and a
 * bias. */
static uint64_t norm_width_params(const gs_model *m, uint64_t width, checked_u64 *ck)
{
    return ck_mul(ck, width, m->norm == GS_NORM_LAYERNORM ? 2 : 1);
}

/* Parameters of one norm over the hidden size. */
static uint64_t norm_params(const gs_model *m, checked_u64 *ck)
{
    return norm_width_params(m, m->hidden, ck);
}

static uint64_t parts_sum(const gs_layer_params *p, checked_u64 *ck)
{
    return ck_add(ck, ck_add(ck, p->attn_split, p->attn_replicated),
                  ck_add(ck, ck_add(ck, p->mlp_split, p->mlp_replicated), p->norm_replicated));
}

/* Nominal models: the total is given; blocks get floor(total / layers) each, split 1/3 attention
 * and 2/3 MLP (remainder to MLP); the embedding takes what is left over; no head, no norms. */
static void count_nominal(const gs_model *m, model_counts *c)
{
    memset(c, 0, sizeof *c);
    c->total = m->nominal_params;
    c->active = m->nominal_params;
    c->layer = m->layers ? m->nominal_params / m->layers : 0;
    c->dense_layer = c->active_layer = c->layer;
    c->embedding = m->nominal_params - m->layers * c->layer; /* layers * layer <= nominal */
    c->head = 0;
    c->parts.attn_split = c->layer / 3;
    c->parts.mlp_split = c->layer - c->parts.attn_split;
    c->dense_parts = c->parts;
}

/* MLA (model.h): up-projections and the output split by tp, down-projections and the latent
 * norms replicated. */
static void count_mla(const gs_model *m, checked_u64 *ck, gs_layer_params *p)
{
    const uint64_t h = m->hidden, d = effective_head_dim(m), r = m->mla.rope_head_dim;
    const uint64_t qr = m->mla.q_lora_rank, kr = m->mla.kv_lora_rank;
    const uint64_t qk_dim = ck_mul(ck, m->heads, ck_add(ck, d, r)); /* heads * (d + r) */
    const uint64_t kv_up = ck_mul(ck, m->heads, ck_mul(ck, d, 2));  /* heads * 2d */
    p->attn_split = ck_mul(ck, qr ? qr : h, qk_dim);                 /* q_b, or q */
    p->attn_split = ck_add(ck, p->attn_split, ck_mul(ck, kr, kv_up)); /* kv_b */
    p->attn_split = ck_add(ck, p->attn_split, ck_mul(ck, ck_mul(ck, m->heads, d), h)); /* o */
    p->attn_replicated = ck_add(ck, ck_mul(ck, h, ck_add(ck, kr, r)), norm_width_params(m, kr, ck));
    if (qr)
        p->attn_replicated = ck_add(ck, p->attn_replicated,
                                    ck_add(ck, ck_mul(ck, h, qr), norm_width_params(m, qr, ck)));
}

/* Attention: q (h x a*d), k and v (h x g*d each), o (a*d x h); biases on q, k, v are
 * column-parallel (split by tp), the o-proj bias is added after the row-parallel all-reduce
 * (replicated). MLA: count_mla. */
static void count_attention(const gs_model *m, checked_u64 *ck, gs_layer_params *p)
{
    if (m->mla.kv_lora_rank) {
        count_mla(m, ck, p);
        return;
    }
    const uint64_t h = m->hidden;
    const uint64_t q_dim = ck_mul(ck, m->heads, effective_head_dim(m));               /* a * d */
    const uint64_t kv_dim = ck_mul(ck, effective_kv_heads(m), effective_head_dim(m)); /* g * d */
    p->attn_split = ck_add(ck, ck_mul(ck, ck_mul(ck, h, q_dim), 2), ck_mul(ck, ck_mul(ck, h, kv_dim), 2));
    if (m->bias) {
        p->attn_split = ck_add(ck, p->attn_split, ck_add(ck, q_dim, ck_mul(ck, kv_dim, 2)));
        p->attn_replicated = h;
    }
}

/* One MLP of intermediate size `width`: SwiGLU gate + up (h x width) and down (width x h); GELU
 * fc1 (h x width) and fc2 (width x h). Column-parallel biases (gate/up/fc1: width each) split,
 * the row-parallel down/fc2 bias (h) replicated. */
static void count_mlp(const gs_model *m, uint64_t width, checked_u64 *ck, uint64_t *split, uint64_t *replicated)
{
    const uint64_t mlp_mats = m->mlp == GS_MLP_SWIGLU ? 3 : 2;
    const uint64_t col_mats = mlp_mats - 1;
    *split = ck_mul(ck, ck_mul(ck, m->hidden, width), mlp_mats);
    *replicated = 0;
    if (m->bias) {
        *split = ck_add(ck, *split, ck_mul(ck, width, col_mats));
        *replicated = m->hidden;
    }
}

/* A MoE block's MLP (model.h): every routed expert and the shared experts split by tp, the
 * router replicated. *active gets what one token goes through: router, top_k routed experts,
 * the shared experts. */
static void count_moe_mlp(const gs_model *m, checked_u64 *ck, gs_layer_params *p, uint64_t *active)
{
    uint64_t split, replicated, shared_split = 0, shared_replicated = 0;
    const uint64_t router = ck_mul(ck, m->hidden, m->moe.experts);
    count_mlp(m, effective_expert_ffn(m), ck, &split, &replicated); /* one expert */
    if (m->moe.shared_experts)
        count_mlp(m, ck_mul(ck, m->moe.shared_experts, effective_expert_ffn(m)), ck, &shared_split,
                  &shared_replicated);
    p->mlp_split = ck_add(ck, ck_mul(ck, split, m->moe.experts), shared_split);
    p->mlp_replicated = ck_add(ck, ck_add(ck, ck_mul(ck, replicated, m->moe.experts), shared_replicated), router);
    *active = ck_add(ck, ck_add(ck, router, ck_mul(ck, ck_add(ck, split, replicated), m->moe.top_k)),
                     ck_add(ck, shared_split, shared_replicated));
}

/* Exact counts from the architecture. Returns 0, or -1 when a count overflows 64 bits. */
static int count_params(const gs_model *m, model_counts *c)
{
    checked_u64 ck = {0};
    const uint64_t h = m->hidden;
    gs_layer_params *p = &c->parts, *dp = &c->dense_parts;

    if (m->nominal_params) {
        count_nominal(m, c);
        return 0;
    }
    memset(c, 0, sizeof *c);

    count_attention(m, &ck, dp);
    dp->norm_replicated = ck_mul(&ck, norm_params(m, &ck), 2);
    *p = *dp;
    count_mlp(m, m->ffn, &ck, &dp->mlp_split, &dp->mlp_replicated);
    c->dense_layer = parts_sum(dp, &ck);
    if (m->moe.experts) {
        uint64_t active_mlp = 0;
        count_moe_mlp(m, &ck, p, &active_mlp);
        c->layer = parts_sum(p, &ck);
        c->active_layer = ck_add(&ck, c->layer - p->mlp_split - p->mlp_replicated, active_mlp);
    } else {
        *p = *dp;
        c->layer = c->active_layer = c->dense_layer;
    }

    c->embedding = ck_mul(&ck, m->vocab, h);
    if (m->pos == GS_POS_LEARNED)
        c->embedding = ck_add(&ck, c->embedding, ck_mul(&ck, m->seq, h));
    c->head = norm_params(m, &ck);
    if (!m->tied_embeddings)
        c->head = ck_add(&ck, c->head, ck_mul(&ck, m->vocab, h));
    const uint64_t dense = m->moe.experts ? m->layers - gs_model_moe_blocks(m) : 0;
    const uint64_t blocks = ck_add(&ck, ck_mul(&ck, m->layers - dense, c->layer), ck_mul(&ck, dense, c->dense_layer));
    const uint64_t active = ck_add(&ck, ck_mul(&ck, m->layers - dense, c->active_layer),
                                   ck_mul(&ck, dense, c->dense_layer));
    c->total = ck_add(&ck, ck_add(&ck, blocks, c->embedding), c->head);
    c->active = ck_add(&ck, ck_add(&ck, active, c->embedding), c->head);
    return ck.overflow ? -1 : 0;
}

/* Whether block `layer` is one of a MoE model's dense blocks. */
static int is_dense_block(const gs_model *m, uint64_t layer)
{
    return m->moe.experts && !gs_model_moe_block(m, layer);
}

int gs_model_moe_block(const gs_model *m, uint64_t layer)
{
    uint64_t every = m->moe.every ? m->moe.every : 1;
    return m->moe.experts && layer >= m->moe.dense_layers && (layer - m->moe.dense_layers) % every == 0;
}

uint64_t gs_model_moe_blocks(const gs_model *m)
{
    uint64_t every = m->moe.every ? m->moe.every : 1;
    if (!m->moe.experts || m->moe.dense_layers >= m->layers)
        return 0;
    return (m->layers - m->moe.dense_layers + every - 1) / every;
}

int gs_model_has_dense_blocks(const gs_model *m)
{
    return m->moe.experts && gs_model_moe_blocks(m) < m->layers;
}

uint64_t gs_model_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.total : UINT64_MAX;
}

uint64_t gs_model_active_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.active : UINT64_MAX;
}

uint64_t gs_model_layer_params_at(const gs_model *m, uint64_t layer)
{
    model_counts c;
    if (count_params(m, &c) != 0)
        return UINT64_MAX;
    return is_dense_block(m, layer) ? c.dense_layer : c.layer;
}

uint64_t gs_model_layer_params(const gs_model *m)
{
    return gs_model_layer_params_at(m, m->layers ? m->layers - 1 : 0);
}

uint64_t gs_model_embedding_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.embedding : UINT64_MAX;
}

uint64_t gs_model_head_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.head : UINT64_MAX;
}

void gs_model_layer_param_parts_at(const gs_model *m, uint64_t layer, gs_layer_params *out)
{
    model_counts c;
    if (count_params(m, &c) != 0) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = is_dense_block(m, layer) ? c.dense_parts : c.parts;
}

void gs_model_layer_param_parts(const gs_model *m, gs_layer_params *out)
{
    gs_model_layer_param_parts_at(m, m->layers ? m->layers - 1 : 0, out);
}

/* Matmul weights of one block's attention: q, k, v, o, or MLA's five projections. */
static double attention_matmul_params(const gs_model *m)
{
    const double h = (double)m->hidden, d = (double)effective_head_dim(m), a = (double)m->heads;
    if (!m->mla.kv_lora_rank)
        return 2.0 * h * a * d + 2.0 * h * (double)effective_kv_heads(m) * d;
    const double r = (double)m->mla.rope_head_dim, qr = (double)m->mla.q_lora_rank, kr = (double)m->mla.kv_lora_rank;
    const double q = qr > 0.0 ? h * qr + qr * a * (d + r) : h * a * (d + r);
    return q + h * (kr + r) + kr * a * 2.0 * d + a * d * h;
}

/* Matmul weights one token goes through in all blocks, for MoE or MLA models. */
static double sparse_matmul_params(const gs_model *m)
{
    const double h = (double)m->hidden, mats = m->mlp == GS_MLP_SWIGLU ? 3.0 : 2.0;
    const double dense_mlp = mats * h * (double)m->ffn;
    double moe_mlp = dense_mlp, dense_blocks = 0.0;
    if (m->moe.experts) {
        const double ef = (double)effective_expert_ffn(m);
        moe_mlp = h * (double)m->moe.experts /* router */ +
                  mats * h * ef * ((double)m->moe.top_k + (double)m->moe.shared_experts);
        dense_blocks = (double)(m->layers - gs_model_moe_blocks(m));
    }
    const double attn = attention_matmul_params(m);
    return dense_blocks * (attn + dense_mlp) + ((double)m->layers - dense_blocks) * (attn + moe_mlp);
}

uint64_t gs_moe_rank_rows(const gs_moe *moe, uint64_t tokens)
{
    double load = 1.0 + moe->routing_skew;
    if (moe->capacity_factor > 0.0 && load > moe->capacity_factor)
        load = moe->capacity_factor;
    return (uint64_t)ceil((double)tokens * (double)moe->top_k * load);
}

double gs_model_train_flops(const gs_model *m, double tokens)
{
    const double h = (double)m->hidden;
    const double attn_dim = (double)m->heads * (double)effective_head_dim(m);     /* a * d */
    const double kv_dim = (double)effective_kv_heads(m) * (double)effective_head_dim(m);
    double matmul_params; /* weights that take part in a GEMM per token */

    if (m->nominal_params) {
        matmul_params = (double)m->nominal_params; /* the 6N rule on the nominal total */
    } else if (m->moe.experts || m->mla.kv_lora_rank) {
        matmul_params = sparse_matmul_params(m) + (double)m->vocab * h; /* + LM head */
    } else {
        const double mlp_mats = m->mlp == GS_MLP_SWIGLU ? 3.0 : 2.0;
        const double per_layer = 2.0 * h * attn_dim + 2.0 * h * kv_dim + mlp_mats * h * (double)m->ffn;
        matmul_params = (double)m->layers * per_layer + (double)m->vocab * h; /* + LM head */
    }
    /* Scores QK^T and context AV: 2 GEMMs of 2*s*a*d FLOPs per token forward, x3 for training;
     * MLA's scores are over d + rope_head_dim per head, its context over d. */
    if (m->mla.kv_lora_rank)
        return 6.0 * tokens * matmul_params + 6.0 * (double)m->layers * tokens * (double)m->seq * (double)m->heads *
                                                  (2.0 * (double)effective_head_dim(m) + (double)m->mla.rope_head_dim);
    const double attention = 12.0 * (double)m->layers * tokens * (double)m->seq * attn_dim;
    return 6.0 * tokens * matmul_params + attention;
}

/* ----------------------------------------------------------------------- validation ----- */

static const char *model_label(const gs_model *m)
{
    return m->name[0] ? m->name : "(unnamed)";
}

/* Largest power of two <= 128 that divides hidden: the head size nominal models get. */
static uint64_t nominal_head_dim(uint64_t hidden)
{
    uint64_t d = 128;
    while (d > 1 && hidden % d != 0)
        d /= 2;
    return d;
}

static uint64_t round_units_of_128(double x)
{
    double units = floor(x / 128.0 + 0.5);
    return units < 1.0 ? 128 : 128 * (uint64_t)units;
}

/* Shapes for nominal models (documented in model.h). */
static gs_status fill_nominal_shapes(gs_model *m, gs_error *err)
{
    const double n = (double)m->nominal_params;
    if (m->hidden == 0) {
        if (m->layers)
            m->hidden = round_units_of_128(sqrt(n / (12.0 * (double)m->layers)));
        else
            m->hidden = round_units_of_128(cbrt(128.0 * n / 12.0));
    }
    if (m->layers == 0) {
        double l = floor(n / (12.0 * (double)m->hidden * (double)m->hidden) + 0.5);
        m->layers = l < 1.0 ? 1 : (uint64_t)l;
    }
    if (m->heads == 0)
        m->heads = m->hidden / nominal_head_dim(m->hidden);
    if (m->kv_heads == 0)
        m->kv_heads = m->heads;
    if (m->ffn == 0 && gs_mul_u64(m->hidden, 4, &m->ffn) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW, "model %s: ffn = 4 x hidden (%llu) overflows 64 bits",
                            model_label(m), (unsigned long long)m->hidden);
    if (m->vocab == 0)
        m->vocab = 32000;
    if (m->seq == 0)
        m->seq = 4096;
    if (m->layers > m->nominal_params)
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: params = %llu is smaller than layers = %llu",
                            model_label(m), (unsigned long long)m->nominal_params,
                            (unsigned long long)m->layers);
    return GS_OK;
}

/* The moe fields (model.h); fills expert_ffn. */
static gs_status validate_moe(gs_model *m, gs_error *err)
{
    gs_moe *e = &m->moe;
    if (e->experts == 0) {
        if (e->top_k || e->expert_ffn || e->shared_experts || e->dense_layers || e->every || e->groups ||
            e->group_topk || e->capacity_factor != 0.0 || e->routing_skew != 0.0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "model %s: moe fields given with moe.experts = 0, expected moe.experts >= 2 "
                                "(or no moe fields for a dense model)", model_label(m));
        return GS_OK;
    }
    if (e->experts < 2)
        return gs_error_set(err, GS_ERR_INPUT, "model %s: moe.experts = %llu, expected at least 2",
                            model_label(m), (unsigned long long)e->experts);
    if (e->top_k == 0 || e->top_k > e->experts)
        return gs_error_set(err, GS_ERR_INPUT, "model %s: moe.top_k = %llu, expected 1 .. moe.experts = %llu",
                            model_label(m), (unsigned long long)e->top_k, (unsigned long long)e->experts);
    if (e->dense_layers >= m->layers)
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: moe.dense_layers = %llu leaves no MoE block of layers = %llu, "
                            "expected fewer dense layers than layers",
                            model_label(m), (unsigned long long)e->dense_layers, (unsigned long long)m->layers);
    if (e->every > m->layers)
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: moe.every = %llu, expected at most layers = %llu (a MoE block every "
                            "`every` blocks after the dense ones)",
                            model_label(m), (unsigned long long)e->every, (unsigned long long)m->layers);
    if (e->every == 0)
        e->every = 1;
    if ((e->groups == 0) != (e->group_topk == 0) || (e->groups && e->experts % e->groups) ||
        e->group_topk > e->groups || (e->groups && e->top_k > e->group_topk * (e->experts / e->groups)))
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: moe.groups = %llu, moe.group_topk = %llu, expected both 0 (no group "
                            "limit) or groups dividing experts = %llu, 1 <= group_topk <= groups, and top_k = "
                            "%llu experts within group_topk groups",
                            model_label(m), (unsigned long long)e->groups, (unsigned long long)e->group_topk,
                            (unsigned long long)e->experts, (unsigned long long)e->top_k);
    if (!(e->capacity_factor >= 0.0 && isfinite(e->capacity_factor)))
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: moe.capacity_factor = %g, expected a finite factor >= 0 (0: dropless)",
                            model_label(m), e->capacity_factor);
    if (e->expert_ffn == 0)
        e->expert_ffn = m->ffn;
    return GS_OK;
}

/* The mla fields (model.h); fills kv_heads. */
static gs_status validate_mla(gs_model *m, gs_error *err)
{
    const gs_mla *a = &m->mla;
    if (a->kv_lora_rank == 0) {
        if (a->q_lora_rank || a->rope_head_dim)
            return gs_error_set(err, GS_ERR_INPUT,
                                "model %s: mla.q_lora_rank or mla.rope_head_dim given with mla.kv_lora_rank = 0, "
                                "expected mla.kv_lora_rank > 0 (or no mla fields)", model_label(m));
        return GS_OK;
    }
    if (m->bias)
        return gs_error_set(err, GS_ERR_INPUT, "model %s: bias with mla, expected bias: false (MLA has no biases)",
                            model_label(m));
    if (m->kv_heads == 0)
        m->kv_heads = m->heads;
    if (m->kv_heads != m->heads)
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: kv_heads = %llu with mla, expected kv_heads = heads = %llu (MLA "
                            "expands a key and a value per head)",
                            model_label(m), (unsigned long long)m->kv_heads, (unsigned long long)m->heads);
    return GS_OK;
}

gs_status gs_model_validate(gs_model *m, gs_error *err)
{
    if (!m)
        return gs_error_set(err, GS_ERR_INPUT, "model: no description given");
    if (m->nominal_params && (m->moe.experts || m->mla.kv_lora_rank))
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: params (a nominal count) with %s, expected one of them: a nominal "
                            "model is a dense transformer", model_label(m), m->moe.experts ? "moe" : "mla");
    if (m->nominal_params) {
        gs_status st = fill_nominal_shapes(m, err);
        if (st != GS_OK)
            return st;
    }

    const struct {
        const char *field;
        uint64_t value;
    } sizes[] = {
        {"layers", m->layers}, {"hidden", m->hidden}, {"heads", m->heads},
        {"ffn", m->ffn},       {"vocab", m->vocab},   {"seq", m->seq},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value == 0)
            return gs_error_set(err, GS_ERR_INPUT, "model %s: %s = 0, must be a positive integer",
                                model_label(m), sizes[i].field);

    gs_status st = validate_moe(m, err);
    if (st == GS_OK)
        st = validate_mla(m, err);
    if (st != GS_OK)
        return st;
    if (m->kv_heads == 0)
        m->kv_heads = m->heads;
    if (m->heads % m->kv_heads != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "model %s: heads = %llu is not a multiple of kv_heads = %llu",
                            model_label(m), (unsigned long long)m->heads,
                            (unsigned long long)m->kv_heads);
    if (m->head_dim == 0) {
        if (m->hidden % m->heads != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "model %s: hidden = %llu is not divisible by heads = %llu "
                                "(give head_dim explicitly for such models)",
                                model_label(m), (unsigned long long)m->hidden,
                                (unsigned long long)m->heads);
        m->head_dim = m->hidden / m->heads;
    }

    model_counts c;
    uint64_t state_bytes;
    if (count_params(m, &c) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "model %s: parameter count overflows 64 bits (layers %llu, hidden %llu, "
                            "ffn %llu, vocab %llu)",
                            model_label(m), (unsigned long long)m->layers,
                            (unsigned long long)m->hidden, (unsigned long long)m->ffn,
                            (unsigned long long)m->vocab);
    /* The ledgers count at most 18 bytes per parameter (mixed-precision Adam, fp32 gradients);
     * keep that exact. */
    if (gs_mul_u64(c.total, 18, &state_bytes) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "model %s: %llu parameters x 18 bytes of training state overflows 64 bits",
                            model_label(m), (unsigned long long)c.total);
    return GS_OK;
}

int gs_model_embedding_shared(const gs_model *m)
{
    return m->tied_embeddings || m->mtp_layers;
}
