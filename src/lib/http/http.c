/* http.c - the life of an HTTP connection, as the runtime's protocol:
 * read, parse, route, call the handler, answer; again while the client
 * keeps the connection alive and has bytes for us. When the buffer runs
 * dry, run() parks in conn_park() for the next request: the runtime may
 * take the context back meanwhile, so an idle connection holds no stack of
 * its own. */
#include "http/http.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/log.h"
#include "http/access_log.h"
#include "http/filter.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/status.h"
#include "http/uri.h"
#include "http/vhost.h"
#include "route/trie.h"
#include "rt/conn.h"
#include "tpl/tpl.h"

/* Pipelined responses are sent once this much is waiting. */
#define OUT_FLUSH_AT (64 * 1024)
/* Per-connection buffers above this size are not kept in the pool. */
#define KEEP_BUF_MAX (64 * 1024)

/* The routes of the site named host (and its access log for req), else
 * the default site's (NULL when there is none). Out of line: one site is
 * the common case. */
static __attribute__((noinline)) const struct trie *named_site(struct colibri_request *req,
                                                               struct view host)
{
    const struct http_config *cfg = req->cfg;
    const struct http_vhost *v = http_vhost_find(cfg->vhosts, cfg->n_vhosts, host);
    if (!v)
        return cfg->routes;
    req->log = v->log;
    req->hc->filters = v->filters;
    return v->routes;
}

/* SNI that named a site must name the Host's (RFC 9110 15.5.20: no
 * request for another site over one site's certificate). */
static bool sni_agrees(const struct conn_ctx *ctx, const struct http_config *cfg,
                       const struct trie *routes)
{
    const char *sni = conn_tls_server_name(ctx);
    if (!sni)
        return true;
    const struct http_vhost *v =
        http_vhost_find(cfg->vhosts, cfg->n_vhosts, (struct view){sni, strlen(sni)});
    return !v || v->routes == routes;
}

/* redirect_to_https: 308 to https://HOST[:PORT]/PATH?QUERY, the request's
 * path (decoded, normalised) and query escaped again as the redirect
 * module does, so that no byte RFC 3986 does not allow (a raw '"' or '<'
 * in the query) reaches the Location. */
static int redirect_https(struct colibri_request *req, struct colibri_response *resp, unsigned port)
{
    struct view host = req->head->host;
    /* the host without its port ("[v6]:p" keeps its brackets) */
    for (size_t i = host.len; i-- > 0;) {
        if (host.p[i] == ']')
            break;
        if (host.p[i] == ':') {
            host.len = i;
            break;
        }
    }
    if (!host.len)
        return 400;
    char base[300];
    char p[8] = "";
    if (port != 443)
        snprintf(p, sizeof(p), ":%u", port);
    int n = snprintf(base, sizeof(base), "https://%.*s%s", (int)host.len, host.p, p);
    if (n < 0 || (size_t)n >= sizeof(base))
        return 400;
    struct colibri_str path = colibri_req_path(req), q = colibri_req_query_string(req);
    if (!path.len)
        path = (struct colibri_str){"/", 1};
    char *loc = http_location(base, (size_t)n, path.p, path.len, false, q.p, q.len);
    if (!loc)
        return 503;
    int r = colibri_resp_header(resp, "Location", loc);
    free(loc);
    return r < 0 ? 500 : 308;
}

/* The site's routes by the request's host, or a status: a redirect to
 * HTTPS, 421 for a host no site has (and no default site), 421 for a
 * host another site than SNI's has. */
static __attribute__((noinline)) int
site_of(struct colibri_request *req, struct colibri_response *resp, const struct trie **routes)
{
    const struct http_config *cfg = req->cfg;
    unsigned port = cfg->redirect_https ? cfg->redirect_https[conn_listener(req->ctx)] : 0;
    if (port)
        return redirect_https(req, resp, port);
    if (!cfg->n_vhosts) {
        *routes = cfg->routes;
        return 0;
    }
    req->hc->filters = cfg->filters; /* the default site's, unless a named one answers */
    if (!(*routes = named_site(req, req->head->host)))
        return 421; /* no site of that name and no default site */
    if (req->ctx->tls && !sni_agrees(req->ctx, cfg, *routes))
        return 421; /* the certificate's site is not the Host's */
    return 0;
}

/* The site's filters before routing: rewrites, then access checks; the
 * headers phase is armed for the answer's head. 0, or a status. */
static __attribute__((noinline)) int filters_before(struct colibri_request *req,
                                                    struct colibri_response *resp,
                                                    const struct http_filters *fs)
{
    req->filtered = true;
    req->hc->filters = fs;
    req->hc->user = NULL;
    req->head_filters = fs->first[COLIBRI_PHASE_HEADERS] < fs->first[COLIBRI_PHASE_HEADERS + 1];
    int r = http_filters_before(req, resp, fs);
    if (r == -ELOOP)
        LOG_LIMITED(LOG_WARN, "\"%.*s\": more than %d internal rewrites",
                    (int)MIN(req->head->target.len, 200), req->head->target.p, HTTP_REWRITES_MAX);
    return r < 0 ? http_status_of(r) : r;
}

/* Inline in handle(), HTTP/1.1's hot path; http_dispatch() for the others. */
static inline __attribute__((always_inline)) int dispatch(struct colibri_request *req,
                                                          struct colibri_response *resp)
{
    const struct http_head *head = req->head;
    struct http_conn *hc = req->hc;

    if (head->flags & HTTP_F_ASTERISK) { /* OPTIONS * */
        if (http_allow_header(&hc->hdrs, req->cfg->methods | COLIBRI_M(COLIBRI_OPTIONS)) < 0)
            return 500;
        return 204;
    }
    int r = http_decode_path(req);
    if (r) {
        hc->closing = true; /* a malformed request: never guess at the rest */
        return http_status_of(r);
    }
    /* the site: while there is only the default site (and no listener
     * redirects), no host is looked at */
    const struct trie *routes;
    const struct http_filters *fs;
    if (likely(!req->cfg->site_by_host)) {
        routes = req->cfg->routes;
        fs = req->cfg->filters;
    } else if ((r = site_of(req, resp, &routes))) {
        return r;
    } else {
        fs = req->hc->filters;
    }
    if (unlikely(fs != NULL) && (r = filters_before(req, resp, fs)))
        return r;
    const struct http_route *route = trie_lookup_segments(routes, req->path.p, req->path.len, NULL);
    if (!route)
        return 404;
    const struct colibri_handler *h = route->handler;
    if (!(http_handler_calls(h) & COLIBRI_M(head->method))) {
        if (http_allow_header(&hc->hdrs, http_handler_methods(h)) < 0)
            return 500;
        return head->method == COLIBRI_OPTIONS ? 204 : 405;
    }
    resp->head_only = head->method == COLIBRI_HEAD;
    req->needs = h->needs;
    if (unlikely(req->body_kind != BODY_NONE)) {
        if (route->max_body)
            req->max_body = route->max_body;
        hc->bs.timeout_s = route->body_timeout_s;
        /* a body announced too large is refused before anybody reads it */
        if (req->body_kind == BODY_LENGTH && req->body_left > req->max_body &&
            (h->needs & (COLIBRI_NEED_BODY | COLIBRI_NEED_BODY_STREAM))) {
            hc->closing = hc->lingering = true;
            return 413;
        }
    }
    /* a handler that reads the body gets it whole, or never runs */
    if ((h->needs & COLIBRI_NEED_BODY) && (r = http_body_pump(req, true)))
        return http_status_of(r);
    return h->fn(req, resp, route->data);
}

int http_dispatch(struct colibri_request *req, struct colibri_response *resp)
{
    return dispatch(req, resp);
}

/* A body that waits for "100 Continue": unless the handler reads it, the
 * client may send it or not, so the connection cannot go on after the
 * answer. It is marked closing now, so that an answer the handler sends
 * before returning says "Connection: close"; reading the body lifts it
 * (request.c). */
static inline void expect_continue(struct colibri_request *req)
{
    if (unlikely(req->head->flags & HTTP_F_EXPECT_CONTINUE) && !req->hc->closing) {
        req->hc->closing = true;
        req->expect_closing = true;
    }
}

/* One answered request into the worker's counters (metrics on): a few
 * loads and stores, inline. */
static inline __attribute__((always_inline)) void
count(const struct colibri_request *req, const struct colibri_response *resp, bool h1)
{
    struct http_metrics *m = &req->hw->metrics;
    unsigned st = (unsigned)resp->final_status - 100;
    unsigned cls = st < 500 ? st / 100 : 4;
    unsigned site = unlikely(req->cfg->n_vhosts) ? http_metrics_site(req) : 0;
    http_metrics_bump(&m->requests[site][cls][req->head->method], 1);
    uint64_t in = req->head_len;
    if (unlikely(req->body_kind != BODY_NONE))
        in += req->body_kind == BODY_LENGTH ? (uint64_t)req->head->content_length - req->body_left
                                            : req->body_left;
    http_metrics_bump(&m->bytes_in, in);
    http_metrics_bump(&m->bytes_out, resp->body_bytes);
    uint64_t ns = conn_worker_of(req->ctx)->mono_ns - req->t0_ns;
    http_metrics_bump(&m->duration[http_metrics_bucket(ns)], 1);
    http_metrics_bump(&m->duration_ns, ns);
    if (!h1) /* an HTTP/2 stream: its connection is counted as one */
        return;
    if (req->hc->counted) {
        http_metrics_bump(&m->reused, 1);
    } else {
        req->hc->counted = true;
        http_metrics_bump(&m->connections, 1);
    }
}

void http_metrics_count(const struct colibri_request *req, const struct colibri_response *resp)
{
    count(req, resp, false);
}

/* One request, head already parsed. Returns false when the connection
 * must close. */
/* Whether the comma-separated list v names token (case-insensitive). */
static bool list_has(struct view v, const char *token)
{
    size_t tl = strlen(token), i = 0;
    while (i < v.len) {
        while (i < v.len && (v.p[i] == ',' || v.p[i] == ' ' || v.p[i] == '\t'))
            i++;
        size_t start = i;
        while (i < v.len && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t')
            i++;
        if (i - start == tl && !strncasecmp(v.p + start, token, tl))
            return true;
    }
    return false;
}

/* Whether a request with Connection: upgrade asks for h2c where its
 * listener takes it (h2c_upgrade = true): Upgrade: h2c, one
 * HTTP2-Settings, Connection naming it, and no body (RFC 7540 3.2 lets a
 * server ignore the upgrade: a request with a body is served as HTTP/1.1,
 * so that its body never has to be read before the switch). */
static __attribute__((noinline)) bool h2c_upgrade_wanted(struct conn_ctx *ctx,
                                                         const struct http_config *cfg,
                                                         const struct http_head *head)
{
    unsigned i = conn_listener(ctx);
    struct view v;
    if (!(head->flags & HTTP_F_CONN_UPGRADE) || !cfg->h2c_upgrade || !cfg->h2_upgrade ||
        i >= cfg->n_proxy_protocol || !cfg->h2c_upgrade[i] || ctx->tls ||
        head->version_minor != 1 || (head->flags & HTTP_F_CHUNKED) || head->content_length > 0)
        return false;
    if (!http_header_find(head->headers, "Upgrade", 7, &v) || !list_has(v, "h2c"))
        return false;
    if (!http_header_find(head->headers, "Connection", 10, &v) || !list_has(v, "HTTP2-Settings"))
        return false;
    return http_header_find_sole(head->headers, "HTTP2-Settings", 14, &v);
}

static bool handle(struct conn_ctx *ctx, struct http_conn *hc, struct http_worker *hw,
                   struct http_head *head, size_t head_len)
{
    struct colibri_request req = {
        .ctx = ctx,
        .hc = hc,
        .hw = hw,
        .cfg = hw->cfg,
        .head = head,
        .head_at = ctx->in + ctx->in_pos,
        .head_len = head_len,
        .max_body = hw->cfg->max_body,
        .log = hw->cfg->site_log,
        .t0_ns = conn_worker_of(ctx)->mono_ns,
    };
    struct colibri_response resp = {.req = &req, .mime = "text/plain"};
    hc->resp = &resp; /* for abandon(): read only while a handler waits */

    strbuf_reset(&hc->body);
    strbuf_reset(&hc->hdrs);
    strbuf_reset(&hc->reqbody);
    ctx->in_pos += head_len;

    bool keep_alive = head->version_minor ? !(head->flags & HTTP_F_CONN_CLOSE)
                                          : (head->flags & HTTP_F_CONN_KEEP_ALIVE);
    if (!keep_alive)
        hc->closing = true;
    /* one test for the rare ones (the same count of instructions as
     * HTTP_F_CHUNKED's alone): a chunked body, a Connection: upgrade */
    if (unlikely(head->flags & (HTTP_F_CHUNKED | HTTP_F_CONN_UPGRADE))) {
        if (h2c_upgrade_wanted(ctx, hw->cfg, head)) {
            hc->resp = NULL;
            hc->h2c_up = true;
            return false;
        }
        if (head->flags & HTTP_F_CHUNKED) {
            req.body_kind = BODY_CHUNKED;
            hc->chunked = (struct http_chunked){0};
            hc->bs = (struct http_body_state){0};
            expect_continue(&req);
        } else if (head->content_length > 0) {
            req.body_kind = BODY_LENGTH;
            req.body_left = (uint64_t)head->content_length;
            hc->bs = (struct http_body_state){0};
            expect_continue(&req);
        }
    } else if (head->content_length > 0) {
        req.body_kind = BODY_LENGTH;
        req.body_left = (uint64_t)head->content_length;
        hc->bs = (struct http_body_state){0};
        expect_continue(&req);
    }

    unsigned mark = coro_defer_mark(ctx->coro);
    int status = dispatch(&req, &resp);
    coro_defer_run_to(ctx->coro, mark);
    if (req.body_kind != BODY_NONE) /* most requests have none: no call */
        http_skip_body(&req);

    if (resp.streaming) {
        /* the last chunk; without it (out of memory) the close tells the
         * client the body was cut short */
        if (resp.chunked && !resp.head_only && strbuf_append(&ctx->out, "0\r\n\r\n", 5) < 0)
            hc->closing = true;
    } else if (!resp.sent) {
        http_write_response(&req, &resp, status);
    }
    if (unlikely(resp.final_status >= 500))
        LOG_LIMITED(LOG_WARN, "\"%.*s %.*s\": answered %d", (int)head->method_str.len,
                    head->method_str.p, (int)MIN(head->target.len, 200), head->target.p,
                    resp.final_status);
    if (req.log)
        http_access_log(&req, &resp);
    if (unlikely(atomic_load_explicit(&http_metrics_on, memory_order_relaxed)))
        count(&req, &resp, true);
    hc->resp = NULL; /* logged: nothing left for abandon() */
    if (ctx->out.len >= OUT_FLUSH_AT)
        conn_flush(ctx);
    conn_progress(ctx); /* the next request gets its own timeout */
    /* emptied after, not before, a request: between requests the arena
     * holds one block at most, also while the connection is parked */
    arena_reset(&hc->arena);
    return !hc->closing;
}

/* Parses what is buffered: the head's length, 0 when it is incomplete (the
 * bytes moved to the buffer's start, to be read after), or -errno. */
static inline ssize_t parse_buffered(struct conn_ctx *ctx, const struct http_limits *limits,
                                     struct http_head *head)
{
    ssize_t r = http_parse_head(ctx->in + ctx->in_pos, ctx->in_len - ctx->in_pos, limits, head);
    if (r == 0)
        conn_compact(ctx);
    return r;
}

/* Parses the next request head, reading as needed. Returns its length, 0
 * when the connection should go idle or close (hc->closing), or -errno
 * (parser.h). */
static ssize_t next_head(struct conn_ctx *ctx, struct http_conn *hc,
                         const struct http_limits *limits, struct http_head *head)
{
    /* what a timeout finds from here on deserves a 408 when bytes of a
     * request are buffered */
    bool idle = ctx->in_len == ctx->in_pos;
    if (!idle) {
        hc->mid_request = true;
        ssize_t r = parse_buffered(ctx, limits, head);
        if (r != 0)
            return r;
    } else {
        hc->mid_request = false;
        ctx->in_pos = ctx->in_len = 0;
    }
    for (;;) {
        /* responses to what we have leave before we wait for more */
        conn_flush(ctx);
        if (idle && !ctx->last_read_full)
            return 0;
        if (ctx->in_len == ctx->in_cap)
            return -EMSGSIZE;
        ssize_t n = conn_read(ctx, idle);
        if (n == -EAGAIN)
            return 0;
        if (n == 0) {
            hc->closing = true;
            return 0;
        }
        size_t avail = ctx->in_len - ctx->in_pos;
        idle = false;
        hc->mid_request = true;
        /* A head ends with a line feed: bytes without one cannot complete
         * it, so a head trickled in tiny pieces is not rescanned from its
         * start for every piece (the size limit is still checked). The
         * first bytes of a request are always looked at: what cannot start
         * one (a TLS hello, noise) is answered now, not when the request
         * timeout runs out; tested first, as it is the common case and
         * spares the memchr(). */
        if (avail == (size_t)n || avail > limits->max_head ||
            memchr(ctx->in + ctx->in_len - n, '\n', (size_t)n)) {
            ssize_t r = parse_buffered(ctx, limits, head);
            if (r != 0)
                return r;
        }
    }
}

/* Whether the connection may wait for its next request holding its
 * buffers as they are: the limits recycle() applies (the arena is empty
 * between requests, see handle()). */
static bool parkable(const struct http_conn *hc)
{
    return hc->body.cap <= KEEP_BUF_MAX && hc->hdrs.cap <= KEEP_BUF_MAX &&
           hc->reqbody.cap <= KEEP_BUF_MAX;
}

/* Whether a 505 is the HTTP/2 preface that starts an h2c connection
 * (prior knowledge): the connection's first bytes, on a plain listener
 * that allows HTTP/2. */
static __attribute__((noinline)) bool h2c_starts(struct conn_ctx *ctx,
                                                 const struct http_config *cfg, bool first)
{
    static const char line[] = "PRI * HTTP/2.0\r\n";
    unsigned i = conn_listener(ctx);
    return first && cfg->h2_run && !ctx->tls && ctx->in_len - ctx->in_pos >= sizeof(line) - 1 &&
           !memcmp(ctx->in + ctx->in_pos, line, sizeof(line) - 1) &&
           !(cfg->http2_off && i < cfg->n_proxy_protocol && cfg->http2_off[i]);
}

static enum conn_verdict run(struct conn_ctx *ctx)
{
    struct http_conn *hc = conn_state(ctx);
    struct http_worker *hw = conn_worker_state(ctx);
    hc->closing = hc->lingering = hc->mid_request = hc->after_proxy_hdr = false;
    hc->resp = NULL;
    void *rest;
    if (ctx->fresh)
        hc->counted = hc->local_known = false;
    else if (unlikely((rest = conn_rest_take(ctx)) != NULL))
        return hw->cfg->h2_resume(ctx, rest); /* HTTP/2 at rest */
    bool first = true;                        /* no request came in this run yet */
    /* HTTP/2 over TLS: ALPN chose it in the handshake that just ended */
    if (unlikely(ctx->tls != NULL) && ctx->fresh && hw->cfg->h2_run && conn_tls_alpn_is(ctx, "h2"))
        return hw->cfg->h2_run(ctx);

    for (;;) {
        struct http_head head;
        /* hw->cfg is read anew for every request: a reload may replace it
         * while the coroutine is parked */
        ssize_t r = next_head(ctx, hc, &hw->cfg->limits, &head);
        if (r == 0) {
            /* idle: wait for the next request keeping the coroutine, unless
             * a buffer grew too big to keep (or the runtime says no) */
            if (hc->closing || !parkable(hc) || !conn_park(ctx))
                break;
            continue;
        }
        if (r < 0) {
            if (r == -EPROTONOSUPPORT && h2c_starts(ctx, hw->cfg, first))
                return hw->cfg->h2_run(ctx);
            http_send_error(ctx, http_status_of((int)r));
            break;
        }
        first = false;
        if (!handle(ctx, hc, hw, &head, (size_t)r)) {
            if (unlikely(hc->h2c_up)) { /* 101, then HTTP/2 with this as stream 1 */
                hc->h2c_up = false;
                return hw->cfg->h2_upgrade(ctx, &head);
            }
            break;
        }
    }
    hc->mid_request = false;
    if (!hc->closing)
        return CONN_KEEP;
    return hc->lingering ? CONN_LINGER : CONN_CLOSE;
}

/* A request still incomplete when its time ran out: a 408, best effort and
 * without blocking (the client is too slow to wait for). */
static void on_timeout(struct conn_ctx *ctx)
{
    const struct http_conn *hc = conn_state(ctx);
    if (!hc->mid_request)
        return;
    char buf[160];
    struct view line = http_status_line(408);
    static const char tail[] = "Content-Length: 0\r\nConnection: close\r\n\r\n";
    size_t n = line.len;
    memcpy(buf, line.p, line.len);
    memcpy(buf + n, http_date_header(conn_worker_state(ctx), conn_wall_time(ctx)),
           HTTP_DATE_HDR_LEN);
    n += HTTP_DATE_HDR_LEN;
    memcpy(buf + n, tail, sizeof(tail) - 1);
    n += sizeof(tail) - 1;
    /* best effort, without waiting: the connection closes after it */
    conn_try_write(ctx, buf, n);
}

/* The runtime closes the connection in the middle of a request (the
 * client hung up, a write failed, a timeout, a stop's deadline; the
 * coroutine is then unwound): the request still gets its access log line,
 * with the status sent and the body bytes that went out, or 499 when
 * nothing was sent (nginx's "client closed request"). A stop says at info
 * level what it cut off. */
static void abandon(struct conn_ctx *ctx, enum conn_cut why)
{
    struct http_conn *hc = conn_state(ctx);
    struct colibri_response *resp = hc->resp;
    if (!resp) {
        if (why == CONN_CUT_STOP && hc->mid_request)
            http_log_cut(ctx, NULL);
        return;
    }
    hc->resp = NULL;
    if (!resp->final_status)
        resp->final_status = 499;
    else /* what the write under way left unsent was the end of the body */
        resp->body_bytes -= MIN(resp->body_bytes, (uint64_t)ctx->unsent);
    resp->interrupted = true;
    if (why == CONN_CUT_STOP)
        http_log_cut(ctx, resp);
    if (resp->req->log)
        http_access_log(resp->req, resp);
}

static bool between_requests(const struct conn_ctx *ctx)
{
    const struct http_conn *hc = conn_state(ctx);
    return !hc->mid_request && !hc->after_proxy_hdr;
}

/* Buffers that grew beyond KEEP_BUF_MAX are freed; the others need no
 * reset here, because every request (and http_send_error) resets them
 * before use. */
static void recycle(struct conn_ctx *ctx)
{
    struct http_conn *hc = conn_state(ctx);
    if (hc->body.cap > KEEP_BUF_MAX)
        strbuf_free(&hc->body);
    if (hc->hdrs.cap > KEEP_BUF_MAX)
        strbuf_free(&hc->hdrs);
    if (hc->reqbody.cap > KEEP_BUF_MAX)
        strbuf_free(&hc->reqbody);
    arena_reset(&hc->arena);
}

static void destroy(struct conn_ctx *ctx)
{
    struct http_conn *hc = conn_state(ctx);
    strbuf_free(&hc->body);
    strbuf_free(&hc->hdrs);
    strbuf_free(&hc->reqbody);
    arena_free(&hc->arena);
}

/* The worker's once-a-second work: the access log lines it buffered. */
static void tick(void *worker_state)
{
    struct http_worker *hw = worker_state;
    http_access_log_flush(hw);
#ifdef __GLIBC__
    if (hw->trim_wanted) {
        hw->trim_wanted = false;
        malloc_trim(0);
    }
#endif
}

/* The stack under HTTP, per listener: a PROXY header first where the
 * listener wants one (http_proxy_step), then TLS where it speaks it. */
static bool preamble(struct conn_ctx *ctx)
{
    const struct http_worker *hw = conn_worker_state(ctx);
    /* the table exists only when some listener wants PROXY headers */
    if (unlikely(hw->cfg->proxy_protocol != NULL))
        return http_proxy_step(ctx); /* false: not a word to whoever it is */
    return true;
}

static struct tls_server *tls_for(const struct conn_ctx *ctx)
{
    const struct http_worker *hw = conn_worker_state(ctx);
    const struct http_config *cfg = hw->cfg;
    unsigned i = conn_listener(ctx);
    return cfg->tls_on && i < cfg->n_proxy_protocol && cfg->tls_on[i] ? cfg->tls : NULL;
}

/* A plain request on a TLS listener: a 400 in plaintext that says so (as
 * nginx does), rather than a TLS alert a browser user never sees. */
static enum conn_verdict not_tls(struct conn_ctx *ctx)
{
    static const char body[] = "The plain HTTP request was sent to an HTTPS port.\n";
    char head[256];
    struct view line = http_status_line(400);
    int n = snprintf(head, sizeof(head),
                     "%.*sContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     (int)line.len, line.p, sizeof(body) - 1);
    if (n > 0 && (size_t)n < sizeof(head) && strbuf_append(&ctx->out, head, (size_t)n) == 0)
        strbuf_append(&ctx->out, body, sizeof(body) - 1);
    return CONN_LINGER;
}

/* ALPN: h2 first where the listener allows HTTP/2, then http/1.1. */
static const char *alpn(const struct conn_ctx *ctx)
{
    const struct http_worker *hw = conn_worker_state(ctx);
    const struct http_config *cfg = hw->cfg;
    unsigned i = conn_listener(ctx);
    if (cfg->h2_run && !(cfg->http2_off && i < cfg->n_proxy_protocol && cfg->http2_off[i]))
        return "\x02h2\x08http/1.1";
    return "\x08http/1.1";
}

/* An HTTP/2 connection closed at rest, without a context. */
static void drop_rest(void *worker_state, void *state)
{
    struct http_worker *hw = worker_state;
    hw->cfg->h2_drop(hw, state);
}

const struct conn_proto http_proto = {
    .drop_rest = drop_rest,
    .alpn = alpn,
    .state_size = sizeof(struct http_conn),
    .run = run,
    .preamble = preamble,
    .tls_for = tls_for,
    .not_tls = not_tls,
    .on_timeout = on_timeout,
    .between_requests = between_requests,
    .abandon = abandon,
    .recycle = recycle,
    .destroy = destroy,
    .tick = tick,
};

struct http_worker *http_worker_new(const struct http_config *cfg)
{
    struct http_worker *hw = ALLOC_INIT(struct http_worker, {.cfg = cfg,
                                                             .date_time = -1,
                                                             .ok_date_time = -1,
                                                             .ok_head_time = -1,
                                                             .log_time = -1,
                                                             .log_iso_time = -1,
                                                             .log_peer = {.family = 0xffff}});
    if (hw && !(hw->scratch = tpl_scratch_new())) {
        free(hw);
        hw = NULL;
    }
    if (hw)
        http_metrics_register(hw);
    return hw;
}

void http_worker_set_config(struct http_worker *hw, const struct http_config *cfg)
{
    http_access_log_flush(hw); /* the lines of the old config's sites go first */
    hw->cfg = cfg;
    hw->ok_head_time = -1;
}

void http_worker_flush_log(struct http_worker *hw)
{
    http_access_log_flush(hw);
}

void http_worker_free(struct http_worker *hw)
{
    if (!hw)
        return;
    http_metrics_unregister(hw);
    for (unsigned i = 0; i < HTTP_LOG_FILES_MAX; i++)
        strbuf_free(&hw->log[i].b);
    tpl_scratch_free(hw->scratch);
    free(hw);
}
