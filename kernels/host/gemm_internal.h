/* Internal to kernels/host: gs_k_gemm with an explicit micro-kernel, so tests can check that every
 * micro-kernel this machine can run gives the same bits. Buffers are the caller's, as in kernels.h. */
#ifndef GS_KERNELS_HOST_GEMM_INTERNAL_H
#define GS_KERNELS_HOST_GEMM_INTERNAL_H

#include <stddef.h>

typedef enum {
    GS__GEMM_SCALAR, /* plain C loops, any compiler */
    GS__GEMM_VEC4,   /* GCC/Clang 4-wide vector extension (SSE on x86-64, NEON on arm64) */
    GS__GEMM_AVX2,   /* 8-wide, x86-64 with AVX2 at run time (mul and add, no FMA) */
    GS__GEMM_KERNELS
} gs__gemm_kernel;

/* 1 when this build and this CPU can run the micro-kernel. */
int gs__gemm_kernel_available(gs__gemm_kernel kernel);
/* The fastest available micro-kernel (what gs_k_gemm uses). */
gs__gemm_kernel gs__gemm_kernel_best(void);
/* gs_k_gemm with the given micro-kernel, which must be available. */
void gs__gemm_with(gs__gemm_kernel kernel, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                   const float *a, size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);

/* With --with-blas (kernels/host/gemm_blas.c), what gs_k_gemm calls: the BLAS's cblas_sgemm on one
 * thread, the hand kernel for what the BLAS cannot take; and the BLAS's name. */
void gs__gemm_blas(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc);
const char *gs__gemm_blas_name(void);
/* The file of the library whose cblas_sgemm the process calls (another library that defines it,
 * such as GSL's -lgslcblas, must not come first in the link), or "?". */
const char *gs__gemm_blas_library(void);

#endif
