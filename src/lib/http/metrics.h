/* metrics.h - counters for the metrics module (Prometheus): kept per
 * worker thread, written by that thread alone with plain (relaxed atomic)
 * loads and stores, no read-modify-write, and summed by whichever thread
 * renders a scrape. Counting is off until a config has a metrics section
 * (http_metrics_on); then handle() counts each answered request once. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "colibri.h"

#define HTTP_METRICS_SITES                                                                         \
    16 /* 0: the default site; i + 1: the named site i (the last takes the rest) */
/* The duration histogram's buckets are powers of two of nanoseconds, so
 * a request finds its own with one bit scan: bucket b holds durations
 * below 2^(b + HTTP_METRICS_LOG2_MIN) ns (2^20 ns = 1.05 ms, ..., 2^34 ns
 * = 17.2 s), the last one everything longer. */
#define HTTP_METRICS_LOG2_MIN 20
#define HTTP_METRICS_BUCKETS  15

/* What opens and ends: WebSocket connections, event streams, channel
 * subscribers, HTTP/2 connections and streams, HTTP/2 connections at
 * rest. */
enum http_metrics_stream {
    HTTP_METRICS_WS,
    HTTP_METRICS_SSE,
    HTTP_METRICS_SUB,
    HTTP_METRICS_H2_CONN,
    HTTP_METRICS_H2_STREAM,
    HTTP_METRICS_H2_REST, /* idle HTTP/2 connections without an nghttp2 session */
    HTTP_METRICS_STREAM_KINDS
};

struct http_metrics {
    _Atomic uint64_t requests[HTTP_METRICS_SITES][5][COLIBRI_METHOD_COUNT];
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic uint64_t duration[HTTP_METRICS_BUCKETS + 1]; /* by bucket (not cumulative) */
    _Atomic uint64_t duration_ns;
    _Atomic uint64_t connections, reused;
    /* streams opened and ended, by kind (the gauge is their difference,
     * summed over the workers: a stream may end on no other worker than
     * the one it began on, but a sum of differences is never negative) */
    _Atomic uint64_t opened[HTTP_METRICS_STREAM_KINDS], ended[HTTP_METRICS_STREAM_KINDS];
};

/* The bucket of a duration of ns nanoseconds (0..HTTP_METRICS_BUCKETS). */
static inline unsigned http_metrics_bucket(uint64_t ns)
{
    unsigned log2 = 63u - (unsigned)__builtin_clzll(ns | 1);
    unsigned b = log2 < HTTP_METRICS_LOG2_MIN ? 0 : log2 - HTTP_METRICS_LOG2_MIN + 1;
    return b < HTTP_METRICS_BUCKETS ? b : HTTP_METRICS_BUCKETS;
}

/* The owner's increment: a load and a store, no locked instruction. */
static inline void http_metrics_bump(_Atomic uint64_t *c, uint64_t by)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

struct colibri_request;
struct colibri_response;
struct http_worker;

extern _Atomic bool http_metrics_on;
/* Channel subscribers dropped for falling behind (any thread, rare). */
extern _Atomic uint64_t http_metrics_sub_drops;

/* A stream of kind k begins on the worker hw: counted at once, and its end
 * when the request's handler is done (colibri_defer). Counted whether
 * metrics are on or not: a stream is not a request's hot path, and a
 * gauge must not miss the ends of what began before a reload turned it
 * on. 0, or -ENOMEM (the stream is not counted). */
int http_metrics_stream(struct colibri_request *req, enum http_metrics_stream k);
/* The same, by hand, for what does not live as long as one request (an
 * HTTP/2 connection, an HTTP/2 stream): begun and ended, on the worker
 * hw that owns it. */
void http_metrics_begin(struct http_worker *hw, enum http_metrics_stream k);
void http_metrics_end(struct http_worker *hw, enum http_metrics_stream k);
/* An answered request not counted by HTTP/1.1's handle() (an HTTP/2
 * stream's), into its worker's counters; call when metrics are on. */
void http_metrics_count(const struct colibri_request *req, const struct colibri_response *resp);

/* The counters' slot of the request's site (named sites only: the
 * default site is 0). */
unsigned http_metrics_site(const struct colibri_request *req);
/* What another layer counts (serve_files' cache, the gateway's
 * upstreams), rendered after the server's own: render appends its
 * families to out (0 or -ENOMEM); on, when given, is called once counting
 * is on (at once if it is already). Registered once per function, for the
 * life of the process (at most 8). */
void http_metrics_source(int (*render)(struct strbuf *out), void (*on)(void));
/* The text format's pieces, for every source: a family's "# HELP" and
 * "# TYPE" lines (type: "counter", "gauge", "histogram"), and a family of
 * one series without labels, its head and "NAME VALUE". 0 or -ENOMEM. */
int http_metrics_head(struct strbuf *out, const char *name, const char *type, const char *help);
int http_metrics_one(struct strbuf *out, const char *name, const char *type, const char *help,
                     uint64_t v);
/* A metrics section turns counting on (for good). */
void http_metrics_enable(void);
/* Every worker's counters summed, as Prometheus text exposition into out;
 * site names from cfg's sites. 0 or -ENOMEM. */
int http_metrics_render(const struct colibri_request *req, struct strbuf *out);
/* A reload ended (the control thread): counted by outcome. */
void http_metrics_reloaded(bool ok);
/* The worker joins (or leaves) the set a scrape sums. */
void http_metrics_register(struct http_worker *hw);
void http_metrics_unregister(struct http_worker *hw);
