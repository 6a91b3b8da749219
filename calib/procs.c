/* `gridstep calibrate` across the processes of a launched job (calib/procs.h). */
#include "calib/procs.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/ops.h"
#include "engine/schedule.h"
#include "sim/calib.h"
#include "sim/collective.h"

#define PROCS_MAX_REPS 5

const char *const gs_calib_class_names[GS_CALIB_CLASS_COUNT] = {"intra", "inter"};


/* Per process: seconds per call [class][op][size][repeat]. */
#define LOCAL_N (GS_CALIB_CLASS_COUNT * GS_CAL_C_COUNT * GS_CALIB_PROCS_MAX_SIZES * PROCS_MAX_REPS)
#define AT(cl, op, si, r)                                                                                      \
    ((((size_t)(cl) * GS_CAL_C_COUNT + (size_t)(op)) * GS_CALIB_PROCS_MAX_SIZES + (si)) * PROCS_MAX_REPS + (r))

typedef struct procs_call {
    const gs_driver_ops *ops;
    gs_drv *d;
    uint64_t rank;
    gs_drv_group g;
    int op, peer; /* peer: the ping-pong partner (-1: this process sits the send/recv out) */
    size_t bytes, iters;
    float *a, *b;
    double late_s; /* the test hook's delay for this batch (calib/ops.h: gs_cal_spell) */
} procs_call;

static gs_status procs_fn(void *arg, gs_drv_stream *s, gs_error *err)
{
    procs_call *c = arg;
    const gs_driver_ops *ops = c->ops;
    size_t floats = c->bytes / 4;
    gs_status rc = GS_OK;
    for (size_t i = 0; i < c->iters && rc == GS_OK; i++)
        switch (c->op) {
        case GS_CAL_C_AG: rc = ops->all_gather(c->d, s, c->rank, &c->g, c->a, c->b, floats / c->g.size, err); break;
        case GS_CAL_C_RS: rc = ops->reduce_scatter(c->d, s, c->rank, &c->g, c->a, c->b, floats / c->g.size, err); break;
        case GS_CAL_C_AR: rc = ops->all_reduce(c->d, s, c->rank, &c->g, c->a, floats, err); break;
        case GS_CAL_C_BC: rc = ops->broadcast(c->d, s, c->rank, &c->g, c->a, floats, 0, err); break;
        default:
            if (c->peer < 0)
                return GS_OK;
            if (c->rank == 0) {
                if ((rc = ops->send(c->d, s, 0, (uint64_t)c->peer, c->a, c->bytes, err)) == GS_OK)
                    rc = ops->recv(c->d, s, 0, (uint64_t)c->peer, c->b, c->bytes, err);
            } else if ((rc = ops->recv(c->d, s, c->rank, 0, c->b, c->bytes, err)) == GS_OK) {
                rc = ops->send(c->d, s, c->rank, 0, c->b, c->bytes, err);
            }
            break;
        }
    if (rc == GS_OK && c->late_s > 0)
        gs_cal_sleep(c->late_s);
    return rc;
}

/* The layout: distinct hosts in order of first appearance; regular when every host holds the
 * same number of processes, in blocks (mpirun's by-slot placement) or round robin (by node). */
static void layout(gs_calib_procs *c, const char *const *hosts)
{
    int P = c->procs;
    int *h = calloc((size_t)P, sizeof *h), nh = 0;
    int *count = calloc((size_t)P, sizeof *count);
    for (int p = 0; p < P && h && count; p++) {
        int q = 0;
        while (q < p && strcmp(hosts[q], hosts[p]) != 0)
            q++;
        h[p] = q < p ? h[q] : nh++;
        count[h[p]]++;
    }
    c->hosts = nh;
    c->per_host = nh ? count[0] : 1;
    int blocks = h && count && nh > 0 && P % nh == 0, rr = blocks;
    for (int p = 0; p < P && (blocks || rr); p++) {
        if (count[h[p]] != P / nh)
            blocks = rr = 0;
        if (h[p] != p / (P / nh))
            blocks = 0;
        if (h[p] != p % nh)
            rr = 0;
    }
    c->regular = blocks ? 1 : rr ? 2 : 0;
    c->peer[GS_CALIB_INTRA] = P > 1 && h && h[1] == h[0] ? 1 : -1;
    c->peer[GS_CALIB_INTER] = -1;
    for (int p = 1; p < P && h && c->peer[GS_CALIB_INTER] < 0; p++)
        if (h[p] != h[0])
            c->peer[GS_CALIB_INTER] = p;
    free(h), free(count);
}

/* One run's context: the driver, the job, the options, the result being filled and the mesh
 * whose groups are the classes. */
typedef struct procs_ctx {
    const gs_driver_ops *ops;
    const gs_exec_boot *boot;
    const gs_calib_procs_opts *po;
    gs_calib_procs *c;
    gs_mesh mesh;
} procs_ctx;

/* The classes measured and the mesh whose groups realize them (x->mesh). */
static gs_status procs_mesh(procs_ctx *x, gs_error *err)
{
    gs_calib_procs *c = x->c;
    uint64_t P = (uint64_t)c->procs, L = (uint64_t)c->per_host, H = (uint64_t)c->hosts;
    gs_status rc;
    if (c->regular && H >= 2 && L >= 2) {
        /* a host's processes are the TP groups: consecutive ranks in blocks (tp fastest), every
         * H-th rank round robin (dp fastest) */
        static const gs_dim dp_first[GS_DIM_COUNT] = {GS_DIM_DP, GS_DIM_TP, GS_DIM_PP};
        rc = gs_mesh_init(&x->mesh, L, H, 1, c->regular == 2 ? dp_first : NULL, L, err);
        c->nranks[GS_CALIB_INTRA] = L, c->kind[GS_CALIB_INTRA] = GS_GROUP_TP;
        c->nranks[GS_CALIB_INTER] = H, c->kind[GS_CALIB_INTER] = GS_GROUP_DP;
    } else {
        rc = gs_mesh_init(&x->mesh, 1, P, 1, NULL, H >= 2 ? 1 : P, err);
        int cl = H >= 2 ? GS_CALIB_INTER : GS_CALIB_INTRA;
        c->nranks[cl] = P, c->kind[cl] = GS_GROUP_DP;
    }
    return rc;
}

/* Each class's group as process me sees it (members: 2 x procs entries, the groups' members). */
static void procs_groups(const procs_ctx *x, uint64_t me, uint64_t *members, gs_drv_group grp[GS_CALIB_CLASS_COUNT])
{
    const gs_calib_procs *c = x->c;
    uint64_t P = (uint64_t)c->procs;
    memset(grp, 0, GS_CALIB_CLASS_COUNT * sizeof *grp);
    for (int cl = 0; cl < GS_CALIB_CLASS_COUNT; cl++) {
        uint64_t gsize = 0, idx = c->nranks[cl] ? gs_group_of(&x->mesh, c->kind[cl], me, &gsize) : 0;
        uint64_t *mem = members + (size_t)cl * P;
        if (c->nranks[cl]) {
            gs_group_members_of(&x->mesh, c->kind[cl], me, mem);
            uint64_t pos = 0;
            while (pos < gsize && mem[pos] != me)
                pos++;
            grp[cl] = (gs_drv_group){c->kind[cl], idx, gsize, pos, mem};
        }
    }
}

/* The driver's streams and events one process measures with. */
typedef struct procs_dev {
    gs_drv *d;
    gs_drv_stream *s;
    gs_drv_event *e0, *e1;
} procs_dev;

/* The passes over every (class, op, size) through dv: this process's seconds per call into
 * local (AT). */
static gs_status procs_passes(const procs_ctx *x, const procs_dev *dv, procs_call *call,
                              const gs_drv_group grp[GS_CALIB_CLASS_COUNT], double *local, gs_error *err)
{
    const gs_driver_ops *ops = x->ops;
    const gs_calib_procs_opts *po = x->po;
    gs_calib_procs *c = x->c;
    gs_drv *d = dv->d;
    gs_drv_stream *s = dv->s;
    gs_drv_event *e0 = dv->e0, *e1 = dv->e1;
    uint64_t me = call->rank;
    size_t nsizes = c->nsizes;
    gs_cal_spell none = {0}, *spell = po->spell ? po->spell : &none; /* the same value on every process */
    gs_status rc = GS_OK;
    /* Pass -1 warms every (class, op, size) up; passes 0 .. reps-1 each time all of them once.
     * The repeats are passes over the whole grid, not back to back per size, so that a slow
     * spell of the machine (another job's burst, a scheduler slice on a shared node: tens of
     * ms) lands in one or two repeats of many points, which the median over repeats drops,
     * rather than in every repeat of a few neighbouring sizes, which it cannot. */
    for (int r = -1; r < c->reps && rc == GS_OK; r++)
        for (int cl = 0; cl < GS_CALIB_CLASS_COUNT && rc == GS_OK; cl++) {
            call->g = grp[cl];
            for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++) {
                if (op == GS_CAL_C_P2P ? c->peer[cl] < 0 : !c->nranks[cl])
                    continue;
                call->op = op;
                call->peer = op != GS_CAL_C_P2P ? -1 : (me == 0 || me == (uint64_t)c->peer[cl]) ? c->peer[cl] : -1;
                for (size_t si = 0; si < nsizes && rc == GS_OK; si++) {
                    call->bytes = c->sizes[si];
                    if (me == 0 && po->progress) {
                        char what[160];
                        if (r < 0)
                            snprintf(what, sizeof what, "%s between processes (%s), %zu B, warm-up",
                                     gs_cal_c_names[op], gs_calib_class_names[cl], call->bytes);
                        else
                            snprintf(what, sizeof what, "%s between processes (%s), %zu B, repeat %d/%d",
                                     gs_cal_c_names[op], gs_calib_class_names[cl], call->bytes, r + 1, c->reps);
                        po->progress(po->progress_arg, what);
                    }
                    if (r < 0) {
                        call->iters = 5;
                        call->late_s = 0.0;
                        if ((rc = ops->launch(d, s, procs_fn, call, err)) == GS_OK)
                            rc = ops->stream_sync(d, s, err);
                        continue;
                    }
                    size_t timed_iters = call->bytes <= (1u << 20) ? (po->quick ? 20 : 50) : (po->quick ? 5 : 20);
                    call->iters = timed_iters;
                    procs_call one = *call; /* its own count: a host driver runs launched work later */
                    one.iters = 1;
                    one.late_s = 0.0;
                    call->late_s = me == 0 ? gs_cal_spell_next(spell) : 0.0;
                    /* one untimed call first, so that e0 follows the members' meeting (as in
                     * calib/device.c), then the batch */
                    if ((rc = ops->launch(d, s, procs_fn, &one, err)) != GS_OK)
                        break;
                    if ((rc = ops->event_record(d, s, e0, err)) == GS_OK &&
                        (rc = ops->launch(d, s, procs_fn, call, err)) == GS_OK &&
                        (rc = ops->event_record(d, s, e1, err)) == GS_OK && (rc = ops->stream_sync(d, s, err)) == GS_OK)
                        local[AT(cl, op, si, r)] = gs_cal_elapsed(ops, d, e0, e1) / (double)timed_iters *
                                                   (op == GS_CAL_C_P2P ? 0.5 : 1.0);
                }
            }
        }
    return rc;
}

/* Measures this process's part: opens the driver, takes part in every pass, closes it. */
static gs_status procs_measure(const procs_ctx *x, double *local, gs_error *err)
{
    const gs_driver_ops *ops = x->ops;
    gs_calib_procs *c = x->c;
    uint64_t P = (uint64_t)c->procs;
    gs_driver_opts o = {.timeout_s = 300.0, .group_of = gs_group_of, .boot = x->boot, .set = x->po->set};
    procs_dev dv = {NULL, NULL, NULL, NULL};
    uint64_t me = (uint64_t)x->boot->proc, maxb = c->sizes[c->nsizes - 1];
    procs_call call = {ops, NULL, me, {0}, 0, -1, 0, 0, NULL, NULL, 0.0};
    uint64_t *members = calloc(2 * P, sizeof *members); /* a group of each class */
    gs_status rc = GS_OK;
    if (!members)
        rc = gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    if (rc == GS_OK)
        rc = ops->open(&x->mesh, &o, &dv.d, err);
    if (rc == GS_OK)
        rc = ops->stream_create(dv.d, me, GS_STREAM_DP, &dv.s, err);
    if (rc == GS_OK && (rc = ops->event_create(dv.d, &dv.e0, err)) == GS_OK)
        rc = ops->event_create(dv.d, &dv.e1, err);
    if (rc == GS_OK) {
        call.d = dv.d;
        call.a = ops->alloc(dv.d, me, maxb);
        call.b = ops->alloc(dv.d, me, maxb);
        if (!call.a || !call.b)
            rc = gs_error_set(err, GS_ERR_NOMEM, "calibrate: process %" PRIu64 ": cannot allocate 2 x %" PRIu64 " B",
                              me, maxb);
    }
    /* each class's group, as this process sees it */
    gs_drv_group grp[GS_CALIB_CLASS_COUNT];
    memset(grp, 0, sizeof grp);
    if (rc == GS_OK)
        procs_groups(x, me, members, grp);
    if (rc == GS_OK)
        rc = procs_passes(x, &dv, &call, grp, local, err);
    if (me == 0 && x->po->progress)
        x->po->progress(x->po->progress_arg, NULL);
    gs_drv *d = dv.d;
    if (rc != GS_OK && d)
        ops->abort(d, err->msg);
    if (call.a)
        ops->free(d, me, call.a);
    if (call.b)
        ops->free(d, me, call.b);
    if (dv.e0)
        ops->event_destroy(d, dv.e0);
    if (dv.e1)
        ops->event_destroy(d, dv.e1);
    if (dv.s)
        ops->stream_destroy(d, dv.s);
    if (d)
        ops->close(d);
    free(members);
    return rc;
}

/* Every point's median over repeats of its slowest process (all: every process's local
 * times), and each (class, op)'s alpha-beta fit. */
static gs_status procs_fit(gs_calib_procs *c, const double *all, gs_error *err)
{
    uint64_t P = (uint64_t)c->procs;
    size_t nsizes = c->nsizes;
    gs_status rc = GS_OK;
    for (int cl = 0; cl < GS_CALIB_CLASS_COUNT && rc == GS_OK; cl++)
        for (int op = 0; op < GS_CAL_C_COUNT && rc == GS_OK; op++) {
            if (op == GS_CAL_C_P2P ? c->peer[cl] < 0 : !c->nranks[cl])
                continue;
            for (size_t si = 0; si < nsizes; si++) {
                double v[PROCS_MAX_REPS];
                for (int r = 0; r < c->reps; r++) {
                    v[r] = 0;
                    for (uint64_t p = 0; p < P; p++)
                        v[r] = fmax(v[r], all[p * LOCAL_N + AT(cl, op, si, r)]);
                }
                c->secs[cl][op][si] = gs_calib_median(v, (size_t)c->reps);
            }
            double x[GS_CALIB_PROCS_MAX_SIZES];
            for (size_t si = 0; si < nsizes; si++)
                x[si] = (double)c->sizes[si];
            if ((rc = gs_fit_alpha_beta(x, c->secs[cl][op], nsizes, &c->fit[cl][op], err)) != GS_OK)
                gs_error_prefix(err, "%s between processes (%s)", gs_cal_c_names[op], gs_calib_class_names[cl]);
            else
                c->ok[cl][op] = 1;
        }
    return rc;
}

gs_status gs_calib_procs_run(const gs_driver_ops *ops, const gs_exec_boot *boot, const gs_calib_procs_opts *po,
                             gs_calib_procs **out, gs_error *err)
{
    size_t nsizes = po->nsizes;
    *out = NULL;
    if (!gs_boot_active(boot))
        return gs_error_set(err, GS_ERR_INPUT, "calibrate: the collectives between processes need a launcher "
                            "(mpirun or srun) starting more than one process");
    if (nsizes < 3 || nsizes > GS_CALIB_PROCS_MAX_SIZES)
        return gs_error_set(err, GS_ERR_INPUT, "calibrate: %zu sizes for the collectives between processes, "
                            "expected 3 .. %d", nsizes, GS_CALIB_PROCS_MAX_SIZES);
    gs_calib_procs *c = calloc(1, sizeof *c);
    double *local = calloc(LOCAL_N, sizeof *local), *all = NULL;
    if (!c || !local) {
        free(c), free(local);
        return gs_error_set(err, GS_ERR_NOMEM, "out of memory");
    }
    c->procs = boot->procs;
    c->reps = PROCS_MAX_REPS; /* --quick too: the repeats are cheap beside the warm-up (5 calls each) */
    memcpy(c->sizes, po->sizes, nsizes * sizeof *po->sizes);
    c->nsizes = nsizes;
    layout(c, po->hosts);
    procs_ctx x = {.ops = ops, .boot = boot, .po = po, .c = c};
    uint64_t P = (uint64_t)c->procs;
    gs_status rc = procs_mesh(&x, err);
    if (rc == GS_OK)
        rc = procs_measure(&x, local, err);
    /* every process's times to every process (collective: made by every process even after a
     * failure, so that none waits for another; the caller agrees the statuses afterwards) */
    all = calloc(LOCAL_N * P, sizeof *all);
    gs_error aerr;
    gs_error_init(&aerr);
    gs_status arc = all ? boot->allgather(boot->ctx, local, LOCAL_N * sizeof *local, all, &aerr)
                        : gs_error_set(&aerr, GS_ERR_NOMEM, "out of memory");
    if (rc == GS_OK && arc != GS_OK) {
        rc = arc;
        *err = aerr;
    }
    if (rc == GS_OK)
        rc = procs_fit(c, all, err);
    free(local), free(all);
    if (rc != GS_OK) {
        free(c);
        return rc;
    }
    *out = c;
    return GS_OK;
}

json_t *gs_calib_procs_links(const gs_calib_procs *c)
{
    json_t *links = json_object();
    for (int cl = 0; cl < GS_CALIB_CLASS_COUNT; cl++) {
        json_t *o = json_object();
        for (int op = 0; op < GS_CAL_C_COUNT; op++) {
            if (!c->ok[cl][op])
                continue;
            if (op == GS_CAL_C_P2P) {
                json_object_set_new(o, gs_cal_c_names[op], gs_cal_fit_json(0, &c->fit[cl][op], 0));
            } else {
                json_t *arr = json_array();
                json_array_append_new(arr, gs_cal_fit_json(c->nranks[cl], &c->fit[cl][op], 0));
                json_object_set_new(o, gs_cal_c_names[op], arr);
            }
        }
        if (json_object_size(o))
            json_object_set_new(links, gs_calib_class_names[cl], o);
        else
            json_decref(o);
    }
    return links;
}

json_t *gs_calib_procs_measurements(const gs_calib_procs *c)
{
    json_t *m = json_object();
    json_object_set_new(m, "processes", json_integer(c->procs));
    json_object_set_new(m, "hosts", json_integer(c->hosts));
    json_object_set_new(m, "per_host", json_integer(c->regular ? c->per_host : 0));
    json_object_set_new(m, "placement",
                        json_string(c->regular == 1   ? "blocks"
                                    : c->regular == 2 ? "round robin"
                                                      : "other"));
    for (int cl = 0; cl < GS_CALIB_CLASS_COUNT; cl++) {
        json_t *o = json_object();
        for (int op = 0; op < GS_CAL_C_COUNT; op++) {
            if (!c->ok[cl][op])
                continue;
            json_t *arr = gs_cal_points_json(c->sizes, c->secs[cl][op], c->nsizes);
            json_t *byn = json_object();
            char k[24];
            snprintf(k, sizeof k, "%" PRIu64, op == GS_CAL_C_P2P ? 2 : c->nranks[cl]);
            json_object_set_new(byn, k, arr);
            json_object_set_new(o, gs_cal_c_names[op], byn);
        }
        if (json_object_size(o))
            json_object_set_new(m, gs_calib_class_names[cl], o);
        else
            json_decref(o);
    }
    return m;
}

void gs_calib_procs_free(gs_calib_procs *c)
{
    free(c);
}
