/* Lookups in Megatron-LM's argument table (engine/megatron_args.h). */
#include "engine/megatron_args.h"

#include <string.h>

#include "engine/hardware.h"

const gs__mg_arg *gs__mg_arg_find(const char *name, size_t len)
{
    size_t lo = 0, hi = gs__mg_nargs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = gs__mg_args[mid].name;
        int c = strncmp(m, name, len);
        if (c == 0)
            c = m[len] != '\0'; /* m is longer: after name */
        if (c == 0)
            return &gs__mg_args[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const gs__mg_arg *gs__mg_arg_by_dest(const char *dest)
{
    for (size_t i = 0; i < gs__mg_nargs; i++)
        if (strcmp(gs__mg_args[i].dest, dest) == 0)
            return &gs__mg_args[i];
    return NULL;
}

const char *gs__mg_arg_nearest(const char *name)
{
    const char *best = NULL;
    size_t len = strlen(name), limit = len / 3 > 2 ? len / 3 : 2, best_d = limit + 1;
    for (size_t i = 0; i < gs__mg_nargs; i++) {
        /* only a name within the limit and closer than the best so far matters */
        size_t d = gs_edit_distance_max(name, gs__mg_args[i].name, best_d - 1);
        if (d < best_d)
            best_d = d, best = gs__mg_args[i].name;
    }
    return best;
}
