/* FP8 linear layers in the training program: which scenarios exec runs in FP8, and the GEMMs of
 * the FP8-eligible roles (QKV, the attention output projection, the MLP's up and down
 * projections, the experts'), which take the driver's FP8 kernels when the scenario is FP8. The
 * attention core, the router and the LM head stay in the working precision, as Transformer
 * Engine's layers leave them. */
#include "exec/train_internal.h"

#include <inttypes.h>
#include <stdio.h>

/* Why exec does not run the emulations of a CP run on one rank (fp8_cp_ranks, fp8_cp_a2a,
 * fp8_cp_shards, fp8_cp_accumulate) with options o on this grid and driver (NULL: it runs them). */
static const char *cp_emulation_unsupported(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops,
                                            const gs_train_opts *o, char *which, size_t len)
{
    uint64_t tp = mesh->size[GS_DIM_TP], cp = mesh->cp > 1 ? mesh->cp : 1;
    int delayed = s->strategy.fp8 == GS_FP8_DELAYED;
    uint64_t CPe = o && o->fp8_cp_ranks > 1 ? o->fp8_cp_ranks : 1;
    uint64_t Ae = o && o->fp8_cp_a2a > 1 ? o->fp8_cp_a2a : 1;
    if ((CPe > 1 || Ae > 1) && (cp > 1 || ops->device_memory || s->model.seq % (2 * CPe) || CPe % Ae)) {
        snprintf(which, len, "fp8_cp_ranks %" PRIu64 " (fp8_cp_a2a %" PRIu64 ") emulates that many CP ranks' "
                 "attention on one: cp 1, the host driver, a sequence in 2 x %" PRIu64 " equal chunks, and a2a "
                 "groups dividing the ranks", CPe, Ae, CPe);
        return which;
    }
    uint64_t CPs = o && o->fp8_cp_shards > 1 ? o->fp8_cp_shards : 1;
    if (CPs > 1 && (delayed || cp > 1 || !ops->k.fp8_blocks || s->model.moe.experts || CPs > GS_FP8_MAX_BLOCKS ||
                    s->model.seq % (2 * CPs))) {
        snprintf(which, len, "fp8_cp_shards %" PRIu64 " casts the token rows as that many CP ranks' current scaling "
                 "does: current scaling on cp 1, a driver with scale blocks (the host driver), a dense model, at "
                 "most %d ranks, a sequence in 2 x %" PRIu64 " equal chunks", CPs, GS_FP8_MAX_BLOCKS, CPs);
        return which;
    }
    if (o && o->fp8_cp_accumulate &&
        (CPs <= 1 || tp > 1 || mesh->size[GS_DIM_DP] > 1 || mesh->size[GS_DIM_PP] > 1))
        return "fp8_cp_accumulate keeps each CP rank block's gradients over the step on the one rank whose numbers "
               "a CP run must give: fp8_cp_shards above 1, and tp, dp and pp 1";
    return NULL;
}

/* Why exec does not run s's FP8 on this grid and driver with options o (NULL: defaults; NULL
 * return: it runs it). */
static const char *fp8_unsupported(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops,
                                   const gs_train_opts *o, char *which, size_t len)
{
    uint64_t tp = mesh->size[GS_DIM_TP], cp = mesh->cp > 1 ? mesh->cp : 1, ep = mesh->ep ? mesh->ep : 1;
    uint64_t shards = o && o->fp8_tp_shards > 1 ? o->fp8_tp_shards : 1;
    const gs_model *m = &s->model;
    if (!ops->k.linear_fwd_fp8 || !ops->k.linear_bwd_fp8) {
        snprintf(which, len, "the %s driver has no FP8 GEMMs (the host driver emulates them: --driver host)",
                 ops->name);
        return which;
    }
    if (s->strategy.fp8 == GS_FP8_MX)
        return "fp8_recipe mxfp8 is simulated, not executed (exec runs the delayed and current recipes)";
    int delayed = s->strategy.fp8 == GS_FP8_DELAYED;
    uint64_t R = o && o->fp8_amax_replicas > 1 ? o->fp8_amax_replicas : 1;
    if (delayed && (!ops->k.fp8_delayed || !ops->all_reduce_max)) {
        snprintf(which, len, "fp8_recipe delayed: the %s driver's FP8 GEMMs cast at each tensor's own amax (current "
                 "scaling; the host driver runs delayed scaling: --driver host)", ops->name);
        return which;
    }
    if (delayed && s->strategy.fp8_params)
        return "fp8_recipe delayed with fp8_params: the parameters' FP8 copies keep amax histories of their own, "
               "updated at the optimizer step, which exec does not run (fp8_params: false, or fp8_recipe: current)";
    if (!delayed && R > 1)
        return "fp8_amax_replicas emulates delayed scaling's amax reduction over replicas; the recipe is current";
    uint64_t EPe = o && o->fp8_amax_ep > 1 ? o->fp8_amax_ep : 1;
    if (!delayed && EPe > 1)
        return "fp8_amax_ep emulates delayed scaling's amax reduction over EP ranks; the recipe is current";
    if (EPe > 1 && (ep > 1 || !m->moe.experts || m->moe.experts % EPe)) {
        snprintf(which, len, "fp8_amax_ep %" PRIu64 " emulates that many EP ranks on one: the grid's ep must be 1 "
                 "and the experts divide by it", EPe);
        return which;
    }
    const char *cpw = cp_emulation_unsupported(s, mesh, ops, o, which, len);
    if (cpw)
        return cpw;
    if (R > 1 && (mesh->size[GS_DIM_DP] > 1 || gs_scenario_microbatches(s) % R)) {
        snprintf(which, len, "fp8_amax_replicas %" PRIu64 " emulates that many replicas on one: the grid's dp must be "
                 "1 and the step's micro-batches divide by it", R);
        return which;
    }
    /* Under TP each rank casts its shard of a weight, and of the row-parallel input and the
     * column-parallel output gradient, at the shard's own amax; the sequence-parallel gathers'
     * tensors (column-parallel input, row-parallel output gradient) are cast whole, the amax
     * Transformer Engine reduces over TP before its FP8 gather. tp_comm_overlap's chunked GEMMs
     * would cast each chunk apart (under delayed scaling every chunk takes the one scale). */
    if (!delayed && tp > 1 && s->strategy.tp_comm_overlap && s->strategy.sequence_parallel)
        return "FP8 under tp_comm_overlap: exec's chunked GEMMs would cast each chunk at its own amax where "
               "Transformer Engine casts the whole gathered tensor at the amax it reduces over TP first "
               "(run tp_comm_overlap: false)";
    /* Under CP each rank casts its own tokens' rows at their amax (Transformer Engine reduces a
     * current-scaling amax over TP for the sequence-parallel gathers only): a single rank casts
     * the same blocks (fp8_cp_shards). An expert's GEMM reads routed tokens of every CP rank. */
    if (cp > 1 && !delayed && m->moe.experts)
        return "FP8 under cp > 1 with current scaling and experts: an expert's GEMM reads the routed tokens of "
               "every CP rank, each cast at its rank's amax, which no single rank's tensors reproduce (run cp: 1, "
               "or fp8_recipe: delayed)";
    /* Under delayed scaling an expert's casts take the scale its history gave, whatever rows the
     * GEMM reads, so EP runs; current scaling would cast the rows of every rank of its EP group
     * at their joint amax. */
    if (ep > 1 && !delayed)
        return "FP8 under ep > 1 with current scaling: an expert's GEMM reads the tokens of every rank of its EP "
               "group at once, so its per-tensor scale is not the single rank's (run ep: 1, or fp8_recipe: "
               "delayed)";
    if (shards > 1) {
        uint64_t ef = m->moe.expert_ffn ? m->moe.expert_ffn : m->ffn;
        if (tp > 1)
            return "per-shard FP8 scales (fp8_tp_shards) emulate a TP run on tp 1; this grid's tp is above 1";
        if (!ops->k.fp8_blocks) {
            snprintf(which, len, "the %s driver casts each FP8 GEMM input per tensor; per-shard scales "
                     "(fp8_tp_shards) run on the host driver", ops->name);
            return which;
        }
        if (shards > GS_FP8_MAX_BLOCKS || m->heads % shards || m->kv_heads % shards || m->ffn % shards ||
            m->vocab % shards || (m->moe.experts && ef % shards) ||
            (m->moe.shared_experts && (m->moe.shared_experts * ef) % shards)) {
            snprintf(which, len, "fp8_tp_shards %" PRIu64 " does not divide the heads, KV heads, MLP widths and "
                     "vocabulary as tp %" PRIu64 " would (at most %d)", shards, shards, GS_FP8_MAX_BLOCKS);
            return which;
        }
    }
    return NULL;
}

gs_status gs_train_fp8_check(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops,
                             const gs_train_opts *o, gs_error *err)
{
    char which[320];
    const char *why = s->strategy.fp8 == GS_FP8_OFF ? NULL : fp8_unsupported(s, mesh, ops, o, which, sizeof which);
    /* the emulations of FP8 runs change the micro-batches' order and the attention's sums: not
     * without FP8 */
    if (s->strategy.fp8 == GS_FP8_OFF && o &&
        (o->fp8_amax_replicas > 1 || o->fp8_amax_ep > 1 || o->fp8_cp_ranks > 1 || o->fp8_cp_a2a > 1))
        return gs_error_set(err, GS_ERR_INPUT, "exec: %s: fp8_amax_replicas, fp8_amax_ep, fp8_cp_ranks and "
                            "fp8_cp_a2a emulate FP8 delayed scaling's runs; the scenario's precision is %s", s->name,
                            gs_precision_name(s->strategy.precision));
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: %s: precision fp8: %s", s->name, why);
    return GS_OK;
}

/* The scale blocks of a GEMM of kind `which` with rows token rows, k inputs and n outputs: NULL
 * (per tensor) on a TP rank, whose operands are its shards; on one rank emulating fp8_tp_shards S,
 * the dimension TP would shard cut in S: a column-parallel GEMM's n (QKV's Q, K and V rows, a
 * gated MLP's gate and up rows, each in S slices), a row-parallel GEMM's k; on one rank emulating
 * fp8_cp_shards C, the token rows in the C CP ranks' zig-zag chunks. */
static const gs_fp8_split *split_for(const ctx *c, gs_lin which, size_t rows, size_t k, size_t n, gs_fp8_split *sp)
{
    const gs_train *t = c->t;
    uint64_t S = t->o.fp8_tp_shards, C = t->o.fp8_cp_shards;
    if (S <= 1 && C <= 1)
        return NULL;
    *sp = (gs_fp8_split){{1, 0, {0}, 0}, {1, 0, {0}, 0}, {1, 0, {0}, 0}};
    /* the token rows as the CP ranks hold them (gs_train_fp8_check: dense models, cp 1) */
    if (C > 1)
        sp->t = (gs_fp8_cut){C, 0, {0}, t->seq};
    if (S > 1)
        switch (which) {
        case GS_LIN_QKV:
            sp->n = (gs_fp8_cut){S, 3, {t->a_t * t->hd, t->kv_t * t->hd, t->kv_t * t->hd}, 0};
            break;
        case GS_LIN_UP:
        case GS_LIN_EXPERT_UP:
            sp->n = t->gelu ? (gs_fp8_cut){S, 0, {0}, 0} : (gs_fp8_cut){S, 2, {n / 2, n / 2}, 0};
            break;
        default: /* GS_LIN_O, GS_LIN_DOWN, GS_LIN_EXPERT_DOWN: row-parallel */
            sp->k = (gs_fp8_cut){S, 0, {0}, 0};
            break;
        }
    /* gs_train_fp8_check divided the widths; a GEMM cut otherwise is a bug here */
    return gs_k_fp8_cut_ok(&sp->n, n) && gs_k_fp8_cut_ok(&sp->k, k) && gs_k_fp8_cut_ok(&sp->t, rows) ? sp : NULL;
}

void gs__train_linear_fwd(const ctx *c, gs_lin which, uint64_t j, const float *x, const float *w, float *y, size_t t,
                          size_t k, size_t n)
{
    const gs_driver_kernels *kn = &c->t->ops->k;
    gs_fp8_split sp;
    gs_fp8_scales sc;
    if (c->t->fp8)
        kn->linear_fwd_fp8(c->s, x, w, y, t, k, n, split_for(c, which, t, k, n, &sp),
                           gs__train_fp8_scales(c, which, j, 0, &sc));
    else
        kn->linear_fwd(c->s, x, w, y, t, k, n);
}

gs_status gs__train_linear_bwd(const ctx *c, gs_lin which, uint64_t j, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, size_t t, size_t k, size_t n)
{
    const gs_driver_kernels *kn = &c->t->ops->k;
    gs_fp8_split sp;
    gs_fp8_scales sc;
    if (!c->t->fp8) {
        kn->linear_bwd(c->s, x, w, dy, dx, dw, t, k, n);
        return GS_OK;
    }
    const gs_fp8_split *split = split_for(c, which, t, k, n, &sp);
    const gs_fp8_scales *scales = gs__train_fp8_scales(c, which, j, 1, &sc);
    if (dw && split && gs__train_cp_accumulates(c->t))
        return gs__train_cp_linear_bwd_fp8(c, x, w, dy, dx, dw, t, k, n, split, scales);
    kn->linear_bwd_fp8(c->s, x, w, dy, dx, dw, t, k, n, split, scales);
    return GS_OK;
}
