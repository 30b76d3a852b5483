/* format.h - appending to a render's output: bytes, HTML-escaped text and
 * numbers. Each returns 0 or -ENOMEM. tpl_put() does not keep the buffer
 * NUL-terminated: render() terminates it when the render ends.
 */
#pragma once

#include <stddef.h>
#include <string.h>

#include "base/common.h"
#include "base/strbuf.h"

/* strbuf_append() minus the call and the NUL in the common case: a render
 * reserves its output up front and terminates the buffer when it ends. */
static inline int tpl_put(struct strbuf *out, const char *p, size_t n)
{
    if (!n)
        return 0; /* p may be NULL: an empty view */
    if (unlikely(out->cap - out->len < n))
        return strbuf_append(out, p, n);
    memcpy(out->buf + out->len, p, n);
    out->len += n;
    return 0;
}

/* p[0 .. n) with & < > " ' as &amp; &lt; &gt; &quot; &#39;. */
int tpl_append_escaped(struct strbuf *out, const char *p, size_t n);

/* d as the shortest of printf's %.15g, %.16g and %.17g that reads back as
 * d: 1.21, not 1.2099999999999999. */
int tpl_append_double(struct strbuf *out, double d);
