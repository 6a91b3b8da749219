/* Check suite for exec/p2p_groups.c: the pairing, the hoists of the rendezvous play, and the
 * schedules it must refuse, on hand-built two-rank schedules whose groups are worked out by hand
 * in the comments. The end-to-end check (the interleaved pipeline running under sends that wait
 * for their receivers, with the eager run's losses) is tests/check_exec's rendezvous_p2p. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule.h"
#include "exec/p2p_groups.h"

#define NO UINT32_MAX

static gs_schedule *two_ranks(void)
{
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(2, &sch), GS_OK);
    sch->mesh.world = 2;
    sch->exact = 1;
    for (size_t i = 0; i < 2; i++) {
        sch->ranks[i].rank = i;
        sch->ranks[i].class_size = 1;
    }
    return sch;
}

/* Appends an event to rank r: a send or recv with the other rank on the pp stream, a compute
 * event, or a TP all-reduce of group 0 (both ranks); dep: an earlier event or NO. */
static uint32_t add(gs_schedule *sch, size_t r, gs_event_kind kind, uint32_t dep)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)kind;
    e.phase = GS_PHASE_FWD;
    e.layer = 0;
    e.bytes = 1024;
    switch (kind) {
    case GS_EV_SEND:
    case GS_EV_RECV:
        e.stream = GS_STREAM_PP;
        e.peer = 1 - r;
        break;
    case GS_EV_COLLECTIVE:
        e.stream = GS_STREAM_TP;
        e.op = GS_COLL_ALLREDUCE;
        e.group = GS_GROUP_TP;
        e.peer = 0;
        e.group_size = 2;
        break;
    default:
        e.stream = GS_STREAM_COMPUTE;
        break;
    }
    const uint32_t *lists[GS_LINK_LISTS] = {&dep, NULL, NULL, NULL, NULL};
    e.nlinks[GS_LINK_DEPS] = dep != NO;
    uint32_t id = NO;
    ck_assert_int_eq(gs_rank_add_event(&sch->ranks[r], &e, lists, &id), GS_OK);
    return id;
}

typedef struct plan {
    uint32_t *lead[2];
    size_t hoisted;
    gs_error err;
} plan;

static gs_status make_plan(const gs_schedule *sch, int pair, int rendezvous, plan *p)
{
    for (size_t i = 0; i < 2; i++)
        ck_assert_ptr_nonnull(p->lead[i] = calloc(sch->ranks[i].nevents + 1, sizeof *p->lead[i]));
    gs_error_init(&p->err);
    p->hoisted = 99;
    return gs_p2p_groups_plan(sch, pair, rendezvous, p->lead, &p->hoisted, &p->err);
}

static void plan_free(plan *p)
{
    free(p->lead[0]);
    free(p->lead[1]);
}

/* Each rank: compute, a send after it, a receive. The send goes with the receive after it
 * (lead = 1 + the receive's index); nothing else is grouped, and the play needs no hoist. With
 * pair = 0 nothing is grouped. */
START_TEST(pairing)
{
    gs_schedule *sch = two_ranks();
    for (size_t r = 0; r < 2; r++) {
        uint32_t c = add(sch, r, GS_EV_COMPUTE, NO);
        add(sch, r, GS_EV_SEND, c);
        add(sch, r, GS_EV_RECV, NO);
    }
    plan p;
    for (int rv = 0; rv < 2; rv++) {
        ck_assert_int_eq(make_plan(sch, 1, rv, &p), GS_OK);
        for (size_t r = 0; r < 2; r++) {
            ck_assert_uint_eq(p.lead[r][0], 0);
            ck_assert_uint_eq(p.lead[r][1], 3);
            ck_assert_uint_eq(p.lead[r][2], 0);
        }
        ck_assert_uint_eq(p.hoisted, 0);
        plan_free(&p);
    }
    ck_assert_int_eq(make_plan(sch, 0, 1, &p), GS_OK);
    for (size_t r = 0; r < 2; r++)
        for (size_t e = 0; e < 3; e++)
            ck_assert_uint_eq(p.lead[r][e], 0);
    plan_free(&p);
    gs_schedule_destroy(sch);
}
END_TEST

/* Each rank: send X, send Y, receive Z, receive W (X matches the peer's Z, Y its W). Pairing
 * groups Y with Z on both, and the play is stuck at once: each X waits for the peer's Z, which
 * is in a group behind the peer's own X. Rank 0 is the lowest rank waiting, so rank 1's Z is
 * hoisted into rank 1's X (lead 1) and rank 1's Y goes alone again. Rank 0's X then completes,
 * its group {Y, Z} waits for rank 1's W while rank 1's lone Y waits for rank 0's W, queued behind
 * that group: rank 1's W is hoisted into its Y (lead 2). Then everything completes.
 * Rank 0: 0 3 0 0; rank 1: 0 0 1 2; two hoists. */
START_TEST(hoists)
{
    gs_schedule *sch = two_ranks();
    for (size_t r = 0; r < 2; r++) {
        add(sch, r, GS_EV_SEND, NO);
        add(sch, r, GS_EV_SEND, NO);
        add(sch, r, GS_EV_RECV, NO);
        add(sch, r, GS_EV_RECV, NO);
    }
    plan p;
    ck_assert_int_eq(make_plan(sch, 1, 0, &p), GS_OK); /* eager: the pairing only */
    for (size_t r = 0; r < 2; r++) {
        const uint32_t want[4] = {0, 3, 0, 0};
        for (size_t e = 0; e < 4; e++)
            ck_assert_uint_eq(p.lead[r][e], want[e]);
    }
    plan_free(&p);
    ck_assert_msg(make_plan(sch, 1, 1, &p) == GS_OK, "%s", p.err.msg);
    const uint32_t want[2][4] = {{0, 3, 0, 0}, {0, 0, 1, 2}};
    for (size_t r = 0; r < 2; r++)
        for (size_t e = 0; e < 4; e++)
            ck_assert_msg(p.lead[r][e] == want[r][e], "rank %zu event %zu: lead %u, want %u", r, e, p.lead[r][e],
                          want[r][e]);
    ck_assert_uint_eq(p.hoisted, 2);
    plan_free(&p);
    gs_schedule_destroy(sch);
}
END_TEST

/* A receive with dependencies is never hoisted: the same schedule with each Z after a compute
 * event stays stuck, and the error names the waits (rank 0's X waits for rank 1's Z). */
START_TEST(no_hoist_past_dependencies)
{
    gs_schedule *sch = two_ranks();
    for (size_t r = 0; r < 2; r++) {
        uint32_t c = add(sch, r, GS_EV_COMPUTE, NO);
        add(sch, r, GS_EV_SEND, NO);
        add(sch, r, GS_EV_SEND, NO);
        add(sch, r, GS_EV_RECV, c);
        add(sch, r, GS_EV_RECV, NO);
    }
    plan p;
    ck_assert_int_eq(make_plan(sch, 1, 1, &p), GS_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(p.err.msg, "rank 0's L0.mb0.fwd.send waits for rank 1's L0.mb0.fwd.recv") != NULL, "%s",
                  p.err.msg);
    plan_free(&p);
    gs_schedule_destroy(sch);
}
END_TEST

/* Each rank receives, computes on it and sends: a deadlock whatever the grouping (and under
 * eager sends too). The play reports it; the pairing alone (eager) does not look. */
START_TEST(true_deadlock)
{
    gs_schedule *sch = two_ranks();
    for (size_t r = 0; r < 2; r++) {
        uint32_t rv = add(sch, r, GS_EV_RECV, NO);
        uint32_t c = add(sch, r, GS_EV_COMPUTE, rv);
        add(sch, r, GS_EV_SEND, c);
    }
    plan p;
    ck_assert_int_eq(make_plan(sch, 1, 0, &p), GS_OK);
    plan_free(&p);
    ck_assert_int_eq(make_plan(sch, 1, 1, &p), GS_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(p.err.msg, "no grouping of the sends breaks") &&
                      strstr(p.err.msg, "rank 0's L0.mb0.fwd.recv waits for rank 1's L0.mb0.fwd.send"),
                  "%s", p.err.msg);
    plan_free(&p);
    gs_schedule_destroy(sch);
}
END_TEST

/* Collectives take part: rank 0 receives, then all-reduces after the receive; rank 1 all-reduces,
 * then sends after it. The send waits for the all-reduce, which waits for rank 0's, which waits
 * for the receive: stuck. (A play that let collectives complete alone would pass it.) Swapping
 * rank 0's order (all-reduce first, then the receive) is fine. */
START_TEST(collectives_rendezvous)
{
    for (int swapped = 0; swapped < 2; swapped++) {
        gs_schedule *sch = two_ranks();
        if (!swapped) {
            uint32_t rv = add(sch, 0, GS_EV_RECV, NO);
            add(sch, 0, GS_EV_COLLECTIVE, rv);
        } else {
            uint32_t ar = add(sch, 0, GS_EV_COLLECTIVE, NO);
            add(sch, 0, GS_EV_RECV, ar);
        }
        uint32_t ar = add(sch, 1, GS_EV_COLLECTIVE, NO);
        add(sch, 1, GS_EV_SEND, ar);
        plan p;
        gs_status rc = make_plan(sch, 1, 1, &p);
        ck_assert_msg(rc == (swapped ? GS_OK : GS_ERR_UNSUPPORTED), "swapped %d: %s", swapped, p.err.msg);
        plan_free(&p);
        gs_schedule_destroy(sch);
    }
}
END_TEST

/* A send with no receive on the other side is an input error naming it. */
START_TEST(unmatched)
{
    gs_schedule *sch = two_ranks();
    add(sch, 0, GS_EV_SEND, NO);
    add(sch, 1, GS_EV_COMPUTE, NO);
    plan p;
    ck_assert_int_eq(make_plan(sch, 1, 1, &p), GS_ERR_INPUT);
    ck_assert_msg(strstr(p.err.msg, "rank 0's L0.mb0.fwd.send (to rank 1) has no match") != NULL, "%s", p.err.msg);
    plan_free(&p);
    gs_schedule_destroy(sch);
}
END_TEST

static Suite *p2p_groups_suite(void)
{
    Suite *s = suite_create("p2p_groups");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, pairing);
    tcase_add_test(tc, hoists);
    tcase_add_test(tc, no_hoist_past_dependencies);
    tcase_add_test(tc, true_deadlock);
    tcase_add_test(tc, collectives_rendezvous);
    tcase_add_test(tc, unmatched);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(p2p_groups_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
