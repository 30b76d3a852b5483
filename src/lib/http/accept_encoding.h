/* accept_encoding.h - Accept-Encoding (RFC 9110 §12.5.3) and the choice of
 * a content coding.
 *
 * Pure functions, any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

enum http_coding {
    HTTP_CODING_IDENTITY,
    HTTP_CODING_GZIP, /* "x-gzip" too */
    HTTP_CODING_DEFLATE,
    HTTP_CODING_BR,
    HTTP_CODING_ZSTD,
    HTTP_CODING_COUNT,
};

/* Acceptability of each coding, as q-values in thousandths (0 = refused). */
struct http_accept_encoding {
    uint16_t q[HTTP_CODING_COUNT];
    uint16_t star;      /* the "*" element, or UINT16_MAX when absent */
    uint8_t explicit_q; /* bit per coding that was named */
};

/* The token of a coding ("gzip", ...; "identity" for identity). */
struct view http_coding_name(enum http_coding c);

/* p == NULL means no Accept-Encoding field: identity only (a client that
 * says nothing is not sent anything it might not decode). Otherwise p is
 * the field value (len bytes): codings not named get the q of "*", or 0,
 * except identity, which when not named gets the q of "*" or else the
 * lowest acceptable q (0.001): it stays acceptable unless refused by
 * "identity;q=0" or "*;q=0", and any named coding with a higher q is
 * preferred to it (a named coding at 0.001 ties with it: see choose). An
 * element with a malformed q-value is skipped; a coding named twice keeps
 * its first q. Several field lines: call http_accept_encoding_add() for
 * each before _end(). */
void http_accept_encoding_parse(const char *p, size_t len, struct http_accept_encoding *ae);
void http_accept_encoding_begin(struct http_accept_encoding *ae);
void http_accept_encoding_add(struct http_accept_encoding *ae, const char *p, size_t len);
void http_accept_encoding_end(struct http_accept_encoding *ae);

/* The coding to answer with among the available ones (bit 1 << coding;
 * identity is available when its bit is set): the highest q wins; on a tie
 * the smaller size in sizes[] (when not NULL), then the earlier coding in
 * the order br, zstd, gzip, deflate, identity. So with sizes, an
 * unnamed identity that is smaller than a coding named at q=0.001 wins:
 * sending fewer bytes is the point of the choice. Returns -1 when nothing
 * available is acceptable (406, or identity anyway). */
int http_accept_encoding_choose(const struct http_accept_encoding *ae, unsigned available,
                                const uint64_t *sizes);
