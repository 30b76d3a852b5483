/* load.h - unaligned loads of a few bytes as one little-endian word, for
 * code that compares or hashes short byte strings a word at a time.
 *
 * Every load stays inside the bytes it is given: a string shorter than a
 * word is read with fixed-size loads that may overlap, never past its end,
 * so no caller needs padding behind its bytes (and sanitizers stay quiet).
 * The memcpy() calls compile to single moves. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t load32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* Whether the len (>= 8) bytes at a and b are equal: 8 at a time, the
 * last 8 again (overlapping the ones before), no memcmp() call. */
static inline bool eq_words(const char *a, const char *b, size_t len)
{
    for (size_t i = 0; i + 8 < len; i += 8)
        if (load64(a + i) != load64(b + i))
            return false;
    return load64(a + len - 8) == load64(b + len - 8);
}

/* The n (<= 8) bytes at p in the low bytes of a word, the others zero:
 * what load64() would give for n = 8. Two 4-byte loads that may overlap
 * for 4..8 bytes (the overlapping bytes are equal, so the OR keeps them),
 * else up to three single bytes that may repeat. */
static inline uint64_t load_upto8(const char *p, size_t n)
{
    if (n >= 4)
        return load32(p) | load32(p + n - 4) << (8 * (n - 4));
    if (!n)
        return 0;
    return (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[n / 2] << (8 * (n / 2)) |
           (uint64_t)(unsigned char)p[n - 1] << (8 * (n - 1));
}
