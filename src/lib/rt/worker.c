/* worker.c - the worker thread's loop: accept (rt/accept.c), wake coroutines on
 * readiness, expire timeouts, stop gracefully. */
#include "rt/internal.h"
#include "rt/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "base/tsan.h"
#include "rt/park.h"
#include "rt/sys.h"
#include "rt/tls.h"

/* --- clocks --------------------------------------------------------------- */

/* The worker's clocks, read once per wake-up through the vDSO (no system
 * call): `now` for the timeout queues, `wall_time` for the Date header the
 * HTTP layer formats from it once per second. Only the monotonic clock is
 * read on every wake-up: the coarse clocks advance together at each tick,
 * so the wall clock is the monotonic one plus an offset, kept as the
 * monotonic instant at which the next wall second begins. The wall clock
 * itself is read again whenever the monotonic second changes, so a step of
 * the system time shows within a second. */
#define NS_PER_S 1000000000ull

/* The wall clock, and with it the monotonic reading it goes with: read
 * again until no tick of the clocks came between the two, so wall_edge is
 * exact and every worker's wall second turns at the same instant. */
static void read_wall_clock(struct worker *w)
{
    struct timespec rt, mono;
    for (;;) {
        clock_gettime(CLOCK_REALTIME_COARSE, &rt);
        clock_gettime(CLOCK_MONOTONIC_COARSE, &mono);
        uint64_t m = (uint64_t)mono.tv_sec * NS_PER_S + (uint64_t)mono.tv_nsec;
        if (m == w->view.mono_ns)
            break;
        w->view.mono_ns = m;
        w->now = (uint32_t)mono.tv_sec;
    }
    w->view.wall_time = rt.tv_sec;
    w->wall_edge = w->view.mono_ns + (NS_PER_S - (uint64_t)rt.tv_nsec);
}

static void update_clocks(struct worker *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    w->view.mono_ns = (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
    if (unlikely((uint32_t)ts.tv_sec != w->now || !w->wall_edge)) {
        w->now = (uint32_t)ts.tv_sec;
        read_wall_clock(w);
    } else if (unlikely(w->view.mono_ns >= w->wall_edge)) {
        /* within one monotonic second: the wall second moved on once */
        w->view.wall_time++;
        w->wall_edge += NS_PER_S;
    }
}

/* Nanoseconds into wall_time, as of the last wake-up. */
static inline uint64_t wall_ns(const struct worker *w)
{
    return NS_PER_S - (w->wall_edge - w->view.mono_ns);
}

/* --- context pool --------------------------------------------------------- */

static void ctx_destroy(struct conn_ctx *ctx)
{
    struct worker *w = ctx->worker;
    const struct conn_proto *proto = w->cfg->proto;
    if (ctx->all_prev)
        ctx->all_prev->all_next = ctx->all_next;
    else if (w->all_ctx == ctx)
        w->all_ctx = ctx->all_next;
    if (ctx->all_next)
        ctx->all_next->all_prev = ctx->all_prev;
    if (ctx->held)
        quiesce_release(w, ctx);
    if (proto->destroy)
        proto->destroy(ctx);
    coro_free(ctx->coro);
    if (ctx->in)
        munmap(ctx->in, ctx->in_cap);
    strbuf_free(&ctx->out);
    free(ctx);
}

static void ctx_put(struct worker *w, struct conn_ctx *ctx);

/* --- parked contexts (the list: rt/park.h) ------------------------------ */

/* The connection of a parked context goes idle the ordinary way: no
 * context, in the idle queue and in epoll, as it already is. */
static void reclaim_parked(struct worker *w, struct conn_ctx *ctx)
{
    w->view.conns[ctx->fd].ctx = NULL;
    coro_reset(ctx->coro, conn_coro_main, ctx);
    ctx_put(w, ctx);
}

static struct conn_ctx *ctx_get(struct worker *w)
{
    struct conn_ctx *ctx;
    if (!w->free_ctx && (ctx = parked_victim(w)))
        reclaim_parked(w, ctx);
    ctx = w->free_ctx;
    if (ctx) {
        w->free_ctx = ctx->next_free;
        w->n_free_ctx--;
        return ctx;
    }
    ctx = calloc(1, sizeof(*ctx) + w->cfg->proto->state_size);
    if (!ctx)
        return NULL;
    ctx->worker = w;
    ctx->fd = -1;
    ctx->wait_fd = -1;
    timer_init(&ctx->timer);
    ctx->all_next = w->all_ctx;
    if (w->all_ctx)
        w->all_ctx->all_prev = ctx;
    w->all_ctx = ctx;
    /* mapped, not malloc()ed: after a burst of connections, the pages of
     * the contexts the pool does not keep go back to the system at once
     * instead of staying in the heap */
    ctx->in =
        mmap(NULL, w->cfg->in_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ctx->in == MAP_FAILED)
        ctx->in = NULL;
    ctx->in_cap = w->cfg->in_cap;
    ctx->coro = coro_new(w->cfg->stack_size, conn_coro_main, ctx);
    if (!ctx->in || !ctx->coro) {
        ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

static void ctx_put(struct worker *w, struct conn_ctx *ctx)
{
    while (unlikely(ctx->subs != NULL)) /* a protocol that left some behind */
        conn_sub_end(ctx->subs, CONN_CUT_PEER);
    ctx->parent = NULL;
    ctx->sub_ops = NULL;
    ctx->sub_kick = ctx->kick_read = false;
    if (unlikely(ctx->held)) /* its run ended: a grace period may end with it */
        quiesce_release(w, ctx);
    if (ctx->park_listed)
        parked_unlink(w, ctx);
    ctx->parked = ctx->park_used = false;
    if (w->n_free_ctx >= w->cfg->max_free_ctx) {
        ctx_destroy(ctx);
        return;
    }
    strbuf_shrink(&ctx->out, CONN_KEEP_BUF_MAX);
    ctx->tls = NULL;
    if (w->cfg->proto->recycle)
        w->cfg->proto->recycle(ctx);
    ctx->fd = -1;
    ctx->next_free = w->free_ctx;
    w->free_ctx = ctx;
    w->n_free_ctx++;
}

/* sub.c's way to the pool (the connections' own stays inline here). */
struct conn_ctx *worker_ctx_get(struct worker *w)
{
    return ctx_get(w);
}
void worker_ctx_put(struct worker *w, struct conn_ctx *ctx)
{
    ctx_put(w, ctx);
}

/* --- connections ---------------------------------------------------------- */

/* Events later in the batch that name fd (its socket's, a foreign fd's
 * waited on for it) are stale once it is closed: the number may be given to
 * a new connection at once, here by an accept later in the batch or by
 * another worker, and the event would then be taken for that connection's
 * (closing it, or touching another worker's entry). CONN_OPEN alone cannot
 * tell. A closed connection's socket rarely has an event still to come, so
 * the scan finds nothing most of the time; it costs a compare per event
 * left in the batch. */
static void void_later_events(struct worker *w, int fd)
{
    for (int i = w->batch_next; i < w->batch_n; i++) {
        uint64_t u = w->batch[i].data.u64;
        if ((!(u >> 32) || (u & EV_FOREIGN)) && EV_FD(u) == fd)
            /* a foreign fd's event still counts: for the idle handler */
            w->batch[i].data.u64 =
                (u & EV_FOREIGN) ? EV_IDLE | (uint32_t)EV_FOREIGN_FD(u) : EV_VOID;
    }
}

/* Closes the connection at fd; one with a context is told to the
 * protocol first (why: for its last words). */
static void conn_cut(struct worker *w, int fd, enum conn_cut why)
{
    struct conn *c = &w->view.conns[fd];
    tq_remove(&w->idle_q, (uint32_t)fd);
    tq_remove(&w->req_q, (uint32_t)fd);
    if (c->ctx) {
        struct conn_ctx *ctx = c->ctx;
        while (ctx->subs) /* its requests first: their log lines, their defers */
            conn_sub_end(ctx->subs, why);
        c->ctx = NULL;
        if (w->cfg->proto->abandon)
            w->cfg->proto->abandon(ctx, why);
        /* a wait's timer (also conn_read_or_sub_for()'s, waiting for input) */
        if (ctx->waiting >= CONN_WAIT_TIMER || timer_armed(&ctx->timer))
            wait_cleanup(w, ctx);
        /* runs the defers of a coroutine that was suspended mid-request */
        coro_reset(ctx->coro, conn_coro_main, ctx);
        ctx_put(w, ctx);
    }
    if (unlikely(c->flags & CONN_AT_REST)) {
        w->cfg->proto->drop_rest(w->view.proto_state, w->view.rest[fd]);
        w->view.rest[fd] = NULL;
    }
    if (unlikely(c->tls)) {
        tls_free(c->tls);
        c->tls = NULL;
    }
    c->flags = 0;
    void_later_events(w, fd);
    accept_client_release(fd);
    tsan_release(FD_SYNC(fd));
    close(fd);
    w->n_conns--;
}

static void conn_close(struct worker *w, int fd)
{
    conn_cut(w, fd, CONN_CUT_PEER);
}

static int epoll_add(struct worker *w, int fd)
{
    struct epoll_event ev = {
        /* edge-triggered, both directions, registered once: no epoll_ctl
         * when a connection switches between reading and writing */
        .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
        .data.u64 = (uint64_t)(uint32_t)fd,
    };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    w->view.conns[fd].flags |= CONN_IN_EPOLL;
    return 0;
}

/* The coroutine began conn_sleep()/conn_wait_fd() (its timer is armed,
 * its foreign fd registered). Waiting is not stalling: the connection
 * leaves the timeout queues while its own deadline runs, and its socket
 * is watched for a hangup (conn_event). Out of line: after_resume() keeps
 * its small frame. */
static __attribute__((noinline)) void wait_begin(struct worker *w, int fd, int r)
{
    struct conn *c = &w->view.conns[fd];
    c->ctx->waiting = (uint8_t)r;
    c->ctx->new_deadline = true;
    tq_remove(&w->idle_q, (uint32_t)fd);
    tq_remove(&w->req_q, (uint32_t)fd);
    if (!(c->flags & CONN_IN_EPOLL) && epoll_add(w, fd) < 0)
        conn_close(w, fd);
}

/* A connection between requests waits for the next one: the keep-alive
 * timeout runs, and epoll watches it. */
static __attribute__((noinline)) void go_idle_slow(struct worker *w, int fd)
{
    struct conn *c = &w->view.conns[fd];
    if (c->flags & CONN_IN_REQ_Q)
        tq_remove(&w->req_q, (uint32_t)fd);
    /* Already queued with the deadline a push would give (the request came
     * and went within a second): staying put keeps the queue in deadline
     * order, as every entry behind it was pushed in the same second. */
    if (!(c->flags & CONN_IN_IDLE_Q) || c->deadline != w->now + w->idle_q.timeout)
        tq_push(&w->idle_q, (uint32_t)fd, w->now);
    if (!(c->flags & CONN_IN_EPOLL) && epoll_add(w, fd) < 0)
        conn_close(w, fd);
}

/* Inline, the common case: a keep-alive connection whose request came and
 * went within the second it was queued in is where it has to be. */
static inline void go_idle(struct worker *w, int fd)
{
    const struct conn *c = &w->view.conns[fd];
    if ((c->flags & (CONN_IN_REQ_Q | CONN_IN_IDLE_Q | CONN_IN_EPOLL)) !=
            (CONN_IN_IDLE_Q | CONN_IN_EPOLL) ||
        c->deadline != w->now + w->idle_q.timeout)
        go_idle_slow(w, fd);
}

/* After the coroutine switched back to us, anything but parking: decide
 * what the connection waits for. */
static __attribute__((noinline)) void after_resume_slow(struct worker *w, int fd, int r)
{
    struct conn *c = &w->view.conns[fd];
    struct conn_ctx *ctx = c->ctx;

    if (r > 0) {
        if (unlikely(r >= CONN_WAIT_TIMER)) {
            wait_begin(w, fd, r);
            return;
        }
        ctx->waiting = (uint8_t)r;
        if (unlikely(ctx->kick_read)) {
            /* conn_read_or_sub(): keep-alive timeout, none while requests run */
            tq_remove(&w->idle_q, (uint32_t)fd);
            tq_remove(&w->req_q, (uint32_t)fd);
            if (!ctx->read_untimed)
                tq_push(&w->idle_q, (uint32_t)fd, w->now);
            if (!(c->flags & CONN_IN_EPOLL) && epoll_add(w, fd) < 0)
                conn_close(w, fd);
            return;
        }
        /* A request that has to wait joins the request-timeout queue the
         * first time; writing moves it back (progress), reading does not
         * (a client trickling bytes must still finish in time). */
        if (r == CONN_WAIT_WRITE || !(c->flags & CONN_IN_REQ_Q) || ctx->new_deadline) {
            ctx->new_deadline = false;
            tq_remove(&w->idle_q, (uint32_t)fd);
            tq_push(&w->req_q, (uint32_t)fd, w->now);
        }
        if (!(c->flags & CONN_IN_EPOLL) && epoll_add(w, fd) < 0)
            conn_close(w, fd);
        return;
    }
    if (r == CORO_ABORTED || ctx->verdict != CONN_KEEP || w->stopping) {
        conn_close(w, fd);
        return;
    }
    /* finished with nothing buffered: idle, without stack or buffers */
    c->ctx = NULL;
    ctx_put(w, ctx);
    go_idle(w, fd);
}

/* After the coroutine switched back to us: inline, the common case of a
 * keep-alive connection that parks between requests. */
static inline void after_resume(struct worker *w, int fd, int r)
{
    if (likely(r == CONN_PARK)) {
        /* idle, keeping its context on loan (rt/park.h) */
        struct conn_ctx *ctx = w->view.conns[fd].ctx;
        ctx->waiting = CONN_WAIT_READ;
        if (unlikely(ctx->held)) /* its run ended: a grace period may end with it */
            quiesce_release(w, ctx);
        parked_enter(w, ctx);
        go_idle(w, fd);
        return;
    }
    after_resume_slow(w, fd, r);
}

/* Bytes arrived on an idle (or brand new) connection. */
static void conn_start(struct worker *w, int fd, bool fresh)
{
    struct conn *c = &w->view.conns[fd];
    struct conn_ctx *ctx = ctx_get(w);
    if (!ctx) {
        conn_close(w, fd);
        return;
    }
    ctx->fd = fd;
    ctx->tls = c->tls;
    ctx->in_pos = ctx->in_len = 0;
    ctx->last_read_full = true; /* nothing read yet: there may be bytes */
    ctx->new_deadline = false;
    ctx->waiting = 0;
    ctx->unsent = 0;
    ctx->write_timeout_ms = 0;
    ctx->verdict = CONN_KEEP;
    ctx->fresh = fresh;
    coro_reset(ctx->coro, conn_coro_main, ctx);
    c->ctx = ctx;
    /* the connection stays in the idle queue while its request runs
     * without waiting: most finish before they could time out */
    after_resume(w, fd, coro_resume(ctx->coro));
}

static void conn_event(struct worker *w, int fd, uint32_t events)
{
    struct conn *c = &w->view.conns[fd];
    if (!(c->flags & CONN_OPEN))
        return; /* stale event for a connection closed in this batch */
    struct conn_ctx *ctx = c->ctx;
    if (!ctx) {
        if (events & EPOLLIN)
            conn_start(w, fd, false);
        else if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))
            conn_close(w, fd);
        return;
    }
    /* edge-triggered: input that arrives while we wait to write gives no
     * second edge, so remember it for when the writing is done */
    if ((events & (EPOLLIN | EPOLLRDHUP)) && ctx->waiting != CONN_WAIT_READ)
        ctx->last_read_full = true;
    if (unlikely(ctx->waiting >= CONN_WAIT_TIMER)) {
        /* in conn_sleep()/conn_wait_fd(): a peer that hangs up ends it */
        if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))
            conn_close(w, fd);
        return;
    }
    bool ready = (events & (EPOLLERR | EPOLLHUP)) ||
                 (ctx->waiting == CONN_WAIT_READ && (events & (EPOLLIN | EPOLLRDHUP))) ||
                 (ctx->waiting == CONN_WAIT_WRITE && (events & EPOLLOUT));
    if (ready) {
        if (ctx->parked) /* the next request, or a hangup */
            parked_leave(ctx);
        after_resume(w, fd, coro_resume(ctx->coro));
    }
}

static void adopt(struct worker *w, int fd, uint16_t listener)
{
    w->accepted++;
    if ((uint32_t)fd >= w->max_fds || w->stopping) {
        w->dropped++;
        accept_client_release(fd);
        close(fd);
        return;
    }
    w->view.conns[fd] =
        (struct conn){.prev = TQ_NIL, .next = TQ_NIL, .flags = CONN_OPEN, .listener = listener};
    w->n_conns++;
    /* TCP_DEFER_ACCEPT: the request is usually here already, so read it
     * now; the fd joins epoll only if it has to wait. */
    conn_start(w, fd, true);
}

static void take_handed_fds(struct worker *w)
{
    struct fd_ring *r = w->ring;
    uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    while (h != t) {
        int fd = r->fds[h % FD_RING_SIZE].fd;
        uint16_t listener = r->fds[h % FD_RING_SIZE].listener;
        atomic_store_explicit(&r->head, ++h, memory_order_release);
        adopt(w, fd, listener);
    }
}

static void accept_burst(struct worker *w, int lfd, uint16_t listener)
{
    /* level-triggered: take a bounded batch, epoll reports the rest */
    for (int i = 0; i < 128; i++) {
        int fd = accept_one(lfd, &w->spare_fd, w->view.peers, w->max_fds);
        if (fd < 0)
            return;
        adopt(w, fd, listener);
    }
}

/* --- waits: timers and foreign fds ----------------------------------------- */

static inline struct conn_ctx *timer_ctx(struct timer *t)
{
    return (struct conn_ctx *)((char *)t - offsetof(struct conn_ctx, timer));
}

/* A sub-context the worker resumed yielded or ended: kick its connection. */
static __attribute__((noinline)) void sub_resumed(struct worker *w, struct conn_ctx *sub, int r)
{
    sub->waiting = (uint8_t)(r > 0 ? r : 0);
    struct conn_ctx *p = sub->parent;
    p->sub_kick = true;
    if (p->kick_read && p->waiting == CONN_WAIT_READ)
        after_resume(w, p->fd, coro_resume(p->coro));
}

/* Ends ctx's wait (a connection's, or a sub-context's) with result; resumes it. */
static void wait_end(struct worker *w, struct conn_ctx *ctx, int result)
{
    wait_cleanup(w, ctx);
    ctx->wait_result = result;
    if (unlikely(ctx->parent != NULL)) {
        sub_resumed(w, ctx, coro_resume(ctx->coro));
        return;
    }
    after_resume(w, ctx->fd, coro_resume(ctx->coro));
}

/* An event of a kept fd that no connection waits on (conn_watch_idle,
 * conn_wait_fd_kept): to the idle handler, which judges it. */
static void idle_event(struct worker *w, int fd, uint32_t events)
{
    conn_idle_fn idle = worker_idle_handler();
    if (idle)
        idle(w->idx, fd, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
}

/* The wait's result for epoll's events (its own events alone; a kept
 * fd's also says when its peer ended it). */
static int wait_result(const struct conn_ctx *ctx, uint32_t events)
{
    unsigned r = 0;
    if (events & (EPOLLIN | EPOLLRDHUP))
        r |= CONN_WAIT_READ;
    if (events & EPOLLOUT)
        r |= CONN_WAIT_WRITE;
    if (events & (EPOLLERR | EPOLLHUP))
        r |= CONN_WAIT_READ | CONN_WAIT_WRITE;
    r &= ctx->wait_events;
    if (ctx->wait_fd_kept && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        r |= CONN_WAIT_HUP;
    return (int)r;
}

/* A kept fd is ready: its waiter is in its own entry (this thread's, as
 * the fd is), or nobody waits and its owner looks. */
static void kept_event(struct worker *w, int fd, uint32_t events)
{
    struct conn *k = (uint32_t)fd < w->max_fds ? &w->view.conns[fd] : NULL;
    struct conn_ctx *ctx = k ? k->kept_waiter : NULL;
    if (!ctx || ctx->waiting != CONN_WAIT_FD || ctx->wait_fd != fd) {
        /* nobody takes this edge (its waiter is away, in another wait): a
         * drained wait to come re-arms the fd, which reports what is
         * there, instead of counting on an edge that was this one */
        if (k && (k->flags & CONN_KEPT_READ))
            k->flags &= (uint16_t)~CONN_KEPT_READ;
        idle_event(w, fd, events);
        return;
    }
    wait_end(w, ctx, wait_result(ctx, events));
}

/* A foreign fd that a connection waits on is ready (the tag names both). */
static void foreign_event(struct worker *w, uint64_t u, uint32_t events)
{
    int fd = EV_FD(u);
    if (unlikely(u & EV_IDLE)) { /* a closed connection's kept fd: its owner looks */
        idle_event(w, fd, events);
        return;
    }
    if (u & EV_KEPT) {
        kept_event(w, fd, events);
        return;
    }
    struct conn_ctx *ctx = w->view.conns[fd].ctx;
    if (!(w->view.conns[fd].flags & CONN_OPEN) || !ctx) {
        /* the connection closed: a kept fd's event, for its owner */
        idle_event(w, EV_FOREIGN_FD(u), events);
        return;
    }
    if (unlikely(ctx->subs != NULL) &&
        (ctx->waiting != CONN_WAIT_FD || ctx->wait_fd != EV_FOREIGN_FD(u))) {
        struct conn_ctx *s = ctx->subs;
        while (s && (s->waiting != CONN_WAIT_FD || s->wait_fd != EV_FOREIGN_FD(u)))
            s = s->sub_next;
        if (s)
            ctx = s;
    }
    if (ctx->waiting != CONN_WAIT_FD || ctx->wait_fd != EV_FOREIGN_FD(u)) {
        /* no wait for it (ended earlier in this batch, or a kept fd that
         * stays registered between waits): for its owner */
        idle_event(w, EV_FOREIGN_FD(u), events);
        return;
    }
    wait_end(w, ctx, wait_result(ctx, events));
}

/* epoll_wait's timeout for the timeout queues and the protocol's tick. */
static inline int loop_timeout(const struct worker *w)
{
    /* tick once a second only while something can time out */
    int timeout = (w->idle_q.count || w->req_q.count || w->stopping) ? 1000 : -1;
    /* the protocol's tick: just after the next second begins (the
     * coarse clock may lag by a few milliseconds) */
    if (w->view.tick_wanted) {
        int next = 1000 - (int)(wall_ns(w) / 1000000) + 5;
        if (timeout < 0 || next < timeout)
            timeout = next;
    }
    return timeout;
}

/* Resumes the waits whose deadline came, then returns epoll_wait's timeout:
 * the earlier of the next deadline and loop_timeout(). Only the timers due
 * on entry run, so a coroutine that sleeps 0 ms again waits for the next
 * turn of the loop. */
static __attribute__((noinline)) int run_timers(struct worker *w)
{
    uint64_t now = worker_now_ms();
    struct timer *t;
    for (uint32_t budget = w->timers.n;
         budget && (t = timer_first(&w->timers)) && t->deadline <= now; budget--) {
        struct conn_ctx *ctx = timer_ctx(t);
        wait_end(w, ctx, ctx->wait_result);
    }
    int timeout = loop_timeout(w);
    if ((t = timer_first(&w->timers)) && t->deadline != TIMER_NEVER) {
        uint64_t d = t->deadline > now ? t->deadline - now : 0;
        if (timeout < 0 || d < (uint64_t)timeout)
            timeout = (int)d;
    }
    return timeout;
}

/* --- timeouts and shutdown ------------------------------------------------ */

static void expire(struct worker *w)
{
    uint32_t fd;
    while ((fd = tq_expired(&w->idle_q, w->now)) != TQ_NIL)
        conn_cut(w, (int)fd, CONN_CUT_TIMEOUT);
    while ((fd = tq_expired(&w->req_q, w->now)) != TQ_NIL) {
        struct conn_ctx *ctx = w->view.conns[fd].ctx;
        if (ctx && ctx->waiting == CONN_WAIT_READ && w->cfg->proto->on_timeout)
            w->cfg->proto->on_timeout(ctx);
        conn_cut(w, (int)fd, CONN_CUT_TIMEOUT);
    }
}

static void begin_stop(struct worker *w)
{
    w->stopping = true;
    w->stop_deadline = w->now + w->cfg->shutdown_grace_s;
    /* grace periods no longer matter: whatever waits for them is freed
     * once the workers are gone */
    quiesce_drop(w);
    for (unsigned i = 0; i < w->n_listen; i++) {
        if (w->listen_fds[i] < 0)
            continue;
        /* out of epoll first: closing an fd removes it from epoll only
         * when it was the socket's last fd, and a shared socket's other
         * dups (and systemd's copy) keep it open and reporting */
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->listen_fds[i], NULL);
        close(w->listen_fds[i]);
        w->listen_fds[i] = -1;
    }
    /* every wait ends now with -ECANCELED (and no new one begins:
     * conn_wait_fd() sees stop_requested) */
    for (uint32_t budget = w->timers.n; budget && w->timers.n; budget--)
        wait_end(w, timer_ctx(timer_first(&w->timers)), -ECANCELED);
    uint32_t fd;
    while ((fd = w->idle_q.head) != TQ_NIL)
        conn_close(w, (int)fd);
    /* connections that have not sent a byte of a request yet go too */
    for (fd = w->req_q.head; fd != TQ_NIL;) {
        uint32_t next = w->view.conns[fd].next;
        struct conn_ctx *ctx = w->view.conns[fd].ctx;
        if (!ctx || (ctx->waiting == CONN_WAIT_READ && w->cfg->proto->between_requests(ctx)))
            conn_close(w, (int)fd);
        fd = next;
    }
}

/* The stop's deadline came: whatever is still open is cut off (each
 * told to the protocol, and counted at info level). */
static void force_stop(struct worker *w)
{
    unsigned n = w->n_conns;
    while (w->timers.n)
        conn_cut(w, timer_ctx(timer_first(&w->timers))->fd, CONN_CUT_STOP);
    uint32_t fd;
    while ((fd = w->req_q.head) != TQ_NIL)
        conn_cut(w, (int)fd, CONN_CUT_STOP);
    while ((fd = w->idle_q.head) != TQ_NIL)
        conn_cut(w, (int)fd, CONN_CUT_STOP);
    /* and connections whose requests run in sub-contexts, in no queue */
    for (struct conn_ctx *ctx = w->all_ctx, *next; ctx; ctx = next) {
        next = ctx->all_next;
        if (ctx->kick_read && ctx->fd >= 0 && w->view.conns[ctx->fd].ctx == ctx) {
            conn_cut(w, ctx->fd, CONN_CUT_STOP);
            next = w->all_ctx; /* the list changed under us */
        }
    }
    n -= w->n_conns;
    if (n)
        log_msg(LOG_INFO, "stop: cut off %u connection%s after shutdown_timeout (worker %u)", n,
                n == 1 ? "" : "s", w->idx);
}

/* The idle handler's tick (conn_want_idle_tick): again next second if
 * it wants. */
static void idle_tick(struct worker *w)
{
    w->idle_tick = false;
    conn_idle_fn idle = worker_idle_handler();
    if (idle && idle(w->idx, -1, false)) {
        w->idle_tick = true;
        w->view.tick_wanted = true;
        w->view.tick_time = w->view.wall_time;
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event events[512];

    update_clocks(w);
    for (;;) {
        if (w->view.stop_requested && !w->stopping)
            begin_stop(w);
        if (w->stopping && (w->n_conns == 0 || w->now >= w->stop_deadline)) {
            force_stop(w);
            break;
        }
        int timeout = unlikely(w->timers.n) ? run_timers(w) : loop_timeout(w);
        int n = sys_epoll_wait(w->epfd, events, (int)N_ELEMENTS(events), timeout);
        uint32_t second = w->now;
        update_clocks(w);
        w->batch = events;
        w->batch_n = n;
        for (int i = 0; i < n; i++) {
            w->batch_next = i + 1;
            uint64_t u = events[i].data.u64;
            if (likely(!(u >> 32))) {
                conn_event(w, EV_FD(u), events[i].events);
            } else if (u & EV_LISTEN) {
                accept_burst(w, EV_FD(u), EV_LISTENER(u));
            } else if (u & EV_WAKE) {
                uint64_t v;
                if (read(w->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    LOG_LIMITED(LOG_ERROR, "worker %u: eventfd: %s", w->idx, strerror(errno));
                run_cmds(w);
                if (w->ring)
                    take_handed_fds(w);
            } else if (u != EV_VOID) {
                foreign_event(w, u, events[i].events);
            }
        }
        w->batch_n = 0;
        /* the last expire() left no deadline before `second`, and what
         * joined a queue since has one in it or later: nothing can expire
         * before the clock moves on */
        if (w->now != second)
            expire(w);
        if (w->view.tick_wanted && w->view.wall_time != w->view.tick_time) {
            w->view.tick_wanted = false;
            if (w->cfg->proto->tick)
                w->cfg->proto->tick(w->view.proto_state);
            if (unlikely(w->idle_tick))
                idle_tick(w);
        }
    }
    return NULL;
}

void worker_wake(struct worker *w)
{
    uint64_t one = 1;
    w->view.stop_requested = true;
    ssize_t r = write(w->wake_fd, &one, sizeof(one));
    (void)r; /* only ever fails if the counter is saturated: it is awake */
}

/* For worker_life.c: the clocks read once at creation, and the pool's
 * contexts freed at the end (both static here, where the loop inlines
 * them). */
void worker_first_clocks(struct worker *w)
{
    update_clocks(w);
}

void worker_free_pool(struct worker *w)
{
    while (w->free_ctx) {
        struct conn_ctx *next = w->free_ctx->next_free;
        ctx_destroy(w->free_ctx);
        w->free_ctx = next;
    }
}
