/* The GEMM decomposition of causal GQA attention (kernels/host/kernels.h semantics) as a list of
 * steps: column-major strided-batched GEMMs (the parameters of cublasGemmStridedBatchedEx) and
 * row passes (causal softmax; dS from dP). Pure C, no CUDA: the cuda driver executes the steps
 * with cuBLAS and kernels/cuda/attention_gemm.cu, tests/check_attn_gemm_plan executes the same
 * steps with plain loops against kernels/host/attention.c, so the index mapping is checked on
 * any machine. The layouts and the mapping of every GEMM are written out in attn_gemm_plan.c.
 *
 * The scratch a call takes is sized here per shape; the cuda driver sizes it over a schedule's
 * attention events (exec/cuda_attn_plan.h) for its memory pre-flight.
 *
 * Ownership: a plan owns nothing; steps are passed by pointer to the visitor for the duration of
 * the call, and name buffers (gs_attn_buf) with float offsets, never addresses. */
#ifndef GS_KERNELS_CUDA_ATTN_GEMM_PLAN_H
#define GS_KERNELS_CUDA_ATTN_GEMM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Backward scratch cap (dP and then dS in place, seq*seq floats per kv head of a chunk): the
 * kv heads of one (sequence, group member) are processed in chunks that fit; one head at least. */
#define GS_ATTN_GEMM_SCRATCH_BYTES ((size_t)512 << 20)

typedef enum gs_attn_buf {
    GS_ATTN_Q,       /* q rows [nseq*seq], head i at column i*hd, leading dim ldq */
    GS_ATTN_K,       /* k rows, kv head j at column j*hd, leading dim ldkv */
    GS_ATTN_V,       /* v rows, like k */
    GS_ATTN_OUT,     /* out rows, head i at column i*hd, leading dim ldo */
    GS_ATTN_P,       /* probabilities [nseq][nh][seq][seq]; the flash variant: lse [nseq][nh][seq] */
    GS_ATTN_DOUT,    /* dout, like out */
    GS_ATTN_DQ,      /* dq, like q */
    GS_ATTN_DK,      /* dk, like k */
    GS_ATTN_DV,      /* dv, like v */
    GS_ATTN_SCRATCH, /* backward scratch [chunk][seq][seq] */
    GS_ATTN_BUF_COUNT
} gs_attn_buf;

typedef struct gs_attn_operand {
    gs_attn_buf buf;
    size_t offset; /* floats from the buffer's start to batch member 0 */
    size_t ld;     /* column-major leading dimension, floats */
    size_t stride; /* floats between consecutive batch members */
} gs_attn_operand;

typedef enum gs_attn_step_kind {
    GS_ATTN_STEP_GEMM,    /* c = alpha op(a) op(b) + beta c, column-major, batch members */
    GS_ATTN_STEP_SOFTMAX, /* c: per member, rows a < m of seq floats (ld): causal softmax in place */
    GS_ATTN_STEP_DS,      /* a = P, c = dP in, dS out: dS_ab = P_ab (dP_ab - sum_b' P_ab' dP_ab') */
    /* the flash variant's (P not kept; b names each row's log-sum-exp: member h's row a at
     * b.offset + h * b.stride + a) */
    GS_ATTN_STEP_SOFTMAX_LSE, /* c: as SOFTMAX, and b[a] = max_b S_ab + log sum_b exp(S_ab - max) */
    GS_ATTN_STEP_P_LSE        /* c: scores in, P_ab = exp(S_ab - lse_a) out for b <= a, exactly 0 past a */
} gs_attn_step_kind;

typedef struct gs_attn_step {
    gs_attn_step_kind kind;
    const char *what; /* e.g. "S = scale Q K^T" (static string, for error messages) */
    size_t seq_index, group_member, kv0; /* the sequence, member g of the group, first kv head */
    int ta, tb;       /* GEMM: op(a) = a^T when ta (CUBLAS_OP_T), likewise b */
    size_t m, n, k;   /* GEMM: op(a) [m,k], op(b) [k,n], c [m,n]; row passes: m rows of n = seq */
    float alpha, beta;
    gs_attn_operand a, b, c;
    size_t batch; /* members (kv heads of the chunk) */
} gs_attn_step;

typedef struct gs_attn_shape {
    size_t nseq, seq, nh, nkv, hd; /* sequences, tokens per sequence, query heads, kv heads, head dim */
    size_t ldq, ldkv, ldo;         /* leading dims (floats) of q/dq, k/v/dk/dv, out/dout */
    size_t scratch_bytes;          /* backward scratch cap (GS_ATTN_GEMM_SCRATCH_BYTES; tests: smaller) */
} gs_attn_shape;

/* Returns 0 to continue, nonzero to stop: gs_attn_gemm_fwd/bwd then return GS_ERR_RUNTIME and
 * leave err alone (the visitor reports its own failure). */
typedef int (*gs_attn_visit_fn)(void *ctx, const gs_attn_step *step);

/* Checks the shape (nkv divides nh, sizes within cuBLAS's int range, lds wide enough). */
gs_status gs_attn_gemm_check(const gs_attn_shape *sh, gs_error *err);
/* kv heads per backward chunk (>= 1, <= nkv) and the scratch it needs in floats. */
size_t gs_attn_gemm_chunk(const gs_attn_shape *sh);
size_t gs_attn_gemm_scratch_floats(const gs_attn_shape *sh);
/* The backward's dP/dS scratch in bytes: what the cuda driver allocates (cudaMallocAsync) for one
 * gs_attn_gemm_bwd call, gs_attn_gemm_scratch_floats floats. The forward takes none. */
uint64_t gs_attn_gemm_scratch_bytes(const gs_attn_shape *sh);

/* Which attention path the cuda driver runs (GRIDSTEP_CUDA_ATTENTION): auto (unset, empty or
 * "auto": the GEMM path, in its flash variant for flash scenarios, for every call that draws no
 * attention dropout mask and whose shape fits the scratch cap with one kv head a chunk; the
 * kernels for the others, so long sequences keep the flash kernels' memory), kernels (or
 * "simple", its older name: the flash kernels, or the per-row kernels without flash attention)
 * or gemm (the GEMM path always; a call with dropout is refused, the path draws no masks). */
typedef enum gs_attn_path_pref { GS_ATTN_PATH_AUTO, GS_ATTN_PATH_KERNELS, GS_ATTN_PATH_GEMM } gs_attn_path_pref;

/* Parses the variable's value (NULL: auto); GS_ERR_INPUT naming the value otherwise. */
gs_status gs_attn_path_parse(const char *value, gs_attn_path_pref *out, gs_error *err);
/* Whether one kv head's scratch fits the shape's cap (seq^2 floats, twice that in the flash
 * variant's backward): auto's condition, the same for a call's forward and backward. */
int gs_attn_gemm_fits(const gs_attn_shape *sh, int flash);
/* For one call: 1 the GEMM path, 0 the kernels, -1 refused (gemm forced on a call with dropout);
 * fits: gs_attn_gemm_fits of the call's shape. */
int gs_attn_path_gemm(gs_attn_path_pref pref, int dropping, int fits);

/* The forward's steps in order (writes p and out) / the backward's (reads p, writes dq, dk, dv). */
gs_status gs_attn_gemm_fwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err);
gs_status gs_attn_gemm_bwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err);

/* The flash variant (strategy.flash_attention: kernels/host/attention_flash.c's semantics): the
 * probabilities are not kept. GS_ATTN_P is the log-sum-exp of every score row, [nseq][nh][seq]
 * floats; the forward computes a chunk of kv heads' scores into the scratch, takes the softmax
 * there and writes the lse beside out; the backward recomputes P = exp(S - lse) into the scratch
 * and takes dP/dS in a second scratch half. Chunks of kv heads fit the shape's scratch cap: one
 * seq x seq matrix per head forward, two backward (one head at least). */
size_t gs_attn_gemm_flash_chunk(const gs_attn_shape *sh, int backward);
size_t gs_attn_gemm_flash_scratch_floats(const gs_attn_shape *sh, int backward);
gs_status gs_attn_gemm_flash_fwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err);
gs_status gs_attn_gemm_flash_bwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err);

#ifdef __cplusplus
}
#endif

#endif
