/* An exec session's full checkpoint: every tensor gathered whole and written by rank 0
 * (exec/exec.h). */
#include "exec/exec.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "exec/session_internal.h"

/* The full tensors being gathered, in first-seen order (rank 0's tensors first). */
typedef struct full_set {
    gs_ckpt_full_tensor *t;
    float **data; /* owned, one per tensor */
    char **names; /* owned, one per tensor (t[i].name points at names[i]) */
    size_t n, cap;
} full_set;

static void full_set_fini(full_set *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->data[i]);
        free(f->names[i]);
    }
    free(f->t);
    free(f->data);
    free(f->names);
}

/* The index in f of tensor `name` (ndim, shape: its full shape), added (zero-filled) when new;
 * (size_t)-1 and *rc set when out of memory. */
static size_t full_set_find(full_set *f, const char *name, size_t ndim, const uint64_t *shape, gs_error *err,
                            gs_status *rc)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return i;
    uint64_t numel = 1;
    for (size_t k = 0; k < ndim; k++)
        numel *= shape[k];
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        gs_ckpt_full_tensor *t = realloc(f->t, cap * sizeof *t);
        if (t)
            f->t = t;
        float **d = t ? realloc(f->data, cap * sizeof *d) : NULL;
        if (d)
            f->data = d;
        char **nm = d ? realloc(f->names, cap * sizeof *nm) : NULL;
        if (!t || !d || !nm) {
            *rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
            return (size_t)-1;
        }
        f->names = nm;
        f->cap = cap;
    }
    f->names[f->n] = strdup(name);
    f->data[f->n] = calloc(numel ? numel : 1, sizeof(float));
    if (!f->names[f->n] || !f->data[f->n]) {
        free(f->names[f->n]);
        free(f->data[f->n]);
        *rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for %s", name);
        return (size_t)-1;
    }
    gs_ckpt_full_tensor *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    t->name = f->names[f->n];
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof t->shape);
    t->data = f->data[f->n];
    return f->n++;
}

/* The place in f of a piece of tensor `name`, or NULL (*rc set) when out of memory or beyond the
 * tensor. */
static float *full_set_place(full_set *f, const char *name, size_t ndim, const uint64_t *shape, uint64_t offset,
                             uint64_t count, gs_error *err, gs_status *rc)
{
    size_t i = full_set_find(f, name, ndim, shape, err, rc);
    if (*rc != GS_OK)
        return NULL;
    /* a piece from another process names a tensor already here: the bounds below are its shape's,
     * so it must be the one the buffer was made for */
    const gs_ckpt_full_tensor *t = &f->t[i];
    int same = t->ndim == ndim;
    for (size_t d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char have[128] = "", got[128] = "";
        for (size_t d = 0, a = 0, b = 0; d < GS_CKPT_MAX_DIMS; d++) {
            if (d < t->ndim && a < sizeof have)
                a += (size_t)snprintf(have + a, sizeof have - a, "%s%" PRIu64, d ? " x " : "", t->shape[d]);
            if (d < ndim && b < sizeof got)
                b += (size_t)snprintf(got + b, sizeof got - b, "%s%" PRIu64, d ? " x " : "", shape[d]);
        }
        *rc = gs_error_set(err, GS_ERR_RUNTIME,
                           "exec: --save-full: %s: a piece of a [%s] tensor, [%s] here (do the processes run the same "
                           "scenario?)", name, got, have);
        return NULL;
    }
    uint64_t numel = 1;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    if (offset > numel || count > numel - offset) {
        *rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: %s: piece [%" PRIu64 ", +%" PRIu64 ") outside its %" PRIu64
                           " elements", name, offset, count, numel);
        return NULL;
    }
    return f->data[i] + offset;
}

/* Every primary piece of the views into f. */
static gs_status full_set_add_views(full_set *f, const ckpt_views *v, gs_error *err)
{
    gs_status rc = GS_OK;
    for (size_t r = 0; r < v->n && rc == GS_OK; r++)
        for (size_t k = 0; k < v->views[r].shard_count && rc == GS_OK; k++) {
            const gs_ckpt_shard *sh = &v->views[r].shards[k];
            full_set_find(f, sh->name, sh->ndim, sh->shape, err, &rc); /* a tensor even without pieces here */
            for (size_t p = 0; p < sh->piece_count && rc == GS_OK; p++) {
                const gs_ckpt_piece *pc = &sh->pieces[p];
                float *dst = full_set_place(f, sh->name, sh->ndim, sh->shape, pc->offset, pc->count, err, &rc);
                if (dst)
                    memcpy(dst, pc->data, pc->count * sizeof(float));
            }
        }
    return rc;
}

/* Piece data goes to the root in messages of at most this many bytes. */
#define FULL_CHUNK_BYTES ((size_t)64 << 20)

/* Across processes: each other process sends the root its rank's record (pieces, no file) and
 * then each piece's parameters, over the bootstrap's point-to-point transport; only the root
 * holds the full model. A process that failed sends an empty record; every process returns the
 * agreed outcome. */
static gs_status save_full_across(gs_exec_session *x, ckpt_views *v, full_set *f, const save_fault *fault,
                                  const char *path, gs_error *err)
{
    const gs_exec_boot *b = x->boot;
    int me = (int)x->local;
    gs_ckpt_rank_record rec;
    unsigned char *buf = NULL;
    size_t bytes = 0;
    gs_ckpt_meta meta;
    gs_status rc = GS_OK;
    int missing = 0; /* root: a process sent no pieces, so FILE is not written (the agreement fails with its error) */
    gs_ckpt_rank_record_init(&rec);
    gs__session_ckpt_meta(x, &meta);
    if (!b->send || !b->recv) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED, "exec: --save-full across processes needs the bootstrap's "
                          "point-to-point transport, which this one lacks");
        return gs__session_agree(x, rc, err);
    }
    if (b->proc != 0) {
        const gs_ckpt_rank_view *view = &v->views[me];
        if (fault->phase && strcmp(fault->phase, "full-pieces") == 0 && fault->rank == me) {
            if (fault->kind == GS_FAULT_DIE)
                raise(SIGKILL);
            rc = gs_error_set(err, GS_ERR_IO, "checkpoint %s: rank %d: injected failure at full-pieces (test hook)",
                              path, me);
        }
        if (rc == GS_OK)
            rc = gs_ckpt_rank_record_of_view(&rec, me, (int)v->n, meta.step, view, err);
        if (rc == GS_OK)
            rc = gs_ckpt_rank_record_encode(&rec, &buf, &bytes, err);
        uint64_t size = rc == GS_OK ? bytes : 0;
        gs_status src = b->send(b->ctx, 0, &size, sizeof size, err);
        if (src == GS_OK && size)
            src = b->send(b->ctx, 0, buf, bytes, err);
        for (size_t k = 0; src == GS_OK && size && k < view->shard_count; k++)
            for (size_t p = 0; src == GS_OK && p < view->shards[k].piece_count; p++) {
                const gs_ckpt_piece *pc = &view->shards[k].pieces[p];
                size_t left = pc->count * sizeof(float);
                for (const char *at = (const char *)pc->data; src == GS_OK && left;) {
                    size_t n = left < FULL_CHUNK_BYTES ? left : FULL_CHUNK_BYTES;
                    src = b->send(b->ctx, 0, at, n, err);
                    at += n;
                    left -= n;
                }
            }
        if (rc == GS_OK)
            rc = src;
        goto out;
    }
    rc = full_set_add_views(f, v, err);
    for (int p = 1; rc == GS_OK && p < b->procs; p++) {
        gs_boot_wait w = {.timeout_s = x->o.timeout_s};
        uint64_t size = 0;
        gs_boot_outcome o = b->recv(b->ctx, p, &size, sizeof size, &w, err);
        if (o == GS_BOOT_DONE && size == 0) {
            missing = 1; /* that process failed: it says why in the agreement */
            continue;
        }
        if (o == GS_BOOT_DONE && size > ((uint64_t)1 << 31))
            rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: --save-full: rank %d announced a record of %" PRIu64
                              " bytes", p, size);
        free(buf);
        buf = NULL;
        if (o == GS_BOOT_DONE && rc == GS_OK && !(buf = malloc((size_t)size)))
            rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        if (o == GS_BOOT_DONE && rc == GS_OK)
            o = b->recv(b->ctx, p, buf, (size_t)size, &w, err);
        if (o == GS_BOOT_DONE && rc == GS_OK &&
            (rc = gs_ckpt_rank_record_decode(buf, (size_t)size, &rec, err)) == GS_OK && rec.rank != p)
            rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: --save-full: process %d sent rank %d's pieces", p, rec.rank);
        for (size_t i = 0; o == GS_BOOT_DONE && rc == GS_OK && i < rec.piece_count; i++) {
            const gs_ckpt_piece_info *pi = &rec.pieces[i];
            char *dst = (char *)full_set_place(f, pi->tensor, pi->ndim, pi->shape, pi->offset, pi->count, err, &rc);
            for (size_t left = pi->count * sizeof(float); dst && o == GS_BOOT_DONE && left;) {
                size_t n = left < FULL_CHUNK_BYTES ? left : FULL_CHUNK_BYTES;
                o = b->recv(b->ctx, p, dst, n, &w, err);
                dst += n;
                left -= n;
            }
        }
        gs_ckpt_rank_record_fini(&rec);
        if (rc == GS_OK && o != GS_BOOT_DONE)
            rc = o == GS_BOOT_PEER_ABORT ? gs_error_set(err, GS_ERR_RUNTIME, "%s", w.peer_msg)
                 : o == GS_BOOT_TIMEOUT  ? gs_error_set(err, GS_ERR_RUNTIME, "exec: --save-full: rank %d's pieces: "
                                                        "timed out after %g s", p, x->o.timeout_s)
                 : o == GS_BOOT_FAILED   ? (gs_error_prefix(err, "exec: --save-full: rank %d's pieces", p),
                                            GS_ERR_RUNTIME)
                                         : gs_error_set(err, GS_ERR_RUNTIME, "exec: --save-full: stopped");
    }
    if (rc == GS_OK && !missing)
        rc = gs_ckpt_save_full(path, &meta, f->t, f->n, fault->phase ? gs__session_save_fault_hook : NULL,
                               (void *)fault, err);
out:
    gs_ckpt_rank_record_fini(&rec);
    free(buf);
    return gs__session_agree(x, rc, err);
}

gs_status gs_exec_session_save_full(gs_exec_session *x, const char *path, gs_error *err)
{
    ckpt_views v;
    full_set f = {0};
    gs_ckpt_meta meta;
    save_fault fault;
    memset(&v, 0, sizeof v);
    gs__session_ckpt_meta(x, &meta);
    gs_status rc = gs__session_save_fault_init(x, &fault, err);
    if (rc == GS_OK)
        rc = gs__session_views_init(x, GS__VIEWS_PRIMARY | GS__VIEWS_NO_STATE, &v, err);
    if (x->boot) {
        rc = gs__session_agree(x, rc, err); /* every process enters the exchange, or none */
        if (rc == GS_OK)
            rc = save_full_across(x, &v, &f, &fault, path, err);
    } else {
        if (rc == GS_OK)
            rc = full_set_add_views(&f, &v, err);
        if (rc == GS_OK)
            rc =
                gs_ckpt_save_full(path, &meta, f.t, f.n, fault.phase ? gs__session_save_fault_hook : NULL, &fault, err);
    }
    full_set_fini(&f);
    gs__session_views_fini(&v);
    return rc;
}
