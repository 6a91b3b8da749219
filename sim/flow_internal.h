/* Flow mode's insides shared by its files (sim/flow_net.c: the solver; sim/flow.c: the cluster's
 * links). Private to sim/. The caller owns the array gs__flow_grow reallocates. */
#ifndef GS_SIM_FLOW_INTERNAL_H
#define GS_SIM_FLOW_INTERNAL_H

#include <stddef.h>

/* Grows *p (an array of *cap elements of elem bytes) to hold at least need, doubling from 16;
 * 0, or -1 when out of memory (*p and *cap unchanged). */
int gs__flow_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
