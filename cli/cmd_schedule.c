/* `gridstep schedule`: builds (or loads) the schedule of one training step, validates it, and
 * prints a per-rank summary or dumps it as text or JSON. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "engine/input_file.h"
#include "cli/commands.h"
#include "engine/schedule.h"
#include "engine/units.h"

const char gs_cmd_schedule_help[] =
    "Builds the schedule of one training step: per rank, the ordered list of compute, collective,\n"
    "send/recv and host<->device copy events, the logical tensors they read, write, allocate and\n"
    "free, and their dependencies. The schedule is validated (acyclic; every collective matched\n"
    "in order and size by every member of its group present; every send matched by a recv; no\n"
    "tensor used outside its lifetime; bytes sent and memory high-water mark equal to the\n"
    "ledgers of `gridstep mem`), then summarized per rank list: events by kind and by stream,\n"
    "tensors, peak device memory (walking the events in order) and bytes sent per step (as\n"
    "nccl-tests counts bus bytes). GB = 10^9 B.\n"
    "\n"
    "By default one representative rank per class is built (ranks of one pipeline stage differ\n"
    "only in their group ids); --exact builds every rank.\n"
    "\n"
    "options:\n"
    "  --exact           every rank, not one per class\n"
    "  --dump FILE|-     write the schedule to FILE (- = stdout, which replaces the summary)\n"
    "  --format F        text (default; the stable line format documented in engine/schedule.c,\n"
    "                    what --load reads), json (the same content, with event names), or list\n"
    "                    (one line per event for people: name, stream, what, size, after)\n"
    "  --rank R          restrict the summary and the dump to global rank R (it must be in the\n"
    "                    schedule: with classes, only the representatives are)\n"
    "  --load FILE       read a text dump instead of building, and validate its structure; with\n"
    "                    a scenario as well, build that too (with the dump's --exact setting\n"
    "                    unless --exact is given) and check the two are identical\n"
    "  --json            the summary as one JSON document\n"
    "\n"
    "Event names read [where.][mbN.][cN.]phase[.what][#n], e.g. L12.mb3.fwd.attn,\n"
    "L12.mb3.recompute.mlp_up, L12.mb3.fwd.ag, L12.mb3.bwd.rs, L12.mb3.fwd.tp_ar#2, emb.mb0.fwd,\n"
    "head.mb0.fwd.loss, mb3.fwd.send, unit3.mb7.bwd.ar (a DDP bucket), optim.\n"
    "\n"
    "examples:\n"
    "  gridstep schedule scenarios/seed-70b-64xa100-fsdp.yaml\n"
    "  gridstep schedule --rank 0 --dump - scenarios/seed-70b-64xa100.yaml | less\n"
    "  gridstep schedule --dump step.sched scenarios/seed-7b-8xa100.yaml\n"
    "  gridstep schedule --load step.sched scenarios/seed-7b-8xa100.yaml\n";

static const char usage[] =
    "gridstep schedule [--exact] [--dump FILE|-] [--format text|json|list] [--rank R] [--load FILE] [--json] "
    "[SCENARIO.yaml]";

enum { KIND_COMPUTE, KIND_COLL, KIND_SEND, KIND_RECV, KIND_COPY, KIND_COLS };

typedef struct rank_summary {
    uint64_t by_kind[KIND_COLS];
    uint64_t by_stream[GS_STREAM_COUNT];
    uint64_t peak_bytes;
    uint64_t sent_bytes;
} rank_summary;

static void summarize(const gs_rank_events *r, rank_summary *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < r->nevents; i++) {
        const gs_event *e = &r->events[i];
        int k = e->kind == GS_EV_COMPUTE      ? KIND_COMPUTE
                : e->kind == GS_EV_COLLECTIVE ? KIND_COLL
                : e->kind == GS_EV_SEND       ? KIND_SEND
                : e->kind == GS_EV_RECV       ? KIND_RECV
                                              : KIND_COPY;
        out->by_kind[k]++;
        if (e->stream < GS_STREAM_COUNT)
            out->by_stream[e->stream]++;
        out->sent_bytes += gs_event_sent_bytes(e);
    }
    out->peak_bytes = gs_rank_peak_bytes(r);
}

/* "0, 8, 16-23, ..." (at most about 20 entries) */
static void format_ranks(const gs_schedule *sch, char *buf, size_t len)
{
    size_t pos = 0, shown = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sch->nranks && pos + 32 < len; i++) {
        uint64_t a = sch->ranks[i].rank, b = a;
        while (i + 1 < sch->nranks && sch->ranks[i + 1].rank == b + 1)
            b = sch->ranks[++i].rank;
        if (shown == 20) {
            snprintf(buf + pos, len - pos, ", ... (%zu lists in all)", sch->nranks);
            return;
        }
        int n = a == b ? snprintf(buf + pos, len - pos, "%s%" PRIu64, shown ? ", " : "", a)
                       : snprintf(buf + pos, len - pos, "%s%" PRIu64 "-%" PRIu64, shown ? ", " : "", a, b);
        if (n < 0)
            return;
        pos += (size_t)n;
        shown++;
    }
}

static gs_status print_summary(const gs_schedule *sch, int full_validation, const char *note)
{
    gs_status rc = GS_OK;
    uint64_t total_events = 0, total_tensors = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        total_events += sch->ranks[i].nevents;
        total_tensors += sch->ranks[i].ntensors;
    }
    char c1[32], c2[32], order[32], grid[96];
    gs_mesh_order_format_cp(sch->mesh.order, sch->mesh.cp > 1, sch->mesh.cp_outer, order, sizeof order);
    gs_mesh_grid_text(&sch->mesh, grid, sizeof grid);
    printf("schedule of %s: grid %s (order %s), %" PRIu64 " micro-batch%s\n",
           sch->scenario[0] ? sch->scenario : "(unnamed)", grid, order, sch->microbatches,
           sch->microbatches == 1 ? "" : "es");
    printf("%zu rank list%s (%s), %s events, %s tensors\n", sch->nranks, sch->nranks == 1 ? "" : "s",
           sch->exact ? "every rank" : "one representative per class", gs_fmt_count(total_events, c1, sizeof c1),
           gs_fmt_count(total_tensors, c2, sizeof c2));
    printf("validated: %s\n", full_validation ? "acyclic, collectives matched, sends matched, tensor lifetimes, "
                                                "bytes sent and memory peak equal to the ledgers"
                                              : "acyclic, collectives matched, sends matched, tensor lifetimes "
                                                "(structure only: no scenario for the ledgers)");
    if (note)
        printf("%s\n", note);
    putchar('\n');

    gs_cli_table t;
    gs_cli_table_init(&t, 4 + KIND_COLS);
    const char *hdr1[4 + KIND_COLS] = {"rank", "ranks", "stage", "events", "compute", "collective", "send", "recv", "copy"};
    if ((rc = gs_cli_table_row(&t, hdr1)) != GS_OK)
        goto out;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        rank_summary s;
        summarize(r, &s);
        if ((rc = gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%zu\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
                                        "\t%" PRIu64 "\t%" PRIu64,
                                    r->rank, r->class_size, r->stage, r->nevents, s.by_kind[KIND_COMPUTE],
                                    s.by_kind[KIND_COLL], s.by_kind[KIND_SEND], s.by_kind[KIND_RECV],
                                    s.by_kind[KIND_COPY])) != GS_OK)
            goto out;
    }
    printf("events by kind\n");
    gs_cli_table_print(&t, stdout, 2);
    gs_cli_table_fini(&t);

    gs_cli_table_init(&t, 1 + GS_STREAM_COUNT + 3);
    const char *hdr2[1 + GS_STREAM_COUNT + 3] = {"rank", "compute", "dp", "tp", "pp", "copy", "tensors", "peak memory", "sent"};
    if ((rc = gs_cli_table_row(&t, hdr2)) != GS_OK)
        goto out;
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        rank_summary s;
        char b1[GS_FMT_BYTES], b2[GS_FMT_BYTES];
        summarize(r, &s);
        if ((rc = gs_cli_table_rowf(&t, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%zu\t%s\t%s",
                                    r->rank, s.by_stream[GS_STREAM_COMPUTE], s.by_stream[GS_STREAM_DP],
                                    s.by_stream[GS_STREAM_TP], s.by_stream[GS_STREAM_PP], s.by_stream[GS_STREAM_COPY],
                                    r->ntensors, gs_fmt_bytes(s.peak_bytes, b1, sizeof b1),
                                    gs_fmt_bytes(s.sent_bytes, b2, sizeof b2))) != GS_OK)
            goto out;
    }
    printf("\nevents by stream, memory and traffic per step\n");
    gs_cli_table_print(&t, stdout, 2);
out:
    gs_cli_table_fini(&t);
    return rc;
}

static json_t *summary_json(const gs_schedule *sch, int full_validation, int identical)
{
    static const char *kind_keys[KIND_COLS] = {"compute", "collective", "send", "recv", "copy"};
    json_t *doc = json_object();
    uint64_t total = 0;
    json_object_set_new(doc, "scenario", json_string(sch->scenario));
    json_t *grid = json_object();
    json_object_set_new(grid, "dp", json_integer((json_int_t)gs_mesh_dp_replicas(&sch->mesh)));
    if (sch->mesh.cp > 1)
        json_object_set_new(grid, "cp", json_integer((json_int_t)sch->mesh.cp));
    if (sch->mesh.cp > 1 && sch->mesh.cp_a2a > 1)
        json_object_set_new(grid, "cp_a2a", json_integer((json_int_t)sch->mesh.cp_a2a));
    if (sch->mesh.ep > 1)
        json_object_set_new(grid, "ep", json_integer((json_int_t)sch->mesh.ep));
    if (sch->mesh.etp)
        json_object_set_new(grid, "etp", json_integer((json_int_t)sch->mesh.etp));
    json_object_set_new(grid, "pp", json_integer((json_int_t)sch->mesh.size[GS_DIM_PP]));
    json_object_set_new(grid, "tp", json_integer((json_int_t)sch->mesh.size[GS_DIM_TP]));
    json_object_set_new(doc, "grid", grid);
    json_object_set_new(doc, "microbatches", json_integer((json_int_t)sch->microbatches));
    json_object_set_new(doc, "exact", json_boolean(sch->exact));
    json_object_set_new(doc, "validated", json_string(full_validation ? "full" : "structure"));
    if (identical >= 0)
        json_object_set_new(doc, "identical_to_built", json_boolean(identical));
    json_t *ranks = json_array();
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        rank_summary s;
        summarize(r, &s);
        total += r->nevents;
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer((json_int_t)r->rank));
        json_object_set_new(o, "class_size", json_integer((json_int_t)r->class_size));
        json_object_set_new(o, "stage", json_integer((json_int_t)r->stage));
        json_object_set_new(o, "events", json_integer((json_int_t)r->nevents));
        json_t *bk = json_object();
        for (int k = 0; k < KIND_COLS; k++)
            json_object_set_new(bk, kind_keys[k], json_integer((json_int_t)s.by_kind[k]));
        json_object_set_new(o, "events_by_kind", bk);
        json_t *bs = json_object();
        for (int k = 0; k < GS_STREAM_COUNT; k++)
            json_object_set_new(bs, gs_stream_name((gs_stream)k), json_integer((json_int_t)s.by_stream[k]));
        json_object_set_new(o, "events_by_stream", bs);
        json_object_set_new(o, "tensors", json_integer((json_int_t)r->ntensors));
        json_object_set_new(o, "peak_bytes", json_integer((json_int_t)s.peak_bytes));
        json_object_set_new(o, "sent_bytes", json_integer((json_int_t)s.sent_bytes));
        json_array_append_new(ranks, o);
    }
    json_object_set_new(doc, "events", json_integer((json_int_t)total));
    json_object_set_new(doc, "ranks", ranks);
    return doc;
}

/* The person-readable listing: one line per event, in list order, with names for everything. */
static gs_status dump_list(const gs_schedule *sch, FILE *f, gs_error *err)
{
    char name[GS_EVENT_NAME_BYTES], dep[GS_EVENT_NAME_BYTES], b1[GS_FMT_BYTES];
    for (size_t i = 0; i < sch->nranks; i++) {
        const gs_rank_events *r = &sch->ranks[i];
        fprintf(f, "# rank %" PRIu64 " (stage %" PRIu64 ", stands for %" PRIu64 " rank%s): %zu events\n", r->rank,
                r->stage, r->class_size, r->class_size == 1 ? "" : "s", r->nevents);
        fprintf(f, "%7s  %-30s %-8s %-34s %-12s %s\n", "#", "event", "stream", "what", "size", "after");
        for (size_t k = 0; k < r->nevents; k++) {
            const gs_event *e = &r->events[k];
            char what[64], size[48];
            gs_event_name(r, e, name, sizeof name);
            switch ((gs_event_kind)e->kind) {
            case GS_EV_COMPUTE:
                if (e->gemm_m)
                    snprintf(what, sizeof what, "%s gemm %ux%ux%u%s", gs_op_name((gs_op)e->op), e->gemm_m, e->gemm_n,
                             e->gemm_k, e->gemm_batch > 1 ? " batched" : "");
                else
                    snprintf(what, sizeof what, "%s", gs_op_name((gs_op)e->op));
                if (e->flops >= 1e9)
                    snprintf(size, sizeof size, "%.1f GFLOP", e->flops / 1e9);
                else
                    snprintf(size, sizeof size, "%s", gs_fmt_bytes(e->bytes, b1, sizeof b1));
                break;
            case GS_EV_COLLECTIVE:
                snprintf(what, sizeof what, "%s %s#%" PRIu64 " of %" PRIu64, gs_coll_op_name((gs_coll_op)e->op),
                         gs_group_kind_name((gs_group_kind)e->group), e->peer, e->group_size);
                snprintf(size, sizeof size, "%s", gs_fmt_bytes(e->bytes, b1, sizeof b1));
                break;
            case GS_EV_SEND:
            case GS_EV_RECV:
                snprintf(what, sizeof what, "%s rank %" PRIu64, e->kind == GS_EV_SEND ? "send to" : "recv from",
                         e->peer);
                snprintf(size, sizeof size, "%s", gs_fmt_bytes(e->bytes, b1, sizeof b1));
                break;
            default:
                snprintf(what, sizeof what, "%s", gs_event_kind_name((gs_event_kind)e->kind));
                snprintf(size, sizeof size, "%s", gs_fmt_bytes(e->bytes, b1, sizeof b1));
                break;
            }
            fprintf(f, "%7zu  %-30s %-8s %-34s %-12s ", k, name, gs_stream_name((gs_stream)e->stream), what, size);
            const uint32_t *deps = gs_event_list(r, e, GS_LINK_DEPS);
            if (!e->nlinks[GS_LINK_DEPS])
                fputc('-', f);
            for (uint16_t d = 0; d < e->nlinks[GS_LINK_DEPS]; d++) {
                gs_event_name(r, &r->events[deps[d]], dep, sizeof dep);
                fprintf(f, "%s%s", d ? ", " : "", dep);
            }
            fputc('\n', f);
        }
    }
    if (ferror(f))
        return gs_error_set(err, GS_ERR_IO, "write error");
    return GS_OK;
}

static gs_status write_dump(const gs_schedule *sch, const char *target, int json, gs_error *err)
{
    int to_stdout = strcmp(target, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(target, "w");
    if (!f)
        return gs_error_set(err, GS_ERR_IO, "cannot write %s: %s", target, strerror(errno));
    gs_status rc = json == 2 ? dump_list(sch, f, err)
                   : json ? gs_schedule_dump_json(sch, f, err) : gs_schedule_dump(sch, f, err);
    if (to_stdout) {
        if (fflush(f) != 0 && rc == GS_OK)
            rc = gs_error_set(err, GS_ERR_IO, "writing the dump to stdout: %s", strerror(errno));
    } else if (fclose(f) != 0 && rc == GS_OK) {
        rc = gs_error_set(err, GS_ERR_IO, "cannot write %s: %s", target, strerror(errno));
    }
    if (rc != GS_OK && !to_stdout)
        gs_error_prefix(err, "%s", target);
    return rc;
}

gs_status gs_cmd_schedule(int argc, char **argv, gs_error *err)
{
    static const struct option opts[] = {
        {"exact", no_argument, NULL, 'e'},       {"dump", required_argument, NULL, 'd'},
        {"format", required_argument, NULL, 'f'}, {"rank", required_argument, NULL, 'r'},
        {"load", required_argument, NULL, 'l'},  {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    int exact = -1, json = 0, dump_json = 0, c;
    const char *dump = NULL, *load = NULL, *rank_arg = NULL;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': exact = 1; break;
        case 'd': dump = optarg; break;
        case 'f':
            if (strcmp(optarg, "text") == 0)
                dump_json = 0;
            else if (strcmp(optarg, "json") == 0)
                dump_json = 1;
            else if (strcmp(optarg, "list") == 0)
                dump_json = 2;
            else
                return gs_error_set(err, GS_ERR_INPUT, "--format: found '%s', expected text, json or list\nusage: %s", optarg,
                                    usage);
            break;
        case 'r': rank_arg = optarg; break;
        case 'l': load = optarg; break;
        case 'j': json = 1; break;
        default:
            return gs_cli_bad_option(argv[optind - 1], opts, "", usage, err);
        }
    }
    const char *path = NULL;
    gs_status rc;
    if (optind == argc && load) {
        path = NULL;
    } else if ((rc = gs_cli_one_positional(argc, argv, optind, usage, &path, err)) != GS_OK) {
        return rc;
    }
    if (dump && strcmp(dump, "-") == 0 && json)
        return gs_error_set(err, GS_ERR_INPUT, "--json and --dump - both write to stdout: pick one\nusage: %s", usage);
    uint64_t want_rank = 0;
    if (rank_arg) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(rank_arg, &end, 10);
        if (!*rank_arg || *end || errno || rank_arg[0] == '-')
            return gs_error_set(err, GS_ERR_INPUT, "--rank: found '%s', expected a rank number\nusage: %s", rank_arg,
                                usage);
        want_rank = v;
    }

    gs_schedule *loaded = NULL, *built = NULL;
    json_t *doc = NULL;
    const char *note = NULL;
    int identical = -1;
    if (load) {
        FILE *f = NULL;
        /* a dump of 10^8 events takes a few GB: 16 GiB bounds what is read */
        if ((rc = gs_input_open(load, "schedule dump", UINT64_C(16) << 30, &f, NULL, err)) != GS_OK)
            goto out;
        rc = gs_schedule_load(f, load, &loaded, err);
        fclose(f);
        if (rc != GS_OK)
            goto out;
        if (gs_schedule_validate_structure(loaded, err) != GS_OK) {
            gs_error_prefix(err, "%s: the loaded schedule is invalid", load);
            rc = GS_ERR_INPUT; /* a bad file: exit 2 */
            goto out;
        }
    }
    if (path) {
        gs_scenario s;
        gs_mesh mesh;
        if ((rc = gs_cli_load(path, &s, &mesh, err)) != GS_OK)
            goto out;
        int ex = exact >= 0 ? exact : loaded ? loaded->exact : 0;
        if ((rc = gs_schedule_build(&s, &mesh, ex, &built, err)) != GS_OK)
            goto out;
        if (gs_schedule_validate(built, &s, err) != GS_OK) {
            gs_error_prefix(err, "%s: the built schedule is invalid", path);
            rc = GS_ERR_RUNTIME;
            goto out;
        }
        if (loaded) {
            char why[512];
            if (gs_schedule_diff(built, loaded, why, sizeof why) != 0) {
                rc = gs_error_set(err, GS_ERR_RUNTIME, "%s differs from the schedule built from %s: %s (built vs loaded)",
                                  load, path, why);
                goto out;
            }
            note = "loaded schedule is identical to the built one";
            identical = 1;
        }
    }
    const gs_schedule *sch = loaded ? loaded : built;
    gs_schedule view;
    if (rank_arg) {
        const gs_rank_events *r = gs_schedule_find_rank(sch, want_rank);
        if (!r) {
            char list[256];
            format_ranks(sch, list, sizeof list);
            rc = gs_error_set(err, GS_ERR_INPUT, "--rank %" PRIu64 ": not in the schedule, which holds rank%s %s%s",
                              want_rank, sch->nranks == 1 ? "" : "s", list,
                              sch->exact ? "" : " (one representative per class; --exact builds every rank)");
            goto out;
        }
        view = *sch;
        view.ranks = (gs_rank_events *)r;
        view.nranks = 1;
        sch = &view;
    }
    if (dump && (rc = write_dump(sch, dump, dump_json, err)) != GS_OK)
        goto out;
    if (dump && strcmp(dump, "-") == 0) {
        if (note)
            fprintf(stderr, "gridstep: %s\n", note);
        rc = GS_OK;
        goto out;
    }
    if (json) {
        doc = summary_json(sch, path != NULL, identical);
        rc = doc ? gs_cli_json_print(doc, err) : gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    } else {
        rc = print_summary(sch, path != NULL, note);
        if (rc != GS_OK)
            gs_error_set(err, rc, "out of memory printing the summary");
    }
out:
    json_decref(doc);
    gs_schedule_destroy(loaded);
    gs_schedule_destroy(built);
    return rc;
}
