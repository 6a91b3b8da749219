/* The compute slowdown beside each communication stream of a rank, from the group each stream
 * serves: a large collective's bus bandwidth and channels (a 256 MiB all-gather, as FSDP units and
 * gradient buckets are) or, for the pipeline stream, a send's bandwidth and its one channel. */
#include "sim/contention.h"

#include <math.h>
#include <stdint.h>

#include "sim/collective.h"

/* 1 for a group of one; otherwise gs_compute_overlap_factor of the group's traffic (none while
 * waiting) and its channels, or `sms` SMs when the kernels are not NCCL's (sms > 0; a
 * calibration's flat factor when it has one). 1 on the copy engines: Transformer Engine's
 * userbuffers overlap each exchange with the GEMM that consumes or produces it, a compute-bound
 * kernel whose SMs the copy engines leave alone and whose HBM traffic they do not saturate. */
static double group_factor(const gs_compute_model *cm, const gs_topo *t, const gs_coll_shape *sh, int p2p,
                           int waiting, int copy_engine, int sms)
{
    const uint64_t bytes = 256ull << 20;
    if (sh->nranks < 2)
        return 1.0;
    if (!(cm->overlap_hbm_per_byte > 0.0))
        return cm->overlap_slowdown; /* a calibration's measured factor, whatever runs the copies */
    if (copy_engine)
        return 1.0;
    if (p2p) {
        double tm = gs_p2p_time(t, sh->nnodes < 2, bytes);
        return gs_compute_overlap_factor(cm, waiting || !(tm > 0.0) ? 0.0 : (double)bytes / tm, 1);
    }
    gs_coll_cost cost;
    double busbw = gs_coll_estimate(t, GS_COLL_ALLGATHER, sh, bytes, GS_ALGO_COUNT, &cost) == GS_OK ? cost.busbw : 0.0;
    return gs_compute_overlap_factor(cm, waiting ? 0.0 : busbw, sms > 0 ? sms : gs_coll_channels(t, sh));
}

/* The expert-parallel exchange's factor: NCCL's all-to-all over the EP group (its channels), or
 * the flex dispatcher's kernels over the ETP x EP group on a fixed number of SMs, with the HBM
 * traffic of the bus bandwidth an all-gather over that group reaches. */
static double ep_factor(const gs_compute_model *cm, const gs_topo *t, int ep_overlap, uint64_t flex_sms,
                        const gs_coll_shape shape[GS_GROUP_KIND_COUNT], int waiting)
{
    if (ep_overlap != GS_EP_OVERLAP_FLEX)
        return group_factor(cm, t, &shape[GS_GROUP_EP], 0, waiting, 0, 0);
    const gs_coll_shape *sh = shape[GS_GROUP_TPEP].nranks > 1 ? &shape[GS_GROUP_TPEP] : &shape[GS_GROUP_EP];
    uint64_t sms = flex_sms ? flex_sms : GS_FLEX_DISPATCH_SMS;
    return group_factor(cm, t, sh, 0, waiting, 0, sms < (uint64_t)INT32_MAX ? (int)sms : INT32_MAX);
}

void gs_contention_streams(const gs_compute_model *cm, const gs_topo *t, int copy_engine_tp, int ep_overlap,
                           uint64_t flex_sms, const gs_coll_shape shape[GS_GROUP_KIND_COUNT], double moving[GS_STREAM_COUNT],
                           double waiting[GS_STREAM_COUNT])
{
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        moving[s] = waiting[s] = 1.0;
    for (int w = 0; w < 2; w++) {
        double *o = w ? waiting : moving;
        o[GS_STREAM_DP] = fmax(group_factor(cm, t, &shape[GS_GROUP_DP], 0, w, 0, 0),
                               fmax(group_factor(cm, t, &shape[GS_GROUP_DP_INTRA], 0, w, 0, 0),
                                    group_factor(cm, t, &shape[GS_GROUP_DP_INTER], 0, w, 0, 0)));
        o[GS_STREAM_TP] = group_factor(cm, t, &shape[GS_GROUP_TP], 0, w, copy_engine_tp, 0);
        o[GS_STREAM_PP] = group_factor(cm, t, &shape[GS_GROUP_PP], 1, w, 0, 0);
        if (ep_overlap) /* the exchanges share the PP stream with the pipeline's sends */
            o[GS_STREAM_PP] = fmax(o[GS_STREAM_PP], ep_factor(cm, t, ep_overlap, flex_sms, shape, w));
    }
}
