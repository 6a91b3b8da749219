/* Plots through gnuplot: the image's paths (FILE.png or FILE.svg -> FILE.dat, FILE.gp), the
 * terminal line, gnuplot-safe quoting, and running the script through popen. The commands write
 * their own data and script text; this module owns the conventions and the process.
 *
 * Ownership: gs_plot is caller storage holding copies of the paths; nothing is allocated. */
#ifndef GS_CLI_PLOT_H
#define GS_CLI_PLOT_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/ledger.h"
#include "engine/report.h"
#include "engine/schedule.h"
#include "engine/status.h"
#include "engine/sweep.h"

typedef enum gs_plot_format { GS_PLOT_PNG, GS_PLOT_SVG } gs_plot_format;

#define GS_PLOT_PATH_BYTES 1024

typedef struct gs_plot {
    gs_plot_format format;
    char image[GS_PLOT_PATH_BYTES]; /* as given: "out/tput.png" */
    char base[GS_PLOT_PATH_BYTES];  /* without the extension: "out/tput" */
    char script[GS_PLOT_PATH_BYTES]; /* base + ".gp" */
} gs_plot;

/* Checks the extension (.png or .svg, case-insensitive; anything else is GS_ERR_INPUT naming
 * `opt`) and fills the paths. */
gs_status gs_plot_init(gs_plot *p, const char *opt, const char *image, gs_error *err);

/* Opens base + suffix + ".dat" for writing ("" -> FILE.dat, "-comm" -> FILE-comm.dat) and
 * writes its path into path (GS_PLOT_PATH_BYTES). */
gs_status gs_plot_open_data(const gs_plot *p, const char *suffix, char *path, FILE **out, gs_error *err);

/* Closes a data file, reporting a failed write. */
gs_status gs_plot_close_data(FILE *f, const char *path, gs_error *err);

/* The gnuplot string literal for s: single quotes, a quote doubled ('it''s'). */
const char *gs_plot_quote(const char *s, char *buf, size_t len);

/* Writes the script (the terminal and output lines first: pngcairo or svg, size 1200,800,
 * then `body`) to FILE.gp and runs `gnuplot` on it through popen. When gnuplot is not in
 * PATH: GS_ERR_RUNTIME with "gnuplot not found in PATH; data written to <data> and FILE.gp, run
 * `gnuplot FILE.gp`" (the files stay). A failing gnuplot is GS_ERR_RUNTIME with its exit status. */
gs_status gs_plot_run(const gs_plot *p, const char *data_paths, const char *body, gs_error *err);

/* ---- the plots of sweep, mem and sim ---- */

/* One sweep point as the curves need it. */
typedef struct gs_plot_sweep_point {
    uint64_t point;
    int ran;                 /* 1: simulated (status ok); 0: left out of the lines */
    double tokens_per_s, mfu, step_time_s;
} gs_plot_sweep_point;

/* What a sweep plot says about itself (borrowed strings). */
typedef struct gs_plot_sweep_info {
    const char *name;  /* the scenario: the plot's title */
    const char *mode;  /* "analytic" or "flow" */
    const char *fixed; /* what the sweep held fixed, one line (sweep JSON's held_fixed); may be NULL */
} gs_plot_sweep_info;

/* `gridstep sweep --plot` and `gridstep merge --plot`: tokens/s (top panel) and MFU in % (bottom
 * panel) against the first varied key (log2 axis for gpus and nodes and for numeric keys spanning
 * 8x or more; categories in order otherwise), one line per combination of the other keys (a
 * legend entry "(no point ran)" when none of its points ran), under a title naming the scenario
 * and what was held fixed. rows[p] is point p (all points, in order). FILE.dat: one block per
 * line that has points, rows "x_index x tokens_per_s mfu step_time_s". */
gs_status gs_plot_sweep(const gs_plot *p, const gs_plot_sweep_info *info, const gs_sweep *sw,
                        const gs_plot_sweep_point *rows, size_t nrows, gs_error *err);

/* `gridstep mem --plot`: one stacked bar per ledger rank class (pipeline stage) of params,
 * master, optimizer (Adam m + v), grads, activations (this micro-batch + the ones in flight) and
 * buffers (FSDP gathers + workspace), in GB, with the GPU's memory as a horizontal line.
 * FILE.dat holds the bytes (columns stage first_rank params master optimizer grads activations
 * buffers total); each row's total is its stage's ledger peak. */
gs_status gs_plot_mem(const gs_plot *p, const gs_scenario *s, const gs_ledger *l, gs_error *err);

/* `gridstep sim --plot`: a Gantt chart of one step, one row per (rank, stream) of the given rank
 * lists (indexes into sch->ranks), a box per event coloured by kind (forward, backward,
 * recompute, optimizer, DP collective, TP collective, PP send/recv, host copies); x in seconds,
 * or in ms when the step is under a second (the axis says which). FILE.dat: one block per kind,
 * rows "start end row"; events of one kind on one row less than 1/4000 of the step apart (under
 * a pixel) are joined into one box. */
gs_status gs_plot_timeline(const gs_plot *p, const gs_scenario *s, const gs_schedule *sch, gs_timing *const *timing,
                           const size_t *lists, size_t nlists, double step_s, gs_error *err);

#define GS_PLOT_MAX_RANKS 16

/* The rank lists to draw: `ranks` "R,R,..." (at most GS_PLOT_MAX_RANKS, each one the schedule
 * holds: without --exact, only the first rank of each pipeline stage), or NULL for the first rank
 * of each pipeline stage in stage order, at most 8. Writes indexes into sch->ranks. */
gs_status gs_plot_pick_ranks(const gs_schedule *sch, const char *ranks, size_t *lists, size_t *nlists, gs_error *err);

/* `gridstep sim --plot-comm`: per dimension (DP/FSDP, TP, PP) the seconds its stream
 * communicates on the critical rank, stacked as overlapped (hidden behind compute) and exposed.
 * FILE.dat rows "dim overlapped_s exposed_s comm_s". */
gs_status gs_plot_comm(const gs_plot *p, const gs_scenario *s, const gs_report *r, gs_error *err);

#endif
