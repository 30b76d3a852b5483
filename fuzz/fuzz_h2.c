/* fuzz_h2.c - the server side of an HTTP/2 connection on arbitrary frames:
 * the nghttp2 session with colibri's callbacks (http2/h2.c), memory in and
 * memory out, and every stream whose head came built as a request head
 * (h2_build_head, http2/stream.c), without running handlers.
 *
 * The input follows the client preface (added here, so the frames are
 * reached). What must hold:
 *  - nothing crashes, leaks or reads out of bounds (ASan);
 *  - what the session answers is whole frames (each header's length
 *    fits in what was sent);
 *  - a head built without a status has a method, and a path that begins
 *    with '/' (or is "*" for OPTIONS) and is the target's prefix; its
 *    field block is empty or ends with CRLF, and every view lies in the
 *    arena's copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"
#include "http2/h2.h"
#include "http2/stream.h"

static bool inside(struct view v, const char *lo, const char *hi)
{
    return !v.len || (v.p >= lo && v.p + v.len <= hi);
}

static void check_head(struct h2_stream *st)
{
    struct arena ar = {0};
    struct http_head h;
    int status = h2_build_head(st, &ar, &h);
    if (!status) {
        if (!h.method_str.len || !h.target.len || !h.path.len)
            abort();
        if (h.path.p != h.target.p || h.path.len > h.target.len)
            abort();
        if (h.path.p[0] != '/' && !(h.path.len == 1 && h.path.p[0] == '*'))
            abort();
        if (h.headers.len &&
            (h.headers.len < 2 || memcmp(h.headers.p + h.headers.len - 2, "\r\n", 2)))
            abort();
        /* the views are one block's: the pseudo-fields' copy, then the
         * field lines */
        const char *lo = h.headers.p - st->pseudo.len, *hi = h.headers.p + h.headers.len;
        if (!inside(h.method_str, lo, hi) || !inside(h.target, lo, hi) ||
            !inside(h.query, lo, hi) || !inside(h.host, lo, hi))
            abort();
        struct view v;
        http_header_find(h.headers, "content-type", 12, &v);
    } else if (status != 400 && status != 414 && status != 431 && status != 501 && status != 500) {
        abort();
    }
    arena_free(&ar);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_config cfg;
    static struct http_worker hw;
    static struct conn_worker cw;
    static struct conn_ctx *ctx;
    if (!ctx) {
        cfg.limits = HTTP_LIMITS_DEFAULT;
        cfg.h2_max_streams = 128;
        cfg.h2_window = 1 << 20;
        hw.cfg = &cfg;
        cw.proto_state = &hw;
        ctx = calloc(1, sizeof(*ctx));
        ctx->worker = (struct worker *)(void *)&cw; /* conn_worker_state() reads its view */
    }
    struct h2_conn c = {.ctx = ctx, .cfg = &cfg, .kept.provoked_tokens = 200};
    if (!(c.s = h2_session_new(&c)))
        return 0;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 128}};
    nghttp2_submit_settings(c.s, NGHTTP2_FLAG_NONE, iv, 1);
    uint8_t *in = malloc(H2_PREFACE_LEN + size);
    if (!in)
        abort();
    memcpy(in, H2_PREFACE, H2_PREFACE_LEN);
    if (size)
        memcpy(in + H2_PREFACE_LEN, data, size);
    /* in two pieces, as reads may cut it */
    size_t cut = H2_PREFACE_LEN + size / 2;
    if (nghttp2_session_mem_recv(c.s, in, cut) >= 0)
        nghttp2_session_mem_recv(c.s, in + cut, H2_PREFACE_LEN + size - cut);
    free(in);
    for (struct h2_stream *st = c.streams; st; st = st->next)
        if (st->head_done)
            check_head(st);
    /* what the session answers: whole frames */
    for (int i = 0; i < 64; i++) {
        const uint8_t *out;
        ssize_t n = nghttp2_session_mem_send(c.s, &out);
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            if (n - off < 9)
                abort();
            off += 9 + ((size_t)out[off] << 16 | (size_t)out[off + 1] << 8 | out[off + 2]);
            if (off > n)
                abort();
        }
    }
    while (c.streams)
        h2_stream_free(c.streams);
    nghttp2_session_del(c.s);
    h2_heap_release(&c.heap);
    return 0;
}
