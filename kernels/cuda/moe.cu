/* Mixture-of-experts kernels on the GPU: the launchers of the kernels written in
 * kernels/cuda/moe_body.h (tests/check_cuda_emu_moe.c runs the same text on the CPU emulator).
 * Products and sums are rounded one at a time (__fmul_rn, __fadd_rn: no fused multiply-add), so
 * the row moves give kernels/host/moe.c's bits; the router's softmax differs from the host's by
 * the last bit of a double exp at most. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define GS_KERNEL static __global__ void
#define GS_DEVICE static __device__ inline
#define GS_TID threadIdx.x
#define GS_BDIM blockDim.x
#define GS_BID_X blockIdx.x
#define GS_FMUL(a, b) __fmul_rn((a), (b))
#define GS_FADD(a, b) __fadd_rn((a), (b))

#include "kernels/cuda/moe_body.h"

extern "C" int gs_cu_moe_topk_fwd(cudaStream_t st, const float *logits, size_t t, size_t experts, size_t k,
                                  int32_t *idx, float *probs)
{
    if (!k || k > experts)
        return (int)cudaErrorInvalidValue;
    if (t)
        gs_moe_topk_fwd_kernel<<<(unsigned)gs_moe_blocks(t), GS_MOE_THREADS, 0, st>>>(logits, t, experts, k, idx,
                                                                                      probs);
    return gs_cu_last_error();
}

extern "C" int gs_cu_moe_topk_bwd(cudaStream_t st, const float *probs, const float *dprobs, const int32_t *idx,
                                  size_t t, size_t experts, size_t k, float *dlogits)
{
    if (t)
        gs_moe_topk_bwd_kernel<<<(unsigned)gs_moe_blocks(t), GS_MOE_THREADS, 0, st>>>(probs, dprobs, idx, t, experts,
                                                                                      k, dlogits);
    return gs_cu_last_error();
}

extern "C" int gs_cu_rows_gather(cudaStream_t st, const float *src, const int32_t *idx, const float *w, size_t n,
                                 size_t h, float *dst)
{
    if (n && h) {
        size_t b = gs_rows_gather_blocks(n, h);
        gs_rows_gather_kernel<<<(unsigned)b, GS_MOE_THREADS, 0, st>>>(src, idx, w, n, h, dst, b * GS_MOE_THREADS);
    }
    return gs_cu_last_error();
}

extern "C" int gs_cu_rows_scatter_add(cudaStream_t st, const float *src, const int32_t *idx, const float *w,
                                      size_t n, size_t h, float *dst)
{
    if (n && h)
        gs_rows_scatter_add_kernel<<<(unsigned)gs_moe_blocks(h), GS_MOE_THREADS, 0, st>>>(src, idx, w, n, h, dst);
    return gs_cu_last_error();
}

extern "C" int gs_cu_rows_dot(cudaStream_t st, const float *a, const int32_t *idx, const float *b, size_t n, size_t h,
                              float *out)
{
    if (n)
        gs_rows_dot_kernel<<<(unsigned)gs_moe_blocks(n), GS_MOE_THREADS, 0, st>>>(a, idx, b, n, h, out);
    return gs_cu_last_error();
}
