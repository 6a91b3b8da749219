/* The measured side of the GEMM model's check: times cuBLASLt GEMMs of the shapes in a list on
 * one GPU, in bf16 and in FP8 (E4M3 x E4M3, bf16 out) with and without fast accumulation, and
 * prints one CSV row per shape and type. sim/compute.c's shape model (tile and wave
 * quantization, split-K, the per-tile cost of short K) is held to these rows by
 * tests/check_gemm_measured.c; this program only measures.
 *
 * Each GEMM is y[M,N] = x[M,K] w[N,K]^T, the linear layer's forward: column-major, A = w
 * transposed (the "TN" layout cuBLASLt's FP8 GEMMs require). For each shape and type it asks
 * cuBLASLt's heuristic for up to 8 algorithms (32 MiB workspace, Transformer Engine's size on
 * Hopper), times each with CUDA events after a warm-up (enough calls for 20 ms, at least 5) and
 * writes the heuristic's first choice (what Transformer Engine and PyTorch run) and the best.
 *
 * FP8 accumulation: Transformer Engine runs the forward GEMM with CUBLASLT_MATMUL_DESC_FAST_ACCUM
 * on and the two backward GEMMs with it off (split accumulator: the tensor cores' partial sums are
 * promoted to fp32 every few k-blocks), transformer_engine/pytorch/module/base.py's
 * _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True; both are measured.
 *
 * Shapes file: one "name M N K" per line, '#' comments. Output columns:
 *   type,name,m,n,k,heuristic_s,best_s,algos,heuristic_tflops,best_tflops
 * Exit 77 without a GPU, 1 on a CUDA or cuBLASLt error (reported with the shape), 2 on bad input.
 *
 * With --sustain S NAME it instead runs the heuristic's first algorithm for the shape NAME back to
 * back for S seconds per type, printing the rate of each half-second window (type,name,t_s,tflops):
 * a training step keeps the GPU at its power limit for minutes, and the clock it holds there, not
 * a short burst's, sets the rate a step sees.
 *
 * usage: gemm_sweep [--sustain SECONDS NAME] SHAPES_FILE [OUT.csv] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#define MAX_SHAPES 256
#define WORKSPACE_BYTES ((size_t)32 << 20)
#define TARGET_S 0.02

typedef struct shape {
    char name[48];
    uint64_t m, n, k;
} shape;

typedef enum { T_BF16, T_FP8_FAST, T_FP8_SPLIT, T_COUNT } gemm_type;
static const char *type_name[T_COUNT] = {"bf16", "fp8_fast_accum", "fp8_split_accum"};

typedef struct timing {
    double heuristic_s, best_s; /* seconds per call; INFINITY when no algorithm ran */
    int algos;
} timing;

static int read_shapes(const char *path, shape *out, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 2;
    }
    char line[256];
    int lineno = 0;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        shape s;
        char extra[8];
        int got = sscanf(line, "%47s %lu %lu %lu %7s", s.name, &s.m, &s.n, &s.k, extra);
        if (got <= 0)
            continue;
        if (got != 4 || s.m == 0 || s.n == 0 || s.k == 0 || s.k % 16 != 0 || s.n % 16 != 0) {
            fprintf(stderr, "%s:%d: expected 'name M N K' with N and K multiples of 16 (FP8's TN layout)\n", path,
                    lineno);
            fclose(f);
            return 2;
        }
        if (*n == MAX_SHAPES) {
            fprintf(stderr, "%s:%d: more than %d shapes\n", path, lineno, MAX_SHAPES);
            fclose(f);
            return 2;
        }
        out[(*n)++] = s;
    }
    fclose(f);
    return 0;
}

/* Random bytes that are finite both as bf16 pairs (high byte 0x3f or 0xbf: |v| in [0.5, 2)) and
 * as E4M3 (no 0x7f or 0xff, its NaNs), copied to the device in 64 MiB pieces. */
static int fill_random(void *dev, size_t bytes)
{
    size_t piece = (size_t)64 << 20;
    unsigned char *h = malloc(piece);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    if (!h)
        return 1;
    for (size_t off = 0; off < bytes; off += piece) {
        size_t len = bytes - off < piece ? bytes - off : piece;
        for (size_t i = 0; i < len; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            unsigned char b = (unsigned char)(r >> 24);
            if (i % 2) /* the high byte of a little-endian bf16 */
                b = (b & 0x80) | 0x3f;
            else if ((b & 0x7f) == 0x7f)
                b ^= 1;
            h[i] = b;
        }
        if (cudaMemcpy((char *)dev + off, h, len, cudaMemcpyHostToDevice) != cudaSuccess) {
            fprintf(stderr, "gemm_sweep: copy of the operands: %s\n", cudaGetErrorString(cudaGetLastError()));
            free(h);
            return 1;
        }
    }
    free(h);
    return 0;
}

/* One GEMM's cuBLASLt descriptors and the heuristic's algorithms for it. */
typedef struct gemm_desc {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res[8];
    int found;
} gemm_desc;

static void desc_close(gemm_desc *d)
{
    if (d->pref)
        cublasLtMatmulPreferenceDestroy(d->pref);
    if (d->lc)
        cublasLtMatrixLayoutDestroy(d->lc);
    if (d->lb)
        cublasLtMatrixLayoutDestroy(d->lb);
    if (d->la)
        cublasLtMatrixLayoutDestroy(d->la);
    if (d->op)
        cublasLtMatmulDescDestroy(d->op);
    memset(d, 0, sizeof *d);
}

/* Sets up y = x w^T of shape s in type t and asks the heuristic for up to `want` (<= 8)
 * algorithms; 0, or 1 with the reason on stderr (d closed). */
static int desc_open(gemm_desc *d, cublasLtHandle_t lt, const shape *s, gemm_type t, int want)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cudaDataType_t in = t == T_BF16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
    int8_t fast = t == T_FP8_FAST;
    uint64_t wsb = WORKSPACE_BYTES;
    memset(d, 0, sizeof *d);
    if (cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
        (t != T_BF16 && cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) !=
                            CUBLAS_STATUS_SUCCESS) ||
        cublasLtMatrixLayoutCreate(&d->la, in, s->k, s->n, (int64_t)s->k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&d->lb, in, s->k, s->m, (int64_t)s->k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&d->lc, CUDA_R_16BF, s->n, s->m, (int64_t)s->n) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceCreate(&d->pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) !=
            CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm_sweep: %s %s: cuBLASLt descriptor setup failed\n", type_name[t], s->name);
        desc_close(d);
        return 1;
    }
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, d->op, d->la, d->lb, d->lc, d->lc, d->pref, want, d->res,
                                                       &d->found);
    if (hs != CUBLAS_STATUS_SUCCESS || d->found == 0) {
        fprintf(stderr, "gemm_sweep: %s %s (m=%lu n=%lu k=%lu): no algorithm (%s)\n", type_name[t], s->name, s->m,
                s->n, s->k, cublasLtGetStatusString(hs));
        desc_close(d);
        return 1;
    }
    return 0;
}

/* Seconds for `iters` back-to-back calls of algorithm a on d, timed with e0, e1 on st; a negative
 * value (the error on stderr) when the stream failed. */
static double timed_calls(cublasLtHandle_t lt, cudaStream_t st, void *ws, const gemm_desc *d,
                          const cublasLtMatmulAlgo_t *a, void *w, void *x, void *y, int iters, cudaEvent_t e0,
                          cudaEvent_t e1)
{
    float alpha = 1.0f, beta = 0.0f, ms = 0.0f;
    cudaEventRecord(e0, st);
    for (int it = 0; it < iters; it++)
        cublasLtMatmul(lt, d->op, &alpha, w, d->la, x, d->lb, &beta, y, d->lc, y, d->lc, a, ws, WORKSPACE_BYTES, st);
    cudaEventRecord(e1, st);
    if (cudaEventSynchronize(e1) != cudaSuccess) {
        fprintf(stderr, "gemm_sweep: %s\n", cudaGetErrorString(cudaGetLastError()));
        return -1.0;
    }
    cudaEventElapsedTime(&ms, e0, e1);
    return ms / 1e3;
}

/* Times one GEMM of one type; returns 0, or 1 with the failing call on stderr. */
static int time_gemm(cublasLtHandle_t lt, cudaStream_t st, void *ws, const shape *s, gemm_type t, void *w, void *x,
                     void *y, timing *out)
{
    gemm_desc d;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 1;
    out->heuristic_s = out->best_s = INFINITY;
    out->algos = 0;
    if (desc_open(&d, lt, s, t, 8))
        return 1;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        goto out;
    float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < d.found; i++) {
        const cublasLtMatmulAlgo_t *a = &d.res[i].algo;
        if (cublasLtMatmul(lt, d.op, &alpha, w, d.la, x, d.lb, &beta, y, d.lc, y, d.lc, a, ws, WORKSPACE_BYTES, st) !=
            CUBLAS_STATUS_SUCCESS)
            continue;
        /* a first pass of 3 calls sizes the second: TARGET_S of calls, at least 5 */
        double per = timed_calls(lt, st, ws, &d, a, w, x, y, 3, e0, e1) / 3.0;
        int iters = per > 0.0 ? (int)ceil(TARGET_S / per) : 200;
        iters = iters < 5 ? 5 : iters > 200 ? 200 : iters;
        double total = per < 0.0 ? per : timed_calls(lt, st, ws, &d, a, w, x, y, iters, e0, e1);
        if (total < 0.0) {
            fprintf(stderr, "gemm_sweep: %s %s: the stream failed\n", type_name[t], s->name);
            goto out;
        }
        double sec = total / iters;
        if (i == 0)
            out->heuristic_s = sec;
        if (sec < out->best_s)
            out->best_s = sec;
        out->algos++;
    }
    rc = out->algos > 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "gemm_sweep: %s %s: no algorithm ran\n", type_name[t], s->name);
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    desc_close(&d);
    return rc;
}

/* Runs the heuristic's first algorithm for s back to back for `seconds`, one CSV row per window. */
static int sustain(cublasLtHandle_t lt, cudaStream_t st, void *ws, const shape *s, gemm_type t, void *w, void *x,
                   void *y, double seconds, FILE *csv)
{
    gemm_desc d;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 1;
    if (desc_open(&d, lt, s, t, 1))
        return 1;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        goto out;
    double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k, done = 0.0;
    int iters = 5;
    while (done < seconds) {
        double sec = timed_calls(lt, st, ws, &d, &d.res[0].algo, w, x, y, iters, e0, e1);
        if (sec < 0.0) {
            fprintf(stderr, "gemm_sweep: --sustain %s: the stream failed\n", s->name);
            goto out;
        }
        if (done > 0.0 || sec >= 0.4) /* the first, sizing window is not reported unless full */
            fprintf(csv, "%s,%s,%.2f,%.1f\n", type_name[t], s->name, done + sec, flop * iters / sec / 1e12);
        done += sec;
        iters = sec > 0.0 ? (int)ceil(iters * 0.5 / sec) : iters * 2;
        if (iters < 1)
            iters = 1;
    }
    fflush(csv);
    rc = 0;
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    desc_close(&d);
    return rc;
}

int main(int argc, char **argv)
{
    double sustain_s = 0.0;
    const char *sustain_name = NULL;
    if (argc >= 4 && strcmp(argv[1], "--sustain") == 0) {
        char *end;
        sustain_s = strtod(argv[2], &end);
        if (*end || !(sustain_s > 0.0 && sustain_s <= 600.0)) {
            fprintf(stderr, "gemm_sweep: --sustain: found '%s', expected seconds in (0, 600]\n", argv[2]);
            return 2;
        }
        sustain_name = argv[3];
        argv += 3;
        argc -= 3;
    }
    if (argc < 2 || argc > 3 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: gemm_sweep [--sustain SECONDS NAME] SHAPES_FILE [OUT.csv]\n");
        return argc == 2 ? 0 : 2;
    }
    static shape shapes[MAX_SHAPES];
    int n = 0, rc = read_shapes(argv[1], shapes, &n);
    if (rc)
        return rc;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "gemm_sweep: no GPU\n");
        return 77;
    }
    FILE *csv = argc == 3 ? fopen(argv[2], "w") : stdout;
    if (!csv) {
        perror(argv[2]);
        return 2;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    fprintf(stderr, "gemm_sweep: %s, %d SMs, %d shapes\n", prop.name, prop.multiProcessorCount, n);
    uint64_t maxa = 0, maxb = 0, maxc = 0;
    for (int i = 0; i < n; i++) {
        if (shapes[i].n * shapes[i].k > maxa)
            maxa = shapes[i].n * shapes[i].k;
        if (shapes[i].m * shapes[i].k > maxb)
            maxb = shapes[i].m * shapes[i].k;
        if (shapes[i].m * shapes[i].n > maxc)
            maxc = shapes[i].m * shapes[i].n;
    }
    cublasLtHandle_t lt = NULL;
    cudaStream_t st = NULL;
    void *w = NULL, *x = NULL, *y = NULL, *ws = NULL;
    rc = 1;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS || cudaStreamCreate(&st) != cudaSuccess ||
        cudaMalloc(&w, maxa * 2) != cudaSuccess || cudaMalloc(&x, maxb * 2) != cudaSuccess ||
        cudaMalloc(&y, maxc * 2) != cudaSuccess || cudaMalloc(&ws, WORKSPACE_BYTES) != cudaSuccess) {
        fprintf(stderr, "gemm_sweep: setup: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    /* random operands, as the MAMF measurements use: under the power cap the clock, and with it
     * the rate, depends on how many bits toggle, so constant inputs would run fast */
    if (fill_random(w, maxa * 2) || fill_random(x, maxb * 2))
        goto out;
    if (sustain_name) {
        int i = 0;
        while (i < n && strcmp(shapes[i].name, sustain_name) != 0)
            i++;
        if (i == n) {
            fprintf(stderr, "gemm_sweep: --sustain: no shape '%s' in %s\n", sustain_name, argv[1]);
            rc = 2;
            goto out;
        }
        fprintf(csv, "type,name,t_s,tflops\n");
        rc = 0;
        for (int t = 0; t < T_COUNT; t++)
            if (sustain(lt, st, ws, &shapes[i], (gemm_type)t, w, x, y, sustain_s, csv))
                rc = 1;
        goto out;
    }
    fprintf(csv, "type,name,m,n,k,heuristic_s,best_s,algos,heuristic_tflops,best_tflops\n");
    rc = 0;
    for (int i = 0; i < n; i++) {
        const shape *s = &shapes[i];
        double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
        for (int t = 0; t < T_COUNT; t++) {
            timing tm;
            if (time_gemm(lt, st, ws, s, (gemm_type)t, w, x, y, &tm)) {
                rc = 1;
                continue;
            }
            fprintf(csv, "%s,%s,%lu,%lu,%lu,%.6e,%.6e,%d,%.1f,%.1f\n", type_name[t], s->name, s->m, s->n, s->k,
                    tm.heuristic_s, tm.best_s, tm.algos, flop / tm.heuristic_s / 1e12, flop / tm.best_s / 1e12);
            fflush(csv);
        }
    }
out:
    if (ws)
        cudaFree(ws);
    if (y)
        cudaFree(y);
    if (x)
        cudaFree(x);
    if (w)
        cudaFree(w);
    if (st)
        cudaStreamDestroy(st);
    if (lt)
        cublasLtDestroy(lt);
    if (csv != stdout)
        fclose(csv);
    return rc;
}
