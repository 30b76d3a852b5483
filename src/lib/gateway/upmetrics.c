/* upmetrics.c - the gateway's upstream servers in the metrics: up or
 * down, attempts and failures, answers' times (a histogram).
 *
 * The counters live in each server (struct gw_server.stats), shared by
 * the workers: a proxied request costs a connect or a pooled socket,
 * writes and reads, beside which a relaxed atomic add or two is nothing,
 * and only while metrics are on. A scrape walks the groups of every live
 * config generation: a reload's old and new groups of one name (or two
 * routes to one address) are summed into one series. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/upstream.h"
#include "http/metrics.h"
#include "rt/conn.h"

static const unsigned bucket_ms[GW_TIME_BUCKETS] = {1,   5,   10,   25,   50,   100,
                                                    250, 500, 1000, 2500, 5000, 10000};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_upstream *groups; /* linked by stats_next */

static inline bool on(void)
{
    return atomic_load_explicit(&http_metrics_on, memory_order_relaxed);
}

void gw_stats_attempt(struct gw_upstream *up, unsigned i, bool failed)
{
    if (!on())
        return;
    struct gw_server_stats *s = &up->servers[i].stats;
    atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
    if (failed)
        atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
}

void gw_stats_answer(struct gw_upstream *up, int i, int64_t ms)
{
    if (!on() || i < 0 || (unsigned)i >= up->n || ms < 0)
        return;
    struct gw_server_stats *s = &up->servers[i].stats;
    unsigned b = 0;
    while (b < GW_TIME_BUCKETS && (uint64_t)ms > bucket_ms[b])
        b++;
    atomic_fetch_add_explicit(&s->time[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->time_ms, (uint64_t)ms, memory_order_relaxed);
}

/* One series: a group's name and a server's address, summed over the
 * groups that have them. */
struct row {
    const char *group, *server;
    uint64_t up; /* 1 or 0 */
    uint64_t requests, failures, time_ms, time[GW_TIME_BUCKETS + 1];
};

static uint64_t get(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* A label value: '\' and '"' escaped (a unix: path may hold them), a line
 * end as \n. */
static int label(struct strbuf *out, const char *s)
{
    int r = 0;
    for (; *s; s++)
        r |= *s == '\\' || *s == '"' ? strbuf_printf(out, "\\%c", *s)
             : *s == '\n'            ? strbuf_append_str(out, "\\n")
                                     : strbuf_append_char(out, *s);
    return r;
}

static int labels(struct strbuf *out, const struct row *w, const char *extra)
{
    int r = strbuf_append_str(out, "{upstream=\"");
    r |= label(out, w->group);
    r |= strbuf_append_str(out, "\",server=\"");
    r |= label(out, w->server);
    r |= strbuf_printf(out, "\"%s}", extra);
    return r;
}

/* One family of plain series: its head, then a line per row with the
 * uint64_t at field. */
static int family(struct strbuf *out, const char *name, const char *type, const char *help,
                  const struct row *rows, size_t n, size_t field)
{
    int r = http_metrics_head(out, name, type, help);
    for (size_t k = 0; k < n; k++) {
        r |= strbuf_append_str(out, name);
        r |= labels(out, &rows[k], "");
        r |= strbuf_printf(out, " %llu\n",
                           (unsigned long long)*(const uint64_t *)((const char *)&rows[k] + field));
    }
    return r;
}

static int render(struct strbuf *out)
{
    struct row *rows = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    uint64_t now = worker_now_ms();
    pthread_mutex_lock(&lock);
    for (const struct gw_upstream *g = groups; g && !r; g = g->stats_next)
        for (unsigned i = 0; i < g->n; i++) {
            const struct gw_server *s = &g->servers[i];
            size_t k = 0;
            while (k < n && (strcmp(rows[k].group, g->name) || strcmp(rows[k].server, s->text)))
                k++;
            if (k == n) {
                if (n == cap) {
                    struct row *m = realloc(rows, (cap = cap ? 2 * cap : 16) * sizeof(*rows));
                    if (!m) {
                        r = -1;
                        break;
                    }
                    rows = m;
                }
                rows[n++] = (struct row){.group = g->name, .server = s->text};
            }
            struct row *w = &rows[k];
            w->up |= gw_server_up(g, i, now);
            w->requests += get(&s->stats.requests);
            w->failures += get(&s->stats.failures);
            w->time_ms += get(&s->stats.time_ms);
            for (unsigned b = 0; b <= GW_TIME_BUCKETS; b++)
                w->time[b] += get(&s->stats.time[b]);
        }
    /* the names are the groups': written out before the lock goes */
    if (n) {
        r |= family(out, "colibri_upstream_up", "gauge",
                    "Whether the upstream server is up (1) or marked down (0) by failures "
                    "or its health check.",
                    rows, n, offsetof(struct row, up));
        r |= family(out, "colibri_upstream_requests_total", "counter",
                    "Requests sent to the upstream server (answered or failed).", rows, n,
                    offsetof(struct row, requests));
        r |= family(out, "colibri_upstream_failures_total", "counter",
                    "Failed attempts on the upstream server (connect, timeout, invalid "
                    "answer).",
                    rows, n, offsetof(struct row, failures));
        r |= http_metrics_head(out, "colibri_upstream_response_seconds", "histogram",
                               "From the first connect to the upstream's answer head.");
        for (size_t k = 0; k < n; k++) {
            uint64_t cum = 0;
            for (unsigned b = 0; b < GW_TIME_BUCKETS; b++) {
                char le[32];
                snprintf(le, sizeof(le), ",le=\"%g\"", bucket_ms[b] / 1000.0);
                cum += rows[k].time[b];
                r |= strbuf_append_str(out, "colibri_upstream_response_seconds_bucket");
                r |= labels(out, &rows[k], le);
                r |= strbuf_printf(out, " %llu\n", (unsigned long long)cum);
            }
            cum += rows[k].time[GW_TIME_BUCKETS];
            r |= strbuf_append_str(out, "colibri_upstream_response_seconds_bucket");
            r |= labels(out, &rows[k], ",le=\"+Inf\"");
            r |= strbuf_printf(out, " %llu\ncolibri_upstream_response_seconds_sum",
                               (unsigned long long)cum);
            r |= labels(out, &rows[k], "");
            r |= strbuf_printf(out, " %.3f\ncolibri_upstream_response_seconds_count",
                               (double)rows[k].time_ms / 1000.0);
            r |= labels(out, &rows[k], "");
            r |= strbuf_printf(out, " %llu\n", (unsigned long long)cum);
        }
    }
    pthread_mutex_unlock(&lock);
    free(rows);
    return r ? -1 : 0;
}

void gw_stats_register(struct gw_upstream *up)
{
    http_metrics_source(render, NULL);
    conn_set_idle_handler(gw_pool_idle);
    pthread_mutex_lock(&lock);
    up->stats_next = groups;
    groups = up;
    up->stats_listed = true;
    pthread_mutex_unlock(&lock);
}

void gw_groups_each(void (*fn)(struct gw_upstream *up, void *arg), void *arg)
{
    pthread_mutex_lock(&lock);
    for (struct gw_upstream *up = groups; up; up = up->stats_next)
        fn(up, arg);
    pthread_mutex_unlock(&lock);
}

void gw_stats_unregister(struct gw_upstream *up)
{
    pthread_mutex_lock(&lock);
    if (up->stats_listed)
        for (struct gw_upstream **p = &groups; *p; p = &(*p)->stats_next)
            if (*p == up) {
                *p = up->stats_next;
                break;
            }
    up->stats_listed = false;
    pthread_mutex_unlock(&lock);
}
