/* FP8 linear layers in the training program: which scenarios exec runs in FP8, and the GEMMs of
 * the FP8-eligible roles (QKV, the attention output projection, the MLP's up and down
 * projections, the experts'), which take the driver's FP8 kernels when the scenario is FP8. The
 * attention core, the router and the LM head stay in the working precision, as Transformer
 * Engine's layers leave them. */
#include "exec/train_internal.h"

#include <stdio.h>

/* Why exec does not run s's FP8 on this grid and driver (NULL: it runs it). */
static const char *fp8_unsupported(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops, char *which,
                                   size_t len)
{
    uint64_t tp = mesh->size[GS_DIM_TP], cp = mesh->cp > 1 ? mesh->cp : 1, ep = mesh->ep ? mesh->ep : 1;
    if (!ops->k.linear_fwd_fp8 || !ops->k.linear_bwd_fp8) {
        snprintf(which, len, "the %s driver has no FP8 GEMMs (the host driver emulates them: --driver host)",
                 ops->name);
        return which;
    }
    if (s->strategy.fp8 != GS_FP8_CURRENT)
        return "fp8_recipe delayed: its scales come from an amax history reduced over the data-parallel group, "
               "a collective the schedule does not contain; exec runs current scaling (fp8_recipe: current)";
    if (s->strategy.fp8_params)
        return "fp8_params: exec keeps the parameters and their gathers in fp32 (run fp8_params: false)";
    /* current scaling's scale is a function of the whole tensor the GEMM reads: a shard's amax
     * is not the tensor's, and agreeing on it would take a reduction the schedule lacks */
    if (tp > 1)
        return "FP8 under tp > 1: each TP rank's per-tensor amax would cover its shard only, and the amax "
               "reduction that makes the scales the whole tensor's is no event of the schedule (run tp: 1)";
    if (cp > 1)
        return "FP8 under cp > 1: each CP rank's per-tensor amax would cover its chunks of the sequences only, "
               "and the amax reduction is no event of the schedule (run cp: 1)";
    if (ep > 1)
        return "FP8 under ep > 1: an expert's GEMM reads the tokens of every rank of its EP group at once, "
               "so its per-tensor scale is not the single rank's (run ep: 1)";
    return NULL;
}

gs_status gs_train_fp8_check(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops, gs_error *err)
{
    char which[200];
    const char *why = s->strategy.fp8 == GS_FP8_OFF ? NULL : fp8_unsupported(s, mesh, ops, which, sizeof which);
    if (why)
        return gs_error_set(err, GS_ERR_INPUT, "exec: %s: precision fp8: %s", s->name, why);
    return GS_OK;
}

void gs__train_linear_fwd(const ctx *c, const float *x, const float *w, float *y, size_t t, size_t k, size_t n)
{
    const gs_driver_kernels *kn = &c->t->ops->k;
    (c->t->fp8 ? kn->linear_fwd_fp8 : kn->linear_fwd)(c->s, x, w, y, t, k, n);
}

void gs__train_linear_bwd(const ctx *c, const float *x, const float *w, const float *dy, float *dx, float *dw,
                          size_t t, size_t k, size_t n)
{
    const gs_driver_kernels *kn = &c->t->ops->k;
    (c->t->fp8 ? kn->linear_bwd_fp8 : kn->linear_bwd)(c->s, x, w, dy, dx, dw, t, k, n);
}
