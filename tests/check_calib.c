/* Check suite for the calibration fits (sim/calib.c), the extended calibration file
 * (sim/calib_file.c) and the measured-collective model (sim/measured.c). Synthetic data come
 * from known parameters plus seeded noise; the expected values are those parameters, and the
 * tolerances are stated beside each assertion. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/roles.h"
#include "sim/calib.h"
#include "sim/calib_file.h"
#include "sim/collective.h"
#include "sim/collective_internal.h" /* gs__measured_time: the calibrated lines the sim takes */
#include "sim/compute.h"
#include "sim/topology.h"

/* splitmix64: a seeded uniform in [-1, 1) */
static double noise(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

/* 11 sizes 1 KiB .. 1 GiB (x4), t = 20 us + size / 5 GB/s, times (1 + 5% uniform noise). */
static size_t synth_line(double *x, double *t, uint64_t seed)
{
    uint64_t st = seed;
    size_t n = 0;
    for (double b = 1024; b <= 1073741824.0; b *= 4, n++) {
        x[n] = b;
        t[n] = (20e-6 + b / 5e9) * (1 + 0.05 * noise(&st));
    }
    return n;
}

START_TEST(test_alpha_beta_recovers)
{
    double x[16], t[16];
    gs_error err;
    gs_error_init(&err);
    for (uint64_t seed = 1; seed <= 5; seed++) {
        size_t n = synth_line(x, t, seed);
        gs_fit_ab f;
        ck_assert_int_eq(gs_fit_alpha_beta(x, t, n, &f, &err), GS_OK);
        /* 5% noise on every point: latency within 10%, bandwidth within 5% */
        ck_assert_msg(fabs(f.alpha_s - 20e-6) < 2e-6, "seed %d: alpha %g", (int)seed, f.alpha_s);
        ck_assert_msg(fabs(f.beta_bytes_per_s - 5e9) < 0.25e9, "seed %d: beta %g", (int)seed, f.beta_bytes_per_s);
        ck_assert(f.r2 > 0.99 && f.rms_rel_resid < 0.05 && f.n == n);
    }
    /* exact data: exact fit */
    for (size_t i = 0; i < 11; i++)
        t[i] = 20e-6 + x[i] / 5e9;
    gs_fit_ab f;
    ck_assert_int_eq(gs_fit_alpha_beta(x, t, 11, &f, &err), GS_OK);
    ck_assert(fabs(f.alpha_s - 20e-6) < 1e-9 && fabs(f.beta_bytes_per_s / 5e9 - 1) < 1e-6);
}
END_TEST

START_TEST(test_alpha_beta_outliers)
{
    double x[16], t[16];
    gs_error err;
    gs_error_init(&err);
    size_t n = synth_line(x, t, 7);
    /* three points 10x slow (a descheduled thread), one at the latency end, two in the middle */
    t[0] *= 10, t[4] *= 10, t[8] *= 10;
    gs_fit_ab f;
    ck_assert_int_eq(gs_fit_alpha_beta(x, t, n, &f, &err), GS_OK);
    ck_assert_msg(fabs(f.alpha_s - 20e-6) < 3e-6, "alpha %g", f.alpha_s);
    ck_assert_msg(fabs(f.beta_bytes_per_s - 5e9) < 0.25e9, "beta %g", f.beta_bytes_per_s);
    ck_assert_msg(f.outliers == 3, "%zu outliers", f.outliers);
    /* an ordinary least-squares fit through the same points is far off: the robust weights matter */
}
END_TEST

START_TEST(test_alpha_beta_errors)
{
    double x[3] = {1, 2, 3}, t[3] = {1, -1, 2};
    gs_fit_ab f;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_fit_alpha_beta(x, t, 2, &f, &err), GS_ERR_INPUT);
    ck_assert_int_eq(gs_fit_alpha_beta(x, t, 3, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "point 1"));
    /* a pure bandwidth line (alpha 0, noise making the intercept negative) keeps alpha at 0 */
    double xs[6], ts[6];
    for (int i = 0; i < 6; i++) {
        xs[i] = 1e6 * (i + 1);
        ts[i] = xs[i] / 1e9 * (i % 2 ? 1.01 : 0.99);
    }
    ck_assert_int_eq(gs_fit_alpha_beta(xs, ts, 6, &f, &err), GS_OK);
    ck_assert(f.alpha_s >= 0 && fabs(f.beta_bytes_per_s / 1e9 - 1) < 0.03);
    double m[5] = {5, 1, 4, 2, 3};
    ck_assert(gs_calib_median(m, 5) == 3);
    double m2[4] = {4, 1, 3, 2};
    ck_assert(gs_calib_median(m2, 4) == 2.5);
}
END_TEST

/* eff = 0.9 f / (f + 2e6) and eff = 0.8 (1 - exp(-f / 5e7)), 13 points f = 1e4 .. 1e10
 * (x sqrt(10)^k), 3% noise: the right form, e_max within 3%, f0 within 15%. */
START_TEST(test_gemm_curve)
{
    gs_error err;
    gs_error_init(&err);
    for (int form = 0; form < GS_GEMM_FORM_COUNT; form++) {
        double f[16], e[16];
        uint64_t st = 42 + (uint64_t)form;
        size_t n = 0;
        double e_max = form == GS_GEMM_FORM_HYPERBOLIC ? 0.9 : 0.8, f0 = form == GS_GEMM_FORM_HYPERBOLIC ? 2e6 : 5e7;
        for (double x = 1e4; x <= 1.0001e10; x *= sqrt(10.0), n++) {
            f[n] = x;
            e[n] = gs_gemm_curve_eval((gs_gemm_form)form, e_max, f0, x) * (1 + 0.03 * noise(&st));
        }
        gs_fit_gemm g;
        ck_assert_int_eq(gs_fit_gemm_curve(f, e, n, &g, &err), GS_OK);
        ck_assert_msg((int)g.form == form, "form %d fitted as %d", form, (int)g.form);
        ck_assert_msg(fabs(g.e_max / e_max - 1) < 0.03, "e_max %g", g.e_max);
        ck_assert_msg(fabs(g.f0_flops / f0 - 1) < 0.15, "f0 %g", g.f0_flops);
        ck_assert(g.rms_rel_resid < 0.04 && g.r2 > 0.95);
    }
    /* the curve itself: hyperbolic at f = f0 is e_max / 2; exp at f = f0 is e_max (1 - 1/e) */
    ck_assert(fabs(gs_gemm_curve_eval(GS_GEMM_FORM_HYPERBOLIC, 0.8, 1e6, 1e6) - 0.4) < 1e-12);
    ck_assert(fabs(gs_gemm_curve_eval(GS_GEMM_FORM_EXP, 1.0, 1e6, 1e6) - (1 - exp(-1))) < 1e-12);
}
END_TEST

/* ---- the calibration file ---- */

static char tmp_path[64];

static void write_tmp(const char *text)
{
    strcpy(tmp_path, "/tmp/gs_check_calib_XXXXXX");
    int fd = mkstemp(tmp_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
}

static void remove_tmp(void)
{
    if (tmp_path[0])
        unlink(tmp_path);
    tmp_path[0] = 0;
}

static const char good[] =
    "{\"driver\": \"host\", \"compute\": {\"peak_flops\": 4e10, \"cores\": 2, \"background_load\": 0.5,"
    " \"attn_flops\": 2e10, \"launch_s\": 1e-6,"
    " \"gemm_curve\": {\"form\": \"hyperbolic\", \"e_max\": 0.9, \"f0_flops\": 2e6},"
    " \"elementwise_bw\": {\"adamw\": 8e9, \"rmsnorm\": 1.6e10, \"swiglu\": 4e9, \"add\": 3e10}},"
    " \"links\": {\"intra\": {\"all_reduce\": [{\"ranks\": 2, \"alpha_s\": 1e-5, \"beta_bytes_per_s\": 2e9},"
    " {\"ranks\": 4, \"alpha_s\": 3e-5, \"beta_bytes_per_s\": 1e9}],"
    " \"send_recv\": {\"alpha_s\": 5e-6, \"beta_bytes_per_s\": 4e9}}}}";

START_TEST(test_file_applies)
{
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    write_tmp(good);
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    const gs_cluster *cl = gs_cluster_preset_find("dgx-a100-80g");
    ck_assert_ptr_nonnull(cl);
    gs_topo t;
    gs_topo_init(&t, cl);
    gs_compute_model cm;
    gs_compute_model_init(&cm, &cl->gpu, GS_PREC_FP32);
    gs_calib_apply(&c, 1, &cm, &t);
    ck_assert(cm.cores == 2 && cm.background_load == 0.5 && cm.gemm_curve && cm.gemm_e_max == 0.9);
    ck_assert(cm.elementwise_bw[GS_OP_OPTIMIZER] == 8e9 && cm.elementwise_bw[GS_OP_LOSS] == 3e10);
    ck_assert(t.one_machine && t.fit_intra.set);

    /* all-reduce of 1 MB on 2 ranks: 10 us + 1e6 / 2e9 s = 510 us */
    gs_coll_shape sh = {2, 1, 2, 1, 0.0};
    gs_coll_cost cost;
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLREDUCE, &sh, 1000000, GS_ALGO_COUNT, &cost), GS_OK);
    ck_assert(fabs(cost.time_s - 510e-6) < 1e-12);
    /* 3 ranks: halfway between 2 and 4: alpha 20 us, 1/beta = (0.5 + 1) / 2 ns/B: 20 + 750 us */
    sh = (gs_coll_shape){3, 1, 3, 1};
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLREDUCE, &sh, 1000000, GS_ALGO_COUNT, &cost), GS_OK);
    ck_assert(fabs(cost.time_s - 770e-6) < 1e-12);
    /* 8 ranks on 2 nodes: a host calibration is one machine, so the 4-rank line applies */
    sh = (gs_coll_shape){8, 2, 4, 1};
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLREDUCE, &sh, 1000000, GS_ALGO_COUNT, &cost), GS_OK);
    ck_assert(fabs(cost.time_s - 1030e-6) < 1e-12);
    /* send/recv: 5 us + 1e6 / 4e9 s = 255 us, on a node or across */
    ck_assert(fabs(gs_p2p_time(&t, 1, 1000000) - 255e-6) < 1e-12);
    ck_assert(fabs(gs_p2p_time(&t, 0, 1000000) - 255e-6) < 1e-12);
    /* an op the file does not name keeps the NCCL model (all-gather: not 0, not a fit) */
    sh = (gs_coll_shape){2, 1, 2, 1};
    ck_assert_int_eq(gs_coll_estimate(&t, GS_COLL_ALLGATHER, &sh, 1000000, GS_ALGO_COUNT, &cost), GS_OK);
    ck_assert(cost.time_s > 0 && cost.algo != GS_ALGO_COUNT);

    /* compute: a 256 x 256 x 256 forward GEMM event: 2^25 FLOPs at 4e10 x 0.9 x 2^25 / (2^25 + 2e6)
     * plus one launch */
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.op = GS_OP_QKV, e.role = GS_ROLE_QKV, e.phase = GS_PHASE_FWD;
    e.gemm_m = e.gemm_n = e.gemm_k = 256, e.gemm_batch = 1;
    e.flops = 2.0 * 256 * 256 * 256, e.bytes = 3 * 256 * 256 * 4;
    double f = e.flops, rate = 4e10 * 0.9 * f / (f + 2e6);
    ck_assert(fabs(gs_compute_time(&cm, &e) - (f / rate + 1e-6)) < 1e-12);
    /* the optimizer over 1 MB at its own 8 GB/s plus a launch */
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.op = GS_OP_OPTIMIZER, e.phase = GS_PHASE_OPTIM, e.bytes = 1000000, e.flops = 5e5;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (1e6 / 8e9 + 1e-6)) < 1e-12);
    remove_tmp();
}
END_TEST

/* Each bad file is refused (GS_ERR_INPUT) with a message naming the field. */
START_TEST(test_file_rejects)
{
    static const struct {
        const char *text, *fragment;
    } cases[] = {
        {"{\"compute\": {\"gemm_curve\": {\"form\": \"exp\", \"e_max\": 0.9}}}", "compute.gemm_curve.f0_flops: missing"},
        {"{\"compute\": {\"gemm_curve\": {\"form\": \"cubic\", \"e_max\": 0.9, \"f0_flops\": 1}}}",
         "compute.gemm_curve.form"},
        {"{\"compute\": {\"gemm_curve\": {\"form\": \"exp\", \"e_max\": 1.5, \"f0_flops\": 1}}}",
         "compute.gemm_curve.e_max"},
        {"{\"compute\": {\"elementwise_bw\": {\"adamw\": \"fast\"}}}", "compute.elementwise_bw.adamw"},
        {"{\"compute\": {\"elementwise_bw\": {\"gelu\": 1e9}}}", "compute.elementwise_bw.gelu: unknown key"},
        {"{\"compute\": {\"cores\": -2}}", "compute.cores"},
        {"{\"links\": {\"intra\": {\"all_reduce\": [{\"ranks\": 2, \"alpha_s\": 1e-5}]}}}",
         "links.intra.all_reduce[0].beta_bytes_per_s: missing"},
        {"{\"links\": {\"intra\": {\"all_reduce\": [{\"ranks\": 2.5, \"alpha_s\": 1e-5, \"beta_bytes_per_s\": 1e9}]}}}",
         "links.intra.all_reduce[0].ranks"},
        {"{\"links\": {\"intra\": {\"all_reduce\": [{\"ranks\": 4, \"alpha_s\": 0, \"beta_bytes_per_s\": 1e9},"
         " {\"ranks\": 2, \"alpha_s\": 0, \"beta_bytes_per_s\": 1e9}]}}}", "ascending"},
        {"{\"links\": {\"intra\": {\"all_reduce\": {\"ranks\": 2}}}}", "links.intra.all_reduce: found an object"},
        {"{\"links\": {\"intra\": {\"gather\": []}}}", "links.intra.gather: unknown key"},
        {"{\"links\": {\"intra\": {\"send_recv\": {\"alpha_s\": 1e-5, \"beta_bytes_per_s\": null}}}}",
         "links.intra.send_recv.beta_bytes_per_s: found null"},
        {"{\"links\": {\"shm\": {}}}", "links.shm: unknown key"},
        {"{\"driver\": 3}", "driver: found a number"},
        {"{\"compute\": {\"concurrency_slowdown\": \"high\"}}", "compute.concurrency_slowdown: found a string"},
        {"{\"compute\": {\"concurrency_slowdown\": -0.1}}", "compute.concurrency_slowdown: found -0.1"},
        {"{\"compute\": {\"qkv_rope_s_per_token\": [1]}}", "compute.qkv_rope_s_per_token: found a list"},
        {"{\"compute\": {\"collective_cpu_share\": 1.5}}", "compute.collective_cpu_share: found 1.5"},
        {"{\"compute\": {\"gemm_terms\": {\"s_per_flop\": 1e-11, \"s_per_kn\": 0, \"s_per_mk\": 0}}}",
         "compute.gemm_terms.s_per_call: missing"},
        {"{\"compute\": {\"gemm_terms\": {\"s_per_flop\": 0, \"s_per_kn\": 0, \"s_per_mk\": 0, \"s_per_call\": 0}}}",
         "compute.gemm_terms.s_per_flop: found 0"},
        {"{\"compute\": {\"gemm_terms\": {\"s_per_flop\": 1e-11, \"s_per_kn\": \"1ns\", \"s_per_mk\": 0, \"s_per_call\": 0}}}",
         "compute.gemm_terms.s_per_kn: found a string"},
        {"{\"compute\": {\"gemm_terms\": {\"s_per_flop\": 1e-11, \"s_per_kn\": -1, \"s_per_mk\": 0, \"s_per_call\": 0}}}",
         "compute.gemm_terms.s_per_kn: found -1"},
        {"{\"compute\": {\"gemm_terms\": {\"s_per_byte\": 1}}}", "compute.gemm_terms.s_per_byte: unknown key"},
        {"{\"compute\": {\"gemm_terms\": [1, 2]}}", "compute.gemm_terms: found a list"},
        {"{\"compute\": {\"collective_cpu_share\": \"all\"}}", "compute.collective_cpu_share: found a string"},
        {"{\"compute\": {\"elementwise_bw_bwd\": {\"adamw\": 1e9}}}", "compute.elementwise_bw_bwd.adamw: unknown key"},
        {"{\"compute\": {\"elementwise_bw_bwd\": {\"xent\": 0}}}", "compute.elementwise_bw_bwd.xent: found 0"},
        {"{\"compute\": {\"elementwise_bw_bwd\": 5}}", "compute.elementwise_bw_bwd: found a number"},
        {"{\"compute\": {\"elementwise_bw\": {\"xent\": true}}}", "compute.elementwise_bw.xent: found a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_calib c;
        gs_error err;
        gs_error_init(&err);
        write_tmp(cases[i].text);
        ck_assert_msg(gs_calib_load(tmp_path, &c, &err) == GS_ERR_INPUT, "case %zu accepted", i);
        ck_assert_msg(strstr(err.msg, cases[i].fragment) != NULL, "case %zu: '%s' lacks '%s'", i, err.msg,
                      cases[i].fragment);
        ck_assert_msg(strncmp(err.msg, tmp_path, strlen(tmp_path)) == 0, "case %zu: no path: %s", i, err.msg);
        remove_tmp();
    }
}
END_TEST

/* launch_s_by_ranks: linear in the world size between measured sizes, the nearest outside. */
START_TEST(test_launch_by_ranks)
{
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    write_tmp("{\"compute\": {\"launch_s\": 1e-6, \"launch_s_by_ranks\": [{\"ranks\": 1, \"launch_s\": 1e-5, "
              "\"wake_s\": 2e-5}, {\"ranks\": 4, \"launch_s\": 4e-5, \"wake_s\": 8e-5}]}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    static const struct {
        uint64_t world;
        double launch, wake;
    } rows[] = {
        {1, 1e-5, 2e-5},       /* measured */
        {2, 2e-5, 4e-5},       /* a third of the way from 1 to 4 */
        {4, 4e-5, 8e-5},       /* measured */
        {64, 4e-5, 8e-5},      /* beyond: the largest measured */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gs_compute_model cm;
        gs_topo t;
        memset(&cm, 0, sizeof cm);
        memset(&t, 0, sizeof t);
        gs_calib_apply(&c, rows[i].world, &cm, &t);
        ck_assert_msg(fabs(cm.launch_s - rows[i].launch) < 1e-15 && fabs(cm.wake_s - rows[i].wake) < 1e-15,
                      "world %d: launch %g wake %g", (int)rows[i].world, cm.launch_s, cm.wake_s);
    }
    remove_tmp();
    /* the CPU parts interpolate alike; absent ones are 0; more than the time they are part of is
     * refused by name */
    write_tmp("{\"compute\": {\"launch_s_by_ranks\": [{\"ranks\": 1, \"launch_s\": 1e-5, \"wake_s\": 2e-5, "
              "\"launch_cpu_s\": 1e-5, \"wake_cpu_s\": 1e-5}, {\"ranks\": 4, \"launch_s\": 4e-5, \"wake_s\": 8e-5}]}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    {
        gs_compute_model cm;
        gs_topo t;
        memset(&cm, 0, sizeof cm);
        memset(&t, 0, sizeof t);
        gs_calib_apply(&c, 2, &cm, &t); /* a third of the way from 1 to 4: 2/3 of the 1-rank figures */
        ck_assert(fabs(cm.launch_cpu_s - 1e-5 * 2 / 3) < 1e-15 && fabs(cm.wake_cpu_s - 1e-5 * 2 / 3) < 1e-15);
    }
    remove_tmp();
    write_tmp("{\"compute\": {\"launch_s_by_ranks\": [{\"ranks\": 1, \"launch_s\": 1e-5, \"wake_s\": 2e-5, "
              "\"wake_cpu_s\": 3e-5}]}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "compute.launch_s_by_ranks[0].wake_cpu_s: found 3e-05"));
    remove_tmp();
    write_tmp("{\"compute\": {\"launch_s_by_ranks\": [{\"ranks\": 1, \"launch_s\": 1e-5, \"launch_cpu_s\": \"x\"}]}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "compute.launch_s_by_ranks[0].launch_cpu_s: found a string"));
    remove_tmp();
    write_tmp("{\"compute\": {\"launch_s_by_ranks\": [{\"ranks\": 4, \"launch_s\": 1e-5}, {\"ranks\": 2, "
              "\"launch_s\": 1e-5}]}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "compute.launch_s_by_ranks[1].ranks"));
}
END_TEST

/* The concurrency slowdown: ratio(k) = 1 + s (k - 1) recovered from synthetic points. */
START_TEST(test_slowdown_recovers)
{
    gs_error err;
    gs_error_init(&err);
    double k[8], r[8];
    /* exact points of s = 0.12 at k = 1 .. 8: s exactly, no residual */
    for (int i = 0; i < 8; i++)
        k[i] = i + 1, r[i] = 1 + 0.12 * i;
    gs_fit_slow f;
    ck_assert_int_eq(gs_fit_slowdown(k, r, 8, &f, &err), GS_OK);
    ck_assert(fabs(f.s - 0.12) < 1e-12 && f.rms_rel_resid < 1e-12 && f.n == 8);
    /* 2% uniform noise on the ratios: r_i - (1 + 0.12 i) = e_i with |e_i| <= 0.02 (1 + 0.12 x 7)
     * = 0.0368 (i = k - 1 = 0 .. 7); the fitted slope is off by sum i e_i / sum i^2, at most
     * 0.0368 x 28 / 140 = 0.00736 */
    for (uint64_t seed = 1; seed <= 5; seed++) {
        uint64_t st = seed;
        for (int i = 0; i < 8; i++)
            r[i] = (1 + 0.12 * i) * (1 + 0.02 * noise(&st));
        ck_assert_int_eq(gs_fit_slowdown(k, r, 8, &f, &err), GS_OK);
        ck_assert_msg(fabs(f.s - 0.12) < 0.0074, "seed %d: s %g", (int)seed, f.s);
        ck_assert(f.rms_rel_resid < 0.03);
    }
    /* two cores: one point beside k = 1 gives s = r(2) - 1 */
    k[0] = 1, r[0] = 1, k[1] = 2, r[1] = 1.07;
    ck_assert_int_eq(gs_fit_slowdown(k, r, 2, &f, &err), GS_OK);
    ck_assert(fabs(f.s - 0.07) < 1e-12);
    /* faster with company (noise): no negative slowdown */
    r[1] = 0.97;
    ck_assert_int_eq(gs_fit_slowdown(k, r, 2, &f, &err), GS_OK);
    ck_assert(f.s == 0);
    /* errors: a single thread only, a thread count below 1, a non-positive ratio */
    ck_assert_int_eq(gs_fit_slowdown(k, r, 1, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "no point with more than one thread"));
    k[1] = 0.5;
    ck_assert_int_eq(gs_fit_slowdown(k, r, 2, &f, &err), GS_ERR_INPUT);
    k[1] = 2, r[1] = -1;
    ck_assert_int_eq(gs_fit_slowdown(k, r, 2, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "point 1"));
}
END_TEST

/* GEMM terms: t = a 2mnk + b kn + c mk + d recovered from synthetic times on a grid of shapes. */
START_TEST(test_gemm_terms_recovers)
{
    static const double shapes[][3] = {{32, 64, 64},    {64, 192, 64},   {128, 128, 64},   {128, 256, 256},
                                       {256, 64, 256},  {256, 512, 256}, {512, 256, 688},  {512, 1376, 256},
                                       {512, 512, 512}, {128, 768, 256}, {128, 1024, 512}, {1024, 1024, 256}};
    enum { NS = sizeof shapes / sizeof shapes[0] };
    /* 40 GFLOP/s, 1 ns per k x n element, 0.5 ns per m x k element, 2 us per call */
    const double a = 1.0 / 40e9, b = 1e-9, c = 0.5e-9, d = 2e-6;
    double m[NS], n[NS], k[NS], t[NS];
    gs_error err;
    gs_error_init(&err);
    for (int i = 0; i < NS; i++) {
        m[i] = shapes[i][0], n[i] = shapes[i][1], k[i] = shapes[i][2];
        t[i] = a * 2 * m[i] * n[i] * k[i] + b * k[i] * n[i] + c * m[i] * k[i] + d;
    }
    gs_fit_gemm_terms f;
    /* exact data: every coefficient to 1e-6 relative, no residual */
    ck_assert_int_eq(gs_fit_gemm_terms_fit(m, n, k, t, NS, &f, &err), GS_OK);
    ck_assert_msg(fabs(f.s_per_flop / a - 1) < 1e-6 && fabs(f.s_per_kn / b - 1) < 1e-6 &&
                  fabs(f.s_per_mk / c - 1) < 1e-6 && fabs(f.s_per_call / d - 1) < 1e-6, "%g %g %g %g", f.s_per_flop,
                  f.s_per_kn, f.s_per_mk, f.s_per_call);
    ck_assert(f.rms_rel_resid < 1e-9 && f.n == NS);
    /* 2% noise: the predicted time of every shape within 4% (the model's own error is at most
     * the noise, 2%, where the fit is good; twice that for the fit's spread) */
    for (uint64_t seed = 1; seed <= 5; seed++) {
        uint64_t st = seed;
        double tn[NS];
        for (int i = 0; i < NS; i++)
            tn[i] = t[i] * (1 + 0.02 * noise(&st));
        ck_assert_int_eq(gs_fit_gemm_terms_fit(m, n, k, tn, NS, &f, &err), GS_OK);
        for (int i = 0; i < NS; i++) {
            double p = gs_gemm_terms_eval(f.s_per_flop, f.s_per_kn, f.s_per_mk, f.s_per_call, m[i], n[i], k[i]);
            ck_assert_msg(fabs(p / t[i] - 1) < 0.04, "seed %d shape %d: %g vs %g", (int)seed, i, p, t[i]);
        }
        ck_assert(f.s_per_kn >= 0 && f.s_per_mk >= 0 && f.s_per_call >= 0);
        /* the FLOP rate, the term that matters for large shapes, within 3% */
        ck_assert_msg(fabs(f.s_per_flop / a - 1) < 0.03, "seed %d: %g", (int)seed, f.s_per_flop);
    }
    /* a short m is slower at the same FLOPs: 128 x 1376 x 256 against 256 x 688 x 256 */
    double t128 = gs_gemm_terms_eval(a, b, c, d, 128, 1376, 256), t256 = gs_gemm_terms_eval(a, b, c, d, 256, 688, 256);
    ck_assert(t128 > t256);
    /* data without a per-call cost, made negative by a constant shift: the term is dropped (0) */
    for (int i = 0; i < NS; i++)
        t[i] = a * 2 * m[i] * n[i] * k[i] + b * k[i] * n[i] + c * m[i] * k[i] - 1e-7;
    ck_assert_int_eq(gs_fit_gemm_terms_fit(m, n, k, t, NS, &f, &err), GS_OK);
    ck_assert(f.s_per_call == 0 && f.s_per_flop > 0);
    /* errors: too few points, a non-positive time */
    ck_assert_int_eq(gs_fit_gemm_terms_fit(m, n, k, t, 3, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "need at least 4"));
    t[2] = 0;
    ck_assert_int_eq(gs_fit_gemm_terms_fit(m, n, k, t, NS, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "point 2"));
}
END_TEST

/* The per-kernel rates of exec's work: xent and embed replace add for the loss and the
 * embedding; backward events take elementwise_bw_bwd; a QKV event adds its rotary embedding per
 * token; concurrency_slowdown is carried to the model. */
START_TEST(test_file_kernels)
{
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    /* "add" after xent: the order of the keys does not matter, xent wins for the loss */
    write_tmp("{\"compute\": {\"launch_s\": 1e-6, \"qkv_rope_s_per_token\": 2e-6, \"concurrency_slowdown\": 0.08,"
              " \"peak_flops\": 4e10, \"gemm_curve\": {\"form\": \"hyperbolic\", \"e_max\": 1, \"f0_flops\": 1},"
              " \"elementwise_bw\": {\"rmsnorm\": 1.6e10, \"xent\": 2e9, \"add\": 3e10},"
              " \"elementwise_bw_bwd\": {\"rmsnorm\": 2e10, \"xent\": 4e9, \"embed\": 1e10}}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    gs_compute_model cm;
    gs_topo t;
    memset(&cm, 0, sizeof cm);
    memset(&t, 0, sizeof t);
    gs_calib_apply(&c, 2, &cm, &t);
    ck_assert(cm.elementwise_bw[GS_OP_LOSS] == 2e9 && cm.elementwise_bw[GS_OP_EMBED] == 3e10);
    ck_assert(cm.elementwise_bw_bwd[GS_OP_LOSS] == 4e9 && cm.elementwise_bw_bwd[GS_OP_EMBED] == 1e10);
    ck_assert(cm.elementwise_bw_bwd[GS_OP_ACT] == 0 && cm.concurrency_slowdown == 0.08 && cm.qkv_rope_s == 2e-6);
    ck_assert(cm.coll_cpu_share == 0); /* not in this file: off */
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.op = GS_OP_NORM, e.phase = GS_PHASE_FWD, e.bytes = 1000000;
    /* forward norm: 1e6 B at 16 GB/s + 1 us; its backward at 20 GB/s; a recompute is a forward */
    ck_assert(fabs(gs_compute_time(&cm, &e) - (1e6 / 1.6e10 + 1e-6)) < 1e-15);
    e.phase = GS_PHASE_BWD;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (1e6 / 2e10 + 1e-6)) < 1e-15);
    e.phase = GS_PHASE_RECOMPUTE;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (1e6 / 1.6e10 + 1e-6)) < 1e-15);
    /* QKV 256 x 512 x 256 forward: the GEMM at 4e10 x f / (f + 1) plus 256 tokens x 2 us of rotary
     * embedding plus one launch */
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.op = GS_OP_QKV, e.role = GS_ROLE_QKV, e.phase = GS_PHASE_FWD;
    e.gemm_m = 256, e.gemm_n = 512, e.gemm_k = 256, e.gemm_batch = 1;
    e.flops = 2.0 * 256 * 512 * 256;
    double f = e.flops;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (f / (4e10 * f / (f + 1)) + 256 * 2e-6 + 1e-6)) < 1e-12);
    /* the same shape as an output projection: no rotary embedding */
    e.op = GS_OP_OPROJ;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (f / (4e10 * f / (f + 1)) + 1e-6)) < 1e-12);
    remove_tmp();

    /* gemm_terms replaces the curve: 256 x 512 x 256 forward = 2^26 x 25 ps + 131072 x 1 ns +
     * 65536 x 0.5 ns + 2 us, plus a launch; backward: twice that (factor 1), two launches */
    write_tmp("{\"compute\": {\"launch_s\": 1e-6, \"peak_flops\": 4e10, \"gemm_curve\": {\"form\": \"hyperbolic\","
              " \"e_max\": 1, \"f0_flops\": 1}, \"gemm_terms\": {\"s_per_flop\": 2.5e-11, \"s_per_kn\": 1e-9,"
              " \"s_per_mk\": 5e-10, \"s_per_call\": 2e-6}}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    memset(&cm, 0, sizeof cm);
    gs_calib_apply(&c, 2, &cm, &t);
    double call = 2.0 * 256 * 512 * 256 * 2.5e-11 + 256.0 * 512 * 1e-9 + 256.0 * 256 * 5e-10 + 2e-6;
    e.phase = GS_PHASE_FWD;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (call + 1e-6)) < 1e-12);
    e.phase = GS_PHASE_BWD;
    e.flops *= 2;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (2 * call + 2e-6)) < 1e-12);
    remove_tmp();

    /* a file before these keys ("add" only): the loss and the embedding take add, both ways */
    write_tmp("{\"compute\": {\"elementwise_bw\": {\"add\": 3e10}}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    memset(&cm, 0, sizeof cm);
    gs_calib_apply(&c, 2, &cm, &t);
    ck_assert(cm.elementwise_bw[GS_OP_LOSS] == 3e10 && cm.elementwise_bw[GS_OP_EMBED] == 3e10);
    ck_assert(cm.elementwise_bw_bwd[GS_OP_LOSS] == 0 && cm.concurrency_slowdown == 0 && cm.qkv_rope_s == 0);
    remove_tmp();
}
END_TEST

/* Without a file nothing changes: a freshly initialized model has none of the calibrated parts. */
START_TEST(test_defaults_untouched)
{
    const gs_cluster *cl = gs_cluster_preset_find("dgx-h100");
    ck_assert_ptr_nonnull(cl);
    gs_topo t;
    gs_topo_init(&t, cl);
    gs_compute_model cm;
    gs_compute_model_init(&cm, &cl->gpu, GS_PREC_BF16);
    ck_assert(!t.fit_intra.set && !t.fit_inter.set && !t.one_machine);
    ck_assert(!cm.gemm_curve && cm.cores == 0 && cm.attn_flops == 0 && cm.elementwise_bw[GS_OP_NORM] == 0);
}
END_TEST

/* One scale over a model: measured = 0.62 x model x (1 + 3% uniform noise) at 12 points whose
 * model rates span 40x, plus one shape 3x too slow (a bad kernel choice). The median ignores it:
 * the scale within 2% of 0.62 (the noise is +-3%, the median of 12 such ratios lies well inside),
 * the slow point counted as the one outlier, and the residual over the kept points below the
 * noise's 3%. Non-positive inputs are errors naming the point. */
START_TEST(test_scale_median)
{
    uint64_t st = 7;
    double meas[13], model[13];
    for (int i = 0; i < 12; i++) {
        model[i] = 1e13 * (1.0 + 39.0 * i / 11.0);
        meas[i] = 0.62 * model[i] * (1.0 + 0.03 * noise(&st));
    }
    model[12] = 5e14;
    meas[12] = 0.62 * model[12] / 3.0;
    gs_fit_scale f;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_fit_scale_median(meas, model, 13, &f, &err), GS_OK);
    ck_assert_msg(fabs(f.scale / 0.62 - 1.0) < 0.02, "scale %g, want 0.62 within 2%%", f.scale);
    ck_assert_uint_eq(f.n, 13);
    ck_assert_uint_eq(f.outliers, 1);
    ck_assert_msg(f.rms_rel_resid < 0.03, "residual %g over the kept points, want < 3%%", f.rms_rel_resid);
    /* a plain mean of the ratios would be pulled to 0.62 x (12 + 1/3) / 13 = 0.589 (-5%) */
    meas[3] = 0;
    ck_assert_int_eq(gs_fit_scale_median(meas, model, 13, &f, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "point 3"));
    ck_assert_int_eq(gs_fit_scale_median(meas, model, 0, &f, &err), GS_ERR_INPUT);
}
END_TEST

/* A device calibration (no curve, no terms): the preset's tile model scaled by gemm_efficiency,
 * with the measured backward factor and rotary embedding. An A100 (108 SMs) 4096 x 4096 x 4096
 * GEMM: 32 x 16 = 512 tiles of 128 x 256 (or 256 x 128) in ceil(512 / 108) = 5 waves, so the
 * model's shape factor is the same with and without the file; the backward event (two calls'
 * FLOPs) takes 1.25 x its modeled time plus two launches, the QKV forward 4096 tokens x 3 us
 * more, the attention core is untouched by either. */
START_TEST(test_device_file_tile_model)
{
    const gs_gpu *g = gs_gpu_preset_find("a100-80g");
    ck_assert_ptr_nonnull(g);
    gs_compute_model base, cm;
    gs_compute_model_init(&base, g, GS_PREC_BF16);
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    write_tmp("{\"driver\": \"cuda\", \"compute\": {\"gemm_efficiency\": 0.7, \"launch_s\": 2e-6, "
              "\"gemm_bwd_factor\": 1.25, \"qkv_rope_s_per_token\": 3e-6}}");
    ck_assert_int_eq(gs_calib_load(tmp_path, &c, &err), GS_OK);
    gs_topo t;
    memset(&t, 0, sizeof t);
    cm = base;
    gs_calib_apply(&c, 1, &cm, &t);
    ck_assert(cm.gemm_efficiency == 0.7 && cm.launch_s == 2e-6);
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE, e.op = GS_OP_MLP_UP, e.phase = GS_PHASE_FWD;
    e.gemm_m = e.gemm_n = e.gemm_k = 4096, e.gemm_batch = 1;
    e.flops = 2.0 * 4096 * 4096 * 4096;
    /* forward: FLOPs at peak x 0.7 x the shape factor (base's efficiency divided out) */
    double shape = gs_gemm_efficiency(&base, 4096, 4096, 4096, 1) / base.gemm_efficiency;
    double fwd = e.flops / (base.peak_flops * 0.7 * shape);
    ck_assert_msg(fabs(gs_compute_time(&cm, &e) - (fwd + 2e-6)) < 1e-12, "fwd %g vs %g", gs_compute_time(&cm, &e),
                  fwd + 2e-6);
    e.phase = GS_PHASE_BWD;
    e.flops *= 2;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (1.25 * 2 * fwd + 2 * 2e-6)) < 1e-12);
    e.op = GS_OP_QKV, e.role = GS_ROLE_QKV, e.phase = GS_PHASE_FWD;
    e.flops /= 2;
    ck_assert(fabs(gs_compute_time(&cm, &e) - (fwd + 4096 * 3e-6 + 2e-6)) < 1e-12);
    /* the presets alone: neither factor (both 0) */
    ck_assert(fabs(gs_compute_time(&base, &e) - (e.flops / (base.peak_flops * base.gemm_efficiency * shape) +
                                                base.launch_s)) < 1e-12);
    remove_tmp();
}
END_TEST

/* "driver": "host" is one machine (every group on links.intra) unless the file measured links
 * between hosts: a 2-node group then takes links.inter's line (here 1 ms + size / 1 GB/s against
 * intra's 10 us + size / 10 GB/s: 2 ms against 0.11 ms for 1 MB). */
START_TEST(test_host_inter)
{
    const char *intra = "\"intra\": {\"all_reduce\": [{\"ranks\": 2, \"alpha_s\": 1e-5, \"beta_bytes_per_s\": 1e10}]}";
    const char *inter = "\"inter\": {\"all_reduce\": [{\"ranks\": 2, \"alpha_s\": 1e-3, \"beta_bytes_per_s\": 1e9}]}";
    char text[1024];
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    for (int with_inter = 0; with_inter < 2; with_inter++) {
        snprintf(text, sizeof text, "{\"driver\": \"host\", \"links\": {%s%s%s}}", intra, with_inter ? ", " : "",
                 with_inter ? inter : "");
        ck_assert_int_eq(gs_calib_load_string(text, strlen(text), "h.json", &c, &err), GS_OK);
        ck_assert_int_eq(c.host, !with_inter);
        gs_topo t;
        memset(&t, 0, sizeof t);
        gs_compute_model cm;
        memset(&cm, 0, sizeof cm);
        gs_calib_apply(&c, 2, &cm, &t);
        gs_coll_shape two_nodes = {2, 2, 1, 1, 0.0};
        double want = with_inter ? 1e-3 + 1e6 / 1e9 : 1e-5 + 1e6 / 1e10;
        ck_assert_double_eq_tol(gs__measured_time(&t, GS_COLL_ALLREDUCE, &two_nodes, 1e6), want, 1e-12);
    }
}
END_TEST

/* measurements.attention.flash says which kernels compute.attn_flops timed: a scenario with the
 * other setting gets a note naming both; the same setting, no attn_flops or no flash key, none. */
START_TEST(test_attention_note)
{
    static const struct {
        const char *text;
        int flash, want_note; /* the scenario's flash_attention; 1 = a note */
    } cases[] = {
        {"{\"compute\": {\"attn_flops\": 1e9}, \"measurements\": {\"attention\": {\"flash\": true}}}", 0, 1},
        {"{\"compute\": {\"attn_flops\": 1e9}, \"measurements\": {\"attention\": {\"flash\": true}}}", 1, 0},
        {"{\"compute\": {\"attn_flops\": 1e9}, \"measurements\": {\"attention\": {\"flash\": false}}}", 1, 1},
        {"{\"compute\": {\"attn_flops\": 1e9}, \"measurements\": {\"attention\": {\"flash\": false}}}", 0, 0},
        {"{\"compute\": {\"attn_flops\": 1e9}, \"measurements\": {\"attention\": {\"seq\": 128}}}", 0, 0},
        {"{\"compute\": {\"launch_s\": 1e-6}, \"measurements\": {\"attention\": {\"flash\": true}}}", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_calib c;
        gs_error err;
        gs_error_init(&err);
        char buf[512];
        ck_assert_int_eq(gs_calib_load_string(cases[i].text, strlen(cases[i].text), "a.json", &c, &err), GS_OK);
        const char *note = gs_calib_attention_note(&c, "a.json", cases[i].flash, buf, sizeof buf);
        ck_assert_msg((note != NULL) == cases[i].want_note, "case %zu: note %s", i, note ? note : "(none)");
        if (note) {
            ck_assert_ptr_nonnull(strstr(note, "a.json"));
            ck_assert_ptr_nonnull(strstr(note, cases[i].flash ? "flash_attention: true" : "flash_attention: false"));
            ck_assert_ptr_nonnull(strstr(note, cases[i].flash ? "keep the probabilities" : "flash kernels"));
        }
    }
}
END_TEST

static Suite *calib_suite(void)
{
    Suite *s = suite_create("calib");
    TCase *fits = tcase_create("fits");
    tcase_add_test(fits, test_alpha_beta_recovers);
    tcase_add_test(fits, test_alpha_beta_outliers);
    tcase_add_test(fits, test_gemm_curve);
    tcase_add_test(fits, test_slowdown_recovers);
    tcase_add_test(fits, test_gemm_terms_recovers);
    tcase_add_test(fits, test_scale_median);
    suite_add_tcase(s, fits);
    TCase *file = tcase_create("file");
    tcase_add_checked_fixture(file, NULL, remove_tmp);
    tcase_add_test(file, test_file_applies);
    tcase_add_test(file, test_defaults_untouched);
    tcase_add_test(file, test_launch_by_ranks);
    tcase_add_test(file, test_file_kernels);
    tcase_add_test(file, test_device_file_tile_model);
    tcase_add_test(file, test_host_inter);
    tcase_add_test(file, test_attention_note);
    suite_add_tcase(s, file);
    TCase *errors = tcase_create("errors");
    tcase_add_checked_fixture(errors, NULL, remove_tmp);
    tcase_add_test(errors, test_alpha_beta_errors);
    tcase_add_test(errors, test_file_rejects);
    suite_add_tcase(s, errors);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(calib_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
