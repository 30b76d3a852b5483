/* worker.h - one worker thread: its epoll, its listening sockets, its
 * timeout queues and its pool of connection contexts.
 *
 * A worker owns the connections it accepted (each worker has its own
 * SO_REUSEPORT socket per listener, so no fd ever crosses threads) and runs
 * their coroutines. Everything in struct worker belongs to its thread except
 * `wake_fd`, which worker_wake() writes from any thread or signal handler.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "rt/conn.h"
#include "rt/tq.h"

struct worker;

struct worker_cfg {
    uint32_t keep_alive_s;      /* idle connection timeout */
    uint32_t request_timeout_s; /* a request must be complete by then */
    size_t in_cap;              /* request buffer per active connection */
    size_t stack_size;          /* coroutine stack */
    unsigned max_free_ctx;      /* pooled contexts kept per worker */
    uint32_t shutdown_grace_s;  /* in-flight requests get this long at shutdown */
    coro_fn conn_main;          /* the connection coroutine: fn(coro, struct conn_ctx *) */
    /* called for a connection whose request timed out while incomplete */
    void (*on_request_timeout)(struct worker *w, int fd);
    void *owner; /* the server, for conn_main */
};

/* Handed-over fds: one producer (the acceptor thread), one consumer (the
 * worker). Used only when accepting is done by a dedicated thread. */
#define FD_RING_SIZE 4096
struct fd_ring {
    _Atomic uint32_t head, tail;
    int fds[FD_RING_SIZE];
};

struct worker {
    const struct worker_cfg *cfg;
    struct conn *conns; /* the process-wide table, indexed by fd */
    uint32_t max_fds;
    unsigned idx;
    int epfd;
    int wake_fd;
    int spare_fd; /* released to accept-and-close when out of fds */
    int *listen_fds;
    unsigned n_listen;
    struct tq idle_q, req_q;
    uint32_t now;     /* seconds since the worker started (monotonic) */
    time_t wall_time; /* UTC seconds, as of the last wake-up */
    /* the HTTP layer's Date header, formatted once per second of wall_time */
    time_t date_time;  /* the second date_hdr shows */
    char date_hdr[48]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
    struct conn_ctx *free_ctx;
    unsigned n_free_ctx;
    uint32_t n_conns;
    atomic_bool stop_requested; /* set by worker_wake(), maybe in a signal handler */
    bool stopping;              /* the worker has begun its graceful stop */
    uint32_t stop_deadline;
    pthread_t thread;
    struct fd_ring *ring; /* NULL with per-worker SO_REUSEPORT sockets */
};

/* Set-up before the thread starts; listen_fds are taken over. 0 or -errno. */
int worker_init(struct worker *w, const struct worker_cfg *cfg, unsigned idx, struct conn *conns,
                uint32_t max_fds, int *listen_fds, unsigned n_listen);
void worker_destroy(struct worker *w);
void *worker_main(void *w);
/* Asks the worker to stop gracefully; async-signal-safe. */
void worker_wake(struct worker *w);

/* Acceptor-thread mode: the calling thread accepts on listen_fds and deals
 * each fd to workers[(fd / 2) % n] (neighbouring fds, whose table entries
 * share a cache line, land on the same worker). Returns when *stop is set
 * and wake_fd is written. */
void acceptor_run(struct worker *workers, unsigned n, const int *listen_fds, unsigned n_listen,
                  int wake_fd, volatile int *stop);

/* --- for the connection coroutine --------------------------------------- */

/* The I/O wrappers look synchronous: on EAGAIN they yield until epoll says
 * the socket is ready. A fatal error (reset, broken pipe) aborts the
 * coroutine: its defers run and the worker closes the connection.
 *
 * conn_read() appends to ctx->in; returns the byte count, 0 at end of
 * stream, or -EAGAIN when may_idle is set and nothing is there (the caller
 * then ends the coroutine so the connection goes idle without a stack). */
ssize_t conn_read(struct conn_ctx *ctx, bool may_idle);
/* Writes all of iov (modifies it). */
void conn_writev(struct conn_ctx *ctx, struct iovec *iov, int iovcnt);
void conn_write(struct conn_ctx *ctx, const void *p, size_t len);
/* Like conn_write, telling the kernel more follows (MSG_MORE). */
void conn_write_more(struct conn_ctx *ctx, const void *p, size_t len);
/* Sends ctx->out and empties it. */
void conn_flush(struct conn_ctx *ctx);
/* The same before the connection closes: the bytes wait (MSG_MORE) for the
 * FIN that shutdown() or close() adds, and both leave in one segment. Only
 * for a connection that is certain to close next. */
void conn_flush_last(struct conn_ctx *ctx);
/* sendfile() of len bytes from offset; the header must have gone first. */
void conn_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len);
