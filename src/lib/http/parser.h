/* parser.h - the HTTP/1.1 request parser (RFC 9112), a pure function.
 *
 * No I/O, no allocation, no copies: everything it returns is a view into the
 * caller's buffer, valid as long as the buffer is. Thread-safe (no state).
 *
 * http_parse_head() validates the whole request head in one pass (request
 * line and every header field, strictly) but extracts only the fields the
 * server itself needs for framing and routing. Any other header is found on
 * demand with http_header_find() (fields.h), which scans the
 * already-validated block. A chunked body is decoded by http_chunked_decode()
 * (chunked.h).
 *
 * Strictness: anything ambiguous is an error, never a guess (see the table
 * in tests/unit/test_parser.c). Return values:
 *   > 0   the head is complete; that many bytes (leading empty lines, request
 *         line, fields and the final CRLF) belong to it;
 *   0     incomplete: read more and call again with the whole buffer;
 *   < 0   -errno, to be answered before closing with the status that
 *         http_status_of() (status.h) gives it: -EBADMSG malformed (400),
 *         -ENAMETOOLONG target too long (414), -EMSGSIZE head too large
 *         (431), -ENOSYS unknown method or transfer coding (501),
 *         -EPROTONOSUPPORT HTTP version (505), -EOPNOTSUPP an expectation
 *         other than 100-continue (417).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/common.h"
#include "colibri.h"

/* Methods are colibri's (COLIBRI_METHODS in colibri.h): the parser
 * recognises exactly that list. */

enum http_head_flags {
    HTTP_F_CHUNKED = 1u << 0,         /* Transfer-Encoding: chunked */
    HTTP_F_CONN_CLOSE = 1u << 1,      /* Connection: close */
    HTTP_F_CONN_KEEP_ALIVE = 1u << 2, /* Connection: keep-alive */
    HTTP_F_EXPECT_CONTINUE = 1u << 3, /* Expect: 100-continue */
    HTTP_F_ASTERISK = 1u << 4,        /* request-target "*" (OPTIONS only) */
    HTTP_F_ABSOLUTE = 1u << 5,        /* absolute-form target */
    HTTP_F_HAS_QUERY = 1u << 6,       /* the target had a '?' (query may be empty) */
    HTTP_F_CONN_UPGRADE = 1u << 7,    /* Connection: upgrade (in any Connection field) */
    /* a field some file answer reads (If-*, Range, Accept-Encoding) may be
     * there: without it, serve_files skips its pass over the fields */
    HTTP_F_FILE_FIELDS = 1u << 8,
    /* not the parser's: the head of an HTTP/2 stream (http2/), built from
     * its fields as if parsed (version_minor 1) */
    HTTP_F_H2 = 1u << 9,
    /* an HTTP/2 extended CONNECT for a WebSocket (RFC 8441): routed as a
     * GET (method COLIBRI_GET, method_str "CONNECT"), for
     * colibri_ws_upgrade() to take */
    HTTP_F_WS_CONNECT = 1u << 10,
};

struct http_limits {
    size_t max_head;   /* whole head incl. request line; default 8192 */
    size_t max_target; /* request-target; default 8000 */
};
#define HTTP_LIMITS_DEFAULT ((struct http_limits){.max_head = 8192, .max_target = 8000})

struct http_head {
    struct view method_str;
    struct view target;     /* the request-target exactly as sent */
    struct view path;       /* path part, still percent-encoded ("*" for asterisk-form) */
    struct view query;      /* after '?', without it; empty if none */
    struct view host;       /* Host field value, or the authority of an absolute-form target */
    struct view headers;    /* the raw field lines: from the first one up to and including
                               the CRLF of the last (empty if there are none) */
    int64_t content_length; /* -1 when absent */
    enum colibri_method method;
    uint8_t version_minor; /* 0 or 1 (1.x with x > 1 is treated as 1.1) */
    uint16_t flags;        /* enum http_head_flags */
};

ssize_t http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
                        struct http_head *head);
