/* `gridstep coll`: the simulator's nccl-tests. For one collective over N ranks of a cluster
 * preset, a sweep of sizes with nccl-tests' columns (size, count, type, redop, root, time,
 * algbw, busbw) plus the algorithm and protocol the tuner chose, so users can hold the model
 * against their own nccl-tests runs line by line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/hardware.h"
#include "engine/units.h"
#include "sim/collective.h"
#include "sim/flow.h"
#include "sim/topology.h"

const char gs_cmd_coll_help[] =
    "Predicts nccl-tests' output for one collective with gridstep's collective model (NCCL's\n"
    "own tuner model: per-channel bandwidths from the topology, per-hop latencies, protocol\n"
    "efficiencies; the lowest predicted time over algorithms and protocols is chosen, as NCCL\n"
    "does). Ranks fill nodes gpus_per_node at a time unless --nodes spreads them.\n"
    "\n"
    "Columns, as nccl-tests prints them (-d float: 4-byte elements):\n"
    "  size    bytes: the full buffer for all_reduce, broadcast and sendrecv; the gathered\n"
    "          output for all_gather, the input for reduce_scatter and alltoall\n"
    "  count   elements per rank passed to NCCL (size / 4, or size / (4 x ranks) for\n"
    "          all_gather, reduce_scatter and alltoall; sizes are rounded down to whole counts)\n"
    "  time    predicted microseconds per call\n"
    "  algbw   size / time, GB/s (10^9 B/s)\n"
    "  busbw   algbw x nccl-tests' factor: 2(n-1)/n all_reduce; (n-1)/n all_gather,\n"
    "          reduce_scatter, alltoall; 1 broadcast, sendrecv\n"
    "  algo    ring, tree (all_reduce only), nvls (NVLink SHARP: one node, or NVLSTree across\n"
    "          nodes for all_reduce), pat (all_gather and reduce_scatter with one rank per\n"
    "          node, NCCL 2.23+), p2p (alltoall and sendrecv run as grouped send/recv)\n"
    "  proto   LL, LL128 or Simple\n"
    "The footer is nccl-tests' '# Avg bus bandwidth', the mean busbw over the sizes.\n"
    "\n"
    "options:\n"
    "  --op OP             all_reduce | all_gather | reduce_scatter | broadcast | alltoall |\n"
    "                      sendrecv (required)\n"
    "  --ranks N           ranks in the communicator (required)\n"
    "  --cluster C         cluster preset (required; `gridstep presets clusters` lists them)\n"
    "  --nodes K           spread the ranks over K nodes (default ceil(N / gpus_per_node))\n"
    "  -b, --minbytes MIN  smallest size (default 8); K, M, G, T suffixes are binary as in\n"
    "                      nccl-tests (128M = 134217728)\n"
    "  -e, --maxbytes MAX  largest size (default 128M)\n"
    "  -f, --stepfactor F  multiply the size by F (an integer >= 2, default 2)\n"
    "  --algo A            force ring | tree | nvls | pat (NCCL_ALGO); an algorithm that does\n"
    "                      not apply to the op or the machine is an error\n"
    "  --exact             simulate every rank: the call's per-rank transfers (ring: each rank\n"
    "                      to its neighbour on every channel; tree: the node chains and the\n"
    "                      double binary tree; pat: the ring's NIC traffic) as flows\n"
    "                      sharing the NICs and GPU links max-min fairly (flow mode), with the\n"
    "                      algorithm and protocol the tuner picked or --algo; time is the solved\n"
    "                      time. Agrees with the model where no link carries more than it planned\n"
    "  --json              one JSON document: op, cluster, ranks, nodes, ranks_per_node, type,\n"
    "                      type_bytes, algo_forced, exact, rows [{size, count, time_us,\n"
    "                      algbw_gbps, busbw_gbps, algo, proto}], avg_busbw_gbps\n"
    "\n"
    "examples:\n"
    "  gridstep coll --op all_reduce --ranks 8 --cluster dgx-h100\n"
    "  gridstep coll --op all_reduce --ranks 16 --cluster dgx-h100 --algo ring -b 1G -e 4G\n"
    "  gridstep coll --op all_gather --ranks 64 --cluster pcie-a100-25gbe -b 14G -e 14G\n"
    "  gridstep coll --op all_reduce --ranks 1024 --cluster dgx-a100-80g --exact -b 64M -e 64M\n";

static const char usage[] =
    "gridstep coll --op OP --ranks N --cluster C [--nodes K] [-b MIN] [-e MAX] [-f FACTOR] "
    "[--algo ring|tree|nvls|pat] [--exact] [--json]";

/* nccl-tests' default datatype (-d float). */
#define COLL_TYPE_NAME "float"
#define COLL_TYPE_BYTES 4
#define COLL_DEFAULT_MIN 8ULL
#define COLL_DEFAULT_MAX (128ULL << 20)
#define COLL_DEFAULT_FACTOR 2ULL
/* Ranks accepted: enough for any cluster gridstep simulates. */
#define COLL_MAX_RANKS (1ULL << 30)

/* The ops: the engine's collectives plus nccl-tests' sendrecv, which is point-to-point. */
typedef enum coll_kind { COLL_KIND_COLLECTIVE, COLL_KIND_SENDRECV } coll_kind;

typedef struct coll_op_entry {
    const char *name;
    coll_kind kind;
    gs_coll_op op; /* for COLL_KIND_COLLECTIVE */
    const char *redop;
    int per_rank_count; /* count = size / (type x ranks) */
} coll_op_entry;

static const coll_op_entry coll_ops[] = {
    {"all_reduce", COLL_KIND_COLLECTIVE, GS_COLL_ALLREDUCE, "sum", 0},
    {"all_gather", COLL_KIND_COLLECTIVE, GS_COLL_ALLGATHER, "none", 1},
    {"reduce_scatter", COLL_KIND_COLLECTIVE, GS_COLL_REDUCE_SCATTER, "sum", 1},
    {"broadcast", COLL_KIND_COLLECTIVE, GS_COLL_BROADCAST, "none", 0},
    {"alltoall", COLL_KIND_COLLECTIVE, GS_COLL_ALLTOALL, "none", 1},
    {"sendrecv", COLL_KIND_SENDRECV, GS_COLL_ALLREDUCE, "none", 0},
};
#define COLL_NOPS (sizeof coll_ops / sizeof coll_ops[0])

static const coll_op_entry *find_op(const char *name)
{
    for (size_t i = 0; i < COLL_NOPS; i++)
        if (strcasecmp(coll_ops[i].name, name) == 0)
            return &coll_ops[i];
    return NULL;
}

static int find_algo(const char *name, gs_algo *out)
{
    for (int a = 0; a < GS_ALGO_COUNT; a++)
        if (strcasecmp(gs_algo_name((gs_algo)a), name) == 0) {
            *out = (gs_algo)a;
            return 0;
        }
    return -1;
}

/* nccl-tests' size syntax: an integer with an optional K, M, G or T suffix (binary). Returns 0,
 * or -1 when malformed or over 2^64. */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return -1;
    }
    if (*end != '\0')
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static gs_status parse_count_opt(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out,
                                 gs_error *err)
{
    uint64_t v;
    if (gs_parse_count(arg, &v) != 0 || v < lo || v > hi)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%s '%s': expected an integer from %" PRIu64 " to %" PRIu64 "\nusage: %s", opt,
                            arg, lo, hi, usage);
    *out = v;
    return GS_OK;
}

/* One row of the sweep. */
typedef struct coll_row {
    uint64_t size, count;
    double time_s, algbw, busbw; /* seconds, bytes/s, bytes/s */
    const char *algo, *proto;
} coll_row;

typedef struct coll_run {
    const coll_op_entry *op;
    gs_topo topo;
    gs_coll_shape shape;
    gs_algo force;
    int exact; /* every rank as flows (flow_coll.c) instead of the cost model alone */
} coll_run;

/* Why a forced algorithm cannot run this op here. */
static gs_status explain_unsupported(const coll_run *r, gs_error *err)
{
    const char *a = gs_algo_name(r->force);
    const char *why;
    switch (r->force) {
    case GS_ALGO_TREE: why = "tree runs all_reduce only, as in NCCL"; break;
    case GS_ALGO_NVLS:
        why = r->topo.nvls ? "nvls needs 2+ ranks per node and runs all_reduce, all_gather and "
                             "reduce_scatter on one node, all_reduce only across nodes"
                           : "the cluster's fabric has no NVLink SHARP (NVSwitch, sm90+)";
        break;
    case GS_ALGO_PAT:
        why = "pat runs all_gather and reduce_scatter (Simple protocol) over one rank per node on "
              "2+ nodes, as in NCCL";
        break;
    default: why = "the algorithm does not implement this op"; break;
    }
    return gs_error_set(err, GS_ERR_INPUT, "--algo %s cannot run %s over %" PRIu64 " ranks (%" PRIu64
                        " node(s) x %" PRIu64 "): %s",
                        a, r->op->name, r->shape.nranks, r->shape.nnodes, r->shape.ppn, why);
}

static gs_status coll_eval(const coll_run *r, uint64_t want, coll_row *row, gs_error *err)
{
    uint64_t n = r->shape.nranks;
    uint64_t per = COLL_TYPE_BYTES * (r->op->per_rank_count ? n : 1);
    row->count = want / per;
    row->size = row->count * per;
    row->time_s = row->algbw = row->busbw = 0.0;
    row->algo = row->proto = "-"; /* nothing moves (one rank or size 0) */
    if (r->op->kind == COLL_KIND_SENDRECV) {
        /* Every rank sends to rank + 1 at once; the slowest pair crosses a node boundary when
         * the ranks span nodes, each boundary on its own NIC. One rank sends to itself. */
        if (n > 1 && row->size > 0) {
            row->algo = gs_algo_name(GS_ALGO_COUNT);
            row->proto = gs_proto_name(GS_PROTO_SIMPLE);
            row->time_s = gs_p2p_time(&r->topo, r->shape.nnodes == 1, row->size);
            if (r->exact) {
                gs_flow_exact x;
                gs_status st = gs_flow_sendrecv_exact(&r->topo, &r->shape, row->size, &x);
                if (st != GS_OK)
                    return gs_error_set(err, st, "cannot simulate sendrecv of %" PRIu64 " B over %" PRIu64
                                        " ranks", row->size, n);
                row->time_s = x.time_s;
            }
            row->algbw = row->busbw = (double)row->size / row->time_s;
        }
        return GS_OK;
    }
    if (r->exact) {
        gs_flow_exact x;
        gs_status st = gs_flow_coll_exact(&r->topo, r->op->op, &r->shape, row->size, r->force, &x);
        if (st == GS_ERR_UNSUPPORTED)
            return explain_unsupported(r, err);
        if (st != GS_OK)
            return gs_error_set(err, st, "cannot simulate %s of %" PRIu64 " B over %" PRIu64 " ranks", r->op->name,
                                row->size, n);
        row->time_s = x.time_s;
        if (x.time_s > 0.0) {
            row->algbw = (double)row->size / x.time_s;
            row->busbw = row->algbw * gs_busbw_factor(r->op->op, n);
            row->algo = gs_algo_name(x.algo);
            row->proto = gs_proto_name(x.proto);
        }
        return GS_OK;
    }
    gs_coll_cost c;
    gs_status st = gs_coll_estimate(&r->topo, r->op->op, &r->shape, row->size, r->force, &c);
    if (st == GS_ERR_UNSUPPORTED)
        return explain_unsupported(r, err);
    if (st != GS_OK)
        return gs_error_set(err, st, "cannot estimate %s of %" PRIu64 " B over %" PRIu64 " ranks", r->op->name,
                            row->size, n);
    row->time_s = c.time_s;
    row->algbw = c.algbw;
    row->busbw = c.busbw;
    if (c.time_s > 0.0) {
        row->algo = gs_algo_name(c.algo);
        row->proto = gs_proto_name(c.proto);
    }
    return GS_OK;
}

static gs_status print_human(const coll_run *r, const coll_row *rows, size_t nrows, double avg_busbw)
{
    gs_cli_table t;
    gs_status st;
    const gs_cluster *c = &r->topo.cluster;
    int bcast = r->op->kind == COLL_KIND_COLLECTIVE && r->op->op == GS_COLL_BROADCAST;

    printf("# gridstep coll: %s over %" PRIu64 " rank%s = %" PRIu64 " node%s x up to %" PRIu64
           " ranks/node, cluster %s\n",
           r->op->name, r->shape.nranks, r->shape.nranks == 1 ? "" : "s", r->shape.nnodes,
           r->shape.nnodes == 1 ? "" : "s", r->shape.ppn, c->name);
    printf("#   %s per GPU: %s, %.1f GB/s as NCCL plans it; %" PRIu64 " x %s NIC per node, %.2f GB/s "
           "achievable each%s\n",
           gs_link_kind_name(c->intra.kind), c->intra.name, r->topo.intra_bw / 1e9, c->nics_per_node, c->nic.name,
           r->topo.nic_bw / 1e9, c->rail_optimized ? ", rail-optimized" : "");
    printf("#   algorithm: %s; model: %s, "
           "datatype %s (%d B)\n#\n",
           r->force == GS_ALGO_COUNT ? "tuner's choice (lowest predicted time)" : gs_algo_name(r->force),
           r->exact ? "every rank's transfers as flows on the links (--exact), max-min fair"
                    : "NCCL's tuner (time = latency + size / algbw)",
           COLL_TYPE_NAME, COLL_TYPE_BYTES);
    gs_cli_table_init(&t, 10);
    st = gs_cli_table_rowf(&t, "size(B)\tcount(elements)\ttype\tredop\troot\ttime(us)\talgbw(GB/s)\t"
                               "busbw(GB/s)\talgo\tproto");
    for (size_t i = 0; st == GS_OK && i < nrows; i++)
        st = gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s", rows[i].size,
                               rows[i].count, COLL_TYPE_NAME, r->op->redop, bcast ? 0 : -1, rows[i].time_s * 1e6,
                               rows[i].algbw / 1e9, rows[i].busbw / 1e9, rows[i].algo, rows[i].proto);
    if (st == GS_OK) {
        gs_cli_table_print(&t, stdout, 2);
        printf("# Avg bus bandwidth    : %.4f GB/s\n", avg_busbw / 1e9);
    }
    gs_cli_table_fini(&t);
    return st;
}

static gs_status print_json(const coll_run *r, const coll_row *rows, size_t nrows, double avg_busbw, gs_error *err)
{
    gs_status st = GS_ERR_NOMEM;
    json_t *doc = json_object(), *arr = json_array();
    if (!doc || !arr)
        goto out;
    if (json_object_set_new(doc, "op", json_string(r->op->name)) ||
        json_object_set_new(doc, "cluster", json_string(r->topo.cluster.name)) ||
        json_object_set_new(doc, "ranks", json_integer((json_int_t)r->shape.nranks)) ||
        json_object_set_new(doc, "nodes", json_integer((json_int_t)r->shape.nnodes)) ||
        json_object_set_new(doc, "ranks_per_node", json_integer((json_int_t)r->shape.ppn)) ||
        json_object_set_new(doc, "type", json_string(COLL_TYPE_NAME)) ||
        json_object_set_new(doc, "type_bytes", json_integer(COLL_TYPE_BYTES)) ||
        json_object_set_new(doc, "algo_forced",
                            r->force == GS_ALGO_COUNT ? json_null() : json_string(gs_algo_name(r->force))) ||
        json_object_set_new(doc, "exact", json_boolean(r->exact)))
        goto out;
    for (size_t i = 0; i < nrows; i++) {
        json_t *o = json_object();
        if (!o || json_array_append_new(arr, o) ||
            json_object_set_new(o, "size", json_integer((json_int_t)rows[i].size)) ||
            json_object_set_new(o, "count", json_integer((json_int_t)rows[i].count)) ||
            json_object_set_new(o, "time_us", json_real(rows[i].time_s * 1e6)) ||
            json_object_set_new(o, "algbw_gbps", json_real(rows[i].algbw / 1e9)) ||
            json_object_set_new(o, "busbw_gbps", json_real(rows[i].busbw / 1e9)) ||
            json_object_set_new(o, "algo", json_string(rows[i].algo)) ||
            json_object_set_new(o, "proto", json_string(rows[i].proto)))
            goto out;
    }
    if (json_object_set(doc, "rows", arr) ||
        json_object_set_new(doc, "avg_busbw_gbps", json_real(avg_busbw / 1e9)))
        goto out;
    st = gs_cli_json_print(doc, err);
    goto done;
out:
    gs_error_set(err, st, "out of memory building the JSON document");
done:
    json_decref(arr);
    json_decref(doc);
    return st;
}

gs_status gs_cmd_coll(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},       {"ranks", required_argument, NULL, 'r'},
        {"cluster", required_argument, NULL, 'c'},  {"nodes", required_argument, NULL, 'n'},
        {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"algo", required_argument, NULL, 'a'},
        {"json", no_argument, NULL, 'j'},           {"exact", no_argument, NULL, 'x'},
        {NULL, 0, NULL, 0},
    };
    const char *op_name = NULL, *cluster_name = NULL;
    uint64_t ranks = 0, nodes = 0, minb = COLL_DEFAULT_MIN, maxb = COLL_DEFAULT_MAX, factor = COLL_DEFAULT_FACTOR;
    int json = 0, c;
    coll_run r;
    coll_row *rows = NULL;
    size_t nrows = 0, cap = 0;
    double sum_busbw = 0.0;
    gs_status st = GS_OK;
    const gs_cluster *preset;
    gs_cluster cluster;

    r.force = GS_ALGO_COUNT;
    r.exact = 0;
    while ((c = getopt_long(argc, argv, "b:e:f:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': op_name = optarg; break;
        case 'c': cluster_name = optarg; break;
        case 'j': json = 1; break;
        case 'x': r.exact = 1; break;
        case 'r':
            if ((st = parse_count_opt("--ranks", optarg, 1, COLL_MAX_RANKS, &ranks, err)) != GS_OK)
                return st;
            break;
        case 'n':
            if ((st = parse_count_opt("--nodes", optarg, 1, COLL_MAX_RANKS, &nodes, err)) != GS_OK)
                return st;
            break;
        case 'b':
        case 'e':
            if (parse_size(optarg, c == 'b' ? &minb : &maxb) != 0)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "-%c '%s': expected bytes, an integer with an optional K, M, G or T "
                                    "(binary) suffix\nusage: %s",
                                    c, optarg, usage);
            break;
        case 'f':
            if ((st = parse_count_opt("-f", optarg, 2, 1ULL << 32, &factor, err)) != GS_OK)
                return st;
            break;
        case 'a':
            if (find_algo(optarg, &r.force) != 0)
                return gs_error_set(err, GS_ERR_INPUT, "--algo '%s': expected ring, tree, nvls or pat", optarg);
            break;
        default:
            return gs_cli_bad_option(argv[optind - 1], opts, "b:e:f:", usage, err);
        }
    }
    if (optind < argc)
        return gs_error_set(err, GS_ERR_INPUT, "unexpected argument '%s'\nusage: %s", argv[optind], usage);
    if (!op_name || !ranks || !cluster_name)
        return gs_error_set(err, GS_ERR_INPUT, "--op, --ranks and --cluster are required\nusage: %s", usage);
    r.op = find_op(op_name);
    if (!r.op)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--op '%s': expected all_reduce, all_gather, reduce_scatter, broadcast, alltoall or "
                            "sendrecv",
                            op_name);
    if (r.force != GS_ALGO_COUNT && (r.op->kind == COLL_KIND_SENDRECV || r.op->op == GS_COLL_ALLTOALL))
        return gs_error_set(err, GS_ERR_INPUT,
                            "--algo does not apply to %s: it runs as grouped point-to-point send/recv",
                            r.op->name);
    preset = gs_cluster_preset_find(cluster_name);
    if (!preset)
        return gs_error_set(err, GS_ERR_INPUT, "unknown cluster '%s'; did you mean '%s'? (gridstep presets clusters)",
                            cluster_name, gs_cluster_preset_nearest(cluster_name));
    if (minb > maxb)
        return gs_error_set(err, GS_ERR_INPUT, "-b %" PRIu64 " is larger than -e %" PRIu64, minb, maxb);

    cluster = *preset;
    if (!nodes)
        nodes = (ranks + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
    if (nodes > ranks)
        return gs_error_set(err, GS_ERR_INPUT, "--nodes %" PRIu64 " leaves nodes without ranks (%" PRIu64 " ranks)",
                            nodes, ranks);
    r.shape.nranks = ranks;
    r.shape.nnodes = nodes;
    r.shape.ppn = (ranks + nodes - 1) / nodes;
    if (r.shape.ppn > cluster.gpus_per_node)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%" PRIu64 " ranks on %" PRIu64 " nodes puts %" PRIu64 " on a node; %s has %" PRIu64
                            " GPUs per node",
                            ranks, nodes, r.shape.ppn, cluster.name, cluster.gpus_per_node);
    cluster.nodes = nodes;
    gs_topo_init(&r.topo, &cluster);

    for (uint64_t size = minb;;) {
        if (nrows == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            coll_row *nr = realloc(rows, ncap * sizeof *nr);
            if (!nr) {
                st = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
                goto out;
            }
            rows = nr;
            cap = ncap;
        }
        st = coll_eval(&r, size, &rows[nrows], err);
        if (st != GS_OK)
            goto out;
        sum_busbw += rows[nrows].busbw;
        nrows++;
        if (size >= maxb || size > maxb / factor)
            break;
        size = size ? size * factor : 1; /* -b 0: then 1, F, F^2, ... */
    }
    if (json)
        st = print_json(&r, rows, nrows, sum_busbw / (double)nrows, err);
    else
        st = print_human(&r, rows, nrows, sum_busbw / (double)nrows);
    if (st == GS_ERR_NOMEM)
        gs_error_set(err, st, "out of memory");
out:
    free(rows);
    return st;
}
