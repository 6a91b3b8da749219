/* `gridstep sim`: build the schedule and replay it on the sim backend; report the step. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/report.h"
#include "engine/units.h"

const char gs_cmd_sim_help[] =
    "Builds the scenario's schedule (engine/schedule) and replays it as a discrete-event simulation:\n"
    "compute events take their roofline time (FLOPs at the GPU's peak x a shape-dependent GEMM\n"
    "efficiency, bytes at HBM bandwidth, plus launch overhead); collectives take the time of the\n"
    "algorithm and protocol NCCL's tuner would pick (ring, double binary tree, NVLS, hierarchical)\n"
    "over the group's links; a collective starts when every member has reached it, so imbalance\n"
    "and pipeline bubbles show up as waiting.\n"
    "\n"
    "The report: step time; tokens/s (global and per GPU); model TFLOP/s per GPU and MFU =\n"
    "model FLOPs / (step x GPUs x peak), with model FLOPs = 6 x params x tokens + 12 x layers x\n"
    "tokens x seq x heads x head_dim (Megatron's count, no recompute); HFU counts every compute\n"
    "event's FLOPs, recompute included; per dimension the time its stream communicates and how\n"
    "much of it is exposed (not hidden behind compute) on the critical rank; NCCL share (time any\n"
    "communication runs / step); bubble share (time a GPU neither computes nor communicates);\n"
    "peak memory per rank; warnings mapped to the seed's troubleshooting table.\n"
    "\n"
    "options:\n"
    "  --exact          simulate every rank (default: one representative per pipeline stage)\n"
    "  --mode M         analytic (default: no contention between concurrent transfers) or flow\n"
    "                   (concurrent transfers on a shared NIC, NVLink/PCIe port or oversubscribed\n"
    "                   leaf uplink split its bandwidth max-min fairly)\n"
    "  --json           one JSON document: step_time_s, tokens_per_s, tokens_per_s_per_gpu, mfu, hfu,\n"
    "                   tflops_per_gpu, comm_share, exposed_comm_s {dp, tp, pp}, bubble_share,\n"
    "                   peak_bytes, events, mode (analytic or flow)\n"
    "  --trace FILE     Chrome trace JSON (open in Perfetto): a track per rank and stream, a slice\n"
    "                   per event, a memory counter\n"
    "\n"
    "examples:\n"
    "  gridstep sim scenarios/seed-70b-64xa100.yaml\n"
    "  gridstep sim --json scenarios/seed-7b-64gpu-25gbe.yaml | jq .step_time_s\n"
    "  gridstep sim --trace step.json scenarios/seed-7b-8xa100.yaml\n";

static const char usage[] = "gridstep sim [--exact] [--mode analytic|flow] [--json] [--trace FILE] SCENARIO.yaml";

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static json_t *report_json(const gs_scenario *s, const gs_report *r, int flow)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "scenario", json_string(s->name));
    json_object_set_new(doc, "mode", json_string(flow ? "flow" : "analytic"));
    json_object_set_new(doc, "step_time_s", json_real(r->step_time_s));
    json_object_set_new(doc, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(doc, "tokens_per_s_per_gpu", json_real(r->tokens_per_s_per_gpu));
    json_object_set_new(doc, "mfu", json_real(r->mfu));
    json_object_set_new(doc, "hfu", json_real(r->hfu));
    json_object_set_new(doc, "tflops_per_gpu", json_real(r->tflops_per_gpu));
    json_object_set_new(doc, "comm_share", json_real(r->comm_share));
    static const char *dims[GS_DIM_COUNT] = {"tp", "dp", "pp"};
    json_t *ex = json_object(), *cm = json_object();
    for (int d = GS_DIM_DP; d >= 0; d = d == GS_DIM_DP ? GS_DIM_TP : d == GS_DIM_TP ? GS_DIM_PP : -1) {
        json_object_set_new(ex, dims[d], json_real(r->exposed_s[d]));
        json_object_set_new(cm, dims[d], json_real(r->comm_s[d]));
    }
    json_object_set_new(doc, "exposed_comm_s", ex);
    json_object_set_new(doc, "comm_s", cm);
    json_object_set_new(doc, "compute_s", json_real(r->compute_s));
    json_object_set_new(doc, "bubble_share", json_real(r->bubble_share));
    json_object_set_new(doc, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
    json_object_set_new(doc, "gpu_bytes", json_integer((json_int_t)r->gpu_bytes));
    json_object_set_new(doc, "events", json_integer((json_int_t)r->events));
    json_object_set_new(doc, "critical_rank", json_integer((json_int_t)r->critical_rank));
    json_t *w = json_array();
    for (size_t i = 0; i < r->warnings.count; i++)
        json_array_append_new(w, json_string(r->warnings.warnings[i]));
    json_object_set_new(doc, "warnings", w);
    return doc;
}

static void print_report(const gs_scenario *s, const gs_mesh *m, int exact, const gs_report *r, double wall)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES], c1[32];
    printf("%s: %s on %" PRIu64 " x %s (%" PRIu64 " GPUs), grid dp=%" PRIu64 " pp=%" PRIu64 " tp=%" PRIu64
           ", %s, %" PRIu64 " micro-batch%s of %" PRIu64 "\n",
           s->name, s->model.name, s->cluster.nodes, s->cluster.name, m->world, m->size[GS_DIM_DP],
           m->size[GS_DIM_PP], m->size[GS_DIM_TP], gs_sharding_name(s->strategy.sharding), gs_scenario_microbatches(s),
           gs_scenario_microbatches(s) == 1 ? "" : "es", s->batch.micro_seqs);
    printf("  step time           %s\n", gs_fmt_seconds(r->step_time_s, b1, sizeof b1));
    printf("  tokens/s            %.0f global, %.1f per GPU\n", r->tokens_per_s, r->tokens_per_s_per_gpu);
    printf("  model TFLOP/s/GPU   %.1f   MFU %.1f%% of %s\n", r->tflops_per_gpu, 100 * r->mfu,
           gs_fmt_flops(r->peak_flops, b2, sizeof b2));
    printf("  HFU                 %.1f%% (every compute event's FLOPs, recompute included)\n", 100 * r->hfu);
    printf("  compute             %s busy on the critical rank %" PRIu64 "\n",
           gs_fmt_seconds(r->compute_s, b1, sizeof b1), r->critical_rank);
    static const struct { gs_dim d; const char *n; } dims[] = {{GS_DIM_DP, "DP/FSDP"}, {GS_DIM_TP, "TP"}, {GS_DIM_PP, "PP"}};
    for (int i = 0; i < 3; i++)
        printf("  %-19s %s communicating, %s exposed\n", dims[i].n, gs_fmt_seconds(r->comm_s[dims[i].d], b1, sizeof b1),
               gs_fmt_seconds(r->exposed_s[dims[i].d], b3, sizeof b3));
    printf("  NCCL share          %.1f%% of the step\n", 100 * r->comm_share);
    printf("  bubble share        %.1f%% (neither computing nor communicating)\n", 100 * r->bubble_share);
    printf("  peak memory         %s per rank of %s%s\n", gs_fmt_bytes(r->peak_bytes, b1, sizeof b1),
           gs_fmt_bytes(r->gpu_bytes, b4, sizeof b4), r->peak_bytes > r->gpu_bytes ? "  (DOES NOT FIT)" : "");
    printf("  events              %s simulated (%s) in %.2f s\n", gs_fmt_count(r->events, c1, sizeof c1),
           exact || s->nstragglers ? "every rank" : "one rank per pipeline stage", wall);
    for (size_t i = 0; i < r->warnings.count; i++)
        printf("warning: %s\n", r->warnings.warnings[i]);
}

gs_status gs_cmd_sim(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"exact", no_argument, NULL, 'e'}, {"json", no_argument, NULL, 'j'},
        {"trace", required_argument, NULL, 't'}, {"mode", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    int exact = 0, json = 0, c;
    const char *trace = NULL;
    gs_backend_opts bo = {0, NULL};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': exact = 1; break;
        case 'j': json = 1; break;
        case 't': trace = optarg; break;
        case 'm':
            if (strcmp(optarg, "analytic") == 0)
                bo.flow = 0;
            else if (strcmp(optarg, "flow") == 0)
                bo.flow = 1;
            else
                return gs_error_set(err, GS_ERR_INPUT, "--mode: found '%s', expected analytic or flow\nusage: %s",
                                    optarg, usage);
            break;
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    const char *path = NULL;
    gs_status rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err);
    if (rc != GS_OK)
        return rc;
    gs_scenario s;
    gs_mesh mesh;
    json_t *doc = NULL;
    gs_report rep;
    int have_rep = 0;
    FILE *tf = NULL;
    double t0 = now_s();
    if ((rc = gs_cli_load(path, &s, &mesh, err)) != GS_OK)
        goto out;
    if (trace && !(tf = fopen(trace, "w"))) {
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", trace, strerror(errno));
        goto out;
    }
    if ((rc = gs_sim_scenario(&s, &mesh, exact, &bo, &rep, tf, err)) != GS_OK)
        goto out;
    have_rep = 1;
    if (tf) {
        int bad = fclose(tf) != 0;
        tf = NULL;
        if (bad) {
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", trace, strerror(errno));
            goto out;
        }
    }
    if (json) {
        doc = report_json(&s, &rep, bo.flow);
        rc = gs_cli_json_print(doc, err);
    } else {
        print_report(&s, &mesh, exact, &rep, now_s() - t0);
    }
out:
    if (tf)
        fclose(tf);
    if (have_rep)
        gs_report_fini(&rep);
    json_decref(doc);
    return rc;
}
