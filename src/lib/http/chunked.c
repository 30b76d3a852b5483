/* chunked.c - the chunked-body decoder (chunked.h): a state machine fed one
 * byte at a time, except that payload bytes are moved in runs.
 */
#include "http/chunked.h"

#include <errno.h>
#include <string.h>

#include "http/chars.h"

enum {
    CH_SIZE_FIRST = 0, /* the first HEXDIG of a chunk-size */
    CH_SIZE,           /* more HEXDIG, ';', BWS or CR */
    CH_BWS,            /* whitespace after the size: only ';' may follow */
    CH_EXT,            /* inside chunk-ext, up to CR */
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_LINE, /* start of a trailer field line, or of the final CRLF */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_FINAL_LF,
};

ssize_t http_chunked_decode(struct http_chunked *st, char *buf, size_t len, size_t *payload)
{
    size_t in = 0, out = 0;
    *payload = 0;
    while (in < len && !st->done) {
        char c = buf[in];
        switch (st->state) {
        case CH_DATA: {
            size_t n = len - in;
            if (n > st->remaining)
                n = (size_t)st->remaining;
            /* payload only ever moves towards the front: out <= in */
            if (out != in)
                memmove(buf + out, buf + in, n);
            out += n;
            in += n;
            st->remaining -= n;
            if (st->remaining == 0)
                st->state = CH_DATA_CR;
            continue;
        }
        case CH_SIZE_FIRST:
            if (!is(c, C_HEX))
                return -EBADMSG;
            st->remaining = (uint64_t)hex_val(c);
            st->ext_len = 0;
            st->state = CH_SIZE;
            break;
        case CH_SIZE:
            if (is(c, C_HEX)) {
                /* zero padding is free to send, so it counts as extension */
                if (st->remaining == 0 && ++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                    return -EBADMSG;
                if (st->remaining >> 60)
                    return -EBADMSG; /* a 17th significant digit */
                st->remaining = st->remaining << 4 | (uint64_t)hex_val(c);
                break;
            }
            /* the size is whole: refused now if the body could not hold it,
             * rather than after waiting for its data */
            if (st->limit && st->remaining > st->limit - st->announced)
                return -EFBIG;
            st->announced += st->remaining;
            if (c == '\r') {
                st->state = CH_SIZE_LF;
                break;
            }
            if (c == ';')
                st->state = CH_EXT;
            else if (is_ows(c))
                st->state = CH_BWS;
            else
                return -EBADMSG;
            if (++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -EBADMSG;
            break;
        case CH_BWS:
            if (c == ';')
                st->state = CH_EXT;
            else if (!is_ows(c))
                return -EBADMSG;
            if (++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -EBADMSG;
            break;
        case CH_EXT:
            if (c == '\r') {
                st->state = CH_SIZE_LF;
                break;
            }
            if (!is(c, C_VALUE) || ++st->ext_len > HTTP_CHUNKED_MAX_EXT)
                return -EBADMSG;
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return -EBADMSG;
            st->state = st->remaining ? CH_DATA : CH_TRAILER_LINE;
            break;
        case CH_DATA_CR:
            if (c != '\r')
                return -EBADMSG;
            st->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return -EBADMSG;
            st->state = CH_SIZE_FIRST;
            break;
        case CH_TRAILER_LINE:
            if (c == '\r') {
                st->state = CH_FINAL_LF;
                break;
            }
            /* trailer fields obey the field syntax: no obs-fold, no empty name */
            if (!is(c, C_TCHAR))
                return -EBADMSG;
            st->state = CH_TRAILER_NAME;
            goto count_trailer;
        case CH_TRAILER_NAME:
            if (c == ':')
                st->state = CH_TRAILER_VALUE;
            else if (!is(c, C_TCHAR))
                return -EBADMSG;
            goto count_trailer;
        case CH_TRAILER_VALUE:
            if (c == '\r')
                st->state = CH_TRAILER_LF;
            else if (!is(c, C_VALUE))
                return -EBADMSG;
            goto count_trailer;
        case CH_TRAILER_LF:
            if (c != '\n')
                return -EBADMSG;
            st->state = CH_TRAILER_LINE;
        count_trailer:
            if (++st->trailer_len > HTTP_CHUNKED_MAX_TRAILERS)
                return -EBADMSG;
            break;
        case CH_FINAL_LF:
            if (c != '\n')
                return -EBADMSG;
            st->done = true;
            break;
        default:
            return -EBADMSG; /* a corrupted state: never guess */
        }
        in++;
    }
    *payload = out;
    return (ssize_t)in;
}
