/* thread.c - helper threads (see thread.h). */
#include "base/thread.h"

int thread_start_helper(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, THREAD_SYNC_SIGNAL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}
