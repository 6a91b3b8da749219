/* Check suite for engine/model: presets and their exact parameter counts, the TP split of a
 * block, model FLOPs against Megatron's closed form, nominal models, validation errors. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"

static gs_model copy_preset(const char *name)
{
    const gs_model *p = gs_model_preset_find(name);
    ck_assert_msg(p != NULL, "preset %s missing", name);
    return *p;
}

/* ------------------------------------------------------------------------- presets ----- */

/* Published totals (Hugging Face model cards / safetensors metadata of the released
 * checkpoints), independent of our accounting. */
static const struct {
    const char *name;
    uint64_t params;
} published_llama[] = {
    {"llama2-7b", 6738415616ULL},    {"llama2-13b", 13015864320ULL},
    {"llama2-70b", 68976648192ULL},  {"llama3-8b", 8030261248ULL},
    {"llama3-70b", 70553706496ULL},  {"llama3.1-405b", 405853388800ULL},
};

START_TEST(test_llama_exact_params)
{
    for (size_t i = 0; i < sizeof published_llama / sizeof published_llama[0]; i++) {
        gs_model m = copy_preset(published_llama[i].name);
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        ck_assert_msg(gs_model_params(&m) == published_llama[i].params, "%s: %llu != %llu",
                      published_llama[i].name, (unsigned long long)gs_model_params(&m),
                      (unsigned long long)published_llama[i].params);
    }
}
END_TEST

/* shared/reference/published-runs.csv, NAR21-T1-* rows: model name, params_B (the paper's rounded
 * label), layers, hidden, heads; ffn = 4h, vocab 51200, seq 2048 for every row. */
static const struct {
    const char *name;
    double params_b;
    uint64_t layers, hidden, heads;
} nar21[] = {
    {"gpt-1.7b", 1.7, 24, 2304, 24},        {"gpt-3.6b", 3.6, 30, 3072, 32},
    {"gpt-7.5b", 7.5, 36, 4096, 32},        {"gpt-18.4b", 18.4, 40, 6144, 48},
    {"gpt-39.1b", 39.1, 48, 8192, 64},      {"gpt-76.1b", 76.1, 60, 10240, 80},
    {"gpt-145.6b", 145.6, 80, 12288, 96},   {"gpt-310.1b", 310.1, 96, 16384, 128},
    {"gpt-529.6b", 529.6, 105, 20480, 128}, {"gpt-1t", 1008.0, 128, 25600, 160},
};

START_TEST(test_nar21_rows)
{
    for (size_t i = 0; i < sizeof nar21 / sizeof nar21[0]; i++) {
        gs_model m = copy_preset(nar21[i].name);
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        ck_assert_uint_eq(m.layers, nar21[i].layers);
        ck_assert_uint_eq(m.hidden, nar21[i].hidden);
        ck_assert_uint_eq(m.heads, nar21[i].heads);
        ck_assert_uint_eq(m.ffn, 4 * nar21[i].hidden);
        ck_assert_uint_eq(m.vocab, 51200);
        ck_assert_uint_eq(m.seq, 2048);
        double got_b = (double)gs_model_params(&m) / 1e9;
        ck_assert_msg(fabs(got_b / nar21[i].params_b - 1.0) < 0.03, "%s: %.3f B vs paper %.1f B",
                      nar21[i].name, got_b, nar21[i].params_b);
    }
}
END_TEST

START_TEST(test_gpt3_175b)
{
    gs_model m = copy_preset("gpt3-175b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    /* Megatron accounting by hand: V*h + s*h + l*(12h^2 + 13h) + 2h with V = 51200 (padded),
     * s = 2048, l = 96, h = 12288:
     * 629,145,600 + 25,165,824 + 96 * 1,812,099,072 + 24,576 = 174,615,846,912. */
    ck_assert_uint_eq(gs_model_params(&m), 174615846912ULL);
    ck_assert_int_eq(m.tied_embeddings, 1);
    ck_assert_int_eq(m.pos, GS_POS_LEARNED);
    ck_assert_int_eq(m.norm, GS_NORM_LAYERNORM);
    ck_assert_int_eq(m.mlp, GS_MLP_GELU);
    ck_assert_int_eq(m.dropout, 1);
    /* "175B" label (Brown et al. 2020): within 1%. */
    ck_assert(fabs((double)gs_model_params(&m) / 175e9 - 1.0) < 0.01);
}
END_TEST

START_TEST(test_every_preset_sane)
{
    ck_assert_uint_ge(gs_model_preset_count(), 17);
    ck_assert_ptr_null(gs_model_preset_at(gs_model_preset_count()));
    for (size_t i = 0; i < gs_model_preset_count(); i++) {
        gs_model m = *gs_model_preset_at(i);
        ck_assert_msg(m.source != NULL && m.source[0], "%s has no source", m.name);
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        ck_assert_uint_eq(m.nominal_params, 0);
        if (strncmp(m.name, "qwen3-", 6) == 0) /* configs that give head_dim 128, wider than hidden / heads */
            ck_assert_uint_eq(m.head_dim, 128);
        else if (!m.mla.kv_lora_rank) { /* MLA heads are wider than hidden / heads (deepseek-v3) */
            ck_assert_uint_eq(m.hidden % m.heads, 0);
            ck_assert_uint_eq(m.head_dim * m.heads, m.hidden);
        }
        /* Names are unique under case folding. */
        ck_assert_ptr_eq(gs_model_preset_find(m.name), gs_model_preset_at(i));
    }
}
END_TEST

START_TEST(test_lookup)
{
    ck_assert_ptr_nonnull(gs_model_preset_find("LLaMA2-7B"));
    ck_assert_str_eq(gs_model_preset_find("Llama3.1-405B")->name, "llama3.1-405b");
    ck_assert_ptr_null(gs_model_preset_find("llama2-7"));
    ck_assert_ptr_null(gs_model_preset_find(NULL));
    ck_assert_str_eq(gs_model_preset_nearest("llama2-70"), "llama2-70b");
    ck_assert_str_eq(gs_model_preset_nearest("lama2-13b"), "llama2-13b");
    ck_assert_str_eq(gs_model_preset_nearest("LLAMA3-8"), "llama3-8b");
    ck_assert_str_eq(gs_model_preset_nearest("gpt-18b"), "gpt-18.4b");
    ck_assert_str_eq(gs_model_preset_nearest("gpt3-175"), "gpt3-175b");
}
END_TEST

/* -------------------------------------------------------------------------- counts ----- */

START_TEST(test_llama2_7b_parts)
{
    gs_model m = copy_preset("llama2-7b");
    gs_layer_params p;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    gs_model_layer_param_parts(&m, &p);
    /* MHA, head_dim 128, 32 heads: q, k, v, o are each 4096 x 4096 -> 4 * 4096^2. */
    ck_assert_uint_eq(p.attn_split, 4ULL * 4096 * 4096);
    /* SwiGLU: gate and up 4096 x 11008, down 11008 x 4096 -> 3 * 4096 * 11008. */
    ck_assert_uint_eq(p.mlp_split, 3ULL * 4096 * 11008);
    /* No biases; two RMSNorm weights of 4096. */
    ck_assert_uint_eq(p.attn_replicated, 0);
    ck_assert_uint_eq(p.mlp_replicated, 0);
    ck_assert_uint_eq(p.norm_replicated, 2ULL * 4096);
    ck_assert_uint_eq(gs_model_layer_params(&m), 202383360ULL); /* 67,108,864 + 135,266,304 + 8,192 */
    /* Untied: embedding V*h; head = final RMSNorm h + LM head V*h. */
    ck_assert_uint_eq(gs_model_embedding_params(&m), 32000ULL * 4096);
    ck_assert_uint_eq(gs_model_head_params(&m), 32000ULL * 4096 + 4096);
}
END_TEST

START_TEST(test_gqa_parts)
{
    gs_model m = copy_preset("llama2-70b");
    gs_layer_params p;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    gs_model_layer_param_parts(&m, &p);
    /* q and o 8192 x 8192; k and v 8192 x (8 kv heads * 128) = 8192 x 1024. */
    ck_assert_uint_eq(p.attn_split, 2ULL * 8192 * 8192 + 2ULL * 8192 * 1024);
    ck_assert_uint_eq(p.mlp_split, 3ULL * 8192 * 28672);
}
END_TEST

START_TEST(test_gpt_parts)
{
    gs_model m = copy_preset("gpt-18.4b");
    const uint64_t h = 6144;
    gs_layer_params p;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    gs_model_layer_param_parts(&m, &p);
    /* Megatron: qkv 3h^2 + 3h (bias column-parallel), proj h^2 (+ h bias replicated),
     * fc1 4h^2 + 4h (column-parallel), fc2 4h^2 (+ h replicated), 2 LayerNorms 4h. */
    ck_assert_uint_eq(p.attn_split, 4 * h * h + 3 * h);
    ck_assert_uint_eq(p.attn_replicated, h);
    ck_assert_uint_eq(p.mlp_split, 8 * h * h + 4 * h);
    ck_assert_uint_eq(p.mlp_replicated, h);
    ck_assert_uint_eq(p.norm_replicated, 4 * h);
    ck_assert_uint_eq(gs_model_layer_params(&m), 12 * h * h + 13 * h);
    /* Word + learned position embedding; tied head = final LayerNorm only. */
    ck_assert_uint_eq(gs_model_embedding_params(&m), 51200 * h + 2048 * h);
    ck_assert_uint_eq(gs_model_head_params(&m), 2 * h);
}
END_TEST

START_TEST(test_parts_sum_every_preset)
{
    for (size_t i = 0; i < gs_model_preset_count(); i++) {
        gs_model m = *gs_model_preset_at(i);
        gs_layer_params p;
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        gs_model_layer_param_parts(&m, &p);
        ck_assert_uint_eq(p.attn_split + p.attn_replicated + p.mlp_split + p.mlp_replicated +
                              p.norm_replicated,
                          gs_model_layer_params(&m));
        uint64_t blocks = 0;
        for (uint64_t l = 0; l < m.layers; l++) {
            gs_model_layer_param_parts_at(&m, l, &p);
            ck_assert_uint_eq(p.attn_split + p.attn_replicated + p.mlp_split + p.mlp_replicated +
                                  p.norm_replicated,
                              gs_model_layer_params_at(&m, l));
            blocks += gs_model_layer_params_at(&m, l);
        }
        ck_assert_uint_eq(blocks + gs_model_embedding_params(&m) + gs_model_head_params(&m), gs_model_params(&m));
        if (!m.moe.experts) { /* dense: every block alike, and every parameter active */
            ck_assert_uint_eq(m.layers * gs_model_layer_params(&m) + gs_model_embedding_params(&m) +
                                  gs_model_head_params(&m),
                              gs_model_params(&m));
            ck_assert_uint_eq(gs_model_active_params(&m), gs_model_params(&m));
        }
    }
}
END_TEST

/* --------------------------------------------------------------------------- flops ----- */

START_TEST(test_flops_megatron_closed_form)
{
    /* Megatron's model FLOPs per iteration (Narayanan et al. 2021; reference section 6.1):
     * 72 B s l h^2 (1 + s/(6h) + V/(12 h l)), for ffn = 4h, MHA, biases ignored. */
    const char *names[] = {"gpt-18.4b", "gpt3-175b", "gpt-1t"};
    for (size_t i = 0; i < 3; i++) {
        gs_model m = copy_preset(names[i]);
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        const double B = 512.0, s = 2048.0, l = (double)m.layers, h = (double)m.hidden, V = 51200.0;
        const double expect = 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * l));
        const double got = gs_model_train_flops(&m, B * s);
        ck_assert_msg(fabs(got / expect - 1.0) < 1e-3, "%s: %.6e vs %.6e", names[i], got, expect);
    }
}
END_TEST

START_TEST(test_flops_swiglu_gqa)
{
    /* llama3-8b, one sequence of 8192 tokens, counted by hand:
     * per layer matmul weights q,o 4096^2 each, k,v 4096 x 1024 each, 3 x 4096 x 14336 MLP;
     * LM head 128256 x 4096; attention 12 * l * T * s * (32 * 128). */
    gs_model m = copy_preset("llama3-8b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    const double T = 8192.0;
    const double per_layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336;
    const double expect = 6.0 * T * (32.0 * per_layer + 128256.0 * 4096) + 12.0 * 32 * T * 8192 * 4096;
    ck_assert(fabs(gs_model_train_flops(&m, T) / expect - 1.0) < 1e-12);
    /* Sanity against the 6N rule: the attention term adds 12*l*s*a*d / 6 = 2.15e9 per token
     * (+27%), the embedding lookup is not a matmul (-7%): ratio ~1.20. */
    const double six_n = 6.0 * T * (double)gs_model_params(&m);
    ck_assert(gs_model_train_flops(&m, T) > six_n);
    ck_assert(gs_model_train_flops(&m, T) < 1.25 * six_n);
}
END_TEST

/* ------------------------------------------------------------------------- nominal ----- */

START_TEST(test_nominal_with_shapes)
{
    /* The seed's hand form: params 7e9 with layers 32, hidden 4096. */
    gs_model m = {.nominal_params = 7000000000ULL, .layers = 32, .hidden = 4096};
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_params(&m), 7000000000ULL);
    ck_assert_uint_eq(gs_model_layer_params(&m), 218750000ULL); /* 7e9 / 32 exactly */
    ck_assert_uint_eq(gs_model_embedding_params(&m), 0);
    ck_assert_uint_eq(gs_model_head_params(&m), 0);
    ck_assert_uint_eq(m.heads, 32);    /* 4096 / 128 */
    ck_assert_uint_eq(m.kv_heads, 32);
    ck_assert_uint_eq(m.head_dim, 128);
    ck_assert_uint_eq(m.ffn, 4 * 4096);
    ck_assert_uint_eq(m.vocab, 32000);
    ck_assert_uint_eq(m.seq, 4096);
    gs_layer_params p;
    gs_model_layer_param_parts(&m, &p);
    ck_assert_uint_eq(p.attn_split + p.mlp_split, 218750000ULL);
    ck_assert_uint_eq(p.norm_replicated + p.attn_replicated + p.mlp_replicated, 0);
    /* 6N rule + attention term. */
    const double T = 4096.0;
    ck_assert(fabs(gs_model_train_flops(&m, T) / (6.0 * T * 7e9 + 12.0 * 32 * T * 4096 * 4096) - 1.0) <
              1e-12);
}
END_TEST

START_TEST(test_nominal_remainder)
{
    /* 1e9 + 7 over 3 layers: 333,333,335 per block, remainder 2 to the embedding. */
    gs_model m = {.nominal_params = 1000000007ULL, .layers = 3, .hidden = 1024, .heads = 8};
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_layer_params(&m), 333333335ULL);
    ck_assert_uint_eq(gs_model_embedding_params(&m), 2);
    ck_assert_uint_eq(m.head_dim, 128);
}
END_TEST

START_TEST(test_nominal_derived_shapes)
{
    /* params only: hidden from the aspect rule layers = hidden / 128, N = 12 l h^2:
     * cbrt(128 * 7e9 / 12) = 4211.6 -> 32.9 units of 128 -> 33 -> hidden 4224;
     * layers = round(7e9 / (12 * 4224^2)) = round(32.69) = 33. */
    gs_model m = {.nominal_params = 7000000000ULL};
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(m.hidden, 4224);
    ck_assert_uint_eq(m.layers, 33);
    ck_assert_uint_eq(m.heads, 33);
    ck_assert_uint_eq(gs_model_params(&m), 7000000000ULL);
    /* params and layers: hidden = 128 * round(sqrt(70e9 / (12 * 80)) / 128) = 128 * round(66.7)
     * = 8576. */
    gs_model big = {.nominal_params = 70000000000ULL, .layers = 80};
    ck_assert_int_eq(gs_model_validate(&big, NULL), GS_OK);
    ck_assert_uint_eq(big.hidden, 8576);
}
END_TEST

START_TEST(test_nominal_huge)
{
    /* 1e15 parameters: 16 B/param = 1.6e16 bytes, far below 2^64 = 1.8e19. */
    gs_model m = {.nominal_params = 1000000000000000ULL};
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_params(&m), 1000000000000000ULL);
    ck_assert_uint_eq(m.layers * gs_model_layer_params(&m) + gs_model_embedding_params(&m),
                      1000000000000000ULL);
}
END_TEST

/* -------------------------------------------------------------------------- errors ----- */

static gs_model small_model(void)
{
    gs_model m = {.layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .ffn = 256,
                  .vocab = 100, .seq = 16};
    strcpy(m.name, "tiny");
    return m;
}

START_TEST(test_zero_fields)
{
    static const char *fields[] = {"layers", "hidden", "heads", "ffn", "vocab", "seq"};
    for (size_t i = 0; i < 6; i++) {
        gs_model m = small_model();
        gs_error err;
        gs_error_init(&err);
        uint64_t *f[] = {&m.layers, &m.hidden, &m.heads, &m.ffn, &m.vocab, &m.seq};
        *f[i] = 0;
        ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
        ck_assert_int_eq(err.status, GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, fields[i]) && strstr(err.msg, "= 0") && strstr(err.msg, "tiny"),
                      "message: %s", err.msg);
    }
    gs_model ok = small_model();
    ck_assert_int_eq(gs_model_validate(&ok, NULL), GS_OK);
    ck_assert_uint_eq(ok.head_dim, 16);
}
END_TEST

START_TEST(test_divisibility)
{
    gs_error err;
    gs_model m = small_model();
    gs_error_init(&err);
    m.heads = 5; /* 64 % 5 != 0 */
    m.kv_heads = 5;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "hidden = 64") && strstr(err.msg, "heads = 5"), "%s", err.msg);

    /* An explicit head_dim lifts the hidden % heads rule. */
    m = small_model();
    m.heads = 5;
    m.kv_heads = 5;
    m.head_dim = 16;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);

    m = small_model();
    m.kv_heads = 3;
    gs_error_init(&err);
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "kv_heads = 3") && strstr(err.msg, "heads = 4"), "%s", err.msg);

    m = small_model();
    m.kv_heads = 0; /* defaults to heads */
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(m.kv_heads, 4);
}
END_TEST

START_TEST(test_overflow)
{
    gs_error err;
    gs_model m = small_model();
    gs_error_init(&err);
    m.hidden = 1ULL << 32; /* h^2 = 2^64 */
    m.heads = 1ULL << 25;
    m.kv_heads = m.heads;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_OVERFLOW);
    ck_assert_msg(strstr(err.msg, "overflow"), "%s", err.msg);
    ck_assert_uint_eq(gs_model_params(&m), UINT64_MAX);

    /* Fits in 64 bits as a count, but not x 18 bytes (the most state per parameter: bf16 with fp32
     * gradients): vocab 2^30 x hidden 2^30 = 2^60. */
    m = small_model();
    m.hidden = 1ULL << 30;
    m.heads = 1ULL << 23;
    m.kv_heads = m.heads;
    m.layers = 1;
    m.ffn = 1;
    m.vocab = 1ULL << 30;
    gs_error_init(&err);
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_OVERFLOW);
    ck_assert_msg(strstr(err.msg, "18 bytes"), "%s", err.msg);

    /* Nominal models get the same 18-byte headroom check. */
    gs_model n = {.nominal_params = UINT64_MAX / 8, .layers = 10, .hidden = 128};
    ck_assert_int_eq(gs_model_validate(&n, NULL), GS_ERR_OVERFLOW);
    gs_model few = {.nominal_params = 5, .layers = 10, .hidden = 128};
    gs_error_init(&err);
    ck_assert_int_eq(gs_model_validate(&few, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "layers = 10"), "%s", err.msg);
    ck_assert_int_eq(gs_model_validate(NULL, NULL), GS_ERR_INPUT);
}
END_TEST


/* ------------------------------------------------------------------- mixture of experts ----- */

/* Mixtral 8x7B by hand (h 4096, 32 layers, 32 heads of 128, 8 kv heads, ffn 14336, vocab 32000,
 * 8 SwiGLU experts, top-2, untied, RMSNorm):
 *   attention  q, o 4096 x 4096 = 16,777,216 each; k, v 4096 x 1024 = 4,194,304 each: 41,943,040
 *   norms      2 x 4096 = 8,192;   router 4096 x 8 = 32,768
 *   expert     3 x 4096 x 14336 = 176,160,768; 8 of them 1,409,286,144
 *   block      41,943,040 + 8,192 + 32,768 + 1,409,286,144 = 1,451,270,144
 *   embedding  32000 x 4096 = 131,072,000; head 131,072,000 + final norm 4096
 *   total      32 x 1,451,270,144 + 131,072,000 + 131,076,096 = 46,702,792,704
 *   active     block with 2 experts 41,943,040 + 8,192 + 32,768 + 352,321,536 = 394,305,536;
 *              32 x 394,305,536 + 262,148,096 = 12,879,925,248
 * Mistral AI's announcement: 46.7B total, 12.9B used per token. */
START_TEST(test_mixtral_8x7b)
{
    gs_model m = copy_preset("mixtral-8x7b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_params(&m), 46702792704ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 12879925248ULL);
    ck_assert_uint_eq(gs_model_layer_params(&m), 1451270144ULL);
    ck_assert(fabs((double)gs_model_params(&m) - 46.7e9) < 0.05e9);
    ck_assert(fabs((double)gs_model_active_params(&m) - 12.9e9) < 0.05e9);
    gs_layer_params p;
    gs_model_layer_param_parts(&m, &p);
    ck_assert_uint_eq(p.attn_split, 41943040ULL);
    ck_assert_uint_eq(p.mlp_split, 8ULL * 176160768ULL);
    ck_assert_uint_eq(p.mlp_replicated, 32768ULL); /* the router */
    ck_assert_uint_eq(p.norm_replicated, 8192ULL);
}
END_TEST

/* Published: Mixtral 8x22B 141B total, 39B active (Mistral AI's announcement); DeepSeek-V3 671B
 * total (technical report, the main model without the 14B MTP module). */
START_TEST(test_moe_published_totals)
{
    gs_model m = copy_preset("mixtral-8x22b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_msg(fabs((double)gs_model_params(&m) - 141e9) < 0.5e9, "%llu", (unsigned long long)gs_model_params(&m));
    ck_assert_msg(fabs((double)gs_model_active_params(&m) - 39e9) < 0.5e9, "%llu",
                  (unsigned long long)gs_model_active_params(&m));
    m = copy_preset("deepseek-v3");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_msg(fabs((double)gs_model_params(&m) - 671e9) < 0.5e9, "%llu", (unsigned long long)gs_model_params(&m));
}
END_TEST

/* DeepSeek-V3 by hand (config.json; MLA as in model.h):
 *   MLA        q_a 7168 x 1536 = 11,010,048; q_b 1536 x 128 x 192 = 37,748,736;
 *              kv_a 7168 x 576 = 4,128,768; kv_b 512 x 128 x 256 = 16,777,216;
 *              o 16384 x 7168 = 117,440,512; latent norms 1536 + 512: 187,107,328
 *   norms      2 x 7168 = 14,336
 *   dense MLP  3 x 7168 x 18432 = 396,361,728 (first 3 blocks)
 *   expert     3 x 7168 x 2048 = 44,040,192; 256 routed + 1 shared; router 7168 x 256 = 1,835,008
 *   MoE block  187,107,328 + 14,336 + 257 x 44,040,192 + 1,835,008 = 11,507,286,016
 *   total      3 x 583,483,392 + 58 x 11,507,286,016 + 2 x 926,679,040 + 7168 = 671,026,404,352
 *   active     MoE block with 8 + 1 experts: 187,107,328 + 14,336 + 9 x 44,040,192 + 1,835,008
 *              = 585,318,400; 3 x 583,483,392 + 58 x 585,318,400 + 1,853,365,248 = 37,552,282,624
 * The report's "37B activated" reads as 37.x: this count (router and embedding included, as
 * Mixtral's 12.9B needs) is 37.55B; DeepSeek's README_WEIGHTS gives 36.7B, which we do not
 * reproduce. */
START_TEST(test_deepseek_v3)
{
    gs_model m = copy_preset("deepseek-v3");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_params(&m), 671026404352ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 37552282624ULL);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 0), 583483392ULL);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 2), 583483392ULL);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 3), 11507286016ULL);
    ck_assert_uint_eq(gs_model_layer_params(&m), 11507286016ULL);
    ck_assert(gs_model_active_params(&m) >= 37000000000ULL && gs_model_active_params(&m) < 38000000000ULL);
    gs_layer_params p;
    gs_model_layer_param_parts_at(&m, 0, &p);
    ck_assert_uint_eq(p.attn_split, 37748736ULL + 16777216ULL + 117440512ULL);
    ck_assert_uint_eq(p.attn_replicated, 11010048ULL + 4128768ULL + 2048ULL);
    ck_assert_uint_eq(p.mlp_split, 396361728ULL);
    ck_assert_uint_eq(p.mlp_replicated, 0);
}
END_TEST

/* DeepSeek-V2-Lite by hand (config.json; torchtitan's deepseek_v3 "16B"): MLA without a query
 * latent: wq 2048 x 16 x 192 = 6,291,456; kv_a 2048 x 576 = 1,179,648; kv_b 512 x 16 x 256 =
 * 2,097,152; o 2048 x 2048 = 4,194,304; the kv latent norm 512: 13,763,072. Norms 4,096. The
 * dense block's MLP 3 x 2048 x 10944 = 67,239,936: 81,007,104. An expert 3 x 2048 x 1408 =
 * 8,650,752, 64 routed + 2 shared, the router 2048 x 64 = 131,072: a MoE block 584,847,872.
 * Total 81,007,104 + 26 x 584,847,872 + 2 x 102400 x 2048 + 2048 = 15,706,484,224, the model
 * card's 15.7B. Active: 6 + 2 experts, 83,104,256 a MoE block: 2,661,150,208; without the input
 * embedding (209,715,200) 2.45B, the card's "2.4B activated". DeepSeek-V2: 236B total, 21B
 * activated (arXiv 2405.04434). */
START_TEST(test_deepseek_v2)
{
    gs_model m = copy_preset("deepseek-v2-lite");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 0), 81007104ULL);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 1), 584847872ULL);
    ck_assert_uint_eq(gs_model_params(&m), 15706484224ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 2661150208ULL);
    m = copy_preset("deepseek-v2");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_msg(fabs((double)gs_model_params(&m) - 236e9) < 0.5e9, "%llu", (unsigned long long)gs_model_params(&m));
    ck_assert_msg(fabs((double)gs_model_active_params(&m) - 21e9) < 0.5e9, "%llu",
                  (unsigned long long)gs_model_active_params(&m));
}
END_TEST

/* Llama 4 (meta-llama/Llama-4-Scout-17B-16E and Llama-4-Maverick-17B-128E config.json,
 * text_config), by hand. Attention: q and o 5120 x 5120 = 26,214,400 each, k and v 5120 x 1024 =
 * 5,242,880 each: 62,914,560; norms 2 x 5120. An expert (and the shared one) 3 x 5120 x 8192 =
 * 125,829,120; the dense MLP 3 x 5120 x 16384 = 251,658,240. Embedding and untied head 202048 x
 * 5120 = 1,034,485,760 each, the final norm 5120: 2,068,976,640.
 * Scout, 48 MoE blocks of 16 experts: router 81,920; a block 62,924,800 + 81,920 + 17 x
 * 125,829,120 = 2,202,101,760; total 48 x that + 2,068,976,640 = 107,769,861,120 (the card's 109B
 * also counts the vision encoder); active: a block with 1 routed + 1 shared expert 314,664,960,
 * 17,172,894,720 (the card's 17B).
 * Maverick, interleave_moe_layer_step 2: blocks 1, 3, .., 47 MoE (24, of 128 experts: router
 * 655,360; a block 62,924,800 + 655,360 + 129 x 125,829,120 = 16,295,536,640), blocks 0, 2, ..,
 * 46 dense (62,924,800 + 251,658,240 = 314,583,040): total 24 x 16,295,536,640 + 24 x
 * 314,583,040 + 2,068,976,640 = 400,711,848,960 (the card's 400B); active 24 x (62,924,800 +
 * 655,360 + 251,658,240) + 24 x 314,583,040 + 2,068,976,640 = 17,184,691,200. */
START_TEST(test_llama4)
{
    gs_model m = copy_preset("llama4-scout");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_moe_blocks(&m), 48);
    ck_assert_int_eq(gs_model_has_dense_blocks(&m), 0);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 7), 2202101760ULL);
    ck_assert_uint_eq(gs_model_params(&m), 107769861120ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 17172894720ULL);
    m = copy_preset("llama4-maverick");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_moe_blocks(&m), 24);
    ck_assert_int_eq(gs_model_has_dense_blocks(&m), 1);
    for (uint64_t l = 0; l < 48; l++) {
        ck_assert_int_eq(gs_model_moe_block(&m, l), (int)(l % 2 == 1));
        ck_assert_uint_eq(gs_model_layer_params_at(&m, l), l % 2 ? 16295536640ULL : 314583040ULL);
    }
    ck_assert_uint_eq(gs_model_params(&m), 400711848960ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 17184691200ULL);
    /* every past the layers, or without experts, is refused */
    gs_error err;
    m.moe.every = 49;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "moe.every = 49"), "%s", err.msg);
    m = copy_preset("llama3-8b");
    m.moe.every = 2;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
}
END_TEST

/* Qwen3 MoE (Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B config.json), by hand; query heads x 128 wider
 * than hidden. 30B-A3B: q and o 2048 x 4096 = 8,388,608 each, k and v 2048 x 512 = 1,048,576 each:
 * 18,874,368; norms 4,096; router 2048 x 128 = 262,144; 128 experts of 3 x 2048 x 768 = 4,718,592:
 * 603,979,776; a block 623,120,384; x 48 + 2 x 151936 x 2048 (622,329,856) + 2048 =
 * 30,532,110,336 (30.5B); active with 8 experts a block 56,889,344: 3,353,020,416 (3.3B).
 * 235B-A22B: q and o 4096 x 8192 = 33,554,432 each, k and v 4096 x 512 = 2,097,152 each:
 * 71,303,168; norms 8,192; router 524,288; experts of 3 x 4096 x 1536 = 18,874,368, 128 of them
 * 2,415,919,104; a block 2,487,754,752; x 94 + 2 x 151936 x 4096 (1,244,659,712) + 4096 =
 * 235,093,610,496 (235B); active 222,830,592 a block: 22,190,739,456 (22B). */
START_TEST(test_qwen3_moe)
{
    gs_model m = copy_preset("qwen3-30b-a3b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 0), 623120384ULL);
    ck_assert_uint_eq(gs_model_params(&m), 30532110336ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 3353020416ULL);
    m = copy_preset("qwen3-235b-a22b");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(gs_model_layer_params_at(&m, 93), 2487754752ULL);
    ck_assert_uint_eq(gs_model_params(&m), 235093610496ULL);
    ck_assert_uint_eq(gs_model_active_params(&m), 22190739456ULL);
}
END_TEST

/* MoE blocks from dense_layers and every: 10 blocks, 2 leading dense, every 3: blocks 2, 5, 8. */
START_TEST(test_moe_every)
{
    gs_model m = copy_preset("mixtral-8x7b");
    m.layers = 10;
    m.moe.dense_layers = 2;
    m.moe.every = 3;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    static const int want[10] = {0, 0, 1, 0, 0, 1, 0, 0, 1, 0};
    for (uint64_t l = 0; l < 10; l++)
        ck_assert_int_eq(gs_model_moe_block(&m, l), want[l]);
    ck_assert_uint_eq(gs_model_moe_blocks(&m), 3);
    /* the dense blocks' share of the count: 7 dense + 3 MoE blocks */
    uint64_t dense = gs_model_layer_params_at(&m, 0), moe = gs_model_layer_params_at(&m, 2);
    ck_assert_uint_lt(dense, moe);
    ck_assert_uint_eq(gs_model_params(&m),
                      7 * dense + 3 * moe + gs_model_embedding_params(&m) + gs_model_head_params(&m));
}
END_TEST

/* Model FLOPs of a MoE step use the active matmul weights: Mixtral 8x7B, one 4096-token sequence
 * at seq 4096, by hand: per block q,k,v,o 41,943,040 + router 32,768 + 2 experts 352,321,536;
 * LM head 131,072,000; attention 12 x 32 x T x 4096 x 4096. */
START_TEST(test_moe_flops)
{
    gs_model m = copy_preset("mixtral-8x7b");
    m.seq = 4096;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    const double T = 4096.0;
    const double per_layer = 41943040.0 + 32768.0 + 352321536.0;
    const double expect = 6.0 * T * (32.0 * per_layer + 131072000.0) + 12.0 * 32 * T * 4096 * 4096;
    ck_assert_msg(fabs(gs_model_train_flops(&m, T) / expect - 1.0) < 1e-12, "%.9e vs %.9e",
                  gs_model_train_flops(&m, T), expect);
    /* far below 6 x total: the 6 experts a token skips do no work */
    ck_assert(gs_model_train_flops(&m, T) < 0.5 * 6.0 * T * (double)gs_model_params(&m));
    /* DeepSeek-V3: MLA scores over 128 + 64, context over 128 per head */
    m = copy_preset("deepseek-v3");
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    const double mla = 11010048.0 + 37748736.0 + 4128768.0 + 16777216.0 + 117440512.0;
    const double dense = 3.0 * (mla + 396361728.0), moe = 58.0 * (mla + 1835008.0 + 9.0 * 44040192.0);
    const double ds = 6.0 * T * (dense + moe + 129280.0 * 7168.0) + 6.0 * 61 * T * 4096 * 128 * (2.0 * 128 + 64);
    ck_assert_msg(fabs(gs_model_train_flops(&m, T) / ds - 1.0) < 1e-12, "%.9e vs %.9e", gs_model_train_flops(&m, T),
                  ds);
}
END_TEST

/* The dense presets' counts and FLOPs are what they were before MoE existed (pinned values from
 * the published counts above and the hand counts in the presets' comments). */
START_TEST(test_dense_unchanged)
{
    static const struct {
        const char *name;
        uint64_t params;
    } pinned[] = {
        {"llama2-7b", 6738415616ULL},     {"llama3.1-405b", 405853388800ULL}, {"gpt3-175b", 174615846912ULL},
        {"gpt-1.7b", 1652230656ULL},      {"gpt-1t", 1008038758400ULL},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        gs_model m = copy_preset(pinned[i].name);
        ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
        ck_assert_uint_eq(m.moe.experts, 0);
        ck_assert_uint_eq(m.mla.kv_lora_rank, 0);
        ck_assert_uint_eq(gs_model_params(&m), pinned[i].params);
        ck_assert_uint_eq(gs_model_active_params(&m), pinned[i].params);
        ck_assert_uint_eq(gs_model_layer_params_at(&m, 0), gs_model_layer_params(&m));
    }
}
END_TEST

START_TEST(test_moe_validation)
{
    gs_error err;
    gs_model m = copy_preset("mixtral-8x7b");
    m.moe.top_k = 9;
    gs_error_init(&err);
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "moe.top_k = 9") != NULL, "%s", err.msg);
    m = copy_preset("mixtral-8x7b");
    m.moe.experts = 1;
    m.moe.top_k = 1;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "moe.experts = 1") != NULL, "%s", err.msg);
    m = copy_preset("mixtral-8x7b");
    m.moe.dense_layers = 32;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "moe.dense_layers = 32") != NULL, "%s", err.msg);
    m = copy_preset("llama2-7b");
    m.moe.top_k = 2; /* no experts */
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "moe fields given with moe.experts = 0") != NULL, "%s", err.msg);
    m = (gs_model){.nominal_params = 7000000000ULL, .layers = 32, .moe = {.experts = 8, .top_k = 2}};
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "nominal") != NULL, "%s", err.msg);
    /* expert_ffn defaults to ffn */
    m = copy_preset("mixtral-8x7b");
    m.moe.expert_ffn = 0;
    ck_assert_int_eq(gs_model_validate(&m, NULL), GS_OK);
    ck_assert_uint_eq(m.moe.expert_ffn, 14336);
    ck_assert_uint_eq(gs_model_params(&m), 46702792704ULL);
    /* MLA */
    m = copy_preset("deepseek-v3");
    m.kv_heads = 8;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "kv_heads = 8 with mla") != NULL, "%s", err.msg);
    m = copy_preset("llama2-7b");
    m.mla.q_lora_rank = 64;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "mla.kv_lora_rank = 0") != NULL, "%s", err.msg);
    /* a MoE overflow is caught like a dense one */
    m = copy_preset("mixtral-8x7b");
    m.moe.experts = UINT64_MAX / 1024;
    ck_assert_int_eq(gs_model_validate(&m, &err), GS_ERR_OVERFLOW);
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("presets");
    tcase_add_test(tc, test_llama_exact_params);
    tcase_add_test(tc, test_mixtral_8x7b);
    tcase_add_test(tc, test_moe_published_totals);
    tcase_add_test(tc, test_deepseek_v3);
    tcase_add_test(tc, test_deepseek_v2);
    tcase_add_test(tc, test_llama4);
    tcase_add_test(tc, test_qwen3_moe);
    tcase_add_test(tc, test_moe_every);
    tcase_add_test(tc, test_dense_unchanged);
    tcase_add_test(tc, test_nar21_rows);
    tcase_add_test(tc, test_gpt3_175b);
    tcase_add_test(tc, test_every_preset_sane);
    tcase_add_test(tc, test_lookup);
    suite_add_tcase(s, tc);

    tc = tcase_create("counts");
    tcase_add_test(tc, test_llama2_7b_parts);
    tcase_add_test(tc, test_gqa_parts);
    tcase_add_test(tc, test_gpt_parts);
    tcase_add_test(tc, test_parts_sum_every_preset);
    suite_add_tcase(s, tc);

    tc = tcase_create("flops");
    tcase_add_test(tc, test_flops_megatron_closed_form);
    tcase_add_test(tc, test_flops_swiglu_gqa);
    tcase_add_test(tc, test_moe_flops);
    suite_add_tcase(s, tc);

    tc = tcase_create("nominal");
    tcase_add_test(tc, test_nominal_with_shapes);
    tcase_add_test(tc, test_nominal_remainder);
    tcase_add_test(tc, test_nominal_derived_shapes);
    tcase_add_test(tc, test_nominal_huge);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_zero_fields);
    tcase_add_test(tc, test_divisibility);
    tcase_add_test(tc, test_overflow);
    tcase_add_test(tc, test_moe_validation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
