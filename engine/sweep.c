/* Parameter sweeps: --vary parsing, the grid of points, applying a point to a scenario, shards. */
#include "engine/sweep.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/units.h"

static const char *const key_names[GS_SWEEP_KEY_COUNT] = {
    "gpus", "nodes", "nic", "nic_gbps", "fabric", "global_batch", "micro", "seq",
    "tp",   "pp",    "dp",  "sharding", "recompute", "pipeline", "offload",
    "sp",   "tp_comm_overlap", "overlap_param_gather", "flash_attention", "cross_entropy",
    "framework", "compile", "attention", "power_w", "precision", "cp", "ep", "etp", "cuda_graphs",
    "cp_comm", "cp_a2a",
};

/* The keys that switch a strategy flag: values 0 or 1. */
static int is_switch(gs_sweep_key k)
{
    return k == GS_SWEEP_OFFLOAD || k == GS_SWEEP_SP || k == GS_SWEEP_TP_OVERLAP || k == GS_SWEEP_PARAM_GATHER ||
           k == GS_SWEEP_FLASH || k == GS_SWEEP_COMPILE || k == GS_SWEEP_CUDA_GRAPHS;
}

const char *gs_sweep_key_name(gs_sweep_key k)
{
    return (unsigned)k < GS_SWEEP_KEY_COUNT ? key_names[k] : "?";
}

int gs_sweep_key_is_count(gs_sweep_key k)
{
    switch (k) {
    case GS_SWEEP_GPUS: case GS_SWEEP_NODES: case GS_SWEEP_GLOBAL_BATCH: case GS_SWEEP_MICRO:
    case GS_SWEEP_SEQ: case GS_SWEEP_TP: case GS_SWEEP_PP: case GS_SWEEP_DP: case GS_SWEEP_OFFLOAD:
    case GS_SWEEP_SP: case GS_SWEEP_TP_OVERLAP: case GS_SWEEP_PARAM_GATHER: case GS_SWEEP_FLASH:
    case GS_SWEEP_COMPILE: case GS_SWEEP_CP: case GS_SWEEP_EP: case GS_SWEEP_ETP: case GS_SWEEP_CUDA_GRAPHS:
    case GS_SWEEP_CP_A2A:
        return 1;
    default:
        return 0;
    }
}

int gs_sweep_key_is_number(gs_sweep_key k)
{
    return gs_sweep_key_is_count(k) || k == GS_SWEEP_NIC_GBPS || k == GS_SWEEP_POWER_W;
}

int gs_sweep_key_is_scale(gs_sweep_key k)
{
    return k == GS_SWEEP_GPUS || k == GS_SWEEP_NODES;
}

void gs_sweep_init(gs_sweep *sw)
{
    memset(sw, 0, sizeof *sw);
}

/* Key lookup: case-insensitive, '-' read as '_' ("global-batch"); "intra" names the fabric. */
static int key_parse(const char *s, size_t len, gs_sweep_key *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return -1;
    for (size_t i = 0; i < len; i++)
        buf[i] = s[i] == '-' ? '_' : (char)tolower((unsigned char)s[i]);
    buf[len] = '\0';
    if (strcmp(buf, "intra") == 0)
        snprintf(buf, sizeof buf, "fabric");
    for (int k = 0; k < GS_SWEEP_KEY_COUNT; k++)
        if (strcmp(buf, key_names[k]) == 0) {
            *out = (gs_sweep_key)k;
            return 0;
        }
    return -1;
}

static gs_status bad_value(gs_sweep_key k, const char *v, gs_error *err)
{
    const char *what;
    switch (k) {
    case GS_SWEEP_NIC: what = "a NIC preset (gridstep presets nics)"; break;
    case GS_SWEEP_FABRIC: what = "an intra-node fabric preset (gridstep presets fabrics)"; break;
    case GS_SWEEP_NIC_GBPS: what = "a positive line rate in Gb/s"; break;
    case GS_SWEEP_SHARDING:
        what = "no_shard, shard_grad_op, full_shard, hybrid_shard, zero1, zero2 or zero3";
        break;
    case GS_SWEEP_RECOMPUTE: what = "none, selective or full"; break;
    case GS_SWEEP_PIPELINE: what = "1f1b or gpipe"; break;
    case GS_SWEEP_OFFLOAD: case GS_SWEEP_SP: case GS_SWEEP_TP_OVERLAP: case GS_SWEEP_PARAM_GATHER:
    case GS_SWEEP_FLASH: case GS_SWEEP_COMPILE: case GS_SWEEP_CUDA_GRAPHS:
        what = "0 or 1";
        break;
    case GS_SWEEP_XENT: what = "unfused or fused"; break;
    case GS_SWEEP_FRAMEWORK: what = "megatron, fsdp1, fsdp2, deepspeed or auto"; break;
    case GS_SWEEP_ATTENTION: what = "flash1, flash2, flash3, cudnn, sdpa, triton, xformers, unfused or auto"; break;
    case GS_SWEEP_POWER_W: what = "a positive power cap in watts"; break;
    case GS_SWEEP_PRECISION: what = "bf16, fp16, fp32 or fp8"; break;
    case GS_SWEEP_CP_COMM: what = "p2p, all_gather, a2a or a2a+p2p"; break;
    default: what = "a positive integer"; break;
    }
    return gs_error_set(err, GS_ERR_INPUT, "--vary %s: found '%s', expected %s", gs_sweep_key_name(k), v, what);
}

/* Checks one value and writes its canonical text. */
static gs_status canon_value(gs_sweep_key k, const char *v, char *out, gs_error *err)
{
    uint64_t n;
    if (gs_sweep_key_is_count(k)) {
        if (gs_parse_count(v, &n) != 0 || (n == 0 && !is_switch(k)) || (is_switch(k) && n > 1))
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%" PRIu64, n);
        return GS_OK;
    }
    switch (k) {
    case GS_SWEEP_NIC_GBPS:
    case GS_SWEEP_POWER_W: {
        char *end;
        errno = 0;
        double g = strtod(v, &end);
        if (end == v || *end || errno || !(g > 0) || !isfinite(g))
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%.6g", g);
        return GS_OK;
    }
    case GS_SWEEP_NIC: {
        const gs_nic *p = gs_nic_preset_find(v);
        if (!p)
            return gs_error_set(err, GS_ERR_INPUT, "--vary nic: unknown NIC '%s' (did you mean '%s'? see gridstep presets nics)",
                                v, gs_nic_preset_nearest(v));
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", p->name);
        return GS_OK;
    }
    case GS_SWEEP_FABRIC: {
        const gs_fabric *p = gs_fabric_preset_find(v);
        if (!p)
            return gs_error_set(err, GS_ERR_INPUT,
                                "--vary fabric: unknown fabric '%s' (did you mean '%s'? see gridstep presets fabrics)", v,
                                gs_fabric_preset_nearest(v));
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", p->name);
        return GS_OK;
    }
    case GS_SWEEP_SHARDING: {
        gs_sharding sh;
        if (gs_sharding_parse(v, &sh) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_sharding_name(sh));
        return GS_OK;
    }
    case GS_SWEEP_RECOMPUTE: {
        gs_recompute r;
        if (gs_recompute_parse(v, &r) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_recompute_name(r));
        return GS_OK;
    }
    case GS_SWEEP_XENT: {
        gs_xent x;
        if (gs_xent_parse(v, &x) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_xent_name(x));
        return GS_OK;
    }
    case GS_SWEEP_FRAMEWORK: {
        gs_framework f;
        if (gs_framework_parse(v, &f) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_framework_name(f));
        return GS_OK;
    }
    case GS_SWEEP_ATTENTION: {
        gs_attn_impl a;
        if (gs_attn_impl_parse(v, &a) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_attn_impl_name(a));
        return GS_OK;
    }
    case GS_SWEEP_PRECISION: {
        gs_precision p;
        if (strcasecmp(v, "fp8") == 0) {
            snprintf(out, GS_SWEEP_VALUE_BYTES, "fp8");
            return GS_OK;
        }
        if (gs_precision_parse(v, &p) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_precision_name(p));
        return GS_OK;
    }
    case GS_SWEEP_PIPELINE: {
        gs_pipeline p;
        if (gs_pipeline_parse(v, &p) != 0 || p == GS_PIPE_INTERLEAVED)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_pipeline_name(p));
        return GS_OK;
    }
    case GS_SWEEP_CP_COMM: {
        gs_cp_comm c;
        if (gs_cp_comm_parse(v, &c) != 0)
            return bad_value(k, v, err);
        snprintf(out, GS_SWEEP_VALUE_BYTES, "%s", gs_cp_comm_name(c));
        return GS_OK;
    }
    default:
        return bad_value(k, v, err);
    }
}

static gs_status push_value(gs_sweep_axis *ax, const char *text, gs_error *err)
{
    if (ax->n == GS_SWEEP_MAX_VALUES)
        return gs_error_set(err, GS_ERR_INPUT, "--vary %s: more than %d values", gs_sweep_key_name(ax->key),
                            GS_SWEEP_MAX_VALUES);
    snprintf(ax->values[ax->n++], GS_SWEEP_VALUE_BYTES, "%s", text);
    return GS_OK;
}

/* A..B: A, 2A, 4A, ... while <= B. */
static gs_status parse_range(gs_sweep_axis *ax, const char *a, const char *b, gs_error *err)
{
    gs_sweep_key k = ax->key;
    char ca[GS_SWEEP_VALUE_BYTES], cb[GS_SWEEP_VALUE_BYTES], t[GS_SWEEP_VALUE_BYTES];
    if (!gs_sweep_key_is_number(k) || is_switch(k))
        return gs_error_set(err, GS_ERR_INPUT,
                            "--vary %s: found the range '%s..%s', expected a comma-separated list (ranges are for "
                            "numeric keys)",
                            gs_sweep_key_name(k), a, b);
    gs_status rc;
    if ((rc = canon_value(k, a, ca, err)) != GS_OK || (rc = canon_value(k, b, cb, err)) != GS_OK)
        return rc;
    double lo = strtod(ca, NULL), hi = strtod(cb, NULL);
    if (lo > hi)
        return gs_error_set(err, GS_ERR_INPUT, "--vary %s: found the range '%s..%s', expected A <= B",
                            gs_sweep_key_name(k), a, b);
    if (gs_sweep_key_is_count(k)) {
        uint64_t v = strtoull(ca, NULL, 10), top = strtoull(cb, NULL, 10);
        for (;;) {
            snprintf(t, sizeof t, "%" PRIu64, v);
            if ((rc = push_value(ax, t, err)) != GS_OK)
                return rc;
            if (v > top / 2)
                break;
            v *= 2;
        }
    } else {
        for (double v = lo; v <= hi * (1 + 1e-12); v *= 2) {
            snprintf(t, sizeof t, "%.6g", v);
            if ((rc = push_value(ax, t, err)) != GS_OK)
                return rc;
        }
    }
    return GS_OK;
}

gs_status gs_sweep_add(gs_sweep *sw, const char *arg, gs_error *err)
{
    const char *eq = strchr(arg, '=');
    gs_sweep_axis ax;
    memset(&ax, 0, sizeof ax);
    if (!eq)
        return gs_error_set(err, GS_ERR_INPUT, "--vary: found '%s', expected KEY=V1,V2,... or KEY=A..B", arg);
    if (key_parse(arg, (size_t)(eq - arg), &ax.key) != 0) {
        char list[512] = "";
        size_t used = 0;
        for (int k = 0; k < GS_SWEEP_KEY_COUNT && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", key_names[k]);
        return gs_error_set(err, GS_ERR_INPUT, "--vary: found the key '%.*s', expected one of %s", (int)(eq - arg), arg,
                            list);
    }
    if (sw->naxes == GS_SWEEP_MAX_AXES)
        return gs_error_set(err, GS_ERR_INPUT, "--vary: more than %d keys", GS_SWEEP_MAX_AXES);
    for (size_t i = 0; i < sw->naxes; i++) {
        gs_sweep_key o = sw->axes[i].key;
        if (o == ax.key)
            return gs_error_set(err, GS_ERR_INPUT, "--vary %s: given twice, expected each key once",
                                gs_sweep_key_name(ax.key));
        if (gs_sweep_key_is_scale(o) && gs_sweep_key_is_scale(ax.key))
            return gs_error_set(err, GS_ERR_INPUT, "--vary: found both gpus and nodes, expected one of them");
    }
    const char *vals = eq + 1;
    if (!*vals)
        return gs_error_set(err, GS_ERR_INPUT, "--vary %s: no values, expected V1,V2,... or A..B",
                            gs_sweep_key_name(ax.key));
    gs_status rc = GS_OK;
    const char *dots = strstr(vals, "..");
    if (dots) {
        char a[GS_SWEEP_VALUE_BYTES], b[GS_SWEEP_VALUE_BYTES];
        size_t la = (size_t)(dots - vals);
        if (la == 0 || la >= sizeof a || strlen(dots + 2) == 0 || strlen(dots + 2) >= sizeof b || strchr(vals, ','))
            return gs_error_set(err, GS_ERR_INPUT, "--vary %s: found '%s', expected A..B", gs_sweep_key_name(ax.key),
                                vals);
        memcpy(a, vals, la);
        a[la] = '\0';
        snprintf(b, sizeof b, "%s", dots + 2);
        rc = parse_range(&ax, a, b, err);
    } else {
        const char *p = vals;
        for (;;) {
            size_t l = strcspn(p, ",");
            char v[GS_SWEEP_VALUE_BYTES], c[GS_SWEEP_VALUE_BYTES];
            if (l == 0 || l >= sizeof v)
                return gs_error_set(err, GS_ERR_INPUT, "--vary %s: found '%s', expected V1,V2,... (no empty values)",
                                    gs_sweep_key_name(ax.key), vals);
            memcpy(v, p, l);
            v[l] = '\0';
            if ((rc = canon_value(ax.key, v, c, err)) != GS_OK || (rc = push_value(&ax, c, err)) != GS_OK)
                return rc;
            if (!p[l])
                break;
            p += l + 1;
        }
    }
    if (rc != GS_OK)
        return rc;
    sw->axes[sw->naxes++] = ax;
    return GS_OK;
}

uint64_t gs_sweep_points(const gs_sweep *sw)
{
    uint64_t n = 1;
    for (size_t i = 0; i < sw->naxes; i++)
        n *= sw->axes[i].n; /* at most 64^6 = 2^36 */
    return n;
}

void gs_sweep_point_indices(const gs_sweep *sw, uint64_t point, size_t *idx)
{
    for (size_t i = sw->naxes; i-- > 0;) {
        idx[i] = (size_t)(point % sw->axes[i].n);
        point /= sw->axes[i].n;
    }
}

/* Sets the cluster to `gpus` GPUs: whole nodes, or one partial node when fewer than a node. */
static gs_status set_gpus(gs_cluster *c, uint64_t gpus, gs_error *err)
{
    if (gpus < c->gpus_per_node) {
        c->gpus_per_node = gpus;
        if (c->nics_per_node > gpus)
            c->nics_per_node = gpus;
        c->nodes = 1;
        return GS_OK;
    }
    if (gpus % c->gpus_per_node != 0)
        return gs_error_set(err, GS_ERR_INPUT, "%" PRIu64 " GPUs is not a whole number of %" PRIu64 "-GPU nodes", gpus,
                            c->gpus_per_node);
    c->nodes = gpus / c->gpus_per_node;
    return GS_OK;
}

/* precision: fp8 is bf16 with FP8 linear layers under the framework's recipe (resolved here, as
 * the loader resolves it), on a GPU with FP8 tensor cores; another precision turns FP8 off. */
static gs_status apply_precision(gs_scenario *s, const char *v, gs_error *err)
{
    if (strcmp(v, "fp8") != 0) {
        gs_precision_parse(v, &s->strategy.precision);
        s->strategy.fp8 = GS_FP8_OFF;
        s->strategy.fp8_params = 0;
        return GS_OK;
    }
    if (!(s->cluster.gpu.peak_flops_fp8 > 0.0))
        return gs_error_set(err, GS_ERR_INPUT, "--vary precision fp8: GPU %s has no FP8 tensor cores",
                            s->cluster.gpu.name);
    s->strategy.precision = GS_PREC_BF16;
    if (s->strategy.fp8 == GS_FP8_OFF)
        s->strategy.fp8 = gs_fp8_resolve(GS_FP8_AUTO,
                                         gs_framework_resolve(s->strategy.framework, (int)s->strategy.sharding));
    return GS_OK;
}

gs_status gs_sweep_apply(const gs_scenario *base, const gs_sweep *sw, uint64_t point, gs_scenario *out,
                         gs_error *err)
{
    size_t idx[GS_SWEEP_MAX_AXES];
    const char *val[GS_SWEEP_KEY_COUNT] = {0};
    gs_sweep_point_indices(sw, point, idx);
    for (size_t i = 0; i < sw->naxes; i++)
        val[sw->axes[i].key] = sw->axes[i].values[idx[i]];
    *out = *base;
    gs_scenario *s = out;
    gs_status rc = GS_OK;
    /* in key order: presets before the numbers that override them (nic before nic_gbps) */
    for (int k = 0; k < GS_SWEEP_KEY_COUNT && rc == GS_OK; k++) {
        const char *v = val[k];
        if (!v)
            continue;
        uint64_t n = gs_sweep_key_is_count((gs_sweep_key)k) ? strtoull(v, NULL, 10) : 0;
        switch ((gs_sweep_key)k) {
        case GS_SWEEP_GPUS: rc = set_gpus(&s->cluster, n, err); break;
        case GS_SWEEP_NODES: s->cluster.nodes = n; break;
        case GS_SWEEP_NIC:
            s->cluster.nic = *gs_nic_preset_find(v);
            s->cluster.source = NULL;
            break;
        case GS_SWEEP_NIC_GBPS: {
            /* as the scenario's nic_gbps: a new line rate scales the achievable bandwidth */
            double g = strtod(v, NULL);
            gs_nic *nic = &s->cluster.nic;
            if (nic->gbps > 0 && nic->bw > 0)
                nic->bw *= g / nic->gbps;
            else
                nic->bw = g * 1e9 / 8.0;
            nic->gbps = g;
            s->cluster.source = NULL;
            break;
        }
        case GS_SWEEP_FABRIC:
            s->cluster.intra = *gs_fabric_preset_find(v);
            s->cluster.source = NULL;
            break;
        case GS_SWEEP_GLOBAL_BATCH: s->batch.global_seqs = n; break;
        case GS_SWEEP_MICRO: s->batch.micro_seqs = n; break;
        case GS_SWEEP_SEQ: s->model.seq = n; break;
        case GS_SWEEP_TP: s->grid.tp = n; break;
        case GS_SWEEP_PP: s->grid.pp = n; break;
        case GS_SWEEP_DP: s->grid.dp = n; break;
        case GS_SWEEP_CP: s->grid.cp = n; break;
        case GS_SWEEP_EP: s->grid.ep = n; break;
        case GS_SWEEP_ETP: s->grid.etp = n; break;
        case GS_SWEEP_SHARDING:
            gs_sharding_parse(v, &s->strategy.sharding);
            s->strategy.reshard_after_forward = gs_sharding_shards_params(s->strategy.sharding);
            /* the distributed optimizer's overlapped gather means nothing to the other shardings
             * (FSDP gathers per unit anyway): dropped rather than making the point illegal */
            if (s->strategy.sharding != GS_SHARD_ZERO1 && s->strategy.sharding != GS_SHARD_ZERO2 &&
                !val[GS_SWEEP_PARAM_GATHER])
                s->strategy.overlap_param_gather = 0;
            /* likewise Megatron-Core's bucket rule, for shardings without resident buckets */
            if (!gs_strategy_can_bucket_first(&s->strategy))
                s->strategy.bucket_stages = GS_BUCKET_STAGES_ALL;
            break;
        case GS_SWEEP_RECOMPUTE: gs_recompute_parse(v, &s->strategy.recompute); break;
        case GS_SWEEP_PIPELINE:
            gs_pipeline_parse(v, &s->strategy.pipeline);
            s->strategy.virtual_stages = 1;
            break;
        case GS_SWEEP_OFFLOAD: s->strategy.offload = n != 0; break;
        case GS_SWEEP_SP: s->strategy.sequence_parallel = n != 0; break;
        case GS_SWEEP_TP_OVERLAP: s->strategy.tp_comm_overlap = n != 0; break;
        case GS_SWEEP_PARAM_GATHER: s->strategy.overlap_param_gather = n != 0; break;
        case GS_SWEEP_FLASH: s->strategy.flash_attention = n != 0; break;
        case GS_SWEEP_XENT: gs_xent_parse(v, &s->strategy.cross_entropy); break;
        case GS_SWEEP_FRAMEWORK: gs_framework_parse(v, &s->strategy.framework); break;
        case GS_SWEEP_COMPILE: s->strategy.compile = n != 0; break;
        case GS_SWEEP_CUDA_GRAPHS: s->strategy.cuda_graphs = n != 0; break;
        case GS_SWEEP_CP_COMM:
            gs_cp_comm_parse(v, &s->strategy.cp_comm);
            /* the scenario's a2a level serves a2a+p2p only: dropped for the others unless varied */
            if (s->strategy.cp_comm != GS_CP_A2A_P2P && !val[GS_SWEEP_CP_A2A])
                s->grid.cp_a2a = 0;
            break;
        case GS_SWEEP_CP_A2A: s->grid.cp_a2a = n > 1 ? n : 0; break;
        case GS_SWEEP_ATTENTION: gs_attn_impl_parse(v, &s->strategy.attention); break;
        case GS_SWEEP_POWER_W: {
            /* a cap above the TDP changes nothing (the peaks are specified there) */
            double w = strtod(v, NULL);
            s->cluster.gpu.power_w = s->cluster.gpu.tdp_w > 0.0 && w > s->cluster.gpu.tdp_w ? s->cluster.gpu.tdp_w : w;
            break;
        }
        case GS_SWEEP_PRECISION: rc = apply_precision(s, v, err); break;
        case GS_SWEEP_KEY_COUNT: break;
        }
    }
    if (rc != GS_OK)
        return rc;
    uint64_t tp = s->grid.tp, pp = s->grid.pp, cp = s->grid.cp ? s->grid.cp : 1, tpp;
    if (tp == 0 || pp == 0 || gs_mul_u64(tp, pp, &tpp) != 0 || gs_mul_u64(tpp, cp, &tpp) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tp x pp x cp overflows or is zero");
    int scale_varied = val[GS_SWEEP_GPUS] || val[GS_SWEEP_NODES];
    if (val[GS_SWEEP_DP] && !scale_varied) {
        uint64_t world;
        if (gs_mul_u64(s->grid.dp, tpp, &world) != 0)
            return gs_error_set(err, GS_ERR_INPUT, "dp x cp x pp x tp overflows");
        /* the node size of the base cluster, not of an earlier partial node */
        s->cluster.gpus_per_node = base->cluster.gpus_per_node;
        s->cluster.nics_per_node = base->cluster.nics_per_node;
        return set_gpus(&s->cluster, world, err);
    }
    if (val[GS_SWEEP_DP])
        return GS_OK; /* both given: the mesh check says whether they agree */
    uint64_t gpus;
    if (gs_mul_u64(s->cluster.nodes, s->cluster.gpus_per_node, &gpus) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "nodes x GPUs per node overflows");
    if (gpus % tpp != 0 && cp > 1)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%" PRIu64 " GPUs are not divisible by tp x pp x cp = %" PRIu64 " x %" PRIu64 " x %" PRIu64,
                            gpus, tp, pp, cp);
    if (gpus % tpp != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%" PRIu64 " GPUs are not divisible by tp x pp = %" PRIu64 " x %" PRIu64, gpus, tp, pp);
    s->grid.dp = gpus / tpp;
    return GS_OK;
}

gs_status gs_shard_parse(const char *opt, const char *s, uint64_t *index, uint64_t *count, gs_error *err)
{
    const char *slash = strchr(s, '/');
    char a[32];
    uint64_t i, n;
    size_t la = slash ? (size_t)(slash - s) : 0;
    if (!slash || la == 0 || la >= sizeof a)
        goto bad;
    memcpy(a, s, la);
    a[la] = '\0';
    for (const char *p = a; *p; p++)
        if (!isdigit((unsigned char)*p))
            goto bad;
    for (const char *p = slash + 1; *p; p++)
        if (!isdigit((unsigned char)*p))
            goto bad;
    if (!slash[1] || gs_parse_count(a, &i) != 0 || gs_parse_count(slash + 1, &n) != 0 || n == 0 || i >= n)
        goto bad;
    *index = i;
    *count = n;
    return GS_OK;
bad:
    return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected I/N with 0 <= I < N (shard I of N)", opt, s);
}
