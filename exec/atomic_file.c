/* Crash-safe replacement of files: temporary name, fsync, rename, fsync of the directory. */
#include "exec/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_printf_path(const char *path, long pid)
{
    size_t n = strlen(path) + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s.tmp-%ld", path, pid);
    return s;
}

gs_status gs_atomic_file_begin(gs_atomic_file *af, const char *path, gs_error *err)
{
    gs_status st = GS_OK;
    af->path = strdup(path);
    af->tmp_path = dup_printf_path(path, (long)getpid());
    af->stream = NULL;
    if (!af->path || !af->tmp_path) {
        st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    /* O_EXCL: a file of that name is not this call's to truncate */
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || !(af->stream = fdopen(fd, "wb"))) {
        st = gs_error_set(err, GS_ERR_IO, "%s: cannot create: %s%s", af->tmp_path, strerror(errno),
                          errno == EEXIST ? " (not this run's: move it away)" : "");
        if (fd >= 0)
            close(fd);
        free(af->tmp_path); /* not ours: abort must not remove it */
        af->tmp_path = NULL;
    }
out:
    if (st != GS_OK)
        gs_atomic_file_abort(af);
    return st;
}

gs_status gs_durable_close(FILE *stream, const char *path, gs_error *err)
{
    gs_status st = GS_OK;
    if (fflush(stream) != 0 || ferror(stream))
        st = gs_error_set(err, GS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    else if (fsync(fileno(stream)) != 0)
        st = gs_error_set(err, GS_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    if (fclose(stream) != 0 && st == GS_OK)
        st = gs_error_set(err, GS_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    return st;
}

gs_status gs_atomic_file_commit(gs_atomic_file *af, gs_error *err)
{
    gs_status st = gs_durable_close(af->stream, af->tmp_path, err);
    af->stream = NULL;
    if (st != GS_OK)
        goto out;
    if (rename(af->tmp_path, af->path) != 0) {
        st = gs_error_set(err, GS_ERR_IO, "%s: cannot rename to %s: %s", af->tmp_path, af->path, strerror(errno));
        goto out;
    }
    st = gs_fsync_parent(af->path, err);
    if (st != GS_OK) {
        /* the rename happened; only its durability is in doubt: keep the new file */
        free(af->tmp_path);
        af->tmp_path = NULL;
    }
out:
    gs_atomic_file_abort(af);
    return st;
}

void gs_atomic_file_abort(gs_atomic_file *af)
{
    if (af->stream)
        fclose(af->stream);
    if (af->tmp_path)
        unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    af->stream = NULL;
    af->tmp_path = NULL;
    af->path = NULL;
}

gs_status gs_fsync_dir(const char *dir, gs_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return gs_error_set(err, GS_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    gs_status st = GS_OK;
    /* some file systems refuse fsync on directories (EINVAL); they order metadata anyway */
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        st = gs_error_set(err, GS_ERR_IO, "%s: fsync of directory failed: %s", dir, strerror(errno));
    close(fd);
    return st;
}

gs_status gs_fsync_parent(const char *path, gs_error *err)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return gs_fsync_dir(".", err);
    if (slash == path)
        return gs_fsync_dir("/", err);
    size_t n = (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir)
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    gs_status st = gs_fsync_dir(dir, err);
    free(dir);
    return st;
}

int gs_path_exists(const char *path, gs_error *err)
{
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return 1;
    if (errno == ENOENT || errno == ENOTDIR)
        return 0;
    gs_error_set(err, GS_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    return -1;
}
