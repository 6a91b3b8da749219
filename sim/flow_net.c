/* Flow mode's solver: max-min fair sharing of capacitated links between flows, by progressive
 * filling over the connected component a start or a finish touches (sim/flow.h: gs_flow_net). */
#include "sim/flow.h"

#include <stdlib.h>
#include <string.h>

#include "sim/flow_internal.h"

/* A link counts as full once its residual capacity is under this fraction of its capacity. */
#define GS__FLOW_FULL_EPS 1e-9

/* ---------------------------------------------------------------------- the solver ------- */

typedef struct flow_slot {
    uint32_t *link;     /* links crossed */
    double *demand;     /* bytes/s on each at full speed */
    uint32_t n, cap;
    uint32_t version;
    int active;
    int frozen;         /* solver scratch */
    double work_left;   /* seconds at full speed still to run, as of `last` */
    double last;        /* when work_left was last brought up to date */
    double speed;       /* 0..1 */
    double new_speed;   /* solver scratch */
    double end;         /* projected end */
} flow_slot;

typedef struct link_slot {
    double cap;
    uint32_t *flows; /* active flows crossing the link, in start order */
    uint32_t n, cap_flows;
} link_slot;

struct gs_flow_net {
    link_slot *l;
    size_t nlinks;
    /* per link, apart from link_slot so that the component walk and the solver's passes read
     * dense arrays (a few hundred KiB on 16K GPUs instead of link_slot's MiBs) */
    uint32_t *lmark;    /* component mark */
    double *lresidual;  /* solver scratch: capacity left, bytes/s */
    double *lload;      /* solver scratch: unfrozen flows' demand, bytes/s */
    double *lfull;      /* GS__FLOW_FULL_EPS x capacity: full below this residual */
    flow_slot *f;
    size_t nf, fcap;
    uint32_t *free_ids; /* slots free for reuse, used last-in first-out */
    size_t nfree, free_cap;
    uint32_t *fmark;    /* per slot: component mark */
    /* the flow being described */
    uint32_t *blink;
    double *bbytes;     /* the flow's own bytes per link */
    double *btotal;     /* with the copies it stands for (gs_flow_add_bytes_shared) */
    size_t bn, bcap;
    uint32_t *bpos; /* per link: index in blink + 1 while described, 0 otherwise */
    /* component scratch */
    uint32_t *clinks, *cflows;
    size_t cl_cap, cf_cap;
    uint32_t mark;
    gs_flow_change *chg;
    size_t nchg, chg_cap;
};

int gs__flow_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

gs_status gs_flow_net_create(size_t nlinks, const double *capacity, gs_flow_net **out)
{
    gs_flow_net *n = calloc(1, sizeof *n);
    *out = NULL;
    if (!n)
        return GS_ERR_NOMEM;
    n->nlinks = nlinks;
    n->l = calloc(nlinks ? nlinks : 1, sizeof *n->l);
    n->bpos = calloc(nlinks ? nlinks : 1, sizeof *n->bpos);
    n->lmark = calloc(nlinks ? nlinks : 1, sizeof *n->lmark);
    n->lresidual = calloc(nlinks ? nlinks : 1, sizeof *n->lresidual);
    n->lload = calloc(nlinks ? nlinks : 1, sizeof *n->lload);
    n->lfull = calloc(nlinks ? nlinks : 1, sizeof *n->lfull);
    /* a component has at most every link, and the walk writes one past its last */
    n->clinks = malloc((nlinks + 1) * sizeof *n->clinks);
    n->cl_cap = nlinks + 1;
    if (!n->l || !n->bpos || !n->lmark || !n->lresidual || !n->lload || !n->lfull || !n->clinks) {
        gs_flow_net_destroy(n);
        return GS_ERR_NOMEM;
    }
    for (size_t i = 0; i < nlinks; i++) {
        if (!(capacity[i] > 0.0)) {
            gs_flow_net_destroy(n);
            return GS_ERR_INPUT;
        }
        n->l[i].cap = capacity[i];
        n->lfull[i] = GS__FLOW_FULL_EPS * capacity[i];
    }
    *out = n;
    return GS_OK;
}

void gs_flow_net_destroy(gs_flow_net *n)
{
    if (!n)
        return;
    if (n->l)
        for (size_t i = 0; i < n->nlinks; i++)
            free(n->l[i].flows);
    for (size_t i = 0; i < n->nf; i++) {
        free(n->f[i].link);
        free(n->f[i].demand);
    }
    free(n->l);
    free(n->lmark);
    free(n->lresidual);
    free(n->lload);
    free(n->lfull);
    free(n->f);
    free(n->free_ids);
    free(n->fmark);
    free(n->blink);
    free(n->bbytes);
    free(n->btotal);
    free(n->bpos);
    free(n->clinks);
    free(n->cflows);
    free(n->chg);
    free(n);
}

void gs_flow_begin(gs_flow_net *n)
{
    for (size_t i = 0; i < n->bn; i++)
        n->bpos[n->blink[i]] = 0;
    n->bn = 0;
}

gs_status gs_flow_add_bytes_shared(gs_flow_net *n, uint32_t link, double bytes, double copies)
{
    if (link >= n->nlinks || !(copies >= 1.0))
        return GS_ERR_INPUT;
    if (!(bytes > 0.0))
        return GS_OK;
    if (n->bpos[link]) {
        n->bbytes[n->bpos[link] - 1] += bytes;
        n->btotal[n->bpos[link] - 1] += bytes * copies;
        return GS_OK;
    }
    size_t c1 = n->bcap, c2 = n->bcap, c3 = n->bcap;
    if (gs__flow_grow((void **)&n->blink, &c1, n->bn + 1, sizeof *n->blink) != 0 ||
        gs__flow_grow((void **)&n->bbytes, &c2, n->bn + 1, sizeof *n->bbytes) != 0 ||
        gs__flow_grow((void **)&n->btotal, &c3, n->bn + 1, sizeof *n->btotal) != 0)
        return GS_ERR_NOMEM;
    n->bcap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    n->blink[n->bn] = link;
    n->bbytes[n->bn] = bytes;
    n->btotal[n->bn] = bytes * copies;
    n->bpos[link] = (uint32_t)++n->bn;
    return GS_OK;
}

gs_status gs_flow_add_bytes(gs_flow_net *n, uint32_t link, double bytes)
{
    return gs_flow_add_bytes_shared(n, link, bytes, 1.0);
}

static int add_change(gs_flow_net *n, uint32_t id)
{
    if (gs__flow_grow((void **)&n->chg, &n->chg_cap, n->nchg + 1, sizeof *n->chg) != 0)
        return -1;
    n->chg[n->nchg++] = (gs_flow_change){id, n->f[id].version, n->f[id].end};
    return 0;
}

/* Collect the connected component of links and flows reachable from the given links. clinks
 * holds every link and cflows every flow slot, so the walk appends without checking room: a
 * link is written at the end and counted when it was not marked yet (no branch to mispredict
 * on the walk's most frequent step). */
static int component(gs_flow_net *n, const uint32_t *seed, size_t nseed, size_t *ncl, size_t *ncf)
{
    size_t nl = 0, nfl = 0;
    if (gs__flow_grow((void **)&n->cflows, &n->cf_cap, n->nf, sizeof *n->cflows) != 0)
        return -1;
    uint32_t *clinks = n->clinks, *cflows = n->cflows, *fmark = n->fmark;
    uint32_t mk = ++n->mark;
    if (mk == 0) { /* wrapped: clear the marks */
        memset(n->lmark, 0, n->nlinks * sizeof *n->lmark);
        memset(n->fmark, 0, n->nf * sizeof *n->fmark);
        mk = n->mark = 1;
    }
    uint32_t *lmark = n->lmark;
    for (size_t i = 0; i < nseed; i++) {
        uint32_t l = seed[i];
        clinks[nl] = l;
        nl += lmark[l] != mk;
        lmark[l] = mk;
    }
    for (size_t q = 0; q < nl; q++) {
        const link_slot *ls = &n->l[clinks[q]];
        for (uint32_t j = 0; j < ls->n; j++) {
            uint32_t fid = ls->flows[j];
            if (fmark[fid] == mk)
                continue;
            fmark[fid] = mk;
            cflows[nfl++] = fid;
            const flow_slot *fs = &n->f[fid];
            const uint32_t *fl = fs->link;
            for (uint32_t k = 0; k < fs->n; k++) {
                uint32_t l = fl[k];
                clinks[nl] = l;
                nl += lmark[l] != mk;
                lmark[l] = mk;
            }
        }
    }
    *ncl = nl;
    *ncf = nfl;
    return 0;
}

/* Progressive filling over the component: raise the common speed of every unfrozen flow until a
 * link fills (its flows freeze at that speed) or the speed reaches 1. Then bring every flow whose
 * speed changed up to date at now and list it. `fresh` (or UINT32_MAX) is always listed. */
static int solve(gs_flow_net *n, size_t ncl, size_t ncf, double now, uint32_t fresh)
{
    double level = 0.0;
    size_t unfrozen = ncf;
    double *residual = n->lresidual, *load = n->lload;
    const uint32_t *clinks = n->clinks;
    for (size_t i = 0; i < ncl; i++)
        residual[clinks[i]] = n->l[clinks[i]].cap;
    for (size_t i = 0; i < ncf; i++) {
        flow_slot *fs = &n->f[n->cflows[i]];
        fs->frozen = 0;
        fs->new_speed = 1.0;
    }
    while (unfrozen > 0) {
        double delta = 1.0 - level;
        for (size_t i = 0; i < ncl; i++)
            load[clinks[i]] = 0.0;
        for (size_t i = 0; i < ncf; i++) {
            const flow_slot *fs = &n->f[n->cflows[i]];
            if (fs->frozen)
                continue;
            for (uint32_t k = 0; k < fs->n; k++)
                load[fs->link[k]] += fs->demand[k];
        }
        for (size_t i = 0; i < ncl; i++) {
            uint32_t l = clinks[i];
            if (load[l] > 0.0 && residual[l] / load[l] < delta)
                delta = residual[l] / load[l];
        }
        if (delta < 0.0)
            delta = 0.0;
        level += delta;
        for (size_t i = 0; i < ncl; i++) {
            uint32_t l = clinks[i];
            if (load[l] > 0.0)
                residual[l] -= delta * load[l];
        }
        if (level >= 1.0 - GS__FLOW_FULL_EPS) {
            for (size_t i = 0; i < ncf; i++) {
                flow_slot *fs = &n->f[n->cflows[i]];
                if (!fs->frozen)
                    fs->new_speed = 1.0;
            }
            break;
        }
        for (size_t i = 0; i < ncf; i++) {
            flow_slot *fs = &n->f[n->cflows[i]];
            if (fs->frozen)
                continue;
            for (uint32_t k = 0; k < fs->n; k++) {
                if (residual[fs->link[k]] <= n->lfull[fs->link[k]]) {
                    fs->frozen = 1;
                    fs->new_speed = level;
                    unfrozen--;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < ncf; i++) {
        uint32_t fid = n->cflows[i];
        flow_slot *fs = &n->f[fid];
        if (fid != fresh && fs->new_speed == fs->speed)
            continue;
        if (fid != fresh) {
            fs->work_left -= fs->speed * (now - fs->last);
            if (fs->work_left < 0.0)
                fs->work_left = 0.0;
        }
        fs->last = now;
        fs->speed = fs->new_speed > 0.0 ? fs->new_speed : GS__FLOW_FULL_EPS;
        fs->end = now + fs->work_left / fs->speed;
        fs->version++;
        if (add_change(n, fid) != 0)
            return -1;
    }
    return 0;
}

/* Puts the described flow on its links at now_s with speed 0 (not yet solved): *id. */
static gs_status post_flow(gs_flow_net *n, double now_s, double work_s, uint32_t *id)
{
    uint32_t fid;
    flow_slot *fs;
    double scale = 1.0;
    if (!(work_s > 0.0))
        return GS_ERR_INPUT;
    if (n->nfree > 0) {
        fid = n->free_ids[--n->nfree];
    } else {
        size_t c1 = n->fcap, c2 = n->fcap;
        if (gs__flow_grow((void **)&n->f, &c1, n->nf + 1, sizeof *n->f) != 0 ||
            gs__flow_grow((void **)&n->fmark, &c2, n->nf + 1, sizeof *n->fmark) != 0)
            return GS_ERR_NOMEM;
        n->fcap = c1 < c2 ? c1 : c2;
        fid = (uint32_t)n->nf++;
        memset(&n->f[fid], 0, sizeof n->f[fid]);
        n->fmark[fid] = 0;
    }
    fs = &n->f[fid];
    if (fs->cap < n->bn) {
        uint32_t *l = realloc(fs->link, n->bn * sizeof *l);
        if (l)
            fs->link = l;
        double *d = realloc(fs->demand, n->bn * sizeof *d);
        if (d)
            fs->demand = d;
        if (!l || !d)
            return GS_ERR_NOMEM; /* the slot stays inactive; the run stops */
        fs->cap = (uint32_t)n->bn;
    }
    fs->n = (uint32_t)n->bn;
    /* the scale that keeps the flow's own bytes within every link's capacity; the copies it
     * stands for (btotal) then share the links with it at that scale */
    for (size_t i = 0; i < n->bn; i++) {
        double d = n->bbytes[i] / work_s, c = n->l[n->blink[i]].cap;
        fs->link[i] = n->blink[i];
        fs->demand[i] = n->btotal[i] / work_s;
        if (d * scale > c)
            scale = c / d;
    }
    for (uint32_t i = 0; i < fs->n; i++) {
        link_slot *ls = &n->l[fs->link[i]];
        size_t cap = ls->cap_flows;
        fs->demand[i] *= scale;
        if (gs__flow_grow((void **)&ls->flows, &cap, ls->n + 1, sizeof *ls->flows) != 0)
            return GS_ERR_NOMEM;
        ls->cap_flows = (uint32_t)cap;
        ls->flows[ls->n++] = fid;
    }
    fs->active = 1;
    fs->work_left = work_s;
    fs->last = now_s;
    fs->speed = 0.0;
    *id = fid;
    return GS_OK;
}

gs_status gs_flow_start(gs_flow_net *n, double now_s, double work_s, uint32_t *id)
{
    gs_status rc;
    n->nchg = 0;
    if ((rc = post_flow(n, now_s, work_s, id)) != GS_OK)
        return rc;
    flow_slot *fs = &n->f[*id];
    if (fs->n == 0) {
        fs->speed = 1.0;
        fs->end = now_s + work_s;
        fs->version++;
        return add_change(n, *id) == 0 ? GS_OK : GS_ERR_NOMEM;
    }
    size_t ncl, ncf;
    if (component(n, fs->link, fs->n, &ncl, &ncf) != 0 || solve(n, ncl, ncf, now_s, *id) != 0)
        return GS_ERR_NOMEM;
    return GS_OK;
}

gs_status gs_flow_post(gs_flow_net *n, double now_s, double work_s, uint32_t *id)
{
    return post_flow(n, now_s, work_s, id);
}

gs_status gs_flow_solve_all(gs_flow_net *n, double now_s)
{
    size_t ncl = 0, ncf = 0;
    n->nchg = 0;
    for (size_t i = 0; i < n->nlinks; i++) {
        if (n->l[i].n == 0)
            continue;
        if (gs__flow_grow((void **)&n->clinks, &n->cl_cap, ncl + 1, sizeof *n->clinks) != 0)
            return GS_ERR_NOMEM;
        n->clinks[ncl++] = (uint32_t)i;
    }
    for (size_t i = 0; i < n->nf; i++) {
        flow_slot *fs = &n->f[i];
        if (!fs->active)
            continue;
        if (fs->n == 0 && fs->speed == 0.0) { /* posted, on no link: runs alone */
            fs->speed = 1.0;
            fs->last = now_s;
            fs->end = now_s + fs->work_left;
            fs->version++;
            if (add_change(n, (uint32_t)i) != 0)
                return GS_ERR_NOMEM;
            continue;
        }
        if (fs->n == 0)
            continue;
        if (gs__flow_grow((void **)&n->cflows, &n->cf_cap, ncf + 1, sizeof *n->cflows) != 0)
            return GS_ERR_NOMEM;
        n->cflows[ncf++] = (uint32_t)i;
    }
    return solve(n, ncl, ncf, now_s, UINT32_MAX) == 0 ? GS_OK : GS_ERR_NOMEM;
}

gs_status gs_flow_finish(gs_flow_net *n, double now_s, uint32_t id)
{
    flow_slot *fs;
    n->nchg = 0;
    if (id >= n->nf || !n->f[id].active)
        return GS_ERR_INPUT;
    fs = &n->f[id];
    for (uint32_t i = 0; i < fs->n; i++) {
        link_slot *ls = &n->l[fs->link[i]];
        for (uint32_t j = 0; j < ls->n; j++)
            if (ls->flows[j] == id) {
                /* keep the start order: shift, not swap */
                memmove(&ls->flows[j], &ls->flows[j + 1], (ls->n - j - 1) * sizeof *ls->flows);
                ls->n--;
                break;
            }
    }
    fs->active = 0;
    fs->version++;
    if (gs__flow_grow((void **)&n->free_ids, &n->free_cap, n->nfree + 1, sizeof *n->free_ids) != 0)
        return GS_ERR_NOMEM;
    n->free_ids[n->nfree++] = id;
    if (fs->n == 0)
        return GS_OK;
    /* no flow left on its links: nothing to re-solve (the component would hold no flow) */
    uint32_t shared = 0;
    for (uint32_t i = 0; i < fs->n && !shared; i++)
        shared = n->l[fs->link[i]].n;
    if (!shared)
        return GS_OK;
    size_t ncl, ncf;
    if (component(n, fs->link, fs->n, &ncl, &ncf) != 0 || solve(n, ncl, ncf, now_s, UINT32_MAX) != 0)
        return GS_ERR_NOMEM;
    return GS_OK;
}

size_t gs_flow_changes(const gs_flow_net *n, const gs_flow_change **out)
{
    *out = n->chg;
    return n->nchg;
}

int gs_flow_current(const gs_flow_net *n, uint32_t id, uint32_t version)
{
    return id < n->nf && n->f[id].active && n->f[id].version == version;
}

double gs_flow_speed(const gs_flow_net *n, uint32_t id) { return id < n->nf ? n->f[id].speed : 0.0; }

double gs_flow_end(const gs_flow_net *n, uint32_t id) { return id < n->nf ? n->f[id].end : 0.0; }
