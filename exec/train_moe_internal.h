/* A mixture-of-experts block's state on the exec side, shared by exec/train_moe.c (layout, the
 * actions) and exec/train_moe_xchg.c (the routing decisions and the token exchanges).
 *
 * Ownership: a rank_st owns its struct moe_rank (gs__train_moe_rank_init / _fini), which owns
 * every moe_mb's host arrays and driver buffers. */
#ifndef GS_EXEC_TRAIN_MOE_INTERNAL_H
#define GS_EXEC_TRAIN_MOE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "exec/train_internal.h"

/* A buffer in the driver's memory that grows as the rows need (bytes). */
typedef struct dbuf {
    void *p;
    uint64_t cap;
} dbuf;

/* One MoE block's routing and activations for one micro-batch. Row orders: "sent" rows are this
 * rank's kept (token, slot) pairs sorted by expert, then token; "received" rows (on the experts'
 * EP rank) by source member, then local expert, then the source's order; "gathered" rows are
 * every TP member's received rows, member after member, each padded to M rows; "expert" rows the
 * gathered ones sorted by local expert, then TP member, then source. */
typedef struct moe_mb {
    /* host: the routing */
    int32_t *idx_h, *tok_h, *slot_h; /* [Tl k]; per sent row: token and slot (token x k + j) */
    float *probs_h, *w_h, *dprobs_h; /* [Tl k]; per sent row: weight; [Tl k] */
    uint64_t nsend, nrecv, M, B, ne;
    uint64_t *cnt;  /* [ep][E]: every EP member's sent rows per expert */
    uint64_t *gcnt; /* [tp][ep][L]: every TP member's received rows per source and local expert */
    uint64_t *ecnt; /* [L]: gathered rows per local expert */
    int32_t *eidx_h; /* per expert row: its gathered row */
    /* driver memory */
    dbuf logits, probs, idx, tok, w, eidx;
    dbuf xs, xr, xg, xe, ue, he, ye, yg, yr, ys, out;
    dbuf dys, drow, dyr, dyg, dye, dhe, due, dxe, dxg, dxr, dxs, dx, dxrt, dprobs, dlogits, a2a_s, a2a_r, pad;
} moe_mb;

/* the dbuf members of moe_mb, logits .. pad */
#define MOE_DBUFS ((offsetof(moe_mb, pad) - offsetof(moe_mb, logits)) / sizeof(dbuf) + 1)

struct moe_rank {
    int64_t *unit_of_local; /* per stage-local layer: the unit holding its routed experts (-1: none) */
    uint64_t *off_of_local; /* ... and their flat offset in it */
    moe_mb *mb;             /* [local layer x mbs + mb] */
    uint64_t nl;
};

/* The MoE block's sizes on this rank. */
typedef struct moe_dims {
    uint64_t E, k, L, ep, ep_pos, tp, ef_t, up_ne, fs_t, up_ns, Tl, h;
    double cf;
} moe_dims;

void gs__train_moe_dims(const gs_train *t, const rank_st *r, moe_dims *d);

/* b holds at least n elements of size `size` (grown, its content dropped); NULL, with the error
 * set, when out of memory. */
void *gs__train_moe_grow(const ctx *c, dbuf *b, uint64_t n, size_t size);
#define GROWF(c, b, n) ((float *)gs__train_moe_grow(c, b, n, sizeof(float)))
/* *p realloc'ed to bytes; 0 when out of memory (*p kept). */
int gs__train_moe_host_grow(void **p, size_t bytes);
gs_status gs__train_moe_nomem(const ctx *c);

/* The kept slots and the sent rows' order from the router's top-k (m->idx, m->probs), uploaded. */
gs_status gs__train_moe_route(const ctx *c, moe_mb *m, const moe_dims *d);
/* Every EP member's sent rows per expert (an all-gather over EP; without EP this rank's), the
 * received rows and the all-to-all's block size. */
gs_status gs__train_moe_counts(const ctx *c, moe_mb *m, const moe_dims *d);
/* Rows in sent order to the experts' EP members, into received order (dispatch; the combine's
 * backward), and back (combine; the dispatch's backward). Without EP: copies. */
gs_status gs__train_moe_a2a_out(const ctx *c, moe_mb *m, const moe_dims *d, const float *sent, float *recvd);
gs_status gs__train_moe_a2a_back(const ctx *c, moe_mb *m, const moe_dims *d, const float *recvd, float *sent);
/* Every TP member's received counts, the padded size M and the expert order (m->eidx). */
gs_status gs__train_moe_etp_counts(const ctx *c, moe_mb *m, const moe_dims *d);
/* Received rows all-gathered over TP (each member's padded to M), and partial sums over the
 * gathered rows reduce-scattered back into received rows. Without TP: copies. */
gs_status gs__train_moe_etp_gather(const ctx *c, moe_mb *m, const moe_dims *d, const float *recvd, float *gathered);
gs_status gs__train_moe_etp_scatter(const ctx *c, moe_mb *m, const moe_dims *d, const float *gathered, float *recvd);

#endif
