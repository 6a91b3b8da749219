/* Opening input files: regular files of bounded size, never a FIFO or a device. */
#include "engine/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

gs_status gs_input_open(const char *path, const char *what, uint64_t max_bytes, FILE **out, uint64_t *bytes,
                        gs_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    gs_status st = GS_OK;
    if (fstat(fd, &sb) != 0)
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected a regular file", path, what,
                          kind_of(sb.st_mode));
    else if ((uint64_t)sb.st_size > max_bytes)
        st = gs_error_set(err, GS_ERR_INPUT, "%s: %s too large: found %llu bytes, expected at most %llu", path, what,
                          (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(*out = fdopen(fd, "rb")))
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    if (st != GS_OK) {
        close(fd);
        return st;
    }
    if (bytes)
        *bytes = (uint64_t)sb.st_size;
    return GS_OK;
}

gs_status gs_input_read(const char *path, const char *what, uint64_t max_bytes, char **text, size_t *size,
                        gs_error *err)
{
    FILE *f = NULL;
    uint64_t n = 0;
    *text = NULL;
    *size = 0;
    gs_status st = gs_input_open(path, what, max_bytes, &f, &n, err);
    if (st != GS_OK)
        return st;
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return gs_error_set(err, GS_ERR_NOMEM, "%s: cannot allocate %llu bytes", path, (unsigned long long)n + 1);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n || ferror(f)) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path,
                          ferror(f) ? strerror(errno) : "file changed while reading");
        free(buf);
    } else {
        buf[n] = '\0';
        *text = buf;
        *size = (size_t)n;
    }
    fclose(f);
    return st;
}
