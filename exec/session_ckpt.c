/* An exec session's sharded checkpoints: views of the ranks' shards, save (in one process or
 * across processes), load, the save fault hook (exec/exec.h). */
#include "exec/exec.h"

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "exec/session_internal.h"

/* ---- checkpoints ----------------------------------------------------------------------------- */
void gs__session_views_fini(ckpt_views *v)
{
    for (size_t i = 0; i < v->n; i++) {
        if (v->lists)
            gs_shard_list_fini(&v->lists[i]);
        if (v->shards)
            free(v->shards[i]);
        if (v->pieces)
            free(v->pieces[i]);
    }
    free(v->lists);
    free(v->views);
    free(v->shards);
    free(v->pieces);
}

gs_status gs__session_views_init(gs_exec_session *x, int mode, ckpt_views *v, gs_error *err)
{
    int primary = mode & GS__VIEWS_PRIMARY;
    gs_status rc = GS_OK;
    memset(v, 0, sizeof *v);
    v->n = x->sch->nranks;
    v->lists = calloc(v->n, sizeof *v->lists);
    v->views = calloc(v->n, sizeof *v->views);
    v->shards = calloc(v->n, sizeof *v->shards);
    v->pieces = calloc(v->n, sizeof *v->pieces);
    if (!v->lists || !v->views || !v->shards || !v->pieces)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (size_t i = 0; i < v->n && rc == GS_OK; i++) {
        gs_shard_list *l = &v->lists[i];
        /* primary: what a save writes; else what a load fills (ZeRO-1/2: the whole parameters) */
        if ((rc = (primary ? gs_train_shards : gs_train_shards_for_load)(x->train, i, l, err)) != GS_OK)
            break;
        size_t np = 0;
        for (size_t k = 0; k < l->ntensors; k++)
            np += l->tensors[k].npieces;
        v->shards[i] = calloc(l->ntensors + 1, sizeof *v->shards[i]);
        v->pieces[i] = calloc(np + 1, sizeof *v->pieces[i]);
        if (!v->shards[i] || !v->pieces[i])
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        size_t ns = 0, at = 0;
        for (size_t k = 0; k < l->ntensors; k++) {
            const gs_shard_tensor *t = &l->tensors[k];
            if ((primary && !t->primary) || ((mode & GS__VIEWS_NO_STATE) && t->state))
                continue;
            gs_ckpt_shard *sh = &v->shards[i][ns++];
            sh->name = t->name;
            sh->ndim = (size_t)t->ndim;
            sh->shape[0] = t->shape[0];
            sh->shape[1] = t->shape[1];
            sh->pieces = &v->pieces[i][at];
            sh->piece_count = t->npieces;
            for (size_t p = 0; p < t->npieces; p++)
                v->pieces[i][at++] = (gs_ckpt_piece){t->pieces[p].offset, t->pieces[p].count, t->pieces[p].param,
                                                     t->pieces[p].m, t->pieces[p].v};
        }
        v->views[i] = (gs_ckpt_rank_view){v->shards[i], ns};
    }
    return rc;
}

void gs__session_ckpt_meta(const gs_exec_session *x, gs_ckpt_meta *m)
{
    m->dp = (int)x->sch->mesh.size[GS_DIM_DP];
    m->pp = (int)x->sch->mesh.size[GS_DIM_PP];
    m->tp = (int)x->sch->mesh.size[GS_DIM_TP];
    m->step = gs_train_step(x->train);
    m->scenario = x->s.name;
}
gs_status gs__session_save_fault_init(const gs_exec_session *x, save_fault *f, gs_error *err)
{
    static const char *const phases[] = {"tmp-dir",      "file-written", "files-synced",
                                         "index-written", "old-moved",   "new-in-place",
                                         "old-removed",  "full-written", "full-renamed",
                                         "full-pieces"};
    memset(f, 0, sizeof *f);
    const char *e = x->o.fail_event;
    if (!e || strncmp(e, "save:", 5) != 0)
        return GS_OK;
    const char *phase = e + 5;
    int known = 0;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        known |= strcmp(phase, phases[i]) == 0;
    int pieces = strcmp(phase, "full-pieces") == 0;
    int own = strcmp(phase, "file-written") == 0 || pieces; /* RANK's step; every other phase is rank 0's */
    int early = strcmp(phase, "tmp-dir") == 0 || own;
    if (!known || x->o.fail_kind == GS_FAULT_STALL || (x->o.fail_kind == GS_FAULT_FAIL && !early) ||
        x->o.fail_rank >= x->sch->nranks || (pieces && (x->o.fail_rank == 0 || !x->boot)) ||
        (!own && x->o.fail_rank != 0))
        return gs_error_set(err, GS_ERR_INPUT,
                            "GRIDSTEP_FAULT: save:%s on rank %" PRIu64 ": expected "
                            "fail:RANK:save:tmp-dir|file-written|full-pieces or die:RANK:save:PHASE (a checkpoint hook "
                            "phase), RANK under %zu (full-pieces: not 0, across processes; all but file-written and "
                            "full-pieces: 0)",
                            phase, x->o.fail_rank, x->sch->nranks);
    f->phase = phase;
    f->kind = x->o.fail_kind;
    f->rank = (int)x->o.fail_rank;
    f->is_root = !x->boot || x->boot->proc == 0;
    snprintf(f->rank_file, sizeof f->rank_file, "rank%05d-of-%05d.safetensors", f->rank, (int)x->sch->nranks);
    return GS_OK;
}

/* The test hook's event must be one of its rank's (a typo would inject nothing and let a test
 * pass without testing anything); save phases are checked as a save would. */
gs_status gs__session_check_fault_hook(const gs_exec_session *x, gs_error *err)
{
    const char *e = x->o.fail_event;
    char name[GS_EVENT_NAME_BYTES];
    if (!e)
        return GS_OK;
    if (strncmp(e, "save:", 5) == 0) {
        save_fault *f = calloc(1, sizeof *f);
        if (!f)
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        gs_status rc = gs__session_save_fault_init(x, f, err);
        free(f);
        return rc;
    }
    for (size_t i = 0; i < x->sch->nranks; i++) {
        const gs_rank_events *re = &x->sch->ranks[i];
        if (re->rank != x->o.fail_rank)
            continue;
        for (size_t k = 0; k < re->nevents; k++) {
            gs_event_name(re, &re->events[k], name, sizeof name);
            if (strcmp(name, e) == 0)
                return GS_OK;
        }
        return gs_error_set(err, GS_ERR_INPUT,
                            "fault hook: rank %" PRIu64 " has no event named '%s' (`gridstep schedule "
                            "--exact --format list --dump - --rank %" PRIu64 "` lists its events)",
                            x->o.fail_rank, e, x->o.fail_rank);
    }
    return gs_error_set(err, GS_ERR_INPUT, "fault hook: rank %" PRIu64 " is not in the schedule (ranks 0 to %zu)",
                        x->o.fail_rank, x->sch->nranks ? x->sch->nranks - 1 : 0);
}

void gs__session_save_fault_hook(const char *phase, const char *path, void *arg)
{
    save_fault *f = arg;
    if (!f->phase || f->fired || strcmp(phase, f->phase) != 0)
        return;
    if (strcmp(phase, "file-written") == 0) {
        size_t a = strlen(path), b = strlen(f->rank_file);
        if (a < b || strcmp(path + a - b, f->rank_file) != 0)
            return;
    } else if (f->rank != 0 || !f->is_root) {
        return;
    }
    f->fired = 1;
    if (f->kind == GS_FAULT_DIE)
        raise(SIGKILL); /* a crash mid-save: what it leaves must be recoverable */
}

/* GS_OK unless the fault fired (a "fail" one). */
static gs_status save_fault_check(const save_fault *f, const char *dir, gs_error *err)
{
    if (!f->fired)
        return GS_OK;
    return gs_error_set(err, GS_ERR_IO, "checkpoint %s: rank %d: injected failure at %s (test hook)", dir, f->rank,
                        f->phase);
}

/* One process, every rank: the writer from one thread (gs_ckpt_save_sharded's steps, with the
 * fault hook). */
static gs_status save_here(gs_exec_session *x, const char *dir, gs_error *err)
{
    ckpt_views v;
    gs_ckpt_meta meta;
    save_fault f;
    gs_ckpt_writer *w = NULL;
    memset(&v, 0, sizeof v);
    gs__session_ckpt_meta(x, &meta);
    gs_status rc = gs__session_save_fault_init(x, &f, err);
    if (rc == GS_OK)
        rc = gs__session_views_init(x, GS__VIEWS_PRIMARY, &v, err);
    if (rc == GS_OK)
        rc = gs_ckpt_writer_create_forced(&w, dir, &meta, (int)v.n, x->o.ckpt_force, err);
    if (rc == GS_OK && f.phase) {
        gs_ckpt_writer_set_hook(w, gs__session_save_fault_hook, &f);
        rc = save_fault_check(&f, dir, err);
    }
    for (size_t r = 0; rc == GS_OK && r < v.n; r++)
        if ((rc = gs_ckpt_writer_write_rank(w, (int)r, &v.views[r], err)) == GS_OK)
            rc = save_fault_check(&f, dir, err);
    if (rc == GS_OK)
        rc = gs_ckpt_writer_commit(w, err);
    gs_ckpt_writer_destroy(w);
    gs__session_views_fini(&v);
    return rc;
}

/* What the root tells the other processes when a save starts. */
typedef struct save_start {
    int32_t status;
    char msg[GS_ERROR_MSG_BYTES];
    char tmp_dir[PATH_MAX];
} save_start;

/* Across processes: the root (process 0) creates DIR.tmp-PID and broadcasts its name; each
 * process writes its rank's file into it; the ranks' records are gathered and the root imports
 * them and commits (the tiling checks, index.json, the swap); every process returns the same
 * outcome (gs__session_agree: the lowest failed process's error). */
static gs_status save_across(gs_exec_session *x, const char *dir, gs_error *err)
{
    const gs_exec_boot *b = x->boot;
    int root = b->proc == 0, world = (int)x->sch->nranks, me = (int)x->local;
    size_t procs = (size_t)b->procs;
    ckpt_views v;
    gs_ckpt_meta meta;
    save_fault f;
    gs_ckpt_writer *w = NULL;
    gs_ckpt_rank_record rec, got;
    unsigned char *mine = NULL, *all = NULL;
    size_t mine_bytes = 0, *counts = NULL;
    uint64_t my_size, *sizes = NULL;
    save_start start_buf, *start = &start_buf;
    memset(start, 0, sizeof *start);
    memset(&v, 0, sizeof v);
    gs_ckpt_rank_record_init(&rec);
    gs_ckpt_rank_record_init(&got);
    gs__session_ckpt_meta(x, &meta);
    gs_status rc = gs__session_save_fault_init(x, &f, err);
    if (rc == GS_OK)
        rc = gs__session_views_init(x, GS__VIEWS_PRIMARY, &v, err);
    /* 1. the root recovers DIR and creates the temporary directory */
    if (root) {
        if (rc == GS_OK)
            rc = gs_ckpt_writer_create_forced(&w, dir, &meta, world, x->o.ckpt_force, err);
        if (rc == GS_OK && f.phase) {
            gs_ckpt_writer_set_hook(w, gs__session_save_fault_hook, &f);
            rc = save_fault_check(&f, dir, err);
        }
        if (rc == GS_OK && strlen(gs_ckpt_writer_tmp_dir(w)) >= sizeof start->tmp_dir)
            rc = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: path too long", dir);
        start->status = rc;
        if (rc != GS_OK)
            snprintf(start->msg, sizeof start->msg, "%s", err->msg[0] ? err->msg : gs_status_name(rc));
        else
            snprintf(start->tmp_dir, sizeof start->tmp_dir, "%s", gs_ckpt_writer_tmp_dir(w));
    }
    gs_status brc = b->bcast(b->ctx, start, sizeof *start, 0, err);
    if (brc != GS_OK) {
        rc = brc;
        goto out;
    }
    if (start->status != GS_OK) { /* nothing was written: every process returns the root's error */
        rc = (gs_status)start->status;
        if (!root)
            gs_error_set(err, rc, "%s", start->msg);
        goto out;
    }
    /* 2. every process writes its rank's file */
    if (rc == GS_OK && !root)
        rc = gs_ckpt_writer_attach(&w, dir, start->tmp_dir, &meta, world, err);
    if (rc == GS_OK && !root && f.phase)
        gs_ckpt_writer_set_hook(w, gs__session_save_fault_hook, &f);
    if (rc == GS_OK && (rc = gs_ckpt_writer_write_rank(w, me, &v.views[me], err)) == GS_OK)
        rc = save_fault_check(&f, dir, err);
    if (rc == GS_OK && (rc = gs_ckpt_writer_export_rank(w, me, &rec, err)) == GS_OK)
        rc = gs_ckpt_rank_record_encode(&rec, &mine, &mine_bytes, err);
    /* every file is closed (or some process failed) before the root reads or removes the directory */
    if ((rc = gs__session_agree(x, rc, err)) != GS_OK)
        goto out;
    /* 3. the records to the root (allgatherv: a few hundred bytes per piece) */
    sizes = calloc(procs, sizeof *sizes);
    counts = calloc(procs, sizeof *counts);
    my_size = mine_bytes;
    if (!sizes || !counts)
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    if ((rc = gs__session_agree(x, rc, err)) != GS_OK ||
        (rc = b->allgather(b->ctx, &my_size, sizeof my_size, sizes, err)) != GS_OK)
        goto out;
    size_t total = 0;
    for (size_t p = 0; p < procs; p++) {
        counts[p] = (size_t)sizes[p];
        total += counts[p];
    }
    if (!(all = malloc(total ? total : 1)))
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for %zu bytes of checkpoint records", total);
    if ((rc = gs__session_agree(x, rc, err)) != GS_OK ||
        (rc = b->allgatherv(b->ctx, mine, mine_bytes, all, counts, err)) != GS_OK)
        goto out;
    /* 4. the root checks and commits */
    if (root) {
        size_t at = counts[0];
        for (size_t p = 1; rc == GS_OK && p < procs; p++) {
            if ((rc = gs_ckpt_rank_record_decode(all + at, counts[p], &got, err)) == GS_OK) {
                if (got.rank != (int)p)
                    rc = gs_error_set(err, GS_ERR_RUNTIME, "checkpoint %s: process %zu sent rank %d's record", dir, p,
                                      got.rank);
                else
                    rc = gs_ckpt_writer_import_rank(w, &got, err);
            }
            gs_ckpt_rank_record_fini(&got);
            at += counts[p];
        }
        if (rc == GS_OK)
            rc = gs_ckpt_writer_commit(w, err);
    }
    rc = gs__session_agree(x, rc, err);
out:
    gs_ckpt_writer_destroy(w); /* the root's removes an uncommitted temporary directory */
    gs_ckpt_rank_record_fini(&rec);
    free(mine);
    free(all);
    free(sizes);
    free(counts);
    gs__session_views_fini(&v);
    return rc;
}

gs_status gs_exec_session_save(gs_exec_session *x, const char *dir, gs_error *err)
{
    return x->boot ? save_across(x, dir, err) : save_here(x, dir, err);
}

gs_status gs_exec_session_load(gs_exec_session *x, const char *dir, gs_error *err)
{
    ckpt_views v;
    gs_ckpt_meta meta;
    gs__session_ckpt_meta(x, &meta);
    gs_ckpt_reader *r = NULL;
    unsigned char *found = NULL, *found_all = NULL;
    gs_status rc = gs__session_views_init(x, 0, &v, err);
    if (rc == GS_OK)
        rc = gs_ckpt_reader_create(&r, dir, err);
    /* every tensor of the checkpoint must be one of the model's: another model's checkpoint
     * whose first layers happen to match is refused rather than half loaded */
    const gs_ckpt_index *ix = r ? gs_ckpt_reader_index(r) : NULL;
    if (rc == GS_OK && (int64_t)ix->dp * ix->pp * ix->tp != ix->world)
        rc = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: index.json: grid dp %d x pp %d x tp %d is not world %d",
                          dir, ix->dp, ix->pp, ix->tp, ix->world);
    /* multi-process: every process read the same index (or every one says why not) */
    if (x->boot)
        rc = gs__session_agree(x, rc, err);
    if (rc != GS_OK)
        goto out;
    size_t nt = ix->tensor_count;
    if (!(found = calloc(nt ? nt : 1, 1))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t t = 0; t < nt; t++)
        for (size_t i = 0; i < v.n && !found[t]; i++)
            for (size_t k = 0; k < v.views[i].shard_count && !found[t]; k++)
                found[t] = strcmp(v.views[i].shards[k].name, ix->tensors[t].name) == 0;
    if (x->boot) {
        /* a process holds only its rank's tensors: a tensor is the model's when any rank has it */
        size_t procs = (size_t)x->boot->procs;
        if (!(found_all = calloc(procs * (nt ? nt : 1), 1))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
            goto out;
        }
        if ((rc = x->boot->allgather(x->boot->ctx, found, nt ? nt : 1, found_all, err)) != GS_OK)
            goto out;
        for (size_t p = 0; p < procs; p++)
            for (size_t t = 0; t < nt; t++)
                found[t] |= found_all[p * (nt ? nt : 1) + t];
    }
    for (size_t t = 0; rc == GS_OK && t < nt; t++) /* training state the run does not keep is dropped */
        if (!found[t] && !gs_train_state_tensor(ix->tensors[t].name))
            rc = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s is not in the model of %s (another model's "
                              "checkpoint?)", dir, ix->tensors[t].name, x->s.name);
    /* training state the checkpoint lacks (FP8 scales of a run saved without them) keeps the
     * session's values (a new session's: scales 1, empty histories): those tensors leave the
     * views */
    for (size_t i = 0; rc == GS_OK && i < v.n; i++) {
        size_t keep = 0;
        for (size_t k = 0; k < v.views[i].shard_count; k++)
            if (!gs_train_state_tensor(v.shards[i][k].name) || gs_ckpt_index_find(ix, v.shards[i][k].name))
                v.shards[i][keep++] = v.shards[i][k];
        v.views[i].shard_count = keep;
    }
    for (size_t i = 0; rc == GS_OK && i < v.n; i++)
        if ((rc = gs_ckpt_reader_load_rank(r, &v.views[i], &meta, err)) == GS_OK)
            rc = gs_train_shards_upload(x->train, i, &v.lists[i], err); /* device memory: the host copies back */
    /* multi-process: a rank file only one process read may have failed it */
    if (x->boot)
        rc = gs__session_agree(x, rc, err);
    if (rc == GS_OK)
        gs_train_set_step(x->train, ix->step);
out:
    free(found);
    free(found_all);
    gs_ckpt_reader_destroy(r);
    gs__session_views_fini(&v);
    return rc;
}
