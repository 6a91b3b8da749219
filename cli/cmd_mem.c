/* `gridstep mem`: the memory and traffic ledgers of a scenario, per rank class (pipeline stage). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/plot.h"
#include "engine/ledger.h"
#include "engine/units.h"

const char gs_cmd_mem_help[] =
    "Prints, for each pipeline stage (ranks of one stage are identical up to their TP and DP\n"
    "coordinates), the bytes a rank holds by kind and the bytes it sends per step:\n"
    "\n"
    "  memory   params, fp32 master, Adam m and v, gradients (sharded or not, per the strategy);\n"
    "           activations of one micro-batch (Korthikanti et al. 2022, op by op, for none,\n"
    "           selective and full recompute, TP and sequence parallel); the other micro-batches\n"
    "           in flight under the pipeline schedule; FSDP gathered units (largest unit x\n"
    "           (1 + prefetch depth)) and the unsharded gradient before its reduce-scatter;\n"
    "           NCCL and cuBLAS workspace (an estimate, said so). The peak is their sum, and\n"
    "           whether it fits the GPU (or by how many GB it is short).\n"
    "  traffic  bytes sent per rank per step as nccl-tests counts bus bytes: FSDP/ZeRO all-gather,\n"
    "           reduce-scatter and all-reduce over the shard group, TP all-reduces, PP sends; CP,\n"
    "           EP and FP8 delayed scaling's amax all-reduces when the scenario has them;\n"
    "           split by link class (NVLink/PCIe inside a node vs the network).\n"
    "\n"
    "Conventions: 16 B per parameter of state in mixed precision (2 params + 4 master + 4 m + 4 v\n"
    "+ 2 grads; 18 with grad_dtype fp32); FULL_SHARD counts the backward re-gather (3 x M x (N-1)/N per micro-batch), so\n"
    "it is 1.5x the seed's 2 x M x (N-1)/N, which is SHARD_GRAD_OP's. GB = 10^9 B throughout.\n"
    "\n"
    "options:\n"
    "  --json      one JSON document: params, states_total_bytes, per_rank_state_bytes, peak_bytes,\n"
    "              traffic_bytes, traffic_by_dim {dp, tp, pp}, ranks [...] (doc/json.md)\n"
    "  --explain   every line's formula with the numbers substituted, and cross-checks against\n"
    "              the seed's hand figures\n"
    "  --plot FILE.png|FILE.svg  stacked bars through gnuplot: per pipeline stage (its ranks hold\n"
    "              the same bytes) params, master, optimizer (Adam m + v), grads, activations (with\n"
    "              the micro-batches in flight) and buffers (FSDP gathers, workspace) in GB, the\n"
    "              GPU's memory as a dashed line; FILE.dat (bytes) and FILE.gp are written beside it\n"
    "\n"
    "examples:\n"
    "  gridstep mem scenarios/seed-7b-8xa100.yaml\n"
    "  gridstep mem --explain scenarios/seed-70b-64xa100.yaml\n"
    "  gridstep mem --json scenarios/seed-7b-64gpu-25gbe.yaml | jq .traffic_bytes\n"
    "  gridstep mem --plot mem.png scenarios/seed-70b-64xa100.yaml\n";

static const char usage[] = "gridstep mem [--json] [--explain] [--plot FILE.png|FILE.svg] SCENARIO.yaml";

static json_t *ledger_json(const gs_scenario *s, const gs_mesh *mesh, const gs_ledger *l, int explain)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "scenario", json_string(s->name));
    json_object_set_new(doc, "model", json_string(s->model.name));
    json_object_set_new(doc, "params", json_integer((json_int_t)l->params));
    json_object_set_new(doc, "bytes_per_param", json_integer((json_int_t)l->bytes_per_param));
    json_object_set_new(doc, "states_total_bytes", json_integer((json_int_t)l->states_total_bytes));
    json_object_set_new(doc, "per_rank_state_bytes", json_integer((json_int_t)l->per_rank_state_bytes));
    json_object_set_new(doc, "peak_bytes", json_integer((json_int_t)l->peak_bytes));
    json_object_set_new(doc, "gpu_bytes", json_integer((json_int_t)l->gpu_bytes));
    json_object_set_new(doc, "fits", json_boolean(l->peak_bytes <= l->gpu_bytes));
    json_object_set_new(doc, "min_gpus_for_states", json_integer((json_int_t)l->min_gpus));
    json_object_set_new(doc, "traffic_bytes", json_integer((json_int_t)l->traffic_bytes));
    json_t *tbd = json_object();
    json_object_set_new(tbd, "dp", json_integer((json_int_t)l->traffic_by_dim[GS_DIM_DP]));
    json_object_set_new(tbd, "tp", json_integer((json_int_t)l->traffic_by_dim[GS_DIM_TP]));
    json_object_set_new(tbd, "pp", json_integer((json_int_t)l->traffic_by_dim[GS_DIM_PP]));
    json_object_set_new(doc, "traffic_by_dim", tbd);
    json_object_set_new(doc, "microbatches", json_integer((json_int_t)l->microbatches));
    json_t *grid = json_object();
    json_object_set_new(grid, "dp", json_integer((json_int_t)gs_mesh_dp_replicas(mesh)));
    if (mesh->cp > 1)
        json_object_set_new(grid, "cp", json_integer((json_int_t)mesh->cp));
    if (mesh->cp > 1 && mesh->cp_a2a > 1)
        json_object_set_new(grid, "cp_a2a", json_integer((json_int_t)mesh->cp_a2a));
    if (mesh->ep > 1)
        json_object_set_new(grid, "ep", json_integer((json_int_t)mesh->ep));
    if (mesh->etp)
        json_object_set_new(grid, "etp", json_integer((json_int_t)mesh->etp));
    json_object_set_new(grid, "pp", json_integer((json_int_t)mesh->size[GS_DIM_PP]));
    json_object_set_new(grid, "tp", json_integer((json_int_t)mesh->size[GS_DIM_TP]));
    json_object_set_new(doc, "grid", grid);
    json_object_set_new(doc, "sharding", json_string(gs_sharding_name(s->strategy.sharding)));
    json_t *ranks = json_array();
    for (size_t i = 0; i < l->nranks; i++) {
        const gs_ledger_rank *r = &l->ranks[i];
        json_t *o = json_object();
        json_object_set_new(o, "stage", json_integer((json_int_t)r->stage));
        json_object_set_new(o, "first_rank", json_integer((json_int_t)r->first_rank));
        json_object_set_new(o, "ranks", json_integer((json_int_t)r->count));
        json_object_set_new(o, "layers", json_integer((json_int_t)r->layers));
        json_object_set_new(o, "params", json_integer((json_int_t)r->params));
        json_object_set_new(o, "unit_params", json_integer((json_int_t)r->unit_params));
        json_object_set_new(o, "dp_shard_group", json_integer((json_int_t)r->dp_shard_group));
        json_object_set_new(o, "dp_replica_group", json_integer((json_int_t)r->dp_replica_group));
        json_object_set_new(o, "state_bytes", json_integer((json_int_t)r->state_bytes));
        json_t *mem = json_object();
        for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
            json_object_set_new(mem, gs_mem_kind_name((gs_mem_kind)k), json_integer((json_int_t)r->mem[k]));
        json_object_set_new(o, "memory", mem);
        json_object_set_new(o, "host_bytes", json_integer((json_int_t)r->host_bytes));
        json_object_set_new(o, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
        json_object_set_new(o, "inflight_microbatches", json_integer((json_int_t)r->inflight_microbatches));
        json_t *tr = json_object();
        for (int k = 0; k < GS_TRAFFIC_KIND_COUNT; k++)
            if ((k != GS_TRAFFIC_CP || mesh->cp > 1) && (k != GS_TRAFFIC_EP || mesh->ep > 1 || r->traffic[k]) &&
                (k != GS_TRAFFIC_FP8_AMAX || r->traffic[k]))
                /* with cp, with ep or the allgather dispatcher only */
                json_object_set_new(tr, gs_traffic_kind_name((gs_traffic_kind)k),
                                json_integer((json_int_t)r->traffic[k]));
        json_object_set_new(o, "traffic", tr);
        json_t *tl = json_object();
        json_object_set_new(tl, "intra_node", json_integer((json_int_t)r->traffic_link[GS_LINKCLASS_INTRA]));
        json_object_set_new(tl, "network", json_integer((json_int_t)r->traffic_link[GS_LINKCLASS_NET]));
        json_object_set_new(o, "traffic_by_link", tl);
        json_object_set_new(o, "traffic_bytes", json_integer((json_int_t)r->traffic_bytes));
        if (explain) {
            json_t *lines = json_array();
            for (size_t j = 0; j < r->nlines; j++) {
                json_t *ln = json_object();
                json_object_set_new(ln, "label", json_string(r->lines[j].label));
                json_object_set_new(ln, "bytes", json_integer((json_int_t)r->lines[j].bytes));
                json_object_set_new(ln, "formula", json_string(r->lines[j].formula));
                json_array_append_new(lines, ln);
            }
            json_object_set_new(o, "explain", lines);
        }
        json_array_append_new(ranks, o);
    }
    json_object_set_new(doc, "ranks", ranks);
    json_t *notes = json_array();
    for (size_t j = 0; j < l->nnotes; j++) {
        json_t *ln = json_object();
        json_object_set_new(ln, "label", json_string(l->notes[j].label));
        json_object_set_new(ln, "bytes", json_integer((json_int_t)l->notes[j].bytes));
        json_object_set_new(ln, "text", json_string(l->notes[j].formula));
        json_array_append_new(notes, ln);
    }
    json_object_set_new(doc, "notes", notes);
    return doc;
}

/* Stages shown as columns: all when few, else the first two, the peak one and the last. */
static size_t pick_stages(const gs_ledger *l, size_t *idx)
{
    size_t n = 0;
    if (l->nranks <= 6) {
        for (size_t i = 0; i < l->nranks; i++)
            idx[n++] = i;
        return n;
    }
    size_t peak = (size_t)(gs_ledger_peak_rank(l) - l->ranks);
    size_t cand[4] = {0, 1, peak, l->nranks - 1};
    for (int k = 0; k < 4; k++) {
        int dup = 0;
        for (size_t j = 0; j < n; j++)
            dup |= idx[j] == cand[k];
        if (!dup)
            idx[n++] = cand[k];
    }
    for (size_t a = 1; a < n; a++) /* keep stage order */
        for (size_t b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
            size_t t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    return n;
}

static gs_status print_human(const gs_scenario *s, const gs_mesh *mesh, const gs_ledger *l, int explain)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], b3[GS_FMT_BYTES], cnt[32];
    char order[32], grid[96];
    gs_mesh_order_format_cp(mesh->order, mesh->cp > 1, mesh->cp_outer, order, sizeof order);
    gs_mesh_grid_text(mesh, grid, sizeof grid);
    printf("%s: %s on %" PRIu64 " x %s (%" PRIu64 " GPUs of %s)\n", s->name, s->model.name,
           s->cluster.nodes, s->cluster.name, gs_cluster_gpus(&s->cluster),
           gs_fmt_bytes(l->gpu_bytes, b1, sizeof b1));
    printf("grid %s (order %s), %s, %s, recompute %s, %s\n", grid, order,
           gs_sharding_name(s->strategy.sharding), gs_precision_name(s->strategy.precision),
           gs_recompute_name(s->strategy.recompute),
           mesh->size[GS_DIM_PP] > 1 ? gs_pipeline_name(s->strategy.pipeline) : "no pipeline");
    printf("params %s; states %" PRIu64 " B/param = %s in all; by states alone at least %" PRIu64
           " GPUs of %s\n",
           gs_fmt_count(l->params, cnt, sizeof cnt), l->bytes_per_param,
           gs_fmt_bytes(l->states_total_bytes, b2, sizeof b2), l->min_gpus, gs_fmt_bytes(l->gpu_bytes, b3, sizeof b3));
    printf("micro-batches per step: %" PRIu64 " (global %" PRIu64 " / (micro %" PRIu64 " x dp %" PRIu64 "))\n\n",
           l->microbatches, s->batch.global_seqs, s->batch.micro_seqs, gs_mesh_dp_replicas(mesh));

    size_t idx[8];
    size_t n = pick_stages(l, idx);
    gs_cli_table t;
    gs_cli_table_init(&t, n + 1);
    gs_status rc = GS_OK;
    const char *cells[9];
    char buf[9][64];

#define ROW(label, expr)                                                                           \
    do {                                                                                           \
        cells[0] = label;                                                                          \
        for (size_t j = 0; j < n; j++) {                                                           \
            const gs_ledger_rank *r = &l->ranks[idx[j]];                                           \
            (void)r;                                                                               \
            gs_fmt_bytes((expr), buf[j], sizeof buf[j]);                                           \
            cells[j + 1] = buf[j];                                                                 \
        }                                                                                          \
        if ((rc = gs_cli_table_row(&t, cells)) != GS_OK)                                           \
            goto out;                                                                              \
    } while (0)

    cells[0] = "memory per rank (GB = 1e9 B)";
    for (size_t j = 0; j < n; j++) {
        const gs_ledger_rank *r = &l->ranks[idx[j]];
        snprintf(buf[j], sizeof buf[j], "stage %" PRIu64 " (%" PRIu64 " layers)", r->stage, r->layers);
        cells[j + 1] = buf[j];
    }
    if ((rc = gs_cli_table_row(&t, cells)) != GS_OK)
        goto out;
    static const char *mem_labels[GS_MEM_KIND_COUNT] = {
        "params", "fp32 master", "Adam m", "Adam v", "gradients",
        "activations (1 micro-batch)", "pipeline in flight", "FSDP gathered units", "workspace (est.)"};
    for (int k = 0; k < GS_MEM_KIND_COUNT; k++)
        ROW(mem_labels[k], r->mem[k]);
    ROW("peak", r->peak_bytes);
    cells[0] = "fits?";
    for (size_t j = 0; j < n; j++) {
        const gs_ledger_rank *r = &l->ranks[idx[j]];
        if (r->peak_bytes <= l->gpu_bytes)
            snprintf(buf[j], sizeof buf[j], "yes, %s free", gs_fmt_bytes(l->gpu_bytes - r->peak_bytes, b1, sizeof b1));
        else
            snprintf(buf[j], sizeof buf[j], "NO, short %s", gs_fmt_bytes(r->peak_bytes - l->gpu_bytes, b1, sizeof b1));
        cells[j + 1] = buf[j];
    }
    if ((rc = gs_cli_table_row(&t, cells)) != GS_OK)
        goto out;
    gs_cli_table_print(&t, stdout, 0);
    gs_cli_table_fini(&t);

    int any_host = 0;
    for (size_t j = 0; j < l->nranks; j++)
        any_host |= l->ranks[j].host_bytes > 0;
    if (any_host)
        printf("host memory (CPU offload) per rank: %s\n", gs_fmt_bytes(l->ranks[0].host_bytes, b1, sizeof b1));
    putchar('\n');

    gs_cli_table_init(&t, n + 1);
    cells[0] = "traffic per rank per step (sent)";
    for (size_t j = 0; j < n; j++) {
        snprintf(buf[j], sizeof buf[j], "stage %" PRIu64, l->ranks[idx[j]].stage);
        cells[j + 1] = buf[j];
    }
    if ((rc = gs_cli_table_row(&t, cells)) != GS_OK)
        goto out;
    ROW("DP all-gather", r->traffic[GS_TRAFFIC_DP_ALLGATHER]);
    ROW("DP reduce-scatter", r->traffic[GS_TRAFFIC_DP_REDUCE_SCATTER]);
    ROW("DP all-reduce", r->traffic[GS_TRAFFIC_DP_ALLREDUCE]);
    ROW("TP", r->traffic[GS_TRAFFIC_TP]);
    ROW("PP", r->traffic[GS_TRAFFIC_PP]);
    if (l->ranks[0].traffic[GS_TRAFFIC_CP])
        ROW("CP", r->traffic[GS_TRAFFIC_CP]);
    if (l->ranks[0].traffic[GS_TRAFFIC_EP])
        ROW("EP", r->traffic[GS_TRAFFIC_EP]);
    if (l->ranks[0].traffic[GS_TRAFFIC_FP8_AMAX])
        ROW("FP8 amax", r->traffic[GS_TRAFFIC_FP8_AMAX]);
    ROW("total", r->traffic_bytes);
    ROW("  inside a node", r->traffic_link[GS_LINKCLASS_INTRA]);
    ROW("  over the network", r->traffic_link[GS_LINKCLASS_NET]);
    gs_cli_table_print(&t, stdout, 0);
    gs_cli_table_fini(&t);
#undef ROW
    if (n < l->nranks)
        printf("(%zu of %zu stages shown; --json lists all)\n", n, l->nranks);

    if (explain) {
        for (size_t j = 0; j < n; j++) {
            const gs_ledger_rank *r = &l->ranks[idx[j]];
            printf("\nstage %" PRIu64 ": ranks like %" PRIu64 " (%" PRIu64 " ranks), %" PRIu64 " layers, %s params on this rank\n",
                   r->stage, r->first_rank, r->count, r->layers, gs_fmt_count(r->params, cnt, sizeof cnt));
            for (size_t k = 0; k < r->nlines; k++)
                printf("  %-20s %12s  %s\n", r->lines[k].label,
                       r->lines[k].bytes ? gs_fmt_bytes(r->lines[k].bytes, b1, sizeof b1) : "",
                       r->lines[k].formula);
        }
        if (l->nnotes) {
            printf("\ncross-checks against hand calculations:\n");
            for (size_t k = 0; k < l->nnotes; k++)
                printf("  %s: %s\n", l->notes[k].label, l->notes[k].formula);
        }
    }
    rc = GS_OK;
out:
    gs_cli_table_fini(&t);
    if (rc != GS_OK)
        return rc;
    return GS_OK;
}

gs_status gs_cmd_mem(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"explain", no_argument, NULL, 'e'},
        {"plot", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, explain = 0, c;
    const char *plot_path = NULL;
    gs_plot plot;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'e': explain = 1; break;
        case 'p': {
            gs_status prc = gs_plot_init(&plot, "--plot", optarg, err);
            if (prc != GS_OK)
                return prc;
            plot_path = optarg;
            break;
        }
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    const char *path = NULL;
    gs_status rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err);
    if (rc != GS_OK)
        return rc;
    gs_scenario s;
    gs_mesh mesh;
    gs_ledger *l = NULL;
    json_t *doc = NULL;
    rc = gs_cli_load(path, &s, &mesh, err);
    if (rc != GS_OK)
        goto out;
    rc = gs_ledger_create(&s, &mesh, &l, err);
    if (rc != GS_OK)
        goto out;
    if (json) {
        doc = ledger_json(&s, &mesh, l, explain);
        rc = doc ? gs_cli_json_print(doc, err) : gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    } else {
        rc = print_human(&s, &mesh, l, explain);
        if (rc != GS_OK)
            gs_error_set(err, rc, "out of memory printing the ledger");
    }
    if (rc == GS_OK && plot_path) {
        fflush(stdout);
        rc = gs_plot_mem(&plot, &s, l, err);
    }
out:
    json_decref(doc);
    gs_ledger_destroy(l);
    return rc;
}
