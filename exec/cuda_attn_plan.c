/* The GEMM attention path's planning over a schedule (exec/cuda_attn_plan.h). */
#include <inttypes.h>

#include "exec/cuda_attn_plan.h"

gs_status gs_attn_gemm_event_shape(const gs_event *e, size_t heads, size_t kv_heads, size_t seq_mult,
                                   size_t scratch_cap_bytes, gs_attn_shape *sh, gs_error *err)
{
    if (e->kind != GS_EV_COMPUTE || e->op != GS_OP_ATTN)
        return gs_error_set(err, GS_ERR_INPUT, "attention (gemm): the event is not an attention op (kind %u, op %u)",
                            (unsigned)e->kind, (unsigned)e->op);
    if (!heads || e->gemm_m != e->gemm_n || e->gemm_batch % heads)
        return gs_error_set(err, GS_ERR_INPUT,
                            "attention (gemm): an attention event of [%" PRIu32 " x %" PRIu32 "] scores x %" PRIu32
                            " is not whole sequences of %zu query heads",
                            e->gemm_m, e->gemm_n, e->gemm_batch, heads);
    size_t hd = e->gemm_k, nq = (heads + 2 * kv_heads) * hd;
    size_t seq = (size_t)e->gemm_m * (seq_mult ? seq_mult : 1);
    gs_attn_shape s = {e->gemm_batch / heads, seq, heads, kv_heads, hd, nq, nq, heads * hd, scratch_cap_bytes};
    gs_status rc = gs_attn_gemm_check(&s, err);
    if (rc == GS_OK)
        *sh = s;
    return rc;
}

gs_status gs_attn_gemm_max_scratch_bytes(const gs_rank_events *r, size_t heads, size_t kv_heads, size_t seq_mult,
                                         size_t scratch_cap_bytes, uint64_t *bytes, gs_error *err)
{
    *bytes = 0;
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        if (e->kind != GS_EV_COMPUTE || e->op != GS_OP_ATTN || e->phase != GS_PHASE_BWD)
            continue;
        gs_attn_shape sh;
        gs_status rc = gs_attn_gemm_event_shape(e, heads, kv_heads, seq_mult, scratch_cap_bytes, &sh, err);
        if (rc != GS_OK)
            return rc;
        uint64_t b = gs_attn_gemm_scratch_bytes(&sh);
        if (b > *bytes)
            *bytes = b;
    }
    return GS_OK;
}

gs_status gs_attn_gemm_flash_max_scratch_bytes(const gs_rank_events *r, size_t heads, size_t kv_heads,
                                               size_t seq_mult, size_t scratch_cap_bytes, uint64_t *bytes,
                                               gs_error *err)
{
    *bytes = 0;
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        if (e->kind != GS_EV_COMPUTE || e->op != GS_OP_ATTN)
            continue;
        gs_attn_shape sh;
        gs_status rc = gs_attn_gemm_event_shape(e, heads, kv_heads, seq_mult, scratch_cap_bytes, &sh, err);
        if (rc != GS_OK)
            return rc;
        uint64_t b = (uint64_t)gs_attn_gemm_flash_scratch_floats(&sh, e->phase == GS_PHASE_BWD) * sizeof(float);
        if (b > *bytes)
            *bytes = b;
    }
    return GS_OK;
}

