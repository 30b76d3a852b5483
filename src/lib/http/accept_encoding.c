/* accept_encoding.c - "gzip;q=1.0, br, identity; q=0.5, *;q=0" */
#include "http/accept_encoding.h"

static const struct {
    const char *name;
    size_t len;
    int coding;
} names[] = {
    {"identity", 8, HTTP_CODING_IDENTITY},
    {"gzip", 4, HTTP_CODING_GZIP},
    {"x-gzip", 6, HTTP_CODING_GZIP},
    {"deflate", 7, HTTP_CODING_DEFLATE},
    {"br", 2, HTTP_CODING_BR},
    {"zstd", 4, HTTP_CODING_ZSTD},
    {"*", 1, -2},
};

struct view http_coding_name(enum http_coding c)
{
    static const struct view v[HTTP_CODING_COUNT] = {
        [HTTP_CODING_IDENTITY] = VIEW_LIT("identity"), [HTTP_CODING_GZIP] = VIEW_LIT("gzip"),
        [HTTP_CODING_DEFLATE] = VIEW_LIT("deflate"),   [HTTP_CODING_BR] = VIEW_LIT("br"),
        [HTTP_CODING_ZSTD] = VIEW_LIT("zstd"),
    };
    return (unsigned)c < HTTP_CODING_COUNT ? v[c] : VIEW_LIT("");
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
static bool qvalue(const char *p, size_t len, uint16_t *q)
{
    if (!len || (p[0] != '0' && p[0] != '1'))
        return false;
    unsigned v = (unsigned)(p[0] - '0') * 1000;
    if (len > 1) {
        if (p[1] != '.' || len > 5)
            return false;
        unsigned scale = 100;
        for (size_t i = 2; i < len; i++, scale /= 10) {
            if (p[i] < '0' || p[i] > '9')
                return false;
            v += (unsigned)(p[i] - '0') * scale;
        }
    }
    if (v > 1000)
        return false;
    *q = (uint16_t)v;
    return true;
}

void http_accept_encoding_begin(struct http_accept_encoding *ae)
{
    *ae = (struct http_accept_encoding){.star = UINT16_MAX};
}

/* One element: token *( OWS ";" OWS name "=" value ). */
static void element(struct http_accept_encoding *ae, const char *p, const char *end)
{
    const char *t = p;
    while (p < end && is_tchar(*p))
        p++;
    size_t tlen = (size_t)(p - t);
    if (!tlen)
        return;
    uint16_t q = 1000;
    while (p < end) {
        while (p < end && is_ows(*p))
            p++;
        if (p == end)
            break;
        if (*p++ != ';')
            return;
        while (p < end && is_ows(*p))
            p++;
        const char *n = p;
        while (p < end && is_tchar(*p))
            p++;
        size_t nlen = (size_t)(p - n);
        if (!nlen || p == end || *p++ != '=')
            return;
        const char *v = p;
        while (p < end && !is_ows(*p) && *p != ';')
            p++;
        if (nlen == 1 && (n[0] == 'q' || n[0] == 'Q') && !qvalue(v, (size_t)(p - v), &q))
            return;
    }
    for (size_t i = 0; i < N_ELEMENTS(names); i++) {
        if (names[i].len != tlen || !mem_case_eq(names[i].name, t, tlen))
            continue;
        int c = names[i].coding;
        if (c == -2) {
            if (ae->star == UINT16_MAX)
                ae->star = q;
        } else if (!(ae->explicit_q & (1u << c))) {
            ae->explicit_q |= (uint8_t)(1u << c);
            ae->q[c] = q;
        }
        return;
    }
}

void http_accept_encoding_add(struct http_accept_encoding *ae, const char *p, size_t len)
{
    const char *end = p + len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *s = p, *f = e;
        while (s < f && is_ows(*s))
            s++;
        while (f > s && is_ows(f[-1]))
            f--;
        element(ae, s, f);
        p = comma ? comma + 1 : end;
    }
}

void http_accept_encoding_end(struct http_accept_encoding *ae)
{
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        if (ae->explicit_q & (1u << c))
            continue;
        if (c == HTTP_CODING_IDENTITY)
            /* acceptable, but only as the last resort: a client that names
             * codings wants one of them, whatever their q */
            ae->q[c] = ae->star == UINT16_MAX ? 1 : ae->star;
        else
            ae->q[c] = ae->star == UINT16_MAX ? 0 : ae->star;
    }
}

void http_accept_encoding_parse(const char *p, size_t len, struct http_accept_encoding *ae)
{
    http_accept_encoding_begin(ae);
    if (p) {
        http_accept_encoding_add(ae, p, len);
    } else {
        ae->q[HTTP_CODING_IDENTITY] = 1000;
        ae->explicit_q = 1u << HTTP_CODING_IDENTITY;
    }
    http_accept_encoding_end(ae);
}

int http_accept_encoding_choose(const struct http_accept_encoding *ae, unsigned available,
                                const uint64_t *sizes)
{
    static const int order[] = {HTTP_CODING_BR, HTTP_CODING_ZSTD, HTTP_CODING_GZIP,
                                HTTP_CODING_DEFLATE, HTTP_CODING_IDENTITY};
    int best = -1;
    for (size_t i = 0; i < N_ELEMENTS(order); i++) {
        int c = order[i];
        if (!(available & (1u << c)) || !ae->q[c])
            continue;
        if (best < 0 || ae->q[c] > ae->q[best] ||
            (ae->q[c] == ae->q[best] && sizes && sizes[c] < sizes[best]))
            best = c;
    }
    return best;
}
