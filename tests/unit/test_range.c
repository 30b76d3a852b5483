#include "test.h"

#include <string.h>

#include "http/range.h"

static struct http_range r[16];
static unsigned n;

static enum http_range_result parse(const char *s, uint64_t size)
{
    n = 0;
    memset(r, 0xee, sizeof(r));
    return http_range_parse(s, strlen(s), size, r, 8, &n);
}

#define CHECK_ONE(s, size, a, b)                                                                   \
    do {                                                                                           \
        CHECK_EQ_INT(parse(s, size), HTTP_RANGE_OK);                                               \
        CHECK_EQ_INT(n, 1);                                                                        \
        CHECK_EQ_INT(r[0].first, a);                                                               \
        CHECK_EQ_INT(r[0].last, b);                                                                \
    } while (0)

TEST(rfc_examples)
{
    /* RFC 9110 §14.1.2, a 10000-byte representation */
    CHECK_ONE("bytes=0-499", 10000, 0, 499);
    CHECK_ONE("bytes=500-999", 10000, 500, 999);
    CHECK_ONE("bytes=-500", 10000, 9500, 9999);
    CHECK_ONE("bytes=9500-", 10000, 9500, 9999);
    CHECK_ONE("bytes=0-0", 10000, 0, 0);
    CHECK_ONE("bytes=-1", 10000, 9999, 9999);
    CHECK_EQ_INT(parse("bytes=0-0,-1", 10000), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(r[0].first, 0);
    CHECK_EQ_INT(r[1].first, 9999);
    /* overlapping: merged and sorted */
    CHECK_EQ_INT(parse("bytes=500-600,601-999", 10000), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].first, 500);
    CHECK_EQ_INT(r[0].last, 999);
    CHECK_EQ_INT(parse("bytes=500-700,601-999", 10000), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].last, 999);
}

TEST(order_kept_when_disjoint)
{
    CHECK_EQ_INT(parse("bytes=50-59, 0-9 ,\t20-29", 100), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(r[0].first, 50);
    CHECK_EQ_INT(r[1].first, 0);
    CHECK_EQ_INT(r[2].first, 20);
    CHECK_EQ_INT(r[2].last, 29);
    /* overlap anywhere: everything sorted and merged */
    CHECK_EQ_INT(parse("bytes=50-59,0-9,5-12", 100), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(r[0].first, 0);
    CHECK_EQ_INT(r[0].last, 12);
    CHECK_EQ_INT(r[1].first, 50);
}

TEST(clamping)
{
    CHECK_ONE("bytes=0-99999", 100, 0, 99);
    CHECK_ONE("bytes=-1000", 100, 0, 99);
    CHECK_ONE("bytes=99-", 100, 99, 99);
    CHECK_ONE("bytes=0-18446744073709551615", 100, 0, 99);
    CHECK_ONE("bytes=0-99999999999999999999999999", 100, 0, 99);
    CHECK_ONE("BYTES=1-2", 100, 1, 2);
    CHECK_ONE("Bytes=,,1-2,", 100, 1, 2);
}

TEST(unsatisfiable)
{
    CHECK_EQ_INT(parse("bytes=100-", 100), HTTP_RANGE_UNSATISFIABLE);
    CHECK_EQ_INT(parse("bytes=100-200", 100), HTTP_RANGE_UNSATISFIABLE);
    CHECK_EQ_INT(parse("bytes=-0", 100), HTTP_RANGE_UNSATISFIABLE);
    CHECK_EQ_INT(parse("bytes=0-", 0), HTTP_RANGE_UNSATISFIABLE);
    CHECK_EQ_INT(parse("bytes=-5", 0), HTTP_RANGE_UNSATISFIABLE);
    CHECK_EQ_INT(parse("bytes=99999999999999999999999-", 100), HTTP_RANGE_UNSATISFIABLE);
    /* one satisfiable spec is enough; the others are dropped */
    CHECK_EQ_INT(parse("bytes=200-300,5-6", 100), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].first, 5);
}

TEST(invalid_is_ignored)
{
    const char *bad[] = {
        "",           "bytes",      "bytes=",     "bytes=,",       "bytes 0-1",
        "bytes=abc",  "bytes=1",    "bytes=5-4",  "bytes=--5",     "bytes=1-2-3",
        "bytes=1 -2", "items=0-1",  "bytes=-",    "bytes=0-1;",    "bytes=0x1-2",
        "bytes=+1-2", "bytes=1-+2", "bytes =0-1", "bytes=0-1,5-4",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum http_range_result res = parse(bad[i], 100);
        if (res != HTTP_RANGE_IGNORE)
            fprintf(stderr, "  not ignored: '%s'\n", bad[i]);
        CHECK_EQ_INT(res, HTTP_RANGE_IGNORE);
    }
}

TEST(too_many_ranges)
{
    CHECK_EQ_INT(parse("bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14", 100), HTTP_RANGE_OK);
    CHECK_EQ_INT(n, 8);
    CHECK_EQ_INT(parse("bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16", 100),
                 HTTP_RANGE_IGNORE);
    /* unsatisfiable ones count too: the work is in the parsing */
    CHECK_EQ_INT(parse("bytes=0-0,200-,200-,200-,200-,200-,200-,200-,200-", 100),
                 HTTP_RANGE_IGNORE);
}

TEST(bounded_reads)
{
    /* the parser stops at len, whatever follows */
    const char s[] = "bytes=0-1999";
    n = 0;
    CHECK_EQ_INT(http_range_parse(s, 9, 10000, r, 8, &n), HTTP_RANGE_OK);
    CHECK_EQ_INT(r[0].last, 1);
    CHECK_EQ_INT(http_range_parse(s, 8, 10000, r, 8, &n), HTTP_RANGE_OK);
    CHECK_EQ_INT(r[0].last, 9999);
}

int main(void)
{
    RUN(rfc_examples);
    RUN(order_kept_when_disjoint);
    RUN(clamping);
    RUN(unsatisfiable);
    RUN(invalid_is_ignored);
    RUN(too_many_ranges);
    RUN(bounded_reads);
    return test_summary();
}
