/* Check suite for the torchtitan importer (engine/import_torchtitan.c), its TOML reader
 * (engine/toml.c) and the torchtitan config emitter (engine/launch_torchtitan.c). The expected scenarios are independent of the importer: the published
 * torchtitan benchmark scenarios written by hand from torchtitan's benchmark table
 * (scenarios/published/titan-*.yaml), and hand counts written beside the other assertions. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/mesh.h"
#include "engine/scenario.h"
#include "engine/schedule.h"
#include "engine/toml.h"

#define ck_assert_has(text, needle)                                                                \
    ck_assert_msg(strstr((text), (needle)) != NULL, "missing '%s' in:\n%s", (needle), (text))

static char *srcpath(const char *rel)
{
    static char buf[1024];
    const char *top = getenv("top_srcdir");
    snprintf(buf, sizeof buf, "%s/%s", top ? top : ".", rel);
    return buf;
}

/* ---- the TOML reader ------------------------------------------------------------------------ */

START_TEST(test_toml_values)
{
    static const char text[] = "# a comment\n"
                               "top = 1_000\n"
                               "[a.b]\n"
                               "s = \"x \\\"y\\\" # not a comment\"  # a comment\n"
                               "lit = 'c:\\path'\n"
                               "f = 3e-4\n"
                               "on = true\n"
                               "list = [\"model\",\n"
                               "        \"loss\", ]  \n"
                               "nested = [[\"tok\", \"l.0\"], [\"l.1\"]]\n"
                               "c.d = -1\n";
    gs_toml t;
    gs_error err;
    gs_error_init(&err);
    ck_assert_int_eq(gs_toml_parse(text, strlen(text), "x.toml", &t, &err), GS_OK);
    ck_assert_uint_eq(t.n, 8);
    const gs_toml_item *it = gs_toml_find(&t, "top");
    ck_assert(it && it->type == GS_TOML_INT && it->i == 1000 && it->line == 2 && it->col == 1);
    it = gs_toml_find(&t, "a.b.s");
    ck_assert(it && it->type == GS_TOML_STRING);
    ck_assert_str_eq(it->text, "x \"y\" # not a comment");
    ck_assert_str_eq(gs_toml_find(&t, "a.b.lit")->text, "c:\\path");
    it = gs_toml_find(&t, "a.b.f");
    ck_assert(it->type == GS_TOML_FLOAT && it->f == 3e-4);
    ck_assert(gs_toml_find(&t, "a.b.on")->b == 1);
    it = gs_toml_find(&t, "a.b.list");
    ck_assert(it->type == GS_TOML_ARRAY && it->nitems == 2 && it->line == 8);
    ck_assert_str_eq(it->items[1], "loss");
    ck_assert_str_eq(it->text, "model, loss");
    it = gs_toml_find(&t, "a.b.nested");
    ck_assert(it->nitems == 2);
    ck_assert_str_eq(it->items[0], "[\"tok\", \"l.0\"]");
    it = gs_toml_find(&t, "a.b.c.d");
    ck_assert(it && it->i == -1 && it->line == 11);
    gs_toml_fini(&t);
}
END_TEST

START_TEST(test_toml_errors)
{
    static const char *const bad[][2] = {
        {"[t]\nk = 1\nk = 2\n", "x.toml:3:1: this key is given twice"},
        {"k = {a = 1}\n", "x.toml:1:5: inline tables"},
        {"k = \"open\n", "x.toml:1:5: unclosed string"},
        {"[[runs]]\n", "x.toml:1:1: arrays of tables"},
        {"k = [1, 2\n", "x.toml:1:5: unclosed array"},
        {"k = [1,\n  [2,\n", "x.toml:2:3: unclosed array"},
        {"k = 1 2\n", "x.toml:1:7: expected the end of the line"},
        {"k = nope\n", "x.toml:1:5: expected a string, number, boolean or array"},
        {"k = [1, =]\n", "x.toml:1:9: expected a string, number, boolean or array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gs_toml t;
        gs_error err;
        gs_error_init(&err);
        ck_assert_int_eq(gs_toml_parse(bad[i][0], strlen(bad[i][0]), "x.toml", &t, &err), GS_ERR_INPUT);
        ck_assert_has(err.msg, bad[i][1]);
        ck_assert_uint_eq(t.n, 0);
    }
}
END_TEST

/* ---- the importer --------------------------------------------------------------------------- */

static gs_status import(const char *text, uint64_t nodes, gs_scenario *s, gs_diag *ig, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.nodes = nodes;
    gs_error_init(err);
    gs_diag_init(ig);
    return gs_import_torchtitan_string(text, strlen(text), "tt.toml", &o, s, ig, err);
}

static void load_published(const char *rel, gs_scenario *s)
{
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_file(srcpath(rel), s, &err) == GS_OK, "%s: %s", rel, err.msg);
}

/* The scenario fields a torchtitan config decides, against a hand-written scenario. */
static void assert_same_step(const gs_scenario *got, const gs_scenario *want)
{
    ck_assert_uint_eq(got->model.layers, want->model.layers);
    ck_assert_uint_eq(got->model.hidden, want->model.hidden);
    ck_assert_uint_eq(got->model.seq, want->model.seq);
    ck_assert_uint_eq(got->grid.dp, want->grid.dp);
    ck_assert_uint_eq(got->grid.tp, want->grid.tp);
    ck_assert_uint_eq(got->grid.pp, want->grid.pp);
    ck_assert_uint_eq(got->grid.cp ? got->grid.cp : 1, want->grid.cp ? want->grid.cp : 1);
    ck_assert_uint_eq(got->cluster.nodes, want->cluster.nodes);
    const gs_strategy *a = &got->strategy, *b = &want->strategy;
    ck_assert_int_eq(a->framework, b->framework);
    ck_assert_int_eq(a->sharding, b->sharding);
    ck_assert_int_eq(a->recompute, b->recompute);
    ck_assert_int_eq(a->precision, b->precision);
    ck_assert_int_eq(gs_fp8_resolve(a->fp8, GS_FW_FSDP2), gs_fp8_resolve(b->fp8, GS_FW_FSDP2));
    ck_assert_int_eq(a->compile, b->compile);
    ck_assert_int_eq(a->grad_dtype, b->grad_dtype);
    ck_assert_int_eq(a->sequence_parallel, b->sequence_parallel);
    ck_assert_int_eq(a->tp_comm_overlap, b->tp_comm_overlap);
    ck_assert_int_eq(a->attention, b->attention);
    ck_assert_int_eq(a->flash_attention, b->flash_attention);
    ck_assert_uint_eq(got->batch.global_seqs, want->batch.global_seqs);
    ck_assert_uint_eq(got->batch.micro_seqs, want->batch.micro_seqs);
}

/* A config in torchtitan's December 2024 layout (the keys of train_configs/llama3_8b.toml at
 * 9dec370, the benchmark's commit) with the benchmark's local batch of 2: titan-001 (Llama 3.1
 * 8B, FSDP on 8 H100, per-op SAC). */
static const char tt_8b_2412[] =
    "[job]\ndump_folder = \"./outputs\"\n\n"
    "[profiling]\nenable_profiling = true\nprofile_freq = 100\n\n"
    "[metrics]\nlog_freq = 10\n\n"
    "[model]\nname = \"llama3\"\nflavor = \"8B\"\nnorm_type = \"rmsnorm\"\ntokenizer_path = \"./tokenizer.model\"\n\n"
    "[optimizer]\nname = \"AdamW\"\nlr = 3e-4\n\n"
    "[training]\nbatch_size = 2\nseq_len = 8192\nwarmup_steps = 200\nmax_norm = 1.0\nsteps = 1000\n"
    "data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = -1  # the GPUs of the job\n"
    "tensor_parallel_degree = 1\ncompile = false\ndataset = \"c4\"\n\n"
    "[experimental]\ncontext_parallel_degree = 1\npipeline_parallel_degree = 1\n\n"
    "[checkpoint]\nenable_checkpoint = false\ninterval = 500\n\n"
    "[activation_checkpoint]\nmode = 'selective'\nselective_ac_option = 'op'\n\n"
    "[float8]\nenable_float8_linear = false\n";

START_TEST(test_titan_8b_2024)
{
    gs_scenario got, want;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(tt_8b_2412, 1, &got, &ig, &err) == GS_OK, "%s", err.msg);
    load_published("scenarios/published/titan-001.yaml", &want);
    assert_same_step(&got, &want);
    ck_assert(got.strategy.reshard_after_forward);
    /* the quiet tables once each, the step-free keys one by one */
    size_t tables = 0;
    for (size_t i = 0; i < ig.count; i++)
        tables += strstr(ig.warnings[i], ": [") != NULL;
    ck_assert_uint_eq(tables, 4); /* job, profiling, metrics, checkpoint */
    gs_diag_fini(&ig);
}
END_TEST

/* 2025's layout ([parallelism], [compile], model.converters) for titan-011: Llama 3.1 70B, FSDP x
 * TP 8 on 256 H100, full AC, Float8 and torch.compile, a local batch of 16 per data-parallel rank. */
static const char tt_70b_2025[] =
    "[model]\nname = \"llama3\"\nflavor = \"70B\"\nhf_assets_path = \"./assets/hf/Llama-3.1-70B\"\n"
    "converters = [\"float8\"]\n\n"
    "[training]\nlocal_batch_size = 16\nseq_len = 8192\nmax_norm = 1.0\nsteps = 1000\ndataset = \"c4\"\n\n"
    "[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = -1\n"
    "tensor_parallel_degree = 8  # 8-way TP\nenable_async_tensor_parallel = false\npipeline_parallel_degree = 1\n"
    "context_parallel_degree = 1\n\n"
    "[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n\n"
    "[activation_checkpoint]\nmode = \"full\"\n\n"
    "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = false\nprecompute_float8_dynamic_scale_for_fsdp = false\n"
    "filter_fqns = [\"output\"]\n";

START_TEST(test_titan_70b_2025)
{
    gs_scenario got, want;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(tt_70b_2025, 32, &got, &ig, &err) == GS_OK, "%s", err.msg);
    load_published("scenarios/published/titan-011.yaml", &want);
    assert_same_step(&got, &want);
    ck_assert_int_eq(got.strategy.fp8, GS_FP8_CURRENT); /* torchao's dynamic (tensorwise) scaling */
    gs_diag_fini(&ig);
}
END_TEST

/* HSDP x TP x interleaved PP, hand-derived: replicate 2 x shard 4 x tp 2 x pp 2 = 32 GPUs = 4
 * nodes of 8 (shard 4 = 8 / tp: a node's data-parallel ranks); Llama 3 70B's 80 layers with the
 * embedding and the loss weighing one each, 21 per stage: ceil(82 / 21) = 4 stages, 2 per rank,
 * which torchtitan fills as generate_llm_fqn_per_model_part does (82 / 4 = 20 r 2: 21, 21, 20, 20
 * less the weights: 20, 21, 20, 19 layers; the mesh's even rule cannot, so a layout);
 * reshard_after_forward off under PP ("default"); micro-batches of 2 out of a local batch of 8;
 * global 8 x dp 8 = 64; selective every 3rd block -> full with recompute_every 3. */
START_TEST(test_hsdp_interleaved)
{
    static const char text[] =
        "[model]\nname = \"llama3\"\nflavor = \"70B\"\n[training]\nlocal_batch_size = 8\nseq_len = 4096\n"
        "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n"
        "tensor_parallel_degree = 2\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
        "pipeline_parallel_layers_per_stage = 21\npipeline_parallel_microbatch_size = 2\n"
        "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"3\"\n";
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(text, 0, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.cluster.nodes, 4);
    ck_assert(s.grid.dp == 8 && s.grid.tp == 2 && s.grid.pp == 2);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_HYBRID_SHARD);
    ck_assert(!s.strategy.reshard_after_forward && s.strategy.sequence_parallel);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_INTERLEAVED);
    ck_assert_uint_eq(s.strategy.virtual_stages, 2);
    ck_assert_uint_eq(s.grid.layout.n, 4);
    ck_assert(s.grid.layout.layers[0] == 20 && s.grid.layout.layers[1] == 21 && s.grid.layout.layers[2] == 20 &&
              s.grid.layout.layers[3] == 19);
    ck_assert(s.batch.global_seqs == 64 && s.batch.micro_seqs == 2);
    ck_assert(s.strategy.recompute == GS_RECOMPUTE_FULL && s.strategy.recompute_every == 3);
    ck_assert_uint_eq(s.model.seq, 4096);
    gs_diag_fini(&ig);
    /* context parallelism: allgather rotation, or alltoall's ring of K, V shards */
    static const char cp[] = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\n"
                             "[parallelism]\ndata_parallel_shard_degree = 4\ncontext_parallel_degree = 2\n"
                             "context_parallel_rotate_method = \"alltoall\"\n";
    ck_assert_msg(import(cp, 0, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert(s.grid.cp == 2 && s.grid.dp == 4 && s.strategy.cp_comm == GS_CP_P2P && s.cluster.nodes == 1);
    gs_diag_fini(&ig);
}
END_TEST

/* torchtitan's command-line overrides over a file: the benchmark's way of setting a run (its
 * table gives titan-005's settings as overrides of the 8B config: 128 GPUs, a local batch of 2,
 * compile). Dashes for underscores, --key=value and a bare --key for true are torchtitan's forms. */
START_TEST(test_overrides)
{
    static const char *const args[] = {"--training.batch-size", "2", "--parallelism.data_parallel_shard_degree=128",
                                       "--training.compile"};
    gs_scenario got, want;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    gs_error_init(&err);
    gs_diag_init(&ig);
    ck_assert_msg(gs_import_torchtitan_command(tt_8b_2412, strlen(tt_8b_2412), "tt.toml", args, 4, &o, &got, &ig,
                                               &err) == GS_OK,
                  "%s", err.msg);
    gs_diag_fini(&ig);
    load_published("scenarios/published/titan-005.yaml", &want);
    assert_same_step(&got, &want);
    /* an override names its argument in messages */
    static const char *const bad[] = {"--parallelism.tensor_parallel_degree", "two"};
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_torchtitan_command(tt_8b_2412, strlen(tt_8b_2412), "tt.toml", bad, 2, &o, &got, &ig,
                                                  &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "tt.toml: argument 1: --parallelism.tensor_parallel_degree: found 'two', expected an integer");
    gs_diag_fini(&ig);
    static const char *const stray[] = {"compile"};
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_torchtitan_command(tt_8b_2412, strlen(tt_8b_2412), "tt.toml", stray, 1, &o, &got, &ig,
                                                  &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "argument 1: found 'compile', expected --section.key VALUE");
    gs_diag_fini(&ig);
}
END_TEST

/* --emit torchtitan and back: every published torchtitan scenario's config, read by the importer,
 * gives the scenario's step again (cp_comm and the pipeline's stages included). */
START_TEST(test_emit_roundtrip)
{
    char rel[64];
    snprintf(rel, sizeof rel, "scenarios/published/titan-%03d.yaml", _i + 1);
    gs_scenario want, got;
    gs_mesh mesh;
    gs_diag w, ig;
    gs_error err;
    gs_error_init(&err);
    gs_diag_init(&w);
    load_published(rel, &want);
    ck_assert_msg(gs_scenario_mesh(&want, &mesh, &w, &err) == GS_OK, "%s: %s", rel, err.msg);
    gs_diag_fini(&w);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&want, &mesh, GS_LAUNCH_TORCHTITAN, &t, &err) == GS_OK, "%s: %s", rel, err.msg);
    ck_assert_msg(import(gs_text_str(&t), 0, &got, &ig, &err) == GS_OK, "%s: %s\n%s", rel, err.msg, gs_text_str(&t));
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    int grad_dtype = got.strategy.grad_dtype;
    got.strategy.grad_dtype = want.strategy.grad_dtype; /* compared in bytes below */
    assert_same_step(&got, &want);
    got.strategy.grad_dtype = grad_dtype;
    ck_assert_uint_eq(gs_grad_bytes(&got.strategy), gs_grad_bytes(&want.strategy));
    ck_assert_int_eq(got.strategy.reshard_after_forward, want.strategy.reshard_after_forward);
    ck_assert_int_eq(got.strategy.fp8_params, want.strategy.fp8_params);
    ck_assert_uint_eq(got.strategy.recompute_every, want.strategy.recompute_every);
    if (want.grid.cp > 1)
        ck_assert_int_eq(got.strategy.cp_comm, want.strategy.cp_comm);
    if (want.grid.pp > 1) {
        ck_assert_int_eq(got.strategy.pipeline, want.strategy.pipeline);
        ck_assert_uint_eq(got.strategy.virtual_stages ? got.strategy.virtual_stages : 1,
                          want.strategy.virtual_stages ? want.strategy.virtual_stages : 1);
        ck_assert_int_eq(got.grid.account_for_embedding, want.grid.account_for_embedding);
        ck_assert_int_eq(got.grid.account_for_loss, want.grid.account_for_loss);
    }
}
END_TEST

/* What torchtitan does not run is refused with the reason. */
START_TEST(test_emit_refusals)
{
    static const char *const cases[][2] = {
        {"scenarios/seed-70b-64xa100.yaml", "--emit torchtitan: cannot express the framework"},
        {"scenarios/mixtral-8x7b-ep8.yaml", "--emit torchtitan: cannot express the model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_scenario s;
        gs_mesh mesh;
        gs_diag w;
        gs_error err;
        gs_error_init(&err);
        gs_diag_init(&w);
        load_published(cases[i][0], &s);
        ck_assert_int_eq(gs_scenario_mesh(&s, &mesh, &w, &err), GS_OK);
        gs_diag_fini(&w);
        gs_text t;
        gs_text_init(&t);
        ck_assert_int_eq(gs_launch_emit(&s, &mesh, GS_LAUNCH_TORCHTITAN, &t, &err), GS_ERR_INPUT);
        ck_assert_has(err.msg, cases[i][1]);
        gs_text_fini(&t);
    }
}
END_TEST

START_TEST(test_refusals)
{
    static const char *const bad[][2] = {
        {"[parallelism]\ntensor_paralel_degree = 2\n",
         "tt.toml:2:1: parallelism.tensor_paralel_degree: unknown torchtitan option (did you mean "
         "parallelism.tensor_parallel_degree?)"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n", "data_parallel_shard_degree -1"},
        {"[model]\nname = \"deepseek_v3\"\nflavor = \"debugmodel\"\n", "give --model"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 4\n"
         "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n",
         "tt.toml:7:1: parallelism.pipeline_parallel_schedule: found 'ZBVZeroBubble'"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 8\n"
         "[activation_checkpoint]\nmode = \"memory_budget\"\n",
         "activation_checkpoint.mode: found memory_budget"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"mx\"]\n[parallelism]\n"
         "data_parallel_shard_degree = 8\n",
         "model.converters: found converter 'mx'"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 3\n",
         "the degrees make 3 GPUs, not whole nodes of 8"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_replicate_degree = 4\n"
         "data_parallel_shard_degree = 2\n",
         "HSDP shards over 2 ranks"},
        {"[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = \"long\"\n"
         "[parallelism]\ndata_parallel_shard_degree = 8\n",
         "tt.toml:5:1: training.seq_len: found 'long', expected an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gs_scenario s;
        gs_diag ig;
        gs_error err;
        ck_assert_msg(import(bad[i][0], 0, &s, &ig, &err) == GS_ERR_INPUT, "case %zu imported", i);
        ck_assert_has(err.msg, bad[i][1]);
        gs_diag_fini(&ig);
    }
}
END_TEST

/* torchtitan's Llama 4 Maverick config (torchtitan/models/llama4/train_configs/llama4_17bx128e.toml:
 * tp 8, pp 4, expert TP 8, full activation checkpointing, seq 8192, local batch 1) on 32 nodes:
 * the 17bx128e flavor is the llama4-maverick preset (interleave_moe_layer_step 2). torchtitan
 * splits the 48 layers with the embedding and the output weighing one each
 * (generate_llm_fqn_per_model_part): 50 over 4 stages is 13, 13, 12, 12, less the weights: 12,
 * 13, 12, 11 layers, a split the mesh's even rule cannot give, so a layout. Llama 3 8B on pp 4:
 * 34 over 4 is 9, 9, 8, 8: 8, 9, 8, 7. The emitted configs read back with the same layouts. */
static const char tt_llama4[] =
    "[model]\nname = \"llama4\"\nflavor = \"17bx128e\"\n"
    "[training]\nlocal_batch_size = 4\nseq_len = 8192\n"
    "[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = -1\n"
    "tensor_parallel_degree = 8\npipeline_parallel_degree = 4\ncontext_parallel_degree = 1\n"
    "expert_parallel_degree = 1\nexpert_tensor_parallel_degree = 8\n"
    "[activation_checkpoint]\nmode = \"full\"\n";

static void check_split(const char *text, const char *model, const uint8_t *want, size_t n)
{
    gs_scenario s, back;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(text, 32, &s, &ig, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&ig);
    ck_assert_str_eq(s.model.name, model);
    ck_assert_uint_eq(s.grid.layout.n, n);
    for (size_t k = 0; k < n; k++)
        ck_assert_uint_eq(s.grid.layout.layers[k], want[k]);
    ck_assert(!s.grid.account_for_embedding && !s.grid.account_for_loss);
    gs_mesh mesh;
    gs_diag w;
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_mesh(&s, &mesh, &w, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&w);
    for (uint64_t k = 0; k < n; k++)
        ck_assert_uint_eq(gs_mesh_stage_layers(&mesh, s.model.layers, k), want[k]);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&s, &mesh, GS_LAUNCH_TORCHTITAN, &t, &err) == GS_OK, "%s", err.msg);
    ck_assert_has(gs_text_str(&t), "pipeline_parallel_first_stage_less_layers = 1\n"
                                   "pipeline_parallel_last_stage_less_layers = 1\n");
    ck_assert_msg(import(gs_text_str(&t), 0, &back, &ig, &err) == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_text_fini(&t);
    assert_same_step(&back, &s);
    ck_assert_int_eq(memcmp(&back.grid.layout, &s.grid.layout, sizeof s.grid.layout), 0);
}

/* torchtitan's qwen3 MoE flavor 30B-A3B (torchtitan/models/qwen3: dim 2048, 48 layers, 32 heads of
 * 128, 4 KV heads, 128 experts of 768, top-8) is the qwen3-30b-a3b preset; on 2 nodes with
 * dp_shard 16 and ep 16 each rank holds 8 experts whole (an expert-data-parallel group of one,
 * as torchtitan's dp_shard_mod_ep mesh of size 1), which builds; the emitted config names the
 * flavor and the degrees back. */
START_TEST(test_qwen3)
{
    const char *text = "[model]\nname = \"qwen3\"\nflavor = \"30B-A3B\"\n[training]\nlocal_batch_size = 1\n"
                       "seq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = 16\nexpert_parallel_degree = 16\n";
    gs_scenario s, back;
    gs_mesh mesh;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(text, 2, &s, &ig, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&ig);
    ck_assert_str_eq(s.model.name, "qwen3-30b-a3b");
    ck_assert(s.model.moe.experts == 128 && s.model.moe.top_k == 8 && s.grid.ep == 16 && s.grid.dp == 16);
    ck_assert_uint_eq(gs_model_params(&s.model), 30532110336ULL);
    ck_assert_msg(gs_scenario_mesh(&s, &mesh, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(gs_mesh_edp_size(&mesh), 1);
    gs_schedule *sch = NULL;
    ck_assert_msg(gs_schedule_build(&s, &mesh, 1, &sch, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_schedule_validate(sch, &s, &err) == GS_OK, "%s", err.msg);
    gs_schedule_destroy(sch);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&s, &mesh, GS_LAUNCH_TORCHTITAN, &t, &err) == GS_OK, "%s", err.msg);
    ck_assert_has(gs_text_str(&t), "flavor = \"30B-A3B\"");
    ck_assert_has(gs_text_str(&t), "expert_parallel_degree = 16\n");
    ck_assert_msg(import(gs_text_str(&t), 2, &back, &ig, &err) == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_text_fini(&t);
    assert_same_step(&back, &s);
}
END_TEST

START_TEST(test_llama4)
{
    static const uint8_t mav[] = {12, 13, 12, 11}, l8b[] = {8, 9, 8, 7};
    check_split(tt_llama4, "llama4-maverick", mav, 4);
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(tt_llama4, 32, &s, &ig, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&ig);
    ck_assert_uint_eq(s.model.moe.experts, 128);
    ck_assert(s.model.moe.dense_layers == 1 && s.model.moe.every == 2);
    ck_assert_uint_eq(gs_model_params(&s.model), 400711848960ULL);
    char text[sizeof tt_llama4 + 64];
    snprintf(text, sizeof text, "%s", tt_llama4);
    snprintf(text, sizeof text, "[model]\nname = \"llama4\"\nflavor = \"17bx16e\"\n%s", strstr(tt_llama4, "[training]"));
    /* Scout: the same shape, 16 experts, every block */
    ck_assert_msg(import(text, 32, &s, &ig, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&ig);
    ck_assert_str_eq(s.model.name, "llama4-scout");
    ck_assert_uint_eq(gs_model_moe_blocks(&s.model), 48);
    check_split("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 4\nseq_len = 8192\n"
                "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n"
                "pipeline_parallel_degree = 4\n",
                "llama3-8b", l8b, 4);
}
END_TEST

/* torchtitan's DeepSeek config (torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml,
 * its parallelism as shipped but expert_parallel_degree 4) on one 8-GPU node: the "16B" flavor is
 * DeepSeek-V2-Lite's shape; dp_shard -1 takes the 8 GPUs, the 4 expert-parallel ranks are carved
 * out of them (the experts FSDP-sharded over the other 2), local_batch_size 8 sequences per rank:
 * global 64, one micro-batch of 8; activation checkpointing full. */
static const char tt_dsv3_16b[] =
    "[model]\nname = \"deepseek_v3\"\nflavor = \"16B\"\ntokenizer_path = \"./assets/hf/deepseek-moe-16b-base/\"\n"
    "[training]\nlocal_batch_size = 8\nseq_len = 4096\nmax_norm = 1.0\nsteps = 1000\ncompile = false\n"
    "dataset = \"c4\"\n"
    "[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = -1\n"
    "fsdp_reshard_after_forward = \"default\"\ntensor_parallel_degree = 1\nenable_async_tensor_parallel = false\n"
    "pipeline_parallel_degree = 1\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
    "expert_parallel_degree = 4\nexpert_tensor_parallel_degree = 1\n"
    "[activation_checkpoint]\nmode = \"full\"\n"
    "[float8]\nenable_fsdp_float8_all_gather = false\nprecompute_float8_dynamic_scale_for_fsdp = false\n"
    "filter_fqns = [\"output\", \"router.gate\"]\nmoe_fqns = [\"experts\"]\n";

START_TEST(test_deepseek_v3)
{
    gs_scenario s, back;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import(tt_dsv3_16b, 1, &s, &ig, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&ig);
    gs_model want = *gs_model_preset_find("deepseek-v2-lite");
    ck_assert_str_eq(s.model.name, "deepseek-v2-lite");
    ck_assert_uint_eq(s.model.moe.experts, 64);
    ck_assert_uint_eq(s.model.seq, 4096);
    ck_assert_uint_eq(gs_model_params(&s.model), gs_model_params(&want));
    ck_assert_uint_eq(s.grid.dp, 8);
    ck_assert_uint_eq(s.grid.tp, 1);
    ck_assert_uint_eq(s.grid.ep, 4);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_FULL);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_1F1B); /* no pipeline: the schedule is not used */
    ck_assert_uint_eq(s.batch.global_seqs, 64);
    ck_assert_uint_eq(s.batch.micro_seqs, 8);
    /* the emitted config reads back as the same step */
    gs_mesh mesh;
    gs_diag w;
    gs_diag_init(&w);
    ck_assert_msg(gs_scenario_mesh(&s, &mesh, &w, &err) == GS_OK, "%s", err.msg);
    gs_diag_fini(&w);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&s, &mesh, GS_LAUNCH_TORCHTITAN, &t, &err) == GS_OK, "%s", err.msg);
    ck_assert_has(gs_text_str(&t), "name = \"deepseek_v3\"\nflavor = \"16B\"");
    ck_assert_has(gs_text_str(&t), "expert_parallel_degree = 4\nexpert_tensor_parallel_degree = 1\n");
    ck_assert_msg(import(gs_text_str(&t), 0, &back, &ig, &err) == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    gs_diag_fini(&ig);
    gs_text_fini(&t);
    assert_same_step(&back, &s);
    ck_assert_uint_eq(back.grid.ep, 4);
    /* expert TP: 1 under tp 2 splits no expert (grid.etp 1), tp itself splits them (etp = tp, 0);
     * anything else is refused, as are DeepEP and experts on a dense model */
    char text[sizeof tt_dsv3_16b + 64];
    static const struct { const char *from, *to; uint64_t etp; const char *err; } tp_cases[] = {
        {"tensor_parallel_degree = 1\nenable", "tensor_parallel_degree = 2\nenable", 1, NULL},
        {"expert_tensor_parallel_degree = 1", "expert_tensor_parallel_degree = 2", 0, "expected 1 or tensor_parallel_degree 1"},
        {"expert_parallel_degree = 4\n", "expert_parallel_degree = 4\nexpert_parallel_comm_backend = \"deepep\"\n", 0,
         "found 'deepep', expected standard"},
    };
    for (size_t i = 0; i < sizeof tp_cases / sizeof tp_cases[0]; i++) {
        const char *at = strstr(tt_dsv3_16b, tp_cases[i].from);
        ck_assert_ptr_nonnull(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - tt_dsv3_16b), tt_dsv3_16b, tp_cases[i].to,
                 at + strlen(tp_cases[i].from));
        gs_status rc = import(text, 2, &s, &ig, &err);
        gs_diag_fini(&ig);
        if (!tp_cases[i].err) {
            ck_assert_msg(rc == GS_OK, "case %zu: %s", i, err.msg);
            ck_assert_uint_eq(s.grid.etp, tp_cases[i].etp);
        } else {
            ck_assert_msg(rc == GS_ERR_INPUT, "case %zu imported", i);
            ck_assert_has(err.msg, tp_cases[i].err);
        }
    }
    ck_assert_int_eq(import("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 8\n"
                            "expert_parallel_degree = 2\n", 0, &s, &ig, &err), GS_ERR_INPUT);
    gs_diag_fini(&ig);
    ck_assert_has(err.msg, "expected 1 (the model has no experts)");
}
END_TEST

static Suite *torchtitan_suite(void)
{
    Suite *s = suite_create("torchtitan");
    TCase *tc = tcase_create("import");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_toml_values);
    tcase_add_test(tc, test_toml_errors);
    tcase_add_test(tc, test_titan_8b_2024);
    tcase_add_test(tc, test_titan_70b_2025);
    tcase_add_test(tc, test_hsdp_interleaved);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_overrides);
    tcase_add_loop_test(tc, test_emit_roundtrip, 0, 13);
    tcase_add_test(tc, test_emit_refusals);
    tcase_add_test(tc, test_deepseek_v3);
    tcase_add_test(tc, test_llama4);
    tcase_add_test(tc, test_qwen3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(torchtitan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
