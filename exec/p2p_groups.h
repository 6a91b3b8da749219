/* p2p groups: which of a schedule's sends go out together with which receive.
 *
 * Ownership: gs_p2p_groups_plan fills caller-owned arrays and keeps nothing after it returns.
 *
 * A driver whose sends wait for their receivers (NCCL's ncclSend is "blocking for the GPU"; the
 * host driver under GRIDSTEP_HOST_P2P=rendezvous) deadlocks when two neighbours each send before
 * receiving from the other, every send waiting for a receive queued behind the peer's own send.
 * NCCL's answer, and Megatron's, is to issue the sends and the receive of one step as one group
 * (ncclGroupStart/End; batch_isend_irecv), so they progress together.
 *
 * The plan works on the schedule alone (every rank's list, as exec builds it), so every process of
 * a multi-process run derives the same groups. A group is issued by one event on a stream (its
 * place in the list): the sends before it that it carries ("deferred": at their own place they do
 * nothing) and the receives after it that it carries ("hoisted": issued ahead of their place, which
 * then does nothing; the events that read a receive's data still wait for its own place, after the
 * group on the same stream). exec gives each boundary activation and gradient its own buffer, so
 * a receive issued early writes nothing another event uses meanwhile.
 *
 *   pairing   a send whose stream's next event is a receive goes with it (1F1B's steady state:
 *             send_forward_recv_backward and its kin). That receive waits for nothing the send did
 *             not, so the send leaves when it would have. The host's eager sends keep just this.
 *   hoisting  (rendezvous only) the step is then played symbolically under rendezvous semantics:
 *             compute and copies take no time, a collective completes when every member has
 *             reached it, a p2p group when the partner of each of its members has been issued, and
 *             each stream runs in list order after its dependencies. When nothing can move, the lowest rank whose
 *             group waits for a receive that its peer has not issued, while the peer's stream is
 *             held by a p2p event of its own that waits, has that receive hoisted into the peer's
 *             waiting group (with the peer's unissued receives from the same sender before it, as
 *             NCCL matches a pair's messages in order; sends the receive carried go alone), and the
 *             play goes on. This is Megatron's interleaved schedule posting the next forward's
 *             receive with the current sends; only a pipeline receive with no dependencies is
 *             hoisted (not the tied exchange's, whose add follows it). Each hoist is made only
 *             where the play shows a wait cycle without it; a receive issued early holds its
 *             group (and the stream) until its data comes, so hoists cost time where sends would
 *             otherwise have been eager.
 *
 * What the plan does not model: NCCL gives no guarantee that operations on different
 * communicators progress concurrently; like Megatron, the plan assumes the TP, DP and p2p
 * communicators do. */
#ifndef GS_P2P_GROUPS_H
#define GS_P2P_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/schedule.h"
#include "engine/status.h"

/* The most members one group holds (sends: the host driver's limit). */
#define GS_P2P_GROUP_MAX_SENDS 64

/* lead[i] (one array per rank list of sch, nevents entries, caller-owned) receives, per event: 0
 * (the event issues itself, and any group it carries), or 1 + the index of the event that issues
 * it (a deferred send or a hoisted receive, on the same stream). With pair = 0 every entry is 0.
 * rendezvous = 1 adds the hoists; *hoisted (may be NULL) receives their count. GS_ERR_UNSUPPORTED
 * when, under rendezvous, the play stays stuck with no hoist left to make (a schedule that would
 * deadlock whatever the grouping); err names the waiting events. GS_ERR_INPUT for a send with no
 * matching receive (or the reverse) or a schedule without every rank; GS_ERR_NOMEM. */
gs_status gs_p2p_groups_plan(const gs_schedule *sch, int pair, int rendezvous, uint32_t *const *lead,
                             size_t *hoisted, gs_error *err);

#endif
