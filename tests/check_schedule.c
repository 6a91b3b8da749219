/* Check suite for engine/schedule (storage, names, byte counts, dump/load, structural
 * validation) on schedules built by hand here, 1-4 ranks on tiny meshes. Expected values are
 * hand arithmetic written beside each assertion, a literal dump text written out below, or an
 * independent parser (jansson for the JSON form). The builders have their own suite. */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/roles.h"
#include "engine/schedule.h"

/* ------------------------------------------------------------------------- helpers ---- */

static gs_mesh make_mesh(uint64_t tp, uint64_t dp, uint64_t pp, uint64_t gpn)
{
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_mesh_init(&m, tp, dp, pp, NULL, gpn, &err) == GS_OK, "mesh: %s", err.msg);
    return m;
}

/* A schedule over mesh with the given ranks present (stage from the mesh, class size 1). */
static gs_schedule *make_schedule(const gs_mesh *m, size_t n, const uint64_t *ranks)
{
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(n, &sch), GS_OK);
    strcpy(sch->scenario, "hand");
    sch->mesh = *m;
    sch->microbatches = 1;
    sch->exact = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(m, ranks[i], c);
        sch->ranks[i].rank = ranks[i];
        sch->ranks[i].class_size = 1;
        sch->ranks[i].stage = c[GS_DIM_PP];
    }
    return sch;
}

static uint32_t add_tensor(gs_rank_events *r, gs_tensor_kind k, uint64_t bytes, int resident, int host)
{
    gs_tensor t;
    memset(&t, 0, sizeof t);
    t.kind = (uint8_t)k;
    t.bytes = bytes;
    t.resident = (uint8_t)resident;
    t.on_host = (uint8_t)host;
    uint32_t id = UINT32_MAX;
    ck_assert_int_eq(gs_rank_add_tensor(r, &t, &id), GS_OK);
    return id;
}

/* The first role of engine/roles.c's table that e's kind, stream, phase, op, group and layer fit
 * (the structural tests below are about other things than roles; role checks have their own). */
static void fit_role(gs_event *e)
{
    char why[96];
    for (int r = GS_ROLE_NONE + 1; r < GS_ROLE_COUNT; r++) {
        e->role = (uint8_t)r;
        if (gs_role_check(e, why, sizeof why))
            return;
    }
    e->role = GS_ROLE_NONE;
}

static gs_event ev_compute(gs_phase ph, gs_op op, int32_t layer, uint32_t mb)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COMPUTE;
    e.stream = GS_STREAM_COMPUTE;
    e.phase = (uint8_t)ph;
    e.op = (uint8_t)op;
    e.layer = layer;
    e.mb = mb;
    fit_role(&e);
    return e;
}

static gs_event ev_coll(gs_coll_op op, gs_group_kind g, uint64_t gidx, uint64_t gsize, uint64_t bytes,
                        int32_t layer, uint32_t mb, gs_phase ph)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = GS_EV_COLLECTIVE;
    e.stream = g == GS_GROUP_TP ? GS_STREAM_TP : g == GS_GROUP_PP ? GS_STREAM_PP : GS_STREAM_DP;
    e.phase = (uint8_t)ph;
    e.op = (uint8_t)op;
    e.group = (uint8_t)g;
    e.peer = gidx;
    e.group_size = gsize;
    e.bytes = bytes;
    e.layer = layer;
    e.mb = mb;
    fit_role(&e);
    return e;
}

static gs_event ev_p2p(gs_event_kind k, uint64_t peer, uint64_t bytes, uint32_t mb, gs_phase ph)
{
    gs_event e;
    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)k;
    e.stream = GS_STREAM_PP;
    e.phase = (uint8_t)ph;
    e.peer = peer;
    e.bytes = bytes;
    e.layer = GS_LAYER_NONE;
    e.mb = mb;
    fit_role(&e);
    return e;
}

/* Appends e with lists written as "d0,1 r2 w3 a4 f5" (deps, reads, writes, allocs, frees). */
static uint32_t add(gs_rank_events *r, gs_event e, const char *links)
{
    uint32_t store[GS_LINK_LISTS][16];
    const uint32_t *lists[GS_LINK_LISTS];
    memset(e.nlinks, 0, sizeof e.nlinks);
    for (int w = 0; w < GS_LINK_LISTS; w++)
        lists[w] = store[w];
    for (const char *p = links; p && *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *which = strchr("drwaf", *p);
        ck_assert_ptr_nonnull(which);
        int w = (int)(which - "drwaf");
        p++;
        for (;;) {
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            ck_assert_ptr_ne(end, p);
            store[w][e.nlinks[w]++] = (uint32_t)v;
            p = end;
            if (*p != ',')
                break;
            p++;
        }
    }
    uint32_t id = UINT32_MAX;
    ck_assert_int_eq(gs_rank_add_event(r, &e, lists, &id), GS_OK);
    return id;
}

static const char *name_of(const gs_rank_events *r, uint32_t id, char *buf, size_t len)
{
    gs_event_name(r, &r->events[id], buf, len);
    return buf;
}

static char *dump_text(const gs_schedule *sch)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_schedule_dump(sch, f, &err), GS_OK);
    fclose(f);
    return buf;
}

static gs_status load_text(const char *text, gs_schedule **out, gs_error *err)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    ck_assert_ptr_nonnull(f);
    gs_status st = gs_schedule_load(f, "x.sched", out, err);
    fclose(f);
    return st;
}

#define ASSERT_HAS(msg, needle) ck_assert_msg(strstr((msg), (needle)) != NULL, "'%s' not in: %s", (needle), (msg))

/* ------------------------------------------------------------------------- storage ---- */

START_TEST(test_add_and_list)
{
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(add_tensor(&r, GS_T_ACTIVATION, 100u * (unsigned)i, 0, 0), (unsigned)i);
    gs_event e = ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0);
    ck_assert_uint_eq(add(&r, e, ""), 0);
    ck_assert_uint_eq(add(&r, e, "d0 r1,2 w3 a3,4 f1"), 1);
    ck_assert_uint_eq(add(&r, e, "f4,3,2"), 2);
    /* NULL lists are fine when every count is 0; a count without a list is refused. */
    ck_assert_int_eq(gs_rank_add_event(&r, &e, NULL, NULL), GS_OK);
    e.nlinks[GS_LINK_READS] = 1;
    ck_assert_int_eq(gs_rank_add_event(&r, &e, NULL, NULL), GS_ERR_INPUT);
    ck_assert_uint_eq(r.nevents, 4);

    const gs_event *e1 = &r.events[1];
    ck_assert_uint_eq(e1->nlinks[GS_LINK_DEPS], 1);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_DEPS)[0], 0);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_READS)[0], 1);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_READS)[1], 2);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_WRITES)[0], 3);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_ALLOCS)[0], 3);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_ALLOCS)[1], 4);
    ck_assert_uint_eq(gs_event_list(&r, e1, GS_LINK_FREES)[0], 1);
    const gs_event *e2 = &r.events[2];
    ck_assert_uint_eq(e2->nlinks[GS_LINK_FREES], 3);
    ck_assert_uint_eq(gs_event_list(&r, e2, GS_LINK_FREES)[2], 2);
    ck_assert_uint_eq(r.npool, 1 + 2 + 1 + 2 + 1 + 3); /* 10 links in all */

    /* Growth well past the initial capacity, then finish, then more appends. */
    for (uint32_t i = 4; i < 5000; i++) {
        gs_event x = ev_compute(GS_PHASE_BWD, GS_OP_MLP_UP, (int32_t)(i % 7), i);
        x.bytes = i;
        char links[64];
        snprintf(links, sizeof links, "d%u,%u r%u", i - 1, i / 2, i % 5);
        ck_assert_uint_eq(add(&r, x, links), i);
    }
    gs_rank_finish(&r);
    ck_assert_uint_eq(r.cap_events, r.nevents);
    ck_assert_uint_eq(add(&r, ev_compute(GS_PHASE_FWD, GS_OP_ATTN, 1, 1), "d4999"), 5000);
    for (uint32_t i = 4; i < 5001; i++) {
        const gs_event *x = &r.events[i];
        if (i < 5000) {
            ck_assert_uint_eq(x->bytes, i);
            ck_assert_uint_eq(gs_event_list(&r, x, GS_LINK_DEPS)[1], i / 2);
            ck_assert_uint_eq(gs_event_list(&r, x, GS_LINK_READS)[0], i % 5);
        }
        ck_assert_uint_eq(gs_event_list(&r, x, GS_LINK_DEPS)[0], i - 1);
    }

    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(2, &sch), GS_OK);
    sch->ranks[1] = r; /* the schedule takes ownership */
    sch->ranks[1].rank = 7;
    ck_assert_ptr_eq(gs_schedule_find_rank(sch, 7), &sch->ranks[1]);
    ck_assert_ptr_null(gs_schedule_find_rank(sch, 3));
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_sent_bytes)
{
    /* 4 ranks x 1000 B shards: the all-gather's buffer is 4000 B, each rank sends 3 shards. */
    gs_event e = ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, 0, 4, 4000, 0, 0, GS_PHASE_FWD);
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 3000);
    e.op = GS_COLL_REDUCE_SCATTER; /* same traffic as the all-gather */
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 3000);
    e.op = GS_COLL_ALLREDUCE; /* ring: RS + AG = 2 x 3 x 1000 */
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 6000);
    e.bytes = 4001; /* chunks of ceil(4001/4) = 1001: 2 x 3 x 1001 */
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 6006);
    e.op = GS_COLL_ALLTOALL; /* 3/4 of 4000 */
    e.bytes = 4000;
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 3000);
    e.op = GS_COLL_BROADCAST; /* nccl-tests bus bytes: the buffer */
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 4000);
    e.op = GS_COLL_ALLGATHER; /* 8 ranks x 2^40 B shards: no overflow, 7 x 2^40 */
    e.group_size = 8;
    e.bytes = (uint64_t)8 << 40;
    ck_assert_uint_eq(gs_event_sent_bytes(&e), (uint64_t)7 << 40);
    e.group_size = 1; /* a group of one sends nothing */
    ck_assert_uint_eq(gs_event_sent_bytes(&e), 0);
    gs_event s = ev_p2p(GS_EV_SEND, 1, 123, 0, GS_PHASE_FWD);
    ck_assert_uint_eq(gs_event_sent_bytes(&s), 123);
    s.kind = GS_EV_RECV;
    ck_assert_uint_eq(gs_event_sent_bytes(&s), 0);
    gs_event c = ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0);
    c.bytes = 1 << 20;
    ck_assert_uint_eq(gs_event_sent_bytes(&c), 0);
    c.kind = GS_EV_COPY_H2D;
    ck_assert_uint_eq(gs_event_sent_bytes(&c), 0);
}
END_TEST

START_TEST(test_peak_walk)
{
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    uint32_t t0 = add_tensor(&r, GS_T_MASTER, 100, 1, 0);       /* resident: counted from the start */
    uint32_t t1 = add_tensor(&r, GS_T_OPT_STATE, 1000, 1, 1);   /* resident on the host: never */
    uint32_t t2 = add_tensor(&r, GS_T_PARAM_FULL, 50, 0, 0);
    uint32_t t3 = add_tensor(&r, GS_T_WORKSPACE, 200, 0, 0);
    uint32_t t4 = add_tensor(&r, GS_T_GRAD_SHARD, 30, 0, 1);    /* host: not counted */
    uint32_t t5 = add_tensor(&r, GS_T_ACTIVATION, 220, 0, 0);
    char l[64];
    (void)t0;
    (void)t1;
    snprintf(l, sizeof l, "a%u", t2);
    add(&r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), l);            /* 100 + 50 = 150 */
    snprintf(l, sizeof l, "a%u,%u f%u", t3, t4, t3);
    add(&r, ev_compute(GS_PHASE_FWD, GS_OP_ATTN, 0, 0), l);           /* 150 + 200 = 350 at the event, 150 after */
    snprintf(l, sizeof l, "f%u", t2);
    add(&r, ev_compute(GS_PHASE_FWD, GS_OP_OPROJ, 0, 0), l);          /* 150 -> 100 */
    snprintf(l, sizeof l, "a%u", t5);
    add(&r, ev_compute(GS_PHASE_FWD, GS_OP_MLP_UP, 0, 0), l);         /* 100 + 220 = 320 */
    /* Max is 350 (the workspace counts while its event runs, though freed by it). */
    ck_assert_uint_eq(gs_rank_peak_bytes(&r), 350);

    gs_rank_events empty;
    memset(&empty, 0, sizeof empty);
    ck_assert_uint_eq(gs_rank_peak_bytes(&empty), 0);
    free(r.events);
    free(r.tensors);
    free(r.pool);
    free(r.dups);
    free(r.name_hash);
}
END_TEST

/* --------------------------------------------------------------------------- names ---- */

START_TEST(test_names)
{
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    char b[GS_EVENT_NAME_BYTES];
    struct {
        gs_event e;
        const char *name;
    } cases[32];
    int n = 0;
#define CASE(ev, nm) (cases[n].e = (ev), cases[n].name = (nm), n++)
    CASE(ev_compute(GS_PHASE_FWD, GS_OP_ATTN, 12, 3), "L12.mb3.fwd.attn");
    CASE(ev_compute(GS_PHASE_RECOMPUTE, GS_OP_MLP_UP, 12, 3), "L12.mb3.recompute.mlp_up");
    CASE(ev_compute(GS_PHASE_BWD, GS_OP_QKV, 12, 3), "L12.mb3.bwd.qkv");
    CASE(ev_compute(GS_PHASE_FWD, GS_OP_EMBED, GS_LAYER_EMBED, 0), "emb.mb0.fwd");
    CASE(ev_compute(GS_PHASE_FWD, GS_OP_HEAD, GS_LAYER_HEAD, 0), "head.mb0.fwd");
    CASE(ev_compute(GS_PHASE_FWD, GS_OP_LOSS, GS_LAYER_HEAD, 0), "head.mb0.fwd.loss");
    CASE(ev_compute(GS_PHASE_OPTIM, GS_OP_OPTIMIZER, GS_LAYER_NONE, 0), "optim");
    CASE(ev_compute(GS_PHASE_OPTIM, GS_OP_OPTIMIZER, 4, 0), "L4.optim");
    CASE(ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, 0, 2, 8, 12, 3, GS_PHASE_FWD), "L12.mb3.fwd.ag");
    CASE(ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, 0, 2, 8, 12, 3, GS_PHASE_BWD), "L12.mb3.bwd.ag");
    CASE(ev_coll(GS_COLL_REDUCE_SCATTER, GS_GROUP_DP_INTRA, 0, 2, 8, 12, 3, GS_PHASE_BWD), "L12.mb3.bwd.rs");
    CASE(ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER, 0, 2, 8, 12, 3, GS_PHASE_BWD), "L12.mb3.bwd.inter_ar");
    CASE(ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 0, 2, 8, 12, 3, GS_PHASE_FWD), "L12.mb3.fwd.tp_ar");
    CASE(ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 0, 2, 8, 12, 3, GS_PHASE_FWD), "L12.mb3.fwd.tp_ar#2");
    CASE(ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 0, 2, 8, 12, 3, GS_PHASE_FWD), "L12.mb3.fwd.tp_ar#3");
    CASE(ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_DP, 0, 2, 8, GS_LAYER_NONE, 7, GS_PHASE_BWD), "unit0.mb7.bwd.ar");
    CASE(ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, 0, 2, 8, GS_LAYER_NONE, 0, GS_PHASE_OPTIM), "unit0.optim.ag");
    CASE(ev_p2p(GS_EV_SEND, 1, 8, 3, GS_PHASE_FWD), "mb3.fwd.send");
    CASE(ev_p2p(GS_EV_RECV, 1, 8, 3, GS_PHASE_BWD), "mb3.bwd.recv");
    CASE(ev_p2p(GS_EV_SEND, 1, 8, 3, GS_PHASE_FWD), "mb3.fwd.send#2");
    gs_event x = ev_p2p(GS_EV_SEND, 1, 8, 3, GS_PHASE_FWD);
    x.chunk = 1;
    CASE(x, "mb3.c1.fwd.send");
    x = ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_DP, 0, 2, 8, GS_LAYER_NONE, 7, GS_PHASE_BWD);
    x.unit = 3;
    CASE(x, "unit3.mb7.bwd.ar");
    x = ev_compute(GS_PHASE_OPTIM, GS_OP_OPTIMIZER, GS_LAYER_NONE, 0);
    x.kind = GS_EV_COPY_H2D;
    x.unit = 2;
    CASE(x, "unit2.optim.h2d");
    x.kind = GS_EV_COPY_D2H;
    CASE(x, "unit2.optim.d2h");
#undef CASE
    for (int i = 0; i < n; i++) {
        uint32_t id = add(&r, cases[i].e, "");
        ck_assert_str_eq(name_of(&r, id, b, sizeof b), cases[i].name);
    }
    /* After finish, the index is rebuilt: a fourth tp_ar is still #4, older names unchanged. */
    gs_rank_finish(&r);
    uint32_t id = add(&r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 0, 2, 8, 12, 3, GS_PHASE_FWD), "");
    ck_assert_str_eq(name_of(&r, id, b, sizeof b), "L12.mb3.fwd.tp_ar#4");
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(name_of(&r, (uint32_t)i, b, sizeof b), cases[i].name);
    /* Short buffers are truncated, never overrun. */
    char small[6];
    memset(small, 'z', sizeof small);
    gs_event_name(&r, &r.events[0], small, 5);
    ck_assert_str_eq(small, "L12.");
    ck_assert_int_eq(small[5], 'z');

    ck_assert_str_eq(gs_event_kind_name(GS_EV_COPY_D2H), "d2h");
    ck_assert_str_eq(gs_stream_name(GS_STREAM_PP), "pp");
    ck_assert_str_eq(gs_phase_name(GS_PHASE_RECOMPUTE), "recompute");
    ck_assert_str_eq(gs_op_name(GS_OP_MLP_DOWN), "mlp_down");
    ck_assert_str_eq(gs_coll_op_name(GS_COLL_REDUCE_SCATTER), "reduce_scatter");
    ck_assert_str_eq(gs_group_kind_name(GS_GROUP_DP_INTER), "dp_inter");
    ck_assert_str_eq(gs_tensor_kind_name(GS_T_OPT_STATE), "opt_state");
    ck_assert_str_eq(gs_op_name(GS_OP_COUNT), "?");
    ck_assert_str_eq(gs_event_kind_name((gs_event_kind)200), "?");

    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(1, &sch), GS_OK);
    sch->ranks[0] = r;
    gs_schedule_destroy(sch);
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every combination of the naming fields, each appended twice: all names differ (the second
 * of each pair gets #2), checked by sorting the strings. */
START_TEST(test_names_unique)
{
    gs_rank_events r;
    memset(&r, 0, sizeof r);
    static const int32_t layers[] = {GS_LAYER_HEAD, GS_LAYER_EMBED, GS_LAYER_NONE, 0, 1, 10};
    for (int rep = 0; rep < 2; rep++)
        for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++)
            for (uint32_t mb = 0; mb < 2; mb++)
                for (int ph = 0; ph < GS_PHASE_COUNT; ph++)
                    for (uint32_t unit = 0; unit < 2; unit++)
                        for (uint8_t chunk = 0; chunk < 2; chunk++) {
                            gs_event e;
                            for (int op = 0; op < GS_OP_COUNT; op++) {
                                e = ev_compute((gs_phase)ph, (gs_op)op, layers[li], mb);
                                e.unit = unit;
                                e.chunk = chunk;
                                add(&r, e, "");
                            }
                            for (int g = 0; g < GS_GROUP_KIND_COUNT; g++)
                                for (int op = 0; op < GS_COLL_COUNT; op++) {
                                    e = ev_coll((gs_coll_op)op, (gs_group_kind)g, 0, 2, 8, layers[li], mb, (gs_phase)ph);
                                    e.unit = unit;
                                    e.chunk = chunk;
                                    add(&r, e, "");
                                }
                            for (int k = GS_EV_SEND; k < GS_EV_KIND_COUNT; k++) {
                                e = ev_p2p((gs_event_kind)k, 1, 8, mb, (gs_phase)ph);
                                e.layer = layers[li];
                                e.unit = unit;
                                e.chunk = chunk;
                                add(&r, e, "");
                            }
                        }
    char **names = malloc(r.nevents * sizeof *names);
    ck_assert_ptr_nonnull(names);
    for (size_t i = 0; i < r.nevents; i++) {
        names[i] = malloc(GS_EVENT_NAME_BYTES);
        gs_event_name(&r, &r.events[i], names[i], GS_EVENT_NAME_BYTES);
    }
    qsort(names, r.nevents, sizeof *names, cmp_str);
    for (size_t i = 1; i < r.nevents; i++)
        ck_assert_msg(strcmp(names[i - 1], names[i]) != 0, "duplicate name %s", names[i]);
    for (size_t i = 0; i < r.nevents; i++)
        free(names[i]);
    free(names);
    gs_schedule *sch = NULL;
    ck_assert_int_eq(gs_schedule_create(1, &sch), GS_OK);
    sch->ranks[0] = r;
    gs_schedule_destroy(sch);
}
END_TEST

/* ---------------------------------------------------------------------------- dump ---- */

/* Mesh tp 1 dp 2 pp 1: rank 0 stands for its class of 2 (the DP pair). */
static gs_schedule *small_schedule(void)
{
    gs_mesh m = make_mesh(1, 2, 1, 8);
    uint64_t ranks[] = {0};
    gs_schedule *sch = make_schedule(&m, 1, ranks);
    sch->exact = 0;
    sch->ranks[0].class_size = 2;
    gs_rank_events *r = &sch->ranks[0];
    add_tensor(r, GS_T_PARAM_SHARD, 1000, 1, 0);
    add_tensor(r, GS_T_PARAM_FULL, 2000, 0, 0);
    add(r, ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, 0, 2, 2000, 0, 0, GS_PHASE_FWD), "r0 w1 a1");
    gs_event q = ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0);
    q.gemm_m = 4096;
    q.gemm_n = 1536;
    q.gemm_k = 2048;
    q.gemm_batch = 1;
    q.bytes = 123;
    q.flops = 0.1;
    add(r, q, "d0 r1");
    gs_event o = ev_compute(GS_PHASE_OPTIM, GS_OP_OPTIMIZER, GS_LAYER_NONE, 0);
    o.flops = 1e12;
    add(r, o, "d0,1 r0 w0 f1");
    return sch;
}

static const char small_text[] =
    "gridstep-schedule 2\n"
    "scenario hand\n"
    "mesh tp 1 dp 2 pp 1 order tp-dp-pp gpus_per_node 8\n"
    "microbatches 1\n"
    "exact 0\n"
    "ranks 1\n"
    "rank 0 class 2 stage 0 tensors 2 events 3\n"
    "t 0 kind param_shard bytes 1000 layer 0 mb 0 unit 0 resident 1 host 0\n"
    "t 1 kind param_full bytes 2000 layer 0 mb 0 unit 0 resident 0 host 0\n"
    "e 0 collective stream dp phase fwd role unit_gather part 0 op all_gather group dp chunk 0 layer 0 mb 0 unit 0 gemm 0 0 0 0 "
    "peer 0 gsize 2 bytes 2000 flops 0 deps - reads 0 writes 1 allocs 1 frees -\n"
    "e 1 compute stream compute phase fwd role qkv part 0 op qkv group - chunk 0 layer 0 mb 0 unit 0 gemm 4096 1536 2048 1 "
    "peer 0 gsize 0 bytes 123 flops 0.10000000000000001 deps 0 reads 1 writes - allocs - frees -\n"
    "e 2 compute stream compute phase optim role optimizer part 0 op optimizer group - chunk 0 layer none mb 0 unit 0 gemm 0 0 0 0 "
    "peer 0 gsize 0 bytes 0 flops 1000000000000 deps 0,1 reads 0 writes 0 allocs - frees 1\n"
    "end\n";

START_TEST(test_dump_text)
{
    gs_schedule *sch = small_schedule();
    char *text = dump_text(sch);
    ck_assert_str_eq(text, small_text);
    free(text);
    gs_schedule_destroy(sch);
}
END_TEST

/* A 2-rank schedule with every field set to something unusual. */
static gs_schedule *rich_schedule(void)
{
    gs_mesh m = make_mesh(2, 2, 1, 8);
    uint64_t ranks[] = {0, 1};
    gs_schedule *sch = make_schedule(&m, 2, ranks);
    strcpy(sch->scenario, "odd name 100%");
    sch->microbatches = 4;
    static const double flops[] = {0.0, 1.0 / 3.0, 3.0000000000000004, 1e300, 4.9e-324, 123456789012345678.0};
    for (int p = 0; p < 2; p++) {
        gs_rank_events *r = &sch->ranks[p];
        for (int i = 0; i < 4; i++) {
            gs_tensor t = {.bytes = UINT64_MAX - (uint64_t)i, .layer = i - 3, .mb = (uint32_t)i, .unit = UINT32_MAX,
                           .kind = (uint8_t)(i + 4), .resident = (uint8_t)(i & 1), .on_host = (uint8_t)(i >> 1)};
            ck_assert_int_eq(gs_rank_add_tensor(r, &t, NULL), GS_OK);
        }
        for (int i = 0; i < 6; i++) {
            gs_event e = ev_compute((gs_phase)(i % GS_PHASE_COUNT), (gs_op)(i + 3), 7 * i - 3, (uint32_t)i);
            e.kind = (uint8_t)(i % GS_EV_KIND_COUNT);
            e.stream = (uint8_t)(i % GS_STREAM_COUNT);
            if (e.kind == GS_EV_COLLECTIVE) {
                e.op = GS_COLL_ALLTOALL;
                e.group = GS_GROUP_DP_INTER;
            } else if (e.kind != GS_EV_COMPUTE) {
                e.op = (uint8_t)(i * 40);
                e.group = (uint8_t)i;
            }
            e.chunk = (uint8_t)(i * 50);
            e.role = (uint8_t)((7 * i + p) % GS_ROLE_COUNT); /* none too: only validation refuses it */
            e.part = (uint16_t)(UINT16_MAX - 1000 * i);
            e.unit = 1000u * (unsigned)i;
            e.gemm_m = UINT32_MAX;
            e.gemm_n = (uint32_t)i;
            e.gemm_k = 7;
            e.gemm_batch = 64;
            e.peer = UINT64_MAX / (uint64_t)(i + 1);
            e.group_size = (uint64_t)i;
            e.bytes = (uint64_t)1 << (10 * i);
            e.flops = flops[i];
            char l[64];
            snprintf(l, sizeof l, "d%d r%d,%d w%d a%d f%d", (i + 5) % 6, i % 4, (i + 1) % 4, (i + 2) % 4, i % 4, 3 - i % 4);
            add(r, e, i == 2 ? "" : l);
        }
    }
    return sch;
}

START_TEST(test_dump_roundtrip)
{
    gs_schedule *sch = rich_schedule();
    char *text = dump_text(sch);
    gs_schedule *back = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(load_text(text, &back, &err) == GS_OK, "load: %s", err.msg);
    char why[256];
    ck_assert_msg(gs_schedule_diff(sch, back, why, sizeof why) == 0, "differs: %s", why);
    ck_assert(gs_schedule_equal(sch, back));
    ck_assert_str_eq(back->scenario, "odd name 100%");
    char *again = dump_text(back);
    ck_assert_str_eq(again, text); /* dump(load(dump)) is byte-identical */
    /* Bit-identical floats, including the smallest subnormal. */
    ck_assert_mem_eq(&back->ranks[1].events[4].flops, &sch->ranks[1].events[4].flops, sizeof(double));

    /* One ulp of difference is a difference; so is one list entry. */
    back->ranks[1].events[3].flops = nextafter(back->ranks[1].events[3].flops, 2e300);
    ck_assert(!gs_schedule_equal(sch, back));
    ck_assert_int_eq(gs_schedule_diff(sch, back, why, sizeof why), 1);
    ASSERT_HAS(why, "rank 1: event 3");
    ASSERT_HAS(why, "FLOPs");
    back->ranks[1].events[3].flops = sch->ranks[1].events[3].flops;
    ck_assert(gs_schedule_equal(sch, back));
    back->ranks[0].pool[back->ranks[0].events[5].links]++;
    gs_schedule_diff(sch, back, why, sizeof why);
    ASSERT_HAS(why, "rank 0: event 5");
    ASSERT_HAS(why, "deps");

    free(text);
    free(again);
    gs_schedule_destroy(back);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_dump_json)
{
    gs_schedule *sch = small_schedule();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_schedule_dump_json(sch, f, &err), GS_OK);
    fclose(f);
    json_error_t jerr;
    json_t *doc = json_loads(buf, 0, &jerr);
    ck_assert_msg(doc != NULL, "invalid JSON at line %d: %s\n%s", jerr.line, jerr.text, buf);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "scenario")), "hand");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "mesh"), "dp")), 2);
    json_t *ranks = json_object_get(doc, "ranks");
    ck_assert_uint_eq(json_array_size(ranks), 1);
    json_t *r0 = json_array_get(ranks, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(r0, "class")), 2);
    ck_assert_uint_eq(json_array_size(json_object_get(r0, "tensors")), 2);
    json_t *evs = json_object_get(r0, "events");
    ck_assert_uint_eq(json_array_size(evs), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(evs, 0), "name")), "L0.mb0.fwd.ag");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(evs, 1), "name")), "L0.mb0.fwd.qkv");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(evs, 2), "name")), "optim");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(evs, 0), "op")), "all_gather");
    ck_assert(json_real_value(json_object_get(json_array_get(evs, 1), "flops")) == 0.1);
    json_t *deps = json_object_get(json_array_get(evs, 2), "deps");
    ck_assert_uint_eq(json_array_size(deps), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(deps, 1)), 1);
    json_decref(doc);
    free(buf);

    /* Quotes and control characters in the scenario name are escaped. */
    strcpy(sch->scenario, "a\"b\\c\td");
    buf = NULL;
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(gs_schedule_dump_json(sch, f, &err), GS_OK);
    fclose(f);
    doc = json_loads(buf, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "scenario")), "a\"b\\c\td");
    json_decref(doc);
    free(buf);
    gs_schedule_destroy(sch);
}
END_TEST

/* Replaces the first occurrence of from (after line `line`, 1-based) by to. */
static char *corrupt(const char *text, int line, const char *from, const char *to)
{
    const char *p = text;
    for (int l = 1; l < line; l++) {
        p = strchr(p, '\n');
        ck_assert_ptr_nonnull(p);
        p++;
    }
    const char *at = strstr(p, from);
    ck_assert_ptr_nonnull(at);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    size_t head = (size_t)(at - text);
    memcpy(out, text, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

START_TEST(test_load_errors)
{
    static const struct {
        int line;
        const char *from, *to;
        const char *expect;
    } cases[] = {
        {1, "schedule 2", "schedule 3", "x.sched:1: found '3', expected format version 2"},
        {1, "schedule 2", "schedule 1", "x.sched:1: found '1', expected format version 2 (version 1 dumps carry no "
                                        "event roles"},
        {10, "role unit_gather", "role unit_gathers", "x.sched:10: found 'unit_gathers', expected a role"},
        {10, "role unit_gather", "rol unit_gather", "x.sched:10: found 'rol', expected 'role'"},
        {11, "part 0", "part 65536", "x.sched:11: found '65536', expected part (an integer from 0 to 65535)"},
        {3, "order tp-dp-pp", "order tp-tp-pp", "x.sched:3: found 'tp-tp-pp', expected a rank order"},
        {7, "stage 0", "stage 1", "x.sched:7: found '1', expected stage (an integer from 0 to 0)"},
        {8, "param_shard", "param_shart", "x.sched:8: found 'param_shart', expected a tensor kind"},
        {9, "resident 0", "resident 2", "x.sched:9: found '2', expected resident (0 or 1)"},
        {10, "collective", "colective", "x.sched:10: found 'colective', expected an event kind"},
        {10, "group dp", "group dq", "x.sched:10: found 'dq', expected a group kind"},
        {11, "bytes 123", "bytes 12x", "x.sched:11: found '12x', expected bytes"},
        {11, "bytes 123", "bytes 123 extra", "x.sched:11: found 'extra', expected 'flops'"},
        {11, "flops 0.10000000000000001", "flops nan", "x.sched:11: found 'nan', expected a FLOP count"},
        {11, "reads 1", "reads 2", "x.sched:11: found '2', expected tensor indices below 2"},
        {11, "deps 0", "deps 3", "x.sched:11: found '3', expected event indices below 3"},
        {11, "deps 0", "deps 0,", "x.sched:11: found '0,', expected the event list"},
        {12, "frees 1", "frees 1 x", "x.sched:12: found 'x', expected end of line"},
        {12, "layer none", "layer -4", "x.sched:12: found '-4', expected a layer"},
        {13, "end\n", "end\nmore\n", "x.sched:14: found 'more', expected end of file after 'end'"},
        {13, "end\n", "", "x.sched:13: found end of file, expected 'end'"},
        {12, "e 2 compute", "e 3 compute", "x.sched:12: found '3', expected event index 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = corrupt(small_text, cases[i].line, cases[i].from, cases[i].to);
        gs_schedule *sch = (gs_schedule *)1;
        gs_error err;
        gs_error_init(&err);
        gs_status st = load_text(bad, &sch, &err);
        ck_assert_msg(st == GS_ERR_INPUT, "case %zu: status %d", i, st);
        ck_assert_ptr_null(sch);
        ck_assert_msg(strstr(err.msg, cases[i].expect) != NULL, "case %zu: '%s' not in '%s'", i, cases[i].expect,
                      err.msg);
        free(bad);
    }
    /* Truncated in the middle of the event lines (the file says 3 events). */
    const char *cut = strstr(small_text, "\ne 2 ");
    char *trunc = strndup(small_text, (size_t)(cut - small_text) + 1);
    gs_schedule *sch = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(load_text(trunc, &sch, &err), GS_ERR_INPUT);
    ASSERT_HAS(err.msg, "x.sched:12: found end of file, expected an event line");
    free(trunc);
    ck_assert_int_eq(load_text("", &sch, &err), GS_ERR_INPUT);
    ASSERT_HAS(err.msg, "x.sched:1: found end of file, expected 'gridstep-schedule 2'");
}
END_TEST

/* ------------------------------------------------------------------------ validate ---- */

/* Mesh tp 2 dp 2 pp 1 (tp-dp-pp): rank = tp + 2 dp. TP groups {0,1} (#0) and {2,3} (#1);
 * DP groups {0,2} (#0) and {1,3} (#1). Each rank: all-gather of layer 0 over DP (2 x 1000 B),
 * qkv reading it, TP all-reduce (2048 B), mlp_up, TP all-reduce; then frees the gathered
 * unit. */
static gs_schedule *good_tp_dp(void)
{
    gs_mesh m = make_mesh(2, 2, 1, 8);
    uint64_t ranks[] = {0, 1, 2, 3};
    gs_schedule *sch = make_schedule(&m, 4, ranks);
    for (uint64_t p = 0; p < 4; p++) {
        gs_rank_events *r = &sch->ranks[p];
        uint64_t tpg = p / 2, dpg = p % 2;
        add_tensor(r, GS_T_PARAM_SHARD, 1000, 1, 0); /* 0 */
        add_tensor(r, GS_T_PARAM_FULL, 2000, 0, 0);  /* 1 */
        add_tensor(r, GS_T_ACTIVATION, 4096, 0, 0);  /* 2 */
        add(r, ev_coll(GS_COLL_ALLGATHER, GS_GROUP_DP, dpg, 2, 2000, 0, 0, GS_PHASE_FWD), "r0 w1 a1");
        add(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), "d0 r1 w2 a2");
        add(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, tpg, 2, 2048, 0, 0, GS_PHASE_FWD), "d1 r2 w2");
        add(r, ev_compute(GS_PHASE_FWD, GS_OP_MLP_UP, 0, 0), "d2 r1,2 w2");
        add(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, tpg, 2, 2048, 0, 0, GS_PHASE_FWD), "d3 r2 w2 f1");
    }
    return sch;
}

static void expect_invalid(const gs_schedule *sch, const char *const *needles)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_schedule_validate_structure(sch, &err), GS_ERR_RUNTIME);
    for (; *needles; needles++)
        ASSERT_HAS(err.msg, *needles);
}

static void expect_valid(const gs_schedule *sch)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_schedule_validate_structure(sch, &err) == GS_OK, "unexpected: %s", err.msg);
}

START_TEST(test_validate_good)
{
    gs_schedule *sch = good_tp_dp();
    expect_valid(sch);
    /* The class path: rank 0 alone is fine too (its peers are absent). */
    gs_schedule *one = NULL;
    ck_assert_int_eq(gs_schedule_create(1, &one), GS_OK);
    one->mesh = sch->mesh;
    one->ranks[0] = sch->ranks[0];
    one->ranks[0].class_size = 4;
    memset(&sch->ranks[0], 0, sizeof sch->ranks[0]);
    expect_valid(one);
    gs_schedule_destroy(one);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_validate_collective_missing)
{
    gs_schedule *sch = good_tp_dp();
    /* Rank 2 loses its DP all-gather: rebuild its list without event 0. */
    gs_rank_events *r = &sch->ranks[2];
    r->nevents = 0;
    r->npool = 0;
    r->ndups = 0;
    free(r->name_hash);
    r->name_hash = NULL;
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), "r0 w2 a2");
    add(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 1, 2, 2048, 0, 0, GS_PHASE_FWD), "d0 r2 w2");
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_MLP_UP, 0, 0), "d1 r0,2 w2");
    add(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, 1, 2, 2048, 0, 0, GS_PHASE_FWD), "d2 r2 w2");
    const char *want[] = {"dp group 0", "rank 2 is missing a collective that rank 0 issues as L0.mb0.fwd.ag", NULL};
    expect_invalid(sch, want);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_validate_collective_size)
{
    gs_schedule *sch = good_tp_dp();
    sch->ranks[3].events[4].bytes = 4096; /* rank 3's second TP all-reduce */
    const char *want[] = {"collective mismatch on tp group 1", "rank 2 event L0.mb0.fwd.tp_ar#2 is all_reduce 2048 B",
                          "rank 3 has L0.mb0.fwd.tp_ar#2: all_reduce 4096 B", NULL};
    expect_invalid(sch, want);
    sch->ranks[3].events[4].bytes = 2048;
    expect_valid(sch);
    sch->ranks[1].events[0].op = GS_COLL_REDUCE_SCATTER; /* rank 1's all-gather becomes a reduce-scatter */
    const char *want2[] = {"dp group 1", "rank 1 event L0.mb0.fwd.rs is reduce_scatter",
                           "rank 3 has L0.mb0.fwd.ag: all_gather 2000 B", NULL};
    expect_invalid(sch, want2);
    sch->ranks[1].events[0].op = GS_COLL_ALLGATHER;
    sch->ranks[1].events[0].group_size = 4; /* the DP group has 2 ranks */
    const char *want3[] = {"rank 1: event L0.mb0.fwd.ag says its dp group has 4 ranks, but it has 2", NULL};
    expect_invalid(sch, want3);
    sch->ranks[1].events[0].group_size = 2;
    sch->ranks[1].events[0].peer = 0; /* rank 1 is in DP group 1 */
    const char *want4[] = {"rank 1: event L0.mb0.fwd.ag runs on dp group 0, but rank 1 belongs to dp group 1", NULL};
    expect_invalid(sch, want4);
    gs_schedule_destroy(sch);
}
END_TEST

/* Mesh tp 1 dp 2 pp 2 (tp-dp-pp): rank = dp + 2 pp; stage 0 = {0, 1}, stage 1 = {2, 3}. */
static gs_schedule *pipe_pair(uint64_t send_bytes, uint64_t recv_bytes, int with_recv)
{
    gs_mesh m = make_mesh(1, 2, 2, 8);
    uint64_t ranks[] = {0, 2};
    gs_schedule *sch = make_schedule(&m, 2, ranks);
    gs_rank_events *a = &sch->ranks[0], *b = &sch->ranks[1];
    add_tensor(a, GS_T_BOUNDARY, send_bytes, 0, 0);
    add(a, ev_compute(GS_PHASE_FWD, GS_OP_MLP_DOWN, 0, 0), "w0 a0");
    add(a, ev_p2p(GS_EV_SEND, 2, send_bytes, 0, GS_PHASE_FWD), "d0 r0 f0");
    add(a, ev_compute(GS_PHASE_FWD, GS_OP_MLP_DOWN, 0, 1), "");
    add(a, ev_p2p(GS_EV_SEND, 2, send_bytes, 1, GS_PHASE_FWD), "d2");
    add_tensor(b, GS_T_BOUNDARY, recv_bytes, 0, 0);
    add(b, ev_p2p(GS_EV_RECV, 0, recv_bytes, 0, GS_PHASE_FWD), "w0 a0");
    add(b, ev_compute(GS_PHASE_FWD, GS_OP_NORM, 1, 0), "d0 r0 f0");
    if (with_recv)
        add(b, ev_p2p(GS_EV_RECV, 0, send_bytes, 1, GS_PHASE_FWD), "");
    return sch;
}

START_TEST(test_validate_p2p)
{
    gs_schedule *sch = pipe_pair(1 << 20, 1 << 20, 1);
    expect_valid(sch);
    gs_schedule_destroy(sch);

    sch = pipe_pair(1 << 20, 1 << 20, 0); /* the second send has no recv */
    const char *want[] = {"rank 0: send mb1.fwd.send to rank 2 has no matching recv", NULL};
    expect_invalid(sch, want);
    /* With rank 2 absent (class path), nothing can be said about it. */
    sch->nranks = 1;
    expect_valid(sch);
    sch->nranks = 2;
    gs_schedule_destroy(sch);

    sch = pipe_pair(1 << 20, 1 << 19, 1);
    const char *want2[] = {"rank 0: send mb0.fwd.send to rank 2 carries 1048576 B",
                           "recv mb0.fwd.recv on rank 2 expects 524288 B", NULL};
    expect_invalid(sch, want2);
    gs_schedule_destroy(sch);

    sch = pipe_pair(1 << 20, 1 << 20, 1); /* one recv too many */
    add(&sch->ranks[1], ev_p2p(GS_EV_RECV, 0, 8, 2, GS_PHASE_FWD), "");
    const char *want3[] = {"rank 2: recv mb2.fwd.recv from rank 0 has no matching send", NULL};
    expect_invalid(sch, want3);
    sch->ranks[1].events[3].peer = 2; /* to itself */
    const char *want4[] = {"rank 2: event mb2.fwd.recv has peer rank 2", NULL};
    expect_invalid(sch, want4);
    gs_schedule_destroy(sch);
}
END_TEST

/* Roles (engine/roles.c): an event whose kind, stream, phase, op, group, layer or part its role
 * does not allow is refused, naming the role and what contradicts it. */
START_TEST(test_validate_roles)
{
    gs_schedule *sch = good_tp_dp();
    expect_valid(sch);
    gs_event *ag = &sch->ranks[0].events[0], *qkv = &sch->ranks[0].events[1], *ar = &sch->ranks[0].events[2];
    ck_assert_uint_eq(ag->role, GS_ROLE_UNIT_GATHER);
    ck_assert_uint_eq(qkv->role, GS_ROLE_QKV);
    qkv->role = GS_ROLE_ATTN_NORM; /* a norm's role on a QKV GEMM */
    const char *want[] = {"rank 0: event L0.mb0.fwd.qkv has role attn_norm, which its op contradicts", NULL};
    expect_invalid(sch, want);
    qkv->role = GS_ROLE_NONE;
    const char *want2[] = {"rank 0: event L0.mb0.fwd.qkv has no role", NULL};
    expect_invalid(sch, want2);
    qkv->role = GS_ROLE_TP_ATTN_IN; /* a collective's role on a compute event */
    const char *want3[] = {"L0.mb0.fwd.qkv has role tp_attn_in, which its event kind contradicts", NULL};
    expect_invalid(sch, want3);
    qkv->role = GS_ROLE_QKV;
    qkv->part = 3; /* a GEMM splits in two parts at most */
    const char *want4[] = {"L0.mb0.fwd.qkv has role qkv with part 3 (at most 2)", NULL};
    expect_invalid(sch, want4);
    qkv->part = 2;
    expect_valid(sch);
    qkv->layer = GS_LAYER_HEAD; /* a block op at the head */
    const char *want5[] = {"head.mb0.fwd.qkv has role qkv, which sits at a layer", NULL};
    expect_invalid(sch, want5);
    qkv->layer = 0;
    ag->role = GS_ROLE_PARAM_GATHER; /* ZeRO's gather of updated slices runs after the backward only */
    const char *want6[] = {"L0.mb0.fwd.ag has role param_gather, which its phase contradicts", NULL};
    expect_invalid(sch, want6);
    ag->role = GS_ROLE_UNIT_GATHER;
    ar->role = GS_ROLE_TP_ATTN_IN; /* the forward gathers at the attention's input, never all-reduces */
    const char *want7[] = {"L0.mb0.fwd.tp_ar has role tp_attn_in, which its op contradicts", NULL};
    expect_invalid(sch, want7);
    ar->role = GS_ROLE_GRAD_BUCKET_REDUCE; /* a DP role on the TP group (and stream) */
    const char *want8[] = {"L0.mb0.fwd.tp_ar has role grad_bucket_reduce, which its stream contradicts", NULL};
    expect_invalid(sch, want8);
    ar->role = GS_ROLE_TP_ATTN_OUT;
    expect_valid(sch);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_validate_cycle)
{
    gs_mesh m = make_mesh(1, 1, 1, 8);
    uint64_t ranks[] = {0};
    gs_schedule *sch = make_schedule(&m, 1, ranks);
    gs_rank_events *r = &sch->ranks[0];
    /* Forward deps without a cycle are accepted: 0 waits for 2, 2 for 1. */
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_NORM, 0, 0), "d2");
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), "");
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_ATTN, 0, 0), "d1");
    expect_valid(sch);
    /* 3 -> 4 -> 5 -> 3 (each waits for the next). */
    add(r, ev_compute(GS_PHASE_BWD, GS_OP_NORM, 0, 0), "d4");
    add(r, ev_compute(GS_PHASE_BWD, GS_OP_QKV, 0, 0), "d0,5");
    add(r, ev_compute(GS_PHASE_BWD, GS_OP_ATTN, 0, 0), "d3");
    const char *want[] = {"rank 0: cycle through event L0.mb0.bwd.norm -> L0.mb0.bwd.qkv -> L0.mb0.bwd.attn -> L0.mb0.bwd.norm",
                          NULL};
    expect_invalid(sch, want);
    /* A self-dependency is a cycle of one. */
    gs_schedule_destroy(sch);
    sch = make_schedule(&m, 1, ranks);
    add(&sch->ranks[0], ev_compute(GS_PHASE_FWD, GS_OP_LOSS, GS_LAYER_HEAD, 0), "d0");
    const char *want2[] = {"rank 0: cycle through event head.mb0.fwd.loss -> head.mb0.fwd.loss", NULL};
    expect_invalid(sch, want2);
    /* Out of range. */
    sch->ranks[0].pool[0] = 9;
    const char *want3[] = {"rank 0: event head.mb0.fwd.loss depends on event #9, but the rank has 1 events", NULL};
    expect_invalid(sch, want3);
    gs_schedule_destroy(sch);

    /* A cycle loads from a dump (the loader allows any dep) and validation catches it. */
    char *bad = corrupt(small_text, 11, "deps 0", "deps 2");
    gs_schedule *ld = NULL;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(load_text(bad, &ld, &err) == GS_OK, "%s", err.msg);
    const char *want4[] = {"rank 0: cycle through event L0.mb0.fwd.qkv -> optim -> L0.mb0.fwd.qkv", NULL};
    expect_invalid(ld, want4);
    gs_schedule_destroy(ld);
    free(bad);
}
END_TEST

START_TEST(test_validate_lifetimes)
{
    gs_mesh m = make_mesh(1, 1, 1, 8);
    uint64_t ranks[] = {0};
    struct {
        const char *l0, *l1, *l2;
        const char *want;
    } cases[] = {
        /* t0 resident, t1 transient */
        {"a1 w1", "r1 f1", "r1", "rank 0: event L0.mb0.fwd.attn reads tensor 1 (activation, layer 0, mb 0, unit 0, 64 B) "
                                 "after event L0.mb0.fwd.qkv freed it"},
        {"a1 w1", "r1 f1", "f1", "rank 0: event L0.mb0.fwd.attn frees tensor 1 (activation, layer 0, mb 0, unit 0, 64 B), "
                                 "already freed by event L0.mb0.fwd.qkv (double free)"},
        {"w1", "", "", "rank 0: event L0.mb0.fwd.norm writes tensor 1 (activation, layer 0, mb 0, unit 0, 64 B) before it is allocated"},
        {"a1", "a1", "", "rank 0: event L0.mb0.fwd.qkv allocates tensor 1 (activation, layer 0, mb 0, unit 0, 64 B), which is already live"},
        {"a0", "", "", "rank 0: event L0.mb0.fwd.norm allocates tensor 0 (master, layer 0, mb 0, unit 0, 32 B), which is already live"},
        {"", "f1", "", "rank 0: event L0.mb0.fwd.qkv frees tensor 1 (activation, layer 0, mb 0, unit 0, 64 B), which was never allocated"},
        {"r5", "", "", "rank 0: event L0.mb0.fwd.norm reads tensor 5, but the rank has 2 tensors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_schedule *sch = make_schedule(&m, 1, ranks);
        gs_rank_events *r = &sch->ranks[0];
        add_tensor(r, GS_T_MASTER, 32, 1, 0);
        add_tensor(r, GS_T_ACTIVATION, 64, 0, 0);
        add(r, ev_compute(GS_PHASE_FWD, GS_OP_NORM, 0, 0), cases[i].l0);
        add(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), cases[i].l1);
        add(r, ev_compute(GS_PHASE_FWD, GS_OP_ATTN, 0, 0), cases[i].l2);
        const char *want[] = {cases[i].want, NULL};
        expect_invalid(sch, want);
        gs_schedule_destroy(sch);
    }
    /* Re-allocating after a free is fine (a unit re-gathered in backward). */
    gs_schedule *sch = make_schedule(&m, 1, ranks);
    gs_rank_events *r = &sch->ranks[0];
    add_tensor(r, GS_T_PARAM_FULL, 64, 0, 0);
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_NORM, 0, 0), "a0 w0");
    add(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, 0), "r0 f0");
    add(r, ev_compute(GS_PHASE_BWD, GS_OP_QKV, 0, 0), "a0 w0 r0 f0");
    expect_valid(sch);
    gs_schedule_destroy(sch);
}
END_TEST

START_TEST(test_validate_ranks)
{
    gs_schedule *sch = good_tp_dp();
    sch->ranks[3].rank = 1; /* twice */
    sch->ranks[3].stage = 0;
    const char *want[] = {"rank 1 appears twice in the schedule (lists 1 and 3)", NULL};
    expect_invalid(sch, want);
    sch->ranks[3].rank = 9;
    const char *want2[] = {"rank list 3 is for rank 9, but the mesh has 4 ranks", NULL};
    expect_invalid(sch, want2);
    sch->ranks[3].rank = 3;
    sch->ranks[3].stage = 1;
    const char *want3[] = {"rank 3: stage 1", "the mesh puts it on stage 0", NULL};
    expect_invalid(sch, want3);
    gs_schedule_destroy(sch);
}
END_TEST

/* HSDP sub-groups, derived by hand from the rank layout (tp-dp-pp, node = rank / gpn). */
START_TEST(test_hsdp_groups)
{
    uint64_t mem[8], size;
    /* tp 1 dp 8, 4 GPUs per node: DP group {0..7}; nodes {0-3}, {4-7}. */
    gs_mesh m = make_mesh(1, 8, 1, 4);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP_INTRA, 5, &size), 4); /* 0 * 8 + first member index 4 */
    ck_assert_uint_eq(size, 4);
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_DP_INTRA, 5, mem), 4);
    ck_assert_uint_eq(mem[0], 4);
    ck_assert_uint_eq(mem[3], 7);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP_INTER, 5, &size), 1); /* position 1 in its node part */
    ck_assert_uint_eq(size, 2);
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_DP_INTER, 5, mem), 2);
    ck_assert_uint_eq(mem[0], 1);
    ck_assert_uint_eq(mem[1], 5);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP, 5, &size), 0);
    ck_assert_uint_eq(size, 8);

    /* tp 2 dp 4, 4 GPUs per node: DP group #1 = {1, 3, 5, 7}; parts {1,3} on node 0, {5,7} on node 1. */
    m = make_mesh(2, 4, 1, 4);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP_INTRA, 3, &size), 4); /* 1 * 4 + 0 */
    ck_assert_uint_eq(size, 2);
    gs_group_members_of(&m, GS_GROUP_DP_INTRA, 3, mem);
    ck_assert_uint_eq(mem[0], 1);
    ck_assert_uint_eq(mem[1], 3);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP_INTER, 3, &size), 5); /* 1 * 4 + position 1 */
    ck_assert_uint_eq(size, 2);
    gs_group_members_of(&m, GS_GROUP_DP_INTER, 3, mem);
    ck_assert_uint_eq(mem[0], 3);
    ck_assert_uint_eq(mem[1], 7);

    /* tp 3 dp 4, 4 GPUs per node: DP group #0 = {0, 3, 6, 9} on nodes 0, 0, 1, 2: uneven
     * parts {0,3}, {6}, {9}. Inter of position 0 = {0, 6, 9}; of position 1 = {3}. */
    m = make_mesh(3, 4, 1, 4);
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_DP_INTER, 0, mem), 3);
    ck_assert_uint_eq(mem[0], 0);
    ck_assert_uint_eq(mem[1], 6);
    ck_assert_uint_eq(mem[2], 9);
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_DP_INTER, 3, mem), 1);
    ck_assert_uint_eq(mem[0], 3);
    ck_assert_uint_eq(gs_group_members_of(&m, GS_GROUP_DP_INTRA, 6, mem), 1);
    ck_assert_uint_eq(mem[0], 6);
    ck_assert_uint_eq(gs_group_of(&m, GS_GROUP_DP_INTRA, 6, &size), 2); /* 0 * 4 + member index 2 */
    ck_assert_uint_eq(size, 1);

    /* Validation on HSDP groups: tp 1 dp 4, 2 GPUs per node: intra {0,1} {2,3}, inter {0,2} {1,3}. */
    m = make_mesh(1, 4, 1, 2);
    uint64_t ranks[] = {0, 1, 2, 3};
    gs_schedule *sch = make_schedule(&m, 4, ranks);
    for (uint64_t p = 0; p < 4; p++) {
        gs_rank_events *r = &sch->ranks[p];
        uint64_t intra = gs_group_of(&m, GS_GROUP_DP_INTRA, p, NULL), inter = gs_group_of(&m, GS_GROUP_DP_INTER, p, NULL);
        ck_assert_uint_eq(intra, p < 2 ? 0 : 2);
        ck_assert_uint_eq(inter, p % 2);
        add(r, ev_coll(GS_COLL_REDUCE_SCATTER, GS_GROUP_DP_INTRA, intra, 2, 1000, 0, 0, GS_PHASE_BWD), "");
        add(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_DP_INTER, inter, 2, p == 3 ? 600 : 500, 0, 0, GS_PHASE_BWD), "d0");
    }
    const char *want[] = {"collective mismatch on dp_inter group 1: rank 1 event L0.mb0.bwd.inter_ar is all_reduce 500 B",
                          "rank 3 has L0.mb0.bwd.inter_ar: all_reduce 600 B", NULL};
    expect_invalid(sch, want);
    sch->ranks[3].events[1].bytes = 500;
    expect_valid(sch);
    gs_schedule_destroy(sch);
}
END_TEST

/* 4 ranks x 250,000 events (the per-layer pattern of good_tp_dp repeated, with sends between
 * two pipeline stages): validation is linear-ish and accepts it; timing is left to the
 * benchmarks. */
/* Appends without Check assertions (each passing ck_assert writes a checkpoint, which would
 * dominate a million-event test); returns the first failure. */
static gs_status add_quiet(gs_rank_events *r, gs_event e, int ndeps, uint32_t dep, uint32_t t, int use)
{
    /* use: bit 0 alloc t, 1 read t, 2 write t, 3 free t */
    const uint32_t *lists[GS_LINK_LISTS] = {&dep, &t, &t, &t, &t};
    memset(e.nlinks, 0, sizeof e.nlinks);
    e.nlinks[GS_LINK_DEPS] = (uint16_t)ndeps;
    e.nlinks[GS_LINK_ALLOCS] = use & 1;
    e.nlinks[GS_LINK_READS] = (use >> 1) & 1;
    e.nlinks[GS_LINK_WRITES] = (use >> 2) & 1;
    e.nlinks[GS_LINK_FREES] = (use >> 3) & 1;
    return gs_rank_add_event(r, &e, lists, NULL);
}

START_TEST(test_validate_large)
{
    gs_mesh m = make_mesh(2, 1, 2, 8); /* rank = tp + 2 pp: TP groups {0,1}, {2,3}; PP {0,2}, {1,3} */
    uint64_t ranks[] = {0, 1, 2, 3};
    gs_schedule *sch = make_schedule(&m, 4, ranks);
    const uint32_t reps = 50000;
    for (uint64_t p = 0; p < 4; p++) {
        gs_rank_events *r = &sch->ranks[p];
        uint64_t stage = p / 2, peer = p ^ 2;
        gs_status st = GS_OK;
        gs_tensor act = {.bytes = 4096, .kind = GS_T_ACTIVATION};
        for (uint32_t i = 0; i < reps && st == GS_OK; i++) {
            uint32_t t = 0;
            st |= gs_rank_add_tensor(r, &act, &t);
            uint32_t base = (uint32_t)r->nevents;
            if (stage == 1)
                st |= add_quiet(r, ev_p2p(GS_EV_RECV, peer, 4096, i, GS_PHASE_FWD), 0, 0, t, 1 | 4);
            else
                st |= add_quiet(r, ev_compute(GS_PHASE_FWD, GS_OP_EMBED, GS_LAYER_EMBED, i), 0, 0, t, 1 | 4);
            st |= add_quiet(r, ev_compute(GS_PHASE_FWD, GS_OP_QKV, 0, i), 1, base, t, 2 | 4);
            st |= add_quiet(r, ev_coll(GS_COLL_ALLREDUCE, GS_GROUP_TP, stage, 2, 2048, 0, i, GS_PHASE_FWD), 1,
                            base + 1, t, 2 | 4);
            st |= add_quiet(r, ev_compute(GS_PHASE_FWD, GS_OP_MLP_UP, 0, i), 1, base + 2, t, 2);
            if (stage == 0)
                st |= add_quiet(r, ev_p2p(GS_EV_SEND, peer, 4096, i, GS_PHASE_FWD), 1, base + 3, t, 2 | 8);
            else
                st |= add_quiet(r, ev_compute(GS_PHASE_FWD, GS_OP_LOSS, GS_LAYER_HEAD, i), 1, base + 3, t, 2 | 8);
        }
        ck_assert_int_eq(st, GS_OK);
        gs_rank_finish(r);
        ck_assert_uint_eq(r->nevents, 5 * reps);
        ck_assert_uint_eq(gs_rank_peak_bytes(r), 4096); /* one activation live at a time */
    }
    expect_valid(sch);
    sch->ranks[3].events[5 * reps - 3].bytes = 1; /* the last TP all-reduce of rank 3 */
    const char *want[] = {"tp group 1", "L0.mb49999.fwd.tp_ar", "collective #50000", NULL};
    expect_invalid(sch, want);
    gs_schedule_destroy(sch);
}
END_TEST

static Suite *schedule_suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("storage");
    tcase_add_test(tc, test_add_and_list);
    tcase_add_test(tc, test_sent_bytes);
    tcase_add_test(tc, test_peak_walk);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_names_unique);
    suite_add_tcase(s, tc);

    tc = tcase_create("dump");
    tcase_add_test(tc, test_dump_text);
    tcase_add_test(tc, test_dump_roundtrip);
    tcase_add_test(tc, test_dump_json);
    tcase_add_test(tc, test_load_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("validate");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_validate_good);
    tcase_add_test(tc, test_validate_collective_missing);
    tcase_add_test(tc, test_validate_collective_size);
    tcase_add_test(tc, test_validate_p2p);
    tcase_add_test(tc, test_validate_cycle);
    tcase_add_test(tc, test_validate_roles);
    tcase_add_test(tc, test_validate_lifetimes);
    tcase_add_test(tc, test_validate_ranks);
    tcase_add_test(tc, test_hsdp_groups);
    tcase_add_test(tc, test_validate_large);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(schedule_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
