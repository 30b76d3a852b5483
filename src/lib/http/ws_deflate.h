/* ws_deflate.h - permessage-deflate (RFC 7692) with zlib: negotiating the
 * extension from a client's offers, compressing the messages the server
 * sends, decompressing the ones it receives under a size limit. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "base/strbuf.h"

struct ws_deflate {
    bool server_no_context_takeover; /* reset the compressor after each message */
    bool client_no_context_takeover; /* the client resets: so may we */
    int server_bits;                 /* the compressor's window, 9..15 */
    bool def_ready, inf_ready;       /* the zlib streams, made on first use */
    z_stream def, inf;
    /* makes room for n more bytes in the output of inflating: 0, or a
     * negative result that ws_deflate_inflate_piece() passes on. NULL:
     * strbuf_reserve() (ws.c counts its messages' memory with it) */
    int (*reserve)(struct strbuf *out, size_t n, void *arg);
    void *reserve_arg;
};

/* The longest answer ws_deflate_negotiate() writes. */
#define WS_DEFLATE_RESPONSE_MAX 128

/* Picks the first permessage-deflate offer in a Sec-WebSocket-Extensions
 * value that colibri can honour: parameters server_no_context_takeover,
 * client_no_context_takeover, server_max_window_bits (9-15; 8, which zlib
 * cannot produce raw, declines the offer) and client_max_window_bits
 * (with or without a value); a repeated or unknown parameter, or a bad
 * value, declines that offer. On success, fills d and writes the
 * response's value (NUL-terminated, at most WS_DEFLATE_RESPONSE_MAX
 * bytes) into resp; false when no offer is acceptable. */
bool ws_deflate_negotiate(const char *p, size_t len, struct ws_deflate *d, char *resp);

/* One message's payload, compressed with the trailing 00 00 ff ff removed
 * (RFC 7692 §7.2.1), into out (emptied first). 0 or -ENOMEM. */
int ws_deflate_compress(struct ws_deflate *d, const void *p, size_t len, struct strbuf *out);

/* A piece of a compressed message, as it arrives, decompressed and
 * appended to out, which holds at most max bytes. 0, -1009 when out would
 * be larger, -1007 for data that is not deflate, -ENOMEM, or what
 * d->reserve returned. Pieces of one
 * message in order, then ws_deflate_inflate_end(); after an error the
 * stream is reset (the WebSocket fails anyway). */
int ws_deflate_inflate_piece(struct ws_deflate *d, const void *p, size_t len, size_t max,
                             struct strbuf *out);
/* The message's end: its 00 00 ff ff tail (RFC 7692 §7.2.2), which
 * flushes the last bytes into out. Same results. */
int ws_deflate_inflate_end(struct ws_deflate *d, size_t max, struct strbuf *out);
/* A whole compressed message (without its tail): both of the above. */
int ws_deflate_inflate(struct ws_deflate *d, const void *p, size_t len, size_t max,
                       struct strbuf *out);

void ws_deflate_free(struct ws_deflate *d);
