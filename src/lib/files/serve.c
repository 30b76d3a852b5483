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
#include "rt/conn.h"

void files_release_entry(void *p)
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

/* 0, or -ENOMEM: the answer would go without its header (a 500 then). */
static int add_expires(const struct files *f, struct colibri_response *resp)
{
    if (f->expires_s < 0)
        return 0;
    char line[HTTP_DATE_LEN + 11] = "Expires: ";
    /* from the clock the Date header is written with, so Expires - Date
     * is the configured time exactly, also across a second's start */
    http_date_format((int64_t)conn_wall_time(resp->req->ctx) + f->expires_s, line + 9);
    memcpy(line + 9 + HTTP_DATE_LEN, "\r\n", 2);
    return colibri_resp_header_lines(resp, line, sizeof(line));
}

/* A part's head: "\r\n--BOUNDARY\r\nContent-Type: T\r\nContent-Range: ...\r\n\r\n"
 * into ctx->out (coro_abort() when out of memory, as for any head), or
 * only its length when out is NULL. */
static size_t part_head(struct strbuf *out, const struct fentry *e, const struct files_variant *v,
                        const struct http_range *r)
{
    const char *b = e->f->boundary;
    char cr[HTTP_CONTENT_RANGE_MAX];
    size_t crl = http_content_range(cr, (int64_t)r->first, r->last, v->size);
    size_t bl = strlen(b), tl = strlen(e->ctype);
    size_t n = 4 + bl + 16 + tl + 2 + crl + 2;
    if (!out)
        return n;
    if (strbuf_reserve(out, n) < 0)
        return 0;
    char *p = out->buf + out->len;
    memcpy(p, "\r\n--", 4), p += 4;
    memcpy(p, b, bl), p += bl;
    memcpy(p, "\r\nContent-Type: ", 16), p += 16;
    memcpy(p, e->ctype, tl), p += tl;
    memcpy(p, "\r\n", 2), p += 2;
    memcpy(p, cr, crl), p += crl; /* ends with its CRLF */
    memcpy(p, "\r\n", 2);
    out->len += n;
    out->buf[out->len] = '\0';
    return n;
}

/* Parts up to this size are copied behind their head (one write for many
 * small parts); larger ones leave on their own (sendfile, or a writev from
 * the cached bytes). */
#define PART_COPY_MAX (16 * 1024)
/* What collects in ctx->out before it is sent. */
#define PARTS_FLUSH_AT (64 * 1024)

/* A multipart/byteranges answer (RFC 9110 §14.6), sent part by part as
 * the client takes it: the head with the length of the whole, then each
 * part's head and bytes, then the closing delimiter. Nothing is built
 * whole: a client that does not read holds ctx->out and a sendfile() in
 * progress, as for a single range. The bytes are the entry's, which
 * files_serve() holds until the handler returns. */
static int multipart(struct colibri_response *resp, const struct fentry *e,
                     const struct files_variant *v, const struct http_range *r, unsigned n)
{
    const struct files *f = e->f;
    struct conn_ctx *ctx = resp->req->ctx;
    struct strbuf *out = &ctx->out;
    size_t bl = strlen(f->boundary);
    uint64_t total = 4 + bl + 4; /* "\r\n--" BOUNDARY "--\r\n" */
    for (unsigned i = 0; i < n; i++)
        total += part_head(NULL, e, v, &r[i]) + (r[i].last - r[i].first + 1);
    colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
    add_expires(f, resp);
    if (!http_answer_head(resp, 206, f->multipart, total))
        return 206;
    for (unsigned i = 0; i < n; i++) {
        if (!part_head(out, e, v, &r[i]))
            coro_abort(ctx->coro);
        size_t len = (size_t)(r[i].last - r[i].first + 1);
        if (len <= PART_COPY_MAX) {
            if (strbuf_reserve(out, len) < 0)
                coro_abort(ctx->coro);
            if (v->body)
                memcpy(out->buf + out->len, v->body->data + r[i].first, len);
            else if (pread_full(v->fd, out->buf + out->len, len, (off_t)r[i].first) < 0)
                coro_abort(ctx->coro); /* the file changed under us: the length is promised */
            out->len += len;
            out->buf[out->len] = '\0';
            if (out->len >= PARTS_FLUSH_AT)
                conn_flush(ctx);
        } else if (v->body) {
            conn_flush_with(ctx, v->body->data + r[i].first, len);
        } else {
            conn_write_more(ctx, out->buf, out->len);
            strbuf_reset(out);
            conn_sendfile(ctx, v->fd, (off_t)r[i].first, len);
        }
    }
    if (strbuf_reserve(out, 4 + bl + 4) < 0)
        coro_abort(ctx->coro);
    strbuf_append(out, "\r\n--", 4);
    strbuf_append(out, f->boundary, bl);
    strbuf_append(out, "--\r\n", 4);
    return 206;
}

static int send_variant(struct colibri_response *resp, const struct fentry *e,
                        const struct files_variant *v, int status, uint64_t off, uint64_t len)
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
send_whole(struct colibri_response *resp, const struct fentry *e, const struct files_variant *v)
{
    resp->lines = (struct view){.p = e->hdrs + v->hdr_off, .len = v->hdr_len};
    int status = add_expires(e->f, resp) < 0 ? 500 : send_variant(resp, e, v, 200, 0, v->size);
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
            if (coding < 0)
                return colibri_resp_header_lines(resp, "Vary: Accept-Encoding\r\n", 23) < 0 ? 500
                                                                                            : 406;
        }
    }
    const struct files_variant *v = &e->v[coding];

    /* a listing has no modification time a client could have seen */
    int64_t mtime = e->listing ? -1 : e->mtime;
    int pre = http_preconditions(&c, colibri_req_method(req), v->etag, v->etag_len, mtime);
    if (pre == 412)
        return 412;
    if (pre == 304)
        return colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len) < 0 ||
                       add_expires(f, resp) < 0
                   ? 500
                   : 304;

    if (c.has_range && colibri_req_method(req) == COLIBRI_GET) {
        bool fresh = http_if_range(&c, v->etag, v->etag_len, mtime);
        struct http_range r[MAX_RANGES];
        unsigned n = 0;
        enum http_range_result res =
            fresh ? http_range_parse(c.range.p, c.range.len, v->size, r, MAX_RANGES, &n)
                  : HTTP_RANGE_IGNORE;
        if (res == HTTP_RANGE_UNSATISFIABLE) {
            char cr[HTTP_CONTENT_RANGE_MAX];
            return colibri_resp_header_lines(resp, cr, http_content_range(cr, -1, 0, v->size)) < 0
                       ? 500
                       : 416;
        }
        if (res == HTTP_RANGE_OK && n == 1) {
            char cr[HTTP_CONTENT_RANGE_MAX];
            if (colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len) < 0 ||
                colibri_resp_header_lines(
                    resp, cr, http_content_range(cr, (int64_t)r[0].first, r[0].last, v->size)) <
                    0 ||
                add_expires(f, resp) < 0)
                return 500;
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
    if (coro_defer(req->ctx->coro, atomic_load_explicit(&files_release, memory_order_relaxed), e) <
        0)
        return 503; /* released already */
    if (e->kind == FE_REDIRECT)
        return redirect(req, resp);
    /* none of If-*, Range, Accept-Encoding (the parser saw none of their
     * names): the whole identity representation, nothing to evaluate */
    if (!(req->head->flags & HTTP_F_FILE_FIELDS) && (e->avail & (1u << HTTP_CODING_IDENTITY)))
        return send_whole(resp, e, &e->v[HTTP_CODING_IDENTITY]);
    return serve_file(req, resp, e);
}
