/* Pipeline point-to-point on the exec side: the stage boundaries' activations and gradients, in
 * the p2p groups exec/p2p_groups.c plans, and tied embeddings' gradient exchange between the first
 * and last stages. */
#include "exec/p2p_groups.h"
#include "exec/train_internal.h"

/* The tied embedding's gradient window: the root unit's gradients the optimizer reads (at g,
 * flat offset lo, len elements). */
static void tied_window(const rank_st *r, float **g, uint64_t *lo, uint64_t *len)
{
    float *p;
    gs__train_opt_window(r, r->nunits - 1, &p, g, lo, len);
}

/* A p2p event's buffer and size; the tied exchange's send side stages this rank's gradient over
 * [0, word_n) (zeros outside its window when the gradient is sharded: only the window is read
 * by the peer, whose window is the same). */
static void *p2p_buf(const ctx *c, const gs_event *e, action act, uint64_t *bytes)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    uint64_t mbs = t->mbs, mb = e->mb, l = (uint64_t)e->layer;
    *bytes = t->Tl * t->h * sizeof(float);
    switch (act) {
    case A_RECV_FWD: return r->x[l * mbs + mb];
    case A_SEND_FWD: return r->x[(l + 1) * mbs + mb];
    case A_RECV_BWD: return r->dx[(l + 1) * mbs + mb];
    case A_SEND_BWD: return r->dx[l * mbs + mb];
    case A_TIED_RECV: *bytes = r->word_n * sizeof(float); return r->xbuf;
    case A_TIED_SEND: {
        *bytes = r->word_n * sizeof(float);
        float *g;
        uint64_t lo, len;
        tied_window(r, &g, &lo, &len);
        if (!r->xstage) /* the whole unit's gradient (zeros outside a ZeRO-1 slice): its first word_n */
            return r->tbuf[r->grad_t[r->nunits - 1]];
        t->ops->fill(t->drv, c->s, r->xstage, 0.0f, r->word_n);
        if (lo < r->word_n)
            t->ops->copy(t->drv, c->s, r->xstage + lo, g,
                         (lo + len < r->word_n ? len : r->word_n - lo) * sizeof(float));
        return r->xstage;
    }
    default: return NULL;
    }
}

/* After the tied exchange's receive: the peer's gradient added over this rank's window. Both
 * sides add the same two operands, so the copies stay equal to the bit. */
static void tied_add(const ctx *c)
{
    rank_st *r = c->r;
    float *g;
    uint64_t lo, len;
    tied_window(r, &g, &lo, &len);
    if (lo < r->word_n)
        c->t->ops->k.add(c->s, g, r->xbuf + lo, lo + len < r->word_n ? len : r->word_n - lo);
}

gs_status gs__train_p2p_action(const ctx *c, action act)
{
    gs_train *t = c->t;
    rank_st *r = c->r;
    const gs_event *e = c->e;
    gs_status rc = GS_OK;
    if (c->pl->lead)
        return GS_OK; /* issued in the group of another event on this stream */
    /* the group: the sends before this event that it issues, this event, the receives after it
     * that it issues (sends first, then receives in list order, as the host driver posts them) */
    gs_drv_p2p ops[GS_P2P_GROUP_MAX_SENDS + 2];
    size_t n = 0, j = (size_t)(e - c->re->events);
    size_t lo = c->pl->first1 ? c->pl->first1 - 1 : j, hi = c->pl->last1 ? c->pl->last1 - 1 : j;
    int self_recv = !(act == A_SEND_FWD || act == A_SEND_BWD || act == A_TIED_SEND);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = lo; i <= hi; i++) {
            const gs_event *me = &c->re->events[i];
            action ma = i == j ? act : (action)r->plans[i].act;
            int is_recv = i == j ? self_recv : me->kind == GS_EV_RECV;
            if ((i != j && (me->stream != e->stream || r->plans[i].lead != j + 1)) || is_recv != pass)
                continue;
            if (n == sizeof ops / sizeof ops[0])
                return gs_error_set(c->err, GS_ERR_RUNTIME, "a p2p group of more than %zu operations", n);
            ops[n].recv = is_recv;
            ops[n].peer = me->peer;
            ops[n].buf = p2p_buf(c, me, ma, &ops[n].bytes);
            n++;
        }
    if (n > 1 && t->ops->p2p_group)
        rc = t->ops->p2p_group(t->drv, c->s, r->rank, ops, n, c->err);
    else
        for (size_t i = 0; i < n && rc == GS_OK; i++)
            rc = ops[i].recv ? t->ops->recv(t->drv, c->s, r->rank, ops[i].peer, ops[i].buf, ops[i].bytes, c->err)
                             : t->ops->send(t->drv, c->s, r->rank, ops[i].peer, ops[i].buf, ops[i].bytes, c->err);
    if (rc == GS_OK && act == A_TIED_RECV)
        tied_add(c);
    return rc;
}

