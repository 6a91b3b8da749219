/* Pipeline orders: GPipe, 1F1B and interleaved 1F1B (Megatron-LM's schedules). */
#include "engine/pipeline.h"

#include <inttypes.h>
#include <stdlib.h>

static gs_status push(gs_pipe_order *o, size_t cap, uint32_t mb, uint16_t chunk, uint8_t bwd)
{
    if (o->nops >= cap)
        return GS_ERR_RUNTIME;
    o->ops[o->nops++] = (gs_pipe_op){mb, chunk, bwd, 0};
    return GS_OK;
}

/* Megatron's get_model_chunk_id: the k-th forward (or backward) pass of an interleaved stage runs
 * chunk (k mod (p v)) / p, reversed for backward; its micro-batch is (k / (p v)) p + k mod p. */
static void interleaved_id(uint64_t k, uint64_t pp, uint64_t v, int backward, uint32_t *mb, uint16_t *chunk)
{
    uint64_t in_group = k % (pp * v);
    uint64_t c = in_group / pp;
    if (backward)
        c = v - 1 - c;
    *chunk = (uint16_t)c;
    *mb = (uint32_t)((k / (pp * v)) * pp + k % pp);
}

gs_status gs_pipe_order_build(gs_pipeline kind, uint64_t pp, uint64_t stage, uint64_t m, uint64_t v, int combined,
                              gs_pipe_order *out, gs_error *err)
{
    out->ops = NULL;
    out->nops = 0;
    out->warmup = 0;
    if (pp == 0 || m == 0 || stage >= pp)
        return gs_error_set(err, GS_ERR_INPUT, "pipeline: pp=%" PRIu64 ", stage=%" PRIu64 ", m=%" PRIu64, pp,
                            stage, m);
    if (kind != GS_PIPE_INTERLEAVED || pp == 1)
        v = 1;
    if (v == 0)
        v = 1;
    uint64_t total = m * v; /* passes of each direction */
    if (total / v != m || total > (UINT64_MAX / 4) || total > UINT32_MAX)
        return gs_error_set(err, GS_ERR_OVERFLOW, "pipeline: %" PRIu64 " micro-batches x %" PRIu64
                            " chunks is too many passes", m, v);
    size_t cap = (size_t)(2 * total);
    out->ops = malloc(cap * sizeof *out->ops);
    if (!out->ops)
        return gs_error_set(err, GS_ERR_NOMEM, "pipeline: out of memory for %zu passes", cap);
    gs_status rc = GS_OK;

    if (pp == 1 && !combined) {
        for (uint64_t i = 0; i < m && rc == GS_OK; i++) {
            rc = push(out, cap, (uint32_t)i, 0, 0);
            if (rc == GS_OK)
                rc = push(out, cap, (uint32_t)i, 0, 1);
        }
        out->warmup = 0;
    } else if (kind == GS_PIPE_GPIPE && pp > 1) {
        for (uint64_t i = 0; i < m && rc == GS_OK; i++)
            rc = push(out, cap, (uint32_t)i, 0, 0);
        for (uint64_t i = 0; i < m && rc == GS_OK; i++)
            rc = push(out, cap, (uint32_t)i, 0, 1);
        out->warmup = m;
    } else {
        /* 1F1B: warm-up p - s - 1 forwards; interleaved: (p - s - 1) * 2 + (v - 1) * p. */
        uint64_t w = pp == 1                      ? 0
                     : kind == GS_PIPE_INTERLEAVED ? (pp - stage - 1) * 2 + (v - 1) * pp
                                                   : pp - stage - 1;
        /* combined 1F1B: one forward more before the steady state (Megatron-Core's
         * get_pp_rank_microbatches; without pipelining combined_1f1b_schedule_for_no_pipelining runs
         * the first micro-batch's forward alone) */
        w += combined ? 1 : 0;
        if (w > total)
            w = total;
        out->warmup = w;
        uint64_t f = 0, b = 0;
        uint32_t mb;
        uint16_t ch;
        for (; f < w && rc == GS_OK; f++) {
            interleaved_id(f, pp, v, 0, &mb, &ch);
            rc = push(out, cap, mb, ch, 0);
        }
        for (; f < total && rc == GS_OK; f++, b++) {
            interleaved_id(f, pp, v, 0, &mb, &ch);
            rc = push(out, cap, mb, ch, 0);
            if (rc != GS_OK)
                break;
            interleaved_id(b, pp, v, 1, &mb, &ch);
            rc = push(out, cap, mb, ch, 1);
        }
        for (; b < total && rc == GS_OK; b++) {
            interleaved_id(b, pp, v, 1, &mb, &ch);
            rc = push(out, cap, mb, ch, 1);
        }
    }
    if (rc != GS_OK) {
        gs_pipe_order_fini(out);
        return gs_error_set(err, GS_ERR_RUNTIME, "pipeline: internal order overflow");
    }
    return GS_OK;
}

void gs_pipe_order_fini(gs_pipe_order *o)
{
    free(o->ops);
    o->ops = NULL;
    o->nops = 0;
}

/* Layers of every virtual chunk when the embedding or loss is accounted in the split: Megatron-LM
 * d98e8a6 (Core 0.20), megatron/core/transformer/transformer_block.py get_num_layers_to_build
 * divides (layers + 1 (+ 1)) / pp by the virtual stages. 0 when neither is accounted. */
static uint64_t accounted_chunk_layers(const gs_mesh *m, uint64_t layers, uint64_t v)
{
    if (!m->account_embedding && !m->account_loss)
        return 0;
    return (layers + (uint64_t)m->account_embedding + (uint64_t)m->account_loss) / (m->size[GS_DIM_PP] * v);
}

uint64_t gs_pipe_chunk_layers(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t chunk)
{
    uint64_t pp = m->size[GS_DIM_PP];
    if (v <= 1)
        return gs_mesh_stage_layers(m, layers, stage);
    if (m->layout.n)
        return chunk * pp + stage < m->layout.n ? m->layout.layers[chunk * pp + stage] : 0;
    uint64_t q = accounted_chunk_layers(m, layers, v);
    if (!q)
        return gs_mesh_stage_layers(m, layers, stage) / v;
    /* get_num_layers_to_build: one fewer in the first virtual stage of the first pipeline stage
     * (the embedding) and in the last virtual stage of the last pipeline stage (the loss) */
    q -= m->account_embedding && stage == 0 && chunk == 0 && q ? 1 : 0;
    q -= m->account_loss && stage + 1 == pp && chunk + 1 == v && q ? 1 : 0;
    return q;
}

uint64_t gs_pipe_chunk_begin(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t chunk)
{
    if (v <= 1 || chunk == 0)
        return 0;
    if (m->layout.n) { /* the stage's chunks before this one */
        uint64_t b = 0;
        for (uint64_t c = 0; c < chunk; c++)
            b += gs_pipe_chunk_layers(m, layers, v, stage, c);
        return b;
    }
    uint64_t q = accounted_chunk_layers(m, layers, v);
    if (!q)
        return chunk * (gs_mesh_stage_layers(m, layers, stage) / v);
    return chunk * q - (m->account_embedding && stage == 0 ? 1 : 0);
}

uint64_t gs_pipe_chunk_of(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t local)
{
    if (v <= 1)
        return 0;
    if (m->layout.n) {
        uint64_t end = 0;
        for (uint64_t c = 0; c < v; c++)
            if (local < (end += gs_pipe_chunk_layers(m, layers, v, stage, c)))
                return c;
        return v - 1;
    }
    uint64_t q = accounted_chunk_layers(m, layers, v), c = 0;
    if (q) { /* chunk c starts at c q, one earlier after stage 0's short chunk 0 */
        c = (local + (m->account_embedding && stage == 0 ? 1 : 0)) / q;
    } else {
        uint64_t per = gs_mesh_stage_layers(m, layers, stage) / v;
        c = per ? local / per : 0;
    }
    return c < v ? c : v - 1;
}

uint64_t gs_pipe_global_layer(const gs_mesh *m, uint64_t layers, uint64_t v, uint64_t stage, uint64_t local)
{
    uint64_t first = gs_mesh_stage_first_layer(m, layers, stage);
    if (v <= 1)
        return first + local;
    uint64_t chunk = gs_pipe_chunk_of(m, layers, v, stage, local);
    uint64_t within = local - gs_pipe_chunk_begin(m, layers, v, stage, chunk);
    if (m->layout.n) /* Megatron's get_layer_offset: the virtual stages before k = chunk x pp + stage */
        return gs_layout_layers_before(&m->layout, chunk * m->size[GS_DIM_PP] + stage) + within;
    uint64_t q = accounted_chunk_layers(m, layers, v);
    if (q) {
        /* transformer_layer.py get_transformer_layer_offset: virtual stage k = chunk * pp + stage
         * starts k q slots into layers + embedding + loss, one less the embedding's slot after
         * the first */
        uint64_t k = chunk * m->size[GS_DIM_PP] + stage;
        return k * q - (m->account_embedding && k ? 1 : 0) + within;
    }
    /* every stage's layers split into v chunks: a round of chunks (one per stage) holds
     * layers / v layers, and the stages before this one hold first / v of this round */
    return chunk * (layers / v) + first / v + within;
}

uint64_t gs_pipe_root_chunk(uint64_t stage, uint64_t pp, uint64_t v)
{
    if (v <= 1 || stage == 0)
        return 0;
    return stage + 1 == pp ? v - 1 : 0;
}
