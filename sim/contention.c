/* The compute slowdown beside each communication stream of a rank, from the group each stream
 * serves: a large collective's bus bandwidth and channels (a 256 MiB all-gather, as FSDP units and
 * gradient buckets are) or, for the pipeline stream, a send's bandwidth and its one channel. */
#include "sim/contention.h"

#include <math.h>
#include <stdint.h>

#include "sim/collective.h"

/* The factors of one group's stream, o[0] for tensor-bound kernels and o[1] for memory-bound
 * ones: 1 for a group of one; otherwise gs_compute_overlap_factors of the group's traffic (none
 * while waiting) and its channels, or `sms` SMs when the kernels are not NCCL's (sms > 0; a
 * calibration's flat factor when it has one). 1 on the copy engines: Transformer Engine's
 * userbuffers overlap each exchange with the GEMM that consumes or produces it, a compute-bound
 * kernel whose SMs the copy engines leave alone and whose HBM traffic they do not saturate. */
static void group_factors(const gs_compute_model *cm, const gs_topo *t, const gs_coll_shape *sh, int p2p, int waiting,
                          int copy_engine, int sms, double o[2])
{
    const uint64_t bytes = 256ull << 20;
    o[0] = o[1] = 1.0;
    if (sh->nranks < 2)
        return;
    if (!(cm->overlap_hbm_per_byte > 0.0)) {
        o[0] = o[1] = cm->overlap_slowdown; /* a calibration's measured factor, whatever runs the copies */
        return;
    }
    if (copy_engine)
        return;
    if (p2p) {
        double tm = gs_p2p_time(t, sh->nnodes < 2, bytes);
        gs_compute_overlap_factors(cm, waiting || !(tm > 0.0) ? 0.0 : (double)bytes / tm, 1, &o[0], &o[1]);
        return;
    }
    gs_coll_cost cost;
    double busbw = gs_coll_estimate(t, GS_COLL_ALLGATHER, sh, bytes, GS_ALGO_COUNT, &cost) == GS_OK ? cost.busbw : 0.0;
    gs_compute_overlap_factors(cm, waiting ? 0.0 : busbw, sms > 0 ? sms : gs_coll_channels(t, sh), &o[0], &o[1]);
}

/* The expert-parallel exchange's factors: NCCL's all-to-all over the EP group (its channels), or
 * the flex dispatcher's kernels over the ETP x EP group on a fixed number of SMs, with the HBM
 * traffic of the bus bandwidth an all-gather over that group reaches. */
static void ep_factors(const gs_compute_model *cm, const gs_topo *t, int ep_overlap, uint64_t flex_sms,
                       const gs_coll_shape shape[GS_GROUP_KIND_COUNT], int waiting, double o[2])
{
    if (ep_overlap != GS_EP_OVERLAP_FLEX) {
        group_factors(cm, t, &shape[GS_GROUP_EP], 0, waiting, 0, 0, o);
        return;
    }
    const gs_coll_shape *sh = shape[GS_GROUP_TPEP].nranks > 1 ? &shape[GS_GROUP_TPEP] : &shape[GS_GROUP_EP];
    uint64_t sms = flex_sms ? flex_sms : GS_FLEX_DISPATCH_SMS;
    group_factors(cm, t, sh, 0, waiting, 0, sms < (uint64_t)INT32_MAX ? (int)sms : INT32_MAX, o);
}

static void fold(double o[2], const double g[2])
{
    o[0] = fmax(o[0], g[0]);
    o[1] = fmax(o[1], g[1]);
}

void gs_contention_streams(const gs_compute_model *cm, const gs_topo *t, int copy_engine_tp, int ep_overlap,
                           uint64_t flex_sms, const gs_coll_shape shape[GS_GROUP_KIND_COUNT], double moving[GS_STREAM_COUNT],
                           double moving_memory[GS_STREAM_COUNT], double waiting[GS_STREAM_COUNT])
{
    for (int s = 0; s < GS_STREAM_COUNT; s++)
        moving[s] = moving_memory[s] = waiting[s] = 1.0;
    for (int w = 0; w < 2; w++) {
        double dp[2] = {1.0, 1.0}, tp[2], pp[2], g[2];
        group_factors(cm, t, &shape[GS_GROUP_DP], 0, w, 0, 0, g);
        fold(dp, g);
        group_factors(cm, t, &shape[GS_GROUP_DP_INTRA], 0, w, 0, 0, g);
        fold(dp, g);
        group_factors(cm, t, &shape[GS_GROUP_DP_INTER], 0, w, 0, 0, g);
        fold(dp, g);
        group_factors(cm, t, &shape[GS_GROUP_TP], 0, w, copy_engine_tp, 0, tp);
        group_factors(cm, t, &shape[GS_GROUP_PP], 1, w, 0, 0, pp);
        if (ep_overlap) { /* the exchanges share the PP stream with the pipeline's sends */
            ep_factors(cm, t, ep_overlap, flex_sms, shape, w, g);
            fold(pp, g);
        }
        double *o = w ? waiting : moving;
        o[GS_STREAM_DP] = dp[0];
        o[GS_STREAM_TP] = tp[0];
        o[GS_STREAM_PP] = pp[0];
        if (!w) {
            moving_memory[GS_STREAM_DP] = dp[1];
            moving_memory[GS_STREAM_TP] = tp[1];
            moving_memory[GS_STREAM_PP] = pp[1];
        }
    }
}
