/* Flash attention on the GPU (FlashAttention-2, fp32): the launchers of the kernels written in
 * kernels/cuda/attention_flash_body.h, which this file compiles as CUDA (the emulator test
 * tests/check_flash_emu.c compiles the same text as C). Forward keeps no probabilities, only
 * lse = m + log l per query row; backward recomputes P per tile from lse in three launches on the
 * stream: D = rowsum(dout o out) into stream-ordered scratch, dk/dv (a block per key tile, no
 * atomics), dq (a block per query tile). Same bits every run: every sum has a fixed order.
 *
 * Launch shape: 128 threads per block, 32 x 32 tiles (see the body's header comment). Shared
 * memory per block is 53.8 KB (forward), 70.3 KB (dq), 74.8 KB (dk/dv) at hd 128 and about twice
 * that at hd 256, over the 48 KiB default: the launchers opt in through cudaFuncSetAttribute
 * (sm_80 allows 163 KiB per block, sm_90 227 KiB). */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#define GS_KERNEL static __global__ void __launch_bounds__(GS_FLASH_THREADS)
#define GS_DEVICE static __device__ inline
#define GS_DYN_SHARED(name) extern __shared__ float name[]
#define GS_SYNC() __syncthreads()
#define GS_TID threadIdx.x
#define GS_BDIM blockDim.x
#define GS_BID_X blockIdx.x
#define GS_BID_Y blockIdx.y
#define GS_BID_Z blockIdx.z
#define GS_UNROLL _Pragma("unroll")

#include "kernels/cuda/attention_flash_body.h"

/* Allows `bytes` of dynamic shared memory for fn when over the 48 KiB default. */
static int flash_shared_for(const void *fn, size_t bytes)
{
    if (bytes <= 48 * 1024)
        return 0;
    return (int)cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

extern "C" int gs_cu_attn_fwd_flash_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k,
                                            const float *v, size_t ldkv, float *out, size_t ldo, float *lse,
                                            size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                            const gs_dropout *drop)
{
    gs_dropout none = {0, 1.0f, 0, 0, 0, 0};
    if (!gs_flash_args_ok(nseq, seq, nh, nkv, hd))
        return (int)cudaErrorInvalidValue;
    if (!nseq || !seq || !nh)
        return 0;
    size_t sh = gs_flash_fwd_shared_bytes(hd);
    int rc = flash_shared_for((const void *)gs_flash_fwd_kernel, sh);
    if (rc)
        return rc;
    dim3 grid((unsigned)gs_flash_tiles(seq), (unsigned)nh, (unsigned)nseq);
    gs_flash_fwd_kernel<<<grid, GS_FLASH_THREADS, sh, st>>>(q, ldq, k, v, ldkv, out, ldo, lse, seq, nh, nh / nkv, hd,
                                                            (float)(1.0 / sqrt((double)hd)), drop ? *drop : none);
    return gs_cu_last_error();
}

extern "C" int gs_cu_attn_fwd_flash(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                    size_t ldkv, float *out, size_t ldo, float *lse, size_t nseq, size_t seq,
                                    size_t nh, size_t nkv, size_t hd)
{
    return gs_cu_attn_fwd_flash_dropout(st, q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, NULL);
}

extern "C" int gs_cu_attn_bwd_flash_dropout(cudaStream_t st, const float *q, size_t ldq, const float *k,
                                            const float *v, size_t ldkv, const float *out, const float *lse,
                                            const float *dout, size_t ldo, float *dq, float *dk, float *dv,
                                            size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd,
                                            const gs_dropout *drop)
{
    gs_dropout none = {0, 1.0f, 0, 0, 0, 0}, z = drop ? *drop : none;
    if (!gs_flash_args_ok(nseq, seq, nh, nkv, hd))
        return (int)cudaErrorInvalidValue;
    if (!nseq || !seq || !nh)
        return 0;
    float scale = (float)(1.0 / sqrt((double)hd));
    size_t shq = gs_flash_bwd_dq_shared_bytes(hd), shkv = gs_flash_bwd_dkv_shared_bytes(hd);
    int rc = flash_shared_for((const void *)gs_flash_bwd_dq_kernel, shq);
    if (!rc)
        rc = flash_shared_for((const void *)gs_flash_bwd_dkv_kernel, shkv);
    if (rc)
        return rc;
    float *dsum = NULL; /* D [nseq][nh][seq] */
    rc = (int)cudaMallocAsync((void **)&dsum, nseq * nh * seq * sizeof(float), st);
    if (rc)
        return rc;
    unsigned tiles = (unsigned)gs_flash_tiles(seq);
    dim3 gq(tiles, (unsigned)nh, (unsigned)nseq), gkv(tiles, (unsigned)nkv, (unsigned)nseq);
    gs_flash_bwd_d_kernel<<<(unsigned)gs_flash_d_blocks(nseq * seq, nh), GS_FLASH_D_THREADS, 0, st>>>(
        out, dout, ldo, dsum, nseq * seq, seq, nh, hd);
    gs_flash_bwd_dkv_kernel<<<gkv, GS_FLASH_THREADS, shkv, st>>>(q, ldq, k, v, ldkv, lse, dsum, dout, ldo, dk, dv, seq,
                                                                 nh, nh / nkv, hd, scale, z);
    gs_flash_bwd_dq_kernel<<<gq, GS_FLASH_THREADS, shq, st>>>(q, ldq, k, v, ldkv, lse, dsum, dout, ldo, dq, seq, nh,
                                                              nh / nkv, hd, scale, z);
    rc = gs_cu_last_error();
    int rc2 = (int)cudaFreeAsync(dsum, st);
    return rc ? rc : rc2;
}

extern "C" int gs_cu_attn_bwd_flash(cudaStream_t st, const float *q, size_t ldq, const float *k, const float *v,
                                    size_t ldkv, const float *out, const float *lse, const float *dout, size_t ldo,
                                    float *dq, float *dk, float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv,
                                    size_t hd)
{
    return gs_cu_attn_bwd_flash_dropout(st, q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd,
                                        NULL);
}
