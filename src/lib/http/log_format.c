/* log_format.c - access log lines of named fields, as text or JSON (see
 * log_format.h). A format is compiled once, at config loading, into a list
 * of items (literal bytes, or a field); a line is the items' values. */
#include "http/log_format.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/itoa.h"
#include "base/strbuf.h"
#include "http/request.h"
#include "rt/conn.h"

/* The fields: a new one is a row here and a case in value(). */
enum field {
    F_REMOTE_ADDR,
    F_TIME_LOCAL,
    F_TIME_ISO8601,
    F_REQUEST,
    F_METHOD,
    F_URI,
    F_PROTOCOL,
    F_STATUS,
    F_BODY_BYTES_SENT,
    F_BYTES_RECEIVED,
    F_REQUEST_TIME_MS,
    F_REFERER,
    F_USER_AGENT,
    F_HOST,
    F_COMPLETION,
    F_REMOTE_USER,
    F_SSL_PROTOCOL,
    F_SSL_CIPHER,
    F_SSL_SERVER_NAME,
    F_SSL_SESSION_REUSED,
    F_UPSTREAM_ADDR,
    F_UPSTREAM_RESPONSE_TIME_MS,
    F_COUNT
};

static const char *const field_names[F_COUNT] = {
    [F_REMOTE_ADDR] = "remote_addr",
    [F_TIME_LOCAL] = "time_local",
    [F_TIME_ISO8601] = "time_iso8601",
    [F_REQUEST] = "request",
    [F_METHOD] = "method",
    [F_URI] = "uri",
    [F_PROTOCOL] = "protocol",
    [F_STATUS] = "status",
    [F_BODY_BYTES_SENT] = "body_bytes_sent",
    [F_BYTES_RECEIVED] = "bytes_received",
    [F_REQUEST_TIME_MS] = "request_time_ms",
    [F_REFERER] = "referer",
    [F_USER_AGENT] = "user_agent",
    [F_HOST] = "host",
    [F_COMPLETION] = "completion",
    [F_REMOTE_USER] = "remote_user",
    [F_SSL_PROTOCOL] = "ssl_protocol",
    [F_SSL_CIPHER] = "ssl_cipher",
    [F_SSL_SERVER_NAME] = "ssl_server_name",
    [F_SSL_SESSION_REUSED] = "ssl_session_reused",
    [F_UPSTREAM_ADDR] = "upstream_addr",
    [F_UPSTREAM_RESPONSE_TIME_MS] = "upstream_response_time_ms",
};

#define LITERAL 0xff

struct item {
    uint8_t field; /* enum field, or LITERAL */
    struct view lit;
};

struct http_log_format {
    bool json;
    unsigned n;
    char *text; /* the literals point into it */
    struct item items[];
};

const char *http_log_field_names(void)
{
    static char all[512];
    if (!all[0]) {
        size_t n = 0;
        for (unsigned i = 0; i < F_COUNT; i++)
            n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s", i ? " " : "", field_names[i]);
    }
    return all;
}

static int find_field(const char *p, size_t len)
{
    for (unsigned i = 0; i < F_COUNT; i++)
        if (strlen(field_names[i]) == len && !memcmp(field_names[i], p, len))
            return (int)i;
    return -1;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static struct http_log_format *new_format(size_t items, const char *spec)
{
    struct http_log_format *f = calloc(1, sizeof(*f) + items * sizeof(struct item));
    if (f && !(f->text = strdup(spec))) {
        free(f);
        f = NULL;
    }
    return f;
}

static int bad(struct http_log_format *f, char *why, size_t whylen, const char *fmt,
               const char *name, size_t len)
{
    snprintf(why, whylen, fmt, (int)len, name, http_log_field_names());
    http_log_format_free(f);
    return -EINVAL;
}

int http_log_format_compile(const char *spec, struct http_log_format **out, char *why,
                            size_t whylen)
{
    *out = NULL;
    if (!strcmp(spec, "combined"))
        return 0;
    struct http_log_format *f = new_format(MAX(strlen(spec) + 1, (size_t)F_COUNT), spec);
    if (!f) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    bool json = !strncmp(spec, "json", 4) && (!spec[4] || spec[4] == ' ' || spec[4] == '\t');
    if (json) {
        f->json = true;
        const char *p = f->text + 4;
        for (;;) {
            p += strspn(p, " \t");
            size_t len = strcspn(p, " \t");
            if (!len)
                break;
            int k = find_field(p, len);
            if (k < 0)
                return bad(f, why, whylen, "unknown field '%.*s' (the fields: %s)", p, len);
            f->items[f->n++] = (struct item){.field = (uint8_t)k};
            p += len;
        }
        if (!f->n) /* "json" alone: every field */
            for (unsigned i = 0; i < F_COUNT; i++)
                f->items[f->n++] = (struct item){.field = (uint8_t)i};
        *out = f;
        return 0;
    }
    if (!strchr(spec, '$'))
        return bad(f, why, whylen,
                   "expected combined, json [FIELD...] or a text with $FIELD in it%.*s "
                   "(the fields: %s)",
                   "", 0);
    /* a text: literals and $NAME; "$$" is a '$' */
    char *p = f->text, *lit = p, *w = p;
    while (*p) {
        if (*p != '$') {
            *w++ = *p++;
            continue;
        }
        if (p[1] == '$') {
            *w++ = '$';
            p += 2;
            continue;
        }
        size_t len = 0;
        while (name_char(p[1 + len]))
            len++;
        int k = find_field(p + 1, len);
        if (k < 0)
            return bad(f, why, whylen, "unknown field '$%.*s' (the fields: %s)", p + 1, len);
        if (w > lit)
            f->items[f->n++] =
                (struct item){.field = LITERAL, .lit = {.p = lit, .len = (size_t)(w - lit)}};
        f->items[f->n++] = (struct item){.field = (uint8_t)k};
        p += 1 + len;
        lit = w = p; /* the bytes before p were consumed: write from here on */
    }
    if (w > lit)
        f->items[f->n++] =
            (struct item){.field = LITERAL, .lit = {.p = lit, .len = (size_t)(w - lit)}};
    *out = f;
    return 0;
}

void http_log_format_free(struct http_log_format *f)
{
    if (!f)
        return;
    free(f->text);
    free(f);
}

/* --- values ------------------------------------------------------------------ */

enum kind {
    K_NONE, /* absent: "-" or null */
    K_NUM,
    K_SAFE, /* bytes known to need no escaping (an address, a date) */
    K_STR,  /* a client's bytes */
    K_REQ,  /* the request line: method, target and version, or the raw line */
};

struct val {
    enum kind kind;
    struct view s;
    uint64_t n;
};

struct line {
    struct colibri_request *req;
    struct colibri_response *resp;
    bool found; /* Referer and User-Agent looked up */
    bool has_ref, has_ua;
    struct view ref, ua;
    char addr[INET6_ADDRSTRLEN + 8];
};

static void find_once(struct line *l)
{
    if (l->found)
        return;
    l->found = true;
    if (l->req->head->headers.len)
        http_log_find_fields(l->req->head->headers, &l->ref, &l->has_ref, &l->ua, &l->has_ua);
}

static struct view iso_date(struct http_worker *hw, time_t now)
{
    if (hw->log_iso_time != now) {
        struct tm tm;
        localtime_r(&now, &tm);
        char z[8];
        strftime(z, sizeof(z), "%z", &tm); /* "+0100" -> "+01:00" */
        size_t n = strftime(hw->log_iso, sizeof(hw->log_iso), "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(hw->log_iso + n, sizeof(hw->log_iso) - n, "%.3s:%.2s", z, z + 3);
        hw->log_iso_len = n;
        hw->log_iso_time = now;
    }
    return (struct view){.p = hw->log_iso, .len = hw->log_iso_len};
}

static uint64_t body_received(const struct colibri_request *req)
{
    if (req->body_kind == BODY_LENGTH)
        return (uint64_t)req->head->content_length - req->body_left;
    if (req->body_kind == BODY_CHUNKED || req->body_kind == BODY_TO_END)
        return req->body_left; /* the payload read so far */
    return 0;
}

static struct val safe_or_none(const char *s)
{
    return s ? (struct val){.kind = K_SAFE, .s = {.p = s, .len = strlen(s)}}
             : (struct val){.kind = K_NONE};
}

static struct val str_or_none(const char *s)
{
    return s ? (struct val){.kind = K_STR, .s = {.p = s, .len = strlen(s)}}
             : (struct val){.kind = K_NONE};
}

static struct val value(struct line *l, enum field f)
{
    struct colibri_request *req = l->req;
    const struct http_head *head = req->head;
    struct http_worker *hw = req->hw;
    switch (f) {
    case F_REMOTE_ADDR: {
        char *e = http_log_addr(l->addr, hw, conn_peer_of(req->ctx));
        return (struct val){.kind = K_SAFE, .s = {.p = l->addr, .len = (size_t)(e - l->addr)}};
    }
    case F_TIME_LOCAL: {
        const char *d = http_log_date(hw, conn_wall_time(req->ctx));
        return (struct val){.kind = K_SAFE, .s = {.p = d, .len = hw->log_date_len}};
    }
    case F_TIME_ISO8601:
        return (struct val){.kind = K_SAFE, .s = iso_date(hw, conn_wall_time(req->ctx))};
    case F_REQUEST:
        if (!head->method_str.len && !req->head_len)
            return (struct val){.kind = K_NONE};
        return (struct val){.kind = K_REQ};
    case F_METHOD:
        return head->method_str.len ? (struct val){.kind = K_STR, .s = head->method_str}
                                    : (struct val){.kind = K_NONE};
    case F_URI:
        return head->method_str.len ? (struct val){.kind = K_STR, .s = head->target}
                                    : (struct val){.kind = K_NONE};
    case F_PROTOCOL:
        if (!head->method_str.len)
            return (struct val){.kind = K_NONE};
        return (struct val){.kind = K_SAFE, .s = {.p = colibri_req_protocol(req), .len = 8}};
    case F_STATUS:
        return (struct val){.kind = K_NUM, .n = (uint64_t)l->resp->final_status};
    case F_BODY_BYTES_SENT:
        return (struct val){.kind = K_NUM, .n = l->resp->body_bytes};
    case F_BYTES_RECEIVED:
        return (struct val){.kind = K_NUM, .n = req->head_len + body_received(req)};
    case F_REQUEST_TIME_MS: {
        uint64_t now = conn_worker_of(req->ctx)->mono_ns;
        return (struct val){.kind = K_NUM,
                            .n = now > req->t0_ns ? (now - req->t0_ns) / 1000000 : 0};
    }
    case F_REFERER:
        find_once(l);
        return l->has_ref && l->ref.len ? (struct val){.kind = K_STR, .s = l->ref}
                                        : (struct val){.kind = K_NONE};
    case F_USER_AGENT:
        find_once(l);
        return l->has_ua && l->ua.len ? (struct val){.kind = K_STR, .s = l->ua}
                                      : (struct val){.kind = K_NONE};
    case F_HOST:
        return head->host.len ? (struct val){.kind = K_STR, .s = head->host}
                              : (struct val){.kind = K_NONE};
    case F_REMOTE_USER: {
        const char *u = HTTP_REQ_USER(req);
        return u ? (struct val){.kind = K_STR, .s = {u, strlen(u)}} : (struct val){.kind = K_NONE};
    }
    case F_COMPLETION:
        return l->resp->interrupted ? (struct val){.kind = K_NONE}
                                    : (struct val){.kind = K_SAFE, .s = {.p = "OK", .len = 2}};
    /* what the connection's TLS negotiated; "-" (null) on a plain one */
    case F_SSL_PROTOCOL:
        return safe_or_none(conn_tls_version(l->req->ctx));
    case F_SSL_CIPHER:
        return safe_or_none(conn_tls_cipher(l->req->ctx));
    case F_SSL_SERVER_NAME: /* the client's bytes: escaped */
        return str_or_none(conn_tls_server_name(l->req->ctx));
    case F_SSL_SESSION_REUSED:
        if (!conn_is_secure(l->req->ctx))
            return (struct val){.kind = K_NONE};
        return conn_tls_resumed(l->req->ctx)
                   ? (struct val){.kind = K_SAFE, .s = {.p = "r", .len = 1}}
                   : (struct val){.kind = K_SAFE, .s = {.p = ".", .len = 1}};
    case F_UPSTREAM_ADDR:
        return l->resp->upstream_addr ? (struct val){.kind = K_STR,
                                                     .s = {.p = l->resp->upstream_addr,
                                                           .len = strlen(l->resp->upstream_addr)}}
                                      : (struct val){.kind = K_NONE};
    case F_UPSTREAM_RESPONSE_TIME_MS:
        return l->resp->upstream_addr && l->resp->upstream_ms >= 0
                   ? (struct val){.kind = K_NUM, .n = (uint64_t)l->resp->upstream_ms}
                   : (struct val){.kind = K_NONE};
    default:
        return (struct val){.kind = K_NONE};
    }
}

/* --- writing ------------------------------------------------------------------- */

static const char hex[] = "0123456789abcdef";

/* v as the inside of a JSON string at p (room for 6 * v.len bytes). */
static char *json_escape(char *p, struct view v)
{
    const unsigned char *s = (const unsigned char *)v.p;
    for (size_t i = 0; i < v.len; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            *p++ = (char)c;
        } else if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else {
            memcpy(p, "\\u00", 4);
            p[4] = hex[c >> 4];
            p[5] = hex[c & 15];
            p += 6;
        }
    }
    return p;
}

typedef char *(*escape_fn)(char *p, struct view v);

/* The request line's bytes, escaped with esc (room: 6 * their length + 16). */
static size_t request_len(const struct colibri_request *req)
{
    const struct http_head *head = req->head;
    return head->method_str.len ? head->method_str.len + head->target.len + 10 : req->head_len;
}

static char *put_request(char *p, const struct colibri_request *req, escape_fn esc)
{
    const struct http_head *head = req->head;
    if (!head->method_str.len)
        return esc(p, (struct view){.p = req->head_at, .len = req->head_len});
    p = esc(p, head->method_str);
    *p++ = ' ';
    p = esc(p, head->target);
    memcpy(p, " HTTP/1.", 8);
    p += 8;
    *p++ = (char)('0' + head->version_minor);
    if (head->flags & HTTP_F_H2) { /* " HTTP/2.0" */
        p[-3] = '2';
        p[-1] = '0';
    }
    return p;
}

/* Room for a value, escaped (6 bytes per byte at most), quoted. */
static size_t room(const struct line *l, const struct val *v)
{
    switch (v->kind) {
    case K_NUM:
        return U64_STR_MAX;
    case K_REQ:
        return 6 * request_len(l->req) + 4;
    case K_SAFE:
    case K_STR:
        return 6 * v->s.len + 4;
    default:
        return 8;
    }
}

static char *put_value(char *p, const struct line *l, const struct val *v, bool json)
{
    escape_fn esc = json ? json_escape : http_log_escape;
    switch (v->kind) {
    case K_NUM:
        return p + u64_to_str(v->n, p);
    case K_NONE:
        if (json) {
            memcpy(p, "null", 4);
            return p + 4;
        }
        *p++ = '-';
        return p;
    default:
        break;
    }
    if (json)
        *p++ = '"';
    if (v->kind == K_REQ)
        p = put_request(p, l->req, esc);
    else if (v->kind == K_STR)
        p = esc(p, v->s);
    else {
        memcpy(p, v->s.p, v->s.len);
        p += v->s.len;
    }
    if (json)
        *p++ = '"';
    return p;
}

int http_log_format_line(const struct http_log_format *f, struct colibri_request *req,
                         struct colibri_response *resp, struct strbuf *b)
{
    struct line l = {.req = req, .resp = resp};
    size_t start = b->len;
    if (f->json && strbuf_append(b, "{", 1) < 0)
        return -ENOMEM;
    for (unsigned i = 0; i < f->n; i++) {
        const struct item *it = &f->items[i];
        if (it->field == LITERAL) {
            if (strbuf_append(b, it->lit.p, it->lit.len) < 0)
                goto nomem;
            continue;
        }
        struct val v = value(&l, (enum field)it->field);
        const char *name = field_names[it->field];
        size_t need = room(&l, &v) + (f->json ? strlen(name) + 4 : 0);
        if (strbuf_reserve(b, need) < 0)
            goto nomem;
        char *p = b->buf + b->len;
        if (f->json) {
            if (i)
                *p++ = ',';
            *p++ = '"';
            memcpy(p, name, strlen(name));
            p += strlen(name);
            *p++ = '"';
            *p++ = ':';
        }
        p = put_value(p, &l, &v, f->json);
        b->len = (size_t)(p - b->buf);
    }
    if (strbuf_append(b, f->json ? "}\n" : "\n", f->json ? 2 : 1) < 0)
        goto nomem;
    return 0;
nomem:
    b->len = start;
    return -ENOMEM;
}
