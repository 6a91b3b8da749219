/* Benchmark: `gridstep plan` search speed (make bench; not part of make check): every legal
 * configuration of llama2-70b on 1,024 A100 80GB (128 DGX A100 nodes, HDR IB), global batch
 * 2 x GPUs = 2,048 sequences; prints configurations evaluated, simulated and seconds.
 * usage: bench_plan [--threads N] [--model M] [--nodes N] [--keep K] (--keep 0: simulate every survivor) */
#include "config.h"

#ifdef HAVE_MALLOC_H
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/plan.h"
#include "sim/compute.h"
#include "sim/bound.h"
#include "sim/sim.h"

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

int main(int argc, char **argv)
{
    const char *model = "llama2-70b";
    unsigned long nodes = 128;
    int threads = 2;
    unsigned long keep = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--model") == 0)
            model = argv[i + 1];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--nodes") == 0)
            nodes = strtoul(argv[i + 1], NULL, 10);
    }
    char yaml[256];
    snprintf(yaml, sizeof yaml,
             "model: %s\ncluster: {preset: dgx-a100-80g, nodes: %lu}\ngrid: {dp: %lu, pp: 1, tp: 1}\n"
             "batch: {global: %lu, micro: 1}\n",
             model, nodes, nodes * 8, nodes * 16);
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    if (gs_scenario_load_string(yaml, strlen(yaml), "bench-plan", &s, &err) != GS_OK) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        return 2;
    }
    gs_plan_opts o;
    gs_plan_opts_init(&o);
    o.threads = threads;
    o.eval = eval_sim;
    o.keep = keep; /* 10: as `gridstep plan` with its default --top 10 */
    gs_sim_bound *bound = NULL;
    if (gs_sim_bound_create(&bound) != GS_OK)
        return 1;
    o.bound = gs_sim_step_bound;
    o.bound_ctx = bound;
    o.comm_bound = gs_sim_comm_bound;
    gs_plan *p = NULL;
#if defined(HAVE_MALLOPT) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD) && defined(M_ARENA_MAX)
    /* as `gridstep plan` (gs_cli_keep_freed_memory): freed schedules stay in the heap */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
#endif
    double t0 = now_s();
    if (gs_plan_run(&s, &o, &p, &err) != GS_OK) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        return 1;
    }
    double t1 = now_s();
    gs_sim_bound_destroy(bound);
    uint64_t pruned = 0, rejected = 0;
    for (size_t i = 0; i < p->npruned; i++)
        pruned += p->pruned[i].count;
    for (size_t i = 0; i < p->nrejected; i++)
        if (!p->rejected[i].grids)
            rejected += p->rejected[i].count;
    const gs_plan_candidate *w = &p->cands[0];
    printf("plan %s on %llu A100 80GB (%d threads): %llu grids (%llu legal), %llu configurations evaluated, "
           "%llu rejected, %llu pruned or merged, %llu simulated (%llu simulator runs) in %.2f s; "
           "best dp=%llu pp=%llu tp=%llu %s micro=%llu: %.0f tokens/s\n",
           model, (unsigned long long)p->gpus, threads, (unsigned long long)p->grids,
           (unsigned long long)p->legal_grids, (unsigned long long)p->evaluated, (unsigned long long)rejected,
           (unsigned long long)pruned, (unsigned long long)p->simulated, (unsigned long long)p->sim_runs, t1 - t0,
           (unsigned long long)w->dp, (unsigned long long)w->pp, (unsigned long long)w->tp,
           gs_sharding_name(w->strategy.sharding), (unsigned long long)w->micro, w->tokens_per_s);
    for (size_t i = 0; i < p->nrejected; i++)
        printf("  rejected %-50s %8llu %s\n", p->rejected[i].reason, (unsigned long long)p->rejected[i].count,
               p->rejected[i].grids ? "grids" : "configurations");
    for (size_t i = 0; i < p->npruned; i++)
        printf("  pruned   %-70s %8llu\n", p->pruned[i].reason, (unsigned long long)p->pruned[i].count);
    gs_plan_destroy(p);
    return 0;
}
