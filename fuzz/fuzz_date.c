/* fuzz_date.c - the HTTP-date parser and formatter on arbitrary input.
 *
 * The input is a field value; its FNV hash and, when there are 8 bytes, its
 * first 8 bytes are also taken as times to format. What must hold, from
 * date.h and RFC 9110 §5.6.7:
 *  - parsing reads only the len bytes it is given (an exact-size heap copy:
 *    ASan sees the rest), and blanks around the value change nothing;
 *  - a parsed time formats to an IMF-fixdate that parses back to the same
 *    time (or, out of 1970..9999, to a time in the year it is clamped to);
 *  - a parsed IMF-fixdate formats back to itself, but for the day name,
 *    which the parser does not check (date.h says nothing on it) and a
 *    leap second, which is read as :59;
 *  - the obsolete forms mean what the same fields written as an IMF-fixdate
 *    mean, years 70-99 being 19xx and 00-69 20xx;
 *  - the formatter agrees with gmtime_r + strftime in the C locale over
 *    1970..9999, and clamps beyond. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/date.h"

#define MAX_TIME  253402300799ll  /* 9999-12-31 23:59:59 */
#define YEAR_SECS (365ll * 86400) /* neither 1970 nor 9999 is a leap year */

/* parses exactly len bytes of a heap copy */
static bool parse(const char *p, size_t len, int64_t *t)
{
    char *s = malloc(len ? len : 1);
    if (!s)
        abort();
    memcpy(s, p, len);
    bool ok = http_date_parse(s, len, t);
    free(s);
    return ok;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* format(t) into an exact-size buffer, checked against libc */
static void format(int64_t t, char out[HTTP_DATE_LEN])
{
    char *s = malloc(HTTP_DATE_LEN);
    if (!s)
        abort();
    http_date_format(t, s);
    memcpy(out, s, HTTP_DATE_LEN);
    free(s);

    int64_t c = t < 0 ? 0 : t > MAX_TIME ? MAX_TIME : t;
    time_t tt = (time_t)c;
    struct tm tm;
    char want[64];
    if (!gmtime_r(&tt, &tm) ||
        strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm) != HTTP_DATE_LEN ||
        memcmp(out, want, HTTP_DATE_LEN))
        abort();
}

/* format(t) parses back to t, or into the year t was clamped to */
static void round_trip(int64_t t)
{
    char s[HTTP_DATE_LEN];
    int64_t back;
    format(t, s);
    if (!parse(s, HTTP_DATE_LEN, &back))
        abort();
    if (t < 0          ? back < 0 || back >= YEAR_SECS
        : t > MAX_TIME ? back > MAX_TIME || back <= MAX_TIME - YEAR_SECS
                       : back != t)
        abort();
}

/* the fields of an obsolete form, as an IMF-fixdate, mean the same time */
static void same_as_imf(const char *wday, const char *day, const char *mon, const char *year2,
                        const char *year, const char *clock, int64_t t)
{
    char s[HTTP_DATE_LEN];
    memcpy(s, wday, 3);
    memcpy(s + 3, ", ", 2);
    memcpy(s + 5, day, 2);
    s[5] = s[5] == ' ' ? '0' : s[5];
    s[7] = ' ';
    memcpy(s + 8, mon, 3);
    s[11] = ' ';
    if (year2) {
        memcpy(s + 12, (year2[0] - '0') * 10 + (year2[1] - '0') < 70 ? "20" : "19", 2);
        memcpy(s + 14, year2, 2);
    } else {
        memcpy(s + 12, year, 4);
    }
    s[16] = ' ';
    memcpy(s + 17, clock, 8);
    memcpy(s + 25, " GMT", 4);
    int64_t u;
    if (!parse(s, HTTP_DATE_LEN, &u) || u != t)
        abort();
}

static void check_parsed(const char *p, size_t len, int64_t t)
{
    round_trip(t);

    while (len && is_blank(*p))
        p++, len--;
    while (len && is_blank(p[len - 1]))
        len--;
    /* the lengths tell the forms apart: 24 asctime, 29 IMF, 30+ RFC 850 */
    if (len == HTTP_DATE_LEN) {
        char s[HTTP_DATE_LEN];
        format(t, s);
        bool leap = !memcmp(p + 23, "60", 2);
        if (t >= 0 && !leap && memcmp(s + 3, p + 3, HTTP_DATE_LEN - 3))
            abort();
    } else if (len == 24) {
        /* "Sun Nov  6 08:49:37 1994" */
        same_as_imf(p, p + 8, p + 4, NULL, p + 20, p + 11, t);
    } else if (len >= 30) {
        /* "Sunday, 06-Nov-94 08:49:37 GMT": the day name ends 24 from the end */
        const char *d = p + len - 22;
        same_as_imf(p, d, d + 3, d + 7, NULL, d + 10, t);
    } else {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    int64_t t = 0, u = 0;
    bool ok = parse(p, size, &t);

    /* blanks around change nothing */
    char *wrapped = malloc(size + 3);
    if (!wrapped)
        abort();
    memcpy(wrapped, " \t", 2);
    memcpy(wrapped + 2, p, size);
    wrapped[size + 2] = ' ';
    bool ok2 = parse(wrapped, size + 3, &u);
    free(wrapped);
    if (ok != ok2 || (ok && t != u))
        abort();

    if (ok)
        check_parsed(p, size, t);

    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    round_trip((int64_t)(h % (uint64_t)(MAX_TIME + 1)));
    round_trip((int64_t)h);
    if (size >= 8) {
        uint64_t x;
        memcpy(&x, data, 8);
        round_trip((int64_t)x);
    }
    return 0;
}
