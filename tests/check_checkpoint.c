/* Check suite for exec/safetensors and exec/checkpoint: round trips (bit-exact), an independent
 * reader (python's json + zlib) of the full file, corrupt inputs, and crash safety (a saving child
 * SIGKILLed at random moments must leave the old or the new checkpoint, never a torn one). */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/status.h"
#include "exec/checkpoint.h"
#include "exec/crc32.h"
#include "exec/safetensors.h"

/* ---- a tiny Llama-shaped model and its deterministic contents ------------------------------- */

typedef struct test_tensor {
    const char *name;
    size_t ndim;
    uint64_t shape[2];
} test_tensor;

static const test_tensor model[] = {
    {"model.embed_tokens.weight", 2, {16, 8}},
    {"model.layers.0.mlp.up_proj.weight", 2, {12, 8}},
    {"model.layers.0.self_attn.q_proj.weight", 2, {8, 8}},
    {"model.norm.weight", 1, {8, 0}},
};
#define NT (sizeof model / sizeof model[0])
#define MAX_RANKS 8

static uint64_t numel_of(const test_tensor *t)
{
    return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Arbitrary 32-bit patterns (NaNs, denormals, -0 included): only bit-exact copies pass. kind 0:
 * parameters, 1: Adam m, 2: Adam v. */
static float value_of(int gen, int kind, size_t tensor, uint64_t i)
{
    uint32_t bits = (uint32_t)splitmix64(((uint64_t)gen << 40) ^ ((uint64_t)kind << 36) ^ ((uint64_t)tensor << 32) ^ i);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One rank's view with owned buffers: rank r of world gets elements [r n / w, (r+1) n / w) of
 * every tensor, split into two pieces where it has two or more elements. */
typedef struct test_rank {
    gs_ckpt_shard shards[NT];
    gs_ckpt_piece pieces[NT][2];
    gs_ckpt_rank_view view;
    float *bufs[NT][2][3];
} test_rank;

/* gen < 0: zero buffers (a load target). with_optim: Adam m, v buffers too. */
static void test_rank_make(test_rank *tr, int rank, int world, int gen, int with_optim)
{
    memset(tr, 0, sizeof *tr);
    for (size_t t = 0; t < NT; t++) {
        uint64_t n = numel_of(&model[t]);
        uint64_t lo = n * (uint64_t)rank / (uint64_t)world, hi = n * (uint64_t)(rank + 1) / (uint64_t)world;
        gs_ckpt_shard *sh = &tr->shards[t];
        sh->name = model[t].name;
        sh->ndim = model[t].ndim;
        sh->shape[0] = model[t].shape[0];
        sh->shape[1] = model[t].shape[1];
        sh->pieces = tr->pieces[t];
        uint64_t mid = hi - lo >= 2 ? lo + (hi - lo) / 2 : hi;
        uint64_t bounds[3] = {lo, mid, hi};
        for (int p = 0; p < 2; p++) {
            if (bounds[p + 1] == bounds[p])
                continue;
            gs_ckpt_piece *pc = &tr->pieces[t][sh->piece_count++];
            pc->offset = bounds[p];
            pc->count = bounds[p + 1] - bounds[p];
            for (int k = 0; k < (with_optim ? 3 : 1); k++) {
                float *b = calloc(pc->count, sizeof *b);
                ck_assert_ptr_nonnull(b);
                for (uint64_t i = 0; gen >= 0 && i < pc->count; i++)
                    b[i] = value_of(gen, k, t, pc->offset + i);
                tr->bufs[t][sh->piece_count - 1][k] = b;
            }
            pc->data = tr->bufs[t][sh->piece_count - 1][0];
            pc->adam_m = tr->bufs[t][sh->piece_count - 1][1];
            pc->adam_v = tr->bufs[t][sh->piece_count - 1][2];
        }
    }
    tr->view.shards = tr->shards;
    tr->view.shard_count = NT;
}

static void test_rank_free(test_rank *tr)
{
    for (size_t t = 0; t < NT; t++)
        for (int p = 0; p < 2; p++)
            for (int k = 0; k < 3; k++)
                free(tr->bufs[t][p][k]);
}

/* 1 if every buffer of tr holds generation gen's bits exactly. */
static int test_rank_matches(const test_rank *tr, int gen)
{
    for (size_t t = 0; t < NT; t++)
        for (size_t p = 0; p < tr->shards[t].piece_count; p++) {
            const gs_ckpt_piece *pc = &tr->pieces[t][p];
            for (int k = 0; k < 3; k++) {
                const float *b = tr->bufs[t][p][k];
                for (uint64_t i = 0; b && i < pc->count; i++) {
                    float want = value_of(gen, k, t, pc->offset + i);
                    if (memcmp(&b[i], &want, sizeof want) != 0)
                        return 0;
                }
            }
        }
    return 1;
}

typedef struct test_world {
    int world;
    test_rank ranks[MAX_RANKS];
    gs_ckpt_rank_view views[MAX_RANKS];
} test_world;

static void test_world_make(test_world *tw, int world, int gen, int with_optim)
{
    tw->world = world;
    for (int r = 0; r < world; r++) {
        test_rank_make(&tw->ranks[r], r, world, gen, with_optim);
        tw->views[r] = tw->ranks[r].view;
    }
}

static void test_world_free(test_world *tw)
{
    for (int r = 0; r < tw->world; r++)
        test_rank_free(&tw->ranks[r]);
}

static int test_world_matches(const test_world *tw, int gen)
{
    for (int r = 0; r < tw->world; r++)
        if (!test_rank_matches(&tw->ranks[r], gen))
            return 0;
    return 1;
}

/* ---- fixture: a fresh temporary directory per test ------------------------------------------ */

static char tmpdir[256];

static void make_tmpdir_in(const char *base)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/gs-ckpt-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    make_tmpdir_in(base && *base ? base : "/tmp");
}

/* The crash tests kill processes, not machines: what a SIGKILL leaves is in the page cache
 * whatever fsync does, so they run on tmpfs (/dev/shm) where fsync costs nothing, when there is
 * one; fsync's durability against power loss is not testable here. */
static void make_tmpdir_fast(void)
{
    make_tmpdir_in(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void remove_tmpdir(void)
{
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *tpath(const char *name)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static const gs_ckpt_meta meta_2x1x2 = {.dp = 2, .pp = 1, .tp = 2, .step = 7, .scenario = "tiny-llama-2x2x2"};

/* Entries of the temporary directory other than `keep`. */
static int count_entries_except(const char *keep)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int others = 0;
    while ((e = readdir(d)) != NULL)
        others += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, keep) != 0;
    closedir(d);
    return others;
}

/* ---- core: round trips ---------------------------------------------------------------------- */

START_TEST(test_sharded_round_trip)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 4, 1, 1);
    ck_assert_msg(gs_ckpt_save_sharded(tpath("ck"), &meta_2x1x2, saved.views, 4, &err) == GS_OK, "%s", err.msg);
    test_world_make(&loaded, 4, -1, 1);
    ck_assert(!test_world_matches(&loaded, 1));
    uint64_t step = 0;
    ck_assert_msg(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 4, &step, &err) == GS_OK, "%s",
                  err.msg);
    ck_assert(test_world_matches(&loaded, 1));
    ck_assert_uint_eq(step, 7);
    /* the files the format promises, and nothing left beside them */
    ck_assert_int_eq(access(tpath("ck/index.json"), R_OK), 0);
    ck_assert_int_eq(access(tpath("ck/rank00000-of-00004.safetensors"), R_OK), 0);
    ck_assert_int_eq(access(tpath("ck/rank00003-of-00004.safetensors"), R_OK), 0);
    ck_assert_int_ne(access(tpath("ck.old"), F_OK), 0);
    /* index metadata */
    gs_ckpt_reader *r;
    ck_assert_int_eq(gs_ckpt_reader_create(&r, tpath("ck/"), &err), GS_OK);
    const gs_ckpt_index *ix = gs_ckpt_reader_index(r);
    ck_assert_int_eq(ix->dp, 2);
    ck_assert_int_eq(ix->pp, 1);
    ck_assert_int_eq(ix->tp, 2);
    ck_assert_int_eq(ix->world, 4);
    ck_assert_str_eq(ix->scenario, "tiny-llama-2x2x2");
    ck_assert_int_eq(ix->has_optimizer, 1);
    ck_assert_uint_eq(ix->tensor_count, NT);
    /* model.norm.weight [8] over 4 ranks: 2 elements each, split 1 + 1: 8 pieces */
    const gs_ckpt_index_tensor *norm = gs_ckpt_index_find(ix, "model.norm.weight");
    ck_assert_ptr_nonnull(norm);
    ck_assert_uint_eq(norm->piece_count, 8);
    ck_assert_uint_eq(norm->pieces[5].offset, 5);
    ck_assert_uint_eq(norm->pieces[5].file, 2);
    ck_assert_str_eq(norm->pieces[5].name, "model.norm.weight@5");
    ck_assert_str_eq(norm->pieces[5].adam_v, "optim.v.model.norm.weight@5");
    gs_ckpt_reader_destroy(r);
    test_world_free(&loaded);

    /* a second save over the first replaces it; a different split (2 ranks) reads it back */
    test_world_free(&saved);
    test_world_make(&saved, 4, 2, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("ck"), &meta_2x1x2, saved.views, 4, &err), GS_OK);
    test_world_make(&loaded, 2, -1, 1);
    ck_assert_msg(gs_ckpt_load_sharded(tpath("ck"), NULL, loaded.views, 2, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert(test_world_matches(&loaded, 2));
    test_world_free(&loaded);
    test_world_free(&saved);
}
END_TEST

START_TEST(test_sharded_without_optimizer)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 3, 5, 0);
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("p"), &meta_2x1x2, saved.views, 3, &err), GS_OK);
    test_world_make(&loaded, 3, -1, 0);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("p"), &meta_2x1x2, loaded.views, 3, NULL, &err), GS_OK);
    ck_assert(test_world_matches(&loaded, 5));
    test_world_free(&loaded);
    /* asking for Adam state that was not saved */
    test_world_make(&loaded, 3, -1, 1);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("p"), &meta_2x1x2, loaded.views, 3, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "tensor model.embed_tokens.weight: optimizer state requested, none saved") != NULL,
                  "%s", err.msg);
    test_world_free(&loaded);
    test_world_free(&saved);
}
END_TEST

START_TEST(test_replicas_deduplicated)
{
    /* DP replicas: ranks 0-1 and 2-3 hold the same halves; the index names ranks 0 and 1 */
    gs_error err;
    gs_error_init(&err);
    test_world half, loaded;
    test_world_make(&half, 2, 3, 1);
    gs_ckpt_rank_view views[4] = {half.views[0], half.views[1], half.views[0], half.views[1]};
    gs_ckpt_meta m = {.dp = 2, .pp = 1, .tp = 2, .step = 1, .scenario = ""};
    ck_assert_msg(gs_ckpt_save_sharded(tpath("rep"), &m, views, 4, &err) == GS_OK, "%s", err.msg);
    gs_ckpt_reader *r;
    ck_assert_int_eq(gs_ckpt_reader_create(&r, tpath("rep"), &err), GS_OK);
    const gs_ckpt_index_tensor *t = gs_ckpt_index_find(gs_ckpt_reader_index(r), "model.layers.0.mlp.up_proj.weight");
    ck_assert_uint_eq(t->piece_count, 4);
    for (size_t p = 0; p < 4; p++)
        ck_assert_uint_lt(t->pieces[p].file, 2);
    gs_ckpt_reader_destroy(r);
    test_world_make(&loaded, 1, -1, 1);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("rep"), NULL, loaded.views, 1, NULL, &err), GS_OK);
    ck_assert(test_world_matches(&loaded, 3));
    test_world_free(&loaded);
    test_world_free(&half);
}
END_TEST

/* The exec backend's use: one thread per rank writes its file, one commits; one thread per rank
 * loads. */
typedef struct rank_job {
    gs_ckpt_writer *writer;
    const gs_ckpt_reader *reader;
    int rank;
    const gs_ckpt_rank_view *view;
    gs_status st;
    gs_error err;
} rank_job;

static void *rank_job_run(void *arg)
{
    rank_job *j = arg;
    gs_error_init(&j->err);
    if (j->writer)
        j->st = gs_ckpt_writer_write_rank(j->writer, j->rank, j->view, &j->err);
    else
        j->st = gs_ckpt_reader_load_rank(j->reader, j->view, &meta_2x1x2, &j->err);
    return NULL;
}

static void run_rank_jobs(rank_job *jobs, int n)
{
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < n; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, rank_job_run, &jobs[r]), 0);
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        ck_assert_msg(jobs[r].st == GS_OK, "rank %d: %s", r, jobs[r].err.msg);
    }
}

START_TEST(test_threaded_ranks)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 8, 6, 1);
    gs_ckpt_writer *w;
    ck_assert_int_eq(gs_ckpt_writer_create(&w, tpath("th"), &meta_2x1x2, 8, &err), GS_OK);
    rank_job jobs[8];
    for (int r = 0; r < 8; r++)
        jobs[r] = (rank_job){.writer = w, .rank = r, .view = &saved.views[r]};
    run_rank_jobs(jobs, 8);
    ck_assert_msg(gs_ckpt_writer_commit(w, &err) == GS_OK, "%s", err.msg);
    gs_ckpt_writer_destroy(w);

    gs_ckpt_reader *r;
    ck_assert_int_eq(gs_ckpt_reader_create(&r, tpath("th"), &err), GS_OK);
    test_world_make(&loaded, 8, -1, 1);
    for (int k = 0; k < 8; k++)
        jobs[k] = (rank_job){.reader = r, .rank = k, .view = &loaded.views[k]};
    run_rank_jobs(jobs, 8);
    gs_ckpt_reader_destroy(r);
    ck_assert(test_world_matches(&loaded, 6));
    test_world_free(&loaded);
    test_world_free(&saved);
}
END_TEST

/* Standard CRC-32 (reflected, polynomial 0xEDB88320), as zlib computes it. */
static uint32_t crc32_of(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

START_TEST(test_crc32_reference)
{
    /* the CRC-32 check value of "123456789" (every CRC catalogue lists 0xCBF43926) */
    ck_assert_uint_eq(crc32_of("123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(gs_crc32_update(0, "123456789", 9), 0xCBF43926u);
    /* the library's CRC (zlib's) against the bitwise one, whole and in two parts */
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)splitmix64(i);
    ck_assert_uint_eq(gs_crc32_update(0, buf, sizeof buf), crc32_of(buf, sizeof buf));
    ck_assert_uint_eq(gs_crc32_update(gs_crc32_update(0, buf, 333), buf + 333, sizeof buf - 333),
                      crc32_of(buf, sizeof buf));
    /* every start alignment (0-15) and length 0-300: zlib's word-at-a-time and vector paths
     * start and end on byte boundaries the bitwise loop never has */
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n <= 300; n += 1 + n / 16)
            ck_assert_msg(gs_crc32_update(0, buf + off, n) == crc32_of(buf + off, n), "offset %zu length %zu",
                          off, n);
    /* a buffer past zlib's large-block threshold, chained in uneven pieces */
    size_t big = (size_t)3 << 20;
    unsigned char *b = malloc(big);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < big; i++)
        b[i] = (unsigned char)(splitmix64(i) >> 17);
    uint32_t want = crc32_of(b, big), c = 0;
    for (size_t at = 0, piece = 1; at < big; at += piece, piece = piece * 3 + 7)
        c = gs_crc32_update(c, b + at, piece < big - at ? piece : big - at);
    ck_assert_uint_eq(gs_crc32_update(0, b, big), want);
    ck_assert_uint_eq(c, want);
    free(b);
}
END_TEST

START_TEST(test_full_round_trip)
{
    gs_error err;
    gs_error_init(&err);
    float *full[NT];
    gs_ckpt_full_tensor ft[NT];
    for (size_t t = 0; t < NT; t++) {
        uint64_t n = numel_of(&model[t]);
        full[t] = malloc(n * sizeof(float));
        for (uint64_t i = 0; i < n; i++)
            full[t][i] = value_of(4, 0, t, i);
        ft[t] = (gs_ckpt_full_tensor){model[t].name, model[t].ndim, {model[t].shape[0], model[t].shape[1]}, full[t]};
    }
    ck_assert_int_eq(gs_ckpt_save_full(tpath("model.safetensors"), &meta_2x1x2, ft, NT, NULL, NULL, &err), GS_OK);
    ck_assert_int_eq(count_entries_except("model.safetensors"), 0); /* no temporary left */

    /* into pieces of 3 ranks (parameters only) */
    test_world loaded;
    test_world_make(&loaded, 3, -1, 0);
    for (int r = 0; r < 3; r++)
        ck_assert_msg(gs_ckpt_load_full(tpath("model.safetensors"), &loaded.views[r], &err) == GS_OK, "%s", err.msg);
    ck_assert(test_world_matches(&loaded, 4));
    test_world_free(&loaded);

    /* the header our own reader sees */
    gs_st_file f;
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("model.safetensors"), &err), GS_OK);
    ck_assert_uint_eq(f.header.count, NT);
    ck_assert_uint_eq(f.header.header_bytes % 8, 0);
    ck_assert_str_eq(gs_st_header_meta(&f.header, "format"), "pt");
    ck_assert_str_eq(gs_st_header_meta(&f.header, "gridstep.step"), "7");
    /* data size: (128 + 96 + 64 + 8) floats = 1184 bytes */
    ck_assert_uint_eq(f.header.data_bytes, 1184);
    gs_safetensors_close(&f);

    for (size_t t = 0; t < NT; t++)
        free(full[t]);
}
END_TEST

/* The full file read by an independent reader (python's json module and zlib.crc32), skipped
 * when python3 is absent (the shell's exit status 127). */
START_TEST(test_full_python_reader)
{
    gs_error err;
    gs_error_init(&err);
    float *full[NT];
    gs_ckpt_full_tensor ft[NT];
    for (size_t t = 0; t < NT; t++) {
        uint64_t n = numel_of(&model[t]);
        full[t] = malloc(n * sizeof(float));
        for (uint64_t i = 0; i < n; i++)
            full[t][i] = value_of(4, 0, t, i);
        ft[t] = (gs_ckpt_full_tensor){model[t].name, model[t].ndim, {model[t].shape[0], model[t].shape[1]}, full[t]};
    }
    ck_assert_int_eq(gs_ckpt_save_full(tpath("model.safetensors"), &meta_2x1x2, ft, NT, NULL, NULL, &err), GS_OK);
    const char *src = getenv("top_srcdir");
    char cmd[1024], out[4096] = "", expect[4096] = "";
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/safetensors_check.py' '%s' 2>&1", src ? src : ".",
             tpath("model.safetensors"));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        fprintf(stderr, "check_checkpoint: python3 not found, independent reader skipped\n");
    } else {
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", out);
        size_t used = 0;
        for (size_t t = 0; t < NT; t++) { /* model[] is sorted by name */
            char shape[64];
            if (model[t].ndim == 1)
                snprintf(shape, sizeof shape, "%llu", (unsigned long long)model[t].shape[0]);
            else
                snprintf(shape, sizeof shape, "%llux%llu", (unsigned long long)model[t].shape[0],
                         (unsigned long long)model[t].shape[1]);
            used += (size_t)snprintf(expect + used, sizeof expect - used, "%s F32 %s %08x\n", model[t].name, shape,
                                     crc32_of(full[t], numel_of(&model[t]) * sizeof(float)));
        }
        snprintf(expect + used, sizeof expect - used,
                 "metadata format=pt\nmetadata gridstep.dp=2\nmetadata gridstep.pp=1\n"
                 "metadata gridstep.scenario=tiny-llama-2x2x2\nmetadata gridstep.step=7\nmetadata gridstep.tp=2\n");
        ck_assert_str_eq(out, expect);
    }
    for (size_t t = 0; t < NT; t++)
        free(full[t]);
}
END_TEST

START_TEST(test_writer_layout)
{
    /* Hand-derived bytes of a two-tensor file: header {"a":...,"b":...} sorted, F32 "b" laid
     * out before U8 "a" (larger elements first), padded to 8 bytes with spaces. */
    gs_error err;
    gs_error_init(&err);
    const unsigned char a_data[3] = {1, 2, 3};
    const float b_data[2] = {1.0f, -2.0f};
    gs_st_write_tensor t[2] = {
        {.name = "a", .dtype = GS_ST_U8, .ndim = 1, .shape = {3}, .data = a_data},
        {.name = "b", .dtype = GS_ST_F32, .ndim = 2, .shape = {1, 2}, .data = b_data},
    };
    ck_assert_int_eq(gs_safetensors_write(tpath("two.safetensors"), t, 2, NULL, 0, &err), GS_OK);
    FILE *f = fopen(tpath("two.safetensors"), "rb");
    unsigned char buf[256];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const char *json = "{\"a\":{\"data_offsets\":[8,11],\"dtype\":\"U8\",\"shape\":[3]},"
                       "\"b\":{\"data_offsets\":[0,8],\"dtype\":\"F32\",\"shape\":[1,2]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    ck_assert_uint_eq(n, 8 + padded + 11);
    ck_assert_uint_eq(buf[0] | (buf[1] << 8), padded);
    ck_assert_int_eq(memcmp(buf + 8, json, jl), 0);
    for (size_t i = jl; i < padded; i++)
        ck_assert_int_eq(buf[8 + i], ' ');
    /* 1.0f = 0x3f800000, -2.0f = 0xc0000000, little-endian */
    const unsigned char data[11] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 1, 2, 3};
    ck_assert_int_eq(memcmp(buf + 8 + padded, data, 11), 0);
}
END_TEST

/* ---- errors: corrupt inputs ----------------------------------------------------------------- */

/* Parses an image made of an 8-byte prefix (length of json), json, and data_bytes zero bytes. */
static gs_status parse_json_image(const char *json, size_t data_bytes, gs_error *err)
{
    size_t jl = strlen(json);
    unsigned char *img = calloc(8 + jl + data_bytes + 1, 1);
    for (int b = 0; b < 8; b++)
        img[b] = (unsigned char)((uint64_t)jl >> (8 * b));
    memcpy(img + 8, json, jl);
    gs_st_header h;
    gs_status st = gs_safetensors_parse_image(img, 8 + jl + data_bytes, &h, err);
    if (st == GS_OK)
        gs_st_header_fini(&h);
    free(img);
    return st;
}

#define EXPECT_PARSE_ERROR(json, data_bytes, text)                                                   \
    do {                                                                                           \
        gs_error e_;                                                                               \
        gs_error_init(&e_);                                                                        \
        ck_assert_int_eq(parse_json_image(json, data_bytes, &e_), GS_ERR_INPUT);                   \
        ck_assert_msg(strstr(e_.msg, text) != NULL, "'%s' not in '%s'", text, e_.msg);             \
    } while (0)

START_TEST(test_header_errors)
{
    gs_error err;
    gs_error_init(&err);
    /* a valid one first, so the failures below are about what they change */
    ck_assert_int_eq(parse_json_image("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &err),
                     GS_OK);
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, "bad JSON");
    EXPECT_PARSE_ERROR("[1,2]", 0, "does not start with '{'");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                       "tensor x: unknown dtype 'F33'");
    /* 2 x F32 = 8 bytes, offsets span 16 */
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16,
                       "tensor x: 2 elements of F32 take 8 bytes but data_offsets [0, 16] span 16");
    /* BF16 is 2 bytes: [4] BF16 = 8 bytes; claiming it as [4] F32 in 8 bytes fails */
    ck_assert_int_eq(parse_json_image("{\"x\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, &err),
                     GS_OK);
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, "take 16 bytes");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                       12, "tensor y: data_offsets [4, 12] overlap tensor x [0, 8]");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
                       "tensor x: data buffer bytes [0, 4) before it belong to no tensor");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
                       "data buffer bytes [8, 12) belong to no tensor");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                       "tensor x: data_offsets [0, 8] go beyond the 4-byte data buffer");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
                       "tensor x: shape[0] is not a non-negative integer");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before begin");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor x: missing 'data_offsets'");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8,
                       "tensor x: unknown key 'extra'");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                       "tensor x: shape overflows 64 bits");
    EXPECT_PARSE_ERROR("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value of 'k' is not a string");
    EXPECT_PARSE_ERROR("{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                       "\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                       0, "duplicate");
    EXPECT_PARSE_ERROR("{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}", 0, "nested deeper than 16");

    /* the length prefix */
    unsigned char pre[8] = {16, 0, 0, 0, 0, 0, 0, 0};
    uint64_t n;
    ck_assert_int_eq(gs_safetensors_header_length(pre, 24, &n, &err), GS_OK);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(gs_safetensors_header_length(pre, 23, &n, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "header length 16 bytes goes beyond the file (23 bytes): truncated or not safetensors");
    ck_assert_int_eq(gs_safetensors_header_length(pre, 5, &n, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "truncated: 5 bytes, a safetensors file has at least 8");
    unsigned char huge[8] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    ck_assert_int_eq(gs_safetensors_header_length(huge, UINT64_MAX, &n, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "over the format's limit") != NULL, "%s", err.msg);
}
END_TEST

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static size_t read_bytes(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(*out, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return (size_t)n;
}

START_TEST(test_file_errors)
{
    gs_error err;
    gs_error_init(&err);
    float x[4] = {1, 2, 3, 4};
    gs_st_write_tensor t = {.name = "model.norm.weight", .dtype = GS_ST_F32, .ndim = 1, .shape = {4}, .data = x};
    ck_assert_int_eq(gs_safetensors_write(tpath("ok.safetensors"), &t, 1, NULL, 0, &err), GS_OK);
    unsigned char *img;
    size_t n = read_bytes(tpath("ok.safetensors"), &img);
    gs_st_file f;

    /* truncated in the data: the tensor runs past the end, named with the file */
    write_bytes(tpath("cut.safetensors"), img, n - 3);
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("cut.safetensors"), &err), GS_ERR_INPUT);
    char want[512];
    snprintf(want, sizeof want,
             "safetensors %s: tensor model.norm.weight: data_offsets [0, 16] go beyond the 13-byte data buffer "
             "(truncated file?)",
             tpath("cut.safetensors"));
    ck_assert_str_eq(err.msg, want);
    /* truncated in the header */
    write_bytes(tpath("cut2.safetensors"), img, 20);
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("cut2.safetensors"), &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "goes beyond the file (20 bytes)") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "cut2.safetensors") != NULL, "%s", err.msg);
    /* header length beyond the file (+2^24 bytes, under the format's 100 MB limit) */
    img[3] = 1;
    write_bytes(tpath("long.safetensors"), img, n);
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("long.safetensors"), &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "goes beyond the file") != NULL, "%s", err.msg);
    img[3] = 0;
    /* bad JSON: the first key loses its opening quote */
    img[9] = 'x';
    write_bytes(tpath("json.safetensors"), img, n);
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("json.safetensors"), &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "json.safetensors: header: bad JSON at byte") != NULL, "%s", err.msg);
    /* not a safetensors header at all */
    img[8] = '[';
    write_bytes(tpath("json.safetensors"), img, n);
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("json.safetensors"), &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "does not start with '{'") != NULL, "%s", err.msg);
    free(img);
    /* missing file */
    ck_assert_int_eq(gs_safetensors_open(&f, tpath("none.safetensors"), &err), GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, "cannot open") != NULL, "%s", err.msg);
    /* writer refuses duplicate names */
    gs_st_write_tensor two[2] = {t, t};
    ck_assert_int_eq(gs_safetensors_write(tpath("dup.safetensors"), two, 2, NULL, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "tensor model.norm.weight: name given twice") != NULL, "%s", err.msg);
    ck_assert_int_ne(access(tpath("dup.safetensors"), F_OK), 0);
}
END_TEST

START_TEST(test_checkpoint_errors)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 2, 1, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("ck"), &meta_2x1x2, saved.views, 2, &err), GS_OK);
    char want[1024];

    /* no checkpoint at all */
    test_world_make(&loaded, 2, -1, 1);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("nothing"), NULL, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "no checkpoint") != NULL, "%s", err.msg);

    /* a tensor the checkpoint lacks */
    loaded.ranks[1].shards[2].name = "model.layers.1.mlp.up_proj.weight";
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    snprintf(want, sizeof want, "checkpoint %s: tensor model.layers.1.mlp.up_proj.weight: not in the checkpoint",
             tpath("ck"));
    ck_assert_str_eq(err.msg, want);

    /* a shape that differs, on a different grid: the hint names the grid */
    loaded.ranks[1].shards[2].name = model[2].name;
    loaded.ranks[0].shards[1].shape[0] = 6; /* up_proj [12,8] saved, [6,8] expected */
    gs_ckpt_meta tp4 = meta_2x1x2;
    tp4.tp = 4;
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &tp4, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    snprintf(want, sizeof want,
             "checkpoint %s: tensor model.layers.0.mlp.up_proj.weight: shape [12,8] in index, [6,8] expected "
             "(grid differs: tp 2 vs 4?)",
             tpath("ck"));
    ck_assert_str_eq(err.msg, want);
    loaded.ranks[0].shards[1].shape[0] = 12;

    /* a rank file with one bit flipped in its data: same size, caught by the CRC */
    unsigned char *img;
    size_t n0 = read_bytes(tpath("ck/rank00000-of-00002.safetensors"), &img);
    img[n0 - 1] ^= 0x10;
    write_bytes(tpath("ck/rank00000-of-00002.safetensors"), img, n0);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "rank00000-of-00002.safetensors: CRC-32 ") != NULL &&
                      strstr(err.msg, "(corrupt or mixed checkpoint)") != NULL,
                  "%s", err.msg);
    img[n0 - 1] ^= 0x10;
    write_bytes(tpath("ck/rank00000-of-00002.safetensors"), img, n0);
    free(img);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_OK);

    /* a rank file whose size no longer matches the index (truncated by hand) */
    size_t n = read_bytes(tpath("ck/rank00001-of-00002.safetensors"), &img);
    write_bytes(tpath("ck/rank00001-of-00002.safetensors"), img, n - 4);
    free(img);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "rank00001-of-00002.safetensors") != NULL && strstr(err.msg, "truncated") != NULL,
                  "%s", err.msg);

    /* index.json edited: a piece dropped leaves a hole */
    size_t ilen = read_bytes(tpath("ck/index.json"), &img);
    gs_ckpt_index ix;
    ck_assert_int_eq(gs_ckpt_index_parse((const char *)img, ilen, &ix, &err), GS_OK);
    ck_assert_uint_eq(ix.tensor_count, NT);
    gs_ckpt_index_fini(&ix);
    char *bad = strdup((const char *)img);
    bad[ilen] = '\0';
    char *p = strstr(bad, "\"offset\": 0");
    ck_assert_ptr_nonnull(p);
    memcpy(p, "\"offset\": 1", 11);
    ck_assert_int_eq(gs_ckpt_index_parse(bad, ilen, &ix, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "next uncovered element is 0") != NULL, "%s", err.msg);
    free(bad);
    ck_assert_int_eq(gs_ckpt_index_parse("{\"format\": \"other\"}", 19, &ix, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "not a gridstep-checkpoint index") != NULL, "%s", err.msg);
    write_bytes(tpath("ck/index.json"), "{", 1);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), NULL, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    snprintf(want, sizeof want, "checkpoint %s: index.json: bad JSON", tpath("ck"));
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
    free(img);
    test_world_free(&loaded);

    /* save-side: a hole (rank 1 owns nothing) and a partial overlap */
    gs_ckpt_rank_view holes[2] = {saved.views[0], {NULL, 0}};
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("bad"), &meta_2x1x2, holes, 2, &err), GS_ERR_INPUT);
    snprintf(want, sizeof want, "checkpoint %s: tensor model.embed_tokens.weight: elements [64, 128) are on no rank",
             tpath("bad"));
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_ne(access(tpath("bad"), F_OK), 0); /* nothing left behind */
    saved.ranks[1].pieces[0][0].offset -= 1;         /* embed: [64,96) becomes [63,95) */
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("bad"), &meta_2x1x2, saved.views, 2, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "tensor model.embed_tokens.weight: elements [63, 95) on rank 1 overlap [32, 64) on "
                                  "rank 0") != NULL,
                  "%s", err.msg);
    test_world_free(&saved);
}
END_TEST

/* index.json as a JSON document, edited by f, signed again the way exec/checkpoint.h describes
 * (index_crc32 = CRC-32 of the document without that key, compact, keys sorted), written back. */
static void edit_index(const char *dir, void (*f)(json_t *root))
{
    char path[600];
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_ptr_nonnull(root);
    f(root);
    json_object_del(root, "index_crc32");
    char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_ptr_nonnull(text);
    json_object_set_new(root, "index_crc32", json_integer(gs_crc32_update(0, text, strlen(text))));
    free(text);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(1) | JSON_SORT_KEYS), 0);
    json_decref(root);
}

static void swap_files(json_t *root)
{
    json_t *files = json_object_get(root, "files");
    json_t *a = json_incref(json_array_get(files, 0)), *b = json_incref(json_array_get(files, 1));
    json_array_set_new(files, 0, b);
    json_array_set_new(files, 1, a);
    /* and the pieces follow the files, so every piece still finds its name in its file */
    const char *name;
    json_t *t;
    json_object_foreach(json_object_get(root, "tensors"), name, t) {
        size_t i;
        json_t *pc;
        json_array_foreach(json_object_get(t, "pieces"), i, pc) {
            json_int_t fi = json_integer_value(json_object_get(pc, "file"));
            json_object_set_new(pc, "file", json_integer(fi == 0 ? 1 : fi == 1 ? 0 : fi));
        }
    }
}

/* Replaces the first `from` in text (room for the growth) by `to`. */
static void replace_once(char *text, const char *from, const char *to)
{
    char *at = strstr(text, from);
    ck_assert_ptr_nonnull(at);
    size_t a = strlen(from), b = strlen(to);
    memmove(at + b, at + a, strlen(at + a) + 1);
    memcpy(at, to, b);
}

static void nothing(json_t *root)
{
    (void)root;
}

/* Checkpoints are verified, not trusted: the index's own checksum, each piece's names against its
 * tensor and offset, each rank file's metadata against the index. Every refusal names what
 * differs. */
START_TEST(test_index_verified)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 2, 3, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("ck"), &meta_2x1x2, saved.views, 2, &err), GS_OK);
    test_world_make(&loaded, 2, -1, 1);
    unsigned char *img;
    size_t n = read_bytes(tpath("ck/index.json"), &img);
    char *text = malloc(n + 64);
    gs_ckpt_index ix;

    /* a piece pointing at another tensor's data (the norm's piece named as the embedding's) */
    memcpy(text, img, n);
    text[n] = '\0';
    replace_once(text, "\"name\": \"model.norm.weight@0\"", "\"name\": \"model.embed_tokens.weight@0\"");
    char *at;
    ck_assert_int_eq(gs_ckpt_index_parse(text, strlen(text), &ix, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "tensor model.norm.weight: piece 0's name is 'model.embed_tokens.weight@0', expected "
                              "'model.norm.weight@0' (a piece holds its own tensor's data at its own offset)");

    /* Adam's m and v swapped (same length names: only the letter differs) */
    memcpy(text, img, n);
    text[n] = '\0';
    at = strstr(text, "\"adam_m\": \"optim.m.model.norm.weight@0\"");
    ck_assert_ptr_nonnull(at);
    at[strlen("\"adam_m\": \"optim.")] = 'v';
    at = strstr(text, "\"adam_v\": \"optim.v.model.norm.weight@0\"");
    ck_assert_ptr_nonnull(at);
    at[strlen("\"adam_v\": \"optim.")] = 'm';
    ck_assert_int_eq(gs_ckpt_index_parse(text, strlen(text), &ix, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "piece 0's adam_m is 'optim.v.model.norm.weight@0', expected "
                                  "'optim.m.model.norm.weight@0'") != NULL,
                  "%s", err.msg);

    /* an edit that keeps the document well-formed (another step): the checksum */
    memcpy(text, img, n);
    text[n] = '\0';
    at = strstr(text, "\"step\": 7");
    ck_assert_ptr_nonnull(at);
    at[strlen("\"step\": ")] = '8';
    ck_assert_int_eq(gs_ckpt_index_parse(text, strlen(text), &ix, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "index.json was edited or damaged") != NULL, "%s", err.msg);

    /* no checksum at all (what version 1 wrote) */
    memcpy(text, img, n);
    text[n] = '\0';
    at = strstr(text, "\"index_crc32\": ");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"index_crc3X\"", 13);
    ck_assert_int_eq(gs_ckpt_index_parse(text, strlen(text), &ix, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "index_crc32 missing") != NULL, "%s", err.msg);

    /* re-signed by the test's own implementation of the checksum: accepted, and loads */
    edit_index(tpath("ck"), nothing);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_OK);
    ck_assert(test_world_matches(&loaded, 3));

    /* rank files swapped in the index (sizes, CRCs and pieces moved along, re-signed): each file's
     * metadata names its rank */
    edit_index(tpath("ck"), swap_files);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "rank00000-of-00002.safetensors: its metadata says rank '0', index.json says '1'") ||
                      strstr(err.msg, "rank00001-of-00002.safetensors: its metadata says rank '1', index.json says '0'"),
                  "%s", err.msg);

    /* no index.json: bad input (exit 2), said so */
    ck_assert_int_eq(unlink(tpath("ck/index.json")), 0);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("ck"), &meta_2x1x2, loaded.views, 2, NULL, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "no index.json") != NULL, "%s", err.msg);
    free(text);
    free(img);
    test_world_free(&saved);
    test_world_free(&loaded);
}
END_TEST

/* ---- across processes: rank records --------------------------------------------------------- */

/* 1 when files a and b hold the same bytes. */
static int same_bytes(const char *a, const char *b)
{
    unsigned char *x, *y;
    size_t nx = read_bytes(a, &x), ny = read_bytes(b, &y);
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

/* The record format's size, from its description in exec/ckpt_record.c: a 48-byte head (magic 8,
 * rank 4, world 4, step 8, has_file 4, crc 4, file bytes 8, piece count 8), per piece 2 + name +
 * 1 + 8 per dimension + 8 + 8 + 1, then a 4-byte CRC. Rank r of the test model has two pieces of
 * every tensor (one where its range holds a single element). */
static size_t record_bytes_expected(int rank, int world)
{
    size_t n = 48 + 4;
    for (size_t t = 0; t < NT; t++) {
        uint64_t e = numel_of(&model[t]);
        uint64_t lo = e * (uint64_t)rank / (uint64_t)world, hi = e * (uint64_t)(rank + 1) / (uint64_t)world;
        size_t pieces = hi - lo >= 2 ? 2 : hi - lo;
        n += pieces * (2 + strlen(model[t].name) + 1 + 8 * model[t].ndim + 8 + 8 + 1);
    }
    return n;
}

/* The multi-process save, played in one process: a root writer, three writers attached to its
 * temporary directory (as the other processes' would be), each writing its rank; their records
 * encoded, decoded and imported by the root, which commits. The result must be the one-process
 * save's directory, byte for byte. */
START_TEST(test_records_across_processes)
{
    gs_error err;
    gs_error_init(&err);
    test_world saved, loaded;
    test_world_make(&saved, 4, 8, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(tpath("one"), &meta_2x1x2, saved.views, 4, &err), GS_OK);

    gs_ckpt_writer *root, *other[4] = {NULL};
    ck_assert_int_eq(gs_ckpt_writer_create(&root, tpath("many"), &meta_2x1x2, 4, &err), GS_OK);
    const char *tmp = gs_ckpt_writer_tmp_dir(root);
    char want[600];
    snprintf(want, sizeof want, "%s.tmp-%ld", tpath("many"), (long)getpid());
    ck_assert_str_eq(tmp, want);
    ck_assert_int_eq(gs_ckpt_writer_write_rank(root, 0, &saved.views[0], &err), GS_OK);
    for (int r = 1; r < 4; r++) {
        ck_assert_msg(gs_ckpt_writer_attach(&other[r], tpath("many"), tmp, &meta_2x1x2, 4, &err) == GS_OK, "%s",
                      err.msg);
        ck_assert_int_eq(gs_ckpt_writer_write_rank(other[r], r, &saved.views[r], &err), GS_OK);
        /* an attached writer never commits: the root does */
        ck_assert_int_eq(gs_ckpt_writer_commit(other[r], &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "an attached writer cannot commit") != NULL, "%s", err.msg);
    }
    for (int r = 1; r < 4; r++) {
        gs_ckpt_rank_record rec, back;
        unsigned char *buf, *again;
        size_t n, n2;
        ck_assert_int_eq(gs_ckpt_writer_export_rank(other[r], r, &rec, &err), GS_OK);
        ck_assert_int_eq(gs_ckpt_rank_record_encode(&rec, &buf, &n, &err), GS_OK);
        ck_assert_uint_eq(n, record_bytes_expected(r, 4));
        ck_assert_msg(gs_ckpt_rank_record_decode(buf, n, &back, &err) == GS_OK, "%s", err.msg);
        /* what the root learns: rank, world, step, the file's size and CRC (the bytes on disk) */
        ck_assert_int_eq(back.rank, r);
        ck_assert_int_eq(back.world, 4);
        ck_assert_uint_eq(back.step, 7);
        ck_assert_int_eq(back.has_file, 1);
        char name[64];
        snprintf(name, sizeof name, "rank%05d-of-00004.safetensors", r);
        unsigned char *img;
        char fpath[700];
        snprintf(fpath, sizeof fpath, "%s/%s", tmp, name);
        size_t fbytes = read_bytes(fpath, &img);
        ck_assert_uint_eq(back.file_bytes, fbytes);
        ck_assert_uint_eq(back.file_crc32, crc32_of(img, fbytes));
        free(img);
        /* the pieces as the view has them: tensor order, two per tensor, full shapes, optimizer */
        ck_assert_uint_eq(back.piece_count, 2 * NT);
        for (size_t t = 0, k = 0; t < NT; t++)
            for (size_t p = 0; p < saved.ranks[r].shards[t].piece_count; p++, k++) {
                ck_assert_str_eq(back.pieces[k].tensor, model[t].name);
                ck_assert_uint_eq(back.pieces[k].ndim, model[t].ndim);
                ck_assert_uint_eq(back.pieces[k].shape[0], model[t].shape[0]);
                ck_assert_uint_eq(back.pieces[k].offset, saved.ranks[r].pieces[t][p].offset);
                ck_assert_uint_eq(back.pieces[k].count, saved.ranks[r].pieces[t][p].count);
                ck_assert_int_eq(back.pieces[k].has_optim, 1);
            }
        /* decode is encode's inverse */
        ck_assert_int_eq(gs_ckpt_rank_record_encode(&back, &again, &n2, &err), GS_OK);
        ck_assert(n2 == n && memcmp(again, buf, n) == 0);
        ck_assert_msg(gs_ckpt_writer_import_rank(root, &back, &err) == GS_OK, "%s", err.msg);
        /* the same rank twice */
        ck_assert_int_eq(gs_ckpt_writer_import_rank(root, &back, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "written twice") != NULL, "%s", err.msg);
        free(buf);
        free(again);
        gs_ckpt_rank_record_fini(&rec);
        gs_ckpt_rank_record_fini(&back);
    }
    for (int r = 1; r < 4; r++)
        gs_ckpt_writer_destroy(other[r]); /* attached: leaves the root's directory */
    ck_assert_int_eq(access(tmp, F_OK), 0);
    ck_assert_msg(gs_ckpt_writer_commit(root, &err) == GS_OK, "%s", err.msg);
    gs_ckpt_writer_destroy(root);

    static const char *const files[] = {"index.json", "rank00000-of-00004.safetensors",
                                        "rank00001-of-00004.safetensors", "rank00002-of-00004.safetensors",
                                        "rank00003-of-00004.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "one/%s", files[i]);
        snprintf(b, sizeof b, "many/%s", files[i]);
        ck_assert_msg(same_bytes(tpath(a), tpath(b)), "%s differs from the one-process save's", files[i]);
    }
    ck_assert_int_eq(count_entries_except("one"), 1); /* "many", no temporaries */
    test_world_make(&loaded, 4, -1, 1);
    ck_assert_int_eq(gs_ckpt_load_sharded(tpath("many"), &meta_2x1x2, loaded.views, 4, NULL, &err), GS_OK);
    ck_assert(test_world_matches(&loaded, 8));
    test_world_free(&loaded);
    test_world_free(&saved);
}
END_TEST

/* Rewrites the CRC-32 at the end of a record after an edit (the test's own CRC). */
static void reseal(unsigned char *buf, size_t n)
{
    uint32_t c = crc32_of(buf, n - 4);
    for (int i = 0; i < 4; i++)
        buf[n - 4 + (size_t)i] = (unsigned char)(c >> (8 * i));
}

START_TEST(test_record_errors)
{
    gs_error err;
    gs_error_init(&err);
    test_rank tr;
    test_rank_make(&tr, 1, 2, 3, 1);
    gs_ckpt_rank_record rec, back;
    unsigned char *buf;
    size_t n;
    ck_assert_int_eq(gs_ckpt_rank_record_of_view(&rec, 1, 2, 9, &tr.view, &err), GS_OK);
    ck_assert_int_eq(rec.has_file, 0);
    ck_assert_int_eq(gs_ckpt_rank_record_encode(&rec, &buf, &n, &err), GS_OK);
    ck_assert_uint_eq(n, record_bytes_expected(1, 2));
    ck_assert_int_eq(gs_ckpt_rank_record_decode(buf, n, &back, &err), GS_OK);
    gs_ckpt_rank_record_fini(&back);

    /* every truncation is refused, with a message */
    for (size_t cut = 0; cut < n; cut++) {
        gs_error_init(&err);
        ck_assert_int_eq(gs_ckpt_rank_record_decode(buf, cut, &back, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "truncated") != NULL, "cut at %zu: %s", cut, err.msg);
        ck_assert_ptr_null(back.pieces);
    }
    /* every single flipped bit (one per byte) is caught by the CRC */
    for (size_t i = 0; i < n; i++) {
        buf[i] ^= (unsigned char)(1u << (i % 8));
        ck_assert_int_eq(gs_ckpt_rank_record_decode(buf, n, &back, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "garbled") != NULL, "byte %zu: %s", i, err.msg);
        buf[i] ^= (unsigned char)(1u << (i % 8));
    }
    /* garbage that passes the CRC: refused by the structure checks. The first piece starts at
     * byte 48: name length (2), "model.embed_tokens.weight" (25) from byte 50, ndim (1) at byte 75,
     * two 8-byte dimensions, the offset at byte 92 */
    ck_assert_uint_eq(strlen(model[0].name), 25);
    unsigned char *bad = malloc(n + 1);
    memcpy(bad, buf, n);
    bad[75] = 9;
    reseal(bad, n);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n, &back, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "rank record: piece 0: tensor model.embed_tokens.weight: 9 dimensions (1 to 8)");
    memcpy(bad, buf, n);
    bad[50] = '@';
    reseal(bad, n);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n, &back, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "name '@odel.embed_tokens.weight' empty or holds '@'") != NULL, "%s", err.msg);
    /* rank 1's offset 64 of embed_tokens becomes 200, past the tensor's 128 elements */
    memcpy(bad, buf, n);
    ck_assert_int_eq(bad[92], 64);
    bad[92] = 200;
    reseal(bad, n);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n, &back, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "beyond its 128 elements") != NULL, "%s", err.msg);
    memcpy(bad, buf, n);
    memcpy(bad, "GSCKREC2", 8);
    reseal(bad, n);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n, &back, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "rank record: not a gridstep rank record (magic)");
    /* one byte more before the CRC */
    memcpy(bad, buf, n - 4);
    bad[n - 4] = 0;
    reseal(bad, n + 1);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n + 1, &back, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "rank record: 1 bytes after the last piece");
    /* rank 1 of world 1 */
    memcpy(bad, buf, n);
    bad[12] = 1;
    reseal(bad, n);
    ck_assert_int_eq(gs_ckpt_rank_record_decode(bad, n, &back, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "rank 1 of world 1") != NULL, "%s", err.msg);
    free(bad);

    /* import: a record without a file; one whose file is not in the directory */
    gs_ckpt_meta m = meta_2x1x2;
    m.step = 9;
    gs_ckpt_writer *w;
    ck_assert_int_eq(gs_ckpt_writer_create(&w, tpath("ck"), &m, 2, &err), GS_OK);
    ck_assert_int_eq(gs_ckpt_writer_import_rank(w, &rec, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "or no file") != NULL, "%s", err.msg);
    rec.has_file = 1;
    rec.file_bytes = 1234;
    ck_assert_int_eq(gs_ckpt_writer_import_rank(w, &rec, &err), GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, "rank00001-of-00002.safetensors: missing, its record says 1234 bytes (is DIR on a "
                                  "filesystem every process sees?)") != NULL,
                  "%s", err.msg);
    rec.step = 8;
    ck_assert_int_eq(gs_ckpt_writer_import_rank(w, &rec, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "step 8 (saving step 9)") != NULL, "%s", err.msg);
    /* commit without rank 1: the one-process check */
    ck_assert_int_eq(gs_ckpt_writer_write_rank(w, 0, &tr.view, &err), GS_OK);
    ck_assert_int_eq(gs_ckpt_writer_commit(w, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "rank 1 has not written its file") != NULL, "%s", err.msg);
    /* attach: only to DIR.tmp-DIGITS, and only when it is there */
    gs_ckpt_writer *a = NULL;
    ck_assert_int_eq(gs_ckpt_writer_attach(&a, tpath("ck"), tpath("elsewhere"), &m, 2, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "is not one of its temporary directories") != NULL, "%s", err.msg);
    ck_assert_int_eq(gs_ckpt_writer_attach(&a, tpath("ck"), tpath("ck.tmp-1"), &m, 2, &err), GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, "is not visible here (No such file or directory): DIR must be on a filesystem "
                                  "every process sees") != NULL,
                  "%s", err.msg);
    ck_assert_ptr_null(a);
    gs_ckpt_writer_destroy(w);
    ck_assert_int_eq(count_entries_except("none"), 0); /* the failed save's directory removed */
    free(buf);
    gs_ckpt_rank_record_fini(&rec);
    test_rank_free(&tr);
}
END_TEST

/* ---- crash safety --------------------------------------------------------------------------- */

typedef struct crash_plan {
    int kill_at_call; /* the hook call at which the child kills itself; -1: never */
    int calls;
    unsigned spin_us; /* sleep in every hook call, to spread the save out in time */
} crash_plan;

static void crash_hook(const char *phase, const char *path, void *arg)
{
    crash_plan *cp = arg;
    if (cp->calls++ == cp->kill_at_call)
        raise(SIGKILL);
    if (cp->spin_us)
        usleep(cp->spin_us);
}

static uint64_t rng_next(uint64_t *s)
{
    *s = splitmix64(*s);
    return *s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Child: save generation gen (w, made by the parent) over DIR with the plan's hook; exit 0 when
 * it finished. The child runs no Check assertion: a passing one writes its location into Check's
 * message channel, which the child shares with the parent, and a child killed in the middle of
 * that write left the parent a corrupt message ("Bad message type", seen once in a distcheck). */
static void child_save(const char *dir, int gen, crash_plan *cp, const test_world *w0)
{
    test_world w = *w0;
    gs_error err;
    gs_error_init(&err);
    gs_ckpt_meta m = meta_2x1x2;
    m.step = (uint64_t)gen;
    gs_ckpt_writer *wr;
    if (gs_ckpt_writer_create(&wr, dir, &m, 4, &err) != GS_OK)
        _exit(3);
    gs_ckpt_writer_set_hook(wr, crash_hook, cp);
    for (int r = 0; r < 4; r++)
        if (gs_ckpt_writer_write_rank(wr, r, &w.views[r], &err) != GS_OK)
            _exit(4);
    if (gs_ckpt_writer_commit(wr, &err) != GS_OK)
        _exit(5);
    gs_ckpt_writer_destroy(wr);
    _exit(0);
}

START_TEST(test_crash_sharded)
{
    enum { TRIALS = 100, HOOK_CALLS = 10 };
    const char *dir = tpath("ck");
    gs_error err;
    gs_error_init(&err);
    gs_ckpt_meta m0 = meta_2x1x2;
    m0.step = 0;
    test_world w0;
    test_world_make(&w0, 4, 0, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(dir, &m0, w0.views, 4, &err), GS_OK);
    test_world_free(&w0);

    /* how long one save takes in a child, to aim the random kills */
    double t0 = now_s();
    for (int i = 0; i < 3; i++) {
        crash_plan cp = {.kill_at_call = -1, .spin_us = 20};
        test_world wc;
        test_world_make(&wc, 4, 1000 + i, 1);
        pid_t pid = fork();
        if (pid == 0)
            child_save(dir, 1000 + i, &cp, &wc);
        int status;
        waitpid(pid, &status, 0);
        test_world_free(&wc);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    double save_s = (now_s() - t0) / 3;
    /* back to a known generation 0 */
    test_world_make(&w0, 4, 0, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(dir, &m0, w0.views, 4, &err), GS_OK);
    test_world_free(&w0);

    uint64_t rng = 20260707;
    int gen = 0, got_old = 0, got_new = 0, from_old_dir = 0, self_kills = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        int next = gen + 1;
        crash_plan cp = {.kill_at_call = -1, .spin_us = (unsigned)(rng_next(&rng) % 40)};
        int self_kill = trial % 2 == 0; /* even trials die at a chosen step, odd ones at a random time */
        if (self_kill)
            cp.kill_at_call = (trial / 2) % HOOK_CALLS;
        test_world wn;
        test_world_make(&wn, 4, next, 1);
        /* the child must not touch Check: even a passing ck_assert writes a message to the
         * runner's channel, which the child shares (a kill mid-write garbles it) */
        pid_t pid = fork();
        if (pid == 0)
            child_save(dir, next, &cp, &wn);
        ck_assert_int_ge(pid, 0);
        if (!self_kill) {
            useconds_t delay = (useconds_t)(rng_next(&rng) % (uint64_t)(1.2e6 * save_s + 1));
            usleep(delay);
            kill(pid, SIGKILL);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        test_world_free(&wn);
        ck_assert_msg(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                      "trial %d: child failed with status %d", trial, status);
        self_kills += self_kill && WIFSIGNALED(status);

        /* load: must succeed and give exactly generation gen or next */
        gs_ckpt_reader *r;
        ck_assert_msg(gs_ckpt_reader_create(&r, dir, &err) == GS_OK, "trial %d: %s", trial, err.msg);
        const char *path = gs_ckpt_reader_path(r);
        from_old_dir += strcmp(path + strlen(path) - 4, ".old") == 0;
        test_world got;
        test_world_make(&got, 4, -1, 1);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(gs_ckpt_reader_load_rank(r, &got.views[k], &meta_2x1x2, &err) == GS_OK, "trial %d: %s",
                          trial, err.msg);
        uint64_t step = gs_ckpt_reader_index(r)->step;
        gs_ckpt_reader_destroy(r);
        if (test_world_matches(&got, next)) {
            ck_assert_uint_eq(step, (uint64_t)next);
            got_new++;
            gen = next;
        } else {
            ck_assert_msg(test_world_matches(&got, gen), "trial %d: torn checkpoint (neither generation %d nor %d)",
                          trial, gen, next);
            ck_assert_uint_eq(step, (uint64_t)gen);
            ck_assert_msg(!WIFEXITED(status), "trial %d: the save finished but the old checkpoint loads", trial);
            got_old++;
        }
        test_world_free(&got);
    }
    /* The chosen-step kills are deterministic. A save over an existing checkpoint calls the hook
     * 10 times: tmp-dir, 4 x file-written, files-synced, index-written, old-moved, new-in-place,
     * old-removed. Killed at calls 0-7 the old one stays (40 of the 50), at 8-9 the new one is in
     * place (10); at call 7 (old-moved, 5 times) DIR is missing and the load reads DIR.old. */
    ck_assert_int_eq(self_kills, 50);
    ck_assert_int_ge(got_old, 40);
    ck_assert_int_ge(got_new, 10);
    ck_assert_int_ge(from_old_dir, 5);

    /* a clean save afterwards recovers and cleans every leftover */
    test_world_make(&w0, 4, 0, 1);
    ck_assert_int_eq(gs_ckpt_save_sharded(dir, &meta_2x1x2, w0.views, 4, &err), GS_OK);
    test_world_free(&w0);
    ck_assert_int_eq(count_entries_except("ck"), 0);
    fprintf(stderr, "crash test: %d trials, save %.2f ms, old %d new %d (from DIR.old %d)\n", TRIALS, save_s * 1e3,
            got_old, got_new, from_old_dir);
}
END_TEST

START_TEST(test_crash_full)
{
    enum { TRIALS = 30 };
    const char *path = tpath("model.safetensors");
    gs_error err;
    gs_error_init(&err);
    static float a[64], b[64];
    for (int i = 0; i < 64; i++) {
        a[i] = value_of(1, 0, 0, (uint64_t)i);
        b[i] = value_of(2, 0, 0, (uint64_t)i);
    }
    gs_ckpt_full_tensor ta = {"model.norm.weight", 1, {64}, a}, tb = {"model.norm.weight", 1, {64}, b};
    ck_assert_int_eq(gs_ckpt_save_full(path, &meta_2x1x2, &ta, 1, NULL, NULL, &err), GS_OK);
    uint64_t rng = 99;
    const float *cur = a;
    for (int trial = 0; trial < TRIALS; trial++) {
        /* hook calls: 0 full-written (before fsync and rename), 1 full-renamed; 2: random kill */
        crash_plan cp = {.kill_at_call = trial % 3, .spin_us = 0};
        const float *next = cur == a ? b : a;
        pid_t pid = fork();
        if (pid == 0) {
            gs_error e;
            _exit(gs_ckpt_save_full(path, &meta_2x1x2, next == a ? &ta : &tb, 1, crash_hook, &cp, &e) == GS_OK ? 0
                                                                                                              : 3);
        }
        if (trial % 3 == 2) { /* no hook kill: a random one */
            usleep((useconds_t)(rng_next(&rng) % 300));
            kill(pid, SIGKILL);
        }
        int status;
        waitpid(pid, &status, 0);
        ck_assert(WIFSIGNALED(status) || WEXITSTATUS(status) == 0);
        float got[64];
        gs_ckpt_piece pc = {.offset = 0, .count = 64, .data = got};
        gs_ckpt_shard sh = {"model.norm.weight", 1, {64}, &pc, 1};
        gs_ckpt_rank_view v = {&sh, 1};
        ck_assert_msg(gs_ckpt_load_full(path, &v, &err) == GS_OK, "trial %d: %s", trial, err.msg);
        if (memcmp(got, next, sizeof got) == 0) {
            ck_assert(trial % 3 != 0);
            cur = next;
        } else {
            ck_assert_msg(memcmp(got, cur, sizeof got) == 0, "trial %d: torn file", trial);
            ck_assert(trial % 3 != 1 && !WIFEXITED(status));
        }
    }
    /* a clean save removes the temporaries the killed children left */
    ck_assert_int_eq(gs_ckpt_save_full(path, &meta_2x1x2, &ta, 1, NULL, NULL, &err), GS_OK);
    ck_assert_int_eq(count_entries_except("model.safetensors"), 0);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *core = tcase_create("core");
    tcase_add_checked_fixture(core, make_tmpdir, remove_tmpdir);
    tcase_add_test(core, test_sharded_round_trip);
    tcase_add_test(core, test_sharded_without_optimizer);
    tcase_add_test(core, test_replicas_deduplicated);
    tcase_add_test(core, test_threaded_ranks);
    tcase_add_test(core, test_crc32_reference);
    tcase_add_test(core, test_full_round_trip);
    tcase_add_test(core, test_full_python_reader);
    tcase_set_timeout(core, 30); /* python3 behind a pyenv shim takes seconds to start */
    tcase_add_test(core, test_writer_layout);
    tcase_add_test(core, test_records_across_processes);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("errors");
    tcase_add_checked_fixture(errors, make_tmpdir, remove_tmpdir);
    tcase_add_test(errors, test_header_errors);
    tcase_add_test(errors, test_file_errors);
    tcase_add_test(errors, test_checkpoint_errors);
    tcase_add_test(errors, test_record_errors);
    tcase_add_test(errors, test_index_verified);
    suite_add_tcase(s, errors);
    TCase *crash = tcase_create("crash");
    tcase_add_checked_fixture(crash, make_tmpdir_fast, remove_tmpdir);
    tcase_set_timeout(crash, 120);
    tcase_add_test(crash, test_crash_sharded);
    tcase_add_test(crash, test_crash_full);
    suite_add_tcase(s, crash);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(checkpoint_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
