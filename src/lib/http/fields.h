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

/* One parameter of a ';'-separated list (RFC 9110 §5.6.6), as in a media
 * type, a Content-Disposition, a WebSocket extension offer:
 *     *( OWS ";" OWS [ token "=" ( token / quoted-string ) ] )
 * value is a token, or a quoted-string with its quotes and escapes still
 * in it (http_param_value() unquotes it); empty when the parameter had no
 * value (HTTP_PARAM_BARE). */
struct http_param {
    struct view name;
    struct view value;
    bool has_value;
};
enum {
    HTTP_PARAM_BARE = 1, /* a name without "=value" is a parameter too (extensions) */
    HTTP_PARAM_BWS = 2,  /* whitespace around '=' is allowed (RFC 6455's extension grammar) */
};
/* Reads the next parameter at *pp (before end): 1 with *out set and *pp
 * past it, 0 at the end (what is left is whitespace and empty parameters),
 * -1 when malformed (no ';' before it, no token, a quoted-string that does
 * not end or holds a control character, no value where one is needed). */
int http_param_next(const char **pp, const char *end, unsigned flags, struct http_param *out);
/* A parameter's value unquoted (its quoted-pairs resolved) into out,
 * NUL-terminated: its length, or -1 when that does not fit in cap bytes. */
ssize_t http_param_value(struct view value, char *out, size_t cap);

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
