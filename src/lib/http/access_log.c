/* access_log.c - Combined Log Format lines into per-worker buffers (see
 * access_log.h). */
#include "http/access_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/itoa.h"
#include "base/log.h"
#include "http/log_format.h"
#include "http/request.h"
#include "rt/conn.h"

static _Atomic uint64_t dropped;

uint64_t http_access_log_dropped(void)
{
    return atomic_load(&dropped);
}

static const char hex[] = "0123456789ABCDEF";

/* The bytes written as \xHH: controls, DEL and above, '"' and '\\'. */
static const bool esc[256] = {
    [0 ... 0x1f] = true, ['"'] = true, ['\\'] = true, [0x7f ... 0xff] = true};

/* Appends v escaped; p has room for 4 * v.len bytes. */
/* Room for the user an auth filter let in, escaped. */
static size_t user_len(const struct colibri_request *req)
{
    const char *u = HTTP_REQ_USER(req);
    return u ? 4 * strlen(u) : 0;
}

static inline char *put_escaped(char *p, struct view v)
{
    const unsigned char *s = (const unsigned char *)v.p;
    for (size_t i = 0; i < v.len; i++) {
        unsigned char c = s[i];
        if (likely(!esc[c])) {
            *p++ = (char)c;
        } else {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    return p;
}

static char *put_field(char *p, struct view v, bool found)
{
    *p++ = '"';
    if (found && v.len)
        p = put_escaped(p, v);
    else
        *p++ = '-';
    *p++ = '"';
    return p;
}

size_t http_peer_text(const struct conn_peer *peer, char *a)
{
    char *start = a;
    if (peer->family == AF_INET) {
        for (int i = 0; i < 4; i++) {
            a += u64_to_str(peer->addr[i], a);
            *a++ = '.';
        }
        a--;
    } else if (peer->family == AF_INET6 && inet_ntop(AF_INET6, peer->addr, a, INET6_ADDRSTRLEN)) {
        a += strlen(a);
    } else {
        *a++ = '-';
    }
    *a = '\0';
    return (size_t)(a - start);
}

/* The client's address as text; the worker keeps the last one, since a
 * keep-alive client sends many requests in a row. */
static inline char *put_addr(char *p, struct http_worker *hw, const struct conn_peer *peer)
{
    if (memcmp(&hw->log_peer, peer, sizeof(*peer))) {
        hw->log_peer_len = http_peer_text(peer, hw->log_peer_str);
        hw->log_peer = *peer;
    }
    memcpy(p, hw->log_peer_str, hw->log_peer_len);
    return p + hw->log_peer_len;
}

/* The value of a field line from just after its colon to the line's end. */
static struct view field_value(const char *v, const char *end)
{
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return (struct view){.p = v, .len = (size_t)(end - v)};
}

/* Referer and User-Agent in one pass over the validated field lines. */
static inline void find_fields(struct view h, struct view *ref, bool *has_ref, struct view *ua,
                               bool *has_ua)
{
    const char *p = h.p, *end = h.p + h.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        char c = (char)(*p | 0x20);
        if (c == 'r' && le - p > 8 && mem_case_eq(p, "referer:", 8)) {
            *ref = field_value(p + 8, le);
            *has_ref = true;
        } else if (c == 'u' && le - p > 11 && mem_case_eq(p, "user-agent:", 11)) {
            *ua = field_value(p + 11, le);
            *has_ua = true;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
}

/* "22/Nov/2026:13:40:00 +0000" for the worker's second, made once a second. */
static inline const char *log_date(struct http_worker *hw, time_t now)
{
    if (hw->log_time != now) {
        struct tm tm;
        localtime_r(&now, &tm);
        hw->log_date_len =
            strftime(hw->log_date, sizeof(hw->log_date), "%d/%b/%Y:%H:%M:%S %z", &tm);
        hw->log_time = now;
    }
    return hw->log_date;
}

/* For log_format.c: the same pieces, out of line. */
char *http_log_escape(char *p, struct view v)
{
    return put_escaped(p, v);
}

char *http_log_addr(char *p, struct http_worker *hw, const struct conn_peer *peer)
{
    return put_addr(p, hw, peer);
}

void http_log_find_fields(struct view h, struct view *ref, bool *has_ref, struct view *ua,
                          bool *has_ua)
{
    find_fields(h, ref, has_ref, ua, has_ua);
}

const char *http_log_date(struct http_worker *hw, time_t now)
{
    return log_date(hw, now);
}

/* Where a line goes: the worker's buffer for the file of req->log. */
static inline struct http_log_buf *log_buf(struct http_worker *hw, const struct http_log *log)
{
    if (unlikely(log->file >= hw->log_hi))
        hw->log_hi = log->file + 1;
    return &hw->log[log->file];
}

/* A line went into lb: written now when the buffer is full, else within a
 * second (the worker's tick). */
static void line_done(struct colibri_request *req, struct http_log_buf *lb)
{
    lb->lines++;
    if (lb->b.len >= ACCESS_LOG_FLUSH_AT)
        http_access_log_flush(req->hw);
    else
        conn_want_tick(req->ctx);
}

void http_access_log(struct colibri_request *req, struct colibri_response *resp)
{
    struct http_worker *hw = req->hw;
    struct http_log_buf *lb = log_buf(hw, req->log);
    if (req->log->fmt) {
        if (http_log_format_line(req->log->fmt, req, resp, &lb->b) < 0)
            atomic_fetch_add(&dropped, 1);
        else
            line_done(req, lb);
        return;
    }
    struct strbuf *b = &lb->b;
    const struct http_head *head = req->head;
    struct view ref = {0}, ua = {0};
    bool has_ref = false, has_ua = false;
    if (head->headers.len)
        find_fields(head->headers, &ref, &has_ref, &ua, &has_ua);
    const char *date = log_date(hw, conn_wall_time(req->ctx));
    size_t max =
        INET6_ADDRSTRLEN + 8 + hw->log_date_len + 4 +
        4 * (head->method_str.len + head->target.len + (head->method_str.len ? 0 : req->head_len)) +
        16 + 2 * U64_STR_MAX + 4 * (ref.len + ua.len) + 16 + user_len(req);
    if (b->cap - b->len < max && strbuf_reserve(b, max) < 0) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    char *p = b->buf + b->len;
    p = put_addr(p, hw, conn_peer_of(req->ctx));
    const char *user = HTTP_REQ_USER(req);
    if (unlikely(user != NULL)) { /* the user an auth filter let in */
        memcpy(p, " - ", 3);
        p = put_escaped(p + 3, (struct view){user, strlen(user)});
        memcpy(p, " [", 2);
        p += 2;
    } else {
        memcpy(p, " - - [", 6);
        p += 6;
    }
    memcpy(p, date, hw->log_date_len);
    p += hw->log_date_len;
    memcpy(p, "] \"", 3);
    p += 3;
    if (head->method_str.len) {
        p = put_escaped(p, head->method_str);
        *p++ = ' ';
        p = put_escaped(p, head->target);
        memcpy(p, " HTTP/1.", 8);
        p += 8;
        *p++ = (char)('0' + head->version_minor);
        if (head->flags & HTTP_F_H2) { /* " HTTP/2.0" */
            p[-3] = '2';
            p[-1] = '0';
        }
    } else if (req->head_len) { /* refused by the parser: its bytes as they came */
        p = put_escaped(p, (struct view){.p = req->head_at, .len = req->head_len});
    } else {
        *p++ = '-';
    }
    *p++ = '"';
    *p++ = ' ';
    unsigned st = (unsigned)resp->final_status; /* 100-599 */
    *p++ = (char)('0' + st / 100);
    *p++ = (char)('0' + st / 10 % 10);
    *p++ = (char)('0' + st % 10);
    *p++ = ' ';
    p += u64_to_str(resp->body_bytes, p);
    *p++ = ' ';
    p = put_field(p, ref, has_ref);
    *p++ = ' ';
    p = put_field(p, ua, has_ua);
    *p++ = '\n';
    b->len = (size_t)(p - b->buf);
    line_done(req, lb);
}

void http_access_log_flush(struct http_worker *hw)
{
    for (unsigned i = 0; i < hw->log_hi; i++) {
        struct http_log_buf *lb = &hw->log[i];
        if (!lb->b.len)
            continue;
        int e = -write_full(hw->cfg->log_files->fd[i], lb->b.buf, lb->b.len);
        if (e) {
            /* what did not go out may be part of a line: count the buffer as lost */
            uint64_t total = atomic_fetch_add(&dropped, lb->lines) + lb->lines;
            LOG_LIMITED(LOG_ERROR, "access log: write failed: %s (%llu lines dropped so far)",
                        strerror(e), (unsigned long long)total);
        }
        lb->b.len = 0;
        lb->lines = 0;
    }
}

void http_log_cut(struct conn_ctx *ctx, const struct colibri_response *resp)
{
    char addr[INET6_ADDRSTRLEN + 8];
    http_peer_text(conn_peer_of(ctx), addr);
    if (!resp) {
        LOG_LIMITED(LOG_INFO, "stop: cut off %s before a whole request came", addr);
        return;
    }
    const struct http_head *head = resp->req->head;
    LOG_LIMITED(LOG_INFO, "stop: cut off %s \"%.*s %.*s HTTP/1.%d\" (%d, %llu body bytes sent)",
                addr, (int)head->method_str.len, head->method_str.p,
                (int)MIN(head->target.len, 200), head->target.p, head->version_minor,
                resp->final_status, (unsigned long long)resp->body_bytes);
}
