/* date.c - civil-date arithmetic after H. Hinnant's days_from_civil. */
#include "http/date.h"

#include <string.h>

#include "base/common.h"

static const char wdays[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const long_wdays[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};

#define MIN_TIME 0ll            /* 1970-01-01 00:00:00 */
#define MAX_TIME 253402300799ll /* 9999-12-31 23:59:59 */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static void two(char *out, unsigned v)
{
    out[0] = (char)('0' + v / 10);
    out[1] = (char)('0' + v % 10);
}

void http_date_format(int64_t t, char *out)
{
    t = MAX(MIN_TIME, MIN(MAX_TIME, t));
    int64_t days = t / 86400, secs = t % 86400, y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    memcpy(out, wdays[days % 7], 3);
    memcpy(out + 3, ", ", 2);
    two(out + 5, d);
    out[7] = ' ';
    memcpy(out + 8, months[m - 1], 3);
    out[11] = ' ';
    two(out + 12, (unsigned)(y / 100));
    two(out + 14, (unsigned)(y % 100));
    out[16] = ' ';
    two(out + 17, (unsigned)(secs / 3600));
    out[19] = ':';
    two(out + 20, (unsigned)(secs / 60 % 60));
    out[22] = ':';
    two(out + 23, (unsigned)(secs % 60));
    memcpy(out + 25, " GMT", 4);
}

/* --- parsing ------------------------------------------------------------- */

struct cursor {
    const char *p, *end;
};

static bool lit(struct cursor *c, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n))
        return false;
    c->p += n;
    return true;
}

/* exactly n digits */
static bool digits(struct cursor *c, unsigned n, unsigned *v)
{
    if ((size_t)(c->end - c->p) < n)
        return false;
    unsigned x = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)c->p[i];
        if (ch < '0' || ch > '9')
            return false;
        x = x * 10 + (ch - '0');
    }
    c->p += n;
    *v = x;
    return true;
}

static bool month(struct cursor *c, unsigned *m)
{
    if (c->end - c->p < 3)
        return false;
    for (unsigned i = 0; i < 12; i++) {
        if (!memcmp(c->p, months[i], 3)) {
            *m = i + 1;
            c->p += 3;
            return true;
        }
    }
    return false;
}

static bool short_wday(struct cursor *c)
{
    for (unsigned i = 0; i < 7; i++)
        if (lit(c, wdays[i]))
            return true;
    return false;
}

/* hh:mm:ss */
static bool clock_time(struct cursor *c, unsigned *h, unsigned *mi, unsigned *s)
{
    return digits(c, 2, h) && lit(c, ":") && digits(c, 2, mi) && lit(c, ":") && digits(c, 2, s);
}

static bool assemble(int64_t y, unsigned m, unsigned d, unsigned h, unsigned mi, unsigned s,
                     int64_t *t)
{
    static const unsigned char mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] || (m == 2 && d == 29 && !leap))
        return false;
    if (h > 23 || mi > 59 || s > 60)
        return false;
    if (s == 60) /* a leap second: the last moment of the minute will do */
        s = 59;
    *t = days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + s;
    return true;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
static bool imf_fixdate(struct cursor c, int64_t *t)
{
    unsigned d, m, y, h, mi, s;
    return short_wday(&c) && lit(&c, ", ") && digits(&c, 2, &d) && lit(&c, " ") && month(&c, &m) &&
           lit(&c, " ") && digits(&c, 4, &y) && lit(&c, " ") && clock_time(&c, &h, &mi, &s) &&
           lit(&c, " GMT") && c.p == c.end && assemble(y, m, d, h, mi, s, t);
}

/* "Sunday, 06-Nov-94 08:49:37 GMT" */
static bool rfc850(struct cursor c, int64_t *t)
{
    unsigned d, m, y, h, mi, s;
    bool day = false;
    for (unsigned i = 0; i < 7 && !day; i++)
        day = lit(&c, long_wdays[i]);
    if (!day || !lit(&c, ", ") || !digits(&c, 2, &d) || !lit(&c, "-") || !month(&c, &m) ||
        !lit(&c, "-") || !digits(&c, 2, &y) || !lit(&c, " ") || !clock_time(&c, &h, &mi, &s) ||
        !lit(&c, " GMT") || c.p != c.end)
        return false;
    return assemble(y < 70 ? 2000 + y : 1900 + y, m, d, h, mi, s, t);
}

/* "Sun Nov  6 08:49:37 1994" */
static bool asctime_date(struct cursor c, int64_t *t)
{
    unsigned d, m, y, h, mi, s;
    if (!short_wday(&c) || !lit(&c, " ") || !month(&c, &m) || !lit(&c, " "))
        return false;
    if (c.p < c.end && *c.p == ' ') {
        c.p++;
        if (!digits(&c, 1, &d))
            return false;
    } else if (!digits(&c, 2, &d)) {
        return false;
    }
    return lit(&c, " ") && clock_time(&c, &h, &mi, &s) && lit(&c, " ") && digits(&c, 4, &y) &&
           c.p == c.end && assemble(y, m, d, h, mi, s, t);
}

bool http_date_parse(const char *p, size_t len, int64_t *t)
{
    struct cursor c = {p, p + len};
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
        c.end--;
    return imf_fixdate(c, t) || rfc850(c, t) || asctime_date(c, t);
}
