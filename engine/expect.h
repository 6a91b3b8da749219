/* A scenario's `expect:` block: a published measurement (metric, value, the source's FLOP
 * formula, citation) and the same metric computed from a simulated report, so that
 * `gridstep validate` can print predicted against published.
 *
 * Ownership: gs_expect is a plain value (fixed-size strings, no heap pointers); the loader
 * builds it in caller storage and frees its parser state before returning. */
#ifndef GS_EXPECT_H
#define GS_EXPECT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/report.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* What the published number measures, and how the prediction is computed from the report.
 * Names as written in scenarios are gs_expect_metric_name(). */
typedef enum gs_expect_metric {
    /* Hardware TFLOP/s per GPU by Narayanan et al. SC'21 Eq. 3 (full recompute counted):
     * gs_expect_eq3_flops(model, global batch) / (predicted step s x GPUs) / 1e12. */
    GS_EXPECT_TFLOPS_PER_GPU_EQ3,
    /* MFU by Megatron-Core's num_floating_point_operations (no recompute, full s^2 attention):
     * gs_expect_megatron_flops(model, global batch) / (predicted step s x GPUs x peak), with
     * peak = peak_flops (default 989e12, H100 SXM dense BF16, the source's denominator). */
    GS_EXPECT_MFU_MEGATRON,
    /* Our report's own numbers, for sources that publish them directly: */
    GS_EXPECT_TFLOPS_PER_GPU_HW,   /* report hardware_flops / (step x GPUs) / 1e12 */
    GS_EXPECT_TFLOPS_PER_GPU,      /* report tflops_per_gpu (model FLOPs) */
    GS_EXPECT_MFU,                 /* report mfu (fraction) */
    GS_EXPECT_TOKENS_PER_S_PER_GPU,/* report tokens_per_s_per_gpu */
    GS_EXPECT_STEP_TIME_S,         /* report step_time_s */
    /* Model FLOP/s by the PaLM / nanoGPT / MosaicML / FlashAttention convention: per token
     * 6 N + 12 L (a d_head) s FLOPs (N parameters, all or without the embedding per palm_params;
     * L layers, a heads of d_head, s the sequence; no causal discount):
     * gs_expect_palm_flops(model, global batch, palm_non_embedding) / (predicted step s x GPUs). */
    GS_EXPECT_TFLOPS_PALM,         /* TFLOP/s per GPU */
    GS_EXPECT_MFU_PALM,            /* fraction of peak_tflops (default the GPU's dense peak) */
    GS_EXPECT_METRIC_COUNT
} gs_expect_metric;

/* Relative tolerance when the block names none: the published-runs target, 10%. */
#define GS_EXPECT_DEFAULT_TOLERANCE 0.10
/* Denominator of mfu_megatron when the block names no peak_tflops: H100 SXM dense BF16,
 * 989 TFLOP/s, the peak the Megatron-Core weak-scaling table's MFU column is consistent with
 * (shared/reference/README.md). FLOP/s per GPU. */
#define GS_EXPECT_MEGATRON_PEAK_FLOPS 989e12

#define GS_EXPECT_TEXT_BYTES 512

typedef struct gs_expect {
    gs_expect_metric metric;
    double value;              /* the published number, in the metric's unit (TFLOP/s per GPU,
                                  fraction, tokens/s per GPU, seconds) */
    double tolerance;          /* relative; |predicted - value| / value within it is "ok" */
    double peak_flops;         /* mfu_megatron / mfu_palm denominator, FLOP/s per GPU (0: the
                                  metric's default) */
    int palm_non_embedding;    /* palm metrics: 1 when N leaves out the token and position
                                  embeddings (KempnerForge, OLMo-core), 0 all parameters */
    char dataset[64];          /* the source family the figure belongs to ("llm-foundry",
                                  "fms-fsdp", ...; empty: none): validate's leave-one-source-out
                                  fits group by it */
    char formula[GS_EXPECT_TEXT_BYTES]; /* the source's FLOP formula, as written in the file */
    char source[GS_EXPECT_TEXT_BYTES];  /* citation */
    uint32_t line, col;        /* 1-based position of the `expect:` value in the file */
} gs_expect;

/* Reads the `expect` key of the scenario file at path (the rest of the file is the scenario
 * loader's business and is not checked here). *present = 0 and GS_OK when the file has no
 * `expect` key (or is not a mapping at the top level). Errors carry
 * "file:line:column: found X, expected Y": unknown keys, a missing metric, value, formula or
 * source, an unknown metric, a value that is not a positive number, a tolerance outside (0, 1]. */
gs_status gs_expect_load(const char *path, gs_expect *out, int *present, gs_error *err);
/* The same on in-memory text; name is used in messages ("<string>" when NULL). */
gs_status gs_expect_load_string(const char *text, size_t len, const char *name, gs_expect *out,
                                int *present, gs_error *err);

/* The predicted value of e->metric for scenario s simulated into report r, in the metric's
 * unit; 0 when the report has no step time. */
double gs_expect_predicted(const gs_expect *e, const gs_scenario *s, const gs_report *r);

/* Signed relative error (predicted - published) / published. */
double gs_expect_error(const gs_expect *e, double predicted);

/* Narayanan et al. SC'21 Eq. 3, FLOPs of one iteration with full activation recomputation:
 * 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), B = global_seqs, s = m->seq, l = m->layers,
 * h = m->hidden, V = m->vocab. */
double gs_expect_eq3_flops(const gs_model *m, double global_seqs);

/* Megatron-Core num_floating_point_operations (training.py), model FLOPs of one iteration:
 * 12 B s L h^2 [ (1 + g/a + s/h)(q/h) + (ffn/h)(3/2 if SwiGLU else 1) + V/(2 L h) ],
 * a = heads, g = kv_heads (query groups), q = head_dim x heads (kv_channels x a), one expert.
 * With MHA, q = h, ffn = 4h, no gating: 72 B s L h^2 (1 + s/(6h) + V/(12 L h)). */
double gs_expect_megatron_flops(const gs_model *m, double global_seqs);

/* PaLM-convention FLOPs of one step: B s (6 N + 12 L a d_head s), B = global_seqs, N =
 * gs_model_params (less gs_model_embedding_params when non_embedding). */
double gs_expect_palm_flops(const gs_model *m, double global_seqs, int non_embedding);

/* Names as written in scenarios; gs_expect_metric_parse returns 0 ok, -1 unknown. */
const char *gs_expect_metric_name(gs_expect_metric m);
int gs_expect_metric_parse(const char *s, gs_expect_metric *out);
/* 1 for metrics that are fractions (mfu, mfu_megatron): print as percentages. */
int gs_expect_metric_is_fraction(gs_expect_metric m);
/* 1 for metrics that fall as the step gets faster (step_time_s); every other metric is a rate
 * (FLOP/s, MFU, tokens/s) and rises. A bias is read in one direction whatever the metric: the
 * speed error is the error for a rate and minus the error for a time, so + always means the
 * simulated step is faster than the measured one. */
int gs_expect_metric_lower_is_faster(gs_expect_metric m);

#endif
