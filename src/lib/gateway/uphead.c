/* uphead.c - the gateway's heads (see uphead.h). */
#include "gateway/uphead.h"

#include <errno.h>
#include <string.h>

/* RFC 9110's tchar, as a table: a field name's every byte is checked */
static const bool tchars[256] = {
    ['a' ... 'z'] = true, ['A' ... 'Z'] = true, ['0' ... '9'] = true, ['!'] = true,  ['#'] = true,
    ['$'] = true,         ['%'] = true,         ['&'] = true,         ['\''] = true, ['*'] = true,
    ['+'] = true,         ['-'] = true,         ['.'] = true,         ['^'] = true,  ['_'] = true,
    ['`'] = true,         ['|'] = true,         ['~'] = true,
};

static inline bool tchar(unsigned char c)
{
    return tchars[c];
}

static bool vchar(unsigned char c)
{
    return (c > 0x20 && c != 0x7f) || c == ' ' || c == '\t';
}

static struct view trim(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    return (struct view){.p = p, .len = (size_t)(e - p)};
}

/* Whether n is s (any case): the length and the first letter (s's are
 * letters) decide most compares without a call. */
static inline __attribute__((always_inline)) bool name_is(struct view n, const char *s)
{
    size_t l = strlen(s); /* a literal's: folded */
    return n.len == l && ((unsigned char)n.p[0] | 0x20) == ((unsigned char)s[0] | 0x20) &&
           mem_case_eq(n.p, s, l);
}

/* Whether the comma-separated list v holds token t (any case). */
static bool list_has(struct view v, const char *t)
{
    const char *p = v.p, *end = v.p + v.len;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        struct view item = trim(p, c ? c : end);
        if (name_is(item, t))
            return true;
        p = c ? c + 1 : end;
    }
    return false;
}

/* The last item of the list v. */
static struct view list_last(struct view v)
{
    const char *p = v.p + v.len;
    while (p > v.p && p[-1] != ',')
        p--;
    return trim(p, v.p + v.len);
}

static int parse_length(struct view v, int64_t *out)
{
    if (!v.len || v.len > 18)
        return -EBADMSG;
    int64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9')
            return -EBADMSG;
        n = n * 10 + (v.p[i] - '0');
    }
    *out = n;
    return 0;
}

ssize_t gw_parse_response(const char *buf, size_t len, size_t max, struct gw_resp_head *h)
{
    *h = (struct gw_resp_head){.content_length = -1, .connection = {.p = "", .len = 0}};
    size_t scan = len < max ? len : max;
    /* the end of the head: an empty line */
    const char *end = NULL;
    for (const char *p = buf; p < buf + scan;) {
        const char *nl = memchr(p, '\n', (size_t)(buf + scan - p));
        if (!nl)
            break;
        if (nl == p || (nl == p + 1 && *p == '\r')) {
            if (p == buf)
                return -EBADMSG; /* no status line */
            end = nl + 1;
            break;
        }
        p = nl + 1;
    }
    if (!end)
        return len >= max ? -EMSGSIZE : 0;
    /* the status line: HTTP/1.x SP 3DIGIT SP reason */
    const char *nl = memchr(buf, '\n', (size_t)(end - buf));
    const char *le = nl > buf && nl[-1] == '\r' ? nl - 1 : nl;
    if (le - buf < 12 || memcmp(buf, "HTTP/1.", 7) || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || (le - buf > 12 && buf[12] != ' '))
        return -EBADMSG;
    for (int i = 9; i < 12; i++)
        if (buf[i] < '0' || buf[i] > '9')
            return -EBADMSG;
    h->minor = (uint8_t)(buf[7] - '0');
    h->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (h->status < 100 || h->status > 599)
        return -EBADMSG;
    for (const char *c = buf + 12; c < le; c++)
        if (!vchar((unsigned char)*c))
            return -EBADMSG;
    /* the fields */
    const char *fs = nl + 1;
    h->fields = (struct view){.p = fs, .len = (size_t)(end - fs)};
    bool keep_alive = false, have_conn = false;
    for (const char *p = fs; p < end;) {
        const char *lnl = memchr(p, '\n', (size_t)(end - p));
        const char *lend = lnl > p && lnl[-1] == '\r' ? lnl - 1 : lnl;
        if (lend == p)
            break; /* the empty line */
        const char *colon = memchr(p, ':', (size_t)(lend - p));
        if (!colon || colon == p)
            return -EBADMSG; /* no name, or obs-fold (a line starting with a blank) */
        for (const char *c = p; c < colon; c++)
            if (!tchar((unsigned char)*c))
                return -EBADMSG;
        for (const char *c = colon + 1; c < lend; c++)
            if (!vchar((unsigned char)*c))
                return -EBADMSG;
        struct view name = {.p = p, .len = (size_t)(colon - p)};
        struct view value = trim(colon + 1, lend);
        if (name_is(name, "Content-Length")) {
            int64_t n;
            /* a list of equal values is one value (RFC 9110 8.6) */
            const char *c = memchr(value.p, ',', value.len);
            if (c) {
                struct view first = trim(value.p, c);
                if (parse_length(first, &n))
                    return -EBADMSG;
                for (const char *q = value.p; q < value.p + value.len;) {
                    const char *k = memchr(q, ',', (size_t)(value.p + value.len - q));
                    int64_t m;
                    if (parse_length(trim(q, k ? k : value.p + value.len), &m) || m != n)
                        return -EBADMSG;
                    q = k ? k + 1 : value.p + value.len;
                }
            } else if (parse_length(value, &n)) {
                return -EBADMSG;
            }
            if (h->content_length >= 0 && h->content_length != n)
                return -EBADMSG;
            h->content_length = n;
        } else if (name_is(name, "Transfer-Encoding")) {
            if (!value.len)
                return -EBADMSG;
            h->te = true;
            h->chunked = name_is(list_last(value), "chunked");
        } else if (name_is(name, "Connection")) {
            if (have_conn) /* two fields: the first's view stays; the rest is rare */
                h->conn_close = h->conn_close || list_has(value, "close");
            else
                h->connection = value;
            have_conn = true;
            h->conn_close = h->conn_close || list_has(value, "close");
            keep_alive = keep_alive || list_has(value, "keep-alive");
        }
        p = lnl + 1;
    }
    if (h->minor == 0 && !keep_alive)
        h->conn_close = true;
    if (h->te)
        h->content_length = -1; /* Transfer-Encoding overrides it (RFC 9112 6.3) */
    return end - buf;
}

void gw_fields_each(struct view fields, gw_field_fn fn, void *arg)
{
    const char *p = fields.p, *end = fields.p + fields.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon && colon > p) {
            struct view name = {.p = p, .len = (size_t)(colon - p)};
            if (!fn(name, trim(colon + 1, le), arg))
                return;
        }
        p = nl + 1;
    }
}

bool gw_hop_by_hop(struct view name, struct view conn)
{
    static const char *const hop[] = {"Connection", "Keep-Alive", "TE",
                                      "Trailer",    "Upgrade",    "Transfer-Encoding"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (name_is(name, hop[i]))
            return true;
    if (name.len >= 6 && mem_case_eq(name.p, "Proxy-", 6))
        return true;
    if (!conn.len)
        return false;
    /* a field the Connection field names */
    const char *p = conn.p, *end = conn.p + conn.len;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        struct view item = trim(p, c ? c : end);
        if (item.len == name.len && mem_case_eq(item.p, name.p, name.len))
            return true;
        p = c ? c + 1 : end;
    }
    return false;
}

/* --- the request going upstream ---------------------------------------------- */

struct req_walk {
    struct strbuf *out;
    const struct gw_req_out *r;
    struct view conn;
    struct view xff, fwd; /* the client's X-Forwarded-For and Forwarded, joined */
    int err;
};

static bool find_conn(struct view name, struct view value, void *arg)
{
    struct req_walk *w = arg;
    if (name_is(name, "Connection"))
        w->conn = value; /* the last one: a client sending two is rare and gains nothing */
    return true;
}

static int put(struct strbuf *b, const char *p, size_t n)
{
    return strbuf_append(b, p, n);
}
#define PUTS(b, s) put((b), (s), strlen(s))

static bool copy_req_field(struct view name, struct view value, void *arg)
{
    struct req_walk *w = arg;
    const struct gw_req_out *r = w->r;
    if (name_is(name, "Upgrade") && r->upgrade) {
        /* kept: the tunnel needs it */
    } else if (gw_hop_by_hop(name, w->conn)) {
        return true;
    }
    /* ours, or the body's framing, which is ours to say; Proxy: httpoxy */
    if (name_is(name, "Host") || name_is(name, "Content-Length") || name_is(name, "Proxy") ||
        name_is(name, "X-Forwarded-Proto") || name_is(name, "X-Forwarded-Host") ||
        name_is(name, "Expect"))
        return true;
    if (name_is(name, "X-Forwarded-For") || name_is(name, "Forwarded")) {
        struct view *v = name_is(name, "Forwarded") ? &w->fwd : &w->xff;
        /* joined below with ours: remember the first and count on one field
         * (several are joined in order as a list, RFC 9110 5.3) */
        if (!v->len) {
            *v = value;
            return true;
        }
        /* rare: a second field; keep it as it came, ours goes in the last */
    }
    w->err = w->err ? w->err
                    : (put(w->out, name.p, name.len) || put(w->out, ": ", 2) ||
                       put(w->out, value.p, value.len) || put(w->out, "\r\n", 2));
    return !w->err;
}

int gw_build_request(struct strbuf *out, const struct gw_req_out *r)
{
    struct req_walk w = {.out = out, .r = r};
    gw_fields_each(r->fields, find_conn, &w);
    int e = put(out, r->method.p, r->method.len) || put(out, " ", 1) ||
            put(out, r->target.p, r->target.len) || PUTS(out, " HTTP/1.1\r\nHost: ") ||
            put(out, r->host.p, r->host.len) || put(out, "\r\n", 2);
    if (e)
        return -ENOMEM;
    gw_fields_each(r->fields, copy_req_field, &w);
    if (w.err)
        return -ENOMEM;
    const char *proto = r->secure ? "https" : "http";
    bool v6 = strchr(r->client_addr, ':') != NULL;
    /* X-Forwarded-For: the client's list, then the client */
    e = PUTS(out, "X-Forwarded-For: ");
    if (w.xff.len)
        e = e || put(out, w.xff.p, w.xff.len) || PUTS(out, ", ");
    e = e || PUTS(out, r->client_addr[0] ? r->client_addr : "unknown") ||
        PUTS(out, "\r\nX-Forwarded-Proto: ") || PUTS(out, proto) || PUTS(out, "\r\n");
    if (r->client_host.len)
        e = e || PUTS(out, "X-Forwarded-Host: ") ||
            put(out, r->client_host.p, r->client_host.len) || PUTS(out, "\r\n");
    /* Forwarded (RFC 7239): an IPv6 address is quoted and bracketed; a
     * host that is not a plain token is quoted */
    e = e || PUTS(out, "Forwarded: ");
    if (w.fwd.len)
        e = e || put(out, w.fwd.p, w.fwd.len) || PUTS(out, ", ");
    e = e || PUTS(out, "for=");
    if (!r->client_addr[0])
        e = e || PUTS(out, "unknown");
    else if (v6)
        e = e || PUTS(out, "\"[") || PUTS(out, r->client_addr) || PUTS(out, "]\"");
    else
        e = e || PUTS(out, r->client_addr);
    bool host_token = r->client_host.len > 0;
    for (size_t i = 0; i < r->client_host.len; i++)
        if (!tchar((unsigned char)r->client_host.p[i]) && r->client_host.p[i] != ':')
            host_token = false;
    if (r->client_host.len) {
        e = e || PUTS(out, ";host=");
        if (host_token && !memchr(r->client_host.p, ':', r->client_host.len))
            e = e || put(out, r->client_host.p, r->client_host.len);
        else {
            e = e || put(out, "\"", 1);
            for (size_t i = 0; i < r->client_host.len && !e; i++) {
                char c = r->client_host.p[i];
                if (c == '"' || c == '\\')
                    e = put(out, "\\", 1);
                e = e || put(out, &c, 1);
            }
            e = e || put(out, "\"", 1);
        }
    }
    e = e || PUTS(out, ";proto=") || PUTS(out, proto) || PUTS(out, "\r\n");
    if (r->chunked)
        e = e || PUTS(out, "Transfer-Encoding: chunked\r\n");
    else if (r->content_length >= 0)
        e = e || PUTS(out, "Content-Length: ") ||
            strbuf_append_u64(out, (uint64_t)r->content_length) || PUTS(out, "\r\n");
    e = e ||
        PUTS(out, r->upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
    return e ? -ENOMEM : 0;
}

/* --- the answer's fields for the client -------------------------------------- */

struct resp_walk {
    struct strbuf *out;
    const struct gw_resp_head *h;
    int err;
};

static bool copy_resp_field(struct view name, struct view value, void *arg)
{
    struct resp_walk *w = arg;
    bool upgrade = w->h->status == 101 && name_is(name, "Upgrade");
    if (!upgrade && gw_hop_by_hop(name, w->h->connection))
        return true;
    if (name_is(name, "Server") || name_is(name, "Date") || name_is(name, "Content-Length"))
        return true;
    w->err = put(w->out, name.p, name.len) || put(w->out, ": ", 2) ||
             put(w->out, value.p, value.len) || put(w->out, "\r\n", 2);
    return !w->err;
}

int gw_answer_fields(struct strbuf *out, const struct gw_resp_head *h)
{
    struct resp_walk w = {.out = out, .h = h};
    gw_fields_each(h->fields, copy_resp_field, &w);
    if (!w.err && h->status == 101)
        w.err = PUTS(out, "Connection: upgrade\r\n");
    return w.err ? -ENOMEM : 0;
}
