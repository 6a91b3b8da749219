/* The checkpoint code's insides shared by its files (exec/checkpoint.c: helpers and the writer;
 * ckpt_record.c: rank records for saves across processes; ckpt_index.c: index.json;
 * ckpt_reader.c: loading; ckpt_full.c: the full single-file checkpoint). Private to exec/.
 *
 * A writer owns its directories' names, its saved ranks and their pieces; a piece's tensor name
 * is borrowed from its rank's name pool. Strings the helpers return are the caller's to free. */
#ifndef GS_EXEC_CKPT_INTERNAL_H
#define GS_EXEC_CKPT_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "exec/checkpoint.h"

/* index.json larger than this is refused (a 405B model's index is a few MB). */
#define INDEX_MAX_BYTES (UINT64_C(1) << 30)
#define INDEX_MAX_DEPTH 16

typedef struct saved_piece {
    const char *tensor; /* borrowed from the writer's name pool */
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS];
    uint64_t offset, count;
    int has_optim;
    int rank;
} saved_piece;

typedef struct saved_rank {
    int written;
    uint64_t file_bytes;
    uint32_t file_crc32;
    saved_piece *pieces; /* owned */
    char **names;        /* owned copies of the tensor names these pieces point at */
    size_t count;
} saved_rank;

struct gs_ckpt_writer {
    char *dir, *tmp_dir, *old_dir; /* owned */
    gs_ckpt_meta meta;             /* scenario points at scenario_copy */
    char *scenario_copy;
    int world;
    saved_rank *ranks; /* world entries */
    gs_ckpt_hook hook;
    void *hook_arg;
    int committed;
    int attached; /* 1: tmp_dir is another process's (gs_ckpt_writer_attach) */
    int force;    /* 1: a DIR that is not a checkpoint is moved aside (never deleted) */
    char *displaced; /* where a forced save moved such a DIR (owned), or NULL */
    char run[384];   /* this save's identity, written into its marker */
};

/* ---- exec/checkpoint.c: helpers ---- */
char *gs__ckpt_str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs__ckpt_fmt_shape(char *buf, size_t cap, size_t ndim, const uint64_t *shape);
int gs__ckpt_shape_numel(size_t ndim, const uint64_t *shape, uint64_t *numel);
int gs__ckpt_same_shape(size_t na, const uint64_t *a, size_t nb, const uint64_t *b);
uint32_t gs__ckpt_index_crc32(const json_t *root, int *ok);
char *gs__ckpt_rank_file_name(int rank, int world);
char *gs__ckpt_path_join(const char *dir, const char *name);
char *gs__ckpt_dir_normalise(const char *dir);

/* ---- exec/checkpoint.c: the writer, for exec/ckpt_record.c ---- */
gs_status gs__ckpt_writer_new(gs_ckpt_writer **out, const char *dir, const char *tmp_dir, const gs_ckpt_meta *meta,
                              int world, gs_error *err);
void gs__ckpt_saved_rank_fini(saved_rank *r);
gs_status gs__ckpt_check_shard(const char *dir, int rank, const gs_ckpt_shard *s, gs_error *err);

#endif
