/* multipart.h - an incremental multipart/form-data parser (RFC 7578 on
 * RFC 2046's framing). No I/O, no allocation, no reference kept to the
 * caller's bytes between calls; thread-safe (the state is the caller's).
 *
 * Feed it the body as it arrives, in pieces of any size:
 *
 *     struct mp_parser p;
 *     mp_init(&p, boundary, blen, max_parts);
 *     while (have bytes) {
 *         size_t used = mp_feed(&p, buf, len, &ev);
 *         buf += used, len -= used;
 *         switch (ev.type) { ... }
 *     }
 *     at the end of the body: mp_finish(&p) == 0, or the body is malformed
 *
 * Each call consumes some input and reports one event:
 *  - MP_MORE: everything given was consumed, nothing to report;
 *  - MP_PART: a part's headers are complete: p.name, p.filename (NULL when
 *    the part names none), p.content_type ("text/plain" when absent);
 *  - MP_DATA: ev.data/ev.len are the next bytes of the part's content
 *    (pointing into buf, or into the parser: use them before the next call);
 *  - MP_PART_END: the part's content is complete;
 *  - MP_DONE: the close delimiter was seen; what follows is epilogue and is
 *    consumed without a word (MP_DONE again);
 *  - MP_ERROR: the body is malformed (p.error says why); every later call
 *    answers MP_ERROR too.
 * A delimiter may be split across calls at any byte: the parser remembers
 * how much of it matched, and gives those bytes back as data if the match
 * fails. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define MP_BOUNDARY_MAX 70
/* a part's header block, CRLFs included */
#define MP_HEADER_MAX 4096

enum mp_event_type { MP_MORE, MP_PART, MP_DATA, MP_PART_END, MP_DONE, MP_ERROR };

struct mp_event {
    enum mp_event_type type;
    const char *data; /* MP_DATA */
    size_t len;
};

struct mp_parser {
    char delim[4 + MP_BOUNDARY_MAX]; /* "\r\n--" boundary */
    size_t dlen;
    size_t match; /* bytes of delim matched so far */
    uint8_t state;
    bool in_part;
    unsigned parts, max_parts;
    size_t hlen;
    const char *error;
    /* the part being read */
    const char *name, *filename, *content_type;
    char hdr[MP_HEADER_MAX];  /* its raw header block */
    char vals[MP_HEADER_MAX]; /* decoded, NUL-terminated values */
};

/* The boundary parameter of a Content-Type value "multipart/form-data;
 * boundary=..." (a token or a quoted-string; 1 to 70 characters of RFC
 * 2046's bchars, not ending in a space), copied into out. 0, -1 when the
 * type is not multipart/form-data, -2 when the boundary is missing or bad. */
int mp_boundary(struct view ctype, char out[MP_BOUNDARY_MAX + 1], size_t *len);

/* Starts a body; boundary as mp_boundary() gave it, max_parts >= 1. */
void mp_init(struct mp_parser *p, const char *boundary, size_t blen, unsigned max_parts);

size_t mp_feed(struct mp_parser *p, const char *buf, size_t len, struct mp_event *ev);

/* At the end of the body: 0 if the close delimiter came, else -1 (with
 * p->error). */
int mp_finish(struct mp_parser *p);
