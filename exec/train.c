/* The training program of the exec backend: its options, create and destroy, and the loss. What
 * each event does is planned from its role (exec/train_plan.c) and carried out by one file per
 * concern (exec/train_internal.h lists them). */
#include <stdlib.h>
#include <string.h>

#include "exec/p2p_groups.h"
#include "exec/train_internal.h"

void gs_train_opts_defaults(gs_train_opts *o)
{
    o->seed = 1234;
    o->lr = 1e-3f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->init_std = 0.02f;
    o->p2p_groups = 1;
    o->fp8_tp_shards = 0;
    o->fp8_cp_shards = 0;
    o->fp8_cp_accumulate = 0;
    o->fp8_amax_replicas = 0;
    o->fp8_amax_ep = 0;
    o->fp8_cp_ranks = 0;
    o->fp8_cp_a2a = 0;
}

/* What the host program does not run in a MoE model (NULL: it runs it). */
static const char *moe_unsupported(const gs_scenario *s, const gs_mesh *mesh, char *which, size_t len)
{
    const gs_model *m = &s->model;
    const gs_moe *moe = &m->moe;
    uint64_t tp = mesh->size[GS_DIM_TP], ep = mesh->ep ? mesh->ep : 1;
    uint64_t ef = moe->expert_ffn ? moe->expert_ffn : m->ffn;
    if (ef % tp || (moe->shared_experts * ef) % tp || moe->experts % ep) {
        snprintf(which, len, "MoE blocks need expert_ffn (%llu) and the shared experts' width (%llu) divisible by tp "
                 "(%llu), and experts (%llu) by ep (%llu)", (unsigned long long)ef,
                 (unsigned long long)(moe->shared_experts * ef), (unsigned long long)tp,
                 (unsigned long long)moe->experts, (unsigned long long)ep);
        return which;
    }
    if (m->bias)
        return "MoE blocks with biases (bias: true) are simulated, not executed";
    if (m->dropout)
        return "MoE blocks with dropout are simulated, not executed";
    if (s->strategy.tp_comm_overlap && tp > 1)
        return "MoE blocks under tp_comm_overlap are simulated, not executed";
    if (tp > 1 && !s->strategy.sequence_parallel)
        return "MoE blocks under tp > 1 need sequence_parallel: true (Megatron-Core's requirement)";
    if (s->strategy.wrap != GS_WRAP_LAYER && ep > 1)
        return "expert parallelism runs under wrap: layer";
    if (ep > 1 && s->strategy.sharding != GS_SHARD_NO_SHARD && s->strategy.sharding != GS_SHARD_ZERO1) {
        snprintf(which, len, "expert parallelism with sharding %s is simulated, not executed (exec runs it with "
                 "no_shard or zero1)", gs_sharding_name(s->strategy.sharding));
        return which;
    }
    if (s->strategy.moe_dispatcher == GS_MOE_ALLGATHER)
        return "the allgather token dispatcher is simulated, not executed (exec runs moe_dispatcher: alltoall)";
    if (s->strategy.moe_dispatcher == GS_MOE_FLEX)
        return "the flex (DeepEP) token dispatcher is simulated, not executed (exec runs moe_dispatcher: alltoall)";
    if (s->strategy.ep_overlap)
        return "overlap_moe_expert_parallel_comm (the combined 1F1B schedule) is simulated, not executed";
    if (mesh->etp) {
        snprintf(which, len, "expert tensor parallelism below tp (etp=%llu, tp=%llu) is simulated, not executed",
                 (unsigned long long)mesh->etp, (unsigned long long)tp);
        return which;
    }
    return NULL;
}

static gs_status check_supported(const gs_scenario *s, const gs_mesh *mesh, gs_error *err)
{
    const gs_model *m = &s->model;
    const gs_strategy *st = &s->strategy;
    uint64_t tp = mesh->size[GS_DIM_TP], cp = mesh->cp > 1 ? mesh->cp : 1;
    const char *why = NULL;
    char which[320];
    /* the first condition that fails, with its numbers */
    const struct { const char *name; uint64_t v; } split[] = {
        {"heads", m->heads}, {"kv_heads", m->kv_heads}, {"ffn", m->ffn}, {"vocab", m->vocab}};
    for (size_t i = 0; i < sizeof split / sizeof split[0] && !why && !m->nominal_params; i++)
        if (split[i].v % tp) {
            snprintf(which, sizeof which, "model.%s = %llu is not divisible by tp = %llu (heads, kv_heads, ffn and "
                     "vocab must be)", split[i].name, (unsigned long long)split[i].v, (unsigned long long)tp);
            why = which;
        }
    if (why)
        ;
    else if (m->nominal_params)
        why = "a nominal model (params: N) has no shapes to run";
    else if (m->pos == GS_POS_ROPE && m->head_dim % 2) {
        snprintf(which, sizeof which, "model.head_dim = %llu is odd; rope rotates pairs of dimensions",
                 (unsigned long long)m->head_dim);
        why = which;
    } else if (st->wrap == GS_WRAP_MIN_PARAMS)
        why = "wrap: min_params splits blocks; the host program supports wrap layer or model";
    else if (st->sequence_parallel && tp > 1 && (s->batch.micro_seqs * m->seq / cp) % tp)
        why = "sequence parallelism needs micro-batch tokens (per CP rank) divisible by tp";
    else if (cp > 1 && m->dropout)
        why = "dropout under context parallelism: the hidden sites' masks are drawn for contiguous token "
              "rows, and a CP rank's rows are two chunks of each sequence (run dropout: false, or cp: 1)";
    else if (cp > 1 && st->cp_comm == GS_CP_A2A && ((m->heads / tp) % cp || (m->kv_heads / tp) % cp)) {
        snprintf(which, sizeof which, "cp_comm a2a splits each rank's %llu heads and %llu KV heads over cp = %llu",
                 (unsigned long long)(m->heads / tp), (unsigned long long)(m->kv_heads / tp),
                 (unsigned long long)cp);
        why = which;
    } else if (cp > 1 && st->cp_comm == GS_CP_A2A_P2P &&
               ((m->heads / tp) % gs_mesh_cp_a2a(mesh) || (m->kv_heads / tp) % gs_mesh_cp_a2a(mesh))) {
        snprintf(which, sizeof which, "cp_comm a2a+p2p splits each rank's %llu heads and %llu KV heads over "
                 "cp_a2a = %llu", (unsigned long long)(m->heads / tp), (unsigned long long)(m->kv_heads / tp),
                 (unsigned long long)gs_mesh_cp_a2a(mesh));
        why = which;
    } else if (m->mtp_layers)
        why = "multi-token prediction modules (model.mtp_layers) are simulated, not executed";
    else if (st->adam_bf16 || st->precision_aware)
        why = "the precision-aware optimizer (its master remainders, bf16 moments) is simulated, not executed "
              "(exec keeps an fp32 master, m and v)";
    else if (st->recompute == GS_RECOMPUTE_OP)
        why = "per-op selective checkpointing (recompute: op) is simulated, not executed (exec runs none, "
              "selective or full)";
    else if (gs_strategy_recompute_modules(st) & ~(uint32_t)GS_RC_CORE_ATTN) {
        char mods[120];
        gs_recompute_modules_format(gs_strategy_recompute_modules(st), ", ", mods, sizeof mods);
        snprintf(which, sizeof which, "selective recompute of [%s] is simulated, not executed (exec recomputes "
                 "core_attn, Megatron's default, or whole blocks under recompute: full)", mods);
        why = which;
    }
    else if (m->moe.experts && cp > 1)
        why = "mixture-of-experts blocks with context parallelism are not in exec's contract (run cp: 1)";
    else if (m->moe.experts)
        why = moe_unsupported(s, mesh, which, sizeof which);
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "%s: exec: %s", s->path, why);
    return GS_OK;
}


/* The p2p plan, once the ranks are planned (and on destroy). */
static void free_lead(gs_train *t)
{
    if (t->lead)
        for (size_t i = 0; i < t->nr; i++)
            free(t->lead[i]);
    free(t->lead);
    t->lead = NULL;
}

void gs_train_destroy(gs_train *t)
{
    if (!t)
        return;
    if (t->r)
        for (size_t i = 0; i < t->nr; i++)
            gs__train_rank_fini(t, &t->r[i], &t->sch->ranks[i]);
    free(t->r);
    free_lead(t);
    free(t);
}

/* The p2p groups of every rank (exec/p2p_groups.h), with receives hoisted where sends wait for
 * their receivers:
 * on a driver flagged p2p_rendezvous (NCCL's sends), and on the host driver under
 * GRIDSTEP_HOST_P2P=rendezvous, which shows on the CPU what such a driver would do. */
static gs_status plan_groups(gs_train *t, gs_error *err)
{
    int rendezvous = t->ops->p2p_rendezvous || (t->ops->sends_wait && t->ops->sends_wait(t->drv));
    if (!(t->lead = calloc(t->nr ? t->nr : 1, sizeof *t->lead)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    for (size_t i = 0; i < t->nr; i++)
        if (!(t->lead[i] = calloc(t->sch->ranks[i].nevents ? t->sch->ranks[i].nevents : 1, sizeof *t->lead[i])))
            return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    gs_status rc = gs_p2p_groups_plan(t->sch, t->p2p_groups, rendezvous, t->lead, &t->hoisted_recvs, err);
    if (rc == GS_ERR_UNSUPPORTED)
        gs_error_prefix(err, "exec: the %s driver's sends wait for their receivers%s", t->ops->name,
                        t->ops->p2p_rendezvous ? " (NCCL's are blocking)" : " (GRIDSTEP_HOST_P2P=rendezvous)");
    return rc;
}

gs_status gs_train_create(const gs_scenario *s, const gs_schedule *sch, const gs_driver_ops *ops, gs_drv *drv,
                          gs_dispatch *disp, const gs_train_opts *o, gs_train **out, gs_error *err)
{
    *out = NULL;
    gs_status rc = check_supported(s, &sch->mesh, err);
    if (rc == GS_OK)
        rc = gs_train_fp8_check(s, &sch->mesh, ops, o, err);
    if (rc != GS_OK)
        return rc;
    if (sch->nranks != sch->mesh.world)
        return gs_error_set(err, GS_ERR_INPUT, "exec: the schedule must hold every rank (build it exact)");
    gs_train *t = calloc(1, sizeof *t);
    if (!t)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    t->s = s;
    t->sch = sch;
    t->ops = ops;
    t->drv = drv;
    t->disp = disp;
    if (o)
        t->o = *o;
    else
        gs_train_opts_defaults(&t->o);
    const gs_model *m = &s->model;
    t->tp = sch->mesh.size[GS_DIM_TP];
    t->mbs = sch->microbatches;
    t->vstages = gs_strategy_chunks(&s->strategy, sch->mesh.size[GS_DIM_PP]);
    t->b = s->batch.micro_seqs;
    t->seq = m->seq;
    t->cp = sch->mesh.cp > 1 ? sch->mesh.cp : 1;
    t->sl = t->seq / t->cp;
    t->cp_a2a = gs_mesh_cp_a2a(&sch->mesh);
    t->T = t->b * t->sl;
    t->sp = s->strategy.sequence_parallel && t->tp > 1;
    t->Tl = t->sp ? t->T / t->tp : t->T;
    t->ovl = s->strategy.tp_comm_overlap && t->sp;
    if (t->ovl && (!ops->all_gather_ring || !ops->mark || !ops->wait_mark)) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED, "exec: the %s driver cannot run tp_comm_overlap's chunked "
                          "overlaps (no all_gather_ring, mark or wait_mark); set tp_comm_overlap: false", ops->name);
        goto out;
    }
    t->flash = s->strategy.flash_attention != 0;
    t->fp8 = s->strategy.fp8 != GS_FP8_OFF;
    t->vparts = t->tp > 1 ? t->tp : t->fp8 && t->o.fp8_tp_shards > 1 ? t->o.fp8_tp_shards : 1;
    if (t->flash && (!ops->k.attn_fwd_flash || !ops->k.attn_bwd_flash)) {
        rc = gs_error_set(err, GS_ERR_UNSUPPORTED,
                          "exec: the %s driver has no flash attention kernels; write flash_attention: false in the "
                          "scenario's strategy to run the kernels that keep the probabilities", ops->name);
        goto out;
    }
    t->h = m->hidden;
    t->hd = m->head_dim;
    t->a_t = m->heads / t->tp;
    t->kv_t = m->kv_heads / t->tp;
    t->f_t = m->ffn / t->tp;
    t->v_t = m->vocab / t->tp;
    t->nqkv = (t->a_t + 2 * t->kv_t) * t->hd;
    t->ln = m->norm == GS_NORM_LAYERNORM;
    t->norm_bias = t->ln || m->bias; /* as engine/partition.c counts the norms */
    t->attn_bias = m->bias != 0;
    t->gelu = m->mlp == GS_MLP_GELU;
    t->mlp_bias = t->gelu && m->bias;
    t->rope = m->pos == GS_POS_ROPE;
    t->up_n = t->gelu ? t->f_t : 2 * t->f_t;
    t->f_max = t->f_t;
    if (m->moe.experts) { /* a MoE block's shared experts may be wider than the dense MLP */
        uint64_t fs = m->moe.shared_experts * (m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn) / t->tp;
        t->f_max = fs > t->f_max ? fs : t->f_max;
    }
    t->attn_saved = t->b * t->a_t * t->seq * (t->flash ? 1 : t->seq);
    t->layers = m->layers;
    t->recompute = s->strategy.recompute;
    if (m->dropout) {
        t->adrop_thr = gs_dropout_threshold(m->attention_dropout);
        t->hdrop_thr = gs_dropout_threshold(m->hidden_dropout);
        /* the kept share is exactly 1 - threshold / 2^24: scaled by its inverse, unbiased */
        t->adrop_scale = (float)(1.0 / (1.0 - t->adrop_thr / 16777216.0));
        t->hdrop_scale = (float)(1.0 / (1.0 - t->hdrop_thr / 16777216.0));
    }
    t->p2p_groups = t->o.p2p_groups;
    t->nr = sch->nranks;
    if (!(t->r = calloc(t->nr, sizeof *t->r))) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    if ((rc = plan_groups(t, err)) != GS_OK)
        goto out;
    /* a multi-process run: the ranks of other processes stay empty here */
    for (size_t i = 0; i < t->nr && rc == GS_OK; i++)
        if (gs_dispatch_is_local(disp, i))
            rc = gs__train_rank_init(t, disp, i, err);
    free_lead(t);
    for (size_t i = 0; i < t->nr && rc == GS_OK; i++)
        if (gs_dispatch_is_local(disp, i))
            rc = t->ops->stream_sync(t->drv, gs_dispatch_stream(disp, i, GS_STREAM_COMPUTE), err);
out:
    if (rc != GS_OK) {
        gs_train_destroy(t);
        return rc;
    }
    *out = t;
    return GS_OK;
}

void gs_train_begin_step(gs_train *t)
{
    t->step++;
    t->epoch++;
    for (size_t i = 0; i < t->nr; i++)
        t->r[i].loss_sum = 0;
}

double gs_train_loss_sum(const gs_train *t)
{
    double sum = 0;
    for (size_t i = 0; i < t->nr; i++)
        if (t->r[i].last && t->r[i].tp_pos == 0)
            sum += t->r[i].loss_sum;
    return sum;
}

double gs_train_loss_tokens(const gs_train *t)
{
    return (double)t->s->batch.global_seqs * (double)t->seq;
}

double gs_train_loss(const gs_train *t)
{
    return gs_train_loss_sum(t) / gs_train_loss_tokens(t);
}

size_t gs_train_p2p_hoisted(const gs_train *t)
{
    return t->hoisted_recvs;
}

uint64_t gs_train_step(const gs_train *t)
{
    return t->step;
}

void gs_train_set_step(gs_train *t, uint64_t step)
{
    t->step = step;
}

