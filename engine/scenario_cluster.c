/* The scenario's cluster section (engine/scenario_internal.h): a cluster preset name, or a
 * mapping that changes a preset or assembles a cluster from GPU, intra-node fabric and NIC
 * presets (the GPU's numbers may be given too), validated by gs_cluster_validate. It fills the
 * caller's gs_cluster (presets are copied by value) and borrows the loader's nodes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "engine/scenario_internal.h"

static const char *const cluster_keys[] = {
    "preset", "name", "nodes", "gpus_per_node", "nics_per_node", "gpu", "intra", "fabric",
    "nic", "nic_gbps", "rail_optimized", "oversubscription", "host_cpu",
};

static const char *const gpu_keys[] = {
    "preset", "name", "bf16_tflops", "fp16_tflops", "fp32_tflops", "gemm_efficiency", "fp8_tflops",
    "gemm_efficiency_fp8",
    "memory_gb", "hbm_tbps", "power_w",
};

/* A table of hardware presets: what it holds (for messages), how many, the name of each. */
typedef struct preset_table {
    const char *kind;
    size_t (*count)(void);
    const char *(*name_at)(size_t);
} preset_table;

/* Collects the names of a preset table for "expected one of" lists (at most cap). */
static size_t preset_names(size_t (*count)(void), const char *(*name_at)(size_t), const char **out,
                           size_t cap)
{
    size_t n = count();
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++)
        out[i] = name_at(i);
    return n;
}

static const char *gpu_name_at(size_t i)
{
    return gs_gpu_preset_at(i)->name;
}

static const char *fabric_name_at(size_t i)
{
    return gs_fabric_preset_at(i)->name;
}

static const char *nic_name_at(size_t i)
{
    return gs_nic_preset_at(i)->name;
}

static const char *cluster_name_at(size_t i)
{
    return gs_cluster_preset_at(i)->name;
}


static const preset_table gpu_presets = {"GPU", gs_gpu_preset_count, gpu_name_at};
static const preset_table fabric_presets = {"fabric", gs_fabric_preset_count, fabric_name_at};
static const preset_table nic_presets = {"NIC", gs_nic_preset_count, nic_name_at};
static const preset_table cluster_presets = {"cluster", gs_cluster_preset_count, cluster_name_at};

/* Error for an unknown hardware preset name, listing the known ones. */
static gs_status fail_preset(const gs__yaml_loader *l, const yaml_node_t *v, const char *field, const char *near,
                             const preset_table *t)
{
    const char *names[64];
    char found[96], list[640] = "", hint[96] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    size_t n = preset_names(t->count, t->name_at, names, 64);
    gs__yaml_join_names(names, n, list, sizeof list);
    return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                            "%s: found unknown %s preset '%s'%s, expected one of %s", field, t->kind,
                            gs__yaml_shown(v, found, sizeof found), hint, list);
}

static gs_status load_gpu(const gs__yaml_loader *l, const yaml_node_t *v, gs_gpu *g)
{
    gs_status st;
    const yaml_node_t *name_node = v;
    if (v->type == YAML_MAPPING_NODE) {
        st = gs__yaml_check_keys(l, v, "cluster.gpu", gpu_keys,
                                 sizeof gpu_keys / sizeof gpu_keys[0]);
        if (st != GS_OK)
            return st;
        name_node = gs__yaml_lookup(l, v, "preset", NULL);
    } else if (v->type != YAML_SCALAR_NODE) {
        char found[96];
        return gs__yaml_fail_at(
            l, v, GS_ERR_INPUT,
            "cluster.gpu: found %s, expected a GPU preset name or a mapping of GPU "
            "fields",
            gs__yaml_describe(v, found, sizeof found));
    }
    if (name_node) {
        const char *field = name_node == v ? "cluster.gpu" : "cluster.gpu.preset";
        const char *name = gs__scenario_value_name(l, name_node, field, "a GPU preset name");
        if (!name)
            return GS_ERR_INPUT;
        const gs_gpu *p = gs_gpu_preset_find(name);
        if (!p)
            return fail_preset(l, name_node, field, gs_gpu_preset_nearest(name), &gpu_presets);
        *g = *p;
    }
    if (v->type != YAML_MAPPING_NODE)
        return GS_OK;
    double tflops, gb, tbps;
    int given;
    const char *sec = "cluster.gpu";
    if ((st = gs__scenario_opt_string(l, v, sec, "name", g->name, sizeof g->name)))
        return st;
    if ((st = gs__scenario_opt_real(l, v, sec, "bf16_tflops", &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_bf16 = tflops * 1e12;
    if ((st = gs__scenario_opt_real(l, v, sec, "fp16_tflops", &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_fp16 = tflops * 1e12;
    if ((st = gs__scenario_opt_real(l, v, sec, "fp32_tflops", &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_fp32 = tflops * 1e12;
    if ((st = gs__scenario_opt_fraction(l, v, sec, "gemm_efficiency", &g->gemm_efficiency, NULL)))
        return st;
    if ((st = gs__scenario_opt_real(l, v, sec, "fp8_tflops", &tflops, &given)))
        return st;
    if (given)
        g->peak_flops_fp8 = tflops * 1e12;
    if ((st = gs__scenario_opt_fraction(l, v, sec, "gemm_efficiency_fp8", &g->gemm_efficiency_fp8, &given)))
        return st;
    /* an FP8 peak given without its efficiency: the GPU's bf16 one (no FP8 MAMF known) */
    if (g->peak_flops_fp8 > 0.0 && !(g->gemm_efficiency_fp8 > 0.0))
        g->gemm_efficiency_fp8 = g->gemm_efficiency;
    if ((st = gs__scenario_opt_real(l, v, sec, "memory_gb", &gb, &given)))
        return st;
    if (given) {
        double bytes = gb * 1e9; /* vendor GB */
        if (bytes >= 18446744073709551616.0)
            return gs__yaml_fail_at(
                l, gs__yaml_lookup(l, v, "memory_gb", NULL), GS_ERR_OVERFLOW,
                "cluster.gpu.memory_gb is too large: found %g, expected at most %g", gb,
                18446744073.709551615);
        g->hbm_bytes = (uint64_t)llround(bytes);
    }
    if ((st = gs__scenario_opt_real(l, v, sec, "hbm_tbps", &tbps, &given)))
        return st;
    if (given)
        g->hbm_bw = tbps * 1e12; /* TB/s -> bytes/s */
    double watts;
    if ((st = gs__scenario_opt_real(l, v, sec, "power_w", &watts, &given)))
        return st;
    if (given) {
        if (g->tdp_w > 0.0 && watts > g->tdp_w)
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "power_w", NULL), GS_ERR_INPUT,
                                    "cluster.gpu.power_w: found %g W, expected at most the GPU's %g W (its "
                                    "peaks are specified there; a lower cap slows the clock)",
                                    watts, g->tdp_w);
        if (watts < 1.0)
            return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "power_w", NULL), GS_ERR_INPUT,
                                    "cluster.gpu.power_w: found %g W, expected a power cap in watts (>= 1)", watts);
        g->power_w = watts;
    }
    g->source = NULL;
    return GS_OK;
}


/* The nodes of a cluster mapping's parts (NULL when absent); intra is fabric when only that
 * spelling was given. */
typedef struct cluster_parts {
    const yaml_node_t *preset, *intra, *fabric, *gpu, *nic;
} cluster_parts;

/* A cluster preset by name: the whole of `cluster:` or its `preset:` (field says which). */
static gs_status cluster_preset(const gs__yaml_loader *l, const yaml_node_t *v, const char *field, gs_cluster *c)
{
    const char *name = gs__scenario_value_name(l, v, field, "a cluster preset name");
    if (!name)
        return GS_ERR_INPUT;
    const gs_cluster *p = gs_cluster_preset_find(name);
    if (!p)
        return fail_preset(l, v, field, gs_cluster_preset_nearest(name), &cluster_presets);
    *c = *p;
    return GS_OK;
}

/* The cluster a mapping starts from: its preset, or a custom one when gpu, intra, nic and
 * gpus_per_node are all given. */
static gs_status cluster_start(const gs__yaml_loader *l, const yaml_node_t *v, const cluster_parts *p,
                               gs_cluster *c)
{
    if (p->preset)
        return cluster_preset(l, p->preset, "cluster.preset", c);
    static const char *const required[] = {"gpu", "intra", "nic", "gpus_per_node"};
    const yaml_node_t *have[] = {p->gpu, p->intra, p->nic, gs__yaml_lookup(l, v, "gpus_per_node", NULL)};
    for (size_t i = 0; i < 4; i++)
        if (!have[i])
            return gs__yaml_fail_at(
                l, v, GS_ERR_INPUT,
                "cluster: no '%s': found a cluster mapping without 'preset', "
                "expected preset: NAME or gpu, intra, nic and gpus_per_node",
                required[i]);
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "custom");
    c->nodes = 1;
    c->oversubscription = 1.0;
    return GS_OK;
}

/* The GPU, the intra-node fabric and the NIC a mapping names. */
static gs_status cluster_devices(const gs__yaml_loader *l, const cluster_parts *p, gs_cluster *c)
{
    gs_status st;
    const char *name;
    if (p->gpu && (st = load_gpu(l, p->gpu, &c->gpu)) != GS_OK)
        return st;
    if (p->intra) {
        const char *field = p->intra == p->fabric ? "cluster.fabric" : "cluster.intra";
        name = gs__scenario_value_name(l, p->intra, field, "an intra-node fabric preset name");
        if (!name)
            return GS_ERR_INPUT;
        const gs_fabric *f = gs_fabric_preset_find(name);
        if (!f)
            return fail_preset(l, p->intra, field, gs_fabric_preset_nearest(name), &fabric_presets);
        c->intra = *f;
    }
    if (p->nic) {
        name = gs__scenario_value_name(l, p->nic, "cluster.nic", "a NIC preset name");
        if (!name)
            return GS_ERR_INPUT;
        const gs_nic *n = gs_nic_preset_find(name);
        if (!n)
            return fail_preset(l, p->nic, "cluster.nic", gs_nic_preset_nearest(name), &nic_presets);
        c->nic = *n;
    }
    return GS_OK;
}

/* nic_gbps: the NIC's line rate, Gb/s. */
static gs_status cluster_nic_gbps(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c, int *given)
{
    double gbps;
    gs_status st = gs__scenario_opt_real(l, v, "cluster", "nic_gbps", &gbps, given);
    if (st)
        return st;
    if (*given && !(gbps >= 1e-3 && gbps <= 1e6)) /* gs_cluster_validate's nic.gbps range */
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "nic_gbps", NULL), GS_ERR_INPUT,
                                "cluster.nic_gbps: found %g, expected a line rate in [0.001, 1e+06] Gb/s", gbps);
    if (*given) {
        /* A new line rate scales the achievable bandwidth by the same factor. */
        if (c->nic.gbps > 0.0 && c->nic.bw > 0.0)
            c->nic.bw *= gbps / c->nic.gbps;
        else
            c->nic.bw = gbps * 1e9 / 8.0;
        c->nic.gbps = gbps;
    }
    return GS_OK;
}

/* host_cpu: the node's host CPU (x86, grace). */
static gs_status cluster_host_cpu(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c)
{
    const yaml_node_t *n = gs__yaml_lookup(l, v, "host_cpu", NULL);
    if (!n)
        return GS_OK;
    const char *name = gs__scenario_value_name(l, n, "cluster.host_cpu", "x86 or grace");
    if (!name)
        return GS_ERR_INPUT;
    gs_host_cpu h;
    if (gs_host_cpu_parse(name, &h) != 0)
        return gs__yaml_fail_at(l, n, GS_ERR_INPUT, "cluster.host_cpu: found '%s', expected x86 or grace", name);
    c->host_cpu = (int)h;
    return GS_OK;
}

/* A mapping of cluster fields: a preset changed, or a cluster assembled from device presets. */
static gs_status cluster_mapping(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c)
{
    gs_status st = gs__yaml_check_keys(l, v, "cluster", cluster_keys, sizeof cluster_keys / sizeof cluster_keys[0]);
    if (st != GS_OK)
        return st;
    cluster_parts p = {
        .preset = gs__yaml_lookup(l, v, "preset", NULL),
        .intra = gs__yaml_lookup(l, v, "intra", NULL),
        .fabric = gs__yaml_lookup(l, v, "fabric", NULL),
        .gpu = gs__yaml_lookup(l, v, "gpu", NULL),
        .nic = gs__yaml_lookup(l, v, "nic", NULL),
    };
    if (p.intra && p.fabric)
        return gs__yaml_fail_at(
            l, p.fabric, GS_ERR_INPUT,
            "cluster: found both 'intra' and 'fabric', expected one of them "
            "(they name the same thing: the intra-node fabric)");
    if (!p.intra)
        p.intra = p.fabric;
    int gbps_given, npn_given;
    if ((st = cluster_start(l, v, &p, c)) || (st = cluster_devices(l, &p, c)) ||
        (st = cluster_nic_gbps(l, v, c, &gbps_given)))
        return st;
    if ((st = gs__scenario_opt_string(l, v, "cluster", "name", c->name, sizeof c->name)) ||
        (st = gs__scenario_opt_count(l, v, "cluster", "nodes", &c->nodes, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "cluster", "gpus_per_node", &c->gpus_per_node, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "cluster", "nics_per_node", &c->nics_per_node, &npn_given)) ||
        (st = gs__scenario_opt_bool(l, v, "cluster", "rail_optimized", &c->rail_optimized, NULL)) ||
        (st = gs__scenario_opt_real(l, v, "cluster", "oversubscription", &c->oversubscription, NULL)) ||
        (st = cluster_host_cpu(l, v, c)))
        return st;
    if (!p.preset && !npn_given)
        c->nics_per_node = c->gpus_per_node;
    if (c->oversubscription < 1.0)
        return gs__yaml_fail_at(
            l, gs__yaml_lookup(l, v, "oversubscription", NULL), GS_ERR_INPUT,
            "cluster.oversubscription must be at least 1: found %g, expected a "
            "ratio >= 1 (1 = non-blocking)",
            c->oversubscription);
    if (p.preset && (p.gpu || p.intra || p.nic || gbps_given))
        c->source = NULL; /* no longer the published configuration */
    return GS_OK;
}

gs_status gs__scenario_load_cluster(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c)
{
    gs_status st;
    char found[96];
    if (v->type == YAML_SCALAR_NODE)
        st = cluster_preset(l, v, "cluster", c);
    else if (v->type == YAML_MAPPING_NODE)
        st = cluster_mapping(l, v, c);
    else
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "cluster: found %s, expected a cluster preset name or a mapping",
                                gs__yaml_describe(v, found, sizeof found));
    if (st != GS_OK)
        return st;
    st = gs_cluster_validate(c, l->err);
    if (st != GS_OK)
        gs__scenario_prefix_at(l, v);
    return st;
}
