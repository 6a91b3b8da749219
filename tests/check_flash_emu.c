/* Check suite for the flash attention kernels of the cuda driver (kernels/cuda/attention_flash.cu)
 * without a GPU: the kernels' source text (kernels/cuda/attention_flash_body.h) compiled as C and
 * run on a CPU emulator of CUDA's execution model (tests/cuda_emu.h: a pthread per CUDA thread, a
 * barrier per __syncthreads, NaN-poisoned shared memory), launched with the launchers' own grid,
 * block and shared sizes (tests/flash_emu_launch.h). The results are compared with
 * kernels/host/attention.c (an independent implementation: query-block GEMMs over the saved
 * probabilities) and lse with log sum exp computed here in double, on shapes with seq below one
 * tile, one past a tile and not a multiple of it, MHA, GQA and MQA, head dims 32/40/64/128/256,
 * two sequences, and q/k/v inside fused qkv rows with spare columns. Every output buffer has
 * guard floats around it and every gap column is poisoned: the kernels must write exactly their
 * outputs and never read a gap (a NaN read would reach the results). The host's own flash kernels
 * (kernels/host/attention_flash.c) must agree on lse and mix with these (host forward, emulated
 * backward).
 *
 * Tolerance: normwise relative, max |emu - ref| / max |ref| <= 1e-5. Both sides are fp32 with
 * sums of at most seq (<= 70) or hd (<= 256) terms in different orders (the host: GEMM blocks and
 * a double softmax sum; the kernels: 32-key tiles rescaled by exp(m_old - m_new)); each rounding
 * is 2^-24 = 6e-8 relative, so the orders differ by ~ sqrt(n) * a few ulps = 1e-6 relative to the
 * largest term, while one key too many or too few moves a row's output by about its weight
 * (>= 1 / seq, here >= 1e-2). 1e-5 separates the two with margin either way. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host/kernels.h"
#include "tests/cuda_emu.h"
#include "tests/flash_emu_launch.h"
#include "tests/flash_emu_mutant.h"

#define FLASH_TOL 1e-5
#define FLASH_GUARD 64            /* floats of guard before and after each output buffer */
#define FLASH_POISON 0x7fc0deadu  /* a quiet NaN: gaps, guards and unwritten outputs */
#define FLASH_TEST_TIMEOUT_S 600

typedef struct flash_shape {
    size_t nseq, seq, nh, nkv, hd, pad; /* pad: spare floats at the end of each qkv / out row */
    float qscale;                       /* q's entries are uniform in +-qscale (k, v, dout in +-1) */
} flash_shape;

/* seq 33 = one tile + 1 (a one-row query tile), 5 < one tile, 70 and 65 not multiples (65 = 2
 * tiles + 1), 64 a multiple; GQA 4:2, MQA 4:1 and 2:1, MHA; hd 32, 40 (odd multiple of 8), 64, 128
 * and 256 (the maximum), 7 (no multiple of the 4 threads per row); two sequences in most. */
static const flash_shape flash_shapes[] = {
    {1, 33, 2, 2, 32, 3, 1.0f},  {2, 5, 4, 2, 64, 5, 1.0f},  {2, 70, 4, 1, 40, 1, 2.0f},
    {1, 64, 4, 2, 128, 2, 1.0f}, {2, 65, 2, 1, 64, 0, 4.0f}, {1, 40, 2, 1, 256, 4, 1.0f},
    {2, 37, 4, 4, 7, 3, 3.0f},
};
#define FLASH_NSHAPES (sizeof flash_shapes / sizeof flash_shapes[0])

static uint32_t poison_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float poison(void)
{
    uint32_t u = FLASH_POISON;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* n floats with FLASH_GUARD poisoned floats before and after; returns the first of the n. */
static float *guarded_alloc(size_t n)
{
    float *b = malloc((n + 2 * FLASH_GUARD) * sizeof *b);
    ck_assert_ptr_nonnull(b);
    for (size_t x = 0; x < n + 2 * FLASH_GUARD; x++)
        b[x] = poison();
    return b + FLASH_GUARD;
}

static void guarded_free(float *p)
{
    if (p)
        free(p - FLASH_GUARD);
}

/* Guards of a guarded buffer of n floats not poison anymore. */
static size_t guards_hit(const float *p, size_t n)
{
    size_t bad = 0;
    for (size_t x = 0; x < FLASH_GUARD; x++)
        bad += (poison_bits(p[-1 - (ptrdiff_t)x]) != FLASH_POISON) + (poison_bits(p[n + x]) != FLASH_POISON);
    return bad;
}

static uint64_t rng_state;

static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* One shape's inputs, references and kernel outputs. Rows: T = nseq * seq tokens; qkv rows of
 * ld = (nh + 2 nkv) hd + pad floats (q, then k, then v, then pad poisoned), out and dout rows of
 * ldo = nh hd + pad (pad poisoned), lse [nseq][nh][seq]. */
typedef struct flash_case {
    flash_shape sh;
    size_t T, ld, ldo, nlse;
    float *qkv, *dout;             /* inputs (guarded) */
    float *out_ref, *p_ref, *dqkv_ref; /* kernels/host */
    double *lse_ref;               /* log sum exp in double, here */
    float *out, *lse, *dqkv;       /* the kernels' (guarded, poisoned before the run) */
} flash_case;

static void case_init(flash_case *c, const flash_shape *sh, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->sh = *sh;
    size_t nh = sh->nh, nkv = sh->nkv, hd = sh->hd, seq = sh->seq;
    c->T = sh->nseq * seq;
    c->ld = (nh + 2 * nkv) * hd + sh->pad;
    c->ldo = nh * hd + sh->pad;
    c->nlse = sh->nseq * nh * seq;
    rng_state = seed;
    c->qkv = guarded_alloc(c->T * c->ld);
    c->dout = guarded_alloc(c->T * c->ldo);
    for (size_t t = 0; t < c->T; t++) {
        for (size_t x = 0; x < (nh + 2 * nkv) * hd; x++)
            c->qkv[t * c->ld + x] = urand() * (x < nh * hd ? sh->qscale : 1.0f);
        for (size_t x = 0; x < nh * hd; x++)
            c->dout[t * c->ldo + x] = urand();
    }
    c->out_ref = calloc(c->T * c->ldo, sizeof(float));
    c->p_ref = calloc(sh->nseq * nh * seq * seq, sizeof(float));
    c->dqkv_ref = calloc(c->T * c->ld, sizeof(float));
    c->lse_ref = calloc(c->nlse, sizeof(double));
    ck_assert(c->out_ref && c->p_ref && c->dqkv_ref && c->lse_ref);
    const float *q = c->qkv, *k = c->qkv + nh * hd, *v = c->qkv + (nh + nkv) * hd;
    gs_k_attn_fwd(q, c->ld, k, v, c->ld, c->out_ref, c->ldo, c->p_ref, sh->nseq, seq, nh, nkv, hd);
    gs_k_attn_bwd(q, c->ld, k, v, c->ld, c->p_ref, c->dout, c->ldo, c->dqkv_ref, c->dqkv_ref + nh * hd,
                  c->dqkv_ref + (nh + nkv) * hd, sh->nseq, seq, nh, nkv, hd);
    /* lse_a = log sum_{b<=a} exp(q_a . k_b / sqrt(hd)) in double, max-shifted */
    double *sc = malloc(seq * sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    for (size_t s = 0; s < sh->nseq; s++)
        for (size_t i = 0; i < nh; i++) {
            size_t j = i / (nh / nkv);
            for (size_t a = 0; a < seq; a++) {
                double mx = -INFINITY, sum = 0;
                for (size_t b = 0; b <= a; b++) {
                    double dot = 0;
                    for (size_t d = 0; d < hd; d++)
                        dot += (double)q[(s * seq + a) * c->ld + i * hd + d] * k[(s * seq + b) * c->ld + j * hd + d];
                    sc[b] = dot / sqrt((double)hd);
                    mx = sc[b] > mx ? sc[b] : mx;
                }
                for (size_t b = 0; b <= a; b++)
                    sum += exp(sc[b] - mx);
                c->lse_ref[(s * nh + i) * seq + a] = mx + log(sum);
            }
        }
    free(sc);
}

static void case_outputs_fresh(flash_case *c)
{
    guarded_free(c->out);
    guarded_free(c->lse);
    guarded_free(c->dqkv);
    c->out = guarded_alloc(c->T * c->ldo);
    c->lse = guarded_alloc(c->nlse);
    c->dqkv = guarded_alloc(c->T * c->ld);
}

static void case_fini(flash_case *c)
{
    guarded_free(c->qkv);
    guarded_free(c->dout);
    guarded_free(c->out);
    guarded_free(c->lse);
    guarded_free(c->dqkv);
    free(c->out_ref);
    free(c->p_ref);
    free(c->dqkv_ref);
    free(c->lse_ref);
}

typedef int (*fwd_fn)(const float *, size_t, const float *, const float *, size_t, float *, size_t, float *, size_t,
                      size_t, size_t, size_t, size_t, char *, size_t);
typedef int (*bwd_fn)(const float *, size_t, const float *, const float *, size_t, const float *, const float *,
                      const float *, size_t, float *, float *, float *, size_t, size_t, size_t, size_t, size_t, char *,
                      size_t);

static int fwd_real(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                    float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len)
{
    return flash_emu_fwd(q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, err, err_len);
}

static int bwd_real(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                    const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                    size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len)
{
    return flash_emu_bwd(q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, err, err_len);
}

/* Forward then backward (from the kernels' own out and lse, as exec runs them), into fresh
 * poisoned outputs. */
static void case_run(flash_case *c, fwd_fn fwd, bwd_fn bwd)
{
    char err[256] = "";
    size_t nh = c->sh.nh, nkv = c->sh.nkv, hd = c->sh.hd;
    case_outputs_fresh(c);
    const float *q = c->qkv, *k = c->qkv + nh * hd, *v = c->qkv + (nh + nkv) * hd;
    int rc = fwd(q, c->ld, k, v, c->ld, c->out, c->ldo, c->lse, c->sh.nseq, c->sh.seq, nh, nkv, hd, err, sizeof err);
    ck_assert_msg(rc == 0, "forward: rc %d %s", rc, err);
    rc = bwd(q, c->ld, k, v, c->ld, c->out, c->lse, c->dout, c->ldo, c->dqkv, c->dqkv + nh * hd,
             c->dqkv + (nh + nkv) * hd, c->sh.nseq, c->sh.seq, nh, nkv, hd, err, sizeof err);
    ck_assert_msg(rc == 0, "backward: rc %d %s", rc, err);
}

/* max |got - ref| / max |ref| over rows x cols at col0 of row-major buffers of leading dim ld
 * (NaN counts as infinite). */
static double rel_err(const float *ref, const float *got, size_t rows, size_t cols, size_t col0, size_t ld)
{
    double maxref = 0, maxdiff = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t x = col0; x < col0 + cols; x++) {
            double df = fabs((double)got[r * ld + x] - ref[r * ld + x]);
            if (!(df <= maxdiff))
                maxdiff = isnan(df) ? INFINITY : df;
            maxref = fabs((double)ref[r * ld + x]) > maxref ? fabs((double)ref[r * ld + x]) : maxref;
        }
    return maxdiff / (maxref > 0 ? maxref : 1);
}

static double lse_err(const flash_case *c)
{
    double maxref = 0, maxdiff = 0;
    for (size_t x = 0; x < c->nlse; x++) {
        double df = fabs((double)c->lse[x] - c->lse_ref[x]);
        if (!(df <= maxdiff))
            maxdiff = isnan(df) ? INFINITY : df;
        maxref = fabs(c->lse_ref[x]) > maxref ? fabs(c->lse_ref[x]) : maxref;
    }
    return maxdiff / (maxref > 0 ? maxref : 1);
}

/* Elements written where they must not be (guards, pad columns) plus outputs left unwritten. */
static size_t layout_violations(const flash_case *c)
{
    size_t bad = guards_hit(c->out, c->T * c->ldo) + guards_hit(c->lse, c->nlse) + guards_hit(c->dqkv, c->T * c->ld);
    size_t wo = c->sh.nh * c->sh.hd, wqkv = (c->sh.nh + 2 * c->sh.nkv) * c->sh.hd;
    for (size_t t = 0; t < c->T; t++) {
        for (size_t x = 0; x < c->ldo; x++)
            bad += (poison_bits(c->out[t * c->ldo + x]) == FLASH_POISON) != (x >= wo);
        for (size_t x = 0; x < c->ld; x++)
            bad += (poison_bits(c->dqkv[t * c->ld + x]) == FLASH_POISON) != (x >= wqkv);
    }
    for (size_t x = 0; x < c->nlse; x++)
        bad += poison_bits(c->lse[x]) == FLASH_POISON;
    return bad;
}

typedef struct case_errs {
    double out, lse, dq, dk, dv;
} case_errs;

static case_errs case_errors(const flash_case *c)
{
    size_t nh = c->sh.nh, nkv = c->sh.nkv, hd = c->sh.hd;
    case_errs e;
    e.out = rel_err(c->out_ref, c->out, c->T, nh * hd, 0, c->ldo);
    e.lse = lse_err(c);
    e.dq = rel_err(c->dqkv_ref, c->dqkv, c->T, nh * hd, 0, c->ld);
    e.dk = rel_err(c->dqkv_ref, c->dqkv, c->T, nkv * hd, nh * hd, c->ld);
    e.dv = rel_err(c->dqkv_ref, c->dqkv, c->T, nkv * hd, (nh + nkv) * hd, c->ld);
    return e;
}

/* Each shape: forward and backward within FLASH_TOL of the references, exactly the outputs
 * written, and a second run bit-identical (outputs, guards and gaps included). */
START_TEST(test_shape)
{
    const flash_shape *sh = &flash_shapes[_i];
    flash_case c;
    case_init(&c, sh, 0x9e3779b97f4a7c15ull + (uint64_t)_i);
    unsigned long b0 = gs_emu_barriers();
    case_run(&c, fwd_real, bwd_real);
    ck_assert_uint_gt(gs_emu_barriers(), b0); /* the kernels did run blocks with barriers */
    case_errs e = case_errors(&c);
    printf("flash emu nseq %zu seq %3zu nh %zu nkv %zu hd %3zu pad %zu qscale %.0f: rel err out %.2e lse %.2e "
           "dq %.2e dk %.2e dv %.2e\n",
           sh->nseq, sh->seq, sh->nh, sh->nkv, sh->hd, sh->pad, sh->qscale, e.out, e.lse, e.dq, e.dk, e.dv);
    ck_assert_msg(e.out <= FLASH_TOL, "out rel err %.3e", e.out);
    ck_assert_msg(e.lse <= FLASH_TOL, "lse rel err %.3e", e.lse);
    ck_assert_msg(e.dq <= FLASH_TOL, "dq rel err %.3e", e.dq);
    ck_assert_msg(e.dk <= FLASH_TOL, "dk rel err %.3e", e.dk);
    ck_assert_msg(e.dv <= FLASH_TOL, "dv rel err %.3e", e.dv);
    size_t bad = layout_violations(&c);
    ck_assert_msg(bad == 0, "%zu elements written outside the outputs or outputs left unwritten", bad);
    /* the same inputs again: the same bits */
    size_t no = c.T * c.ldo + 2 * FLASH_GUARD, nl = c.nlse + 2 * FLASH_GUARD, nd = c.T * c.ld + 2 * FLASH_GUARD;
    float *o1 = malloc(no * sizeof *o1), *l1 = malloc(nl * sizeof *l1), *d1 = malloc(nd * sizeof *d1);
    ck_assert(o1 && l1 && d1);
    memcpy(o1, c.out - FLASH_GUARD, no * sizeof *o1);
    memcpy(l1, c.lse - FLASH_GUARD, nl * sizeof *l1);
    memcpy(d1, c.dqkv - FLASH_GUARD, nd * sizeof *d1);
    case_run(&c, fwd_real, bwd_real);
    ck_assert(memcmp(o1, c.out - FLASH_GUARD, no * sizeof *o1) == 0);
    ck_assert(memcmp(l1, c.lse - FLASH_GUARD, nl * sizeof *l1) == 0);
    ck_assert(memcmp(d1, c.dqkv - FLASH_GUARD, nd * sizeof *d1) == 0);
    free(o1);
    free(l1);
    free(d1);
    case_fini(&c);
}
END_TEST

/* The tile-bound mutant (tests/flash_emu_mutant.c: the causal key bound one short) is caught
 * by the seq = 33 shape (its one-row last query tile loses its diagonal key: row 32 attends to
 * 32 of its 33 keys, an error of the order of one key's weight, >= 1e-3 here), and only by a shape
 * with seq = 32 m + 1: at seq 64 and 70 it agrees with the reference. So the shape list must hold
 * a seq = tile + 1 shape, which is asserted too. */
START_TEST(test_mutant_caught)
{
    int has_tile_plus_one = 0;
    for (size_t x = 0; x < FLASH_NSHAPES; x++)
        has_tile_plus_one |= flash_shapes[x].seq % GS_FLASH_TILE == 1;
    ck_assert(has_tile_plus_one);
    static const flash_shape caught = {1, 33, 2, 2, 32, 3, 1.0f};
    static const flash_shape missed[] = {{1, 64, 2, 1, 32, 1, 1.0f}, {1, 70, 2, 1, 32, 1, 1.0f}};
    flash_case c;
    case_init(&c, &caught, 7);
    case_run(&c, flash_mutant_fwd, flash_mutant_bwd);
    case_errs e = case_errors(&c);
    printf("flash emu mutant (key bound q0 + nq - 1), seq 33: rel err out %.2e lse %.2e dq %.2e\n", e.out, e.lse, e.dq);
    ck_assert_msg(e.out > 1e-3, "the mutant's out error %.3e at seq 33", e.out);
    ck_assert_msg(e.dq > 1e-3, "the mutant's dq error %.3e at seq 33", e.dq);
    case_run(&c, fwd_real, bwd_real); /* the real kernels on the same case: within tolerance */
    ck_assert(case_errors(&c).out <= FLASH_TOL && case_errors(&c).dq <= FLASH_TOL);
    case_fini(&c);
    for (size_t x = 0; x < 2; x++) {
        case_init(&c, &missed[x], 8 + x);
        case_run(&c, flash_mutant_fwd, flash_mutant_bwd);
        e = case_errors(&c);
        printf("flash emu mutant, seq %zu: rel err out %.2e dq %.2e (not caught by this shape)\n", missed[x].seq, e.out,
               e.dq);
        ck_assert(e.out <= FLASH_TOL && e.dq <= FLASH_TOL);
        case_fini(&c);
    }
}
END_TEST

/* The host's flash kernels (kernels/host/attention_flash.c, what exec's host driver runs) and
 * these keep the same lse: the emulated forward's lse agrees with gs_k_attn_fwd_flash's, and the
 * emulated backward started from the host forward's out and lse agrees with gs_k_attn_bwd_flash,
 * so a driver may mix them (and a layout mismatch of lse, e.g. [nseq][seq][nh], would show). */
START_TEST(test_host_flash_interop)
{
    static const size_t pick[] = {0, 2};
    const flash_shape *sh = &flash_shapes[pick[_i]];
    flash_case c;
    case_init(&c, sh, 0x5eed0000u + (uint64_t)_i);
    case_run(&c, fwd_real, bwd_real);
    size_t nh = sh->nh, nkv = sh->nkv, hd = sh->hd;
    const float *q = c.qkv, *k = c.qkv + nh * hd, *v = c.qkv + (nh + nkv) * hd;
    float *hout = calloc(c.T * c.ldo, sizeof(float)), *hlse = calloc(c.nlse, sizeof(float));
    float *hd_ref = calloc(c.T * c.ld, sizeof(float));
    ck_assert(hout && hlse && hd_ref);
    gs_k_attn_fwd_flash(q, c.ld, k, v, c.ld, hout, c.ldo, hlse, sh->nseq, sh->seq, nh, nkv, hd);
    gs_k_attn_bwd_flash(q, c.ld, k, v, c.ld, hout, hlse, c.dout, c.ldo, hd_ref, hd_ref + nh * hd,
                        hd_ref + (nh + nkv) * hd, sh->nseq, sh->seq, nh, nkv, hd);
    double err_lse = rel_err(hlse, c.lse, 1, c.nlse, 0, c.nlse);
    ck_assert_msg(err_lse <= FLASH_TOL, "lse vs gs_k_attn_fwd_flash: %.3e", err_lse);
    /* the emulated backward from the host's out and lse */
    char err[256] = "";
    float *g = c.dqkv;
    int rc = flash_emu_bwd(q, c.ld, k, v, c.ld, hout, hlse, c.dout, c.ldo, g, g + nh * hd, g + (nh + nkv) * hd,
                           sh->nseq, sh->seq, nh, nkv, hd, err, sizeof err);
    ck_assert_msg(rc == 0, "backward: %s", err);
    double edq = rel_err(hd_ref, g, c.T, nh * hd, 0, c.ld), edk = rel_err(hd_ref, g, c.T, nkv * hd, nh * hd, c.ld);
    double edv = rel_err(hd_ref, g, c.T, nkv * hd, (nh + nkv) * hd, c.ld);
    printf("flash emu vs host flash, seq %zu hd %zu: rel err lse %.2e dq %.2e dk %.2e dv %.2e\n", sh->seq, hd, err_lse,
           edq, edk, edv);
    ck_assert(edq <= FLASH_TOL && edk <= FLASH_TOL && edv <= FLASH_TOL);
    free(hout);
    free(hlse);
    free(hd_ref);
    case_fini(&c);
}
END_TEST

/* Attention dropout in the device code: the emulated kernels with a mask (p 0.2; the shape's heads
 * as global heads 3.., sequences 9..) against the host's flash kernels with the same mask
 * (kernels/host/attention_flash.c, checked against a double reference and finite differences in
 * tests/check_kernels): out, lse, dq, dk, dv. The backward starts from each side's own forward.
 * lse is the undropped one (dropout leaves the softmax's sums alone); out differs from the
 * dropout-free run's. */
START_TEST(test_dropout)
{
    static const size_t pick[] = {0, 2, 4};
    const flash_shape *sh = &flash_shapes[pick[_i]];
    gs_dropout d = {gs_dropout_threshold(0.2), 0, gs_dropout_site_key(5, 1, GS_DROP_ATTN, 2), 9, 3, sh->seq};
    d.scale = (float)(1.0 / (1.0 - d.threshold / 16777216.0));
    flash_case c;
    case_init(&c, sh, 0xd509u + (uint64_t)_i);
    flash_emu_dropout = d;
    case_run(&c, fwd_real, bwd_real);
    memset(&flash_emu_dropout, 0, sizeof flash_emu_dropout);
    size_t nh = sh->nh, nkv = sh->nkv, hd = sh->hd;
    const float *q = c.qkv, *k = c.qkv + nh * hd, *v = c.qkv + (nh + nkv) * hd;
    float *hout = calloc(c.T * c.ldo, sizeof(float)), *hlse = calloc(c.nlse, sizeof(float));
    float *hg = calloc(c.T * c.ld, sizeof(float));
    ck_assert(hout && hlse && hg);
    gs_k_attn_fwd_flash_dropout(q, c.ld, k, v, c.ld, hout, c.ldo, hlse, sh->nseq, sh->seq, nh, nkv, hd, &d);
    gs_k_attn_bwd_flash_dropout(q, c.ld, k, v, c.ld, hout, hlse, c.dout, c.ldo, hg, hg + nh * hd, hg + (nh + nkv) * hd,
                                sh->nseq, sh->seq, nh, nkv, hd, &d);
    double eo = rel_err(hout, c.out, c.T, nh * hd, 0, c.ldo), el = rel_err(hlse, c.lse, 1, c.nlse, 0, c.nlse);
    double edq = rel_err(hg, c.dqkv, c.T, nh * hd, 0, c.ld), edk = rel_err(hg, c.dqkv, c.T, nkv * hd, nh * hd, c.ld);
    double edv = rel_err(hg, c.dqkv, c.T, nkv * hd, (nh + nkv) * hd, c.ld);
    printf("flash emu with dropout vs host, seq %zu hd %zu: rel err out %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n",
           sh->seq, hd, eo, el, edq, edk, edv);
    ck_assert(eo <= FLASH_TOL && el <= FLASH_TOL && edq <= FLASH_TOL && edk <= FLASH_TOL && edv <= FLASH_TOL);
    ck_assert_uint_eq(layout_violations(&c), 0);
    /* the mask did something: out against the undropped run's (case_init's host reference) */
    ck_assert(rel_err(c.out_ref, c.out, c.T, nh * hd, 0, c.ldo) > 0.05);
    free(hout);
    free(hlse);
    free(hg);
    case_fini(&c);
}
END_TEST

/* Shapes the launchers refuse (cudaErrorInvalidValue on the GPU: 1 here) and empty shapes that
 * launch nothing and write nothing. */
START_TEST(test_errors)
{
    ck_assert(gs_flash_args_ok(1, 8, 4, 2, 256));
    ck_assert(gs_flash_args_ok(1, 8, 4, 4, 1));
    ck_assert(!gs_flash_args_ok(1, 8, 4, 2, 257));
    ck_assert(!gs_flash_args_ok(1, 8, 4, 2, 0));
    ck_assert(!gs_flash_args_ok(1, 8, 4, 0, 64));
    ck_assert(!gs_flash_args_ok(1, 8, 4, 3, 64));
    ck_assert(!gs_flash_args_ok(1, 8, 65536, 1, 64));
    ck_assert(!gs_flash_args_ok(65536, 8, 4, 2, 64));
    char err[128];
    float *buf = guarded_alloc(16);
    ck_assert_int_eq(flash_emu_fwd(buf, 8, buf, buf, 8, buf, 8, buf, 1, 1, 1, 1, 300, err, sizeof err), 1);
    ck_assert_int_eq(
        flash_emu_bwd(buf, 8, buf, buf, 8, buf, buf, buf, 8, buf, buf, buf, 1, 1, 4, 3, 8, err, sizeof err), 1);
    ck_assert_int_eq(flash_emu_fwd(buf, 8, buf, buf, 8, buf, 8, buf, 0, 4, 1, 1, 8, err, sizeof err), 0);
    ck_assert_int_eq(flash_emu_fwd(buf, 8, buf, buf, 8, buf, 8, buf, 1, 0, 1, 1, 8, err, sizeof err), 0);
    ck_assert_int_eq(
        flash_emu_bwd(buf, 8, buf, buf, 8, buf, buf, buf, 8, buf, buf, buf, 1, 1, 0, 1, 8, err, sizeof err), 0);
    for (size_t x = 0; x < 16; x++)
        ck_assert_uint_eq(poison_bits(buf[x]), FLASH_POISON);
    ck_assert_uint_eq(guards_hit(buf, 16), 0);
    guarded_free(buf);
}
END_TEST

/* Shared memory per block from the tile layout, by hand: 32-row tiles of hd + 1 floats, 32 x 33
 * score tiles, 4 B floats. sm_90's opt-in maximum per block is 227 KiB = 232,448 B. */
START_TEST(test_shared_bytes)
{
    ck_assert_uint_eq(gs_flash_fwd_shared_bytes(128), (3 * 32 * 129 + 32 * 33) * 4); /* 53,760 */
    ck_assert_uint_eq(gs_flash_bwd_dq_shared_bytes(128), (4 * 32 * 129 + 32 * 33) * 4); /* 70,272 */
    ck_assert_uint_eq(gs_flash_bwd_dkv_shared_bytes(128), (4 * 32 * 129 + 2 * 32 * 33 + 64) * 4); /* 74,752 */
    ck_assert_uint_le(gs_flash_fwd_shared_bytes(256), 232448);
    ck_assert_uint_le(gs_flash_bwd_dq_shared_bytes(256), 232448);
    ck_assert_uint_eq(gs_flash_bwd_dkv_shared_bytes(256), 140288);
    ck_assert_uint_eq(gs_flash_tiles(33), 2);
    ck_assert_uint_eq(gs_flash_tiles(32), 1);
    ck_assert_uint_eq(gs_flash_tiles(1), 1);
    /* the thread layout the kernels assume: TPR threads per row, one row per tile row */
    ck_assert_int_eq(GS_FLASH_THREADS, GS_FLASH_TILE * GS_FLASH_TPR);
}
END_TEST

static Suite *flash_emu_suite(void)
{
    Suite *s = suite_create("flash_emu");
    TCase *tc = tcase_create("numerics");
    tcase_add_loop_test(tc, test_shape, 0, (int)FLASH_NSHAPES);
    tcase_set_timeout(tc, FLASH_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("host_flash");
    tcase_add_loop_test(tc, test_host_flash_interop, 0, 2);
    tcase_add_loop_test(tc, test_dropout, 0, 3);
    tcase_set_timeout(tc, FLASH_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("mutant");
    tcase_add_test(tc, test_mutant_caught);
    tcase_set_timeout(tc, FLASH_TEST_TIMEOUT_S);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_shared_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(flash_emu_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
