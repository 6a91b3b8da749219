/* The full checkpoint: every tensor whole in one safetensors file (exec/checkpoint.h). */
#include "exec/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/atomic_file.h"
#include "exec/ckpt_internal.h"
#include "exec/ckpt_own.h"
#include "exec/safetensors.h"

/* ---- full file ------------------------------------------------------------------------------ */

gs_status gs_ckpt_save_full(const char *path, const gs_ckpt_meta *meta, const gs_ckpt_full_tensor *tensors,
                            size_t count, gs_ckpt_hook hook, void *hook_arg, gs_error *err)
{
    gs_status st = GS_OK;
    gs_atomic_file af = {0};
    gs_st_write_tensor *wt = calloc(count + 1, sizeof *wt);
    char step_s[32], dp_s[16], pp_s[16], tp_s[16];
    if (!wt)
        return gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", path);
    for (size_t i = 0; i < count; i++) {
        if (tensors[i].ndim > GS_CKPT_MAX_DIMS) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: too many dimensions", path,
                              tensors[i].name ? tensors[i].name : "(null)");
            goto out;
        }
        wt[i].name = tensors[i].name;
        wt[i].dtype = GS_ST_F32;
        wt[i].ndim = tensors[i].ndim;
        memcpy(wt[i].shape, tensors[i].shape, sizeof wt[i].shape);
        wt[i].data = tensors[i].data;
    }
    snprintf(step_s, sizeof step_s, "%llu", (unsigned long long)meta->step);
    snprintf(dp_s, sizeof dp_s, "%d", meta->dp);
    snprintf(pp_s, sizeof pp_s, "%d", meta->pp);
    snprintf(tp_s, sizeof tp_s, "%d", meta->tp);
    const gs_st_write_meta md[] = {
        {"format", "pt"}, {"gridstep.step", step_s}, {"gridstep.dp", dp_s}, {"gridstep.pp", pp_s},
        {"gridstep.tp", tp_s}, {"gridstep.scenario", meta->scenario ? meta->scenario : ""},
    };
    st = gs_ckpt_remove_stale_full(path, err);
    if (st == GS_OK)
        st = gs_atomic_file_begin(&af, path, err);
    if (st != GS_OK)
        goto out;
    st = gs_safetensors_write_stream(af.stream, path, wt, count, md, sizeof md / sizeof md[0], NULL, err);
    if (st != GS_OK) {
        gs_atomic_file_abort(&af);
        goto out;
    }
    if (hook)
        hook("full-written", af.tmp_path, hook_arg);
    st = gs_atomic_file_commit(&af, err);
    if (st == GS_OK && hook)
        hook("full-renamed", path, hook_arg);
out:
    free(wt);
    return st;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

gs_status gs_ckpt_load_full(const char *path, const gs_ckpt_rank_view *view, gs_error *err)
{
    gs_st_file f;
    uint16_t *tmp = NULL;
    gs_status st = gs_safetensors_open(&f, path, err);
    if (st != GS_OK)
        return st;
    for (size_t s = 0; s < view->shard_count; s++) {
        const gs_ckpt_shard *sh = &view->shards[s];
        const gs_st_tensor *t = sh->name ? gs_st_header_find(&f.header, sh->name) : NULL;
        char a[160], b[160];
        if (!t) {
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: not in the file", path,
                              sh->name ? sh->name : "(null)");
            goto out;
        }
        if (!gs__ckpt_same_shape(t->ndim, t->shape, sh->ndim, sh->shape) ||
            (t->dtype != GS_ST_F32 && t->dtype != GS_ST_BF16)) {
            gs__ckpt_fmt_shape(a, sizeof a, t->ndim, t->shape);
            gs__ckpt_fmt_shape(b, sizeof b, sh->ndim, sh->shape);
            st = gs_error_set(err, GS_ERR_INPUT, "checkpoint %s: tensor %s: %s %s in the file, F32 %s expected", path,
                              sh->name, gs_st_dtype_name(t->dtype), a, b);
            goto out;
        }
        uint64_t numel = gs_st_tensor_numel(t);
        for (size_t p = 0; p < sh->piece_count; p++) {
            const gs_ckpt_piece *pc = &sh->pieces[p];
            if (pc->offset > numel || pc->count > numel - pc->offset || (pc->count && !pc->data)) {
                st = gs_error_set(err, GS_ERR_INPUT,
                                  "checkpoint %s: tensor %s: elements [%llu, +%llu) requested, it has %llu", path,
                                  sh->name, (unsigned long long)pc->offset, (unsigned long long)pc->count,
                                  (unsigned long long)numel);
                goto out;
            }
            if (t->dtype == GS_ST_F32) {
                st = gs_safetensors_read(&f, t, pc->offset * 4, pc->data, pc->count * 4, err);
            } else {
                free(tmp);
                tmp = malloc(pc->count * 2 + 1);
                if (!tmp) {
                    st = gs_error_set(err, GS_ERR_NOMEM, "checkpoint %s: out of memory", path);
                    goto out;
                }
                st = gs_safetensors_read(&f, t, pc->offset * 2, tmp, pc->count * 2, err);
                for (uint64_t i = 0; st == GS_OK && i < pc->count; i++)
                    pc->data[i] = bf16_to_f32(tmp[i]);
            }
            if (st != GS_OK)
                goto out;
        }
    }
out:
    free(tmp);
    gs_safetensors_close(&f);
    return st;
}
