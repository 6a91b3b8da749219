/* The contract configurations of the exec backend (grids, strategies, models) and the scenario
 * text of each, shared by the exec Check suites (tests/check_exec.c: losses and parameters
 * against the single rank; tests/check_exec_deps.c: the dependencies played).
 *
 * Ownership: static tables; scenario_text writes caller storage. */
#ifndef GS_TESTS_EXEC_CONFIGS_H
#define GS_TESTS_EXEC_CONFIGS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct cfg {
    const char *name;
    uint64_t dp, pp, tp, nodes, gpn;
    const char *sharding, *pipeline, *recompute, *wrap;
    uint64_t vstages;
    int sp;
    uint64_t layers, micro;
    int model; /* M_TIED: tied embeddings (the head multiplies by the embedding); M_GPT: GPT blocks
                * (LayerNorm, GELU MLP, biases on every linear and norm, learned positions) */
    const char *grid_extra; /* more grid keys (uneven stages), or NULL */
} cfg;
#define M_TIED 1
#define M_GPT 2
#define M_DROP 4 /* dropout: true (Megatron's 0.1 attention and hidden dropout) */
/* mixture of experts: M_MOE 4 experts, top-2, expert_ffn 64, one shared expert; M_MOE_DROP the
 * same with capacity_factor 1 (tokens past an expert's capacity dropped); M_MOE8 8 experts,
 * top-2, expert_ffn 32, no shared expert, GELU MLPs, the first block dense */
#define M_MOE 8
#define M_MOE_DROP 16
#define M_MOE8 32
/* M_MOE_IL: M_MOE's blocks interleaved with dense ones (dense_layers 1, every 2: blocks 1, 3, ..
 * are MoE blocks, 0, 2, .. dense, as Llama 4 Maverick's) */
#define M_MOE_IL 128
#define M_ANY_MOE (M_MOE | M_MOE_DROP | M_MOE8 | M_MOE_IL)
/* precision: fp8 with current scaling (on an H100 cluster: the engine refuses FP8 before Hopper):
 * the linear layers' GEMMs in emulated FP8 on the host driver */
#define M_FP8 64
/* head_dim 16: query heads twice as wide as hidden / heads (8 x 16 = 128 > 64), as Qwen3's are */
#define M_WIDE 256
/* with M_FP8: delayed scaling (fp8_recipe: delayed) instead of current */
#define M_FP8D 512

/* name, dp pp tp, nodes gpus/node, sharding, pipeline, recompute, wrap, v, sp, layers, micro, model, grid extra */
static const cfg configs[] = {
    {"dp2-full", 2, 1, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp4-full", 4, 1, 1, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"dp2-grad-op", 2, 1, 1, 1, 2, "shard_grad_op", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp4-grad-op", 4, 1, 1, 1, 4, "shard_grad_op", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"dp2-no-shard", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp4-no-shard", 4, 1, 1, 1, 4, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"hsdp-2x2", 4, 1, 1, 2, 2, "hybrid_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    /* HSDP with one DP rank per node: TP2 fills each node, the replicas all-reduce whole units */
    {"hsdp-2x1-tp2", 2, 1, 2, 2, 2, "hybrid_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"hsdp-2x1-tp2-sync-every", 2, 1, 2, 2, 2, "hybrid_shard, grad_sync: every", "1f1b", "none", "layer", 1, 0, 4,
     2, 0, NULL},
    {"dp2-full-wrap-model", 2, 1, 1, 1, 2, "full_shard", "1f1b", "none", "model", 1, 0, 4, 2, 0, NULL},
    /* (the sharding string carries further strategy keys) */
    {"dp2-full-offload", 2, 1, 1, 1, 2, "full_shard, offload: true", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-full-prefetch", 2, 1, 1, 1, 2, "full_shard, prefetch: backward_post, forward_prefetch: true", "1f1b",
     "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-no-shard-sync-every", 2, 1, 1, 1, 2, "no_shard, grad_sync: every", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-full-no-sync", 2, 1, 1, 1, 2, "full_shard, grad_sync: last", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"tp2", 1, 1, 2, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"tp4", 1, 1, 4, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"tp2-sp", 1, 1, 2, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, 0, NULL},
    {"tp4-sp", 1, 1, 4, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, 0, NULL},
    {"pp2-gpipe", 1, 2, 1, 1, 2, "full_shard", "gpipe", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"pp2-1f1b", 1, 2, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"pp4-gpipe", 1, 4, 1, 1, 4, "full_shard", "gpipe", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"pp4-1f1b", 1, 4, 1, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"pp2-interleaved", 1, 2, 1, 1, 2, "full_shard", "interleaved", "none", "layer", 2, 0, 4, 1, 0, NULL},
    {"pp4-interleaved", 1, 4, 1, 1, 4, "full_shard", "interleaved", "none", "layer", 2, 0, 8, 1, 0, NULL},
    {"dp2-pp2-tp2", 2, 2, 2, 1, 8, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"dp2-pp2-tp2-sp", 2, 2, 2, 1, 8, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 1, 0, NULL},
    {"dp2-pp2-tp2-recompute-full", 2, 2, 2, 1, 8, "full_shard", "1f1b", "full", "layer", 1, 0, 4, 1, 0, NULL},
    {"dp2-pp2-tp2-recompute-selective", 2, 2, 2, 1, 8, "shard_grad_op", "gpipe", "selective", "layer", 1, 0, 4,
     1, 0, NULL},
    {"dp2-pp2-tp2-sp-wrap-model-selective", 2, 2, 2, 1, 8, "full_shard", "gpipe", "selective", "model", 1, 1, 4,
     1, 0, NULL},
    {"recompute-full", 1, 1, 1, 1, 1, "full_shard", "1f1b", "full", "layer", 1, 0, 4, 2, 0, NULL},
    /* wrap: model under an interleaved pipeline: every chunk writes the root's gradient */
    {"dp2-pp2-interleaved-wrap-model", 2, 2, 1, 1, 4, "full_shard", "interleaved", "none", "model", 2, 0, 8, 1, 0, NULL},
    {"dp2-pp2-interleaved-wrap-model-no-sync", 2, 2, 1, 1, 4, "full_shard, grad_sync: last", "interleaved", "none",
     "model", 2, 0, 8, 1, 0, NULL},
    {"hsdp-2x2-tp2-pp2-recompute", 4, 2, 2, 2, 8, "hybrid_shard", "interleaved", "full", "layer", 2, 0, 8, 1, 0, NULL},
    /* Megatron-Core's bucket rule: stage 1 and chunk 1 of stage 0 all-reduce as one bucket */
    {"dp2-pp2-interleaved-no-shard-bucket-first", 2, 2, 1, 1, 4, "no_shard, bucket_stages: first", "interleaved",
     "none", "layer", 2, 0, 8, 1, 0, NULL},
    /* ZeRO-1/2 (Megatron's distributed optimizer): full parameters resident, each rank updates its
     * slice and all-gathers it after the optimizer, or at the next step's start with
     * overlap_param_gather; ZeRO-1 reduce-scatters its resident full gradient once */
    {"dp2-zero1", 2, 1, 1, 1, 2, "zero1", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp4-zero1-overlap", 4, 1, 1, 1, 4, "zero1, overlap_param_gather: true", "1f1b", "none", "layer", 1, 0, 4, 1, 0, NULL},
    {"dp2-zero2", 2, 1, 1, 1, 2, "zero2", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-zero2-overlap", 2, 1, 1, 1, 2, "zero2, overlap_param_gather: true", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-zero3", 2, 1, 1, 1, 2, "zero3", "1f1b", "none", "layer", 1, 0, 4, 2, 0, NULL},
    {"dp2-pp2-interleaved-zero1-bucket-first", 2, 2, 1, 1, 4, "zero1, bucket_stages: first", "interleaved", "none",
     "layer", 2, 0, 8, 1, 0, NULL},
    {"dp2-pp2-tp2-sp-interleaved-zero1-overlap", 2, 2, 2, 1, 8, "zero1, overlap_param_gather: true", "interleaved",
     "none", "layer", 2, 1, 8, 1, 0, NULL},
    /* resident parameters under TP, SP and an interleaved pipeline: a chunk's backward gathers its
     * input from a receive while the compute stream may still run the other chunk's embedding
     * backward (the two read separate scratch tensors of the schedule) */
    {"dp2-pp2-tp2-sp-interleaved-no-shard", 2, 2, 2, 1, 8, "no_shard", "interleaved", "none", "layer", 2, 1, 8, 1, 0, NULL},
    {"dp2-pp2-tp2-sp-interleaved-zero2", 2, 2, 2, 1, 8, "zero2", "interleaved", "none", "layer", 2, 1, 8, 1, 0, NULL},
    /* tied embeddings (one stage): the head's gradient lands in the embedding's, through every
     * sharding and the TP vocabulary split */
    {"tied-dp2-full", 2, 1, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, 1, NULL},
    {"tied-dp2-zero1", 2, 1, 1, 1, 2, "zero1", "1f1b", "none", "layer", 1, 0, 4, 2, 1, NULL},
    {"tied-tp2-sp", 1, 1, 2, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, 1, NULL},
    {"tied-hsdp-2x1-tp2-wrap-model", 2, 1, 2, 2, 2, "hybrid_shard", "1f1b", "none", "model", 1, 0, 4, 2, 1, NULL},
    /* tied embeddings under a pipeline: the last stage's copy of the embedding, its gradient
     * exchanged with the first stage's before the optimizer, through every sharding (the word
     * embedding heads the root unit on both stages, whose shards split it alike) */
    {"tied-pp2-1f1b", 1, 2, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_TIED, NULL},
    {"tied-dp2-pp4-no-shard", 2, 4, 1, 1, 8, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 1, M_TIED, NULL},
    {"tied-dp2-pp2-tp2-sp-zero1", 2, 2, 2, 1, 8, "zero1", "1f1b", "none", "layer", 1, 1, 4, 1, M_TIED, NULL},
    {"tied-dp2-pp2-interleaved-zero2", 2, 2, 1, 1, 4, "zero2", "interleaved", "none", "layer", 2, 0, 8, 1, M_TIED, NULL},
    {"tied-dp2-pp2-full-wrap-model", 2, 2, 1, 1, 4, "full_shard", "gpipe", "none", "model", 1, 0, 4, 1, M_TIED, NULL},
    {"tied-hsdp-2x1-pp2-tp2", 2, 2, 2, 2, 4, "hybrid_shard", "1f1b", "none", "layer", 1, 0, 4, 1, M_TIED, NULL},
    /* GPT blocks: the replicated biases and positions (added once after the TP reduction, their
     * gradients all-reduced over TP under sequence parallelism), the final LayerNorm's bias on
     * the last stage, the positions on the first */
    {"gpt-dp2-full", 2, 1, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_GPT, NULL},
    {"gpt-tp2", 1, 1, 2, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_GPT, NULL},
    {"gpt-tp4-sp", 1, 1, 4, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, M_GPT, NULL},
    {"gpt-dp2-pp2-tp2-sp-recompute-full", 2, 2, 2, 1, 8, "full_shard", "1f1b", "full", "layer", 1, 1, 4, 1, M_GPT, NULL},
    {"gpt-dp2-pp2-interleaved-zero1", 2, 2, 1, 1, 4, "zero1", "interleaved", "none", "layer", 2, 0, 8, 1, M_GPT, NULL},
    {"gpt-tied-tp2-sp-selective", 1, 1, 2, 1, 2, "full_shard", "gpipe", "selective", "layer", 1, 1, 4, 2,
     M_GPT | M_TIED, NULL},
    {"gpt-tied-dp2-pp2-tp2-sp-zero1", 2, 2, 2, 1, 8, "zero1", "1f1b", "none", "layer", 1, 1, 4, 1, M_GPT | M_TIED, NULL},
    /* dropout: every mask a function of the global sequence, head and token (kernels/dropout.h),
     * so slices of heads (TP), of tokens (SP), other micro-batches (DP), stages and recomputation
     * draw the single rank's masks */
    {"drop-gpt-dp2-full", 2, 1, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_GPT | M_DROP, NULL},
    {"drop-gpt-tp4-sp", 1, 1, 4, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, M_GPT | M_DROP, NULL},
    {"drop-gpt-dp2-pp2-tp2-sp-recompute-full", 2, 2, 2, 1, 8, "full_shard", "1f1b", "full", "layer", 1, 1, 4, 1,
     M_GPT | M_DROP, NULL},
    {"drop-gpt-tied-tp2-sp-selective", 1, 1, 2, 1, 2, "full_shard", "gpipe", "selective", "layer", 1, 1, 4, 2,
     M_GPT | M_TIED | M_DROP, NULL},
    {"drop-gpt-dp2-pp2-interleaved-zero1", 2, 2, 1, 1, 4, "zero1", "interleaved", "none", "layer", 2, 0, 8, 1,
     M_GPT | M_DROP, NULL},
    {"drop-llama-dp2-tp2", 2, 1, 2, 1, 4, "zero2", "1f1b", "none", "layer", 1, 0, 4, 1, M_DROP, NULL},
    /* tp_comm_overlap (Transformer Engine's chunked overlaps): the ring-exchanged GEMMs chunk by
     * chunk beside their all-gathers, the forward's pipelined GEMM and reduce-scatter in four
     * splits, the backward's dgrad beside the input's re-gather and wgrad beside the
     * reduce-scatter; TP4 has ring steps to wait for; dropout gathers a gradient its own event
     * drops first */
    {"ovl-tp2-sp", 1, 1, 2, 1, 2, "full_shard, tp_comm_overlap: true", "1f1b", "none", "layer", 1, 1, 4, 2, 0, NULL},
    {"ovl-tp4-sp", 1, 1, 4, 1, 4, "full_shard, tp_comm_overlap: true", "1f1b", "none", "layer", 1, 1, 4, 2, 0, NULL},
    {"ovl-dp2-pp2-tp2-sp-recompute-full", 2, 2, 2, 1, 8, "zero1, tp_comm_overlap: true", "1f1b", "full", "layer", 1,
     1, 4, 1, 0, NULL},
    {"ovl-pp2-tp4-sp-interleaved", 1, 2, 4, 1, 8, "no_shard, tp_comm_overlap: true", "interleaved", "none", "layer",
     2, 1, 8, 1, 0, NULL},
    {"ovl-drop-gpt-tp4-sp", 1, 1, 4, 1, 4, "full_shard, tp_comm_overlap: true", "1f1b", "none", "layer", 1, 1, 4, 2,
     M_GPT | M_DROP, NULL},
    {"ovl-gpt-tied-tp2-sp-selective", 1, 1, 2, 1, 2, "full_shard, tp_comm_overlap: true", "gpipe", "selective",
     "layer", 1, 1, 4, 2, M_GPT | M_TIED, NULL},
    /* block-level checkpointing (recompute_every, as fms-fsdp and torchtitan count): every 2nd
     * block of each stage recomputed whole, the others keeping their activations; every 3rd of an
     * interleaved stage's 4 (its third, in chunk order), with dropout masks drawn again */
    {"ac-every2-dp2-pp2-tp2-sp", 2, 2, 2, 1, 8, "full_shard, recompute_every: 2", "1f1b", "full", "layer", 1, 1, 4,
     1, 0, NULL},
    {"ac-every3-drop-gpt-pp2-tp2-sp-interleaved", 1, 2, 2, 1, 4, "zero1, recompute_every: 3", "interleaved", "full",
     "layer", 2, 1, 8, 1, M_GPT | M_DROP, NULL},
    /* uneven pipelines (Megatron-LM's --decoder-first/last-pipeline-num-layers): a first stage
     * of 1 layer and a last of 3; interleaved with stages of 2 and 4 layers in chunks of 1 and 2 */
    {"uneven-dp2-pp2-tp2-sp-first1-recompute-full", 2, 2, 2, 1, 8, "full_shard", "1f1b", "full", "layer", 1, 1, 4, 1, 0,
     "first_stage_layers: 1"},
    {"uneven-tied-pp4-tp2-sp-last3", 1, 4, 2, 1, 8, "full_shard", "gpipe", "none", "layer", 1, 1, 6, 1, M_TIED,
     "last_stage_layers: 3"},
    {"uneven-dp2-pp2-tp2-interleaved-first2-zero1", 2, 2, 2, 1, 8, "zero1", "interleaved", "none", "layer", 2, 1, 6, 1,
     0, "first_stage_layers: 2"},
    /* the embedding and loss counted as layers of the split (Megatron-LM's
     * --account-for-embedding/loss-in-pipeline-split): 6 layers over pp 4 hold 1, 2, 2, 1; 10
     * over pp 2 and 2 virtual stages hold chunks of 2 and 3 (stage 0), 3 and 2 (stage 1); 7 over
     * pp 2 with only the embedding, one FSDP unit per stage over chunks of 1 and 2 (stage 0), 2
     * and 2 (stage 1) */
    {"account-tied-pp4-tp2-sp-emb-loss", 1, 4, 2, 1, 8, "full_shard", "1f1b", "none", "layer", 1, 1, 6, 1, M_TIED,
     "account_for_embedding: true, account_for_loss: true"},
    {"account-dp2-pp2-tp2-interleaved-emb-loss-zero1", 2, 2, 2, 1, 8, "zero1", "interleaved", "none", "layer", 2, 1, 10,
     1, 0, "account_for_embedding: true, account_for_loss: true"},
    {"account-dp2-pp2-interleaved-emb-wrap-model-full", 2, 2, 1, 1, 4, "full_shard", "interleaved", "full", "model",
     2, 0, 7, 1, 0, "account_for_embedding: true"},
    /* mixture of experts (exec/train_moe.c): the router, the all-to-all dispatch and combine over
     * EP groups of 2 and 4, the experts' gradients reduced over their EDP group (DDP's all-reduce,
     * ZeRO-1's reduce-scatter and gather), expert TP's gather and reduce-scatter beside sequence
     * parallelism, a pipeline; dropless and with capacity_factor 1 (the reference then routes the
     * same token groups: see reference_for) */
    {"moe-dp2-ep2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2, M_MOE, "ep: 2"},
    {"moe-dp4-ep4-zero1", 4, 1, 1, 1, 4, "zero1", "1f1b", "none", "layer", 1, 0, 2, 1, M_MOE, "ep: 4"},
    {"moe-dp4-ep2-tp2-sp-zero1", 4, 1, 2, 1, 8, "zero1", "1f1b", "none", "layer", 1, 1, 2, 2, M_MOE, "ep: 2"},
    {"moe-tp2-sp", 1, 1, 2, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 1, 2, 2, M_MOE, NULL},
    {"moe-drop-dp2-ep2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2, M_MOE_DROP, "ep: 2"},
    {"moe-drop-dp4-ep4-zero1", 4, 1, 1, 1, 4, "zero1", "1f1b", "none", "layer", 1, 0, 2, 1, M_MOE_DROP, "ep: 4"},
    {"moe-drop-dp4-ep2-tp2-sp-zero1", 4, 1, 2, 1, 8, "zero1", "1f1b", "none", "layer", 1, 1, 2, 2, M_MOE_DROP,
     "ep: 2"},
    {"moe8-gelu-dp4-ep4-pp2", 4, 2, 1, 1, 8, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 1, M_MOE8, "ep: 4"},
    /* heads wider than hidden / heads: q, k, v and the out-projection's input of heads x 16 */
    {"wide-heads-dp2-tp2-sp", 2, 1, 2, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, M_WIDE, NULL},
    {"moe-interleaved-dp2-ep2-pp2-zero1", 2, 2, 1, 1, 4, "zero1", "1f1b", "none", "layer", 1, 0, 4, 1, M_MOE_IL,
     "ep: 2"},
    /* context parallelism: each rank holds 2 of the 2 cp chunks of every sequence (rank i chunks
     * i and 2 cp - 1 - i), RoPE and the causal mask at the tokens' global positions; K, V around
     * the ring (p2p), all-gathered with their gradients reduce-scattered back (all_gather), or
     * heads / cp of whole sequences (a2a, Ulysses); gradients reduced over dp x cp */
    {"cp2-p2p", 1, 1, 1, 1, 2, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, 0, "cp: 2"},
    {"cp2-all-gather", 1, 1, 1, 1, 2, "full_shard, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0, 4, 2, 0,
     "cp: 2"},
    {"cp2-a2a", 1, 1, 1, 1, 2, "full_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 0, 4, 2, 0, "cp: 2"},
    {"cp4-p2p", 1, 1, 1, 1, 4, "no_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, 0, "cp: 4"},
    {"cp4-all-gather", 1, 1, 1, 1, 4, "zero1, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0, 4, 2, 0, "cp: 4"},
    {"cp4-a2a", 1, 1, 1, 1, 4, "full_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 0, 4, 2, 0, "cp: 4"},
    {"dp2-cp2-tp2-p2p", 2, 1, 2, 1, 8, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 1, 0, "cp: 2"},
    {"dp2-cp2-tp2-sp-all-gather", 2, 1, 2, 1, 8, "zero1, cp_comm: all_gather", "1f1b", "none", "layer", 1, 1, 4, 1, 0,
     "cp: 2"},
    {"dp2-cp2-tp2-a2a", 2, 1, 2, 1, 8, "no_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 0, 4, 1, 0, "cp: 2"},
    /* hierarchical CP (a2a+p2p): the a2a level over cp_a2a adjacent CP ranks, the K, V ring over
     * the cp / cp_a2a ranks at one position of each; a ring of 4 (cp 8 = 2 x 4), a2a levels of 2
     * and 4, with TP, sequence parallelism and the core attention recomputed (selective) */
    {"cp4-a2a2-p2p", 1, 1, 1, 1, 4, "full_shard, cp_comm: a2a+p2p", "1f1b", "none", "layer", 1, 0, 4, 2, 0,
     "cp: 4, cp_a2a: 2"},
    {"cp8-a2a2-p2p", 1, 1, 1, 1, 8, "zero1, cp_comm: a2a+p2p", "1f1b", "none", "layer", 1, 0, 4, 1, 0,
     "cp: 8, cp_a2a: 2"},
    {"cp8-a2a4-p2p", 1, 1, 1, 1, 8, "no_shard, cp_comm: a2a+p2p", "1f1b", "none", "layer", 1, 0, 4, 1, 0,
     "cp: 8, cp_a2a: 4"},
    {"cp4-tp2-sp-a2a2-p2p-selective", 1, 1, 2, 1, 8, "full_shard, cp_comm: a2a+p2p", "gpipe", "selective", "layer", 1,
     1, 4, 2, 0, "cp: 4, cp_a2a: 2"},
    /* cp outside dp (order tp-dp-cp-pp: a sequence's chunks on DP positions dp apart) */
    {"dp2-cp2-outer-all-gather", 2, 1, 1, 1, 4, "full_shard, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0, 4, 1,
     0, "cp: 2, order: tp-dp-cp-pp"},
    /* under a pipeline with full recompute (the recompute gathers again); the kept
     * probabilities under selective recompute; GPT blocks (learned positions at the tokens'
     * global positions); tied embeddings */
    {"cp2-pp2-tp2-sp-p2p-recompute-full", 1, 2, 2, 1, 8, "full_shard, cp_comm: p2p", "1f1b", "full", "layer", 1, 1,
     4, 1, 0, "cp: 2"},
    {"cp2-pp2-a2a-interleaved-zero1", 1, 2, 1, 1, 4, "zero1, cp_comm: a2a", "interleaved", "none", "layer", 2, 0, 8,
     1, 0, "cp: 2"},
    {"cp2-tp2-all-gather-selective", 1, 1, 2, 1, 4, "full_shard, cp_comm: all_gather", "gpipe", "selective", "layer",
     1, 0, 4, 2, 0, "cp: 2"},
    {"gpt-cp2-tp2-sp-a2a", 1, 1, 2, 1, 4, "full_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 1, 4, 2, M_GPT,
     "cp: 2"},
    {"tied-dp2-cp2-p2p-selective", 2, 1, 1, 1, 4, "full_shard, cp_comm: p2p", "gpipe", "selective", "layer", 1, 0, 4,
     1, M_TIED, "cp: 2"},
    /* FP8 (current scaling): each GEMM's scales come from the tensor it reads, and the reference
     * runs the config's micro-batches (reference_for), so every GEMM casts the reference's tensors
     * with its scales. Data parallelism, a pipeline, ZeRO-1's sliced update, full recompute (the
     * recomputed forward casts the same tensors), the experts' GEMMs. FP8's rounding is a step
     * function: an fp32 rounding difference upstream flips the codes of elements next to a
     * midpoint. The GPT blocks' bias gradients (fp32, summed over a DP rank's micro-batches in
     * another order than the reference's) set off flips that grow to 4e-4 in 3 steps with 2
     * micro-batches a DP rank, so that configuration runs one (the collectives then sum the
     * reference's terms in its order). */
    {"fp8-dp2-no-shard", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-pp2-1f1b", 1, 2, 1, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-dp2-pp2-full", 2, 2, 1, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-dp2-zero1", 2, 1, 1, 1, 2, "zero1", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-gpt-dp2-pp2-zero1-recompute-full", 2, 2, 1, 1, 4, "zero1", "1f1b", "full", "layer", 1, 0, 4, 4,
     M_GPT | M_FP8, NULL},
    {"fp8-moe-dp2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2, M_MOE | M_FP8, NULL},
    /* FP8 under TP: each rank casts its weight shards, the row-parallel inputs and the
     * column-parallel output gradients at their own scales, the sequence-parallel gathers'
     * tensors whole (Transformer Engine reduces their amax over TP); the reference casts the same
     * blocks and sums what TP splits in the TP reduction's order (reference_for). With and
     * without sequence parallelism, tp 2 and 4, with DP and ZeRO-1, a pipeline with selective
     * recompute, MoE blocks (expert TP = tp). */
    {"fp8-tp2-sp", 1, 1, 2, 1, 2, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 2, M_FP8, NULL},
    {"fp8-tp2", 1, 1, 2, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-tp4", 1, 1, 4, 1, 4, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, NULL},
    {"fp8-tp4-sp", 1, 1, 4, 1, 4, "full_shard", "1f1b", "none", "layer", 1, 1, 4, 4, M_FP8, NULL},
    {"fp8-dp2-tp2-sp-zero1", 2, 1, 2, 1, 4, "zero1", "1f1b", "none", "layer", 1, 1, 4, 2, M_FP8, NULL},
    {"fp8-tp2-pp2-sp-selective", 1, 2, 2, 1, 4, "full_shard", "1f1b", "selective", "layer", 1, 1, 4, 2, M_FP8,
     NULL},
    {"fp8-moe-tp2-sp", 1, 1, 2, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 1, 2, 2, M_MOE | M_FP8, NULL},
    /* FP8 parameters (fp8_params): gathered in fp32 as every exec collective is, cast at the GEMM
     * with the gathered weight's amax, the codes FP8 parameters hold (current scaling) */
    /* FP8 current scaling under context parallelism: each CP rank casts its own tokens' rows at
     * their amax (Transformer Engine reduces a current-scaling amax over TP only, for the
     * sequence-parallel gathers); the reference casts the same zig-zag row blocks
     * (fp8_cp_shards), sums every token gradient (the GEMMs' weight gradients, the norms', the
     * embedding's, the head's, the biases') per CP rank and adds the ranks' sums in order, and
     * sums the attention's K, V gradients as the CP ranks do (fp8_cp_ranks). That is the order of
     * a run that reduces its gradients every micro-batch (FULL_SHARD, SHARD_GRAD_OP, ZeRO-2).
     * NO_SHARD and ZeRO-1 sum each rank's micro-batches first and reduce once at the step's end:
     * their reference keeps each block's gradients over the step and adds the blocks at its end
     * (fp8_cp_accumulate). Either way the runs equal the reference to the bit. */
    {"fp8-cp2-p2p", 1, 1, 1, 1, 2, "no_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, "cp: 2"},
    {"fp8-cp2-all-gather", 1, 1, 1, 1, 2, "zero1, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8,
     "cp: 2"},
    {"fp8-cp2-p2p-full", 1, 1, 1, 1, 2, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8,
     "cp: 2"},
    /* one sequence a micro-batch: 8 gradient reductions a step */
    {"fp8-cp2-p2p-full-seq1", 1, 1, 1, 1, 2, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 1, M_FP8,
     "cp: 2"},
    {"fp8-cp2-all-gather-grad-op", 1, 1, 1, 1, 2, "shard_grad_op, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0,
     4, 2, M_FP8, "cp: 2"},
    {"fp8-cp2-a2a", 1, 1, 1, 1, 2, "full_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, "cp: 2"},
    {"fp8-cp4-a2a2-p2p", 1, 1, 1, 1, 4, "zero2, cp_comm: a2a+p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8,
     "cp: 4, cp_a2a: 2"},
    {"fp8-cp4-p2p", 1, 1, 1, 1, 4, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8, "cp: 4"},
    {"fp8-dp2-cp2-tp2-p2p", 2, 1, 2, 1, 8, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 1, M_FP8,
     "cp: 2"},
    {"fp8-params-dp2-full", 2, 1, 1, 1, 2, "full_shard, fp8_params: true", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8,
     NULL},
    {"fp8-params-dp2-tp2-sp-zero1", 2, 1, 2, 1, 4, "zero1, fp8_params: true", "1f1b", "none", "layer", 1, 1, 4, 2,
     M_FP8, NULL},
    /* FP8 delayed scaling: every cast at the scale its amax history gave (1 at the start), the
     * amaxes all-reduced with MAX over the stage's ranks after each pass's layers (the schedule's
     * fp8_amax events); the reference runs the replicas' micro-batches in turn and reduces after
     * every dp-th pass (reference_for). Data parallelism, a pipeline (interleaved too), full
     * recompute (the saved scales), TP with and without sequence parallelism, tp_comm_overlap's
     * chunks (one scale for every chunk), ZeRO-1, the experts' GEMMs. The first step casts at
     * scale 1, where E5M2 flushes most output gradients to its few smallest codes: a gradient's
     * last bits then decide codes, and the DP gradients' other summation order (each rank's
     * micro-batches first) grows to 2.5e-5 in 3 steps under DP x TP with two micro-batches a
     * rank, so that configuration runs one (the reduction then sums the reference's terms in its
     * order); DP alone keeps two (6e-6). */
    {"fp8d-dp2-no-shard", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D, NULL},
    {"fp8d-dp2-pp2-full-recompute", 2, 2, 1, 1, 4, "full_shard", "1f1b", "full", "layer", 1, 0, 4, 2,
     M_FP8 | M_FP8D, NULL},
    {"fp8d-pp2-interleaved", 1, 2, 1, 1, 2, "full_shard", "interleaved", "none", "layer", 2, 0, 4, 2, M_FP8 | M_FP8D,
     NULL},
    {"fp8d-tp2", 1, 1, 2, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D, NULL},
    {"fp8d-dp2-tp2-sp-zero1", 2, 1, 2, 1, 4, "zero1", "1f1b", "none", "layer", 1, 1, 4, 4, M_FP8 | M_FP8D, NULL},
    {"fp8d-tp2-sp-overlap", 1, 1, 2, 1, 2, "full_shard, tp_comm_overlap: true", "1f1b", "none", "layer", 1, 1, 4, 2,
     M_FP8 | M_FP8D, NULL},
    {"fp8d-moe-dp2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2, M_MOE | M_FP8 | M_FP8D, NULL},
    /* Transformer Engine's own recipe (an amax history, its largest taken) with a margin; the
     * reference takes the recipe's keys (the strategy's last, after "fp8_amax") */
    {"fp8d-dp2-pp2-history-max", 2, 2, 1, 1, 4, "no_shard, fp8_amax_history: 4, fp8_amax_algo: max, fp8_margin: 1",
     "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D, NULL},
    /* ... and under context parallelism: the amaxes are reduced over the CP ranks too, so every
     * cast takes the single rank's scale; p2p, all_gather and a2a+p2p sum the attention's K, V
     * gradients over the CP ranks' query rows, which the reference sums alike (fp8_cp_ranks,
     * reference_for); a2a computes each head whole, as the single rank. Under NO_SHARD with two
     * micro-batches a rank, cp 4 sums each rank's micro-batches first and then the ranks, where
     * the reference sums each micro-batch's rows: at scale 1 that order's last bits reach 1.4e-3
     * in layer 0's up projection in 3 steps (the DP x TP note above), so cp 4 runs FULL_SHARD
     * (reduced every micro-batch, 3e-7). */
    {"fp8d-cp2-p2p", 1, 1, 1, 1, 2, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D,
     "cp: 2"},
    {"fp8d-cp2-all-gather", 1, 1, 1, 1, 2, "full_shard, cp_comm: all_gather", "1f1b", "none", "layer", 1, 0, 4, 2,
     M_FP8 | M_FP8D, "cp: 2"},
    {"fp8d-cp2-a2a", 1, 1, 1, 1, 2, "full_shard, cp_comm: a2a", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D,
     "cp: 2"},
    {"fp8d-cp4-p2p", 1, 1, 1, 1, 4, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 2, M_FP8 | M_FP8D,
     "cp: 4"},
    {"fp8d-dp2-cp2-tp2-p2p", 2, 1, 2, 1, 8, "full_shard, cp_comm: p2p", "1f1b", "none", "layer", 1, 0, 4, 1,
     M_FP8 | M_FP8D, "cp: 2"},
    {"fp8d-cp4-a2a2-p2p", 1, 1, 1, 1, 4, "full_shard, cp_comm: a2a+p2p", "1f1b", "none", "layer", 1, 0, 4, 2,
     M_FP8 | M_FP8D, "cp: 4, cp_a2a: 2"},
    /* ... and under expert parallelism: an expert's casts take its local index's scales, which
     * the reduction over the stage joins across the EP ranks (the reference joins the experts at
     * each local index: reference_for); with expert TP, ZeRO-1, capacity dropping */
    {"fp8d-moe-dp2-ep2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2, M_MOE | M_FP8 | M_FP8D,
     "ep: 2"},
    {"fp8d-moe-dp4-ep4-zero1", 4, 1, 1, 1, 4, "zero1", "1f1b", "none", "layer", 1, 0, 2, 1, M_MOE | M_FP8 | M_FP8D,
     "ep: 4"},
    {"fp8d-moe-dp4-ep2-tp2-sp-zero1", 4, 1, 2, 1, 8, "zero1", "1f1b", "none", "layer", 1, 1, 2, 2,
     M_MOE | M_FP8 | M_FP8D, "ep: 2"},
    {"fp8d-moe-drop-dp2-ep2", 2, 1, 1, 1, 2, "no_shard", "1f1b", "none", "layer", 1, 0, 2, 2,
     M_MOE_DROP | M_FP8 | M_FP8D, "ep: 2"},
};
#define NCONFIGS (sizeof configs / sizeof configs[0])

static void scenario_text(const cfg *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "name: %s\n"
             "model: {name: tiny, layers: %llu, hidden: 64, heads: 8, kv_heads: 4, ffn: 128, vocab: 256, seq: 32,\n"
             "        tied_embeddings: %s%s%s%s, dropout: %s}\n"
             "cluster: {preset: %s, nodes: %llu, gpus_per_node: %llu}\n"
             "grid: {dp: %llu, pp: %llu, tp: %llu%s%s}\n"
             "strategy: {sharding: %s, pipeline: %s, recompute: %s, wrap: %s, precision: %s,\n"
             "           sequence_parallel: %s%s%s}\n"
             "batch: {global: 8, micro: %llu}\n",
             c->name, (unsigned long long)c->layers, c->model & M_TIED ? "true" : "false",
             c->model & M_GPT ? ", norm: layernorm, mlp: gelu, pos: learned, bias: true" : "",
             c->model & M_MOE8 ? ", mlp: gelu, moe: {experts: 8, top_k: 2, expert_ffn: 32, dense_layers: 1}"
             : c->model & M_MOE_DROP ? ", moe: {experts: 4, top_k: 2, expert_ffn: 64, shared_experts: 1, "
                                       "capacity_factor: 1.0}"
             : c->model & M_MOE ? ", moe: {experts: 4, top_k: 2, expert_ffn: 64, shared_experts: 1}"
             : c->model & M_MOE_IL ? ", moe: {experts: 4, top_k: 2, expert_ffn: 64, shared_experts: 1, "
                                     "dense_layers: 1, every: 2}"
                                   : "",
             c->model & M_WIDE ? ", head_dim: 16" : "",
             c->model & M_DROP ? "true" : "false", c->model & M_FP8 ? "dgx-h100" : "dgx-a100-80g",
             (unsigned long long)c->nodes, (unsigned long long)c->gpn,
             (unsigned long long)c->dp, (unsigned long long)c->pp, (unsigned long long)c->tp,
             c->grid_extra ? ", " : "", c->grid_extra ? c->grid_extra : "", c->sharding,
             c->pipeline, c->recompute, c->wrap,
             c->model & M_FP8D ? "fp8, fp8_recipe: delayed" : c->model & M_FP8 ? "fp8, fp8_recipe: current" : "fp32",
             c->sp ? "true" : "false",
             c->vstages > 1 ? ", virtual_stages: 2" : "",
             /* flash attention keeps no scores: selective recompute then has nothing to redo */
             strcmp(c->recompute, "selective") == 0 ? ", flash_attention: false" : "", (unsigned long long)c->micro);
}

#endif
