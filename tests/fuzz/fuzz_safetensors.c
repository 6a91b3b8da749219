/* libFuzzer harness for the checkpoint parsers: the input is tried as a whole safetensors file
 * image (length prefix, header, buffer), as index.json text and as a rank record (the multi-process
 * save's). Every parser must reject garbage with a status, never crash, leak or read out of bounds;
 * a record it accepts must encode back to the same bytes.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address -I. -Iengine $(pkg-config --cflags jansson) \
 *     tests/fuzz/fuzz_safetensors.c exec/safetensors.c exec/checkpoint.c exec/ckpt_record.c \
 *     exec/ckpt_index.c exec/ckpt_reader.c exec/ckpt_full.c exec/atomic_file.c exec/crc32.c engine/status.c \
 *     $(pkg-config --libs jansson zlib) -o fuzz_safetensors
 *   ./fuzz_safetensors tests/fuzz/corpus/safetensors */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/status.h"
#include "exec/checkpoint.h"
#include "exec/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs_error err;
    gs_error_init(&err);

    gs_st_header h;
    if (gs_safetensors_parse_image(data, size, &h, &err) == GS_OK) {
        /* a valid header tiles the buffer exactly: check what the parser promised */
        uint64_t covered = 0;
        for (size_t i = 0; i < h.count; i++) {
            const gs_st_tensor *t = &h.tensors[i];
            if (t->end > h.data_bytes || gs_st_header_find(&h, t->name) != t)
                __builtin_trap();
            covered += t->end - t->begin;
        }
        if (covered != h.data_bytes || h.data_offset + h.data_bytes != size)
            __builtin_trap();
        gs_st_header_fini(&h);
    }

    /* the same bytes as a bare header of a file with a 64-byte buffer */
    if (size > 0 && gs_safetensors_parse_header((const char *)data, size, 8 + (uint64_t)size + 64, &h, &err) == GS_OK)
        gs_st_header_fini(&h);

    gs_ckpt_index ix;
    if (gs_ckpt_index_parse((const char *)data, size, &ix, &err) == GS_OK) {
        for (size_t t = 0; t < ix.tensor_count; t++) {
            uint64_t cursor = 0;
            for (size_t p = 0; p < ix.tensors[t].piece_count; p++) {
                const gs_ckpt_index_piece *ip = &ix.tensors[t].pieces[p];
                if (ip->offset != cursor || ip->file >= ix.file_count)
                    __builtin_trap();
                cursor += ip->count;
            }
        }
        gs_ckpt_index_fini(&ix);
    }

    gs_ckpt_rank_record rec;
    if (gs_ckpt_rank_record_decode(data, size, &rec, &err) == GS_OK) {
        unsigned char *again = NULL;
        size_t n = 0;
        if (gs_ckpt_rank_record_encode(&rec, &again, &n, &err) != GS_OK || n != size || memcmp(again, data, n) != 0)
            __builtin_trap();
        free(again);
        gs_ckpt_rank_record_fini(&rec);
    }
    return 0;
}
