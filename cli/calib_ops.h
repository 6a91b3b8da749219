/* The driver calls `gridstep calibrate` times, as exec runs them: a GEMM forward (and its
 * backward, dx and dw), the non-GEMM kernels of each schedule event, attention and the rotary
 * embedding. Each call function takes its arguments struct and a stream, and issues the ops on
 * it (from inside a launched function); the same calls serve the host driver's CPU-time
 * measurements (cli/cmd_calibrate.c) and a device driver's event-timed ones
 * (cli/calib_device.c), since every pointer is a driver buffer.
 *
 * Ownership: the structs borrow the ops table, the driver and every buffer. */
#ifndef GS_CLI_CALIB_OPS_H
#define GS_CLI_CALIB_OPS_H

#include <stddef.h>

#include "exec/driver.h"
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
    float *q, *k, *v, *o, *p, *dq, *dk, *dv, *dout;
    size_t seq, nh, nkv, hd;
    int bwd;
} gs_cal_attn;

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

#endif
