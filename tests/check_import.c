/* Check suite for engine/import (launch configurations read back) against today's Megatron-LM
 * and accelerate: every Megatron-LM flag gridstep emits or maps is in the list read from
 * Megatron-LM's source (engine/megatron_args.tsv, read here as a file, not through the table the
 * build generates from it); launch scripts in the shape of Megatron-LM's examples (bash arrays,
 * variables, arithmetic) and Megatron's printed argument dump import; flags Megatron-LM has and
 * gridstep does not model are listed in one line, flags it does not have are errors. Expected
 * values are the scripts' own numbers, worked out beside the assertions. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/import.h"
#include "engine/launch.h"
#include "engine/pipeline.h"
#include "engine/scenario.h"
#include "engine/schedule.h"

static char *srcpath(const char *rel)
{
    static char buf[1024];
    const char *top = getenv("top_srcdir");
    snprintf(buf, sizeof buf, "%s/%s", top ? top : ".", rel);
    return buf;
}

#define ck_assert_has(text, needle)                                                                \
    ck_assert_msg(strstr((text), (needle)) != NULL, "missing '%s' in:\n%s", (needle), (text))

/* ----------------------------------------------------------- Megatron-LM's names ---- */

/* The names of engine/megatron_args.tsv, read as text; the commit its header names. */
typedef struct name_list {
    char **names;
    size_t n;
    char commit[64];
} name_list;

static void read_names(name_list *l)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(srcpath("engine/megatron_args.tsv"), "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "# source: NVIDIA/Megatron-LM ", 29) == 0)
            sscanf(line + 29, "%63s", l->commit);
        if (line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab);
        *tab = '\0';
        if (l->n == cap)
            ck_assert_ptr_nonnull(l->names = realloc(l->names, (cap = cap ? cap * 2 : 1024) * sizeof *l->names));
        ck_assert_ptr_nonnull(l->names[l->n++] = strdup(line));
    }
    fclose(f);
}

static int has_name(const name_list *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == len && strncmp(l->names[i], name, len) == 0)
            return 1;
    return 0;
}

static void free_names(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
}

/* The list names a commit (40 hex digits) and holds the flags gridstep emits most, and not the
 * ones Megatron-LM removed (--use-custom-fsdp, renamed --use-megatron-fsdp) or never had
 * (--data-parallel-size). */
START_TEST(test_megatron_list)
{
    name_list l;
    read_names(&l);
    ck_assert_uint_eq(strlen(l.commit), 40);
    ck_assert_uint_eq(strspn(l.commit, "0123456789abcdef"), 40);
    ck_assert_uint_gt(l.n, 500); /* Megatron-LM's parser has several hundred long options */
    ck_assert(has_name(&l, "use-megatron-fsdp", 17));
    ck_assert(has_name(&l, "num-distributed-optimizer-instances", 35));
    ck_assert(has_name(&l, "outer-dp-sharding-strategy", 26));
    ck_assert(!has_name(&l, "use-custom-fsdp", 15));
    ck_assert(!has_name(&l, "data-parallel-size", 18));
    free_names(&l);
}
END_TEST

/* The scenarios whose Megatron-LM launches are checked: every scenario file, and the strategies
 * the files lack (zero1 interleaved with SP and TP overlap, zero2, zero3 with TP, HSDP, DDP). */
static const char *const emit_cases[] = {
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 2, pp: 4, tp: 2}\n"
    "strategy: {sharding: zero1, recompute: selective, pipeline: interleaved, virtual_stages: 2, "
    "sequence_parallel: true, precision: fp16, overlap_param_gather: true, tp_comm_overlap: true}\n"
    "batch: {global: 16, micro: 2}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
    "strategy: {sharding: zero2, flash_attention: false, precision: fp32}\nbatch: {global: 8, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
    "strategy: {sharding: zero3, cross_entropy: fused}\nbatch: {global: 8, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: pcie-a100-25gbe, nodes: 4}\ngrid: {dp: 32, pp: 1, tp: 1}\n"
    "strategy: {sharding: hybrid_shard}\nbatch: {global: 32, micro: 1}\n",
    "model: gpt-1.7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8, pp: 1, tp: 1}\n"
    "strategy: {sharding: no_shard, precision: fp16, grad_dtype: fp32, bucket_mb: 64}\nbatch: {global: 16, micro: 2}\n",
    /* the embedding and the loss counted in the split, interleaved: 30 + 2 layers over pp 4, 2
     * virtual stages of 4 (3 where the embedding or the loss is) */
    "model: {name: acc30, layers: 30, hidden: 512, heads: 8, ffn: 1408, vocab: 32000, seq: 512}\n"
    "cluster: {preset: dgx-a100-80g, nodes: 1}\n"
    "grid: {dp: 1, pp: 4, tp: 2, account_for_embedding: true, account_for_loss: true}\n"
    "strategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 2}\nbatch: {global: 8, micro: 1}\n",
    /* uneven stages, interleaved: 32 layers, pp 4, 6 on the first and the last, 10 on the others
     * (chunks of 3 and 5) */
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\n"
    "grid: {dp: 2, pp: 4, tp: 2, first_stage_layers: 6, last_stage_layers: 6}\n"
    "strategy: {sharding: zero1, pipeline: interleaved, virtual_stages: 2}\nbatch: {global: 16, micro: 1}\n",
    /* FP8 delayed scaling with Transformer Engine's own recipe and a margin */
    "model: llama2-7b\ncluster: {preset: dgx-h100, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
    "strategy: {sharding: zero1, precision: fp8, fp8_recipe: delayed, fp8_amax_history: 1024, fp8_amax_algo: max, "
    "fp8_margin: 1}\nbatch: {global: 8, micro: 1}\n",
};

/* Checks every --flag of the command after pretrain_gpt.py against the list. */
static void assert_flags_listed(const name_list *l, const char *doc, const char *what)
{
    const char *p = strstr(doc, "pretrain_gpt.py");
    if (!p)
        return; /* an accelerate launch */
    size_t flags = 0;
    for (p = strstr(p, " --"); p; p = strstr(p + 1, " --")) {
        const char *name = p + 3;
        size_t len = strcspn(name, " =\\\n");
        ck_assert_msg(has_name(l, name, len), "%s: --%.*s is not a Megatron-LM flag (%s)", what, (int)len, name,
                      l->commit);
        flags++;
    }
    ck_assert_uint_gt(flags, 10);
}

static void check_emits(const name_list *l, const gs_scenario *s, const gs_mesh *m, const char *what, size_t *checked)
{
    static const gs_launch_kind kinds[] = {GS_LAUNCH_MEGATRON, GS_LAUNCH_TORCHRUN, GS_LAUNCH_SLURM};
    for (size_t k = 0; k < 3; k++) {
        gs_text t;
        gs_error err;
        gs_text_init(&t);
        gs_error_init(&err);
        if (gs_launch_emit(s, m, kinds[k], &t, &err) == GS_OK) {
            assert_flags_listed(l, gs_text_str(&t), what);
            *checked += strstr(gs_text_str(&t), "pretrain_gpt.py") != NULL;
        }
        gs_text_fini(&t);
    }
}

START_TEST(test_emitted_flags_exist)
{
    name_list l;
    read_names(&l);
    size_t checked = 0;
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    const char *dirs[] = {"scenarios", "scenarios/published"};
    for (size_t d = 0; d < 2; d++) {
        DIR *dir = opendir(srcpath(dirs[d]));
        ck_assert_ptr_nonnull(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".yaml") != 0)
                continue;
            char rel[512];
            snprintf(rel, sizeof rel, "%s/%s", dirs[d], e->d_name);
            ck_assert_msg(gs_scenario_load_file(srcpath(rel), &s, &err) == GS_OK, "%s", err.msg);
            if (gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK)
                check_emits(&l, &s, &m, rel, &checked);
        }
        closedir(dir);
    }
    for (size_t i = 0; i < sizeof emit_cases / sizeof emit_cases[0]; i++) {
        ck_assert_msg(gs_scenario_load_string(emit_cases[i], strlen(emit_cases[i]), "case", &s, &err) == GS_OK, "%s",
                      err.msg);
        ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
        check_emits(&l, &s, &m, emit_cases[i], &checked);
    }
    ck_assert_uint_ge(checked, 10);
    free_names(&l);
}
END_TEST

static void emit_text(const char *yaml, gs_launch_kind k, gs_text *t)
{
    gs_scenario s;
    gs_mesh m;
    gs_error err;
    gs_error_init(&err);
    ck_assert_msg(gs_scenario_load_string(yaml, strlen(yaml), "case", &s, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text_init(t);
    ck_assert_msg(gs_launch_emit(&s, &m, k, t, &err) == GS_OK, "%s", err.msg);
}

/* Megatron-LM's validate_args: with tensor parallelism (before Blackwell) it asserts
 * CUDA_DEVICE_MAX_CONNECTIONS == 1 unless FSDP, and Megatron-FSDP asserts it is not 1 and warns
 * when combined with TP. */
START_TEST(test_megatron_env)
{
    gs_text t;
    emit_text(emit_cases[0], GS_LAUNCH_MEGATRON, &t); /* zero1, tp 2 */
    ck_assert_has(gs_text_str(&t), "export CUDA_DEVICE_MAX_CONNECTIONS=1");
    ck_assert_ptr_null(strstr(gs_text_str(&t), "# warning:"));
    gs_text_fini(&t);
    emit_text(emit_cases[0], GS_LAUNCH_SLURM, &t);
    ck_assert_has(gs_text_str(&t), "export CUDA_DEVICE_MAX_CONNECTIONS=1");
    gs_text_fini(&t);
    emit_text(emit_cases[2], GS_LAUNCH_MEGATRON, &t); /* zero3 (Megatron-FSDP), tp 2 */
    ck_assert_has(gs_text_str(&t), "# warning: tp=2 with Megatron-FSDP");
    ck_assert_has(gs_text_str(&t), "unset CUDA_DEVICE_MAX_CONNECTIONS");
    ck_assert_has(gs_text_str(&t), "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params");
    ck_assert_ptr_null(strstr(gs_text_str(&t), "export CUDA_DEVICE_MAX_CONNECTIONS"));
    gs_text_fini(&t);
    emit_text(emit_cases[4], GS_LAUNCH_MEGATRON, &t); /* DDP, tp 1: nothing to say */
    ck_assert_ptr_null(strstr(gs_text_str(&t), "CUDA_DEVICE_MAX_CONNECTIONS"));
    gs_text_fini(&t);
}
END_TEST

/* ------------------------------------------------------------------ launch scripts ---- */

static gs_status import_file(const char *rel, const char *model, uint64_t nodes, gs_scenario *s, gs_diag *ig,
                             gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.model = model;
    o.cluster = "dgx-a100-80g";
    o.nodes = nodes;
    gs_error_init(err);
    gs_diag_init(ig);
    return gs_import_megatron_file(srcpath(rel), &o, s, ig, err);
}

static gs_status import_text(const char *text, uint64_t nodes, gs_scenario *s, gs_diag *ig, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-a100-80g";
    o.nodes = nodes;
    o.model = "llama2-7b";
    gs_error_init(err);
    gs_diag_init(ig);
    return gs_import_megatron_args(text, "run.sh", &o, s, ig, err);
}

/* The lines of ig holding needle. */
static size_t count_lines(const gs_diag *ig, const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < ig->count; i++)
        n += strstr(ig->warnings[i], needle) != NULL;
    return n;
}

/* tests/megatron/gpt3-175b-example.sh has the structure of Megatron-LM's GPT-3 175B example:
 * flags in bash arrays expanded unquoted, paths from $1..$5, NUM_NODES=1 to edit. As written it
 * asks for TP8 x PP16 = 128 GPUs on one node of 8: an error saying so; with --nodes 16: dp = 128 /
 * 128 = 1, 96 layers of 12288 with 96 heads, ffn 4 x 12288 = 49152 (Megatron's GELU default),
 * seq 2048, fp16, global batch 1536 of micro 1, attention-backend auto (flash). Its
 * --step-batch-size-schedule value has blanks and the unquoted ${TRAIN_ARGS[@]} splits it into 6
 * words (argparse takes 1): skipped with a note, and listed as not modeled. */
START_TEST(test_example_script)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_int_eq(import_file("tests/megatron/gpt3-175b-example.sh", "gpt3-175b", 0, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "tp x pp = 128 does not divide the 1 x 8 GPUs");
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_file("tests/megatron/gpt3-175b-example.sh", "gpt3-175b", 16, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(s.grid.tp, 8);
    ck_assert_uint_eq(s.grid.pp, 16);
    ck_assert_uint_eq(s.grid.dp, 1);
    ck_assert_uint_eq(s.cluster.nodes, 16);
    ck_assert_uint_eq(s.model.layers, 96);
    ck_assert_uint_eq(s.model.hidden, 12288);
    ck_assert_uint_eq(s.model.heads, 96);
    ck_assert_uint_eq(s.model.ffn, 49152);
    ck_assert_uint_eq(s.model.seq, 2048);
    ck_assert_uint_eq(s.model.vocab, 51200); /* the gpt3-175b preset's 50257 padded to 1024 */
    ck_assert_int_eq(s.strategy.precision, GS_PREC_FP16);
    ck_assert_int_eq(s.strategy.flash_attention, 1);
    ck_assert_uint_eq(s.batch.global_seqs, 1536);
    ck_assert_uint_eq(s.batch.micro_seqs, 1);
    ck_assert_uint_eq(count_lines(&ig, "gpt3-175b-example.sh:41: --step-batch-size-schedule: 5 more words"), 1);
    ck_assert_uint_eq(count_lines(&ig, "ignored: not modeled"), 1);
    ck_assert_uint_eq(count_lines(&ig, "1 Megatron-LM flag: ignored: not modeled"), 1);
    ck_assert_uint_eq(count_lines(&ig, "--lr: ignored: training-loop setting"), 1);
    ck_assert_uint_eq(count_lines(&ig, "launcher --nnodes 1: ignored: --nodes 16 given"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* The precision-aware optimizer: the switch alone keeps fp32 moments (Megatron's default dtypes),
 * bf16 for both moments sets adam_dtype; a bf16 moment without the switch, or one moment bf16 and
 * the other fp32, is refused with the flag's place. */
START_TEST(test_optimizer_flags)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "llama2-7b";
    o.nodes = 1;
    gs_diag_init(&ig);
    gs_error_init(&err);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --use-distributed-optimizer --use-precision-aware-optimizer",
                                             "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert(s.strategy.precision_aware == 1 && s.strategy.adam_bf16 == 0);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --use-precision-aware-optimizer --exp-avg-dtype bf16 "
                                             "--exp-avg-sq-dtype bf16", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert(s.strategy.precision_aware == 1 && s.strategy.adam_bf16 == 1);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", "run.sh", &o, &s,
                                             &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "without --use-precision-aware-optimizer");
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --use-precision-aware-optimizer --exp-avg-dtype bf16", "run.sh",
                                             &o, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh");
    ck_assert_has(err.msg, "expected the same for both");
    gs_diag_fini(&ig);
}
END_TEST

/* CUDA graphs: --cuda-graph-impl local or transformer_engine (Megatron-Core's own capture, or
 * TE's make_graphed_callables), and the flags before it (--enable-cuda-graph,
 * --external-cuda-graph), set strategy.cuda_graphs; --cuda-graph-impl none clears it; a scope is
 * noted as ignored (whole layers are captured). */
START_TEST(test_cuda_graph_flags)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "llama2-7b";
    o.nodes = 1;
    gs_diag_init(&ig);
    gs_error_init(&err);
    static const char *const on[] = {"--bf16 --cuda-graph-impl local", "--bf16 --cuda-graph-impl transformer_engine",
                                     "--bf16 --enable-cuda-graph", "--bf16 --external-cuda-graph"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        ck_assert_int_eq(gs_import_megatron_args(on[i], "run.sh", &o, &s, &ig, &err), GS_OK);
        ck_assert_msg(s.strategy.cuda_graphs == 1, "%s", on[i]);
    }
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --cuda-graph-impl none", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.cuda_graphs, 0);
    ck_assert_int_eq(gs_import_megatron_args("--bf16", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.cuda_graphs, 0);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --cuda-graph-impl local --cuda-graph-scope attn", "run.sh", &o,
                                             &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(count_lines(&ig, "--cuda-graph-scope: ignored"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* Megatron-LM's --use-torch-fsdp2 (megatron/core/distributed/torch_fully_sharded_data_parallel.py:
 * PyTorch's fully_shard on each transformer layer): full_shard, or shard_grad_op with
 * --torch-fsdp2-no-reshard-after-forward, as strategy.torch_fsdp2, which the Megatron launcher
 * writes back without the distributed optimizer Megatron-LM refuses beside it; Megatron-FSDP
 * stays without it; the scenario refuses it outside framework megatron's FSDP shardings and with
 * pipeline parallelism (Megatron-LM's asserts). */
START_TEST(test_torch_fsdp2_flags)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_int_eq(import_text("--bf16 --use-torch-fsdp2 --no-gradient-accumulation-fusion", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_int_eq(s.strategy.torch_fsdp2, 1);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(s.strategy.framework, GS_FW_MEGATRON);
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("--bf16 --use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward", 1, &s, &ig, &err),
                     GS_OK);
    ck_assert_int_eq(s.strategy.torch_fsdp2, 1);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_GRAD_OP);
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("--bf16 --use-megatron-fsdp", 1, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.torch_fsdp2, 0);
    gs_diag_fini(&ig);

    static const char *const yaml[] = {
        "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
        "strategy: {framework: megatron, sharding: full_shard, torch_fsdp2: true}\nbatch: {global: 8, micro: 1}\n",
        "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 1, tp: 2}\n"
        "strategy: {framework: megatron, sharding: shard_grad_op, torch_fsdp2: true}\nbatch: {global: 8, micro: 1}\n"};
    for (int i = 0; i < 2; i++) {
        gs_text t;
        emit_text(yaml[i], GS_LAUNCH_MEGATRON, &t);
        const char *out = gs_text_str(&t);
        ck_assert_has(out, "--use-torch-fsdp2");
        ck_assert_has(out, "--no-gradient-accumulation-fusion");
        ck_assert_msg(strstr(out, "--use-distributed-optimizer") == NULL, "%s", out);
        ck_assert_msg(strstr(out, "--use-megatron-fsdp") == NULL, "%s", out);
        ck_assert_int_eq(strstr(out, "--torch-fsdp2-no-reshard-after-forward") != NULL, i == 1);
        gs_text_fini(&t);
    }
    /* a planner's candidate of another sharding keeps the key and runs as Megatron-LM runs that
     * sharding: the distributed optimizer, no torch FSDP2 */
    {
        gs_mesh mz;
        gs_text t;
        gs_error_init(&err);
        ck_assert_int_eq(gs_scenario_load_string(yaml[0], strlen(yaml[0]), "case", &s, &err), GS_OK);
        s.strategy.sharding = GS_SHARD_ZERO1;
        ck_assert_int_eq(gs_scenario_mesh(&s, &mz, NULL, &err), GS_OK);
        gs_text_init(&t);
        ck_assert_int_eq(gs_launch_emit(&s, &mz, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
        ck_assert_has(gs_text_str(&t), "--use-distributed-optimizer");
        ck_assert_msg(strstr(gs_text_str(&t), "--use-torch-fsdp2") == NULL, "%s", gs_text_str(&t));
        gs_text_fini(&t);
    }

    static const char *const refused[] = {
        "strategy: {framework: fsdp2, sharding: full_shard, torch_fsdp2: true}\n",
        "strategy: {framework: megatron, sharding: zero1, torch_fsdp2: true}\n"};
    for (int i = 0; i < 2; i++) {
        char y[512];
        snprintf(y, sizeof y, "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
                 "grid: {dp: 8, pp: 1, tp: 1}\n%sbatch: {global: 8, micro: 1}\n", refused[i]);
        gs_error_init(&err);
        ck_assert_int_eq(gs_scenario_load_string(y, strlen(y), "case", &s, &err), GS_ERR_INPUT);
        ck_assert_has(err.msg, "--use-torch-fsdp2");
        ck_assert_has(err.msg, "case:4:");
    }
    const char *pp2 = "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 4, pp: 2, tp: 1}\n"
                      "strategy: {framework: megatron, sharding: full_shard, torch_fsdp2: true}\n"
                      "batch: {global: 8, micro: 1}\n";
    gs_mesh m;
    gs_error_init(&err);
    ck_assert_int_eq(gs_scenario_load_string(pp2, strlen(pp2), "case", &s, &err), GS_OK);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "without pipeline or expert parallelism");
}
END_TEST

/* FP8: --fp8-format (e4m3 or hybrid) over --bf16 turns strategy.fp8 on, --fp8-recipe delayed (the
 * default) or tensorwise picks the recipe, --fp8-param-gather the FP8 parameters; other recipes,
 * FP8 without --bf16 and FP8 on a GPU without FP8 tensor cores are refused; the recipe and param
 * flags alone are ignored with a note. The emitted Megatron command carries them back. */
START_TEST(test_fp8_flags)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-h100";
    o.model = "llama2-7b";
    o.nodes = 1;
    gs_diag_init(&ig);
    gs_error_init(&err);
    ck_assert_int_eq(gs_import_megatron_args("--tensor-model-parallel-size 2 --bf16 --fp8-format hybrid "
                                             "--fp8-recipe tensorwise --fp8-param-gather", "run.sh", &o, &s, &ig,
                                             &err), GS_OK);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_CURRENT);
    ck_assert_int_eq(s.strategy.fp8_params, 1);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format e4m3", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_DELAYED);
    ck_assert_int_eq(s.strategy.fp8_params, 0);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-recipe blockwise", "run.sh", &o, &s,
                                             &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--fp8-recipe blockwise: not supported");
    gs_diag_fini(&ig);
    /* MX block scaling: Blackwell only; read, emitted and read back on B200 */
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-recipe mxfp8", "run.sh", &o, &s, &ig,
                                             &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "block-scaled FP8 GEMMs need Blackwell");
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    o.cluster = "dgx-b200";
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-recipe mxfp8 --fp8-margin 1", "run.sh",
                                             &o, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_MX);
    ck_assert_uint_eq(count_lines(&ig, "--fp8-margin: ignored: the mxfp8 recipe keeps no amax history"), 1);
    {
        gs_mesh mx;
        gs_text tx;
        gs_text_init(&tx);
        ck_assert_int_eq(gs_scenario_mesh(&s, &mx, NULL, &err), GS_OK);
        ck_assert_int_eq(gs_launch_emit(&s, &mx, GS_LAUNCH_MEGATRON, &tx, &err), GS_OK);
        ck_assert_has(tx.buf, "--fp8-recipe mxfp8");
        gs_text_fini(&tx);
    }
    o.cluster = "dgx-h100";
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--fp8-format hybrid", "run.sh", &o, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--fp8-format hybrid without --bf16");
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-recipe tensorwise", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_OFF);
    ck_assert_uint_eq(count_lines(&ig, "--fp8-recipe: ignored: Megatron-LM trains in FP8 only with --fp8-format"), 1);
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("--bf16 --fp8-format hybrid", 1, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "no FP8 tensor cores");
    gs_diag_fini(&ig);
    /* the delayed recipe's knobs: Transformer Engine's own history and algorithm, a margin; the
     * emitted launch carries them back; under tensorwise they are ignored with a note */
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-amax-history-len 1024 "
                                             "--fp8-amax-compute-algo max --fp8-margin 2", "run.sh", &o, &s, &ig,
                                             &err), GS_OK);
    ck_assert_int_eq(s.strategy.fp8, GS_FP8_DELAYED);
    ck_assert_uint_eq(s.strategy.fp8_amax_history, 1024);
    ck_assert_int_eq(s.strategy.fp8_amax_algo, GS_FP8_AMAX_MAX);
    ck_assert_uint_eq(s.strategy.fp8_margin, 2);
    gs_mesh m;
    gs_text t;
    gs_text_init(&t);
    ck_assert_int_eq(gs_scenario_mesh(&s, &m, NULL, &err), GS_OK);
    ck_assert_int_eq(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err), GS_OK);
    ck_assert_has(t.buf, "--fp8-amax-history-len 1024");
    ck_assert_has(t.buf, "--fp8-amax-compute-algo max");
    ck_assert_has(t.buf, "--fp8-margin 2");
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-amax-compute-algo mean", "run.sh", &o,
                                             &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--fp8-amax-compute-algo");
    gs_diag_fini(&ig);
    gs_diag_init(&ig);
    ck_assert_int_eq(gs_import_megatron_args("--bf16 --fp8-format hybrid --fp8-recipe tensorwise "
                                             "--fp8-amax-history-len 16", "run.sh", &o, &s, &ig, &err), GS_OK);
    ck_assert_uint_eq(s.strategy.fp8_amax_history, 1);
    ck_assert_uint_eq(count_lines(&ig, "--fp8-amax-history-len: ignored: the tensorwise recipe keeps no amax "
                                       "history"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* The shell a launch script is read with: ${VAR:-default} (unset here: the default), $(( )),
 * NAME+=( ), a quoted "${A[@]}" keeping an element with blanks whole, comments and blank lines
 * inside arrays, export, a $(command) value, redirections and a pipe after the command. Lines
 * are the lines the words were written on. */
START_TEST(test_shell)
{
    static const char script[] =
        "#!/bin/bash\n"                                              /* 1 */
        "set -euo pipefail\n"                                        /* 2 */
        "export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}\n"
        "NODES=${NNODES:-2}\n"                                       /* 4 */
        "TP=2; PP=$((8 / TP / 2))\n"                                 /* 5: PP = 2 */
        "MODEL=(\n"                                                  /* 6 */
        "  --num-layers 32   # Llama 2 7B\n"                        /* 7 */
        "\n"                                                         /* 8 */
        "  --hidden-size 4096 --num-attention-heads 32\n"           /* 9 */
        ")\n"                                                        /* 10 */
        "MODEL+=(--seq-length 4096 --vocab-size 32000)\n"           /* 11 */
        "EXTRA=(--data-path \"/data/web text_document\" --bf16)\n"  /* 12 */
        "mkdir -p \"$(dirname \"$0\")/logs\"\n"                      /* 13 */
        "torchrun --nnodes $NODES --nproc_per_node 8 \\\n"           /* 14 */
        "  pretrain_gpt.py \\\n"                                     /* 15 */
        "  --tensor-model-parallel-size $TP --pipeline-model-parallel-size ${PP} \\\n" /* 16 */
        "  \"${MODEL[@]}\" \"${EXTRA[@]}\" --save $(pwd)/ckpt \\\n"  /* 17 */
        "  --made-up-flag 1 2>&1 | tee log.txt\n";                   /* 18 */
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    /* --made-up-flag: not Megatron-LM's: an error at its line */
    ck_assert_int_eq(import_text(script, 0, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh:18: found '--made-up-flag'");
    gs_diag_fini(&ig);
    char fixed[sizeof script];
    snprintf(fixed, sizeof fixed, "%s", script);
    memcpy(strstr(fixed, "--made-up-flag 1"), "--manual-gc     ", 16); /* a real flag, not modeled */
    ck_assert_msg(import_text(fixed, 0, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.cluster.nodes, 2);
    ck_assert_uint_eq(s.grid.tp, 2);
    ck_assert_uint_eq(s.grid.pp, 2);
    ck_assert_uint_eq(s.grid.dp, 4); /* 16 GPUs / (2 x 2) */
    ck_assert_uint_eq(s.model.layers, 32);
    ck_assert_uint_eq(s.model.seq, 4096);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    ck_assert_uint_eq(count_lines(&ig, "run.sh:12: --data-path: ignored"), 1);
    ck_assert_uint_eq(count_lines(&ig, "run.sh:17: --save: ignored"), 1);
    ck_assert_uint_eq(count_lines(&ig, "1 Megatron-LM flag: ignored: not modeled"), 1);
    ck_assert_uint_eq(count_lines(&ig, "--manual-gc (line 18)"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* What the reader refuses, at its line: control flow, a second training command, a variable the
 * script never sets where a flag should be, and flags Megatron-LM does not have (with a hint). */
START_TEST(test_shell_refusals)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_int_eq(import_text("A=1\nif [ \"$A\" = 1 ]; then\n  B=2\nfi\ntorchrun pretrain_gpt.py --bf16\n", 1, &s, &ig,
                                 &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh:2: found shell 'if'");
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("python pretrain_gpt.py --bf16\npython pretrain_gpt.py --fp16\n", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh:2: found a second command starting a *.py script (the first is on line 1)");
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("torchrun pretrain_gpt.py $ARGS --bf16\n", 1, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh:1: found '$ARGS'");
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("python pretrain_gpt.py --tensor-model-paralel-size 2\n", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "did you mean '--tensor-model-parallel-size'");
    gs_diag_fini(&ig);
    /* a real flag with the wrong number of values: --rampup-batch-size takes 3 */
    ck_assert_int_eq(import_text("python pretrain_gpt.py --rampup-batch-size 16 --bf16\n", 1, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "--rampup-batch-size: found 1 value, expected 3");
    gs_diag_fini(&ig);
    /* Megatron-LM's former name for Megatron-FSDP reads as the current one, with a note */
    ck_assert_int_eq(import_text("python pretrain_gpt.py --use-custom-fsdp --bf16\n", 1, &s, &ig, &err), GS_OK);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_ZERO3);
    ck_assert_uint_eq(count_lines(&ig, "--use-custom-fsdp: read as --use-megatron-fsdp"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* Megatron-FSDP's HSDP on 2 nodes of 8 (dp 16): the replica must be a node's 8 DP ranks, so
 * 16 / 8 = 2 instances is hybrid_shard; 4 instances (replicas of 4) is not what gridstep's
 * hybrid_shard shards over; the optimizer sharded across replicas (optim) is not modelled. */
START_TEST(test_hsdp_import)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    const char *base = "python pretrain_gpt.py --bf16 --use-megatron-fsdp --num-distributed-optimizer-instances ";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s2 --outer-dp-sharding-strategy no_shard\n", base);
    ck_assert_msg(import_text(cmd, 2, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_HYBRID_SHARD);
    gs_diag_fini(&ig);
    snprintf(cmd, sizeof cmd, "%s4\n", base);
    ck_assert_int_eq(import_text(cmd, 2, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--num-distributed-optimizer-instances: found 4, expected 2");
    gs_diag_fini(&ig);
    snprintf(cmd, sizeof cmd, "%s2 --outer-dp-sharding-strategy optim\n", base);
    ck_assert_int_eq(import_text(cmd, 2, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "--outer-dp-sharding-strategy optim");
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("python pretrain_gpt.py --use-distributed-optimizer "
                                 "--num-distributed-optimizer-instances 2\n",
                                 2, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "without --use-megatron-fsdp");
    gs_diag_fini(&ig);
}
END_TEST

/* Uneven stages: --decoder-first/last-pipeline-num-layers become the grid's first and last
 * stage layer counts, and an emitted launch gives them back with the chunks per stage (the
 * stages' chunks differ in size, so no layers-per-virtual-stage flag). */
START_TEST(test_uneven_stages)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import_text("python pretrain_gpt.py --bf16 --pipeline-model-parallel-size 4 "
                              "--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6 "
                              "--num-virtual-stages-per-pipeline-rank 2 --micro-batch-size 1 --global-batch-size 64\n",
                              4, &s, &ig, &err) == GS_OK,
                  "%s", err.msg);
    ck_assert_uint_eq(s.grid.first_stage_layers, 6);
    ck_assert_uint_eq(s.grid.last_stage_layers, 6);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_INTERLEAVED);
    gs_mesh m;
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(gs_mesh_stage_layers(&m, 32, 1), 10); /* (32 - 12) / 2 */
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err) == GS_OK, "%s", err.msg);
    ck_assert_has(gs_text_str(&t), "--decoder-first-pipeline-num-layers 6");
    ck_assert_has(gs_text_str(&t), "--decoder-last-pipeline-num-layers 6");
    ck_assert_has(gs_text_str(&t), "--num-virtual-stages-per-pipeline-rank 2");
    ck_assert_ptr_null(strstr(gs_text_str(&t), "--num-layers-per-virtual-pipeline-stage"));
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    /* 7 + 7 leave 18 for 2 stages of 9, which 2 virtual stages do not split */
    ck_assert_int_eq(import_text("python pretrain_gpt.py --pipeline-model-parallel-size 4 "
                                 "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 "
                                 "--num-virtual-stages-per-pipeline-rank 2 --micro-batch-size 1 "
                                 "--global-batch-size 64\n",
                                 4, &s, &ig, &err) == GS_OK &&
                         gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK,
                     0);
    ck_assert_has(err.msg, "equal chunks");
    gs_diag_fini(&ig);
}
END_TEST

/* The embedding and the loss counted as layers of the split: the two switches set the grid's
 * keys; --num-layers-per-virtual-pipeline-stage divides the layers per stage with them counted
 * (megatron/training/arguments.py): 30 layers + 2 over pp 4 = 8 per stage, 4 per virtual stage
 * = 2 virtual stages, chunks of 3 and 4 on stage 0. Beside --decoder-first-pipeline-num-layers
 * they are refused where the switch stands (Megatron-LM refuses the pair). */
START_TEST(test_split_accounting)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    ck_assert_msg(import_text("python pretrain_gpt.py --bf16 --num-layers 30 --hidden-size 4096 "
                              "--num-attention-heads 32 --pipeline-model-parallel-size 4 "
                              "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
                              "--num-layers-per-virtual-pipeline-stage 4 --micro-batch-size 1 --global-batch-size 64\n",
                              4, &s, &ig, &err) == GS_OK,
                  "%s", err.msg);
    ck_assert_int_eq(s.grid.account_for_embedding, 1);
    ck_assert_int_eq(s.grid.account_for_loss, 1);
    ck_assert_int_eq(s.strategy.pipeline, GS_PIPE_INTERLEAVED);
    ck_assert_uint_eq(s.strategy.virtual_stages, 2);
    gs_mesh m;
    ck_assert_msg(gs_scenario_mesh(&s, &m, NULL, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 30, 2, 0, 0), 3);
    ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 30, 2, 0, 1), 4);
    ck_assert_uint_eq(gs_pipe_chunk_layers(&m, 30, 2, 3, 1), 3);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&s, &m, GS_LAUNCH_MEGATRON, &t, &err) == GS_OK, "%s", err.msg);
    ck_assert_has(gs_text_str(&t), "--account-for-embedding-in-pipeline-split");
    ck_assert_has(gs_text_str(&t), "--account-for-loss-in-pipeline-split");
    ck_assert_has(gs_text_str(&t), "--num-virtual-stages-per-pipeline-rank 2");
    ck_assert_ptr_null(strstr(gs_text_str(&t), "--num-layers-per-virtual-pipeline-stage"));
    gs_text_fini(&t);
    gs_diag_fini(&ig);
    ck_assert_int_eq(import_text("python pretrain_gpt.py --pipeline-model-parallel-size 4 \\\n"
                                 "  --decoder-first-pipeline-num-layers 6 --account-for-loss-in-pipeline-split\n",
                                 4, &s, &ig, &err),
                     GS_ERR_INPUT);
    ck_assert_has(err.msg, "run.sh:2: --account-for-loss-in-pipeline-split with --decoder-first-pipeline-num-layers");
    gs_diag_fini(&ig);
}
END_TEST

/* ----------------------------------------------------------------- argument dump ---- */

static char *read_text(const char *rel)
{
    FILE *f = fopen(srcpath(rel), "r");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(fread(t, 1, (size_t)n, f), (size_t)n);
    t[n] = '\0';
    fclose(f);
    return t;
}

static gs_status import_dump(const char *text, gs_scenario *s, gs_diag *ig, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = "dgx-a100-80g";
    gs_error_init(err);
    gs_diag_init(ig);
    return gs_import_megatron_args(text, "train.log", &o, s, ig, err);
}

/* tests/megatron/llama2-7b-args.txt: Megatron's argument dump of Llama 2 7B on 16 GPUs (world_size
 * 16: 2 nodes of 8), TP2 with sequence parallelism, the distributed optimizer, selective recompute,
 * bf16, padded_vocab_size 32000, global batch 256 of micro 1. dp = 16 / 2 = 8, as its
 * data_parallel_size says. The same dump under a log prefix ("[rank0]: ") reads the same. */
START_TEST(test_dump)
{
    gs_scenario s, p;
    gs_diag ig;
    gs_error err;
    char *text = read_text("tests/megatron/llama2-7b-args.txt");
    ck_assert_msg(import_dump(text, &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.cluster.nodes, 2);
    ck_assert_uint_eq(s.grid.tp, 2);
    ck_assert_uint_eq(s.grid.dp, 8);
    ck_assert_uint_eq(s.model.layers, 32);
    ck_assert_uint_eq(s.model.hidden, 4096);
    ck_assert_uint_eq(s.model.ffn, 11008);
    ck_assert_uint_eq(s.model.vocab, 32000);
    ck_assert_int_eq(s.model.norm, GS_NORM_RMSNORM);
    ck_assert_int_eq(s.model.mlp, GS_MLP_SWIGLU);
    ck_assert_int_eq(s.model.tied_embeddings, 0);
    ck_assert_int_eq(s.model.bias, 0);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_ZERO1);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_SELECTIVE);
    ck_assert_int_eq(s.strategy.sequence_parallel, 1);
    ck_assert_int_eq(s.strategy.precision, GS_PREC_BF16);
    ck_assert_uint_eq(s.batch.global_seqs, 256);
    ck_assert_uint_eq(count_lines(&ig, "ignored: not modeled"), 1);
    ck_assert_uint_eq(count_lines(&ig, "lr, lr_decay_style, min_lr"), 1);
    gs_diag_fini(&ig);
    /* prefixed, line by line */
    size_t n = strlen(text), lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    char *pre = malloc(n + lines * 9 + 1), *q = pre;
    ck_assert_ptr_nonnull(pre);
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) + 1 : strlen(l);
        memcpy(q, "[rank0]: ", 9);
        memcpy(q + 9, l, len);
        q += 9 + len;
        l += len;
    }
    *q = '\0';
    ck_assert_msg(import_dump(pre, &p, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(p.grid.dp, s.grid.dp);
    ck_assert_uint_eq(p.model.vocab, s.model.vocab);
    ck_assert_int_eq(p.strategy.sharding, s.strategy.sharding);
    gs_diag_fini(&ig);
    /* a data_parallel_size that is not world / (tp x pp), and a dump cut short */
    char *bad = strstr(text, "data_parallel_size ..");
    ck_assert_ptr_nonnull(bad);
    char *digit = strchr(bad, '8');
    *digit = '4';
    ck_assert_int_eq(import_dump(text, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "data_parallel_size: found 4, expected 8");
    gs_diag_fini(&ig);
    *strstr(text, "-------------------- end of arguments") = '\0';
    ck_assert_int_eq(import_dump(text, &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "end of arguments");
    gs_diag_fini(&ig);
    free(pre);
    free(text);
}
END_TEST

/* ------------------------------------------------------------------- accelerate ---- */

static gs_status import_acc(const char *yaml, const char *model, gs_scenario *s, gs_diag *ig, gs_error *err)
{
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.model = model;
    o.cluster = "dgx-a100-80g";
    gs_error_init(err);
    gs_diag_init(ig);
    return gs_import_accelerate_string(yaml, strlen(yaml), "acc.yaml", &o, s, ig, err);
}

/* What `accelerate config` writes since accelerate 1.6 for FSDP1 (commands/config/cluster.py:
 * the sharding strategy under fsdp_reshard_after_forward, no fsdp_sharding_strategy) and for
 * FSDP2 (fsdp_reshard_after_forward a bool; no prefetch, sync or orig-params keys; an empty
 * parallelism_config when it is not used), for one node of 8 GPUs. */
static const char acc_fsdp1[] =
    "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: FSDP\ndowncast_bf16: 'no'\n"
    "enable_cpu_affinity: false\nfsdp_config:\n  fsdp_activation_checkpointing: false\n"
    "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_backward_prefetch: BACKWARD_PRE\n"
    "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_forward_prefetch: false\n  fsdp_offload_params: false\n"
    "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
    "  fsdp_sync_module_states: true\n  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n"
    "  fsdp_use_orig_params: true\n  fsdp_version: 1\nmachine_rank: 0\nmain_training_function: main\n"
    "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\nrdzv_backend: static\nsame_network: true\n"
    "tpu_env: []\ntpu_use_cluster: false\ntpu_use_sudo: false\nuse_cpu: false\n";
static const char acc_fsdp2[] =
    "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: FSDP\ndowncast_bf16: 'no'\n"
    "enable_cpu_affinity: false\nfsdp_config:\n  fsdp_activation_checkpointing: true\n"
    "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_cpu_ram_efficient_loading: true\n"
    "  fsdp_offload_params: false\n  fsdp_reshard_after_forward: %s\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
    "  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n  fsdp_version: 2\nmachine_rank: 0\n"
    "main_training_function: main\nmixed_precision: bf16\nnum_machines: %d\nnum_processes: %d\n"
    "parallelism_config:%s\nrdzv_backend: static\nsame_network: true\ntpu_env: []\ntpu_use_cluster: false\n"
    "tpu_use_sudo: false\nuse_cpu: false\n";

START_TEST(test_accelerate_current)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    char y[4096];
    ck_assert_msg(import_acc(acc_fsdp1, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_GRAD_OP);
    ck_assert_int_eq(s.strategy.reshard_after_forward, 0);
    ck_assert_uint_eq(s.grid.dp, 8);
    gs_diag_fini(&ig);
    /* FSDP2, resharding: FULL_SHARD; not resharding: SHARD_GRAD_OP's schedule */
    snprintf(y, sizeof y, acc_fsdp2, "true", 1, 8, " {}");
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    ck_assert_int_eq(s.strategy.recompute, GS_RECOMPUTE_FULL);
    ck_assert_int_eq(s.strategy.prefetch, GS_PREFETCH_BACKWARD_PRE);
    gs_diag_fini(&ig);
    snprintf(y, sizeof y, acc_fsdp2, "false", 1, 8, " {}");
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_GRAD_OP);
    gs_diag_fini(&ig);
    /* FSDP2 with TP: dp_shard 4 x tp 2 = 8 processes */
    snprintf(y, sizeof y, acc_fsdp2, "true", 1, 8,
             "\n  parallelism_config_cp_size: 1\n  parallelism_config_dp_replicate_size: 1\n"
             "  parallelism_config_dp_shard_size: 4\n  parallelism_config_tp_size: 2");
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(s.grid.tp, 2);
    ck_assert_uint_eq(s.grid.dp, 4);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_FULL_SHARD);
    gs_diag_fini(&ig);
    /* HSDP on 2 nodes: 2 replicas of a node's 8 ranks; replicas of 4 are not gridstep's HSDP;
     * the sizes must multiply to num_processes */
    snprintf(y, sizeof y, acc_fsdp2, "true", 2, 16,
             "\n  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 8");
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_HYBRID_SHARD);
    ck_assert_uint_eq(s.grid.dp, 16);
    gs_diag_fini(&ig);
    snprintf(y, sizeof y, acc_fsdp2, "true", 2, 16,
             "\n  parallelism_config_dp_replicate_size: 4\n  parallelism_config_dp_shard_size: 4");
    ck_assert_int_eq(import_acc(y, "llama2-7b", &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "dp_shard_size 4, expected 8");
    gs_diag_fini(&ig);
    snprintf(y, sizeof y, acc_fsdp2, "true", 1, 8, "\n  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2");
    ck_assert_int_eq(import_acc(y, "llama2-7b", &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "= 4, expected num_processes 8");
    gs_diag_fini(&ig);
    snprintf(y, sizeof y, acc_fsdp2, "true", 1, 8, "\n  parallelism_config_dp_shard_size: 4\n  parallelism_config_cp_size: 2");
    ck_assert_int_eq(import_acc(y, "llama2-7b", &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "context parallelism");
    gs_diag_fini(&ig);
}
END_TEST

/* The deprecated key still reads (with a note), agrees or is an error; FSDP1-only keys under
 * FSDP2 are dropped as accelerate drops them. */
START_TEST(test_accelerate_old_keys)
{
    gs_scenario s;
    gs_diag ig;
    gs_error err;
    char y[4096];
    snprintf(y, sizeof y, "%s", acc_fsdp1);
    char *k = strstr(y, "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n");
    memcpy(k, "  fsdp_sharding_strategy:     HYBRID_SHARD\n", 43);
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s\n%s", err.msg, y);
    ck_assert_int_eq(s.strategy.sharding, GS_SHARD_HYBRID_SHARD);
    ck_assert_uint_eq(count_lines(&ig, "fsdp_sharding_strategy: read as fsdp_reshard_after_forward"), 1);
    gs_diag_fini(&ig);
    char both[4200];
    snprintf(both, sizeof both, "%s", acc_fsdp1);
    k = strstr(both, "  fsdp_version: 1\n");
    static const char ins[] = "  fsdp_sharding_strategy: FULL_SHARD\n";
    memmove(k + strlen(ins), k, strlen(k) + 1);
    memcpy(k, ins, strlen(ins));
    ck_assert_int_eq(import_acc(both, "llama2-7b", &s, &ig, &err), GS_ERR_INPUT);
    ck_assert_has(err.msg, "found fsdp_sharding_strategy FULL_SHARD and fsdp_reshard_after_forward SHARD_GRAD_OP");
    gs_diag_fini(&ig);
    snprintf(y, sizeof y, "%s", acc_fsdp1);
    memcpy(strstr(y, "  fsdp_version: 1"), "  fsdp_version: 2", 17);
    ck_assert_int_eq(import_acc(y, "llama2-7b", &s, &ig, &err), GS_ERR_INPUT); /* SHARD_GRAD_OP is no bool */
    ck_assert_has(err.msg, "fsdp_reshard_after_forward (fsdp_version 2): found");
    gs_diag_fini(&ig);
    memcpy(strstr(y, "SHARD_GRAD_OP"), "false        ", 13);
    ck_assert_msg(import_acc(y, "llama2-7b", &s, &ig, &err) == GS_OK, "%s", err.msg);
    ck_assert_uint_eq(count_lines(&ig, "fsdp_backward_prefetch: ignored: FSDP2 has none"), 1);
    gs_diag_fini(&ig);
}
END_TEST

/* Scenarios read back from their own accelerate YAML with --cluster alone: the model and batch
 * come from gridstep's lines (a nominal model: the seed's 7B with params 7e9 is no preset), and
 * the schedules built from both are equal. TP goes through FSDP2's parallelism_config, a
 * framework: fsdp2 scenario without TP through fsdp_version 2 (FSDP2's copies make its schedule
 * differ from FSDP1's), HSDP without it through FSDP1's HYBRID_SHARD. */
static const char *const acc_roundtrip[] = {
    "scenarios/seed-7b-8xa100.yaml",
    "scenarios/seed-7b-64gpu-25gbe-hsdp.yaml",
    "model: {params: 1.3e9, layers: 24, hidden: 2048, seq: 2048}\ncluster: {preset: dgx-a100-80g, nodes: 1}\n"
    "grid: {dp: 4, pp: 1, tp: 2}\nstrategy: {framework: fsdp2, sharding: full_shard, recompute: full}\n"
    "batch: {global: 16, micro: 2}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 2}\ngrid: {dp: 8, pp: 1, tp: 2}\n"
    "strategy: {framework: fsdp2, sharding: hybrid_shard}\nbatch: {global: 32, micro: 1}\n",
    "model: llama2-7b\ncluster: {preset: dgx-a100-80g, nodes: 1}\ngrid: {dp: 8}\n"
    "strategy: {framework: fsdp2, sharding: full_shard}\nbatch: {global: 16, micro: 1}\n",
};

START_TEST(test_accelerate_roundtrip)
{
    gs_scenario a, b;
    gs_mesh ma, mb;
    gs_error err;
    gs_error_init(&err);
    const char *c = acc_roundtrip[_i];
    if (strncmp(c, "scenarios/", 10) == 0)
        ck_assert_msg(gs_scenario_load_file(srcpath(c), &a, &err) == GS_OK, "%s", err.msg);
    else
        ck_assert_msg(gs_scenario_load_string(c, strlen(c), "case", &a, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_scenario_mesh(&a, &ma, NULL, &err) == GS_OK, "%s", err.msg);
    gs_text t;
    gs_text_init(&t);
    ck_assert_msg(gs_launch_emit(&a, &ma, GS_LAUNCH_ACCELERATE, &t, &err) == GS_OK, "%s", err.msg);
    if (a.grid.tp > 1) {
        ck_assert_has(gs_text_str(&t), "  fsdp_version: 2\n");
        ck_assert_has(gs_text_str(&t), "parallelism_config_tp_size: 2\n");
    }
    ck_assert_ptr_null(strstr(gs_text_str(&t), "  fsdp_sharding_strategy:"));
    gs_import_opts o;
    gs_import_opts_init(&o);
    o.cluster = a.cluster.name;
    gs_diag ig;
    gs_diag_init(&ig);
    gs_status st = gs_import_accelerate_string(gs_text_str(&t), t.len, "emitted.yaml", &o, &b, &ig, &err);
    ck_assert_msg(st == GS_OK, "%s\n%s", err.msg, gs_text_str(&t));
    ck_assert_uint_eq(b.model.nominal_params, a.model.nominal_params);
    ck_assert_uint_eq(b.model.layers, a.model.layers);
    ck_assert_uint_eq(b.model.hidden, a.model.hidden);
    ck_assert_uint_eq(gs_model_params(&b.model), gs_model_params(&a.model));
    ck_assert_uint_eq(b.batch.global_seqs, a.batch.global_seqs);
    ck_assert_uint_eq(b.batch.micro_seqs, a.batch.micro_seqs);
    ck_assert_uint_eq(b.grid.tp, a.grid.tp);
    ck_assert_uint_eq(b.grid.dp, a.grid.dp);
    ck_assert_int_eq(b.strategy.sharding, a.strategy.sharding == GS_SHARD_ZERO3 ? GS_SHARD_FULL_SHARD : a.strategy.sharding);
    ck_assert_msg(gs_scenario_mesh(&b, &mb, NULL, &err) == GS_OK, "%s", err.msg);
    gs_schedule *sa = NULL, *sb = NULL;
    ck_assert_msg(gs_schedule_build(&a, &ma, 0, &sa, &err) == GS_OK, "%s", err.msg);
    memcpy(b.name, a.name, sizeof b.name); /* the schedule's header names its scenario */
    ck_assert_msg(gs_schedule_build(&b, &mb, 0, &sb, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_schedule_equal(sa, sb), "schedules differ after the round trip of %s", c);
    gs_schedule_destroy(sa);
    gs_schedule_destroy(sb);
    gs_diag_fini(&ig);
    gs_text_fini(&t);
}
END_TEST

static Suite *import_suite(void)
{
    Suite *s = suite_create("import");
    TCase *mg = tcase_create("megatron");
    tcase_set_timeout(mg, 60);
    tcase_add_test(mg, test_megatron_list);
    tcase_add_test(mg, test_emitted_flags_exist);
    tcase_add_test(mg, test_megatron_env);
    tcase_add_test(mg, test_example_script);
    tcase_add_test(mg, test_fp8_flags);
    tcase_add_test(mg, test_cuda_graph_flags);
    tcase_add_test(mg, test_torch_fsdp2_flags);
    tcase_add_test(mg, test_optimizer_flags);
    tcase_add_test(mg, test_shell);
    tcase_add_test(mg, test_shell_refusals);
    tcase_add_test(mg, test_hsdp_import);
    tcase_add_test(mg, test_uneven_stages);
    tcase_add_test(mg, test_split_accounting);
    tcase_add_test(mg, test_dump);
    suite_add_tcase(s, mg);
    TCase *acc = tcase_create("accelerate");
    tcase_set_timeout(acc, 60);
    tcase_add_test(acc, test_accelerate_current);
    tcase_add_test(acc, test_accelerate_old_keys);
    tcase_add_loop_test(acc, test_accelerate_roundtrip, 0, (int)(sizeof acc_roundtrip / sizeof acc_roundtrip[0]));
    suite_add_tcase(s, acc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(import_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
