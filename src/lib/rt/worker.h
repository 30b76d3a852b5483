/* worker.h - one worker thread: its epoll, its listening sockets, its
 * timeout queues and its pool of connection contexts. It moves bytes and
 * keeps time; the protocol (struct conn_proto) gives them meaning.
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
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "base/tsan.h" /* COLIBRI_TSAN, for FD_SYNC() */
#include "rt/conn.h"
#include "rt/timer.h"
#include "rt/tq.h"

struct worker;

/* Work for a worker thread, queued by worker_post() from another thread. */
struct worker_cmd {
    void (*fn)(struct worker *w, void *arg);
    void (*drop)(void *arg); /* instead of fn, when the worker stopped first (or NULL) */
    void *arg;
    struct worker_cmd *next;
};

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
};

/* Handed-over fds: one producer (the acceptor thread), one consumer (the
 * worker). Used only when accepting is done by a dedicated thread. */
#define FD_RING_SIZE 4096
struct fd_ring {
    _Atomic uint32_t head, tail;
    struct {
        int fd;
        uint16_t listener; /* the index of the listening socket */
    } fds[FD_RING_SIZE];
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
    struct timer_heap timers; /* connections in conn_sleep()/conn_wait_fd() */
    /* the epoll_wait() batch being dispatched, [batch_next, batch_n) still
     * to come: conn_close() voids those that name the fd it closes */
    struct epoll_event *batch;
    int batch_next, batch_n;
    uint32_t now;            /* seconds since the worker started (monotonic) */
    time_t wall_time;        /* UTC seconds, as of the last wake-up */
    uint64_t mono_ns;        /* CLOCK_MONOTONIC_COARSE at the last wake-up */
    uint64_t wall_edge;      /* mono_ns at which wall_time's next second begins */
    bool tick_wanted;        /* the protocol asked for its tick (conn_want_tick) */
    time_t tick_time;        /* the second it asked in */
    struct conn_peer *peers; /* indexed by fd like conns, or NULL: not recorded */
    void *proto_state;       /* the protocol's per-worker slot: conn_worker_state() */
    struct conn_ctx *free_ctx;
    unsigned n_free_ctx;
    /* contexts kept by idle connections in conn_park(), oldest first: taken
     * back when the pool is empty */
    struct conn_ctx *parked_head, *parked_tail;
    uint32_t n_conns;
    atomic_bool stop_requested; /* set by worker_wake(), maybe in a signal handler */
    bool stopping;              /* the worker has begun its graceful stop */
    uint32_t stop_deadline;
    pthread_t thread;
    struct fd_ring *ring; /* NULL with per-worker SO_REUSEPORT sockets */
    /* worker_post(): commands for the thread, run when it is woken */
    pthread_mutex_t cmd_lock;
    struct worker_cmd *cmds, **cmds_tail;
    atomic_bool has_cmds;
    /* worker_quiesce(): every context allocated, how many are held (were
     * in use at the call and have not come back), what runs when none is */
    struct conn_ctx *all_ctx;
    uint32_t n_held;
    struct worker_cmd *quiesced;
};

/* Set-up before the thread starts; listen_fds are taken over. 0 or -errno.
 * A connection accepted on listen_fds[i] (or handed over from the
 * acceptor's listen_fds[i]) carries i as its conn_ctx.listener. */
int worker_init(struct worker *w, const struct worker_cfg *cfg, unsigned idx, struct conn *conns,
                uint32_t max_fds, int *listen_fds, unsigned n_listen);
void worker_destroy(struct worker *w);
void *worker_main(void *w);
/* Asks the worker to stop gracefully; async-signal-safe. */
void worker_wake(struct worker *w);

/* A command for worker_post() or worker_quiesce(), allocated ahead so
 * that giving it cannot fail (a reload allocates before it commits).
 * NULL when out of memory. */
struct worker_cmd *worker_cmd_new(void (*fn)(struct worker *w, void *arg), void (*drop)(void *arg),
                                  void *arg);
/* Runs c->fn(w, c->arg) on the worker's thread, outside every connection,
 * at its next wake-up (which this causes; async-signal-unsafe). Commands
 * run in the order posted, and are freed after. A worker that has
 * stopped never runs them: worker_destroy() calls drop(arg) instead. */
void worker_post(struct worker *w, struct worker_cmd *c);
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

/* Acceptor-thread mode: one thread accepts on every listener and deals
 * each fd to workers[(fd / 2) % n] (neighbouring fds, whose table entries
 * share a cache line, land on the same worker). Its listeners may change
 * while it runs (a reload): changes are queued from any thread and made by
 * the acceptor itself between two waits, so it never accepts on an fd
 * that is being closed. */
/* A connection's table entries (conns[fd], peers[fd]) belong to the thread
 * that holds the fd. One worker closes it and the kernel may give the same
 * number to another thread's next accept(): close() returning before that
 * accept() orders the two, an edge TSan cannot see, so it is said here. The
 * keys are mere addresses, one byte per fd modulo the array's size. */
#ifdef COLIBRI_TSAN
extern char fd_sync[4096]; /* rt/accept.c */
#define FD_SYNC(fd) (&fd_sync[(unsigned)(fd) % sizeof(fd_sync)])
#else
#define FD_SYNC(fd) NULL
#endif

/* rt/accept.c: an fd held in reserve, for accept_one() to make room with
 * when the process is out of fds (an eventfd: no file system needed). */
int spare_open(void);
/* One connection from the listening socket lfd (non-blocking, its peer
 * recorded in peers[fd] when peers is given), or -1 when there is none to
 * take now. */
int accept_one(int lfd, int *spare, struct conn_peer *peers, uint32_t max_fds);

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
int acceptor_run(struct acceptor *a, struct worker *workers, unsigned n, volatile int *stop);
/* Closes every listener it still holds (new connections are refused at
 * once) and frees what is queued. */
void acceptor_destroy(struct acceptor *a);

/* --- inside the runtime (worker.c, wait.c) ------------------------------------ */

/* epoll_event.data.u64: the fd in the low 32 bits, plus a tag for what is
 * not a connection: a listening socket (its index in bits 40-55), the
 * wake-up eventfd, or a foreign fd a connection waits on (conn_wait_fd:
 * the connection's fd below, the foreign fd in bits 40-63) */
#define EV_LISTEN           (1ull << 32)
#define EV_WAKE             (2ull << 32)
#define EV_FOREIGN          (4ull << 32)
#define EV_VOID             (8ull << 32) /* an event voided in its batch (worker.c) */
#define EV_FD(u)            ((int)(uint32_t)(u))
#define EV_LISTENER(u)      ((uint16_t)((u) >> 40))
#define EV_LISTEN_AT(i)     (EV_LISTEN | (uint64_t)(uint16_t)(i) << 40)
#define EV_FOREIGN_MAX      (1 << 24)
#define EV_FOREIGN_FD(u)    ((int)((u) >> 40))
#define EV_FOREIGN_OF(f, c) (EV_FOREIGN | (uint64_t)(f) << 40 | (uint32_t)(c))

/* Ends a connection's conn_sleep()/conn_wait_fd() without resuming it: the
 * timer is disarmed, the foreign fd leaves epoll. */
void wait_cleanup(struct worker *w, struct conn_ctx *ctx);

/* cmd.c: the commands posted, run on the worker's wake-up; a held
 * context's run ended (ctx_put, ctx_destroy), which ends the grace period
 * with the last one; a pending worker_quiesce() dropped when the stop
 * begins; everything freed at worker_destroy(). */
void run_cmds(struct worker *w);
void quiesce_release(struct worker *w, struct conn_ctx *ctx);
void quiesce_drop(struct worker *w);
void cmds_destroy(struct worker *w);

/* --- for the protocol ------------------------------------------------------ */

/* The monotonic clock in milliseconds: the clock of conn_sleep() and
 * conn_wait_fd() (a protocol counts its own deadlines on it). */
uint64_t worker_now_ms(void);

/* Whether the worker was asked to stop: answers should close. Read with
 * stop_requested, not stopping: a request can finish in the same epoll
 * batch as the wake-up that will begin the stop. */
static inline bool conn_stopping(const struct conn_ctx *ctx)
{
    return atomic_load_explicit(&ctx->worker->stop_requested, memory_order_relaxed);
}
/* The protocol's per-worker slot (proto_state, set before the thread starts). */
static inline void *conn_worker_state(const struct conn_ctx *ctx)
{
    return ctx->worker->proto_state;
}
/* Asks for the protocol's tick at the worker's first wake-up in a later
 * second (see struct conn_proto); a store, no system call. */
static inline void conn_want_tick(const struct conn_ctx *ctx)
{
    struct worker *w = ctx->worker;
    if (!w->tick_wanted) {
        w->tick_wanted = true;
        w->tick_time = w->wall_time;
    }
}
/* The index of the listener that accepted the connection (the runtime
 * gives it no meaning; a protocol may tell listeners apart by it). */
static inline unsigned conn_listener(const struct conn_ctx *ctx)
{
    return ctx->worker->conns[ctx->fd].listener;
}
/* The peer of the connection (family 0 when unknown). */
static inline const struct conn_peer *conn_peer_of(const struct conn_ctx *ctx)
{
    static const struct conn_peer none;
    const struct worker *w = ctx->worker;
    return w->peers ? &w->peers[ctx->fd] : &none;
}
/* Replaces the peer the runtime recorded at accept() (a PROXY header names
 * the real client); it stays for the connection's life. */
static inline void conn_set_peer(struct conn_ctx *ctx, const struct conn_peer *peer)
{
    if (ctx->worker->peers)
        ctx->worker->peers[ctx->fd] = *peer;
}
/* UTC seconds as of the worker's last wake-up (no system call). */
static inline time_t conn_wall_time(const struct conn_ctx *ctx)
{
    return ctx->worker->wall_time;
}
/* worker_now_ms() as of the worker's last wake-up: no clock read, for a
 * clock wanted per request that may lag by the time since (the cache's
 * expiry in serve_files). */
static inline uint64_t conn_now_ms(const struct conn_ctx *ctx)
{
    const struct worker *w = ctx->worker;
    return w->mono_ns / 1000000;
}
