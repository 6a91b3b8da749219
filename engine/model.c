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
    gs_layer_params parts;
    uint64_t layer;     /* one block */
    uint64_t embedding; /* token (+ learned position) embedding */
    uint64_t head;      /* final norm + untied LM head */
    uint64_t total;
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

/* Parameters of one norm: RMSNorm has a weight, LayerNorm a weight and a bias. */
static uint64_t norm_params(const gs_model *m, checked_u64 *ck)
{
    return ck_mul(ck, m->hidden, m->norm == GS_NORM_LAYERNORM ? 2 : 1);
}

/* Nominal models: the total is given; blocks get floor(total / layers) each, split 1/3 attention
 * and 2/3 MLP (remainder to MLP); the embedding takes what is left over; no head, no norms. */
static void count_nominal(const gs_model *m, model_counts *c)
{
    memset(c, 0, sizeof *c);
    c->total = m->nominal_params;
    c->layer = m->layers ? m->nominal_params / m->layers : 0;
    c->embedding = m->nominal_params - m->layers * c->layer; /* layers * layer <= nominal */
    c->head = 0;
    c->parts.attn_split = c->layer / 3;
    c->parts.mlp_split = c->layer - c->parts.attn_split;
}

/* Exact counts from the architecture. Returns 0, or -1 when a count overflows 64 bits. */
static int count_params(const gs_model *m, model_counts *c)
{
    checked_u64 ck = {0};
    const uint64_t h = m->hidden;
    const uint64_t q_dim = ck_mul(&ck, m->heads, effective_head_dim(m));           /* a * d */
    const uint64_t kv_dim = ck_mul(&ck, effective_kv_heads(m), effective_head_dim(m)); /* g * d */
    gs_layer_params *p = &c->parts;

    if (m->nominal_params) {
        count_nominal(m, c);
        return 0;
    }
    memset(c, 0, sizeof *c);

    /* Attention: q (h x a*d), k and v (h x g*d each), o (a*d x h); biases on q, k, v are
     * column-parallel (split by tp), the o-proj bias is added after the row-parallel all-reduce
     * (replicated). */
    p->attn_split = ck_add(&ck, ck_mul(&ck, ck_mul(&ck, h, q_dim), 2), ck_mul(&ck, ck_mul(&ck, h, kv_dim), 2));
    if (m->bias) {
        p->attn_split = ck_add(&ck, p->attn_split, ck_add(&ck, q_dim, ck_mul(&ck, kv_dim, 2)));
        p->attn_replicated = h;
    }

    /* MLP: SwiGLU gate + up (h x ffn) and down (ffn x h); GELU fc1 (h x ffn) and fc2 (ffn x h).
     * Column-parallel biases (gate/up/fc1: ffn each) split, row-parallel down/fc2 bias (h)
     * replicated. */
    const uint64_t mlp_mats = m->mlp == GS_MLP_SWIGLU ? 3 : 2;
    const uint64_t col_mats = mlp_mats - 1;
    p->mlp_split = ck_mul(&ck, ck_mul(&ck, h, m->ffn), mlp_mats);
    if (m->bias) {
        p->mlp_split = ck_add(&ck, p->mlp_split, ck_mul(&ck, m->ffn, col_mats));
        p->mlp_replicated = h;
    }

    p->norm_replicated = ck_mul(&ck, norm_params(m, &ck), 2);

    c->layer = ck_add(&ck, ck_add(&ck, p->attn_split, p->attn_replicated),
                      ck_add(&ck, ck_add(&ck, p->mlp_split, p->mlp_replicated), p->norm_replicated));
    c->embedding = ck_mul(&ck, m->vocab, h);
    if (m->pos == GS_POS_LEARNED)
        c->embedding = ck_add(&ck, c->embedding, ck_mul(&ck, m->seq, h));
    c->head = norm_params(m, &ck);
    if (!m->tied_embeddings)
        c->head = ck_add(&ck, c->head, ck_mul(&ck, m->vocab, h));
    c->total = ck_add(&ck, ck_add(&ck, ck_mul(&ck, m->layers, c->layer), c->embedding), c->head);
    return ck.overflow ? -1 : 0;
}

uint64_t gs_model_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.total : UINT64_MAX;
}

uint64_t gs_model_layer_params(const gs_model *m)
{
    model_counts c;
    return count_params(m, &c) == 0 ? c.layer : UINT64_MAX;
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

void gs_model_layer_param_parts(const gs_model *m, gs_layer_params *out)
{
    model_counts c;
    if (count_params(m, &c) != 0) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = c.parts;
}

double gs_model_train_flops(const gs_model *m, double tokens)
{
    const double h = (double)m->hidden;
    const double attn_dim = (double)m->heads * (double)effective_head_dim(m);     /* a * d */
    const double kv_dim = (double)effective_kv_heads(m) * (double)effective_head_dim(m);
    double matmul_params; /* weights that take part in a GEMM per token */

    if (m->nominal_params) {
        matmul_params = (double)m->nominal_params; /* the 6N rule on the nominal total */
    } else {
        const double mlp_mats = m->mlp == GS_MLP_SWIGLU ? 3.0 : 2.0;
        const double per_layer = 2.0 * h * attn_dim + 2.0 * h * kv_dim + mlp_mats * h * (double)m->ffn;
        matmul_params = (double)m->layers * per_layer + (double)m->vocab * h; /* + LM head */
    }
    /* Scores QK^T and context AV: 2 GEMMs of 2*s*a*d FLOPs per token forward, x3 for training. */
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

gs_status gs_model_validate(gs_model *m, gs_error *err)
{
    if (!m)
        return gs_error_set(err, GS_ERR_INPUT, "model: no description given");
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
