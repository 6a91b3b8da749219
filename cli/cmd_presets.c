/* `gridstep presets`: every compiled-in model, GPU, fabric, NIC and cluster preset with its
 * numbers, as aligned tables or one JSON document in SI base units. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/hardware.h"
#include "engine/model.h"
#include "engine/units.h"

const char gs_cmd_presets_help[] =
    "Lists the presets a scenario can name, with the numbers the engine uses. With a KIND\n"
    "(models, gpus, fabrics, nics or clusters) only that table is printed. Each preset's source\n"
    "(the reference row its numbers come from) is in the --json output.\n"
    "\n"
    "Human tables (GB = 10^9 B, TFLOP/s dense, bandwidths per direction):\n"
    "  models    layers, hidden, heads, kv heads, ffn, vocab, training seq (tokens), exact\n"
    "            parameter count (every expert of a MoE model; --json adds active_params)\n"
    "  gpus      BF16 / FP16 / FP32 peak TFLOP/s (FP32 = TF32 tensor cores where present, '-' =\n"
    "            unsupported), HBM GB, HBM TB/s, GEMM efficiency (measured MAMF / spec), SMs, CC\n"
    "  fabrics   intra-node link per GPU: line GB/s, GB/s as NCCL plans it, latency us\n"
    "  nics      line Gb/s, achievable GB/s, latency us per inter-node step\n"
    "  clusters  GPU, fabric, NIC, GPUs and NICs per node, default nodes (a scenario overrides\n"
    "            it), rail-optimized, oversubscription, host CPU\n"
    "\n"
    "options:\n"
    "  --json   one JSON document {models: [...], gpus: [...], fabrics: [...], nics: [...],\n"
    "           clusters: [...]} (only the KIND's key when one is given). Numbers in SI base\n"
    "           units: FLOP/s (peak_flops_*), bytes (hbm_bytes), bytes/s (hbm_bw, line_bw,\n"
    "           nccl_bw, bw), seconds (latency_s); gbps is the NIC line rate in Gb/s. Keys are\n"
    "           the preset field names a scenario overrides.\n"
    "\n"
    "examples:\n"
    "  gridstep presets\n"
    "  gridstep presets clusters\n"
    "  gridstep presets --json gpus | jq '.gpus[] | {name, peak_flops_bf16}'\n";

static const char usage[] = "gridstep presets [--json] [models|gpus|fabrics|nics|clusters]";

typedef enum preset_kind {
    KIND_MODELS,
    KIND_GPUS,
    KIND_FABRICS,
    KIND_NICS,
    KIND_CLUSTERS,
    KIND_COUNT
} preset_kind;

static const char *const kind_names[KIND_COUNT] = {"models", "gpus", "fabrics", "nics", "clusters"};

static const char *norm_name(gs_norm_kind k)
{
    return k == GS_NORM_LAYERNORM ? "layernorm" : "rmsnorm";
}

static const char *mlp_name(gs_mlp_kind k)
{
    return k == GS_MLP_GELU ? "gelu" : "swiglu";
}

static const char *pos_name(gs_pos_kind k)
{
    return k == GS_POS_LEARNED ? "learned" : "rope";
}

static const char *yes_no(int v)
{
    return v ? "yes" : "no";
}

/* ---------------------------------------------------------------------- human tables ---- */

/* Each builder fills a table whose first row is the header; returns GS_OK or GS_ERR_NOMEM. */

static gs_status models_table(gs_cli_table *t)
{
    gs_status st = gs_cli_table_rowf(t, "name\tlayers\thidden\theads\tkv\tffn\tvocab\tseq\tparams\tarch");
    for (size_t i = 0; st == GS_OK && i < gs_model_preset_count(); i++) {
        const gs_model *m = gs_model_preset_at(i);
        char params[32];
        gs_fmt_count(gs_model_params(m), params, sizeof params);
        st = gs_cli_table_rowf(t,
                               "%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
                               "\t%" PRIu64 "\t%" PRIu64 "\t%s\t%s %s %s%s%s%s",
                               m->name, m->layers, m->hidden, m->heads, m->kv_heads, m->ffn,
                               m->vocab, m->seq, params, norm_name(m->norm), mlp_name(m->mlp),
                               pos_name(m->pos), m->tied_embeddings ? " tied" : "",
                               m->mla.kv_lora_rank ? " mla" : "", m->moe.experts ? " moe" : "");
    }
    return st;
}

static void fmt_tflops(double flops_per_s, char *buf, size_t len)
{
    if (flops_per_s > 0.0)
        snprintf(buf, len, "%.1f", flops_per_s / 1e12);
    else
        snprintf(buf, len, "-");
}

static gs_status gpus_table(gs_cli_table *t)
{
    gs_status st = gs_cli_table_rowf(t, "name\tBF16 TFLOP/s\tFP16 TFLOP/s\tFP32/TF32 TFLOP/s\t"
                                        "HBM GB\tHBM TB/s\tgemm eff\tSMs\tCC");
    for (size_t i = 0; st == GS_OK && i < gs_gpu_preset_count(); i++) {
        const gs_gpu *g = gs_gpu_preset_at(i);
        char bf16[32], fp16[32], fp32[32];
        fmt_tflops(g->peak_flops_bf16, bf16, sizeof bf16);
        fmt_tflops(g->peak_flops_fp16, fp16, sizeof fp16);
        fmt_tflops(g->peak_flops_fp32, fp32, sizeof fp32);
        st = gs_cli_table_rowf(t, "%s\t%s\t%s\t%s\t%.0f\t%.3f\t%.3f\t%u\t%u", g->name, bf16, fp16,
                               fp32, (double)g->hbm_bytes / 1e9, g->hbm_bw / 1e12,
                               g->gemm_efficiency, (unsigned)g->sms,
                               (unsigned)g->compute_capability);
    }
    return st;
}

static gs_status fabrics_table(gs_cli_table *t)
{
    gs_status st = gs_cli_table_rowf(t, "name\tkind\tline GB/s/dir\tNCCL GB/s/dir\tlatency us\t"
                                        "nvswitch\tnvls");
    for (size_t i = 0; st == GS_OK && i < gs_fabric_preset_count(); i++) {
        const gs_fabric *f = gs_fabric_preset_at(i);
        st = gs_cli_table_rowf(t, "%s\t%s\t%.2f\t%.2f\t%.1f\t%s\t%s", f->name,
                               gs_link_kind_name(f->kind), f->line_bw / 1e9, f->nccl_bw / 1e9,
                               f->latency_s * 1e6, yes_no(f->nvswitch), yes_no(f->nvls));
    }
    return st;
}

static gs_status nics_table(gs_cli_table *t)
{
    gs_status st = gs_cli_table_rowf(t, "name\tkind\tline Gb/s\tachievable GB/s\tlatency us");
    for (size_t i = 0; st == GS_OK && i < gs_nic_preset_count(); i++) {
        const gs_nic *n = gs_nic_preset_at(i);
        st = gs_cli_table_rowf(t, "%s\t%s\t%.0f\t%.2f\t%.1f", n->name, gs_link_kind_name(n->kind),
                               n->gbps, n->bw / 1e9, n->latency_s * 1e6);
    }
    return st;
}

static gs_status clusters_table(gs_cli_table *t)
{
    gs_status st = gs_cli_table_rowf(t, "name\tgpu\tfabric\tnic\tgpus/node\tnics/node\tnodes\t"
                                        "rail-optimized\toversubscription\thost");
    for (size_t i = 0; st == GS_OK && i < gs_cluster_preset_count(); i++) {
        const gs_cluster *c = gs_cluster_preset_at(i);
        st = gs_cli_table_rowf(t, "%s\t%s\t%s\t%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\t%.1f\t%s",
                               c->name, c->gpu.name, c->intra.name, c->nic.name, c->gpus_per_node,
                               c->nics_per_node, c->nodes, yes_no(c->rail_optimized),
                               c->oversubscription, gs_host_cpu_name((gs_host_cpu)c->host_cpu));
    }
    return st;
}

static const char *const kind_titles[KIND_COUNT] = {
    "models (exact parameter counts; seq = training sequence length, tokens)",
    "gpus (dense peaks; GB = 10^9 B)",
    "fabrics (intra-node, per GPU, per direction; GB = 10^9 B)",
    "nics (per NIC, per direction; achievable = measured NCCL busBW or protocol goodput)",
    "clusters (per node; nodes is the default a scenario overrides)",
};

static gs_status print_human(int only, gs_error *err)
{
    gs_status (*const builders[KIND_COUNT])(gs_cli_table *) = {
        models_table, gpus_table, fabrics_table, nics_table, clusters_table,
    };
    static const size_t ncols[KIND_COUNT] = {10, 9, 7, 5, 10};
    int first = 1;

    for (int k = 0; k < KIND_COUNT; k++) {
        if (only >= 0 && k != only)
            continue;
        gs_cli_table t;
        gs_cli_table_init(&t, ncols[k]);
        gs_status st = builders[k](&t);
        if (st != GS_OK) {
            gs_cli_table_fini(&t);
            return gs_error_set(err, GS_ERR_NOMEM, "out of memory building the %s table",
                                kind_names[k]);
        }
        printf("%s%s:\n", first ? "" : "\n", kind_titles[k]);
        gs_cli_table_print(&t, stdout, 2);
        gs_cli_table_fini(&t);
        first = 0;
    }
    return GS_OK;
}

/* -------------------------------------------------------------------------- JSON form ---- */

/* Adds value to obj (steals it); returns nonzero on failure (NULL value included). */
static int put(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return 1;
    return json_object_set_new(obj, key, value) != 0;
}

static int put_str(json_t *obj, const char *key, const char *s)
{
    return put(obj, key, s ? json_string(s) : json_null());
}

static int put_u64(json_t *obj, const char *key, uint64_t v)
{
    /* Preset values are far below 2^63 (the largest is a parameter count ~1e12). */
    return put(obj, key, json_integer((json_int_t)v));
}

static int put_real(json_t *obj, const char *key, double v)
{
    return put(obj, key, json_real(v));
}

static json_t *model_json(const gs_model *m)
{
    json_t *o = json_object();
    int fail = !o;
    if (fail)
        return NULL;
    fail |= put_str(o, "name", m->name);
    fail |= put_u64(o, "layers", m->layers);
    fail |= put_u64(o, "hidden", m->hidden);
    fail |= put_u64(o, "heads", m->heads);
    fail |= put_u64(o, "kv_heads", m->kv_heads);
    fail |= put_u64(o, "head_dim", m->head_dim);
    fail |= put_u64(o, "ffn", m->ffn);
    fail |= put_u64(o, "vocab", m->vocab);
    fail |= put_u64(o, "seq", m->seq);
    fail |= put_u64(o, "params", gs_model_params(m));
    fail |= put(o, "tied_embeddings", json_boolean(m->tied_embeddings));
    fail |= put(o, "bias", json_boolean(m->bias));
    fail |= put(o, "dropout", json_boolean(m->dropout));
    fail |= put_real(o, "attention_dropout", m->attention_dropout);
    fail |= put_real(o, "hidden_dropout", m->hidden_dropout);
    fail |= put_str(o, "norm", norm_name(m->norm));
    fail |= put_str(o, "mlp", mlp_name(m->mlp));
    fail |= put_str(o, "pos", pos_name(m->pos));
    fail |= put_str(o, "source", m->source);
    if (m->moe.experts) { /* dense models' documents stay as they were */
        json_t *e = json_object();
        fail |= !e;
        if (e) {
            fail |= put_u64(e, "experts", m->moe.experts);
            fail |= put_u64(e, "top_k", m->moe.top_k);
            fail |= put_u64(e, "expert_ffn", m->moe.expert_ffn);
            fail |= put_u64(e, "shared_experts", m->moe.shared_experts);
            fail |= put_u64(e, "dense_layers", m->moe.dense_layers);
            fail |= put_u64(e, "every", m->moe.every ? m->moe.every : 1);
            fail |= put_real(e, "capacity_factor", m->moe.capacity_factor);
            fail |= put(o, "moe", e); /* o owns e from here, also on failure */
        }
        fail |= put_u64(o, "active_params", gs_model_active_params(m));
    }
    if (m->mla.kv_lora_rank) {
        json_t *a = json_object();
        fail |= !a;
        if (a) {
            fail |= put_u64(a, "q_lora_rank", m->mla.q_lora_rank);
            fail |= put_u64(a, "kv_lora_rank", m->mla.kv_lora_rank);
            fail |= put_u64(a, "rope_head_dim", m->mla.rope_head_dim);
            fail |= put(o, "mla", a);
        }
    }
    if (fail) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *gpu_json(const gs_gpu *g)
{
    json_t *o = json_object();
    int fail = !o;
    if (fail)
        return NULL;
    fail |= put_str(o, "name", g->name);
    fail |= put_real(o, "peak_flops_bf16", g->peak_flops_bf16);
    fail |= put_real(o, "peak_flops_fp16", g->peak_flops_fp16);
    fail |= put_real(o, "peak_flops_fp32", g->peak_flops_fp32);
    fail |= put_real(o, "gemm_efficiency", g->gemm_efficiency);
    fail |= put_real(o, "peak_flops_fp8", g->peak_flops_fp8);
    fail |= put_real(o, "gemm_efficiency_fp8", g->gemm_efficiency_fp8);
    fail |= put_u64(o, "hbm_bytes", g->hbm_bytes);
    fail |= put_real(o, "hbm_bw", g->hbm_bw);
    fail |= put_u64(o, "sms", g->sms);
    fail |= put_u64(o, "compute_capability", g->compute_capability);
    fail |= put_str(o, "source", g->source);
    if (fail) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *fabric_json(const gs_fabric *f)
{
    json_t *o = json_object();
    int fail = !o;
    if (fail)
        return NULL;
    fail |= put_str(o, "name", f->name);
    fail |= put_str(o, "kind", gs_link_kind_name(f->kind));
    fail |= put_real(o, "line_bw", f->line_bw);
    fail |= put_real(o, "nccl_bw", f->nccl_bw);
    fail |= put_real(o, "latency_s", f->latency_s);
    fail |= put(o, "nvswitch", json_boolean(f->nvswitch));
    fail |= put(o, "nvls", json_boolean(f->nvls));
    fail |= put_str(o, "source", f->source);
    if (fail) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *nic_json(const gs_nic *n)
{
    json_t *o = json_object();
    int fail = !o;
    if (fail)
        return NULL;
    fail |= put_str(o, "name", n->name);
    fail |= put_str(o, "kind", gs_link_kind_name(n->kind));
    fail |= put_real(o, "gbps", n->gbps);
    fail |= put_real(o, "line_bw", n->gbps * 1e9 / 8.0);
    fail |= put_real(o, "bw", n->bw);
    fail |= put_real(o, "latency_s", n->latency_s);
    fail |= put_str(o, "source", n->source);
    if (fail) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *cluster_json(const gs_cluster *c)
{
    json_t *o = json_object();
    int fail = !o;
    if (fail)
        return NULL;
    fail |= put_str(o, "name", c->name);
    fail |= put_str(o, "gpu", c->gpu.name);
    fail |= put_str(o, "fabric", c->intra.name);
    fail |= put_str(o, "nic", c->nic.name);
    fail |= put_u64(o, "gpus_per_node", c->gpus_per_node);
    fail |= put_u64(o, "nics_per_node", c->nics_per_node);
    fail |= put_u64(o, "nodes", c->nodes);
    fail |= put(o, "rail_optimized", json_boolean(c->rail_optimized));
    fail |= put_real(o, "oversubscription", c->oversubscription);
    fail |= put_str(o, "host_cpu", gs_host_cpu_name((gs_host_cpu)c->host_cpu));
    fail |= put_str(o, "source", c->source);
    if (fail) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The array of one kind's presets; NULL when out of memory. */
static json_t *kind_json(preset_kind k)
{
    json_t *arr = json_array();
    size_t n = 0;
    if (!arr)
        return NULL;
    switch (k) {
    case KIND_MODELS: n = gs_model_preset_count(); break;
    case KIND_GPUS: n = gs_gpu_preset_count(); break;
    case KIND_FABRICS: n = gs_fabric_preset_count(); break;
    case KIND_NICS: n = gs_nic_preset_count(); break;
    case KIND_CLUSTERS: n = gs_cluster_preset_count(); break;
    case KIND_COUNT: break;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *item = NULL;
        switch (k) {
        case KIND_MODELS: item = model_json(gs_model_preset_at(i)); break;
        case KIND_GPUS: item = gpu_json(gs_gpu_preset_at(i)); break;
        case KIND_FABRICS: item = fabric_json(gs_fabric_preset_at(i)); break;
        case KIND_NICS: item = nic_json(gs_nic_preset_at(i)); break;
        case KIND_CLUSTERS: item = cluster_json(gs_cluster_preset_at(i)); break;
        case KIND_COUNT: break;
        }
        if (!item || json_array_append_new(arr, item) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static gs_status print_json(int only, gs_error *err)
{
    gs_status st = GS_OK;
    json_t *doc = json_object();
    if (!doc)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory building the JSON document");
    for (int k = 0; k < KIND_COUNT; k++) {
        if (only >= 0 && k != only)
            continue;
        if (put(doc, kind_names[k], kind_json((preset_kind)k)) != 0) {
            st = gs_error_set(err, GS_ERR_NOMEM, "out of memory building the JSON document");
            goto out;
        }
    }
    st = gs_cli_json_print(doc, err);
out:
    json_decref(doc);
    return st;
}

/* ---------------------------------------------------------------------------- command ---- */

gs_status gs_cmd_presets(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, only = -1, c;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s",
                                argv[optind - 1], usage);
        }
    }
    if (argc - optind > 1)
        return gs_error_set(err, GS_ERR_INPUT, "unexpected argument '%s'\nusage: %s",
                            argv[optind + 1], usage);
    if (optind < argc) {
        for (int k = 0; k < KIND_COUNT; k++)
            if (strcasecmp(argv[optind], kind_names[k]) == 0)
                only = k;
        if (only < 0) {
            const char *near = NULL;
            for (int k = 0; k < KIND_COUNT; k++)
                if (gs_name_closer(argv[optind], kind_names[k], near))
                    near = kind_names[k];
            return gs_error_set(err, GS_ERR_INPUT,
                                "unknown preset kind '%s' (did you mean '%s'? expected models, "
                                "gpus, fabrics, nics or clusters)\nusage: %s",
                                argv[optind], near, usage);
        }
    }
    return json ? print_json(only, err) : print_human(only, err);
}
