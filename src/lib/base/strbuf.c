#include "base/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/itoa.h"

static char empty_string[1];

int strbuf_init(struct strbuf *sb, size_t cap)
{
    *sb = (struct strbuf){0};
    return strbuf_reserve(sb, cap ? cap : 16);
}

void strbuf_free(struct strbuf *sb)
{
    free(sb->buf);
    *sb = (struct strbuf){0};
}

int strbuf_grow(struct strbuf *sb, size_t n)
{
    if (sb->buf && sb->cap - sb->len >= n)
        return 0;
    if (n > SIZE_MAX / 2 - sb->len)
        return -ENOMEM;
    size_t want = sb->len + n;
    size_t cap = sb->cap ? sb->cap : 16;
    while (cap < want)
        cap *= 2;
    char *p = realloc(sb->buf, cap + 1);
    if (!p)
        return -ENOMEM;
    if (!sb->buf)
        p[0] = '\0';
    sb->buf = p;
    sb->cap = cap;
    return 0;
}

int strbuf_append_grow(struct strbuf *sb, const void *p, size_t len)
{
    if (!len)
        return 0; /* p may be NULL then (an empty strbuf's buf) */
    int r = strbuf_grow(sb, len);
    if (r < 0)
        return r;
    memcpy(sb->buf + sb->len, p, len);
    sb->len += len;
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_append_str(struct strbuf *sb, const char *s)
{
    return strbuf_append(sb, s, strlen(s));
}

int strbuf_append_char(struct strbuf *sb, char c)
{
    int r = strbuf_reserve(sb, 1);
    if (r < 0)
        return r;
    sb->buf[sb->len++] = c;
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_append_u64(struct strbuf *sb, uint64_t v)
{
    int r = strbuf_reserve(sb, U64_STR_MAX);
    if (r < 0)
        return r;
    sb->len += u64_to_str(v, sb->buf + sb->len);
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_append_i64(struct strbuf *sb, int64_t v)
{
    int r = strbuf_reserve(sb, U64_STR_MAX + 1);
    if (r < 0)
        return r;
    sb->len += i64_to_str(v, sb->buf + sb->len);
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -EINVAL;
    int r = strbuf_reserve(sb, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
    return 0;
}

int strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
    return r;
}

char *strbuf_steal(struct strbuf *sb)
{
    char *p = sb->buf;
    *sb = (struct strbuf){0};
    return p ? p : memdup(empty_string, 1);
}
