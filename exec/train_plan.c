/* The event plan of the training program: what each event does, from its role through one table
 * (role_actions), the tensors it binds, the tp_comm_overlap partners it waits for, its p2p group;
 * and the dispatcher's callback that carries the plan out. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec/train_internal.h"


/* TP collectives, and a MoE block's all-to-alls over EP: a layer's own exchanges, not DP's */
static int is_tp(const gs_event *e)
{
    return e->kind == GS_EV_COLLECTIVE && (e->group == GS_GROUP_TP || e->group == GS_GROUP_EP);
}

/* DDP (NO_SHARD), and HSDP with one DP rank per node, keep one resident full gradient that every
 * reduction reads and writes: reducing it in place after each micro-batch would count earlier
 * micro-batches again. Each rank therefore
 * accumulates its new gradients in a pending buffer (a virtual tensor id past the schedule's) that
 * a reduction sums over the group and adds to the resident gradient, as DDP's buckets do. */
uint32_t gs__train_pending_id(const rank_st *r, const gs_rank_events *re, size_t u)
{
    uint32_t g = r->grad_t[u];
    if ((r->units[u].N <= 1 && r->R <= 1) || g == NO_ID || re->tensors[g].kind != GS_T_GRAD)
        return g;
    return (uint32_t)(re->ntensors + u);
}

/* 1 when the n tensors are each their unit's resident parameters (ZeRO-1/2's gathers) */
static int own_params(const rank_st *r, const gs_rank_events *re, const uint32_t *ids, uint16_t n)
{
    for (uint16_t j = 0; j < n; j++) {
        uint32_t u = re->tensors[ids[j]].unit;
        if (u >= r->nunits || ids[j] != r->param_t[u])
            return 0;
    }
    return n > 0;
}

/* The one table exec dispatches on: per role, the action of its event going forward (the forward
 * and recompute phases), backward, and after the backward (the optimizer phase). A_NONE where the
 * role has no event in that direction, or (CPU offload's copies) where the host program has
 * nothing to do: it keeps every tensor in the driver's memory. */
enum { DIR_FWD, DIR_BWD, DIR_OPTIM, DIR_COUNT };
static const uint8_t role_actions[GS_ROLE_COUNT][DIR_COUNT] = {
    [GS_ROLE_ATTN_NORM] = {A_N1_FWD, A_N1_BWD, A_NONE},
    [GS_ROLE_QKV] = {A_QKV_FWD, A_QKV_BWD, A_NONE},
    [GS_ROLE_ATTN_CORE] = {A_ATTN_FWD, A_ATTN_BWD, A_NONE},
    [GS_ROLE_OPROJ] = {A_O_FWD, A_O_BWD, A_NONE},
    [GS_ROLE_MLP_NORM] = {A_N2_FWD, A_N2_BWD, A_NONE},
    [GS_ROLE_MLP_UP] = {A_UP_FWD, A_UP_BWD, A_NONE},
    [GS_ROLE_MLP_ACT] = {A_ACT_FWD, A_ACT_BWD, A_NONE},
    [GS_ROLE_MLP_DOWN] = {A_DOWN_FWD, A_DOWN_BWD, A_NONE},
    [GS_ROLE_EMBED] = {A_EMB_FWD, A_EMB_BWD, A_NONE},
    [GS_ROLE_HEAD_NORM] = {A_HN_FWD, A_HN_BWD, A_NONE},
    [GS_ROLE_HEAD] = {A_HEAD_FWD, A_HEAD_BWD, A_NONE},
    [GS_ROLE_LOSS] = {A_LOSS_FWD, A_LOSS_BWD, A_NONE},
    [GS_ROLE_OPTIMIZER] = {A_NONE, A_NONE, A_OPTIM},
    [GS_ROLE_TP_ATTN_IN] = {A_N1_AG, A_QKV_TP, A_NONE},
    [GS_ROLE_TP_ATTN_OUT] = {A_O_TP, A_DXM_AG, A_NONE},
    [GS_ROLE_TP_MLP_IN] = {A_N2_AG, A_UP_TP, A_NONE},
    [GS_ROLE_TP_MLP_OUT] = {A_DOWN_TP, A_DY_AG, A_NONE},
    [GS_ROLE_TP_ATTN_REGATHER] = {A_NONE, A_N1_REAG, A_NONE},
    [GS_ROLE_TP_MLP_REGATHER] = {A_NONE, A_N2_REAG, A_NONE},
    [GS_ROLE_TP_EMBED] = {A_EMB_TP, A_EMB_AG, A_NONE},
    [GS_ROLE_TP_HEAD_IN] = {A_HN_AG, A_HEAD_TP, A_NONE},
    [GS_ROLE_TP_LOSS_STATS] = {A_LOSS_AG, A_NONE, A_NONE},
    [GS_ROLE_TP_NORM_GRADS] = {A_NONE, A_NONE, A_SP_NORM_AR},
    [GS_ROLE_UNIT_GATHER] = {A_UNIT_AG, A_UNIT_AG, A_NONE},
    [GS_ROLE_GRAD_REDUCE_SCATTER] = {A_NONE, A_UNIT_RS, A_NONE},
    [GS_ROLE_GRAD_INTER_REDUCE] = {A_NONE, A_INTER_AR, A_NONE},
    [GS_ROLE_GRAD_BUCKET_REDUCE] = {A_NONE, A_BUCKET_AR, A_NONE},
    [GS_ROLE_GRAD_CHUNK_REDUCE] = {A_NONE, A_CHUNK_AR, A_NONE}, /* A_CHUNK_RS for a reduce-scatter */
    [GS_ROLE_PARAM_GATHER] = {A_NONE, A_NONE, A_OWN_AG},
    [GS_ROLE_PP_SEND] = {A_SEND_FWD, A_SEND_BWD, A_NONE},
    [GS_ROLE_PP_RECV] = {A_RECV_FWD, A_RECV_BWD, A_NONE},
    [GS_ROLE_TIED_SEND] = {A_NONE, A_NONE, A_TIED_SEND},
    [GS_ROLE_TIED_RECV] = {A_NONE, A_NONE, A_TIED_RECV},
    [GS_ROLE_MOE_ROUTER] = {A_MOE_ROUTER, A_MOE_ROUTER, A_NONE},
    [GS_ROLE_MOE_PERMUTE] = {A_MOE_PERMUTE, A_MOE_PERMUTE, A_NONE},
    [GS_ROLE_EXPERT_UP] = {A_EXPERT_UP, A_EXPERT_UP, A_NONE},
    [GS_ROLE_EXPERT_ACT] = {A_EXPERT_ACT, A_EXPERT_ACT, A_NONE},
    [GS_ROLE_EXPERT_DOWN] = {A_EXPERT_DOWN, A_EXPERT_DOWN, A_NONE},
    [GS_ROLE_EP_DISPATCH] = {A_EP_DISPATCH, A_EP_DISPATCH, A_NONE},
    [GS_ROLE_EP_COMBINE] = {A_EP_COMBINE, A_EP_COMBINE, A_NONE},
    [GS_ROLE_ETP_IN] = {A_ETP_IN, A_ETP_IN, A_NONE},
    [GS_ROLE_ETP_OUT] = {A_ETP_OUT, A_ETP_OUT, A_NONE},
    [GS_ROLE_CP_KV] = {A_CP_KV, A_CP_KV, A_NONE},
    [GS_ROLE_CP_A2A] = {A_CP_A2A, A_CP_A2A, A_NONE},
    [GS_ROLE_FP8_AMAX] = {A_FP8_AMAX, A_FP8_AMAX, A_NONE},
    /* FSDP2's and ZeRO-3's copies: exec gathers into and reduces from the tensors the events name */
    [GS_ROLE_UNIT_COPY_OUT] = {A_NONE, A_NONE, A_NONE},
    [GS_ROLE_GRAD_COPY_IN] = {A_NONE, A_NONE, A_NONE},
};

static int dir_of(const gs_event *e)
{
    return e->phase == GS_PHASE_BWD ? DIR_BWD : e->phase == GS_PHASE_OPTIM ? DIR_OPTIM : DIR_FWD;
}

/* The action of a DP collective, with what it needs checked (unit in range; ZeRO's gather of
 * the updated slices and the one-bucket reductions on the state they assume), and its bucket's
 * element range. */
static gs_status plan_dp(const gs_train *t, rank_st *r, const gs_rank_events *re, size_t i, action *a,
                         gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    size_t nu = r->nunits;
    const uint32_t *reads = gs_event_list(re, e, GS_LINK_READS), *writes = gs_event_list(re, e, GS_LINK_WRITES);
    if (e->unit >= nu)
        return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": event %zu names unit %" PRIu32 " of %zu",
                            r->rank, i, e->unit, nu);
    const char *why = NULL;
    if (*a == A_OWN_AG && !(r->own_slice && own_params(r, re, writes, e->nlinks[GS_LINK_WRITES])))
        why = "a gather of updated parameter slices where this rank keeps no resident parameters to gather into";
    if (*a == A_CHUNK_AR && e->op == GS_COLL_REDUCE_SCATTER) {
        *a = A_CHUNK_RS;
        if (!r->own_slice)
            why = "a one-bucket reduce-scatter where this rank keeps no resident gradient to reduce into";
    }
    for (uint16_t j = 0; !why && (*a == A_CHUNK_AR || *a == A_CHUNK_RS) && j < e->nlinks[GS_LINK_READS]; j++) {
        const gs_tensor *tt = &re->tensors[reads[j]];
        if (tt->unit >= nu || reads[j] != r->grad_t[tt->unit])
            return gs_error_set(err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": event %zu reduces a tensor that is not "
                                "a unit's resident gradient", r->rank, i);
    }
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": %s on %s (%s): %s", r->rank,
                            gs_coll_op_name((gs_coll_op)e->op), gs_group_kind_name((gs_group_kind)e->group),
                            gs_role_name((gs_role)e->role), why);
    if (*a == A_BUCKET_AR) { /* bucket part - 1 of the unit's gradient (part 0: the whole unit) */
        uint64_t P = r->units[e->unit].P;
        uint64_t nb = gs_bucket_count(P, r->plan.gb, t->s->strategy.bucket_bytes), k = e->part ? e->part - 1u : 0;
        uint64_t off = 0;
        for (uint64_t q = 0; q < k && q < nb; q++)
            off += gs_bucket_params(P, nb, q);
        pl->off = off;
        pl->count = !e->part ? P : k < nb ? gs_bucket_params(P, nb, k) : 0;
    }
    return GS_OK;
}

/* The parameter and gradient tensors a DP collective reads and writes. cur_full: the live
 * gathered copy of each unit (an all-gather makes its output the unit's). */
static void plan_dp_tensors(rank_st *r, const gs_rank_events *re, size_t i, action a, uint32_t *cur_full)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    uint32_t u = e->unit;
    const uint32_t *reads = gs_event_list(re, e, GS_LINK_READS), *writes = gs_event_list(re, e, GS_LINK_WRITES);
    if (a == A_UNIT_AG)
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_WRITES]; j++)
            if (re->tensors[writes[j]].kind == GS_T_PARAM_FULL)
                cur_full[u] = writes[j];
    pl->ptid = e->nlinks[GS_LINK_READS] ? reads[0] : NO_ID; /* AG: the shard; RS/AR: the gradient */
    /* ZeRO-1's reduce-scatter reads and writes the resident full gradient: it reduces the
     * pending one (this step's new gradients) into the resident one's own slice */
    if ((a == A_BUCKET_AR || a == A_UNIT_RS || (a == A_INTER_AR && r->units[u].N <= 1)) && pl->ptid == r->grad_t[u])
        pl->ptid = gs__train_pending_id(r, re, u);
    pl->gtid = e->nlinks[GS_LINK_WRITES] ? writes[0] : NO_ID; /* AG: the gathered copy; RS/AR: storage */
    if (a == A_OWN_AG)
        pl->ptid = pl->gtid;
}

/* A compute or TP event's parameters and gradients: its layer's unit's and the root's, as the
 * list's allocations and frees leave them live at this point (the memory ledger's walk). */
static gs_status plan_layer_tensors(const gs_train *t, rank_st *r, const gs_rank_events *re, size_t i,
                                    const uint32_t *cur_full, const uint32_t *cur_grad, gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    size_t nu = r->nunits;
    int64_t u = -1;
    if (e->layer >= 0 && (uint64_t)e->layer < t->layers && r->local_of_global[e->layer] >= 0)
        u = gs__train_moe_event_unit(r, e, r->local_of_global[e->layer],
                                     r->unit_of_local[r->local_of_global[e->layer]]);
    size_t root = r->part.has_root ? nu - 1 : SIZE_MAX;
    for (int which = 0; which < 2; which++) {
        int64_t uu = which == 0 ? u : (root == SIZE_MAX ? -1 : (int64_t)root);
        if (uu < 0)
            continue;
        uint32_t p = cur_full[uu] != NO_ID ? cur_full[uu] : (r->plan.stored_sharded ? NO_ID : r->param_t[uu]);
        uint32_t g = r->units[uu].N <= 1 && r->R <= 1 ? r->grad_t[uu]
                     : cur_grad[uu] != NO_ID ? cur_grad[uu]
                     : r->hold_t[uu] != NO_ID ? r->hold_t[uu] : gs__train_pending_id(r, re, (size_t)uu);
        /* a backward op accumulates into a full gradient: the schedule must hold one */
        int used = which == 0 || e->layer == GS_LAYER_EMBED || e->layer == GS_LAYER_HEAD;
        if (used && e->phase == GS_PHASE_BWD && e->kind == GS_EV_COMPUTE && r->units[uu].N > 1 &&
            (g == NO_ID || (g < re->ntensors && re->tensors[g].kind == GS_T_GRAD_SHARD))) {
            char name[GS_EVENT_NAME_BYTES];
            gs_event_name(re, e, name, sizeof name);
            return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 " event %s writes unit %" PRId64
                                "'s gradient where the schedule holds no full gradient of it", r->rank, name, uu);
        }
        if (which == 0)
            pl->ptid = p, pl->gtid = g;
        else
            pl->rptid = p, pl->rgtid = g;
    }
    return GS_OK;
}

/* ---- tp_comm_overlap partners ----
 * A chunked overlap's two sides meet through driver marks: the ring all-gather marks each step
 * and the GEMM part beside it waits for the step its next chunk needs; the pipelined GEMM's
 * second part marks each split and the reduce-scatter beside it waits. Each side finds the other
 * by its role, phase, layer, micro-batch, chunk and part (never by its place in the list), and
 * the token of a marking is its event's id in the step, so the marks pair without counting. */
typedef struct ev_key {
    uint64_t hi, lo; /* role, part, phase, chunk | layer, micro-batch */
    uint32_t ev;
} ev_key;

static void key_of(const gs_event *e, gs_role role, uint16_t part, ev_key *k)
{
    k->hi = (uint64_t)role << 40 | (uint64_t)part << 24 | (uint64_t)e->phase << 16 | (uint64_t)e->chunk;
    k->lo = (uint64_t)(uint32_t)e->layer << 32 | e->mb;
}

static int cmp_key(const void *a, const void *b)
{
    const ev_key *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The event with the key of e but role `role` and part `part` (NO_ID: none). */
static uint32_t find_key(const ev_key *keys, size_t n, const gs_event *e, gs_role role, uint16_t part)
{
    ev_key k;
    key_of(e, role, part, &k);
    const ev_key *f = bsearch(&k, keys, n, sizeof *keys, cmp_key);
    return f ? f->ev : NO_ID;
}

/* The partner a tp_comm_overlap side waits for (ring GEMM part 1: its all-gather; pipelined
 * reduce-scatter part 1: its GEMM's part 2), and the checks that it has one issued before it and
 * that each split operation has both parts. */
static gs_status plan_partner(rank_st *r, const gs_rank_events *re, const ev_key *keys, size_t nkeys, size_t i,
                              gs_error *err)
{
    const gs_event *e = &re->events[i];
    ev_plan *pl = &r->plans[i];
    int fwd = e->phase != GS_PHASE_BWD;
    gs_role role = (gs_role)e->role;
    /* ring-exchanged GEMMs and their gathers; the pipelined GEMMs and their reduce-scatters */
    gs_role ring_ag = fwd ? (role == GS_ROLE_QKV ? GS_ROLE_TP_ATTN_IN : role == GS_ROLE_MLP_UP ? GS_ROLE_TP_MLP_IN
                                                                                               : GS_ROLE_NONE)
                          : (role == GS_ROLE_OPROJ ? GS_ROLE_TP_ATTN_OUT
                             : role == GS_ROLE_MLP_DOWN ? GS_ROLE_TP_MLP_OUT : GS_ROLE_NONE);
    gs_role rs_gemm = !fwd ? GS_ROLE_NONE : role == GS_ROLE_TP_ATTN_OUT ? GS_ROLE_OPROJ
                                          : role == GS_ROLE_TP_MLP_OUT ? GS_ROLE_MLP_DOWN : GS_ROLE_NONE;
    int gemm = role == GS_ROLE_QKV || role == GS_ROLE_OPROJ || role == GS_ROLE_MLP_UP || role == GS_ROLE_MLP_DOWN;
    const char *why = NULL;
    pl->partner = NO_ID;
    if ((gemm || rs_gemm != GS_ROLE_NONE) && (e->part == 1 || e->part == 2) &&
        find_key(keys, nkeys, e, role, (uint16_t)(3 - e->part)) == NO_ID)
        why = "a split operation without its other part";
    else if (gemm && ring_ag != GS_ROLE_NONE && e->part) {
        uint32_t ag = find_key(keys, nkeys, e, ring_ag, 0);
        const uint32_t *deps = gs_event_list(re, e, GS_LINK_DEPS);
        int on_ag = 0;
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_DEPS]; j++)
            on_ag |= deps[j] == ag;
        if (ag == NO_ID || re->events[ag].op != GS_COLL_ALLGATHER)
            why = "a ring-exchanged GEMM part without its all-gather";
        else if (e->part == 2 && !on_ag)
            why = "a ring-exchanged GEMM's second part that does not wait for its all-gather";
        else if (e->part == 1 && (ag > i || on_ag))
            why = "a ring-exchanged GEMM's first part not beside an all-gather issued before it";
        if (e->part == 1)
            pl->partner = ag;
    } else if (rs_gemm != GS_ROLE_NONE && e->part == 1) {
        uint32_t g2 = find_key(keys, nkeys, e, rs_gemm, 2);
        if (g2 == NO_ID || g2 > i)
            why = "a pipelined reduce-scatter's first part without its GEMM's second part issued before it";
        pl->partner = g2;
    }
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 " event %zu: tp_comm_overlap: %s", r->rank, i,
                            why);
    return GS_OK;
}

static gs_status plan_partners(const gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
    if (!t->ovl)
        return GS_OK;
    ev_key *keys = malloc((re->nevents ? re->nevents : 1) * sizeof *keys);
    if (!keys)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < re->nevents; i++)
        if (re->events[i].layer >= 0 && re->events[i].phase != GS_PHASE_OPTIM) {
            key_of(&re->events[i], (gs_role)re->events[i].role, re->events[i].part, &keys[n]);
            keys[n++].ev = (uint32_t)i;
        }
    qsort(keys, n, sizeof *keys, cmp_key);
    gs_status rc = GS_OK;
    for (size_t i = 0; i + 1 < n && rc == GS_OK; i++)
        if (cmp_key(&keys[i], &keys[i + 1]) == 0)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": events %" PRIu32 " and %" PRIu32 " have the "
                              "same role, part, phase, layer, micro-batch and chunk", r->rank, keys[i].ev,
                              keys[i + 1].ev);
    for (size_t i = 0; i < re->nevents && rc == GS_OK; i++)
        if (re->events[i].layer >= 0 && re->events[i].phase != GS_PHASE_OPTIM)
            rc = plan_partner(r, re, keys, n, i, err);
    free(keys);
    return rc;
}

/* p2p groups (exec/p2p_groups.h): each event that issues a group learns its members' span. */
static void plan_p2p(const gs_train *t, rank_st *r)
{
    const gs_rank_events *re = &t->sch->ranks[r - t->r];
    const uint32_t *lead = t->lead ? t->lead[r - t->r] : NULL;
    for (size_t i = 0; lead && i < re->nevents; i++)
        if (lead[i]) {
            ev_plan *g = &r->plans[lead[i] - 1];
            r->plans[i].lead = lead[i];
            if (i < lead[i] - 1 && (!g->first1 || i + 1 < g->first1))
                g->first1 = (uint32_t)i + 1;
            if (i > lead[i] - 1 && i + 1 > g->last1)
                g->last1 = (uint32_t)i + 1;
        }
}

/* Classifies every event of rank r by its role (role_actions) and records which tensors hold the
 * parameters and the gradients it uses, walking the list's allocations and frees as the memory
 * ledger does. */
gs_status gs__train_plan_rank(gs_train *t, rank_st *r, const gs_rank_events *re, gs_error *err)
{
    size_t nu = r->nunits;
    uint32_t *cur_full = malloc((nu ? nu : 1) * sizeof *cur_full);
    uint32_t *cur_grad = malloc((nu ? nu : 1) * sizeof *cur_grad);
    gs_status rc = GS_OK;
    if (!cur_full || !cur_grad) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
        goto out;
    }
    for (size_t u = 0; u < nu; u++)
        cur_full[u] = cur_grad[u] = NO_ID;
    for (size_t i = 0; i < re->nevents && rc == GS_OK; i++) {
        const gs_event *e = &re->events[i];
        ev_plan *pl = &r->plans[i];
        const uint32_t *allocs = gs_event_list(re, e, GS_LINK_ALLOCS), *frees = gs_event_list(re, e, GS_LINK_FREES);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_ALLOCS]; j++) {
            const gs_tensor *tt = &re->tensors[allocs[j]];
            if (tt->kind == GS_T_GRAD && tt->unit < nu)
                cur_grad[tt->unit] = allocs[j];
        }
        action a = e->role < GS_ROLE_COUNT ? (action)role_actions[e->role][dir_of(e)] : A_NONE;
        int dp = e->kind == GS_EV_COLLECTIVE && !is_tp(e) && e->group != GS_GROUP_CP && e->group != GS_GROUP_CP_A2A &&
                 e->group != GS_GROUP_CP_P2P && e->group != GS_GROUP_STAGE;
        if ((a == A_TIED_SEND || a == A_TIED_RECV) && !r->tied_x)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": event %zu: a pipeline send or receive "
                              "after the backward pass the host program has no use for", r->rank, i);
        else if (dp && a == A_NONE)
            rc = gs_error_set(err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": %s on %s (%s) is not implemented by the "
                              "host program", r->rank, gs_coll_op_name((gs_coll_op)e->op),
                              gs_group_kind_name((gs_group_kind)e->group), gs_role_name((gs_role)e->role));
        else if (dp)
            rc = plan_dp(t, r, re, i, &a, err);
        if (rc != GS_OK)
            break;
        if (dp)
            plan_dp_tensors(r, re, i, a, cur_full);
        pl->act = (uint8_t)a;
        pl->part = (uint8_t)e->part;
        if (e->phase == GS_PHASE_RECOMPUTE)
            r->has_recompute = 1;
        /* the sharding's copies bind nothing here: exec has no flat buffers to copy between */
        if ((e->kind == GS_EV_COMPUTE || is_tp(e)) && e->phase != GS_PHASE_OPTIM &&
            !(e->kind == GS_EV_COMPUTE && e->op == GS_OP_COPY))
            rc = plan_layer_tensors(t, r, re, i, cur_full, cur_grad, err);
        for (uint16_t j = 0; j < e->nlinks[GS_LINK_FREES]; j++) {
            const gs_tensor *tt = &re->tensors[frees[j]];
            if (tt->unit < nu && tt->kind == GS_T_PARAM_FULL && cur_full[tt->unit] == frees[j])
                cur_full[tt->unit] = NO_ID;
            if (tt->unit < nu && tt->kind == GS_T_GRAD && cur_grad[tt->unit] == frees[j])
                cur_grad[tt->unit] = NO_ID;
        }
    }
    if (rc == GS_OK)
        rc = plan_partners(t, r, re, err);
    if (rc == GS_OK)
        plan_p2p(t, r);
out:
    free(cur_full);
    free(cur_grad);
    return rc;
}


/* The file that carries out each action (A_NONE: nothing to do). */
typedef gs_status (*action_fn)(const ctx *c, action a);

static action_fn handler_of(action a)
{
    if (a >= A_N1_FWD && a <= A_N1_BWD)
        return gs__train_block_action;
    if ((a >= A_EMB_FWD && a <= A_EMB_BWD) || (a >= A_HN_FWD && a <= A_HN_BWD))
        return gs__train_root_action;
    if (a >= A_UNIT_AG && a <= A_OWN_AG)
        return gs__train_dp_action;
    if (a == A_OPTIM)
        return gs__train_optim_action;
    if (a == A_SP_NORM_AR)
        return gs__train_sp_norm_action;
    if (a >= A_SEND_FWD && a <= A_TIED_RECV)
        return gs__train_p2p_action;
    if (a >= A_MOE_ROUTER && a <= A_EP_COMBINE)
        return gs__train_moe_action;
    if (a == A_CP_KV || a == A_CP_A2A)
        return gs__train_cp_action;
    if (a == A_FP8_AMAX)
        return gs__train_fp8_amax_action;
    return NULL;
}

/* The dispatcher's callback: the event's action (its role's, planned once), then the poison of
 * what it frees. */
gs_status gs_train_run_event(void *prog, size_t rank_index, size_t event, gs_drv_stream *s, gs_error *err)
{
    gs_train *t = prog;
    ctx c = {t, &t->r[rank_index], &t->sch->ranks[rank_index], NULL, NULL, s, err};
    c.e = &c.re->events[event];
    c.pl = &c.r->plans[event];
    action a = (action)c.pl->act;
    action_fn fn = handler_of(a);
    gs_status rc = fn ? fn(&c, a) : GS_OK;
    if (rc != GS_OK)
        return rc;
    /* a gathered copy the event frees is gone: poison it, so a later use without a new gather
     * shows up as NaN */
    const uint32_t *frees = gs_event_list(c.re, c.e, GS_LINK_FREES);
    for (uint16_t j = 0; j < c.e->nlinks[GS_LINK_FREES]; j++) {
        const gs_tensor *tt = &c.re->tensors[frees[j]];
        if (tt->kind == GS_T_PARAM_FULL && c.r->tbuf[frees[j]] && tt->unit < c.r->nunits)
            gs__train_poison(&c, c.r->tbuf[frees[j]], c.r->units[tt->unit].N * c.r->units[tt->unit].S);
    }
    return GS_OK;
}

