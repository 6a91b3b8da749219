/* The cuda driver's compute ops: GEMMs through cuBLASLt, attention GEMMs through cuBLAS, the
 * kernels/cuda launchers (exec/driver_cuda_internal.h). */
#include <math.h>

#include "exec/driver_cuda_internal.h"
#include "kernels/cuda/kernels_cuda.h"

/* ---- GEMM through cuBLASLt ------------------------------------------------------------------- */

/* The largest power of two (<= 256) dividing the address: the buffer's alignment in bytes. */
static uint32_t alignment_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al)
        al /= 2;
    return al;
}

int gs__cuda_ensure_workspace(gs_drv_stream *s)
{
    if (s->workspace)
        return 1;
    cudaError_t e = cudaMallocAsync(&s->workspace, GEMM_WORKSPACE_BYTES, gs__cuda_work_on(s));
    if (e != cudaSuccess) {
        s->workspace = NULL;
        gs__cuda_fail_stream(s, "cudaMallocAsync (cuBLASLt workspace): %s", cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

void *gs__cuda_stream_buffer(gs_drv_stream *s, void **buf, size_t *cap, size_t bytes, const char *what)
{
    if (bytes > *cap) {
        if (*buf)
            cudaFreeAsync(*buf, s->cs);
        *buf = NULL;
        *cap = 0;
        cudaError_t e = cudaMallocAsync(buf, bytes, s->cs);
        if (e != cudaSuccess) {
            *buf = NULL;
            gs__cuda_fail_stream(s, "cudaMallocAsync (%zu B for %s): %s", bytes, what, cudaGetErrorString(e));
            return NULL;
        }
        *cap = bytes;
    }
    return *buf;
}

/* GRIDSTEP_CUDA_GEMM=bf16: A's and B's stored extents (na, nb elements from a and b) cast to
 * bf16 into the stream's buffer, same layout; *a16, *b16 point at the copies. 0 on failure (the
 * stream failed). */
static int cast_inputs(gs_drv_stream *s, const float *a, size_t na, const float *b, size_t nb, void **a16,
                       void **b16)
{
    size_t bytes = (na + nb) * 2 + 256; /* B's copy starts 256-byte aligned, as cuBLASLt prefers */
    if (!gs__cuda_stream_buffer(s, &s->bf16_buf, &s->bf16_cap, bytes, "bf16 GEMM inputs"))
        return 0;
    *a16 = s->bf16_buf;
    *b16 = (char *)s->bf16_buf + (na * 2 + 255) / 256 * 256;
    int rc = gs_cu_to_bf16(gs__cuda_work_on(s), *a16, a, na);
    if (!rc)
        rc = gs_cu_to_bf16(gs__cuda_work_on(s), *b16, b, nb);
    if (rc) {
        gs__cuda_fail_stream(s, "kernel to_bf16: %s", cudaGetErrorString((cudaError_t)rc));
        return 0;
    }
    return 1;
}

cublasStatus_t gs__cuda_lt_run(gs_drv_stream *s, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                               cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const void *a, const void *b,
                               float beta, float *c, const char **call)
{
    rank_dev *r = &s->d->r[s->rank];
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = GEMM_WORKSPACE_BYTES;
    float alpha = 1.0f;
    *call = "cublasLtMatmulPreferenceCreate";
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* the buffers are often offsets into a flat unit or a stream buffer (4-byte aligned only):
     * tell the heuristic, which otherwise assumes 256-byte alignment */
    uint32_t al_a = alignment_of(a), al_b = alignment_of(b), al_c = alignment_of(c);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmulAlgoGetHeuristic";
        st = cublasLtMatmulAlgoGetHeuristic(r->lt, op, la, lb, lc, lc, pref, 1, &heur, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found == 0)
            st = CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmul";
        st = cublasLtMatmul(r->lt, op, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &heur.algo, s->workspace,
                            GEMM_WORKSPACE_BYTES, gs__cuda_work_on(s));
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    return st;
}

void gs__cuda_lt_free(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                      cublasLtMatrixLayout_t lc)
{
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (op)
        cublasLtMatmulDescDestroy(op);
}

/* Column-major C[m,n] = op(A) op(B) + beta C (alpha 1), fp32 storage, fp32 (or TF32) compute;
 * with GRIDSTEP_CUDA_GEMM=bf16, A and B cast to bf16 first and the product accumulated in fp32
 * into fp32 C (cuBLASLt's bf16-in, fp32-out GEMM). */
static void gemm_cm(gs_drv_stream *s, int ta, int tb, size_t m, size_t n, size_t k, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    if (!m || !n)
        return;
    if (!k) {
        if (beta == 0.0f)
            for (size_t j = 0; j < n; j++)
                CU_OK(s, cudaMemsetAsync(c + j * ldc, 0, m * sizeof(float), gs__cuda_work_on(s)));
        else if (beta != 1.0f)
            gs__cuda_fail_stream(s, "gemm with k = 0 and beta %g", (double)beta);
        return;
    }
    gs_drv *d = s->d;
    if (!gs__cuda_ensure_workspace(s))
        return;
    const void *av = a, *bv = b;
    cudaDataType_t in_type = CUDA_R_32F;
    if (d->bf16) {
        void *a16 = NULL, *b16 = NULL;
        /* each stored matrix's extent: (columns - 1) leading dimensions and the last column's rows
         * (no element past it is read) */
        size_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
        if (!cast_inputs(s, a, lda * (ca - 1) + ra, b, ldb * (cb - 1) + rb, &a16, &b16))
            return;
        av = a16, bv = b16, in_type = CUDA_R_16BF;
    }
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const char *call = "cublasLtMatmulDescCreate";
    cublasStatus_t st = cublasLtMatmulDescCreate(&op, d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                                 CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulDescSetAttribute";
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatrixLayoutCreate";
        st = cublasLtMatrixLayoutCreate(&la, in_type, ta ? k : m, ta ? m : k, (int64_t)lda);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lb, in_type, tb ? n : k, tb ? k : n, (int64_t)ldb);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, (int64_t)ldc);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = gs__cuda_lt_run(s, op, la, lb, lc, av, bv, beta, c, &call);
    if (st != CUBLAS_STATUS_SUCCESS)
        gs__cuda_fail_stream(s, "%s (m=%zu n=%zu k=%zu%s%s%s): %s", call, m, n, k, ta ? " A^T" : "", tb ? " B^T" : "",
                             d->bf16 ? ", bf16 inputs" : "", cublasLtGetStatusString(st));
    gs__cuda_lt_free(op, la, lb, lc);
}

/* Row-major y[t,n] = x[t,k] w[n,k]^T is column-major y^T = w x^T: A = w as [k,n] transposed. */
void gs__cuda_k_linear_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    gemm_cm(s, 1, 0, n, t, k, w, k, x, k, 0.0f, y, n);
}

void gs__cuda_k_linear_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                           size_t t, size_t k, size_t n)
{
    if (dx) /* dx^T [k,t] = w^T [k,n] dy^T [n,t] */
        gemm_cm(s, 0, 0, k, t, n, w, k, dy, n, 0.0f, dx, k);
    if (dw) /* dw^T [k,n] += x^T [k,t] dy [t,n] */
        gemm_cm(s, 0, 1, k, n, t, x, k, dy, n, 1.0f, dw, k);
}

/* ---- attention through cuBLAS GEMMs (GRIDSTEP_CUDA_ATTENTION=gemm) ---------------------------- */

/* Creates the stream's cuBLAS handle: bound to the stream and to its workspace (one handle per
 * stream, so cuBLAS's results do not depend on which stream ran before), default math mode (the
 * compute type of each call chooses fp32 or TF32). Made when a compute stream is created (so
 * that cuBLAS's own set-up allocations happen before the step, not between NCCL kernels), or
 * at the first use on another stream. On failure *call names the failing call. */
cublasStatus_t gs__cuda_blas_create(gs_drv_stream *s, const char **call)
{
    cublasHandle_t h = NULL;
    *call = "cudaMallocAsync (cuBLASLt workspace)";
    if (!s->workspace && cudaMallocAsync(&s->workspace, GEMM_WORKSPACE_BYTES, s->cs) != cudaSuccess) {
        s->workspace = NULL;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *call = "cublasCreate";
    cublasStatus_t st = cublasCreate(&h);
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasSetStream";
        st = cublasSetStream(h, s->cs);
    }
    if (st == CUBLAS_STATUS_SUCCESS) { /* after cublasSetStream, which resets the workspace */
        *call = "cublasSetWorkspace";
        st = cublasSetWorkspace(h, s->workspace, GEMM_WORKSPACE_BYTES);
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasSetMathMode";
        st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        if (h)
            cublasDestroy(h);
        return st;
    }
    s->blas = h;
    return CUBLAS_STATUS_SUCCESS;
}

/* The stream's cuBLAS handle, made at the first use when the stream has none; 0 when that failed
 * (recorded on the stream). */
static int ensure_blas(gs_drv_stream *s)
{
    if (s->blas)
        return 1;
    const char *call = NULL;
    cublasStatus_t st = gs__cuda_blas_create(s, &call);
    if (st != CUBLAS_STATUS_SUCCESS)
        gs__cuda_fail_stream(s, "%s (attention's cuBLAS handle): %s", call, cublasGetStatusString(st));
    return st == CUBLAS_STATUS_SUCCESS;
}

typedef struct attn_gemm_ctx {
    gs_drv_stream *s;
    const char *op;              /* "attn_fwd" or "attn_bwd" */
    float *const *buf;           /* device base of each gs_attn_buf */
    cublasComputeType_t compute; /* the driver's GEMM math (GRIDSTEP_CUDA_GEMM): fp32 or TF32 */
} attn_gemm_ctx;

/* One step of the plan on the stream; a failure names the call, the step, its sequence, group
 * member and kv heads (gs__cuda_fail_stream adds the rank and the event). */
static int attn_gemm_step(void *arg, const gs_attn_step *st)
{
    attn_gemm_ctx *x = arg;
    gs_drv_stream *s = x->s;
    float *a = x->buf[st->a.buf] + st->a.offset, *b = x->buf[st->b.buf] + st->b.offset;
    float *c = x->buf[st->c.buf] + st->c.offset;
    const char *call = "?";
    int rc = 0;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    switch (st->kind) {
    case GS_ATTN_STEP_GEMM:
        call = "cublasGemmStridedBatchedEx";
        gs__cuda_work_on(s);
        bs = cublasGemmStridedBatchedEx(s->blas, st->ta ? CUBLAS_OP_T : CUBLAS_OP_N, st->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        (int)st->m, (int)st->n, (int)st->k, &st->alpha, a, CUDA_R_32F, (int)st->a.ld,
                                        (long long)st->a.stride, b, CUDA_R_32F, (int)st->b.ld, (long long)st->b.stride,
                                        &st->beta, c, CUDA_R_32F, (int)st->c.ld, (long long)st->c.stride,
                                        (int)st->batch, x->compute, CUBLAS_GEMM_DEFAULT);
        break;
    case GS_ATTN_STEP_SOFTMAX:
        call = "kernel attn_softmax_rows";
        rc = gs_cu_attn_softmax_rows(gs__cuda_work_on(s), c, st->c.ld, st->c.stride, st->m, st->n, st->batch);
        break;
    case GS_ATTN_STEP_DS:
        call = "kernel attn_ds_rows";
        rc = gs_cu_attn_ds_rows(gs__cuda_work_on(s), a, st->a.ld, st->a.stride, c, st->c.ld, st->c.stride, st->m, st->n,
                                st->batch);
        break;
    case GS_ATTN_STEP_SOFTMAX_LSE:
        call = "kernel attn_softmax_lse_rows";
        rc = gs_cu_attn_softmax_lse_rows(gs__cuda_work_on(s), c, st->c.ld, st->c.stride, b, st->b.stride, st->m, st->n,
                                         st->batch);
        break;
    case GS_ATTN_STEP_P_LSE:
        call = "kernel attn_p_lse_rows";
        rc = gs_cu_attn_p_lse_rows(gs__cuda_work_on(s), c, st->c.ld, st->c.stride, b, st->b.stride, st->m, st->n,
                                   st->batch);
        break;
    }
    if (bs == CUBLAS_STATUS_SUCCESS && rc == 0)
        return 0;
    gs__cuda_fail_stream(
        s, "%s (gemm path): %s (%s; sequence %zu, group member %zu, kv heads %zu..%zu, m=%zu n=%zu k=%zu): %s", x->op,
        call, st->what, st->seq_index, st->group_member, st->kv0, st->kv0 + st->batch - 1, st->m, st->n, st->k,
        bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs) : cudaGetErrorString((cudaError_t)rc));
    return 1;
}

/* Attention as the plan's GEMMs and row passes; the scratch (the backward's dP/dS; the flash
 * variant's scores and P, both directions) is stream-ordered (cudaMallocAsync, freed on the
 * stream after the last step that reads it). */
static void attn_gemm(gs_drv_stream *s, int backward, int flash, const gs_attn_shape *sh, float **buf)
{
    const char *op = backward ? "attn_bwd" : "attn_fwd";
    if (!sh->nseq || !sh->seq || !sh->nh)
        return;
    gs_error e;
    gs_error_init(&e);
    if (gs_attn_gemm_check(sh, &e) != GS_OK) {
        gs__cuda_fail_stream(s, "%s: %s", op, e.msg);
        return;
    }
    if (!ensure_blas(s))
        return;
    attn_gemm_ctx x = {s, op, buf, s->d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    if (!backward && !flash) {
        gs_attn_gemm_fwd(sh, attn_gemm_step, &x, &e);
        return;
    }
    size_t bytes = (flash ? gs_attn_gemm_flash_scratch_floats(sh, backward) : gs_attn_gemm_scratch_floats(sh)) *
                   sizeof(float);
    cudaError_t ce = cudaMallocAsync((void **)&buf[GS_ATTN_SCRATCH], bytes, s->cs);
    if (ce != cudaSuccess) {
        gs__cuda_fail_stream(s, "%s (gemm path): cudaMallocAsync (%s scratch, %zu B): %s", op,
                             flash ? "the flash variant's S/P" : "dP/dS", bytes, cudaGetErrorString(ce));
        return;
    }
    if (flash && !backward)
        gs_attn_gemm_flash_fwd(sh, attn_gemm_step, &x, &e);
    else if (flash)
        gs_attn_gemm_flash_bwd(sh, attn_gemm_step, &x, &e);
    else
        gs_attn_gemm_bwd(sh, attn_gemm_step, &x, &e);
    CU_OK(s, cudaFreeAsync(buf[GS_ATTN_SCRATCH], s->cs));
}

/* The GEMM path's forward (writes out and p: the probabilities, or the flash variant's lse) and
 * backward (reads p, writes dq, dk, dv) on the call's tensors. */
static void attn_gemm_fwd(gs_drv_stream *s, int flash, const gs_attn_shape *sh, const float *q, const float *k,
                          const float *v, float *out, float *p)
{
    float *buf[GS_ATTN_BUF_COUNT] = {NULL};
    buf[GS_ATTN_Q] = (float *)q;
    buf[GS_ATTN_K] = (float *)k;
    buf[GS_ATTN_V] = (float *)v;
    buf[GS_ATTN_OUT] = out;
    buf[GS_ATTN_P] = p;
    attn_gemm(s, 0, flash, sh, buf);
}

static void attn_gemm_bwd(gs_drv_stream *s, int flash, const gs_attn_shape *sh, const float *q, const float *k,
                          const float *v, const float *p, const float *dout, float *dq, float *dk, float *dv)
{
    float *buf[GS_ATTN_BUF_COUNT] = {NULL};
    buf[GS_ATTN_Q] = (float *)q;
    buf[GS_ATTN_K] = (float *)k;
    buf[GS_ATTN_V] = (float *)v;
    buf[GS_ATTN_P] = (float *)p;
    buf[GS_ATTN_DOUT] = (float *)dout;
    buf[GS_ATTN_DQ] = dq;
    buf[GS_ATTN_DK] = dk;
    buf[GS_ATTN_DV] = dv;
    attn_gemm(s, 1, flash, sh, buf);
}

/* ---- the other compute ops: kernels/cuda ----------------------------------------------------- */

void gs__cuda_k_add(gs_drv_stream *s, float *y, const float *x, size_t n)
{
    gs__cuda_kernel_ok(s, "add", gs_cu_add(gs__cuda_work_on(s), y, x, n));
}
void gs__cuda_k_scale(gs_drv_stream *s, float *y, float a, size_t n)
{
    gs__cuda_kernel_ok(s, "scale", gs_cu_scale(gs__cuda_work_on(s), y, a, n));
}
void gs__cuda_k_embed_fwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *w, size_t lo, size_t vn,
                          size_t h, float *y)
{
    gs__cuda_kernel_ok(s, "embed_fwd", gs_cu_embed_fwd(gs__cuda_work_on(s), tok, t, w, lo, vn, h, y));
}
void gs__cuda_k_embed_bwd(gs_drv_stream *s, const int32_t *tok, size_t t, const float *dy, size_t lo, size_t vn,
                          size_t h, float *dw)
{
    gs__cuda_kernel_ok(s, "embed_bwd", gs_cu_embed_bwd(gs__cuda_work_on(s), tok, t, dy, lo, vn, h, dw));
}
void gs__cuda_k_rmsnorm_fwd(gs_drv_stream *s, const float *x, const float *g, float *y, float *rstd, size_t t, size_t h,
                            float eps)
{
    gs__cuda_kernel_ok(s, "rmsnorm_fwd", gs_cu_rmsnorm_fwd(gs__cuda_work_on(s), x, g, y, rstd, t, h, eps));
}
void gs__cuda_k_rmsnorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *rstd, const float *dy,
                            float *dx, float *dg, size_t t, size_t h)
{
    gs__cuda_kernel_ok(s, "rmsnorm_bwd", gs_cu_rmsnorm_bwd(gs__cuda_work_on(s), x, g, rstd, dy, dx, dg, t, h));
}
void gs__cuda_k_rope_fwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    gs__cuda_kernel_ok(s, "rope_fwd", gs_cu_rope(gs__cuda_work_on(s), x, t, seq, nh, hd, ld, th, 1.0));
}
void gs__cuda_k_rope_bwd(gs_drv_stream *s, float *x, size_t t, size_t seq, size_t nh, size_t hd, size_t ld, float th)
{
    gs__cuda_kernel_ok(s, "rope_bwd", gs_cu_rope(gs__cuda_work_on(s), x, t, seq, nh, hd, ld, th, -1.0));
}
/* The path of one attention call (gs_attn_path_gemm): 1 the GEMM path, 0 the kernels, -1 refused
 * and recorded on the stream (GRIDSTEP_CUDA_ATTENTION=gemm on a call with attention dropout: the
 * GEMM path, either variant, draws no masks). */
static int attn_path(gs_drv_stream *s, const gs_dropout *drop, const gs_attn_shape *sh, int flash)
{
    int g = gs_attn_path_gemm(s->d->attn_pref, drop && drop->threshold, gs_attn_gemm_fits(sh, flash));
    if (g < 0)
        gs__cuda_fail_stream(
            s, "attention dropout: GRIDSTEP_CUDA_ATTENTION=gemm draws no dropout masks; unset it (auto runs "
               "the attention kernels, flash or per-row, for calls with dropout) or set it to kernels");
    return g;
}

void gs__cuda_k_attn_fwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         float *out, size_t ldo, float *p, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                         const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 0);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_fwd(s, 0, &sh, q, k, v, out, p);
        return;
    }
    gs__cuda_kernel_ok(
        s, "attn_fwd",
        gs_cu_attn_fwd_dropout(gs__cuda_work_on(s), q, ldq, k, v, ldkv, out, ldo, p, nseq, seq, nh, nkv, hd, drop));
}
void gs__cuda_k_attn_bwd(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                         const float *p, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                         size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 0);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_bwd(s, 0, &sh, q, k, v, p, dout, dq, dk, dv);
        return;
    }
    gs__cuda_kernel_ok(s, "attn_bwd",
                       gs_cu_attn_bwd_dropout(gs__cuda_work_on(s), q, ldq, k, v, ldkv, p, dout, ldo, dq, dk, dv, nseq,
                                              seq, nh, nkv, hd, drop));
}
void gs__cuda_k_attn_fwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh,
                               size_t nkv, size_t hd, const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 1);
    if (g < 0)
        return;
    if (g) {
        attn_gemm_fwd(s, 1, &sh, q, k, v, out, lse);
        return;
    }
    gs__cuda_kernel_ok(s, "attn_fwd_flash",
                       gs_cu_attn_fwd_flash_dropout(gs__cuda_work_on(s), q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq,
                                                    nh, nkv, hd, drop));
}
void gs__cuda_k_attn_bwd_flash(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v,
                               size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                               float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                               size_t hd, const gs_dropout *drop)
{
    gs_attn_shape sh = {nseq, seq, nh, nkv, hd, ldq, ldkv, ldo, GS_ATTN_GEMM_SCRATCH_BYTES};
    int g = attn_path(s, drop, &sh, 1);
    if (g < 0)
        return;
    if (g) { /* D from the recomputed P and dP (sum_b P dP = dout . out): out unread */
        attn_gemm_bwd(s, 1, &sh, q, k, v, lse, dout, dq, dk, dv);
        return;
    }
    gs__cuda_kernel_ok(s, "attn_bwd_flash",
                       gs_cu_attn_bwd_flash_dropout(gs__cuda_work_on(s), q, ldq, k, v, ldkv, out, lse, dout, ldo, dq,
                                                    dk, dv, nseq, seq, nh, nkv, hd, drop));
}
const char *gs__cuda_gemm_math(gs_drv *d)
{
    return d->bf16 ? "bf16 inputs, fp32 accumulate" : d->tf32 ? "tf32" : "fp32";
}
void gs__cuda_k_dropout(gs_drv_stream *s, float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    gs__cuda_kernel_ok(s, "dropout", gs_cu_dropout_rows(gs__cuda_work_on(s), x, rows, h, drop));
}
void gs__cuda_k_layernorm_fwd(gs_drv_stream *s, const float *x, const float *g, const float *b, float *y, float *mean,
                              float *rstd, size_t t, size_t h, float eps)
{
    gs__cuda_kernel_ok(s, "layernorm_fwd", gs_cu_layernorm_fwd(gs__cuda_work_on(s), x, g, b, y, mean, rstd, t, h, eps));
}
void gs__cuda_k_layernorm_bwd(gs_drv_stream *s, const float *x, const float *g, const float *mean, const float *rstd,
                              const float *dy, float *dx, float *dg, float *db, size_t t, size_t h)
{
    gs__cuda_kernel_ok(s, "layernorm_bwd",
                       gs_cu_layernorm_bwd(gs__cuda_work_on(s), x, g, mean, rstd, dy, dx, dg, db, t, h));
}
void gs__cuda_k_gelu_fwd(gs_drv_stream *s, const float *x, float *y, size_t n)
{
    gs__cuda_kernel_ok(s, "gelu_fwd", gs_cu_gelu_fwd(gs__cuda_work_on(s), x, y, n));
}
void gs__cuda_k_gelu_bwd(gs_drv_stream *s, const float *x, const float *dy, float *dx, size_t n)
{
    gs__cuda_kernel_ok(s, "gelu_bwd", gs_cu_gelu_bwd(gs__cuda_work_on(s), x, dy, dx, n));
}
void gs__cuda_k_bias_add(gs_drv_stream *s, float *y, const float *b, size_t t, size_t n)
{
    gs__cuda_kernel_ok(s, "bias_add", gs_cu_bias_add(gs__cuda_work_on(s), y, b, t, n));
}
void gs__cuda_k_bias_grad(gs_drv_stream *s, const float *dy, float *db, size_t t, size_t n)
{
    gs__cuda_kernel_ok(s, "bias_grad", gs_cu_bias_grad(gs__cuda_work_on(s), dy, db, t, n));
}
void gs__cuda_k_swiglu_fwd(gs_drv_stream *s, const float *gu, float *h, size_t t, size_t f)
{
    gs__cuda_kernel_ok(s, "swiglu_fwd", gs_cu_swiglu_fwd(gs__cuda_work_on(s), gu, h, t, f));
}
void gs__cuda_k_swiglu_bwd(gs_drv_stream *s, const float *gu, const float *dh, float *dgu, size_t t, size_t f)
{
    gs__cuda_kernel_ok(s, "swiglu_bwd", gs_cu_swiglu_bwd(gs__cuda_work_on(s), gu, dh, dgu, t, f));
}
void gs__cuda_k_xent_stats(gs_drv_stream *s, const float *logits, const int32_t *target, size_t t, size_t lo, size_t vn,
                           float *stats)
{
    gs__cuda_kernel_ok(s, "xent_stats", gs_cu_xent_stats(gs__cuda_work_on(s), logits, target, t, lo, vn, stats));
}
/* The loss is a host double: the one op that waits for its stream (polled with the timeout). */
void gs__cuda_k_xent_combine(gs_drv_stream *s, const float *stats, size_t parts, size_t t, float *lse, double *loss)
{
    gs_drv *d = s->d;
    rank_dev *r = &d->r[s->rank];
    *loss = 0;
    gs__cuda_kernel_ok(s, "xent_combine", gs_cu_xent_combine(gs__cuda_work_on(s), stats, parts, t, lse, r->loss_dev));
    CU_OK(s, cudaMemcpyAsync(r->loss_host, r->loss_dev, sizeof(double), cudaMemcpyDeviceToHost, gs__cuda_work_on(s)));
    if (s->failed)
        return;
    gs_error e;
    gs_error_init(&e);
    if (gs__cuda_poll_stream(d, r, s->rank, s->cs, s, "xent_combine (reading the loss)", &e) != GS_OK) {
        gs__cuda_fail_stream(s, "%s", e.msg);
        return;
    }
    *loss = *r->loss_host;
}
void gs__cuda_k_xent_bwd(gs_drv_stream *s, const float *logits, const int32_t *target, const float *lse, size_t t,
                         size_t lo, size_t vn, float scale, float *dlogits)
{
    gs__cuda_kernel_ok(s, "xent_bwd",
                       gs_cu_xent_bwd(gs__cuda_work_on(s), logits, target, lse, t, lo, vn, scale, dlogits));
}
/* The step's scalars exactly as kernels/host/adamw.c computes them. */
void gs__cuda_k_adamw(gs_drv_stream *s, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, uint64_t step)
{
    double bias1 = 1.0 - pow((double)b1, (double)step), bias2 = 1.0 - pow((double)b2, (double)step);
    float decay = (float)(1.0 - (double)lr * (double)wd);
    float step_size = (float)((double)lr / bias1);
    float bias2_sqrt = (float)sqrt(bias2);
    float omb1 = (float)(1.0 - (double)b1), omb2 = (float)(1.0 - (double)b2);
    gs__cuda_kernel_ok(s, "adamw",
                       gs_cu_adamw(gs__cuda_work_on(s), p, g, m, v, n, decay, step_size, bias2_sqrt, b2, omb2, omb1,
                                   1.0f - omb1, omb1 < 0.5f, eps));
}
