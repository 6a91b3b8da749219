/* Decoder-only transformer description: presets, exact parameter counts, per-layer GEMM shapes,
 * dense or mixture-of-experts MLPs, ordinary or latent (MLA) attention.
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

/* Mixture of experts (all zero: a dense model). A MoE block's MLP is a router (a linear
 * hidden x experts, no bias, replicated across tp), `experts` routed experts and
 * `shared_experts` always-on experts, each an MLP of the model's kind (gs_mlp_kind) with
 * intermediate size expert_ffn; the shared experts count as one MLP of width
 * shared_experts x expert_ffn (DeepSeek's shared_experts module, Megatron's shared expert).
 * Each token goes through top_k routed experts and every shared expert. The first
 * dense_layers blocks keep a dense MLP of size ffn (DeepSeek-V3's first_k_dense_replace); after
 * them every `every`-th block is a MoE block, starting with block dense_layers, and the others
 * keep the dense MLP too (Llama 4 Maverick's interleave_moe_layer_step 2: dense_layers 1, every
 * 2, MoE blocks 1, 3, 5, ..; Megatron-LM's --moe-layer-freq). gs_model_moe_block says which.
 * Expert parallelism (grid.ep, engine/mesh.h) spreads the routed experts over ep ranks. */
typedef struct gs_moe {
    uint64_t experts;        /* routed experts per MoE block; 0: dense model, >= 2 otherwise */
    uint64_t top_k;          /* routed experts per token, 1 .. experts */
    uint64_t expert_ffn;     /* each expert's MLP intermediate size; 0: ffn (filled by validate) */
    uint64_t shared_experts; /* always-on experts of expert_ffn each */
    uint64_t dense_layers;   /* leading blocks with a dense MLP of ffn, < layers */
    uint64_t every;          /* after them, a MoE block every `every` blocks (0 or 1: each) */
    double capacity_factor;  /* expert capacity = factor x tokens x top_k / experts tokens; 0:
                              * dropless. Model FLOPs count routed tokens whatever the factor. */
    uint64_t groups;         /* group-limited routing (Megatron-Core --moe-router-num-groups,
                              * DeepSeek's n_group): the experts in `groups` equal consecutive
                              * groups, each token's top_k taken from the group_topk best groups
                              * (--moe-router-group-topk, topk_group); 0: no limit. Read by the
                              * flex dispatcher's per-node deduplication (engine/moe_route.h) */
    uint64_t group_topk;
    double routing_skew;     /* load imbalance: the busiest EP rank's routed tokens are 1 + skew
                              * times the mean (0: balanced); capped by capacity_factor when it
                              * drops tokens. A property of the run, not of the weights: only the
                              * schedule reads it (engine/build_moe.c) */
} gs_moe;

/* Multi-head latent attention (DeepSeek-V2/V3; all zero: MHA/GQA), counted exactly:
 *   q:    q_lora_rank ? q_a (h x q_lora_rank) + norm(q_lora_rank) + q_b (q_lora_rank x heads*(d+r))
 *                     : q (h x heads*(d+r))
 *   kv_a: h x (kv_lora_rank + r), then norm(kv_lora_rank)
 *   kv_b: kv_lora_rank x heads*2d (each head's key part and value, d each)
 *   o:    heads*d x h
 * with d = head_dim (qk_nope_head_dim = v_head_dim) and r = rope_head_dim (the decoupled rotary
 * part of each query and key head). The down-projections q_a and kv_a and the latent norms are
 * replicated across tp (Megatron-Core's "duplicated" linears), q_b and kv_b column-parallel, o
 * row-parallel. kv_heads == heads. No biases. */
typedef struct gs_mla {
    uint64_t q_lora_rank;   /* query latent size; 0: q projected from hidden directly */
    uint64_t kv_lora_rank;  /* key/value latent size; 0: no MLA */
    uint64_t rope_head_dim; /* rotary dimensions per query/key head, beside head_dim */
} gs_mla;

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
    gs_moe moe; /* all zero: dense MLP in every block */
    gs_mla mla; /* all zero: MHA/GQA attention */
    /* Multi-token prediction depth (DeepSeek-V3; Megatron-Core's --mtp-num-layers,
     * megatron/core/transformer/multi_token_prediction.py): D modules after the last block, on
     * the last pipeline stage, module k taking the tokens k ahead: their embedding and the
     * previous hidden state, each normed, concatenated and projected 2h -> h (eh_proj), one more
     * transformer block like the model's last, a final norm and the shared output head with its
     * loss. 0: none. Outside the model's parameter count (gs_model_params) and its FLOPs for MFU,
     * as DeepSeek-V3's 671B excludes its MTP module. */
    uint64_t mtp_layers;
    /* Nominal form: when nonzero, the model is described by its total parameter count
     * (the seed's hand arithmetic, e.g. params: 7e9); gs_model_params returns it verbatim
     * and per-layer counts are spread evenly. layers/hidden/seq/heads still describe shapes. */
    uint64_t nominal_params;
    const char *source; /* where the preset's numbers come from; NULL for user models */
} gs_model;

/* 1 when the word embedding has a second user on the last pipeline stage: the output head
 * (tied_embeddings) or the multi-token prediction modules' embedding (mtp_layers), whose
 * gradients the first and last stages exchange under a pipeline. */
int gs_model_embedding_shared(const gs_model *m);

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
 * N must be >= layers; a nominal model has neither moe nor mla.
 *
 * MoE models get expert_ffn = ffn when 0 and every = 1 when 0, and need experts >= 2,
 * 1 <= top_k <= experts, dense_layers < layers, every <= layers, a finite capacity_factor >= 0; any moe field without experts is an
 * error. MLA models need kv_lora_rank > 0 whenever q_lora_rank or rope_head_dim is given,
 * no biases, and kv_heads == heads (filled when 0); head_dim defaults to hidden / heads. */
gs_status gs_model_validate(gs_model *m, gs_error *err);

/* Exact parameter counts (nominal models: the nominal total, split as documented).
 * Nominal split: layer = floor(N / layers), embedding = N - layers * layer (the remainder),
 * head = 0; a block's parts are attn_split = layer / 3, mlp_split = the rest, nothing
 * replicated. On a description whose count overflows (gs_model_validate rejects those) these
 * return UINT64_MAX (gs_model_layer_param_parts: all zero).
 * gs_model_params is the total: every expert of every MoE block. */
/* 1 when global block `layer` of m is a mixture-of-experts block: m has experts, layer >=
 * moe.dense_layers, and layer - dense_layers is a multiple of moe.every (0: 1). */
int gs_model_moe_block(const gs_model *m, uint64_t layer);
/* m's MoE blocks (0 for a dense model), and whether m is a MoE model with dense blocks too. */
uint64_t gs_model_moe_blocks(const gs_model *m);
int gs_model_has_dense_blocks(const gs_model *m);

uint64_t gs_model_params(const gs_model *m);
/* Parameters one token goes through: the total less the routed experts it skips (a MoE block
 * counts its router, top_k routed experts and the shared experts); embedding and head included.
 * Equal to gs_model_params for dense models. */
uint64_t gs_model_active_params(const gs_model *m);
/* One transformer block: block `layer` (0-based; a dense block of a MoE model differs
 * from the others); gs_model_layer_params is the last block's, every block's for dense models. */
uint64_t gs_model_layer_params_at(const gs_model *m, uint64_t layer);
uint64_t gs_model_layer_params(const gs_model *m);
uint64_t gs_model_embedding_params(const gs_model *m); /* token (+ position) embedding */
uint64_t gs_model_head_params(const gs_model *m);      /* final norm + LM head (0 head if tied) */

/* Parts of one block, for TP splitting: params split by tp (linears) vs replicated (norms,
 * row-parallel biases). attn + mlp + norms == gs_model_layer_params_at. */
typedef struct gs_layer_params {
    uint64_t attn_split;      /* q,k,v,o weights and column-parallel biases: divided by tp */
    uint64_t attn_replicated; /* o-proj bias; MLA's down-projections and latent norms */
    uint64_t mlp_split;       /* fc weights and column-parallel biases (every expert's): by tp */
    uint64_t mlp_replicated;  /* fc2 bias; a MoE block's router */
    uint64_t norm_replicated; /* the two norms' weights (and biases) */
} gs_layer_params;
void gs_model_layer_param_parts_at(const gs_model *m, uint64_t layer, gs_layer_params *out);
void gs_model_layer_param_parts(const gs_model *m, gs_layer_params *out); /* the last block's */

/* Model FLOPs for one training step on `tokens` tokens (forward + backward = 3x forward,
 * matmuls only, causal attention counted in full as Megatron does):
 * 6 * tokens * (non-embedding matmul params + LM head) + 12 * layers * tokens * seq * head_dim * heads.
 * Matmul params are the linear weights only (no biases, norms or embedding lookups); the LM head
 * counts even when tied. Nominal models use the nominal total in place of the matmul params (the
 * 6N rule). MoE blocks count their active matmul weights (router, top_k routed experts, shared
 * experts: the router GEMM and the experts each token goes through); MLA counts its five
 * projections and scores of head_dim + rope_head_dim per head, so its attention term is
 * 6 * layers * tokens * seq * heads * (2 * head_dim + rope_head_dim). */
double gs_model_train_flops(const gs_model *m, double tokens);

/* The token rows (token x expert pairs) the busiest EP rank's experts take when each of the ep
 * ranks routes `tokens` tokens to top_k experts: tokens x top_k x load, rounded up, where load is
 * 1 + routing_skew, capped at capacity_factor when that is set (tokens past an expert's capacity
 * are dropped). The schedule's MoE events and the traffic ledger both start from it. */
uint64_t gs_moe_rank_rows(const gs_moe *moe, uint64_t tokens);

#endif
