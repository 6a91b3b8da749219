/* Launch configurations drawn from a scenario and its mesh: the torchrun line, an accelerate FSDP
 * config YAML, Megatron-LM flags and a Slurm sbatch script; pure text generation.
 *
 * Ownership: everything here writes into caller storage (gs_launch_grid, gs_text) and borrows
 * the scenario and mesh for the duration of the call.
 *
 * What a launcher cannot express is never emitted silently wrong. Two kinds of mismatch:
 *  - the launcher has no way to say it (TP or PP in accelerate's FSDP config, ZeRO-1 or ZeRO-2
 *    in FSDP, hybrid_shard, shard_grad_op or CPU offload in Megatron-LM, GPipe in Megatron-LM,
 *    an order Megatron cannot draw): an error (GS_ERR_INPUT) naming the field, its value and the
 *    launcher that can;
 *  - the launcher says something close that gridstep schedules the same, or the setting lives
 *    in the training code rather than the launcher (zero3 as FULL_SHARD, flash attention, DDP
 *    bucket size): the document carries a "# note:" comment line naming the difference. */
#ifndef GS_LAUNCH_H
#define GS_LAUNCH_H

#include <stddef.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"
#include "engine/text.h"

typedef enum gs_launch_kind {
    GS_LAUNCH_TORCHRUN,   /* torchrun line + the accelerate YAML (or Megatron flags with TP/PP) */
    GS_LAUNCH_ACCELERATE, /* the accelerate FSDP config YAML alone */
    GS_LAUNCH_MEGATRON,   /* torchrun + pretrain_gpt.py with Megatron-LM flags */
    GS_LAUNCH_SLURM,      /* sbatch script: srun torchrun (train.py or pretrain_gpt.py) */
    GS_LAUNCH_TORCHTITAN, /* a torchtitan train config (TOML), engine/launch_torchtitan.c */
    GS_LAUNCH_KIND_COUNT
} gs_launch_kind;

const char *gs_launch_kind_name(gs_launch_kind k);
/* 0 ok, -1 unknown name. */
int gs_launch_kind_parse(const char *s, gs_launch_kind *out);

/* Bytes of one line of gs_launch_grid. */
#define GS_LAUNCH_LINE_BYTES 512

/* The grid alone as launch strings (what `gridstep mesh` prints under "launch:"). */
typedef struct gs_launch_grid {
    char order[16];                           /* "tp-dp-pp" */
    char megatron[GS_LAUNCH_LINE_BYTES];      /* --tensor/--pipeline-model-parallel-size [...] */
    char megatron_note[GS_LAUNCH_LINE_BYTES]; /* "" when the order is Megatron's default */
    char device_mesh[GS_LAUNCH_LINE_BYTES];   /* init_device_mesh(...) */
    char torchrun[GS_LAUNCH_LINE_BYTES];      /* torchrun --nnodes ... train.py */
} gs_launch_grid;

void gs_launch_grid_build(const gs_mesh *m, gs_launch_grid *l);

/* The HF decoder-layer class FSDP wraps for the model: LlamaDecoderLayer for Llama-shaped models
 * (SwiGLU, RMSNorm, RoPE), GPT2Block for GPT-shaped ones (GELU, LayerNorm, learned positions),
 * else NULL (the caller writes a placeholder). */
const char *gs_launch_layer_class(const gs_model *m);

/* 1 when the launcher can express the scenario; else 0 with the reason in why (len bytes). */
int gs_launch_accelerate_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len);
int gs_launch_megatron_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len);
int gs_launch_torchtitan_fits(const gs_scenario *s, const gs_mesh *m, char *why, size_t len);

/* The torchtitan config of a scenario gs_launch_torchtitan_fits accepts (engine/launch_torchtitan.c;
 * gs_launch_emit calls it). */
gs_status gs__launch_torchtitan(const gs_scenario *s, gs_text *out);

/* Appends the document of kind k to out. torchrun and slurm launch train.py with the accelerate
 * config when accelerate fits, else pretrain_gpt.py with Megatron-LM flags; a scenario neither
 * fits is GS_ERR_INPUT naming both reasons. GS_ERR_NOMEM when out cannot grow. */
gs_status gs_launch_emit(const gs_scenario *s, const gs_mesh *m, gs_launch_kind k, gs_text *out,
                         gs_error *err);

#endif
