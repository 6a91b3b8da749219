/* Megatron-LM's FP8 flags into the strategy (sim --from-megatron): --fp8-format, --fp8-recipe,
 * --fp8-param-gather and the delayed recipe's --fp8-amax-history-len, --fp8-amax-compute-algo
 * and --fp8-margin. */
#include <inttypes.h>
#include <stdio.h>

#include "engine/import_megatron_internal.h"

/* FP8 (Megatron-LM's --fp8-format, --fp8-recipe, --fp8-param-gather): Transformer Engine's FP8
 * linear layers over the --bf16 / --fp16 training precision. Megatron-LM's formats are e4m3 and
 * hybrid (E5M2 gradients), which cost alike here; its recipes delayed (the default) and
 * tensorwise are strategy.fp8 delayed and current, mxfp8 its mxfp8; blockwise is not modelled. */
gs_status gs__mg_fp8(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_strategy *g,
                     gs_diag *ignored, gs_error *err)
{
    char where[600];
    gs_status rc;
    static const gs__mg_act delayed_acts[] = {MG_FP8_HIST, MG_FP8_ALGO, MG_FP8_MARGIN};
    static const char *const delayed_names[] = {"fp8-amax-history-len", "fp8-amax-compute-algo", "fp8-margin"};
    if (!st->given[MG_FP8_FORMAT]) {
        static const gs__mg_act alone[] = {MG_FP8_RECIPE, MG_FP8_PARAM, MG_FP8_HIST, MG_FP8_ALGO, MG_FP8_MARGIN};
        static const char *const names[] = {"fp8-recipe", "fp8-param-gather", "fp8-amax-history-len",
                                            "fp8-amax-compute-algo", "fp8-margin"};
        for (size_t i = 0; i < 5; i++)
            if (st->given[alone[i]] &&
                (rc = gs__import_ignored(ignored, err, "%s: --%s: ignored: Megatron-LM trains in FP8 only "
                                                       "with --fp8-format",
                                         gs__mg_where(origin, ws, st->at[alone[i]], where, sizeof where),
                                         names[i])) != GS_OK)
                return rc;
        return GS_OK;
    }
    static const char *const formats[] = {"e4m3", "hybrid"};
    static const char *const recipes[] = {"delayed", "tensorwise", "mxfp8", "blockwise"};
    int fmt, recipe = 0;
    gs__mg_where(origin, ws, st->at[MG_FP8_FORMAT], where, sizeof where);
    if ((rc = gs__mg_choice(where, "fp8-format", st->str[MG_FP8_FORMAT], formats, 2, &fmt, err)) != GS_OK)
        return rc;
    if (g->precision != GS_PREC_BF16)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --fp8-format %s without --bf16: gridstep models FP8 "
                            "linear layers over bf16 training (add --bf16)", where, st->str[MG_FP8_FORMAT]);
    if (st->given[MG_FP8_RECIPE]) {
        gs__mg_where(origin, ws, st->at[MG_FP8_RECIPE], where, sizeof where);
        if ((rc = gs__mg_choice(where, "fp8-recipe", st->str[MG_FP8_RECIPE], recipes, 4, &recipe, err)) != GS_OK)
            return rc;
        if (recipe > 2)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --fp8-recipe %s: not supported: gridstep models the "
                                "delayed, tensorwise (per-tensor current) and mxfp8 scaling recipes", where,
                                recipes[recipe]);
    }
    g->fp8 = recipe == 2 ? GS_FP8_MX : recipe == 1 ? GS_FP8_CURRENT : GS_FP8_DELAYED;
    g->fp8_params = st->given[MG_FP8_PARAM];
    for (size_t i = 0; recipe != 0 && i < 3; i++) /* the delayed recipe's knobs (TE's DelayedScaling) */
        if (st->given[delayed_acts[i]] &&
            (rc = gs__import_ignored(ignored, err, "%s: --%s: ignored: the %s recipe keeps no amax history",
                                     gs__mg_where(origin, ws, st->at[delayed_acts[i]], where, sizeof where),
                                     delayed_names[i], recipes[recipe])) != GS_OK)
            return rc;
    if (recipe != 0)
        return GS_OK;
    static const char *const algos[] = {"most_recent", "max"};
    int algo = 0;
    if (st->given[MG_FP8_ALGO] &&
        (rc = gs__mg_choice(gs__mg_where(origin, ws, st->at[MG_FP8_ALGO], where, sizeof where),
                            "fp8-amax-compute-algo", st->str[MG_FP8_ALGO], algos, 2, &algo, err)) != GS_OK)
        return rc;
    g->fp8_amax_algo = algo ? GS_FP8_AMAX_MAX : GS_FP8_AMAX_MOST_RECENT;
    if (st->given[MG_FP8_HIST])
        g->fp8_amax_history = st->u[MG_FP8_HIST];
    if (st->given[MG_FP8_MARGIN] && st->u[MG_FP8_MARGIN] > 16)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --fp8-margin %" PRIu64 ": expected 0 to 16",
                            gs__mg_where(origin, ws, st->at[MG_FP8_MARGIN], where, sizeof where),
                            st->u[MG_FP8_MARGIN]);
    g->fp8_margin = st->given[MG_FP8_MARGIN] ? st->u[MG_FP8_MARGIN] : 0;
    return GS_OK;
}
