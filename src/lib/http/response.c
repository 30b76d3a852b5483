/* response.c - what a handler answers: the head writer, error pages, and
 * the colibri_resp_* API (buffered bodies, streams, files, static bytes). */
#include "http/request.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "base/itoa.h"
#include "http/access_log.h"
#include "http/date.h"
#include "http/filter.h"
#include "http/status.h"
#include "rt/conn.h"
#include "tpl/tpl.h"

/* Bodies larger than this leave with writev straight from the handler's
 * buffer instead of being copied behind the header. */
#define COPY_BODY_MAX (16 * 1024)

const char *http_date_header(struct http_worker *hw, time_t now)
{
    if (unlikely(hw->date_time != now)) {
        memcpy(hw->date_hdr, "Date: ", 6);
        http_date_format(now, hw->date_hdr + 6);
        memcpy(hw->date_hdr + 6 + HTTP_DATE_LEN, "\r\n", 2);
        hw->date_time = now;
    }
    return hw->date_hdr;
}
static_assert(HTTP_DATE_HDR_LEN == 6 + HTTP_DATE_LEN + 2, "Date: <date>\\r\\n");

static inline char *put(char *p, const void *src, size_t len)
{
    memcpy(p, src, len);
    return p + len;
}
#define PUT_LIT(p, s) put(p, s, sizeof(s) - 1)

#define OK_LINE     "HTTP/1.1 200 OK\r\n"
#define OK_DATE_LEN (sizeof(OK_LINE) - 1 + HTTP_DATE_HDR_LEN)
static_assert(OK_DATE_LEN <= sizeof(((struct http_worker *)0)->ok_date), "ok_date fits");

/* Status line and Date of a 200 answer in this second (see ok_date). */
static const char *ok_date(struct http_worker *hw, time_t now)
{
    if (unlikely(hw->ok_date_time != now)) {
        memcpy(hw->ok_date, OK_LINE, sizeof(OK_LINE) - 1);
        memcpy(hw->ok_date + sizeof(OK_LINE) - 1, http_date_header(hw, now), HTTP_DATE_HDR_LEN);
        hw->ok_date_time = now;
    }
    return hw->ok_date;
}

/* Room in ok_head after its other lines for "Content-Length: N\r\n". */
#define CL_LINE_MAX (16 + U64_STR_MAX + 2)
/* ok_cl when no length line is kept: no Content-Length is that large */
#define NO_CL UINT64_MAX

/* The read-only segments of the object this code is part of (the library,
 * or the program it is linked into): the bytes of a string there never
 * change while this code runs. Found once, on the first piece built. */
#define RO_SEG_MAX 8
static struct {
    uintptr_t lo, hi;
} ro_seg[RO_SEG_MAX];
static unsigned n_ro_seg;
static pthread_once_t ro_once = PTHREAD_ONCE_INIT;

static int find_ro_segs(struct dl_phdr_info *info, size_t size, void *self)
{
    (void)size;
    uintptr_t at = (uintptr_t)self;
    bool mine = false;
    for (unsigned i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && at >= lo && at - lo < ph->p_memsz;
    }
    if (!mine)
        return 0;
    for (unsigned i = 0; i < info->dlpi_phnum && n_ro_seg < RO_SEG_MAX; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && !(ph->p_flags & PF_W)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            ro_seg[n_ro_seg].lo = lo;
            ro_seg[n_ro_seg++].hi = lo + ph->p_memsz;
        }
    }
    return 1;
}

static void find_ro(void)
{
    dl_iterate_phdr(find_ro_segs, (void *)(uintptr_t)&http_write_response);
}

/* Whether the len bytes at s and the NUL after them lie in a read-only
 * segment of ours (a string literal of the library's: "text/plain",
 * serve_files' table of types). */
static bool fixed_string(const char *s, size_t len)
{
    pthread_once(&ro_once, find_ro);
    uintptr_t a = (uintptr_t)s;
    for (unsigned i = 0; i < n_ro_seg; i++)
        if (a >= ro_seg[i].lo && a < ro_seg[i].hi && len < ro_seg[i].hi - a)
            return true;
    return false;
}

/* Whether ok_head holds the piece for this second, config and type. A
 * type whose bytes cannot change is recognised by its address; any other
 * by its text: a handler may pass any string, reused or not (strncmp()
 * stops at mime's end: never a read past a shorter string). */
static inline bool ok_head_current(const struct http_worker *hw, const struct http_config *cfg,
                                   time_t now, const char *mime)
{
    if (hw->ok_head_time != now || hw->ok_head_cfg != cfg)
        return false;
    if (mime == hw->ok_mime_fixed)
        return true;
    return !strncmp(mime, hw->ok_head + hw->ok_mime_off, hw->ok_mime_len) && !mime[hw->ok_mime_len];
}

/* The status line, Date, Server and Content-Type of a 200 answer of type
 * mime (see ok_head in struct http_worker), built when not current: false
 * when they do not fit. Most answers are 200s of a few types, so most
 * heads begin with this one copy, and when the length is the last one's
 * too, it includes the Content-Length line kept behind them (ok_cl). */
static bool ok_head(struct http_worker *hw, const struct http_config *cfg, time_t now,
                    const char *mime)
{
    if (ok_head_current(hw, cfg, now, mime))
        return true;
    size_t mime_len = strlen(mime);
    if (OK_DATE_LEN + cfg->server_hdr_len + 14 + mime_len + 2 + CL_LINE_MAX > sizeof(hw->ok_head))
        return false;
    char *p = put(hw->ok_head, ok_date(hw, now), OK_DATE_LEN);
    p = put(p, cfg->server_hdr, cfg->server_hdr_len);
    p = PUT_LIT(p, "Content-Type: ");
    hw->ok_mime_off = (size_t)(p - hw->ok_head);
    hw->ok_mime_len = mime_len;
    hw->ok_mime_fixed = fixed_string(mime, mime_len) ? mime : NULL;
    p = put(p, mime, mime_len);
    p = PUT_LIT(p, "\r\n");
    hw->ok_head_len = (size_t)(p - hw->ok_head);
    hw->ok_head_time = now;
    hw->ok_head_cfg = cfg;
    hw->ok_cl = NO_CL; /* no length line yet */
    hw->ok_cl_len = 0;
    return true;
}

/* "Content-Length: N\r\n" at p; behind ok_head too when whole, as the
 * next answer may have the same length. Returns its end. */
static char *cl_line(struct http_worker *hw, char *p, uint64_t content_length, bool whole)
{
    char *cl = p;
    p = PUT_LIT(p, "Content-Length: ");
    p += u64_to_str(content_length, p);
    p = PUT_LIT(p, "\r\n");
    if (whole) {
        hw->ok_cl = content_length;
        hw->ok_cl_len = (size_t)(p - cl);
        memcpy(hw->ok_head + hw->ok_head_len, cl, hw->ok_cl_len);
    }
    return p;
}

/* What every head ends with: the caller's lines, the handler's, the empty
 * line, and `body` behind it. Sets out->len. */
static inline void head_tail(struct strbuf *out, char *p, struct view lines,
                             const struct strbuf *hdrs, struct view body)
{
    if (lines.len)
        p = put(p, lines.p, lines.len);
    if (hdrs->len)
        p = put(p, hdrs->buf, hdrs->len);
    p = PUT_LIT(p, "\r\n");
    if (body.len)
        p = put(p, body.p, body.len);
    out->len = (size_t)(p - out->buf);
    *p = '\0';
}

/* The usual head: a 200 with a type and a length, its piece current, the
 * connection kept alive without saying so (HTTP/1.1, not closing, no
 * stop). false, with nothing written, for anything else. */
static inline __attribute__((always_inline)) bool write_head_ok(struct colibri_request *req,
                                                                struct colibri_response *resp,
                                                                uint64_t content_length,
                                                                const char *mime, struct view body)
{
    struct conn_ctx *ctx = req->ctx;
    struct http_conn *hc = req->hc;
    struct http_worker *hw = req->hw;
    if (unlikely(hc->closing || !req->head->version_minor || conn_stopping(ctx)))
        return false;
    if (unlikely(!mime || !ok_head_current(hw, req->cfg, conn_wall_time(ctx), mime)))
        return false;
    struct strbuf *out = &ctx->out;
    size_t piece = hw->ok_head_len;
    if (strbuf_reserve(out, piece + CL_LINE_MAX + resp->lines.len + hc->hdrs.len + 2 + body.len) <
        0)
        coro_abort(ctx->coro);
    char *p = out->buf + out->len;
    if (likely(content_length == hw->ok_cl)) {
        p = put(p, hw->ok_head, piece + hw->ok_cl_len);
    } else {
        p = put(p, hw->ok_head, piece);
        p = cl_line(hw, p, content_length, true);
    }
    head_tail(out, p, resp->lines, &hc->hdrs, body);
    return true;
}

/* The head of any response (write_head() when write_head_ok() declines).
 * One reservation, then plain copies. content_length < 0: none. */
static __attribute__((noinline)) void write_head_any(struct colibri_request *req,
                                                     struct colibri_response *resp, int status,
                                                     int64_t content_length, const char *mime,
                                                     struct view body)
{
    struct conn_ctx *ctx = req->ctx;
    struct http_conn *hc = req->hc;
    struct strbuf *out = &ctx->out;
    const struct http_config *cfg = req->cfg;
    if (unlikely(req->fr != NULL)) {
        /* another framing (its streams are closing: write_head_ok() sent
         * them here); the body's first bytes wait in out, as after a head */
        req->fr->head(req, resp, status, content_length, mime);
        if (body.len && strbuf_append(out, body.p, body.len) < 0)
            coro_abort(ctx->coro);
        return;
    }
    /* a 200 with a type begins with ok_head; any other, a 200's status
     * line with its Date line (ok_date) */
    bool ok = status == 200;
    struct http_worker *hw = req->hw;
    bool whole = ok && mime && ok_head(hw, cfg, conn_wall_time(ctx), mime);
    bool with_cl = whole && content_length >= 0 && (uint64_t)content_length == hw->ok_cl;
    struct view line =
        whole ? (struct view){.p = hw->ok_head,
                              .len = hw->ok_head_len + (with_cl ? hw->ok_cl_len : 0)}
        : ok  ? (struct view){.p = ok_date(req->hw, conn_wall_time(ctx)), .len = OK_DATE_LEN}
              : http_status_line(status);
    size_t mime_len = mime && !whole ? strlen(mime) : 0;

    if (conn_stopping(ctx))
        hc->closing = true;
    size_t max = line.len + HTTP_DATE_HDR_LEN + cfg->server_hdr_len + 14 + mime_len + 2 +
                 CL_LINE_MAX + 28 + 24 + resp->lines.len + hc->hdrs.len + 2 + body.len;
    if (strbuf_reserve(out, max) < 0)
        coro_abort(ctx->coro);
    char *p = out->buf + out->len;
    p = put(p, line.p, line.len);
    if (!whole) {
        if (!ok)
            p = put(p, http_date_header(req->hw, conn_wall_time(ctx)), HTTP_DATE_HDR_LEN);
        p = put(p, cfg->server_hdr, cfg->server_hdr_len);
        if (mime) {
            p = PUT_LIT(p, "Content-Type: ");
            p = put(p, mime, mime_len);
            p = PUT_LIT(p, "\r\n");
        }
    }
    if (content_length >= 0) {
        if (!with_cl)
            p = cl_line(hw, p, (uint64_t)content_length, whole);
    } else if (resp && resp->chunked) {
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    if (hc->closing) {
        p = PUT_LIT(p, "Connection: close\r\n");
        req->expect_closing = false; /* announced: it stays closing */
    } else if (req->head && req->head->version_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    head_tail(out, p, resp->lines, &hc->hdrs, body);
}

/* The head of a response, into ctx->out, and after it `body` (may be
 * empty). content_length < 0: none. */
static inline __attribute__((always_inline)) void write_head(struct colibri_request *req,
                                                             struct colibri_response *resp,
                                                             int status, int64_t content_length,
                                                             const char *mime, struct view body)
{
    if (unlikely(req->head_filters))
        mime = http_filters_head(req, resp, mime);
    if (likely(status == 200 && content_length >= 0) &&
        write_head_ok(req, resp, (uint64_t)content_length, mime, body))
        return;
    write_head_any(req, resp, status, content_length, mime, body);
}
#define NO_BODY ((struct view){0})

/* What an error_template sees. */
struct http_error_data {
    int status;
    const char *reason;
    struct view method;
    struct view path;
};
const struct tpl_desc http_error_desc =
    TPL_DESC(struct http_error_data, TPL_FIELD(struct http_error_data, status),
             TPL_FIELD(struct http_error_data, reason), TPL_FIELD(struct http_error_data, method),
             TPL_FIELD(struct http_error_data, path));

/* The configured error template, rendered into the body buffer, or the
 * built-in page when there is none or it fails. */
static struct view error_page(struct colibri_request *req, int status)
{
    const struct tpl *t = req->cfg->error_tpl;
    struct strbuf *body = &req->hc->body;
    if (!t)
        return http_error_page(status);
    struct http_error_data d = {
        .status = status,
        .reason = http_status_reason(status).p,
        .method = req->head->method_str,
        .path = req->path,
    };
    strbuf_reset(body);
    if (tpl_render(t, &d, body, req->hw->scratch, NULL, 0) < 0 || !body->len) {
        strbuf_reset(body);
        return http_error_page(status);
    }
    return (struct view){.p = body->buf, .len = body->len};
}

void http_write_response(struct colibri_request *req, struct colibri_response *resp, int status)
{
    struct conn_ctx *ctx = req->ctx;
    struct strbuf *body = &req->hc->body;
    const char *mime = resp->mime;
    struct view data = {.p = body->buf, .len = body->len};

    if (unlikely(status != 200)) {
        if (status < 100 || status > 599)
            status = 500;
        if (status >= 400 && !body->len) {
            data = error_page(req, status);
            mime = "text/html; charset=utf-8";
        }
        if (status < 200 || status == 204 || status == 304) {
            resp->final_status = status;
            write_head(req, resp, status, -1, NULL, NO_BODY);
            return;
        }
    }
    resp->final_status = status;
    bool send_body = !resp->head_only && data.len;
    if (send_body)
        resp->body_bytes = data.len;
    /* a small body is copied behind the head, in the same reservation */
    bool copy = send_body && data.len <= COPY_BODY_MAX;
    write_head(req, resp, status, (int64_t)data.len, mime, copy ? data : NO_BODY);
    if (send_body && !copy)
        conn_flush_with(ctx, data.p, data.len);
}

void http_send_error(struct conn_ctx *ctx, int status)
{
    struct http_conn *hc = conn_state(ctx);
    struct http_worker *hw = conn_worker_state(ctx);
    struct http_head none = {.version_minor = 1};
    struct colibri_request req = {.ctx = ctx, .hc = hc, .hw = hw, .cfg = hw->cfg, .head = &none};
    /* for the access log: the start of what was refused, up to its first line end */
    const char *raw = ctx->in + ctx->in_pos;
    size_t raw_len = MIN(ctx->in_len - ctx->in_pos, 2048);
    const char *eol = memchr(raw, '\n', raw_len);
    req.head_at = raw;
    req.head_len = eol ? (size_t)(eol - raw) : raw_len;
    if (req.head_len && raw[req.head_len - 1] == '\r')
        req.head_len--;
    struct colibri_response resp = {.req = &req};
    hc->closing = hc->lingering = true;
    strbuf_reset(&hc->body);
    strbuf_reset(&hc->hdrs);
    http_write_response(&req, &resp, status);
    if ((req.log = hw->cfg->access_log)) {
        req.t0_ns = conn_worker_of(ctx)->mono_ns;
        http_access_log(&req, &resp);
    }
}

void http_start_stream(struct colibri_response *resp)
{
    struct colibri_request *req = resp->req;
    resp->streaming = true;
    resp->final_status = resp->status ? resp->status : 200;
    if (req->fr)
        ; /* framed by its stream */
    else if (req->head->version_minor >= 1)
        resp->chunked = true;
    else
        req->hc->closing = true; /* HTTP/1.0: the end of the body is the close */
    write_head(req, resp, resp->status ? resp->status : 200, -1, resp->mime, NO_BODY);
}

int http_allow_header(struct strbuf *h, unsigned methods)
{
    size_t was = h->len;
    int r = strbuf_append(h, "Allow: ", 7);
    bool first = true;
    for (unsigned m = 0; m < COLIBRI_METHOD_COUNT && !r; m++) {
        if (!(methods & COLIBRI_M(m)))
            continue;
        if (!first)
            r = strbuf_append(h, ", ", 2);
        if (!r)
            r = strbuf_append_str(h, colibri_method_name((enum colibri_method)m));
        first = false;
    }
    if (!r)
        r = strbuf_append(h, "\r\n", 2);
    if (r)
        h->len = was; /* no half line */
    return r;
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
    if (!field_ok(name, true) || !field_ok(value, false) || (resp->streaming && !resp->filtering))
        return -EINVAL;
    if (strbuf_printf(&resp->req->hc->hdrs, "%s: %s\r\n", name, value) < 0)
        return -ENOMEM;
    return 0;
}

int colibri_resp_header_lines(struct colibri_response *resp, const char *lines, size_t len)
{
    if (resp->streaming || resp->sent)
        return -EINVAL;
    return strbuf_append(&resp->req->hc->hdrs, lines, len);
}

int colibri_resp_append(struct colibri_response *resp, const void *p, size_t len)
{
    return strbuf_append(&resp->req->hc->body, p, len);
}

int colibri_resp_printf(struct colibri_response *resp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = strbuf_vprintf(&resp->req->hc->body, fmt, ap);
    va_end(ap);
    return r;
}

int colibri_resp_send_chunk(struct colibri_response *resp, const void *p, size_t len)
{
    struct conn_ctx *ctx = resp->req->ctx;
    if (!resp->streaming)
        http_start_stream(resp);
    if (resp->head_only || !len) {
        conn_flush(ctx);
        return 0;
    }
    resp->body_bytes += len;
    /* what waits in ctx->out (the head, the first time), the chunk's size
     * line, its bytes and the CRLF leave in one writev from where they
     * are: nothing is copied, so nothing can fail but the connection
     * (which unwinds the handler) */
    char size[24];
    int n = resp->chunked ? snprintf(size, sizeof(size), "%zx\r\n", len) : 0;
    struct iovec iov[4] = {
        {.iov_base = ctx->out.buf, .iov_len = ctx->out.len},
        {.iov_base = size, .iov_len = (size_t)n},
        {.iov_base = (void *)p, .iov_len = len},
        {.iov_base = "\r\n", .iov_len = resp->chunked ? 2 : 0},
    };
    conn_writev(ctx, iov, 4);
    strbuf_reset(&ctx->out);
    return 0;
}

/* The head of a response whose body the caller sends itself; false when
 * there is no body to send (HEAD, or empty). */
static inline __attribute__((always_inline)) bool
answer_head(struct colibri_response *resp, int status, const char *mime, size_t len)
{
    write_head(resp->req, resp, status, (int64_t)len, mime, NO_BODY);
    resp->sent = true;
    resp->final_status = status;
    if (resp->head_only || !len)
        return false;
    resp->body_bytes = len;
    return true;
}

bool http_answer_head(struct colibri_response *resp, int status, const char *mime, uint64_t len)
{
    if (resp->streaming || resp->sent)
        return false;
    return answer_head(resp, status, mime, (size_t)len);
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
        if (pread_full(fd, ctx->out.buf + ctx->out.len, len, offset) < 0)
            coro_abort(ctx->coro); /* the file changed under us: the length is promised */
        ctx->out.len += len;
        ctx->out.buf[ctx->out.len] = '\0';
        return status;
    }
    /* large: the header waits in the socket (MSG_MORE) for sendfile; the
     * body counts from when the header went (an answer cut short is
     * logged with the body bytes that went out) */
    resp->body_bytes = 0;
    conn_write_more(ctx, ctx->out.buf, ctx->out.len);
    resp->body_bytes = len;
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
    if (len <= COPY_BODY_MAX && (ctx->in_len > ctx->in_pos || resp->req->hc->closing)) {
        /* more requests are buffered (pipelining): join their answers in
         * one writev instead of a system call each; or the last answer,
         * which waits to leave with the FIN (after_run() in rt/conn.c) */
        if (strbuf_append(&ctx->out, p, len) < 0)
            coro_abort(ctx->coro);
        return status;
    }
    conn_flush_with(ctx, p, len);
    return status;
}
