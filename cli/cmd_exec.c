/* `gridstep exec` and `gridstep compare`: run the scenario's schedule on a driver (real kernels,
 * real collectives, every event measured) and report the step as the sim does; compare the
 * measured step with the simulated one, per class of event. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/mpi_exec.h"
#include "cli/progress.h"
#include "engine/report.h"
#include "engine/units.h"
#include "exec/dispatch_gaps.h"
#include "exec/exec.h"
#include "sim/sim.h"

const char gs_cmd_exec_help[] =
    "Builds the scenario's schedule for every rank and runs it: a host thread per rank issues its\n"
    "events to one worker per stream (compute, dp, tp, pp, copy), so communication overlaps\n"
    "compute; dependencies are waited on, never reordered. The model that runs is real: a\n"
    "Llama-style decoder (embedding, RMSNorm, causal GQA attention with RoPE, SwiGLU, LM head,\n"
    "cross-entropy, AdamW) in fp32 on seeded synthetic tokens, sharded as the schedule says (FSDP\n"
    "units gathered and reduce-scattered, Megatron TP, pipeline sends, recompute). For the same\n"
    "global batch and seed every grid and strategy gives the single-rank run's losses and\n"
    "parameters (tests/check_exec). The scenario's model keys pick the block: norm layernorm,\n"
    "mlp gelu, bias true and pos learned give a GPT block (tanh GELU; o_proj's and fc2's biases\n"
    "added once after the TP reduction), in any mix with the Llama ones. Tied embeddings: the\n"
    "head multiplies by the embedding's vocabulary slice; under a pipeline the last stage keeps a\n"
    "copy, and the two stages exchange their gradients before the optimizer (Megatron's\n"
    "embedding group). A pipeline send followed on its stream by a receive goes out with it as\n"
    "one operation (NCCL: one group), so neighbours that send to each other first do not\n"
    "deadlock where sends wait for their receivers; on such a driver (cuda) exec also issues a\n"
    "receive ahead of its place where the step would otherwise wait in a cycle (the interleaved\n"
    "pipeline; Megatron posts the next forward's receive with the current sends), and reports\n"
    "how many. Dropout (model.dropout, attention_dropout, hidden_dropout) draws its masks from\n"
    "global indices (kernels/dropout.h), so every grid draws the single rank's. tp_comm_overlap\n"
    "runs Transformer Engine's overlaps chunk by chunk: the QKV and MLP-up forward (and the\n"
    "out-proj and MLP-down backward) GEMM each chunk as the ring all-gather brings it, the\n"
    "out-proj and MLP-down forward in 4 row splits each reduce-scattered as it is done, the\n"
    "backward's dgrad beside the input's re-gather and wgrad beside dgrad's reduce-scatter; the\n"
    "step gives the unsplit step's bits.\n"
    "\n"
    "Prints the loss and measured time of every step, then the report of the last step with the\n"
    "same fields as `gridstep sim` (step time, tokens/s, MFU against the scenario's GPU, exposed\n"
    "communication, bubble). A scenario whose ranks need more memory than MemAvailable (the memory\n"
    "ledger's peaks, fp32) is refused before anything is allocated.\n"
    "\n"
    "options:\n"
    "  --driver D       host (default: CPU threads, shared-memory collectives) or cuda: one GPU per\n"
    "                   rank in this process (a thread per GPU), a CUDA stream per schedule stream,\n"
    "                   cuBLASLt GEMMs (precision: bf16 scenarios take bf16 inputs with fp32\n"
    "                   accumulation, the others fp32; GRIDSTEP_CUDA_GEMM=fp32|tf32|bf16 overrides;\n"
    "                   the host driver stays fp32, and GRIDSTEP_HOST_GEMM=bf16 rounds its GEMM\n"
    "                   inputs alike),\n"
    "                   kernels/cuda (attention: cuBLAS batched GEMMs with softmax/dS row passes;\n"
    "                   with flash_attention, as by default, P recomputed from each row's lse in\n"
    "                   capped scratch instead of kept; calls with attention dropout, or past\n"
    "                   the cap (over 8192 tokens with flash), run FlashAttention-2 kernels, or\n"
    "                   exact per-row kernels without flash_attention;\n"
    "                   GRIDSTEP_CUDA_ATTENTION=kernels selects those kernels always, =gemm the\n"
    "                   GEMMs always),\n"
    "                   NCCL communicators per mesh dimension, NVTX ranges named\n"
    "                   after the events. cuda is the module gridstep-cuda.so (built when configure\n"
    "                   finds CUDA and NCCL), searched in $GRIDSTEP_MODULE_PATH, next to the\n"
    "                   binary, then the install directory; without it, its libraries (libcudart,\n"
    "                   libcublas(Lt), libnccl) or a GPU, exec says which and exits 1. A scenario\n"
    "                   needing more GPUs than the machine has, or a rank whose ledger peak\n"
    "                   exceeds its GPU's free memory, is refused with the numbers. Under mpirun or\n"
    "                   srun: one rank per process, on the GPU of its local rank on its host, the\n"
    "                   NCCL id broadcast from rank 0 over MPI (see below)\n"
    "  --steps N        optimizer steps (default 1)\n"
    "  --seed S         data and init seed (default 1234)\n"
    "  --lr X           AdamW learning rate (default 0.001)\n"
    "  --adam-eps X     AdamW epsilon (default 1e-8; tests/check_exec's contract uses 1e-6)\n"
    "  --timeout S      every blocking wait gives up after S seconds (default 60); then every rank\n"
    "                   stops with an error naming the event (cuda: a stream with no progress for\n"
    "                   S seconds or an NCCL error aborts the communicators). host: the message\n"
    "                   follows the waits (rank A waits for B, which waits for C, ...) to the rank\n"
    "                   that waits for no other: the one stuck in its own work, or dead\n"
    "  --json           one JSON document: sim's keys (step_time_s, tokens_per_s, ...) for the last\n"
    "                   step, plus driver, gemm (the GEMMs' math), steps, loss [per step], step_s\n"
    "                   [per step], p2p_hoisted\n"
    "                   (receives issued ahead of their place; 0 unless sends wait, see below),\n"
    "                   dispatch_gap_s, dispatch_gap_share, dispatch_gap_rank (the compute\n"
    "                   stream's idle time with its next event ready, waiting to be issued: the\n"
    "                   worst rank's sum, and its share of the step)\n"
    "  --trace FILE     Chrome trace JSON of the last step (measured times)\n"
    "  --quiet          no progress on standard error (by default after each step: steps done,\n"
    "                   their share, the loss and the time left at that pace; on a terminal one\n"
    "                   line, in a log a line every 5 s, GRIDSTEP_PROGRESS_S)\n"
    "  --load DIR       start from a sharded checkpoint (any grid of the same model: pieces are\n"
    "                   matched by element range; Adam's step continues; under zero1 or\n"
    "                   zero2 every rank reads the whole parameters and its slice's moments)\n"
    "  --save DIR       after the last step, write a sharded checkpoint (one safetensors file per\n"
    "                   rank + index.json, parameters and Adam m, v; replaced crash-safely)\n"
    "  --save-every N   with --save: also save after every N steps\n"
    "  --save-full FILE after the last step, write the full parameters (gathered from every rank,\n"
    "                   DP replicas once) as one plain safetensors file with HF Llama names\n"
    "                   (atomic: FILE is the old file or the new one)\n"
    "  --fail-event E --fail-rank R\n"
    "                   test hook: event E (as `gridstep schedule --format list` names it) fails\n"
    "                   on rank R\n"
    "\n"
    "Under mpirun or srun (gridstep built with MPI: configure --with-mpi, default when found) exec\n"
    "runs one rank per process; the process count must be the scenario's rank count (else exit 2,\n"
    "said by rank 0), and every process must run the same scenario with the same options (the\n"
    "model, grid, cluster size, strategy, batch, --seed, --lr, --adam-eps are compared first;\n"
    "exit 2 naming the first that differs). The host driver's collectives and sends go over MPI\n"
    "(MPI_THREAD_MULTIPLE, sums in ascending rank order: the one-process run's losses, bit for\n"
    "bit). Each step starts with a barrier and each process's clock zero; the ranks' losses,\n"
    "timings and errors are then gathered, so rank 0 prints exactly what one process prints and\n"
    "the others print nothing. A failure on any rank stops every process; rank 0 names the rank\n"
    "and the event, each other process prints one line (\"rank R of N: the run failed; rank 0\n"
    "reports the error\", \"the save\" for a save), and every process exits 1 (2 for bad input).\n"
    "--load works there (each process reads its rank's pieces). --save writes the same files as one\n"
    "process: rank 0 creates DIR.tmp-PID (its PID), each process writes its rank's file into it,\n"
    "rank 0 gathers what each wrote, checks the pieces tile every tensor, writes index.json and\n"
    "swaps DIR in; a failure on any rank fails the save on every rank and leaves DIR as it was.\n"
    "DIR must be on a filesystem every process sees (multi-host: a shared one); a save killed\n"
    "mid-way leaves DIR.tmp-PID, removed by the next save whose rank 0 finds that PID gone on its\n"
    "host. --save-full sends each rank's parameters to rank 0, which alone holds the full model\n"
    "and writes FILE. --json adds processes [{rank, host, local_rank, local_procs}]: each rank's\n"
    "host (MPI_Get_processor_name) and place among that host's processes, the cuda driver's\n"
    "device; GRIDSTEP_HOST=NAME in a process's environment stands in for its host name, to\n"
    "rehearse a multi-host layout on one machine.\n"
    "Without MPI built in, exec under a launcher of several processes exits 2\n"
    "saying how to build it in. Example (Open MPI):\n"
    "  mpirun -np 4 gridstep exec --steps 3 dp2-tp2.yaml\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM (what Slurm and mpirun send at a time limit or a preemption) stops\n"
    "the run: the current step is aborted on every rank, a checkpoint being written is finished\n"
    "first, and the exit status is 1 with \"interrupted after step N\" (and the last checkpoint's\n"
    "step with --save). Under mpirun and srun the launcher passes SIGTERM on; Open MPI's mpirun\n"
    "kills 1 s later unless given --mca odls_base_sigkill_timeout 10.\n"
    "Test hook: GRIDSTEP_FAULT=fail|stall|die:RANK:EVENT makes that event fail, hang, or kill the\n"
    "rank; the others stop within --timeout naming it. EVENT save:PHASE hits a save instead: fail\n"
    "at tmp-dir, file-written (RANK's file) or full-pieces (RANK's pieces, --save-full across\n"
    "processes, RANK not 0), or die (SIGKILL of RANK's process) at any step of\n"
    "exec/checkpoint.h's protocol (tmp-dir, file-written, files-synced, index-written, old-moved,\n"
    "new-in-place, old-removed, full-written, full-renamed; all but file-written are rank 0's) or\n"
    "at full-pieces.\n"
    "GRIDSTEP_HOST_P2P=rendezvous makes the host driver's sends wait until their receiver has\n"
    "taken the message, as NCCL's (blocking for the GPU) do: a p2p order that would deadlock on GPUs\n"
    "then times out on the CPU naming the cycle (default eager; one process only). Then, as on the\n"
    "cuda driver, exec plans its groups for such sends (receives issued ahead of their place).\n"
    "GRIDSTEP_P2P_GROUPS=0 issues every send and receive alone (to see that deadlock).\n"
    "\n"
    "examples:\n"
    "  gridstep exec --steps 3 scenarios/tiny-llama-2x2x2.yaml\n"
    "  gridstep exec --json --trace step.json tests/exec/dp2-pp2-tp2.yaml\n";

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

const char gs_cmd_exec_usage[] =
    "gridstep exec [--driver host|cuda] [--steps N] [--seed S] [--lr X] [--adam-eps X] [--timeout S] [--json] "
    "[--trace FILE] [--load DIR] [--save DIR [--save-every N]] [--save-full FILE] [--quiet] SCENARIO.yaml";
const char gs_cmd_compare_usage[] =
    "gridstep compare [--driver host|cuda] [--steps N] [--calib FILE] [--mode analytic|flow] [--json] [--quiet] "
    "SCENARIO.yaml";

static gs_status parse_u64(const char *opt, const char *arg, uint64_t *out, gs_error *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || *end || arg[0] == '-' || v == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a positive integer", opt, arg);
    *out = v;
    return GS_OK;
}

static gs_status parse_pos(const char *opt, const char *arg, double *out, gs_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || *end || !(v > 0))
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a positive number", opt, arg);
    *out = v;
    return GS_OK;
}

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

/* The test hook GRIDSTEP_FAULT=KIND:RANK:EVENT (KIND fail, stall or die); NULL or "": none. */
static gs_status parse_fault(const char *spec, gs_exec_opts *o, gs_error *err)
{
    if (!spec || !*spec)
        return GS_OK;
    static const struct { const char *name; gs_fault_kind kind; } kinds[] = {
        {"fail:", GS_FAULT_FAIL}, {"stall:", GS_FAULT_STALL}, {"die:", GS_FAULT_DIE}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].name);
        if (strncmp(spec, kinds[i].name, n) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long r = strtoull(spec + n, &end, 10);
        if (errno || end == spec + n || spec[n] == '-' || *end != ':' || !end[1])
            break;
        o->fail_kind = kinds[i].kind;
        o->fail_rank = r;
        o->fail_event = end + 1;
        return GS_OK;
    }
    return gs_error_set(err, GS_ERR_INPUT, "GRIDSTEP_FAULT: found '%s', expected fail|stall|die:RANK:EVENT", spec);
}

typedef struct run_args {
    const char *path, *trace, *driver, *save, *load, *calib, *save_full;
    uint64_t steps, save_every; /* save_every: 0 = only after the last step */
    int json;
    int quiet; /* no progress on standard error */
    int flow; /* compare: the sim in flow mode */
    gs_exec_opts o;
} run_args;

static gs_status parse(int argc, char **argv, int compare, run_args *a, gs_error *err)
{
    static const struct option opts[] = {
        {"driver", required_argument, NULL, 'd'}, {"steps", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},         {"trace", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},   {"lr", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 'T'}, {"fail-event", required_argument, NULL, 'F'},
        {"fail-rank", required_argument, NULL, 'R'}, {"save", required_argument, NULL, 'S'},
        {"load", required_argument, NULL, 'L'},       {"calib", required_argument, NULL, 'C'},
        {"adam-eps", required_argument, NULL, 'A'},   {"save-every", required_argument, NULL, 'E'},
        {"save-full", required_argument, NULL, 'U'}, {"mode", required_argument, NULL, 'M'},
        {"quiet", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    const char *usage = compare ? gs_cmd_compare_usage : gs_cmd_exec_usage;
    memset(a, 0, sizeof *a);
    gs_exec_opts_defaults(&a->o);
    a->steps = compare ? 2 : 1;
    a->driver = "host";
    int c;
    gs_status rc = GS_OK;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && rc == GS_OK) {
        double x;
        switch (c) {
        case 'd': a->driver = optarg; break;
        case 'n': rc = parse_u64("--steps", optarg, &a->steps, err); break;
        case 'j': a->json = 1; break;
        case 'q': a->quiet = 1; break;
        case 't':
            if (compare)
                goto bad;
            a->trace = optarg;
            break;
        case 's': rc = parse_u64("--seed", optarg, &a->o.train.seed, err); break;
        case 'S':
        case 'L':
            if (compare)
                goto bad;
            if (c == 'S')
                a->save = optarg;
            else
                a->load = optarg;
            break;
        case 'A':
            if ((rc = parse_pos("--adam-eps", optarg, &x, err)) == GS_OK)
                a->o.train.eps = (float)x;
            break;
        case 'E':
            if (compare)
                goto bad;
            rc = parse_u64("--save-every", optarg, &a->save_every, err);
            break;
        case 'U':
            if (compare)
                goto bad;
            a->save_full = optarg;
            break;
        case 'l':
            if ((rc = parse_pos("--lr", optarg, &x, err)) == GS_OK)
                a->o.train.lr = (float)x;
            break;
        case 'T': rc = parse_pos("--timeout", optarg, &a->o.timeout_s, err); break;
        case 'F': a->o.fail_event = optarg; break;
        case 'C':
            if (!compare)
                goto bad;
            a->calib = optarg;
            break;
        case 'M':
            if (!compare)
                goto bad;
            if (strcmp(optarg, "analytic") == 0 || strcmp(optarg, "flow") == 0)
                a->flow = strcmp(optarg, "flow") == 0;
            else
                rc = gs_error_set(err, GS_ERR_INPUT, "--mode: found '%s', expected analytic or flow\nusage: %s",
                                  optarg, usage);
            break;
        case 'R': {
            char *end;
            errno = 0;
            a->o.fail_rank = strtoull(optarg, &end, 10);
            if (errno || *end || optarg[0] == '-')
                rc = gs_error_set(err, GS_ERR_INPUT, "--fail-rank: found '%s', expected a rank", optarg);
            break;
        }
        default:
        bad:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (rc != GS_OK)
        return rc;
    if (a->save_every && !a->save)
        return gs_error_set(err, GS_ERR_INPUT, "--save-every needs --save DIR\nusage: %s", usage);
    if (!compare && (rc = parse_fault(getenv("GRIDSTEP_FAULT"), &a->o, err)) != GS_OK)
        return rc;
    if ((rc = gs_driver_load(a->driver, &a->o.driver, err)) != GS_OK)
        return rc;
    return gs_cli_one_positional(argc, argv, optind, usage, &a->path, err);
}

/* ---- under mpirun / srun --------------------------------------------------------------------------
 * Started by a launcher, exec and compare run one rank per process (exec/boot.h over MPI,
 * cli/mpi_exec.c); every process ends with the same outcome and exit status, rank 0 prints the
 * output and the error, the others one line on failure. */

static gs_status launch_begin(int argc, char **argv, int compare, run_args *a, gs_mpi_exec *mx, int *prank,
                              gs_error *err)
{
    gs_status rc = gs_mpi_exec_begin(mx, prank, err);
    if (*prank != 0 && !freopen("/dev/null", "w", stdout))
        rc = gs_error_set(err, GS_ERR_IO, "rank %d: cannot quiet standard output", *prank);
    if (rc == GS_OK)
        rc = parse(argc, argv, compare, a, err);
    if (rc == GS_OK && mx->launched) {
        if (strcmp(a->o.driver->name, "host") == 0 && !mx->threads_ok)
            rc = gs_mpi_exec_threads_error(mx, err);
        a->o.boot = &mx->boot;
    }
    return rc;
}

/* Every process's outcome agreed: every process returns it (the same exit status). Launched, the
 * error is printed by gs_mpi_exec_end, before the processes part (the first process to exit
 * non-zero makes mpirun kill the others, so rank 0's message must be out first): rank 0 the
 * error, the others one line naming `what` ("the save", "the run"); main's copy then goes to a
 * quiet stderr, as does everything of a process other than rank 0 when MPI is not there (rank 0
 * says why). */
static gs_status launch_end(gs_mpi_exec *mx, int prank, const char *cmd, const char *what, gs_status rc,
                            gs_error *err)
{
    int launched = mx->launched;
    rc = gs_mpi_exec_agree(mx, rc, what, err);
    rc = gs_mpi_exec_end(mx, cmd, rc, err);
    if (!launched && prank != 0 && rc != GS_OK && !freopen("/dev/null", "w", stderr))
        rc = GS_ERR_IO;
    return rc;
}

/* [{rank, host, local_rank, local_procs}] of a launched run, one per process (= rank). */
static json_t *processes_json(const gs_mpi_exec *mx)
{
    json_t *arr = json_array();
    int lr, lp;
    const char *h;
    for (int p = 0; (h = gs_mpi_exec_host(mx, p, &lr, &lp)) != NULL; p++) {
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(p));
        json_object_set_new(o, "host", json_string(h));
        json_object_set_new(o, "local_rank", json_integer(lr));
        json_object_set_new(o, "local_procs", json_integer(lp));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* ---- Ctrl-C and SIGTERM ---------------------------------------------------------------------------
 * The handler only records the signal. SIGINT and SIGTERM are blocked in every thread but a
 * watcher, which turns
 * the flag into an abort of the exec session (so a long step's waits return at once); the step loop
 * checks the flag between steps. Checkpoint writes happen on the main thread, which never takes
 * the signal, so a save is never cut short: it completes or fails as a whole. */

/* The signal that stopped the run (0: none). Lock-free atomic: set by the handler, read by the
 * watcher thread (a volatile sig_atomic_t is only defined for a handler and the thread it
 * interrupted). */
static atomic_int interrupted;

static void on_sigint(int sig)
{
    int saved = errno;
    atomic_store(&interrupted, sig);
    errno = saved;
}

/* The signals that stop a run: Ctrl-C, and the SIGTERM a batch system or launcher sends first. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

typedef struct sigint_watch {
    gs_exec_session *x;
    pthread_mutex_t mu;
    int done; /* guarded by mu */
    pthread_t th;
    int started;
    sigset_t old_mask; /* the main thread's mask before the signals were blocked */
    struct sigaction old_int, old_term;
} sigint_watch;

static void *watch_main(void *arg)
{
    sigint_watch *w = arg;
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    const struct timespec nap = {0, 20 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int done = w->done;
        pthread_mutex_unlock(&w->mu);
        if (done)
            break;
        int sig = atomic_load(&interrupted);
        if (sig) {
            gs_exec_session_abort(w->x, sig == SIGTERM ? "interrupted (SIGTERM)" : "interrupted (SIGINT)");
            break;
        }
        nanosleep(&nap, NULL);
    }
    return NULL;
}

/* Blocks SIGINT and SIGTERM in this thread (and so in every thread created after), installs the
 * handler. */
static void sigint_block(sigint_watch *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    atomic_store(&interrupted, 0);
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, &w->old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &w->old_int);
    sigaction(SIGTERM, &sa, &w->old_term);
}

static void sigint_watch_start(sigint_watch *w, gs_exec_session *x)
{
    w->x = x;
    w->started = pthread_create(&w->th, NULL, watch_main, w) == 0;
}

static void sigint_restore(sigint_watch *w)
{
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
    }
    sigaction(SIGINT, &w->old_int, NULL);
    sigaction(SIGTERM, &w->old_term, NULL);
    pthread_sigmask(SIG_SETMASK, &w->old_mask, NULL);
    pthread_mutex_destroy(&w->mu);
}

/* What exec saves while it runs: --save DIR every save_every steps and after the last. */
typedef struct save_plan {
    const char *dir;
    uint64_t every;
    uint64_t saved_step; /* the optimizer step of the last checkpoint written; 0: none */
    int failed;          /* run_steps returned a save's failure */
} save_plan;

/* done: the last optimizer step completed. */
static gs_status interrupted_error(const save_plan *sp, uint64_t done, gs_error *err)
{
    if (sp && sp->dir && sp->saved_step)
        return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64 "; last checkpoint %s (step %" PRIu64
                            ") is intact", done, sp->dir, sp->saved_step);
    if (sp && sp->dir)
        return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64 "; no checkpoint written to %s",
                            done, sp->dir);
    return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64, done);
}

/* The steps to run: losses and step times go into the arrays (steps entries each). */
typedef struct step_loop {
    uint64_t steps;
    double *loss, *secs;
    save_plan *sp;       /* periodic saves; may be NULL */
    int across;          /* 1: one rank per process (mpirun, srun) */
    gs_progress *prog;   /* steps done, with the last step's loss and time */
} step_loop;

/* Runs the steps; *done gets the steps completed. */
static gs_status run_steps(gs_exec_session *x, const step_loop *l, uint64_t *done, gs_error *err)
{
    uint64_t steps = l->steps;
    double *loss = l->loss, *secs = l->secs;
    save_plan *sp = l->sp;
    int across = l->across;
    *done = 0;
    for (uint64_t i = 0; i < steps; i++) {
        /* across processes the signal reaches them at different times: a process that skipped
         * the step would leave the others in its collectives, so the step runs and the abort
         * (the watcher's, announced to every process) fails it everywhere */
        if (atomic_load(&interrupted) && !across)
            return interrupted_error(sp, gs_train_step(gs_exec_session_train(x)), err);
        gs_status rc = gs_exec_session_step(x, &loss[i], &secs[i], NULL, err);
        if (rc != GS_OK && atomic_load(&interrupted)) {
            /* the abort undid nothing: the failed step's state is torn, the checkpoint is not */
            return interrupted_error(sp, gs_train_step(gs_exec_session_train(x)) - 1, err);
        }
        if (rc != GS_OK)
            return rc;
        char what[96];
        snprintf(what, sizeof what, "loss %.6f, last step %.3f s", loss[i], secs[i]);
        gs_progress_update(l->prog, i + 1, steps, what);
        *done = i + 1;
        if (sp && sp->dir && (i + 1 == steps || (sp->every && (i + 1) % sp->every == 0))) {
            if ((rc = gs_exec_session_save(x, sp->dir, err)) != GS_OK) {
                sp->failed = 1;
                return rc;
            }
            sp->saved_step = gs_train_step(gs_exec_session_train(x));
        }
    }
    return GS_OK;
}

gs_status gs_cmd_exec(int argc, char **argv, gs_error *err)
{
    run_args a;
    gs_mpi_exec mx;
    int prank = 0;
    gs_status rc = launch_begin(argc, argv, 0, &a, &mx, &prank, err);
    if (rc != GS_OK)
        return launch_end(&mx, prank, "exec", NULL, rc, err);
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x = NULL;
    double *loss = NULL, *secs = NULL;
    int save_failed = 0; /* the failure was a save's (--save, --save-every, --save-full) */
    gs_report rep;
    int have_rep = 0;
    json_t *doc = NULL;
    FILE *tf = NULL;
    sigint_watch watch;
    sigint_block(&watch);
    if ((rc = gs_cli_load(a.path, &s, &mesh, err)) != GS_OK)
        goto out;
    loss = calloc(a.steps, sizeof *loss);
    secs = calloc(a.steps, sizeof *secs);
    if (!loss || !secs) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = gs_exec_session_create(&s, &mesh, &a.o, &x, err)) != GS_OK)
        goto out;
    if (a.load && (rc = gs_exec_session_load(x, a.load, err)) != GS_OK)
        goto out;
    sigint_watch_start(&watch, x);
    uint64_t first = gs_train_step(gs_exec_session_train(x)) + 1; /* the first step this run takes */
    save_plan sp = {a.save, a.save_every, 0, 0};
    uint64_t done = 0;
    gs_progress prog;
    gs_progress_init(&prog, "gridstep exec", "steps", !a.quiet && prank == 0);
    step_loop loop = {a.steps, loss, secs, &sp, mx.launched, &prog};
    rc = run_steps(x, &loop, &done, err);
    gs_progress_end(&prog);
    if (rc != GS_OK) {
        save_failed = sp.failed;
        goto out;
    }
    if (a.save_full && (rc = gs_exec_session_save_full(x, a.save_full, err)) != GS_OK) {
        save_failed = 1;
        goto out;
    }
    if ((rc = gs_exec_session_report(x, &rep, err)) != GS_OK)
        goto out;
    have_rep = 1;
    gs_dispatch_gaps gaps;
    gs_dispatch_gaps_step(gs_exec_session_schedule(x), gs_exec_session_timing(x), &gaps);
    if (a.trace) {
        if (!(tf = fopen(a.trace, "w"))) {
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", a.trace, strerror(errno));
            goto out;
        }
        if ((rc = gs_exec_session_trace(x, tf, err)) != GS_OK)
            goto out;
        int bad = fclose(tf) != 0;
        tf = NULL;
        if (bad) {
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", a.trace, strerror(errno));
            goto out;
        }
    }
    if (a.json) {
        doc = json_object();
        json_object_set_new(doc, "scenario", json_string(s.name));
        json_object_set_new(doc, "driver", json_string(a.o.driver->name));
        json_object_set_new(doc, "gemm", json_string(gs_exec_session_gemm_math(x)));
        json_object_set_new(doc, "steps", json_integer((json_int_t)a.steps));
        json_object_set_new(doc, "first_step", json_integer((json_int_t)first));
        json_t *jl = json_array(), *js = json_array();
        for (uint64_t i = 0; i < a.steps; i++) {
            json_array_append_new(jl, json_real(loss[i]));
            json_array_append_new(js, json_real(secs[i]));
        }
        json_object_set_new(doc, "loss", jl);
        json_object_set_new(doc, "step_s", js);
        if (mx.launched) /* where each rank ran: its process's host and place on it */
            json_object_set_new(doc, "processes", processes_json(&mx));
        put_report(doc, &rep);
        json_object_set_new(doc, "dispatch_gap_s", json_real(gaps.gap_s));
        json_object_set_new(doc, "dispatch_gap_share", json_real(rep.step_time_s > 0 ? gaps.gap_s / rep.step_time_s : 0));
        json_object_set_new(doc, "dispatch_gap_rank", json_integer((json_int_t)gaps.rank));
        json_object_set_new(doc, "p2p_hoisted",
                            json_integer((json_int_t)gs_train_p2p_hoisted(gs_exec_session_train(x))));
        rc = gs_cli_json_print(doc, err);
    } else {
        printf("%s: %" PRIu64 " ranks (" GS_GRID_FMT ", %s) on the %s driver, fp32 "
               "(GEMMs: %s)\n",
               s.name, mesh.world, mesh.size[GS_DIM_DP], mesh.size[GS_DIM_PP], mesh.size[GS_DIM_TP],
               gs_sharding_name(s.strategy.sharding), a.o.driver->name, gs_exec_session_gemm_math(x));
        printf("  step  loss        time\n");
        for (uint64_t i = 0; i < a.steps; i++)
            printf("  %4" PRIu64 "  %.6f  %.4f s\n", first + i, loss[i], secs[i]);
        print_report(&rep);
        char gb[GS_FMT_BYTES], lb[GS_FMT_BYTES];
        printf("  dispatch gaps       %s on rank %" PRIu64 "'s compute stream (%.1f%% of the step; %zu events "
               "started after they were ready, the longest wait %s)\n",
               gs_fmt_seconds(gaps.gap_s, gb, sizeof gb), gaps.rank,
               rep.step_time_s > 0 ? 100 * gaps.gap_s / rep.step_time_s : 0.0, gaps.gaps,
               gs_fmt_seconds(gaps.largest_s, lb, sizeof lb));
        size_t hoisted = gs_train_p2p_hoisted(gs_exec_session_train(x));
        if (hoisted)
            printf("  p2p groups          %zu receives per step issued ahead of their place (the %s driver's sends "
                   "wait for their receivers)\n", hoisted, a.o.driver->name);
    }
out:
    sigint_restore(&watch);
    if (tf)
        fclose(tf);
    if (have_rep)
        gs_report_fini(&rep);
    json_decref(doc);
    gs_exec_session_destroy(x);
    free(loss);
    free(secs);
    return launch_end(&mx, prank, "exec", save_failed ? "the save" : "the run", rc, err);
}

/* ---- compare -------------------------------------------------------------------------------------- */

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

gs_status gs_cmd_compare(int argc, char **argv, gs_error *err)
{
    run_args a;
    gs_mpi_exec mx;
    int prank = 0;
    gs_status rc = launch_begin(argc, argv, 1, &a, &mx, &prank, err);
    if (rc != GS_OK)
        return launch_end(&mx, prank, "compare", NULL, rc, err);
    gs_scenario s;
    gs_mesh mesh;
    gs_exec_session *x = NULL;
    double *loss = NULL, *secs = NULL;
    uint64_t done = 0;
    gs_report srep, erep;
    int have_s = 0, have_e = 0;
    void *sim_state = NULL;
    gs_timing **stime = NULL;
    const gs_schedule *sch = NULL;
    json_t *doc = NULL;
    gs_cli_table tab;
    gs_cli_table_init(&tab, 4);
    if ((rc = gs_cli_load(a.path, &s, &mesh, err)) != GS_OK)
        goto out;
    loss = calloc(a.steps, sizeof *loss);
    secs = calloc(a.steps, sizeof *secs);
    if (!loss || !secs) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    gs_progress prog;
    gs_progress_init(&prog, "gridstep compare", "exec steps", !a.quiet && prank == 0);
    step_loop loop = {a.steps, loss, secs, NULL, mx.launched, &prog};
    if ((rc = gs_exec_session_create(&s, &mesh, &a.o, &x, err)) == GS_OK)
        rc = run_steps(x, &loop, &done, err);
    gs_progress_end(&prog);
    if (rc != GS_OK || (rc = gs_exec_session_report(x, &erep, err)) != GS_OK)
        goto out;
    have_e = 1;
    sch = gs_exec_session_schedule(x);
    if (!(stime = calloc(sch->nranks, sizeof *stime))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < sch->nranks; i++)
        if (!(stime[i] = calloc(sch->ranks[i].nevents + 1, sizeof *stime[i]))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
            goto out;
        }
    double sim_c[NCLASS] = {0}, def_c[NCLASS] = {0}, ex_c[NCLASS] = {0};
    int seen[NCLASS] = {0};
    double def_step = 0;
    /* the presets' sim (before), then the calibrated one (after) when there is a file */
    gs_cli_calib_notes(a.calib, &s);
    if (s.strategy.cross_entropy == GS_XENT_UNFUSED)
        fprintf(stderr, "gridstep: compare: strategy.cross_entropy is unfused: the sim charges the framework's "
                        "passes over the logits (%" PRIu64 " B per logit forward, %" PRIu64 " backward) while exec "
                        "runs its fused kernel (%" PRIu64 " and %" PRIu64 "), so the loss class differs by design; "
                        "write cross_entropy: fused to compare like with like\n",
                gs_xent_bytes_per_logit(GS_XENT_UNFUSED, gs_precision_bytes(s.strategy.precision), 0),
                gs_xent_bytes_per_logit(GS_XENT_UNFUSED, gs_precision_bytes(s.strategy.precision), 1),
                gs_xent_bytes_per_logit(GS_XENT_FUSED, gs_precision_bytes(s.strategy.precision), 0),
                gs_xent_bytes_per_logit(GS_XENT_FUSED, gs_precision_bytes(s.strategy.precision), 1));
    for (int pass = 0; pass < (a.calib ? 2 : 1); pass++) {
        gs_backend_opts bo = {a.flow, pass ? a.calib : NULL, NULL};
        if (have_s) {
            gs_report_fini(&srep);
            have_s = 0;
        }
        if (sim_state) {
            gs_sim_backend.close(sim_state);
            sim_state = NULL;
        }
        if ((rc = gs_sim_backend.open(&s, &mesh, &bo, &sim_state, err)) != GS_OK ||
            (rc = gs_sim_backend.run(sim_state, sch, stime, err)) != GS_OK ||
            (rc = gs_report_build(&s, sch, stime, &srep, err)) != GS_OK)
            goto out;
        have_s = 1;
        if (pass == 0 && a.calib) {
            class_times(sch, stime, def_c, seen);
            def_step = srep.step_time_s;
        }
    }
    class_times(sch, stime, sim_c, seen);
    class_times(sch, gs_exec_session_timing(x), ex_c, seen);
    gs_dispatch_gaps sgap, egap;
    gs_dispatch_gaps_step(sch, stime, &sgap);
    gs_dispatch_gaps_step(sch, gs_exec_session_timing(x), &egap);
    double serr = erep.step_time_s > 0 ? (srep.step_time_s - erep.step_time_s) / erep.step_time_s : 0;
    double derr = erep.step_time_s > 0 ? (def_step - erep.step_time_s) / erep.step_time_s : 0;
    if (a.json) {
        doc = json_object();
        json_object_set_new(doc, "scenario", json_string(s.name));
        json_object_set_new(doc, "driver", json_string(a.o.driver->name));
        json_object_set_new(doc, "sim_mode", json_string(a.flow ? "flow" : "analytic"));
        json_object_set_new(doc, "sim_step_time_s", json_real(srep.step_time_s));
        json_object_set_new(doc, "exec_step_time_s", json_real(erep.step_time_s));
        json_object_set_new(doc, "step_error", json_real(serr));
        if (a.calib) {
            json_object_set_new(doc, "calib", json_string(a.calib));
            json_object_set_new(doc, "default_sim_step_time_s", json_real(def_step));
            json_object_set_new(doc, "default_step_error", json_real(derr));
        }
        json_t *cl = json_array();
        for (int c = 0; c < NCLASS; c++) {
            if (!seen[c])
                continue;
            char nm[64];
            class_name(c, nm, sizeof nm);
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(nm));
            json_object_set_new(o, "sim_s", json_real(sim_c[c]));
            json_object_set_new(o, "exec_s", json_real(ex_c[c]));
            json_object_set_new(o, "error", ex_c[c] > 0 ? json_real((sim_c[c] - ex_c[c]) / ex_c[c]) : json_null());
            if (a.calib) {
                json_object_set_new(o, "default_sim_s", json_real(def_c[c]));
                json_object_set_new(o, "default_error",
                                    ex_c[c] > 0 ? json_real((def_c[c] - ex_c[c]) / ex_c[c]) : json_null());
            }
            json_array_append_new(cl, o);
        }
        json_object_set_new(doc, "classes", cl);
        json_object_set_new(doc, "sim_dispatch_gap_s", json_real(sgap.gap_s));
        json_object_set_new(doc, "exec_dispatch_gap_s", json_real(egap.gap_s));
        rc = gs_cli_json_print(doc, err);
    } else {
        char b1[32], b2[32], b3[32];
        if (a.calib) {
            gs_cli_table_fini(&tab);
            gs_cli_table_init(&tab, 6);
            printf("%s: sim before (%s presets) and after calibration (%s) vs exec (%s driver, measured, step %" PRIu64
                   " of %" PRIu64 ")\n", s.name, s.cluster.name, a.calib, a.o.driver->name, a.steps, a.steps);
            gs_cli_table_rowf(&tab, "class\texec\tsim before\terror\tsim after\terror");
            for (int c = 0; c < NCLASS; c++) {
                if (!seen[c])
                    continue;
                char nm[64];
                class_name(c, nm, sizeof nm);
                gs_cli_table_rowf(&tab, "%s\t%s\t%s\t%+.1f%%\t%s\t%+.1f%%", nm, gs_fmt_seconds(ex_c[c], b2, sizeof b2),
                                  gs_fmt_seconds(def_c[c], b3, sizeof b3),
                                  ex_c[c] > 0 ? 100 * (def_c[c] - ex_c[c]) / ex_c[c] : 0.0,
                                  gs_fmt_seconds(sim_c[c], b1, sizeof b1),
                                  ex_c[c] > 0 ? 100 * (sim_c[c] - ex_c[c]) / ex_c[c] : 0.0);
            }
            gs_cli_table_rowf(&tab, "step\t%s\t%s\t%+.1f%%\t%s\t%+.1f%%", gs_fmt_seconds(erep.step_time_s, b2, sizeof b2),
                              gs_fmt_seconds(def_step, b3, sizeof b3), 100 * derr,
                              gs_fmt_seconds(srep.step_time_s, b1, sizeof b1), 100 * serr);
            gs_cli_table_print(&tab, stdout, 2);
            printf("  (per class: time a rank spends in those events, summed, averaged over ranks; error = (sim - exec) "
                   "/ exec)\n");
            print_gaps(&sgap, &egap);
            goto out;
        }
        printf("%s: sim (%s, modeled%s) vs exec (%s driver, measured, step %" PRIu64 " of %" PRIu64 ")\n", s.name,
               s.cluster.name, a.flow ? ", flow mode" : "", a.o.driver->name, a.steps, a.steps);
        gs_cli_table_rowf(&tab, "class\tsim\texec\terror");
        for (int c = 0; c < NCLASS; c++) {
            if (!seen[c])
                continue;
            char nm[64];
            class_name(c, nm, sizeof nm);
            gs_cli_table_rowf(&tab, "%s\t%s\t%s\t%+.1f%%", nm, gs_fmt_seconds(sim_c[c], b1, sizeof b1),
                              gs_fmt_seconds(ex_c[c], b2, sizeof b2),
                              ex_c[c] > 0 ? 100 * (sim_c[c] - ex_c[c]) / ex_c[c] : 0.0);
        }
        gs_cli_table_rowf(&tab, "step\t%s\t%s\t%+.1f%%", gs_fmt_seconds(srep.step_time_s, b1, sizeof b1),
                          gs_fmt_seconds(erep.step_time_s, b2, sizeof b2), 100 * serr);
        gs_cli_table_print(&tab, stdout, 2);
        printf("  (per class: time a rank spends in those events, summed, averaged over ranks; error = (sim - exec) "
               "/ exec)\n");
        print_gaps(&sgap, &egap);
    }
out:
    gs_cli_table_fini(&tab);
    if (sim_state)
        gs_sim_backend.close(sim_state);
    if (stime && sch)
        for (size_t i = 0; i < sch->nranks; i++)
            free(stime[i]);
    free(stime);
    if (have_s)
        gs_report_fini(&srep);
    if (have_e)
        gs_report_fini(&erep);
    json_decref(doc);
    gs_exec_session_destroy(x);
    free(loss);
    free(secs);
    return launch_end(&mx, prank, "compare", NULL, rc, err);
}
