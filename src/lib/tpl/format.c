/* format.c - HTML escaping and decimal numbers for the renderer (format.h). */
#include "tpl/format.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/itoa.h"

static const struct view html_entity[256] = {
    ['&'] = VIEW_LIT("&amp;"),  ['<'] = VIEW_LIT("&lt;"),   ['>'] = VIEW_LIT("&gt;"),
    ['"'] = VIEW_LIT("&quot;"), ['\''] = VIEW_LIT("&#39;"),
};

int tpl_append_escaped(struct strbuf *out, const char *p, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        struct view e = html_entity[(unsigned char)p[i]];
        if (likely(!e.len))
            continue;
        if (tpl_put(out, p + run, i - run) || tpl_put(out, e.p, e.len))
            return -ENOMEM;
        run = i + 1;
    }
    return tpl_put(out, p + run, n - run);
}

/* The shortest of printf's %.15g, %.16g, %.17g that reads back as d: 1.21,
 * not 1.2099999999999999. Most numbers in pages (prices, ratios) are
 * n / 10^k with few digits: that is checked exactly (dividing two exact
 * doubles rounds correctly, as reading the decimal back does) and printed
 * with integer arithmetic. Up to 15 digits at most one decimal of each
 * length reads back as d, so this is what %.15g prints; the rest go to
 * printf. */
int tpl_append_double(struct strbuf *out, double d)
{
    static const double pow10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    bool neg = signbit(d);
    double a = neg ? -d : d;
    char buf[40];
    if (a == 0 || (a >= 1e-4 && a < 1e15)) {
        for (size_t k = 0; k < N_ELEMENTS(pow10) && a * pow10[k] < 1e15; k++) {
            uint64_t n = (uint64_t)(a * pow10[k] + 0.5);
            if ((double)n / pow10[k] != a)
                continue;
            char digits[U64_STR_MAX];
            size_t nd = u64_to_str(n, digits), at = 0;
            if (neg)
                buf[at++] = '-';
            if (nd <= k) { /* 0.0001 */
                memcpy(buf + at, "0.", 2);
                memset(buf + at + 2, '0', k - nd);
                at += 2 + k - nd;
            } else {
                memcpy(buf + at, digits, nd - k);
                at += nd - k;
                if (k)
                    buf[at++] = '.';
            }
            memcpy(buf + at, digits + nd - MIN(nd, k), MIN(nd, k));
            at += MIN(nd, k);
            return tpl_put(out, buf, at);
        }
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return strbuf_append_str(out, buf);
}
