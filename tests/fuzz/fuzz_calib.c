/* libFuzzer harness for the calibration file loader (gs_calib_load_string, the text behind
 * `gridstep sim --calib`): a loaded calibration is applied to a compute model and a topology.
 * Build and run with `make fuzz` (see tests/fuzz/fuzz.sh). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/status.h"
#include "sim/calib_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs_calib c;
    gs_error err;
    gs_error_init(&err);
    if (gs_calib_load_string((const char *)data, size, "fuzz.json", &c, &err) != GS_OK)
        return 0;
    gs_compute_model cm;
    gs_topo topo;
    memset(&cm, 0, sizeof cm);
    memset(&topo, 0, sizeof topo);
    topo.nic_bw = 1e10;
    topo.nic_line_bw = 1.25e10;
    gs_calib_apply(&c, 8, &cm, &topo); /* 8 ranks: exercises launch_s_by_ranks interpolation */
    return 0;
}
