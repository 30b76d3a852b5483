/* sha1.h - SHA-1 (FIPS 180-4), for the WebSocket handshake's
 * Sec-WebSocket-Accept only: not for anything that needs a secure hash. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA1_LEN 20

struct sha1 {
    uint32_t h[5];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes in block */
};

void sha1_init(struct sha1 *s);
void sha1_update(struct sha1 *s, const void *p, size_t len);
void sha1_final(struct sha1 *s, uint8_t out[SHA1_LEN]);
/* The digest of len bytes at p, in one call. */
void sha1(const void *p, size_t len, uint8_t out[SHA1_LEN]);
