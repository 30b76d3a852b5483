/* range.c - "bytes=0-499, -500, 9500-" */
#include "http/range.h"

#include <stdbool.h>
#include <stdlib.h>

#include "base/common.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Decimal digits at *p; saturates at UINT64_MAX. False if there are none. */
static bool number(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    while (s < end && is_digit(*s)) {
        unsigned d = (unsigned)(*s - '0');
        x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *v = x;
    return true;
}

static int by_first(const void *a, const void *b)
{
    const struct http_range *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Sorts and merges, but only when some ranges overlap or touch. */
static unsigned coalesce(struct http_range *r, unsigned n)
{
    bool overlap = false;
    for (unsigned i = 0; i < n && !overlap; i++)
        for (unsigned j = i + 1; j < n && !overlap; j++)
            overlap = r[i].first <= r[j].last + 1 && r[j].first <= r[i].last + 1;
    if (!overlap)
        return n;
    qsort(r, n, sizeof(*r), by_first);
    unsigned k = 0;
    for (unsigned i = 1; i < n; i++) {
        if (r[i].first <= r[k].last + 1)
            r[k].last = MAX(r[k].last, r[i].last);
        else
            r[++k] = r[i];
    }
    return k + 1;
}

enum http_range_result http_range_parse(const char *p, size_t len, uint64_t size,
                                        struct http_range *out, unsigned max, unsigned *n)
{
    const char *end = p + len;
    unsigned specs = 0, got = 0;

    if (len < 6 || !mem_case_eq(p, "bytes=", 6))
        return HTTP_RANGE_IGNORE;
    p += 6;
    for (;;) {
        while (p < end && (is_ows(*p) || *p == ','))
            p++; /* empty list elements are allowed */
        if (p == end)
            break;
        uint64_t first = 0, last = UINT64_MAX;
        bool suffix = *p == '-';
        if (suffix) {
            p++;
            if (!number(&p, end, &last))
                return HTTP_RANGE_IGNORE;
        } else {
            if (!number(&p, end, &first) || p == end || *p++ != '-')
                return HTTP_RANGE_IGNORE;
            if (p < end && is_digit(*p)) {
                number(&p, end, &last);
                if (last < first)
                    return HTTP_RANGE_IGNORE;
            }
        }
        while (p < end && is_ows(*p))
            p++;
        if (p < end && *p != ',')
            return HTTP_RANGE_IGNORE;
        if (++specs > max)
            return HTTP_RANGE_IGNORE;
        if (suffix) {
            if (last == 0 || size == 0)
                continue;
            first = last >= size ? 0 : size - last;
            last = size - 1;
        } else {
            if (first >= size)
                continue;
            last = MIN(last, size - 1);
        }
        out[got++] = (struct http_range){first, last};
    }
    if (!specs)
        return HTTP_RANGE_IGNORE;
    if (!got)
        return HTTP_RANGE_UNSATISFIABLE;
    *n = coalesce(out, got);
    return HTTP_RANGE_OK;
}
