/* What `gridstep exec` prints of its run: the loss and time of every step and the last step's
 * report with the fields of `gridstep sim` (or the same as one --json document), the dispatch
 * gaps and the receives issued ahead of their place. */
#include <inttypes.h>
#include <stdio.h>

#include "cli/cli_common.h"
#include "cli/exec_cmd.h"
#include "engine/report.h"
#include "engine/units.h"
#include "exec/dispatch_gaps.h"
#include "exec/exec.h"

static void put_report(json_t *doc, const gs_report *r)
{
    json_object_set_new(doc, "step_time_s", json_real(r->step_time_s));
    json_object_set_new(doc, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(doc, "tokens_per_s_per_gpu", json_real(r->tokens_per_s_per_gpu));
    json_object_set_new(doc, "mfu", json_real(r->mfu));
    json_object_set_new(doc, "hfu", json_real(r->hfu));
    json_object_set_new(doc, "tflops_per_gpu", json_real(r->tflops_per_gpu));
    json_object_set_new(doc, "comm_share", json_real(r->comm_share));
    json_t *ex = json_object(), *cm = json_object();
    static const struct { gs_dim d; const char *n; } dims[] = {{GS_DIM_DP, "dp"}, {GS_DIM_TP, "tp"}, {GS_DIM_PP, "pp"}};
    for (int i = 0; i < 3; i++) {
        json_object_set_new(ex, dims[i].n, json_real(r->exposed_s[dims[i].d]));
        json_object_set_new(cm, dims[i].n, json_real(r->comm_s[dims[i].d]));
    }
    json_object_set_new(doc, "exposed_comm_s", ex);
    json_object_set_new(doc, "comm_s", cm);
    json_object_set_new(doc, "compute_s", json_real(r->compute_s));
    json_object_set_new(doc, "bubble_share", json_real(r->bubble_share));
    json_object_set_new(doc, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
    json_object_set_new(doc, "events", json_integer((json_int_t)r->events));
    json_object_set_new(doc, "critical_rank", json_integer((json_int_t)r->critical_rank));
}

static void print_report(const gs_report *r)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES];
    printf("last step (measured):\n");
    printf("  step time           %s\n", gs_fmt_seconds(r->step_time_s, b1, sizeof b1));
    printf("  tokens/s            %.0f global, %.1f per rank\n", r->tokens_per_s, r->tokens_per_s_per_gpu);
    printf("  model TFLOP/s/rank  %.4f   MFU %.4f%% of %s (the scenario's GPU)\n", r->tflops_per_gpu, 100 * r->mfu,
           gs_fmt_flops(r->peak_flops, b2, sizeof b2));
    printf("  compute             %s busy on the critical rank %" PRIu64 "\n",
           gs_fmt_seconds(r->compute_s, b1, sizeof b1), r->critical_rank);
    static const struct { gs_dim d; const char *n; } dims[] = {{GS_DIM_DP, "DP/FSDP"}, {GS_DIM_TP, "TP"}, {GS_DIM_PP, "PP"}};
    for (int i = 0; i < 3; i++)
        printf("  %-19s %s communicating, %s exposed\n", dims[i].n, gs_fmt_seconds(r->comm_s[dims[i].d], b1, sizeof b1),
               gs_fmt_seconds(r->exposed_s[dims[i].d], b3, sizeof b3));
    printf("  comm share          %.1f%% of the step\n", 100 * r->comm_share);
    printf("  bubble share        %.1f%%\n", 100 * r->bubble_share);
    printf("  events              %" PRIu64 " run\n", r->events);
}

/* The --json document of the run. */
static gs_status print_json(const gs__exec_args *a, const gs__exec_run *r, const gs_mpi_exec *mx, gs_error *err)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "scenario", json_string(r->s.name));
    json_object_set_new(doc, "driver", json_string(a->o.driver->name));
    json_object_set_new(doc, "gemm", json_string(gs_exec_session_gemm_math(r->x)));
    json_object_set_new(doc, "steps", json_integer((json_int_t)a->steps));
    json_object_set_new(doc, "first_step", json_integer((json_int_t)r->first));
    json_t *jl = json_array(), *js = json_array();
    for (uint64_t i = 0; i < a->steps; i++) {
        json_array_append_new(jl, json_real(r->loss[i]));
        json_array_append_new(js, json_real(r->secs[i]));
    }
    json_object_set_new(doc, "loss", jl);
    json_object_set_new(doc, "step_s", js);
    if (mx->launched) /* where each rank ran: its process's host and place on it */
        json_object_set_new(doc, "processes", gs__exec_processes_json(mx));
    put_report(doc, &r->rep);
    json_object_set_new(doc, "dispatch_gap_s", json_real(r->gaps.gap_s));
    json_object_set_new(doc, "dispatch_gap_share",
                        json_real(r->rep.step_time_s > 0 ? r->gaps.gap_s / r->rep.step_time_s : 0));
    json_object_set_new(doc, "dispatch_gap_rank", json_integer((json_int_t)r->gaps.rank));
    json_object_set_new(doc, "p2p_hoisted",
                        json_integer((json_int_t)gs_train_p2p_hoisted(gs_exec_session_train(r->x))));
    gs_status rc = gs_cli_json_print(doc, err);
    json_decref(doc);
    return rc;
}

/* The run as text: the grid and driver, every step's loss and time, the last step's report. */
static void print_text(const gs__exec_args *a, const gs__exec_run *r)
{
    const gs_mesh *mesh = &r->mesh;
    gs_fp8 f8 = r->s.strategy.fp8;
    printf("%s: %" PRIu64 " ranks (" GS_GRID_FMT ", %s) on the %s driver, fp32 "
           "(GEMMs: %s%s%s%s)\n",
           r->s.name, mesh->world, mesh->size[GS_DIM_DP], mesh->size[GS_DIM_PP], mesh->size[GS_DIM_TP],
           gs_sharding_name(r->s.strategy.sharding), a->o.driver->name, gs_exec_session_gemm_math(r->x),
           f8 != GS_FP8_OFF ? "; the linear layers' in FP8, " : "", f8 != GS_FP8_OFF ? gs_fp8_name(f8) : "",
           f8 != GS_FP8_OFF ? " scaling" : "");
    printf("  step  loss        time\n");
    for (uint64_t i = 0; i < a->steps; i++)
        printf("  %4" PRIu64 "  %.6f  %.4f s\n", r->first + i, r->loss[i], r->secs[i]);
    print_report(&r->rep);
    char gb[GS_FMT_BYTES], lb[GS_FMT_BYTES];
    printf("  dispatch gaps       %s on rank %" PRIu64 "'s compute stream (%.1f%% of the step; %zu events "
           "started after they were ready, the longest wait %s)\n",
           gs_fmt_seconds(r->gaps.gap_s, gb, sizeof gb), r->gaps.rank,
           r->rep.step_time_s > 0 ? 100 * r->gaps.gap_s / r->rep.step_time_s : 0.0, r->gaps.gaps,
           gs_fmt_seconds(r->gaps.largest_s, lb, sizeof lb));
    size_t hoisted = gs_train_p2p_hoisted(gs_exec_session_train(r->x));
    if (hoisted)
        printf("  p2p groups          %zu receives per step issued ahead of their place (the %s driver's sends "
               "wait for their receivers)\n", hoisted, a->o.driver->name);
}

gs_status gs__exec_output(const gs__exec_args *a, const gs__exec_run *r, const gs_mpi_exec *mx, gs_error *err)
{
    if (a->json)
        return print_json(a, r, mx, err);
    print_text(a, r);
    return GS_OK;
}
