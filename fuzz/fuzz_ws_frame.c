/* fuzz_ws_frame.c - WebSocket frames on arbitrary bytes (http/ws_frame.h).
 *
 * The input is a stream of frames, read as the server reads a client's:
 * headers parsed (with and without the mask requirement), checked against
 * the message rules, payloads unmasked in two pieces and, for text, fed to
 * the UTF-8 validator across frames; close payloads parsed. What must hold:
 *  - a header is parsed from at most the bytes given, and every prefix of
 *    it asks for more (0), never for a different answer;
 *  - a header that parses is rebuilt by ws_frame_head() (unmasked) to a
 *    header that parses to the same fields;
 *  - unmasking in two pieces equals unmasking at once, and twice is none;
 *  - UTF-8 fed in pieces agrees with the whole-string validator;
 *  - control frames are never longer than 125 bytes or fragmented. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws_frame.h"

static void check_header(const uint8_t *p, size_t n, bool must_mask, struct ws_frame *f,
                         ssize_t *out)
{
    uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees over-reads */
    if (!copy)
        abort();
    memcpy(copy, p, n);
    ssize_t r = ws_frame_parse(copy, n, must_mask, f);
    if (r > (ssize_t)n || (r > 0 && (size_t)r != f->hdr_len))
        abort();
    if (r > 0) {
        for (size_t k = 0; k < (size_t)r; k++) {
            struct ws_frame g;
            if (ws_frame_parse(copy, k, must_mask, &g) != 0)
                abort();
        }
        if ((f->opcode & 8) && (f->len > WS_CONTROL_MAX || !f->fin))
            abort();
        uint8_t h[WS_FRAME_HDR_MAX];
        size_t hl = ws_frame_head(h, f->fin, f->rsv, f->opcode, f->len);
        struct ws_frame g;
        if (ws_frame_parse(h, hl, false, &g) != (ssize_t)hl || g.len != f->len || g.fin != f->fin ||
            g.rsv != f->rsv || g.opcode != f->opcode || g.masked)
            abort();
    }
    free(copy);
    *out = r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ws_rx rx = {.deflate = size && (data[0] & 1)};
    struct ws_utf8 utf8 = {0};
    size_t pos = size ? 1 : 0;
    uint8_t *msg = NULL;
    size_t msg_len = 0;
    while (pos < size) {
        struct ws_frame f, g;
        ssize_t r, r2;
        check_header(data + pos, size - pos, false, &g, &r2);
        check_header(data + pos, size - pos, true, &f, &r);
        if (r2 < 0 && r >= 0)
            abort(); /* the mask rule only adds failures */
        if (r <= 0)
            break;
        pos += (size_t)r;
        if (ws_rx_frame(&rx, &f) < 0)
            break;
        size_t n = (size_t)(f.len < size - pos ? f.len : size - pos);
        uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
        if (!a || !b)
            abort();
        memcpy(a, data + pos, n);
        memcpy(b, data + pos, n);
        size_t cut = n ? data[pos] % (n + 1) : 0;
        ws_unmask(a, n, f.mask, 0);
        ws_unmask(b, cut, f.mask, 0);
        ws_unmask(b + cut, n - cut, f.mask, cut);
        if (memcmp(a, b, n))
            abort();
        ws_unmask(b, n, f.mask, 0);
        if (memcmp(b, data + pos, n))
            abort();
        pos += n;
        if (f.opcode == WS_OP_CLOSE) {
            uint16_t code;
            int c = ws_close_parse(a, n, &code);
            if (c == 0 && code != WS_CLOSE_NO_STATUS && !ws_close_code_ok(code))
                abort();
        } else if (!(f.opcode & 8) && rx.opcode == WS_OP_TEXT) {
            uint8_t *m = realloc(msg, msg_len + n + 1);
            if (!m)
                abort();
            msg = m;
            memcpy(msg + msg_len, a, n);
            bool ok_piece = ws_utf8_feed(&utf8, a, n);
            msg_len += n;
            if (!ok_piece) {
                /* no valid UTF-8 string starts with these bytes */
                if (ws_utf8_valid(msg, msg_len))
                    abort();
                utf8 = (struct ws_utf8){0};
                msg_len = 0;
            } else if (f.fin) {
                if (ws_utf8_complete(&utf8) != ws_utf8_valid(msg, msg_len))
                    abort();
                utf8 = (struct ws_utf8){0};
                msg_len = 0;
            }
        }
        free(a);
        free(b);
    }
    free(msg);
    return 0;
}
