/* Decoder-only transformer description: presets, exact parameter counts, per-layer GEMM shapes.
 *
 * Ownership: gs_model is a plain value (no pointers); presets are static const tables that
 * callers copy. Nothing here allocates. */
#ifndef GS_MODEL_H
#define GS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

typedef enum gs_norm_kind { GS_NORM_RMSNORM, GS_NORM_LAYERNORM } gs_norm_kind;
typedef enum gs_mlp_kind {
    GS_MLP_SWIGLU, /* gate + up (h x ffn each), down (ffn x h), no bias: Llama */
    GS_MLP_GELU    /* fc1 (h x ffn) + bias, fc2 (ffn x h) + bias: GPT */
} gs_mlp_kind;
typedef enum gs_pos_kind {
    GS_POS_ROPE,   /* rotary: no parameters */
    GS_POS_LEARNED /* learned absolute position embedding: seq x hidden parameters */
} gs_pos_kind;

#define GS_MODEL_NAME_BYTES 64
#define GS_DROPOUT_DEFAULT 0.1 /* Megatron-LM's attention and hidden dropout */

typedef struct gs_model {
    char name[GS_MODEL_NAME_BYTES];
    uint64_t layers;
    uint64_t hidden;
    uint64_t heads;
    uint64_t kv_heads;    /* == heads for MHA; < heads for GQA */
    uint64_t head_dim;    /* hidden / heads unless a preset says otherwise */
    uint64_t ffn;         /* MLP intermediate size */
    uint64_t vocab;
    uint64_t seq;         /* training sequence length, tokens */
    int tied_embeddings;  /* 1: LM head shares the embedding matrix */
    int bias;             /* 1: linears and norms carry biases (GPT) */
    int dropout;          /* 1: dropout layers present (GPT-style activation accounting) */
    /* With dropout: the probability of dropping an attention probability, and an embedding or
     * residual-branch activation (Megatron's --attention-dropout / --hidden-dropout, default 0.1
     * each). exec draws the masks; the ledger and the sim count them whatever the rate. */
    double attention_dropout, hidden_dropout;
    gs_norm_kind norm;
    gs_mlp_kind mlp;
    gs_pos_kind pos;
    /* Nominal form: when nonzero, the model is described by its total parameter count
     * (the seed's hand arithmetic, e.g. params: 7e9); gs_model_params returns it verbatim
     * and per-layer counts are spread evenly. layers/hidden/seq/heads still describe shapes. */
    uint64_t nominal_params;
    const char *source; /* where the preset's numbers come from; NULL for user models */
} gs_model;

/* Presets (static table, stable order). */
size_t gs_model_preset_count(void);
const gs_model *gs_model_preset_at(size_t i);
/* Case-insensitive lookup; NULL when unknown. */
const gs_model *gs_model_preset_find(const char *name);
/* The preset name closest to `name` (edit distance), for "did you mean" messages. */
const char *gs_model_preset_nearest(const char *name);

/* Fills derived fields (head_dim when 0, kv_heads when 0) and checks the description:
 * positive sizes, hidden divisible by heads (unless head_dim is given), heads divisible by
 * kv_heads (GS_ERR_INPUT, naming the field and its value), no overflow in the parameter count
 * nor in 16 bytes of training state per parameter (GS_ERR_OVERFLOW).
 *
 * Nominal models (nominal_params = N != 0) get their missing shapes filled first:
 *   hidden = 128 * max(1, round(x / 128)) with x = sqrt(N / (12 * layers)) when layers is given,
 *            else x = cbrt(128 * N / 12) (the aspect rule layers = hidden / 128 with
 *            N ~ 12 * layers * hidden^2);
 *   layers = max(1, round(N / (12 * hidden^2)));
 *   heads = hidden / d with d the largest power of two <= 128 dividing hidden; kv_heads = heads;
 *   head_dim = hidden / heads; ffn = 4 * hidden; vocab = 32000; seq = 4096.
 * Norm, MLP and position kinds are left as given (they do not change a nominal count).
 * N must be >= layers. */
gs_status gs_model_validate(gs_model *m, gs_error *err);

/* Exact parameter counts (nominal models: the nominal total, split as documented).
 * Nominal split: layer = floor(N / layers), embedding = N - layers * layer (the remainder),
 * head = 0; a block's parts are attn_split = layer / 3, mlp_split = the rest, nothing
 * replicated. On a description whose count overflows (gs_model_validate rejects those) these
 * return UINT64_MAX (gs_model_layer_param_parts: all zero). */
uint64_t gs_model_params(const gs_model *m);
uint64_t gs_model_layer_params(const gs_model *m);     /* one transformer block */
uint64_t gs_model_embedding_params(const gs_model *m); /* token (+ position) embedding */
uint64_t gs_model_head_params(const gs_model *m);      /* final norm + LM head (0 head if tied) */

/* Parts of one block, for TP splitting: params split by tp (linears) vs replicated (norms,
 * row-parallel biases). attn + mlp + norms == gs_model_layer_params. */
typedef struct gs_layer_params {
    uint64_t attn_split;      /* q,k,v,o weights and column-parallel biases: divided by tp */
    uint64_t attn_replicated; /* o-proj bias: replicated across tp */
    uint64_t mlp_split;       /* fc weights and column-parallel biases: divided by tp */
    uint64_t mlp_replicated;  /* fc2 bias: replicated */
    uint64_t norm_replicated; /* the two norms' weights (and biases) */
} gs_layer_params;
void gs_model_layer_param_parts(const gs_model *m, gs_layer_params *out);

/* Model FLOPs for one training step on `tokens` tokens (forward + backward = 3x forward,
 * matmuls only, causal attention counted in full as Megatron does):
 * 6 * tokens * (non-embedding matmul params + LM head) + 12 * layers * tokens * seq * head_dim * heads.
 * Matmul params are the linear weights only (no biases, norms or embedding lookups); the LM head
 * counts even when tied. Nominal models use the nominal total in place of the matmul params (the
 * 6N rule). */
double gs_model_train_flops(const gs_model *m, double tokens);

#endif
