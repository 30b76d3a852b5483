/* conn.c - the connection coroutine's side of the runtime: the I/O
 * wrappers that make a non-blocking socket look blocking, and what happens
 * after the protocol is done with a connection. */
#include "rt/conn.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt/internal.h"
#include "rt/sys.h"
#include "rt/tls.h"

/* At most this much of an unread request is drained before closing. */
#define LINGER_MAX (256 * 1024)

struct conn_peer conn_peer_from(const struct sockaddr_storage *ss)
{
    struct conn_peer p = {0};
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        p = (struct conn_peer){.family = AF_INET, .port = a->sin_port};
        memcpy(p.addr, &a->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        p = (struct conn_peer){.family = AF_INET6, .port = a->sin6_port};
        memcpy(p.addr, &a->sin6_addr, 16);
    }
    return p;
}

static void wait_for(struct conn_ctx *ctx, int what)
{
    coro_yield(ctx->coro, what);
    ctx->waiting = 0;
}

void conn_wait_io(struct conn_ctx *ctx, int what)
{
    wait_for(ctx, what);
}

/* The bytes of the connection its peer has acknowledged so far (TCP's
 * count), or -1 when the socket cannot say (not TCP): what a peer that
 * reads takes. A socket with a large send buffer says it is writable
 * again only once much of it went: a reader may take bytes for a while
 * with no writability seen. */
static int64_t acked(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
        return -1;
    return (int64_t)ti.tcpi_bytes_acked;
}

/* A write's wait under conn_set_write_timeout(): the usual wait for the
 * socket (its events, the request timeout's queue), and the context's
 * timer armed beside it. The timer's expiry resumes the coroutine through
 * wait_end(), which disarms it: a timer found still armed after the wait
 * means the socket came ready first (it is disarmed here). At the expiry,
 * a peer that took bytes meanwhile (acknowledged more) gets another
 * while. Whether the wait ran out with nothing taken; false too when it
 * was not bounded (the request timeout is shorter, a sub-context, a
 * stop). */
static __attribute__((noinline)) bool wait_for_bounded(struct conn_ctx *ctx, int what)
{
    struct worker *w = ctx->worker;
    if (ctx->parent || conn_stopping(ctx) ||
        (uint64_t)ctx->write_timeout_ms >= (uint64_t)w->cfg->request_timeout_s * 1000) {
        wait_for(ctx, what);
        return false;
    }
    for (int64_t took = acked(ctx->fd);;) {
        uint64_t deadline =
            worker_now_ms() + (uint64_t)ctx->write_timeout_ms + wait_coarse_lag_ms();
        if (timer_add(&w->timers, &ctx->timer, deadline) < 0) {
            wait_for(ctx, what);
            return false;
        }
        ctx->wait_result = -ETIMEDOUT; /* what the timer's expiry says; a stop's: -ECANCELED */
        wait_for(ctx, what);
        if (timer_armed(&ctx->timer)) {
            timer_del(&w->timers, &ctx->timer);
            return false;
        }
        if (ctx->wait_result != -ETIMEDOUT)
            return false;
        int64_t now = acked(ctx->fd);
        if (took < 0 || now <= took)
            return true;
        took = now;
    }
}

/* After a failed call with left bytes to go: wait for readiness on EAGAIN
 * (in the direction the transport needs: TLS may have to read to write),
 * retry at once on EINTR, give up on the connection for anything else
 * (ctx->unsent says what did not go out meanwhile), or for a wait longer
 * than the write timeout. */
static void retry_or_abort(struct conn_ctx *ctx, int wait, size_t left)
{
    if (errno == EINTR)
        return;
    ctx->unsent = left;
    if (errno != EAGAIN)
        coro_abort(ctx->coro);
    int what = ctx->tls ? ctx->tls_want : wait;
    if (likely(!ctx->write_timeout_ms))
        wait_for(ctx, what);
    else if (wait_for_bounded(ctx, what))
        coro_abort(ctx->coro);
    ctx->unsent = 0;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    return n;
}

/* Answers to earlier pipelined requests must not wait for (or die with) a
 * later request that is slow to arrive: they leave, then the coroutine
 * waits. Not inlined, so that conn_read() keeps a small frame. */
static __attribute__((noinline)) void flush_and_wait_readable(struct conn_ctx *ctx)
{
    conn_flush(ctx);
    wait_for(ctx, CONN_WAIT_READ);
}

/* conn_read() on a TLS connection. TLS hands over a record at a time:
 * more may wait in the socket, which gives no second edge, until a read
 * says EAGAIN, so every read that got bytes counts as a full one. A read
 * may have to write first (a key update): it waits for that. */
static __attribute__((noinline)) ssize_t read_tls(struct conn_ctx *ctx, bool may_idle)
{
    if (ctx->sub_ops) /* a sub-context: its protocol's input, not the socket's */
        return ctx->sub_ops->read(ctx);
    for (;;) {
        ssize_t n = tls_read(ctx, ctx->in + ctx->in_len, ctx->in_cap - ctx->in_len);
        if (n > 0) {
            ctx->in_len += (size_t)n;
            ctx->last_read_full = true;
            return n;
        }
        if (n == 0)
            return 0;
        if (errno == EAGAIN) {
            ctx->last_read_full = false;
            if (ctx->tls_want == CONN_WAIT_WRITE) {
                wait_for(ctx, CONN_WAIT_WRITE);
                continue;
            }
            if (may_idle) {
                tls_idle(ctx);
                return -EAGAIN;
            }
            flush_and_wait_readable(ctx);
            continue;
        }
        if (errno == EINTR)
            continue;
        coro_abort(ctx->coro);
    }
}

ssize_t conn_read(struct conn_ctx *ctx, bool may_idle)
{
    if (unlikely(ctx->tls != NULL))
        return read_tls(ctx, may_idle);
    for (;;) {
        size_t space = ctx->in_cap - ctx->in_len;
        ssize_t n = sys_read(ctx->fd, ctx->in + ctx->in_len, space);
        if (n > 0) {
            ctx->in_len += (size_t)n;
            ctx->last_read_full = (size_t)n == space;
            return n;
        }
        if (n == 0)
            return 0;
        if (errno == EAGAIN) {
            ctx->last_read_full = false;
            if (may_idle)
                return -EAGAIN;
            flush_and_wait_readable(ctx);
            continue;
        }
        if (errno == EINTR)
            continue;
        coro_abort(ctx->coro);
    }
}

bool conn_park(struct conn_ctx *ctx)
{
    if (ctx->worker->stopping || ctx->out.cap > CONN_KEEP_BUF_MAX)
        return false;
    coro_yield(ctx->coro, CONN_PARK);
    ctx->waiting = 0;
    ctx->last_read_full = true; /* epoll said readable (or hung up): read */
    return true;
}

void conn_compact(struct conn_ctx *ctx)
{
    size_t avail = ctx->in_len - ctx->in_pos;
    if (ctx->in_pos) {
        memmove(ctx->in, ctx->in + ctx->in_pos, avail);
        ctx->in_pos = 0;
        ctx->in_len = avail;
    }
}

/* Moves past the n bytes written from iov: returns how many iovecs are
 * left, *iov the first of them, trimmed of what of it was written. */
static int iov_skip(struct iovec **iovp, int iovcnt, size_t n)
{
    struct iovec *iov = *iovp;
    while (iovcnt > 0 && n >= iov->iov_len) {
        n -= iov->iov_len;
        iov++;
        iovcnt--;
    }
    if (iovcnt > 0) {
        iov->iov_base = (char *)iov->iov_base + n;
        iov->iov_len -= n;
    }
    *iovp = iov;
    return iovcnt;
}

/* Writes iov whole (plain or TLS); after: bytes still to come behind it,
 * which ctx->unsent counts too if the connection fails meanwhile. */
static inline __attribute__((always_inline)) void write_all(struct conn_ctx *ctx, struct iovec *iov,
                                                            int iovcnt, size_t after)
{
    while (iovcnt > 0) {
        ssize_t n =
            likely(!ctx->tls) ? sys_writev(ctx->fd, iov, iovcnt) : tls_writev(ctx, iov, iovcnt);
        if (n < 0)
            retry_or_abort(ctx, CONN_WAIT_WRITE, iov_total(iov, iovcnt) + after);
        else
            iovcnt = iov_skip(&iov, iovcnt, (size_t)n);
    }
}

void conn_writev(struct conn_ctx *ctx, struct iovec *iov, int iovcnt)
{
    if (unlikely(ctx->tls != NULL) && ctx->sub_ops) {
        ctx->sub_ops->writev(ctx, iov, iovcnt);
        return;
    }
    write_all(ctx, iov, iovcnt, 0);
}

void conn_write_part(struct conn_ctx *ctx, const void *p, size_t len, size_t after)
{
    struct iovec one = {.iov_base = (void *)p, .iov_len = len};
    write_all(ctx, &one, 1, after);
}

void conn_writev_rest(struct conn_ctx *ctx, struct iovec *iov, int iovcnt, ssize_t n)
{
    if (n < 0)
        retry_or_abort(ctx, CONN_WAIT_WRITE, iov_total(iov, iovcnt));
    else
        iovcnt = iov_skip(&iov, iovcnt, (size_t)n);
    conn_writev(ctx, iov, iovcnt);
}

void conn_write(struct conn_ctx *ctx, const void *p, size_t len)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    conn_writev(ctx, &iov, 1);
}

void conn_write_more(struct conn_ctx *ctx, const void *p, size_t len)
{
    if (ctx->tls) { /* records, not segments: nothing to hold back */
        conn_write(ctx, p, len);
        return;
    }
    const char *c = p;
    while (len > 0) {
        ssize_t n = sys_send_more(ctx->fd, c, len);
        if (n < 0) {
            retry_or_abort(ctx, CONN_WAIT_WRITE, len);
            continue;
        }
        c += n;
        len -= (size_t)n;
    }
}

void conn_flush_out(struct conn_ctx *ctx)
{
    struct iovec iov = {.iov_base = ctx->out.buf, .iov_len = ctx->out.len};
    conn_writev_all(ctx, &iov, 1, ctx->out.len);
    ctx->out.len = 0;
    ctx->out.buf[0] = '\0';
}

void conn_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len)
{
    if (ctx->tls) {
        if (ctx->sub_ops) {
            ctx->sub_ops->sendfile(ctx, file_fd, offset, len);
            return;
        }
        tls_sendfile(ctx, file_fd, offset, len);
        return;
    }
    while (len > 0) {
        ssize_t n = sendfile(ctx->fd, file_fd, &offset, len);
        if (n < 0) {
            retry_or_abort(ctx, CONN_WAIT_WRITE, len);
            continue;
        }
        if (n == 0) { /* the file shrank under us */
            ctx->unsent = len;
            coro_abort(ctx->coro);
        }
        len -= (size_t)n;
    }
}

/* Closing with unread request bytes makes the kernel send a reset, which
 * can destroy the answer before the client reads it. So: stop writing,
 * then drain what the client still sends, within limits. */
static void linger(struct conn_ctx *ctx)
{
    size_t drained = 0;
    if (ctx->tls)
        tls_close_notify(ctx);
    shutdown(ctx->fd, SHUT_WR);
    while (drained < LINGER_MAX) {
        ctx->in_pos = ctx->in_len = 0;
        ssize_t n = conn_read(ctx, false);
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
}

/* What follows run() when there is more to do than going idle: bytes
 * left in ctx->out leave, and a closing connection may linger. Not
 * inlined, so the common path of conn_coro_main() stays a few
 * instructions long. */
static __attribute__((noinline)) void after_run(struct conn_ctx *ctx, enum conn_verdict v)
{
    if (v == CONN_KEEP) {
        conn_flush(ctx);
        return;
    }
    /* the last answer waits (MSG_MORE) for the FIN that shutdown() or
     * close() adds, and both leave in one segment */
    if (ctx->out.len)
        conn_write_more(ctx, ctx->out.buf, ctx->out.len);
    strbuf_reset(&ctx->out);
    if (v == CONN_LINGER || ctx->in_len > ctx->in_pos)
        linger(ctx);
    else if (ctx->tls)
        tls_close_notify(ctx); /* a clean end: the client keeps its session (RFC 8446 6.1) */
}

void conn_try_write(struct conn_ctx *ctx, const void *p, size_t len)
{
    if (ctx->sub_ops)
        return; /* last words are the protocol's, on its own context */
    if (ctx->tls) {
        tls_try_write(ctx, p, len);
        return;
    }
    for (size_t off = 0; off < len;) {
        ssize_t sent = send(ctx->fd, (const char *)p + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent > 0)
            off += (size_t)sent;
        else if (sent == 0 || errno != EINTR)
            break;
    }
}

/* A connection's first run: the stack under the protocol (rt/conn.h,
 * preamble and tls_for), then the protocol. False: close. */
static __attribute__((noinline)) bool start_stack(struct conn_ctx *ctx)
{
    const struct conn_proto *proto = ctx->worker->cfg->proto;
    if (proto->preamble && !proto->preamble(ctx))
        return false;
    struct tls_server *ts = proto->tls_for ? proto->tls_for(ctx) : NULL;
    if (!ts)
        return true;
    int r = tls_accept(ctx, ts);
    if (r == TLS_NOT_TLS && proto->not_tls) {
        /* the protocol's plain last words, as after a run() */
        enum conn_verdict v = proto->not_tls(ctx);
        after_run(ctx, v);
    }
    return r == 0;
}

void conn_coro_main(struct coro *coro, void *arg)
{
    struct conn_ctx *ctx = arg;
    (void)coro;
    if (unlikely(ctx->fresh &&
                 (ctx->worker->cfg->proto->preamble || ctx->worker->cfg->proto->tls_for)) &&
        !start_stack(ctx)) {
        ctx->verdict = CONN_CLOSE;
        return;
    }
    enum conn_verdict v = ctx->worker->cfg->proto->run(ctx);
    if (v != CONN_KEEP || ctx->out.len)
        after_run(ctx, v);
    ctx->verdict = (uint8_t)v;
}

void conn_shed(struct conn_ctx *ctx)
{
    if (ctx->in_pos == ctx->in_len) {
        ctx->in_pos = ctx->in_len = 0;
        madvise(ctx->in, ctx->in_cap, MADV_DONTNEED);
    }
    if (!ctx->out.len)
        strbuf_free(&ctx->out);
    coro_shed_stack(ctx->coro);
}
