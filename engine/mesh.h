/* The DP x PP x TP device grid as a data structure: rank <-> coordinates, process groups per
 * dimension (and HSDP's intra/inter-node sub-groups), placement of ranks on nodes, and checks.
 *
 * Ownership: gs_mesh is a small value computed in O(1) (no per-rank arrays), so meshes of 10^7
 * ranks cost nothing; group member lists are written into caller-provided arrays. */
#ifndef GS_MESH_H
#define GS_MESH_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/pipeline_layout.h"
#include "engine/status.h"

typedef enum gs_dim { GS_DIM_TP = 0, GS_DIM_DP = 1, GS_DIM_PP = 2, GS_DIM_COUNT = 3 } gs_dim;

typedef struct gs_mesh {
    uint64_t size[GS_DIM_COUNT];   /* tp, dp, pp degrees */
    gs_dim order[GS_DIM_COUNT];    /* fastest-varying first: {TP, DP, PP} for "tp-dp-pp" */
    uint64_t stride[GS_DIM_COUNT]; /* rank stride of each dimension */
    uint64_t world;                /* tp * dp * pp */
    uint64_t gpus_per_node;
    uint64_t first_layers;         /* layers of the first pipeline stage; 0: the even split's */
    uint64_t last_layers;          /* layers of the last pipeline stage; 0: the even split's */
    int account_embedding;         /* 1: the embedding counts as one layer of the split (Megatron-LM's
                                      --account-for-embedding-in-pipeline-split) */
    int account_loss;              /* 1: the loss counts as one layer (--account-for-loss-in-pipeline-split) */
    gs_layout layout;              /* a custom layout: virtual stage k = chunk x pp + stage holds
                                      layout.layers[k] decoder layers (n 0: none) */
    /* Context parallelism, folded into the DP dimension: size[GS_DIM_DP] = dp x cp, the group
     * over which gradients are reduced and states sharded (Megatron-Core's data-parallel group
     * with CP, torchtitan's dp_shard_cp mesh). The cp ranks holding one sequence's chunks are
     * consecutive positions of the DP group (cp_outer 0: order tp-cp-dp-pp, Megatron's default)
     * or positions dp apart (cp_outer 1: tp-dp-cp-pp). cp = 1: no context parallelism. */
    uint64_t cp;
    int cp_outer;
    /* Hierarchical CP (strategy.cp_comm a2a+p2p, engine/mesh_cp.c): the a2a level's size A, a
     * divisor of cp; the CP group's positions form cp / A a2a groups of A adjacent positions and A
     * p2p groups of the cp / A positions A apart. 0: not hierarchical (A = 1). */
    uint64_t cp_a2a;
    /* Expert parallelism (a mixture-of-experts model's routed experts spread over ep ranks), also
     * carved out of the DP dimension as Megatron-Core carves it (expert grid etp-ep-edp-pp with
     * etp = tp): an EP group is ep consecutive positions of the DP group (after cp, so an EP group
     * may span CP ranks), its expert-data-parallel (EDP) group the size[GS_DIM_DP] / ep positions
     * ep apart, over which the expert parameters' gradients are reduced and their states sharded.
     * ep = 1: every rank holds every expert. */
    uint64_t ep;
    /* Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size): the ranks
     * splitting each routed expert's GEMMs; 0 means tp. Below tp, the expert grid is Megatron-
     * Core's second decomposition of a stage's tp x dp ranks: their flat index f = tp position +
     * tp x DP position (tp directly inside dp, gs_mesh_set_etp) read as etp position + etp x (EP
     * position + ep x EDP position), so an EP group may span TP ranks. */
    uint64_t etp;
    /* Multi-token prediction modules (model.mtp_layers): their transformer blocks are held by the
     * last pipeline stage after its decoder layers (Megatron-Core builds the MTP block in the
     * post-process stage), so gs_mesh_stage_layers counts them there; the split of the decoder
     * layers does not. 0: none. */
    uint64_t mtp_layers;
} gs_mesh;

const char *gs_dim_name(gs_dim d); /* "tp", "dp", "pp" */

/* The grid's one notation in text, dp x pp x tp in that order: GS_GRID_FMT in sentences
 * ("dp=4 x pp=2 x tp=8"), GS_GRID_CELL_FMT in table cells and CSV under a "dp x pp x tp" header
 * ("4x2x8"). Both take dp, pp, tp as uint64_t. */
#define GS_GRID_FMT "dp=%" PRIu64 " x pp=%" PRIu64 " x tp=%" PRIu64
#define GS_GRID_CELL_FMT "%" PRIu64 "x%" PRIu64 "x%" PRIu64

/* The grid in GS_GRID_FMT's words, with "x cp=C" after dp when the mesh has context parallelism
 * (dp then counts the replicas, size[GS_DIM_DP] / cp), and ", ep=E" after it all with expert
 * parallelism (carved out of the others: it adds no ranks), ", etp=T" with expert tensor
 * parallelism below tp. */
void gs_mesh_grid_text(const gs_mesh *m, char *buf, size_t len);

/* Parses "tp-dp-pp" style orders (a permutation of tp, dp, pp). Returns 0 or -1. */
int gs_mesh_order_parse(const char *s, gs_dim order[GS_DIM_COUNT]);
/* Writes "tp-dp-pp" into buf. */
void gs_mesh_order_format(const gs_dim order[GS_DIM_COUNT], char *buf, size_t len);
/* The same with context parallelism: also accepts four names where cp sits next to dp
 * ("tp-cp-dp-pp": *cp_outer = 0; "tp-dp-cp-pp": 1); *has_cp says whether cp was named.
 * Returns 0, -1 (not a permutation), or -2 (cp named but not next to dp). */
int gs_mesh_order_parse_cp(const char *s, gs_dim order[GS_DIM_COUNT], int *has_cp, int *cp_outer);
/* Writes the order, with cp beside dp when with_cp (cp_outer: after it). buf >= 24 bytes. */
void gs_mesh_order_format_cp(const gs_dim order[GS_DIM_COUNT], int with_cp, int cp_outer, char *buf, size_t len);

/* Builds the mesh. order may be NULL (Megatron's default tp-dp-pp). Errors (GS_ERR_INPUT /
 * GS_ERR_OVERFLOW): zero degrees or gpus_per_node, order not a permutation, product overflow. */
gs_status gs_mesh_init(gs_mesh *m, uint64_t tp, uint64_t dp, uint64_t pp,
                       const gs_dim order[GS_DIM_COUNT], uint64_t gpus_per_node, gs_error *err);

/* Folds context parallelism into the DP dimension (see gs_mesh.cp): size[GS_DIM_DP] must be a
 * multiple of cp (GS_ERR_INPUT otherwise). gs_mesh_init leaves cp = 1. */
gs_status gs_mesh_set_cp(gs_mesh *m, uint64_t cp, int cp_outer, gs_error *err);
/* Data-parallel replicas of the model's batch: size[GS_DIM_DP] / cp. */
uint64_t gs_mesh_dp_replicas(const gs_mesh *m);
/* The CP group holding rank: its index among the world / cp CP groups (the DP group's index x
 * replicas + the rank's replica), its members in ascending order into out (cp entries; out may
 * be NULL) and their rank stride into *stride (may be NULL). */
uint64_t gs_mesh_cp_group(const gs_mesh *m, uint64_t rank, uint64_t *out, uint64_t *stride);
/* The lowest rank of the CP group holding rank; its members are that + i * *stride. */
uint64_t gs_mesh_cp_first(const gs_mesh *m, uint64_t rank, uint64_t *stride);

/* Hierarchical CP (engine/mesh_cp.c): sets gs_mesh.cp_a2a (call after gs_mesh_set_cp); a must
 * divide cp, GS_ERR_INPUT otherwise; 1 clears it. */
gs_status gs_mesh_set_cp_a2a(gs_mesh *m, uint64_t a, gs_error *err);
/* The a2a level's size A (1 when the mesh is not hierarchical). */
uint64_t gs_mesh_cp_a2a(const gs_mesh *m);
/* The a2a group holding rank: the A CP ranks at positions g A .. g A + A - 1 of its CP group (g =
 * its position / A), members *first + i * *stride; index: the CP group's index x cp / A + g. */
uint64_t gs_mesh_cp_a2a_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);
/* The p2p group holding rank: the cp / A CP ranks at positions j A + i (i = its position mod A),
 * members *first + j * *stride; index: the CP group's index x A + i. */
uint64_t gs_mesh_cp_p2p_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);

/* Sets expert tensor parallelism (see gs_mesh.etp; call before gs_mesh_set_ep): etp must divide
 * tp, and etp below tp needs tp directly inside dp (stride[DP] = tp x stride[TP], orders
 * tp-dp-pp, tp-cp-dp-pp, pp-tp-dp), GS_ERR_INPUT otherwise. gs_mesh_init leaves etp = 0 (= tp). */
gs_status gs_mesh_set_etp(gs_mesh *m, uint64_t etp, gs_error *err);
/* The expert tensor-parallel degree: etp, or tp when 0. */
uint64_t gs_mesh_etp(const gs_mesh *m);
/* 1 when the routed experts are laid out otherwise than the dense layers (ep > 1 or etp < tp):
 * they then form units of their own, reduced over the EDP group. */
int gs_mesh_expert_split(const gs_mesh *m);
/* Sets expert parallelism (see gs_mesh.ep): the stage's tp / etp x size[GS_DIM_DP] expert ranks
 * (size[GS_DIM_DP] when etp = tp) must be a multiple of ep (GS_ERR_INPUT otherwise).
 * gs_mesh_init leaves ep = 1. */
gs_status gs_mesh_set_ep(gs_mesh *m, uint64_t ep, gs_error *err);
/* Ranks of an EDP group: tp x size[GS_DIM_DP] / (etp x ep). */
uint64_t gs_mesh_edp_size(const gs_mesh *m);
/* The EP group holding rank, its ep members *first + i * *stride. Its index among the world / ep
 * EP groups: with etp = tp, the DP group's index x size[GS_DIM_DP] / ep + the rank's DP position
 * / ep; below, the pipeline stage x tp x size[GS_DIM_DP] / ep + the flat index's etp position +
 * etp x its EDP position. */
uint64_t gs_mesh_ep_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);
/* The EDP group holding rank, its gs_mesh_edp_size members *first + i * *stride. Its index among
 * the world / gs_mesh_edp_size EDP groups: with etp = tp, the DP group's index x ep + the rank's
 * DP position mod ep; below, the pipeline stage x etp x ep + the flat index mod etp x ep. */
uint64_t gs_mesh_edp_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);
/* The ETP group holding rank, its gs_mesh_etp members *first + i * *stride: the TP group (and its
 * index) when etp = tp; below, index the pipeline stage x tp x size[GS_DIM_DP] / etp + the flat
 * index / etp. */
uint64_t gs_mesh_etp_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);
/* The ETP x EP group holding rank (Megatron-Core's tp_ep group, over which the allgather token
 * dispatcher gathers and reduce-scatters), its gs_mesh_tpep_size members *first + i * *stride:
 * the ETP group when ep = 1, the EP group when etp = 1, else the etp x ep consecutive flat
 * indices of one EDP position; the rank alone when they are no progression (gs_mesh_tpep_ok 0,
 * a mesh the allgather dispatcher is refused on). */
uint64_t gs_mesh_tpep_group(const gs_mesh *m, uint64_t rank, uint64_t *first, uint64_t *stride);
/* 1 when the ETP x EP group is an arithmetic progression of ranks (ep = 1, etp = 1, or tp
 * directly inside dp), else 0. */
int gs_mesh_tpep_ok(const gs_mesh *m);
/* Ranks of the ETP x EP group: etp x ep, or 1 when gs_mesh_tpep_ok is 0. */
uint64_t gs_mesh_tpep_size(const gs_mesh *m);

void gs_mesh_rank_coords(const gs_mesh *m, uint64_t rank, uint64_t coords[GS_DIM_COUNT]);
uint64_t gs_mesh_coords_rank(const gs_mesh *m, const uint64_t coords[GS_DIM_COUNT]);
uint64_t gs_mesh_rank_node(const gs_mesh *m, uint64_t rank);
uint64_t gs_mesh_nodes(const gs_mesh *m); /* ceil(world / gpus_per_node) */

/* Group along dimension d containing rank: members in coordinate order (size[d] entries into
 * out; out may be NULL). Returns the group's index among the groups of that dimension
 * (0 .. world/size[d]-1): the rank's other two coordinates enumerated in mesh order, the
 * faster one varying fastest, which also orders the groups by their lowest rank. */
uint64_t gs_mesh_group(const gs_mesh *m, gs_dim d, uint64_t rank, uint64_t *out);
/* The members of group number g of dimension d (g as returned above). */
void gs_mesh_group_members(const gs_mesh *m, gs_dim d, uint64_t g, uint64_t *out);
/* Number of groups along d: world / size[d]. */
uint64_t gs_mesh_group_count(const gs_mesh *m, gs_dim d);
/* Lowest rank of group number g of dimension d; its members are first + i * stride[d] for
 * i = 0 .. size[d]-1 (lets callers walk huge groups without a member array). */
uint64_t gs_mesh_group_first(const gs_mesh *m, gs_dim d, uint64_t g);
/* 1 when some group along d spans more than one node, else 0. When it does and example_rank
 * is not NULL, writes a rank of one such group there (UINT64_MAX when none was located:
 * see mesh.c for the bound on the search). O(1) for realistic node sizes. */
int gs_mesh_dim_crosses_nodes(const gs_mesh *m, gs_dim d, uint64_t *example_rank);

/* Distinct nodes spanned by the d-group containing rank, and the members of that group sharing
 * rank's node (HSDP's intra-node sub-group size). */
uint64_t gs_mesh_group_nodes(const gs_mesh *m, gs_dim d, uint64_t rank);
uint64_t gs_mesh_group_local_size(const gs_mesh *m, gs_dim d, uint64_t rank);

/* Checks against the cluster and model:
 *  - world == gpus (error);
 *  - every TP group within one node (error, or a loud warning when allow_tp_cross_node);
 *  - layers % pp (warning stating the uneven split; error when pp > layers); with first / last
 *    stage layer counts: pp > 1, and the rest dividing evenly over the other stages (error);
 *    with the embedding or loss accounted: no first / last counts, layers + 1 (+ 1) a multiple
 *    of pp, every stage left at least one layer (error);
 *  - heads % tp (error); kv_heads % tp (warning stating replication when tp % kv_heads == 0,
 *    error otherwise); ffn % tp (error); vocab % tp (warning: padded).
 * Messages name the numbers involved. All errors are reported together, one per line, with
 * GS_ERR_INPUT; warnings go to `warnings` (may be NULL). model may be NULL (grid checks only). */
gs_status gs_mesh_check(const gs_mesh *m, uint64_t gpus, const gs_model *model,
                        int allow_tp_cross_node, gs_diag *warnings, gs_error *err);

/* Sets the first and last pipeline stages' layer counts (Megatron-LM's
 * --decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers; 0 leaves a
 * stage to the split of the rest). gs_mesh_check validates them against the model. */
void gs_mesh_set_stage_layers(gs_mesh *m, uint64_t first, uint64_t last);
/* Counts the embedding (before the first layer) and the loss (after the last) as one layer each
 * of the split (Megatron-LM's --account-for-embedding-in-pipeline-split and
 * --account-for-loss-in-pipeline-split): layers + embedding + loss split evenly over the stages,
 * the first stage holding one decoder layer fewer for the embedding, the last one fewer for the
 * loss. Nonzero sets. gs_mesh_check validates them against the model. */
void gs_mesh_set_split_accounting(gs_mesh *m, int embedding, int loss);
/* A custom pipeline layout (copied; n 0 clears it): the stage and chunk functions
 * (gs_mesh_stage_layers, engine/pipeline.h) read their counts from it. */
void gs_mesh_set_layout(gs_mesh *m, const gs_layout *layout);

/* Sets the multi-token prediction modules the last stage holds (gs_mesh.mtp_layers). */
void gs_mesh_set_mtp(gs_mesh *m, uint64_t mtp_layers);

/* Layers held by pipeline stage `stage` (0-based), the last stage's MTP blocks included (they
 * follow its decoder layers: global indices layers .. layers + mtp_layers - 1). Without first /
 * last counts an even split,
 * earlier stages taking the remainder one each when layers % pp != 0; with them, as
 * Megatron-LM's get_num_layers_to_build: the given stages hold their counts and the others
 * split the rest evenly (gs_mesh_check refuses a rest that does not divide); with the embedding
 * or loss accounted, (layers + 1 (+ 1)) / pp less the embedding on stage 0 and the loss on the
 * last stage. */
uint64_t gs_mesh_stage_layers(const gs_mesh *m, uint64_t layers, uint64_t stage);
/* First layer index of `stage`. */
uint64_t gs_mesh_stage_first_layer(const gs_mesh *m, uint64_t layers, uint64_t stage);

#endif
