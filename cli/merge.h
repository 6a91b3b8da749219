/* Joining --shard pieces held in memory into the serial run's output: the code path of
 * `gridstep merge` (cli/cmd_merge.c), also used by the MPI split (cli/mpi_split.c).
 *
 * Ownership: the pieces and their names are borrowed; nothing is kept after the call. */
#ifndef GS_CLI_MERGE_H
#define GS_CLI_MERGE_H

#include <stddef.h>
#include <stdio.h>

#include "engine/status.h"

/* Joins n NUL-terminated pieces (all CSV sweep pieces, or all JSON sweep or plan pieces; the
 * first non-blank character '{' marks JSON) and writes the merged output to out. names[i]
 * names piece i in error messages. */
gs_status gs_merge_pieces(char **text, char *const *names, size_t n, FILE *out, gs_error *err);

#endif
