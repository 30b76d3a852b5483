/* thread.h - helper threads (a cache's pruner, a file watcher): started
 * with the server's signals blocked, so that SIGTERM, SIGHUP and the
 * others reach the threads that handle them. Two stay open for the
 * sandbox (server/sandbox.c). */
#pragma once

#include <pthread.h>
#include <signal.h>

/* The one signal a helper thread leaves unblocked: sent to every thread
 * that exists when the sandbox closes (server/sandbox.c), which then
 * restricts itself, since Landlock binds only the thread that asks. */
#define THREAD_SYNC_SIGNAL (SIGRTMIN + 7)

/* pthread_create(t, NULL, fn, arg) with every signal but
 * THREAD_SYNC_SIGNAL and SIGSYS (the sandbox's trap) blocked in the new
 * thread. 0 or a positive errno, as
 * pthread_create returns. */
int thread_start_helper(pthread_t *t, void *(*fn)(void *), void *arg);
