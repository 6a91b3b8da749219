/* What a checkpoint save may touch: ownership markers, the checkpoint test, owned removal,
 * recovery of a crashed swap and the check of a save target before a run. */
#include "exec/ckpt_own.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "exec/atomic_file.h"
#include "exec/checkpoint.h"

#define MARKER_MAGIC "gridstep-checkpoint-save 1"
#define MARKER_MAX_BYTES 2048
/* index.json larger than this is not read to classify a directory (a 405B model's is a few MB). */
#define INDEX_MAX_BYTES (UINT64_C(1) << 30)

char *gs_ckpt_dir_normalise(const char *dir)
{
    char *d = strdup(dir);
    if (!d)
        return NULL;
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

char *gs_ckpt_parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

const char *gs_ckpt_base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", dir, name);
    return s;
}

/* ---- markers ---------------------------------------------------------------------------------- */

void gs_ckpt_run_id(char *buf, size_t cap)
{
    char host[128];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == ' ' || *c == '\n')
            *c = '_';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long start_ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    /* a nonce that differs between saves of one process within a clock tick */
    static unsigned long long counter;
    unsigned long long nonce = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) ^ (start_ns * 0x9e3779b97f4a7c15ull);
    snprintf(buf, cap, "%s %ld %llu %016llx", host, (long)getpid(), start_ns, nonce);
}

gs_status gs_ckpt_marker_write(const char *dir, const char *target_base, const char *run, gs_error *err)
{
    char *path = join(dir, GS_CKPT_MARKER);
    if (!path)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
    gs_status st = GS_OK;
    FILE *f = fopen(path, "w");
    if (!f) {
        st = gs_error_set(err, GS_ERR_IO, "checkpoint: cannot create %s: %s", path, strerror(errno));
    } else if (fprintf(f, "%s\ntarget %s\nrun %s\n", MARKER_MAGIC, target_base, run) < 0) {
        fclose(f);
        st = gs_error_set(err, GS_ERR_IO, "checkpoint: cannot write %s: %s", path, strerror(errno));
    } else {
        st = gs_durable_close(f, path, err);
    }
    free(path);
    return st;
}

/* Reads at most cap - 1 bytes of a regular file (never blocks on a FIFO) into buf, NUL-ended;
 * the byte count, or -1 when it is not a regular file, cannot be read or is larger. */
static long read_small_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat sb;
    long got = -1;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size < cap) {
        ssize_t n = read(fd, buf, cap - 1);
        if (n >= 0) {
            buf[n] = '\0';
            got = (long)n;
        }
    }
    close(fd);
    return got;
}

int gs_ckpt_marker_read(const char *dir, const char *target_base, gs_ckpt_marker *m)
{
    char *path = join(dir, GS_CKPT_MARKER);
    char text[MARKER_MAX_BYTES];
    gs_ckpt_marker local;
    if (!m)
        m = &local;
    memset(m, 0, sizeof *m);
    long n = path ? read_small_file(path, text, sizeof text) : -1;
    free(path);
    if (n <= 0)
        return 0;
    char *save = NULL, *magic = strtok_r(text, "\n", &save), *target = strtok_r(NULL, "\n", &save);
    char *run = strtok_r(NULL, "\n", &save);
    if (!magic || !target || !run || strcmp(magic, MARKER_MAGIC) != 0 || strncmp(target, "target ", 7) != 0 ||
        strncmp(run, "run ", 4) != 0 || strcmp(target + 7, target_base) != 0)
        return 0;
    snprintf(m->target, sizeof m->target, "%s", target + 7);
    snprintf(m->run, sizeof m->run, "%s", run + 4);
    char host[128];
    long pid;
    if (sscanf(m->run, "%127s %ld", host, &pid) != 2 || pid <= 0)
        return 0;
    snprintf(m->host, sizeof m->host, "%s", host);
    m->pid = pid;
    return 1;
}

/* ---- what a directory is ------------------------------------------------------------------------ */

/* 1 when name is one a save writes into its directories. */
static int save_file_name(const char *name)
{
    unsigned r, w;
    char tail[16];
    if (strcmp(name, "index.json") == 0 || strcmp(name, GS_CKPT_MARKER) == 0)
        return 1;
    return strlen(name) == strlen("rank00000-of-00000.safetensors") &&
           sscanf(name, "rank%5u-of-%5u%15s", &r, &w, tail) == 3 && strcmp(tail, ".safetensors") == 0;
}

/* Reads path (a regular file of at most max bytes, never a FIFO) whole into *buf (NUL-ended). */
static gs_status read_bounded(const char *path, uint64_t max, char **buf, size_t *len, gs_error *err)
{
    *buf = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return gs_error_set(err, GS_ERR_IO, "%s: %s", path, strerror(errno));
    gs_status st = GS_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: not a regular file of at most %llu bytes", path,
                          (unsigned long long)max);
        goto out;
    }
    *len = (size_t)sb.st_size;
    if (!(*buf = malloc(*len + 1))) {
        st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t at = 0;
    while (at < *len) {
        ssize_t n = read(fd, *buf + at, *len - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            st = gs_error_set(err, GS_ERR_IO, "%s: read failed", path);
            goto out;
        }
        at += (size_t)n;
    }
    (*buf)[*len] = '\0';
out:
    close(fd);
    if (st != GS_OK) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

/* dir is a directory: OURS when its index.json verifies and lists every other entry. */
static gs_status classify_dir(const char *dir, gs_ckpt_found *found, char *why, size_t cap, gs_error *err)
{
    char *ipath = join(dir, "index.json"), *text = NULL;
    size_t len = 0;
    gs_ckpt_index ix;
    gs_ckpt_index_init(&ix);
    gs_error perr;
    gs_error_init(&perr);
    *found = GS_CKPT_FOREIGN;
    if (!ipath)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
    struct stat sb;
    if (lstat(ipath, &sb) != 0) {
        snprintf(why, cap, "a directory without index.json");
        goto out;
    }
    if (read_bounded(ipath, INDEX_MAX_BYTES, &text, &len, &perr) != GS_OK ||
        gs_ckpt_index_parse(text, len, &ix, &perr) != GS_OK) {
        snprintf(why, cap, "its index.json is not a valid gridstep index (%s)", perr.msg);
        goto out;
    }
    DIR *d = opendir(dir);
    if (!d) {
        free(ipath);
        free(text);
        gs_ckpt_index_fini(&ix);
        return gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot list it: %s", dir, strerror(errno));
    }
    struct dirent *e;
    int listed_all = 1;
    while (listed_all && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "index.json") == 0 ||
            strcmp(n, GS_CKPT_MARKER) == 0)
            continue;
        int listed = 0;
        for (size_t f = 0; f < ix.file_count && !listed; f++)
            listed = strcmp(ix.files[f].name, n) == 0;
        if (!listed) {
            snprintf(why, cap, "it holds %s, which its index.json does not list", n);
            listed_all = 0;
        }
    }
    closedir(d);
    if (listed_all)
        *found = GS_CKPT_OURS;
out:
    free(ipath);
    free(text);
    gs_ckpt_index_fini(&ix);
    return GS_OK;
}

gs_status gs_ckpt_classify(const char *path, gs_ckpt_found *found, char *why, size_t cap, gs_error *err)
{
    struct stat sb;
    why[0] = '\0';
    *found = GS_CKPT_ABSENT;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return GS_OK; /* the parent's check says what is wrong */
        return gs_error_set(err, GS_ERR_IO, "%s: cannot examine it: %s", path, strerror(errno));
    }
    *found = GS_CKPT_FOREIGN;
    if (S_ISREG(sb.st_mode))
        snprintf(why, cap, "a regular file, not a checkpoint directory");
    else if (S_ISLNK(sb.st_mode))
        snprintf(why, cap, "a symbolic link, not a checkpoint directory");
    else if (!S_ISDIR(sb.st_mode))
        snprintf(why, cap, "a special file (FIFO, socket or device), not a checkpoint directory");
    else
        return classify_dir(path, found, why, cap, err);
    return GS_OK;
}

/* 1 when path is an empty directory (rmdir of it cannot delete anything). */
static int empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* 1 when path is a directory holding nothing but (at most) a marker file, whole or torn. */
static int marker_only(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int only = 1;
    while (only && (e = readdir(d)) != NULL)
        only = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, GS_CKPT_MARKER) == 0;
    closedir(d);
    if (only) { /* absent, or torn: short of the three lines a whole marker has */
        char *mk = join(path, GS_CKPT_MARKER), text[MARKER_MAX_BYTES];
        struct stat sb;
        long n = 0;
        if (!mk || (lstat(mk, &sb) == 0 && (n = read_small_file(mk, text, sizeof text)) < 0))
            only = 0;
        else if (n > 0 && strncmp(text, MARKER_MAGIC "\n", strlen(MARKER_MAGIC) + 1) == 0 &&
                 strstr(text, "\nrun ") != NULL && text[n - 1] == '\n')
            only = 0;
        free(mk);
    }
    return only;
}

gs_status gs_ckpt_remove_owned(const char *dir, size_t *kept, gs_error *err)
{
    size_t left = 0;
    if (kept)
        *kept = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return GS_OK;
        return gs_error_set(err, GS_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    }
    gs_status st = GS_OK;
    struct dirent *e;
    int has_marker = 0;
    while (st == GS_OK && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        if (!save_file_name(n)) {
            left++;
            continue;
        }
        if (strcmp(n, GS_CKPT_MARKER) == 0) { /* last: until then the directory still says whose it is */
            has_marker = 1;
            continue;
        }
        char *p = join(dir, n);
        struct stat sb;
        if (!p)
            st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", dir);
        else if (lstat(p, &sb) == 0 && !S_ISREG(sb.st_mode))
            left++; /* a save writes plain files only */
        else if (unlink(p) != 0 && errno != ENOENT)
            st = gs_error_set(err, GS_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
        free(p);
    }
    closedir(d);
    if (st == GS_OK && has_marker && left == 0) {
        char *p = join(dir, GS_CKPT_MARKER);
        if (!p)
            st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", dir);
        else if (unlink(p) != 0 && errno != ENOENT)
            st = gs_error_set(err, GS_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
        free(p);
    } else if (has_marker) {
        left++; /* the marker stays with what is left: the directory is still known as a save's */
    }
    if (st == GS_OK && left == 0 && rmdir(dir) != 0 && errno != ENOENT)
        st = gs_error_set(err, GS_ERR_IO, "%s: cannot remove directory: %s", dir, strerror(errno));
    if (kept)
        *kept = left;
    return st;
}

/* ---- recovery ----------------------------------------------------------------------------------- */

/* 1 when the process pid of a marker written on this host is gone. */
static int writer_gone(const gs_ckpt_marker *m)
{
    char host[128], run[384];
    gs_ckpt_run_id(run, sizeof run);
    if (sscanf(run, "%127s", host) != 1 || strcmp(host, m->host) != 0)
        return 0; /* another host's process: this one cannot tell */
    if (m->pid == (long)getpid())
        return 0;
    return kill((pid_t)m->pid, 0) != 0 && errno == ESRCH;
}

/* The stale DIR.tmp-PID directories of saves whose process is gone. */
static gs_status remove_stale_temporaries(const char *dir, gs_error *err)
{
    gs_status st = GS_OK;
    char *parent = gs_ckpt_parent_of(dir), *path = NULL;
    const char *base = gs_ckpt_base_of(dir);
    if (!parent)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
    DIR *d = opendir(parent);
    if (!d)
        goto out; /* nothing to clean; creating the temporary will say why the parent is unusable */
    size_t blen = strlen(base);
    struct dirent *e;
    while (st == GS_OK && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp-", 5) != 0)
            continue;
        const char *digits = e->d_name + blen + 5;
        char *end;
        long pid = strtol(digits, &end, 10);
        if (*digits == '\0' || *end != '\0' || pid <= 0 || pid == (long)getpid())
            continue;
        free(path);
        if (!(path = join(parent, e->d_name))) {
            st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
            break;
        }
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue; /* a file of that name: not a save's directory */
        gs_ckpt_marker m;
        if (gs_ckpt_marker_read(path, base, &m)) {
            if (writer_gone(&m))
                st = gs_ckpt_remove_owned(path, NULL, err);
        } else if (kill((pid_t)pid, 0) != 0 && errno == ESRCH && marker_only(path)) {
            /* a save killed before its marker was whole: nothing but that marker is there */
            char *mk = join(path, GS_CKPT_MARKER);
            if (mk)
                unlink(mk);
            free(mk);
            rmdir(path);
        }
    }
    closedir(d);
out:
    free(path);
    free(parent);
    return st;
}

gs_status gs_ckpt_recover(const char *dir_in, gs_error *err)
{
    char *dir = gs_ckpt_dir_normalise(dir_in), *old = NULL;
    gs_status st = GS_OK;
    if (!dir || !(old = malloc(strlen(dir) + 5))) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir_in);
        goto out;
    }
    sprintf(old, "%s.old", dir);
    int have_dir = gs_path_exists(dir, err), have_old = gs_path_exists(old, err);
    if (have_dir < 0 || have_old < 0) {
        st = GS_ERR_IO;
        goto out;
    }
    if (have_old && gs_ckpt_marker_read(old, gs_ckpt_base_of(dir), NULL)) {
        if (have_dir) { /* a crash hit after the new checkpoint was in place */
            if ((st = gs_ckpt_remove_owned(old, NULL, err)) == GS_OK)
                st = gs_fsync_parent(dir, err);
        } else if (rename(old, dir) != 0) { /* a crash hit mid-swap */
            st = gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot restore %s: %s", dir, old, strerror(errno));
        } else {
            st = gs_fsync_parent(dir, err);
        }
    } else if (have_old && empty_dir(old)) {
        rmdir(old); /* a removal killed after its marker went; rmdir deletes nothing */
    }
    if (st == GS_OK)
        st = remove_stale_temporaries(dir, err);
out:
    free(dir);
    free(old);
    return st;
}

/* 1 when the file at path is what a full save writes first: nothing yet, or a safetensors header
 * whose metadata start with the full format's keys ({"__metadata__":{"format":"pt","gridstep.). */
static int full_save_file(const char *path)
{
    static const char sig[] = "{\"__metadata__\":{\"format\":\"pt\",\"gridstep.";
    char head[8 + sizeof sig];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    struct stat sb;
    int ours = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        ssize_t n = read(fd, head, sizeof head - 1);
        ours = sb.st_size == 0 || (n == (ssize_t)sizeof head - 1 && memcmp(head + 8, sig, sizeof sig - 1) == 0);
    }
    close(fd);
    return ours;
}

gs_status gs_ckpt_remove_stale_full(const char *path, gs_error *err)
{
    gs_status st = GS_OK;
    char *parent = gs_ckpt_parent_of(path), *p = NULL;
    const char *base = gs_ckpt_base_of(path);
    if (!parent)
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
    DIR *d = opendir(parent);
    if (!d)
        goto out;
    size_t blen = strlen(base);
    struct dirent *e;
    while (st == GS_OK && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp-", 5) != 0)
            continue;
        const char *digits = e->d_name + blen + 5;
        char *end;
        long pid = strtol(digits, &end, 10);
        if (*digits == '\0' || *end != '\0' || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 ||
            errno != ESRCH)
            continue;
        free(p);
        if (!(p = join(parent, e->d_name))) {
            st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        if (full_save_file(p) && unlink(p) != 0 && errno != ENOENT)
            st = gs_error_set(err, GS_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
    }
    closedir(d);
out:
    free(p);
    free(parent);
    return st;
}

/* ---- the target before a run --------------------------------------------------------------------- */

/* The parent of dir must be a writable directory: a probe directory is created there and removed. */
static gs_status check_parent(const char *opt, const char *dir, const char *parent, gs_error *err)
{
    struct stat sb;
    if (stat(parent, &sb) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s %s: its parent directory %s %s", opt, dir, parent,
                            errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return gs_error_set(err, GS_ERR_INPUT, "%s %s: %s is not a directory", opt, dir, parent);
    size_t n = strlen(dir) + 48;
    char *probe = malloc(n);
    if (!probe)
        return gs_error_set(err, GS_ERR_NOMEM, "%s %s: out of memory", opt, dir);
    snprintf(probe, n, "%s.tmp-%ld", dir, (long)getpid());
    gs_status st = GS_OK;
    if (mkdir(probe, 0700) != 0) {
        if (errno == EEXIST)
            st = gs_error_set(err, GS_ERR_INPUT, "%s %s: %s already exists and is not this run's", opt, dir, probe);
        else
            st = gs_error_set(err, GS_ERR_INPUT, "%s %s: cannot create files in %s: %s", opt, dir, parent,
                              strerror(errno));
    } else {
        rmdir(probe); /* the probe this call created */
    }
    free(probe);
    return st;
}

static void fmt_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b >= (UINT64_C(1) << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(UINT64_C(1) << 30));
    else
        snprintf(buf, cap, "%.2f MiB", (double)b / (double)(UINT64_C(1) << 20));
}

uint64_t gs_ckpt_estimate_bytes(uint64_t params, uint64_t layers, uint64_t world, int with_optim)
{
    uint64_t bytes, pieces, meta;
    /* each element written once; every rank file's header and index.json entry take under 1200
     * bytes per piece (three names, shape, offsets), at most one piece per tensor per rank, at
     * most 16 tensors per layer (weights and biases) and 16 others */
    if (params == UINT64_MAX || gs_mul_u64(params, with_optim ? 12 : 4, &bytes) != 0 ||
        gs_add_u64(layers, 1, &layers) != 0 || gs_mul_u64(16 * 1200, layers, &meta) != 0 ||
        gs_mul_u64(meta, world ? world : 1, &pieces) != 0 || gs_add_u64(bytes, pieces, &bytes) != 0 ||
        gs_add_u64(bytes, UINT64_C(1) << 20, &bytes) != 0)
        return UINT64_MAX;
    return bytes;
}

/* The file system of parent has need_bytes free. */
static gs_status check_space(const char *opt, const char *path, const char *parent, uint64_t need_bytes,
                             gs_error *err)
{
    struct statvfs vfs;
    if (statvfs(parent, &vfs) != 0)
        return GS_OK; /* unknown: the writes will say */
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (avail >= need_bytes)
        return GS_OK;
    char a[32], b[32];
    fmt_bytes(a, sizeof a, need_bytes);
    fmt_bytes(b, sizeof b, avail);
    return gs_error_set(err, GS_ERR_INPUT, "%s %s: it needs about %s (%llu bytes) but %s has %s free", opt, path, a,
                        (unsigned long long)need_bytes, parent, b);
}

gs_status gs_ckpt_check_full_target(const char *path, uint64_t need_bytes, int force, gs_error *err)
{
    char *parent = gs_ckpt_parent_of(path);
    gs_status st = GS_OK;
    struct stat sb;
    if (!parent)
        return gs_error_set(err, GS_ERR_NOMEM, "--save-full %s: out of memory", path);
    if (lstat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode))
            st = gs_error_set(err, GS_ERR_INPUT, "--save-full %s: it exists and is not a regular file", path);
        else if (!full_save_file(path) && !force)
            st = gs_error_set(err, GS_ERR_INPUT,
                              "--save-full %s: it exists and is not a full checkpoint gridstep wrote (its header "
                              "lacks the gridstep metadata); refusing to replace it (--force replaces it)",
                              path);
    }
    if (st == GS_OK)
        st = check_parent("--save-full", path, parent, err);
    if (st == GS_OK)
        st = check_space("--save-full", path, parent, need_bytes, err);
    free(parent);
    return st;
}

gs_status gs_ckpt_check_target(const char *dir_in, uint64_t need_bytes, int force, gs_error *err)
{
    char *dir = gs_ckpt_dir_normalise(dir_in), *parent = dir ? gs_ckpt_parent_of(dir) : NULL, *old = NULL;
    char why[600];
    gs_status st = GS_OK;
    if (!dir || !parent || !(old = malloc(strlen(dir) + 5))) {
        st = gs_error_set(err, GS_ERR_NOMEM, "--save %s: out of memory", dir_in);
        goto out;
    }
    sprintf(old, "%s.old", dir);
    if (!*dir || strcmp(gs_ckpt_base_of(dir), ".") == 0 || strcmp(gs_ckpt_base_of(dir), "..") == 0 ||
        strcmp(dir, "/") == 0) {
        st = gs_error_set(err, GS_ERR_INPUT, "--save %s: expected a directory name (not '.', '..' or '/')", dir_in);
        goto out;
    }
    gs_ckpt_found found, found_old;
    if ((st = gs_ckpt_classify(dir, &found, why, sizeof why, err)) != GS_OK)
        goto out;
    if (found == GS_CKPT_FOREIGN && !force) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "--save %s: it exists and is not a gridstep checkpoint (%s); refusing to replace it "
                          "(--force moves it aside to %s.replaced-PID, deleting nothing)",
                          dir, why, dir);
        goto out;
    }
    if ((st = gs_ckpt_classify(old, &found_old, why, sizeof why, err)) != GS_OK)
        goto out;
    if (found == GS_CKPT_OURS && found_old != GS_CKPT_ABSENT && !gs_ckpt_marker_read(old, gs_ckpt_base_of(dir), NULL) &&
        !empty_dir(old)) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "--save %s: %s exists and no save retired it there (it has no %s marker naming %s); the "
                          "previous checkpoint is moved there during a save: move it away",
                          dir, old, GS_CKPT_MARKER, gs_ckpt_base_of(dir));
        goto out;
    }
    if ((st = check_parent("--save", dir, parent, err)) == GS_OK)
        st = check_space("--save", dir, parent, need_bytes, err);
out:
    free(dir);
    free(parent);
    free(old);
    return st;
}
