/* fuzz_proxy.c - the PROXY protocol parser (http/proxy.h) on arbitrary bytes.
 *
 * The input is what a connection's first bytes could be. What must hold:
 *  - the result is one of PROXY_BAD, PROXY_MORE, PROXY_DONE;
 *  - done: 0 < len <= size; version 1 takes at most 107 bytes and ends with
 *    CRLF, version 2 at least 16; without "local", both addresses are IPv4
 *    or both IPv6;
 *  - the header is self-delimiting: the first len bytes alone give the
 *    same answer, and every shorter prefix needs more;
 *  - "need more" means a valid prefix: no prefix of it is malformed;
 *  - a TCP4 line gives back exactly the addresses and ports it names
 *    (strict dotted quads have one spelling). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/proxy.h"

static enum proxy_result parse_copy(const uint8_t *data, size_t n, struct proxy_hdr *h)
{
    /* exactly n bytes: ASan catches any over-read */
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data, n);
    enum proxy_result r = proxy_parse(p, n, h);
    free(p);
    return r;
}

static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t len, unsigned *port)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)len);
        *port = ntohs(a->sin_port);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)len);
        *port = ntohs(a->sin6_port);
    }
}

static void check_done(const uint8_t *data, size_t size, const struct proxy_hdr *h)
{
    if (h->len == 0 || h->len > size)
        abort();
    if (h->version == 1) {
        if (h->len > PROXY_V1_MAX || h->len < 8 || data[h->len - 2] != '\r' ||
            data[h->len - 1] != '\n' || memcmp(data, "PROXY ", 6))
            abort();
    } else if (h->version == 2) {
        if (h->len < PROXY_V2_FIXED || data[0] != '\r')
            abort();
    } else {
        abort();
    }
    if (h->local)
        return;
    int f = h->src.ss_family;
    if ((f != AF_INET && f != AF_INET6) || h->dst.ss_family != f)
        abort();
    if (h->version == 1 && f == AF_INET && !memcmp(data, "PROXY TCP4 ", 11)) {
        char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], line[PROXY_V1_MAX + 1];
        unsigned sp, dp;
        addr_text(&h->src, a, sizeof(a), &sp);
        addr_text(&h->dst, b, sizeof(b), &dp);
        int n = snprintf(line, sizeof(line), "PROXY TCP4 %s %s %u %u\r\n", a, b, sp, dp);
        if (n < 0 || (size_t)n != h->len || memcmp(line, data, h->len))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proxy_hdr h, again;
    enum proxy_result r = parse_copy(data, size, &h);
    if (r != PROXY_BAD && r != PROXY_MORE && r != PROXY_DONE)
        abort();
    if (r == PROXY_DONE) {
        check_done(data, size, &h);
        if (parse_copy(data, h.len, &again) != PROXY_DONE || again.len != h.len ||
            again.local != h.local || again.version != h.version ||
            (!h.local && (memcmp(&again.src, &h.src, sizeof(h.src)) ||
                          memcmp(&again.dst, &h.dst, sizeof(h.dst)))))
            abort();
        size_t cuts[] = {0, 1, h.len / 2, h.len - 1};
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
            if (cuts[i] < h.len && parse_copy(data, cuts[i], &again) != PROXY_MORE)
                abort();
    } else if (r == PROXY_MORE) {
        if (size >= PROXY_V1_MAX && data[0] == 'P')
            abort(); /* a v1 line has ended (or failed) by then */
        size_t cuts[] = {0, 1, size / 2, size ? size - 1 : 0};
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
            if (cuts[i] <= size && parse_copy(data, cuts[i], &again) != PROXY_MORE)
                abort();
    }
    return 0;
}
