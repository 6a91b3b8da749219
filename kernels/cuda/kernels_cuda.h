/* CUDA kernels of the exec backend's cuda driver: the same forward and backward passes as
 * kernels/host/kernels.h (same arguments, layouts and write/accumulate rules), enqueued on a
 * stream. GEMMs are not here: the driver calls cuBLASLt (and cuBLAS for the GEMM attention
 * path). Every function only launches (returns the launch's cudaError_t as an int, 0 ok);
 * none synchronizes, none allocates except gs_cu_attn_bwd and gs_cu_attn_bwd_flash, which take
 * stream-ordered scratch (cudaMallocAsync) and free it on the stream.
 *
 * Numerics: fp32 storage and arithmetic, row reductions (RMSNorm, softmax, cross-entropy sums) in
 * double like the host; results agree with the host kernels to float rounding (reduction order
 * differs: a tree, not a loop), which the GPU check states as a relative tolerance.
 *
 * Ownership: every pointer is device memory of the stream's device, borrowed for the launch. */
#ifndef GS_KERNELS_CUDA_H
#define GS_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/dropout.h"

#ifdef __cplusplus
extern "C" {
#endif

int gs_cu_add(cudaStream_t st, float *y, const float *x, size_t n);
int gs_cu_scale(cudaStream_t st, float *y, float a, size_t n);
int gs_cu_fill(cudaStream_t st, float *y, float value, size_t n);

int gs_cu_embed_fwd(cudaStream_t st, const int32_t *tok, size_t t, const float *w, size_t vocab_lo, size_t vocab_n,
                    size_t h, float *y);
/* Deterministic: one thread per column walks the rows in order (no atomics). */
int gs_cu_embed_bwd(cudaStream_t st, const int32_t *tok, size_t t, const float *dy, size_t vocab_lo, size_t vocab_n,
                    size_t h, float *dw);

int gs_cu_rmsnorm_fwd(cudaStream_t st, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                      float eps);
int gs_cu_rmsnorm_bwd(cudaStream_t st, const float *x, const float *g, const float *rstd, const float *dy, float *dx,
                      float *dg, size_t t, size_t h);

int gs_cu_rope(cudaStream_t st, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float theta,
               double sign); /* sign +1: forward, -1: backward (the inverse rotation) */

int gs_cu_attn_fwd(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                   float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd);
int gs_cu_attn_bwd(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                   const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                   size_t seq, size_t nh, size_t nkv, size_t hd);

/* Flash attention (FlashAttention-2 in fp32, kernels/cuda/attention_flash.cu): the same
 * semantics as gs_cu_attn_fwd / gs_cu_attn_bwd except that no probabilities are kept: the forward
 * writes lse [nseq][nh][seq], lse_a = log sum_{b<=a} exp(score_ab) (natural log), score_ab =
 * q_a . k_b / sqrt(hd); the backward recomputes P from it tile by tile. Causal; GQA: query head i
 * uses kv head i / (nh / nkv). out and dout share ldo; dq has ldq; dk, dv have ldkv; the
 * backward writes (=) dq, dk, dv, takes stream-ordered scratch for D (nseq * nh * seq floats)
 * and uses no atomics (the same bits every run). Head dimension 1..256. */
int gs_cu_attn_fwd_flash(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv,
                         size_t hd);
int gs_cu_attn_bwd_flash(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         const float *out, const float *lse, const float *dout, size_t ldo, float *dq, float *dk,
                         float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd);

/* The exact and the flash kernels with attention dropout on the probabilities (kernels/dropout.h:
 * drop's key, seq0 the global index of sequence 0, first the global index of head 0; NULL or
 * threshold 0: none, the plain kernels' bits). p and lse stay those of the undropped
 * probabilities; the backward draws the mask again. */
int gs_cu_attn_fwd_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                           float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                           const gs_dropout *drop);
int gs_cu_attn_bwd_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                           const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                           size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop);
int gs_cu_attn_fwd_flash_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                 size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                                 size_t nkv, size_t hd, const gs_dropout *drop);
int gs_cu_attn_bwd_flash_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                 size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                                 float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                                 size_t hd, const gs_dropout *drop);
/* dst (n bf16 values) = src rounded to nearest, ties to even (__float2bfloat16_rn: the bits of
 * gs_k_round_bf16's results' upper halves): the bf16 GEMM inputs of GRIDSTEP_CUDA_GEMM=bf16. */
int gs_cu_to_bf16(cudaStream_t st, void *dst, const float *src, size_t n);
/* Hidden dropout in place on rows x h (gs_k_dropout_rows's semantics and bits). */
int gs_cu_dropout_rows(cudaStream_t st, float *x, size_t rows, size_t h, const gs_dropout *drop);

/* The GEMM attention path's row passes (kernels/cuda/attn_gemm_plan.c issues the GEMMs): rows
 * a < rows of n floats at base + h*stride + a*ld for members h < batch. softmax_rows: causal
 * softmax over b <= a in place, exactly 0 past a. ds_rows: x holds dP; writes dS = P o (dP - D),
 * D_a = sum_{b<=a} P_ab dP_ab (double), exactly 0 past a. Fixed reduction order (deterministic). */
int gs_cu_attn_softmax_rows(cudaStream_t st, float *p, size_t ld, size_t stride, size_t rows, size_t n, size_t batch);
int gs_cu_attn_ds_rows(cudaStream_t st, const float *p, size_t ldp, size_t pstride, float *x, size_t ldx,
                       size_t xstride, size_t rows, size_t n, size_t batch);
/* The flash variant's row passes (lse of member h's row a at lse[h * lstride + a]): the causal
 * softmax in place writing each row's lse = max + log(sum of exp(S - max)), and P = exp(S - lse)
 * in place of the scores (0 past the diagonal). */
int gs_cu_attn_softmax_lse_rows(cudaStream_t st, float *p, size_t ld, size_t stride, float *lse, size_t lstride,
                                size_t rows, size_t n, size_t batch);
int gs_cu_attn_p_lse_rows(cudaStream_t st, float *x, size_t ld, size_t stride, const float *lse, size_t lstride,
                          size_t rows, size_t n, size_t batch);

int gs_cu_layernorm_fwd(cudaStream_t st, const float *x, const float *g, const float *b, float *y, float *mean,
                        float *rstd, size_t t, size_t h, float eps);
int gs_cu_layernorm_bwd(cudaStream_t st, const float *x, const float *g, const float *mean, const float *rstd,
                        const float *dy, float *dx, float *dg, float *db, size_t t, size_t h);
int gs_cu_gelu_fwd(cudaStream_t st, const float *x, float *y, size_t n);
int gs_cu_gelu_bwd(cudaStream_t st, const float *x, const float *dy, float *dx, size_t n);
int gs_cu_bias_add(cudaStream_t st, float *y, const float *b, size_t t, size_t n);
int gs_cu_bias_grad(cudaStream_t st, const float *dy, float *db, size_t t, size_t n);
int gs_cu_swiglu_fwd(cudaStream_t st, const float *gu, float *h, size_t t, size_t f);
int gs_cu_swiglu_bwd(cudaStream_t st, const float *gu, const float *dh, float *dgu, size_t t, size_t f);

int gs_cu_xent_stats(cudaStream_t st, const float *logits, const int32_t *target, size_t t, size_t vocab_lo,
                     size_t vocab_n, float *stats);
/* lse[t] on the device; *loss_dev (one double, device memory) = sum over rows of lse - target
 * logit, summed in a fixed order. */
int gs_cu_xent_combine(cudaStream_t st, const float *stats, size_t parts, size_t t, float *lse, double *loss_dev);
int gs_cu_xent_bwd(cudaStream_t st, const float *logits, const int32_t *target, const float *lse, size_t t,
                   size_t vocab_lo, size_t vocab_n, float scale, float *dlogits);

/* Mixture of experts (kernels/cuda/moe.cu; kernels/host/kernels.h's gs_k_moe_* and gs_k_rows_*
 * semantics; idx int32 in device memory). The row moves give the host's bits (no fused
 * multiply-add; scatter-add walks the rows in the host's order); top-k's softmax can differ from
 * the host's in the last bit of a double exp. */
int gs_cu_moe_topk_fwd(cudaStream_t st, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                       float *probs);
int gs_cu_moe_topk_bwd(cudaStream_t st, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                       size_t experts, size_t k, float *dlogits);
int gs_cu_rows_gather(cudaStream_t st, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                      float *dst);
int gs_cu_rows_scatter_add(cudaStream_t st, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                           float *dst);
int gs_cu_rows_dot(cudaStream_t st, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                   float *out);

/* FP8 under current scaling (kernels/cuda/fp8.cu): y (n floats) = x cast to fmt (0 E4M3, 1 E5M2)
 * at the scale of x's own amax and back, gs_k_fp8_round_current's bits; the amax and the scale stay
 * in scratch (gs_cu_fp8_scratch_floats() floats of device memory, its last four: scale, 1 / scale,
 * amax), nothing reaches the host. y may be x. */
size_t gs_cu_fp8_scratch_floats(void);
int gs_cu_fp8_round_current(cudaStream_t st, int fmt, const float *x, size_t n, float *scratch, float *y);
/* Delayed scaling: the same cast at a given scale (gs_k_fp8_round_scaled's bits); x's amax is left
 * in scratch, at the device float gs_cu_fp8_amax_of(scratch). */
int gs_cu_fp8_round_scaled(cudaStream_t st, int fmt, float scale, const float *x, size_t n, float *scratch, float *y);
const float *gs_cu_fp8_amax_of(const float *scratch);
/* The same scale, the codes themselves: q (rows x cols bytes) = the FP8 codes of x (rows x cols
 * row-major) at x's current scale, in x's layout or transposed (cols x rows), for cuBLASLt's FP8
 * GEMMs; gs_cu_fp8_inverse_scale(scratch) is then the device float 1 / scale those GEMMs take
 * as the operand's scale. */
int gs_cu_fp8_quantize_current(cudaStream_t st, int fmt, const float *x, size_t rows, size_t cols, int transpose,
                               float *scratch, unsigned char *q);
const float *gs_cu_fp8_inverse_scale(const float *scratch);

/* The scalars are the host kernel's (computed on the host from lr, betas and step). */
int gs_cu_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v, size_t n, float decay,
                float step_size, float bias2_sqrt, float beta2, float one_minus_b2, float lerp_w, float lerp_1mw,
                int lerp_low, float eps);

#ifdef __cplusplus
}
#endif

#endif
