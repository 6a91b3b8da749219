/* What communication takes from compute on the same GPU: the slowdown factor a compute event
 * suffers while each of its rank's communication streams is busy, from the group that stream
 * serves (the SMs its NCCL kernel holds and the HBM traffic it makes, gs_compute_overlap_factors).
 *
 * Ownership: pure functions over caller values. */
#ifndef GS_SIM_CONTENTION_H
#define GS_SIM_CONTENTION_H

#include "engine/schedule.h"
#include "sim/compute.h"
#include "sim/topology.h"

/* Fills moving[s] (the factor of a tensor-bound kernel while stream s moves data),
 * moving_memory[s] (a memory-bound kernel's) and waiting[s] (a tensor-bound kernel's while the
 * stream's event waits for its peers: the SMs only; a memory-bound kernel then runs at full
 * speed) for every stream s: the DP stream serves the DP groups (HSDP: the
 * intra-node shard group and the replicas; the largest factor), the TP stream the TP group, the
 * PP stream its sends; 1 for the compute stream and for groups of one rank. copy_engine_tp: the
 * TP exchanges are Transformer Engine's userbuffers (tp_comm_overlap), whose peer copies run on
 * the copy engines beside compute-bound GEMMs: 1. shape is indexed by gs_group_kind.
 * ep_overlap (strategy.ep_overlap, 0 otherwise): the PP stream also carries the expert-parallel
 * exchanges while another micro-batch computes, so its factor is the larger of the sends' and
 * the exchange's: NCCL's all-to-all over the EP group, or (ep_overlap GS_EP_OVERLAP_FLEX) the
 * flex dispatcher's kernels on flex_sms SMs (0: GS_FLEX_DISPATCH_SMS) over the ETP x EP group. */
enum { GS_EP_OVERLAP_NONE, GS_EP_OVERLAP_A2A, GS_EP_OVERLAP_FLEX };
/* DeepEP's SMs under Megatron-Core's flex dispatcher: moe_deepep_num_sms, "historical default 20"
 * (megatron/core/transformer/transformer_config.py moe_flex_dispatcher_num_sms). */
#define GS_FLEX_DISPATCH_SMS 20
void gs_contention_streams(const gs_compute_model *cm, const gs_topo *t, int copy_engine_tp, int ep_overlap,
                           uint64_t flex_sms, const gs_coll_shape shape[GS_GROUP_KIND_COUNT], double moving[GS_STREAM_COUNT],
                           double moving_memory[GS_STREAM_COUNT], double waiting[GS_STREAM_COUNT]);

#endif
