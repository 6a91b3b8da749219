/* A mutant of the flash kernels for tests/check_flash_emu.c: the same body compiled with the
 * causal key bound one short (q0 + nq - 1 instead of q0 + nq), an off-by-one that only drops a
 * key tile for a query tile of exactly one row (seq = 32 m + 1), its diagonal key. The test shows
 * the shapes it runs catch it. */
#include "tests/flash_emu_mutant.h"

#include "tests/cuda_emu.h"
#define GS_FLASH_KEY_END(q0, nq) ((q0) + (nq) - 1)
#include "tests/flash_emu_launch.h"

int flash_mutant_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                     float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len)
{
    return flash_emu_fwd(q, ldq, k, v, ldkv, out, ldo, lse, nseq, seq, nh, nkv, hd, err, err_len);
}

int flash_mutant_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                     const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                     size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len)
{
    return flash_emu_bwd(q, ldq, k, v, ldkv, out, lse, dout, ldo, dq, dk, dv, nseq, seq, nh, nkv, hd, err, err_len);
}
