/* gs_k_gemm through a BLAS (configure --with-blas puts -DGS_BLAS_OPENBLAS or -DGS_BLAS_BLIS on the
 * command line; without either this file is empty): OpenBLAS's or BLIS's cblas_sgemm, one thread
 * per call (exec's host driver already runs a rank per thread). Calls the BLAS cannot take (a
 * dimension past its 32-bit integers, or k = 0, where only the beta scaling is left) go to the
 * hand kernel. */
#if defined(GS_BLAS_OPENBLAS) || defined(GS_BLAS_BLIS)
#define _GNU_SOURCE /* dladdr */

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#include "kernels/host/gemm_internal.h"

#if defined(GS_BLAS_OPENBLAS)
#include <cblas.h>
#define GEMM_BLAS_NAME "OpenBLAS"
#define gemm_blas_one_thread() openblas_set_num_threads(1)
#elif defined(GS_BLAS_BLIS)
#include <blis.h>
#define GEMM_BLAS_NAME "BLIS"
#define gemm_blas_one_thread() bli_thread_set_num_threads(1)
#endif

static pthread_once_t gemm_blas_once = PTHREAD_ONCE_INIT;

static void gemm_blas_init(void)
{
    gemm_blas_one_thread();
}

const char *gs__gemm_blas_name(void)
{
    return GEMM_BLAS_NAME;
}

const char *gs__gemm_blas_library(void)
{
    Dl_info info;
    if (dladdr((void *)cblas_sgemm, &info) && info.dli_fname)
        return info.dli_fname;
    return "?";
}

void gs__gemm_blas(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
        gs__gemm_with(gs__gemm_kernel_best(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    pthread_once(&gemm_blas_once, gemm_blas_init);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m,
                (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
#else
typedef int gs__gemm_blas_none; /* no BLAS in this build: nothing here (ISO C wants a declaration) */
#endif
