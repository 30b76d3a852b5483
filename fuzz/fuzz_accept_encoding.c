/* fuzz_accept_encoding.c - the Accept-Encoding parser and the choice of a
 * coding on arbitrary field values.
 *
 * The input is the field value. What must hold, from accept_encoding.h and
 * RFC 9110 §5.3, §8.4.1, §12.5.3:
 *  - q-values are thousandths: 0..1000, and "*" is that or absent;
 *  - codings not named get the q of "*" or 0; identity, unnamed, gets the
 *    q of "*" or else 1 (0.001);
 *  - one field line is the same as its comma-separated pieces given as
 *    several lines, and a piece's answer is kept by the whole (the first
 *    mention of a coding wins, elements do not interact);
 *  - codings and parameter names are case-insensitive;
 *  - for every set of available codings, with and without sizes: the
 *    choice is -1 exactly when no available coding has q > 0, else an
 *    available coding with q > 0 (never one refused), the highest q, ties
 *    broken by the smaller size and then by the order br, zstd, gzip,
 *    deflate, identity;
 *  - without sizes, an unnamed identity (no "*") loses to any available
 *    named coding with q > 0. With sizes, choose()'s "on a tie the smaller
 *    size" may prefer it when q is 0.001 both ways, so that is not checked;
 *  - no field at all (NULL) means identity and only identity. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/accept_encoding.h"

#define ALL_CODINGS ((1u << HTTP_CODING_COUNT) - 1)
#define MAX_PIECES  16 /* prefixes checked: bounds the quadratic work */

static const int order[] = {HTTP_CODING_BR, HTTP_CODING_ZSTD, HTTP_CODING_GZIP, HTTP_CODING_DEFLATE,
                            HTTP_CODING_IDENTITY};

static int rank(int c)
{
    for (int i = 0; i < (int)(sizeof(order) / sizeof(order[0])); i++)
        if (order[i] == c)
            return i;
    abort();
}

static bool same(const struct http_accept_encoding *a, const struct http_accept_encoding *b)
{
    if (a->star != b->star || a->explicit_q != b->explicit_q)
        return false;
    for (int c = 0; c < HTTP_CODING_COUNT; c++)
        if (a->q[c] != b->q[c])
            return false;
    return true;
}

/* a heap copy of exactly len bytes, so ASan catches any over-read */
static char *copy(const void *p, size_t len)
{
    char *s = malloc(len ? len : 1);
    if (!s)
        abort();
    memcpy(s, p, len);
    return s;
}

static void parse(const char *p, size_t len, struct http_accept_encoding *ae)
{
    char *s = copy(p, len);
    http_accept_encoding_parse(s, len, ae);
    free(s);
}

static void check_values(const struct http_accept_encoding *ae)
{
    if (ae->star != UINT16_MAX && ae->star > 1000)
        abort();
    if (ae->explicit_q & ~ALL_CODINGS)
        abort();
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        if (ae->q[c] > 1000)
            abort();
        if (ae->explicit_q & (1u << c))
            continue;
        uint16_t want = ae->star != UINT16_MAX ? ae->star : c == HTTP_CODING_IDENTITY ? 1 : 0;
        if (ae->q[c] != want)
            abort();
    }
}

static void check_choice(const struct http_accept_encoding *ae, unsigned avail,
                         const uint64_t *sizes)
{
    int best = http_accept_encoding_choose(ae, avail, sizes);
    bool any = false;
    for (int c = 0; c < HTTP_CODING_COUNT; c++)
        any |= (avail & (1u << c)) && ae->q[c];
    if (best < 0) {
        if (best != -1 || any)
            abort();
        return;
    }
    if (best >= HTTP_CODING_COUNT || !(avail & (1u << best)) || !ae->q[best])
        abort();
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        if (c == best || !(avail & (1u << c)))
            continue;
        if (ae->q[c] > ae->q[best])
            abort();
        if (ae->q[c] < ae->q[best])
            continue;
        if (sizes && sizes[c] < sizes[best])
            abort();
        if ((!sizes || sizes[c] == sizes[best]) && rank(c) < rank(best))
            abort();
    }
    bool identity_unnamed =
        !(ae->explicit_q & (1u << HTTP_CODING_IDENTITY)) && ae->star == UINT16_MAX;
    if (!sizes && identity_unnamed && best == HTTP_CODING_IDENTITY)
        for (int c = 0; c < HTTP_CODING_COUNT; c++)
            if (c != HTTP_CODING_IDENTITY && (avail & (1u << c)) && ae->q[c])
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct http_accept_encoding whole, other;

    parse(p, size, &whole);
    check_values(&whole);

    /* the same elements as several field lines, one per comma */
    http_accept_encoding_begin(&other);
    for (size_t i = 0, start = 0; i <= size; i++) {
        if (i < size && p[i] != ',')
            continue;
        char *s = copy(p + start, i - start);
        http_accept_encoding_add(&other, s, i - start);
        free(s);
        start = i + 1;
    }
    http_accept_encoding_end(&other);
    if (!same(&whole, &other))
        abort();

    /* what a prefix of whole elements settles, the rest cannot change */
    int pieces = 0;
    for (size_t i = 0; i < size && pieces < MAX_PIECES; i++) {
        if (p[i] != ',')
            continue;
        pieces++;
        parse(p, i, &other);
        check_values(&other);
        if ((other.explicit_q & whole.explicit_q) != other.explicit_q)
            abort();
        for (int c = 0; c < HTTP_CODING_COUNT; c++)
            if ((other.explicit_q & (1u << c)) && other.q[c] != whole.q[c])
                abort();
        if (other.star != UINT16_MAX && other.star != whole.star)
            abort();
    }

    /* case does not matter */
    char *upper = copy(p, size);
    for (size_t i = 0; i < size; i++)
        if (upper[i] >= 'a' && upper[i] <= 'z')
            upper[i] = (char)(upper[i] - 'a' + 'A');
    parse(upper, size, &other);
    free(upper);
    if (!same(&whole, &other))
        abort();

    /* sizes the input steers, in a small range so that ties happen */
    uint64_t h = 14695981039346656037ull, sizes[HTTP_CODING_COUNT];
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    for (int c = 0; c < HTTP_CODING_COUNT; c++)
        sizes[c] = (h >> (8 * c)) % 4;
    for (unsigned avail = 0; avail <= ALL_CODINGS; avail++) {
        check_choice(&whole, avail, NULL);
        check_choice(&whole, avail, sizes);
    }

    /* no field: identity only */
    http_accept_encoding_parse(NULL, 0, &other);
    check_values(&other);
    for (unsigned avail = 0; avail <= ALL_CODINGS; avail++) {
        int c = http_accept_encoding_choose(&other, avail, sizes);
        if (c != ((avail & (1u << HTTP_CODING_IDENTITY)) ? HTTP_CODING_IDENTITY : -1))
            abort();
    }
    return 0;
}
