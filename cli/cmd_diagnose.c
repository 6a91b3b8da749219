/* `gridstep diagnose`: the seed's troubleshooting table walked against a scenario, each row's fix
 * applied to a copy and simulated, printed as a table (or JSON). */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/diagnose.h"
#include "engine/units.h"
#include "sim/sim.h"

const char gs_cmd_diagnose_help[] =
    "Walks the seed's troubleshooting table (symptom -> cause -> check -> fix) against the scenario.\n"
    "For each row it prints whether the symptom applies (yes, at risk, no, or n/a when one simulated\n"
    "step cannot tell), the quantity it checked with its threshold, and each fix with its simulated\n"
    "effect: the fix is applied to a copy of the scenario, the memory ledger and the step are run\n"
    "again, and the difference is printed (peak memory per rank, step time, tokens/s; host memory\n"
    "for the checkpoint row). Where the scenario has the fix already (per-layer wrap, full\n"
    "recompute, hybrid_shard, interleaved, SHARDED_STATE_DICT), the copy is the scenario without\n"
    "it, and the effect printed is what the fix is worth (with - without). A fix that cannot\n"
    "apply says why.\n"
    "\n"
    "The seed is the article gridstep's rules come from, a practitioner's guide to FSDP state\n"
    "sharding and the DP x PP x TP grid for LLM pre-training; its troubleshooting table maps a\n"
    "symptom to a cause, a check and a fix, and its pitfalls and rules of thumb (NCCL over 30% of\n"
    "the step: redesign the grid; no TP past a node; CPU offload 30-50% slower) are the rows below.\n"
    "\n"
    "rows (in order):\n"
    "  oom-at-start      all-gather peak: FSDP unit too large (whole-model wrap gathers everything)\n"
    "                    -> wrap per layer\n"
    "  oom-first-step    activation peak -> recompute full; smaller micro-batch\n"
    "  flat-throughput   NCCL share over 30% with the DP group across nodes -> hybrid_shard;\n"
    "                    larger micro-batch (fewer parameter gathers per step)\n"
    "  pipeline-bubble   idle share over 15% with pp > 1 -> more micro-batches; interleaved 1F1B\n"
    "  checkpoint-oom    FULL_STATE_DICT gathers 12 B x params (fp32 model + Adam m, v) in rank 0's\n"
    "                    host memory -> SHARDED_STATE_DICT\n"
    "  loss-after-scale  n/a: compare the loss curve with the baseline; retune lr and warm-up\n"
    "  tp-cross-node     a TP group spans nodes -> tp <= GPUs per node (dp grows to keep the GPUs)\n"
    "  cpu-offload-slow  CPU offload on -> offload off (if it fits)\n"
    "  states-too-big    per-rank states above GPU memory -> full_shard, or more GPUs\n"
    "  tp-comm-exposed   TP collectives exposed over 10% of the step -> sequence_parallel +\n"
    "                    tp_comm_overlap\n"
    "  cp-ring-nodes     p2p's CP ring across nodes with several CP ranks on each, the TP stream\n"
    "                    exposed over 10% -> cp_comm a2a+p2p with cp_a2a the CP ranks per node\n"
    "  zero-gather-exposed  ZeRO-1/2 parameter gather exposed -> overlap_param_gather\n"
    "  loss-passes       the unfused cross-entropy's passes over the logits (their HBM time at\n"
    "                    the datasheet bandwidth) over 5% of the step -> cross_entropy: fused\n"
    "  host-bound        the host thread issues kernels for over 80% of the step (8 us each) ->\n"
    "                    compile: true (PyTorch frameworks) or cuda_graphs: true (Megatron), a\n"
    "                    larger micro-batch\n"
    "TP groups crossing nodes are diagnosed, not rejected (allow_tp_cross_node is implied).\n"
    "The step is simulated as gridstep plan does (analytic mode, one rank per pipeline stage, a\n"
    "shortened step extrapolated linearly; --full-step simulates every micro-batch); peaks are the\n"
    "memory ledger's. Exit status is 0 whether or not a symptom applies (the JSON's `problems`\n"
    "counts the rows that do); 2 for bad input, 1 when the scenario itself cannot be simulated.\n"
    "\n"
    "options:\n"
    "  --json               one JSON document: base {step_time_s, tokens_per_s, peak_bytes, ...},\n"
    "                       problems, rows [{id, symptom, cause, applies (yes|at_risk|no|n/a), check,\n"
    "                       measured, threshold, unit, detail, fix (the table's remedy), effect\n"
    "                       (of the first simulated fix: {peak_bytes_delta, step_time_s_delta,\n"
    "                       tokens_per_s_delta, host_bytes_delta, ...} or null),\n"
    "                       fixes [{fix, simulated, counterfactual, note, effect}]}]; effects are\n"
    "                       with the fix minus without it\n"
    "  --full-step          simulate every micro-batch of the step (slower)\n"
    "  --state-dict KIND    how checkpoints are saved: full (FULL_STATE_DICT, PyTorch's default) or\n"
    "                       sharded\n"
    "  --host-memory-gb G   host memory per node, GB (default 2000: DGX H100's 2 TB)\n"
    "\n"
    "examples:\n"
    "  gridstep diagnose scenarios/troubled-70b.yaml\n"
    "  gridstep diagnose --json scenarios/seed-70b-64xa100.yaml | jq '.rows[] | select(.applies == \"yes\")'\n";

static const char usage[] =
    "gridstep diagnose [--json] [--full-step] [--state-dict full|sharded] [--host-memory-gb G] SCENARIO.yaml";

static gs_status eval_sim(const gs_scenario *s, const gs_mesh *mesh, void *ctx, gs_report *rep, gs_error *err)
{
    (void)ctx;
    return gs_sim_scenario(s, mesh, 0, NULL, rep, NULL, err);
}

static const char *json_verdict(gs_diagnose_verdict v)
{
    return v == GS_DIAGNOSE_AT_RISK ? "at_risk" : gs_diagnose_verdict_name(v);
}

/* "-38.00 GB", "+1.20 GB" */
static char *fmt_signed_bytes(int64_t b, char *buf, size_t len)
{
    char t[GS_FMT_BYTES];
    uint64_t mag = b < 0 ? (uint64_t)(-(b + 1)) + 1 : (uint64_t)b;
    snprintf(buf, len, "%c%s", b < 0 ? '-' : '+', gs_fmt_bytes(mag, t, sizeof t));
    return buf;
}

static char *fmt_signed_seconds(double s, char *buf, size_t len)
{
    char t[32];
    snprintf(buf, len, "%c%s", s < 0 ? '-' : '+', gs_fmt_seconds(fabs(s), t, sizeof t));
    return buf;
}

/* "peak -38.00 GB, step -4.10 s, tokens/s +12.0%" */
static void fmt_effect(const gs_diagnose_fix *fx, char *buf, size_t len)
{
    char b[GS_FMT_BYTES], t[32];
    size_t n = 0;
    if (!fx->simulated) {
        snprintf(buf, len, "not applied: %s", fx->note);
        return;
    }
    if (fx->counterfactual)
        n += (size_t)snprintf(buf + n, len - n, "%s: ", fx->note);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "peak %s",
                          fx->peak_bytes_delta ? fmt_signed_bytes(fx->peak_bytes_delta, b, sizeof b) : "unchanged");
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, ", step %s",
                              fx->step_time_s_delta != 0 ? fmt_signed_seconds(fx->step_time_s_delta, t, sizeof t)
                                                         : "unchanged");
    double tps_without = fx->after.tokens_per_s - fx->tokens_per_s_delta; /* relative to the unfixed step */
    if (n < len && fx->tokens_per_s_delta != 0 && tps_without > 0)
        n += (size_t)snprintf(buf + n, len - n, ", tokens/s %+.1f%%", 100 * fx->tokens_per_s_delta / tps_without);
    if (n < len && fx->host_bytes_delta)
        n += (size_t)snprintf(buf + n, len - n, ", rank-0 host memory %s",
                              fmt_signed_bytes(fx->host_bytes_delta, b, sizeof b));
    if (n < len && fx->note[0] && !fx->counterfactual)
        snprintf(buf + n, len - n, " (%s)", fx->note);
}

static void fmt_quantity(double v, const char *unit, char *buf, size_t len)
{
    if (strcmp(unit, "bytes") == 0)
        gs_fmt_bytes((uint64_t)v, buf, len);
    else if (strcmp(unit, "fraction") == 0)
        snprintf(buf, len, "%.1f%%", 100 * v);
    else if (v == 1 && unit[0] && unit[strlen(unit) - 1] == 's')
        snprintf(buf, len, "1 %.*s", (int)strlen(unit) - 1, unit); /* "1 node" */
    else
        snprintf(buf, len, "%.0f %s", v, unit);
}

static json_t *effect_json(const gs_diagnose_fix *fx)
{
    if (!fx->simulated)
        return json_null();
    json_t *e = json_object();
    json_object_set_new(e, "peak_bytes_delta", json_integer((json_int_t)fx->peak_bytes_delta));
    json_object_set_new(e, "step_time_s_delta", json_real(fx->step_time_s_delta));
    json_object_set_new(e, "tokens_per_s_delta", json_real(fx->tokens_per_s_delta));
    json_object_set_new(e, "host_bytes_delta", json_integer((json_int_t)fx->host_bytes_delta));
    json_object_set_new(e, "peak_bytes_after", json_integer((json_int_t)fx->after.peak_bytes));
    json_object_set_new(e, "step_time_s_after", json_real(fx->after.step_time_s));
    return e;
}

static json_t *diagnosis_json(const gs_scenario *s, const gs_diagnose_opts *o, const gs_diagnosis *d)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "scenario", json_string(s->name));
    json_object_set_new(doc, "step", json_string(o->full_step ? "full" : "extrapolated"));
    json_object_set_new(doc, "state_dict", json_string(o->state_dict == GS_STATE_DICT_FULL ? "full" : "sharded"));
    json_object_set_new(doc, "host_bytes", json_integer((json_int_t)o->host_bytes));
    json_t *b = json_object();
    json_object_set_new(b, "params", json_integer((json_int_t)d->params));
    json_object_set_new(b, "step_time_s", json_real(d->base.step_time_s));
    json_object_set_new(b, "tokens_per_s", json_real(d->base.tokens_per_s));
    json_object_set_new(b, "peak_bytes", json_integer((json_int_t)d->base.peak_bytes));
    json_object_set_new(b, "gpu_bytes", json_integer((json_int_t)d->base.gpu_bytes));
    json_object_set_new(b, "comm_share", json_real(d->base.comm_share));
    json_object_set_new(b, "bubble_share", json_real(d->base.bubble_share));
    json_object_set_new(b, "host_issue_s", json_real(d->base.host_issue_s));
    json_object_set_new(b, "host_ckpt_bytes", json_integer((json_int_t)d->base.host_ckpt_bytes));
    json_object_set_new(doc, "base", b);
    json_object_set_new(doc, "problems", json_integer(d->problems));
    json_t *rows = json_array();
    for (size_t i = 0; i < d->nrows; i++) {
        const gs_diagnose_row *r = &d->rows[i];
        json_t *o1 = json_object();
        json_object_set_new(o1, "id", json_string(r->id));
        json_object_set_new(o1, "symptom", json_string(r->symptom));
        json_object_set_new(o1, "cause", json_string(r->cause));
        json_object_set_new(o1, "applies", json_string(json_verdict(r->applies)));
        json_object_set_new(o1, "check", json_string(r->check));
        json_object_set_new(o1, "measured", json_real(r->measured));
        json_object_set_new(o1, "threshold", json_real(r->threshold));
        json_object_set_new(o1, "unit", json_string(r->unit));
        json_object_set_new(o1, "detail", json_string(r->detail));
        const gs_diagnose_fix *first = NULL;
        for (size_t j = 0; j < r->nfixes && !first; j++)
            if (r->fixes[j].simulated)
                first = &r->fixes[j];
        if (!first && r->nfixes)
            first = &r->fixes[0];
        json_object_set_new(o1, "fix", json_string(r->advice));
        json_object_set_new(o1, "effect", first ? effect_json(first) : json_null());
        json_t *fa = json_array();
        for (size_t j = 0; j < r->nfixes; j++) {
            const gs_diagnose_fix *fx = &r->fixes[j];
            json_t *f = json_object();
            json_object_set_new(f, "fix", json_string(fx->fix));
            json_object_set_new(f, "simulated", json_boolean(fx->simulated));
            json_object_set_new(f, "counterfactual", json_boolean(fx->counterfactual));
            json_object_set_new(f, "note", json_string(fx->note));
            json_object_set_new(f, "effect", effect_json(fx));
            json_array_append_new(fa, f);
        }
        json_object_set_new(o1, "fixes", fa);
        json_array_append_new(rows, o1);
    }
    json_object_set_new(doc, "rows", rows);
    return doc;
}

static gs_status print_diagnosis(const gs_scenario *s, const gs_diagnose_opts *o, const gs_diagnosis *d,
                                 gs_error *err)
{
    char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES], t1[32], q1[64], q2[64], e1[GS_DIAGNOSE_TEXT_BYTES * 2];
    gs_cli_table t;
    gs_cli_table_init(&t, 5);
    gs_status rc = gs_cli_table_rowf(&t, "row\tapplies\tmeasured\tthreshold\tsymptom");
    printf("%s: %s on %" PRIu64 " x %s, grid " GS_GRID_FMT ", %s\n", s->name,
           s->model.name, s->cluster.nodes, s->cluster.name, s->grid.dp, s->grid.pp, s->grid.tp,
           gs_sharding_name(s->strategy.sharding));
    printf("  simulated step %s (%s), %.0f tokens/s; peak %s per rank of %s; NCCL share %.1f%%, idle %.1f%%\n",
           gs_fmt_seconds(d->base.step_time_s, t1, sizeof t1), o->full_step ? "every micro-batch" : "extrapolated",
           d->base.tokens_per_s, gs_fmt_bytes(d->base.peak_bytes, b1, sizeof b1),
           gs_fmt_bytes(d->base.gpu_bytes, b2, sizeof b2), 100 * d->base.comm_share, 100 * d->base.bubble_share);
    printf("  %d of %zu rows apply\n\n", d->problems, d->nrows);
    for (size_t i = 0; i < d->nrows && rc == GS_OK; i++) {
        const gs_diagnose_row *r = &d->rows[i];
        fmt_quantity(r->measured, r->unit, q1, sizeof q1);
        if (r->applies == GS_DIAGNOSE_NA)
            snprintf(q2, sizeof q2, "-");
        else
            fmt_quantity(r->threshold, r->unit, q2, sizeof q2);
        rc = gs_cli_table_rowf(&t, "%s\t%s\t%s\t%s\t%s", r->id, gs_diagnose_verdict_name(r->applies), q1, q2,
                               r->symptom);
    }
    if (rc != GS_OK) {
        gs_cli_table_fini(&t);
        return gs_error_set(err, rc, "diagnose: out of memory");
    }
    gs_cli_table_print(&t, stdout, 2);
    gs_cli_table_fini(&t);
    for (size_t i = 0; i < d->nrows; i++) {
        const gs_diagnose_row *r = &d->rows[i];
        printf("\n%s: %s -- %s\n", r->id, r->symptom, r->cause);
        printf("  applies  %s\n", gs_diagnose_verdict_name(r->applies));
        printf("  check    %s\n", r->check);
        printf("  found    %s\n", r->detail);
        printf("  remedy   %s\n", r->advice);
        if (r->nfixes == 0)
            printf("  fix      none simulated (the remedy changes the optimization, not time or memory)\n");
        for (size_t j = 0; j < r->nfixes; j++) {
            fmt_effect(&r->fixes[j], e1, sizeof e1);
            printf("  fix      %s: %s\n", r->fixes[j].fix, e1);
        }
    }
    return GS_OK;
}

gs_status gs_cmd_diagnose(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"full-step", no_argument, NULL, 'f'},
        {"state-dict", required_argument, NULL, 's'},
        {"host-memory-gb", required_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gs_diagnose_opts o;
    gs_diagnose_opts_init(&o);
    o.eval = eval_sim;
    int json = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'f': o.full_step = 1; break;
        case 's':
            if (strcmp(optarg, "full") == 0)
                o.state_dict = GS_STATE_DICT_FULL;
            else if (strcmp(optarg, "sharded") == 0)
                o.state_dict = GS_STATE_DICT_SHARDED;
            else
                return gs_error_set(err, GS_ERR_INPUT, "--state-dict: found '%s', expected full or sharded\nusage: %s",
                                    optarg, usage);
            break;
        case 'h': {
            char *end = NULL;
            double gb = strtod(optarg, &end);
            if (!end || *end || !(gb > 0) || gb > 1e9)
                return gs_error_set(err, GS_ERR_INPUT,
                                    "--host-memory-gb: found '%s', expected a positive number of GB (1e9 B)\n"
                                    "usage: %s",
                                    optarg, usage);
            o.host_bytes = (uint64_t)llround(gb * GS_GB);
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
    json_t *doc = NULL;
    gs_diagnosis *d = calloc(1, sizeof *d);
    if (!d)
        return gs_error_set(err, GS_ERR_NOMEM, "diagnose: out of memory");
    if ((rc = gs_scenario_load_file(path, &s, err)) != GS_OK)
        goto out;
    if ((rc = gs_diagnose_run(&s, &o, d, err)) != GS_OK) {
        gs_error_prefix(err, "%s", path);
        goto out;
    }
    if (json) {
        doc = diagnosis_json(&s, &o, d);
        rc = gs_cli_json_print(doc, err);
    } else {
        rc = print_diagnosis(&s, &o, d, err);
    }
out:
    json_decref(doc);
    free(d);
    return rc;
}
