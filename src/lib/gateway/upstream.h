/* upstream.h - a gateway's upstream group: its servers, how one is chosen
 * (weighted round robin, least connections, consistent hashing), their
 * health (passive marks from failures, an active check from one thread per
 * group), and per-worker keep-alive pools of idle connections.
 *
 *     upstream app {
 *         server 127.0.0.1:9000
 *         server 127.0.0.1:9001 { weight = 2 }
 *         server unix:/run/app.sock
 *         server 127.0.0.1:9002 { backup = true }
 *         balance = round_robin      # least_conn, hash (hash_key = header:X-User)
 *         keepalive = 32
 *         keepalive_timeout = 60s
 *         max_fails = 3
 *         fail_timeout = 10s
 *         health_check = /healthz
 *         health_interval = 2s
 *     }
 *
 * A group is built at config loading and read by every worker; what
 * changes while it serves is atomic (health, failure counts, connection
 * counts) or per worker (the pools and the round-robin position: only
 * the worker that owns them touches them). It is freed with its config
 * generation, which closes the pooled connections and stops the health
 * thread. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "colibri.h"

#define GW_WORKERS_MAX 1024 /* workers beyond this use no pool */
#define GW_SERVERS_MAX 64

enum gw_balance { GW_ROUND_ROBIN, GW_LEAST_CONN, GW_HASH };

#define GW_TIME_BUCKETS 12 /* upmetrics.c: 1 ms ... 10 s */

struct gw_server {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char text[112]; /* "127.0.0.1:9000", "[::1]:80", "unix:/path": logs */
    char host[112]; /* the Host an upstream request names it by */
    unsigned weight;
    bool backup;
    bool https;         /* "https://HOST:PORT": spoken to over TLS */
    struct gw_tls *tls; /* https: its client context (uptls.h), freed with the group */
    /* passive health: failures counted since fail_since; down until then */
    _Atomic uint32_t fails;
    _Atomic uint64_t fail_since_ms, down_until_ms;
    atomic_bool check_down; /* the active check says down */
    _Atomic int active;     /* requests on it now (least_conn) */
    /* requests sent on a new connection with no answer yet: with a server
     * whose connections each hold one of its processes (FastCGI), maybe
     * queued behind the idle connections the pools keep */
    _Atomic int starving;
    /* for the metrics (upmetrics.c), counted while they are on */
    struct gw_server_stats {
        _Atomic uint64_t requests, failures, time_ms;
        _Atomic uint64_t time[GW_TIME_BUCKETS + 1]; /* answers by time bucket */
    } stats;
};

struct gw_worker_slot; /* a worker's pools and round-robin position */

struct gw_upstream {
    char *name;
    struct gw_server *servers;
    unsigned n;
    enum gw_balance balance;
    char *hash_header; /* hash_key = header:NAME; NULL: the client's address */
    unsigned keepalive;
    uint64_t keepalive_timeout_ms; /* an idle pooled connection is closed after this */
    unsigned max_fails;
    uint64_t fail_timeout_ms;
    char *health_check; /* a path, or NULL */
    bool https;         /* a server is https:// */
    /* each connection holds one of a server's processes while it is open
     * (PHP-FPM: a child serves a kept connection alone, and waits on it
     * while it idles): idle ones are closed while a request waits */
    bool holds_process;
    uint64_t health_interval_ms;
    struct gw_worker_slot *slots[GW_WORKERS_MAX];
    /* the active check's thread */
    bool used; /* gw_upstream_use() */
    bool thread_started;
    int stop_fd;                    /* eventfd: the thread's stop */
    void *thread;                   /* pthread_t, allocated */
    struct gw_upstream *stats_next; /* the groups a scrape shows (upmetrics.c) */
    bool stats_listed;
};

/* "upstream NAME { ... }": 0 or -EINVAL with err ("FILE:LINE: KEY: ..."). */
int gw_upstream_from_config(struct colibri_conf *sec, struct gw_upstream **out, char *err,
                            size_t errlen);
/* A group of one server from a "to" value (http://HOST:PORT, unix:/path,
 * HOST:PORT): 0 or -EINVAL with err naming the key. */
int gw_upstream_single(struct colibri_conf *to, const char *addr, struct gw_upstream **out,
                       char *err, size_t errlen);
/* The keys tls_verify, tls_ca and tls_server_name taken from sec, and a
 * client context made for each https:// server of up with them (the CA
 * files allowed to the sandbox). Keys where up has no https:// server are
 * errors saying needs; anchor is the line a context's failure names when
 * no key does. 0 or -EINVAL with err. */
int gw_upstream_tls(struct colibri_server *srv, struct colibri_conf *sec,
                    struct colibri_conf *anchor, struct gw_upstream *up, const char *needs,
                    char *err, size_t errlen);
/* A route sends requests to the group: its active health check (if it
 * has one) is to run. */
void gw_upstream_use(struct gw_upstream *up);
/* The generation serves (builtin_keep's live_fn): the health check's
 * thread starts if a route uses the group. */
void gw_upstream_live(void *up);
void gw_upstream_free(void *up);

/* The server for a request, or -1 when none is up: neither one in tried
 * (a bit per server index), nor down. key: the hash's input (hash only). */
int gw_pick(struct gw_upstream *up, unsigned worker, uint64_t now_ms, uint64_t tried, uint64_t key);
/* A failure (connect error or timeout, read timeout, invalid answer) or a
 * success of server i. */
void gw_failed(struct gw_upstream *up, unsigned i, uint64_t now_ms);
void gw_succeeded(struct gw_upstream *up, unsigned i);
/* CLOCK_MONOTONIC in milliseconds: the active health check's clock (its
 * thread has no worker's). */
uint64_t gw_mono_ms(void);
/* Whether server i is up now. */
bool gw_server_up(const struct gw_upstream *up, unsigned i, uint64_t now_ms);

/* An idle pooled connection to server i for worker, or -1 (one idle for
 * keepalive_timeout or longer is closed, not taken). */
int gw_pool_take(struct gw_upstream *up, unsigned worker, unsigned i);
/* A request on a new connection to server i waits for its answer (start),
 * or waiting is over (its first bytes, or the end of the connection):
 * while one waits, a group that holds_process closes idle connections to
 * i instead of keeping them (at the put, and at the worker's tick for
 * those in the pools), so that the server's processes they hold can take
 * the new ones (PHP-FPM with every child held by an idle kept connection
 * would leave a new connection queued until read_timeout). */
void gw_starving(struct gw_upstream *up, unsigned i, bool start);
/* Gives a connection back (closed when the pool is full or off). While it
 * idles, the worker's epoll watches it (conn_watch_idle: as its last wait
 * for reading left it, edge-triggered: no system call most often): the
 * upstream closing it (or resetting it) closes it at once; the worker's
 * tick, once a second, closes it after keepalive_timeout, or when it holds
 * bytes nobody asked for (one peek each). */
struct conn_ctx;
void gw_pool_put(struct gw_upstream *up, struct conn_ctx *ctx, unsigned i, int fd);
/* A new connection's fd: what the pools' records hold for its number
 * (an earlier fd's) is forgotten. */
void gw_pool_forget(int fd);
/* fd's upstream ended it (a wait saw it with the last bytes): it is closed,
 * not pooled, when given back. */
void gw_pool_ended(int fd);
/* The idle handler (rt/conn.h conn_set_idle_handler): an event of an fd
 * while no wait was on it (closed: an end, a reset or an error), or the
 * worker's tick (fd -1). */
bool gw_pool_idle(unsigned worker, int fd, bool closed);

/* upmetrics.c: a group built whole joins the groups the metrics show (it
 * leaves when freed); an attempt on server i that failed or was answered
 * (gw_failed, gw_succeeded count them); an answer's time in ms (the
 * handler, after its response's head came). Cheap, and nothing while
 * metrics are off. */
void gw_stats_register(struct gw_upstream *up);
void gw_stats_unregister(struct gw_upstream *up);
void gw_stats_attempt(struct gw_upstream *up, unsigned i, bool failed);
void gw_stats_answer(struct gw_upstream *up, int i, int64_t ms);
/* fn(up, arg) for each group registered (gw_stats_register), under the
 * lock that gw_stats_unregister() takes: a group being freed is never
 * seen half-freed. */
void gw_groups_each(void (*fn)(struct gw_upstream *up, void *arg), void *arg);

/* Whether a request of method m may be sent twice (RFC 9110 9.2.2): only
 * these are sent again after a kept connection failed with the request
 * gone out, as nginx does by default. */
static inline bool gw_idempotent(enum colibri_method m)
{
    return m == COLIBRI_GET || m == COLIBRI_HEAD || m == COLIBRI_PUT || m == COLIBRI_DELETE ||
           m == COLIBRI_OPTIONS || m == COLIBRI_TRACE;
}

/* A 64-bit hash of bytes (FNV-1a with a final mix). */
uint64_t gw_hash(const void *p, size_t len);

/* A worker keeps one ended job of each kind (a proxied request's, a
 * FastCGI request's) with its buffers for its next request of that kind:
 * no malloc/free of them per request. What a worker keeps is freed at the
 * thread's end. */
enum gw_spare_kind { GW_SPARE_PROXY, GW_SPARE_FCGI, GW_SPARE_KINDS };
struct gw_spare {
    enum gw_spare_kind kind;
    size_t size;                 /* sizeof the job */
    size_t buf_at, buf_len;      /* offsetof its buffer pointer (char *), the buffer's size */
    void (*free_job)(void *job); /* frees the job and all it holds */
};
/* The worker's kept job of s's kind, as it was left, or a new one (zeroed
 * but for its buffer); NULL when out of memory. */
void *gw_spare_get(const struct gw_spare *s);
/* Keeps job for the worker's next gw_spare_get() if keep is true and the
 * worker keeps none of its kind; frees it otherwise. */
void gw_spare_put(const struct gw_spare *s, void *job, bool keep);

/* A timeout key of a proxy or fastcgi section (1 ms to a day) into *out,
 * left alone when the key is absent: 0 or a config error. */
int gw_take_timeout(struct colibri_conf *sec, const char *key, int *out, char *err, size_t errlen);
