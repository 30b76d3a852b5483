/* fuzz_multipart.c - the multipart/form-data parser (http/multipart.h) on
 * arbitrary bytes.
 *
 * The input's first line is a Content-Type value, the rest the body. What
 * must hold:
 *  - mp_boundary() accepts only 1 to 70 bchars, not ending in a space;
 *  - each call consumes at most what it was given, MP_MORE only after
 *    consuming everything, MP_DATA only inside a part and never empty, its
 *    bytes inside the piece given or inside the parser;
 *  - parts never outnumber max_parts, each part has a name and a type, and
 *    ends (MP_PART_END) before the next begins;
 *  - the content never outgrows the body;
 *  - the body fed whole, byte by byte, or in pieces of another size gives
 *    the same events, the same data and the same verdict. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/multipart.h"

#define MAX_PARTS 8

/* the events in order; the data of consecutive MP_DATA events merged
 * (where a run of data is cut differs from one way of feeding to another) */
struct out {
    uint8_t *buf;
    size_t len, cap;
    bool in_data;
};

static void put(struct out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 64;
        o->buf = realloc(o->buf, o->cap);
        if (!o->buf)
            abort();
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static struct mp_parser parser;

static void run(const char *b, size_t blen, const uint8_t *body, size_t len, size_t step,
                struct out *o)
{
    struct mp_parser *p = &parser;
    mp_init(p, b, blen, MAX_PARTS);
    bool in_part = false, err = false, done = false;
    unsigned parts = 0;
    size_t data = 0;
    for (size_t off = 0; off < len && !err;) {
        size_t n = step && step < len - off ? step : len - off;
        uint8_t *piece = malloc(n); /* exactly n bytes: ASan sees over-reads */
        if (!piece)
            abort();
        memcpy(piece, body + off, n);
        const char *at = (const char *)piece;
        size_t left = n;
        while (left && !err) {
            struct mp_event ev;
            size_t used = mp_feed(p, at, left, &ev);
            if (used > left)
                abort();
            at += used;
            left -= used;
            switch (ev.type) {
            case MP_MORE:
                if (left)
                    abort();
                continue; /* a run of data goes on across pieces */
            case MP_PART:
                if (in_part || done || ++parts > MAX_PARTS || !p->name || !p->content_type)
                    abort();
                in_part = true;
                put(o, "P", 1);
                put(o, p->name, strlen(p->name) + 1);
                if (p->filename)
                    put(o, p->filename, strlen(p->filename) + 1);
                put(o, p->content_type, strlen(p->content_type) + 1);
                break;
            case MP_DATA:
                if (!in_part || !ev.len)
                    abort();
                if (!((ev.data >= (const char *)piece &&
                       ev.data + ev.len <= (const char *)piece + n) ||
                      (ev.data >= p->delim && ev.data + ev.len <= p->delim + sizeof(p->delim))))
                    abort();
                data += ev.len;
                if (data > len)
                    abort();
                if (!o->in_data)
                    put(o, "d", 1);
                put(o, ev.data, ev.len);
                o->in_data = true;
                continue;
                break;
            case MP_PART_END:
                if (!in_part)
                    abort();
                in_part = false;
                put(o, "E", 1);
                break;
            case MP_DONE:
                if (in_part)
                    abort();
                if (!done)
                    put(o, "D", 1);
                done = true;
                break;
            case MP_ERROR:
                if (!p->error)
                    abort();
                err = true;
                put(o, "X", 1);
                break;
            default:
                abort();
            }
            o->in_data = false;
        }
        free(piece);
        off += n;
    }
    int fin = err ? -1 : mp_finish(p);
    if ((fin == 0) != (done && !err))
        abort();
    put(o, fin == 0 ? "ok" : "no", 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl)
        return 0;
    struct view ct = {(const char *)data, (size_t)(nl - data)};
    char b[MP_BOUNDARY_MAX + 1];
    size_t blen;
    if (mp_boundary(ct, b, &blen) != 0)
        return 0;
    if (blen < 1 || blen > MP_BOUNDARY_MAX || b[blen - 1] == ' ' || strlen(b) != blen)
        abort();
    for (size_t i = 0; i < blen; i++)
        if (b[i] == '\r' || b[i] == '\n' || b[i] == '"' || b[i] == ';')
            abort();
    const uint8_t *body = nl + 1;
    size_t len = size - (size_t)(body - data);
    struct out whole = {0}, bytes = {0}, pieces = {0};
    run(b, blen, body, len, 0, &whole);
    run(b, blen, body, len, 1, &bytes);
    run(b, blen, body, len, len % 13 + 2, &pieces);
    if (whole.len != bytes.len || memcmp(whole.buf, bytes.buf, whole.len) ||
        whole.len != pieces.len || memcmp(whole.buf, pieces.buf, whole.len))
        abort();
    free(whole.buf);
    free(bytes.buf);
    free(pieces.buf);
    return 0;
}
