/* gs_scenario -> scenario YAML, the inverse of engine/scenario.c's loader. */
#include "engine/scenario_write.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Appends a double-quoted YAML string. */
static gs_status put_quoted(gs_text *t, const char *s)
{
    gs_status st = gs_text_printf(t, "\"");
    for (const char *p = s; *p && st == GS_OK; p++) {
        if (*p == '"' || *p == '\\')
            st = gs_text_printf(t, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            st = gs_text_printf(t, "\\x%02x", (unsigned)(unsigned char)*p);
        else
            st = gs_text_printf(t, "%c", *p);
    }
    return st == GS_OK ? gs_text_printf(t, "\"") : st;
}

static const char *yes_no(int v)
{
    return v ? "true" : "false";
}

/* The shortest %g text of x that reads back as x (0.1, not 0.10000000000000001). */
static const char *shortest(double x, char buf[32])
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return buf;
}

/* The moe and mla sub-mappings (present only for such models: dense models' files stay as they
 * were), each a flow mapping between `pre` and `post` (", " and "" in a flow model, "  " and
 * "\n" in a block one). */
static gs_status put_sparse(gs_text *t, const gs_model *m, const char *pre, const char *post)
{
    gs_status st = GS_OK;
    if (m->moe.experts) {
        char cf[32], rs[32], gr[64] = "";
        if (m->moe.groups)
            snprintf(gr, sizeof gr, ", groups: %" PRIu64 ", group_topk: %" PRIu64, m->moe.groups, m->moe.group_topk);
        st = gs_text_printf(t,
                            "%smoe: {experts: %" PRIu64 ", top_k: %" PRIu64 ", expert_ffn: %" PRIu64
                            ", shared_experts: %" PRIu64 ", dense_layers: %" PRIu64 "%s%.0" PRIu64
                            ", capacity_factor: %s%s%s%s}%s",
                            pre, m->moe.experts, m->moe.top_k, m->moe.expert_ffn, m->moe.shared_experts,
                            m->moe.dense_layers, m->moe.every > 1 ? ", every: " : "",
                            m->moe.every > 1 ? m->moe.every : 0, shortest(m->moe.capacity_factor, cf),
                            m->moe.routing_skew != 0.0 ? ", routing_skew: " : "",
                            m->moe.routing_skew != 0.0 ? shortest(m->moe.routing_skew, rs) : "", gr, post);
    }
    if (st == GS_OK && m->mla.kv_lora_rank)
        st = gs_text_printf(t,
                            "%smla: {q_lora_rank: %" PRIu64 ", kv_lora_rank: %" PRIu64 ", rope_head_dim: %" PRIu64
                            "}%s",
                            pre, m->mla.q_lora_rank, m->mla.kv_lora_rank, m->mla.rope_head_dim, post);
    if (st == GS_OK && m->mtp_layers)
        st = gs_text_printf(t, "%smtp_layers: %" PRIu64 "%s", pre, m->mtp_layers, post);
    return st;
}

static gs_status put_model(gs_text *t, const gs_model *m)
{
    const gs_model *p = gs_model_preset_find(m->name);
    if (p && m->source && memcmp(&p->layers, &m->layers,
                                 offsetof(gs_model, source) - offsetof(gs_model, layers)) == 0)
        return gs_text_printf(t, "model: %s\n", p->name);
    gs_status st = gs_text_printf(t, "model:\n  name: ");
    if (st == GS_OK)
        st = put_quoted(t, m->name);
    if (st == GS_OK && m->nominal_params)
        st = gs_text_printf(t, "\n  params: %" PRIu64, m->nominal_params);
    if (st == GS_OK)
        st = gs_text_printf(
            t,
            "\n  layers: %" PRIu64 "\n  hidden: %" PRIu64 "\n  heads: %" PRIu64
            "\n  kv_heads: %" PRIu64 "\n  head_dim: %" PRIu64 "\n  ffn: %" PRIu64
            "\n  vocab: %" PRIu64 "\n  seq: %" PRIu64 "\n  tied_embeddings: %s\n  bias: %s\n"
            "  dropout: %s\n  norm: %s\n  mlp: %s\n  pos: %s\n",
            m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab, m->seq,
            yes_no(m->tied_embeddings), yes_no(m->bias), yes_no(m->dropout),
            m->norm == GS_NORM_RMSNORM ? "rmsnorm" : "layernorm",
            m->mlp == GS_MLP_SWIGLU ? "swiglu" : "gelu", m->pos == GS_POS_ROPE ? "rope" : "learned");
    if (st == GS_OK && m->dropout) {
        char a[32], h[32];
        st = gs_text_printf(t, "  attention_dropout: %s\n  hidden_dropout: %s\n", shortest(m->attention_dropout, a),
                            shortest(m->hidden_dropout, h));
    }
    if (st == GS_OK)
        st = put_sparse(t, m, "  ", "\n");
    return st;
}

gs_status gs_model_write_flow(const gs_model *m, gs_text *t)
{
    const gs_model *p = gs_model_preset_find(m->name);
    if (p && m->source && memcmp(&p->layers, &m->layers, offsetof(gs_model, source) - offsetof(gs_model, layers)) == 0)
        return gs_text_printf(t, "%s", p->name);
    gs_status st = gs_text_printf(t, "{name: ");
    if (st == GS_OK)
        st = put_quoted(t, m->name);
    if (st == GS_OK && m->nominal_params)
        st = gs_text_printf(t, ", params: %" PRIu64, m->nominal_params);
    if (st == GS_OK)
        st = gs_text_printf(t,
                            ", layers: %" PRIu64 ", hidden: %" PRIu64 ", heads: %" PRIu64 ", kv_heads: %" PRIu64
                            ", head_dim: %" PRIu64 ", ffn: %" PRIu64 ", vocab: %" PRIu64 ", seq: %" PRIu64
                            ", tied_embeddings: %s, bias: %s, dropout: %s, norm: %s, mlp: %s, pos: %s",
                            m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab, m->seq,
                            yes_no(m->tied_embeddings), yes_no(m->bias), yes_no(m->dropout),
                            m->norm == GS_NORM_RMSNORM ? "rmsnorm" : "layernorm",
                            m->mlp == GS_MLP_SWIGLU ? "swiglu" : "gelu", m->pos == GS_POS_ROPE ? "rope" : "learned");
    if (st == GS_OK && m->dropout) {
        char a[32], h[32];
        st = gs_text_printf(t, ", attention_dropout: %s, hidden_dropout: %s", shortest(m->attention_dropout, a),
                            shortest(m->hidden_dropout, h));
    }
    if (st == GS_OK)
        st = put_sparse(t, m, ", ", "");
    return st == GS_OK ? gs_text_printf(t, "}") : st;
}

static gs_status put_cluster(gs_text *t, const gs_cluster *c, gs_error *err)
{
    const gs_cluster *p = gs_cluster_preset_find(c->name);
    if (!p)
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "cannot write cluster '%s' as YAML: it is not a preset", c->name);
    if (strcmp(p->gpu.name, c->gpu.name) != 0 || strcmp(p->intra.name, c->intra.name) != 0 ||
        strcmp(p->nic.name, c->nic.name) != 0 || p->nic.gbps != c->nic.gbps ||
        p->gpu.hbm_bytes != c->gpu.hbm_bytes || p->gpu.peak_flops_bf16 != c->gpu.peak_flops_bf16)
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "cannot write cluster '%s' as YAML: its GPU, fabric or NIC differs "
                            "from the preset's",
                            c->name);
    return gs_text_printf(t,
                          "cluster:\n  preset: %s\n  nodes: %" PRIu64 "\n  gpus_per_node: %" PRIu64
                          "\n  nics_per_node: %" PRIu64 "\n  rail_optimized: %s\n"
                          "  oversubscription: %.17g\n  host_cpu: %s\n",
                          p->name, c->nodes, c->gpus_per_node, c->nics_per_node,
                          yes_no(c->rail_optimized), c->oversubscription, gs_host_cpu_name((gs_host_cpu)c->host_cpu));
}

static gs_status put_strategy(gs_text *t, const gs_strategy *s, gs_error *err)
{
    static const char *const grad_sync[] = {"auto", "last", "every"};
    if (s->bucket_bytes % ((uint64_t)1 << 20) != 0)
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "cannot write strategy.bucket_mb: %" PRIu64 " bytes is not a whole MiB",
                            s->bucket_bytes);
    gs_status st = gs_text_printf(t, "strategy:\n  sharding: %s\n  wrap: ",
                                  gs_sharding_name(s->sharding));
    if (st == GS_OK)
        st = s->wrap == GS_WRAP_MIN_PARAMS
                 ? gs_text_printf(t, "{min_params: %" PRIu64 "}\n", s->wrap_min_params)
                 : gs_text_printf(t, "%s\n", s->wrap == GS_WRAP_LAYER ? "layer" : "model");
    if (st == GS_OK)
        st = gs_text_printf(
            t,
            "  prefetch: %s\n  forward_prefetch: %s\n  reshard_after_forward: %s\n"
            "  limit_all_gathers: %s\n  recompute: %s\n  flash_attention: %s\n  offload: %s\n"
            "  precision: %s\n  pipeline: %s\n%s  sequence_parallel: %s\n  bucket_mb: %" PRIu64
            "\n  grad_sync: %s\n  grad_dtype: %s\n  overlap_grad_reduce: %s\n  overlap_param_gather: %s\n"
            "  tp_comm_overlap: %s\n",
            gs_prefetch_name(s->prefetch), yes_no(s->forward_prefetch),
            yes_no(s->reshard_after_forward), yes_no(s->limit_all_gathers),
            gs_recompute_name(s->recompute), yes_no(s->flash_attention), yes_no(s->offload),
            s->fp8 != GS_FP8_OFF ? "fp8" : gs_precision_name(s->precision), gs_pipeline_name(s->pipeline), "",
            yes_no(s->sequence_parallel), s->bucket_bytes >> 20,
            grad_sync[(unsigned)s->grad_sync < 3 ? s->grad_sync : 0],
            s->grad_dtype >= 0 ? gs_precision_name((gs_precision)s->grad_dtype) : "auto", yes_no(s->overlap_grad_reduce),
            yes_no(s->overlap_param_gather),
            yes_no(s->tp_comm_overlap));
    if (st == GS_OK && s->pipeline == GS_PIPE_INTERLEAVED)
        st = gs_text_printf(t, "  virtual_stages: %" PRIu64 "\n", s->virtual_stages);
    /* written only when not the default, like virtual_stages: files written before the key
     * existed stay byte for byte what they were */
    if (st == GS_OK && s->recompute == GS_RECOMPUTE_FULL && s->recompute_every > 1)
        st = gs_text_printf(t, "  recompute_every: %" PRIu64 "\n", s->recompute_every);
    if (st == GS_OK && s->recompute == GS_RECOMPUTE_SELECTIVE && s->recompute_modules != GS_RC_DEFAULT) {
        char mods[160];
        gs_recompute_modules_format(s->recompute_modules, ", ", mods, sizeof mods);
        st = gs_text_printf(t, "  recompute_modules: [%s]\n", mods);
    }
    if (st == GS_OK && s->precision_aware)
        st = gs_text_printf(t, "  precision_aware_optimizer: true\n");
    if (st == GS_OK && s->adam_bf16)
        st = gs_text_printf(t, "  adam_dtype: bf16\n");
    if (st == GS_OK && s->bucket_stages != GS_BUCKET_STAGES_ALL)
        st = gs_text_printf(t, "  bucket_stages: %s\n", gs_bucket_stages_name(s->bucket_stages));
    if (st == GS_OK && s->cross_entropy != GS_XENT_UNFUSED)
        st = gs_text_printf(t, "  cross_entropy: %s\n", gs_xent_name(s->cross_entropy));
    if (st == GS_OK && s->framework != GS_FW_AUTO)
        st = gs_text_printf(t, "  framework: %s\n", gs_framework_name(s->framework));
    if (st == GS_OK && s->compile)
        st = gs_text_printf(t, "  compile: true\n");
    if (st == GS_OK && s->cuda_graphs)
        st = gs_text_printf(t, "  cuda_graphs: true\n");
    if (st == GS_OK && gs_strategy_torch_fsdp2(s))
        st = gs_text_printf(t, "  torch_fsdp2: true\n");
    if (st == GS_OK && s->ep_overlap)
        st = gs_text_printf(t, "  overlap_moe_expert_parallel_comm: true\n");
    if (st == GS_OK && s->flex_sms)
        st = gs_text_printf(t, "  moe_flex_dispatcher_num_sms: %llu\n", (unsigned long long)s->flex_sms);
    if (st == GS_OK && s->attention != GS_ATTN_AUTO)
        st = gs_text_printf(t, "  attention: %s\n", gs_attn_impl_name(s->attention));
    if (st == GS_OK && s->fp8 != GS_FP8_OFF)
        st = gs_text_printf(t, "  fp8_recipe: %s\n", gs_fp8_name(s->fp8));
    if (st == GS_OK && s->fp8_params)
        st = gs_text_printf(t, "  fp8_params: true\n");
    if (st == GS_OK && s->fp8 == GS_FP8_DELAYED && s->fp8_amax_history > 1)
        st = gs_text_printf(t, "  fp8_amax_history: %" PRIu64 "\n", s->fp8_amax_history);
    if (st == GS_OK && s->fp8 == GS_FP8_DELAYED && s->fp8_amax_algo != GS_FP8_AMAX_MOST_RECENT)
        st = gs_text_printf(t, "  fp8_amax_algo: %s\n", gs_fp8_amax_algo_name(s->fp8_amax_algo));
    if (st == GS_OK && s->fp8 == GS_FP8_DELAYED && s->fp8_margin)
        st = gs_text_printf(t, "  fp8_margin: %" PRIu64 "\n", s->fp8_margin);
    if (st == GS_OK && s->cp_comm != GS_CP_P2P)
        st = gs_text_printf(t, "  cp_comm: %s\n", gs_cp_comm_name(s->cp_comm));
    if (st == GS_OK && s->moe_dispatcher != GS_MOE_ALLTOALL)
        st = gs_text_printf(t, "  moe_dispatcher: %s\n", gs_moe_dispatcher_name(s->moe_dispatcher));
    return st;
}

gs_status gs_scenario_write_yaml(const gs_scenario *s, gs_text *out, gs_error *err)
{
    char order[32];
    gs_status st = gs_text_printf(out, "# %s, written by gridstep\n", s->path[0] ? s->path : "scenario");
    if (st == GS_OK && s->title[0]) {
        st = gs_text_printf(out, "name: ");
        if (st == GS_OK)
            st = put_quoted(out, s->title);
        if (st == GS_OK)
            st = gs_text_printf(out, "\n");
    }
    if (st == GS_OK && s->description[0]) {
        st = gs_text_printf(out, "description: ");
        if (st == GS_OK)
            st = put_quoted(out, s->description);
        if (st == GS_OK)
            st = gs_text_printf(out, "\n");
    }
    if (st == GS_OK)
        st = put_model(out, &s->model);
    if (st == GS_OK)
        st = put_cluster(out, &s->cluster, err);
    if (st != GS_OK)
        goto out;
    gs_mesh_order_format_cp(s->grid.order, s->grid.cp > 1, s->grid.cp_outer, order, sizeof order);
    st = gs_text_printf(out, "grid: {dp: %" PRIu64 ", pp: %" PRIu64 ", tp: %" PRIu64, s->grid.dp, s->grid.pp, s->grid.tp);
    if (st == GS_OK && s->grid.cp > 1) /* written only with CP: files without it stay as they were */
        st = gs_text_printf(out, ", cp: %" PRIu64, s->grid.cp);
    if (st == GS_OK && s->grid.cp > 1 && s->grid.cp_a2a > 1)
        st = gs_text_printf(out, ", cp_a2a: %" PRIu64, s->grid.cp_a2a);
    if (st == GS_OK && s->grid.ep > 1)
        st = gs_text_printf(out, ", ep: %" PRIu64, s->grid.ep);
    if (st == GS_OK && s->grid.etp && s->grid.etp != s->grid.tp)
        st = gs_text_printf(out, ", etp: %" PRIu64, s->grid.etp);
    if (st == GS_OK)
        st = gs_text_printf(out, ", order: %s, allow_tp_cross_node: %s", order, yes_no(s->grid.allow_tp_cross_node));
    if (st == GS_OK && s->grid.first_stage_layers)
        st = gs_text_printf(out, ", first_stage_layers: %" PRIu64, s->grid.first_stage_layers);
    if (st == GS_OK && s->grid.last_stage_layers)
        st = gs_text_printf(out, ", last_stage_layers: %" PRIu64, s->grid.last_stage_layers);
    if (st == GS_OK && s->grid.account_for_embedding)
        st = gs_text_printf(out, ", account_for_embedding: true");
    if (st == GS_OK && s->grid.account_for_loss)
        st = gs_text_printf(out, ", account_for_loss: true");
    if (st == GS_OK && s->grid.layout.n) {
        char lay[1024];
        gs_layout_format(&s->grid.layout, lay, sizeof lay);
        st = gs_text_printf(out, ", layout: \"%s\"", lay);
    }
    if (st == GS_OK)
        st = gs_text_printf(out, "}\n");
    if (st == GS_OK)
        st = put_strategy(out, &s->strategy, err);
    if (st != GS_OK)
        goto out;
    st = gs_text_printf(out, "batch: {global: %" PRIu64 ", micro: %" PRIu64 "}\n",
                        s->batch.global_seqs, s->batch.micro_seqs);
    if (st == GS_OK && s->nstragglers)
        st = gs_text_printf(out, "stragglers:\n");
    for (size_t i = 0; i < s->nstragglers && st == GS_OK; i++)
        st = gs_text_printf(out, "  - {%s: %" PRIu64 ", slowdown: %.17g}\n",
                            s->stragglers[i].node ? "node" : "rank", s->stragglers[i].id,
                            s->stragglers[i].slowdown);
out:
    if (st == GS_ERR_NOMEM)
        return gs_error_set(err, st, "out of memory writing the scenario YAML");
    return st;
}
