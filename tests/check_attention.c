/* Check suite for sim/attention: the attention kernel classes against hand derivations from the
 * measured figures in the reference (kernel-facts.csv: FlashAttention-2 on A100 230 of 312
 * TFLOP/s forward and 63% backward, FA2's Ampere path on H100 335 of 989, FA3 661 of 989 at
 * {4, 8448, 16, 128}) and the three shape effects the model names (tile overhead s / (s + 128),
 * causal diagonal 1 + 128 / s, the exponential's cost c = tensor FLOP per clock per SM / 16). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "engine/framework.h"
#include "engine/hardware.h"
#include "engine/schedule.h"
#include "sim/attention.h"
#include "sim/compute.h"

#define REL_CLOSE(a, b, tol) (fabs((a) / (b) - 1.0) < (tol))

static gs_attn_model attn(gs_attn_impl impl, const char *gpu)
{
    const gs_gpu *g = gs_gpu_preset_find(gpu);
    ck_assert_msg(g != NULL, "gpu %s", gpu);
    gs_attn_model m;
    gs_attn_model_init(&m, impl, g);
    return m;
}

/* The attention-core event build_layer.c emits: batch b x heads, m = n = s, k = head dim,
 * FLOPs 4 s^2 hd per head forward (Megatron's count), twice that backward. */
static gs_event attn_event(gs_phase phase, uint32_t s, uint32_t hd, uint32_t batch)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE;
    e.op = GS_OP_ATTN;
    e.phase = (uint8_t)phase;
    e.gemm_m = s;
    e.gemm_n = s;
    e.gemm_k = hd;
    e.gemm_batch = batch;
    e.flops = (phase == GS_PHASE_BWD ? 2.0 : 1.0) * 4.0 * (double)s * s * hd * batch;
    return e;
}

START_TEST(test_measured_points)
{
    /* at the reference shape the model returns the measurement itself */
    gs_attn_model a = attn(GS_ATTN_FLASH2, "a100-80g");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&a, 128, 16384, 0), 230.0 / 312.0, 1e-9));
    ck_assert(REL_CLOSE(gs_attn_efficiency(&a, 128, 16384, 1), 0.63, 1e-9));
    gs_attn_model h = attn(GS_ATTN_FLASH2, "h100-sxm");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&h, 128, 16384, 0), 335.0 / 989.0, 1e-9));
    gs_attn_model f3 = attn(GS_ATTN_FLASH3, "h100-sxm");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&f3, 128, 8448, 0), 661.0 / 989.0, 1e-9));
    /* FA3 backward: 1.625 x FA2's on Hopper, FA2's Hopper backward at its A100 ratio 0.63/0.737 */
    ck_assert(REL_CLOSE(gs_attn_efficiency(&f3, 128, 16384, 1),
                        1.625 * (335.0 / 989.0) * 0.63 / (230.0 / 312.0) * ((16384.0 / 16512.0) / (8448.0 / 8576.0)),
                        1e-9));
}
END_TEST

/* Blackwell against the B200 sweep the entries come from (NVIDIA/cudnn-frontend
 * benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv at
 * bb37575: cuDNN 9.13 and PyTorch's FlashAttention-2, 128 query / 8 KV heads of 128, causal,
 * batch 1; its TFLOP/s count 4 s^2 hd heads / 2 forward and 2.5 x that backward). The event
 * time gs_attn_fused_time gives each length, converted back to the sweep's count, must be within
 * 9% (cuDNN) and 3% (FA2) of the measured rate from 4k to 128k tokens; the Hopper entries
 * (FA3's class for cuDNN, FA2's Hopper path) put them up to 68% and 2.4x too fast. */
START_TEST(test_blackwell_sweep)
{
    static const struct {
        double s, cudnn_f, cudnn_b, fa2_f, fa2_b;
    } sweep[] = {
        {4096, 855.678, 701.265, 324.899, 256.427},       {8192, 1171.278, 942.509, 373.392, 298.867},
        {16384, 1332.415, 1074.776, 394.495, 319.979},    {32768, 1419.000, 1108.688, 403.739, 330.801},
        {65536, 1382.330, 1073.059, 408.739, 335.402},    {131072, 1355.418, 1047.843, 410.988, 336.043},
    };
    gs_attn_model c = attn(GS_ATTN_CUDNN, "b200"), f = attn(GS_ATTN_FLASH2, "b200");
    double peak = gs_gpu_preset_find("b200")->peak_flops_bf16;
    for (size_t i = 0; i < sizeof sweep / sizeof sweep[0]; i++) {
        uint32_t s = (uint32_t)sweep[i].s;
        for (int bwd = 0; bwd < 2; bwd++) {
            gs_event e = attn_event(bwd ? GS_PHASE_BWD : GS_PHASE_FWD, s, 128, 128);
            double counted = (bwd ? 2.5 : 1.0) * 4.0 * sweep[i].s * sweep[i].s * 128.0 * 128.0 / 2.0;
            double rc = counted / gs_attn_fused_time(&c, &e, peak) / 1e12;
            double rf = counted / gs_attn_fused_time(&f, &e, peak) / 1e12;
            double wc = bwd ? sweep[i].cudnn_b : sweep[i].cudnn_f, wf = bwd ? sweep[i].fa2_b : sweep[i].fa2_f;
            ck_assert_msg(REL_CLOSE(rc, wc, 0.09), "cuDNN s %u %s: %.0f vs %.0f TFLOP/s", s, bwd ? "bwd" : "fwd", rc, wc);
            ck_assert_msg(REL_CLOSE(rf, wf, 0.03), "FA2 s %u %s: %.0f vs %.0f TFLOP/s", s, bwd ? "bwd" : "fwd", rf, wf);
        }
    }
}
END_TEST

START_TEST(test_shape_effects)
{
    gs_attn_model a = attn(GS_ATTN_FLASH2, "a100-80g");
    /* s = 512: (512 / 640) / (16384 / 16512) = 0.80625 of the measured 0.7372 */
    ck_assert(REL_CLOSE(gs_attn_efficiency(&a, 128, 512, 0), 230.0 / 312.0 * 0.8 / (16384.0 / 16512.0), 1e-9));
    /* head dim 64 on A100 (c = 2048 / 16 = 128 FLOPs per exp): (256 / 384) / (512 / 640) =
     * 0.8333 */
    ck_assert(REL_CLOSE(gs_attn_efficiency(&a, 64, 16384, 0) / gs_attn_efficiency(&a, 128, 16384, 0),
                        (256.0 / 384.0) / (512.0 / 640.0), 1e-9));
    /* on H100 the exp costs 4096 / 16 = 256: head dim 64 loses more, (256 / 512) / (512 / 768) */
    gs_attn_model h = attn(GS_ATTN_FLASH2, "h100-sxm");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&h, 64, 16384, 0) / gs_attn_efficiency(&h, 128, 16384, 0),
                        (256.0 / 512.0) / (512.0 / 768.0), 1e-9));
    /* FA3 hides the exp under the GEMMs: no loss at head dim 64 (4 x 64 = 256 = c), half at 32 */
    gs_attn_model f3 = attn(GS_ATTN_FLASH3, "h100-sxm");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&f3, 64, 16384, 0), gs_attn_efficiency(&f3, 128, 16384, 0), 1e-9));
    ck_assert(REL_CLOSE(gs_attn_efficiency(&f3, 32, 16384, 0), 0.5 * gs_attn_efficiency(&f3, 128, 16384, 0), 1e-9));
}
END_TEST

START_TEST(test_event_time)
{
    /* 4 x 4096^2 x 128 x 32 FLOPs counted forward; causal, the kernel does half plus the
     * diagonal blocks: x 0.5 x (1 + 128 / 4096); at 312e12 x 0.7372 x (4096/4224) / (16384/16512). */
    gs_attn_model a = attn(GS_ATTN_FLASH2, "a100-80g");
    gs_event f = attn_event(GS_PHASE_FWD, 4096, 128, 32);
    double eff = 230.0 / 312.0 * (4096.0 / 4224.0) / (16384.0 / 16512.0);
    double want = 4.0 * 4096.0 * 4096.0 * 128.0 * 32.0 * 0.5 * (1.0 + 128.0 / 4096.0) / (312e12 * eff);
    ck_assert_msg(REL_CLOSE(gs_attn_fused_time(&a, &f, 312e12), want, 1e-9), "fwd %g vs %g",
                  gs_attn_fused_time(&a, &f, 312e12), want);
    /* backward: 2.5 x the forward's kernel FLOPs at the backward efficiency */
    gs_event b = attn_event(GS_PHASE_BWD, 4096, 128, 32);
    double beff = 0.63 * (4096.0 / 4224.0) / (16384.0 / 16512.0);
    double bwant = 2.5 * 4.0 * 4096.0 * 4096.0 * 128.0 * 32.0 * 0.5 * (1.0 + 128.0 / 4096.0) / (312e12 * beff);
    ck_assert(REL_CLOSE(gs_attn_fused_time(&a, &b, 312e12), bwant, 1e-9));
    /* through the compute model: the fused time plus one launch forward, two backward */
    gs_compute_model m;
    gs_compute_model_init(&m, gs_gpu_preset_find("a100-80g"), GS_PREC_BF16);
    m.attn = a;
    ck_assert(REL_CLOSE(gs_compute_time(&m, &f), want + m.launch_s, 1e-9));
    ck_assert(REL_CLOSE(gs_compute_time(&m, &b), bwant + 2 * m.launch_s, 1e-9));
}
END_TEST

START_TEST(test_fallbacks)
{
    /* no FlashAttention kernel before sm80: unfused */
    gs_attn_model v = attn(GS_ATTN_FLASH2, "v100-sxm2-32g");
    ck_assert_int_eq(v.impl, GS_ATTN_UNFUSED);
    gs_event f = attn_event(GS_PHASE_FWD, 2048, 128, 8);
    ck_assert(gs_attn_fused_time(&v, &f, 125e12) < 0.0);
    /* FA3 is Hopper-only: on A100 it runs as FA2 */
    gs_attn_model a3 = attn(GS_ATTN_FLASH3, "a100-80g"), a2 = attn(GS_ATTN_FLASH2, "a100-80g");
    ck_assert(REL_CLOSE(gs_attn_efficiency(&a3, 128, 4096, 0), gs_attn_efficiency(&a2, 128, 4096, 0), 1e-12));
    /* FA1 below FA2 on either generation; FA3 above FA2 on Hopper */
    gs_attn_model a1 = attn(GS_ATTN_FLASH1, "a100-80g");
    ck_assert(gs_attn_efficiency(&a1, 128, 4096, 0) < gs_attn_efficiency(&a2, 128, 4096, 0));
    gs_attn_model h2 = attn(GS_ATTN_FLASH2, "h100-sxm"), h3 = attn(GS_ATTN_FLASH3, "h100-sxm");
    ck_assert(gs_attn_efficiency(&h3, 128, 4096, 1) > gs_attn_efficiency(&h2, 128, 4096, 1));
}
END_TEST

START_TEST(test_resolve)
{
    /* SDPA's flash backend is FA2; AUTO follows the framework and the GPU */
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_SDPA, GS_FW_FSDP2, 1, 90), GS_ATTN_FLASH2);
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_AUTO, GS_FW_MEGATRON, 1, 90), GS_ATTN_CUDNN);
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_AUTO, GS_FW_MEGATRON, 1, 80), GS_ATTN_FLASH2);
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_AUTO, GS_FW_FSDP1, 1, 90), GS_ATTN_FLASH2);
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_AUTO, GS_FW_FSDP1, 0, 90), GS_ATTN_UNFUSED);
    ck_assert_int_eq(gs_attention_resolve(GS_ATTN_FLASH1, GS_FW_FSDP1, 0, 80), GS_ATTN_FLASH1);
}
END_TEST

START_TEST(test_framework_bytes)
{
    /* per element, e = 2: fused residual add + norm 3e + 2e = 10 B; eager RMSNorm's passes
     * (x.float(), pow, mean, rsqrt mul, cast back, weight mul) 28 + 4e = 36 B plus the residual
     * add's 6 B = 42 B; an eager LayerNorm is one native kernel: 10 B like the fused one */
    ck_assert_uint_eq(gs_norm_bytes_per_element(1, 1, 2, 0), 10);
    ck_assert_uint_eq(gs_norm_bytes_per_element(0, 1, 2, 0), 42);
    ck_assert_uint_eq(gs_norm_bytes_per_element(0, 0, 2, 0), 10);
    ck_assert_uint_eq(gs_norm_bytes_per_element(1, 1, 2, 1), 11); /* the dropout mask byte */
    /* SwiGLU: fused 3e = 6 B, eager silu then product 5e = 10 B; GELU 2e either way */
    ck_assert_uint_eq(gs_act_bytes_per_element(1, 1, 2), 6);
    ck_assert_uint_eq(gs_act_bytes_per_element(0, 1, 2), 10);
    ck_assert_uint_eq(gs_act_bytes_per_element(0, 0, 2), 4);
    /* rotary: fused read + write 4 B; eager float cast, complex product, cast back 2e + 16 = 20 B */
    ck_assert(gs_rope_bytes_per_element(1, 2) == 4.0);
    ck_assert(gs_rope_bytes_per_element(0, 2) == 20.0);
    /* unfused scores: Megatron's fused softmax 4e = 8 B, HF eager 9e + 8 = 26 B */
    ck_assert(gs_unfused_score_bytes(1, 2) == 8.0);
    ck_assert(gs_unfused_score_bytes(0, 2) == 26.0);
    /* AUTO: the PyTorch FSDP names mean FSDP1, ZeRO-2/3 DeepSpeed, the rest Megatron */
    ck_assert_int_eq(gs_framework_resolve(GS_FW_AUTO, GS_SHARD_FULL_SHARD), GS_FW_FSDP1);
    ck_assert_int_eq(gs_framework_resolve(GS_FW_AUTO, GS_SHARD_ZERO3), GS_FW_DEEPSPEED);
    ck_assert_int_eq(gs_framework_resolve(GS_FW_AUTO, GS_SHARD_ZERO1), GS_FW_MEGATRON);
    ck_assert_int_eq(gs_framework_fused(GS_FW_FSDP2, 1), 1);
    ck_assert_int_eq(gs_framework_fused(GS_FW_FSDP2, 0), 0);
}
END_TEST

START_TEST(test_power_cap)
{
    /* dynamic power ~ f^3: an H100 SXM (700 W) capped at 350 W keeps cbrt(1/2) = 0.7937 of its
     * clock; the cap at or above the TDP changes nothing */
    gs_gpu g = *gs_gpu_preset_find("h100-sxm");
    ck_assert(g.tdp_w == 700.0);
    g.power_w = 350.0;
    ck_assert(REL_CLOSE(gs_gpu_clock_factor(&g), cbrt(0.5), 1e-12));
    gs_compute_model m;
    gs_compute_model_init(&m, &g, GS_PREC_BF16);
    ck_assert(REL_CLOSE(m.peak_flops, 989.4e12 * cbrt(0.5), 1e-12));
    g.power_w = 700.0;
    ck_assert(gs_gpu_clock_factor(&g) == 1.0);
    /* the H100 NVL's 400 W: (400 / 700)^(1/3) x 989.4 = 821 TFLOP/s, within 2% of its datasheet
     * 835.5: the cube law is the datasheet's own relation between the two parts */
    ck_assert(fabs(cbrt(400.0 / 700.0) * 989.4 / 835.5 - 1.0) < 0.02);
}
END_TEST

START_TEST(test_overlap_factor)
{
    /* A100 80GB (108 SMs, 400 W, 2039 GB/s x 0.85 = 1733.15 GB/s): beside 16 channels moving 200
     * GB/s of bus traffic at 2.5 HBM bytes a bus byte, H = 500 GB/s of HBM traffic. A GEMM: 108 /
     * 92 = 1.17391 for the SMs, times (400 / (400 - 155e-12 x 500e9))^(1/3) = (400 / 322.5)^(1/3)
     * = 1.07443 for the power the traffic draws: 1.26128. A memory-bound kernel: 1733.15 /
     * (1733.15 - 500) = 1.40546. The measured worst case 1.76 caps both. */
    gs_compute_model m;
    gs_compute_model_init(&m, gs_gpu_preset_find("a100-80g"), GS_PREC_BF16);
    m.overlap_hbm_per_byte = 2.5;
    double tensor, memory;
    gs_compute_overlap_factors(&m, 200e9, 16, &tensor, &memory);
    ck_assert(REL_CLOSE(tensor, 1.26128, 1e-5));
    ck_assert(REL_CLOSE(memory, 1.40546, 1e-5));
    /* waiting (no traffic): the SMs alone, and nothing for a memory-bound kernel */
    gs_compute_overlap_factors(&m, 0.0, 16, &tensor, &memory);
    ck_assert(REL_CLOSE(tensor, 108.0 / 92.0, 1e-12));
    ck_assert(memory == 1.0);
    gs_compute_overlap_factors(&m, 5e12, 16, &tensor, &memory);
    ck_assert(tensor == m.overlap_slowdown && memory == m.overlap_slowdown);
    ck_assert(REL_CLOSE(m.overlap_slowdown, 2.08 / 1.18, 1e-2));
    /* a calibration's flat factor: overlap_hbm_per_byte 0 */
    m.overlap_hbm_per_byte = 0.0;
    m.overlap_slowdown = 1.2;
    gs_compute_overlap_factors(&m, 200e9, 16, &tensor, &memory);
    ck_assert(tensor == 1.2 && memory == 1.2);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_measured_points);
    tcase_add_test(tc, test_blackwell_sweep);
    tcase_add_test(tc, test_shape_effects);
    tcase_add_test(tc, test_event_time);
    tcase_add_test(tc, test_fallbacks);
    tcase_add_test(tc, test_resolve);
    tcase_add_test(tc, test_framework_bytes);
    tcase_add_test(tc, test_power_cap);
    tcase_add_test(tc, test_overlap_factor);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(attention_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
