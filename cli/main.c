/* gridstep main: the command table, --help/--version, and status -> exit code. The only place
 * that calls exit() or maps a gs_status to a message. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/backends.h"
#include "cli/commands.h"
#include "engine/status.h"

/* The command table: one row per subcommand, greppable, in the order --help lists them. */
static const gs_command commands[] = {
    {"mem", "memory and traffic ledgers per rank: will it fit, what will it cost to move",
     "gridstep mem [--json] [--explain] SCENARIO.yaml", gs_cmd_mem_help, gs_cmd_mem},
    {"sim", "simulate one training step: step time, tokens/s, MFU, exposed communication, bubble",
     "gridstep sim [--exact] [--mode analytic|flow] [--json] [--explain] [--calib FILE] [--trace FILE] [--stats] "
     "(SCENARIO.yaml | (--from-accelerate FILE | --from-torchtitan FILE | --from-megatron ARGS|@FILE) --cluster C [--model M] [--nodes N] "
     "[--global-batch B] [--micro B] [--print-scenario | --dump-scenario FILE])", gs_cmd_sim_help,
     gs_cmd_sim},
    {"exec", "run the step for real (CPU threads or GPUs): losses, measured step time, the sim's report",
     gs_cmd_exec_usage, gs_cmd_exec_help, gs_cmd_exec},
    {"compare", "sim vs exec on the same schedule: time per class of event and the error", gs_cmd_compare_usage,
     gs_cmd_compare_help, gs_cmd_compare},
    {"calibrate", "measure this machine through a driver, fit the sim's models, write a calibration file",
     "gridstep calibrate [--driver host|cuda] [--events] [--out FILE] [--quick] [--warm] [--plot PREFIX] [--quiet] "
     "[SCENARIO.yaml]",
     gs_cmd_calibrate_help, gs_cmd_calibrate},
    {"coll", "the simulator's nccl-tests: time, algbw, busbw of one collective per size",
     "gridstep coll --op OP --ranks N --cluster C [--nodes K] [-b MIN] [-e MAX] [-f FACTOR] "
     "[--algo ring|tree|nvls|pat] [--json]", gs_cmd_coll_help, gs_cmd_coll},
    {"validate", "simulate the published runs (scenarios with an expect: block) and compare",
     "gridstep validate [--json] [--exact] DIR|FILE...", gs_cmd_validate_help, gs_cmd_validate},
    {"plan", "every legal grid and strategy, ranked by simulated tokens/s, with why the winner wins",
     "gridstep plan (--model M --cluster C --nodes N | SCENARIO.yaml) [--global-batch B] [--top K] [--json] "
     "[--emit torchrun|accelerate|megatron|slurm] [--quiet] [constraints]", gs_cmd_plan_help, gs_cmd_plan},
    {"sweep", "one scenario over a grid of varied keys: a CSV/JSON row per point, curves via gnuplot",
     "gridstep sweep --vary KEY=V1,V2,...|A..B [--vary ...] [--csv|--json] [--out FILE] [--shard I/N] "
     "[--plot FILE.png|FILE.svg] [--mode analytic|flow] [--exact] [--threads N] [--quiet] SCENARIO.yaml", gs_cmd_sweep_help,
     gs_cmd_sweep},
    {"merge", "join the --shard pieces of a sweep or a plan into the serial run's output",
     "gridstep merge [--out FILE] [--plot FILE.png|FILE.svg] PIECE...", gs_cmd_merge_help, gs_cmd_merge},
    {"diagnose", "the seed's troubleshooting table against a scenario, each fix simulated on a copy",
     "gridstep diagnose [--json] [--full-step] [--state-dict full|sharded] [--host-memory-gb G] SCENARIO.yaml",
     gs_cmd_diagnose_help, gs_cmd_diagnose},
    {"mesh", "the DP x PP x TP grid: rank -> coordinates -> node, groups, launch configurations",
     "gridstep mesh [--json] [--all] [--emit torchrun|accelerate|megatron|slurm] SCENARIO.yaml", gs_cmd_mesh_help,
     gs_cmd_mesh},
    {"schedule", "one training step as a per-rank graph of compute and collective events",
     "gridstep schedule [--exact] [--dump FILE|-] [--format text|json|list] [--rank R] [--load FILE] [--json] "
     "[SCENARIO.yaml]", gs_cmd_schedule_help, gs_cmd_schedule},
    {"presets", "list the model, GPU, fabric, NIC and cluster presets with their numbers",
     "gridstep presets [--json] [models|gpus|fabrics|nics|clusters]", gs_cmd_presets_help,
     gs_cmd_presets},
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

static const gs_command *find_command(const char *name)
{
    for (size_t i = 0; i < ncommands; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_usage(FILE *f)
{
    fprintf(f,
            "gridstep %s: plan, simulate and run sharded LLM training steps on a DP x PP x TP grid\n"
            "\n"
            "usage: gridstep <command> [options] [scenario.yaml]\n"
            "       gridstep help <command>\n"
            "       gridstep --version\n"
            "\n"
            "commands:\n",
            PACKAGE_VERSION);
    for (size_t i = 0; i < ncommands; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nbackends (what plays a schedule):\n");
    for (size_t i = 0; i < gs_backend_count(); i++)
        fprintf(f, "  %-9s %s\n", gs_backend_at(i)->name, gs_backend_at(i)->description);
    fprintf(f,
            "\n"
            "A scenario is a YAML file naming a model, a cluster, a grid {dp, pp, tp}, a strategy\n"
            "and a batch; the shipped ones are in %s/scenarios. Start with:\n"
            "  gridstep mem --explain %s/scenarios/seed-70b-64xa100.yaml\n"
            "\n"
            "Units: bytes and seconds; GB = 10^9 B and GiB = 2^30 B, always said which.\n"
            "Exit codes: 0 ok, 1 runtime failure, 2 bad input or usage.\n"
            "See gridstep(1) for the scenario format.\n",
            GS_DATADIR, GS_DATADIR);
}

int main(int argc, char **argv)
{
    gs_error err;
    gs_error_init(&err);
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("gridstep %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            print_usage(stdout);
            return 0;
        }
        const gs_command *c = find_command(argv[2]);
        if (!c) {
            fprintf(stderr, "gridstep: unknown command '%s' (see gridstep --help)\n", argv[2]);
            return 2;
        }
        printf("usage: %s\n\n%s", c->usage, c->help);
        return 0;
    }
    const gs_command *c = find_command(cmd);
    if (!c) {
        fprintf(stderr, "gridstep: unknown command '%s' (see gridstep --help)\n", cmd);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\n%s", c->usage, c->help);
            return 0;
        }
    optind = 1;
    opterr = 0;
    gs_status st = c->run(argc - 1, argv + 1, &err);
    if (fflush(stdout) != 0 && st == GS_OK)
        st = gs_error_set(&err, GS_ERR_IO, "cannot write output");
    if (st != GS_OK) {
        fprintf(stderr, "gridstep %s: %s\n", cmd, err.msg[0] ? err.msg : gs_status_name(st));
        return gs_status_exit_code(st);
    }
    return 0;
}
