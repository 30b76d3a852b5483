/* upstream.c - upstream groups: choice, health, pools, a worker's kept
 * jobs (see upstream.h; their config: upstream_conf.c). */
#include "gateway/upstream.h"

#include "gateway/upio.h"
#include "gateway/uptls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "base/thread.h"
#include "server/builtin.h"

struct gw_worker_slot {
    uint64_t rr; /* the round robin's position */
    struct gw_pool {
        struct gw_idle {
            int fd;
            uint64_t since_ms; /* put back then (worker_now_ms) */
        } * idle;              /* oldest first */
        unsigned n;
    } pools[]; /* by server */
};

uint64_t gw_hash(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* --- choice and health -------------------------------------------------------- */

bool gw_server_up(const struct gw_upstream *up, unsigned i, uint64_t now_ms)
{
    const struct gw_server *s = &up->servers[i];
    if (atomic_load_explicit(&s->check_down, memory_order_relaxed))
        return false;
    return atomic_load_explicit(&s->down_until_ms, memory_order_relaxed) <= now_ms;
}

void gw_failed(struct gw_upstream *up, unsigned i, uint64_t now_ms)
{
    struct gw_server *s = &up->servers[i];
    gw_stats_attempt(up, i, true);
    /* a group of one server is never marked down (gw_pick takes it
     * anyway: there is nowhere else to go), nor said to be */
    if (!up->max_fails || up->n == 1)
        return;
    uint64_t since = atomic_load_explicit(&s->fail_since_ms, memory_order_relaxed);
    if (now_ms - since > up->fail_timeout_ms) {
        atomic_store_explicit(&s->fail_since_ms, now_ms, memory_order_relaxed);
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
    }
    uint32_t f = atomic_fetch_add_explicit(&s->fails, 1, memory_order_relaxed) + 1;
    if (f >= up->max_fails) {
        atomic_store_explicit(&s->down_until_ms, now_ms + up->fail_timeout_ms,
                              memory_order_relaxed);
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
        LOG_LIMITED(LOG_WARN, "upstream %s: server %s marked down for %llu ms (%u failures)",
                    up->name, s->text, (unsigned long long)up->fail_timeout_ms, f);
    }
}

void gw_succeeded(struct gw_upstream *up, unsigned i)
{
    struct gw_server *s = &up->servers[i];
    gw_stats_attempt(up, i, false);
    if (atomic_load_explicit(&s->fails, memory_order_relaxed))
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
}

static struct gw_worker_slot *slot_of(struct gw_upstream *up, unsigned worker)
{
    if (worker >= GW_WORKERS_MAX)
        return NULL;
    if (!up->slots[worker])
        up->slots[worker] =
            calloc(1, sizeof(struct gw_worker_slot) + up->n * sizeof(struct gw_pool));
    return up->slots[worker];
}

/* Among the servers of one kind (backup or not) that are up and not tried. */
static int pick_among(struct gw_upstream *up, unsigned worker, uint64_t now_ms, uint64_t tried,
                      uint64_t key, bool backup)
{
    unsigned total = 0, cand = 0;
    for (unsigned i = 0; i < up->n; i++) {
        const struct gw_server *s = &up->servers[i];
        if (s->backup != backup || (tried >> i & 1) || !gw_server_up(up, i, now_ms))
            continue;
        total += s->weight;
        cand++;
    }
    if (!cand)
        return -1;
    /* a single server left alone: never refused for its marks */
    int best = -1;
    switch (up->balance) {
    case GW_HASH: {
        /* rendezvous hashing, a server's weight as that many entries:
         * each entry scores the key, the best wins; a server going down
         * moves only its own keys */
        uint64_t top = 0, kh = gw_hash(&key, sizeof(key));
        for (unsigned i = 0; i < up->n; i++) {
            const struct gw_server *s = &up->servers[i];
            if (s->backup != backup || (tried >> i & 1) || !gw_server_up(up, i, now_ms))
                continue;
            uint64_t sh = gw_hash(s->text, strlen(s->text));
            for (unsigned r = 0; r < s->weight; r++) {
                uint64_t in[3] = {kh, sh, r};
                uint64_t score = gw_hash(in, sizeof(in));
                if (best < 0 || score > top)
                    top = score, best = (int)i;
            }
        }
        return best;
    }
    case GW_LEAST_CONN: {
        /* fewest requests per weight; ties go round robin */
        struct gw_worker_slot *sl = slot_of(up, worker);
        unsigned start = sl ? (unsigned)(sl->rr++ % up->n) : 0;
        double low = 0;
        for (unsigned k = 0; k < up->n; k++) {
            unsigned i = (start + k) % up->n;
            const struct gw_server *s = &up->servers[i];
            if (s->backup != backup || (tried >> i & 1) || !gw_server_up(up, i, now_ms))
                continue;
            double load =
                (double)atomic_load_explicit(&s->active, memory_order_relaxed) / (double)s->weight;
            if (best < 0 || load < low)
                low = load, best = (int)i;
        }
        return best;
    }
    default: {
        /* weighted round robin: the worker's position walks the weights */
        struct gw_worker_slot *sl = slot_of(up, worker);
        uint64_t pos = sl ? sl->rr++ : 0;
        unsigned at = (unsigned)(pos % total);
        for (unsigned i = 0; i < up->n; i++) {
            const struct gw_server *s = &up->servers[i];
            if (s->backup != backup || (tried >> i & 1) || !gw_server_up(up, i, now_ms))
                continue;
            if (at < s->weight)
                return (int)i;
            at -= s->weight;
        }
        return -1;
    }
    }
}

int gw_pick(struct gw_upstream *up, unsigned worker, uint64_t now_ms, uint64_t tried, uint64_t key)
{
    if (up->n == 1) /* one server: passive marks would only refuse it */
        return (tried & 1) || atomic_load_explicit(&up->servers[0].check_down, memory_order_relaxed)
                   ? -1
                   : 0;
    int i = pick_among(up, worker, now_ms, tried, key, false);
    if (i < 0)
        i = pick_among(up, worker, now_ms, tried, key, true);
    return i;
}

/* --- pools ------------------------------------------------------------------------ */

/* Which fds sit in this worker's pools now, and since when (by fd, grown
 * as needed: the low 32 bits of the ms they were put back, 0 for none): the
 * idle handler's first look, without the groups' lock. An entry may be
 * left for an fd closed by another thread (a retired group's pools): the
 * pools themselves are the truth. */
static __thread uint32_t *pooled;
/* how long a pooled fd idles before bytes on it are looked at at once */
#define IDLE_SETTLED_MS 20
/* an entry for an fd in use (not pooled) whose end came: not to be pooled */
#define POOLED_ENDED UINT32_MAX
static __thread size_t pooled_cap;
static pthread_key_t pooled_key; /* frees a thread's array at its end */
static pthread_once_t pooled_once = PTHREAD_ONCE_INIT;

static void pooled_init(void)
{
    if (pthread_key_create(&pooled_key, free))
        pooled_key = (pthread_key_t)-1;
}

static bool pooled_mark(int fd, uint64_t now)
{
    if ((size_t)fd >= pooled_cap) {
        pthread_once(&pooled_once, pooled_init);
        if (pooled_key == (pthread_key_t)-1)
            return false;
        size_t cap = MAX((size_t)fd + 1, pooled_cap * 2);
        cap = MAX(cap, (size_t)256);
        uint32_t *p = realloc(pooled, cap * sizeof(*p));
        if (!p)
            return false;
        memset(p + pooled_cap, 0, (cap - pooled_cap) * sizeof(*p));
        pooled = p, pooled_cap = cap;
        if (pthread_setspecific(pooled_key, p)) {
            free(p);
            pooled = NULL, pooled_cap = 0;
            return false;
        }
    }
    pooled[fd] = (uint32_t)now && (uint32_t)now != POOLED_ENDED ? (uint32_t)now : 1;
    return true;
}

static void pooled_clear(int fd)
{
    if ((size_t)fd < pooled_cap)
        pooled[fd] = 0;
}

static void pool_close(int fd)
{
    pooled_clear(fd);
    gw_close(fd);
}

void gw_pool_forget(int fd)
{
    pooled_clear(fd);
}

void gw_pool_ended(int fd)
{
    if ((size_t)fd < pooled_cap || pooled_mark(fd, 0))
        pooled[fd] = POOLED_ENDED;
}

int gw_pool_take(struct gw_upstream *up, unsigned worker, unsigned i)
{
    struct gw_worker_slot *sl = worker < GW_WORKERS_MAX ? up->slots[worker] : NULL;
    if (!sl || !sl->pools[i].n)
        return -1;
    struct gw_pool *p = &sl->pools[i];
    struct gw_idle e = p->idle[--p->n]; /* the most recent: warmest */
    pooled_clear(e.fd);
    if (worker_now_ms() - e.since_ms < up->keepalive_timeout_ms)
        return e.fd;
    /* the tick has not come yet: this one and all older are too old */
    gw_close(e.fd);
    while (p->n)
        pool_close(p->idle[--p->n].fd);
    return -1;
}

/* Whether idle connections to server i are to be closed: a request waits
 * on a new one, maybe queued behind them (gw_starving). */
static bool starved(const struct gw_upstream *up, unsigned i)
{
    return up->holds_process &&
           atomic_load_explicit(&up->servers[i].starving, memory_order_relaxed) > 0;
}

void gw_starving(struct gw_upstream *up, unsigned i, bool start)
{
    atomic_fetch_add_explicit(&up->servers[i].starving, start ? 1 : -1, memory_order_relaxed);
}

void gw_pool_put(struct gw_upstream *up, struct conn_ctx *ctx, unsigned i, int fd)
{
    struct gw_worker_slot *sl = up->keepalive ? slot_of(up, conn_worker_index(ctx)) : NULL;
    struct gw_pool *p = sl ? &sl->pools[i] : NULL;
    if (p && !p->idle)
        p->idle = malloc(up->keepalive * sizeof(*p->idle));
    /* watched while it idles: most often as its last wait left it (no
     * system call) */
    uint64_t now = worker_now_ms();
    bool ended = (size_t)fd < pooled_cap && pooled[fd] == POOLED_ENDED;
    if (!p || !p->idle || p->n >= up->keepalive || ended || starved(up, i) ||
        conn_watch_idle(ctx, fd) < 0 || !pooled_mark(fd, now)) {
        pooled_clear(fd);
        gw_close(fd);
        return;
    }
    p->idle[p->n++] = (struct gw_idle){.fd = fd, .since_ms = now};
    conn_want_idle_tick(ctx);
}

struct idle_walk {
    unsigned worker;
    int fd;      /* the fd an event came for, or -1: the tick */
    bool closed; /* the event was its end (else: bytes, to be looked at) */
    bool keep;   /* the tick: some pool still holds one */
    bool found;  /* an fd: some pool holds it */
    uint64_t now;
};

static void idle_walk_group(struct gw_upstream *up, void *arg)
{
    struct idle_walk *iw = arg;
    struct gw_worker_slot *sl = iw->worker < GW_WORKERS_MAX ? up->slots[iw->worker] : NULL;
    if (!sl)
        return;
    for (unsigned i = 0; i < up->n; i++) {
        struct gw_pool *p = &sl->pools[i];
        unsigned kept = 0;
        for (unsigned k = 0; k < p->n; k++) {
            int fd = p->idle[k].fd;
            bool drop;
            if (iw->fd >= 0) {
                iw->found = iw->found || fd == iw->fd;
                drop = fd == iw->fd && (iw->closed || !gw_idle_alive(fd));
            } else /* the tick: too old, holding a process a new connection
                    * waits for, or no longer clean (stray bytes, or an end
                    * whose event was missed) */
                drop = iw->now - p->idle[k].since_ms >= up->keepalive_timeout_ms ||
                       starved(up, i) || !gw_idle_alive(fd);
            if (drop)
                pool_close(fd);
            else
                p->idle[kept++] = p->idle[k];
        }
        p->n = kept;
        iw->keep = iw->keep || kept;
    }
}

bool gw_pool_idle(unsigned worker, int fd, bool closed)
{
    uint64_t now = worker_now_ms();
    if (fd >= 0) {
        /* an fd in one of this worker's pools: its end (or a reset, an
         * error) closes it; bytes are looked at (a peek) once it idled
         * a while: an event that comes just after it was put back is most
         * often the answer's, read already (the tick looks at every idle
         * one once a second anyway) */
        if ((size_t)fd >= pooled_cap)
            return false;
        if (!pooled[fd] || pooled[fd] == POOLED_ENDED) {
            /* in use: its end, seen now, keeps it from the pool (it came
             * before the put: no event will come after) */
            if (closed)
                pooled[fd] = POOLED_ENDED;
            return false;
        }
        if (!closed && (uint32_t)now - pooled[fd] < IDLE_SETTLED_MS)
            return false;
    }
    struct idle_walk iw = {.worker = worker, .fd = fd, .closed = closed, .now = now};
    gw_groups_each(idle_walk_group, &iw);
    if (fd >= 0 && !iw.found)
        pooled_clear(fd); /* an entry another thread's close left */
    return iw.keep;
}

/* --- the active check -------------------------------------------------------------- */

uint64_t gw_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether an answer's first got bytes (at least a status line's 12, buf
 * has room for one more) say 2xx or 3xx. */
static bool answered(char *buf, size_t got, char *why, size_t whylen)
{
    buf[got] = '\0';
    int st = got >= 12 && !memcmp(buf, "HTTP/1.", 7) && buf[8] == ' ' ? atoi(buf + 9) : 0;
    snprintf(why, whylen, "answered %d", st);
    return st >= 200 && st < 400;
}

/* One GET of the check's path, blocking with poll() against a deadline:
 * whether it answered 2xx or 3xx. */
static bool check_one(const struct gw_upstream *up, const struct gw_server *s, int timeout_ms,
                      char *why, size_t whylen)
{
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return false;
    }
    uint64_t deadline = gw_mono_ms() + (uint64_t)timeout_ms;
    bool ok = false;
    char buf[4096];
    int n = snprintf(buf, sizeof(buf),
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: colibri-health-check\r\n"
                     "Connection: close\r\n\r\n",
                     up->health_check, s->host);
    size_t sent = 0, got = 0;
    snprintf(why, whylen, "timed out");
    if (connect(fd, (const struct sockaddr *)&s->addr, s->addr_len) < 0 && errno != EINPROGRESS) {
        snprintf(why, whylen, "connect: %s", strerror(errno));
        goto out;
    }
    if (s->tls) { /* https://: the same exchange over TLS */
        char ans[512];
        ssize_t r = gw_tls_check(s->tls, fd, up->stop_fd, deadline, buf, (size_t)n, ans,
                                 sizeof(ans) - 1, why, whylen);
        if (r > 0)
            ok = answered(ans, (size_t)r, why, whylen);
        goto out;
    }
    for (;;) {
        uint64_t now = gw_mono_ms();
        if (now >= deadline)
            goto out;
        struct pollfd p[2] = {{.fd = fd, .events = sent < (size_t)n ? POLLOUT : POLLIN},
                              {.fd = up->stop_fd, .events = POLLIN}};
        int pr = poll(p, 2, (int)(deadline - now));
        if (pr < 0 && errno == EINTR) /* the sandbox closing on every thread */
            continue;
        if (pr <= 0 || p[1].revents)
            goto out;
        if (sent < (size_t)n) {
            ssize_t w = send(fd, buf + sent, (size_t)n - sent, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(why, whylen, "send: %s", strerror(errno));
                goto out;
            }
            sent += w > 0 ? (size_t)w : 0;
            continue;
        }
        char rb[512];
        ssize_t r = recv(fd, rb, sizeof(rb) - 1, 0);
        if (r <= 0) {
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            snprintf(why, whylen, "%s", r ? strerror(errno) : "closed without an answer");
            goto out;
        }
        /* only the status line matters */
        size_t take = MIN((size_t)r, sizeof(buf) - 1 - got);
        memcpy(buf + got, rb, take);
        got += take;
        if (got >= 12) {
            ok = answered(buf, got, why, whylen);
            goto out;
        }
    }
out:
    close(fd);
    return ok;
}

static void *check_thread(void *arg)
{
    struct gw_upstream *up = arg;
    for (;;) {
        for (unsigned i = 0; i < up->n; i++) {
            struct gw_server *s = &up->servers[i];
            int t = (int)MIN(up->health_interval_ms, 5000);
            char why[128];
            bool ok = check_one(up, s, t, why, sizeof(why));
            bool was_down = atomic_exchange(&s->check_down, !ok);
            if (was_down != !ok)
                LOG_LIMITED(ok ? LOG_INFO : LOG_WARN,
                            "upstream %s: server %s is %s (health check %s: %s)", up->name, s->text,
                            ok ? "up" : "down", up->health_check, why);
            if (ok && was_down) /* back: forget the passive marks too */
                atomic_store(&s->down_until_ms, 0);
        }
        struct pollfd p = {.fd = up->stop_fd, .events = POLLIN};
        uint64_t until = gw_mono_ms() + up->health_interval_ms;
        for (uint64_t now = gw_mono_ms(); now < until; now = gw_mono_ms()) {
            int n = poll(&p, 1, (int)(until - now));
            if (n > 0 || (n < 0 && errno != EINTR))
                return NULL;
        }
    }
}

void gw_upstream_use(struct gw_upstream *up)
{
    up->used = true;
}

void gw_upstream_live(void *arg)
{
    struct gw_upstream *up = arg;
    if (!up->used || !up->health_check || up->thread_started)
        return;
    up->stop_fd = eventfd(0, EFD_CLOEXEC);
    up->thread = malloc(sizeof(pthread_t));
    if (up->stop_fd < 0 || !up->thread ||
        thread_start_helper((pthread_t *)up->thread, check_thread, up) != 0) {
        /* the servers count as up: the passive marks still apply */
        log_msg(LOG_ERROR, "upstream %s: cannot start its health check thread", up->name);
        return;
    }
    up->thread_started = true;
}

void gw_upstream_free(void *arg)
{
    struct gw_upstream *up = arg;
    if (!up)
        return;
    gw_stats_unregister(up);
    if (up->thread_started) {
        uint64_t one = 1;
        if (write(up->stop_fd, &one, sizeof(one)) < 0) {
        }
        pthread_join(*(pthread_t *)up->thread, NULL);
    }
    if (up->stop_fd >= 0)
        close(up->stop_fd);
    free(up->thread);
    for (unsigned w = 0; w < GW_WORKERS_MAX; w++) {
        struct gw_worker_slot *sl = up->slots[w];
        if (!sl)
            continue;
        for (unsigned i = 0; i < up->n; i++) {
            for (unsigned k = 0; k < sl->pools[i].n; k++)
                gw_close(sl->pools[i].idle[k].fd); /* another thread's: no pooled_clear */
            free(sl->pools[i].idle);
        }
        free(sl);
    }
    for (unsigned i = 0; i < up->n; i++)
        gw_tls_free(up->servers[i].tls);
    free(up->servers);
    free(up->hash_header);
    free(up->health_check);
    free(up->name);
    free(up);
}

/* --- a worker's kept jobs -------------------------------------------------------------- */

static __thread void *spare_jobs[GW_SPARE_KINDS];
static __thread const struct gw_spare *spare_of[GW_SPARE_KINDS];
static __thread bool spare_registered; /* spare_key holds this thread's spare_jobs */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_exit(void *arg)
{
    void **jobs = arg;
    for (unsigned k = 0; k < GW_SPARE_KINDS; k++) {
        void *j = jobs[k];
        jobs[k] = NULL;
        if (j)
            spare_of[k]->free_job(j);
    }
}

static void spare_init(void)
{
    if (pthread_key_create(&spare_key, spare_exit))
        spare_key = (pthread_key_t)-1;
}

void *gw_spare_get(const struct gw_spare *s)
{
    void *j = spare_jobs[s->kind];
    if (j) {
        spare_jobs[s->kind] = NULL;
        return j;
    }
    if (!(j = calloc(1, s->size)))
        return NULL;
    char *buf = malloc(s->buf_len);
    if (!buf) {
        free(j);
        return NULL;
    }
    memcpy((char *)j + s->buf_at, &buf, sizeof(buf));
    return j;
}

void gw_spare_put(const struct gw_spare *s, void *job, bool keep)
{
    if (keep && !spare_jobs[s->kind]) {
        if (unlikely(!spare_registered)) {
            pthread_once(&spare_once, spare_init);
            spare_registered =
                spare_key != (pthread_key_t)-1 && !pthread_setspecific(spare_key, spare_jobs);
        }
        if (likely(spare_registered)) {
            spare_of[s->kind] = s;
            spare_jobs[s->kind] = job;
            return;
        }
    }
    s->free_job(job);
}
