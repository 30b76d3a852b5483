/* base64.c - RFC 4648 base64: encoding, and a strict decoder that takes
 * only the canonical form (padding present, leftover bits zero). */
#include "base/base64.h"

#include <stdbool.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const void *p, size_t n, char *out)
{
    const uint8_t *b = p;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return (size_t)(o - out);
}

static int value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

ssize_t base64_decode(const char *s, size_t len, void *out)
{
    uint8_t *o = out;
    if (len % 4)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
        int v[4];
        for (int k = 0; k < 4 - pad; k++)
            if ((v[k] = value(s[i + (size_t)k])) < 0)
                return -1;
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
        if (pad < 2)
            x |= (uint32_t)v[2] << 6;
        if (pad < 1)
            x |= (uint32_t)v[3];
        /* canonical: the bits that padding leaves over are zero */
        if ((pad == 2 && (x & 0xffff)) || (pad == 1 && (x & 0xff)))
            return -1;
        *o++ = (uint8_t)(x >> 16);
        if (pad < 2)
            *o++ = (uint8_t)(x >> 8);
        if (pad < 1)
            *o++ = (uint8_t)x;
    }
    return (ssize_t)(o - (uint8_t *)out);
}
