/* accept.h - the acceptor thread of `accept = thread`: one thread accepts
 * on every listener and deals each fd to workers[(fd / 2) % n]
 * (neighbouring fds, whose table entries share a cache line, land on the
 * same worker). Its listeners may change while it runs (a reload): changes
 * are queued from any thread and made by the acceptor itself between two
 * waits, so it never accepts on an fd that is being closed. The workers
 * must have been made with worker_cfg.handed_fds. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rt/worker.h"

struct acceptor_change;
struct acceptor {
    int wake_fd; /* written to wake it: a stop, or changes queued */
    pthread_mutex_t lock;
    struct acceptor_change *changes; /* queued, oldest first */
    int *fds;                        /* by listener index; -1: none */
    unsigned n_fds;
};
void acceptor_init(struct acceptor *a, int wake_fd);
/* Accept on fd (taken) as listener idx from now on; 0 or -ENOMEM. */
int acceptor_add_listener(struct acceptor *a, unsigned idx, int fd);
/* Stop accepting on listener idx and close its fd. */
void acceptor_remove_listener(struct acceptor *a, unsigned idx);
/* Runs on the calling thread until *stop is set and wake_fd written: 0,
 * or -errno at once when it cannot start (the caller stops the server). */
int acceptor_run(struct acceptor *a, struct worker *const *workers, unsigned n, atomic_int *stop);
/* Closes every listener it still holds (new connections are refused at
 * once) and frees what is queued. */
void acceptor_destroy(struct acceptor *a);

/* max_connections_per_client: process-wide, set before the workers start
 * (0: no limit; the default). Connections are counted per client address
 * at accept, in a table of ACCEPT_CLIENT_SLOTS counters (addresses that
 * share a counter share the limit: with this many, rarely), and one beyond
 * max is closed at once, counted and logged (rate-limited). 0 or -ENOMEM. */
#define ACCEPT_CLIENT_SLOTS 65536u
int accept_client_limit(uint32_t max, uint32_t max_fds);
/* Before an accepted fd is closed: its client's count goes down. */
void accept_client_release(int fd);
/* Connections closed at accept for their client's count so far. */
uint64_t accept_client_refused(void);
