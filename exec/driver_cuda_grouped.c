/* The cuda driver's grouped linear layers (exec/driver.h gs_driver_kernels linear_fwd_grouped,
 * linear_bwd_grouped): a MoE block's local experts' GEMMs in one cuBLAS call,
 * cublasGemmGroupedBatchedEx (cuBLAS 12.5 and later), as Megatron-Core's grouped MLP runs its
 * experts in one grouped GEMM. Each expert is a group of one problem (the experts' row counts
 * differ); experts without rows are left out. Storage fp32, compute fp32 or TF32 as the driver's
 * other GEMMs (GRIDSTEP_CUDA_GEMM). Under GRIDSTEP_CUDA_GEMM=bf16 (whose bf16-in, fp32-out form
 * the grouped GEMM does not take) and where cuBLAS has no kernel (CUBLAS_STATUS_NOT_SUPPORTED),
 * each expert runs alone through linear_fwd / linear_bwd.
 *
 * Memory: the problems' device pointer arrays live in one buffer per stream
 * (gs_drv_stream.grp_buf, grown on demand), uploaded on the stream before each call from host
 * arrays the call owns; cuBLAS reads them in stream order, so the next call's upload waits for
 * this one's GEMM. */
#include <stdlib.h>

#include "exec/driver_cuda_internal.h"

/* One grouped GEMM's problems, column-major as cuBLAS sees them. */
typedef struct grp {
    size_t n;                      /* problems (groups of one) */
    cublasOperation_t *ta, *tb;
    int *m, *nn, *k, *lda, *ldb, *ldc, *size;
    float *alpha, *beta;
    const void **a, **b;
    void **c;
} grp;

static void grp_free(grp *g)
{
    free(g->ta);
    free(g->m);
    free(g->alpha);
    free(g->a);
}

/* Room for up to cap problems; 0 when out of memory (the stream failed). */
static int grp_init(gs_drv_stream *s, grp *g, size_t cap)
{
    *g = (grp){0};
    size_t c = cap ? cap : 1;
    g->ta = malloc(2 * c * sizeof *g->ta);
    g->m = malloc(7 * c * sizeof *g->m);
    g->alpha = malloc(2 * c * sizeof *g->alpha);
    g->a = malloc(3 * c * sizeof *g->a);
    if (!g->ta || !g->m || !g->alpha || !g->a) {
        grp_free(g);
        gs__cuda_fail_stream(s, "out of host memory for a grouped GEMM of %zu problems", cap);
        return 0;
    }
    g->tb = g->ta + c;
    g->nn = g->m + c, g->k = g->m + 2 * c, g->lda = g->m + 3 * c, g->ldb = g->m + 4 * c, g->ldc = g->m + 5 * c;
    g->size = g->m + 6 * c;
    g->beta = g->alpha + c;
    g->b = g->a + c;
    g->c = (void **)(g->a + 2 * c);
    return 1;
}

/* Adds C = op(A) op(B) + beta C (column-major, alpha 1). */
static void grp_add(grp *g, int ta, int tb, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                    size_t ldb, float beta, float *c, size_t ldc)
{
    size_t i = g->n++;
    g->ta[i] = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    g->tb[i] = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    g->m[i] = (int)m, g->nn[i] = (int)n, g->k[i] = (int)k;
    g->lda[i] = (int)lda, g->ldb[i] = (int)ldb, g->ldc[i] = (int)ldc;
    g->size[i] = 1;
    g->alpha[i] = 1.0f, g->beta[i] = beta;
    g->a[i] = a, g->b[i] = b, g->c[i] = c;
}

/* Runs g's problems as one grouped GEMM. 0 done (or the stream failed), 1 when this driver runs
 * them one by one instead (bf16 inputs, or no cuBLAS kernel). */
static int grp_run(gs_drv_stream *s, grp *g)
{
    gs_drv *d = s->d;
    if (!g->n)
        return 0;
    if (d->bf16)
        return 1;
    if (!s->blas) {
        const char *call = NULL;
        cublasStatus_t st = gs__cuda_blas_create(s, &call);
        if (st != CUBLAS_STATUS_SUCCESS) {
            gs__cuda_fail_stream(s, "%s (the grouped GEMMs' cuBLAS handle): %s", call, cublasGetStatusString(st));
            return 0;
        }
    }
    size_t bytes = 3 * g->n * sizeof(void *);
    void **dev = gs__cuda_stream_buffer(s, &s->grp_buf, &s->grp_cap, bytes, "grouped GEMM pointers");
    if (!dev)
        return 0;
    /* the a, b and c pointers into one device array, in that order */
    const void *host[3] = {g->a, g->b, g->c};
    for (int i = 0; i < 3; i++)
        CU_OK(s, cudaMemcpyAsync(dev + i * g->n, host[i], g->n * sizeof(void *), cudaMemcpyHostToDevice,
                                 gs__cuda_work_on(s)));
    if (s->failed)
        return 0;
    gs__cuda_work_on(s);
    cublasStatus_t st = cublasGemmGroupedBatchedEx(
        s->blas, g->ta, g->tb, g->m, g->nn, g->k, g->alpha, (const void *const *)dev, CUDA_R_32F, g->lda,
        (const void *const *)(dev + g->n), CUDA_R_32F, g->ldb, g->beta, dev + 2 * g->n, CUDA_R_32F, g->ldc,
        (int)g->n, g->size, d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED)
        return 1;
    if (st != CUBLAS_STATUS_SUCCESS)
        gs__cuda_fail_stream(s, "cublasGemmGroupedBatchedEx (%zu experts): %s", g->n, cublasGetStatusString(st));
    return 0;
}

void gs__cuda_k_linear_fwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride, float *y,
                                   const uint64_t *rows, size_t groups, size_t k, size_t n)
{
    grp g;
    if (!grp_init(s, &g, groups))
        return;
    /* row-major y_g [t, n] = x_g w_g^T is column-major y_g^T = w_g (as [k, n] transposed) x_g^T */
    for (size_t e = 0, o = 0; e < groups; o += rows[e++])
        if (rows[e])
            grp_add(&g, 1, 0, n, rows[e], k, w + e * w_stride, k, x + o * k, k, 0.0f, y + o * n, n);
    if (grp_run(s, &g))
        for (size_t e = 0, o = 0; e < groups; o += rows[e++])
            if (rows[e])
                gs__cuda_k_linear_fwd(s, x + o * k, w + e * w_stride, y + o * n, rows[e], k, n);
    grp_free(&g);
}

void gs__cuda_k_linear_bwd_grouped(gs_drv_stream *s, const float *x, const float *w, size_t w_stride,
                                   const float *dy, float *dx, float *dw, const uint64_t *rows, size_t groups,
                                   size_t k, size_t n)
{
    grp g;
    if (!grp_init(s, &g, 2 * groups))
        return;
    for (size_t e = 0, o = 0; e < groups; o += rows[e++]) {
        if (!rows[e])
            continue;
        if (dx) /* dx_g^T [k, t] = w_g^T [k, n] dy_g^T [n, t] */
            grp_add(&g, 0, 0, k, rows[e], n, w + e * w_stride, k, dy + o * n, n, 0.0f, dx + o * k, k);
        if (dw) /* dw_g^T [k, n] += x_g^T [k, t] dy_g [t, n] */
            grp_add(&g, 0, 1, k, n, rows[e], x + o * k, k, dy + o * n, n, 1.0f, dw + e * w_stride, k);
    }
    if (grp_run(s, &g))
        for (size_t e = 0, o = 0; e < groups; o += rows[e++])
            if (rows[e])
                gs__cuda_k_linear_bwd(s, x ? x + o * k : NULL, w + e * w_stride, dy + o * n, dx ? dx + o * k : NULL,
                                      dw ? dw + e * w_stride : NULL, rows[e], k, n);
    grp_free(&g);
}
