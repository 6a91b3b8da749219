/* The step loop of `gridstep exec` and `gridstep compare`: each step run on the exec session,
 * its loss and time kept and reported as progress; for exec the non-finite checks, the
 * periodic saves (--save, --save-every) and the stop on Ctrl-C or SIGTERM (cli/exec_signals.c)
 * with its message naming the last step and checkpoint. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "cli/exec_cmd.h"
#include "cli/progress.h"
#include "exec/exec.h"

/* After step i + 1 of steps (loss: its loss): a loss, parameter or Adam moment that is NaN or
 * infinite stops the run (exit 1, naming the step and the tensor) unless sp allows it (then one
 * warning). The state is scanned every step where it is in host memory, else before a save and
 * after the last step. */
static gs_status check_finite(gs_exec_session *x, gs__exec_save_plan *sp, uint64_t i, uint64_t steps,
                              double loss, gs_error *err)
{
    char when[64];
    uint64_t step = gs_train_step(gs_exec_session_train(x));
    int saving = sp->dir && (i + 1 == steps || (sp->every && (i + 1) % sp->every == 0));
    snprintf(when, sizeof when, "step %" PRIu64, step);
    gs_status rc = GS_OK;
    if (!isfinite(loss))
        rc = gs_error_set(err, GS_ERR_RUNTIME, "%s: the loss is %s; the run stops (--allow-nonfinite continues)", when,
                          isnan(loss) ? "NaN" : "infinite");
    else
        rc = gs_exec_session_check_finite(x, when, saving || i + 1 == steps, GS_ERR_RUNTIME, err);
    if (rc != GS_OK && sp->allow_nonfinite) {
        if (!sp->warned)
            fprintf(stderr, "gridstep: warning: %s (continuing: --allow-nonfinite; said once)\n", err->msg);
        sp->warned = 1;
        rc = GS_OK;
    }
    return rc;
}

/* done: the last optimizer step completed; x (may be NULL): the session whose next step was
 * stopped part-way (its progress is said). */
static gs_status interrupted_error(const gs__exec_save_plan *sp, uint64_t done, gs_exec_session *x, gs_error *err)
{
    char where[160] = "";
    if (x) {
        uint64_t ev = 0, total = 0;
        gs_exec_session_progress(x, &ev, &total);
        snprintf(where, sizeof where, "; step %" PRIu64 " was stopped with %" PRIu64 " of its %" PRIu64
                 " events done", done + 1, ev, total);
    }
    if (sp && sp->dir && sp->saved_step)
        return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64 "; last checkpoint %s (step %" PRIu64
                            ") is intact%s", done, sp->dir, sp->saved_step, where);
    if (sp && sp->dir)
        return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64 "; no checkpoint written to %s%s",
                            done, sp->dir, where);
    return gs_error_set(err, GS_ERR_RUNTIME, "interrupted after step %" PRIu64 "%s", done, where);
}

gs_status gs__exec_run_steps(gs_exec_session *x, const gs__exec_step_loop *l, uint64_t *done, gs_error *err)
{
    uint64_t steps = l->steps;
    double *loss = l->loss, *secs = l->secs;
    gs__exec_save_plan *sp = l->sp;
    int across = l->across;
    *done = 0;
    for (uint64_t i = 0; i < steps; i++) {
        /* across processes the signal reaches them at different times: a process that skipped
         * the step would leave the others in its collectives, so the step runs and the abort
         * (the watcher's, announced to every process) fails it everywhere */
        if (gs__exec_interrupted() && !across)
            return interrupted_error(sp, gs_train_step(gs_exec_session_train(x)), NULL, err);
        gs_status rc = gs_exec_session_step(x, &loss[i], &secs[i], NULL, err);
        if (rc != GS_OK && gs__exec_interrupted()) {
            /* the abort undid nothing: the failed step's state is torn, the checkpoint is not */
            return interrupted_error(sp, gs_train_step(gs_exec_session_train(x)) - 1, x, err);
        }
        if (rc != GS_OK)
            return rc;
        if (sp && (rc = check_finite(x, sp, i, steps, loss[i], err)) != GS_OK)
            return rc;
        char what[96];
        snprintf(what, sizeof what, "loss %.6f, last step %.3f s", loss[i], secs[i]);
        gs_progress_update(l->prog, i + 1, steps, what);
        *done = i + 1;
        if (sp && sp->dir && (i + 1 == steps || (sp->every && (i + 1) % sp->every == 0))) {
            if ((rc = gs_exec_session_save(x, sp->dir, err)) != GS_OK) {
                sp->failed = 1;
                return rc;
            }
            sp->saved_step = gs_train_step(gs_exec_session_train(x));
        }
    }
    return GS_OK;
}
