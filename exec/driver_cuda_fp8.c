/* The cuda driver's FP8 linear layers under Transformer Engine's current scaling
 * (gs_driver_kernels.linear_fwd_fp8 / linear_bwd_fp8), with exec/driver_host_fp8.c's semantics:
 * each GEMM input is replaced by its dequantized FP8 copy, q(x scale) / scale with the scale from
 * the tensor's own amax (kernels/cuda/fp8.cu: amax, scale and cast on the device, the host's
 * bits; no host synchronization), and the driver's own GEMM (gs__cuda_k_linear_*: cuBLASLt, with
 * the arithmetic GRIDSTEP_CUDA_GEMM chooses) runs on the copies. A product of two FP8 values is
 * exact in fp32, so under fp32 GEMMs this is an FP8 GEMM with fp32 accumulation whose scales are
 * applied to each element rather than once to the sum, as cuBLASLt's FP8 kernels apply them; the
 * two differ by fp32 rounding only. The forward casts x and w to E4M3; the backward (HYBRID) dy to
 * E5M2 and what its products read of x and w to E4M3; the weight gradient is computed into its
 * own buffer and then added to dw, as the host does.
 *
 * With GRIDSTEP_CUDA_FP8=cublaslt the GEMMs are cuBLASLt's FP8 GEMMs instead: each operand cast to
 * its FP8 codes at the same scale (kernels/cuda/fp8.cu; the backward's operands transposed into
 * the "TN" form Hopper's FP8 kernels take), the inverse scales passed as the operands' scale
 * pointers, fp32 accumulation and output. The products are the same FP8 products; the scales are
 * applied once to each sum, as Transformer Engine's GEMMs apply them. Shapes whose dimensions are
 * not multiples of 16, or that cuBLASLt has no FP8 kernel for (GPUs before compute capability
 * 8.9), run emulated.
 *
 * Delayed scaling (gs_fp8_scales): each cast at the scale given, emulated, recording the tensor's
 * amax, which a copy waited for under the driver's deadline brings to the host before the op
 * returns (the training program reduces the amaxes between passes). The kernels ran on the CPU
 * emulator (tests/check_cuda_emu_fp8.c); this path has not run on a GPU.
 *
 * Memory: one buffer per stream (gs_drv_stream.fp8_buf), grown on demand on the stream: the casts'
 * scratch, then the copies (or codes), each 256-byte aligned. */
#include "exec/driver_cuda_internal.h"

#include <math.h>

#include "kernels/cuda/kernels_cuda.h"

#define FP8_ALIGN_FLOATS 64 /* 256 B */

static size_t aligned(size_t floats)
{
    return (floats + FP8_ALIGN_FLOATS - 1) / FP8_ALIGN_FLOATS * FP8_ALIGN_FLOATS;
}

/* The stream's FP8 buffer cut into n parts of floats[i] floats each (0-sized allowed), each
 * 256-byte aligned; part[i] points at each. 0 when it could not be had (the stream failed). */
static int fp8_room(gs_drv_stream *s, const size_t *floats, size_t n, float **part)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += aligned(floats[i]);
    float *p = gs__cuda_stream_buffer(s, &s->fp8_buf, &s->fp8_cap, total * sizeof(float), "FP8 GEMM inputs");
    if (!p)
        return 0;
    for (size_t i = 0; i < n; i++) {
        part[i] = p;
        p += aligned(floats[i]);
    }
    return 1;
}

/* y = x's dequantized FP8 copy in format fmt (0 E4M3, 1 E5M2) at x's current scale. */
static int round_current(gs_drv_stream *s, int fmt, const float *x, size_t n, float *scratch, float *y)
{
    int rc = gs_cu_fp8_round_current(gs__cuda_work_on(s), fmt, x, n, scratch, y);
    gs__cuda_kernel_ok(s, fmt ? "fp8_round_e5m2" : "fp8_round_e4m3", rc);
    return rc == 0;
}

/* ---- cuBLASLt's FP8 GEMMs (GRIDSTEP_CUDA_FP8=cublaslt) ---------------------------------------- */

static const cudaDataType_t fp8_type[2] = {CUDA_R_8F_E4M3, CUDA_R_8F_E5M2};

/* Column-major C[m,n] (fp32) = (*sa)(*sb) A^T B + beta C, A k x m codes of format af (lda k), B k x n
 * codes of format bf (ldb k), sa and sb device floats: the "TN" form of Hopper's FP8 GEMMs. 0 done;
 * 1 cuBLASLt has no kernel for it (nothing issued: the caller emulates); -1 the stream failed. */
static int lt_fp8(gs_drv_stream *s, size_t m, size_t n, size_t k, const unsigned char *a, int af, const float *sa,
                  const unsigned char *b, int bf, const float *sb, float beta, float *c)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasOperation_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
    int rc = -1;
    const char *call = "cublasLtMatmulDescCreate";
    cublasStatus_t st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulDescSetAttribute";
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatrixLayoutCreate";
        st = cublasLtMatrixLayoutCreate(&la, fp8_type[af], k, m, (int64_t)k);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lb, fp8_type[bf], k, n, (int64_t)k);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, (int64_t)m);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = gs__cuda_lt_run(s, op, la, lb, lc, a, b, beta, c, &call);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED)
        rc = 1; /* no FP8 kernel for this GPU, shape or alignment */
    else if (st == CUBLAS_STATUS_SUCCESS)
        rc = 0;
    else
        gs__cuda_fail_stream(s, "%s (FP8, m=%zu n=%zu k=%zu): %s", call, m, n, k, cublasLtGetStatusString(st));
    gs__cuda_lt_free(op, la, lb, lc);
    return rc;
}

/* The stream's FP8 buffer as 3 scratches, up to 3 code buffers of the given bytes (0-sized
 * allowed) and an fp32 buffer of `floats`; 0 when it could not be had (the stream failed). */
static int lt_room(gs_drv_stream *s, const size_t *bytes, size_t floats, float **scratch, unsigned char **code,
                   float **out)
{
    size_t sc = gs_cu_fp8_scratch_floats();
    const size_t sizes[7] = {sc, sc, sc, (bytes[0] + 3) / 4, (bytes[1] + 3) / 4, (bytes[2] + 3) / 4, floats};
    float *part[7];
    if (!fp8_room(s, sizes, 7, part))
        return 0;
    for (size_t i = 0; i < 3; i++) {
        scratch[i] = part[i];
        code[i] = (unsigned char *)part[3 + i];
    }
    *out = part[6];
    return 1;
}

/* The codes of x (rows x cols, row-major) at its current scale into q, transposed or not. */
static int quantize(gs_drv_stream *s, int fmt, const float *x, size_t rows, size_t cols, int transpose,
                    float *scratch, unsigned char *q)
{
    int rc = gs_cu_fp8_quantize_current(gs__cuda_work_on(s), fmt, x, rows, cols, transpose, scratch, q);
    gs__cuda_kernel_ok(s, fmt ? "fp8_quantize_e5m2" : "fp8_quantize_e4m3", rc);
    return rc == 0;
}

/* 1 when every GEMM dimension is a multiple of 16 (the FP8 kernels' leading dimensions). */
static int lt_shape(size_t t, size_t k, size_t n)
{
    return t % 16 == 0 && k % 16 == 0 && n % 16 == 0 && t && k && n;
}

/* The forward through cuBLASLt: y^T [n,t] = w x^T, A = w's codes (k x n col-major), B = x's. 0 done,
 * 1 emulate instead, -1 failed. */
static int lt_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    const size_t bytes[3] = {t * k, n * k, 0};
    float *sc[3], *unused;
    unsigned char *q[3];
    if (!lt_room(s, bytes, 0, sc, q, &unused))
        return -1;
    if (!quantize(s, 0, x, t, k, 0, sc[0], q[0]) || !quantize(s, 0, w, n, k, 0, sc[1], q[1]))
        return -1;
    return lt_fp8(s, n, t, k, q[1], 0, gs_cu_fp8_inverse_scale(sc[1]), q[0], 0, gs_cu_fp8_inverse_scale(sc[0]), 0.0f,
                  y);
}

/* The backward through cuBLASLt: dx^T [k,t] = w^T dy^T (A = w's codes transposed, n x k col-major;
 * B = dy's codes, E5M2), the weight gradient dw^T [k,n] = x^T dy into its own buffer (A = x's codes
 * transposed, t x k; B = dy's codes transposed, t x n), then added to dw. 0 done, 1 emulate, -1
 * failed. */
static int lt_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw, size_t t,
                  size_t k, size_t n)
{
    const size_t bytes[3] = {dw ? t * k : n * k, t * n, dw && dx ? n * k : 0};
    float *sc[3], *wgrad;
    unsigned char *q[3];
    if (!lt_room(s, bytes, dw ? n * k : 0, sc, q, &wgrad))
        return -1;
    int rc = 0;
    if (dx) {
        unsigned char *wq = dw ? q[2] : q[0];
        if (!quantize(s, 0, w, n, k, 1, sc[0], wq) || !quantize(s, 1, dy, t, n, 0, sc[1], q[1]))
            return -1;
        rc = lt_fp8(s, k, t, n, wq, 0, gs_cu_fp8_inverse_scale(sc[0]), q[1], 1, gs_cu_fp8_inverse_scale(sc[1]), 0.0f,
                    dx);
        if (rc)
            return rc;
    }
    if (dw) {
        if (!quantize(s, 0, x, t, k, 1, sc[2], q[0]) || !quantize(s, 1, dy, t, n, 1, sc[1], q[1]))
            return -1;
        rc = lt_fp8(s, k, n, t, q[0], 0, gs_cu_fp8_inverse_scale(sc[2]), q[1], 1, gs_cu_fp8_inverse_scale(sc[1]), 0.0f,
                    wgrad);
        if (rc == 0)
            gs__cuda_k_add(s, dw, wgrad, n * k);
    }
    return rc;
}

/* ---- the emulated casts (the default) --------------------------------------------------------- */

/* y = x's dequantized copy: at x's current scale (scale NULL), or at *scale recording x's amax in
 * *amax (the maximum with what is there, NaN sticking; NULL: none), read back to the host with a
 * blocking copy: delayed scaling's casts (gs_fp8_scales). */
static int cast(gs_drv_stream *s, int fmt, const float *x, size_t n, float *scratch, float *y, const float *scale,
                float *amax)
{
    if (!scale)
        return round_current(s, fmt, x, n, scratch, y);
    int rc = gs_cu_fp8_round_scaled(gs__cuda_work_on(s), fmt, *scale, x, n, scratch, y);
    gs__cuda_kernel_ok(s, fmt ? "fp8_round_scaled_e5m2" : "fp8_round_scaled_e4m3", rc);
    if (rc)
        return 0;
    if (amax) {
        float a = 0.0f;
        gs_error e;
        gs_error_init(&e);
        CU_OK(s, cudaMemcpyAsync(&a, gs_cu_fp8_amax_of(scratch), sizeof a, cudaMemcpyDeviceToHost,
                                 gs__cuda_work_on(s)));
        /* the driver's deadline-bound wait, as its downloads wait */
        if (gs__cuda_poll_stream(s->d, &s->d->r[s->rank], s->rank, s->cs, s, "FP8 amax read-back", &e) != GS_OK) {
            gs__cuda_fail_stream(s, "%s", e.msg);
            return 0;
        }
        if ((a > *amax || isnan(a)) && !isnan(*amax))
            *amax = a;
    }
    return 1;
}

static void emulated_fwd(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n,
                         const gs_fp8_scales *sc)
{
    const size_t sizes[3] = {gs_cu_fp8_scratch_floats(), t * k, n * k};
    float *c[3];
    if (!fp8_room(s, sizes, 3, c))
        return;
    if (cast(s, 0, x, t * k, c[0], c[1], sc ? &sc->x : NULL, sc ? sc->amax_x : NULL) &&
        cast(s, 0, w, n * k, c[0], c[2], sc ? &sc->w : NULL, sc ? sc->amax_w : NULL))
        gs__cuda_k_linear_fwd(s, c[1], c[2], y, t, k, n);
}

static void emulated_bwd(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx, float *dw,
                         size_t t, size_t k, size_t n, const gs_fp8_scales *sc)
{
    /* only what the products read is cast: dx = dy w reads w, dw += dy^T x reads x */
    const size_t sizes[5] = {gs_cu_fp8_scratch_floats(), dw ? t * k : 0, dx ? n * k : 0, t * n, dw ? n * k : 0};
    float *c[5];
    if (!fp8_room(s, sizes, 5, c))
        return;
    float *scratch = c[0], *xq = c[1], *wq = c[2], *dyq = c[3], *wgrad = dw ? c[4] : NULL;
    if (dw && !cast(s, 0, x, t * k, scratch, xq, sc ? &sc->x : NULL, NULL))
        return;
    if (dx && !cast(s, 0, w, n * k, scratch, wq, sc ? &sc->w : NULL, NULL))
        return;
    if (!cast(s, 1, dy, t * n, scratch, dyq, sc ? &sc->dy : NULL, sc ? sc->amax_dy : NULL))
        return;
    if (wgrad)
        CU_OK(s, cudaMemsetAsync(wgrad, 0, n * k * sizeof(float), gs__cuda_work_on(s)));
    gs__cuda_k_linear_bwd(s, xq, dx ? wq : w, dyq, dx, wgrad, t, k, n);
    if (wgrad)
        gs__cuda_k_add(s, dw, wgrad, n * k);
}

/* 1 when sp asks for more than one scale block (this driver casts per tensor: fp8_blocks 0, so
 * exec passes NULL; a caller that does not is failed rather than given other numerics). */
static int blocked(gs_drv_stream *s, const gs_fp8_split *sp)
{
    if (!sp || (sp->k.parts <= 1 && sp->n.parts <= 1 && sp->t.parts <= 1))
        return 0;
    gs__cuda_fail_stream(s, "FP8 GEMM with scale blocks (k %zu, n %zu, token rows %zu): the cuda driver casts per "
                         "tensor", sp->k.parts, sp->n.parts, sp->t.parts);
    return 1;
}

void gs__cuda_k_linear_fwd_fp8(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k,
                               size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc)
{
    if (blocked(s, sp))
        return;
    /* delayed scaling's casts at given scales run emulated (the cuBLASLt path derives its scales) */
    if (!sc && s->d->fp8_lt && lt_shape(t, k, n) && gs__cuda_ensure_workspace(s)) {
        int rc = lt_fwd(s, x, w, y, t, k, n);
        if (rc <= 0)
            return; /* done, or the stream failed */
    }
    emulated_fwd(s, x, w, y, t, k, n, sc);
}

void gs__cuda_k_linear_bwd_fp8(gs_drv_stream *s, const float *x, const float *w, const float *dy, float *dx,
                               float *dw, size_t t, size_t k, size_t n, const gs_fp8_split *sp, const gs_fp8_scales *sc)
{
    if (blocked(s, sp))
        return;
    if (!sc && s->d->fp8_lt && lt_shape(t, k, n) && gs__cuda_ensure_workspace(s)) {
        int rc = lt_bwd(s, x, w, dy, dx, dw, t, k, n);
        if (rc <= 0)
            return;
        /* dx may be done: the emulated backward below writes (=) dx again and adds dw once */
    }
    emulated_bwd(s, x, w, dy, dx, dw, t, k, n, sc);
}
