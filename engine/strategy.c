/* Strategy names, parsing, the seed's default choices, and facts about each sharding mode. */
#include "engine/strategy.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Name tables, indexed by enum value; the first name of each row is the canonical spelling,
 * the others are accepted aliases (matched case-insensitively). */
static const char *const sharding_names[GS_SHARD_COUNT][3] = {
    [GS_SHARD_NO_SHARD] = {"no_shard", "ddp", NULL},
    [GS_SHARD_GRAD_OP] = {"shard_grad_op", NULL, NULL},
    [GS_SHARD_FULL_SHARD] = {"full_shard", "fsdp", NULL},
    [GS_SHARD_HYBRID_SHARD] = {"hybrid_shard", "hsdp", NULL},
    [GS_SHARD_ZERO1] = {"zero1", "zero-1", NULL},
    [GS_SHARD_ZERO2] = {"zero2", "zero-2", NULL},
    [GS_SHARD_ZERO3] = {"zero3", "zero-3", NULL},
};

static const char *const wrap_names[] = {
    [GS_WRAP_LAYER] = "layer",
    [GS_WRAP_MODEL] = "model",
    [GS_WRAP_MIN_PARAMS] = "min_params",
};

static const char *const prefetch_names[][2] = {
    [GS_PREFETCH_NONE] = {"none", NULL},
    [GS_PREFETCH_BACKWARD_PRE] = {"backward_pre", NULL},
    [GS_PREFETCH_BACKWARD_POST] = {"backward_post", NULL},
};

static const char *const recompute_names[][2] = {
    [GS_RECOMPUTE_NONE] = {"none", NULL},
    [GS_RECOMPUTE_SELECTIVE] = {"selective", NULL},
    [GS_RECOMPUTE_FULL] = {"full", NULL},
    [GS_RECOMPUTE_OP] = {"op", "selective_op"},
};

static const char *const precision_names[][2] = {
    [GS_PREC_BF16] = {"bf16", "bfloat16"},
    [GS_PREC_FP16] = {"fp16", "float16"},
    [GS_PREC_FP32] = {"fp32", "float32"},
};

static const char *const pipeline_names[][2] = {
    [GS_PIPE_GPIPE] = {"gpipe", NULL},
    [GS_PIPE_1F1B] = {"1f1b", NULL},
    [GS_PIPE_INTERLEAVED] = {"interleaved", "interleaved_1f1b"},
};

static const char *const bucket_stages_names[][2] = {
    [GS_BUCKET_STAGES_ALL] = {"all", NULL},
    [GS_BUCKET_STAGES_FIRST] = {"first", NULL},
};

static const char *const xent_names[][2] = {
    [GS_XENT_UNFUSED] = {"unfused", NULL},
    [GS_XENT_FUSED] = {"fused", NULL},
};

static const char *const fp8_names[][2] = {
    [GS_FP8_OFF] = {"off", NULL},
    [GS_FP8_DELAYED] = {"delayed", NULL},
    [GS_FP8_CURRENT] = {"current", "tensorwise"},
    [GS_FP8_AUTO] = {"auto", NULL},
    [GS_FP8_MX] = {"mxfp8", NULL},
};

static const char *const cp_comm_names[][2] = {
    [GS_CP_P2P] = {"p2p", NULL},
    [GS_CP_ALL_GATHER] = {"all_gather", "allgather"},
    [GS_CP_A2A] = {"a2a", NULL},
    [GS_CP_A2A_P2P] = {"a2a+p2p", NULL},
};

static const char *const moe_dispatcher_names[][2] = {
    [GS_MOE_ALLTOALL] = {"alltoall", "all_to_all"},
    [GS_MOE_ALLGATHER] = {"allgather", "all_gather"},
    [GS_MOE_FLEX] = {"flex", NULL},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

void gs_strategy_default_wrap(gs_strategy *s)
{
    int ds3 = gs_framework_resolve(s->framework, (int)s->sharding) == GS_FW_DEEPSPEED && s->sharding == GS_SHARD_ZERO3;
    s->wrap = ds3 ? GS_WRAP_MIN_PARAMS : GS_WRAP_LAYER;
    s->wrap_min_params = ds3 ? GS_DEEPSPEED_PREFETCH_BUCKET_PARAMS : 0;
}

void gs_strategy_defaults(gs_strategy *s)
{
    s->sharding = GS_SHARD_FULL_SHARD;
    s->wrap = GS_WRAP_LAYER;
    s->wrap_min_params = 0;
    s->prefetch = GS_PREFETCH_BACKWARD_PRE;
    s->forward_prefetch = 0;
    s->reshard_after_forward = 1;
    s->limit_all_gathers = 1;
    s->recompute = GS_RECOMPUTE_NONE;
    s->recompute_every = 1;
    s->recompute_modules = GS_RC_DEFAULT;
    s->flash_attention = 1;
    s->offload = 0;
    s->precision = GS_PREC_BF16;
    s->pipeline = GS_PIPE_1F1B;
    s->virtual_stages = 1;
    s->sequence_parallel = 0;
    s->overlap_grad_reduce = 1;
    s->overlap_param_gather = 0;
    s->tp_comm_overlap = 0;
    s->grad_dtype = -1;
    s->framework = GS_FW_AUTO;
    s->compile = 0;
    s->torch_fsdp2 = 0;
    s->ep_overlap = 0;
    s->flex_sms = 0;
    s->attention = GS_ATTN_AUTO;
    s->bucket_stages = GS_BUCKET_STAGES_ALL;
    s->cross_entropy = GS_XENT_UNFUSED;
    s->fp8 = GS_FP8_OFF;
    s->fp8_params = 0;
    s->fp8_amax_history = 1;
    s->fp8_amax_algo = GS_FP8_AMAX_MOST_RECENT;
    s->fp8_margin = 0;
    s->cp_comm = GS_CP_P2P;
    s->moe_dispatcher = GS_MOE_ALLTOALL;
    s->bucket_bytes = (uint64_t)25 << 20; /* 25 MiB: PyTorch DDP bucket_cap_mb default */
}

uint64_t gs_precision_bytes(gs_precision p)
{
    return p == GS_PREC_FP32 ? 4 : 2;
}

int gs_strategy_can_reduce_after_backward(const gs_strategy *s)
{
    /* zero2 reduces every micro-batch whatever grad_sync says (gs_sharding_allows_no_sync) */
    return s->grad_sync != GS_GRAD_SYNC_EVERY && (s->sharding == GS_SHARD_NO_SHARD || s->sharding == GS_SHARD_ZERO1);
}

int gs_strategy_can_bucket_first(const gs_strategy *s)
{
    /* zero2 reduces every micro-batch into a transient full gradient per unit whatever grad_sync
     * says (gs_sharding_allows_no_sync): merging a chunk's buckets would keep them all live */
    return s->sharding == GS_SHARD_NO_SHARD || s->sharding == GS_SHARD_ZERO1;
}

int gs_strategy_torch_fsdp2(const gs_strategy *s)
{
    return gs_framework_torch_fsdp2(gs_framework_resolve(s->framework, (int)s->sharding), (int)s->sharding,
                                    s->torch_fsdp2);
}

int gs_strategy_regathers(const gs_strategy *s)
{
    return gs_sharding_shards_params(s->sharding) && s->sharding != GS_SHARD_GRAD_OP && s->reshard_after_forward;
}

int gs_strategy_ep_overlap_fits(const gs_strategy *s, uint64_t ep, uint64_t pp)
{
    return gs_framework_resolve(s->framework, (int)s->sharding) == GS_FW_MEGATRON && ep > 1 &&
           s->moe_dispatcher != GS_MOE_ALLGATHER && (pp <= 1 || s->pipeline == GS_PIPE_INTERLEAVED) &&
           s->recompute != GS_RECOMPUTE_FULL && !gs_strategy_regathers(s);
}

int gs_strategy_chunk_one_bucket(const gs_strategy *s, uint64_t stage, uint64_t chunk)
{
    /* Megatron-Core's DistributedDataParallel: bucket_size = None on pipeline rank > 0, and for
     * model chunks after the first (training.py: disable_bucketing=(model_chunk_idx > 0)) */
    return s->bucket_stages == GS_BUCKET_STAGES_FIRST && (stage > 0 || chunk > 0);
}

uint64_t gs_grad_bytes(const gs_strategy *s)
{
    return gs_precision_bytes(s->grad_dtype >= 0 ? (gs_precision)s->grad_dtype : s->precision);
}

const char *gs_sharding_name(gs_sharding s)
{
    return (unsigned)s < GS_SHARD_COUNT ? sharding_names[s][0] : "?";
}

const char *gs_wrap_name(gs_wrap_kind w)
{
    return (unsigned)w < COUNT_OF(wrap_names) ? wrap_names[w] : "?";
}

const char *gs_prefetch_name(gs_prefetch p)
{
    return (unsigned)p < COUNT_OF(prefetch_names) ? prefetch_names[p][0] : "?";
}

const char *gs_recompute_name(gs_recompute r)
{
    return (unsigned)r < COUNT_OF(recompute_names) ? recompute_names[r][0] : "?";
}

const char *gs_precision_name(gs_precision p)
{
    return (unsigned)p < COUNT_OF(precision_names) ? precision_names[p][0] : "?";
}

const char *gs_fp8_name(gs_fp8 f)
{
    return (unsigned)f < COUNT_OF(fp8_names) ? fp8_names[f][0] : "?";
}

uint64_t gs_strategy_chunks(const gs_strategy *s, uint64_t pp)
{
    return s->pipeline == GS_PIPE_INTERLEAVED && pp > 1 && s->virtual_stages ? s->virtual_stages : 1;
}

const char *gs_cp_comm_name(gs_cp_comm c)
{
    return (unsigned)c < COUNT_OF(cp_comm_names) ? cp_comm_names[c][0] : "?";
}

const char *gs_pipeline_name(gs_pipeline p)
{
    return (unsigned)p < COUNT_OF(pipeline_names) ? pipeline_names[p][0] : "?";
}

const char *gs_bucket_stages_name(gs_bucket_stages b)
{
    return (unsigned)b < COUNT_OF(bucket_stages_names) ? bucket_stages_names[b][0] : "?";
}

/* Index of the row of `table` (rows of `width` names, NULL-padded) whose names include s. */
static int parse_name(const char *s, const char *const *table, size_t rows, size_t width)
{
    if (!s)
        return -1;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < width; j++) {
            const char *n = table[i * width + j];
            if (n && strcasecmp(n, s) == 0)
                return (int)i;
        }
    return -1;
}

int gs_sharding_parse(const char *s, gs_sharding *out)
{
    int i = parse_name(s, &sharding_names[0][0], COUNT_OF(sharding_names), 3);
    if (i < 0)
        return -1;
    *out = (gs_sharding)i;
    return 0;
}

int gs_prefetch_parse(const char *s, gs_prefetch *out)
{
    int i = parse_name(s, &prefetch_names[0][0], COUNT_OF(prefetch_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_prefetch)i;
    return 0;
}

/* Megatron-Core's names, in TransformerConfig's order (bit i = 1 << i). */
static const char *const recompute_module_names[GS_RC_MODULE_COUNT] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
};

uint64_t gs_adam_state_bytes(const gs_strategy *s)
{
    return s->adam_bf16 ? 4 : 8;
}

uint64_t gs_master_bytes(const gs_strategy *s)
{
    if (s->precision == GS_PREC_FP32)
        return 0;
    return s->precision_aware && s->precision == GS_PREC_BF16 ? 2 : 4;
}

uint32_t gs_recompute_module_parse(const char *s)
{
    for (unsigned i = 0; i < GS_RC_MODULE_COUNT; i++)
        if (strcmp(s, recompute_module_names[i]) == 0)
            return 1u << i;
    return 0;
}

int gs_recompute_modules_parse(const char *text, uint32_t *mask, char *bad, size_t len)
{
    static const char sep[] = ",[]'\" ";
    char word[64];
    for (const char *t = text + strspn(text, sep); *t; t += strspn(t, sep)) {
        size_t k = strcspn(t, sep);
        snprintf(word, sizeof word, "%.*s", (int)k, t);
        uint32_t bit = gs_recompute_module_parse(word);
        if (!bit) {
            snprintf(bad, len, "%s", word);
            return -1;
        }
        *mask |= bit;
        t += k;
    }
    return 0;
}

const char *gs_recompute_module_name(unsigned bit_index)
{
    return bit_index < GS_RC_MODULE_COUNT ? recompute_module_names[bit_index] : NULL;
}

void gs_recompute_modules_format(uint32_t mask, const char *sep, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    for (unsigned i = 0; i < GS_RC_MODULE_COUNT && len; i++) {
        if (!(mask & (1u << i)))
            continue;
        int n = snprintf(buf + at, len - at, "%s%s", at ? sep : "", recompute_module_names[i]);
        if (n < 0 || (size_t)n >= len - at)
            return;
        at += (size_t)n;
    }
}

int gs_recompute_modules_check(uint32_t modules, int mla, int moe, int shared, char *why, size_t len)
{
    const char *bad = NULL, *need = NULL;
    if ((modules & GS_RC_MLA_UP_PROJ) && !mla)
        bad = "mla_up_proj", need = "latent attention (model.mla)";
    else if ((modules & (GS_RC_MOE | GS_RC_MOE_ACT | GS_RC_SHARED_EXPERTS)) && !moe)
        bad = modules & GS_RC_MOE ? "moe" : modules & GS_RC_MOE_ACT ? "moe_act" : "shared_experts",
        need = "mixture-of-experts blocks (model.moe)";
    else if ((modules & GS_RC_SHARED_EXPERTS) && !shared)
        bad = "shared_experts", need = "shared experts (model.moe.shared_experts)";
    if (!bad)
        return 0;
    snprintf(why, len, "recompute module %s needs %s, which the model does not have", bad, need);
    return -1;
}

uint32_t gs_strategy_recompute_modules(const gs_strategy *s)
{
    return s->recompute == GS_RECOMPUTE_SELECTIVE ? s->recompute_modules : 0;
}

int gs_recompute_parse(const char *s, gs_recompute *out)
{
    int i = parse_name(s, &recompute_names[0][0], COUNT_OF(recompute_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_recompute)i;
    return 0;
}

int gs_precision_parse(const char *s, gs_precision *out)
{
    int i = parse_name(s, &precision_names[0][0], COUNT_OF(precision_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_precision)i;
    return 0;
}

gs_fp8 gs_fp8_resolve(gs_fp8 f, gs_framework resolved)
{
    if (f != GS_FP8_AUTO)
        return f;
    return resolved == GS_FW_FSDP1 || resolved == GS_FW_FSDP2 ? GS_FP8_CURRENT : GS_FP8_DELAYED;
}

int gs_fp8_cast_fused(gs_fp8 resolved, gs_framework fw)
{
    return resolved == GS_FP8_DELAYED && fw == GS_FW_MEGATRON;
}

int gs_fp8_recipe_parse(const char *s, gs_fp8 *out)
{
    int i = parse_name(s, &fp8_names[0][0], COUNT_OF(fp8_names), 2);
    if (i <= GS_FP8_OFF) /* "off" is not a recipe: precision says whether FP8 is on */
        return -1;
    *out = (gs_fp8)i;
    return 0;
}

int gs_cp_comm_parse(const char *s, gs_cp_comm *out)
{
    int i = parse_name(s, &cp_comm_names[0][0], COUNT_OF(cp_comm_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_cp_comm)i;
    return 0;
}

const char *gs_moe_dispatcher_name(gs_moe_dispatcher d)
{
    return (unsigned)d < COUNT_OF(moe_dispatcher_names) ? moe_dispatcher_names[d][0] : "?";
}

static const char *const fp8_amax_algo_names[] = {"most_recent", "max"};

const char *gs_fp8_amax_algo_name(gs_fp8_amax_algo a)
{
    return (unsigned)a < COUNT_OF(fp8_amax_algo_names) ? fp8_amax_algo_names[a] : "?";
}

int gs_fp8_amax_algo_parse(const char *s, gs_fp8_amax_algo *out)
{
    int i = parse_name(s, fp8_amax_algo_names, COUNT_OF(fp8_amax_algo_names), 1);
    if (i < 0)
        return -1;
    *out = (gs_fp8_amax_algo)i;
    return 0;
}

int gs_moe_dispatcher_parse(const char *s, gs_moe_dispatcher *out)
{
    int i = parse_name(s, &moe_dispatcher_names[0][0], COUNT_OF(moe_dispatcher_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_moe_dispatcher)i;
    return 0;
}

int gs_pipeline_parse(const char *s, gs_pipeline *out)
{
    int i = parse_name(s, &pipeline_names[0][0], COUNT_OF(pipeline_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_pipeline)i;
    return 0;
}

int gs_xent_parse(const char *s, gs_xent *out)
{
    int i = parse_name(s, &xent_names[0][0], COUNT_OF(xent_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_xent)i;
    return 0;
}

const char *gs_xent_name(gs_xent x)
{
    return (unsigned)x < COUNT_OF(xent_names) ? xent_names[x][0] : "?";
}

uint64_t gs_xent_bytes_per_logit(gs_xent x, uint64_t elem_bytes, int bwd)
{
    uint64_t e = elem_bytes;
    if (x == GS_XENT_FUSED)
        return 2 * e;
    uint64_t cast = e == 4 ? 0 : e + 4;
    /* forward: max 4, shift 8, exp 8, sum 4, normalise 8; backward: scale 8 */
    return cast + (bwd ? 8 : 32);
}

int gs_bucket_stages_parse(const char *s, gs_bucket_stages *out)
{
    int i = parse_name(s, &bucket_stages_names[0][0], COUNT_OF(bucket_stages_names), 2);
    if (i < 0)
        return -1;
    *out = (gs_bucket_stages)i;
    return 0;
}

int gs_sharding_shards_params(gs_sharding s)
{
    return s == GS_SHARD_FULL_SHARD || s == GS_SHARD_ZERO3 || s == GS_SHARD_HYBRID_SHARD;
}

int gs_sharding_shards_grads(gs_sharding s)
{
    return gs_sharding_shards_params(s) || s == GS_SHARD_GRAD_OP || s == GS_SHARD_ZERO2;
}

int gs_sharding_shards_optimizer(gs_sharding s)
{
    return gs_sharding_shards_grads(s) || s == GS_SHARD_ZERO1;
}

int gs_sharding_is_fsdp(gs_sharding s)
{
    return s == GS_SHARD_NO_SHARD || s == GS_SHARD_GRAD_OP || s == GS_SHARD_FULL_SHARD ||
           s == GS_SHARD_HYBRID_SHARD || s == GS_SHARD_ZERO3;
}

int gs_sharding_allows_no_sync(gs_sharding s)
{
    return s != GS_SHARD_ZERO2 && s != GS_SHARD_ZERO3;
}

int gs_every_nth_block(uint64_t every, uint64_t local)
{
    return every <= 1 || (local + 1) % every == 0;
}

uint64_t gs_every_nth_blocks_in(uint64_t every, int64_t lo, int64_t hi)
{
    if (hi < lo)
        return 0;
    if (lo < 0)
        lo = 0;
    uint64_t n = every > 1 ? every : 1;
    /* blocks i in [lo, hi] with (i + 1) % n == 0: floor((hi + 1) / n) - floor(lo / n) */
    return (uint64_t)(hi + 1) / n - (uint64_t)lo / n;
}

int gs_strategy_checkpoints_layer(const gs_strategy *s, uint64_t local)
{
    return s->recompute == GS_RECOMPUTE_FULL && gs_every_nth_block(s->recompute_every, local);
}

uint64_t gs_strategy_checkpointed_in(const gs_strategy *s, int64_t lo, int64_t hi)
{
    return s->recompute == GS_RECOMPUTE_FULL ? gs_every_nth_blocks_in(s->recompute_every, lo, hi) : 0;
}
