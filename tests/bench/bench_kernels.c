/* Benchmark: host kernel speed (make bench; not part of make check): GFLOP/s of gs_k_gemm on
 * square and linear-layer shapes in the four transpose cases, GB/s of AdamW and RMSNorm.
 * Single-threaded, like the kernels; timed in the thread's CPU seconds so that other processes on a
 * shared machine do not count (their cache and memory traffic still does). gemm reports the
 * micro-kernel in use. usage: bench_kernels [--quick] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/host/gemm_internal.h"
#include "kernels/host/kernels.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *bench_alloc(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof(float));
    if (x)
        gs_k_init_normal(x, n, seed, 0, 0, 1.0f);
    return x;
}

/* gs_k_gemm (hand == 0: whatever the build uses, a BLAS with --with-blas) or the hand kernel. */
static void run_gemm(int hand, int ta, int tb, size_t m, size_t n, size_t k, const float *a, const float *b, float *c)
{
    if (hand)
        gs__gemm_with(gs__gemm_kernel_best(), ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
    else
        gs_k_gemm(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

/* Repeats the gemm until min_s seconds have passed; returns GFLOP/s (2 m n k per call). */
static double bench_gemm(int hand, int ta, int tb, size_t m, size_t n, size_t k, double min_s)
{
    float *a = bench_alloc(m * k, 1), *b = bench_alloc(k * n, 2), *c = bench_alloc(m * n, 3);
    double gflops = 0.0;
    if (a && b && c) {
        run_gemm(hand, ta, tb, m, n, k, a, b, c); /* warm-up */
        unsigned reps = 0;
        double t0 = now_s(), dt;
        do {
            run_gemm(hand, ta, tb, m, n, k, a, b, c);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        gflops = 2.0 * (double)m * (double)n * (double)k * reps / dt * 1e-9;
    }
    free(a), free(b), free(c);
    return gflops;
}

/* AdamW on n floats: reads p, g, m, v and writes p, m, v, 28 bytes per element. Returns GB/s. */
static double bench_adamw(size_t n, double min_s)
{
    float *p = bench_alloc(n, 4), *g = bench_alloc(n, 5), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    double gbs = 0.0;
    if (p && g && m && v) {
        gs_k_adamw(p, g, m, v, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1); /* warm-up: first touch of m, v */
        unsigned reps = 0;
        double t0 = now_s(), dt;
        do {
            gs_k_adamw(p, g, m, v, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, reps + 2);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        gbs = 28.0 * (double)n * reps / dt * 1e-9;
    }
    free(p), free(g), free(m), free(v);
    return gbs;
}

/* RMSNorm forward + backward on t rows of h: forward reads x, writes y (8 bytes per element),
 * backward reads x, dy and writes dx (12 bytes per element); g, dg and rstd are negligible. */
static void bench_rmsnorm(size_t t, size_t h, double min_s, double *fwd_gbs, double *bwd_gbs)
{
    float *x = bench_alloc(t * h, 6), *g = bench_alloc(h, 7), *y = bench_alloc(t * h, 8), *dy = bench_alloc(t * h, 9),
          *dx = malloc(t * h * sizeof(float)), *dg = calloc(h, sizeof(float)), *rstd = malloc(t * sizeof(float));
    *fwd_gbs = *bwd_gbs = 0.0;
    if (x && g && y && dy && dx && dg && rstd) {
        gs_k_rmsnorm_fwd(x, g, y, rstd, t, h, 1e-5f); /* warm-up: first touch of the outputs */
        gs_k_rmsnorm_bwd(x, g, rstd, dy, dx, dg, t, h);
        unsigned reps = 0;
        double t0 = now_s(), dt;
        do {
            gs_k_rmsnorm_fwd(x, g, y, rstd, t, h, 1e-5f);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        *fwd_gbs = 8.0 * (double)(t * h) * reps / dt * 1e-9;
        reps = 0;
        t0 = now_s();
        do {
            gs_k_rmsnorm_bwd(x, g, rstd, dy, dx, dg, t, h);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        *bwd_gbs = 12.0 * (double)(t * h) * reps / dt * 1e-9;
    }
    free(x), free(g), free(y), free(dy), free(dx), free(dg), free(rstd);
}

/* Causal attention forward and backward, one sequence of seq tokens, nh query heads on nkv kv
 * heads of hd: useful GFLOP/s counts the causal half only (forward 2 seq^2 nh hd, backward twice
 * that). */
static void bench_attention(int flash, size_t seq, size_t nh, size_t nkv, size_t hd, double min_s, double *fwd_gflops,
                            double *bwd_gflops)
{
    size_t ld = (nh + 2 * nkv) * hd, ldo = nh * hd;
    /* the saved state: probabilities (nh seq^2 floats) or, flash, a logsumexp per row (nh seq) */
    size_t np = nh * seq * (flash ? 1 : seq);
    float *qkv = bench_alloc(seq * ld, 10), *out = bench_alloc(seq * ldo, 11), *p = bench_alloc(np, 12),
          *dout = bench_alloc(seq * ldo, 13), *dqkv = bench_alloc(seq * ld, 14);
    double flops = 2.0 * (double)seq * (double)seq * (double)nh * (double)hd;
    *fwd_gflops = *bwd_gflops = 0.0;
    if (qkv && out && p && dout && dqkv) {
        unsigned reps = 0;
        double t0 = now_s(), dt;
        do {
            if (flash)
                gs_k_attn_fwd_flash(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, ldo, p, 1, seq, nh, nkv,
                                    hd);
            else
                gs_k_attn_fwd(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, ldo, p, 1, seq, nh, nkv, hd);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        *fwd_gflops = flops * reps / dt * 1e-9;
        reps = 0;
        t0 = now_s();
        do {
            if (flash)
                gs_k_attn_bwd_flash(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, out, p, dout, ldo, dqkv,
                                    dqkv + nh * hd, dqkv + (nh + nkv) * hd, 1, seq, nh, nkv, hd);
            else
                gs_k_attn_bwd(qkv, ld, qkv + nh * hd, qkv + (nh + nkv) * hd, ld, p, dout, ldo, dqkv, dqkv + nh * hd,
                              dqkv + (nh + nkv) * hd, 1, seq, nh, nkv, hd);
            reps++;
        } while ((dt = now_s() - t0) < min_s);
        *bwd_gflops = 2.0 * flops * reps / dt * 1e-9;
    }
    free(qkv), free(out), free(p), free(dout), free(dqkv);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    double min_s = quick ? 0.05 : 0.5;
    static const struct {
        size_t m, n, k;
        const char *what;
    } shapes[] = {
        {256, 256, 256, "square"},
        {512, 512, 512, "square"},
        {1024, 1024, 1024, "square"},
        {512, 2048, 512, "linear fwd: 512 tokens, 512 -> 2048"},
        {127, 333, 255, "odd"},
    };
    static const char *const kernel_names[GS__GEMM_KERNELS] = {"scalar", "4-wide vectors", "AVX2"};
    double gf[sizeof shapes / sizeof shapes[0]][4];
#ifdef HAVE_BLAS
    printf("gs_k_gemm (single thread, %s: %s)\n", gs__gemm_blas_name(), gs__gemm_blas_library());
#else
    printf("gs_k_gemm (single thread, %s micro-kernel)\n", kernel_names[gs__gemm_kernel_best()]);
#endif
    printf("  %5s %5s %5s  %8s %8s %8s %8s  %s\n", "m", "n", "k", "NN", "NT", "TN", "TT", "GFLOP/s");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (quick && shapes[i].m > 512)
            continue;
        printf("  %5zu %5zu %5zu ", shapes[i].m, shapes[i].n, shapes[i].k);
        for (int tr = 0; tr < 4; tr++)
            printf(" %8.2f", gf[i][tr] = bench_gemm(0, tr >> 1, tr & 1, shapes[i].m, shapes[i].n, shapes[i].k, min_s));
        printf("  %s\n", shapes[i].what);
    }
#ifdef HAVE_BLAS
    /* the hand kernel (the tests' bit-exact reference) beside it, and the BLAS's speed-up */
    printf("hand kernel (single thread, %s micro-kernel): GFLOP/s, and %s's speed-up over it\n",
           kernel_names[gs__gemm_kernel_best()], gs__gemm_blas_name());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (quick && shapes[i].m > 512)
            continue;
        printf("  hand %5zux%zux%zu ", shapes[i].m, shapes[i].n, shapes[i].k);
        for (int tr = 0; tr < 4; tr++) {
            double h = bench_gemm(1, tr >> 1, tr & 1, shapes[i].m, shapes[i].n, shapes[i].k, min_s);
            printf(" %8.2f (%4.1fx)", h, h > 0 ? gf[i][tr] / h : 0.0);
        }
        printf("\n");
    }
#endif
    size_t n_adamw = (size_t)1 << (quick ? 20 : 24);
    printf("gs_k_adamw      %9zu floats: %6.2f GB/s\n", n_adamw, bench_adamw(n_adamw, min_s));
    double fwd, bwd;
    bench_rmsnorm(2048, 4096, min_s, &fwd, &bwd);
    printf("gs_k_rmsnorm    2048 x 4096: fwd %6.2f GB/s, bwd %6.2f GB/s\n", fwd, bwd);
    static const size_t seqs[] = {128, 512, 2048};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        size_t sq = seqs[i];
        if (quick && sq > 512)
            continue;
        for (int flash = 0; flash < 2; flash++) {
            bench_attention(flash, sq, 8, 4, 64, min_s, &fwd, &bwd);
            printf("gs_k_attn%-6s  seq %4zu, 8 heads on 4 kv, hd 64: fwd %6.2f GFLOP/s, bwd %6.2f GFLOP/s (causal "
                   "half), saved %8.3f MiB\n", flash ? "_flash" : "", sq, fwd, bwd,
                   (double)(8 * sq * (flash ? 1 : sq)) * 4.0 / 1048576.0);
        }
    }
    return 0;
}
