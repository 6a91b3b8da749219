/* libFuzzer harness for the calibration file loader (gs_calib_load, `gridstep sim --calib`): the
 * input is written to a temporary file, loaded, and applied to a compute model and a topology.
 * Build and run with `make fuzz` (see tests/fuzz/fuzz.sh). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/status.h"
#include "sim/calib_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64]; /* the temporary file, one per fuzzing process */

static void remove_temp(void)
{
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/gs-fuzz-calib.%ld.json", dir && *dir ? dir : "/tmp", (long)getpid());
        atexit(remove_temp);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t wrote = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || wrote != size)
        return 0;
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    if (gs_calib_load(path, &c, &err) == GS_OK) {
        gs_compute_model cm;
        gs_topo topo;
        memset(&cm, 0, sizeof cm);
        memset(&topo, 0, sizeof topo);
        topo.nic_bw = 1e10;
        topo.nic_line_bw = 1.25e10;
        gs_calib_apply(&c, &cm, &topo);
    }
    return 0;
}
