/* accept.c - taking connections from listening sockets: accept_one(),
 * which a worker's loop and the acceptor thread share, and the acceptor
 * thread itself (accept = thread), which hands each connection to a
 * worker's fd_ring. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "base/tsan.h"
#include "rt/accept.h"
#include "rt/internal.h"

#ifdef COLIBRI_TSAN
char fd_sync[4096]; /* FD_SYNC(): see internal.h */
#endif

/* An fd held in reserve for accept_one(). An eventfd, not /dev/null: it
 * needs no file system, so it can be made again after a chroot. */
int spare_open(void)
{
    return eventfd(0, EFD_CLOEXEC);
}

/* One connection from a listening socket, or -1 when there is none to take
 * now (EAGAIN, or an error the next wake-up may not have). Out of fds, the
 * pending connection would keep the level-triggered socket readable and
 * spin the caller: the spare fd makes room to accept it and close it.
 * Aborted connections are skipped, a bounded number of them: a flood of
 * them must not keep the worker from its other connections (the socket
 * stays readable, and epoll reports it again). */
/* max_connections_per_client (accept.h): the counters, and by fd the
 * counter an accepted connection holds (+1; 0: none) */
static struct {
    uint32_t max;
    uint32_t n_fds;
    _Atomic uint32_t *count;
    uint32_t *slot_of;
    _Atomic uint64_t refused;
} per_client;

int accept_client_limit(uint32_t max, uint32_t max_fds)
{
    per_client.max = 0;
    if (!max)
        return 0;
    if (!per_client.count) {
        per_client.count = calloc(ACCEPT_CLIENT_SLOTS, sizeof(*per_client.count));
        per_client.slot_of = calloc(max_fds, sizeof(*per_client.slot_of));
        if (!per_client.count || !per_client.slot_of) {
            free((void *)per_client.count);
            free(per_client.slot_of);
            per_client.count = NULL;
            per_client.slot_of = NULL;
            return -ENOMEM;
        }
        per_client.n_fds = max_fds;
    }
    per_client.max = max;
    return 0;
}

void accept_client_release(int fd)
{
    if (per_client.slot_of && (uint32_t)fd < per_client.n_fds && per_client.slot_of[fd]) {
        atomic_fetch_sub_explicit(&per_client.count[per_client.slot_of[fd] - 1], 1,
                                  memory_order_relaxed);
        per_client.slot_of[fd] = 0;
    }
}

uint64_t accept_client_refused(void)
{
    return atomic_load_explicit(&per_client.refused, memory_order_relaxed);
}

/* Counts fd for its client; false (nothing counted) when the client has
 * max connections already. */
static bool client_admit(int fd, const struct sockaddr_storage *ss)
{
    struct conn_peer p = conn_peer_from(ss);
    if ((uint32_t)fd >= per_client.n_fds || !p.family)
        return true;
    size_t n = p.family == AF_INET ? 4 : 16;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p.addr[i]) * 16777619u;
    uint32_t slot = (h ^ h >> 16) % ACCEPT_CLIENT_SLOTS;
    uint32_t now = atomic_fetch_add_explicit(&per_client.count[slot], 1, memory_order_relaxed);
    if (now >= per_client.max) {
        atomic_fetch_sub_explicit(&per_client.count[slot], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&per_client.refused, 1, memory_order_relaxed);
        char a[48] = "?";
        inet_ntop(p.family, p.addr, a, sizeof(a));
        LOG_LIMITED(LOG_WARN,
                    "%s: max_connections_per_client (%u) reached: a new connection closed (%llu "
                    "so far)",
                    a, per_client.max, (unsigned long long)accept_client_refused());
        return false;
    }
    per_client.slot_of[fd] = slot + 1;
    return true;
}

int accept_one(int lfd, int *spare, struct conn_peer *peers, uint32_t max_fds)
{
    for (int tries = 0; tries < 64; tries++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            tsan_acquire(FD_SYNC(fd));
            if (unlikely(per_client.max != 0) && !client_admit(fd, &ss)) {
                tsan_release(FD_SYNC(fd));
                close(fd);
                continue;
            }
            if (peers && (uint32_t)fd < max_fds)
                peers[fd] = conn_peer_from(&ss);
            return fd;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN)
            return -1;
        int e = errno;
        if ((e != EMFILE && e != ENFILE) || *spare < 0) {
            LOG_LIMITED(LOG_ERROR, "accept() failed: %s", strerror(e));
            return -1;
        }
        /* EMFILE comes before the queue is looked at: stop when the
         * freed slot finds nothing to accept */
        close(*spare);
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        *spare = spare_open();
        if (fd >= 0)
            LOG_LIMITED(LOG_ERROR,
                        "accept() failed: %s: out of file descriptors, a connection was closed "
                        "unanswered",
                        strerror(e));
        if (fd < 0)
            return -1;
    }
    return -1;
}

struct acceptor_change {
    struct acceptor_change *next;
    unsigned idx;
    int fd;     /* >= 0: add it; -1: remove idx */
    int *table; /* an add's room for idx + 8 fds, allocated by the caller */
};

void acceptor_init(struct acceptor *a, int wake_fd)
{
    *a = (struct acceptor){.wake_fd = wake_fd};
    pthread_mutex_init(&a->lock, NULL);
}

static int acceptor_queue(struct acceptor *a, unsigned idx, int fd)
{
    struct acceptor_change *c = malloc(sizeof(*c));
    int *table = fd >= 0 ? malloc((idx + 8) * sizeof(int)) : NULL;
    if (!c || (fd >= 0 && !table)) {
        free(c);
        free(table);
        return -ENOMEM;
    }
    *c = (struct acceptor_change){.idx = idx, .fd = fd, .table = table};
    pthread_mutex_lock(&a->lock);
    struct acceptor_change **tail = &a->changes;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
    pthread_mutex_unlock(&a->lock);
    uint64_t one = 1;
    ssize_t r = write(a->wake_fd, &one, sizeof(one));
    (void)r; /* fails only when the counter is saturated: it is awake */
    return 0;
}

int acceptor_add_listener(struct acceptor *a, unsigned idx, int fd)
{
    int r = acceptor_queue(a, idx, fd);
    if (r < 0)
        close(fd);
    return r;
}

void acceptor_remove_listener(struct acceptor *a, unsigned idx)
{
    if (acceptor_queue(a, idx, -1) < 0)
        log_msg(LOG_ERROR, "acceptor: out of memory: listener %u stays open", idx);
}

/* The queued changes, made on the acceptor's thread (epfd < 0: only the
 * table, after it stopped). */
static void acceptor_apply(struct acceptor *a, int epfd)
{
    pthread_mutex_lock(&a->lock);
    struct acceptor_change *c = a->changes;
    a->changes = NULL;
    pthread_mutex_unlock(&a->lock);
    while (c) {
        struct acceptor_change *next = c->next;
        if (c->idx >= a->n_fds && c->table) {
            /* the table grows into the room the caller allocated */
            unsigned n = c->idx + 8;
            for (unsigned i = 0; i < n; i++)
                c->table[i] = i < a->n_fds ? a->fds[i] : -1;
            free(a->fds);
            a->fds = c->table;
            a->n_fds = n;
            c->table = NULL;
        }
        /* an add always has its slot; a remove beyond the table has nothing */
        int *slot = c->idx < a->n_fds ? &a->fds[c->idx] : NULL;
        if (slot && *slot >= 0) { /* removed, or replaced */
            if (epfd >= 0)
                epoll_ctl(epfd, EPOLL_CTL_DEL, *slot, NULL);
            close(*slot);
            *slot = -1;
        }
        if (c->fd >= 0) {
            struct epoll_event ev = {.events = EPOLLIN,
                                     .data.u64 = EV_LISTEN_AT(c->idx) | (uint32_t)c->fd};
            if (epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
                log_msg(LOG_ERROR, "acceptor: listener %u: epoll_ctl: %s", c->idx, strerror(errno));
            *slot = c->fd;
        }
        free(c->table);
        free(c);
        c = next;
    }
}

int acceptor_run(struct acceptor *a, struct worker *const *workers, unsigned n, atomic_int *stop)
{
    bool *woken = calloc(n, sizeof(bool));
    int epfd = woken ? epoll_create1(EPOLL_CLOEXEC) : -1;
    if (epfd < 0) {
        int e = woken ? -errno : -ENOMEM;
        free(woken);
        return e;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    epoll_ctl(epfd, EPOLL_CTL_ADD, a->wake_fd, &ev);
    /* every listener comes as a queued change, those added before it ran
     * too (nothing applies them before) */
    acceptor_apply(a, epfd);
    int spare = spare_open();
    while (!atomic_load(stop)) {
        struct epoll_event events[16];
        int k = epoll_wait(epfd, events, (int)N_ELEMENTS(events), -1);
        bool changes = false;
        for (int e = 0; e < k; e++) {
            if (!(events[e].data.u64 & EV_LISTEN)) {
                uint64_t v;
                ssize_t r = read(a->wake_fd, &v, sizeof(v));
                (void)r;
                changes = true;
                continue;
            }
            int lfd = EV_FD(events[e].data.u64);
            for (int i = 0; i < 256; i++) {
                int fd = accept_one(lfd, &spare, workers[0]->view.peers, workers[0]->max_fds);
                if (fd < 0)
                    break;
                unsigned wi = ((unsigned)fd / 2) % n;
                struct fd_ring *r = workers[wi]->ring;
                uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
                if (t - atomic_load_explicit(&r->head, memory_order_acquire) == FD_RING_SIZE) {
                    accept_client_release(fd);
                    close(fd); /* that worker is hopelessly behind */
                    continue;
                }
                r->fds[t % FD_RING_SIZE].fd = fd;
                r->fds[t % FD_RING_SIZE].listener = EV_LISTENER(events[e].data.u64);
                atomic_store_explicit(&r->tail, t + 1, memory_order_release);
                woken[wi] = true;
            }
        }
        /* one wake-up per worker per burst, not per connection */
        for (unsigned i = 0; i < n; i++) {
            if (!woken[i])
                continue;
            uint64_t one = 1;
            ssize_t r = write(workers[i]->wake_fd, &one, sizeof(one));
            (void)r;
            woken[i] = false;
        }
        /* after the batch: no event of it names an fd closed here */
        if (changes)
            acceptor_apply(a, epfd);
    }
    free(woken);
    if (spare >= 0)
        close(spare);
    close(epfd);
    return 0;
}

void acceptor_destroy(struct acceptor *a)
{
    acceptor_apply(a, -1);
    for (unsigned i = 0; i < a->n_fds; i++)
        if (a->fds[i] >= 0)
            close(a->fds[i]);
    free(a->fds);
    a->fds = NULL;
    a->n_fds = 0;
    pthread_mutex_destroy(&a->lock);
}
