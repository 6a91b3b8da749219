/* Check suite for exec/dispatch_gaps: a compute-stream event's gap is its start minus when it was
 * ready (the previous compute event's end, or a later end of a dependency on another stream),
 * worked out by hand on a two-rank schedule. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "engine/schedule.h"
#include "exec/dispatch_gaps.h"

#define NO UINT32_MAX

static uint32_t add(gs_rank_events *re, gs_stream stream, uint32_t dep)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = stream == GS_STREAM_COMPUTE ? GS_EV_COMPUTE : GS_EV_COLLECTIVE;
    e.stream = (uint8_t)stream;
    e.phase = GS_PHASE_FWD;
    if (stream != GS_STREAM_COMPUTE) {
        e.op = GS_COLL_ALLREDUCE;
        e.group = GS_GROUP_TP;
        e.group_size = 2;
    }
    const uint32_t *lists[GS_LINK_LISTS] = {&dep, NULL, NULL, NULL, NULL};
    e.nlinks[GS_LINK_DEPS] = dep != NO;
    uint32_t id = NO;
    ck_assert_int_eq(gs_rank_add_event(re, &e, lists, &id), GS_OK);
    return id;
}

/* Rank 0: c0 [0.1, 1.0] (gap 0.1: the step's start); tp [1.5, 2.0] on the TP stream
 * (dep c0); c1 depends on tp, starts 2.3: ready at 2.0 (the all-reduce), gap 0.3; c2 starts 2.9
 * after c1's end 2.5: gap 0.4; c3 starts exactly at c2's end 3.0: no gap. Total 0.8 s, 3 gaps,
 * the longest 0.4. Rank 1: c0 [0, 1], c1 waits for an all-reduce ending at 4.0 and starts at 4.0:
 * waiting for a dependency is no gap, 0 s. The step's worst rank is 0. */
START_TEST(gaps_by_hand)
{
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(2, &sch), GS_OK);
    for (size_t i = 0; i < 2; i++)
        sch->ranks[i].rank = i;
    gs_rank_events *r0 = &sch->ranks[0], *r1 = &sch->ranks[1];
    uint32_t c0 = add(r0, GS_STREAM_COMPUTE, NO);
    uint32_t tp = add(r0, GS_STREAM_TP, c0);
    uint32_t c1 = add(r0, GS_STREAM_COMPUTE, tp);
    uint32_t c2 = add(r0, GS_STREAM_COMPUTE, NO);
    uint32_t c3 = add(r0, GS_STREAM_COMPUTE, NO);
    gs_timing t0[5];
    t0[c0] = (gs_timing){0.1, 0.1, 1.0};
    t0[tp] = (gs_timing){1.0, 1.5, 2.0};
    t0[c1] = (gs_timing){2.3, 2.3, 2.5};
    t0[c2] = (gs_timing){2.9, 2.9, 3.0};
    t0[c3] = (gs_timing){3.0, 3.0, 3.5};
    uint32_t d0 = add(r1, GS_STREAM_COMPUTE, NO);
    uint32_t ar = add(r1, GS_STREAM_TP, d0);
    uint32_t d1 = add(r1, GS_STREAM_COMPUTE, ar);
    gs_timing t1[3];
    t1[d0] = (gs_timing){0, 0, 1.0};
    t1[ar] = (gs_timing){1.0, 3.5, 4.0};
    t1[d1] = (gs_timing){4.0, 4.0, 4.5};
    double g;
    size_t n;
    double l;
    gs_dispatch_gaps_rank(r0, t0, &g, &n, &l);
    ck_assert(fabs(g - 0.8) < 1e-12);
    ck_assert_uint_eq(n, 3);
    ck_assert(fabs(l - 0.4) < 1e-12);
    gs_dispatch_gaps_rank(r1, t1, &g, &n, &l);
    ck_assert(g == 0 && n == 0 && l == 0);
    gs_timing *const all[2] = {t0, t1};
    gs_dispatch_gaps d;
    gs_dispatch_gaps_step(sch, all, &d);
    ck_assert(fabs(d.gap_s - 0.8) < 1e-12);
    ck_assert_uint_eq(d.rank, 0);
    ck_assert_uint_eq(d.gaps, 3);
    /* a rank measured elsewhere (no timing here) is skipped */
    gs_timing *const one[2] = {NULL, t1};
    gs_dispatch_gaps_step(sch, one, &d);
    ck_assert(d.gap_s == 0 && d.rank == 1);
    gs_schedule_destroy(sch);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatch_gaps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, gaps_by_hand);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
