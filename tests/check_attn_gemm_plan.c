/* Check suite for kernels/cuda/attn_gemm_plan.c, the cuda driver's GEMM attention path, without a
 * GPU: every step of the plan is executed by plain loops that follow cuBLAS's documented
 * semantics for exactly the parameters the driver passes to cublasGemmStridedBatchedEx (ops, m,
 * n, k, lda/ldb/ldc, member strides, alpha, beta; beta 0 never reads C) and by loops that do what
 * kernels/cuda/attention_gemm.cu's row passes do, on buffers poisoned with NaN, with every access
 * bounds-checked and the leading dims checked against cuBLAS's rules. The results are compared
 * with kernels/host/attention.c (an independent implementation: query-block GEMMs and tiles) on
 * random inputs, for MHA, GQA and MQA shapes and for the backward split into kv-head chunks. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scenario.h"
#include "engine/schedule.h"
#include "exec/cuda_attn_plan.h"
#include "kernels/host/kernels.h"

/* ---- an emulator of the steps --------------------------------------------------------------- */

typedef struct emu {
    float *buf[GS_ATTN_BUF_COUNT];
    size_t len[GS_ATTN_BUF_COUNT]; /* floats */
    int tf32; /* GEMM inputs to TF32 (10-bit mantissa): 1 rounded to nearest even, 2 truncated */
    size_t gemms, softmaxes, ds_passes, lse_passes, max_batch;
    int flash_only_ok; /* running the flash variant: its lse passes are expected */
    size_t bad; /* out-of-bounds accesses, illegal leading dims, overlapping member outputs */
    unsigned char *written; /* per call: which elements of the output buffer were written */
    size_t reach[GS_ATTN_BUF_COUNT]; /* 1 + the highest float index the steps touched, per buffer */
} emu;

/* Index of element (r, c) of member p of operand o (column-major, ld), bounds-checked. */
static size_t at(emu *e, const gs_attn_operand *o, size_t p, size_t r, size_t c)
{
    size_t idx = o->offset + p * o->stride + r + c * o->ld;
    if (idx >= e->len[o->buf]) {
        e->bad++;
        return 0;
    }
    if (idx + 1 > e->reach[o->buf])
        e->reach[o->buf] = idx + 1;
    return idx;
}

static float tf32_round(float x, int mode)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (mode == 2)
        u &= ~0x1fffu;
    else if ((u & 0x7f800000u) != 0x7f800000u) {
        uint32_t lsb = (u >> 13) & 1u; /* keep 10 of the 23 mantissa bits, round to nearest even */
        u = (u + 0x0fffu + lsb) & ~0x1fffu;
    }
    memcpy(&x, &u, sizeof x);
    return x;
}

/* cublasGemmStridedBatchedEx: for p < batch, C_p = alpha op(A_p) op(B_p) + beta C_p, column-major,
 * op(A)[i,l] = A[i + l*lda] (N) or A[l + i*lda] (T); beta == 0 writes C without reading it. */
static void emu_gemm(emu *e, const gs_attn_step *st)
{
    /* cuBLAS's argument rules (CUBLAS_STATUS_INVALID_VALUE otherwise) */
    size_t rows_a = st->ta ? st->k : st->m, rows_b = st->tb ? st->n : st->k;
    if (st->a.ld < (rows_a ? rows_a : 1) || st->b.ld < (rows_b ? rows_b : 1) || st->c.ld < (st->m ? st->m : 1))
        e->bad++;
    e->gemms++;
    if (st->batch > e->max_batch)
        e->max_batch = st->batch;
    memset(e->written, 0, e->len[st->c.buf]);
    float *A = e->buf[st->a.buf], *B = e->buf[st->b.buf], *C = e->buf[st->c.buf];
    for (size_t p = 0; p < st->batch; p++)
        for (size_t j = 0; j < st->n; j++)
            for (size_t i = 0; i < st->m; i++) {
                double acc = 0.0;
                for (size_t l = 0; l < st->k; l++) {
                    float x = st->ta ? A[at(e, &st->a, p, l, i)] : A[at(e, &st->a, p, i, l)];
                    float y = st->tb ? B[at(e, &st->b, p, j, l)] : B[at(e, &st->b, p, l, j)];
                    if (e->tf32) {
                        x = tf32_round(x, e->tf32);
                        y = tf32_round(y, e->tf32);
                    }
                    acc += (double)x * y;
                }
                size_t ci = at(e, &st->c, p, i, j);
                if (e->written[ci]++)
                    e->bad++; /* two members (or two elements) write one float */
                float prev = st->beta == 0.0f ? 0.0f : C[ci];
                C[ci] = (float)(st->alpha * acc + (double)st->beta * prev);
            }
}

/* kernels/cuda/attention_gemm.cu's k_softmax_causal_rows, row by row; with lse (the flash
 * variant's k_softmax_lse_rows) each row's max + log(sum) into b too (member h's row a at
 * b.offset + h * b.stride + a). */
static void emu_softmax(emu *e, const gs_attn_step *st, int lse)
{
    if (lse)
        e->lse_passes++;
    else
        e->softmaxes++;
    float *P = e->buf[st->c.buf], *L = e->buf[st->b.buf];
    for (size_t h = 0; h < st->batch; h++)
        for (size_t a = 0; a < st->m; a++) {
            size_t last = a < st->n ? a : st->n - 1;
            float mx = -INFINITY;
            for (size_t b = 0; b <= last; b++) {
                float x = P[at(e, &st->c, h, b, a)]; /* row a of member h: column-major (b, a) */
                mx = x > mx ? x : mx;
            }
            double sum = 0.0;
            for (size_t b = 0; b <= last; b++) {
                size_t idx = at(e, &st->c, h, b, a);
                P[idx] = expf(P[idx] - mx);
                sum += P[idx];
            }
            if (lse)
                L[at(e, &st->b, h, a, 0)] = (float)((double)mx + log(sum));
            float inv = (float)(1.0 / sum);
            for (size_t b = 0; b < st->n; b++) {
                size_t idx = at(e, &st->c, h, b, a);
                P[idx] = b <= last ? P[idx] * inv : 0.0f;
            }
        }
}

/* k_ds_causal_rows: D = sum_{b<=a} P dP, dS = P (dP - D), 0 past a. */
static void emu_ds(emu *e, const gs_attn_step *st)
{
    e->ds_passes++;
    const float *P = e->buf[st->a.buf];
    float *X = e->buf[st->c.buf];
    for (size_t h = 0; h < st->batch; h++)
        for (size_t a = 0; a < st->m; a++) {
            size_t last = a < st->n ? a : st->n - 1;
            double D = 0.0;
            for (size_t b = 0; b <= last; b++)
                D += (double)P[at(e, &st->a, h, b, a)] * X[at(e, &st->c, h, b, a)];
            float d = (float)D;
            for (size_t b = 0; b < st->n; b++) {
                size_t xi = at(e, &st->c, h, b, a);
                X[xi] = b <= last ? P[at(e, &st->a, h, b, a)] * (X[xi] - d) : 0.0f;
            }
        }
}

/* k_p_lse_rows: P = exp(S - lse) for b <= a, 0 past a, in place of the scores. */
static void emu_p_lse(emu *e, const gs_attn_step *st)
{
    e->lse_passes++;
    float *X = e->buf[st->c.buf];
    const float *L = e->buf[st->b.buf];
    for (size_t h = 0; h < st->batch; h++)
        for (size_t a = 0; a < st->m; a++) {
            size_t last = a < st->n ? a : st->n - 1;
            float l = L[at(e, &st->b, h, a, 0)];
            for (size_t b = 0; b < st->n; b++) {
                size_t idx = at(e, &st->c, h, b, a);
                X[idx] = b <= last ? expf(X[idx] - l) : 0.0f;
            }
        }
}

static int emu_step(void *ctx, const gs_attn_step *st)
{
    emu *e = ctx;
    switch (st->kind) {
    case GS_ATTN_STEP_GEMM: emu_gemm(e, st); break;
    case GS_ATTN_STEP_SOFTMAX: emu_softmax(e, st, 0); break;
    case GS_ATTN_STEP_DS: emu_ds(e, st); break;
    case GS_ATTN_STEP_SOFTMAX_LSE:
    case GS_ATTN_STEP_P_LSE:
        if (e->flash_only_ok && st->kind == GS_ATTN_STEP_P_LSE)
            emu_p_lse(e, st);
        else if (e->flash_only_ok)
            emu_softmax(e, st, 1);
        else
            e->bad++; /* the kept-P plan has no lse passes */
        break;
    }
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------------- */

/* xorshift64*: the test's own random numbers. */
static float urand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t x = *s * UINT64_C(2685821657736338717);
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *alloc_fill(size_t n, float value)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = value;
    return p;
}

/* n floats drawn U(-1, 1) from the test's generator, in order. */
static float *rand_fill(size_t n, uint64_t *seed)
{
    float *p = alloc_fill(n, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = urand(seed);
    return p;
}

/* max |got - ref| / max |ref| over the elements of the given columns of each row (NaN: infinite). */
static double rel_err_cols(const float *got, const float *ref, size_t rows, size_t ld, size_t col0, size_t ncols)
{
    double maxref = 0, maxdiff = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = col0; c < col0 + ncols; c++) {
            double g = got[r * ld + c], f = ref[r * ld + c], df = fabs(g - f);
            if (isnan(df))
                return INFINITY;
            maxdiff = df > maxdiff ? df : maxdiff;
            maxref = fabs(f) > maxref ? fabs(f) : maxref;
        }
    return maxdiff / (maxref > 0 ? maxref : 1);
}

typedef struct attn_case {
    size_t nseq, seq, nh, nkv, hd;
    size_t scratch_bytes; /* 0: GS_ATTN_GEMM_SCRATCH_BYTES */
    int tf32;
} attn_case;

typedef struct attn_result {
    double err_out, err_p, err_dq, err_dk, err_dv;
    size_t bad, gemms, softmaxes, ds_passes, max_batch, masked_nonzero, chunk;
    size_t scratch_reach; /* 1 + the highest scratch float the steps touched */
} attn_result;

/* Binds the emulator's buffers: q, k, v views into the fused qkv rows (ld floats; each buffer's
 * length counts from its own start), out and dout rows of ldo, P (or the lse) of np floats, dq,
 * dk, dv views into dqkv like q, k, v, the scratch of nscratch floats; allocates the write map
 * for the longest. */
static void emu_bind(emu *e, float *qkv, float *out, float *p, size_t np, float *dout, float *dqkv, float *scratch,
                     size_t nscratch, size_t T, size_t ld, size_t ldo, size_t nh, size_t nkv, size_t hd)
{
    float *bases[2] = {qkv, dqkv};
    gs_attn_buf first[2] = {GS_ATTN_Q, GS_ATTN_DQ};
    for (int i = 0; i < 2; i++) { /* GS_ATTN_Q, K, V and GS_ATTN_DQ, DK, DV are consecutive */
        e->buf[first[i]] = bases[i], e->len[first[i]] = T * ld;
        e->buf[first[i] + 1] = bases[i] + nh * hd, e->len[first[i] + 1] = T * ld - nh * hd;
        e->buf[first[i] + 2] = bases[i] + (nh + nkv) * hd, e->len[first[i] + 2] = T * ld - (nh + nkv) * hd;
    }
    e->buf[GS_ATTN_OUT] = out, e->len[GS_ATTN_OUT] = T * ldo;
    e->buf[GS_ATTN_P] = p, e->len[GS_ATTN_P] = np;
    e->buf[GS_ATTN_DOUT] = dout, e->len[GS_ATTN_DOUT] = T * ldo;
    e->buf[GS_ATTN_SCRATCH] = scratch, e->len[GS_ATTN_SCRATCH] = nscratch;
    size_t maxlen = 0;
    for (int b = 0; b < GS_ATTN_BUF_COUNT; b++)
        maxlen = e->len[b] > maxlen ? e->len[b] : maxlen;
    e->written = malloc(maxlen);
    ck_assert_ptr_nonnull(e->written);
}

/* Host attention vs the plan run by the emulator on the same inputs: q, k, v fused in one row of
 * (nh + 2 nkv) hd floats (as the driver's qkv projection lays them out), out and dout in rows of
 * nh*hd + 3 floats (padding, so a leading dim mixed up with a width shows), dq, dk, dv fused like
 * q, k, v. */
static attn_result run_case(const attn_case *cs, uint64_t seed)
{
    size_t T = cs->nseq * cs->seq, nh = cs->nh, nkv = cs->nkv, hd = cs->hd, seq = cs->seq;
    size_t ld = (nh + 2 * nkv) * hd, ldo = nh * hd + 3, np = cs->nseq * nh * seq * seq;
    float *qkv = rand_fill(T * ld, &seed), *dout = rand_fill(T * ldo, &seed);
    float *q = qkv, *k = qkv + nh * hd, *v = qkv + (nh + nkv) * hd;
    /* the reference: kernels/host */
    float *out_h = alloc_fill(T * ldo, 0), *p_h = alloc_fill(np, 0), *dqkv_h = alloc_fill(T * ld, 0);
    gs_k_attn_fwd(q, ld, k, v, ld, out_h, ldo, p_h, cs->nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd(q, ld, k, v, ld, p_h, dout, ldo, dqkv_h, dqkv_h + nh * hd, dqkv_h + (nh + nkv) * hd, cs->nseq, seq,
                  nh, nkv, hd);
    /* the plan, on NaN-poisoned outputs */
    gs_attn_shape sh = {cs->nseq, seq, nh, nkv, hd, ld, ld, ldo,
                        cs->scratch_bytes ? cs->scratch_bytes : GS_ATTN_GEMM_SCRATCH_BYTES};
    attn_result res;
    memset(&res, 0, sizeof res);
    res.chunk = gs_attn_gemm_chunk(&sh);
    size_t nscratch = gs_attn_gemm_scratch_floats(&sh);
    float *out_e = alloc_fill(T * ldo, NAN), *p_e = alloc_fill(np, NAN), *dqkv_e = alloc_fill(T * ld, NAN);
    float *scratch = alloc_fill(nscratch, NAN);
    emu e;
    memset(&e, 0, sizeof e);
    e.tf32 = cs->tf32;
    emu_bind(&e, qkv, out_e, p_e, np, dout, dqkv_e, scratch, nscratch, T, ld, ldo, nh, nkv, hd);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_attn_gemm_fwd(&sh, emu_step, &e, &err), GS_OK);
    ck_assert_int_eq(gs_attn_gemm_bwd(&sh, emu_step, &e, &err), GS_OK);
    res.err_out = rel_err_cols(out_e, out_h, T, ldo, 0, nh * hd);
    res.err_p = rel_err_cols(p_e, p_h, np / seq, seq, 0, seq);
    res.err_dq = rel_err_cols(dqkv_e, dqkv_h, T, ld, 0, nh * hd);
    res.err_dk = rel_err_cols(dqkv_e, dqkv_h, T, ld, nh * hd, nkv * hd);
    res.err_dv = rel_err_cols(dqkv_e, dqkv_h, T, ld, (nh + nkv) * hd, nkv * hd);
    for (size_t r = 0; r < np / seq; r++) /* row a = r % seq: entries past a exactly 0 */
        for (size_t b = r % seq + 1; b < seq; b++)
            res.masked_nonzero += p_e[r * seq + b] != 0.0f;
    /* out's padding columns were never part of an output: still the poison */
    for (size_t r = 0; r < T; r++)
        for (size_t c = nh * hd; c < ldo; c++)
            res.bad += !isnan(out_e[r * ldo + c]);
    res.bad += e.bad;
    res.gemms = e.gemms;
    res.softmaxes = e.softmaxes;
    res.ds_passes = e.ds_passes;
    res.max_batch = e.max_batch;
    res.scratch_reach = e.reach[GS_ATTN_SCRATCH];
    free(e.written);
    free(scratch);
    free(dqkv_e);
    free(p_e);
    free(out_e);
    free(dqkv_h);
    free(p_h);
    free(out_h);
    free(dout);
    free(qkv);
    return res;
}

/* fp32 against fp32 with different summation orders (the host sums in float, by blocks; the
 * emulator in double): a few ulps times sqrt(seq) on values of order 1 */
#define TOL_FP32 1e-5

static void assert_matches(const attn_case *cs, const attn_result *r, double tol)
{
    ck_assert_msg(r->bad == 0, "%zu out-of-bounds accesses, illegal leading dims or overlapping outputs", r->bad);
    ck_assert_msg(r->masked_nonzero == 0, "%zu masked probabilities not exactly 0", r->masked_nonzero);
    ck_assert_msg(r->err_out <= tol, "out rel err %.3g (nh %zu nkv %zu)", r->err_out, cs->nh, cs->nkv);
    ck_assert_msg(r->err_p <= tol, "p rel err %.3g", r->err_p);
    ck_assert_msg(r->err_dq <= tol, "dq rel err %.3g", r->err_dq);
    ck_assert_msg(r->err_dk <= tol, "dk rel err %.3g", r->err_dk);
    ck_assert_msg(r->err_dv <= tol, "dv rel err %.3g", r->err_dv);
}

/* Step counts from the plan's definition: forward 2 GEMMs + 1 softmax, backward 4 GEMMs + 1 dS
 * pass, per (sequence, group member, kv chunk). */
static void assert_counts(const attn_case *cs, const attn_result *r, size_t chunk)
{
    size_t chunks = (cs->nkv + chunk - 1) / chunk, group = cs->nh / cs->nkv;
    size_t per_fwd = cs->nseq * group, per_bwd = cs->nseq * group * chunks;
    ck_assert_uint_eq(r->gemms, 2 * per_fwd + 4 * per_bwd);
    ck_assert_uint_eq(r->softmaxes, per_fwd);
    ck_assert_uint_eq(r->ds_passes, per_bwd);
    ck_assert_uint_eq(r->max_batch, cs->nkv); /* the forward batches every kv head */
}

/* ---- tests ------------------------------------------------------------------------------------- */

START_TEST(test_gqa)
{
    /* 6 query heads on 2 kv heads (group 3), 2 sequences of 13 tokens (not a multiple of anything),
     * head dim 8 */
    attn_case cs = {2, 13, 6, 2, 8, 0, 0};
    attn_result r = run_case(&cs, 11);
    assert_matches(&cs, &r, TOL_FP32);
    ck_assert_uint_eq(r.chunk, 2);
    assert_counts(&cs, &r, 2);
}
END_TEST

START_TEST(test_mha)
{
    attn_case cs = {1, 17, 4, 4, 5, 0, 0}; /* group 1: one call per GEMM batches all heads */
    attn_result r = run_case(&cs, 12);
    assert_matches(&cs, &r, TOL_FP32);
    assert_counts(&cs, &r, 4);
}
END_TEST

START_TEST(test_mqa)
{
    attn_case cs = {2, 9, 3, 1, 4, 0, 0}; /* one kv head for 3 query heads: dk, dv summed over 3 */
    attn_result r = run_case(&cs, 13);
    assert_matches(&cs, &r, TOL_FP32);
    assert_counts(&cs, &r, 1);
}
END_TEST

START_TEST(test_chunks)
{
    /* a scratch of 2 heads (2 * 11 * 11 floats) over 5 kv heads: backward chunks of 2, 2, 1 */
    attn_case cs = {2, 11, 10, 5, 4, 2 * 11 * 11 * sizeof(float) + 7, 0};
    attn_result r = run_case(&cs, 14);
    ck_assert_uint_eq(r.chunk, 2);
    assert_matches(&cs, &r, TOL_FP32);
    assert_counts(&cs, &r, 2);
    /* the scratch: 2 heads x 11 x 11 floats x 4 B = 968 B, every float of it used by the steps */
    gs_attn_shape sh = {2, 11, 10, 5, 4, 30, 30, 40, cs.scratch_bytes};
    ck_assert_uint_eq(gs_attn_gemm_scratch_bytes(&sh), 968);
    ck_assert_uint_eq(r.scratch_reach * sizeof(float), 968);
    /* a cap below one head still runs, one head at a time */
    attn_case one = {1, 11, 10, 5, 4, 16, 0};
    r = run_case(&one, 15);
    ck_assert_uint_eq(r.chunk, 1);
    assert_matches(&one, &r, TOL_FP32);
    assert_counts(&one, &r, 1);
    /* one head's scratch, 11 x 11 x 4 B = 484 B, past the 16-byte cap */
    sh.scratch_bytes = 16;
    ck_assert_uint_eq(gs_attn_gemm_scratch_bytes(&sh), 484);
    ck_assert_uint_eq(r.scratch_reach * sizeof(float), 484);
}
END_TEST

static gs_event attn_event(gs_op op, gs_phase phase, uint32_t seq, uint32_t hd, uint32_t batch);

/* ---- the flash variant ---------------------------------------------------------------------- */

typedef struct flash_result {
    double err_out, err_lse, err_dq, err_dk, err_dv;
    size_t bad, gemms, softmaxes, lse_passes, ds_passes, chunk_fwd, chunk_bwd;
    size_t scratch_reach;
} flash_result;

/* kernels/host/attention_flash.c (FlashAttention-2's tiles and online softmax, an independent
 * implementation) vs the flash plan run by the emulator, as run_case: out, the lse of every row
 * (GS_ATTN_P), dq, dk, dv. The plan's forward runs, then its backward reads the lse it wrote. */
static flash_result run_flash_case(const attn_case *cs, uint64_t seed)
{
    size_t T = cs->nseq * cs->seq, nh = cs->nh, nkv = cs->nkv, hd = cs->hd, seq = cs->seq;
    size_t ld = (nh + 2 * nkv) * hd, ldo = nh * hd + 3, nl = cs->nseq * nh * seq;
    float *qkv = rand_fill(T * ld, &seed), *dout = rand_fill(T * ldo, &seed);
    float *q = qkv, *k = qkv + nh * hd, *v = qkv + (nh + nkv) * hd;
    float *out_h = alloc_fill(T * ldo, 0), *lse_h = alloc_fill(nl, 0), *dqkv_h = alloc_fill(T * ld, 0);
    gs_k_attn_fwd_flash(q, ld, k, v, ld, out_h, ldo, lse_h, cs->nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd_flash(q, ld, k, v, ld, out_h, lse_h, dout, ldo, dqkv_h, dqkv_h + nh * hd, dqkv_h + (nh + nkv) * hd,
                        cs->nseq, seq, nh, nkv, hd);
    gs_attn_shape sh = {cs->nseq, seq, nh, nkv, hd, ld, ld, ldo,
                        cs->scratch_bytes ? cs->scratch_bytes : GS_ATTN_GEMM_SCRATCH_BYTES};
    flash_result res;
    memset(&res, 0, sizeof res);
    res.chunk_fwd = gs_attn_gemm_flash_chunk(&sh, 0);
    res.chunk_bwd = gs_attn_gemm_flash_chunk(&sh, 1);
    size_t nf = gs_attn_gemm_flash_scratch_floats(&sh, 0), nb = gs_attn_gemm_flash_scratch_floats(&sh, 1);
    size_t nscratch = nf > nb ? nf : nb;
    float *out_e = alloc_fill(T * ldo, NAN), *lse_e = alloc_fill(nl, NAN), *dqkv_e = alloc_fill(T * ld, NAN);
    float *scratch = alloc_fill(nscratch, NAN);
    emu e;
    memset(&e, 0, sizeof e);
    e.flash_only_ok = 1;
    e.tf32 = cs->tf32;
    emu_bind(&e, qkv, out_e, lse_e, nl, dout, dqkv_e, scratch, nscratch, T, ld, ldo, nh, nkv, hd);
    gs_error err;
    gs_error_init(&err);
    /* each direction gets exactly the scratch the driver allocates for it */
    e.len[GS_ATTN_SCRATCH] = nf;
    ck_assert_int_eq(gs_attn_gemm_flash_fwd(&sh, emu_step, &e, &err), GS_OK);
    size_t reach_fwd = e.reach[GS_ATTN_SCRATCH];
    for (size_t i = 0; i < nscratch; i++) /* the backward finds no scores left by the forward */
        scratch[i] = NAN;
    e.len[GS_ATTN_SCRATCH] = nb;
    e.reach[GS_ATTN_SCRATCH] = 0;
    ck_assert_int_eq(gs_attn_gemm_flash_bwd(&sh, emu_step, &e, &err), GS_OK);
    res.scratch_reach = e.reach[GS_ATTN_SCRATCH] > reach_fwd ? e.reach[GS_ATTN_SCRATCH] : reach_fwd;
    res.err_out = rel_err_cols(out_e, out_h, T, ldo, 0, nh * hd);
    res.err_lse = rel_err_cols(lse_e, lse_h, nl, 1, 0, 1);
    res.err_dq = rel_err_cols(dqkv_e, dqkv_h, T, ld, 0, nh * hd);
    res.err_dk = rel_err_cols(dqkv_e, dqkv_h, T, ld, nh * hd, nkv * hd);
    res.err_dv = rel_err_cols(dqkv_e, dqkv_h, T, ld, (nh + nkv) * hd, nkv * hd);
    for (size_t r = 0; r < T; r++)
        for (size_t c = nh * hd; c < ldo; c++)
            res.bad += !isnan(out_e[r * ldo + c]);
    res.bad += e.bad;
    res.gemms = e.gemms;
    res.softmaxes = e.softmaxes;
    res.lse_passes = e.lse_passes;
    res.ds_passes = e.ds_passes;
    free(e.written);
    free(scratch);
    free(dqkv_e);
    free(lse_e);
    free(out_e);
    free(dqkv_h);
    free(lse_h);
    free(out_h);
    free(dout);
    free(qkv);
    return res;
}

/* Counts from the flash plan's definition: per (sequence, group member, chunk) the forward has
 * 2 GEMMs and 1 lse softmax, the backward 5 GEMMs (S again, dP, dQ, dK, dV), 1 P-from-lse pass
 * and 1 dS pass; the kept-P softmax never runs. */
static void assert_flash(const attn_case *cs, const flash_result *r, double tol)
{
    ck_assert_msg(r->bad == 0, "%zu out-of-bounds accesses, illegal leading dims or overlapping outputs", r->bad);
    ck_assert_msg(r->err_out <= tol, "out rel err %.3g (nh %zu nkv %zu)", r->err_out, cs->nh, cs->nkv);
    ck_assert_msg(r->err_lse <= tol, "lse rel err %.3g", r->err_lse);
    ck_assert_msg(r->err_dq <= tol, "dq rel err %.3g", r->err_dq);
    ck_assert_msg(r->err_dk <= tol, "dk rel err %.3g", r->err_dk);
    ck_assert_msg(r->err_dv <= tol, "dv rel err %.3g", r->err_dv);
    size_t group = cs->nh / cs->nkv;
    size_t per_fwd = cs->nseq * group * ((cs->nkv + r->chunk_fwd - 1) / r->chunk_fwd);
    size_t per_bwd = cs->nseq * group * ((cs->nkv + r->chunk_bwd - 1) / r->chunk_bwd);
    ck_assert_uint_eq(r->gemms, 2 * per_fwd + 5 * per_bwd);
    ck_assert_uint_eq(r->lse_passes, per_fwd + per_bwd);
    ck_assert_uint_eq(r->ds_passes, per_bwd);
    ck_assert_uint_eq(r->softmaxes, 0);
}

START_TEST(test_flash_gqa_mha_mqa)
{
    attn_case cases[] = {{2, 13, 6, 2, 8, 0, 0}, {1, 17, 4, 4, 5, 0, 0}, {2, 9, 3, 1, 4, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        flash_result r = run_flash_case(&cases[i], 21 + i);
        assert_flash(&cases[i], &r, TOL_FP32);
        ck_assert_uint_eq(r.chunk_fwd, cases[i].nkv); /* the default cap holds every kv head */
        ck_assert_uint_eq(r.chunk_bwd, cases[i].nkv);
    }
}
END_TEST

/* Scratch cap of 3 heads of 11 x 11 floats (1452 B, +7): the forward takes 3 kv heads a chunk
 * (one matrix each: chunks 3, 2 of 5), the backward 1 (two matrices each: 968 B > 1459 / 2 ...
 * 1459 / 968 = 1); the scratch reached is the larger, 3 x 484 B = 1452 B. */
START_TEST(test_flash_chunks)
{
    attn_case cs = {2, 11, 10, 5, 4, 3 * 11 * 11 * sizeof(float) + 7, 0};
    flash_result r = run_flash_case(&cs, 31);
    ck_assert_uint_eq(r.chunk_fwd, 3);
    ck_assert_uint_eq(r.chunk_bwd, 1);
    assert_flash(&cs, &r, TOL_FP32);
    ck_assert_uint_eq(r.scratch_reach * sizeof(float), 1452);
    gs_attn_shape sh = {2, 11, 10, 5, 4, 30, 30, 40, cs.scratch_bytes};
    ck_assert_uint_eq(gs_attn_gemm_flash_scratch_floats(&sh, 0) * sizeof(float), 1452);
    ck_assert_uint_eq(gs_attn_gemm_flash_scratch_floats(&sh, 1) * sizeof(float), 968);
    /* a cap of 2 heads' pairs: backward chunks of 2 (2 x 2 x 484 B = 1936 B) */
    attn_case two = {1, 11, 10, 5, 4, 4 * 11 * 11 * sizeof(float), 0};
    r = run_flash_case(&two, 32);
    ck_assert_uint_eq(r.chunk_fwd, 4);
    ck_assert_uint_eq(r.chunk_bwd, 2);
    assert_flash(&two, &r, TOL_FP32);
    ck_assert_uint_eq(r.scratch_reach * sizeof(float), 1936);
}
END_TEST

/* The GPU check's shape under TF32, as test_tf32_tolerance (same bound: a third of the GPU
 * check's TF32 GEMM tolerance). */
START_TEST(test_flash_tf32)
{
    attn_case cs = {2, 128, 8, 2, 64, 0, 1};
    flash_result r = run_flash_case(&cs, 33);
    ck_assert_uint_eq(r.bad, 0);
    double errs[] = {r.err_out, r.err_lse, r.err_dq, r.err_dk, r.err_dv}, worst = 0;
    for (size_t i = 0; i < 5; i++)
        worst = errs[i] > worst ? errs[i] : worst;
    ck_assert_msg(worst <= 5e-3 / 3, "flash TF32 emulation: worst rel err %.3g", worst);
    ck_assert_msg(worst > 10 * TOL_FP32, "flash TF32 emulation: worst rel err %.3g, no rounding seen", worst);
}
END_TEST

/* The flash variant's pre-flight: every attention event counts (the forward and the recompute
 * take one matrix per kv head of a chunk, the backward two). Hand events: 8 query heads on 2 kv
 * heads, 2 sequences a micro-batch. */
START_TEST(test_flash_schedule_max)
{
    gs_event ev[] = {
        attn_event(GS_OP_QKV, GS_PHASE_BWD, 4096, 64, 0),   /* not attention */
        attn_event(GS_OP_ATTN, GS_PHASE_FWD, 256, 16, 16),  /* 2 x 256 x 256 x 4 B = 524288 B */
        attn_event(GS_OP_ATTN, GS_PHASE_BWD, 128, 16, 16),  /* 2 x 2 x 128 x 128 x 4 B = 262144 B */
    };
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    r.events = ev;
    r.nevents = 3;
    gs_error err;
    gs_error_init(&err);
    uint64_t bytes = 0;
    ck_assert_int_eq(gs_attn_gemm_flash_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err), GS_OK);
    ck_assert_uint_eq(bytes, 524288);
    ev[2].gemm_m = ev[2].gemm_n = 512; /* backward 2 x 2 x 512^2 x 4 B = 4 MiB */
    ck_assert_int_eq(gs_attn_gemm_flash_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err), GS_OK);
    ck_assert_uint_eq(bytes, 4194304);
    ev[1].phase = GS_PHASE_RECOMPUTE; /* a recompute is a forward */
    ev[1].gemm_m = ev[1].gemm_n = 2048; /* 2 x 2048^2 x 4 B = 32 MiB */
    ck_assert_int_eq(gs_attn_gemm_flash_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err), GS_OK);
    ck_assert_uint_eq(bytes, 33554432);
}
END_TEST

/* TF32 (inputs cut to 10 mantissa bits, products accumulated in fp32 or wider), on the GPU
 * check's attention shape (tests/gpu/kernel_check.c: 2 x 128 tokens, 8 heads on 2 kv heads, head
 * dim 64, inputs U(-1,1)). Each input's relative error is up to 2^-11 = 4.9e-4 rounded (2^-10
 * truncated, in case the hardware path truncates); a product of two up to twice that, averaged
 * down over the sums, then carried through a second (forward) or third (backward) GEMM. The GPU
 * check holds the GEMM path under TF32 to its TF32 GEMM tolerance, 5e-3 (TOL_GEMM_TF32 there):
 * this emulation must stay inside a third of it (it measures 4.9e-4 rounded, 1.4e-3
 * truncated), and above fp32's (so that the emulated rounding is really there). */
#define TOL_ATTN_TF32 5e-3

static double worst_err(const attn_result *r)
{
    double errs[] = {r->err_out, r->err_p, r->err_dq, r->err_dk, r->err_dv}, worst = 0;
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        worst = errs[i] > worst ? errs[i] : worst;
    return worst;
}

START_TEST(test_tf32_tolerance)
{
    for (int mode = 1; mode <= 2; mode++) {
        attn_case cs = {2, 128, 8, 2, 64, 0, mode};
        attn_result r = run_case(&cs, 16);
        ck_assert_uint_eq(r.bad, 0);
        double worst = worst_err(&r);
        ck_assert_msg(worst <= TOL_ATTN_TF32 / 3, "TF32 emulation (%s): worst rel err %.3g, tolerance %.0e",
                      mode == 1 ? "rounded" : "truncated", worst, TOL_ATTN_TF32);
        ck_assert_msg(worst > 10 * TOL_FP32, "TF32 emulation: worst rel err %.3g, no rounding seen", worst);
    }
}
END_TEST

/* The backward's scratch of the GPU check's attention shape (tests/gpu/kernel_check.c: 2 x 128
 * tokens, 8 heads on 2 kv heads, head dim 64) under the driver's cap, from the plan's buffers
 * (attn_gemm_plan.c): the scratch holds X_h [seq, seq] floats, dP then dS in place, for each kv
 * head h of a backward chunk; a chunk is as many kv heads as the cap holds, at least 1, at most
 * nkv. Here X_h = 128 x 128 x 4 B = 65536 B; 512 MiB holds 8192 of them, more than the 2 kv
 * heads: chunk 2, 131072 B. The emulated steps must touch exactly that much. */
START_TEST(test_scratch_bytes)
{
    gs_attn_shape sh = {2, 128, 8, 2, 64, 768, 768, 515, GS_ATTN_GEMM_SCRATCH_BYTES};
    ck_assert_uint_eq(gs_attn_gemm_scratch_bytes(&sh), 131072);
    attn_case cs = {2, 128, 8, 2, 64, 0, 0};
    attn_result r = run_case(&cs, 17);
    ck_assert_uint_eq(r.bad, 0);
    ck_assert_uint_eq(r.scratch_reach * sizeof(float), 131072);
    /* 8 kv heads under a cap of 3 heads and a bit: chunk 3, 3 x 65536 B = 196608 B */
    gs_attn_shape capped = {1, 128, 8, 8, 16, 384, 384, 128, 3 * 65536 + 100};
    ck_assert_uint_eq(gs_attn_gemm_scratch_bytes(&capped), 196608);
}
END_TEST

/* A rank list of hand-made events: the largest backward attention event's scratch is taken; the
 * forward's and the recompute's attention and other GEMMs are not counted (they allocate none). */
static gs_event attn_event(gs_op op, gs_phase phase, uint32_t seq, uint32_t hd, uint32_t batch)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE;
    e.op = (uint8_t)op;
    e.phase = (uint8_t)phase;
    e.gemm_m = seq;
    e.gemm_n = op == GS_OP_ATTN ? seq : 4 * seq;
    e.gemm_k = hd;
    e.gemm_batch = batch;
    return e;
}

START_TEST(test_schedule_max)
{
    /* 8 query heads on 2 kv heads, head dim 16, 2 sequences a micro-batch: batch 16 */
    gs_event ev[] = {
        attn_event(GS_OP_QKV, GS_PHASE_BWD, 4096, 64, 0),   /* not attention */
        attn_event(GS_OP_ATTN, GS_PHASE_FWD, 256, 16, 16),  /* forward: no scratch */
        attn_event(GS_OP_ATTN, GS_PHASE_BWD, 64, 16, 16),   /* 2 x 64 x 64 x 4 B = 32768 B */
        attn_event(GS_OP_ATTN, GS_PHASE_BWD, 128, 16, 16),  /* 2 x 128 x 128 x 4 B = 131072 B */
        attn_event(GS_OP_ATTN, GS_PHASE_RECOMPUTE, 512, 16, 16), /* a forward again: no scratch */
        attn_event(GS_OP_ATTN, GS_PHASE_BWD, 96, 16, 16),   /* 2 x 96 x 96 x 4 B = 73728 B */
    };
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    r.events = ev;
    r.nevents = sizeof ev / sizeof ev[0];
    gs_error err;
    gs_error_init(&err);
    uint64_t bytes = 1;
    ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err), GS_OK);
    ck_assert_uint_eq(bytes, 131072);
    /* the shape of the largest: 2 sequences of 128, lds of the fused qkv row (8 + 2 x 2) x 16 and
     * of out 8 x 16 */
    gs_attn_shape sh;
    ck_assert_int_eq(gs_attn_gemm_event_shape(&ev[3], 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &sh, &err), GS_OK);
    ck_assert_uint_eq(sh.nseq, 2);
    ck_assert_uint_eq(sh.seq, 128);
    ck_assert_uint_eq(sh.nh, 8);
    ck_assert_uint_eq(sh.nkv, 2);
    ck_assert_uint_eq(sh.hd, 16);
    ck_assert_uint_eq(sh.ldq, 192);
    ck_assert_uint_eq(sh.ldkv, 192);
    ck_assert_uint_eq(sh.ldo, 128);
    /* no backward attention: none */
    r.nevents = 2;
    ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err), GS_OK);
    ck_assert_uint_eq(bytes, 0);
    /* a batch that is not whole sequences of 8 heads, and kv heads that do not divide the heads */
    ev[2].gemm_batch = 12;
    r.nevents = sizeof ev / sizeof ev[0];
    ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&r, 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err),
                     GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "whole sequences of 8 query heads"));
    ck_assert_int_eq(gs_attn_gemm_event_shape(&ev[3], 8, 3, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &sh, &err), GS_ERR_INPUT);
    ck_assert_int_eq(gs_attn_gemm_event_shape(&ev[0], 8, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &sh, &err), GS_ERR_INPUT);
}
END_TEST

/* A built schedule (the exec contract's tiny Llama on pp2 x tp2, micro-batches of 2): each
 * rank's attention runs 8 / 2 = 4 query heads on 4 / 2 = 2 kv heads over sequences of 32, so
 * X_h = 32 x 32 x 4 B = 4096 B and the default cap takes both kv heads: 8192 B on every rank
 * (each stage holds 2 of the 4 layers); under a cap of one head and a byte, 4096 B. */
START_TEST(test_schedule_built)
{
    static const char yaml[] =
        "name: t\n"
        "model: {name: tiny-exec, layers: 4, hidden: 64, heads: 8, kv_heads: 4, ffn: 128, vocab: 256, seq: 32,\n"
        "        tied_embeddings: false, norm: rmsnorm, mlp: swiglu, pos: rope}\n"
        "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 4}\n"
        "grid: {dp: 1, pp: 2, tp: 2}\n"
        "strategy: {sharding: full_shard, precision: fp32, pipeline: 1f1b, recompute: full}\n"
        "batch: {global: 8, micro: 2}\n";
    gs_error err;
    gs_error_init(&err);
    gs_scenario s;
    gs_mesh m;
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "t", &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(sch->nranks, 4);
    for (size_t i = 0; i < sch->nranks; i++) {
        uint64_t bytes = 0;
        ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&sch->ranks[i], 4, 2, 1, GS_ATTN_GEMM_SCRATCH_BYTES, &bytes,
                                                        &err), GS_OK);
        ck_assert_uint_eq(bytes, 8192);
        ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&sch->ranks[i], 4, 2, 1, 4097, &bytes, &err), GS_OK);
        ck_assert_uint_eq(bytes, 4096);
    }
    gs_schedule_destroy(sch);
}
END_TEST

/* The same tiny model with context parallelism 2 (cp_comm p2p, all_gather, a2a) on 2 ranks: the
 * schedule's attention events carry each rank's share; exec runs p2p's and all_gather's over the
 * whole 32-token sequence with all 8 heads on 4 kv heads (the rank's 16 queries among zero rows:
 * seq_mult 2), and a2a's over whole sequences with 8 / 2 = 4 heads on 4 / 2 = 2 kv heads. X_h =
 * 32 x 32 x 4 B = 4096 B a kv head, the default cap taking every kv head: 4 x 4096 = 16384 B for
 * p2p and all_gather, 2 x 4096 = 8192 B for a2a. Without the multiplier the p2p and all_gather
 * events read as sequences of 16: a quarter of that. */
START_TEST(test_schedule_cp)
{
    static const char *const comm[] = {"p2p", "all_gather", "a2a"};
    static const uint64_t want[] = {16384, 16384, 8192};
    for (size_t c = 0; c < 3; c++) {
        char yaml[800];
        snprintf(yaml, sizeof yaml,
                 "name: t\n"
                 "model: {name: tiny-exec, layers: 2, hidden: 64, heads: 8, kv_heads: 4, ffn: 128, vocab: 256, "
                 "seq: 32,\n        tied_embeddings: false, norm: rmsnorm, mlp: swiglu, pos: rope}\n"
                 "cluster: {preset: dgx-a100-80g, nodes: 1, gpus_per_node: 2}\n"
                 "grid: {dp: 1, pp: 1, tp: 1, cp: 2}\n"
                 "strategy: {sharding: full_shard, precision: fp32, pipeline: 1f1b, recompute: none, "
                 "flash_attention: false, cp_comm: %s}\n"
                 "batch: {global: 2, micro: 2}\n",
                 comm[c]);
        gs_error err;
        gs_error_init(&err);
        gs_scenario s;
        gs_mesh m;
        gs_schedule *sch = NULL;
        ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "t", &s, &err) == GS_OK, "%s", err.msg);
        ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
        ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "%s", err.msg);
        int a2a = c == 2;
        for (size_t i = 0; i < sch->nranks; i++) {
            uint64_t bytes = 0;
            ck_assert_msg(gs_attn_gemm_max_scratch_bytes(&sch->ranks[i], a2a ? 4 : 8, a2a ? 2 : 4, a2a ? 1 : 2,
                                                         GS_ATTN_GEMM_SCRATCH_BYTES, &bytes, &err) == GS_OK,
                          "%s: %s", comm[c], err.msg);
            ck_assert_msg(bytes == want[c], "%s: %llu B", comm[c], (unsigned long long)bytes);
            if (!a2a) {
                ck_assert_int_eq(gs_attn_gemm_max_scratch_bytes(&sch->ranks[i], 8, 4, 1, GS_ATTN_GEMM_SCRATCH_BYTES,
                                                                &bytes, &err), GS_OK);
                ck_assert_uint_eq(bytes, want[c] / 4);
            }
        }
        gs_schedule_destroy(sch);
    }
}
END_TEST

START_TEST(test_errors)
{
    gs_error err;
    gs_error_init(&err);
    gs_attn_shape bad_heads = {1, 8, 6, 4, 8, 80, 80, 48, GS_ATTN_GEMM_SCRATCH_BYTES};
    ck_assert_int_eq(gs_attn_gemm_check(&bad_heads, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a multiple"));
    gs_attn_shape narrow = {1, 8, 4, 2, 8, 31, 64, 32, GS_ATTN_GEMM_SCRATCH_BYTES}; /* q needs 4*8 = 32 */
    ck_assert_int_eq(gs_attn_gemm_check(&narrow, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "narrower"));
    gs_attn_shape huge = {1, (size_t)1 << 31, 4, 2, 8, 64, 64, 32, GS_ATTN_GEMM_SCRATCH_BYTES};
    ck_assert_int_eq(gs_attn_gemm_check(&huge, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "int range"));
    /* the plan refuses before visiting anything */
    emu e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(gs_attn_gemm_fwd(&bad_heads, emu_step, &e, &err), GS_ERR_INPUT);
    ck_assert_int_eq(gs_attn_gemm_bwd(&narrow, emu_step, &e, &err), GS_ERR_INPUT);
    ck_assert_uint_eq(e.gemms + e.softmaxes + e.ds_passes, 0);
}
END_TEST

/* The cuda driver's choice of path per call (GRIDSTEP_CUDA_ATTENTION), as its help states it:
 * auto (unset, empty, "auto") the GEMMs unless the call draws dropout masks, kernels ("simple"
 * too) never the GEMMs, gemm always and a call with dropout refused; anything else refused
 * naming the value. */
START_TEST(test_path_choice)
{
    gs_error err;
    gs_error_init(&err);
    gs_attn_path_pref p = GS_ATTN_PATH_GEMM;
    const char *autos[] = {NULL, "", "auto"};
    for (size_t i = 0; i < 3; i++) {
        p = GS_ATTN_PATH_GEMM;
        ck_assert_int_eq(gs_attn_path_parse(autos[i], &p, &err), GS_OK);
        ck_assert_int_eq(p, GS_ATTN_PATH_AUTO);
    }
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_AUTO, 0, 1), 1);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_AUTO, 1, 1), 0);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_AUTO, 0, 0), 0); /* past the cap: the kernels */
    ck_assert_int_eq(gs_attn_path_parse("kernels", &p, &err), GS_OK);
    ck_assert_int_eq(p, GS_ATTN_PATH_KERNELS);
    ck_assert_int_eq(gs_attn_path_parse("simple", &p, &err), GS_OK);
    ck_assert_int_eq(p, GS_ATTN_PATH_KERNELS);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_KERNELS, 0, 1), 0);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_KERNELS, 1, 1), 0);
    ck_assert_int_eq(gs_attn_path_parse("gemm", &p, &err), GS_OK);
    ck_assert_int_eq(p, GS_ATTN_PATH_GEMM);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_GEMM, 0, 1), 1);
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_GEMM, 0, 0), 1); /* forced: one head past the cap */
    ck_assert_int_eq(gs_attn_path_gemm(GS_ATTN_PATH_GEMM, 1, 1), -1);
    /* the cap's condition: one kv head's seq^2 floats (twice under flash) within the 512 MiB
     * default: seq 8192 fits flash exactly (2 x 2^26 x 4 B = 2^29 B), 8193 does not; without
     * flash 11585 fits (536,848,900 B), 11586 not (536,941,584 B > 536,870,912) */
    gs_attn_shape sh = {1, 8192, 32, 8, 128, 6144, 6144, 4096, GS_ATTN_GEMM_SCRATCH_BYTES};
    ck_assert_int_eq(gs_attn_gemm_fits(&sh, 1), 1);
    sh.seq = 8193;
    ck_assert_int_eq(gs_attn_gemm_fits(&sh, 1), 0);
    ck_assert_int_eq(gs_attn_gemm_fits(&sh, 0), 1);
    sh.seq = 11585;
    ck_assert_int_eq(gs_attn_gemm_fits(&sh, 0), 1);
    sh.seq = 11586;
    ck_assert_int_eq(gs_attn_gemm_fits(&sh, 0), 0);
    ck_assert_int_eq(gs_attn_path_parse("GEMM", &p, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "GRIDSTEP_CUDA_ATTENTION='GEMM'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "expected auto"));
}
END_TEST

enum { ATTN_PLAN_TEST_TIMEOUT_S = 120 }; /* each case takes well under a second on an idle core */

static Suite *attn_gemm_plan_suite(void)
{
    Suite *s = suite_create("attn_gemm_plan");
    TCase *tc = tcase_create("mapping");
    tcase_add_test(tc, test_gqa);
    tcase_add_test(tc, test_mha);
    tcase_add_test(tc, test_mqa);
    tcase_add_test(tc, test_chunks);
    tcase_set_timeout(tc, ATTN_PLAN_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("numerics");
    tcase_add_test(tc, test_tf32_tolerance);
    tcase_set_timeout(tc, ATTN_PLAN_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("scratch");
    tcase_add_test(tc, test_scratch_bytes);
    tcase_add_test(tc, test_schedule_max);
    tcase_add_test(tc, test_schedule_built);
    tcase_add_test(tc, test_schedule_cp);
    tcase_set_timeout(tc, ATTN_PLAN_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("flash");
    tcase_add_test(tc, test_flash_gqa_mha_mqa);
    tcase_add_test(tc, test_flash_chunks);
    tcase_add_test(tc, test_flash_tf32);
    tcase_add_test(tc, test_flash_schedule_max);
    tcase_set_timeout(tc, ATTN_PLAN_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_path_choice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(attn_gemm_plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
