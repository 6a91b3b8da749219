/* Checkpoint rank records: a rank's saved pieces on the wire, for sharded saves across processes
 * (exec/checkpoint.h). */
#include "exec/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "exec/ckpt_internal.h"
#include "exec/crc32.h"

/* ---- sharded save across processes ---------------------------------------------------------- */

/* A rank record on the wire (little-endian):
 *   "GSCKREC1", u32 rank, u32 world, u64 step, u32 has_file, u32 file_crc32, u64 file_bytes,
 *   u64 piece_count, then per piece: u16 name bytes, the name (no NUL), u8 ndim, ndim x u64
 *   shape, u64 offset, u64 count, u8 has_optim; then u32 CRC-32 of every byte before it. */
static const char record_magic[8] = {'G', 'S', 'C', 'K', 'R', 'E', 'C', '1'};
#define RECORD_HEAD_BYTES (8 + 4 + 4 + 8 + 4 + 4 + 8 + 8)
#define RECORD_PIECE_MIN_BYTES (2 + 1 + 1 + 8 + 8 + 8 + 1) /* a 1-byte name, 1 dimension */
#define RECORD_NAME_MAX 65535

void gs_ckpt_rank_record_init(gs_ckpt_rank_record *rec)
{
    memset(rec, 0, sizeof *rec);
}

void gs_ckpt_rank_record_fini(gs_ckpt_rank_record *rec)
{
    for (size_t i = 0; rec->pieces && i < rec->piece_count; i++)
        free(rec->pieces[i].tensor);
    free(rec->pieces);
    gs_ckpt_rank_record_init(rec);
}

/* The checks write_rank makes of a piece, on a piece description; what names the context. */
static gs_status check_piece_info(const char *what, const gs_ckpt_piece_info *p, size_t i, gs_error *err)
{
    uint64_t numel;
    if (!p->tensor || !*p->tensor || strchr(p->tensor, '@'))
        return gs_error_set(err, GS_ERR_INPUT, "%s: piece %zu: tensor name '%s' empty or holds '@'", what, i,
                            p->tensor ? p->tensor : "(null)");
    if (p->ndim < 1 || p->ndim > GS_CKPT_MAX_DIMS || gs__ckpt_shape_numel(p->ndim, p->shape, &numel) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: piece %zu: tensor %s: %zu dimensions or size out of range", what,
                            i, p->tensor, p->ndim);
    if (p->count == 0 || p->offset > numel || p->count > numel - p->offset || (p->has_optim != 0 && p->has_optim != 1))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: piece %zu: tensor %s: elements [%llu, +%llu) empty or beyond its %llu elements", what,
                            i, p->tensor, (unsigned long long)p->offset, (unsigned long long)p->count,
                            (unsigned long long)numel);
    return GS_OK;
}

gs_status gs_ckpt_rank_record_of_view(gs_ckpt_rank_record *rec, int rank, int world, uint64_t step,
                                      const gs_ckpt_rank_view *view, gs_error *err)
{
    gs_status st = GS_OK;
    size_t n = 0;
    gs_ckpt_rank_record_init(rec);
    for (size_t s = 0; s < view->shard_count; s++) {
        if ((st = gs__ckpt_check_shard("record", rank, &view->shards[s], err)) != GS_OK)
            return st;
        n += view->shards[s].piece_count;
    }
    rec->rank = rank;
    rec->world = world;
    rec->step = step;
    if (!(rec->pieces = calloc(n + 1, sizeof *rec->pieces)))
        return gs_error_set(err, GS_ERR_NOMEM, "record of rank %d: out of memory", rank);
    for (size_t s = 0; s < view->shard_count; s++) {
        const gs_ckpt_shard *sh = &view->shards[s];
        for (size_t p = 0; p < sh->piece_count; p++) {
            gs_ckpt_piece_info *pi = &rec->pieces[rec->piece_count];
            if (!(pi->tensor = strdup(sh->name))) {
                gs_ckpt_rank_record_fini(rec);
                return gs_error_set(err, GS_ERR_NOMEM, "record of rank %d: out of memory", rank);
            }
            rec->piece_count++;
            pi->ndim = sh->ndim;
            memcpy(pi->shape, sh->shape, sizeof pi->shape);
            pi->offset = sh->pieces[p].offset;
            pi->count = sh->pieces[p].count;
            pi->has_optim = sh->pieces[p].adam_m != NULL;
        }
    }
    return GS_OK;
}

static unsigned char *put_le(unsigned char *at, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        at[i] = (unsigned char)(v >> (8 * i));
    return at + bytes;
}

gs_status gs_ckpt_rank_record_encode(const gs_ckpt_rank_record *rec, unsigned char **buf, size_t *bytes,
                                     gs_error *err)
{
    size_t n = RECORD_HEAD_BYTES + 4;
    *buf = NULL;
    *bytes = 0;
    for (size_t i = 0; i < rec->piece_count; i++) {
        const gs_ckpt_piece_info *p = &rec->pieces[i];
        size_t len = p->tensor ? strlen(p->tensor) : 0;
        if (len == 0 || len > RECORD_NAME_MAX || p->ndim < 1 || p->ndim > GS_CKPT_MAX_DIMS)
            return gs_error_set(err, GS_ERR_INPUT, "record of rank %d: piece %zu: name or dimensions out of range",
                                rec->rank, i);
        n += 2 + len + 1 + 8 * p->ndim + 8 + 8 + 1;
    }
    unsigned char *b = malloc(n), *at = b;
    if (!b)
        return gs_error_set(err, GS_ERR_NOMEM, "record of rank %d: out of memory", rec->rank);
    memcpy(at, record_magic, sizeof record_magic);
    at += sizeof record_magic;
    at = put_le(at, (uint32_t)rec->rank, 4);
    at = put_le(at, (uint32_t)rec->world, 4);
    at = put_le(at, rec->step, 8);
    at = put_le(at, rec->has_file ? 1 : 0, 4);
    at = put_le(at, rec->file_crc32, 4);
    at = put_le(at, rec->file_bytes, 8);
    at = put_le(at, rec->piece_count, 8);
    for (size_t i = 0; i < rec->piece_count; i++) {
        const gs_ckpt_piece_info *p = &rec->pieces[i];
        size_t len = strlen(p->tensor);
        at = put_le(at, len, 2);
        memcpy(at, p->tensor, len);
        at += len;
        at = put_le(at, p->ndim, 1);
        for (size_t d = 0; d < p->ndim; d++)
            at = put_le(at, p->shape[d], 8);
        at = put_le(at, p->offset, 8);
        at = put_le(at, p->count, 8);
        at = put_le(at, p->has_optim ? 1 : 0, 1);
    }
    at = put_le(at, gs_crc32_update(0, b, (size_t)(at - b)), 4);
    *buf = b;
    *bytes = n;
    return GS_OK;
}

/* A bounded little-endian reader over a record. */
typedef struct record_cursor {
    const unsigned char *b;
    size_t at, end;
} record_cursor;

static int get_le(record_cursor *c, int bytes, uint64_t *v)
{
    if (c->end - c->at < (size_t)bytes)
        return -1;
    *v = 0;
    for (int i = 0; i < bytes; i++)
        *v |= (uint64_t)c->b[c->at + (size_t)i] << (8 * i);
    c->at += (size_t)bytes;
    return 0;
}

gs_status gs_ckpt_rank_record_decode(const void *buf, size_t bytes, gs_ckpt_rank_record *out, gs_error *err)
{
    gs_status st = GS_OK;
    record_cursor c = {buf, 0, bytes >= 4 ? bytes - 4 : 0};
    uint64_t v[7], crc = 0;
    gs_ckpt_rank_record_init(out);
    if (bytes < RECORD_HEAD_BYTES + 4)
        return gs_error_set(err, GS_ERR_INPUT, "rank record: %zu bytes, truncated (a record has at least %d)", bytes,
                            RECORD_HEAD_BYTES + 4);
    record_cursor tail = {buf, bytes - 4, bytes};
    get_le(&tail, 4, &crc);
    uint32_t want = gs_crc32_update(0, buf, bytes - 4);
    if ((uint32_t)crc != want)
        return gs_error_set(err, GS_ERR_INPUT,
                            "rank record: %zu bytes, CRC-32 %08x, its last 4 bytes say %08x (truncated or garbled)",
                            bytes, want, (unsigned)crc);
    if (memcmp(buf, record_magic, sizeof record_magic) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "rank record: not a gridstep rank record (magic)");
    c.at = sizeof record_magic;
    static const int widths[7] = {4, 4, 8, 4, 4, 8, 8};
    for (int i = 0; i < 7; i++)
        get_le(&c, widths[i], &v[i]); /* within RECORD_HEAD_BYTES */
    if (v[0] >= 99999 || v[1] < 1 || v[1] > 99999 || v[0] >= v[1] || v[3] > 1)
        return gs_error_set(err, GS_ERR_INPUT, "rank record: rank %llu of world %llu or file flag %llu out of range",
                            (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[3]);
    if (v[6] > (c.end - c.at) / RECORD_PIECE_MIN_BYTES)
        return gs_error_set(err, GS_ERR_INPUT, "rank record: %llu pieces cannot fit in %zu bytes",
                            (unsigned long long)v[6], bytes);
    out->rank = (int)v[0];
    out->world = (int)v[1];
    out->step = v[2];
    out->has_file = (int)v[3];
    out->file_crc32 = (uint32_t)v[4];
    out->file_bytes = v[5];
    if (!(out->pieces = calloc((size_t)v[6] + 1, sizeof *out->pieces)))
        return gs_error_set(err, GS_ERR_NOMEM, "rank record: out of memory");
    for (uint64_t i = 0; i < v[6]; i++) {
        gs_ckpt_piece_info *p = &out->pieces[out->piece_count];
        uint64_t len = 0, x = 0;
        if (get_le(&c, 2, &len) != 0 || len == 0 || c.end - c.at < len) {
            st = gs_error_set(err, GS_ERR_INPUT, "rank record: piece %llu: name of %llu bytes truncated or empty",
                              (unsigned long long)i, (unsigned long long)len);
            goto out;
        }
        if (memchr(c.b + c.at, '\0', (size_t)len) || !(p->tensor = strndup((const char *)c.b + c.at, (size_t)len))) {
            st = gs_error_set(err, GS_ERR_INPUT, "rank record: piece %llu: name holds NUL (or out of memory)",
                              (unsigned long long)i);
            goto out;
        }
        out->piece_count++;
        c.at += (size_t)len;
        if (get_le(&c, 1, &x) != 0 || x < 1 || x > GS_CKPT_MAX_DIMS) {
            st = gs_error_set(err, GS_ERR_INPUT, "rank record: piece %llu: tensor %s: %llu dimensions (1 to %d)",
                              (unsigned long long)i, p->tensor, (unsigned long long)x, GS_CKPT_MAX_DIMS);
            goto out;
        }
        p->ndim = (size_t)x;
        int short_read = 0;
        for (size_t d = 0; d < p->ndim; d++)
            short_read |= get_le(&c, 8, &p->shape[d]);
        short_read |= get_le(&c, 8, &p->offset);
        short_read |= get_le(&c, 8, &p->count);
        short_read |= get_le(&c, 1, &x);
        if (short_read) {
            st = gs_error_set(err, GS_ERR_INPUT, "rank record: piece %llu: tensor %s: truncated", (unsigned long long)i,
                              p->tensor);
            goto out;
        }
        if (x > 1) {
            st = gs_error_set(err, GS_ERR_INPUT, "rank record: piece %llu: tensor %s: optimizer flag %llu (0 or 1)",
                              (unsigned long long)i, p->tensor, (unsigned long long)x);
            goto out;
        }
        p->has_optim = (int)x;
        if ((st = check_piece_info("rank record", p, (size_t)i, err)) != GS_OK)
            goto out;
    }
    if (c.at != c.end)
        st = gs_error_set(err, GS_ERR_INPUT, "rank record: %zu bytes after the last piece", c.end - c.at);
out:
    if (st != GS_OK)
        gs_ckpt_rank_record_fini(out);
    return st;
}

const char *gs_ckpt_writer_tmp_dir(const gs_ckpt_writer *w)
{
    return w->tmp_dir;
}

gs_status gs_ckpt_writer_attach(gs_ckpt_writer **out, const char *dir, const char *tmp_dir, const gs_ckpt_meta *meta,
                                int world, gs_error *err)
{
    struct stat sb;
    gs_ckpt_writer *w = NULL;
    gs_status st = gs__ckpt_writer_new(&w, dir, tmp_dir, meta, world, err);
    *out = NULL;
    if (st != GS_OK)
        return st;
    size_t dl = strlen(w->dir);
    /* DIR, then ".tmp-", then digits; each checked before the next is looked at */
    if (strncmp(tmp_dir, w->dir, dl) != 0 || strncmp(tmp_dir + dl, ".tmp-", 5) != 0 || !tmp_dir[dl + 5] ||
        strspn(tmp_dir + dl + 5, "0123456789") != strlen(tmp_dir + dl + 5)) {
        st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: %s is not one of its temporary directories (DIR.tmp-PID)",
                          w->dir, tmp_dir);
        goto out;
    }
    int found = stat(tmp_dir, &sb) == 0;
    if (!found || !S_ISDIR(sb.st_mode)) {
        st = gs_error_set(err, GS_ERR_IO,
                          "checkpoint %s: the root's temporary directory %s is not visible here (%s): DIR must be on "
                          "a filesystem every process sees",
                          w->dir, tmp_dir, found ? "not a directory" : strerror(errno));
        goto out;
    }
    *out = w;
out:
    if (st != GS_OK)
        gs_ckpt_writer_destroy(w);
    return st;
}

gs_status gs_ckpt_writer_export_rank(const gs_ckpt_writer *w, int rank, gs_ckpt_rank_record *rec, gs_error *err)
{
    gs_ckpt_rank_record_init(rec);
    if (rank < 0 || rank >= w->world || !w->ranks[rank].written)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d out of range or not written", w->dir, rank);
    const saved_rank *sr = &w->ranks[rank];
    rec->rank = rank;
    rec->world = w->world;
    rec->step = w->meta.step;
    rec->has_file = 1;
    rec->file_bytes = sr->file_bytes;
    rec->file_crc32 = sr->file_crc32;
    if (!(rec->pieces = calloc(sr->count + 1, sizeof *rec->pieces)))
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
    for (size_t i = 0; i < sr->count; i++) {
        const saved_piece *sp = &sr->pieces[i];
        gs_ckpt_piece_info *p = &rec->pieces[i];
        if (!(p->tensor = strdup(sp->tensor))) {
            gs_ckpt_rank_record_fini(rec);
            return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
        }
        rec->piece_count++;
        p->ndim = sp->ndim;
        memcpy(p->shape, sp->shape, sizeof p->shape);
        p->offset = sp->offset;
        p->count = sp->count;
        p->has_optim = sp->has_optim;
    }
    return GS_OK;
}

gs_status gs_ckpt_writer_import_rank(gs_ckpt_writer *w, const gs_ckpt_rank_record *rec, gs_error *err)
{
    gs_status st = GS_OK;
    char *fname = NULL, *fpath = NULL, what[64];
    struct stat sb;
    int rank = rec->rank;
    if (rank < 0 || rank >= w->world || rec->world != w->world || w->ranks[rank].written)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: record of rank %d of %d: out of range (world %d) or "
                            "written twice", w->dir, rank, rec->world, w->world);
    if (rec->step != w->meta.step || !rec->has_file)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: record of rank %d: step %llu (saving step %llu) or no "
                            "file", w->dir, rank, (unsigned long long)rec->step, (unsigned long long)w->meta.step);
    snprintf(what, sizeof what, "checkpoint record of rank %d", rank);
    for (size_t i = 0; i < rec->piece_count; i++)
        if ((st = check_piece_info(what, &rec->pieces[i], i, err)) != GS_OK) {
            gs_error_prefix(err, "checkpoint %s", w->dir);
            return st;
        }
    fname = gs__ckpt_rank_file_name(rank, w->world);
    fpath = fname ? gs__ckpt_path_join(w->tmp_dir, fname) : NULL;
    if (!fpath) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
        goto out;
    }
    int found = stat(fpath, &sb) == 0;
    if (!found || (uint64_t)sb.st_size != rec->file_bytes) {
        char have[64];
        if (found)
            snprintf(have, sizeof have, "%llu bytes", (unsigned long long)sb.st_size);
        st = gs_error_set(err, GS_ERR_IO,
                          "checkpoint %s: rank %d's file %s: %s, its record says %llu bytes (is DIR on a filesystem "
                          "every process sees?)",
                          w->dir, rank, fpath, found ? have : "missing", (unsigned long long)rec->file_bytes);
        goto out;
    }
    saved_rank *sr = &w->ranks[rank];
    sr->pieces = calloc(rec->piece_count + 1, sizeof *sr->pieces);
    sr->names = calloc(rec->piece_count + 1, sizeof *sr->names);
    if (!sr->pieces || !sr->names) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
        goto out;
    }
    for (size_t i = 0; i < rec->piece_count; i++) {
        const gs_ckpt_piece_info *p = &rec->pieces[i];
        saved_piece *sp = &sr->pieces[i];
        if (!(sr->names[i] = strdup(p->tensor))) {
            st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
            goto out;
        }
        sr->count++;
        sp->tensor = sr->names[i];
        sp->ndim = p->ndim;
        memcpy(sp->shape, p->shape, sizeof sp->shape);
        sp->offset = p->offset;
        sp->count = p->count;
        sp->has_optim = p->has_optim;
        sp->rank = rank;
    }
    sr->file_bytes = rec->file_bytes;
    sr->file_crc32 = rec->file_crc32;
    sr->written = 1;
out:
    if (st != GS_OK && rank >= 0 && rank < w->world && !w->ranks[rank].written)
        gs__ckpt_saved_rank_fini(&w->ranks[rank]);
    free(fname);
    free(fpath);
    return st;
}
