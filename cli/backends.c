/* The backend table: greppable, no self-registration. */
#include "cli/backends.h"

#include <string.h>

#include "exec/exec.h"
#include "sim/sim.h"

static const gs_backend_ops *const backends[] = {
    &gs_sim_backend,
    &gs_exec_backend,
};

size_t gs_backend_count(void)
{
    return sizeof backends / sizeof backends[0];
}

const gs_backend_ops *gs_backend_at(size_t i)
{
    return i < gs_backend_count() ? backends[i] : NULL;
}

const gs_backend_ops *gs_backend_find(const char *name)
{
    for (size_t i = 0; i < gs_backend_count(); i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}
