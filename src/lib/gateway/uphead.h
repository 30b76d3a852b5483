/* uphead.h - the gateway's HTTP/1.1 heads, pure (no I/O, no allocation
 * but the caller's strbuf; fuzzed): an upstream's response head parsed
 * strictly, the request head rebuilt for the upstream (hop-by-hop fields
 * out, X-Forwarded-* and Forwarded in), and the answer's fields filtered
 * for the client. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/common.h"
#include "base/strbuf.h"

/* An upstream's response head. */
struct gw_resp_head {
    int status;             /* 100-599 */
    uint8_t minor;          /* HTTP/1.minor: 0 or 1 */
    int64_t content_length; /* -1: none */
    bool chunked;           /* Transfer-Encoding ends in chunked */
    bool te;                /* some Transfer-Encoding: Content-Length is ignored */
    bool conn_close;        /* Connection: close (or HTTP/1.0 without keep-alive) */
    struct view fields;     /* the field lines, CRLF ends included */
    struct view connection; /* the Connection field's values, joined by ", " ("" none) */
};

/* The head at buf (len bytes so far, at most max): its length (> 0),
 * 0 when incomplete, -EBADMSG when it is not a valid HTTP/1.x response
 * head (status line, field syntax, a bad or conflicting Content-Length,
 * obsolete line folding), -EMSGSIZE beyond max. */
ssize_t gw_parse_response(const char *buf, size_t len, size_t max, struct gw_resp_head *h);

/* Calls fn for each field line of a validated block (name, value without
 * surrounding blanks); stops when fn returns false. */
typedef bool (*gw_field_fn)(struct view name, struct view value, void *arg);
void gw_fields_each(struct view fields, gw_field_fn fn, void *arg);

/* Whether name is hop-by-hop: a field of RFC 9110 7.6.1 (Connection,
 * Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade) or one that
 * the message's Connection field (conn, its values) names. */
bool gw_hop_by_hop(struct view name, struct view conn);

/* What a request going upstream carries besides the client's fields. */
struct gw_req_out {
    struct view method, target; /* target: what goes upstream (rewritten already) */
    struct view fields;         /* the client's field lines (validated) */
    struct view host;           /* the Host to send */
    struct view client_host;    /* the client's Host (X-Forwarded-Host; "" none) */
    const char *client_addr;    /* "192.0.2.1", "2001:db8::1" or "" (unknown) */
    bool secure;                /* X-Forwarded-Proto https */
    int64_t content_length;     /* -1: none */
    bool chunked;               /* the body goes chunked */
    bool upgrade;               /* keep Upgrade and say Connection: upgrade */
};
/* The request head into out: 0 or -ENOMEM. */
int gw_build_request(struct strbuf *out, const struct gw_req_out *r);

/* The answer's field lines for the client (hop-by-hop, Server, Date,
 * Content-Length and Transfer-Encoding out; for a 101 Upgrade kept and
 * Connection: upgrade added), appended to out: 0 or -ENOMEM. */
int gw_answer_fields(struct strbuf *out, const struct gw_resp_head *h);
