/* conn_http.c - the life of an HTTP connection, as one coroutine:
 * read, parse, route, call the handler, answer; again while the client
 * keeps the connection alive and has bytes for us. When the buffer runs
 * dry the coroutine ends, so an idle connection holds no stack. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "base/itoa.h"
#include "http/chunked.h"
#include "http/date.h"
#include "http/fields.h"
#include "http/server.h"

/* Bodies larger than this leave with writev straight from the handler's
 * buffer instead of being copied behind the header. */
#define COPY_BODY_MAX (16 * 1024)
/* Pipelined responses are sent once this much is waiting. */
#define OUT_FLUSH_AT (64 * 1024)
/* At most this much of an unread request is drained before closing. */
#define LINGER_MAX (256 * 1024)

enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };

struct colibri_request {
    struct conn_ctx *ctx;
    struct colibri_server *srv;
    const struct http_head *head;
    struct view path; /* decoded and normalised, NUL-terminated, in the arena */
    uint64_t body_left;
    struct http_chunked chunked;
    uint8_t body_kind;
    bool body_done;     /* the body has been read (and kept, or dropped) */
    bool continue_sent; /* "100 Continue" went out */
};

struct colibri_response {
    struct colibri_request *req;
    const char *mime;
    int status; /* for streaming; a handler's return value otherwise */
    bool head_only;
    bool streaming;
    bool chunked;
    bool sent; /* the response went out already (sendfile) */
};

/* --- paths ------------------------------------------------------------------ */

/* Removes "." and ".." segments and merges repeated slashes, in place;
 * returns the new length, or -1 if ".." climbs above the root. */
static ssize_t normalize_path(char *p, size_t len)
{
    size_t out = 0, i = 0;
    while (i < len) {
        size_t j = i + 1;
        while (j < len && p[j] != '/')
            j++;
        const char *seg = p + i + 1;
        size_t sl = j - i - 1;
        bool last = j >= len;
        if (sl == 0 && !last) {
            i = j;
            continue;
        }
        if (sl == 1 && seg[0] == '.') {
            if (last)
                p[out++] = '/';
            i = j;
            continue;
        }
        if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            if (out == 0)
                return -1;
            while (out > 0 && p[--out] != '/')
                ;
            if (last)
                p[out++] = '/';
            i = j;
            continue;
        }
        memmove(p + out, p + i, sl + 1);
        out += sl + 1;
        i = j;
    }
    if (out == 0)
        p[out++] = '/';
    return (ssize_t)out;
}

/* Only '%' escapes, "." segments and repeated slashes need work. */
static bool path_is_plain(struct view v)
{
    for (size_t i = 0; i < v.len; i++) {
        char c = v.p[i];
        if (c == '%' || (c == '/' && i + 1 < v.len && (v.p[i + 1] == '/' || v.p[i + 1] == '.')))
            return false;
    }
    return v.len && v.p[0] == '/';
}

static int decode_path(struct colibri_request *req)
{
    struct view raw = req->head->path;
    char *p = arena_alloc(&req->ctx->arena, raw.len + 1);
    if (!p)
        return 500;
    if (path_is_plain(raw)) {
        memcpy(p, raw.p, raw.len);
        p[raw.len] = '\0';
        req->path = (struct view){.p = p, .len = raw.len};
        return 0;
    }
    ssize_t n = http_percent_decode(p, raw.p, raw.len, false);
    if (n < 0 || n == 0 || p[0] != '/')
        return 400;
    n = normalize_path(p, (size_t)n);
    if (n < 0)
        return 400;
    p[n] = '\0';
    req->path = (struct view){.p = p, .len = (size_t)n};
    return 0;
}

/* --- request body ------------------------------------------------------------ */

static void compact(struct conn_ctx *ctx)
{
    size_t avail = ctx->in_len - ctx->in_pos;
    if (ctx->in_pos) {
        memmove(ctx->in, ctx->in + ctx->in_pos, avail);
        ctx->in_pos = 0;
        ctx->in_len = avail;
    }
}

/* Reads the rest of the body, keeping it in ctx->reqbody or dropping it.
 * Returns 0, or the status to give up with (the connection then closes). */
static int body_pump(struct colibri_request *req, bool keep)
{
    struct conn_ctx *ctx = req->ctx;
    uint64_t max = req->srv->max_body;

    if (req->body_done)
        return 0;
    if (req->body_kind == BODY_NONE) {
        req->body_done = true;
        return 0;
    }
    if (req->body_kind == BODY_LENGTH && req->body_left > max)
        goto out_too_large;
    if ((req->head->flags & HTTP_F_EXPECT_CONTINUE) && !req->continue_sent &&
        ctx->in_len == ctx->in_pos) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        conn_flush(ctx);
        conn_write(ctx, cont, sizeof(cont) - 1);
        req->continue_sent = true;
    }
    for (;;) {
        size_t avail = ctx->in_len - ctx->in_pos;
        char *p = ctx->in + ctx->in_pos;
        if (req->body_kind == BODY_LENGTH) {
            size_t take = (size_t)MIN((uint64_t)avail, req->body_left);
            if (keep && strbuf_append(&ctx->reqbody, p, take) < 0)
                goto out_close;
            ctx->in_pos += take;
            req->body_left -= take;
            if (!req->body_left)
                break;
        } else {
            size_t payload;
            ssize_t used = http_chunked_decode(&req->chunked, p, avail, &payload);
            if (used < 0)
                goto out_bad;
            if (keep) {
                if (ctx->reqbody.len + payload > max)
                    goto out_too_large;
                if (strbuf_append(&ctx->reqbody, p, payload) < 0)
                    goto out_close;
            } else {
                req->body_left += payload; /* counts what was dropped */
                if (req->body_left > max)
                    goto out_too_large;
            }
            ctx->in_pos += (size_t)used;
            if (req->chunked.done)
                break;
        }
        compact(ctx);
        if (ctx->in_len == ctx->in_cap)
            goto out_bad; /* a chunk line longer than the whole buffer */
        if (conn_read(ctx, false) == 0)
            goto out_bad; /* the client went away mid-body */
        /* a body that keeps arriving is not a stalled request: the request
         * timeout counts between reads of it, as nginx's body timeout does */
        ctx->new_deadline = true;
    }
    req->body_done = true;
    return 0;

out_too_large:
    ctx->closing = ctx->lingering = true;
    return 413;
out_bad:
    ctx->closing = ctx->lingering = true;
    return 400;
out_close:
    ctx->closing = ctx->lingering = true;
    return 500;
}

/* A body the handler did not read still has to be consumed so the next
 * request is framed right; if that is not possible, the connection closes. */
static void skip_body(struct colibri_request *req)
{
    if (req->body_done || req->body_kind == BODY_NONE || req->ctx->closing)
        return;
    if ((req->head->flags & HTTP_F_EXPECT_CONTINUE) && !req->continue_sent) {
        /* the client may or may not send it now: we cannot tell */
        req->ctx->closing = true;
        return;
    }
    body_pump(req, false);
}

/* --- responses ------------------------------------------------------------------ */

static void append_view(struct strbuf *sb, struct view v)
{
    strbuf_append(sb, v.p, v.len);
}

/* The head of a response, into ctx->out. content_length < 0: none. */
#define DATE_HDR_LEN (6 + HTTP_DATE_LEN + 2)

/* "Date: ...\r\n" for the worker's current second, formatted at most once
 * per second per thread. */
static const char *date_header(struct worker *w)
{
    if (unlikely(w->date_time != w->wall_time)) {
        memcpy(w->date_hdr, "Date: ", 6);
        http_date_format(w->wall_time, w->date_hdr + 6);
        memcpy(w->date_hdr + 6 + HTTP_DATE_LEN, "\r\n", 2);
        w->date_time = w->wall_time;
    }
    return w->date_hdr;
}

static inline char *put(char *p, const void *src, size_t len)
{
    memcpy(p, src, len);
    return p + len;
}
#define PUT_LIT(p, s) put(p, s, sizeof(s) - 1)

/* The head of a response, into ctx->out: one reservation, then plain
 * copies. content_length < 0: none. */
static void write_head(struct colibri_request *req, struct colibri_response *resp, int status,
                       int64_t content_length, const char *mime)
{
    struct conn_ctx *ctx = req->ctx;
    struct strbuf *out = &ctx->out;
    struct worker *w = ctx->worker;
    const struct colibri_server *srv = req->srv;
    struct view line = http_status_line(status);
    size_t mime_len = mime ? strlen(mime) : 0;

    /* stop_requested, not stopping: a request can finish in the same
     * epoll batch as the wake-up that will begin the stop */
    if (w->stop_requested)
        ctx->closing = true;
    size_t max = line.len + DATE_HDR_LEN + srv->server_hdr_len + 14 + mime_len + 2 + 16 +
                 U64_STR_MAX + 2 + 28 + 24 + ctx->hdrs.len + 2;
    if (strbuf_reserve(out, max) < 0)
        coro_abort(ctx->coro);
    char *p = out->buf + out->len;
    p = put(p, line.p, line.len);
    p = put(p, date_header(w), DATE_HDR_LEN);
    p = put(p, srv->server_hdr, srv->server_hdr_len);
    if (mime) {
        p = PUT_LIT(p, "Content-Type: ");
        p = put(p, mime, mime_len);
        p = PUT_LIT(p, "\r\n");
    }
    if (content_length >= 0) {
        p = PUT_LIT(p, "Content-Length: ");
        p += u64_to_str((uint64_t)content_length, p);
        p = PUT_LIT(p, "\r\n");
    } else if (resp && resp->chunked) {
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    if (ctx->closing)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (req->head && req->head->version_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    if (ctx->hdrs.len)
        p = put(p, ctx->hdrs.buf, ctx->hdrs.len);
    p = PUT_LIT(p, "\r\n");
    out->len = (size_t)(p - out->buf);
    *p = '\0';
}

const struct tpl_desc http_error_desc =
    TPL_DESC(struct http_error_data, TPL_FIELD(struct http_error_data, status),
             TPL_FIELD(struct http_error_data, reason), TPL_FIELD(struct http_error_data, method),
             TPL_FIELD(struct http_error_data, path));

/* The configured error template, rendered into ctx->body, or the built-in
 * page when there is none or it fails. */
static struct view error_page(struct colibri_request *req, int status)
{
    const struct colibri_server *srv = req->srv;
    struct conn_ctx *ctx = req->ctx;
    if (!srv->error_tpl)
        return http_error_page(status);
    struct http_error_data d = {
        .status = status,
        .reason = http_status_reason(status).p,
        .method = req->head->method_str,
        .path = req->path,
    };
    strbuf_reset(&ctx->body);
    if (tpl_render(srv->error_tpl, &d, &ctx->body, srv->scratch[ctx->worker->idx], NULL, 0) < 0 ||
        !ctx->body.len) {
        strbuf_reset(&ctx->body);
        return http_error_page(status);
    }
    return (struct view){.p = ctx->body.buf, .len = ctx->body.len};
}

/* Sends what waits in ctx->out followed by len bytes at p, in one writev. */
static void send_out_and(struct conn_ctx *ctx, const void *p, size_t len)
{
    struct iovec iov[2] = {
        {.iov_base = ctx->out.buf, .iov_len = ctx->out.len},
        {.iov_base = (void *)p, .iov_len = len},
    };
    conn_writev(ctx, iov, 2);
    strbuf_reset(&ctx->out);
}

static void write_response(struct colibri_request *req, struct colibri_response *resp, int status)
{
    struct conn_ctx *ctx = req->ctx;
    struct strbuf *body = &ctx->body;
    const char *mime = resp->mime;
    struct view page = {0};

    if (status < 100 || status > 599)
        status = 500;
    if (status >= 400 && !body->len) {
        page = error_page(req, status);
        mime = "text/html; charset=utf-8";
    }
    const char *data = page.p ? page.p : body->buf;
    size_t len = page.p ? page.len : body->len;
    if (status < 200 || status == 204 || status == 304) {
        write_head(req, resp, status, -1, NULL);
        return;
    }
    write_head(req, resp, status, (int64_t)len, mime);
    if (resp->head_only || !len)
        return;
    if (len <= COPY_BODY_MAX) {
        strbuf_append(&ctx->out, data, len);
        return;
    }
    send_out_and(ctx, data, len);
}

/* An error before (or instead of) a request: answer and close. */
static void send_error(struct conn_ctx *ctx, struct colibri_server *srv, int status)
{
    struct http_head none = {.version_minor = 1};
    struct colibri_request req = {.ctx = ctx, .srv = srv, .head = &none};
    struct colibri_response resp = {.req = &req};
    ctx->closing = ctx->lingering = true;
    strbuf_reset(&ctx->body);
    strbuf_reset(&ctx->hdrs);
    write_response(&req, &resp, status);
}

static void start_stream(struct colibri_response *resp)
{
    struct colibri_request *req = resp->req;
    resp->streaming = true;
    if (req->head->version_minor >= 1)
        resp->chunked = true;
    else
        req->ctx->closing = true; /* HTTP/1.0: the end of the body is the close */
    write_head(req, resp, resp->status ? resp->status : 200, -1, resp->mime);
}

/* --- dispatch --------------------------------------------------------------- */

static void allow_header(struct conn_ctx *ctx, unsigned methods)
{
    struct strbuf *h = &ctx->hdrs;
    strbuf_append(h, "Allow: ", 7);
    bool first = true;
    for (unsigned m = 0; m < HTTP_METHOD_COUNT; m++) {
        if (!(methods & HTTP_METHOD_BIT(m)))
            continue;
        if (!first)
            strbuf_append(h, ", ", 2);
        append_view(h, http_method_name((enum http_method)m));
        first = false;
    }
    strbuf_append(h, "\r\n", 2);
}

static int dispatch(struct colibri_request *req, struct colibri_response *resp)
{
    const struct http_head *head = req->head;
    struct conn_ctx *ctx = req->ctx;

    if (head->flags & HTTP_F_ASTERISK) { /* OPTIONS * */
        allow_header(ctx, (1u << HTTP_METHOD_COUNT) - 1);
        return 204;
    }
    int r = decode_path(req);
    if (r) {
        ctx->closing = true; /* a malformed request: never guess at the rest */
        return r;
    }
    const struct route *route = trie_lookup(req->srv->routes, req->path.p, req->path.len, NULL);
    if (!route)
        return 404;
    unsigned allowed = route->handler->methods ? route->handler->methods : COLIBRI_M(COLIBRI_GET);
    if (allowed & COLIBRI_M(COLIBRI_GET))
        allowed |= COLIBRI_M(COLIBRI_HEAD);
    if (!(allowed & HTTP_METHOD_BIT(head->method))) {
        allow_header(ctx, allowed | COLIBRI_M(COLIBRI_OPTIONS));
        return head->method == HTTP_OPTIONS ? 204 : 405;
    }
    resp->head_only = head->method == HTTP_HEAD;
    return route->handler->fn(req, resp, route->data);
}

static void rebase(struct view *v, const char *from, size_t len, const char *to)
{
    if (v->p >= from && v->p < from + len)
        v->p = to + (v->p - from);
}

/* Reading a body moves bytes around in the input buffer, under the views
 * of the head: a request with a body gets its head copied to the arena. */
static int pin_head(struct conn_ctx *ctx, struct http_head *head, size_t head_len)
{
    const char *from = ctx->in + ctx->in_pos;
    char *to = arena_alloc(&ctx->arena, head_len);
    if (!to)
        return -ENOMEM;
    memcpy(to, from, head_len);
    struct view *views[] = {&head->method_str, &head->target, &head->path,
                            &head->query,      &head->host,   &head->headers};
    for (size_t i = 0; i < N_ELEMENTS(views); i++)
        rebase(views[i], from, head_len, to);
    return 0;
}

/* One request, head already parsed. Returns false when the connection
 * must close. */
static bool handle(struct conn_ctx *ctx, struct colibri_server *srv, struct http_head *head,
                   size_t head_len)
{
    struct colibri_request req = {.ctx = ctx, .srv = srv, .head = head};
    struct colibri_response resp = {.req = &req, .mime = "text/plain"};

    arena_reset(&ctx->arena);
    strbuf_reset(&ctx->body);
    strbuf_reset(&ctx->hdrs);
    strbuf_reset(&ctx->reqbody);
    if ((head->flags & HTTP_F_CHUNKED || head->content_length > 0) &&
        pin_head(ctx, head, head_len) < 0) {
        send_error(ctx, srv, 500);
        return false;
    }
    ctx->in_pos += head_len;

    bool keep_alive = head->version_minor ? !(head->flags & HTTP_F_CONN_CLOSE)
                                          : (head->flags & HTTP_F_CONN_KEEP_ALIVE);
    if (!keep_alive)
        ctx->closing = true;
    if (head->flags & HTTP_F_CHUNKED) {
        req.body_kind = BODY_CHUNKED;
    } else if (head->content_length > 0) {
        req.body_kind = BODY_LENGTH;
        req.body_left = (uint64_t)head->content_length;
    }

    unsigned mark = coro_defer_mark(ctx->coro);
    int status = dispatch(&req, &resp);
    coro_defer_run_to(ctx->coro, mark);
    skip_body(&req);

    if (resp.streaming) {
        if (resp.chunked && !resp.head_only)
            strbuf_append(&ctx->out, "0\r\n\r\n", 5);
    } else if (!resp.sent) {
        write_response(&req, &resp, status);
    }
    if (ctx->out.len >= OUT_FLUSH_AT)
        conn_flush(ctx);
    ctx->new_deadline = true; /* the next request gets its own timeout */
    return !ctx->closing;
}

/* Parses the next request head, reading as needed. Returns its length, 0
 * when the connection should go idle or close (ctx->closing), or -status. */
static ssize_t next_head(struct conn_ctx *ctx, struct colibri_server *srv, struct http_head *head)
{
    bool parse = true;
    for (;;) {
        size_t avail = ctx->in_len - ctx->in_pos;
        ctx->mid_request = avail > 0; /* a timeout now deserves a 408 */
        if (avail && parse) {
            ssize_t r = http_parse_head(ctx->in + ctx->in_pos, avail, &srv->limits, head);
            if (r != 0)
                return r;
            compact(ctx);
        } else if (!avail) {
            ctx->in_pos = ctx->in_len = 0;
        }
        /* responses to what we have leave before we wait for more */
        conn_flush(ctx);
        bool idle = avail == 0;
        if (idle && !ctx->last_read_full)
            return 0;
        if (ctx->in_len == ctx->in_cap)
            return -431;
        ssize_t n = conn_read(ctx, idle);
        if (n == -EAGAIN)
            return 0;
        if (n == 0) {
            ctx->closing = true;
            return 0;
        }
        /* A head ends with a line feed: bytes without one cannot complete
         * it, so a head trickled in tiny pieces is not rescanned from its
         * start for every piece (the size limit is still checked). */
        parse = memchr(ctx->in + ctx->in_len - n, '\n', (size_t)n) ||
                ctx->in_len - ctx->in_pos > srv->limits.max_head;
    }
}

/* Closing with unread request bytes makes the kernel send a reset, which
 * can destroy the response before the client reads it. So: stop writing,
 * then drain what the client still sends, within limits. */
static void linger(struct conn_ctx *ctx)
{
    size_t drained = 0;
    shutdown(ctx->fd, SHUT_WR);
    ctx->mid_request = false;
    while (drained < LINGER_MAX) {
        ctx->in_pos = ctx->in_len = 0;
        ssize_t n = conn_read(ctx, false);
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
}

void http_conn_main(struct coro *coro, void *arg)
{
    struct conn_ctx *ctx = arg;
    struct colibri_server *srv = ctx->worker->cfg->owner;
    (void)coro;

    for (;;) {
        struct http_head head;
        ssize_t r = next_head(ctx, srv, &head);
        if (r == 0)
            return;
        if (r < 0) {
            send_error(ctx, srv, (int)-r);
            break;
        }
        if (!handle(ctx, srv, &head, (size_t)r))
            break;
    }
    /* every way out of the loop closes the connection (ctx->closing) */
    conn_flush_last(ctx);
    if (ctx->lingering || ctx->in_len > ctx->in_pos)
        linger(ctx);
}

void http_request_timeout(struct worker *w, int fd)
{
    /* best effort, without blocking: the client is too slow to wait for */
    char buf[160];
    struct strbuf sb = {.buf = buf, .cap = sizeof(buf) - 1};
    struct view line = http_status_line(408);
    memcpy(buf, line.p, line.len);
    sb.len = line.len;
    memcpy(buf + sb.len, date_header(w), DATE_HDR_LEN);
    sb.len += DATE_HDR_LEN;
    static const char tail[] = "Content-Length: 0\r\nConnection: close\r\n\r\n";
    memcpy(buf + sb.len, tail, sizeof(tail) - 1);
    sb.len += sizeof(tail) - 1;
    ssize_t n = send(fd, buf, sb.len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
}

/* --- the public request API ---------------------------------------------------- */

static struct colibri_str str(struct view v)
{
    return (struct colibri_str){.p = v.p, .len = v.len};
}

enum colibri_method colibri_req_method(const struct colibri_request *req)
{
    return (enum colibri_method)req->head->method;
}

struct colibri_str colibri_req_path(const struct colibri_request *req)
{
    return str(req->path);
}
struct colibri_str colibri_req_target(const struct colibri_request *req)
{
    return str(req->head->target);
}
struct colibri_str colibri_req_query_string(const struct colibri_request *req)
{
    return str(req->head->query);
}
struct colibri_str colibri_req_headers_raw(const struct colibri_request *req)
{
    return str(req->head->headers);
}
int colibri_req_http_minor(const struct colibri_request *req)
{
    return req->head->version_minor;
}

bool colibri_req_query(struct colibri_request *req, const char *name, struct colibri_str *value)
{
    struct view raw;
    if (!http_query_find(req->head->query, name, strlen(name), &raw))
        return false;
    char *p = arena_alloc(&req->ctx->arena, raw.len + 1);
    if (!p)
        return false;
    ssize_t n = http_percent_decode(p, raw.p, raw.len, true);
    if (n < 0)
        return false;
    p[n] = '\0';
    *value = (struct colibri_str){.p = p, .len = (size_t)n};
    return true;
}

bool colibri_req_header(const struct colibri_request *req, const char *name,
                        struct colibri_str *value)
{
    struct view v;
    if (!http_header_find(req->head->headers, name, strlen(name), &v))
        return false;
    *value = str(v);
    return true;
}

bool colibri_req_cookie(const struct colibri_request *req, const char *name,
                        struct colibri_str *value)
{
    struct view cookies, v;
    if (!http_header_find(req->head->headers, "Cookie", 6, &cookies))
        return false;
    if (!http_cookie_find(cookies, name, strlen(name), &v))
        return false;
    *value = str(v);
    return true;
}

bool colibri_req_has_body(const struct colibri_request *req)
{
    return req->body_kind != BODY_NONE;
}

int colibri_req_body(struct colibri_request *req, struct colibri_str *body)
{
    int r = body_pump(req, true);
    if (r)
        return r;
    *body = (struct colibri_str){.p = req->ctx->reqbody.buf ? req->ctx->reqbody.buf : "",
                                 .len = req->ctx->reqbody.len};
    return 0;
}

int colibri_req_remote_addr(const struct colibri_request *req, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(req->ctx->fd, (struct sockaddr *)&ss, &sl) < 0)
        return -errno;
    const void *a = ss.ss_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    if (!inet_ntop(ss.ss_family, a, buf, (socklen_t)len))
        return -errno;
    return 0;
}

int colibri_defer(struct colibri_request *req, void (*fn)(void *), void *arg)
{
    return coro_defer(req->ctx->coro, fn, arg);
}

/* --- the public response API ----------------------------------------------------- */

void colibri_resp_set_type(struct colibri_response *resp, const char *mime)
{
    resp->mime = mime;
}
void colibri_resp_set_status(struct colibri_response *resp, int status)
{
    resp->status = status;
}

static bool field_ok(const char *s, bool name)
{
    if (!*s && name)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\r' || c == '\n' || (name && (c <= ' ' || c == ':' || c >= 0x7f)))
            return false;
    }
    return true;
}

int colibri_resp_header(struct colibri_response *resp, const char *name, const char *value)
{
    if (!field_ok(name, true) || !field_ok(value, false) || resp->streaming)
        return -EINVAL;
    struct strbuf *h = &resp->req->ctx->hdrs;
    if (strbuf_printf(h, "%s: %s\r\n", name, value) < 0)
        return -ENOMEM;
    return 0;
}

int colibri_resp_header_lines(struct colibri_response *resp, const char *lines, size_t len)
{
    if (resp->streaming || resp->sent)
        return -EINVAL;
    return strbuf_append(&resp->req->ctx->hdrs, lines, len);
}

int colibri_resp_append(struct colibri_response *resp, const void *p, size_t len)
{
    return strbuf_append(&resp->req->ctx->body, p, len);
}

int colibri_resp_printf(struct colibri_response *resp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = strbuf_vprintf(&resp->req->ctx->body, fmt, ap);
    va_end(ap);
    return r;
}

int colibri_resp_send_chunk(struct colibri_response *resp, const void *p, size_t len)
{
    struct conn_ctx *ctx = resp->req->ctx;
    if (!resp->streaming)
        start_stream(resp);
    if (resp->head_only || !len) {
        conn_flush(ctx);
        return 0;
    }
    if (!resp->chunked) {
        strbuf_append(&ctx->out, p, len);
        conn_flush(ctx);
        return 0;
    }
    char size[24];
    int n = snprintf(size, sizeof(size), "%zx\r\n", len);
    strbuf_append(&ctx->out, size, (size_t)n);
    struct iovec iov[3] = {
        {.iov_base = ctx->out.buf, .iov_len = ctx->out.len},
        {.iov_base = (void *)p, .iov_len = len},
        {.iov_base = "\r\n", .iov_len = 2},
    };
    conn_writev(ctx, iov, 3);
    strbuf_reset(&ctx->out);
    return 0;
}

/* The head of a response whose body the caller sends itself; false when
 * there is no body to send (HEAD, or empty). */
static bool answer_head(struct colibri_response *resp, int status, const char *mime, size_t len)
{
    write_head(resp->req, resp, status, (int64_t)len, mime);
    resp->sent = true;
    return !resp->head_only && len;
}

int colibri_resp_sendfile(struct colibri_response *resp, int status, const char *mime, int fd,
                          off_t offset, size_t len)
{
    struct conn_ctx *ctx = resp->req->ctx;
    if (resp->streaming || resp->sent)
        return 500;
    if (!answer_head(resp, status, mime, len))
        return status;
    if (len <= COPY_BODY_MAX) {
        /* small: read it behind the header, one writev for both */
        if (strbuf_reserve(&ctx->out, len) < 0)
            coro_abort(ctx->coro);
        ssize_t n = pread(fd, ctx->out.buf + ctx->out.len, len, offset);
        if (n != (ssize_t)len)
            coro_abort(ctx->coro); /* the file changed under us: the length is promised */
        ctx->out.len += len;
        ctx->out.buf[ctx->out.len] = '\0';
        return status;
    }
    /* large: the header waits in the socket (MSG_MORE) for sendfile */
    conn_write_more(ctx, ctx->out.buf, ctx->out.len);
    strbuf_reset(&ctx->out);
    conn_sendfile(ctx, fd, offset, len);
    return status;
}

int colibri_resp_send_static(struct colibri_response *resp, int status, const char *mime,
                             const void *p, size_t len)
{
    struct conn_ctx *ctx = resp->req->ctx;
    if (resp->streaming || resp->sent)
        return 500;
    if (!answer_head(resp, status, mime, len))
        return status;
    if (len <= COPY_BODY_MAX && ctx->in_len > ctx->in_pos) {
        /* more requests are buffered (pipelining): join their answers in
         * one writev instead of a system call each */
        if (strbuf_append(&ctx->out, p, len) < 0)
            coro_abort(ctx->coro);
        return status;
    }
    send_out_and(ctx, p, len);
    return status;
}

int colibri_resp_send_event(struct colibri_response *resp, const char *event, const char *data,
                            size_t len)
{
    /* a streaming response has no use for the body buffer: build events there */
    struct strbuf *ev = &resp->req->ctx->body;
    if (!resp->streaming)
        resp->mime = "text/event-stream";
    strbuf_reset(ev);
    if (event && (!field_ok(event, false) || strchr(event, '\n')))
        return -EINVAL;
    if (event)
        strbuf_printf(ev, "event: %s\n", event);
    /* every line of data is its own "data:" field */
    size_t i = 0;
    do {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        strbuf_append(ev, "data: ", 6);
        strbuf_append(ev, data + i, end - i);
        strbuf_append_char(ev, '\n');
        i = end + 1;
    } while (i < len);
    if (strbuf_append_char(ev, '\n') < 0)
        return -ENOMEM;
    return colibri_resp_send_chunk(resp, ev->buf, ev->len);
}
