/* A custom pipeline layout: how many decoder layers each virtual pipeline stage holds, as
 * Megatron-Core's --pipeline-model-parallel-layout writes it
 * (megatron/core/transformer/pipeline_parallel_layer_layout.py): virtual stages separated by
 * '|', in the order k = chunk x pp + stage; 'E' the embedding (the first stage's first chunk),
 * 't' a decoder layer, 'm' a multi-token prediction module, 'L' the loss (the last stage's last
 * chunk); "(...)*n" and "x*n" repeat, commas are cosmetic. NeMo's DeepSeek-V3 recipe on pp 8
 * with 2 virtual stages: "Et*4|(t*4|)*14tL".
 *
 * Ownership: gs_layout is a plain value (no allocation). */
#ifndef GS_PIPELINE_LAYOUT_H
#define GS_PIPELINE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define GS_LAYOUT_MAX 256 /* virtual stages (pp x virtual_stages) a layout may name */

typedef struct gs_layout {
    uint16_t n;                   /* virtual stages; 0: no layout (the even split's rules) */
    uint8_t layers[GS_LAYOUT_MAX]; /* decoder layers of virtual stage k = chunk x pp + stage */
    uint8_t mtp;                  /* 'm' modules, all in the last virtual stage */
} gs_layout;

/* Parses a Megatron layout string into out. 0, or -1 with the reason in why: an unknown
 * character, an unbalanced parenthesis, a repeat without a count, more than GS_LAYOUT_MAX virtual
 * stages or 255 layers in one, 'E' anywhere but the start, 'L' anywhere but the end, an 'm' outside
 * the last virtual stage or after its 'L', a virtual stage without a decoder layer (gridstep
 * builds none), or an expansion past 64 KiB. */
int gs_layout_parse(const char *s, gs_layout *out, char *why, size_t len);

/* The layout in Megatron's syntax, runs of three or more equal stages folded:
 * "Et*4|(t*4|)*14tL". */
void gs_layout_format(const gs_layout *l, char *buf, size_t len);

/* Decoder layers of virtual stages 0 .. k-1 (the first layer of stage k). */
uint64_t gs_layout_layers_before(const gs_layout *l, uint64_t k);
/* Decoder layers in all virtual stages. */
uint64_t gs_layout_total(const gs_layout *l);

#endif
