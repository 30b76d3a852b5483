/* stats.c - the connections' states for the metrics (conn_stats, rt/conn.h).
 *
 * Nothing is counted on a request's path: a worker keeps two plain
 * counters per connection (accepted, dropped, in adopt()), and the states
 * are worked out from what the worker knows anyway (its connection count,
 * the contexts in use and what each waits for) when a scrape asks. The
 * scraping coroutine posts the question to every other worker, answers it
 * for its own, and sleeps until all have published (struct worker.pub). */
#include <pthread.h>

#include "rt/accept.h"
#include "rt/internal.h"

#define STATS_WAIT_MS 100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct worker *workers; /* linked by stats_next */
static _Atomic uint64_t asked; /* the generation of the last question */

void stats_register(struct worker *w)
{
    pthread_mutex_lock(&lock);
    w->stats_next = workers;
    workers = w;
    pthread_mutex_unlock(&lock);
}

void stats_unregister(struct worker *w)
{
    pthread_mutex_lock(&lock);
    for (struct worker **p = &workers; *p; p = &(*p)->stats_next)
        if (*p == w) {
            *p = w->stats_next;
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* On w's thread: its figures into w->pub. self is the context that asks
 * (running, so writing), or NULL. */
static void publish(struct worker *w, const struct conn_ctx *self)
{
    const struct conn_proto *proto = w->cfg->proto;
    uint32_t reading = 0, writing = 0;
    for (const struct conn_ctx *x = w->all_ctx; x; x = x->all_next) {
        /* free, idle (parked) or a sub-context (its connection counts) */
        if (x->fd < 0 || x->parked || x->parent)
            continue;
        if (x == self || x->waiting != CONN_WAIT_READ)
            writing++;
        else if (proto->between_requests && !proto->between_requests(x))
            reading++;
    }
    uint32_t active = w->n_conns;
    reading = reading < active ? reading : active;
    writing = writing < active - reading ? writing : active - reading;
    struct conn_stats_pub *p = &w->pub;
    atomic_store_explicit(&p->accepted, w->accepted, memory_order_relaxed);
    atomic_store_explicit(&p->handled, w->accepted - w->dropped, memory_order_relaxed);
    atomic_store_explicit(&p->active, active, memory_order_relaxed);
    atomic_store_explicit(&p->reading, reading, memory_order_relaxed);
    atomic_store_explicit(&p->writing, writing, memory_order_relaxed);
    atomic_store_explicit(&p->waiting, active - reading - writing, memory_order_relaxed);
    atomic_store_explicit(&p->gen, atomic_load(&asked), memory_order_release);
}

static void publish_cmd(struct worker *w, void *arg)
{
    (void)arg;
    publish(w, NULL);
}

/* Whether every worker answered generation gen (under lock). */
static bool all_answered(uint64_t gen)
{
    for (const struct worker *w = workers; w; w = w->stats_next)
        if (atomic_load_explicit(&w->pub.gen, memory_order_acquire) < gen)
            return false;
    return true;
}

void conn_stats(struct conn_ctx *ctx, struct conn_stats *out)
{
    const struct conn_ctx *self = ctx;
    while (self->parent)
        self = self->parent; /* an HTTP/2 stream: its connection is the one at work */
    pthread_mutex_lock(&lock);
    uint64_t gen = atomic_fetch_add(&asked, 1) + 1;
    for (struct worker *w = workers; w; w = w->stats_next) {
        if (w == ctx->worker)
            continue;
        struct worker_cmd *c = worker_cmd_new(publish_cmd, NULL, NULL);
        if (c)
            worker_post(w, c);
    }
    publish(ctx->worker, self);
    bool done = all_answered(gen);
    pthread_mutex_unlock(&lock);
    for (unsigned waited = 0; !done && waited < STATS_WAIT_MS; waited += 2) {
        conn_sleep(ctx, 2);
        pthread_mutex_lock(&lock);
        done = all_answered(gen);
        pthread_mutex_unlock(&lock);
    }
    *out = (struct conn_stats){0};
    pthread_mutex_lock(&lock);
    for (const struct worker *w = workers; w; w = w->stats_next) {
        const struct conn_stats_pub *p = &w->pub;
        out->accepted += atomic_load_explicit(&p->accepted, memory_order_relaxed);
        out->handled += atomic_load_explicit(&p->handled, memory_order_relaxed);
        out->active += atomic_load_explicit(&p->active, memory_order_relaxed);
        out->reading += atomic_load_explicit(&p->reading, memory_order_relaxed);
        out->writing += atomic_load_explicit(&p->writing, memory_order_relaxed);
        out->waiting += atomic_load_explicit(&p->waiting, memory_order_relaxed);
    }
    pthread_mutex_unlock(&lock);
    out->refused_per_client = accept_client_refused();
}
