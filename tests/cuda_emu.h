/* A CPU emulator of CUDA's execution model for device code written in the C subset of
 * kernels/cuda/attention_flash_body.h: a launch runs its blocks one at a time; a block runs one
 * pthread per CUDA thread, its dynamic shared memory is one buffer poisoned with NaN at the block's
 * start (so reading shared memory that no thread wrote shows up), and GS_SYNC() is a
 * pthread_barrier over the block's threads (so shared memory and __syncthreads behave as on the
 * GPU: a missing barrier is a data race here as there). A launch fails when a block's threads
 * passed different numbers of barriers (undefined on the GPU) or wrote past the shared size.
 *
 * Ownership: the launcher borrows the kernel's argument block for the launch; the emulator's
 * state is process-global and not reentrant (one launch at a time). */
#ifndef GS_TESTS_CUDA_EMU_H
#define GS_TESTS_CUDA_EMU_H

#include <stddef.h>

extern _Thread_local unsigned gs_emu_tid;
extern unsigned gs_emu_bid_x, gs_emu_bid_y, gs_emu_bid_z, gs_emu_bdim;
extern float *gs_emu_shared;
void gs_emu_sync(void);

#define GS_KERNEL static void
#define GS_DEVICE static inline
#define GS_DYN_SHARED(name) float *name = gs_emu_shared
#define GS_SYNC() gs_emu_sync()
#define GS_TID gs_emu_tid
#define GS_BDIM gs_emu_bdim
#define GS_BID_X gs_emu_bid_x
#define GS_BID_Y gs_emu_bid_y
#define GS_BID_Z gs_emu_bid_z
#define GS_UNROLL

/* Runs one CUDA thread of the kernel: unpacks args and calls it. */
typedef void (*gs_emu_thread_fn)(const void *args);

/* Runs the grid gx x gy x gz of blocks of `threads` threads with shared_bytes of dynamic shared
 * memory. 0 when every block ran cleanly; -1 otherwise, with a reason in err (err_len bytes). */
int gs_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads, size_t shared_bytes, gs_emu_thread_fn fn,
                  const void *args, char *err, size_t err_len);

/* Barriers passed by all threads of all blocks since the process started (a test's sanity count). */
unsigned long gs_emu_barriers(void);

#endif
