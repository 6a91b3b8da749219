/* Unit formatting for people: bytes (GB = 1e9 B, GiB = 2^30 B, always said which), seconds,
 * counts with thousands separators, FLOP/s and bandwidths.
 *
 * Ownership: every function writes into a caller buffer and returns it; nothing allocates. */
#ifndef GS_UNITS_H
#define GS_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define GS_GB 1e9
#define GS_GIB 1073741824.0
#define GS_FMT_BYTES 48

/* "17.50 GB" (decimal, 2 decimals; B/kB/MB/GB/TB/PB chosen by size). */
char *gs_fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* "16.30 GiB" (binary prefixes). */
char *gs_fmt_bytes_bin(uint64_t bytes, char *buf, size_t len);
/* "6,738,415,616" */
char *gs_fmt_count(uint64_t n, char *buf, size_t len);
/* "9.19 s", "412.0 ms", "3.4 us" */
char *gs_fmt_seconds(double s, char *buf, size_t len);
/* "312.0 TFLOP/s" */
char *gs_fmt_flops(double flops_per_s, char *buf, size_t len);
/* "25.00 GB/s" */
char *gs_fmt_bw(double bytes_per_s, char *buf, size_t len);
/* Parses 7e9, 7000000000, 6.7B, 25M style counts (K/M/B/T = 1e3/1e6/1e9/1e12) into an integer;
 * returns 0 ok, -1 malformed, -2 out of range (>= 2^64 or negative or not integral). */
int gs_parse_count(const char *s, uint64_t *out);

#endif
