/* Scenario loading: YAML text (libyaml's document API) -> gs_scenario, every error placed at
 * file:line:column and saying what was found and what was expected. This file holds the
 * document and its root, the grid, batch and stragglers sections, and the load API; the model,
 * cluster and strategy sections have a file each, the values they read another
 * (engine/scenario_internal.h). The parser and its documents live on load_text's stack and are
 * freed before it returns; the scenario is built in caller storage. */
#include "engine/scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "engine/scenario_internal.h"
#include "engine/units.h"

/* -------------------------------------------------------------------------- grid ---- */

static const char *const grid_keys[] = {"dp", "pp", "tp", "cp", "cp_a2a", "ep", "etp", "order", "allow_tp_cross_node",
                                        "first_stage_layers", "last_stage_layers", "account_for_embedding",
                                        "account_for_loss", "layout"};

/* Megatron-LM refuses --account-for-embedding/loss-in-pipeline-split beside
 * --decoder-first/last-pipeline-num-layers (megatron/core/transformer/transformer_config.py,
 * TransformerConfig.__post_init__): the error sits at the accounting key. */
static gs_status check_split_keys(const gs__yaml_loader *l, const yaml_node_t *v, const gs_grid *g)
{
    if (g->layout.n && (g->account_for_embedding || g->account_for_loss || g->first_stage_layers ||
                        g->last_stage_layers))
        return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, "layout", NULL), GS_ERR_INPUT,
                                "grid.layout: found beside %s, expected one way of an uneven pipeline split: the "
                                "layout names every stage's layers (Megatron-LM refuses the others with it)",
                                g->first_stage_layers   ? "first_stage_layers"
                                : g->last_stage_layers  ? "last_stage_layers"
                                : g->account_for_loss && !g->account_for_embedding ? "account_for_loss"
                                                                                    : "account_for_embedding");
    if (!(g->account_for_embedding || g->account_for_loss) || !(g->first_stage_layers || g->last_stage_layers))
        return GS_OK;
    const char *key = g->account_for_embedding ? "account_for_embedding" : "account_for_loss";
    return gs__yaml_fail_at(l, gs__yaml_lookup(l, v, key, NULL), GS_ERR_INPUT,
                            "grid.%s: found true beside %s, expected one way of an uneven pipeline split: "
                            "the embedding / loss counted as layers, or first_stage_layers / last_stage_layers "
                            "(Megatron-LM refuses both)",
                            key, g->first_stage_layers ? "first_stage_layers" : "last_stage_layers");
}

void gs_grid_split_even(gs_grid *g)
{
    g->first_stage_layers = g->last_stage_layers = 0;
    g->account_for_embedding = g->account_for_loss = 0;
    memset(&g->layout, 0, sizeof g->layout);
}

/* grid.layout: a Megatron layout string (engine/pipeline_layout.h). */
static gs_status load_layout(const gs__yaml_loader *l, const yaml_node_t *v, gs_grid *g)
{
    const yaml_node_t *lv = gs__yaml_lookup(l, v, "layout", NULL);
    char found[96], why[200];
    if (!lv)
        return GS_OK;
    if (!gs__yaml_is_text_scalar(lv))
        return gs__yaml_fail_at(l, lv, GS_ERR_INPUT,
                                "grid.layout: found %s, expected a Megatron layout string like \"Et*4|(t*4|)*14tL\"",
                                gs__yaml_describe(lv, found, sizeof found));
    if (gs_layout_parse(gs__yaml_scalar_text(lv), &g->layout, why, sizeof why) != 0)
        return gs__yaml_fail_at(l, lv, GS_ERR_INPUT, "grid.layout: %s", why);
    return GS_OK;
}

static gs_status load_grid(const gs__yaml_loader *l, const yaml_node_t *v, gs_grid *g)
{
    gs_status st;
    char found[96];
    g->dp = g->pp = g->tp = g->cp = g->ep = 1;
    g->cp_outer = 0;
    g->cp_a2a = 0;
    g->order[0] = GS_DIM_TP;
    g->order[1] = GS_DIM_DP;
    g->order[2] = GS_DIM_PP;
    g->allow_tp_cross_node = 0;
    g->first_stage_layers = g->last_stage_layers = 0;
    g->account_for_embedding = g->account_for_loss = 0;
    memset(&g->layout, 0, sizeof g->layout);
    g->grid_line = (uint32_t)gs__yaml_node_line(v);
    g->grid_col = (uint32_t)gs__yaml_node_col(v);
    if (v->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "grid: found %s, expected a mapping like {dp: 4, pp: "
                                "2, tp: 8}",
                                gs__yaml_describe(v, found, sizeof found));
    if ((st = gs__yaml_check_keys(l, v, "grid", grid_keys,
                                  sizeof grid_keys / sizeof grid_keys[0])) ||
        (st = gs__scenario_opt_count(l, v, "grid", "dp", &g->dp, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "pp", &g->pp, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "tp", &g->tp, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "cp", &g->cp, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "cp_a2a", &g->cp_a2a, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "ep", &g->ep, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "etp", &g->etp, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, "grid", "allow_tp_cross_node", &g->allow_tp_cross_node, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "first_stage_layers", &g->first_stage_layers, NULL)) ||
        (st = gs__scenario_opt_count(l, v, "grid", "last_stage_layers", &g->last_stage_layers, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, "grid", "account_for_embedding", &g->account_for_embedding, NULL)) ||
        (st = gs__scenario_opt_bool(l, v, "grid", "account_for_loss", &g->account_for_loss, NULL)) ||
        (st = load_layout(l, v, g)) || (st = check_split_keys(l, v, g)))
        return st;
    yaml_node_t *order = gs__yaml_lookup(l, v, "order", NULL);
    int has_cp = 0, rc = 0;
    if (order && (order->type != YAML_SCALAR_NODE || gs__yaml_scalar_is_null(order) ||
                  (rc = gs_mesh_order_parse_cp(gs__yaml_scalar_text(order), g->order, &has_cp, &g->cp_outer)) != 0))
        return gs__yaml_fail_at(
            l, order, GS_ERR_INPUT,
            rc == -2 ? "grid.order: found %s, expected cp next to dp (tp-cp-dp-pp is Megatron's default: "
                       "gradients are reduced over the dp x cp ranks as one group)"
                     : "grid.order: found %s, expected a permutation of tp, dp and pp, fastest "
                       "first (tp-dp-pp is Megatron's default; the seed's table is tp-pp-dp), with cp "
                       "beside dp when the grid has context parallelism (tp-cp-dp-pp)",
            gs__yaml_describe(order, found, sizeof found));
    return GS_OK;
}

/* ------------------------------------------------------------------------- batch ---- */

static const char *const batch_keys[] = {"global", "micro"};

static gs_status load_batch(const gs__yaml_loader *l, const yaml_node_t *v, const gs_grid *g,
                            gs_batch *b)
{
    gs_status st;
    char found[96];
    int global_given = 0;
    b->micro_seqs = 1;
    b->global_seqs = 0;
    b->batch_line = g->grid_line;
    b->batch_col = g->grid_col;
    if (v) {
        b->batch_line = (uint32_t)gs__yaml_node_line(v);
        b->batch_col = (uint32_t)gs__yaml_node_col(v);
        if (v->type != YAML_MAPPING_NODE)
            return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                    "batch: found %s, expected a mapping like "
                                    "{global: 1024, micro: 1}",
                                    gs__yaml_describe(v, found, sizeof found));
        if ((st = gs__yaml_check_keys(l, v, "batch", batch_keys, 2)) ||
            (st = gs__scenario_opt_count(l, v, "batch", "global", &b->global_seqs, &global_given)) ||
            (st = gs__scenario_opt_count(l, v, "batch", "micro", &b->micro_seqs, NULL)))
            return st;
    }
    if (!global_given && gs_mul_u64(b->micro_seqs, g->dp, &b->global_seqs) != 0)
        return gs__yaml_fail_at(
            l, v, GS_ERR_OVERFLOW,
            "batch: micro=%llu x dp=%llu sequences per step is too large: expected "
            "a product below 2^64",
            (unsigned long long)b->micro_seqs, (unsigned long long)g->dp);
    return GS_OK;
}

/* -------------------------------------------------------------------------- root ---- */

/* `expect` (a published figure to compare with) is read by engine/expect.c; accepted and
 * skipped here. */
static const char *const top_keys[] = {"name", "description", "model", "cluster",
                                       "grid", "strategy", "batch", "expect", "stragglers"};

static const char *const straggler_keys[] = {"rank", "node", "slowdown"};

/* stragglers: [{rank: 3, slowdown: 1.3}, {node: 2, slowdown: 1.1}] */
static gs_status load_stragglers(const gs__yaml_loader *l, const yaml_node_t *v, gs_scenario *s)
{
    char found[96];
    s->nstragglers = 0;
    if (!v)
        return GS_OK;
    if (v->type != YAML_SEQUENCE_NODE)
        return gs__yaml_fail_at(l, v, GS_ERR_INPUT,
                                "stragglers: found %s, expected a list like [{rank: 3, slowdown: "
                                "1.3}, {node: 1, slowdown: 1.1}]",
                                gs__yaml_describe(v, found, sizeof found));
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(l->doc, *it);
        gs_status st;
        if (!e || e->type != YAML_MAPPING_NODE)
            return gs__yaml_fail_at(
                l, e, GS_ERR_INPUT,
                "stragglers: found %s, expected a mapping {rank: R, slowdown: F} or "
                "{node: N, slowdown: F}",
                gs__yaml_describe(e, found, sizeof found));
        if (s->nstragglers == GS_MAX_STRAGGLERS)
            return gs__yaml_fail_at(l, e, GS_ERR_INPUT, "stragglers: found more than %d entries, expected at most %d",
                                    GS_MAX_STRAGGLERS, GS_MAX_STRAGGLERS);
        if ((st = gs__yaml_check_keys(l, e, "stragglers", straggler_keys, 3)) != GS_OK)
            return st;
        gs_straggler *g = &s->stragglers[s->nstragglers];
        int has_rank, has_node, has_slow;
        uint64_t node = 0;
        yaml_node_t *rv = gs__yaml_lookup(l, e, "rank", NULL), *nv = gs__yaml_lookup(l, e, "node", NULL);
        has_rank = rv != NULL;
        has_node = nv != NULL;
        if ((rv && (st = gs__scenario_value_u64(l, rv, "stragglers.rank", &g->id, 1))) ||
            (nv && (st = gs__scenario_value_u64(l, nv, "stragglers.node", &node, 1))))
            return st;
        if (has_rank == has_node)
            return gs__yaml_fail_at(l, e, GS_ERR_INPUT,
                                    "stragglers: found %s, expected exactly one of rank or node",
                                    has_rank ? "both rank and node" : "neither rank nor node");
        if (has_node) {
            g->node = 1;
            g->id = node;
        }
        /* listed twice, a rank's (or node's) factors would multiply without a word */
        for (size_t k = 0; k < s->nstragglers; k++)
            if (s->stragglers[k].node == g->node && s->stragglers[k].id == g->id)
                return gs__yaml_fail_at(l, e, GS_ERR_INPUT,
                                        "stragglers: %s %llu is listed twice (entries %zu and %zu), expected each "
                                        "rank or node once with its one slowdown",
                                        g->node ? "node" : "rank", (unsigned long long)g->id, k + 1,
                                        s->nstragglers + 1);
        if ((st = gs__scenario_opt_real(l, e, "stragglers", "slowdown", &g->slowdown, &has_slow)))
            return st;
        if (!has_slow || !(g->slowdown >= 1.0) || g->slowdown > 1000.0)
            return gs__yaml_fail_at(
                l, has_slow ? gs__yaml_lookup(l, e, "slowdown", NULL) : e, GS_ERR_INPUT,
                "stragglers.slowdown: found %s, expected a factor between 1 and 1000",
                has_slow ? gs__yaml_describe(gs__yaml_lookup(l, e, "slowdown", NULL), found,
                                             sizeof found)
                         : "nothing");
        s->nstragglers++;
    }
    return GS_OK;
}

static gs_status load_root(const gs__yaml_loader *l, const yaml_node_t *root, gs_scenario *s)
{
    gs_status st;
    char found[96];
    if (root->type != YAML_MAPPING_NODE)
        return gs__yaml_fail_at(
            l, root, GS_ERR_INPUT,
            "scenario: found %s at the top level, expected a mapping with model, "
            "cluster, grid (and strategy, batch)",
            gs__yaml_describe(root, found, sizeof found));
    st = gs__yaml_check_keys(l, root, "scenario", top_keys, sizeof top_keys / sizeof top_keys[0]);
    if (st != GS_OK)
        return st;
    if ((st = gs__scenario_opt_string(l, root, "scenario", "name", s->title, sizeof s->title)) ||
        (st = gs__scenario_opt_string(l, root, "scenario", "description", s->description,
                                      sizeof s->description)))
        return st;
    static const char *const required[] = {"model", "cluster", "grid"};
    static const char *const example[] = {
        "model: llama2-70b",
        "cluster: {preset: dgx-a100-80g, nodes: 8}",
        "grid: {dp: 4, pp: 2, tp: 8}",
    };
    for (size_t i = 0; i < 3; i++)
        if (!gs__yaml_lookup(l, root, required[i], NULL))
            return gs__yaml_fail_at(
                l, NULL, GS_ERR_INPUT,
                "%s is required: found no '%s' key at the top level, expected e.g. "
                "'%s'",
                required[i], required[i], example[i]);
    if ((st = gs__scenario_load_model(l, gs__yaml_lookup(l, root, "model", NULL), &s->model)) ||
        (st = gs__scenario_load_cluster(l, gs__yaml_lookup(l, root, "cluster", NULL), &s->cluster)) ||
        (st = load_grid(l, gs__yaml_lookup(l, root, "grid", NULL), &s->grid)) ||
        (st = gs__scenario_load_strategy(l, gs__yaml_lookup(l, root, "strategy", NULL), &s->strategy)) ||
        (st = load_batch(l, gs__yaml_lookup(l, root, "batch", NULL), &s->grid, &s->batch)) ||
        (st = load_stragglers(l, gs__yaml_lookup(l, root, "stragglers", NULL), s)))
        return st;
    /* AUTO is resolved once, from the file's sharding (the default's when none is given): a
     * plan, sweep or diagnose fix that changes the sharding keeps the framework */
    s->strategy.framework = gs_framework_resolve(s->strategy.framework, (int)s->strategy.sharding);
    char why[160];
    if (gs_recompute_modules_check(gs_strategy_recompute_modules(&s->strategy), s->model.mla.kv_lora_rank != 0,
                                   s->model.moe.experts != 0, s->model.moe.shared_experts != 0, why,
                                   sizeof why) != 0) {
        const yaml_node_t *sv = gs__yaml_lookup(l, root, "strategy", NULL);
        return gs__yaml_fail_at(l, sv ? gs__yaml_lookup(l, sv, "recompute_modules", NULL) : NULL, GS_ERR_INPUT,
                                "strategy.recompute_modules: %s", why);
    }
    if (s->strategy.fp8 != GS_FP8_OFF) {
        /* the recipe's AUTO likewise, from the framework */
        s->strategy.fp8 = gs_fp8_resolve(s->strategy.fp8, s->strategy.framework);
        gs_status fst = gs__scenario_fp8_recipe_keys(l, gs__yaml_lookup(l, root, "strategy", NULL), &s->strategy);
        if (fst != GS_OK)
            return fst;
        if (!(s->cluster.gpu.peak_flops_fp8 > 0.0)) {
            const yaml_node_t *sv = gs__yaml_lookup(l, root, "strategy", NULL);
            return gs__yaml_fail_at(l, sv ? gs__yaml_lookup(l, sv, "precision", NULL) : NULL, GS_ERR_INPUT,
                                    "strategy.precision fp8: the cluster's GPU %s has no FP8 tensor cores: "
                                    "expected a Hopper or later GPU (h100-sxm, h100-pcie, h100-nvl, h200, b200, "
                                    "gb200, or gpu: {fp8_tflops: ...}), or precision bf16",
                                    s->cluster.gpu.name);
        }
        if (s->strategy.fp8 == GS_FP8_MX && s->cluster.gpu.compute_capability < 100) {
            const yaml_node_t *sv = gs__yaml_lookup(l, root, "strategy", NULL);
            return gs__yaml_fail_at(l, sv ? gs__yaml_lookup(l, sv, "fp8_recipe", NULL) : NULL, GS_ERR_INPUT,
                                    "strategy.fp8_recipe mxfp8: block-scaled FP8 GEMMs need Blackwell tensor cores "
                                    "(compute capability 10.0 or later): found GPU %s (%d.%d), expected b200, gb200 "
                                    "or fp8_recipe current",
                                    s->cluster.gpu.name, s->cluster.gpu.compute_capability / 10,
                                    s->cluster.gpu.compute_capability % 10);
        }
    }
    return GS_OK;
}
/* The display name: base name of path without .yaml / .yml. */
static void base_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".yaml") == 0)
        n -= 5;
    else if (n > 4 && strcmp(b + n - 4, ".yml") == 0)
        n -= 4;
    if (n >= len)
        n = len - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

static gs_status load_text(const char *text, size_t len, const char *path, gs_scenario *out,
                           gs_error *err)
{
    gs_status st = GS_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int loaded = 0, have_extra = 0; /* loaded: parser and doc both held */
    gs__yaml_loader l = {path, &doc, err};

    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    base_name(path, out->name, sizeof out->name);
    gs_strategy_defaults(&out->strategy);

    st = gs__yaml_load_first(&l, &parser, text, len);
    if (st != GS_OK)
        goto out;
    loaded = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: empty scenario: found no YAML document, expected a mapping with "
                          "model, cluster and grid",
                          path);
        goto out;
    }
    st = load_root(&l, root, out);
    if (st != GS_OK)
        goto out;
    if (!yaml_parser_load(&parser, &extra)) {
        st = gs__yaml_parser_failure(&l, &parser);
        goto out;
    }
    have_extra = 1;
    yaml_node_t *second = yaml_document_get_root_node(&extra);
    if (second) {
        l.doc = &extra;
        st = gs__yaml_fail_at(&l, second, GS_ERR_INPUT,
                              "found a second YAML document, expected one "
                              "scenario per file");
        goto out;
    }
out:
    if (have_extra)
        yaml_document_delete(&extra);
    if (loaded) {
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
    }
    return st;
}

/* --------------------------------------------------------------------------- API ---- */

gs_status gs_scenario_load_string(const char *text, size_t len, const char *name,
                                  gs_scenario *out, gs_error *err)
{
    return load_text(text, len, name ? name : "<string>", out, err);
}

gs_status gs_scenario_load_file(const char *path, gs_scenario *out, gs_error *err)
{
    char *text = NULL;
    size_t size = 0;
    gs_status st = gs__yaml_read_file(path, &text, &size, err);
    if (st == GS_OK)
        st = load_text(text, size, path, out, err);
    free(text);
    return st;
}
