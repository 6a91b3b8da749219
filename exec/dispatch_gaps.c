/* Dispatch gaps of a measured step (exec/dispatch_gaps.h). */
#include "exec/dispatch_gaps.h"

void gs_dispatch_gaps_rank(const gs_rank_events *re, const gs_timing *timing, double *gap_s, size_t *count,
                           double *largest_s)
{
    double sum = 0, largest = 0, prev_end = 0;
    size_t n = 0;
    for (size_t e = 0; e < re->nevents; e++) {
        const gs_event *ev = &re->events[e];
        if (ev->stream != GS_STREAM_COMPUTE)
            continue;
        double ready = prev_end;
        const uint32_t *deps = gs_event_list(re, ev, GS_LINK_DEPS);
        for (uint16_t j = 0; j < ev->nlinks[GS_LINK_DEPS]; j++)
            if (re->events[deps[j]].stream != GS_STREAM_COMPUTE && timing[deps[j]].end_s > ready)
                ready = timing[deps[j]].end_s;
        double gap = timing[e].start_s - ready;
        if (gap > 0) {
            sum += gap;
            n++;
            if (gap > largest)
                largest = gap;
        }
        if (timing[e].end_s > prev_end)
            prev_end = timing[e].end_s;
    }
    *gap_s = sum;
    *count = n;
    *largest_s = largest;
}

void gs_dispatch_gaps_step(const gs_schedule *sch, gs_timing *const *timing, gs_dispatch_gaps *out)
{
    out->gap_s = 0;
    out->rank = 0;
    out->gaps = 0;
    out->largest_s = 0;
    int any = 0;
    for (size_t i = 0; i < sch->nranks; i++) {
        if (!timing[i])
            continue;
        double g, l;
        size_t n;
        gs_dispatch_gaps_rank(&sch->ranks[i], timing[i], &g, &n, &l);
        if (!any || g > out->gap_s) {
            out->gap_s = g;
            out->rank = sch->ranks[i].rank;
            out->gaps = n;
            out->largest_s = l;
            any = 1;
        }
    }
}
