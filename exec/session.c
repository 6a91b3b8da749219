/* An exec session (schedule + driver + dispatcher + training program) and the exec backend's
 * gs_backend_ops, which plays one step of a schedule through a session's pieces. */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
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
        /* the exec program computes in fp32: scale 2-byte working precisions (and 2-byte
         * gradients) up */
        if (s->strategy.precision != GS_PREC_FP32 || gs_grad_bytes(&s->strategy) < 4)
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

/* What every process of a run must agree on: the fields that shape the model, the grid, the
 * schedule and the training program (processes launched on different files, or on one file that
 * differs between hosts, would otherwise run mismatched collectives or corrupt a gather). Floats
 * travel as their bits. */
enum { SIG_FIELDS = 32 }; /* room for every field below */
typedef struct sig_field {
    const char *name;
    int is_float;
} sig_field;

/* Fills v and f; returns the field count (<= SIG_FIELDS). */
static size_t run_signature(const gs_exec_session *x, const gs_scenario *s, uint64_t *v, sig_field *f)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    const gs_train_opts *t = &x->o.train;
    const float fl[] = {t->lr, t->eps, t->weight_decay, t->init_std};
    const char *fln[] = {"--lr", "--adam-eps", "AdamW weight decay", "init std"};
    size_t i = 0;
#define SIG(label, value) (f[i] = (sig_field){(label), 0}, v[i++] = (uint64_t)(value))
    SIG("model layers", m->layers), SIG("model hidden", m->hidden), SIG("model heads", m->heads);
    SIG("model kv_heads", m->kv_heads), SIG("model head_dim", m->head_dim), SIG("model ffn", m->ffn);
    SIG("model vocab", m->vocab), SIG("model seq", m->seq), SIG("model tied_embeddings", m->tied_embeddings);
    SIG("model norm", m->norm), SIG("model mlp", m->mlp), SIG("model pos", m->pos);
    SIG("grid dp", s->grid.dp), SIG("grid pp", s->grid.pp), SIG("grid tp", s->grid.tp);
    SIG("cluster nodes", s->cluster.nodes), SIG("cluster gpus_per_node", s->cluster.gpus_per_node);
    SIG("strategy sharding", st->sharding), SIG("strategy wrap", st->wrap), SIG("strategy recompute", st->recompute);
    SIG("strategy pipeline", st->pipeline), SIG("strategy virtual_stages", st->virtual_stages);
    SIG("strategy sequence_parallel", st->sequence_parallel);
    SIG("batch global_seqs", s->batch.global_seqs), SIG("batch micro_seqs", s->batch.micro_seqs);
    SIG("--seed", t->seed);
#undef SIG
    for (size_t k = 0; k < sizeof fl / sizeof *fl; k++) {
        uint32_t u;
        memcpy(&u, &fl[k], sizeof u);
        f[i] = (sig_field){fln[k], 1};
        v[i++] = u;
    }
    return i;
}

static double sig_value(uint64_t v, int is_float)
{
    if (!is_float)
        return (double)v;
    uint32_t u = (uint32_t)v;
    float fv;
    memcpy(&fv, &u, sizeof fv);
    return fv;
}

/* Collective: every process's signature against process 0's; the first difference (lowest
 * process, first field) becomes the same error on every process. */
static gs_status agree_on_scenario(gs_exec_session *x, const gs_scenario *s, gs_error *err)
{
    uint64_t mine[SIG_FIELDS] = {0};
    sig_field f[SIG_FIELDS] = {{0}};
    size_t n = run_signature(x, s, mine, f);
    size_t procs = (size_t)x->boot->procs;
    uint64_t *all = calloc(procs * SIG_FIELDS, sizeof *all);
    if (!all)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    gs_status rc = x->boot->allgather(x->boot->ctx, mine, sizeof mine, all, err);
    for (size_t p = 1; rc == GS_OK && p < procs; p++)
        for (size_t k = 0; k < n; k++)
            if (all[p * SIG_FIELDS + k] != all[k]) {
                rc = gs_error_set(err, GS_ERR_INPUT, "exec: process %zu runs a different scenario or options than "
                                  "process 0 (%s: %.9g vs %.9g); every process must run the same scenario with the "
                                  "same options", p, f[k].name, sig_value(all[p * SIG_FIELDS + k], f[k].is_float),
                                  sig_value(all[k], f[k].is_float));
                break;
            }
    free(all);
    return rc;
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
    /* the first collective: the processes agree on what they run (then every check below sees
     * the same values everywhere, so each process refuses alike) */
    if (x->boot && (rc = agree_on_scenario(x, s, err)) != GS_OK) {
        x->boot = NULL;
        goto out;
    }
    if (x->boot && (uint64_t)x->boot->procs != mesh->world) {
        /* every process sees the same counts: each refuses alike, nothing collective has run */
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "exec: %s has %" PRIu64 " ranks (" GS_GRID_FMT "), but the "
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
    /* heads that do not split over tp: unknown here (the program refuses them, saying so) */
    uint64_t tp = mesh->size[GS_DIM_TP] ? mesh->size[GS_DIM_TP] : 1;
    int split = s->model.heads % tp == 0 && s->model.kv_heads % tp == 0;
    gs_driver_opts dopts = {.timeout_s = x->o.timeout_s,
                           .group_of = gs_group_of,
                           .rank_peak_bytes = x->o.skip_memory_check ? NULL : peaks,
                           .sch = x->sch,
                           .attn_heads = split ? s->model.heads / tp : 0,
                           .attn_kv_heads = split ? s->model.kv_heads / tp : 0,
                           .attn_flash = s->strategy.flash_attention != 0,
                           .boot = x->boot,
                           .gemm_bf16 = s->strategy.precision == GS_PREC_BF16,
                           .tp_ring_p2p = s->strategy.tp_comm_overlap && s->strategy.sequence_parallel && tp > 1,
                           .attn_dropout = s->model.dropout && gs_dropout_threshold(s->model.attention_dropout) > 0};
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

const char *gs_exec_session_gemm_math(const gs_exec_session *x)
{
    return x->drv && x->ops->gemm_math ? x->ops->gemm_math(x->drv) : "fp32";
}

gs_train *gs_exec_session_train(gs_exec_session *x)
{
    return x->train;
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

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

/* The test hook GRIDSTEP_FAULT=fail|die:RANK:save:PHASE (opts fail_event "save:PHASE"): at that
 * step of a save (exec/checkpoint.h's hook phases) the save of RANK fails ("fail": tmp-dir,
 * file-written and full-pieces only, the steps before the commit) or its process is killed
 * (SIGKILL, "die": any phase). file-written is the named rank's file; full-pieces (--save-full
 * across processes, RANK not 0) is RANK's process about to send its pieces to the root; the other
 * phases are the root's (rank 0). */
typedef struct save_fault {
    const char *phase; /* NULL: no fault */
    gs_fault_kind kind;
    int rank;
    int is_root;         /* this process does the root's steps (rank 0's) */
    char rank_file[64];  /* the named rank's file name */
    int fired;
} save_fault;

static gs_status save_fault_init(const gs_exec_session *x, save_fault *f, gs_error *err)
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

static void save_fault_hook(const char *phase, const char *path, void *arg)
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
    ckpt_meta(x, &meta);
    gs_status rc = save_fault_init(x, &f, err);
    if (rc == GS_OK)
        rc = views_init(x, 1, &v, err);
    if (rc == GS_OK)
        rc = gs_ckpt_writer_create(&w, dir, &meta, (int)v.n, err);
    if (rc == GS_OK && f.phase) {
        gs_ckpt_writer_set_hook(w, save_fault_hook, &f);
        rc = save_fault_check(&f, dir, err);
    }
    for (size_t r = 0; rc == GS_OK && r < v.n; r++)
        if ((rc = gs_ckpt_writer_write_rank(w, (int)r, &v.views[r], err)) == GS_OK)
            rc = save_fault_check(&f, dir, err);
    if (rc == GS_OK)
        rc = gs_ckpt_writer_commit(w, err);
    gs_ckpt_writer_destroy(w);
    views_fini(&v);
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
 * outcome (agree: the lowest failed process's error). */
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
    ckpt_meta(x, &meta);
    gs_status rc = save_fault_init(x, &f, err);
    if (rc == GS_OK)
        rc = views_init(x, 1, &v, err);
    /* 1. the root recovers DIR and creates the temporary directory */
    if (root) {
        if (rc == GS_OK)
            rc = gs_ckpt_writer_create(&w, dir, &meta, world, err);
        if (rc == GS_OK && f.phase) {
            gs_ckpt_writer_set_hook(w, save_fault_hook, &f);
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
        gs_ckpt_writer_set_hook(w, save_fault_hook, &f);
    if (rc == GS_OK && (rc = gs_ckpt_writer_write_rank(w, me, &v.views[me], err)) == GS_OK)
        rc = save_fault_check(&f, dir, err);
    if (rc == GS_OK && (rc = gs_ckpt_writer_export_rank(w, me, &rec, err)) == GS_OK)
        rc = gs_ckpt_rank_record_encode(&rec, &mine, &mine_bytes, err);
    /* every file is closed (or some process failed) before the root reads or removes the directory */
    if ((rc = agree(x, rc, err)) != GS_OK)
        goto out;
    /* 3. the records to the root (allgatherv: a few hundred bytes per piece) */
    sizes = calloc(procs, sizeof *sizes);
    counts = calloc(procs, sizeof *counts);
    my_size = mine_bytes;
    if (!sizes || !counts)
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    if ((rc = agree(x, rc, err)) != GS_OK || (rc = b->allgather(b->ctx, &my_size, sizeof my_size, sizes, err)) != GS_OK)
        goto out;
    size_t total = 0;
    for (size_t p = 0; p < procs; p++) {
        counts[p] = (size_t)sizes[p];
        total += counts[p];
    }
    if (!(all = malloc(total ? total : 1)))
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory for %zu bytes of checkpoint records", total);
    if ((rc = agree(x, rc, err)) != GS_OK ||
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
    rc = agree(x, rc, err);
out:
    gs_ckpt_writer_destroy(w); /* the root's removes an uncommitted temporary directory */
    gs_ckpt_rank_record_fini(&rec);
    free(mine);
    free(all);
    free(sizes);
    free(counts);
    views_fini(&v);
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
        if ((rc = gs_ckpt_reader_load_rank(r, &v.views[i], &meta, err)) == GS_OK)
            rc = gs_train_shards_upload(x->train, i, &v.lists[i], err); /* device memory: the host copies back */
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
    ckpt_meta(x, &meta);
    if (!b->send || !b->recv) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED, "exec: --save-full across processes needs the bootstrap's "
                          "point-to-point transport, which this one lacks");
        return agree(x, rc, err);
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
        if (o == GS_BOOT_DONE && rc == GS_OK && (rc = gs_ckpt_rank_record_decode(buf, (size_t)size, &rec, err)) == GS_OK &&
            rec.rank != p)
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
        rc = gs_ckpt_save_full(path, &meta, f->t, f->n, fault->phase ? save_fault_hook : NULL, (void *)fault, err);
out:
    gs_ckpt_rank_record_fini(&rec);
    free(buf);
    return agree(x, rc, err);
}

gs_status gs_exec_session_save_full(gs_exec_session *x, const char *path, gs_error *err)
{
    ckpt_views v;
    full_set f = {0};
    gs_ckpt_meta meta;
    save_fault fault;
    memset(&v, 0, sizeof v);
    ckpt_meta(x, &meta);
    gs_status rc = save_fault_init(x, &fault, err);
    if (rc == GS_OK)
        rc = views_init(x, 1, &v, err);
    if (x->boot) {
        rc = agree(x, rc, err); /* every process enters the exchange, or none */
        if (rc == GS_OK)
            rc = save_full_across(x, &v, &f, &fault, path, err);
    } else {
        if (rc == GS_OK)
            rc = full_set_add_views(&f, &v, err);
        if (rc == GS_OK)
            rc = gs_ckpt_save_full(path, &meta, f.t, f.n, fault.phase ? save_fault_hook : NULL, &fault, err);
    }
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
