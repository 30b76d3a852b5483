/* proxy.h - the PROXY protocol header (HAProxy's, versions 1 and 2) that a
 * load balancer sends before the first byte of the client's stream, so the
 * server learns the client's address.
 *
 * Why in http/ and not rt/: the runtime owns only transport (a socket,
 * buffers, a coroutine) and knows no protocol; the PROXY header is the
 * first thing a protocol reads from the byte stream, read by
 * http_proto.run() before the first request (a "step inside run()", as
 * ARCHITECTURE.md puts it). The parser itself is pure: bytes in, a verdict
 * out, no I/O, no allocation, so it is unit-tested and fuzzed alone.
 *
 * Strict: anything the specification does not allow is PROXY_BAD, as early
 * as the bytes show it. A prefix of a valid header is PROXY_MORE.
 *   v1: "PROXY TCP4 SRC DST SPORT DPORT\r\n" (TCP6 with IPv6 addresses),
 *       or "PROXY UNKNOWN[ anything]\r\n"; single spaces; addresses in
 *       their usual text form; ports decimal 0-65535 without leading
 *       zeros; at most 107 bytes with the CRLF.
 *   v2: the 12-byte signature, version 2 with command LOCAL or PROXY, a
 *       family and transport, a 16-bit length, the addresses, then TLVs
 *       (skipped, but each must fit in the length). PROXY over TCP/IPv4 or
 *       TCP/IPv6 gives the source address; LOCAL (whatever follows it),
 *       and PROXY with an unspecified family or a UNIX stream, keep the
 *       socket's own address, as the specification says. Datagram
 *       transports are malformed for an HTTP server.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest v1 line, CRLF included. */
#define PROXY_V1_MAX 107
/* The fixed part of a v2 header: signature, ver/cmd, fam, length. */
#define PROXY_V2_FIXED 16

enum proxy_result {
    PROXY_BAD = -1, /* not a PROXY header: close the connection */
    PROXY_MORE = 0, /* a valid prefix so far: read more bytes */
    PROXY_DONE = 1, /* a whole header: see struct proxy_hdr */
};

struct proxy_hdr {
    size_t len;  /* bytes the header took, from the start of the buffer */
    int version; /* 1 or 2 */
    /* true: LOCAL, UNKNOWN (or an address family we do not take): the
     * connection keeps the socket's own addresses, src and dst are not set */
    bool local;
    struct sockaddr_storage src, dst; /* AF_INET or AF_INET6, ports set */
};

/* Parses the header at the start of p[0..len). On PROXY_DONE, *out is
 * filled; otherwise it is left in an unspecified state. */
enum proxy_result proxy_parse(const void *p, size_t len, struct proxy_hdr *out);
