/* What a checkpoint save may touch: the marker by which a save recognises the directories it
 * wrote (DIR.tmp-PID, DIR.old), the test whether a path is a gridstep checkpoint, the removal of
 * a directory a save wrote (its own files only), and the check of a save target before a run.
 *
 * Ownership: every function borrows its arguments; gs_ckpt_marker is caller storage.
 *
 * The rule: a save renames or removes only what it can prove is a save's. DIR may be replaced
 * only when it is absent or a gridstep checkpoint (index.json that parses and verifies, and no
 * entry but index.json, the files it lists and the marker); DIR.tmp-* and DIR.old are touched
 * only when they hold a marker naming DIR. Removal deletes only the names a save writes
 * (index.json, rankNNNNN-of-NNNNN.safetensors, the marker), the marker last, then the directory
 * if it is empty; anything else stays where it is. */
#ifndef GS_CKPT_OWN_H
#define GS_CKPT_OWN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

/* The marker file a save writes first into its temporary directory and into the checkpoint it
 * retires to DIR.old. */
#define GS_CKPT_MARKER ".gridstep-save"

/* What a marker says: the run that wrote it (host, process, a start time and a nonce). */
typedef struct gs_ckpt_marker {
    char target[256]; /* the base name of the DIR the save was for */
    char host[128];
    long pid;
    char run[384]; /* the whole identity line: "HOST PID START_NS NONCE" */
} gs_ckpt_marker;

/* This process's run identity for a save to `dir` ("HOST PID START_NS NONCE"; cap >= 384). */
void gs_ckpt_run_id(char *buf, size_t cap);
/* Writes dir/GS_CKPT_MARKER naming target_base and run (fsynced). */
gs_status gs_ckpt_marker_write(const char *dir, const char *target_base, const char *run, gs_error *err);
/* 1 when dir holds a well-formed marker naming target_base (filled into *m, may be NULL), else 0. */
int gs_ckpt_marker_read(const char *dir, const char *target_base, gs_ckpt_marker *m);

/* What a path holds, as a save sees it. */
typedef enum gs_ckpt_found {
    GS_CKPT_ABSENT = 0, /* nothing there */
    GS_CKPT_OURS,       /* a gridstep checkpoint directory (see the rule above) */
    GS_CKPT_FOREIGN,    /* anything else: a file, another program's directory, a damaged index */
} gs_ckpt_found;

/* Classifies path; for GS_CKPT_FOREIGN, why (cap bytes) says what makes it foreign ("a regular
 * file", "it holds notes.txt, which its index.json does not list", ...). GS_ERR_IO when the path
 * cannot be examined. */
gs_status gs_ckpt_classify(const char *path, gs_ckpt_found *found, char *why, size_t cap, gs_error *err);

/* Removes a directory a save wrote: index.json, rank files and the marker (last), then the
 * directory when nothing else is left; *kept (may be NULL) counts the entries left alone. A
 * missing directory is not an error. The caller has proven the directory is a save's. */
gs_status gs_ckpt_remove_owned(const char *dir, size_t *kept, gs_error *err);

/* Step 0 of the replacement protocol (exec/checkpoint.h) for DIR: a DIR.old holding a marker
 * for DIR is restored when DIR is missing, removed (its own files) when DIR is there; DIR.tmp-*
 * directories holding a marker for DIR, written on this host by a process that is gone, are
 * removed (their own files; empty ones whose PID is gone, too). Nothing else is touched. */
gs_status gs_ckpt_recover(const char *dir, gs_error *err);

/* The stale temporaries PATH.tmp-PID of full saves (gs_ckpt_save_full) whose process is gone:
 * removed when they are empty or begin with the full format's header; other files stay. */
gs_status gs_ckpt_remove_stale_full(const char *path, gs_error *err);

/* Whether a save may put a checkpoint at DIR, checked before a run spends its time: refuses
 * (GS_ERR_INPUT, naming the path and what is wrong) a DIR that is not a gridstep checkpoint
 * (unless force), a DIR.old in the way that no save wrote, a parent directory that is missing,
 * not a directory or not writable (a probe directory is created and removed), and a file
 * system with fewer than need_bytes free. */
gs_status gs_ckpt_check_target(const char *dir, uint64_t need_bytes, int force, gs_error *err);

/* The same for a full file (gs_ckpt_save_full): refuses a FILE that is not a regular file, one
 * that is not a full checkpoint gridstep wrote (unless force: then it is replaced), an unusable
 * parent and too little free space. */
gs_status gs_ckpt_check_full_target(const char *path, uint64_t need_bytes, int force, gs_error *err);

/* Bytes a checkpoint of a model of `params` parameters and `layers` layers takes, estimated from
 * above: fp32 parameters (and with_optim: Adam m and v), per-piece headers and index entries for
 * `world` rank files, 1 MiB for the rest; UINT64_MAX when that overflows. */
uint64_t gs_ckpt_estimate_bytes(uint64_t params, uint64_t layers, uint64_t world, int with_optim);

/* DIR with its trailing slashes removed, and its parent ("." when it has no slash) and base
 * name; NULL on allocation failure. Each is the caller's to free. */
char *gs_ckpt_dir_normalise(const char *dir);
char *gs_ckpt_parent_of(const char *path);
const char *gs_ckpt_base_of(const char *path);

#endif
