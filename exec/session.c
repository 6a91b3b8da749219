/* An exec session (schedule + driver + dispatcher + training program) and the exec backend's
 * gs_backend_ops, which plays one step of a schedule through a session's pieces. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/units.h"
#include "exec/checkpoint.h"
#include "exec/exec.h"

struct gs_exec_session {
    gs_scenario s;
    gs_exec_opts o;
    const gs_driver_ops *ops;
    gs_schedule *sch;
    gs_drv *drv;
    gs_dispatch *disp;
    gs_train *train;
    gs_timing **timing;
    int stepped;
    const gs_exec_boot *boot; /* active: a multi-process run, this process plays rank list `local` */
    size_t local;
};

void gs_exec_opts_defaults(gs_exec_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_s = 60.0;
    gs_train_opts_defaults(&o->train);
}

uint64_t gs_exec_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}

/* The ledger's peak of every rank (fp32: 2-byte working precisions scaled up) into peaks
 * (mesh->world entries); with `host`, refuses a scenario whose ranks together need more than
 * MemAvailable (all ranks live in this process). */
static gs_status check_memory(const gs_scenario *s, const gs_mesh *mesh, int host, const gs_exec_boot *boot,
                               uint64_t *peaks, gs_error *err)
{
    gs_ledger *l = NULL;
    gs_status rc = gs_ledger_create(s, mesh, &l, err);
    if (rc != GS_OK)
        return rc;
    uint64_t need = 0, peak = 0;
    for (uint64_t r = 0; r < mesh->world; r++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(mesh, r, c);
        uint64_t p = l->ranks[c[GS_DIM_PP] < l->nranks ? c[GS_DIM_PP] : 0].peak_bytes;
        /* the exec program computes in fp32: scale 2-byte working precisions up */
        if (s->strategy.precision != GS_PREC_FP32)
            p = p > UINT64_MAX / 2 ? UINT64_MAX : 2 * p;
        peaks[r] = p;
        if (p > peak)
            peak = p;
        /* multi-process: this host holds its processes' ranks (counted as this one's peak each) */
        if (gs_boot_active(boot))
            p = r == (uint64_t)boot->proc ? (p > UINT64_MAX / (uint64_t)boot->local_procs
                                                 ? UINT64_MAX : p * (uint64_t)boot->local_procs)
                                          : 0;
        need = need > UINT64_MAX - p ? UINT64_MAX : need + p;
    }
    gs_ledger_destroy(l);
    uint64_t avail = host ? gs_exec_mem_available() : 0;
    if (avail && need > avail) {
        char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES];
        return gs_error_set(err, GS_ERR_INPUT,
                            "exec: %s needs %s on this host (the memory ledger's peak, up to %s per rank in fp32, x "
                            "%" PRIu64 " ranks) but MemAvailable is %s; refused before allocating",
                            s->name, gs_fmt_bytes(need, b1, sizeof b1), gs_fmt_bytes(peak, b2, sizeof b2),
                            gs_boot_active(boot) ? (uint64_t)boot->local_procs : mesh->world,
                            gs_fmt_bytes(avail, b3, sizeof b3));
    }
    return GS_OK;
}

/* Multi-process: every process's outcome; the lowest failed process's error for all. */
typedef struct proc_record {
    int32_t status;
    double loss_sum; /* token losses of this process's head ranks */
    double step_s;
    int32_t bystander; /* failed only because another process announced its failure */
    char msg[GS_ERROR_MSG_BYTES];
} proc_record;

/* Fills r's status and message from a local outcome. */
static void record_outcome(const gs_exec_session *x, proc_record *r, gs_status st, const gs_error *err)
{
    r->status = st;
    if (st == GS_OK)
        return;
    snprintf(r->msg, sizeof r->msg, "%s", err->msg[0] ? err->msg : gs_status_name(st));
    char peer[GS_ERROR_MSG_BYTES];
    if (x->boot->peer_aborted && x->boot->peer_aborted(x->boot->ctx, peer, sizeof peer))
        r->bystander = strcmp(peer, r->msg) == 0;
}

static gs_status exchange(gs_exec_session *x, const proc_record *mine, proc_record *all, gs_error *err)
{
    gs_error e2;
    gs_error_init(&e2);
    gs_status rc = x->boot->allgather(x->boot->ctx, mine, sizeof *mine, all, &e2);
    if (rc != GS_OK) {
        *err = e2;
        return rc;
    }
    /* the lowest process that failed on its own (not as a bystander of another's failure) */
    int first = -1;
    for (int pass = 0; pass < 2 && first < 0; pass++)
        for (int p = 0; p < x->boot->procs && first < 0; p++)
            if (all[p].status != GS_OK && (pass || !all[p].bystander))
                first = p;
    if (first < 0)
        return GS_OK;
    if (first != x->boot->proc || mine->msg[0] == '\0')
        gs_error_set(err, (gs_status)all[first].status, "%s", all[first].msg);
    return (gs_status)all[first].status;
}

static gs_status agree(gs_exec_session *x, gs_status local, gs_error *err)
{
    proc_record mine, *all = calloc((size_t)x->boot->procs, sizeof *all);
    memset(&mine, 0, sizeof mine);
    record_outcome(x, &mine, local, err);
    if (!all)
        return local != GS_OK ? local : gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    gs_status rc = exchange(x, &mine, all, err);
    free(all);
    return rc;
}

void gs_exec_session_destroy(gs_exec_session *x)
{
    if (!x)
        return;
    gs_train_destroy(x->train);
    gs_dispatch_destroy(x->disp);
    if (x->drv)
        x->ops->close(x->drv);
    if (x->timing && x->sch)
        for (size_t i = 0; i < x->sch->nranks; i++)
            free(x->timing[i]);
    free(x->timing);
    gs_schedule_destroy(x->sch);
    free(x);
}

gs_status gs_exec_session_create(const gs_scenario *s, const gs_mesh *mesh, const gs_exec_opts *o,
                                 gs_exec_session **out, gs_error *err)
{
    *out = NULL;
    gs_status rc;
    uint64_t *peaks = NULL;
    int synced = 0; /* multi-process: this process took part in the first agreement */
    gs_exec_session *x = calloc(1, sizeof *x);
    if (!x)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    x->s = *s;
    if (o)
        x->o = *o;
    else
        gs_exec_opts_defaults(&x->o);
    x->ops = x->o.driver ? x->o.driver : &gs_driver_host;
    x->boot = gs_boot_active(x->o.boot) ? x->o.boot : NULL;
    x->local = GS_DISPATCH_ALL;
    if (x->boot && (uint64_t)x->boot->procs != mesh->world) {
        /* every process sees the same counts: each refuses alike, nothing collective has run */
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "exec: %s has %" PRIu64 " ranks (dp=%" PRIu64 " pp=%" PRIu64 " tp=%" PRIu64 "), but the "
                          "launcher started %d processes; exec runs one rank per process: start %" PRIu64
                          " (mpirun -np %" PRIu64 ")",
                          s->name, mesh->world, mesh->size[GS_DIM_DP], mesh->size[GS_DIM_PP], mesh->size[GS_DIM_TP],
                          x->boot->procs, mesh->world, mesh->world);
        x->boot = NULL;
        goto out;
    }
    peaks = calloc(mesh->world ? mesh->world : 1, sizeof *peaks);
    if (!peaks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    if (!x->o.skip_memory_check &&
        (rc = check_memory(s, mesh, !x->ops->device_memory, x->boot, peaks, err)) != GS_OK)
        goto out;
    /* the dispatcher and the program rely on a valid schedule: matched collectives and p2p,
     * tensors alive when used */
    if ((rc = gs_schedule_build(&x->s, mesh, 1, &x->sch, err)) != GS_OK ||
        (rc = gs_schedule_validate_structure(x->sch, err)) != GS_OK)
        goto out;
    /* process p plays rank p, which is the exact schedule's list p (gather_timing relies on it) */
    if (x->boot)
        for (size_t i = 0; i < x->sch->nranks; i++) {
            if (x->sch->ranks[i].rank != i) {
                rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: the schedule's rank list %zu is rank %" PRIu64
                                  ", expected one list per rank in rank order", i, x->sch->ranks[i].rank);
                goto out;
            }
            if (i == (size_t)x->boot->proc)
                x->local = i;
        }
    if (!(x->timing = calloc(x->sch->nranks ? x->sch->nranks : 1, sizeof *x->timing))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t i = 0; i < x->sch->nranks; i++)
        if (!(x->timing[i] = calloc(x->sch->ranks[i].nevents + 1, sizeof *x->timing[i]))) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
            goto out;
        }
    if (x->boot && x->local == GS_DISPATCH_ALL) {
        rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %d is not in the schedule", x->boot->proc);
        goto out;
    }
    /* the driver's open is collective across processes: enter it together or not at all */
    synced = 1;
    if (x->boot && (rc = agree(x, rc, err)) != GS_OK)
        goto out;
    gs_driver_opts dopts = {.timeout_s = x->o.timeout_s,
                           .group_of = gs_group_of,
                           .rank_peak_bytes = x->o.skip_memory_check ? NULL : peaks,
                           .boot = x->boot};
    if ((rc = x->ops->open(mesh, &dopts, &x->drv, err)) == GS_OK &&
        (rc = gs_dispatch_create_local(x->ops, x->drv, x->sch, x->local, &x->disp, err)) == GS_OK)
        rc = gs_train_create(&x->s, x->sch, x->ops, x->drv, x->disp, &x->o.train, &x->train, err);
    if (x->boot)
        rc = agree(x, rc, err);
out:
    /* a failure before the first agreement: tell the processes waiting in it */
    if (x->boot && !synced)
        rc = agree(x, rc, err);
    free(peaks);
    if (rc != GS_OK) {
        gs_exec_session_destroy(x);
        return rc;
    }
    *out = x;
    return GS_OK;
}

/* Multi-process: every rank list's timings from the process that played it (into x->timing). */
static gs_status gather_timing(gs_exec_session *x, gs_error *err)
{
    size_t n = x->sch->nranks, total = 0;
    size_t *counts = calloc(n ? n : 1, sizeof *counts);
    gs_timing *all = NULL;
    gs_status rc = GS_OK;
    if (!counts || n != (size_t)x->boot->procs) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    /* process p plays rank p, the schedule's list p */
    for (size_t i = 0; i < n; i++) {
        counts[i] = x->sch->ranks[i].nevents * sizeof(gs_timing);
        total += counts[i];
    }
    if (!(all = malloc(total ? total : 1))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for the ranks' timings");
        goto out;
    }
    if ((rc = x->boot->allgatherv(x->boot->ctx, x->timing[x->local], counts[x->local], all, counts, err)) != GS_OK)
        goto out;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(x->timing[i], all + at, counts[i]);
        at += x->sch->ranks[i].nevents;
    }
out:
    free(counts);
    free(all);
    return rc;
}

static gs_status step_across(gs_exec_session *x, double *loss, double *step_s, gs_error *rank_err, gs_error *err)
{
    gs_dispatch_opts dopts = {x->o.fail_event, x->o.fail_rank, x->o.fail_kind};
    proc_record mine, *all = calloc((size_t)x->boot->procs, sizeof *all);
    if (!all)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    memset(&mine, 0, sizeof mine);
    gs_train_begin_step(x->train);
    /* clock alignment: every process leaves the barrier, then takes its own clock zero */
    gs_status rc = x->boot->barrier(x->boot->ctx, err);
    if (rc != GS_OK)
        goto out;
    double t0 = x->ops->clock_s(x->drv);
    gs_status st = gs_dispatch_step(x->disp, gs_train_run_event, x->train, &dopts, x->timing, rank_err, err);
    mine.step_s = x->ops->clock_s(x->drv) - t0;
    mine.loss_sum = gs_train_loss_sum(x->train);
    record_outcome(x, &mine, st, err);
    if ((rc = exchange(x, &mine, all, err)) != GS_OK)
        goto out;
    if ((rc = gather_timing(x, err)) != GS_OK)
        goto out;
    double sum = 0, slowest = 0;
    for (int p = 0; p < x->boot->procs; p++) {
        sum += all[p].loss_sum; /* rank order, as gs_train_loss sums in one process */
        if (all[p].step_s > slowest)
            slowest = all[p].step_s;
    }
    x->stepped = 1;
    if (step_s)
        *step_s = slowest;
    if (loss)
        *loss = sum / gs_train_loss_tokens(x->train);
out:
    free(all);
    return rc;
}

gs_status gs_exec_session_step(gs_exec_session *x, double *loss, double *step_s, gs_error *rank_err, gs_error *err)
{
    if (x->boot)
        return step_across(x, loss, step_s, rank_err, err);
    gs_train_begin_step(x->train);
    gs_dispatch_opts dopts = {x->o.fail_event, x->o.fail_rank, x->o.fail_kind};
    double t0 = x->ops->clock_s(x->drv);
    gs_status rc = gs_dispatch_step(x->disp, gs_train_run_event, x->train, &dopts, x->timing, rank_err, err);
    if (rc != GS_OK)
        return rc;
    x->stepped = 1;
    if (step_s)
        *step_s = x->ops->clock_s(x->drv) - t0;
    if (loss)
        *loss = gs_train_loss(x->train);
    return GS_OK;
}

gs_status gs_exec_session_report(gs_exec_session *x, gs_report *rep, gs_error *err)
{
    if (!x->stepped)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: no step has run");
    return gs_report_build(&x->s, x->sch, x->timing, rep, err);
}

gs_status gs_exec_session_trace(gs_exec_session *x, FILE *f, gs_error *err)
{
    if (!x->stepped)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: no step has run");
    return gs_report_trace(x->sch, x->timing, f, err);
}

void gs_exec_session_abort(gs_exec_session *x, const char *msg)
{
    x->ops->abort(x->drv, msg);
}

const gs_schedule *gs_exec_session_schedule(const gs_exec_session *x)
{
    return x->sch;
}

gs_timing *const *gs_exec_session_timing(const gs_exec_session *x)
{
    return x->timing;
}

gs_train *gs_exec_session_train(gs_exec_session *x)
{
    return x->train;
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

/* Multi-process saves: each process holds only its rank's shards, and the writer checks the
 * tiling of every rank's pieces in one process: not supported yet (loads are: each process reads
 * its rank's pieces). */
static gs_status ckpt_refused(gs_error *err)
{
    return gs_error_set(err, GS_ERR_UNSUPPORTED,
                        "exec: saving checkpoints (--save, --save-full) is not supported across processes "
                        "(mpirun/srun) yet: each process holds only its own rank's shards; run exec in one process to "
                        "save");
}

/* Every rank's shards as checkpoint views (primary pieces only when `primary`). */
typedef struct ckpt_views {
    size_t n;
    gs_shard_list *lists;
    gs_ckpt_rank_view *views;
    gs_ckpt_shard **shards;
    gs_ckpt_piece **pieces;
} ckpt_views;

static void views_fini(ckpt_views *v)
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

static gs_status views_init(gs_exec_session *x, int primary, ckpt_views *v, gs_error *err)
{
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
        if ((rc = gs_train_shards(x->train, i, l, err)) != GS_OK)
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
            if (primary && !t->primary)
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

static void ckpt_meta(const gs_exec_session *x, gs_ckpt_meta *m)
{
    m->dp = (int)x->sch->mesh.size[GS_DIM_DP];
    m->pp = (int)x->sch->mesh.size[GS_DIM_PP];
    m->tp = (int)x->sch->mesh.size[GS_DIM_TP];
    m->step = gs_train_step(x->train);
    m->scenario = x->s.name;
}

gs_status gs_exec_session_save(gs_exec_session *x, const char *dir, gs_error *err)
{
    if (x->boot)
        return ckpt_refused(err);
    ckpt_views v;
    gs_ckpt_meta meta;
    ckpt_meta(x, &meta);
    gs_status rc = views_init(x, 1, &v, err);
    if (rc == GS_OK)
        rc = gs_ckpt_save_sharded(dir, &meta, v.views, (int)v.n, err);
    views_fini(&v);
    return rc;
}

gs_status gs_exec_session_load(gs_exec_session *x, const char *dir, gs_error *err)
{
    ckpt_views v;
    gs_ckpt_meta meta;
    ckpt_meta(x, &meta);
    gs_ckpt_reader *r = NULL;
    unsigned char *found = NULL, *found_all = NULL;
    gs_status rc = views_init(x, 0, &v, err);
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
        rc = agree(x, rc, err);
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
    for (size_t t = 0; rc == GS_OK && t < nt; t++)
        if (!found[t])
            rc = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s is not in the model of %s (another model's "
                              "checkpoint?)", dir, ix->tensors[t].name, x->s.name);
    for (size_t i = 0; rc == GS_OK && i < v.n; i++)
        rc = gs_ckpt_reader_load_rank(r, &v.views[i], &meta, err);
    /* multi-process: a rank file only one process read may have failed it */
    if (x->boot)
        rc = agree(x, rc, err);
    if (rc == GS_OK)
        gs_train_set_step(x->train, ix->step);
out:
    free(found);
    free(found_all);
    gs_ckpt_reader_destroy(r);
    views_fini(&v);
    return rc;
}

/* The full tensors being gathered, in first-seen order (rank 0's tensors first). */
typedef struct full_set {
    gs_ckpt_full_tensor *t;
    float **data; /* owned, one per tensor */
    size_t n, cap;
} full_set;

static void full_set_fini(full_set *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->data[i]);
    free(f->t);
    free(f->data);
}

/* The index in f of shard sh's tensor, added (zero-filled) when new; (size_t)-1 and *rc set when out of
 * memory. */
static size_t full_set_find(full_set *f, const gs_ckpt_shard *sh, gs_error *err, gs_status *rc)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, sh->name) == 0)
            return i;
    uint64_t numel = 1;
    for (size_t k = 0; k < sh->ndim; k++)
        numel *= sh->shape[k];
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        gs_ckpt_full_tensor *t = realloc(f->t, cap * sizeof *t);
        if (t)
            f->t = t;
        float **d = t ? realloc(f->data, cap * sizeof *d) : NULL;
        if (!t || !d) {
            *rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
            return (size_t)-1;
        }
        f->data = d;
        f->cap = cap;
    }
    if (!(f->data[f->n] = calloc(numel ? numel : 1, sizeof(float)))) {
        *rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for %s", sh->name);
        return (size_t)-1;
    }
    gs_ckpt_full_tensor *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    t->name = sh->name;
    t->ndim = sh->ndim;
    memcpy(t->shape, sh->shape, sizeof t->shape);
    t->data = f->data[f->n];
    return f->n++;
}

gs_status gs_exec_session_save_full(gs_exec_session *x, const char *path, gs_error *err)
{
    if (x->boot)
        return ckpt_refused(err);
    ckpt_views v;
    full_set f = {0};
    gs_ckpt_meta meta;
    ckpt_meta(x, &meta);
    gs_status rc = views_init(x, 1, &v, err);
    for (size_t r = 0; r < v.n && rc == GS_OK; r++)
        for (size_t k = 0; k < v.views[r].shard_count && rc == GS_OK; k++) {
            const gs_ckpt_shard *sh = &v.views[r].shards[k];
            size_t i = full_set_find(&f, sh, err, &rc);
            if (rc != GS_OK)
                break;
            uint64_t numel = 1;
            for (size_t d = 0; d < sh->ndim; d++)
                numel *= sh->shape[d];
            for (size_t p = 0; p < sh->piece_count; p++) {
                const gs_ckpt_piece *pc = &sh->pieces[p];
                if (pc->offset > numel || pc->count > numel - pc->offset) {
                    rc = gs_error_set(err, GS_ERR_RUNTIME, "exec: %s: piece [%" PRIu64 ", +%" PRIu64
                                      ") outside its %" PRIu64 " elements", sh->name, pc->offset, pc->count, numel);
                    break;
                }
                memcpy(f.data[i] + pc->offset, pc->data, pc->count * sizeof(float));
            }
        }
    if (rc == GS_OK)
        rc = gs_ckpt_save_full(path, &meta, f.t, f.n, NULL, NULL, err);
    full_set_fini(&f);
    views_fini(&v);
    return rc;
}

/* ---- the backend seam: one step of a given schedule on the host driver ------------------------ */

typedef struct backend_state {
    gs_scenario s;
    gs_mesh mesh;
} backend_state;

static gs_status backend_open(const gs_scenario *s, const gs_mesh *mesh, const gs_backend_opts *opts, void **state,
                              gs_error *err)
{
    (void)opts;
    backend_state *b = calloc(1, sizeof *b);
    if (!b)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    b->s = *s;
    b->mesh = *mesh;
    uint64_t *peaks = calloc(mesh->world ? mesh->world : 1, sizeof *peaks);
    gs_status rc = peaks ? check_memory(s, mesh, 1, NULL, peaks, err) : gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    free(peaks);
    if (rc != GS_OK) {
        free(b);
        return rc;
    }
    *state = b;
    return GS_OK;
}

static gs_status backend_run(void *state, const gs_schedule *sch, gs_timing *const *timing, gs_error *err)
{
    backend_state *b = state;
    const gs_driver_ops *ops = &gs_driver_host;
    gs_drv *drv = NULL;
    gs_dispatch *disp = NULL;
    gs_train *train = NULL;
    gs_driver_opts dopts = {.timeout_s = 60.0};
    gs_status rc = ops->open(&sch->mesh, &dopts, &drv, err);
    if (rc == GS_OK)
        rc = gs_dispatch_create(ops, drv, sch, &disp, err);
    if (rc == GS_OK)
        rc = gs_train_create(&b->s, sch, ops, drv, disp, NULL, &train, err);
    if (rc == GS_OK) {
        gs_train_begin_step(train);
        rc = gs_dispatch_step(disp, gs_train_run_event, train, NULL, timing, NULL, err);
    }
    gs_train_destroy(train);
    gs_dispatch_destroy(disp);
    if (drv)
        ops->close(drv);
    return rc;
}

static void backend_close(void *state)
{
    free(state);
}

const gs_backend_ops gs_exec_backend = {
    "exec",
    "runs the schedule: the host driver's threads play every rank with real kernels and collectives",
    backend_open,
    backend_run,
    backend_close,
};
