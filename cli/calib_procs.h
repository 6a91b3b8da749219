/* `gridstep calibrate` under a launcher (mpirun, srun): the collectives between the processes of
 * the job, one rank per process (exec/boot.h), timed with the driver's stream events as
 * cli/calib_device.c times them (a batch of calls between two events; the slowest process per
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
 * gs_calib_procs_links is the caller's. The host names are borrowed for the call. */
#ifndef GS_CLI_CALIB_PROCS_H
#define GS_CLI_CALIB_PROCS_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/status.h"
#include "exec/boot.h"
#include "exec/driver.h"

typedef struct gs_calib_procs gs_calib_procs;

/* hosts[p]: process p's host name (boot->procs of them). sizes: nsizes nccl-tests sizes in
 * bytes, ascending (at most 24). Each point is the median of 5 repeats, taken as 5 passes over
 * every (class, op, size) after a warm-up pass; a repeat's time is its slowest process's. quick:
 * batches of 5 calls above 1 MiB and 20 below (else 20 and 50). */
gs_status gs_calib_procs_run(const gs_driver_ops *ops, const gs_exec_boot *boot, const char *const *hosts,
                             const uint64_t *sizes, size_t nsizes, int quick, int tty, gs_calib_procs **out,
                             gs_error *err);

/* {"intra": {...}, "inter": {...}} in the calibration file's links format (the classes measured
 * only); replaces the same group sizes in an existing links object when merged by the caller. */
json_t *gs_calib_procs_links(const gs_calib_procs *c);

/* The measured points {"intra"|"inter": {op: {ranks: [{size, time_s}]}}} and the layout. */
json_t *gs_calib_procs_measurements(const gs_calib_procs *c);

/* nccl-tests' columns per class, op and group size, with the fits. */
void gs_calib_procs_print(const gs_calib_procs *c, FILE *f);

void gs_calib_procs_free(gs_calib_procs *c);

#endif
