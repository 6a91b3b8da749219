/* The device code of the cuda driver's FP8 casts (kernels/cuda/fp8.cu) under Transformer Engine's
 * current scaling: a tensor's amax (two launches: per-block maxima, then one block that reduces
 * them and derives the scale), and the cast of every element to E4M3 or E5M2 at that scale and
 * back (the dequantized copy an fp32 GEMM then reads, as the host driver's emulation does:
 * exec/driver_host_fp8.c). The same arithmetic as kernels/host/fp8.c, operation for operation,
 * so the bits are the host's: x scale rounded once (fp32), the code found with frexpf / ldexpf /
 * rintf (exact on both sides; rintf rounds to nearest even), 1 / scale in fp32.
 *
 * Written once in the C subset that nvcc (C++) and gcc (C11) both accept: kernels/cuda/fp8.cu
 * compiles it for the GPU, tests/check_cuda_emu_fp8.c runs it on the CPU emulator
 * (tests/cuda_emu.h). The includer defines GS_KERNEL, GS_DEVICE, GS_DYN_SHARED, GS_SYNC, GS_TID,
 * GS_BDIM and GS_BID_X (kernels/cuda/attention_flash_body.h says what each is) and may define
 * GS_FMUL (CUDA: __fmul_rn). The block reduction goes through shared memory and GS_SYNC only.
 *
 * Formats: 0 E4M3 (e4m3fn: bias 7, largest 448, one NaN pattern 0x7F/0xFF, no infinities), 1 E5M2
 * (bias 15, largest 57344); saturating: what rounds past the largest finite value becomes it.
 *
 * Ownership: the kernels borrow every pointer (device memory) for the launch. */
#ifndef GS_FP8_BODY_H
#define GS_FP8_BODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifndef GS_FMUL
#define GS_FMUL(a, b) ((a) * (b))
#endif

#define GS_FP8_THREADS 256      /* threads per block of every FP8 launch (a power of two) */
#define GS_FP8_AMAX_BLOCKS 1024 /* at most this many per-block maxima */

/* The format's mantissa bits, bias and largest finite value. */
GS_DEVICE int gs_fp8_mbits(int fmt)
{
    return fmt ? 2 : 3;
}
GS_DEVICE int gs_fp8_bias(int fmt)
{
    return fmt ? 15 : 7;
}
GS_DEVICE float gs_fp8_maxf(int fmt)
{
    return fmt ? 57344.0f : 448.0f;
}

/* x to its FP8 code: round to nearest even, saturating, NaN kept (gs_k_fp8_encode). */
GS_DEVICE unsigned gs_fp8_encode(int fmt, float x)
{
    int mbits = gs_fp8_mbits(fmt), bias = gs_fp8_bias(fmt);
    float maxf = gs_fp8_maxf(fmt);
    unsigned sign = signbit(x) ? 0x80u : 0u;
    if (isnan(x))
        return sign | (fmt ? 0x7Eu : 0x7Fu);
    float a = fabsf(x);
    int emin = 1 - bias;
    int e;
    frexpf(a, &e);
    e -= 1;
    if (a == 0.0f || e < emin)
        e = emin;
    float r = ldexpf(rintf(ldexpf(a, mbits - e)), e - mbits);
    if (!(r <= maxf))
        r = maxf;
    if (r == 0.0f)
        return sign;
    int re;
    frexpf(r, &re);
    re -= 1;
    if (re < emin)
        return sign | (unsigned)ldexpf(r, mbits - emin);
    unsigned mant = (unsigned)ldexpf(r, mbits - re) - (1u << mbits);
    return sign | (unsigned)(re + bias) << mbits | mant;
}

/* The value of an FP8 code (exact; gs_k_fp8_decode). */
GS_DEVICE float gs_fp8_decode(int fmt, unsigned code)
{
    int mbits = gs_fp8_mbits(fmt), bias = gs_fp8_bias(fmt), ebits = fmt ? 5 : 4;
    unsigned emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
    unsigned ef = (code >> mbits) & emask, m = code & mmask;
    float sign = (code & 0x80u) ? -1.0f : 1.0f;
    if (!fmt && ef == emask && m == mmask)
        return NAN;
    if (fmt && ef == emask)
        return m ? NAN : sign * INFINITY;
    if (ef == 0)
        return sign * ldexpf((float)m, 1 - bias - mbits);
    return sign * ldexpf((float)(m | (1u << mbits)), (int)ef - bias - mbits);
}

/* max(m, |v|) with a NaN kept once seen (gs_k_amax's order-free rule). */
GS_DEVICE float gs_fp8_amax_step(float m, float a)
{
    return (isnan(a) || a > m) && !isnan(m) ? a : m;
}

/* Tree maximum of the block's GS_FP8_THREADS values in shared memory sh; thread 0 gets it. */
GS_DEVICE float gs_fp8_block_max(float *sh, float v)
{
    sh[GS_TID] = v;
    GS_SYNC();
    for (unsigned half = GS_FP8_THREADS / 2; half > 0; half /= 2) {
        if (GS_TID < half)
            sh[GS_TID] = gs_fp8_amax_step(sh[GS_TID], sh[GS_TID + half]);
        GS_SYNC();
    }
    return sh[0];
}

/* partial[block] = the largest |x[i]| over the elements i = gid, gid + stride, .. < n. Dynamic
 * shared memory: GS_FP8_THREADS floats. */
GS_KERNEL gs_fp8_amax_kernel(const float *x, size_t n, size_t stride, float *partial)
{
    GS_DYN_SHARED(sh);
    float m = 0.0f;
    for (size_t i = (size_t)GS_BID_X * GS_BDIM + GS_TID; i < n; i += stride)
        m = gs_fp8_amax_step(m, fabsf(x[i]));
    m = gs_fp8_block_max(sh, m);
    if (GS_TID == 0)
        partial[GS_BID_X] = m;
}

/* One block's reduction of partial[0 .. nparts) to their largest (thread 0 gets it). */
GS_DEVICE float gs_fp8_partials_max(float *sh, const float *partial, size_t nparts)
{
    float m = 0.0f;
    for (size_t i = GS_TID; i < nparts; i += GS_BDIM)
        m = gs_fp8_amax_step(m, partial[i]);
    return gs_fp8_block_max(sh, m);
}

/* One block: amax = the largest of partial[0 .. nparts), then scale_out[0] = the current
 * scaling's scale (gs_k_fp8_current_scale: largest finite / amax; 1 for a zero, infinite or NaN
 * amax; FLT_MAX when it overflows), scale_out[1] = 1 / scale, scale_out[2] = amax. */
GS_KERNEL gs_fp8_scale_kernel(const float *partial, size_t nparts, int fmt, float *scale_out)
{
    GS_DYN_SHARED(sh);
    float m = gs_fp8_partials_max(sh, partial, nparts);
    if (GS_TID == 0) {
        float scale = 1.0f;
        if (!isinf(m) && m != 0.0f) {
            scale = gs_fp8_maxf(fmt) / m;
            if (isinf(scale))
                scale = 3.40282347e38f;
            if (isnan(scale))
                scale = 1.0f;
        }
        scale_out[0] = scale;
        scale_out[1] = 1.0f / scale;
        scale_out[2] = m;
    }
}

/* Delayed scaling's: one block, scale_out[0] = the scale given (an amax history's), scale_out[1]
 * = 1 / scale, scale_out[2] = the largest of partial[0 .. nparts) (the amax the cast records). */
GS_KERNEL gs_fp8_given_kernel(const float *partial, size_t nparts, float scale, float *scale_out)
{
    GS_DYN_SHARED(sh);
    float m = gs_fp8_partials_max(sh, partial, nparts);
    if (GS_TID == 0) {
        scale_out[0] = scale;
        scale_out[1] = 1.0f / scale;
        scale_out[2] = m;
    }
}

/* y[i] = decode(encode(x[i] scale)) / scale for i = gid, gid + stride, .. < n, with scale and
 * its inverse from gs_fp8_scale_kernel's (or gs_fp8_given_kernel's) scale_in[0], [1]. */
GS_KERNEL gs_fp8_round_kernel(const float *x, size_t n, size_t stride, int fmt, const float *scale_in, float *y)
{
    float scale = scale_in[0], inv = scale_in[1];
    for (size_t i = (size_t)GS_BID_X * GS_BDIM + GS_TID; i < n; i += stride)
        y[i] = GS_FMUL(gs_fp8_decode(fmt, gs_fp8_encode(fmt, GS_FMUL(x[i], scale))), inv);
}

/* q = the FP8 codes of x scale (scale from gs_fp8_scale_kernel's scale_in[0]), x rows x cols
 * row-major; transpose 0: q in the same layout, 1: q cols x rows row-major (q[c rows + r] = the
 * code of x[r cols + c]), the layout cuBLASLt's FP8 GEMMs need for the backward's operands.
 * Elements from the thread's global index in steps of `stride`. */
GS_KERNEL gs_fp8_quantize_kernel(const float *x, size_t rows, size_t cols, int transpose, size_t stride, int fmt,
                                 const float *scale_in, unsigned char *q)
{
    float scale = scale_in[0];
    for (size_t i = (size_t)GS_BID_X * GS_BDIM + GS_TID; i < rows * cols; i += stride) {
        size_t o = transpose ? (i % cols) * rows + i / cols : i;
        q[o] = (unsigned char)gs_fp8_encode(fmt, GS_FMUL(x[i], scale));
    }
}

/* Blocks of the amax and round launches for n elements: one per GS_FP8_THREADS, at most
 * GS_FP8_AMAX_BLOCKS (the grid-stride loops cover the rest). */
static inline size_t gs_fp8_blocks(size_t n)
{
    size_t b = (n + GS_FP8_THREADS - 1) / GS_FP8_THREADS;
    if (b > GS_FP8_AMAX_BLOCKS)
        b = GS_FP8_AMAX_BLOCKS;
    return b ? b : 1;
}

#endif
