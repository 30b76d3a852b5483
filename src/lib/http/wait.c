/* wait.c - colibri_sleep() and colibri_wait_fd(): a handler waits on its
 * connection's coroutine (rt/wait.c), and what the response has buffered
 * leaves first, so a streamed piece is not held back by the wait. */
#include <errno.h>

#include "http/request.h"
#include "rt/conn.h"

/* What is buffered for the client goes before the wait: the head of a
 * stream, answers to earlier pipelined requests. */
static void before_wait(struct colibri_request *req)
{
    conn_flush(req->ctx);
}

int colibri_sleep(struct colibri_request *req, unsigned ms)
{
    before_wait(req);
    return conn_sleep(req->ctx, ms);
}

int colibri_wait_fd(struct colibri_request *req, int fd, unsigned events, int timeout_ms)
{
    _Static_assert(COLIBRI_WAIT_READ == CONN_WAIT_READ && COLIBRI_WAIT_WRITE == CONN_WAIT_WRITE,
                   "the runtime's bits are the API's");
    if (fd < 0 || !(events & (COLIBRI_WAIT_READ | COLIBRI_WAIT_WRITE)))
        return -EINVAL;
    before_wait(req);
    return conn_wait_fd(req->ctx, fd, events, timeout_ms < 0 ? -1 : timeout_ms);
}
