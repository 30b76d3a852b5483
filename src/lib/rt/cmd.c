/* cmd.c - what other threads ask of a worker (worker_post), grace
 * periods (worker_quiesce) and listeners added or removed while the
 * worker runs: the runtime's side of a reload, protocol-neutral. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/log.h"
#include "rt/internal.h"

static void free_cmds(struct worker_cmd *c, bool drop)
{
    while (c) {
        struct worker_cmd *next = c->next;
        if (drop && c->drop)
            c->drop(c->arg);
        free(c);
        c = next;
    }
}

void run_cmds(struct worker *w)
{
    if (!atomic_load_explicit(&w->has_cmds, memory_order_acquire))
        return;
    pthread_mutex_lock(&w->cmd_lock);
    struct worker_cmd *c = w->cmds;
    w->cmds = NULL;
    w->cmds_tail = &w->cmds;
    atomic_store_explicit(&w->has_cmds, false, memory_order_relaxed);
    pthread_mutex_unlock(&w->cmd_lock);
    while (c) {
        struct worker_cmd *next = c->next;
        c->fn(w, c->arg);
        free(c);
        c = next;
    }
}

struct worker_cmd *worker_cmd_new(void (*fn)(struct worker *w, void *arg), void (*drop)(void *arg),
                                  void *arg)
{
    struct worker_cmd *c = malloc(sizeof(*c));
    if (c)
        *c = (struct worker_cmd){.fn = fn, .drop = drop, .arg = arg};
    return c;
}

void worker_post(struct worker *w, struct worker_cmd *c)
{
    c->next = NULL;
    pthread_mutex_lock(&w->cmd_lock);
    *w->cmds_tail = c;
    w->cmds_tail = &c->next;
    atomic_store_explicit(&w->has_cmds, true, memory_order_release);
    pthread_mutex_unlock(&w->cmd_lock);
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof(one));
    (void)r; /* fails only when the counter is saturated: it is awake */
}

/* The grace period ended: what waited for it runs, in the order asked. */
static void quiesce_done(struct worker *w)
{
    struct worker_cmd *c = w->quiesced;
    w->quiesced = NULL;
    while (c) {
        struct worker_cmd *next = c->next;
        c->fn(w, c->arg);
        free(c);
        c = next;
    }
}

void quiesce_release(struct worker *w, struct conn_ctx *ctx)
{
    ctx->held = false;
    if (--w->n_held == 0)
        quiesce_done(w);
}

void worker_quiesce(struct worker *w, struct worker_cmd *c)
{
    if (w->stopping) {
        free(c); /* dropped: nothing will be freed before the worker ends */
        return;
    }
    for (struct conn_ctx *x = w->all_ctx; x; x = x->all_next)
        /* a parked context (conn_park) is between requests: no run */
        if (x->fd >= 0 && !x->held && !x->parked) {
            x->held = true;
            w->n_held++;
        }
    if (!w->n_held) {
        c->fn(w, c->arg);
        free(c);
        return;
    }
    struct worker_cmd **tail = &w->quiesced;
    while (*tail)
        tail = &(*tail)->next;
    c->next = NULL;
    *tail = c;
}

int worker_add_listener(struct worker *w, unsigned idx, int fd, bool shared)
{
    if (w->stopping || idx > UINT16_MAX) {
        close(fd);
        return w->stopping ? 0 : -E2BIG;
    }
    if (idx >= w->n_listen) {
        int *n = realloc(w->listen_fds, (idx + 1) * sizeof(*n));
        if (!n) {
            close(fd);
            return -ENOMEM;
        }
        for (unsigned i = w->n_listen; i <= idx; i++)
            n[i] = -1;
        w->listen_fds = n;
        w->n_listen = idx + 1;
    }
    struct epoll_event ev = {.events = EPOLLIN | (shared ? EPOLLEXCLUSIVE : 0),
                             .data.u64 = EV_LISTEN_AT(idx) | (uint32_t)fd};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    w->listen_fds[idx] = fd;
    return 0;
}

void worker_remove_listener(struct worker *w, unsigned idx)
{
    if (idx >= w->n_listen || w->listen_fds[idx] < 0)
        return;
    /* out of epoll first: a shared socket's other dups keep it open */
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->listen_fds[idx], NULL);
    close(w->listen_fds[idx]);
    w->listen_fds[idx] = -1;
}

void quiesce_drop(struct worker *w)
{
    free_cmds(w->quiesced, false);
    w->quiesced = NULL;
}

void cmds_destroy(struct worker *w)
{
    free_cmds(w->cmds, true);
    w->cmds = NULL;
    free_cmds(w->quiesced, false);
    w->quiesced = NULL;
    pthread_mutex_destroy(&w->cmd_lock);
}
