/* upio.h - a gateway's I/O on an upstream socket from the connection's
 * coroutine: non-blocking calls that wait with conn_wait_fd() (the worker
 * serves the others meanwhile), each wait bounded by its timeout. A
 * client that hangs up during a wait aborts the coroutine (its defers
 * run: they close the upstream socket). */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "gateway/upstream.h"
#include "rt/conn.h"

/* A connected socket to s (fd >= 0), or -errno: -ETIMEDOUT after
 * timeout_ms, -ECONNREFUSED and the like, -ECANCELED (stopping). */
int gw_connect(struct conn_ctx *ctx, const struct gw_server *s, int timeout_ms);
/* All of iov (modified) to fd: 0, -ETIMEDOUT when fd took nothing for
 * timeout_ms, or -errno (-EPIPE, -ECONNRESET...). */
int gw_writev(struct conn_ctx *ctx, int fd, struct iovec *iov, int iovcnt, int timeout_ms);
int gw_write(struct conn_ctx *ctx, int fd, const void *p, size_t len, int timeout_ms);
/* Some bytes from fd: > 0, 0 at its end, -ETIMEDOUT when nothing came for
 * timeout_ms, or -errno. */
ssize_t gw_read(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms);
/* gw_read() that, when *drained (nothing is expected to be there yet: the
 * request just went, or the last read came short of its buffer), waits
 * for fd's readiness before reading instead of trying a read that would
 * fail with EAGAIN; *drained then tells whether this read came short. */
ssize_t gw_read_ready(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms,
                      bool *drained);
/* Whether an idle pooled connection still looks usable (no end of stream,
 * no stray bytes, no error), without waiting. */
bool gw_idle_alive(int fd);
/* A read that does not wait: > 0, 0 at the end, -EAGAIN when nothing is
 * there, or -errno. */
ssize_t gw_read_now(int fd, void *buf, size_t cap);
/* Closes an upstream socket (and frees its TLS session, if it has one):
 * every upstream socket is closed by this. */
void gw_close(int fd);
