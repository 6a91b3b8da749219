/* Dropout of hidden activations (kernels/host/kernels.h: gs_k_dropout_rows), masks drawn as
 * kernels/dropout.h says. */
#include "kernels/host/kernels.h"

void gs_k_dropout_rows(float *x, size_t rows, size_t h, const gs_dropout *drop)
{
    if (!drop || !drop->threshold)
        return;
    uint64_t S = drop->seq_len, cur = UINT64_MAX, sk = 0;
    for (size_t r = 0; r < rows; r++) {
        uint64_t tok = drop->first + r, seq = drop->seq0 + tok / S, pos = tok % S;
        if (seq != cur) {
            sk = gs_dropout_seq_key(drop->key, seq);
            cur = seq;
        }
        float *row = x + r * h;
        for (size_t j = 0; j < h; j++)
            row[j] = gs_dropout_keep(sk, pos * h + j, drop->threshold) ? row[j] * drop->scale : 0.0f;
    }
}
