/* Check suite for exec/ckpt_own: a checkpoint save touches only what it can prove is a save's.
 * A directory or file that is not a gridstep checkpoint is refused (or, forced, moved aside,
 * never deleted); a DIR.old or DIR.tmp-* without a save's marker is left alone; a save killed at
 * random instants (SIGKILL, hundreds of times), a save that runs out of file space (RLIMIT_FSIZE)
 * and a target that cannot be written all leave the previous checkpoint loadable and every
 * unrelated file of the parent directory as it was, byte for byte. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/status.h"
#include "exec/checkpoint.h"
#include "exec/ckpt_own.h"
#include "exec/crc32.h"

/* ---- a two-tensor model over two ranks, contents by generation --------------------------------- */

#define N_EMB 256 /* elements of each tensor */
#define WORLD 2

static float value_of(int gen, int kind, int tensor, uint64_t i)
{
    return (float)gen * 1000.0f + (float)(kind * 100 + tensor * 10) + (float)i * 0.001f;
}

typedef struct model_state {
    float buf[WORLD][2][3][N_EMB / WORLD]; /* rank, tensor, kind (param, m, v), elements */
    gs_ckpt_piece pieces[WORLD][2];
    gs_ckpt_shard shards[WORLD][2];
    gs_ckpt_rank_view views[WORLD];
} model_state;

static const char *const names[2] = {"model.embed_tokens.weight", "lm_head.weight"};

/* gen < 0: zeros (a load target). */
static void model_make(model_state *m, int gen)
{
    memset(m, 0, sizeof *m);
    for (int r = 0; r < WORLD; r++) {
        for (int t = 0; t < 2; t++) {
            uint64_t off = (uint64_t)r * (N_EMB / WORLD);
            for (int k = 0; k < 3; k++)
                for (uint64_t i = 0; i < N_EMB / WORLD; i++)
                    m->buf[r][t][k][i] = gen < 0 ? 0.0f : value_of(gen, k, t, off + i);
            m->pieces[r][t] = (gs_ckpt_piece){off, N_EMB / WORLD, m->buf[r][t][0], m->buf[r][t][1], m->buf[r][t][2]};
            m->shards[r][t] = (gs_ckpt_shard){names[t], 2, {16, 16}, &m->pieces[r][t], 1};
        }
        m->views[r] = (gs_ckpt_rank_view){m->shards[r], 2};
    }
}

static int model_is(const model_state *m, int gen)
{
    for (int r = 0; r < WORLD; r++)
        for (int t = 0; t < 2; t++)
            for (int k = 0; k < 3; k++)
                for (uint64_t i = 0; i < N_EMB / WORLD; i++)
                    if (m->buf[r][t][k][i] != value_of(gen, k, t, (uint64_t)r * (N_EMB / WORLD) + i))
                        return 0;
    return 1;
}

static const gs_ckpt_meta meta = {.dp = 2, .pp = 1, .tp = 1, .step = 1, .scenario = "own"};

static gs_status save_gen(const char *dir, int gen, int force, gs_error *err)
{
    static model_state m;
    model_make(&m, gen);
    gs_ckpt_meta mt = meta;
    mt.step = (uint64_t)gen;
    gs_ckpt_writer *w = NULL;
    gs_status st = gs_ckpt_writer_create_forced(&w, dir, &mt, WORLD, force, err);
    for (int r = 0; st == GS_OK && r < WORLD; r++)
        st = gs_ckpt_writer_write_rank(w, r, &m.views[r], err);
    if (st == GS_OK)
        st = gs_ckpt_writer_commit(w, err);
    gs_ckpt_writer_destroy(w);
    return st;
}

/* The generation the checkpoint at dir holds (loaded bit-exactly), or -1 if it does not load. */
static int loaded_gen(const char *dir, gs_error *err)
{
    static model_state m;
    model_make(&m, -1);
    uint64_t step = 0;
    if (gs_ckpt_load_sharded(dir, NULL, m.views, WORLD, &step, err) != GS_OK)
        return -1;
    return model_is(&m, (int)step) ? (int)step : -1;
}

/* ---- fixture and the parent's unrelated files ---------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    /* kills test processes, not machines: tmpfs when there is one (fsync is free there) */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/gs-own-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

static void remove_tmpdir(void)
{
    chmod(tmpdir, 0700);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *tpath(const char *name)
{
    static char buf[8][512];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void make_dir(const char *path)
{
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

/* A PID that no process has now (a dead save's, as far as the code can tell). */
static long dead_pid(void)
{
    for (long p = 4000000; p > 1000; p -= 7919)
        if (kill((pid_t)p, 0) != 0 && errno == ESRCH)
            return p;
    ck_abort_msg("no free PID found");
    return -1;
}

/* Files a user keeps beside the checkpoint "ck", some named like a save's own, with their
 * contents: none may change or go. */
typedef struct bystander {
    char rel[128];
    char text[64];
} bystander;

static bystander bystanders[8];
static int nbystanders;

static void add_bystander(const char *rel, const char *text)
{
    bystander *b = &bystanders[nbystanders++];
    snprintf(b->rel, sizeof b->rel, "%s", rel);
    snprintf(b->text, sizeof b->text, "%s", text);
    char *slash = strchr(b->rel, '/');
    if (slash) {
        char d[128];
        snprintf(d, sizeof d, "%.*s", (int)(slash - b->rel), b->rel);
        mkdir(tpath(d), 0755);
    }
    write_file(tpath(b->rel), b->text);
}

static void make_bystanders(void)
{
    char rel[128];
    long dead = dead_pid();
    nbystanders = 0;
    add_bystander("notes.txt", "the user's notes");
    /* a directory named like a dead save's temporary, without a marker */
    snprintf(rel, sizeof rel, "ck.tmp-%ld/results.csv", dead);
    add_bystander(rel, "a,b\n1,2\n");
    /* a file named like a dead full save's temporary, not headed like one */
    snprintf(rel, sizeof rel, "ck.tmp-%ld", dead + 1 == getpid() ? dead + 2 : dead + 1);
    add_bystander(rel, "not a checkpoint");
    add_bystander("ck.old.bak/keep.txt", "an old copy the user made");
    add_bystander("ck.tmp-x/index.json", "{\"format\": \"gridstep-checkpoint\"}");
}

static int bystanders_intact(char *why, size_t cap)
{
    for (int i = 0; i < nbystanders; i++) {
        char got[128] = {0};
        FILE *f = fopen(tpath(bystanders[i].rel), "r");
        size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
        if (f)
            fclose(f);
        if (!f || n != strlen(bystanders[i].text) || memcmp(got, bystanders[i].text, n) != 0) {
            snprintf(why, cap, "%s %s", bystanders[i].rel, f ? "changed" : "is gone");
            return 0;
        }
    }
    return 1;
}

/* ---- refusals: what a save must not replace ------------------------------------------------------- */

START_TEST(test_foreign_dir_refused)
{
    gs_error err;
    gs_error_init(&err);
    make_dir(tpath("ck"));
    write_file(tpath("ck/thesis.tex"), "chapter 1");
    make_dir(tpath("ck.old"));
    write_file(tpath("ck.old/backup.tex"), "chapter 0");
    ck_assert_int_eq(save_gen(tpath("ck"), 1, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "is not a gridstep checkpoint (a directory without index.json)") != NULL, "%s",
                  err.msg);
    ck_assert_msg(strstr(err.msg, "--force") != NULL, "%s", err.msg);
    ck_assert_int_eq(access(tpath("ck/thesis.tex"), F_OK), 0);
    ck_assert_int_eq(access(tpath("ck.old/backup.tex"), F_OK), 0);
    ck_assert_int_eq(gs_ckpt_check_target(tpath("ck"), 0, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "--save ") != NULL && strstr(err.msg, "not a gridstep checkpoint") != NULL, "%s",
                  err.msg);

    /* a regular file: refused, not renamed */
    write_file(tpath("file"), "data");
    ck_assert_int_eq(save_gen(tpath("file"), 1, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "a regular file") != NULL, "%s", err.msg);
    ck_assert_int_eq(access(tpath("file"), F_OK), 0);
    ck_assert_int_eq(access(tpath("file.old"), F_OK), -1);

    /* a checkpoint with a file it does not list is no longer only a checkpoint */
    ck_assert_int_eq(save_gen(tpath("real"), 1, 0, &err), GS_OK);
    write_file(tpath("real/README"), "what this run was");
    ck_assert_int_eq(save_gen(tpath("real"), 2, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "it holds README, which its index.json does not list") != NULL, "%s", err.msg);
    ck_assert_int_eq(loaded_gen(tpath("real"), &err), 1);

    /* forced: moved aside whole, nothing deleted, the new checkpoint in place */
    ck_assert_int_eq(save_gen(tpath("ck"), 3, 1, &err), GS_OK);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), 3);
    char aside[300];
    snprintf(aside, sizeof aside, "ck.replaced-%ld/thesis.tex", (long)getpid());
    ck_assert_int_eq(access(tpath(aside), F_OK), 0);
    ck_assert_int_eq(access(tpath("ck.old/backup.tex"), F_OK), 0);
}
END_TEST

START_TEST(test_foreign_old_refused)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(save_gen(tpath("ck"), 1, 0, &err), GS_OK);
    make_dir(tpath("ck.old"));
    write_file(tpath("ck.old/mine.txt"), "the user's");
    /* the swap would need ck.old: refused before anything is written */
    ck_assert_int_eq(save_gen(tpath("ck"), 2, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "ck.old exists and no save retired it there") != NULL, "%s", err.msg);
    ck_assert_int_eq(access(tpath("ck.old/mine.txt"), F_OK), 0);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), 1);
    ck_assert_int_eq(gs_ckpt_check_target(tpath("ck"), 0, 0, &err), GS_ERR_INPUT);
    /* with ck missing, a foreign ck.old is not read as the checkpoint either */
    ck_assert_int_eq(rename(tpath("ck"), tpath("ck.moved")), 0);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), -1);
    ck_assert_msg(strstr(err.msg, "no checkpoint") != NULL, "%s", err.msg);
    ck_assert_int_eq(access(tpath("ck.old/mine.txt"), F_OK), 0);
    /* an empty ck.old holds nothing to lose: the save goes ahead */
    ck_assert_int_eq(rename(tpath("ck.moved"), tpath("ck")), 0);
    ck_assert_int_eq(unlink(tpath("ck.old/mine.txt")), 0);
    ck_assert_int_eq(save_gen(tpath("ck"), 2, 0, &err), GS_OK);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), 2);
    ck_assert_int_eq(access(tpath("ck.old"), F_OK), -1);
}
END_TEST

START_TEST(test_stale_temporaries)
{
    gs_error err;
    gs_error_init(&err);
    char run[384], d1[64], d2[64], d3[64];
    long dead = dead_pid();
    gs_ckpt_run_id(run, sizeof run);
    /* a dead save's temporary (marker naming ck, this host, a gone PID): removed */
    char host[128];
    ck_assert_int_eq(sscanf(run, "%127s", host), 1);
    snprintf(d1, sizeof d1, "ck.tmp-%ld", dead);
    make_dir(tpath(d1));
    char dead_run[400];
    snprintf(dead_run, sizeof dead_run, "%s %ld 1 0", host, dead);
    ck_assert_int_eq(gs_ckpt_marker_write(tpath(d1), "ck", dead_run, &err), GS_OK);
    char f1[128];
    snprintf(f1, sizeof f1, "%s/rank00000-of-00002.safetensors", d1);
    write_file(tpath(f1), "partial");
    /* the same, but the user put a file into it: the save's files go, the user's and the
     * directory (and its marker) stay */
    snprintf(d2, sizeof d2, "ck.tmp-%ld", dead + 1 == getpid() ? dead + 2 : dead + 1);
    make_dir(tpath(d2));
    ck_assert_int_eq(gs_ckpt_marker_write(tpath(d2), "ck", dead_run, &err), GS_OK);
    char f2[128], f3[128];
    snprintf(f2, sizeof f2, "%s/index.json", d2);
    snprintf(f3, sizeof f3, "%s/diary.txt", d2);
    write_file(tpath(f2), "{}");
    write_file(tpath(f3), "dear diary");
    /* a live process's temporary (PID 1): left alone */
    snprintf(d3, sizeof d3, "ck.tmp-1");
    make_dir(tpath(d3));
    char live_run[400];
    snprintf(live_run, sizeof live_run, "%s 1 1 0", host);
    ck_assert_int_eq(gs_ckpt_marker_write(tpath(d3), "ck", live_run, &err), GS_OK);
    /* a dead save's temporary for another checkpoint name: left alone */
    char d4[64];
    snprintf(d4, sizeof d4, "ck.tmp-%ld", dead + 3 == getpid() ? dead + 4 : dead + 3);
    make_dir(tpath(d4));
    ck_assert_int_eq(gs_ckpt_marker_write(tpath(d4), "other", dead_run, &err), GS_OK);

    ck_assert_int_eq(save_gen(tpath("ck"), 1, 0, &err), GS_OK);
    ck_assert_int_eq(access(tpath(d1), F_OK), -1);
    ck_assert_int_eq(access(tpath(f2), F_OK), -1);
    ck_assert_int_eq(access(tpath(f3), F_OK), 0);
    ck_assert_int_eq(gs_ckpt_marker_read(tpath(d2), "ck", NULL), 1);
    ck_assert_int_eq(gs_ckpt_marker_read(tpath(d3), "ck", NULL), 1);
    ck_assert_int_eq(gs_ckpt_marker_read(tpath(d4), "other", NULL), 1);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), 1);
}
END_TEST

/* ---- the target before a run ------------------------------------------------------------------- */

START_TEST(test_target_checks)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_ckpt_check_target(tpath("fresh"), 1000, 0, &err), GS_OK);
    ck_assert_int_eq(access(tpath("fresh"), F_OK), -1); /* the check leaves nothing behind */
    ck_assert_int_eq(gs_ckpt_check_target(tpath("none/ck"), 1000, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "none does not exist") != NULL, "%s", err.msg);
    write_file(tpath("plain"), "x");
    ck_assert_int_eq(gs_ckpt_check_target(tpath("plain/ck"), 1000, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "plain is not a directory") != NULL, "%s", err.msg);
    /* more than any file system has free (2^62 bytes = 4 EiB) */
    ck_assert_int_eq(gs_ckpt_check_target(tpath("ck"), UINT64_C(1) << 62, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "(4611686018427387904 bytes) but") != NULL && strstr(err.msg, "free") != NULL, "%s",
                  err.msg);
    /* an estimate: 10^6 parameters with Adam over 2 ranks of 1 layer is 12e6 bytes of data and
     * under 16 * 1200 * 2 * 2 + 2^20 of the rest */
    uint64_t est = gs_ckpt_estimate_bytes(1000000, 1, 2, 1);
    ck_assert_uint_ge(est, 12000000);
    ck_assert_uint_le(est, 12000000 + 16 * 1200 * 2 * 2 + (1 << 20));
    ck_assert_uint_eq(gs_ckpt_estimate_bytes(UINT64_MAX / 4, 1, 1, 1), UINT64_MAX);
    /* a directory this process cannot write (root writes anywhere: not testable as root) */
    if (geteuid() != 0) {
        make_dir(tpath("ro"));
        ck_assert_int_eq(chmod(tpath("ro"), 0555), 0);
        ck_assert_int_eq(gs_ckpt_check_target(tpath("ro/ck"), 1000, 0, &err), GS_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "cannot create files in") != NULL, "%s", err.msg);
        ck_assert_int_eq(save_gen(tpath("ro/ck"), 1, 0, &err) != GS_OK, 1);
        ck_assert_int_eq(access(tpath("ro/ck"), F_OK), -1);
    }
    /* full files: another program's file is refused unless forced */
    write_file(tpath("model.safetensors"), "\x10\0\0\0\0\0\0\0{\"a\":1}        ");
    ck_assert_int_eq(gs_ckpt_check_full_target(tpath("model.safetensors"), 100, 0, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "not a full checkpoint gridstep wrote") != NULL, "%s", err.msg);
    ck_assert_int_eq(gs_ckpt_check_full_target(tpath("model.safetensors"), 100, 1, &err), GS_OK);
    ck_assert_int_eq(gs_ckpt_check_full_target(tpath("ro2/m.safetensors"), 100, 0, &err), GS_ERR_INPUT);
    make_dir(tpath("adir"));
    ck_assert_int_eq(gs_ckpt_check_full_target(tpath("adir"), 100, 1, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
}
END_TEST

/* ---- out of file space: the writes fail, the previous checkpoint stays ------------------------- */

START_TEST(test_disk_full)
{
    gs_error err;
    gs_error_init(&err);
    make_bystanders();
    ck_assert_int_eq(save_gen(tpath("ck"), 1, 0, &err), GS_OK);
    /* each rank file is about 3 x 128 x 4 = 1.5 KiB of data plus its header: a 1 KiB file size
     * limit fails the first rank file's write (EFBIG, as a full disk's ENOSPC) */
    /* the child must not touch Check: even a passing ck_assert writes a message to the
     * runner's channel, which the child shares (a kill mid-write garbles it) */
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1024, 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        gs_error e;
        gs_error_init(&e);
        _exit(save_gen(tpath("ck"), 2, 0, &e) == GS_ERR_IO ? 0 : 1);
    }
    ck_assert_int_ge(pid, 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the save did not fail with GS_ERR_IO: %d", status);
    ck_assert_int_eq(loaded_gen(tpath("ck"), &err), 1);
    char why[300];
    ck_assert_msg(bystanders_intact(why, sizeof why), "%s", why);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "ck.tmp-%ld", (long)pid);
    ck_assert_int_eq(access(tpath(tmp), F_OK), -1); /* the failed save cleaned its own */
}
END_TEST

/* ---- killed at random instants ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A child saving generation gen over ck, killed after delay_us (or left to finish: -1). Returns
 * 1 when it finished the save, 0 when the kill came first. */
static int save_in_child(int gen, long delay_us)
{
    pid_t pid = fork();
    if (pid == 0) { /* no Check calls here: see test_disk_full */
        gs_error e;
        gs_error_init(&e);
        _exit(save_gen(tpath("ck"), gen, 0, &e) == GS_OK ? 0 : 3);
    }
    ck_assert_int_ge(pid, 0);
    if (delay_us >= 0) {
        struct timespec d = {delay_us / 1000000, (delay_us % 1000000) * 1000};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "the save failed (status %d)", status);
    return WIFEXITED(status);
}

START_TEST(test_killed_at_random)
{
    enum { TRIALS = 240 };
    gs_error err;
    gs_error_init(&err);
    make_bystanders();
    ck_assert_int_eq(save_gen(tpath("ck"), 0, 0, &err), GS_OK);
    /* aim the kills: the time one save takes in a child */
    double t0 = now_s();
    for (int i = 1; i <= 3; i++)
        ck_assert_int_eq(save_in_child(i, -1), 1);
    double save_us = (now_s() - t0) / 3 * 1e6;
    int gen = 3, finished = 0, kept_old = 0;
    uint64_t rng = 29;
    for (int trial = 0; trial < TRIALS; trial++) {
        int next = gen + 1;
        long delay = (long)(rng_next(&rng) % (uint64_t)(1.3 * save_us + 1));
        int done = save_in_child(next, delay);
        int got = loaded_gen(tpath("ck"), &err);
        ck_assert_msg(got == gen || got == next, "trial %d (kill after %ld us): generation %d loads, expected %d or %d: %s",
                      trial, delay, got, gen, next, err.msg);
        ck_assert_msg(!done || got == next, "trial %d: the save finished but generation %d loads", trial, got);
        char why[300];
        ck_assert_msg(bystanders_intact(why, sizeof why), "trial %d (kill after %ld us): %s", trial, delay, why);
        finished += done;
        kept_old += got == gen;
        gen = got;
    }
    /* the kills landed on both sides of the swap */
    ck_assert_int_ge(kept_old, 10);
    ck_assert_int_ge(TRIALS - kept_old, 10);
    /* a clean save afterwards leaves the checkpoint and the bystanders only */
    ck_assert_int_eq(save_gen(tpath("ck"), gen + 1, 0, &err), GS_OK);
    char why[300];
    ck_assert_msg(bystanders_intact(why, sizeof why), "%s", why);
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int others = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, "ck") == 0)
            continue;
        int known = 0;
        for (int i = 0; i < nbystanders && !known; i++)
            known = strncmp(bystanders[i].rel, e->d_name, strlen(e->d_name)) == 0 &&
                    (bystanders[i].rel[strlen(e->d_name)] == '\0' || bystanders[i].rel[strlen(e->d_name)] == '/');
        others += !known;
        if (!known) {
            char cmd[600];
            snprintf(cmd, sizeof cmd, "ls -la %s/%s; cat %s/%s/.gridstep-save", tmpdir, e->d_name, tmpdir, e->d_name);
            fprintf(stderr, "left over: %s\n", e->d_name);
            if (system(cmd) != 0)
                fprintf(stderr, "(ls failed)\n");
        }
    }
    closedir(d);
    ck_assert_int_eq(others, 0);
    fprintf(stderr, "kill test: %d kills, save %.0f us, finished %d, old kept %d\n", TRIALS, save_us, finished,
            kept_old);
}
END_TEST

static Suite *own_suite(void)
{
    Suite *s = suite_create("ckpt_own");
    TCase *refuse = tcase_create("refusals");
    tcase_add_checked_fixture(refuse, make_tmpdir, remove_tmpdir);
    tcase_add_test(refuse, test_foreign_dir_refused);
    tcase_add_test(refuse, test_foreign_old_refused);
    tcase_add_test(refuse, test_stale_temporaries);
    tcase_add_test(refuse, test_target_checks);
    suite_add_tcase(s, refuse);
    TCase *crash = tcase_create("crash");
    tcase_add_checked_fixture(crash, make_tmpdir, remove_tmpdir);
    tcase_set_timeout(crash, 120);
    tcase_add_test(crash, test_disk_full);
    tcase_add_test(crash, test_killed_at_random);
    suite_add_tcase(s, crash);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(own_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
