/* ws_frame.c - WebSocket frames and messages without I/O (RFC 6455 §5,
 * §7.4; RFC 7692 §6 for RSV1). */
#include "http/ws_frame.h"

#include <string.h>

ssize_t ws_frame_parse(const uint8_t *p, size_t n, bool must_mask, struct ws_frame *f)
{
    if (n < 2)
        return 0;
    f->fin = p[0] & 0x80;
    f->rsv = (p[0] >> 4) & 7;
    f->opcode = p[0] & 0x0f;
    f->masked = p[1] & 0x80;
    uint64_t len = p[1] & 0x7f;
    size_t h = 2;
    switch (f->opcode) {
    case WS_OP_CONT:
    case WS_OP_TEXT:
    case WS_OP_BINARY:
        break;
    case WS_OP_CLOSE:
    case WS_OP_PING:
    case WS_OP_PONG:
        /* control frames: whole, and short enough for a one-byte length */
        if (!f->fin || len > WS_CONTROL_MAX)
            return -WS_CLOSE_PROTOCOL;
        break;
    default:
        return -WS_CLOSE_PROTOCOL; /* reserved opcode */
    }
    if (must_mask && !f->masked)
        return -WS_CLOSE_PROTOCOL;
    if (len == 126) {
        if (n < 4)
            return 0;
        len = (uint64_t)p[2] << 8 | p[3];
        if (len < 126)
            return -WS_CLOSE_PROTOCOL; /* not the minimal encoding */
        h = 4;
    } else if (len == 127) {
        if (n < 10)
            return 0;
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        if (len >> 63 || len <= 0xffff)
            return -WS_CLOSE_PROTOCOL; /* top bit set, or not minimal */
        h = 10;
    }
    if (f->masked) {
        if (n < h + 4)
            return 0;
        memcpy(f->mask, p + h, 4);
        h += 4;
    } else {
        memset(f->mask, 0, 4);
    }
    f->len = len;
    f->hdr_len = h;
    return (ssize_t)h;
}

int ws_rx_frame(struct ws_rx *rx, const struct ws_frame *f)
{
    if (f->rsv & (WS_RSV2 | WS_RSV3))
        return -WS_CLOSE_PROTOCOL;
    if (f->opcode & 0x8) /* control: no RSV1, no effect on the message */
        return f->rsv ? -WS_CLOSE_PROTOCOL : 0;
    if (f->opcode == WS_OP_CONT) {
        if (!rx->in_message || f->rsv) /* RSV1 is for the first frame only */
            return -WS_CLOSE_PROTOCOL;
    } else {
        if (rx->in_message)
            return -WS_CLOSE_PROTOCOL; /* the last message did not end */
        if ((f->rsv & WS_RSV1) && !rx->deflate)
            return -WS_CLOSE_PROTOCOL;
        rx->opcode = f->opcode;
        rx->compressed = f->rsv & WS_RSV1;
    }
    rx->in_message = !f->fin;
    return 0;
}

bool ws_utf8_feed(struct ws_utf8 *u, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (u->need == 0) {
            /* ASCII runs, eight bytes at a time */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i == n)
                break;
            uint8_t c = p[i++];
            if (c < 0x80)
                continue;
            u->lo = 0x80;
            u->hi = 0xbf;
            if (c >= 0xc2 && c <= 0xdf) {
                u->need = 1;
            } else if (c >= 0xe0 && c <= 0xef) {
                u->need = 2;
                if (c == 0xe0)
                    u->lo = 0xa0; /* overlong */
                else if (c == 0xed)
                    u->hi = 0x9f; /* surrogates */
            } else if (c >= 0xf0 && c <= 0xf4) {
                u->need = 3;
                if (c == 0xf0)
                    u->lo = 0x90; /* overlong */
                else if (c == 0xf4)
                    u->hi = 0x8f; /* above U+10FFFF */
            } else {
                return false; /* continuation, overlong lead, or above U+10FFFF */
            }
        } else {
            uint8_t c = p[i++];
            if (c < u->lo || c > u->hi)
                return false;
            u->need--;
            u->lo = 0x80;
            u->hi = 0xbf;
        }
    }
    return true;
}

bool ws_utf8_valid(const uint8_t *p, size_t n)
{
    struct ws_utf8 u = {0};
    return ws_utf8_feed(&u, p, n) && ws_utf8_complete(&u);
}

bool ws_close_code_ok(unsigned code)
{
    if (code >= 1000 && code <= 1003)
        return true;
    if (code >= 1007 && code <= 1011)
        return true;
    return code >= 3000 && code <= 4999;
}

int ws_close_parse(const uint8_t *p, size_t n, uint16_t *code)
{
    if (n == 0) {
        *code = WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (n == 1)
        return -WS_CLOSE_PROTOCOL;
    unsigned c = (unsigned)p[0] << 8 | p[1];
    if (!ws_close_code_ok(c))
        return -WS_CLOSE_PROTOCOL;
    if (!ws_utf8_valid(p + 2, n - 2))
        return -WS_CLOSE_BAD_DATA;
    *code = (uint16_t)c;
    return 0;
}

void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset)
{
    uint8_t m[4];
    for (int i = 0; i < 4; i++)
        m[i] = mask[(offset + (uint64_t)i) & 3];
    size_t i = 0;
    if (n >= 8) {
        uint32_t m32;
        memcpy(&m32, m, 4);
        uint64_t m64 = (uint64_t)m32 << 32 | m32;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            w ^= m64;
            memcpy(p + i, &w, 8);
        }
    }
    for (; i < n; i++)
        p[i] ^= m[i & 3];
}

size_t ws_frame_head(uint8_t *out, bool fin, uint8_t rsv, uint8_t opcode, uint64_t len)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv & 7) << 4 | (opcode & 0x0f));
    if (len < 126) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xffff) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}
