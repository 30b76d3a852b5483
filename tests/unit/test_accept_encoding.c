#include "test.h"

#include <stdint.h>
#include <string.h>

#include "http/accept_encoding.h"

#define ALL                                                                                        \
    (1u << HTTP_CODING_IDENTITY | 1u << HTTP_CODING_GZIP | 1u << HTTP_CODING_DEFLATE |             \
     1u << HTTP_CODING_BR | 1u << HTTP_CODING_ZSTD)

static struct http_accept_encoding ae;

static void parse(const char *s)
{
    http_accept_encoding_parse(s, s ? strlen(s) : 0, &ae);
}

static int choose(const char *s, unsigned avail)
{
    parse(s);
    return http_accept_encoding_choose(&ae, avail, NULL);
}

TEST(absent_and_empty)
{
    parse(NULL);
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 1000);
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 0);
    CHECK_EQ_INT(choose(NULL, ALL), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose("", ALL), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose(" , ,", ALL), HTTP_CODING_IDENTITY);
}

TEST(q_values)
{
    parse("gzip;q=1.0, deflate;q=0.5, br;q=0.001, zstd;q=0, identity; q=0.25");
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 1000);
    CHECK_EQ_INT(ae.q[HTTP_CODING_DEFLATE], 500);
    CHECK_EQ_INT(ae.q[HTTP_CODING_BR], 1);
    CHECK_EQ_INT(ae.q[HTTP_CODING_ZSTD], 0);
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 250);
    CHECK_EQ_INT(http_accept_encoding_choose(&ae, ALL, NULL), HTTP_CODING_GZIP);
    parse("gzip");
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 1); /* unnamed: the last resort */
    CHECK_EQ_INT(http_accept_encoding_choose(&ae, 1u << HTTP_CODING_ZSTD | 1u, NULL),
                 HTTP_CODING_IDENTITY);
    parse("GZIP;Q=0.8,X-Gzip;q=0.1");
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 800); /* the first mention counts */
    parse("gzip;q=0.123, br ; q=1");
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 123);
    CHECK_EQ_INT(ae.q[HTTP_CODING_BR], 1000);
    parse("gzip;level=9;q=0.7");
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 700);
}

TEST(bad_q_skips_element)
{
    const char *bad[] = {"gzip;q=2", "gzip;q=1.001", "gzip;q=0.0001", "gzip;q=.5",
                         "gzip;q=",  "gzip;q=abc",   "gzip;q=1.5",    "gzip;=1",
                         "gzip q=1", "gzip;q=-1",    "gzip;q=0,5x",   "gzip;;q=1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        parse(bad[i]);
        if (ae.q[HTTP_CODING_GZIP])
            fprintf(stderr, "  accepted: '%s'\n", bad[i]);
        CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 0);
    }
    parse("gzip;q=2, br");
    CHECK_EQ_INT(ae.q[HTTP_CODING_BR], 1000);
}

TEST(star)
{
    parse("*");
    CHECK_EQ_INT(ae.q[HTTP_CODING_ZSTD], 1000);
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 1000);
    parse("br;q=0, *;q=0.5");
    CHECK_EQ_INT(ae.q[HTTP_CODING_BR], 0);
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 500);
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 500);
    /* "*;q=0" refuses identity unless it is named */
    parse("*;q=0");
    CHECK_EQ_INT(ae.q[HTTP_CODING_IDENTITY], 0);
    CHECK_EQ_INT(choose("*;q=0", ALL), -1);
    CHECK_EQ_INT(choose("gzip, *;q=0", ALL), HTTP_CODING_GZIP);
    CHECK_EQ_INT(choose("identity, *;q=0", ALL), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose("identity;q=0", 1u), -1);
    CHECK_EQ_INT(choose("identity;q=0", ALL), -1);
    CHECK_EQ_INT(choose("identity;q=0, gzip;q=0.1", ALL), HTTP_CODING_GZIP);
}

TEST(choice)
{
    /* equal q: server preference, or the smaller size when given */
    CHECK_EQ_INT(choose("gzip, deflate, br, zstd", ALL), HTTP_CODING_BR);
    CHECK_EQ_INT(choose("gzip, deflate, zstd", ALL), HTTP_CODING_ZSTD);
    CHECK_EQ_INT(choose("deflate, gzip", ALL), HTTP_CODING_GZIP);
    CHECK_EQ_INT(choose("gzip, deflate, br", 1u | 1u << HTTP_CODING_GZIP), HTTP_CODING_GZIP);
    CHECK_EQ_INT(choose("gzip, deflate, br", 1u), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose("gzip;q=0.5, br;q=0.4", ALL), HTTP_CODING_GZIP);
    /* a named coding beats unnamed identity whatever its q; named, identity
     * competes like the others */
    CHECK_EQ_INT(choose("gzip;q=0.5", ALL), HTTP_CODING_GZIP);
    CHECK_EQ_INT(choose("gzip;q=0.001", 1u), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose("gzip;q=0.5, identity", ALL), HTTP_CODING_IDENTITY);
    CHECK_EQ_INT(choose("gzip;q=0.5, identity;q=0.4", ALL), HTTP_CODING_GZIP);
    parse("gzip, br");
    uint64_t sizes[HTTP_CODING_COUNT] = {100, 40, 39, 50, 30};
    CHECK_EQ_INT(http_accept_encoding_choose(&ae, ALL, sizes), HTTP_CODING_GZIP);
    sizes[HTTP_CODING_BR] = 20;
    CHECK_EQ_INT(http_accept_encoding_choose(&ae, ALL, sizes), HTTP_CODING_BR);
    /* unknown codings are nobody's business */
    CHECK_EQ_INT(choose("compress, exi, pack200-gzip", ALL), HTTP_CODING_IDENTITY);
}

TEST(several_lines)
{
    http_accept_encoding_begin(&ae);
    http_accept_encoding_add(&ae, "gzip;q=0.3", 10);
    http_accept_encoding_add(&ae, "br", 2);
    http_accept_encoding_end(&ae);
    CHECK_EQ_INT(ae.q[HTTP_CODING_GZIP], 300);
    CHECK_EQ_INT(ae.q[HTTP_CODING_BR], 1000);
    CHECK_EQ_INT(ae.q[HTTP_CODING_DEFLATE], 0);
}

TEST(names)
{
    struct view v = http_coding_name(HTTP_CODING_BR);
    CHECK_EQ_MEM(v.p, v.len, "br", 2);
    v = http_coding_name(HTTP_CODING_GZIP);
    CHECK_EQ_MEM(v.p, v.len, "gzip", 4);
    v = http_coding_name(HTTP_CODING_COUNT);
    CHECK_EQ_INT(v.len, 0);
}

int main(void)
{
    RUN(absent_and_empty);
    RUN(q_values);
    RUN(bad_q_skips_element);
    RUN(star);
    RUN(choice);
    RUN(several_lines);
    RUN(names);
    return test_summary();
}
