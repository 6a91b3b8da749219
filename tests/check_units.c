/* Check suite for engine/status and engine/units: error plumbing, overflow checks, formatting. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/status.h"
#include "engine/units.h"

START_TEST(test_error_set_and_prefix)
{
    gs_error e;
    gs_error_init(&e);
    ck_assert_int_eq(e.status, GS_OK);
    ck_assert_int_eq(gs_error_set(&e, GS_ERR_INPUT, "found %d, expected %s", 3, "int"), GS_ERR_INPUT);
    gs_error_prefix(&e, "%s:%d:%d", "a.yaml", 4, 7);
    ck_assert_str_eq(e.msg, "a.yaml:4:7: found 3, expected int");
    ck_assert_int_eq(gs_error_set(NULL, GS_ERR_IO, "x"), GS_ERR_IO);
}
END_TEST

START_TEST(test_exit_codes)
{
    ck_assert_int_eq(gs_status_exit_code(GS_OK), 0);
    ck_assert_int_eq(gs_status_exit_code(GS_ERR_INPUT), 2);
    ck_assert_int_eq(gs_status_exit_code(GS_ERR_OVERFLOW), 2);
    ck_assert_int_eq(gs_status_exit_code(GS_ERR_RUNTIME), 1);
    ck_assert_int_eq(gs_status_exit_code(GS_ERR_NOMEM), 1);
}
END_TEST

START_TEST(test_diag)
{
    gs_diag d;
    gs_diag_init(&d);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(gs_diag_warn(&d, "warning %d", i), GS_OK);
    ck_assert_uint_eq(d.count, 20);
    ck_assert_str_eq(d.warnings[19], "warning 19");
    gs_diag_fini(&d);
    ck_assert_uint_eq(d.count, 0);
}
END_TEST

START_TEST(test_overflow)
{
    uint64_t r;
    ck_assert_int_eq(gs_mul_u64(UINT64_C(1) << 32, UINT64_C(1) << 31, &r), 0);
    ck_assert_uint_eq(r, UINT64_C(1) << 63);
    ck_assert_int_eq(gs_mul_u64(UINT64_C(1) << 32, UINT64_C(1) << 32, &r), -1);
    ck_assert_int_eq(gs_add_u64(UINT64_MAX, 1, &r), -1);
    ck_assert_int_eq(gs_add_u64(UINT64_MAX - 1, 1, &r), 0);
}
END_TEST

START_TEST(test_format)
{
    char b[64];
    ck_assert_str_eq(gs_fmt_bytes(17500000000ull, b, sizeof b), "17.50 GB");
    ck_assert_str_eq(gs_fmt_bytes(1120000000000ull, b, sizeof b), "1.12 TB");
    ck_assert_str_eq(gs_fmt_bytes(999, b, sizeof b), "999 B");
    ck_assert_str_eq(gs_fmt_bytes_bin(UINT64_C(80) << 30, b, sizeof b), "80.00 GiB");
    ck_assert_str_eq(gs_fmt_count(6738415616ull, b, sizeof b), "6,738,415,616");
    ck_assert_str_eq(gs_fmt_count(999, b, sizeof b), "999");
    ck_assert_str_eq(gs_fmt_count(1000, b, sizeof b), "1,000");
    ck_assert_str_eq(gs_fmt_seconds(9.1875, b, sizeof b), "9.19 s");
    ck_assert_str_eq(gs_fmt_seconds(0.0034, b, sizeof b), "3.4 ms");
}
END_TEST

START_TEST(test_parse_count)
{
    uint64_t v;
    ck_assert_int_eq(gs_parse_count("7e9", &v), 0);
    ck_assert_uint_eq(v, 7000000000ull);
    ck_assert_int_eq(gs_parse_count("6738415616", &v), 0);
    ck_assert_uint_eq(v, 6738415616ull);
    ck_assert_int_eq(gs_parse_count("18446744073709551615", &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_int_eq(gs_parse_count("18446744073709551616", &v), -2);
    ck_assert_int_eq(gs_parse_count("2e19", &v), -2);
    ck_assert_int_eq(gs_parse_count("1e15", &v), 0);
    ck_assert_uint_eq(v, 1000000000000000ull);
    ck_assert_int_eq(gs_parse_count("6.7B", &v), 0);
    ck_assert_uint_eq(v, 6700000000ull);
    ck_assert_int_eq(gs_parse_count("25M", &v), 0);
    ck_assert_uint_eq(v, 25000000ull);
    ck_assert_int_eq(gs_parse_count("-4", &v), -2);
    ck_assert_int_eq(gs_parse_count("2.5", &v), -2);
    ck_assert_int_eq(gs_parse_count("abc", &v), -1);
    ck_assert_int_eq(gs_parse_count("", &v), -1);
    ck_assert_int_eq(gs_parse_count("12x", &v), -1);
}
END_TEST

static Suite *units_suite(void)
{
    Suite *s = suite_create("units");
    TCase *core = tcase_create("status");
    tcase_add_test(core, test_error_set_and_prefix);
    tcase_add_test(core, test_exit_codes);
    tcase_add_test(core, test_diag);
    suite_add_tcase(s, core);
    TCase *lim = tcase_create("limits");
    tcase_add_test(lim, test_overflow);
    tcase_add_test(lim, test_parse_count);
    suite_add_tcase(s, lim);
    TCase *fmt = tcase_create("format");
    tcase_add_test(fmt, test_format);
    suite_add_tcase(s, fmt);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(units_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
