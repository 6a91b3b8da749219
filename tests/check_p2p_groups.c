/* Check suite for exec/p2p_groups.c: the pairing, the hoists of the rendezvous play, and the
 * schedules it must refuse, on hand-built two-rank schedules whose groups are worked out by hand
 * in the comments; and random schedules whose plans the host driver then runs under sends that
 * wait for their receivers. The end-to-end check (the interleaved pipeline running under such
 * sends, with the eager run's losses) is tests/check_exec's rendezvous_p2p. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mesh.h"
#include "engine/schedule.h"
#include "exec/driver.h"
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

/* ---- random schedules, planned, then run -------------------------------------------------- */

/* A schedule of R ranks' p2p events on one stream each: M messages in a random global order, each
 * a send appended to its sender's list and a receive to its receiver's. Every receive follows its
 * send in that order, so eager sends always finish; sends that wait for their receivers may not,
 * which the plan must fix. payload[r][e]: the message's id (sends) or the id expected (receives). */
#define RAND_RANKS 4
#define RAND_MSGS 40

typedef struct rand_sched {
    gs_schedule *sch;
    float payload[RAND_RANKS][2 * RAND_MSGS];
} rand_sched;

static uint64_t rng_next(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

static void rand_add(rand_sched *rs, size_t r, gs_event_kind kind, uint64_t peer, unsigned m)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)kind;
    e.stream = GS_STREAM_PP;
    e.phase = GS_PHASE_FWD;
    e.layer = (int32_t)m;
    e.mb = m;
    e.bytes = sizeof(float);
    e.peer = peer;
    uint32_t id = NO;
    ck_assert_int_eq(gs_rank_add_event(&rs->sch->ranks[r], &e, NULL, &id), GS_OK);
    rs->payload[r][id] = (float)m;
}

/* Messages in a random order, each send appended at once and its receive after a random number
 * of later messages (a pair's receives in their sends' order): every rank can run its list with
 * eager sends, but neighbours that send before they receive would wait on each other under
 * rendezvous sends without groups. */
static void rand_build(rand_sched *rs, unsigned ranks, unsigned msgs, uint64_t seed)
{
    ck_assert_int_eq(gs_schedule_create(ranks, &rs->sch), GS_OK);
    rs->sch->mesh.world = ranks;
    rs->sch->exact = 1;
    for (size_t r = 0; r < ranks; r++) {
        rs->sch->ranks[r].rank = r;
        rs->sch->ranks[r].class_size = 1;
    }
    uint64_t x = seed;
    unsigned pend_m[RAND_MSGS], npend = 0;
    uint64_t pend_a[RAND_MSGS], pend_b[RAND_MSGS];
    for (unsigned m = 0; m < msgs || npend; m++) {
        if (m < msgs) {
            uint64_t a = rng_next(&x) % ranks, b = (a + 1 + rng_next(&x) % (ranks - 1)) % ranks;
            rand_add(rs, a, GS_EV_SEND, b, m);
            pend_m[npend] = m, pend_a[npend] = a, pend_b[npend] = b, npend++;
        }
        /* the oldest pending receives, each with probability 1/2 (all once the sends are out) */
        while (npend && (m >= msgs || rng_next(&x) % 2)) {
            rand_add(rs, pend_b[0], GS_EV_RECV, pend_a[0], pend_m[0]);
            memmove(pend_m, pend_m + 1, (npend - 1) * sizeof *pend_m);
            memmove(pend_a, pend_a + 1, (npend - 1) * sizeof *pend_a);
            memmove(pend_b, pend_b + 1, (npend - 1) * sizeof *pend_b);
            npend--;
        }
    }
}

typedef struct rand_rank {
    const gs_driver_ops *h;
    gs_drv *d;
    const gs_rank_events *re;
    const uint32_t *lead;
    const float *payload;
    float got[2 * RAND_MSGS];
} rand_rank;

/* The rank's events as exec issues them: an event that leads itself issues its group (the sends
 * before it and the receives after it that lead to it, sends first), the others do nothing. */
static gs_status rand_run(void *arg, gs_drv_stream *s, gs_error *err)
{
    rand_rank *x = arg;
    gs_status rc = GS_OK;
    for (size_t e = 0; e < x->re->nevents && rc == GS_OK; e++) {
        if (x->lead[e])
            continue;
        gs_drv_p2p ops[2 * RAND_MSGS];
        size_t n = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < x->re->nevents; i++) {
                const gs_event *ev = &x->re->events[i];
                int recv = ev->kind == GS_EV_RECV;
                if ((i != e && x->lead[i] != e + 1) || recv != pass)
                    continue;
                ops[n++] = (gs_drv_p2p){recv, ev->peer, recv ? &x->got[i] : (void *)&x->payload[i], sizeof(float)};
            }
        rc = x->h->p2p_group(x->d, s, x->re->rank, ops, n, err);
    }
    return rc;
}

/* Random schedules on 2-4 ranks: each plan under rendezvous is either refused (its message names
 * waits) or, run by the host driver with sends that wait for their receivers (1 s timeout),
 * completes with every message where its receive expects it. Most are planned: the pairing
 * alone rarely suffices, so hoists are exercised. */
START_TEST(random_plans_run)
{
    unsigned planned = 0, refused = 0, hoisting = 0;
    for (unsigned trial = 0; trial < 60; trial++) {
        unsigned ranks = 2 + trial % 3, msgs = 8 + trial % 33;
        rand_sched rs;
        memset(&rs, 0, sizeof rs);
        rand_build(&rs, ranks, msgs, 0x9e3779b9u * (trial + 1));
        uint32_t *lead[RAND_RANKS] = {NULL};
        for (unsigned r = 0; r < ranks; r++)
            ck_assert_ptr_nonnull(lead[r] = calloc(rs.sch->ranks[r].nevents + 1, sizeof *lead[r]));
        gs_error err;
        gs_error_init(&err);
        size_t hoisted = 0;
        gs_status rc = gs_p2p_groups_plan(rs.sch, 1, 1, lead, &hoisted, &err);
        if (rc == GS_ERR_UNSUPPORTED) {
            ck_assert_msg(strstr(err.msg, "waits for rank") != NULL, "%s", err.msg);
            refused++;
        } else {
            ck_assert_msg(rc == GS_OK, "trial %u: %s", trial, err.msg);
            planned++;
            hoisting += hoisted > 0;
            gs_mesh mesh;
            ck_assert_int_eq(gs_mesh_init(&mesh, 1, 1, ranks, NULL, ranks, &err), GS_OK);
            const gs_driver_ops *h = &gs_driver_host;
            gs_driver_opts o = {.timeout_s = 1.0, .set = {.host_p2p = "rendezvous"}};
            gs_drv *d = NULL;
            ck_assert_int_eq(h->open(&mesh, &o, &d, &err), GS_OK);
            gs_drv_stream *st[RAND_RANKS] = {NULL};
            rand_rank x[RAND_RANKS];
            for (unsigned r = 0; r < ranks; r++) {
                x[r] = (rand_rank){h, d, &rs.sch->ranks[r], lead[r], rs.payload[r], {0}};
                ck_assert_int_eq(h->stream_create(d, r, GS_STREAM_PP, &st[r], &err), GS_OK);
            }
            for (unsigned r = 0; r < ranks; r++)
                ck_assert_int_eq(h->launch(d, st[r], rand_run, &x[r], &err), GS_OK);
            for (unsigned r = 0; r < ranks; r++) {
                gs_error e2;
                gs_error_init(&e2);
                ck_assert_msg(h->stream_sync(d, st[r], &e2) == GS_OK, "trial %u (%u ranks, %u messages, %zu hoisted): %s",
                              trial, ranks, msgs, hoisted, e2.msg);
            }
            for (unsigned r = 0; r < ranks; r++) {
                for (size_t e = 0; e < rs.sch->ranks[r].nevents; e++)
                    if (rs.sch->ranks[r].events[e].kind == GS_EV_RECV)
                        ck_assert_msg(x[r].got[e] == rs.payload[r][e], "trial %u rank %u event %zu: got message %g, want %g",
                                      trial, r, e, (double)x[r].got[e], (double)rs.payload[r][e]);
                h->stream_destroy(d, st[r]);
            }
            h->close(d);
        }
        for (unsigned r = 0; r < ranks; r++)
            free(lead[r]);
        gs_schedule_destroy(rs.sch);
    }
    printf("random p2p schedules: %u planned (%u with hoists) and run, %u refused\n", planned, hoisting, refused);
    ck_assert_uint_gt(planned, 40);
    ck_assert_uint_gt(hoisting, 5);
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
    tcase_add_test(tc, random_plans_run);
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
