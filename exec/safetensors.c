/* The safetensors format: header parsing and validation, file reading, deterministic writing. */
#include "exec/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/atomic_file.h"
#include "exec/crc32.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader and writer assume a little-endian host"
#endif

static const struct {
    const char *name;
    uint64_t bytes;
} dtype_table[GS_ST_DTYPE_COUNT] = {
    [GS_ST_BOOL] = {"BOOL", 1},       [GS_ST_U8] = {"U8", 1},   [GS_ST_I8] = {"I8", 1},
    [GS_ST_F8_E5M2] = {"F8_E5M2", 1}, [GS_ST_F8_E4M3] = {"F8_E4M3", 1},
    [GS_ST_I16] = {"I16", 2},         [GS_ST_U16] = {"U16", 2}, [GS_ST_F16] = {"F16", 2},
    [GS_ST_BF16] = {"BF16", 2},       [GS_ST_I32] = {"I32", 4}, [GS_ST_U32] = {"U32", 4},
    [GS_ST_F32] = {"F32", 4},         [GS_ST_F64] = {"F64", 8}, [GS_ST_I64] = {"I64", 8},
    [GS_ST_U64] = {"U64", 8},
};

const char *gs_st_dtype_name(gs_st_dtype d)
{
    return (unsigned)d < GS_ST_DTYPE_COUNT ? dtype_table[d].name : "?";
}

uint64_t gs_st_dtype_bytes(gs_st_dtype d)
{
    return (unsigned)d < GS_ST_DTYPE_COUNT ? dtype_table[d].bytes : 0;
}

int gs_st_dtype_parse(const char *name, gs_st_dtype *out)
{
    for (int i = 0; i < GS_ST_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (gs_st_dtype)i;
            return 0;
        }
    return -1;
}

void gs_st_header_init(gs_st_header *h)
{
    memset(h, 0, sizeof *h);
}

void gs_st_header_fini(gs_st_header *h)
{
    for (size_t i = 0; i < h->count; i++)
        free(h->tensors[i].name);
    for (size_t i = 0; i < h->meta_count; i++) {
        free(h->meta[i].key);
        free(h->meta[i].value);
    }
    free(h->tensors);
    free(h->meta);
    gs_st_header_init(h);
}

uint64_t gs_st_tensor_numel(const gs_st_tensor *t)
{
    uint64_t n = 1;
    for (size_t d = 0; d < t->ndim; d++)
        n *= t->shape[d]; /* validated not to overflow when parsed */
    return n;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const gs_st_tensor *)a)->name, ((const gs_st_tensor *)b)->name);
}

static int cmp_meta_key(const void *a, const void *b)
{
    return strcmp(((const gs_st_meta_entry *)a)->key, ((const gs_st_meta_entry *)b)->key);
}

const gs_st_tensor *gs_st_header_find(const gs_st_header *h, const char *name)
{
    if (!h->count)
        return NULL;
    gs_st_tensor key = {.name = (char *)name};
    return bsearch(&key, h->tensors, h->count, sizeof key, cmp_tensor_name);
}

const char *gs_st_header_meta(const gs_st_header *h, const char *key)
{
    for (size_t i = 0; i < h->meta_count; i++)
        if (strcmp(h->meta[i].key, key) == 0)
            return h->meta[i].value;
    return NULL;
}

gs_status gs_safetensors_header_length(const unsigned char prefix[8], uint64_t file_bytes, uint64_t *header_bytes,
                                       gs_error *err)
{
    if (file_bytes < 8)
        return gs_error_set(err, GS_ERR_INPUT, "truncated: %llu bytes, a safetensors file has at least 8",
                            (unsigned long long)file_bytes);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | prefix[i];
    if (n == 0)
        return gs_error_set(err, GS_ERR_INPUT, "header length is 0");
    if (n > GS_ST_MAX_HEADER_BYTES)
        return gs_error_set(err, GS_ERR_INPUT, "header length %llu bytes is over the format's limit of %llu",
                            (unsigned long long)n, (unsigned long long)GS_ST_MAX_HEADER_BYTES);
    if (n > file_bytes - 8)
        return gs_error_set(err, GS_ERR_INPUT,
                            "header length %llu bytes goes beyond the file (%llu bytes): truncated or not safetensors",
                            (unsigned long long)n, (unsigned long long)file_bytes);
    *header_bytes = n;
    return GS_OK;
}

/* Rejects nesting deeper than max_depth before jansson (which recurses) sees the text. */
static gs_status check_json_depth(const char *buf, size_t len, int max_depth, gs_error *err)
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
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return gs_error_set(err, GS_ERR_INPUT, "header: JSON nested deeper than %d levels at byte %zu",
                                    max_depth, i);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return GS_OK;
}

/* A non-negative JSON integer. */
static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static gs_status parse_tensor(const char *name, const json_t *v, gs_st_tensor *t, gs_error *err)
{
    if (!json_is_object(v))
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: expected an object with dtype, shape, data_offsets", name);
    const char *key;
    json_t *field;
    json_object_foreach((json_t *)v, key, field) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data_offsets") != 0)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: unknown key '%s'", name, key);
    }
    const json_t *dtype = json_object_get(v, "dtype");
    const json_t *shape = json_object_get(v, "shape");
    const json_t *offs = json_object_get(v, "data_offsets");
    if (!dtype || !shape || !offs)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: missing '%s'", name,
                            !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!json_is_string(dtype))
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: dtype is not a string", name);
    if (gs_st_dtype_parse(json_string_value(dtype), &t->dtype) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: unknown dtype '%s'", name, json_string_value(dtype));
    if (!json_is_array(shape))
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape is not an array", name);
    if (json_array_size(shape) > GS_ST_MAX_DIMS)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: %zu dimensions, at most %d supported", name,
                            json_array_size(shape), GS_ST_MAX_DIMS);
    t->ndim = json_array_size(shape);
    uint64_t numel = 1;
    for (size_t d = 0; d < t->ndim; d++) {
        if (json_u64(json_array_get(shape, d), &t->shape[d]) != 0)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape[%zu] is not a non-negative integer", name, d);
        if (gs_mul_u64(numel, t->shape[d], &numel) != 0)
            return gs_error_set(err, GS_ERR_INPUT, "tensor %s: shape overflows 64 bits", name);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || json_u64(json_array_get(offs, 0), &t->begin) != 0 ||
        json_u64(json_array_get(offs, 1), &t->end) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: data_offsets is not [begin, end] of non-negative integers",
                            name);
    if (t->end < t->begin)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: data_offsets [%llu, %llu] end before begin", name,
                            (unsigned long long)t->begin, (unsigned long long)t->end);
    uint64_t bytes;
    if (gs_mul_u64(numel, gs_st_dtype_bytes(t->dtype), &bytes) != 0)
        return gs_error_set(err, GS_ERR_INPUT, "tensor %s: size overflows 64 bits", name);
    if (bytes != t->end - t->begin)
        return gs_error_set(err, GS_ERR_INPUT,
                            "tensor %s: %llu elements of %s take %llu bytes but data_offsets [%llu, %llu] span %llu",
                            name, (unsigned long long)numel, gs_st_dtype_name(t->dtype), (unsigned long long)bytes,
                            (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)(t->end - t->begin));
    return GS_OK;
}

static gs_status parse_metadata(const json_t *v, gs_st_header *h, gs_error *err)
{
    if (!json_is_object(v))
        return gs_error_set(err, GS_ERR_INPUT, "header: __metadata__ is not an object");
    h->meta = calloc(json_object_size(v) + 1, sizeof *h->meta);
    if (!h->meta)
        return gs_error_set(err, GS_ERR_NOMEM, "header: out of memory");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val))
            return gs_error_set(err, GS_ERR_INPUT, "header: __metadata__ value of '%s' is not a string", key);
        gs_st_meta_entry *m = &h->meta[h->meta_count];
        m->key = strdup(key);
        m->value = strdup(json_string_value(val));
        h->meta_count++;
        if (!m->key || !m->value)
            return gs_error_set(err, GS_ERR_NOMEM, "header: out of memory");
    }
    qsort(h->meta, h->meta_count, sizeof *h->meta, cmp_meta_key);
    return GS_OK;
}

static int cmp_tensor_ptr_offsets(const void *a, const void *b)
{
    const gs_st_tensor *x = *(const gs_st_tensor *const *)a, *y = *(const gs_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The tensors must tile [0, data_bytes): no overlap, no hole. */
static gs_status check_coverage(const gs_st_header *h, gs_error *err)
{
    gs_status st = GS_OK;
    const gs_st_tensor **by_offset = malloc((h->count + 1) * sizeof *by_offset);
    if (!by_offset)
        return gs_error_set(err, GS_ERR_NOMEM, "header: out of memory");
    for (size_t i = 0; i < h->count; i++)
        by_offset[i] = &h->tensors[i];
    qsort(by_offset, h->count, sizeof *by_offset, cmp_tensor_ptr_offsets);
    uint64_t cursor = 0;
    const gs_st_tensor *prev = NULL;
    for (size_t i = 0; i < h->count; i++) {
        const gs_st_tensor *t = by_offset[i];
        if (t->end > h->data_bytes) {
            st = gs_error_set(err, GS_ERR_INPUT,
                              "tensor %s: data_offsets [%llu, %llu] go beyond the %llu-byte data buffer "
                              "(truncated file?)",
                              t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                              (unsigned long long)h->data_bytes);
            goto out;
        }
        if (t->begin < cursor) {
            st = gs_error_set(err, GS_ERR_INPUT, "tensor %s: data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]",
                              t->name, (unsigned long long)t->begin, (unsigned long long)t->end, prev->name,
                              (unsigned long long)prev->begin, (unsigned long long)prev->end);
            goto out;
        }
        if (t->begin > cursor) {
            st = gs_error_set(err, GS_ERR_INPUT, "tensor %s: data buffer bytes [%llu, %llu) before it belong to no tensor",
                              t->name, (unsigned long long)cursor, (unsigned long long)t->begin);
            goto out;
        }
        cursor = t->end;
        prev = t;
    }
    if (cursor != h->data_bytes)
        st = gs_error_set(err, GS_ERR_INPUT, "header: data buffer bytes [%llu, %llu) belong to no tensor",
                          (unsigned long long)cursor, (unsigned long long)h->data_bytes);
out:
    free(by_offset);
    return st;
}

gs_status gs_safetensors_parse_header(const char *buf, size_t len, uint64_t file_bytes, gs_st_header *out,
                                      gs_error *err)
{
    gs_status st = GS_OK;
    json_t *root = NULL;
    gs_st_header_init(out);
    if (len == 0 || len > GS_ST_MAX_HEADER_BYTES) {
        st = gs_error_set(err, GS_ERR_INPUT, "header length %zu out of range (1 to %llu bytes)", len,
                          (unsigned long long)GS_ST_MAX_HEADER_BYTES);
        goto out;
    }
    if (file_bytes < 8 || len > file_bytes - 8) {
        st = gs_error_set(err, GS_ERR_INPUT, "header length %zu bytes goes beyond the file (%llu bytes)", len,
                          (unsigned long long)file_bytes);
        goto out;
    }
    out->header_bytes = len;
    out->data_offset = 8 + (uint64_t)len;
    out->data_bytes = file_bytes - out->data_offset;
    if (buf[0] != '{') {
        st = gs_error_set(err, GS_ERR_INPUT, "header: does not start with '{' (not a safetensors file?)");
        goto out;
    }
    st = check_json_depth(buf, len, GS_ST_MAX_JSON_DEPTH, err);
    if (st != GS_OK)
        goto out;
    json_error_t jerr;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st = gs_error_set(err, GS_ERR_INPUT, "header: bad JSON at byte %d: %s", jerr.position, jerr.text);
        goto out;
    }
    if (!json_is_object(root)) {
        st = gs_error_set(err, GS_ERR_INPUT, "header: not a JSON object");
        goto out;
    }
    out->tensors = calloc(json_object_size(root) + 1, sizeof *out->tensors);
    if (!out->tensors) {
        st = gs_error_set(err, GS_ERR_NOMEM, "header: out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            st = parse_metadata(val, out, err);
        } else {
            gs_st_tensor *t = &out->tensors[out->count];
            t->name = strdup(key);
            if (!t->name) {
                st = gs_error_set(err, GS_ERR_NOMEM, "header: out of memory");
                goto out;
            }
            out->count++;
            st = parse_tensor(key, val, t, err);
        }
        if (st != GS_OK)
            goto out;
    }
    qsort(out->tensors, out->count, sizeof *out->tensors, cmp_tensor_name);
    st = check_coverage(out, err);
out:
    json_decref(root);
    if (st != GS_OK)
        gs_st_header_fini(out);
    return st;
}

gs_status gs_safetensors_parse_image(const unsigned char *image, size_t image_bytes, gs_st_header *out,
                                     gs_error *err)
{
    uint64_t n;
    gs_st_header_init(out);
    gs_status st = gs_safetensors_header_length(image, image_bytes, &n, err);
    if (st != GS_OK)
        return st;
    return gs_safetensors_parse_header((const char *)image + 8, (size_t)n, image_bytes, out, err);
}

/* ---- reading files ------------------------------------------------------------------------- */

static gs_status pread_full(int fd, void *dst, uint64_t bytes, uint64_t offset, const char *path, gs_error *err)
{
    unsigned char *p = dst;
    while (bytes > 0) {
        size_t chunk = bytes > (UINT64_C(1) << 30) ? (size_t)1 << 30 : (size_t)bytes;
        ssize_t got = pread(fd, p, chunk, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return gs_error_set(err, GS_ERR_IO, "safetensors %s: read failed: %s", path, strerror(errno));
        }
        if (got == 0)
            return gs_error_set(err, GS_ERR_IO, "safetensors %s: unexpected end of file at byte %llu", path,
                                (unsigned long long)offset);
        p += got;
        bytes -= (uint64_t)got;
        offset += (uint64_t)got;
    }
    return GS_OK;
}

gs_status gs_safetensors_open(gs_st_file *f, const char *path, gs_error *err)
{
    gs_status st = GS_OK;
    char *hbuf = NULL;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    gs_st_header_init(&f->header);
    f->path = strdup(path);
    if (!f->path) {
        st = gs_error_set(err, GS_ERR_NOMEM, "safetensors %s: out of memory", path);
        goto out;
    }
    f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block the open */
    if (f->fd < 0) {
        st = gs_error_set(err, GS_ERR_IO, "safetensors %s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    struct stat sb;
    if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = gs_error_set(err, GS_ERR_IO, "safetensors %s: not a regular file", path);
        goto out;
    }
    f->file_bytes = (uint64_t)sb.st_size;
    unsigned char prefix[8] = {0};
    uint64_t n;
    if (f->file_bytes >= 8) {
        st = pread_full(f->fd, prefix, 8, 0, path, err);
        if (st != GS_OK)
            goto out;
    }
    st = gs_safetensors_header_length(prefix, f->file_bytes, &n, err);
    if (st != GS_OK)
        goto prefix_out;
    hbuf = malloc((size_t)n);
    if (!hbuf) {
        st = gs_error_set(err, GS_ERR_NOMEM, "safetensors %s: out of memory for a %llu-byte header", path,
                          (unsigned long long)n);
        goto out;
    }
    st = pread_full(f->fd, hbuf, n, 8, path, err);
    if (st != GS_OK)
        goto out;
    st = gs_safetensors_parse_header(hbuf, (size_t)n, f->file_bytes, &f->header, err);
prefix_out:
    if (st != GS_OK)
        gs_error_prefix(err, "safetensors %s", path);
out:
    free(hbuf);
    if (st != GS_OK)
        gs_safetensors_close(f);
    return st;
}

void gs_safetensors_close(gs_st_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    gs_st_header_fini(&f->header);
    f->fd = -1;
    f->path = NULL;
}

gs_status gs_safetensors_read(const gs_st_file *f, const gs_st_tensor *t, uint64_t byte_offset, void *dst,
                              uint64_t bytes, gs_error *err)
{
    uint64_t span = t->end - t->begin;
    if (byte_offset > span || bytes > span - byte_offset)
        return gs_error_set(err, GS_ERR_INPUT, "safetensors %s: tensor %s: bytes [%llu, +%llu) beyond its %llu bytes",
                            f->path, t->name, (unsigned long long)byte_offset, (unsigned long long)bytes,
                            (unsigned long long)span);
    return pread_full(f->fd, dst, bytes, f->header.data_offset + t->begin + byte_offset, f->path, err);
}

/* ---- writing files ------------------------------------------------------------------------- */

/* Layout order: larger elements first (keeps every tensor aligned to its element size), then name. */
static int cmp_write_order(const void *a, const void *b)
{
    const gs_st_write_tensor *x = *(const gs_st_write_tensor *const *)a, *y = *(const gs_st_write_tensor *const *)b;
    uint64_t bx = gs_st_dtype_bytes(x->dtype), by = gs_st_dtype_bytes(y->dtype);
    if (bx != by)
        return bx > by ? -1 : 1;
    return strcmp(x->name, y->name);
}

static gs_status write_tensor_bytes(const gs_st_write_tensor *t, uint64_t *bytes, const char *path, gs_error *err)
{
    if (!t->name || (unsigned)t->dtype >= GS_ST_DTYPE_COUNT || t->ndim > GS_ST_MAX_DIMS)
        return gs_error_set(err, GS_ERR_INPUT, "safetensors %s: tensor %s: bad name, dtype or rank", path,
                            t->name ? t->name : "(null)");
    if (strcmp(t->name, "__metadata__") == 0)
        return gs_error_set(err, GS_ERR_INPUT, "safetensors %s: '__metadata__' is reserved, not a tensor name", path);
    uint64_t n = gs_st_dtype_bytes(t->dtype);
    for (size_t d = 0; d < t->ndim; d++)
        if (gs_mul_u64(n, t->shape[d], &n) != 0)
            return gs_error_set(err, GS_ERR_OVERFLOW, "safetensors %s: tensor %s: size overflows", path, t->name);
    if (n > 0 && !t->data)
        return gs_error_set(err, GS_ERR_INPUT, "safetensors %s: tensor %s: no data", path, t->name);
    *bytes = n;
    return GS_OK;
}

gs_status gs_safetensors_write_stream(FILE *stream, const char *path, const gs_st_write_tensor *tensors, size_t count,
                                      const gs_st_write_meta *meta, size_t meta_count, uint32_t *crc_out,
                                      gs_error *err)
{
    gs_status st = GS_OK;
    uint32_t crc = 0;
    const gs_st_write_tensor **order = malloc((count + 1) * sizeof *order);
    json_t *root = json_object(), *md = NULL;
    char *text = NULL;
    if (!order || !root)
        goto nomem;
    for (size_t i = 0; i < count; i++)
        order[i] = &tensors[i];
    qsort(order, count, sizeof *order, cmp_write_order);
    uint64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        const gs_st_write_tensor *t = order[i];
        uint64_t bytes;
        st = write_tensor_bytes(t, &bytes, path, err);
        if (st != GS_OK)
            goto out;
        json_t *probe = json_string(t->name); /* NULL unless valid UTF-8, as JSON keys must be */
        if (!probe) {
            st = gs_error_set(err, GS_ERR_INPUT, "safetensors %s: tensor name '%s' is not valid UTF-8", path, t->name);
            goto out;
        }
        json_decref(probe);
        if (json_object_get(root, t->name)) {
            st = gs_error_set(err, GS_ERR_INPUT, "safetensors %s: tensor %s: name given twice", path, t->name);
            goto out;
        }
        json_t *shape = json_array(), *offs = json_array(), *obj = json_object();
        if (!shape || !offs || !obj || json_object_set_new(root, t->name, obj) != 0) {
            json_decref(shape);
            json_decref(offs);
            json_decref(obj);
            goto nomem;
        }
        for (size_t d = 0; d < t->ndim; d++)
            if (json_array_append_new(shape, json_integer((json_int_t)t->shape[d])) != 0)
                goto nomem_arrays;
        if (json_array_append_new(offs, json_integer((json_int_t)offset)) != 0 ||
            json_array_append_new(offs, json_integer((json_int_t)(offset + bytes))) != 0)
            goto nomem_arrays;
        if (json_object_set_new(obj, "dtype", json_string(gs_st_dtype_name(t->dtype))) != 0 ||
            json_object_set_new(obj, "shape", shape) != 0 || json_object_set_new(obj, "data_offsets", offs) != 0)
            goto nomem;
        offset += bytes;
        continue;
    nomem_arrays:
        json_decref(shape);
        json_decref(offs);
        goto nomem;
    }
    if (meta_count > 0) {
        md = json_object();
        if (!md)
            goto nomem;
        for (size_t i = 0; i < meta_count; i++) {
            if (!meta[i].key || !meta[i].value || json_object_get(md, meta[i].key)) {
                st = gs_error_set(err, GS_ERR_INPUT, "safetensors %s: metadata key %s missing, empty or repeated", path,
                                  meta[i].key ? meta[i].key : "(null)");
                goto out;
            }
            if (json_object_set_new(md, meta[i].key, json_string(meta[i].value)) != 0)
                goto nomem;
        }
        if (json_object_set(root, "__metadata__", md) != 0)
            goto nomem;
    }
    size_t tlen = json_dumpb(root, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
    size_t padded = (tlen + 7) / 8 * 8;
    text = malloc(padded + 1);
    if (!text || tlen == 0)
        goto nomem;
    if (json_dumpb(root, text, tlen, JSON_COMPACT | JSON_SORT_KEYS) != tlen) {
        st = gs_error_set(err, GS_ERR_RUNTIME, "safetensors %s: header serialisation failed", path);
        goto out;
    }
    memset(text + tlen, ' ', padded - tlen);
    unsigned char prefix[8];
    for (int b = 0; b < 8; b++)
        prefix[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    if (fwrite(prefix, 1, 8, stream) != 8 || fwrite(text, 1, padded, stream) != padded)
        goto ioerr;
    crc = gs_crc32_update(gs_crc32_update(crc, prefix, 8), text, padded);
    for (size_t i = 0; i < count; i++) {
        uint64_t bytes;
        write_tensor_bytes(order[i], &bytes, path, err);
        if (bytes > 0 && fwrite(order[i]->data, 1, (size_t)bytes, stream) != bytes)
            goto ioerr;
        if (bytes > 0)
            crc = gs_crc32_update(crc, order[i]->data, (size_t)bytes);
    }
    if (crc_out)
        *crc_out = crc;
    goto out;
ioerr:
    st = gs_error_set(err, GS_ERR_IO, "safetensors %s: write failed: %s", path, strerror(errno));
    goto out;
nomem:
    st = gs_error_set(err, GS_ERR_NOMEM, "safetensors %s: out of memory", path);
out:
    free(text);
    json_decref(md);
    json_decref(root);
    free(order);
    return st;
}

gs_status gs_safetensors_write(const char *path, const gs_st_write_tensor *tensors, size_t count,
                               const gs_st_write_meta *meta, size_t meta_count, gs_error *err)
{
    gs_atomic_file af;
    gs_status st = gs_atomic_file_begin(&af, path, err);
    if (st != GS_OK)
        return st;
    st = gs_safetensors_write_stream(af.stream, path, tensors, count, meta, meta_count, NULL, err);
    if (st != GS_OK) {
        gs_atomic_file_abort(&af);
        return st;
    }
    return gs_atomic_file_commit(&af, err);
}
