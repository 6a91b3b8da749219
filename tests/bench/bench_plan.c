/* Benchmark: `gridstep plan` search speed (make bench; not part of make check): every
 * configuration of llama2-70b on 1,024 A100 80GB (128 DGX A100 nodes, HDR IB), global batch
 * 2 x GPUs = 2,048 sequences, as `gridstep plan` searches it (the best 10 kept); prints the
 * configurations evaluated and simulated, wall and CPU seconds, and the ratios it is judged by:
 * wall against 10 s, and the first tier's configurations per core-second against 20,000.
 * --winner: on a part of the space small enough to simulate every configuration that fits (tp 8,
 * pp 2 and 4, micro 1 and 2, the DDP / ZeRO-1 and FSDP full_shard strategies, 64 GPUs), the
 * tiered search's winner against the winner of simulating them all (keep 0, no bound).
 * usage: bench_plan [--threads N] [--model M] [--nodes N] [--keep K] [--winner] */
#include "config.h"

#ifdef HAVE_MALLOC_H
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/plan.h"
#include "sim/bound.h"
#include "sim/sim.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

/* One search; bounded = 0: simulate every configuration that fits (keep 0, no bounds). */
static gs_plan *run(const gs_scenario *s, gs_plan_opts *o, int bounded)
{
    gs_sim_bound *bound = NULL;
    gs_error err;
    gs_error_init(&err);
    if (gs_sim_bound_create(&bound) != GS_OK)
        return NULL;
    o->eval = eval_sim;
    if (bounded) {
        o->bound = gs_sim_step_bound;
        o->bound_ctx = bound;
        o->comm_bound = gs_sim_comm_bound;
    } else {
        o->keep = 0;
        o->bound = NULL;
        o->comm_bound = NULL;
    }
    gs_plan *p = NULL;
    if (gs_plan_run(s, o, &p, &err) != GS_OK)
        fprintf(stderr, "bench_plan: %s\n", err.msg);
    gs_sim_bound_destroy(bound);
    return p;
}

static void describe(const char *what, const gs_plan *p, double wall, double cpu)
{
    const gs_plan_candidate *w = &p->cands[0];
    printf("plan %s: %llu GPUs, %llu grids (%llu legal), %llu configurations evaluated, %llu simulated (%llu "
           "simulator runs) in %.2f s wall, %.2f CPU-s; best dp=%llu pp=%llu tp=%llu %s micro=%llu key %llu: %.0f "
           "tokens/s\n",
           what, (unsigned long long)p->gpus, (unsigned long long)p->grids, (unsigned long long)p->legal_grids,
           (unsigned long long)p->evaluated, (unsigned long long)p->simulated, (unsigned long long)p->sim_runs, wall,
           cpu, (unsigned long long)w->dp, (unsigned long long)w->pp, (unsigned long long)w->tp,
           gs_sharding_name(w->strategy.sharding), (unsigned long long)w->micro, (unsigned long long)w->key,
           w->tokens_per_s);
}

static int load(const char *model, unsigned long nodes, gs_scenario *s)
{
    char yaml[256];
    gs_error err;
    gs_error_init(&err);
    snprintf(yaml, sizeof yaml,
             "model: %s\ncluster: {preset: dgx-a100-80g, nodes: %lu}\ngrid: {dp: %lu, pp: 1, tp: 1}\n"
             "batch: {global: %lu, micro: 1}\n",
             model, nodes, nodes * 8, nodes * 16);
    if (gs_scenario_load_string(yaml, strlen(yaml), "bench-plan", s, &err) != GS_OK) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* The tiered search's winner against simulating every fitting configuration of a part of the
 * space. */
static int winner_check(const char *model, int threads)
{
    gs_scenario s;
    if (load(model, 8, &s) != 0)
        return 2;
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.threads = threads;
    o.tp = (gs_plan_list){{8}, 1};
    o.pp = (gs_plan_list){{2, 4}, 2};
    o.micro = (gs_plan_list){{1, 2}, 2};
    o.sharding_mask = 1u << GS_SHARD_ZERO1 | 1u << GS_SHARD_FULL_SHARD;
    o.keep = 10;
    double t0 = now_s(), c0 = cpu_s();
    gs_plan *a = run(&s, &o, 1);
    double t1 = now_s(), c1 = cpu_s();
    gs_plan *b = run(&s, &o, 0);
    double t2 = now_s(), c2 = cpu_s();
    if (!a || !b)
        return 1;
    describe("tiered", a, t1 - t0, c1 - c0);
    describe("every fitting configuration simulated", b, t2 - t1, c2 - c1);
    int same = a->cands[0].key == b->cands[0].key && a->cands[0].step_time_s == b->cands[0].step_time_s;
    printf("  judged: winner %s the full simulation's (key %llu vs %llu)\n", same ? "identical to" : "DIFFERS from",
           (unsigned long long)a->cands[0].key, (unsigned long long)b->cands[0].key);
    gs_plan_destroy(a);
    gs_plan_destroy(b);
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *model = "llama2-70b";
    unsigned long nodes = 128;
    int threads = 2, winner = 0;
    unsigned long keep = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--winner") == 0)
            winner = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--model") == 0)
            model = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--keep") == 0)
            keep = strtoul(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--nodes") == 0)
            nodes = strtoul(argv[++i], NULL, 10);
    }
#if defined(HAVE_MALLOPT) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD) && defined(M_ARENA_MAX)
    /* as `gridstep plan` (gs_cli_keep_freed_memory): freed schedules stay in the heap */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
#endif
    if (winner)
        return winner_check(model, threads);
    gs_scenario s;
    if (load(model, nodes, &s) != 0)
        return 2;
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.threads = threads;
    o.keep = keep; /* 10: as `gridstep plan` with its default --top 10 */
    double t0 = now_s(), c0 = cpu_s();
    gs_plan *p = run(&s, &o, keep > 0);
    double t1 = now_s(), c1 = cpu_s();
    if (!p)
        return 1;
    describe("70B class", p, t1 - t0, c1 - c0);
    for (size_t i = 0; i < p->nrejected; i++)
        printf("  rejected %-50s %8llu %s\n", p->rejected[i].reason, (unsigned long long)p->rejected[i].count,
               p->rejected[i].grids ? "grids" : "configurations");
    for (size_t i = 0; i < p->npruned; i++)
        printf("  pruned   %-70s %8llu\n", p->pruned[i].reason, (unsigned long long)p->pruned[i].count);
    printf("  judged: wall %.2f s / 10 s = %.2f (passes at most 1; %d threads, the machine's load included)\n",
           t1 - t0, (t1 - t0) / 10.0, threads);
    printf("  judged: CPU %.2f s / (10 s x 2 cores) = %.2f (the wall target on 2 idle cores)\n", c1 - c0,
           (c1 - c0) / 20.0);
    double rate = p->tier1_cpu_s > 0 ? (double)p->evaluated / p->tier1_cpu_s : 0;
    printf("  judged: first tier %llu configurations in %.3f CPU-s = %.0f per core-second / 20,000 = %.2f (passes at "
           "least 1)\n",
           (unsigned long long)p->evaluated, p->tier1_cpu_s, rate, rate / 20000.0);
    gs_plan_destroy(p);
    return 0;
}
