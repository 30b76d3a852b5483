/* test_cond.c - conditional requests and ranges (http/cond.h): the header
 * scan, entity-tag comparison, the order of RFC 9110 §13.2.2, If-Range. */
#include "test.h"

#include <string.h>

#include "http/cond.h"
#include "http/date.h"

static struct http_conds scan(const char *headers)
{
    struct http_conds c = {0};
    http_conds_scan((struct view){.p = headers, .len = strlen(headers)}, &c);
    return c;
}

static bool etag_match(const char *list, const char *etag, bool weak)
{
    return http_etag_match((struct view){.p = list, .len = strlen(list)}, etag, strlen(etag), weak);
}

#define ETAG "\"v1\""
static const int64_t MTIME = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */

static int pre(const char *headers, enum colibri_method m, int64_t mtime)
{
    struct http_conds c = scan(headers);
    return http_preconditions(&c, m, ETAG, strlen(ETAG), mtime);
}

TEST(scan_finds_first_of_each)
{
    struct http_conds c = scan("Host: a\r\nif-none-match:  \"a\" \r\nIf-None-Match: \"b\"\r\n"
                               "Range: bytes=0-1\r\nAccept-Encoding: gzip\r\n"
                               "Accept-Encoding: br\r\nIf-Modified-Since: x\r\n");
    CHECK(c.has_inm);
    CHECK(c.if_none_match.len == 3 && !memcmp(c.if_none_match.p, "\"a\"", 3));
    CHECK(c.has_range && c.has_ims);
    CHECK(!c.has_if_match && !c.has_ius && !c.has_if_range);
    CHECK_EQ_INT(c.n_ae, 2);
    struct http_conds none = scan("");
    CHECK(!none.has_inm && !none.has_range && none.n_ae == 0);
}

TEST(etag_comparison)
{
    CHECK(etag_match("\"v1\"", ETAG, false));
    CHECK(etag_match("\"x\", \"v1\"", ETAG, false));
    CHECK(etag_match("*", ETAG, false));
    CHECK(!etag_match("W/\"v1\"", ETAG, false)); /* strong never matches weak */
    CHECK(etag_match("W/\"v1\"", ETAG, true));
    CHECK(!etag_match("\"v2\"", ETAG, true));
    CHECK(!etag_match("v1", ETAG, true)); /* unquoted: not an entity-tag */
    CHECK(!etag_match("", ETAG, true));
}

TEST(preconditions_in_order)
{
    CHECK_EQ_INT(pre("", COLIBRI_GET, MTIME), 0);
    CHECK_EQ_INT(pre("If-None-Match: \"v1\"\r\n", COLIBRI_GET, MTIME), 304);
    CHECK_EQ_INT(pre("If-None-Match: \"v1\"\r\n", COLIBRI_HEAD, MTIME), 304);
    CHECK_EQ_INT(pre("If-None-Match: \"v1\"\r\n", COLIBRI_PUT, MTIME), 412);
    CHECK_EQ_INT(pre("If-None-Match: \"v2\"\r\n", COLIBRI_GET, MTIME), 0);
    CHECK_EQ_INT(pre("If-Match: \"v2\"\r\n", COLIBRI_GET, MTIME), 412);
    CHECK_EQ_INT(pre("If-Match: \"v1\"\r\n", COLIBRI_GET, MTIME), 0);
    /* If-Match wins over If-Unmodified-Since, which is then ignored */
    CHECK_EQ_INT(pre("If-Match: \"v1\"\r\nIf-Unmodified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n",
                     COLIBRI_GET, MTIME),
                 0);
    CHECK_EQ_INT(pre("If-Unmodified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n", COLIBRI_GET, MTIME),
                 412);
    CHECK_EQ_INT(pre("If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", COLIBRI_GET, MTIME),
                 0);
    CHECK_EQ_INT(pre("If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", COLIBRI_GET, MTIME),
                 304);
    CHECK_EQ_INT(pre("If-Modified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n", COLIBRI_GET, MTIME),
                 0);
    /* If-None-Match wins over If-Modified-Since */
    CHECK_EQ_INT(
        pre("If-None-Match: \"v2\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
            COLIBRI_GET, MTIME),
        0);
    /* without a modification time, dates are ignored */
    CHECK_EQ_INT(pre("If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", COLIBRI_GET, -1), 0);
    CHECK_EQ_INT(pre("If-Unmodified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n", COLIBRI_GET, -1), 0);
    /* a bad date is no condition */
    CHECK_EQ_INT(pre("If-Modified-Since: yesterday\r\n", COLIBRI_GET, MTIME), 0);
}

TEST(if_range)
{
    struct http_conds c = scan("Range: bytes=0-1\r\n");
    CHECK(http_if_range(&c, ETAG, strlen(ETAG), MTIME));
    c = scan("If-Range: \"v1\"\r\n");
    CHECK(http_if_range(&c, ETAG, strlen(ETAG), MTIME));
    c = scan("If-Range: \"v2\"\r\n");
    CHECK(!http_if_range(&c, ETAG, strlen(ETAG), MTIME));
    c = scan("If-Range: W/\"v1\"\r\n"); /* If-Range compares strongly */
    CHECK(!http_if_range(&c, ETAG, strlen(ETAG), MTIME));
    c = scan("If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
    CHECK(http_if_range(&c, ETAG, strlen(ETAG), MTIME));
    CHECK(!http_if_range(&c, ETAG, strlen(ETAG), MTIME + 1));
    CHECK(!http_if_range(&c, ETAG, strlen(ETAG), -1));
}

/* A date in If-Range is a date whatever its day's name: "Wed, ..." once
 * counted as an entity-tag because it starts with W. One date on each of
 * the seven weekdays, formatted by the server's own formatter. */
TEST(if_range_date_every_weekday)
{
    for (int64_t day = 0; day < 7; day++) {
        int64_t t = MTIME + day * 86400;
        char hdr[64] = "If-Range: ";
        http_date_format(t, hdr + 10);
        memcpy(hdr + 10 + HTTP_DATE_LEN, "\r\n", 3);
        struct http_conds c = scan(hdr);
        CHECK(c.has_if_range && c.if_range.len == HTTP_DATE_LEN);
        CHECK(http_if_range(&c, ETAG, strlen(ETAG), t));
        CHECK(!http_if_range(&c, ETAG, strlen(ETAG), t - 1));
    }
    /* "W/" alone or "W" followed by anything else is no entity-tag */
    struct http_conds c = scan("If-Range: Wed, 09 Nov 1994 08:49:37 GMT\r\n");
    CHECK(http_if_range(&c, ETAG, strlen(ETAG), MTIME + 3 * 86400));
    c = scan("If-Range: W/\r\n");
    CHECK(!http_if_range(&c, ETAG, strlen(ETAG), MTIME));
}

TEST(content_range)
{
    char buf[HTTP_CONTENT_RANGE_MAX];
    size_t n = http_content_range(buf, 0, 99, 1000);
    CHECK(n == strlen("Content-Range: bytes 0-99/1000\r\n") &&
          !memcmp(buf, "Content-Range: bytes 0-99/1000\r\n", n));
    n = http_content_range(buf, -1, 0, 1000);
    CHECK(n == strlen("Content-Range: bytes */1000\r\n") &&
          !memcmp(buf, "Content-Range: bytes */1000\r\n", n));
    n = http_content_range(buf, (int64_t)(UINT64_MAX >> 1), UINT64_MAX - 1, UINT64_MAX);
    CHECK(n <= sizeof(buf));
}

int main(void)
{
    RUN(scan_finds_first_of_each);
    RUN(etag_comparison);
    RUN(preconditions_in_order);
    RUN(if_range);
    RUN(if_range_date_every_weekday);
    RUN(content_range);
    return test_summary();
}
