/* fuzz_fastcgi.c - the gateway's FastCGI side (gateway/fcgi.h) on
 * arbitrary bytes: what a FastCGI responder could send, and params of any
 * size going the other way.
 *
 * What must hold:
 *  - records are read within the input (a header says its length; a
 *    record cut short is never read past the end);
 *  - the CGI head of the STDOUT stream parses to -EBADMSG, -EMSGSIZE, 0 or
 *    a length within what was gathered, with a status of 200-599, and the
 *    fields passed on hold no Status, Content-Length or hop-by-hop field,
 *    every line ending in CRLF;
 *  - params made from the input (pairs cut from it) come back byte for byte
 *    from their records, every record at most 65535 bytes of content, 8-byte
 *    aligned, and the stream ends with an empty record. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/fcgi.h"
#include "gateway/uphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool bad_out(struct view name, struct view value, void *arg)
{
    (void)value;
    static const char *const never[] = {"status", "content-length", "connection",
                                        "transfer-encoding", "keep-alive"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (name.len == strlen(never[i]) && mem_case_eq(name.p, never[i], name.len))
            *(bool *)arg = true;
    return true;
}

static void records(const uint8_t *data, size_t size)
{
    struct strbuf out = {0};
    size_t pos = 0;
    while (size - pos >= FCGI_HEADER_LEN) {
        struct fcgi_rec r;
        if (fcgi_parse_header(data + pos, &r))
            break;
        size_t whole = FCGI_HEADER_LEN + r.len + r.pad;
        if (whole > size - pos)
            break;
        if (r.type == FCGI_STDOUT && strbuf_append(&out, data + pos + FCGI_HEADER_LEN, r.len))
            abort();
        pos += whole;
    }
    char *copy = malloc(out.len ? out.len : 1); /* exactly: ASan sees over-reads */
    if (!copy)
        abort();
    if (out.len)
        memcpy(copy, out.buf, out.len);
    struct cgi_head h;
    ssize_t hl = cgi_parse_head(copy, out.len, 32768, &h);
    if (hl != -EBADMSG && hl != -EMSGSIZE && hl != 0 && !(hl > 0 && (size_t)hl <= out.len))
        abort();
    if (hl > 0) {
        if (h.status < 200 || h.status > 599)
            abort();
        struct strbuf f = {0};
        if (!cgi_answer_fields(&f, &h)) {
            bool bad = false;
            gw_fields_each((struct view){f.buf, f.len}, bad_out, &bad);
            if (bad || (f.len && memcmp(f.buf + f.len - 2, "\r\n", 2)))
                abort();
        }
        strbuf_free(&f);
    }
    free(copy);
    strbuf_free(&out);
}

static void params(const uint8_t *data, size_t size)
{
    /* pairs cut from the input: each byte's value says a name's length */
    struct strbuf pairs = {0}, recs = {0}, back = {0};
    size_t pos = 0;
    while (pos < size) {
        size_t nl = data[pos] % 16, vl = (size_t)data[pos] * 331 % 70001;
        pos++;
        nl = nl < size - pos ? nl : size - pos;
        if (fcgi_pair(&pairs, (const char *)data + pos, nl, (const char *)data, MIN(vl, size)))
            abort();
        pos += nl;
    }
    if (fcgi_params(&recs, 1, pairs.buf ? pairs.buf : "", pairs.len))
        abort();
    bool ended = false;
    for (size_t at = 0; at < recs.len;) {
        struct fcgi_rec r;
        if (ended || recs.len - at < FCGI_HEADER_LEN ||
            fcgi_parse_header((unsigned char *)recs.buf + at, &r) || r.type != FCGI_PARAMS ||
            (r.len + r.pad) % 8 || recs.len - at < (size_t)FCGI_HEADER_LEN + r.len + r.pad)
            abort();
        if (strbuf_append(&back, recs.buf + at + FCGI_HEADER_LEN, r.len))
            abort();
        ended = r.len == 0;
        at += FCGI_HEADER_LEN + r.len + r.pad;
    }
    if (!ended || back.len != pairs.len || (back.len && memcmp(back.buf, pairs.buf, back.len)))
        abort();
    strbuf_free(&pairs);
    strbuf_free(&recs);
    strbuf_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    records(data, size);
    params(data, size < 4096 ? size : 4096);
    return 0;
}
