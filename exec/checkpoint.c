/* Sharded and full training checkpoints: rank files, index.json, crash-safe replacement, loading. */
#include "exec/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "exec/atomic_file.h"
#include "exec/ckpt_own.h"
#include "exec/crc32.h"
#include "exec/safetensors.h"

/* index.json larger than this is refused (a 405B model's index is a few MB). */
#define INDEX_MAX_BYTES (UINT64_C(1) << 30)
#define INDEX_MAX_DEPTH 16

/* ---- small helpers -------------------------------------------------------------------------- */

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void fmt_shape(char *buf, size_t cap, size_t ndim, const uint64_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, cap - used, "[");
    for (size_t d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

static int shape_numel(size_t ndim, const uint64_t *shape, uint64_t *numel)
{
    uint64_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        if (gs_mul_u64(n, shape[d], &n) != 0)
            return -1;
    *numel = n;
    return 0;
}

static int same_shape(size_t na, const uint64_t *a, size_t nb, const uint64_t *b)
{
    if (na != nb)
        return 0;
    for (size_t d = 0; d < na; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

/* The index's own checksum: CRC-32 of the document without its "index_crc32" key, dumped compact
 * with sorted keys (integers and strings only: one text per document). 0 and *ok = 0 when it
 * cannot be computed. */
static uint32_t index_crc32(const json_t *root, int *ok)
{
    json_t *copy = json_copy((json_t *)root);
    char *text = NULL;
    uint32_t crc = 0;
    *ok = copy && (json_object_del(copy, "index_crc32"), 1) &&
          (text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS)) != NULL;
    if (*ok)
        crc = gs_crc32_update(0, text, strlen(text));
    free(text);
    json_decref(copy);
    return crc;
}

static char *rank_file_name(int rank, int world)
{
    return str_printf("rank%05d-of-%05d.safetensors", rank, world);
}

static char *path_join(const char *dir, const char *name)
{
    return str_printf("%s/%s", dir, name);
}

static char *dir_normalise(const char *dir)
{
    return gs_ckpt_dir_normalise(dir);
}

/* ---- the writer ----------------------------------------------------------------------------- */

typedef struct saved_piece {
    const char *tensor; /* borrowed from the writer's name pool */
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS];
    uint64_t offset, count;
    int has_optim;
    int rank;
} saved_piece;

typedef struct saved_rank {
    int written;
    uint64_t file_bytes;
    uint32_t file_crc32;
    saved_piece *pieces; /* owned */
    char **names;        /* owned copies of the tensor names these pieces point at */
    size_t count;
} saved_rank;

struct gs_ckpt_writer {
    char *dir, *tmp_dir, *old_dir; /* owned */
    gs_ckpt_meta meta;             /* scenario points at scenario_copy */
    char *scenario_copy;
    int world;
    saved_rank *ranks; /* world entries */
    gs_ckpt_hook hook;
    void *hook_arg;
    int committed;
    int attached; /* 1: tmp_dir is another process's (gs_ckpt_writer_attach) */
    int force;    /* 1: a DIR that is not a checkpoint is moved aside (never deleted) */
    char *displaced; /* where a forced save moved such a DIR (owned), or NULL */
    char run[384];   /* this save's identity, written into its marker */
};

static void call_hook(const gs_ckpt_writer *w, const char *phase, const char *path)
{
    if (w->hook)
        w->hook(phase, path, w->hook_arg);
}

/* A writer's common state for DIR: its normalised name, DIR.old, the metadata and the per-rank
 * slots; tmp_dir: the root's temporary directory to attach to (attached: never removed here), or
 * NULL for this process's own DIR.tmp-PID. On failure *out is NULL. */
static gs_status writer_new(gs_ckpt_writer **out, const char *dir, const char *tmp_dir, const gs_ckpt_meta *meta,
                            int world, gs_error *err)
{
    gs_status st = GS_OK;
    *out = NULL;
    gs_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
    w->attached = tmp_dir != NULL;
    if (world < 1 || world > 99999 || !meta || meta->dp < 1 || meta->pp < 1 || meta->tp < 1) {
        st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: world %d or grid out of range", dir, world);
        goto out;
    }
    w->dir = dir_normalise(dir);
    w->tmp_dir = tmp_dir ? strdup(tmp_dir) : w->dir ? str_printf("%s.tmp-%ld", w->dir, (long)getpid()) : NULL;
    w->old_dir = w->dir ? str_printf("%s.old", w->dir) : NULL;
    w->scenario_copy = strdup(meta->scenario ? meta->scenario : "");
    w->ranks = calloc((size_t)world, sizeof *w->ranks);
    if (!w->dir || !w->tmp_dir || !w->old_dir || !w->scenario_copy || !w->ranks) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", dir);
        goto out;
    }
    w->meta = *meta;
    w->meta.scenario = w->scenario_copy;
    w->world = world;
    *out = w;
out:
    if (st != GS_OK)
        gs_ckpt_writer_destroy(w);
    return st;
}

/* What may be at DIR and DIR.old when a save starts or swaps: DIR absent or a checkpoint (or,
 * forced, anything: it is moved aside); DIR.old absent, empty, or a save's (a marker for DIR). */
static gs_status check_swap_targets(const gs_ckpt_writer *w, gs_ckpt_found *found, gs_error *err)
{
    char why[600];
    gs_ckpt_found found_old;
    gs_status st = gs_ckpt_classify(w->dir, found, why, sizeof why, err);
    if (st != GS_OK)
        return st;
    if (*found == GS_CKPT_FOREIGN && !w->force)
        return gs_error_set(err, GS_ERR_INPUT,
                            "checkpoint %s: it exists and is not a gridstep checkpoint (%s); refusing to replace it "
                            "(--force moves it aside to %s.replaced-PID, deleting nothing)",
                            w->dir, why, w->dir);
    if (*found != GS_CKPT_OURS)
        return GS_OK;
    if ((st = gs_ckpt_classify(w->old_dir, &found_old, why, sizeof why, err)) != GS_OK)
        return st;
    if (found_old != GS_CKPT_ABSENT && !gs_ckpt_marker_read(w->old_dir, gs_ckpt_base_of(w->dir), NULL)) {
        struct stat sb;
        int empty_dir = lstat(w->old_dir, &sb) == 0 && S_ISDIR(sb.st_mode) && rmdir(w->old_dir) == 0;
        if (!empty_dir) /* rmdir removes only an empty directory: nothing lost */
            return gs_error_set(err, GS_ERR_INPUT,
                                "checkpoint %s: %s exists and no save retired it there (it has no %s marker naming "
                                "%s); the previous checkpoint is moved there during a save: move it away",
                                w->dir, w->old_dir, GS_CKPT_MARKER, gs_ckpt_base_of(w->dir));
    }
    return GS_OK;
}

gs_status gs_ckpt_writer_create(gs_ckpt_writer **out, const char *dir, const gs_ckpt_meta *meta, int world,
                                gs_error *err)
{
    return gs_ckpt_writer_create_forced(out, dir, meta, world, 0, err);
}

gs_status gs_ckpt_writer_create_forced(gs_ckpt_writer **out, const char *dir, const gs_ckpt_meta *meta, int world,
                                       int force, gs_error *err)
{
    gs_ckpt_writer *w = NULL;
    gs_status st = writer_new(&w, dir, NULL, meta, world, err);
    *out = NULL;
    if (st != GS_OK)
        return st;
    w->force = force;
    gs_ckpt_run_id(w->run, sizeof w->run);
    gs_ckpt_found found;
    st = gs_ckpt_recover(w->dir, err);
    if (st == GS_OK)
        st = check_swap_targets(w, &found, err);
    if (st == GS_OK && gs_ckpt_marker_read(w->tmp_dir, gs_ckpt_base_of(w->dir), NULL))
        st = gs_ckpt_remove_owned(w->tmp_dir, NULL, err); /* a failed save of an earlier process of this PID */
    if (st != GS_OK)
        goto out;
    if (mkdir(w->tmp_dir, 0777) != 0) {
        st = gs_error_set(err, errno == EEXIST ? GS_ERR_INPUT : GS_ERR_IO, "checkpoint %s: cannot create %s: %s%s",
                          w->dir, w->tmp_dir, strerror(errno),
                          errno == EEXIST ? " (and it is not a save's: move it away)" : "");
        free(w->tmp_dir); /* not ours: do not remove it in destroy */
        w->tmp_dir = NULL;
        goto out;
    }
    /* from here on the directory says whose it is; killed before this, it is empty and rmdir'able */
    st = gs_ckpt_marker_write(w->tmp_dir, gs_ckpt_base_of(w->dir), w->run, err);
    if (st == GS_OK)
        *out = w;
out:
    if (st != GS_OK)
        gs_ckpt_writer_destroy(w);
    return st;
}

const char *gs_ckpt_writer_displaced(const gs_ckpt_writer *w)
{
    return w->displaced;
}

void gs_ckpt_writer_set_hook(gs_ckpt_writer *w, gs_ckpt_hook hook, void *arg)
{
    w->hook = hook;
    w->hook_arg = arg;
    call_hook(w, "tmp-dir", w->tmp_dir);
}

static void saved_rank_fini(saved_rank *r)
{
    for (size_t i = 0; i < r->count; i++)
        free(r->names[i]);
    free(r->names);
    free(r->pieces);
    memset(r, 0, sizeof *r);
}

void gs_ckpt_writer_destroy(gs_ckpt_writer *w)
{
    if (!w)
        return;
    if (!w->committed && !w->attached && w->tmp_dir)
        gs_ckpt_remove_owned(w->tmp_dir, NULL, NULL);
    for (int r = 0; w->ranks && r < w->world; r++)
        saved_rank_fini(&w->ranks[r]);
    free(w->ranks);
    free(w->dir);
    free(w->tmp_dir);
    free(w->old_dir);
    free(w->displaced);
    free(w->scenario_copy);
    free(w);
}

static gs_status check_shard(const char *dir, int rank, const gs_ckpt_shard *s, gs_error *err)
{
    uint64_t numel;
    if (!s->name || !*s->name || strchr(s->name, '@'))
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d: tensor name '%s' empty or holds '@'", dir,
                            rank, s->name ? s->name : "(null)");
    if (s->ndim < 1 || s->ndim > GS_CKPT_MAX_DIMS || shape_numel(s->ndim, s->shape, &numel) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d: tensor %s: %zu dimensions or size out of range",
                            dir, rank, s->name, s->ndim);
    for (size_t p = 0; p < s->piece_count; p++) {
        const gs_ckpt_piece *pc = &s->pieces[p];
        if (pc->count == 0 || pc->offset > numel || pc->count > numel - pc->offset || !pc->data ||
            !pc->adam_m != !pc->adam_v)
            return gs_error_set(err, GS_ERR_INPUT,
                                "checkpoint %s: rank %d: tensor %s: piece %zu (elements [%llu, +%llu)) is empty, "
                                "beyond its %llu elements, or lacks data / one Adam moment",
                                dir, rank, s->name, p, (unsigned long long)pc->offset, (unsigned long long)pc->count,
                                (unsigned long long)numel);
    }
    return GS_OK;
}

gs_status gs_ckpt_writer_write_rank(gs_ckpt_writer *w, int rank, const gs_ckpt_rank_view *view, gs_error *err)
{
    gs_status st = GS_OK;
    gs_st_write_tensor *tensors = NULL;
    char **tnames = NULL;
    size_t ntensors = 0, npieces = 0;
    char *fname = NULL, *fpath = NULL;
    char rank_s[16], world_s[16], step_s[32], dp_s[16], pp_s[16], tp_s[16];
    FILE *f = NULL;
    if (rank < 0 || rank >= w->world || w->ranks[rank].written)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d out of range or written twice", w->dir, rank);
    saved_rank *sr = &w->ranks[rank];
    for (size_t s = 0; s < view->shard_count; s++) {
        st = check_shard(w->dir, rank, &view->shards[s], err);
        if (st != GS_OK)
            return st;
        npieces += view->shards[s].piece_count;
    }
    tensors = calloc(3 * npieces + 1, sizeof *tensors);
    tnames = calloc(3 * npieces + 1, sizeof *tnames);
    sr->pieces = calloc(npieces + 1, sizeof *sr->pieces);
    sr->names = calloc(npieces + 1, sizeof *sr->names);
    fname = rank_file_name(rank, w->world);
    fpath = fname ? path_join(w->tmp_dir, fname) : NULL;
    if (!tensors || !tnames || !sr->pieces || !sr->names || !fpath)
        goto nomem;
    for (size_t s = 0; s < view->shard_count; s++) {
        const gs_ckpt_shard *sh = &view->shards[s];
        for (size_t p = 0; p < sh->piece_count; p++) {
            const gs_ckpt_piece *pc = &sh->pieces[p];
            saved_piece *sp = &sr->pieces[sr->count];
            sr->names[sr->count] = strdup(sh->name);
            if (!sr->names[sr->count])
                goto nomem;
            sp->tensor = sr->names[sr->count];
            sr->count++;
            sp->ndim = sh->ndim;
            memcpy(sp->shape, sh->shape, sizeof sp->shape);
            sp->offset = pc->offset;
            sp->count = pc->count;
            sp->has_optim = pc->adam_m != NULL;
            sp->rank = rank;
            const char *prefix[3] = {"", "optim.m.", "optim.v."};
            const float *src[3] = {pc->data, pc->adam_m, pc->adam_v};
            for (int k = 0; k < (sp->has_optim ? 3 : 1); k++) {
                gs_st_write_tensor *t = &tensors[ntensors];
                tnames[ntensors] = str_printf("%s%s@%llu", prefix[k], sh->name, (unsigned long long)pc->offset);
                if (!tnames[ntensors])
                    goto nomem;
                t->name = tnames[ntensors++];
                t->dtype = GS_ST_F32;
                t->ndim = 1;
                t->shape[0] = pc->count;
                t->data = src[k];
            }
        }
    }
    snprintf(rank_s, sizeof rank_s, "%d", rank);
    snprintf(world_s, sizeof world_s, "%d", w->world);
    snprintf(step_s, sizeof step_s, "%llu", (unsigned long long)w->meta.step);
    snprintf(dp_s, sizeof dp_s, "%d", w->meta.dp);
    snprintf(pp_s, sizeof pp_s, "%d", w->meta.pp);
    snprintf(tp_s, sizeof tp_s, "%d", w->meta.tp);
    const gs_st_write_meta meta[] = {
        {"format", GS_CKPT_FORMAT}, {"format_version", GS_CKPT_FORMAT_VERSION_TEXT}, {"rank", rank_s}, {"world", world_s},
        {"step", step_s},           {"dp", dp_s},            {"pp", pp_s},     {"tp", tp_s},
        {"scenario", w->meta.scenario},
    };
    f = fopen(fpath, "wb");
    if (!f) {
        st = gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot create %s: %s", w->dir, fpath, strerror(errno));
        goto out;
    }
    st = gs_safetensors_write_stream(f, fpath, tensors, ntensors, meta, sizeof meta / sizeof meta[0], &sr->file_crc32,
                                     err);
    if (st == GS_OK) {
        long pos = ftell(f);
        sr->file_bytes = pos < 0 ? 0 : (uint64_t)pos;
        call_hook(w, "file-written", fpath);
    }
    if (st != GS_OK) {
        fclose(f);
    } else {
        st = gs_durable_close(f, fpath, err);
    }
    f = NULL;
    if (st == GS_OK)
        sr->written = 1;
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: rank %d: out of memory", w->dir, rank);
out:
    if (st != GS_OK)
        saved_rank_fini(sr);
    for (size_t i = 0; tnames && i < 3 * npieces; i++)
        free(tnames[i]);
    free(tnames);
    free(tensors);
    free(fname);
    free(fpath);
    return st;
}

static int cmp_saved_piece(const void *a, const void *b)
{
    const saved_piece *x = *(const saved_piece *const *)a, *y = *(const saved_piece *const *)b;
    int c = strcmp(x->tensor, y->tensor);
    if (c)
        return c;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    return x->rank - y->rank;
}

/* Builds index.json from every rank's pieces, checking they tile each tensor exactly. */
static gs_status build_index_json(const gs_ckpt_writer *w, json_t **out, gs_error *err)
{
    gs_status st = GS_OK;
    size_t total = 0;
    const saved_piece **all = NULL;
    json_t *root = json_object(), *tensors = json_object(), *files = json_array(), *md = json_object();
    char *fname = NULL, *pname = NULL;
    *out = NULL;
    if (!root || !tensors || !files || !md)
        goto nomem;
    for (int r = 0; r < w->world; r++) {
        if (!w->ranks[r].written) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d has not written its file", w->dir, r);
            goto out;
        }
        total += w->ranks[r].count;
    }
    all = malloc((total + 1) * sizeof *all);
    if (!all)
        goto nomem;
    size_t k = 0;
    for (int r = 0; r < w->world; r++)
        for (size_t i = 0; i < w->ranks[r].count; i++)
            all[k++] = &w->ranks[r].pieces[i];
    qsort(all, total, sizeof *all, cmp_saved_piece);
    int has_optim = total > 0 ? all[0]->has_optim : 0;
    for (size_t i = 0; i < total;) {
        const saved_piece *first = all[i];
        uint64_t numel = 0, cursor = 0;
        shape_numel(first->ndim, first->shape, &numel);
        json_t *tj = json_object(), *shape = json_array(), *pieces = json_array();
        if (!tj || json_object_set_new(tensors, first->tensor, tj) != 0) {
            json_decref(shape);
            json_decref(pieces);
            goto nomem;
        }
        if (!shape || !pieces || json_object_set_new(tj, "shape", shape) != 0 ||
            json_object_set_new(tj, "pieces", pieces) != 0 || json_object_set_new(tj, "dtype", json_string("F32")) != 0)
            goto nomem;
        for (size_t d = 0; d < first->ndim; d++)
            if (json_array_append_new(shape, json_integer((json_int_t)first->shape[d])) != 0)
                goto nomem;
        const saved_piece *prev = NULL;
        for (; i < total && strcmp(all[i]->tensor, first->tensor) == 0; i++) {
            const saved_piece *p = all[i];
            char a[160], b[160];
            if (!same_shape(p->ndim, p->shape, first->ndim, first->shape)) {
                fmt_shape(a, sizeof a, first->ndim, first->shape);
                fmt_shape(b, sizeof b, p->ndim, p->shape);
                st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: shape %s on rank %d, %s on rank %d",
                                  w->dir, p->tensor, a, first->rank, b, p->rank);
                goto out;
            }
            if (p->has_optim != has_optim) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: the piece at element %llu on rank %d %s optimizer state; "
                                  "all pieces must have it or none",
                                  w->dir, p->tensor, (unsigned long long)p->offset, p->rank,
                                  p->has_optim ? "has" : "lacks");
                goto out;
            }
            if (prev && p->offset == prev->offset && p->count == prev->count)
                continue; /* a replica's identical copy: the lowest rank's is indexed */
            if (p->offset < cursor) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: elements [%llu, %llu) on rank %d overlap [%llu, %llu) on "
                                  "rank %d",
                                  w->dir, p->tensor, (unsigned long long)p->offset,
                                  (unsigned long long)(p->offset + p->count), p->rank, (unsigned long long)prev->offset,
                                  (unsigned long long)(prev->offset + prev->count), prev->rank);
                goto out;
            }
            if (p->offset > cursor) {
                st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: elements [%llu, %llu) are on no rank",
                                  w->dir, p->tensor, (unsigned long long)cursor, (unsigned long long)p->offset);
                goto out;
            }
            json_t *pj = json_object();
            if (!pj || json_array_append_new(pieces, pj) != 0)
                goto nomem;
            pname = str_printf("%s@%llu", p->tensor, (unsigned long long)p->offset);
            if (!pname || json_object_set_new(pj, "file", json_integer(p->rank)) != 0 ||
                json_object_set_new(pj, "offset", json_integer((json_int_t)p->offset)) != 0 ||
                json_object_set_new(pj, "count", json_integer((json_int_t)p->count)) != 0 ||
                json_object_set_new(pj, "name", json_string(pname)) != 0)
                goto nomem;
            if (p->has_optim) {
                for (int m = 0; m < 2; m++) {
                    char *oname = str_printf("optim.%c.%s", m ? 'v' : 'm', pname);
                    if (!oname || json_object_set_new(pj, m ? "adam_v" : "adam_m", json_string(oname)) != 0) {
                        free(oname);
                        goto nomem;
                    }
                    free(oname);
                }
            }
            free(pname);
            pname = NULL;
            cursor = p->offset + p->count;
            prev = p;
        }
        if (cursor != numel) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: elements [%llu, %llu) are on no rank",
                              w->dir, first->tensor, (unsigned long long)cursor, (unsigned long long)numel);
            goto out;
        }
    }
    for (int r = 0; r < w->world; r++) {
        json_t *fj = json_object();
        fname = rank_file_name(r, w->world);
        if (!fj || json_array_append_new(files, fj) != 0 || !fname ||
            json_object_set_new(fj, "name", json_string(fname)) != 0 ||
            json_object_set_new(fj, "bytes", json_integer((json_int_t)w->ranks[r].file_bytes)) != 0 ||
            json_object_set_new(fj, "crc32", json_integer((json_int_t)w->ranks[r].file_crc32)) != 0)
            goto nomem;
        free(fname);
        fname = NULL;
    }
    if (json_object_set_new(md, "dp", json_integer(w->meta.dp)) != 0 ||
        json_object_set_new(md, "pp", json_integer(w->meta.pp)) != 0 ||
        json_object_set_new(md, "tp", json_integer(w->meta.tp)) != 0 ||
        json_object_set_new(md, "world", json_integer(w->world)) != 0 ||
        json_object_set_new(md, "step", json_integer((json_int_t)w->meta.step)) != 0 ||
        json_object_set_new(md, "scenario", json_string(w->meta.scenario)) != 0 ||
        json_object_set_new(md, "optimizer", json_string(has_optim ? "adam" : "none")) != 0)
        goto nomem;
    if (json_object_set_new(root, "format", json_string(GS_CKPT_FORMAT)) != 0 ||
        json_object_set_new(root, "format_version", json_integer(GS_CKPT_FORMAT_VERSION)) != 0 ||
        json_object_set(root, "metadata", md) != 0 || json_object_set(root, "files", files) != 0 ||
        json_object_set(root, "tensors", tensors) != 0)
        goto nomem;
    int crc_ok;
    uint32_t crc = index_crc32(root, &crc_ok);
    if (!crc_ok || json_object_set_new(root, "index_crc32", json_integer((json_int_t)crc)) != 0)
        goto nomem;
    *out = json_incref(root);
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory building the index", w->dir);
out:
    free(fname);
    free(pname);
    free(all);
    json_decref(md);
    json_decref(files);
    json_decref(tensors);
    json_decref(root);
    return st;
}

/* Moves what is at DIR out of the way: a checkpoint to DIR.old (marked as this save's first, so
 * that recovery knows it), anything else (forced) to DIR.replaced-PID. *moved: 1 for DIR.old. */
static gs_status move_aside(gs_ckpt_writer *w, int *retired, gs_error *err)
{
    gs_ckpt_found found;
    gs_status st = check_swap_targets(w, &found, err);
    *retired = 0;
    if (st != GS_OK || found == GS_CKPT_ABSENT)
        return st;
    const char *to = w->old_dir;
    if (found == GS_CKPT_FOREIGN) {
        free(w->displaced);
        if (!(w->displaced = str_printf("%s.replaced-%ld", w->dir, (long)getpid())))
            return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
        if (gs_path_exists(w->displaced, err) != 0)
            return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: cannot move it aside: %s exists", w->dir,
                                w->displaced);
        to = w->displaced;
    } else if ((st = gs_ckpt_marker_write(w->dir, gs_ckpt_base_of(w->dir), w->run, err)) != GS_OK) {
        return st;
    }
    if (rename(w->dir, to) != 0)
        return gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot move the previous %s to %s: %s", w->dir,
                            found == GS_CKPT_OURS ? "checkpoint" : "contents", to, strerror(errno));
    *retired = found == GS_CKPT_OURS;
    st = gs_fsync_parent(w->dir, err);
    if (st == GS_OK)
        call_hook(w, "old-moved", to);
    return st;
}

/* Steps 2-5 of the protocol: the previous DIR aside, the new one in, the previous one removed
 * (its own files only). */
static gs_status swap_in(gs_ckpt_writer *w, gs_error *err)
{
    int retired = 0;
    gs_status st = move_aside(w, &retired, err);
    if (st != GS_OK)
        return st;
    if (rename(w->tmp_dir, w->dir) != 0) {
        st = gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot rename %s into place: %s", w->dir, w->tmp_dir,
                          strerror(errno));
        if (retired)
            rename(w->old_dir, w->dir); /* put the previous one back; recovery would too */
        else if (w->displaced)
            rename(w->displaced, w->dir);
        return st;
    }
    w->committed = 1;
    if ((st = gs_fsync_parent(w->dir, err)) != GS_OK)
        return st;
    call_hook(w, "new-in-place", w->dir);
    if (retired) {
        st = gs_ckpt_remove_owned(w->old_dir, NULL, err);
        if (st == GS_OK)
            st = gs_fsync_parent(w->dir, err);
        if (st == GS_OK)
            call_hook(w, "old-removed", w->old_dir);
    }
    return st;
}

gs_status gs_ckpt_writer_commit(gs_ckpt_writer *w, gs_error *err)
{
    gs_status st = GS_OK;
    json_t *index = NULL;
    char *ipath = NULL;
    FILE *f = NULL;
    if (w->committed)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: committed twice", w->dir);
    if (w->attached)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: an attached writer cannot commit (the root's does)",
                            w->dir);
    call_hook(w, "files-synced", w->tmp_dir);
    st = build_index_json(w, &index, err);
    if (st != GS_OK)
        goto out;
    ipath = path_join(w->tmp_dir, "index.json");
    if (!ipath) {
        st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", w->dir);
        goto out;
    }
    f = fopen(ipath, "wb");
    if (!f) {
        st = gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot create %s: %s", w->dir, ipath, strerror(errno));
        goto out;
    }
    if (json_dumpf(index, f, JSON_INDENT(1) | JSON_SORT_KEYS) != 0 || fputc('\n', f) == EOF) {
        fclose(f);
        st = gs_error_set(err, GS_ERR_IO, "checkpoint %s: cannot write %s: %s", w->dir, ipath, strerror(errno));
        goto out;
    }
    st = gs_durable_close(f, ipath, err);
    if (st != GS_OK)
        goto out;
    call_hook(w, "index-written", ipath);
    st = gs_fsync_dir(w->tmp_dir, err);
    if (st != GS_OK)
        goto out;
    st = swap_in(w, err);
out:
    free(ipath);
    json_decref(index);
    return st;
}

gs_status gs_ckpt_save_sharded(const char *dir, const gs_ckpt_meta *meta, const gs_ckpt_rank_view *ranks,
                               int rank_count, gs_error *err)
{
    gs_ckpt_writer *w = NULL;
    gs_status st = gs_ckpt_writer_create(&w, dir, meta, rank_count, err);
    for (int r = 0; st == GS_OK && r < rank_count; r++)
        st = gs_ckpt_writer_write_rank(w, r, &ranks[r], err);
    if (st == GS_OK)
        st = gs_ckpt_writer_commit(w, err);
    gs_ckpt_writer_destroy(w);
    return st;
}

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
    if (p->ndim < 1 || p->ndim > GS_CKPT_MAX_DIMS || shape_numel(p->ndim, p->shape, &numel) != 0)
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
        if ((st = check_shard("record", rank, &view->shards[s], err)) != GS_OK)
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
    gs_status st = writer_new(&w, dir, tmp_dir, meta, world, err);
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
    fname = rank_file_name(rank, w->world);
    fpath = fname ? path_join(w->tmp_dir, fname) : NULL;
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
        saved_rank_fini(&w->ranks[rank]);
    free(fname);
    free(fpath);
    return st;
}

/* ---- the index ------------------------------------------------------------------------------ */

void gs_ckpt_index_init(gs_ckpt_index *ix)
{
    memset(ix, 0, sizeof *ix);
}

void gs_ckpt_index_fini(gs_ckpt_index *ix)
{
    for (size_t t = 0; t < ix->tensor_count; t++) {
        gs_ckpt_index_tensor *it = &ix->tensors[t];
        for (size_t p = 0; p < it->piece_count; p++) {
            free(it->pieces[p].name);
            free(it->pieces[p].adam_m);
            free(it->pieces[p].adam_v);
        }
        free(it->pieces);
        free(it->name);
    }
    for (size_t f = 0; f < ix->file_count; f++)
        free(ix->files[f].name);
    free(ix->files);
    free(ix->tensors);
    free(ix->scenario);
    gs_ckpt_index_init(ix);
}

static int cmp_index_tensor(const void *a, const void *b)
{
    return strcmp(((const gs_ckpt_index_tensor *)a)->name, ((const gs_ckpt_index_tensor *)b)->name);
}

const gs_ckpt_index_tensor *gs_ckpt_index_find(const gs_ckpt_index *ix, const char *name)
{
    if (!ix->tensor_count)
        return NULL;
    gs_ckpt_index_tensor key = {.name = (char *)name};
    return bsearch(&key, ix->tensors, ix->tensor_count, sizeof key, cmp_index_tensor);
}

static int get_u64(const json_t *obj, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_int(const json_t *obj, const char *key, int lo, int hi, int *out)
{
    uint64_t v;
    if (get_u64(obj, key, &v) != 0 || v < (uint64_t)lo || v > (uint64_t)hi)
        return -1;
    *out = (int)v;
    return 0;
}

static char *get_string_dup(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static int file_name_ok(const char *s)
{
    return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* The document's own checksum (index_crc32) matches its content. */
static gs_status check_index_crc32(const json_t *root, gs_error *err)
{
    uint64_t want;
    int ok;
    if (get_u64(root, "index_crc32", &want) != 0 || want > UINT32_MAX)
        return gs_error_set(err, GS_ERR_INPUT, "index_crc32 missing or not a 32-bit unsigned integer");
    uint32_t got = index_crc32(root, &ok);
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory checking index_crc32");
    if (got != (uint32_t)want)
        return gs_error_set(err, GS_ERR_INPUT, "index_crc32 %08x, its content gives %08x: index.json was edited or "
                            "damaged", (uint32_t)want, got);
    return GS_OK;
}

/* The names a piece at `offset` of `tensor` has in its rank file: NAME@OFF, optim.m.NAME@OFF and
 * optim.v.NAME@OFF; 0 when they match ip's (which == 0, 1, 2: the one that differs in *which). */
static int piece_names_match(const char *tensor, const gs_ckpt_index_piece *ip, int has_optim, char *want,
                             size_t cap, int *which)
{
    static const char *const prefix[3] = {"", "optim.m.", "optim.v."};
    const char *got[3] = {ip->name, ip->adam_m, ip->adam_v};
    for (int k = 0; k < (has_optim ? 3 : 1); k++) {
        snprintf(want, cap, "%s%s@%llu", prefix[k], tensor, (unsigned long long)ip->offset);
        if (!got[k] || strcmp(got[k], want) != 0) {
            *which = k;
            return 0;
        }
    }
    return 1;
}

static gs_status parse_index_tensor(const gs_ckpt_index *ix, const char *name, const json_t *v,
                                    gs_ckpt_index_tensor *t, gs_error *err)
{
    const json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    const json_t *pieces = json_object_get(v, "pieces");
    uint64_t numel, cursor = 0;
    if (!json_is_object(v) || !json_is_string(dtype) || !json_is_array(shape) || !json_is_array(pieces))
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: needs dtype, shape and pieces", name);
    if (strcmp(json_string_value(dtype), "F32") != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: dtype %s not supported (F32 only)", name,
                            json_string_value(dtype));
    t->ndim = json_array_size(shape);
    if (t->ndim < 1 || t->ndim > GS_CKPT_MAX_DIMS)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: %zu dimensions (1 to %d supported)", name, t->ndim,
                            GS_CKPT_MAX_DIMS);
    for (size_t d = 0; d < t->ndim; d++) {
        const json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape[%zu] is not a non-negative integer", name, d);
        t->shape[d] = (uint64_t)json_integer_value(x);
    }
    if (shape_numel(t->ndim, t->shape, &numel) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape overflows 64 bits", name);
    t->pieces = calloc(json_array_size(pieces) + 1, sizeof *t->pieces);
    if (!t->pieces)
        return gs_error_set(err, GS_ERR_NOMEM, "tensor %s: out of memory", name);
    for (size_t p = 0; p < json_array_size(pieces); p++) {
        const json_t *pj = json_array_get(pieces, p);
        gs_ckpt_index_piece *ip = &t->pieces[t->piece_count++];
        uint64_t file;
        if (!json_is_object(pj) || get_u64(pj, "file", &file) != 0 || get_u64(pj, "offset", &ip->offset) != 0 ||
            get_u64(pj, "count", &ip->count) != 0 || !json_is_string(json_object_get(pj, "name")))
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu needs file, offset, count and name", name, p);
        if (file >= ix->file_count)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu: file %llu of %zu", name, p,
                                (unsigned long long)file, ix->file_count);
        ip->file = (uint32_t)file;
        ip->name = get_string_dup(pj, "name");
        ip->adam_m = get_string_dup(pj, "adam_m");
        ip->adam_v = get_string_dup(pj, "adam_v");
        if (!ip->name)
            return gs_error_set(err, GS_ERR_NOMEM, "tensor %s: out of memory", name);
        if (ix->has_optimizer && (!ip->adam_m || !ip->adam_v))
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu lacks adam_m/adam_v (optimizer is adam)", name,
                                p);
        if (ip->count == 0 || ip->offset != cursor || ip->count > numel - cursor)
            return gs_error_set(err, GS_ERR_INPUT,
                                "tensor %s: piece %zu covers elements [%llu, +%llu) but the next uncovered element is "
                                "%llu of %llu (pieces must tile the tensor in order)",
                                name, p, (unsigned long long)ip->offset, (unsigned long long)ip->count,
                                (unsigned long long)cursor, (unsigned long long)numel);
        char want[600];
        int which = 0;
        static const char *const field[3] = {"name", "adam_m", "adam_v"};
        if (!piece_names_match(name, ip, ix->has_optimizer, want, sizeof want, &which)) {
            const char *got = which == 0 ? ip->name : which == 1 ? ip->adam_m : ip->adam_v;
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu's %s is '%s', expected '%s' (a piece holds "
                                "its own tensor's data at its own offset)", name, p, field[which], got ? got : "",
                                want);
        }
        cursor += ip->count;
    }
    if (cursor != numel)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: elements [%llu, %llu) are in no piece", name,
                            (unsigned long long)cursor, (unsigned long long)numel);
    return GS_OK;
}

/* Nesting depth check before jansson (which recurses) sees the text. */
static gs_status check_depth(const char *buf, size_t len, gs_error *err)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if ((c == '[' || c == '{') && ++depth > INDEX_MAX_DEPTH) {
            return gs_error_set(err, GS_ERR_INPUT, "JSON nested deeper than %d levels", INDEX_MAX_DEPTH);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return GS_OK;
}

gs_status gs_ckpt_index_parse(const char *buf, size_t len, gs_ckpt_index *ix, gs_error *err)
{
    gs_status st = GS_OK;
    json_t *root = NULL;
    json_error_t jerr;
    gs_ckpt_index_init(ix);
    st = check_depth(buf, len, err);
    if (st != GS_OK)
        goto out;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT, "bad JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        goto out;
    }
    const json_t *format = json_object_get(root, "format"), *md = json_object_get(root, "metadata");
    const json_t *files = json_object_get(root, "files"), *tensors = json_object_get(root, "tensors");
    if (!json_is_object(root) || !json_is_string(format) || strcmp(json_string_value(format), GS_CKPT_FORMAT) != 0) {
        st = gs_error_set(err, GS_ERR_INPUT, "not a %s index (\"format\" missing or different)", GS_CKPT_FORMAT);
        goto out;
    }
    if (get_int(root, "format_version", 0, 1 << 30, &ix->version) != 0 || ix->version != GS_CKPT_FORMAT_VERSION) {
        st = gs_error_set(err, GS_ERR_INPUT, "format_version %d not supported (this build reads %d: version 1 had no "
                          "index checksum)", ix->version, GS_CKPT_FORMAT_VERSION);
        goto out;
    }
    const char *optim = json_string_value(json_object_get(md, "optimizer"));
    /* the first field that is missing or out of range, named */
    const char *bad = !json_is_object(md)                             ? "metadata: not an object; it"
                      : get_int(md, "dp", 1, 1 << 20, &ix->dp) != 0     ? "metadata.dp"
                      : get_int(md, "pp", 1, 1 << 20, &ix->pp) != 0     ? "metadata.pp"
                      : get_int(md, "tp", 1, 1 << 20, &ix->tp) != 0     ? "metadata.tp"
                      : get_int(md, "world", 1, 99999, &ix->world) != 0 ? "metadata.world"
                      : get_u64(md, "step", &ix->step) != 0             ? "metadata.step"
                      : !json_is_string(json_object_get(md, "scenario")) ? "metadata.scenario"
                      : !optim || (strcmp(optim, "adam") != 0 && strcmp(optim, "none") != 0) ? "metadata.optimizer"
                                                                                         : NULL;
    if (bad) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s missing or out of range: metadata needs dp, pp, tp (1 to 2^20), world (1 to 99999), "
                          "step (an integer from 0), scenario (a string) and optimizer (adam or none)", bad);
        goto out;
    }
    ix->has_optimizer = strcmp(optim, "adam") == 0;
    ix->scenario = get_string_dup(md, "scenario");
    if (!json_is_array(files) || json_array_size(files) != (size_t)ix->world) {
        st = gs_error_set(err, GS_ERR_INPUT, "files must list %d files (one per rank)", ix->world);
        goto out;
    }
    ix->files = calloc(json_array_size(files) + 1, sizeof *ix->files);
    if (!ix->scenario || !ix->files)
        goto nomem;
    for (size_t f = 0; f < json_array_size(files); f++) {
        const json_t *fj = json_array_get(files, f);
        gs_ckpt_index_file *xf = &ix->files[ix->file_count++];
        uint64_t crc;
        xf->name = get_string_dup(fj, "name");
        if (!xf->name || !file_name_ok(xf->name) || get_u64(fj, "bytes", &xf->bytes) != 0 ||
            get_u64(fj, "crc32", &crc) != 0 || crc > UINT32_MAX) {
            st = gs_error_set(err, GS_ERR_INPUT, "files[%zu]: needs a plain file name (no '/'), bytes and crc32", f);
            goto out;
        }
        xf->crc32 = (uint32_t)crc;
    }
    if (!json_is_object(tensors)) {
        st = gs_error_set(err, GS_ERR_INPUT, "tensors is not an object");
        goto out;
    }
    ix->tensors = calloc(json_object_size(tensors) + 1, sizeof *ix->tensors);
    if (!ix->tensors)
        goto nomem;
    const char *name;
    json_t *tv;
    json_object_foreach((json_t *)tensors, name, tv) {
        gs_ckpt_index_tensor *t = &ix->tensors[ix->tensor_count];
        t->name = strdup(name);
        if (!t->name)
            goto nomem;
        ix->tensor_count++;
        st = parse_index_tensor(ix, name, tv, t, err);
        if (st != GS_OK)
            goto out;
    }
    qsort(ix->tensors, ix->tensor_count, sizeof *ix->tensors, cmp_index_tensor);
    /* last, so that a damage the checks above can name is named: what is left is an edit that
     * kept the document well-formed (swapped pieces, another step or grid) */
    st = check_index_crc32(root, err);
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
out:
    json_decref(root);
    if (st != GS_OK)
        gs_ckpt_index_fini(ix);
    return st;
}

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
    char *norm = dir_normalise(dir), *old = NULL, *ipath = NULL, *text = NULL;
    size_t len = 0;
    *out = NULL;
    gs_ckpt_reader *r = calloc(1, sizeof *r);
    if (!r || !norm || !(old = str_printf("%s.old", norm))) {
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
    ipath = path_join(r->path, "index.json");
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
        char *p = path_join(r->path, r->index.files[i].name);
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
            return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: %s: %llu bytes, index.json says %llu (torn or mixed)",
                                r->path, r->index.files[i].name, (unsigned long long)of->files[i].file_bytes,
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
        fmt_shape(shape, sizeof shape, t->ndim, t->shape);
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
        if (!same_shape(it->ndim, it->shape, sh->ndim, sh->shape)) {
            fmt_shape(a, sizeof a, it->ndim, it->shape);
            fmt_shape(b, sizeof b, sh->ndim, sh->shape);
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: shape %s in index, %s expected%s", r->path,
                              sh->name, a, b, hint);
            goto out;
        }
        uint64_t numel = 0;
        shape_numel(it->ndim, it->shape, &numel);
        for (size_t p = 0; p < sh->piece_count; p++) {
            const gs_ckpt_piece *pc = &sh->pieces[p];
            if (pc->offset > numel || pc->count > numel - pc->offset || (pc->count && !pc->data)) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: elements [%llu, +%llu) requested, it has %llu", r->path,
                                  sh->name, (unsigned long long)pc->offset, (unsigned long long)pc->count,
                                  (unsigned long long)numel);
                goto out;
            }
            if ((pc->adam_m || pc->adam_v) && !ix->has_optimizer) {
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

/* ---- full file ------------------------------------------------------------------------------ */

gs_status gs_ckpt_save_full(const char *path, const gs_ckpt_meta *meta, const gs_ckpt_full_tensor *tensors,
                            size_t count, gs_ckpt_hook hook, void *hook_arg, gs_error *err)
{
    gs_status st = GS_OK;
    gs_atomic_file af = {0};
    gs_st_write_tensor *wt = calloc(count + 1, sizeof *wt);
    char step_s[32], dp_s[16], pp_s[16], tp_s[16];
    if (!wt)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", path);
    for (size_t i = 0; i < count; i++) {
        if (tensors[i].ndim > GS_CKPT_MAX_DIMS) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: too many dimensions", path,
                              tensors[i].name ? tensors[i].name : "(null)");
            goto out;
        }
        wt[i].name = tensors[i].name;
        wt[i].dtype = GS_ST_F32;
        wt[i].ndim = tensors[i].ndim;
        memcpy(wt[i].shape, tensors[i].shape, sizeof wt[i].shape);
        wt[i].data = tensors[i].data;
    }
    snprintf(step_s, sizeof step_s, "%llu", (unsigned long long)meta->step);
    snprintf(dp_s, sizeof dp_s, "%d", meta->dp);
    snprintf(pp_s, sizeof pp_s, "%d", meta->pp);
    snprintf(tp_s, sizeof tp_s, "%d", meta->tp);
    const gs_st_write_meta md[] = {
        {"format", "pt"}, {"gridstep.step", step_s}, {"gridstep.dp", dp_s}, {"gridstep.pp", pp_s},
        {"gridstep.tp", tp_s}, {"gridstep.scenario", meta->scenario ? meta->scenario : ""},
    };
    st = gs_ckpt_remove_stale_full(path, err);
    if (st == GS_OK)
        st = gs_atomic_file_begin(&af, path, err);
    if (st != GS_OK)
        goto out;
    st = gs_safetensors_write_stream(af.stream, path, wt, count, md, sizeof md / sizeof md[0], NULL, err);
    if (st != GS_OK) {
        gs_atomic_file_abort(&af);
        goto out;
    }
    if (hook)
        hook("full-written", af.tmp_path, hook_arg);
    st = gs_atomic_file_commit(&af, err);
    if (st == GS_OK && hook)
        hook("full-renamed", path, hook_arg);
out:
    free(wt);
    return st;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

gs_status gs_ckpt_load_full(const char *path, const gs_ckpt_rank_view *view, gs_error *err)
{
    gs_st_file f;
    uint16_t *tmp = NULL;
    gs_status st = gs_safetensors_open(&f, path, err);
    if (st != GS_OK)
        return st;
    for (size_t s = 0; s < view->shard_count; s++) {
        const gs_ckpt_shard *sh = &view->shards[s];
        const gs_st_tensor *t = sh->name ? gs_st_header_find(&f.header, sh->name) : NULL;
        char a[160], b[160];
        if (!t) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: not in the file", path,
                              sh->name ? sh->name : "(null)");
            goto out;
        }
        if (!same_shape(t->ndim, t->shape, sh->ndim, sh->shape) || (t->dtype != GS_ST_F32 && t->dtype != GS_ST_BF16)) {
            fmt_shape(a, sizeof a, t->ndim, t->shape);
            fmt_shape(b, sizeof b, sh->ndim, sh->shape);
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: %s %s in the file, F32 %s expected", path,
                              sh->name, gs_st_dtype_name(t->dtype), a, b);
            goto out;
        }
        uint64_t numel = gs_st_tensor_numel(t);
        for (size_t p = 0; p < sh->piece_count; p++) {
            const gs_ckpt_piece *pc = &sh->pieces[p];
            if (pc->offset > numel || pc->count > numel - pc->offset || (pc->count && !pc->data)) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: elements [%llu, +%llu) requested, it has %llu", path,
                                  sh->name, (unsigned long long)pc->offset, (unsigned long long)pc->count,
                                  (unsigned long long)numel);
                goto out;
            }
            if (t->dtype == GS_ST_F32) {
                st = gs_safetensors_read(&f, t, pc->offset * 4, pc->data, pc->count * 4, err);
            } else {
                free(tmp);
                tmp = malloc(pc->count * 2 + 1);
                if (!tmp) {
                    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", path);
                    goto out;
                }
                st = gs_safetensors_read(&f, t, pc->offset * 2, tmp, pc->count * 2, err);
                for (uint64_t i = 0; st == GS_OK && i < pc->count; i++)
                    pc->data[i] = bf16_to_f32(tmp[i]);
            }
            if (st != GS_OK)
                goto out;
        }
    }
out:
    free(tmp);
    gs_safetensors_close(&f);
    return st;
}
