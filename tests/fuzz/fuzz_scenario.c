/* libFuzzer harness for the YAML scenario loader: the input is scenario text; a loaded scenario
 * goes on to the mesh checks and, when its grid is small, the memory ledger. Build and run with
 * `make fuzz` (see tests/fuzz/fuzz.sh). */
#include <stddef.h>
#include <stdint.h>

#include "engine/ledger.h"
#include "engine/scenario.h"
#include "engine/status.h"

/* Grids above this many ranks skip the ledger (it costs time per rank class, not per input). */
#define FUZZ_LEDGER_MAX_WORLD 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    if (gs_scenario_load_string((const char *)data, size, "fuzz.yaml", &s, &err) != GS_OK)
        return 0;
    gs_mesh mesh;
    gs_diag warnings;
    gs_diag_init(&warnings);
    if (gs_scenario_mesh(&s, &mesh, &warnings, &err) == GS_OK && mesh.world <= FUZZ_LEDGER_MAX_WORLD) {
        gs_ledger *ledger = NULL;
        if (gs_ledger_create(&s, &mesh, &ledger, &err) == GS_OK)
            gs_ledger_destroy(ledger);
    }
    gs_diag_fini(&warnings);
    return 0;
}
