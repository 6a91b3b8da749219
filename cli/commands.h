/* The gridstep command table: one entry per subcommand, each implemented in cli/cmd_<name>.c.
 *
 * Ownership: the table is static const in cli/main.c; commands own nothing beyond their run. */
#ifndef GS_CLI_COMMANDS_H
#define GS_CLI_COMMANDS_H

#include "engine/status.h"

typedef struct gs_command {
    const char *name;    /* "mem" */
    const char *summary; /* one line for `gridstep --help` */
    const char *usage;   /* "gridstep mem [--json] [--explain] SCENARIO.yaml" */
    const char *help;    /* full text for `gridstep help mem`: options, examples, what it prints */
    /* argv[0] is the command name; getopt state is reset before the call. Writes results to
     * stdout, warnings to stderr; returns a status (main maps it to the exit code). */
    gs_status (*run)(int argc, char **argv, gs_error *err);
} gs_command;

gs_status gs_cmd_presets(int argc, char **argv, gs_error *err);
gs_status gs_cmd_mesh(int argc, char **argv, gs_error *err);
gs_status gs_cmd_mem(int argc, char **argv, gs_error *err);
gs_status gs_cmd_sim(int argc, char **argv, gs_error *err);
gs_status gs_cmd_schedule(int argc, char **argv, gs_error *err);
gs_status gs_cmd_coll(int argc, char **argv, gs_error *err);
gs_status gs_cmd_validate(int argc, char **argv, gs_error *err);
gs_status gs_cmd_plan(int argc, char **argv, gs_error *err);
gs_status gs_cmd_sweep(int argc, char **argv, gs_error *err);
gs_status gs_cmd_merge(int argc, char **argv, gs_error *err);
gs_status gs_cmd_exec(int argc, char **argv, gs_error *err);
gs_status gs_cmd_compare(int argc, char **argv, gs_error *err);
gs_status gs_cmd_calibrate(int argc, char **argv, gs_error *err);
gs_status gs_cmd_diagnose(int argc, char **argv, gs_error *err);

extern const char gs_cmd_presets_help[];
extern const char gs_cmd_mesh_help[];
extern const char gs_cmd_mem_help[];
extern const char gs_cmd_sim_help[];
/* exec's and compare's usage lines, shared by their errors and the command table */
extern const char gs_cmd_exec_usage[];
extern const char gs_cmd_compare_usage[];
extern const char gs_cmd_schedule_help[];
extern const char gs_cmd_coll_help[];
extern const char gs_cmd_validate_help[];
extern const char gs_cmd_plan_help[];
extern const char gs_cmd_sweep_help[];
extern const char gs_cmd_merge_help[];
extern const char gs_cmd_exec_help[];
extern const char gs_cmd_compare_help[];
extern const char gs_cmd_calibrate_help[];
extern const char gs_cmd_diagnose_help[];

#endif
