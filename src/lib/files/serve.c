/* serve.c - serve_files answering a request from a cache entry. */
#include "files/files.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "http/cond.h"
#include "http/date.h"
#include "http/range.h"
#include "http/request.h"
#include "http/uri.h"
#include "rt/worker.h"

static void release(void *p)
{
    struct fentry *e = p;
    cache_put(e->f->cache, &e->base);
}

static int status_for(int err)
{
    switch (err) {
    case -EACCES:
    case -EPERM:
        return 403;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        return 503;
    case -ENOENT:
    case -ENOTDIR:
    case -ELOOP:
    case -EXDEV:
    case -ENAMETOOLONG:
    case -EINVAL:
    case -ENXIO: /* a socket, or a device without its driver */
    case -ENODEV:
        return 404;
    default:
        return 500;
    }
}

/* "/dir" -> "/dir/", query kept. Built from the decoded, normalised path
 * (re-encoded), never from the raw target: "//evil.example/%2e%2e/dir" must
 * not become a protocol-relative Location. */
static int redirect(struct colibri_request *req, struct colibri_response *resp)
{
    struct colibri_str path = colibri_req_path(req), q = colibri_req_query_string(req);
    char *loc = http_location("", 0, path.p, path.len, true, q.p, q.len);
    if (!loc)
        return 500;
    int r = colibri_resp_header(resp, "Location", loc);
    free(loc);
    return r < 0 ? 400 : 301;
}

static void add_expires(const struct files *f, struct colibri_response *resp)
{
    if (f->expires_s < 0)
        return;
    char line[HTTP_DATE_LEN + 11] = "Expires: ";
    /* from the clock the Date header is written with, so Expires - Date
     * is the configured time exactly, also across a second's start */
    http_date_format((int64_t)conn_wall_time(resp->req->ctx) + f->expires_s, line + 9);
    memcpy(line + 9 + HTTP_DATE_LEN, "\r\n", 2);
    colibri_resp_header_lines(resp, line, sizeof(line));
}

static int multipart(struct colibri_response *resp, const struct fentry *e, const struct variant *v,
                     const struct http_range *r, unsigned n)
{
    const struct files *f = e->f;
    struct strbuf body = {0};
    int status = 206;
    /* reserved once, so none of the appends below can fail */
    size_t total = 64 + strlen(f->boundary);
    for (unsigned i = 0; i < n; i++)
        total += 64 + strlen(f->boundary) + strlen(e->ctype) + HTTP_CONTENT_RANGE_MAX +
                 (size_t)(r[i].last - r[i].first + 1);
    if (strbuf_reserve(&body, total) < 0)
        return 503;
    for (unsigned i = 0; i < n; i++) {
        char cr[HTTP_CONTENT_RANGE_MAX];
        strbuf_append_str(&body, "\r\n--");
        strbuf_append_str(&body, f->boundary);
        strbuf_append_str(&body, "\r\nContent-Type: ");
        strbuf_append_str(&body, e->ctype);
        strbuf_append(&body, "\r\n", 2);
        strbuf_append(&body, cr, http_content_range(cr, (int64_t)r[i].first, r[i].last, v->size));
        strbuf_append(&body, "\r\n", 2);
        size_t len = (size_t)(r[i].last - r[i].first + 1);
        if (v->body) {
            strbuf_append(&body, v->body->data + r[i].first, len);
        } else {
            if (pread_full(v->fd, body.buf + body.len, len, (off_t)r[i].first) < 0) {
                status = 500;
                goto out_free;
            }
            body.len += len;
            body.buf[body.len] = '\0';
        }
    }
    strbuf_append_str(&body, "\r\n--");
    strbuf_append_str(&body, f->boundary);
    strbuf_append_str(&body, "--\r\n");
    colibri_resp_set_type(resp, f->multipart);
    colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
    add_expires(f, resp);
    if (colibri_resp_append(resp, body.buf, body.len) < 0)
        status = 503;
out_free:
    strbuf_free(&body);
    return status;
}

static int send_variant(struct colibri_response *resp, const struct fentry *e,
                        const struct variant *v, int status, uint64_t off, uint64_t len)
{
    if (v->body)
        return colibri_resp_send_static(resp, status, e->ctype, v->body->data + off, len);
    return colibri_resp_sendfile(resp, status, e->ctype, v->fd, (off_t)off, len);
}

/* The whole of v with a 200. The entry's lines go into the head as they
 * are, not staged in the header buffer first: send_variant() writes the
 * head now, while the entry is held. Inline: files_serve() answers most
 * requests with it. */
static inline __attribute__((always_inline)) int
send_whole(struct colibri_response *resp, const struct fentry *e, const struct variant *v)
{
    resp->lines = (struct view){.p = e->hdrs + v->hdr_off, .len = v->hdr_len};
    add_expires(e->f, resp);
    int status = send_variant(resp, e, v, 200, 0, v->size);
    resp->lines = (struct view){0}; /* a later head (an error) must not use them */
    return status;
}

static int serve_file(struct colibri_request *req, struct colibri_response *resp,
                      const struct fentry *e)
{
    const struct files *f = e->f;
    struct http_conds c;
    if (req->head->flags & HTTP_F_FILE_FIELDS) {
        http_conds_scan(req->head->headers, &c);
    } else { /* the parser saw none of the fields: no second pass */
        c.n_ae = 0;
        c.has_if_match = c.has_inm = c.has_ims = c.has_ius = c.has_range = c.has_if_range = false;
    }

    /* which representation: compressed ones only when a range is not asked for */
    int coding = HTTP_CODING_IDENTITY;
    /* without Accept-Encoding only identity is acceptable: no negotiation
     * when the entry has it */
    bool identity_only = !c.n_ae && (e->avail & (1u << HTTP_CODING_IDENTITY));
    if (e->avail != 1u && !identity_only) {
        if (!c.has_range) {
            struct http_accept_encoding ae;
            http_accept_encoding_begin(&ae);
            for (unsigned i = 0; i < c.n_ae; i++)
                http_accept_encoding_add(&ae, c.accept_encoding[i].p, c.accept_encoding[i].len);
            if (!c.n_ae) /* no field: identity only */
                ae.q[HTTP_CODING_IDENTITY] = 1000, ae.explicit_q = 1u << HTTP_CODING_IDENTITY;
            http_accept_encoding_end(&ae);
            uint64_t sizes[HTTP_CODING_COUNT];
            for (int i = 0; i < HTTP_CODING_COUNT; i++)
                sizes[i] = e->v[i].size;
            coding = http_accept_encoding_choose(&ae, e->avail, sizes);
            if (coding < 0) {
                colibri_resp_header_lines(resp, "Vary: Accept-Encoding\r\n", 23);
                return 406;
            }
        }
    }
    const struct variant *v = &e->v[coding];

    /* a listing has no modification time a client could have seen */
    int64_t mtime = e->listing ? -1 : e->mtime;
    int pre = http_preconditions(&c, colibri_req_method(req), v->etag, v->etag_len, mtime);
    if (pre == 412)
        return 412;
    if (pre == 304) {
        colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
        add_expires(f, resp);
        return 304;
    }

    if (c.has_range && colibri_req_method(req) == COLIBRI_GET) {
        bool fresh = http_if_range(&c, v->etag, v->etag_len, mtime);
        struct http_range r[MAX_RANGES];
        unsigned n = 0;
        enum http_range_result res =
            fresh ? http_range_parse(c.range.p, c.range.len, v->size, r, MAX_RANGES, &n)
                  : HTTP_RANGE_IGNORE;
        if (res == HTTP_RANGE_UNSATISFIABLE) {
            char cr[HTTP_CONTENT_RANGE_MAX];
            colibri_resp_header_lines(resp, cr, http_content_range(cr, -1, 0, v->size));
            return 416;
        }
        if (res == HTTP_RANGE_OK && n == 1) {
            char cr[HTTP_CONTENT_RANGE_MAX];
            colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
            colibri_resp_header_lines(
                resp, cr, http_content_range(cr, (int64_t)r[0].first, r[0].last, v->size));
            add_expires(f, resp);
            return send_variant(resp, e, v, 206, r[0].first, r[0].last - r[0].first + 1);
        }
        if (res == HTTP_RANGE_OK) {
            uint64_t total = 0;
            for (unsigned i = 0; i < n; i++)
                total += r[i].last - r[i].first + 1;
            if (total <= MULTIPART_MAX)
                return multipart(resp, e, v, r, n);
        }
    }
    return send_whole(resp, e, v);
}

int files_serve(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct files *f = data;
    struct view path = req->path;
    if (path.len < f->prefix_len)
        return 404;
    const char *rel = path.p + f->prefix_len;
    size_t len = path.len - f->prefix_len;
    if (!f->prefix_slash) {
        if (!len) /* "/static" of "serve_files /static": the root wants its slash */
            return redirect(req, resp);
        if (rel[0] != '/')
            return 404; /* "/staticx" is not below "/static" */
    }
    while (len && rel[0] == '/')
        rel++, len--;

    /* The names refused (a NUL, a backslash, longer than a path: 404) are
     * refused by entry_create(), on the miss: no entry has such a key. The
     * clock is the worker's, read at its wake-up. */
    int err = -EIO;
    struct cache_entry *ce = cache_get_at(f->cache, rel, len, conn_now_ms(req->ctx), &err);
    if (!ce) {
        int status = status_for(err);
        if (status >= 500) /* the server's trouble, not the client's */
            LOG_LIMITED(LOG_ERROR, "serve_files: %.*s: %s", (int)MIN(len, 200), rel,
                        strerror(-err));
        return status;
    }
    struct fentry *e = (struct fentry *)ce;
    /* held until the handler returns, or the connection dies while the
     * answer's write waits: colibri_defer(), with its inline fast path
     * (coro.h) instead of a call */
    if (coro_defer(req->ctx->coro, release, e) < 0)
        return 503; /* released already */
    if (e->kind == FE_REDIRECT)
        return redirect(req, resp);
    /* none of If-*, Range, Accept-Encoding (the parser saw none of their
     * names): the whole identity representation, nothing to evaluate */
    if (!(req->head->flags & HTTP_F_FILE_FIELDS) && (e->avail & (1u << HTTP_CODING_IDENTITY)))
        return send_whole(resp, e, &e->v[HTTP_CODING_IDENTITY]);
    return serve_file(req, resp, e);
}
