/* An exec session (schedule + driver + dispatcher + training program) and the exec backend's
 * gs_backend_ops, which plays one step of a schedule through a session's pieces. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "engine/units.h"
#include "exec/checkpoint.h"
#include "exec/ckpt_own.h"
#include "exec/exec.h"
#include "exec/session_internal.h"

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

gs_status gs__session_exchange(gs_exec_session *x, const proc_record *mine, proc_record *all, gs_error *err)
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

gs_status gs__session_agree(gs_exec_session *x, gs_status local, gs_error *err)
{
    proc_record mine, *all = calloc((size_t)x->boot->procs, sizeof *all);
    memset(&mine, 0, sizeof mine);
    record_outcome(x, &mine, local, err);
    if (!all)
        return local != GS_OK ? local : gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    gs_status rc = gs__session_exchange(x, &mine, all, err);
    free(all);
    return rc;
}

void gs_exec_session_destroy(gs_exec_session *x)
{
    if (!x)
        return;
    if (gs_dispatch_wedged(x->disp))
        return; /* a given-up rank thread may still use all of it: left to the process's exit */
    gs_train_destroy(x->train);
    gs_dispatch_destroy(x->disp);
    if (x->drv)
        x->ops->close(x->drv);
    if (x->timing && x->sch)
        for (size_t i = 0; i < x->sch->nranks; i++)
            free(x->timing[i]);
    free(x->timing);
    gs_schedule_destroy(x->own_sch);
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

/* The checkpoint targets of o, before the run spends its time (exec/ckpt_own.h). */
static gs_status check_save_targets(const gs_scenario *s, const gs_mesh *mesh, const gs_exec_opts *o,
                                    gs_error *err)
{
    uint64_t params = gs_model_params(&s->model), est = 0;
    gs_status rc = GS_OK;
    /* FP8 delayed scaling's state (4 B an entry, no moments) beside the parameters */
    if (o->check_save && gs_add_u64(gs_ckpt_estimate_bytes(params, s->model.layers, mesh->world, 1),
                                    gs_train_fp8_state_bytes(s), &est) != 0)
        est = UINT64_MAX;
    if (o->check_save)
        rc = gs_ckpt_check_target(o->check_save, est, o->ckpt_force, err);
    if (rc == GS_OK && o->check_save_full)
        rc = gs_ckpt_check_full_target(o->check_save_full, gs_ckpt_estimate_bytes(params, s->model.layers, 1, 0),
                                       o->ckpt_force, err);
    return rc;
}

/* The schedule the session plays (the caller's or built here), checked against the mesh; in a
 * multi-process run, the rank list this process plays (x->local). */
static gs_status session_schedule(gs_exec_session *x, const gs_mesh *mesh, gs_error *err)
{
    gs_status rc = GS_OK;
    /* the dispatcher and the program rely on a valid schedule: matched collectives and p2p,
     * tensors alive when used */
    if (x->o.schedule)
        x->sch = x->o.schedule;
    else if ((rc = gs_schedule_build(&x->s, mesh, 1, &x->own_sch, err)) == GS_OK)
        x->sch = x->own_sch;
    if (rc != GS_OK || (rc = gs_schedule_validate_structure(x->sch, err)) != GS_OK ||
        (rc = gs__session_check_fault_hook(x, err)) != GS_OK)
        return rc;
    if (x->sch->nranks != mesh->world || x->sch->mesh.world != mesh->world)
        return gs_error_set(err, GS_ERR_INPUT,
                            "exec: the schedule holds %zu rank lists of a %" PRIu64 "-rank mesh; "
                            "the scenario's grid has %" PRIu64 " ranks",
                            x->sch->nranks, x->sch->mesh.world, mesh->world);
    /* process p plays rank p, which is the exact schedule's list p (gather_timing relies on it) */
    if (x->boot)
        for (size_t i = 0; i < x->sch->nranks; i++) {
            if (x->sch->ranks[i].rank != i)
                return gs_error_set(err, GS_ERR_RUNTIME, "exec: the schedule's rank list %zu is rank %" PRIu64
                                    ", expected one list per rank in rank order", i, x->sch->ranks[i].rank);
            if (i == (size_t)x->boot->proc)
                x->local = i;
        }
    if (!(x->timing = calloc(x->sch->nranks ? x->sch->nranks : 1, sizeof *x->timing)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (size_t i = 0; i < x->sch->nranks; i++)
        if (!(x->timing[i] = calloc(x->sch->ranks[i].nevents + 1, sizeof *x->timing[i])))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    if (x->boot && x->local == GS_DISPATCH_ALL)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %d is not in the schedule", x->boot->proc);
    return GS_OK;
}

/* Opens the driver, the dispatcher and the training program. peaks: the memory ledger's peak
 * per rank, or NULL. */
static gs_status session_open(gs_exec_session *x, const gs_mesh *mesh, const uint64_t *peaks, gs_error *err)
{
    const gs_scenario *s = &x->s;
    gs_status rc;
    /* heads that do not split over tp: unknown here (the program refuses them, saying so) */
    uint64_t tp = mesh->size[GS_DIM_TP] ? mesh->size[GS_DIM_TP] : 1, cp = mesh->cp > 1 ? mesh->cp : 1;
    /* context parallelism: a2a gives each CP rank heads / cp of whole sequences; p2p and
     * all_gather run the whole sequence on each, the rank's queries among zero rows; a2a+p2p the
     * whole sequence with heads / cp_a2a */
    uint64_t hdiv = cp > 1 && s->strategy.cp_comm == GS_CP_A2A       ? tp * cp
                    : cp > 1 && s->strategy.cp_comm == GS_CP_A2A_P2P ? tp * gs_mesh_cp_a2a(mesh)
                                                                     : tp;
    int split = s->model.heads % hdiv == 0 && s->model.kv_heads % hdiv == 0;
    gs_driver_opts dopts = {.timeout_s = x->o.timeout_s,
                           .group_of = gs_group_of,
                           .rank_peak_bytes = peaks,
                           .sch = x->sch,
                           .attn_heads = split ? s->model.heads / hdiv : 0,
                           .attn_kv_heads = split ? s->model.kv_heads / hdiv : 0,
                           .attn_seq_mult = cp > 1 && s->strategy.cp_comm != GS_CP_A2A ? cp : 1,
                           .attn_flash = s->strategy.flash_attention != 0,
                           .boot = x->boot,
                           .gemm_bf16 = s->strategy.precision == GS_PREC_BF16,
                           .fp8 = s->strategy.fp8 != GS_FP8_OFF,
                           .tp_ring_p2p = s->strategy.tp_comm_overlap && s->strategy.sequence_parallel && tp > 1,
                           .attn_dropout = s->model.dropout && gs_dropout_threshold(s->model.attention_dropout) > 0,
                           .set = x->o.driver_set};
    if ((rc = x->ops->open(mesh, &dopts, &x->drv, err)) == GS_OK &&
        (rc = gs_dispatch_create_local(x->ops, x->drv, x->sch, x->local, &x->disp, err)) == GS_OK)
        rc = gs_train_create(&x->s, x->sch, x->ops, x->drv, x->disp, &x->o.train, &x->train, err);
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
    /* every process sees the same scenario: each refuses alike */
    if ((rc = gs_train_fp8_check(s, mesh, x->ops, &x->o.train, err)) != GS_OK)
        goto out;
    if (s->model.mla.kv_lora_rank) {
        /* every process sees the same scenario: each refuses alike */
        rc = gs_error_set(err, GS_ERR_INPUT,
                          "exec: %s: model %s has latent attention (MLA), which exec's drivers do not run: their "
                          "attention is MHA/GQA (`gridstep sim` times it and `gridstep mem` counts every model's "
                          "memory; run a model without mla to execute)", s->name, s->model.name);
        goto out;
    }
    if (s->model.moe.experts && (!x->ops->k.moe_topk_fwd || !x->ops->all_to_all)) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED,
                          "exec: %s: model %s has mixture-of-experts blocks, which the %s driver does not run (it "
                          "has no router, token permutation or all-to-all); run it with --driver host, or simulate "
                          "it with `gridstep sim`", s->name, s->model.name, x->ops->name);
        goto out;
    }
    if (!(x->o.timeout_s >= 0 && x->o.timeout_s <= GS_EXEC_TIMEOUT_MAX_S)) { /* NaN too */
        rc = gs_error_set(err, GS_ERR_INPUT, "exec: timeout %g s: expected a finite number of seconds in (0, %g]",
                          x->o.timeout_s, GS_EXEC_TIMEOUT_MAX_S);
        goto out;
    }
    if ((!x->boot || x->boot->proc == 0) && (rc = check_save_targets(s, mesh, &x->o, err)) != GS_OK)
        goto out;
    peaks = calloc(mesh->world ? mesh->world : 1, sizeof *peaks);
    if (!peaks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    if (!x->o.skip_memory_check &&
        (rc = check_memory(s, mesh, !x->ops->device_memory, x->boot, peaks, err)) != GS_OK)
        goto out;
    if ((rc = session_schedule(x, mesh, err)) != GS_OK)
        goto out;
    /* the driver's open is collective across processes: enter it together or not at all */
    synced = 1;
    if (x->boot && (rc = gs__session_agree(x, rc, err)) != GS_OK)
        goto out;
    rc = session_open(x, mesh, x->o.skip_memory_check ? NULL : peaks, err);
    if (x->boot)
        rc = gs__session_agree(x, rc, err);
out:
    /* a failure before the first agreement: tell the processes waiting in it */
    if (x->boot && !synced)
        rc = gs__session_agree(x, rc, err);
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
    gs_dispatch_opts dopts = {x->o.fail_event, x->o.fail_rank, x->o.fail_kind, x->o.timeout_s};
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
    if ((rc = gs__session_exchange(x, &mine, all, err)) != GS_OK)
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
    gs_dispatch_opts dopts = {x->o.fail_event, x->o.fail_rank, x->o.fail_kind, x->o.timeout_s};
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

void gs_exec_session_progress(const gs_exec_session *x, uint64_t *done, uint64_t *total)
{
    gs_dispatch_progress(x->disp, done, total);
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

/* The first value of the local ranks' state that is not finite, named into err. */
static gs_status find_nonfinite(gs_exec_session *x, const char *when, gs_status kind, gs_error *err)
{
    gs_status rc = GS_OK;
    for (size_t i = 0; i < x->sch->nranks && rc == GS_OK; i++) {
        if (!gs_dispatch_is_local(x->disp, i))
            continue;
        gs_shard_list l;
        if ((rc = gs_train_shards(x->train, i, &l, err)) != GS_OK)
            break;
        for (size_t k = 0; k < l.ntensors && rc == GS_OK; k++) {
            const gs_shard_tensor *t = &l.tensors[k];
            /* training state may hold a NaN legitimately: an amax history keeps a NaN amax,
             * which the scale update passes over (gs_k_fp8_amax_history) */
            for (size_t p = 0; !t->state && p < t->npieces && rc == GS_OK; p++) {
                const gs_shard_piece *pc = &t->pieces[p];
                const float *what[3] = {pc->param, pc->m, pc->v};
                static const char *const names[3] = {"parameter", "Adam m of", "Adam v of"};
                for (int w = 0; w < 3 && rc == GS_OK; w++)
                    for (uint64_t e = 0; what[w] && e < pc->count; e++)
                        if (!isfinite(what[w][e])) {
                            rc = gs_error_set(err, kind, "%s: %s %s is %s at element %" PRIu64 " (rank %" PRIu64
                                              "); %s",
                                              when, names[w], t->name, isnan(what[w][e]) ? "NaN" : "infinite",
                                              pc->offset + e, l.rank,
                                              kind == GS_ERR_INPUT ? "refused (--allow-nonfinite starts from it anyway)"
                                                                   : "the run stops (--allow-nonfinite continues)");
                            break;
                        }
            }
        }
        gs_shard_list_fini(&l);
    }
    return rc;
}

gs_status gs_exec_session_check_finite(gs_exec_session *x, const char *when, int force, gs_status kind,
                                       gs_error *err)
{
    gs_status rc = GS_OK;
    /* device memory: a download of every rank's state, so only where asked */
    if (force || !x->ops->device_memory)
        rc = find_nonfinite(x, when, kind, err);
    if (x->boot) /* every process stops, or none */
        rc = gs__session_agree(x, rc, err);
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
    gs_status rc =
        peaks ? check_memory(s, mesh, 1, NULL, peaks, err) : gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
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
