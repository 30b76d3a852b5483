/* conn.h - a connection as the runtime sees it: a socket, two buffers, a
 * coroutine and a deadline. What the bytes mean belongs to the protocol
 * above (struct conn_proto), which keeps its own state in a slot of the
 * connection context that the runtime allocates and never looks into.
 *
 * conns[fd] is one 32-byte entry per possible file descriptor, allocated once
 * at start-up for the raised fd limit; the fd is the index and is never
 * stored. An idle keep-alive connection owns nothing but its entry: the
 * coroutine stack and the buffers live in a struct conn_ctx taken from the
 * worker's pool when bytes arrive; between requests the connection keeps it
 * only on loan (conn_park()): the worker takes it back when another
 * connection needs one and the pool is empty. Only the worker that
 * accepted a connection touches its entry.
 *
 * This header is the whole of the runtime a protocol sees: the
 * connection, its I/O and waits, the worker's clocks and slots as read
 * through the connection, and commands for another worker's thread. The
 * server's side is rt/worker.h and rt/accept.h; rt/internal.h is the
 * runtime's own.
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/common.h"
#include "base/strbuf.h"
#include "base/coro.h"
#include "rt/sys.h"
#include "rt/timer.h"

struct worker;
struct tls_server;

enum conn_flags {
    CONN_OPEN = 1u << 0,
    CONN_IN_IDLE_Q = 1u << 1, /* waiting for a next request: keep-alive timeout */
    CONN_IN_REQ_Q = 1u << 2,  /* in the middle of a request: request timeout */
    CONN_IN_EPOLL = 1u << 3,  /* registered with the worker's epoll */
    /* not a connection's: a kept fd (conn_wait_fd_kept, conn_watch_idle)
     * registered for reading, edge-triggered, until closed */
    CONN_KEPT_READ = 1u << 4,
    /* idle without a context, the protocol's state for it in the worker's
     * rest table (conn_rest_put) */
    CONN_AT_REST = 1u << 5,
};

struct conn {
    struct conn_ctx *ctx; /* NULL while idle */
    uint32_t prev, next;  /* timeout queue links: fds, TQ_NIL for none */
    uint32_t deadline;    /* worker clock, seconds */
    uint16_t flags;
    uint16_t listener; /* the index of the listening socket it came from */
    union {
        /* the connection's TLS state (rt/tls.c), NULL for a plain socket: it
         * lives as long as the connection, also while idle without a context */
        void *tls;
        /* a kept fd's entry (CONN_KEPT_READ's fds, never a connection's):
         * the context waiting on it (conn_wait_fd_kept), or NULL. Its
         * events are tagged with the kept fd alone (EV_KEPT), so the
         * worker finds the waiter here, in an entry its own thread holds,
         * never through a client connection's number, which may be
         * another thread's by then */
        struct conn_ctx *kept_waiter;
    };
};
/* With accept = thread, the acceptor deals neighbouring fds in pairs, so a
 * pair of entries filling one cache line is written by one thread. With a
 * socket per worker the kernel numbers fds process-wide and two workers
 * may share a line: false sharing, never a race (an entry has one owner). */
static_assert(sizeof(struct conn) == 32, "two connection entries per cache line");

/* What a suspended connection coroutine waits for (the value it yields). */
enum conn_wait {
    CONN_WAIT_READ = 1,
    CONN_WAIT_WRITE = 2,
    CONN_WAIT_TIMER = 3,  /* conn_sleep(): only the timer */
    CONN_WAIT_FD = 4,     /* conn_wait_fd(): a foreign fd, and maybe the timer */
    CONN_PARK = 5,        /* conn_park(): idle between requests, keeping the context */
    CONN_WAIT_PARENT = 6, /* conn_sub_wait(): a sub-context waits for its connection's protocol */
};

/* What the protocol's run() tells the runtime when it returns. */
enum conn_verdict {
    CONN_KEEP,   /* everything buffered was answered: idle until more bytes come */
    CONN_CLOSE,  /* send what is buffered, then close */
    CONN_LINGER, /* the same, but drain what the client still sends first, so
                    the close does not reset the connection under the answer */
};

/* Why the runtime closes a connection (conn_proto.abandon). */
enum conn_cut {
    CONN_CUT_PEER,    /* the peer hung up, or a read or write failed */
    CONN_CUT_TIMEOUT, /* the request (or keep-alive) timeout ran out */
    CONN_CUT_STOP,    /* a stop's shutdown_timeout ran out */
};

/* The protocol spoken on a connection. Every hook runs on the worker thread
 * that owns the connection; run() runs inside its coroutine and may use the
 * I/O wrappers below, the others must not block. */
struct conn_proto {
    size_t state_size; /* the slot conn_state() returns; zeroed once, at allocation */
    enum conn_verdict (*run)(struct conn_ctx *ctx);
    /* The request timeout passed while run() waited for input: last words
     * (best effort, non-blocking) before the runtime closes. Optional. */
    void (*on_timeout)(struct conn_ctx *ctx);
    /* Whether a connection waiting for input is between requests, so a
     * graceful stop may close it at once. */
    bool (*between_requests)(const struct conn_ctx *ctx);
    /* The runtime closes the connection while run() is under way: the
     * peer hung up (in a wait, or a read or write failed and the coroutine
     * was aborted), its request timeout or a stop's deadline ran out. Last
     * words (an access log line) before its coroutine is unwound, with
     * run()'s stack still intact (an aborted coroutine's defers have run);
     * ctx->unsent says what of the write under way did not go out. Also
     * called for a context that finished or parked: the protocol knows
     * whether it was in the middle of something. Optional. */
    void (*abandon)(struct conn_ctx *ctx, enum conn_cut why);
    /* The context goes back to the pool (recycle) or is freed (destroy):
     * release or shrink what the state holds. Optional. */
    void (*recycle)(struct conn_ctx *ctx);
    void (*destroy)(struct conn_ctx *ctx);
    /* The stack under the protocol, for a connection's first run, before
     * run(): preamble() reads what comes before the transport starts (a
     * PROXY header: plain bytes into ctx->in, whatever follows it left
     * there for the transport) and returns false to close; tls_for()
     * names the TLS server (rt/tls.h) the connection's listener speaks,
     * NULL for plain. Both optional. */
    bool (*preamble)(struct conn_ctx *ctx);
    struct tls_server *(*tls_for)(const struct conn_ctx *ctx);
    /* The client's first bytes on a TLS listener are not TLS (a plain
     * request): last words in plain bytes, put in ctx->out, and CONN_CLOSE
     * or CONN_LINGER (the bytes are still unread). Optional: without it
     * the connection just closes. */
    enum conn_verdict (*not_tls)(struct conn_ctx *ctx);
    /* The ALPN protocols a TLS connection offers, in the wire format
     * (length-prefixed names, best first: "\x02h2\x08http/1.1").
     * Optional: without it, http/1.1. */
    const char *(*alpn)(const struct conn_ctx *ctx);
    /* Work the protocol put off (buffered log lines): called on the worker
     * thread at its first wake-up in a later second after the protocol asked
     * with conn_want_tick(); an idle worker wakes for it. Optional. */
    void (*tick)(void *worker_state);
    /* A connection at rest (conn_rest_put) closes without a context (the
     * peer hung up, the keep-alive timeout, a stop): its state is handed
     * back to be freed. Required of a protocol that puts one. */
    void (*drop_rest)(void *worker_state, void *state);
};

struct conn_ctx;
/* The I/O of a sub-context (conn_sub_new): its I/O wrappers never touch
 * the socket but call these, which the protocol that multiplexes the
 * connection implements (waiting with conn_sub_wait() as they must). */
struct conn_sub_ops {
    /* Appends what the protocol received for sub to sub->in: the count,
     * or 0 at the end of its input. A failure aborts sub's coroutine. */
    ssize_t (*read)(struct conn_ctx *sub);
    /* Takes all of iov (copied, or sent before it returns). */
    void (*writev)(struct conn_ctx *sub, const struct iovec *iov, int iovcnt);
    /* Takes len bytes of file_fd from offset before it returns. */
    void (*sendfile)(struct conn_ctx *sub, int file_fd, off_t offset, size_t len);
    /* conn_wait_fd(sub, CONN_FD_SELF, CONN_WAIT_READ, timeout_ms): waits
     * until read() has something (bytes, or the end) and returns
     * CONN_WAIT_READ, or what conn_wait_fd() returns otherwise (a wake, a
     * stop, -ETIMEDOUT). NULL: such a wait is -EINVAL. */
    int (*wait_input)(struct conn_ctx *sub, int timeout_ms);
};

/* A connection's peer as accept() gave it (protocol-neutral: an address
 * and a port, network byte order). family 0: unknown. */
struct conn_peer {
    uint16_t family; /* AF_INET, AF_INET6 or 0 */
    uint16_t port;
    uint8_t addr[16]; /* 4 bytes for AF_INET */
};
struct sockaddr_storage;
/* The peer an address names (what accept() or a PROXY header gives):
 * family 0 for anything but AF_INET and AF_INET6. */
struct conn_peer conn_peer_from(const struct sockaddr_storage *ss);

/* Everything an active connection needs, pooled per worker thread. */
struct conn_ctx {
    struct coro *coro;
    struct worker *worker;
    int fd;
    bool last_read_full; /* more input may wait: the last read filled the buffer,
                            or bytes arrived while we were writing */
    bool new_deadline;   /* the next wait for input gets a fresh request timeout */
    uint8_t waiting;     /* enum conn_wait while suspended */
    uint8_t verdict;     /* enum conn_verdict, once run() returned */
    /* for the protocol: whether this run() is the connection's first
     * (nothing was read from it before); the listener that accepted it is
     * conn_listener() */
    bool fresh;
    uint8_t tls_want; /* after a TLS call's EAGAIN: CONN_WAIT_READ or _WRITE */
    /* the transport: conns[fd].tls while the connection has a context
     * (NULL: plain, the I/O wrappers' inline path) */
    void *tls;
    char *in; /* request bytes: [in_pos, in_len) not consumed yet */
    size_t in_pos, in_len, in_cap;
    struct strbuf out; /* response bytes not written yet (pipelining) */
    struct conn_ctx *next_free;
    /* every context the worker allocated (worker_quiesce() walks them) */
    struct conn_ctx *all_prev, *all_next;
    bool held; /* in use when worker_quiesce() was called, and not back since */
    /* in conn_park() now; on the worker's list of parked contexts (it
     * stays on it while it runs, see rt/park.h); resumed since the list
     * last looked at it */
    bool parked, park_listed, park_used;
    struct conn_ctx *park_prev, *park_next;
    /* conn_sleep() and conn_wait_fd(): the deadline in the worker's timer
     * heap, the foreign fd registered with epoll (-1: none; a dup() of the
     * caller's when that fd was registered already) and what the wait
     * returns */
    struct timer timer;
    int wait_fd;
    bool wait_fd_dup;
    bool wait_fd_kept;   /* conn_wait_fd_kept(): wait_fd stays registered after */
    uint8_t wait_events; /* CONN_WAIT_READ | CONN_WAIT_WRITE asked for */
    int wait_result;
    /* the bytes of the write under way that had not gone out when it
     * last waited or failed (0 once it completed): for abandon() */
    size_t unsent;
    /* conn_set_write_timeout(): a write's wait for the peer bounded by
     * this many ms (0: by the request timeout alone) */
    int write_timeout_ms;
    /* several coroutines for one connection (conn_sub_new): a sub-context's
     * connection context and the protocol's I/O for it (NULL for a
     * connection's own); a connection's sub-contexts, and whether one of
     * them was resumed by the worker (a timer, an fd, conn_wake) since the
     * protocol last looked (conn_read_or_sub) */
    struct conn_ctx *parent;
    const struct conn_sub_ops *sub_ops;
    void (*sub_fn)(struct conn_ctx *sub, void *arg);
    void *sub_arg;
    struct conn_ctx *subs, *sub_prev, *sub_next;
    bool sub_kick;
    bool kick_read;                    /* in conn_read_or_sub(), waiting: a sub's kick resumes it */
    bool read_untimed;                 /* and it has sub-contexts at work: no timeout queue */
    alignas(16) unsigned char state[]; /* the protocol's, state_size bytes */
};

static inline void *conn_state(const struct conn_ctx *ctx)
{
    return (void *)ctx->state;
}

/* The coroutine every connection runs: the protocol's run(), then what its
 * verdict asks for. */
void conn_coro_main(struct coro *coro, void *arg);

/* --- for the protocol, inside the connection coroutine ------------------ */

/* The I/O wrappers look synchronous: on EAGAIN they yield until epoll says
 * the socket is ready. A fatal error (reset, broken pipe) aborts the
 * coroutine: its defers run and the worker closes the connection.
 *
 * conn_read() appends to ctx->in; returns the byte count, 0 at end of
 * stream, or -EAGAIN when may_idle is set and nothing is there (the caller
 * then returns CONN_KEEP so the connection goes idle without a stack). */
ssize_t conn_read(struct conn_ctx *ctx, bool may_idle);
/* Between requests, with nothing buffered: instead of returning CONN_KEEP
 * (which gives the context back and starts a new coroutine for the next
 * request), waits for the next bytes keeping the context and the stack.
 * Returns true once input (or a hangup) is there, false at once when the
 * worker is stopping or ctx->out grew past what the pool keeps: the caller
 * then returns CONN_KEEP. The worker may take the context back while it is
 * parked (a new connection needs one and the pool is empty, a timeout, a
 * stop): the coroutine is then reset, and the call never returns. So the
 * caller must hold nothing across it that a reload could free (read its
 * configuration again after it). */
bool conn_park(struct conn_ctx *ctx);
/* From the connection's coroutine, before a wait for input that may be
 * long, with nothing buffered either way (an idle HTTP/2 connection that
 * keeps its context): the pages of its input buffer, its output buffer
 * and its stack below the caller go back to the system. */
void conn_shed(struct conn_ctx *ctx);
/* Moves the unconsumed input to the start of the buffer. */
void conn_compact(struct conn_ctx *ctx);
/* Writes all of iov (modifies it). */
void conn_writev(struct conn_ctx *ctx, struct iovec *iov, int iovcnt);
void conn_write(struct conn_ctx *ctx, const void *p, size_t len);
/* Like conn_write, telling the kernel more follows (MSG_MORE). */
void conn_write_more(struct conn_ctx *ctx, const void *p, size_t len);
/* Sends ctx->out (not empty) and empties it. */
void conn_flush_out(struct conn_ctx *ctx);
/* Sends ctx->out and empties it. Inline: the loop calls it between
 * requests, often with nothing to send. */
static inline void conn_flush(struct conn_ctx *ctx)
{
    if (ctx->out.len)
        conn_flush_out(ctx);
}
/* What is left of a writev() of iov that returned n (or failed): the
 * slow path of conn_writev_all(). */
void conn_writev_rest(struct conn_ctx *ctx, struct iovec *iov, int iovcnt, ssize_t n);
/* conn_writev() of iov holding total bytes, the first try inline: it
 * nearly always takes everything. */
static inline void conn_writev_all(struct conn_ctx *ctx, struct iovec *iov, int iovcnt,
                                   size_t total)
{
    if (__builtin_expect(ctx->tls != NULL, 0)) {
        conn_writev(ctx, iov, iovcnt);
        return;
    }
    ssize_t n = sys_writev(ctx->fd, iov, iovcnt);
    if (__builtin_expect((size_t)n != total, 0))
        conn_writev_rest(ctx, iov, iovcnt, n);
}
/* Sends ctx->out followed by len bytes at p, in one writev, and empties
 * ctx->out. Inline: a cached file's answer leaves this way. */
static inline void conn_flush_with(struct conn_ctx *ctx, const void *p, size_t len)
{
    struct iovec iov[2] = {
        {.iov_base = ctx->out.buf, .iov_len = ctx->out.len},
        {.iov_base = (void *)p, .iov_len = len},
    };
    conn_writev_all(ctx, iov, 2, ctx->out.len + len);
    strbuf_reset(&ctx->out);
}
/* From now on until set to 0 (a new connection starts at 0): a write to
 * the peer (the wrappers above, conn_sendfile) whose wait sees the peer
 * take no byte for ms aborts the coroutine, as a failed write does (its
 * defers run, the protocol's abandon() logs the request as interrupted,
 * the connection closes). A byte taken is one more byte acknowledged by
 * the peer (TCP_INFO), not only the socket's writability: a socket with a
 * large send buffer says writable only once much of it went. Only where
 * ms is shorter than the request timeout (which bounds the wait
 * otherwise); not on a sub-context (an HTTP/2 stream's writes are its
 * protocol's), nor once the worker stops (the stop's deadline bounds it).
 * Such a wait costs a timer, and a getsockopt() at its start and end. */
static inline void conn_set_write_timeout(struct conn_ctx *ctx, int ms)
{
    ctx->write_timeout_ms = ms > 0 ? ms : 0;
}
/* sendfile() of len bytes from offset; the header must have gone first. */
void conn_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len);
/* Best effort, without waiting (last words before a close, such as a
 * 408): what of p the socket takes now. */
void conn_try_write(struct conn_ctx *ctx, const void *p, size_t len);
/* Whether the connection is secure (TLS), and what it negotiated: the
 * protocol version ("TLSv1.3"), the server name the client asked for
 * (NULL: none), the cipher suite ("TLS_AES_128_GCM_SHA256") and whether
 * the session was resumed (a ticket). NULL / false for plain ones. */
bool conn_is_secure(const struct conn_ctx *ctx);
const char *conn_tls_version(const struct conn_ctx *ctx);
const char *conn_tls_server_name(const struct conn_ctx *ctx);
const char *conn_tls_cipher(const struct conn_ctx *ctx);
bool conn_tls_resumed(const struct conn_ctx *ctx);
/* Whether ALPN chose the protocol name (e.g. "h2") for the connection. */
bool conn_tls_alpn_is(const struct conn_ctx *ctx, const char *name);
/* Waiting without blocking: the coroutine is suspended, the worker goes on
 * with the other connections. While a connection waits this way it is in
 * no timeout queue (waiting is not stalling: the caller's own timeout
 * bounds it; the request timeout starts afresh at its next read or
 * write), and its socket stays watched: a hangup, reset or half-close
 * (EPOLLHUP, EPOLLERR, EPOLLRDHUP) from the peer aborts the coroutine, so
 * its defers run and the worker closes the connection; the call never
 * returns. A graceful stop wakes every waiter at once with -ECANCELED,
 * and once the worker is stopping the calls return -ECANCELED at once.
 *
 * Timers have millisecond resolution on CLOCK_MONOTONIC_COARSE (its
 * granularity is a scheduler tick, 1-4 ms): a wait ends at its deadline
 * or up to a tick later, never earlier.
 *
 * conn_sleep() returns 0 after ms milliseconds (0 only lets the others
 * run), or -ECANCELED. */
int conn_sleep(struct conn_ctx *ctx, unsigned ms);
/* Waits until fd (any pollable fd the caller owns: a pipe, an eventfd, a
 * socket; not a regular file: -EPERM) is ready for events
 * (CONN_WAIT_READ | CONN_WAIT_WRITE bits), at most timeout_ms (-1: no
 * limit). Returns the ready events among those asked for (a hangup or an
 * error on fd counts as all of them: the next call on fd says what
 * happened), -ETIMEDOUT, -ECANCELED, or -errno when fd cannot be watched.
 * The fd is watched only during the call. */
int conn_wait_fd(struct conn_ctx *ctx, int fd, unsigned events, int timeout_ms);
/* conn_wait_fd() for an fd that this worker's connections alone wait on,
 * one at a time (a gateway's upstream socket, kept in the worker's pool):
 * it stays registered with the worker's epoll from one wait to the next,
 * until it is closed, so a wait costs one epoll_ctl (re-arm) instead of
 * two (add, delete). A wait for reading leaves it registered for reading,
 * edge-triggered (not one-shot): what comes while nobody waits on it (the
 * upstream closing a pooled connection) goes to the idle handler below. An
 * event left over from an earlier wait at most ends a later wait on the
 * same fd early (the caller's read then finds nothing and waits again).
 * A wait for reading with CONN_WAIT_DRAINED costs no system call when the
 * fd is still registered for reading from an earlier wait. */
int conn_wait_fd_kept(struct conn_ctx *ctx, int fd, unsigned events, int timeout_ms);
/* A new fd for conn_wait_fd_kept() (a socket just connected): what an
 * earlier fd of its number left in the worker's records is forgotten. */
void conn_kept_new(struct conn_ctx *ctx, int fd);
/* A kept fd taken out of the worker's epoll (one epoll_ctl), for a while
 * it is waited on otherwise (a tunnel's own epoll): its bytes no longer
 * wake the worker. A later conn_wait_fd_kept() registers it again. */
void conn_kept_forget(struct conn_ctx *ctx, int fd);
/* Closes a kept fd (any thread may get its number next: what this one
 * wrote in its entry comes before, for TSan). */
void conn_kept_close(int fd);
/* An fd that idles on ctx's worker with no connection waiting on it (a
 * gateway's pooled upstream connection): watched for reading as
 * conn_wait_fd_kept() leaves it, with no system call when its last wait
 * was one for reading (else one epoll_ctl). 0 or -errno. */
int conn_watch_idle(struct conn_ctx *ctx, int fd);
/* The process's idle handler (set once, by whoever keeps idle fds): called
 * on a worker's thread, outside every coroutine, with the worker's index
 * and a kept fd that had an event while no connection waited on it
 * (closed: the peer's end, a reset or an error; else only bytes, maybe
 * ones a connection read since); the fd need not be idle (a connection
 * may use it and not wait just now) nor even the same socket (closed and
 * its number used again): the handler judges. Also called with fd -1 at
 * the worker's tick once a second after conn_want_idle_tick() (it
 * returns whether it wants the next one too). */
typedef bool (*conn_idle_fn)(unsigned worker, int fd, bool closed);
void conn_set_idle_handler(conn_idle_fn fn);
/* Asks for the idle handler's tick (fd -1) at the worker's first
 * wake-up in a later second; a store, no system call. */
void conn_want_idle_tick(struct conn_ctx *ctx);
/* conn_wait_fd()'s fd for the connection's own socket (READ only): the
 * transport is asked first (decrypted bytes it holds end the wait at
 * once), then the socket is watched through a dup() of it. For a
 * sub-context, its protocol's input (conn_sub_ops.wait_input). */
#define CONN_FD_SELF (-2)
/* A result bit of conn_wait_fd()/conn_sleep(): conn_wake() ended the wait. */
#define CONN_WOKEN 4
/* A result bit of conn_wait_fd_kept(): the fd's peer ended or reset it
 * too (its last bytes may still be there to read): it is not to be kept. */
#define CONN_WAIT_HUP 8
/* An events bit for conn_wait_fd_kept(): the caller's last read of fd
 * left nothing in the socket (it failed with EAGAIN, or gave fewer bytes
 * than asked), so whatever comes next is a new edge for the fd's
 * edge-triggered registration, and re-arming it would add nothing. Not
 * for a TLS socket (a library's reads need not drain it). */
#define CONN_WAIT_DRAINED 16
/* On the worker's thread, outside every coroutine (in a command posted with
 * worker_post): ends the conn_sleep()/conn_wait_fd() that ctx is suspended
 * in, which then returns result (CONN_WOKEN, or a negative errno). The
 * coroutine is not resumed here but at the worker's next turn of the
 * loop, so the caller may wake many connections in one pass. Nothing when
 * ctx is not waiting, or was woken already. */
void conn_wake(struct conn_ctx *ctx, int result);

/* --- several coroutines for one connection ------------------------------ */

/* A protocol that multiplexes requests on one connection (HTTP/2) runs
 * each in a sub-context: a context from the same pool, with its own
 * coroutine, buffers, protocol state slot (conn_state()), timer and
 * waits, for the same fd. fn(sub, arg) runs when the protocol first
 * resumes it. Its I/O wrappers (conn_read, conn_write*, conn_flush*,
 * conn_sendfile) call ops instead of touching the socket; conn_sleep,
 * conn_wait_fd (not CONN_FD_SELF) and conn_wake work as for a
 * connection: when the worker resumes a sub-context (its timer or fd),
 * the connection's coroutine is told (conn_read_or_sub returns -EINTR).
 * From the connection's coroutine; NULL when out of memory. */
struct conn_ctx *conn_sub_new(struct conn_ctx *parent, const struct conn_sub_ops *ops,
                              void (*fn)(struct conn_ctx *sub, void *arg), void *arg);
/* From the connection's coroutine: runs sub until it yields or ends.
 * Returns what it waits for (CONN_WAIT_PARENT: the protocol resumes it;
 * CONN_WAIT_TIMER or CONN_WAIT_FD: the worker does, and this returns that
 * without running it), CORO_FINISHED or CORO_ABORTED. */
int conn_sub_resume(struct conn_ctx *sub);
/* From inside sub: waits until the protocol resumes it (conn_sub_resume). */
void conn_sub_wait(struct conn_ctx *sub);
/* Whether sub's fn returned or its coroutine aborted. */
static inline bool conn_sub_done(const struct conn_ctx *sub)
{
    return sub->coro->done;
}
/* Not from inside sub: ends it (the protocol's abandon() hook is told
 * with why, its wait ends, its defers run) and gives its context back.
 * A connection that closes ends its sub-contexts so. */
void conn_sub_end(struct conn_ctx *sub, enum conn_cut why);
/* conn_read(ctx, false) for a connection with sub-contexts: -EINTR
 * (without reading) when one of them was resumed by the worker since the
 * last call, also while this one waits for input. The wait for input is
 * under keep_alive_timeout when the protocol says it is not busy; when it
 * is (requests in sub-contexts), it is in no timeout queue, as a
 * conn_sleep() is not: the sub-contexts' own waits bound the time. */
ssize_t conn_read_or_sub(struct conn_ctx *ctx, bool busy);
/* The same, and -ETIMEDOUT when nothing came (no bytes, no kick) within
 * timeout_ms (< 0: no limit but the keep-alive timeout's). The wait's
 * timer is the one conn_sleep() uses: no system call. */
ssize_t conn_read_or_sub_for(struct conn_ctx *ctx, bool busy, int timeout_ms);

/* Per-connection buffers above this size are not kept in the pool, nor
 * across a conn_park(). */
#define CONN_KEEP_BUF_MAX (64 * 1024)

/* Input made progress: the next wait for input gets a fresh request timeout. */
static inline void conn_progress(struct conn_ctx *ctx)
{
    ctx->new_deadline = true;
}

/* --- the worker, as its connections' protocol sees it -------------------- */

/* The part of a worker the inline functions below read: the first member
 * of struct worker (rt/internal.h), which the runtime alone writes (but
 * proto_state, whose contents are the protocol's). */
struct conn_worker {
    atomic_bool stop_requested; /* set by worker_wake(), maybe in a signal handler */
    bool tick_wanted;           /* the protocol asked for its tick (conn_want_tick) */
    time_t wall_time;           /* UTC seconds, as of the last wake-up */
    time_t tick_time;           /* the second the tick was asked in */
    uint64_t mono_ns;           /* CLOCK_MONOTONIC_COARSE at the last wake-up */
    struct conn *conns;         /* the process-wide table, indexed by fd */
    struct conn_peer *peers;    /* indexed by fd like conns, or NULL: not recorded */
    void *proto_state;          /* the protocol's per-worker slot */
    /* indexed by fd, the state of a connection at rest (CONN_AT_REST);
     * the worker's own mapping, its untouched pages cost nothing; NULL:
     * no connection can rest */
    void **rest;
};

static inline struct conn_worker *conn_worker_of(const struct conn_ctx *ctx)
{
    return (struct conn_worker *)(void *)ctx->worker;
}

/* The worker's number, 0 to the worker count - 1 (per-worker state
 * kept outside the runtime: a gateway's connection pools). */
unsigned conn_worker_index(const struct conn_ctx *ctx);

/* The connections of every worker, summed (nginx's stub_status): accepted
 * (every accept), handled (not refused at once), active (open now), and
 * the active ones by state: reading (waiting for the rest of a request),
 * writing (a request at work: its handler runs or waits, or its answer
 * waits to be written) and waiting (idle between requests). Asked of the
 * workers (worker_post) and waited for in ctx's coroutine, a few
 * milliseconds; a worker that does not answer within 100 ms gives its last
 * figures. ctx itself counts as writing. Also the connections closed at
 * accept by max_connections_per_client (not in accepted). */
struct conn_stats {
    uint64_t accepted, handled;
    uint64_t active, reading, writing, waiting;
    uint64_t refused_per_client; /* closed at accept: max_connections_per_client */
};
void conn_stats(struct conn_ctx *ctx, struct conn_stats *out);

/* The monotonic clock in milliseconds: the clock of conn_sleep() and
 * conn_wait_fd() (a protocol counts its own deadlines on it). */
uint64_t worker_now_ms(void);

/* Whether the worker was asked to stop: answers should close. Read with
 * stop_requested, not the worker's own stopping: a request can finish in
 * the same epoll batch as the wake-up that will begin the stop. */
static inline bool conn_stopping(const struct conn_ctx *ctx)
{
    return atomic_load_explicit(&conn_worker_of(ctx)->stop_requested, memory_order_relaxed);
}
/* The protocol's per-worker slot (given to worker_new()). */
static inline void *conn_worker_state(const struct conn_ctx *ctx)
{
    return conn_worker_of(ctx)->proto_state;
}
/* Asks for the protocol's tick at the worker's first wake-up in a later
 * second (see struct conn_proto); a store, no system call. */
static inline void conn_want_tick(const struct conn_ctx *ctx)
{
    struct conn_worker *w = conn_worker_of(ctx);
    if (!w->tick_wanted) {
        w->tick_wanted = true;
        w->tick_time = w->wall_time;
    }
}
/* The index of the listener that accepted the connection (the runtime
 * gives it no meaning; a protocol may tell listeners apart by it). */
static inline unsigned conn_listener(const struct conn_ctx *ctx)
{
    return conn_worker_of(ctx)->conns[ctx->fd].listener;
}
/* The peer of the connection (family 0 when unknown). */
static inline const struct conn_peer *conn_peer_of(const struct conn_ctx *ctx)
{
    static const struct conn_peer none;
    const struct conn_worker *w = conn_worker_of(ctx);
    return w->peers ? &w->peers[ctx->fd] : &none;
}
/* Replaces the peer the runtime recorded at accept() (a PROXY header names
 * the real client); it stays for the connection's life. */
static inline void conn_set_peer(struct conn_ctx *ctx, const struct conn_peer *peer)
{
    struct conn_worker *w = conn_worker_of(ctx);
    if (w->peers)
        w->peers[ctx->fd] = *peer;
}
/* An idle connection that keeps protocol state between requests (an
 * HTTP/2 connection's settings and stream ids) can still give its context
 * back, as an HTTP/1.1 one does: run() puts a state here (one allocation
 * of the protocol's) and returns CONN_KEEP. The connection then costs its
 * table entries and that state. The next run() for it (not fresh) takes
 * the state back with conn_rest_take(); one that closes before then
 * hands it to conn_proto.drop_rest. False when the worker has no table
 * for it: the protocol keeps its context. */
static inline bool conn_rest_put(struct conn_ctx *ctx, void *state)
{
    struct conn_worker *w = conn_worker_of(ctx);
    if (!w->rest)
        return false;
    w->rest[ctx->fd] = state;
    w->conns[ctx->fd].flags |= CONN_AT_REST;
    return true;
}
/* The state conn_rest_put() kept for the connection, now the protocol's
 * again, or NULL when it has none. */
static inline void *conn_rest_take(struct conn_ctx *ctx)
{
    struct conn_worker *w = conn_worker_of(ctx);
    struct conn *c = &w->conns[ctx->fd];
    if (!(c->flags & CONN_AT_REST))
        return NULL;
    c->flags &= (uint16_t)~CONN_AT_REST;
    void *state = w->rest[ctx->fd];
    w->rest[ctx->fd] = NULL;
    return state;
}
/* UTC seconds as of the worker's last wake-up (no system call). */
static inline time_t conn_wall_time(const struct conn_ctx *ctx)
{
    return conn_worker_of(ctx)->wall_time;
}
/* worker_now_ms() as of the worker's last wake-up: no clock read, for a
 * clock wanted per request that may lag by the time since (the cache's
 * expiry in serve_files). */
static inline uint64_t conn_now_ms(const struct conn_ctx *ctx)
{
    return conn_worker_of(ctx)->mono_ns / 1000000;
}

/* --- work for a worker's thread ------------------------------------------- */

/* A command for worker_post() (or the server's worker_quiesce()), run on
 * a worker's thread outside every connection: the only way to touch
 * another worker's connections (pub/sub delivers messages so). */
struct worker_cmd {
    void (*fn)(struct worker *w, void *arg);
    void (*drop)(void *arg); /* instead of fn, when the worker stopped first (or NULL) */
    void *arg;
    struct worker_cmd *next;
};
/* Allocated ahead so that giving it cannot fail (a reload allocates
 * before it commits). NULL when out of memory. */
struct worker_cmd *worker_cmd_new(void (*fn)(struct worker *w, void *arg), void (*drop)(void *arg),
                                  void *arg);
/* Runs c->fn(w, c->arg) on the worker's thread, outside every connection,
 * at its next wake-up (which this causes; async-signal-unsafe). Commands
 * run in the order posted, and are freed after. A worker that has
 * stopped never runs them: worker_free() calls drop(arg) instead. The
 * worker of a connection is ctx->worker. */
void worker_post(struct worker *w, struct worker_cmd *c);
