/* pubsub.c - a "module FILE" library for the publish/subscribe tests
 * (tests/http/test_pubsub.py builds it, like greet.c: against colibri.h
 * alone). Its module makes one channel per section and routes under the
 * section's prefix:
 *
 *   pubsub PREFIX { queue = N }     N: the channel's queue_max (default 0:
 *                                   the library's default)
 *
 *   PREFIX/sse      subscribes, sends the comment "subscribed TID" (TID:
 *                   the worker thread's id), then one event per message
 *                   (data = the message); when colibri_sub_next() fails it
 *                   sends the event "end" with the error's number and
 *                   returns. ?keepalive=MS sends a comment "ka" after MS
 *                   without a message. ?max=N: colibri_sub_end() after N
 *                   messages (then the end event says 32, EPIPE).
 *   PREFIX/pub      POST: publishes the body (from the worker), "ok"
 *   PREFIX/thread   ?n=N&size=S: a thread that is not a worker publishes
 *                   N messages "t1 xxx...", each padded to S bytes with x
 *                   (default 1 and 0); the handler waits (an eventfd) until
 *                   the thread is done, joins it, answers "published N"
 *   PREFIX/stats    "subscribers=S dropped=D"
 *   PREFIX/either   subscribes, then waits with colibri_sub_wait_fd() for
 *                   the channel or the module's eventfd (?fd=0: the channel
 *                   alone) at most ?ms= (5000): answers "sub MSG", "fd" or
 *                   "error N"
 *   PREFIX/poke     writes 1 to that eventfd
 *   PREFIX/free     a channel of its own, subscribed to; a thread publishes
 *                   "last" to it and frees it: answers "first=R:MSG then=R2"
 *                   (what the two colibri_sub_next() calls returned)
 *   PREFIX/ws       a WebSocket: every text the client sends is published;
 *                   every message on the channel is sent to the client;
 *                   a subscription error closes with 1008 and the error's
 *                   number as the reason. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "colibri.h"

static long query_long(struct colibri_request *req, const char *name, long def)
{
    struct colibri_str v;
    char buf[24];
    if (!colibri_req_query(req, name, &v) || !v.len || v.len >= sizeof(buf))
        return def;
    memcpy(buf, v.p, v.len);
    buf[v.len] = '\0';
    return strtol(buf, NULL, 10);
}

static int sse(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct colibri_channel *ch = data;
    struct colibri_sub *sub;
    if (colibri_channel_subscribe(req, ch, &sub))
        return 500;
    int keepalive = (int)query_long(req, "keepalive", -1);
    long max = query_long(req, "max", -1), got = 0;
    colibri_resp_set_type(resp, "text/event-stream");
    char hello[48];
    snprintf(hello, sizeof(hello), "subscribed %ld", (long)syscall(SYS_gettid));
    colibri_resp_send_comment(resp, hello);
    for (;;) {
        struct colibri_channel_msg m;
        int r = colibri_sub_next(sub, &m, keepalive);
        if (r == -ETIMEDOUT) {
            colibri_resp_send_comment(resp, "ka");
            continue;
        }
        if (r < 0) {
            char n[16];
            int len = snprintf(n, sizeof(n), "%d", -r);
            colibri_resp_send_event(resp, "end", n, (size_t)len);
            return 200;
        }
        colibri_resp_send_event(resp, NULL, m.p, m.len);
        if (++got == max)
            colibri_sub_end(sub);
    }
}

static int pub(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct colibri_str body;
    int r = colibri_req_body(req, &body);
    if (r)
        return r;
    if (colibri_channel_publish(data, body.p, body.len))
        return 500;
    colibri_resp_append(resp, "ok", 2);
    return 200;
}

struct job {
    struct colibri_channel *ch;
    long n, size;
    int done_fd;
};

static void *publisher(void *arg)
{
    struct job *j = arg;
    char *buf = malloc((size_t)j->size + 32);
    for (long i = 1; buf && i <= j->n; i++) {
        int len = snprintf(buf, 32, "t%ld ", i);
        while (len < j->size)
            buf[len++] = 'x';
        colibri_channel_publish(j->ch, buf, (size_t)len);
    }
    free(buf);
    uint64_t one = 1;
    if (write(j->done_fd, &one, sizeof(one)) < 0)
        abort();
    return NULL;
}

static int thread(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct job j = {.ch = data, .n = query_long(req, "n", 1), .size = query_long(req, "size", 0)};
    if ((j.done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return 500;
    pthread_t t;
    if (pthread_create(&t, NULL, publisher, &j)) {
        close(j.done_fd);
        return 500;
    }
    int r = colibri_wait_fd(req, j.done_fd, COLIBRI_WAIT_READ, -1);
    /* even when stopping: the thread uses j, so it ends first */
    pthread_join(t, NULL);
    close(j.done_fd);
    colibri_resp_printf(resp, "published %ld (%d)", j.n, r);
    return 200;
}

static void *closer(void *arg)
{
    struct job *j = arg;
    usleep(50000); /* the handler waits by then */
    colibri_channel_publish(j->ch, "last", 4);
    colibri_channel_free(j->ch);
    uint64_t one = 1;
    if (write(j->done_fd, &one, sizeof(one)) < 0)
        abort();
    return NULL;
}

static int free_(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_sub *sub;
    struct job j = {.ch = colibri_channel_new(NULL)};
    if (!j.ch || colibri_channel_subscribe(req, j.ch, &sub)) {
        colibri_channel_free(j.ch);
        return 500;
    }
    if ((j.done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return 500;
    pthread_t t;
    if (pthread_create(&t, NULL, closer, &j)) {
        close(j.done_fd);
        return 500;
    }
    struct colibri_channel_msg m = {"-", 1};
    int first = colibri_sub_next(sub, &m, 5000);
    colibri_resp_printf(resp, "first=%d:%.*s", first, (int)m.len, m.p);
    int then = colibri_sub_next(sub, &m, 5000);
    colibri_resp_printf(resp, " then=%d", then);
    colibri_wait_fd(req, j.done_fd, COLIBRI_WAIT_READ, -1);
    pthread_join(t, NULL);
    close(j.done_fd);
    return 200;
}

static int event_fd = -1;

static int either(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct colibri_sub *sub;
    if (colibri_channel_subscribe(req, data, &sub))
        return 500;
    bool fd = query_long(req, "fd", 1) != 0;
    /* the head first: the client knows it is subscribed */
    colibri_resp_send_chunk(resp, "waiting\n", 8);
    int r = colibri_sub_wait_fd(sub, fd ? event_fd : -1, fd ? COLIBRI_WAIT_READ : 0,
                                (int)query_long(req, "ms", 5000));
    struct colibri_channel_msg m;
    if (r == COLIBRI_WAIT_SUB && colibri_sub_next(sub, &m, 0) == 0) {
        colibri_resp_send_chunk(resp, "sub ", 4);
        colibri_resp_send_chunk(resp, m.p, m.len);
    } else if (r == COLIBRI_WAIT_READ) {
        uint64_t v;
        if (read(event_fd, &v, sizeof(v)) < 0)
            return 500;
        colibri_resp_send_chunk(resp, "fd", 2);
    } else {
        char n[24];
        colibri_resp_send_chunk(resp, n, (size_t)snprintf(n, sizeof(n), "error %d", r));
    }
    return 200;
}

static int poke(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    uint64_t one = 1;
    if (write(event_fd, &one, sizeof(one)) < 0)
        return 500;
    colibri_resp_append(resp, "poked", 5);
    return 200;
}

static int stats(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    colibri_resp_printf(resp, "subscribers=%zu dropped=%llu", colibri_channel_subscribers(data),
                        (unsigned long long)colibri_channel_dropped(data));
    return 200;
}

static int ws(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct colibri_ws *w;
    struct colibri_sub *sub;
    int st = colibri_ws_upgrade(req, resp, NULL, &w);
    if (st)
        return st;
    if (colibri_channel_subscribe(req, data, &sub))
        return 0;
    struct colibri_ws_msg m;
    int r;
    while ((r = colibri_ws_read_sub(w, sub, &m)) >= 0) {
        if (r == COLIBRI_WS_SUB) {
            struct colibri_channel_msg cm;
            if ((r = colibri_sub_next(sub, &cm, 0)) < 0) {
                char why[16];
                snprintf(why, sizeof(why), "%d", -r);
                colibri_ws_close(w, 1008, why);
                break;
            }
            colibri_ws_send(w, COLIBRI_WS_TEXT, cm.p, cm.len);
        } else if (m.type == COLIBRI_WS_TEXT) {
            colibri_channel_publish(data, m.p, m.len);
        }
    }
    return 0;
}

static void free_channel(void *ch)
{
    colibri_channel_free(ch);
}

static int from_config(struct colibri_server *srv, struct colibri_conf *section, char *err,
                       size_t errlen)
{
    static const struct colibri_handler hs[] = {
        {.name = "stats", .fn = stats}, /* first: its route owns the channel */
        {.name = "sse", .fn = sse},
        {.name = "pub", .fn = pub, .methods = COLIBRI_M(COLIBRI_POST), .needs = COLIBRI_NEED_BODY},
        {.name = "thread", .fn = thread},
        {.name = "ws", .fn = ws},
        {.name = "free", .fn = free_},
        {.name = "either", .fn = either},
        {.name = "poke", .fn = poke},
    };
    if (event_fd < 0 && (event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return -errno;
    struct colibri_channel_options opt = {0};
    struct colibri_conf *q = colibri_conf_take(section, "queue");
    long n = 0;
    if (q && colibri_conf_int(q, 1, 1 << 20, &n, err, errlen))
        return -EINVAL;
    opt.queue_max = (unsigned)n;
    struct colibri_channel *ch = colibri_channel_new(&opt);
    if (!ch)
        return -ENOMEM;
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", colibri_conf_value(section), hs[i].name);
        int r =
            colibri_server_add_route(srv, path, &hs[i], ch, i ? NULL : free_channel, err, errlen);
        if (r)
            return r;
    }
    return 0;
}

int colibri_module_init(struct colibri_server *srv)
{
    static const struct colibri_module m = {.name = "pubsub", .from_config = from_config};
    return colibri_server_add_module(srv, &m);
}
