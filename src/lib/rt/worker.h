/* worker.h - the worker threads, as the server that owns them sees them:
 * creating, starting, stopping and reconfiguring them. Each worker has its
 * epoll, its listening sockets, its timeout queues and its pool of
 * connection contexts; it moves bytes and keeps time, and the protocol
 * (struct conn_proto, rt/conn.h) gives them meaning.
 *
 * A worker owns the connections it accepted (each worker has its own
 * SO_REUSEPORT socket per listener, or takes the fds an acceptor thread
 * deals it: rt/accept.h), so no connection ever crosses threads, and runs
 * their coroutines. struct worker itself is the runtime's (rt/internal.h).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rt/conn.h"

struct worker_cfg {
    uint32_t keep_alive_s;          /* idle connection timeout */
    uint32_t request_timeout_s;     /* a request must be complete by then */
    size_t in_cap;                  /* request buffer per active connection */
    size_t stack_size;              /* coroutine stack */
    unsigned max_free_ctx;          /* pooled contexts kept per worker */
    uint32_t shutdown_grace_s;      /* in-flight requests get this long at shutdown */
    const struct conn_proto *proto; /* what every connection speaks */
    /* by listener index, or NULL: the workers' listen fds for it are dups
     * of one socket, registered with EPOLLEXCLUSIVE */
    const bool *listen_shared;
    /* accept = thread: the workers accept nothing themselves; an acceptor
     * thread (rt/accept.h) hands them fds */
    bool handed_fds;
};

/* A worker, set up but not running; listen_fds (n_listen of them, with
 * handed_fds none) are taken over. A connection accepted on listen_fds[i]
 * (or handed over from the acceptor's listen_fds[i]) carries i as its
 * conn_listener(). conns and peers (or NULL: peers not recorded) are the
 * process-wide tables indexed by fd, max_fds entries; proto_state is the
 * protocol's per-worker slot (conn_worker_state()). 0 or -errno; on
 * failure *out is NULL and nothing is left to free but listen_fds. */
int worker_new(struct worker **out, const struct worker_cfg *cfg, unsigned idx, struct conn *conns,
               struct conn_peer *peers, uint32_t max_fds, int *listen_fds, unsigned n_listen,
               void *proto_state);
/* Runs the worker on a thread of its own (0 or -errno); worker_join()
 * waits for that thread to end (after worker_wake()). */
int worker_start(struct worker *w);
void worker_join(struct worker *w);
/* Frees a worker that is not running (or NULL). */
void worker_free(struct worker *w);
/* Asks the worker to stop gracefully; async-signal-safe. */
void worker_wake(struct worker *w);
/* What worker_new() was given: the index, the protocol's slot. */
unsigned worker_index(const struct worker *w);
void *worker_proto_state(const struct worker *w);

/* On the worker's thread (inside a posted command): runs c->fn(w, c->arg)
 * once every connection run in progress now (a coroutine suspended in a
 * wait) has ended; at once when there is none. Connections started later
 * do not delay it: a grace period, as RCU calls it. The context of each
 * run in progress is marked; the last marked one to come back to the pool
 * ends the grace period (a test of that mark per request). c is dropped
 * unrun if the worker stops first. Takes c. */
void worker_quiesce(struct worker *w, struct worker_cmd *c);
/* On the worker's thread: starts accepting on fd, a listening socket that
 * connections then report as listener index idx (shared: dups of one
 * socket, see worker_cfg.listen_shared); the worker owns fd from here on.
 * Or stops accepting on the listener idx and closes its fd. 0 or -errno. */
int worker_add_listener(struct worker *w, unsigned idx, int fd, bool shared);
void worker_remove_listener(struct worker *w, unsigned idx);
