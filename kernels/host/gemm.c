/* Single-threaded cache-blocked sgemm for the host kernels: packs alpha * op(A) and op(B) into
 * contiguous panels on the stack and runs a register-tiled micro-kernel. Every C element is
 * beta * C plus the products added one k at a time, in order, each product and each sum rounded
 * to fp32 (no FMA), so the bits depend neither on the blocking nor on the micro-kernel. */
#include <string.h>

#include "kernels/host/gemm_internal.h"
#include "kernels/host/kernels.h"

/* Register tile (rows x columns of C per micro-kernel call) and cache blocks (in elements). */
enum {
    GEMM_MR = 6,   /* rows of a micro-tile */
    GEMM_NR = 16,  /* columns of a micro-tile */
    GEMM_KC = 256, /* depth of a packed block */
    GEMM_MC = 72,  /* rows of packed A (MC x KC floats = 72 KiB, L2), a multiple of MR */
    GEMM_NC = 64   /* columns of packed B (KC x NC floats = 64 KiB, L2), a multiple of NR */
};

/* A micro-kernel: tile[MR][NR] += ap[kc][MR] (x) bp[kc][NR], one k at a time. */
typedef void (*gemm_micro_fn)(size_t kc, const float *ap, const float *bp, float *tile);

static void gemm_micro_scalar(size_t kc, const float *restrict ap, const float *restrict bp, float *restrict tile)
{
    for (size_t p = 0; p < kc; p++)
        for (size_t r = 0; r < GEMM_MR; r++)
            for (size_t j = 0; j < GEMM_NR; j++)
                tile[r * GEMM_NR + j] += ap[p * GEMM_MR + r] * bp[p * GEMM_NR + j];
}

#if defined(__GNUC__)
/* The vector micro-kernels keep the 6 x 16 tile in 12 named registers (arrays of vectors get
 * spilled to the stack). ROW(r) updates tile row r from the broadcast a value and two B vectors. */
#define GEMM_ROWS(ROW) ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#define GEMM_DECLARE(r) VEC c##r##0, c##r##1;
#define GEMM_LOAD(r) memcpy(&c##r##0, tile + r * GEMM_NR + J0, sizeof(VEC)), \
                     memcpy(&c##r##1, tile + r * GEMM_NR + J0 + LANES, sizeof(VEC));
#define GEMM_STORE(r) memcpy(tile + r * GEMM_NR + J0, &c##r##0, sizeof(VEC)), \
                      memcpy(tile + r * GEMM_NR + J0 + LANES, &c##r##1, sizeof(VEC));
#define GEMM_UPDATE(r) { VEC a = (VEC){0} + ap[p * GEMM_MR + r]; c##r##0 += a * b0; c##r##1 += a * b1; }
#define GEMM_BODY                                                                                      \
    GEMM_ROWS(GEMM_DECLARE)                                                                            \
    GEMM_ROWS(GEMM_LOAD)                                                                               \
    for (size_t p = 0; p < kc; p++) {                                                                  \
        VEC b0, b1;                                                                                    \
        memcpy(&b0, bp + p * GEMM_NR + J0, sizeof b0);                                                 \
        memcpy(&b1, bp + p * GEMM_NR + J0 + LANES, sizeof b1);                                         \
        GEMM_ROWS(GEMM_UPDATE)                                                                         \
    }                                                                                                  \
    GEMM_ROWS(GEMM_STORE)

typedef float gemm_v4 __attribute__((vector_size(16)));

/* Columns [j0, j0 + 8) of the tile with 4-wide vectors (12 accumulators + 2 B + 1 A of 16). */
static void gemm_micro_vec4_half(size_t kc, const float *restrict ap, const float *restrict bp, float *restrict tile,
                                 size_t j0)
{
#define VEC gemm_v4
#define LANES 4
#define J0 j0
    GEMM_BODY
#undef J0
#undef LANES
#undef VEC
}

static void gemm_micro_vec4(size_t kc, const float *restrict ap, const float *restrict bp, float *restrict tile)
{
    gemm_micro_vec4_half(kc, ap, bp, tile, 0);
    gemm_micro_vec4_half(kc, ap, bp, tile, 8);
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#define GEMM_HAVE_AVX2 1
typedef float gemm_v8 __attribute__((vector_size(32)));

/* The whole 6 x 16 tile in 12 AVX registers. target("avx2") does not enable FMA, so a * b + c
 * stays two roundings, as in the other kernels. */
__attribute__((target("avx2"))) static void gemm_micro_avx2(size_t kc, const float *restrict ap,
                                                            const float *restrict bp, float *restrict tile)
{
#define VEC gemm_v8
#define LANES 8
#define J0 0
    GEMM_BODY
#undef J0
#undef LANES
#undef VEC
}
#endif

int gs__gemm_kernel_available(gs__gemm_kernel kernel)
{
    switch (kernel) {
    case GS__GEMM_SCALAR:
        return 1;
    case GS__GEMM_VEC4:
#if defined(__GNUC__)
        return 1;
#else
        return 0;
#endif
    case GS__GEMM_AVX2:
#if defined(GEMM_HAVE_AVX2)
        return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
        return 0;
#endif
    default:
        return 0;
    }
}

gs__gemm_kernel gs__gemm_kernel_best(void)
{
    if (gs__gemm_kernel_available(GS__GEMM_AVX2))
        return GS__GEMM_AVX2;
    if (gs__gemm_kernel_available(GS__GEMM_VEC4))
        return GS__GEMM_VEC4;
    return GS__GEMM_SCALAR;
}

static gemm_micro_fn gemm_micro_for(gs__gemm_kernel kernel)
{
#if defined(GEMM_HAVE_AVX2)
    if (kernel == GS__GEMM_AVX2)
        return gemm_micro_avx2;
#endif
#if defined(__GNUC__)
    if (kernel == GS__GEMM_VEC4)
        return gemm_micro_vec4;
#endif
    (void)kernel;
    return gemm_micro_scalar;
}

/* ap[panel][p][MR]: alpha * op(A)[i0 + panel*MR + r, p0 + p], zero rows past mc. */
static void gemm_pack_a(int trans_a, const float *a, size_t lda, size_t i0, size_t mc, size_t p0, size_t kc,
                        float alpha, float *ap)
{
    for (size_t ir = 0; ir < mc; ir += GEMM_MR) {
        size_t rows = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
        for (size_t p = 0; p < kc; p++) {
            for (size_t r = 0; r < rows; r++) {
                size_t i = i0 + ir + r, kk = p0 + p;
                ap[p * GEMM_MR + r] = alpha * (trans_a ? a[kk * lda + i] : a[i * lda + kk]);
            }
            for (size_t r = rows; r < GEMM_MR; r++)
                ap[p * GEMM_MR + r] = 0.0f;
        }
        ap += kc * GEMM_MR;
    }
}

/* bp[panel][p][NR]: op(B)[p0 + p, j0 + panel*NR + c], zero columns past nc. */
static void gemm_pack_b(int trans_b, const float *b, size_t ldb, size_t p0, size_t kc, size_t j0, size_t nc,
                        float *bp)
{
    for (size_t jr = 0; jr < nc; jr += GEMM_NR) {
        size_t cols = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
        if (!trans_b) {
            for (size_t p = 0; p < kc; p++) {
                memcpy(bp + p * GEMM_NR, b + (p0 + p) * ldb + j0 + jr, cols * sizeof(float));
                for (size_t c = cols; c < GEMM_NR; c++)
                    bp[p * GEMM_NR + c] = 0.0f;
            }
        } else {
            for (size_t c = 0; c < cols; c++) {
                const float *col = b + (j0 + jr + c) * ldb + p0;
                for (size_t p = 0; p < kc; p++)
                    bp[p * GEMM_NR + c] = col[p];
            }
            for (size_t p = 0; p < kc; p++)
                for (size_t c = cols; c < GEMM_NR; c++)
                    bp[p * GEMM_NR + c] = 0.0f;
        }
        bp += kc * GEMM_NR;
    }
}

/* C[rows x cols] += the packed panels' product through a full MR x NR tile (rows and columns past
 * the edge are computed on zero padding and dropped). */
static void gemm_tile(gemm_micro_fn micro, size_t kc, const float *ap, const float *bp, float *c, size_t ldc,
                      size_t rows, size_t cols)
{
    float tile[GEMM_MR * GEMM_NR] = {0};
    if (rows == GEMM_MR && cols == GEMM_NR) { /* constant-size copies compile to vector moves */
        for (size_t r = 0; r < GEMM_MR; r++)
            memcpy(tile + r * GEMM_NR, c + r * ldc, GEMM_NR * sizeof(float));
        micro(kc, ap, bp, tile);
        for (size_t r = 0; r < GEMM_MR; r++)
            memcpy(c + r * ldc, tile + r * GEMM_NR, GEMM_NR * sizeof(float));
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            tile[r * GEMM_NR + j] = c[r * ldc + j];
    micro(kc, ap, bp, tile);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            c[r * ldc + j] = tile[r * GEMM_NR + j];
}

void gs__gemm_with(gs__gemm_kernel kernel, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                   const float *a, size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    /* beta first: the k-sum then accumulates onto it in order. beta = 0 overwrites (NaN included). */
    if (beta != 1.0f) {
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    if (m == 0 || n == 0 || k == 0)
        return;

    gemm_micro_fn micro = gemm_micro_for(kernel);
    float ap[GEMM_MC * GEMM_KC];
    float bp[GEMM_KC * GEMM_NC];
    for (size_t j0 = 0; j0 < n; j0 += GEMM_NC) {
        size_t nc = n - j0 < GEMM_NC ? n - j0 : GEMM_NC;
        for (size_t p0 = 0; p0 < k; p0 += GEMM_KC) {
            size_t kc = k - p0 < GEMM_KC ? k - p0 : GEMM_KC;
            gemm_pack_b(trans_b, b, ldb, p0, kc, j0, nc, bp);
            for (size_t i0 = 0; i0 < m; i0 += GEMM_MC) {
                size_t mc = m - i0 < GEMM_MC ? m - i0 : GEMM_MC;
                gemm_pack_a(trans_a, a, lda, i0, mc, p0, kc, alpha, ap);
                for (size_t jr = 0; jr < nc; jr += GEMM_NR) {
                    size_t cols = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
                    for (size_t ir = 0; ir < mc; ir += GEMM_MR) {
                        size_t rows = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
                        gemm_tile(micro, kc, ap + ir * kc, bp + jr * kc, c + (i0 + ir) * ldc + j0 + jr, ldc, rows,
                                  cols);
                    }
                }
            }
        }
    }
}

void gs_k_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
               const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
#if defined(GS_BLAS_OPENBLAS) || defined(GS_BLAS_BLIS) /* configure --with-blas: the BLAS's own order; the hand
                                                          kernel stays the tests' reference */
    gs__gemm_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    gs__gemm_with(gs__gemm_kernel_best(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}
