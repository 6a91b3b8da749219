/* Memory and traffic ledgers: exact per-rank bytes by kind, and bytes sent per step by mesh
 * dimension and link class, each with its formula (the static checks behind `gridstep mem`).
 * This file assembles the ledger from one row per pipeline stage and holds the rows' explain
 * lines; the states, activations, memory peak and traffic of a stage have a file each
 * (engine/ledger_internal.h). ledger_create allocates the ledger and its rows (gs_ledger_destroy
 * frees them); a stage's partition lives for its build_stage only.
 *
 * Conventions (stated once, used by every ledger file):
 *  - States follow the seed's 16 B/param: bf16/fp16 working params 2, fp32 master 4, Adam m 4,
 *    Adam v 4, gradients 2 (fp32 training: params 4, no separate master, m 4, v 4, grads 4);
 *    strategy.grad_dtype sets the gradients' bytes (fp32 under bf16: 18 B/param).
 *  - FSDP flat parameters are padded to a multiple of the shard group per unit: a rank's shard
 *    of a unit of u elements is ceil(u / N) elements.
 *  - Traffic is what a rank sends per step, counted as nccl-tests counts bus bytes for ring
 *    collectives: all-gather and reduce-scatter of a unit send (N-1) x shard bytes, all-reduce
 *    sends 2 (N-1) x shard bytes.
 *  - Activations follow Korthikanti et al. 2022 op by op (Table 2 for GPT-style blocks), generalized
 *    to GQA and SwiGLU; see layer_activation_terms() in engine/ledger_act.c. */
#include "engine/ledger.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger_internal.h"
#include "engine/partition.h"
#include "engine/units.h"

/* ---- names ---------------------------------------------------------------------------------- */

const char *gs_mem_kind_name(gs_mem_kind k)
{
    static const char *names[GS_MEM_KIND_COUNT] = {
        "params", "master", "adam_m", "adam_v", "grads",
        "activations", "pipeline_inflight", "gather_buffers", "workspace"};
    return (unsigned)k < GS_MEM_KIND_COUNT ? names[k] : "?";
}

const char *gs_traffic_kind_name(gs_traffic_kind k)
{
    static const char *names[GS_TRAFFIC_KIND_COUNT] = {
        "dp_allgather", "dp_reduce_scatter", "dp_allreduce", "tp", "pp", "cp", "ep", "fp8_amax"};
    return (unsigned)k < GS_TRAFFIC_KIND_COUNT ? names[k] : "?";
}

/* ---- explain lines -------------------------------------------------------------------------- */

void gs__ledger_line_add(const calc *c, gs_ledger_rank *r, const char *label, uint64_t bytes, const char *fmt, ...)
{
    if (!c->explain || r->nlines >= GS_LEDGER_MAX_LINES)
        return;
    gs_ledger_line *l = &r->lines[r->nlines++];
    snprintf(l->label, sizeof l->label, "%s", label);
    l->bytes = bytes;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->formula, sizeof l->formula, fmt, ap);
    va_end(ap);
}

static void note_add(gs_ledger *l, const char *label, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void note_add(gs_ledger *l, const char *label, uint64_t bytes, const char *fmt, ...)
{
    if (l->nnotes >= sizeof l->notes / sizeof l->notes[0])
        return;
    gs_ledger_line *n = &l->notes[l->nnotes++];
    snprintf(n->label, sizeof n->label, "%s", label);
    n->bytes = bytes;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->formula, sizeof n->formula, fmt, ap);
    va_end(ap);
}

/* ---- one rank class (pipeline stage) ----------------------------------------------------------- */

/* The row of one pipeline stage: its first rank, partition and shard plan, then its states,
 * activations, memory peak and traffic. */
static gs_status build_stage(stage_build *b, gs_error *err)
{
    const gs_mesh *mesh = b->mesh;
    gs_ledger_rank *r = b->r;
    calc *c = b->c;
    uint64_t coords[GS_DIM_COUNT] = {0};
    coords[GS_DIM_PP] = b->stage;
    b->rank = gs_mesh_coords_rank(mesh, coords);
    b->tp = mesh->size[GS_DIM_TP], b->dp = mesh->size[GS_DIM_DP], b->pp = mesh->size[GS_DIM_PP];
    if (c->explain) {
        memset(r, 0, sizeof *r);
    } else { /* the explain lines stay unwritten: only the numbers ahead of them are cleared */
        memset(r, 0, offsetof(gs_ledger_rank, lines));
        r->nlines = 0;
    }
    memset(&b->part, 0, sizeof b->part);
    r->stage = b->stage;
    r->first_rank = b->rank;
    r->count = b->dp * b->tp;
    gs_status rc = gs_partition_stage(b->s, mesh, b->stage, &b->part, err);
    if (rc != GS_OK)
        return rc;
    r->layers = b->part.layers;
    r->params = b->part.params;
    gs_shard_plan_init(b->s, mesh, b->rank, b->mb, &b->plan);
    r->dp_shard_group = b->plan.N;
    r->dp_replica_group = b->plan.R;
    b->shard = b->largest = b->nonroot = 0;
    b->root = gs_partition_root(&b->part);
    for (size_t i = 0; i < b->part.nunits; i++) {
        b->shard = add(c, b->shard, ceil_div(b->part.units[i].params, gs_shard_ranks(&b->plan, b->part.units[i].expert)),
                       "shard");
        if (b->part.units[i].params > b->largest)
            b->largest = b->part.units[i].params;
        if (!(b->part.has_root && i + 1 == b->part.nunits))
            b->nonroot += b->part.units[i].params;
    }
    r->unit_params = b->largest;
    gs__ledger_stage_states(b);
    if ((rc = gs_ledger_act_sizes(b->s, mesh, b->stage, &b->act, err)) == GS_OK) {
        gs__ledger_stage_act_lines(b);
        if ((rc = gs__ledger_stage_peak(b, err)) == GS_OK && (rc = gs__ledger_stage_dp_traffic(b, err)) == GS_OK) {
            gs__ledger_stage_tp_traffic(b);
            gs__ledger_stage_cp_traffic(b);
            gs__ledger_stage_ep_traffic(b);
            gs__ledger_stage_fp8_traffic(b);
            gs__ledger_stage_pp_traffic(b);
        }
    }
    gs_partition_fini(&b->part);
    return rc;
}

/* ---- the ledger -------------------------------------------------------------------------------- */

static void seed_cross_checks(gs_ledger *l, const gs_scenario *s, const gs_mesh *mesh)
{
    uint64_t tp = mesh->size[GS_DIM_TP], dp = mesh->size[GS_DIM_DP], pp = mesh->size[GS_DIM_PP];
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES];
    if (pp <= 1 || !gs_sharding_shards_params(s->strategy.sharding))
        return;
    /* The seed's grid B hand figures divide by dp x tp and by tp only: show what they miss. */
    uint64_t wb = gs_precision_bytes(s->strategy.precision);
    double M = (double)l->params * (double)wb;
    double hand_state = (double)l->states_total_bytes / (double)(dp * tp);
    double exact_state = (double)l->states_total_bytes / (double)(dp * tp * pp);
    note_add(l, "hand check: states", (uint64_t)hand_state,
             "dividing the states by dp x tp = %" PRIu64 " gives %s per rank (the seed's \"1/32, about 35 GB\" for grid B); "
             "it leaves out the PP split: each rank holds 1/(tp x pp) = 1/%" PRIu64 " of the parameters and "
             "1/(dp x tp x pp) = 1/%" PRIu64 " of the states, %s",
             dp * tp, gs_fmt_bytes((uint64_t)hand_state, b1, sizeof b1), tp * pp, dp * tp * pp,
             gs_fmt_bytes((uint64_t)exact_state, b2, sizeof b2));
    double hand_traffic = 2.0 * (M / (double)tp) * (double)(dp - 1) / (double)dp;
    double exact_traffic = 2.0 * (M / (double)(tp * pp)) * (double)(dp - 1) / (double)dp;
    note_add(l, "hand check: traffic", (uint64_t)hand_traffic,
             "2 x (M/tp) x (dp-1)/dp = %s per pass (the seed's \"about 26 GB\") slices the model by tp only; "
             "with the PP split each rank's FSDP slice is M/(tp x pp) = %s, so one AG+RS pass moves %s "
             "(the 2x convention; FULL_SHARD's backward re-gather makes it 3x, and every micro-batch repeats it)",
             gs_fmt_bytes((uint64_t)hand_traffic, b3, sizeof b3),
             gs_fmt_bytes((uint64_t)(M / (double)(tp * pp)), b1, sizeof b1),
             gs_fmt_bytes((uint64_t)exact_traffic, b4, sizeof b4));
}

static gs_status ledger_create(const gs_scenario *s, const gs_mesh *mesh, int explain, gs_ledger **out, gs_error *err)
{
    gs_status rc = GS_OK;
    calc c = {0, NULL, explain};
    *out = NULL;
    gs_ledger *l = explain ? calloc(1, sizeof *l) : malloc(sizeof *l);
    if (l && !explain) { /* everything but the notes, which stay unwritten */
        memset(l, 0, offsetof(gs_ledger, notes));
        l->nnotes = 0;
    }
    if (!l)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory allocating the ledger");
    uint64_t pp = mesh->size[GS_DIM_PP];
    /* without the explain lines each stage clears only its numbers (build_stage) */
    l->ranks = explain ? calloc(pp, sizeof *l->ranks) : malloc(pp * sizeof *l->ranks);
    if (!l->ranks) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory: %" PRIu64 " pipeline stages", pp);
        goto out;
    }
    l->nranks = pp;
    l->params = gs_model_params(&s->model);
    /* working params + fp32 master (mixed precision) + Adam m and v + gradients: 16 B in both
     * precisions with gradients in the training precision, 18 B with fp32 gradients under bf16;
     * the precision-aware optimizer's master remainders 2 B less, bf16 moments (adam_dtype) 4 B */
    {
        const gs_strategy *st = &s->strategy;
        l->bytes_per_param = gs_precision_bytes(st->precision) + gs_master_bytes(st) + gs_adam_state_bytes(st) +
                             gs_grad_bytes(st);
    }
    l->states_total_bytes = mul(&c, l->params, l->bytes_per_param, "total state bytes");
    l->gpu_bytes = s->cluster.gpu.hbm_bytes;
    l->microbatches = s->batch.global_seqs / (s->batch.micro_seqs * gs_mesh_dp_replicas(mesh));
    if (l->microbatches == 0)
        l->microbatches = 1;
    l->min_gpus = l->gpu_bytes ? ceil_div(l->states_total_bytes, l->gpu_bytes) : 0;

    for (uint64_t stage = 0; stage < pp; stage++) {
        gs_ledger_rank *r = &l->ranks[stage];
        stage_build sb = {.s = s, .mesh = mesh, .stage = stage, .mb = l->microbatches, .r = r, .c = &c};
        rc = build_stage(&sb, err);
        if (rc != GS_OK)
            goto out;
        if (c.overflow)
            break;
        if (r->state_bytes > l->per_rank_state_bytes)
            l->per_rank_state_bytes = r->state_bytes;
        if (r->peak_bytes > l->peak_bytes)
            l->peak_bytes = r->peak_bytes;
        if (r->traffic_bytes > l->traffic_bytes || stage == 0) {
            l->traffic_bytes = r->traffic_bytes;
            l->traffic_by_dim[GS_DIM_DP] = r->traffic[GS_TRAFFIC_DP_ALLGATHER] +
                                           r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER] +
                                           r->traffic[GS_TRAFFIC_DP_ALLREDUCE];
            /* CP's exchanges share the TP stream (engine/build_layer.c): counted with TP here */
            l->traffic_by_dim[GS_DIM_TP] = r->traffic[GS_TRAFFIC_TP] + r->traffic[GS_TRAFFIC_CP];
            /* EP's all-to-alls too (the TP stream; their ranks are DP positions) */
            l->traffic_by_dim[GS_DIM_TP] += r->traffic[GS_TRAFFIC_EP];
            /* and the amax reductions (the TP stream; their group spans the stage's DP and TP) */
            l->traffic_by_dim[GS_DIM_TP] += r->traffic[GS_TRAFFIC_FP8_AMAX];
            l->traffic_by_dim[GS_DIM_PP] = r->traffic[GS_TRAFFIC_PP];
        }
    }
    if (c.overflow) {
        rc = gs_error_set(err, GS_ERR_OVERFLOW,
                          "%s: %s would overflow a 64-bit byte count (model %s, %" PRIu64 " ranks); "
                          "the scenario is beyond what any machine holds",
                          s->path, c.what ? c.what : "a size", s->model.name, mesh->world);
        goto out;
    }
    if (explain)
        seed_cross_checks(l, s, mesh);
out:
    if (rc != GS_OK) {
        gs_ledger_destroy(l);
        return rc;
    }
    *out = l;
    return GS_OK;
}

gs_status gs_ledger_create(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err)
{
    return ledger_create(s, mesh, 1, out, err);
}

gs_status gs_ledger_create_numbers(const gs_scenario *s, const gs_mesh *mesh, gs_ledger **out, gs_error *err)
{
    return ledger_create(s, mesh, 0, out, err);
}

void gs_ledger_destroy(gs_ledger *l)
{
    if (!l)
        return;
    free(l->ranks);
    free(l);
}

const gs_ledger_rank *gs_ledger_peak_rank(const gs_ledger *l)
{
    const gs_ledger_rank *best = NULL;
    for (size_t i = 0; i < l->nranks; i++)
        if (!best || l->ranks[i].peak_bytes > best->peak_bytes)
            best = &l->ranks[i];
    return best;
}
