/* The parameter and state ledger (engine/ledger_internal.h): how the strategy treats one rank's
 * parameters and gradients (the shard plan the schedule builders share), the states resident
 * for the whole step (params, fp32 master, Adam m and v, gradients, the workspace) and what CPU
 * offload moves to the host. It writes into the borrowed stage_build and its row; nothing is
 * allocated. */
#include <inttypes.h>
#include <string.h>

#include "engine/ledger_internal.h"
#include "engine/units.h"

/* ---- the strategy's treatment of parameters and gradients --------------------------------------- */

uint64_t gs_shard_ranks(const gs_shard_plan *plan, int expert)
{
    return expert && plan->expert_split ? plan->edp : plan->N;
}

void gs_shard_plan_init(const gs_scenario *s, const gs_mesh *mesh, uint64_t rank, uint64_t microbatches,
                        gs_shard_plan *plan)
{
    const gs_strategy *st = &s->strategy;
    uint64_t dp = mesh->size[GS_DIM_DP];
    memset(plan, 0, sizeof *plan);
    plan->wb = gs_precision_bytes(st->precision);
    plan->gb = gs_grad_bytes(st);
    plan->gwb = plan->gather_wb = plan->wb;
    if (st->fp8 != GS_FP8_OFF) {
        plan->gwb = st->fp8_params ? 2 : plan->wb + 2;
        plan->gather_wb = st->fp8_params ? 1 : plan->wb;
        plan->fp8_cache = st->fp8_params ? 0 : 2;
    }
    plan->mixed = st->precision != GS_PREC_FP32;
    plan->microbatches = microbatches ? microbatches : 1;
    plan->N = dp;
    plan->R = 1;
    plan->ep = mesh->ep ? mesh->ep : 1;
    plan->expert_split = gs_mesh_expert_split(mesh);
    plan->edp = gs_mesh_edp_size(mesh);
    if (st->sharding == GS_SHARD_HYBRID_SHARD) {
        plan->N = gs_mesh_group_local_size(mesh, GS_DIM_DP, rank);
        plan->R = dp / plan->N;
    }
    int fsdp = gs_sharding_is_fsdp(st->sharding) && st->sharding != GS_SHARD_NO_SHARD;
    plan->shard_grads = gs_sharding_shards_grads(st->sharding) && plan->N > 1;
    plan->shard_opt = gs_sharding_shards_optimizer(st->sharding) && plan->N > 1;
    plan->stored_sharded = fsdp && plan->N > 1;
    plan->gather_root = plan->stored_sharded;
    int keep = st->sharding == GS_SHARD_GRAD_OP || !st->reshard_after_forward;
    plan->gather_all = plan->stored_sharded && keep;
    plan->gather_per_pass = plan->stored_sharded && !keep;
    plan->prefetch_bwd = st->prefetch == GS_PREFETCH_BACKWARD_PRE ? 1 : st->prefetch == GS_PREFETCH_BACKWARD_POST ? 2 : 0;
    plan->prefetch_fwd = st->forward_prefetch ? 1 : 0;
    plan->sync_every = st->grad_sync == GS_GRAD_SYNC_EVERY || !gs_sharding_allows_no_sync(st->sharding) ||
                       (st->grad_sync == GS_GRAD_SYNC_AUTO && plan->shard_grads) || plan->microbatches == 1;
    plan->hold_full_grads = plan->shard_grads && !plan->sync_every;
    plan->transient_grads = plan->shard_grads && plan->sync_every;
    plan->grad_allreduce = st->sharding == GS_SHARD_NO_SHARD;
    plan->bucketed = !fsdp;
    plan->ag_after_optimizer = !fsdp && plan->shard_opt;
    plan->offload = st->offload;
}

/* ---- the states resident for the step ----------------------------------------------------------- */

static const char *prec_label(gs_precision p)
{
    return p == GS_PREC_FP32 ? "fp32" : gs_precision_name(p);
}

/* The states resident for the whole step (params, master, Adam m and v, gradients, the no_sync
 * gradient, the workspace) and their explain lines; CPU offload moves some to the host. */
void gs__ledger_stage_states(stage_build *b)
{
    const gs_strategy *st = &b->s->strategy;
    const gs_shard_plan *plan = &b->plan;
    calc *c = b->c;
    gs_ledger_rank *r = b->r;
    const char *pl = prec_label(st->precision);
    uint64_t P = b->part.params, N = plan->N, wb = plan->wb, gb = plan->gb;
    uint64_t p_el = plan->stored_sharded ? b->shard : P;
    uint64_t g_el = plan->shard_grads ? b->shard : P;
    uint64_t o_el = plan->shard_opt ? b->shard : P;
    b->mem_params = mul(c, p_el, wb, "params");
    /* FP8: Transformer Engine's cached FP8 weights and their transposes, held across the
     * step's micro-batches (FSDP's gathered units carry theirs: plan->gwb) */
    uint64_t cache = plan->stored_sharded ? 0 : mul(c, b->nonroot, plan->fp8_cache, "fp8 weights");
    b->mem_master = mul(c, o_el, gs_master_bytes(st), "master");
    uint64_t mv = gs_adam_state_bytes(st) / 2; /* per moment */
    b->mem_m = mul(c, o_el, mv, "adam m"), b->mem_v = mul(c, o_el, mv, "adam v");
    b->mem_g = mul(c, g_el, gb, "grads");
    r->state_bytes = add(c, add(c, add(c, b->mem_params, b->mem_master, "states"), add(c, b->mem_m, b->mem_v, "states"),
                                "states"), b->mem_g, "states");
    gs__ledger_line_add(c, r, "params", b->mem_params,
                        "%s %s: %" PRIu64 " elements x %" PRIu64 " B (P=%" PRIu64 " on stage %" PRIu64
                        ", tp slice 1/%" PRIu64 "%s)", pl, plan->stored_sharded ? "shard" : "full", p_el, wb, P,
                        b->stage, b->tp, plan->stored_sharded ? ", padded shard of each FSDP unit over N" : "");
    if (cache) {
        b->mem_params = add(c, b->mem_params, cache, "params");
        r->state_bytes = add(c, r->state_bytes, cache, "states");
        gs__ledger_line_add(c, r, "fp8 weights", cache, "FP8 copy and transpose of the blocks' %" PRIu64
                            " parameters x 2 B, cached across micro-batches (precision fp8)", b->nonroot);
    }
    if (plan->mixed)
        gs__ledger_line_add(c, r, "master", b->mem_master, "%s %s: %" PRIu64 " x %" PRIu64 " B",
                            gs_master_bytes(st) == 2 ? "fp32 remainders (precision-aware optimizer)" : "fp32",
                            plan->shard_opt ? "shard" : "full", o_el, gs_master_bytes(st));
    gs__ledger_line_add(c, r, "adam_m", b->mem_m, "%s %s: %" PRIu64 " x %" PRIu64 " B", mv == 2 ? "bf16" : "fp32",
                        plan->shard_opt ? "shard" : "full", o_el, mv);
    gs__ledger_line_add(c, r, "adam_v", b->mem_v, "%s %s: %" PRIu64 " x %" PRIu64 " B", mv == 2 ? "bf16" : "fp32",
                        plan->shard_opt ? "shard" : "full", o_el, mv);
    gs__ledger_line_add(c, r, "grads", b->mem_g, "%s %s: %" PRIu64 " x %" PRIu64 " B",
                        st->grad_dtype >= 0 ? gs_precision_name((gs_precision)st->grad_dtype) : pl,
                        plan->shard_grads ? "shard" : "full", g_el, gb);
    if (plan->shard_opt)
        gs__ledger_line_add(c, r, "shard group", 0, "N = %" PRIu64 " ranks (%s)%s, %zu FSDP units%s", N,
                            st->sharding == GS_SHARD_HYBRID_SHARD ? "the DP ranks on this node" : "the DP group",
                            st->sharding == GS_SHARD_HYBRID_SHARD ? ", replicated across R nodes" : "",
                            b->part.nunits,
                            b->part.has_root ? " (the last is the root: embedding, head, stray params)" : "");
    if (plan->offload) {
        uint64_t host = add(c, add(c, b->mem_master, add(c, b->mem_m, b->mem_v, "host"), "host"),
                            plan->stored_sharded ? add(c, b->mem_params, b->mem_g, "host") : 0, "host");
        r->host_bytes = host;
        gs__ledger_line_add(c, r, "host (offload)", host,
                            "%s master + m + v moved to host memory; the optimizer runs on the CPU",
                            plan->stored_sharded ? "param and grad shards," : "");
        b->mem_master = b->mem_m = b->mem_v = 0;
        if (plan->stored_sharded)
            b->mem_params = b->mem_g = 0;
    }
    b->mem_hold = 0;
    if (plan->hold_full_grads) {
        b->mem_hold = mul(c, P, gb, "grads");
        gs__ledger_line_add(c, r, "grads (no_sync)", b->mem_hold,
                            "full gradient accumulated unsharded until the last of %" PRIu64
                            " micro-batches: P x %" PRIu64 " B", b->mb, gb);
    }
    uint64_t comms = 0, ub;
    for (int d = 0; d < GS_DIM_COUNT; d++)
        comms += b->mesh->size[d] > 1;
    b->ws = gs_workspace_bytes(b->s, b->mesh, &ub);
    gs__ledger_line_add(c, r, "workspace", b->ws, "estimate: cuBLAS 32 MiB + NCCL buffers 128 MiB x %" PRIu64
                        " communicators (dims of size > 1)%s", comms,
                        ub ? " + Transformer Engine userbuffers 10 x s*b*h (tp_comm_overlap)" : "");
}

uint64_t gs_workspace_bytes(const gs_scenario *s, const gs_mesh *mesh, uint64_t *ub_bytes)
{
    uint64_t comms = 0, ub = 0, tokens, x;
    for (int d = 0; d < GS_DIM_COUNT; d++)
        comms += mesh->size[d] > 1;
    const gs_strategy *st = &s->strategy;
    if (st->tp_comm_overlap && st->sequence_parallel && mesh->size[GS_DIM_TP] > 1 &&
        (gs_mul_u64(s->model.seq, s->batch.micro_seqs, &tokens) != 0 || gs_mul_u64(tokens, s->model.hidden, &x) != 0 ||
         gs_mul_u64(x, 10 * gs_precision_bytes(st->precision), &ub) != 0))
        ub = UINT64_MAX;
    if (ub_bytes)
        *ub_bytes = ub;
    uint64_t base = (32ull << 20) + comms * (128ull << 20);
    return ub > UINT64_MAX - base ? UINT64_MAX : base + ub;
}
