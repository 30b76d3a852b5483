/* ws_frame.h - WebSocket frames (RFC 6455 §5), pure: no I/O, no
 * allocation. The frame header parser, the rules that tie frames into
 * messages, the incremental UTF-8 validator, the close frame's payload,
 * masking, and the header of a frame the server sends.
 *
 * Errors are the close codes of RFC 6455 §7.4.1, returned negated: -1002
 * (protocol error), -1007 (invalid UTF-8), -1009 (too big). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum ws_opcode {
    WS_OP_CONT = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xa,
};

#define WS_RSV1 0x4 /* the bits of struct ws_frame.rsv: RSV1 = compressed */
#define WS_RSV2 0x2
#define WS_RSV3 0x1

#define WS_CLOSE_NORMAL     1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL   1002
#define WS_CLOSE_NO_STATUS  1005 /* never sent: a close frame without a code */
#define WS_CLOSE_ABNORMAL   1006 /* never sent: the connection dropped */
#define WS_CLOSE_BAD_DATA   1007
#define WS_CLOSE_TOO_BIG    1009
#define WS_CLOSE_INTERNAL   1011
#define WS_CLOSE_TRY_AGAIN  1013 /* sent only: the worker's ws_memory_max is used up */

/* The longest frame header: 2 + 8 (64-bit length) + 4 (mask). */
#define WS_FRAME_HDR_MAX 14
#define WS_CONTROL_MAX   125

struct ws_frame {
    bool fin;
    uint8_t rsv; /* WS_RSV1 | WS_RSV2 | WS_RSV3 */
    uint8_t opcode;
    bool masked;
    uint8_t mask[4];
    uint64_t len;   /* payload length */
    size_t hdr_len; /* bytes of the header */
};

/* Parses the frame header at p[0..n). Returns its length (> 0), 0 when
 * more bytes are needed, or -1002 when it breaks a rule that a header
 * alone shows: an unknown opcode, a control frame that is fragmented or
 * longer than 125 bytes, a payload length whose top bit is set or that is
 * not encoded in the fewest bytes (RFC 6455 §5.2 makes the minimal
 * encoding a MUST; colibri holds clients to it), a frame without a mask
 * when must_mask (a client's frames, §5.1). RSV bits are left to
 * ws_rx_frame(), which knows the extensions. */
ssize_t ws_frame_parse(const uint8_t *p, size_t n, bool must_mask, struct ws_frame *f);

/* How frames make messages (§5.4): the receiving side's state. */
struct ws_rx {
    bool deflate;    /* permessage-deflate was negotiated: RSV1 may be set */
    bool in_message; /* a fragmented data message has begun and not ended */
    bool compressed; /* the message in progress is (its first frame had RSV1) */
    uint8_t opcode;  /* WS_OP_TEXT or WS_OP_BINARY of the message in progress */
};

/* Checks a parsed frame against the message state and advances it: 0, or
 * -1002 for a continuation with no message to continue, a new data frame
 * inside a fragmented message, RSV2/RSV3, RSV1 without permessage-deflate
 * or on anything but a message's first frame (RFC 7692 §6). Control
 * frames may come between fragments and leave the state alone. */
int ws_rx_frame(struct ws_rx *rx, const struct ws_frame *f);

/* Incremental UTF-8 validation (RFC 3629): overlong forms, surrogates and
 * code points above U+10FFFF are invalid. Feed the bytes of a message in
 * any pieces; zero-initialise before the first. */
struct ws_utf8 {
    uint8_t need;   /* continuation bytes still expected */
    uint8_t lo, hi; /* the range of the next continuation byte */
};
/* false when the bytes so far cannot begin valid UTF-8. */
bool ws_utf8_feed(struct ws_utf8 *u, const uint8_t *p, size_t n);
/* true when the bytes fed so far end on a character boundary. */
static inline bool ws_utf8_complete(const struct ws_utf8 *u)
{
    return u->need == 0;
}
/* Both in one: a whole string. */
bool ws_utf8_valid(const uint8_t *p, size_t n);

/* The payload of a close frame (§5.5.1): empty (*code = 1005), or a code
 * and a UTF-8 reason. Returns 0, -1002 for a one-byte payload or a code
 * that is not one of RFC 6455's own (1000-1003, 1007-1011) or the
 * applications' (3000-4999): 1004-1006, 1015 and the unassigned
 * 1012-2999 are refused, as the Autobahn testsuite expects, -1007 for a reason that is not
 * UTF-8. */
int ws_close_parse(const uint8_t *p, size_t n, uint16_t *code);
/* Whether code may appear in a close frame. */
bool ws_close_code_ok(unsigned code);

/* XORs n bytes with the mask, starting at byte offset of the payload
 * (so a payload unmasked in several pieces keeps the rotation). */
void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset);

/* The header of an unmasked frame (a server's), into out
 * (WS_FRAME_HDR_MAX bytes); returns its length. */
size_t ws_frame_head(uint8_t *out, bool fin, uint8_t rsv, uint8_t opcode, uint64_t len);
