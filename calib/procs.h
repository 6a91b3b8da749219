/* `gridstep calibrate` under a launcher (mpirun, srun): the collectives between the processes of
 * the job, one rank per process (exec/boot.h), timed with the driver's stream events as
 * calib/device.c times them (a batch of calls between two events; the slowest process per
 * repeat; the median of repeats), for the link classes the calibration file names:
 *   - with L processes on each of H >= 2 hosts, in blocks (mpirun's default by-slot placement)
 *     or round robin (--map-by node), the grid a cluster makes of them: tensor-parallel-like groups of the L processes of a host
 *     (links.intra at L ranks, every host's group at once) and data-parallel-like groups of one
 *     process per host, rank-aligned (links.inter at H ranks, the L groups at once, as they
 *     share the hosts' links in a step);
 *   - otherwise the P processes as one group: links.intra when they share one host, links.inter
 *     when they span hosts;
 *   - send/recv: a ping-pong between process 0 and the first process on another host (inter),
 *     and between processes 0 and 1 when they share a host (intra).
 * Every process calls gs_calib_procs_run (it is collective); process 0 gets the fits.
 *
 * Ownership: gs_calib_procs_run allocates the result, gs_calib_procs_free frees it; the JSON from
 * gs_calib_procs_links is the caller's. The options (host names, sizes, spell) are borrowed for
 * the call. The result's fields are read by its printer (cli/calib_print.c) and written only here. */
#ifndef GS_CALIB_PROCS_H
#define GS_CALIB_PROCS_H

#include <jansson.h>
#include <stdint.h>

#include "calib/ops.h"
#include "engine/status.h"
#include "exec/boot.h"
#include "exec/driver.h"

#define GS_CALIB_PROCS_MAX_SIZES 24

typedef struct gs_calib_procs_opts {
    const char *const *hosts; /* process p's host name (boot->procs of them) */
    const uint64_t *sizes;    /* nccl-tests sizes in bytes, ascending */
    size_t nsizes;            /* 3 .. GS_CALIB_PROCS_MAX_SIZES */
    int quick;                /* batches of 5 calls above 1 MiB and 20 below (else 20 and 50) */
    gs_driver_settings set;   /* the environment's choices for the driver */
    gs_cal_spell *spell;      /* the test hook, counted by process 0 (NULL: none) */
    /* process 0's progress: what is being measured, NULL once done; NULL: none */
    void (*progress)(void *arg, const char *what);
    void *progress_arg;
} gs_calib_procs_opts;

/* ---- the result ---- */

/* the link classes: a host's processes, one process per host */
enum { GS_CALIB_INTRA, GS_CALIB_INTER, GS_CALIB_CLASS_COUNT };
/* The link classes measured, as the calibration file names them. */
extern const char *const gs_calib_class_names[GS_CALIB_CLASS_COUNT];

struct gs_calib_procs {
    int procs, hosts, per_host;
    int regular; /* 1: per_host processes on every host, in blocks (process p on host p / per_host);
                    2: the same count round robin (process p on host p % hosts); 0: neither */
    uint64_t nranks[GS_CALIB_CLASS_COUNT];    /* group size measured per class (0: not measured) */
    gs_group_kind kind[GS_CALIB_CLASS_COUNT]; /* the mesh group that realizes it */
    int peer[GS_CALIB_CLASS_COUNT];           /* process 0's ping-pong partner (-1: none) */
    uint64_t sizes[GS_CALIB_PROCS_MAX_SIZES];
    size_t nsizes;
    int reps;
    /* median over repeats of the slowest process */
    double secs[GS_CALIB_CLASS_COUNT][GS_CAL_C_COUNT][GS_CALIB_PROCS_MAX_SIZES];
    gs_fit_ab fit[GS_CALIB_CLASS_COUNT][GS_CAL_C_COUNT];
    int ok[GS_CALIB_CLASS_COUNT][GS_CAL_C_COUNT];
};

typedef struct gs_calib_procs gs_calib_procs;

/* Each point is the median of 5 repeats, taken as 5 passes over every (class, op, size) after a
 * warm-up pass; a repeat's time is its slowest process's. */
gs_status gs_calib_procs_run(const gs_driver_ops *ops, const gs_exec_boot *boot, const gs_calib_procs_opts *o,
                             gs_calib_procs **out, gs_error *err);

/* {"intra": {...}, "inter": {...}} in the calibration file's links format (the classes measured
 * only); replaces the same group sizes in an existing links object when merged by the caller. */
json_t *gs_calib_procs_links(const gs_calib_procs *c);

/* The measured points {"intra"|"inter": {op: {ranks: [{size, time_s}]}}} and the layout. */
json_t *gs_calib_procs_measurements(const gs_calib_procs *c);

void gs_calib_procs_free(gs_calib_procs *c);

#endif
