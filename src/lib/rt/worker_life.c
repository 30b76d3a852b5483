/* worker_life.c - a worker's creation and end (rt/worker.h): its epoll,
 * wake-up eventfd, listening sockets, spare fd or acceptor ring, thread;
 * the loop itself is worker.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rt/accept.h"
#include "rt/internal.h"

int worker_new(struct worker **out, const struct worker_cfg *cfg, unsigned idx, struct conn *conns,
               struct conn_peer *peers, uint32_t max_fds, int *listen_fds, unsigned n_listen,
               void *proto_state)
{
    *out = NULL;
    struct worker *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    *w = (struct worker){
        .view = {.conns = conns, .peers = peers, .proto_state = proto_state},
        .cfg = cfg,
        .max_fds = max_fds,
        .idx = idx,
        .epfd = -1,
        .wake_fd = -1,
        .spare_fd = -1,
    };
    pthread_mutex_init(&w->cmd_lock, NULL);
    w->cmds_tail = &w->cmds;
    tq_init(&w->idle_q, conns, CONN_IN_IDLE_Q, cfg->keep_alive_s);
    tq_init(&w->req_q, conns, CONN_IN_REQ_Q, cfg->request_timeout_s);
    int r = 0;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epfd < 0 || w->wake_fd < 0) {
        r = -errno;
        goto fail;
    }
    /* a worker that accepts keeps an fd for accept_one() to make room
     * with; one that is handed fds has the acceptor's ring instead */
    if (cfg->handed_fds ? !(w->ring = calloc(1, sizeof(*w->ring)))
                        : (w->spare_fd = spare_open()) < 0) {
        r = cfg->handed_fds ? -ENOMEM : -errno;
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_WAKE | (uint32_t)w->wake_fd};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0) {
        r = -errno;
        goto fail;
    }
    for (unsigned i = 0; i < n_listen; i++) {
        /* a socket every worker waits on (dups of one fd, from systemd):
         * EPOLLEXCLUSIVE wakes one worker that is waiting in epoll_wait
         * per connection instead of all of them; a busy worker's entry
         * does not count as a wake-up, so the next idle one gets it. It
         * works with level triggering: the worker woken accepts a batch,
         * and what it leaves stays ready on its epoll. */
        bool shared = cfg->listen_shared && cfg->listen_shared[i];
        ev = (struct epoll_event){.events = EPOLLIN | (shared ? EPOLLEXCLUSIVE : 0),
                                  .data.u64 = EV_LISTEN_AT(i) | (uint32_t)listen_fds[i]};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, listen_fds[i], &ev) < 0) {
            r = -errno;
            goto fail;
        }
    }
    /* the rest table: mapped, so only the pages of fds that rested cost
     * memory; without it no connection rests (conn_rest_put says so) */
    if (cfg->proto->drop_rest) {
        void *t = mmap(NULL, (size_t)max_fds * sizeof(void *), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        w->view.rest = t == MAP_FAILED ? NULL : t;
    }
    /* the listening sockets are the worker's from here on */
    w->listen_fds = listen_fds;
    w->n_listen = n_listen;
    worker_first_clocks(w);
    stats_register(w);
    *out = w;
    return 0;
fail:
    worker_free(w);
    return r;
}

unsigned worker_index(const struct worker *w)
{
    return w->idx;
}

void *worker_proto_state(const struct worker *w)
{
    return w->view.proto_state;
}

int worker_start(struct worker *w)
{
    int r = pthread_create(&w->thread, NULL, worker_main, w);
    if (r)
        return -r;
    w->started = true;
    return 0;
}

void worker_join(struct worker *w)
{
    if (w->started)
        pthread_join(w->thread, NULL);
    w->started = false;
}

void worker_free(struct worker *w)
{
    if (!w)
        return;
    stats_unregister(w);
    cmds_destroy(w);
    free(w->ring);
    timer_heap_free(&w->timers);
    worker_free_pool(w);
    for (unsigned i = 0; i < w->n_listen; i++)
        if (w->listen_fds[i] >= 0)
            close(w->listen_fds[i]);
    free(w->listen_fds);
    if (w->view.rest)
        munmap(w->view.rest, (size_t)w->max_fds * sizeof(void *));
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->spare_fd >= 0)
        close(w->spare_fd);
    free(w);
}
