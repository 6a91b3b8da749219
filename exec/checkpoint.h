/* Training checkpoints of a sharded Llama model: a sharded directory (one safetensors file per rank
 * plus index.json) holding parameters and Adam state, or one plain safetensors file of the full
 * parameters; both written crash-safely (a crash leaves the previous checkpoint or the new one,
 * never a torn one). The formats and the replacement protocol are described at the end of this
 * header.
 *
 * Ownership: the caller owns every tensor buffer; save borrows them for the call, load writes
 * into them. A gs_ckpt_writer and a gs_ckpt_reader (_create/_destroy) own their copies of the
 * directory name, metadata and index; a gs_ckpt_index (_init/_fini) owns its tensors and pieces;
 * a gs_ckpt_rank_record (_init/_fini) owns its pieces and their names. */
#ifndef GS_CHECKPOINT_H
#define GS_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

#define GS_CKPT_MAX_DIMS 8
#define GS_CKPT_FORMAT "gridstep-checkpoint"
#define GS_CKPT_FORMAT_VERSION 3
#define GS_CKPT_FORMAT_VERSION_TEXT "3"
/* the oldest version this build reads (2: every tensor had optimizer state or none did) */
#define GS_CKPT_FORMAT_VERSION_MIN 2

/* ---- the caller's view of what one rank holds ---------------------------------------------- */

/* One contiguous run of a tensor's elements, as the row-major flattening of the full tensor. */
typedef struct gs_ckpt_piece {
    uint64_t offset; /* elements from the start of the flattened full tensor */
    uint64_t count;  /* elements */
    float *data;     /* count parameter values (fp32) */
    float *adam_m;   /* count Adam first moments, or NULL: no optimizer state */
    float *adam_v;   /* count Adam second moments; NULL exactly when adam_m is */
} gs_ckpt_piece;

/* The pieces one rank owns of one tensor. */
typedef struct gs_ckpt_shard {
    const char *name; /* HF Llama name, e.g. "model.layers.3.self_attn.q_proj.weight" */
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS]; /* the FULL tensor's shape */
    const gs_ckpt_piece *pieces;
    size_t piece_count;
} gs_ckpt_shard;

typedef struct gs_ckpt_rank_view {
    const gs_ckpt_shard *shards;
    size_t shard_count;
} gs_ckpt_rank_view;

/* What a checkpoint says about the run that wrote it. */
typedef struct gs_ckpt_meta {
    int dp, pp, tp;       /* the grid */
    uint64_t step;        /* optimizer steps done (Adam's t) */
    const char *scenario; /* scenario name; "" if none */
} gs_ckpt_meta;

/* Test hook: called at every step of a save (after each file is written, before and after each
 * rename); a crash test kills the process there. phase names: "tmp-dir", "file-written",
 * "files-synced", "index-written", "old-moved", "new-in-place", "old-removed", "full-written",
 * "full-renamed". path: the file or directory just touched. */
typedef void (*gs_ckpt_hook)(const char *phase, const char *path, void *arg);

/* ---- sharded save --------------------------------------------------------------------------- */

typedef struct gs_ckpt_writer gs_ckpt_writer;

/* Starts a save of world ranks into DIR: recovers a half-swapped DIR (see the protocol), removes
 * the temporary directories of dead saves, creates DIR.tmp-PID and its marker. Refuses
 * (GS_ERR_INPUT, saying why) a DIR that is not a gridstep checkpoint and a DIR.old no save wrote
 * (exec/ckpt_own.h's rule). */
gs_status gs_ckpt_writer_create(gs_ckpt_writer **out, const char *dir, const gs_ckpt_meta *meta, int world,
                                gs_error *err);
/* The same; force 1: a DIR that is not a gridstep checkpoint is moved aside at commit to
 * DIR.replaced-PID (gs_ckpt_writer_displaced says where), never deleted. */
gs_status gs_ckpt_writer_create_forced(gs_ckpt_writer **out, const char *dir, const gs_ckpt_meta *meta, int world,
                                       int force, gs_error *err);
/* Where a forced commit moved what was at DIR, or NULL. */
const char *gs_ckpt_writer_displaced(const gs_ckpt_writer *w);
/* Installs the test hook and calls it once at once with "tmp-dir" (the directory exists now). */
void gs_ckpt_writer_set_hook(gs_ckpt_writer *w, gs_ckpt_hook hook, void *arg);
/* Writes rank's file (fsynced). Distinct ranks may call this concurrently from their own threads;
 * every rank must call it once (with zero shards if it owns nothing) before commit. Pieces held
 * by several ranks (DP replicas) should be passed by one only; identical duplicates are tolerated
 * (the index names the lowest rank), partial overlaps are an error at commit. */
gs_status gs_ckpt_writer_write_rank(gs_ckpt_writer *w, int rank, const gs_ckpt_rank_view *view, gs_error *err);
/* After every rank wrote: checks that the pieces tile every tensor exactly (same shape on every
 * rank, no hole, no partial overlap, optimizer state on all pieces or none), writes index.json
 * and swaps the new directory in place of the old one. On failure DIR is left as it was. */
gs_status gs_ckpt_writer_commit(gs_ckpt_writer *w, gs_error *err);
/* Frees the writer; an uncommitted save's temporary directory is removed (its own files). */
void gs_ckpt_writer_destroy(gs_ckpt_writer *w);

/* All of the above from one thread: ranks[r] is rank r's view, world = rank_count. */
gs_status gs_ckpt_save_sharded(const char *dir, const gs_ckpt_meta *meta, const gs_ckpt_rank_view *ranks,
                               int rank_count, gs_error *err);

/* ---- sharded save across processes ------------------------------------------------------------
 * One root process creates the writer (gs_ckpt_writer_create: recovery, stale-temporary cleanup,
 * DIR.tmp-PID with the root's PID) and passes gs_ckpt_writer_tmp_dir to the others, which attach
 * to that directory and write their ranks' files into it. Each process then describes what it
 * wrote as a rank record (gs_ckpt_writer_export_rank), serialised (gs_ckpt_rank_record_encode)
 * and sent to the root, which decodes and imports it (gs_ckpt_writer_import_rank) and commits:
 * the same tiling checks, index.json and swap as one process. DIR must be on a filesystem every
 * process sees (multi-host: a shared one); an import checks the rank's file is there. */

/* One piece as a record describes it: no data. */
typedef struct gs_ckpt_piece_info {
    char *tensor; /* tensor name (owned) */
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS]; /* the full tensor's shape */
    uint64_t offset;                  /* elements into the flattened full tensor */
    uint64_t count;                   /* elements */
    int has_optim;                    /* 1: Adam m and v saved beside the parameters */
} gs_ckpt_piece_info;

/* What one rank contributes to a save: its pieces in the order it wrote them, and (for a sharded
 * save) its file's size and CRC-32. */
typedef struct gs_ckpt_rank_record {
    int rank, world;
    uint64_t step;        /* the saving run's optimizer step */
    int has_file;         /* 1: a rank file was written (file_bytes, file_crc32 valid) */
    uint64_t file_bytes;  /* bytes */
    uint32_t file_crc32;
    gs_ckpt_piece_info *pieces; /* owned */
    size_t piece_count;
} gs_ckpt_rank_record;

void gs_ckpt_rank_record_init(gs_ckpt_rank_record *rec);
void gs_ckpt_rank_record_fini(gs_ckpt_rank_record *rec);
/* The pieces of view (no file) as rank `rank` of world's record. Checks the view as write_rank does. */
gs_status gs_ckpt_rank_record_of_view(gs_ckpt_rank_record *rec, int rank, int world, uint64_t step,
                                      const gs_ckpt_rank_view *view, gs_error *err);
/* Serialises rec: little-endian fields, then a CRC-32 of all the bytes before it. *buf is the
 * caller's to free. */
gs_status gs_ckpt_rank_record_encode(const gs_ckpt_rank_record *rec, unsigned char **buf, size_t *bytes,
                                     gs_error *err);
/* Parses bytes of encode's output into out (init'ed by it): refuses (GS_ERR_INPUT, saying what)
 * a truncated or garbled buffer (CRC-32), an unknown magic, trailing bytes, or a piece out of
 * range (empty name or one holding '@', 0 or more than GS_CKPT_MAX_DIMS dimensions, an empty
 * piece or one beyond its tensor). Bounded, for fuzzing. */
gs_status gs_ckpt_rank_record_decode(const void *buf, size_t bytes, gs_ckpt_rank_record *out, gs_error *err);

/* The temporary directory a created writer writes into (DIR.tmp-PID, PID the creator's). */
const char *gs_ckpt_writer_tmp_dir(const gs_ckpt_writer *w);
/* A writer for a non-root process: writes rank files into tmp_dir, which the root's writer for
 * the same DIR created (refused unless tmp_dir is "DIR.tmp-DIGITS" and a directory visible here).
 * No recovery or cleanup; destroy leaves tmp_dir to the root; commit is refused. */
gs_status gs_ckpt_writer_attach(gs_ckpt_writer **out, const char *dir, const char *tmp_dir, const gs_ckpt_meta *meta,
                                int world, gs_error *err);
/* The record of what write_rank wrote for rank (GS_ERR_INPUT if it has not). */
gs_status gs_ckpt_writer_export_rank(const gs_ckpt_writer *w, int rank, gs_ckpt_rank_record *rec, gs_error *err);
/* Takes rec as rank rec->rank's write on the root: its world and step must be the writer's, the
 * rank not written yet, every piece valid, and its file present in the temporary directory with
 * rec->file_bytes bytes. Commit then checks it with the others. */
gs_status gs_ckpt_writer_import_rank(gs_ckpt_writer *w, const gs_ckpt_rank_record *rec, gs_error *err);

/* ---- the index ------------------------------------------------------------------------------ */

typedef struct gs_ckpt_index_piece {
    uint32_t file;   /* index into gs_ckpt_index.files */
    uint64_t offset; /* elements into the flattened full tensor */
    uint64_t count;  /* elements */
    char *name;      /* tensor name inside the file (owned) */
    char *adam_m;    /* names of the Adam moments inside the file, or NULL (owned) */
    char *adam_v;
} gs_ckpt_index_piece;

typedef struct gs_ckpt_index_tensor {
    char *name; /* owned */
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS];
    gs_ckpt_index_piece *pieces; /* owned, sorted by offset, tiling [0, numel) */
    size_t piece_count;
} gs_ckpt_index_tensor;

typedef struct gs_ckpt_index_file {
    char *name;     /* e.g. "rank00003-of-00008.safetensors" (owned; no '/') */
    uint64_t bytes; /* the file's size */
    uint32_t crc32; /* CRC-32 of the whole file (exec/crc32.h), checked when a load opens it */
} gs_ckpt_index_file;

typedef struct gs_ckpt_index {
    int version;
    int dp, pp, tp, world;
    uint64_t step;
    char *scenario;       /* owned */
    int has_optimizer;    /* 1: Adam's moments saved (version 2: on every piece; 3: on every
                             piece of the tensors that have them, the others training state) */
    gs_ckpt_index_file *files; /* owned, files[r] is rank r's */
    size_t file_count;
    gs_ckpt_index_tensor *tensors; /* owned, sorted by name */
    size_t tensor_count;
} gs_ckpt_index;

void gs_ckpt_index_init(gs_ckpt_index *ix);
void gs_ckpt_index_fini(gs_ckpt_index *ix);
/* Parses and validates index.json text (len bytes, no NUL needed): format and version, names,
 * shapes, pieces tiling each tensor exactly, file references. Bounded, for fuzzing. */
gs_status gs_ckpt_index_parse(const char *buf, size_t len, gs_ckpt_index *out, gs_error *err);
/* The tensor of that name, or NULL. */
const gs_ckpt_index_tensor *gs_ckpt_index_find(const gs_ckpt_index *ix, const char *name);

/* ---- sharded load --------------------------------------------------------------------------- */

typedef struct gs_ckpt_reader gs_ckpt_reader;

/* Opens DIR (or DIR.old holding a save's marker for DIR, when DIR is missing after a crash
 * mid-swap) and parses and verifies its index. Each rank file a load touches is checked against
 * the index (size, then CRC-32 of all its bytes, then its metadata: a torn, corrupt or swapped-in
 * file is refused) before any of its data is used. GS_ERR_INPUT with "no checkpoint" in the
 * message when neither exists, with "no index.json" when DIR has none. */
gs_status gs_ckpt_reader_create(gs_ckpt_reader **out, const char *dir, gs_error *err);
/* The parsed index (metadata: grid, step, scenario). */
const gs_ckpt_index *gs_ckpt_reader_index(const gs_ckpt_reader *r);
/* The directory actually read (DIR or DIR.old). */
const char *gs_ckpt_reader_path(const gs_ckpt_reader *r);
/* Fills every piece of view from the checkpoint, bit-exactly: data always, adam_m/adam_v when
 * non-NULL. Pieces are located by element range, so any split of a tensor loads. grid (may be
 * NULL) is the caller's, only used to explain a shape mismatch. Errors name the tensor. Distinct
 * threads may load concurrently. */
gs_status gs_ckpt_reader_load_rank(const gs_ckpt_reader *r, const gs_ckpt_rank_view *view, const gs_ckpt_meta *grid,
                                   gs_error *err);
void gs_ckpt_reader_destroy(gs_ckpt_reader *r);

/* One-thread convenience: opens DIR, loads every rank's view, returns the saved step in
 * *step (may be NULL). */
gs_status gs_ckpt_load_sharded(const char *dir, const gs_ckpt_meta *grid, const gs_ckpt_rank_view *ranks,
                               int rank_count, uint64_t *step, gs_error *err);

/* ---- full (unsharded) file ------------------------------------------------------------------ */

typedef struct gs_ckpt_full_tensor {
    const char *name;
    size_t ndim;
    uint64_t shape[GS_CKPT_MAX_DIMS];
    const float *data; /* the gathered full tensor, row-major */
} gs_ckpt_full_tensor;

/* Writes FILE (any safetensors reader can load it: F32 tensors under their HF names, metadata
 * "format": "pt" plus gridstep's step, grid and scenario) atomically: FILE.tmp-PID, fsync,
 * rename, fsync of the directory. hook may be NULL. */
gs_status gs_ckpt_save_full(const char *path, const gs_ckpt_meta *meta, const gs_ckpt_full_tensor *tensors,
                            size_t count, gs_ckpt_hook hook, void *hook_arg, gs_error *err);
/* Fills the data of every piece of view from a full file (F32, or BF16 widened exactly);
 * adam_m/adam_v are ignored (a full file has no optimizer state). */
gs_status gs_ckpt_load_full(const char *path, const gs_ckpt_rank_view *view, gs_error *err);

/* ---- formats and protocol --------------------------------------------------------------------
 *
 * Sharded directory DIR/:
 *   rankRRRRR-of-WWWWW.safetensors  one per rank (5-digit, 0-based rank, world size). For every
 *       piece (tensor NAME, element offset OFF, count C) it holds an F32 tensor "NAME@OFF" of shape
 *       [C], and with optimizer state "optim.m.NAME@OFF" and "optim.v.NAME@OFF" beside it.
 *       __metadata__: format, format_version, rank, world, step, dp, pp, tp, scenario.
 *   index.json  {"format": "gridstep-checkpoint", "format_version": 3, "index_crc32": C,
 *       "metadata": {"dp", "pp", "tp", "world", "step", "scenario", "optimizer": "adam"|"none"},
 *       "files": [{"name": "rank00000-of-00008.safetensors", "bytes": N, "crc32": C}, ...],
 *       "tensors": {"NAME": {"dtype": "F32", "shape": [..], "pieces": [{"file": 0, "offset": OFF,
 *           "count": C, "name": "NAME@OFF", "adam_m": "optim.m.NAME@OFF", "adam_v": ...}, ...]}}}
 *       Pieces are sorted by offset and tile [0, numel) exactly once. Every piece of a tensor has
 *       adam_m and adam_v or none does: "optimizer" is "adam" when any tensor has them; a tensor
 *       without them is training state that is no parameter (FP8 scales; version 3: version 2
 *       asked it of every tensor alike). Keys sorted, 1-space indent.
 *       index_crc32: CRC-32 (exec/crc32.h) of the document without that key, dumped compact with
 *       keys sorted (jansson's JSON_COMPACT | JSON_SORT_KEYS; integers and strings only, so one
 *       text per document). Version 1 had no such key and is not read.
 *   Loading verifies, before using any data: the index's checksum (last, after the checks that
 *   can name a damage: a piece's names must be NAME@OFF and optim.m/v.NAME@OFF of its own tensor
 *   and offset), each rank file's size and CRC-32, its metadata (format, rank = its place in
 *   files, world, step) against the index, and each tensor a piece reads: present, F32, [count].
 *
 * Replacement protocol (save to DIR; exec/ckpt_own.h says what a save may touch):
 *   0. recovery: a DIR.old holding a marker for DIR is renamed back to DIR when DIR is missing (a
 *      crash hit between steps 3 and 4) and removed (its own files) when both exist (a crash hit
 *      step 5). DIR.tmp-PID directories holding a marker for DIR whose process (on this host) is
 *      gone are removed (their own files). An existing DIR that is not a gridstep checkpoint, or a
 *      DIR.old without that marker in the way, is refused (GS_ERR_INPUT) unless forced.
 *   1. mkdir DIR.tmp-PID; write its marker (.gridstep-save: this save's identity and DIR's name),
 *      every rank file (fflush + fsync each) and then index.json (fsync); fsync DIR.tmp-PID.
 *   2. if DIR does not exist go to 4.
 *   3. write this save's marker into DIR, rename DIR -> DIR.old (forced, a DIR that is not a
 *      checkpoint goes to DIR.replaced-PID instead and stays there); fsync the parent.
 *   4. rename DIR.tmp-PID -> DIR; fsync the parent.
 *   5. remove DIR.old (the files a save writes, the marker last, then the directory if empty);
 *      fsync the parent.
 * DIR only ever appears by the rename of a complete, synced directory, so: load reads DIR if it
 * exists, else a DIR.old holding a marker for DIR, and either is a whole checkpoint. A save that
 * fails before step 3 leaves DIR untouched. Full files: stale FILE.tmp-PID of dead processes are
 * removed only when empty or headed like a full file; FILE.tmp-PID (O_EXCL), fflush + fsync,
 * rename over FILE, fsync the parent.
 *
 * Across processes the protocol is the same, run by the root: step 0 and the mkdir of step 1 on
 * the root (PID = the root's), the rank files written by their own processes into it (each
 * fsynced), index.json, the directory fsync and steps 2-5 on the root after every record is in.
 * A process that dies mid-save leaves DIR.tmp-PID (the root's PID) and DIR as they were; the next
 * save whose root runs on the same host removes it (its PID is gone). Multi-host, only the root's
 * host can tell whether that PID is alive: a leftover is removed by the next save whose root sees
 * no such process, and two saves to one DIR at once are not supported. */

#endif
