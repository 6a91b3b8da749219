/* `gridstep merge`: joins the --shard pieces of a sweep (CSV or JSON) or a plan (JSON) into the
 * output the serial run prints. */
#include "cli/cli_common.h"
#include "cli/commands.h"

const char gs_cmd_merge_help[] = "TODO\n";

gs_status gs_cmd_merge(int argc, char **argv, gs_error *err)
{
    (void)argc;
    (void)argv;
    return gs_error_set(err, GS_ERR_UNSUPPORTED, "merge: not yet");
}
