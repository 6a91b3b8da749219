/* The cuda driver's planning of the GEMM attention path over a schedule: the attention shape of a
 * schedule event, as exec's training program lays out its tensors, and the largest scratch any
 * attention event of a rank list takes (the driver's memory pre-flight adds it to the memory
 * ledger's peak). kernels/cuda/attn_gemm_plan.h plans one call from its shape; this file is the
 * part that reads the schedule.
 *
 * Ownership: nothing is allocated; the schedule is borrowed for the call. */
#ifndef GS_EXEC_CUDA_ATTN_PLAN_H
#define GS_EXEC_CUDA_ATTN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/schedule.h"
#include "kernels/cuda/attn_gemm_plan.h"

/* The attention shape of a schedule event (GS_OP_ATTN: gemm_m = gemm_n = tokens per sequence,
 * gemm_k = head dim, gemm_batch = sequences x query heads of the rank) for a rank with `heads`
 * query and `kv_heads` kv heads (the model's / tp; under context parallelism's a2a also / cp),
 * the leading dims as exec/train.c lays the tensors out (q, k, v side by side in rows of (heads +
 * 2 kv_heads) x head dim floats; out heads x head dim) and the scratch cap. seq_mult (0: 1): the
 * calls' sequences over the event's (context parallelism's p2p and all_gather: cp, exec running
 * the whole sequence with the rank's queries among zero rows). GS_ERR_INPUT (err says which)
 * when the event is not attention or its batch is not a whole number of sequences, or the shape
 * fails gs_attn_gemm_check. */
gs_status gs_attn_gemm_event_shape(const gs_event *e, size_t heads, size_t kv_heads, size_t seq_mult,
                                   size_t scratch_cap_bytes, gs_attn_shape *sh, gs_error *err);
/* The largest backward scratch (bytes) any attention event of the rank list r needs: over its
 * GS_OP_ATTN events of the backward phase (the forward and the recompute take none), each shaped
 * by gs_attn_gemm_event_shape. 0 when r has none. */
gs_status gs_attn_gemm_max_scratch_bytes(const gs_rank_events *r, size_t heads, size_t kv_heads, size_t seq_mult,
                                         size_t scratch_cap_bytes, uint64_t *bytes, gs_error *err);

/* The largest scratch (bytes) a flash-variant call of the rank list r takes: over all its
 * GS_OP_ATTN events (forward, recompute and backward). 0 when r has none. */
gs_status gs_attn_gemm_flash_max_scratch_bytes(const gs_rank_events *r, size_t heads, size_t kv_heads,
                                               size_t seq_mult, size_t scratch_cap_bytes, uint64_t *bytes,
                                               gs_error *err);

#endif
