/* Reading the sim's calibration file and applying it to the compute model and the links. */
#include "sim/calib_file.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

enum { F_PEAK, F_GEMM, F_HBM, F_HBM_EFF, F_LAUNCH, F_OVERLAP, F_INTRA, F_NIC, F_COUNT };

typedef struct field {
    const char *section, *key;
    size_t offset;
    double lo, hi; /* accepted range (inclusive hi) */
    int lo_inclusive; /* 1: lo itself is accepted */
} field;

static const field fields[F_COUNT] = {
    {"compute", "peak_flops", offsetof(gs_calib, peak_flops), 0, 1e20, 0},
    {"compute", "gemm_efficiency", offsetof(gs_calib, gemm_efficiency), 0, 1, 0},
    {"compute", "hbm_bw", offsetof(gs_calib, hbm_bw), 0, 1e16, 0},
    {"compute", "hbm_efficiency", offsetof(gs_calib, hbm_efficiency), 0, 1, 0},
    {"compute", "launch_s", offsetof(gs_calib, launch_s), 0, 1, 0},
    {"compute", "overlap_slowdown", offsetof(gs_calib, overlap_slowdown), 1, 10, 1},
    {"links", "intra_bw", offsetof(gs_calib, intra_bw), 0, 1e16, 0},
    {"links", "nic_bw", offsetof(gs_calib, nic_bw), 0, 1e16, 0},
};

/* What a JSON value is, for "found X" in messages. */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    default: return "a number";
    }
}

static gs_status section(const char *path, json_t *root, const char *name, gs_calib *out, gs_error *err)
{
    json_t *obj = json_object_get(root, name);
    if (!obj)
        return GS_OK;
    if (!json_is_object(obj))
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected an object", path, name,
                            json_kind(obj));
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int f = -1;
        for (int i = 0; i < F_COUNT; i++)
            if (strcmp(fields[i].section, name) == 0 && strcmp(fields[i].key, key) == 0)
                f = i;
        if (f < 0) {
            char list[256] = "";
            for (int i = 0; i < F_COUNT; i++)
                if (strcmp(fields[i].section, name) == 0) {
                    strncat(list, list[0] ? ", " : "", sizeof list - strlen(list) - 1);
                    strncat(list, fields[i].key, sizeof list - strlen(list) - 1);
                }
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: unknown key, expected one of %s", path, name, key, list);
        }
        if (!json_is_number(v))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: found %s, expected a number", path, name, key,
                                json_kind(v));
        double x = json_number_value(v);
        int above_lo = fields[f].lo_inclusive ? x >= fields[f].lo : x > fields[f].lo;
        if (!above_lo || !(x <= fields[f].hi) || !isfinite(x))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: found %g, expected a number in %c%g, %g]", path, name,
                                key, x, fields[f].lo_inclusive ? '[' : '(', fields[f].lo, fields[f].hi);
        *(double *)((char *)out + fields[f].offset) = x;
        out->set |= 1u << f;
    }
    return GS_OK;
}

/* Checks the parsed document (root NULL: je says why it did not parse) and frees it. */
static gs_status load_root(json_t *root, const json_error_t *je_, const char *path, gs_calib *out, gs_error *err)
{
    const json_error_t je = *je_;
    memset(out, 0, sizeof *out);
    if (!root) {
        if (je.line <= 0)
            return gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path, je.text);
        return gs_error_set(err, GS_ERR_INPUT, "%s:%d:%d: JSON syntax error: %s", path, je.line, je.column, je.text);
    }
    gs_status rc = GS_OK;
    if (!json_is_object(root)) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%s: found %s at the top level, expected an object", path,
                          json_kind(root));
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "compute") && strcmp(key, "links") && strcmp(key, "machine") && strcmp(key, "date") &&
            strcmp(key, "driver") && strcmp(key, "fits") && strcmp(key, "measurements")) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: %s: unknown key, expected compute, links, machine, date, "
                              "driver, fits or measurements", path, key);
            goto out;
        }
    }
    if ((rc = section(path, root, "compute", out, err)) != GS_OK || (rc = section(path, root, "links", out, err)) != GS_OK)
        goto out;
out:
    json_decref(root);
    return rc;
}

gs_status gs_calib_load(const char *path, gs_calib *out, gs_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    return load_root(root, &je, path, out, err);
}

gs_status gs_calib_load_string(const char *text, size_t len, const char *path, gs_calib *out, gs_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    return load_root(root, &je, path ? path : "<calibration>", out, err);
}

void gs_calib_apply(const gs_calib *c, gs_compute_model *cm, gs_topo *topo)
{
    if (c->set & (1u << F_PEAK))
        cm->peak_flops = c->peak_flops;
    if (c->set & (1u << F_GEMM))
        cm->gemm_efficiency = c->gemm_efficiency;
    if (c->set & (1u << F_HBM))
        cm->hbm_bw = c->hbm_bw;
    if (c->set & (1u << F_HBM_EFF))
        cm->hbm_efficiency = c->hbm_efficiency;
    if (c->set & (1u << F_LAUNCH))
        cm->launch_s = c->launch_s;
    if (c->set & (1u << F_OVERLAP))
        cm->overlap_slowdown = c->overlap_slowdown;
    if (c->set & (1u << F_INTRA))
        topo->intra_bw = c->intra_bw;
    if (c->set & (1u << F_NIC)) {
        /* NCCL plans with the line rate: keep the measured NIC's line/achievable ratio */
        if (topo->nic_bw > 0)
            topo->nic_line_bw *= c->nic_bw / topo->nic_bw;
        topo->nic_bw = c->nic_bw;
    }
}
