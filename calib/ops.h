/* The driver calls `gridstep calibrate` times, as exec runs them: a GEMM forward (and its
 * backward, dx and dw), the non-GEMM kernels of each schedule event, attention and the rotary
 * embedding. Each call function takes its arguments struct and a stream, and issues the ops on
 * it (from inside a launched function); the same calls serve the host driver's CPU-time
 * measurements (cli/calibrate_kernels.c, cli/calibrate_ranks.c) and a device driver's
 * event-timed ones (calib/device.c), since every pointer is a driver buffer. Printing them is
 * cli/calib_print.h's.
 *
 * Ownership: the structs borrow the ops table, the driver and every buffer. */
#ifndef GS_CALIB_OPS_H
#define GS_CALIB_OPS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/driver.h"
#include "sim/calib.h"
#include "sim/collective.h"

/* The non-GEMM work of the schedule's events as exec runs it (exec/train.c): rmsnorm is the norm
 * forward event, half of which (the second norm of a layer) first copies and adds the residual;
 * rmsnorm_bwd is rmsnorm_bwd plus the residual gradient's add; xent the loss forward (slice
 * statistics and their combination), xent_bwd its backward; embed the row lookup, embed_bwd
 * its scatter-add. Elements: tokens x hidden (norms, embedding), tokens x ffn (SwiGLU), tokens
 * x vocabulary (the loss), parameters (AdamW). */
enum {
    GS_CAL_EW_ADAMW, GS_CAL_EW_RMSNORM, GS_CAL_EW_SWIGLU, GS_CAL_EW_ADD, GS_CAL_EW_XENT, GS_CAL_EW_EMBED,
    GS_CAL_EW_RMSNORM_BWD, GS_CAL_EW_SWIGLU_BWD, GS_CAL_EW_XENT_BWD, GS_CAL_EW_EMBED_BWD, GS_CAL_EW_COUNT
};
#define GS_CAL_EW_FIRST_BWD GS_CAL_EW_RMSNORM_BWD
extern const char *const gs_cal_ew_names[GS_CAL_EW_COUNT];
/* bytes per element the schedule counts in fp32 (engine/build*.c): the optimizer 2 x 8 + 2 x 4,
 * a norm 5 x 4 (backward 10 x 4), SwiGLU 3 x 4 (backward 6 x 4); add: read y and x, write y;
 * the loss 2 x 4 per logit (backward 4 x 4); the embedding 4 per output element (backward 8) */
extern const double gs_cal_ew_bytes[GS_CAL_EW_COUNT];

/* The collectives measured, as the calibration file names them (send_recv: a ping-pong between two
 * ranks, half the round trip); gs_cal_c_ops maps them to the sim's ops (GS_COLL_COUNT for
 * send_recv). */
enum { GS_CAL_C_AG, GS_CAL_C_RS, GS_CAL_C_AR, GS_CAL_C_BC, GS_CAL_C_P2P, GS_CAL_C_COUNT };
extern const char *const gs_cal_c_names[GS_CAL_C_COUNT];
extern const gs_coll_op gs_cal_c_ops[GS_CAL_C_COUNT];

typedef struct gs_cal_gemm {
    const gs_driver_ops *ops;
    const float *x, *w;
    float *y;
    size_t m, n, k;
    float *dx, *dw; /* backward */
    size_t copies;  /* > 1: x, w, y, dx, dw each hold that many operand sets, used in turn */
    size_t next;
} gs_cal_gemm;

typedef struct gs_cal_ew {
    const gs_driver_ops *ops;
    gs_drv *d;
    int kind;
    float *a, *b, *m, *v, *y, *rstd; /* a and y: 2n floats; rstd: n / h + 1 (tokens, targets) */
    size_t n, h;                     /* h: row length (hidden, ffn or vocabulary) */
    unsigned calls;
} gs_cal_ew;

typedef struct gs_cal_attn {
    const gs_driver_ops *ops;
    float *q, *k, *v, *o, *p, *dq, *dk, *dv, *dout; /* p: nh x seq x seq floats, or nh x seq with flash */
    size_t seq, nh, nkv, hd;
    int bwd;
    int flash;       /* the flash-style ops (what exec runs for strategy.flash_attention) */
    gs_dropout drop; /* the scenario's attention dropout (threshold 0: none), drawn as exec draws it,
                      * so a driver that runs another path for calls with masks is timed on it */
} gs_cal_attn;

/* The attention dropout of a calibration's calls: the scenario's rate when its model has dropout
 * layers (gs_dropout_threshold, scaled by the kept share's inverse as exec/train.c does), over
 * sequences of seq tokens; threshold 0 otherwise. */
void gs_cal_attn_dropout(gs_dropout *d, int dropout, double rate, uint64_t seq);

typedef struct gs_cal_rope {
    const gs_driver_ops *ops;
    float *qkv; /* seq rows of (nh + 2 nkv) hd */
    size_t seq, nh, nkv, hd;
    int bwd;
} gs_cal_rope;

/* One call each; arg is the struct above. gs_cal_gemm_fwd / _bwd use operand set `next` (then
 * advance it) when copies > 1. */
void gs_cal_gemm_fwd(void *arg, gs_drv_stream *s);
void gs_cal_gemm_bwd(void *arg, gs_drv_stream *s);
void gs_cal_ew_call(void *arg, gs_drv_stream *s);
void gs_cal_attn_call(void *arg, gs_drv_stream *s);
void gs_cal_rope_call(void *arg, gs_drv_stream *s);

/* Seconds from completed event a to b: the driver's event_elapsed_s when it has one, else the
 * difference of their event_time_s. */
double gs_cal_elapsed(const gs_driver_ops *ops, gs_drv *d, const gs_drv_event *a, const gs_drv_event *b);

/* ---- what every calibration path writes the same way ---- */

/* {"ranks": N (omitted when 0), "alpha_s", "beta_bytes_per_s"} and, with stats, "r2_log",
 * "rms_rel_resid", "points", "outliers". */
json_t *gs_cal_fit_json(uint64_t ranks, const gs_fit_ab *f, int stats);

/* compute.elementwise_bw and elementwise_bw_bwd from the kernels' fits (their 1 / beta). */
void gs_cal_ew_rates_json(json_t *compute, const gs_fit_ab fit[GS_CAL_EW_COUNT]);

/* The group sizes one process measures its collectives over (threads or devices of it). */
#define GS_CAL_GROUPS 3
extern const uint64_t gs_cal_group_sizes[GS_CAL_GROUPS]; /* 2, 4, 8 */

/* A links class object ({op: [{ranks, alpha_s, beta_bytes_per_s}], "send_recv": {...}}) from the
 * fits of the group sizes measured (ok[op][g]: 1 = measured; send_recv's at g = 0). */
json_t *gs_cal_class_json(const gs_fit_ab fit[GS_CAL_C_COUNT][GS_CAL_GROUPS], const int ok[GS_CAL_C_COUNT][GS_CAL_GROUPS]);

/* [{size, time_s}] of one collective's points. */
json_t *gs_cal_points_json(const uint64_t *sizes, const double *secs, size_t n);

/* measurements.collectives: {op: {"RANKS": [{size, time_s}]}} for the measured (op, group size)
 * pairs; secs is an array [GS_CAL_C_COUNT][GS_CAL_GROUPS][max_sizes] of medians. */
json_t *gs_cal_colls_json(const uint64_t *sizes, size_t nsizes, const double *secs, size_t max_sizes,
                          const int ok[GS_CAL_C_COUNT][GS_CAL_GROUPS]);

/* measurements.attention: the shape, which kernels (flash: the tiled ones keeping a logsumexp per
 * row; else the ones keeping the probabilities) and the forward and backward times. */
json_t *gs_cal_attn_json(uint64_t seq, uint64_t heads, uint64_t kv_heads, uint64_t head_dim, int flash, double fwd_s,
                         double bwd_s);

/* The test hook GRIDSTEP_CALIB_SPELL=FIRST:COUNT:DELAY: a slow spell of the machine, for the
 * tests of the collectives' repeats (tests/run_calib.sh, tests/run_calib_mpi.sh). Rank 0's (with
 * processes: process 0's) timed collective calls FIRST .. FIRST + COUNT - 1, counted from 0 in the
 * order they run, take DELAY seconds longer. count 0: no spell. */
typedef struct gs_cal_spell {
    long first, count;
    double delay_s;
    long calls; /* timed calls counted so far (one thread counts) */
} gs_cal_spell;

/* From the variable's value v (NULL or "": no spell); GS_ERR_INPUT naming the variable when it
 * is malformed. */
gs_status gs_cal_spell_parse(gs_cal_spell *s, const char *v, gs_error *err);
/* Counts one timed call; returns the seconds it must take longer (0 outside the spell). */
double gs_cal_spell_next(gs_cal_spell *s);
/* Sleeps for secs seconds (> 0), through interruptions. */
void gs_cal_sleep(double secs);

#endif
