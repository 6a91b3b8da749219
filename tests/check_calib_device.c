/* Check suite for the device calibration path (calib/device.c): the measurements a GPU's
 * driver gets, timed with the driver's stream events, run here through the host driver (CPU
 * threads) at test sizes, and through two wrappers of it that act as a machine with two devices
 * and as a device whose GEMMs are three times slower. What the GPU itself does is checked on a
 * GPU (tests/gpu/device-check.sh); these check the path: event timing, fits, the file the sim
 * reads back, and a machine with fewer devices than the largest group. */
#include <check.h>
#include <stdio.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/device.h"
#include "engine/scenario.h"
#include "exec/driver.h"
#include "sim/calib.h"
#include "sim/calib_file.h"
#include "sim/compute.h"
#include "sim/topology.h"

/* The scenario, under $top_srcdir when the harness sets it (a VPATH build such as distcheck's
 * runs the tests outside the source tree). */
static char scenario_path[1024];
#define SCENARIO scenario_at()

static const char *scenario_at(void)
{
    const char *top = getenv("top_srcdir");
    snprintf(scenario_path, sizeof scenario_path, "%s%stests/calib/a-dp2.yaml", top ? top : "", top ? "/" : "");
    return scenario_path;
}

/* The device calibration of the scenario at path (NULL: none), loaded as the command loads it. */
static gs_status run_at(const gs_driver_ops *ops, const char *path, gs_calib_dev_opts *o, gs_calib_dev **c,
                        gs_error *err)
{
    static gs_scenario s;
    static gs_mesh mesh;
    if (path) {
        gs_diag warnings;
        gs_diag_init(&warnings);
        gs_status rc = gs_scenario_load_file(path, &s, err);
        if (rc == GS_OK)
            rc = gs_scenario_mesh(&s, &mesh, &warnings, err);
        gs_diag_fini(&warnings);
        if (rc != GS_OK)
            return rc;
        o->scenario = &s, o->mesh = &mesh, o->scenario_path = path;
    }
    return gs_calib_dev_run(ops, o, c, err);
}

static gs_calib_dev *run(const gs_driver_ops *ops, uint64_t max_ranks)
{
    gs_calib_dev_opts o = {.small = 1, .max_ranks = max_ranks, .timeout_s = 60};
    gs_calib_dev *c = NULL;
    gs_error err;
    gs_error_init(&err);
    gs_status rc = run_at(ops, SCENARIO, &o, &c, &err);
    ck_assert_msg(rc == GS_OK, "calibration failed: %s", err.msg);
    return c;
}

/* Thread CPU seconds per call of the host's forward GEMM, median of 9 batches of 20. */
static double cpu_per_gemm(size_t m, size_t n, size_t k)
{
    float *x = calloc(m * k, 4), *w = calloc(n * k, 4), *y = calloc(m * n, 4);
    double v[9];
    for (int r = 0; r < 9; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (int i = 0; i < 20; i++)
            gs_driver_host.k.linear_fwd(NULL, x, w, y, m, k, n);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        v[r] = ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec)) / 20.0;
    }
    free(x), free(w), free(y);
    return gs_calib_median(v, 9);
}

/* The whole path on the host driver: every group size measured, the file accepted by the sim's
 * loader with the fitted GEMM efficiency in it, and each GEMM's event-timed time at least its
 * work: a call's wall time between two stream events cannot be far below the CPU time the same
 * call takes on one thread. Timing only the issue of the work (an event
 * recorded before the work ran) would break it by orders of magnitude (1.6 us against 111 us
 * when tried); the bound is 0.3 x, since the two are measured a moment apart on a machine whose
 * load can change the CPU time of the same call by 1.7x (seen: 111 us between events against
 * 186 us of CPU time at load 6). */
START_TEST(test_host_path)
{
    gs_calib_dev *c = run(&gs_driver_host, 8);
    json_t *doc = gs_calib_dev_json(c);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "driver")), "host");
    json_t *ar = json_object_get(json_object_get(json_object_get(doc, "links"), "intra"), "all_reduce");
    ck_assert_uint_eq(json_array_size(ar), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ar, 2), "ranks")), 8);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(json_object_get(doc, "links"), "intra"), "send_recv"));

    json_t *g = json_object_get(json_object_get(doc, "measurements"), "gemm");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(g); i++) {
        json_t *p = json_array_get(g, i);
        size_t m = (size_t)json_integer_value(json_object_get(p, "m")), n = (size_t)json_integer_value(json_object_get(p, "n")),
               k = (size_t)json_integer_value(json_object_get(p, "k"));
        if (m != 128 || n != 128 || k != 128)
            continue;
        double ev = json_real_value(json_object_get(p, "time_s")), cpu = cpu_per_gemm(m, n, k);
        ck_assert_msg(ev >= 0.3 * cpu, "128^3 GEMM: %g s between events, %g s of CPU time", ev, cpu);
        checked = 1;
    }
    ck_assert_msg(checked, "the 128^3 shape was not measured");

    char *text = json_dumps(doc, JSON_REAL_PRECISION(17));
    gs_calib cal;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_calib_load_string(text, strlen(text), "dev.json", &cal, &err) == GS_OK, "%s", err.msg);
    double eff = json_real_value(json_object_get(json_object_get(doc, "compute"), "gemm_efficiency"));
    ck_assert(eff > 0 && eff <= 1);
    ck_assert_double_eq_tol(cal.gemm_efficiency, eff, 1e-12);
    ck_assert_double_eq_tol(cal.hbm_bw, gs_calib_dev_copy_bw(c), 1e-6 * cal.hbm_bw);
    free(text);
    json_decref(doc);
    gs_calib_dev_free(c);
}
END_TEST

/* ---- a machine with two devices: open() refuses more ranks, as the cuda driver does ---- */

static gs_driver_ops two_devices;

/* GS_ERR_INPUT as the cuda driver's "this machine shows N GPUs"; any other failure is an error */
static gs_status open_two(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err)
{
    if (mesh->world > 2)
        return gs_error_set(err, GS_ERR_INPUT, "the scenario needs %llu GPUs, this machine has 2",
                            (unsigned long long)mesh->world);
    return gs_driver_host.open(mesh, opts, out, err);
}

static gs_driver_ops broken_four;

static gs_status open_broken(const gs_mesh *mesh, const gs_driver_opts *opts, gs_drv **out, gs_error *err)
{
    if (mesh->world == 4)
        return gs_error_set(err, GS_ERR_RUNTIME, "ncclCommInitRank: unhandled system error");
    return gs_driver_host.open(mesh, opts, out, err);
}

START_TEST(test_fewer_devices)
{
    two_devices = gs_driver_host;
    two_devices.open = open_two;
    gs_calib_dev *c = run(&two_devices, 8);
    json_t *doc = gs_calib_dev_json(c);
    json_t *intra = json_object_get(json_object_get(doc, "links"), "intra");
    ck_assert_uint_eq(json_array_size(json_object_get(intra, "all_gather")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(intra, "all_gather"), 0), "ranks")), 2);
    const char *note = json_string_value(json_object_get(json_object_get(doc, "measurements"), "collectives_note"));
    ck_assert_ptr_nonnull(note);
    ck_assert_msg(strstr(note, "4 ranks") && strstr(note, "this machine has 2"), "note: %s", note);
    json_decref(doc);
    gs_calib_dev_free(c);

    /* a driver that fails otherwise opening 4 ranks (a runtime error, not a count): the
     * calibration fails naming it, no file with the lines left out */
    broken_four = gs_driver_host;
    broken_four.open = open_broken;
    gs_calib_dev_opts o = {.small = 1, .max_ranks = 8, .timeout_s = 60};
    gs_error err;
    gs_error_init(&err);
    c = NULL;
    ck_assert_int_eq(run_at(&broken_four, SCENARIO, &o, &c, &err), GS_ERR_RUNTIME);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.msg, "opening 4 ranks") && strstr(err.msg, "ncclCommInitRank"), "%s", err.msg);
}
END_TEST

/* ---- a device whose GEMMs take three times as long ---- */

static gs_driver_ops slow_gemm;

static void linear_thrice(gs_drv_stream *s, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    for (int i = 0; i < 3; i++)
        gs_driver_host.k.linear_fwd(s, x, w, y, t, k, n);
}

/* The fitted scale is the device's GEMM rate over the model's: three times the work per call
 * must give a third of the scale. Wall-clock timing on a shared machine is noisy, and other
 * work only ever slows a run down (with the cores contended, wake-ups add the same fixed time to
 * both kinds of call, pulling the pair ratios toward 1: 0.26 .. 0.62 in one make check beside
 * two busy loops), so each kind's scale is the largest of 5 runs, the runs alternating
 * (no collectives: max_ranks 1); 0.2 .. 0.5 around the expected 1/3. */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

START_TEST(test_gemm_scale_tracks)
{
    slow_gemm = gs_driver_host;
    slow_gemm.k.linear_fwd = linear_thrice;
    double b[5], sl[5];
    for (int i = 0; i < 5; i++) {
        gs_calib_dev *base = run(&gs_driver_host, 1), *slow = run(&slow_gemm, 1);
        b[i] = gs_calib_dev_gemm_scale(base);
        sl[i] = gs_calib_dev_gemm_scale(slow);
        gs_calib_dev_free(base);
        gs_calib_dev_free(slow);
    }
    qsort(b, 5, sizeof b[0], cmp_d);
    qsort(sl, 5, sizeof sl[0], cmp_d);
    double ratio = sl[4] / b[4];
    printf("gemm scale, GEMMs three times slower: ratio %.3f (largest of 5: slow %.3g, base %.3g)\n", ratio, sl[4], b[4]);
    ck_assert_msg(ratio > 0.2 && ratio < 0.5, "scale ratio %g (largest of 5 each: slow %g %g %g %g %g, base %g %g %g %g %g), "
                  "want about 1/3", ratio, sl[0], sl[1], sl[2], sl[3], sl[4], b[0], b[1], b[2], b[3], b[4]);
}
END_TEST

/* ---- attention timed with the scenario's dropout: exec draws masks on every attention call of a
 * model with dropout layers, and a driver may run another path for such calls (the cuda
 * driver's default runs its kernels, not the GEMMs), so the calibration's calls carry them ---- */

static gs_driver_ops seeing_drop;
static uint32_t seen_thr[2];  /* forward, backward: the last threshold each saw (0: no dropout) */
static int seen_calls[2];

static void fwd_flash_seen(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                           float *out, size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv,
                           size_t hd, const gs_dropout *drop)
{
    seen_thr[0] = drop ? drop->threshold : 0, seen_calls[0]++;
    gs_driver_host.k.attn_fwd_flash(s, q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, drop);
}

static void bwd_flash_seen(gs_drv_stream *s, const float *q, size_t ldq, const float *k, const float *v, size_t ldkv,
                           const float *out, const float *lse, const float *dout, size_t ldo, float *dq, float *dk,
                           float *dv, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, const gs_dropout *drop)
{
    seen_thr[1] = drop ? drop->threshold : 0, seen_calls[1]++;
    gs_driver_host.k.attn_bwd_flash(s, q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, drop);
}

START_TEST(test_attention_dropout)
{
    seeing_drop = gs_driver_host;
    seeing_drop.k.attn_fwd_flash = fwd_flash_seen;
    seeing_drop.k.attn_bwd_flash = bwd_flash_seen;
    gs_calib_dev_opts o = {.small = 1, .max_ranks = 1, .timeout_s = 60};
    gs_error err;
    gs_error_init(&err);
    /* a-dp2 as it is: no dropout layers, the calls carry none */
    gs_calib_dev *c = NULL;
    seen_calls[0] = seen_calls[1] = 0;
    seen_thr[0] = seen_thr[1] = 1;
    ck_assert_msg(run_at(&seeing_drop, SCENARIO, &o, &c, &err) == GS_OK, "%s", err.msg);
    gs_calib_dev_free(c);
    ck_assert(seen_calls[0] > 0 && seen_calls[1] > 0);
    ck_assert_uint_eq(seen_thr[0], 0);
    ck_assert_uint_eq(seen_thr[1], 0);
    /* with dropout layers at attention dropout 0.25: threshold round(0.25 x 2^24) = 4194304 */
    FILE *in = fopen(SCENARIO, "r");
    ck_assert_ptr_nonnull(in);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = 0;
    char *pos = strstr(text, "pos: rope}");
    ck_assert_ptr_nonnull(pos);
    char drop_yaml[4200], path[] = "/tmp/calib-dev-dropout-XXXXXX";
    snprintf(drop_yaml, sizeof drop_yaml, "%.*spos: rope, dropout: true, attention_dropout: 0.25}%s", (int)(pos - text),
             text, pos + strlen("pos: rope}"));
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *out = fdopen(fd, "w");
    fputs(drop_yaml, out);
    fclose(out);
    c = NULL;
    seen_calls[0] = seen_calls[1] = 0;
    ck_assert_msg(run_at(&seeing_drop, path, &o, &c, &err) == GS_OK, "%s", err.msg);
    gs_calib_dev_free(c);
    remove(path);
    ck_assert(seen_calls[0] > 0 && seen_calls[1] > 0);
    ck_assert_uint_eq(seen_thr[0], 4194304);
    ck_assert_uint_eq(seen_thr[1], 4194304);
}
END_TEST

START_TEST(test_needs_scenario)
{
    gs_calib_dev_opts o = {.small = 1};
    gs_calib_dev *c = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(run_at(&gs_driver_host, NULL, &o, &c, &err), GS_ERR_INPUT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs SCENARIO.yaml"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("calib_device");
    TCase *t = tcase_create("path");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_host_path);
    tcase_add_test(t, test_fewer_devices);
    tcase_add_test(t, test_gemm_scale_tracks);
    tcase_add_test(t, test_needs_scenario);
    tcase_add_test(t, test_attention_dropout);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
