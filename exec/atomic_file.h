/* Crash-safe file and directory replacement: write under a temporary name in the same directory,
 * flush and fsync, rename over the target, fsync the directory (POSIX rename is atomic within a
 * file system, so a reader sees the old file or the new one, never a torn one).
 *
 * Ownership: a gs_atomic_file is caller storage; it owns its temporary path and open stream
 * from gs_atomic_file_begin until gs_atomic_file_commit or gs_atomic_file_abort, which both
 * release everything (commit also on failure). */
#ifndef GS_ATOMIC_FILE_H
#define GS_ATOMIC_FILE_H

#include <stdio.h>

#include "engine/status.h"

typedef struct gs_atomic_file {
    char *path;     /* the target, owned copy */
    char *tmp_path; /* PATH.tmp-PID, owned */
    FILE *stream;   /* open for writing on tmp_path; write the contents here */
} gs_atomic_file;

/* Creates PATH.tmp-PID (refused when that name exists: it is not this call's) and opens it for
 * writing. */
gs_status gs_atomic_file_begin(gs_atomic_file *af, const char *path, gs_error *err);
/* fflush + fsync + fclose the temporary, rename it over the target, fsync the directory. On
 * failure the temporary is removed and the target is left as it was. */
gs_status gs_atomic_file_commit(gs_atomic_file *af, gs_error *err);
/* Closes and removes the temporary; the target is untouched. Safe on a zeroed struct. */
void gs_atomic_file_abort(gs_atomic_file *af);

/* fflush + fsync + fclose of a stream written at `path` (named in errors); closes it always. */
gs_status gs_durable_close(FILE *stream, const char *path, gs_error *err);
/* fsync of a directory, so renames and creations in it are on disk. */
gs_status gs_fsync_dir(const char *dir, gs_error *err);
/* fsync of the directory holding `path` ("." when path has no slash). */
gs_status gs_fsync_parent(const char *path, gs_error *err);
/* 1 if path exists (any type), 0 if not; -1 with err set on another stat failure. */
int gs_path_exists(const char *path, gs_error *err);

#endif
