/* A sharded checkpoint's index.json, parsed and checked (exec/checkpoint.h). */
#include "exec/checkpoint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ckpt_internal.h"

/* ---- the index ------------------------------------------------------------------------------ */

void gs_ckpt_index_init(gs_ckpt_index *ix)
{
    memset(ix, 0, sizeof *ix);
}

void gs_ckpt_index_fini(gs_ckpt_index *ix)
{
    for (size_t t = 0; t < ix->tensor_count; t++) {
        gs_ckpt_index_tensor *it = &ix->tensors[t];
        for (size_t p = 0; p < it->piece_count; p++) {
            free(it->pieces[p].name);
            free(it->pieces[p].adam_m);
            free(it->pieces[p].adam_v);
        }
        free(it->pieces);
        free(it->name);
    }
    for (size_t f = 0; f < ix->file_count; f++)
        free(ix->files[f].name);
    free(ix->files);
    free(ix->tensors);
    free(ix->scenario);
    gs_ckpt_index_init(ix);
}

static int cmp_index_tensor(const void *a, const void *b)
{
    return strcmp(((const gs_ckpt_index_tensor *)a)->name, ((const gs_ckpt_index_tensor *)b)->name);
}

const gs_ckpt_index_tensor *gs_ckpt_index_find(const gs_ckpt_index *ix, const char *name)
{
    if (!ix->tensor_count)
        return NULL;
    gs_ckpt_index_tensor key = {.name = (char *)name};
    return bsearch(&key, ix->tensors, ix->tensor_count, sizeof key, cmp_index_tensor);
}

static int get_u64(const json_t *obj, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_int(const json_t *obj, const char *key, int lo, int hi, int *out)
{
    uint64_t v;
    if (get_u64(obj, key, &v) != 0 || v < (uint64_t)lo || v > (uint64_t)hi)
        return -1;
    *out = (int)v;
    return 0;
}

static char *get_string_dup(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static int file_name_ok(const char *s)
{
    return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* The document's own checksum (gs__ckpt_index_crc32) matches its content. */
static gs_status check_index_crc32(const json_t *root, gs_error *err)
{
    uint64_t want;
    int ok;
    if (get_u64(root, "index_crc32", &want) != 0 || want > UINT32_MAX)
        return gs_error_set(err, GS_ERR_INPUT, "index_crc32 missing or not a 32-bit unsigned integer");
    uint32_t got = gs__ckpt_index_crc32(root, &ok);
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory checking index_crc32");
    if (got != (uint32_t)want)
        return gs_error_set(err, GS_ERR_INPUT, "index_crc32 %08x, its content gives %08x: index.json was edited or "
                            "damaged", (uint32_t)want, got);
    return GS_OK;
}

/* The names a piece at `offset` of `tensor` has in its rank file: NAME@OFF, optim.m.NAME@OFF and
 * optim.v.NAME@OFF; 0 when they match ip's (which == 0, 1, 2: the one that differs in *which). */
static int piece_names_match(const char *tensor, const gs_ckpt_index_piece *ip, int has_optim, char *want,
                             size_t cap, int *which)
{
    static const char *const prefix[3] = {"", "optim.m.", "optim.v."};
    const char *got[3] = {ip->name, ip->adam_m, ip->adam_v};
    for (int k = 0; k < (has_optim ? 3 : 1); k++) {
        snprintf(want, cap, "%s%s@%llu", prefix[k], tensor, (unsigned long long)ip->offset);
        if (!got[k] || strcmp(got[k], want) != 0) {
            *which = k;
            return 0;
        }
    }
    return 1;
}

static gs_status parse_index_tensor(const gs_ckpt_index *ix, const char *name, const json_t *v,
                                    gs_ckpt_index_tensor *t, gs_error *err)
{
    const json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    const json_t *pieces = json_object_get(v, "pieces");
    uint64_t numel, cursor = 0;
    if (!json_is_object(v) || !json_is_string(dtype) || !json_is_array(shape) || !json_is_array(pieces))
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: needs dtype, shape and pieces", name);
    if (strcmp(json_string_value(dtype), "F32") != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: dtype %s not supported (F32 only)", name,
                            json_string_value(dtype));
    t->ndim = json_array_size(shape);
    if (t->ndim < 1 || t->ndim > GS_CKPT_MAX_DIMS)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: %zu dimensions (1 to %d supported)", name, t->ndim,
                            GS_CKPT_MAX_DIMS);
    for (size_t d = 0; d < t->ndim; d++) {
        const json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape[%zu] is not a non-negative integer", name, d);
        t->shape[d] = (uint64_t)json_integer_value(x);
    }
    if (gs__ckpt_shape_numel(t->ndim, t->shape, &numel) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape overflows 64 bits", name);
    t->pieces = calloc(json_array_size(pieces) + 1, sizeof *t->pieces);
    if (!t->pieces)
        return gs_error_set(err, GS_ERR_NOMEM, "tensor %s: out of memory", name);
    for (size_t p = 0; p < json_array_size(pieces); p++) {
        const json_t *pj = json_array_get(pieces, p);
        gs_ckpt_index_piece *ip = &t->pieces[t->piece_count++];
        uint64_t file;
        if (!json_is_object(pj) || get_u64(pj, "file", &file) != 0 || get_u64(pj, "offset", &ip->offset) != 0 ||
            get_u64(pj, "count", &ip->count) != 0 || !json_is_string(json_object_get(pj, "name")))
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu needs file, offset, count and name", name, p);
        if (file >= ix->file_count)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu: file %llu of %zu", name, p,
                                (unsigned long long)file, ix->file_count);
        ip->file = (uint32_t)file;
        ip->name = get_string_dup(pj, "name");
        ip->adam_m = get_string_dup(pj, "adam_m");
        ip->adam_v = get_string_dup(pj, "adam_v");
        if (!ip->name)
            return gs_error_set(err, GS_ERR_NOMEM, "tensor %s: out of memory", name);
        /* a tensor's pieces all have both moments or none (version 2: every tensor's, as the
         * metadata's optimizer says) */
        int has = ip->adam_m != NULL && ip->adam_v != NULL;
        int want_optim = ix->version < 3 ? ix->has_optimizer : p ? t->pieces[0].adam_m != NULL : has;
        if (has != want_optim || (ip->adam_m != NULL) != (ip->adam_v != NULL))
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu %s adam_m/adam_v (optimizer is %s; %s)", name,
                                p, has ? "has" : "lacks", ix->has_optimizer ? "adam" : "none",
                                ix->version < 3 ? "every piece alike in format version 2"
                                                : "a tensor's pieces have both or none");
        if (has && !ix->has_optimizer)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu has adam_m/adam_v, but the optimizer is none",
                                name, p);
        if (ip->count == 0 || ip->offset != cursor || ip->count > numel - cursor)
            return gs_error_set(err, GS_ERR_INPUT,
                                "tensor %s: piece %zu covers elements [%llu, +%llu) but the next uncovered element is "
                                "%llu of %llu (pieces must tile the tensor in order)",
                                name, p, (unsigned long long)ip->offset, (unsigned long long)ip->count,
                                (unsigned long long)cursor, (unsigned long long)numel);
        char want[600];
        int which = 0;
        static const char *const field[3] = {"name", "adam_m", "adam_v"};
        if (!piece_names_match(name, ip, want_optim, want, sizeof want, &which)) {
            const char *got = which == 0 ? ip->name : which == 1 ? ip->adam_m : ip->adam_v;
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: piece %zu's %s is '%s', expected '%s' (a piece holds "
                                "its own tensor's data at its own offset)", name, p, field[which], got ? got : "",
                                want);
        }
        cursor += ip->count;
    }
    if (cursor != numel)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: elements [%llu, %llu) are in no piece", name,
                            (unsigned long long)cursor, (unsigned long long)numel);
    return GS_OK;
}

/* Nesting depth check before jansson (which recurses) sees the text. */
static gs_status check_depth(const char *buf, size_t len, gs_error *err)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if ((c == '[' || c == '{') && ++depth > INDEX_MAX_DEPTH) {
            return gs_error_set(err, GS_ERR_INPUT, "JSON nested deeper than %d levels", INDEX_MAX_DEPTH);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return GS_OK;
}

gs_status gs_ckpt_index_parse(const char *buf, size_t len, gs_ckpt_index *ix, gs_error *err)
{
    gs_status st = GS_OK;
    json_t *root = NULL;
    json_error_t jerr;
    gs_ckpt_index_init(ix);
    st = check_depth(buf, len, err);
    if (st != GS_OK)
        goto out;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT, "bad JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        goto out;
    }
    const json_t *format = json_object_get(root, "format"), *md = json_object_get(root, "metadata");
    const json_t *files = json_object_get(root, "files"), *tensors = json_object_get(root, "tensors");
    if (!json_is_object(root) || !json_is_string(format) || strcmp(json_string_value(format), GS_CKPT_FORMAT) != 0) {
        st = gs_error_set(err, GS_ERR_INPUT, "not a %s index (\"format\" missing or different)", GS_CKPT_FORMAT);
        goto out;
    }
    if (get_int(root, "format_version", 0, 1 << 30, &ix->version) != 0 || ix->version < GS_CKPT_FORMAT_VERSION_MIN ||
        ix->version > GS_CKPT_FORMAT_VERSION) {
        st = gs_error_set(err, GS_ERR_INPUT, "format_version %d not supported (this build reads %d to %d: version 1 "
                          "had no index checksum)", ix->version, GS_CKPT_FORMAT_VERSION_MIN, GS_CKPT_FORMAT_VERSION);
        goto out;
    }
    const char *optim = json_string_value(json_object_get(md, "optimizer"));
    /* the first field that is missing or out of range, named */
    const char *bad = !json_is_object(md)                             ? "metadata: not an object; it"
                      : get_int(md, "dp", 1, 1 << 20, &ix->dp) != 0     ? "metadata.dp"
                      : get_int(md, "pp", 1, 1 << 20, &ix->pp) != 0     ? "metadata.pp"
                      : get_int(md, "tp", 1, 1 << 20, &ix->tp) != 0     ? "metadata.tp"
                      : get_int(md, "world", 1, 99999, &ix->world) != 0 ? "metadata.world"
                      : get_u64(md, "step", &ix->step) != 0             ? "metadata.step"
                      : !json_is_string(json_object_get(md, "scenario")) ? "metadata.scenario"
                      : !optim || (strcmp(optim, "adam") != 0 && strcmp(optim, "none") != 0) ? "metadata.optimizer"
                                                                                         : NULL;
    if (bad) {
        st = gs_error_set(err, GS_ERR_INPUT,
                          "%s missing or out of range: metadata needs dp, pp, tp (1 to 2^20), world (1 to 99999), "
                          "step (an integer from 0), scenario (a string) and optimizer (adam or none)", bad);
        goto out;
    }
    ix->has_optimizer = strcmp(optim, "adam") == 0;
    ix->scenario = get_string_dup(md, "scenario");
    if (!json_is_array(files) || json_array_size(files) != (size_t)ix->world) {
        st = gs_error_set(err, GS_ERR_INPUT, "files must list %d files (one per rank)", ix->world);
        goto out;
    }
    ix->files = calloc(json_array_size(files) + 1, sizeof *ix->files);
    if (!ix->scenario || !ix->files)
        goto nomem;
    for (size_t f = 0; f < json_array_size(files); f++) {
        const json_t *fj = json_array_get(files, f);
        gs_ckpt_index_file *xf = &ix->files[ix->file_count++];
        uint64_t crc;
        xf->name = get_string_dup(fj, "name");
        if (!xf->name || !file_name_ok(xf->name) || get_u64(fj, "bytes", &xf->bytes) != 0 ||
            get_u64(fj, "crc32", &crc) != 0 || crc > UINT32_MAX) {
            st = gs_error_set(err, GS_ERR_INPUT, "files[%zu]: needs a plain file name (no '/'), bytes and crc32", f);
            goto out;
        }
        xf->crc32 = (uint32_t)crc;
    }
    if (!json_is_object(tensors)) {
        st = gs_error_set(err, GS_ERR_INPUT, "tensors is not an object");
        goto out;
    }
    ix->tensors = calloc(json_object_size(tensors) + 1, sizeof *ix->tensors);
    if (!ix->tensors)
        goto nomem;
    const char *name;
    json_t *tv;
    json_object_foreach((json_t *)tensors, name, tv) {
        gs_ckpt_index_tensor *t = &ix->tensors[ix->tensor_count];
        t->name = strdup(name);
        if (!t->name)
            goto nomem;
        ix->tensor_count++;
        st = parse_index_tensor(ix, name, tv, t, err);
        if (st != GS_OK)
            goto out;
    }
    qsort(ix->tensors, ix->tensor_count, sizeof *ix->tensors, cmp_index_tensor);
    /* last, so that a damage the checks above can name is named: what is left is an edit that
     * kept the document well-formed (swapped pieces, another step or grid) */
    st = check_index_crc32(root, err);
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
out:
    json_decref(root);
    if (st != GS_OK)
        gs_ckpt_index_fini(ix);
    return st;
}
