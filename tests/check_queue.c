/* Check suite for sim/queue.c: pops in time order, ties in push order, against a sorted copy. */
#include <check.h>
#include <stdlib.h>

#include "sim/queue.h"

START_TEST(test_order)
{
    gs_queue q = {0};
    /* times drawn from a small set so ties are frequent; expected order: by (t, push index) */
    enum { N = 20000 };
    static double t[N];
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = (double)((s >> 16) % 97);
        ck_assert_int_eq(gs_queue_push(&q, t[i], (uint64_t)i, 0), 0);
    }
    double prev_t = -1;
    uint64_t prev_id = 0;
    for (int i = 0; i < N; i++) {
        gs_qnode n = gs_queue_pop(&q);
        ck_assert(n.t >= prev_t);
        if (n.t == prev_t)
            ck_assert_uint_gt(n.id, prev_id); /* ties leave in push order */
        ck_assert(n.t == t[n.id]);
        prev_t = n.t;
        prev_id = n.id;
    }
    ck_assert_uint_eq(q.n, 0);
    gs_queue_fini(&q);
}
END_TEST

START_TEST(test_interleaved)
{
    gs_queue q = {0};
    /* push 3, pop 1 (the minimum), push ... : a pop never returns something later than a
     * remaining entry */
    double now = 0;
    unsigned s = 7;
    for (int i = 0; i < 5000; i++) {
        for (int k = 0; k < 3; k++) {
            s = s * 1103515245u + 12345u;
            gs_queue_push(&q, now + (double)((s >> 16) % 1000) * 1e-3, (uint64_t)(3 * i + k), 0);
        }
        gs_qnode n = gs_queue_pop(&q);
        ck_assert(n.t >= now);
        now = n.t;
        if (i % 100 == 0) {
            double least = gs_queue_time_at(&q, 0);
            for (size_t j = 1; j < q.n; j++)
                if (gs_queue_time_at(&q, j) < least)
                    least = gs_queue_time_at(&q, j);
            ck_assert(least >= n.t);
        }
    }
    gs_queue_fini(&q);
}
END_TEST

/* Spans: an entry pushed with gs_queue_push_span(n) pops where the first of n single pushes
 * at the same time would have, against a second queue holding the n singles (ids: the span's
 * id, then id + 1 ..): popping the singles and skipping the n - 1 after a span's first gives
 * the spans' order. Times from a small set, so ties with other entries are frequent. */
START_TEST(test_span)
{
    gs_queue spans = {0}, singles = {0};
    unsigned s = 99;
    uint64_t id = 0;
    enum { N = 3000 };
    static uint64_t width[N * 8];
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        double t = (double)((s >> 16) % 53);
        uint64_t n = 1 + (s >> 8) % 5;
        ck_assert_int_eq(gs_queue_push_span(&spans, t, id, 0, n), 0);
        for (uint64_t k = 0; k < n; k++)
            ck_assert_int_eq(gs_queue_push(&singles, t, id + k, 0), 0);
        width[id] = n;
        id += n;
    }
    ck_assert_uint_eq(spans.seq, singles.seq);
    while (spans.n > 0) {
        gs_qnode a = gs_queue_pop(&spans), b = gs_queue_pop(&singles);
        ck_assert_uint_eq(a.id, b.id);
        ck_assert(a.t == b.t);
        for (uint64_t k = 1; k < width[a.id]; k++) {
            gs_qnode c = gs_queue_pop(&singles);
            ck_assert_uint_eq(c.id, a.id + k); /* the rest of the span follows at once */
        }
    }
    ck_assert_uint_eq(singles.n, 0);
    gs_queue_fini(&spans);
    gs_queue_fini(&singles);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("order");
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_interleaved);
    tcase_add_test(tc, test_span);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
