/* Benchmark: CRC-32 of checkpoint-sized buffers (make bench; not part of make check): GB/s of
 * gs_crc32_update (zlib's crc32_z) against the byte-at-a-time table loop the library used before,
 * on the same bytes, and a check that both give the same value. Timed in the thread's CPU seconds.
 * usage: bench_crc32 [--quick] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/crc32.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The previous implementation: a 256-entry table, one byte per step. */
static uint32_t table[256];

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (c & 1u ? 0xEDB88320u : 0u);
        table[i] = c;
    }
}

static uint32_t crc_bytewise(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = (crc >> 8) ^ table[(crc ^ p[i]) & 0xFFu];
    return ~crc;
}

/* Repeats f over buf until min_s seconds have passed; returns GB/s (10^9 B/s); *out the CRC. */
static double bench(int zlib_path, const unsigned char *buf, size_t n, double min_s, uint32_t *out)
{
    unsigned reps = 0;
    double t0 = now_s(), dt;
    uint32_t c = 0;
    do {
        c = zlib_path ? gs_crc32_update(0, buf, n) : crc_bytewise(0, buf, n);
        reps++;
    } while ((dt = now_s() - t0) < min_s);
    *out = c;
    return (double)n * reps / dt * 1e-9;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    double min_s = quick ? 0.05 : 0.5;
    static const size_t sizes[] = {4096, (size_t)1 << 20, (size_t)64 << 20};
    size_t nmax = sizes[sizeof sizes / sizeof sizes[0] - 1];
    unsigned char *buf = malloc(nmax);
    if (!buf) {
        fprintf(stderr, "bench_crc32: out of memory\n");
        return 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < nmax; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    table_init();
    int bad = 0;
    printf("crc32: bytes     table GB/s   zlib GB/s   speed-up   same value\n");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t ct, cz;
        double gt = bench(0, buf, sizes[i], min_s, &ct), gz = bench(1, buf, sizes[i], min_s, &cz);
        printf("crc32: %-9zu %10.3f  %10.3f  %8.1fx   %s\n", sizes[i], gt, gz, gz / gt, ct == cz ? "yes" : "NO");
        bad |= ct != cz;
    }
    free(buf);
    return bad;
}
