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
    "The output is nccl-tests' (src/util.cu and src/common.cu of NVIDIA/nccl-tests): '#' lines\n"
    "(the test's parameters, then the column header and its units row), one row per size with\n"
    "the out-of-place and the in-place column sets, then the footer ('# Out of bounds values',\n"
    "'# Avg bus bandwidth', '# Collective test concluded'), so that a script written for\n"
    "nccl-tests reads it unchanged. Columns:\n"
    "  size    bytes: the full buffer for all_reduce, broadcast and sendrecv; the gathered\n"
    "          output for all_gather, the input for reduce_scatter and alltoall\n"
    "  count   elements per rank passed to NCCL (size / type bytes, or size / (type bytes x\n"
    "          ranks) for all_gather, reduce_scatter and alltoall; sizes round down to counts)\n"
    "  type, redop, root   -d, -o (none for ops that do not reduce), 0 for broadcast, else -1\n"
    "  time    predicted microseconds per call\n"
    "  algbw   size / time, GB/s (10^9 B/s)\n"
    "  busbw   algbw x nccl-tests' factor: 2(n-1)/n all_reduce; (n-1)/n all_gather,\n"
    "          reduce_scatter, alltoall; 1 broadcast, sendrecv\n"
    "  #wrong  N/A: a prediction checks no data (nccl-tests prints the same with -c 0)\n"
    "The in-place set repeats the out-of-place one: the model does not tell them apart. The\n"
    "algorithm and protocol chosen for each size follow the rows as '#' lines:\n"
    "  algo    ring, tree (all_reduce only), nvls (NVLink SHARP: one node, or NVLSTree across\n"
    "          nodes for all_reduce), pat (all_gather and reduce_scatter with one rank per\n"
    "          node, NCCL 2.23+), p2p (alltoall and sendrecv run as grouped send/recv)\n"
    "  proto   LL, LL128 or Simple\n"
    "'# Avg bus bandwidth' is the mean busbw over the rows (nccl-tests averages both sets).\n"
    "\n"
    "options:\n"
    "  --op OP             all_reduce | all_gather | reduce_scatter | broadcast | alltoall |\n"
    "                      sendrecv (required; nccl-tests' binary names all_reduce_perf, ...\n"
    "                      too); --op sum|prod|max|min|avg|mulsum is nccl-tests' -o\n"
    "  --ranks N           ranks in the communicator (default: -g, one process)\n"
    "  --cluster C         cluster preset (required; `gridstep presets clusters` lists them)\n"
    "  --nodes K           spread the ranks over K nodes (default ceil(N / gpus_per_node))\n"
    "  -b, --minbytes MIN  smallest size (default 8); K, M, G, T suffixes are binary as in\n"
    "                      nccl-tests (128M = 134217728)\n"
    "  -e, --maxbytes MAX  largest size (default 128M)\n"
    "  -f, --stepfactor F  multiply the size by F (an integer >= 2, default 2)\n"
    "  -d, --datatype T    int8 | uint8 | int32 | uint32 | int64 | uint64 | half | float |\n"
    "                      double | bfloat16 | f8e4m3 | f8e5m2 (default float)\n"
    "  -o, --redop OP      sum | prod | max | min | avg | mulsum (default sum; printed only)\n"
    "  -g, --ngpus G       GPUs per process, as nccl-tests: N ranks are N / G processes of G\n"
    "                      (default 1, or N without --ranks)\n"
    "  -n, --iters N       -w, --warmup_iters W    -c, --check 0|1\n"
    "                      accepted and printed in the parameter line; a prediction has no\n"
    "                      iterations to run or data to check\n"
    "  --algo A            force ring | tree | nvls | pat (NCCL_ALGO); an algorithm that does\n"
    "                      not apply to the op or the machine is an error\n"
    "  --exact             simulate every rank: the call's per-rank transfers (ring: each rank\n"
    "                      to its neighbour on every channel; tree: the node chains and the\n"
    "                      double binary tree; pat: the ring's NIC traffic) as flows\n"
    "                      sharing the NICs and GPU links max-min fairly (flow mode), with the\n"
    "                      algorithm and protocol the tuner picked or --algo; time is the solved\n"
    "                      time. Agrees with the model where no link carries more than it planned\n"
    "  --json              one JSON document: op, cluster, ranks, nodes, ranks_per_node, type,\n"
    "                      type_bytes, redop, algo_forced, exact, rows [{size, count, time_us,\n"
    "                      algbw_gbps, busbw_gbps, algo, proto}], avg_busbw_gbps\n"
    "\n"
    "examples:\n"
    "  gridstep coll --op all_reduce --ranks 8 --cluster dgx-h100\n"
    "  gridstep coll --op all_reduce_perf -g 8 --cluster dgx-h100 -b 8 -e 8G -f 2 -d bfloat16\n"
    "  gridstep coll --op all_reduce --ranks 16 --cluster dgx-h100 --algo ring -b 1G -e 4G\n"
    "  gridstep coll --op all_gather --ranks 64 --cluster pcie-a100-25gbe -b 14G -e 14G\n"
    "  gridstep coll --op all_reduce --ranks 1024 --cluster dgx-a100-80g --exact -b 64M -e 64M\n";

static const char usage[] =
    "gridstep coll --op OP (--ranks N | -g G) --cluster C [--nodes K] [-b MIN] [-e MAX] [-f FACTOR] "
    "[-d TYPE] [-o REDOP] [-n ITERS] [-w WARMUP] [-c 0|1] [--algo ring|tree|nvls|pat] [--exact] [--json]";

/* nccl-tests' defaults (src/common.cu): -d float, -o sum, -n 20, -w 1, -c 1. */
#define COLL_DEFAULT_ITERS 20ULL
#define COLL_DEFAULT_WARMUP 1ULL
#define COLL_DEFAULT_MIN 8ULL
#define COLL_DEFAULT_MAX (128ULL << 20)
#define COLL_DEFAULT_FACTOR 2ULL
/* Ranks accepted: enough for any cluster gridstep simulates. */
#define COLL_MAX_RANKS (1ULL << 30)

/* nccl-tests' datatypes (test_typenames in src/common.cu) and their bytes. */
typedef struct coll_type {
    const char *name;
    unsigned bytes;
} coll_type;

static const coll_type coll_types[] = {
    {"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
    {"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1},
};
#define COLL_NTYPES (sizeof coll_types / sizeof coll_types[0])
#define COLL_DEFAULT_TYPE 7 /* float */

/* nccl-tests' reduction operations (test_opnames). */
static const char *const coll_redops[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
#define COLL_NREDOPS (sizeof coll_redops / sizeof coll_redops[0])

/* The ops: the engine's collectives plus nccl-tests' sendrecv, which is point-to-point. */
typedef enum coll_kind { COLL_KIND_COLLECTIVE, COLL_KIND_SENDRECV } coll_kind;

typedef struct coll_op_entry {
    const char *name;
    coll_kind kind;
    gs_coll_op op; /* for COLL_KIND_COLLECTIVE */
    int reduces;   /* prints the reduction op (else "none") */
    int per_rank_count; /* count = size / (type x ranks) */
} coll_op_entry;

static const coll_op_entry coll_ops[] = {
    {"all_reduce", COLL_KIND_COLLECTIVE, GS_COLL_ALLREDUCE, 1, 0},
    {"all_gather", COLL_KIND_COLLECTIVE, GS_COLL_ALLGATHER, 0, 1},
    {"reduce_scatter", COLL_KIND_COLLECTIVE, GS_COLL_REDUCE_SCATTER, 1, 1},
    {"broadcast", COLL_KIND_COLLECTIVE, GS_COLL_BROADCAST, 0, 0},
    {"alltoall", COLL_KIND_COLLECTIVE, GS_COLL_ALLTOALL, 0, 1},
    {"sendrecv", COLL_KIND_SENDRECV, GS_COLL_ALLREDUCE, 0, 0},
};
#define COLL_NOPS (sizeof coll_ops / sizeof coll_ops[0])

/* An op by name, or by nccl-tests' binary name (all_reduce_perf). */
static const coll_op_entry *find_op(const char *name)
{
    size_t n = strlen(name);
    if (n > 5 && strcasecmp(name + n - 5, "_perf") == 0)
        n -= 5;
    for (size_t i = 0; i < COLL_NOPS; i++)
        if (strlen(coll_ops[i].name) == n && strncasecmp(coll_ops[i].name, name, n) == 0)
            return &coll_ops[i];
    return NULL;
}

static const coll_type *find_type(const char *name)
{
    for (size_t i = 0; i < COLL_NTYPES; i++)
        if (strcasecmp(coll_types[i].name, name) == 0)
            return &coll_types[i];
    return NULL;
}

static const char *find_redop(const char *name)
{
    for (size_t i = 0; i < COLL_NREDOPS; i++)
        if (strcasecmp(coll_redops[i], name) == 0)
            return coll_redops[i];
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
    const coll_type *type;
    const char *redop;
    gs_topo topo;
    gs_coll_shape shape;
    gs_algo force;
    int exact; /* every rank as flows (flow_coll.c) instead of the cost model alone */
    /* nccl-tests' parameters, printed in its parameter line */
    uint64_t ngpus, iters, warmup, check, minb, maxb, factor;
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
    uint64_t per = r->type->bytes * (r->op->per_rank_count ? n : 1);
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

/* nccl-tests' number columns (getFloatStr in src/util.cu): two decimals when they fit the width,
 * then one, then none, then an exponent. */
static void num_col(double v, int width, char *out, size_t len)
{
    if (snprintf(out, len, "%*.2f", width, v) <= width)
        return;
    if (snprintf(out, len, "%*.1f", width, v) <= width)
        return;
    if (snprintf(out, len, "%*.0f", width, v) <= width)
        return;
    snprintf(out, len, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

/* nccl-tests' text (writeDeviceReport, writeResultHeader, writeBenchmarkLine*, writeResultFooter
 * in src/util.cu), with gridstep's model in '#' lines; no "# Using devices" lines: nothing runs. */
static void print_nccl_tests(const coll_run *r, const coll_row *rows, size_t nrows, double avg_busbw)
{
    const gs_cluster *c = &r->topo.cluster;
    int bcast = r->op->kind == COLL_KIND_COLLECTIVE && r->op->op == GS_COLL_BROADCAST;
    const char *redop = r->op->reduces ? r->redop : "none";
    char t[16], a[16], b[16];

    printf("# gridstep coll: predicted by gridstep's collective model, not measured\n");
    printf("# %s over %" PRIu64 " rank%s = %" PRIu64 " node%s x up to %" PRIu64 " ranks/node, cluster %s\n",
           r->op->name, r->shape.nranks, r->shape.nranks == 1 ? "" : "s", r->shape.nnodes,
           r->shape.nnodes == 1 ? "" : "s", r->shape.ppn, c->name);
    printf("#   %s per GPU: %s, %.1f GB/s as NCCL plans it; %" PRIu64 " x %s NIC per node, %.2f GB/s "
           "achievable each%s\n",
           gs_link_kind_name(c->intra.kind), c->intra.name, r->topo.intra_bw / 1e9, c->nics_per_node, c->nic.name,
           r->topo.nic_bw / 1e9, c->rail_optimized ? ", rail-optimized" : "");
    printf("#   algorithm: %s; model: %s\n",
           r->force == GS_ALGO_COUNT ? "tuner's choice (lowest predicted time)" : gs_algo_name(r->force),
           r->exact ? "every rank's transfers as flows on the links (--exact), max-min fair"
                    : "NCCL's tuner (time = latency + size / algbw)");
    printf("# Collective test starting: %s_perf\n", r->op->name);
    printf("# nThread 1 nGpus %" PRIu64 " minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu64
           "(factor) warmup iters: %" PRIu64 " iters: %" PRIu64 " agg iters: 1 validation: %" PRIu64
           " graph: 0 unalign: 0\n",
           r->ngpus, r->minb, r->maxb, r->factor, r->warmup, r->iters, r->check);
    printf("#\n#\n");
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
           "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    for (size_t i = 0; i < nrows; i++) {
        num_col(rows[i].time_s * 1e6, 7, t, sizeof t);
        num_col(rows[i].algbw / 1e9, 6, a, sizeof a);
        num_col(rows[i].busbw / 1e9, 6, b, sizeof b);
        printf("%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6d", rows[i].size, rows[i].count, r->type->name, redop,
               bcast ? 0 : -1);
        for (int half = 0; half < 2; half++) /* out-of-place, in-place */
            printf("  %7s  %6s  %6s    N/A", t, a, b);
        printf("\n");
    }
    printf("# gridstep: algorithm and protocol chosen per size\n");
    printf("# %10s  %5s  %6s\n", "size", "algo", "proto");
    for (size_t i = 0; i < nrows; i++)
        printf("# %10" PRIu64 "  %5s  %6s\n", rows[i].size, rows[i].algo, rows[i].proto);
    printf("# %-20s : %d %s\n", "Out of bounds values", 0, "OK");
    printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw / 1e9, "");
    printf("#\n");
    printf("# Collective test concluded: %s_perf\n", r->op->name);
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
        json_object_set_new(doc, "type", json_string(r->type->name)) ||
        json_object_set_new(doc, "type_bytes", json_integer(r->type->bytes)) ||
        json_object_set_new(doc, "redop", json_string(r->op->reduces ? r->redop : "none")) ||
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

/* What the command line asked for. */
typedef struct coll_args {
    const char *op_name, *cluster_name;
    uint64_t ranks, nodes; /* 0: not given */
    int json;
} coll_args;

#define COLL_SHORTOPTS "b:e:f:d:o:g:n:w:c:"

/* --op names the collective, or (nccl-tests' long name for -o) the reduction. */
static gs_status take_op(const char *v, coll_args *a, coll_run *r, gs_error *err)
{
    const char *redop = find_redop(v);
    if (redop)
        r->redop = redop;
    else
        a->op_name = v;
    (void)err;
    return GS_OK;
}

static gs_status parse_args(int argc, char **argv, coll_args *a, coll_run *r, gs_error *err)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'O'},        {"ranks", required_argument, NULL, 'r'},
        {"cluster", required_argument, NULL, 'C'},   {"nodes", required_argument, NULL, 'N'},
        {"minbytes", required_argument, NULL, 'b'},  {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"algo", required_argument, NULL, 'a'},
        {"json", no_argument, NULL, 'j'},            {"exact", no_argument, NULL, 'x'},
        {"datatype", required_argument, NULL, 'd'},  {"redop", required_argument, NULL, 'o'},
        {"ngpus", required_argument, NULL, 'g'},     {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"check", required_argument, NULL, 'c'},
        {NULL, 0, NULL, 0},
    };
    gs_status st = GS_OK;
    int c;
    while (st == GS_OK && (c = getopt_long(argc, argv, COLL_SHORTOPTS, opts, NULL)) != -1) {
        switch (c) {
        case 'O': st = take_op(optarg, a, r, err); break;
        case 'C': a->cluster_name = optarg; break;
        case 'j': a->json = 1; break;
        case 'x': r->exact = 1; break;
        case 'r': st = parse_count_opt("--ranks", optarg, 1, COLL_MAX_RANKS, &a->ranks, err); break;
        case 'N': st = parse_count_opt("--nodes", optarg, 1, COLL_MAX_RANKS, &a->nodes, err); break;
        case 'g': st = parse_count_opt("-g", optarg, 1, COLL_MAX_RANKS, &r->ngpus, err); break;
        case 'n': st = parse_count_opt("-n", optarg, 1, 1ULL << 31, &r->iters, err); break;
        case 'w': st = parse_count_opt("-w", optarg, 0, 1ULL << 31, &r->warmup, err); break;
        case 'c': st = parse_count_opt("-c", optarg, 0, 1, &r->check, err); break;
        case 'f': st = parse_count_opt("-f", optarg, 2, 1ULL << 32, &r->factor, err); break;
        case 'b':
        case 'e':
            if (parse_size(optarg, c == 'b' ? &r->minb : &r->maxb) != 0)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "-%c '%s': expected bytes, an integer with an optional K, M, G or T "
                                    "(binary) suffix\nusage: %s",
                                    c, optarg, usage);
            break;
        case 'd':
            if (!(r->type = find_type(optarg)))
                return gs_error_set(err, GS_ERR_INPUT,
                                    "-d '%s': expected int8, uint8, int32, uint32, int64, uint64, half, float, "
                                    "double, bfloat16, f8e4m3 or f8e5m2 (nccl-tests' names)",
                                    optarg);
            break;
        case 'o':
            if (!(r->redop = find_redop(optarg)))
                return gs_error_set(err, GS_ERR_INPUT, "-o '%s': expected sum, prod, max, min, avg or mulsum",
                                    optarg);
            break;
        case 'a':
            if (find_algo(optarg, &r->force) != 0)
                return gs_error_set(err, GS_ERR_INPUT, "--algo '%s': expected ring, tree, nvls or pat", optarg);
            break;
        default:
            return gs_cli_bad_option(argv[optind - 1], opts, COLL_SHORTOPTS, usage, err);
        }
    }
    if (st != GS_OK)
        return st;
    if (optind < argc)
        return gs_error_set(err, GS_ERR_INPUT, "unexpected argument '%s'\nusage: %s", argv[optind], usage);
    return GS_OK;
}

/* The communicator: --ranks, or -g alone (one process of G GPUs, as `all_reduce_perf -g 8`). */
static gs_status set_shape(coll_args *a, coll_run *r, gs_cluster *cluster, gs_error *err)
{
    if (!a->ranks)
        a->ranks = r->ngpus;
    if (a->ranks % r->ngpus != 0)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--ranks %" PRIu64 " with -g %" PRIu64 ": expected a multiple of -g (nccl-tests runs "
                            "processes of -g GPUs each)",
                            a->ranks, r->ngpus);
    uint64_t nodes = a->nodes ? a->nodes : (a->ranks + cluster->gpus_per_node - 1) / cluster->gpus_per_node;
    if (nodes > a->ranks)
        return gs_error_set(err, GS_ERR_INPUT, "--nodes %" PRIu64 " leaves nodes without ranks (%" PRIu64 " ranks)",
                            nodes, a->ranks);
    r->shape.nranks = a->ranks;
    r->shape.nnodes = nodes;
    r->shape.ppn = (a->ranks + nodes - 1) / nodes;
    if (r->shape.ppn > cluster->gpus_per_node)
        return gs_error_set(err, GS_ERR_INPUT,
                            "%" PRIu64 " ranks on %" PRIu64 " nodes puts %" PRIu64 " on a node; %s has %" PRIu64
                            " GPUs per node",
                            a->ranks, nodes, r->shape.ppn, cluster->name, cluster->gpus_per_node);
    cluster->nodes = nodes;
    gs_topo_init(&r->topo, cluster);
    return GS_OK;
}

gs_status gs_cmd_coll(int argc, char **argv, gs_error *err)
{
    coll_args a = {NULL, NULL, 0, 0, 0};
    coll_run r;
    coll_row *rows = NULL;
    size_t nrows = 0, cap = 0;
    double sum_busbw = 0.0;
    gs_status st;
    gs_cluster cluster;

    memset(&r, 0, sizeof r);
    r.force = GS_ALGO_COUNT;
    r.type = &coll_types[COLL_DEFAULT_TYPE];
    r.redop = coll_redops[0];
    r.ngpus = 1;
    r.iters = COLL_DEFAULT_ITERS;
    r.warmup = COLL_DEFAULT_WARMUP;
    r.check = 0; /* nothing is checked: the parameter line says validation: 0 */
    r.minb = COLL_DEFAULT_MIN, r.maxb = COLL_DEFAULT_MAX, r.factor = COLL_DEFAULT_FACTOR;
    if ((st = parse_args(argc, argv, &a, &r, err)) != GS_OK)
        return st;
    if (!a.op_name || !(a.ranks || r.ngpus > 1) || !a.cluster_name)
        return gs_error_set(err, GS_ERR_INPUT, "--op, --ranks (or -g) and --cluster are required\nusage: %s", usage);
    r.op = find_op(a.op_name);
    if (!r.op)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--op '%s': expected all_reduce, all_gather, reduce_scatter, broadcast, alltoall or "
                            "sendrecv",
                            a.op_name);
    if (r.force != GS_ALGO_COUNT && (r.op->kind == COLL_KIND_SENDRECV || r.op->op == GS_COLL_ALLTOALL))
        return gs_error_set(err, GS_ERR_INPUT,
                            "--algo does not apply to %s: it runs as grouped point-to-point send/recv",
                            r.op->name);
    const gs_cluster *preset = gs_cluster_preset_find(a.cluster_name);
    if (!preset)
        return gs_error_set(err, GS_ERR_INPUT, "unknown cluster '%s'; did you mean '%s'? (gridstep presets clusters)",
                            a.cluster_name, gs_cluster_preset_nearest(a.cluster_name));
    if (r.minb > r.maxb)
        return gs_error_set(err, GS_ERR_INPUT, "-b %" PRIu64 " is larger than -e %" PRIu64, r.minb, r.maxb);
    cluster = *preset;
    if ((st = set_shape(&a, &r, &cluster, err)) != GS_OK)
        return st;

    for (uint64_t size = r.minb;;) {
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
        if ((st = coll_eval(&r, size, &rows[nrows], err)) != GS_OK)
            goto out;
        sum_busbw += rows[nrows].busbw;
        nrows++;
        if (size >= r.maxb || size > r.maxb / r.factor)
            break;
        size = size ? size * r.factor : 1; /* -b 0: then 1, F, F^2, ... */
    }
    if (a.json)
        st = print_json(&r, rows, nrows, sum_busbw / (double)nrows, err);
    else
        print_nccl_tests(&r, rows, nrows, sum_busbw / (double)nrows);
out:
    free(rows);
    return st;
}
