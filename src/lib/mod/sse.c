/* sse_ticks: a demonstration event stream (and the one external checks
 * use): `count` events (query parameter, default 10, at most 1,000,000)
 * named "tick" whose data counts from 1, one every `interval` milliseconds
 * (default 1000, at most an hour), the first at once; then the stream
 * ends. Bad values: 400. The waits suspend only the connection. */
#include <errno.h>
#include <stdio.h>

#include "server/builtin.h"

#define TICKS_MAX    1000000ul
#define INTERVAL_MAX 3600000ul

/* The decimal query parameter name, at most max; def when absent. False
 * when present but not a number in 0..max. */
static bool query_ulong(struct colibri_request *req, const char *name, unsigned long def,
                        unsigned long max, unsigned long *out)
{
    struct colibri_str v;
    *out = def;
    if (!colibri_req_query_string(req).len || !colibri_req_query(req, name, &v))
        return true;
    if (!v.len || v.len > 10)
        return false;
    unsigned long n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9')
            return false;
        n = n * 10 + (unsigned long)(v.p[i] - '0');
    }
    if (n > max)
        return false;
    *out = n;
    return true;
}

static int sse_ticks(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    unsigned long count, interval;
    if (!query_ulong(req, "count", 10, TICKS_MAX, &count) ||
        !query_ulong(req, "interval", 1000, INTERVAL_MAX, &interval)) {
        colibri_resp_append(resp, "count: 0..1000000, interval: 0..3600000 (ms)\n", 45);
        return 400;
    }
    colibri_resp_set_type(resp, "text/event-stream");
    if (colibri_resp_header(resp, "Cache-Control", "no-cache") < 0)
        return 500;
    if (colibri_req_method(req) == COLIBRI_HEAD || !count) {
        colibri_resp_send_chunk(resp, "", 0); /* the head alone */
        return 200;
    }
    for (unsigned long i = 1; i <= count; i++) {
        if (i > 1 && colibri_sleep(req, (unsigned)interval) < 0)
            break; /* the server is stopping: end the stream */
        char n[24];
        int len = snprintf(n, sizeof(n), "%lu", i);
        if (colibri_resp_send_event(resp, "tick", n, (size_t)len) < 0)
            break;
    }
    return 200;
}

BUILTIN_HANDLER(sse_ticks) = {.name = "sse_ticks", .fn = sse_ticks};
