/* An exec session's insides shared by its files (exec/session.c: the session and the backend
 * seam; session_ckpt.c: sharded checkpoints; session_full.c: the full checkpoint). Private to
 * exec/.
 *
 * The session owns its scenario copy, schedule (unless the caller's), driver, dispatcher,
 * training program and timings; checkpoint views borrow the training program's shards. */
#ifndef GS_EXEC_SESSION_INTERNAL_H
#define GS_EXEC_SESSION_INTERNAL_H

#include <stdint.h>

#include "exec/checkpoint.h"
#include "exec/exec.h"

struct gs_exec_session {
    gs_scenario s;
    gs_exec_opts o;
    const gs_driver_ops *ops;
    const gs_schedule *sch; /* built (own_sch) or the caller's (gs_exec_opts.schedule) */
    gs_schedule *own_sch;
    gs_drv *drv;
    gs_dispatch *disp;
    gs_train *train;
    gs_timing **timing;
    int stepped;
    const gs_exec_boot *boot; /* active: a multi-process run, this process plays rank list `local` */
    size_t local;
};

/* Multi-process: every process's outcome; the lowest failed process's error for all. */
typedef struct proc_record {
    int32_t status;
    double loss_sum; /* token losses of this process's head ranks */
    double step_s;
    int32_t bystander; /* failed only because another process announced its failure */
    char msg[GS_ERROR_MSG_BYTES];
} proc_record;

/* Every rank's shards as checkpoint views (primary pieces only when `primary`). */
typedef struct ckpt_views {
    size_t n;
    gs_shard_list *lists;
    gs_ckpt_rank_view *views;
    gs_ckpt_shard **shards;
    gs_ckpt_piece **pieces;
} ckpt_views;

/* The test hook GRIDSTEP_FAULT=fail|die:RANK:save:PHASE (opts fail_event "save:PHASE"): at that
 * step of a save (exec/checkpoint.h's hook phases) the save of RANK fails ("fail": tmp-dir,
 * file-written and full-pieces only, the steps before the commit) or its process is killed
 * (SIGKILL, "die": any phase). file-written is the named rank's file; full-pieces (--save-full
 * across processes, RANK not 0) is RANK's process about to send its pieces to the root; the other
 * phases are the root's (rank 0). */
typedef struct save_fault {
    const char *phase; /* NULL: no fault */
    gs_fault_kind kind;
    int rank;
    int is_root;         /* this process does the root's steps (rank 0's) */
    char rank_file[64];  /* the named rank's file name */
    int fired;
} save_fault;

/* ---- exec/session.c: agreement across processes ---- */
gs_status gs__session_exchange(gs_exec_session *x, const proc_record *mine, proc_record *all, gs_error *err);
gs_status gs__session_agree(gs_exec_session *x, gs_status local, gs_error *err);

/* ---- exec/session_ckpt.c: checkpoint views, metadata and the save fault hook ---- */
void gs__session_views_fini(ckpt_views *v);
/* mode: GS__VIEWS_PRIMARY, what a save writes (else what a load fills); GS__VIEWS_NO_STATE, without
 * the training-state tensors (gs_shard_tensor.state: the full safetensors file's). */
enum { GS__VIEWS_PRIMARY = 1, GS__VIEWS_NO_STATE = 2 };
gs_status gs__session_views_init(gs_exec_session *x, int mode, ckpt_views *v, gs_error *err);
void gs__session_ckpt_meta(const gs_exec_session *x, gs_ckpt_meta *m);
gs_status gs__session_save_fault_init(const gs_exec_session *x, save_fault *f, gs_error *err);
gs_status gs__session_check_fault_hook(const gs_exec_session *x, gs_error *err);
void gs__session_save_fault_hook(const char *phase, const char *path, void *arg);

#endif
