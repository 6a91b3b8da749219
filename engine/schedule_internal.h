/* Internal hooks between the schedule's storage and validation (engine/schedule.c) and the
 * builders (engine/build*.c). Not part of the public API.
 *
 * Ownership: nothing here allocates beyond the call. */
#ifndef GS_SCHEDULE_INTERNAL_H
#define GS_SCHEDULE_INTERNAL_H

#include "engine/scenario.h"
#include "engine/schedule.h"
#include "engine/status.h"

#include <stdint.h>
#include <stdio.h>

/* The ledger half of gs_schedule_validate (implemented in engine/build.c): per rank, the bytes
 * sent over its collectives and sends equal the traffic ledger, and gs_rank_peak_bytes equals
 * the memory ledger's peak. Called after gs_schedule_validate_structure succeeded. */
gs_status gs__schedule_check_ledger(const gs_schedule *sch, const gs_scenario *s, gs_error *err);

/* Stream hazards of one rank's list (engine/schedule_hazard.c): every scratch tensor that events
 * of two streams touch, one of them writing, is touched in an order the dependencies and the streams'
 * list order fix. GS_ERR_RUNTIME naming the two events and the tensor; GS_ERR_NOMEM. Called by
 * gs_schedule_validate_structure once the lists are otherwise valid (indices in range). */
gs_status gs__schedule_check_hazards(const gs_rank_events *r, gs_error *err);

/* ---- shared by engine/schedule*.c ---- */

/* The name tables (gs_*_name), in enum order; the loader looks names up in them. */
extern const char *const gs__event_kind_names[GS_EV_KIND_COUNT];
extern const char *const gs__stream_names[GS_STREAM_COUNT];
extern const char *const gs__phase_names[GS_PHASE_COUNT];
extern const char *const gs__op_names[GS_OP_COUNT];
extern const char *const gs__coll_names[GS_COLL_COUNT];
extern const char *const gs__coll_short[GS_COLL_COUNT];
extern const char *const gs__group_names[GS_GROUP_KIND_COUNT];
extern const char *const gs__tensor_kind_names[GS_T_KIND_COUNT];
extern const char *const gs__link_names[GS_LINK_LISTS];

/* Grows *p (cap elements of elem bytes) to hold need, doubling; -1 when out of memory. */
int gs__grow(void **p, size_t *cap, size_t need, size_t elem);
/* printf at buf + *pos (len bytes in all), advancing *pos, truncating at the end. */
void gs__append(char *buf, size_t len, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "emb", "head", "none" or the layer's index, into buf. */
const char *gs__layer_word(int32_t layer, char *buf, size_t len);

/* Event i of rank list r's name in buf (an array), for messages. */
#define EV_NAME(r, i, buf) (gs_event_name((r), &(r)->events[i], (buf), sizeof(buf)), (buf))

/* A buffered writer: dumps run to 10^7 lines, and stdio's printf per field dominates. */
#define GS_OUT_BYTES 65536

typedef struct gs__writer {
    FILE *f;
    size_t n;
    char buf[GS_OUT_BYTES];
} gs__writer;

void gs__out_flush(gs__writer *o);
void gs__out_reserve(gs__writer *o, size_t k);
void gs__out_mem(gs__writer *o, const char *s, size_t k);
void gs__out_str(gs__writer *o, const char *s);
void gs__out_char(gs__writer *o, char c);
void gs__out_u64(gs__writer *o, uint64_t v);
void gs__out_i64(gs__writer *o, int64_t v);
void gs__out_double(gs__writer *o, double d);
void gs__out_layer(gs__writer *o, int32_t layer);
void gs__out_list(gs__writer *o, const uint32_t *l, uint32_t n, char empty);
void gs__out_small(gs__writer *o, unsigned v);
/* Flushes and checks the stream; GS_ERR_IO naming what was written. */
gs_status gs__out_finish(gs__writer *o, gs_error *err, const char *what);

#endif
