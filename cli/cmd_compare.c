/* `gridstep compare`: plays the scenario's every-rank schedule on a driver (as `gridstep exec`)
 * and on the sim backend, with the presets and, with --calib, calibrated, and compares the step
 * and the time a rank spends in each class of event (compute by op, each collective kind per
 * dimension, p2p). The options, the launcher and the step loop are exec's (cli/exec_cmd.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/exec_cmd.h"
#include "cli/progress.h"
#include "engine/report.h"
#include "engine/units.h"
#include "exec/dispatch_gaps.h"
#include "exec/exec.h"
#include "sim/sim.h"

const char gs_cmd_compare_help[] =
    "Plays the same every-rank schedule on the sim backend and on a driver, and prints, per class\n"
    "of event (compute by op, each collective kind per dimension, p2p), the time a rank spends in\n"
    "it (summed over events, averaged over ranks) simulated vs measured, the error\n"
    "(sim - exec) / exec, and the step time of each. The sim models the scenario's GPUs and\n"
    "links; the host driver runs on this CPU, so large errors are expected there: the figures\n"
    "are what a calibration (sim --calib) would fit.\n"
    "\n"
    "options:\n"
    "  --driver D       host or cuda (as for exec)\n"
    "  --steps N        exec steps; the last one is compared (default 2: the first warms up)\n"
    "  --calib FILE     also simulate with the calibration file (`gridstep calibrate`): the table\n"
    "                   shows the sim with the presets (before) and calibrated (after), each\n"
    "                   with its error; a host calibration models this CPU: measured GEMM,\n"
    "                   kernel and collective rates for every rank and link, and the ranks'\n"
    "                   compute sharing the machine's cores\n"
    "  --mode M         the sim's mode, analytic (default) or flow (as for sim)\n"
    "  --quiet          no progress on standard error (as for exec)\n"
    "  --json           sim_mode, sim_step_time_s, exec_step_time_s, step_error, classes [{name, sim_s,\n"
    "                   exec_s, error}]; with --calib these are the calibrated sim's, and\n"
    "                   default_sim_step_time_s, default_step_error, classes[].default_sim_s and\n"
    "                   .default_error the presets'; exec_dispatch_gap_s and sim_dispatch_gap_s: the\n"
    "                   worst rank's ready compute events waiting to be issued (exec/dispatch_gaps.h)\n"
    "\n"
    "examples:\n"
    "  gridstep compare scenarios/tiny-llama-2x2x2.yaml\n"
    "  gridstep calibrate --out host.json && gridstep compare --calib host.json tests/calib/b-dp4.yaml\n";

const char gs_cmd_compare_usage[] =
    "gridstep compare [--driver host|cuda] [--steps N] [--calib FILE] [--mode analytic|flow] [--json] [--quiet] "
    "SCENARIO.yaml";

/* The dispatch gaps (exec/dispatch_gaps.h) of both runs: the sim's from its modeled dispatch
 * and launch costs, exec's measured. */
static void print_gaps(const gs_dispatch_gaps *sim, const gs_dispatch_gaps *ex)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES];
    printf("  dispatch gaps (ready compute events waiting to be issued, the worst rank): exec %s (rank %" PRIu64
           "), sim %s (rank %" PRIu64 "; the sim charges launch and dispatch costs inside the events)\n",
           gs_fmt_seconds(ex->gap_s, b2, sizeof b2), ex->rank, gs_fmt_seconds(sim->gap_s, b1, sizeof b1), sim->rank);
}

#define NCLASS (GS_OP_COUNT + GS_GROUP_KIND_COUNT * GS_COLL_COUNT + 2)

static int event_class(const gs_event *e)
{
    if (e->kind == GS_EV_COMPUTE)
        return e->op < GS_OP_COUNT ? e->op : 0;
    if (e->kind == GS_EV_COLLECTIVE)
        return GS_OP_COUNT + e->group * GS_COLL_COUNT + (e->op < GS_COLL_COUNT ? e->op : 0);
    if (e->kind == GS_EV_SEND || e->kind == GS_EV_RECV)
        return NCLASS - 2;
    return NCLASS - 1;
}

static void class_name(int c, char *buf, size_t len)
{
    if (c < GS_OP_COUNT)
        snprintf(buf, len, "compute:%s", gs_op_name((gs_op)c));
    else if (c < NCLASS - 2)
        snprintf(buf, len, "%s:%s", gs_group_kind_name((gs_group_kind)((c - GS_OP_COUNT) / GS_COLL_COUNT)),
                 gs_coll_op_name((gs_coll_op)((c - GS_OP_COUNT) % GS_COLL_COUNT)));
    else
        snprintf(buf, len, "%s", c == NCLASS - 2 ? "p2p" : "copy");
}

/* Per class: event time summed over every rank's events, averaged over ranks. */
static void class_times(const gs_schedule *sch, gs_timing *const *timing, double *out, int *seen)
{
    for (size_t i = 0; i < sch->nranks; i++)
        for (size_t k = 0; k < sch->ranks[i].nevents; k++) {
            int c = event_class(&sch->ranks[i].events[k]);
            out[c] += (timing[i][k].end_s - timing[i][k].start_s) / (double)sch->nranks;
            seen[c] = 1;
        }
}

/* One comparison: the exec run, the sim's timings of the same schedule and their classes. */
typedef struct compare_run {
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x;
    double *loss, *secs; /* per exec step */
    gs_report srep, erep; /* the sim's step (the calibrated one with --calib), exec's last step */
    int have_s, have_e;
    void *sim_state;
    gs_timing **stime;       /* the sim's timing per rank and event */
    const gs_schedule *sch;  /* the session's */
    double sim_c[NCLASS], def_c[NCLASS], ex_c[NCLASS]; /* seconds per class: sim, presets' sim (--calib), exec */
    int seen[NCLASS];
    double def_step; /* the presets' sim step (--calib) */
    gs_dispatch_gaps sgap, egap;
    double serr, derr; /* step errors (sim - exec) / exec: the sim's, the presets' sim's */
} compare_run;

/* The scenario loaded and run on the driver for the steps; erep gets the last step's report. */
static gs_status compare_exec(const gs__exec_args *a, const gs__exec_proc *p, compare_run *r, gs_error *err)
{
    gs_status rc;
    uint64_t done = 0;
    if ((rc = gs_cli_load(a->path, &r->s, &r->mesh, err)) != GS_OK)
        return rc;
    r->loss = calloc(a->steps, sizeof *r->loss);
    r->secs = calloc(a->steps, sizeof *r->secs);
    if (!r->loss || !r->secs)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    gs_progress prog;
    gs_progress_init(&prog, "gridstep compare", "exec steps", !a->quiet && p->prank == 0);
    gs__exec_step_loop loop = {a->steps, r->loss, r->secs, NULL, p->mx.launched, &prog};
    if ((rc = gs_exec_session_create(&r->s, &r->mesh, &a->o, &r->x, err)) == GS_OK)
        rc = gs__exec_run_steps(r->x, &loop, &done, err);
    gs_progress_end(&prog);
    if (rc != GS_OK || (rc = gs_exec_session_report(r->x, &r->erep, err)) != GS_OK)
        return rc;
    r->have_e = 1;
    return GS_OK;
}

/* The warning that an unfused cross-entropy is charged differently by the sim and by exec. */
static void warn_unfused_xent(const gs_scenario *s)
{
    fprintf(stderr, "gridstep: compare: strategy.cross_entropy is unfused: the sim charges the framework's "
                    "passes over the logits (%" PRIu64 " B per logit forward, %" PRIu64 " backward) while exec "
                    "runs its fused kernel (%" PRIu64 " and %" PRIu64 "), so the loss class differs by design; "
                    "write cross_entropy: fused to compare like with like\n",
            gs_xent_bytes_per_logit(GS_XENT_UNFUSED, gs_precision_bytes(s->strategy.precision), 0),
            gs_xent_bytes_per_logit(GS_XENT_UNFUSED, gs_precision_bytes(s->strategy.precision), 1),
            gs_xent_bytes_per_logit(GS_XENT_FUSED, gs_precision_bytes(s->strategy.precision), 0),
            gs_xent_bytes_per_logit(GS_XENT_FUSED, gs_precision_bytes(s->strategy.precision), 1));
}

/* The sim on the session's schedule: the presets' (before), then the calibrated one (after)
 * when there is a file; the classes of both runs, their dispatch gaps and the step errors. */
static gs_status compare_sim(const gs__exec_args *a, compare_run *r, gs_error *err)
{
    gs_status rc;
    const gs_schedule *sch = r->sch = gs_exec_session_schedule(r->x);
    if (!(r->stime = calloc(sch->nranks, sizeof *r->stime)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < sch->nranks; i++)
        if (!(r->stime[i] = calloc(sch->ranks[i].nevents + 1, sizeof *r->stime[i])))
            return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    gs_cli_calib_notes(a->calib, &r->s);
    if (r->s.strategy.cross_entropy == GS_XENT_UNFUSED)
        warn_unfused_xent(&r->s);
    for (int pass = 0; pass < (a->calib ? 2 : 1); pass++) {
        gs_backend_opts bo = {a->flow, pass ? a->calib : NULL, NULL, NULL};
        if (r->have_s) {
            gs_report_fini(&r->srep);
            r->have_s = 0;
        }
        if (r->sim_state) {
            gs_sim_backend.close(r->sim_state);
            r->sim_state = NULL;
        }
        if ((rc = gs_sim_backend.open(&r->s, &r->mesh, &bo, &r->sim_state, err)) != GS_OK ||
            (rc = gs_sim_backend.run(r->sim_state, sch, r->stime, err)) != GS_OK ||
            (rc = gs_report_build(&r->s, sch, r->stime, &r->srep, err)) != GS_OK)
            return rc;
        r->have_s = 1;
        if (pass == 0 && a->calib) {
            class_times(sch, r->stime, r->def_c, r->seen);
            r->def_step = r->srep.step_time_s;
        }
    }
    class_times(sch, r->stime, r->sim_c, r->seen);
    class_times(sch, gs_exec_session_timing(r->x), r->ex_c, r->seen);
    gs_dispatch_gaps_step(sch, r->stime, &r->sgap);
    gs_dispatch_gaps_step(sch, gs_exec_session_timing(r->x), &r->egap);
    double es = r->erep.step_time_s;
    r->serr = es > 0 ? (r->srep.step_time_s - es) / es : 0;
    r->derr = es > 0 ? (r->def_step - es) / es : 0;
    return GS_OK;
}

/* The --json document: the steps, their errors and every class seen. */
static gs_status compare_json(const gs__exec_args *a, const compare_run *r, gs_error *err)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "scenario", json_string(r->s.name));
    json_object_set_new(doc, "driver", json_string(a->o.driver->name));
    json_object_set_new(doc, "sim_mode", json_string(a->flow ? "flow" : "analytic"));
    json_object_set_new(doc, "sim_step_time_s", json_real(r->srep.step_time_s));
    json_object_set_new(doc, "exec_step_time_s", json_real(r->erep.step_time_s));
    json_object_set_new(doc, "step_error", json_real(r->serr));
    if (a->calib) {
        json_object_set_new(doc, "calib", json_string(a->calib));
        json_object_set_new(doc, "default_sim_step_time_s", json_real(r->def_step));
        json_object_set_new(doc, "default_step_error", json_real(r->derr));
    }
    json_t *cl = json_array();
    for (int c = 0; c < NCLASS; c++) {
        if (!r->seen[c])
            continue;
        char nm[64];
        class_name(c, nm, sizeof nm);
        const double ex = r->ex_c[c];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(nm));
        json_object_set_new(o, "sim_s", json_real(r->sim_c[c]));
        json_object_set_new(o, "exec_s", json_real(ex));
        json_object_set_new(o, "error", ex > 0 ? json_real((r->sim_c[c] - ex) / ex) : json_null());
        if (a->calib) {
            json_object_set_new(o, "default_sim_s", json_real(r->def_c[c]));
            json_object_set_new(o, "default_error", ex > 0 ? json_real((r->def_c[c] - ex) / ex) : json_null());
        }
        json_array_append_new(cl, o);
    }
    json_object_set_new(doc, "classes", cl);
    json_object_set_new(doc, "sim_dispatch_gap_s", json_real(r->sgap.gap_s));
    json_object_set_new(doc, "exec_dispatch_gap_s", json_real(r->egap.gap_s));
    gs_status rc = gs_cli_json_print(doc, err);
    json_decref(doc);
    return rc;
}

/* With --calib: exec against the sim before (presets) and after calibration, per class. */
static void print_calibrated(const gs__exec_args *a, const compare_run *r)
{
    char b1[32], b2[32], b3[32];
    gs_cli_table tab;
    gs_cli_table_init(&tab, 6);
    printf("%s: sim before (%s presets) and after calibration (%s) vs exec (%s driver, measured, step %" PRIu64
           " of %" PRIu64 ")\n", r->s.name, r->s.cluster.name, a->calib, a->o.driver->name, a->steps, a->steps);
    gs_cli_table_rowf(&tab, "class\texec\tsim before\terror\tsim after\terror");
    for (int c = 0; c < NCLASS; c++) {
        if (!r->seen[c])
            continue;
        char nm[64];
        class_name(c, nm, sizeof nm);
        const double ex = r->ex_c[c];
        gs_cli_table_rowf(&tab, "%s\t%s\t%s\t%+.1f%%\t%s\t%+.1f%%", nm, gs_fmt_seconds(ex, b2, sizeof b2),
                          gs_fmt_seconds(r->def_c[c], b3, sizeof b3), ex > 0 ? 100 * (r->def_c[c] - ex) / ex : 0.0,
                          gs_fmt_seconds(r->sim_c[c], b1, sizeof b1), ex > 0 ? 100 * (r->sim_c[c] - ex) / ex : 0.0);
    }
    gs_cli_table_rowf(&tab, "step\t%s\t%s\t%+.1f%%\t%s\t%+.1f%%", gs_fmt_seconds(r->erep.step_time_s, b2, sizeof b2),
                      gs_fmt_seconds(r->def_step, b3, sizeof b3), 100 * r->derr,
                      gs_fmt_seconds(r->srep.step_time_s, b1, sizeof b1), 100 * r->serr);
    gs_cli_table_print(&tab, stdout, 2);
    gs_cli_table_fini(&tab);
    printf("  (per class: time a rank spends in those events, summed, averaged over ranks; error = (sim - exec) "
           "/ exec)\n");
    print_gaps(&r->sgap, &r->egap);
}

/* Without --calib: the sim against exec, per class. */
static void print_plain(const gs__exec_args *a, const compare_run *r)
{
    char b1[32], b2[32];
    gs_cli_table tab;
    gs_cli_table_init(&tab, 4);
    printf("%s: sim (%s, modeled%s) vs exec (%s driver, measured, step %" PRIu64 " of %" PRIu64 ")\n", r->s.name,
           r->s.cluster.name, a->flow ? ", flow mode" : "", a->o.driver->name, a->steps, a->steps);
    gs_cli_table_rowf(&tab, "class\tsim\texec\terror");
    for (int c = 0; c < NCLASS; c++) {
        if (!r->seen[c])
            continue;
        char nm[64];
        class_name(c, nm, sizeof nm);
        const double ex = r->ex_c[c];
        gs_cli_table_rowf(&tab, "%s\t%s\t%s\t%+.1f%%", nm, gs_fmt_seconds(r->sim_c[c], b1, sizeof b1),
                          gs_fmt_seconds(ex, b2, sizeof b2), ex > 0 ? 100 * (r->sim_c[c] - ex) / ex : 0.0);
    }
    gs_cli_table_rowf(&tab, "step\t%s\t%s\t%+.1f%%", gs_fmt_seconds(r->srep.step_time_s, b1, sizeof b1),
                      gs_fmt_seconds(r->erep.step_time_s, b2, sizeof b2), 100 * r->serr);
    gs_cli_table_print(&tab, stdout, 2);
    gs_cli_table_fini(&tab);
    printf("  (per class: time a rank spends in those events, summed, averaged over ranks; error = (sim - exec) "
           "/ exec)\n");
    print_gaps(&r->sgap, &r->egap);
}

gs_status gs_cmd_compare(int argc, char **argv, gs_error *err)
{
    gs__exec_args a;
    gs__exec_proc proc;
    gs_status rc = gs__exec_launch_begin(argc, argv, 1, &a, &proc, err);
    if (rc != GS_OK)
        return gs__exec_launch_end(&proc, "compare", NULL, rc, err);
    compare_run r;
    memset(&r, 0, sizeof r);
    if ((rc = compare_exec(&a, &proc, &r, err)) == GS_OK && (rc = compare_sim(&a, &r, err)) == GS_OK) {
        if (a.json)
            rc = compare_json(&a, &r, err);
        else if (a.calib)
            print_calibrated(&a, &r);
        else
            print_plain(&a, &r);
    }
    if (r.sim_state)
        gs_sim_backend.close(r.sim_state);
    if (r.stime && r.sch)
        for (size_t i = 0; i < r.sch->nranks; i++)
            free(r.stime[i]);
    free(r.stime);
    if (r.have_s)
        gs_report_fini(&r.srep);
    if (r.have_e)
        gs_report_fini(&r.erep);
    gs_exec_session_destroy(r.x);
    free(r.loss);
    free(r.secs);
    return gs__exec_launch_end(&proc, "compare", NULL, rc, err);
}
