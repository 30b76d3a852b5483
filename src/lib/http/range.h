/* range.h - the Range request header (RFC 9110 §14.1-14.2), bytes only.
 *
 * Pure function, any thread.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct http_range {
    uint64_t first, last; /* inclusive, both below the representation's size */
};

enum http_range_result {
    HTTP_RANGE_IGNORE,        /* not a valid bytes range set: send the whole thing (200) */
    HTTP_RANGE_OK,            /* *n satisfiable ranges in out (206) */
    HTTP_RANGE_UNSATISFIABLE, /* none satisfiable (416, Content-Range: bytes * /size) */
};

/* Parses the field value p (len bytes) for a representation of size bytes.
 * Suffix ranges ("-500") and open ones ("9500-") are resolved against size
 * and ends past it are clamped; unsatisfiable specs are dropped. A set with
 * more than max specs is ignored (a cheap defence against range floods), and
 * when satisfiable ranges overlap or touch they are merged and sorted, as
 * §14.2 allows; otherwise they stay in the request's order. */
enum http_range_result http_range_parse(const char *p, size_t len, uint64_t size,
                                        struct http_range *out, unsigned max, unsigned *n);
