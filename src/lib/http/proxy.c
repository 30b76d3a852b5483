/* proxy.c - the PROXY protocol header, versions 1 and 2 (see proxy.h). */
#include "http/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

/* --- version 1: one text line ---------------------------------------------- */

enum tok { TOK_OK, TOK_MORE, TOK_BAD };

struct line {
    const char *p;
    size_t i, n; /* position, bytes available (at most PROXY_V1_MAX) */
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool in_v4(char c)
{
    return is_digit(c) || c == '.';
}

static bool in_v6(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

/* A run of 1..max characters accepted by ok(), up to (not over) the first
 * character that is not. TOK_MORE when the bytes end inside it. */
static enum tok token(struct line *l, bool (*ok)(char), size_t max, const char **start,
                      size_t *tlen)
{
    size_t b = l->i;
    while (l->i < l->n && ok(l->p[l->i])) {
        if (l->i - b == max)
            return TOK_BAD;
        l->i++;
    }
    *start = l->p + b;
    *tlen = l->i - b;
    if (l->i == l->n)
        return TOK_MORE;
    return *tlen ? TOK_OK : TOK_BAD;
}

/* One expected character: TOK_MORE at the end of the bytes. */
static enum tok expect(struct line *l, char c)
{
    if (l->i == l->n)
        return TOK_MORE;
    return l->p[l->i++] == c ? TOK_OK : TOK_BAD;
}

static enum tok v1_addr(struct line *l, int family, void *addr)
{
    const char *s;
    size_t len;
    size_t max = family == AF_INET ? 15 : INET6_ADDRSTRLEN - 1;
    enum tok t = token(l, family == AF_INET ? in_v4 : in_v6, max, &s, &len);
    if (t != TOK_OK)
        return t;
    char buf[INET6_ADDRSTRLEN];
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(family, buf, addr) == 1 ? TOK_OK : TOK_BAD;
}

static enum tok v1_port(struct line *l, uint16_t *port)
{
    const char *s;
    size_t len;
    enum tok t = token(l, is_digit, 5, &s, &len);
    if (t == TOK_MORE && len > 1 && s[0] == '0')
        return TOK_BAD; /* a leading zero shows already */
    if (t != TOK_OK)
        return t;
    if (len > 1 && s[0] == '0')
        return TOK_BAD;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++)
        v = v * 10 + (unsigned)(s[i] - '0');
    if (v > 65535)
        return TOK_BAD;
    *port = htons((uint16_t)v);
    return TOK_OK;
}

static void set_addr(struct sockaddr_storage *ss, int family, const void *addr, uint16_t port)
{
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, addr, 4);
        a->sin_port = port;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, addr, 16);
        a->sin6_port = port;
    }
}

/* "TCP4 ..."/"TCP6 ...": the rest of the line after "PROXY TCPx". */
static enum tok v1_tcp(struct line *l, int family, struct proxy_hdr *out)
{
    unsigned char src[16], dst[16];
    uint16_t sport, dport;
    enum tok t;
    if ((t = expect(l, ' ')) || (t = v1_addr(l, family, src)) || (t = expect(l, ' ')) ||
        (t = v1_addr(l, family, dst)) || (t = expect(l, ' ')) || (t = v1_port(l, &sport)) ||
        (t = expect(l, ' ')) || (t = v1_port(l, &dport)) || (t = expect(l, '\r')) ||
        (t = expect(l, '\n')))
        return t;
    set_addr(&out->src, family, src, sport);
    set_addr(&out->dst, family, dst, dport);
    out->local = false;
    return TOK_OK;
}

/* "UNKNOWN": whatever follows, up to the CRLF, is ignored. */
static enum tok v1_unknown(struct line *l)
{
    if (l->i == l->n)
        return TOK_MORE;
    if (l->p[l->i] != ' ' && l->p[l->i] != '\r')
        return TOK_BAD;
    for (; l->i < l->n; l->i++) {
        char c = l->p[l->i];
        if (c == '\n' || c == '\0')
            return TOK_BAD;
        if (c == '\r') {
            l->i++;
            return expect(l, '\n');
        }
    }
    return TOK_MORE;
}

static bool in_proto(char c)
{
    return (c >= 'A' && c <= 'Z') || is_digit(c);
}

static enum proxy_result parse_v1(const char *p, size_t len, struct proxy_hdr *out)
{
    static const char magic[] = "PROXY ";
    struct line l = {.p = p, .n = len < PROXY_V1_MAX ? len : PROXY_V1_MAX};
    size_t m = l.n < 6 ? l.n : 6;
    if (memcmp(p, magic, m))
        return PROXY_BAD;
    if (l.n < 6)
        return PROXY_MORE;
    l.i = 6;

    const char *proto;
    size_t plen;
    enum tok t = token(&l, in_proto, 7, &proto, &plen);
    if (t == TOK_MORE) { /* a prefix of a known protocol may still become one */
        static const char *const names[] = {"TCP4", "TCP6", "UNKNOWN"};
        bool prefix = false;
        for (size_t i = 0; i < 3; i++)
            prefix |= plen <= strlen(names[i]) && !memcmp(proto, names[i], plen);
        t = prefix ? TOK_MORE : TOK_BAD;
    } else if (t == TOK_OK) {
        if (plen == 4 && !memcmp(proto, "TCP4", 4))
            t = v1_tcp(&l, AF_INET, out);
        else if (plen == 4 && !memcmp(proto, "TCP6", 4))
            t = v1_tcp(&l, AF_INET6, out);
        else if (plen == 7 && !memcmp(proto, "UNKNOWN", 7) && !(t = v1_unknown(&l)))
            out->local = true;
        else if (t == TOK_OK)
            t = TOK_BAD;
    }
    if (t == TOK_BAD)
        return PROXY_BAD;
    if (t == TOK_MORE) /* no CRLF within the longest line allowed */
        return len >= PROXY_V1_MAX ? PROXY_BAD : PROXY_MORE;
    out->len = l.i;
    out->version = 1;
    return PROXY_DONE;
}

/* --- version 2: binary ------------------------------------------------------ */

static const unsigned char v2_sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                         0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

enum { V2_LOCAL = 0x0, V2_PROXY = 0x1 };

static enum proxy_result parse_v2(const unsigned char *b, size_t len, struct proxy_hdr *out)
{
    if (memcmp(b, v2_sig, len < 12 ? len : 12))
        return PROXY_BAD;
    if (len < 13)
        return PROXY_MORE;
    unsigned cmd = b[12] & 0x0F;
    if ((b[12] >> 4) != 2 || (cmd != V2_LOCAL && cmd != V2_PROXY))
        return PROXY_BAD;
    if (len < 14)
        return PROXY_MORE;
    size_t need = 0; /* the address block's size */
    int family = AF_UNSPEC;
    if (cmd == V2_PROXY) {
        switch (b[13]) {
        case 0x00: /* UNSPEC: keep the socket's addresses */
            break;
        case 0x11: /* TCP over IPv4 */
            family = AF_INET;
            need = 12;
            break;
        case 0x21: /* TCP over IPv6 */
            family = AF_INET6;
            need = 36;
            break;
        case 0x31: /* UNIX stream: no address a client can be told by */
            need = 216;
            break;
        default: /* datagrams, unknown families and transports */
            return PROXY_BAD;
        }
    } /* LOCAL: the block is discarded, family included (the spec says so) */
    if (len < PROXY_V2_FIXED)
        return PROXY_MORE;
    size_t body = (size_t)b[14] << 8 | b[15];
    if (body < need)
        return PROXY_BAD;
    if (len < PROXY_V2_FIXED + body)
        return PROXY_MORE;
    const unsigned char *a = b + PROXY_V2_FIXED;
    if (cmd == V2_PROXY) {
        /* the TLVs are skipped, but each must fit in the block */
        for (size_t i = need; i < body;) {
            if (body - i < 3)
                return PROXY_BAD;
            size_t tl = (size_t)a[i + 1] << 8 | a[i + 2];
            if (tl > body - i - 3)
                return PROXY_BAD;
            i += 3 + tl;
        }
    }
    out->len = PROXY_V2_FIXED + body;
    out->version = 2;
    out->local = family == AF_UNSPEC;
    if (!out->local) {
        size_t al = family == AF_INET ? 4 : 16;
        uint16_t sport, dport;
        memcpy(&sport, a + 2 * al, 2); /* both in network order already */
        memcpy(&dport, a + 2 * al + 2, 2);
        set_addr(&out->src, family, a, sport);
        set_addr(&out->dst, family, a + al, dport);
    }
    return PROXY_DONE;
}

enum proxy_result proxy_parse(const void *p, size_t len, struct proxy_hdr *out)
{
    const unsigned char *b = p;
    if (len == 0)
        return PROXY_MORE;
    if (b[0] == 'P')
        return parse_v1(p, len, out);
    if (b[0] == v2_sig[0])
        return parse_v2(b, len, out);
    return PROXY_BAD;
}
