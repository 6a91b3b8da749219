/* Benchmark: schedule build time and peak memory (make bench; not part of make check).
 * usage: bench_schedule [--exact] SCENARIO.yaml ... ; prints one line per scenario. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/schedule.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int exact = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exact") == 0) {
            exact = 1;
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
        double t0 = now_s();
        gs_schedule *sch = NULL;
        if (gs_schedule_build(&s, &m, exact, &sch, &err) != GS_OK) {
            fprintf(stderr, "build: %s\n", err.msg);
            return 1;
        }
        double t1 = now_s();
        size_t events = 0;
        for (size_t r = 0; r < sch->nranks; r++)
            events += sch->ranks[r].nevents;
        gs_status v = gs_schedule_validate(sch, &s, &err);
        double t2 = now_s();
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("%-28s %-6s ranks %7zu  events %10zu  build %7.3f s  (%.2f M events/s)  validate %7.3f s %s  "
               "peak RSS %.0f MiB\n",
               s.name, exact ? "exact" : "class", sch->nranks, events, t1 - t0, (double)events / (t1 - t0) / 1e6,
               t2 - t1, v == GS_OK ? "ok" : "FAILED", (double)ru.ru_maxrss / 1024.0);
        if (v != GS_OK) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        }
        gs_schedule_destroy(sch);
        exact = 0;
    }
    return rc;
}
