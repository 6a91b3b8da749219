/* Seeded synthetic data and parameter init, counter-based: every token and every weight is a
 * pure function of its seed and its index (splitmix64 hashing, Box-Muller for normals), so any
 * rank can produce any shard without communication. */
#include <math.h>

#include "kernels/host/kernels.h"

/* Steele, Lea and Flood's splitmix64 finalizer (a bijection on 64 bits). */
static uint64_t data_splitmix64(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* A 64-bit hash of (seed, stream, counter). */
static uint64_t data_hash3(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return data_splitmix64(data_splitmix64(data_splitmix64(seed) ^ stream) ^ counter);
}

/* Uniform in (0, 1] from the top 53 bits. */
static double data_uniform_open0(uint64_t h)
{
    return ((double)(h >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* Chance (out of 4) that a token follows the fixed successor map rather than being drawn at random. */
enum { DATA_FOLLOW_OF_4 = 3 };

/* The fixed successor of token `prev`: an affine map mod vocab, what the model can learn. */
static uint64_t data_successor(uint64_t prev, uint64_t vocab)
{
    return (prev * UINT64_C(2654435761) + UINT64_C(12345)) % vocab;
}

void gs_k_tokens(uint64_t seed, uint64_t seq_index, size_t s, size_t vocab, int32_t *tokens)
{
    /* The sequence's stream: a tag ("tokens") XOR seq_index, so it is not one of the small tensor
     * ids that init hashes with the same seed. */
    uint64_t stream = UINT64_C(0x746F6B656E730000) ^ seq_index;
    uint64_t prev = 0;
    for (size_t pos = 0; pos <= s; pos++) {
        uint64_t h = data_hash3(seed, stream, pos);
        uint64_t tok;
        if (pos > 0 && (h & 3) < DATA_FOLLOW_OF_4)
            tok = data_successor(prev, vocab);
        else
            tok = (h >> 2) % vocab;
        tokens[pos] = (int32_t)tok;
        prev = tok;
    }
}

void gs_k_init_normal(float *w, size_t n, uint64_t seed, uint64_t tensor_id, uint64_t offset0, float std)
{
    const double two_pi = 6.283185307179586476925286766559;
    /* elements 2q and 2q+1 share one Box-Muller draw: its hashes, log and square root are taken
     * once for both (each element's value is the same function of its index as when drawn alone) */
    for (size_t i = 0; i < n;) {
        uint64_t e = offset0 + i;
        uint64_t pair = e >> 1;
        double u1 = data_uniform_open0(data_hash3(seed, tensor_id, 2 * pair));
        double u2 = data_uniform_open0(data_hash3(seed, tensor_id, 2 * pair + 1));
        double radius = sqrt(-2.0 * log(u1));
        if (e & 1) {
            w[i++] = (float)((double)std * (radius * sin(two_pi * u2)));
            continue;
        }
        w[i++] = (float)((double)std * (radius * cos(two_pi * u2)));
        if (i < n)
            w[i++] = (float)((double)std * (radius * sin(two_pi * u2)));
    }
}
