/* Benchmark: sim time, events/s and peak memory (make bench; not part of make check).
 * usage: bench_sim [--exact] [--flow] SCENARIO.yaml ... (flags apply to the next scenario) */
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

int main(int argc, char **argv)
{
    int exact = 0, flow = 0;
    bench_queue();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exact") == 0) {
            exact = 1;
            continue;
        }
        if (strcmp(argv[i], "--flow") == 0) {
            flow = 1;
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
        double t0 = now_s();
        gs_backend_opts bo = {flow, NULL, NULL, NULL};
        if (gs_sim_scenario(&s, &m, exact, &bo, &rep, NULL, &err) != GS_OK) {
            fprintf(stderr, "sim: %s\n", err.msg);
            return 1;
        }
        double t1 = now_s();
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("sim %-26s %-6s %-8s %6llu GPUs  events %10llu  %7.3f s  (%.2f M events/s, build included)  step %.3f s"
               "  peak RSS %.0f MiB\n",
               s.name, exact ? "exact" : "class", flow ? "flow" : "analytic", (unsigned long long)m.world, (unsigned long long)rep.events, t1 - t0,
               (double)rep.events / (t1 - t0) / 1e6, rep.step_time_s, (double)ru.ru_maxrss / 1024.0);
        gs_report_fini(&rep);
        exact = 0;
        flow = 0;
    }
    return 0;
}
