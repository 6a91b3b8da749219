/* Check suite for engine/launch and engine/import: the emitted launch configurations hold the
 * seed's numbers (70B on 8 x 8 A100 as DP4 x PP2 x TP8: nnodes 8, nproc 8, tp 8, pp 2, from the
 * seed's section 3 and 4), the launcher mismatches are reported, and an emitted accelerate YAML
 * or Megatron-LM command read back gives the same scenario (fields compared one by one) and the
 * same schedule (gs_schedule_equal). Hand-derived values are written beside their assertions. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/scenario.h"
#include "engine/scenario_write.h"
#include "engine/schedule.h"

static char *srcpath(const char *rel)
{
    static char buf[1024];
    const char *top = getenv("top_srcdir");
    snprintf(buf, sizeof buf, "%s/%s", top ? top : ".", rel);
    return buf;
}

static void load_file(const char *rel, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_file(srcpath(rel), s, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, NULL, &err) == GS_OK, "%s", err.msg);
}

static void load_text(const char *yaml, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "test", s, &err) == GS_OK, "%s",
                  err.msg);
    ck_assert_msg(gs_scenario_mesh(s, m, NULL, &err) == GS_OK, "%s", err.msg);
}

/* Emits kind k; returns the status, the text in t (caller finis), the error in err. */
static gs_status emit(const gs_scenario *s, const gs_mesh *m, gs_launch_kind k, gs_text *t,
                      gs_error *err)
{
    gs_text_init(t);
    gs_error_init(err);
    return gs_launch_emit(s, m, k, t, err);
}

#define ck_assert_has(text, needle)                                                            \
    ck_assert_msg(strstr((text), (needle)) != NULL, "missing '%s' in:\n%s", (needle), (text))

/* ------------------------------------------------------------------------ emission ---- */

START_TEST(test_seed_70b_megatron)
{
    gs_scenario s;
    gs_mesh m;
    gs_text t;
    gs_error err;
    load_file("scenarios/seed-70b-64xa100.yaml", &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    const char *x = gs_text_str(&t);
    /* seed S12/S15: 8 nodes x 8 GPUs, TP8 inside a node, PP2 across, order tp-pp-dp */
    ck_assert_has(x, "torchrun --nnodes 8 --nproc_per_node 8 ");
    ck_assert_has(x, "--tensor-model-parallel-size 8 \\\n");
    ck_assert_has(x, "--pipeline-model-parallel-size 2 \\\n");
    ck_assert_has(x, "--use-tp-pp-dp-mapping");
    /* Llama 2 70B config.json: 80 layers, 8192 hidden, 64 heads, 8 KV heads, ffn 28672 */
    ck_assert_has(x, "--num-layers 80 ");
    ck_assert_has(x, "--hidden-size 8192 ");
    ck_assert_has(x, "--num-attention-heads 64 ");
    ck_assert_has(x, "--group-query-attention --num-query-groups 8 ");
    ck_assert_has(x, "--ffn-hidden-size 28672 ");
    ck_assert_has(x, "--seq-length 4096 ");
    /* the scenario's batch {global: 1024, micro: 1} and recompute: full */
    ck_assert_has(x, "--micro-batch-size 1 ");
    ck_assert_has(x, "--global-batch-size 1024 ");
    ck_assert_has(x, "--recompute-granularity full --recompute-method uniform");
    ck_assert_has(x, "--swiglu");
    ck_assert_has(x, "--untie-embeddings-and-output-weights");
    /* full_shard has no plain Megatron flag: Megatron-FSDP, with a note saying so */
    ck_assert_has(x, "--data-parallel-sharding-strategy optim_grads_params");
    ck_assert_has(x, "# note: sharding full_shard");
    /* 32000 is not a multiple of 128 x 8 = 1024, but is of 8: divisor 1 keeps it exact */
    ck_assert_has(x, "--vocab-size 32000 --make-vocab-size-divisible-by 1");
    /* the last flag ends the command: no dangling continuation */
    ck_assert_has(x, "--bf16\n");
    ck_assert_ptr_null(strstr(x, "--bf16 \\"));
    gs_text_fini(&t);

    /* torchrun: accelerate cannot draw TP8, so the Megatron command, with the reason */
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_TORCHRUN, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "# no accelerate FSDP config: grid pp=2");
    ck_assert_has(gs_text_str(&t), "pretrain_gpt.py");
    gs_text_fini(&t);

    /* accelerate alone: an error naming the pipeline parallelism (its TP runs through FSDP2's
     * parallelism_config; it has no PP) */
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "pp=2");
    ck_assert_has(err.msg, "no pipeline parallelism");
    gs_text_fini(&t);
}
END_TEST

START_TEST(test_seed_7b_accelerate)
{
    gs_scenario s;
    gs_mesh m;
    gs_text t;
    gs_error err;
    load_file("scenarios/seed-7b-8xa100.yaml", &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_OK);
    const char *x = gs_text_str(&t);
    /* seed S11/S14: one node of 8 A100, FULL_SHARD, per-layer wrap, BACKWARD_PRE, bf16 */
    ck_assert_has(x, "distributed_type: FSDP\n");
    /* accelerate >= 1.6 writes the FSDP1 strategy as fsdp_reshard_after_forward */
    ck_assert_has(x, "  fsdp_reshard_after_forward: FULL_SHARD\n");
    ck_assert_ptr_null(strstr(x, "  fsdp_sharding_strategy:"));
    ck_assert_has(x, "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
    ck_assert_has(x, "  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n");
    ck_assert_has(x, "  fsdp_backward_prefetch: BACKWARD_PRE\n");
    ck_assert_has(x, "  fsdp_forward_prefetch: false\n");
    ck_assert_has(x, "  fsdp_offload_params: false\n");
    ck_assert_has(x, "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
    ck_assert_has(x, "  fsdp_activation_checkpointing: true\n"); /* recompute: full */
    ck_assert_has(x, "mixed_precision: bf16\n");
    ck_assert_has(x, "num_machines: 1\n");
    ck_assert_has(x, "num_processes: 8\n");
    ck_assert_ptr_null(strstr(x, "main_process_ip")); /* one node: no address */
    gs_text_fini(&t);

    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_TORCHRUN, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "torchrun --standalone --nnodes 1 --nproc_per_node 8 train.py\n");
    ck_assert_has(gs_text_str(&t), "---\n# accelerate FSDP config");
    gs_text_fini(&t);
}
END_TEST

START_TEST(test_slurm)
{
    gs_scenario s;
    gs_mesh m;
    gs_text t;
    gs_error err;
    load_file("scenarios/seed-70b-64xa100.yaml", &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_SLURM, &t, &err), GS_OK);
    const char *x = gs_text_str(&t);
    ck_assert_has(x, "#!/bin/bash\n");
    ck_assert_has(x, "#SBATCH --nodes=8\n");
    ck_assert_has(x, "#SBATCH --ntasks-per-node=1\n"); /* one torchrun per node */
    ck_assert_has(x, "#SBATCH --gpus-per-node=8\n");
    ck_assert_has(x, "#SBATCH --exclusive\n");
    ck_assert_has(x, "#SBATCH --cpus-per-task=");
    ck_assert_has(x, "placeholders: --cpus-per-task");
    ck_assert_has(x, "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1");
    ck_assert_has(x, "--rdzv_endpoint $MASTER_ADDR:$MASTER_PORT");
    ck_assert_has(x, "--tensor-model-parallel-size 8");
    gs_text_fini(&t);

    load_file("scenarios/seed-7b-64gpu-25gbe-hsdp.yaml", &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_SLURM, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "#SBATCH --nodes=8\n");
    ck_assert_has(gs_text_str(&t), " train.py\n");
    gs_text_fini(&t);
}
END_TEST

START_TEST(test_mismatches)
{
    gs_scenario s;
    gs_mesh m;
    gs_text t;
    gs_error err;
    /* hybrid_shard: accelerate HYBRID_SHARD; Megatron-FSDP's HSDP: 8 nodes of 8 DP ranks -> the
     * sharded model replicated 8 times (--num-distributed-optimizer-instances 8), the outer
     * replicas unsharded (no_shard) */
    load_file("scenarios/seed-7b-64gpu-25gbe-hsdp.yaml", &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params");
    ck_assert_has(gs_text_str(&t), "--num-distributed-optimizer-instances 8 --outer-dp-sharding-strategy no_shard");
    ck_assert_has(gs_text_str(&t), "unset CUDA_DEVICE_MAX_CONNECTIONS");
    gs_text_fini(&t);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "fsdp_reshard_after_forward: HYBRID_SHARD\n");
    gs_text_fini(&t);

    /* zero1 on pure DP: accelerate cannot, Megatron can (--use-distributed-optimizer) */
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 8, pp: 1, tp: 1}\nstrategy: {sharding: zero1}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "zero1");
    gs_text_fini(&t);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_TORCHRUN, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "--use-distributed-optimizer");
    ck_assert_ptr_null(strstr(gs_text_str(&t), "-fsdp"));
    gs_text_fini(&t);

    /* offload + sequence parallelism with TP: neither launcher -> one error naming both
     * (accelerate's TP plan has no sequence parallelism; Megatron-LM no parameter offload) */
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 4, pp: 1, tp: 2}\nstrategy: {sharding: full_shard, offload: true, sequence_parallel: true}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_TORCHRUN, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "accelerate: grid tp=2 with sequence_parallel");
    ck_assert_has(err.msg, "Megatron-LM: strategy.offload");
    gs_text_fini(&t);

    /* gpipe: Megatron has only 1F1B schedules */
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 4, pp: 2, tp: 1}\nstrategy: {sharding: no_shard, pipeline: gpipe}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "gpipe");
    gs_text_fini(&t);

    /* zero2 (a DeepSpeed stage) in accelerate: gridstep schedules SHARD_GRAD_OP differently,
     * so an error; shard_grad_op in Megatron-LM likewise */
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 8, pp: 1, tp: 1}\nstrategy: {sharding: zero2}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "strategy.sharding zero2");
    gs_text_fini(&t);
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 8, pp: 1, tp: 1}\nstrategy: {sharding: shard_grad_op}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "strategy.sharding shard_grad_op");
    gs_text_fini(&t);

    /* bucket_stages all with pp 2 in Megatron-LM: Megatron-Core buckets only the first stage's
     * first model chunk, no flag says otherwise: a note; first (what Megatron runs) and pp 1 (one
     * stage: the two rules agree) say nothing */
    static const struct { const char *grid, *rule; int note; } bk[] = {
        {"{dp: 4, pp: 2, tp: 1}", "all", 1}, {"{dp: 4, pp: 2, tp: 1}", "first", 0}, {"{dp: 8, pp: 1, tp: 1}", "all", 0}};
    for (size_t i = 0; i < 3; i++) {
        char y[256];
        snprintf(y, sizeof y, "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: %s\n"
                              "strategy: {sharding: zero1, bucket_stages: %s}\n", bk[i].grid, bk[i].rule);
        load_text(y, &s, &m);
        ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
        const char *note = strstr(gs_text_str(&t), "# note: bucket_stages all");
        ck_assert_msg(bk[i].note ? note != NULL : note == NULL, "case %zu:\n%s", i, gs_text_str(&t));
        gs_text_fini(&t);
    }

    /* zero3 in accelerate: FULL_SHARD with a note */
    load_text("model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
              "grid: {dp: 8, pp: 1, tp: 1}\nstrategy: {sharding: zero3}\n",
              &s, &m);
    ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_OK);
    ck_assert_has(gs_text_str(&t), "# note: sharding zero3 is written as FSDP FULL_SHARD");
    ck_assert_has(gs_text_str(&t), "fsdp_reshard_after_forward: FULL_SHARD\n");
    gs_text_fini(&t);

    /* overlap_grad_reduce false has no accelerate key: said, since the config reads back as the
     * overlapping scenario; the default (true) says nothing */
    for (int ogr = 0; ogr < 2; ogr++) {
        char y[256];
        snprintf(y, sizeof y, "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8}\n"
                              "strategy: {sharding: no_shard, overlap_grad_reduce: %s}\n", ogr ? "true" : "false");
        load_text(y, &s, &m);
        ck_assert_int_eq(emit(&s, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_OK);
        const char *note = strstr(gs_text_str(&t), "# note: overlap_grad_reduce false");
        ck_assert_msg(ogr ? note == NULL : note != NULL, "overlap_grad_reduce %d:\n%s", ogr, gs_text_str(&t));
        gs_text_fini(&t);
    }
}
END_TEST

/* ---------------------------------------------------------------------- round trip ---- */

static void assert_same_strategy(const gs_strategy *a, const gs_strategy *b, int same_sharding)
{
    if (same_sharding)
        ck_assert_str_eq(gs_sharding_name(a->sharding), gs_sharding_name(b->sharding));
    ck_assert_int_eq(a->wrap, b->wrap);
    ck_assert_uint_eq(a->wrap_min_params, b->wrap_min_params);
    ck_assert_int_eq(a->prefetch, b->prefetch);
    ck_assert_int_eq(a->forward_prefetch, b->forward_prefetch);
    ck_assert_int_eq(a->reshard_after_forward, b->reshard_after_forward);
    ck_assert_int_eq(a->limit_all_gathers, b->limit_all_gathers);
    ck_assert_int_eq(a->recompute, b->recompute);
    ck_assert_int_eq(a->flash_attention, b->flash_attention);
    ck_assert_int_eq(a->offload, b->offload);
    ck_assert_int_eq(a->precision, b->precision);
    ck_assert_int_eq(a->pipeline, b->pipeline);
    ck_assert_uint_eq(a->virtual_stages, b->virtual_stages);
    ck_assert_int_eq(a->sequence_parallel, b->sequence_parallel);
    ck_assert_uint_eq(a->bucket_bytes, b->bucket_bytes);
    ck_assert_int_eq(a->grad_sync, b->grad_sync);
    ck_assert_int_eq(a->overlap_param_gather, b->overlap_param_gather);
    ck_assert_int_eq(a->tp_comm_overlap, b->tp_comm_overlap);
    ck_assert_int_eq(a->overlap_grad_reduce, b->overlap_grad_reduce);
    ck_assert_int_eq(a->cross_entropy, b->cross_entropy);
    ck_assert_uint_eq(gs_grad_bytes(a), gs_grad_bytes(b)); /* auto reads back as the dtype it resolves to */
}

static void assert_same_shapes(const gs_model *a, const gs_model *b)
{
    ck_assert_uint_eq(a->layers, b->layers);
    ck_assert_uint_eq(a->hidden, b->hidden);
    ck_assert_uint_eq(a->heads, b->heads);
    ck_assert_uint_eq(a->kv_heads, b->kv_heads);
    ck_assert_uint_eq(a->head_dim, b->head_dim);
    ck_assert_uint_eq(a->ffn, b->ffn);
    ck_assert_uint_eq(a->vocab, b->vocab);
    ck_assert_uint_eq(a->seq, b->seq);
    ck_assert_int_eq(a->tied_embeddings, b->tied_embeddings);
    ck_assert_int_eq(a->bias, b->bias);
    ck_assert_int_eq(a->dropout, b->dropout);
    ck_assert(a->attention_dropout == b->attention_dropout && a->hidden_dropout == b->hidden_dropout);
    ck_assert_int_eq(a->norm, b->norm);
    ck_assert_int_eq(a->mlp, b->mlp);
    ck_assert_int_eq(a->pos, b->pos);
}

/* Grid, batch, cluster, and the schedules of both scenarios built and compared. */
static void assert_same_step(const gs_scenario *a, const gs_mesh *ma, const gs_scenario *b)
{
    gs_mesh mb;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_mesh(b, &mb, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(a->grid.dp, b->grid.dp);
    ck_assert_uint_eq(a->grid.pp, b->grid.pp);
    ck_assert_uint_eq(a->grid.tp, b->grid.tp);
    ck_assert_int_eq(memcmp(a->grid.order, b->grid.order, sizeof a->grid.order), 0);
    ck_assert_int_eq(a->grid.account_for_embedding, b->grid.account_for_embedding);
    ck_assert_int_eq(a->grid.account_for_loss, b->grid.account_for_loss);
    ck_assert_uint_eq(a->batch.global_seqs, b->batch.global_seqs);
    ck_assert_uint_eq(a->batch.micro_seqs, b->batch.micro_seqs);
    ck_assert_str_eq(a->cluster.name, b->cluster.name);
    ck_assert_uint_eq(a->cluster.nodes, b->cluster.nodes);
    gs_schedule *sa = NULL, *sb = NULL;
    ck_assert_msg(gs_schedule_build(a, ma, 0, &sa, &err) == GS_OK, "%s", err.msg);
    /* the schedule header names its scenario (display only): give b the same name */
    gs_scenario named = *b;
    memcpy(named.name, a->name, sizeof named.name);
    ck_assert_msg(gs_schedule_build(&named, &mb, 0, &sb, &err) == GS_OK, "%s", err.msg);
    char diff[512] = "";
    int differ = gs_schedule_diff(sa, sb, diff, sizeof diff);
    ck_assert_msg(!differ && gs_schedule_equal(sa, sb), "schedules differ after the round trip: %s",
                  diff);
    gs_schedule_destroy(sa);
    gs_schedule_destroy(sb);
}

/* Scenarios the accelerate round trip covers: every FSDP field accelerate carries. */
static const char *const accelerate_cases[] = {
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 16, pp: 1, tp: 1}\n"
    "strategy: {sharding: full_shard, recompute: full}\nbatch: {global: 64, micro: 2}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: shard_grad_op, prefetch: backward_post, forward_prefetch: true, "
    "precision: fp16}\nbatch: {global: 16, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: full_shard, offload: true, wrap: {min_params: 1000000}, prefetch: none}\n"
    "batch: {global: 8, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: no_shard, precision: fp32, wrap: model}\nbatch: {global: 8, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: pcie-a100-25gbe, nodes: 2}\ngrid: {dp: 16, pp: 1, tp: 1}\n"
    "strategy: {sharding: hybrid_shard}\nbatch: {global: 32, micro: 1}\n",
    /* zero3 written as its FSDP twin FULL_SHARD: the same schedule, another name */
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: zero3}\nbatch: {global: 16, micro: 1}\n",
};

START_TEST(test_roundtrip_accelerate)
{
    gs_scenario a, b;
    gs_mesh m;
    gs_text t;
    gs_error err;
    load_text(accelerate_cases[_i], &a, &m);
    a.strategy.framework = GS_FW_FSDP1; /* an accelerate FSDP launch runs PyTorch FSDP */
    ck_assert_int_eq(emit(&a, &m, GS_LAUNCH_ACCELERATE, &t, &err), GS_OK);
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.model = a.model.name;
    o.cluster = a.cluster.name;
    o.global_seqs = a.batch.global_seqs; /* the batch lives in the training script */
    o.micro_seqs = a.batch.micro_seqs;
    gs_diag ignored;
    gs_diag_init(&ignored);
    gs_status st = gs_import_accelerate_string(gs_text_str(&t), t.len, "emitted.yaml", &o, &b,
                                               &ignored, &err);
    ck_assert_msg(st == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    int renamed = a.strategy.sharding == GS_SHARD_ZERO3;
    assert_same_strategy(&a.strategy, &b.strategy, !renamed);
    if (renamed)
        ck_assert_int_eq(b.strategy.sharding, GS_SHARD_FULL_SHARD);
    assert_same_shapes(&a.model, &b.model);
    assert_same_step(&a, &m, &b);
    /* machine_rank has no effect on the step: reported, not mapped */
    int saw_rank = 0;
    for (size_t i = 0; i < ignored.count; i++)
        saw_rank |= strstr(ignored.warnings[i], "machine_rank: ignored: no effect on the step") != NULL;
    ck_assert(saw_rank);
    gs_diag_fini(&ignored);
    gs_text_fini(&t);
}
END_TEST

static const char *const megatron_cases[] = {
    /* the seed's grid B, batch cut to 16 to keep the schedules small */
    NULL,
    /* the embedding and the loss counted in the split (--account-for-embedding/loss-in-pipeline-
     * split): 30 layers + 2 over pp 4 and 2 virtual stages, chunks of 3 and 4 on the first
     * stage, 4 and 3 on the last; only the loss, 32 + 1 over pp 3: 11, 11, 10 */
    "model: {name: acc30, layers: 30, hidden: 512, heads: 8, ffn: 1408, vocab: 32000, seq: 512}\n"
    "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
    "grid: {dp: 1, pp: 4, tp: 2, account_for_embedding: true, account_for_loss: true}\n"
    "strategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 2}\nbatch: {global: 8, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 3}\n"
    "grid: {dp: 1, pp: 3, tp: 8, account_for_loss: true}\nstrategy: {sharding: zero1}\nbatch: {global: 6, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 2, pp: 4, tp: 2}\n"
    "strategy: {sharding: zero1, recompute: selective, pipeline: interleaved, virtual_stages: 2, "
    "sequence_parallel: true, precision: fp16, overlap_param_gather: true, tp_comm_overlap: true, "
    "bucket_stages: first}\n"
    "batch: {global: 16, micro: 2}\n",
    "model: gpt-1.7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: no_shard}\nbatch: {global: 16, micro: 2}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
    "strategy: {sharding: zero2, flash_attention: false, precision: fp32}\n"
    "batch: {global: 8, micro: 1}\n",
    /* head_dim 32 is not hidden / heads = 64: --kv-channels; vocab 1000 is not a multiple of
     * 128 x 2 but is of 2: --make-vocab-size-divisible-by 1 keeps it */
    "model: {name: odd, layers: 4, hidden: 256, heads: 4, kv_heads: 2, head_dim: 32, ffn: 700, "
    "vocab: 1000, seq: 128}\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
    "grid: {dp: 2, pp: 2, tp: 2}\nstrategy: {sharding: zero3}\nbatch: {global: 8, micro: 2}\n",
    /* gradient precision against Megatron-LM's defaults: fp32 under bf16 (no flag), fp32 under
     * fp16 (--accumulate-allreduce-grads-in-fp32), and a bucket that is not the default */
    "model: gpt-1.7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: zero1, grad_dtype: fp32, bucket_mb: 64}\nbatch: {global: 16, micro: 2}\n",
    "model: gpt-1.7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: no_shard, precision: fp16, grad_dtype: fp32, overlap_grad_reduce: false}\n"
    "batch: {global: 16, micro: 2}\n",
    /* HSDP: Megatron-FSDP inside each node's 8 DP ranks, 2 replicas */
    "model: llama2-7b\ncluster: {preset: pcie-a100-25gbe, nodes: 2}\ngrid: {dp: 16, pp: 1, tp: 1}\n"
    "strategy: {sharding: hybrid_shard}\nbatch: {global: 32, micro: 1}\n",
    /* the fused loss: --cross-entropy-loss-fusion */
    "model: gpt-1.7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: zero1, grad_dtype: fp32, cross_entropy: fused}\nbatch: {global: 16, micro: 2}\n",
};

START_TEST(test_roundtrip_megatron)
{
    gs_scenario a, b;
    gs_mesh m;
    gs_text t;
    gs_error err;
    if (megatron_cases[_i]) {
        load_text(megatron_cases[_i], &a, &m);
    } else {
        load_file("scenarios/seed-70b-64xa100.yaml", &a, &m);
        a.batch.global_seqs = 16;
    }
    a.strategy.framework = GS_FW_MEGATRON; /* a Megatron launch runs Megatron's kernels */
    if (a.strategy.sharding == GS_SHARD_ZERO3 && a.strategy.wrap == GS_WRAP_MIN_PARAMS &&
        a.strategy.wrap_min_params == GS_DEEPSPEED_PREFETCH_BUCKET_PARAMS)
        gs_strategy_default_wrap(&a.strategy); /* DeepSpeed's fetch granularity was the default: Megatron's now */
    ck_assert_int_eq(emit(&a, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = a.cluster.name; /* nodes from torchrun --nnodes, model from the shape flags */
    gs_diag ignored;
    gs_diag_init(&ignored);
    gs_status st = gs_import_megatron_args(gs_text_str(&t), "emitted.sh", &o, &b, &ignored, &err);
    ck_assert_msg(st == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    /* full_shard reads back as zero3 (Megatron-FSDP optim_grads_params): same shard plan */
    assert_same_strategy(&a.strategy, &b.strategy, a.strategy.sharding != GS_SHARD_FULL_SHARD);
    if (a.strategy.sharding == GS_SHARD_FULL_SHARD)
        ck_assert_int_eq(b.strategy.sharding, GS_SHARD_ZERO3);
    /* Megatron-Core's DDP (no_shard, zero1) reads back with its bucket rule: first */
    ck_assert_int_eq(b.strategy.bucket_stages,
                     a.strategy.sharding == GS_SHARD_NO_SHARD || a.strategy.sharding == GS_SHARD_ZERO1
                         ? GS_BUCKET_STAGES_FIRST : GS_BUCKET_STAGES_ALL);
    assert_same_shapes(&a.model, &b.model);
    assert_same_step(&a, &m, &b);
    gs_diag_fini(&ignored);
    gs_text_fini(&t);
}
END_TEST

/* The written scenario YAML reads back as the same scenario. */
START_TEST(test_roundtrip_scenario_yaml)
{
    gs_scenario a, b;
    gs_mesh m;
    gs_text t;
    gs_error err;
    gs_error_init(&err);
    load_text(megatron_cases[1 + _i], &a, &m);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&a, &t, &err), GS_OK);
    ck_assert_msg(gs_scenario_load_string(gs_text_str(&t), t.len, "w", &b, &err) == GS_OK, "%s\n%s",
                  err.msg, gs_text_str(&t));
    assert_same_strategy(&a.strategy, &b.strategy, 1);
    ck_assert_int_eq(a.strategy.bucket_stages, b.strategy.bucket_stages);
    assert_same_shapes(&a.model, &b.model);
    ck_assert_str_eq(a.model.name, b.model.name);
    assert_same_step(&a, &m, &b);
    gs_text_fini(&t);
}
END_TEST

/* An imported Megatron-LM command (a custom model) written as YAML reads back the same. */
START_TEST(test_roundtrip_imported_yaml)
{
    gs_scenario a, b;
    gs_mesh m;
    gs_text t;
    gs_error err;
    gs_diag ig;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-a100-80g";
    gs_diag_init(&ig);
    gs_error_init(&err);
    ck_assert_msg(gs_import_megatron_file(srcpath("tests/golden/megatron-gpt.sh"), &o, &a, &ig,
                                          &err) == GS_OK,
                  "%s", err.msg);
    a.batch.global_seqs = 32; /* fewer micro-batches: a smaller schedule */
    ck_assert_msg(gs_scenario_mesh(&a, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&a, &t, &err), GS_OK);
    ck_assert_msg(gs_scenario_load_string(gs_text_str(&t), t.len, "w", &b, &err) == GS_OK, "%s\n%s",
                  err.msg, gs_text_str(&t));
    assert_same_strategy(&a.strategy, &b.strategy, 1);
    ck_assert_int_eq(a.strategy.bucket_stages, GS_BUCKET_STAGES_FIRST); /* --use-distributed-optimizer, pp 2 */
    ck_assert_int_eq(b.strategy.bucket_stages, GS_BUCKET_STAGES_FIRST);
    assert_same_shapes(&a.model, &b.model);
    assert_same_step(&a, &m, &b);
    gs_text_fini(&t);
    gs_diag_fini(&ig);
}
END_TEST

/* -------------------------------------------------------------------------- import ---- */

static gs_status import_acc(const char *yaml, gs_scenario *s, gs_diag *ignored, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.model = "llama2-7b";
    o.cluster = "dgx-a100-80g";
    gs_error_init(err);
    return gs_import_accelerate_string(yaml, strlen(yaml), "in.yaml", &o, s, ignored, err);
}

START_TEST(test_import_accelerate_errors)
{
    gs_scenario s;
    gs_error err;
    gs_diag ig;
    gs_diag_init(&ig);
    /* a typo on line 3, column 3, with the hint */
    ck_assert_int_eq(import_acc("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_stratgy: "
                                "FULL_SHARD\nnum_processes: 8\n",
                                &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "in.yaml:3:3:");
    ck_assert_has(err.msg, "did you mean 'fsdp_sharding_strategy'");
    /* an unknown value with its hint */
    ck_assert_int_eq(import_acc("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: "
                                "FULL_SHARDD\n",
                                &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "in.yaml:3:27:");
    ck_assert_has(err.msg, "did you mean 'FULL_SHARD'");
    /* 12 processes on one 8-GPU node */
    ck_assert_int_eq(import_acc("distributed_type: MULTI_GPU\nnum_processes: 12\n", &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "in.yaml:2:16:");
    ck_assert_has(err.msg, "expected 8");
    /* DeepSpeed is reported, not guessed */
    ck_assert_int_eq(import_acc("distributed_type: DEEPSPEED\n", &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "DeepSpeed");
    /* DDP, 2 machines of 8: dp 16, no_shard, fp32 by accelerate's default */
    ck_assert_int_eq(import_acc("distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 16\n"
                                "main_process_ip: 10.1.2.3\n",
                                &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(s.grid.dp, 16);
    ck_assert_uint_eq(s.cluster.nodes, 2);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_NO_SHARD);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_FP32);
    ck_assert_uint_eq(ig.count, 1);
    ck_assert_str_eq(ig.warnings[0], "in.yaml:4: main_process_ip: ignored: no effect on the step");
    gs_diag_fini(&ig);
}
END_TEST

static gs_status import_mg(const char *args, const char *model, uint64_t nodes, gs_scenario *s,
                           gs_diag *ignored, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.model = model;
    o.cluster = "dgx-a100-80g";
    o.nodes = nodes;
    gs_error_init(err);
    return gs_import_megatron_args(args, NULL, &o, s, ignored, err);
}

START_TEST(test_import_megatron)
{
    gs_scenario s;
    gs_error err;
    gs_diag ig;
    gs_diag_init(&ig);
    /* GPT-2 shaped: vocab 50257 padded to a multiple of 128 x tp 2 = 256: 197 x 256 = 50432;
     * no --ffn-hidden-size: 4 x 1024 = 4096 (GELU) */
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2 --num-layers 24 --hidden-size 1024 "
                               "--num-attention-heads 16 --seq-length 1024 --vocab-size 50257 "
                               "--micro-batch-size 4 --global-batch-size 64 --bf16 --lr 3e-4 "
                               "--overlap-grad-reduce",
                               NULL, 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(s.model.vocab, 50432);
    ck_assert_uint_eq(s.model.ffn, 4096);
    ck_assert_int_eq(s.model.mlp, GS_MLP_GELU);
    ck_assert_int_eq(s.model.tied_embeddings, 1); /* Megatron ties unless told not to */
    ck_assert_uint_eq(s.grid.tp, 2);
    ck_assert_uint_eq(s.grid.dp, 4); /* 8 GPUs / tp 2 */
    ck_assert_uint_eq(s.batch.micro_seqs, 4);
    ck_assert_uint_eq(s.batch.global_seqs, 64);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_NO_SHARD);
    ck_assert_uint_eq(ig.count, 1);
    ck_assert_has(ig.warnings[0], "argument 18: --lr: ignored");
    ck_assert_int_eq(s.strategy.overlap_grad_reduce, 1); /* --overlap-grad-reduce */
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    /* SwiGLU default ffn: 4 x 4096 x 2 / 3 = 10922, floored to a multiple of 64: 10880 */
    ck_assert_int_eq(import_mg("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                               "--seq-length 4096 --vocab-size 32000 --swiglu",
                               NULL, 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(s.model.ffn, 10880);
    /* a typo with its hint, placed by argument */
    ck_assert_int_eq(import_mg("--tensor-model-paralel-size 2", "llama2-7b", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "argument 1");
    ck_assert_has(err.msg, "did you mean '--tensor-model-parallel-size'");
    /* no node count anywhere */
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2", "llama2-7b", 0, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "--nodes");
    /* Megatron-LM has no --data-parallel-size (it derives dp from the world size): an error
     * that says so; --nodes 2 gives tp 2 x pp 2 x dp 4 = 16 GPUs */
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                               "--data-parallel-size 4",
                               "llama2-7b", 2, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "argument 5: found '--data-parallel-size'");
    ck_assert_has(err.msg, "Megatron-LM derives it");
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2", "llama2-7b", 2, &s,
                               &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(s.grid.dp, 4);
    /* gradients: fp32 under bf16 unless --grad-reduce-in-bf16; buckets max(40M, 1M x dp)
     * parameters of the gradient's bytes, rounded up to whole MiB: 40e6 x 4 B = 152.6 MiB -> 153;
     * x 2 B -> 77 MiB; --ddp-bucket-size 1e6 x 4 B -> 4 MiB; dp 64 (tp 1 on 8 nodes): 64e6 x 4 B
     * = 244.1 MiB -> 245 */
    ck_assert_int_eq(import_mg("--bf16", "llama2-7b", 1, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 4);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 153u << 20);
    ck_assert_int_eq(import_mg("--bf16 --grad-reduce-in-bf16", "llama2-7b", 1, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 2);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 77u << 20);
    ck_assert_int_eq(import_mg("--fp16", "llama2-7b", 1, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 2);
    ck_assert_int_eq(import_mg("--fp16 --accumulate-allreduce-grads-in-fp32 --ddp-bucket-size 1000000", "llama2-7b", 1,
                               &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 4);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 4u << 20);
    ck_assert_int_eq(import_mg("--bf16", "llama2-7b", 8, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(s.grid.dp, 64);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 245u << 20);
    /* --grad-reduce-in-bf16 wins under bf16 and is read only there (Megatron-LM's validate_args) */
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(import_mg("--bf16 --grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32 --overlap-grad-reduce",
                               "llama2-7b", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 2);
    ck_assert_uint_eq(ig.count, 1);
    ck_assert_has(ig.warnings[0], "--accumulate-allreduce-grads-in-fp32: ignored: --grad-reduce-in-bf16 wins");
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(import_mg("--grad-reduce-in-bf16 --overlap-grad-reduce", "llama2-7b", 1, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 4); /* fp32 training */
    ck_assert_has(ig.warnings[ig.count - 1], "--grad-reduce-in-bf16: ignored: Megatron-LM reads it only with --bf16");
    ck_assert_int_eq(import_mg("--fp16 --grad-reduce-in-bf16 --overlap-grad-reduce", "llama2-7b", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_uint_eq(gs_grad_bytes(&s.strategy), 2);
    /* without --overlap-grad-reduce Megatron reduces the gradients after the backward */
    ck_assert_int_eq(import_mg("--bf16", "llama2-7b", 1, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.overlap_grad_reduce, 0);
    /* the overlaps: set with what Megatron-LM asserts they need, refused without it */
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap "
                               "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather",
                               "llama2-7b", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_int_eq(s.strategy.tp_comm_overlap, 1);
    ck_assert_int_eq(s.strategy.overlap_param_gather, 1);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_ZERO1);
    ck_assert_int_eq(s.strategy.bucket_stages, GS_BUCKET_STAGES_FIRST); /* Megatron-Core's DDP */
    ck_assert_int_eq(s.strategy.cross_entropy, GS_XENT_UNFUSED); /* vocab_parallel_cross_entropy */
    ck_assert_int_eq(import_mg("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "llama2-7b", 1, &s, &ig,
                               &err),
                     GS_OK);
    ck_assert_int_eq(s.strategy.cross_entropy, GS_XENT_FUSED);
    /* Megatron-FSDP's optim strategy is zero1 too, but not DistributedDataParallel: no bucket rule */
    ck_assert_int_eq(import_mg("--use-custom-fsdp --data-parallel-sharding-strategy optim "
                               "--pipeline-model-parallel-size 2",
                               "llama2-7b", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_ZERO1);
    ck_assert_int_eq(s.strategy.bucket_stages, GS_BUCKET_STAGES_ALL);
    ck_assert_int_eq(import_mg("--tensor-model-parallel-size 2 --tp-comm-overlap", "llama2-7b", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "argument 3: --tp-comm-overlap needs --sequence-parallel");
    ck_assert_int_eq(import_mg("--overlap-param-gather", "llama2-7b", 1, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--overlap-param-gather needs --use-distributed-optimizer");
    ck_assert_int_eq(import_mg("--use-distributed-optimizer --overlap-param-gather", "llama2-7b", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "argument 2: --overlap-param-gather needs --overlap-grad-reduce");
    gs_diag_fini(&ig);
}
END_TEST

/* gs_launch_grid_build with CP: tp 2, dp x cp = 8 on 2 nodes of 8. cp 4 inside dp: Megatron's
 * --context-parallel-size 4, the DeviceMesh (pp 1, dp 2, cp 4, tp 2) slowest first; hierarchical
 * 2 x 2: the type and sizes flags; cp outside dp: (1, 4, 2, 2) as (pp, cp, dp, tp) and a note. */
START_TEST(test_launch_grid_cp)
{
    gs_mesh m;
    gs_error err;
    gs_launch_grid l;
    gs_error_init(&err);
    ck_assert_int_eq(gs_mesh_init(&m, 2, 8, 1, NULL, 8, &err), GS_OK);
    ck_assert_int_eq(gs_mesh_set_cp(&m, 4, 0, &err), GS_OK);
    gs_launch_grid_build(&m, &l);
    ck_assert_str_eq(l.order, "tp-cp-dp-pp");
    ck_assert_msg(strstr(l.megatron, "--pipeline-model-parallel-size 1 --context-parallel-size 4"), "%s", l.megatron);
    ck_assert_str_eq(l.device_mesh, "init_device_mesh(\"cuda\", (1, 2, 4, 2), mesh_dim_names=(\"pp\", \"dp\", \"cp\", \"tp\"))");
    ck_assert_str_eq(l.megatron_note, "");
    ck_assert_int_eq(gs_mesh_set_cp_a2a(&m, 2, &err), GS_OK);
    gs_launch_grid_build(&m, &l);
    ck_assert_msg(strstr(l.megatron, "--context-parallel-size 4 --cp-comm-type a2a+p2p "
                                     "--hierarchical-context-parallel-sizes 2 2"), "%s", l.megatron);
    ck_assert_int_eq(gs_mesh_set_cp(&m, 4, 1, &err), GS_OK);
    gs_launch_grid_build(&m, &l);
    ck_assert_str_eq(l.order, "tp-dp-cp-pp");
    ck_assert_str_eq(l.device_mesh, "init_device_mesh(\"cuda\", (1, 4, 2, 2), mesh_dim_names=(\"pp\", \"cp\", \"dp\", \"tp\"))");
    ck_assert_msg(strstr(l.megatron_note, "places the context-parallel ranks inside"), "%s", l.megatron_note);
}
END_TEST

static Suite *launch_suite(void)
{
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("emit");
    tcase_add_test(tc, test_seed_70b_megatron);
    tcase_add_test(tc, test_seed_7b_accelerate);
    tcase_add_test(tc, test_slurm);
    tcase_add_test(tc, test_launch_grid_cp);
    tcase_add_test(tc, test_mismatches);
    suite_add_tcase(s, tc);
    tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_roundtrip_accelerate, 0,
                        (int)(sizeof accelerate_cases / sizeof accelerate_cases[0]));
    tcase_add_loop_test(tc, test_roundtrip_megatron, 0,
                        (int)(sizeof megatron_cases / sizeof megatron_cases[0]));
    tcase_add_loop_test(tc, test_roundtrip_scenario_yaml, 0,
                        (int)(sizeof megatron_cases / sizeof megatron_cases[0]) - 1);
    tcase_add_test(tc, test_roundtrip_imported_yaml);
    suite_add_tcase(s, tc);
    tc = tcase_create("import");
    tcase_add_test(tc, test_import_accelerate_errors);
    tcase_add_test(tc, test_import_megatron);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(launch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
