/* CRC-32 (the zlib / PNG / Ethernet one: reflected polynomial 0xEDB88320, initial and final
 * complement), for detecting corrupt or mixed checkpoint files; computed by zlib.
 *
 * Ownership: a pure function; the data is borrowed for the call. */
#ifndef GS_CRC32_H
#define GS_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over n bytes: crc32(a || b) = gs_crc32_update(gs_crc32_update(0, a), b). */
uint32_t gs_crc32_update(uint32_t crc, const void *data, size_t n);

#endif
