/* fields.h - what a handler looks up on demand in a request that
 * http_parse_head() (parser.h) accepted: a header field, a query parameter,
 * a cookie, and percent-decoding. Pure functions: no I/O, no allocation;
 * what they find is a view into the caller's buffer. Thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/common.h"

/* Finds the first field named name (case-insensitive) in a block that
 * http_parse_head() accepted; the value has no leading/trailing whitespace. */
bool http_header_find(struct view headers, const char *name, size_t name_len, struct view *value);

/* As http_header_find(), but false also when the field occurs more than
 * once (a field that must be single, such as Sec-WebSocket-Key). */
bool http_header_find_sole(struct view headers, const char *name, size_t name_len,
                           struct view *value);

/* Whether a Content-Type value names the media type type (lower case,
 * type_len bytes): compared case-insensitively after leading whitespace,
 * and followed by its end, ';' or whitespace (its parameters). */
bool http_media_type_is(struct view ctype, const char *type, size_t type_len);

/* Finds the parameter name in a query string ("a=1&b=2"); value is still
 * percent-encoded. A parameter without '=' has an empty value. */
bool http_query_find(struct view query, const char *name, size_t name_len, struct view *value);

/* Finds a cookie in a Cookie header value ("a=1; b=2"); quotes around the
 * value are removed. */
bool http_cookie_find(struct view cookies, const char *name, size_t name_len, struct view *value);

/* Percent-decodes src into dst (dst may equal src: decoding never grows).
 * With plus_is_space, '+' becomes ' ' (query strings). Returns the decoded
 * length, or -1 for a bad escape or an encoded NUL, CR or LF. */
ssize_t http_percent_decode(char *dst, const char *src, size_t len, bool plus_is_space);
