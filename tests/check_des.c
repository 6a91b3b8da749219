/* Check suite for the DES's templates (sim/des.c, sim/des_index.c): every rank of a stage
 * playing its representative's shared list (gs_schedule_build_shared, peers derived per rank)
 * gives the timings, bit for bit, of the copies gs_schedule_build makes (each list its own
 * template, peers read from its events), in analytic and flow mode; and where
 * gs_sim_exact_is_class holds, --exact's class-path report equals every rank's played. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/report.h"
#include "sim/sim.h"

typedef struct played {
    gs_schedule *sch;
    gs_timing **timing;
} played;

static void load(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err) == GS_OK, "load: %s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, &w, &err) == GS_OK, "mesh: %s", err.msg);
    gs_diag_fini(&w);
}

/* Builds the exact schedule (shared lists or copies) and plays it on the sim backend. */
static played play(const gs_scenario *s, const gs_mesh *m, int shared, int flow)
{
    played p = {NULL, NULL};
    gs_error err;
    gs_error_init(&err);
    gs_status rc = shared ? gs_schedule_build_shared(s, m, 0, &p.sch, &err) : gs_schedule_build(s, m, 1, &p.sch, &err);
    ck_assert_msg(rc == GS_OK, "build: %s", err.msg);
    p.timing = calloc(p.sch->nranks, sizeof *p.timing);
    ck_assert_ptr_nonnull(p.timing);
    for (size_t i = 0; i < p.sch->nranks; i++)
        ck_assert_ptr_nonnull(p.timing[i] = calloc(p.sch->ranks[i].nevents + 1, sizeof *p.timing[i]));
    gs_backend_opts bo = {flow, NULL, NULL, NULL};
    void *state = NULL;
    ck_assert_msg(gs_sim_backend.open(s, m, &bo, &state, &err) == GS_OK, "open: %s", err.msg);
    ck_assert_msg(gs_sim_backend.run(state, p.sch, p.timing, &err) == GS_OK, "run: %s", err.msg);
    gs_sim_backend.close(state);
    return p;
}

static void played_free(played *p)
{
    for (size_t i = 0; i < p->sch->nranks; i++)
        free(p->timing[i]);
    free(p->timing);
    gs_schedule_destroy(p->sch);
}

/* Shared and copied lists give the same posted, start and end of every event, and the step
 * is positive (something ran). */
static void shared_equals_copied(const char *yaml)
{
    gs_scenario s;
    gs_mesh m;
    load(yaml, &s, &m);
    for (int flow = 0; flow <= 1; flow++) {
        played a = play(&s, &m, 1, flow), b = play(&s, &m, 0, flow);
        ck_assert_uint_eq(a.sch->nranks, b.sch->nranks);
        double step = 0;
        size_t shared = 0;
        for (size_t i = 0; i < a.sch->nranks; i++) {
            shared += a.sch->ranks[i].shared != NULL;
            ck_assert_uint_eq(a.sch->ranks[i].nevents, b.sch->ranks[i].nevents);
            ck_assert_msg(memcmp(a.timing[i], b.timing[i], a.sch->ranks[i].nevents * sizeof *a.timing[i]) == 0,
                          "rank list %zu (flow %d): timings differ\n%s", i, flow, yaml);
            for (size_t k = 0; k < a.sch->ranks[i].nevents; k++)
                step = a.timing[i][k].end_s > step ? a.timing[i][k].end_s : step;
        }
        ck_assert_uint_eq(shared, m.world - m.size[GS_DIM_PP]); /* all but the representatives */
        ck_assert(step > 0);
        played_free(&a);
        played_free(&b);
    }
}

#define SMALL "model: {layers: 6, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64}\n"

START_TEST(test_shared_pipeline)
{
    /* 3 stages, tied embeddings (first and last stage exchange gradients), 1F1B */
    shared_equals_copied("model: {layers: 6, hidden: 256, heads: 4, ffn: 512, vocab: 1000, seq: 64, "
                         "tied_embeddings: true}\ncluster: {preset: dgx-a100-80g, nodes: 3, gpus_per_node: 4}\n"
                         "grid: {dp: 2, pp: 3, tp: 2}\nstrategy: {sharding: full_shard}\nbatch: {global: 12}\n");
    /* pp 2 interleaved (next and previous stage are one rank), ZeRO-1 with bucket rule */
    shared_equals_copied(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                               "grid: {dp: 2, pp: 2, tp: 2}\nstrategy: {sharding: zero1, pipeline: interleaved, "
                               "virtual_stages: 3, overlap_param_gather: true}\nbatch: {global: 8}\n");
}
END_TEST

START_TEST(test_shared_data_parallel)
{
    /* HSDP over 2 nodes of 4 (intra and inter groups), GPipe, offload */
    shared_equals_copied(SMALL "cluster: {preset: dgx-a100-80g, nodes: 4, gpus_per_node: 4}\n"
                               "grid: {dp: 8, pp: 2, tp: 1}\nstrategy: {sharding: hybrid_shard, pipeline: gpipe, "
                               "offload: true}\nbatch: {global: 16}\n");
    /* a straggler on one rank of a shared stage: its factor is per rank, not per template */
    shared_equals_copied(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2, gpus_per_node: 4}\n"
                               "grid: {dp: 4, pp: 2, tp: 1}\nstrategy: {sharding: shard_grad_op}\n"
                               "batch: {global: 8}\nstragglers: [{rank: 5, slowdown: 1.3}]\n");
}
END_TEST

/* --stats: the events and collectives counted from the copied schedule, and the state within
 * the 32 B per event and rank the exact path is sized for (timings 24 B included), at 64 ranks
 * in 2 stages (32 ranks share each stage's list). */
START_TEST(test_stats)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    load(SMALL "cluster: {preset: dgx-a100-80g, nodes: 8}\ngrid: {dp: 8, pp: 2, tp: 4}\n"
               "strategy: {sharding: full_shard, recompute: full}\nbatch: {global: 32}\n", &s, &m);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(&s, &m, 1, &sch, &err) == GS_OK, "%s", err.msg);
    uint64_t events = 0, colls = 0;
    for (size_t i = 0; i < sch->nranks; i++)
        for (size_t k = 0; k < sch->ranks[i].nevents; k++) {
            events++;
            colls += sch->ranks[i].events[k].kind == GS_EV_COLLECTIVE;
        }
    gs_schedule_destroy(sch);
    for (int flow = 0; flow <= 1; flow++) {
        gs_backend_stats st;
        gs_backend_opts bo = {flow, NULL, &st, NULL};
        gs_report rep;
        ck_assert_msg(gs_sim_scenario(&s, &m, 1, &bo, &rep, NULL, &err) == GS_OK, "sim: %s", err.msg);
        /* analytic mode on this symmetric mesh: the 2 stage representatives stand for all */
        ck_assert_uint_eq(st.rank_lists, flow ? 64 : 2);
        if (!flow) {
            ck_assert_uint_eq(rep.events, events);
            gs_report_fini(&rep);
            continue;
        }
        ck_assert_uint_eq(st.events, events);
        ck_assert_uint_eq(st.collectives, colls);
        ck_assert_uint_gt(st.state_bytes, st.queue_bytes);
        double per_event = (double)(st.state_bytes + st.events * sizeof(gs_timing)) / (double)st.events;
        ck_assert_msg(per_event <= 32.0, "%.1f B per event", per_event);
        gs_report_fini(&rep);
    }
}
END_TEST

/* Every rank played (shared lists, the report over all of them) against what gs_sim_scenario
 * gives for --exact, on a scenario file; *by_class: whether it took the class path. */
static void exact_by_class(const char *rel, int *by_class)
{
    char path[1024];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/%s", top && *top ? top : ".", rel);
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag w;
    gs_error_init(&err);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_load_file(path, &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&s, &m, &w, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&w);
    *by_class = gs_sim_exact_is_class(&s, &m, NULL);
    gs_backend_stats st;
    gs_backend_opts bo = {0, NULL, &st, NULL};
    gs_report a, b;
    ck_assert_msg(gs_sim_scenario(&s, &m, 1, &bo, &a, NULL, &err) == GS_OK, "%s: %s", rel, err.msg);
    ck_assert_uint_eq(st.rank_lists, *by_class ? m.size[GS_DIM_PP] : m.world);
    played p = play(&s, &m, 1, 0);
    ck_assert_msg(gs_report_build(&s, p.sch, p.timing, &b, &err) == GS_OK, "%s", err.msg);
    played_free(&p);
    /* bit for bit, except HFU and the bubble share: a sum and an average over ranks, summed rank
     * by rank on the exact path and stage by stage (weighted by the stage's ranks) on the class
     * path, equal to rounding */
    ck_assert_msg(a.step_time_s == b.step_time_s, "%s: step %.17g vs %.17g", rel, a.step_time_s, b.step_time_s);
    ck_assert(a.tokens_per_s == b.tokens_per_s && a.mfu == b.mfu);
    ck_assert_msg(fabs(a.hfu - b.hfu) <= 1e-12 * fabs(b.hfu), "%s: hfu %.17g vs %.17g", rel, a.hfu, b.hfu);
    ck_assert(a.compute_s == b.compute_s && a.comm_share == b.comm_share);
    for (int d = 0; d < GS_DIM_COUNT; d++)
        ck_assert_msg(a.comm_s[d] == b.comm_s[d] && a.exposed_s[d] == b.exposed_s[d], "%s: dim %d", rel, d);
    ck_assert_msg(fabs(a.bubble_share - b.bubble_share) <= 1e-12 * fabs(b.bubble_share), "%s: bubble %.17g vs %.17g",
                  rel, a.bubble_share, b.bubble_share);
    ck_assert_uint_eq(a.events, b.events);
    ck_assert_uint_eq(a.critical_rank, b.critical_rank);
    ck_assert_uint_eq(a.peak_bytes, b.peak_bytes);
    /* gs_sim_scenario adds the host-bound warning to the engine's report when its host thread
     * issues for most of the step */
    ck_assert_uint_eq(a.warnings.count, b.warnings.count + (a.host_issue_s > GS_HOST_BOUND_SHARE * a.step_time_s));
    gs_report_fini(&a);
    gs_report_fini(&b);
}

/* The shipped scenarios, and the published ones of up to about 10 M events on the exact path:
 * every one is symmetric (troubled-70b-tp16's TP groups each span the same 2 nodes' halves), so
 * --exact takes the class path, with the report of every rank played. */
START_TEST(test_exact_by_class)
{
    static const char *files[] = {
        "scenarios/llama2-7b-8l-1xh200.yaml", "scenarios/seed-70b-64xa100-fsdp.yaml",
        "scenarios/seed-70b-64xa100.yaml", "scenarios/seed-7b-64gpu-25gbe-hsdp.yaml",
        "scenarios/seed-7b-64gpu-25gbe.yaml", "scenarios/seed-7b-8xa100.yaml", "scenarios/tiny-llama-2x2x2.yaml",
        "scenarios/troubled-70b-tp16.yaml", "scenarios/troubled-70b.yaml",
        "scenarios/published/mcore-h100-01-1.7b.yaml", "scenarios/published/mcore-h100-05-70b.yaml",
        "scenarios/published/nar21-t1-01-gpt-1.7b.yaml", "scenarios/published/nar21-t1-04-gpt-18.4b.yaml"};
    size_t n = sizeof files / sizeof files[0], classed = 0;
    for (size_t i = 0; i < n; i++) {
        int by_class;
        exact_by_class(files[i], &by_class);
        classed += (size_t)by_class;
    }
    ck_assert_uint_eq(classed, n);
}
END_TEST

/* When the class path is not every rank's: flow mode, stragglers, a calibration file, and a
 * mesh whose ranks differ from their representative: tp 3 on 4-GPU nodes puts TP group 0
 * (ranks 0-2) on node 0 and TP group 1 (ranks 3-5) on nodes 0 and 1. */
START_TEST(test_exact_is_class)
{
    gs_scenario s;
    gs_mesh m;
    load(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 2, pp: 2, tp: 4}\nbatch: {global: 8}\n", &s, &m);
    gs_backend_opts flow = {1, NULL, NULL, NULL}, calib = {0, "calib.json", NULL, NULL};
    ck_assert_int_eq(gs_sim_exact_is_class(&s, &m, NULL), 1);
    ck_assert_int_eq(gs_sim_exact_is_class(&s, &m, &flow), 0);
    ck_assert_int_eq(gs_sim_exact_is_class(&s, &m, &calib), 0);
    load(SMALL "cluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 2, pp: 2, tp: 4}\nbatch: {global: 8}\n"
               "stragglers: [{rank: 3, slowdown: 1.2}]\n", &s, &m);
    ck_assert_int_eq(gs_sim_exact_is_class(&s, &m, NULL), 0);
    load("model: {layers: 2, hidden: 384, heads: 6, ffn: 768, vocab: 1002, seq: 64}\n"
         "cluster: {preset: dgx-a100-80g, nodes: 3, gpus_per_node: 4}\n"
         "grid: {dp: 4, pp: 1, tp: 3, allow_tp_cross_node: true}\nbatch: {global: 8}\n", &s, &m);
    ck_assert_int_eq(gs_sim_exact_is_class(&s, &m, NULL), 0);
}
END_TEST

static Suite *des_suite(void)
{
    Suite *s = suite_create("des");
    TCase *t = tcase_create("shared");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_shared_pipeline);
    tcase_add_test(t, test_shared_data_parallel);
    tcase_add_test(t, test_stats);
    suite_add_tcase(s, t);
    TCase *k = tcase_create("class");
    tcase_set_timeout(k, 600);
    tcase_add_test(k, test_exact_is_class);
    tcase_add_test(k, test_exact_by_class);
    suite_add_tcase(s, k);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(des_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
