/* The measured side of sim/contention.c: what a kernel loses while a communication kernel shares
 * its GPU. An NCCL collective runs as C CTAs (one a channel) that stay resident for as long as
 * it moves data, spin while they wait for their peers, and read and write HBM at a rate the links
 * set. On one GPU this program plays such a kernel (`paced_copy`: C CTAs of 512 threads, each
 * copying 64 KiB pieces at a paced rate, or spinning) beside a victim run back to back for a
 * window at the GPU's power cap, and prints per window:
 *
 *   victim,ctas,target_hbm_gbs,copy_hbm_gbs,victim_rate,alone_rate,factor,sm_mhz,power_w
 *
 * victim: bf16 (cuBLASLt's heuristic GEMM for Llama 3 8B's gate+up, 8192 x 28672 x 4096, TFLOP/s),
 * fp8 (the same GEMM in E4M3 with fast accumulation) or stream (a triad over 3 x 1 GiB of fp32,
 * every SM, HBM GB/s); copy_hbm_gbs: the HBM bytes (read + write) the copy moved per second;
 * alone_rate: the victim's rate in the windows without the copy just before and after (the clock
 * drifts with the GPU's temperature); factor = alone_rate / victim_rate, what the model's
 * gs_compute_overlap_factor predicts; sm_mhz and power_w: NVML's mean over the window (empty when
 * libnvidia-ml cannot be opened).
 *
 * A copy CTA holds 48 KiB of shared memory, as NCCL's kernels hold their work and FIFO state: no
 * GEMM CTA (over 200 KiB of shared memory on Hopper) fits beside it on its SM.
 *
 * usage: contention [--window S] [--quick] [OUT.csv]
 * Exit 77 without a GPU, 1 on a CUDA or cuBLASLt error (reported). */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define COPY_THREADS 512
#define COPY_SMEM_BYTES (48 << 10)
#define PIECE_BYTES (64 << 10)
#define WORKSPACE_BYTES ((size_t)32 << 20)

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "contention: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static __device__ __forceinline__ uint64_t now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* C CTAs copy src to dst (each its own slice, `slice_vec` int4 a CTA), a 64 KiB piece at a time
 * (8 int4 a thread, loaded before any is stored, as NCCL's primitives unroll), no faster than
 * `bytes_per_ns` copied bytes per CTA (0: only spin, as a channel waiting for its peers spins on
 * a flag in device memory; < 0: unpaced), until *stop (device memory) is set. Each CTA adds its
 * copied bytes to *moved, counts itself into *started (host memory, read once) on entry. */
#define UNROLL 8
__global__ void paced_copy(const int4 *src, int4 *dst, size_t slice_vec, double bytes_per_ns, volatile int *stop,
                           unsigned long long *moved, unsigned int *started, unsigned long long *span_ns)
{
    extern __shared__ int4 hold[]; /* reserved, as NCCL's work and FIFO state are */
    __shared__ int go;
    const size_t piece_vec = PIECE_BYTES / sizeof(int4);
    const int4 *s = src + (size_t)blockIdx.x * slice_vec;
    int4 *d = dst + (size_t)blockIdx.x * slice_vec;
    uint64_t t0 = now_ns(), done = 0;
    size_t off = 0;
    if (threadIdx.x == 0) {
        hold[0] = make_int4(0, 0, 0, 0);
        atomicAdd(started, 1u);
    }
    for (;;) {
        if (threadIdx.x == 0) {
            uint64_t t = now_ns();
            int g = bytes_per_ns >= 0.0 && (double)done >= bytes_per_ns * (double)(t - t0) ? 0 : 1;
            go = *stop ? -1 : g;
        }
        __syncthreads();
        int g = go;
        __syncthreads();
        if (g < 0)
            break;
        if (g == 0)
            continue;
        int4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            r[u] = s[off + threadIdx.x + (size_t)u * COPY_THREADS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            d[off + threadIdx.x + (size_t)u * COPY_THREADS] = r[u];
        off = off + 2 * piece_vec <= slice_vec ? off + piece_vec : 0;
        done += PIECE_BYTES;
    }
    if (threadIdx.x == 0) {
        atomicAdd(moved, (unsigned long long)done);
        atomicMax(span_ns, (unsigned long long)(now_ns() - t0));
    }
}

/* a[i] = b[i] + 0.5 c[i]: STREAM's triad, 12 bytes of HBM an element, four elements a thread over
 * a grid that covers the array (as PyTorch's vectorized elementwise kernels launch, not a
 * persistent grid whose last wave the copy's SMs would stretch). */
__global__ void triad(float4 *a, const float4 *b, const float4 *c, size_t n4)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + 0.5f * y.x, x.y + 0.5f * y.y, x.z + 0.5f * y.z, x.w + 0.5f * y.w);
    }
}

/* ---- NVML through dlopen: power and SM clock, when the driver's library is there ---------------- */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_uint_fn)(void *, unsigned int *);
typedef int (*nvml_clock_fn)(void *, int, unsigned int *);
static struct {
    void *dev;
    nvml_uint_fn power_mw;
    nvml_clock_fn clock_mhz;
} nvml;

static void nvml_open(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib)
        return;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml.power_mw = (nvml_uint_fn)dlsym(lib, "nvmlDeviceGetPowerUsage");
    nvml.clock_mhz = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    if (!init || !handle || !nvml.power_mw || !nvml.clock_mhz || init() != 0 || handle(0, &nvml.dev) != 0)
        nvml.dev = NULL;
}

typedef struct sampler {
    double power_w, mhz;
    int n;
} sampler;

static void sample(sampler *s)
{
    unsigned int mw = 0, mhz = 0;
    if (!nvml.dev || nvml.power_mw(nvml.dev, &mw) != 0 || nvml.clock_mhz(nvml.dev, 1 /* NVML_CLOCK_SM */, &mhz) != 0)
        return;
    s->power_w += mw / 1e3;
    s->mhz += mhz;
    s->n++;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- victims ------------------------------------------------------------------------------------ */
typedef enum { V_BF16, V_FP8, V_STREAM, V_COUNT } victim;
static const char *victim_name[V_COUNT] = {"bf16", "fp8", "stream"};

typedef struct gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulHeuristicResult_t res;
    void *ws;
} gemm;

typedef struct bench {
    gemm g[2];       /* bf16, fp8 */
    void *w, *x, *y; /* GEMM operands (sized for bf16) */
    float *a, *b, *c;
    size_t n_triad;
    int sms;
    cudaStream_t vs, cs; /* the victim's and the copy's streams */
} bench;

static const uint64_t GM = 8192, GN = 28672, GK = 4096;

static int gemm_open(gemm *g, int fp8)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    int8_t fast = 1;
    uint64_t wsb = WORKSPACE_BYTES;
    cublasLtMatmulPreference_t pref;
    int found = 0;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
        (fp8 && cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) !=
                    CUBLAS_STATUS_SUCCESS) ||
        cublasLtMatrixLayoutCreate(&g->la, in, GK, GN, (int64_t)GK) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&g->lb, in, GK, GM, (int64_t)GK) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, GN, GM, (int64_t)GN) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &g->res, &found) !=
            CUBLAS_STATUS_SUCCESS ||
        found < 1) {
        fprintf(stderr, "contention: cuBLASLt setup of the %s GEMM failed\n", fp8 ? "fp8" : "bf16");
        return 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    CK(cudaMalloc(&g->ws, WORKSPACE_BYTES));
    return 0;
}

/* Launches `n` victim calls on b->vs; 0, or 1 with the error. */
static int victim_launch(bench *b, victim v, int n)
{
    float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < n; i++) {
        if (v == V_STREAM) {
            size_t n4 = b->n_triad / 4;
            triad<<<(unsigned int)((n4 + 255) / 256), 256, 0, b->vs>>>((float4 *)b->a, (const float4 *)b->b,
                                                                     (const float4 *)b->c, n4);
            continue;
        }
        gemm *g = &b->g[v == V_FP8];
        if (cublasLtMatmul(g->lt, g->op, &alpha, b->w, g->la, b->x, g->lb, &beta, b->y, g->lc, b->y, g->lc,
                           &g->res.algo, g->ws, WORKSPACE_BYTES, b->vs) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "contention: cublasLtMatmul failed\n");
            return 1;
        }
    }
    CK(cudaGetLastError());
    return 0;
}

static double victim_work(const bench *b, victim v) /* FLOP (GEMMs) or bytes (triad) a call */
{
    return v == V_STREAM ? 12.0 * (double)b->n_triad : 2.0 * (double)GM * (double)GN * (double)GK;
}

/* ---- one window ---------------------------------------------------------------------------------- */
typedef struct copier {
    int4 *src, *dst;
    size_t slice_bytes_total;
    int *stop_d; /* device memory: a spinning CTA polls L2, as NCCL's flags are polled */
    int *one_h;  /* pinned 1 and 0, copied into stop_d from the control stream */
    cudaStream_t ctl;
    unsigned int *started_h, *started_d;
    unsigned long long *moved, *span_ns; /* device */
} copier;

typedef struct window {
    double rate, copy_hbm_gbs, mhz, power_w;
} window;

/* Runs the victim back to back for `seconds` (after a quarter second to settle) beside `ctas` copy
 * CTAs moving `target_hbm_gbs` of HBM traffic (0: spinning; < 0: unpaced; ctas 0: alone). */
static int run_window(bench *b, copier *cp, victim v, int ctas, double target_hbm_gbs, double seconds,
                      double per_call_s, window *out)
{
    cudaEvent_t e0, e1;
    memset(out, 0, sizeof *out);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    if (ctas > 0) {
        *cp->started_h = 0;
        CK(cudaMemsetAsync(cp->moved, 0, 2 * sizeof(unsigned long long), b->cs));
        CK(cudaMemsetAsync(cp->stop_d, 0, sizeof(int), b->cs));
        size_t slice_vec = cp->slice_bytes_total / (size_t)ctas / sizeof(int4);
        double per_cta = target_hbm_gbs < 0.0 ? -1.0 : target_hbm_gbs / 2.0 / ctas; /* copied bytes a ns */
        paced_copy<<<ctas, COPY_THREADS, COPY_SMEM_BYTES, b->cs>>>(cp->src, cp->dst, slice_vec, per_cta, cp->stop_d,
                                                                   cp->moved, cp->started_d, cp->span_ns);
        CK(cudaGetLastError());
        double t0 = wall_s();
        while (*(volatile unsigned int *)cp->started_h < (unsigned int)ctas) {
            if (wall_s() - t0 > 5.0) {
                fprintf(stderr, "contention: %d copy CTAs did not start in 5 s\n", ctas);
                return 1;
            }
        }
    }
    int settle = (int)ceil(0.25 / per_call_s), n = (int)ceil(seconds / per_call_s);
    if (victim_launch(b, v, settle))
        return 1;
    CK(cudaEventRecord(e0, b->vs));
    if (victim_launch(b, v, n))
        return 1;
    CK(cudaEventRecord(e1, b->vs));
    sampler s = {0, 0, 0};
    double t0 = wall_s();
    for (;;) {
        cudaError_t q = cudaEventQuery(e1);
        if (q == cudaSuccess)
            break;
        if (q != cudaErrorNotReady)
            CK(q);
        if (cudaEventQuery(e0) == cudaSuccess)
            sample(&s);
        if (wall_s() - t0 > 20.0 * (seconds + 0.25) + 10.0) {
            fprintf(stderr, "contention: the %s victim did not finish in %.0f s\n", victim_name[v], wall_s() - t0);
            return 1;
        }
        usleep(20000);
    }
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    out->rate = victim_work(b, v) * n / (ms / 1e3) / (v == V_STREAM ? 1e9 : 1e12);
    if (s.n) {
        out->power_w = s.power_w / s.n;
        out->mhz = s.mhz / s.n;
    }
    if (ctas > 0) {
        unsigned long long mv[2];
        CK(cudaMemcpyAsync(cp->stop_d, cp->one_h, sizeof(int), cudaMemcpyHostToDevice, cp->ctl));
        CK(cudaStreamSynchronize(cp->ctl));
        double t1 = wall_s();
        while (cudaStreamQuery(b->cs) == cudaErrorNotReady) {
            if (wall_s() - t1 > 5.0) {
                fprintf(stderr, "contention: the copy did not see its stop flag in 5 s\n");
                return 1;
            }
            usleep(1000);
        }
        CK(cudaStreamSynchronize(b->cs));
        CK(cudaMemcpy(mv, cp->moved, sizeof mv, cudaMemcpyDeviceToHost));
        out->copy_hbm_gbs = mv[1] ? 2.0 * (double)mv[0] / (double)mv[1] : 0.0;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 0;
}

/* Random bytes finite as bf16 (high byte 0x3f or 0xbf: |v| in [0.5, 2)) and as E4M3 (no 0x7f or
 * 0xff), and finite floats for the triad. */
__global__ void fill(unsigned char *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = (i + 1) * 0x9e3779b97f4a7c15ull;
        r ^= r >> 29, r *= 0xbf58476d1ce4e5b9ull, r ^= r >> 32;
        unsigned char v = (unsigned char)r;
        p[i] = (i & 1) ? (unsigned char)((v & 0x80) | 0x3f) : ((v & 0x7f) == 0x7f ? (unsigned char)(v ^ 1) : v);
    }
}

static int setup(bench *b, copier *cp)
{
    memset(b, 0, sizeof *b);
    memset(cp, 0, sizeof *cp);
    int dev = 0;
    CK(cudaDeviceGetAttribute(&b->sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaStreamCreateWithFlags(&b->vs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b->cs, cudaStreamNonBlocking));
    CK(cudaMalloc(&b->w, GN * GK * 2));
    CK(cudaMalloc(&b->x, GM * GK * 2));
    CK(cudaMalloc(&b->y, GM * GN * 2));
    b->n_triad = (size_t)1 << 28; /* 1 GiB of fp32 an array: well past L2 */
    CK(cudaMalloc(&b->a, b->n_triad * 4));
    CK(cudaMalloc(&b->b, b->n_triad * 4));
    CK(cudaMalloc(&b->c, b->n_triad * 4));
    fill<<<1024, 256>>>((unsigned char *)b->w, GN * GK * 2);
    fill<<<1024, 256>>>((unsigned char *)b->x, GM * GK * 2);
    fill<<<1024, 256>>>((unsigned char *)b->b, b->n_triad * 4);
    fill<<<1024, 256>>>((unsigned char *)b->c, b->n_triad * 4);
    cp->slice_bytes_total = (size_t)1 << 30;
    CK(cudaMalloc(&cp->src, cp->slice_bytes_total));
    CK(cudaMalloc(&cp->dst, cp->slice_bytes_total));
    fill<<<1024, 256>>>((unsigned char *)cp->src, cp->slice_bytes_total);
    CK(cudaFuncSetAttribute(paced_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, COPY_SMEM_BYTES));
    CK(cudaHostAlloc((void **)&cp->started_h, sizeof(unsigned int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&cp->started_d, (void *)cp->started_h, 0));
    CK(cudaMalloc(&cp->stop_d, sizeof(int)));
    CK(cudaHostAlloc((void **)&cp->one_h, sizeof(int), cudaHostAllocDefault));
    *cp->one_h = 1;
    CK(cudaStreamCreateWithFlags(&cp->ctl, cudaStreamNonBlocking));
    CK(cudaMalloc(&cp->moved, 2 * sizeof(unsigned long long)));
    cp->span_ns = cp->moved + 1;
    CK(cudaDeviceSynchronize());
    if (gemm_open(&b->g[0], 0) || gemm_open(&b->g[1], 1))
        return 1;
    return 0;
}

static int per_call(bench *b, victim v, double *s)
{
    cudaEvent_t e0, e1;
    float ms;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    if (victim_launch(b, v, 3))
        return 1;
    CK(cudaEventRecord(e0, b->vs));
    if (victim_launch(b, v, 10))
        return 1;
    CK(cudaEventRecord(e1, b->vs));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    *s = ms / 1e3 / 10.0;
    return 0;
}

static void print_row(FILE *f, victim v, int ctas, double target, const window *w, double alone)
{
    char mhz[16] = "", pw[16] = "";
    if (w->mhz > 0.0) {
        snprintf(mhz, sizeof mhz, "%.0f", w->mhz);
        snprintf(pw, sizeof pw, "%.0f", w->power_w);
    }
    fprintf(f, "%s,%d,%.0f,%.0f,%.1f,%.1f,%.4f,%s,%s\n", victim_name[v], ctas, target, w->copy_hbm_gbs, w->rate, alone,
            alone / w->rate, mhz, pw);
    fflush(f);
}

/* One victim: for each CTA count, an alone window, the paced targets, an alone window after. */
static int sweep(bench *b, copier *cp, FILE *csv, victim v, const int *ctas, int nc, const double *tg, int nt,
                 double seconds)
{
    double pc;
    window w[16], before, after;
    if (per_call(b, v, &pc) || run_window(b, cp, v, 0, 0.0, seconds, pc, &before))
        return 1;
    print_row(csv, v, 0, 0.0, &before, before.rate);
    for (int c = 0; c < nc; c++) {
        for (int t = 0; t < nt; t++)
            if (run_window(b, cp, v, ctas[c], tg[t], seconds, pc, &w[t]))
                return 1;
        if (run_window(b, cp, v, 0, 0.0, seconds, pc, &after))
            return 1;
        double alone = 0.5 * (before.rate + after.rate);
        for (int t = 0; t < nt; t++)
            print_row(csv, v, ctas[c], tg[t], &w[t], alone);
        print_row(csv, v, 0, 0.0, &after, after.rate);
        fprintf(stderr, "contention: %s beside %d CTAs done\n", victim_name[v], ctas[c]);
        before = after;
    }
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = 1.0;
    int quick = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0.0 && seconds <= 60.0)) {
                fprintf(stderr, "contention: --window: found '%s', expected seconds in (0, 60]\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "usage: contention [--window S] [--quick] [OUT.csv]\n");
            return 2;
        } else {
            path = argv[i];
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        fprintf(stderr, "contention: no GPU\n");
        return 77;
    }
    FILE *csv = path ? fopen(path, "w") : stdout;
    if (!csv) {
        perror(path);
        return 2;
    }
    bench b;
    copier cp;
    nvml_open();
    if (setup(&b, &cp))
        return 1;
    fprintf(csv, "victim,ctas,target_hbm_gbs,copy_hbm_gbs,victim_rate,alone_rate,factor,sm_mhz,power_w\n");
    /* to the power cap first: a step holds it for minutes */
    double pc;
    if (per_call(&b, V_BF16, &pc) || victim_launch(&b, V_BF16, (int)ceil((quick ? 1.0 : 3.0) / pc)))
        return 1;
    CK(cudaStreamSynchronize(b.vs));
    static const int ctas_full[] = {8, 16, 32}, ctas_quick[] = {16};
    static const double tg_full[] = {0.0, 250.0, 500.0, 1000.0, 2000.0, -1.0}, tg_quick[] = {0.0, 1000.0, -1.0};
    const int *ctas = quick ? ctas_quick : ctas_full;
    int nc = quick ? 1 : 3, nt = quick ? 3 : 6;
    const double *tg = quick ? tg_quick : tg_full;
    if (sweep(&b, &cp, csv, V_BF16, ctas, nc, tg, nt, seconds) ||
        sweep(&b, &cp, csv, V_STREAM, ctas, nc, tg, nt, seconds) ||
        sweep(&b, &cp, csv, V_FP8, ctas_quick, 1, tg, nt, seconds))
        return 1;
    if (csv != stdout)
        fclose(csv);
    return 0;
}
