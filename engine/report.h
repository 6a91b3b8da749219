/* The step report: from a schedule and its timings (any backend) to step time, tokens/s, MFU and
 * HFU, communication per dimension (total, exposed, overlapped), NCCL share, bubble share, peak
 * memory, and warnings mapped to the seed article's troubleshooting table.
 *
 * Ownership: gs_report is caller storage; its warnings live in a gs_diag it owns (fini frees). */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/ledger.h"
#include "engine/scenario.h"
#include "engine/schedule.h"

typedef struct gs_report {
    double step_time_s;
    double tokens_per_s;
    double tokens_per_s_per_gpu;
    double model_flops;       /* per step, whole job: 6 N tokens + attention (Megatron's count) */
    double hardware_flops;    /* per step, whole job: every compute event's FLOPs (recompute too) */
    double peak_flops;        /* per GPU, dense, training precision */
    double mfu, hfu;
    double tflops_per_gpu;    /* model TFLOP/s per GPU */
    double comm_s[GS_DIM_COUNT];     /* per dim: time its stream is busy (critical rank) */
    double exposed_s[GS_DIM_COUNT];  /* ... of which not hidden behind compute */
    double compute_s;                /* compute stream busy (critical rank) */
    double comm_share;               /* time any communication runs / step (max over ranks) */
    double bubble_share;             /* time a rank neither computes nor communicates / step
                                        (average over ranks) */
    uint64_t peak_bytes;             /* memory ledger peak (equal to the event walk) */
    uint64_t gpu_bytes;
    uint64_t events;                 /* events played */
    uint64_t critical_rank;          /* the rank list whose last event ends the step */
    double host_issue_s;             /* the backend's host model: the longest time a rank's host
                                        thread takes to issue the step's kernels and collectives
                                        (sim); 0 where not known */
    gs_diag warnings;
} gs_report;

gs_status gs_report_build(const gs_scenario *s, const gs_schedule *sch, gs_timing *const *timing, gs_report *r,
                          gs_error *err);
void gs_report_fini(gs_report *r);

/* Chrome trace JSON (Perfetto; engine/trace.c): one process per rank list, one thread per stream,
 * one slice per event with its args, a memory counter track, and flow arrows linking each
 * collective's members and each send to its receive. Times in whole nanoseconds, so that no slice
 * overlaps its neighbour on a stream. Deterministic text. GS_ERR_NOMEM, GS_ERR_IO. */
gs_status gs_report_trace(const gs_schedule *sch, gs_timing *const *timing, FILE *f, gs_error *err);

#endif
