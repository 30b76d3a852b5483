/* cidr.h - address lists of "allow"/"deny" keys (access, metrics): IPv4
 * and IPv6 CIDR blocks and "all", kept as IPv6 (IPv4 as ::ffff:a.b.c.d),
 * so an IPv4 client on an IPv6 socket matches the IPv4 blocks. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cidr {
    uint8_t addr[16]; /* masked to its prefix */
    uint8_t bits;     /* 0..128; 0 matches every address ("all") */
};

/* Parses "all", an address or ADDRESS/BITS into *c: 0, or -1 with *why
 * set. Bits beyond the prefix are ignored ("127.0.0.1/8" is 127.0.0.0/8). */
int cidr_parse(const char *s, struct cidr *c, const char **why);
/* An address (4 bytes for IPv4, 16 for IPv6; family 0: unknown) as the
 * 16 bytes the blocks are kept in; false when unknown. */
bool cidr_addr(unsigned family, const uint8_t *addr, uint8_t out[16]);
bool cidr_match(const struct cidr *c, const uint8_t a[16]);
