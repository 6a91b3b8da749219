/* CRC-32 through zlib's crc32_z (slice-by-N or carry-less-multiply code, many bytes per step);
 * the same function as the byte-at-a-time table it replaces, so checkpoint files written either
 * way verify either way (tests/check_checkpoint.c holds a bitwise reference). */
#include "exec/crc32.h"

#include <zlib.h>

uint32_t gs_crc32_update(uint32_t crc, const void *data, size_t n)
{
    /* crc32_z takes a size_t length (zlib >= 1.2.9); zlib's crc32 of 0 bytes is the crc given */
    return (uint32_t)crc32_z((uLong)crc, (const Bytef *)data, (z_size_t)n);
}
