/* Host reference kernels: the forward and backward passes of a Llama-style decoder in fp32 on
 * the CPU, plus AdamW, the seeded synthetic data and the seeded parameter init. The exec
 * backend's host driver runs them; the CUDA kernels are checked against them.
 *
 * Conventions: row-major; a "token row" is one of t = sequences x seq tokens; linear weights use
 * PyTorch's [out, in] layout (y = x W^T), so HF Llama names map one to one. Backward kernels
 * WRITE (=) input gradients and ACCUMULATE (+=) parameter gradients, unless a comment says
 * otherwise. Kernels are single-threaded (the driver runs one rank per thread), allocate
 * nothing (gs_k_gemm packs its blocks on the stack: a thread needs about 150 KiB of stack for
 * it and the attention kernels, 64 KiB more for the flash attention backward's two tiles), never
 * fail, and give the same bits for the same inputs (fixed summation order).
 *
 * Ownership: every buffer is the caller's; kernels only read and write them. */
#ifndef GS_KERNELS_HOST_H
#define GS_KERNELS_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dropout.h"

/* ---- dense algebra ---------------------------------------------------------------------- */

/* C[m,n] = alpha * op(A) op(B) + beta * C. op(A) is A ([m,k], leading dimension lda) or, with
 * trans_a, A^T where A is [k,m]; likewise op(B) is B [k,n] or B^T with B [n,k]. beta = 0 ignores
 * C's old contents (NaN included). Cache-blocked; each C element is summed over k in order.
 * Built --with-blas, the BLAS's single-threaded sgemm computes it instead: the same bits for the
 * same call, but in the BLAS's summation order (and allocating its own buffers). */
void gs_k_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
               const float *b, size_t ldb, float beta, float *c, size_t ldc);

/* Linear layer: y[t,n] = x[t,k] w[n,k]^T. */
void gs_k_linear_fwd(const float *x, const float *w, float *y, size_t t, size_t k, size_t n);
/* dx[t,k] = dy w; dw[n,k] += dy^T x (either may be NULL: not wanted). */
void gs_k_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, size_t t, size_t k,
                     size_t n);

/* y[i] += x[i] (residual add, gradient accumulation). */
void gs_k_add(float *y, const float *x, size_t n);
/* y[i] *= a. */
void gs_k_scale(float *y, float a, size_t n);
/* dst[i] = src[i] rounded to bfloat16 (8 exponent bits, 7 mantissa bits) to nearest, ties to
 * even, kept as the fp32 value it denotes (the low 16 bits zero): what a bf16 GEMM input holds
 * (CUDA's __float2bfloat16_rn); infinities stay, NaNs stay NaN, values past bf16's largest
 * finite round to infinity. dst may be src. */
void gs_k_round_bf16(float *dst, const float *src, size_t n);

/* ---- FP8 casts (kernels/host/fp8.c) ------------------------------------------------------ */
/* The OCP FP8 formats: E4M3 (NVIDIA's e4m3fn: bias 7, no infinities, one NaN pattern S.1111.111,
 * largest 448, subnormals down to 2^-9) and E5M2 (bias 15, IEEE-like with infinities, largest
 * 57344, subnormals down to 2^-16). */
typedef enum gs_fp8_fmt { GS_FP8_E4M3 = 0, GS_FP8_E5M2 = 1 } gs_fp8_fmt;
float gs_k_fp8_max(gs_fp8_fmt f); /* 448 or 57344 */
/* x's nearest code, ties to the even code; beyond the largest finite value (infinities too) the
 * largest finite value of x's sign, as Transformer Engine's saturating casts give; NaN: NaN. */
uint8_t gs_k_fp8_encode(gs_fp8_fmt f, float x);
float gs_k_fp8_decode(gs_fp8_fmt f, uint8_t code); /* exact */
float gs_k_amax(const float *x, size_t n);         /* max |x[i]| (NaN if any is NaN), 0 when n is 0 */
float gs_k_max_nan(float m, float a);               /* the larger of m and a, a NaN on either side winning */
/* Current scaling's per-tensor scale: fmt's largest value / amax (1 when amax is 0 or infinite,
 * FLT_MAX when the quotient overflows), Transformer Engine's compute_scale_from_amax. */
float gs_k_fp8_current_scale(gs_fp8_fmt f, float amax);
void gs_k_fp8_quantize(gs_fp8_fmt f, float scale, const float *x, uint8_t *q, size_t n); /* q = cast(x scale) */
void gs_k_fp8_dequantize(gs_fp8_fmt f, float scale, const uint8_t *q, float *y, size_t n); /* y = q (1/scale) */
/* y = dequantize(quantize(x)) under current scaling (the scale from x's own amax, returned);
 * y may be x. */
float gs_k_fp8_round_current(gs_fp8_fmt f, const float *x, float *y, size_t n);
/* y = dequantize(quantize(x)) at a given scale (delayed scaling: Transformer Engine's cast with the
 * scale its amax history gave, saturating); returns x's amax (NaN sticks). y may be x. */
float gs_k_fp8_round_scaled(gs_fp8_fmt f, float scale, const float *x, float *y, size_t n);
/* Delayed scaling's scale update from the amax its history gave (Transformer Engine's
 * amax_and_scale_update): fp8 max x 2^-margin / amax when amax is finite and above 0 (FLT_MAX
 * when that overflows), else the old scale. */
float gs_k_fp8_delayed_scale(gs_fp8_fmt f, float amax, float old, unsigned margin);
/* The same kernel's history: hist[0..len-1] is a tensor's amax history in Transformer Engine's
 * layout, hist[0] the row its casts record into (not read here), hist[1..len-1] the last len-1
 * reduced amaxes, oldest first. A reduced amax `last` of 0 (no cast since) leaves it alone; else
 * it rolls by one (the oldest out, `last` in at the end, hist[0] cleared). Returns the amax the
 * scale comes from: `last` (most recent; a NaN then keeps the old scale), or with use_max the
 * largest of the rolled-in len values, by fmaxf, which passes over a NaN (0 when last is 0). */
float gs_k_fp8_amax_history(float *hist, size_t len, float last, int use_max);
/* A dimension of len elements cut into scale blocks as tensor parallelism shards it: nseg
 * consecutive segments of seg[0..nseg-1] elements (QKV's Q, K and V rows; SwiGLU's gate and up;
 * nseg 0: one segment of len), each in `parts` equal slices, slice p of every segment making
 * block p (TP rank p's shard). parts 0 or 1: one block.
 * zigzag non-zero: the dimension is whole sequences of zigzag elements (token rows) instead, each
 * in 2 x parts equal chunks, chunk c in block c for c < parts and 2 parts - 1 - c after: context
 * parallelism's load-balanced layout, block p the tokens CP rank p holds (nseg, seg unused). */
typedef struct gs_fp8_cut {
    size_t parts, nseg, seg[3];
    size_t zigzag;
} gs_fp8_cut;
/* The block of element i of a dimension of len elements cut by c (NULL: 0). */
size_t gs_k_fp8_block_of(const gs_fp8_cut *c, size_t len, size_t i);
/* 1 when c cuts len elements into equal whole slices (its segments summing to len, each a
 * multiple of parts); NULL cuts anything. */
int gs_k_fp8_cut_ok(const gs_fp8_cut *c, size_t len);
/* gs_k_fp8_round_current per block of x [rows, cols] (row-major): rows cut by rc, cols by cc
 * (NULL: uncut), each block's scale from its own amax, as each TP rank's cast of its shard
 * computes it. At most GS_FP8_MAX_BLOCKS blocks along a dimension (parts above it: one block).
 * y may be x. */
#define GS_FP8_MAX_BLOCKS 64
void gs_k_fp8_round_blocks(gs_fp8_fmt f, const float *x, float *y, size_t rows, size_t cols, const gs_fp8_cut *rc,
                           const gs_fp8_cut *cc);

/* ---- embedding (vocab-parallel under TP) ------------------------------------------------- */

/* y[t,h] = w[tok - vocab_lo] for tokens in [vocab_lo, vocab_lo + vocab_n), else 0 (TP ranks each
 * hold a vocabulary slice; an all-reduce over TP sums the slices). w is [vocab_n, h]. */
void gs_k_embed_fwd(const int32_t *tok, size_t t, const float *w, size_t vocab_lo, size_t vocab_n, size_t h,
                    float *y);
/* dw[tok - vocab_lo] += dy[t] for tokens in the slice. */
void gs_k_embed_bwd(const int32_t *tok, size_t t, const float *dy, size_t vocab_lo, size_t vocab_n, size_t h,
                    float *dw);

/* ---- RMSNorm ----------------------------------------------------------------------------- */

/* y = x / sqrt(mean(x^2) + eps) * g per row of h; rstd[t] = 1 / sqrt(mean(x^2) + eps) saved. */
void gs_k_rmsnorm_fwd(const float *x, const float *g, float *y, float *rstd, size_t t, size_t h, float eps);
/* dx = ... (written), dg += sum over rows of dy * x * rstd. */
void gs_k_rmsnorm_bwd(const float *x, const float *g, const float *rstd, const float *dy, float *dx, float *dg,
                      size_t t, size_t h);

/* ---- LayerNorm, GELU, linear biases (GPT blocks) --------------------------------------------- */

/* y = (x - mean) / sqrt(var + eps) * g + b per row of h (biased variance); mean[t], rstd[t]
 * saved. */
void gs_k_layernorm_fwd(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd, size_t t,
                        size_t h, float eps);
/* dx written; dg += sum over rows of dy * xhat, db += sum of dy. */
void gs_k_layernorm_bwd(const float *x, const float *g, const float *mean, const float *rstd, const float *dy,
                        float *dx, float *dg, float *db, size_t t, size_t h);
/* y = GELU(x), the tanh approximation, elementwise over n; the backward writes dx = dy GELU'(x). */
void gs_k_gelu_fwd(const float *x, float *y, size_t n);
void gs_k_gelu_bwd(const float *x, const float *dy, float *dx, size_t n);
/* y[r, :] += b for t rows of n; db += the column sums of dy [t, n] (in double, rows in order). */
void gs_k_bias_add(float *y, const float *b, size_t t, size_t n);
void gs_k_bias_grad(const float *dy, float *db, size_t t, size_t n);

/* Mixture of experts (kernels/host/moe.c). The router (Megatron-Core's softmax top-k with
 * moe_router_pre_softmax off): per row of t x experts logits, the k largest (ties: the lower
 * expert; in descending order) into idx [t][k] and the softmax over those k logits into probs
 * [t][k]. The backward: dlogits [t][experts] (written) from dprobs [t][k] through that softmax;
 * the logits not chosen get 0. */
void gs_k_moe_topk_fwd(const float *logits, size_t t, size_t experts, size_t k, int32_t *idx, float *probs);
void gs_k_moe_topk_bwd(const float *probs, const float *dprobs, const int32_t *idx, size_t t, size_t experts,
                       size_t k, float *dlogits);
/* Rows of h floats: dst[i] = w[i] src[idx[i]] (w NULL: 1); dst[idx[i]] += w[i] src[i], in
 * ascending i; out[i] = a[idx[i]] . b[i] (summed in double). */
void gs_k_rows_gather(const float *src, const int32_t *idx, const float *w, size_t n, size_t h, float *dst);
void gs_k_rows_scatter_add(const float *src, const int32_t *idx, const float *w, size_t n, size_t h, float *dst);
void gs_k_rows_dot(const float *a, const int32_t *idx, const float *b, size_t n, size_t h, float *out);

/* ---- rotary position embedding (Llama / GPT-NeoX "rotate half" form) ---------------------- */

/* In place on nh heads of hd (even) per token row, row stride ld floats: for token at position
 * pos = row % seq and pair i < hd/2, (x[i], x[i + hd/2]) rotates by angle pos * theta^(-2i/hd). */
void gs_k_rope_fwd(float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta);
/* The inverse rotation (the gradient of a rotation is its transpose), in place. */
void gs_k_rope_bwd(float *dx, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta);

/* ---- causal attention with grouped KV heads ---------------------------------------------- */

/* For nseq sequences of seq tokens (t = nseq * seq rows): q row r, head i is at q[r*ldq + i*hd];
 * k and v rows at k[r*ldkv + j*hd] for j < nkv (head i uses kv head i / (nh / nkv)); out[r*ldo +
 * i*hd]. scores = q k^T / sqrt(hd), causal mask, softmax; p [nseq][nh][seq][seq] saves the
 * probabilities (masked entries 0) for the backward pass. */
void gs_k_attn_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                   float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd);
/* dq, dk, dv (same layouts and strides as q, k, v) are written; GQA sums the heads sharing a
 * kv head into dk, dv. */
void gs_k_attn_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *p,
                   const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh,
                   size_t nkv, size_t hd);

/* Flash-style (kernels/host/attention_flash.c: FlashAttention-2's tiling and online softmax): the
 * same output as gs_k_attn_fwd without the probabilities; lse [nseq][nh][seq] saves each query
 * row's log sum_b exp(s_ab) (natural log, s = q k^T / sqrt(hd), b <= a) instead, nothing of size
 * seq x seq. */
void gs_k_attn_fwd_flash(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                         size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd);
/* The backward from the forward's out and lse (P recomputed per tile); out and dout share ldo.
 * dq, dk, dv are written, as gs_k_attn_bwd. */
void gs_k_attn_bwd_flash(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                         const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd);

/* The four with attention dropout on the probabilities (kernels/dropout.h: drop's key, seq0 the
 * global index of sequence 0, first the global index of head 0; NULL or threshold 0: none, the
 * plain kernels' results to the bit). The saved p (and lse) stay those of the undropped
 * probabilities; the backward draws the mask again. */
void gs_k_attn_fwd_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                           size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                           const gs_dropout *drop);
void gs_k_attn_bwd_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *p,
                           const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq, size_t seq,
                           size_t nh, size_t nkv, size_t hd, const gs_dropout *drop);
void gs_k_attn_fwd_flash_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                                 size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                 const gs_dropout *drop);
void gs_k_attn_bwd_flash_dropout(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                                 const float *out, const float *lse, const float *dout, size_t ldo, float *dq, float *dk,
                                 float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                 const gs_dropout *drop);

/* ---- dropout of hidden activations -------------------------------------------------------- */

/* In place on rows x h (kernels/dropout.h's hidden indexing): row r is token drop->first + r
 * counted from the start of sequence drop->seq0 (sequences of drop->seq_len tokens); kept
 * elements are scaled by drop->scale, dropped ones zeroed. The same call on a gradient is the
 * backward. Nothing when drop is NULL or its threshold 0. */
void gs_k_dropout_rows(float *x, size_t rows, size_t h, const gs_dropout *drop);

/* ---- SwiGLU ------------------------------------------------------------------------------- */

/* gu [t, 2f] holds gate (first f columns) then up; h[t,f] = silu(gate) * up. */
void gs_k_swiglu_fwd(const float *gu, float *h, size_t t, size_t f);
/* dgu [t, 2f] written from dh. */
void gs_k_swiglu_bwd(const float *gu, const float *dh, float *dgu, size_t t, size_t f);

/* ---- cross-entropy, vocab-parallel -------------------------------------------------------- */

#define GS_K_XENT_STATS 3 /* floats per token row: local max, sum exp(x - max), target logit */

/* Local statistics of logits [t, vocab_n] for the vocabulary slice [vocab_lo, vocab_lo +
 * vocab_n): stats[r*3 + 0] = max, [1] = sum exp(x - max), [2] = the target's logit (0 when the
 * target is outside the slice). */
void gs_k_xent_stats(const float *logits, const int32_t *target, size_t t, size_t vocab_lo, size_t vocab_n,
                     float *stats);
/* Combines the stats of `parts` slices laid out [part][t][3] (what an all-gather of each TP
 * rank's stats gives; parts = 1 untiled) into lse[t] = log sum exp over the whole vocabulary,
 * and returns sum over rows of (lse - target logit) in double (the loss summed, not averaged). */
double gs_k_xent_combine(const float *stats, size_t parts, size_t t, float *lse);
/* dlogits[t, vocab_n] = scale * (softmax(x) - onehot(target)) on the slice, from the global lse. */
void gs_k_xent_bwd(const float *logits, const int32_t *target, const float *lse, size_t t, size_t vocab_lo,
                   size_t vocab_n, float scale, float *dlogits);

/* ---- optimizer ---------------------------------------------------------------------------- */

/* AdamW (decoupled weight decay, bias-corrected, PyTorch's torch.optim.AdamW formula) on n
 * elements of a flat shard; step is 1-based. */
void gs_k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, uint64_t step);

/* ---- seeded data and init ----------------------------------------------------------------- */

/* The tokens of global sequence `seq_index`: s + 1 tokens in [0, vocab) (inputs are [0, s),
 * targets [1, s + 1)). A function of (seed, seq_index, position) only, with learnable structure
 * (each token depends on the previous one) so the loss falls over steps. */
void gs_k_tokens(uint64_t seed, uint64_t seq_index, size_t s, size_t vocab, int32_t *tokens);
/* w[i] = std * N(0,1) drawn from (seed, tensor_id, offset0 + i) only: any shard of a tensor
 * initializes its elements exactly as the whole tensor would (counter-based, splitmix64 +
 * Box-Muller). */
void gs_k_init_normal(float *w, size_t n, uint64_t seed, uint64_t tensor_id, uint64_t offset0, float std);

#endif
