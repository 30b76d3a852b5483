/* test_worker.c - the runtime carries a protocol it knows nothing about.
 *
 * A line-echo protocol (not HTTP) runs on a real worker thread over
 * loopback: it answers each line, goes idle between lines (CONN_KEEP),
 * closes on "quit" (CONN_CLOSE), and says "timeout" when a line stays
 * incomplete past the request timeout. The runtime's slots carry its
 * per-connection and per-worker state, and its hooks are called. A line
 * "sleep N" sleeps N ms on the connection's coroutine (conn_sleep) and
 * answers "slept R": other connections are served meanwhile, and a
 * graceful stop wakes the sleeper with -ECANCELED. "nap" sleeps without
 * end until a command posted from another thread (worker_post) wakes it
 * with conn_wake(): it answers "slept 4" (CONN_WOKEN). "timers" answers how
 * many deadlines the worker's heap holds. "multi" runs three requests in
 * sub-contexts of the connection (several coroutines for one fd): one
 * answers at once, one waits for the connection to resume it, one sleeps
 * longer than the request timeout (the connection waits for them in no
 * timeout queue); their answers go through the sub-contexts' I/O hooks.
 * "kept" waits twice on a socket of its own with conn_wait_fd_kept() and
 * CONN_WAIT_DRAINED (registered by conn_watch_idle(), then by the first
 * wait: no re-arm either time), each time for a byte the test sends once
 * it read "go"; a third time it sleeps first, so that the byte's event
 * comes while nobody waits on the fd and goes to the idle handler: the
 * drained wait after must re-arm and see the byte. */
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rt/internal.h" /* the worker's timers, read by the protocol of this test */

struct line_state {
    unsigned lines; /* answered on this connection */
    bool partial;   /* part of a line is buffered */
};

struct line_worker {
    _Atomic unsigned recycled, destroyed, timeouts;
};

/* The connection in "nap", for the command that wakes it. */
static struct conn_ctx *napping;

static void wake_napper(struct worker *w, void *arg)
{
    (void)w;
    (void)arg;
    if (napping) {
        conn_wake(napping, CONN_WOKEN);
        conn_wake(napping, -EIO); /* woken already: no effect */
    }
}

/* The sub-contexts' I/O: what they write joins the connection's output. */
static void sub_writev(struct conn_ctx *sub, const struct iovec *iov, int iovcnt)
{
    for (int i = 0; i < iovcnt; i++)
        strbuf_append(&sub->parent->out, iov[i].iov_base, iov[i].iov_len);
}
static ssize_t sub_read(struct conn_ctx *sub)
{
    (void)sub;
    return 0;
}
static void sub_sendfile(struct conn_ctx *sub, int fd, off_t off, size_t len)
{
    (void)sub, (void)fd, (void)off, (void)len;
}
static const struct conn_sub_ops line_sub_ops = {
    .read = sub_read, .writev = sub_writev, .sendfile = sub_sendfile};

/* A request of "multi": "now" answers at once, "wait" once the
 * connection resumes it, "sleep" after 1500 ms. */
static void sub_request(struct conn_ctx *sub, void *arg)
{
    const char *what = arg;
    if (!strcmp(what, "wait"))
        conn_sub_wait(sub);
    else if (!strcmp(what, "sleep"))
        conn_sleep(sub, 1500);
    strbuf_append(&sub->out, what, strlen(what));
    strbuf_append(&sub->out, "\n", 1);
    conn_flush(sub); /* through line_sub_ops */
}

/* Runs on the worker thread: no CHECK here (its counters are the main
 * thread's); a failed step is named in the answer, which the main thread
 * checks. */
static void multi(struct conn_ctx *ctx)
{
    static char *const what[] = {"now", "wait", "sleep"};
    struct conn_ctx *sub[3];
    const char *bad = NULL;
    for (int i = 0; i < 3; i++) {
        sub[i] = conn_sub_new(ctx, &line_sub_ops, sub_request, what[i]);
        if (!sub[i] || sub[i]->parent != ctx || sub[i]->fd != ctx->fd) {
            strbuf_append(&ctx->out, "multi FAIL new\n", 15);
            return;
        }
        conn_sub_resume(sub[i]);
    }
    if (!conn_sub_done(sub[0]))
        bad = "now not done";
    else if (sub[1]->waiting != CONN_WAIT_PARENT || sub[2]->waiting != CONN_WAIT_TIMER)
        bad = "waits";
    else if (conn_sub_resume(sub[1]) != CORO_FINISHED)
        bad = "wait not finished";
    conn_sub_end(sub[0], CONN_CUT_PEER);
    conn_sub_end(sub[1], CONN_CUT_PEER);
    conn_flush(ctx);
    /* the sleeper: the worker resumes it and kicks us */
    if (!bad && conn_read_or_sub(ctx, true) != -EINTR)
        bad = "no kick";
    if (!bad && !conn_sub_done(sub[2]))
        bad = "sleep not done";
    conn_sub_end(sub[2], CONN_CUT_PEER);
    if (!bad && ctx->subs != NULL)
        bad = "subs left";
    if (bad) {
        strbuf_append(&ctx->out, "multi FAIL ", 11);
        strbuf_append(&ctx->out, bad, strlen(bad));
        strbuf_append(&ctx->out, "\n", 1);
        return;
    }
    strbuf_append(&ctx->out, "multi done\n", 11);
}

/* The test's end of the "kept" command's socket pair. */
static _Atomic int kept_peer = -1;

static void kept(struct conn_ctx *ctx)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0) {
        strbuf_append(&ctx->out, "kept socketpair\n", 16);
        return;
    }
    conn_kept_new(ctx, sp[0]);
    int idle = conn_watch_idle(ctx, sp[0]);
    atomic_store(&kept_peer, sp[1]);
    int r[3];
    ssize_t n[3];
    char got[8];
    for (int i = 0; i < 3; i++) {
        strbuf_append(&ctx->out, "go\n", 3);
        conn_flush(ctx);
        /* the third time the coroutine sleeps first: the byte comes while
         * nobody waits on the fd, so its edge goes to the idle handler, and
         * the drained wait after must see the byte anyway (a re-arm) */
        if (i == 2)
            conn_sleep(ctx, 300);
        /* nothing to read yet: drained (the test sends once it reads "go") */
        r[i] = conn_wait_fd_kept(ctx, sp[0], CONN_WAIT_READ | CONN_WAIT_DRAINED, 2000);
        n[i] = recv(sp[0], got, sizeof(got), MSG_DONTWAIT); /* a short read: drained again */
    }
    atomic_store(&kept_peer, -1);
    conn_kept_close(sp[0]);
    close(sp[1]);
    char msg[64];
    int len = snprintf(msg, sizeof(msg), "kept %d %d %d %d %d %d %d\n", idle, r[0], r[1], r[2],
                       (int)n[0], (int)n[1], (int)n[2]);
    strbuf_append(&ctx->out, msg, (size_t)len);
}

static enum conn_verdict line_run(struct conn_ctx *ctx)
{
    struct line_state *st = conn_state(ctx);
    for (;;) {
        char *start = ctx->in + ctx->in_pos;
        char *nl = memchr(start, '\n', ctx->in_len - ctx->in_pos);
        if (nl) {
            size_t len = (size_t)(nl - start) + 1;
            bool nap = len == 4 && !memcmp(start, "nap", 3);
            if (nap || (len > 6 && !memcmp(start, "sleep ", 6))) {
                unsigned ms = nap ? UINT32_MAX : (unsigned)atoi(start + 6);
                ctx->in_pos += len;
                if (nap)
                    napping = ctx;
                int r = conn_sleep(ctx, ms);
                napping = NULL;
                char msg[32];
                int n = snprintf(msg, sizeof(msg), "slept %d\n", r);
                strbuf_append(&ctx->out, msg, (size_t)n);
                conn_flush(ctx);
                continue;
            }
            if (len == 5 && !memcmp(start, "kept", 4)) {
                ctx->in_pos += len;
                kept(ctx);
                continue;
            }
            if (len == 6 && !memcmp(start, "multi", 5)) {
                ctx->in_pos += len;
                multi(ctx);
                continue;
            }
            if (len == 8 && !memcmp(start, "waitfor", 7)) {
                /* conn_read_or_sub_for(): nothing comes within 100 ms,
                 * then a line comes within 5 s; the timer is gone both times */
                ctx->in_pos = ctx->in_len = 0;
                ssize_t r1 = conn_read_or_sub_for(ctx, false, 100);
                unsigned t1 = ctx->worker->timers.n;
                strbuf_append(&ctx->out, "go\n", 3);
                conn_flush(ctx);
                ssize_t r2 = conn_read_or_sub_for(ctx, false, 5000);
                unsigned t2 = ctx->worker->timers.n;
                ctx->in_pos = ctx->in_len = 0; /* the line that woke it */
                char msg[64];
                int n = snprintf(msg, sizeof(msg), "waited %d %u %d %u\n", (int)r1, t1, r2 > 0, t2);
                strbuf_append(&ctx->out, msg, (size_t)n);
                conn_flush(ctx);
                continue;
            }
            if (len == 9 && !memcmp(start, "waitlong", 8)) {
                ctx->in_pos = ctx->in_len = 0; /* the peer hangs up meanwhile */
                if (conn_read_or_sub_for(ctx, false, 100000) <= 0)
                    return CONN_CLOSE;
                continue;
            }
            if (len == 7 && !memcmp(start, "timers", 6)) {
                /* the worker's pending timers, read on its own thread */
                char msg[32];
                int n = snprintf(msg, sizeof(msg), "timers %u\n", (unsigned)ctx->worker->timers.n);
                strbuf_append(&ctx->out, msg, (size_t)n);
                ctx->in_pos += len;
                continue;
            }
            strbuf_append(&ctx->out, start, len);
            ctx->in_pos += len;
            st->lines++;
            if (len == 5 && !memcmp(start, "quit", 4))
                return CONN_CLOSE;
            continue;
        }
        st->partial = ctx->in_len > ctx->in_pos;
        if (!st->partial)
            ctx->in_pos = ctx->in_len = 0;
        else
            conn_compact(ctx);
        conn_flush(ctx);
        ssize_t n = conn_read(ctx, !st->partial);
        if (n == -EAGAIN)
            return CONN_KEEP;
        if (n == 0)
            return CONN_CLOSE;
    }
}

static void line_timeout(struct conn_ctx *ctx)
{
    struct line_state *st = conn_state(ctx);
    struct line_worker *lw = conn_worker_state(ctx);
    if (st->partial) {
        ssize_t r = send(ctx->fd, "timeout\n", 8, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)r;
        atomic_fetch_add(&lw->timeouts, 1);
    }
}

static bool line_between(const struct conn_ctx *ctx)
{
    const struct line_state *st = conn_state(ctx);
    return !st->partial;
}

static void line_recycle(struct conn_ctx *ctx)
{
    struct line_worker *lw = conn_worker_state(ctx);
    *(struct line_state *)conn_state(ctx) = (struct line_state){0};
    atomic_fetch_add(&lw->recycled, 1);
}

static void line_destroy(struct conn_ctx *ctx)
{
    struct line_worker *lw = conn_worker_state(ctx);
    atomic_fetch_add(&lw->destroyed, 1);
}

static const struct conn_proto line_proto = {
    .state_size = sizeof(struct line_state),
    .run = line_run,
    .on_timeout = line_timeout,
    .between_requests = line_between,
    .recycle = line_recycle,
    .destroy = line_destroy,
};

static int client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until n bytes or end of stream; returns the count. */
static size_t read_n(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void send_str(int fd, const char *s)
{
    CHECK_EQ_INT(write(fd, s, strlen(s)), (long)strlen(s));
}

TEST(a_protocol_that_is_not_http)
{
    enum { MAX_FDS = 1024 };
    struct conn *conns = calloc(MAX_FDS, sizeof(*conns));
    struct line_worker lw = {0};
    struct worker_cfg cfg = {
        .keep_alive_s = 30,
        .request_timeout_s = 1,
        .in_cap = 4096,
        .stack_size = CORO_DEFAULT_STACK,
        .max_free_ctx = 4,
        .shutdown_grace_s = 2,
        .proto = &line_proto,
    };
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(lfd, 16) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    int port = ntohs(a.sin_port);
    int *fds = malloc(sizeof(int));
    fds[0] = lfd;

    struct worker *w;
    CHECK_EQ_INT(worker_new(&w, &cfg, 0, conns, NULL, MAX_FDS, fds, 1, &lw), 0);
    CHECK_EQ_INT(worker_start(w), 0);

    /* lines are answered; the connection idles between them */
    char buf[64] = {0};
    int c = client(port);
    CHECK(c >= 0);
    send_str(c, "hello\nworld\n");
    CHECK_EQ_INT(read_n(c, buf, 12), 12);
    CHECK(!memcmp(buf, "hello\nworld\n", 12));
    usleep(100 * 1000); /* idle: the context went back to the pool */
    CHECK(atomic_load(&lw.recycled) >= 1);
    send_str(c, "again\n");
    CHECK_EQ_INT(read_n(c, buf, 6), 6);
    CHECK(!memcmp(buf, "again\n", 6));
    /* CONN_CLOSE: the answer, then the end of the stream */
    send_str(c, "quit\n");
    CHECK_EQ_INT(read_n(c, buf, sizeof(buf)), 5);
    CHECK(!memcmp(buf, "quit\n", 5));
    close(c);

    /* half a line past the request timeout: the protocol's last words */
    c = client(port);
    send_str(c, "half a li");
    size_t n = read_n(c, buf, sizeof(buf)); /* up to the close, within ~2 s */
    CHECK_EQ_INT(n, 8);
    CHECK(!memcmp(buf, "timeout\n", 8));
    CHECK_EQ_INT(atomic_load(&lw.timeouts), 1);
    close(c);

    /* a sleep suspends its connection only, and ends after its time */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    c = client(port);
    send_str(c, "sleep 150\n");
    int c2 = client(port);
    send_str(c2, "quick\n");
    CHECK_EQ_INT(read_n(c2, buf, 6), 6);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 100);
    close(c2);
    CHECK_EQ_INT(read_n(c, buf, 8), 8);
    CHECK(!memcmp(buf, "slept 0\n", 8));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 150);
    close(c);

    /* requests in sub-contexts of one connection: their answers in the
     * order they came, the last after the request timeout (1 s) */
    c = client(port);
    send_str(c, "multi\n");
    char mbuf[64] = {0};
    CHECK_EQ_INT(read_n(c, mbuf, 26), 26);
    CHECK(!memcmp(mbuf, "now\nwait\nsleep\nmulti done\n", 26));
    close(c);

    /* a wait for input with a time limit: -ETIMEDOUT, then bytes */
    c = client(port);
    send_str(c, "waitfor\n");
    CHECK_EQ_INT(read_n(c, buf, 3), 3);
    CHECK(!memcmp(buf, "go\n", 3));
    send_str(c, "x\n");
    char wbuf[32] = {0};
    CHECK_EQ_INT(read_n(c, wbuf, 18), 18);
    CHECK(!memcmp(wbuf, "waited -110 0 1 0\n", 18));
    close(c);
    /* and a peer that hangs up during it: its timer goes with it */
    c = client(port);
    send_str(c, "waitlong\n");
    usleep(50 * 1000);
    close(c);
    usleep(50 * 1000);
    c = client(port);
    send_str(c, "timers\n");
    CHECK_EQ_INT(read_n(c, buf, 9), 9);
    CHECK(!memcmp(buf, "timers 0\n", 9));
    close(c);

    /* a peer that hangs up during a sleep: the connection is closed, the
     * worker goes on */
    c = client(port);
    send_str(c, "sleep 100000\n");
    usleep(50 * 1000);
    close(c);
    usleep(50 * 1000);
    c = client(port);
    send_str(c, "timers\n");
    CHECK_EQ_INT(read_n(c, buf, 9), 9);
    CHECK(!memcmp(buf, "timers 0\n", 9));
    close(c);

    /* conn_wake() from a command another thread posted ends a wait at once */
    c = client(port);
    send_str(c, "nap\n");
    /* posted until the nap has begun (a command before it finds none) */
    struct pollfd pfd = {.fd = c, .events = POLLIN};
    for (int i = 0; i < 100 && !poll(&pfd, 1, 0); i++) {
        struct worker_cmd *cmd = worker_cmd_new(wake_napper, NULL, NULL);
        CHECK(cmd != NULL);
        worker_post(w, cmd);
        poll(&pfd, 1, 100);
    }
    CHECK_EQ_INT(read_n(c, buf, 8), 8);
    CHECK(!memcmp(buf, "slept 4\n", 8));
    close(c);

    /* a kept fd's drained waits are woken by the bytes that come after
     * them, with no re-arm between (the registration conn_watch_idle()
     * made, then the first wait's, serves) */
    c = client(port);
    send_str(c, "kept\n");
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(read_n(c, buf, 3), 3);
        CHECK(!memcmp(buf, "go\n", 3));
        int peer = atomic_load(&kept_peer);
        CHECK(peer >= 0);
        CHECK_EQ_INT(write(peer, "k", 1), 1);
    }
    memset(buf, 0, sizeof(buf));
    CHECK_EQ_INT(read_n(c, buf, 19), 19);
    CHECK(!memcmp(buf, "kept 0 1 1 1 1 1 1\n", 19));
    close(c);

    /* a graceful stop wakes a sleeper at once and closes an idle connection */
    int sleeper = client(port);
    send_str(sleeper, "sleep 100000\n");
    c = client(port);
    send_str(c, "x\n");
    CHECK_EQ_INT(read_n(c, buf, 2), 2);
    worker_wake(w);
    CHECK_EQ_INT(read_n(sleeper, buf, sizeof(buf)), 11);
    CHECK(!memcmp(buf, "slept -125\n", 11));
    close(sleeper);
    worker_join(w);
    CHECK_EQ_INT(read_n(c, buf, sizeof(buf)), 0);
    close(c);
    worker_free(w);
    /* every context the worker made was destroyed, through the protocol */
    CHECK(atomic_load(&lw.destroyed) >= 1);
    free(conns);
}

int main(void)
{
    RUN(a_protocol_that_is_not_http);
    return test_summary();
}
