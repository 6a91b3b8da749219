/* Schedule builder, compute side: the ops of one transformer block (forward, recompute,
 * backward), the embedding and the head, with the tensor-parallel collectives Megatron places
 * between them (all-reduces; all-gather + reduce-scatter pairs under sequence parallelism).
 *
 * GEMM shapes per micro-batch of T = b s tokens on one TP rank (a_t = heads / tp, kv_t = ceil(kv
 * heads / tp), f_t = ffn / tp): QKV m=T n=(a_t + 2 kv_t) hd k=h; attention batch=b a_t, m=n=s,
 * k=hd (QK^T and PV, counted as full s x s as Megatron's FLOP formula does); out-proj m=T n=h
 * k=a_t hd; MLP up m=T n=2 f_t (SwiGLU) or f_t k=h; down m=T n=h k=f_t; LM head m=T n=V/tp k=h.
 * A backward GEMM op does twice its forward FLOPs (data and weight gradients). */
#include <stddef.h>
#include <string.h>

#include "engine/build_internal.h"
#include "engine/build_ops.h"
#include "engine/roles.h"

void gs__shapes_init(const gs_bctx *x, shapes *sh)
{
    const gs_model *m = &x->s->model;
    sh->b = x->s->batch.micro_seqs;
    sh->cp = x->mesh->cp ? x->mesh->cp : 1;
    sh->s_full = m->seq;
    sh->s = m->seq / sh->cp;
    sh->T = sh->b * sh->s;
    sh->h = m->hidden;
    sh->hd = m->head_dim;
    sh->attn_k = m->head_dim + m->mla.rope_head_dim / 2;
    sh->a_t = m->heads / x->tp;
    sh->kv_t = ceil_div(m->kv_heads, x->tp);
    sh->f_t = m->ffn / x->tp;
    sh->v_t = ceil_div(m->vocab, x->tp);
    sh->e = x->s->strategy.precision == GS_PREC_FP32 ? 4 : 2;
    sh->swiglu = m->mlp == GS_MLP_SWIGLU;
    const gs_strategy *st = &x->s->strategy;
    sh->fused = gs_framework_fused(gs_framework_resolve(st->framework, (int)st->sharding), st->compile);
    sh->norm_bytes = gs_norm_bytes_per_element(sh->fused, m->norm == GS_NORM_RMSNORM, sh->e, m->dropout);
    sh->act_bytes = gs_act_bytes_per_element(sh->fused, sh->swiglu, sh->e);
    sh->sp = x->s->strategy.sequence_parallel && x->tp > 1;
    /* PyTorch's tensor parallelism (DTensor, as torchtitan applies it to [batch, seq, hidden]
     * activations) gathers and scatters the sequence dim 1: all_gather_tensor with gather_dim 1
     * chunks the gathered buffer and concatenates it again, reduce_scatter_tensor with
     * scatter_dim 1 does the same before the collective (torch.distributed._functional_
     * collectives): a copy of the whole T x h tensor, read and written, beside each of a half
     * block's two exchanges. Charged to the norm event that sits between them (per norm element,
     * T h / tp of them: 2 copies x 2 x e x tp). Megatron keeps [seq, batch, hidden] and exchanges
     * dim 0, with no copy. */
    if (sh->sp && gs_framework_resolve(st->framework, (int)st->sharding) != GS_FW_MEGATRON)
        sh->norm_bytes += 4 * sh->e * x->tp;
}


/* ---- scratch: the buffers the TP collectives share with the compute stream ------------------------
 *
 * Per role and direction, the scratch tensors (gs_scratch) an event reads and writes: the
 * backward's gradient buffers of a block, the embedding's forward partial sums and backward
 * gradient, the head's input gradient. Each is one buffer reused pass after pass, so every wait
 * between a pass's last reader and the next pass's writer on another stream must follow from the
 * schedule's dependencies and stream order: structural validation checks it. Two part-specific
 * exceptions (tp_comm_overlap): the GEMM part beside a ring all-gather (part 1 of the backward's
 * MLP down and out-projection) takes the gathered chunks as the gather marks them, a progress
 * protocol inside the pair, and does not list the gathered tensor; the weight-gradient part (part
 * 2 of the backward's MLP up and QKV) writes no reduced gradient. */
#define SB(k) ((uint16_t)(1u << GS_SCRATCH_##k))
typedef struct scratch_use {
    uint8_t role, bwd;
    uint16_t reads, writes; /* bit k: gs_scratch k */
} scratch_use;

static const scratch_use scratch_uses[] = {
    {GS_ROLE_TP_MLP_OUT, 1, SB(BLOCK_DY), SB(BLOCK_DY)},
    {GS_ROLE_MLP_DOWN, 1, SB(BLOCK_DY), 0},
    {GS_ROLE_MLP_UP, 1, 0, SB(BLOCK_DMLP_IN)},
    {GS_ROLE_TP_MLP_IN, 1, SB(BLOCK_DMLP_IN), SB(BLOCK_DMLP_IN)},
    {GS_ROLE_MLP_NORM, 1, SB(BLOCK_DMLP_IN) | SB(BLOCK_DY), SB(BLOCK_DATTN_OUT)},
    {GS_ROLE_TP_ATTN_OUT, 1, SB(BLOCK_DATTN_OUT), SB(BLOCK_DATTN_FULL)},
    {GS_ROLE_OPROJ, 1, SB(BLOCK_DATTN_OUT) | SB(BLOCK_DATTN_FULL), 0},
    {GS_ROLE_QKV, 1, 0, SB(BLOCK_DATTN_IN)},
    {GS_ROLE_MLA_UP, 1, 0, SB(BLOCK_DATTN_IN)},   /* latent attention: the data gradients into x */
    {GS_ROLE_MLA_DOWN, 1, 0, SB(BLOCK_DATTN_IN)},
    {GS_ROLE_TP_ATTN_IN, 1, SB(BLOCK_DATTN_IN), SB(BLOCK_DATTN_IN)},
    {GS_ROLE_ATTN_NORM, 1, SB(BLOCK_DATTN_IN) | SB(BLOCK_DATTN_OUT), 0},
    {GS_ROLE_EMBED, 0, 0, SB(EMBED_FWD)},
    {GS_ROLE_TP_EMBED, 0, SB(EMBED_FWD), 0},
    {GS_ROLE_TP_EMBED, 1, 0, SB(EMBED_DY)},
    {GS_ROLE_EMBED, 1, SB(EMBED_DY), 0},
    {GS_ROLE_HEAD, 1, 0, SB(HEAD_DX)},
    {GS_ROLE_TP_HEAD_IN, 1, SB(HEAD_DX), SB(HEAD_DX)},
    {GS_ROLE_HEAD_NORM, 1, SB(HEAD_DX), 0},
};

gs_status gs__scratch_tensors(gs_bctx *x)
{
    for (int k = 0; k < GS_SCRATCH_COUNT; k++)
        x->scratch_t[k] = GS_NO_ID;
    if (x->tp <= 1)
        return GS_OK;
    shapes sh;
    gs__shapes_init(x, &sh);
    for (int k = 0; k < GS_SCRATCH_COUNT; k++) {
        int need = k <= GS_SCRATCH_BLOCK_DATTN_IN || (k != GS_SCRATCH_HEAD_DX ? x->stage == 0 : x->last);
        /* one full-sequence activation [T, h] each */
        gs_tensor t = {.kind = GS_T_SCRATCH, .bytes = sh.T * sh.h * sh.e, .layer = GS_LAYER_NONE, .unit = (uint32_t)k,
                       .resident = 1};
        gs_status rc = need ? gs__tensor(x, &t, &x->scratch_t[k]) : GS_OK;
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* The scratch tensors event b reads and writes, from scratch_uses. */
static void scratch_links(const gs_bctx *x, gs_evb *b)
{
    int bwd = b->e.phase == GS_PHASE_BWD;
    for (size_t i = 0; i < sizeof scratch_uses / sizeof scratch_uses[0]; i++) {
        const scratch_use *u = &scratch_uses[i];
        if (u->role != b->e.role || u->bwd != bwd)
            continue;
        uint16_t rd = u->reads, wr = u->writes;
        if (bwd && b->e.part == 1 && b->e.role == GS_ROLE_MLP_DOWN)
            rd &= (uint16_t)~SB(BLOCK_DY);
        if (bwd && b->e.part == 1 && b->e.role == GS_ROLE_OPROJ)
            rd &= (uint16_t)~SB(BLOCK_DATTN_FULL);
        if (bwd && b->e.part == 2 && (b->e.role == GS_ROLE_MLP_UP || b->e.role == GS_ROLE_QKV))
            wr = 0;
        for (int k = 0; k < GS_SCRATCH_COUNT; k++) {
            if (rd & (1u << k))
                gs__evb_add(b, GS_LINK_READS, x->scratch_t[k]);
            if (wr & (1u << k))
                gs__evb_add(b, GS_LINK_WRITES, x->scratch_t[k]);
        }
    }
}

static gs_status flush(pass *p)
{
    if (!p->have_pending)
        return GS_OK;
    scratch_links(p->x, &p->pending);
    uint32_t id;
    gs_status rc = gs__evb_emit(p->x, &p->pending, &id);
    if (rc == GS_OK)
        p->prev = id;
    p->have_pending = 0;
    return rc;
}

static void pass_init(pass *p, gs_bctx *x, gs_phase phase, int32_t layer, uint32_t mb, const gs_layer_io *io)
{
    memset(p, 0, offsetof(pass, pending)); /* pending is written whole before it is read */
    p->have_pending = 0;
    p->x = x;
    p->phase = phase;
    p->layer = layer;
    p->mb = mb;
    p->io = io;
    p->prev = GS_NO_ID;
}

/* Queues the event built in p->pending (see pending_begin); the first one of the pass carries the
 * pass's allocations, reads and deps. */
static gs_status pass_event(pass *p)
{
    gs_evb *b = &p->pending;
    gs__evb_add(b, GS_LINK_DEPS, p->prev);
    if (!p->first_done) {
        for (size_t i = 0; i < p->io->ndeps; i++)
            gs__evb_add(b, GS_LINK_DEPS, p->io->deps[i]);
        for (size_t i = 0; i < p->io->nalloc; i++)
            gs__evb_add(b, GS_LINK_ALLOCS, p->io->alloc[i]);
        for (size_t i = 0; i < p->io->nreads; i++)
            gs__evb_add(b, GS_LINK_READS, p->io->reads[i]);
        p->first_done = 1;
    }
    p->have_pending = 1;
    return GS_OK;
}

/* Emits the held event and starts the next one in its place (built there: no copy of the 1.3 KB
 * builder). NULL (rc set) when the emit fails. */
static gs_evb *pending_begin(pass *p, gs_event_kind kind, gs_stream stream, gs_status *rc)
{
    if ((*rc = flush(p)) != GS_OK)
        return NULL;
    gs__evb_init(&p->pending, kind, stream, p->phase, p->layer, p->mb);
    return &p->pending;
}

/* Ends the pass: the last event frees what the pass releases. */
static gs_status pass_end(pass *p, uint32_t *last_ev)
{
    if (p->have_pending)
        for (size_t i = 0; i < p->io->nfree; i++)
            gs__evb_add(&p->pending, GS_LINK_FREES, p->io->free[i]);
    gs_status rc = flush(p);
    if (last_ev)
        *last_ev = p->prev;
    return rc;
}


static const gemm_shape no_gemm = {0, 0, 0, 0};

static gs_status compute(pass *p, gs_role role, gs_op op, const gemm_shape *g, double flops, uint64_t bytes)
{
    uint64_t m = g->m, n = g->n, k = g->k, batch = g->batch;
    gs_status rc;
    gs_evb *b = pending_begin(p, GS_EV_COMPUTE, GS_STREAM_COMPUTE, &rc);
    if (!b)
        return rc;
    b->e.op = (uint8_t)op;
    b->e.role = (uint8_t)role;
    b->e.gemm_m = (uint32_t)m;
    b->e.gemm_n = (uint32_t)n;
    b->e.gemm_k = (uint32_t)k;
    b->e.gemm_batch = (uint32_t)batch;
    b->e.flops = flops;
    b->e.bytes = bytes;
    return pass_event(p);
}

/* A GEMM op: forward flops 2 m n k per batch entry; backward twice that. The attention core is
 * two GEMMs of its shape (QK^T and PV), so it counts twice: 4 s^2 hd per head, Megatron's figure.
 * Its bytes: with flash attention only Q, K, V and O (4 s hd per head) touch HBM; without it the
 * s x s scores are written and read twice more (softmax, PV). */
static gs_status gemm(pass *p, gs_role role, gs_op op, const shapes *sh, const gemm_shape *g)
{
    uint64_t m = g->m, n = g->n, k = g->k, batch = g->batch;
    double mul = p->phase == GS_PHASE_BWD ? 2.0 : 1.0;
    double nb = (double)(batch ? batch : 1);
    double flops = mul * 2.0 * (double)m * (double)n * (double)k * nb;
    double bytes = (double)sh->e * (double)(m * k + k * n + m * n) * nb * mul;
    if (op == GS_OP_ATTN) {
        flops *= 2.0;
        double qkvo = 4.0 * (double)m * (double)k, scores = (double)m * (double)n;
        /* per score element without flash attention: the framework's passes
         * (gs_unfused_score_bytes: Megatron's fused scale-mask-softmax 4 e, eager PyTorch more);
         * attention dropout adds a read, a write and a 1-byte mask (2 e + 1) */
        double per_score = gs_unfused_score_bytes(sh->fused, sh->e) +
                           (p->x->s->model.dropout ? 2.0 * (double)sh->e + 1.0 : 0.0);
        bytes = nb * mul * ((double)sh->e * qkvo + (p->x->s->strategy.flash_attention ? 0.0 : per_score * scores));
    }
    return compute(p, role, op, g, flops, (uint64_t)bytes);
}

static gs_status elementwise(pass *p, gs_role role, gs_op op, uint64_t elements, uint64_t bytes_per_element)
{
    double mul = p->phase == GS_PHASE_BWD ? 2.0 : 1.0;
    return compute(p, role, op, &no_gemm, 5.0 * (double)elements * mul,
                   (uint64_t)((double)elements * (double)bytes_per_element * mul));
}

/* The cross-entropy over the rank's T x V/tp logits: the bytes of the strategy's passes
 * (gs_xent_bytes_per_logit: the unfused tensor ops or one fused kernel); 5 FLOPs per logit
 * forward, 10 backward, as every elementwise op here. */
static gs_status loss(pass *p, const shapes *sh)
{
    int bwd = p->phase == GS_PHASE_BWD;
    double logits = (double)sh->T * (double)sh->v_t;
    uint64_t per = gs_xent_bytes_per_logit(p->x->s->strategy.cross_entropy, sh->e, bwd);
    return compute(p, GS_ROLE_LOSS, GS_OP_LOSS, &no_gemm, (bwd ? 10.0 : 5.0) * logits,
                   (uint64_t)(logits * (double)per));
}

/* A collective of `bytes` on the rank's group g (of group_size), on the TP stream (the
 * model-parallel exchanges': TP's, and CP's beside them), queued as the pass's next event. Under
 * overlap_moe_expert_parallel_comm the expert exchanges go to the PP stream: Megatron-Core runs
 * them on its communication stream, apart from the compute stream that issues TP's. */
static gs_status coll_event(pass *p, gs_role role, gs_coll_op op, gs_group_kind g, uint64_t group_size, uint64_t bytes)
{
    gs_bctx *x = p->x;
    gs_status rc;
    const gs_role_info *ri = gs_role_info_of(role);
    gs_stream stream = x->s->strategy.ep_overlap && ri && ri->on_pp ? GS_STREAM_PP : GS_STREAM_TP;
    gs_evb *b = pending_begin(p, GS_EV_COLLECTIVE, stream, &rc);
    if (!b)
        return rc;
    b->e.op = (uint8_t)op;
    b->e.role = (uint8_t)role;
    b->e.group = (uint8_t)g;
    b->e.peer = x->group[g];
    b->e.group_size = group_size;
    b->e.bytes = bytes;
    gs__evb_add(b, GS_LINK_DEPS, p->prev);
    if (!p->first_done) {
        for (size_t i = 0; i < p->io->ndeps; i++)
            gs__evb_add(b, GS_LINK_DEPS, p->io->deps[i]);
        for (size_t i = 0; i < p->io->nalloc; i++)
            gs__evb_add(b, GS_LINK_ALLOCS, p->io->alloc[i]);
        p->first_done = 1;
    }
    p->have_pending = 1;
    return GS_OK;
}

/* A TP collective on the activation X = T h e bytes (AR), or its sequence-parallel halves. */
static gs_status tp_coll(pass *p, gs_role role, gs_coll_op op, const shapes *sh)
{
    gs_bctx *x = p->x;
    if (x->tp <= 1)
        return GS_OK;
    uint64_t X = sh ? sh->T * sh->h * sh->e : 0;
    return coll_event(p, role, op, GS_GROUP_TP, x->tp, op == GS_COLL_ALLREDUCE ? X : x->tp * ceil_div(X, x->tp));
}

/* A TP collective of `bytes` (AG/RS: tp x the padded shard) that is not an activation. */
static gs_status tp_coll_bytes(pass *p, gs_role role, gs_coll_op op, uint64_t bytes)
{
    gs_status rc = tp_coll(p, role, op, NULL);
    if (rc == GS_OK && p->have_pending && p->pending.e.kind == GS_EV_COLLECTIVE)
        p->pending.e.bytes = bytes;
    return rc;
}

/* ---- tensor-parallel communication overlap (strategy.tp_comm_overlap) ----------------------------
 *
 * Megatron-Core's --tp-comm-overlap runs Transformer Engine's userbuffer overlaps around each
 * block's four linear layers (sequence parallelism required). TE's default methods
 * (transformer_engine/pytorch/module/base.py, initialize_ub):
 *   ring_exchange  qkv/fc1 fprop, proj/fc2 dgrad: the all-gathered input is exchanged around the
 *                  TP ring in tp chunks while the GEMM works on the chunk it holds: its own chunk
 *                  first (no wait), the last chunk after the whole gather;
 *   pipeline       proj/fc2 fprop, 4 splits: GEMM chunk i+1 runs while chunk i is
 *                  reduce-scattered; the last chunk's reduce-scatter runs alone;
 *   bulk           qkv/fc1 dgrad + wgrad: the norm output the weight gradient needs (kept
 *                  sequence-sharded) is all-gathered under dgrad, then the data-gradient's
 *                  reduce-scatter runs under the weight-gradient GEMM.
 * gridstep builds each as the fewest events whose dependencies give the pipeline's time with
 * chunks of equal size: ring exchange = (GEMM of tp-1 chunks || all-gather) -> last chunk;
 * pipeline = first chunk -> (the other 3 || reduce-scatter of 3 chunks) -> the last chunk's
 * reduce-scatter; bulk = (dgrad || all-gather) -> (wgrad || reduce-scatter). The collectives
 * keep their bytes, the backward's two re-gathers added (the ledger counts them), and the GEMM
 * parts their FLOPs; a part made of chunks
 * takes the chunk's shape (m = tokens / chunks) for its efficiency, as TE's chunked GEMM calls
 * do. The compute slowed by concurrent communication is the simulator's overlap factor. */
#define GS_UB_PIPELINE_SPLITS 4u

static int tp_overlap(const pass *p, const shapes *sh)
{
    return p->x->s->strategy.tp_comm_overlap && sh->sp;
}

/* The whole op's FLOPs as gemm() counts them (no attention here). */
static double gemm_flops(const pass *p, uint64_t m, uint64_t n, uint64_t k)
{
    return (p->phase == GS_PHASE_BWD ? 2.0 : 1.0) * 2.0 * (double)m * (double)n * (double)k;
}

/* HBM bytes of one GEMM call of m x n x k (operands read, result written): every chunk re-reads
 * the weight. */
static double call_bytes(const shapes *sh, uint64_t m, uint64_t n, uint64_t k)
{
    return (double)sh->e * (double)(m * k + k * n + m * n);
}



/* Starts a GEMM part (part 1) that runs beside the collective just queued (pending) instead of after it:
 * it depends on `before` (the event before the collective) and, when the collective is the
 * pass's first event, on the pass's inputs and reads. *coll is the collective's id. NULL (rc
 * set) when the emit fails. */
static gs_evb *part_beside(pass *p, const gemm_part *g, uint32_t before, int first, uint32_t *coll, gs_status *rc)
{
    gs_evb *b = pending_begin(p, GS_EV_COMPUTE, GS_STREAM_COMPUTE, rc);
    if (!b)
        return NULL;
    uint64_t m = g->m, n = g->n, k = g->k;
    double flops = g->flops, bytes = g->bytes;
    *coll = p->prev;
    b->e.op = (uint8_t)g->op;
    b->e.role = (uint8_t)g->role;
    b->e.part = 1;
    b->e.gemm_m = (uint32_t)m;
    b->e.gemm_n = (uint32_t)n;
    b->e.gemm_k = (uint32_t)k;
    b->e.flops = flops;
    b->e.bytes = (uint64_t)bytes;
    gs__evb_add(b, GS_LINK_DEPS, before);
    if (first) { /* the collective took the pass's allocations; its inputs are this part's too */
        for (size_t i = 0; i < p->io->ndeps; i++)
            gs__evb_add(b, GS_LINK_DEPS, p->io->deps[i]);
        for (size_t i = 0; i < p->io->nreads; i++)
            gs__evb_add(b, GS_LINK_READS, p->io->reads[i]);
    }
    p->have_pending = 1;
    return b;
}

/* An all-gather (role ag_role) of the sequence-parallel activation, and a GEMM part beside it
 * (part_beside); *ag is the gather's id. */
static gs_status gather_beside(pass *p, const shapes *sh, gs_role ag_role, const gemm_part *g, uint32_t *ag)
{
    gs_status rc;
    if ((rc = flush(p)) != GS_OK)
        return rc;
    uint32_t before = p->prev;
    int first = !p->first_done;
    if ((rc = tp_coll(p, ag_role, GS_COLL_ALLGATHER, sh)) != GS_OK)
        return rc;
    return part_beside(p, g, before, first, ag, &rc) ? GS_OK : rc;
}

/* All-gather of the sequence-parallel activation, then the GEMM that consumes it: ring exchange
 * when overlapped. In backward the op's event is dgrad + wgrad; only dgrad is chunked (the weight
 * gradient needs the whole gathered input, so it runs after the gather, with the last chunk). */
static gs_status ag_gemm(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k)
{
    gs_status rc;
    if (!tp_overlap(p, sh))
        return (rc = tp_coll(p, lr->coll, GS_COLL_ALLGATHER, sh)) ? rc
               : gemm(p, lr->gemm, op, sh, &(gemm_shape){sh->T, n, k, 0});
    uint32_t ag;
    uint64_t c = p->x->tp, mc = ceil_div(sh->T, c);
    int bwd = p->phase == GS_PHASE_BWD;
    double flops = gemm_flops(p, sh->T, n, k), chunk = call_bytes(sh, mc, n, k);
    double chunked = (bwd ? 0.5 : 1.0) * (double)(c - 1) / (double)c;
    /* the chunks held before the gather completes: beside the gather, not after it */
    gemm_part g1 = {op, lr->gemm, mc, n, k, flops * chunked, (double)(c - 1) * chunk};
    if ((rc = gather_beside(p, sh, lr->coll, &g1, &ag)) != GS_OK)
        return rc;
    /* the last chunk (backward: with wgrad) once the gather is complete */
    if ((rc = compute(p, lr->gemm, op, &(gemm_shape){bwd ? sh->T : mc, n, k, 0}, flops * (1.0 - chunked),
                      (uint64_t)(chunk + (bwd ? call_bytes(sh, sh->T, n, k) : 0.0)))) != GS_OK)
        return rc;
    p->pending.e.part = 2;
    gs__evb_add(&p->pending, GS_LINK_DEPS, ag);
    return GS_OK;
}

/* The GEMM whose output is reduce-scattered, then the reduce-scatter: pipelined in forward (the
 * first of 4 chunks alone, the other chunks under the previous chunks' reduce-scatter, the last
 * chunk's reduce-scatter alone), bulk in backward: the sequence-parallel input the weight
 * gradient needs is all-gathered again under dgrad (TE's qkv/fc1 dgrad bulk overlap; Megatron
 * keeps only the shard of the norm's output), then dgrad's reduce-scatter runs under wgrad. */
static gs_status gemm_rs(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k)
{
    gs_status rc;
    if (!tp_overlap(p, sh))
        return (rc = gemm(p, lr->gemm, op, sh, &(gemm_shape){sh->T, n, k, 0})) ? rc
               : tp_coll(p, lr->coll, GS_COLL_REDUCE_SCATTER, sh);
    int bwd = p->phase == GS_PHASE_BWD;
    uint64_t c = bwd ? 1 : GS_UB_PIPELINE_SPLITS, mc = bwd ? sh->T : ceil_div(sh->T, c);
    double flops = gemm_flops(p, sh->T, n, k), chunk = call_bytes(sh, mc, n, k);
    double head = bwd ? 0.5 : 1.0 / (double)c;
    uint32_t ag = GS_NO_ID;
    if (bwd) {
        /* the input's all-gather, and dgrad beside it */
        gemm_part g1 = {op, lr->gemm, mc, n, k, flops * head, chunk};
        if ((rc = gather_beside(p, sh, lr->regather, &g1, &ag)) != GS_OK)
            return rc;
    } else if ((rc = compute(p, lr->gemm, op, &(gemm_shape){mc, n, k, 0}, flops * head, (uint64_t)chunk)) != GS_OK) {
        /* the first chunk */
        return rc;
    }
    p->pending.e.part = 1;
    if ((rc = flush(p)) != GS_OK)
        return rc;
    uint32_t g1 = p->prev;
    /* the rest (backward: wgrad, which also waits for the gathered input), after it on the compute
     * stream */
    if ((rc = compute(p, lr->gemm, op, &(gemm_shape){mc, n, k, 0}, flops * (1.0 - head),
                      (uint64_t)((double)(bwd ? 1 : c - 1) * chunk))) != GS_OK)
        return rc;
    p->pending.e.part = 2;
    gs__evb_add(&p->pending, GS_LINK_DEPS, ag);
    if ((rc = flush(p)) != GS_OK)
        return rc;
    uint32_t g2 = p->prev;
    /* the reduce-scatter of every chunk but the last (backward: of dgrad), after the first chunk
     * (dgrad) only */
    p->prev = g1;
    if ((rc = tp_coll(p, lr->coll, GS_COLL_REDUCE_SCATTER, sh)) != GS_OK || bwd)
        return rc;
    uint64_t all = p->pending.e.bytes, tail = all / c;
    p->pending.e.bytes = all - tail;
    p->pending.e.part = 1;
    /* the last chunk's reduce-scatter, after the last chunk */
    if ((rc = flush(p)) != GS_OK)
        return rc;
    p->prev = g2;
    if ((rc = tp_coll(p, lr->coll, GS_COLL_REDUCE_SCATTER, sh)) != GS_OK)
        return rc;
    p->pending.e.bytes = tail;
    p->pending.e.part = 2;
    return GS_OK;
}

/* The attention core with its context-parallel exchanges (engine/build_cp.c; none without CP). */
static gs_status attention(pass *p, const shapes *sh)
{
    if (sh->cp <= 1)
        return gemm(p, GS_ROLE_ATTN_CORE, GS_OP_ATTN, sh, &(gemm_shape){sh->s, sh->s, sh->attn_k, sh->b * sh->a_t});
    return gs__cp_attention(p, sh);
}

/* The four linear layers of a block, with the TP collectives at their inputs and outputs. */
static const linear_roles lr_qkv = {GS_ROLE_QKV, GS_ROLE_TP_ATTN_IN, GS_ROLE_TP_ATTN_REGATHER};
static const linear_roles lr_oproj = {GS_ROLE_OPROJ, GS_ROLE_TP_ATTN_OUT, GS_ROLE_NONE};
static const linear_roles lr_mlp_up = {GS_ROLE_MLP_UP, GS_ROLE_TP_MLP_IN, GS_ROLE_TP_MLP_REGATHER};
static const linear_roles lr_mlp_down = {GS_ROLE_MLP_DOWN, GS_ROLE_TP_MLP_OUT, GS_ROLE_NONE};

/* A dense block's MLP forward after its norm: up (with sequence parallelism's gather), the
 * activation, down (with its reduce-scatter, or the all-reduce without SP). */
static gs_status dense_mlp_forward(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t up_n = sh->swiglu ? 2 * sh->f_t : sh->f_t;
    if ((rc = sh->sp ? ag_gemm(p, sh, GS_OP_MLP_UP, &lr_mlp_up, up_n, sh->h)
                     : gemm(p, GS_ROLE_MLP_UP, GS_OP_MLP_UP, sh, &(gemm_shape){sh->T, up_n, sh->h, 0})) ||
        (rc = elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * sh->f_t, sh->act_bytes)) ||
        (rc = sh->sp ? gemm_rs(p, sh, GS_OP_MLP_DOWN, &lr_mlp_down, sh->h, sh->f_t)
                     : gemm(p, GS_ROLE_MLP_DOWN, GS_OP_MLP_DOWN, sh, &(gemm_shape){sh->T, sh->h, sh->f_t, 0})))
        return rc;
    return sh->sp ? GS_OK : tp_coll(p, GS_ROLE_TP_MLP_OUT, GS_COLL_ALLREDUCE, sh);
}

/* A block's attention half, forward: the norm, QKV (MLA's projections), the core, the output
 * projection with its TP exchange, and the MLP's norm. Under sequence parallelism: all-gather ->
 * GEMM and GEMM -> reduce-scatter pairs (ag_gemm, gemm_rs, overlapped under tp_comm_overlap);
 * otherwise the GEMMs and all-reduces. */
static gs_status attn_forward(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t qkv_n = (sh->a_t + 2 * sh->kv_t) * sh->hd;
    uint64_t hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    int mla = p->x->s->model.mla.kv_lora_rank != 0;
    if ((rc = elementwise(p, GS_ROLE_ATTN_NORM, GS_OP_NORM, hsp, sh->norm_bytes)) ||
        (rc = mla ? gs__mla_qkv_forward(p, sh)
              : sh->sp ? ag_gemm(p, sh, GS_OP_QKV, &lr_qkv, qkv_n, sh->h)
                       : gemm(p, GS_ROLE_QKV, GS_OP_QKV, sh, &(gemm_shape){sh->T, qkv_n, sh->h, 0})) ||
        (rc = attention(p, sh)) ||
        (rc = sh->sp ? gemm_rs(p, sh, GS_OP_OPROJ, &lr_oproj, sh->h, sh->a_t * sh->hd)
                     : gemm(p, GS_ROLE_OPROJ, GS_OP_OPROJ, sh, &(gemm_shape){sh->T, sh->h, sh->a_t * sh->hd, 0})) ||
        (!sh->sp && (rc = tp_coll(p, GS_ROLE_TP_ATTN_OUT, GS_COLL_ALLREDUCE, sh))))
        return rc;
    return elementwise(p, GS_ROLE_MLP_NORM, GS_OP_NORM, hsp, sh->norm_bytes);
}

/* A dense block's MLP backward, before its norm's. */
static gs_status dense_mlp_backward(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t up_n = sh->swiglu ? 2 * sh->f_t : sh->f_t;
    if ((rc = sh->sp ? ag_gemm(p, sh, GS_OP_MLP_DOWN, &lr_mlp_down, sh->h, sh->f_t)
                     : gemm(p, GS_ROLE_MLP_DOWN, GS_OP_MLP_DOWN, sh, &(gemm_shape){sh->T, sh->h, sh->f_t, 0})) ||
        (rc = elementwise(p, GS_ROLE_MLP_ACT, GS_OP_ACT, sh->T * sh->f_t, sh->act_bytes)) ||
        (rc = sh->sp ? gemm_rs(p, sh, GS_OP_MLP_UP, &lr_mlp_up, up_n, sh->h)
                     : gemm(p, GS_ROLE_MLP_UP, GS_OP_MLP_UP, sh, &(gemm_shape){sh->T, up_n, sh->h, 0})))
        return rc;
    return sh->sp ? GS_OK : tp_coll(p, GS_ROLE_TP_MLP_IN, GS_COLL_ALLREDUCE, sh);
}

/* A block's attention half, backward: the MLP's norm, the output projection, the core, QKV (MLA's
 * projections) with the input gradient's TP reduction, the norm. */
static gs_status attn_backward(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t qkv_n = (sh->a_t + 2 * sh->kv_t) * sh->hd;
    uint64_t hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    int mla = p->x->s->model.mla.kv_lora_rank != 0;
    if ((rc = elementwise(p, GS_ROLE_MLP_NORM, GS_OP_NORM, hsp, sh->norm_bytes)) ||
        (rc = sh->sp ? ag_gemm(p, sh, GS_OP_OPROJ, &lr_oproj, sh->h, sh->a_t * sh->hd)
                     : gemm(p, GS_ROLE_OPROJ, GS_OP_OPROJ, sh, &(gemm_shape){sh->T, sh->h, sh->a_t * sh->hd, 0})) ||
        (rc = attention(p, sh)) || (mla && (rc = gs__mla_qkv_backward(p, sh))) ||
        (!mla && (rc = sh->sp ? gemm_rs(p, sh, GS_OP_QKV, &lr_qkv, qkv_n, sh->h)
                              : gemm(p, GS_ROLE_QKV, GS_OP_QKV, sh, &(gemm_shape){sh->T, qkv_n, sh->h, 0}))) ||
        (!mla && !sh->sp && (rc = tp_coll(p, GS_ROLE_TP_ATTN_IN, GS_COLL_ALLREDUCE, sh))))
        return rc;
    return elementwise(p, GS_ROLE_ATTN_NORM, GS_OP_NORM, hsp, sh->norm_bytes);
}

gs_status gs__layer_forward(gs_bctx *x, int64_t local, uint32_t mb, gs_phase phase, const gs_layer_io *io,
                            uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, phase, gs__global_layer(x, local), mb, io);
    gs_status rc = GS_OK;
    if (phase == GS_PHASE_RECOMPUTE && x->s->strategy.recompute == GS_RECOMPUTE_OP)
        return (rc = gs__recompute_op(&p, &sh)) ? rc : pass_end(&p, last_ev);
    if (phase == GS_PHASE_RECOMPUTE && x->s->strategy.recompute == GS_RECOMPUTE_SELECTIVE) {
        /* selective recompute: the checkpointed modules only (engine/build_recompute.c) */
        rc = gs__recompute_modules(&p, &sh, gs_act_layer_recomputes(&x->act, local));
        return rc ? rc : pass_end(&p, last_ev);
    }
    if ((rc = attn_forward(&p, &sh)))
        return rc;
    if (gs__moe_block(x, p.layer))
        return (rc = gs__moe_mlp_forward(&p, &sh)) ? rc : pass_end(&p, last_ev);
    return (rc = dense_mlp_forward(&p, &sh)) ? rc : pass_end(&p, last_ev);
}

gs_status gs__layer_backward(gs_bctx *x, int64_t local, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, GS_PHASE_BWD, gs__global_layer(x, local), mb, io);
    gs_status rc;
    int moe = gs__moe_block(x, p.layer);
    if ((rc = moe ? gs__moe_mlp_backward(&p, &sh) : dense_mlp_backward(&p, &sh)) || (rc = attn_backward(&p, &sh)))
        return rc;
    return pass_end(&p, last_ev);
}

void gs__block_begin(gs_block_run *r, gs_bctx *x, int64_t local, uint32_t mb, gs_phase phase, const gs_layer_io *io)
{
    gs__shapes_init(x, &r->sh);
    pass_init(&r->p, x, phase, gs__global_layer(x, local), mb, io);
    r->moe = gs__moe_block(x, r->p.layer);
}

gs_block_seg gs__block_last_piece(const gs_block_run *r)
{
    if (r->p.phase == GS_PHASE_BWD)
        return GS_SEG_PRE;
    if (!r->moe)
        return GS_SEG_MLP;
    return gs__moe_has_post(r->p.x) ? GS_SEG_POST : GS_SEG_COMBINE;
}

gs_status gs__block_piece(gs_block_run *r, gs_block_seg seg, int last, uint32_t *last_ev)
{
    pass *p = &r->p;
    const shapes *sh = &r->sh;
    int bwd = p->phase == GS_PHASE_BWD;
    gs_status rc = GS_OK;
    if (!r->moe) { /* a dense block: the attention half, the MLP; no exchanges */
        if (seg == GS_SEG_PRE)
            rc = bwd ? attn_backward(p, sh) : attn_forward(p, sh);
        else if (seg == GS_SEG_MLP)
            rc = bwd ? dense_mlp_backward(p, sh) : dense_mlp_forward(p, sh);
    } else if (seg == GS_SEG_PRE && bwd) {
        rc = (rc = gs__moe_piece(p, sh, seg)) ? rc : attn_backward(p, sh);
    } else if (seg == GS_SEG_PRE) {
        rc = (rc = attn_forward(p, sh)) ? rc : gs__moe_piece(p, sh, seg);
    } else {
        rc = gs__moe_piece(p, sh, seg);
    }
    if (rc != GS_OK)
        return rc;
    return last ? pass_end(p, last_ev) : flush(p);
}

/* Embedding: a vocab-parallel lookup whose partial outputs are all-reduced (sequence parallel:
 * reduce-scattered in forward, all-gathered in backward). */
gs_status gs__embed_forward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, GS_PHASE_FWD, GS_LAYER_EMBED, mb, io);
    gs_status rc;
    if ((rc = compute(&p, GS_ROLE_EMBED, GS_OP_EMBED, &no_gemm, 0.0, sh.T * sh.h * sh.e)) ||
        (rc = tp_coll(&p, GS_ROLE_TP_EMBED, sh.sp ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLREDUCE, &sh)))
        return rc;
    return pass_end(&p, last_ev);
}

gs_status gs__embed_backward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, GS_PHASE_BWD, GS_LAYER_EMBED, mb, io);
    gs_status rc;
    if ((sh.sp && (rc = tp_coll(&p, GS_ROLE_TP_EMBED, GS_COLL_ALLGATHER, &sh))) ||
        (rc = compute(&p, GS_ROLE_EMBED, GS_OP_EMBED, &no_gemm, 0.0, 2 * sh.T * sh.h * sh.e)))
        return rc;
    return pass_end(&p, last_ev);
}

/* Head: final norm, the column-parallel LM head and the vocab-parallel cross-entropy; the input
 * gradient is all-reduced in backward (sequence parallel: all-gather in forward, reduce-scatter
 * in backward). Under TP the cross-entropy needs every rank's per-token (max, sum exp, target
 * logit) over its vocabulary slice: one all-gather of 3 fp32 per token (Megatron's
 * vocab-parallel cross-entropy all-reduces the same statistics). */
gs_status gs__op_head(pass *p, const shapes *sh)
{
    gs_status rc;
    uint64_t hsp = sh->sp ? ceil_div(sh->T * sh->h, p->x->tp) : sh->T * sh->h;
    gemm_shape head = {sh->T, sh->v_t, sh->h, 0};
    if (p->phase == GS_PHASE_BWD)
        return (rc = loss(p, sh)) || (rc = gemm(p, GS_ROLE_HEAD, GS_OP_HEAD, sh, &head)) ||
                       (rc = tp_coll(p, GS_ROLE_TP_HEAD_IN, sh->sp ? GS_COLL_REDUCE_SCATTER : GS_COLL_ALLREDUCE, sh))
                   ? rc
                   : elementwise(p, GS_ROLE_HEAD_NORM, GS_OP_NORM, hsp, sh->norm_bytes);
    return (rc = elementwise(p, GS_ROLE_HEAD_NORM, GS_OP_NORM, hsp, sh->norm_bytes)) ||
                   (sh->sp && (rc = tp_coll(p, GS_ROLE_TP_HEAD_IN, GS_COLL_ALLGATHER, sh))) ||
                   (rc = gemm(p, GS_ROLE_HEAD, GS_OP_HEAD, sh, &head)) || (rc = loss(p, sh))
               ? rc
               : tp_coll_bytes(p, GS_ROLE_TP_LOSS_STATS, GS_COLL_ALLGATHER, p->x->tp * sh->T * GS_XENT_STAT_BYTES);
}

gs_status gs__head_forward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, GS_PHASE_FWD, GS_LAYER_HEAD, mb, io);
    gs_status rc;
    if ((rc = gs__op_head(&p, &sh)) || (rc = gs__mtp_head_forward(&p, &sh)))
        return rc;
    return pass_end(&p, last_ev);
}

gs_status gs__head_backward(gs_bctx *x, uint32_t mb, const gs_layer_io *io, uint32_t *last_ev)
{
    shapes sh;
    gs__shapes_init(x, &sh);
    pass p;
    pass_init(&p, x, GS_PHASE_BWD, GS_LAYER_HEAD, mb, io);
    gs_status rc;
    if ((rc = gs__mtp_head_backward(&p, &sh)) || (rc = gs__op_head(&p, &sh)))
        return rc;
    return pass_end(&p, last_ev);
}

/* ---- the emitters build_moe.c shares (engine/build_ops.h) ---------------------------------------- */

gs_status gs__op_gemm(pass *p, gs_role role, gs_op op, const shapes *sh, const gemm_shape *g)
{
    return gemm(p, role, op, sh, g);
}

gs_status gs__op_elementwise(pass *p, gs_role role, gs_op op, uint64_t elements, uint64_t bytes_per_element)
{
    return elementwise(p, role, op, elements, bytes_per_element);
}

gs_status gs__op_coll(pass *p, gs_role role, gs_coll_op op, gs_group_kind g, uint64_t group_size, uint64_t bytes)
{
    return coll_event(p, role, op, g, group_size, bytes);
}

gs_status gs__op_ag_gemm(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k)
{
    return ag_gemm(p, sh, op, lr, n, k);
}

gs_status gs__op_gemm_rs(pass *p, const shapes *sh, gs_op op, const linear_roles *lr, uint64_t n, uint64_t k)
{
    return gemm_rs(p, sh, op, lr, n, k);
}

gs_status gs__op_tp_coll(pass *p, gs_role role, gs_coll_op op, const shapes *sh)
{
    return tp_coll(p, role, op, sh);
}

gs_status gs__op_compute(pass *p, gs_role role, gs_op op, double flops, uint64_t bytes)
{
    return compute(p, role, op, &no_gemm, flops, bytes);
}

gs_status gs__op_compute_shaped(pass *p, gs_role role, gs_op op, const gemm_shape *g, double flops, uint64_t bytes)
{
    return compute(p, role, op, g, flops, bytes);
}

gs_status gs__op_flush(pass *p)
{
    return flush(p);
}

gs_evb *gs__op_part_beside(pass *p, const gemm_part *g, uint32_t before, int first, uint32_t *coll, gs_status *rc)
{
    return part_beside(p, g, before, first, coll, rc);
}

gs_status gs__op_attention(pass *p, const shapes *sh)
{
    return attention(p, sh);
}

gs_status gs__op_dense_mlp_forward(pass *p, const shapes *sh)
{
    return dense_mlp_forward(p, sh);
}

