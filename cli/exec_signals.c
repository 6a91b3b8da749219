/* Ctrl-C and SIGTERM while `gridstep exec` runs. The handler only records the signal. SIGINT and
 * SIGTERM are blocked in every thread but a watcher, which turns the flag into an abort of the
 * exec session (so a long step's waits return at once); the step loop (cli/exec_steps.c) checks
 * the flag between steps. Checkpoint writes happen on the main thread, which never takes the
 * signal, so a save is never cut short: it completes or fails as a whole. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cli/exec_cmd.h"
#include "exec/exec.h"

/* The signal that stopped the run (0: none). Lock-free atomic: set by the handler, read by the
 * watcher thread (a volatile sig_atomic_t is only defined for a handler and the thread it
 * interrupted). */
static atomic_int interrupted;

static void on_sigint(int sig)
{
    int saved = errno;
    atomic_store(&interrupted, sig);
    errno = saved;
}

/* The signals that stop a run: Ctrl-C, and the SIGTERM a batch system or launcher sends first. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

static void *watch_main(void *arg)
{
    gs__exec_sigwatch *w = arg;
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    const struct timespec nap = {0, 20 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int done = w->done;
        pthread_mutex_unlock(&w->mu);
        if (done)
            break;
        int sig = atomic_load(&interrupted);
        if (sig) {
            gs_exec_session_abort(w->x, sig == SIGTERM ? "interrupted (SIGTERM)" : "interrupted (SIGINT)");
            break;
        }
        nanosleep(&nap, NULL);
    }
    return NULL;
}

void gs__exec_sigwatch_block(gs__exec_sigwatch *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    atomic_store(&interrupted, 0);
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, &w->old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &w->old_int);
    sigaction(SIGTERM, &sa, &w->old_term);
}

void gs__exec_sigwatch_start(gs__exec_sigwatch *w, gs_exec_session *x)
{
    w->x = x;
    w->started = pthread_create(&w->th, NULL, watch_main, w) == 0;
}

void gs__exec_sigwatch_restore(gs__exec_sigwatch *w)
{
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
    }
    sigaction(SIGINT, &w->old_int, NULL);
    sigaction(SIGTERM, &w->old_term, NULL);
    pthread_sigmask(SIG_SETMASK, &w->old_mask, NULL);
    pthread_mutex_destroy(&w->mu);
}

int gs__exec_interrupted(void)
{
    return atomic_load(&interrupted);
}
