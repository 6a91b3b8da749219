/* Reader and writer of the public safetensors format
 * (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes of
 * JSON {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value"}} padded with spaces to a multiple of 8, then the byte buffer;
 * offsets are bytes relative to the buffer start. The writer lays tensors out in (element size
 * descending, name) order, contiguously, and sorts the header keys, so the same input gives the same
 * bytes. The reader accepts any valid file and rejects, naming the tensor, every inconsistency:
 * header length beyond the file, bad JSON, unknown keys or dtypes, shape x element size != end -
 * begin, offsets out of range, overlaps, holes. Data is little-endian (the host must be too).
 *
 * Ownership: a gs_st_header owns its tensor names and metadata strings (gs_st_header_fini frees
 * them); a gs_st_file owns its header and file descriptor (gs_safetensors_close). Writers borrow
 * the caller's tensor data for the duration of the call. */
#ifndef GS_SAFETENSORS_H
#define GS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/status.h"

#define GS_ST_MAX_DIMS 8
/* The format caps the header at 100 MB (the reference implementation's limit). */
#define GS_ST_MAX_HEADER_BYTES (UINT64_C(100) * 1000 * 1000)
/* JSON nesting allowed in a header (a valid one needs 3). */
#define GS_ST_MAX_JSON_DEPTH 16

typedef enum gs_st_dtype {
    GS_ST_BOOL,
    GS_ST_U8,
    GS_ST_I8,
    GS_ST_F8_E5M2,
    GS_ST_F8_E4M3,
    GS_ST_I16,
    GS_ST_U16,
    GS_ST_F16,
    GS_ST_BF16,
    GS_ST_I32,
    GS_ST_U32,
    GS_ST_F32,
    GS_ST_F64,
    GS_ST_I64,
    GS_ST_U64,
    GS_ST_DTYPE_COUNT
} gs_st_dtype;

/* "F32", "BF16", ... as spelled in headers. */
const char *gs_st_dtype_name(gs_st_dtype d);
/* Bytes per element. */
uint64_t gs_st_dtype_bytes(gs_st_dtype d);
/* 0 and *out set if name is a known dtype, -1 otherwise. */
int gs_st_dtype_parse(const char *name, gs_st_dtype *out);

typedef struct gs_st_tensor {
    char *name; /* owned */
    gs_st_dtype dtype;
    size_t ndim; /* 0 for a scalar */
    uint64_t shape[GS_ST_MAX_DIMS];
    uint64_t begin, end; /* bytes, relative to the start of the byte buffer */
} gs_st_tensor;

typedef struct gs_st_meta_entry {
    char *key;   /* owned */
    char *value; /* owned */
} gs_st_meta_entry;

typedef struct gs_st_header {
    gs_st_tensor *tensors; /* owned, sorted by name */
    size_t count;
    gs_st_meta_entry *meta; /* owned, "__metadata__", sorted by key */
    size_t meta_count;
    uint64_t header_bytes; /* N: the JSON header's length, padding included */
    uint64_t data_offset;  /* bytes from the file start to the byte buffer (8 + N) */
    uint64_t data_bytes;   /* bytes in the byte buffer */
} gs_st_header;

void gs_st_header_init(gs_st_header *h);
void gs_st_header_fini(gs_st_header *h);

/* Decodes the 8-byte little-endian length prefix of a file of file_bytes bytes and checks it:
 * 0 < N <= GS_ST_MAX_HEADER_BYTES and 8 + N <= file_bytes. */
gs_status gs_safetensors_header_length(const unsigned char prefix[8], uint64_t file_bytes, uint64_t *header_bytes,
                                       gs_error *err);

/* Parses and validates the JSON header: buf holds its len bytes (the N bytes after the length
 * prefix; no terminating NUL needed), file_bytes is the whole file's size, so the byte buffer
 * is file_bytes - 8 - len bytes and must be covered exactly. Bounded (no recursion deeper than
 * GS_ST_MAX_JSON_DEPTH, no allocation beyond O(len)), for fuzzing. Messages name the tensor;
 * callers prefix the file. */
gs_status gs_safetensors_parse_header(const char *buf, size_t len, uint64_t file_bytes, gs_st_header *out,
                                      gs_error *err);

/* Parses a whole in-memory file image (length prefix, header, buffer size). */
gs_status gs_safetensors_parse_image(const unsigned char *image, size_t image_bytes, gs_st_header *out,
                                     gs_error *err);

/* Value of a metadata key, or NULL. */
const char *gs_st_header_meta(const gs_st_header *h, const char *key);
/* The tensor of that name (binary search), or NULL. */
const gs_st_tensor *gs_st_header_find(const gs_st_header *h, const char *name);
/* Elements in a tensor (product of its shape; 1 for a scalar). */
uint64_t gs_st_tensor_numel(const gs_st_tensor *t);

/* ---- reading files ------------------------------------------------------------------------- */

typedef struct gs_st_file {
    char *path; /* owned copy, for messages */
    int fd;
    uint64_t file_bytes;
    gs_st_header header;
} gs_st_file;

/* Opens and validates a file (header only; data is read on demand). Errors start with
 * "safetensors PATH: ". */
gs_status gs_safetensors_open(gs_st_file *f, const char *path, gs_error *err);
void gs_safetensors_close(gs_st_file *f);
/* Reads `bytes` bytes starting `byte_offset` bytes into tensor t's data. Thread-safe (pread). */
gs_status gs_safetensors_read(const gs_st_file *f, const gs_st_tensor *t, uint64_t byte_offset, void *dst,
                              uint64_t bytes, gs_error *err);

/* ---- writing files ------------------------------------------------------------------------- */

typedef struct gs_st_write_tensor {
    const char *name;
    gs_st_dtype dtype;
    size_t ndim;
    uint64_t shape[GS_ST_MAX_DIMS];
    const void *data; /* numel x dtype bytes, borrowed */
} gs_st_write_tensor;

typedef struct gs_st_write_meta {
    const char *key;
    const char *value;
} gs_st_write_meta;

/* Writes a complete file to an open stream (path only names it in errors). Names must be
 * distinct, valid UTF-8 and not "__metadata__"; metadata keys distinct. Does not flush or sync.
 * crc_out (may be NULL) receives the CRC-32 (exec/crc32.h) of every byte written. */
gs_status gs_safetensors_write_stream(FILE *stream, const char *path, const gs_st_write_tensor *tensors, size_t count,
                                      const gs_st_write_meta *meta, size_t meta_count, uint32_t *crc_out,
                                      gs_error *err);

/* Writes PATH atomically: PATH.tmp-PID, fsync, rename over PATH, fsync of the directory. */
gs_status gs_safetensors_write(const char *path, const gs_st_write_tensor *tensors, size_t count,
                               const gs_st_write_meta *meta, size_t meta_count, gs_error *err);

#endif
