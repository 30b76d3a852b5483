/* stream.c - an HTTP/2 stream as an exchange of the HTTP layer: its head
 * as a struct http_head, its request run by http_dispatch() in a
 * sub-context of the connection (rt/conn.h), the head of its answer as
 * HEADERS (struct http_framing) and its body bytes both ways as DATA (the
 * sub-context's I/O, struct conn_sub_ops). */
#include "http2/stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/itoa.h"
#include "base/log.h"
#include "http/metrics.h"
#include "http/access_log.h"
#include "http/request.h"

/* A request's answer waits while more than this is waiting for DATA frames. */
#define H2_TX_MAX (64 * 1024)

/* --- the head as it comes ------------------------------------------------ */

static bool name_is(const char *name, size_t nlen, const char *lit)
{
    return strlen(lit) == nlen && !memcmp(name, lit, nlen);
}

static void keep_pseudo(struct h2_stream *st, size_t *off, size_t *len, bool *has, const char *v,
                        size_t vlen)
{
    if (*has) {
        st->bad = true; /* repeated (nghttp2 refuses it already) */
        return;
    }
    *off = st->pseudo.len;
    *len = vlen;
    *has = true;
    if (strbuf_append(&st->pseudo, v, vlen) < 0)
        st->too_large = true;
}

void h2_stream_header(struct h2_stream *st, const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
    if (st->too_large)
        return;
    /* the head's limit, as HTTP/1.1's (advertised as
     * SETTINGS_MAX_HEADER_LIST_SIZE): beyond it, a 431 */
    if (st->lines.len + st->cookies.len + st->pseudo.len + nlen + vlen + 4 >
        h2_cfg(st->c)->limits.max_head) {
        st->too_large = true;
        return;
    }
    if (nlen && name[0] == ':') {
        if (name_is(name, nlen, ":method"))
            keep_pseudo(st, &st->method_off, &st->method_len, &st->has_method, value, vlen);
        else if (name_is(name, nlen, ":path"))
            keep_pseudo(st, &st->path_off, &st->path_len, &st->has_path, value, vlen);
        else if (name_is(name, nlen, ":authority"))
            keep_pseudo(st, &st->auth_off, &st->auth_len, &st->has_auth, value, vlen);
        else if (name_is(name, nlen, ":protocol")) {
            st->has_protocol = true; /* nghttp2 allows it on a CONNECT alone */
            st->protocol_ws = vlen == 9 && !strncasecmp(value, "websocket", 9);
        }
        return; /* :scheme (nghttp2 checked it) */
    }
    int r = 0;
    if (name_is(name, nlen, "cookie")) {
        /* RFC 9113 8.2.3: cookies may come split; one field again */
        if (st->cookies.len)
            r = strbuf_append(&st->cookies, "; ", 2);
        if (!r)
            r = strbuf_append(&st->cookies, value, vlen);
    } else {
        if (name_is(name, nlen, "content-length")) {
            int64_t v = 0;
            for (size_t i = 0; i < vlen && v >= 0; i++)
                v = value[i] >= '0' && value[i] <= '9' && v < INT64_MAX / 10
                        ? v * 10 + (value[i] - '0')
                        : -1;
            st->content_length = v;
        }
        /* what serve_files looks for (HTTP_F_FILE_FIELDS) */
        if ((nlen > 3 && !memcmp(name, "if-", 3)) || name_is(name, nlen, "range") ||
            name_is(name, nlen, "accept-encoding"))
            st->file_fields = true;
        r = strbuf_reserve(&st->lines, nlen + vlen + 4);
        if (!r) {
            char *p = st->lines.buf + st->lines.len;
            memcpy(p, name, nlen);
            memcpy(p + nlen, ": ", 2);
            memcpy(p + nlen + 2, value, vlen);
            memcpy(p + nlen + 2 + vlen, "\r\n", 3);
            st->lines.len += nlen + vlen + 4;
        }
    }
    if (r)
        st->too_large = true;
}

static enum colibri_method method_of(struct view m, bool *known)
{
    if (m.len == 3 && !memcmp(m.p, "GET", 3)) {
        *known = true;
        return COLIBRI_GET;
    }
    for (unsigned i = 0; i < COLIBRI_METHOD_COUNT; i++) {
        const char *name = colibri_method_name((enum colibri_method)i);
        if (name && strlen(name) == m.len && !memcmp(name, m.p, m.len)) {
            *known = true;
            return (enum colibri_method)i;
        }
    }
    *known = false;
    return COLIBRI_GET;
}

/* A WebSocket's extended CONNECT (RFC 8441) reads as a GET with this
 * field, as an HTTP/1.1 upgrade would. */
static const char WS_UPGRADE_LINE[] = "upgrade: websocket\r\n";

int h2_build_head(struct h2_stream *st, struct arena *ar, struct http_head *h)
{
    bool ws = st->has_protocol && st->protocol_ws;
    size_t total = st->lines.len + st->cookies.len + 12 + st->pseudo.len + 1 +
                   (ws ? sizeof(WS_UPGRADE_LINE) - 1 : 0);
    char *a = arena_alloc(ar, total);
    if (!a)
        return 500;
    char *ps = a;
    if (st->pseudo.len)
        memcpy(ps, st->pseudo.buf, st->pseudo.len);
    char *lines = ps + st->pseudo.len;
    char *p = lines;
    if (st->lines.len) {
        memcpy(p, st->lines.buf, st->lines.len);
        p += st->lines.len;
    }
    if (st->cookies.len) {
        memcpy(p, "cookie: ", 8);
        memcpy(p + 8, st->cookies.buf, st->cookies.len);
        p += 8 + st->cookies.len;
        memcpy(p, "\r\n", 2);
        p += 2;
    }
    if (ws) {
        memcpy(p, WS_UPGRADE_LINE, sizeof(WS_UPGRADE_LINE) - 1);
        p += sizeof(WS_UPGRADE_LINE) - 1;
    }
    *p = '\0';
    *h = (struct http_head){
        .method_str = {ps + st->method_off, st->method_len},
        .target = {ps + st->path_off, st->path_len},
        .headers = {lines, (size_t)(p - lines)},
        .content_length = st->content_length,
        .version_minor = 1,
        .flags = HTTP_F_H2 | (st->file_fields ? HTTP_F_FILE_FIELDS : 0),
    };
    if (!st->has_method)
        h->method_str = (struct view){"", 0};
    if (st->has_auth)
        h->host = (struct view){ps + st->auth_off, st->auth_len};
    else
        http_header_find(h->headers, "Host", 4, &h->host);
    if (st->too_large)
        return 431;
    if (st->bad || !st->has_method || !st->has_path)
        return 400;
    bool known;
    h->method = method_of(h->method_str, &known);
    if (st->has_protocol) { /* nghttp2 let it through on a CONNECT alone */
        if (!ws)
            return 501; /* a protocol other than WebSocket */
        h->method = COLIBRI_GET;
        h->flags |= HTTP_F_WS_CONNECT;
        known = true;
    }
    if (!known)
        return 501;
    struct view t = h->target;
    if (t.len > h2_cfg(st->c)->limits.max_target)
        return 414;
    if (t.len == 1 && t.p[0] == '*') {
        if (h->method != COLIBRI_OPTIONS)
            return 400;
        h->flags |= HTTP_F_ASTERISK;
        h->path = t;
        return 0;
    }
    if (!t.len || t.p[0] != '/')
        return 400;
    for (size_t i = 0; i < t.len; i++)
        if ((unsigned char)t.p[i] <= ' ' || t.p[i] == 0x7f || t.p[i] == '#')
            return 400;
    const char *q = memchr(t.p, '?', t.len);
    if (q) {
        h->flags |= HTTP_F_HAS_QUERY;
        h->path = (struct view){t.p, (size_t)(q - t.p)};
        h->query = (struct view){q + 1, (size_t)(t.p + t.len - q - 1)};
    } else {
        h->path = t;
    }
    return 0;
}

/* --- the answer's head: HEADERS --------------------------------------------- */

/* Hop-by-hop fields, which HTTP/2 forbids (RFC 9113 8.2.2); any case. */
static bool conn_specific(const char *p, size_t len)
{
    switch (len) {
    case 7:
        return !strncasecmp(p, "upgrade", 7);
    case 10:
        return !strncasecmp(p, "connection", 10) || !strncasecmp(p, "keep-alive", 10);
    case 16:
        return !strncasecmp(p, "proxy-connection", 16);
    case 17:
        return !strncasecmp(p, "transfer-encoding", 17);
    default:
        return false;
    }
}

/* The "Name: value\r\n" lines of v as header fields, into nv from *n;
 * connection-specific fields dropped. The names stay as written:
 * nghttp2_submit_response() copies each field and lowercases the copy's
 * name (the fields are not marked NO_COPY). */
static void add_lines(struct view v, nghttp2_nv *nv, size_t *n, size_t max)
{
    const char *p = v.p, *end = v.p + v.len;
    while (p < end && *n < max) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon && colon > p && !conn_specific(p, (size_t)(colon - p))) {
            const char *vs = colon + 1, *ve = le;
            while (vs < ve && (*vs == ' ' || *vs == '\t'))
                vs++;
            while (ve > vs && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            nv[(*n)++] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)vs, (size_t)(colon - p),
                                      (size_t)(ve - vs), NGHTTP2_NV_FLAG_NONE};
        }
        p = eol ? eol + 1 : end;
    }
}

static size_t count_lines(struct view v)
{
    size_t n = 1;
    if (!v.len)
        return n;
    for (const char *p = v.p, *end = v.p + v.len;
         p < end && (p = memchr(p, '\n', (size_t)(end - p))); p++)
        n++;
    return n;
}

static ssize_t data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user);

static struct h2_stream *stream_of_sub(const struct conn_ctx *sub)
{
    return sub->sub_arg;
}

static void fr_head(struct colibri_request *req, struct colibri_response *resp, int status,
                    int64_t content_length, const char *mime)
{
    struct h2_stream *st = stream_of_sub(req->ctx);
    struct http_conn *hc = req->hc;
    struct arena *ar = &hc->arena;
    if (st->submitted || st->closed)
        return;
    struct view lines = resp ? resp->lines : (struct view){0};
    struct view hdrs = {hc->hdrs.buf, hc->hdrs.len};
    struct view server = {req->cfg->server_hdr, req->cfg->server_hdr_len};
    size_t max = 4 + count_lines(lines) + count_lines(hdrs) + count_lines(server);
    nghttp2_nv *nv = arena_alloc(ar, max * sizeof(*nv));
    char *num = arena_alloc(ar, 4 + U64_STR_MAX + 1);
    if (!nv || !num)
        coro_abort(req->ctx->coro);
    size_t n = 0;
    if (status < 100 || status > 999)
        status = 500;
    num[0] = (char)('0' + status / 100);
    num[1] = (char)('0' + status / 10 % 10);
    num[2] = (char)('0' + status % 10);
    nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)num, 7, 3, NGHTTP2_NV_FLAG_NONE};
    const char *date = http_date_header(req->hw, conn_wall_time(req->ctx));
    nv[n++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date + 6, 4, HTTP_DATE_HDR_LEN - 8,
                           NGHTTP2_NV_FLAG_NONE};
    add_lines(server, nv, &n, max);
    if (mime)
        nv[n++] = (nghttp2_nv){(uint8_t *)"content-type", (uint8_t *)mime, 12, strlen(mime),
                               NGHTTP2_NV_FLAG_NONE};
    if (content_length >= 0 && status != 304 && status != 204 && status >= 200) {
        char *cl = num + 4;
        size_t len = u64_to_str((uint64_t)content_length, cl);
        nv[n++] =
            (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)cl, 14, len, NGHTTP2_NV_FLAG_NONE};
    }
    add_lines(lines, nv, &n, max);
    add_lines(hdrs, nv, &n, max);
    st->hold_end = !st->req_end && status < 400;
    st->has_body = !(resp && resp->head_only) && status >= 200 && status != 204 && status != 304 &&
                   content_length != 0;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read};
    st->body_left = st->has_body ? content_length : -1;
    st->submitted = true;
    if (!st->has_body)
        st->eof = true;
    nghttp2_submit_response(st->c->s, st->id, nv, n, st->has_body || st->hold_end ? &prd : NULL);
    h2_stream_ready(st); /* for the connection to send it */
    st->ready = false;
}

static const struct http_framing h2_framing = {.head = fr_head};

/* --- the bodies: DATA ----------------------------------------------------- */

static size_t tx_pending(const struct h2_stream *st)
{
    return st->tx.len - st->tx_off;
}

/* Frames are sized here and their bytes taken by h2_send_data(): none is
 * copied into nghttp2's buffer (NGHTTP2_DATA_FLAG_NO_COPY). */
static ssize_t data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)id, (void)buf, (void)user;
    struct h2_stream *st = src->ptr;
    size_t n = 0, tx = tx_pending(st), file = st->file_left;
    if (unlikely(st->c->send_debt) && (tx || file)) {
        /* the session's window is send_debt above the client's */
        int32_t w = nghttp2_session_get_remote_window_size(s) - (int32_t)st->c->send_debt;
        if (w <= 0) {
            st->deferred = st->debt_wait = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        length = MIN(length, (size_t)w);
    }
    if (tx) {
        n = MIN(length, tx);
        tx -= n;
    } else if (file) {
        n = MIN(length, file);
        file -= n;
    }
    if (n)
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->body_left >= 0)
        st->body_left -= (int64_t)MIN((uint64_t)n, (uint64_t)st->body_left);
    if (!tx && !file) {
        if ((st->eof || !st->body_left) && !st->hold_end) {
            st->body_done = true;
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return (ssize_t)n;
        }
        if (!n) {
            st->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    return (ssize_t)n;
}

/* Reads len bytes of fd at off to the end of out; false if the file
 * shrank or failed (its length was promised). */
static bool read_into(struct strbuf *out, int fd, off_t off, size_t len)
{
    if (strbuf_reserve(out, len + 1) < 0)
        return false;
    while (len) {
        ssize_t r = pread(fd, out->buf + out->len, len, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        out->len += (size_t)r;
        off += r;
        len -= (size_t)r;
    }
    out->buf[out->len] = '\0';
    return true;
}

/* Smaller file frames are read into ctx->out: one pread() against two
 * calls (the header with MSG_MORE, then sendfile()). */
#define H2_SENDFILE_MIN 8192

int h2_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *hd, size_t len,
                 nghttp2_data_source *src, void *user)
{
    (void)s;
    struct h2_conn *c = user;
    struct h2_stream *st = src->ptr;
    struct strbuf *out = &c->ctx->out;
    if (f->data.padlen) /* never asked for (no select_padding_callback) */
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (strbuf_append(out, hd, 9) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (tx_pending(st)) {
        if (strbuf_append(out, st->tx.buf + st->tx_off, len) < 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        st->tx_off += len;
        if (st->tx_off == st->tx.len) {
            strbuf_reset(&st->tx);
            st->tx_off = 0;
        }
    } else if (len) {
        if (c->use_sendfile && len >= H2_SENDFILE_MIN) {
            c->parts[c->n_parts++] = (struct h2_file_part){
                .at = out->len, .fd = st->file_fd, .off = st->file_off, .len = len};
            c->parts_bytes += len;
        } else if (!read_into(out, st->file_fd, st->file_off, len)) {
            return NGHTTP2_ERR_CALLBACK_FAILURE; /* the file shrank: the length was promised */
        }
        st->file_off += (off_t)len;
        st->file_left -= len;
    }
    /* what the handler handed over and nghttp2 has not taken yet: if the
     * connection dies now, the access log counts the rest as sent */
    if (st->sub)
        st->sub->unsent = tx_pending(st) + st->file_left;
    if (st->want_tx && tx_pending(st) <= H2_TX_MAX / 2 && !st->file_left)
        h2_stream_ready(st);
    /* mem_send() goes on with the next frame without returning: it
     * returns now, for the parts to leave (send_all() flushes) */
    if (c->n_parts == H2_FILE_PARTS || out->len + c->parts_bytes >= H2_OUT_FLUSH_AT) {
        c->paused = true;
        return NGHTTP2_ERR_PAUSE;
    }
    return 0;
}

void h2_flush(struct h2_conn *c)
{
    struct conn_ctx *ctx = c->ctx;
    if (!c->n_parts) {
        conn_flush(ctx);
        return;
    }
    size_t at = 0;
    for (unsigned i = 0; i < c->n_parts; i++) {
        const struct h2_file_part *p = &c->parts[i];
        if (p->at > at)
            conn_write_more(ctx, ctx->out.buf + at, p->at - at);
        at = p->at;
        conn_sendfile(ctx, p->fd, p->off, p->len);
    }
    if (ctx->out.len > at)
        conn_write(ctx, ctx->out.buf + at, ctx->out.len - at);
    strbuf_reset(&ctx->out);
    c->n_parts = 0;
    c->parts_bytes = 0;
}

/* New bytes for DATA frames (or the end): a deferred stream goes on. */
static void tx_more(struct h2_stream *st)
{
    if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(st->c->s, st->id);
    }
}

/* Inside the request: waits until the connection resumes it; a stream
 * that closed meanwhile (reset by the client, the connection going)
 * unwinds the request, as a connection that dies does. */
static void wait_conn(struct conn_ctx *sub, struct h2_stream *st)
{
    if (!st->closed) {
        /* the client has request_timeout to send what it waits for (or
         * to open the window for it): it stalls no longer */
        const struct http_config *cfg = h2_cfg(st->c);
        st->in_wait = true;
        int r;
        /* not while the connection writes file parts: their files stay open */
        do
            r = conn_wait_fd(sub, -1, 0, (int)cfg->request_timeout_s * 1000);
        while (r == 0 && !st->closed && st->c->n_parts);
        st->in_wait = false;
        if (r == -ECANCELED) /* a stop: the stream may finish meanwhile */
            conn_sub_wait(sub);
        else if (r == 0 && !st->closed) {
            LOG_LIMITED(LOG_INFO, "http2: stream %d stalled for %us (request_timeout)", st->id,
                        (unsigned)cfg->request_timeout_s);
            st->stalled = true;
        }
    }
    /* closed once its whole body left (END_STREAM with it): no reset */
    if ((st->closed && !st->body_done) || st->stalled) { /* what never left: for the access log */
        sub->unsent = tx_pending(st) + st->file_left;
        coro_abort(sub->coro);
    }
}

static void sub_writev(struct conn_ctx *sub, const struct iovec *iov, int iovcnt)
{
    struct h2_stream *st = stream_of_sub(sub);
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (st->closed) {
        sub->unsent = total;
        coro_abort(sub->coro);
    }
    if (!st->has_body || st->eof)
        return; /* no body goes with this answer (HEAD) */
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len && strbuf_append(&st->tx, iov[i].iov_base, iov[i].iov_len) < 0)
            coro_abort(sub->coro);
    sub->unsent = tx_pending(st) + st->file_left;
    tx_more(st);
    while (tx_pending(st) > H2_TX_MAX) {
        st->want_tx = true;
        wait_conn(sub, st);
        st->want_tx = false;
    }
}

static void sub_sendfile(struct conn_ctx *sub, int fd, off_t offset, size_t len)
{
    struct h2_stream *st = stream_of_sub(sub);
    if (st->closed) {
        sub->unsent = len;
        coro_abort(sub->coro);
    }
    if (!st->has_body || st->eof)
        return;
    st->file_fd = fd;
    st->file_off = offset;
    st->file_left = len;
    sub->unsent = tx_pending(st) + st->file_left;
    tx_more(st);
    /* the caller may close fd once this returns */
    while (st->file_left || tx_pending(st)) {
        st->want_tx = true;
        wait_conn(sub, st);
        st->want_tx = false;
    }
}

static ssize_t sub_read(struct conn_ctx *sub)
{
    struct h2_stream *st = stream_of_sub(sub);
    while (st->rx.len == st->rx_off) {
        if (st->req_end)
            return 0;
        st->want_rx = true;
        wait_conn(sub, st);
        st->want_rx = false;
    }
    size_t n = MIN(st->rx.len - st->rx_off, sub->in_cap - sub->in_len);
    memcpy(sub->in + sub->in_len, st->rx.buf + st->rx_off, n);
    sub->in_len += n;
    st->rx_off += n;
    if (st->rx_off == st->rx.len) {
        strbuf_reset(&st->rx);
        st->rx_off = 0;
    }
    /* read: the client may send as much again */
    nghttp2_session_consume(st->c->s, st->id, n);
    return (ssize_t)n;
}

/* conn_wait_fd(sub, CONN_FD_SELF): a WebSocket between messages waits
 * for the stream's input with no time limit of the stream's own (its
 * own idle timeout, a channel's wake, a stop end it as on HTTP/1.1). */
static int sub_wait_input(struct conn_ctx *sub, int timeout_ms)
{
    struct h2_stream *st = stream_of_sub(sub);
    if (st->rx.len > st->rx_off || st->req_end || st->closed)
        return CONN_WAIT_READ;
    st->want_rx = st->in_wait = st->wait_input = true;
    int r = conn_wait_fd(sub, -1, 0, timeout_ms);
    st->want_rx = st->in_wait = st->wait_input = false;
    return r == 0 ? -ETIMEDOUT : r;
}

static const struct conn_sub_ops h2_sub_ops = {
    .read = sub_read,
    .writev = sub_writev,
    .sendfile = sub_sendfile,
    .wait_input = sub_wait_input,
};

/* --- a stream's request --------------------------------------------------- */

static void stream_main(struct conn_ctx *sub, void *arg)
{
    struct h2_stream *st = arg;
    struct http_conn *hc = conn_state(sub);
    struct http_worker *hw = conn_worker_state(sub);
    /* closing: the HTTP/1.1 head writer's fast path declines, and sends
     * the head to the framing */
    hc->closing = true;
    hc->lingering = hc->mid_request = false;
    /* a pooled context: its http_local_addr() cache may be another
     * connection's */
    hc->local_known = false;
    strbuf_reset(&hc->body);
    strbuf_reset(&hc->hdrs);
    strbuf_reset(&hc->reqbody);
    struct http_head head;
    int status = h2_build_head(st, &hc->arena, &head);
    struct colibri_request req = {
        .ctx = sub,
        .hc = hc,
        .hw = hw,
        .cfg = hw->cfg,
        .head = &head,
        .head_at = "",
        .head_pinned = true,
        .max_body = hw->cfg->max_body,
        .log = hw->cfg->site_log,
        .t0_ns = conn_worker_of(sub)->mono_ns,
        .fr = &h2_framing,
    };
    struct colibri_response resp = {.req = &req, .mime = "text/plain"};
    hc->resp = &resp; /* for abandon() */
    if (!st->no_body) {
        hc->bs = (struct http_body_state){0};
        if (head.content_length >= 0) {
            req.body_kind = BODY_LENGTH;
            req.body_left = (uint64_t)head.content_length;
        } else {
            req.body_kind = BODY_TO_END;
        }
    }
    if (!status) {
        unsigned mark = coro_defer_mark(sub->coro);
        status = http_dispatch(&req, &resp);
        coro_defer_run_to(sub->coro, mark);
    }
    if (!resp.streaming && !resp.sent)
        http_write_response(&req, &resp, status);
    else if (!st->submitted) /* a stream that sent nothing at all */
        fr_head(&req, &resp, resp.final_status ? resp.final_status : 200, -1, resp.mime);
    conn_flush(sub);
    st->eof = true;
    st->handler_done = true;
    if (head.flags & HTTP_F_WS_CONNECT)
        st->hold_end = false; /* a tunnel: the answer ends with the WebSocket */
    tx_more(st);
    if (unlikely(resp.final_status >= 500))
        LOG_LIMITED(LOG_WARN, "\"%.*s %.*s\" (HTTP/2): answered %d", (int)head.method_str.len,
                    head.method_str.p, (int)MIN(head.target.len, 200), head.target.p,
                    resp.final_status);
    if (req.log)
        http_access_log(&req, &resp);
    if (atomic_load_explicit(&http_metrics_on, memory_order_relaxed))
        http_metrics_count(&req, &resp);
    hc->resp = NULL;
    /* what came for the body and was not read: its window opens again */
    if (st->rx.len > st->rx_off)
        nghttp2_session_consume(st->c->s, st->id, st->rx.len - st->rx_off);
    strbuf_free(&st->rx);
    st->rx_off = 0;
    arena_reset(&hc->arena);
}

/* --- the connection's side ------------------------------------------------ */

void h2_stream_ready(struct h2_stream *st)
{
    st->ready = true;
    st->c->runnable = true;
}

void h2_stream_free(struct h2_stream *st)
{
    struct h2_conn *c = st->c;
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    c->n_streams--;
    http_metrics_end(conn_worker_state(c->ctx), HTTP_METRICS_H2_STREAM);
    if (!st->closed)
        nghttp2_session_set_stream_user_data(c->s, st->id, NULL);
    h2_stream_release(st);
}

static void start(struct h2_conn *c, struct h2_stream *st)
{
    st->started = true;
    st->sub = conn_sub_new(c->ctx, &h2_sub_ops, stream_main, st);
    if (!st->sub) {
        nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    st->ready = true;
    c->n_running++;
}

void h2_run_streams(struct h2_conn *c)
{
    for (unsigned pass = 0; c->runnable && pass < 8; pass++) {
        c->runnable = false;
        struct h2_stream *next;
        for (struct h2_stream *st = c->streams; st; st = next) {
            next = st->next;
            if (!st->started && st->head_done && !st->closed)
                start(c, st);
            if (st->sub && st->ready && !conn_sub_done(st->sub)) {
                st->ready = false;
                uint8_t w = st->sub->waiting;
                if (st->in_wait) /* in wait_conn(): the worker resumes it */
                    conn_wake(st->sub, st->wait_input ? CONN_WAIT_READ : CONN_WOKEN);
                else if (w == CONN_WAIT_TIMER || w == CONN_WAIT_FD) {
                    if (st->closed) { /* reset while its handler waits: it ends now */
                        if (!st->sub->unsent)
                            st->sub->unsent = tx_pending(st) + st->file_left;
                        conn_sub_end(st->sub, CONN_CUT_PEER);
                        st->sub = NULL;
                        c->n_running--;
                    }
                } else {
                    conn_sub_resume(st->sub);
                }
            }
            if (st->sub && conn_sub_done(st->sub)) {
                /* unwound (stalled, out of memory): the client learns it */
                if (!st->handler_done && !st->closed)
                    nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id,
                                              st->stalled ? NGHTTP2_CANCEL
                                                          : NGHTTP2_INTERNAL_ERROR);
                conn_sub_end(st->sub, CONN_CUT_PEER);
                st->sub = NULL;
                st->handler_done = true;
                c->n_running--;
            }
            if (!st->sub && st->closed)
                h2_stream_free(st);
        }
    }
}

void h2_end_streams(struct h2_conn *c)
{
    for (struct h2_stream *st = c->streams; st; st = st->next) {
        st->closed = true;
        if (st->sub) {
            /* cut mid-answer with the connection: what never left, for
             * the access log (as wait_conn() says it for a reset) */
            if (!st->sub->unsent)
                st->sub->unsent = tx_pending(st) + st->file_left;
            conn_sub_end(st->sub, CONN_CUT_PEER);
            st->sub = NULL;
            c->n_running--;
        }
    }
}
