/* The schedule: one training step as a per-rank dependency graph of compute, collective, p2p and
 * copy events over logical tensors. Events say what runs, on which stream, on which tensors, never
 * when: backends (sim, exec) fill the times.
 *
 * Ownership: a gs_schedule owns its rank lists, and each list owns its events, tensors and the
 * link pool their index lists live in, except a shared list (gs_schedule_build_shared), which
 * borrows them from its stage representative in the same schedule; gs_schedule_destroy frees
 * everything. Backends borrow a schedule read-only for the duration of run(). */
#ifndef GS_SCHEDULE_H
#define GS_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/status.h"

typedef enum gs_event_kind {
    GS_EV_COMPUTE,
    GS_EV_COLLECTIVE,
    GS_EV_SEND,
    GS_EV_RECV,
    GS_EV_COPY_H2D, /* host -> device (CPU offload: fetch a parameter shard) */
    GS_EV_COPY_D2H, /* device -> host (CPU offload: gradient shard out) */
    GS_EV_KIND_COUNT
} gs_event_kind;

typedef enum gs_stream {
    GS_STREAM_COMPUTE,
    GS_STREAM_DP,   /* DP / FSDP / ZeRO collectives (HSDP's too) */
    GS_STREAM_TP,   /* TP collectives */
    GS_STREAM_PP,   /* pipeline send / recv */
    GS_STREAM_COPY, /* host <-> device copies */
    GS_STREAM_COUNT
} gs_stream;

typedef enum gs_phase { GS_PHASE_FWD, GS_PHASE_BWD, GS_PHASE_RECOMPUTE, GS_PHASE_OPTIM, GS_PHASE_COUNT } gs_phase;

/* Compute ops: what a kernel does (GEMM shapes per op in the event). */
typedef enum gs_op {
    GS_OP_EMBED,      /* token embedding lookup (vocab-parallel under TP) */
    GS_OP_NORM,       /* RMSNorm / LayerNorm */
    GS_OP_QKV,        /* QKV projection GEMM */
    GS_OP_ATTN,       /* core attention: QK^T, softmax, PV (batched GEMMs) */
    GS_OP_OPROJ,      /* attention output projection GEMM */
    GS_OP_MLP_UP,     /* gate+up (SwiGLU) or fc1 (GELU) GEMM */
    GS_OP_ACT,        /* SwiGLU / GELU elementwise */
    GS_OP_MLP_DOWN,   /* down / fc2 GEMM */
    GS_OP_HEAD,       /* final norm + LM head GEMM */
    GS_OP_LOSS,       /* cross-entropy */
    GS_OP_OPTIMIZER,  /* AdamW on this rank's shard */
    GS_OP_COPY,       /* a device-to-device copy (FSDP2's and ZeRO-3's around their collectives) */
    GS_OP_COUNT
} gs_op;

typedef enum gs_coll_op {
    GS_COLL_ALLGATHER,
    GS_COLL_REDUCE_SCATTER,
    GS_COLL_ALLREDUCE,
    GS_COLL_BROADCAST,
    GS_COLL_ALLTOALL,
    GS_COLL_COUNT
} gs_coll_op;

/* Which process group a collective runs on. */
typedef enum gs_group_kind {
    GS_GROUP_DP,       /* the whole DP group (dim dp of the mesh) */
    GS_GROUP_DP_INTRA, /* HSDP: the DP ranks on this rank's node (the shard group) */
    GS_GROUP_DP_INTER, /* HSDP: this rank's replicas on the other nodes */
    GS_GROUP_TP,
    GS_GROUP_PP,
    GS_GROUP_CP,       /* context parallelism: the ranks holding one sequence's chunks, a part of
                          the DP group (engine/mesh.h, gs_mesh.cp) */
    GS_GROUP_EP,       /* expert parallelism: the ranks sharing one MoE layer's experts (token
                          dispatch and combine), a part of the DP group (gs_mesh.ep) */
    GS_GROUP_EDP,      /* expert data parallelism: the ranks holding the same experts, over which
                          their gradients are reduced (the DP group's positions ep apart) */
    GS_GROUP_ETP,      /* expert tensor parallelism below tp (gs_mesh.etp): the ranks splitting one
                          expert's GEMMs; with etp = tp the builders use GS_GROUP_TP */
    GS_GROUP_TPEP,     /* the ETP x EP ranks (gs_mesh_tpep_group): the allgather token dispatcher's */
    GS_GROUP_CP_A2A,   /* hierarchical CP (cp_comm a2a+p2p): the a2a level, gs_mesh_cp_a2a_group */
    GS_GROUP_CP_P2P,   /* hierarchical CP: the p2p level (the K, V ring), gs_mesh_cp_p2p_group */
    GS_GROUP_STAGE,    /* every rank of the rank's pipeline stage (its DP x CP x TP ranks, EP within
                          them): FP8 delayed scaling's amax reduction group (Megatron-Core's
                          get_amax_reduction_group with context parallelism) */
    GS_GROUP_KIND_COUNT
} gs_group_kind;

typedef enum gs_tensor_kind {
    GS_T_PARAM_SHARD,  /* a unit's working-precision parameter shard (or full params when unsharded) */
    GS_T_PARAM_FULL,   /* a gathered unit */
    GS_T_GRAD,         /* a unit's full (unsharded) gradient */
    GS_T_GRAD_SHARD,   /* a unit's gradient shard */
    GS_T_ACTIVATION,   /* saved activations of a layer for one micro-batch */
    GS_T_BOUNDARY,     /* activation / gradient crossing a pipeline stage boundary */
    GS_T_MASTER,       /* fp32 master weights (shard) */
    GS_T_OPT_STATE,    /* Adam m and v (shard) */
    GS_T_WORKSPACE,    /* NCCL buffers, GEMM workspace */
    GS_T_SCRATCH,      /* a working buffer events of two streams share (the TP exchanges' gathered
                          and reduced activations and gradients, reused pass after pass, as
                          Megatron's global memory buffer): resident, and not counted in the device
                          peak (the memory ledger does not model it) */
    GS_T_KIND_COUNT
} gs_tensor_kind;

/* The scratch tensors (kind GS_T_SCRATCH, layer GS_LAYER_NONE, unit = this index) a rank with
 * tp > 1 holds: the buffers through which its TP collectives exchange with the compute stream,
 * reused pass after pass. Which roles read and write each: engine/build_layer.c. */
typedef enum gs_scratch {
    GS_SCRATCH_BLOCK_DY,       /* backward: the gradient at a block's output (gathered under SP) */
    GS_SCRATCH_BLOCK_DMLP_IN,  /* ... at the MLP's input, reduced over TP */
    GS_SCRATCH_BLOCK_DATTN_OUT, /* ... at the attention's output (the residual's), this rank's rows */
    GS_SCRATCH_BLOCK_DATTN_FULL, /* ... the same, gathered under SP */
    GS_SCRATCH_BLOCK_DATTN_IN, /* ... at the attention's input, reduced over TP */
    GS_SCRATCH_EMBED_FWD,      /* forward: the embedding's partial sums, reduced over TP */
    GS_SCRATCH_EMBED_DY,       /* backward: the embedding output's gradient (gathered under SP) */
    GS_SCRATCH_HEAD_DX,        /* backward: the head input's gradient, reduced over TP */
    GS_SCRATCH_COUNT
} gs_scratch;

#define GS_LAYER_NONE (-1)
#define GS_LAYER_EMBED (-2) /* the embedding (stage 0) */
#define GS_LAYER_HEAD (-3)  /* final norm, LM head and loss (last stage) */

/* A logical tensor of one rank. Resident tensors exist before the first event (states, workspace). */
typedef struct gs_tensor {
    uint64_t bytes;
    int32_t layer;   /* GS_LAYER_* or the global layer index */
    uint32_t mb;     /* micro-batch (activations), else 0 */
    uint32_t unit;   /* FSDP unit index (params/grads), else 0 */
    uint8_t kind;    /* gs_tensor_kind */
    uint8_t resident;
    uint8_t on_host; /* CPU offload: lives in host memory (not counted on the device) */
    uint8_t pad_;
} gs_tensor;

/* One event. Index lists (deps, reads, writes, allocs, frees) live in the rank's link pool. */
typedef struct gs_event {
    uint8_t kind;    /* gs_event_kind */
    uint8_t stream;  /* gs_stream */
    uint8_t phase;   /* gs_phase */
    uint8_t op;      /* gs_op for compute; gs_coll_op for collectives */
    uint8_t group;   /* gs_group_kind for collectives */
    uint8_t chunk;   /* interleaved pipeline: model chunk (virtual stage) */
    uint8_t role;    /* gs_role (engine/roles.h): what part of the model or step it is */
    uint8_t pad_;
    uint16_t nlinks[5]; /* counts of deps, reads, writes, allocs, frees */
    uint16_t part;   /* 1, 2, ...: this event's piece of an operation split over several events
                        (tp_comm_overlap's GEMM and reduce-scatter parts; 1 + the bucket of a
                        unit's gradient reduction); 0: whole. engine/roles.c bounds it per role */
    int32_t layer;   /* GS_LAYER_* or global layer index */
    uint32_t mb;     /* micro-batch */
    uint32_t unit;   /* FSDP unit / DDP bucket index for DP collectives */
    uint32_t links;  /* offset of this event's lists in the rank's link pool */
    uint32_t gemm_m, gemm_n, gemm_k, gemm_batch; /* compute: GEMM shape (0 when not a GEMM) */
    float net_share; /* collective ALLTOALL of the flex (DeepEP) dispatcher: the share of `bytes`
                        that leaves the rank's node, each token sent once per remote node
                        (engine/moe_route.h); 0: NCCL's all-to-all, every row to its rank */
    uint64_t peer;   /* send/recv: peer rank; collective: group index among groups of its kind */
    uint64_t group_size; /* collective: ranks in the group */
    uint64_t bytes;  /* collective: buffer size (AG/RS: group_size x padded shard; AR: buffer);
                        p2p / copy: payload; compute: HBM bytes moved */
    double flops;    /* compute: floating-point operations */
} gs_event;

enum { GS_LINK_DEPS, GS_LINK_READS, GS_LINK_WRITES, GS_LINK_ALLOCS, GS_LINK_FREES, GS_LINK_LISTS };

/* The events of one rank (or of one rank class's representative). */
typedef struct gs_rank_events {
    uint64_t rank;         /* global rank */
    uint64_t class_size;   /* ranks this list stands for (1 on the exact path) */
    uint64_t stage;        /* pipeline stage */
    gs_event *events;
    size_t nevents, cap_events;
    gs_tensor *tensors;
    size_t ntensors, cap_tensors;
    uint32_t *pool;        /* link pool */
    size_t npool, cap_pool;
    /* Name disambiguation (gs_event_name): an event whose readable name repeats an earlier
     * event's gets "#n" (n >= 2, the n-th such event in list order). dups holds (event id, n)
     * pairs in ascending id order; name_hash indexes the latest event of each name while
     * events are appended (freed by gs_rank_finish, rebuilt if more events come). */
    uint32_t *dups;
    size_t ndups, cap_dups;
    uint64_t *name_hash;   /* open addressing: name hash << 32 | (event id + 1); 0 = empty */
    size_t name_hash_cap;  /* slots, a power of two (0 when not built) */
    int unnamed;           /* 1: set before appending: no index, dups stays empty and
                              gs_event_name counts the earlier events of the same name instead */
    /* NULL when the list owns its arrays. Else (gs_schedule_build_shared) the representative of
     * its stage, in the same schedule, whose events, tensors, pool and dups it borrows (never
     * appended to): the events are this rank's in everything but `peer`, which is the
     * representative's; gs_event_peer gives this rank's. */
    const struct gs_rank_events *shared;
} gs_rank_events;

typedef struct gs_schedule {
    char scenario[128];    /* scenario name */
    gs_mesh mesh;
    uint64_t microbatches;
    int exact;             /* 1: every rank; 0: one representative per class */
    gs_rank_events *ranks;
    size_t nranks;
} gs_schedule;

/* Builds the schedule of one step (gs_scenario_mesh must have succeeded). exact = 1 emits every
 * rank; 0 one representative per class (pipeline stage: TP and DP peers differ only in group
 * ids). */
gs_status gs_schedule_build(const gs_scenario *s, const gs_mesh *mesh, int exact, gs_schedule **out,
                            gs_error *err);
/* As gs_schedule_build, for callers that name at most a few events (the simulator without a
 * trace): no name index is kept while the events are appended; gs_event_name gives the same
 * names, in O(events) per call instead of O(log dups). */
gs_status gs_schedule_build_unnamed(const gs_scenario *s, const gs_mesh *mesh, int exact, gs_schedule **out,
                                    gs_error *err);
/* The exact schedule (every rank) as gs_schedule_build_unnamed (named = 0) or gs_schedule_build
 * (named = 1) builds it, in the memory of the class path: every rank whose groups have the sizes
 * of its stage representative's (all ranks but those of uneven HSDP node splits) gets a shared
 * list, borrowing the representative's events (O(1) per rank instead of a copy). For backends
 * that read `peer` through gs_event_peer (the sim); validation, dumps and the exec backend
 * read `peer` directly and take gs_schedule_build's lists. */
gs_status gs_schedule_build_shared(const gs_scenario *s, const gs_mesh *mesh, int named, gs_schedule **out,
                                   gs_error *err);
/* The peer of event e of list r as rank r->rank sees it: e->peer, or for a shared list the
 * rank's own collective group index (gs_group_of) or pipeline neighbour in place of the
 * representative's. */
uint64_t gs_event_peer(const gs_mesh *mesh, const gs_rank_events *r, const gs_event *e);
/* An empty schedule with nranks zeroed rank lists (fill rank, class_size, stage and the
 * header fields; destroy with gs_schedule_destroy). GS_ERR_NOMEM on failure. */
gs_status gs_schedule_create(size_t nranks, gs_schedule **out);
void gs_schedule_destroy(gs_schedule *sch);
/* The list of global rank `rank`, or NULL when the schedule does not hold it (linear). */
const gs_rank_events *gs_schedule_find_rank(const gs_schedule *sch, uint64_t rank);

/* Appending (used by the builders and the loader). Return GS_ERR_NOMEM on allocation failure. */
gs_status gs_rank_add_tensor(gs_rank_events *r, const gs_tensor *t, uint32_t *id);
/* Appends ev with its lists; lists may be NULL when their count in ev->nlinks is 0. */
gs_status gs_rank_add_event(gs_rank_events *r, const gs_event *ev, const uint32_t *const lists[GS_LINK_LISTS],
                            uint32_t *id);
/* Optional, before appending: room for this many events, link pool entries and tensors (a
 * builder that knows about how many are coming saves the doublings). GS_ERR_NOMEM. */
gs_status gs_rank_reserve(gs_rank_events *r, size_t events, size_t pool, size_t tensors);
/* The list `which` (GS_LINK_*) of event e. */
const uint32_t *gs_event_list(const gs_rank_events *r, const gs_event *e, int which);
/* Optional, once a rank's list is complete: frees the append-time name index and trims the
 * arrays to their size. Appending afterwards still works (the index is rebuilt). */
void gs_rank_finish(gs_rank_events *r);

/* Names a person can read, unique within a rank: [where.][mbN.][cN.]phase[.what][#n]
 *   where  "L12" (a layer), "emb", "head"; for layer-less DP collectives and copies
 *          "unitU" (FSDP unit / DDP bucket), for layer-less compute "unitU" when U > 0
 *   mbN    the micro-batch, except in the optimizer phase
 *   cN     the model chunk, when N > 0 and the event has no layer (p2p of interleaved 1F1B)
 *   phase  fwd, bwd, recompute, optim
 *   what   compute: the op (qkv, attn, mlp_up, loss, ...), left out when the where says it
 *          (emb's embed, head's head, the optimizer phase's optimizer);
 *          collectives: [tp_|pp_|inter_]ag|rs|ar|bcast|a2a (dp and dp_intra unprefixed);
 *          send, recv, h2d, d2h
 *   #n     the n-th event (n >= 2) of the rank with the same name, in list order.
 * e.g. "L12.mb3.fwd.attn", "L12.mb3.recompute.mlp_up", "L12.mb3.fwd.ag", "L12.mb3.bwd.rs",
 * "L12.mb3.fwd.tp_ar", "L12.mb3.fwd.tp_ar#2", "emb.mb0.fwd", "head.mb0.fwd.loss",
 * "mb3.fwd.send", "unit3.mb7.bwd.ar", "optim". O(log dups) per call. */
void gs_event_name(const gs_rank_events *r, const gs_event *e, char *buf, size_t len);
#define GS_EVENT_NAME_BYTES 96 /* enough for any name */

/* Bytes this rank sends for a collective or send (nccl-tests bus bytes for ring collectives). */
uint64_t gs_event_sent_bytes(const gs_event *e);

/* Validation: acyclic; collectives matched in order and size by every member present; sends
 * matched by receives; tensors read only while alive; per rank, the bytes sent equal the
 * traffic ledger and the memory high-water mark equals the memory ledger's peak. Errors name
 * the rank and the event. */
gs_status gs_schedule_validate(const gs_schedule *sch, const gs_scenario *s, gs_error *err);
/* The structural part of gs_schedule_validate (everything but the ledger equalities), for
 * schedules with no scenario at hand (loaded dumps):
 *  (a) per rank: deps and tensor ids in range, no cycle (reported as a path of event names);
 *  (b) collectives: the event's group index and size are those of its rank (gs_group_of), and
 *      all members of a group present in the schedule issue the same sequence of
 *      (op, bytes, group size) on it;
 *  (c) every send from a to b is matched in order by a recv on b from a of the same bytes,
 *      and vice versa (checked when both ranks are present);
 *  (d) tensors: no use before allocation (resident ones are live from the start) or after
 *      free, no double free, no allocation of a live tensor;
 *  (e) roles: every event has a role and agrees with its entry in engine/roles.c (kind, stream,
 *      the ops of its phase, group, layer, part);
 *  (f) scratch tensors: events of two streams that touch one, one of them writing, are ordered
 *      by the dependencies and the streams' list order (engine/schedule_hazard.c).
 * The first problem found is reported with GS_ERR_RUNTIME, naming the rank and the event.
 * O(events + links + collectives log collectives) time. */
gs_status gs_schedule_validate_structure(const gs_schedule *sch, gs_error *err);

/* The process group of kind g holding rank: returns its index among the groups of that kind
 * (events store it in `peer`) and writes its size. GS_GROUP_DP/TP/PP are the mesh's groups
 * (gs_mesh_group); GS_GROUP_CP, EP and EDP are gs_mesh_cp_group's, gs_mesh_ep_group's and
 * gs_mesh_edp_group's, CP_A2A and CP_P2P gs_mesh_cp_a2a_group's and gs_mesh_cp_p2p_group's. HSDP's sub-groups split the rank's DP group by node: DP_INTRA = the
 * members on the rank's node (index dp_group * dp + position of the part's first member),
 * DP_INTER = the members at the same position within their node's part as the rank (index
 * dp_group * dp + that position). */
uint64_t gs_group_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *size);
/* Writes the members of that group (ascending ranks) to out (room for its size); returns the
 * count. */
uint64_t gs_group_members_of(const gs_mesh *m, gs_group_kind g, uint64_t rank, uint64_t *out);

/* Device memory high-water mark of one rank, walking its events in list order (scratch tensors
 * left out). */
uint64_t gs_rank_peak_bytes(const gs_rank_events *r);

/* Stable text dump (one line per tensor and event) and its loader; load(dump(x)) == x. */
gs_status gs_schedule_dump(const gs_schedule *sch, FILE *f, gs_error *err);
gs_status gs_schedule_load(FILE *f, const char *path, gs_schedule **out, gs_error *err);
/* The same content as one JSON document, streamed (no tree in memory), with event names. */
gs_status gs_schedule_dump_json(const gs_schedule *sch, FILE *f, gs_error *err);
/* 1 when a and b hold the same schedule: header, mesh, ranks, tensors, events and their lists
 * (floats compared bit for bit; pool offsets and name indexes are not compared). */
int gs_schedule_equal(const gs_schedule *a, const gs_schedule *b);
/* 0 when equal, else 1 with the first difference described in buf. */
int gs_schedule_diff(const gs_schedule *a, const gs_schedule *b, char *buf, size_t len);

const char *gs_event_kind_name(gs_event_kind k);
const char *gs_stream_name(gs_stream s);
const char *gs_phase_name(gs_phase p);
const char *gs_op_name(gs_op o);
const char *gs_coll_op_name(gs_coll_op c);
const char *gs_group_kind_name(gs_group_kind g);
const char *gs_tensor_kind_name(gs_tensor_kind k);

#endif
