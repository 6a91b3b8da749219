/* Hardware presets: GPUs, intra-node fabrics, NICs / inter-node fabrics, and named clusters.
 * Every preset number cites its row in shared/reference/hardware-and-models.md in the table.
 *
 * Ownership: all structs are plain values; preset tables are static const and callers copy
 * them into a gs_cluster, which a scenario may then override field by field. */
#ifndef GS_HARDWARE_H
#define GS_HARDWARE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"
#include "engine/strategy.h"

#define GS_HW_NAME_BYTES 48

typedef struct gs_gpu {
    char name[GS_HW_NAME_BYTES];
    double peak_flops_bf16;  /* dense FLOP/s; 0 when the dtype is not supported (V100) */
    double peak_flops_fp16;  /* dense FLOP/s */
    double peak_flops_fp32;  /* FLOP/s used for fp32 training: TF32 tensor core where present */
    double gemm_efficiency;  /* achievable fraction of peak on large well-shaped GEMMs (MAMF/spec) */
    double peak_flops_fp8;   /* dense FP8 (E4M3/E5M2) tensor-core FLOP/s; 0: no FP8 tensor cores
                                (before Hopper) */
    double gemm_efficiency_fp8; /* FP8 MAMF / FP8 spec (the same measurement at FP8) */
    uint64_t hbm_bytes;      /* bytes of device memory (vendor GB = 1e9 B) */
    double hbm_bw;           /* bytes/s */
    uint32_t sms;            /* streaming multiprocessors */
    uint32_t compute_capability; /* 70, 80, 90, 100 */
    double tdp_w;            /* board power the peaks are specified at, watts */
    double power_w;          /* the power cap it runs under, watts (0: tdp_w) */
    const char *source;      /* reference row */
} gs_gpu;

typedef enum gs_link_kind {
    GS_LINK_NVLINK,   /* NVLink behind NVSwitch (all-to-all within the node) */
    GS_LINK_PCIE,     /* PCIe (GPU to GPU through switches / root complex) */
    GS_LINK_IB,       /* InfiniBand */
    GS_LINK_ROCE,     /* RDMA over converged Ethernet */
    GS_LINK_ETHERNET  /* plain TCP Ethernet (NCCL socket transport) */
} gs_link_kind;

/* Intra-node fabric, per GPU. */
typedef struct gs_fabric {
    char name[GS_HW_NAME_BYTES];
    gs_link_kind kind;       /* GS_LINK_NVLINK or GS_LINK_PCIE */
    double line_bw;          /* bytes/s per GPU per direction, line rate */
    double nccl_bw;          /* bytes/s per GPU per direction as NCCL's topology assigns it */
    double latency_s;        /* seconds per hop, NCCL Simple-protocol ring hw latency */
    int nvswitch;            /* 1: all-to-all through NVSwitch */
    int nvls;                /* 1: NVLink SHARP (in-switch reduction) available */
    int mesh;                /* G > 1: no switch, each GPU linked directly to the G - 1 others
                                of its board, its links split evenly among them (HGX 4-GPU
                                boards: 4): a group of k of them reaches (k - 1) / (G - 1) of
                                line_bw / nccl_bw per GPU, one peer 1 / (G - 1); 0: switched */
    const char *source;
} gs_fabric;

/* Scale-out NIC / inter-node fabric. */
typedef struct gs_nic {
    char name[GS_HW_NAME_BYTES];
    gs_link_kind kind;       /* IB, RoCE or Ethernet */
    double gbps;             /* line rate, Gb/s */
    double bw;               /* bytes/s per direction achievable (NCCL-measured where known) */
    double latency_s;        /* seconds per inter-node step (NCCL NET hw latency, Simple) */
    const char *source;
} gs_nic;

/* The node's host CPU, which issues every kernel the training framework launches (the sim's host
 * thread, sim/compute.h host_kernel_s): x86 (the DGX nodes' Xeons) or Arm Neoverse V2 (Grace, in
 * GH200 and GB200 systems), whose per-op issuing is slower. */
typedef enum gs_host_cpu { GS_HOST_X86 = 0, GS_HOST_GRACE, GS_HOST_CPU_COUNT } gs_host_cpu;

typedef struct gs_cluster {
    char name[GS_HW_NAME_BYTES];
    gs_gpu gpu;
    gs_fabric intra;
    gs_nic nic;
    uint64_t gpus_per_node;
    uint64_t nics_per_node;
    uint64_t nodes;
    int rail_optimized;      /* 1: NIC k of every node on leaf switch k */
    double oversubscription; /* >= 1: leaf-to-spine oversubscription ratio */
    int host_cpu;            /* gs_host_cpu */
    const char *source;
} gs_cluster;

size_t gs_gpu_preset_count(void);
const gs_gpu *gs_gpu_preset_at(size_t i);
const gs_gpu *gs_gpu_preset_find(const char *name);

size_t gs_fabric_preset_count(void);
const gs_fabric *gs_fabric_preset_at(size_t i);
const gs_fabric *gs_fabric_preset_find(const char *name);

size_t gs_nic_preset_count(void);
const gs_nic *gs_nic_preset_at(size_t i);
const gs_nic *gs_nic_preset_find(const char *name);

size_t gs_cluster_preset_count(void);
const gs_cluster *gs_cluster_preset_at(size_t i);
const gs_cluster *gs_cluster_preset_find(const char *name);

/* The closest preset name in that table (gs_name_closer's ranking); NULL only for a NULL name. */
const char *gs_gpu_preset_nearest(const char *name);
const char *gs_fabric_preset_nearest(const char *name);
const char *gs_nic_preset_nearest(const char *name);
const char *gs_cluster_preset_nearest(const char *name);

/* Peak dense FLOP/s of the GPU for the precision (0 if unsupported). */
double gs_gpu_peak_flops(const gs_gpu *g, gs_precision p);

/* The tensor and vector throughput a GPU keeps under a power cap below its TDP, as a fraction of
 * its specified peaks: (power_w / tdp_w)^(1/3), from dynamic power P = C V^2 f with the voltage
 * following the clock in the DVFS range (P ~ f^3); 1 at or without a cap. HBM bandwidth does
 * not follow the SM clock and keeps its figure. */
double gs_gpu_clock_factor(const gs_gpu *g);

/* Total GPUs = nodes x gpus_per_node (overflow -> GS_ERR_OVERFLOW); checks positive counts and
 * bandwidths. */
gs_status gs_cluster_validate(const gs_cluster *c, gs_error *err);
uint64_t gs_cluster_gpus(const gs_cluster *c);

const char *gs_link_kind_name(gs_link_kind k);
const char *gs_host_cpu_name(gs_host_cpu h);              /* "x86", "grace" */
int gs_host_cpu_parse(const char *s, gs_host_cpu *out); /* 0 ok, -1 unknown */

/* Case-insensitive Levenshtein distance, shared by the nearest-name helpers. Strings longer
 * than 255 bytes are compared on their first 255 bytes plus the difference of the rest's
 * lengths (names are short; this keeps the function allocation-free). */
size_t gs_edit_distance(const char *a, const char *b);
/* The same when it is at most max; otherwise max + 1 (computed only as far as that is known). */
size_t gs_edit_distance_max(const char *a, const char *b, size_t max);

/* The ranking every *_preset_nearest uses: nonzero when `candidate` is a better correction for
 * the typed `name` than `best` (NULL: no best yet). Score = edit distance, lowered to at most 1
 * when `name` is a prefix of `candidate` ("h100" -> "h100-sxm" rather than "h200"); equal
 * scores go to the longer common prefix, then to the earlier candidate. */
int gs_name_closer(const char *name, const char *candidate, const char *best);

#endif
