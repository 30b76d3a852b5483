/* h2.c - an HTTP/2 connection: the nghttp2 server session its coroutine
 * drives, and the streams it starts (stream.c runs them). */
#include "http2/h2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/log.h"
#include "http/fields.h"
#include "http/request.h"
#include "http/metrics.h"
#include "http2/stream.h"

bool h2_is_preface(const char *p, size_t len)
{
    static const char line[] = "PRI * HTTP/2.0\r\n";
    return len >= sizeof(line) - 1 && !memcmp(p, line, sizeof(line) - 1);
}

/* Streams reset by the client: at most this many in a burst, then this
 * many a second (CVE-2023-44487, Rapid Reset), else GOAWAY. */
#define H2_RESET_BURST 1000
#define H2_RESET_RATE  33
/* CONTINUATION frames after a HEADERS (CVE-2024-28182). */
#define H2_MAX_CONTINUATIONS 8

static struct h2_stream *stream_of(nghttp2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

#define H2_GAPS 8
static_assert(H2_GAPS == N_ELEMENTS(((struct h2_conn *)0)->kept.gaps), "gaps");

/* A frame begins: a HEADERS that would open a stream the client skipped
 * before is a connection error (PROTOCOL_ERROR). */
static int on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd, void *user)
{
    struct h2_conn *c = user;
    int32_t id = hd->stream_id;
    if (hd->type != NGHTTP2_HEADERS || !(id & 1))
        return 0;
    if (id > c->kept.max_id) {
        if (id > c->kept.max_id + 2) { /* ids skipped: remembered, the oldest forgotten */
            c->kept.gaps[c->kept.next_gap].lo = c->kept.max_id + 2;
            c->kept.gaps[c->kept.next_gap].hi = id - 2;
            c->kept.next_gap = (c->kept.next_gap + 1) % H2_GAPS;
            if (c->kept.n_gaps < H2_GAPS)
                c->kept.n_gaps++;
        }
        c->kept.max_id = id;
        return 0;
    }
    if (id <= c->kept.floor_id && !nghttp2_session_find_stream(s, id)) {
        /* an id of the session before this one (h2_rest(), h2_wake()): this
         * one cannot tell it from a new stream, so it is refused as the
         * reuse of an id (RFC 9113 5.1.1) */
        nghttp2_session_terminate_session2(
            s, MAX(c->kept.floor_id, nghttp2_session_get_last_proc_stream_id(s)),
            NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    for (unsigned i = 0; i < c->kept.n_gaps; i++)
        if (id >= c->kept.gaps[i].lo && id <= c->kept.gaps[i].hi &&
            !nghttp2_session_find_stream(s, id)) {
            nghttp2_session_terminate_session(s, NGHTTP2_PROTOCOL_ERROR);
            break;
        }
    return 0;
}

static struct h2_stream *stream_new(nghttp2_session *s, struct h2_conn *c, int32_t id)
{
    struct h2_stream *st = h2_stream_alloc();
    if (!st)
        return NULL;
    st->id = id;
    st->c = c;
    st->content_length = -1;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    c->n_streams++;
    c->quiet = false; /* a rest waits for H2_REST_MS without streams again */
    http_metrics_begin(conn_worker_state(c->ctx), HTTP_METRICS_H2_STREAM);
    nghttp2_session_set_stream_user_data(s, st->id, st);
    return st;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct h2_conn *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (!stream_new(s, c, f->hd.stream_id))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    struct h2_stream *st = stream_of(s, f->hd.stream_id);
    if (!st || st->head_done) /* trailers: not kept */
        return 0;
    h2_stream_header(st, (const char *)name, nlen, (const char *)value, vlen);
    return 0;
}

/* A WINDOW_UPDATE of the connection: the streams held back for the
 * send_debt may go on (data_read() judges again). */
static void debt_paid(nghttp2_session *s, struct h2_conn *c)
{
    for (struct h2_stream *st = c->streams; st; st = st->next)
        if (st->debt_wait) {
            st->debt_wait = false;
            if (st->deferred && !st->closed) {
                st->deferred = false;
                nghttp2_session_resume_data(s, st->id);
            }
        }
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct h2_conn *c = user;
    if (unlikely(c->send_debt) && f->hd.type == NGHTTP2_WINDOW_UPDATE && !f->hd.stream_id)
        debt_paid(s, c);
    struct h2_stream *st = f->hd.stream_id ? stream_of(s, f->hd.stream_id) : NULL;
    if (!st)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && !st->head_done) {
        st->head_done = true;
        st->no_body = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
        h2_stream_ready(st);
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        st->req_end = true;
        if (st->want_rx)
            h2_stream_ready(st);
        if (st->hold_end) { /* the answer may end now */
            st->hold_end = false;
            if (st->deferred) {
                st->deferred = false;
                nghttp2_session_resume_data(s, st->id);
            }
        }
    }
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                              size_t len, void *user)
{
    (void)flags, (void)user;
    struct h2_stream *st = stream_of(s, id);
    if (!st || st->handler_done || strbuf_append(&st->rx, data, len) < 0) {
        /* nobody will read it: the window opens again at once */
        nghttp2_session_consume(s, id, len);
        return 0;
    }
    if (st->want_rx)
        h2_stream_ready(st);
    return 0;
}

/* Stream errors the client provokes (MadeYouReset, CVE-2025-8671:
 * Debian's nghttp2 counts only the resets the client sends). */
#define H2_PROVOKED_BURST 200
#define H2_PROVOKED_RATE  20

static void provoked(nghttp2_session *s, struct h2_conn *c)
{
    uint64_t now = conn_now_ms(c->ctx);
    uint64_t add = (now - c->kept.provoked_ms) * H2_PROVOKED_RATE / 1000;
    if (add) {
        c->kept.provoked_tokens =
            (uint32_t)MIN((uint64_t)H2_PROVOKED_BURST, c->kept.provoked_tokens + add);
        c->kept.provoked_ms = now;
    }
    if (c->kept.provoked_tokens) {
        c->kept.provoked_tokens--;
        return;
    }
    LOG_LIMITED(LOG_INFO, "http2: too many stream errors on a connection: GOAWAY");
    nghttp2_session_terminate_session(s, NGHTTP2_ENHANCE_YOUR_CALM);
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct h2_conn *c = user;
    if (f->hd.type == NGHTTP2_RST_STREAM && f->rst_stream.error_code != NGHTTP2_NO_ERROR)
        provoked(s, c);
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct h2_stream *st = stream_of(s, f->hd.stream_id);
    /* the answer is whole and the request's body still comes: no need */
    if (st && !st->req_end)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
    (void)code, (void)user;
    struct h2_stream *st = stream_of(s, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    st->closed = true;
    h2_stream_ready(st); /* a handler waiting on it learns it */
    return 0;
}

static nghttp2_session *session_new(struct h2_conn *c, bool rebuilt)
{
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    nghttp2_session *s = NULL;
    if (nghttp2_session_callbacks_new(&cb))
        return NULL;
    if (nghttp2_option_new(&opt)) {
        nghttp2_session_callbacks_del(cb);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cb, h2_send_data);
    /* the window opens as handlers read (nghttp2_session_consume) */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_stream_reset_rate_limit(opt, H2_RESET_BURST, H2_RESET_RATE);
    nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    /* RFC 9218's PRIORITY_UPDATE, handled by nghttp2 itself (once
     * SETTINGS_NO_RFC7540_PRIORITIES = 1 is sent: submit_settings()) */
    nghttp2_option_set_builtin_recv_extension_type(opt, NGHTTP2_PRIORITY_UPDATE);
    /* a session rebuilt after a rest: the client's preface came long ago */
    if (rebuilt)
        nghttp2_option_set_no_recv_client_magic(opt, 1);
    h2_heap_mem(&c->heap, &c->mem); /* nghttp2 keeps a copy */
    if (nghttp2_session_server_new3(&s, cb, c, opt, &c->mem)) {
        s = NULL;
        h2_heap_release(&c->heap);
    }
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return s;
}

nghttp2_session *h2_session_new(struct h2_conn *c)
{
    return session_new(c, false);
}

nghttp2_session *h2_session_rebuild(struct h2_conn *c)
{
    return session_new(c, true);
}

/* Everything nghttp2 has to send, gathered in ctx->out and written. */
static bool send_all(struct h2_conn *c)
{
    struct conn_ctx *ctx = c->ctx;
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->s, &data);
        if (n < 0) {
            LOG_LIMITED(LOG_WARN, "http2: %s", nghttp2_strerror((int)n));
            return false;
        }
        if (n == 0) {
            if (!c->paused)
                break;
            c->paused = false; /* parts are full: they leave, and on */
            h2_flush(c);
            continue;
        }
        if (strbuf_append(&ctx->out, data, (size_t)n) < 0)
            return false;
        if (ctx->out.len + c->parts_bytes >= H2_OUT_FLUSH_AT || c->n_parts == H2_FILE_PARTS)
            h2_flush(c);
    }
    h2_flush(c);
    return true;
}

static void conn_free(void *arg)
{
    struct h2_conn *c = arg;
    /* the streams' sub-contexts went first (conn_cut, or h2_run's end) */
    while (c->streams)
        h2_stream_free(c->streams);
    if (c->s) {
        nghttp2_session_del(c->s);
        h2_heap_release(&c->heap);
    } else if (c->resting)
        http_metrics_end(conn_worker_state(c->ctx), HTTP_METRICS_H2_REST);
    struct http_conn *hc = conn_state(c->ctx);
    hc->h2 = NULL;
    if (!c->away) /* at rest without its context, it is still open */
        http_metrics_end(conn_worker_state(c->ctx), HTTP_METRICS_H2_CONN);
    h2_conn_release(c);
}

/* The connection's HTTP/2 state and its SETTINGS queued; NULL when that
 * failed (the connection closes). */
static struct h2_conn *h2_conn_new(struct conn_ctx *ctx)
{
    struct http_conn *hc = conn_state(ctx);
    struct http_worker *hw = conn_worker_state(ctx);
    const struct http_config *cfg = hw->cfg;
    hc->mid_request = false;
    struct h2_conn *c = h2_conn_alloc();
    if (!c)
        return NULL;
    c->ctx = ctx;
    c->cfg = cfg;
    c->use_sendfile = !conn_is_secure(ctx);
    c->kept.provoked_tokens = H2_PROVOKED_BURST;
    c->kept.provoked_ms = conn_now_ms(ctx);
    c->magic_left = H2_PREFACE_LEN;
    if (!(c->s = h2_session_new(c))) {
        h2_conn_release(c);
        return NULL;
    }
    hc->h2 = c;
    /* freed however the connection ends (its streams are ended first) */
    if (coro_defer(ctx->coro, conn_free, c) < 0)
        return NULL;
    http_metrics_begin(hw, HTTP_METRICS_H2_CONN);
    return c;
}

/* Our SETTINGS (the server's preface, as submit_settings() decided it),
 * and the connection's receive window. */
int h2_submit_local(struct h2_conn *c)
{
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->kept.local_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, c->kept.local_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->kept.local_head},
        /* RFC 8441: WebSockets over streams (extended CONNECT) */
        {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, N_ELEMENTS(iv) - !c->kept.rfc9218) ||
        nghttp2_session_set_local_window_size(c->s, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)c->kept.local_window))
        return -1;
    return 0;
}

/* Our SETTINGS (the server's preface). rfc9218: the client sent
 * SETTINGS_NO_RFC7540_PRIORITIES = 1, and ours say it too: nghttp2 (>=
 * 1.49) then schedules DATA by RFC 9218 priorities (the `priority` field,
 * PRIORITY_UPDATE frames: urgency first, then incremental round robin).
 * Otherwise RFC 7540's scheme stays, for clients that speak it: once the
 * setting is sent nghttp2 ignores PRIORITY frames and forgets closed
 * streams, so late frames on them (h2spec's checks) go unanswered. */
static int submit_settings(struct h2_conn *c, bool rfc9218)
{
    const struct http_config *cfg = c->cfg;
    c->kept.rfc9218 = rfc9218;
    c->kept.local_streams = cfg->h2_max_streams;
    c->kept.local_window = (uint32_t)cfg->h2_window;
    c->kept.local_head = (uint32_t)cfg->limits.max_head;
    return h2_submit_local(c);
}

/* What the client's connection preface, at p, says of RFC 9218: 1 when
 * its SETTINGS has NO_RFC7540_PRIORITIES = 1, 0 when not (or when it is
 * no preface and SETTINGS: nghttp2 judges that), -1 while incomplete. */
static int client_rfc9218(const uint8_t *p, size_t n)
{
    if (memcmp(p, H2_PREFACE, MIN(n, (size_t)H2_PREFACE_LEN)))
        return 0;
    if (n < H2_PREFACE_LEN + 9)
        return -1;
    const uint8_t *h = p + H2_PREFACE_LEN;
    size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    if (h[3] != NGHTTP2_SETTINGS || (h[4] & NGHTTP2_FLAG_ACK) || len > 16384 || len % 6)
        return 0;
    if (n < H2_PREFACE_LEN + 9 + len)
        return -1;
    int r = 0;
    for (size_t i = 0; i < len; i += 6) {
        const uint8_t *e = h + 9 + i;
        if ((e[0] << 8 | e[1]) == NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES)
            r = !e[2] && !e[3] && !e[4] && e[5] == 1;
    }
    return r;
}

static enum conn_verdict h2_loop(struct h2_conn *c);
static enum conn_verdict serve(struct h2_conn *c, const uint8_t *p, size_t n);

enum conn_verdict h2_run(struct conn_ctx *ctx)
{
    struct h2_conn *c = h2_conn_new(ctx);
    return c ? h2_loop(c) : CONN_CLOSE;
}

enum conn_verdict h2_resume(struct conn_ctx *ctx, void *state)
{
    struct http_conn *hc = conn_state(ctx);
    ssize_t got = conn_read(ctx, true);
    if (got == -EAGAIN && conn_rest_put(ctx, state))
        return CONN_KEEP; /* no bytes after all: at rest still */
    struct h2_conn *c = got > 0 ? h2_unpack(ctx, state) : NULL;
    if (!c) { /* the client's end, or out of memory */
        h2_drop(conn_worker_state(ctx), state);
        return CONN_CLOSE;
    }
    hc->h2 = c;
    hc->mid_request = false;
    if (coro_defer(ctx->coro, conn_free, c) < 0) {
        conn_free(c);
        return CONN_CLOSE;
    }
    if (!h2_wake(c)) {
        h2_goaway_raw(c);
        ctx->in_pos = ctx->in_len = 0; /* drained: see serve()'s end */
        return CONN_LINGER;
    }
    conn_progress(ctx);
    return serve(c, (const uint8_t *)ctx->in, (size_t)got);
}

/* The HTTP2-Settings field: base64url without padding (RFC 7540 3.2.1)
 * into out (room for len * 3 / 4 + 3): its length, or -1. */
static ssize_t settings_decode(struct view v, uint8_t *out, char *tmp)
{
    size_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        char ch = v.p[i];
        if (ch == '=' || ch == '+' || ch == '/')
            return -1; /* not base64url */
        tmp[n++] = ch == '-' ? '+' : ch == '_' ? '/' : ch;
    }
    while (n % 4)
        tmp[n++] = '=';
    return base64_decode(tmp, n, out);
}

/* The request's head fields, as stream 1's (the HTTP/1.1 ones that say
 * how to upgrade are dropped; names lowercased, as HTTP/2's are). */
static void upgrade_fields(struct h2_stream *st, const struct http_head *head)
{
    h2_stream_header(st, ":method", 7, head->method_str.p, head->method_str.len);
    h2_stream_header(st, ":path", 5, head->target.p, head->target.len);
    static const char *const drop[] = {"connection", "upgrade",          "http2-settings",
                                       "keep-alive", "proxy-connection", "transfer-encoding",
                                       "te"};
    const char *p = head->headers.p, *end = p + head->headers.len;
    char name[128];
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon && colon > p) {
            size_t nl = (size_t)(colon - p);
            const char *vs = colon + 1, *ve = le;
            while (vs < ve && (*vs == ' ' || *vs == '\t'))
                vs++;
            while (ve > vs && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (nl >= sizeof(name)) {
                st->bad = true;
            } else {
                bool keep = true;
                for (size_t i = 0; i < nl; i++)
                    name[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
                for (size_t i = 0; i < N_ELEMENTS(drop) && keep; i++)
                    keep = !(strlen(drop[i]) == nl && !memcmp(drop[i], name, nl));
                if (keep)
                    h2_stream_header(st, name, nl, vs, (size_t)(ve - vs));
            }
        }
        p = eol ? eol + 1 : end;
    }
}

enum conn_verdict h2_upgrade(struct conn_ctx *ctx, const struct http_head *head)
{
    struct view v;
    if (!http_header_find_sole(head->headers, "HTTP2-Settings", 14, &v) || v.len > 1024)
        return CONN_CLOSE; /* handle() checked it */
    uint8_t payload[1024];
    char tmp[1024 + 4];
    ssize_t plen = settings_decode(v, payload, tmp);
    if (plen < 0 || plen % 6) {
        /* no SETTINGS payload: the upgrade is refused (RFC 7540 3.2.1) */
        http_send_error(ctx, 400);
        return CONN_CLOSE;
    }
    struct h2_conn *c = h2_conn_new(ctx);
    if (!c)
        return CONN_CLOSE;
    if (nghttp2_session_upgrade2(c->s, payload, (size_t)plen, head->method == COLIBRI_HEAD, NULL)) {
        http_send_error(ctx, 400);
        return CONN_CLOSE;
    }
    struct h2_stream *st = stream_new(c->s, c, 1);
    if (!st)
        return CONN_CLOSE;
    c->kept.max_id = 1;
    upgrade_fields(st, head);
    st->head_done = st->no_body = st->req_end = true;
    h2_stream_ready(st);
    /* the 101 goes first, then the server's preface (SETTINGS) and stream
     * 1's answer; what the client sent after the head is its preface */
    static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\n"
                             "Connection: Upgrade\r\n"
                             "Upgrade: h2c\r\n\r\n";
    if (strbuf_append(&ctx->out, sw, sizeof(sw) - 1) < 0)
        return CONN_CLOSE;
    return h2_loop(c);
}

static enum conn_verdict h2_loop(struct h2_conn *c)
{
    struct conn_ctx *ctx = c->ctx;
    /* the client's preface and first SETTINGS decide ours: read until
     * they are in (after a 101, the client sends them once it has it) */
    int rfc9218;
    while ((rfc9218 = client_rfc9218((const uint8_t *)ctx->in + ctx->in_pos,
                                     ctx->in_len - ctx->in_pos)) < 0) {
        if (ctx->in_len == ctx->in_cap && ctx->in_pos)
            conn_compact(ctx);
        if (ctx->in_len == ctx->in_cap)
            break;
        conn_flush(ctx);
        if (conn_read(ctx, false) <= 0)
            return CONN_CLOSE;
    }
    if (submit_settings(c, rfc9218 == 1) < 0)
        return CONN_CLOSE;

    /* what came with the preface */
    size_t n = ctx->in_len - ctx->in_pos;
    const uint8_t *p = (const uint8_t *)ctx->in + ctx->in_pos;
    return serve(c, p, n);
}

/* The connection's loop, from input at p (n bytes). */
static enum conn_verdict serve(struct h2_conn *c, const uint8_t *p, size_t n)
{
    struct conn_ctx *ctx = c->ctx;
    for (;;) {
        if (n) {
            h2_track_frames(c, p, n);
            ssize_t r = nghttp2_session_mem_recv(c->s, p, n);
            if (r < 0) {
                /* a fatal error: nghttp2 queued its GOAWAY where it could */
                LOG_LIMITED(LOG_INFO, "http2: %s", nghttp2_strerror((int)r));
                send_all(c);
                break;
            }
            n = 0;
        }
        h2_run_streams(c);
        if (conn_stopping(ctx) && !c->goaway) {
            /* a stop: no new streams; those in flight finish (within
             * shutdown_timeout) and the connection closes after them */
            c->goaway = true;
            nghttp2_submit_goaway(
                c->s, NGHTTP2_FLAG_NONE,
                MAX(c->kept.floor_id, nghttp2_session_get_last_proc_stream_id(c->s)),
                NGHTTP2_NO_ERROR, NULL, 0);
        }
        if (!send_all(c))
            break;
        if (c->runnable) /* streams the writes let go on */
            continue;
        if (!nghttp2_session_want_read(c->s) && !nghttp2_session_want_write(c->s))
            break;
        ctx->in_pos = ctx->in_len = 0;
        /* idle: after H2_REST_MS (not between two requests), a rest */
        int wait_ms = -1;
        if (!c->n_running && !conn_stopping(ctx) && h2_idle(c)) {
            if (!c->quiet)
                wait_ms = c->idle_tried ? -1 : H2_REST_MS;
            else if (nghttp2_session_get_local_settings(c->s, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE))
                ; /* our table size 0 is not acknowledged yet */
            else if (h2_windows_kept(c)) {
                /* the runtime wakes a connection at rest on an edge of its
                 * socket: nothing may wait unread, in the socket or in
                 * TLS's buffers (which an empty read frees) */
                ssize_t got = conn_read(ctx, true);
                if (got > 0) {
                    conn_progress(ctx);
                    n = (size_t)got;
                    p = (const uint8_t *)ctx->in;
                    continue;
                }
                if (got != -EAGAIN)
                    break;
                h2_rest(c);
                if (h2_away(c))
                    return CONN_KEEP; /* the context goes back to the pool */
                conn_shed(ctx);
            } else
                c->quiet = false, c->idle_tried = true;
        }
        /* requests at work: their own waits bound the time; none (only
         * answers waiting for the client): the keep-alive timeout */
        ssize_t got;
        do /* at rest, only bytes (or the end) wake it */
            got = conn_read_or_sub_for(ctx, c->n_running > 0, wait_ms);
        while (!c->s && (got == -EINTR || got == -ETIMEDOUT));
        if (got == -ETIMEDOUT) {
            if (c->s && !c->n_running && h2_idle(c)) {
                c->quiet = h2_prepare_rest(c);
                c->idle_tried = !c->quiet;
            }
            n = 0;
            continue;
        }
        if (got == -EINTR) { /* a stream the worker resumed: see to it */
            c->runnable = true;
            n = 0;
            continue;
        }
        if (got <= 0)
            break;
        c->idle_tried = false;
        if (!c->s && !h2_wake(c)) {
            h2_goaway_raw(c);
            break;
        }
        conn_progress(ctx);
        n = (size_t)got;
        p = (const uint8_t *)ctx->in;
    }
    h2_end_streams(c);
    ctx->in_pos = ctx->in_len = 0;
    /* what the client still sends (a PING after its GOAWAY) is drained:
     * a close with unread bytes would reset what we sent last */
    return CONN_LINGER;
}
