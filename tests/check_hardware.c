/* Check suite for engine/hardware: preset tables against the derived figures of the reference
 * file (section 7 and the rows it draws on), lookups and nearest names, cluster validation. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "engine/hardware.h"

#define REL_CLOSE(a, b, tol) (fabs((a) / (b) - 1.0) < (tol))

static const gs_gpu *gpu(const char *name)
{
    const gs_gpu *g = gs_gpu_preset_find(name);
    ck_assert_msg(g != NULL, "gpu preset %s missing", name);
    return g;
}

static const gs_fabric *fabric(const char *name)
{
    const gs_fabric *f = gs_fabric_preset_find(name);
    ck_assert_msg(f != NULL, "fabric preset %s missing", name);
    return f;
}

static const gs_nic *nic(const char *name)
{
    const gs_nic *n = gs_nic_preset_find(name);
    ck_assert_msg(n != NULL, "nic preset %s missing", name);
    return n;
}

static gs_cluster cluster(const char *name)
{
    const gs_cluster *c = gs_cluster_preset_find(name);
    ck_assert_msg(c != NULL, "cluster preset %s missing", name);
    return *c;
}

/* ------------------------------------------------------------------------- presets ----- */

START_TEST(test_required_names)
{
    static const char *gpus[] = {"v100-sxm2-16g", "v100-sxm2-32g", "a100-40g", "a100-80g",
                                 "h100-sxm",      "h100-pcie",     "h200",     "b200"};
    static const char *fabrics[] = {"nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie-gen4",
                                    "pcie-gen5"};
    static const char *nics[] = {"ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "roce-100", "roce-200",
                                 "roce-400", "eth-25", "eth-100", "eth-200", "eth-400"};
    static const char *clusters[] = {"dgx-a100-80g", "dgx-a100-40g", "dgx-h100", "dgx-h200",
                                     "dgx-b200",     "pcie-a100-25gbe"};
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
        ck_assert_str_eq(gpu(gpus[i])->name, gpus[i]);
    for (size_t i = 0; i < sizeof fabrics / sizeof fabrics[0]; i++)
        ck_assert_str_eq(fabric(fabrics[i])->name, fabrics[i]);
    for (size_t i = 0; i < sizeof nics / sizeof nics[0]; i++)
        ck_assert_str_eq(nic(nics[i])->name, nics[i]);
    for (size_t i = 0; i < sizeof clusters / sizeof clusters[0]; i++)
        ck_assert_str_eq(cluster(clusters[i]).name, clusters[i]);
}
END_TEST

START_TEST(test_every_preset_sane)
{
    for (size_t i = 0; i < gs_gpu_preset_count(); i++) {
        const gs_gpu *g = gs_gpu_preset_at(i);
        ck_assert_msg(g->source && g->source[0], "%s: no source", g->name);
        ck_assert(g->peak_flops_bf16 >= 0.0);
        ck_assert(g->peak_flops_fp16 > 0.0 && g->peak_flops_fp32 > 0.0);
        ck_assert(g->gemm_efficiency > 0.5 && g->gemm_efficiency <= 1.0);
        ck_assert(g->hbm_bytes > 0 && g->hbm_bw > 0.0 && g->sms > 0);
        ck_assert(g->compute_capability >= 70 && g->compute_capability <= 100);
        ck_assert_ptr_eq(gs_gpu_preset_find(g->name), g);
    }
    for (size_t i = 0; i < gs_fabric_preset_count(); i++) {
        const gs_fabric *f = gs_fabric_preset_at(i);
        ck_assert_msg(f->source && f->source[0], "%s: no source", f->name);
        ck_assert(f->kind == GS_LINK_NVLINK || f->kind == GS_LINK_PCIE);
        /* NCCL's planned bandwidth sits below the line rate (reference 1.1 notes, 3.4). */
        ck_assert(f->nccl_bw > 0.0 && f->nccl_bw < f->line_bw);
        ck_assert(f->latency_s > 0.0 && f->latency_s < 1e-4);
        ck_assert_ptr_eq(gs_fabric_preset_find(f->name), f);
    }
    for (size_t i = 0; i < gs_nic_preset_count(); i++) {
        const gs_nic *n = gs_nic_preset_at(i);
        ck_assert_msg(n->source && n->source[0], "%s: no source", n->name);
        ck_assert(n->kind == GS_LINK_IB || n->kind == GS_LINK_ROCE || n->kind == GS_LINK_ETHERNET);
        /* Achievable never beats the line rate in bytes/s. */
        ck_assert(n->bw > 0.0 && n->bw <= n->gbps * 1e9 / 8.0);
        ck_assert(n->latency_s > 0.0 && n->latency_s < 1e-3);
        ck_assert_ptr_eq(gs_nic_preset_find(n->name), n);
    }
    for (size_t i = 0; i < gs_cluster_preset_count(); i++) {
        const gs_cluster *c = gs_cluster_preset_at(i);
        gs_error err;
        gs_error_init(&err);
        ck_assert_msg(c->source && c->source[0], "%s: no source", c->name);
        ck_assert_msg(gs_cluster_validate(c, &err) == GS_OK, "%s: %s", c->name, err.msg);
        ck_assert_uint_eq(c->nodes, 1);
        /* Components are copies of the named presets. */
        const gs_gpu *g = gpu(c->gpu.name);
        const gs_fabric *f = fabric(c->intra.name);
        const gs_nic *n = nic(c->nic.name);
        ck_assert(c->gpu.peak_flops_bf16 == g->peak_flops_bf16 &&
                  c->gpu.peak_flops_fp16 == g->peak_flops_fp16 &&
                  c->gpu.peak_flops_fp32 == g->peak_flops_fp32 &&
                  c->gpu.gemm_efficiency == g->gemm_efficiency && c->gpu.hbm_bytes == g->hbm_bytes &&
                  c->gpu.hbm_bw == g->hbm_bw && c->gpu.sms == g->sms &&
                  c->gpu.compute_capability == g->compute_capability);
        ck_assert(c->intra.kind == f->kind && c->intra.line_bw == f->line_bw &&
                  c->intra.nccl_bw == f->nccl_bw && c->intra.latency_s == f->latency_s &&
                  c->intra.nvswitch == f->nvswitch && c->intra.nvls == f->nvls);
        ck_assert(c->nic.kind == n->kind && c->nic.gbps == n->gbps && c->nic.bw == n->bw &&
                  c->nic.latency_s == n->latency_s);
        ck_assert_str_eq(c->gpu.source, g->source);
        ck_assert_str_eq(c->nic.source, n->source);
        ck_assert_ptr_eq(gs_cluster_preset_find(c->name), c);
    }
    ck_assert_ptr_null(gs_gpu_preset_at(gs_gpu_preset_count()));
    ck_assert_ptr_null(gs_fabric_preset_at(gs_fabric_preset_count()));
    ck_assert_ptr_null(gs_nic_preset_at(gs_nic_preset_count()));
    ck_assert_ptr_null(gs_cluster_preset_at(gs_cluster_preset_count()));
}
END_TEST

START_TEST(test_gpu_numbers)
{
    /* V100: FP16 only, FP32 without TF32 (reference 1.1 V100 row). */
    const gs_gpu *v = gpu("v100-sxm2-32g");
    ck_assert(v->peak_flops_bf16 == 0.0);
    ck_assert(gs_gpu_peak_flops(v, GS_PREC_BF16) == 0.0);
    ck_assert(gs_gpu_peak_flops(v, GS_PREC_FP16) == 125e12);
    ck_assert(gs_gpu_peak_flops(v, GS_PREC_FP32) == 15.7e12);
    ck_assert_uint_eq(v->compute_capability, 70);
    ck_assert_uint_eq(gpu("v100-sxm2-16g")->hbm_bytes, 16000000000ULL);

    /* Ampere+: fp32 training runs on TF32 = half the 16-bit dense peak. */
    const char *tf32[] = {"a100-40g", "a100-80g", "h100-sxm", "h100-pcie", "b200"};
    for (size_t i = 0; i < 5; i++) {
        const gs_gpu *g = gpu(tf32[i]);
        ck_assert_msg(REL_CLOSE(gs_gpu_peak_flops(g, GS_PREC_FP32),
                                gs_gpu_peak_flops(g, GS_PREC_BF16) / 2.0, 1e-9),
                      "%s", g->name);
        ck_assert(g->peak_flops_fp16 == g->peak_flops_bf16);
    }

    const gs_gpu *a = gpu("a100-80g");
    ck_assert(a->peak_flops_bf16 == 312e12);
    ck_assert_uint_eq(a->hbm_bytes, 80ULL * 1000 * 1000 * 1000); /* vendor GB */
    ck_assert_uint_eq(gpu("h200")->hbm_bytes, 141ULL * 1000 * 1000 * 1000);
    ck_assert_uint_eq(gpu("b200")->hbm_bytes, 180ULL * 1000 * 1000 * 1000);
    ck_assert_uint_eq(a->compute_capability, 80);
    ck_assert_uint_eq(gpu("h100-sxm")->compute_capability, 90);
    ck_assert_uint_eq(gpu("b200")->compute_capability, 100);
    ck_assert_uint_eq(a->sms, 108);
    ck_assert_uint_eq(gpu("h100-sxm")->sms, 132);
    ck_assert_uint_eq(gpu("b200")->sms, 148);
}
END_TEST

/* ------------------------------------------------------------------------- derived ----- */

START_TEST(test_gemm_efficiency_is_mamf_over_spec)
{
    /* Reference table 1.2: BF16 MAMF / spec, TFLOP/s. */
    ck_assert(fabs(gpu("a100-80g")->gemm_efficiency - 271.2 / 312.0) < 1e-3);
    ck_assert(fabs(gpu("h100-sxm")->gemm_efficiency - 794.5 / 989.0) < 1e-3);
    ck_assert(fabs(gpu("b200")->gemm_efficiency - 1745.0 / 2250.0) < 1e-3);
    ck_assert(fabs(gpu("h100-pcie")->gemm_efficiency - 499.5 / 756.0) < 2e-3);
    ck_assert(fabs(gpu("v100-sxm2-32g")->gemm_efficiency - 94.0 / 125.0) < 1e-3);
}
END_TEST

START_TEST(test_nccl_intra_bw)
{
    /* Reference 3.4: NCCL per-link GB/s x NVLink count: SM80 20.0 x 12, SM90 20.6 x 18,
     * SM100 40.1 x 18; SM70 20.0 x 6 for V100's 6 links. */
    ck_assert(REL_CLOSE(fabric("nvlink3")->nccl_bw, 12 * 20.0e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("nvlink4")->nccl_bw, 18 * 20.6e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("nvlink5")->nccl_bw, 18 * 40.1e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("nvlink2")->nccl_bw, 6 * 20.0e9, 1e-12));
    /* Line rates: 12 x 25 GB/s (A100), 18 x 25 (H100), 18 x 50 (B200) per direction. */
    ck_assert(REL_CLOSE(fabric("nvlink3")->line_bw, 12 * 25e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("nvlink4")->line_bw, 18 * 25e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("nvlink5")->line_bw, 18 * 50e9, 1e-12));
    /* "~80% of line rate" (reference 1.1 notes). */
    ck_assert(REL_CLOSE(fabric("nvlink3")->nccl_bw / fabric("nvlink3")->line_bw, 0.8, 0.03));
    ck_assert(REL_CLOSE(fabric("nvlink4")->nccl_bw / fabric("nvlink4")->line_bw, 0.8, 0.03));
    /* PCIe as NCCL models it: width x per-lane speed / 80 (Gen4 120, Gen5 240). */
    ck_assert(REL_CLOSE(fabric("pcie-gen4")->nccl_bw, 16 * 120 / 80.0 * 1e9, 1e-12));
    ck_assert(REL_CLOSE(fabric("pcie-gen5")->nccl_bw, 16 * 240 / 80.0 * 1e9, 1e-12));
    /* NVSwitch / NVLS flags. */
    ck_assert_int_eq(fabric("nvlink2")->nvswitch, 0);
    ck_assert_int_eq(fabric("nvlink3")->nvswitch, 1);
    ck_assert_int_eq(fabric("nvlink3")->nvls, 0);
    ck_assert_int_eq(fabric("nvlink4")->nvls, 1);
    ck_assert_int_eq(fabric("nvlink5")->nvls, 1);
    /* NCCL ring Simple hw latencies, reference 3.2. */
    ck_assert(fabric("nvlink4")->latency_s == 3.4e-6);
    ck_assert(fabric("pcie-gen4")->latency_s == 5.7e-6);
}
END_TEST

START_TEST(test_nic_rates)
{
    /* NCCL: bw[GB/s] = per-lane Mbps x width / 8000 (reference 2.3); 4x ports. */
    ck_assert(REL_CLOSE(nic("ib-ndr")->gbps * 1e9 / 8.0, 100000.0 * 4 / 8000.0 * 1e9, 1e-12));
    ck_assert(REL_CLOSE(nic("ib-hdr")->gbps * 1e9 / 8.0, 50000.0 * 4 / 8000.0 * 1e9, 1e-12));
    ck_assert(REL_CLOSE(nic("ib-edr")->gbps * 1e9 / 8.0, 25000.0 * 4 / 8000.0 * 1e9, 1e-12));
    /* Achievable, NVIDIA engineers (reference 2.3): HDR ~24 GB/s, NDR 46-49 GB/s. */
    ck_assert(REL_CLOSE(nic("ib-hdr")->bw, 24e9, 1e-12));
    ck_assert(nic("ib-ndr")->bw >= 46e9 && nic("ib-ndr")->bw <= 49e9);
    /* RoCEv2 at 4096 MTU: 82 B of headers per packet (reference 2.4) -> 24.5 GB/s on 200 GbE. */
    ck_assert(REL_CLOSE(nic("roce-200")->bw, 25e9 * 4096 / (4096 + 82), 1e-12));
    ck_assert(fabs(nic("roce-200")->bw - 24.5e9) < 0.05e9);
    /* 25 GbE TCP at MTU 1500: ~23.5 Gb/s -> ~2.94 GB/s. */
    ck_assert(fabs(nic("eth-25")->bw * 8.0 - 23.5e9) < 0.1e9);
    ck_assert(fabs(nic("eth-100")->bw * 8.0 - 94e9) < 0.5e9);
    /* Latencies: NET ring Simple 14 us (3.2); TCP adds the kernel socket path (2.5, 10-30 us). */
    ck_assert(nic("ib-ndr")->latency_s == 14e-6);
    ck_assert(nic("roce-400")->latency_s == 14e-6);
    ck_assert(nic("eth-25")->latency_s >= 14e-6 + 10e-6 && nic("eth-25")->latency_s <= 14e-6 + 30e-6);
    ck_assert_int_eq(nic("ib-hdr")->kind, GS_LINK_IB);
    ck_assert_int_eq(nic("roce-100")->kind, GS_LINK_ROCE);
    ck_assert_int_eq(nic("eth-400")->kind, GS_LINK_ETHERNET);
}
END_TEST

START_TEST(test_ridge_points)
{
    /* Reference 6.6: memory-bound below peak / HBM bandwidth: ~153 FLOP/B for A100-80GB BF16
     * (312 / 2.039), ~295 for H100 SXM (989 / 3.35), ~281 for B200 (2250 / 8). */
    const gs_gpu *a = gpu("a100-80g"), *h = gpu("h100-sxm"), *b = gpu("b200");
    ck_assert(fabs(gs_gpu_peak_flops(a, GS_PREC_BF16) / a->hbm_bw - 153.0) < 1.0);
    ck_assert(fabs(gs_gpu_peak_flops(h, GS_PREC_BF16) / h->hbm_bw - 295.0) < 1.0);
    ck_assert(fabs(gs_gpu_peak_flops(b, GS_PREC_BF16) / b->hbm_bw - 281.0) < 1.0);
}
END_TEST

/* ------------------------------------------------------------------------ clusters ----- */

START_TEST(test_cluster_composition)
{
    gs_cluster c = cluster("dgx-a100-80g");
    ck_assert_str_eq(c.gpu.name, "a100-80g");
    ck_assert_str_eq(c.intra.name, "nvlink3");
    ck_assert_str_eq(c.nic.name, "ib-hdr");
    ck_assert_uint_eq(c.gpus_per_node, 8);
    ck_assert_uint_eq(c.nics_per_node, 8);
    ck_assert_int_eq(c.rail_optimized, 1);
    ck_assert(c.oversubscription == 1.0);
    /* 8 x HDR per node: 8 x 24 GB/s = 192 GB/s, the DGX-A100 multi-node AllReduce busBW an
     * NVIDIA engineer quotes (reference 2.1 / 2.3, nccl#1576). */
    ck_assert(REL_CLOSE(c.nic.bw * (double)c.nics_per_node, 192e9, 1e-12));

    c = cluster("dgx-h100");
    ck_assert_str_eq(c.gpu.name, "h100-sxm");
    ck_assert_str_eq(c.intra.name, "nvlink4");
    ck_assert_str_eq(c.nic.name, "ib-ndr");
    c = cluster("dgx-h200");
    ck_assert_str_eq(c.gpu.name, "h200");
    c = cluster("dgx-b200");
    ck_assert_str_eq(c.intra.name, "nvlink5");
    ck_assert_str_eq(c.nic.name, "ib-ndr");
    ck_assert_int_eq(c.host_cpu, GS_HOST_X86);
    /* DGX GB200 NVL72: one NVLink 5 domain of 72 GPUs, a 400G NIC per GPU, Grace hosts */
    c = cluster("gb200-nvl72");
    ck_assert_str_eq(c.gpu.name, "gb200");
    ck_assert_str_eq(c.intra.name, "nvlink5");
    ck_assert_uint_eq(c.gpus_per_node, 72);
    ck_assert_uint_eq(c.nics_per_node, 72);
    ck_assert_int_eq(c.host_cpu, GS_HOST_GRACE);
    ck_assert_str_eq(gs_host_cpu_name(GS_HOST_GRACE), "grace");
    gs_host_cpu h;
    ck_assert_int_eq(gs_host_cpu_parse("Grace", &h), 0);
    ck_assert_int_eq(h, GS_HOST_GRACE);
    ck_assert_int_eq(gs_host_cpu_parse("arm", &h), -1);

    c = cluster("pcie-a100-25gbe");
    ck_assert_str_eq(c.intra.name, "pcie-gen4");
    ck_assert_str_eq(c.nic.name, "eth-25");
    ck_assert_uint_eq(c.nics_per_node, 1);
    ck_assert_int_eq(c.rail_optimized, 0);

    c.nodes = 8; /* a scenario override */
    ck_assert_uint_eq(gs_cluster_gpus(&c), 64);
}
END_TEST

START_TEST(test_link_kind_names)
{
    ck_assert_str_eq(gs_link_kind_name(GS_LINK_NVLINK), "nvlink");
    ck_assert_str_eq(gs_link_kind_name(GS_LINK_PCIE), "pcie");
    ck_assert_str_eq(gs_link_kind_name(GS_LINK_IB), "ib");
    ck_assert_str_eq(gs_link_kind_name(GS_LINK_ROCE), "roce");
    ck_assert_str_eq(gs_link_kind_name(GS_LINK_ETHERNET), "ethernet");
}
END_TEST

/* -------------------------------------------------------------------------- errors ----- */

static void expect_invalid(const gs_cluster *c, gs_status want, const char *needle1,
                           const char *needle2)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_cluster_validate(c, &err), want);
    ck_assert_int_eq(err.status, want);
    ck_assert_msg(strstr(err.msg, needle1) != NULL, "'%s' not in '%s'", needle1, err.msg);
    ck_assert_msg(strstr(err.msg, needle2) != NULL, "'%s' not in '%s'", needle2, err.msg);
}

START_TEST(test_validate_errors)
{
    const gs_cluster base = cluster("dgx-h100");
    gs_cluster c;

    c = base, c.gpus_per_node = 0;
    expect_invalid(&c, GS_ERR_INPUT, "gpus_per_node", "= 0");
    c = base, c.nodes = 0;
    expect_invalid(&c, GS_ERR_INPUT, "nodes", "= 0");
    c = base, c.nics_per_node = 0;
    expect_invalid(&c, GS_ERR_INPUT, "nics_per_node", "= 0");
    c = base, c.nic.bw = 0.0;
    expect_invalid(&c, GS_ERR_INPUT, "nic.bw", "= 0");
    c = base, c.intra.nccl_bw = -1.0;
    expect_invalid(&c, GS_ERR_INPUT, "intra.nccl_bw", "= -1");
    c = base, c.gpu.hbm_bw = NAN;
    expect_invalid(&c, GS_ERR_INPUT, "gpu.hbm_bw", "expected a number in [1e+06, 1e+16]");
    /* absurd but positive rates: a step time would not be a printable number */
    c = base, c.nic.gbps = 1e-300;
    expect_invalid(&c, GS_ERR_INPUT, "nic.gbps = 1e-300", "expected a number in [0.001, 1e+06]");
    c = base, c.gpu.hbm_bw = 5e-324;
    expect_invalid(&c, GS_ERR_INPUT, "gpu.hbm_bw", "[1e+06, 1e+16]");
    c = base, c.gpu.peak_flops_fp16 = INFINITY;
    expect_invalid(&c, GS_ERR_INPUT, "gpu.peak_flops_fp16", "[1e+06, 1e+19]");
    c = base, c.oversubscription = 0.5;
    expect_invalid(&c, GS_ERR_INPUT, "oversubscription", "0.5");
    c = base, c.gpu.gemm_efficiency = 1.5;
    expect_invalid(&c, GS_ERR_INPUT, "gemm_efficiency", "1.5");
    c = base, c.nodes = 1ULL << 40, c.gpus_per_node = 1ULL << 40;
    expect_invalid(&c, GS_ERR_OVERFLOW, "nodes", "gpus_per_node");
    ck_assert_uint_eq(gs_cluster_gpus(&c), 0);
    ck_assert_int_eq(gs_cluster_validate(NULL, NULL), GS_ERR_INPUT);

    c = base, c.nodes = 1024, c.oversubscription = 2.0;
    ck_assert_int_eq(gs_cluster_validate(&c, NULL), GS_OK);
    ck_assert_uint_eq(gs_cluster_gpus(&c), 8192);
    /* V100's bf16 = 0 is legal (unsupported dtype). */
    c = cluster("dgx-a100-80g");
    c.gpu = *gpu("v100-sxm2-32g");
    ck_assert_int_eq(gs_cluster_validate(&c, NULL), GS_OK);
}
END_TEST

/* --------------------------------------------------------------------------- names ----- */

START_TEST(test_edit_distance)
{
    ck_assert_uint_eq(gs_edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(gs_edit_distance("", "abc"), 3);
    ck_assert_uint_eq(gs_edit_distance("abc", ""), 3);
    ck_assert_uint_eq(gs_edit_distance("", ""), 0);
    ck_assert_uint_eq(gs_edit_distance("DGX-H100", "dgx-h100"), 0);
    ck_assert_uint_eq(gs_edit_distance("flaw", "lawn"), 2);
    ck_assert_uint_eq(gs_edit_distance("h100", "h200"), 1);
    /* Long inputs are clamped, not overrun: 300 x 'a' vs 'a' = 299 deletions. */
    char longname[301];
    memset(longname, 'a', 300);
    longname[300] = '\0';
    ck_assert_uint_eq(gs_edit_distance(longname, "a"), 299);
    ck_assert_uint_eq(gs_edit_distance(longname, longname), 0);
}
END_TEST

/* A second implementation: the full (la+1) x (lb+1) matrix, case-folded. */
static size_t full_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), d[13][13];
    for (size_t i = 0; i <= la; i++)
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t sub = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* The bounded distance is the exact one up to its bound and bound + 1 past it, on random
 * strings over a small alphabet (so that near and far pairs both occur). */
START_TEST(test_edit_distance_bounded)
{
    unsigned s = 12345;
    char a[13], b[13];
    for (int trial = 0; trial < 20000; trial++) {
        char *w[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            s = s * 1103515245u + 12345u;
            size_t n = (s >> 16) % 13;
            for (size_t i = 0; i < n; i++) {
                s = s * 1103515245u + 12345u;
                w[k][i] = "abAB-"[(s >> 16) % 5];
            }
            w[k][n] = '\0';
        }
        s = s * 1103515245u + 12345u;
        size_t max = (s >> 16) % 8, want = full_distance(a, b);
        ck_assert_uint_eq(gs_edit_distance(a, b), want);
        ck_assert_uint_eq(gs_edit_distance_max(a, b, max), want <= max ? want : max + 1);
    }
}
END_TEST

START_TEST(test_lookup_and_nearest)
{
    ck_assert_ptr_eq(gs_cluster_preset_find("DGX-A100-80G"), gs_cluster_preset_find("dgx-a100-80g"));
    ck_assert_ptr_nonnull(gs_gpu_preset_find("H100-SXM"));
    ck_assert_ptr_nonnull(gs_nic_preset_find("IB-NDR"));
    ck_assert_ptr_nonnull(gs_fabric_preset_find("NVLink4"));
    ck_assert_ptr_null(gs_gpu_preset_find("h100"));
    ck_assert_ptr_null(gs_cluster_preset_find(NULL));

    ck_assert_str_eq(gs_cluster_preset_nearest("dgx-a10-80g"), "dgx-a100-80g");
    ck_assert_str_eq(gs_cluster_preset_nearest("DGX-H10"), "dgx-h100");
    ck_assert_str_eq(gs_gpu_preset_nearest("h100"), "h100-sxm"); /* prefix beats h200 */
    ck_assert_str_eq(gs_gpu_preset_nearest("a100-80gb"), "a100-80g");
    ck_assert_str_eq(gs_nic_preset_nearest("ib-hdr200"), "ib-hdr");
    ck_assert_str_eq(gs_nic_preset_nearest("eth25"), "eth-25");
    ck_assert_str_eq(gs_fabric_preset_nearest("nvlink-4"), "nvlink4");
    ck_assert_str_eq(gs_fabric_preset_nearest("pcie4"), "pcie-gen4");
    ck_assert_ptr_null(gs_gpu_preset_nearest(NULL));
}
END_TEST

static Suite *hardware_suite(void)
{
    Suite *s = suite_create("hardware");
    TCase *tc = tcase_create("presets");
    tcase_add_test(tc, test_required_names);
    tcase_add_test(tc, test_every_preset_sane);
    tcase_add_test(tc, test_gpu_numbers);
    suite_add_tcase(s, tc);

    tc = tcase_create("derived");
    tcase_add_test(tc, test_gemm_efficiency_is_mamf_over_spec);
    tcase_add_test(tc, test_nccl_intra_bw);
    tcase_add_test(tc, test_nic_rates);
    tcase_add_test(tc, test_ridge_points);
    suite_add_tcase(s, tc);

    tc = tcase_create("clusters");
    tcase_add_test(tc, test_cluster_composition);
    tcase_add_test(tc, test_link_kind_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_validate_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, test_edit_distance);
    tcase_add_test(tc, test_edit_distance_bounded);
    tcase_add_test(tc, test_lookup_and_nearest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hardware_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
