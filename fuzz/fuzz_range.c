/* fuzz_range.c - the Range parser on arbitrary field values.
 *
 * The input is the field value. It is parsed for several representation
 * sizes (fixed edge cases and two derived from the input) and two limits on
 * the number of specs, into out arrays of exactly the limit's size, so that
 * ASan sees any write past them. What must hold, from range.h and RFC 9110
 * §14.1-14.2:
 *  - every returned range lies in [0, size) with first <= last, and there
 *    are 1..max of them;
 *  - returned ranges never overlap or touch (either none did, or they were
 *    merged);
 *  - whether the value is a valid range set does not depend on the size;
 *  - satisfiability only grows with the size: a spec that is satisfiable
 *    for some size stays so for any larger one;
 *  - the limit only matters when it is exceeded: under both limits, a set
 *    that is not ignored gives the same answer. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/range.h"

#define SMALL_MAX 8
#define LARGE_MAX 64
#define N_SIZES   8

struct outcome {
    enum http_range_result res;
    unsigned n;
    struct http_range r[LARGE_MAX];
};

static void run(const char *p, size_t len, uint64_t size, unsigned max, struct outcome *o)
{
    struct http_range *out = malloc(max * sizeof(*out));
    if (!out)
        abort();
    o->n = 0;
    o->res = http_range_parse(p, len, size, out, max, &o->n);
    if (o->res == HTTP_RANGE_OK) {
        if (o->n < 1 || o->n > max)
            abort();
        memcpy(o->r, out, o->n * sizeof(*out));
    } else if (o->res != HTTP_RANGE_IGNORE && o->res != HTTP_RANGE_UNSATISFIABLE) {
        abort();
    }
    free(out);
}

static void check_ranges(const struct outcome *o, uint64_t size)
{
    if (o->res != HTTP_RANGE_OK)
        return;
    for (unsigned i = 0; i < o->n; i++) {
        const struct http_range *a = &o->r[i];
        if (a->first > a->last || a->last >= size)
            abort();
        /* last < size <= UINT64_MAX, so last + 1 cannot wrap */
        for (unsigned j = i + 1; j < o->n; j++) {
            const struct http_range *b = &o->r[j];
            if (a->first <= b->last + 1 && b->first <= a->last + 1)
                abort();
        }
    }
}

static bool same(const struct outcome *a, const struct outcome *b)
{
    if (a->res != b->res)
        return false;
    if (a->res != HTTP_RANGE_OK)
        return true;
    return a->n == b->n && !memcmp(a->r, b->r, a->n * sizeof(a->r[0]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exactly size bytes, no terminator: ASan catches any over-read */
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);

    uint64_t h = 14695981039346656037ull; /* FNV-1a: a size the input steers */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    uint64_t sizes[N_SIZES] = {
        0, 1, 4096, 1ull << 40, UINT64_MAX, size, h % 10000, h >> (h & 63),
    };
    for (int i = 1; i < N_SIZES; i++) /* ascending, for the growth check */
        for (int j = i; j > 0 && sizes[j - 1] > sizes[j]; j--) {
            uint64_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }

    struct outcome small[N_SIZES], large[N_SIZES];
    for (int i = 0; i < N_SIZES; i++) {
        run(p, size, sizes[i], SMALL_MAX, &small[i]);
        run(p, size, sizes[i], LARGE_MAX, &large[i]);
        check_ranges(&small[i], sizes[i]);
        check_ranges(&large[i], sizes[i]);
        if (small[i].res != HTTP_RANGE_IGNORE && !same(&small[i], &large[i]))
            abort();
        if (large[i].res == HTTP_RANGE_IGNORE && small[i].res != HTTP_RANGE_IGNORE)
            abort();
        if (sizes[i] == 0 && large[i].res == HTTP_RANGE_OK)
            abort(); /* nothing lies in [0, 0) */
        if (i == 0)
            continue;
        if ((small[i].res == HTTP_RANGE_IGNORE) != (small[0].res == HTTP_RANGE_IGNORE) ||
            (large[i].res == HTTP_RANGE_IGNORE) != (large[0].res == HTTP_RANGE_IGNORE))
            abort();
        if (large[i - 1].res == HTTP_RANGE_OK && large[i].res != HTTP_RANGE_OK)
            abort();
    }
    free(p);
    return 0;
}
