/* The GEMM decomposition of causal GQA attention: which strided-batched GEMMs and row passes, in
 * which order, with which column-major parameters (see attn_gemm_plan.h).
 *
 * Layouts (all row-major, fp32; s a sequence, row0 = s*seq; a a query position, b a key position,
 * d < hd; group = nh / nkv; query head i uses kv head j = i / group, i = j*group + g, g < group):
 *   Q_i  [seq, hd]   Q_i[a,d]  = q[(row0+a)*ldq + i*hd + d]            (dQ_i likewise in dq)
 *   K_j  [seq, hd]   K_j[b,d]  = k[(row0+b)*ldkv + j*hd + d]           (V_j, dK_j, dV_j likewise)
 *   O_i  [seq, hd]   O_i[a,d]  = out[(row0+a)*ldo + i*hd + d]          (dO_i likewise in dout)
 *   P_i  [seq, seq]  P_i[a,b]  = p[((s*nh + i)*seq + a)*seq + b]       (row a: 0 past b = a)
 *   X_h  [seq, seq]  X_h[a,b]  = scratch[(h*seq + a)*seq + b]          (h: the kv head's place in
 *                                                                       its chunk; dP, then dS)
 * A row-major X[r,c] with leading dim L is, read column-major, X^T [c,r] with the same L. So every
 * product Y = A B (row-major) is issued as Y^T = B^T A^T (column-major): cuBLAS's A is our right
 * factor. Each GEMM below is one cublasGemmStridedBatchedEx for a fixed (s, g) over the kv heads
 * j = kv0 .. kv0+batch-1 of a chunk: member strides are group*hd for query-head columns (Q, dQ,
 * O, dO: head j*group+g), hd for kv-head columns (K, V, dK, dV), group*seq*seq for P, seq*seq for
 * the scratch.
 *
 * forward, per (s, g, chunk):
 *   S_i = scale Q_i K_j^T        -> into P_i (the whole [seq,seq]; the softmax masks it)
 *       column-major S^T[b,a] = K_j[b,d] . Q_i^T[d,a]:
 *       op A = T, A = k  (K_j^T stored [hd,seq], lda = ldkv);  op B = N, B = q (Q_i^T [hd,seq], ldb = ldq)
 *       m = seq, n = seq, k = hd, alpha = scale, beta = 0, C = p (ldc = seq)
 *   softmax: row a of P_i over b <= a, 0 for b > a
 *   O_i = P_i V_j
 *       column-major O^T[d,a] = V_j^T[d,b] . P_i^T[b,a]:
 *       op A = N, A = v (V_j^T [hd,seq], lda = ldkv);  op B = N, B = p (P_i^T [seq,seq], ldb = seq)
 *       m = hd, n = seq, k = seq, alpha = 1, beta = 0, C = out (ldc = ldo)
 * backward, per (s, g, chunk), g ascending:
 *   dP_i = dO_i V_j^T            -> scratch
 *       column-major dP^T[b,a] = V_j[b,d] . dO_i^T[d,a]:
 *       op A = T, A = v (lda = ldkv);  op B = N, B = dout (ldb = ldo)
 *       m = seq, n = seq, k = hd, alpha = 1, beta = 0, C = scratch (ldc = seq)
 *   dS_i = P_i o (dP_i - D_i), D_i[a] = sum_b P_i[a,b] dP_i[a,b]   (row pass, in place)
 *   dQ_i = scale dS_i K_j
 *       column-major dQ^T[d,a] = K_j^T[d,b] . dS_i^T[b,a]:
 *       op A = N, A = k (lda = ldkv);  op B = N, B = scratch (dS_i^T [seq,seq], ldb = seq)
 *       m = hd, n = seq, k = seq, alpha = scale, beta = 0, C = dq (ldc = ldq)
 *   dK_j (+)= scale dS_i^T Q_i   (beta 0 for g = 0, then 1: the group summed in order g = 0, 1, ..)
 *       column-major dK^T[d,b] = Q_i^T[d,a] . dS_i[a,b]:
 *       op A = N, A = q (lda = ldq);  op B = T, B = scratch (stored dS_i^T [b,a], ldb = seq)
 *       m = hd, n = seq, k = seq, alpha = scale, C = dk (ldc = ldkv)
 *   dV_j (+)= P_i^T dO_i          (beta as dK)
 *       column-major dV^T[d,b] = dO_i^T[d,a] . P_i[a,b]:
 *       op A = N, A = dout (lda = ldo);  op B = T, B = p (stored P_i^T [b,a], ldb = seq)
 *       m = hd, n = seq, k = seq, alpha = 1, C = dv (ldc = ldkv)
 * Every output element is written by exactly one member of one call with beta 0 before any beta 1
 * call reads it: out, dq by their (s, i); p by its (s, i); dk, dv by (s, j) at g = 0. The masked
 * half of each score matrix is computed and thrown away (P is exactly 0 there, so it adds exact
 * zeros to O, dQ, dK, dV).
 *
 * The flash variant (gs_attn_gemm_flash_*): GS_ATTN_P holds L_i [seq] = lse of each score row,
 * L_i[a] = p[(s*nh + i)*seq + a] (member stride group*seq); X_h is the scratch's first half, Y_h
 * (backward) its second, at chunk*seq*seq floats:
 *   forward, per (s, g, chunk):  S_i -> X (as S above, C = X); softmax of X's rows with L_i
 *       written beside; O_i = X V_j (as O above with B = X)
 *   backward, per (s, g, chunk): S_i -> X; X = exp(X - L_i) causal (P recomputed); dP_i -> Y;
 *       dS in Y from X and Y (as above, a = X); dQ, dK (+)= from Y; dV (+)= X^T dO (B = X).
 * Every output element is written as in the kept-P plan, and L by its (s, i) in the forward. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "kernels/cuda/attn_gemm_plan.h"

gs_status gs_attn_path_parse(const char *value, gs_attn_path_pref *out, gs_error *err)
{
    if (!value || !value[0] || strcmp(value, "auto") == 0)
        *out = GS_ATTN_PATH_AUTO;
    else if (strcmp(value, "kernels") == 0 || strcmp(value, "simple") == 0)
        *out = GS_ATTN_PATH_KERNELS;
    else if (strcmp(value, "gemm") == 0)
        *out = GS_ATTN_PATH_GEMM;
    else
        return gs_error_set(err, GS_ERR_INPUT,
                            "GRIDSTEP_CUDA_ATTENTION='%s': expected auto (the default: cuBLAS GEMMs with row passes, "
                            "recomputing P from each row's lse under flash attention, and the kernels for calls "
                            "with attention dropout or past the scratch cap), kernels (the flash or per-row kernels always; 'simple' is "
                            "its older name) or gemm (the GEMMs always; attention dropout refused)",
                            value);
    return GS_OK;
}

int gs_attn_gemm_fits(const gs_attn_shape *sh, int flash)
{
    double per_head = (flash ? 2.0 : 1.0) * (double)sh->seq * (double)sh->seq * sizeof(float);
    return per_head <= (double)sh->scratch_bytes;
}

int gs_attn_path_gemm(gs_attn_path_pref pref, int dropping, int fits)
{
    switch (pref) {
    case GS_ATTN_PATH_KERNELS: return 0;
    case GS_ATTN_PATH_GEMM: return dropping ? -1 : 1;
    default: return dropping || !fits ? 0 : 1;
    }
}

gs_status gs_attn_gemm_check(const gs_attn_shape *sh, gs_error *err)
{
    if (!sh->nkv || sh->nh % sh->nkv)
        return gs_error_set(err, GS_ERR_INPUT, "attention (gemm): %zu query heads not a multiple of %zu kv heads",
                            sh->nh, sh->nkv);
    size_t lim = (size_t)INT_MAX;
    if (sh->seq > lim || sh->hd > lim || sh->ldq > lim || sh->ldkv > lim || sh->ldo > lim || sh->nkv > lim)
        return gs_error_set(err, GS_ERR_INPUT,
                            "attention (gemm): seq %zu, head dim %zu or a leading dim (%zu, %zu, %zu) past cuBLAS's "
                            "int range",
                            sh->seq, sh->hd, sh->ldq, sh->ldkv, sh->ldo);
    if (sh->ldq < sh->nh * sh->hd || sh->ldkv < sh->nkv * sh->hd || sh->ldo < sh->nh * sh->hd)
        return gs_error_set(err, GS_ERR_INPUT,
                            "attention (gemm): leading dims q %zu, kv %zu, out %zu narrower than the heads (%zu x %zu, "
                            "%zu x %zu)",
                            sh->ldq, sh->ldkv, sh->ldo, sh->nh, sh->hd, sh->nkv, sh->hd);
    return GS_OK;
}

size_t gs_attn_gemm_chunk(const gs_attn_shape *sh)
{
    size_t per_head = sh->seq * sh->seq * sizeof(float);
    size_t c = per_head ? sh->scratch_bytes / per_head : sh->nkv;
    if (c < 1)
        c = 1;
    if (c > sh->nkv)
        c = sh->nkv;
    return c;
}

size_t gs_attn_gemm_scratch_floats(const gs_attn_shape *sh)
{
    return gs_attn_gemm_chunk(sh) * sh->seq * sh->seq;
}

uint64_t gs_attn_gemm_scratch_bytes(const gs_attn_shape *sh)
{
    return (uint64_t)gs_attn_gemm_scratch_floats(sh) * sizeof(float);
}

size_t gs_attn_gemm_flash_chunk(const gs_attn_shape *sh, int backward)
{
    size_t per_head = (backward ? 2 : 1) * sh->seq * sh->seq * sizeof(float);
    size_t c = per_head ? sh->scratch_bytes / per_head : sh->nkv;
    if (c < 1)
        c = 1;
    if (c > sh->nkv)
        c = sh->nkv;
    return c;
}

size_t gs_attn_gemm_flash_scratch_floats(const gs_attn_shape *sh, int backward)
{
    return (backward ? 2 : 1) * gs_attn_gemm_flash_chunk(sh, backward) * sh->seq * sh->seq;
}

static gs_attn_operand operand(gs_attn_buf buf, size_t offset, size_t ld, size_t stride)
{
    gs_attn_operand o = {buf, offset, ld, stride};
    return o;
}

static gs_attn_step gemm_step(const char *what, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                              gs_attn_operand a, gs_attn_operand b, float beta, gs_attn_operand c)
{
    gs_attn_step st = {GS_ATTN_STEP_GEMM, what, 0, 0, 0, ta, tb, m, n, k, alpha, beta, a, b, c, 0};
    return st;
}

/* Member-0 offsets and member strides of one (s, g, kv0) chunk's operands. */
typedef struct chunk_at {
    gs_attn_operand q, k, v, out, p, dout, dq, dk, dv, x;
    gs_attn_operand lse, y; /* the flash variant's: row lse in GS_ATTN_P; the scratch's second half */
} chunk_at;

static chunk_at chunk_operands(const gs_attn_shape *sh, size_t s, size_t g, size_t kv0)
{
    size_t group = sh->nh / sh->nkv, row0 = s * sh->seq, i0 = kv0 * group + g, sq = sh->seq * sh->seq;
    chunk_at c;
    c.q = operand(GS_ATTN_Q, row0 * sh->ldq + i0 * sh->hd, sh->ldq, group * sh->hd);
    c.dq = c.q;
    c.dq.buf = GS_ATTN_DQ;
    c.k = operand(GS_ATTN_K, row0 * sh->ldkv + kv0 * sh->hd, sh->ldkv, sh->hd);
    c.v = c.k;
    c.v.buf = GS_ATTN_V;
    c.dk = c.k;
    c.dk.buf = GS_ATTN_DK;
    c.dv = c.k;
    c.dv.buf = GS_ATTN_DV;
    c.out = operand(GS_ATTN_OUT, row0 * sh->ldo + i0 * sh->hd, sh->ldo, group * sh->hd);
    c.dout = c.out;
    c.dout.buf = GS_ATTN_DOUT;
    c.p = operand(GS_ATTN_P, (s * sh->nh + i0) * sq, sh->seq, group * sq);
    c.x = operand(GS_ATTN_SCRATCH, 0, sh->seq, sq);
    c.lse = operand(GS_ATTN_P, (s * sh->nh + i0) * sh->seq, sh->seq, group * sh->seq);
    c.y = operand(GS_ATTN_SCRATCH, gs_attn_gemm_flash_chunk(sh, 1) * sq, sh->seq, sq);
    return c;
}

static int emit(gs_attn_visit_fn visit, void *ctx, gs_attn_step st, size_t s, size_t g, size_t kv0, size_t batch)
{
    st.seq_index = s;
    st.group_member = g;
    st.kv0 = kv0;
    st.batch = batch;
    return visit(ctx, &st);
}

static float attn_scale(const gs_attn_shape *sh)
{
    return (float)(1.0 / sqrt((double)sh->hd));
}

/* The steps of one (sequence s, group member g, chunk of nb kv heads from kv0), operands c, for
 * each of the four plans; nonzero when the visitor stopped. */
typedef int (*chunk_steps_fn)(const gs_attn_shape *sh, const chunk_at *c, size_t s, size_t g, size_t kv0, size_t nb,
                              gs_attn_visit_fn visit, void *ctx);

static int fwd_steps(const gs_attn_shape *sh, const chunk_at *c, size_t s, size_t g, size_t kv0, size_t nb,
                     gs_attn_visit_fn visit, void *ctx)
{
    size_t seq = sh->seq, hd = sh->hd;
    gs_attn_step soft = {GS_ATTN_STEP_SOFTMAX, "causal softmax rows of P", 0, 0, 0, 0, 0, seq, seq, 0,
                         1.0f, 0.0f, c->p, c->p, c->p, 0};
    return emit(visit, ctx, gemm_step("S = scale Q K^T", 1, 0, seq, seq, hd, attn_scale(sh), c->k, c->q, 0.0f, c->p), s,
                g, kv0, nb) ||
           emit(visit, ctx, soft, s, g, kv0, nb) ||
           emit(visit, ctx, gemm_step("O = P V", 0, 0, hd, seq, seq, 1.0f, c->v, c->p, 0.0f, c->out), s, g, kv0, nb);
}

/* The backward's dQ, dK, dV from dS in X (kept P) or Y (flash) and P in `p`: the same three
 * GEMMs for both plans. */
static int bwd_grads(const gs_attn_shape *sh, const chunk_at *c, gs_attn_operand ds, gs_attn_operand p, size_t s,
                     size_t g, size_t kv0, size_t nb, gs_attn_visit_fn visit, void *ctx)
{
    size_t seq = sh->seq, hd = sh->hd;
    float scale = attn_scale(sh), acc = g == 0 ? 0.0f : 1.0f; /* dk, dv: the group summed in order */
    return emit(visit, ctx, gemm_step("dQ = scale dS K", 0, 0, hd, seq, seq, scale, c->k, ds, 0.0f, c->dq), s, g, kv0,
                nb) ||
           emit(visit, ctx, gemm_step("dK += scale dS^T Q", 0, 1, hd, seq, seq, scale, c->q, ds, acc, c->dk), s, g,
                kv0, nb) ||
           emit(visit, ctx, gemm_step("dV += P^T dO", 0, 1, hd, seq, seq, 1.0f, c->dout, p, acc, c->dv), s, g, kv0, nb);
}

static int bwd_steps(const gs_attn_shape *sh, const chunk_at *c, size_t s, size_t g, size_t kv0, size_t nb,
                     gs_attn_visit_fn visit, void *ctx)
{
    size_t seq = sh->seq, hd = sh->hd;
    gs_attn_step ds = {GS_ATTN_STEP_DS, "dS = P o (dP - rowsum(P o dP))", 0, 0, 0, 0, 0, seq, seq, 0,
                       1.0f, 0.0f, c->p, c->p, c->x, 0};
    return emit(visit, ctx, gemm_step("dP = dO V^T", 1, 0, seq, seq, hd, 1.0f, c->v, c->dout, 0.0f, c->x), s, g, kv0,
                nb) ||
           emit(visit, ctx, ds, s, g, kv0, nb) || bwd_grads(sh, c, c->x, c->p, s, g, kv0, nb, visit, ctx);
}

static int flash_fwd_steps(const gs_attn_shape *sh, const chunk_at *c, size_t s, size_t g, size_t kv0, size_t nb,
                           gs_attn_visit_fn visit, void *ctx)
{
    size_t seq = sh->seq, hd = sh->hd;
    gs_attn_step soft = {GS_ATTN_STEP_SOFTMAX_LSE, "causal softmax rows of S, their lse", 0, 0, 0, 0, 0,
                         seq, seq, 0, 1.0f, 0.0f, c->x, c->lse, c->x, 0};
    return emit(visit, ctx, gemm_step("S = scale Q K^T", 1, 0, seq, seq, hd, attn_scale(sh), c->k, c->q, 0.0f, c->x), s,
                g, kv0, nb) ||
           emit(visit, ctx, soft, s, g, kv0, nb) ||
           emit(visit, ctx, gemm_step("O = P V", 0, 0, hd, seq, seq, 1.0f, c->v, c->x, 0.0f, c->out), s, g, kv0, nb);
}

static int flash_bwd_steps(const gs_attn_shape *sh, const chunk_at *c, size_t s, size_t g, size_t kv0, size_t nb,
                           gs_attn_visit_fn visit, void *ctx)
{
    size_t seq = sh->seq, hd = sh->hd;
    gs_attn_step pl = {GS_ATTN_STEP_P_LSE, "P = exp(S - lse), causal", 0, 0, 0, 0, 0, seq, seq, 0, 1.0f,
                       0.0f, c->x, c->lse, c->x, 0};
    gs_attn_step ds = {GS_ATTN_STEP_DS, "dS = P o (dP - rowsum(P o dP))", 0, 0, 0, 0, 0, seq, seq, 0,
                       1.0f, 0.0f, c->x, c->x, c->y, 0};
    return emit(visit, ctx, gemm_step("S = scale Q K^T", 1, 0, seq, seq, hd, attn_scale(sh), c->k, c->q, 0.0f, c->x), s,
                g, kv0, nb) ||
           emit(visit, ctx, pl, s, g, kv0, nb) ||
           emit(visit, ctx, gemm_step("dP = dO V^T", 1, 0, seq, seq, hd, 1.0f, c->v, c->dout, 0.0f, c->y), s, g, kv0,
                nb) ||
           emit(visit, ctx, ds, s, g, kv0, nb) || bwd_grads(sh, c, c->y, c->x, s, g, kv0, nb, visit, ctx);
}

typedef enum plan_kind { PLAN_FWD, PLAN_BWD, PLAN_FLASH_FWD, PLAN_FLASH_BWD } plan_kind;

/* Every plan's order: sequences, then group members, then chunks of kv heads (the forward of the
 * kept-P plan takes every kv head at once: it needs no scratch). */
static gs_status plan(const gs_attn_shape *sh, plan_kind kind, gs_attn_visit_fn visit, void *ctx, gs_error *err)
{
    gs_status rc = gs_attn_gemm_check(sh, err);
    if (rc != GS_OK)
        return rc;
    static const chunk_steps_fn steps[] = {fwd_steps, bwd_steps, flash_fwd_steps, flash_bwd_steps};
    size_t group = sh->nh / sh->nkv;
    size_t chunk = kind == PLAN_FWD         ? sh->nkv
                   : kind == PLAN_BWD       ? gs_attn_gemm_chunk(sh)
                                            : gs_attn_gemm_flash_chunk(sh, kind == PLAN_FLASH_BWD);
    for (size_t s = 0; s < sh->nseq; s++)
        for (size_t g = 0; g < group; g++)
            for (size_t kv0 = 0; kv0 < sh->nkv; kv0 += chunk) {
                size_t nb = sh->nkv - kv0 < chunk ? sh->nkv - kv0 : chunk;
                chunk_at c = chunk_operands(sh, s, g, kv0);
                if (steps[kind](sh, &c, s, g, kv0, nb, visit, ctx))
                    return GS_ERR_RUNTIME;
            }
    return GS_OK;
}

gs_status gs_attn_gemm_fwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err)
{
    return plan(sh, PLAN_FWD, visit, ctx, err);
}

gs_status gs_attn_gemm_bwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err)
{
    return plan(sh, PLAN_BWD, visit, ctx, err);
}

gs_status gs_attn_gemm_flash_fwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err)
{
    return plan(sh, PLAN_FLASH_FWD, visit, ctx, err);
}

gs_status gs_attn_gemm_flash_bwd(const gs_attn_shape *sh, gs_attn_visit_fn visit, void *ctx, gs_error *err)
{
    return plan(sh, PLAN_FLASH_BWD, visit, ctx, err);
}
