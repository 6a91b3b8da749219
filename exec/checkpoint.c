/* Sharded and full training checkpoints: rank files, index.json, crash-safe replacement, loading.
 * This file holds the shared helpers and the writer; rank records are exec/ckpt_record.c, the
 * index exec/ckpt_index.c, loading exec/ckpt_reader.c, the full file exec/ckpt_full.c. */
#include "exec/checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/atomic_file.h"
#include "exec/ckpt_internal.h"
#include "exec/ckpt_own.h"
#include "exec/crc32.h"
#include "exec/safetensors.h"

/* ---- small helpers -------------------------------------------------------------------------- */

char *gs__ckpt_str_printf(const char *fmt, ...)
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

void gs__ckpt_fmt_shape(char *buf, size_t cap, size_t ndim, const uint64_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, cap - used, "[");
    for (size_t d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

int gs__ckpt_shape_numel(size_t ndim, const uint64_t *shape, uint64_t *numel)
{
    uint64_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        if (gs_mul_u64(n, shape[d], &n) != 0)
            return -1;
    *numel = n;
    return 0;
}

int gs__ckpt_same_shape(size_t na, const uint64_t *a, size_t nb, const uint64_t *b)
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
uint32_t gs__ckpt_index_crc32(const json_t *root, int *ok)
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

char *gs__ckpt_rank_file_name(int rank, int world)
{
    return gs__ckpt_str_printf("rank%05d-of-%05d.safetensors", rank, world);
}

char *gs__ckpt_path_join(const char *dir, const char *name)
{
    return gs__ckpt_str_printf("%s/%s", dir, name);
}

char *gs__ckpt_dir_normalise(const char *dir)
{
    return gs_ckpt_dir_normalise(dir);
}

/* ---- the writer ----------------------------------------------------------------------------- */

static void call_hook(const gs_ckpt_writer *w, const char *phase, const char *path)
{
    if (w->hook)
        w->hook(phase, path, w->hook_arg);
}

/* A writer's common state for DIR: its normalised name, DIR.old, the metadata and the per-rank
 * slots; tmp_dir: the root's temporary directory to attach to (attached: never removed here), or
 * NULL for this process's own DIR.tmp-PID. On failure *out is NULL. */
gs_status gs__ckpt_writer_new(gs_ckpt_writer **out, const char *dir, const char *tmp_dir, const gs_ckpt_meta *meta,
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
    w->dir = gs__ckpt_dir_normalise(dir);
    w->tmp_dir = tmp_dir ? strdup(tmp_dir) : w->dir ? gs__ckpt_str_printf("%s.tmp-%ld", w->dir, (long)getpid()) : NULL;
    w->old_dir = w->dir ? gs__ckpt_str_printf("%s.old", w->dir) : NULL;
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
    gs_status st = gs__ckpt_writer_new(&w, dir, NULL, meta, world, err);
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

void gs__ckpt_saved_rank_fini(saved_rank *r)
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
        gs__ckpt_saved_rank_fini(&w->ranks[r]);
    free(w->ranks);
    free(w->dir);
    free(w->tmp_dir);
    free(w->old_dir);
    free(w->displaced);
    free(w->scenario_copy);
    free(w);
}

gs_status gs__ckpt_check_shard(const char *dir, int rank, const gs_ckpt_shard *s, gs_error *err)
{
    uint64_t numel;
    if (!s->name || !*s->name || strchr(s->name, '@'))
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: rank %d: tensor name '%s' empty or holds '@'", dir,
                            rank, s->name ? s->name : "(null)");
    if (s->ndim < 1 || s->ndim > GS_CKPT_MAX_DIMS || gs__ckpt_shape_numel(s->ndim, s->shape, &numel) != 0)
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
        st = gs__ckpt_check_shard(w->dir, rank, &view->shards[s], err);
        if (st != GS_OK)
            return st;
        npieces += view->shards[s].piece_count;
    }
    tensors = calloc(3 * npieces + 1, sizeof *tensors);
    tnames = calloc(3 * npieces + 1, sizeof *tnames);
    sr->pieces = calloc(npieces + 1, sizeof *sr->pieces);
    sr->names = calloc(npieces + 1, sizeof *sr->names);
    fname = gs__ckpt_rank_file_name(rank, w->world);
    fpath = fname ? gs__ckpt_path_join(w->tmp_dir, fname) : NULL;
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
                tnames[ntensors] =
                    gs__ckpt_str_printf("%s%s@%llu", prefix[k], sh->name, (unsigned long long)pc->offset);
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
        {"format", GS_CKPT_FORMAT},
        {"format_version", GS_CKPT_FORMAT_VERSION_TEXT},
        {"rank", rank_s},
        {"world", world_s},
        {"step", step_s},
        {"dp", dp_s},
        {"pp", pp_s},
        {"tp", tp_s},
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
        gs__ckpt_saved_rank_fini(sr);
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

/* One tensor's walk over its sorted pieces (build_index_json). */
typedef struct tensor_walk {
    const gs_ckpt_writer *w;
    const saved_piece *first; /* the tensor's first piece */
    const saved_piece *prev;  /* the last piece indexed, or NULL */
    uint64_t cursor;          /* elements tiled so far */
    int has_optim;            /* what every piece of the tensor must agree on */
} tensor_walk;

/* Checks piece p against the tensor's others (shape, optimizer state, tiling); *replica 1 when
 * it is a replica's identical copy of the piece before (the lowest rank's is indexed). */
static gs_status check_piece(const tensor_walk *t, const saved_piece *p, int *replica, gs_error *err)
{
    const saved_piece *first = t->first, *prev = t->prev;
    const char *dir = t->w->dir;
    char a[160], b[160];
    *replica = 0;
    if (!gs__ckpt_same_shape(p->ndim, p->shape, first->ndim, first->shape)) {
        gs__ckpt_fmt_shape(a, sizeof a, first->ndim, first->shape);
        gs__ckpt_fmt_shape(b, sizeof b, p->ndim, p->shape);
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: shape %s on rank %d, %s on rank %d", dir,
                            p->tensor, a, first->rank, b, p->rank);
    }
    if (p->has_optim != t->has_optim)
        return gs_error_set(err, GS_ERR_INPUT,
                            "checkpoint %s: tensor %s: the piece at element %llu on rank %d %s optimizer state; "
                            "all pieces must have it or none",
                            dir, p->tensor, (unsigned long long)p->offset, p->rank, p->has_optim ? "has" : "lacks");
    if (prev && p->offset == prev->offset && p->count == prev->count) {
        *replica = 1;
        return GS_OK;
    }
    if (p->offset < t->cursor)
        return gs_error_set(err, GS_ERR_INPUT,
                            "checkpoint %s: tensor %s: elements [%llu, %llu) on rank %d overlap [%llu, %llu) on "
                            "rank %d",
                            dir, p->tensor, (unsigned long long)p->offset, (unsigned long long)(p->offset + p->count),
                            p->rank, (unsigned long long)prev->offset,
                            (unsigned long long)(prev->offset + prev->count), prev->rank);
    if (p->offset > t->cursor)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: elements [%llu, %llu) are on no rank", dir,
                            p->tensor, (unsigned long long)t->cursor, (unsigned long long)p->offset);
    return GS_OK;
}

/* Appends piece p's entry (file, offset, count, its tensors' names) to pieces. */
static gs_status piece_json(const gs_ckpt_writer *w, const saved_piece *p, json_t *pieces, gs_error *err)
{
    gs_status st = GS_OK;
    char *pname = NULL;
    json_t *pj = json_object();
    if (!pj || json_array_append_new(pieces, pj) != 0)
        goto nomem;
    pname = gs__ckpt_str_printf("%s@%llu", p->tensor, (unsigned long long)p->offset);
    if (!pname || json_object_set_new(pj, "file", json_integer(p->rank)) != 0 ||
        json_object_set_new(pj, "offset", json_integer((json_int_t)p->offset)) != 0 ||
        json_object_set_new(pj, "count", json_integer((json_int_t)p->count)) != 0 ||
        json_object_set_new(pj, "name", json_string(pname)) != 0)
        goto nomem;
    if (p->has_optim) {
        for (int m = 0; m < 2; m++) {
            char *oname = gs__ckpt_str_printf("optim.%c.%s", m ? 'v' : 'm', pname);
            if (!oname || json_object_set_new(pj, m ? "adam_v" : "adam_m", json_string(oname)) != 0) {
                free(oname);
                goto nomem;
            }
            free(oname);
        }
    }
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory building the index", w->dir);
out:
    free(pname);
    return st;
}

/* The entry in tensors of the tensor whose sorted pieces start at all[*i], checking that they
 * tile it exactly; *i moves past them. */
static gs_status tensor_json(tensor_walk *t, const saved_piece *const *all, size_t total, size_t *i, json_t *tensors,
                             gs_error *err)
{
    const saved_piece *first = all[*i];
    uint64_t numel = 0;
    gs__ckpt_shape_numel(first->ndim, first->shape, &numel);
    t->first = first, t->prev = NULL, t->cursor = 0;
    t->has_optim = first->has_optim; /* a tensor's pieces agree (format version 3) */
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
    for (; *i < total && strcmp(all[*i]->tensor, first->tensor) == 0; ++*i) {
        const saved_piece *p = all[*i];
        int replica;
        gs_status st = check_piece(t, p, &replica, err);
        if (st == GS_OK && !replica)
            st = piece_json(t->w, p, pieces, err);
        if (st != GS_OK)
            return st;
        if (replica)
            continue;
        t->cursor = p->offset + p->count;
        t->prev = p;
    }
    if (t->cursor != numel)
        return gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: elements [%llu, %llu) are on no rank",
                            t->w->dir, first->tensor, (unsigned long long)t->cursor, (unsigned long long)numel);
    return GS_OK;
nomem:
    return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory building the index", t->w->dir);
}

/* The files array: every rank's file name, size and checksum. 0, or -1 out of memory. */
static int files_json(const gs_ckpt_writer *w, json_t *files)
{
    for (int r = 0; r < w->world; r++) {
        json_t *fj = json_object();
        char *fname = gs__ckpt_rank_file_name(r, w->world);
        int bad = !fj || json_array_append_new(files, fj) != 0 || !fname ||
                  json_object_set_new(fj, "name", json_string(fname)) != 0 ||
                  json_object_set_new(fj, "bytes", json_integer((json_int_t)w->ranks[r].file_bytes)) != 0 ||
                  json_object_set_new(fj, "crc32", json_integer((json_int_t)w->ranks[r].file_crc32)) != 0;
        free(fname);
        if (bad)
            return -1;
    }
    return 0;
}

/* Builds index.json from every rank's pieces, checking they tile each tensor exactly. */
static gs_status build_index_json(const gs_ckpt_writer *w, json_t **out, gs_error *err)
{
    gs_status st = GS_OK;
    size_t total = 0;
    const saved_piece **all = NULL;
    json_t *root = json_object(), *tensors = json_object(), *files = json_array(), *md = json_object();
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
    int has_optim = 0; /* "adam" when any tensor has moments */
    for (size_t i = 0; i < total; i++)
        has_optim |= all[i]->has_optim;
    tensor_walk t = {.w = w, .has_optim = has_optim};
    for (size_t i = 0; i < total;)
        if ((st = tensor_json(&t, all, total, &i, tensors, err)) != GS_OK)
            goto out;
    if (files_json(w, files) != 0)
        goto nomem;
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
    uint32_t crc = gs__ckpt_index_crc32(root, &crc_ok);
    if (!crc_ok || json_object_set_new(root, "index_crc32", json_integer((json_int_t)crc)) != 0)
        goto nomem;
    *out = json_incref(root);
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory building the index", w->dir);
out:
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
        if (!(w->displaced = gs__ckpt_str_printf("%s.replaced-%ld", w->dir, (long)getpid())))
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
    ipath = gs__ckpt_path_join(w->tmp_dir, "index.json");
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
