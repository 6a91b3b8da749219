/* Measured collectives: the alpha-beta lines a calibration fitted per op and group size
 * (t = alpha + size / beta, nccl-tests size) replace the algorithm models for the link class
 * they were measured on. Group sizes between two measured ones interpolate alpha and 1/beta
 * linearly in the group size; outside the measured range the nearest measured size is used
 * (stated in gridstep(1): a calibration extrapolates no further). */
#include <math.h>

#include "sim/collective_internal.h"

static const gs_link_fits *fits_for(const gs_topo *t, uint64_t nnodes)
{
    if (t->one_machine || nnodes <= 1)
        return t->fit_intra.set ? &t->fit_intra : NULL;
    return t->fit_inter.set ? &t->fit_inter : NULL;
}

static double line_time(const gs_coll_fit *f, double bytes)
{
    return f->alpha_s + bytes / f->beta_bytes_per_s;
}

double gs__measured_time(const gs_topo *t, gs_coll_op op, const gs_coll_shape *s, double bytes)
{
    const gs_link_fits *lf = fits_for(t, s->nnodes);
    if (!lf || (unsigned)op >= GS_COLL_COUNT)
        return INFINITY;
    const gs_coll_fit *row = lf->coll[op];
    int lo = -1, hi = -1;
    for (int i = 0; i < GS_COLL_FIT_SIZES && row[i].nranks; i++) {
        if (row[i].nranks <= s->nranks)
            lo = i;
        if (row[i].nranks >= s->nranks && hi < 0)
            hi = i;
    }
    if (lo < 0 && hi < 0)
        return INFINITY;
    if (lo < 0)
        return line_time(&row[hi], bytes);
    if (hi < 0 || hi == lo)
        return line_time(&row[lo], bytes);
    double w = (double)(s->nranks - row[lo].nranks) / (double)(row[hi].nranks - row[lo].nranks);
    double alpha = (1 - w) * row[lo].alpha_s + w * row[hi].alpha_s;
    double inv = (1 - w) / row[lo].beta_bytes_per_s + w / row[hi].beta_bytes_per_s;
    return alpha + bytes * inv;
}

double gs__measured_p2p_time(const gs_topo *t, int same_node, double bytes)
{
    const gs_link_fits *lf = fits_for(t, same_node ? 1 : 2);
    if (!lf || !lf->p2p.nranks)
        return INFINITY;
    return line_time(&lf->p2p, bytes);
}
