/* parser.c - the HTTP/1.1 request parser (RFC 9112).
 *
 * http_parse_head() is one left-to-right scan. Every error is decided at the
 * first byte that makes it certain, and the checks that need the whole head
 * (Host count, framing, expectations) run only once the head is complete. So a
 * prefix of an input never yields an error that the whole input would not:
 * a caller that parses again with more bytes never sees its verdict change,
 * except that "incomplete" becomes an answer.
 */
#include "http/parser.h"

#include <string.h>

/* ---- character classes ---------------------------------------------------- */

enum {
    C_TCHAR = 1 << 0,  /* token character (field names, methods, codings) */
    C_VALUE = 1 << 1,  /* field-value byte: VCHAR, obs-text, SP, HTAB */
    C_TARGET = 1 << 2, /* accepted in a request-target */
    C_HOST = 1 << 3,   /* reg-name: unreserved / sub-delims ('%' is checked apart) */
    C_HEX = 1 << 4,
    C_DIGIT = 1 << 5,
};

#define IS_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_HEX(c)   (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F'))
#define IS_TCHAR(c)                                                                                \
    (IS_ALPHA(c) || IS_DIGIT(c) || (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' ||         \
     (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' ||          \
     (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' || (c) == '~')
#define IS_VALUE(c)  (((c) >= 0x20 && (c) != 0x7f) || (c) == '\t')
#define IS_TARGET(c) ((c) > 0x20 && (c) < 0x7f && (c) != '#')
#define IS_SUBDELIM(c)                                                                             \
    ((c) == '!' || (c) == '$' || (c) == '&' || (c) == '\'' || (c) == '(' || (c) == ')' ||          \
     (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' || (c) == '=')
#define IS_HOST(c)                                                                                 \
    (IS_ALPHA(c) || IS_DIGIT(c) || (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' ||         \
     IS_SUBDELIM(c))

#define CLASS_OF(c)                                                                                \
    ((IS_TCHAR(c) ? C_TCHAR : 0) | (IS_VALUE(c) ? C_VALUE : 0) | (IS_TARGET(c) ? C_TARGET : 0) |   \
     (IS_HOST(c) ? C_HOST : 0) | (IS_HEX(c) ? C_HEX : 0) | (IS_DIGIT(c) ? C_DIGIT : 0))
#define LOWER_OF(c) ((c) | ((c) >= 'A' && (c) <= 'Z' ? 0x20 : 0))

/* The tables are computed by the compiler from the predicates above, so the
 * grammar is stated once, readably, and costs one load per byte. */
#define ROW(F, b)                                                                                  \
    F((b) + 0), F((b) + 1), F((b) + 2), F((b) + 3), F((b) + 4), F((b) + 5), F((b) + 6),            \
        F((b) + 7), F((b) + 8), F((b) + 9), F((b) + 10), F((b) + 11), F((b) + 12), F((b) + 13),    \
        F((b) + 14), F((b) + 15)
#define TABLE(F)                                                                                   \
    {                                                                                              \
        ROW(F, 0x00), ROW(F, 0x10), ROW(F, 0x20), ROW(F, 0x30), ROW(F, 0x40), ROW(F, 0x50),        \
            ROW(F, 0x60), ROW(F, 0x70), ROW(F, 0x80), ROW(F, 0x90), ROW(F, 0xa0), ROW(F, 0xb0),    \
            ROW(F, 0xc0), ROW(F, 0xd0), ROW(F, 0xe0), ROW(F, 0xf0)                                 \
    }

static const uint8_t char_class[256] = TABLE(CLASS_OF);
static const uint8_t lower_tab[256] = TABLE(LOWER_OF);

static inline bool is(char c, unsigned mask)
{
    return char_class[(unsigned char)c] & mask;
}

static inline int hex_val(char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static inline bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* First byte at or after p that is not in the class, or end. */
static inline const char *scan_class(const char *p, const char *end, unsigned mask)
{
    while (end - p >= 4) {
        if (!is(p[0], mask))
            return p;
        if (!is(p[1], mask))
            return p + 1;
        if (!is(p[2], mask))
            return p + 2;
        if (!is(p[3], mask))
            return p + 3;
        p += 4;
    }
    while (p < end && is(*p, mask))
        p++;
    return p;
}

/* ASCII case-insensitive comparison; either side may be any bytes. */
static bool case_eq(const char *a, const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (lower_tab[(unsigned char)a[i]] != lower_tab[(unsigned char)b[i]])
            return false;
    return true;
}

static inline struct view mkview(const char *p, const char *end)
{
    return (struct view){.p = p, .len = (size_t)(end - p)};
}

/* ---- methods -------------------------------------------------------------- */

/* The recogniser below must agree with COLIBRI_METHODS in colibri.h:
 * tests/unit/test_parser.c parses every name of that list. */

/* Methods are case-sensitive (RFC 9110 9.1): "get" is simply unknown. */
static int method_lookup(const char *m, size_t n)
{
    switch (n) {
    case 3:
        if (memcmp(m, "GET", 3) == 0)
            return COLIBRI_GET;
        if (memcmp(m, "PUT", 3) == 0)
            return COLIBRI_PUT;
        break;
    case 4:
        if (memcmp(m, "HEAD", 4) == 0)
            return COLIBRI_HEAD;
        if (memcmp(m, "POST", 4) == 0)
            return COLIBRI_POST;
        break;
    case 5:
        if (memcmp(m, "PATCH", 5) == 0)
            return COLIBRI_PATCH;
        if (memcmp(m, "TRACE", 5) == 0)
            return COLIBRI_TRACE;
        break;
    case 6:
        if (memcmp(m, "DELETE", 6) == 0)
            return COLIBRI_DELETE;
        break;
    case 7:
        if (memcmp(m, "OPTIONS", 7) == 0)
            return COLIBRI_OPTIONS;
        break;
    }
    return -1;
}

#define METHOD_MAX_LEN 16

/* ---- field values ----------------------------------------------------------- */

/* uri-host [ ":" port ], where uri-host is an IP-literal or a reg-name (an
 * IPv4 address is a reg-name by its characters). Only a wholly empty value is
 * accepted as empty: RFC 9110 7.2 has clients send that for targets without an
 * authority. A port, when its ':' is there, is 1 to 5 digits up to 65535. */
static bool host_valid(const char *s, size_t n, bool allow_empty)
{
    size_t i = 0;
    if (n == 0)
        return allow_empty;
    if (s[0] == '[') {
        bool colon = false;
        for (i = 1; i < n && (is(s[i], C_HEX) || s[i] == ':' || s[i] == '.'); i++)
            colon |= s[i] == ':';
        if (!colon || i == n || s[i] != ']')
            return false;
        i++;
    } else {
        while (i < n && s[i] != ':') {
            if (s[i] == '%') {
                if (n - i < 3 || !is(s[i + 1], C_HEX) || !is(s[i + 2], C_HEX))
                    return false;
                i += 3;
            } else if (is(s[i], C_HOST)) {
                i++;
            } else {
                return false;
            }
        }
        if (i == 0)
            return false;
    }
    if (i == n)
        return true;
    if (s[i] != ':' || n - i < 2 || n - i > 6)
        return false;
    unsigned port = 0;
    for (i++; i < n; i++) {
        if (!IS_DIGIT(s[i]))
            return false;
        port = port * 10 + (unsigned)(s[i] - '0');
    }
    return port <= 65535;
}

/* Splits off the next element of a comma-separated list, OWS trimmed. *cur is
 * NULL once the list is exhausted. */
static struct view list_next(const char **cur, const char *end)
{
    const char *p = *cur;
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *e = comma ? comma : end;
    *cur = comma ? comma + 1 : NULL;
    while (p < e && is_ows(*p))
        p++;
    while (e > p && is_ows(e[-1]))
        e--;
    return mkview(p, e);
}

/* Content-Length = 1*DIGIT. A list of equal values, or several fields with
 * equal values, is the same length repeated (RFC 9112 6.3); anything else,
 * including an empty element, is a framing error. */
static int content_length(const char *v, size_t n, int64_t *cl)
{
    const char *cur = v, *end = v + n;
    while (cur) {
        struct view e = list_next(&cur, end);
        if (e.len == 0)
            return -400;
        int64_t x = 0;
        for (size_t i = 0; i < e.len; i++) {
            if (!IS_DIGIT(e.p[i]))
                return -400;
            int d = e.p[i] - '0';
            if (x > (INT64_MAX - d) / 10)
                return -400;
            x = x * 10 + d;
        }
        if (*cl >= 0 && *cl != x)
            return -400;
        *cl = x;
    }
    return 0;
}

struct te_state {
    bool present;
    bool last_chunked; /* the last coding so far is chunked */
    bool bad;          /* chunked not last, or chunked with parameters: 400 */
    bool unknown;      /* a coding we do not implement: 501 */
};

/* Transfer-Encoding = #transfer-coding; the fields of several TE lines form
 * one list. Verdicts wait for the end of the head: "chunked" followed by
 * anything is a 400 even if an unknown coding was seen first. */
static int transfer_encoding(const char *v, size_t n, struct te_state *te)
{
    const char *cur = v, *end = v + n;
    te->present = true;
    while (cur) {
        struct view e = list_next(&cur, end);
        const char *tok_end = scan_class(e.p, e.p + e.len, C_TCHAR);
        size_t tok_len = (size_t)(tok_end - e.p);
        if (tok_len == 0)
            return -400;
        const char *q = tok_end;
        while (q < e.p + e.len && is_ows(*q))
            q++;
        bool params = q < e.p + e.len;
        if (params && *q != ';')
            return -400;
        bool chunked = tok_len == 7 && case_eq(e.p, "chunked", 7);
        if (te->last_chunked || (chunked && params))
            te->bad = true;
        te->last_chunked = chunked;
        if (!chunked)
            te->unknown = true;
    }
    return 0;
}

/* Connection = #connection-option; only close and keep-alive matter here.
 * Empty elements are ignored as RFC 9110 5.6.1 asks. */
static int connection(const char *v, size_t n, uint16_t *flags)
{
    const char *cur = v, *end = v + n;
    while (cur) {
        struct view e = list_next(&cur, end);
        if (e.len == 0)
            continue;
        if (scan_class(e.p, e.p + e.len, C_TCHAR) != e.p + e.len)
            return -400;
        if (e.len == 5 && case_eq(e.p, "close", 5))
            *flags |= HTTP_F_CONN_CLOSE;
        else if (e.len == 10 && case_eq(e.p, "keep-alive", 10))
            *flags |= HTTP_F_CONN_KEEP_ALIVE;
    }
    return 0;
}

/* ---- the request-target ------------------------------------------------------ */

/* Classifies a syntactically clean target (no CTL, SP, DEL, '#', non-ASCII)
 * and splits it into path and query. */
static int split_target(struct http_head *h, const char *t, size_t n)
{
    const char *end = t + n;
    const char *q = memchr(t, '?', n);
    const char *path_end = q ? q : end;

    if (t[0] == '/') {
        h->path = mkview(t, path_end);
    } else if (n == 1 && t[0] == '*') {
        if (h->method != COLIBRI_OPTIONS)
            return -400;
        h->path = mkview(t, end);
        h->query = mkview(end, end);
        h->flags |= HTTP_F_ASTERISK;
        return 0;
    } else {
        size_t s;
        if (n >= 7 && case_eq(t, "http://", 7))
            s = 7;
        else if (n >= 8 && case_eq(t, "https://", 8))
            s = 8;
        else
            return -400; /* authority-form, other schemes, relative references */
        const char *a = t + s, *a_end = a;
        while (a_end < path_end && *a_end != '/')
            a_end++;
        /* userinfo ('@') fails here too, as RFC 9110 4.2.4 asks */
        if (!host_valid(a, (size_t)(a_end - a), false))
            return -400;
        h->host = mkview(a, a_end);
        h->flags |= HTTP_F_ABSOLUTE;
        /* An empty path is "/": point at the second slash of "//", so the
         * view still lies inside the caller's buffer. */
        h->path = a_end < path_end ? mkview(a_end, path_end) : mkview(a - 1, a);
    }
    if (q) {
        h->flags |= HTTP_F_HAS_QUERY;
        h->query = mkview(q + 1, end);
    } else {
        h->query = mkview(end, end);
    }
    return 0;
}

/* ---- the head ------------------------------------------------------------------ */

ssize_t http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
                        struct http_head *head)
{
    const char *p = buf, *const buf_end = buf + len;

    /* RFC 9112 2.2: empty lines before a request are ignored, but only as CRLF */
    while (p < buf_end && (*p == '\r' || *p == '\n')) {
        if (*p == '\n')
            return -400;
        if (buf_end - p < 2)
            return 0;
        if (p[1] != '\n')
            return -400;
        p += 2;
    }
    if (p == buf_end)
        return 0;

    /* Scan no further than the head may reach: running into this end when the
     * buffer goes on is the limit error, not "incomplete". */
    const char *const start = p;
    const char *end = buf_end;
    bool capped = false;
    if ((size_t)(buf_end - start) > lim->max_head) {
        end = start + lim->max_head;
        capped = true;
    }

    head->content_length = -1;
    head->flags = 0;
    head->version_minor = 1;

    /* method */
    const char *m = p;
    p = scan_class(p, end, C_TCHAR);
    if (p - m > METHOD_MAX_LEN)
        return -501;
    if (p == end)
        goto line_more;
    if (*p != ' ' || p == m)
        return -400;
    head->method_str = mkview(m, p);
    p++;

    /* request-target: first only its bytes, the form once the line is whole */
    const char *t = p;
    p = scan_class(p, end, C_TARGET);
    size_t tlen = (size_t)(p - t);
    if (tlen > lim->max_target)
        return -414;
    if (p == end)
        goto line_more;
    if (*p != ' ' || tlen == 0)
        return -400;
    head->target = mkview(t, p);
    p++;

    /* HTTP-version CRLF */
    if (likely(end - p >= 10 && memcmp(p, "HTTP/1.1\r\n", 10) == 0)) {
        p += 10;
    } else {
        static const char proto[] = "HTTP/";
        for (int i = 0; i < 5; i++, p++) {
            if (p == end)
                goto line_more;
            if (*p != proto[i])
                return -400;
        }
        if (p == end)
            goto line_more;
        if (!IS_DIGIT(*p))
            return -400;
        if (*p != '1')
            return -505; /* also the HTTP/2 preface, "PRI * HTTP/2.0" */
        if (++p == end)
            goto line_more;
        if (*p != '.')
            return -400;
        if (++p == end)
            goto line_more;
        if (!IS_DIGIT(*p))
            return -400;
        head->version_minor = *p != '0';
        if (++p == end)
            goto line_more;
        if (*p != '\r')
            return -400;
        if (++p == end)
            goto line_more;
        if (*p != '\n')
            return -400;
        p++;
    }

    int method = method_lookup(m, head->method_str.len);
    if (method < 0)
        return -501;
    head->method = (enum colibri_method)method;
    head->host = mkview(t, t);
    int rc = split_target(head, t, tlen);
    if (rc < 0)
        return rc;

    /* header fields */
    const char *const fields = p;
    const char *fields_end = p;
    unsigned hosts = 0;
    bool expect_bad = false;
    struct te_state te = {0};
    for (;;) {
        if (p == end)
            goto fields_more;
        if (*p == '\r') {
            if (++p == end)
                goto fields_more;
            if (*p != '\n')
                return -400;
            p++;
            break;
        }
        /* A line starting with SP or HTAB (obs-fold, or whitespace after the
         * request line) fails here as an empty field name. */
        const char *name = p;
        p = scan_class(p, end, C_TCHAR);
        if (p == end)
            goto fields_more;
        if (*p != ':' || p == name)
            return -400;
        size_t name_len = (size_t)(p - name);
        p++;
        while (p < end && is_ows(*p))
            p++;
        const char *val = p;
        p = scan_class(p, end, C_VALUE);
        if (p == end)
            goto fields_more;
        if (*p != '\r')
            return -400;
        const char *val_end = p;
        while (val_end > val && is_ows(val_end[-1]))
            val_end--;
        if (++p == end)
            goto fields_more;
        if (*p != '\n')
            return -400;
        p++;
        fields_end = p;

        size_t vlen = (size_t)(val_end - val);
        switch (name_len) {
        case 4:
            if (case_eq(name, "host", 4)) {
                if (++hosts > 1 || !host_valid(val, vlen, true))
                    return -400;
                if (!(head->flags & HTTP_F_ABSOLUTE))
                    head->host = mkview(val, val_end);
            }
            break;
        case 6:
            if (case_eq(name, "expect", 6)) {
                if (vlen == 12 && case_eq(val, "100-continue", 12)) {
                    /* RFC 9110 10.1.1: ignored in an HTTP/1.0 request */
                    if (head->version_minor)
                        head->flags |= HTTP_F_EXPECT_CONTINUE;
                } else {
                    expect_bad = true;
                }
            }
            break;
        case 10:
            if (case_eq(name, "connection", 10) && (rc = connection(val, vlen, &head->flags)) < 0)
                return rc;
            break;
        case 14:
            if (case_eq(name, "content-length", 14) &&
                (rc = content_length(val, vlen, &head->content_length)) < 0)
                return rc;
            break;
        case 17:
            if (case_eq(name, "transfer-encoding", 17) &&
                (rc = transfer_encoding(val, vlen, &te)) < 0)
                return rc;
            break;
        }
    }
    head->headers = mkview(fields, fields_end);

    /* RFC 9112 3.2: exactly one Host in HTTP/1.1 (more than one failed above) */
    if (hosts == 0 && head->version_minor)
        return -400;
    if (te.present) {
        /* RFC 9112 6.1 and 6.3: TE in 1.0 or next to Content-Length is a
         * framing a peer may read differently: refuse both. */
        if (!head->version_minor || head->content_length >= 0 || te.bad)
            return -400;
        if (te.unknown)
            return -501;
        head->flags |= HTTP_F_CHUNKED;
    }
    if (expect_bad)
        return -417;
    return p - buf;

line_more:
    return capped ? -414 : 0;
fields_more:
    return capped ? -431 : 0;
}

/* ---- lookups on demand --------------------------------------------------------- */

bool http_header_find(struct view headers, const char *name, size_t name_len, struct view *value)
{
    const char *p = headers.p, *end = headers.p + headers.len;
    while (p < end) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (!colon)
            return false;
        const char *cr = memchr(colon, '\r', (size_t)(end - colon));
        if (!cr)
            cr = end;
        if ((size_t)(colon - p) == name_len && case_eq(p, name, name_len)) {
            const char *v = colon + 1;
            while (v < cr && is_ows(*v))
                v++;
            const char *v_end = cr;
            while (v_end > v && is_ows(v_end[-1]))
                v_end--;
            *value = mkview(v, v_end);
            return true;
        }
        if (end - cr < 2)
            return false;
        p = cr + 2;
    }
    return false;
}

bool http_query_find(struct view query, const char *name, size_t name_len, struct view *value)
{
    const char *p = query.p, *end = query.p + query.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *seg_end = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(seg_end - p));
        const char *name_end = eq ? eq : seg_end;
        /* "&&" is no parameter, not one with an empty name */
        if (seg_end > p && (size_t)(name_end - p) == name_len &&
            (name_len == 0 || memcmp(p, name, name_len) == 0)) {
            *value = eq ? mkview(eq + 1, seg_end) : mkview(seg_end, seg_end);
            return true;
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    return false;
}

bool http_cookie_find(struct view cookies, const char *name, size_t name_len, struct view *value)
{
    const char *p = cookies.p, *end = cookies.p + cookies.len;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *pair_end = semi ? semi : end;
        while (p < pair_end && is_ows(*p))
            p++;
        const char *eq = memchr(p, '=', (size_t)(pair_end - p));
        /* a pair without '=' is ignored (RFC 6265 5.2) */
        if (eq) {
            const char *n_end = eq;
            while (n_end > p && is_ows(n_end[-1]))
                n_end--;
            if ((size_t)(n_end - p) == name_len &&
                (name_len == 0 || memcmp(p, name, name_len) == 0)) {
                const char *v = eq + 1, *v_end = pair_end;
                while (v < v_end && is_ows(*v))
                    v++;
                while (v_end > v && is_ows(v_end[-1]))
                    v_end--;
                if (v_end - v >= 2 && *v == '"' && v_end[-1] == '"') {
                    v++;
                    v_end--;
                }
                *value = mkview(v, v_end);
                return true;
            }
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    return false;
}

ssize_t http_percent_decode(char *dst, const char *src, size_t len, bool plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (len - i < 3 || !is(src[i + 1], C_HEX) || !is(src[i + 2], C_HEX))
                return -1;
            c = (char)(hex_val(src[i + 1]) << 4 | hex_val(src[i + 2]));
            /* a decoded NUL, CR or LF would cut or split whatever uses it next */
            if (c == '\0' || c == '\r' || c == '\n')
                return -1;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        dst[o++] = c;
    }
    return (ssize_t)o;
}

/* ---- chunked bodies ---------------------------------------------------------------- */

enum {
    CH_SIZE_FIRST = 0, /* the first HEXDIG of a chunk-size */
    CH_SIZE,           /* more HEXDIG, ';', BWS or CR */
    CH_BWS,            /* whitespace after the size: only ';' may follow */
    CH_EXT,            /* inside chunk-ext, up to CR */
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_LINE, /* start of a trailer field line, or of the final CRLF */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_FINAL_LF,
};

ssize_t http_chunked_decode(struct http_chunked *st, char *buf, size_t len, size_t *payload)
{
    size_t in = 0, out = 0;
    *payload = 0;
    while (in < len && !st->done) {
        char c = buf[in];
        switch (st->state) {
        case CH_DATA: {
            size_t n = len - in;
            if (n > st->remaining)
                n = (size_t)st->remaining;
            /* payload only ever moves towards the front: out <= in */
            if (out != in)
                memmove(buf + out, buf + in, n);
            out += n;
            in += n;
            st->remaining -= n;
            if (st->remaining == 0)
                st->state = CH_DATA_CR;
            continue;
        }
        case CH_SIZE_FIRST:
            if (!is(c, C_HEX))
                return -400;
            st->remaining = (uint64_t)hex_val(c);
            st->ext_len = 0;
            st->state = CH_SIZE;
            break;
        case CH_SIZE:
            if (is(c, C_HEX)) {
                /* zero padding is free to send, so it counts as extension */
                if (st->remaining == 0 && ++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                    return -400;
                if (st->remaining >> 60)
                    return -400; /* a 17th significant digit */
                st->remaining = st->remaining << 4 | (uint64_t)hex_val(c);
                break;
            }
            if (c == '\r') {
                st->state = CH_SIZE_LF;
                break;
            }
            if (c == ';')
                st->state = CH_EXT;
            else if (is_ows(c))
                st->state = CH_BWS;
            else
                return -400;
            if (++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -400;
            break;
        case CH_BWS:
            if (c == ';')
                st->state = CH_EXT;
            else if (!is_ows(c))
                return -400;
            if (++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -400;
            break;
        case CH_EXT:
            if (c == '\r') {
                st->state = CH_SIZE_LF;
                break;
            }
            if (!is(c, C_VALUE) || ++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -400;
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return -400;
            st->state = st->remaining ? CH_DATA : CH_TRAILER_LINE;
            break;
        case CH_DATA_CR:
            if (c != '\r')
                return -400;
            st->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return -400;
            st->state = CH_SIZE_FIRST;
            break;
        case CH_TRAILER_LINE:
            if (c == '\r') {
                st->state = CH_FINAL_LF;
                break;
            }
            /* trailer fields obey the field syntax: no obs-fold, no empty name */
            if (!is(c, C_TCHAR))
                return -400;
            st->state = CH_TRAILER_NAME;
            goto count_trailer;
        case CH_TRAILER_NAME:
            if (c == ':')
                st->state = CH_TRAILER_VALUE;
            else if (!is(c, C_TCHAR))
                return -400;
            goto count_trailer;
        case CH_TRAILER_VALUE:
            if (c == '\r')
                st->state = CH_TRAILER_LF;
            else if (!is(c, C_VALUE))
                return -400;
            goto count_trailer;
        case CH_TRAILER_LF:
            if (c != '\n')
                return -400;
            st->state = CH_TRAILER_LINE;
        count_trailer:
            if (++st->trailer_len > HTTP_CHUNKED_MAX_TRAILERS)
                return -400;
            break;
        case CH_FINAL_LF:
            if (c != '\n')
                return -400;
            st->done = true;
            break;
        default:
            return -400; /* a corrupted state: never guess */
        }
        in++;
    }
    *payload = out;
    return (ssize_t)in;
}
