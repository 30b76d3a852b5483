/* cond.h - conditional requests and ranges (RFC 9110 §13, §14), for any
 * handler that knows its representation's validators: an entity-tag, a
 * modification time, a size.
 *
 * http_conds_scan() makes one pass over the validated header block for
 * every field these need, so a file answer reads the headers once. The
 * evaluations are pure. colibri.h has the same for handlers outside the
 * library (colibri_req_preconditions, colibri_req_range). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "base/itoa.h"
#include "colibri.h"
#include "http/date.h"

struct http_conds {
    struct view if_match, if_none_match, if_modified_since, if_unmodified_since;
    struct view range, if_range;
    struct view accept_encoding[4]; /* each Accept-Encoding line, in order */
    unsigned n_ae;
    bool has_if_match, has_inm, has_ims, has_ius, has_range, has_if_range;
};

/* The first of each field counts (Accept-Encoding lines add up). Fills
 * in c: the flags and n_ae say which views are set (the others are not
 * touched), so c need not be zeroed first. */
void http_conds_scan(struct view headers, struct http_conds *c);

/* Whether the entity-tag list matches etag (quoted, as sent): "*" matches
 * anything; weak comparison ignores W/, strong never matches a weak tag. */
bool http_etag_match(struct view list, const char *etag, size_t elen, bool weak);

/* Whether the HTTP-date v is valid and not before t. */
static inline bool http_date_le(struct view v, int64_t t)
{
    int64_t d;
    return http_date_parse(v.p, v.len, &d) && t <= d;
}

/* RFC 9110 §13.2.2 in its order: 0 to answer normally, 412, or 304 (for
 * GET and HEAD; other methods get 412 where GET would get 304). mtime < 0:
 * the representation has no modification time (dates are ignored).
 * Inline: every file answer asks, and for a request with none of these
 * fields the answer is four tests. */
static inline int http_preconditions(const struct http_conds *c, enum colibri_method m,
                                     const char *etag, size_t elen, int64_t mtime)
{
    if (c->has_if_match) {
        if (!etag || !http_etag_match(c->if_match, etag, elen, false))
            return 412;
    } else if (c->has_ius && mtime >= 0 && !http_date_le(c->if_unmodified_since, mtime)) {
        return 412;
    }
    bool not_modified = c->has_inm
                            ? etag && http_etag_match(c->if_none_match, etag, elen, true)
                            : c->has_ims && mtime >= 0 && http_date_le(c->if_modified_since, mtime);
    if (not_modified)
        return m == COLIBRI_GET || m == COLIBRI_HEAD ? 304 : 412;
    return 0;
}

/* Whether a Range applies under If-Range (true without If-Range). */
bool http_if_range(const struct http_conds *c, const char *etag, size_t elen, int64_t mtime);

/* "Content-Range: bytes a-b/N\r\n" (first < 0: "bytes * /N") into buf;
 * returns its length. */
#define HTTP_CONTENT_RANGE_MAX (21 + 3 * U64_STR_MAX + 4)
size_t http_content_range(char *buf, int64_t first, uint64_t last, uint64_t size);
