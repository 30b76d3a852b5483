/* proxy.c - the reverse proxy: "proxy PREFIX { to = ... }" in a site.
 *
 *     proxy /api {
 *         to = app                 # an upstream's name, http://HOST:PORT, HOST:PORT, unix:/PATH
 *         strip_prefix = false     # true: /api/x goes upstream as /x
 *         preserve_host = false    # true: the client's Host goes upstream
 *         connect_timeout = 5s
 *         read_timeout = 60s       # between two reads from the upstream
 *         send_timeout = 60s       # between two writes to the upstream (and to the client)
 *         retries = 2
 *         websocket = true
 *         buffer_response = false
 *         max_body = 0             # the largest request body (0: no limit)
 *     }
 *
 * A request runs on its connection's coroutine: the upstream socket is
 * non-blocking and every wait is conn_wait_fd() (gateway/upio.c). The
 * request's body goes upstream as it arrives, the answer's body to the
 * client as it comes, through one buffer of RELAY_BUF bytes: memory per
 * request is bounded whatever the sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/log.h"
#include "gateway/proxy.h"
#include "gateway/uphead.h"
#include "gateway/upio.h"
#include "gateway/upstream.h"
#include "http/request.h"
#include "http/status.h"
#include "rt/tls.h"
#include "gateway/uptls.h"
#include "server/builtin.h"

#define RELAY_BUF     (64 * 1024)
#define RESP_HEAD_MAX (16 * 1024)
#define BUFFER_MAX    (8 << 20) /* buffer_response: larger answers stream */

/* One request's state, on the handler's stack; the defer closes what it holds. */
struct job {
    struct colibri_request *req;
    struct proxy_route *pr;
    int fd;          /* the upstream connection, or -1 */
    int srv;         /* its server's index, or -1 */
    bool counted;    /* srv's active count holds this request */
    int epfd;        /* the tunnel's epoll, or -1 */
    char *buf;       /* RELAY_BUF bytes */
    size_t len, pos; /* bytes read from the upstream, [pos, len) not handled */
    struct strbuf head;
};

static void job_release_server(struct job *j)
{
    if (j->counted) {
        atomic_fetch_sub_explicit(&j->pr->up->servers[j->srv].active, 1, memory_order_relaxed);
        j->counted = false;
    }
}

static void job_close(struct job *j)
{
    if (j->fd >= 0)
        gw_close(j->fd);
    j->fd = -1;
    job_release_server(j);
}

static void job_free(void *arg)
{
    struct job *j = arg;
    free(j->buf);
    strbuf_free(&j->head);
    free(j);
}

static const struct gw_spare job_spare = {
    .kind = GW_SPARE_PROXY,
    .size = sizeof(struct job),
    .buf_at = offsetof(struct job, buf),
    .buf_len = RELAY_BUF,
    .free_job = job_free,
};

static void job_end(void *arg)
{
    struct job *j = arg;
    job_close(j);
    if (j->epfd >= 0)
        close(j->epfd);
    j->epfd = -1;
    gw_spare_put(&job_spare, j, j->head.cap <= RESP_HEAD_MAX);
}

/* The target going upstream: the client's, or without the prefix. */
static struct view target_of(struct job *j, char *tmp, size_t tmplen)
{
    const struct http_head *h = j->req->head;
    struct view t = h->target;
    if (h->flags & HTTP_F_ABSOLUTE) {
        /* absolute-form: the path and the query */
        t = h->path;
        if (h->flags & HTTP_F_HAS_QUERY) {
            int n = snprintf(tmp, tmplen, "%.*s?%.*s", (int)h->path.len, h->path.p,
                             (int)h->query.len, h->query.p);
            t = (struct view){.p = tmp, .len = (size_t)MIN((size_t)n, tmplen - 1)};
        }
    }
    size_t pl = j->pr->prefix_len;
    if (!j->pr->strip_prefix || !pl)
        return t;
    /* the router matched the decoded path; the raw target starts with
     * the same bytes unless the client escaped them */
    struct colibri_str path = colibri_req_path(j->req);
    if (t.len >= pl && !memcmp(t.p, path.p, pl) &&
        (t.len == pl || t.p[pl] == '/' || t.p[pl] == '?')) {
        t.p += pl, t.len -= pl;
        if (!t.len || t.p[0] == '?') {
            int n = snprintf(tmp, tmplen, "/%.*s", (int)t.len, t.p);
            t = (struct view){.p = tmp, .len = (size_t)MIN((size_t)n, tmplen - 1)};
        }
        return t;
    }
    /* escaped differently: the decoded rest, escaped again, and the query */
    size_t n = 0;
    const char *rest = path.p + MIN(pl, path.len);
    size_t rl = path.len > pl ? path.len - pl : 0;
    if (!rl || rest[0] != '/')
        tmp[n++] = '/';
    for (size_t i = 0; i < rl && n + 4 < tmplen; i++) {
        unsigned char c = (unsigned char)rest[i];
        if (c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#')
            n += (size_t)snprintf(tmp + n, tmplen - n, "%%%02X", c);
        else
            tmp[n++] = (char)c;
    }
    if ((h->flags & HTTP_F_HAS_QUERY) && n + h->query.len + 2 < tmplen)
        n += (size_t)snprintf(tmp + n, tmplen - n, "?%.*s", (int)h->query.len, h->query.p);
    return (struct view){.p = tmp, .len = n};
}

static uint64_t hash_key(struct job *j)
{
    const struct gw_upstream *up = j->pr->up;
    if (up->balance != GW_HASH)
        return 0;
    struct colibri_str v;
    if (up->hash_header && colibri_req_header(j->req, up->hash_header, &v))
        return gw_hash(v.p, v.len);
    const struct conn_peer *p = conn_peer_of(j->req->ctx);
    return gw_hash(p->addr, p->family == AF_INET ? 4 : 16);
}

/* --- sending the request ------------------------------------------------------- */

/* Whether the body goes up chunked: one whose length is not known ahead
 * (HTTP/1.1 chunked, or an HTTP/2 body without content-length, which
 * ends with its stream). Sent as it came without framing, the upstream
 * would take the bytes of an HTTP/2 body for the next request. */
static bool body_chunked(const struct colibri_request *req)
{
    return req->body_kind == BODY_CHUNKED || req->body_kind == BODY_TO_END;
}

static int send_head(struct job *j, const struct gw_server *s, bool upgrade)
{
    struct colibri_request *req = j->req;
    const struct http_head *h = req->head;
    char tmp[8192], addr[64] = "";
    colibri_req_remote_addr(req, addr, sizeof(addr));
    struct gw_req_out o = {
        .method = h->method_str,
        .target = target_of(j, tmp, sizeof(tmp)),
        .fields = h->headers,
        .host =
            j->pr->preserve_host && h->host.len ? h->host : (struct view){s->host, strlen(s->host)},
        .client_host = h->host,
        .client_addr = addr,
        .secure = colibri_req_is_secure(req),
        .content_length = req->body_kind == BODY_LENGTH ? h->content_length : -1,
        .chunked = body_chunked(req),
        .upgrade = upgrade,
    };
    strbuf_reset(&j->head);
    if (gw_build_request(&j->head, &o))
        return -ENOMEM;
    return gw_write(req->ctx, j->fd, j->head.buf, j->head.len, j->pr->send_ms);
}

/* The body, as it arrives: 0, or -errno with *client set when the client's
 * side failed (the status to answer is http_status_of()). */
static int send_body(struct job *j, bool *client)
{
    struct colibri_request *req = j->req;
    bool chunked = body_chunked(req);
    *client = false;
    for (;;) {
        struct view v;
        int r = http_body_next(req, &v);
        if (r) {
            *client = true;
            return r;
        }
        if (!v.len) {
            if (chunked)
                return gw_write(req->ctx, j->fd, "0\r\n\r\n", 5, j->pr->send_ms);
            return 0;
        }
        char size[24];
        int n = chunked ? snprintf(size, sizeof(size), "%zx\r\n", v.len) : 0;
        struct iovec iov[3] = {{size, (size_t)n}, {(void *)v.p, v.len}, {"\r\n", chunked ? 2 : 0}};
        if ((r = gw_writev(req->ctx, j->fd, iov, 3, j->pr->send_ms)))
            return r;
    }
}

/* --- the answer ----------------------------------------------------------------- */

/* Reads the answer's head (skipping 1xx but a 101): its length, or -errno
 * (-ETIMEDOUT, -EBADMSG for an invalid head, -ECONNRESET and 0-length
 * ends as -EPIPE). *got: whether any byte came. */
static ssize_t read_head(struct job *j, struct gw_resp_head *h, bool *got)
{
    j->len = j->pos = 0;
    *got = false;
    for (;;) {
        if (j->len > j->pos) {
            ssize_t r = gw_parse_response(j->buf + j->pos, j->len - j->pos, RESP_HEAD_MAX, h);
            if (r < 0)
                return -EBADMSG;
            if (r > 0) {
                if (h->status >= 100 && h->status < 200 && h->status != 101) {
                    j->pos += (size_t)r; /* an interim answer (100, 103): ours to drop */
                    continue;
                }
                return r;
            }
            if (j->pos) {
                memmove(j->buf, j->buf + j->pos, j->len - j->pos);
                j->len -= j->pos;
                j->pos = 0;
            }
        }
        if (j->len == RELAY_BUF)
            return -EBADMSG;
        ssize_t n =
            gw_read(j->req->ctx, j->fd, j->buf + j->len, RELAY_BUF - j->len, j->pr->read_ms);
        if (n < 0)
            return n;
        if (n == 0)
            return -EPIPE;
        *got = true;
        j->len += (size_t)n;
    }
}

/* The upstream's body failed part way: the client's answer is cut (the
 * connection closes without the end of its framing), never completed
 * wrongly. */
static void cut_answer(struct job *j, const char *why)
{
    struct colibri_request *req = j->req;
    struct colibri_response *resp = req->hc->resp;
    LOG_LIMITED(LOG_WARN, "proxy: upstream %s: %s: the answer to \"%.*s %.*s\" is cut short",
                j->pr->up->servers[j->srv].text, why, (int)req->head->method_str.len,
                req->head->method_str.p, (int)MIN(req->head->target.len, 200), req->head->target.p);
    req->hc->closing = true;
    resp->chunked = false; /* no last chunk */
    resp->interrupted = true;
    job_close(j);
}

/* More body bytes into buf (from pos on): > 0, 0 at the upstream's end, < 0 an error. */
static ssize_t more(struct job *j)
{
    if (j->pos == j->len)
        j->pos = j->len = 0;
    if (j->len == RELAY_BUF) {
        memmove(j->buf, j->buf + j->pos, j->len - j->pos);
        j->len -= j->pos;
        j->pos = 0;
    }
    ssize_t n = gw_read(j->req->ctx, j->fd, j->buf + j->len, RELAY_BUF - j->len, j->pr->read_ms);
    if (n > 0)
        j->len += (size_t)n;
    return n;
}

static const char *err_text(ssize_t r)
{
    return r == 0 ? "closed early" : r == -ETIMEDOUT ? "read timed out" : strerror((int)-r);
}

/* Relays a body of Content-Length n; whether it came whole. */
static bool relay_length(struct job *j, uint64_t n)
{
    struct conn_ctx *ctx = j->req->ctx;
    struct colibri_response *resp = j->req->hc->resp;
    bool first = true;
    /* counted as it goes, as a chunked answer's is: an answer cut short
     * (by the upstream, or a client that went or stalled) is logged with
     * what went out, not the length it announced */
    resp->body_bytes = 0;
    while (n) {
        if (j->pos == j->len) {
            ssize_t r = more(j);
            if (r <= 0) {
                conn_flush(ctx);
                cut_answer(j, err_text(r));
                return false;
            }
        }
        size_t take = (size_t)MIN((uint64_t)(j->len - j->pos), n);
        resp->body_bytes += take;
        if (first)
            conn_flush_with(ctx, j->buf + j->pos, take); /* the head and the first bytes */
        else
            conn_write(ctx, j->buf + j->pos, take);
        first = false;
        j->pos += take;
        n -= take;
    }
    conn_flush(ctx);
    return true;
}

/* Relays a chunked body, decoded, as the client's framing; whether it came whole. */
static bool relay_chunked(struct job *j)
{
    struct colibri_response *resp = j->req->hc->resp;
    struct http_chunked st = {0};
    for (;;) {
        if (j->pos < j->len) {
            size_t payload;
            ssize_t used = http_chunked_decode(&st, j->buf + j->pos, j->len - j->pos, &payload);
            if (used < 0) {
                cut_answer(j, "invalid chunked body");
                return false;
            }
            if (payload)
                colibri_resp_send_chunk(resp, j->buf + j->pos, payload);
            j->pos += (size_t)used;
            if (st.done)
                return true;
            if (used > 0)
                continue;
        }
        ssize_t r = more(j);
        if (r <= 0) {
            cut_answer(j, err_text(r));
            return false;
        }
    }
}

/* Relays a body that ends with the upstream's close. */
static void relay_close(struct job *j)
{
    struct colibri_response *resp = j->req->hc->resp;
    for (;;) {
        if (j->pos < j->len)
            colibri_resp_send_chunk(resp, j->buf + j->pos, j->len - j->pos);
        j->pos = j->len = 0;
        ssize_t r = more(j);
        if (r == 0)
            break;
        if (r < 0) {
            cut_answer(j, err_text(r));
            return;
        }
    }
    job_close(j);
}

/* --- WebSocket (any Upgrade) tunnel ------------------------------------------------- */

static void tunnel(struct job *j)
{
    struct colibri_request *req = j->req;
    struct conn_ctx *ctx = req->ctx;
    req->hc->closing = true;
    /* the upstream's bytes after its 101, and the client's after its request */
    if (j->len > j->pos)
        conn_write(ctx, j->buf + j->pos, j->len - j->pos);
    if (http_pin_head(req) < 0)
        return;
    if (ctx->in_len > ctx->in_pos &&
        gw_write(ctx, j->fd, ctx->in + ctx->in_pos, ctx->in_len - ctx->in_pos, j->pr->send_ms))
        return;
    ctx->in_pos = ctx->in_len = 0;
    conn_kept_forget(ctx, j->fd); /* the tunnel's epoll watches it now */
    j->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event a = {.events = EPOLLIN, .data.u32 = 0},
                       b = {.events = EPOLLIN, .data.u32 = 1};
    if (j->epfd < 0 || epoll_ctl(j->epfd, EPOLL_CTL_ADD, j->fd, &a) < 0 ||
        epoll_ctl(j->epfd, EPOLL_CTL_ADD, ctx->fd, &b) < 0)
        return;
    for (;;) {
        bool client = tls_pending(ctx), upstream = gw_tls_pending(j->fd);
        if (!client && !upstream) {
            int r = conn_wait_fd(ctx, j->epfd, CONN_WAIT_READ, j->pr->read_ms);
            if (r < 0)
                return; /* idle through read_timeout, or stopping */
            struct epoll_event ev[2];
            int n = epoll_wait(j->epfd, ev, 2, 0);
            for (int i = 0; i < n; i++) {
                if (ev[i].data.u32)
                    client = true;
                else
                    upstream = true;
            }
        } else {
            struct epoll_event ev[2];
            int n = epoll_wait(j->epfd, ev, 2, 0);
            for (int i = 0; i < n; i++)
                if (!ev[i].data.u32)
                    upstream = true;
        }
        if (upstream) {
            ssize_t n = gw_read_now(j->fd, j->buf, RELAY_BUF);
            if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR))
                return;
            if (n > 0)
                conn_write(ctx, j->buf, (size_t)n);
        }
        if (client) {
            ctx->in_pos = ctx->in_len = 0;
            ssize_t n = conn_read(ctx, false);
            if (n <= 0)
                return;
            if (gw_write(ctx, j->fd, ctx->in, ctx->in_len, j->pr->send_ms))
                return;
            ctx->in_pos = ctx->in_len = 0;
        }
    }
}

/* --- the handler ------------------------------------------------------------------ */

/* Passes the answer whose head is h (hlen bytes at pos) to the client.
 * Returns the handler's status. */
static int relay(struct job *j, struct gw_resp_head *h, size_t hlen, bool upgrade)
{
    struct colibri_request *req = j->req;
    struct colibri_response *resp = req->hc->resp;
    struct gw_upstream *up = j->pr->up;
    j->pos += hlen;
    colibri_resp_set_type(resp, NULL);
    /* every return but a whole answer closes the connection: only one
     * whose answer ended exactly goes back to the pool (the handler puts
     * back what is still open) */
    if (gw_answer_fields(&req->hc->hdrs, h)) {
        job_close(j);
        return 500;
    }
    if (h->status == 101) {
        if (!upgrade) {
            LOG_LIMITED(LOG_WARN, "proxy: upstream %s: a 101 to a request that asked for none",
                        up->servers[j->srv].text);
            strbuf_reset(&req->hc->hdrs);
            job_close(j);
            return 502;
        }
        http_write_response(req, resp, 101);
        resp->sent = true;
        conn_flush(req->ctx);
        tunnel(j);
        job_close(j); /* a tunnel's connection is never pooled */
        return 101;
    }
    /* the answer goes to the client at its pace, but a client that takes
     * nothing for send_timeout ends the request, and the upstream
     * connection with it (cut, not pooled): it is not held for the
     * request timeout (cleared once relay() returns) */
    conn_set_write_timeout(req->ctx, j->pr->send_ms);
    bool no_body = resp->head_only || h->status == 204 || h->status == 304;
    bool keep = !h->conn_close;
    if (no_body) {
        if (h->status == 204 || h->status == 304) {
            if (!keep || j->pos != j->len)
                job_close(j);
            return h->status; /* the head alone */
        }
        if (h->content_length >= 0)
            http_answer_head(resp, h->status, NULL, (uint64_t)h->content_length);
        else {
            resp->status = h->status;
            http_start_stream(resp);
        }
        if (!keep || j->pos != j->len || h->te)
            job_close(j); /* bytes we cannot place: not reusable */
        return h->status;
    }
    bool whole;
    if (j->pr->buffer_response && h->content_length > 0 &&
        (uint64_t)h->content_length <= BUFFER_MAX) {
        /* read whole first: the upstream connection is free before the
         * client's pace matters */
        struct strbuf *b = &req->hc->body;
        size_t n = (size_t)h->content_length;
        if (strbuf_reserve(b, n) < 0) {
            job_close(j);
            return 500;
        }
        while (b->len < n) {
            if (j->pos == j->len) {
                ssize_t r = more(j);
                if (r <= 0) {
                    LOG_LIMITED(LOG_WARN, "proxy: upstream %s: %s in a buffered answer",
                                up->servers[j->srv].text, err_text(r));
                    strbuf_reset(b);
                    strbuf_reset(&req->hc->hdrs);
                    job_close(j);
                    return r == -ETIMEDOUT ? 504 : 502;
                }
            }
            size_t take = MIN(j->len - j->pos, n - b->len);
            memcpy(b->buf + b->len, j->buf + j->pos, take);
            b->len += take;
            j->pos += take;
        }
        if (!keep || j->pos != j->len)
            job_close(j);
        else if (j->fd >= 0) {
            gw_pool_put(up, req->ctx, (unsigned)j->srv, j->fd);
            j->fd = -1;
        }
        job_release_server(j);
        resp->mime = NULL;
        return h->status;
    }
    if (h->content_length >= 0) {
        if (!http_answer_head(resp, h->status, NULL, (uint64_t)h->content_length)) {
            whole = true; /* an empty body */
        } else {
            whole = relay_length(j, (uint64_t)h->content_length);
        }
    } else {
        resp->status = h->status;
        http_start_stream(resp);
        if (h->chunked) {
            whole = relay_chunked(j);
        } else {
            relay_close(j);
            whole = false; /* no connection to keep */
        }
    }
    if (!whole || !keep || j->pos != j->len)
        job_close(j);
    return h->status;
}

int proxy_handler(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct proxy_route *pr = data;
    struct gw_upstream *up = pr->up;
    struct conn_ctx *ctx = req->ctx;
    struct job *j = gw_spare_get(&job_spare);
    if (!j)
        return 503;
    *j = (struct job){
        .req = req, .pr = pr, .fd = -1, .srv = -1, .epfd = -1, .buf = j->buf, .head = j->head};
    if (colibri_defer(req, job_end, j)) {
        return 503; /* the end ran at once: the job is back (kept or freed) */
    }
    req->max_body = pr->max_body ? pr->max_body : UINT64_MAX;
    if (req->body_kind == BODY_LENGTH && req->body_left > req->max_body) {
        req->hc->closing = req->hc->lingering = true;
        return 413;
    }
    struct colibri_str upg;
    bool upgrade = pr->websocket && (req->head->flags & HTTP_F_CONN_UPGRADE) &&
                   colibri_req_header(req, "Upgrade", &upg) && upg.len;
    bool safe = gw_idempotent(req->head->method);
    unsigned widx = conn_worker_index(ctx);
    uint64_t key = hash_key(j), tried = 0;
    uint64_t t0 = worker_now_ms();
    unsigned tries_left = pr->retries;
    bool fresh_retry = false; /* the one retry of a pooled connection found closed */
    int status = 502;
    for (;;) {
        /* once the client's body is being read it cannot be sent again */
        bool body_started = req->body_kind != BODY_NONE && req->hc->bs.t0_ms != 0;
        if (!fresh_retry) {
            j->srv = gw_pick(up, widx, worker_now_ms(), tried, key);
            if (j->srv < 0) {
                if (!tried)
                    LOG_LIMITED(LOG_WARN, "proxy: upstream %s: no server is up", up->name);
                return status;
            }
            tried |= 1ull << j->srv;
        }
        const struct gw_server *s = &up->servers[j->srv];
        resp->upstream_addr = s->text;
        atomic_fetch_add_explicit(&up->servers[j->srv].active, 1, memory_order_relaxed);
        j->counted = true;
        bool reused = false;
        j->fd = -1;
        if (!fresh_retry) {
            /* the worker's epoll closes a kept connection as soon as the
             * upstream closes it; one closed since its last wake-up is
             * found by the failure of this request, which a bodiless
             * idempotent one survives (sent again on a fresh connection,
             * below). Only a request that cannot be sent again (a body,
             * a method that is not idempotent) pays a peek first */
            while ((j->fd = gw_pool_take(up, widx, (unsigned)j->srv)) >= 0 &&
                   (req->body_kind != BODY_NONE || !safe) && !gw_idle_alive(j->fd)) {
                gw_close(j->fd);
                j->fd = -1;
            }
            reused = j->fd >= 0;
        }
        fresh_retry = false;
        if (j->fd < 0) {
            int fd = gw_connect(ctx, s, pr->connect_ms);
            if (fd >= 0 && s->tls)
                fd = gw_tls_connect(ctx, s->tls, s->text, fd, pr->connect_ms);
            if (fd < 0) {
                job_release_server(j);
                if (fd == -ECANCELED)
                    return 503;
                LOG_LIMITED(LOG_WARN, "proxy: upstream %s: connect: %s", s->text,
                            fd == -ETIMEDOUT ? "timed out"
                            : fd == -EPROTO  ? "TLS handshake failed"
                                             : strerror(-fd));
                gw_failed(up, (unsigned)j->srv, worker_now_ms());
                status = fd == -ETIMEDOUT ? 504 : 502;
                if (tries_left-- && !body_started)
                    continue;
                return status;
            }
            j->fd = fd;
        }
        /* the request */
        bool client_err = false, got = false;
        int r = send_head(j, s, upgrade);
        if (!r && req->body_kind != BODY_NONE)
            r = send_body(j, &client_err);
        if (client_err) {
            job_close(j);
            return http_status_of(r);
        }
        if (r == -ENOMEM) {
            job_close(j);
            return 503;
        }
        /* a write failed: an early answer may still be there to read */
        struct gw_resp_head h;
        /* the request's bytes met a reset: the upstream had closed the
         * connection, and read none of them */
        bool unsent = r == -EPIPE || r == -ECONNRESET;
        ssize_t hl = r == -ETIMEDOUT ? r : read_head(j, &h, &got);
        if (hl > 0) {
            resp->upstream_ms = (int64_t)(worker_now_ms() - t0);
            gw_stats_answer(up, j->srv, resp->upstream_ms);
            bool again = safe && req->body_kind == BODY_NONE && tries_left &&
                         (h.status == 502 || h.status == 503 || h.status == 504);
            if (again && gw_pick(up, widx, worker_now_ms(), tried, key) >= 0) {
                tries_left--;
                LOG_LIMITED(LOG_INFO, "proxy: upstream %s answered %d: trying another", s->text,
                            h.status);
                job_close(j);
                continue;
            }
            gw_succeeded(up, (unsigned)j->srv);
            status = relay(j, &h, (size_t)hl, upgrade);
            conn_set_write_timeout(ctx, 0);
            if (j->fd >= 0) {
                gw_pool_put(up, ctx, (unsigned)j->srv, j->fd);
                j->fd = -1;
            }
            job_release_server(j);
            return status;
        }
        job_close(j);
        if (hl == -ECANCELED)
            return 503;
        /* a kept connection the upstream had closed: once more on a fresh
         * one (a body read from the client cannot be sent again; a
         * request that is not idempotent only if none of it went: the
         * upstream may have acted on it and closed without answering) */
        bool resendable = req->body_kind == BODY_NONE || !req->hc->bs.t0_ms;
        bool stale = reused && !got && (hl == -EPIPE || hl == -ECONNRESET);
        if (stale && resendable && (safe || unsent)) {
            fresh_retry = true;
            continue;
        }
        resp->upstream_ms = (int64_t)(worker_now_ms() - t0);
        status = hl == -ETIMEDOUT ? 504 : 502;
        LOG_LIMITED(LOG_WARN, "proxy: upstream %s: %s%s", s->text,
                    hl == -ETIMEDOUT ? "timed out"
                    : hl == -EBADMSG ? "invalid response"
                    : hl == -EPIPE   ? "closed the connection without an answer"
                                     : strerror((int)-hl),
                    stale ? " (a kept connection: not sent again, the method is not idempotent)"
                          : "");
        if (!stale) /* a kept connection closing under a request is no fault of the server's */
            gw_failed(up, (unsigned)j->srv, worker_now_ms());
        if (safe && tries_left && resendable && !got) {
            tries_left--;
            continue;
        }
        return status;
    }
}
