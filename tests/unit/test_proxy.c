/* test_proxy.c - the PROXY protocol parser (http/proxy.c): versions 1 and 2,
 * every truncation of a good header, and malformed headers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>

#include "http/proxy.h"
#include "test.h"

/* Parses exactly len bytes from a heap copy (so ASan sees over-reads). */
static enum proxy_result parse(const void *p, size_t len, struct proxy_hdr *out)
{
    void *copy = malloc(len ? len : 1);
    memcpy(copy, p, len);
    enum proxy_result r = proxy_parse(copy, len, out);
    free(copy);
    return r;
}

/* Every proper prefix of a good header needs more; the whole is done and
 * takes exactly hlen bytes, also with bytes after it. */
static void check_prefixes(const void *p, size_t hlen)
{
    struct proxy_hdr h;
    for (size_t i = 0; i < hlen; i++)
        if (parse(p, i, &h) != PROXY_MORE) {
            CHECK(!"a truncated header must need more");
            fprintf(stderr, "  at %zu of %zu\n", i, hlen);
        }
    CHECK_EQ_INT(parse(p, hlen, &h), PROXY_DONE);
    CHECK_EQ_INT(h.len, hlen);
    char *more = malloc(hlen + 18);
    memcpy(more, p, hlen);
    memcpy(more + hlen, "GET / HTTP/1.1\r\n\r\n", 18);
    CHECK_EQ_INT(parse(more, hlen + 18, &h), PROXY_DONE);
    CHECK_EQ_INT(h.len, hlen);
    free(more);
}

static void check_v4(const struct sockaddr_storage *ss, const char *addr, unsigned port)
{
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    char buf[INET_ADDRSTRLEN] = "";
    CHECK_EQ_INT(a->sin_family, AF_INET);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    CHECK_EQ_STR(buf, addr);
    CHECK_EQ_INT(ntohs(a->sin_port), port);
}

static void check_v6(const struct sockaddr_storage *ss, const char *addr, unsigned port)
{
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    char buf[INET6_ADDRSTRLEN] = "";
    CHECK_EQ_INT(a->sin6_family, AF_INET6);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    CHECK_EQ_STR(buf, addr);
    CHECK_EQ_INT(ntohs(a->sin6_port), port);
}

static enum proxy_result parse_str(const char *s, struct proxy_hdr *h)
{
    return parse(s, strlen(s), h);
}

static int bad(const char *s)
{
    struct proxy_hdr h;
    return parse_str(s, &h) == PROXY_BAD;
}

TEST(v1_tcp4)
{
    static const char s[] = "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n";
    struct proxy_hdr h;
    CHECK_EQ_INT(parse_str(s, &h), PROXY_DONE);
    CHECK_EQ_INT(h.version, 1);
    CHECK(!h.local);
    check_v4(&h.src, "192.0.2.1", 56324);
    check_v4(&h.dst, "198.51.100.7", 443);
    check_prefixes(s, sizeof(s) - 1);
}

TEST(v1_tcp6)
{
    static const char s[] = "PROXY TCP6 2001:db8::1 ::1 0 65535\r\n";
    struct proxy_hdr h;
    CHECK_EQ_INT(parse_str(s, &h), PROXY_DONE);
    CHECK(!h.local);
    check_v6(&h.src, "2001:db8::1", 0);
    check_v6(&h.dst, "::1", 65535);
    check_prefixes(s, sizeof(s) - 1);
    static const char m[] = "PROXY TCP6 ::ffff:192.0.2.1 FE80::A 1 2\r\n";
    CHECK_EQ_INT(parse_str(m, &h), PROXY_DONE);
    check_v6(&h.src, "::ffff:192.0.2.1", 1);
    check_v6(&h.dst, "fe80::a", 2);
}

TEST(v1_longest)
{
    /* the longest TCP6 line, and the specification's worst case (the same
     * after UNKNOWN): 107 bytes with the CRLF */
    static const char s[] = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    struct proxy_hdr h;
    CHECK_EQ_INT(parse_str(s, &h), PROXY_DONE);
    CHECK_EQ_INT(h.len, sizeof(s) - 1);
    check_prefixes(s, sizeof(s) - 1);
    static const char u[] = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    CHECK_EQ_INT(sizeof(u) - 1, PROXY_V1_MAX);
    CHECK_EQ_INT(parse_str(u, &h), PROXY_DONE);
    CHECK_EQ_INT(h.len, PROXY_V1_MAX);
    check_prefixes(u, sizeof(u) - 1);
}

TEST(v1_unknown)
{
    struct proxy_hdr h;
    static const char s[] = "PROXY UNKNOWN\r\n";
    CHECK_EQ_INT(parse_str(s, &h), PROXY_DONE);
    CHECK(h.local);
    CHECK_EQ_INT(h.len, sizeof(s) - 1);
    check_prefixes(s, sizeof(s) - 1);
    static const char t[] = "PROXY UNKNOWN ffff:: whatever follows 1 2\r\n";
    CHECK_EQ_INT(parse_str(t, &h), PROXY_DONE);
    CHECK(h.local);
    check_prefixes(t, sizeof(t) - 1);
    /* 107 bytes of UNKNOWN line is fine, 108 is not */
    char line[PROXY_V1_MAX + 2];
    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    memcpy(line + PROXY_V1_MAX - 2, "\r\n", 2);
    CHECK_EQ_INT(parse(line, PROXY_V1_MAX, &h), PROXY_DONE);
    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    memcpy(line + PROXY_V1_MAX - 1, "\r\n", 2);
    CHECK_EQ_INT(parse(line, PROXY_V1_MAX + 1, &h), PROXY_BAD);
    CHECK_EQ_INT(parse(line, PROXY_V1_MAX, &h), PROXY_BAD);
    CHECK_EQ_INT(parse(line, PROXY_V1_MAX - 1, &h), PROXY_MORE);
}

TEST(v1_malformed)
{
    CHECK(bad("GET / HTTP/1.1\r\n\r\n"));
    CHECK(bad("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"));
    CHECK(bad("PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n")); /* two spaces */
    CHECK(bad("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n"));  /* protocol */
    CHECK(bad("PROXY TCP 1.2.3.4 5.6.7.8 1 2\r\n"));
    CHECK(bad("PROXY UDP4")); /* no known prefix */
    CHECK(bad("PROXY UNKNOWNX\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n")); /* bare LF */
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n")); /* trailing space */
    CHECK(bad("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"));     /* a port missing */
    CHECK(bad("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n")); /* addresses */
    CHECK(bad("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n"));
    CHECK(bad("PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n"));
    CHECK(bad("PROXY TCP4 ::1 5.6.7.8 1 2\r\n")); /* v6 in TCP4 */
    CHECK(bad("PROXY TCP6 1.2.3.4 ::1 1 2\r\n")); /* v4 in TCP6 */
    CHECK(bad("PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n"));
    CHECK(bad("PROXY TCP6 :::1 ::1 1 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n")); /* ports */
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 99999 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 100000 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 00")); /* seen early */
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n"));
    CHECK(bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 x\r\n"));
    CHECK(bad("PROXY UNKNOWN \n"));
    struct proxy_hdr h;
    CHECK_EQ_INT(parse("PROXY UNKNOWN a\0b\r\n", 20, &h), PROXY_BAD);
    CHECK(bad("PROXY UNKNOWN\r\r\n"));
    /* no CRLF in 107 bytes */
    char line[200];
    memset(line, '1', sizeof(line));
    memcpy(line, "PROXY TCP4 1.2.3.4 5.6.7.8 1 ", 29);
    CHECK_EQ_INT(parse(line, sizeof(line), &h), PROXY_BAD);
}

/* A v2 header: signature, ver/cmd, fam, length, then body. */
static size_t v2(unsigned char *buf, unsigned char vercmd, unsigned char fam, const void *body,
                 size_t blen)
{
    static const unsigned char sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                          0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
    memcpy(buf, sig, 12);
    buf[12] = vercmd;
    buf[13] = fam;
    buf[14] = (unsigned char)(blen >> 8);
    buf[15] = (unsigned char)blen;
    if (blen)
        memcpy(buf + 16, body, blen);
    return 16 + blen;
}

static const unsigned char body4[12] = {192, 0, 2, 1, 198, 51, 100, 7, 0xDC, 0x04, 0x01, 0xBB};

TEST(v2_proxy_ipv4)
{
    unsigned char buf[256];
    size_t n = v2(buf, 0x21, 0x11, body4, sizeof(body4));
    struct proxy_hdr h;
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK_EQ_INT(h.version, 2);
    CHECK(!h.local);
    CHECK_EQ_INT(h.len, 28);
    check_v4(&h.src, "192.0.2.1", 0xDC04);
    check_v4(&h.dst, "198.51.100.7", 443);
    check_prefixes(buf, n);
}

TEST(v2_proxy_ipv6)
{
    unsigned char body[36] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1, [31] = 1, 0x12, 0x34, 0, 80};
    unsigned char buf[256];
    size_t n = v2(buf, 0x21, 0x21, body, sizeof(body));
    struct proxy_hdr h;
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK(!h.local);
    check_v6(&h.src, "2001:db8::1", 0x1234);
    check_v6(&h.dst, "::1", 80);
    check_prefixes(buf, n);
}

TEST(v2_tlvs)
{
    /* ALPN "h2", an authority, a NOOP of zero bytes, a CRC32C: all skipped */
    unsigned char body[64];
    size_t b = sizeof(body4);
    memcpy(body, body4, b);
    static const unsigned char tlvs[] = {0x01, 0, 2, 'h',  '2', 0x02, 0, 3, 'a', '.', 'b',
                                         0x04, 0, 0, 0x03, 0,   4,    1, 2, 3,   4};
    memcpy(body + b, tlvs, sizeof(tlvs));
    b += sizeof(tlvs);
    unsigned char buf[256];
    size_t n = v2(buf, 0x21, 0x11, body, b);
    struct proxy_hdr h;
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK_EQ_INT(h.len, n);
    check_v4(&h.src, "192.0.2.1", 0xDC04);
    check_prefixes(buf, n);
    /* a TLV running past the block, or a piece too short to be one */
    unsigned char over[] = {0x01, 0, 3, 'h', '2'};
    memcpy(body + 12, over, sizeof(over));
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x11, body, 12 + sizeof(over)), &h), PROXY_BAD);
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x11, body, 12 + 2), &h), PROXY_BAD);
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x11, body, 12 + 1), &h), PROXY_BAD);
}

TEST(v2_local)
{
    unsigned char buf[256];
    struct proxy_hdr h;
    size_t n = v2(buf, 0x20, 0x00, NULL, 0); /* a health check */
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK(h.local);
    CHECK_EQ_INT(h.len, 16);
    check_prefixes(buf, n);
    /* LOCAL discards its block, addresses and family included */
    n = v2(buf, 0x20, 0x11, body4, sizeof(body4));
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK(h.local);
    CHECK_EQ_INT(h.len, 28);
    n = v2(buf, 0x20, 0x11, body4, 3); /* even a short one */
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_DONE);
    CHECK(h.local);
}

TEST(v2_keep_own)
{
    unsigned char buf[512], body[216] = {0};
    struct proxy_hdr h;
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x00, NULL, 0), &h), PROXY_DONE); /* UNSPEC */
    CHECK(h.local);
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x31, body, 216), &h), PROXY_DONE); /* UNIX */
    CHECK(h.local);
    CHECK_EQ_INT(h.len, 232);
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x31, body, 215), &h), PROXY_BAD);
}

TEST(v2_malformed)
{
    unsigned char buf[256];
    struct proxy_hdr h;
    size_t n = v2(buf, 0x21, 0x11, body4, sizeof(body4));
    for (size_t i = 0; i < 12; i++) { /* every signature byte */
        buf[i] ^= 0x20;
        CHECK_EQ_INT(parse(buf, n, &h), PROXY_BAD);
        CHECK_EQ_INT(parse(buf, i + 1, &h), PROXY_BAD); /* as soon as it shows */
        buf[i] ^= 0x20;
    }
    static const unsigned char vercmd[] = {0x11, 0x31, 0xF1, 0x01, 0x22, 0x2F};
    for (size_t i = 0; i < sizeof(vercmd); i++) {
        n = v2(buf, vercmd[i], 0x11, body4, sizeof(body4));
        CHECK_EQ_INT(parse(buf, n, &h), PROXY_BAD);
        CHECK_EQ_INT(parse(buf, 13, &h), PROXY_BAD);
    }
    /* datagrams, unknown families and transports */
    static const unsigned char fam[] = {0x12, 0x22, 0x32, 0x01, 0x10, 0x13, 0x41, 0xFF};
    for (size_t i = 0; i < sizeof(fam); i++) {
        n = v2(buf, 0x21, fam[i], body4, sizeof(body4));
        CHECK_EQ_INT(parse(buf, n, &h), PROXY_BAD);
        CHECK_EQ_INT(parse(buf, 14, &h), PROXY_BAD);
    }
    /* a length too short for the addresses */
    n = v2(buf, 0x21, 0x11, body4, 11);
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_BAD);
    CHECK_EQ_INT(parse(buf, 16, &h), PROXY_BAD);
    unsigned char body6[36] = {0};
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x21, body6, 35), &h), PROXY_BAD);
    CHECK_EQ_INT(parse(buf, v2(buf, 0x21, 0x21, body4, 12), &h), PROXY_BAD);
    /* a length past the bytes there are: more, never over-read */
    n = v2(buf, 0x21, 0x11, body4, sizeof(body4));
    buf[14] = 0xFF;
    buf[15] = 0xFF;
    CHECK_EQ_INT(parse(buf, n, &h), PROXY_MORE);
}

TEST(neither)
{
    struct proxy_hdr h;
    CHECK_EQ_INT(parse("", 0, &h), PROXY_MORE);
    CHECK(bad("\x16\x03\x01")); /* a TLS hello */
    CHECK(bad("\r\nGET"));
    CHECK(bad("\r\r"));
    CHECK(bad(" PROXY"));
}

int main(void)
{
    RUN(v1_tcp4);
    RUN(v1_tcp6);
    RUN(v1_longest);
    RUN(v1_unknown);
    RUN(v1_malformed);
    RUN(v2_proxy_ipv4);
    RUN(v2_proxy_ipv6);
    RUN(v2_tlvs);
    RUN(v2_local);
    RUN(v2_keep_own);
    RUN(v2_malformed);
    RUN(neither);
    return test_summary();
}
