/* fcgi.c - FastCGI records and CGI heads (see fcgi.h). */
#include "gateway/fcgi.h"

#include <errno.h>
#include <string.h>

#include "gateway/uphead.h"

int fcgi_parse_header(const unsigned char *p, struct fcgi_rec *r)
{
    if (p[0] != 1)
        return -EBADMSG;
    r->type = p[1];
    r->id = (uint16_t)(p[2] << 8 | p[3]);
    r->len = (uint16_t)(p[4] << 8 | p[5]);
    r->pad = p[6];
    return 0;
}

void fcgi_header(unsigned char *h, enum fcgi_type type, uint16_t id, uint16_t len, uint8_t pad)
{
    h[0] = 1;
    h[1] = (unsigned char)type;
    h[2] = (unsigned char)(id >> 8);
    h[3] = (unsigned char)id;
    h[4] = (unsigned char)(len >> 8);
    h[5] = (unsigned char)len;
    h[6] = pad;
    h[7] = 0;
}

int fcgi_begin(struct strbuf *out, uint16_t id)
{
    unsigned char r[16];
    fcgi_header(r, FCGI_BEGIN_REQUEST, id, 8, 0);
    memset(r + 8, 0, 8);
    r[9] = 1;  /* FCGI_RESPONDER */
    r[10] = 1; /* FCGI_KEEP_CONN */
    return strbuf_append(out, r, sizeof(r));
}

static int put_len(struct strbuf *b, size_t n)
{
    if (n < 128) {
        unsigned char c = (unsigned char)n;
        return strbuf_append(b, &c, 1);
    }
    unsigned char c[4] = {(unsigned char)(0x80 | (n >> 24)), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    return strbuf_append(b, c, 4);
}

int fcgi_pair(struct strbuf *b, const char *name, size_t nl, const char *value, size_t vl)
{
    if (nl > 0x7fffffff || vl > 0x7fffffff)
        return -EINVAL;
    if (strbuf_reserve(b, 8 + nl + vl))
        return -ENOMEM;
    /* the room is there: these appends do not fail */
    put_len(b, nl);
    put_len(b, vl);
    if (nl)
        memcpy(b->buf + b->len, name, nl);
    if (vl)
        memcpy(b->buf + b->len + nl, value, vl);
    b->len += nl + vl;
    b->buf[b->len] = '\0';
    return 0;
}

int fcgi_stream(struct strbuf *out, enum fcgi_type type, uint16_t id, const char *p, size_t len,
                bool end)
{
    static const char zeros[8];
    while (len) {
        size_t n = len < FCGI_CONTENT_MAX ? len : FCGI_CONTENT_MAX;
        uint8_t pad = (uint8_t)((8 - n % 8) % 8);
        unsigned char h[FCGI_HEADER_LEN];
        fcgi_header(h, type, id, (uint16_t)n, pad);
        if (strbuf_append(out, h, sizeof(h)) || strbuf_append(out, p, n) ||
            strbuf_append(out, zeros, pad))
            return -ENOMEM;
        p += n;
        len -= n;
    }
    if (end) {
        unsigned char h[FCGI_HEADER_LEN];
        fcgi_header(h, type, id, 0, 0);
        if (strbuf_append(out, h, sizeof(h)))
            return -ENOMEM;
    }
    return 0;
}

/* The size of the pair at p (its lengths and bytes), at most len. */
static size_t pair_size(const unsigned char *p, size_t len)
{
    size_t at = 0, n[2];
    for (int k = 0; k < 2; k++) {
        if (at >= len)
            return len;
        if (p[at] & 0x80) {
            if (at + 4 > len)
                return len;
            n[k] = (size_t)(p[at] & 0x7f) << 24 | (size_t)p[at + 1] << 16 | (size_t)p[at + 2] << 8 |
                   p[at + 3];
            at += 4;
        } else {
            n[k] = p[at++];
        }
    }
    size_t total = at + n[0] + n[1];
    return total < len ? total : len;
}

int fcgi_params(struct strbuf *out, uint16_t id, const char *p, size_t len)
{
    size_t start = 0, pos = 0;
    while (pos < len) {
        size_t n = pair_size((const unsigned char *)p + pos, len - pos);
        if (pos > start && pos + n - start > FCGI_CONTENT_MAX) {
            if (fcgi_stream(out, FCGI_PARAMS, id, p + start, pos - start, false))
                return -ENOMEM;
            start = pos;
        }
        pos += n;
    }
    return fcgi_stream(out, FCGI_PARAMS, id, p + start, len - start, true);
}

/* --- the CGI head ------------------------------------------------------------ */

static bool name_is(struct view n, const char *s)
{
    size_t l = strlen(s);
    return n.len == l && mem_case_eq(n.p, s, l);
}

static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

struct head_walk {
    struct cgi_head *h;
    bool location, status, bad;
};

static bool scan_field(struct view name, struct view value, void *arg)
{
    struct head_walk *w = arg;
    if (name_is(name, "Status")) {
        if (w->status || value.len < 3)
            return !(w->bad = true);
        int st = 0;
        for (int i = 0; i < 3; i++) {
            if (value.p[i] < '0' || value.p[i] > '9')
                return !(w->bad = true);
            st = st * 10 + (value.p[i] - '0');
        }
        if (st < 200 || st > 599 || (value.len > 3 && value.p[3] != ' '))
            return !(w->bad = true);
        w->h->status = st;
        w->status = true;
    } else if (name_is(name, "Location")) {
        w->location = true;
    } else if (name_is(name, "Content-Length")) {
        int64_t n = 0;
        if (!value.len || value.len > 18)
            return !(w->bad = true);
        for (size_t i = 0; i < value.len; i++) {
            if (value.p[i] < '0' || value.p[i] > '9')
                return !(w->bad = true);
            n = n * 10 + (value.p[i] - '0');
        }
        if (w->h->content_length >= 0 && w->h->content_length != n)
            return !(w->bad = true);
        w->h->content_length = n;
    }
    return true;
}

ssize_t cgi_parse_head(const char *buf, size_t len, size_t max, struct cgi_head *h)
{
    *h = (struct cgi_head){.status = 200, .content_length = -1};
    size_t scan = len < max ? len : max;
    const char *end = NULL;
    for (const char *p = buf; p < buf + scan;) {
        const char *nl = memchr(p, '\n', (size_t)(buf + scan - p));
        if (!nl)
            break;
        const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (le == p) {
            end = nl + 1;
            break;
        }
        /* each line a field: a token, a colon, visible bytes and blanks */
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            return -EBADMSG;
        for (const char *c = p; c < colon; c++)
            if (!tchar((unsigned char)*c))
                return -EBADMSG;
        for (const char *c = colon + 1; c < le; c++)
            if ((unsigned char)*c < 0x20 ? *c != '\t' : *c == 0x7f)
                return -EBADMSG;
        p = nl + 1;
    }
    if (!end)
        return len >= max ? -EMSGSIZE : 0;
    h->fields = (struct view){.p = buf, .len = (size_t)(end - buf)};
    struct head_walk w = {.h = h};
    gw_fields_each(h->fields, scan_field, &w);
    if (w.bad)
        return -EBADMSG;
    if (w.location && !w.status)
        h->status = 302;
    return end - buf;
}

struct copy_walk {
    struct strbuf *out;
    int err;
};

static bool copy_field(struct view name, struct view value, void *arg)
{
    struct copy_walk *w = arg;
    if (name_is(name, "Status") || name_is(name, "Content-Length") || name_is(name, "Server") ||
        name_is(name, "Date") || gw_hop_by_hop(name, (struct view){"", 0}))
        return true;
    w->err = strbuf_append(w->out, name.p, name.len) || strbuf_append(w->out, ": ", 2) ||
             strbuf_append(w->out, value.p, value.len) || strbuf_append(w->out, "\r\n", 2);
    return !w->err;
}

int cgi_answer_fields(struct strbuf *out, const struct cgi_head *h)
{
    struct copy_walk w = {.out = out};
    gw_fields_each(h->fields, copy_field, &w);
    return w.err ? -ENOMEM : 0;
}
