/* wait.c - waiting without blocking the worker: conn_sleep() and
 * conn_wait_fd() on the coroutine's side, and the cleanup the worker does
 * when a wait ends. The worker's side of timers and foreign events is in
 * worker.c (the loop). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "rt/internal.h"
#include "rt/tls.h"

uint64_t worker_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

unsigned conn_worker_index(const struct conn_ctx *ctx)
{
    return ctx->worker->idx;
}

/* How far the coarse clock may lag the real one: its resolution (a
 * jiffy, 4 ms at HZ 250), rounded up to whole milliseconds. A wait of N ms
 * that starts from a lagging reading gets this much more, so it never ends
 * early in real time. */
uint64_t wait_coarse_lag_ms(void)
{
    static _Atomic uint64_t lag; /* 0: not read yet; every thread reads the same */
    uint64_t l = atomic_load_explicit(&lag, memory_order_relaxed);
    if (!l) {
        struct timespec res = {0, 10000000}; /* 10 ms if the kernel cannot say */
        clock_getres(CLOCK_MONOTONIC_COARSE, &res);
        l = (uint64_t)res.tv_sec * 1000 + ((uint64_t)res.tv_nsec + 999999) / 1000000;
        l = l ? l : 1;
        atomic_store_explicit(&lag, l, memory_order_relaxed);
    }
    return l;
}

/* The events an fd is registered for: one-shot, but a kept fd's wait for
 * reading alone (edge-triggered: it stays armed, conn_wait_fd_kept). */
static int watch_op_as(struct conn_ctx *ctx, int op, int fd, unsigned events, bool kept)
{
    if (fd >= EV_FOREIGN_MAX)
        return -EMFILE; /* the tag has 24 bits for it */
    struct epoll_event ev = {
        .events = (kept && events == CONN_WAIT_READ ? EPOLLET : EPOLLONESHOT) |
                  ((events & CONN_WAIT_READ) ? EPOLLIN | EPOLLRDHUP : 0) |
                  ((events & CONN_WAIT_WRITE) ? EPOLLOUT : 0),
        /* a kept fd stays registered after the wait: its tag names no
         * connection (the waiter is in its entry, kept_waiter) */
        .data.u64 = kept ? EV_FOREIGN_OF(fd, fd) | EV_KEPT : EV_FOREIGN_OF(fd, ctx->fd),
    };
    if (epoll_ctl(ctx->worker->epfd, op, fd, &ev) < 0)
        return -errno;
    return 0;
}

static int watch_op(struct conn_ctx *ctx, int op, int fd, unsigned events)
{
    return watch_op_as(ctx, op, fd, events, false);
}

static int watch_one(struct conn_ctx *ctx, int fd, unsigned events)
{
    return watch_op(ctx, EPOLL_CTL_ADD, fd, events);
}

/* Registers fd with the worker's epoll for this wait. An fd that is there
 * already (another connection waits on it too) is registered as a dup(). */
static int watch(struct conn_ctx *ctx, int fd, unsigned events)
{
    int r = watch_one(ctx, fd, events);
    if (r != -EEXIST) {
        if (!r)
            ctx->wait_fd = fd;
        return r;
    }
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return -errno;
    if ((r = watch_one(ctx, d, events)) < 0) {
        close(d);
        return r;
    }
    ctx->wait_fd = d;
    ctx->wait_fd_dup = true;
    return 0;
}

void wait_cleanup(struct worker *w, struct conn_ctx *ctx)
{
    timer_del(&w->timers, &ctx->timer);
    if (ctx->wait_fd < 0)
        return;
    if (ctx->wait_fd_kept) {
        /* stays registered (one-shot: disarmed once it fired), waited on
         * by nobody */
        if ((uint32_t)ctx->wait_fd < w->max_fds)
            w->view.conns[ctx->wait_fd].kept_waiter = NULL;
        ctx->wait_fd = -1;
        ctx->wait_fd_kept = false;
        return;
    }
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, ctx->wait_fd, NULL);
    if (ctx->wait_fd_dup)
        close(ctx->wait_fd);
    ctx->wait_fd = -1;
    ctx->wait_fd_dup = false;
}

/* The wait itself, once what it watches is registered: until the fd is
 * ready (fd >= 0) or timeout_ms passed (< 0: no limit). */
static int wait_yield(struct conn_ctx *ctx, int fd, unsigned events, int timeout_ms)
{
    struct worker *w = ctx->worker;
    uint64_t deadline = timeout_ms < 0 ? TIMER_NEVER : worker_now_ms() + (uint64_t)timeout_ms;
    if (timeout_ms > 0)
        deadline += wait_coarse_lag_ms();
    if (timer_add(&w->timers, &ctx->timer, deadline) < 0) {
        wait_cleanup(w, ctx);
        return -ENOMEM;
    }
    ctx->wait_events = (uint8_t)events;
    /* what the timer's expiry means; an fd's readiness replaces it */
    ctx->wait_result = fd >= 0 ? -ETIMEDOUT : 0;
    coro_yield(ctx->coro, fd >= 0 ? CONN_WAIT_FD : CONN_WAIT_TIMER);
    ctx->waiting = 0;
    return ctx->wait_result;
}

int conn_wait_fd(struct conn_ctx *ctx, int fd, unsigned events, int timeout_ms)
{
    if (conn_stopping(ctx))
        return -ECANCELED;
    events &= CONN_WAIT_READ | CONN_WAIT_WRITE;
    if (fd == CONN_FD_SELF) {
        /* the connection's own socket: what the transport holds already
         * is there to read; otherwise a dup() of the socket (registered
         * with epoll already) is watched */
        if (events != CONN_WAIT_READ)
            return -EINVAL;
        if (ctx->sub_ops) /* a sub-context: its protocol's input */
            return ctx->sub_ops->wait_input ? ctx->sub_ops->wait_input(ctx, timeout_ms) : -EINVAL;
        if (tls_pending(ctx))
            return CONN_WAIT_READ;
        int d = fcntl(ctx->fd, F_DUPFD_CLOEXEC, 0);
        if (d < 0)
            return -errno;
        int r = watch_one(ctx, d, events);
        if (r < 0) {
            close(d);
            return r;
        }
        ctx->wait_fd = d;
        ctx->wait_fd_dup = true;
        fd = d;
    } else if (fd >= 0) {
        if (!events)
            return -EINVAL;
        int r = watch(ctx, fd, events);
        if (r)
            return r;
    }
    return wait_yield(ctx, fd, events, timeout_ms);
}

int conn_wait_fd_kept(struct conn_ctx *ctx, int fd, unsigned events, int timeout_ms)
{
    if (conn_stopping(ctx))
        return -ECANCELED;
    bool drained = events & CONN_WAIT_DRAINED;
    events &= CONN_WAIT_READ | CONN_WAIT_WRITE;
    if (fd < 0 || !events)
        return -EINVAL;
    struct worker *w = ctx->worker;
    if ((uint32_t)fd >= w->max_fds)
        return -EMFILE;
    struct conn *k = &w->view.conns[fd];
    /* re-armed with this wait's events; added the first time. Not when it
     * is registered for reading, edge-triggered, from an earlier wait (or
     * conn_watch_idle) and the caller's read drained it: the bytes to come
     * make an edge that the worker sees once this coroutine yields, and
     * brings to kept_waiter (a proxied request's wait for its answer costs
     * no system call) */
    if (!(drained && events == CONN_WAIT_READ && (k->flags & CONN_KEPT_READ))) {
        int r = watch_op_as(ctx, EPOLL_CTL_MOD, fd, events, true);
        if (r == -ENOENT)
            r = watch_op_as(ctx, EPOLL_CTL_ADD, fd, events, true);
        if (r)
            return r;
    }
    if (events == CONN_WAIT_READ)
        k->flags |= CONN_KEPT_READ;
    else
        k->flags &= (uint16_t)~CONN_KEPT_READ;
    k->kept_waiter = ctx;
    ctx->wait_fd = fd;
    ctx->wait_fd_kept = true;
    return wait_yield(ctx, fd, events, timeout_ms);
}

/* set again at every (re)load of a config (a reload runs on the control
 * thread while the workers call it): an atomic pointer */
_Atomic(conn_idle_fn) worker_idle_fn;

void conn_set_idle_handler(conn_idle_fn fn)
{
    atomic_store_explicit(&worker_idle_fn, fn, memory_order_release);
}

void conn_kept_new(struct conn_ctx *ctx, int fd)
{
    struct worker *w = ctx->worker;
    /* the number may have been another thread's connection until its
     * close (conn_cut, conn_kept_close): that thread's writes to the entry
     * came before */
    tsan_acquire(FD_SYNC(fd));
    if (fd >= 0 && (uint32_t)fd < w->max_fds) {
        w->view.conns[fd].flags &= (uint16_t)~CONN_KEPT_READ;
        w->view.conns[fd].kept_waiter = NULL;
    }
}

void conn_kept_close(int fd)
{
    tsan_release(FD_SYNC(fd));
    close(fd);
}

void conn_kept_forget(struct conn_ctx *ctx, int fd)
{
    struct worker *w = ctx->worker;
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
    conn_kept_new(ctx, fd);
}

int conn_watch_idle(struct conn_ctx *ctx, int fd)
{
    struct worker *w = ctx->worker;
    if (fd < 0 || (uint32_t)fd >= w->max_fds || fd >= EV_FOREIGN_MAX)
        return -EMFILE;
    struct conn *c = &w->view.conns[fd];
    if (c->flags & CONN_KEPT_READ)
        return 0; /* its last wait left it watched: nothing to do */
    /* tagged as a wait leaves it (kept_event finds no waiter: the idle
     * handler), so that a later drained wait needs no re-arm either */
    struct epoll_event ev = {.events = EPOLLET | EPOLLIN | EPOLLRDHUP,
                             .data.u64 = EV_FOREIGN_OF(fd, fd) | EV_KEPT};
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 &&
        (errno != ENOENT || epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0))
        return -errno;
    c->flags |= CONN_KEPT_READ;
    return 0;
}

void conn_want_idle_tick(struct conn_ctx *ctx)
{
    ctx->worker->idle_tick = true;
    conn_want_tick(ctx);
}

int conn_sleep(struct conn_ctx *ctx, unsigned ms)
{
    return conn_wait_fd(ctx, -1, 0, (int)MIN(ms, (unsigned)INT32_MAX));
}

void conn_wake(struct conn_ctx *ctx, int result)
{
    struct worker *w = ctx->worker;
    if (ctx->waiting < CONN_WAIT_TIMER || !timer_armed(&ctx->timer) || ctx->timer.deadline == 0)
        return;
    ctx->wait_result = result;
    /* due at once: run_timers() resumes it with wait_result; re-adding
     * the slot just freed cannot fail */
    timer_del(&w->timers, &ctx->timer);
    timer_add(&w->timers, &ctx->timer, 0);
}
