/* uri.h - building URIs from decoded paths, for Location headers.
 * Pure functions, any thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Writes the decoded path p (len bytes) with every byte that may not
 * stand for itself in a URI path (RFC 3986: pchar and '/') percent-encoded;
 * out needs room for 3 * len bytes. Returns the bytes written (no NUL). */
size_t http_path_escape(char *out, const char *p, size_t len);

/* Writes the raw query q (len bytes, as the client sent it) with every
 * byte that RFC 3986 does not allow in a query (pchar, '/', '?')
 * percent-encoded, '%' too unless it starts an escape ("%41" stays); out
 * needs room for 3 * len bytes. Returns the bytes written (no NUL). */
size_t http_query_escape(char *out, const char *q, size_t len);

/* A Location for a redirect, malloc()ed and NUL-terminated: base as it is,
 * the decoded path escaped, a '/' when slash, and "?query" (escaped by
 * http_query_escape()) when the query is not empty. NULL when out of
 * memory. */
char *http_location(const char *base, size_t base_len, const char *path, size_t path_len,
                    bool slash, const char *query, size_t query_len);

/* --- byte tests on a path, a word at a time -------------------------------
 *
 * A path of 8 bytes or more is read as the 8-byte words at 0, 7, 14, ...
 * and its last 8 bytes: they overlap, so each pair of neighbouring bytes is
 * inside one word. One of 4 to 7 bytes is read as its first and its last 4
 * bytes side by side: every byte is there and every real pair too, but the
 * middle of the word may show a pair that is not one (the tests below then
 * answer yes where a byte loop would say no, never the other way round).
 * Shorter paths are tested byte by byte. */

#define URI_ONES 0x0101010101010101ull

/* 0x80 in each byte of w equal to c; also, through the borrow of the
 * subtraction, maybe in bytes equal to c ^ 1 right above such a byte. So
 * the result is 0 exactly when no byte equals c, and a mark is never
 * missing, only sometimes extra (see uri_word_needs_decoding). */
static inline uint64_t uri_bytes_eq(uint64_t w, unsigned char c)
{
    uint64_t x = w ^ (URI_ONES * c);
    return (x - URI_ONES) & ~x & (URI_ONES * 0x80);
}

static inline uint64_t uri_load8(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t uri_load4_4(const char *p, size_t len)
{
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + len - 4, 4);
    return a | (uint64_t)b << 32;
}

/* A '%', or a '/' followed by '/' or '.', in w. '.' and '/' differ only
 * in their lowest bit (0x2e, 0x2f), so one compare of the neighbours with
 * that bit set finds both. An extra mark of uri_bytes_eq() on the slashes
 * is a '.' right after a '/': a pair that needs decoding anyway. */
static inline bool uri_word_needs_decoding(uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint64_t next = w << 8; /* each byte's right neighbour in its place, 0 last */
#else
    uint64_t next = w >> 8;
#endif
    return uri_bytes_eq(w, '%') | (uri_bytes_eq(w, '/') & uri_bytes_eq(next | URI_ONES, '/'));
}

/* Whether the raw path p needs percent-decoding or normalising: it has a
 * '%', or a '/' followed by '/' or '.'. May say yes for a path of 4 to 7
 * bytes that needs neither (see above): decoding it then changes nothing. */
static inline __attribute__((always_inline)) bool http_path_needs_decoding(const char *p,
                                                                           size_t len)
{
    if (len >= 8) {
        size_t i = 0;
        for (; i + 8 < len; i += 7)
            if (uri_word_needs_decoding(uri_load8(p + i)))
                return true;
        return uri_word_needs_decoding(uri_load8(p + len - 8));
    }
    if (len >= 4)
        return uri_word_needs_decoding(uri_load4_4(p, len));
    for (size_t i = 0; i < len; i++)
        if (p[i] == '%' || (p[i] == '/' && i + 1 < len && (p[i + 1] == '/' || p[i + 1] == '.')))
            return true;
    return false;
}

static inline bool uri_word_nul_or_backslash(uint64_t w)
{
    return (uri_bytes_eq(w, 0) | uri_bytes_eq(w, '\\')) != 0;
}

/* Whether the path p has a NUL or a backslash (exact). */
static inline bool http_path_has_nul_or_backslash(const char *p, size_t len)
{
    if (len >= 8) {
        for (size_t i = 0; i + 8 < len; i += 8)
            if (uri_word_nul_or_backslash(uri_load8(p + i)))
                return true;
        return uri_word_nul_or_backslash(uri_load8(p + len - 8));
    }
    if (len >= 4)
        return uri_word_nul_or_backslash(uri_load4_4(p, len));
    for (size_t i = 0; i < len; i++)
        if (p[i] == '\\' || p[i] == '\0')
            return true;
    return false;
}
