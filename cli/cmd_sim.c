/* `gridstep sim`: build the schedule and replay it on the sim backend; report the step. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sim/sim.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/plot.h"
#include "engine/import.h"
#include "engine/ledger.h"
#include "engine/scenario_write.h"
#include "engine/report.h"
#include "sim/topology.h"
#include "engine/units.h"

const char gs_cmd_sim_help[] =
    "Builds the scenario's schedule (engine/schedule) and replays it as a discrete-event simulation:\n"
    "compute events take their roofline time (FLOPs at the GPU's peak x a shape-dependent GEMM\n"
    "efficiency, bytes at HBM bandwidth, plus launch overhead); collectives take the time of the\n"
    "algorithm and protocol NCCL's tuner would pick (ring, double binary tree, NVLS, PAT)\n"
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
    "When the peak memory per rank exceeds the GPU's, sim prints its whole report (or JSON, with\n"
    "\"fits\": false), then an error, and exits 1: such a step would fail with OOM, and a script\n"
    "must not take its step time for a result. plan and sweep list such configurations as not\n"
    "fitting instead, and diagnose simulates them to find the fix.\n"
    "\n"
    "options:\n"
    "  --exact          simulate every rank (default: one representative per pipeline stage); in\n"
    "                   analytic mode, without stragglers or --calib, on a mesh where every rank\n"
    "                   looks to the cost models as its stage representative, every rank plays the\n"
    "                   representative's events at the same times: the class path is simulated and\n"
    "                   its report is every rank's (only contention, --mode flow, tells them apart)\n"
    "  --mode M         analytic (default: no contention between concurrent transfers) or flow\n"
    "                   (concurrent transfers on a shared NIC, NVLink/PCIe port or oversubscribed\n"
    "                   leaf uplink split its bandwidth max-min fairly)\n"
    "  --json           one JSON document: step_time_s, tokens_per_s, tokens_per_s_per_gpu, mfu, hfu,\n"
    "                   tflops_per_gpu, comm_share, exposed_comm_s {dp, tp, pp}, bubble_share,\n"
    "                   peak_bytes, gpu_bytes, fits, events, mode (analytic or flow); every key in\n"
    "                   doc/json.md\n"
    "  --calib FILE     calibration JSON overriding the presets' compute and link figures:\n"
    "                   {\"compute\": {\"peak_flops\", \"gemm_efficiency\", \"hbm_bw\", \"hbm_efficiency\",\n"
    "                   \"launch_s\", \"overlap_slowdown\"}, \"links\": {\"intra_bw\", \"nic_bw\"}} (SI units)\n"
    "                   and the rest of what `gridstep calibrate` writes (gridstep(1)); a host driver's\n"
    "                   shared cores, dispatch and wake-up costs apply in both modes (in flow mode a\n"
    "                   collective's CPU work follows the time its flow takes)\n"
    "  --explain        the hand arithmetic next to the simulation (compute at peak x efficiency,\n"
    "                   the ledger's bytes over the links, the host thread's issuing) and why they\n"
    "                   differ\n"
    "  --trace FILE     Chrome trace JSON (open in Perfetto): a track per rank and stream, a slice\n"
    "                   per event (whole nanoseconds: neighbours touch, never overlap), a memory\n"
    "                   counter, flow arrows from each collective's first member to the others and\n"
    "                   from each send to its receive; a rank labelled xN stands for N ranks with\n"
    "                   its schedule (--exact traces every rank)\n"
    "  --plot FILE.png|FILE.svg  the step as a Gantt chart through gnuplot: one row per rank and\n"
    "                   stream, a box per event coloured by kind (forward, backward, recompute,\n"
    "                   optimizer, DP/FSDP, TP, PP send/recv, host copies); gaps on the compute row\n"
    "                   are the bubble and exposed communication. x in seconds (ms for steps under\n"
    "                   a second); the title names the ranks shown with their (dp, pp, tp)\n"
    "                   coordinates; FILE.dat and FILE.gp are written beside the image\n"
    "  --plot-ranks R,... the ranks to draw (default: the first rank of each pipeline stage, at most\n"
    "                   8; at most 16 when given); without --exact only those ranks are simulated\n"
    "  --plot-comm FILE.png|FILE.svg  per dimension (dp, tp, pp) the seconds communicating on the\n"
    "                   critical rank, stacked as overlapped and exposed\n"
    "  --stats          to stderr: rank lists, events, tensors, the event queue's peak entries and\n"
    "                   bytes, bytes per event (the simulator's state and one timing per event),\n"
    "                   the process's peak resident memory (getrusage), the wall and CPU time, and\n"
    "                   events per CPU-second and per second (build and report included)\n"
    "\n"
    "importing a launch configuration (instead of SCENARIO.yaml):\n"
    "  --from-accelerate FILE   an accelerate config YAML (distributed_type FSDP or MULTI_GPU):\n"
    "                   fsdp_version 1 or 2, fsdp_reshard_after_forward (FSDP1: the strategy's\n"
    "                   name, as accelerate >= 1.6 writes it, or the older fsdp_sharding_strategy;\n"
    "                   FSDP2: true/false), auto-wrap policy, backward/forward prefetch (FSDP1),\n"
    "                   offload, activation checkpointing, parallelism_config (FSDP2: tp_size,\n"
    "                   dp_replicate_size x dp_shard_size for HSDP), mixed_precision,\n"
    "                   num_machines, num_processes are mapped; grid tp from parallelism_config,\n"
    "                   dp = num_processes / tp; needs --model unless the file carries gridstep's\n"
    "                   '# gridstep model:' line (and its '# gridstep batch:' line gives the batch)\n"
    "  --from-torchtitan 'FILE [--section.key VALUE ...]'   a torchtitan train config (TOML;\n"
    "                   December 2024's layout or 2025's), with torchtitan's command-line\n"
    "                   overrides after it (--section.key=VALUE, or a bare --section.key for true):\n"
    "                   model name and flavor (llama3 8B/70B/405B, llama2 7B/13B/70B, deepseek_v3\n"
    "                   16B/236B/671B, llama4 17bx16e/17bx128e, qwen3 30B-A3B/235B-A22B; --model\n"
    "                   for others), seq_len, local/global batch, the parallel degrees (replicate x\n"
    "                   shard: DDP, FSDP2 or HSDP; tp with sequence parallelism and async TP; pp\n"
    "                   with 1F1B, GPipe or Interleaved1F1B; cp with its rotate method),\n"
    "                   fsdp_reshard_after_forward, activation checkpointing (op, every N-th\n"
    "                   block, full), compile and float8 are mapped; data_parallel_shard_degree -1\n"
    "                   needs --nodes\n"
    "  --from-megatron ARGS     Megatron-LM flags as one string, or @FILE: a launch script, read as\n"
    "                   bash runs it as far as a launch needs (variables, arrays and\n"
    "                   \"${ARRAY[@]}\", ${VAR:-default}, $(( )), export, quotes, \\-continuations,\n"
    "                   comments; nothing runs: $(command) and unset variables stay placeholders;\n"
    "                   if/for/while/case are refused), its command naming a *.py script with a\n"
    "                   torchrun prefix whose --nnodes/--nproc_per_node are used; or Megatron's\n"
    "                   printed argument dump (---- arguments ---- ... ---- end of arguments ----).\n"
    "                   Messages say FILE:LINE. Mapped: --tensor/--pipeline-model-parallel-size,\n"
    "                   --use-tp-pp-dp-mapping, --num-layers-per-virtual-pipeline-stage,\n"
    "                   --sequence-parallel, --micro/--global-batch-size, --recompute-*,\n"
    "                   --use-distributed-optimizer (zero1), --use-megatron-fsdp with\n"
    "                   --data-parallel-sharding-strategy (zero1/2/3) and\n"
    "                   --num-distributed-optimizer-instances (hybrid_shard), --use-torch-fsdp2\n"
    "                   (full_shard), --bf16/--fp16, the model shape (--num-layers, --hidden-size,\n"
    "                   --num-attention-heads, --group-query-attention --num-query-groups,\n"
    "                   --ffn-hidden-size, --kv-channels, --seq-length, --vocab-size padded as\n"
    "                   --make-vocab-size-divisible-by says, --swiglu, --normalization,\n"
    "                   --position-embedding-type, --untie-embeddings-and-output-weights,\n"
    "                   --disable-bias-linear, dropouts), --attention-backend. Other flags of\n"
    "                   Megatron-LM are listed in one 'ignored: not modeled' line; a flag\n"
    "                   Megatron-LM does not have (engine/megatron_args.tsv) is an error\n"
    "  --model M        model preset (accelerate: unless the file names it; Megatron: used when\n"
    "                   the flags carry no --num-layers/--hidden-size/--num-attention-heads)\n"
    "  --cluster C      cluster preset (required)\n"
    "  --nodes N        nodes (default: num_machines, torchrun --nnodes, or the dump's world_size;\n"
    "                   --nodes wins over a launcher's --nnodes)\n"
    "  --global-batch B sequences per step (default: the config's, else micro x dp)\n"
    "  --micro B        sequences per micro-batch (default: the config's, else 1)\n"
    "  --print-scenario write the imported scenario as YAML to stdout and stop\n"
    "  --dump-scenario FILE  write it to FILE, then simulate\n"
    "Fields with no effect on a step (addresses, ranks, checkpoint format, learning rate, ...)\n"
    "are listed on stderr as 'ignored: REASON'; unknown fields and values gridstep cannot model\n"
    "are errors (exit 2) at FILE:LINE, with a did-you-mean hint when a known name is close.\n"
    "\n"
    "examples:\n"
    "  gridstep sim scenarios/seed-70b-64xa100.yaml\n"
    "  gridstep sim --json scenarios/seed-7b-64gpu-25gbe.yaml | jq .step_time_s\n"
    "  gridstep sim --trace step.json scenarios/seed-7b-8xa100.yaml\n"
    "  gridstep sim --from-accelerate fsdp.yaml --model llama2-7b --cluster dgx-a100-80g\n"
    "  gridstep sim --from-megatron @launch.sh --cluster dgx-a100-80g --print-scenario\n"
    "  gridstep sim --from-torchtitan llama3_8b.toml --cluster dgx-h100 --nodes 1\n"
    "  gridstep sim --from-torchtitan 'llama3_70b.toml --parallelism.tensor_parallel_degree 4' --cluster\n"
    "    dgx-h100 --nodes 8\n";

static const char usage[] =
    "gridstep sim [--exact] [--mode analytic|flow] [--json] [--explain] [--calib FILE] [--trace FILE] [--stats] "
    "[--plot FILE.png|FILE.svg [--plot-ranks R,...]] [--plot-comm FILE.png|FILE.svg] "
    "(SCENARIO.yaml | (--from-accelerate FILE | --from-torchtitan FILE | --from-megatron ARGS|@FILE) --cluster C "
    "[--model M] "
    "[--nodes N] [--global-batch B] [--micro B] [--print-scenario | --dump-scenario FILE])";

/* --from-torchtitan "FILE [--section.key VALUE ...]" (or "--job.config_file FILE ..."): the words
 * split at blanks, the file and torchtitan's overrides after it. */
static gs_status sim_import_torchtitan(const char *arg, const gs_import_opts *io, gs_scenario *s, gs_diag *ignored,
                                       gs_error *err)
{
    enum { MAX_WORDS = 256 };
    char *copy = strdup(arg), *words[MAX_WORDS], *save = NULL;
    const char *path = NULL, *over[MAX_WORDS];
    size_t n = 0, nover = 0;
    if (!copy)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    for (char *w = strtok_r(copy, " \t\n", &save); w && n < MAX_WORDS; w = strtok_r(NULL, " \t\n", &save))
        words[n++] = w;
    for (size_t i = 0; i < n; i++) {
        if (!path && strncmp(words[i], "--", 2) != 0)
            path = words[i];
        else if (!strcmp(words[i], "--job.config_file") || !strcmp(words[i], "--job.config-file"))
            path = i + 1 < n ? words[++i] : NULL;
        else if (!strncmp(words[i], "--job.config_file=", 18))
            path = words[i] + 18;
        else
            over[nover++] = words[i];
    }
    gs_status rc = path ? gs_import_torchtitan_file(path, over, nover, io, s, ignored, err)
                        : gs_error_set(err, GS_ERR_INPUT,
                                       "--from-torchtitan: found no config file, expected \"FILE [--section.key VALUE "
                                       "...]\"");
    free(copy);
    return rc;
}

/* Reads the scenario of an imported launch configuration; prints what was ignored to stderr. */
static gs_status sim_import(const char *accelerate, const char *torchtitan, const char *megatron,
                            const gs_import_opts *io, gs_scenario *s, gs_error *err)
{
    gs_diag ignored;
    gs_diag_init(&ignored);
    gs_status rc;
    if (accelerate)
        rc = gs_import_accelerate_file(accelerate, io, s, &ignored, err);
    else if (torchtitan)
        rc = sim_import_torchtitan(torchtitan, io, s, &ignored, err);
    else if (megatron[0] == '@')
        rc = gs_import_megatron_file(megatron + 1, io, s, &ignored, err);
    else
        rc = gs_import_megatron_args(megatron, NULL, io, s, &ignored, err);
    for (size_t i = 0; rc == GS_OK && i < ignored.count; i++)
        fprintf(stderr, "gridstep sim: %s\n", ignored.warnings[i]);
    gs_diag_fini(&ignored);
    return rc;
}

static gs_status sim_write_scenario(const gs_scenario *s, const char *path, gs_error *err)
{
    gs_text t;
    gs_text_init(&t);
    gs_status rc = gs_scenario_write_yaml(s, &t, err);
    FILE *f = NULL;
    if (rc != GS_OK)
        goto out;
    if (!path) {
        fputs(gs_text_str(&t), stdout);
        goto out;
    }
    if (!(f = fopen(path, "w"))) {
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        goto out;
    }
    fputs(gs_text_str(&t), f);
    if (fclose(f) != 0)
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
out:
    gs_text_fini(&t);
    return rc;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* --stats: the run's sizes and the process's peak resident memory and time, one line to
 * stderr: bytes per event = (the backend's state + one gs_timing per event) / events; events
 * per second of the process's CPU time (user + system) and of wall time, build and report
 * included. */
static void print_stats(const gs_backend_stats *st, double wall_s)
{
    struct rusage ru;
    double rss_mib = 0, cpu_s = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        rss_mib = (double)ru.ru_maxrss / 1024.0; /* KiB */
        cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                (double)ru.ru_stime.tv_usec * 1e-6;
    }
    double ev = st->events ? (double)st->events : 1.0;
    uint64_t timing_bytes = st->events * (uint64_t)sizeof(gs_timing);
    fprintf(stderr,
            "gridstep: sim stats: %" PRIu64 " rank lists, %" PRIu64 " events (%" PRIu64 " collectives), %" PRIu64
            " tensors; event queue peak %" PRIu64 " entries (%" PRIu64 " B allocated); %.1f B per event (state %"
            PRIu64 " B + timings %" PRIu64 " B); peak RSS %.1f MiB; %.3f s, %.3f CPU-s; %.3g events per CPU-second, "
            "%.3g per second\n",
            st->rank_lists, st->events, st->collectives, st->tensors, st->queue_peak, st->queue_bytes,
            (double)(st->state_bytes + timing_bytes) / ev, st->state_bytes, timing_bytes, rss_mib, wall_s, cpu_s,
            cpu_s > 0 ? (double)st->events / cpu_s : 0.0, wall_s > 0 ? (double)st->events / wall_s : 0.0);
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
    json_object_set_new(doc, "host_issue_s", json_real(r->host_issue_s));
    json_object_set_new(doc, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
    json_object_set_new(doc, "gpu_bytes", json_integer((json_int_t)r->gpu_bytes));
    json_object_set_new(doc, "fits", json_boolean(r->peak_bytes <= r->gpu_bytes));
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
    double host_s = r->host_issue_s;
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES], c1[32], grid[96];
    gs_mesh_grid_text(m, grid, sizeof grid);
    printf("%s: %s on %" PRIu64 " x %s (%" PRIu64 " GPUs), grid %s, %s, %" PRIu64 " micro-batch%s of %" PRIu64 "\n",
           s->name, s->model.name, s->cluster.nodes, s->cluster.name, m->world, grid,
           gs_sharding_name(s->strategy.sharding), gs_scenario_microbatches(s),
           gs_scenario_microbatches(s) == 1 ? "" : "es", s->batch.micro_seqs);
    printf("  step time           %s\n", gs_fmt_seconds(r->step_time_s, b1, sizeof b1));
    printf("  tokens/s            %.0f global, %.1f per GPU\n", r->tokens_per_s, r->tokens_per_s_per_gpu);
    printf("  model TFLOP/s/GPU   %.1f   MFU %.1f%% of %s\n", r->tflops_per_gpu, 100 * r->mfu,
           gs_fmt_flops(r->peak_flops, b2, sizeof b2));
    printf("  HFU                 %.1f%% (every compute event's FLOPs, recompute included)\n", 100 * r->hfu);
    printf("  compute             %s busy on the critical rank %" PRIu64 "\n",
           gs_fmt_seconds(r->compute_s, b1, sizeof b1), r->critical_rank);
    /* context and expert parallelism's exchanges share the TP stream (engine/build_layer.c,
     * engine/build_moe.c) */
    const char *tp_name = m->cp > 1 && m->ep > 1 ? "TP, CP and EP" : m->cp > 1 ? "TP and CP" : m->ep > 1 ? "TP and EP" : "TP";
    static const struct { gs_dim d; const char *n; } dims[] = {{GS_DIM_DP, "DP/FSDP"}, {GS_DIM_TP, "TP"}, {GS_DIM_PP, "PP"}};
    for (int i = 0; i < 3; i++)
        printf("  %-19s %s communicating, %s exposed\n", dims[i].d == GS_DIM_TP ? tp_name : dims[i].n, gs_fmt_seconds(r->comm_s[dims[i].d], b1, sizeof b1),
               gs_fmt_seconds(r->exposed_s[dims[i].d], b3, sizeof b3));
    printf("  NCCL share          %.1f%% of the step\n", 100 * r->comm_share);
    printf("  bubble share        %.1f%% (neither computing nor communicating)\n", 100 * r->bubble_share);
    if (host_s > 0)
        printf("  host issue          %s (%.0f%% of the step): the busiest rank's host thread issuing its kernels "
               "and collectives\n", gs_fmt_seconds(host_s, b1, sizeof b1),
               r->step_time_s > 0 ? 100 * host_s / r->step_time_s : 0.0);
    printf("  peak memory         %s per rank of %s%s\n", gs_fmt_bytes(r->peak_bytes, b1, sizeof b1),
           gs_fmt_bytes(r->gpu_bytes, b4, sizeof b4), r->peak_bytes > r->gpu_bytes ? "  (DOES NOT FIT)" : "");
    printf("  events              %s simulated (%s) in %.2f s\n", gs_fmt_count(r->events, c1, sizeof c1),
           exact || s->nstragglers ? "every rank" : "one rank per pipeline stage", wall);
    for (size_t i = 0; i < r->warnings.count; i++)
        printf("warning: %s\n", r->warnings.warnings[i]);
}

/* Hand arithmetic next to the simulation, and why they differ (the simulation wins). */
static gs_status print_explain(const gs_scenario *s, const gs_mesh *m, const gs_report *r, gs_error *err)
{
    gs_ledger *l = NULL;
    gs_status rc = gs_ledger_create(s, m, &l, err);
    if (rc != GS_OK)
        return rc;
    gs_topo topo;
    gs_topo_init(&topo, &s->cluster);
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(m, r->critical_rank, c);
    const gs_ledger_rank *lr = &l->ranks[c[GS_DIM_PP]];
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], t1[32], t2[32], t3[32], t4[32];
    printf("\nexplain (hand arithmetic vs the simulation, critical rank %" PRIu64 ", stage %" PRIu64 "):\n",
           r->critical_rank, lr->stage);
    double hw_per_gpu = r->hardware_flops / (double)m->world;
    double eff = s->cluster.gpu.gemm_efficiency;
    double hand_compute = r->peak_flops > 0 ? hw_per_gpu / (r->peak_flops * eff) : 0;
    printf("  compute: %.3g FLOP per GPU (recompute included) at %s x %.2f (best-shape GEMM efficiency) = %s by "
           "hand;\n           simulated %s busy: GEMM shapes below the best tile/wave fit, memory-bound kernels "
           "(norms, activations, attention scores, rotary embedding, the loss's passes over the logits) and launch "
           "overhead add the rest\n",
           hw_per_gpu, gs_fmt_flops(r->peak_flops, b1, sizeof b1), eff, gs_fmt_seconds(hand_compute, t1, sizeof t1),
           gs_fmt_seconds(r->compute_s, t2, sizeof t2));
    static const struct { gs_dim d; const char *name; } dims[] = {{GS_DIM_DP, "DP/FSDP"}, {GS_DIM_TP, "TP"},
                                                                 {GS_DIM_PP, "PP"}};
    for (int i = 0; i < 3; i++) {
        gs_dim d = dims[i].d;
        uint64_t bytes = d == GS_DIM_DP ? lr->traffic[GS_TRAFFIC_DP_ALLGATHER] + lr->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER] +
                                              lr->traffic[GS_TRAFFIC_DP_ALLREDUCE]
                         : d == GS_DIM_TP ? lr->traffic[GS_TRAFFIC_TP]
                                          : lr->traffic[GS_TRAFFIC_PP];
        if (bytes == 0)
            continue;
        int net = gs_mesh_group_nodes(m, d, r->critical_rank) > 1;
        /* the seed's arithmetic: a rank's bytes through one NIC (a ring crosses each node boundary
         * once per channel, so the NIC carries what one rank sends), or through its own link */
        double bw = net ? topo.nic_bw : topo.intra_bw;
        double hand = (double)bytes / bw;
        printf("  %s: the ledger's %s sent per rank at %s (%s) = %s by hand;\n           simulated %s "
               "communicating, %s exposed (%s hidden behind compute)",
               dims[i].name, gs_fmt_bytes(bytes, b1, sizeof b1), gs_fmt_bw(bw, b2, sizeof b2),
               net ? "one NIC, achievable" : "the GPU's link as NCCL plans it",
               gs_fmt_seconds(hand, t1, sizeof t1), gs_fmt_seconds(r->comm_s[d], t2, sizeof t2),
               gs_fmt_seconds(r->exposed_s[d], t3, sizeof t3),
               gs_fmt_seconds(r->comm_s[d] - r->exposed_s[d], t4, sizeof t4));
        if (r->comm_s[d] < 0.8 * hand)
            printf(";\n           faster than by hand: NCCL's tuner picks a tree, NVLS or PAT algorithm "
                   "that keeps traffic on NVLink and stripes the rest over several NICs");
        else if (r->comm_s[d] > 1.25 * hand)
            printf(";\n           slower than by hand: per-call latency (%s calls of this size are latency-bound), "
                   "protocol overheads, or ranks waiting for their group",
                   d == GS_DIM_TP ? "TP's per-layer" : "small");
        printf("\n");
    }
    if (m->size[GS_DIM_PP] > 1)
        printf("  bubble: (p-1)/(m+p-1) = %.1f%% by hand for p=%" PRIu64 ", m=%" PRIu64 "; simulated %.1f%% of the step "
               "idle (uneven stages, communication and the embedding/head add to it)\n",
               100.0 * (double)(m->size[GS_DIM_PP] - 1) / (double)(gs_scenario_microbatches(s) + m->size[GS_DIM_PP] - 1),
               m->size[GS_DIM_PP], gs_scenario_microbatches(s), 100 * r->bubble_share);
    if (r->host_issue_s > 0) {
        printf("  host: the busiest rank's thread issues the step's kernels and collectives in %s (8 us a kernel on "
               "x86, 2.6x on Grace; %s) against the %s step: %s\n",
               gs_fmt_seconds(r->host_issue_s, t1, sizeof t1),
               s->strategy.cuda_graphs ? "a CUDA graph per layer pass" : s->strategy.compile ? "compiled kernels"
                                                                                            : "the framework's kernels",
               gs_fmt_seconds(r->step_time_s, t2, sizeof t2),
               r->host_issue_s > GS_HOST_BOUND_SHARE * r->step_time_s ? "host-bound, the GPU waits for the launches"
               : r->host_issue_s > 0.5 * r->step_time_s ? "close: short stretches of small kernels wait for it"
                                                          : "far ahead of the GPU, hidden");
    }
    gs_ledger_destroy(l);
    return GS_OK;
}

gs_status gs_cmd_sim(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"exact", no_argument, NULL, 'e'}, {"json", no_argument, NULL, 'j'},
        {"explain", no_argument, NULL, 'x'},
        {"calib", required_argument, NULL, 'c'},
        {"trace", required_argument, NULL, 't'}, {"mode", required_argument, NULL, 'm'},
        {"from-accelerate", required_argument, NULL, 'A'},
        {"from-megatron", required_argument, NULL, 'M'},
        {"from-torchtitan", required_argument, NULL, 'T'},
        {"model", required_argument, NULL, 'o'}, {"cluster", required_argument, NULL, 'C'},
        {"nodes", required_argument, NULL, 'n'}, {"global-batch", required_argument, NULL, 'g'},
        {"micro", required_argument, NULL, 'u'}, {"print-scenario", no_argument, NULL, 'p'},
        {"dump-scenario", required_argument, NULL, 'd'},
        {"plot", required_argument, NULL, 'P'}, {"plot-ranks", required_argument, NULL, 'R'},
        {"plot-comm", required_argument, NULL, 'K'},
        {"stats", no_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    int exact = 0, json = 0, explain = 0, print_scenario = 0, stats = 0, c;
    gs_backend_stats sizes;
    const char *from_accelerate = NULL, *from_megatron = NULL, *from_torchtitan = NULL, *dump = NULL;
    gs_import_opts io;
    uint64_t *count_dst;
    gs_import_opts_init(&io);
    gs_plot plot, plot_comm;
    const char *plot_path = NULL, *comm_path = NULL, *plot_ranks = NULL;
    const char *trace = NULL;
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': exact = 1; break;
        case 'x': explain = 1; break;
        case 'c': bo.calib = optarg; break;
        case 'j': json = 1; break;
        case 't': trace = optarg; break;
        case 's': stats = 1; break;
        case 'P': case 'K': {
            gs_status prc = gs_plot_init(c == 'P' ? &plot : &plot_comm, c == 'P' ? "--plot" : "--plot-comm", optarg, err);
            if (prc != GS_OK)
                return prc;
            *(c == 'P' ? &plot_path : &comm_path) = optarg;
            break;
        }
        case 'R': plot_ranks = optarg; break;
        case 'A': from_accelerate = optarg; break;
        case 'M': from_megatron = optarg; break;
        case 'T': from_torchtitan = optarg; break;
        case 'o': io.model = optarg; break;
        case 'C': io.cluster = optarg; break;
        case 'p': print_scenario = 1; break;
        case 'd': dump = optarg; break;
        case 'n':
        case 'g':
        case 'u':
        {
            /* bounds that keep nodes x GPUs per node and the batch far from 64-bit wrap */
            static const struct { char c; const char *name; uint64_t max; } counts[] = {
                {'n', "--nodes", UINT64_C(1) << 20}, {'g', "--global-batch", UINT64_C(1) << 40},
                {'u', "--micro", UINT64_C(1) << 32}};
            size_t k = c == 'n' ? 0 : c == 'g' ? 1 : 2;
            count_dst = c == 'n' ? &io.nodes : c == 'g' ? &io.global_seqs : &io.micro_seqs;
            if (gs_parse_count(optarg, count_dst) != 0 || *count_dst == 0 || *count_dst > counts[k].max)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "%s: found '%s', expected a positive integer of at most %llu\nusage: %s",
                                    counts[k].name, optarg, (unsigned long long)counts[k].max, usage);
            break;
        }
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
            return gs_cli_bad_option(argv[optind - 1], opts, "", usage, err);
        }
    }
    const char *path = NULL;
    gs_status rc;
    int importing = !!from_accelerate + !!from_megatron + !!from_torchtitan;
    if (importing > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "give one of --from-accelerate, --from-torchtitan and --from-megatron\nusage: %s", usage);
    if (importing) {
        if (optind < argc)
            return gs_error_set(err, GS_ERR_INPUT, "unexpected argument '%s' with --from-%s\nusage: %s", argv[optind],
                                from_accelerate ? "accelerate" : from_torchtitan ? "torchtitan" : "megatron", usage);
    } else {
        if (io.model || io.cluster || io.nodes || io.global_seqs || io.micro_seqs || print_scenario)
            return gs_error_set(err, GS_ERR_INPUT,
                                "--model, --cluster, --nodes, --global-batch, --micro and --print-scenario go with "
                                "--from-accelerate, --from-torchtitan or --from-megatron\nusage: %s",
                                usage);
        if ((rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err)) != GS_OK)
            return rc;
    }
    gs_scenario s;
    gs_mesh mesh;
    json_t *doc = NULL;
    gs_report rep;
    int have_rep = 0;
    FILE *tf = NULL;
    gs_schedule *sch = NULL;
    gs_timing **timing = NULL;
    double t0 = now_s();
    if (importing) {
        gs_diag warnings;
        if ((rc = sim_import(from_accelerate, from_torchtitan, from_megatron, &io, &s, err)) != GS_OK)
            goto out;
        if (print_scenario) {
            rc = sim_write_scenario(&s, NULL, err);
            goto out;
        }
        gs_diag_init(&warnings);
        rc = gs_scenario_mesh(&s, &mesh, &warnings, err);
        for (size_t i = 0; i < warnings.count; i++)
            fprintf(stderr, "gridstep: warning: %s: %s\n", s.path, warnings.warnings[i]);
        gs_diag_fini(&warnings);
        if (rc != GS_OK)
            goto out;
    } else if ((rc = gs_cli_load(path, &s, &mesh, err)) != GS_OK) {
        goto out;
    }
    gs_cli_calib_notes(bo.calib, &s);
    if (dump && (rc = sim_write_scenario(&s, dump, err)) != GS_OK)
        goto out;
    if (trace && !(tf = fopen(trace, "w"))) {
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", trace, strerror(errno));
        goto out;
    }
    if (plot_ranks && !plot_path) {
        rc = gs_error_set(err, GS_ERR_INPUT, "--plot-ranks needs --plot FILE\nusage: %s", usage);
        goto out;
    }
    memset(&sizes, 0, sizeof sizes);
    bo.stats = stats ? &sizes : NULL;
    if ((rc = gs_sim_scenario_timed(&s, &mesh, exact, &bo, &rep, tf, plot_path ? &sch : NULL,
                                     plot_path ? &timing : NULL, err)) != GS_OK)
        goto out;
    if (stats)
        print_stats(&sizes, now_s() - t0);
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
        if (explain)
            rc = print_explain(&s, &mesh, &rep, err);
    }
    fflush(stdout);
    if (rc == GS_OK && plot_path) {
        size_t lists[GS_PLOT_MAX_RANKS], nlists = 0;
        if ((rc = gs_plot_pick_ranks(sch, plot_ranks, lists, &nlists, err)) == GS_OK)
            rc = gs_plot_timeline(&plot, &s, sch, timing, lists, nlists, rep.step_time_s, err);
    }
    if (rc == GS_OK && comm_path)
        rc = gs_plot_comm(&plot_comm, &s, &rep, err);
    if (rc == GS_OK && rep.peak_bytes > rep.gpu_bytes) {
        char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES];
        rc = gs_error_set(err, GS_ERR_RUNTIME,
                          "the step does not fit: peak %s per rank > %s of GPU memory; the report above is the "
                          "step as if memory were unlimited (gridstep mem shows the ledger, gridstep diagnose the "
                          "fixes)",
                          gs_fmt_bytes(rep.peak_bytes, b1, sizeof b1), gs_fmt_bytes(rep.gpu_bytes, b2, sizeof b2));
    }
out:
    gs_sim_timed_free(sch, timing);
    if (tf)
        fclose(tf);
    if (have_rep)
        gs_report_fini(&rep);
    json_decref(doc);
    return rc;
}
