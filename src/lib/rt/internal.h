/* internal.h - the runtime's private declarations: struct worker and what
 * the files of rt/ share about it. Nothing outside rt/ includes this
 * (scripts/layers.py checks it): a protocol sees rt/conn.h, the server
 * rt/worker.h and rt/accept.h.
 *
 * Everything in struct worker belongs to its thread except `wake_fd`, which
 * worker_wake() writes from any thread or signal handler, and
 * `view.stop_requested`, set there. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

#include "base/tsan.h" /* COLIBRI_TSAN, for FD_SYNC() */
#include "rt/conn.h"
#include "rt/timer.h"
#include "rt/tq.h"
#include "rt/worker.h"

/* Handed-over fds: one producer (the acceptor thread), one consumer (the
 * worker). Only with worker_cfg.handed_fds. */
#define FD_RING_SIZE 4096
struct fd_ring {
    _Atomic uint32_t head, tail;
    struct {
        int fd;
        uint16_t listener; /* the index of the listening socket */
    } fds[FD_RING_SIZE];
};

struct worker {
    struct conn_worker view; /* first: what rt/conn.h's inline functions read */
    const struct worker_cfg *cfg;
    uint32_t max_fds;
    unsigned idx;
    int epfd;
    int wake_fd;
    int spare_fd; /* released to accept-and-close when out of fds (-1 with handed_fds) */
    int *listen_fds;
    unsigned n_listen;
    struct tq idle_q, req_q;
    struct timer_heap timers; /* connections in conn_sleep()/conn_wait_fd() */
    bool idle_tick;           /* the idle handler's tick was asked for (conn_want_idle_tick) */
    /* the epoll_wait() batch being dispatched, [batch_next, batch_n) still
     * to come: conn_close() voids those that name the fd it closes */
    struct epoll_event *batch;
    int batch_next, batch_n;
    uint32_t now;       /* seconds since the worker started (monotonic) */
    uint64_t wall_edge; /* view.mono_ns at which view.wall_time's next second begins */
    struct conn_ctx *free_ctx;
    unsigned n_free_ctx;
    /* contexts kept by idle connections in conn_park(), oldest first: taken
     * back when the pool is empty */
    struct conn_ctx *parked_head, *parked_tail;
    uint32_t n_conns;
    bool stopping; /* the worker has begun its graceful stop */
    uint32_t stop_deadline;
    pthread_t thread;
    bool started;         /* thread runs worker_main() */
    struct fd_ring *ring; /* with handed_fds only */
    /* worker_post(): commands for the thread, run when it is woken */
    pthread_mutex_t cmd_lock;
    struct worker_cmd *cmds, **cmds_tail;
    atomic_bool has_cmds;
    /* worker_quiesce(): every context allocated, how many are held (were
     * in use at the call and have not come back), what runs when none is */
    struct conn_ctx *all_ctx;
    uint32_t n_held;
    struct worker_cmd *quiesced;
    /* connection counts for the metrics (stats.c): kept by the thread with
     * plain increments (accepted once per connection, dropped when one is
     * refused), published as a snapshot when a scrape asks */
    uint64_t accepted, dropped;
    struct conn_stats_pub {
        _Atomic uint64_t accepted, handled, gen;
        _Atomic uint32_t active, reading, writing, waiting;
    } pub;
    struct worker *stats_next; /* the workers a scrape asks */
};
static_assert(offsetof(struct worker, view) == 0, "conn_worker_of() casts");

/* The thread's body: the loop, until the stop (worker_wake) is done. */
void *worker_main(void *w);
/* worker.c, for worker_life.c */
void worker_first_clocks(struct worker *w);
void worker_free_pool(struct worker *w);

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

/* accept.c: an fd held in reserve, for accept_one() to make room with
 * when the process is out of fds (an eventfd: no file system needed). */
int spare_open(void);
/* One connection from the listening socket lfd (non-blocking, its peer
 * recorded in peers[fd] when peers is given), or -1 when there is none to
 * take now. */
int accept_one(int lfd, int *spare, struct conn_peer *peers, uint32_t max_fds);

/* epoll_event.data.u64: the fd in the low 32 bits, plus a tag for what is
 * not a connection: a listening socket (its index in bits 40-55), the
 * wake-up eventfd, or a foreign fd a connection waits on (conn_wait_fd:
 * the connection's fd below, the foreign fd in bits 40-63) */
#define EV_LISTEN           (1ull << 32)
#define EV_WAKE             (2ull << 32)
#define EV_FOREIGN          (4ull << 32)
#define EV_VOID             (8ull << 32)  /* an event voided in its batch (worker.c) */
#define EV_IDLE             (16ull << 32) /* a kept fd no one waits on, in the low 32 bits */
#define EV_KEPT             (32ull << 32) /* with EV_FOREIGN: a kept fd's wait, the fd in both halves */
#define EV_FD(u)            ((int)(uint32_t)(u))
#define EV_LISTENER(u)      ((uint16_t)((u) >> 40))
#define EV_LISTEN_AT(i)     (EV_LISTEN | (uint64_t)(uint16_t)(i) << 40)
#define EV_FOREIGN_MAX      (1 << 24)
#define EV_FOREIGN_FD(u)    ((int)((u) >> 40))
#define EV_FOREIGN_OF(f, c) (EV_FOREIGN | (uint64_t)(f) << 40 | (uint32_t)(c))

/* wait.c: the idle handler (conn_set_idle_handler), or NULL. */
extern _Atomic(conn_idle_fn) worker_idle_fn;
static inline conn_idle_fn worker_idle_handler(void)
{
    return atomic_load_explicit(&worker_idle_fn, memory_order_acquire);
}

/* worker.c: a context from the pool (a parked one taken back when it is
 * empty), NULL when out of memory; and one given back (or freed). */
struct conn_ctx *worker_ctx_get(struct worker *w);
void worker_ctx_put(struct worker *w, struct conn_ctx *ctx);

/* conn.c: suspends the coroutine until the socket is ready for what
 * (CONN_WAIT_READ or CONN_WAIT_WRITE), under the request timeout. */
void conn_wait_io(struct conn_ctx *ctx, int what);
/* conn.c: conn_write() of a part of something longer, with after bytes of
 * it still to come: if the connection fails meanwhile, ctx->unsent counts
 * them too (tls.c's file sends go out in parts). */
void conn_write_part(struct conn_ctx *ctx, const void *p, size_t len, size_t after);

/* wait.c: ends a connection's conn_sleep()/conn_wait_fd() without resuming
 * it: the timer is disarmed, the foreign fd leaves epoll. */
void wait_cleanup(struct worker *w, struct conn_ctx *ctx);
/* How far CLOCK_MONOTONIC_COARSE may lag the real clock, in ms: what a
 * timer adds so that a wait never ends early. */
uint64_t wait_coarse_lag_ms(void);

/* cmd.c: the commands posted, run on the worker's wake-up; a held
 * context's run ended (ctx_put, ctx_destroy), which ends the grace period
 * with the last one; a pending worker_quiesce() dropped when the stop
 * begins; everything freed at worker_free(). */
void run_cmds(struct worker *w);
void quiesce_release(struct worker *w, struct conn_ctx *ctx);
void quiesce_drop(struct worker *w);
void cmds_destroy(struct worker *w);

/* stats.c: the worker joins (or leaves) the set conn_stats() asks. */
void stats_register(struct worker *w);
void stats_unregister(struct worker *w);
