/* The troubleshooting table as data: one rule per row (symptom, check, fixes), each fix applied
 * to a copy of the scenario and measured through the ledger and the caller's evaluator. */
#include "engine/diagnose.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/diagnose_internal.h"
#include "engine/framework.h"
#include "engine/ledger.h"
#include "engine/units.h"

/* Thresholds (fractions). The seed article's rule: NCCL over 30% of the step means redesign the
 * grid; the rest are
 * gridstep's margins, the same the sim report warns at (engine/report.c). */
#define NCCL_SHARE_MAX 0.30       /* flat-throughput: yes above */
#define EXPOSED_DP_RISK 0.10      /* flat-throughput: at risk above (exposed DP / step) */
#define BUBBLE_MAX 0.15           /* pipeline-bubble: yes above (idle / step) */
#define BUBBLE_RISK 0.05          /* pipeline-bubble: at risk above */
#define ACT_RISK_DIV 3            /* oom-first-step: at risk above GPU memory / 3 */
#define PEAK_PART_DIV 4           /* a kind above peak / 4 is a cause of a peak that does not fit */
#define EXPOSED_TP_MAX 0.10       /* tp-comm-exposed: yes above (exposed TP / step) */
#define EXPOSED_TP_RISK 0.05      /* tp-comm-exposed: at risk above */
#define EXPOSED_GATHER_MAX 0.10   /* zero-gather-exposed: yes above (exposed DP / step) */
#define LOSS_PASSES_MAX 0.05      /* loss-passes: yes above (the passes' HBM time / step) */
#define LOSS_PASSES_RISK 0.02     /* loss-passes: at risk above */
#define STATES_RISK_NUM 3         /* states-too-big: at risk above 3/4 of GPU memory */
#define STATES_RISK_DEN 4
#define HOST_BOUND_MAX 0.80       /* host-bound: yes above (host issue / step), as sim's report warns */
#define HOST_BOUND_RISK 0.50      /* host-bound: at risk above */

void gs__diag_say(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, TXT, fmt, ap);
    va_end(ap);
}

/* Rank 0's CP group: the nodes it spans and its ranks on rank 0's node (members first + i x
 * stride, engine/mesh.h). */
static void cp_placement(facts *f)
{
    uint64_t stride, first = gs_mesh_cp_first(&f->mesh, 0, &stride), cp = f->mesh.cp > 1 ? f->mesh.cp : 1;
    uint64_t node0 = gs_mesh_rank_node(&f->mesh, first), last = node0;
    f->cp_local = 0;
    for (uint64_t i = 0; i < cp; i++) {
        uint64_t nd = gs_mesh_rank_node(&f->mesh, first + i * stride);
        f->cp_local += nd == node0;
        last = nd;
    }
    f->cp_nodes = last - node0 + 1; /* members ascend, and so do their nodes */
}

static void detail(gs_diagnose_row *row, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void detail(gs_diagnose_row *row, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->detail, sizeof row->detail, fmt, ap);
    va_end(ap);
}

/* ---- measuring one configuration ---------------------------------------------------------- */

static gs_status measure(const dcase *c, const gs_diagnose_opts *o, facts *f, gs_error *err)
{
    gs_ledger *led = NULL;
    gs_diag warnings;
    gs_diag_init(&warnings);
    memset(f, 0, sizeof *f);
    f->c = *c;
    f->c.s.grid.allow_tp_cross_node = 1; /* the cross-node TP row diagnoses it */
    f->host_bytes = o->host_bytes;
    const gs_scenario *s = &f->c.s;
    gs_status rc = gs_scenario_mesh(s, &f->mesh, &warnings, err);
    if (rc != GS_OK)
        goto out;
    if ((rc = gs_ledger_create(s, &f->mesh, &led, err)) != GS_OK)
        goto out;
    const gs_ledger_rank *pr = gs_ledger_peak_rank(led);
    f->params = led->params;
    f->states = pr->state_bytes;
    f->gather = pr->mem[GS_MEM_GATHER];
    f->act = pr->mem[GS_MEM_ACTIVATIONS] + pr->mem[GS_MEM_PIPE_INFLIGHT];
    f->unit_params = pr->unit_params;
    f->wb = gs_precision_bytes(s->strategy.precision);
    f->per_rank_state = led->per_rank_state_bytes;
    f->min_gpus = led->min_gpus;
    f->peak_stage = pr->stage;
    snprintf(f->peak_where, sizeof f->peak_where, "%s", pr->peak_where);
    f->microbatches = led->microbatches;
    f->dp_cross = gs_mesh_dim_crosses_nodes(&f->mesh, GS_DIM_DP, NULL);
    f->dp_local = gs_mesh_group_local_size(&f->mesh, GS_DIM_DP, 0);
    uint64_t tp_rank = 0; /* a rank whose TP group spans nodes, where one does */
    f->tp_nodes = 1;
    if (gs_mesh_dim_crosses_nodes(&f->mesh, GS_DIM_TP, &tp_rank))
        f->tp_nodes = tp_rank == UINT64_MAX ? 2 : gs_mesh_group_nodes(&f->mesh, GS_DIM_TP, tp_rank);
    cp_placement(f);

    /* checkpoint host memory on rank 0 (stage 0): FULL gathers the fp32 model (master copy, or the
     * fp32 params themselves) and Adam's m and v, 4 + 4 + 4 = 12 B per parameter; SHARDED keeps
     * rank 0's own shard of those; offloaded shards are in host memory already in both cases */
    const gs_ledger_rank *r0 = &led->ranks[0];
    f->host_offload = r0->host_bytes;
    uint64_t model32 = 0, full = 0;
    if (gs_mul_u64(f->params, 4, &model32) || gs_mul_u64(f->params, 12, &full) ||
        gs_add_u64(full, f->host_offload, &full)) {
        rc = gs_error_set(err, GS_ERR_OVERFLOW, "diagnose: checkpoint bytes of %" PRIu64 " parameters overflow",
                          f->params);
        goto out;
    }
    f->ckpt_model = model32;
    f->ckpt_full = full;
    f->ckpt_sharded = r0->mem[GS_MEM_MASTER] + r0->mem[GS_MEM_ADAM_M] + r0->mem[GS_MEM_ADAM_V] +
                      (s->strategy.precision == GS_PREC_FP32 ? r0->mem[GS_MEM_PARAMS] : 0) + f->host_offload;

    gs_diagnose_measure *m = &f->m;
    m->peak_bytes = led->peak_bytes;
    m->gpu_bytes = led->gpu_bytes;
    m->host_ckpt_bytes = c->state_dict == GS_STATE_DICT_FULL ? f->ckpt_full : f->ckpt_sharded;
    if (o->full_step) {
        gs_report rep;
        if ((rc = o->eval(s, &f->mesh, o->eval_ctx, &rep, err)) != GS_OK)
            goto out;
        m->step_time_s = rep.step_time_s;
        m->tokens_per_s = rep.tokens_per_s;
        m->comm_share = rep.comm_share;
        m->bubble_share = rep.bubble_share;
        m->exposed_dp_s = rep.exposed_s[GS_DIM_DP];
        m->exposed_tp_s = rep.exposed_s[GS_DIM_TP];
        m->host_issue_s = rep.host_issue_s;
        gs_report_fini(&rep);
    } else {
        gs_plan_candidate cand;
        memset(&cand, 0, sizeof cand);
        if ((rc = gs_plan_simulate(s, &f->mesh, o->eval, o->eval_ctx, &cand, err)) != GS_OK)
            goto out;
        m->step_time_s = cand.step_time_s;
        m->tokens_per_s = cand.tokens_per_s;
        m->comm_share = cand.comm_share;
        m->bubble_share = cand.bubble_share;
        m->exposed_dp_s = cand.exposed_s[GS_DIM_DP];
        m->exposed_tp_s = cand.exposed_s[GS_DIM_TP];
        m->host_issue_s = cand.host_issue_s;
    }
out:
    gs_diag_fini(&warnings);
    gs_ledger_destroy(led);
    return rc;
}

/* ---- the checks --------------------------------------------------------------------------- */

static int fits(const facts *f) { return f->m.peak_bytes <= f->m.gpu_bytes; }

static void check_oom_at_start(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES], c1[32];
    uint64_t unit_bytes = f->unit_params * f->wb;
    row->measured = (double)f->gather;
    row->threshold = (double)(f->m.gpu_bytes / GATHER_RISK_DIV);
    if (!fits(f) && f->gather >= f->act && f->gather >= f->states)
        row->applies = GS_DIAGNOSE_YES;
    else if (f->gather > f->m.gpu_bytes / GATHER_RISK_DIV || (!fits(f) && f->gather > f->m.peak_bytes / PEAK_PART_DIV))
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row,
           "all-gather buffers %s at the peak (stage %" PRIu64 "); largest unit %s params = %s in %s (wrap: %s%s); "
           "peak %s of %s",
           gs_fmt_bytes(f->gather, b1, sizeof b1), f->peak_stage, gs_fmt_count(f->unit_params, c1, sizeof c1),
           gs_fmt_bytes(unit_bytes, b2, sizeof b2), gs_precision_name(f->c.s.strategy.precision),
           gs_wrap_name(f->c.s.strategy.wrap),
           f->c.s.strategy.wrap == GS_WRAP_MODEL ? ": the whole model is one unit, gathered at once"
           : !f->c.s.strategy.reshard_after_forward && f->gather > 2 * unit_bytes
               ? "; units stay gathered until the step ends: reshard_after_forward off"
               : "",
           gs_fmt_bytes(f->m.peak_bytes, b3, sizeof b3), gs_fmt_bytes(f->m.gpu_bytes, b4, sizeof b4));
}

static void check_oom_first_step(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES];
    row->measured = (double)f->act;
    row->threshold = (double)(f->m.gpu_bytes / ACT_RISK_DIV);
    if (!fits(f) && f->act > f->gather && f->act >= f->states)
        row->applies = GS_DIAGNOSE_YES;
    else if (f->act > f->m.gpu_bytes / ACT_RISK_DIV || (!fits(f) && f->act > f->m.peak_bytes / PEAK_PART_DIV))
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row,
           "saved activations %s at the peak (stage %" PRIu64 ", %s; recompute %s, micro %" PRIu64
           "); peak %s of %s",
           gs_fmt_bytes(f->act, b1, sizeof b1), f->peak_stage, f->peak_where,
           gs_recompute_name(f->c.s.strategy.recompute), f->c.s.batch.micro_seqs,
           gs_fmt_bytes(f->m.peak_bytes, b2, sizeof b2), gs_fmt_bytes(f->m.gpu_bytes, b3, sizeof b3));
}

static void check_flat_throughput(const facts *f, gs_diagnose_row *row)
{
    char t1[32], t2[32];
    row->measured = f->m.comm_share;
    row->threshold = NCCL_SHARE_MAX;
    if (f->dp_cross && f->m.comm_share > NCCL_SHARE_MAX)
        row->applies = GS_DIAGNOSE_YES;
    else if (f->dp_cross && f->m.step_time_s > 0 && f->m.exposed_dp_s > EXPOSED_DP_RISK * f->m.step_time_s)
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row, "NCCL share %.1f%% of the %s step; DP/FSDP exposed %s; DP group of %" PRIu64 " %s (%s)",
           100 * f->m.comm_share, gs_fmt_seconds(f->m.step_time_s, t1, sizeof t1),
           gs_fmt_seconds(f->m.exposed_dp_s, t2, sizeof t2), f->mesh.size[GS_DIM_DP],
           f->dp_cross ? "spans nodes" : "stays within a node", gs_sharding_name(f->c.s.strategy.sharding));
}

static void check_pipeline_bubble(const facts *f, gs_diagnose_row *row)
{
    uint64_t p = f->mesh.size[GS_DIM_PP], mb = f->microbatches;
    row->measured = f->m.bubble_share;
    row->threshold = BUBBLE_MAX;
    if (p == 1) {
        detail(row, "pp = 1: no pipeline; idle share %.1f%%", 100 * f->m.bubble_share);
        return;
    }
    if (f->m.bubble_share > BUBBLE_MAX)
        row->applies = GS_DIAGNOSE_YES;
    else if (f->m.bubble_share > BUBBLE_RISK)
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row,
           "idle %.1f%% of the step (simulated); by hand (p-1)/(m+p-1) = %.1f%% for p=%" PRIu64 ", m=%" PRIu64
           " (%s)",
           100 * f->m.bubble_share, 100.0 * (double)(p - 1) / (double)(mb + p - 1), p, mb,
           gs_pipeline_name(f->c.s.strategy.pipeline));
}

static void check_checkpoint(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], b4[GS_FMT_BYTES];
    uint64_t need = f->c.state_dict == GS_STATE_DICT_FULL ? f->ckpt_full : f->ckpt_sharded;
    uint64_t gpn = f->c.s.cluster.gpus_per_node ? f->c.s.cluster.gpus_per_node : 1;
    row->measured = (double)need;
    row->threshold = (double)f->host_bytes;
    if (need > f->host_bytes)
        row->applies = GS_DIAGNOSE_YES;
    else if (need > f->host_bytes / gpn)
        row->applies = GS_DIAGNOSE_AT_RISK;
    if (f->c.state_dict == GS_STATE_DICT_FULL)
        detail(row,
               "FULL_STATE_DICT: rank 0 gathers the fp32 model (%s) and Adam m, v: 12 B x params = %s of host "
               "memory; the node has %s (%s per GPU)",
               gs_fmt_bytes(f->ckpt_model, b1, sizeof b1), gs_fmt_bytes(need, b2, sizeof b2),
               gs_fmt_bytes(f->host_bytes, b3, sizeof b3),
               gs_fmt_bytes(f->host_bytes / gpn, b4, sizeof b4));
    else
        detail(row, "SHARDED_STATE_DICT: rank 0 writes its own shard, %s of host memory; the node has %s",
               gs_fmt_bytes(need, b1, sizeof b1), gs_fmt_bytes(f->host_bytes, b2, sizeof b2));
}

static void check_loss(const facts *f, gs_diagnose_row *row)
{
    row->applies = GS_DIAGNOSE_NA;
    row->measured = (double)f->c.s.batch.global_seqs;
    row->threshold = 0;
    detail(row,
           "global batch %" PRIu64 " sequences = %.0f tokens per step: the scale to compare with the baseline "
           "run's",
           f->c.s.batch.global_seqs, gs_scenario_tokens(&f->c.s));
}

static void check_tp_cross_node(const facts *f, gs_diagnose_row *row)
{
    char t1[32];
    row->measured = (double)f->tp_nodes;
    row->threshold = 1;
    if (f->tp_nodes > 1)
        row->applies = GS_DIAGNOSE_YES;
    detail(row, "tp %" PRIu64 " on %" PRIu64 " GPUs per node: a TP group spans %" PRIu64 " node%s; TP exposed %s",
           f->mesh.size[GS_DIM_TP], f->c.s.cluster.gpus_per_node, f->tp_nodes, f->tp_nodes == 1 ? "" : "s",
           gs_fmt_seconds(f->m.exposed_tp_s, t1, sizeof t1));
}

static void check_tp_comm(const facts *f, gs_diagnose_row *row)
{
    char t1[32], t2[32];
    const gs_strategy *st = &f->c.s.strategy;
    double step = f->m.step_time_s, share = step > 0 ? f->m.exposed_tp_s / step : 0;
    row->measured = share;
    row->threshold = EXPOSED_TP_MAX;
    if (f->mesh.size[GS_DIM_TP] <= 1) {
        detail(row, "tp = 1: no tensor-parallel communication");
        return;
    }
    if (share > EXPOSED_TP_MAX)
        row->applies = GS_DIAGNOSE_YES;
    else if (share > EXPOSED_TP_RISK)
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row, "TP exposed %s of the %s step (%.1f%%); sequence parallel %s, tp_comm_overlap %s",
           gs_fmt_seconds(f->m.exposed_tp_s, t1, sizeof t1), gs_fmt_seconds(step, t2, sizeof t2), 100 * share,
           st->sequence_parallel ? "on" : "off", st->tp_comm_overlap ? "on" : "off");
}

/* p2p CP's ring across nodes: each ring step waits for its hop between nodes, on one NIC, while
 * the CP ranks a node holds could exchange over NVLink (hierarchical CP). Measured: the exposed
 * communication of the TP stream, which carries the CP exchanges. */
static void check_cp_ring(const facts *f, gs_diagnose_row *row)
{
    char t1[32], t2[32];
    const gs_strategy *st = &f->c.s.strategy;
    double step = f->m.step_time_s, share = step > 0 ? f->m.exposed_tp_s / step : 0;
    row->measured = share;
    row->threshold = EXPOSED_TP_MAX;
    if (f->mesh.cp <= 1 || (st->cp_comm != GS_CP_P2P && st->cp_comm != GS_CP_A2A_P2P)) {
        row->measured = 0; /* the TP stream's exposure is no CP ring's */
        detail(row, "no p2p context-parallel ring (cp %llu, cp_comm %s)", (unsigned long long)f->mesh.cp,
               gs_cp_comm_name(st->cp_comm));
        return;
    }
    if (f->cp_nodes <= 1 || f->cp_local <= 1) {
        detail(row, "the CP group of %llu ranks spans %llu node%s with %llu on each: every ring hop is alike",
               (unsigned long long)f->mesh.cp, (unsigned long long)f->cp_nodes, f->cp_nodes == 1 ? "" : "s",
               (unsigned long long)f->cp_local);
        return;
    }
    if (share > EXPOSED_TP_MAX)
        row->applies = GS_DIAGNOSE_YES;
    else if (share > EXPOSED_TP_RISK)
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row, "the CP ring of %llu ranks spans %llu nodes, %llu on each; TP and CP exposed %s of the %s step "
           "(%.1f%%)", (unsigned long long)f->mesh.cp, (unsigned long long)f->cp_nodes,
           (unsigned long long)f->cp_local, gs_fmt_seconds(f->m.exposed_tp_s, t1, sizeof t1),
           gs_fmt_seconds(step, t2, sizeof t2), 100 * share);
}

static void check_zero_gather(const facts *f, gs_diagnose_row *row)
{
    char t1[32], t2[32];
    const gs_strategy *st = &f->c.s.strategy;
    double step = f->m.step_time_s, share = step > 0 ? f->m.exposed_dp_s / step : 0;
    row->measured = share;
    row->threshold = EXPOSED_GATHER_MAX;
    if (st->sharding != GS_SHARD_ZERO1 && st->sharding != GS_SHARD_ZERO2) {
        detail(row, "sharding %s: no parameter all-gather after the optimizer", gs_sharding_name(st->sharding));
        return;
    }
    if (f->mesh.size[GS_DIM_DP] > 1 && share > EXPOSED_GATHER_MAX && !st->overlap_param_gather)
        row->applies = GS_DIAGNOSE_YES;
    detail(row, "DP exposed %s of the %s step (%.1f%%), %s; overlap_param_gather %s",
           gs_fmt_seconds(f->m.exposed_dp_s, t1, sizeof t1), gs_fmt_seconds(step, t2, sizeof t2), 100 * share,
           gs_sharding_name(st->sharding), st->overlap_param_gather ? "on" : "off");
}

/* The loss's passes over the logits on the last stage, per step: micro-batches x tokens x V/tp
 * logits x the bytes per logit of the strategy's cross-entropy (gs_xent_bytes_per_logit),
 * timed at the GPU's datasheet HBM bandwidth (a lower bound: the sim's elementwise rate is
 * lower). */
static void check_loss_passes(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES], t1[32], t2[32];
    const gs_scenario *s = &f->c.s;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = f->mesh.size[GS_DIM_TP] ? f->mesh.size[GS_DIM_TP] : 1;
    uint64_t e = gs_precision_bytes(st->precision);
    double logits = (double)f->microbatches * (double)s->batch.micro_seqs * (double)s->model.seq *
                    (double)((s->model.vocab + tp - 1) / tp);
    double bytes = logits * (double)(gs_xent_bytes_per_logit(st->cross_entropy, e, 0) +
                                     gs_xent_bytes_per_logit(st->cross_entropy, e, 1));
    double bw = s->cluster.gpu.hbm_bw, step = f->m.step_time_s;
    double secs = bw > 0 ? bytes / bw : 0, share = step > 0 ? secs / step : 0;
    row->measured = share;
    row->threshold = LOSS_PASSES_MAX;
    if (st->cross_entropy == GS_XENT_UNFUSED) {
        if (share > LOSS_PASSES_MAX)
            row->applies = GS_DIAGNOSE_YES;
        else if (share > LOSS_PASSES_RISK)
            row->applies = GS_DIAGNOSE_AT_RISK;
    }
    detail(row,
           "cross_entropy %s over %.3g logits per step (vocab %" PRIu64 " / tp %" PRIu64 "): %s moved, at least %s "
           "at %.0f GB/s HBM, %.1f%% of the %s step",
           gs_xent_name(st->cross_entropy), logits, s->model.vocab, tp, gs_fmt_bytes((uint64_t)bytes, b1, sizeof b1),
           gs_fmt_seconds(secs, t1, sizeof t1), bw / 1e9, 100 * share, gs_fmt_seconds(step, t2, sizeof t2));
}

static void check_offload(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES];
    row->measured = (double)f->host_offload;
    row->threshold = 0;
    if (f->c.s.strategy.offload) {
        row->applies = GS_DIAGNOSE_YES;
        detail(row, "CPU offload on: %s of states per rank in host memory, fetched over PCIe every step",
               gs_fmt_bytes(f->host_offload, b1, sizeof b1));
    } else {
        detail(row, "CPU offload off");
    }
}

static void check_states(const facts *f, gs_diagnose_row *row)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], c1[32];
    row->measured = (double)f->per_rank_state;
    row->threshold = (double)f->m.gpu_bytes;
    if (f->per_rank_state > f->m.gpu_bytes)
        row->applies = GS_DIAGNOSE_YES;
    else if (f->per_rank_state > f->m.gpu_bytes / STATES_RISK_DEN * STATES_RISK_NUM)
        row->applies = GS_DIAGNOSE_AT_RISK;
    detail(row, "states %s per rank (%s) of %s; states total / GPU memory = at least %s GPUs, the job has %" PRIu64,
           gs_fmt_bytes(f->per_rank_state, b1, sizeof b1), gs_sharding_name(f->c.s.strategy.sharding),
           gs_fmt_bytes(f->m.gpu_bytes, b2, sizeof b2), gs_fmt_count(f->min_gpus, c1, sizeof c1), f->mesh.world);
}

static void check_host_bound(const facts *f, gs_diagnose_row *row)
{
    char t1[32], t2[32];
    double share = f->m.step_time_s > 0 ? f->m.host_issue_s / f->m.step_time_s : 0;
    row->measured = share;
    row->threshold = HOST_BOUND_MAX;
    if (!(f->m.host_issue_s > 0)) {
        row->applies = GS_DIAGNOSE_NA;
        detail(row, "the evaluator does not model the host thread");
        return;
    }
    if (share > HOST_BOUND_MAX)
        row->applies = GS_DIAGNOSE_YES;
    else if (share > HOST_BOUND_RISK)
        row->applies = GS_DIAGNOSE_AT_RISK;
    gs_framework fw = gs_framework_resolve(f->c.s.strategy.framework, (int)f->c.s.strategy.sharding);
    const char *how = fw == GS_FW_MEGATRON ? (f->c.s.strategy.cuda_graphs ? "CUDA graphs" : "no CUDA graphs")
                      : f->c.s.strategy.compile ? "compiled" : "eager";
    detail(row, "the busiest host thread issues the step's kernels in %s, %.1f%% of the %s step (%s, %s)",
           gs_fmt_seconds(f->m.host_issue_s, t1, sizeof t1), 100 * share,
           gs_fmt_seconds(f->m.step_time_s, t2, sizeof t2), gs_framework_name(fw), how);
}

/* The table: the seed article's troubleshooting table (its section 5) in its order, then its
 * pitfalls of TP across nodes (section 3), CPU offload (section 2, pitfall 3) and states above the
 * GPU (section 1), then the overlaps and the loss Megatron-Core adds. */
static const rule rules[] = {
    {"oom-at-start", "OOM at start", "FSDP unit too large: the all-gather peak",
     "all-gather buffers at the peak rank (ledger `gather`, unit size = unit params x bytes per element): yes "
     "when the peak exceeds GPU memory and they are its largest part; at risk above 25% of GPU memory",
     "wrap per layer, lower min_num_params",
     "bytes", check_oom_at_start, {gs__fix_wrap_layer, NULL}},
    {"oom-first-step", "OOM at the first step", "activation peak",
     "saved activations at the peak rank (ledger `activations` + `pipe_inflight`): yes when the peak exceeds "
     "GPU memory and they are its largest part; at risk above 1/3 of GPU memory",
     "enable activation checkpointing (recompute); smaller micro-batch",
     "bytes", check_oom_first_step, {gs__fix_recompute_full, gs__fix_micro_half}},
    {"flat-throughput", "throughput flat as GPUs grow", "cross-node FSDP traffic",
     "NCCL share of the simulated step (the seed's rule: over 30% of the step, redesign the grid) with the DP group spanning nodes; at risk when exposed "
     "DP communication exceeds 10% of the step",
     "HYBRID_SHARD, or cut cross-node DP traffic with TP/PP or larger micro-batches",
     "fraction", check_flat_throughput, {gs__fix_hybrid_shard, gs__fix_micro_double}},
    {"pipeline-bubble", "GPU idle periodically", "pipeline bubble",
     "simulated idle share with pp > 1 (yes over 15%, at risk over 5%) beside (p-1)/(m+p-1)",
     "more micro-batches per step; interleaved 1F1B",
     "fraction", check_pipeline_bubble, {gs__fix_micro_half, gs__fix_interleaved}},
    {"checkpoint-oom", "OOM while saving a checkpoint", "FULL_STATE_DICT gathered on rank 0",
     "host memory rank 0 needs to write a checkpoint (FULL: 12 B x params) against the node's host memory "
     "(yes above it, at risk above its per-GPU share)",
     "SHARDED_STATE_DICT with distributed checkpoint save/load",
     "bytes", check_checkpoint, {gs__fix_sharded_state_dict, NULL}},
    {"loss-after-scale", "loss does not fall after changing scale", "batch and learning rate not adapted",
     "compare the loss curve with the baseline run's (not simulated: gridstep models time and memory)",
     "retune learning rate and warm-up for the new global batch",
     "sequences", check_loss, {NULL, NULL}},
    {"tp-cross-node", "slow step with TP across nodes", "TP group larger than a node (the seed: bigger TP is not better past a node)",
     "nodes one TP group spans: yes above 1 (per-layer all-reduces on the network)",
     "keep tp <= GPUs per node; use PP or DP across nodes",
     "nodes", check_tp_cross_node, {gs__fix_tp_in_node, NULL}},
    {"cpu-offload-slow", "slow step with CPU offload", "parameters fetched from host every layer",
     "CPU offload enabled (the seed: 30-50% slower)",
     "turn CPU offload off where the states fit",
     "bytes", check_offload, {gs__fix_no_offload, NULL}},
    {"states-too-big", "OOM whatever the activations", "states per rank exceed the GPU (16 B per parameter before sharding)",
     "per-rank states (params + master + m + v + grads) against GPU memory: yes above it, at risk above 75%",
     "shard the states (FULL_SHARD / ZeRO-3), or add GPUs",
     "bytes", check_states, {gs__fix_full_shard, NULL}},
    {"tp-comm-exposed", "GPUs wait between a layer's GEMMs", "tensor-parallel collectives between dependent GEMMs",
     "exposed TP communication over the simulated step with tp > 1: yes above 10%, at risk above 5%",
     "sequence parallelism with Megatron-Core's TP communication overlap (tp_comm_overlap)",
     "fraction", check_tp_comm, {gs__fix_tp_comm_overlap, NULL}},
    {"cp-ring-nodes", "a long-context step waits on the CP exchange",
     "p2p's K, V ring crosses nodes with several CP ranks on each: every step waits for its hop between nodes",
     "exposed TP-stream communication (TP and CP) over the simulated step, with cp_comm p2p and a CP group on "
     "several nodes with several ranks on each: yes above 10%, at risk above 5%",
     "hierarchical CP: all-to-all among a node's CP ranks, the ring across nodes (cp_comm a2a+p2p, cp_a2a the "
     "CP ranks per node)",
     "fraction", check_cp_ring, {gs__fix_hierarchical_cp, NULL}},
    {"zero-gather-exposed", "idle GPUs after the optimizer step", "ZeRO-1/2 parameter all-gather after the optimizer",
     "exposed DP communication over the simulated step with zero1/zero2 and no overlap_param_gather: yes above 10%",
     "gather the parameters under the next forward (overlap_param_gather, Megatron --overlap-param-gather)",
     "fraction", check_zero_gather, {gs__fix_overlap_param_gather, NULL}},
    {"loss-passes", "slow last stage with a large vocabulary", "the loss's unfused passes over the fp32 logits",
     "HBM time of the cross-entropy's passes over the logits per step (micro-batches x tokens x vocab/tp x bytes "
     "per logit, at the datasheet bandwidth) over the simulated step: yes above 5%, at risk above 2% (unfused)",
     "a fused cross-entropy kernel (Megatron --cross-entropy-loss-fusion)",
     "fraction", check_loss_passes, {gs__fix_fused_loss, NULL}},
    {"host-bound", "GPUs wait between small kernels", "the host issues kernels slower than the GPU runs them",
     "the busiest rank's host thread's time to issue the step (8 us per kernel, sim's host model) over the "
     "simulated step: yes above 80%, at risk above 50%",
     "fewer host calls: torch.compile's fused kernels (PyTorch), CUDA graphs (Megatron); longer kernels: a "
     "larger micro-batch",
     "fraction", check_host_bound, {gs__fix_fewer_issues, gs__fix_micro_double}},
};
static const size_t nrules = sizeof rules / sizeof rules[0];

size_t gs_diagnose_rule_count(void) { return nrules; }

const char *gs_diagnose_rule_id(size_t i) { return i < nrules ? rules[i].id : NULL; }

const char *gs_diagnose_verdict_name(gs_diagnose_verdict v)
{
    switch (v) {
    case GS_DIAGNOSE_NO: return "no";
    case GS_DIAGNOSE_AT_RISK: return "at risk";
    case GS_DIAGNOSE_YES: return "yes";
    case GS_DIAGNOSE_NA: return "n/a";
    }
    return "?";
}

void gs_diagnose_opts_init(gs_diagnose_opts *o)
{
    memset(o, 0, sizeof *o);
    o->state_dict = GS_STATE_DICT_FULL;
    o->host_bytes = GS_DIAGNOSE_HOST_BYTES_DEFAULT;
}

/* Measured fixed configurations, so a fix shared by two rows is simulated once. */
#define CACHE_MAX (GS_DIAGNOSE_MAX_ROWS * GS_DIAGNOSE_MAX_FIXES)
typedef struct cache {
    dcase c[CACHE_MAX];
    gs_diagnose_measure m[CACHE_MAX];
    size_t n;
} cache;

/* Measures the fixed copy into fx; a copy that fails its checks or simulation becomes a note. */
static void measure_fix(const facts *base, const dcase *c, int already, const gs_diagnose_opts *o, cache *k,
                        gs_diagnose_fix *fx)
{
    const gs_diagnose_measure *after = NULL;
    facts ff;
    gs_diagnose_measure same;
    int unchanged = memcmp(&c->s, &base->c.s, sizeof c->s) == 0;
    if (unchanged) { /* only the checkpoint setting changed */
        same = base->m;
        same.host_ckpt_bytes = c->state_dict == GS_STATE_DICT_FULL ? base->ckpt_full : base->ckpt_sharded;
        after = &same;
    }
    for (size_t i = 0; i < k->n && !after; i++)
        if (memcmp(&k->c[i], c, sizeof *c) == 0)
            after = &k->m[i];
    if (!after) {
        gs_error e;
        gs_error_init(&e);
        if (measure(c, o, &ff, &e) != GS_OK) {
            char *nl = strchr(e.msg, '\n');
            if (nl)
                *nl = '\0';
            gs__diag_say(fx->note, "not applicable here: %s", e.msg);
            return;
        }
        after = &ff.m;
        if (k->n < CACHE_MAX) {
            k->c[k->n] = *c;
            k->m[k->n++] = ff.m;
        }
    }
    /* the effect of the fix: fixed minus unfixed */
    const gs_diagnose_measure *with = already ? &base->m : after, *without = already ? after : &base->m;
    fx->simulated = 1;
    fx->counterfactual = already;
    fx->after = *with;
    fx->peak_bytes_delta = (int64_t)with->peak_bytes - (int64_t)without->peak_bytes;
    fx->step_time_s_delta = with->step_time_s - without->step_time_s;
    fx->tokens_per_s_delta = with->tokens_per_s - without->tokens_per_s;
    fx->host_bytes_delta = (int64_t)with->host_ckpt_bytes - (int64_t)without->host_ckpt_bytes;
    if (!already && !unchanged && after->peak_bytes > after->gpu_bytes)
        gs__diag_say(fx->note, "still does not fit: peak above GPU memory");
}

gs_status gs_diagnose_run(const gs_scenario *s, const gs_diagnose_opts *o, gs_diagnosis *out, gs_error *err)
{
    gs_status rc = GS_OK;
    memset(out, 0, sizeof *out);
    if (!o || !o->eval)
        return gs_error_set(err, GS_ERR_INPUT, "diagnose: no evaluator");
    facts *base = calloc(1, sizeof *base);
    cache *k = calloc(1, sizeof *k);
    if (!base || !k) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "diagnose: out of memory");
        goto out;
    }
    dcase c0;
    memset(&c0, 0, sizeof c0);
    c0.s = *s;
    c0.s.grid.allow_tp_cross_node = 1;
    c0.state_dict = o->state_dict;
    if ((rc = measure(&c0, o, base, err)) != GS_OK)
        goto out;
    out->base = base->m;
    out->params = base->params;
    out->unit_params = base->unit_params;
    out->unit_bytes = base->unit_params * base->wb;
    out->ckpt_full_bytes = base->ckpt_full;
    out->ckpt_sharded_bytes = base->ckpt_sharded;
    for (size_t i = 0; i < nrules && i < GS_DIAGNOSE_MAX_ROWS; i++) {
        const rule *ru = &rules[i];
        gs_diagnose_row *row = &out->rows[out->nrows++];
        row->id = ru->id;
        row->symptom = ru->symptom;
        row->cause = ru->cause;
        row->check = ru->check;
        row->advice = ru->advice;
        row->unit = ru->unit;
        ru->check_fn(base, row);
        if (row->applies == GS_DIAGNOSE_YES)
            out->problems++;
        for (int j = 0; j < GS_DIAGNOSE_MAX_FIXES && ru->fix[j]; j++) {
            gs_diagnose_fix *fx = &row->fixes[row->nfixes++];
            dcase c = c0;
            fix_result fr = ru->fix[j](base, &c, fx->fix, fx->note);
            if (fr != FIX_NONE)
                measure_fix(base, &c, fr == FIX_ALREADY, o, k, fx);
        }
    }
out:
    free(base);
    free(k);
    return rc;
}
