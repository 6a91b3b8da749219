/* `gridstep exec`: runs the scenario's schedule on a driver (real kernels, real collectives,
 * every event measured) and reports the step as the sim does. This file is the command: its
 * help, the run from loading the scenario to the trace, and the cleanup; the options, the
 * launcher, the step loop, the signals and the report are the files cli/exec_cmd.h lists. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/exec_cmd.h"
#include "cli/progress.h"
#include "engine/report.h"
#include "exec/dispatch_gaps.h"
#include "exec/exec.h"

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
    "step gives the unsplit step's bits. Also, on both drivers: mixture-of-experts blocks\n"
    "(model.moe: softmax top-k router, capacity dropping, grid.ep's all-to-all dispatch and\n"
    "combine, interleaved dense blocks), context parallelism (grid.cp under each cp_comm,\n"
    "Megatron's load-balanced chunks) and precision: fp8, the E4M3 / E5M2 casts emulated bit for\n"
    "bit: fp8_recipe current with cp and ep 1, delayed (its amax history, algorithm and margin;\n"
    "the amax reductions the schedule names) under tp, cp and ep too; the scales are saved with\n"
    "a checkpoint. Latent attention (MLA) is refused by name.\n"
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
    "                   GEMMs always; precision: fp8 casts each GEMM input on the GPU with the\n"
    "                   host's bits and runs the GEMM on the copies, or with\n"
    "                   GRIDSTEP_CUDA_FP8=cublaslt cuBLASLt's FP8 GEMMs on the codes),\n"
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
    "  --lr X           AdamW learning rate (default 0.001; a finite number in (0, 100])\n"
    "  --adam-eps X     AdamW epsilon (default 1e-8, in (0, 1]; tests/check_exec's contract uses 1e-6)\n"
    "  --timeout S      every blocking wait gives up after S seconds (default 60; a finite number\n"
    "                   in (0, 86400]); then every rank stops with an error naming the event (cuda:\n"
    "                   a stream with no progress for S seconds or an NCCL error aborts the\n"
    "                   communicators). host: the message follows the waits (rank A waits for B,\n"
    "                   which waits for C, ...) to the rank that waits for no other: the one stuck\n"
    "                   in its own work, or dead. A step in which no event completes for S + 0.5 s\n"
    "                   is stopped naming the rank and event that did not (a stall in a rank's\n"
    "                   last events, which no other rank waits for); a rank that did not run\n"
    "                   every event of the step fails it\n"
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
    "  --force          let --save replace a DIR that is not a gridstep checkpoint (moved aside to\n"
    "                   DIR.replaced-PID, nothing deleted) and --save-full a FILE gridstep did not\n"
    "                   write; without it both are refused (exit 2). Save targets are checked\n"
    "                   before the first step: replaceable, parent writable, estimated size free\n"
    "  --allow-nonfinite\n"
    "                   continue past a loss, parameter or Adam moment that is NaN or infinite\n"
    "                   (warned once); without it the run stops there, exit 1, naming the step and\n"
    "                   the tensor (the state is scanned after every step on the host driver, before\n"
    "                   each save and after the last step on cuda), and a --load checkpoint holding\n"
    "                   such a value is refused, exit 2\n"
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

const char gs_cmd_exec_usage[] =
    "gridstep exec [--driver host|cuda] [--steps N] [--seed S] [--lr X] [--adam-eps X] [--timeout S] [--json] "
    "[--trace FILE] [--load DIR] [--save DIR [--save-every N]] [--save-full FILE] [--force] [--allow-nonfinite] "
    "[--quiet] SCENARIO.yaml";

/* The scenario loaded, the step arrays, the session created, and the --load checkpoint read
 * (refused when it holds a NaN or infinite value, unless --allow-nonfinite). */
static gs_status exec_start(const gs__exec_args *a, gs__exec_run *r, gs_error *err)
{
    gs_status rc;
    if ((rc = gs_cli_load(a->path, &r->s, &r->mesh, err)) != GS_OK)
        return rc;
    r->loss = calloc(a->steps, sizeof *r->loss);
    r->secs = calloc(a->steps, sizeof *r->secs);
    if (!r->loss || !r->secs)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    if ((rc = gs_exec_session_create(&r->s, &r->mesh, &a->o, &r->x, err)) != GS_OK)
        return rc;
    if (a->load && (rc = gs_exec_session_load(r->x, a->load, err)) != GS_OK)
        return rc;
    if (a->load && !a->allow_nonfinite) { /* a checkpoint holding NaN: bad input, not a run to start */
        char when[512];
        snprintf(when, sizeof when, "--load %s", a->load);
        if ((rc = gs_exec_session_check_finite(r->x, when, 1, GS_ERR_INPUT, err)) != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* The steps with their periodic saves, then --save-full; *save_failed: the failure was a save's. */
static gs_status exec_steps(const gs__exec_args *a, const gs__exec_proc *p, gs__exec_run *r, int *save_failed,
                            gs_error *err)
{
    gs__exec_save_plan sp = {a->save, a->save_every, 0, 0, a->allow_nonfinite, 0};
    uint64_t done = 0;
    gs_progress prog;
    gs_progress_init(&prog, "gridstep exec", "steps", !a->quiet && p->prank == 0);
    gs__exec_step_loop loop = {a->steps, r->loss, r->secs, &sp, p->mx.launched, &prog};
    gs_status rc = gs__exec_run_steps(r->x, &loop, &done, err);
    gs_progress_end(&prog);
    if (rc != GS_OK) {
        *save_failed = sp.failed;
        return rc;
    }
    if (a->save_full && (rc = gs_exec_session_save_full(r->x, a->save_full, err)) != GS_OK) {
        *save_failed = 1;
        return rc;
    }
    return GS_OK;
}

/* --trace FILE: the Chrome trace of the last step. */
static gs_status write_trace(gs_exec_session *x, const char *path, gs_error *err)
{
    FILE *tf = fopen(path, "w");
    if (!tf)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    gs_status rc = gs_exec_session_trace(x, tf, err);
    if (rc != GS_OK) {
        fclose(tf);
        return rc;
    }
    if (fclose(tf) != 0)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return GS_OK;
}

gs_status gs_cmd_exec(int argc, char **argv, gs_error *err)
{
    gs__exec_args a;
    gs__exec_proc proc;
    gs_status rc = gs__exec_launch_begin(argc, argv, 0, &a, &proc, err);
    if (rc != GS_OK)
        return gs__exec_launch_end(&proc, "exec", NULL, rc, err);
    gs__exec_run r;
    memset(&r, 0, sizeof r);
    int save_failed = 0; /* the failure was a save's (--save, --save-every, --save-full) */
    gs__exec_sigwatch watch;
    gs__exec_sigwatch_block(&watch);
    if ((rc = exec_start(&a, &r, err)) != GS_OK)
        goto out;
    gs__exec_sigwatch_start(&watch, r.x);
    r.first = gs_train_step(gs_exec_session_train(r.x)) + 1; /* the first step this run takes */
    if ((rc = exec_steps(&a, &proc, &r, &save_failed, err)) != GS_OK)
        goto out;
    if ((rc = gs_exec_session_report(r.x, &r.rep, err)) != GS_OK)
        goto out;
    r.have_rep = 1;
    gs_dispatch_gaps_step(gs_exec_session_schedule(r.x), gs_exec_session_timing(r.x), &r.gaps);
    if (a.trace && (rc = write_trace(r.x, a.trace, err)) != GS_OK)
        goto out;
    rc = gs__exec_output(&a, &r, &proc.mx, err);
out:
    gs__exec_sigwatch_restore(&watch);
    if (r.have_rep)
        gs_report_fini(&r.rep);
    gs_exec_session_destroy(r.x);
    free(r.loss);
    free(r.secs);
    return gs__exec_launch_end(&proc, "exec", save_failed ? "the save" : "the run", rc, err);
}
