/* metrics.c - per-worker counters and their Prometheus text exposition
 * (metrics.h). */
#include "http/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "http/request.h"
#include "http/vhost.h"
#include "rt/conn.h"
#include "rt/tls.h"

_Atomic bool http_metrics_on;

static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct http_worker *workers; /* linked by metrics_next */
static time_t start_time;
static _Atomic uint64_t reloads[2]; /* failed, ok */
_Atomic uint64_t http_metrics_sub_drops;

#define SOURCES_MAX 8
static struct source {
    int (*render)(struct strbuf *out);
    void (*on)(void);
} sources[SOURCES_MAX];
static unsigned n_sources; /* under workers_lock */

void http_metrics_source(int (*render)(struct strbuf *out), void (*on)(void))
{
    bool call = false;
    pthread_mutex_lock(&workers_lock);
    unsigned i = 0;
    while (i < n_sources && sources[i].render != render)
        i++;
    if (i == n_sources && i < SOURCES_MAX) {
        sources[n_sources++] = (struct source){render, on};
        call = on && atomic_load(&http_metrics_on);
    }
    pthread_mutex_unlock(&workers_lock);
    if (call)
        on();
}

void http_metrics_enable(void)
{
    if (atomic_exchange(&http_metrics_on, true))
        return;
    pthread_mutex_lock(&workers_lock);
    struct source s[SOURCES_MAX];
    unsigned n = n_sources;
    memcpy(s, sources, sizeof(s));
    pthread_mutex_unlock(&workers_lock);
    for (unsigned i = 0; i < n; i++)
        if (s[i].on)
            s[i].on();
}

static void stream_ended(void *counter)
{
    http_metrics_bump(counter, 1);
}

int http_metrics_stream(struct colibri_request *req, enum http_metrics_stream k)
{
    struct http_metrics *m = &req->hw->metrics;
    if (colibri_defer(req, stream_ended, &m->ended[k]) < 0)
        return -ENOMEM;
    http_metrics_bump(&m->opened[k], 1);
    return 0;
}

void http_metrics_begin(struct http_worker *hw, enum http_metrics_stream k)
{
    http_metrics_bump(&hw->metrics.opened[k], 1);
}

void http_metrics_end(struct http_worker *hw, enum http_metrics_stream k)
{
    http_metrics_bump(&hw->metrics.ended[k], 1);
}

void http_metrics_reloaded(bool ok)
{
    atomic_fetch_add_explicit(&reloads[ok], 1, memory_order_relaxed);
}

void http_metrics_register(struct http_worker *hw)
{
    pthread_mutex_lock(&workers_lock);
    if (!start_time)
        start_time = time(NULL);
    hw->metrics_next = workers;
    workers = hw;
    pthread_mutex_unlock(&workers_lock);
}

void http_metrics_unregister(struct http_worker *hw)
{
    pthread_mutex_lock(&workers_lock);
    for (struct http_worker **p = &workers; *p; p = &(*p)->metrics_next) {
        if (*p == hw) {
            *p = hw->metrics_next;
            break;
        }
    }
    pthread_mutex_unlock(&workers_lock);
}

unsigned http_metrics_site(const struct colibri_request *req)
{
    const struct http_config *cfg = req->cfg;
    if (!req->head)
        return 0;
    const struct http_vhost *v = http_vhost_find(cfg->vhosts, cfg->n_vhosts, req->head->host);
    if (!v)
        return 0;
    size_t i = (size_t)(v - cfg->vhosts) + 1;
    return i < HTTP_METRICS_SITES ? (unsigned)i : HTTP_METRICS_SITES - 1;
}

static uint64_t get(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static const char *site_name(const struct http_config *cfg, unsigned slot)
{
    if (!slot)
        return "default";
    if (slot - 1 < cfg->n_vhosts && slot < HTTP_METRICS_SITES - 1)
        return cfg->vhosts[slot - 1].name;
    return "other";
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the one opendir holds */
}

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long pages = -1, rss = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = -1;
        fclose(f);
    }
    return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

static const struct {
    const char *name, *help;
} stream_names[HTTP_METRICS_STREAM_KINDS] = {
    [HTTP_METRICS_WS] = {"colibri_websockets_open", "WebSocket connections open."},
    [HTTP_METRICS_SSE] = {"colibri_sse_streams_open", "Server-sent event streams open."},
    [HTTP_METRICS_SUB] = {"colibri_channel_subscribers", "Channel (publish/subscribe) "
                                                         "subscribers."},
    [HTTP_METRICS_H2_CONN] = {"colibri_http2_connections_open", "HTTP/2 connections open."},
    [HTTP_METRICS_H2_STREAM] = {"colibri_http2_streams_open", "HTTP/2 streams open."},
    [HTTP_METRICS_H2_REST] = {"colibri_http2_connections_resting",
                              "HTTP/2 connections idle without a session (rebuilt at their next "
                              "bytes)."},
};

int http_metrics_head(struct strbuf *out, const char *name, const char *type, const char *help)
{
    return strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int http_metrics_one(struct strbuf *out, const char *name, const char *type, const char *help,
                     uint64_t v)
{
    return http_metrics_head(out, name, type, help) |
           strbuf_printf(out, "%s %llu\n", name, (unsigned long long)v);
}

static int render_conns(struct conn_ctx *ctx, struct strbuf *out)
{
    struct conn_stats cs;
    conn_stats(ctx, &cs);
    return http_metrics_one(out, "colibri_connections_accepted_total", "counter",
                            "Connections accepted.", cs.accepted) |
           http_metrics_one(out, "colibri_connections_handled_total", "counter",
                            "Connections accepted and not refused at once (out of file "
                            "descriptors, a stop).",
                            cs.handled) |
           http_metrics_one(out, "colibri_connections_refused_per_client_total", "counter",
                            "Connections closed at accept: their client had "
                            "max_connections_per_client open already.",
                            cs.refused_per_client) |
           http_metrics_one(out, "colibri_connections_active", "gauge",
                            "Connections open, in every state.", cs.active) |
           http_metrics_head(out, "colibri_connections", "gauge",
                             "Open connections by state: reading a request, writing (a request "
                             "at work or its answer), waiting (idle between requests).") |
           strbuf_printf(out,
                         "colibri_connections{state=\"reading\"} %llu\n"
                         "colibri_connections{state=\"writing\"} %llu\n"
                         "colibri_connections{state=\"waiting\"} %llu\n",
                         (unsigned long long)cs.reading, (unsigned long long)cs.writing,
                         (unsigned long long)cs.waiting);
}

int http_metrics_render(const struct colibri_request *req, struct strbuf *out)
{
    static struct http_metrics sum; /* under workers_lock */
    const struct http_config *cfg = req->cfg;
    int r = render_conns(req->ctx, out); /* first: it waits for the workers */
    pthread_mutex_lock(&workers_lock);
    memset(&sum, 0, sizeof(sum));
    for (const struct http_worker *w = workers; w; w = w->metrics_next) {
        const struct http_metrics *m = &w->metrics;
        for (unsigned s = 0; s < HTTP_METRICS_SITES; s++)
            for (unsigned c = 0; c < 5; c++)
                for (unsigned k = 0; k < COLIBRI_METHOD_COUNT; k++)
                    sum.requests[s][c][k] += get(&m->requests[s][c][k]);
        sum.bytes_in += get(&m->bytes_in);
        sum.bytes_out += get(&m->bytes_out);
        for (unsigned b = 0; b <= HTTP_METRICS_BUCKETS; b++)
            sum.duration[b] += get(&m->duration[b]);
        sum.duration_ns += get(&m->duration_ns);
        sum.connections += get(&m->connections);
        sum.reused += get(&m->reused);
        for (unsigned k = 0; k < HTTP_METRICS_STREAM_KINDS; k++) {
            sum.opened[k] += get(&m->opened[k]);
            sum.ended[k] += get(&m->ended[k]);
        }
    }
    time_t started = start_time;
    struct source srcs[SOURCES_MAX];
    unsigned n_srcs = n_sources;
    memcpy(srcs, sources, sizeof(srcs));
    pthread_mutex_unlock(&workers_lock);

    for (unsigned k = 0; k < HTTP_METRICS_STREAM_KINDS; k++) {
        /* read apart: an end may be summed and its beginning not */
        uint64_t open = sum.opened[k] > sum.ended[k] ? sum.opened[k] - sum.ended[k] : 0;
        r |= http_metrics_one(out, stream_names[k].name, "gauge", stream_names[k].help, open);
    }
    r |= http_metrics_one(out, "colibri_http2_streams_total", "counter", "HTTP/2 streams begun.",
                          sum.opened[HTTP_METRICS_H2_STREAM]);
    r |= http_metrics_one(out, "colibri_http2_connections_total", "counter",
                          "HTTP/2 connections begun.", sum.opened[HTTP_METRICS_H2_CONN]);
    r |= http_metrics_one(out, "colibri_http2_rests_total", "counter",
                          "Times an idle HTTP/2 connection gave up its session.",
                          sum.opened[HTTP_METRICS_H2_REST]);
    r |= http_metrics_one(out, "colibri_channel_subscribers_dropped_total", "counter",
                          "Channel subscribers dropped (too far behind, or out of memory).",
                          atomic_load(&http_metrics_sub_drops));
    for (unsigned i = 0; i < n_srcs; i++)
        r |= srcs[i].render(out);

    r |= http_metrics_head(out, "colibri_http_requests_total", "counter",
                           "Requests answered, by site, status class and method.");
    for (unsigned s = 0; s < HTTP_METRICS_SITES; s++)
        for (unsigned c = 0; c < 5; c++)
            for (unsigned k = 0; k < COLIBRI_METHOD_COUNT; k++) {
                uint64_t v = sum.requests[s][c][k];
                if (v)
                    r |= strbuf_printf(out,
                                       "colibri_http_requests_total{site=\"%s\",code=\"%uxx\","
                                       "method=\"%s\"} %llu\n",
                                       site_name(cfg, s), c + 1,
                                       colibri_method_name((enum colibri_method)k),
                                       (unsigned long long)v);
            }
    r |= http_metrics_one(out, "colibri_http_request_bytes_total", "counter",
                          "Request bytes received (heads and bodies).", sum.bytes_in);
    r |= http_metrics_one(out, "colibri_http_response_body_bytes_total", "counter",
                          "Response body bytes sent.", sum.bytes_out);
    r |= http_metrics_head(out, "colibri_http_request_duration_seconds", "histogram",
                           "From a request's head to its answer.");
    uint64_t cum = 0;
    for (unsigned b = 0; b < HTTP_METRICS_BUCKETS; b++) {
        cum += sum.duration[b];
        double le = (double)(1ull << (b + HTTP_METRICS_LOG2_MIN)) / 1e9;
        r |= strbuf_printf(out, "colibri_http_request_duration_seconds_bucket{le=\"%.9g\"} %llu\n",
                           le, (unsigned long long)cum);
    }
    cum += sum.duration[HTTP_METRICS_BUCKETS];
    r |= strbuf_printf(out,
                       "colibri_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                       "colibri_http_request_duration_seconds_sum %.6f\n"
                       "colibri_http_request_duration_seconds_count %llu\n",
                       (unsigned long long)cum, (double)sum.duration_ns / 1e9,
                       (unsigned long long)cum);
    r |= http_metrics_one(out, "colibri_http_connections_total", "counter",
                          "Connections that sent a request.", sum.connections);
    r |= http_metrics_one(out, "colibri_http_keepalive_requests_total", "counter",
                          "Requests after the first on their connection.", sum.reused);
    r |= http_metrics_head(out, "colibri_reloads_total", "counter", "Config reloads, by outcome.");
    r |= strbuf_printf(out,
                       "colibri_reloads_total{outcome=\"ok\"} %llu\n"
                       "colibri_reloads_total{outcome=\"failed\"} %llu\n",
                       (unsigned long long)atomic_load(&reloads[1]),
                       (unsigned long long)atomic_load(&reloads[0]));
    if (tls_available()) {
        uint64_t full, resumed, failed;
        tls_handshake_counts(&full, &resumed, &failed);
        r |= http_metrics_head(out, "colibri_tls_handshakes_total", "counter",
                               "TLS handshakes, by result: full, resumed (a session ticket) or "
                               "failed.");
        r |= strbuf_printf(out,
                           "colibri_tls_handshakes_total{result=\"full\"} %llu\n"
                           "colibri_tls_handshakes_total{result=\"resumed\"} %llu\n"
                           "colibri_tls_handshakes_total{result=\"failed\"} %llu\n",
                           (unsigned long long)full, (unsigned long long)resumed,
                           (unsigned long long)failed);
    }
    r |= http_metrics_one(out, "process_start_time_seconds", "gauge",
                          "Start time of the process since the epoch, in seconds.",
                          (uint64_t)started);
    int fds = open_fds();
    if (fds >= 0)
        r |= http_metrics_one(out, "process_open_fds", "gauge", "Open file descriptors.",
                              (uint64_t)fds);
    long rss = rss_bytes();
    if (rss >= 0)
        r |= http_metrics_one(out, "process_resident_memory_bytes", "gauge",
                              "Resident memory size in bytes.", (uint64_t)rss);
    return r ? -ENOMEM : 0;
}
