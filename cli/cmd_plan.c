/* `gridstep plan`: every legal grid and strategy for a model on a cluster, ranked by simulated
 * tokens/s, with the rejections counted, why the winner wins, and its launch line. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/mpi_split.h"
#include "cli/progress.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/sweep.h"
#include "engine/units.h"
#include "sim/bound.h"
#include "sim/sim.h"

const char gs_cmd_plan_help[] =
    "Enumerates every configuration of the model on the cluster a user tunes: each grid (dp, pp, tp)\n"
    "whose product is the GPU count; each sharding strategy (no_shard, shard_grad_op, full_shard,\n"
    "zero1, zero2, zero3; hybrid_shard when DP spans nodes); every micro-batch size dividing\n"
    "global / dp; the pipeline schedule when pp > 1 (1f1b, gpipe, and interleaved with every number\n"
    "of virtual stages that splits the layers); sequence parallelism and, with it, TP communication\n"
    "overlap when tp > 1; per strategy its knobs: gradient bucket size (10, 25, 100, 400 MiB and the\n"
    "scenario's) and overlap_grad_reduce for DDP / ZeRO, overlap_param_gather for ZeRO-1/2,\n"
    "backward prefetch (backward_pre, backward_post, none) where FSDP re-gathers in backward and\n"
    "forward prefetch for sharded FSDP; recompute (none, selective, full); CPU offload for FSDP\n"
    "strategies. It rejects what fails the mesh checks (counted per grid: TP across nodes, heads or\n"
    "ffn not divisible by tp, layers < pp), the batch and pipeline checks, or memory (the model\n"
    "states per grid, sharding and offload; the ledger's peak per configuration), and ranks the rest\n"
    "by simulated tokens/s (analytic mode, one rank per pipeline stage), ties broken by memory\n"
    "headroom.\n"
    "\n"
    "Tiers: (1) every configuration gets a closed-form lower bound on its step: each stream runs one\n"
    "event at a time, so a stage's compute (with the TP calls its compute waits for) is at least\n"
    "the sum of its events' times, plus micro-batch 0's way through the stages before it and the\n"
    "last micro-batch's way back (compute and sends); (2) in order of that bound, the memory ledger,\n"
    "a second bound from the ledger's traffic (each DP, TP and PP stream's bytes at the best rate\n"
    "the tuner reaches), then the periodic closed form: the step simulated with 2 and 3 layers per\n"
    "model chunk at m1 = max(2, 2 pp) and m2 = m1 + pp micro-batches, extended bilinearly in\n"
    "(micro-batches, layers), exact where the schedule is periodic and within 1% of the full\n"
    "simulation on configurations tests/check_plan draws at random; the search stops when the next\n"
    "bound is 2% above the best --top step found (R4); (3) the configurations within 2% of it are\n"
    "simulated with every layer (extrapolated in micro-batches only: step(m) = step(m2) + (m - m2)\n"
    "(step(m2) - step(m1)) / pp, within 1% of the full simulation) and ranked on that.\n"
    "\n"
    "Pruning rules (each safe because the analytic simulation is a max-plus system: an event\n"
    "starts at the latest end of its dependencies and of its stream's previous event, so adding\n"
    "or lengthening events never shortens the step):\n"
    "  R1 offload is pruned when its twin without offload fits (offload only adds host copies and\n"
    "     moves the optimizer to the slower host);\n"
    "  R2 selective recompute is pruned when its twin without recompute fits, full recompute when\n"
    "     the twin without or with selective recompute fits (recompute only adds compute);\n"
    "  R3 strategies with the same per-rank shard plan and knobs (zero3 and full_shard, ...) build\n"
    "     the same schedule: simulated once, both listed;\n"
    "  R4 a configuration whose bound is above the best kept is not simulated (its memory is then\n"
    "     not checked either: the ledger counts cover the configurations examined).\n"
    "  Caveats: the 10% compute slowdown under overlapped communication is decided per event at its\n"
    "  start, so a shifted overlap could in principle move a step by a fraction of one event; at an\n"
    "  exactly equal step the pruned twin would have won the headroom tie-break.\n"
    "\n"
    "On --threads worker threads (ledgers and simulations in waves of 16; the output does not\n"
    "depend on the thread count); progress on stderr (see --quiet).\n"
    "\n"
    "options:\n"
    "  --model M          model preset (gridstep presets models)\n"
    "  --cluster C        cluster preset (gridstep presets clusters)\n"
    "  --nodes N          nodes of the cluster\n"
    "  --global-batch B   sequences per step (default: the scenario's, else 2 x GPUs)\n"
    "  --seq S            sequence length, tokens (default: the model's)\n"
    "  --top K            rows in the table and the JSON (default 10)\n"
    "  --json             one JSON document: candidates [{grid {dp, pp, tp}, strategy {...}, micro,\n"
    "                     step_time_s, tokens_per_s, peak_bytes, ...}] best first, rejected {reason:\n"
    "                     count}, pruned {rule: count}, evaluated, simulated; a candidate's strategy\n"
    "                     has its knobs (bucket_mb, overlap_grad_reduce, overlap_param_gather, prefetch,\n"
    "                     forward_prefetch, tp_comm_overlap), closed_form says the periodic form\n"
    "                     gave its numbers (it was not among the best)\n"
    "  --tp, --pp, --dp, --micro LIST   only these values (comma-separated)\n"
    "  --cp LIST          context parallelism degrees to search (default: the scenario's cp, 1),\n"
    "                     each with the scenario's cp_comm (a2a+p2p: its grid.cp_a2a, where it\n"
    "                     divides cp below it; other degrees are rejected)\n"
    "  --ep LIST          expert parallelism degrees of a MoE model (default: every ep dividing both\n"
    "                     dp x cp and the experts); grid {cp, ep} in the JSON when above 1\n"
    "  --etp LIST         expert tensor parallelism searched besides tp for a MoE model under TP\n"
    "                     (default 1: whole experts, ep over tp x dp x cp; a list without 1: tp\n"
    "                     only); grid {etp} in the JSON when below tp\n"
    "  --sharding LIST    only these strategies\n"
    "  --max-candidates N stop enumerating after N configurations\n"
    "  --threads N        worker threads (default 2)\n"
    "  --no-extrapolate   simulate every candidate's full step, no closed form (slow; for checking)\n"
    "  --shard I/N        (with --json) a piece for gridstep merge: only the configurations of shard I.\n"
    "                     Search units (same grid, micro, pipeline, virtual stages, SP and TP overlap)\n"
    "                     in enumeration order, unit u to shard u % N; each piece holds its shard's\n"
    "                     exact best --top\n"
    "  --emit K           print only the winner's launch configuration, K = torchrun, accelerate,\n"
    "                     megatron, slurm or torchtitan (as gridstep mesh --emit; the ranking is not\n"
    "                     printed)\n"
    "  --quiet            no progress on standard error (by default: the share of the\n"
    "                     configurations simulated, of at most the count left after the early\n"
    "                     pruning, and the time left at that pace; on a terminal one line, in a log\n"
    "                     a line every 5 s, GRIDSTEP_PROGRESS_S)\n"
    "Under mpirun (a gridstep built --with-mpi; needs --json): rank r of N searches shard r/N and\n"
    "rank 0 merges the pieces as gridstep merge does and prints the document; the candidates and\n"
    "the counts of the checks before memory are the serial plan's; `simulated`, `pruned` and the\n"
    "ledger's rejections count what the ranks examined together (see gridstep help merge). An\n"
    "error on any rank is reported once by rank 0, the other ranks printing one line each, and\n"
    "every process exits with the serial exit code.\n"
    "A SCENARIO.yaml argument supplies the model, cluster and batch; its grid and strategy are\n"
    "ignored except what the framework fixes, not the grid: precision, grad_dtype, bucket_mb,\n"
    "flash_attention, cross_entropy and the overlaps the candidate can have (tp_comm_overlap,\n"
    "overlap_param_gather, bucket_stages).\n"
    "\n"
    "examples:\n"
    "  gridstep plan --model llama2-70b --cluster dgx-a100-80g --nodes 8\n"
    "  gridstep plan scenarios/seed-7b-8xa100.yaml --top 5\n"
    "  gridstep plan --model llama2-70b --cluster dgx-a100-80g --nodes 8 --tp 8 --json | jq '.candidates[0]'\n"
    "  mpirun -np 4 gridstep plan --model llama2-70b --cluster dgx-a100-80g --nodes 8 --json > plan.json\n";

static const char usage[] =
    "gridstep plan (--model M --cluster C --nodes N | SCENARIO.yaml) [--global-batch B] [--seq S] [--top K] "
    "[--json] [--tp LIST] [--pp LIST] [--dp LIST] [--sharding LIST] [--micro LIST] [--max-candidates N] "
    "[--threads N] [--no-extrapolate] [--emit torchrun|accelerate|megatron|slurm|torchtitan] [--shard I/N] [--quiet]";

/* The winner as a scenario of its own: the plan's model, cluster and batch with the winner's
 * grid, strategy and micro-batch; then its launch document on stdout. */
static gs_status emit_winner(const gs_scenario *base, const gs_plan *p, gs_launch_kind kind, gs_error *err)
{
    const gs_plan_candidate *w = &p->cands[0];
    gs_scenario s = *base;
    gs_mesh mesh;
    gs_text text;
    gs_status rc;
    s.grid.dp = w->dp;
    s.grid.pp = w->pp;
    s.grid.tp = w->tp;
    s.grid.cp = w->cp;
    s.grid.cp_outer = 0;
    s.grid.ep = w->ep;
    s.grid.etp = w->etp;
    gs_grid_split_even(&s.grid); /* the candidates split the layers evenly (gs_plan_run) */
    s.strategy = w->strategy;
    s.batch.micro_seqs = w->micro;
    s.batch.global_seqs = p->global_seqs;
    snprintf(s.name, sizeof s.name, "plan-winner");
    gs_text_init(&text);
    if ((rc = gs_scenario_mesh(&s, &mesh, NULL, err)) == GS_OK &&
        (rc = gs_launch_emit(&s, &mesh, kind, &text, err)) == GS_OK)
        fputs(gs_text_str(&text), stdout);
    gs_text_fini(&text);
    return rc;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

static gs_status parse_u64(const char *opt, const char *s, uint64_t *out, gs_error *err)
{
    if (gs_parse_count(s, out) != 0 || *out == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a positive integer\nusage: %s", opt, s,
                            usage);
    return GS_OK;
}

static gs_status parse_list(const char *opt, const char *s, gs_plan_list *l, gs_error *err)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    l->n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (l->n == GS_PLAN_LIST_MAX)
            return gs_error_set(err, GS_ERR_INPUT, "%s: more than %d values", opt, GS_PLAN_LIST_MAX);
        gs_status rc = parse_u64(opt, t, &l->v[l->n], err);
        if (rc != GS_OK)
            return rc;
        l->n++;
    }
    if (l->n == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a comma-separated list", opt, s);
    return GS_OK;
}

static gs_status parse_shardings(const char *s, unsigned *mask, gs_error *err)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    *mask = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        gs_sharding sh;
        if (gs_sharding_parse(t, &sh) != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "--sharding: found '%s', expected no_shard, shard_grad_op, full_shard, "
                                "hybrid_shard, zero1, zero2 or zero3",
                                t);
        *mask |= 1u << sh;
    }
    if (!*mask)
        return gs_error_set(err, GS_ERR_INPUT, "--sharding: found '%s', expected a comma-separated list", s);
    return GS_OK;
}

/* "1f1b", "gpipe", "interleaved:2" */
static const char *pipe_label(const gs_plan_candidate *c, char *buf, size_t len)
{
    if (c->pp == 1)
        snprintf(buf, len, "-");
    else if (c->strategy.pipeline == GS_PIPE_INTERLEAVED)
        snprintf(buf, len, "interleaved:%" PRIu64, c->strategy.virtual_stages);
    else
        snprintf(buf, len, "%s", gs_pipeline_name(c->strategy.pipeline));
    return buf;
}

/* The communication knobs a candidate sets beyond its sharding: "bucket 25M, no ogr, opg",
 * "backward_pre, fwd", "tp overlap"; "-" when none applies. */
static const char *knob_label(const gs_plan_candidate *c, char *buf, size_t len)
{
    const gs_strategy *st = &c->strategy;
    size_t n = 0;
    buf[0] = '\0';
    if (st->sharding == GS_SHARD_NO_SHARD || st->sharding == GS_SHARD_ZERO1 || st->sharding == GS_SHARD_ZERO2)
        n += (size_t)snprintf(buf + n, len - n, "bucket %" PRIu64 "M%s%s", st->bucket_bytes >> 20,
                              st->overlap_grad_reduce ? "" : ", no ogr", st->overlap_param_gather ? ", opg" : "");
    else if (st->sharding != GS_SHARD_NO_SHARD)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", st->reshard_after_forward ? gs_prefetch_name(st->prefetch) : "",
                              st->forward_prefetch ? (st->reshard_after_forward ? ", fwd" : "fwd") : "");
    if (n < len && st->tp_comm_overlap)
        n += (size_t)snprintf(buf + n, len - n, "%stp overlap", n ? ", " : "");
    if (n == 0)
        snprintf(buf, len, "-");
    return buf;
}

/* " cp=C", " ep=E" (or both) after the grid when above 1, else "". */
static const char *cp_ep_label(const gs_plan_candidate *c, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s", "");
    if (c->cp > 1)
        n += snprintf(buf + n, len - (size_t)n, " cp=%" PRIu64, c->cp);
    if (c->ep > 1 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " ep=%" PRIu64, c->ep);
    if (c->etp && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " etp=%" PRIu64, c->etp);
    return buf;
}

static const char *cand_label(const gs_plan_candidate *c, char *buf, size_t len)
{
    char p[32], k[96], ce[40];
    snprintf(buf, len, GS_GRID_FMT "%s %s%s micro=%" PRIu64 " recompute=%s%s%s%s [%s]",
             c->dp, c->pp, c->tp, cp_ep_label(c, ce, sizeof ce), gs_sharding_name(c->strategy.sharding),
             c->strategy.offload ? "+offload" : "",
             c->micro, gs_recompute_name(c->strategy.recompute), c->pp > 1 ? " " : "",
             c->pp > 1 ? pipe_label(c, p, sizeof p) : "", c->strategy.sequence_parallel ? " sp" : "",
             knob_label(c, k, sizeof k));
    return buf;
}

static json_t *cand_json(const gs_plan_candidate *c)
{
    json_t *o = json_object(), *g = json_object(), *st = json_object();
    json_object_set_new(g, "dp", json_integer((json_int_t)c->dp));
    json_object_set_new(g, "pp", json_integer((json_int_t)c->pp));
    json_object_set_new(g, "tp", json_integer((json_int_t)c->tp));
    if (c->cp > 1) /* with context or expert parallelism only: other plans' documents unchanged */
        json_object_set_new(g, "cp", json_integer((json_int_t)c->cp));
    if (c->ep > 1)
        json_object_set_new(g, "ep", json_integer((json_int_t)c->ep));
    if (c->etp) /* expert tensor parallelism below tp only */
        json_object_set_new(g, "etp", json_integer((json_int_t)c->etp));
    json_object_set_new(o, "grid", g);
    json_object_set_new(st, "sharding", json_string(gs_sharding_name(c->strategy.sharding)));
    json_object_set_new(st, "recompute", json_string(gs_recompute_name(c->strategy.recompute)));
    json_object_set_new(st, "pipeline", json_string(gs_pipeline_name(c->strategy.pipeline)));
    json_object_set_new(st, "virtual_stages", json_integer((json_int_t)c->strategy.virtual_stages));
    json_object_set_new(st, "sequence_parallel", json_boolean(c->strategy.sequence_parallel));
    json_object_set_new(st, "offload", json_boolean(c->strategy.offload));
    json_object_set_new(st, "precision", json_string(gs_precision_name(c->strategy.precision)));
    json_object_set_new(st, "bucket_mb", json_integer((json_int_t)(c->strategy.bucket_bytes >> 20)));
    json_object_set_new(st, "overlap_grad_reduce", json_boolean(c->strategy.overlap_grad_reduce));
    json_object_set_new(st, "overlap_param_gather", json_boolean(c->strategy.overlap_param_gather));
    json_object_set_new(st, "prefetch", json_string(gs_prefetch_name(c->strategy.prefetch)));
    json_object_set_new(st, "forward_prefetch", json_boolean(c->strategy.forward_prefetch));
    json_object_set_new(st, "tp_comm_overlap", json_boolean(c->strategy.tp_comm_overlap));
    json_object_set_new(o, "strategy", st);
    json_object_set_new(o, "micro", json_integer((json_int_t)c->micro));
    json_object_set_new(o, "microbatches", json_integer((json_int_t)c->microbatches));
    json_object_set_new(o, "step_time_s", json_real(c->step_time_s));
    json_object_set_new(o, "tokens_per_s", json_real(c->tokens_per_s));
    json_object_set_new(o, "tokens_per_s_per_gpu", json_real(c->tokens_per_s_per_gpu));
    json_object_set_new(o, "mfu", json_real(c->mfu));
    json_object_set_new(o, "comm_share", json_real(c->comm_share));
    json_object_set_new(o, "bubble_share", json_real(c->bubble_share));
    json_object_set_new(o, "compute_s", json_real(c->compute_s));
    json_t *ex = json_object();
    json_object_set_new(ex, "dp", json_real(c->exposed_s[GS_DIM_DP]));
    json_object_set_new(ex, "tp", json_real(c->exposed_s[GS_DIM_TP]));
    json_object_set_new(ex, "pp", json_real(c->exposed_s[GS_DIM_PP]));
    json_object_set_new(o, "exposed_comm_s", ex);
    json_object_set_new(o, "peak_bytes", json_integer((json_int_t)c->peak_bytes));
    json_object_set_new(o, "gpu_bytes", json_integer((json_int_t)c->gpu_bytes));
    json_object_set_new(o, "simulated_microbatches",
                        json_integer((json_int_t)(c->sim_m2 ? c->sim_m2 : c->sim_m1)));
    json_object_set_new(o, "extrapolated", json_boolean(c->sim_m2 != 0 || c->sim_layers != 0));
    json_object_set_new(o, "closed_form", json_boolean(c->sim_layers != 0));
    return o;
}

static json_t *plan_json(const gs_scenario *s, const gs_plan *p, size_t top, double wall)
{
    json_t *doc = json_object(), *cands = json_array(), *rej = json_object(), *pr = json_object();
    json_object_set_new(doc, "model", json_string(s->model.name));
    json_object_set_new(doc, "cluster", json_string(s->cluster.name));
    json_object_set_new(doc, "gpus", json_integer((json_int_t)p->gpus));
    json_object_set_new(doc, "global_batch", json_integer((json_int_t)p->global_seqs));
    json_object_set_new(doc, "seq", json_integer((json_int_t)s->model.seq));
    for (size_t i = 0; i < p->ncands && i < top; i++)
        json_array_append_new(cands, cand_json(&p->cands[i]));
    json_object_set_new(doc, "candidates", cands);
    for (size_t i = 0; i < p->nrejected; i++)
        json_object_set_new(rej, p->rejected[i].reason, json_integer((json_int_t)p->rejected[i].count));
    json_object_set_new(doc, "rejected", rej);
    for (size_t i = 0; i < p->npruned; i++)
        json_object_set_new(pr, p->pruned[i].reason, json_integer((json_int_t)p->pruned[i].count));
    json_object_set_new(doc, "pruned", pr);
    json_object_set_new(doc, "grids", json_integer((json_int_t)p->grids));
    json_object_set_new(doc, "legal_grids", json_integer((json_int_t)p->legal_grids));
    json_object_set_new(doc, "evaluated", json_integer((json_int_t)p->evaluated));
    json_object_set_new(doc, "simulated", json_integer((json_int_t)p->simulated));
    json_object_set_new(doc, "truncated", json_boolean(p->truncated));
    (void)wall; /* not in the document: same input, same bytes */
    return doc;
}

/* A --shard piece: "shard" {command, index, count, top} and each candidate's exact ranking key
 * "order" {tokens_per_s (hexadecimal, every bit), key (enumeration index)} for gridstep merge. */
static void add_shard_keys(json_t *doc, const gs_plan *p, const gs_plan_opts *po, uint64_t top)
{
    json_t *sh = json_object(), *cands = json_object_get(doc, "candidates");
    json_object_set_new(sh, "command", json_string("plan"));
    json_object_set_new(sh, "index", json_integer((json_int_t)po->shard_index));
    json_object_set_new(sh, "count", json_integer((json_int_t)po->shard_count));
    json_object_set_new(sh, "top", json_integer((json_int_t)top));
    json_object_set_new(doc, "shard", sh);
    for (size_t i = 0; i < json_array_size(cands); i++) {
        char hex[64];
        json_t *o = json_object();
        snprintf(hex, sizeof hex, "%a", p->cands[i].tokens_per_s);
        json_object_set_new(o, "tokens_per_s", json_string(hex));
        json_object_set_new(o, "key", json_integer((json_int_t)p->cands[i].key));
        json_object_set_new(json_array_get(cands, i), "order", o);
    }
}

/* What runner-up r loses against the winner w, largest first. */
typedef struct why_part {
    const char *what;
    double d; /* seconds per step, runner-up minus winner */
} why_part;

static void print_why(const gs_plan_candidate *w, const gs_plan_candidate *r, size_t rank)
{
    why_part part[5] = {
        {"compute", r->compute_s - w->compute_s},
        {"exposed DP communication", r->exposed_s[GS_DIM_DP] - w->exposed_s[GS_DIM_DP]},
        {"exposed TP communication", r->exposed_s[GS_DIM_TP] - w->exposed_s[GS_DIM_TP]},
        {"exposed PP communication", r->exposed_s[GS_DIM_PP] - w->exposed_s[GS_DIM_PP]},
        {"bubble", r->bubble_share * r->step_time_s - w->bubble_share * w->step_time_s},
    };
    for (int i = 0; i < 5; i++) /* largest magnitude first (insertion sort, stable) */
        for (int j = i; j > 0 && fabs(part[j].d) > fabs(part[j - 1].d); j--) {
            why_part t = part[j];
            part[j] = part[j - 1];
            part[j - 1] = t;
        }
    char lab[192], b[32];
    double dstep = r->step_time_s - w->step_time_s;
    printf("  #%zu (%s): step %s%s (%+.1f%%)", rank, cand_label(r, lab, sizeof lab), dstep >= 0 ? "+" : "-",
           gs_fmt_seconds(fabs(dstep), b, sizeof b), 100.0 * dstep / w->step_time_s);
    double floor_s = 0.005 * w->step_time_s;
    int shown = 0;
    for (int i = 0; i < 5 && shown < 3; i++) {
        if (fabs(part[i].d) < floor_s)
            continue;
        printf("%s %s%s %s", shown ? "," : ":", part[i].d >= 0 ? "+" : "-", gs_fmt_seconds(fabs(part[i].d), b, sizeof b),
               part[i].what);
        shown++;
    }
    if (!shown)
        printf(dstep == 0 ? ": the same step (an identical schedule, R3)"
                          : ": no component differs by more than 0.5%% of the step");
    printf("\n");
}

static void print_launch(const gs_scenario *s, const gs_plan_candidate *w)
{
    uint64_t nodes = s->cluster.nodes, gpn = s->cluster.gpus_per_node;
    const gs_strategy *st = &w->strategy;
    printf("\nlaunch (winner; --emit torchrun|accelerate|megatron|slurm writes the whole configuration):\n");
    if (w->pp > 1 || w->tp > 1 || st->sharding == GS_SHARD_NO_SHARD || st->sharding == GS_SHARD_ZERO1) {
        printf("  torchrun --nnodes %" PRIu64 " --nproc-per-node %" PRIu64 " pretrain_gpt.py \\\n", nodes, gpn);
        printf("    --tensor-model-parallel-size %" PRIu64 " --pipeline-model-parallel-size %" PRIu64, w->tp, w->pp);
        if (st->pipeline == GS_PIPE_INTERLEAVED && w->pp > 1)
            printf(" --num-layers-per-virtual-pipeline-stage %" PRIu64,
                   s->model.layers / (w->pp * st->virtual_stages));
        if (st->sequence_parallel)
            printf(" --sequence-parallel");
        if (w->cp > 1)
            printf(" --context-parallel-size %" PRIu64, w->cp);
        if (w->ep > 1)
            printf(" --expert-model-parallel-size %" PRIu64, w->ep);
        if (w->etp)
            printf(" --expert-tensor-parallel-size %" PRIu64, w->etp);
        printf(" \\\n    --micro-batch-size %" PRIu64 " --global-batch-size %" PRIu64 " --seq-length %" PRIu64 " --%s",
               w->micro, s->batch.global_seqs, s->model.seq, gs_precision_name(st->precision));
        if (st->recompute == GS_RECOMPUTE_FULL)
            printf(" --recompute-granularity full --recompute-method uniform");
        else if (st->recompute == GS_RECOMPUTE_SELECTIVE)
            printf(" --recompute-granularity selective");
        if (st->sharding == GS_SHARD_ZERO1)
            printf(" --use-distributed-optimizer");
        else if (st->sharding != GS_SHARD_NO_SHARD)
            printf("\n    # %s over dp=%" PRIu64 ": Megatron-FSDP / DeepSpeed ZeRO on top of TP/PP",
                   gs_sharding_name(st->sharding), w->dp);
        printf("\n");
        return;
    }
    printf("  torchrun --nnodes %" PRIu64 " --nproc-per-node %" PRIu64 " train.py\n", nodes, gpn);
    if (gs_sharding_is_fsdp(st->sharding)) {
        char up[32];
        snprintf(up, sizeof up, "%s", gs_sharding_name(st->sharding));
        for (char *c = up; *c; c++)
            *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        char pre[32];
        snprintf(pre, sizeof pre, "%s", st->prefetch == GS_PREFETCH_NONE ? "None" : gs_prefetch_name(st->prefetch));
        for (char *c = pre; *c; c++)
            *c = (char)(*c >= 'a' && *c <= 'z' && st->prefetch != GS_PREFETCH_NONE ? *c - 32 : *c);
        printf("  FSDP: sharding_strategy=%s, auto_wrap_policy=TRANSFORMER_BASED_WRAP (decoder layer), "
               "backward_prefetch=%s, forward_prefetch=%s, mixed_precision=%s, cpu_offload=%s, "
               "activation_checkpointing=%s, micro-batch %" PRIu64 " x %" PRIu64 " accumulation steps\n",
               strcmp(up, "ZERO3") == 0 ? "FULL_SHARD" : up, pre, st->forward_prefetch ? "true" : "false",
               gs_precision_name(st->precision),
               st->offload ? "true" : "false", gs_recompute_name(st->recompute), w->micro, w->microbatches);
    } else {
        printf("  DeepSpeed: zero_optimization.stage=%d, train_micro_batch_size_per_gpu=%" PRIu64
               ", gradient_accumulation_steps=%" PRIu64 ", %s, activation checkpointing %s\n",
               st->sharding == GS_SHARD_ZERO2 ? 2 : 3, w->micro, w->microbatches, gs_precision_name(st->precision),
               gs_recompute_name(st->recompute));
    }
}

static void print_plan(const gs_scenario *s, const gs_plan *p, size_t top, int default_batch, double wall)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], t1[32];
    uint64_t rejected = 0, pruned = 0;
    for (size_t i = 0; i < p->nrejected; i++)
        rejected += p->rejected[i].grids ? 0 : p->rejected[i].count;
    for (size_t i = 0; i < p->npruned; i++)
        pruned += p->pruned[i].count;
    printf("plan: %s on %" PRIu64 " x %s (%" PRIu64 " GPUs of %s), global batch %" PRIu64
           " sequences of %" PRIu64 " tokens%s\n",
           s->model.name, s->cluster.nodes, s->cluster.name, p->gpus, gs_fmt_bytes(s->cluster.gpu.hbm_bytes, b1, sizeof b1),
           p->global_seqs, s->model.seq, default_batch ? " (default: 2 x GPUs)" : "");
    printf("searched %" PRIu64 " grids (%" PRIu64 " legal) and %" PRIu64 " configurations on them%s: %" PRIu64
           " rejected, %" PRIu64 " pruned or merged, %" PRIu64 " simulated in %.1f s\n\n",
           p->grids, p->legal_grids, p->evaluated, p->truncated ? " (stopped at --max-candidates)" : "", rejected,
           pruned, p->simulated, wall);
    gs_cli_table t;
    gs_cli_table_init(&t, 14);
    gs_cli_table_rowf(&t, "rank\tdp x pp x tp\tsharding\tknobs\tmicro\trecompute\tpipeline\tSP\tstep\ttokens/s/GPU\tMFU\t"
                          "peak/GPU mem (GB)\tNCCL\tbubble");
    for (size_t i = 0; i < p->ncands && i < top; i++) {
        const gs_plan_candidate *c = &p->cands[i];
        char pl[32], kn[96], ce[40];
        gs_cli_table_rowf(&t, "%zu\t" GS_GRID_CELL_FMT "%s\t%s%s\t%s\t%" PRIu64 "\t%s\t%s\t%s\t%s\t%.1f\t%.1f%%\t"
                              "%.1f / %.1f\t%.1f%%\t%.1f%%",
                          i + 1, c->dp, c->pp, c->tp, cp_ep_label(c, ce, sizeof ce), gs_sharding_name(c->strategy.sharding),
                          c->strategy.offload ? "+offload" : "", knob_label(c, kn, sizeof kn), c->micro,
                          gs_recompute_name(c->strategy.recompute),
                          pipe_label(c, pl, sizeof pl), c->strategy.sequence_parallel ? "on" : "off",
                          gs_fmt_seconds(c->step_time_s, t1, sizeof t1), c->tokens_per_s_per_gpu, 100 * c->mfu,
                          (double)c->peak_bytes / 1e9, (double)c->gpu_bytes / 1e9, 100 * c->comm_share,
                          100 * c->bubble_share);
    }
    gs_cli_table_print(&t, stdout, 0);
    gs_cli_table_fini(&t);
    (void)b2;

    printf("\nrejected:\n");
    if (p->nrejected == 0)
        printf("  nothing\n");
    for (size_t i = 0; i < p->nrejected; i++)
        printf("  %-52s %8" PRIu64 " %s\n", p->rejected[i].reason, p->rejected[i].count,
               p->rejected[i].grids ? (p->rejected[i].count == 1 ? "grid" : "grids") : "configurations");
    if (p->npruned) {
        printf("pruned (never faster than a kept twin; see gridstep help plan):\n");
        for (size_t i = 0; i < p->npruned; i++)
            printf("  %-72s %8" PRIu64 "\n", p->pruned[i].reason, p->pruned[i].count);
    }
    if (p->ncands > 1) {
        char lab[192];
        printf("\nwhy #1 (%s) wins, against the runners-up (time per step; + = the runner-up spends more):\n",
               cand_label(&p->cands[0], lab, sizeof lab));
        for (size_t i = 1; i < p->ncands && i < 4; i++)
            print_why(&p->cands[0], &p->cands[i], i + 1);
    }
    print_launch(s, &p->cands[0]);
}

/* The base scenario from presets: model, cluster, nodes; a placeholder grid (dp = GPUs). */
static gs_status scenario_from_presets(const char *model, const char *cluster, uint64_t nodes, uint64_t global,
                                       gs_scenario *s, gs_error *err)
{
    if (!gs_model_preset_find(model))
        return gs_error_set(err, GS_ERR_INPUT, "--model: unknown model '%s' (did you mean '%s'? see gridstep presets models)",
                            model, gs_model_preset_nearest(model));
    const gs_cluster *c = gs_cluster_preset_find(cluster);
    if (!c)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--cluster: unknown cluster '%s' (did you mean '%s'? see gridstep presets clusters)", cluster,
                            gs_cluster_preset_nearest(cluster));
    uint64_t gpus;
    if (gs_mul_u64(nodes, c->gpus_per_node, &gpus) != 0 || gpus > (UINT64_MAX >> 2))
        return gs_error_set(err, GS_ERR_INPUT, "--nodes: %" PRIu64 " nodes is too many", nodes);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model: %s\ncluster: {preset: %s, nodes: %" PRIu64 "}\ngrid: {dp: %" PRIu64 ", pp: 1, tp: 1}\n"
             "batch: {global: %" PRIu64 ", micro: 1}\n",
             gs_model_preset_find(model)->name, c->name, nodes, gpus, global ? global : 2 * gpus);
    return gs_scenario_load_string(yaml, strlen(yaml), "plan", s, err);
}

/* The search itself. Split across MPI ranks (sp active), it searches shard rank/size and
 * writes that JSON piece to *piece (malloc'ed, *piece_len bytes) instead of standard output. */
static gs_status plan_run(int argc, char **argv, const gs_mpi_split *sp, char **piece, size_t *piece_len,
                          gs_error *err)
{
    enum { O_MODEL = 256, O_CLUSTER, O_NODES, O_BATCH, O_SEQ, O_TOP, O_JSON, O_TP, O_PP, O_DP, O_CP, O_EP, O_SHARD, O_MICRO,
           O_ETP, O_MAX, O_THREADS, O_NOEXTRA, O_EMIT, O_SHARD_IN, O_QUIET };
    static const struct option opts[] = {
        {"model", required_argument, NULL, O_MODEL}, {"cluster", required_argument, NULL, O_CLUSTER},
        {"nodes", required_argument, NULL, O_NODES}, {"global-batch", required_argument, NULL, O_BATCH},
        {"seq", required_argument, NULL, O_SEQ},     {"top", required_argument, NULL, O_TOP},
        {"json", no_argument, NULL, O_JSON},         {"tp", required_argument, NULL, O_TP},
        {"pp", required_argument, NULL, O_PP},       {"dp", required_argument, NULL, O_DP},
        {"cp", required_argument, NULL, O_CP},       {"ep", required_argument, NULL, O_EP},
        {"etp", required_argument, NULL, O_ETP},
        {"sharding", required_argument, NULL, O_SHARD}, {"micro", required_argument, NULL, O_MICRO},
        {"max-candidates", required_argument, NULL, O_MAX}, {"threads", required_argument, NULL, O_THREADS},
        {"no-extrapolate", no_argument, NULL, O_NOEXTRA}, {"emit", required_argument, NULL, O_EMIT},
        {"shard", required_argument, NULL, O_SHARD_IN}, {"quiet", no_argument, NULL, O_QUIET},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL, *cluster = NULL;
    uint64_t nodes = 0, global = 0, seq = 0, top = 10, v;
    int json = 0, emit = 0, quiet = 0, c;
    gs_launch_kind kind = GS_LAUNCH_TORCHRUN;
    gs_plan_opts po;
    gs_plan_opts_init(&po);
    gs_status rc = GS_OK;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && rc == GS_OK) {
        switch (c) {
        case O_MODEL: model = optarg; break;
        case O_CLUSTER: cluster = optarg; break;
        case O_NODES: rc = parse_u64("--nodes", optarg, &nodes, err); break;
        case O_BATCH: rc = parse_u64("--global-batch", optarg, &global, err); break;
        case O_SEQ: rc = parse_u64("--seq", optarg, &seq, err); break;
        case O_TOP: rc = parse_u64("--top", optarg, &top, err); break;
        case O_JSON: json = 1; break;
        case O_TP: rc = parse_list("--tp", optarg, &po.tp, err); break;
        case O_PP: rc = parse_list("--pp", optarg, &po.pp, err); break;
        case O_DP: rc = parse_list("--dp", optarg, &po.dp, err); break;
        case O_CP: rc = parse_list("--cp", optarg, &po.cp, err); break;
        case O_EP: rc = parse_list("--ep", optarg, &po.ep, err); break;
        case O_ETP: rc = parse_list("--etp", optarg, &po.etp, err); break;
        case O_MICRO: rc = parse_list("--micro", optarg, &po.micro, err); break;
        case O_SHARD: rc = parse_shardings(optarg, &po.sharding_mask, err); break;
        case O_MAX: rc = parse_u64("--max-candidates", optarg, &po.max_candidates, err); break;
        case O_THREADS:
            if ((rc = parse_u64("--threads", optarg, &v, err)) == GS_OK) {
                if (v > 64)
                    rc = gs_error_set(err, GS_ERR_INPUT, "--threads: found %" PRIu64 ", expected 1 to 64", v);
                po.threads = (int)v;
            }
            break;
        case O_NOEXTRA: po.no_extrapolate = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_SHARD_IN: rc = gs_shard_parse("--shard", optarg, &po.shard_index, &po.shard_count, err); break;
        case O_EMIT:
            if (gs_launch_kind_parse(optarg, &kind) != 0)
                rc = gs_error_set(err, GS_ERR_INPUT,
                                  "--emit: found '%s', expected torchrun, accelerate, megatron, slurm or torchtitan\nusage: %s",
                                  optarg, usage);
            emit = 1;
            break;
        default:
            return gs_cli_bad_option(argv[optind - 1], opts, "", usage, err);
        }
    }
    if (rc != GS_OK)
        return rc;
    if (po.shard_count && !json)
        return gs_error_set(err, GS_ERR_INPUT, "--shard needs --json (pieces for gridstep merge)\nusage: %s", usage);
    int split = gs_mpi_split_active(sp);
    if (split && po.shard_count)
        return gs_error_set(err, GS_ERR_INPUT, "--shard under mpirun (%d ranks): the ranks are the shards; run one or "
                                               "the other", sp->size);
    if (split && (!json || emit))
        return gs_error_set(err, GS_ERR_INPUT, "under mpirun (%d ranks) plan needs --json (and no --emit): the ranks' "
                                               "JSON pieces are merged on rank 0\nusage: %s", sp->size, usage);
    if (split) { /* rank r searches shard r/size, as --shard would */
        po.shard_index = (uint64_t)sp->rank;
        po.shard_count = (uint64_t)sp->size;
    }
    gs_scenario s;
    int default_batch = 0;
    if (optind < argc) {
        const char *path = NULL;
        if ((rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err)) != GS_OK)
            return rc;
        if (model || cluster || nodes)
            return gs_error_set(err, GS_ERR_INPUT,
                                "give either a scenario or --model/--cluster/--nodes, not both\nusage: %s", usage);
        if ((rc = gs_scenario_load_file(path, &s, err)) != GS_OK)
            return rc;
        if (global)
            s.batch.global_seqs = global;
    } else {
        if (!model || !cluster || !nodes)
            return gs_error_set(err, GS_ERR_INPUT, "plan needs --model, --cluster and --nodes (or a scenario)\nusage: %s",
                                usage);
        if ((rc = scenario_from_presets(model, cluster, nodes, global, &s, err)) != GS_OK)
            return rc;
        default_batch = global == 0;
    }
    if (seq)
        s.model.seq = seq;
    po.eval = eval_sim;
    /* R4 keeps the table and the runners-up exact: the best max(top, 4) */
    po.keep = top > 4 ? (size_t)top : 4;
    gs_sim_bound *bound = NULL;
    if (gs_sim_bound_create(&bound) != GS_OK)
        return gs_error_set(err, GS_ERR_NOMEM, "plan: out of memory");
    po.bound = gs_sim_step_bound;
    po.bound_ctx = bound;
    po.comm_bound = gs_sim_comm_bound;
    /* under mpirun the first rank reports its shard's progress for all */
    gs_progress prog;
    gs_progress_init(&prog, "gridstep plan", "configurations to simulate", !quiet && (!split || sp->rank == 0));
    prog.bound = 1; /* the bound R4 prunes some of them as the search goes */
    po.progress = gs_progress_callback;
    po.progress_ctx = &prog;
    gs_plan *p = NULL;
    double t0 = now_s();
    gs_cli_keep_freed_memory();
    rc = gs_plan_run(&s, &po, &p, err);
    gs_sim_bound_destroy(bound);
    if (rc == GS_OK) { /* the bound is known now: what was simulated */
        prog.bound = 0;
        gs_progress_update(&prog, p->simulated, p->simulated, NULL);
    }
    gs_progress_end(&prog);
    if (rc != GS_OK)
        return rc;
    double wall = now_s() - t0;
    if (emit && p->ncands == 0) {
        rc = gs_error_set(err, GS_ERR_INPUT, "--emit: no configuration fits, nothing to launch");
    } else if (emit) {
        rc = emit_winner(&s, p, kind, err);
    } else if (json) {
        json_t *doc = plan_json(&s, p, (size_t)top, wall);
        if (po.shard_count)
            add_shard_keys(doc, p, &po, top);
        if (split) {
            FILE *f = open_memstream(piece, piece_len);
            if (!f) {
                rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for this rank's piece");
            } else {
                rc = gs_cli_json_fprint(f, doc, err);
                if (fclose(f) != 0 && rc == GS_OK)
                    rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for this rank's piece");
            }
        } else {
            rc = gs_cli_json_print(doc, err);
        }
        json_decref(doc);
    } else {
        print_plan(&s, p, (size_t)top, default_batch, wall);
    }
    gs_plan_destroy(p);
    return rc;
}

gs_status gs_cmd_plan(int argc, char **argv, gs_error *err)
{
    gs_mpi_split sp;
    char *piece = NULL;
    size_t len = 0;
    gs_status rc = gs_mpi_split_begin(&sp, err);
    if (rc != GS_OK)
        return rc;
    rc = plan_run(argc, argv, &sp, &piece, &len, err);
    rc = gs_mpi_split_finish(&sp, "plan", rc, piece, len, NULL, err);
    free(piece);
    return rc;
}
