/* The CPU emulator of CUDA's execution model (tests/cuda_emu.h): blocks in order, a pthread per
 * thread, a pthread_barrier per __syncthreads, poisoned shared memory with a guard past its end. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cuda_emu.h"

enum { EMU_GUARD_BYTES = 256, EMU_STACK_BYTES = 1 << 20 };

_Thread_local unsigned gs_emu_tid;
static _Thread_local unsigned long emu_thread_syncs;
unsigned gs_emu_bid_x, gs_emu_bid_y, gs_emu_bid_z, gs_emu_bdim;
float *gs_emu_shared;
static pthread_barrier_t emu_barrier;
static unsigned long emu_barrier_count;

void gs_emu_sync(void)
{
    emu_thread_syncs++;
    pthread_barrier_wait(&emu_barrier);
}

unsigned long gs_emu_barriers(void)
{
    return emu_barrier_count;
}

typedef struct emu_thread {
    pthread_t th;
    unsigned tid;
    unsigned long syncs; /* barriers this thread passed */
    gs_emu_thread_fn fn;
    const void *args;
} emu_thread;

static void *emu_thread_main(void *p)
{
    emu_thread *t = p;
    gs_emu_tid = t->tid;
    emu_thread_syncs = 0;
    t->fn(t->args);
    t->syncs = emu_thread_syncs;
    return NULL;
}

int gs_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads, size_t shared_bytes, gs_emu_thread_fn fn,
                  const void *args, char *err, size_t err_len)
{
    int rc = -1;
    unsigned char *shared = malloc(shared_bytes + EMU_GUARD_BYTES);
    emu_thread *ts = calloc(threads ? threads : 1, sizeof *ts);
    pthread_attr_t attr;
    int attr_ok = 0, barrier_ok = 0;
    if (!shared || !ts || threads == 0) {
        snprintf(err, err_len, "emulator: no memory or no threads (%u)", threads);
        goto out;
    }
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, EMU_STACK_BYTES) != 0) {
        snprintf(err, err_len, "emulator: pthread_attr");
        goto out;
    }
    attr_ok = 1;
    gs_emu_bdim = threads;
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++) {
                memset(shared, 0xff, shared_bytes); /* all-ones floats are NaN */
                memset(shared + shared_bytes, 0xa5, EMU_GUARD_BYTES);
                gs_emu_shared = (float *)shared;
                gs_emu_bid_x = x, gs_emu_bid_y = y, gs_emu_bid_z = z;
                if (pthread_barrier_init(&emu_barrier, NULL, threads) != 0) {
                    snprintf(err, err_len, "emulator: pthread_barrier_init");
                    goto out;
                }
                barrier_ok = 1;
                unsigned started = 0;
                for (; started < threads; started++) {
                    ts[started].tid = started;
                    ts[started].fn = fn;
                    ts[started].args = args;
                    ts[started].syncs = 0;
                    if (pthread_create(&ts[started].th, &attr, emu_thread_main, &ts[started]) != 0)
                        break;
                }
                if (started < threads) {
                    /* the started threads may wait at a barrier forever: a test failure anyway */
                    snprintf(err, err_len, "emulator: pthread_create failed at thread %u", started);
                    goto out;
                }
                for (unsigned t = 0; t < threads; t++)
                    pthread_join(ts[t].th, NULL);
                pthread_barrier_destroy(&emu_barrier);
                barrier_ok = 0;
                for (unsigned t = 1; t < threads; t++)
                    if (ts[t].syncs != ts[0].syncs) {
                        snprintf(err, err_len,
                                 "emulator: block (%u,%u,%u): thread %u passed %lu barriers, thread 0 %lu", x, y, z, t,
                                 ts[t].syncs, ts[0].syncs);
                        goto out;
                    }
                emu_barrier_count += ts[0].syncs;
                for (size_t g = 0; g < EMU_GUARD_BYTES; g++)
                    if (shared[shared_bytes + g] != 0xa5) {
                        snprintf(err, err_len, "emulator: block (%u,%u,%u) wrote shared byte %zu of %zu", x, y, z,
                                 shared_bytes + g, shared_bytes);
                        goto out;
                    }
            }
    rc = 0;
out:
    if (barrier_ok)
        pthread_barrier_destroy(&emu_barrier);
    if (attr_ok)
        pthread_attr_destroy(&attr);
    free(ts);
    free(shared);
    return rc;
}
