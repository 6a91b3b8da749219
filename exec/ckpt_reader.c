/* Loading a sharded checkpoint: the reader, its rank files and their pieces (exec/checkpoint.h). */
#include "exec/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "exec/atomic_file.h"
#include "exec/ckpt_internal.h"
#include "exec/ckpt_own.h"
#include "exec/crc32.h"
#include "exec/safetensors.h"

/* ---- the reader ----------------------------------------------------------------------------- */

struct gs_ckpt_reader {
    char *path; /* the directory read: DIR or DIR.old */
    gs_ckpt_index index;
};

static gs_status read_whole_file(const char *path, uint64_t max_bytes, char **buf, size_t *len, gs_error *err)
{
    gs_status st = GS_OK;
    *buf = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        st = gs_error_set(err, GS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return st;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max_bytes) {
        st = gs_error_set(err, GS_ERR_INPUT, "%s: not a regular file of at most %llu bytes", path,
                          (unsigned long long)max_bytes);
        goto out;
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        st = gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (fread(*buf, 1, *len, f) != *len) {
        st = gs_error_set(err, GS_ERR_IO, "%s: read failed", path);
        goto out;
    }
out:
    fclose(f);
    if (st != GS_OK) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

gs_status gs_ckpt_reader_create(gs_ckpt_reader **out, const char *dir, gs_error *err)
{
    gs_status st = GS_OK;
    char *norm = gs__ckpt_dir_normalise(dir), *old = NULL, *ipath = NULL, *text = NULL;
    size_t len = 0;
    *out = NULL;
    gs_ckpt_reader *r = calloc(1, sizeof *r);
    if (!r || !norm || !(old = gs__ckpt_str_printf("%s.old", norm))) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
        goto out;
    }
    gs_ckpt_index_init(&r->index);
    /* DIR.old is read only when a save retired it there (its marker names DIR) */
    int have_dir = gs_path_exists(norm, err);
    int have_old = have_dir == 0 ? gs_ckpt_marker_read(old, gs_ckpt_base_of(norm), NULL) : 0;
    if (have_dir < 0 || have_old < 0) {
        st = GS_ERR_IO;
        gs_error_prefix(err, "checkpoint %s", dir);
        goto out;
    }
    if (!have_dir && !have_old) {
        st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: no checkpoint (neither %s nor %s exists)", dir, norm,
                          old);
        goto out;
    }
    r->path = have_dir ? norm : old;
    if (have_dir)
        norm = NULL;
    else
        old = NULL;
    ipath = gs__ckpt_path_join(r->path, "index.json");
    if (!ipath) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
        goto out;
    }
    if (gs_path_exists(ipath, NULL) == 0) {
        st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: no index.json (not a gridstep checkpoint, or one whose "
                          "save did not finish)", r->path);
        goto out;
    }
    st = read_whole_file(ipath, INDEX_MAX_BYTES, &text, &len, err);
    if (st == GS_OK) {
        st = gs_ckpt_index_parse(text, len, &r->index, err);
        if (st != GS_OK)
            gs_error_prefix(err, "checkpoint %s: index.json", r->path);
    } else {
        gs_error_prefix(err, "checkpoint %s", r->path);
    }
    if (st == GS_OK)
        *out = r;
out:
    free(norm);
    free(old);
    free(ipath);
    free(text);
    if (st != GS_OK)
        gs_ckpt_reader_destroy(r);
    return st;
}

const gs_ckpt_index *gs_ckpt_reader_index(const gs_ckpt_reader *r)
{
    return &r->index;
}

const char *gs_ckpt_reader_path(const gs_ckpt_reader *r)
{
    return r->path;
}

void gs_ckpt_reader_destroy(gs_ckpt_reader *r)
{
    if (!r)
        return;
    gs_ckpt_index_fini(&r->index);
    free(r->path);
    free(r);
}

/* " (grid differs: tp 2 vs 4?)" when the caller's grid is known and differs, else "". */
static void grid_hint(char *buf, size_t cap, const gs_ckpt_index *ix, const gs_ckpt_meta *grid)
{
    buf[0] = '\0';
    if (!grid || (grid->dp == ix->dp && grid->pp == ix->pp && grid->tp == ix->tp))
        return;
    size_t used = (size_t)snprintf(buf, cap, " (grid differs:");
    const char *names[3] = {"dp", "pp", "tp"};
    int saved[3] = {ix->dp, ix->pp, ix->tp}, now[3] = {grid->dp, grid->pp, grid->tp};
    for (int i = 0; i < 3 && used < cap; i++)
        if (saved[i] != now[i])
            used += (size_t)snprintf(buf + used, cap - used, " %s %d vs %d", names[i], saved[i], now[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "?)");
}

/* CRC-32 of a whole open file, read in 1 MiB chunks. */
static gs_status file_crc32(const gs_st_file *f, uint32_t *out, gs_error *err)
{
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    uint32_t crc = 0;
    uint64_t at = 0;
    if (!buf)
        return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory", f->path);
    while (at < f->file_bytes) {
        ssize_t got = pread(f->fd, buf, CHUNK, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            free(buf);
            return gs_error_set(err, GS_ERR_IO, "%s: read failed at byte %llu", f->path, (unsigned long long)at);
        }
        crc = gs_crc32_update(crc, buf, (size_t)got);
        at += (uint64_t)got;
    }
    free(buf);
    *out = crc;
    return GS_OK;
}

/* Opens the rank files a load touches, lazily, checking their sizes and CRCs against the index. */
typedef struct open_files {
    gs_st_file *files;
    char *opened;
    size_t count;
} open_files;

/* A rank file's own metadata agrees with the index: its format, its rank (= its place in
 * files[]), the world and the step. */
static gs_status check_file_meta(const gs_ckpt_reader *r, const gs_st_file *f, uint32_t i, gs_error *err)
{
    const gs_st_header *h = &f->header;
    const char *format = gs_st_header_meta(h, "format"), *rank = gs_st_header_meta(h, "rank");
    const char *world = gs_st_header_meta(h, "world"), *step = gs_st_header_meta(h, "step");
    char want_rank[24], want_world[24], want_step[32];
    snprintf(want_rank, sizeof want_rank, "%u", i);
    snprintf(want_world, sizeof want_world, "%d", r->index.world);
    snprintf(want_step, sizeof want_step, "%llu", (unsigned long long)r->index.step);
    const char *what = !format || strcmp(format, GS_CKPT_FORMAT) != 0 ? "format"
                       : !rank || strcmp(rank, want_rank) != 0     ? "rank"
                       : !world || strcmp(world, want_world) != 0  ? "world"
                       : !step || strcmp(step, want_step) != 0     ? "step"
                                                                   : NULL;
    if (!what)
        return GS_OK;
    const char *got = gs_st_header_meta(h, what);
    const char *want = what[0] == 'f' ? GS_CKPT_FORMAT : what[0] == 'r' ? want_rank : what[0] == 'w' ? want_world
                                                                                                   : want_step;
    return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: %s: its metadata says %s '%s', index.json says '%s' "
                        "(a file of another checkpoint or rank?)", r->path, r->index.files[i].name, what,
                        got ? got : "(none)", want);
}

static gs_status get_file(const gs_ckpt_reader *r, open_files *of, uint32_t i, const gs_st_file **out, gs_error *err)
{
    if (!of->opened[i]) {
        char *p = gs__ckpt_path_join(r->path, r->index.files[i].name);
        if (!p)
            return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", r->path);
        gs_status st = gs_safetensors_open(&of->files[i], p, err);
        free(p);
        if (st != GS_OK) {
            gs_error_prefix(err, "checkpoint %s", r->path);
            return st;
        }
        of->opened[i] = 1;
        if (of->files[i].file_bytes != r->index.files[i].bytes)
            return gs_error_set(err, GS_ERR_INPUT,
                                "checkpoint %s: %s: %llu bytes, index.json says %llu (torn or mixed)", r->path,
                                r->index.files[i].name, (unsigned long long)of->files[i].file_bytes,
                                (unsigned long long)r->index.files[i].bytes);
        uint32_t crc = 0;
        gs_status st2 = file_crc32(&of->files[i], &crc, err);
        if (st2 != GS_OK)
            return st2;
        if (crc != r->index.files[i].crc32)
            return gs_error_set(err, GS_ERR_INPUT,
                                "checkpoint %s: %s: CRC-32 %08x, index.json says %08x (corrupt or mixed checkpoint)",
                                r->path, r->index.files[i].name, crc, r->index.files[i].crc32);
        gs_status st3 = check_file_meta(r, &of->files[i], i, err);
        if (st3 != GS_OK)
            return st3;
    }
    *out = &of->files[i];
    return GS_OK;
}

/* Copies `count` floats starting `within` elements into index piece ip's array `name`. */
static gs_status read_piece_part(const gs_ckpt_reader *r, open_files *of, const gs_ckpt_index_tensor *it,
                                 const gs_ckpt_index_piece *ip, const char *name, uint64_t within, uint64_t count,
                                 float *dst, gs_error *err)
{
    const gs_st_file *f = NULL;
    gs_status st = get_file(r, of, ip->file, &f, err);
    if (st != GS_OK)
        return st;
    const gs_st_tensor *t = gs_st_header_find(&f->header, name);
    if (!t)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: %s holds no tensor %s", r->path, it->name,
                            r->index.files[ip->file].name, name);
    if (t->dtype != GS_ST_F32 || t->ndim != 1 || t->shape[0] != ip->count) {
        char shape[160];
        gs__ckpt_fmt_shape(shape, sizeof shape, t->ndim, t->shape);
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: %s holds %s as %s %s, index.json says F32 "
                            "[%llu]", r->path, it->name, r->index.files[ip->file].name, name,
                            gs_st_dtype_name(t->dtype), shape, (unsigned long long)ip->count);
    }
    return gs_safetensors_read(f, t, within * 4, dst, count * 4, err);
}

gs_status gs_ckpt_reader_load_rank(const gs_ckpt_reader *r, const gs_ckpt_rank_view *view, const gs_ckpt_meta *grid,
                                   gs_error *err)
{
    gs_status st = GS_OK;
    const gs_ckpt_index *ix = &r->index;
    open_files of = {calloc(ix->file_count + 1, sizeof(gs_st_file)), calloc(ix->file_count + 1, 1), ix->file_count};
    if (!of.files || !of.opened) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", r->path);
        goto out;
    }
    for (size_t s = 0; s < view->shard_count; s++) {
        const gs_ckpt_shard *sh = &view->shards[s];
        const gs_ckpt_index_tensor *it = sh->name ? gs_ckpt_index_find(ix, sh->name) : NULL;
        char hint[128], a[160], b[160];
        grid_hint(hint, sizeof hint, ix, grid);
        if (!it) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: not in the checkpoint%s", r->path,
                              sh->name ? sh->name : "(null)", hint);
            goto out;
        }
        if (!gs__ckpt_same_shape(it->ndim, it->shape, sh->ndim, sh->shape)) {
            gs__ckpt_fmt_shape(a, sizeof a, it->ndim, it->shape);
            gs__ckpt_fmt_shape(b, sizeof b, sh->ndim, sh->shape);
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: shape %s in index, %s expected%s", r->path,
                              sh->name, a, b, hint);
            goto out;
        }
        uint64_t numel = 0;
        gs__ckpt_shape_numel(it->ndim, it->shape, &numel);
        for (size_t p = 0; p < sh->piece_count; p++) {
            const gs_ckpt_piece *pc = &sh->pieces[p];
            if (pc->offset > numel || pc->count > numel - pc->offset || (pc->count && !pc->data)) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: elements [%llu, +%llu) requested, it has %llu", r->path,
                                  sh->name, (unsigned long long)pc->offset, (unsigned long long)pc->count,
                                  (unsigned long long)numel);
                goto out;
            }
            if ((pc->adam_m || pc->adam_v) && (!ix->has_optimizer || !it->pieces[0].adam_m)) {
                st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: optimizer state requested, none saved",
                                  r->path, sh->name);
                goto out;
            }
            /* last index piece starting at or before the requested offset */
            size_t lo = 0, hi = it->piece_count;
            while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (it->pieces[mid].offset <= pc->offset)
                    lo = mid;
                else
                    hi = mid;
            }
            uint64_t done = 0;
            for (size_t j = lo; done < pc->count && j < it->piece_count; j++) {
                const gs_ckpt_index_piece *ip = &it->pieces[j];
                uint64_t within = pc->offset + done - ip->offset;
                uint64_t n = ip->count - within;
                if (n > pc->count - done)
                    n = pc->count - done;
                st = read_piece_part(r, &of, it, ip, ip->name, within, n, pc->data + done, err);
                if (st == GS_OK && pc->adam_m)
                    st = read_piece_part(r, &of, it, ip, ip->adam_m, within, n, pc->adam_m + done, err);
                if (st == GS_OK && pc->adam_v)
                    st = read_piece_part(r, &of, it, ip, ip->adam_v, within, n, pc->adam_v + done, err);
                if (st != GS_OK)
                    goto out;
                done += n;
            }
            if (done != pc->count) { /* cannot happen with a validated index; guard anyway */
                st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: elements [%llu, +%llu) not covered",
                                  r->path, sh->name, (unsigned long long)pc->offset, (unsigned long long)pc->count);
                goto out;
            }
        }
    }
out:
    for (size_t i = 0; of.opened && i < of.count; i++)
        if (of.opened[i])
            gs_safetensors_close(&of.files[i]);
    free(of.files);
    free(of.opened);
    return st;
}

gs_status gs_ckpt_load_sharded(const char *dir, const gs_ckpt_meta *grid, const gs_ckpt_rank_view *ranks,
                               int rank_count, uint64_t *step, gs_error *err)
{
    gs_ckpt_reader *r = NULL;
    gs_status st = gs_ckpt_reader_create(&r, dir, err);
    for (int k = 0; st == GS_OK && k < rank_count; k++)
        st = gs_ckpt_reader_load_rank(r, &ranks[k], grid, err);
    if (st == GS_OK && step)
        *step = r->index.step;
    gs_ckpt_reader_destroy(r);
    return st;
}
