/* fcgi.h - the FastCGI record protocol (version 1), pure: records made
 * and read, name-value pairs, and the CGI head of a responder's output
 * (Status, Location and the fields). No I/O; fuzzed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/common.h"
#include "base/strbuf.h"

enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
};
#define FCGI_HEADER_LEN  8
#define FCGI_RECORD_MAX  (FCGI_HEADER_LEN + 65535 + 255)
#define FCGI_CONTENT_MAX 65528 /* what we put in one record (a multiple of 8) */

struct fcgi_rec {
    uint8_t type;
    uint16_t id;
    uint16_t len; /* content bytes */
    uint8_t pad;
};

/* The 8-byte header at p: 0, or -EBADMSG (not version 1). */
int fcgi_parse_header(const unsigned char *p, struct fcgi_rec *r);
/* The header of a record of len content bytes (and pad) into h. */
void fcgi_header(unsigned char *h, enum fcgi_type type, uint16_t id, uint16_t len, uint8_t pad);
/* BEGIN_REQUEST (role responder, FCGI_KEEP_CONN) for request id, into out. */
int fcgi_begin(struct strbuf *out, uint16_t id);
/* One name-value pair, in the encoding of PARAMS content, appended to b. */
int fcgi_pair(struct strbuf *b, const char *name, size_t nl, const char *value, size_t vl);
/* Content bytes as records of type (as many as it takes, none for len
 * 0), then, with end, the empty record that ends the stream; into out. */
int fcgi_stream(struct strbuf *out, enum fcgi_type type, uint16_t id, const char *p, size_t len,
                bool end);

/* PARAMS content (pairs) as records that end between pairs (PHP-FPM reads
 * each record's pairs on their own), a pair above a record's room split
 * across records; then the empty record. Into out. */
int fcgi_params(struct strbuf *out, uint16_t id, const char *p, size_t len);

/* A responder's CGI head (RFC 3875 6.2), once whole. */
struct cgi_head {
    int status;             /* Status, else 302 with a Location, else 200 */
    int64_t content_length; /* -1: none */
    struct view fields;     /* the field lines (CRLF or LF ends) */
};
/* The head at buf: its length (> 0), 0 when incomplete, -EBADMSG for a bad
 * line or Status, -EMSGSIZE beyond max. */
ssize_t cgi_parse_head(const char *buf, size_t len, size_t max, struct cgi_head *h);
/* The head's fields for the client (Status, hop-by-hop, Content-Length,
 * Server and Date out; every line ending CRLF), appended to out. */
int cgi_answer_fields(struct strbuf *out, const struct cgi_head *h);
