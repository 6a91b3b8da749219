/* FP8 delayed scaling in the training program (Transformer Engine's DelayedScaling: E4M3
 * forward, E5M2 gradients; the strategy's amax history length, amax choice and margin, Megatron-LM's
 * defaults 1, most recent, 0).
 *
 * Each FP8 GEMM of a stage-local layer has a slot: the scales its casts use (input, weight,
 * output gradient), the amaxes its casts recorded since the last reduction, and each tensor's
 * amax history. A cast uses the slot's scale and records its tensor's amax; the schedule's
 * fp8_amax event at the end of a model chunk's pass (engine/fp8_amax.h) all-reduces the chunk's
 * amaxes with MAX over the stage's ranks, rolls each into its history and sets the scale from the
 * amax the recipe takes of it (gs_k_fp8_amax_history, gs_k_fp8_delayed_scale: the old scale kept
 * for an amax of 0, a tensor not cast since), forward and backward apart. What Transformer Engine
 * keeps is kept alike:
 * - the weight is cast once a step, on micro-batch 0's forward (is_first_microbatch), at the
 *   weight scale of that moment; every later use in the step (other micro-batches, the backward's
 *   data gradient, recompute) reads those codes, and only that cast records the weight's amax;
 * - the backward's weight gradient reads the input's forward codes: the input scale each forward
 *   used is saved per micro-batch, as is the recompute's (a recomputed forward casts at the saved
 *   scales and records nothing: TE's fp8 meta copied for recompute).
 * Initial scales are 1, as Transformer Engine's.
 *
 * The single-rank reference of a run whose stages hold R data-parallel replicas (opts
 * fp8_amax_replicas R) runs the replicas' micro-batches interleaved (gs__train_seq0) and reduces
 * only after every R-th pass of a direction: the R passes a parallel run's reduction joins. That
 * of a run with expert parallelism EP (opts fp8_amax_ep) joins the amaxes of the experts an EP
 * rank would hold at the same local index before each reduction (join_ep).
 *
 * Ownership: each rank_st owns its fp8_rank (gs__train_fp8_rank_init / _fini). */
#include "exec/train_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fp8_amax.h"

/* A GEMM's slot: the amaxes its casts recorded since the last reduction; sw_step: the weight
 * scale of this step's micro-batch 0 forward (the cached weight's). Its scales and amax
 * histories are its row of fp8_rank.state. */
typedef struct fp8_slot {
    float sw_step;
    float ax, aw, ady;
} fp8_slot;

/* A state row: the input, weight and output-gradient scales, then their amax histories of hlen
 * each (gs_k_fp8_amax_history's layout); the checkpoint's tensors hold these rows as they are. */
enum { SX, SW, SDY, HIST };

struct fp8_rank {
    uint64_t per_layer; /* slots a layer: QKV, O, UP, DOWN, then each local expert's up and down */
    fp8_slot *slot;     /* [local layer][per_layer] */
    float *sx_fwd;      /* [local layer][per_layer][mb]: the input scale micro-batch mb's forward used */
    float *pack;        /* host staging of a reduction: 3 floats a GEMM */
    float *dev;         /* the same on the rank's device */
    uint64_t pack_n;
    uint64_t *ids;      /* a layer's slots in the reduction's order (layer_slots), per_layer of them */
    float *state;       /* [local layer][per_layer][3 + 3 hlen]: each slot's state row */
    uint64_t hlen;
};

static uint64_t state_width(const struct fp8_rank *f)
{
    return 3 + 3 * f->hlen;
}

static float *state_row(const struct fp8_rank *f, uint64_t i)
{
    return f->state + i * state_width(f);
}

static uint64_t local_experts(const gs_train *t)
{
    const gs_scenario *s = t->s;
    uint64_t ep = t->sch->mesh.ep ? t->sch->mesh.ep : 1;
    return s->model.moe.experts ? s->model.moe.experts / ep : 0;
}

gs_status gs__train_fp8_rank_init(gs_train *t, rank_st *r, gs_error *err)
{
    r->f8 = NULL;
    if (!t->fp8 || !gs_fp8_amax_reduced(t->s))
        return GS_OK;
    struct fp8_rank *f = calloc(1, sizeof *f);
    uint64_t nl = r->part.layers ? r->part.layers : 1;
    if (!f)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (FP8 state)", r->rank);
    r->f8 = f;
    f->per_layer = 4 + 2 * local_experts(t);
    f->pack_n = 3 * f->per_layer * nl;
    f->slot = calloc(nl * f->per_layer, sizeof *f->slot);
    f->sx_fwd = calloc(nl * f->per_layer * (t->mbs ? t->mbs : 1), sizeof *f->sx_fwd);
    f->pack = calloc(f->pack_n, sizeof *f->pack);
    f->ids = calloc(f->per_layer, sizeof *f->ids);
    f->hlen = t->s->strategy.fp8_amax_history > 1 ? t->s->strategy.fp8_amax_history : 1;
    f->state = calloc(nl * f->per_layer * state_width(f), sizeof *f->state);
    int ok = f->slot && f->sx_fwd && f->pack && f->ids && f->state;
    f->dev = gs__train_dalloc(t, r, f->pack_n, &ok);
    if (!ok)
        return gs_error_set(err, GS_ERR_NOMEM, "exec: rank %" PRIu64 ": out of memory (FP8 state)", r->rank);
    for (uint64_t i = 0; i < nl * f->per_layer; i++) { /* Transformer Engine's initial scales */
        float *row = state_row(f, i);
        row[SX] = row[SW] = row[SDY] = f->slot[i].sw_step = 1.0f;
    }
    return GS_OK;
}

void gs__train_fp8_rank_fini(gs_train *t, rank_st *r)
{
    struct fp8_rank *f = r->f8;
    if (!f)
        return;
    if (f->dev)
        t->ops->free(t->drv, r->rank, f->dev);
    free(f->slot);
    free(f->sx_fwd);
    free(f->pack);
    free(f->ids);
    free(f->state);
    free(f);
    r->f8 = NULL;
}

/* The slot of GEMM `which` (expert j's for the experts' GEMMs) at the event's layer. */
static uint64_t slot_index(const ctx *c, gs_lin which, uint64_t j)
{
    const struct fp8_rank *f = c->r->f8;
    uint64_t l = (uint64_t)c->r->local_of_global[c->e->layer];
    uint64_t k = which == GS_LIN_EXPERT_UP ? 4 + 2 * j : which == GS_LIN_EXPERT_DOWN ? 5 + 2 * j : (uint64_t)which;
    return l * f->per_layer + k;
}

const gs_fp8_scales *gs__train_fp8_scales(const ctx *c, gs_lin which, uint64_t j, int bwd, gs_fp8_scales *sc)
{
    struct fp8_rank *f = c->r->f8;
    if (!f)
        return NULL;
    uint64_t i = slot_index(c, which, j), mb = c->e->mb;
    fp8_slot *sl = &f->slot[i];
    const float *row = state_row(f, i);
    float *saved = &f->sx_fwd[i * c->t->mbs + mb];
    memset(sc, 0, sizeof *sc);
    if (bwd) {
        sc->x = *saved;
        sc->w = sl->sw_step;
        sc->dy = row[SDY];
        sc->amax_dy = &sl->ady;
        return sc;
    }
    if (c->e->phase == GS_PHASE_RECOMPUTE) {
        sc->x = *saved;
        sc->w = sl->sw_step;
        return sc;
    }
    if (mb == 0) { /* the step's weight cast: its scale, and its amax recorded */
        sl->sw_step = row[SW];
        sc->amax_w = &sl->aw;
    }
    *saved = row[SX];
    sc->x = row[SX];
    sc->w = sl->sw_step;
    sc->amax_x = &sl->ax;
    return sc;
}

/* 1 when stage-local layer l of r is a MoE block. */
static int moe_local(const gs_train *t, const rank_st *r, uint64_t l)
{
    uint64_t g = gs_pipe_global_layer(&t->sch->mesh, t->layers, t->vstages, r->stage, l);
    return t->s->model.moe.experts && gs_model_moe_block(&t->s->model, g);
}

/* The slots of stage-local layer l the schedule's amax buffer holds, in its order: the
 * attention's QKV and O, then a dense block's UP and DOWN, or a MoE block's shared experts' UP
 * and DOWN (when it has them) and each local expert's up and down (engine/fp8_amax.h's count). */
static size_t layer_slots(const ctx *c, uint64_t l, uint64_t *out, size_t *experts_at)
{
    const gs_train *t = c->t;
    const struct fp8_rank *f = c->r->f8;
    uint64_t base = l * f->per_layer, L = local_experts(t);
    size_t n = 0;
    out[n++] = base + GS_LIN_QKV;
    out[n++] = base + GS_LIN_O;
    int moe = moe_local(t, c->r, l);
    if (!moe || t->s->model.moe.shared_experts) {
        out[n++] = base + GS_LIN_UP;
        out[n++] = base + GS_LIN_DOWN;
    }
    if (experts_at)
        *experts_at = moe ? n : 0;
    for (uint64_t j = 0; moe && j < L; j++) {
        out[n++] = base + 4 + 2 * j;
        out[n++] = base + 5 + 2 * j;
    }
    return n;
}

/* Slot i's tensor k (SX input, SW weight, SDY output gradient) after its reduced amax `last`: the
 * history rolled and the scale set from the amax the recipe takes of it (fp8_amax_algo) at
 * fp8_margin. */
static void update(const ctx *c, uint64_t i, int k, gs_fp8_fmt fmt, float last)
{
    const gs_strategy *st = &c->t->s->strategy;
    const struct fp8_rank *f = c->r->f8;
    float *row = state_row(f, i);
    float amax = gs_k_fp8_amax_history(row + HIST + (uint64_t)k * f->hlen, f->hlen, last,
                                       st->fp8_amax_algo == GS_FP8_AMAX_MAX);
    row[k] = gs_k_fp8_delayed_scale(fmt, amax, row[k], (unsigned)st->fp8_margin);
}

/* The reduction's floats in pack order (3 a GEMM forward: input, weight, output; 2 backward:
 * output gradient, input gradient; the outputs' and input gradients' slots stay 0, as those
 * tensors are not cast here), or their count when pack is NULL; `set` writes reduced values back
 * into the slots and updates their scales instead. */
static uint64_t walk(const ctx *c, int bwd, int64_t bot, int64_t top, float *pack, int set)
{
    struct fp8_rank *f = c->r->f8;
    uint64_t *ids = f->ids, n = 0;
    for (int64_t l = bot; l <= top; l++) {
        size_t k = layer_slots(c, (uint64_t)l, ids, NULL);
        for (size_t q = 0; q < k; q++) {
            fp8_slot *sl = &f->slot[ids[q]];
            if (set && bwd) {
                update(c, ids[q], SDY, GS_FP8_E5M2, pack[n]);
                sl->ady = 0.0f;
            } else if (set) {
                update(c, ids[q], SX, GS_FP8_E4M3, pack[n]);
                update(c, ids[q], SW, GS_FP8_E4M3, pack[n + 1]);
                sl->ax = sl->aw = 0.0f;
            } else if (pack && bwd) {
                pack[n] = sl->ady, pack[n + 1] = 0.0f;
            } else if (pack) {
                pack[n] = sl->ax, pack[n + 1] = sl->aw, pack[n + 2] = 0.0f;
            }
            n += bwd ? 2 : 3;
        }
    }
    return n;
}

/* Under fp8_amax_ep: the amaxes of the experts at the same local index of an emulated EP rank
 * joined with MAX (NaN-sticky, as the reduction) in the pack of layers bot..top, as Transformer
 * Engine's reduction over the EP ranks joins them: their scales then stay equal. */
static void join_ep(const ctx *c, int bwd, int64_t bot, int64_t top, float *pack)
{
    const gs_train *t = c->t;
    uint64_t EPe = t->o.fp8_amax_ep, E = local_experts(t), w = bwd ? 2 : 3, n = 0;
    if (EPe <= 1 || !E)
        return;
    uint64_t L = E / EPe, span = 2 * w; /* an expert's floats: up, then down */
    for (int64_t l = bot; l <= top; l++) {
        size_t at, k = layer_slots(c, (uint64_t)l, c->r->f8->ids, &at);
        float *x = pack + n + at * w; /* the layer's experts (none: at 0) */
        for (uint64_t j = 0; at && j < L; j++)
            for (uint64_t q = 0; q < span; q++) {
                float m = x[j * span + q];
                for (uint64_t e = j + L; e < E; e += L)
                    m = gs_k_max_nan(m, x[e * span + q]);
                for (uint64_t e = j; e < E; e += L)
                    x[e * span + q] = m;
            }
        n += k * w;
    }
}

/* The fp8_amax event: the pass's chunk's amaxes all-reduced with MAX over the stage's ranks, then
 * the scales updated; under fp8_amax_replicas R only after every R-th pass (the amaxes keep
 * accumulating in between). */
gs_status gs__train_fp8_amax_action(const ctx *c, action a)
{
    (void)a;
    gs_train *t = c->t;
    rank_st *r = c->r;
    struct fp8_rank *f = r->f8;
    const gs_event *e = c->e;
    int bwd = e->phase == GS_PHASE_BWD;
    if (!f)
        return gs_error_set(c->err, GS_ERR_RUNTIME, "exec: rank %" PRIu64 ": an fp8_amax event in a scenario "
                            "without FP8 delayed scaling", r->rank);
    uint64_t R = t->o.fp8_amax_replicas > 1 ? t->o.fp8_amax_replicas : 1;
    if ((e->mb + 1) % R != 0)
        return GS_OK;
    int64_t bot, top;
    gs_partition_chunk_span(&r->part, t->vstages, e->chunk, &bot, &top);
    uint64_t n = walk(c, bwd, bot, top, NULL, 0);
    if (n * 4 != e->bytes || n > f->pack_n)
        return gs_error_set(c->err, GS_ERR_INPUT, "exec: rank %" PRIu64 ": the fp8_amax event of layers %" PRId64
                            "-%" PRId64 " reduces %" PRIu64 " B, where the host program keeps %" PRIu64 " B of "
                            "amaxes for them", r->rank, bot, top, e->bytes, n * 4);
    walk(c, bwd, bot, top, f->pack, 0);
    join_ep(c, bwd, bot, top, f->pack);
    const gs_driver_ops *ops = t->ops;
    ops->upload(t->drv, c->s, f->dev, f->pack, n * sizeof(float));
    gs_status rc = ops->all_reduce_max(t->drv, c->s, r->rank, &r->groups[GS_GROUP_STAGE], f->dev, n, c->err);
    if (rc != GS_OK)
        return rc;
    ops->download(t->drv, c->s, f->pack, f->dev, n * sizeof(float)); /* a blocking copy, as train_moe's */
    walk(c, bwd, bot, top, f->pack, 1);
    return GS_OK;
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

/* A layer's FP8 state in a checkpoint: MODEL.layers.G._fp8_meta, 4 rows (QKV, O, the MLP's up and
 * down), and in a MoE block MODEL.layers.G.mlp.experts._fp8_meta, 2 E rows (each routed expert's
 * up and down, by global expert): the slots' state rows, where the pieces point. After a
 * reduction every rank of a pipeline stage holds the same scales (an expert's: every rank
 * holding that expert), so the stage's first rank writes the first tensor and each expert's
 * first holder (EDP and ETP position 0) its rows; a load fills every rank's rows, from a
 * checkpoint of any grid. The amaxes recorded since the last reduction are 0 between steps and
 * not saved. */

int gs_train_state_tensor(const char *name)
{
    if (!name)
        return 0;
    size_t n = strlen(name), k = strlen("._fp8_meta");
    return n > k && strcmp(name + n - k, "._fp8_meta") == 0;
}

size_t gs__train_fp8_meta_count(const gs_train *t, const rank_st *r)
{
    size_t n = 0;
    for (uint64_t l = 0; r->f8 && l < r->part.layers; l++)
        n += 1 + (size_t)moe_local(t, r, l);
    return n;
}

/* One tensor of one piece: rows [row0, row0 + nrows) of `rows` x w at m. */
static gs_status meta_tensor(gs_shard_tensor *st, const char *name, uint64_t rows, uint64_t w, uint64_t row0,
                             uint64_t nrows, float *m, int primary, gs_error *err)
{
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->ndim = 2;
    st->shape[0] = rows;
    st->shape[1] = w;
    st->state = 1;
    st->primary = primary;
    if (!(st->pieces = calloc(1, sizeof *st->pieces)))
        return gs_error_set(err, GS_ERR_NOMEM, "exec: out of memory");
    st->pieces[0] = (gs_shard_piece){row0 * w, nrows * w, m, NULL, NULL};
    st->npieces = 1;
    return GS_OK;
}

gs_status gs__train_fp8_meta_shards(const gs_train *t, rank_st *r, gs_shard_tensor *out, size_t *n, gs_error *err)
{
    struct fp8_rank *f = r->f8;
    if (!f)
        return GS_OK;
    const gs_mesh *mesh = &t->sch->mesh;
    uint64_t w = state_width(f), L = local_experts(t), E = t->s->model.moe.experts;
    uint64_t ep_pos = r->groups[GS_GROUP_EP].pos;
    gs_group_kind etp = gs_mesh_etp(mesh) == mesh->size[GS_DIM_TP] ? GS_GROUP_TP : GS_GROUP_ETP;
    int first = r->groups[GS_GROUP_STAGE].pos == 0;
    int expert_first = r->groups[GS_GROUP_EDP].pos == 0 && r->groups[etp].pos == 0;
    char name[80];
    gs_status rc;
    for (uint64_t l = 0; l < r->part.layers; l++) {
        uint64_t g = gs_pipe_global_layer(mesh, t->layers, t->vstages, r->stage, l);
        float *m = state_row(f, l * f->per_layer);
        snprintf(name, sizeof name, "model.layers.%" PRIu64 "._fp8_meta", g);
        if ((rc = meta_tensor(&out[(*n)++], name, 4, w, 0, 4, m, first, err)) != GS_OK)
            return rc;
        if (!moe_local(t, r, l))
            continue;
        snprintf(name, sizeof name, "model.layers.%" PRIu64 ".mlp.experts._fp8_meta", g);
        if ((rc = meta_tensor(&out[(*n)++], name, 2 * E, w, 2 * ep_pos * L, 2 * L, m + 4 * w, expert_first, err)) !=
            GS_OK)
            return rc;
    }
    return GS_OK;
}

uint64_t gs_train_fp8_state_bytes(const gs_scenario *s)
{
    if (s->strategy.fp8 != GS_FP8_DELAYED)
        return 0;
    uint64_t h = s->strategy.fp8_amax_history > 1 ? s->strategy.fp8_amax_history : 1, rows = 0, b = 0;
    for (uint64_t g = 0; g < s->model.layers; g++)
        rows += 4 + (s->model.moe.experts && gs_model_moe_block(&s->model, g) ? 2 * s->model.moe.experts : 0);
    if (gs_mul_u64(rows, 4 * (3 + 3 * h), &b) != 0)
        return UINT64_MAX;
    return b;
}
