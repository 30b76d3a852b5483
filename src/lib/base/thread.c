/* thread.c - helper threads (see thread.h). */
#include "base/thread.h"

int thread_start_helper(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, THREAD_SYNC_SIGNAL);
    /* the seccomp filter's trap: blocked, the kernel would kill the
     * process instead of running the handler */
    sigdelset(&all, SIGSYS);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}
