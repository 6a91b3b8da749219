/* The Megatron-LM importer's mixture-of-experts and latent attention flags (megatron/training/arguments.py,
 * _add_moe_args): --num-experts, --moe-router-topk (default 2), --moe-ffn-hidden-size (default
 * --ffn-hidden-size), --moe-shared-expert-intermediate-size (the shared experts' total width),
 * --moe-expert-capacity-factor (default None: dropless), --moe-layer-freq (an int k, or a pattern
 * whose MoE blocks come at a fixed step after the leading dense ones: model.moe.dense_layers and
 * every), --moe-token-dispatcher-type (alltoall, allgather, the default, or flex with
 * --moe-flex-dispatcher-backend deepep or hybridep, or the older --moe-enable-deepep;
 * engine/build_moe.c builds all three), --moe-router-num-groups and --moe-router-group-topk
 * (model.moe.groups, group_topk) and --expert-tensor-parallel-size (grid.etp; default tp); and
 * --multi-latent-attention with its sizes (mg_mla), and --mtp-num-layers. Works on caller
 * storage; nothing is allocated. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import_megatron_internal.h"

/* --moe-layer-freq's pattern language (megatron/training/arguments.py moe_freq_type: an int k,
 * MoE every k-th block starting with block 0, or a Python list expression that it evals): sums
 * of terms, a term a list of 0/1 ("[0,1]", "[1]") or a parenthesized sum, either repeated by
 * "*N". A small evaluator of that subset into one 0/1 byte per block. */
typedef struct freq_parse {
    const char *p;
    uint8_t *out;
    size_t n, cap; /* entries written; room (the model's layers) */
} freq_parse;

static int freq_sum(freq_parse *f);

static int freq_uint(freq_parse *f, unsigned long long *v)
{
    char *end;
    if (*f->p < '0' || *f->p > '9')
        return -1;
    errno = 0;
    *v = strtoull(f->p, &end, 10);
    if (errno || *v > 100000)
        return -1;
    f->p = end;
    return 0;
}

/* A list or a parenthesized sum, then an optional repeat. */
static int freq_term(freq_parse *f)
{
    size_t start = f->n;
    unsigned long long v;
    if (*f->p == '[') {
        f->p++;
        while (*f->p != ']') {
            if (freq_uint(f, &v) != 0 || v > 1 || f->n >= f->cap)
                return -1;
            f->out[f->n++] = (uint8_t)v;
            if (*f->p == ',')
                f->p++;
            else if (*f->p != ']')
                return -1;
        }
        f->p++;
    } else if (*f->p == '(') {
        f->p++;
        if (freq_sum(f) != 0 || *f->p != ')')
            return -1;
        f->p++;
    } else
        return -1;
    if (*f->p != '*')
        return 0;
    f->p++;
    if (freq_uint(f, &v) != 0)
        return -1;
    size_t len = f->n - start;
    if (v == 0)
        f->n = start; /* Python's list * 0: nothing */
    for (unsigned long long r = 1; r < v; r++)
        for (size_t i = 0; i < len; i++) {
            if (f->n >= f->cap)
                return -1;
            f->out[f->n++] = f->out[start + i];
        }
    return 0;
}

static int freq_sum(freq_parse *f)
{
    if (freq_term(f) != 0)
        return -1;
    while (*f->p == '+') {
        f->p++;
        if (freq_term(f) != 0)
            return -1;
    }
    return 0;
}

/* --moe-layer-freq v over `layers` blocks as gridstep's MoE layout: MoE blocks at dense, dense +
 * every, dense + 2 every, .. (gs_model_moe_block). 0 on success; -1 when v is not in the pattern
 * language, does not give one entry per block, or places its MoE blocks otherwise. */
static int parse_layer_freq(const char *v, uint64_t layers, uint64_t *dense, uint64_t *every)
{
    char buf[512];
    size_t n = strlen(v), j = 0;
    uint8_t bits[4096];
    if (n >= sizeof buf || layers == 0 || layers > sizeof bits)
        return -1;
    for (size_t i = 0; i < n; i++) /* drop spaces and quotes */
        if (!strchr(" \t'\"", v[i]))
            buf[j++] = v[i];
    buf[j] = '\0';
    unsigned long long k;
    char *end;
    if (j && buf[0] >= '1' && buf[0] <= '9' && (k = strtoull(buf, &end, 10)) >= 1 && !*end) {
        if (k > layers)
            return -1;
        *dense = 0, *every = k;
        return 0;
    }
    freq_parse f = {buf, bits, 0, layers};
    int rc = freq_sum(&f) == 0 && !*f.p && f.n == layers ? 0 : -1;
    uint64_t first = layers, step = 0;
    for (uint64_t l = 0; rc == 0 && l < layers; l++)
        if (bits[l]) {
            if (first == layers)
                first = l;
            else if (!step)
                step = l - first;
        }
    if (rc == 0 && first == layers)
        rc = -1; /* no MoE block */
    if (!step)
        step = layers - first; /* one MoE block: any step past the end places it alone */
    for (uint64_t l = 0; rc == 0 && l < layers; l++)
        if (bits[l] != (l >= first && (l - first) % step == 0))
            rc = -1;
    if (rc == 0)
        *dense = first, *every = step ? step : 1;
    return rc;
}

static gs_status moe_capacity(const char *where, const char *v, double *out, gs_error *err)
{
    char *end = NULL;
    errno = 0;
    double f = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(f) || f <= 0.0 || f > 1e6)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --moe-expert-capacity-factor: found '%s', expected a number > 0",
                            where, v);
    *out = f;
    return GS_OK;
}

/* The flex dispatcher's backend: --moe-flex-dispatcher-backend deepep (Megatron-Core's default) or
 * hybridep (the same NVLink + RDMA transport, fewer SMs), or the deprecated --moe-enable-deepep
 * (transformer_config.py __post_init__: it needs --moe-token-dispatcher-type flex); ncclep is not
 * modelled. DeepEP refuses --moe-pad-expert-input-to-capacity, which the import does not read. */
static gs_status mg_flex_backend(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                                 gs_moe_dispatcher d, gs_error *err)
{
    char where[600];
    if (st->given[MG_MOE_DEEPEP] && d != GS_MOE_FLEX)
        return gs_error_set(err, GS_ERR_INPUT, "%s: --moe-enable-deepep: found it with the %s dispatcher, expected "
                            "--moe-token-dispatcher-type flex (Megatron-Core refuses it otherwise)",
                            gs__mg_where(origin, ws, st->at[MG_MOE_DEEPEP], where, sizeof where),
                            gs_moe_dispatcher_name(d));
    if (st->given[MG_MOE_BACKEND]) {
        const char *b = st->str[MG_MOE_BACKEND];
        if (strcmp(b, "deepep") != 0 && strcmp(b, "hybridep") != 0)
            return gs_error_set(err, GS_ERR_INPUT, "%s: --moe-flex-dispatcher-backend: found %s, expected deepep or "
                                "hybridep (the NVLink + RDMA transport gridstep models; ncclep is not modelled)",
                                gs__mg_where(origin, ws, st->at[MG_MOE_BACKEND], where, sizeof where), b);
    }
    s->strategy.moe_dispatcher = d;
    /* the SMs its kernels hold (Megatron-Core reads them for the flex dispatcher only) */
    s->strategy.flex_sms = d == GS_MOE_FLEX && st->given[MG_FLEX_SMS] ? st->u[MG_FLEX_SMS] : 0;
    return GS_OK;
}

/* --multi-latent-attention with --q-lora-rank (default None: 0), --kv-lora-rank (default 32),
 * --qk-head-dim (128), --qk-pos-emb-head-dim (64) and --v-head-dim (128), Megatron-LM's
 * MLATransformerConfig defaults; gridstep's MLA has one head_dim for the keys' non-rotary part and
 * the values, so the two must agree. */
static gs_status mg_mla(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_model *m, gs_error *err)
{
    char where[600];
    static const gs__mg_act sizes[] = {MG_Q_LORA, MG_KV_LORA, MG_QK_HEAD, MG_QK_POS, MG_V_HEAD};
    if (!st->given[MG_MLA]) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            if (st->given[sizes[i]] && !m->mla.kv_lora_rank)
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found no --multi-latent-attention, expected it with "
                                    "the latent attention sizes",
                                    gs__mg_where(origin, ws, st->at[sizes[i]], where, sizeof where),
                                    ws->w[st->at[sizes[i]]].text);
        if (!m->mla.kv_lora_rank)
            return GS_OK;
    }
    uint64_t qk = st->given[MG_QK_HEAD] ? st->u[MG_QK_HEAD] : (m->mla.kv_lora_rank ? m->head_dim : 128);
    uint64_t v = st->given[MG_V_HEAD] ? st->u[MG_V_HEAD] : (m->mla.kv_lora_rank ? m->head_dim : 128);
    if (qk != v)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --qk-head-dim %" PRIu64 " and --v-head-dim %" PRIu64 ": found them different, "
                            "expected one head size for the keys' non-rotary part and the values",
                            st->given[MG_QK_HEAD] ? gs__mg_where(origin, ws, st->at[MG_QK_HEAD], where, sizeof where)
                                                  : (origin ? origin : "--from-megatron"),
                            qk, v);
    if (st->given[MG_MLA] && !m->mla.kv_lora_rank) { /* Megatron-LM's defaults */
        m->mla.kv_lora_rank = 32;
        m->mla.rope_head_dim = 64;
        m->mla.q_lora_rank = 0;
    }
    if (st->given[MG_Q_LORA])
        m->mla.q_lora_rank = st->u[MG_Q_LORA];
    if (st->given[MG_KV_LORA])
        m->mla.kv_lora_rank = st->u[MG_KV_LORA];
    if (st->given[MG_QK_POS])
        m->mla.rope_head_dim = st->u[MG_QK_POS];
    m->head_dim = qk;
    m->kv_heads = m->heads;
    return GS_OK;
}

gs_status gs__mg_moe(const char *origin, const gs__words *ws, const gs__mg_state *st, gs_scenario *s,
                     gs_error *err)
{
    char where[600];
    gs_model *m = &s->model;
    gs_moe *moe = &m->moe;
    gs_status rc = mg_mla(origin, ws, st, m, err);
    if (rc != GS_OK)
        return rc;
    if (st->given[MG_MTP] && st->u[MG_MTP] > 16) /* the scenario's own bound (model.mtp_layers) */
        return gs_error_set(err, GS_ERR_INPUT, "%s: --mtp-num-layers: found %" PRIu64 ", expected 0 to 16",
                            gs__mg_where(origin, ws, st->at[MG_MTP], where, sizeof where), st->u[MG_MTP]);
    if (st->given[MG_MTP]) /* --mtp-num-layers: multi-token prediction modules on the last stage */
        m->mtp_layers = st->u[MG_MTP];
    if (st->given[MG_ETP] && (st->u[MG_ETP] == 0 || s->grid.tp % st->u[MG_ETP] != 0))
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --expert-tensor-parallel-size: found %" PRIu64 ", expected a divisor of the "
                            "tensor-parallel size %" PRIu64 " (gridstep splits experts over some of the TP ranks)",
                            gs__mg_where(origin, ws, st->at[MG_ETP], where, sizeof where), st->u[MG_ETP],
                            s->grid.tp);
    if (st->given[MG_ETP] && st->u[MG_ETP] != s->grid.tp)
        s->grid.etp = st->u[MG_ETP];
    static const gs__mg_act moe_flags[] = {MG_MOE_TOPK,     MG_MOE_FFN,    MG_MOE_SHARED,    MG_MOE_CAPACITY,
                                           MG_MOE_FREQ,     MG_MOE_GROUPS, MG_MOE_GROUP_TOPK};
    if (!st->given[MG_EXPERTS]) {
        for (size_t i = 0; i < sizeof moe_flags / sizeof moe_flags[0]; i++)
            if (st->given[moe_flags[i]] && !moe->experts)
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found no --num-experts, expected it with the --moe-* "
                                    "flags", gs__mg_where(origin, ws, st->at[moe_flags[i]], where, sizeof where),
                                    ws->w[st->at[moe_flags[i]]].text);
        if (!moe->experts)
            return GS_OK;
    } else {
        moe->experts = st->u[MG_EXPERTS];
        moe->top_k = 2; /* Megatron-LM's default */
        moe->expert_ffn = 0;
        moe->shared_experts = moe->dense_layers = moe->every = 0;
        moe->capacity_factor = 0.0;
        moe->groups = moe->group_topk = 0;
    }
    if (st->given[MG_MOE_GROUPS] != st->given[MG_MOE_GROUP_TOPK])
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found it alone, expected --moe-router-num-groups and "
                            "--moe-router-group-topk together (group-limited routing)",
                            gs__mg_where(origin, ws, st->at[st->given[MG_MOE_GROUPS] ? MG_MOE_GROUPS : MG_MOE_GROUP_TOPK],
                                         where, sizeof where),
                            st->given[MG_MOE_GROUPS] ? "--moe-router-num-groups" : "--moe-router-group-topk");
    if (st->given[MG_MOE_GROUPS]) {
        moe->groups = st->u[MG_MOE_GROUPS];
        moe->group_topk = st->u[MG_MOE_GROUP_TOPK];
    }
    if (st->given[MG_MOE_TOPK])
        moe->top_k = st->u[MG_MOE_TOPK];
    if (st->given[MG_MOE_FFN])
        moe->expert_ffn = st->u[MG_MOE_FFN];
    uint64_t ef = moe->expert_ffn ? moe->expert_ffn : m->ffn;
    if (st->given[MG_MOE_SHARED]) {
        if (ef == 0 || st->u[MG_MOE_SHARED] % ef != 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s: --moe-shared-expert-intermediate-size: found %" PRIu64 ", expected a multiple of "
                                "the experts' intermediate size %" PRIu64 " (gridstep counts shared experts of that "
                                "size)",
                                gs__mg_where(origin, ws, st->at[MG_MOE_SHARED], where, sizeof where),
                                st->u[MG_MOE_SHARED], ef);
        moe->shared_experts = st->u[MG_MOE_SHARED] / ef;
    }
    if (st->given[MG_MOE_CAPACITY] &&
        (rc = moe_capacity(gs__mg_where(origin, ws, st->at[MG_MOE_CAPACITY], where, sizeof where),
                           st->str[MG_MOE_CAPACITY], &moe->capacity_factor, err)) != GS_OK)
        return rc;
    if (st->given[MG_MOE_FREQ] &&
        parse_layer_freq(st->str[MG_MOE_FREQ], m->layers, &moe->dense_layers, &moe->every) != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --moe-layer-freq: found '%s', expected an int k (a MoE block every k) or a "
                            "pattern with one 0/1 per block for %" PRIu64 " layers whose MoE blocks come at a "
                            "fixed step after the leading dense ones (\"([0]*3+[1]*58)\", \"([0]*1+[1]*1)*24\")",
                            gs__mg_where(origin, ws, st->at[MG_MOE_FREQ], where, sizeof where),
                            st->str[MG_MOE_FREQ], m->layers);
    /* Megatron-LM's default dispatcher is allgather */
    const char *disp = st->given[MG_MOE_DISPATCHER] ? st->str[MG_MOE_DISPATCHER] : "allgather";
    gs_moe_dispatcher d;
    if (gs_moe_dispatcher_parse(disp, &d) != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s: --moe-token-dispatcher-type: found %s, expected alltoall, allgather or flex",
                            gs__mg_where(origin, ws, st->at[MG_MOE_DISPATCHER], where, sizeof where), disp);
    return mg_flex_backend(origin, ws, st, s, d, err);
}
