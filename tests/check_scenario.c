/* Check suite for engine/scenario and engine/strategy: loading the seed scenarios, preset
 * overrides and defaults, every error path with its line:column, and numeric limits. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/partition.h"
#include "engine/scenario.h"
#include "engine/scenario_write.h"

/* ------------------------------------------------------------------------ helpers ---- */

/* Scenario files live in the source tree; make check exports top_srcdir. */
static void src_path(const char *rel, char *buf, size_t len)
{
    const char *top = getenv("top_srcdir");
    snprintf(buf, len, "%s/%s", top && *top ? top : ".", rel);
}

static gs_status load_str(const char *text, gs_scenario *s, gs_error *err)
{
    gs_error_init(err);
    return gs_scenario_load_string(text, strlen(text), "t.yaml", s, err);
}

static void load_ok(const char *text, gs_scenario *s)
{
    gs_error err;
    gs_status st = load_str(text, s, &err);
    ck_assert_msg(st == GS_OK, "load failed: %s", err.msg);
}

static void load_and_mesh_ok(const char *text, gs_scenario *s, gs_mesh *m)
{
    gs_error err;
    gs_diag warnings;
    load_ok(text, s);
    gs_diag_init(&warnings);
    gs_status st = gs_scenario_mesh(s, m, &warnings, &err);
    gs_diag_fini(&warnings);
    ck_assert_msg(st == GS_OK, "mesh failed: %s", err.msg);
}

/* The message must start with "t.yaml:LINE:COL: " (or "t.yaml: " when line is 0) and contain
 * fragment. */
static void check_message(const gs_error *err, unsigned line, unsigned col, const char *fragment)
{
    char prefix[64];
    if (line)
        snprintf(prefix, sizeof prefix, "t.yaml:%u:%u: ", line, col);
    else
        snprintf(prefix, sizeof prefix, "t.yaml: ");
    ck_assert_msg(strncmp(err->msg, prefix, strlen(prefix)) == 0,
                  "expected the message to start with '%s', got '%s'", prefix, err->msg);
    ck_assert_msg(strstr(err->msg, fragment) != NULL, "expected '%s' in '%s'", fragment,
                  err->msg);
}

static void load_fails(const char *text, gs_status want, unsigned line, unsigned col,
                       const char *fragment)
{
    gs_scenario s;
    gs_error err;
    gs_status st = load_str(text, &s, &err);
    ck_assert_msg(st == want, "expected status %d, got %d (%s)", want, st, err.msg);
    check_message(&err, line, col, fragment);
}

/* Loads fine, then gs_scenario_mesh fails. */
static void mesh_fails(const char *text, gs_status want, unsigned line, unsigned col,
                       const char *fragment)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag warnings;
    load_ok(text, &s);
    gs_diag_init(&warnings);
    gs_status st = gs_scenario_mesh(&s, &m, &warnings, &err);
    gs_diag_fini(&warnings);
    ck_assert_msg(st == want, "expected status %d, got %d (%s)", want, st, err.msg);
    check_message(&err, line, col, fragment);
}

/* Comments in the YAML strings below number the lines, so the expected line:column of each
 * error can be read off by eye. */
#define BASE                                                                                    \
    "model: llama2-7b\n"          /* 1 */                                                       \
    "cluster: dgx-a100-80g\n"     /* 2 */                                                       \
    "grid: {dp: 8}\n"             /* 3 */

/* -------------------------------------------------------------------------- load ---- */

START_TEST(load_grid_b)
{
    char path[1024];
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag w;
    src_path("scenarios/seed-70b-64xa100.yaml", path, sizeof path);
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_file(path, &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_str_eq(s.name, "seed-70b-64xa100");
    ck_assert_str_eq(s.path, path);
    /* Llama 2 70B's published config: 80 layers, hidden 8192, 64 heads, 8 KV heads, ffn 28672. */
    ck_assert_str_eq(s.model.name, "llama2-70b");
    ck_assert_uint_eq(s.model.layers, 80);
    ck_assert_uint_eq(s.model.hidden, 8192);
    ck_assert_uint_eq(s.model.heads, 64);
    ck_assert_uint_eq(s.model.kv_heads, 8);
    ck_assert_uint_eq(s.model.ffn, 28672);
    ck_assert_uint_eq(s.model.nominal_params, 0);
    ck_assert_uint_eq(s.cluster.nodes, 8);
    ck_assert_uint_eq(s.cluster.gpus_per_node, 8);
    ck_assert_uint_eq(gs_cluster_gpus(&s.cluster), 64);
    /* The seed's grid B: DP4 x PP2 x TP8, with the 4.2 table's order tp-pp-dp. */
    ck_assert_uint_eq(s.grid.dp, 4);
    ck_assert_uint_eq(s.grid.pp, 2);
    ck_assert_uint_eq(s.grid.tp, 8);
    ck_assert_int_eq(s.grid.order[0], GS_DIM_TP);
    ck_assert_int_eq(s.grid.order[1], GS_DIM_PP);
    ck_assert_int_eq(s.grid.order[2], GS_DIM_DP);
    ck_assert_int_eq(s.grid.allow_tp_cross_node, 0);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_FULL);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_1F1B);
    ck_assert_int_eq(s.strategy.offload, 0);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 1);
    ck_assert_uint_eq(s.batch.global_seqs, 1024);
    ck_assert_uint_eq(s.batch.micro_seqs, 1);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_mesh(&s, &m, &w, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(w.count, 0);
    gs_diag_fini(&w);
    ck_assert_uint_eq(m.world, 64);
    /* 1024 sequences / (1 per micro-batch x 4 replicas) = 256 micro-batches per pipeline. */
    ck_assert_uint_eq(gs_scenario_microbatches(&s), 256);
    ck_assert(gs_scenario_tokens(&s) == 1024.0 * 4096.0);
}
END_TEST

START_TEST(load_seed_files)
{
    /* Each seed scenario: grid, sharding, precision and global batch as the seed describes. */
    static const struct {
        const char *file;
        uint64_t dp, pp, tp, nodes, global, micro_batches;
        gs_sharding sharding;
        gs_precision precision;
        uint64_t nominal_params;
    } cases[] = {
        {"scenarios/seed-7b-8xa100.yaml", 8, 1, 1, 1, 8, 1, GS_SHARD_FULL_SHARD, GS_PREC_BF16,
         7000000000ULL},
        {"scenarios/seed-70b-64xa100-fsdp.yaml", 64, 1, 1, 8, 1024, 16, GS_SHARD_FULL_SHARD,
         GS_PREC_BF16, 0},
        {"scenarios/seed-7b-64gpu-25gbe.yaml", 64, 1, 1, 8, 64, 1, GS_SHARD_GRAD_OP,
         GS_PREC_FP16, 7000000000ULL},
        {"scenarios/seed-7b-64gpu-25gbe-hsdp.yaml", 64, 1, 1, 8, 64, 1, GS_SHARD_HYBRID_SHARD,
         GS_PREC_FP16, 7000000000ULL},
        {"scenarios/tiny-llama-2x2x2.yaml", 2, 2, 2, 1, 8, 2, GS_SHARD_FULL_SHARD, GS_PREC_BF16,
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        gs_scenario s;
        gs_mesh m;
        gs_error err;
        gs_diag w;
        src_path(cases[i].file, path, sizeof path);
        gs_error_init(&err);
        ck_assert_msg(gs_scenario_load_file(path, &s, &err) == GS_OK, "%s", err.msg);
        gs_diag_init(&w);
        ck_assert_msg(gs_scenario_mesh(&s, &m, &w, &err) == GS_OK, "%s", err.msg);
        gs_diag_fini(&w);
        ck_assert_uint_eq(s.grid.dp, cases[i].dp);
        ck_assert_uint_eq(s.grid.pp, cases[i].pp);
        ck_assert_uint_eq(s.grid.tp, cases[i].tp);
        ck_assert_uint_eq(s.cluster.nodes, cases[i].nodes);
        ck_assert_uint_eq(s.batch.global_seqs, cases[i].global);
        ck_assert_uint_eq(gs_scenario_microbatches(&s), cases[i].micro_batches);
        ck_assert_int_eq(s.strategy.sharding, cases[i].sharding);
        ck_assert_int_eq(s.strategy.precision, cases[i].precision);
        ck_assert_uint_eq(s.model.nominal_params, cases[i].nominal_params);
        ck_assert_uint_eq(m.world, gs_cluster_gpus(&s.cluster));
        /* FSDP keeps params sharded after forward only where it shards them. */
        ck_assert_int_eq(s.strategy.reshard_after_forward,
                         cases[i].sharding != GS_SHARD_GRAD_OP);
    }
}
END_TEST

START_TEST(load_seed_25gbe_cluster)
{
    char path[1024];
    gs_scenario s;
    gs_error err;
    src_path("scenarios/seed-7b-64gpu-25gbe.yaml", path, sizeof path);
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_file(path, &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_str_eq(s.cluster.name, "pcie-a100-25gbe");
    ck_assert(s.cluster.nic.gbps == 25.0);
    ck_assert_int_eq(s.cluster.intra.kind, GS_LINK_PCIE);
    /* The seed's nominal 7B: 7e9 parameters exactly; 32 layers of 4096 at seq 4096. */
    ck_assert_uint_eq(gs_model_params(&s.model), 7000000000ULL);
    ck_assert_uint_eq(s.model.layers, 32);
    ck_assert_uint_eq(s.model.seq, 4096);
}
END_TEST

START_TEST(load_defaults)
{
    gs_scenario s;
    load_ok(BASE, &s);
    ck_assert_str_eq(s.name, "t");
    ck_assert_str_eq(s.title, "");
    /* Missing grid dims are 1; order defaults to Megatron's tp-dp-pp. */
    ck_assert_uint_eq(s.grid.dp, 8);
    ck_assert_uint_eq(s.grid.pp, 1);
    ck_assert_uint_eq(s.grid.tp, 1);
    ck_assert_int_eq(s.grid.order[0], GS_DIM_TP);
    ck_assert_int_eq(s.grid.order[1], GS_DIM_DP);
    ck_assert_int_eq(s.grid.order[2], GS_DIM_PP);
    ck_assert_uint_eq(s.grid.grid_line, 3);
    ck_assert_uint_eq(s.grid.grid_col, 7);
    /* The seed's advice (DESIGN: per-layer wrap, backward_pre, bf16, 1f1b). */
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_LAYER);
    ck_assert_int_eq(s.strategy.prefetch, GS_PREFETCH_BACKWARD_PRE);
    ck_assert_int_eq(s.strategy.forward_prefetch, 0);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 1);
    ck_assert_int_eq(s.strategy.limit_all_gathers, 1);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_NONE);
    ck_assert_int_eq(s.strategy.offload, 0);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_1F1B);
    ck_assert_uint_eq(s.strategy.virtual_stages, 1);
    ck_assert_int_eq(s.strategy.sequence_parallel, 0);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 25u * 1024 * 1024); /* PyTorch's 25 MiB */
    /* One micro-batch of one sequence per replica: global = micro x dp. */
    ck_assert_uint_eq(s.batch.micro_seqs, 1);
    ck_assert_uint_eq(s.batch.global_seqs, 8);
}
END_TEST

/* DeepSpeed ZeRO-3 without a wrap fetches at DeepSpeed's granularity (submodules batched up to
 * stage3_prefetch_bucket_size, 5e7 elements): wrap {min_params: 5e7}. On Llama 2 7B a block's
 * linears group into two units of at least that size: the attention's q, k, v, o (4 x 4096 x 4096
 * = 67,108,864) and the MLP's three (3 x 4096 x 11008 = 135,266,304), where wrap layer makes one.
 * An explicit wrap, and every other sharding, keep their own. */
START_TEST(load_deepspeed_wrap)
{
    gs_scenario s;
    load_ok(BASE "strategy: {sharding: zero3}\n", &s);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_MIN_PARAMS);
    ck_assert_uint_eq(s.strategy.wrap_min_params, 50000000u);
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_OK);
    gs_partition p;
    ck_assert_int_eq(gs_partition_stage(&s, &m, 0, &p, &err), GS_OK);
    const size_t *units;
    size_t n = gs_partition_units_covering(&p, 0, &units);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(p.units[units[0]].params + p.units[units[1]].params, 67108864ull + 135266304ull);
    gs_partition_fini(&p);
    load_ok(BASE "strategy: {sharding: zero3, wrap: layer}\n", &s);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_LAYER);
    load_ok(BASE "strategy: {sharding: full_shard}\n", &s);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_LAYER);
}
END_TEST

START_TEST(load_every_strategy_key)
{
    gs_scenario s;
    load_ok(BASE
            "name: every key\n"
            "description: all strategy fields set\n"
            "strategy:\n"
            "  sharding: zero2\n"
            "  wrap: {min_params: 1e6}\n"
            "  prefetch: backward_post\n"
            "  forward_prefetch: yes\n"
            "  reshard_after_forward: true\n"
            "  limit_all_gathers: no\n"
            "  recompute: selective\n"
            "  flash_attention: false\n"
            "  offload: True\n"
            "  precision: fp32\n"
            "  pipeline: gpipe\n"
            "  virtual_stages: 1\n"
            "  sequence_parallel: true\n"
            "  bucket_mb: 50\n"
            "batch: {global: 64, micro: 2}\n",
            &s);
    ck_assert_str_eq(s.title, "every key");
    ck_assert_str_eq(s.description, "all strategy fields set");
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_ZERO2);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_MIN_PARAMS);
    ck_assert_uint_eq(s.strategy.wrap_min_params, 1000000);
    ck_assert_int_eq(s.strategy.prefetch, GS_PREFETCH_BACKWARD_POST);
    ck_assert_int_eq(s.strategy.forward_prefetch, 1);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 1); /* given, so not zero2's default 0 */
    ck_assert_int_eq(s.strategy.limit_all_gathers, 0);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_SELECTIVE);
    ck_assert_int_eq(s.strategy.flash_attention, 0);
    ck_assert_int_eq(s.strategy.offload, 1);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_FP32);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_GPIPE);
    ck_assert_int_eq(s.strategy.sequence_parallel, 1);
    ck_assert_uint_eq(s.strategy.bucket_bytes, 50u * 1048576u);
    ck_assert_uint_eq(s.batch.global_seqs, 64);
    ck_assert_uint_eq(s.batch.micro_seqs, 2);
    ck_assert_uint_eq(gs_scenario_microbatches(&s), 4); /* 64 / (2 x 8) */
}
END_TEST

START_TEST(load_strategy_names)
{
    /* Canonical names round-trip; aliases and upper case are accepted. */
    gs_sharding sh;
    for (int i = 0; i < GS_SHARD_COUNT; i++) {
        ck_assert_int_eq(gs_sharding_parse(gs_sharding_name((gs_sharding)i), &sh), 0);
        ck_assert_int_eq(sh, i);
    }
    ck_assert_int_eq(gs_sharding_parse("FULL_SHARD", &sh), 0);
    ck_assert_int_eq(sh, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(gs_sharding_parse("ddp", &sh), 0);
    ck_assert_int_eq(sh, GS_SHARD_NO_SHARD);
    ck_assert_int_eq(gs_sharding_parse("hsdp", &sh), 0);
    ck_assert_int_eq(sh, GS_SHARD_HYBRID_SHARD);
    ck_assert_int_eq(gs_sharding_parse("zero4", &sh), -1);
    gs_pipeline p;
    ck_assert_int_eq(gs_pipeline_parse("interleaved_1f1b", &p), 0);
    ck_assert_int_eq(p, GS_PIPE_INTERLEAVED);
    gs_precision pr;
    ck_assert_int_eq(gs_precision_parse("BF16", &pr), 0);
    ck_assert_int_eq(pr, GS_PREC_BF16);
    ck_assert_int_eq(gs_precision_parse("fp8", &pr), -1);
    ck_assert_uint_eq(gs_precision_bytes(GS_PREC_FP32), 4);
    ck_assert_uint_eq(gs_precision_bytes(GS_PREC_FP16), 2);
    /* ZeRO stages (seed S3): 1 shards optimizer, 2 adds grads, 3 adds params. */
    ck_assert(gs_sharding_shards_optimizer(GS_SHARD_ZERO1) && !gs_sharding_shards_grads(GS_SHARD_ZERO1));
    ck_assert(gs_sharding_shards_grads(GS_SHARD_ZERO2) && !gs_sharding_shards_params(GS_SHARD_ZERO2));
    ck_assert(gs_sharding_shards_params(GS_SHARD_ZERO3));
    ck_assert(!gs_sharding_shards_optimizer(GS_SHARD_NO_SHARD));
    ck_assert(gs_sharding_shards_params(GS_SHARD_HYBRID_SHARD));
    ck_assert(!gs_sharding_is_fsdp(GS_SHARD_ZERO1));
    ck_assert(gs_sharding_is_fsdp(GS_SHARD_NO_SHARD));
}
END_TEST

/* precision: fp8 is bf16 training with FP8 linear layers; the recipe resolves from the framework
 * (Megatron-LM: Transformer Engine's delayed scaling; FSDP: torchao's current scaling) unless
 * fp8_recipe names it; the GPU must have FP8 tensor cores; the keys round-trip. */
START_TEST(load_fp8)
{
    gs_scenario s;
    load_ok("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 4, tp: 2}\nstrategy: {sharding: zero1, "
            "precision: fp8}\n", &s);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_DELAYED);
    ck_assert_int_eq(s.strategy.fp8_params, 0);
    load_ok("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 8}\nstrategy: {precision: FP8}\n", &s);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_CURRENT); /* full_shard: fsdp1, torchao */
    load_ok("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 8}\nstrategy: {sharding: zero1, precision: fp8, "
            "fp8_recipe: tensorwise, fp8_params: true}\n", &s);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_CURRENT);
    ck_assert_int_eq(s.strategy.fp8_params, 1);
    gs_text t;
    gs_error err;
    gs_error_init(&err);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "  precision: fp8\n") && strstr(gs_text_str(&t), "  fp8_recipe: current\n") &&
                      strstr(gs_text_str(&t), "  fp8_params: true\n"), "%s", gs_text_str(&t));
    gs_scenario b;
    load_ok(gs_text_str(&t), &b);
    ck_assert(b.strategy.fp8 == GS_FP8_CURRENT && b.strategy.fp8_params == 1 && b.strategy.precision == GS_PREC_BF16);
    gs_text_fini(&t);
    load_fails("model: llama2-7b\ncluster: dgx-a100-80g\ngrid: {dp: 8}\nstrategy: {precision: fp8}\n", GS_ERR_INPUT,
               4, 23, "GPU a100-80g has no FP8 tensor cores");
    load_fails("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 8}\nstrategy: {precision: bf16, fp8_recipe: delayed}\n",
               GS_ERR_INPUT, 4, 41, "strategy.fp8_recipe applies to FP8 training");
    load_fails("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 8}\nstrategy: {precision: fp8, fp8_recipe: mxfp8}\n",
               GS_ERR_INPUT, 4, 40, "strategy.fp8_recipe mxfp8: block-scaled FP8 GEMMs need Blackwell tensor cores");
    load_fails("model: llama2-7b\ncluster: dgx-h100\ngrid: {dp: 8}\nstrategy: {precision: fp8, fp8_recipe: nvfp4}\n",
               GS_ERR_INPUT, 4, 40,
               "strategy.fp8_recipe: found unknown value 'nvfp4', expected one of delayed, current, mxfp8, auto");
    {   /* MX block scaling on Blackwell, written back as it was read */
        gs_scenario mx, mx2;
        load_ok("model: llama2-7b\ncluster: dgx-b200\ngrid: {dp: 8}\nstrategy: {precision: fp8, fp8_recipe: mxfp8}\n",
                &mx);
        ck_assert_int_eq(mx.strategy.fp8, GS_FP8_MX);
        gs_text tm;
        gs_text_init(&tm);
        ck_assert_int_eq(gs_scenario_write_yaml(&mx, &tm, &err), GS_OK);
        ck_assert_msg(strstr(gs_text_str(&tm), "  fp8_recipe: mxfp8\n"), "%s", gs_text_str(&tm));
        load_ok(gs_text_str(&tm), &mx2);
        ck_assert_int_eq(mx2.strategy.fp8, GS_FP8_MX);
        gs_text_fini(&tm);
    }
    /* a custom GPU with an FP8 peak */
    load_ok("model: llama2-7b\ncluster: {preset: dgx-a100-80g, gpu: {preset: a100-80g, fp8_tflops: 624}}\n"
            "grid: {dp: 8}\nstrategy: {precision: fp8}\n", &s);
    ck_assert(s.cluster.gpu.peak_flops_fp8 == 624e12 && s.cluster.gpu.gemm_efficiency_fp8 == s.cluster.gpu.gemm_efficiency);
}
END_TEST

START_TEST(load_user_model)
{
    gs_scenario s;
    /* The seed's nominal 7B: Llama conventions fill heads, ffn and vocab; Llama 2 7B's own
     * config has 32 heads, ffn 11008 and vocab 32000. */
    load_ok("model: {params: 7e9, layers: 32, hidden: 4096, seq: 4096}\n"
            "cluster: dgx-a100-80g\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_uint_eq(s.model.nominal_params, 7000000000ULL);
    ck_assert_uint_eq(s.model.heads, 32);
    ck_assert_uint_eq(s.model.ffn, 11008);
    ck_assert_uint_eq(s.model.vocab, 32000);
    ck_assert_uint_eq(s.model.head_dim, 128);
    ck_assert_int_eq(s.model.norm, GS_NORM_RMSNORM);
    ck_assert_int_eq(s.model.mlp, GS_MLP_SWIGLU);
    ck_assert_ptr_null(s.model.source);
    /* A GPT-style user model: every field given. */
    load_ok("model:\n"
            "  name: gpt-small\n"
            "  layers: 12\n"
            "  hidden: 768\n"
            "  heads: 12\n"
            "  ffn: 3072\n"
            "  vocab: 50257\n"
            "  seq: 1024\n"
            "  tied_embeddings: true\n"
            "  bias: true\n"
            "  dropout: true\n"
            "  norm: layernorm\n"
            "  mlp: gelu\n"
            "  pos: learned\n"
            "cluster: dgx-a100-80g\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_str_eq(s.model.name, "gpt-small");
    ck_assert_uint_eq(s.model.kv_heads, 12); /* MHA: derived from heads */
    ck_assert_uint_eq(s.model.head_dim, 64);
    ck_assert_int_eq(s.model.tied_embeddings, 1);
    ck_assert_int_eq(s.model.bias, 1);
    ck_assert_int_eq(s.model.dropout, 1);
    ck_assert_int_eq(s.model.norm, GS_NORM_LAYERNORM);
    ck_assert_int_eq(s.model.mlp, GS_MLP_GELU);
    ck_assert_int_eq(s.model.pos, GS_POS_LEARNED);
}
END_TEST

/* Dropout rates: Megatron-LM's 0.1 each by default with dropout (a GPT preset has it), 0 without;
 * either may be set (0 included) with dropout: true; a rate without dropout, of 1 or more, below
 * 0 or not a number is refused at its line and column; the written YAML reads back the rates. */
START_TEST(load_dropout_rates)
{
    gs_scenario s;
    load_ok("model: gpt3-175b\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", &s);
    ck_assert_int_eq(s.model.dropout, 1);
    ck_assert(s.model.attention_dropout == 0.1 && s.model.hidden_dropout == 0.1);
    load_ok("model: llama2-7b\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", &s);
    ck_assert(s.model.dropout == 0 && s.model.attention_dropout == 0.0 && s.model.hidden_dropout == 0.0);
    load_ok("model: {preset: llama2-7b, dropout: true, attention_dropout: 0.25}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n",
            &s);
    ck_assert(s.model.attention_dropout == 0.25 && s.model.hidden_dropout == 0.1);
    load_ok("model: {preset: gpt3-175b, hidden_dropout: 0}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", &s);
    ck_assert(s.model.attention_dropout == 0.1 && s.model.hidden_dropout == 0.0);
    load_fails("model: {preset: llama2-7b, hidden_dropout: 0.1}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", GS_ERR_INPUT, 1, 44,
               "model.hidden_dropout: found a dropout rate with dropout: false");
    load_fails("model: {preset: gpt3-175b, attention_dropout: 1}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", GS_ERR_INPUT, 1, 47,
               "expected a probability 0 <= p < 1");
    load_fails("model: {preset: gpt3-175b, attention_dropout: -0.1}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", GS_ERR_INPUT, 1, 47,
               "expected a probability 0 <= p < 1");
    load_fails("model: {preset: gpt3-175b, hidden_dropout: lots}\ncluster: dgx-a100-80g\ngrid: {dp: 8}\n", GS_ERR_INPUT, 1, 44,
               "model.hidden_dropout: found");
    /* written and read back */
    load_ok("model: {preset: gpt3-175b, layers: 2, attention_dropout: 0.3, hidden_dropout: 0.05}\n"
            "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
            &s);
    gs_text t;
    gs_error err;
    gs_error_init(&err);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "  attention_dropout: 0.3\n  hidden_dropout: 0.05\n") != NULL, "%s",
                  gs_text_str(&t));
    gs_scenario b;
    load_ok(gs_text_str(&t), &b);
    ck_assert(b.model.attention_dropout == 0.3 && b.model.hidden_dropout == 0.05 && b.model.dropout == 1);
    gs_text_fini(&t);
}
END_TEST

START_TEST(load_file_and_string_names)
{
    gs_scenario s;
    gs_error err;
    const char *text = BASE;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), "dir/sub/my-run.yaml", &s, &err),
                     GS_OK);
    ck_assert_str_eq(s.name, "my-run");
    ck_assert_str_eq(s.path, "dir/sub/my-run.yaml");
    ck_assert_int_eq(gs_scenario_load_string(text, strlen(text), NULL, &s, &err), GS_OK);
    ck_assert_str_eq(s.path, "<string>");
    /* The length bounds the text: a cut after line 2 has no grid. */
    ck_assert_int_eq(gs_scenario_load_string(text, strlen("model: llama2-7b\ncluster: "
                                                          "dgx-a100-80g\n"),
                                             "t.yaml", &s, &err),
                     GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "grid is required"));
}
END_TEST

/* --------------------------------------------------------------------- overrides ---- */

START_TEST(override_model_preset)
{
    gs_scenario s;
    load_ok("model:\n"
            "  preset: llama2-70b\n"
            "  seq: 8192\n"
            "cluster: {preset: dgx-a100-80g, nodes: 8}\n"
            "grid: {dp: 4, pp: 2, tp: 8}\n",
            &s);
    ck_assert_uint_eq(s.model.seq, 8192);
    ck_assert_uint_eq(s.model.layers, 80);
    ck_assert_uint_eq(s.model.hidden, 8192);
    ck_assert_uint_eq(s.model.kv_heads, 8);
    /* Default global batch = micro 1 x dp 4 sequences of the overridden 8192 tokens. */
    ck_assert(gs_scenario_tokens(&s) == 4.0 * 8192.0);
}
END_TEST

START_TEST(override_model_shape)
{
    gs_scenario s;
    /* Changing hidden on a preset re-derives head_dim: 8192 / 32 heads = 256. */
    load_ok("model: {preset: llama2-7b, hidden: 8192, layers: 16}\n"
            "cluster: dgx-a100-80g\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_uint_eq(s.model.hidden, 8192);
    ck_assert_uint_eq(s.model.head_dim, 256);
    ck_assert_uint_eq(s.model.layers, 16);
    ck_assert_uint_eq(s.model.ffn, 11008); /* kept from the preset */
    /* Nominal params on top of a preset. */
    load_ok("model: {preset: llama2-7b, params: 7e9}\n"
            "cluster: dgx-a100-80g\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_uint_eq(gs_model_params(&s.model), 7000000000ULL);
}
END_TEST

START_TEST(override_cluster)
{
    gs_scenario s;
    gs_mesh m;
    load_and_mesh_ok("model: llama2-70b\n"
                     "cluster:\n"
                     "  preset: dgx-a100-80g\n"
                     "  nodes: 8\n"
                     "  nic: ib-ndr\n"
                     "grid: {dp: 4, pp: 2, tp: 8}\n",
                     &s, &m);
    ck_assert_str_eq(s.cluster.name, "dgx-a100-80g");
    ck_assert_uint_eq(s.cluster.nodes, 8);
    ck_assert(s.cluster.nic.gbps == 400.0); /* NDR = 400 Gb/s */
    ck_assert_str_eq(s.cluster.gpu.name, "a100-80g");
    ck_assert_uint_eq(gs_cluster_gpus(&s.cluster), 64);

    /* nic_gbps: a 4x faster line scales the achievable bandwidth 4x. */
    const gs_cluster *base = gs_cluster_preset_find("pcie-a100-25gbe");
    ck_assert_ptr_nonnull(base);
    load_ok("model: llama2-7b\n"
            "cluster: {preset: pcie-a100-25gbe, nodes: 2, nic_gbps: 100}\n"
            "grid: {dp: 16}\n",
            &s);
    ck_assert(s.cluster.nic.gbps == 100.0);
    ck_assert_double_eq_tol(s.cluster.nic.bw, base->nic.bw * 4.0, base->nic.bw * 1e-12);

    /* GPU by preset name, then GPU fields on top of the cluster's GPU. */
    load_ok("model: llama2-7b\n"
            "cluster: {preset: dgx-a100-80g, gpu: h100-sxm}\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_str_eq(s.cluster.gpu.name, "h100-sxm");
    load_ok("model: llama2-7b\n"
            "cluster:\n"
            "  preset: dgx-a100-80g\n"
            "  gpu: {memory_gb: 40, bf16_tflops: 100, gemm_efficiency: 0.5, hbm_tbps: 1.5}\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_str_eq(s.cluster.gpu.name, "a100-80g");
    ck_assert_uint_eq(s.cluster.gpu.hbm_bytes, 40000000000ULL);
    ck_assert(s.cluster.gpu.peak_flops_bf16 == 100e12);
    ck_assert(s.cluster.gpu.gemm_efficiency == 0.5);
    ck_assert(s.cluster.gpu.hbm_bw == 1.5e12);
    /* fabric is a synonym of intra; rail and oversubscription flags. */
    load_ok("model: llama2-7b\n"
            "cluster: {preset: dgx-a100-80g, fabric: nvlink4, rail_optimized: false, "
            "oversubscription: 2}\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert_str_eq(s.cluster.intra.name, "nvlink4");
    ck_assert_int_eq(s.cluster.rail_optimized, 0);
    ck_assert(s.cluster.oversubscription == 2.0);
}
END_TEST

START_TEST(override_cluster_custom)
{
    gs_scenario s;
    gs_mesh m;
    load_and_mesh_ok("model: llama2-7b\n"
                     "cluster: {gpu: a100-80g, intra: nvlink3, nic: ib-hdr, gpus_per_node: 4, "
                     "nodes: 2}\n"
                     "grid: {dp: 2, tp: 4}\n",
                     &s, &m);
    ck_assert_str_eq(s.cluster.name, "custom");
    ck_assert_uint_eq(gs_cluster_gpus(&s.cluster), 8);
    ck_assert_uint_eq(s.cluster.nics_per_node, 4); /* one per GPU unless given */
    ck_assert(s.cluster.oversubscription == 1.0);
    ck_assert_uint_eq(m.world, 8);
}
END_TEST

START_TEST(override_strategy_dependent_defaults)
{
    gs_scenario s;
    load_ok(BASE "strategy: {sharding: full_shard, reshard_after_forward: false}\n", &s);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 0);
    load_ok(BASE "strategy: {sharding: shard_grad_op}\n", &s);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 0);
    load_ok(BASE "strategy: {sharding: no_shard}\n", &s);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 0);
    load_ok(BASE "strategy: {sharding: hybrid_shard}\n", &s);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 1);
    load_ok(BASE "strategy: {sharding: zero3}\n", &s);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 1);
    load_ok(BASE "strategy: {wrap: model}\n", &s);
    ck_assert_int_eq(s.strategy.wrap, GS_WRAP_MODEL);
}
END_TEST

START_TEST(override_interleaved)
{
    gs_scenario s;
    gs_mesh m;
    /* 32 layers over pp 2 x 2 chunks = 8 layers per chunk; 8 micro-batches, a multiple of pp. */
    load_and_mesh_ok("model: llama2-7b\n"
                     "cluster: dgx-a100-80g\n"
                     "grid: {dp: 4, pp: 2}\n"
                     "strategy: {pipeline: interleaved, virtual_stages: 2}\n"
                     "batch: {global: 32, micro: 1}\n",
                     &s, &m);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_INTERLEAVED);
    ck_assert_uint_eq(s.strategy.virtual_stages, 2);
    ck_assert_uint_eq(gs_scenario_microbatches(&s), 8);
}
END_TEST

START_TEST(override_allow_tp_cross_node)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_diag w;
    load_ok("model: llama2-70b\n"
            "cluster: {preset: dgx-a100-80g, nodes: 2}\n"
            "grid: {tp: 16, allow_tp_cross_node: true}\n",
            &s);
    ck_assert_int_eq(s.grid.allow_tp_cross_node, 1);
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_mesh(&s, &m, &w, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_ge(w.count, 1); /* a loud warning instead of an error */
    gs_diag_fini(&w);
}
END_TEST

/* ------------------------------------------------------------------------ errors ---- */

START_TEST(error_missing_file)
{
    gs_scenario s;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_file("/nonexistent/dir/x.yaml", &s, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "/nonexistent/dir/x.yaml: cannot open: No such file or directory");
    ck_assert_int_eq(gs_status_exit_code(err.status), 2);
    /* A directory is not a scenario. */
    ck_assert_int_eq(gs_scenario_load_file(".", &s, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "found a directory, expected a regular file") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(error_yaml_syntax)
{
    /* The flow mapping opened on line 3 is never closed; libyaml notices at line 4 col 9. */
    load_fails("model: llama2-7b\n"      /* 1 */
               "cluster: dgx-a100-80g\n" /* 2 */
               "grid: {dp: 8, pp: 1\n"   /* 3 */
               "strategy:\n",            /* 4 */
               GS_ERR_INPUT, 4, 9, "YAML syntax error");
    /* Tab indentation. */
    load_fails("model: llama2-7b\n" /* 1 */
               "grid:\n"            /* 2 */
               "\tdp: 8\n",         /* 3 */
               GS_ERR_INPUT, 3, 1, "YAML syntax error");
    /* Invalid UTF-8: a reader error, placed at the bad byte (column 8 of line 1). */
    load_fails("model: \xff\xfe\n", GS_ERR_INPUT, 1, 8, "cannot read YAML");
}
END_TEST

START_TEST(error_structure)
{
    load_fails("", GS_ERR_INPUT, 0, 0, "empty scenario");
    load_fails("# only a comment\n", GS_ERR_INPUT, 0, 0, "empty scenario");
    load_fails("# c\n"        /* 1 */
               "- a\n"        /* 2 */
               "- b\n",       /* 3 */
               GS_ERR_INPUT, 2, 1, "found a list at the top level, expected a mapping");
    load_fails("just a string\n", GS_ERR_INPUT, 1, 1, "found just a string at the top level");
    load_fails("cluster: dgx-a100-80g\ngrid: {dp: 8}\n", GS_ERR_INPUT, 0, 0,
               "model is required");
    load_fails("model: llama2-7b\ngrid: {dp: 8}\n", GS_ERR_INPUT, 0, 0, "cluster is required");
    load_fails("model: llama2-7b\ncluster: dgx-a100-80g\n", GS_ERR_INPUT, 0, 0,
               "grid is required");
    load_fails(BASE       /* 1-3 */
               "---\n"    /* 4 */
               "model: x\n", /* 5 */
               GS_ERR_INPUT, 5, 1, "found a second YAML document");
    load_fails("[model]: llama2-7b\n", GS_ERR_INPUT, 1, 1, "found a list as a key");
}
END_TEST

START_TEST(error_unknown_keys)
{
    load_fails("model: llama2-7b\n"        /* 1 */
               "clusterr: dgx-a100-80g\n"  /* 2 */
               "grid: {dp: 8}\n",          /* 3 */
               GS_ERR_INPUT, 2, 1, "found unknown key 'clusterr' (did you mean 'cluster'?)");
    load_fails(BASE                        /* 1-3 */
               "strategy:\n"               /* 4 */
               "  recompute: full\n"       /* 5 */
               "  shardng: full_shard\n",  /* 6 */
               GS_ERR_INPUT, 6, 3,
               "strategy: found unknown key 'shardng' (did you mean 'sharding'?), expected one "
               "of sharding, wrap");
    /* Nothing close: the allowed keys, no guess. */
    load_fails(BASE "batch: {global: 8, zzzzzzzzzz: 1}\n", GS_ERR_INPUT, 4, 20,
               "batch: found unknown key 'zzzzzzzzzz', expected one of global, micro");
    load_fails("model: {preset: llama2-7b, layer: 2}\n" /* col 28 */
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 28, "did you mean 'layers'?");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, gpu: {memory: 40}}\n" /* col 39 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 39, "cluster.gpu: found unknown key 'memory' (did you mean");
    load_fails(BASE "strategy: {wrap: {min_param: 5}}\n", GS_ERR_INPUT, 4, 19,
               "did you mean 'min_params'?");
}
END_TEST

START_TEST(error_duplicate_key)
{
    load_fails(BASE                       /* 1-3 */
               "strategy:\n"              /* 4 */
               "  sharding: full_shard\n" /* 5 */
               "  recompute: full\n"      /* 6 */
               "  sharding: zero2\n",     /* 7 */
               GS_ERR_INPUT, 7, 3, "duplicate key 'sharding'");
    load_fails(BASE "model: llama2-70b\n", GS_ERR_INPUT, 4, 1, "(first at line 1)");
}
END_TEST

START_TEST(error_types)
{
    load_fails("model:\n"                 /* 1 */
               "  preset: llama2-7b\n"    /* 2 */
               "  layers: thirty-two\n"   /* 3 */
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 3, 11, "model.layers: found thirty-two, expected a positive integer");
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: \"8\"}\n", /* col 12 */
               GS_ERR_INPUT, 3, 12, "grid.dp: found the string \"8\", expected a positive integer");
    load_fails("model: {preset: llama2-7b, seq: {tokens: 4096}}\n" /* col 33 */
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 33, "model.seq: found a mapping, expected a positive integer");
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: [8, 1, 1]\n",
               GS_ERR_INPUT, 3, 7, "grid: found a list, expected a mapping");
    load_fails("model: [llama2-7b]\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 8, "model: found a list, expected a preset name or a mapping");
    load_fails(BASE "strategy: {offload: maybe}\n", GS_ERR_INPUT, 4, 21,
               "strategy.offload: found maybe, expected true or false");
    load_fails(BASE "strategy: {offload: 1}\n", GS_ERR_INPUT, 4, 21,
               "expected true or false");
    load_fails(BASE "strategy: full_shard\n", GS_ERR_INPUT, 4, 11,
               "strategy: found full_shard, expected a mapping");
    load_fails(BASE "batch: 1024\n", GS_ERR_INPUT, 4, 8, "batch: found 1024, expected a mapping");
    load_fails("model: llama2-7b\n"        /* 1 */
               "cluster: dgx-a100-80g\n"   /* 2 */
               "grid:\n"                   /* 3 */
               "  dp: 8\n"                 /* 4 */
               "  pp:\n",                  /* 5: an empty value sits after the colon */
               GS_ERR_INPUT, 5, 6, "grid.pp: found null, expected a positive integer");
    load_fails("name: [a]\n" BASE, GS_ERR_INPUT, 1, 7, "scenario.name: found a list, expected a string");
    load_fails(BASE "strategy: {wrap: everything}\n", GS_ERR_INPUT, 4, 18,
               "strategy.wrap: found unknown value 'everything', expected one of layer, model, "
               "{min_params: N}");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, oversubscription: fast}\n" /* col 51 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 51, "cluster.oversubscription: found fast, expected a positive number");
}
END_TEST

START_TEST(error_values)
{
    load_fails("model: {preset: llama2-7b, layers: 0}\n" /* col 36 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 36, "model.layers must be positive: found 0");
    load_fails("model: {preset: llama2-7b, hidden: -4096}\n" /* col 36 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 36, "model.hidden must be positive: found -4096");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, nodes: 0}\n" /* col 40 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 40, "cluster.nodes must be positive: found 0");
    load_fails("model: llama2-7b\ncluster: dgx-a100-80g\n"
               "grid: {dp: 4, tp: 2.5}\n", /* col 19 */
               GS_ERR_INPUT, 3, 19, "grid.tp: found 2.5, expected a positive integer");
    load_fails("model: llama2-7b\ncluster: dgx-a100-80g\n"
               "grid: {dp: 8e-1}\n", GS_ERR_INPUT, 3, 12, "grid.dp: found 8e-1");
    load_fails("model: llama2-7b\ncluster: dgx-a100-80g\n"
               "grid: {dp: 8, order: tp-dp-dp}\n", /* col 22 */
               GS_ERR_INPUT, 3, 22, "grid.order: found tp-dp-dp, expected a permutation of tp, dp and pp");
    load_fails("model: llama2-7b\n"
               "cluster:\n"                        /* 2 */
               "  preset: dgx-a100-80g\n"          /* 3 */
               "  gpu: {gemm_efficiency: 1.5}\n"   /* 4, col 26 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 4, 26, "cluster.gpu.gemm_efficiency is out of range: found 1.5");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, oversubscription: 0.5}\n" /* col 51 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 51, "cluster.oversubscription must be at least 1");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, intra: nvlink3, fabric: nvlink3}\n" /* col 57 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 57, "found both 'intra' and 'fabric'");
    /* A user model needs its shape. */
    load_fails("model: {params: 7e9, layers: 32}\n"
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 8, "model: no 'hidden'"); /* a flow mapping starts at { */
    /* A custom cluster needs its hardware. */
    load_fails("model: llama2-7b\n"
               "cluster: {gpu: a100-80g, nic: ib-hdr, gpus_per_node: 8}\n" /* { at col 10 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 10, "cluster: no 'intra'");
    /* gs_model_validate's complaints carry the model's position. */
    load_fails("model: {layers: 2, hidden: 100, heads: 3, ffn: 400, seq: 64}\n"
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 8, "not divisible by heads");
}
END_TEST

START_TEST(error_names)
{
    load_fails("model: lama2-70b\n" /* col 8 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 8,
               "model: found unknown model preset 'lama2-70b' (did you mean 'llama2-70b'?)");
    load_fails("model: {preset: llama2-70bb}\n" /* col 17 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 17, "model.preset: found unknown model preset 'llama2-70bb'");
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-8g\n" /* col 10 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 10,
               "cluster: found unknown cluster preset 'dgx-a100-8g' (did you mean 'dgx-a100-80g'?)");
    load_fails("model: llama2-7b\n"
               "cluster:\n"
               "  preset: dgx-a100-80g\n"
               "  gpu: a100-80\n" /* 4, col 8 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 4, 8,
               "cluster.gpu: found unknown GPU preset 'a100-80' (did you mean 'a100-80g'?), "
               "expected one of");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, nic: ib-hdr200}\n" /* col 38 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 38, "cluster.nic: found unknown NIC preset 'ib-hdr200'");
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, intra: nvlink9}\n" /* col 40 */
               "grid: {dp: 8}\n",
               GS_ERR_INPUT, 2, 40, "cluster.intra: found unknown fabric preset 'nvlink9'");
    load_fails(BASE "strategy: {sharding: full_shrd}\n", GS_ERR_INPUT, 4, 22,
               "strategy.sharding: found unknown value 'full_shrd' (did you mean 'full_shard'?), "
               "expected one of no_shard, shard_grad_op, full_shard, hybrid_shard, zero1, "
               "zero2, zero3");
    load_fails(BASE "strategy: {precision: fp4}\n", GS_ERR_INPUT, 4, 23,
               "expected one of bf16, fp16, fp32, fp8");
    load_fails(BASE "strategy: {recompute: some}\n", GS_ERR_INPUT, 4, 23,
               "expected one of none, selective, full");
    load_fails(BASE "strategy: {prefetch: early}\n", GS_ERR_INPUT, 4, 22,
               "expected one of none, backward_pre, backward_post");
    load_fails(BASE "strategy: {pipeline: zb}\n", GS_ERR_INPUT, 4, 22,
               "expected one of gpipe, 1f1b, interleaved");
    load_fails("model: {preset: llama2-7b, norm: batchnorm}\n" /* col 34 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_INPUT, 1, 34, "model.norm: found unknown value 'batchnorm'");
}
END_TEST

START_TEST(error_pipeline_strategy)
{
    load_fails("model: llama2-7b\n"         /* 1 */
               "cluster: dgx-a100-80g\n"    /* 2 */
               "grid: {dp: 4, pp: 2}\n"     /* 3 */
               "strategy:\n"                /* 4 */
               "  pipeline: 1f1b\n"         /* 5 */
               "  virtual_stages: 2\n",     /* 6, col 19 */
               GS_ERR_INPUT, 6, 19, "strategy.virtual_stages=2 needs pipeline: interleaved");
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 4, pp: 2}\n"
               "strategy: {pipeline: interleaved}\n", /* 4, col 22 */
               GS_ERR_INPUT, 4, 22, "interleaved needs virtual_stages >= 2");
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 4, pp: 2}\n"
               "strategy: {pipeline: interleaved, virtual_stages: 1}\n", /* col 51 */
               GS_ERR_INPUT, 4, 51, "found virtual_stages=1,");
}
END_TEST

START_TEST(error_mesh)
{
    /* Errors found with the mesh carry the position of `grid:` or `batch:`. */
    mesh_fails("model: llama2-70b\n"                         /* 1 */
               "cluster: {preset: dgx-a100-80g, nodes: 8}\n" /* 2 */
               "grid: {dp: 2, pp: 2, tp: 8}\n",              /* 3, col 7 */
               GS_ERR_INPUT, 3, 7, "= 32 ranks but the cluster has");
    mesh_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, nodes: 8}\n"
               "grid:\n"            /* 3 */
               "  pp: 64\n",        /* 4: a block mapping starts at its first key */
               GS_ERR_INPUT, 4, 3, "pp=64 exceeds the model's 32 layers");
    mesh_fails("model: {layers: 4, hidden: 512, heads: 4, ffn: 2048, seq: 1024}\n"
               "cluster: dgx-a100-80g\n"
               "grid: {tp: 8}\n",
               GS_ERR_INPUT, 3, 7, "heads=4 not divisible by tp=8");
    mesh_fails("model: llama2-70b\n"
               "cluster: {preset: dgx-a100-80g, nodes: 2}\n"
               "grid: {tp: 16}\n",
               GS_ERR_INPUT, 3, 7, "set grid.allow_tp_cross_node: true to accept");
    mesh_fails("model: llama2-7b\n"                           /* 1 */
               "cluster: {preset: dgx-a100-80g, nodes: 8}\n"  /* 2 */
               "grid: {dp: 64}\n"                             /* 3 */
               "batch: {global: 1000, micro: 1}\n",           /* 4, col 8 */
               GS_ERR_INPUT, 4, 8,
               "batch.global=1000 is not a multiple of micro=1 x dp=64: found 1000, expected a "
               "multiple of 64 (like 960 or 1024)");
    /* Megatron's interleaved schedule: layers split into pp x v chunks, micro-batches a
     * multiple of pp. */
    mesh_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 4, pp: 2}\n"
               "strategy: {pipeline: interleaved, virtual_stages: 3}\n"
               "batch: {global: 8}\n",
               GS_ERR_INPUT, 3, 7, "found 32 layers, expected a multiple of 6");
    mesh_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 4, pp: 2}\n"
               "strategy: {pipeline: interleaved, virtual_stages: 2}\n"
               "batch: {global: 12, micro: 1}\n", /* 5, col 8 */
               GS_ERR_INPUT, 5, 8,
               "micro-batches per step to be a multiple of pp=2 (Megatron's requirement): found "
               "global / (micro x dp) = 12 / 4 = 3");
}
END_TEST

START_TEST(error_mesh_in_code)
{
    /* A scenario assembled in code has no positions: messages start with the path. */
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    load_ok(BASE, &s);
    s.grid.grid_line = s.grid.grid_col = 0;
    s.batch.batch_line = s.batch.batch_col = 0;
    s.batch.global_seqs = 12;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_ERR_INPUT);
    ck_assert_str_eq(err.msg, "t.yaml: batch.global=12 is not a multiple of micro=1 x dp=8: "
                              "found 12, expected a multiple of 8 (like 8 or 16)");
}
END_TEST

/* ------------------------------------------------------------------------ limits ---- */

START_TEST(limits_integers)
{
    gs_scenario s;
    /* 2^63 and 2^64 - 1 are representable; 2^64 is not. */
    load_ok(BASE "batch: {global: 9223372036854775808}\n", &s);
    ck_assert_uint_eq(s.batch.global_seqs, (uint64_t)1 << 63);
    load_ok(BASE "batch: {global: 18446744073709551615}\n", &s);
    ck_assert_uint_eq(s.batch.global_seqs, UINT64_MAX);
    load_fails(BASE "batch: {global: 18446744073709551616}\n", GS_ERR_OVERFLOW, 4, 17,
               "batch.global is too large: found 18446744073709551616");
    load_fails(BASE "batch: {global: 1e400}\n", GS_ERR_OVERFLOW, 4, 17, "too large");
    load_fails(BASE "batch: {global: inf}\n", GS_ERR_INPUT, 4, 17,
               "found inf, expected a positive integer");
    load_fails(BASE "batch: {global: .nan}\n", GS_ERR_INPUT, 4, 17, "expected a positive integer");
    /* Scientific notation and suffixes, as gs_parse_count reads them. */
    load_ok(BASE "batch: {global: 1.024e3, micro: 1}\n", &s);
    ck_assert_uint_eq(s.batch.global_seqs, 1024);
    load_ok("model: {params: 6.7B, layers: 32, hidden: 4096, seq: 4K}\n"
            "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
            &s);
    ck_assert_uint_eq(s.model.nominal_params, 6700000000ULL);
    ck_assert_uint_eq(s.model.seq, 4000);
    /* Default global = micro x dp overflowing. */
    load_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 8}\n"
               "batch: {micro: 4e18}\n", /* 4, { at col 8 */
               GS_ERR_OVERFLOW, 4, 8, "too large");
}
END_TEST

START_TEST(limits_params)
{
    gs_scenario s;
    gs_mesh m;
    /* 1e15 parameters on 10^7 GPUs: 16 B/param = 1.6e19 B still fits in 64 bits. */
    load_and_mesh_ok("model: {params: 1e15, layers: 1000, hidden: 65536, seq: 4096}\n"
                     "cluster: {preset: dgx-a100-80g, nodes: 1250000}\n"
                     "grid: {dp: 125000, pp: 10, tp: 8}\n",
                     &s, &m);
    ck_assert_uint_eq(gs_model_params(&s.model), 1000000000000000ULL);
    ck_assert_uint_eq(m.world, 10000000);
    /* 2e18 parameters: the count fits, its 16 B/param state does not. */
    load_fails("model: {params: 2e18, layers: 32, hidden: 4096, seq: 4096}\n"
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_OVERFLOW, 1, 8, "overflow");
    /* 2e19 parameters: not even a 64-bit count. */
    load_fails("model: {params: 2e19, layers: 32, hidden: 4096, seq: 4096}\n" /* col 17 */
               "cluster: dgx-a100-80g\ngrid: {dp: 8}\n",
               GS_ERR_OVERFLOW, 1, 17, "model.params is too large: found 2e19");
}
END_TEST

START_TEST(limits_ranks)
{
    gs_scenario s;
    gs_mesh m;
    /* 8e7 ranks: the mesh is O(1), so this loads and checks at once. */
    load_and_mesh_ok("model: llama2-7b\n"
                     "cluster: {preset: dgx-a100-80g, nodes: 10000000}\n"
                     "grid: {dp: 8e7}\n",
                     &s, &m);
    ck_assert_uint_eq(m.world, 80000000ULL);
    ck_assert_uint_eq(s.batch.global_seqs, 80000000ULL);
    /* nodes x gpus_per_node overflowing 64 bits. */
    load_fails("model: llama2-7b\n"
               "cluster: {preset: dgx-a100-80g, nodes: 4e18}\n"
               "grid: {dp: 8}\n",
               GS_ERR_OVERFLOW, 2, 10, "overflows 64 bits");
    /* dp x pp x tp overflowing 64 bits is the mesh's error, at grid:. */
    mesh_fails("model: llama2-7b\n"
               "cluster: dgx-a100-80g\n"
               "grid: {dp: 4e9, tp: 5e9}\n",
               GS_ERR_OVERFLOW, 3, 7, "overflows 64 bits");
}
END_TEST

START_TEST(limits_text)
{
    gs_scenario s;
    gs_error err;
    /* Names longer than their buffers are refused, not cut. */
    char text[4096];
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    snprintf(text, sizeof text, BASE "name: %s\n", longname);
    load_fails(text, GS_ERR_INPUT, 4, 7, "scenario.name is too long");
    /* Deep flow nesting is refused before libyaml's quadratic scanner sees it. */
    char deep[2048] = "model: llama2-7b\ncluster: dgx-a100-80g\ngrid: {dp: 8}\nname: ";
    size_t n = strlen(deep);
    for (int i = 0; i < 200; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    load_fails(deep, GS_ERR_INPUT, 4, 71, "nesting too deep");
    /* Brackets inside a plain scalar count (the check is conservative): the 65th '[' of
     * `description: it's "[[[...` sits at column 14 + 5 + 65 = 84. */
    snprintf(text, sizeof text, BASE "description: it's \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n");
    load_fails(text, GS_ERR_INPUT, 4, 84, "nesting too deep");
    /* Inside a quoted scalar they do not, and an apostrophe there does not end it. */
    snprintf(text, sizeof text, BASE "description: \"it's [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n");
    gs_error_init(&err);
    ck_assert_msg(load_str(text, &s, &err) == GS_OK, "%s", err.msg);
    /* Embedded NUL bytes in a scenario string are refused. */
    static const char nul[] = BASE "name: \"a\\0b\"\n";
    load_fails(nul, GS_ERR_INPUT, 4, 7, "holds a NUL");
}
END_TEST

/* ------------------------------------------------------------------------- suite ---- */

/* The spellings a YAML 1.1 user writes mean what they say: on/off like yes/no and true/false,
 * and a grid order in capitals like a precision in capitals (TP-DP-PP = tp-dp-pp). */
START_TEST(spellings_consistent)
{
    static const char base[] = "model: llama2-7b\ncluster: dgx-a100-80g\ngrid: {dp: 2, tp: 4, order: %s}\n"
                               "strategy: {flash_attention: %s, offload: %s, precision: BF16}\n";
    const char *const on[] = {"true", "yes", "on", "On", "TRUE"}, *const off[] = {"false", "no", "off", "OFF"};
    char text[512];
    gs_scenario s, ref;
    snprintf(text, sizeof text, base, "tp-dp-pp", "true", "false");
    load_ok(text, &ref);
    ck_assert_int_eq(ref.strategy.flash_attention, 1);
    ck_assert_int_eq(ref.strategy.offload, 0);
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        snprintf(text, sizeof text, base, i % 2 ? "TP-DP-PP" : "Tp-Dp-Pp", on[i], off[i % 4]);
        load_ok(text, &s);
        ck_assert_int_eq(s.strategy.flash_attention, 1);
        ck_assert_int_eq(s.strategy.offload, 0);
        ck_assert_mem_eq(s.grid.order, ref.grid.order, sizeof ref.grid.order);
    }
    /* quoted, "on" is a string, not a boolean */
    gs_error err;
    snprintf(text, sizeof text, base, "tp-dp-pp", "\"on\"", "false");
    ck_assert_int_eq(load_str(text, &s, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "expected true or false (or yes/no, on/off)") != NULL, "%s", err.msg);
}
END_TEST


/* The model a scenario reads back after the writer wrote it: every field the same. */
static void model_round_trip(const gs_scenario *s)
{
    gs_text t;
    gs_error err;
    gs_scenario b;
    gs_error_init(&err);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(s, &t, &err), GS_OK);
    load_ok(gs_text_str(&t), &b);
    ck_assert_str_eq(b.model.name, s->model.name);
    ck_assert_msg(memcmp(&b.model.moe, &s->model.moe, sizeof b.model.moe) == 0 &&
                      memcmp(&b.model.mla, &s->model.mla, sizeof b.model.mla) == 0,
                  "%s", gs_text_str(&t));
    ck_assert(b.model.layers == s->model.layers && b.model.hidden == s->model.hidden &&
              b.model.heads == s->model.heads && b.model.kv_heads == s->model.kv_heads &&
              b.model.head_dim == s->model.head_dim && b.model.ffn == s->model.ffn &&
              b.model.vocab == s->model.vocab && b.model.seq == s->model.seq);
    ck_assert_uint_eq(gs_model_params(&b.model), gs_model_params(&s->model));
    ck_assert_uint_eq(gs_model_active_params(&b.model), gs_model_active_params(&s->model));
    gs_text_fini(&t);
}

/* moe and mla: presets, a model of its own, a preset changed; each written and read back. */
START_TEST(load_moe)
{
    gs_scenario s;
    load_ok("model: mixtral-8x7b\ncluster: dgx-h100\ngrid: {dp: 8}\n", &s);
    ck_assert(s.model.moe.experts == 8 && s.model.moe.top_k == 2 && s.model.moe.expert_ffn == 14336);
    ck_assert_ptr_nonnull(s.model.source);
    gs_text t;
    gs_error err;
    gs_error_init(&err);
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_write_yaml(&s, &t, &err), GS_OK);
    ck_assert_msg(strstr(gs_text_str(&t), "\nmodel: mixtral-8x7b\n") != NULL, "%s", gs_text_str(&t));
    gs_text_fini(&t);

    load_ok("model:\n"
            "  layers: 4\n"
            "  hidden: 1024\n"
            "  seq: 1024\n"
            "  moe: {experts: 8, top_k: 2, shared_experts: 1, dense_layers: 1, capacity_factor: 1.25}\n"
            "cluster: dgx-h100\ngrid: {dp: 8}\n",
            &s);
    ck_assert_uint_eq(s.model.moe.experts, 8);
    ck_assert_uint_eq(s.model.moe.top_k, 2);
    ck_assert_uint_eq(s.model.moe.expert_ffn, s.model.ffn); /* the default */
    ck_assert_uint_eq(s.model.moe.shared_experts, 1);
    ck_assert_uint_eq(s.model.moe.dense_layers, 1);
    ck_assert(s.model.moe.capacity_factor == 1.25);
    /* ffn 2816 (8h/3 rounded up to 256), 8 heads of 128: per block attention 4 x 1024^2, norms
     * 2 x 1024; the dense block's MLP 3 x 1024 x 2816; a MoE block's 8 + 1 experts of the same
     * size and a 1024 x 8 router; embedding and head 2 x 32000 x 1024 + 1024. */
    const uint64_t attn = 4ULL * 1024 * 1024 + 2048, mlp = 3ULL * 1024 * 2816;
    ck_assert_uint_eq(gs_model_params(&s.model),
                      (attn + mlp) + 3 * (attn + 9 * mlp + 8192) + 2ULL * 32000 * 1024 + 1024);
    ck_assert_uint_eq(gs_model_active_params(&s.model),
                      (attn + mlp) + 3 * (attn + 3 * mlp + 8192) + 2ULL * 32000 * 1024 + 1024);
    model_round_trip(&s);

    /* a preset changed: no longer the published configuration, written in full */
    load_ok("model: {preset: mixtral-8x7b, layers: 4, moe: {experts: 16, top_k: 4}}\ncluster: dgx-h100\n"
            "grid: {dp: 8}\n",
            &s);
    ck_assert(s.model.moe.experts == 16 && s.model.moe.top_k == 4 && s.model.moe.expert_ffn == 14336);
    ck_assert_ptr_null(s.model.source);
    model_round_trip(&s);
    load_ok("model: {preset: deepseek-v3, layers: 5}\ncluster: dgx-h100\ngrid: {dp: 8}\n", &s);
    ck_assert(s.model.mla.kv_lora_rank == 512 && s.model.moe.dense_layers == 3);
    model_round_trip(&s);
    /* heads changed on an MLA preset: kv_heads follows */
    load_ok("model: {preset: deepseek-v3, heads: 64, mla: {kv_lora_rank: 256}}\ncluster: dgx-h100\ngrid: {dp: 8}\n",
            &s);
    ck_assert(s.model.kv_heads == 64 && s.model.mla.kv_lora_rank == 256 && s.model.mla.q_lora_rank == 1536);
    model_round_trip(&s);
}
END_TEST

START_TEST(error_moe)
{
    const char *rest = "\ncluster: dgx-h100\ngrid: {dp: 8}\n";
    char text[512];
#define MOE_FAILS(model, line, col, fragment)                                                 \
    do {                                                                                      \
        snprintf(text, sizeof text, "%s%s", model, rest);                                     \
        load_fails(text, GS_ERR_INPUT, line, col, fragment);                                  \
    } while (0)
    MOE_FAILS("model: {preset: mixtral-8x7b, moe: {experts: 8, top_k: 9}}", 1, 56,
              "model.moe.top_k: found 9, expected at most experts = 8");
    MOE_FAILS("model: {preset: mixtral-8x7b, moe: {experts: 1, top_k: 1}}", 1, 46,
              "model.moe.experts: found 1, expected at least 2");
    MOE_FAILS("model: {preset: mixtral-8x7b, moe: 5}", 1, 36, "model.moe: found");
    MOE_FAILS("model: {preset: mixtral-8x7b, moe: {experts: 8, topk: 2}}", 1, 49, "topk");
    MOE_FAILS("model: {layers: 4, hidden: 1024, seq: 1024, moe: {experts: 8}}", 1, 50, "model.moe: no 'top_k'");
    MOE_FAILS("model: {layers: 4, hidden: 1024, seq: 1024, moe: {experts: 8, top_k: 2, dense_layers: 4}}", 1, 87,
              "model.moe.dense_layers: found 4, expected fewer than layers = 4");
    MOE_FAILS("model: {preset: mixtral-8x7b, moe: {capacity_factor: -1}}", 1, 54,
              "model.moe.capacity_factor: found");
    MOE_FAILS("model: {preset: llama2-7b, mla: {q_lora_rank: 64}}", 1, 33, "model.mla: no 'kv_lora_rank'");
    MOE_FAILS("model: {preset: gpt3-175b, mla: {kv_lora_rank: 64}}", 1, 33, "found with bias: true");
    MOE_FAILS("model: {preset: mixtral-8x7b, params: 7e9}", 1, 8, "nominal");
#undef MOE_FAILS
}
END_TEST

static Suite *scenario_suite(void)
{
    Suite *s = suite_create("scenario");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, load_grid_b);
    tcase_add_test(tc, load_seed_files);
    tcase_add_test(tc, load_seed_25gbe_cluster);
    tcase_add_test(tc, load_defaults);
    tcase_add_test(tc, load_deepspeed_wrap);
    tcase_add_test(tc, load_dropout_rates);
    tcase_add_test(tc, load_every_strategy_key);
    tcase_add_test(tc, load_strategy_names);
    tcase_add_test(tc, load_fp8);
    tcase_add_test(tc, load_user_model);
    tcase_add_test(tc, load_file_and_string_names);
    tcase_add_test(tc, load_moe);
    suite_add_tcase(s, tc);

    tc = tcase_create("overrides");
    tcase_add_test(tc, override_model_preset);
    tcase_add_test(tc, override_model_shape);
    tcase_add_test(tc, override_cluster);
    tcase_add_test(tc, override_cluster_custom);
    tcase_add_test(tc, override_strategy_dependent_defaults);
    tcase_add_test(tc, override_interleaved);
    tcase_add_test(tc, override_allow_tp_cross_node);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, error_missing_file);
    tcase_add_test(tc, error_yaml_syntax);
    tcase_add_test(tc, error_structure);
    tcase_add_test(tc, error_unknown_keys);
    tcase_add_test(tc, error_duplicate_key);
    tcase_add_test(tc, error_types);
    tcase_add_test(tc, error_values);
    tcase_add_test(tc, error_names);
    tcase_add_test(tc, spellings_consistent);
    tcase_add_test(tc, error_pipeline_strategy);
    tcase_add_test(tc, error_mesh);
    tcase_add_test(tc, error_mesh_in_code);
    tcase_add_test(tc, error_moe);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_add_test(tc, limits_integers);
    tcase_add_test(tc, limits_params);
    tcase_add_test(tc, limits_ranks);
    tcase_add_test(tc, limits_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(scenario_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
