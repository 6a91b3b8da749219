/* Parameter sweeps: parsing `--vary KEY=V1,V2,...|A..B`, the cartesian grid of points they span,
 * applying one point to a scenario (with the grid re-derived), and `I/N` shard specifications.
 *
 * Ownership: gs_sweep and gs_sweep_axis are plain values in caller storage (fixed arrays, no
 * heap); gs_sweep_apply writes a new scenario into caller storage and borrows the base. */
#ifndef GS_SWEEP_H
#define GS_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scenario.h"
#include "engine/status.h"

typedef enum gs_sweep_key {
    GS_SWEEP_GPUS,         /* total GPUs (nodes = gpus / gpus_per_node; fewer than a node: one partial node) */
    GS_SWEEP_NODES,        /* nodes */
    GS_SWEEP_NIC,          /* NIC preset name (gridstep presets nics) */
    GS_SWEEP_NIC_GBPS,     /* NIC line rate, Gb/s (achievable bandwidth scaled with it) */
    GS_SWEEP_FABRIC,       /* intra-node fabric preset name (gridstep presets fabrics) */
    GS_SWEEP_GLOBAL_BATCH, /* sequences per step */
    GS_SWEEP_MICRO,        /* sequences per micro-batch */
    GS_SWEEP_SEQ,          /* sequence length, tokens */
    GS_SWEEP_TP,
    GS_SWEEP_PP,
    GS_SWEEP_DP,
    GS_SWEEP_SHARDING,     /* no_shard | shard_grad_op | full_shard | hybrid_shard | zero1..3 */
    GS_SWEEP_RECOMPUTE,    /* none | selective | full */
    GS_SWEEP_PIPELINE,     /* 1f1b | gpipe (interleaved needs virtual stages: not a sweep key) */
    GS_SWEEP_OFFLOAD,      /* 0 | 1 */
    GS_SWEEP_SP,           /* sequence_parallel: 0 | 1 */
    GS_SWEEP_TP_OVERLAP,   /* tp_comm_overlap: 0 | 1 */
    GS_SWEEP_PARAM_GATHER, /* overlap_param_gather: 0 | 1 */
    GS_SWEEP_FLASH,        /* flash_attention: 0 | 1 */
    GS_SWEEP_XENT,         /* cross_entropy: unfused | fused */
    GS_SWEEP_FRAMEWORK,    /* megatron | fsdp1 | fsdp2 | deepspeed | auto */
    GS_SWEEP_COMPILE,      /* compile: 0 | 1 */
    GS_SWEEP_ATTENTION,    /* flash1 | flash2 | flash3 | cudnn | sdpa | triton | xformers | unfused | auto */
    GS_SWEEP_POWER_W,      /* the GPU's power cap, watts (cluster.gpu.power_w) */
    GS_SWEEP_PRECISION,    /* bf16 | fp16 | fp32 | fp8 (bf16 with FP8 linear layers, the framework's recipe) */
    GS_SWEEP_CP,           /* context parallelism (dp = GPUs / (cp x pp x tp) unless dp is varied too) */
    GS_SWEEP_EP,           /* expert parallelism (a MoE model's; carved out of dp x cp: dp unchanged) */
    GS_SWEEP_ETP,          /* expert tensor parallelism (a divisor of tp; carved out too) */
    GS_SWEEP_CUDA_GRAPHS,  /* cuda_graphs: 0 | 1 (Megatron; other frameworks ignore it) */
    GS_SWEEP_CP_COMM,      /* p2p | all_gather | a2a | a2a+p2p (strategy.cp_comm; a2a+p2p with cp_a2a) */
    GS_SWEEP_CP_A2A,       /* hierarchical CP's a2a level (grid.cp_a2a; 1: none; a2a+p2p only) */
    GS_SWEEP_KEY_COUNT
} gs_sweep_key;

#define GS_SWEEP_MAX_AXES 6
#define GS_SWEEP_MAX_VALUES 64
#define GS_SWEEP_VALUE_BYTES 48

typedef struct gs_sweep_axis {
    gs_sweep_key key;
    size_t n;                                          /* values */
    char values[GS_SWEEP_MAX_VALUES][GS_SWEEP_VALUE_BYTES]; /* canonical text ("64", "200", "full_shard") */
} gs_sweep_axis;

/* The axes in --vary order. Point p's value index on axis a: the first axis varies slowest
 * (nested loops in the order given, the last axis innermost). */
typedef struct gs_sweep {
    gs_sweep_axis axes[GS_SWEEP_MAX_AXES];
    size_t naxes;
} gs_sweep;

void gs_sweep_init(gs_sweep *sw);

/* Parses one `KEY=V1,V2,...` or `KEY=A..B` and appends it as an axis. A..B is allowed for the
 * count keys (gpus, nodes, global_batch, micro, seq, tp, pp, dp) and nic_gbps: A, 2A, 4A, ...
 * while <= B (1..64 = 1,2,4,8,16,32,64; 3..20 = 3,6,12). Names are checked against the presets
 * and strategy names. Errors (GS_ERR_INPUT) say what was found and what was expected: unknown key,
 * empty or malformed value, a key given twice, too many axes or values. */
gs_status gs_sweep_add(gs_sweep *sw, const char *arg, gs_error *err);

/* Number of points: the product of the axes' value counts (1 with no axes). */
uint64_t gs_sweep_points(const gs_sweep *sw);

/* Value index of point `point` on every axis (idx has naxes entries). */
void gs_sweep_point_indices(const gs_sweep *sw, uint64_t point, size_t *idx);

/* The scenario of one point: base with each axis' value applied, then the grid re-derived:
 * when dp is not varied, dp = GPUs / (tp x pp) (GPUs from the cluster after gpus/nodes);
 * when dp is varied and neither gpus nor nodes is, the GPU count follows dp x pp x tp (nodes =
 * GPUs / gpus_per_node, or one partial node). A point whose values cannot make a cluster or
 * grid (GPUs not a multiple of the node size, GPUs not divisible by tp x pp) fails with
 * GS_ERR_INPUT and a one-line reason; the mesh, batch and memory checks are the caller's. */
gs_status gs_sweep_apply(const gs_scenario *base, const gs_sweep *sw, uint64_t point, gs_scenario *out,
                         gs_error *err);

const char *gs_sweep_key_name(gs_sweep_key k); /* "gpus", "nic_gbps", ... */
/* 1 for keys whose values are integers (gpus, nodes, global_batch, micro, seq, tp, pp, dp,
 * offload), 0 otherwise. */
int gs_sweep_key_is_count(gs_sweep_key k);
/* 1 for keys whose values are numbers (the count keys and nic_gbps). */
int gs_sweep_key_is_number(gs_sweep_key k);
/* 1 for keys that are GPU-count-like (gpus, nodes): plotted on a log2 axis. */
int gs_sweep_key_is_scale(gs_sweep_key k);

/* Parses a shard `I/N` (0 <= I < N, N >= 1): point or candidate i belongs to shard i % N.
 * Errors name the option. */
gs_status gs_shard_parse(const char *opt, const char *s, uint64_t *index, uint64_t *count, gs_error *err);

#endif
