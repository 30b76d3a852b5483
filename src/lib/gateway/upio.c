/* upio.c - upstream socket I/O on the coroutine (see upio.h). An upstream
 * socket is waited on with conn_wait_fd_kept(): it stays in the worker's
 * epoll between waits, and while it idles in the worker's pool (watched
 * for its end: upstream.c), until it is closed. */
#include "gateway/upio.h"

#include "gateway/uptls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

int gw_connect(struct conn_ctx *ctx, const struct gw_server *s, int timeout_ms)
{
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (s->addr.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    conn_kept_new(ctx, fd);
    gw_pool_forget(fd);
    if (connect(fd, (const struct sockaddr *)&s->addr, s->addr_len) == 0)
        return fd;
    int e = errno;
    if (e == EAGAIN && s->addr.ss_family == AF_UNIX)
        e = ECONNREFUSED; /* a unix socket's backlog is full: as good as refused */
    if (e != EINPROGRESS) {
        conn_kept_close(fd);
        return -e;
    }
    int r = conn_wait_fd(ctx, fd, CONN_WAIT_WRITE, timeout_ms);
    if (r < 0) {
        conn_kept_close(fd);
        return r;
    }
    socklen_t len = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e) {
        conn_kept_close(fd);
        return -e;
    }
    return fd;
}

int gw_writev(struct conn_ctx *ctx, int fd, struct iovec *iov, int iovcnt, int timeout_ms)
{
    if (gw_tls_on(fd))
        return gw_tls_writev(ctx, fd, iov, iovcnt, timeout_ms);
    while (iovcnt > 0) {
        if (!iov->iov_len) {
            iov++, iovcnt--;
            continue;
        }
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return -errno;
            int r = conn_wait_fd_kept(ctx, fd, CONN_WAIT_WRITE, timeout_ms);
            if (r < 0)
                return r;
            continue;
        }
        size_t left = (size_t)n;
        while (iovcnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++, iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

int gw_write(struct conn_ctx *ctx, int fd, const void *p, size_t len, int timeout_ms)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    return gw_writev(ctx, fd, &iov, 1, timeout_ms);
}

ssize_t gw_read(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms)
{
    if (gw_tls_on(fd))
        return gw_tls_read(ctx, fd, buf, cap, timeout_ms);
    for (;;) {
        ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int r = conn_wait_fd_kept(ctx, fd, CONN_WAIT_READ | CONN_WAIT_DRAINED, timeout_ms);
        if (r < 0)
            return r;
        if (r & CONN_WAIT_HUP)
            gw_pool_ended(fd);
    }
}

ssize_t gw_read_ready(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms,
                      bool *drained)
{
    if (*drained && !gw_tls_pending(fd)) {
        /* a short read of a plain socket left it empty */
        unsigned ev = CONN_WAIT_READ | (gw_tls_on(fd) ? 0 : CONN_WAIT_DRAINED);
        int r = conn_wait_fd_kept(ctx, fd, ev, timeout_ms);
        if (r < 0)
            return r;
        if (r & CONN_WAIT_HUP)
            gw_pool_ended(fd);
    }
    ssize_t n = gw_read(ctx, fd, buf, cap, timeout_ms);
    *drained = n >= 0 && (size_t)n < cap;
    return n;
}

bool gw_idle_alive(int fd)
{
    if (gw_tls_on(fd))
        return gw_tls_idle_alive(fd);
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno == EAGAIN;
}

ssize_t gw_read_now(int fd, void *buf, size_t cap)
{
    if (gw_tls_on(fd))
        return gw_tls_read_now(fd, buf, cap);
    ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
    return n < 0 ? -errno : n;
}

void gw_close(int fd)
{
    gw_tls_drop(fd);
    conn_kept_close(fd);
}
