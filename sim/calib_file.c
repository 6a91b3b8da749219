/* Reading the sim's calibration file and applying it to the compute model and the links. */
#include "sim/calib_file.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "sim/calib.h"
#include "engine/input_file.h"

enum { F_PEAK, F_GEMM, F_HBM, F_HBM_EFF, F_LAUNCH, F_OVERLAP, F_CORES, F_BACKGROUND, F_ATTN, F_BWD, F_ROPE, F_CONC, F_COLL_CPU, F_INTRA, F_NIC, F_COUNT };

typedef struct field {
    const char *section, *key;
    size_t offset;
    double lo, hi; /* accepted range (inclusive hi); rates and bandwidths start where a step
                      time stays a number a report can print (no 1e-300 B/s) */
    int lo_inclusive; /* 1: lo itself is accepted */
} field;

static const field fields[F_COUNT] = {
    {"compute", "peak_flops", offsetof(gs_calib, peak_flops), 1e6, 1e20, 0},
    {"compute", "gemm_efficiency", offsetof(gs_calib, gemm_efficiency), 1e-6, 1, 0},
    {"compute", "hbm_bw", offsetof(gs_calib, hbm_bw), 1e3, 1e16, 0},
    {"compute", "hbm_efficiency", offsetof(gs_calib, hbm_efficiency), 1e-6, 1, 0},
    {"compute", "launch_s", offsetof(gs_calib, launch_s), 0, 1, 0},
    {"compute", "overlap_slowdown", offsetof(gs_calib, overlap_slowdown), 1, 10, 1},
    {"compute", "cores", offsetof(gs_calib, cores), 0, 1e6, 0},
    {"compute", "background_load", offsetof(gs_calib, background_load), 0, 1e6, 1},
    {"compute", "attn_flops", offsetof(gs_calib, attn_flops), 1e6, 1e20, 0},
    {"compute", "gemm_bwd_factor", offsetof(gs_calib, gemm_bwd_factor), 0, 10, 0},
    {"compute", "qkv_rope_s_per_token", offsetof(gs_calib, qkv_rope_s), 0, 1, 1},
    {"compute", "concurrency_slowdown", offsetof(gs_calib, concurrency_slowdown), 0, 10, 1},
    {"compute", "collective_cpu_share", offsetof(gs_calib, coll_cpu_share), 0, 1, 1},
    {"links", "intra_bw", offsetof(gs_calib, intra_bw), 1e3, 1e16, 0},
    {"links", "nic_bw", offsetof(gs_calib, nic_bw), 1e3, 1e16, 0},
};

/* The nested objects each section accepts besides its numbers. */
static const char *const compute_objects[] = {"gemm_curve", "elementwise_bw", "launch_s_by_ranks",
                                              "elementwise_bw_bwd", "gemm_terms"};
#define N_COMPUTE_OBJECTS (sizeof compute_objects / sizeof compute_objects[0])
static const char *const link_objects[] = {"intra", "inter"};
static const char *const coll_keys[GS_COLL_COUNT] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast",
                                                     "all_to_all"};
static const struct {
    const char *name;
    gs_op op;
} elementwise[] = {{"adamw", GS_OP_OPTIMIZER}, {"rmsnorm", GS_OP_NORM}, {"swiglu", GS_OP_ACT}, {"add", GS_OP_COUNT},
                   {"xent", GS_OP_LOSS},        {"embed", GS_OP_EMBED}};
/* The backward events' kernels (elementwise_bw_bwd): the optimizer has no backward. */
static const char *const elementwise_bwd_names[] = {"rmsnorm", "swiglu", "xent", "embed"};

static const char *kind_of(const json_t *v)
{
    return json_is_object(v) ? "an object" : json_is_array(v) ? "a list" : json_is_string(v) ? "a string"
           : json_is_null(v) ? "null" : json_is_boolean(v) ? "a boolean" : "a number";
}

/* A number in (lo, hi] at `where` (for the message). */
static gs_status number(const char *path, const char *where, const json_t *v, double lo, double hi, double *out,
                        gs_error *err)
{
    if (!json_is_number(v))
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected a number", path, where, kind_of(v));
    double x = json_number_value(v);
    if (!(x > lo) || !(x <= hi) || !isfinite(x))
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %g, expected a number in (%g, %g]", path, where, x, lo,
                            hi);
    *out = x;
    return GS_OK;
}

static gs_status line(const char *path, const char *where, const json_t *o, int need_ranks, gs_coll_fit *out,
                      gs_error *err)
{
    char w[160];
    if (!json_is_object(o))
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected an object {%salpha_s, beta_bytes_per_s}",
                            path, where, kind_of(o), need_ranks ? "ranks, " : "");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (strcmp(key, "alpha_s") && strcmp(key, "beta_bytes_per_s") && (!need_ranks || strcmp(key, "ranks")))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: unknown key, expected %salpha_s or beta_bytes_per_s",
                                path, where, key, need_ranks ? "ranks, " : "");
    }
    static const char *const need[] = {"ranks", "alpha_s", "beta_bytes_per_s"};
    for (int i = need_ranks ? 0 : 1; i < 3; i++)
        if (!json_object_get(o, need[i]))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: missing", path, where, need[i]);
    gs_status rc;
    double r = 2;
    if (need_ranks) {
        snprintf(w, sizeof w, "%s.ranks", where);
        if ((rc = number(path, w, json_object_get(o, "ranks"), 1, 1e9, &r, err)) != GS_OK)
            return rc;
        if (r != floor(r))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %g, expected an integer >= 2", path, w, r);
    }
    out->nranks = (uint64_t)r;
    snprintf(w, sizeof w, "%s.alpha_s", where);
    /* a latency of exactly 0 is a legitimate fit */
    const json_t *a = json_object_get(o, "alpha_s");
    if (json_is_number(a) && json_number_value(a) == 0.0)
        out->alpha_s = 0.0;
    else if ((rc = number(path, w, a, 0, 10, &out->alpha_s, err)) != GS_OK)
        return rc;
    snprintf(w, sizeof w, "%s.beta_bytes_per_s", where);
    return number(path, w, json_object_get(o, "beta_bytes_per_s"), 1e3, 1e16, &out->beta_bytes_per_s, err);
}

static gs_status link_class(const char *path, const char *name, const json_t *o, gs_link_fits *out, gs_error *err)
{
    char where[96];
    if (!json_is_object(o))
        return gs_error_set(err, GS_ERR_INPUT, "%s: links.%s: found %s, expected an object", path, name, kind_of(o));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        gs_status rc;
        if (strcmp(key, "send_recv") == 0) {
            snprintf(where, sizeof where, "links.%s.send_recv", name);
            if ((rc = line(path, where, v, 0, &out->p2p, err)) != GS_OK)
                return rc;
            out->p2p.nranks = 2;
            out->set = 1;
            continue;
        }
        int op = -1;
        for (int i = 0; i < GS_COLL_COUNT; i++)
            if (strcmp(coll_keys[i], key) == 0)
                op = i;
        if (op < 0)
            return gs_error_set(err, GS_ERR_INPUT, "%s: links.%s.%s: unknown key, expected all_gather, reduce_scatter, "
                                "all_reduce, broadcast, all_to_all or send_recv", path, name, key);
        if (!json_is_array(v))
            return gs_error_set(err, GS_ERR_INPUT, "%s: links.%s.%s: found %s, expected a list of {ranks, alpha_s, "
                                "beta_bytes_per_s}", path, name, key, kind_of(v));
        size_t n = json_array_size(v);
        if (n > GS_COLL_FIT_SIZES)
            return gs_error_set(err, GS_ERR_INPUT, "%s: links.%s.%s: %zu group sizes, at most %d", path, name, key, n,
                                GS_COLL_FIT_SIZES);
        for (size_t i = 0; i < n; i++) {
            snprintf(where, sizeof where, "links.%s.%s[%zu]", name, key, i);
            gs_coll_fit f;
            if ((rc = line(path, where, json_array_get(v, i), 1, &f, err)) != GS_OK)
                return rc;
            if (i > 0 && f.nranks <= out->coll[op][i - 1].nranks)
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s.ranks: found %" PRIu64 ", expected ascending group sizes",
                                    path, where, f.nranks);
            out->coll[op][i] = f;
        }
        out->set = 1;
    }
    return GS_OK;
}

static gs_status gemm_curve(const char *path, const json_t *o, gs_calib *out, gs_error *err)
{
    if (!json_is_object(o))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve: found %s, expected an object {form, e_max, "
                            "f0_flops}", path, kind_of(o));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (strcmp(key, "form") && strcmp(key, "e_max") && strcmp(key, "f0_flops"))
            return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve.%s: unknown key, expected form, e_max or "
                                "f0_flops", path, key);
    }
    const json_t *form = json_object_get(o, "form");
    if (!form)
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve.form: missing", path);
    if (!json_is_string(form) || (strcmp(json_string_value(form), "hyperbolic") && strcmp(json_string_value(form), "exp")))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve.form: found %s, expected \"hyperbolic\" or "
                            "\"exp\"", path, json_is_string(form) ? json_string_value(form) : kind_of(form));
    out->gemm_form = strcmp(json_string_value(form), "exp") == 0 ? GS_GEMM_FORM_EXP : GS_GEMM_FORM_HYPERBOLIC;
    gs_status rc;
    if (!json_object_get(o, "e_max"))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve.e_max: missing", path);
    if (!json_object_get(o, "f0_flops"))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_curve.f0_flops: missing", path);
    if ((rc = number(path, "compute.gemm_curve.e_max", json_object_get(o, "e_max"), 1e-6, 1, &out->gemm_e_max, err)) ||
        (rc = number(path, "compute.gemm_curve.f0_flops", json_object_get(o, "f0_flops"), 0, 1e20, &out->gemm_f0_flops,
                     err)))
        return rc;
    out->gemm_curve = 1;
    return GS_OK;
}

static gs_status gemm_terms(const char *path, const json_t *o, gs_calib *out, gs_error *err)
{
    static const char *const keys[4] = {"s_per_flop", "s_per_kn", "s_per_mk", "s_per_call"};
    double *dst[4] = {&out->gemm_s_per_flop, &out->gemm_s_per_kn, &out->gemm_s_per_mk, &out->gemm_s_per_call};
    if (!json_is_object(o))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_terms: found %s, expected an object {s_per_flop, "
                            "s_per_kn, s_per_mk, s_per_call}", path, kind_of(o));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int known = 0;
        for (int i = 0; i < 4; i++)
            known |= strcmp(key, keys[i]) == 0;
        if (!known)
            return gs_error_set(err, GS_ERR_INPUT, "%s: compute.gemm_terms.%s: unknown key, expected s_per_flop, "
                                "s_per_kn, s_per_mk or s_per_call", path, key);
    }
    for (int i = 0; i < 4; i++) {
        char where[64];
        snprintf(where, sizeof where, "compute.gemm_terms.%s", keys[i]);
        const json_t *x = json_object_get(o, keys[i]);
        if (!x)
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: missing", path, where);
        if (!json_is_number(x))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected a number", path, where, kind_of(x));
        double y = json_number_value(x);
        /* the FLOP term must be positive; the others may be 0 (a dropped term) */
        if (!isfinite(y) || y < 0 || (i == 0 && y <= 0) || y > 1)
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %g, expected a number in %s0, 1]", path, where, y,
                                i == 0 ? "(" : "[");
        *dst[i] = y;
    }
    out->gemm_terms = 1;
    return GS_OK;
}

/* compute.elementwise_bw (bwd 0) or compute.elementwise_bw_bwd (bwd 1). "add" (forward only)
 * is the rate files before the xent and embed keys gave the embedding and the loss: it applies
 * to them where those keys are absent, whatever the order of the keys. */
static gs_status elementwise_bw(const char *path, const json_t *o, int bwd, gs_calib *out, gs_error *err)
{
    const char *obj = bwd ? "elementwise_bw_bwd" : "elementwise_bw";
    if (!json_is_object(o))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.%s: found %s, expected an object", path, obj, kind_of(o));
    double add = 0;
    double *dst = bwd ? out->elementwise_bw_bwd : out->elementwise_bw;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        size_t k = sizeof elementwise / sizeof elementwise[0], i;
        for (i = 0; i < k; i++)
            if (strcmp(elementwise[i].name, key) == 0)
                break;
        int known = i < k;
        if (known && bwd) {
            known = 0;
            for (size_t j = 0; j < sizeof elementwise_bwd_names / sizeof elementwise_bwd_names[0]; j++)
                known |= strcmp(elementwise_bwd_names[j], key) == 0;
        }
        if (!known)
            return gs_error_set(err, GS_ERR_INPUT, "%s: compute.%s.%s: unknown key, expected %s", path, obj, key,
                                bwd ? "rmsnorm, swiglu, xent or embed" : "adamw, rmsnorm, swiglu, add, xent or embed");
        char where[80];
        snprintf(where, sizeof where, "compute.%s.%s", obj, key);
        double b;
        gs_status rc = number(path, where, v, 1e3, 1e16, &b, err);
        if (rc != GS_OK)
            return rc;
        if (elementwise[i].op == GS_OP_COUNT)
            add = b;
        else
            dst[elementwise[i].op] = b;
    }
    if (add > 0) {
        if (dst[GS_OP_EMBED] == 0)
            dst[GS_OP_EMBED] = add;
        if (dst[GS_OP_LOSS] == 0)
            dst[GS_OP_LOSS] = add;
    }
    return GS_OK;
}

static gs_status launch_by_ranks(const char *path, const json_t *v, gs_calib *out, gs_error *err)
{
    if (!json_is_array(v))
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.launch_s_by_ranks: found %s, expected a list of {ranks, "
                            "launch_s}", path, kind_of(v));
    size_t n = json_array_size(v);
    if (n > GS_COLL_FIT_SIZES)
        return gs_error_set(err, GS_ERR_INPUT, "%s: compute.launch_s_by_ranks: %zu entries, at most %d", path, n,
                            GS_COLL_FIT_SIZES);
    for (size_t i = 0; i < n; i++) {
        char where[96];
        const json_t *o = json_array_get(v, i);
        snprintf(where, sizeof where, "compute.launch_s_by_ranks[%zu]", i);
        if (!json_is_object(o))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected {ranks, launch_s}", path, where,
                                kind_of(o));
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)o, key, x) {
            if (strcmp(key, "ranks") && strcmp(key, "launch_s") && strcmp(key, "wake_s") &&
                strcmp(key, "launch_cpu_s") && strcmp(key, "wake_cpu_s"))
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: unknown key, expected ranks, launch_s, wake_s, "
                                    "launch_cpu_s or wake_cpu_s", path, where, key);
        }
        double r, s;
        char w2[128];
        gs_status rc;
        if (!json_object_get(o, "ranks") || !json_object_get(o, "launch_s"))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: missing", path, where,
                                json_object_get(o, "ranks") ? "launch_s" : "ranks");
        snprintf(w2, sizeof w2, "%s.ranks", where);
        if ((rc = number(path, w2, json_object_get(o, "ranks"), 0, 1e9, &r, err)) != GS_OK)
            return rc;
        if (r != floor(r) || (i > 0 && (uint64_t)r <= out->launch_ranks[i - 1]))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %g, expected an integer above the previous entry's",
                                path, w2, r);
        snprintf(w2, sizeof w2, "%s.launch_s", where);
        if ((rc = number(path, w2, json_object_get(o, "launch_s"), 0, 1, &s, err)) != GS_OK)
            return rc;
        out->launch_ranks[i] = (uint64_t)r;
        out->launch_by_ranks[i] = s;
        const json_t *wk = json_object_get(o, "wake_s");
        out->wake_by_ranks[i] = 0;
        if (wk && !(json_is_number(wk) && json_number_value(wk) == 0.0)) {
            snprintf(w2, sizeof w2, "%s.wake_s", where);
            if ((rc = number(path, w2, wk, 0, 1, &out->wake_by_ranks[i], err)) != GS_OK)
                return rc;
        }
        /* the CPU parts: 0 .. the time they are part of */
        static const char *const cpu_keys[2] = {"launch_cpu_s", "wake_cpu_s"};
        double *cpu_out[2] = {&out->launch_cpu_by_ranks[i], &out->wake_cpu_by_ranks[i]};
        double cap[2] = {out->launch_by_ranks[i], out->wake_by_ranks[i]};
        for (int k = 0; k < 2; k++) {
            const json_t *cv = json_object_get(o, cpu_keys[k]);
            *cpu_out[k] = 0;
            if (!cv)
                continue;
            snprintf(w2, sizeof w2, "%s.%s", where, cpu_keys[k]);
            if (!json_is_number(cv))
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected a number", path, w2, kind_of(cv));
            double v2 = json_number_value(cv);
            if (!(v2 >= 0) || !(v2 <= cap[k]))
                return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %g, expected a number in [0, %g] (at most %s)",
                                    path, w2, v2, cap[k], k ? "wake_s" : "launch_s");
            *cpu_out[k] = v2;
        }
    }
    out->nlaunch = n;
    return GS_OK;
}

static gs_status section(const char *path, json_t *root, const char *name, gs_calib *out, gs_error *err)
{
    json_t *obj = json_object_get(root, name);
    if (!obj)
        return GS_OK;
    if (!json_is_object(obj))
        return gs_error_set(err, GS_ERR_INPUT, "%s: %s: found %s, expected an object", path, name,
                            json_is_array(obj) ? "a list" : "a value");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        gs_status rc = GS_OK;
        int nested = 1;
        if (strcmp(name, "compute") == 0 && strcmp(key, compute_objects[0]) == 0)
            rc = gemm_curve(path, v, out, err);
        else if (strcmp(name, "compute") == 0 && strcmp(key, compute_objects[1]) == 0)
            rc = elementwise_bw(path, v, 0, out, err);
        else if (strcmp(name, "compute") == 0 && strcmp(key, compute_objects[3]) == 0)
            rc = elementwise_bw(path, v, 1, out, err);
        else if (strcmp(name, "compute") == 0 && strcmp(key, compute_objects[4]) == 0)
            rc = gemm_terms(path, v, out, err);
        else if (strcmp(name, "compute") == 0 && strcmp(key, compute_objects[2]) == 0)
            rc = launch_by_ranks(path, v, out, err);
        else if (strcmp(name, "links") == 0 && strcmp(key, link_objects[0]) == 0)
            rc = link_class(path, key, v, &out->intra, err);
        else if (strcmp(name, "links") == 0 && strcmp(key, link_objects[1]) == 0)
            rc = link_class(path, key, v, &out->inter, err);
        else
            nested = 0;
        if (rc != GS_OK)
            return rc;
        if (nested)
            continue;
        int f = -1;
        for (int i = 0; i < F_COUNT; i++)
            if (strcmp(fields[i].section, name) == 0 && strcmp(fields[i].key, key) == 0)
                f = i;
        if (f < 0) {
            char list[512] = "";
            for (int i = 0; i < F_COUNT; i++)
                if (strcmp(fields[i].section, name) == 0) {
                    strncat(list, list[0] ? ", " : "", sizeof list - strlen(list) - 1);
                    strncat(list, fields[i].key, sizeof list - strlen(list) - 1);
                }
            int compute = strcmp(name, "compute") == 0;
            const char *const *objs = compute ? compute_objects : link_objects;
            for (size_t i = 0; i < (compute ? N_COMPUTE_OBJECTS : 2); i++) {
                strncat(list, ", ", sizeof list - strlen(list) - 1);
                strncat(list, objs[i], sizeof list - strlen(list) - 1);
            }
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: unknown key, expected one of %s", path, name, key, list);
        }
        if (!json_is_number(v))
            return gs_error_set(err, GS_ERR_INPUT, "%s: %s.%s: found %s, expected a number", path, name, key,
                                kind_of(v));
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

/* Checks and reads a parsed document (root NULL: je says why it failed); frees root. */
static gs_status load_root(json_t *root, const json_error_t *je_in, const char *path, gs_calib *out, gs_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t je = *je_in;
    if (!root) {
        if (je.line <= 0)
            return gs_error_set(err, GS_ERR_INPUT, "%s: cannot read: %s", path, je.text);
        return gs_error_set(err, GS_ERR_INPUT, "%s:%d:%d: JSON syntax error: %s", path, je.line, je.column, je.text);
    }
    gs_status rc = GS_OK;
    if (!json_is_object(root)) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%s: found a JSON %s, expected an object", path,
                          json_is_array(root) ? "list" : "value");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "compute") && strcmp(key, "links") && strcmp(key, "machine") && strcmp(key, "date") &&
            strcmp(key, "driver") && strcmp(key, "fits") && strcmp(key, "measurements") && strcmp(key, "units")) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: %s: unknown key, expected compute, links, machine, date, "
                              "driver, units, fits or measurements", path, key);
            goto out;
        }
    }
    json_t *drv = json_object_get(root, "driver");
    if (drv && !json_is_string(drv)) {
        rc = gs_error_set(err, GS_ERR_INPUT, "%s: driver: found %s, expected a string (host, cuda)", path, kind_of(drv));
        goto out;
    }
    if ((rc = section(path, root, "compute", out, err)) != GS_OK || (rc = section(path, root, "links", out, err)) != GS_OK)
        goto out;
    /* a host calibration is one machine's threads, unless it measured links between hosts
     * (processes of an MPI job on several hosts): then groups spanning nodes take links.inter */
    out->host = drv && strcmp(json_string_value(drv), "host") == 0 && !out->inter.set;
    /* which attention kernels compute.attn_flops timed (calibrate records it; unknown in files
     * from before flash attention ran in exec, or written by hand) */
    out->attn_flash = -1;
    json_t *meas = json_object_get(root, "measurements"), *at = NULL, *fl = NULL;
    if (json_is_object(meas) && json_is_object(at = json_object_get(meas, "attention")) &&
        (fl = json_object_get(at, "flash")) != NULL) {
        if (!json_is_boolean(fl)) {
            rc = gs_error_set(err, GS_ERR_INPUT, "%s: measurements.attention.flash: found %s, expected true or false",
                              path, kind_of(fl));
            goto out;
        }
        out->attn_flash = json_is_true(fl);
    }
out:
    json_decref(root);
    return rc;
}

gs_status gs_calib_load(const char *path, gs_calib *out, gs_error *err)
{
    char *text = NULL;
    size_t len = 0;
    /* a regular file (a FIFO would block, a device never ends) of at most 64 MiB */
    gs_status rc = gs_input_read(path, "calibration file", UINT64_C(64) << 20, &text, &len, err);
    if (rc != GS_OK)
        return rc;
    rc = gs_calib_load_string(text, len, path, out, err);
    free(text);
    return rc;
}

gs_status gs_calib_load_string(const char *text, size_t len, const char *path, gs_calib *out, gs_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    return load_root(root, &je, path ? path : "<calibration>", out, err);
}

const char *gs_calib_attention_note(const gs_calib *c, const char *path, int scenario_flash, char *buf, size_t len)
{
    if (c->attn_flash < 0 || !(c->set & (1u << F_ATTN)) || (c->attn_flash != 0) == (scenario_flash != 0))
        return NULL;
    snprintf(buf, len,
             "note: %s's attention rate (compute.attn_flops) was measured on the %s, but the scenario has "
             "flash_attention: %s; its attention events take that rate anyway: calibrate with the scenario's setting "
             "to time the kernels it runs",
             path, c->attn_flash ? "flash kernels" : "kernels that keep the probabilities",
             scenario_flash ? "true" : "false");
    return buf;
}

void gs_calib_apply(const gs_calib *c, uint64_t world, gs_compute_model *cm, gs_topo *topo)
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
    /* a measured launch cost, or the host driver's shared cores: the measurement holds the host's
     * issuing (its dispatch per event), so the host thread is not modelled again */
    if ((c->set & (1u << F_LAUNCH)) || (c->set & (1u << F_CORES)) || c->nlaunch > 0)
        cm->host_kernel_s = 0.0;
    if (c->set & (1u << F_OVERLAP)) {
        cm->overlap_slowdown = c->overlap_slowdown;
        cm->overlap_hbm_per_byte = 0.0; /* the measured factor, flat */
    }
    if (c->nlaunch > 0) {
        size_t hi = 0;
        while (hi < c->nlaunch && c->launch_ranks[hi] < world)
            hi++;
        size_t lo = hi == 0 ? 0 : hi == c->nlaunch ? c->nlaunch - 1 : hi - 1, up = hi == c->nlaunch ? lo : hi;
        double w = up == lo ? 0.0
                            : (double)(world - c->launch_ranks[lo]) / (double)(c->launch_ranks[up] - c->launch_ranks[lo]);
        cm->launch_s = (1 - w) * c->launch_by_ranks[lo] + w * c->launch_by_ranks[up];
        cm->wake_s = (1 - w) * c->wake_by_ranks[lo] + w * c->wake_by_ranks[up];
        cm->launch_cpu_s = (1 - w) * c->launch_cpu_by_ranks[lo] + w * c->launch_cpu_by_ranks[up];
        cm->wake_cpu_s = (1 - w) * c->wake_cpu_by_ranks[lo] + w * c->wake_cpu_by_ranks[up];
    }
    if (c->set & (1u << F_CORES)) {
        cm->cores = c->cores;
        /* a host machine's cores: what communication takes from compute is the shared cores'
         * model (its CPU share), not a GPU's SM and HBM contention factor, unless the file
         * names one */
        if (!(c->set & (1u << F_OVERLAP))) {
            cm->overlap_slowdown = 1.0;
            cm->overlap_hbm_per_byte = 0.0;
        }
    }
    if (c->set & (1u << F_BACKGROUND))
        cm->background_load = c->background_load;
    if (c->set & (1u << F_BWD))
        cm->gemm_bwd_factor = c->gemm_bwd_factor;
    if (c->set & (1u << F_ATTN))
        cm->attn_flops = c->attn_flops;
    if (c->gemm_terms) {
        cm->gemm_terms = 1;
        cm->gemm_s_per_flop = c->gemm_s_per_flop;
        cm->gemm_s_per_kn = c->gemm_s_per_kn;
        cm->gemm_s_per_mk = c->gemm_s_per_mk;
        cm->gemm_s_per_call = c->gemm_s_per_call;
    }
    if (c->gemm_curve) {
        cm->gemm_curve = 1;
        cm->gemm_form = c->gemm_form;
        cm->gemm_e_max = c->gemm_e_max;
        cm->gemm_f0_flops = c->gemm_f0_flops;
    }
    if (c->set & (1u << F_ROPE)) { /* the measured rotation replaces the preset's byte model */
        cm->qkv_rope_s = c->qkv_rope_s;
        cm->rope_cols = 0.0;
    }
    if (c->set & (1u << F_CONC))
        cm->concurrency_slowdown = c->concurrency_slowdown;
    if (c->set & (1u << F_COLL_CPU))
        cm->coll_cpu_share = c->coll_cpu_share;
    for (int i = 0; i < GS_OP_COUNT; i++) {
        if (c->elementwise_bw[i] > 0)
            cm->elementwise_bw[i] = c->elementwise_bw[i];
        if (c->elementwise_bw_bwd[i] > 0)
            cm->elementwise_bw_bwd[i] = c->elementwise_bw_bwd[i];
    }
    if (c->set & (1u << F_INTRA))
        topo->intra_bw = c->intra_bw;
    if (c->set & (1u << F_NIC)) {
        /* NCCL plans with the line rate: keep the measured NIC's line/achievable ratio */
        if (topo->nic_bw > 0)
            topo->nic_line_bw *= c->nic_bw / topo->nic_bw;
        topo->nic_bw = c->nic_bw;
    }
    if (c->intra.set)
        topo->fit_intra = c->intra;
    if (c->inter.set)
        topo->fit_inter = c->inter;
    topo->one_machine = c->host;
}
