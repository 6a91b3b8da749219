/* Driver modules: drivers that need libraries the gridstep binary must not link (CUDA, cuBLAS,
 * NCCL) are shared objects, gridstep-NAME.so, loaded with dlopen when a run asks for them. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/driver.h"

#ifndef GS_PKGLIBDIR
#define GS_PKGLIBDIR "/usr/local/lib/gridstep"
#endif

typedef const gs_driver_ops *(*module_entry)(void);

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Appends dir to the searched list (for the message) and returns 1 when dir/file exists. */
static int try_dir(const char *dir, size_t dlen, const char *file, char *path, size_t plen, char *tried,
                   size_t tlen)
{
    if (dlen == 0)
        return 0;
    size_t at = strlen(tried);
    snprintf(tried + at, tlen - at, "%s%.*s", at ? ", " : "", (int)dlen, dir);
    snprintf(path, plen, "%.*s/%s", (int)dlen, dir, file);
    return is_file(path);
}

/* The first existing gridstep-NAME.so on the search path, into path; 0 when none. */
static int find_module(const char *file, const char *env, char *path, size_t plen, char *tried, size_t tlen)
{
    if (env)
        for (const char *p = env; *p;) {
            const char *c = strchr(p, ':');
            size_t n = c ? (size_t)(c - p) : strlen(p);
            if (try_dir(p, n, file, path, plen, tried, tlen))
                return 1;
            p += n + (c ? 1 : 0);
        }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash && try_dir(exe, (size_t)(slash - exe), file, path, plen, tried, tlen))
            return 1;
    }
    return try_dir(GS_PKGLIBDIR, strlen(GS_PKGLIBDIR), file, path, plen, tried, tlen);
}

gs_status gs_driver_load(const char *name, const char *module_path, const gs_driver_ops **out, gs_error *err)
{
    *out = gs_driver_find(name);
    if (*out)
        return GS_OK;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return gs_error_set(err, GS_ERR_INPUT, "--driver: found '%s', expected host or cuda", name);
    if (strcmp(name, "cuda") != 0)
        return gs_error_set(err, GS_ERR_INPUT, "--driver: found '%s', expected host or cuda", name);
    char file[128], path[PATH_MAX + 160], tried[2048], sym[160];
    tried[0] = 0;
    snprintf(file, sizeof file, "gridstep-%s.so", name);
    if (!find_module(file, module_path, path, sizeof path, tried, sizeof tried))
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "driver %s: module %s not found (looked in %s); it is built when configure finds the "
                            "CUDA toolkit and NCCL (./configure --with-cuda --with-nccl), installed into %s, and "
                            "GRIDSTEP_MODULE_PATH adds directories",
                            name, file, tried, GS_PKGLIBDIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "driver %s: cannot load %s: %s (the module needs libcudart, libcublasLt and libnccl: "
                            "install them or add their directory to LD_LIBRARY_PATH)",
                            name, path, dlerror());
    snprintf(sym, sizeof sym, "gs_driver_%s_module_abi%d", name, GS_DRIVER_ABI);
    dlerror();
    module_entry entry;
    *(void **)&entry = dlsym(h, sym);
    const char *e = dlerror();
    if (e || !entry) {
        /* the first modules exported an unversioned entry */
        char old[160];
        snprintf(old, sizeof old, "gs_driver_%s_module", name);
        int other = dlsym(h, old) != NULL;
        gs_status rc = gs_error_set(err, GS_ERR_UNSUPPORTED,
                                    "driver %s: %s has no %s%s%s: it was built for another version of gridstep "
                                    "(driver table layout %d expected); rebuild it with this source tree or point "
                                    "GRIDSTEP_MODULE_PATH at the matching build",
                                    name, path, sym, other ? " (it has the older " : "", other ? "entry)" : "",
                                    GS_DRIVER_ABI);
        dlclose(h);
        return rc;
    }
    const gs_driver_ops *ops = entry();
    if (!ops || !ops->name || strcmp(ops->name, name) != 0) {
        dlclose(h);
        return gs_error_set(err, GS_ERR_UNSUPPORTED, "driver %s: %s returned no '%s' driver table", name, path, name);
    }
    *out = ops; /* the handle stays open: the table lives in the module */
    return GS_OK;
}
