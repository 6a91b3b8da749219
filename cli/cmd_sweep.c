/* `gridstep sweep`: one scenario simulated over a grid of varied keys, a CSV or JSON row per
 * point (illegal points included, with their reason), optionally sharded and plotted. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/mpi_split.h"
#include "cli/plot.h"
#include "cli/progress.h"
#include "engine/ledger.h"
#include "engine/sweep.h"
#include "engine/units.h"
#include "sim/sim.h"

const char gs_cmd_sweep_help[] =
    "Simulates the scenario at every point of a grid of varied keys and prints one row per point:\n"
    "the point's index and varied values, then gpus, grid (dp x pp x tp), step_time_s,\n"
    "tokens_per_s, tokens_per_s_per_gpu, mfu, comm_share, bubble_share, peak_bytes (memory ledger\n"
    "peak, bytes per rank), fits (1/0), status and reason. A point that fails the mesh, batch or\n"
    "memory checks is a row with status illegal or no_fit and the reason (it is not simulated);\n"
    "the sweep never stops for it.\n"
    "\n"
    "--vary KEY=V1,V2,...  or  --vary KEY=A..B (A, 2A, 4A, ... while <= B: 1..64 = 1,2,4,...,64)\n"
    "  keys: gpus, nodes (one of them), nic (preset), nic_gbps (line rate, Gb/s; the achievable\n"
    "  bandwidth scales with it), fabric (intra-node preset), global_batch, micro, seq, tp, pp, dp,\n"
    "  sharding, recompute, pipeline (1f1b, gpipe), offload, sp, tp_comm_overlap,\n"
    "  overlap_param_gather (0, 1; a sharding other than zero1/zero2 drops it unless it is varied\n"
    "  too; a sharding other than no_shard/zero1 drops bucket_stages: first, Megatron-Core's\n"
    "  bucket rule), flash_attention (0, 1), cross_entropy (unfused, fused), framework, compile\n"
    "  (0, 1), attention, power_w (the GPU's power cap, W), precision (bf16, fp16, fp32, fp8:\n"
    "  bf16 with FP8 linear layers, Hopper and later), cp (context parallelism), ep (expert\n"
    "  parallelism, carved out of dp x cp), etp (expert tensor parallelism, a divisor of tp),\n"
    "  cuda_graphs (0, 1; Megatron's layers as CUDA graphs, other frameworks ignore it), cp_comm\n"
    "  (p2p, all_gather, a2a, a2a+p2p: context parallelism's exchange; a value other than a2a+p2p\n"
    "  drops the scenario's cp_a2a unless it is varied too), cp_a2a (hierarchical CP's a2a level,\n"
    "  a divisor of cp below it; 1: none).\n"
    "  Ranges: numeric keys only. Several --vary span the cartesian grid; the first varies slowest (nested loops in\n"
    "  the order given). dp follows the GPU count, dp = GPUs / (cp x tp x pp), unless dp is varied;\n"
    "  varying dp alone sets the GPU count to dp x cp x pp x tp. Fewer GPUs than a node make one\n"
    "  partial node.\n"
    "\n"
    "options:\n"
    "  --vary KEY=VALUES  a key to vary (at most 6, 64 values each)\n"
    "  --csv              CSV with a header line (the default); reasons quoted when they hold commas\n"
    "  --json             one JSON document: scenario, mode, held_fixed (what every point shares),\n"
    "                     vary [{key, values}], points, rows [...] (doc/json.md)\n"
    "  --out FILE         write the table to FILE instead of standard output\n"
    "  --shard I/N        only points i with i % N == I, as a piece for `gridstep merge`\n"
    "                     (CSV pieces start with a '# gridstep sweep shard I/N of P points, sweep ID'\n"
    "                     line, ID a hash of the scenario, mode and varied values; JSON pieces carry\n"
    "                     \"shard\": {index, count}); merging the N pieces gives the serial output,\n"
    "                     and `gridstep merge --plot` draws the curves of JSON pieces\n"
    "  --plot FILE.png|FILE.svg  throughput curves through gnuplot: x = the first varied key (log2\n"
    "                     axis for gpus and nodes, and for numeric keys spanning 8x or more), one line\n"
    "                     per combination of the other keys, tokens/s (top panel) and MFU in % (bottom\n"
    "                     panel), titled with what every point shares (model, GPUs, grid, sharding,\n"
    "                     batch, recompute where not varied); writes FILE.dat and FILE.gp beside the\n"
    "                     image; illegal points are left out of the lines\n"
    "  --mode M           analytic (default) or flow (see gridstep help sim)\n"
    "  --exact            simulate every rank (default: one per pipeline stage)\n"
    "  --threads N        points simulated at once (default 2, at most 64); the output does not\n"
    "                     depend on it\n"
    "  --quiet            no progress on standard error\n"
    "Under mpirun (a gridstep built --with-mpi), rank r of N computes the points of shard r/N and\n"
    "rank 0 merges the pieces as gridstep merge does and prints them (or writes --out): the output\n"
    "is byte for byte the serial sweep's; the other ranks print nothing. An error on any rank (or\n"
    "rank 0 failing to write the output) is reported once by rank 0, the other ranks printing one\n"
    "line each, and every process exits with the serial exit code. --shard and --plot are refused\n"
    "there.\n"
    "Progress goes to standard error: the points done, their share and the time left at that pace (on\n"
    "a terminal one line; in a log, as under Slurm, a line every 5 s, GRIDSTEP_PROGRESS_S); --quiet\n"
    "turns it off.\n"
    "\n"
    "examples:\n"
    "  gridstep sweep --vary gpus=8..64 --vary sharding=full_shard,hybrid_shard scenarios/seed-7b-64gpu-25gbe.yaml\n"
    "  gridstep sweep --vary nic_gbps=25,100,200,400 --plot nic.png scenarios/seed-70b-64xa100.yaml\n"
    "  for i in 0 1 2; do gridstep sweep --vary micro=1,2,4 --shard $i/3 --out part$i.csv scenarios/tiny-llama-2x2x2.yaml; done\n"
    "  gridstep merge part0.csv part1.csv part2.csv > all.csv\n"
    "  mpirun -np 3 gridstep sweep --vary micro=1,2,4 scenarios/tiny-llama-2x2x2.yaml > all.csv\n";

static const char usage[] =
    "gridstep sweep --vary KEY=V1,V2,...|A..B [--vary ...] [--csv|--json] [--out FILE] [--shard I/N] "
    "[--plot FILE.png|FILE.svg] [--mode analytic|flow] [--exact] [--threads N] [--quiet] SCENARIO.yaml";

typedef enum row_status { ROW_OK, ROW_ILLEGAL, ROW_NO_FIT, ROW_ERROR } row_status;

static const char *const status_names[] = {"ok", "illegal", "no_fit", "error"};

/* One point's row. */
typedef struct sweep_row {
    uint64_t point;
    row_status status;
    char reason[320];
    uint64_t gpus, dp, pp, tp;   /* 0 when the point's values could not make a cluster */
    int have_peak;               /* 1: the memory ledger ran */
    uint64_t peak_bytes;         /* ledger peak, bytes per rank */
    int fits;
    double step_time_s, tokens_per_s, tokens_per_s_per_gpu, mfu, comm_share, bubble_share;
} sweep_row;

/* What a table says about itself: the scenario, the mode, what was held fixed, the axes, the
 * shard. */
typedef struct table_meta {
    const char *scenario;
    const char *mode;
    const char *fixed; /* held_fixed: one line */
    const gs_sweep *sw;
    uint64_t points;
    int sharded;
    uint64_t shard_i, shard_n;
} table_meta;

static int key_varied(const gs_sweep *sw, gs_sweep_key k)
{
    for (size_t a = 0; a < sw->naxes; a++)
        if (sw->axes[a].key == k)
            return 1;
    return 0;
}

/* What every point shares, as plots and JSON state it: the model and GPU, then each of the
 * GPU count, grid, sharding, batch and recompute that no --vary changes, e.g. "llama2-7b on
 * dgx-a100-80g, 64 GPUs, pp=1 x tp=1 (dp = GPUs / (pp x tp)), full_shard, micro 1, global
 * batch 512, seq 4096, recompute full". */
static void held_fixed(const gs_scenario *b, const gs_sweep *sw, char *t, size_t len)
{
    size_t u = (size_t)snprintf(t, len, "%s on %s", b->model.name, b->cluster.name);
#define ADD(...) (u += u < len ? (size_t)snprintf(t + u, len - u, __VA_ARGS__) : 0)
    int gpus = key_varied(sw, GS_SWEEP_GPUS) || key_varied(sw, GS_SWEEP_NODES), dp = key_varied(sw, GS_SWEEP_DP);
    if (!gpus && !dp)
        ADD(", %" PRIu64 " GPUs", b->cluster.nodes * b->cluster.gpus_per_node);
    if (!key_varied(sw, GS_SWEEP_PP))
        ADD(", pp=%" PRIu64, b->grid.pp);
    if (!key_varied(sw, GS_SWEEP_TP))
        ADD(", tp=%" PRIu64, b->grid.tp);
    ADD(dp ? " (GPUs = dp x pp x tp)" : " (dp = GPUs / (pp x tp))");
    if (!key_varied(sw, GS_SWEEP_SHARDING))
        ADD(", %s", gs_sharding_name(b->strategy.sharding));
    if (!key_varied(sw, GS_SWEEP_MICRO))
        ADD(", micro %" PRIu64, b->batch.micro_seqs);
    if (!key_varied(sw, GS_SWEEP_GLOBAL_BATCH))
        ADD(", global batch %" PRIu64, b->batch.global_seqs);
    if (!key_varied(sw, GS_SWEEP_SEQ))
        ADD(", seq %" PRIu64, b->model.seq);
    if (!key_varied(sw, GS_SWEEP_RECOMPUTE))
        ADD(", recompute %s", gs_recompute_name(b->strategy.recompute));
#undef ADD
}

/* The derived `gpus` column is left out when gpus is itself a varied key. */
static int gpus_varied(const gs_sweep *sw)
{
    for (size_t a = 0; a < sw->naxes; a++)
        if (sw->axes[a].key == GS_SWEEP_GPUS)
            return 1;
    return 0;
}

/* RFC 4180: quoted when it holds a comma, a quote or a line break (quotes doubled). */
static void csv_cell(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* What makes pieces one sweep (what a JSON piece carries besides its rows): the scenario, the
 * mode and every varied value, as a 64-bit FNV-1a hash for a CSV piece's shard line. */
static uint64_t sweep_identity(const table_meta *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *parts[3] = {m->scenario, m->mode, ""};
    for (int p = 0; p < 2; p++)
        for (const char *c = parts[p]; ; c++) {
            h = (h ^ (unsigned char)*c) * 0x100000001b3ull; /* the NUL separates the fields */
            if (!*c)
                break;
        }
    for (size_t a = 0; a < m->sw->naxes; a++) {
        const char *k = gs_sweep_key_name(m->sw->axes[a].key);
        for (size_t i = 0; i <= m->sw->axes[a].n; i++)
            for (const char *c = i == 0 ? k : m->sw->axes[a].values[i - 1]; ; c++) {
                h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
                if (!*c)
                    break;
            }
    }
    return h;
}

static gs_status write_csv(FILE *f, const table_meta *m, const sweep_row *rows, size_t n,
                                    gs_error *err)
{
    (void)err;
    const gs_sweep *sw = m->sw;
    if (m->sharded)
        fprintf(f, "# gridstep sweep shard %" PRIu64 "/%" PRIu64 " of %" PRIu64 " points, sweep %016" PRIx64 "\n",
                m->shard_i, m->shard_n, m->points, sweep_identity(m));
    fprintf(f, "point");
    for (size_t a = 0; a < sw->naxes; a++)
        fprintf(f, ",%s", gs_sweep_key_name(sw->axes[a].key));
    fprintf(f, "%s,grid,step_time_s,tokens_per_s,tokens_per_s_per_gpu,mfu,comm_share,bubble_share,peak_bytes,fits,"
               "status,reason\n",
            gpus_varied(sw) ? "" : ",gpus");
    size_t idx[GS_SWEEP_MAX_AXES];
    for (size_t i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        gs_sweep_point_indices(sw, r->point, idx);
        fprintf(f, "%" PRIu64, r->point);
        for (size_t a = 0; a < sw->naxes; a++) {
            fputc(',', f);
            csv_cell(f, sw->axes[a].values[idx[a]]);
        }
        if (!gpus_varied(sw))
            fputc(',', f);
        if (r->gpus && !gpus_varied(sw))
            fprintf(f, "%" PRIu64, r->gpus);
        if (r->gpus)
            fprintf(f, "," GS_GRID_CELL_FMT, r->dp, r->pp, r->tp);
        else
            fprintf(f, ",");
        if (r->status == ROW_OK)
            fprintf(f, ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g", r->step_time_s, r->tokens_per_s, r->tokens_per_s_per_gpu, r->mfu,
                    r->comm_share, r->bubble_share);
        else
            fprintf(f, ",,,,,,");
        if (r->have_peak)
            fprintf(f, ",%" PRIu64 ",%d", r->peak_bytes, r->fits);
        else
            fprintf(f, ",,");
        fprintf(f, ",%s,", status_names[r->status]);
        csv_cell(f, r->reason);
        fputc('\n', f);
    }
    return GS_OK;
}

static json_t *axis_value_json(gs_sweep_key k, const char *v)
{
    if (gs_sweep_key_is_count(k))
        return json_integer((json_int_t)strtoull(v, NULL, 10));
    if (k == GS_SWEEP_NIC_GBPS)
        return json_real(strtod(v, NULL));
    return json_string(v);
}

static json_t *real_or_null(int ok, double v)
{
    return ok ? json_real(v) : json_null();
}

static gs_status write_json(FILE *f, const table_meta *m, const sweep_row *rows, size_t n,
                                     gs_error *err)
{
    const gs_sweep *sw = m->sw;
    json_t *doc = json_object(), *vary = json_array(), *arr = json_array();
    if (m->sharded) {
        json_t *sh = json_object();
        json_object_set_new(sh, "command", json_string("sweep"));
        json_object_set_new(sh, "index", json_integer((json_int_t)m->shard_i));
        json_object_set_new(sh, "count", json_integer((json_int_t)m->shard_n));
        json_object_set_new(doc, "shard", sh);
    }
    json_object_set_new(doc, "scenario", json_string(m->scenario));
    json_object_set_new(doc, "mode", json_string(m->mode));
    json_object_set_new(doc, "held_fixed", json_string(m->fixed));
    for (size_t a = 0; a < sw->naxes; a++) {
        json_t *ax = json_object(), *vals = json_array();
        json_object_set_new(ax, "key", json_string(gs_sweep_key_name(sw->axes[a].key)));
        for (size_t i = 0; i < sw->axes[a].n; i++)
            json_array_append_new(vals, axis_value_json(sw->axes[a].key, sw->axes[a].values[i]));
        json_object_set_new(ax, "values", vals);
        json_array_append_new(vary, ax);
    }
    json_object_set_new(doc, "vary", vary);
    json_object_set_new(doc, "points", json_integer((json_int_t)m->points));
    size_t idx[GS_SWEEP_MAX_AXES];
    for (size_t i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        json_t *o = json_object();
        int ok = r->status == ROW_OK;
        gs_sweep_point_indices(sw, r->point, idx);
        json_object_set_new(o, "point", json_integer((json_int_t)r->point));
        for (size_t a = 0; a < sw->naxes; a++)
            json_object_set_new(o, gs_sweep_key_name(sw->axes[a].key),
                                axis_value_json(sw->axes[a].key, sw->axes[a].values[idx[a]]));
        if (r->gpus) {
            json_t *g = json_object();
            json_object_set_new(g, "dp", json_integer((json_int_t)r->dp));
            json_object_set_new(g, "pp", json_integer((json_int_t)r->pp));
            json_object_set_new(g, "tp", json_integer((json_int_t)r->tp));
            if (!gpus_varied(sw))
                json_object_set_new(o, "gpus", json_integer((json_int_t)r->gpus));
            json_object_set_new(o, "grid", g);
        } else {
            if (!gpus_varied(sw))
                json_object_set_new(o, "gpus", json_null());
            json_object_set_new(o, "grid", json_null());
        }
        json_object_set_new(o, "step_time_s", real_or_null(ok, r->step_time_s));
        json_object_set_new(o, "tokens_per_s", real_or_null(ok, r->tokens_per_s));
        json_object_set_new(o, "tokens_per_s_per_gpu", real_or_null(ok, r->tokens_per_s_per_gpu));
        json_object_set_new(o, "mfu", real_or_null(ok, r->mfu));
        json_object_set_new(o, "comm_share", real_or_null(ok, r->comm_share));
        json_object_set_new(o, "bubble_share", real_or_null(ok, r->bubble_share));
        json_object_set_new(o, "peak_bytes", r->have_peak ? json_integer((json_int_t)r->peak_bytes) : json_null());
        json_object_set_new(o, "fits", r->have_peak ? json_boolean(r->fits) : json_null());
        json_object_set_new(o, "status", json_string(status_names[r->status]));
        json_object_set_new(o, "reason", json_string(r->reason));
        json_array_append_new(arr, o);
    }
    json_object_set_new(doc, "rows", arr);
    gs_status rc = gs_cli_json_fprint(f, doc, err);
    json_decref(doc);
    return rc;
}

/* The first line of an error message, for a row's reason. */
static void first_line(const char *msg, char *out, size_t len)
{
    size_t n = strcspn(msg, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(out, msg, n);
    out[n] = '\0';
}

/* One point: its scenario checked, its memory ledger, its simulation. Only an out-of-memory
 * failure stops the sweep; every other failure becomes the row's status and reason. */
static gs_status eval_point(const gs_scenario *base, const gs_sweep *sw, uint64_t point, int exact,
                            const gs_backend_opts *bo, sweep_row *row, gs_error *err)
{
    gs_scenario s;
    gs_mesh mesh;
    gs_error e;
    gs_ledger *l = NULL;
    gs_report rep;
    gs_status rc = GS_OK, st;
    gs_error_init(&e);
    memset(row, 0, sizeof *row);
    row->point = point;
    row->status = ROW_ILLEGAL;
    if (gs_sweep_apply(base, sw, point, &s, &e) != GS_OK) {
        first_line(e.msg, row->reason, sizeof row->reason);
        return GS_OK;
    }
    row->gpus = s.cluster.nodes * s.cluster.gpus_per_node;
    row->dp = s.grid.dp;
    row->pp = s.grid.pp;
    row->tp = s.grid.tp;
    if ((st = gs_scenario_mesh(&s, &mesh, NULL, &e)) != GS_OK || (st = gs_ledger_create(&s, &mesh, &l, &e)) != GS_OK) {
        if (st == GS_ERR_NOMEM)
            rc = gs_error_set(err, st, "point %" PRIu64 ": %s", point, e.msg);
        first_line(e.msg, row->reason, sizeof row->reason);
        goto out;
    }
    row->have_peak = 1;
    row->peak_bytes = l->peak_bytes;
    if (l->peak_bytes > l->gpu_bytes) {
        row->status = ROW_NO_FIT;
        snprintf(row->reason, sizeof row->reason, "does not fit: peak %.2f GB per rank > %.2f GB of GPU memory",
                 (double)l->peak_bytes / 1e9, (double)l->gpu_bytes / 1e9);
        goto out;
    }
    row->fits = 1;
    if ((st = gs_sim_scenario(&s, &mesh, exact, bo, &rep, NULL, &e)) != GS_OK) {
        if (st == GS_ERR_NOMEM)
            rc = gs_error_set(err, st, "point %" PRIu64 ": %s", point, e.msg);
        row->status = ROW_ERROR;
        first_line(e.msg, row->reason, sizeof row->reason);
        goto out;
    }
    row->status = ROW_OK;
    row->step_time_s = rep.step_time_s;
    row->tokens_per_s = rep.tokens_per_s;
    row->tokens_per_s_per_gpu = rep.tokens_per_s_per_gpu;
    row->mfu = rep.mfu;
    row->comm_share = rep.comm_share;
    row->bubble_share = rep.bubble_share;
    gs_report_fini(&rep);
out:
    gs_ledger_destroy(l);
    return rc;
}

/* ---- the points on worker threads ------------------------------------------------------------ */

/* Shared by the workers: the next point to take and the first failure, under the lock. Row k is
 * point shard_i + k x shard_n whichever thread computes it, so the output does not depend on the
 * thread count. */
typedef struct sweep_pool {
    const gs_scenario *base;
    const gs_sweep *sw;
    int exact;
    const gs_backend_opts *bo;
    sweep_row *rows;
    uint64_t nrows;          /* this shard's points */
    uint64_t shard_i, shard_n;
    int sharded;
    gs_progress *prog;       /* points done of this shard's */
    pthread_mutex_t lock;
    uint64_t next, done;
    gs_status rc;            /* the first failure (out of memory only) */
    gs_error err;
} sweep_pool;

static void *pool_worker(void *arg)
{
    sweep_pool *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        uint64_t k = w->next < w->nrows && w->rc == GS_OK ? w->next++ : w->nrows;
        pthread_mutex_unlock(&w->lock);
        if (k >= w->nrows)
            return NULL;
        gs_error e;
        gs_error_init(&e);
        gs_status st = eval_point(w->base, w->sw, w->shard_i + k * w->shard_n, w->exact, w->bo, &w->rows[k], &e);
        pthread_mutex_lock(&w->lock);
        if (st != GS_OK && w->rc == GS_OK) {
            w->rc = st;
            w->err = e;
        }
        /* reported under the pool's lock, so that the lines count up one point at a time */
        gs_progress_update(w->prog, ++w->done, w->nrows, NULL);
        pthread_mutex_unlock(&w->lock);
    }
}

static gs_status run_pool(sweep_pool *w, int threads, gs_error *err)
{
    pthread_t tid[64];
    int started = 0;
    if ((uint64_t)threads > w->nrows)
        threads = w->nrows ? (int)w->nrows : 1;
    for (; started < threads - 1; started++)
        if (pthread_create(&tid[started], NULL, pool_worker, w) != 0)
            break; /* fewer threads: the caller's still works through every point */
    pool_worker(w);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (w->rc != GS_OK)
        return gs_error_set(err, w->rc, "%s", w->err.msg);
    return GS_OK;
}

/* ---- the command ----------------------------------------------------------------------------- */

/* The sweep itself. Split across MPI ranks (sp active), it computes shard rank/size and writes
 * that piece to *piece (malloc'ed, *piece_len bytes) instead of the output; *out_path is the
 * --out FILE for rank 0's merged output then. */
static gs_status sweep_run(int argc, char **argv, const gs_mpi_split *sp, const char **out_path_ret, char **piece,
                           size_t *piece_len, gs_error *err)
{
    enum { O_VARY = 256, O_CSV, O_JSON, O_OUT, O_SHARD, O_PLOT, O_MODE, O_EXACT, O_THREADS, O_QUIET };
    static const struct option opts[] = {
        {"vary", required_argument, NULL, O_VARY}, {"csv", no_argument, NULL, O_CSV},
        {"json", no_argument, NULL, O_JSON},       {"out", required_argument, NULL, O_OUT},
        {"shard", required_argument, NULL, O_SHARD}, {"plot", required_argument, NULL, O_PLOT},
        {"mode", required_argument, NULL, O_MODE}, {"exact", no_argument, NULL, O_EXACT},
        {"threads", required_argument, NULL, O_THREADS}, {"quiet", no_argument, NULL, O_QUIET}, {NULL, 0, NULL, 0},
    };
    gs_sweep sw;
    gs_sweep_init(&sw);
    gs_backend_opts bo = {0, NULL, NULL, NULL};
    int json = 0, exact = 0, c, sharded = 0, threads = 2, quiet = 0;
    uint64_t shard_i = 0, shard_n = 1;
    const char *out_path = NULL, *plot_path = NULL;
    gs_plot plot;
    gs_status rc = GS_OK;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && rc == GS_OK) {
        switch (c) {
        case O_VARY: rc = gs_sweep_add(&sw, optarg, err); break;
        case O_CSV: json = 0; break;
        case O_JSON: json = 1; break;
        case O_OUT: out_path = optarg; break;
        case O_SHARD:
            rc = gs_shard_parse("--shard", optarg, &shard_i, &shard_n, err);
            sharded = 1;
            break;
        case O_PLOT:
            plot_path = optarg;
            rc = gs_plot_init(&plot, "--plot", optarg, err);
            break;
        case O_MODE:
            if (strcmp(optarg, "analytic") == 0)
                bo.flow = 0;
            else if (strcmp(optarg, "flow") == 0)
                bo.flow = 1;
            else
                rc = gs_error_set(err, GS_ERR_INPUT, "--mode: found '%s', expected analytic or flow\nusage: %s", optarg,
                                  usage);
            break;
        case O_EXACT: exact = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_THREADS: {
            uint64_t v;
            if (gs_parse_count(optarg, &v) != 0 || v < 1 || v > 64)
                rc = gs_error_set(err, GS_ERR_INPUT, "--threads: found '%s', expected 1 to 64", optarg);
            else
                threads = (int)v;
            break;
        }
        default:
            return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
        }
    }
    if (rc != GS_OK)
        return rc;
    const char *path = NULL;
    if ((rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err)) != GS_OK)
        return rc;
    if (sw.naxes == 0)
        return gs_error_set(err, GS_ERR_INPUT, "sweep needs at least one --vary KEY=VALUES\nusage: %s", usage);
    if (plot_path && sharded)
        return gs_error_set(err, GS_ERR_INPUT,
                            "--plot and --shard: a shard holds part of the points; plot the serial sweep instead");
    int split = gs_mpi_split_active(sp);
    if (split && sharded)
        return gs_error_set(err, GS_ERR_INPUT, "--shard under mpirun (%d ranks): the ranks are the shards; run one or "
                                               "the other", sp->size);
    if (split && plot_path)
        return gs_error_set(err, GS_ERR_INPUT, "--plot under mpirun (%d ranks): plot a serial sweep, or gridstep merge "
                                               "--plot of JSON pieces", sp->size);
    if (split) { /* rank r computes shard r/size, as --shard would */
        sharded = 1;
        shard_i = (uint64_t)sp->rank;
        shard_n = (uint64_t)sp->size;
        *out_path_ret = out_path;
    }
    uint64_t npoints = gs_sweep_points(&sw);
    if (npoints > 1000000)
        return gs_error_set(err, GS_ERR_INPUT, "%" PRIu64 " points, expected at most 1,000,000", npoints);

    gs_scenario base;
    sweep_row *rows = NULL;
    size_t nrows = 0;
    FILE *out = stdout;
    if ((rc = gs_scenario_load_file(path, &base, err)) != GS_OK)
        return rc;
    base.grid.grid_line = base.grid.grid_col = 0; /* a point's grid is not the file's */
    base.batch.batch_line = base.batch.batch_col = 0;
    uint64_t mine = npoints / shard_n + (shard_i < npoints % shard_n);
    if (!(rows = calloc(mine ? mine : 1, sizeof *rows)))
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory for %" PRIu64 " rows", mine);
    if (split && !(out = open_memstream(piece, piece_len))) {
        out = stdout;
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for this rank's piece");
        goto out;
    }
    if (split)
        out_path = "this rank's piece";
    else if (out_path && !(out = fopen(out_path, "w"))) { /* before the work: a bad path fails at once */
        out = stdout;
        rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
        goto out;
    }
    /* under mpirun the first rank reports its shard's progress for all */
    gs_progress prog;
    gs_progress_init(&prog, sharded ? "gridstep sweep (this shard)" : "gridstep sweep", "points",
                     !quiet && (!split || sp->rank == 0));
    sweep_pool pool = {&base, &sw, exact, &bo, rows, mine, shard_i, shard_n, sharded, &prog,
                       PTHREAD_MUTEX_INITIALIZER, 0, 0, GS_OK, {GS_OK, ""}};
    rc = run_pool(&pool, threads, err);
    gs_progress_end(&prog);
    if (rc != GS_OK)
        goto out;
    nrows = (size_t)mine;
    char fixed[512];
    held_fixed(&base, &sw, fixed, sizeof fixed);
    table_meta meta = {base.name, bo.flow ? "flow" : "analytic", fixed, &sw, npoints, sharded, shard_i, shard_n};
    if (json)
        rc = write_json(out, &meta, rows, nrows, err);
    else
        rc = write_csv(out, &meta, rows, nrows, err);
    if (rc != GS_OK)
        goto out;
    if (out != stdout) {
        int bad = ferror(out);
        if (fclose(out) != 0 || bad) {
            out = stdout;
            rc = gs_error_set(err, GS_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
            goto out;
        }
        out = stdout;
    }
    if (plot_path) {
        gs_plot_sweep_point *pts = calloc(nrows ? nrows : 1, sizeof *pts);
        if (!pts) {
            rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory for the plot");
            goto out;
        }
        for (size_t i = 0; i < nrows; i++) {
            pts[i].point = rows[i].point;
            pts[i].ran = rows[i].status == ROW_OK;
            pts[i].tokens_per_s = rows[i].tokens_per_s;
            pts[i].mfu = rows[i].mfu;
            pts[i].step_time_s = rows[i].step_time_s;
        }
        gs_plot_sweep_info info = {base.name, meta.mode, fixed};
        rc = gs_plot_sweep(&plot, &info, &sw, pts, nrows, err);
        free(pts);
    }
out:
    if (out != stdout)
        fclose(out);
    free(rows);
    return rc;
}

gs_status gs_cmd_sweep(int argc, char **argv, gs_error *err)
{
    gs_mpi_split sp;
    const char *out_path = NULL;
    char *piece = NULL;
    size_t len = 0;
    gs_status rc = gs_mpi_split_begin(&sp, err);
    if (rc != GS_OK)
        return rc;
    rc = sweep_run(argc, argv, &sp, &out_path, &piece, &len, err);
    rc = gs_mpi_split_finish(&sp, "sweep", rc, piece, len, out_path, err);
    free(piece);
    return rc;
}
