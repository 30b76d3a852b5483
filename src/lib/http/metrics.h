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
#define HTTP_METRICS_BUCKETS 13

struct http_metrics {
    _Atomic uint64_t requests[HTTP_METRICS_SITES][5][COLIBRI_METHOD_COUNT];
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic uint64_t duration[HTTP_METRICS_BUCKETS + 1]; /* by bucket (not cumulative) */
    _Atomic uint64_t duration_us;
    _Atomic uint64_t connections, reused;
};

struct colibri_request;
struct colibri_response;
struct http_worker;

extern _Atomic bool http_metrics_on;

/* One answered request, on its worker's thread. */
void http_metrics_count(struct colibri_request *req, const struct colibri_response *resp);
/* A connection's first run. */
void http_metrics_connection(struct http_worker *hw);
/* Every worker's counters summed, as Prometheus text exposition into out;
 * site names from cfg's sites. 0 or -ENOMEM. */
int http_metrics_render(const struct colibri_request *req, struct strbuf *out);
/* The worker joins (or leaves) the set a scrape sums. */
void http_metrics_register(struct http_worker *hw);
void http_metrics_unregister(struct http_worker *hw);
