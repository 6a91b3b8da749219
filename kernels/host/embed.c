/* Token embedding lookup over a vocabulary slice (vocab-parallel under TP) and its backward. */
#include <string.h>

#include "kernels/host/kernels.h"

/* The token's row in the slice [vocab_lo, vocab_lo + vocab_n), or -1 when outside it. */
static long embed_row(int32_t tok, size_t vocab_lo, size_t vocab_n)
{
    if (tok < 0 || (size_t)tok < vocab_lo || (size_t)tok - vocab_lo >= vocab_n)
        return -1;
    return (long)((size_t)tok - vocab_lo);
}

void gs_k_embed_fwd(const int32_t *tok, size_t t, const float *w, size_t vocab_lo, size_t vocab_n, size_t h,
                    float *y)
{
    for (size_t r = 0; r < t; r++) {
        long row = embed_row(tok[r], vocab_lo, vocab_n);
        if (row < 0)
            memset(y + r * h, 0, h * sizeof(float));
        else
            memcpy(y + r * h, w + (size_t)row * h, h * sizeof(float));
    }
}

void gs_k_embed_bwd(const int32_t *tok, size_t t, const float *dy, size_t vocab_lo, size_t vocab_n, size_t h,
                    float *dw)
{
    for (size_t r = 0; r < t; r++) {
        long row = embed_row(tok[r], vocab_lo, vocab_n);
        if (row >= 0)
            gs_k_add(dw + (size_t)row * h, dy + r * h, h);
    }
}
