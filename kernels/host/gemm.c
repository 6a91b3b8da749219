/* Single-threaded cache-blocked sgemm for the host kernels: packs alpha * op(A) and op(B) into
 * contiguous panels on the stack and runs a register-tiled micro-kernel; every C element is summed
 * over k in order, starting from beta * C, so the result does not depend on the blocking. */
#include <string.h>

#include "kernels/host/kernels.h"

/* Register tile (rows x columns of C kept in registers) and cache blocks (in elements). */
enum {
    GEMM_MR = 4,   /* rows of a micro-tile */
    GEMM_NR = 8,   /* columns of a micro-tile */
    GEMM_KC = 256, /* depth of a packed block: one A panel row strip + one B panel stay in L1 */
    GEMM_MC = 64,  /* rows of packed A (MC x KC floats = 64 KiB, L2) */
    GEMM_NC = 64   /* columns of packed B (KC x NC floats = 64 KiB, L2) */
};

static float gemm_a_at(int trans_a, const float *a, size_t lda, size_t i, size_t p)
{
    return trans_a ? a[p * lda + i] : a[i * lda + p];
}

static float gemm_b_at(int trans_b, const float *b, size_t ldb, size_t p, size_t j)
{
    return trans_b ? b[j * ldb + p] : b[p * ldb + j];
}

/* ap[panel][p][MR]: alpha * op(A)[i0 + panel*MR + r, p0 + p], zero rows past mc. */
static void gemm_pack_a(int trans_a, const float *a, size_t lda, size_t i0, size_t mc, size_t p0, size_t kc,
                        float alpha, float *ap)
{
    for (size_t ir = 0; ir < mc; ir += GEMM_MR) {
        size_t rows = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
        for (size_t p = 0; p < kc; p++) {
            for (size_t r = 0; r < rows; r++)
                ap[p * GEMM_MR + r] = alpha * gemm_a_at(trans_a, a, lda, i0 + ir + r, p0 + p);
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
        for (size_t p = 0; p < kc; p++) {
            for (size_t c = 0; c < cols; c++)
                bp[p * GEMM_NR + c] = gemm_b_at(trans_b, b, ldb, p0 + p, j0 + jr + c);
            for (size_t c = cols; c < GEMM_NR; c++)
                bp[p * GEMM_NR + c] = 0.0f;
        }
        bp += kc * GEMM_NR;
    }
}

#if defined(__GNUC__)
/* GCC/Clang vector extension: four floats, one SSE register on x86-64; element-wise mul and add
 * round exactly like the scalar code, so the bits match the portable path. */
typedef float gemm_v4 __attribute__((vector_size(16)));

static gemm_v4 gemm_load4(const float *x)
{
    gemm_v4 v;
    memcpy(&v, x, sizeof v);
    return v;
}

static void gemm_store4(float *x, gemm_v4 v)
{
    memcpy(x, &v, sizeof v);
}

/* c[rows x cols] += ap bp over kc, one k at a time; a full MR x NR tile is computed in registers,
 * only the valid part of C is loaded and stored. */
static void gemm_micro(size_t kc, const float *restrict ap, const float *restrict bp, float *restrict c, size_t ldc,
                       size_t rows, size_t cols)
{
    float tile[GEMM_MR * GEMM_NR] = {0};
    if (rows == GEMM_MR && cols == GEMM_NR) {
        for (size_t r = 0; r < GEMM_MR; r++)
            memcpy(tile + r * GEMM_NR, c + r * ldc, GEMM_NR * sizeof(float));
    } else {
        for (size_t r = 0; r < rows; r++)
            for (size_t j = 0; j < cols; j++)
                tile[r * GEMM_NR + j] = c[r * ldc + j];
    }
    gemm_v4 c00 = gemm_load4(tile + 0), c01 = gemm_load4(tile + 4);
    gemm_v4 c10 = gemm_load4(tile + 8), c11 = gemm_load4(tile + 12);
    gemm_v4 c20 = gemm_load4(tile + 16), c21 = gemm_load4(tile + 20);
    gemm_v4 c30 = gemm_load4(tile + 24), c31 = gemm_load4(tile + 28);
    for (size_t p = 0; p < kc; p++) {
        gemm_v4 b0 = gemm_load4(bp + p * GEMM_NR), b1 = gemm_load4(bp + p * GEMM_NR + 4);
        const float *arow = ap + p * GEMM_MR;
        gemm_v4 a0 = {arow[0], arow[0], arow[0], arow[0]};
        gemm_v4 a1 = {arow[1], arow[1], arow[1], arow[1]};
        c00 += a0 * b0;
        c01 += a0 * b1;
        c10 += a1 * b0;
        c11 += a1 * b1;
        gemm_v4 a2 = {arow[2], arow[2], arow[2], arow[2]};
        gemm_v4 a3 = {arow[3], arow[3], arow[3], arow[3]};
        c20 += a2 * b0;
        c21 += a2 * b1;
        c30 += a3 * b0;
        c31 += a3 * b1;
    }
    gemm_store4(tile + 0, c00), gemm_store4(tile + 4, c01);
    gemm_store4(tile + 8, c10), gemm_store4(tile + 12, c11);
    gemm_store4(tile + 16, c20), gemm_store4(tile + 20, c21);
    gemm_store4(tile + 24, c30), gemm_store4(tile + 28, c31);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            c[r * ldc + j] = tile[r * GEMM_NR + j];
}
#else
/* Portable micro-kernel: same operations in the same order as the vector one. */
static void gemm_micro(size_t kc, const float *restrict ap, const float *restrict bp, float *restrict c, size_t ldc,
                       size_t rows, size_t cols)
{
    float acc[GEMM_MR][GEMM_NR] = {{0}};
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            acc[r][j] = c[r * ldc + j];
    for (size_t p = 0; p < kc; p++)
        for (size_t r = 0; r < GEMM_MR; r++)
            for (size_t j = 0; j < GEMM_NR; j++)
                acc[r][j] += ap[p * GEMM_MR + r] * bp[p * GEMM_NR + j];
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            c[r * ldc + j] = acc[r][j];
}
#endif

void gs_k_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
               const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    /* beta first: the k-sum then accumulates onto it in order. beta = 0 overwrites (NaN included). */
    if (beta != 1.0f) {
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    if (m == 0 || n == 0 || k == 0)
        return;

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
                        gemm_micro(kc, ap + ir * kc, bp + jr * kc, c + (i0 + ir) * ldc + j0 + jr, ldc, rows, cols);
                    }
                }
            }
        }
    }
}
