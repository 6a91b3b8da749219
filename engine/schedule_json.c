/* The schedule as one JSON document, streamed through the text dump's writer (no tree in memory),
 * with event names. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/roles.h"
#include "engine/schedule_internal.h"

/* ------------------------------------------------------------------------- JSON dump ---- */

static void out_json_str(gs__writer *o, const char *s, size_t len)
{
    gs__out_char(o, '"');
    for (size_t i = 0; i < len && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            gs__out_char(o, '\\');
            gs__out_char(o, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            gs__out_str(o, esc);
        } else {
            gs__out_char(o, (char)c);
        }
    }
    gs__out_char(o, '"');
}

static void out_json_bool(gs__writer *o, int v)
{
    gs__out_str(o, v ? "true" : "false");
}

/* Tensor i of a rank list, as a JSON object (after its separator). */
static void json_tensor(gs__writer *o, size_t i, const gs_tensor *t)
{
    gs__out_str(o, i ? ",\n      {\"id\": " : "\n      {\"id\": ");
    gs__out_u64(o, i);
    gs__out_str(o, ", \"kind\": \"");
    gs__out_str(o, gs_tensor_kind_name((gs_tensor_kind)t->kind));
    gs__out_str(o, "\", \"bytes\": ");
    gs__out_u64(o, t->bytes);
    gs__out_str(o, ", \"layer\": ");
    gs__out_i64(o, t->layer);
    gs__out_str(o, ", \"mb\": ");
    gs__out_u64(o, t->mb);
    gs__out_str(o, ", \"unit\": ");
    gs__out_u64(o, t->unit);
    gs__out_str(o, ", \"resident\": ");
    out_json_bool(o, t->resident);
    gs__out_str(o, ", \"host\": ");
    out_json_bool(o, t->on_host);
    gs__out_char(o, '}');
}

/* Event i of rank list r, as a JSON object (after its separator). */
static void json_event(gs__writer *o, const gs_rank_events *r, size_t i, const gs_event *e)
{
    char nm[GS_EVENT_NAME_BYTES];
    gs_event_name(r, e, nm, sizeof nm);
    gs__out_str(o, i ? ",\n      {\"id\": " : "\n      {\"id\": ");
    gs__out_u64(o, i);
    gs__out_str(o, ", \"name\": ");
    out_json_str(o, nm, sizeof nm);
    gs__out_str(o, ", \"kind\": \"");
    gs__out_str(o, gs_event_kind_name((gs_event_kind)e->kind));
    gs__out_str(o, "\", \"stream\": \"");
    gs__out_str(o, gs_stream_name((gs_stream)e->stream));
    gs__out_str(o, "\", \"phase\": \"");
    gs__out_str(o, gs_phase_name((gs_phase)e->phase));
    gs__out_str(o, "\", \"role\": \"");
    gs__out_str(o, gs_role_name((gs_role)e->role));
    gs__out_str(o, "\", \"part\": ");
    gs__out_u64(o, e->part);
    gs__out_str(o, ", \"op\": ");
    if (e->kind == GS_EV_COMPUTE || e->kind == GS_EV_COLLECTIVE) {
        gs__out_char(o, '"');
        gs__out_str(o, e->kind == GS_EV_COMPUTE ? gs_op_name((gs_op)e->op) : gs_coll_op_name((gs_coll_op)e->op));
        gs__out_char(o, '"');
    } else {
        gs__out_u64(o, e->op);
    }
    gs__out_str(o, ", \"group\": ");
    if (e->kind == GS_EV_COLLECTIVE) {
        gs__out_char(o, '"');
        gs__out_str(o, gs_group_kind_name((gs_group_kind)e->group));
        gs__out_char(o, '"');
    } else {
        gs__out_u64(o, e->group);
    }
    gs__out_str(o, ", \"chunk\": ");
    gs__out_u64(o, e->chunk);
    gs__out_str(o, ", \"layer\": ");
    gs__out_i64(o, e->layer);
    gs__out_str(o, ", \"mb\": ");
    gs__out_u64(o, e->mb);
    gs__out_str(o, ", \"unit\": ");
    gs__out_u64(o, e->unit);
    gs__out_str(o, ", \"gemm\": [");
    gs__out_u64(o, e->gemm_m);
    gs__out_str(o, ", ");
    gs__out_u64(o, e->gemm_n);
    gs__out_str(o, ", ");
    gs__out_u64(o, e->gemm_k);
    gs__out_str(o, ", ");
    gs__out_u64(o, e->gemm_batch);
    gs__out_str(o, "], \"peer\": ");
    gs__out_u64(o, e->peer);
    gs__out_str(o, ", \"group_size\": ");
    gs__out_u64(o, e->group_size);
    gs__out_str(o, ", \"bytes\": ");
    gs__out_u64(o, e->bytes);
    gs__out_str(o, ", \"flops\": ");
    gs__out_double(o, isfinite(e->flops) ? e->flops : 0.0);
    if (e->net_share > 0.0f) { /* a flex dispatcher's all-to-all */
        char v[32];
        snprintf(v, sizeof v, ", \"net_share\": %.9g", (double)e->net_share);
        gs__out_str(o, v);
    }
    for (int w = 0; w < GS_LINK_LISTS; w++) {
        gs__out_str(o, ", \"");
        gs__out_str(o, gs__link_names[w]);
        gs__out_str(o, "\": [");
        gs__out_list(o, gs_event_list(r, e, w), e->nlinks[w], 0);
        gs__out_char(o, ']');
    }
    gs__out_char(o, '}');
}

gs_status gs_schedule_dump_json(const gs_schedule *sch, FILE *f, gs_error *err)
{
    char order[32];
    gs__writer *o = malloc(sizeof *o);
    if (!o)
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory writing the schedule as JSON");
    o->f = f;
    o->n = 0;
    gs_mesh_order_format_cp(sch->mesh.order, sch->mesh.cp > 1, sch->mesh.cp_outer, order, sizeof order);
    gs__out_str(o, "{\n  \"format\": \"gridstep-schedule\",\n  \"version\": 1,\n  \"scenario\": ");
    out_json_str(o, sch->scenario, sizeof sch->scenario);
    gs__out_str(o, ",\n  \"mesh\": {\"tp\": ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_TP]);
    gs__out_str(o, ", \"dp\": ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_DP]);
    gs__out_str(o, ", \"pp\": ");
    gs__out_u64(o, sch->mesh.size[GS_DIM_PP]);
    gs__out_str(o, ", \"order\": \"");
    gs__out_str(o, order);
    gs__out_str(o, "\", \"gpus_per_node\": ");
    gs__out_u64(o, sch->mesh.gpus_per_node);
    if (sch->mesh.first_layers || sch->mesh.last_layers) { /* uneven first / last stages only */
        gs__out_str(o, ", \"first_stage_layers\": ");
        gs__out_u64(o, sch->mesh.first_layers);
        gs__out_str(o, ", \"last_stage_layers\": ");
        gs__out_u64(o, sch->mesh.last_layers);
    }
    if (sch->mesh.account_embedding || sch->mesh.account_loss) { /* the embedding / loss as layers */
        gs__out_str(o, ", \"account_for_embedding\": ");
        gs__out_str(o, sch->mesh.account_embedding ? "true" : "false");
        gs__out_str(o, ", \"account_for_loss\": ");
        gs__out_str(o, sch->mesh.account_loss ? "true" : "false");
    }
    if (sch->mesh.layout.n) { /* a custom pipeline layout only (Megatron's syntax) */
        char lay[1024];
        gs_layout_format(&sch->mesh.layout, lay, sizeof lay);
        gs__out_str(o, ", \"layout\": \"");
        gs__out_str(o, lay);
        gs__out_char(o, '"');
    }
    if (sch->mesh.cp > 1) { /* context parallelism only: dp above is dp x cp */
        gs__out_str(o, ", \"cp\": ");
        gs__out_u64(o, sch->mesh.cp);
    }
    gs__out_str(o, "},\n  \"microbatches\": ");
    gs__out_u64(o, sch->microbatches);
    gs__out_str(o, ",\n  \"exact\": ");
    out_json_bool(o, sch->exact);
    gs__out_str(o, ",\n  \"ranks\": [");
    for (size_t p = 0; p < sch->nranks; p++) {
        const gs_rank_events *r = &sch->ranks[p];
        gs__out_str(o, p ? ",\n    {\"rank\": " : "\n    {\"rank\": ");
        gs__out_u64(o, r->rank);
        gs__out_str(o, ", \"class\": ");
        gs__out_u64(o, r->class_size);
        gs__out_str(o, ", \"stage\": ");
        gs__out_u64(o, r->stage);
        gs__out_str(o, ",\n     \"tensors\": [");
        for (size_t i = 0; i < r->ntensors; i++)
            json_tensor(o, i, &r->tensors[i]);
        gs__out_str(o, r->ntensors ? "\n     ],\n     \"events\": [" : "],\n     \"events\": [");
        for (size_t i = 0; i < r->nevents; i++)
            json_event(o, r, i, &r->events[i]);
        gs__out_str(o, r->nevents ? "\n     ]}" : "]}");
    }
    gs__out_str(o, sch->nranks ? "\n  ]\n}\n" : "]\n}\n");
    return gs__out_finish(o, err, "as JSON");
}


