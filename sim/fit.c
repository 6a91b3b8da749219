/* Simulating published runs under a set of fitted constants, and fitting those constants with
 * GSL's Nelder-Mead simplex (gsl_multimin_fminimizer_nmsimplex2) on the mean squared log error
 * of the predicted metric: log(predicted / published) treats too fast and too slow alike. */
#include "sim/fit.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>

#include "engine/report.h"
#include "sim/compute.h"
#include "sim/sim.h"

#define GS_FIT_PARAMS 2
#define GS_FIT_MAX_ITER 30
#define GS_FIT_SIZE_TOL 5e-3

/* The physical ranges (sim/compute.c): HBM bytes per bus byte of a concurrent collective, and
 * the sustained fraction of the MAMF. */
static const double lo[GS_FIT_PARAMS] = {0.0, 0.6};
static const double hi[GS_FIT_PARAMS] = {6.0, 1.05};

/* The runs are simulated by GS_FIT_THREADS threads taking the next index in turn; each run's
 * result depends on its own scenario only, so the order does not change what is computed. */
#define GS_FIT_THREADS 4

typedef struct sim_job {
    gs_fit_run *runs;
    size_t n;
    const unsigned char *use;
    const gs_fit_params *p;
    int exact;
    char (*failure)[GS_ERROR_MSG_BYTES];
    size_t next; /* next index to take, under lock */
    pthread_mutex_t lock;
} sim_job;

static void simulate_one(sim_job *j, size_t i)
{
    gs_fit_run *r = &j->runs[i];
    gs_backend_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.fit = j->p;
    gs_report rep;
    gs_error serr;
    gs_error_init(&serr);
    r->ok = 0;
    gs_status st = gs_sim_scenario(r->s, r->mesh, j->exact, &bo, &rep, NULL, &serr);
    if (st != GS_OK) {
        if (j->failure)
            snprintf(j->failure[i], GS_ERROR_MSG_BYTES, "%s", serr.msg[0] ? serr.msg : gs_status_name(st));
        return;
    }
    r->predicted = gs_expect_predicted(r->e, r->s, &rep);
    r->step_time_s = rep.step_time_s;
    r->error = gs_expect_error(r->e, r->predicted);
    r->fits_memory = rep.peak_bytes <= r->s->cluster.gpu.hbm_bytes;
    r->ok = r->predicted > 0.0;
    gs_report_fini(&rep);
}

static void *sim_worker(void *arg)
{
    sim_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next;
        while (i < j->n && j->use && !j->use[i])
            i++;
        j->next = i + 1;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->n)
            return NULL;
        simulate_one(j, i);
    }
}

gs_status gs_fit_simulate(gs_fit_run *runs, size_t n, const unsigned char *use, const gs_fit_params *p, int exact,
                          char (*failure)[GS_ERROR_MSG_BYTES], gs_error *err)
{
    sim_job j = {runs, n, use, p, exact, failure, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[GS_FIT_THREADS];
    int started = 0;
    (void)err;
    for (int k = 0; k < GS_FIT_THREADS; k++)
        if (pthread_create(&th[k], NULL, sim_worker, &j) == 0)
            started++;
    if (started == 0)
        sim_worker(&j); /* no thread could start: this one does the work */
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    return GS_OK;
}

typedef struct fit_ctx {
    gs_fit_run *runs;
    size_t n;
    const unsigned char *use;
    gs_status st;
    gs_error *err;
} fit_ctx;

static double clampd(double x, double a, double b)
{
    return x < a ? a : x > b ? b : x;
}

static void to_params(const gsl_vector *v, gs_fit_params *p, double *penalty)
{
    double x[GS_FIT_PARAMS];
    *penalty = 0.0;
    for (int k = 0; k < GS_FIT_PARAMS; k++) {
        double raw = gsl_vector_get(v, (size_t)k);
        x[k] = clampd(raw, lo[k], hi[k]);
        *penalty += (raw - x[k]) * (raw - x[k]); /* steer the simplex back into the range */
    }
    p->overlap_hbm_per_byte = x[0] > 0.0 ? x[0] : 1e-9; /* 0 means "default" in gs_fit_params */
    p->gemm_sustained = x[1];
}

/* How many used, simulated runs share run i's source (its expect.dataset). */
static size_t source_count(const fit_ctx *c, size_t i)
{
    size_t k = 0;
    for (size_t j = 0; j < c->n; j++)
        if ((!c->use || c->use[j]) && c->runs[j].ok && strcmp(c->runs[j].e->dataset, c->runs[i].e->dataset) == 0)
            k++;
    return k ? k : 1;
}

/* The mean over sources of each source's mean squared log error: every source weighs the same,
 * however many rows it published (one table of 200 rows would otherwise decide the fit). */
static double objective(const gsl_vector *v, void *arg)
{
    fit_ctx *c = arg;
    gs_fit_params p;
    double penalty, sum = 0.0, sources = 0.0;
    to_params(v, &p, &penalty);
    gs_status st = gs_fit_simulate(c->runs, c->n, c->use, &p, 0, NULL, c->err);
    if (st != GS_OK && c->st == GS_OK)
        c->st = st;
    for (size_t i = 0; i < c->n; i++) {
        if ((c->use && !c->use[i]) || !c->runs[i].ok)
            continue;
        /* log(predicted / published) is the same measure of the step time's error for every
         * metric up to its sign, which the square drops */
        double l = log(c->runs[i].predicted / c->runs[i].e->value), w = 1.0 / (double)source_count(c, i);
        sum += w * l * l;
        sources += w;
    }
    return (sources > 0.0 ? sum / sources : 0.0) + 10.0 * penalty;
}

gs_status gs_fit_params_fit(gs_fit_run *runs, size_t n, const unsigned char *use, gs_fit_params *out,
                            double *loss_out, gs_error *err)
{
    gs_status rc = GS_OK;
    fit_ctx c = {runs, n, use, GS_OK, err};
    gsl_multimin_function f = {objective, GS_FIT_PARAMS, &c};
    gsl_vector *x = gsl_vector_alloc(GS_FIT_PARAMS), *step = gsl_vector_alloc(GS_FIT_PARAMS);
    gsl_multimin_fminimizer *s = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, GS_FIT_PARAMS);
    gs_fit_params d;
    gs_fit_params_defaults(&d);
    if (!x || !step || !s) {
        rc = gs_error_set(err, GS_ERR_NOMEM, "fit: out of memory");
        goto out;
    }
    gsl_vector_set(x, 0, d.overlap_hbm_per_byte);
    gsl_vector_set(x, 1, d.gemm_sustained);
    gsl_vector_set(step, 0, 1.0);
    gsl_vector_set(step, 1, 0.05);
    if (gsl_multimin_fminimizer_set(s, &f, x, step) != GSL_SUCCESS) {
        rc = gs_error_set(err, GS_ERR_RUNTIME, "fit: the simplex could not start");
        goto out;
    }
    for (int it = 0; it < GS_FIT_MAX_ITER; it++) {
        if (gsl_multimin_fminimizer_iterate(s) != GSL_SUCCESS)
            break;
        if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(s), GS_FIT_SIZE_TOL) == GSL_SUCCESS)
            break;
    }
    if (c.st != GS_OK) {
        rc = c.st;
        goto out;
    }
    double penalty;
    to_params(s->x, out, &penalty);
    if (loss_out)
        *loss_out = s->fval;
    /* leave the runs as the optimum predicts them */
    rc = gs_fit_simulate(runs, n, use, out, 0, NULL, err);
out:
    if (s)
        gsl_multimin_fminimizer_free(s);
    if (x)
        gsl_vector_free(x);
    if (step)
        gsl_vector_free(step);
    return rc;
}
