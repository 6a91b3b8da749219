/* `gridstep calibrate` under mpirun or srun: process 0 measures its machine alone, then every
 * process takes part in the collectives between processes (calib/procs.c), and process 0 merges
 * their lines into the calibration file's document. The processes' statuses are agreed by the
 * caller (cli/cmd_calibrate.c). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "calib/procs.h"
#include "cli/calib_print.h"
#include "cli/calibrate_cmd.h"
#include "cli/cli_common.h"
#include "cli/mpi_exec.h"

/* links.<cls> of doc gets the lines measured between processes: a group size already there is
 * replaced (the processes' transport is what a multi-process run uses), others added. */
static void merge_links(json_t *doc, json_t *procs_links)
{
    json_t *links = json_object_get(doc, "links");
    if (!links) {
        links = json_object();
        json_object_set_new(doc, "links", links);
    }
    const char *cls;
    json_t *from;
    json_object_foreach(procs_links, cls, from) {
        json_t *to = json_object_get(links, cls);
        if (!to) {
            json_object_set(links, cls, from);
            continue;
        }
        const char *op;
        json_t *v;
        json_object_foreach(from, op, v) {
            json_t *have = json_object_get(to, op);
            if (!json_is_array(v) || !json_is_array(have)) {
                json_object_set(to, op, v);
                continue;
            }
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *line = json_array_get(v, i);
                json_int_t n = json_integer_value(json_object_get(line, "ranks"));
                size_t j = 0, at = json_array_size(have);
                for (j = 0; j < json_array_size(have); j++) {
                    json_int_t m = json_integer_value(json_object_get(json_array_get(have, j), "ranks"));
                    if (m == n)
                        break;
                    if (m > n && at == json_array_size(have))
                        at = j;
                }
                if (j < json_array_size(have))
                    json_array_set(have, j, line);
                else
                    json_array_insert(have, at, line); /* ascending group sizes */
            }
        }
    }
}

/* 1 on every process when `mine` is 1 on every process (collective over the job's processes);
 * a failed exchange is this process's error. */
static int all_agree(const gs_exec_boot *b, int mine, gs_status *rc, gs_error *err)
{
    unsigned char me = mine ? 1 : 0, *all = calloc((size_t)b->procs, 1);
    gs_error e2;
    gs_error_init(&e2);
    gs_status s2 = all ? b->allgather(b->ctx, &me, 1, all, &e2) : gs_error_set(&e2, GS_ERR_NOMEM, "out of memory");
    int ok = s2 == GS_OK;
    for (int p = 0; ok && p < b->procs; p++)
        ok = all[p];
    if (s2 != GS_OK && *rc == GS_OK)
        *rc = s2, *err = e2;
    free(all);
    return ok;
}

/* Process 0's progress line for the collectives between processes, on a terminal
 * (calib/procs.h: progress): what is being measured, cleared once done (what NULL). */
static void procs_progress(void *arg, const char *what)
{
    (void)arg;
    if (what)
        fprintf(stderr, "\r\033[Kcalibrate: %s", what);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/* Process 0 measures its machine (when its options were read: rc GS_OK) and tells every other
 * process whether it did; the others wait for that word, polling quietly. *go: 1 when process 0
 * succeeded, as this process heard it. */
static gs_status process0_first(const gs__calib_proc *p, gs_status rc, json_t **doc, unsigned char *go,
                                gs_error *err)
{
    const gs_exec_boot *b = &p->mx->boot;
    *go = 0;
    if (p->prank == 0) {
        if (rc == GS_OK)
            rc = gs__calib_here(p->a, doc, err);
        *go = rc == GS_OK;
        for (int q = 1; q < b->procs; q++) {
            gs_error e2;
            gs_error_init(&e2);
            gs_status s2 = b->send(b->ctx, q, go, 1, &e2);
            if (s2 != GS_OK && rc == GS_OK)
                rc = s2, *err = e2;
        }
    } else {
        gs_boot_wait w = {.timeout_s = 4 * 3600.0};
        gs_error e2;
        gs_error_init(&e2);
        gs_boot_outcome oc = b->recv(b->ctx, 0, go, 1, &w, &e2);
        if (oc != GS_BOOT_DONE) {
            *go = 0;
            if (rc == GS_OK)
                rc = oc == GS_BOOT_FAILED ? (*err = e2, GS_ERR_RUNTIME)
                                          : gs_error_set(err, GS_ERR_RUNTIME, "rank %d: process 0 did not finish its "
                                                         "part of the calibration", p->prank);
        }
    }
    return rc;
}

/* The collectives between the processes (hosts[p]: process p's host); process 0 merges their
 * lines into doc and prints them. */
static gs_status measure_between(const gs__calib_proc *p, const char **hosts, json_t *doc, gs_error *err)
{
    const gs__calib_args *a = p->a;
    int lr, lp;
    for (int q = 0; q < p->mx->boot.procs; q++)
        hosts[q] = gs_mpi_exec_host(p->mx, q, &lr, &lp);
    /* nccl-tests' 1 KiB .. 1 GiB on a device (x16 quick), the host scenarios' 1 KiB .. 16 MiB
     * (1 MiB quick) on the host driver, x4 */
    uint64_t sizes[24];
    size_t ns = 0;
    uint64_t top = a->ops->device_memory ? (1u << 30) : a->quick ? (1u << 20) : (16u << 20);
    for (uint64_t sz = 1024; sz <= top && ns < 24; sz *= a->ops->device_memory && a->quick ? 16 : 4)
        sizes[ns++] = sz;
    gs_calib_procs *cp = NULL;
    gs_cal_spell spell; /* the same value on every process: the environment is theirs in common */
    gs_calib_procs_opts po = {.hosts = hosts, .sizes = sizes, .nsizes = ns, .quick = a->quick,
                              .set = gs_cli_driver_settings(), .spell = &spell};
    if (p->prank == 0 && !a->quiet && isatty(STDERR_FILENO))
        po.progress = procs_progress;
    gs_status rc = gs_cal_spell_parse(&spell, getenv("GRIDSTEP_CALIB_SPELL"), err);
    if (rc == GS_OK)
        rc = gs_calib_procs_run(a->ops, &p->mx->boot, &po, &cp, err);
    if (rc == GS_OK && p->prank == 0)
        gs_cal_spell_note(&spell, "between processes");
    if (rc == GS_OK && p->prank == 0) {
        json_t *links = gs_calib_procs_links(cp);
        merge_links(doc, links);
        json_decref(links);
        json_t *meas = json_object_get(doc, "measurements");
        if (meas)
            json_object_set_new(meas, "between_processes", gs_calib_procs_measurements(cp));
        gs_calib_procs_print(cp, stdout);
    }
    gs_calib_procs_free(cp);
    return rc;
}

/* Under a launcher: process 0 measures its machine alone first; then, when every process is
 * ready (its own options read, the same driver and sizes), every process takes part in the
 * collectives between processes. Every process returns its own status (agreed by the caller,
 * which reports the failed process's error), and *all_ok 1 only when every process succeeded
 * (the file is written only then). */
gs_status gs__calib_launched(const gs__calib_proc *p, gs_status rc, json_t **doc, int *all_ok, gs_error *err)
{
    const gs_exec_boot *b = &p->mx->boot;
    *all_ok = 0;
    unsigned char go = 0;
    rc = process0_first(p, rc, doc, &go, err);
    /* every process or none: a process whose options failed has no driver, and one that failed
     * otherwise could pick other sizes (the collectives would not match) */
    if (!all_agree(b, go && rc == GS_OK, &rc, err))
        return rc;
    const char **hosts = calloc((size_t)b->procs, sizeof *hosts);
    if (!hosts)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    rc = measure_between(p, hosts, *doc, err);
    free(hosts);
    /* the file is written only when every process measured (a process that sees another one
     * fail keeps its own status: the agreement afterwards gives every one the failed one's) */
    *all_ok = all_agree(b, rc == GS_OK, &rc, err);
    return rc;
}
