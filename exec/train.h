/* The training program the exec backend runs: a Llama-style decoder (embedding, RMSNorm, causal
 * GQA attention with RoPE, SwiGLU MLP, final norm, LM head, cross-entropy, AdamW), or with the
 * model's keys a GPT block (LayerNorm, GELU MLP, biases on the linears and norms, learned
 * positions), in any mix, on seeded synthetic token batches, sharded exactly as the schedule says. Each schedule event is one
 * action on the rank's state (gs_train_run_event is the dispatcher's callback): FSDP units are
 * flat buffers sharded over the DP (HSDP: intra-node) group, all-gathers materialize them,
 * reduce-scatters shard the gradients, the optimizer updates the shard; TP splits the linears
 * Megatron-style; PP sends activations and gradients; recompute regenerates what the forward
 * pass dropped. Gradients are scaled so the loss is the mean over the global batch's tokens.
 *
 * Flat layout of a unit (TP slice of each tensor, row-major, [out, in] like HF): per layer
 * input_layernorm, q_proj, k_proj, v_proj (together the fused QKV weight), o_proj,
 * post_attention_layernorm, gate_proj, up_proj (together the SwiGLU weight), down_proj; a GPT
 * block has the norms' biases after their weights, the q/k/v biases after the QKV weight,
 * o_proj's after o_proj, and up_proj (fc1) and down_proj (fc2) each followed by its bias; then
 * (root unit) embed_tokens, embed_positions (learned), norm (and its bias), lm_head (none with
 * tied embeddings: the head multiplies by embed_tokens' slice and adds its gradient to
 * embed_tokens'). Tied under a pipeline, the first and last stages' root units start with the
 * word embedding (the last stage's copy, saved by the first) and share one shard size, so DP
 * splits it alike on both; their gradients are exchanged (the schedule's OPTIM send/receive
 * pair) and added before the optimizer, and the copies stay equal to the bit.
 *
 * Pipeline p2p: sends and receives go out in groups through the driver's p2p_group (one NCCL
 * group), as exec/p2p_groups.h plans them: a send followed on its stream by a receive goes with
 * it, and on a driver whose sends wait for their receivers, receives are issued ahead of their
 * place where the step would otherwise wait in a cycle (the interleaved pipeline), so no schedule
 * deadlocks on such sends (gs_train_opts.p2p_groups 0: every operation alone, a test of exactly
 * that).
 *
 * Ownership: gs_train is created by gs_train_create and freed by gs_train_destroy; it borrows
 * the scenario, schedule, driver and dispatcher (all must outlive it) and owns its buffers. It
 * holds state only for the ranks the dispatcher plays (gs_dispatch_is_local).
 * gs_train_shards fills caller storage that gs_shard_list_fini frees; its pointers point into
 * the gs_train's buffers (host-memory drivers) or into host copies the list owns (device-memory
 * drivers), valid until the next step or gs_train_destroy. */
#ifndef GS_EXEC_TRAIN_H
#define GS_EXEC_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scenario.h"
#include "engine/schedule.h"
#include "exec/dispatch.h"
#include "exec/driver.h"

typedef struct gs_train_opts {
    uint64_t seed;       /* data and init */
    float lr, beta1, beta2, eps, weight_decay; /* AdamW */
    float init_std;      /* linear and embedding weights ~ N(0, init_std^2); norms start at 1 */
    int p2p_groups;      /* 1: sends go out in p2p groups with a receive (exec/p2p_groups.h); 0: every
                          * p2p operation alone (a test of the rendezvous check; cli/ sets it from
                          * GRIDSTEP_P2P_GROUPS) */
    /* FP8 on tp 1: cast each GEMM operand TP would shard per shard of this many (0 or 1: per
     * tensor), each at its own scale as the ranks of a tp = fp8_tp_shards run cast theirs: the
     * single rank whose numbers such a run must give (host driver) */
    uint64_t fp8_tp_shards;
    /* FP8 current scaling on cp 1: cast the token rows of each GEMM's input and output gradient per
     * CP rank of this many (the zig-zag chunks rank p holds: gs_train_cp_owner), each block at its
     * own amax, as the ranks of a cp = fp8_cp_shards run cast their local tokens, and sum every
     * gradient over tokens (the GEMMs', norms', biases', embedding's, head's) per such block, the
     * blocks added in rank order as the run's gradient reduction adds the ranks' (0 or 1: per
     * tensor, whole sums; host driver, dense models) */
    uint64_t fp8_cp_shards;
    /* With fp8_cp_shards C above 1: the run emulated accumulates each CP rank's micro-batches
     * before it reduces over the ranks (NO_SHARD and ZeRO-1 without grad_sync every: the shard
     * plan's sync_every false). Each block's gradients then go into the block's own buffer, kept
     * over the step's micro-batches as each rank keeps its pending gradient, and the optimizer
     * first adds the C buffers in rank order, as the reduction at the step's end adds the ranks'
     * (0: the blocks of each micro-batch added in rank order, then the micro-batches: a reduction
     * every micro-batch; one rank: tp, dp and pp 1) */
    int fp8_cp_accumulate;
    /* FP8 delayed scaling on one data-parallel replica: the single rank whose numbers a run of this
     * many replicas must give (0 or 1: none). Its micro-batches take the replicas' in turn (the
     * replicas' micro-batch 0, then their micro-batch 1, ...; the micro-batches a step divide by
     * it) and its amaxes are reduced after every this many passes, as the replicas' reductions
     * join theirs (exec/train_fp8_delayed.c). */
    uint64_t fp8_amax_replicas;
    /* FP8 delayed scaling on one rank holding every expert: the single rank whose numbers a run
     * of this expert parallelism must give (0 or 1: none). Transformer Engine's amax buffer holds
     * an EP rank's local experts in order, so its MAX reduction joins the experts at the same
     * local index on every EP rank: with L = experts / fp8_amax_ep local experts, expert e's
     * amaxes are joined with those of every expert e' with e' mod L = e mod L before each
     * reduction (exec/train_fp8_delayed.c). */
    uint64_t fp8_amax_ep;
    /* FP8 delayed scaling on cp 1: the single rank whose numbers a run of this many CP ranks with
     * cp_comm p2p or all_gather must give (0 or 1: none; host driver). Those sum the K, V
     * gradients of the attention over the CP ranks' query rows in their reduce-scatter's order;
     * the attention backward here sums them so (exec/train_block.c); with fp8_cp_a2a A above 1,
     * as cp_comm a2a+p2p with cp_a2a A does (the p2p level's sums, of A ranks' rows each). */
    uint64_t fp8_cp_ranks, fp8_cp_a2a;
} gs_train_opts;

/* seed 1234, lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, init std 0.02, p2p groups. */
void gs_train_opts_defaults(gs_train_opts *o);

typedef struct gs_train gs_train;

/* Checks that the scenario is one the host program runs (kv_heads, ffn, vocab and
 * micro-batch tokens divisible by tp; wrap layer or model; sharding no_shard, shard_grad_op,
 * full_shard or hybrid_shard), allocates every rank's state and initializes the parameters
 * (GS_ERR_INPUT naming what is not supported; GS_ERR_NOMEM). GS_ERR_UNSUPPORTED: on a driver
 * whose sends wait for their receivers (gs_driver_ops.p2p_rendezvous, or the host driver under
 * GRIDSTEP_HOST_P2P=rendezvous), a schedule that would wait in a cycle however its sends and
 * receives are grouped (exec/p2p_groups.h; err names the waits). */
gs_status gs_train_create(const gs_scenario *s, const gs_schedule *sch, const gs_driver_ops *ops, gs_drv *drv,
                          gs_dispatch *disp, const gs_train_opts *o, gs_train **out, gs_error *err);
void gs_train_destroy(gs_train *t);
/* GS_OK when exec runs s's precision under options o (NULL: defaults): an FP8 scenario on a
 * driver with FP8 kernels; under current scaling ep 1, cp above 1 on dense models only, and tp
 * without tp_comm_overlap;
 * under delayed scaling on a driver with its scales and all_reduce_max, without fp8_params;
 * o->fp8_tp_shards above 1 on tp 1, dividing the widths TP divides, on a driver with scale
 * blocks; o->fp8_amax_replicas above 1 under delayed scaling on one replica, dividing the
 * micro-batches; o->fp8_amax_ep above 1 under delayed scaling on ep 1, dividing the experts;
 * o->fp8_cp_ranks above 1 on cp 1 and the host driver; o->fp8_cp_shards above 1 under current
 * scaling on cp 1 with scale blocks, a dense model and sequences in 2 x fp8_cp_shards chunks;
 * o->fp8_cp_accumulate with fp8_cp_shards above 1 on one rank.
 * Else GS_ERR_INPUT saying why (exec/train_fp8.c). */
gs_status gs_train_fp8_check(const gs_scenario *s, const gs_mesh *mesh, const gs_driver_ops *ops,
                             const gs_train_opts *o, gs_error *err);

/* Before each step: advances the optimizer step and clears the loss. */
void gs_train_begin_step(gs_train *t);
/* The dispatcher callback (prog is the gs_train). */
gs_status gs_train_run_event(void *prog, size_t rank_index, size_t event, gs_drv_stream *s, gs_error *err);
/* After a step: the loss, averaged over the global batch's tokens (summed over the ranks that
 * hold the head, in ascending rank order). */
double gs_train_loss(const gs_train *t);
/* Its parts: the token losses summed over this process's head ranks (ascending rank order; a
 * multi-process run adds the processes' sums in rank order, which is the same sum), and the
 * global batch's token count it is divided by. */
double gs_train_loss_sum(const gs_train *t);
double gs_train_loss_tokens(const gs_train *t);
/* Context parallelism (grid.cp): the position in its seq-token sequence of the w-th token
 * (0 <= w < seq / cp) a CP rank at position cp_pos holds, in Megatron-Core's load-balanced order
 * (2 cp chunks; the rank holds chunks cp_pos and 2 cp - 1 - cp_pos). cp <= 1: w. */
uint64_t gs_train_cp_position(uint64_t seq, uint64_t cp, uint64_t cp_pos, uint64_t w);
/* The CP rank of cp whose chunks hold position pos of a sequence of seq tokens (the inverse of
 * gs_train_cp_position; cp <= 1: 0). */
uint64_t gs_train_cp_owner(uint64_t seq, uint64_t cp, uint64_t pos);
/* Optimizer steps taken; set after loading a checkpoint (the next step is step + 1). */
uint64_t gs_train_step(const gs_train *t);
/* Pipeline receives the p2p plan issues ahead of their place because the driver's sends wait
 * for their receivers (exec/p2p_groups.h; 0 on eager drivers and when no cycle needed it). */
size_t gs_train_p2p_hoisted(const gs_train *t);
void gs_train_set_step(gs_train *t, uint64_t step);

/* ---- the shards a rank owns (for checkpoints and tests) ---- */

typedef struct gs_shard_piece {
    uint64_t offset; /* into the full tensor, elements (row-major) */
    uint64_t count;  /* elements */
    float *param, *m, *v; /* count elements each, in host memory (see gs_shard_list) */
} gs_shard_piece;

typedef struct gs_shard_tensor {
    char name[80];      /* HF Llama name, e.g. model.layers.3.self_attn.q_proj.weight */
    int ndim;
    uint64_t shape[2];  /* full (unsharded) shape */
    int primary;        /* 1: this rank is the designated writer of these pieces (copies on
                           other TP ranks or DP replicas have 0) */
    int state;          /* 1: training state that is no model parameter (FP8 delayed scaling's
                           scales and amax histories, NAME._fp8_meta): optional in a sharded
                           checkpoint's load, left out of the full safetensors file; its pieces
                           have no Adam moments (m, v NULL) */
    gs_shard_piece *pieces;
    size_t npieces;
} gs_shard_tensor;

/* A host copy of one device buffer (device-memory drivers), or a load's scratch (dev NULL). */
typedef struct gs_shard_stage {
    float *dev;  /* the driver's buffer (NULL: a load's scratch, never uploaded) */
    float *host; /* owned: n elements downloaded from dev */
    uint64_t n;  /* elements */
} gs_shard_stage;

typedef struct gs_shard_list {
    uint64_t rank;
    uint64_t step;      /* Adam step (optimizer steps taken) */
    gs_shard_tensor *tensors;
    size_t ntensors;
    gs_shard_stage *stages; /* device-memory drivers: the host copies the pieces point into */
    size_t nstages;
} gs_shard_list;

/* The pieces rank list rank_index owns. With a device-memory driver (gs_driver_ops.device_memory)
 * the parameters and Adam moments are downloaded first and the pieces point into those host
 * copies, so a checkpoint reads or writes host memory whatever the driver. */
gs_status gs_train_shards(const gs_train *t, size_t rank_index, gs_shard_list *out, gs_error *err);
/* The pieces a checkpoint load fills: gs_train_shards' except under ZeRO-1/2 with more than one
 * DP rank, where they cover every element of the resident parameters (a rank resumes with the
 * whole model, as every rank holds it between steps) with the Adam moments of the rank's own
 * slice (elsewhere they point into a scratch copy the list owns, stage dev NULL, dropped). */
gs_status gs_train_shards_for_load(const gs_train *t, size_t rank_index, gs_shard_list *out, gs_error *err);
/* After writing into the pieces (a checkpoint load): uploads the host copies back into the
 * driver's buffers and waits for it. Nothing to do for a host-memory driver. */
gs_status gs_train_shards_upload(const gs_train *t, size_t rank_index, const gs_shard_list *s, gs_error *err);
void gs_shard_list_fini(gs_shard_list *s);
/* Bytes of FP8 delayed scaling's state in a checkpoint of s (every layer's scales and amax
 * histories, exec/train_fp8_delayed.c; 0 without delayed scaling; UINT64_MAX on overflow). */
uint64_t gs_train_fp8_state_bytes(const gs_scenario *s);
/* 1 when a checkpoint tensor of this name is training state (gs_shard_tensor.state). */
int gs_train_state_tensor(const char *name);
#endif
