/* Benchmark: sim time, events/s and peak memory (make bench; not part of make check).
 * usage: bench_sim [--queue] [--exact] [--flow] [--max-cpu S] [--max-mb M] [--min-rate E]
 *        SCENARIO.yaml ... (flags apply to the next scenario; run one measured scenario per
 * process: the peak RSS is the process's). With targets, each prints its ratio to the target
 * (CPU seconds and MB: measured / maximum, at most 1 passes; events per CPU-second: measured /
 * minimum, at least 1 passes). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sim/queue.h"
#include "sim/sim.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The event queue alone: 10 M pushes and pops in a DES-like pattern (a few thousand pending). */
static void bench_queue(void)
{
    gs_queue q = {0};
    unsigned s = 1;
    double now = 0;
    const long n = 10000000, pending = 4096;
    double t0 = now_s();
    for (long i = 0; i < pending; i++) {
        s = s * 1103515245u + 12345u;
        gs_queue_push(&q, (double)(s >> 8) * 1e-9, (uint64_t)i, 0);
    }
    for (long i = 0; i < n; i++) {
        gs_qnode e = gs_queue_pop(&q);
        now = e.t;
        s = s * 1103515245u + 12345u;
        gs_queue_push(&q, now + (double)(s >> 8) * 1e-9, (uint64_t)i, 0);
    }
    double t1 = now_s();
    printf("event queue: %ld pop+push pairs with %ld pending in %.3f s = %.1f M events/s\n", n, pending, t1 - t0,
           (double)n / (t1 - t0) / 1e6);
    gs_queue_fini(&q);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    int exact = 0, flow = 0;
    double max_cpu = 0, max_mb = 0, min_rate = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--queue") == 0) {
            bench_queue();
            continue;
        }
        if (strcmp(argv[i], "--exact") == 0) {
            exact = 1;
            continue;
        }
        if (strcmp(argv[i], "--flow") == 0) {
            flow = 1;
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--max-cpu") == 0) {
            max_cpu = atof(argv[++i]);
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--max-mb") == 0) {
            max_mb = atof(argv[++i]);
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--min-rate") == 0) {
            min_rate = atof(argv[++i]);
            continue;
        }
        gs_scenario s;
        gs_mesh m;
        gs_error err;
        gs_diag w;
        gs_error_init(&err);
        gs_diag_init(&w);
        if (gs_scenario_load_file(argv[i], &s, &err) != GS_OK || gs_scenario_mesh(&s, &m, &w, &err) != GS_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        gs_diag_fini(&w);
        gs_report rep;
        double t0 = now_s(), c0 = cpu_s();
        gs_backend_opts bo = {flow, NULL, NULL, NULL};
        if (gs_sim_scenario(&s, &m, exact, &bo, &rep, NULL, &err) != GS_OK) {
            fprintf(stderr, "sim: %s\n", err.msg);
            return 1;
        }
        double t1 = now_s(), cpu = cpu_s() - c0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double mb = (double)ru.ru_maxrss * 1024.0 / 1e6, rate = (double)rep.events / cpu / 1e6;
        printf("sim %-26s %-6s %-8s %6llu GPUs  events %10llu  %7.3f s wall, %7.3f CPU-s  (%.2f M events per "
               "CPU-second, build and report included)  step %.3f s  peak RSS %.0f MB\n",
               s.name, exact ? "exact" : "class", flow ? "flow" : "analytic", (unsigned long long)m.world,
               (unsigned long long)rep.events, t1 - t0, cpu, rate, rep.step_time_s, mb);
        if (max_cpu > 0)
            printf("  judged: CPU %.3f s / %.0f s = %.2f (passes at most 1)\n", cpu, max_cpu, cpu / max_cpu);
        if (max_mb > 0)
            printf("  judged: peak RSS %.0f MB / %.0f MB = %.2f (passes at most 1)\n", mb, max_mb, mb / max_mb);
        if (min_rate > 0)
            printf("  judged: %.2f M events per CPU-second / %.0f M = %.2f (passes at least 1)\n", rate, min_rate,
                   rate / min_rate);
        max_cpu = max_mb = min_rate = 0;
        gs_report_fini(&rep);
        exact = 0;
        flow = 0;
    }
    return 0;
}
