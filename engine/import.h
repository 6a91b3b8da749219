/* Importing a launch configuration as a scenario: an accelerate config YAML (FSDP or DDP), a
 * torchtitan train config (TOML) or the flags of a Megatron-LM command line, plus what those do not carry (the model when accelerate,
 * the cluster, the node count, the batch) from gs_import_opts.
 *
 * Every field of the input is either mapped onto the scenario or reported: fields with no effect
 * on a training step (addresses, ranks, checkpoint format, learning rate, ...) go to `ignored`
 * as "FIELD: reason"; unknown fields, unsupported values and combinations gridstep cannot model
 * are errors (GS_ERR_INPUT) placed at FILE:LINE:COL (accelerate), FILE:LINE (Megatron flags read
 * from a file) or "argument N" (Megatron flags given as one string), with a did-you-mean hint
 * when the name is close to a known one.
 *
 * Ownership: the scenario is built in caller storage (a plain value); `ignored` is the caller's
 * gs_diag, which receives owned strings; inputs are borrowed for the call. */
#ifndef GS_IMPORT_H
#define GS_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scenario.h"
#include "engine/status.h"

typedef struct gs_import_opts {
    const char *model;    /* model preset name; NULL: from the Megatron shape flags */
    const char *cluster;  /* cluster preset name (required) */
    uint64_t nodes;       /* 0: from the input (num_machines, torchrun --nnodes, dp x pp x tp) */
    uint64_t global_seqs; /* sequences per step; 0: from the input, else micro x dp */
    uint64_t micro_seqs;  /* sequences per micro-batch; 0: from the input, else 1 */
} gs_import_opts;

void gs_import_opts_init(gs_import_opts *o);

/* accelerate config YAML (the shape `accelerate config` writes and `gridstep mesh --emit
 * accelerate` prints). The grid is dp = num_processes, pp = tp = 1. */
gs_status gs_import_accelerate_file(const char *path, const gs_import_opts *o, gs_scenario *s,
                                    gs_diag *ignored, gs_error *err);
gs_status gs_import_accelerate_string(const char *text, size_t len, const char *name,
                                      const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                      gs_error *err);

/* torchtitan train config (TOML): its model (llama3 / llama2 flavors; --model for others),
 * sequence, batch, parallel degrees (HSDP / FSDP2 / DDP, tp, pp, cp), pipeline schedule, activation
 * checkpointing, compile and float8; December 2024's layout and 2025's. The node count comes
 * from --nodes, or from the degrees when data_parallel_shard_degree is fixed. args[0..nargs):
 * torchtitan's command-line overrides (`--section.key VALUE`, `--section.key=VALUE`, a bare
 * `--section.key` for true), applied over the file's values (messages say "argument N"). */
gs_status gs_import_torchtitan_file(const char *path, const char *const *args, size_t nargs,
                                    const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                    gs_error *err);
gs_status gs_import_torchtitan_command(const char *text, size_t len, const char *name,
                                       const char *const *args, size_t nargs, const gs_import_opts *o,
                                       gs_scenario *s, gs_diag *ignored, gs_error *err);
/* The same without overrides. */
gs_status gs_import_torchtitan_string(const char *text, size_t len, const char *name,
                                      const gs_import_opts *o, gs_scenario *s, gs_diag *ignored,
                                      gs_error *err);

/* torchtitan's model name and flavor for the gridstep presets it has (Llama 3 8B / 70B / 405B,
 * Llama 2 7B / 13B / 70B, deepseek_v3 16B / 236B / 671B, llama4 17bx16e / 17bx128e): the
 * preset's name for (name, flavor), NULL when none. */
const char *gs_torchtitan_preset(const char *name, const char *flavor);
/* The (name, flavor) of the preset model m is, but for its sequence length; 0 when none. */
int gs_torchtitan_flavor(const gs_model *m, const char **name, const char **flavor);
/* torchtitan's split of `layers` decoder layers over `stages` virtual stages when the embedding
 * weighs first_less layers and the output last_less (generate_llm_fqn_per_model_part): each
 * stage (layers + weights) / stages, the first (layers + weights) % stages one more, the first
 * less first_less and the last less last_less, as a layout (engine/pipeline_layout.h). 0, or -1
 * when a stage would hold no layer or more than 255, or stages exceed GS_LAYOUT_MAX. */
int gs_torchtitan_split(uint64_t layers, uint64_t stages, uint64_t first_less, uint64_t last_less, gs_layout *out);

/* Megatron-LM flags: a command line as the shell would split it (quotes, backslash-newline
 * continuations and # comments understood). A launcher prefix up to the first *.py word
 * (torchrun --nnodes N --nproc_per_node G ... pretrain_gpt.py) is allowed: its node count is
 * used, the rest has no effect on the step. `origin` names the input in messages: a file path
 * (messages say PATH:LINE) or NULL (messages say "argument N"). */
gs_status gs_import_megatron_args(const char *args, const char *origin, const gs_import_opts *o,
                                  gs_scenario *s, gs_diag *ignored, gs_error *err);
/* The same, reading the flags from a file (a launch script's command). */
gs_status gs_import_megatron_file(const char *path, const gs_import_opts *o, gs_scenario *s,
                                  gs_diag *ignored, gs_error *err);

#endif
