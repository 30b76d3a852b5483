/* request.c - what a handler reads: the decoded path, query, headers,
 * cookies and the body, read from the socket only when asked for. */
#include "http/request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/log.h"
#include "http/status.h"
#include "rt/conn.h"

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

int http_decode_path_escaped(struct colibri_request *req)
{
    struct view raw = req->head->path;
    char *p = arena_alloc(&req->hc->arena, raw.len + 1);
    if (!p)
        return -ENOMEM;
    ssize_t n = http_percent_decode(p, raw.p, raw.len, false);
    if (n < 0 || n == 0 || p[0] != '/')
        return -EBADMSG;
    n = normalize_path(p, (size_t)n);
    if (n < 0)
        return -EBADMSG;
    req->path = (struct view){.p = p, .len = (size_t)n};
    return 0;
}

/* --- the body ------------------------------------------------------------------ */

static void rebase(struct view *v, const char *from, size_t len, const char *to)
{
    if (v->p >= from && v->p < from + len)
        v->p = to + (v->p - from);
}

int http_pin_head(struct colibri_request *req)
{
    if (req->head_pinned)
        return 0;
    struct http_head *head = req->head;
    const char *from = req->head_at;
    char *to = arena_alloc(&req->hc->arena, req->head_len);
    if (!to)
        return -ENOMEM;
    memcpy(to, from, req->head_len);
    struct view *views[] = {&head->method_str, &head->target,  &head->path, &head->query,
                            &head->host,       &head->headers, &req->path};
    for (size_t i = 0; i < N_ELEMENTS(views); i++)
        rebase(views[i], from, req->head_len, to);
    req->head_pinned = true;
    return 0;
}

/* The first read of a body that expects it sends "100 Continue". */
static void send_continue(struct colibri_request *req)
{
    struct conn_ctx *ctx = req->ctx;
    if ((req->head->flags & HTTP_F_EXPECT_CONTINUE) && !req->continue_sent &&
        ctx->in_len == ctx->in_pos) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        conn_flush(ctx);
        conn_write(ctx, cont, sizeof(cont) - 1);
        req->continue_sent = true;
    }
}

static void close_fd(void *fd)
{
    close((int)(intptr_t)fd);
}

/* Before a body read waits: 0 when it may, or -ETIMEDOUT (408) when the body is late
 * (body_timeout since its first read) or too slow (under body_min_rate on
 * average once body_rate_grace passed). A wait that would outlast the
 * body's deadline waits only until then, not request_timeout. */
static int body_pace(struct colibri_request *req)
{
    struct conn_ctx *ctx = req->ctx;
    const struct http_config *cfg = req->cfg;
    uint64_t now = conn_now_ms(ctx);
    uint64_t t0 = req->hc->bs.t0_ms;
    uint64_t deadline =
        t0 + (uint64_t)(req->hc->bs.timeout_s ? req->hc->bs.timeout_s : cfg->body_timeout_s) * 1000;
    bool slow = false;
    if (cfg->body_min_rate) {
        /* the time by which body_got bytes are due at the minimum rate */
        uint64_t due = t0 + MAX((uint64_t)cfg->body_rate_grace_s * 1000,
                                req->hc->bs.got * 1000 / cfg->body_min_rate);
        if (due < deadline) {
            deadline = due;
            slow = true;
        }
    }
    if (now < deadline) {
        uint64_t left = deadline - now;
        if (left >= (uint64_t)cfg->request_timeout_s * 1000 || ctx->parent)
            return 0; /* the request timeout comes first: an ordinary read (a
                       * stream's framing keeps its own time) */
        /* the socket's readiness, or the deadline, waited for on a dup()
         * of it (the socket itself may join the worker's epoll meanwhile);
         * a stop (-ECANCELED) or an fd that cannot be watched leaves it to
         * the ordinary read */
        unsigned mark = coro_defer_mark(ctx->coro);
        int d = fcntl(ctx->fd, F_DUPFD_CLOEXEC, 0);
        if (d < 0)
            return 0;
        /* closed by a defer: a hangup unwinds the wait, which never returns */
        if (coro_defer(ctx->coro, close_fd, (void *)(intptr_t)d) < 0) {
            close(d);
            return 0;
        }
        int r = conn_wait_fd(ctx, d, CONN_WAIT_READ, (int)left);
        coro_defer_run_to(ctx->coro, mark);
        if (r != -ETIMEDOUT)
            return 0;
        now = conn_now_ms(ctx);
    }
    LOG_LIMITED(LOG_INFO, "408: request body %s: %llu bytes in %llu ms",
                slow ? "under body_min_rate" : "not whole within body_timeout",
                (unsigned long long)req->hc->bs.got, (unsigned long long)(now - t0));
    req->hc->closing = req->hc->lingering = true;
    return -ETIMEDOUT;
}

/* A spooled body's bytes gather in hc->reqbody up to this, then are
 * written to its file in one call. */
#define SPOOL_WRITE_AT (256 * 1024)

static void body_file_close(void *arg)
{
    struct http_body_state *bs = arg;
    if (bs->map)
        munmap(bs->map, bs->file_len);
    close(bs->fd);
    bs->map = NULL;
    bs->spooled = false;
}

/* Writes what hc->reqbody holds to the body's file: 0 or -errno. */
static int spool_flush(struct colibri_request *req)
{
    struct strbuf *b = &req->hc->reqbody;
    for (size_t off = 0; off < b->len;) {
        ssize_t n = write(req->hc->bs.fd, b->buf + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        off += (size_t)n;
        req->hc->bs.file_len += (uint64_t)n;
    }
    strbuf_reset(b);
    return 0;
}

/* The body outgrew body_memory_max: from now on it goes to an unnamed file
 * in temp_dir, what was kept first. 0 or -errno. */
static int spool_start(struct colibri_request *req)
{
    int fd = http_temp_file(req->cfg->temp_dir);
    if (fd < 0)
        return -errno;
    if (coro_defer(req->ctx->coro, body_file_close, &req->hc->bs) < 0) {
        close(fd);
        return -ENOMEM;
    }
    req->hc->bs.fd = fd;
    req->hc->bs.spooled = true;
    int r = spool_flush(req);
    /* the memory the body held goes back now, not after the request */
    strbuf_free(&req->hc->reqbody);
    return r;
}

/* Keeps a piece of the body: in memory, or in its file. 0 or -errno. */
static int keep_piece(struct colibri_request *req, struct view piece)
{
    struct strbuf *b = &req->hc->reqbody;
    int r;
    if (!req->hc->bs.spooled && b->len + piece.len > req->cfg->body_memory_max &&
        (r = spool_start(req)) < 0)
        return r;
    if (req->hc->bs.spooled && b->len + piece.len > SPOOL_WRITE_AT && (r = spool_flush(req)) < 0)
        return r;
    return strbuf_append(b, piece.p, piece.len);
}

int http_body_pump(struct colibri_request *req, bool keep)
{
    /* the pieces http_body_next() hands out, kept or dropped */
    int r;
    while (!req->body_done) {
        struct view piece;
        if ((r = http_body_next(req, &piece)))
            return r;
        if (keep && piece.len && (r = keep_piece(req, piece)) < 0)
            goto out_fail;
    }
    if (keep && req->hc->bs.spooled && (r = spool_flush(req)) < 0)
        goto out_fail;
    return 0;
out_fail:
    LOG_LIMITED(LOG_WARN, "request body: cannot keep it: %s (temp_dir %s)", strerror(-r),
                req->cfg->temp_dir);
    req->hc->closing = req->hc->lingering = true;
    return r;
}

int http_body_next(struct colibri_request *req, struct view *out)
{
    struct conn_ctx *ctx = req->ctx;
    struct http_conn *hc = req->hc;

    *out = (struct view){.p = "", .len = 0};
    if (req->body_done || req->body_kind == BODY_NONE) {
        req->body_done = true;
        return 0;
    }
    if (req->body_kind == BODY_LENGTH && req->body_left > req->max_body)
        goto out_too_large;
    if (req->expect_closing) { /* the body will be read: no need to close for it */
        req->expect_closing = false;
        hc->closing = false;
    }
    send_continue(req);
    if (!req->hc->bs.t0_ms)
        req->hc->bs.t0_ms = conn_now_ms(ctx) | 1; /* never 0 */
    for (;;) {
        size_t avail = ctx->in_len - ctx->in_pos;
        char *p = ctx->in + ctx->in_pos;
        size_t got;
        if (req->body_kind == BODY_LENGTH) {
            got = (size_t)MIN((uint64_t)avail, req->body_left);
            ctx->in_pos += got;
            req->body_left -= got;
            req->body_done = !req->body_left;
        } else if (req->body_kind == BODY_TO_END) {
            got = avail;
            ctx->in_pos += got;
            req->body_left += got; /* what was read so far */
            if (req->body_left > req->max_body)
                goto out_too_large;
        } else {
            hc->chunked.limit = req->max_body; /* the route's, known only now */
            ssize_t used = http_chunked_decode(&hc->chunked, p, avail, &got);
            if (used < 0) {
                hc->closing = hc->lingering = true;
                return (int)used; /* -EBADMSG, -EFBIG */
            }
            ctx->in_pos += (size_t)used;
            req->body_left += got; /* what was read so far */
            if (req->body_left > req->max_body)
                goto out_too_large;
            req->body_done = hc->chunked.done;
        }
        req->hc->bs.got += got;
        if (got || req->body_done) {
            *out = (struct view){.p = p, .len = got};
            return 0;
        }
        if (http_pin_head(req) < 0)
            goto out_close;
        conn_compact(ctx);
        if (ctx->in_len == ctx->in_cap)
            goto out_bad;
        int r = body_pace(req);
        if (r)
            return r;
        if (conn_read(ctx, false) == 0) {
            if (req->body_kind != BODY_TO_END)
                goto out_bad;
            req->body_done = true; /* its transport ended it */
        }
        conn_progress(ctx);
    }

out_too_large:
    hc->closing = hc->lingering = true;
    return -EFBIG;
out_bad:
    hc->closing = hc->lingering = true;
    return -EBADMSG;
out_close:
    hc->closing = hc->lingering = true;
    return -ENOMEM;
}

void http_skip_body(struct colibri_request *req)
{
    if (req->body_done || req->body_kind == BODY_NONE || req->hc->closing)
        return;
    if ((req->head->flags & HTTP_F_EXPECT_CONTINUE) && !req->continue_sent) {
        /* the client may or may not send it now: we cannot tell */
        req->hc->closing = true;
        return;
    }
    http_body_pump(req, false);
}

/* --- the public request API ---------------------------------------------------- */

const char *colibri_method_name(enum colibri_method m)
{
#define METHOD_NAME(name) #name,
    static const char *const names[] = {COLIBRI_METHODS(METHOD_NAME)};
#undef METHOD_NAME
    return (unsigned)m < N_ELEMENTS(names) ? names[m] : NULL;
}

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
const char *colibri_req_protocol(const struct colibri_request *req)
{
    if (req->head->flags & HTTP_F_H2)
        return "HTTP/2.0";
    return req->head->version_minor ? "HTTP/1.1" : "HTTP/1.0";
}

/* The decoded value of name in an urlencoded list ("a=1&b=x+y"), in the
 * request's arena. */
static bool urlencoded_field(struct colibri_request *req, struct view list, const char *name,
                             struct colibri_str *value)
{
    struct view raw;
    if (!http_query_find(list, name, strlen(name), &raw))
        return false;
    char *p = arena_alloc(&req->hc->arena, raw.len + 1);
    if (!p)
        return false;
    ssize_t n = http_percent_decode(p, raw.p, raw.len, true);
    if (n < 0)
        return false;
    p[n] = '\0';
    *value = (struct colibri_str){.p = p, .len = (size_t)n};
    return true;
}

bool colibri_req_query(struct colibri_request *req, const char *name, struct colibri_str *value)
{
    return urlencoded_field(req, req->head->query, name, value);
}

bool colibri_req_form(struct colibri_request *req, const char *name, struct colibri_str *value)
{
    static const char form[] = "application/x-www-form-urlencoded";
    struct view type;
    if (!(req->needs & COLIBRI_NEED_BODY) || !req->body_done ||
        !http_header_find(req->head->headers, "Content-Type", 12, &type) ||
        !http_media_type_is(type, form, sizeof(form) - 1))
        return false;
    struct colibri_str body;
    return !colibri_req_body(req, &body) && body.len &&
           urlencoded_field(req, (struct view){.p = body.p, .len = body.len}, name, value);
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
    /* the server read it before the handler ran, or it was not asked for */
    if (!(req->needs & COLIBRI_NEED_BODY))
        return 500;
    int r = http_body_pump(req, true);
    if (r)
        return http_status_of(r);
    if (req->hc->bs.spooled) {
        /* mapped, not read: a page costs memory once the handler reads it */
        if (!req->hc->bs.map) {
            void *map = mmap(NULL, req->hc->bs.file_len, PROT_READ, MAP_SHARED, req->hc->bs.fd, 0);
            if (map == MAP_FAILED) {
                LOG_LIMITED(LOG_WARN, "request body: mmap: %s", strerror(errno));
                return 500;
            }
            req->hc->bs.map = map;
        }
        *body = (struct colibri_str){.p = req->hc->bs.map, .len = req->hc->bs.file_len};
        return 0;
    }
    *body = (struct colibri_str){.p = req->hc->reqbody.buf ? req->hc->reqbody.buf : "",
                                 .len = req->hc->reqbody.len};
    return 0;
}

int colibri_req_body_fd(struct colibri_request *req)
{
    if (!(req->needs & COLIBRI_NEED_BODY) || http_body_pump(req, true))
        return -1;
    return req->hc->bs.spooled ? req->hc->bs.fd : -1;
}

bool colibri_req_is_secure(const struct colibri_request *req)
{
    return conn_is_secure(req->ctx);
}

int http_peer_str(const struct conn_peer *peer, char *buf, size_t len)
{
    if (peer->family != AF_INET && peer->family != AF_INET6)
        return -ENOTCONN;
    if (peer->family == AF_INET && len >= 16) {
        /* the dotted quad by hand: inet_ntop's sprintf costs ~1,700
         * instructions, and a gateway asks for it on every request */
        char *o = buf;
        for (int i = 0; i < 4; i++) {
            unsigned b = peer->addr[i];
            if (b >= 100)
                *o++ = (char)('0' + b / 100);
            if (b >= 10)
                *o++ = (char)('0' + b / 10 % 10);
            *o++ = (char)('0' + b % 10);
            *o++ = i < 3 ? '.' : '\0';
        }
        return 0;
    }
    if (!inet_ntop(peer->family, peer->addr, buf, (socklen_t)len))
        return -errno;
    return 0;
}

int colibri_req_remote_addr(const struct colibri_request *req, char *buf, size_t len)
{
    /* as the runtime recorded it at accept(), or as a PROXY header named
     * it; unknown (no table of peers, or not an IP peer) is -ENOTCONN */
    return http_peer_str(conn_peer_of(req->ctx), buf, len);
}

int colibri_defer(struct colibri_request *req, void (*fn)(void *), void *arg)
{
    return coro_defer(req->ctx->coro, fn, arg);
}

const struct conn_peer *http_local_addr(struct colibri_request *req)
{
    struct http_conn *hc = req->hc;
    if (!hc->local_known) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        hc->local = (struct conn_peer){0};
        if (!getsockname(req->ctx->fd, (struct sockaddr *)&ss, &sl))
            hc->local = conn_peer_from(&ss);
        hc->local_known = true;
    }
    return &hc->local;
}
