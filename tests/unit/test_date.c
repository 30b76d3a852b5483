#include "test.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "http/date.h"

static const char *fmt(int64_t t)
{
    static char buf[HTTP_DATE_LEN + 1];
    memset(buf, '#', sizeof(buf));
    http_date_format(t, buf);
    buf[HTTP_DATE_LEN] = '\0';
    return buf;
}

static bool parse(const char *s, int64_t *t)
{
    return http_date_parse(s, strlen(s), t);
}

TEST(format_known)
{
    CHECK_EQ_STR(fmt(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_EQ_STR(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    CHECK_EQ_STR(fmt(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
    CHECK_EQ_STR(fmt(4107542399), "Sun, 28 Feb 2100 23:59:59 GMT");
    CHECK_EQ_STR(fmt(4107542400), "Mon, 01 Mar 2100 00:00:00 GMT");
    CHECK_EQ_STR(fmt(-5), "Thu, 01 Jan 1970 00:00:00 GMT");
    CHECK_EQ_STR(fmt(INT64_MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
}

TEST(format_matches_libc)
{
    /* a spread of instants, against gmtime_r + strftime in the C locale */
    uint64_t x = 1;
    for (int i = 0; i < 4000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t t = (int64_t)(x >> 31); /* up to year ~2242 */
        time_t tt = (time_t)t;
        struct tm tm;
        char want[64];
        gmtime_r(&tt, &tm);
        strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (strcmp(fmt(t), want)) {
            CHECK_EQ_STR(fmt(t), want);
            break;
        }
        int64_t back = -1;
        CHECK(http_date_parse(want, strlen(want), &back) && back == t);
    }
}

TEST(parse_three_forms)
{
    int64_t t = 0;
    CHECK(parse("Sun, 06 Nov 1994 08:49:37 GMT", &t));
    CHECK_EQ_INT(t, 784111777);
    t = 0;
    CHECK(parse("Sunday, 06-Nov-94 08:49:37 GMT", &t));
    CHECK_EQ_INT(t, 784111777);
    t = 0;
    CHECK(parse("Sun Nov  6 08:49:37 1994", &t));
    CHECK_EQ_INT(t, 784111777);
    t = 0;
    CHECK(parse("Wed Nov 16 08:49:37 1994", &t));
    CHECK_EQ_INT(t, 784111777 + 10 * 86400);
    CHECK(parse("  Thu, 01 Jan 1970 00:00:00 GMT \t", &t));
    CHECK_EQ_INT(t, 0);
    CHECK(parse("Friday, 01-Jan-21 00:00:00 GMT", &t));
    CHECK_EQ_INT(t, 1609459200);
    CHECK(parse("Tue, 29 Feb 2000 00:00:00 GMT", &t));
    CHECK_EQ_INT(t, 951782400);
    CHECK(parse("Sun, 06 Nov 1994 08:49:60 GMT", &t)); /* leap second */
    CHECK_EQ_INT(t, 784111799);
}

TEST(parse_rejects)
{
    const char *bad[] = {
        "",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun,06 Nov 1994 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMTx",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "1994-11-06T08:49:37Z",
        "784111777",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t = 0;
        bool ok = parse(bad[i], &t);
        if (ok)
            fprintf(stderr, "  accepted: '%s'\n", bad[i]);
        CHECK(!ok);
    }
    /* bounded by len: a valid date cut short is invalid */
    int64_t t;
    CHECK(!http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", 28, &t));
}

int main(void)
{
    RUN(format_known);
    RUN(format_matches_libc);
    RUN(parse_three_forms);
    RUN(parse_rejects);
    return test_summary();
}
