/* cidr.c - address blocks (cidr.h). */
#include "mod/cidr.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void mask(uint8_t a[16], unsigned bits)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned keep = bits >= 8 ? 8 : bits;
        a[i] &= (uint8_t)(0xff00u >> keep);
        bits -= keep;
    }
}

int cidr_parse(const char *s, struct cidr *c, const char **why)
{
    *c = (struct cidr){0};
    if (!strcmp(s, "all"))
        return 0;
    char buf[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n >= sizeof(buf)) {
        *why = "not an IPv4 or IPv6 address";
        return -1;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    unsigned max;
    uint8_t v4[4];
    if (inet_pton(AF_INET, buf, v4) == 1) {
        memset(c->addr, 0, 10);
        c->addr[10] = c->addr[11] = 0xff;
        memcpy(c->addr + 12, v4, 4);
        max = 32;
    } else if (inet_pton(AF_INET6, buf, c->addr) == 1) {
        max = 128;
    } else {
        *why = "not an IPv4 or IPv6 address (or 'all')";
        return -1;
    }
    unsigned bits = max;
    if (slash) {
        const char *b = slash + 1;
        char *end;
        unsigned long v = strtoul(b, &end, 10);
        if (!*b || *end || *b < '0' || *b > '9' || v > max || (b[0] == '0' && b[1])) {
            *why = max == 32 ? "the prefix length must be 0-32" : "the prefix length must be 0-128";
            return -1;
        }
        bits = (unsigned)v;
    }
    if (max == 32)
        bits += 96;
    mask(c->addr, bits);
    c->bits = (uint8_t)bits;
    return 0;
}

bool cidr_addr(unsigned family, const uint8_t *addr, uint8_t out[16])
{
    if (family == AF_INET) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, addr, 4);
        return true;
    }
    if (family == AF_INET6) {
        memcpy(out, addr, 16);
        return true;
    }
    return false;
}

bool cidr_match(const struct cidr *c, const uint8_t a[16])
{
    unsigned bits = c->bits, i = 0;
    for (; bits >= 8; i++, bits -= 8)
        if (a[i] != c->addr[i])
            return false;
    return !bits || ((a[i] ^ c->addr[i]) & (uint8_t)(0xff00u >> bits)) == 0;
}
