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

#include <errno.h>
#include <string.h>

#include "http/chars.h"

/* Rare forms and fields are parsed out of line, so the hot path keeps few
 * registers and a short prologue. */
#define COLD __attribute__((cold, noinline))

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

/* What the field loop notes for the checks at the end of the head, one bit
 * each: in the usual head only ST_HOST is set. */
enum {
    ST_HOST = 1u << 0,            /* a Host field was there */
    ST_TE = 1u << 1,              /* a Transfer-Encoding field was there */
    ST_TE_LAST_CHUNKED = 1u << 2, /* the last coding so far is chunked */
    ST_TE_BAD = 1u << 3,          /* chunked not last, or chunked with parameters: 400 */
    ST_TE_UNKNOWN = 1u << 4,      /* a coding we do not implement: 501 */
    ST_EXPECT_BAD = 1u << 5,      /* an expectation other than 100-continue: 417 */
};

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
        /* runs of reg-name characters (':' and '%' are not), escapes between */
        for (;;) {
            i = (size_t)(scan_class(s + i, s + n, C_HOST) - s);
            if (i == n || s[i] != '%')
                break;
            if (n - i < 3 || !is(s[i + 1], C_HEX) || !is(s[i + 2], C_HEX))
                return false;
            i += 3;
        }
        if (i == 0)
            return false;
        /* after the name, anything but ":port" fails below */
    }
    if (i == n)
        return true;
    if (s[i] != ':' || n - i < 2 || n - i > 6)
        return false;
    const char *port = s + i + 1;
    if (scan_class(port, s + n, C_DIGIT) != s + n)
        return false;
    if (n - i < 6)
        return true; /* up to four digits */
    /* five digits compare as strings as they do as numbers */
    static const char max[] = "65535";
    for (int k = 0; k < 5; k++)
        if (port[k] != max[k])
            return port[k] < max[k];
    return true;
}

#if HTTP_SIMD
/* The usual Host values, a lower-case name or an IPv4 address with an
 * optional port ("127.0.0.1:8080", "example.com"), checked 16 bytes at
 * once: every byte one of [0-9a-z.-:], at most one ':', not first, and
 * after it 1 to 5 digits up to 65535. Returns 1 valid, 0 invalid, -1 when
 * the value is something else (longer than 16 bytes, upper case, other
 * characters, an IP literal, escapes): host_valid() then decides. The
 * caller guarantees 16 readable bytes at s; only the first n count. */
static inline __attribute__((always_inline)) int host_valid_x(__m128i x, const char *s, size_t n);

static int host_valid_fast(const char *s, size_t n)
{
    if (n == 0 || n > 16)
        return -1;
    return host_valid_x(_mm_loadu_si128((const __m128i *)(const void *)s), s, n);
}

/* host_valid_fast() once x holds the 16 bytes at s and 1 <= n <= 16 */
static inline __attribute__((always_inline)) int host_valid_x(__m128i x, const char *s, size_t n)
{
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('0')), l = _mm_sub_epi8(x, _mm_set1_epi8('a'));
    /* x - lo <= hi - lo as one unsigned compare (min(v, k) == v) */
    __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
    __m128i lower = _mm_cmpeq_epi8(_mm_min_epu8(l, _mm_set1_epi8(25)), l);
    __m128i colon = _mm_cmpeq_epi8(x, _mm_set1_epi8(':'));
    __m128i other =
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')), _mm_cmpeq_epi8(x, _mm_set1_epi8('-')));
    unsigned in = (1u << n) - 1; /* the value's bytes */
    unsigned digits = (unsigned)_mm_movemask_epi8(digit) & in;
    unsigned colons = (unsigned)_mm_movemask_epi8(colon) & in;
    unsigned ok = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(digit, lower), other));
    if (((ok & in) | colons) != in)
        return -1; /* another character: maybe valid, the slow path says */
    if (!colons)
        return 1; /* a reg-name of these characters is never empty here */
    if (colons & (colons - 1))
        return 0; /* two ':' outside an IP literal */
    unsigned at = (unsigned)__builtin_ctz(colons);
    size_t plen = n - at - 1;
    if (at == 0 || plen == 0 || plen > 5 || (digits >> (at + 1)) != (in >> (at + 1)))
        return 0; /* no name, or a port that is not 1 to 5 digits */
    if (plen < 5)
        return 1;
    static const char max[] = "65535"; /* five digits compare as strings */
    for (int k = 0; k < 5; k++)
        if (s[at + 1 + k] != max[k])
            return s[at + 1 + k] < max[k];
    return 1;
}
#endif

#if HTTP_SIMD
/* "host: " read as a little-endian word with the letters' 0x20 bit set */
#define HOST_COLON_SP 0x203a74736f68u

/* The value of a "Host: " line and its CRLF, when the value is of the
 * usual kind host_valid_fast() decides. v is the value's first byte; 16
 * bytes from v, and the two after the value, are readable (the caller
 * checked 18). Returns the bytes from v past the CRLF, 0 when the line is
 * of another kind (the general path parses it again from its start), or
 * -EBADMSG. It is the head's first field: there was no Host before. */
static int host_line_fast(const char *v, struct http_head *head)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)v);
    unsigned cr = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
    if (!cr)
        return 0;
    unsigned n = (unsigned)__builtin_ctz(cr);
    if (n == 0 || v[n + 1] != '\n')
        return 0;
    /* OWS or any other byte: host_valid_x() says -1 */
    int ok = host_valid_x(x, v, n);
    if (ok < 0)
        return 0;
    /* a bad value: the general path gives the same 400 */
    if (!ok)
        return -EBADMSG;
    if (!(head->flags & HTTP_F_ABSOLUTE))
        head->host = mkview(v, v + n);
    return (int)n + 2;
}
#endif

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
static COLD int content_length(const char *v, size_t n, int64_t *cl)
{
    const char *cur = v, *end = v + n;
    while (cur) {
        struct view e = list_next(&cur, end);
        if (e.len == 0)
            return -EBADMSG;
        int64_t x = 0;
        for (size_t i = 0; i < e.len; i++) {
            if (!IS_DIGIT(e.p[i]))
                return -EBADMSG;
            int d = e.p[i] - '0';
            if (x > (INT64_MAX - d) / 10)
                return -EBADMSG;
            x = x * 10 + d;
        }
        if (*cl >= 0 && *cl != x)
            return -EBADMSG;
        *cl = x;
    }
    return 0;
}

/* Transfer-Encoding = #transfer-coding; the fields of several TE lines form
 * one list. Verdicts wait for the end of the head: "chunked" followed by
 * anything is a 400 even if an unknown coding was seen first. */
static COLD int transfer_encoding(const char *v, size_t n, unsigned *st)
{
    const char *cur = v, *end = v + n;
    *st |= ST_TE;
    while (cur) {
        struct view e = list_next(&cur, end);
        const char *tok_end = scan_class(e.p, e.p + e.len, C_TCHAR);
        size_t tok_len = (size_t)(tok_end - e.p);
        if (tok_len == 0)
            return -EBADMSG;
        const char *q = tok_end;
        while (q < e.p + e.len && is_ows(*q))
            q++;
        bool params = q < e.p + e.len;
        if (params && *q != ';')
            return -EBADMSG;
        bool chunked = tok_len == 7 && case_eq(e.p, "chunked", 7);
        if ((*st & ST_TE_LAST_CHUNKED) || (chunked && params))
            *st |= ST_TE_BAD;
        *st = chunked ? *st | ST_TE_LAST_CHUNKED : (*st & ~ST_TE_LAST_CHUNKED) | ST_TE_UNKNOWN;
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
            return -EBADMSG;
        if (e.len == 5 && case_eq(e.p, "close", 5))
            *flags |= HTTP_F_CONN_CLOSE;
        else if (e.len == 10 && case_eq(e.p, "keep-alive", 10))
            *flags |= HTTP_F_CONN_KEEP_ALIVE;
        else if (e.len == 7 && case_eq(e.p, "upgrade", 7))
            *flags |= HTTP_F_CONN_UPGRADE;
    }
    return 0;
}

/* The fields a file answer reads (If-*, Range, Accept-Encoding) set
 * HTTP_F_FILE_FIELDS; their lengths are chosen by the caller, and a
 * superset by first letter is enough: it only spares a second pass. */
static inline void file_field(const char *name, uint16_t *flags)
{
    char first = (char)(name[0] | 0x20);
    if (first == 'i' || first == 'r' || first == 'a')
        *flags |= HTTP_F_FILE_FIELDS;
}

/* ---- the request-target ------------------------------------------------------ */

/* The request-target when it is not in origin-form (the hot path takes
 * "/..." itself): asterisk-form for OPTIONS, or absolute-form, whose
 * authority becomes the host. path_end is the target's first '?' or its
 * end. Sets the path; the caller sets the query. */
static COLD int target_other_form(struct http_head *h, const char *t, size_t n,
                                  const char *path_end)
{
    if (n == 1 && t[0] == '*') {
        if (h->method != COLIBRI_OPTIONS)
            return -EBADMSG;
        h->path = mkview(t, t + 1);
        h->flags |= HTTP_F_ASTERISK;
        return 0;
    }
    size_t s;
    if (n >= 7 && case_eq(t, "http://", 7))
        s = 7;
    else if (n >= 8 && case_eq(t, "https://", 8))
        s = 8;
    else
        return -EBADMSG; /* authority-form, other schemes, relative references */
    const char *a = t + s, *a_end = a;
    while (a_end < path_end && *a_end != '/')
        a_end++;
    /* userinfo ('@') fails here too, as RFC 9110 4.2.4 asks */
    if (!host_valid(a, (size_t)(a_end - a), false))
        return -EBADMSG;
    h->host = mkview(a, a_end);
    h->flags |= HTTP_F_ABSOLUTE;
    /* An empty path is "/": point at the second slash of "//", so the
     * view still lies inside the caller's buffer. */
    h->path = a_end < path_end ? mkview(a_end, path_end) : mkview(a - 1, a);
    return 0;
}

/* ---- the head ------------------------------------------------------------------ */

/* RFC 9112 2.2: empty lines before a request are ignored, but only as CRLF.
 * They are rare, so the hot path only looks at the first byte. */
static COLD ssize_t after_empty_lines(const char *buf, size_t len, const struct http_limits *lim,
                                      struct http_head *head)
{
    const char *p = buf, *const buf_end = buf + len;
    while (p < buf_end && (*p == '\r' || *p == '\n')) {
        if (*p == '\n')
            return -EBADMSG;
        if (buf_end - p < 2)
            return 0;
        if (p[1] != '\n')
            return -EBADMSG;
        p += 2;
    }
    if (p == buf_end)
        return 0;
    ssize_t r = http_parse_head(p, (size_t)(buf_end - p), lim, head);
    return r > 0 ? r + (p - buf) : r;
}

/* A method other than "GET ": its token and the SP after it. Returns the
 * method (-1 unknown: 501 once the line is whole), -2 for "read more" or
 * minus a status; *pp is left at the SP. */
static COLD int method_other(const char **pp, const char *end)
{
    const char *m = *pp, *p = scan_class(m, end, C_TCHAR);
    if (p - m > METHOD_MAX_LEN)
        return -ENOSYS;
    if (p == end)
        return -2;
    if (*p != ' ' || p == m)
        return -EBADMSG;
    *pp = p;
    return method_lookup(m, (size_t)(p - m));
}

/* An HTTP-version other than "HTTP/1.1" and its CRLF. Returns 0 (with *pp
 * past the CRLF), 1 for "read more" or minus a status. */
static COLD int version_other(const char **pp, const char *end, struct http_head *head)
{
    const char *p = *pp;
    static const char proto[] = "HTTP/";
    for (int i = 0; i < 5; i++, p++) {
        if (p == end)
            return 1;
        if (*p != proto[i])
            return -EBADMSG;
    }
    if (p == end)
        return 1;
    /* DIGIT "." DIGIT CRLF, then the major: "HTTP/01.1" is no version
     * at all (400), "HTTP/2.0" one we do not speak (505) */
    if (!IS_DIGIT(*p))
        return -EBADMSG;
    char major = *p;
    if (++p == end)
        return 1;
    if (*p != '.')
        return -EBADMSG;
    if (++p == end)
        return 1;
    if (!IS_DIGIT(*p))
        return -EBADMSG;
    head->version_minor = *p != '0';
    if (++p == end)
        return 1;
    if (*p != '\r')
        return -EBADMSG;
    if (++p == end)
        return 1;
    if (*p != '\n')
        return -EBADMSG;
    if (major != '1')
        return -EPROTONOSUPPORT; /* also the HTTP/2 preface, "PRI * HTTP/2.0" */
    *pp = p + 1;
    return 0;
}

/* Expect: only 100-continue is known; returns ST_EXPECT_BAD for others (417
 * at the end of the head). */
static COLD unsigned field_expect(const char *val, size_t vlen, struct http_head *head)
{
    if (vlen == 12 && case_eq(val, "100-continue", 12)) {
        /* RFC 9110 10.1.1: ignored in an HTTP/1.0 request */
        if (head->version_minor)
            head->flags |= HTTP_F_EXPECT_CONTINUE;
    } else {
        return ST_EXPECT_BAD;
    }
    return 0;
}

/* Host: a valid uri-host [":" port] (the caller counts them). */
static inline int field_host(const char *val, const char *val_end, const char *end,
                             struct http_head *head)
{
    size_t vlen = (size_t)(val_end - val);
#if HTTP_SIMD
    int fast = end - val >= 16 ? host_valid_fast(val, vlen) : -1;
#else
    (void)end;
    int fast = -1;
#endif
    if (fast == 0 || (fast < 0 && !host_valid(val, vlen, true)))
        return -EBADMSG;
    if (!(head->flags & HTTP_F_ABSOLUTE))
        head->host = mkview(val, val_end);
    return 0;
}

/* The checks that need the whole head, when anything but one Host was
 * noted; sets HTTP_F_CHUNKED. */
static COLD int head_end_checks(struct http_head *head, unsigned st)
{
    /* RFC 9112 3.2: exactly one Host in HTTP/1.1 (more than one failed before) */
    if (!(st & ST_HOST) && head->version_minor)
        return -EBADMSG;
    if (st & ST_TE) {
        /* RFC 9112 6.1 and 6.3: TE in 1.0 or next to Content-Length is a
         * framing a peer may read differently: refuse both. */
        if (!head->version_minor || head->content_length >= 0 || (st & ST_TE_BAD))
            return -EBADMSG;
        if (st & ST_TE_UNKNOWN)
            return -ENOSYS;
        head->flags |= HTTP_F_CHUNKED;
    }
    if (st & ST_EXPECT_BAD)
        return -EOPNOTSUPP;
    return 0;
}

ssize_t http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
                        struct http_head *head)
{
    if (unlikely(len == 0))
        return 0;
    if (unlikely(*buf == '\r' || *buf == '\n'))
        return after_empty_lines(buf, len, lim, head);

    /* Scan no further than the head may reach: running into this end when the
     * buffer goes on is the limit error, not "incomplete". */
    const char *p = buf, *const buf_end = buf + len;
    const char *end = len > lim->max_head ? buf + lim->max_head : buf_end;

    head->content_length = -1;
    head->flags = 0;
    head->version_minor = 1;

    /* method: GET, most often, without a scan and a lookup */
    const char *m = p;
    int method;
    if (likely(end - p >= 4 && memcmp(p, "GET ", 4) == 0)) {
        method = COLIBRI_GET;
        p += 3;
    } else {
        /* (a copy: p itself stays in a register) */
        const char *mp = p;
        method = method_other(&mp, end);
        p = mp;
        if (method == -2)
            goto line_more;
        if (method < -1)
            return method;
    }
    head->method_str = mkview(m, p);
    p++;

    /* request-target: first only its bytes, the form once the line is whole */
    const char *t = p, *q = NULL;
    p = scan_target(buf, p, end, '?');
    if (p < end && *p == '?') {
        q = p;
        p = scan_target(buf, p + 1, end, 0);
    }
    size_t tlen = (size_t)(p - t);
    if (unlikely(tlen > lim->max_target))
        return -ENAMETOOLONG;
    if (unlikely(p == end))
        goto line_more;
    if (unlikely(*p != ' ' || tlen == 0))
        return -EBADMSG;
    const char *t_end = p++;
    head->target = mkview(t, t_end);

    /* HTTP-version CRLF */
    int rc;
    if (likely(end - p >= 10 && memcmp(p, "HTTP/1.1\r\n", 10) == 0)) {
        p += 10;
    } else {
        const char *vp = p;
        if ((rc = version_other(&vp, end, head)) != 0) {
            if (rc > 0)
                goto line_more;
            return rc;
        }
        p = vp;
    }

    if (unlikely(method < 0))
        return -ENOSYS;
    head->method = (enum colibri_method)method;
    head->host = mkview(t, t);
    const char *path_end = q ? q : t_end;
    if (likely(*t == '/'))
        head->path = mkview(t, path_end);
    else if ((rc = target_other_form(head, t, tlen, path_end)) < 0)
        return rc;
    if (q) {
        head->flags |= HTTP_F_HAS_QUERY;
        head->query = mkview(q + 1, t_end);
    } else {
        head->query = mkview(t_end, t_end);
    }

    /* header fields */
    const char *const fields = p;
    unsigned st = 0; /* ST_* */
#if HTTP_SIMD
    /* Clients send Host first: "Host: " and a usual value, in one go */
    if (end - p >= 24) {
        uint64_t w;
        memcpy(&w, p, 8);
        if (((w | 0x20202020u) & 0xffffffffffffu) == HOST_COLON_SP) {
            int r = host_line_fast(p + 6, head);
            if (r < 0)
                return r;
            if (r > 0) {
                p += 6 + (size_t)r;
                st = ST_HOST;
            }
        }
    }
#endif
    for (;;) {
        if (unlikely(p == end))
            goto fields_more;
        if (*p == '\r') {
            /* the empty line that ends the head */
            if (++p == end)
                goto fields_more;
            if (*p != '\n')
                return -EBADMSG;
            p++;
            break;
        }
        /* A line starting with SP or HTAB (obs-fold, or whitespace after the
         * request line) fails here as an empty field name. */
        const char *name = p;
        p = scan_name(buf, p, end);
        if (unlikely(p == end || *p != ':')) {
            /* '_', '.' and the like: rare in names, the table goes on */
            p = scan_class(p, end, C_TCHAR);
            if (p == end)
                goto fields_more;
            if (*p != ':')
                return -EBADMSG;
        }
        if (unlikely(p == name))
            return -EBADMSG;
        size_t name_len = (size_t)(p - name);
        /* the value with the OWS around it, then the OWS trimmed */
        const char *val = ++p;
        p = scan_value(buf, p, end);
        if (unlikely(p == end))
            goto fields_more;
        if (unlikely(*p != '\r'))
            return -EBADMSG;
        const char *val_end = p;
        if (unlikely(++p == end))
            goto fields_more;
        if (unlikely(*p != '\n'))
            return -EBADMSG;
        p++;
        if (likely(*val == ' '))
            val++;
        /* *val_end is the CR, and val_end[-1] at worst the ':' */
        if (unlikely((char_class[(unsigned char)*val] | char_class[(unsigned char)val_end[-1]]) &
                     C_OWS)) {
            while (val < val_end && is_ows(*val))
                val++;
            while (val_end > val && is_ows(val_end[-1]))
                val_end--;
        }

        switch (name_len) {
        case 4:
            if (name_is(name, "host", 4)) {
                if (st & ST_HOST)
                    return -EBADMSG; /* exactly one */
                st |= ST_HOST;
                if ((rc = field_host(val, val_end, end, head)) < 0)
                    return rc;
            }
            break;
        case 10:
            if (name_is(name, "connection", 10) &&
                (rc = connection(val, (size_t)(val_end - val), &head->flags)) < 0)
                return rc;
            break;
        case 5:  /* Range */
        case 8:  /* If-Range, If-Match */
        case 13: /* If-None-Match */
        case 15: /* Accept-Encoding */
        case 19: /* If-Unmodified-Since */
            file_field(name, &head->flags);
            break;
        case 6:
            if (unlikely(name_is(name, "expect", 6)))
                st |= field_expect(val, (size_t)(val_end - val), head);
            break;
        case 14:
            if (unlikely(name_is(name, "content-length", 14)) &&
                (rc = content_length(val, (size_t)(val_end - val), &head->content_length)) < 0)
                return rc;
            break;
        case 17: /* If-Modified-Since too */
            file_field(name, &head->flags);
            if (unlikely(name_is(name, "transfer-encoding", 17))) {
                unsigned te = st;
                if ((rc = transfer_encoding(val, (size_t)(val_end - val), &te)) < 0)
                    return rc;
                st = te;
            }
            break;
        }
    }
    /* the fields end right before the empty line's CRLF */
    head->headers = mkview(fields, p - 2);
    if (unlikely(st != ST_HOST) && (rc = head_end_checks(head, st)) < 0)
        return rc;
    return p - buf;

line_more:
    return end < buf_end ? -ENAMETOOLONG : 0;
fields_more:
    return end < buf_end ? -EMSGSIZE : 0;
}
