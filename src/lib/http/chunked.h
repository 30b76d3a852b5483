/* chunked.h - the decoder of chunked request bodies (RFC 9112, 7.1). No
 * I/O, no allocation; thread-safe (the state is the caller's).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Incremental, in-place chunked-body decoder.
 *
 * Feed it the bytes after the head, as they arrive. Each call consumes input
 * from buf and moves the payload bytes it found to the front of buf (they
 * never overlap wrongly: payload never outruns consumption). Chunk extensions
 * are skipped (at most HTTP_CHUNKED_MAX_EXT bytes per chunk), trailer fields are validated
 * and dropped (at most HTTP_CHUNKED_MAX_TRAILERS bytes in all).
 *
 * Returns the number of input bytes consumed (>= 0) and sets *payload to the
 * number of payload bytes now at buf[0..*payload); sets st->done once the
 * last chunk and the trailers have been consumed (bytes after that belong to
 * the next request). Returns -EBADMSG (400) for a bad chunk size, overflow,
 * missing CRLF, or extension/trailer limits exceeded, and -EFBIG (413) as
 * soon as a chunk's size is read whole (before its data) when it would
 * take the body above st->limit. Unconsumed input (a partial size line, say) must be presented
 * again, in front of new bytes.
 * A body starts from a zeroed struct: struct http_chunked st = {0}, with
 * limit set to the most payload bytes the body may have (0: no limit). */
struct http_chunked {
    uint64_t limit;     /* the chunk sizes may add up to this; 0: no limit */
    uint64_t announced; /* the sizes of the chunks read so far, added up (<= limit) */
    uint64_t remaining; /* payload bytes left in the current chunk */
    size_t ext_len, trailer_len;
    uint8_t state;
    bool done;
};
#define HTTP_CHUNKED_MAX_EXT      4096
#define HTTP_CHUNKED_MAX_TRAILERS 8192

ssize_t http_chunked_decode(struct http_chunked *st, char *buf, size_t len, size_t *payload);
