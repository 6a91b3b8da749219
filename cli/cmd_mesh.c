/* `gridstep mesh`: the DP x PP x TP grid of a scenario as a rank -> (dp, pp, tp) -> node table,
 * its process groups, and the launch flags (Megatron-LM, torch DeviceMesh, torchrun) that draw
 * the same grid. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/launch.h"
#include "engine/mesh.h"

const char gs_cmd_mesh_help[] =
    "Prints the scenario's device grid: every rank's (dp, pp, tp) coordinates and node, the\n"
    "process groups of each dimension with the nodes they span, and the launch configuration\n"
    "that draws the same grid. The grid checks run first (product = GPU count, TP inside a node,\n"
    "layers % pp, heads / kv_heads / ffn % tp); errors stop, warnings go to stderr.\n"
    "\n"
    "Rank order: grid.order lists the dimensions fastest-varying first. The default tp-dp-pp is\n"
    "Megatron-LM's (rank = tp + TP * (dp + DP * pp)); tp-pp-dp (rank = tp + TP * (pp + PP * dp))\n"
    "is the seed's 64-GPU table and Megatron's --use-tp-pp-dp-mapping. Ranks fill nodes in\n"
    "order: node = rank / gpus_per_node.\n"
    "\n"
    "Group numbering: the group of a rank along one dimension is numbered by its other two\n"
    "coordinates in grid order (the faster one varying fastest), which is also the order of the\n"
    "groups' lowest ranks; members are listed in ascending coordinate (= rank) order.\n"
    "\n"
    "Context and expert parallelism (grid.cp, grid.ep) are folded into the DP dimension: the dp\n"
    "coordinate and groups are then dp x cp positions (the ranks reducing gradients together), and\n"
    "the CP groups (with cp_a2a, hierarchical CP's a2a and p2p levels), EP groups and their\n"
    "expert-data-parallel (EDP) groups are listed after them, numbered by their lowest rank.\n"
    "\n"
    "options:\n"
    "  --json   one JSON document: grid {dp, pp, tp, [cp, cp_a2a, ep,] order}, world, nodes,\n"
    "           gpus_per_node, ranks [{rank, dp, pp, tp, node}], groups {dp, pp, tp, [cp, cp_a2a,\n"
    "           cp_p2p, ep, edp]: [[ranks], ...]}, megatron,\n"
    "           device_mesh, torchrun (refused above 1048576 ranks: use the human form)\n"
    "  --all    print every row of the rank table (by default grids over 256 ranks show the first\n"
    "           and last 64 rows)\n"
    "  --emit K print only a launch configuration for the scenario, K one of:\n"
    "           torchrun    the torchrun line and the accelerate FSDP config YAML it stands for\n"
    "                       (with TP or PP: the Megatron-LM command instead)\n"
    "           accelerate  the accelerate FSDP config YAML alone (readable by\n"
    "                       `gridstep sim --from-accelerate`)\n"
    "           megatron    torchrun + pretrain_gpt.py with Megatron-LM flags (grid, model shape,\n"
    "                       batch, recompute, optimizer sharding, precision; readable by\n"
    "                       `gridstep sim --from-megatron @FILE`)\n"
    "           slurm       an sbatch script: srun starts one torchrun per node\n"
    "           torchtitan  a torchtitan train config (TOML; FSDP2 or DDP scenarios with a\n"
    "                       torchtitan model flavor; readable by `gridstep sim --from-torchtitan`)\n"
    "           What a launcher cannot express is an error naming the field (TP/PP or zero1 in\n"
    "           accelerate, hybrid_shard, offload or gpipe in Megatron-LM); what it expresses\n"
    "           close enough, or what belongs to the training code, is a '# note:' line.\n"
    "           Values the scenario does not fix (addresses, ranks, --time) are marked placeholder.\n"
    "\n"
    "examples:\n"
    "  gridstep mesh scenarios/seed-70b-64xa100.yaml\n"
    "  gridstep mesh --json scenarios/seed-70b-64xa100.yaml | jq '.groups.tp'\n"
    "  gridstep mesh --emit megatron scenarios/seed-70b-64xa100.yaml\n"
    "  gridstep mesh --emit accelerate scenarios/seed-7b-8xa100.yaml > fsdp.yaml\n";

static const char usage[] =
    "gridstep mesh [--json] [--all] [--emit torchrun|accelerate|megatron|slurm|torchtitan] SCENARIO.yaml";

/* Above this many ranks the rank table is abbreviated unless --all. */
#define MESH_TABLE_FULL_MAX 256
/* Rows shown at each end of an abbreviated rank table. */
#define MESH_TABLE_EDGE_ROWS 64
/* Above this many groups per dimension only the first MESH_GROUPS_SHOWN are listed. */
#define MESH_GROUPS_FULL_MAX 64
#define MESH_GROUPS_SHOWN 16
/* Members listed one by one up to this group size; longer strided groups are abbreviated. */
#define MESH_MEMBERS_LISTED 16
/* Nodes of a group spread one rank per node listed up to this group size. */
#define MESH_NODES_LISTED 8
/* --json is refused above this many ranks (2^20): the document would hold 8 values per rank. */
#define MESH_JSON_MAX_WORLD ((uint64_t)1 << 20)
/* ------------------------------------------------------------------------- human form ---- */

static int digits_u64(uint64_t v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

typedef struct rank_columns {
    int rank, dp, pp, tp, node; /* widths, characters */
} rank_columns;

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

static void print_rank_row(const gs_mesh *m, const rank_columns *w, uint64_t rank)
{
    uint64_t c[GS_DIM_COUNT];
    gs_mesh_rank_coords(m, rank, c);
    printf("  %*" PRIu64 "  %*" PRIu64 "  %*" PRIu64 "  %*" PRIu64 "  %*" PRIu64 "\n", w->rank,
           rank, w->dp, c[GS_DIM_DP], w->pp, c[GS_DIM_PP], w->tp, c[GS_DIM_TP], w->node,
           gs_mesh_rank_node(m, rank));
}

static void print_dashes(int n)
{
    for (int i = 0; i < n; i++)
        putchar('-');
}

/* The rank table, streamed (no per-rank storage): all rows, or the first and last 64. */
static void print_rank_table(const gs_mesh *m, int all)
{
    rank_columns w;
    uint64_t last = m->world - 1;
    w.rank = max_int(4, digits_u64(last));
    w.dp = max_int(2, digits_u64(m->size[GS_DIM_DP] - 1));
    w.pp = max_int(2, digits_u64(m->size[GS_DIM_PP] - 1));
    w.tp = max_int(2, digits_u64(m->size[GS_DIM_TP] - 1));
    w.node = max_int(4, digits_u64(gs_mesh_rank_node(m, last)));
    printf("ranks:\n");
    printf("  %*s  %*s  %*s  %*s  %*s\n", w.rank, "rank", w.dp, "dp", w.pp, "pp", w.tp, "tp",
           w.node, "node");
    printf("  ");
    print_dashes(w.rank);
    printf("  ");
    print_dashes(w.dp);
    printf("  ");
    print_dashes(w.pp);
    printf("  ");
    print_dashes(w.tp);
    printf("  ");
    print_dashes(w.node);
    printf("\n");
    if (all || m->world <= MESH_TABLE_FULL_MAX) {
        for (uint64_t r = 0; r < m->world; r++)
            print_rank_row(m, &w, r);
        return;
    }
    for (uint64_t r = 0; r < MESH_TABLE_EDGE_ROWS; r++)
        print_rank_row(m, &w, r);
    printf("  ... %" PRIu64 " rows omitted (use --json or --all)\n",
           m->world - 2 * MESH_TABLE_EDGE_ROWS);
    for (uint64_t r = m->world - MESH_TABLE_EDGE_ROWS; r < m->world; r++)
        print_rank_row(m, &w, r);
}

/* One group: members ("0-7", "0, 16, 32, 48" or "0, 8, ..., 504 (every 8th rank)") and the
 * nodes they occupy. */
static void print_group(const gs_mesh *m, gs_dim d, uint64_t g)
{
    uint64_t first = gs_mesh_group_first(m, d, g);
    uint64_t s = m->stride[d];
    uint64_t n = m->size[d];
    uint64_t last = first + (n - 1) * s;
    uint64_t G = m->gpus_per_node;
    printf("    %s group %" PRIu64 ": ", gs_dim_name(d), g);
    if (n == 1) {
        printf("%" PRIu64, first);
    } else if (s == 1) {
        printf("%" PRIu64 "-%" PRIu64, first, last);
    } else if (n <= MESH_MEMBERS_LISTED) {
        for (uint64_t i = 0; i < n; i++)
            printf("%s%" PRIu64, i ? ", " : "", first + i * s);
    } else {
        printf("%" PRIu64 ", %" PRIu64 ", ..., %" PRIu64 " (step %" PRIu64 ")", first,
               first + s, last, s);
    }
    uint64_t first_node = gs_mesh_rank_node(m, first);
    uint64_t last_node = gs_mesh_rank_node(m, last);
    if (first_node == last_node) {
        printf("  (node %" PRIu64 ")\n", first_node);
    } else if (s < G) {
        printf("  (nodes %" PRIu64 "-%" PRIu64 ")\n", first_node, last_node);
    } else if (n <= MESH_NODES_LISTED) {
        printf("  (nodes ");
        for (uint64_t i = 0; i < n; i++)
            printf("%s%" PRIu64, i ? ", " : "", gs_mesh_rank_node(m, first + i * s));
        printf(")\n");
    } else {
        printf("  (%" PRIu64 " nodes, one rank on each)\n", n);
    }
}

static void print_groups(const gs_mesh *m)
{
    static const gs_dim dims[GS_DIM_COUNT] = {GS_DIM_TP, GS_DIM_PP, GS_DIM_DP};
    printf("groups:\n");
    for (int i = 0; i < GS_DIM_COUNT; i++) {
        gs_dim d = dims[i];
        uint64_t count = gs_mesh_group_count(m, d);
        uint64_t shown = count > MESH_GROUPS_FULL_MAX ? MESH_GROUPS_SHOWN : count;
        printf("  %s: %" PRIu64 " group%s of %" PRIu64 " rank%s\n", gs_dim_name(d), count,
               count == 1 ? "" : "s", m->size[d], m->size[d] == 1 ? "" : "s");
        for (uint64_t g = 0; g < shown; g++)
            print_group(m, d, g);
        if (shown < count)
            printf("    ... and %" PRIu64 " more %s groups%s\n", count - shown, gs_dim_name(d),
                   m->world <= MESH_JSON_MAX_WORLD ? " (use --json)" : "");
    }
}

/* The groups of the mesh's other kinds that the grid has: context parallelism's (and hierarchical
 * CP's two levels), expert parallelism's and its expert-data-parallel groups. */
typedef struct extra_kind {
    gs_group_kind kind;
    const char *name, *what;
} extra_kind;

static size_t extra_kinds(const gs_mesh *m, extra_kind *out)
{
    size_t n = 0;
    if (m->cp > 1)
        out[n++] = (extra_kind){GS_GROUP_CP, "cp", "a sequence's chunks (context parallelism)"};
    if (m->cp > 1 && m->cp_a2a > 1) {
        out[n++] = (extra_kind){GS_GROUP_CP_A2A, "cp_a2a", "hierarchical CP's all-to-all level"};
        out[n++] = (extra_kind){GS_GROUP_CP_P2P, "cp_p2p", "hierarchical CP's ring level"};
    }
    if (m->ep > 1) {
        out[n++] = (extra_kind){GS_GROUP_EP, "ep", "one MoE layer's experts (token dispatch)"};
        out[n++] = (extra_kind){GS_GROUP_EDP, "edp", "the same experts (their gradients reduced)"};
    }
    return n;
}

/* The groups of kind k in order of their lowest rank: calls fn for each of the first `limit`
 * (members in ascending order), each rank's group index looked up once (O(world) in all).
 * GS_ERR_NOMEM when out of memory. */
static gs_status each_group(const gs_mesh *m, gs_group_kind k, uint64_t limit,
                            void (*fn)(const gs_mesh *, const uint64_t *, uint64_t, void *), void *ctx)
{
    uint64_t size = 1, done = 0;
    gs_group_of(m, k, 0, &size);
    uint64_t groups = size ? m->world / size : 0;
    uint64_t *mem = malloc((size_t)(size ? size : 1) * sizeof *mem);
    unsigned char *seen = calloc((size_t)(groups ? groups : 1), 1);
    gs_status st = mem && seen ? GS_OK : GS_ERR_NOMEM;
    for (uint64_t r = 0; st == GS_OK && r < m->world && done < limit; r++) {
        uint64_t g = gs_group_of(m, k, r, NULL);
        if (g >= groups || seen[g])
            continue;
        seen[g] = 1; /* first met at its lowest rank */
        gs_group_members_of(m, k, r, mem);
        fn(m, mem, size, ctx), done++;
    }
    free(seen);
    free(mem);
    return st;
}

/* A listed group's label and number. */
typedef struct group_label {
    const char *name;
    uint64_t index;
} group_label;

static void print_members(const gs_mesh *m, const uint64_t *mem, uint64_t n, void *ctx)
{
    group_label *g = ctx;
    printf("    %s group %" PRIu64 ": ", g->name, g->index++);
    for (uint64_t i = 0; i < n && i < MESH_MEMBERS_LISTED; i++)
        printf("%s%" PRIu64, i ? ", " : "", mem[i]);
    if (n > MESH_MEMBERS_LISTED)
        printf(", ... (%" PRIu64 " ranks)", n);
    uint64_t lo = gs_mesh_rank_node(m, mem[0]), hi = gs_mesh_rank_node(m, mem[n - 1]);
    if (lo == hi)
        printf("  (node %" PRIu64 ")\n", lo);
    else
        printf("  (nodes %" PRIu64 "-%" PRIu64 ")\n", lo, hi);
}

static void print_extra_groups(const gs_mesh *m)
{
    extra_kind k[5];
    size_t n = extra_kinds(m, k);
    for (size_t i = 0; i < n; i++) {
        uint64_t size = 1;
        gs_group_of(m, k[i].kind, 0, &size);
        group_label label = {k[i].name, 0};
        uint64_t count = m->world / size;
        printf("  %s: %" PRIu64 " group%s of %" PRIu64 " rank%s, %s\n", k[i].name, count, count == 1 ? "" : "s", size,
               size == 1 ? "" : "s", k[i].what);
        if (each_group(m, k[i].kind, MESH_GROUPS_SHOWN, print_members, &label) != GS_OK) {
            printf("    (out of memory listing them)\n");
            continue;
        }
        if (count > MESH_GROUPS_SHOWN)
            printf("    ... and %" PRIu64 " more %s groups%s\n", count - MESH_GROUPS_SHOWN, k[i].name,
                   m->world <= MESH_JSON_MAX_WORLD ? " (use --json)" : "");
    }
}

/* "3" or "0-7". */
static void print_range(uint64_t lo, uint64_t hi)
{
    if (lo == hi)
        printf("%" PRIu64, lo);
    else
        printf("%" PRIu64 "-%" PRIu64, lo, hi);
}

/* The values coordinate d takes over the contiguous ranks [a, b]: a cyclic run of
 * consecutive values starting at (a / stride) % size, printed as "3", "0-7" or "6-7, 0-1". */
static void print_coord_span(const gs_mesh *m, gs_dim d, uint64_t a, uint64_t b)
{
    uint64_t s = m->stride[d];
    uint64_t n = m->size[d];
    uint64_t steps = b / s - a / s + 1;
    uint64_t count = steps < n ? steps : n;
    uint64_t v0 = count == n ? 0 : (a / s) % n;
    uint64_t end = v0 + count - 1;
    printf("  %s ", gs_dim_name(d));
    if (end < n) {
        print_range(v0, end);
    } else {
        print_range(v0, n - 1);
        printf(", ");
        print_range(0, end - n);
    }
}

/* Node -> ranks -> coordinates, the seed's section 4.2 view of the grid. */
static void print_nodes(const gs_mesh *m)
{
    uint64_t nodes = gs_mesh_nodes(m);
    uint64_t shown = nodes > MESH_GROUPS_FULL_MAX ? MESH_GROUPS_SHOWN : nodes;
    printf("nodes:\n");
    for (uint64_t node = 0; node < shown; node++) {
        uint64_t a = node * m->gpus_per_node;
        uint64_t b = m->world - a <= m->gpus_per_node ? m->world - 1 : a + m->gpus_per_node - 1;
        printf("  node %" PRIu64 ": ranks ", node);
        print_range(a, b);
        print_coord_span(m, GS_DIM_DP, a, b);
        print_coord_span(m, GS_DIM_PP, a, b);
        print_coord_span(m, GS_DIM_TP, a, b);
        printf("\n");
    }
    if (shown < nodes)
        printf("  ... and %" PRIu64 " more nodes\n", nodes - shown);
}

static void print_human(const gs_mesh *m, const gs_launch_grid *l, int all)
{
    char grid[160];
    gs_mesh_grid_text(m, grid, sizeof grid);
    printf("grid %s, order %s (%s fastest), world %" PRIu64 " ranks, %" PRIu64 " node%s x %" PRIu64
           " GPUs/node\n",
           grid, l->order, gs_dim_name(m->order[0]), m->world, gs_mesh_nodes(m), gs_mesh_nodes(m) == 1 ? "" : "s",
           m->gpus_per_node);
    if (m->cp > 1)
        printf("(the dp coordinates and groups below are the DP dimension, dp x cp = %" PRIu64
               " positions: the ranks that reduce gradients together)\n",
               m->size[GS_DIM_DP]);
    printf("\n");
    print_rank_table(m, all);
    printf("\n");
    print_nodes(m);
    printf("\n");
    print_groups(m);
    print_extra_groups(m);
    printf("\nlaunch:\n");
    printf("  Megatron-LM: %s (data parallel size %" PRIu64 " is implied by WORLD_SIZE=%" PRIu64
           ")\n",
           l->megatron, gs_mesh_dp_replicas(m), m->world);
    if (l->megatron_note[0])
        printf("  note: %s\n", l->megatron_note);
    printf("  torch DeviceMesh: %s\n", l->device_mesh);
    printf("  torchrun: %s\n", l->torchrun);
}

/* -------------------------------------------------------------------------- JSON form ---- */

/* The document is streamed, not built as a jansson tree: at 2^20 ranks a tree of 8 values per
 * rank costs over a gigabyte and many seconds, the stream a few hundred milliseconds and no
 * memory. Layout: 2-space indent like gs_cli_json_print, with each rank object and each group
 * array on one line. Strings go through jansson for escaping. */
static gs_status json_put_string(FILE *f, const char *key, const char *value, int last)
{
    json_t *str = json_string(value);
    char *text = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
    json_decref(str);
    if (!text)
        return GS_ERR_NOMEM;
    fprintf(f, "  \"%s\": %s%s\n", key, text, last ? "" : ",");
    free(text);
    return GS_OK;
}

/* Where JSON group lines go, and how many are left after the current one (for the comma). */
typedef struct json_groups {
    FILE *f;
    uint64_t left;
} json_groups;

static void json_members(const gs_mesh *m, const uint64_t *mem, uint64_t n, void *ctx)
{
    json_groups *j = ctx;
    (void)m;
    fprintf(j->f, "      [");
    for (uint64_t i = 0; i < n; i++)
        fprintf(j->f, "%s%" PRIu64, i ? ", " : "", mem[i]);
    fprintf(j->f, "]%s\n", --j->left ? "," : "");
}

/* The extra kinds' groups (extra_kinds) as more keys of "groups". */
static gs_status json_extra_groups(FILE *f, const gs_mesh *m)
{
    extra_kind k[5];
    size_t n = extra_kinds(m, k);
    gs_status st = GS_OK;
    for (size_t i = 0; i < n && st == GS_OK; i++) {
        uint64_t size = 1;
        gs_group_of(m, k[i].kind, 0, &size);
        json_groups j = {f, m->world / size};
        fprintf(f, ",\n    \"%s\": [\n", k[i].name);
        st = each_group(m, k[i].kind, UINT64_MAX, json_members, &j);
        fprintf(f, "    ]");
    }
    return st;
}

static gs_status mesh_json_print(const gs_mesh *m, const gs_launch_grid *l, gs_error *err)
{
    static const gs_dim group_dims[GS_DIM_COUNT] = {GS_DIM_DP, GS_DIM_PP, GS_DIM_TP};
    FILE *f = stdout;
    gs_status st = GS_OK;
    json_t *order = json_string(l->order);
    char *order_text = order ? json_dumps(order, JSON_ENCODE_ANY) : NULL;
    if (!order_text) {
        st = GS_ERR_NOMEM;
        goto out;
    }
    fprintf(f, "{\n  \"schema_version\": %d,\n", GS_JSON_SCHEMA_VERSION);
    fprintf(f, "  \"grid\": {\"dp\": %" PRIu64 ", \"pp\": %" PRIu64 ", \"tp\": %" PRIu64, m->size[GS_DIM_DP],
            m->size[GS_DIM_PP], m->size[GS_DIM_TP]);
    if (m->cp > 1)
        fprintf(f, ", \"cp\": %" PRIu64, m->cp);
    if (m->cp > 1 && m->cp_a2a > 1)
        fprintf(f, ", \"cp_a2a\": %" PRIu64, m->cp_a2a);
    if (m->ep > 1)
        fprintf(f, ", \"ep\": %" PRIu64, m->ep);
    fprintf(f, ", \"order\": %s},\n", order_text);
    fprintf(f, "  \"world\": %" PRIu64 ",\n", m->world);
    fprintf(f, "  \"nodes\": %" PRIu64 ",\n", gs_mesh_nodes(m));
    fprintf(f, "  \"gpus_per_node\": %" PRIu64 ",\n", m->gpus_per_node);

    fprintf(f, "  \"ranks\": [\n");
    for (uint64_t r = 0; r < m->world; r++) {
        uint64_t c[GS_DIM_COUNT];
        gs_mesh_rank_coords(m, r, c);
        fprintf(f,
                "    {\"rank\": %" PRIu64 ", \"dp\": %" PRIu64 ", \"pp\": %" PRIu64
                ", \"tp\": %" PRIu64 ", \"node\": %" PRIu64 "}%s\n",
                r, c[GS_DIM_DP], c[GS_DIM_PP], c[GS_DIM_TP], gs_mesh_rank_node(m, r),
                r + 1 < m->world ? "," : "");
    }
    fprintf(f, "  ],\n");

    fprintf(f, "  \"groups\": {\n");
    for (int i = 0; i < GS_DIM_COUNT; i++) {
        gs_dim d = group_dims[i];
        uint64_t count = gs_mesh_group_count(m, d);
        fprintf(f, "    \"%s\": [\n", gs_dim_name(d));
        for (uint64_t g = 0; g < count; g++) {
            uint64_t first = gs_mesh_group_first(m, d, g);
            fprintf(f, "      [");
            for (uint64_t k = 0; k < m->size[d]; k++)
                fprintf(f, "%s%" PRIu64, k ? ", " : "", first + k * m->stride[d]);
            fprintf(f, "]%s\n", g + 1 < count ? "," : "");
        }
        fprintf(f, "    ]%s", i + 1 < GS_DIM_COUNT ? ",\n" : "");
    }
    if ((st = json_extra_groups(f, m)) != GS_OK)
        goto out;
    fprintf(f, "\n  },\n");

    if ((st = json_put_string(f, "megatron", l->megatron, 0)) != GS_OK ||
        (l->megatron_note[0] &&
         (st = json_put_string(f, "megatron_note", l->megatron_note, 0)) != GS_OK) ||
        (st = json_put_string(f, "device_mesh", l->device_mesh, 0)) != GS_OK ||
        (st = json_put_string(f, "torchrun", l->torchrun, 1)) != GS_OK)
        goto out;
    fprintf(f, "}\n");
    if (ferror(f))
        st = GS_ERR_IO;
out:
    free(order_text);
    json_decref(order);
    if (st == GS_ERR_NOMEM)
        return gs_error_set(err, st, "out of memory writing the JSON document");
    if (st == GS_ERR_IO)
        return gs_error_set(err, st, "cannot write the JSON document to standard output");
    return st;
}

/* ---------------------------------------------------------------------------- command ---- */

gs_status gs_cmd_mesh(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"all", no_argument, NULL, 'a'},
        {"emit", required_argument, NULL, 'e'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, all = 0, emit = 0, c;
    gs_launch_kind kind = GS_LAUNCH_TORCHRUN;
    gs_text text;
    gs_scenario s;
    gs_mesh mesh;
    gs_launch_grid launch;
    const char *path = NULL;
    gs_status st;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'a': all = 1; break;
        case 'e':
            if (gs_launch_kind_parse(optarg, &kind) != 0)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "--emit: found '%s', expected torchrun, accelerate, megatron, "
                                    "slurm or torchtitan\nusage: %s",
                                    optarg, usage);
            emit = 1;
            break;
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s",
                                argv[optind - 1], usage);
        }
    }
    st = gs_cli_one_positional(argc, argv, optind, usage, &path, err);
    if (st != GS_OK)
        return st;
    if (emit && json)
        return gs_error_set(err, GS_ERR_INPUT, "--emit and --json exclude each other\nusage: %s",
                            usage);
    gs_text_init(&text);
    st = gs_cli_load(path, &s, &mesh, err);
    if (st != GS_OK)
        goto out;
    if (emit) {
        if ((st = gs_launch_emit(&s, &mesh, kind, &text, err)) == GS_OK)
            fputs(gs_text_str(&text), stdout);
        goto out;
    }
    gs_launch_grid_build(&mesh, &launch);
    if (!json) {
        print_human(&mesh, &launch, all);
        goto out;
    }
    if (mesh.world > MESH_JSON_MAX_WORLD) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s: --json is limited to %" PRIu64 " ranks and this grid has %" PRIu64
                          " (dp=%" PRIu64 " x pp=%" PRIu64 " x tp=%" PRIu64
                          "); run without --json for the abbreviated table (--all prints every "
                          "row)",
                          path, MESH_JSON_MAX_WORLD, mesh.world, mesh.size[GS_DIM_DP],
                          mesh.size[GS_DIM_PP], mesh.size[GS_DIM_TP]);
        goto out;
    }
    st = mesh_json_print(&mesh, &launch, err);
out:
    gs_text_fini(&text);
    return st;
}
