#include "test.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "http/chunked.h"
#include "http/fields.h"
#include "http/parser.h"
#include "http/status.h"

/* The same parser a second time, built without SSE2: its scanners go byte
 * by byte through the class tables. simd_matches_plain compares the two. */
static ssize_t http_parse_head_plain(const char *buf, size_t len, const struct http_limits *lim,
                                     struct http_head *head);
#define HTTP_CHARS_PLAIN
#define http_parse_head http_parse_head_plain
#include "http/parser.c"
#undef http_parse_head
#undef HTTP_CHARS_PLAIN

/* ---- inputs end right before a PROT_NONE page, so any over-read faults ---- */

#define GUARD_AREA (64 * 1024)

struct guard {
    char *base; /* GUARD_AREA readable bytes, then the guard page */
    size_t page;
};

static struct guard guard_new(void)
{
    struct guard g = {.page = (size_t)sysconf(_SC_PAGESIZE)};
    char *m =
        mmap(NULL, GUARD_AREA + g.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    if (mprotect(m + GUARD_AREA, g.page, PROT_NONE) != 0) {
        perror("mprotect");
        exit(2);
    }
    g.base = m;
    return g;
}

/* Copies s so that its last byte is the last readable one. */
static char *place(const struct guard *g, const char *s, size_t n)
{
    if (n > GUARD_AREA) {
        fprintf(stderr, "input too large for the guard area\n");
        exit(2);
    }
    char *dst = g->base + GUARD_AREA - n;
    memcpy(dst, s, n);
    return dst;
}

static struct guard G;

static const struct http_limits def_lim = HTTP_LIMITS_DEFAULT;

static ssize_t parse_lim(const char *s, size_t n, const struct http_limits *lim,
                         struct http_head *h)
{
    return http_parse_head(place(&G, s, n), n, lim, h);
}

static ssize_t parse_n(const char *s, size_t n, struct http_head *h)
{
    return parse_lim(s, n, &def_lim, h);
}

#define CHECK_VIEW(v, s)                                                                           \
    do {                                                                                           \
        struct view v_ = (v);                                                                      \
        CHECK_EQ_MEM(v_.p, v_.len, (s), strlen(s));                                                \
    } while (0)

/* Parses a valid input whose head is head_len bytes: every shorter prefix is
 * "incomplete", never an error, and the whole input gives head_len. The views
 * in *h stay valid until the next parse. */
static void check_valid_n(const char *s, size_t n, size_t head_len, struct http_head *h)
{
    for (size_t k = 0; k < head_len; k++) {
        ssize_t r = parse_n(s, k, h);
        if (r != 0) {
            fprintf(stderr, "prefix %zu of \"%.*s\": %zd, wanted 0\n", k, (int)n, s, r);
            CHECK_EQ_INT(r, 0);
            break;
        }
    }
    ssize_t r = parse_n(s, n, h);
    if (r != (ssize_t)head_len)
        fprintf(stderr, "input \"%.*s\"\n", (int)n, s);
    CHECK_EQ_INT(r, head_len);
}

static void check_valid(const char *s, struct http_head *h)
{
    check_valid_n(s, strlen(s), strlen(s), h);
}

/* ---- valid requests ---------------------------------------------------------- */

TEST(simple_get)
{
    struct http_head h;
    const char *req = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n";
    check_valid(req, &h);
    CHECK_EQ_INT(h.method, COLIBRI_GET);
    CHECK_VIEW(h.method_str, "GET");
    CHECK_VIEW(h.target, "/index.html");
    CHECK_VIEW(h.path, "/index.html");
    CHECK_EQ_INT(h.query.len, 0);
    CHECK_VIEW(h.host, "example.com");
    CHECK_VIEW(h.headers, "Host: example.com\r\nUser-Agent: t\r\n");
    CHECK_EQ_INT(h.content_length, -1);
    CHECK_EQ_INT(h.version_minor, 1);
    CHECK_EQ_INT(h.flags, 0);
}

TEST(methods)
{
    /* every method of the one list in colibri.h, and nothing else, is
     * recognised, as itself */
    for (unsigned m = 0; m < COLIBRI_METHOD_COUNT; m++) {
        const char *name = colibri_method_name((enum colibri_method)m);
        CHECK(name != NULL);
        char req[128];
        snprintf(req, sizeof(req), "%s / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", name);
        struct http_head h;
        check_valid(req, &h);
        CHECK_EQ_INT(h.method, m);
        CHECK(h.method_str.len == strlen(name) &&
              memcmp(h.method_str.p, name, h.method_str.len) == 0);
    }
    CHECK(colibri_method_name(COLIBRI_METHOD_COUNT) == NULL);
    CHECK(colibri_method_name((enum colibri_method) - 1) == NULL);
    CHECK(strcmp(colibri_method_name(COLIBRI_OPTIONS), "OPTIONS") == 0);
    CHECK_EQ_INT(COLIBRI_METHOD_COUNT, 8);
    /* near misses are not methods */
    const char *bad[] = {"get / HTTP/1.1\r\nHost: a\r\n\r\n", "GETS / HTTP/1.1\r\nHost: a\r\n\r\n",
                         "CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\r\n"};
    for (size_t i = 0; i < N_ELEMENTS(bad); i++) {
        struct http_head h;
        CHECK(http_parse_head(bad[i], strlen(bad[i]), &def_lim, &h) < 0);
    }
}

TEST(post_with_body_after_head)
{
    struct http_head h;
    const char *head = "POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n";
    char req[256];
    snprintf(req, sizeof(req), "%shello world", head);
    check_valid_n(req, strlen(req), strlen(head), &h);
    CHECK_EQ_INT(h.method, COLIBRI_POST);
    CHECK_EQ_INT(h.content_length, 11);
}

TEST(options_asterisk)
{
    struct http_head h;
    check_valid("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", &h);
    CHECK_EQ_INT(h.method, COLIBRI_OPTIONS);
    CHECK_EQ_INT(h.flags, HTTP_F_ASTERISK);
    CHECK_VIEW(h.path, "*");
    CHECK_VIEW(h.target, "*");
    CHECK_EQ_INT(h.query.len, 0);
}

TEST(absolute_form)
{
    struct http_head h;
    check_valid("GET http://Example.com:8080/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_ABSOLUTE | HTTP_F_HAS_QUERY);
    CHECK_VIEW(h.host, "Example.com:8080"); /* the authority wins over Host */
    CHECK_VIEW(h.path, "/p/q");
    CHECK_VIEW(h.query, "x=1");
    CHECK_VIEW(h.target, "http://Example.com:8080/p/q?x=1");

    check_valid("GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_ABSOLUTE);
    CHECK_VIEW(h.host, "h");
    CHECK_VIEW(h.path, "/");
    CHECK_EQ_INT(h.query.len, 0);

    check_valid("GET hTTp://[::1]?q HTTP/1.1\r\nHost: x\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_ABSOLUTE | HTTP_F_HAS_QUERY);
    CHECK_VIEW(h.host, "[::1]");
    CHECK_VIEW(h.path, "/");
    CHECK_VIEW(h.query, "q");

    /* HTTP/1.0 may leave Host out; the authority still names the host */
    check_valid("GET http://10.0.0.1/x HTTP/1.0\r\n\r\n", &h);
    CHECK_VIEW(h.host, "10.0.0.1");
    CHECK_VIEW(h.path, "/x");
    CHECK_EQ_INT(h.version_minor, 0);
}

TEST(http10_without_host)
{
    struct http_head h;
    check_valid("GET / HTTP/1.0\r\n\r\n", &h);
    CHECK_EQ_INT(h.version_minor, 0);
    CHECK_EQ_INT(h.host.len, 0);
    CHECK_EQ_INT(h.headers.len, 0);
    CHECK(h.headers.p != NULL);
    check_valid("GET / HTTP/1.0\r\nUser-Agent: old\r\n\r\n", &h);
    CHECK_EQ_INT(h.host.len, 0);
    CHECK_VIEW(h.headers, "User-Agent: old\r\n");
}

TEST(versions)
{
    struct http_head h;
    check_valid("GET / HTTP/1.2\r\nHost: a\r\n\r\n", &h);
    CHECK_EQ_INT(h.version_minor, 1);
    check_valid("GET / HTTP/1.9\r\nHost: a\r\n\r\n", &h);
    CHECK_EQ_INT(h.version_minor, 1);
    check_valid("GET / HTTP/1.0\r\nHost: a\r\n\r\n", &h);
    CHECK_EQ_INT(h.version_minor, 0);
}

TEST(leading_empty_lines)
{
    struct http_head h;
    const char *req = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    check_valid(req, &h);
    CHECK_VIEW(h.method_str, "GET");
    CHECK(h.method_str.p[-1] == '\n');
}

TEST(many_headers)
{
    char req[8192];
    size_t n = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 150; i++)
        n += (size_t)snprintf(req + n, sizeof(req) - n, "X-Header-%d: value %d\r\n", i, i);
    n += (size_t)snprintf(req + n, sizeof(req) - n, "Host: last.example\r\n\r\n");
    CHECK(n < 8192);
    struct http_head h;
    check_valid_n(req, n, n, &h);
    CHECK_VIEW(h.host, "last.example");
    struct view v;
    CHECK(http_header_find(h.headers, "x-header-77", 11, &v));
    CHECK_VIEW(v, "value 77");
    CHECK(http_header_find(h.headers, "X-HEADER-149", 12, &v));
    CHECK_VIEW(v, "value 149");
    CHECK(!http_header_find(h.headers, "X-Header-150", 12, &v));
}

static char *make_target_request(size_t target_len, size_t *n)
{
    char *req = malloc(target_len + 64);
    size_t k = 0;
    memcpy(req + k, "GET /", 5);
    k += 5;
    memset(req + k, 'a', target_len - 1);
    k += target_len - 1;
    const char *tail = " HTTP/1.1\r\nHost: a\r\n\r\n";
    memcpy(req + k, tail, strlen(tail));
    k += strlen(tail);
    *n = k;
    return req;
}

TEST(long_target_accepted)
{
    size_t n;
    char *req = make_target_request(8000, &n);
    struct http_head h;
    check_valid_n(req, n, n, &h);
    CHECK_EQ_INT(h.target.len, 8000);
    CHECK_EQ_INT(h.path.len, 8000);
    free(req);
}

TEST(query_split)
{
    struct http_head h;
    check_valid("GET /a/b?x=1&y=2?z HTTP/1.1\r\nHost: a\r\n\r\n", &h);
    CHECK_VIEW(h.path, "/a/b");
    CHECK_VIEW(h.query, "x=1&y=2?z");
    CHECK_EQ_INT(h.flags, HTTP_F_HAS_QUERY);
    check_valid("GET /a? HTTP/1.1\r\nHost: a\r\n\r\n", &h);
    CHECK_VIEW(h.path, "/a");
    CHECK_EQ_INT(h.query.len, 0);
    CHECK_EQ_INT(h.flags, HTTP_F_HAS_QUERY);
    check_valid("GET //x/%20y HTTP/1.1\r\nHost: a\r\n\r\n", &h);
    CHECK_VIEW(h.path, "//x/%20y");
    CHECK_EQ_INT(h.flags, 0);
}

TEST(header_lookup)
{
    struct http_head h;
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nX-Custom:v1\r\ncontent-TYPE:  \t text/plain; q=1 "
                "\t \r\nX-Empty:\r\nX-Custom: v2\r\nX-Colon: a:b:c\r\n\r\n",
                &h);
    struct view v;
    CHECK(http_header_find(h.headers, "x-custom", 8, &v));
    CHECK_VIEW(v, "v1"); /* the first of two */
    CHECK(http_header_find(h.headers, "Content-Type", 12, &v));
    CHECK_VIEW(v, "text/plain; q=1");
    CHECK(http_header_find(h.headers, "X-EMPTY", 7, &v));
    CHECK_EQ_INT(v.len, 0);
    CHECK(http_header_find(h.headers, "x-colon", 7, &v));
    CHECK_VIEW(v, "a:b:c");
    CHECK(http_header_find(h.headers, "HOST", 4, &v));
    CHECK_VIEW(v, "a");
    CHECK(!http_header_find(h.headers, "X-Custo", 7, &v));
    CHECK(!http_header_find(h.headers, "X-Customs", 9, &v));
    CHECK(!http_header_find(h.headers, "v1", 2, &v));
    /* '_' and DEL differ only in bit 0x20, like letters: not the same name */
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nX_Y: 1\r\n\r\n", &h);
    CHECK(!http_header_find(h.headers, "X\x7fY", 3, &v));
    CHECK(http_header_find(h.headers, "x_y", 3, &v));
    struct view none = {.p = NULL, .len = 0};
    CHECK(!http_header_find(none, "Host", 4, &v));
}

TEST(values_trimmed_and_obs_text)
{
    struct http_head h;
    check_valid("GET / HTTP/1.1\r\nHost:\t a.b \t\r\nX-A: caf\xc3\xa9 au lait\r\n\r\n", &h);
    CHECK_VIEW(h.host, "a.b");
    struct view v;
    CHECK(http_header_find(h.headers, "x-a", 3, &v));
    CHECK_VIEW(v, "caf\xc3\xa9 au lait");
}

TEST(framing_fields)
{
    struct http_head h;
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CHUNKED);
    CHECK_EQ_INT(h.content_length, -1);
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n",
                &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CHUNKED | HTTP_F_CONN_CLOSE);
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5 ,5\r\n\r\n", &h);
    CHECK_EQ_INT(h.content_length, 5);
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\ncontent-length: 007\r\n\r\n",
                &h);
    CHECK_EQ_INT(h.content_length, 7);
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", &h);
    CHECK_EQ_INT(h.content_length, 0);
    check_valid("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", &h);
    CHECK_EQ_INT(h.content_length, INT64_MAX);
}

TEST(connection_and_expect)
{
    struct http_head h;
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CONN_KEEP_ALIVE);
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, , CLOSE\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CONN_CLOSE | HTTP_F_CONN_UPGRADE);
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: Upgrade\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CONN_UPGRADE);
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrades\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, 0);
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed, keep-alives\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, 0);
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
                &h);
    CHECK_EQ_INT(h.flags, HTTP_F_CONN_CLOSE | HTTP_F_CONN_KEEP_ALIVE);
    check_valid("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
                &h);
    CHECK_EQ_INT(h.flags, HTTP_F_EXPECT_CONTINUE);
    /* RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 is ignored */
    check_valid("PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", &h);
    CHECK_EQ_INT(h.flags, 0);
}

TEST(host_forms)
{
    static const char *ok[] = {
        "a",          "example.com",         "EXAMPLE.com:80",       "127.0.0.1",   "[::1]",
        "[::1]:8080", "[2001:db8::1]:65535", "a-b_c~d.e!$&'()*+,;=", "xn--e1a.com", "%41bc",
        "h:1",
    };
    for (size_t i = 0; i < N_ELEMENTS(ok); i++) {
        char req[256];
        snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", ok[i]);
        struct http_head h;
        check_valid(req, &h);
        CHECK_VIEW(h.host, ok[i]);
    }
    /* RFC 9110 7.2: an empty Host is what a client sends for a target
     * without an authority */
    struct http_head h;
    check_valid("GET / HTTP/1.1\r\nHost:\r\n\r\n", &h);
    CHECK_EQ_INT(h.host.len, 0);
}

/* Host values are checked 16 bytes at a time when 16 bytes of the buffer
 * follow the value (parser.c, host_valid_fast), byte by byte otherwise: both
 * must give the same verdict for the value, valid or not. */
TEST(host_checked_alike_with_and_without_bytes_after)
{
    static const char *hosts[] = {
        "a",
        "example.com",
        "127.0.0.1",
        "127.0.0.1:8080",
        "h:1",
        "a:0",
        "a:00080",
        "a:65535",
        "a:65536",
        "a:99999",
        "a:123456",
        "a:",
        ":80",
        ":",
        "a::80",
        "a:8:0",
        "a:8a",
        "a:8.0",
        "1.2.3.4:",
        "-",
        ".",
        "-.-:1",
        "a.b-c.d:443",
        "EXAMPLE.com:80",
        "ab%41:1",
        "[::1]:80",
        "a b",
        "a@b",
        "a/b",
        "0123456789abcdef",
        "0123456789abcde:",
        "0123456789abcd:1",
        "0123456789abc:65",
    };
    for (size_t i = 0; i < N_ELEMENTS(hosts); i++) {
        char last[256], padded[256];
        /* the value ends the head: fewer than 16 bytes follow it */
        snprintf(last, sizeof(last), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", hosts[i]);
        /* a field after it: 16 bytes and more follow */
        snprintf(padded, sizeof(padded),
                 "GET / HTTP/1.1\r\nHost: %s\r\nX-Pad: 0123456789abcdef\r\n\r\n", hosts[i]);
        struct http_head h1, h2;
        ssize_t r1 = parse_n(last, strlen(last), &h1), r2 = parse_n(padded, strlen(padded), &h2);
        if ((r1 > 0) != (r2 > 0) || (r1 < 0 && r1 != r2))
            fprintf(stderr, "Host \"%s\": %zd without bytes after, %zd with\n", hosts[i], r1, r2);
        CHECK((r1 > 0) == (r2 > 0));
        CHECK(r1 > 0 || r1 == r2);
    }
}

TEST(head_exactly_at_limits)
{
    struct http_limits lim = {.max_head = 0, .max_target = 8};
    const char *req = "\r\nGET /1234567 HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t n = strlen(req);
    lim.max_head = n - 2; /* the leading empty line does not count */
    struct http_head h;
    CHECK_EQ_INT(parse_lim(req, n, &lim, &h), n);
    CHECK_EQ_INT(h.target.len, 8);
    for (size_t k = 0; k < n; k++)
        CHECK_EQ_INT(parse_lim(req, k, &lim, &h), 0);
    lim.max_head = n - 3;
    CHECK_EQ_INT(parse_lim(req, n, &lim, &h), -EMSGSIZE);
    lim.max_head = n;
    lim.max_target = 7;
    CHECK_EQ_INT(parse_lim(req, n, &lim, &h), -ENAMETOOLONG);
}

TEST(pipelined)
{
    const char *two = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: b\r\n\r\n";
    size_t n = strlen(two);
    struct http_head h;
    ssize_t r = parse_n(two, n, &h);
    CHECK_EQ_INT(r, n / 2);
    CHECK_VIEW(h.path, "/1");
    r = parse_n(two + n / 2, n - n / 2, &h);
    CHECK_EQ_INT(r, n / 2);
    CHECK_VIEW(h.path, "/2");
    CHECK_VIEW(h.host, "b");
}

/* ---- the malformed table ------------------------------------------------------- */

struct bad_case {
    const char *in;
    size_t len;
    int want;
    size_t max_head, max_target; /* 0: the default */
};

#define BAD(s, w)                                                                                  \
    {                                                                                              \
        s, sizeof(s) - 1, w, 0, 0                                                                  \
    }
#define BAD_LIM(s, w, mh, mt)                                                                      \
    {                                                                                              \
        s, sizeof(s) - 1, w, mh, mt                                                                \
    }
#define RL   "GET / HTTP/1.1\r\n"
#define HOST "Host: a\r\n"

static const struct bad_case bad_cases[] = {
    /* framing: Content-Length and Transfer-Encoding */
    BAD(RL HOST "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5, 6\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5\r\nContent-Length: 5, 4\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 1a\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: -1\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: +5\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 0x5\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length:\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length:   \r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 9223372036854775808\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 99999999999999999999999999\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5,,5\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5,\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5 5\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Content-Length: 5.0\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: gzip\r\n\r\n", -ENOSYS),
    BAD(RL HOST "Transfer-Encoding: identity\r\n\r\n", -ENOSYS),
    BAD(RL HOST "Transfer-Encoding: gzip, chunked\r\n\r\n", -ENOSYS),
    BAD(RL HOST "Transfer-Encoding: chunked, gzip\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: gzip, chunked, gzip\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked, chunked\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked;q=1\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked,\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding:\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: \"chunked\"\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Transfer-Encoding: chunked x\r\n\r\n", -EBADMSG),
    BAD("GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG),
    /* line endings, NUL, folding */
    BAD("GET / HTTP/1.1\rHost: a\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a\rb\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X: a\r\r\n\r\n", -EBADMSG),
    BAD(RL HOST "\rX\r\n", -EBADMSG),
    BAD("GET / HTTP/1.1\nHost: a\n\n", -EBADMSG),
    BAD(RL "Host: a\n\r\n", -EBADMSG),
    BAD(RL HOST "\n", -EBADMSG),
    BAD(RL HOST "X: a\nb\r\n\r\n", -EBADMSG),
    BAD("\nGET / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("\r\rGET / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /\0 HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("G\0T / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD(RL HOST "X: a\0b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X\0: a\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X-A: b\r\n c\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X-A: b\r\n\tc\r\n\r\n", -EBADMSG),
    BAD(RL " Host: a\r\n\r\n", -EBADMSG),
    /* field syntax */
    BAD(RL "Host : a\r\n\r\n", -EBADMSG),
    BAD(RL "Host\t: a\r\n\r\n", -EBADMSG),
    BAD(RL HOST ": a\r\n\r\n", -EBADMSG),
    BAD(RL HOST "NoColon\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X(a): b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X@a: b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X/a: b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X\"a\": b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "H\xc3\xa9: b\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X: a\x01"
                "b\r\n\r\n",
        -EBADMSG),
    BAD(RL HOST "X: a\x7f\r\n\r\n", -EBADMSG),
    BAD(RL HOST "X: a\x1b[0m\r\n\r\n", -EBADMSG),
    /* Host */
    BAD(RL HOST HOST "\r\n", -EBADMSG),
    BAD(RL "Host: a\r\nhost: b\r\n\r\n", -EBADMSG),
    BAD("GET / HTTP/1.0\r\n" HOST HOST "\r\n", -EBADMSG),
    BAD(RL "\r\n", -EBADMSG),
    BAD(RL "X-Host: a\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a b\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a/b\r\n\r\n", -EBADMSG),
    BAD(RL "Host: user@a\r\n\r\n", -EBADMSG),
    BAD(RL "Host: [::1\r\n\r\n", -EBADMSG),
    BAD(RL "Host: [zz]\r\n\r\n", -EBADMSG),
    BAD(RL "Host: [12]\r\n\r\n", -EBADMSG),
    BAD(RL "Host: [::1]x\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a:http\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a:99999\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a:123456\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a:\r\n\r\n", -EBADMSG),
    BAD(RL "Host: :80\r\n\r\n", -EBADMSG),
    BAD(RL "Host: %zz\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a\xc3\xa9\r\n\r\n", -EBADMSG),
    BAD(RL "Host: a,b\r\nHost: c\r\n\r\n", -EBADMSG),
    /* request line */
    BAD("GET  / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /  HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/1.1 \r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / http/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/1.1x\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/1.10\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/1.a\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/a.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/11.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /\r\n\r\n", -EBADMSG),
    BAD("GET / \r\n\r\n", -EBADMSG),
    BAD("GET\r\n\r\n", -EBADMSG),
    BAD(" GET / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET\t/ HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET / HTTP/2.0\r\n" HOST "\r\n", -EPROTONOSUPPORT),
    BAD("GET / HTTP/0.9\r\n" HOST "\r\n", -EPROTONOSUPPORT),
    BAD("GET / HTTP/3.0\r\n" HOST "\r\n", -EPROTONOSUPPORT),
    BAD("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -EPROTONOSUPPORT),
    BAD("FOO / HTTP/1.1\r\n" HOST "\r\n", -ENOSYS),
    BAD("get / HTTP/1.1\r\n" HOST "\r\n", -ENOSYS),
    BAD("CONNECT a:443 HTTP/1.1\r\n" HOST "\r\n", -ENOSYS),
    BAD("ABCDEFGHIJKLMNOP / HTTP/1.1\r\n" HOST "\r\n", -ENOSYS),
    BAD("ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n" HOST "\r\n", -ENOSYS),
    BAD("ABCDEFGHIJKLMNOPQRSTUVWXYZ", -ENOSYS),
    BAD("GE(T / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET@ / HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    /* request-target */
    BAD("GET * HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("OPTIONS *? HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("OPTIONS ** HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET a HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET ?a HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET example.com:80 HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET ftp://a/ HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET http:/a HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET http:// HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET http:///x HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET http://user@a/ HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET http://a:b/ HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a\x7f HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a\x80 HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /\xff HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a\tb HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a#frag HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a b HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    BAD("GET /a\x01 HTTP/1.1\r\n" HOST "\r\n", -EBADMSG),
    /* limits */
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -ENAMETOOLONG, 0, 10),
    BAD_LIM("GET /0123456789", -ENAMETOOLONG, 0, 10),
    BAD_LIM("GET /0123456789012345678901234567890123456789", -ENAMETOOLONG, 32, 100),
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -ENAMETOOLONG, 20, 0),
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -ENAMETOOLONG, 25, 0),
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -EMSGSIZE, 27, 0),
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -EMSGSIZE, 36, 0),
    BAD_LIM("GET /0123456789 HTTP/1.1\r\n" HOST "X-Incomplete: aaaaaaaaaaa", -EMSGSIZE, 40, 0),
    BAD_LIM("\r\n\r\nGET /0123456789 HTTP/1.1\r\n" HOST "\r\n", -EMSGSIZE, 36, 0),
    /* Expect */
    BAD(RL HOST "Expect: 100-continu\r\n\r\n", -EOPNOTSUPP),
    BAD(RL HOST "Expect: 100-continue, foo\r\n\r\n", -EOPNOTSUPP),
    BAD(RL HOST "Expect: 200-ok\r\n\r\n", -EOPNOTSUPP),
    BAD(RL HOST "Expect:\r\n\r\n", -EOPNOTSUPP),
    /* Connection */
    BAD(RL HOST "Connection: keep alive\r\n\r\n", -EBADMSG),
    BAD(RL HOST "Connection: close;\r\n\r\n", -EBADMSG),
    /* the end of the head */
    BAD(RL HOST "\rx", -EBADMSG),
    BAD(RL HOST "\r\r\n", -EBADMSG),
};

static void check_bad(const struct bad_case *c, size_t row)
{
    struct http_limits lim = HTTP_LIMITS_DEFAULT;
    if (c->max_head)
        lim.max_head = c->max_head;
    if (c->max_target)
        lim.max_target = c->max_target;
    struct http_head h;
    ssize_t r = parse_lim(c->in, c->len, &lim, &h);
    if (r != c->want)
        fprintf(stderr, "row %zu \"%.*s\": got %zd, wanted %d\n", row, (int)c->len, c->in, r,
                c->want);
    CHECK_EQ_INT(r, c->want);
    /* A prefix is incomplete or already the same error: a verdict never
     * changes as bytes arrive. */
    for (size_t k = 0; k < c->len; k++) {
        r = parse_lim(c->in, k, &lim, &h);
        if (r != 0 && r != c->want) {
            fprintf(stderr, "row %zu prefix %zu: got %zd, wanted 0 or %d\n", row, k, r, c->want);
            CHECK(r == 0 || r == c->want);
            break;
        }
    }
}

TEST(malformed_table)
{
    CHECK(N_ELEMENTS(bad_cases) >= 60);
    for (size_t i = 0; i < N_ELEMENTS(bad_cases); i++)
        check_bad(&bad_cases[i], i);
}

TEST(long_target_and_head_rejected)
{
    struct http_head h;
    size_t n;
    char *req = make_target_request(8001, &n);
    CHECK_EQ_INT(parse_n(req, n, &h), -ENAMETOOLONG);
    /* still in the target, nothing after it yet: already too long */
    CHECK_EQ_INT(parse_n(req, 5 + 8001, &h), -ENAMETOOLONG);
    CHECK_EQ_INT(parse_n(req, 5 + 7999, &h), 0);
    free(req);

    /* an 8000-octet target whose head does not fit 8192 octets */
    req = malloc(9000);
    size_t k = (size_t)snprintf(req, 9000, "GET /");
    memset(req + k, 'b', 7999);
    k += 7999;
    k += (size_t)snprintf(req + k, 9000 - k, " HTTP/1.1\r\nHost: a\r\nX-Pad: ");
    memset(req + k, 'p', 300);
    k += 300;
    CHECK_EQ_INT(parse_n(req, k, &h), -EMSGSIZE); /* incomplete, but already too large */
    free(req);

    /* many small fields beyond 8192 */
    req = malloc(20000);
    k = (size_t)snprintf(req, 20000, "GET / HTTP/1.1\r\nHost: a\r\n");
    while (k < 9000)
        k += (size_t)snprintf(req + k, 20000 - k, "X-Filler: 0123456789\r\n");
    k += (size_t)snprintf(req + k, 20000 - k, "\r\n");
    CHECK_EQ_INT(parse_n(req, k, &h), -EMSGSIZE);
    free(req);
}

/* Every single byte value in each position class: only the documented ones pass. */
TEST(byte_classes)
{
    struct http_head h;
    for (int c = 0; c < 256; c++) {
        char req[64];
        size_t n = (size_t)snprintf(req, sizeof(req), "GET /a%cb HTTP/1.1\r\nHost: a\r\n\r\n", 'X');
        req[6] = (char)c;
        ssize_t r = parse_n(req, n, &h);
        bool ok = c > 0x20 && c < 0x7f && c != '#';
        CHECK_EQ_INT(r, ok ? (ssize_t)n : -EBADMSG);

        n = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a\r\nX: a%cb\r\n\r\n", 'X');
        req[29] = (char)c;
        r = parse_n(req, n, &h);
        ok = (c >= 0x20 && c != 0x7f) || c == '\t';
        CHECK_EQ_INT(r, ok ? (ssize_t)n : -EBADMSG);

        n = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a\r\nX%cY: 1\r\n\r\n", 'X');
        req[26] = (char)c;
        r = parse_n(req, n, &h);
        ok = strchr("!#$%&'*+-.^_`|~:", c) || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
             (c >= 'A' && c <= 'Z');
        if (c == 0)
            ok = false;
        CHECK_EQ_INT(r, ok ? (ssize_t)n : -EBADMSG);
    }
}

/* ---- chunked bodies -------------------------------------------------------------- */

struct dechunk {
    int rc; /* 0 or the first error */
    bool done;
    size_t consumed; /* input bytes consumed in all */
    char out[16384];
    size_t out_len;
};

/* Feeds in as pieces of at most step bytes (the first piece first_len bytes
 * if non-zero), keeping unconsumed input in front of the next piece, as a
 * connection buffer would. */
static void dechunk_feed(const char *in, size_t n, size_t first_len, size_t step, struct dechunk *d)
{
    struct http_chunked st = {0};
    char *pend = malloc(n + 1);
    size_t plen = 0, pos = 0;
    d->rc = 0;
    d->done = false;
    d->consumed = 0;
    d->out_len = 0;
    while (pos < n && !st.done) {
        size_t take = first_len && pos == 0 ? first_len : step;
        if (take > n - pos)
            take = n - pos;
        memcpy(pend + plen, in + pos, take);
        plen += take;
        pos += take;
        size_t payload = 0;
        ssize_t r = http_chunked_decode(&st, pend, plen, &payload);
        if (r < 0) {
            d->rc = (int)r;
            break;
        }
        CHECK((size_t)r <= plen);
        CHECK(payload <= (size_t)r);
        if (d->out_len + payload > sizeof(d->out))
            break;
        memcpy(d->out + d->out_len, pend, payload);
        d->out_len += payload;
        d->consumed += (size_t)r;
        memmove(pend, pend + r, plen - (size_t)r);
        plen -= (size_t)r;
    }
    d->done = st.done;
    free(pend);
}

/* Decodes in one call, in place, from a buffer that ends at the guard page. */
static ssize_t dechunk_whole(const char *in, size_t n, struct http_chunked *st, size_t *payload,
                             char **buf)
{
    *st = (struct http_chunked){0};
    *buf = place(&G, in, n);
    return http_chunked_decode(st, *buf, n, payload);
}

struct chunk_case {
    const char *in;
    size_t len;
    const char *payload;
    size_t payload_len;
    size_t tail; /* bytes after the body that must stay unconsumed */
};

#define CHUNK_OK(s, p, t)                                                                          \
    {                                                                                              \
        s, sizeof(s) - 1, p, sizeof(p) - 1, t                                                      \
    }

static const struct chunk_case chunk_ok[] = {
    CHUNK_OK("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", 0),
    CHUNK_OK("0\r\n\r\n", "", 0),
    CHUNK_OK("5;name=val\r\nhello\r\n0;x;y=\"q s\"\r\n\r\n", "hello", 0),
    CHUNK_OK("5 ;a=1\r\nhello\r\n0\t ;b\r\n\r\n", "hello", 0),
    CHUNK_OK("3\r\nabc\r\n0\r\nX-T: 1\r\nY:z \r\n\r\n", "abc", 0),
    CHUNK_OK("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij", 0),
    CHUNK_OK("1f\r\n0123456789012345678901234567890\r\n0\r\n\r\n",
             "0123456789012345678901234567890", 0),
    CHUNK_OK("0005\r\nhello\r\n000\r\n\r\n", "hello", 0),
    CHUNK_OK("1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "x", 16),
    CHUNK_OK("2\r\n\r\n\r\n0\r\n\r\n\r\n", "\r\n", 2),
    CHUNK_OK("1\r\n\0\r\n0\r\n\r\n", "\0", 0),
};

static void check_chunk_ok(const struct chunk_case *c, size_t row)
{
    size_t plen = c->payload_len;
    size_t body = c->len - c->tail;

    struct http_chunked st;
    size_t payload;
    char *buf;
    ssize_t r = dechunk_whole(c->in, c->len, &st, &payload, &buf);
    if (r != (ssize_t)body)
        fprintf(stderr, "chunk row %zu: %zd, wanted %zu\n", row, r, body);
    CHECK_EQ_INT(r, body);
    CHECK(st.done);
    CHECK_EQ_MEM(buf, payload, c->payload, plen);
    CHECK_EQ_MEM(buf + body, c->tail, c->in + body, c->tail); /* untouched */

    /* split at every position, and one byte at a time */
    struct dechunk *d = malloc(sizeof(*d));
    for (size_t k = 1; k < c->len; k++) {
        dechunk_feed(c->in, c->len, k, c->len, d);
        if (d->rc != 0 || !d->done || d->consumed != body || d->out_len != plen ||
            memcmp(d->out, c->payload, plen) != 0) {
            fprintf(stderr, "chunk row %zu split at %zu: rc %d done %d consumed %zu\n", row, k,
                    d->rc, d->done, d->consumed);
            CHECK(false);
            break;
        }
    }
    dechunk_feed(c->in, c->len, 0, 1, d);
    CHECK_EQ_INT(d->rc, 0);
    CHECK(d->done);
    CHECK_EQ_INT(d->consumed, body);
    CHECK_EQ_MEM(d->out, d->out_len, c->payload, plen);
    free(d);
}

TEST(chunked_valid)
{
    for (size_t i = 0; i < N_ELEMENTS(chunk_ok); i++)
        check_chunk_ok(&chunk_ok[i], i);
}

TEST(chunked_partial_and_done)
{
    struct http_chunked st = {0};
    char buf[64];
    size_t payload = 99;
    memcpy(buf, "5\r\nhel", 6);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 6, &payload), 6);
    CHECK_EQ_INT(payload, 3);
    CHECK_EQ_MEM(buf, 3, "hel", 3);
    CHECK_EQ_INT(st.remaining, 2);
    CHECK(!st.done);
    memcpy(buf, "lo\r\n0\r\n\r\nrest", 13);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 13, &payload), 9);
    CHECK_EQ_INT(payload, 2);
    CHECK_EQ_MEM(buf, 2, "lo", 2);
    CHECK(st.done);
    /* once done, nothing more is consumed */
    CHECK_EQ_INT(http_chunked_decode(&st, buf + 9, 4, &payload), 0);
    CHECK_EQ_INT(payload, 0);

    /* the largest size: 16 significant hex digits */
    st = (struct http_chunked){0};
    memcpy(buf, "0FFFFFFFFFFFFFFFF\r\nab", 21);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 21, &payload), 21);
    CHECK_EQ_INT(payload, 2);
    CHECK(st.remaining == UINT64_MAX - 2);
}

/* A chunk whose size takes the body above st.limit is refused when its
 * size line is read, before any of its data came (issue 17, item 8). */
TEST(chunked_size_above_the_body_limit)
{
    struct http_chunked st = {.limit = 1 << 20};
    char buf[64];
    size_t payload;
    /* 2 MiB announced to a 1 MiB body: no data needed to say so */
    memcpy(buf, "200000\r\n", 8);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 8, &payload), -EFBIG);
    /* even before the size line ends (an extension follows) */
    st = (struct http_chunked){.limit = 1 << 20};
    memcpy(buf, "FFFFFFFFFFFFFFF;", 16);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 16, &payload), -EFBIG);
    /* too many digits stays a 400: not a size at all */
    st = (struct http_chunked){.limit = 1 << 20};
    memcpy(buf, "1FFFFFFFFFFFFFFFF\r\n", 19);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 19, &payload), -EBADMSG);
    /* received + announced: 8 + 11 of 20 fit, 2 more do not */
    st = (struct http_chunked){.limit = 20};
    memcpy(buf, "8\r\n12345678\r\nB\r\n", 16);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 16, &payload), 16);
    CHECK(st.announced == 19);
    memcpy(buf, "abcdefghijk\r\n2\r\n", 16);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 16, &payload), -EFBIG);
    /* exactly the limit passes */
    st = (struct http_chunked){.limit = 5};
    memcpy(buf, "5\r\nhello\r\n0\r\n\r\n", 15);
    CHECK_EQ_INT(http_chunked_decode(&st, buf, 15, &payload), 15);
    CHECK(st.done);
    CHECK_EQ_INT(payload, 5);
}

/* The parser's and the decoder's errors are -errno; http_status_of() is
 * the one place they become the status that answers them (issue 17, item
 * 3: the parser returned -status, the body readers +status, multipart
 * 1/0/status). */
TEST(errors_answered_by_status_of)
{
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"FOO / HTTP/1.1\r\nHost: a\r\n\r\n", 501},
        {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"GET / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n", 417},
    };
    struct http_head h;
    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        ssize_t r = parse_n(cases[i].req, strlen(cases[i].req), &h);
        CHECK(r < 0 && r > -4096); /* an errno, not a status */
        CHECK_EQ_INT(http_status_of((int)r), cases[i].status);
    }
    struct http_limits lim = def_lim;
    lim.max_target = 10;
    const char *long_target = "GET /0123456789 HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(http_status_of((int)parse_lim(long_target, strlen(long_target), &lim, &h)), 414);
    lim = def_lim;
    lim.max_head = 256;
    char big[400];
    memset(big, 'x', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    CHECK_EQ_INT(http_status_of((int)parse_lim(big, sizeof(big), &lim, &h)), 431);
    struct http_chunked st = {.limit = 10};
    char buf[16];
    size_t payload;
    memcpy(buf, "zz\r\n", 4);
    CHECK_EQ_INT(http_status_of((int)http_chunked_decode(&st, buf, 4, &payload)), 400);
    st = (struct http_chunked){.limit = 10};
    memcpy(buf, "FF\r\n", 4);
    CHECK_EQ_INT(http_status_of((int)http_chunked_decode(&st, buf, 4, &payload)), 413);
    /* and the others of the table; anything else is a 500 */
    CHECK_EQ_INT(http_status_of(-ETIMEDOUT), 408);
    CHECK_EQ_INT(http_status_of(-EMEDIUMTYPE), 415);
    CHECK_EQ_INT(http_status_of(-ENOMEM), 500);
    CHECK_EQ_INT(http_status_of(-ENOSPC), 500);
    CHECK_EQ_INT(http_status_of(-EIO), 500);
}

TEST(chunked_limits)
{
    /* an extension of exactly HTTP_CHUNKED_MAX_EXT bytes passes, one more fails */
    size_t cap = 3 * HTTP_CHUNKED_MAX_EXT + 64;
    char *in = malloc(cap);
    for (int extra = 0; extra <= 1; extra++) {
        size_t k = 0;
        in[k++] = '1';
        in[k++] = ';';
        memset(in + k, 'e', HTTP_CHUNKED_MAX_EXT - 1 + (size_t)extra);
        k += HTTP_CHUNKED_MAX_EXT - 1 + (size_t)extra;
        memcpy(in + k, "\r\nx\r\n0\r\n\r\n", 10);
        k += 10;
        struct http_chunked st;
        size_t payload;
        char *buf;
        ssize_t r = dechunk_whole(in, k, &st, &payload, &buf);
        CHECK_EQ_INT(r, extra ? -EBADMSG : (ssize_t)k);
    }
    /* the limit is per chunk */
    {
        size_t k = 0;
        for (int i = 0; i < 3; i++) {
            in[k++] = '1';
            in[k++] = ';';
            memset(in + k, 'e', HTTP_CHUNKED_MAX_EXT - 1);
            k += HTTP_CHUNKED_MAX_EXT - 1;
            memcpy(in + k, "\r\nx\r\n", 5);
            k += 5;
        }
        memcpy(in + k, "0\r\n\r\n", 5);
        k += 5;
        struct dechunk *d = malloc(sizeof(*d));
        dechunk_feed(in, k, 0, 100, d);
        CHECK_EQ_INT(d->rc, 0);
        CHECK(d->done);
        CHECK_EQ_MEM(d->out, d->out_len, "xxx", 3);
        free(d);
    }
    /* so does whitespace before ';' */
    {
        in[0] = '1';
        memset(in + 1, ' ', HTTP_CHUNKED_MAX_EXT + 1);
        in[HTTP_CHUNKED_MAX_EXT + 2] = ';';
        struct http_chunked st;
        size_t payload;
        char *buf;
        CHECK_EQ_INT(dechunk_whole(in, HTTP_CHUNKED_MAX_EXT + 3, &st, &payload, &buf), -EBADMSG);
        CHECK_EQ_INT(dechunk_whole(in, HTTP_CHUNKED_MAX_EXT + 1, &st, &payload, &buf),
                     HTTP_CHUNKED_MAX_EXT + 1);
    }
    /* zero padding counts as extension, so it cannot go on forever */
    {
        memset(in, '0', HTTP_CHUNKED_MAX_EXT + 2);
        memcpy(in + HTTP_CHUNKED_MAX_EXT + 2, "1\r\n", 3);
        struct http_chunked st;
        size_t payload;
        char *buf;
        CHECK_EQ_INT(dechunk_whole(in, HTTP_CHUNKED_MAX_EXT + 5, &st, &payload, &buf), -EBADMSG);
    }
    free(in);

    /* trailers: HTTP_CHUNKED_MAX_TRAILERS bytes of field lines in all */
    cap = HTTP_CHUNKED_MAX_TRAILERS + 64;
    in = malloc(cap);
    for (int extra = 0; extra <= 1; extra++) {
        size_t k = 0;
        memcpy(in, "0\r\n", 3);
        k = 3;
        size_t line = 100; /* "X: " + 95 bytes + CRLF */
        size_t lines = HTTP_CHUNKED_MAX_TRAILERS / line;
        for (size_t i = 0; i < lines; i++) {
            memcpy(in + k, "X: ", 3);
            memset(in + k + 3, 'v', line - 5);
            memcpy(in + k + line - 2, "\r\n", 2);
            k += line;
        }
        size_t rest = HTTP_CHUNKED_MAX_TRAILERS - lines * line + (size_t)extra; /* >= 5 */
        memcpy(in + k, "Y: ", 3);
        memset(in + k + 3, 'w', rest - 5);
        memcpy(in + k + rest - 2, "\r\n", 2);
        k += rest;
        memcpy(in + k, "\r\n", 2);
        k += 2;
        struct http_chunked st;
        size_t payload;
        char *buf;
        ssize_t r = dechunk_whole(in, k, &st, &payload, &buf);
        CHECK_EQ_INT(r, extra ? -EBADMSG : (ssize_t)k);
        CHECK_EQ_INT(st.done, !extra);
    }
    free(in);
}

#define CHUNK_BAD(s)                                                                               \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }

static const struct {
    const char *in;
    size_t len;
} chunk_bad[] = {
    CHUNK_BAD("x\r\n"),
    CHUNK_BAD("\r\n"),
    CHUNK_BAD(";a\r\n"),
    CHUNK_BAD("-1\r\n"),
    CHUNK_BAD("+1\r\n"),
    CHUNK_BAD("0x5\r\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5g\r\n"),
    CHUNK_BAD("5\r\nhelloX\r\n0\r\n\r\n"),
    CHUNK_BAD("5\r\nhello\n0\r\n\r\n"),
    CHUNK_BAD("5\r\nhello\r0\r\n\r\n"),
    CHUNK_BAD("5\r\nhello0\r\n\r\n"),
    CHUNK_BAD("5\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5\rhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5 \r\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD(" 5\r\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5 5\r\n"),
    CHUNK_BAD("5;a\x01\r\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5;a\nhello\r\n0\r\n\r\n"),
    CHUNK_BAD("5;a\r\rhello\r\n0\r\n\r\n"),
    CHUNK_BAD("10000000000000000\r\n"),
    CHUNK_BAD("FFFFFFFFFFFFFFFFF\r\n"),
    CHUNK_BAD("0\r\nX: a\n\r\n"),
    CHUNK_BAD("0\r\nX: a\r\n b\r\n\r\n"),
    CHUNK_BAD("0\r\n: a\r\n\r\n"),
    CHUNK_BAD("0\r\nX : a\r\n\r\n"),
    CHUNK_BAD("0\r\nX a\r\n\r\n"),
    CHUNK_BAD("0\r\nX: a\x7f\r\n\r\n"),
    CHUNK_BAD("0\r\nX: a\0\r\n\r\n"),
    CHUNK_BAD("0\r\nX: a\rb\r\n\r\n"),
    CHUNK_BAD("0\r\n\r\r"),
    CHUNK_BAD("0\r\n\n"),
    CHUNK_BAD("0\n\r\n"),
    CHUNK_BAD("5\r\nhello\r\r\n0\r\n\r\n"),
};

TEST(chunked_malformed)
{
    struct dechunk *d = malloc(sizeof(*d));
    for (size_t i = 0; i < N_ELEMENTS(chunk_bad); i++) {
        struct http_chunked st;
        size_t payload;
        char *buf;
        ssize_t r = dechunk_whole(chunk_bad[i].in, chunk_bad[i].len, &st, &payload, &buf);
        if (r != -EBADMSG)
            fprintf(stderr, "chunk_bad row %zu: %zd\n", i, r);
        CHECK_EQ_INT(r, -EBADMSG);
        dechunk_feed(chunk_bad[i].in, chunk_bad[i].len, 0, 1, d);
        CHECK_EQ_INT(d->rc, -EBADMSG);
        CHECK(!d->done);
    }
    free(d);
}

/* ---- query, cookies, percent-decoding -------------------------------------------- */

TEST(query_find)
{
    struct view q = VIEW_LIT("a=1&b=2&&c&=e&b=3&a%20b=x+y&last=");
    struct view v;
    CHECK(http_query_find(q, "a", 1, &v));
    CHECK_VIEW(v, "1");
    CHECK(http_query_find(q, "b", 1, &v));
    CHECK_VIEW(v, "2");
    CHECK(http_query_find(q, "c", 1, &v));
    CHECK_EQ_INT(v.len, 0);
    CHECK(http_query_find(q, "", 0, &v));
    CHECK_VIEW(v, "e");
    CHECK(http_query_find(q, "a%20b", 5, &v));
    CHECK_VIEW(v, "x+y");
    CHECK(http_query_find(q, "last", 4, &v));
    CHECK_EQ_INT(v.len, 0);
    CHECK(!http_query_find(q, "d", 1, &v));
    CHECK(!http_query_find(q, "A", 1, &v));
    CHECK(!http_query_find(q, "a=1", 3, &v));
    struct view empty = {.p = NULL, .len = 0};
    CHECK(!http_query_find(empty, "a", 1, &v));
}

TEST(media_type_is)
{
    static const char f[] = "application/x-www-form-urlencoded";
    size_t n = sizeof(f) - 1;
    CHECK(http_media_type_is(VIEW_LIT("application/x-www-form-urlencoded"), f, n));
    CHECK(http_media_type_is(VIEW_LIT("Application/X-WWW-Form-URLencoded"), f, n));
    CHECK(http_media_type_is(VIEW_LIT("application/x-www-form-urlencoded;charset=utf-8"), f, n));
    CHECK(http_media_type_is(VIEW_LIT(" application/x-www-form-urlencoded ; q"), f, n));
    CHECK(http_media_type_is(VIEW_LIT("application/x-www-form-urlencoded\t"), f, n));
    CHECK(!http_media_type_is(VIEW_LIT("application/x-www-form-urlencodedx"), f, n));
    CHECK(!http_media_type_is(VIEW_LIT("application/x-www-form"), f, n));
    CHECK(!http_media_type_is(VIEW_LIT("text/plain"), f, n));
    CHECK(!http_media_type_is(VIEW_LIT(""), f, n));
}

TEST(cookie_find)
{
    struct view c = VIEW_LIT("a=1; b=\"two\";c=; d ;  e = five ; t=x=y; q=\"");
    struct view v;
    CHECK(http_cookie_find(c, "a", 1, &v));
    CHECK_VIEW(v, "1");
    CHECK(http_cookie_find(c, "b", 1, &v));
    CHECK_VIEW(v, "two");
    CHECK(http_cookie_find(c, "c", 1, &v));
    CHECK_EQ_INT(v.len, 0);
    CHECK(!http_cookie_find(c, "d", 1, &v));
    CHECK(http_cookie_find(c, "e", 1, &v));
    CHECK_VIEW(v, "five");
    CHECK(http_cookie_find(c, "t", 1, &v));
    CHECK_VIEW(v, "x=y");
    CHECK(http_cookie_find(c, "q", 1, &v));
    CHECK_VIEW(v, "\""); /* one quote is not a quoted value */
    CHECK(!http_cookie_find(c, "A", 1, &v));
    CHECK(!http_cookie_find(c, "two", 3, &v));
    struct view empty = {.p = NULL, .len = 0};
    CHECK(!http_cookie_find(empty, "a", 1, &v));

    /* found through a parsed request */
    struct http_head h;
    check_valid("GET / HTTP/1.1\r\nHost: a\r\nCookie: sid=abc123; theme=dark\r\n\r\n", &h);
    struct view cookie;
    CHECK(http_header_find(h.headers, "cookie", 6, &cookie));
    CHECK(http_cookie_find(cookie, "theme", 5, &v));
    CHECK_VIEW(v, "dark");
}

static ssize_t decode(const char *s, bool plus, char *out)
{
    return http_percent_decode(out, s, strlen(s), plus);
}

TEST(percent_decode)
{
    char out[64];
    CHECK_EQ_INT(decode("a%20b", false, out), 3);
    CHECK_EQ_MEM(out, 3, "a b", 3);
    CHECK_EQ_INT(decode("%41%62%7e%7E", false, out), 4);
    CHECK_EQ_MEM(out, 4, "Ab~~", 4);
    CHECK_EQ_INT(decode("a+b%2B", true, out), 4);
    CHECK_EQ_MEM(out, 4, "a b+", 4);
    CHECK_EQ_INT(decode("a+b", false, out), 3);
    CHECK_EQ_MEM(out, 3, "a+b", 3);
    CHECK_EQ_INT(decode("%e2%82%AC", false, out), 3);
    CHECK_EQ_MEM(out, 3, "\xe2\x82\xac", 3);
    CHECK_EQ_INT(decode("", false, out), 0);
    CHECK_EQ_INT(decode("%2", false, out), -1);
    CHECK_EQ_INT(decode("%", false, out), -1);
    CHECK_EQ_INT(decode("ab%", false, out), -1);
    CHECK_EQ_INT(decode("%zz", false, out), -1);
    CHECK_EQ_INT(decode("%g0", false, out), -1);
    CHECK_EQ_INT(decode("%0g", false, out), -1);
    CHECK_EQ_INT(decode("%00", false, out), -1);
    CHECK_EQ_INT(decode("a%0d", false, out), -1);
    CHECK_EQ_INT(decode("a%0Ab", false, out), -1);
    CHECK_EQ_INT(decode("%0D%0A", true, out), -1);
    /* in place */
    char s[] = "/a%2Fb%20c";
    CHECK_EQ_INT(http_percent_decode(s, s, strlen(s), false), 6);
    CHECK_EQ_MEM(s, 6, "/a/b c", 6);
    /* the %-sequence at the very end of a buffer that ends at the guard page */
    char *g = place(&G, "x%41", 4);
    CHECK_EQ_INT(http_percent_decode(out, g, 4, false), 2);
    g = place(&G, "x%4", 3);
    CHECK_EQ_INT(http_percent_decode(out, g, 3, false), -1);
}

/* ---- the SSE2 scanners against the byte-by-byte parser ----------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void put(char *b, size_t *n, size_t cap, const char *s)
{
    size_t l = strlen(s);
    if (*n + l <= cap) {
        memcpy(b + *n, s, l);
        *n += l;
    }
}

/* A head of the usual shape, with now and then something wrong or unusual
 * in one of its parts. */
static size_t gen_head(char *b, size_t cap)
{
    static const char *methods[] = {"GET ", "GET ", "POST ", "OPTIONS ", "get ", "PU T ", "M_X "};
    static const char *targets[] = {
        "/",  "/hello", "/a/b?c=d", "*", "http://h:1/x?y", "/a#b", "/0123456789abcdef0123",
        "/?", "/x\x7f", ""};
    static const char *versions[] = {"HTTP/1.1\r\n", "HTTP/1.1\r\n", "HTTP/1.0\r\n",
                                     "HTTP/2.0\r\n", "HTTP/1.1\n",   "HTTP/1.1 \r\n"};
    static const char *names[] = {"Host",
                                  "host",
                                  "HOST",
                                  "User-Agent",
                                  "Accept",
                                  "Accept-Encoding",
                                  "Connection",
                                  "Content-Length",
                                  "Transfer-Encoding",
                                  "Expect",
                                  "If-Modified-Since",
                                  "X_Y.z",
                                  "Sec-Fetch-Dest-Long-Name",
                                  "Ho st",
                                  "",
                                  " Host",
                                  "Host\x1a",
                                  "Range",
                                  "x~!#$%&'*+^`|"};
    static const char *values[] = {"127.0.0.1:8080",
                                   "example.com",
                                   "a:65536",
                                   "[::1]:80",
                                   "",
                                   " ",
                                   "\t",
                                   "curl/8.0",
                                   "close, keep-alive",
                                   "chunked",
                                   "gzip, chunked",
                                   "100-continue",
                                   "12",
                                   "1, 1",
                                   "x\x7fy",
                                   "a\tb ",
                                   "\x80\xff",
                                   "0123456789abcdef0123456789:",
                                   "a\rb",
                                   "a\nb",
                                   "  padded  ",
                                   "A.B"};
    size_t n = 0;
    if (rnd(20) == 0)
        put(b, &n, cap, "\r\n");
    put(b, &n, cap, methods[rnd(8) < 5 ? 0 : rnd(N_ELEMENTS(methods))]);
    put(b, &n, cap, targets[rnd(3) ? rnd(3) : rnd(N_ELEMENTS(targets))]);
    put(b, &n, cap, " ");
    put(b, &n, cap, versions[rnd(4) ? 0 : rnd(N_ELEMENTS(versions))]);
    unsigned fields = rnd(7);
    for (unsigned i = 0; i < fields; i++) {
        /* the first names and values are the usual ones, the rest anything */
        const char *name = i == 0 && rnd(4) ? "Host" : names[rnd(rnd(3) ? 13 : N_ELEMENTS(names))];
        put(b, &n, cap, name);
        put(b, &n, cap, rnd(8) ? ": " : rnd(2) ? ":" : ":  ");
        put(b, &n, cap, values[rnd(rnd(3) ? 4 : N_ELEMENTS(values))]);
        put(b, &n, cap, rnd(30) ? "\r\n" : rnd(2) ? "\n" : " \r\n");
    }
    put(b, &n, cap, "\r\n");
    /* a byte changed now and then, anywhere */
    if (n && rnd(4) == 0) {
        static const char odd[] = {'\r', '\n', '\t', ' ', ':', 0, 0x7f, (char)0x80, '#', 'A', '_'};
        b[rnd((uint32_t)n)] = odd[rnd(sizeof(odd))];
    }
    return n;
}

#define SAME_VIEW(a, b) ((a).p == (b).p && (a).len == (b).len)

static void compare_parsers(const char *b, size_t n, const struct http_limits *lim)
{
    struct http_head h1, h2;
    memset(&h1, 0, sizeof(h1));
    memset(&h2, 0, sizeof(h2));
    ssize_t r1 = http_parse_head(b, n, lim, &h1), r2 = http_parse_head_plain(b, n, lim, &h2);
    bool same = r1 == r2;
    if (same && r1 > 0)
        same = SAME_VIEW(h1.method_str, h2.method_str) && SAME_VIEW(h1.target, h2.target) &&
               SAME_VIEW(h1.path, h2.path) && SAME_VIEW(h1.query, h2.query) &&
               SAME_VIEW(h1.host, h2.host) && SAME_VIEW(h1.headers, h2.headers) &&
               h1.content_length == h2.content_length && h1.method == h2.method &&
               h1.version_minor == h2.version_minor && h1.flags == h2.flags;
    if (!same)
        fprintf(stderr, "SSE2 and plain parser differ (%zd, %zd) on %zu bytes: \"%.*s\"\n", r1, r2,
                n, (int)n, b);
    CHECK(same);
}

TEST(simd_matches_plain)
{
    static char b[1024];
    const struct http_limits small = {.max_head = 40, .max_target = 12};
    unsigned valid = 0, invalid = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = gen_head(b, sizeof(b));
        /* the whole head, with nothing after it and before the guard page */
        char *g = place(&G, b, n);
        compare_parsers(g, n, &def_lim);
        compare_parsers(g, n, &small);
        struct http_head h;
        if (http_parse_head_plain(g, n, &def_lim, &h) > 0)
            valid++;
        else
            invalid++;
        /* every prefix, so every scan ends at each byte of the buffer */
        for (size_t k = 0; k < n; k++)
            compare_parsers(place(&G, b, k), k, &def_lim);
        /* with bytes after it (a body or the next request) */
        memcpy(b + n, "GET / HTTP/1.1\r\n", 16);
        compare_parsers(place(&G, b, n + 16), n + 16, &def_lim);
    }
    /* the generator makes both kinds in numbers */
    fprintf(stderr, "simd_matches_plain: %u valid heads, %u invalid\n", valid, invalid);
    CHECK(valid > 1000);
    CHECK(invalid > 1000);
}

int main(void)
{
    G = guard_new();
    RUN(simple_get);
    RUN(methods);
    RUN(post_with_body_after_head);
    RUN(options_asterisk);
    RUN(absolute_form);
    RUN(http10_without_host);
    RUN(versions);
    RUN(leading_empty_lines);
    RUN(many_headers);
    RUN(long_target_accepted);
    RUN(query_split);
    RUN(header_lookup);
    RUN(values_trimmed_and_obs_text);
    RUN(framing_fields);
    RUN(connection_and_expect);
    RUN(host_forms);
    RUN(host_checked_alike_with_and_without_bytes_after);
    RUN(head_exactly_at_limits);
    RUN(pipelined);
    RUN(malformed_table);
    RUN(long_target_and_head_rejected);
    RUN(byte_classes);
    RUN(chunked_valid);
    RUN(chunked_partial_and_done);
    RUN(chunked_limits);
    RUN(chunked_size_above_the_body_limit);
    RUN(errors_answered_by_status_of);
    RUN(chunked_malformed);
    RUN(query_find);
    RUN(media_type_is);
    RUN(cookie_find);
    RUN(percent_decode);
    RUN(simd_matches_plain);
    return test_summary();
}
