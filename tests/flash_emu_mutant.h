/* The flash kernels with a causal-bound bug (tests/flash_emu_mutant.c), on the CPU emulator:
 * the arguments and return values of tests/flash_emu_launch.h's flash_emu_fwd / flash_emu_bwd.
 * Ownership: every buffer is borrowed for the call. */
#ifndef GS_TESTS_FLASH_EMU_MUTANT_H
#define GS_TESTS_FLASH_EMU_MUTANT_H

#include <stddef.h>

int flash_mutant_fwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, float *out, size_t ldo,
                     float *lse, size_t nseq, size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len);
int flash_mutant_bwd(const float *q, size_t ldq, const float *k, const float *v, size_t ldkv, const float *out,
                     const float *lse, const float *dout, size_t ldo, float *dq, float *dk, float *dv, size_t nseq,
                     size_t seq, size_t nh, size_t nkv, size_t hd, char *err, size_t err_len);

#endif
