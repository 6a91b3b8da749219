/* Hardware presets (GPUs, intra-node fabrics, NICs, clusters), cluster validation and the
 * nearest-name helpers. Every number cites its row in shared/reference/hardware-and-models.md
 * ("ref 1.1 A100 80GB row" = section 1.1, the A100 80GB row). Units: FLOP/s, bytes, bytes/s,
 * seconds; NIC line rates in Gb/s as the field name says. */
#include "engine/hardware.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------- GPUs ----- */

/* Each GPU is a macro so that the cluster table can embed it by value. */

#define GS__GPU_V100(nm, hbm)                                                                 \
    {                                                                                         \
        .name = nm,                                                                           \
        .peak_flops_bf16 = 0.0,      /* ref 1.1 V100 SXM2 row: no BF16 [S] */                  \
        .peak_flops_fp16 = 125e12,   /* ref 1.1 V100 SXM2 row: 125 FP16 tensor [S] */          \
        .peak_flops_fp32 = 15.7e12,  /* ref 1.1 V100 SXM2 row: 15.7 FP32, TF32 n/a [S] */      \
        .gemm_efficiency = 0.752,    /* ref 1.2 V100 SXM2 32GB row: 94.0 / 125 [D] */          \
        .hbm_bytes = hbm,            /* ref 1.1 V100 SXM2 row: 16 or 32 GB HBM2 [S] */         \
        .hbm_bw = 900e9,             /* ref 1.1 V100 SXM2 row: 900 GB/s [S] */                 \
        .sms = 80,                   /* ref 1.1 V100 SXM2 row: 80 SMs [S] */                   \
        .compute_capability = 70,    /* ref 3.1: Volta (< 80) */                               \
        .tdp_w = 300,                /* ref 1.1 V100 SXM2 row: 300 W [S] */                    \
        .source = "ref 1.1 V100 SXM2 row [S]; gemm eff ref 1.2 V100 SXM2 32GB row [D]"        \
    }

#define GS__GPU_A100_SXM(nm, hbm, bw, src)                                                    \
    {                                                                                         \
        .name = nm,                                                                           \
        .peak_flops_bf16 = 312e12,   /* ref 1.1 A100 SXM4 rows: 312 FP16/BF16 dense [S] */     \
        .peak_flops_fp16 = 312e12,                                                            \
        .peak_flops_fp32 = 156e12,   /* ref 1.1 A100 SXM4 rows: TF32 156 [S] */                \
        .gemm_efficiency = 0.869,    /* ref 1.2 A100 SXM row: 271.2 / 312 = 86.9% [S] */       \
        .hbm_bytes = hbm,                                                                     \
        .hbm_bw = bw,                                                                         \
        .sms = 108,                  /* ref 1.1 A100 SXM4 rows: 108 SMs [S] */                 \
        .compute_capability = 80,    /* ref 3.1: Ampere (80-89) */                             \
        .tdp_w = 400,                /* ref 1.1 A100 SXM4 rows: 400 W [S] */                   \
        .source = src                                                                         \
    }

/* ref 1.1 A100 40GB SXM4 row: 40 GB HBM2, 1,555 GB/s [S] */
#define GS__GPU_A100_40G                                                                      \
    GS__GPU_A100_SXM("a100-40g", 40000000000ULL, 1555e9,                                      \
                     "ref 1.1 A100 40GB SXM4 row [S]; gemm eff ref 1.2 A100 SXM row [S]")
/* ref 1.1 A100 80GB SXM4 row: 80 GB HBM2e, 2,039 GB/s [S] */
#define GS__GPU_A100_80G                                                                      \
    GS__GPU_A100_SXM("a100-80g", 80000000000ULL, 2039e9,                                      \
                     "ref 1.1 A100 80GB SXM4 row [S]; gemm eff ref 1.2 A100 SXM row [S]")

#define GS__GPU_A100_PCIE_80G                                                                 \
    {                                                                                         \
        .name = "a100-pcie-80g",                                                              \
        .peak_flops_bf16 = 312e12,   /* ref 1.2 A100 PCIe row: spec 312 [S] */                 \
        .peak_flops_fp16 = 312e12,                                                            \
        .peak_flops_fp32 = 156e12,   /* ref 1.1 A100 rows: TF32 156 [S] */                     \
        .gemm_efficiency = 0.811,    /* ref 1.2 A100 PCIe row: 252.9 / 312 = 81.1% [S] */      \
        .hbm_bytes = 80000000000ULL, /* ref 1.1 A100 80GB row: 80 GB [S] */                    \
        .hbm_bw = 1935e9,            /* ref 1.1 A100 80GB row: PCIe 80GB 1,935 GB/s [S] */     \
        .sms = 108,                  /* ref 1.1 A100 rows: 108 SMs [S] */                      \
        .compute_capability = 80,                                                             \
        .tdp_w = 300,                /* ref 1.1 A100 80GB row: PCIe 80GB 300 W [S] */          \
        .source = "ref 1.1 A100 80GB row (PCIe variant note) [S]; ref 1.2 A100 PCIe row [S]"  \
    }

#define GS__GPU_H100_SXM                                                                      \
    {                                                                                         \
        .name = "h100-sxm",                                                                   \
        .peak_flops_bf16 = 989.4e12, /* ref 1.1 H100 SXM5 row: 989.4 dense [S] */              \
        .peak_flops_fp16 = 989.4e12,                                                          \
        .peak_flops_fp32 = 494.7e12, /* ref 1.1 H100 SXM5 row: TF32 494.7 [S] */               \
        .gemm_efficiency = 0.803,    /* ref 1.2 H100 SXM row: 794.5 / 989 = 80.3% [S] */       \
        .peak_flops_fp8 = 1978.9e12, /* ref 1.1 H100 SXM5 row: FP8 1,978.9 dense [S] */         \
        .gemm_efficiency_fp8 = 0.709, /* ref 1.2 H100 SXM row: FP8 1402.6 / 1979 [S] */        \
        .hbm_bytes = 80000000000ULL, /* ref 1.1 H100 SXM5 row: 80 GB HBM3 [S] */               \
        .hbm_bw = 3.35e12,           /* ref 1.1 H100 SXM5 row: 3.35 TB/s [S] */                \
        .sms = 132,                  /* ref 1.1 H100 SXM5 row: 132 SMs [S] */                  \
        .compute_capability = 90,    /* ref 3.1: Hopper (90-99) */                             \
        .tdp_w = 700,                /* ref 1.1 H100 SXM5 row: 700 W [S] */                    \
        .source = "ref 1.1 H100 SXM5 row [S]; gemm eff ref 1.2 H100 SXM row [S]"              \
    }

#define GS__GPU_H100_PCIE                                                                     \
    {                                                                                         \
        .name = "h100-pcie",                                                                  \
        .peak_flops_bf16 = 756e12,   /* ref 1.1 H100 PCIe row: 756 dense [S] */                \
        .peak_flops_fp16 = 756e12,                                                            \
        .peak_flops_fp32 = 378e12,   /* ref 1.1 H100 PCIe row: TF32 378 [S] */                 \
        .gemm_efficiency = 0.66,     /* ref 1.2 H100 PCIe row: 499.5 / 756 = 66% [D] */        \
        .peak_flops_fp8 = 1513e12,   /* ref 1.1 H100 PCIe row: FP8 1,513 dense [S] */          \
        /* no FP8 MAMF measured: the SXM part's FP8/BF16 ratio (0.709 / 0.803) applied to the \
         * PCIe part's BF16 0.66 [U] */                                                       \
        .gemm_efficiency_fp8 = 0.583,                                                         \
        .hbm_bytes = 80000000000ULL, /* ref 1.1 H100 PCIe row: 80 GB HBM2e [S] */              \
        .hbm_bw = 2.0e12,            /* ref 1.1 H100 PCIe row: 2.0 TB/s [S] */                 \
        .sms = 114,                  /* ref 1.1 H100 PCIe row: 114 SMs [S] */                  \
        .compute_capability = 90,                                                             \
        .tdp_w = 350,                /* ref 1.1 H100 PCIe row: 300-350 W [S] */                \
        .source = "ref 1.1 H100 PCIe row [S]; gemm eff ref 1.2 H100 PCIe row [D]"             \
    }

#define GS__GPU_H200                                                                          \
    {                                                                                         \
        .name = "h200",                                                                       \
        .peak_flops_bf16 = 989e12,    /* ref 1.1 H200 SXM row: 989 [S] */                      \
        .peak_flops_fp16 = 989e12,                                                            \
        .peak_flops_fp32 = 494.5e12,  /* ref 1.1 H200 SXM row: TF32 494.5 [S] */               \
        .gemm_efficiency = 0.803,     /* ref 1.2 "H100 SXM (H200 same)" row: 80.3% [S] */      \
        .peak_flops_fp8 = 1979e12,    /* ref 1.1 H200 SXM row: FP8 1,979 [S] */                \
        .gemm_efficiency_fp8 = 0.734, /* ref 1.2 H200 SXM row: FP8 1453.4 / 1979 [S] */         \
        .hbm_bytes = 141000000000ULL, /* ref 1.1 H200 SXM row: 141 GB HBM3e [S] */             \
        .hbm_bw = 4.8e12,             /* ref 1.1 H200 SXM row: 4.8 TB/s [S] */                 \
        .sms = 132,                   /* ref 1.1 H200 SXM row: 132 [S] */                      \
        .compute_capability = 90,                                                             \
        .tdp_w = 700,                 /* ref 1.1 H200 SXM row: 700 W [S] */                    \
        .source = "ref 1.1 H200 SXM row [S]; gemm eff ref 1.2 H100 SXM (H200 same) row [S]"   \
    }

#define GS__GPU_B200                                                                          \
    {                                                                                         \
        .name = "b200",                                                                       \
        .peak_flops_bf16 = 2250e12,   /* ref 1.1 B200 row: 2,250 dense [S] */                  \
        .peak_flops_fp16 = 2250e12,                                                           \
        .peak_flops_fp32 = 1125e12,   /* ref 1.1 B200 row: TF32 1,125 (DGX B200 sheet) [S] */  \
        .gemm_efficiency = 0.776,     /* ref 1.2 B200 SXM row: 1745 / 2250 = 77.6% [S] */      \
        .peak_flops_fp8 = 4500e12,    /* ref 1.1 B200 row: FP8 4,500 [S] */                    \
        .gemm_efficiency_fp8 = 0.763, /* ref 1.2 B200 SXM row: FP8 3432.5 / 4500 [S] */         \
        .hbm_bytes = 180000000000ULL, /* ref 1.1 B200 row: 180 GB usable [S] */                \
        .hbm_bw = 8.0e12,             /* ref 1.1 B200 row: 8.0 TB/s [S] */                     \
        .sms = 148,                   /* ref 1.1 B200 row: 148 SMs [S] */                      \
        .compute_capability = 100,    /* ref 3.1: Blackwell (>= 100) */                        \
        .tdp_w = 1000,                /* ref 1.1 B200 row: 1000 W [S] */                       \
        .source = "ref 1.1 B200 (HGX/DGX, 1000 W) row [S]; gemm eff ref 1.2 B200 SXM row [S]" \
    }

#define GS__GPU_GB200                                                                         \
    {                                                                                         \
        .name = "gb200",                                                                      \
        .peak_flops_bf16 = 2500e12,   /* ref 1.1 GB200 row: 2,500 [S] */                       \
        .peak_flops_fp16 = 2500e12,                                                           \
        .peak_flops_fp32 = 1250e12,   /* ref 1.1 GB200 row: TF32 1,250 [S] */                  \
        .gemm_efficiency = 0.729,     /* ref 1.2 GB200 row: 1822 / 2500 = 72.9% [S] */         \
        .peak_flops_fp8 = 5000e12,    /* ref 1.1 GB200 row: FP8 5,000 [S] */                   \
        .gemm_efficiency_fp8 = 0.723, /* ref 1.2 GB200 row: FP8 3615.6 / 5000 [S] */            \
        .hbm_bytes = 186000000000ULL, /* ref 1.1 GB200 row: 186 GB [S] */                      \
        .hbm_bw = 8.0e12,             /* ref 1.1 GB200 row: 8.0 TB/s [S] */                    \
        .sms = 148,                   /* ref 1.1 GB200 row: 148 [U] */                         \
        .compute_capability = 100,                                                            \
        .tdp_w = 1200,                /* ref 1.1 GB200 row: ~1200 W [S] */                     \
        .source = "ref 1.1 GB200 row [S] (SMs [U]); gemm eff ref 1.2 GB200 row [S]"           \
    }

/* A100 40GB PCIe: the SXM part's SMs and peaks, 1,555 GB/s HBM2, 250 W (NVIDIA A100 PCIe
 * datasheet [S]; ref 1.1 A100 40GB row for the memory). MAMF of the PCIe part (ref 1.2, 80 GB). */
#define GS__GPU_A100_PCIE_40G                                                                 \
    {                                                                                         \
        .name = "a100-pcie-40g", .peak_flops_bf16 = 312e12, .peak_flops_fp16 = 312e12,        \
        .peak_flops_fp32 = 156e12, .gemm_efficiency = 0.811, .hbm_bytes = 40000000000ULL,     \
        .hbm_bw = 1555e9, .sms = 108, .compute_capability = 80, .tdp_w = 250,                 \
        .source = "ref 1.1 A100 40GB row; NVIDIA A100 PCIe datasheet 250 W [S]; ref 1.2 A100 " \
                  "PCIe row"                                                                  \
    }

/* H100 NVL (PCIe card pairs with NVLink bridges): 132 SMs, 94 GB HBM3 at 3.9 TB/s, 400 W; its
 * BF16 dense peak 835 TFLOP/s is the datasheet's 1,671 with sparsity halved, FP8 1,670.5 its
 * 3,341 halved (NVIDIA H100 datasheet [S]). MAMF: the H100 SXM ratios (ref 1.2) [U]. */
#define GS__GPU_H100_NVL                                                                      \
    {                                                                                         \
        .name = "h100-nvl", .peak_flops_bf16 = 835.5e12, .peak_flops_fp16 = 835.5e12,         \
        .peak_flops_fp32 = 417.5e12, .gemm_efficiency = 0.803, .peak_flops_fp8 = 1670.5e12,   \
        .gemm_efficiency_fp8 = 0.709, .hbm_bytes = 94000000000ULL,                            \
        .hbm_bw = 3.9e12, .sms = 132, .compute_capability = 90, .tdp_w = 400,                 \
        .source = "NVIDIA H100 datasheet, H100 NVL column [S]; gemm eff ref 1.2 H100 SXM [U]" \
    }

static const gs_gpu gpu_presets[] = {
    GS__GPU_V100("v100-sxm2-16g", 16000000000ULL),
    GS__GPU_V100("v100-sxm2-32g", 32000000000ULL),
    GS__GPU_A100_40G,
    GS__GPU_A100_80G,
    GS__GPU_A100_PCIE_80G,
    GS__GPU_A100_PCIE_40G,
    GS__GPU_H100_SXM,
    GS__GPU_H100_PCIE,
    GS__GPU_H100_NVL,
    GS__GPU_H200,
    GS__GPU_B200,
    GS__GPU_GB200,
};

/* ------------------------------------------------------------------ intra-node fabrics ----- */

/* NCCL Simple-protocol ring hardware latencies: ref 3.2 hwLatencies NVLINK Ring Simple 3.4 us,
 * PCI Ring Simple 5.7 us [V] (also ref 2.5 first row). */
#define GS__NVLINK_LATENCY_S 3.4e-6
#define GS__PCI_LATENCY_S 5.7e-6

#define GS__FABRIC_NVLINK2                                                                    \
    {                                                                                         \
        .name = "nvlink2", .kind = GS_LINK_NVLINK,                                            \
        .line_bw = 150e9,  /* ref 1.1 V100 row / ref 7 V100 row: 6 links x 25 GB/s/dir [S] */  \
        .nccl_bw = 120e9,  /* ref 7 V100 row: 6 x 20 (ref 3.4 SM70 20.0 GB/s/link) [V]/[D] */  \
        .latency_s = GS__NVLINK_LATENCY_S,                                                    \
        .nvswitch = 0,     /* ref 7 V100 row: hybrid cube mesh, not all-to-all */              \
        .nvls = 0,                                                                            \
        .source = "ref 1.1 V100 SXM2 row; ref 7 V100-SXM2 row (cube mesh, no NVSwitch); "     \
                  "ref 3.4 SM70 per-link bw; ref 3.2 NVLINK ring Simple latency"              \
    }

#define GS__FABRIC_NVLINK3                                                                    \
    {                                                                                         \
        .name = "nvlink3", .kind = GS_LINK_NVLINK,                                            \
        .line_bw = 300e9,  /* ref 1.1 A100 rows: 12 links, 300 GB/s per dir [S] */             \
        .nccl_bw = 240e9,  /* ref 3.4: 12 x 20.0 (SM80) [V]; ref 7 A100 row */                 \
        .latency_s = GS__NVLINK_LATENCY_S,                                                    \
        .nvswitch = 1,     /* ref 2.1 DGX A100 row: 6 NVSwitch gen2, any-to-any */             \
        .nvls = 0,         /* ref 3.2: nvlsEfficiency 0 before Hopper */                       \
        .source = "ref 1.1 A100 rows; ref 2.1 DGX A100 row; ref 3.4 SM80 per-link bw; "       \
                  "ref 3.2 NVLINK ring Simple latency"                                        \
    }

#define GS__FABRIC_NVLINK4                                                                    \
    {                                                                                         \
        .name = "nvlink4", .kind = GS_LINK_NVLINK,                                            \
        .line_bw = 450e9,   /* ref 1.1 H100 SXM5 row: 450 per-dir line rate [V] */             \
        .nccl_bw = 370.8e9, /* ref 3.4: 18 x 20.6 (SM90) [V]; ref 7 H100 row */                \
        .latency_s = GS__NVLINK_LATENCY_S,                                                    \
        .nvswitch = 1,      /* ref 2.1 DGX H100 row: 4 NVSwitch, NVLS capable [V] */           \
        .nvls = 1,                                                                            \
        .source = "ref 1.1 H100 SXM5 row; ref 2.1 DGX H100/H200 row; ref 3.4 SM90 per-link "  \
                  "bw; ref 3.2 NVLINK ring Simple latency"                                    \
    }

#define GS__FABRIC_NVLINK5                                                                    \
    {                                                                                         \
        .name = "nvlink5", .kind = GS_LINK_NVLINK,                                            \
        .line_bw = 900e9,   /* ref 1.1 B200 row: 18 links x 50 per-dir = 900 [S] */            \
        .nccl_bw = 721.8e9, /* ref 3.4: 18 x 40.1 (SM100) [V]; ref 7 B200 row */               \
        .latency_s = GS__NVLINK_LATENCY_S,                                                    \
        .nvswitch = 1,      /* ref 2.1 DGX B200 row: 2 NVSwitch chips [V] */                   \
        .nvls = 1,          /* ref 3.2: nvlsEfficiency 0.74 on Blackwell */                    \
        .source = "ref 1.1 B200 row; ref 2.1 DGX B200 row; ref 3.4 SM100 per-link bw; "       \
                  "ref 3.2 NVLINK ring Simple latency"                                        \
    }

/* HGX H100 / H200 4-GPU boards: the four SXM GPUs' 18 NVLink 4 links each, fully connected with
 * no NVSwitch ("four H100 SXM5 GPUs ... fully interconnected with NVLink", NVIDIA HGX H100
 * 4-GPU product brief [S]): 6 links to each peer [D], so a pair shares 6 x 20.6 GB/s in NCCL's
 * model (ref 3.4) and only a group of all four reaches the GPU's whole 370.8. No NVLS. */
#define GS__FABRIC_NVLINK4_MESH                                                               \
    {                                                                                         \
        .name = "nvlink4-mesh", .kind = GS_LINK_NVLINK,                                       \
        .line_bw = 450e9,   /* ref 1.1 H100 SXM5 row: 18 links, 450 per-dir [V] */             \
        .nccl_bw = 370.8e9, /* ref 3.4: 18 x 20.6 (SM90) [V] */                                \
        .latency_s = GS__NVLINK_LATENCY_S,                                                    \
        .nvswitch = 0, .nvls = 0, .mesh = 4,                                                  \
        .source = "NVIDIA HGX H100 4-GPU brief (fully connected NVLink, no NVSwitch) [S]; "   \
                  "ref 3.4 SM90 per-link bw; ref 3.2 NVLINK ring Simple latency"              \
    }

#define GS__FABRIC_PCIE(nm, line, nccl, row)                                                  \
    {                                                                                         \
        .name = nm, .kind = GS_LINK_PCIE, .line_bw = line, .nccl_bw = nccl,                   \
        .latency_s = GS__PCI_LATENCY_S, .nvswitch = 0, .nvls = 0,                             \
        .source = "ref 2.4 " row " row (NCCL model bw [V], raw per-dir x16); "                \
                  "ref 3.2 PCI ring Simple latency"                                           \
    }

/* ref 2.4 PCIe Gen4 x16 row: NCCL 24 GB/s (16 x 120 / 80) [V], raw ~31.5 GB/s [U] */
#define GS__FABRIC_PCIE_GEN4 GS__FABRIC_PCIE("pcie-gen4", 31.5e9, 24e9, "PCIe Gen4 x16")
/* ref 2.4 PCIe Gen5 x16 row: NCCL 48 GB/s (16 x 240 / 80) [V], raw ~63 GB/s [S] */
#define GS__FABRIC_PCIE_GEN5 GS__FABRIC_PCIE("pcie-gen5", 63e9, 48e9, "PCIe Gen5 x16")

static const gs_fabric fabric_presets[] = {
    GS__FABRIC_NVLINK2,
    GS__FABRIC_NVLINK3,
    GS__FABRIC_NVLINK4,
    GS__FABRIC_NVLINK5,
    GS__FABRIC_NVLINK4_MESH,
    /* ref 2.4 PCIe Gen3 x16 row: NCCL 12 GB/s [V], raw ~15.75 GB/s [U] */
    GS__FABRIC_PCIE("pcie-gen3", 15.75e9, 12e9, "PCIe Gen3 x16"),
    GS__FABRIC_PCIE_GEN4,
    GS__FABRIC_PCIE_GEN5,
};

/* ------------------------------------------------------------------------------ NICs ----- */

/* ref 3.2 hwLatencies NET Ring Simple 14.0 us [V]. */
#define GS__NET_LATENCY_S 14e-6
/* Plain TCP adds the kernel socket path: ref 2.5 "Kernel TCP/IP one-way 10-30 us" [U], 20 us
 * taken as the middle of that range. */
#define GS__TCP_LATENCY_S (GS__NET_LATENCY_S + 20e-6)
/* RoCEv2 goodput at 4096 MTU: 4096 / (4096 + 82) (ref 2.4, 200 GbE row and the overhead
 * line below the table) [D]. */
#define GS__ROCE_GOODPUT (4096.0 / 4178.0)
/* TCP goodput at MTU 1500: 1448 / 1538 (ref 2.4 10 GbE row; the 25 GbE "~23.5 Gb/s" and 100 GbE
 * "~94 Gb/s" rows agree) [D]. */
#define GS__TCP_GOODPUT (1448.0 / 1538.0)

#define GS__NIC(nm, k, g, b, lat, src)                                                        \
    {                                                                                         \
        .name = nm, .kind = k, .gbps = g, .bw = b, .latency_s = lat, .source = src            \
    }

/* InfiniBand: line rate from ref 2.3 (4x port; NCCL bw = Mbps x 4 / 8000). */
#define GS__NIC_IB_EDR                                                                        \
    GS__NIC("ib-edr", GS_LINK_IB, 100.0, 12.5e9, GS__NET_LATENCY_S,                           \
            "ref 2.3 EDR row: 100 Gb/s, 12.5 GB/s (NCCL model value; no measured figure in "  \
            "the reference) [S]/[V]; ref 3.2 NET ring Simple latency")
#define GS__NIC_IB_HDR                                                                        \
    GS__NIC("ib-hdr", GS_LINK_IB, 200.0, 24e9, GS__NET_LATENCY_S,                             \
            "ref 2.3 HDR row (200 Gb/s = 25 GB/s); ~24 GB/s achievable per NIC (ref 2.3, "    \
            "nccl#412) [V]; ref 3.2 NET ring Simple latency")
#define GS__NIC_IB_NDR                                                                        \
    GS__NIC("ib-ndr", GS_LINK_IB, 400.0, 48e9, GS__NET_LATENCY_S,                             \
            "ref 2.3 NDR row (400 Gb/s = 50 GB/s); 46-49 GB/s achievable per CX-7 NIC (ref "  \
            "2.3, nccl-tests#267/#290) [V], 48 taken; ref 3.2 NET ring Simple latency")
#define GS__NIC_IB_XDR                                                                        \
    GS__NIC("ib-xdr", GS_LINK_IB, 800.0, 96e9, GS__NET_LATENCY_S,                             \
            "ref 2.3 XDR row (800 Gb/s = 100 GB/s) [V]; achievable 96 GB/s = NDR's 48/50 "    \
            "ratio applied [U]; ref 3.2 NET ring Simple latency")

/* ref 2.4 25 GbE row: ~23.5 Gb/s TCP at MTU 1500 -> 2.94 GB/s */
#define GS__NIC_ETH_25                                                                        \
    GS__NIC("eth-25", GS_LINK_ETHERNET, 25.0, 25e9 / 8.0 * GS__TCP_GOODPUT, GS__TCP_LATENCY_S, \
            "ref 2.4 25 GbE row: ~23.5 Gb/s TCP (1448/1538) [D]; latency ref 3.2 NET 14 us + " \
            "ref 2.5 kernel TCP one-way ~20 us [U]")
/* ref 2.4 100 GbE row: ~94 Gb/s TCP at MTU 1500, multi-stream */
#define GS__NIC_ETH_100                                                                       \
    GS__NIC("eth-100", GS_LINK_ETHERNET, 100.0, 100e9 / 8.0 * GS__TCP_GOODPUT,                \
            GS__TCP_LATENCY_S,                                                                \
            "ref 2.4 100 GbE row: ~94 Gb/s TCP multi-stream (1448/1538) [D]/[U]; latency ref " \
            "3.2 NET 14 us + ref 2.5 kernel TCP ~20 us [U]")

static const gs_nic nic_presets[] = {
    GS__NIC_IB_EDR,
    GS__NIC_IB_HDR,
    GS__NIC_IB_NDR,
    GS__NIC_IB_XDR,
    /* ref 2.4 100/200/400 GbE rows: line 12.5 / 25 / 50 GB/s; RoCEv2 goodput 98% [D] */
    GS__NIC("roce-100", GS_LINK_ROCE, 100.0, 12.5e9 * GS__ROCE_GOODPUT, GS__NET_LATENCY_S,
            "ref 2.4 100 GbE row, RoCEv2 goodput 4096/4178 [D]; ref 3.2 NET ring Simple latency"),
    GS__NIC("roce-200", GS_LINK_ROCE, 200.0, 25e9 * GS__ROCE_GOODPUT, GS__NET_LATENCY_S,
            "ref 2.4 200 GbE row: RoCEv2 ~24.5 GB/s [D]; ref 3.2 NET ring Simple latency"),
    /* ref 2.4 400 GbE row: "RoCEv2 ~48-49 GB/s (same ConnectX-7 as NDR)"; 48 as for ib-ndr. */
    GS__NIC("roce-400", GS_LINK_ROCE, 400.0, 48e9, GS__NET_LATENCY_S,
            "ref 2.4 400 GbE row: RoCEv2 ~48-49 GB/s, same CX-7 as NDR (48 as ib-ndr) [D]/[U]; "
            "ref 3.2 NET ring Simple latency"),
    GS__NIC_ETH_25,
    GS__NIC_ETH_100,
    GS__NIC("eth-200", GS_LINK_ETHERNET, 200.0, 200e9 / 8.0 * GS__TCP_GOODPUT, GS__TCP_LATENCY_S,
            "ref 2.4 200 GbE row line rate, TCP MTU-1500 goodput 1448/1538 from the 10 GbE row "
            "[D]; latency ref 3.2 NET 14 us + ref 2.5 kernel TCP ~20 us [U]"),
    GS__NIC("eth-400", GS_LINK_ETHERNET, 400.0, 400e9 / 8.0 * GS__TCP_GOODPUT, GS__TCP_LATENCY_S,
            "ref 2.4 400 GbE row line rate, TCP MTU-1500 goodput 1448/1538 from the 10 GbE row "
            "[D]/[U]; latency ref 3.2 NET 14 us + ref 2.5 kernel TCP ~20 us [U]"),
};

/* -------------------------------------------------------------------------- clusters ----- */

#define GS__CLUSTER(nm, g, f, n, gpn, npn, rail, src)                                         \
    {                                                                                         \
        .name = nm, .gpu = g, .intra = f, .nic = n, .gpus_per_node = gpn, .nics_per_node = npn, \
        .nodes = 1, .rail_optimized = rail, .oversubscription = 1.0, .source = src            \
    }
/* A rack-scale NVLink domain hosted by Grace CPUs: the whole rack is one "node" of the model (its
 * NVLink domain), every GPU with its own NIC. */
#define GS__CLUSTER_GRACE(nm, g, f, n, gpn, npn, rail, src)                                   \
    {                                                                                         \
        .name = nm, .gpu = g, .intra = f, .nic = n, .gpus_per_node = gpn, .nics_per_node = npn, \
        .nodes = 1, .rail_optimized = rail, .oversubscription = 1.0, .host_cpu = GS_HOST_GRACE, \
        .source = src                                                                         \
    }

static const gs_cluster cluster_presets[] = {
    /* ref 2.1 DGX A100 row: 8x A100 SXM4, 6 NVSwitch, 8x CX-6 HDR 200 Gb/s (1 per GPU,
     * rail-aligned) [S]; ref 2.2 rail-optimized fat tree, non-blocking within an SU [V]. */
    GS__CLUSTER("dgx-a100-80g", GS__GPU_A100_80G, GS__FABRIC_NVLINK3, GS__NIC_IB_HDR, 8, 8, 1,
                "ref 2.1 DGX A100 row (8x A100 80GB, NVSwitch, 8x HDR 200G) [S]; ref 2.2 rail-"
                "optimized fabric [V]"),
    GS__CLUSTER("dgx-a100-40g", GS__GPU_A100_40G, GS__FABRIC_NVLINK3, GS__NIC_IB_HDR, 8, 8, 1,
                "ref 2.1 DGX A100 row (8x A100 40GB, NVSwitch, 8x HDR 200G) [S]; ref 2.2 rail-"
                "optimized fabric [V]"),
    /* ref 2.1 DGX H100 / DGX H200 row: 8 GPUs, 4 NVSwitch, 8x CX-7 400 Gb/s, 1 per GPU [V]. */
    GS__CLUSTER("dgx-h100", GS__GPU_H100_SXM, GS__FABRIC_NVLINK4, GS__NIC_IB_NDR, 8, 8, 1,
                "ref 2.1 DGX H100 row (8x H100 SXM5, 4 NVSwitch, 8x CX-7 NDR 400G) [V]; ref 2.2 "
                "SuperPOD rail-aligned SU [V]"),
    GS__CLUSTER("dgx-h200", GS__GPU_H200, GS__FABRIC_NVLINK4, GS__NIC_IB_NDR, 8, 8, 1,
                "ref 2.1 DGX H100 / DGX H200 row (8x H200, 4 NVSwitch, 8x CX-7 NDR 400G) [V]; "
                "ref 2.2 rail-aligned SU [V]"),
    /* HGX H100 / H200 4-GPU servers (e.g. Dell XE9640): 4 SXM GPUs on a fully connected NVLink
     * board, one 400 Gb/s NDR NIC per GPU [S]. */
    GS__CLUSTER("hgx-h100-4gpu", GS__GPU_H100_SXM, GS__FABRIC_NVLINK4_MESH, GS__NIC_IB_NDR, 4, 4, 1,
                "NVIDIA HGX H100 4-GPU (fully connected NVLink, no NVSwitch) [S]; one CX-7 NDR "
                "400G per GPU [U]"),
    GS__CLUSTER("hgx-h200-4gpu", GS__GPU_H200, GS__FABRIC_NVLINK4_MESH, GS__NIC_IB_NDR, 4, 4, 1,
                "NVIDIA HGX H200 4-GPU (fully connected NVLink, no NVSwitch) [S]; one CX-7 NDR "
                "400G per GPU [U]"),
    /* ref 2.1 DGX B200 row: 8x B200, 2 NVSwitch chips, 8x CX-7 400 Gb/s [V]. */
    GS__CLUSTER("dgx-b200", GS__GPU_B200, GS__FABRIC_NVLINK5, GS__NIC_IB_NDR, 8, 8, 1,
                "ref 2.1 DGX B200 row (8x B200, 2 NVSwitch, 8x CX-7 400G) [V]; ref 2.2 B200 "
                "SuperPOD [V]"),
    /* NVIDIA DGX GB200 NVL72 rack: 72 B200 GPUs in one NVLink 5 domain (fifth-generation NVLink
     * switches, 1.8 TB/s per GPU), 36 Grace CPUs, 72 ConnectX-7 400 Gb/s InfiniBand NICs, one
     * per GPU (DGX GB200 datasheet) [S]. The model's node is the NVLink domain. */
    GS__CLUSTER_GRACE("gb200-nvl72", GS__GPU_GB200, GS__FABRIC_NVLINK5, GS__NIC_IB_NDR, 72, 72, 1,
                      "DGX GB200 NVL72 datasheet (72x GB200 GPU, NVLink 5 domain of 72, 36 Grace CPUs, 72x "
                      "CX-7 400G) [S]"),
    /* Commodity nodes: GPUs talk over PCIe (ref 2.4 NCCL model), one Ethernet NIC per node,
     * no rails. Not a vendor reference design: the seed's "64 GPUs on 25 GbE" setting. */
    GS__CLUSTER("pcie-a100-25gbe", GS__GPU_A100_PCIE_80G, GS__FABRIC_PCIE_GEN4, GS__NIC_ETH_25, 8, 1, 0,
                "commodity node (not a vendor design): 8x a100-pcie-80g (ref 1.1, 1.2) on PCIe Gen4 (ref "
                "2.4), 1x 25 GbE TCP (ref 2.4) per node, not rail-optimized"),
    GS__CLUSTER("pcie-h100-100gbe", GS__GPU_H100_PCIE, GS__FABRIC_PCIE_GEN5, GS__NIC_ETH_100, 8, 1,
                0,
                "commodity node (not a vendor design): 8x h100-pcie (ref 1.1) on PCIe Gen5 (ref "
                "2.4), 1x 100 GbE TCP (ref 2.4) per node, not rail-optimized"),
};

#define GS__COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* --------------------------------------------------------------------- table access ----- */

size_t gs_gpu_preset_count(void) { return GS__COUNT(gpu_presets); }
size_t gs_fabric_preset_count(void) { return GS__COUNT(fabric_presets); }
size_t gs_nic_preset_count(void) { return GS__COUNT(nic_presets); }
size_t gs_cluster_preset_count(void) { return GS__COUNT(cluster_presets); }

const gs_gpu *gs_gpu_preset_at(size_t i)
{
    return i < GS__COUNT(gpu_presets) ? &gpu_presets[i] : NULL;
}

const gs_fabric *gs_fabric_preset_at(size_t i)
{
    return i < GS__COUNT(fabric_presets) ? &fabric_presets[i] : NULL;
}

const gs_nic *gs_nic_preset_at(size_t i)
{
    return i < GS__COUNT(nic_presets) ? &nic_presets[i] : NULL;
}

const gs_cluster *gs_cluster_preset_at(size_t i)
{
    return i < GS__COUNT(cluster_presets) ? &cluster_presets[i] : NULL;
}

/* Find and nearest over any of the tables: the element's name is its first member. */
#define GS__DEFINE_LOOKUP(kind, type, table)                                                  \
    const type *gs_##kind##_preset_find(const char *name)                                     \
    {                                                                                         \
        if (!name)                                                                            \
            return NULL;                                                                      \
        for (size_t i = 0; i < GS__COUNT(table); i++)                                         \
            if (strcasecmp(table[i].name, name) == 0)                                         \
                return &table[i];                                                             \
        return NULL;                                                                          \
    }                                                                                         \
    const char *gs_##kind##_preset_nearest(const char *name)                                  \
    {                                                                                         \
        const char *best = NULL;                                                              \
        if (!name)                                                                            \
            return NULL;                                                                      \
        for (size_t i = 0; i < GS__COUNT(table); i++)                                         \
            if (gs_name_closer(name, table[i].name, best))                                    \
                best = table[i].name;                                                         \
        return best;                                                                          \
    }

GS__DEFINE_LOOKUP(gpu, gs_gpu, gpu_presets)
GS__DEFINE_LOOKUP(fabric, gs_fabric, fabric_presets)
GS__DEFINE_LOOKUP(nic, gs_nic, nic_presets)
GS__DEFINE_LOOKUP(cluster, gs_cluster, cluster_presets)

/* ------------------------------------------------------------------------- queries ----- */

double gs_gpu_peak_flops(const gs_gpu *g, gs_precision p)
{
    switch (p) {
    case GS_PREC_BF16: return g->peak_flops_bf16;
    case GS_PREC_FP16: return g->peak_flops_fp16;
    case GS_PREC_FP32: return g->peak_flops_fp32;
    }
    return 0.0;
}

double gs_gpu_clock_factor(const gs_gpu *g)
{
    if (!(g->power_w > 0.0) || !(g->tdp_w > 0.0) || g->power_w >= g->tdp_w)
        return 1.0;
    return cbrt(g->power_w / g->tdp_w);
}

uint64_t gs_cluster_gpus(const gs_cluster *c)
{
    uint64_t n = 0;
    /* 0 on overflow; gs_cluster_validate reports it. */
    return gs_mul_u64(c->nodes, c->gpus_per_node, &n) == 0 ? n : 0;
}

const char *gs_link_kind_name(gs_link_kind k)
{
    switch (k) {
    case GS_LINK_NVLINK: return "nvlink";
    case GS_LINK_PCIE: return "pcie";
    case GS_LINK_IB: return "ib";
    case GS_LINK_ROCE: return "roce";
    case GS_LINK_ETHERNET: return "ethernet";
    }
    return "unknown";
}

const char *gs_host_cpu_name(gs_host_cpu h)
{
    return h == GS_HOST_GRACE ? "grace" : "x86";
}

int gs_host_cpu_parse(const char *s, gs_host_cpu *out)
{
    for (int h = 0; h < GS_HOST_CPU_COUNT; h++)
        if (strcasecmp(s, gs_host_cpu_name((gs_host_cpu)h)) == 0) {
            *out = (gs_host_cpu)h;
            return 0;
        }
    return -1;
}

static const char *cluster_label(const gs_cluster *c)
{
    return c->name[0] ? c->name : "(unnamed)";
}

gs_status gs_cluster_validate(const gs_cluster *c, gs_error *err)
{
    if (!c)
        return gs_error_set(err, GS_ERR_INPUT, "cluster: no description given");

    const struct {
        const char *field;
        uint64_t value;
    } counts[] = {
        {"gpus_per_node", c->gpus_per_node},
        {"nodes", c->nodes},
        {"nics_per_node", c->nics_per_node},
    };
    for (size_t i = 0; i < GS__COUNT(counts); i++)
        if (counts[i].value == 0)
            return gs_error_set(err, GS_ERR_INPUT, "cluster %s: %s = 0, must be a positive integer",
                                cluster_label(c), counts[i].field);

    /* Each rate within what some device or link has ever had, widened by orders of magnitude
     * both ways: outside it a step time is no number a report can print (nic 1e-300 Gb/s). The
     * negated comparisons also reject NaN. */
    const struct {
        const char *field;
        double value, lo, hi;
    } rates[] = {
        {"gpu.peak_flops_fp16", c->gpu.peak_flops_fp16, 1e6, 1e19},  /* FLOP/s */
        {"gpu.peak_flops_fp32", c->gpu.peak_flops_fp32, 1e6, 1e19},  /* FLOP/s */
        {"gpu.hbm_bw", c->gpu.hbm_bw, 1e6, 1e16},                    /* bytes/s */
        {"gpu.gemm_efficiency", c->gpu.gemm_efficiency, 1e-6, 1.0},  /* fraction */
        {"intra.line_bw", c->intra.line_bw, 1e3, 1e16},              /* bytes/s */
        {"intra.nccl_bw", c->intra.nccl_bw, 1e3, 1e16},              /* bytes/s */
        {"nic.gbps", c->nic.gbps, 1e-3, 1e6},                        /* Gb/s */
        {"nic.bw", c->nic.bw, 1e3, 1e16},                            /* bytes/s */
    };
    for (size_t i = 0; i < GS__COUNT(rates); i++)
        if (!(rates[i].value >= rates[i].lo) || !(rates[i].value <= rates[i].hi))
            return gs_error_set(err, GS_ERR_INPUT, "cluster %s: %s = %g, expected a number in [%g, %g]",
                                cluster_label(c), rates[i].field, rates[i].value, rates[i].lo, rates[i].hi);
    if (!(c->gpu.peak_flops_bf16 >= 0.0))
        return gs_error_set(err, GS_ERR_INPUT,
                            "cluster %s: gpu.peak_flops_bf16 = %g, must be >= 0 (0: unsupported)",
                            cluster_label(c), c->gpu.peak_flops_bf16);
    if (!(c->gpu.peak_flops_fp8 >= 0.0) || !(c->gpu.peak_flops_fp8 <= 1e19))
        return gs_error_set(err, GS_ERR_INPUT,
                            "cluster %s: gpu.peak_flops_fp8 = %g, expected a number in [0, 1e19] (0: no FP8 "
                            "tensor cores)", cluster_label(c), c->gpu.peak_flops_fp8);
    if (c->gpu.peak_flops_fp8 > 0.0 && (!(c->gpu.gemm_efficiency_fp8 >= 1e-6) || !(c->gpu.gemm_efficiency_fp8 <= 1.0)))
        return gs_error_set(err, GS_ERR_INPUT,
                            "cluster %s: gpu.gemm_efficiency_fp8 = %g, expected a number in [1e-06, 1] with an "
                            "FP8 peak", cluster_label(c), c->gpu.gemm_efficiency_fp8);
    if (c->gpu.hbm_bytes == 0)
        return gs_error_set(err, GS_ERR_INPUT, "cluster %s: gpu.hbm_bytes = 0, must be positive",
                            cluster_label(c));
    if (!(c->intra.latency_s >= 0.0) || !(c->nic.latency_s >= 0.0))
        return gs_error_set(err, GS_ERR_INPUT,
                            "cluster %s: latencies must be >= 0 s (intra.latency_s = %g, "
                            "nic.latency_s = %g)",
                            cluster_label(c), c->intra.latency_s, c->nic.latency_s);
    if (!(c->oversubscription >= 1.0))
        return gs_error_set(err, GS_ERR_INPUT, "cluster %s: oversubscription = %g, must be >= 1",
                            cluster_label(c), c->oversubscription);

    uint64_t gpus;
    if (gs_mul_u64(c->nodes, c->gpus_per_node, &gpus) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW,
                            "cluster %s: nodes = %llu x gpus_per_node = %llu overflows 64 bits",
                            cluster_label(c), (unsigned long long)c->nodes,
                            (unsigned long long)c->gpus_per_node);
    return GS_OK;
}

/* ---------------------------------------------------------------------- names ----- */

#define GS__EDIT_MAX 255

/* The distance when it is at most max, else max + 1: a row whose every entry exceeds max can
 * only grow, so the computation stops there (near-name searches over hundreds of names cost
 * little when the typed name is far from all of them). */
size_t gs_edit_distance_max(const char *a, const char *b, size_t max)
{
    size_t la = strlen(a), lb = strlen(b), extra = 0;
    size_t row[GS__EDIT_MAX + 1];

    /* Clamp to the first GS__EDIT_MAX bytes; the rest counts as insertions/deletions. */
    if (la > GS__EDIT_MAX || lb > GS__EDIT_MAX) {
        size_t ra = la > GS__EDIT_MAX ? la - GS__EDIT_MAX : 0;
        size_t rb = lb > GS__EDIT_MAX ? lb - GS__EDIT_MAX : 0;
        extra = ra > rb ? ra - rb : rb - ra;
        if (la > GS__EDIT_MAX)
            la = GS__EDIT_MAX;
        if (lb > GS__EDIT_MAX)
            lb = GS__EDIT_MAX;
    }
    if (extra > max || (la > lb ? la - lb : lb - la) + extra > max)
        return max + 1; /* at least the length difference */
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0]; /* d[i-1][j-1] */
        size_t low = row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j]; /* d[i-1][j] */
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
            if (best < low)
                low = best;
        }
        if (low + extra > max)
            return max + 1;
    }
    return row[lb] + extra > max ? max + 1 : row[lb] + extra;
}

size_t gs_edit_distance(const char *a, const char *b)
{
    return gs_edit_distance_max(a, b, (size_t)-2);
}

static size_t common_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && b[n] && tolower((unsigned char)a[n]) == tolower((unsigned char)b[n]))
        n++;
    return n;
}

static size_t name_score(const char *name, const char *candidate)
{
    size_t d = gs_edit_distance(name, candidate);
    if (d > 1 && name[0] && common_prefix(name, candidate) == strlen(name))
        d = 1; /* typed a prefix of the candidate */
    return d;
}

int gs_name_closer(const char *name, const char *candidate, const char *best)
{
    if (!candidate)
        return 0;
    if (!best)
        return 1;
    size_t sc = name_score(name, candidate), sb = name_score(name, best);
    if (sc != sb)
        return sc < sb;
    return common_prefix(name, candidate) > common_prefix(name, best);
}
