/* `gridstep calibrate`: measures this machine through an exec driver (GEMM rates over a grid of
 * shapes, elementwise kernel bandwidths, attention, collectives per op, size and group size,
 * send/recv, per-event dispatch cost, how many cores ranks really get), fits the sim's models
 * to the medians (sim/calib.c) and writes the calibration file `sim --calib` reads. This file is
 * the command: its help, its options, the processes of an MPI job and the file written; the
 * measurement is cli/calibrate_run.c's (cli/calibrate_cmd.h lists the parts). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/calibrate_cmd.h"
#include "cli/commands.h"
#include "cli/mpi_exec.h"
#include "exec/driver.h"

const char gs_cmd_calibrate_help[] =
    "Measures this machine through the driver and writes a calibration file for `gridstep sim\n"
    "--calib` and `gridstep compare --calib`. Every figure is the median of repeats after a\n"
    "warm-up. Kernels are timed in thread CPU time (their cost on a core); collectives and the\n"
    "cores test in wall time, so those depend on the load: calibrate under the load you compare\n"
    "under (the file records the load average).\n"
    "  GEMM       the driver's linear, forward and backward, over a grid of shapes (m, n, k), fp32,\n"
    "             plus the GEMM shapes of SCENARIO's schedule when one is given; the efficiency\n"
    "             (rate / best rate) is fitted against one call's FLOPs (compute.gemm_curve), and\n"
    "             the time against the shape's terms 2mnk, kn, mk and 1 (compute.gemm_terms,\n"
    "             what the sim uses: a short m amortizes the packing of the k x n operand over\n"
    "             fewer rows); operands are used in turn from sets beyond the caches; the\n"
    "             backward over twice the forward is compute.gemm_bwd_factor\n"
    "  rope       the rotary embedding of q and k per token (compute.qkv_rope_s_per_token)\n"
    "  concurrency the scenario's GEMMs on 1 .. P threads at once, the slowest one's CPU time\n"
    "             over one thread's (median of 5 rounds): 1 + s (k - 1) (compute.concurrency_slowdown);\n"
    "             each thread pinned to a CPU of its own, the first on the CPU the kernels\n"
    "             above were measured on (the one-thread reference is the GEMM fit's CPU)\n"
    "  kernels    the non-GEMM work of each event as exec runs it (AdamW, the norms with their\n"
    "             residual adds, SwiGLU, the loss, the embedding; forward and backward): alpha-beta\n"
    "             fit of time against the bytes the schedule counts for them\n"
    "             (compute.elementwise_bw, compute.elementwise_bw_bwd); attention forward+backward\n"
    "             at SCENARIO's shape (compute.attn_flops, the schedule's FLOP count)\n"
    "  dispatch   no-op events on one stream, and chained across two streams, of each of 1, 2,\n"
    "             4, 8 ranks as the dispatcher issues them (compute.launch_s_by_ranks: launch_s\n"
    "             and the cross-stream wake_s; the driver's per-event cost grows with its\n"
    "             thread count; launch_cpu_s and wake_cpu_s: the process's CPU time of them)\n"
    "  cores      the CPU-time share of GEMM threads, P and 2P of them at once (P online CPUs):\n"
    "             with sched_autogroup (Linux's default: CPUs shared fairly between sessions)\n"
    "             compute.cores is this process's share in cores; otherwise compute.cores = P\n"
    "             and compute.background_load the other runnable threads. With SCENARIO, two\n"
    "             training steps of it run for real and the process's CPU time over wall time\n"
    "             in the second is its share under a real step (used when larger)\n"
    "  links      all-gather, reduce-scatter, all-reduce, broadcast over 2, 4 and 8 ranks and\n"
    "             send/recv, 1 KiB .. 16 MiB (--quick: .. 1 MiB) in x4 steps, printed as\n"
    "             nccl-tests does (busbw: all-reduce 2(n-1)/n, all-gather and reduce-scatter\n"
    "             (n-1)/n, broadcast and send/recv 1); robust alpha-beta fit per op and group\n"
    "             size (links.intra). The cap: the host driver's ranks are threads sharing this\n"
    "             machine's cores and memory bandwidth, so 8 ranks x 16 MiB already take\n"
    "             seconds per call, and the host scenarios move at most a few MiB per call.\n"
    "\n"
    "A driver with device memory (--driver cuda: the module gridstep-cuda.so) is measured through\n"
    "its stream events instead (CUDA events around batches of calls, as nccl-tests times), and\n"
    "needs SCENARIO.yaml: its GPU preset and precision are what the GEMMs are fitted against.\n"
    "  GEMM       a grid (1K..8K squares, Llama-7B-like layer shapes) plus the scenario's shapes,\n"
    "             forward and backward; fitted as one scale on the preset's tile model (wave and\n"
    "             tile quantization, split-K, short K: the shape's physics stays the model's), the\n"
    "             median of measured / model: compute.gemm_efficiency (a scale above 1 raises\n"
    "             peak_flops instead); shapes the model calls memory-bound are not fitted\n"
    "  kernels    the same non-GEMM kernels, 2^16..2^26 elements; a device-to-device copy gives\n"
    "             compute.hbm_bw; a one-element kernel back to back compute.launch_s; attention\n"
    "             and the rotary embedding at the scenario's shape\n"
    "  links      all-gather, reduce-scatter, all-reduce, broadcast over 2, 4 and 8 GPUs of this\n"
    "             process and a send/recv ping-pong, 1 KiB .. 1 GiB (--quick: x16 steps),\n"
    "             nccl-tests' columns, alpha-beta fits (links.intra); groups larger than the\n"
    "             GPUs the driver opens are skipped, with its reason in the summary and the file\n"
    "Built and tested through the host driver (--events); not yet run on a GPU.\n"
    "\n"
    "Under mpirun or srun (a gridstep built --with-mpi), process 0 measures its machine as above\n"
    "while the others wait, then every process takes part in the collectives between processes,\n"
    "one rank each, timed with the driver's events (the slowest process per repeat): with L\n"
    "processes on each of H >= 2 hosts in blocks, a host's L (links.intra at L ranks) and one per\n"
    "host (links.inter at H ranks), each class's groups at once as a step runs them; otherwise\n"
    "all of them (intra on one host, inter across hosts); send/recv between process 0 and a\n"
    "process on its host and on another host. Process 0 writes the file (those lines replace\n"
    "the same group sizes measured in one process) and every process exits with one status.\n"
    "\n"
    "options:\n"
    "  --driver D       host, or a driver module such as cuda (as for exec)\n"
    "  --events         time through the driver's stream events as for a GPU (the default for a\n"
    "                   device driver); with the host driver this runs the device calibration on\n"
    "                   this CPU at test sizes (how the tests check that path)\n"
    "  --out FILE       the calibration file (default calib.json)\n"
    "  --quick          fewer shapes, sizes and repeats (about 10 s)\n"
    "  --warm           time GEMMs on the same operands every call (default: operand sets over\n"
    "                   32 MiB used in turn, so operands come from memory as in a step)\n"
    "  --plot PREFIX    PREFIX-coll.dat/.gp/.png (time vs size, log-log, points + fitted lines)\n"
    "                   and PREFIX-gemm.dat/.gp/.png (efficiency vs FLOPs + the fitted curve)\n"
    "                   through gnuplot; without gnuplot the data and scripts stay, exit 1\n"
    "\n"
    "examples:\n"
    "  gridstep calibrate --driver host --out host.json tests/calib/a-dp2-tp2.yaml\n"
    "  gridstep sim --calib host.json tests/calib/b-dp4.yaml\n"
    "  gridstep compare --calib host.json tests/calib/b-dp4.yaml\n"
    "  GRIDSTEP_CUDA_GEMM=tf32 gridstep calibrate --driver cuda --out gpu.json scenarios/llama2-7b-8l-1xh200.yaml\n"
    "  GRIDSTEP_CUDA_GEMM=tf32 gridstep compare --driver cuda --calib gpu.json scenarios/llama2-7b-8l-1xh200.yaml\n"
    "  mpirun -np 16 --map-by ppr:8:node gridstep calibrate --driver cuda --out cluster.json scenarios/llama2-7b-8l-1xh200.yaml\n";

static const char usage[] =
    "gridstep calibrate [--driver host|cuda] [--events] [--out FILE] [--quick] [--warm] [--plot PREFIX] [SCENARIO.yaml]";

static gs_status parse(int argc, char **argv, gs__calib_args *a, gs_error *err)
{
    static const struct option opts[] = {
        {"driver", required_argument, NULL, 'd'}, {"out", required_argument, NULL, 'o'},
        {"quick", no_argument, NULL, 'q'},        {"plot", required_argument, NULL, 'p'},
        {"warm", no_argument, NULL, 'w'},        {"events", no_argument, NULL, 'e'},
        {"quiet", no_argument, NULL, 'Q'},        {NULL, 0, NULL, 0},
    };
    *a = (gs__calib_args){"host", "calib.json", NULL, NULL, 0, 0, 0, 0, NULL};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': a->driver = optarg; break;
        case 'o': a->out = optarg; break;
        case 'q': a->quick = 1; break;
        case 'p': a->plot = optarg; break;
        case 'w': a->warm = 1; break;
        case 'e': a->events = 1; break;
        case 'Q': a->quiet = 1; break;
        default: return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (optind < argc)
        a->scenario = argv[optind++];
    if (optind < argc)
        return gs_error_set(err, GS_ERR_INPUT, "one scenario at most, found '%s' too\nusage: %s", argv[optind], usage);
    return gs_driver_load(a->driver, getenv("GRIDSTEP_MODULE_PATH"), &a->ops, err);
}

gs_status gs_cmd_calibrate(int argc, char **argv, gs_error *err)
{
    gs__calib_args a;
    gs_mpi_exec mx;
    int prank = 0;
    json_t *doc = NULL;
    gs_status rc = gs_mpi_exec_begin(&mx, &prank, err);
    if (prank != 0 && !freopen("/dev/null", "w", stdout))
        rc = gs_error_set(err, GS_ERR_IO, "rank %d: cannot quiet standard output", prank);
    if (rc == GS_OK)
        rc = parse(argc, argv, &a, err);
    if (rc == GS_OK && mx.launched && strcmp(a.ops->name, "host") == 0 && !mx.threads_ok)
        rc = gs_mpi_exec_threads_error(&mx, err);
    int all_ok = 1;
    gs__calib_proc proc = {&mx, prank, &a};
    if (mx.launched)
        rc = gs__calib_launched(&proc, rc, &doc, &all_ok, err);
    else if (rc == GS_OK)
        rc = gs__calib_here(&a, &doc, err);
    if (rc == GS_OK && all_ok && prank == 0) {
        if (json_dump_file(doc, a.out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) != 0)
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write", a.out);
        else
            printf("\nwrote %s (use: gridstep sim --calib %s SCENARIO, gridstep compare%s%s --calib %s SCENARIO)\n",
                   a.out, a.out, strcmp(a.ops->name, "host") ? " --driver " : "",
                   strcmp(a.ops->name, "host") ? a.ops->name : "", a.out);
    }
    fflush(stdout);
    json_decref(doc);
    /* every process's outcome agreed (process 0's write included), rank 0 prints the error
     * before any process leaves MPI (as exec's launch_end) */
    int launched = mx.launched;
    rc = gs_mpi_exec_agree(&mx, rc, "the calibration", err);
    rc = gs_mpi_exec_end(&mx, "calibrate", rc, err);
    if (!launched && prank != 0 && rc != GS_OK && !freopen("/dev/null", "w", stderr))
        rc = GS_ERR_IO;
    return rc;
}
