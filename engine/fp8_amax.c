/* FP8 delayed scaling's amax reductions: which scenarios have them, and their bytes
 * (engine/fp8_amax.h). */
#include "engine/fp8_amax.h"

#include "engine/framework.h"
#include "engine/pipeline.h"

int gs_fp8_amax_reduced(const gs_scenario *s)
{
    const gs_strategy *st = &s->strategy;
    gs_framework fw = gs_framework_resolve(st->framework, (int)st->sharding);
    return st->fp8 != GS_FP8_OFF && gs_fp8_resolve(st->fp8, fw) == GS_FP8_DELAYED;
}

/* Transformer Engine's FP8 GEMMs of global layer `layer` (their num_gemms summed). */
static uint64_t layer_fp8_gemms(const gs_scenario *s, const gs_mesh *mesh, uint64_t layer)
{
    const gs_model *m = &s->model;
    uint64_t attn = m->mla.kv_lora_rank ? (m->mla.q_lora_rank ? 5 : 4) : 2;
    if (!m->moe.experts || !gs_model_moe_block(m, layer))
        return attn + 2;
    uint64_t ep = mesh->ep ? mesh->ep : 1;
    return attn + 2 * (m->moe.experts / ep) + (m->moe.shared_experts ? 2 : 0);
}

uint64_t gs_fp8_amax_bytes(const gs_scenario *s, const gs_mesh *mesh, uint64_t v, uint64_t stage, int64_t bot,
                           int64_t top, gs_phase phase)
{
    uint64_t gemms = 0;
    for (int64_t l = bot; l <= top; l++)
        gemms += layer_fp8_gemms(s, mesh, gs_pipe_global_layer(mesh, s->model.layers, v, stage, (uint64_t)l));
    return gemms * (phase == GS_PHASE_FWD ? 3u : 2u) * 4u;
}
