/* sse.c - server-sent events (the WHATWG "event stream" format) on a
 * streamed response: events with a name, an id and a retry time, data of
 * any number of lines, comments as keep-alives, and the client's
 * Last-Event-ID. Each event leaves in one chunk. */
#include <errno.h>
#include <stdio.h>

#include "http/request.h"
#include "http/metrics.h"

/* A field value that a line break would cut short (or a NUL that clients
 * drop an id for). */
static bool one_line(const char *s)
{
    return !s || !strpbrk(s, "\r\n");
}

/* "PREFIX" + one line of text per line of p (any of CRLF, LF, CR ends a
 * line); a text that ends with a line break gets an empty last line, so
 * the client rebuilds it exactly. */
static int lines(struct strbuf *sb, const char *prefix, size_t plen, const char *p, size_t len)
{
    size_t i = 0;
    for (;;) {
        size_t end = i;
        while (end < len && p[end] != '\n' && p[end] != '\r')
            end++;
        if (strbuf_append(sb, prefix, plen) < 0 || strbuf_append(sb, p + i, end - i) < 0 ||
            strbuf_append_char(sb, '\n') < 0)
            return -ENOMEM;
        if (end == len)
            return 0;
        i = end + (p[end] == '\r' && end + 1 < len && p[end + 1] == '\n' ? 2 : 1);
    }
}

/* The event is built in the body buffer, which a stream has no other use
 * for, and sent as one chunk; err: building it failed (-ENOMEM), so
 * nothing is sent rather than an event with a line missing. */
static int send_built(struct colibri_response *resp, struct strbuf *ev, int err)
{
    if (err || strbuf_append_char(ev, '\n') < 0)
        return -ENOMEM;
    return colibri_resp_send_chunk(resp, ev->buf, ev->len);
}

int colibri_resp_send_event_ex(struct colibri_response *resp, const struct colibri_event *e)
{
    struct strbuf *ev = &resp->req->hc->body;
    if (!one_line(e->event) || !one_line(e->id))
        return -EINVAL;
    if (!resp->streaming && !resp->sse_counted) {
        resp->mime = "text/event-stream";
        resp->sse_counted = http_metrics_stream(resp->req, HTTP_METRICS_SSE) == 0;
    }
    strbuf_reset(ev);
    int err = 0;
    if (e->event)
        err |= strbuf_printf(ev, "event: %s\n", e->event);
    if (e->id)
        err |= strbuf_printf(ev, "id: %s\n", e->id);
    if (e->retry_ms >= 0)
        err |= strbuf_printf(ev, "retry: %d\n", e->retry_ms);
    if (e->data || (!e->id && e->retry_ms < 0))
        err |= lines(ev, "data: ", 6, e->data ? e->data : "", e->data ? e->len : 0);
    return send_built(resp, ev, err);
}

int colibri_resp_send_event(struct colibri_response *resp, const char *event, const char *data,
                            size_t len)
{
    struct colibri_event e = {.event = event, .retry_ms = -1, .data = data, .len = len};
    return colibri_resp_send_event_ex(resp, &e);
}

int colibri_resp_send_comment(struct colibri_response *resp, const char *text)
{
    struct strbuf *ev = &resp->req->hc->body;
    if (!resp->streaming && !resp->sse_counted) {
        resp->mime = "text/event-stream";
        resp->sse_counted = http_metrics_stream(resp->req, HTTP_METRICS_SSE) == 0;
    }
    strbuf_reset(ev);
    int err = lines(ev, ":", 1, text ? text : "", text ? strlen(text) : 0);
    return send_built(resp, ev, err);
}

bool colibri_req_last_event_id(const struct colibri_request *req, struct colibri_str *id)
{
    return colibri_req_header(req, "Last-Event-ID", id);
}
