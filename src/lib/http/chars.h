/* chars.h - the character classes of the HTTP grammar (RFC 9110, 9112) and
 * the small scanners built on them, shared by the request parser
 * (parser.c), the on-demand lookups (fields.c) and the chunked decoder
 * (chunked.c). Nothing else includes it.
 *
 * The tables are static: each of those files has its own copy of the ones
 * it uses (256 bytes a table), so the parser reads them directly rather
 * than through the GOT of the shared library.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/common.h"

/* HTTP_SIMD: the scanners below use SSE2 (always there on x86-64).
 * HTTP_CHARS_PLAIN turns it off, so that a test can build the parser a
 * second time, byte by byte, and compare the two. */
#if defined(__SSE2__) && !defined(HTTP_CHARS_PLAIN)
#define HTTP_SIMD 1
#include <emmintrin.h>
#else
#define HTTP_SIMD 0
#endif

/* ---- character classes ---------------------------------------------------- */

enum {
    C_TCHAR = 1 << 0,  /* token character (field names, methods, codings) */
    C_VALUE = 1 << 1,  /* field-value byte: VCHAR, obs-text, SP, HTAB */
    C_TARGET = 1 << 2, /* accepted in a request-target */
    C_HOST = 1 << 3,   /* reg-name: unreserved / sub-delims ('%' is checked apart) */
    C_HEX = 1 << 4,
    C_DIGIT = 1 << 5,
    C_OWS = 1 << 6, /* SP, HTAB */
};

#define IS_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_HEX(c)   (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F'))
#define IS_TCHAR(c)                                                                                \
    (IS_ALPHA(c) || IS_DIGIT(c) || (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' ||         \
     (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' ||          \
     (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' || (c) == '~')
#define IS_VALUE(c)  (((c) >= 0x20 && (c) != 0x7f) || (c) == '\t')
#define IS_TARGET(c) ((c) > 0x20 && (c) < 0x7f && (c) != '#')
#define IS_SUBDELIM(c)                                                                             \
    ((c) == '!' || (c) == '$' || (c) == '&' || (c) == '\'' || (c) == '(' || (c) == ')' ||          \
     (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' || (c) == '=')
#define IS_HOST(c)                                                                                 \
    (IS_ALPHA(c) || IS_DIGIT(c) || (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' ||         \
     IS_SUBDELIM(c))

#define CLASS_OF(c)                                                                                \
    ((IS_TCHAR(c) ? C_TCHAR : 0) | (IS_VALUE(c) ? C_VALUE : 0) | (IS_TARGET(c) ? C_TARGET : 0) |   \
     (IS_HOST(c) ? C_HOST : 0) | (IS_HEX(c) ? C_HEX : 0) | (IS_DIGIT(c) ? C_DIGIT : 0) |           \
     ((c) == ' ' || (c) == '\t' ? C_OWS : 0))
#define LOWER_OF(c) ((c) | ((c) >= 'A' && (c) <= 'Z' ? 0x20 : 0))

/* The tables are computed by the compiler from the predicates above, so the
 * grammar is stated once, readably, and costs one load per byte. */
#define ROW(F, b)                                                                                  \
    F((b) + 0), F((b) + 1), F((b) + 2), F((b) + 3), F((b) + 4), F((b) + 5), F((b) + 6),            \
        F((b) + 7), F((b) + 8), F((b) + 9), F((b) + 10), F((b) + 11), F((b) + 12), F((b) + 13),    \
        F((b) + 14), F((b) + 15)
#define TABLE(F)                                                                                   \
    {                                                                                              \
        ROW(F, 0x00), ROW(F, 0x10), ROW(F, 0x20), ROW(F, 0x30), ROW(F, 0x40), ROW(F, 0x50),        \
            ROW(F, 0x60), ROW(F, 0x70), ROW(F, 0x80), ROW(F, 0x90), ROW(F, 0xa0), ROW(F, 0xb0),    \
            ROW(F, 0xc0), ROW(F, 0xd0), ROW(F, 0xe0), ROW(F, 0xf0)                                 \
    }

static const uint8_t char_class[256] = TABLE(CLASS_OF);
static const uint8_t lower_tab[256] = TABLE(LOWER_OF);

static inline bool is(char c, unsigned mask)
{
    return char_class[(unsigned char)c] & mask;
}

static inline int hex_val(char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static inline bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* First byte at or after p that is not in the class, or end. */
static inline const char *scan_class(const char *p, const char *end, unsigned mask)
{
    while (end - p >= 4) {
        if (!is(p[0], mask))
            return p;
        if (!is(p[1], mask))
            return p + 1;
        if (!is(p[2], mask))
            return p + 2;
        if (!is(p[3], mask))
            return p + 3;
        p += 4;
    }
    while (p < end && is(*p, mask))
        p++;
    return p;
}

/* The runs of a request head (the request-target, field names and field
 * values) are scanned 16 bytes at a time where SSE2 is there: their classes
 * are byte ranges, which compare in bulk, while a table needs a load and a
 * branch per byte. The last (< 16) bytes before end are looked at in the
 * window of the 16 bytes that end there, which starts no earlier than base
 * (the start of the readable bytes): never a read outside [base, end). With
 * fewer than 16 bytes in all, or on other machines, scan_class() decides. */
#if HTTP_SIMD
enum scan_kind { SCAN_VALUE, SCAN_TARGET, SCAN_NAME };

/* The bytes of x that end a run of the kind, as a 16-bit mask. */
static inline unsigned scan_stops(__m128i x, enum scan_kind kind, char stop)
{
    switch (kind) {
    case SCAN_VALUE: {
        /* C_VALUE: HTAB, SP to '~', obs-text; x >= SP unsigned: max(x, SP) == x */
        __m128i ok = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(' ')), x),
                                  _mm_cmpeq_epi8(x, _mm_set1_epi8('\t')));
        return ((unsigned)_mm_movemask_epi8(ok) ^ 0xffffu) |
               (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));
    }
    case SCAN_TARGET: {
        /* C_TARGET: '!' <= x <= '~' (x - '!' <= '~' - '!' unsigned) but '#' */
        __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('!'));
        __m128i in = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8('~' - '!')), d);
        __m128i bad = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('#')),
                                   _mm_cmpeq_epi8(x, _mm_set1_epi8(stop)));
        return ((unsigned)_mm_movemask_epi8(in) ^ 0xffffu) | (unsigned)_mm_movemask_epi8(bad);
    }
    case SCAN_NAME:
        break;
    }
    /* letters, digits and '-': the token characters of the usual field
     * names; any other byte stops the run (the caller goes on with the
     * table when it is a token character all the same) */
    __m128i l = _mm_sub_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('0'));
    __m128i ok = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(l, _mm_set1_epi8(25)), l),
                              _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d));
    ok = _mm_or_si128(ok, _mm_cmpeq_epi8(x, _mm_set1_epi8('-')));
    return (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
}

/* First byte at or after p that scan_stops() marks, or end. The 16 bytes
 * before end must be readable. */
static inline const char *scan16(const char *p, const char *end, enum scan_kind kind, char stop)
{
    while (end - p >= 16) {
        unsigned m = scan_stops(_mm_loadu_si128((const __m128i *)(const void *)p), kind, stop);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
    /* the window [end - 16, end), of which the first 16 - (end - p) bytes
     * lie before p: shifted out */
    unsigned m =
        scan_stops(_mm_loadu_si128((const __m128i *)(const void *)(end - 16)), kind, stop) >>
        (16 - (end - p));
    return m ? p + __builtin_ctz(m) : end;
}
#endif

/* First byte at or after p that is not a field-value byte (C_VALUE: HTAB,
 * SP to '~', obs-text), or end; base <= p is where the readable bytes
 * start. */
static inline const char *scan_value(const char *base, const char *p, const char *end)
{
#if HTTP_SIMD
    if (likely(end - base >= 16))
        return scan16(p, end, SCAN_VALUE, 0);
#endif
    (void)base;
    return scan_class(p, end, C_VALUE);
}

/* First byte at or after p that is not in C_TARGET ('!' to '~' but '#'),
 * or is `stop` (a byte of C_TARGET such as '?', or 0 for none), or end. */
static inline const char *scan_target(const char *base, const char *p, const char *end, char stop)
{
#if HTTP_SIMD
    if (likely(end - base >= 16))
        return scan16(p, end, SCAN_TARGET, stop);
#endif
    (void)base;
    while (p < end && is(*p, C_TARGET) && *p != stop)
        p++;
    return p;
}

/* The run of a field name: the first byte at or after p that is not a
 * token character (C_TCHAR), or end, or an earlier byte that is one but
 * neither a letter, digit nor '-' (the caller goes on with scan_class()
 * when that byte is not the ':' it expects). */
static inline const char *scan_name(const char *base, const char *p, const char *end)
{
#if HTTP_SIMD
    if (likely(end - base >= 16))
        return scan16(p, end, SCAN_NAME, 0);
#endif
    (void)base;
    return scan_class(p, end, C_TCHAR);
}

/* ASCII case-insensitive comparison; either side may be any bytes. */
static inline bool case_eq(const char *a, const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (lower_tab[(unsigned char)a[i]] != lower_tab[(unsigned char)b[i]])
            return false;
    return true;
}

/* A field name (all token characters) equal, ignoring case, to lit: the
 * lower-case letters and '-' of a field name the parser knows. Setting bit
 * 0x20 lower-cases a letter; of the other token characters none becomes a
 * letter or '-' that way ('\r' would give '-', but it is no token byte),
 * so one OR per byte decides, without a table. */
static inline bool name_is(const char *name, const char *lit, size_t len)
{
    /* a word at a time (len is a constant: the loops unroll, lit's words
     * fold into constants); memcpy() is how C reads an unaligned word */
    size_t i = 0;
    for (; len - i >= 8; i += 8) {
        uint64_t a, b;
        memcpy(&a, name + i, 8);
        memcpy(&b, lit + i, 8);
        if ((a | 0x2020202020202020u) != b)
            return false;
    }
    if (len - i >= 4) {
        uint32_t a, b;
        memcpy(&a, name + i, 4);
        memcpy(&b, lit + i, 4);
        if ((a | 0x20202020u) != b)
            return false;
        i += 4;
    }
    for (; i < len; i++)
        if ((name[i] | 0x20) != lit[i])
            return false;
    return true;
}

static inline struct view mkview(const char *p, const char *end)
{
    return (struct view){.p = p, .len = (size_t)(end - p)};
}
