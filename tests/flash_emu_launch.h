/* The flash attention launchers of kernels/cuda/attention_flash.cu, redone on the CPU emulator
 * (tests/cuda_emu.h) with the same grid, block and shared-memory sizes (the body's helpers) and
 * the same kernels (kernels/cuda/attention_flash_body.h compiled as C). Included by one test
 * translation unit each (file-static functions); tests/cuda_emu.h must come first.
 *
 * Ownership: the launchers borrow every buffer for the call; D's scratch is theirs. */
#ifndef GS_TESTS_FLASH_EMU_LAUNCH_H
#define GS_TESTS_FLASH_EMU_LAUNCH_H

#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/attention_flash_body.h"
#include "tests/cuda_emu.h"

typedef struct flash_emu_args {
    const float *q, *k, *v, *out, *lse, *dout;
    float *wout, *wlse, *dsum, *dq, *dk, *dv;
    size_t ldq, ldkv, ldo, rows, seq, nh, group, hd;
    float scale;
    gs_dropout drop;
} flash_emu_args;

/* The attention dropout the launchers pass the kernels (zero: none), as gs_cu_attn_*_flash_dropout's
 * drop argument. */
static gs_dropout flash_emu_dropout;

static void flash_emu_fwd_thread(const void *p)
{
    const flash_emu_args *a = p;
    gs_flash_fwd_kernel(a->q, a->ldq, a->k, a->v, a->ldkv, a->wout, a->ldo, a->wlse, a->seq, a->nh, a->group, a->hd,
                        a->scale, a->drop);
}

static void flash_emu_d_thread(const void *p)
{
    const flash_emu_args *a = p;
    gs_flash_bwd_d_kernel(a->out, a->dout, a->ldo, a->dsum, a->rows, a->seq, a->nh, a->hd);
}

static void flash_emu_dq_thread(const void *p)
{
    const flash_emu_args *a = p;
    gs_flash_bwd_dq_kernel(a->q, a->ldq, a->k, a->v, a->ldkv, a->lse, a->dsum, a->dout, a->ldo, a->dq, a->seq, a->nh,
                           a->group, a->hd, a->scale, a->drop);
}

static void flash_emu_dkv_thread(const void *p)
{
    const flash_emu_args *a = p;
    gs_flash_bwd_dkv_kernel(a->q, a->ldq, a->k, a->v, a->ldkv, a->lse, a->dsum, a->dout, a->ldo, a->dk, a->dv, a->seq,
                            a->nh, a->group, a->hd, a->scale, a->drop);
}

/* gs_cu_attn_fwd_flash's arguments without the stream: 0 ok, 1 invalid shape, -1 emulator error. */
static int flash_emu_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out,
                         size_t ldo, float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, char *err,
                         size_t err_len)
{
    if (!gs_flash_args_ok(nseq, seq, nh, nkv, hd))
        return 1;
    if (!nseq || !seq || !nh)
        return 0;
    flash_emu_args a = {q, k, v, NULL, NULL, NULL, out, lse, NULL, NULL, NULL, NULL,
                        ldq, ldkv, ldo, nseq * seq, seq, nh, nh / nkv, hd, (float)(1.0 / sqrt((double)hd)),
                        flash_emu_dropout};
    return gs_emu_launch((unsigned)gs_flash_tiles(seq), (unsigned)nh, (unsigned)nseq, GS_FLASH_THREADS,
                         gs_flash_fwd_shared_bytes(hd), flash_emu_fwd_thread, &a, err, err_len);
}

/* gs_cu_attn_bwd_flash's arguments without the stream, the launches in the same order. */
static int flash_emu_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                         const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv,
                         size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len)
{
    if (!gs_flash_args_ok(nseq, seq, nh, nkv, hd))
        return 1;
    if (!nseq || !seq || !nh)
        return 0;
    float *dsum = malloc(nseq * nh * seq * sizeof *dsum);
    if (!dsum)
        return -1;
    flash_emu_args a = {q, k, v, out, lse, dout, NULL, NULL, dsum, dq, dk, dv,
                        ldq, ldkv, ldo, nseq * seq, seq, nh, nh / nkv, hd, (float)(1.0 / sqrt((double)hd)),
                        flash_emu_dropout};
    unsigned tiles = (unsigned)gs_flash_tiles(seq);
    int rc = gs_emu_launch((unsigned)gs_flash_d_blocks(nseq * seq, nh), 1, 1, GS_FLASH_D_THREADS, 0,
                           flash_emu_d_thread, &a, err, err_len);
    if (!rc)
        rc = gs_emu_launch(tiles, (unsigned)nkv, (unsigned)nseq, GS_FLASH_THREADS, gs_flash_bwd_dkv_shared_bytes(hd),
                           flash_emu_dkv_thread, &a, err, err_len);
    if (!rc)
        rc = gs_emu_launch(tiles, (unsigned)nh, (unsigned)nseq, GS_FLASH_THREADS, gs_flash_bwd_dq_shared_bytes(hd),
                           flash_emu_dq_thread, &a, err, err_len);
    free(dsum);
    return rc;
}

#endif
