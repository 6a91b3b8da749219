/* What engine/launch.c shares with engine/launch_megatron.c: the output document with its sticky
 * status and the lines both write (the subject, the training code's notes, the torchrun line),
 * and the Megatron-LM flags the torchrun and Slurm launches reuse.
 *
 * Ownership: a document borrows its text for the writes; nothing here allocates beyond it. */
#ifndef GS_LAUNCH_INTERNAL_H
#define GS_LAUNCH_INTERNAL_H

#include <stdarg.h>

#include "engine/launch.h"

/* An output document with a sticky status: after a failed append every later one is skipped. */
typedef struct launch_doc {
    gs_text *t;
    gs_status st;
} launch_doc;

/* Appends the formatted text (any length). */
void gs__launch_vput(launch_doc *d, const char *fmt, va_list ap);
/* "llama2-70b on 8 x dgx-a100-80g (64 GPUs), grid dp=4 x pp=2 x tp=8, full_shard" */
void gs__launch_put_subject(launch_doc *d, const gs_scenario *s, const gs_mesh *m);
/* Notes on settings of the training code rather than of the launcher (megatron: 1 for
 * Megatron-LM's). */
void gs__launch_put_code_notes(launch_doc *d, const gs_scenario *s, int megatron);
/* The torchrun command's start (nodes, processes per node, the rendezvous). */
void gs__launch_put_torchrun(launch_doc *d, const gs_mesh *m, const char *rdzv_id, const char *endpoint);
/* 1 when the mesh's order is a, b, c (fastest first). */
int gs__launch_order_is(const gs_mesh *m, gs_dim a, gs_dim b, gs_dim c);

/* engine/launch_megatron.c: pretrain_gpt.py's flags, one per line after `indent`, and the whole
 * Megatron-LM launch (comments, environment, torchrun, flags). */
void gs__launch_megatron_flags(launch_doc *d, const gs_scenario *s, const gs_mesh *m, const char *indent);
void gs__launch_megatron(launch_doc *d, const gs_scenario *s, const gs_mesh *m);
/* Its comment lines on what the flags leave to the data and optimizer settings, and its
 * environment lines (CUDA_DEVICE_MAX_CONNECTIONS), which the Slurm launch writes too. */
void gs__launch_megatron_notes(launch_doc *d, const gs_scenario *s, const gs_mesh *m);
void gs__launch_megatron_env(launch_doc *d, const gs_scenario *s, const gs_mesh *m);

#endif
