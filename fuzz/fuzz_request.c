/* fuzz_request.c - libFuzzer target for the request parser.
 *
 * Beyond "no crash", it checks the promises of parser.h and chunked.h that
 * a fuzzer can check: verdicts never change as bytes arrive, views stay
 * inside the head, and the chunked decoder gives the same result whole or a
 * byte at a time.
 * A broken promise is an abort(), so the fuzzer keeps the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/chunked.h"
#include "http/fields.h"
#include "http/parser.h"

static bool valid_verdict(ssize_t r, size_t len)
{
    return (r > 0 && (size_t)r <= len) || r == 0 || r == -EBADMSG || r == -ENAMETOOLONG ||
           r == -EMSGSIZE || r == -ENOSYS || r == -EPROTONOSUPPORT || r == -EOPNOTSUPP;
}

static ssize_t parse_copy(const char *data, size_t len, const struct http_limits *lim)
{
    /* an exact-size copy, so reading past len is an ASan report */
    char *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    struct http_head h;
    ssize_t r = http_parse_head(buf, len, lim, &h);
    free(buf);
    return r;
}

static void check_prefix(const char *data, size_t k, ssize_t whole, const struct http_limits *lim)
{
    ssize_t r = parse_copy(data, k, lim);
    if (whole > 0)
        whole = k >= (size_t)whole ? whole : 0;
    if (r != 0 && r != whole)
        abort();
}

static void check_inside(struct view v, const char *lo, const char *hi)
{
    if (v.len && (v.p < lo || v.p + v.len > hi))
        abort();
}

static void exercise_percent(struct view v, bool plus)
{
    char *dst = malloc(v.len ? v.len : 1);
    ssize_t n = http_percent_decode(dst, v.p, v.len, plus);
    if (n > (ssize_t)v.len || n < -1)
        abort();
    /* in place must agree with out of place */
    char *inplace = malloc(v.len ? v.len : 1);
    memcpy(inplace, v.p, v.len);
    ssize_t m = http_percent_decode(inplace, inplace, v.len, plus);
    if (m != n || (n > 0 && memcmp(dst, inplace, (size_t)n) != 0))
        abort();
    free(inplace);
    free(dst);
}

struct dechunked {
    ssize_t rc; /* consumed in all, or the error */
    bool done;
    char *out;
    size_t out_len;
};

static struct dechunked dechunk_whole(const char *in, size_t len)
{
    struct dechunked d = {.out = malloc(len ? len : 1)};
    memcpy(d.out, in, len);
    struct http_chunked st = {0};
    size_t payload = 0;
    d.rc = http_chunked_decode(&st, d.out, len, &payload);
    if (d.rc >= 0) {
        if ((size_t)d.rc > len || payload > (size_t)d.rc || (!st.done && (size_t)d.rc != len))
            abort();
        /* what follows the body is left untouched */
        if (memcmp(d.out + d.rc, in + d.rc, len - (size_t)d.rc) != 0)
            abort();
    }
    d.done = st.done;
    d.out_len = payload;
    return d;
}

/* One byte at a time, keeping unconsumed input in front of the next byte. */
static struct dechunked dechunk_bytewise(const char *in, size_t len)
{
    struct dechunked d = {.out = malloc(len ? len : 1)};
    struct http_chunked st = {0};
    char *pend = malloc(len ? len : 1);
    size_t plen = 0, consumed = 0;
    for (size_t i = 0; i < len && !st.done; i++) {
        pend[plen++] = in[i];
        size_t payload = 0;
        ssize_t r = http_chunked_decode(&st, pend, plen, &payload);
        if (r < 0) {
            d.rc = r;
            goto out;
        }
        if ((size_t)r > plen || payload > (size_t)r)
            abort();
        memcpy(d.out + d.out_len, pend, payload);
        d.out_len += payload;
        consumed += (size_t)r;
        memmove(pend, pend + r, plen - (size_t)r);
        plen -= (size_t)r;
    }
    d.rc = (ssize_t)consumed;
out:
    d.done = st.done;
    free(pend);
    return d;
}

static void exercise_chunked(const char *in, size_t len)
{
    struct dechunked a = dechunk_whole(in, len);
    struct dechunked b = dechunk_bytewise(in, len);
    if ((a.rc < 0) != (b.rc < 0))
        abort();
    if (a.rc >= 0 && (a.rc != b.rc || a.done != b.done || a.out_len != b.out_len ||
                      memcmp(a.out, b.out, a.out_len) != 0))
        abort();
    free(a.out);
    free(b.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);

    const struct http_limits def = HTTP_LIMITS_DEFAULT;
    const struct http_limits tight = {.max_head = 96, .max_target = 24};
    struct http_head h;
    ssize_t r = http_parse_head(buf, size, &def, &h);
    if (!valid_verdict(r, size))
        abort();
    ssize_t rt = parse_copy(in, size, &tight);
    if (!valid_verdict(rt, size))
        abort();
    if (size > 0) {
        check_prefix(in, size - 1, r, &def);
        check_prefix(in, size / 2, r, &def);
        check_prefix(in, size / 2, rt, &tight);
    }

    if (r > 0) {
        const char *lo = buf, *hi = buf + r;
        check_inside(h.method_str, lo, hi);
        check_inside(h.target, lo, hi);
        check_inside(h.path, lo, hi);
        check_inside(h.query, lo, hi);
        check_inside(h.host, lo, hi);
        check_inside(h.headers, lo, hi);
        if (h.path.len == 0 || h.method >= COLIBRI_METHOD_COUNT || h.version_minor > 1)
            abort();
        if (rt > 0 && rt != r)
            abort();

        static const char *names[] = {
            "host", "Content-Length", "cookie", "X-Forwarded-For", "user-agent", "a"};
        struct view v, cookie = {.p = NULL, .len = 0};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (http_header_find(h.headers, names[i], strlen(names[i]), &v)) {
                check_inside(v, h.headers.p, h.headers.p + h.headers.len);
                if (i == 2)
                    cookie = v;
            }
        }
        if (http_query_find(h.query, "q", 1, &v))
            check_inside(v, h.query.p, h.query.p + h.query.len);
        if (http_query_find(h.query, "", 0, &v))
            check_inside(v, h.query.p, h.query.p + h.query.len);
        if (http_cookie_find(cookie, "sid", 3, &v))
            check_inside(v, cookie.p, cookie.p + cookie.len);
        exercise_percent(h.path, false);
        exercise_percent(h.query, true);
        exercise_chunked(in + r, size - (size_t)r);
    } else {
        /* the decoder is worth fuzzing on its own */
        exercise_chunked(in, size);
    }
    free(buf);
    return 0;
}
