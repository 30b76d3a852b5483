/* pubsub.c - channels: messages published by any thread, fanned out to
 * the connections subscribed (colibri_channel_*, colibri_sub_*).
 *
 * A channel knows, per worker thread that ever had a subscriber, a slot:
 * the worker, its count of subscribers (under the channel's lock) and the
 * list of them (touched by that worker's thread alone). Publishing copies
 * the bytes once into a reference-counted message and, under the lock,
 * posts one command to each worker whose slot has subscribers
 * (worker_post); posting every message under one lock gives every worker
 * the same order. The command runs on the worker: each subscriber gets a
 * reference in its bounded queue, and one waiting in colibri_sub_next() or
 * colibri_ws_read_sub() is woken (conn_wake: resumed at the worker's next
 * turn, so nothing runs under our feet while the list is walked). A
 * subscriber whose queue is full is dropped there and then.
 *
 * Lifetimes: a message lives while a command or a queue holds it; the
 * channel while its owner, a subscription or a pending command does (a
 * slot lives as long as its channel). A subscription is freed by its
 * handler's defer, which runs when the handler returns or its connection
 * dies. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "http/pubsub.h"
#include "http/metrics.h"
#include "http/request.h"
#include "rt/conn.h"

#define QUEUE_MAX_DEFAULT 256
#define QUEUE_FIRST       8 /* a queue grows by doubling, up to queue_max */

struct ps_msg {
    _Atomic uint32_t refs;
    size_t len;
    char data[]; /* len bytes and a NUL */
};

struct ps_slot {
    struct ps_slot *next; /* written under the channel's lock, before it is published */
    struct worker *w;
    size_t n;                 /* subscribers, under the lock */
    struct colibri_sub *subs; /* the worker's thread alone */
};

struct colibri_channel {
    pthread_mutex_t lock;
    struct ps_slot *slots;
    _Atomic uint32_t refs;
    _Atomic uint64_t dropped;
    unsigned queue_max;
};

struct colibri_sub {
    struct colibri_channel *ch;
    struct ps_slot *slot;
    struct colibri_request *req;
    struct colibri_sub *prev, *next; /* in slot->subs while linked */
    struct ps_msg **q;               /* a ring: q_len messages from q_head */
    unsigned q_cap, q_head, q_len;
    struct ps_msg *cur; /* the message colibri_sub_next() handed out */
    int error;          /* 0, or what colibri_sub_next() returns once the queue is empty */
    bool linked;
    bool waiting; /* in ps_wait_fd(): a message wakes it */
};

/* What a worker_post() command carries: one message (NULL: the channel
 * closed) for one worker's subscribers. */
struct ps_post {
    struct colibri_channel *ch;
    struct ps_slot *slot;
    struct ps_msg *msg;
};

static void msg_unref(struct ps_msg *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        free(m);
}

static void ch_unref(struct colibri_channel *ch)
{
    if (atomic_fetch_sub_explicit(&ch->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (struct ps_slot *s = ch->slots, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    pthread_mutex_destroy(&ch->lock);
    free(ch);
}

struct colibri_channel *colibri_channel_new(const struct colibri_channel_options *opt)
{
    struct colibri_channel *ch = calloc(1, sizeof(*ch));
    if (!ch)
        return NULL;
    pthread_mutex_init(&ch->lock, NULL);
    atomic_init(&ch->refs, 1);
    ch->queue_max = opt && opt->queue_max ? opt->queue_max : QUEUE_MAX_DEFAULT;
    return ch;
}

/* --- on a worker's thread ------------------------------------------------------ */

static void wake(struct colibri_sub *sub)
{
    if (sub->waiting)
        conn_wake(sub->req->ctx, CONN_WOKEN);
}

/* Out of the channel: no message reaches it any more. */
static void unlink_sub(struct colibri_sub *sub)
{
    if (!sub->linked)
        return;
    sub->linked = false;
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        sub->slot->subs = sub->next;
    if (sub->next)
        sub->next->prev = sub->prev;
    pthread_mutex_lock(&sub->ch->lock);
    sub->slot->n--;
    pthread_mutex_unlock(&sub->ch->lock);
}

/* What it queued and did not take is released. */
static void release_queue(struct colibri_sub *sub)
{
    for (; sub->q_len; sub->q_len--, sub->q_head = (sub->q_head + 1) % sub->q_cap)
        msg_unref(sub->q[sub->q_head]);
    free(sub->q);
    sub->q = NULL;
    sub->q_cap = 0;
}

static void drop(struct colibri_sub *sub, bool full)
{
    char addr[64];
    if (colibri_req_remote_addr(sub->req, addr, sizeof(addr)) < 0)
        strcpy(addr, "?");
    sub->error = -ENOBUFS;
    unlink_sub(sub);
    release_queue(sub);
    atomic_fetch_add_explicit(&sub->ch->dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&http_metrics_sub_drops, 1, memory_order_relaxed);
    if (full)
        LOG_LIMITED(LOG_WARN, "channel subscriber %s dropped: %u messages behind", addr,
                    sub->ch->queue_max);
    else
        LOG_LIMITED(LOG_WARN, "channel subscriber %s dropped: out of memory", addr);
    wake(sub);
}

/* Queues m for sub; false when the queue is full (or cannot grow). */
static bool push(struct colibri_sub *sub, struct ps_msg *m, unsigned max)
{
    if (sub->q_len == sub->q_cap) {
        if (sub->q_cap >= max)
            return false;
        unsigned cap = sub->q_cap ? sub->q_cap * 2 : QUEUE_FIRST;
        if (cap > max)
            cap = max;
        struct ps_msg **q = malloc(cap * sizeof(*q));
        if (!q)
            return false;
        for (unsigned i = 0; i < sub->q_len; i++)
            q[i] = sub->q[(sub->q_head + i) % sub->q_cap];
        free(sub->q);
        sub->q = q;
        sub->q_cap = cap;
        sub->q_head = 0;
    }
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    sub->q[(sub->q_head + sub->q_len++) % sub->q_cap] = m;
    return true;
}

static void post_free(struct ps_post *p)
{
    msg_unref(p->msg);
    ch_unref(p->ch);
    free(p);
}

static void post_drop(void *arg)
{
    post_free(arg);
}

/* The command: one message to this worker's subscribers. */
static void deliver(struct worker *w, void *arg)
{
    (void)w;
    struct ps_post *p = arg;
    unsigned max = p->ch->queue_max;
    for (struct colibri_sub *sub = p->slot->subs, *next; sub; sub = next) {
        next = sub->next; /* dropping unlinks sub, and only sub */
        if (!p->msg) {    /* closed: what it queued is still taken first */
            sub->error = -EPIPE;
            unlink_sub(sub);
            wake(sub);
        } else if (!push(sub, p->msg, max)) {
            drop(sub, sub->q_cap >= max);
        } else {
            wake(sub);
        }
    }
    post_free(p);
}

/* Posts msg (NULL: closed) to every worker with subscribers; under the lock. */
static int post_all(struct colibri_channel *ch, struct ps_msg *msg)
{
    int r = 0;
    for (struct ps_slot *s = ch->slots; s; s = s->next) {
        if (!s->n)
            continue;
        struct ps_post *p = malloc(sizeof(*p));
        if (!p) {
            r = -ENOMEM;
            continue;
        }
        *p = (struct ps_post){.ch = ch, .slot = s, .msg = msg};
        atomic_fetch_add_explicit(&ch->refs, 1, memory_order_relaxed);
        if (msg)
            atomic_fetch_add_explicit(&msg->refs, 1, memory_order_relaxed);
        struct worker_cmd *c = worker_cmd_new(deliver, post_drop, p);
        if (!c) {
            post_free(p);
            r = -ENOMEM;
            continue;
        }
        worker_post(s->w, c);
    }
    return r;
}

/* --- any thread ------------------------------------------------------------------ */

int colibri_channel_publish(struct colibri_channel *ch, const void *p, size_t len)
{
    struct ps_msg *m = malloc(sizeof(*m) + len + 1);
    if (!m)
        return -ENOMEM;
    atomic_init(&m->refs, 1);
    m->len = len;
    if (len)
        memcpy(m->data, p, len);
    m->data[len] = '\0';
    pthread_mutex_lock(&ch->lock);
    int r = post_all(ch, m);
    pthread_mutex_unlock(&ch->lock);
    msg_unref(m);
    return r;
}

void colibri_channel_free(struct colibri_channel *ch)
{
    if (!ch)
        return;
    pthread_mutex_lock(&ch->lock);
    post_all(ch, NULL);
    pthread_mutex_unlock(&ch->lock);
    ch_unref(ch);
}

uint64_t colibri_channel_dropped(struct colibri_channel *ch)
{
    return atomic_load_explicit(&ch->dropped, memory_order_relaxed);
}

size_t colibri_channel_subscribers(struct colibri_channel *ch)
{
    size_t n = 0;
    pthread_mutex_lock(&ch->lock);
    for (struct ps_slot *s = ch->slots; s; s = s->next)
        n += s->n;
    pthread_mutex_unlock(&ch->lock);
    return n;
}

/* --- the subscriber's handler ------------------------------------------------------ */

static void sub_free(void *arg)
{
    struct colibri_sub *sub = arg;
    unlink_sub(sub);
    release_queue(sub);
    msg_unref(sub->cur);
    ch_unref(sub->ch);
    free(sub);
}

int colibri_channel_subscribe(struct colibri_request *req, struct colibri_channel *ch,
                              struct colibri_sub **out)
{
    struct worker *w = req->ctx->worker;
    struct colibri_sub *sub = calloc(1, sizeof(*sub));
    *out = NULL;
    if (!sub)
        return -ENOMEM;
    pthread_mutex_lock(&ch->lock);
    struct ps_slot *s = ch->slots;
    while (s && s->w != w)
        s = s->next;
    if (!s && (s = calloc(1, sizeof(*s)))) {
        s->w = w;
        s->next = ch->slots;
        ch->slots = s;
    }
    if (s)
        s->n++;
    pthread_mutex_unlock(&ch->lock);
    if (!s) {
        free(sub);
        return -ENOMEM;
    }
    atomic_fetch_add_explicit(&ch->refs, 1, memory_order_relaxed);
    *sub = (struct colibri_sub){.ch = ch, .slot = s, .req = req, .next = s->subs, .linked = true};
    if (s->subs)
        s->subs->prev = sub;
    s->subs = sub;
    if (colibri_defer(req, sub_free, sub) < 0)
        return -ENOMEM; /* it ran already */
    http_metrics_stream(req, HTTP_METRICS_SUB);
    *out = sub;
    return 0;
}

void colibri_sub_end(struct colibri_sub *sub)
{
    if (!sub->error)
        sub->error = -EPIPE;
    unlink_sub(sub);
    release_queue(sub);
}

int ps_wait_fd(struct colibri_sub *sub, int fd, unsigned events, int timeout_ms)
{
    if (sub->q_len || sub->error)
        return CONN_WOKEN;
    sub->waiting = true;
    int r = conn_wait_fd(sub->req->ctx, fd, events, timeout_ms);
    sub->waiting = false;
    return r;
}

int colibri_sub_wait_fd(struct colibri_sub *sub, int fd, unsigned events, int timeout_ms)
{
    _Static_assert(COLIBRI_WAIT_SUB == CONN_WOKEN, "the runtime's bit is the API's");
    events &= COLIBRI_WAIT_READ | COLIBRI_WAIT_WRITE;
    if (fd >= 0 ? !events : events)
        return -EINVAL;
    if (!sub->q_len && !sub->error)
        conn_flush(sub->req->ctx);
    int r = ps_wait_fd(sub, fd, events, timeout_ms < 0 ? -1 : timeout_ms);
    return fd < 0 && r == 0 ? -ETIMEDOUT : r;
}

int colibri_sub_next(struct colibri_sub *sub, struct colibri_channel_msg *msg, int timeout_ms)
{
    struct conn_ctx *ctx = sub->req->ctx;
    msg_unref(sub->cur);
    sub->cur = NULL;
    uint64_t deadline = timeout_ms < 0 ? 0 : worker_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (conn_stopping(ctx))
            return -ECANCELED;
        if (sub->q_len) {
            struct ps_msg *m = sub->q[sub->q_head];
            sub->q_head = (sub->q_head + 1) % sub->q_cap;
            sub->q_len--;
            sub->cur = m;
            msg->p = m->data;
            msg->len = m->len;
            return 0;
        }
        if (sub->error)
            return sub->error;
        int wait = -1;
        if (timeout_ms >= 0) {
            uint64_t now = worker_now_ms();
            if (now >= deadline)
                return -ETIMEDOUT;
            wait = (int)(deadline - now);
        }
        conn_flush(ctx);
        int r = ps_wait_fd(sub, -1, 0, wait);
        if (r < 0)
            return r;
    }
}
