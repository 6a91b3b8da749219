/* libFuzzer harness for the schedule dump loader (gs_schedule_load): the input is a dump; a
 * loaded schedule goes through the structural validation and is dumped again, and the second
 * load must equal the first. Build and run with `make fuzz` (see tests/fuzz/fuzz.sh). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/schedule.h"
#include "engine/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    gs_error err;
    gs_error_init(&err);
    gs_schedule *sch = NULL, *again = NULL;
    char *text = NULL;
    size_t len = 0;
    gs_status st = gs_schedule_load(f, "fuzz.sched", &sch, &err);
    fclose(f);
    if (st != GS_OK)
        goto out;
    (void)gs_schedule_validate_structure(sch, &err);
    FILE *m = open_memstream(&text, &len);
    if (!m)
        goto out;
    st = gs_schedule_dump(sch, m, &err);
    fclose(m);
    if (st != GS_OK)
        goto out;
    f = fmemopen(text, len, "r");
    if (!f)
        goto out;
    st = gs_schedule_load(f, "fuzz-again.sched", &again, &err);
    fclose(f);
    if (st != GS_OK || !gs_schedule_equal(sch, again))
        abort(); /* load(dump(x)) must give x back */
out:
    free(text);
    gs_schedule_destroy(again);
    gs_schedule_destroy(sch);
    return 0;
}
