/* test_ws.c - the WebSocket pieces without a socket: SHA-1 and base64
 * against their RFCs' vectors, the Accept value of RFC 6455's example,
 * frame headers, the message rules, UTF-8, close payloads, masking, which
 * permessage-deflate offers are accepted, and inflating piece by piece. */
#include "test.h"

#include <stdlib.h>

#include "base/base64.h"
#include "base/common.h"
#include "base/sha1.h"
#include "http/ws_deflate.h"
#include "http/ws_frame.h"

static const char *hex(const uint8_t *p, size_t n)
{
    static char buf[128];
    for (size_t i = 0; i < n; i++)
        snprintf(buf + 2 * i, 3, "%02x", p[i]);
    return buf;
}

static const char *sha1_hex(const char *s, size_t n)
{
    uint8_t d[SHA1_LEN];
    sha1(s, n, d);
    return hex(d, SHA1_LEN);
}

TEST(sha1_vectors)
{
    /* FIPS 180 / RFC 3174 */
    CHECK_EQ_STR(sha1_hex("abc", 3), "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK_EQ_STR(sha1_hex("", 0), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK_EQ_STR(sha1_hex(two, strlen(two)), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* a million 'a', fed in uneven pieces */
    struct sha1 s;
    sha1_init(&s);
    char a[1000];
    memset(a, 'a', sizeof(a));
    size_t left = 1000000;
    for (size_t k = 1; left; k = k % 997 + 1) {
        size_t n = k < left ? k : left;
        sha1_update(&s, a, n);
        left -= n;
    }
    uint8_t d[SHA1_LEN];
    sha1_final(&s, d);
    CHECK_EQ_STR(hex(d, SHA1_LEN), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    /* lengths around the padding boundary */
    CHECK_EQ_STR(sha1_hex(a, 55), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
    CHECK_EQ_STR(sha1_hex(a, 56), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
    CHECK_EQ_STR(sha1_hex(a, 64), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

static const char *b64(const char *s)
{
    static char out[64];
    base64_encode(s, strlen(s), out);
    return out;
}

TEST(base64_vectors)
{
    /* RFC 4648 §10 */
    CHECK_EQ_STR(b64(""), "");
    CHECK_EQ_STR(b64("f"), "Zg==");
    CHECK_EQ_STR(b64("fo"), "Zm8=");
    CHECK_EQ_STR(b64("foo"), "Zm9v");
    CHECK_EQ_STR(b64("foob"), "Zm9vYg==");
    CHECK_EQ_STR(b64("fooba"), "Zm9vYmE=");
    CHECK_EQ_STR(b64("foobar"), "Zm9vYmFy");
    uint8_t out[32];
    CHECK_EQ_INT(base64_decode("Zm9vYmE=", 8, out), 5);
    CHECK(!memcmp(out, "fooba", 5));
    CHECK_EQ_INT(base64_decode("Zm9vYg==", 8, out), 4);
    CHECK_EQ_INT(base64_decode("Zm9vYmFy", 8, out), 6);
    CHECK_EQ_INT(base64_decode("Zm9vYh==", 8, out), -1); /* leftover bits */
    CHECK_EQ_INT(base64_decode("Zm9vYmF=", 8, out), -1);
    CHECK_EQ_INT(base64_decode("Zm9vYg=", 7, out), -1);
    CHECK_EQ_INT(base64_decode("Zm9v*g==", 8, out), -1);
    CHECK_EQ_INT(base64_decode("Zg==Zg==", 8, out), -1); /* padding inside */
    CHECK_EQ_INT(base64_decode("dGhlIHNhbXBsZSBub25jZQ==", 24, out), 16);
}

TEST(accept_example)
{
    /* RFC 6455 §1.3 */
    const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
    const char *guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    struct sha1 s;
    uint8_t d[SHA1_LEN];
    char out[32];
    sha1_init(&s);
    sha1_update(&s, key, strlen(key));
    sha1_update(&s, guid, strlen(guid));
    sha1_final(&s, d);
    base64_encode(d, SHA1_LEN, out);
    CHECK_EQ_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static ssize_t parse(const char *bytes, size_t n, bool mask, struct ws_frame *f)
{
    uint8_t *p = malloc(n ? n : 1); /* exactly n bytes, for ASan */
    memcpy(p, bytes, n);
    ssize_t r = ws_frame_parse(p, n, mask, f);
    free(p);
    return r;
}

TEST(frame_headers)
{
    struct ws_frame f;
    /* RFC 6455 §5.7: "Hello", unmasked and masked */
    CHECK_EQ_INT(parse("\x81\x05Hello", 7, false, &f), 2);
    CHECK(f.fin);
    CHECK_EQ_INT(f.opcode, WS_OP_TEXT);
    CHECK_EQ_INT(f.len, 5);
    CHECK(!f.masked);
    CHECK_EQ_INT(parse("\x81\x05Hello", 7, true, &f), -1002); /* clients must mask */
    const char masked[] = "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58";
    CHECK_EQ_INT(parse(masked, 11, true, &f), 6);
    uint8_t pl[5];
    memcpy(pl, masked + 6, 5);
    ws_unmask(pl, 5, f.mask, 0);
    CHECK(!memcmp(pl, "Hello", 5));
    /* fragments of "Hel" "lo" */
    CHECK_EQ_INT(parse("\x01\x03Hel", 5, false, &f), 2);
    CHECK(!f.fin);
    /* ping */
    CHECK_EQ_INT(parse("\x89\x05Hello", 7, false, &f), 2);
    CHECK_EQ_INT(f.opcode, WS_OP_PING);
    /* 256 bytes: 16-bit length; 64 KiB: 64-bit */
    CHECK_EQ_INT(parse("\x82\x7e\x01\x00", 4, false, &f), 4);
    CHECK_EQ_INT(f.len, 256);
    CHECK_EQ_INT(parse("\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10, false, &f), 10);
    CHECK_EQ_INT(f.len, 65536);
    /* incomplete headers want more */
    CHECK_EQ_INT(parse("\x82", 1, false, &f), 0);
    CHECK_EQ_INT(parse("\x82\x7e\x01", 3, false, &f), 0);
    CHECK_EQ_INT(parse("\x82\x7f\x00\x00\x00\x00\x00\x01\x00", 9, false, &f), 0);
    CHECK_EQ_INT(parse("\x82\x80\x01\x02\x03", 5, true, &f), 0);
    /* non-minimal lengths, the top bit of a 64-bit length */
    CHECK_EQ_INT(parse("\x82\x7e\x00\x7d", 4, false, &f), -1002);
    CHECK_EQ_INT(parse("\x82\x7f\x00\x00\x00\x00\x00\x00\xff\xff", 10, false, &f), -1002);
    CHECK_EQ_INT(parse("\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00", 10, false, &f), -1002);
    /* reserved opcodes */
    for (int op = 3; op <= 0xf; op++) {
        if (op >= 8 && op <= 0xa)
            continue;
        char b[2] = {(char)(0x80 | op), 0};
        CHECK_EQ_INT(parse(b, 2, false, &f), -1002);
    }
    /* control frames: not fragmented, at most 125 bytes */
    CHECK_EQ_INT(parse("\x09\x00", 2, false, &f), -1002);
    CHECK_EQ_INT(parse("\x88\x7e\x00\x7e", 4, false, &f), -1002);
    CHECK_EQ_INT(parse("\x8a\x7d", 2, false, &f), 2);
}

static struct ws_frame fr(bool fin, uint8_t rsv, uint8_t op)
{
    return (struct ws_frame){.fin = fin, .rsv = rsv, .opcode = op};
}

static int rx_step(struct ws_rx *rx, struct ws_frame f)
{
    return ws_rx_frame(rx, &f);
}

TEST(message_rules)
{
    struct ws_rx rx = {0};
    CHECK_EQ_INT(rx_step(&rx, fr(true, 0, WS_OP_CONT)), -1002); /* nothing to continue */
    CHECK_EQ_INT(rx_step(&rx, fr(false, 0, WS_OP_TEXT)), 0);
    CHECK(rx.in_message);
    CHECK_EQ_INT(rx_step(&rx, fr(true, 0, WS_OP_PING)), 0); /* between fragments */
    CHECK(rx.in_message);
    CHECK_EQ_INT(rx_step(&rx, fr(false, 0, WS_OP_BINARY)), -1002);
    CHECK_EQ_INT(rx_step(&rx, fr(false, 0, WS_OP_CONT)), 0);
    CHECK_EQ_INT(rx_step(&rx, fr(true, 0, WS_OP_CONT)), 0);
    CHECK(!rx.in_message);
    CHECK_EQ_INT(rx.opcode, WS_OP_TEXT);
    /* RSV bits */
    CHECK_EQ_INT(rx_step(&rx, fr(true, WS_RSV1, WS_OP_TEXT)), -1002);
    CHECK_EQ_INT(rx_step(&rx, fr(true, WS_RSV2, WS_OP_TEXT)), -1002);
    CHECK_EQ_INT(rx_step(&rx, fr(true, WS_RSV3, WS_OP_BINARY)), -1002);
    rx.deflate = true;
    CHECK_EQ_INT(rx_step(&rx, fr(false, WS_RSV1, WS_OP_TEXT)), 0);
    CHECK(rx.compressed);
    CHECK_EQ_INT(rx_step(&rx, fr(true, WS_RSV1, WS_OP_CONT)), -1002);
    rx = (struct ws_rx){.deflate = true};
    CHECK_EQ_INT(rx_step(&rx, fr(true, WS_RSV1, WS_OP_PING)), -1002);
    CHECK_EQ_INT(rx_step(&rx, fr(true, 0, WS_OP_BINARY)), 0);
    CHECK(!rx.compressed);
}

static bool utf8(const char *s)
{
    return ws_utf8_valid((const uint8_t *)s, strlen(s));
}

TEST(utf8_validation)
{
    CHECK(utf8(""));
    CHECK(utf8("hello, world: plain ASCII longer than eight bytes"));
    CHECK(utf8("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5")); /* κόσμε */
    CHECK(utf8("\xf0\x90\x80\x80"));                             /* U+10000 */
    CHECK(utf8("\xf4\x8f\xbf\xbf"));                             /* U+10FFFF */
    CHECK(utf8("\xed\x9f\xbf"));                                 /* U+D7FF */
    CHECK(utf8("\xee\x80\x80"));                                 /* U+E000 */
    CHECK(utf8("\xef\xbf\xbf"));                                 /* U+FFFF */
    CHECK(!utf8("\xc0\xaf"));                                    /* overlong '/' */
    CHECK(!utf8("\xc1\xbf"));
    CHECK(!utf8("\xe0\x80\xaf"));
    CHECK(!utf8("\xe0\x9f\xbf"));
    CHECK(!utf8("\xf0\x80\x80\xaf"));
    CHECK(!utf8("\xf0\x8f\xbf\xbf"));
    CHECK(!utf8("\xed\xa0\x80")); /* surrogates */
    CHECK(!utf8("\xed\xbf\xbf"));
    CHECK(!utf8("\xf4\x90\x80\x80")); /* above U+10FFFF */
    CHECK(!utf8("\xf5\x80\x80\x80"));
    CHECK(!utf8("\xff"));
    CHECK(!utf8("\x80"));             /* a lone continuation */
    CHECK(!utf8("\xce"));             /* cut short */
    CHECK(!utf8("abcdefgh\xce\x41")); /* a lead byte without continuation */
    /* fed in pieces: a character split anywhere */
    const char *s = "a\xf0\x9f\x98\x80z\xce\xba";
    for (size_t cut = 0; cut <= strlen(s); cut++) {
        struct ws_utf8 u = {0};
        CHECK(ws_utf8_feed(&u, (const uint8_t *)s, cut));
        CHECK(ws_utf8_feed(&u, (const uint8_t *)s + cut, strlen(s) - cut));
        CHECK(ws_utf8_complete(&u));
    }
    /* an invalid byte after a good prefix fails at once, mid-message */
    struct ws_utf8 u = {0};
    CHECK(ws_utf8_feed(&u, (const uint8_t *)"\xce", 1));
    CHECK(!ws_utf8_complete(&u));
    CHECK(!ws_utf8_feed(&u, (const uint8_t *)"A", 1));
}

TEST(close_payloads)
{
    uint16_t code = 0;
    CHECK_EQ_INT(ws_close_parse((const uint8_t *)"", 0, &code), 0);
    CHECK_EQ_INT(code, 1005);
    CHECK_EQ_INT(ws_close_parse((const uint8_t *)"\x03", 1, &code), -1002);
    CHECK_EQ_INT(ws_close_parse((const uint8_t *)"\x03\xe8", 2, &code), 0);
    CHECK_EQ_INT(code, 1000);
    CHECK_EQ_INT(ws_close_parse((const uint8_t *)"\x03\xe8"
                                                 "bye",
                                5, &code),
                 0);
    CHECK_EQ_INT(ws_close_parse((const uint8_t *)"\x03\xe8\xff", 3, &code), -1007);
    static const unsigned ok[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009,
                                  1010, 1011, 3000, 3999, 4000, 4999};
    static const unsigned bad[] = {0,    999,  1004, 1005, 1006, 1012, 1013, 1014,
                                   1015, 1016, 1100, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint8_t p[2] = {(uint8_t)(ok[i] >> 8), (uint8_t)ok[i]};
        CHECK_EQ_INT(ws_close_parse(p, 2, &code), 0);
        CHECK_EQ_INT(code, ok[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t p[2] = {(uint8_t)(bad[i] >> 8), (uint8_t)bad[i]};
        CHECK_EQ_INT(ws_close_parse(p, 2, &code), -1002);
    }
}

TEST(masking_and_heads)
{
    /* unmasking in pieces at any offset equals unmasking at once */
    uint8_t a[37], b[37], mask[4] = {0x12, 0x34, 0x56, 0x78};
    for (int i = 0; i < 37; i++)
        a[i] = b[i] = (uint8_t)(i * 7);
    ws_unmask(a, 37, mask, 0);
    ws_unmask(b, 5, mask, 0);
    ws_unmask(b + 5, 19, mask, 5);
    ws_unmask(b + 24, 13, mask, 24);
    CHECK(!memcmp(a, b, 37));
    for (int i = 0; i < 37; i++)
        CHECK_EQ_INT(a[i], (uint8_t)(i * 7) ^ mask[i & 3]);
    /* heads parse back */
    static const uint64_t lens[] = {0, 125, 126, 65535, 65536, 16u << 20};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t h[WS_FRAME_HDR_MAX];
        size_t n = ws_frame_head(h, true, WS_RSV1, WS_OP_BINARY, lens[i]);
        struct ws_frame f;
        CHECK_EQ_INT(ws_frame_parse(h, n, false, &f), (ssize_t)n);
        CHECK_EQ_INT(f.len, lens[i]);
        CHECK_EQ_INT(f.rsv, WS_RSV1);
        CHECK(f.fin);
    }
}

/* The answer to an offer, or NULL when it is declined. */
static const char *negotiated(const char *offer, struct ws_deflate *d)
{
    static char resp[WS_DEFLATE_RESPONSE_MAX];
    *d = (struct ws_deflate){0};
    return ws_deflate_negotiate(offer, strlen(offer), d, resp) ? resp : NULL;
}

TEST(deflate_offers)
{
    struct ws_deflate d;
    static const struct {
        const char *offer, *answer; /* NULL: declined */
    } cases[] = {
        {"permessage-deflate", "permessage-deflate"},
        {"PerMessage-Deflate", "permessage-deflate"},
        {"permessage-deflate; client_max_window_bits", "permessage-deflate"},
        {"permessage-deflate; client_max_window_bits=10", "permessage-deflate"},
        {"permessage-deflate; client_max_window_bits=\"12\"", "permessage-deflate"},
        {"permessage-deflate;client_max_window_bits = 8", "permessage-deflate"},
        {"permessage-deflate; server_no_context_takeover",
         "permessage-deflate; server_no_context_takeover"},
        {"permessage-deflate; client_no_context_takeover; server_no_context_takeover",
         "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
        {"permessage-deflate; server_max_window_bits=9",
         "permessage-deflate; server_max_window_bits=9"},
        {"permessage-deflate; server_max_window_bits=\"15\"",
         "permessage-deflate; server_max_window_bits=15"},
        {"permessage-deflate ;; server_max_window_bits = 10 ; ",
         "permessage-deflate; server_max_window_bits=10"},
        /* the first acceptable offer of a list wins; commas inside quotes
         * do not split it */
        {"x-webkit-deflate-frame, permessage-deflate", "permessage-deflate"},
        {"permessage-deflate; server_max_window_bits=8, permessage-deflate; "
         "client_no_context_takeover",
         "permessage-deflate; client_no_context_takeover"},
        {"permessage-deflate; x=\"a,b\", permessage-deflate", "permessage-deflate"},
        /* declined */
        {"", NULL},
        {"deflate-frame", NULL},
        {"permessage-deflatex", NULL},
        {"permessage-deflate x", NULL},
        {"permessage-deflate; unknown_param", NULL},
        {"permessage-deflate; server_no_context_takeover; server_no_context_takeover", NULL},
        {"permessage-deflate; server_no_context_takeover=1", NULL},
        {"permessage-deflate; client_no_context_takeover=\"\"", NULL},
        {"permessage-deflate; server_max_window_bits", NULL},
        {"permessage-deflate; server_max_window_bits=8", NULL},
        {"permessage-deflate; server_max_window_bits=16", NULL},
        {"permessage-deflate; server_max_window_bits=010", NULL},
        {"permessage-deflate; server_max_window_bits=", NULL},
        {"permessage-deflate; server_max_window_bits=\"10", NULL},
        {"permessage-deflate; server_max_window_bits=1 0", NULL},
        {"permessage-deflate; client_max_window_bits=7", NULL},
        {"permessage-deflate; client_max_window_bits; client_max_window_bits", NULL},
        {"permessage-deflate; =10", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = negotiated(cases[i].offer, &d);
        if (cases[i].answer)
            CHECK_EQ_STR(got, cases[i].answer);
        else if (got)
            CHECK_EQ_STR(cases[i].offer, "(declined)");
    }
    CHECK(negotiated("permessage-deflate; server_max_window_bits=11; "
                     "client_no_context_takeover",
                     &d));
    CHECK_EQ_INT(d.server_bits, 11);
    CHECK(d.client_no_context_takeover && !d.server_no_context_takeover);
}

/* A message compressed by the server's own side, inflated in pieces of
 * every size: the same bytes, and -1009 past the limit. */
TEST(deflate_inflate_in_pieces)
{
    struct ws_deflate d;
    CHECK(negotiated("permessage-deflate", &d));
    char text[5000];
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = "abcdefgh κόσμε"[i % 17];
    struct strbuf z = {0}, out = {0};
    CHECK_EQ_INT(ws_deflate_compress(&d, text, sizeof(text), &z), 0);
    for (size_t piece = 1; piece <= z.len; piece = piece * 3 + 1) {
        strbuf_reset(&out);
        for (size_t i = 0; i < z.len; i += piece)
            CHECK_EQ_INT(
                ws_deflate_inflate_piece(&d, z.buf + i, MIN(piece, z.len - i), 1 << 20, &out), 0);
        CHECK_EQ_INT(ws_deflate_inflate_end(&d, 1 << 20, &out), 0);
        CHECK_EQ_MEM(out.buf, out.len, text, sizeof(text));
        /* the compressor keeps its context: a fresh message for the next round */
        ws_deflate_free(&d);
        CHECK_EQ_INT(ws_deflate_compress(&d, text, sizeof(text), &z), 0);
    }
    strbuf_reset(&out);
    CHECK_EQ_INT(ws_deflate_inflate(&d, z.buf, z.len, 4999, &out), -WS_CLOSE_TOO_BIG);
    ws_deflate_free(&d);
    strbuf_free(&z);
    strbuf_free(&out);
}

int main(void)
{
    RUN(sha1_vectors);
    RUN(base64_vectors);
    RUN(accept_example);
    RUN(frame_headers);
    RUN(message_rules);
    RUN(utf8_validation);
    RUN(close_payloads);
    RUN(masking_and_heads);
    RUN(deflate_offers);
    RUN(deflate_inflate_in_pieces);
    return test_summary();
}
