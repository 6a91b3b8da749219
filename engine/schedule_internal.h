/* Internal hooks between the schedule's storage and validation (engine/schedule.c) and the
 * builders (engine/build*.c). Not part of the public API.
 *
 * Ownership: nothing here allocates beyond the call. */
#ifndef GS_SCHEDULE_INTERNAL_H
#define GS_SCHEDULE_INTERNAL_H

#include "engine/scenario.h"
#include "engine/schedule.h"
#include "engine/status.h"

/* The ledger half of gs_schedule_validate (implemented in engine/build.c): per rank, the bytes
 * sent over its collectives and sends equal the traffic ledger, and gs_rank_peak_bytes equals
 * the memory ledger's peak. Called after gs_schedule_validate_structure succeeded. */
gs_status gs__schedule_check_ledger(const gs_schedule *sch, const gs_scenario *s, gs_error *err);

/* Stream hazards of one rank's list (engine/schedule_hazard.c): every scratch tensor that events
 * of two streams touch, one of them writing, is touched in an order the dependencies and the streams'
 * list order fix. GS_ERR_RUNTIME naming the two events and the tensor; GS_ERR_NOMEM. Called by
 * gs_schedule_validate_structure once the lists are otherwise valid (indices in range). */
gs_status gs__schedule_check_hazards(const gs_rank_events *r, gs_error *err);

#endif
