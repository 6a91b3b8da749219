/* The cuda driver's mixture-of-experts kernels (exec/driver.h gs_driver_kernels: moe_topk_fwd
 * .. rows_dot): kernels/cuda/moe.cu's launchers on the stream's work, a launch failure failing
 * the stream. */
#include "exec/driver_cuda_internal.h"
#include "kernels/cuda/kernels_cuda.h"

void gs__cuda_k_moe_topk_fwd(gs_drv_stream *s, const float *logits, size_t t, size_t experts, size_t k, int32_t *idx,
                             float *probs)
{
    gs__cuda_kernel_ok(s, "moe_topk_fwd", gs_cu_moe_topk_fwd(gs__cuda_work_on(s), logits, t, experts, k, idx, probs));
}

void gs__cuda_k_moe_topk_bwd(gs_drv_stream *s, const float *probs, const float *dprobs, const int32_t *idx, size_t t,
                             size_t experts, size_t k, float *dlogits)
{
    gs__cuda_kernel_ok(s, "moe_topk_bwd",
                       gs_cu_moe_topk_bwd(gs__cuda_work_on(s), probs, dprobs, idx, t, experts, k, dlogits));
}

void gs__cuda_k_rows_gather(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n, size_t h,
                            float *dst)
{
    gs__cuda_kernel_ok(s, "rows_gather", gs_cu_rows_gather(gs__cuda_work_on(s), src, idx, w, n, h, dst));
}

void gs__cuda_k_rows_scatter_add(gs_drv_stream *s, const float *src, const int32_t *idx, const float *w, size_t n,
                                 size_t h, float *dst)
{
    gs__cuda_kernel_ok(s, "rows_scatter_add", gs_cu_rows_scatter_add(gs__cuda_work_on(s), src, idx, w, n, h, dst));
}

void gs__cuda_k_rows_dot(gs_drv_stream *s, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                         float *out)
{
    gs__cuda_kernel_ok(s, "rows_dot", gs_cu_rows_dot(gs__cuda_work_on(s), a, idx, b, n, h, out));
}
