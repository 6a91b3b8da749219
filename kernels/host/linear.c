/* Linear layer y = x W^T (PyTorch [out, in] weights) and its backward, on top of gs_k_gemm. */
#include "kernels/host/kernels.h"

void gs_k_linear_fwd(const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    gs_k_gemm(0, 1, t, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

void gs_k_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, size_t t, size_t k,
                     size_t n)
{
    if (dx)
        gs_k_gemm(0, 0, t, k, n, 1.0f, dy, n, w, k, 0.0f, dx, k); /* dx[t,k] = dy[t,n] w[n,k] */
    if (dw)
        gs_k_gemm(1, 0, n, k, t, 1.0f, dy, n, x, k, 1.0f, dw, k); /* dw[n,k] += dy[t,n]^T x[t,k] */
}
