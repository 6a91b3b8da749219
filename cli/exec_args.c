/* The options of `gridstep exec` and `gridstep compare` and the environment they read: the test
 * hook GRIDSTEP_FAULT, the driver module's path GRIDSTEP_MODULE_PATH, the drivers' settings and
 * GRIDSTEP_P2P_GROUPS, passed down in gs_exec_opts (library code reads no environment). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/exec_cmd.h"
#include "exec/driver.h"
#include "exec/exec.h"

static gs_status parse_u64(const char *opt, const char *arg, uint64_t *out, gs_error *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || *end || arg[0] == '-' || v == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a positive integer", opt, arg);
    *out = v;
    return GS_OK;
}

/* opt's argument: a finite number in (lo, hi]. */
static gs_status parse_range(const char *opt, const char *arg, double lo, double hi, double *out, gs_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || !(v > lo) || !(v <= hi))
        return gs_error_set(err, GS_ERR_INPUT, "%s: found '%s', expected a finite number in (%g, %g]", opt, arg, lo,
                            hi);
    *out = v;
    return GS_OK;
}

/* The test hook GRIDSTEP_FAULT=KIND:RANK:EVENT (KIND fail, stall or die); NULL or "": none. */
static gs_status parse_fault(const char *spec, gs_exec_opts *o, gs_error *err)
{
    if (!spec || !*spec)
        return GS_OK;
    static const struct { const char *name; gs_fault_kind kind; } kinds[] = {
        {"fail:", GS_FAULT_FAIL}, {"stall:", GS_FAULT_STALL}, {"die:", GS_FAULT_DIE}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].name);
        if (strncmp(spec, kinds[i].name, n) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long r = strtoull(spec + n, &end, 10);
        if (errno || end == spec + n || spec[n] == '-' || *end != ':' || !end[1])
            break;
        o->fail_kind = kinds[i].kind;
        o->fail_rank = r;
        o->fail_event = end + 1;
        return GS_OK;
    }
    return gs_error_set(err, GS_ERR_INPUT, "GRIDSTEP_FAULT: found '%s', expected fail|stall|die:RANK:EVENT", spec);
}

static const struct option opts[] = {
    {"driver", required_argument, NULL, 'd'}, {"steps", required_argument, NULL, 'n'},
    {"json", no_argument, NULL, 'j'},         {"trace", required_argument, NULL, 't'},
    {"seed", required_argument, NULL, 's'},   {"lr", required_argument, NULL, 'l'},
    {"timeout", required_argument, NULL, 'T'}, {"fail-event", required_argument, NULL, 'F'},
    {"fail-rank", required_argument, NULL, 'R'}, {"save", required_argument, NULL, 'S'},
    {"load", required_argument, NULL, 'L'},       {"calib", required_argument, NULL, 'C'},
    {"adam-eps", required_argument, NULL, 'A'},   {"save-every", required_argument, NULL, 'E'},
    {"save-full", required_argument, NULL, 'U'}, {"mode", required_argument, NULL, 'M'},
    {"force", no_argument, NULL, 'f'},           {"allow-nonfinite", no_argument, NULL, 'N'},
    {"quiet", no_argument, NULL, 'q'},
    {NULL, 0, NULL, 0},
};

/* 1 when option ch (an opts val) is one of the command's: --trace, --save, --load, --save-every,
 * --save-full, --force and --allow-nonfinite are exec's only, --calib and --mode compare's. */
static int option_of(int ch, int compare)
{
    switch (ch) {
    case 't': case 'S': case 'L': case 'E': case 'U': case 'f': case 'N': return !compare;
    case 'C': case 'M': return compare;
    case 'd': case 'n': case 'j': case 'q': case 's': case 'A': case 'l': case 'T': case 'F': case 'R': return 1;
    default: return 0;
    }
}

/* The usage error of an option the command lacks, or one missing its value ("exec FILE --steps"). */
static gs_status bad_option(int ch, char **argv, int compare, const char *usage, gs_error *err)
{
    if (ch == '?' || ch == ':')
        return gs_cli_bad_option(argv[optind - 1], opts, "", usage, err);
    for (const struct option *o = opts; o->name; o++) /* an option of the other command */
        if (o->val == ch)
            return gs_error_set(err, GS_ERR_INPUT, "--%s is an option of gridstep %s, not of %s\nusage: %s",
                                o->name, compare ? "exec" : "compare", compare ? "compare" : "exec", usage);
    return gs_error_set(err, GS_ERR_INPUT, "unknown option '%s'\nusage: %s", argv[optind - 1], usage);
}

/* Option ch of the command, with its value optarg, into a. */
static gs_status take_option(int ch, gs__exec_args *a, const char *usage, gs_error *err)
{
    gs_status rc = GS_OK;
    double x;
    switch (ch) {
    case 'd': a->driver = optarg; break;
    case 'n': rc = parse_u64("--steps", optarg, &a->steps, err); break;
    case 'j': a->json = 1; break;
    case 'q': a->quiet = 1; break;
    case 't': a->trace = optarg; break;
    case 's': rc = parse_u64("--seed", optarg, &a->o.train.seed, err); break;
    case 'S': a->save = optarg; break;
    case 'L': a->load = optarg; break;
    case 'A':
        if ((rc = parse_range("--adam-eps", optarg, 0, 1, &x, err)) == GS_OK)
            a->o.train.eps = (float)x;
        break;
    case 'E': rc = parse_u64("--save-every", optarg, &a->save_every, err); break;
    case 'U': a->save_full = optarg; break;
    case 'f': a->o.ckpt_force = 1; break;
    case 'N': a->allow_nonfinite = 1; break;
    case 'l':
        if ((rc = parse_range("--lr", optarg, 0, 100, &x, err)) == GS_OK)
            a->o.train.lr = (float)x;
        break;
    case 'T': rc = parse_range("--timeout", optarg, 0, GS_EXEC_TIMEOUT_MAX_S, &a->o.timeout_s, err); break;
    case 'F': a->o.fail_event = optarg; break;
    case 'C': a->calib = optarg; break;
    case 'M':
        if (strcmp(optarg, "analytic") == 0 || strcmp(optarg, "flow") == 0)
            a->flow = strcmp(optarg, "flow") == 0;
        else
            rc = gs_error_set(err, GS_ERR_INPUT, "--mode: found '%s', expected analytic or flow\nusage: %s", optarg,
                              usage);
        break;
    case 'R': {
        char *end;
        errno = 0;
        a->o.fail_rank = strtoull(optarg, &end, 10);
        if (errno || *end || optarg[0] == '-')
            rc = gs_error_set(err, GS_ERR_INPUT, "--fail-rank: found '%s', expected a rank", optarg);
        break;
    }
    }
    return rc;
}

gs_status gs__exec_parse(int argc, char **argv, int compare, gs__exec_args *a, gs_error *err)
{
    const char *usage = compare ? gs_cmd_compare_usage : gs_cmd_exec_usage;
    memset(a, 0, sizeof *a);
    gs_exec_opts_defaults(&a->o);
    a->steps = compare ? 2 : 1;
    a->driver = "host";
    int c;
    gs_status rc = GS_OK;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && rc == GS_OK) {
        if (!option_of(c, compare))
            return bad_option(c, argv, compare, usage, err);
        rc = take_option(c, a, usage, err);
    }
    if (rc != GS_OK)
        return rc;
    if (a->save_every && !a->save)
        return gs_error_set(err, GS_ERR_INPUT, "--save-every needs --save DIR\nusage: %s", usage);
    a->o.check_save = a->save; /* checked before the first step */
    a->o.check_save_full = a->save_full;
    if (a->o.ckpt_force && !a->save && !a->save_full)
        return gs_error_set(err, GS_ERR_INPUT, "--force needs --save DIR or --save-full FILE\nusage: %s", usage);
    if (!compare && (rc = parse_fault(getenv("GRIDSTEP_FAULT"), &a->o, err)) != GS_OK)
        return rc;
    if ((rc = gs_driver_load(a->driver, getenv("GRIDSTEP_MODULE_PATH"), &a->o.driver, err)) != GS_OK)
        return rc;
    /* the environment's choices, passed down (library code reads none) */
    a->o.driver_set = gs_cli_driver_settings();
    const char *pg = getenv("GRIDSTEP_P2P_GROUPS");
    if (pg && *pg && strcmp(pg, "0") != 0 && strcmp(pg, "1") != 0)
        return gs_error_set(err, GS_ERR_INPUT, "exec: GRIDSTEP_P2P_GROUPS is '%s', expected 0 or 1", pg);
    a->o.train.p2p_groups = !(pg && strcmp(pg, "0") == 0);
    return gs_cli_one_positional(argc, argv, optind, usage, &a->path, err);
}
