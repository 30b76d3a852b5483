/* sub.c - several coroutines for one connection (rt/conn.h): sub-contexts
 * from the worker's pool, run by the connection's coroutine or, for their
 * timers and fds, by the worker (worker.c: sub_resumed() kicks the
 * connection), ended with the connection. */
#include <errno.h>

#include "rt/internal.h"

static char sub_transport; /* a sub-context's ctx->tls: its I/O takes the slow paths */

static void sub_main(struct coro *coro, void *arg)
{
    struct conn_ctx *sub = arg;
    (void)coro;
    sub->sub_fn(sub, sub->sub_arg);
}

struct conn_ctx *conn_sub_new(struct conn_ctx *parent, const struct conn_sub_ops *ops,
                              void (*fn)(struct conn_ctx *sub, void *arg), void *arg)
{
    struct worker *w = parent->worker;
    struct conn_ctx *ctx = worker_ctx_get(w);
    if (!ctx)
        return NULL;
    ctx->fd = parent->fd;
    ctx->tls = &sub_transport;
    ctx->parent = parent;
    ctx->sub_ops = ops;
    ctx->sub_fn = fn;
    ctx->sub_arg = arg;
    ctx->in_pos = ctx->in_len = 0;
    ctx->last_read_full = false;
    ctx->new_deadline = false;
    ctx->waiting = 0;
    ctx->unsent = 0;
    ctx->verdict = CONN_KEEP;
    ctx->fresh = false;
    coro_reset(ctx->coro, sub_main, ctx);
    ctx->sub_prev = NULL;
    ctx->sub_next = parent->subs;
    if (parent->subs)
        parent->subs->sub_prev = ctx;
    parent->subs = ctx;
    return ctx;
}

void conn_sub_end(struct conn_ctx *sub, enum conn_cut why)
{
    struct worker *w = sub->worker;
    struct conn_ctx *p = sub->parent;
    if (sub->sub_prev)
        sub->sub_prev->sub_next = sub->sub_next;
    else
        p->subs = sub->sub_next;
    if (sub->sub_next)
        sub->sub_next->sub_prev = sub->sub_prev;
    sub->sub_prev = sub->sub_next = NULL;
    if (w->cfg->proto->abandon)
        w->cfg->proto->abandon(sub, why);
    wait_cleanup(w, sub);
    /* runs the defers of a coroutine suspended mid-request */
    coro_reset(sub->coro, conn_coro_main, sub);
    worker_ctx_put(w, sub);
}

ssize_t conn_read_or_sub_for(struct conn_ctx *ctx, bool busy, int timeout_ms)
{
    struct worker *w = ctx->worker;
    for (;;) {
        if (ctx->sub_kick) {
            ctx->sub_kick = false;
            return -EINTR;
        }
        ssize_t n = conn_read(ctx, true);
        if (n != -EAGAIN)
            return n;
        conn_flush(ctx);
        if (ctx->sub_kick)
            continue;
        /* the timer of conn_sleep(), idle now: run_timers() resumes the
         * wait when it expires (and disarms it), as for a sleep */
        bool timed = timeout_ms >= 0 &&
                     !timer_add(&w->timers, &ctx->timer,
                                worker_now_ms() + (uint64_t)timeout_ms + wait_coarse_lag_ms());
        ctx->kick_read = true;
        ctx->read_untimed = busy;
        conn_wait_io(ctx, CONN_WAIT_READ);
        ctx->kick_read = false;
        if (timed) {
            if (!timer_armed(&ctx->timer))
                return -ETIMEDOUT;
            timer_del(&w->timers, &ctx->timer);
        }
    }
}

ssize_t conn_read_or_sub(struct conn_ctx *ctx, bool busy)
{
    return conn_read_or_sub_for(ctx, busy, -1);
}

void conn_sub_wait(struct conn_ctx *sub)
{
    coro_yield(sub->coro, CONN_WAIT_PARENT);
    sub->waiting = 0;
}

int conn_sub_resume(struct conn_ctx *sub)
{
    if (sub->waiting == CONN_WAIT_TIMER || sub->waiting == CONN_WAIT_FD)
        return sub->waiting; /* the worker resumes it */
    int r = coro_resume(sub->coro);
    sub->waiting = (uint8_t)(r > 0 ? r : 0);
    return r;
}
