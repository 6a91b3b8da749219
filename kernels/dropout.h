/* Dropout masks: counter-based, the same bits on the host and on a GPU, and the same for every
 * grid. An element's fate is a pure function of (seed, step, site, layer, global sequence index,
 * its index within the sequence's tensor), so a TP rank that holds a slice of the heads or of the
 * tokens (sequence parallelism), a DP rank that holds other micro-batches, a pipeline stage and a
 * recomputation all draw exactly the masks one rank running the whole batch draws (the exec
 * contract: any grid gives the single rank's losses). Nothing is stored: the backward draws the
 * mask again (as FlashAttention's Philox offsets do).
 *
 * Indexing (h: hidden size, S: sequence length):
 *   hidden sites (the embedding's output, attention's and the MLP's output before the residual
 *   add): element (token pos, feature j) of a sequence is pos * h + j;
 *   attention probabilities: element (global head H, query a, key b) is (H * S + a) * S + b.
 * The draw is splitmix64 of the sequence's key plus the index (splitmix64 is built for such
 * counters); its top 24 bits are dropped below threshold = round(p * 2^24).
 *
 * Header-only: static inline functions, __host__ __device__ under nvcc. Ownership: none. */
#ifndef GS_DROPOUT_H
#define GS_DROPOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define GS_DROPOUT_FN static inline __host__ __device__
#else
#define GS_DROPOUT_FN static inline
#endif

/* The sites of one layer (and the embedding's, layer ignored). */
enum { GS_DROP_EMBED = 1, GS_DROP_ATTN = 2, GS_DROP_ATTN_OUT = 3, GS_DROP_MLP_OUT = 4 };

/* One call's dropout. threshold 0: none (every element kept, scale 1). */
typedef struct gs_dropout {
    uint32_t threshold; /* drop when the element's 24-bit draw is below it: round(p * 2^24) */
    float scale;        /* 1 / (1 - p): kept elements are scaled so the expectation is unchanged */
    uint64_t key;       /* the site's key: gs_dropout_site_key */
    uint64_t seq0;      /* global index of the call's first sequence */
    uint64_t first;     /* hidden sites: the call's first row's token index counted from the start of
                         * sequence seq0 (sequence parallelism: a TP rank's token offset); attention:
                         * the global index of the call's first head (TP: tp rank x local heads) */
    uint64_t seq_len;   /* S, tokens per sequence */
} gs_dropout;

GS_DROPOUT_FN uint64_t gs_dropout_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The key of one site of one layer at one optimizer step. */
GS_DROPOUT_FN uint64_t gs_dropout_site_key(uint64_t seed, uint64_t step, uint32_t site, uint64_t layer)
{
    /* a tag ("dropout") so no site key equals the data's or the init's streams */
    uint64_t k = gs_dropout_mix(seed ^ 0x64726F706F757400ull);
    k = gs_dropout_mix(k ^ step);
    return gs_dropout_mix(k ^ ((uint64_t)site << 56) ^ layer);
}

/* The key of one sequence at a site. */
GS_DROPOUT_FN uint64_t gs_dropout_seq_key(uint64_t site_key, uint64_t seq_index)
{
    return gs_dropout_mix(site_key ^ gs_dropout_mix(seq_index));
}

/* 1 when element idx of the sequence whose key is seq_key is kept. */
GS_DROPOUT_FN int gs_dropout_keep(uint64_t seq_key, uint64_t idx, uint32_t threshold)
{
    return (uint32_t)(gs_dropout_mix(seq_key + idx) >> 40) >= threshold;
}

/* The threshold of a drop probability p (0 <= p < 1): p rounded to a multiple of 2^-24, at most
 * 1 - 2^-24 (one draw in 2^24 kept, so the scale stays finite); below 2^-25, none. */
GS_DROPOUT_FN uint32_t gs_dropout_threshold(double p)
{
    if (p <= 0.0)
        return 0u;
    double t = p * 16777216.0 + 0.5;
    return t >= 16777215.0 ? 16777215u : (uint32_t)t;
}

#endif
