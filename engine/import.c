/* Launch configurations read back as scenarios: what both formats share (the scenario before
 * the input, its nodes and batch after, the list of ignored fields). The formats themselves are
 * engine/import_accelerate.c and engine/import_megatron.c. */
#include "engine/import.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/import_internal.h"

void gs_import_opts_init(gs_import_opts *o)
{
    memset(o, 0, sizeof *o);
}

static void base_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    const char *dot = strrchr(b, '.');
    if (dot && dot != b)
        n = (size_t)(dot - b);
    if (n >= len)
        n = len - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

/* The scenario before the input is read: defaults, the cluster preset, the model preset when
 * given; grid 1 x 1 x 1 in Megatron's order. */
gs_status gs__import_base(const char *origin, const gs_import_opts *o, gs_scenario *s,
                             gs_error *err)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", origin);
    base_name(origin, s->name, sizeof s->name);
    gs_strategy_defaults(&s->strategy);
    s->grid.dp = s->grid.pp = s->grid.tp = 1;
    s->grid.order[0] = GS_DIM_TP;
    s->grid.order[1] = GS_DIM_DP;
    s->grid.order[2] = GS_DIM_PP;
    if (!o->cluster)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--cluster is required with an imported config: the config does not "
                            "name the hardware (see gridstep presets clusters)");
    const gs_cluster *c = gs_cluster_preset_find(o->cluster);
    if (!c)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--cluster: found unknown cluster '%s' (did you mean '%s'?), expected "
                            "a preset from gridstep presets clusters",
                            o->cluster, gs_cluster_preset_nearest(o->cluster));
    s->cluster = *c;
    if (o->model) {
        const gs_model *m = gs_model_preset_find(o->model);
        if (!m)
            return gs_error_set(err, GS_ERR_INPUT,
                                "--model: found unknown model '%s' (did you mean '%s'?), expected "
                                "a preset from gridstep presets models",
                                o->model, gs_model_preset_nearest(o->model));
        s->model = *m;
    }
    return GS_OK;
}

/* Nodes, batch and the final checks of model and cluster. in_micro / in_global: the input's
 * batch (0 when it has none). */
gs_status gs__import_finish(const gs_import_opts *o, uint64_t nodes, uint64_t in_micro,
                               uint64_t in_global, gs_scenario *s, gs_error *err)
{
    gs_status st;
    s->cluster.nodes = nodes;
    if ((st = gs_cluster_validate(&s->cluster, err)) != GS_OK) {
        gs_error_prefix(err, "%s", s->path);
        return st;
    }
    if ((st = gs_model_validate(&s->model, err)) != GS_OK) {
        gs_error_prefix(err, "%s: model", s->path);
        return st;
    }
    if (s->strategy.fp8 != GS_FP8_OFF && !(s->cluster.gpu.peak_flops_fp8 > 0.0))
        return gs_error_set(err, GS_ERR_INPUT, "%s: FP8 training on GPU %s, which has no FP8 tensor cores: expected "
                            "a Hopper or later cluster (--cluster dgx-h100, ...)", s->path, s->cluster.gpu.name);
    if (s->strategy.fp8 == GS_FP8_MX && s->cluster.gpu.compute_capability < 100)
        return gs_error_set(err, GS_ERR_INPUT, "%s: the mxfp8 recipe on GPU %s: block-scaled FP8 GEMMs need Blackwell "
                            "tensor cores: expected a Blackwell cluster (--cluster dgx-b200, ...)", s->path,
                            s->cluster.gpu.name);
    s->batch.micro_seqs = o->micro_seqs ? o->micro_seqs : in_micro ? in_micro : 1;
    s->batch.global_seqs = o->global_seqs ? o->global_seqs : in_global;
    if (!s->batch.global_seqs &&
        gs_mul_u64(s->batch.micro_seqs, s->grid.dp, &s->batch.global_seqs) != 0)
        return gs_error_set(err, GS_ERR_OVERFLOW, "%s: micro x dp overflows", s->path);
    return GS_OK;
}

gs_status gs__import_ignored(gs_diag *ignored, gs_error *err, const char *fmt, ...)
{
    char msg[GS_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (gs_diag_warn(ignored, "%s", msg) != GS_OK)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory listing ignored fields");
    return GS_OK;
}
