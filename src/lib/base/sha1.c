/* sha1.c - SHA-1 as FIPS 180-4 §6.1 describes it: 64-byte blocks, 80
 * rounds, big-endian words. */
#include "base/sha1.h"

#include <string.h>

static inline uint32_t rol(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static void block(struct sha1 *s, const uint8_t *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = s->h[0], bb = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = bb ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = bb ^ c ^ d;
            k = 0xca62c1d6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    s->h[0] += a;
    s->h[1] += bb;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
}

void sha1_init(struct sha1 *s)
{
    *s = (struct sha1){.h = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0}};
}

void sha1_update(struct sha1 *s, const void *p, size_t len)
{
    const uint8_t *b = p;
    s->total += len;
    while (len > 0) {
        size_t n = 64 - s->used;
        if (n > len)
            n = len;
        memcpy(s->block + s->used, b, n);
        s->used += n;
        b += n;
        len -= n;
        if (s->used == 64) {
            block(s, s->block);
            s->used = 0;
        }
    }
}

void sha1_final(struct sha1 *s, uint8_t out[SHA1_LEN])
{
    uint64_t bits = s->total * 8;
    uint8_t pad[72] = {0x80};
    /* 0x80, zeros up to 56 mod 64, then the length in bits, big-endian */
    size_t n = s->used < 56 ? 56 - s->used : 120 - s->used;
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    sha1_update(s, pad, n + 8);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void sha1(const void *p, size_t len, uint8_t out[SHA1_LEN])
{
    struct sha1 s;
    sha1_init(&s);
    sha1_update(&s, p, len);
    sha1_final(&s, out);
}
