/* libFuzzer harness for the launch-configuration importers: the input is tried as Megatron-LM
 * flags (a NUL-terminated copy, as --from-megatron passes them; once with the model from the
 * flags, once with a preset), as an accelerate config YAML and as a torchtitan train config (TOML,
 * with and without --nodes); an imported scenario goes on to the
 * mesh checks (the ledger is fuzz_scenario's). Every importer must refuse garbage with a status,
 * never crash, hang or read out of bounds. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/scenario.h"
#include "engine/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void follow(const gs_scenario *s)
{
    gs_mesh mesh;
    gs_diag w;
    gs_error err;
    gs_error_init(&err);
    gs_diag_init(&w);
    gs_scenario_mesh(s, &mesh, &w, &err);
    gs_diag_fini(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gs_scenario s;
    gs_diag ignored;
    gs_error err;
    gs_error_init(&err);
    for (int m = 0; m < 2; m++) {
        gs_import_opts o;
        gs_import_opts_init(&o);
        o.cluster = "dgx-a100-80g";
        o.model = m ? "llama2-7b" : NULL;
        gs_diag_init(&ignored);
        if (gs_import_megatron_args(text, NULL, &o, &s, &ignored, &err) == GS_OK)
            follow(&s);
        gs_diag_fini(&ignored);
    }
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-a100-80g";
    o.model = "llama2-7b";
    gs_diag_init(&ignored);
    if (gs_import_accelerate_string((const char *)data, size, "fuzz.yaml", &o, &s, &ignored, &err) == GS_OK)
        follow(&s);
    gs_diag_fini(&ignored);
    for (uint64_t nodes = 0; nodes < 2; nodes++) {
        gs_import_opts_init(&o);
        o.cluster = "dgx-h100";
        o.nodes = nodes;
        gs_diag_init(&ignored);
        if (gs_import_torchtitan_string((const char *)data, size, "fuzz.toml", &o, &s, &ignored, &err) == GS_OK)
            follow(&s);
        gs_diag_fini(&ignored);
    }
    /* the first line's words as torchtitan's command-line overrides of the rest */
    char *nl = strchr(text, '\n');
    if (nl) {
        *nl = '\0';
        const char *args[32];
        size_t nargs = 0;
        for (char *w = strtok(text, " "); w && nargs < 32; w = strtok(NULL, " "))
            args[nargs++] = w;
        gs_import_opts_init(&o);
        o.cluster = "dgx-h100";
        o.nodes = 1;
        gs_diag_init(&ignored);
        size_t off = (size_t)(nl - text) + 1;
        if (gs_import_torchtitan_command((const char *)data + off, size - off, "fuzz.toml", args, nargs, &o, &s,
                                         &ignored, &err) == GS_OK)
            follow(&s);
        gs_diag_fini(&ignored);
    }
    free(text);
    return 0;
}
